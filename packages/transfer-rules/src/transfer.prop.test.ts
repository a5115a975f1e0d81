import { bytes, cdiv, tokens, type CacheGroup, type Profile } from "@kvsim/profile-schema";
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { delayMsForBytes } from "./delay.js";
import { fullGroup, groupedProfile, linearProfile, stateGroup, windowGroup } from "./fixtures.js";
import { groupPayload } from "./rules.js";
import { payloadBytes, sourceTerms, transferDelayMs, withDestination } from "./source-terms.js";

const byteRate = fc.integer({ min: 1, max: 1_000_000 });
const windowArb = fc.record({ w: fc.integer({ min: 1, max: 300 }), b: fc.integer({ min: 1, max: 64 }), bytes: byteRate, conv: fc.boolean() });
const stateArb = fc.record({ bytes: byteRate, mamba: fc.boolean() });

/** Random hybrid models: 1-2 full-attention groups of one block size, 0-2 window groups, 0-2 state groups. */
function groupedArb(maxWindows: number): fc.Arbitrary<Profile> {
  return fc
    .record({
      b: fc.integer({ min: 1, max: 64 }),
      fa: fc.array(byteRate, { minLength: 1, maxLength: 2 }),
      windows: fc.array(windowArb, { maxLength: maxWindows }),
      states: fc.array(stateArb, { maxLength: 2 }),
    })
    .map(({ b, fa, windows, states }) => {
      const groups: CacheGroup[] = [
        ...fa.map((x, i) => fullGroup(b, x, `fa${i}`)),
        ...windows.map((x, i): CacheGroup => ({ ...windowGroup(x.w, x.b, x.bytes, `w${i}`), kind: x.conv ? "convolution" : "sliding_window" })),
        ...states.map((x, i) => stateGroup(b, x.bytes, x.mamba, `s${i}`)),
      ];
      return groupedProfile(groups);
    });
}
/**
 * docs/rules/grouped-pd.md §2 read straight from the document, for grouped profiles: T = N - 1 with a
 * Mamba-type state (prefix-cacheable state group) and N > 1, else N; per group full attention
 * cdiv(T, B) blocks, window groups cdiv(T, B) - floor(max(0, T - W + 1) / B), state groups 1;
 * bytes = blocks x transfer_bytes_per_block.
 */
function documentedFullPayload(p: Profile, n: number): number {
  const groups = p.kv_cache_groups!;
  const t = groups.some((g) => g.kind === "state" && g.prefix_cacheable === true) && n > 1 ? n - 1 : n;
  let total = 0;
  for (const g of groups) {
    const b = g.block_size_tokens;
    const moved =
      g.kind === "full_attention" ? Math.ceil(t / b) : g.kind === "state" ? 1 : Math.ceil(t / b) - Math.floor(Math.max(0, t - g.window_tokens! + 1) / b);
    total += moved * g.transfer_bytes_per_block!;
  }
  return total;
}

const linearArb = fc.record({ rate: byteRate, b: fc.integer({ min: 1, max: 64 }) });
const promptArb = fc.integer({ min: 1, max: 20_000 });

const fullPayload = (p: Profile, n: number, blockSizeTokens?: number) => payloadBytes(sourceTerms(p, tokens(n), { mode: "full_prompt", blockSizeTokens }));
const missingPayload = (p: Profile, n: number, hit: number, blockSizeTokens?: number) =>
  payloadBytes(withDestination(sourceTerms(p, tokens(n), { mode: "destination_missing", blockSizeTokens }), p, tokens(hit), { blockSizeTokens }));

