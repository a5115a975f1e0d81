import { describe, expect, it } from "vitest";
import { BlockRecords, QPOS, STRIDE } from "./block-records.js";
import { FreeQueueRing } from "./free-queue-ring.js";

const BASE = 1000;

function ringOf(pages: number, sign: number): { rec: BlockRecords; ring: FreeQueueRing } {
  const rec = new BlockRecords(pages);
  return { rec, ring: new FreeQueueRing(rec, BASE, sign) };
}

const live = (ring: FreeQueueRing): number[] => {
  const out: number[] = [];
  ring.appendLive(out);
  return out;
};

describe("FreeQueueRing", () => {
  it("keeps pushes at both ends in order and names each entry's position in its block's QPOS word", () => {
    const { rec, ring } = ringOf(16, -1);
    ring.pushTail(3); // position 1000
    ring.pushTail(4); // 1001
    ring.pushHead(5); // 999
    expect(live(ring)).toEqual([5, 3, 4]);
    expect(ring.live).toBe(3);
    expect([rec.word(5, QPOS), rec.word(3, QPOS), rec.word(4, QPOS)]).toEqual([-999, -1000, -1001]);
  });

  it("removes from the middle lazily: the entry stays but no longer counts", () => {
    const { rec, ring } = ringOf(16, 1);
    for (const id of [1, 2, 3]) ring.pushTail(id);
    ring.remove(2);
    expect(rec.word(2, QPOS)).toBe(0);
    expect(ring.live).toBe(2);
    expect(live(ring)).toEqual([1, 3]);
    // Queued again: at the tail, its old entry stays stale.
    ring.pushTail(2);
    expect(live(ring)).toEqual([1, 3, 2]);
    const out = new Int32Array(5);
    expect(ring.popInto(5, out, 1)).toBe(3);
    expect([...out]).toEqual([0, 1, 3, 2, 0]);
    expect([rec.word(1, QPOS), rec.word(2, QPOS), rec.word(3, QPOS)]).toEqual([0, 0, 0]);
    expect(ring.live).toBe(0);
  });

  it("pops only the count asked for, and pops on from there", () => {
    const { ring } = ringOf(16, 1);
    for (const id of [6, 7, 8]) ring.pushTail(id);
    const out = new Int32Array(3);
    expect(ring.popInto(2, out, 0)).toBe(2);
    expect(ring.popInto(2, out, 2)).toBe(1);
    expect([...out]).toEqual([6, 7, 8]);
  });

  it("rebuilds when full: stale entries dropped, live ones renumbered from the base in order", () => {
    const { rec, ring } = ringOf(64, 1);
    // 8 slots: 1..8 fill them, 2 and 5 leave stale entries; the 9th push rebuilds (6 live, 8 slots kept: 2 x 6 + 2 > 8 -> 16).
    for (let id = 1; id <= 8; id++) ring.pushTail(id);
    ring.remove(2);
    ring.remove(5);
    ring.pushTail(9);
    expect(live(ring)).toEqual([1, 3, 4, 6, 7, 8, 9]);
    expect(ring.size).toBe(16);
    expect([rec.word(1, QPOS), rec.word(8, QPOS), rec.word(9, QPOS)]).toEqual([BASE, BASE + 5, BASE + 6]);
    expect(rec.words[2 * STRIDE + QPOS]).toBe(0);
  });

  it("stays at its size when stale entries make it full (at most twice its live entries, plus 2)", () => {
    const { ring } = ringOf(64, -1);
    for (let round = 0; round < 1000; round++) {
      ring.pushHead(1);
      ring.pushHead(2);
      ring.remove(1);
      ring.remove(2);
    }
    expect(ring.live).toBe(0);
    expect(ring.size).toBe(8);
  });

  it("prefetch reads the QPOS words of the next entries and changes nothing", () => {
    const { rec, ring } = ringOf(16, 1);
    ring.pushTail(4); // position 1000
    ring.pushTail(5); // 1001
    const before = [...rec.words];
    expect(ring.prefetch(1)).toBe(BASE);
    expect(ring.prefetch(9)).toBe(BASE ^ (BASE + 1));
    expect([...rec.words]).toEqual(before);
  });
});
