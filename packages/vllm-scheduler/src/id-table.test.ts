import { describe, expect, it } from "vitest";
import { IdTable, hashId } from "./id-table.js";

/** The first `n` ids "k0", "k1", ... whose home slot in a table of `slots` slots is `slot`. */
function idsAt(slot: number, slots: number, n: number, skip: readonly string[] = []): string[] {
  const out: string[] = [];
  for (let i = 0; out.length < n; i++) {
    const id = `k${i}`;
    if ((hashId(id) & (slots - 1)) === slot && !skip.includes(id)) out.push(id);
  }
  return out;
}

describe("IdTable", () => {
  it("gets, replaces and deletes like a Map", () => {
    const t = new IdTable<number>();
    t.set("a", 1);
    t.set("b", 2);
    t.set("a", 3); // a replaced value keeps its place
    expect(t.size).toBe(2);
    expect(t.get("a")).toBe(3);
    expect(t.has("b")).toBe(true);
    expect(t.get("c")).toBeUndefined();
    expect(t.has("c")).toBe(false);
    expect(t.values()).toEqual([3, 2]);
    expect(t.delete("a")).toBe(true);
    expect(t.delete("a")).toBe(false);
    t.set("a", 4); // back at the end
    expect(t.values()).toEqual([2, 4]);
    expect(t.size).toBe(2);
  });

  it("finds every entry of a probe run that wraps past the last slot after a delete at its start", () => {
    // 8 slots (room for 4). a and b start at slot 6, c at 7, d at 0: stored at 6, 7, 0 (wrapped), 1.
    const [a, b] = idsAt(6, 8, 2);
    const [c] = idsAt(7, 8, 1);
    const [d] = idsAt(0, 8, 1);
    const t = new IdTable<string>(4);
    for (const id of [a!, b!, c!, d!]) t.set(id, id.toUpperCase());
    // Deleting a moves b to 6, c to 7 (across the wrap) and d to 0: each stays reachable from its start.
    expect(t.delete(a!)).toBe(true);
    expect([t.get(b!), t.get(c!), t.get(d!), t.get(a!)]).toEqual([b!.toUpperCase(), c!.toUpperCase(), d!.toUpperCase(), undefined]);
    // An id that starts at 6 but was never added probes 6, 7, 0 and stops at the empty slot 1.
    const [absent] = idsAt(6, 8, 1, [a!, b!]);
    expect(t.has(absent!)).toBe(false);
    // Deleting c (now at 7, its start) leaves d at 0, its own start.
    expect(t.delete(c!)).toBe(true);
    expect([t.get(b!), t.get(d!)]).toEqual([b!.toUpperCase(), d!.toUpperCase()]);
    // d sits in slot 0 now: found by `has` too.
    expect(t.has(d!)).toBe(true);
    expect(t.values()).toEqual([b!.toUpperCase(), d!.toUpperCase()]);
    expect(t.size).toBe(2);
  });

  it("moves an entry that wrapped past the last slot back into a hole before it", () => {
    // 8 slots: a, b and c all start at 7: stored at 7, 0 and 1. Deleting b (slot 0) must move c
    // from 1 to 0: its lookup runs 7, 0, 1, and would stop at an empty slot 0.
    const [a, b, c] = idsAt(7, 8, 3);
    const t = new IdTable<number>(4);
    t.set(a!, 1);
    t.set(b!, 2);
    t.set(c!, 3);
    expect(t.delete(b!)).toBe(true);
    expect([t.get(a!), t.get(b!), t.get(c!)]).toEqual([1, undefined, 3]);
    expect(t.delete(a!)).toBe(true);
    expect([t.get(c!), t.size]).toEqual([3, 1]);
  });

  it("tells apart two ids whose hashes are equal", () => {
    // The first two of "c0", "c1", ... with the same 32-bit hash (found by search, birthday-bound).
    const seen = new Map<number, string>();
    let pair: [string, string] | undefined;
    for (let i = 0; pair === undefined; i++) {
      const id = `c${i}`;
      const other = seen.get(hashId(id));
      if (other !== undefined) pair = [other, id];
      else seen.set(hashId(id), id);
    }
    const [x, y] = pair;
    expect(hashId(x)).toBe(hashId(y));
    const t = new IdTable<string>();
    t.set(x, "x");
    expect([t.get(y), t.has(y)]).toEqual([undefined, false]);
    t.set(y, "y");
    expect([t.get(x), t.get(y), t.size]).toEqual(["x", "y", 2]);
    expect(t.delete(x)).toBe(true);
    expect([t.get(x), t.get(y), t.has(y)]).toEqual([undefined, "y", true]);
  });

  it("leaves an entry at its own start when the hole is before that start", () => {
    // 8 slots: a starts at 2, b at 3; deleting a must not move b to slot 2 (a lookup of b starts at 3).
    const [a] = idsAt(2, 8, 1);
    const [b] = idsAt(3, 8, 1);
    const t = new IdTable<number>(4);
    t.set(a!, 1);
    t.set(b!, 2);
    t.delete(a!);
    expect(t.get(b!)).toBe(2);
    t.delete(b!);
    expect(t.size).toBe(0);
    expect(t.values()).toEqual([]);
  });

  it("keeps entries and their insertion order when it grows", () => {
    const t = new IdTable<number>(2); // 4 slots: the third entry doubles them
    for (let i = 0; i < 10; i++) t.set(`r${i}`, i);
    t.delete("r3");
    for (let i = 0; i < 10; i++) expect(t.get(`r${i}`)).toBe(i === 3 ? undefined : i);
    expect(t.values()).toEqual([0, 1, 2, 4, 5, 6, 7, 8, 9]);
    expect(t.size).toBe(9);
  });
});
