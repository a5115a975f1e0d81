import { computeBlockHashes, type KvEvent } from "@kvsim/kv-pool";
import { describe, expect, it } from "vitest";
import { parseJsonExact, stringifyJsonExact } from "./json-u64.js";
import { RouterEventPublisher, fromRouterEventData, parseRouterKvEvent, routerGroupIndex, toRouterEventData } from "./kv-events.js";
import { GLM, LLAMA_8B } from "./test-profiles.js";

/**
 * docs/rules/dynamo.md §8.6 (XXH3-64, seed 1337, verified against the real router decoder in
 * the reference): tokens_hash = XXH3 over the block's little-endian u32 tokens; block_hash = the
 * tokens hash for block 0, else XXH3 over [parent block_hash LE u64, tokens_hash LE u64].
 */
describe("hash vectors (8.6)", () => {
  it("tokens [11..88] by 4: two blocks chained from no parent", () => {
    const h = computeBlockHashes([11, 22, 33, 44, 55, 66, 77, 88], 4);
    expect(h).toEqual([
      { tokensHash: 4117275816416024698n, blockHash: 4117275816416024698n },
      { tokensHash: 6081346995852963768n, blockHash: 5947898228081096063n },
    ]);
  });
  it("a continuation block [99..102] chains from 5947898228081096063", () => {
    const h = computeBlockHashes([11, 22, 33, 44, 55, 66, 77, 88, 99, 100, 101, 102], 4);
    expect(h[2]).toEqual({ tokensHash: 12699502035523072446n, blockHash: 17335092954915961572n });
  });
  it("tokens 1..10 by 4 publish 2 blocks; the tail of 2 is never hashed", () => {
    expect(computeBlockHashes([1, 2, 3, 4, 5, 6, 7, 8, 9, 10], 4)).toEqual([
      { tokensHash: 14643705804678351452n, blockHash: 14643705804678351452n },
      { tokensHash: 16777012769546811212n, blockHash: 4945711292740353085n },
    ]);
  });
  it("tokens 0..31 by 16", () => {
    const t = Array.from({ length: 32 }, (_, i) => i);
    expect(computeBlockHashes(t, 16)).toEqual([
      { tokensHash: 15310707395893867146n, blockHash: 15310707395893867146n },
      { tokensHash: 15292316782987903195n, blockHash: 13769157705258532664n },
    ]);
  });
});

describe("router events (6.2)", () => {
  const stored: KvEvent = {
    type: "stored",
    groupIndex: 0,
    parentHash: null,
    blocks: computeBlockHashes([11, 22, 33, 44, 55, 66, 77, 88], 4),
  };
  const removed: KvEvent = { type: "removed", groupIndex: 0, blockHashes: [4117275816416024698n, 5947898228081096063n] };

  it("the stored event of 8.6, written with exact u64s", () => {
    const p = new RouterEventPublisher(0, 0);
    const [ev] = p.publish([stored]);
    expect(stringifyJsonExact(ev)).toBe(
      '{"event_id":0,"dp_rank":0,"data":{"stored":{"parent_hash":null,"start_position":null,"blocks":[' +
        '{"block_hash":4117275816416024698,"tokens_hash":4117275816416024698},' +
        '{"block_hash":5947898228081096063,"tokens_hash":6081346995852963768}]}}}',
    );
  });
  it("the later removal of both blocks, then cleared; ids count up per rank", () => {
    const p = new RouterEventPublisher(0, 3);
    p.publish([stored]);
    expect(stringifyJsonExact(p.publish([removed]))).toBe(
      '[{"event_id":1,"dp_rank":3,"data":{"removed":{"block_hashes":[4117275816416024698,5947898228081096063]}}}]',
    );
    expect(stringifyJsonExact(p.cleared())).toBe('{"event_id":2,"dp_rank":3,"data":{"cleared":{}}}');
  });
  it("a continuation carries its parent hash exactly (17335092954915961572 > 2^53)", () => {
    const [, , third] = computeBlockHashes([11, 22, 33, 44, 55, 66, 77, 88, 99, 100, 101, 102], 4);
    const data = toRouterEventData({ type: "stored", groupIndex: 0, parentHash: 5947898228081096063n, blocks: [third!] });
    expect(stringifyJsonExact(data)).toBe(
      '{"stored":{"parent_hash":5947898228081096063,"start_position":null,"blocks":[{"block_hash":17335092954915961572,"tokens_hash":12699502035523072446}]}}',
    );
  });
  it("only the router-visible group publishes: a state group's removal never reaches the router", () => {
    // GLM's first full-attention group is index 0; its ring and KDA groups are 1..5.
    expect(routerGroupIndex(GLM)).toBe(0);
    expect(routerGroupIndex(LLAMA_8B)).toBe(0);
    const p = new RouterEventPublisher(routerGroupIndex(GLM), 0);
    const out = p.publish([{ ...removed, groupIndex: 2 }, stored, { ...stored, groupIndex: 1 }]);
    expect(out).toHaveLength(1);
    expect(out[0]!.event_id).toBe(0);
    expect("stored" in out[0]!.data).toBe(true);
  });
  it("the router group is the first full-attention group, wherever it sits", () => {
    const groups = [GLM.kv_cache_groups![1]!, GLM.kv_cache_groups![0]!];
    expect(routerGroupIndex({ ...GLM, kv_cache_groups: groups })).toBe(1);
    expect(routerGroupIndex({ ...GLM, kv_cache_groups: [GLM.kv_cache_groups![1]!] })).toBeUndefined();
  });
  it("parses back exactly and converts to the pool event it came from", () => {
    const p = new RouterEventPublisher(0, 0);
    const [s] = p.publish([stored]);
    const [r] = p.publish([removed]);
    for (const [ev, orig] of [
      [s!, stored],
      [r!, removed],
    ] as const) {
      const parsed = parseRouterKvEvent(parseJsonExact(stringifyJsonExact(ev)));
      expect(parsed).toEqual({ ok: true, value: ev });
      if (parsed.ok) expect(fromRouterEventData(parsed.value.data, 0)).toEqual(orig);
    }
    expect(fromRouterEventData({ cleared: {} }, 0)).toBeUndefined();
  });
  it("refuses a hash that is not a u64, naming the field", () => {
    const bad = parseJsonExact('{"event_id":0,"dp_rank":0,"data":{"removed":{"block_hashes":[18446744073709551616]}}}');
    // 2^64 = 18,446,744,073,709,551,616 is one past the largest u64.
    expect(parseRouterKvEvent(bad)).toEqual({
      ok: false,
      reason: 'data.removed.block_hashes[0] must be an unsigned 64-bit integer, got "18446744073709551616"',
    });
  });
});
