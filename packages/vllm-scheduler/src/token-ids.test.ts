import { describe, expect, it } from "vitest";
import { requestIdHash, sampledTokenId, tokenIdFromHash } from "./token-ids.js";

describe("sampled token ids", () => {
  it("hash request ids with FNV-1a 32 (published vectors)", () => {
    expect(requestIdHash("")).toBe(0x811c9dc5);
    expect(requestIdHash("a")).toBe(0xe40c292c);
    expect(requestIdHash("foobar")).toBe(0xbf9cf968);
  });

  it("mix the index with the golden-ratio constant before fmix32", () => {
    // x = 0x9E3779B1 XOR (0 + 1) x 0x9E3779B1 = 0, and fmix32(0) = 0.
    expect(tokenIdFromHash(0x9e3779b1, 0)).toBe(0);
  });

  it("are deterministic unsigned 32-bit integers, distinct across indexes and ids", () => {
    const seen = new Set<number>();
    for (const id of ["r0", "r1", "req-42"]) {
      for (let i = 0; i < 100; i++) {
        const t = sampledTokenId(id, i);
        expect(t).toBe(sampledTokenId(id, i));
        expect(Number.isInteger(t) && t >= 0 && t < 2 ** 32).toBe(true);
        seen.add(t);
      }
    }
    expect(seen.size).toBe(300);
  });
});
