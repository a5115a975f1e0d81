import type { PromptTokens } from "@kvsim/kv-pool";
import { describe, expect, it } from "vitest";
import { createPlacement, KvAwarePlacement, RoundRobinPlacement, type PlacementTarget } from "./placement.js";

// Placement only passes the prompt through to the targets; a stand-in object is enough here.
const prompt = { length: 0, tokens: new Uint32Array(0), blockHashes: () => [] } as PromptTokens;
const target = (hit: number, load: number): PlacementTarget => ({ prefixHitTokens: () => hit, load: () => load });

describe("round robin", () => {
  it("cycles 0, 1, 2, 0, 1 over three workers and reports no hit", () => {
    const rr = new RoundRobinPlacement(3);
    expect([1, 2, 3, 4, 5].map(() => rr.place().index)).toEqual([0, 1, 2, 0, 1]);
    expect(rr.place().hitTokens).toBe(0);
  });
  it("refuses an empty pool", () => {
    expect(() => new RoundRobinPlacement(0)).toThrow(/at least one worker/);
  });
});

describe("kv_aware", () => {
  it("picks the longest prefix hit", () => {
    const p = new KvAwarePlacement([target(16, 0), target(48, 9), target(32, 0)]);
    expect(p.place(prompt)).toEqual({ index: 1, hitTokens: 48 });
  });
  it("breaks a hit tie by the least load", () => {
    const p = new KvAwarePlacement([target(32, 5), target(32, 2), target(16, 0)]);
    expect(p.place(prompt)).toEqual({ index: 1, hitTokens: 32 });
  });
  it("breaks a hit and load tie by the lowest index", () => {
    const p = new KvAwarePlacement([target(0, 3), target(0, 1), target(0, 1)]);
    expect(p.place(prompt)).toEqual({ index: 1, hitTokens: 0 });
  });
  it("createPlacement maps the spec's router names", () => {
    const targets = [target(0, 1), target(64, 1)];
    expect(createPlacement("kv_aware", targets).place(prompt).index).toBe(1);
    expect(createPlacement("round_robin", targets).place(prompt).index).toBe(0);
  });
});
