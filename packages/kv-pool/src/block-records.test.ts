import { describe, expect, it } from "vitest";
import { BlockRecords, HI, QPOS, REF, STRIDE } from "./block-records.js";

describe("BlockRecords", () => {
  it("start with min(P, 256) records and read zero words past them", () => {
    const small = new BlockRecords(10);
    expect(small.cap).toBe(10);
    expect(small.words.length).toBe(10 * STRIDE);
    const big = new BlockRecords(100_000);
    expect(big.cap).toBe(256);
    expect(big.word(5000, REF)).toBe(0);
  });

  it("grow by doubling to reach an id, capped at P, keeping every word", () => {
    const rec = new BlockRecords(1000);
    rec.words[7 * STRIDE + HI] = 42;
    rec.words[255 * STRIDE + QPOS] = -9;
    rec.reach(256); // 256 -> 512
    expect(rec.cap).toBe(512);
    expect(rec.words.length).toBe(512 * STRIDE);
    expect(rec.word(7, HI)).toBe(42);
    expect(rec.word(255, QPOS)).toBe(-9);
    rec.reach(600); // 512 -> 1024, capped at 1000
    expect(rec.cap).toBe(1000);
    expect(rec.words.length).toBe(1000 * STRIDE);
    const words = rec.words;
    rec.reach(999); // already there: the same array
    expect(rec.words).toBe(words);
  });

  it("prefetch reads the records and changes nothing", () => {
    const rec = new BlockRecords(8);
    rec.words[2 * STRIDE + REF] = 5;
    rec.words[3 * STRIDE + REF] = 6;
    const before = [...rec.words];
    // The REF words of ids 2 and 3 folded (id 9 has no record and is skipped).
    expect(rec.prefetch(Int32Array.of(2, 3, 9), 0, 3)).toBe(5 ^ 6);
    expect([...rec.words]).toEqual(before);
  });
});
