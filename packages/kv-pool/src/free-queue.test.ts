import { describe, expect, it } from "vitest";
import { BlockRecords } from "./block-records.js";
import { FreeQueue } from "./free-queue.js";

function queueOf(pages: number): { rec: BlockRecords; q: FreeQueue } {
  const rec = new BlockRecords(pages);
  return { rec, q: new FreeQueue(rec, pages) };
}

function pop(q: FreeQueue, n: number): number[] {
  const out = new Int32Array(n);
  q.popInto(n, out, 0);
  return [...out];
}

describe("FreeQueue", () => {
  it("starts with every usable block in id order, without entries (the untouched range)", () => {
    const { q } = queueOf(6);
    expect(q.numFree).toBe(5);
    expect(q.order()).toEqual([1, 2, 3, 4, 5]);
    expect([0, 1, 5, 6].map((id) => q.has(id))).toEqual([false, true, true, false]);
    expect(q.ringSizes).toEqual({ front: 8, back: 8 });
  });

  it("pops the front part, then the untouched range, then the back part", () => {
    const { q } = queueOf(8);
    expect(pop(q, 4)).toEqual([1, 2, 3, 4]);
    q.pushBack(2);
    q.pushFresh(3);
    q.pushFresh(1);
    q.flushFresh();
    // A free call's fresh blocks go to the very front in their order; cached ones to the back.
    expect(q.order()).toEqual([3, 1, 5, 6, 7, 2]);
    expect(q.numFree).toBe(6);
    expect(pop(q, 6)).toEqual([3, 1, 5, 6, 7, 2]);
    expect(q.numFree).toBe(0);
  });

  it("puts each free call's fresh blocks in front of the earlier ones", () => {
    const { q } = queueOf(8);
    pop(q, 4);
    q.pushFresh(1);
    q.pushFresh(2);
    q.flushFresh();
    q.pushFresh(4);
    q.pushFresh(3);
    q.flushFresh();
    expect(q.order()).toEqual([4, 3, 1, 2, 5, 6, 7]);
  });

  it("gives records to untouched blocks as it pops them", () => {
    const { rec, q } = queueOf(1000);
    expect(rec.cap).toBe(256);
    // Blocks 1..255 have records already: none grows.
    expect(pop(q, 255).at(-1)).toBe(255);
    expect(rec.cap).toBe(256);
    expect(pop(q, 45).at(-1)).toBe(300);
    expect(rec.cap).toBe(512);
  });

  it("removes from either ring and from the untouched range (the range before it moves to the front part's end)", () => {
    const { rec, q } = queueOf(2000);
    pop(q, 3);
    q.pushBack(1);
    q.pushFresh(2);
    q.flushFresh();
    q.remove(1);
    q.remove(2);
    expect(q.order().slice(0, 3)).toEqual([4, 5, 6]);
    q.remove(1500);
    expect(rec.cap).toBe(2000);
    expect(q.has(1500)).toBe(false);
    expect(q.numFree).toBe(2000 - 1 - 4);
    const order = q.order();
    expect(order.slice(0, 3)).toEqual([4, 5, 6]);
    expect(order.slice(1495, 1498)).toEqual([1499, 1501, 1502]);
    expect(pop(q, 1498).slice(-3)).toEqual([1499, 1501, 1502]);
  });

  it("refuses to queue a block twice, the null block and ids past the pool", () => {
    const { q } = queueOf(6);
    pop(q, 2);
    q.pushBack(1);
    expect(() => {
      q.pushBack(1);
    }).toThrow("pool invariant: block 1 is already in the free queue");
    expect(() => {
      q.pushBack(3);
    }).toThrow("pool invariant: block 3 is already in the free queue");
    expect(() => {
      q.pushBack(0);
    }).toThrow("block id 0 outside 1..5");
    expect(() => {
      q.pushBack(6);
    }).toThrow("block id 6 outside 1..5");
    expect(() => {
      q.pushBack(1.5);
    }).toThrow("block id 1.5 outside 1..5");
    q.pushFresh(1);
    expect(() => {
      q.flushFresh();
    }).toThrow("pool invariant: block 1 is already in the free queue");
    expect(() => {
      q.remove(2);
    }).toThrow("pool invariant: block 2 is not in the free queue");
  });

  it("grows a free call's batch past 64 blocks, keeping its order", () => {
    const { q } = queueOf(200);
    const taken = pop(q, 150);
    for (const id of taken) q.pushFresh(id);
    q.flushFresh();
    expect(q.order().slice(0, 150)).toEqual(taken);
  });
});
