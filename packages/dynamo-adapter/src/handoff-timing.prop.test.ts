import { tokens, type CacheGroup, type Profile, type TransferMode } from "@kvsim/profile-schema";
import { sourceTerms, transferDelayMs, withDestination, type TransferTerms } from "@kvsim/transfer-rules";
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { fromDynamoTiming, handoffDelayMs, termsShape, toDestinationTransfer, toDynamoTiming, toLegacyTiming } from "./handoff-timing.js";
import { linearProfile } from "./test-profiles.js";

const mode = fc.constantFrom<TransferMode>("full_prompt", "destination_missing");
const bandwidth = fc.option(fc.double({ min: 0.001, max: 1000, noNaN: true, noDefaultInfinity: true }), { nil: undefined });

/** A grouped profile: one or two full-attention groups of block B, optional window and state groups. */
const groupedProfile = fc
  .record({
    block: fc.integer({ min: 1, max: 4096 }),
    perToken: fc.integer({ min: 1, max: 2000 }),
    /** 0 keeps bytes per block a multiple of B; anything else makes the token form inexact. */
    remainder: fc.oneof(fc.constant(0), fc.integer({ min: 0, max: 4095 })),
    secondFull: fc.boolean(),
    window: fc.option(fc.record({ tokens: fc.integer({ min: 1, max: 20_000 }), bytes: fc.integer({ min: 1, max: 1_000_000 }) }), { nil: undefined }),
    state: fc.option(fc.record({ mamba: fc.boolean(), bytes: fc.integer({ min: 1, max: 10_000_000 }) }), { nil: undefined }),
  })
  .map(({ block, perToken, remainder, secondFull, window, state }): Profile => {
    const faBytes = block * perToken + (remainder % block);
    const groups: CacheGroup[] = [
      { name: "fa", kind: "full_attention", num_layers: 1, block_size_tokens: block, prefix_cacheable: true, transfer_bytes_per_block: faBytes },
    ];
    if (secondFull)
      groups.push({
        name: "fa2",
        kind: "full_attention",
        num_layers: 1,
        block_size_tokens: block,
        prefix_cacheable: true,
        transfer_bytes_per_block: block * perToken,
      });
    if (window !== undefined) {
      groups.push({
        name: "sw",
        kind: "sliding_window",
        num_layers: 1,
        block_size_tokens: block,
        window_tokens: window.tokens,
        prefix_cacheable: true,
        transfer_bytes_per_block: window.bytes,
      });
    }
    if (state !== undefined)
      groups.push({ name: "st", kind: "state", num_layers: 1, block_size_tokens: block, prefix_cacheable: state.mamba, transfer_bytes_per_block: state.bytes });
    return { schema_version: 1, model: "prop", vllm_version: "0.32.0", tensor_parallel_size: 1, page_size_bytes: 2 ** 40, kv_cache_groups: groups };
  });

/** Terms from a random profile and prompt, with or without a destination. */
const anyTerms = fc
  .record({
    grouped: fc.boolean(),
    profile: groupedProfile,
    perToken: fc.integer({ min: 1, max: 1_000_000 }),
    linearBlock: fc.integer({ min: 1, max: 256 }),
    prompt: fc.integer({ min: 1, max: 100_000 }),
    mode,
    bandwidth,
    hit: fc.option(fc.integer({ min: 0, max: 120_000 }), { nil: undefined }),
  })
  .map(({ grouped, profile, perToken, linearBlock, prompt, mode: m, bandwidth: bw, hit }): { terms: TransferTerms; profile: Profile } => {
    const p = grouped ? profile : linearProfile(perToken);
    const opts = { mode: m, bandwidthGbps: bw, blockSizeTokens: linearBlock };
    const src = sourceTerms(p, tokens(prompt), opts);
    return { profile: p, terms: hit === undefined ? src : withDestination(src, p, tokens(hit), opts) };
  });

describe("kvsim terms -> Dynamo timing -> kvsim terms", () => {
  it("is the identity whenever the conversion is allowed, and the delays agree", () => {
    fc.assert(
      fc.property(anyTerms, ({ terms }) => {
        const timing = toDynamoTiming(terms);
        // Allowed exactly when the unit is tokens or bytes per block divide by the block size.
        expect(timing.ok).toBe(terms.unit === "token" || terms.bytesPerUnit % terms.blockSizeTokens === 0);
        if (!timing.ok) return;
        const destination = terms.missing === undefined ? undefined : toDestinationTransfer(terms);
        if (destination !== undefined && !destination.ok) throw new Error(destination.reason);
        const back = fromDynamoTiming(timing.value, termsShape(terms), destination?.value);
        expect(back).toEqual({ ok: true, value: terms });
        expect(handoffDelayMs(timing.value, destination?.value)).toBe(transferDelayMs(terms));
      }),
    );
  });

  it("bandwidth off stays absent: null on the Dynamo side, never 0", () => {
    fc.assert(
      fc.property(anyTerms, ({ terms }) => {
        const timing = toDynamoTiming(terms);
        if (timing.ok) expect(timing.value.bandwidth_gb_s).toBe(terms.bandwidthGbps ?? null);
      }),
    );
  });

  it("the legacy shape is produced only when nothing is lost, and then round-trips too", () => {
    fc.assert(
      fc.property(anyTerms, ({ terms }) => {
        const legacy = toLegacyTiming(terms);
        expect(legacy.ok).toBe(terms.unit === "token" && terms.fixedBytes === 0);
        if (!legacy.ok) return;
        // The legacy shape is the source's timing: compare with the terms before the destination
        // (toEqual treats an undefined property as absent).
        expect(fromDynamoTiming(legacy.value, termsShape(terms))).toEqual({ ok: true, value: { ...terms, missing: undefined } });
      }),
    );
  });
});
