import { describe, expect, it } from "vitest";
import { FreeQueue } from "./free-queue.js";

describe("FreeQueue (vllm-rules T23)", () => {
  it("popleft, remove from the middle, append: [0..4] -> 1,3,4,2", () => {
    const q = new FreeQueue(5, [0, 1, 2, 3, 4]);
    expect(q.popFront()).toBe(0);
    q.remove(2);
    q.pushBack(2);
    expect(q.toArray()).toEqual([1, 3, 4, 2]);
    expect(q.length).toBe(4);
  });

  it("popleft_n keeps queue order", () => {
    // [0..5], remove 1 and 4 -> [0,2,3,5]; popping 3 gives 0,2,3 and leaves [5].
    const q = new FreeQueue(6, [0, 1, 2, 3, 4, 5]);
    q.remove(1);
    q.remove(4);
    expect(q.popFrontN(3)).toEqual([0, 2, 3]);
    expect(q.toArray()).toEqual([5]);
  });

  it("prependAll puts the first id at the front, keeping order", () => {
    const q = new FreeQueue(6, [4, 5]);
    q.prependAll([2, 0, 1]);
    expect(q.toArray()).toEqual([2, 0, 1, 4, 5]);
  });

  it("refuses double insertion, removal of an absent id and popping an empty queue", () => {
    const q = new FreeQueue(3, [1]);
    expect(() => { q.pushBack(1); }).toThrow();
    expect(() => { q.remove(2); }).toThrow();
    q.popFront();
    expect(() => q.popFront()).toThrow();
  });
});

describe("FreeQueue with an untouched range (ids never taken are not stored)", () => {
  it("queues front ++ [from, capacity) ++ back, pops in that order", () => {
    const q = new FreeQueue(8, [], 5); // holds 5, 6, 7 implicitly
    q.pushFront(1);
    q.pushBack(2);
    q.pushFrontAfter(1, 3); // front part 1, 3
    expect(q.toArray()).toEqual([1, 3, 5, 6, 7, 2]);
    expect(q.length).toBe(6);
    expect([q.has(6), q.has(4)]).toEqual([true, false]);
    expect([q.popFront(), q.popFront(), q.popFront(), q.popFront()]).toEqual([1, 3, 5, 6]);
    expect(q.toArray()).toEqual([7, 2]);
  });

  it("removing an id inside the range keeps every other id where it was", () => {
    const q = new FreeQueue(10, [], 2); // 2..9
    q.pushFront(1);
    q.pushBack(0);
    q.remove(5);
    expect(q.toArray()).toEqual([1, 2, 3, 4, 6, 7, 8, 9, 0]);
    expect(() => {
      q.pushBack(7);
    }).toThrow(/already/);
    q.pushBack(5);
    expect(q.toArray()).toEqual([1, 2, 3, 4, 6, 7, 8, 9, 0, 5]);
  });

  it("a queue of 2^31 - 2 ids stores only the ids it has seen", () => {
    const q = new FreeQueue(2 ** 31 - 2, [], 1);
    expect(q.length).toBe(2 ** 31 - 3);
    expect([q.popFront(), q.popFront()]).toEqual([1, 2]);
    q.pushBack(1);
    expect(q.peekFront()).toBe(3);
  });
});
