import { describe, expect, it } from "vitest";
import { BlockHashTable } from "./block-hash-table.js";

describe("BlockHashTable", () => {
  it("sizes its capacity to the next power of two >= 2 x maxEntries", () => {
    // 2 x 5 = 10 -> 16; 2 x 8 = 16 -> 16; 2 x 9 = 18 -> 32; 2 x 1 = 2 -> the minimum 4.
    expect(new BlockHashTable(5).capacity).toBe(16);
    expect(new BlockHashTable(8).capacity).toBe(16);
    expect(new BlockHashTable(9).capacity).toBe(32);
    expect(new BlockHashTable(1).capacity).toBe(4);
  });

  it("gets what was set, overwrites in place and answers -1 for absent keys", () => {
    const t = new BlockHashTable(4);
    t.set(0, 0xdead_beef, 0x1234_5678, 7);
    t.set(1, 0xdead_beef, 0x1234_5678, 9); // same hash, another group: another key
    expect(t.get(0, 0xdead_beef, 0x1234_5678)).toBe(7);
    expect(t.get(1, 0xdead_beef, 0x1234_5678)).toBe(9);
    expect(t.get(0, 0xdead_beee, 0x1234_5678)).toBe(-1); // high half differs
    expect(t.get(0, 0xdead_beef, 0x1234_5679)).toBe(-1); // low half differs
    t.set(0, 0xdead_beef, 0x1234_5678, 8);
    expect(t.get(0, 0xdead_beef, 0x1234_5678)).toBe(8);
    expect(t.size).toBe(2);
  });

  it("home slot is (lo XOR group) mod capacity", () => {
    const t = new BlockHashTable(8); // capacity 16, mask 15
    // 0x1234_5678 & 15 = 8; XOR group 3 -> 0x...7b & 15 = 11; 0xffff_ffff & 15 = 15, XOR 1 -> 14.
    expect(t.homeSlot(0, 0x1234_5678)).toBe(8);
    expect(t.homeSlot(3, 0x1234_5678)).toBe(11);
    expect(t.homeSlot(1, 0xffff_ffff)).toBe(14);
  });

  it("keys differing only in their high half share a probe run; each stays reachable", () => {
    const t = new BlockHashTable(8); // capacity 16
    // lo = 5, group 0: all five start probing at slot 5 and occupy slots 5..9 in insertion order.
    for (let hi = 1; hi <= 5; hi++) t.set(0, hi, 5, 100 + hi);
    expect(t.entries()).toEqual([
      [0, 1, 5, 101],
      [0, 2, 5, 102],
      [0, 3, 5, 103],
      [0, 4, 5, 104],
      [0, 5, 5, 105],
    ]);
    for (let hi = 1; hi <= 5; hi++) expect(t.get(0, hi, 5)).toBe(100 + hi);
    expect(t.get(0, 6, 5)).toBe(-1); // probes slots 5..10, stops at the empty slot 10
  });

  it("deletion from the middle of a run shifts later entries back (no tombstones)", () => {
    const t = new BlockHashTable(8); // capacity 16
    for (let hi = 1; hi <= 4; hi++) t.set(0, hi, 5, hi); // slots 5, 6, 7, 8
    t.set(0, 9, 7, 90); // home 7 is taken: slot 9
    expect(t.delete(0, 2, 5)).toBe(true); // frees slot 6
    // Slot 7 (home 5) moves to 6, slot 8 (home 5) to 7, slot 9 (home 7) to 8: 5, 6, 7, 8 occupied.
    expect(t.entries()).toEqual([
      [0, 1, 5, 1],
      [0, 3, 5, 3],
      [0, 4, 5, 4],
      [0, 9, 7, 90],
    ]);
    expect(t.get(0, 2, 5)).toBe(-1);
    expect(t.get(0, 4, 5)).toBe(4);
    expect(t.get(0, 9, 7)).toBe(90);
    expect(t.delete(0, 2, 5)).toBe(false); // already gone
    expect(t.size).toBe(4);
  });

  it("an entry at its home slot is not moved before it, across the wrap-around", () => {
    const t = new BlockHashTable(8); // capacity 16
    t.set(0, 1, 14, 1); // slot 14
    t.set(0, 2, 14, 2); // slot 15
    t.set(0, 3, 14, 3); // wraps to slot 0
    t.set(0, 4, 1, 4); // home 1: slot 1, a run 14, 15, 0, 1
    expect(t.delete(0, 1, 14)).toBe(true);
    // 15 -> 14, 0 -> 15 (home 14 is before the hole 15 cyclically), slot 1 has home 1 in (0, 1]: stays.
    expect(t.entries()).toEqual([
      [0, 4, 1, 4],
      [0, 2, 14, 2],
      [0, 3, 14, 3],
    ]);
    expect(t.get(0, 3, 14)).toBe(3);
    expect(t.get(0, 4, 1)).toBe(4);
  });

  it("keys come and go far beyond the capacity without losing any live key", () => {
    const t = new BlockHashTable(8); // capacity 16, at most 8 live keys
    // Round r holds keys hi = r .. r + 7 (all lo = 3, one run): insert r + 7, delete r - 1.
    for (let hi = 0; hi < 8; hi++) t.set(0, hi, 3, hi);
    for (let r = 1; r <= 100; r++) {
      expect(t.delete(0, r - 1, 3)).toBe(true);
      t.set(0, r + 7, 3, r + 7);
    }
    // Live keys are hi = 100 .. 107.
    expect(t.size).toBe(8);
    for (let hi = 100; hi <= 107; hi++) expect(t.get(0, hi, 3)).toBe(hi);
    expect(t.get(0, 99, 3)).toBe(-1);
  });

  it("refuses more than maxEntries keys and negative values", () => {
    const t = new BlockHashTable(2);
    t.set(0, 0, 1, 1);
    t.set(0, 0, 2, 2);
    t.set(0, 0, 2, 3); // an overwrite is not a new key
    expect(() => {
      t.set(0, 0, 3, 3);
    }).toThrow(/more than 2 keys/);
    expect(() => {
      t.set(0, 0, 1, -1);
    }).toThrow(RangeError);
    expect(() => new BlockHashTable(0)).toThrow(RangeError);
  });

  it("putIfAbsent inserts only a new key and answers the existing value otherwise", () => {
    const t = new BlockHashTable(4);
    expect(t.putIfAbsent(2, 10, 20, 5)).toBe(-1); // inserted
    expect(t.putIfAbsent(2, 10, 20, 6)).toBe(5); // present: unchanged, its value answered
    expect(t.get(2, 10, 20)).toBe(5);
    expect(t.size).toBe(1);
  });

  it("find gives a slot that valueAt, setValueAt and deleteAt use without probing again", () => {
    const t = new BlockHashTable(8); // capacity 16
    t.set(0, 1, 4, 11); // slot 4
    t.set(0, 2, 4, 12); // slot 5
    const slot = t.find(0, 2, 4);
    expect(slot).toBe(5);
    expect(t.valueAt(slot)).toBe(12);
    t.setValueAt(slot, 13);
    expect(t.get(0, 2, 4)).toBe(13);
    expect(t.find(0, 3, 4)).toBe(-1); // probes 4, 5, stops at the empty slot 6
    t.deleteAt(t.find(0, 1, 4)); // slot 4 emptied; (0, 2, 4) with home 4 shifts back into it
    expect(t.find(0, 2, 4)).toBe(4);
    expect(t.size).toBe(1);
    expect(() => {
      t.deleteAt(5);
    }).toThrow(/empty/);
  });
});

