import type { BlockHash, KvEvent } from "@kvsim/kv-pool";
import type { Profile } from "@kvsim/profile-schema";
import type { Conversion } from "./engine-args.js";
import type { JsonValue } from "./json-u64.js";

/**
 * KV events in the Dynamo router's format (docs/rules/dynamo.md §6.2):
 * `{event_id, dp_rank, data: {stored | removed | cleared}}`. Hashes are u64 bigints; write them
 * with `stringifyJsonExact` so they stay exact in JSON.
 */

export interface RouterStoredBlock {
  readonly block_hash: bigint;
  readonly tokens_hash: bigint;
}

export type RouterKvEventData =
  | { readonly stored: { readonly parent_hash: bigint | null; readonly start_position: null; readonly blocks: readonly RouterStoredBlock[] } }
  | { readonly removed: { readonly block_hashes: readonly bigint[] } }
  | { readonly cleared: Record<string, never> };

export interface RouterKvEvent {
  readonly event_id: number;
  readonly dp_rank: number;
  readonly data: RouterKvEventData;
}

/**
 * The router-visible group: the first full-attention group of a grouped profile (only it publishes
 * events, so a window or state group's removal never evicts an attention block at the router);
 * group 0 for a linear profile; undefined when a grouped profile has no full-attention group.
 */
export function routerGroupIndex(profile: Profile): number | undefined {
  const groups = profile.kv_cache_groups;
  if (groups === undefined) return 0;
  const i = groups.findIndex((g) => g.kind === "full_attention");
  return i < 0 ? undefined : i;
}

/** One kvsim pool event as router event data. `start_position` stays null: adapters must not invent one. */
export function toRouterEventData(event: KvEvent): RouterKvEventData {
  switch (event.type) {
    case "stored":
      return {
        stored: {
          parent_hash: event.parentHash,
          start_position: null,
          blocks: event.blocks.map((b) => ({ block_hash: b.blockHash, tokens_hash: b.tokensHash })),
        },
      };
    case "removed":
      return { removed: { block_hashes: [...event.blockHashes] } };
  }
}

/**
 * Numbers a rank's router events: keeps only the router-visible group's events, in order, and
 * gives each a monotonic `event_id` (per rank, from 0).
 */
export class RouterEventPublisher {
  private nextId = 0;

  constructor(
    /** The router-visible group (see `routerGroupIndex`); undefined publishes nothing. */
    readonly groupIndex: number | undefined,
    readonly dpRank = 0,
  ) {}

  publish(events: readonly KvEvent[]): RouterKvEvent[] {
    const out: RouterKvEvent[] = [];
    for (const e of events) {
      if (e.groupIndex !== this.groupIndex) continue;
      out.push({ event_id: this.nextId++, dp_rank: this.dpRank, data: toRouterEventData(e) });
    }
    return out;
  }

  /** A `cleared` event: the router drops everything this (worker, dp_rank) owned. */
  cleared(): RouterKvEvent {
    return { event_id: this.nextId++, dp_rank: this.dpRank, data: { cleared: {} } };
  }
}

const U64_MAX = (1n << 64n) - 1n;

function u64(v: JsonValue | undefined, path: string): Conversion<bigint> {
  let n: bigint | undefined;
  if (typeof v === "bigint") n = v;
  else if (typeof v === "number" && Number.isSafeInteger(v)) n = BigInt(v);
  if (n === undefined || n < 0n || n > U64_MAX)
    return { ok: false, reason: `${path} must be an unsigned 64-bit integer, got ${JSON.stringify(typeof v === "bigint" ? v.toString() : v)}` };
  return { ok: true, value: n };
}

const isRecord = (v: JsonValue | undefined): v is Readonly<Record<string, JsonValue>> => typeof v === "object" && v !== null && !Array.isArray(v);

/**
 * Reads a router event back from JSON parsed by `parseJsonExact` (so u64 hashes are exact
 * bigints). Fails with the field path when the value is not a router event.
 */
export function parseRouterKvEvent(value: JsonValue): Conversion<RouterKvEvent> {
  const fail = (reason: string): Conversion<RouterKvEvent> => ({ ok: false, reason });
  if (!isRecord(value)) return fail("a router event must be an object");
  const id = value.event_id;
  const dp = value.dp_rank;
  if (typeof id !== "number" || !Number.isSafeInteger(id) || id < 0) return fail("event_id must be an integer >= 0");
  if (typeof dp !== "number" || !Number.isSafeInteger(dp) || dp < 0) return fail("dp_rank must be an integer >= 0");
  const data = value.data;
  if (!isRecord(data)) return fail("data must be an object");
  const keys = Object.keys(data);
  if (keys.length !== 1) return fail("data must have exactly one of stored, removed, cleared");
  const stored = data.stored;
  if (isRecord(stored)) {
    let parent: bigint | null = null;
    if (stored.parent_hash !== null && stored.parent_hash !== undefined) {
      const p = u64(stored.parent_hash, "data.stored.parent_hash");
      if (!p.ok) return p;
      parent = p.value;
    }
    if (stored.start_position !== null && stored.start_position !== undefined)
      return fail("data.stored.start_position must be null (kvsim streams are parent-linked)");
    if (!Array.isArray(stored.blocks)) return fail("data.stored.blocks must be an array");
    const out: RouterStoredBlock[] = [];
    for (const [i, b] of (stored.blocks as readonly JsonValue[]).entries()) {
      if (!isRecord(b)) return fail(`data.stored.blocks[${i}] must be an object`);
      const bh = u64(b.block_hash, `data.stored.blocks[${i}].block_hash`);
      if (!bh.ok) return bh;
      const th = u64(b.tokens_hash, `data.stored.blocks[${i}].tokens_hash`);
      if (!th.ok) return th;
      out.push({ block_hash: bh.value, tokens_hash: th.value });
    }
    return { ok: true, value: { event_id: id, dp_rank: dp, data: { stored: { parent_hash: parent, start_position: null, blocks: out } } } };
  }
  const removed = data.removed;
  if (isRecord(removed)) {
    if (!Array.isArray(removed.block_hashes)) return fail("data.removed.block_hashes must be an array");
    const hashes: bigint[] = [];
    for (const [i, h] of (removed.block_hashes as readonly JsonValue[]).entries()) {
      const v = u64(h, `data.removed.block_hashes[${i}]`);
      if (!v.ok) return v;
      hashes.push(v.value);
    }
    return { ok: true, value: { event_id: id, dp_rank: dp, data: { removed: { block_hashes: hashes } } } };
  }
  if (isRecord(data.cleared)) return { ok: true, value: { event_id: id, dp_rank: dp, data: { cleared: {} } } };
  return fail(`data.${keys[0] ?? ""} must be one of stored, removed, cleared (an object)`);
}

/** A router event's data back as a kvsim pool event of `groupIndex`; undefined for `cleared`. */
export function fromRouterEventData(data: RouterKvEventData, groupIndex: number): KvEvent | undefined {
  if ("stored" in data) {
    return {
      type: "stored",
      groupIndex,
      parentHash: data.stored.parent_hash,
      blocks: data.stored.blocks.map((b): { blockHash: BlockHash; tokensHash: BlockHash } => ({ blockHash: b.block_hash, tokensHash: b.tokens_hash })),
    };
  }
  if ("removed" in data) return { type: "removed", groupIndex, blockHashes: [...data.removed.block_hashes] };
  return undefined;
}
