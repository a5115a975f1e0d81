import { describe, expect, it } from "vitest";
import { Deque } from "./deque.js";

describe("Deque", () => {
  it("keeps order at both ends across growth", () => {
    const d = new Deque<number>(2);
    d.pushBack(1);
    d.pushBack(2);
    d.pushFront(0); // grows from 2 to 4 slots
    d.pushBack(3);
    d.pushFront(-1); // grows to 8 with head wrapped
    expect([...d]).toEqual([-1, 0, 1, 2, 3]);
    expect(d.length).toBe(5);
    expect(d.popFront()).toBe(-1);
    expect(d.peekFront()).toBe(0);
    expect([...d]).toEqual([0, 1, 2, 3]);
  });

  it("is empty after popping everything", () => {
    const d = new Deque<string>();
    d.pushBack("a");
    expect(d.popFront()).toBe("a");
    expect(d.popFront()).toBeUndefined();
    expect(d.peekFront()).toBeUndefined();
    expect(d.length).toBe(0);
  });

  it("preempted requests pushed to the front keep their relative order (docs/rules/vllm-scheduling.md §1.3)", () => {
    // running [A, B, C] loses C then B: waiting becomes [B, C, X].
    const waiting = new Deque<string>();
    waiting.pushBack("X");
    waiting.pushFront("C");
    waiting.pushFront("B");
    expect([...waiting]).toEqual(["B", "C", "X"]);
  });

  it("grows only when full, at either end", () => {
    // Capacity 2, 40 pushes at the back: full at 2, 4, 8, 16, 32, so the buffer doubles 5 times to
    // 64 slots (growing on every push instead would pass 2^32 slots and throw; never growing would
    // overwrite).
    const back = new Deque<number>(2);
    for (let i = 0; i < 40; i++) back.pushBack(i);
    expect([...back]).toEqual(Array.from({ length: 40 }, (_, i) => i));
    // The same at the front: the last pushed comes first.
    const front = new Deque<number>(2);
    for (let i = 0; i < 40; i++) front.pushFront(i);
    expect([...front]).toEqual(Array.from({ length: 40 }, (_, i) => 39 - i));
    expect([front.popFront(), back.popFront(), front.length, back.length]).toEqual([39, 0, 39, 39]);
  });
});