describe("BlockHashTable with grow", () => {
  it("starts at 16 slots and doubles before the load passes 1/2, keeping every key", () => {
    const t = new BlockHashTable(1000, { grow: true });
    expect(t.capacity).toBe(16);
    // 8 keys fill 16 slots to 1/2; the 9th doubles the table to 32.
    for (let i = 0; i < 8; i++) t.set(0, i, i * 7, i);
    expect(t.capacity).toBe(16);
    t.set(0, 8, 56, 8);
    expect(t.capacity).toBe(32);
    for (let i = 9; i < 600; i++) t.set(i % 3, i, i * 7, i);
    // 600 keys need 2 x 600 = 1,200 slots: 2,048 (a growing table stops at the 2,048 that 1,000 keys need).
    expect(t.capacity).toBe(2048);
    for (let i = 0; i < 600; i++) expect(t.get(i < 9 ? 0 : i % 3, i, i * 7)).toBe(i);
    expect(t.size).toBe(600);
  });
});

// Rules of the table no test above pins (its refusals' messages, the value range, a
// growing table that starts below 16 slots, entries holding value 0 and halves >= 2^31).
describe("BlockHashTable limits", () => {
  it("refuses maxEntries outside 1..2^28 with a message naming the range and the value", () => {
    for (const bad of [0, 2 ** 28 + 1, 1.5, Number.NaN]) {
      expect(() => new BlockHashTable(bad)).toThrow(new RangeError(`maxEntries must be an integer in 1..2^28, got ${bad}`));
    }
    // 2^28 itself is allowed; a growing table allocates only its first 16 slots (a full one would
    // need 2 x 2^28 = 2^29 slots).
    expect(new BlockHashTable(2 ** 28, { grow: true }).capacity).toBe(16);
  });

  it("a growing table for few keys starts at their full capacity when that is below 16", () => {
    // maxEntries 3: 2 x 3 = 6 -> 8 slots, less than the 16 a growing table starts with.
    expect(new BlockHashTable(3, { grow: true }).capacity).toBe(8);
    // grow: false (and absent) start at the full capacity: maxEntries 20 -> 2 x 20 = 40 -> 64.
    expect(new BlockHashTable(20, { grow: false }).capacity).toBe(64);
    expect(new BlockHashTable(20).capacity).toBe(64);
  });

  it("a growing table stops at its full capacity and still takes maxEntries keys", () => {
    // maxEntries 12: 2 x 12 = 24 -> 32 slots at most. Starts at 16; the 9th key makes 2 x 9 = 18 > 16: 32.
    const t = new BlockHashTable(12, { grow: true });
    for (let i = 0; i < 12; i++) t.set(0, i, i, i);
    // 12 keys in 32 slots: 2 x 12 = 24 <= 32, no further doubling.
    expect(t.capacity).toBe(32);
    expect(t.size).toBe(12);
    for (let i = 0; i < 12; i++) expect(t.get(0, i, i)).toBe(i);
    expect(() => {
      t.set(0, 12, 12, 12);
    }).toThrow(new Error("hash table invariant: more than 12 keys"));
  });

  it("takes values 0..2^31 - 1 and refuses the rest, in putIfAbsent and setValueAt alike", () => {
    const t = new BlockHashTable(4);
    expect(t.putIfAbsent(0, 1, 1, 0)).toBe(-1);
    expect(t.putIfAbsent(0, 2, 2, 0x7fff_ffff)).toBe(-1);
    expect(t.get(0, 1, 1)).toBe(0);
    expect(t.get(0, 2, 2)).toBe(0x7fff_ffff);
    for (const bad of [-1, 0x8000_0000, 1.5]) {
      expect(() => t.putIfAbsent(0, 3, 3, bad)).toThrow(new RangeError(`value must be a non-negative int32, got ${bad}`));
      expect(() => {
        t.setValueAt(t.find(0, 1, 1), bad);
      }).toThrow(new RangeError(`value must be a non-negative int32, got ${bad}`));
    }
    // Nothing changed: still two keys, values 0 and 2^31 - 1.
    expect(t.size).toBe(2);
    expect(t.get(0, 1, 1)).toBe(0);
    // setValueAt takes both ends as well: key (0, 1, 1) set to 2^31 - 1, then back to 0.
    t.setValueAt(t.find(0, 1, 1), 0x7fff_ffff);
    expect(t.get(0, 1, 1)).toBe(0x7fff_ffff);
    t.setValueAt(t.find(0, 1, 1), 0);
    expect(t.get(0, 1, 1)).toBe(0);
  });

  it("lists entries of value 0 and with halves at or above 2^31 (as u32)", () => {
    const t = new BlockHashTable(4); // capacity 8
    // lo 0x8000_0001: home (0x8000_0001 XOR 1) & 7 = 0x8000_0000 & 7 = 0.
    t.set(1, 0xffff_fffe, 0x8000_0001, 0);
    expect(t.homeSlot(1, 0x8000_0001)).toBe(0);
    expect(t.entries()).toEqual([[1, 0xffff_fffe, 0x8000_0001, 0]]);
    expect(t.get(1, 0xffff_fffe, 0x8000_0001)).toBe(0);
  });

  it("keeps a key of value 0 through a doubling, in a run others probe past", () => {
    // Starts at 16 slots. Keys with lo 0, 16, 32, ... share home 0 at capacity 16 (a run 0, 1, 2, ...);
    // the first has value 0. At capacity 32, lo 0 and 32 share home 0 (run 0, 1), lo 16 and 48 home 16.
    const t = new BlockHashTable(100, { grow: true });
    for (let k = 0; k < 9; k++) t.set(0, 7, 16 * k, k); // the 9th key: 2 x 9 = 18 > 16, doubles to 32
    expect(t.capacity).toBe(32);
    for (let k = 0; k < 9; k++) expect(t.get(0, 7, 16 * k)).toBe(k);
    // At 32 slots the homes are 16k & 31: 0 for even k (0, 2, 4, 6, 8: slots 0..4), 16 for odd k (slots 16..19).
    expect(t.entries().map((e) => e[2])).toEqual([0, 32, 64, 96, 128, 16, 48, 80, 112]);
  });
});