describe("transfer-rules properties", () => {
  it("payload never decreases as N grows (models without window groups; linear models)", () => {
    fc.assert(
      fc.property(groupedArb(0), promptArb, fc.integer({ min: 0, max: 5000 }), (p, n, d) => {
        expect(fullPayload(p, n + d)).toBeGreaterThanOrEqual(fullPayload(p, n));
      }),
    );
    fc.assert(
      fc.property(linearArb, promptArb, fc.integer({ min: 0, max: 5000 }), ({ rate, b }, n, d) => {
        const lin = linearProfile(rate);
        expect(fullPayload(lin, n + d, b)).toBeGreaterThanOrEqual(fullPayload(lin, n, b));
        expect(missingPayload(lin, n + d, 0, b)).toBeGreaterThanOrEqual(missingPayload(lin, n, 0, b));
      }),
    );
  });

  it("with window groups the unit count never decreases, and one more token drops at most one block per window group", () => {
    fc.assert(
      fc.property(groupedArb(2), promptArb, (p, n) => {
        const a = sourceTerms(p, tokens(n), { mode: "full_prompt" });
        const b = sourceTerms(p, tokens(n + 1), { mode: "full_prompt" });
        expect(b.promptUnits).toBeGreaterThanOrEqual(a.promptUnits);
        const windowBlockBytes = p.kv_cache_groups!.filter((g) => g.window_tokens !== undefined).reduce((s, g) => s + g.transfer_bytes_per_block!, 0);
        expect(payloadBytes(b)).toBeGreaterThanOrEqual(payloadBytes(a) - windowBlockBytes);
      }),
    );
  });

  it("destination-missing payload never exceeds full-prompt payload (grouped); linear exceeds it by less than one block", () => {
    fc.assert(
      fc.property(groupedArb(2), promptArb, fc.integer({ min: 0, max: 25_000 }), (p, n, hit) => {
        expect(missingPayload(p, n, hit)).toBeLessThanOrEqual(fullPayload(p, n));
      }),
    );
    fc.assert(
      fc.property(linearArb, promptArb, fc.integer({ min: 0, max: 25_000 }), ({ rate, b }, n, hit) => {
        const lin = linearProfile(rate);
        // Block rounding: at most cdiv(N, B) x B <= N + B - 1 tokens.
        expect(missingPayload(lin, n, hit, b)).toBeLessThanOrEqual(fullPayload(lin, n, b) + (b - 1) * rate);
      }),
    );
  });

  it("window groups never move more than cdiv(W, B) + 1 blocks", () => {
    fc.assert(
      fc.property(groupedArb(2), fc.integer({ min: 0, max: 20_000 }), fc.option(fc.integer({ min: 0, max: 25_000 }), { nil: undefined }), (p, t, hit) => {
        const rows = groupPayload(p, tokens(t), hit === undefined ? undefined : tokens(hit));
        p.kv_cache_groups!.forEach((g, i) => {
          if (g.window_tokens !== undefined) expect(rows[i]!.blocks).toBeLessThanOrEqual(cdiv(g.window_tokens, g.block_size_tokens) + 1);
        });
      }),
    );
  });

  it("the per-group rows add up to the payload of either mode", () => {
    fc.assert(
      fc.property(groupedArb(2), promptArb, fc.integer({ min: 0, max: 25_000 }), (p, n, hit) => {
        const terms = withDestination(sourceTerms(p, tokens(n), { mode: "destination_missing" }), p, tokens(hit));
        const sum = (rows: readonly { bytes: number }[]) => rows.reduce((s, r) => s + r.bytes, 0);
        expect(sum(groupPayload(p, terms.transferredTokens))).toBe(payloadBytes({ ...terms, mode: "full_prompt" }));
        expect(sum(groupPayload(p, terms.transferredTokens, tokens(hit)))).toBe(payloadBytes(terms));
      }),
    );
  });

  it("delay is proportional to bytes", () => {
    fc.assert(
      fc.property(fc.integer({ min: 0, max: 2 ** 40 }), fc.integer({ min: 1, max: 1000 }), fc.double({ min: 0.001, max: 1000, noNaN: true }), (b, k, g) => {
        const one = delayMsForBytes(bytes(b), g);
        const scaled = delayMsForBytes(bytes(b * k), g);
        expect(Math.abs(scaled - k * one)).toBeLessThanOrEqual(1e-12 * Math.max(1, scaled));
        // ms x GB/s x 10^6 gives the bytes back.
        expect(Math.abs(one * g * 1e6 - b)).toBeLessThanOrEqual(1e-9 * Math.max(1, b));
      }),
    );
  });

  it("the terms' delay is the document's full-prompt payload over the bandwidth", () => {
    fc.assert(
      fc.property(groupedArb(2), promptArb, fc.double({ min: 0.001, max: 1000, noNaN: true }), (p, n, g) => {
        const expected = documentedFullPayload(p, n);
        const terms = sourceTerms(p, tokens(n), { mode: "full_prompt", bandwidthGbps: g });
        expect(payloadBytes(terms)).toBe(expected);
        // bytes / (GB/s x 10^9) x 1000 ms, evaluated in that order: equal up to rounding.
        const ms = (expected / (g * 1e9)) * 1000;
        expect(Math.abs(transferDelayMs(terms)! - ms)).toBeLessThanOrEqual(1e-12 * Math.max(1, ms));
        expect(transferDelayMs({ ...terms, bandwidthGbps: undefined })).toBeUndefined();
      }),
    );
  });

  it("the terms' units never mix: block terms carry the block size, token terms never do", () => {
    const anyProfile = fc.oneof(
      groupedArb(2).map((p) => ({ p, b: undefined as number | undefined })),
      linearArb.map(({ rate, b }) => ({ p: linearProfile(rate), b })),
    );
    fc.assert(
      fc.property(anyProfile, promptArb, fc.integer({ min: 0, max: 25_000 }), ({ p, b }, n, hit) => {
        const source = sourceTerms(p, tokens(n), { mode: "destination_missing", blockSizeTokens: b });
        const terms = withDestination(source, p, tokens(hit), { blockSizeTokens: b });
        if (terms.unit === "block") {
          const fa = p.kv_cache_groups!.find((g) => g.kind === "full_attention")!;
          expect(terms.blockSizeTokens).toBe(fa.block_size_tokens);
          expect(terms.promptUnits).toBe(cdiv(terms.transferredTokens, fa.block_size_tokens));
          expect(Number.isInteger(terms.missing?.units)).toBe(true);
          expect(terms.missing!.units).toBeLessThanOrEqual(terms.promptUnits);
        } else {
          expect("blockSizeTokens" in terms).toBe(false);
          expect(terms.promptUnits).toBe(n);
          expect(terms.missing!.units % b!).toBe(0);
          expect([terms.fixedBytes, terms.missing!.fixedBytes]).toEqual([0, 0]);
        }
      }),
    );
  });
});
