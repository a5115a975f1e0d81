import { xxh3 } from "@node-rs/xxhash";
import { expect } from "vitest";
import type { CacheGroup } from "@kvsim/profile-schema";
import type { KvSequence } from "./contract.js";
import type { PoolOps } from "./block-pool.js";
import { KvCacheManager } from "./kv-cache-manager.js";
import { xxh3PairInto } from "./xxh3-pair.js";
import { createPromptTokens } from "./prompt-tokens.js";
import { Sequence } from "./sequence.js";
import { tableEntries, type BlockTable } from "./block-table.js";

/** A block table holding `ids` (tests build tables as plain arrays). */
export function tableOf(ids: readonly number[]): BlockTable {
  return { blocks: Int32Array.from(ids), numBlocks: ids.length };
}

/** Makes `ids` a group state's table. */
export function setTable(t: BlockTable, ids: readonly number[]): void {
  t.blocks = Int32Array.from(ids);
  t.numBlocks = ids.length;
}

/** `takeFreeInto` on a table kept as a plain array: the blocks taken are appended to `out`. */
export function takeIntoArray(pool: PoolOps, n: number, out: number[], group?: number): void {
  const t = tableOf(out);
  pool.takeFreeInto(n, t, group);
  out.push(...tableEntries(t).slice(out.length));
}

/**
 * fast-check runs for a property: `n` normally, a tenth of it (at least 10) under mutation testing
 * (KVSIM_MUTATION=1, set by stryker.config.mjs). The properties cover nearly every mutant, so
 * they set the cost of a surviving one; the hand-derived tests are the killers.
 */
export function propRuns(n: number): number {
  return process.env.KVSIM_MUTATION === "1" ? Math.max(10, Math.ceil(n / 10)) : n;
}

/** A group for tests; the byte and layer fields are informational for the pool. */
export function group(kind: CacheGroup["kind"], blockSize: number, extra: Partial<CacheGroup> = {}): CacheGroup {
  return {
    name: `${kind}-${blockSize}-${extra.window_tokens ?? 0}`,
    kind,
    num_layers: 1,
    block_size_tokens: blockSize,
    prefix_cacheable: true,
    transfer_bytes_per_block: 1,
    ...extra,
  };
}

export function manager(numPages: number, groups: CacheGroup[], opts: { caching?: boolean; version?: string; events?: boolean } = {}): KvCacheManager {
  return new KvCacheManager({
    numPages,
    groups,
    enablePrefixCaching: opts.caching ?? true,
    vllmVersion: opts.version ?? "0.31.0",
    collectEvents: opts.events ?? false,
  });
}

export function seqOf(m: KvCacheManager, id: string, tokens: readonly number[]): KvSequence {
  return m.createSequence(id, createPromptTokens(Uint32Array.from(tokens)));
}

/** Admits a whole prompt in one step, as vLLM's tests do: hit, allocate the rest, commit. */
export function admit(m: KvCacheManager, seq: KvSequence): { ok: boolean; hit: number } {
  const hit = m.findPrefixHit(seq);
  const ok = m.allocateSlots(seq, { computedTokens: 0, newTokens: seq.numTokens - hit.tokens, hit });
  if (ok) m.commitComputed(seq, seq.numTokens);
  return { ok, hit: hit.tokens };
}

export const repeat = (v: number, n: number): number[] => Array.from({ length: n }, () => v);
export const range = (a: number, b: number): number[] => Array.from({ length: b - a }, (_, i) => a + i);

/** A sequence's block tables per group (0 = the null block). */
export function tablesOf(seq: KvSequence): number[][] {
  if (!(seq instanceof Sequence)) throw new Error("not a pool sequence");
  return seq.groups.map((st) => tableEntries(st));
}

/**
 * Oracle for the JS chain step: the native XXH3-64 of @node-rs/xxhash (the library block hashing
 * used before) over the 16 bytes [a LE u64, b LE u64] with seed 1337.
 */
export function nativePairHash(a: bigint, b: bigint): bigint {
  const bytes = new Uint8Array(16);
  const view = new DataView(bytes.buffer);
  view.setBigUint64(0, a, true);
  view.setBigUint64(8, b, true);
  return xxh3.xxh64(bytes, 1337n);
}

/** The same hash through `xxh3PairInto`, on 32-bit halves. */
export function jsPairHash(a: bigint, b: bigint): bigint {
  const out = new Uint32Array(2);
  xxh3PairInto(Number(a >> 32n), Number(a & 0xffffffffn), Number(b >> 32n), Number(b & 0xffffffffn), out, 0);
  return (BigInt(out[0]!) << 32n) | BigInt(out[1]!);
}

/** A pool's observable state, field by field, for comparing two pools after every operation. */
export interface PoolState {
  readonly numFree: number;
  readonly queue: string;
  /** Per block: reference count, then h (hashed) / e (evictable) / f (free) flags. */
  readonly blocks: string;
  readonly cache: string;
  readonly metrics: string;
  readonly groupPages: string;
}

/**
 * Reads every observable of a pool: free count and queue order, each block's reference count and
 * hashed / evictable / free status, the cache (keys with their copies in caching order), metrics
 * and per-group pages. `askIsFree` false derives "free" from the queue order instead of calling
 * `isFree` per block (the reference pool's `isFree` scans its queue: O(P^2) for a whole pool).
 */
export function poolState(pool: PoolOps, askIsFree: boolean): PoolState {
  const queue = pool.freeQueueOrder();
  const queued = new Uint8Array(pool.numPages);
  for (const b of queue) queued[b] = 1;
  const blocks: string[] = [];
  for (let b = 0; b < pool.numPages; b++) {
    const free = askIsFree ? pool.isFree(b) : queued[b] === 1;
    blocks.push(`${pool.refCount(b)}${pool.isHashed(b) ? "h" : ""}${pool.isEvictable(b) ? "e" : ""}${free ? "f" : ""}`);
  }
  const gp = pool.groupPages();
  return {
    numFree: pool.numFree,
    queue: queue.join(","),
    blocks: blocks.join(","),
    cache: pool.cacheSnapshot().join(";"),
    metrics: JSON.stringify(pool.metrics()),
    groupPages: `${Array.from(gp.used).join(",")} | ${Array.from(gp.cached).join(",")}`,
  };
}

/** Events as comparable text (block hashes are bigints). */
export const eventsText = (events: readonly unknown[]): string => JSON.stringify(events, (_k, v: unknown) => (typeof v === "bigint" ? v.toString() : v));

/**
 * Asserts that a pool equals the reference pool after call number `call` (`what` names it): every
 * observable (`poolState`), the events each collected since the last call, and the callers' own
 * block tables as text (`tables[0]` for `pool`, `tables[1]` for `ref`).
 */
export function expectSamePools(call: number, what: string, pool: PoolOps, ref: PoolOps, tables: readonly [string, string]): void {
  expect({ call, what, ...poolState(pool, true), events: eventsText(pool.takeEvents()), tables: tables[0] }).toEqual({
    call,
    what,
    ...poolState(ref, false),
    events: eventsText(ref.takeEvents()),
    tables: tables[1],
  });
}