// Every field of a key is compared inside a probe run, and the backward shift keeps
// entries whose home equals the hole or the slot they sit in, on both sides of the wrap-around.
describe("BlockHashTable probe runs and deletion edges", () => {
  it("tells apart keys of one run that differ only in the low half or only in the group", () => {
    const t = new BlockHashTable(8); // capacity 16, mask 15
    // Homes: (5 XOR 0) & 15 = 5; (21 XOR 0) & 15 = 21 & 15 = 5; (5 XOR 16) & 15 = 21 & 15 = 5.
    t.set(0, 1, 5, 10); // slot 5
    t.set(0, 1, 21, 11); // same hi and group, lo differs: slot 6
    t.set(16, 1, 5, 12); // same hi and lo, group differs: slot 7
    expect(t.entries()).toEqual([
      [0, 1, 5, 10],
      [0, 1, 21, 11],
      [16, 1, 5, 12],
    ]);
    expect([t.get(0, 1, 5), t.get(0, 1, 21), t.get(16, 1, 5)]).toEqual([10, 11, 12]);
    // putIfAbsent of each answers its own value.
    expect([t.putIfAbsent(0, 1, 21, 99), t.putIfAbsent(16, 1, 5, 99)]).toEqual([11, 12]);
    expect(t.size).toBe(3);
  });

  it("deletes a key at slot 0 and a key of value 0, shifting a value-0 entry back", () => {
    const t = new BlockHashTable(8); // capacity 16
    t.set(0, 1, 0, 5); // home 0: slot 0
    expect(t.delete(0, 1, 0)).toBe(true);
    expect(t.size).toBe(0);
    // A run at home 3: (hi 1, value 0) at slot 3, (hi 2, value 0) at slot 4.
    t.set(0, 1, 3, 0);
    t.set(0, 2, 3, 0);
    expect(t.delete(0, 1, 3)).toBe(true); // hole 3; slot 4 (home 3) moves back to 3
    expect(t.entries()).toEqual([[0, 2, 3, 0]]);
    expect(t.find(0, 2, 3)).toBe(3);
    expect(t.delete(0, 2, 3)).toBe(true); // a value-0 entry is deleted like any other
    expect(t.entries()).toEqual([]);
  });

  it("across the wrap-around: moves an entry whose home is the hole, keeps one at its home", () => {
    // Capacity 16. A at slot 15 (home 15); B (home 15) wraps to slot 0.
    const t = new BlockHashTable(8);
    t.set(0, 1, 15, 1);
    t.set(0, 2, 15, 2);
    expect(t.find(0, 2, 15)).toBe(0);
    // Delete A: hole 15, next 0 holds B whose home 15 is the hole: B moves to 15.
    expect(t.delete(0, 1, 15)).toBe(true);
    expect(t.find(0, 2, 15)).toBe(15);
    expect(t.get(0, 2, 15)).toBe(2);

    // A at slot 15 (home 15), C at slot 0 (its own home 0).
    const u = new BlockHashTable(8);
    u.set(0, 1, 15, 1);
    u.set(0, 3, 0, 3);
    // Delete A: hole 15, next 0 holds C whose home 0 is where it sits: C stays at 0.
    expect(u.delete(0, 1, 15)).toBe(true);
    expect(u.find(0, 3, 0)).toBe(0);
    expect(u.entries()).toEqual([[0, 3, 0, 3]]);
  });
});
