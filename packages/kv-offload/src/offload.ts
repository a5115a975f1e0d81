/**
 * One rank's view of its offload tiers: what the GPU pool stores and evicts feeds them, and a
 * prefix lookup continues past the GPU hit into them. A hit is loaded into the GPU pool by the
 * per-group rules of a P/D handoff (docs/rules/grouped-pd.md §2, the decode rank's side): the
 * missing full-attention blocks, the in-window blocks of window groups, the running state of a
 * Mamba-type group.
 */
import type { KvEvent, PromptTokens } from "@kvsim/kv-pool";
import type { CacheGroup } from "@kvsim/profile-schema";
import type { EvictedBlock, TierEntry, TierStore } from "./tier-store.js";

/** How one cache group constrains and feeds a tier hit. */
interface GroupRule {
  readonly kind: "full" | "window" | "state" | "none";
  readonly blockSize: number;
  readonly window: number;
  readonly bytesPerBlock: number;
}

/** A hit in the tiers past the GPU hit, found by `lookup`; `load` starts it. */
export interface OffloadHit {
  /** The GPU hit it continues, in tokens. */
  readonly gpuHitTokens: number;
  /** Tokens computed once the hit is loaded (GPU hit plus the tiers' part), whole blocks. */
  readonly tokens: number;
  /** Per tier (the tiers' order), the prompt tokens it serves. */
  readonly tokensPerTier: readonly number[];
  /** Per tier, the bytes it loads (one TP rank's). */
  readonly bytesPerTier: readonly number[];
  /** The blocks loaded, and which tier each comes from. */
  readonly entries: readonly TierEntry[];
  readonly tierOf: readonly number[];
}

/** A load in flight. */
export interface OffloadLoad {
  readonly hit: OffloadHit;
  readonly startMs: number;
  /** When the last tier's last byte is in the GPU pool. */
  readonly doneMs: number;
}

function gcd(a: number, b: number): number {
  while (b !== 0) [a, b] = [b, a % b];
  return a;
}

/** The offload tiers of one rank, in order below its GPU pool (a tier may be shared with other ranks). */
export class KvOffload {
  private readonly rules: readonly GroupRule[];
  /** Hits are whole multiples of this (the lcm of the constraining groups' block sizes). */
  private readonly unit: number;
  /** False when no hit can ever be served (a non-caching attention group, or prefix caching off). */
  private readonly possible: boolean;
  private readonly evicted: EvictedBlock[] = [];

  /**
   * `groups`: the rank pool's cache groups (kv-pool's poolGroupsForProfile), each with its
   * `transfer_bytes_per_block` (one TP rank's bytes of one block). `prefixCaching`: the engine's.
   */
  constructor(
    readonly tiers: readonly TierStore[],
    groups: readonly CacheGroup[],
    prefixCaching: boolean,
  ) {
    if (tiers.length === 0) throw new RangeError("an offload needs at least one tier");
    const rules: GroupRule[] = [];
    let possible = prefixCaching;
    let unit = 1;
    for (const g of groups) {
      const bytes = g.transfer_bytes_per_block;
      if (bytes === undefined) throw new RangeError(`cache group ${g.name} has no transfer_bytes_per_block: offloading needs each group's bytes per block`);
      let kind: GroupRule["kind"];
      if (g.kind === "full_attention") kind = "full";
      else if (g.kind === "sliding_window" || g.kind === "convolution") kind = "window";
      else kind = g.prefix_cacheable === true ? "state" : "none";
      if (kind !== "none") {
        if (g.prefix_cacheable !== true) possible = false;
        unit = (unit / gcd(unit, g.block_size_tokens)) * g.block_size_tokens;
      }
      rules.push({
        kind,
        blockSize: g.block_size_tokens,
        window: "window_tokens" in g && g.window_tokens !== undefined ? g.window_tokens : 0,
        bytesPerBlock: bytes,
      });
    }
    this.rules = rules;
    this.unit = unit;
    this.possible = possible && rules.some((r) => r.kind !== "none");
  }

  /**
   * What the GPU pool stored and removed at `atMs`: stored blocks go to write-through tiers,
   * removed ones to the first tier if it keeps evictions; each tier's evictions go on to the tier
   * below it if that one keeps evictions.
   */
  onGpuEvents(events: readonly KvEvent[], atMs: number): void {
    for (const ev of events) {
      const rule = this.rules[ev.groupIndex];
      if (rule === undefined) throw new RangeError(`KV event for cache group ${ev.groupIndex}, which the rank does not have`);
      if (ev.type === "stored") {
        for (let t = 0; t < this.tiers.length; t++) {
          if (this.tiers[t]!.config.store !== "write_through") continue;
          for (const b of ev.blocks) this.storeAt(t, ev.groupIndex, b.blockHash, rule.bytesPerBlock, atMs);
        }
      } else if (this.tiers[0]!.config.store === "on_evict") {
        for (const h of ev.blockHashes) this.storeAt(0, ev.groupIndex, h, rule.bytesPerBlock, atMs);
      }
    }
  }

  private storeAt(t: number, group: number, hash: bigint, bytes: number, atMs: number): void {
    const tier = this.tiers[t]!;
    const below = this.tiers[t + 1];
    const chain = below?.config.store === "on_evict";
    const evicted = this.evicted;
    evicted.length = 0;
    tier.store(group, hash, bytes, atMs, chain ? evicted : undefined);
    if (!chain || evicted.length === 0) return;
    const moved = evicted.splice(0, evicted.length);
    for (const e of moved) this.storeAt(t + 1, e.group, e.hash, e.bytes, atMs);
  }

  /**
   * The longest hit in the tiers that continues a GPU hit of `gpuHitTokens` (whole blocks), at most
   * `maxTokens` (vLLM keeps at least the last token to compute) and within the prompt's whole
   * blocks; undefined when the tiers add nothing. A block counts from the first tier (in order)
   * whose store of it completed by `nowMs`. The hit must leave every group what it needs at its
   * end: every full-attention block, the in-window blocks of window groups, the state at its end
   * for a Mamba-type group (vLLM's hybrid fixed point). Changes nothing.
   */
  lookup(prompt: PromptTokens, gpuHitTokens: number, maxTokens: number, nowMs: number): OffloadHit | undefined {
    if (!this.possible) return undefined;
    const unit = this.unit;
    const limit = Math.floor(Math.min(maxTokens, prompt.length) / unit) * unit;
    if (limit <= gpuHitTokens) return undefined;
    // Full attention: the blocks after the GPU hit must all be held, without a gap.
    let end = limit;
    for (let g = 0; g < this.rules.length; g++) {
      const r = this.rules[g]!;
      if (r.kind !== "full") continue;
      const hashes = prompt.blockHashes(r.blockSize);
      const last = end / r.blockSize;
      for (let i = gpuHitTokens / r.blockSize; i < last; i++) {
        if (this.find(g, hashes[i]!, nowMs) < 0) {
          end = i * r.blockSize;
          break;
        }
      }
    }
    for (let l = Math.floor(end / unit) * unit; l > gpuHitTokens; l -= unit) {
      if (this.holdsEnd(prompt, gpuHitTokens, l, nowMs)) return this.collect(prompt, gpuHitTokens, l, nowMs);
    }
    return undefined;
  }

  /** The blocks a hit ending at `l` needs, by group: [first, end) indices. */
  private needed(r: GroupRule, gpuHitTokens: number, l: number): [number, number] {
    const b = r.blockSize;
    const endIndex = l / b;
    switch (r.kind) {
      case "full":
        return [gpuHitTokens / b, endIndex];
      case "window":
        return [Math.max(Math.floor(Math.max(0, l - r.window + 1) / b), gpuHitTokens / b), endIndex];
      case "state":
        return [endIndex - 1, endIndex];
      case "none":
        return [0, 0];
    }
  }

  /** Window and state groups hold what a hit ending at `l` needs (full attention was checked). */
  private holdsEnd(prompt: PromptTokens, gpuHitTokens: number, l: number, nowMs: number): boolean {
    for (let g = 0; g < this.rules.length; g++) {
      const r = this.rules[g]!;
      if (r.kind !== "window" && r.kind !== "state") continue;
      const hashes = prompt.blockHashes(r.blockSize);
      const [from, to] = this.needed(r, gpuHitTokens, l);
      for (let i = from; i < to; i++) if (this.find(g, hashes[i]!, nowMs) < 0) return false;
    }
    return true;
  }

  private collect(prompt: PromptTokens, gpuHitTokens: number, l: number, nowMs: number): OffloadHit {
    const n = this.tiers.length;
    const tokensPerTier = new Array<number>(n).fill(0);
    const bytesPerTier = new Array<number>(n).fill(0);
    const entries: TierEntry[] = [];
    const tierOf: number[] = [];
    let tokenGroup = -1;
    for (let g = 0; g < this.rules.length; g++) {
      const r = this.rules[g]!;
      if (r.kind === "none") continue;
      // The tokens a tier served are counted on the first full-attention group (or, with none, the first constraining group).
      if (tokenGroup < 0 || (r.kind === "full" && this.rules[tokenGroup]!.kind !== "full")) tokenGroup = g;
    }
    for (let g = 0; g < this.rules.length; g++) {
      const r = this.rules[g]!;
      if (r.kind === "none") continue;
      const hashes = prompt.blockHashes(r.blockSize);
      const [from, to] = this.needed(r, gpuHitTokens, l);
      for (let i = from; i < to; i++) {
        const t = this.find(g, hashes[i]!, nowMs);
        entries.push(this.tiers[t]!.ready(g, hashes[i]!, nowMs)!);
        tierOf.push(t);
        bytesPerTier[t]! += r.bytesPerBlock;
        if (g === tokenGroup && r.kind === "full") tokensPerTier[t]! += r.blockSize;
        else if (g === tokenGroup && i === to - 1) tokensPerTier[t]! += l - gpuHitTokens;
      }
    }
    return { gpuHitTokens, tokens: l, tokensPerTier, bytesPerTier, entries, tierOf };
  }

  /** The first tier holding (group, hash) ready at `nowMs`, or -1. */
  private find(group: number, hash: bigint, nowMs: number): number {
    for (let t = 0; t < this.tiers.length; t++) if (this.tiers[t]!.ready(group, hash, nowMs) !== undefined) return t;
    return -1;
  }

  /**
   * Starts loading a hit at `nowMs`: its blocks are pinned (not evicted while they are read) and
   * marked used; each tier's part moves on that tier's read channel; the load is done when the
   * slowest part is.
   */
  load(hit: OffloadHit, nowMs: number): OffloadLoad {
    let done = nowMs;
    for (let t = 0; t < this.tiers.length; t++) {
      const bytes = hit.bytesPerTier[t]!;
      const tokens = hit.tokensPerTier[t]!;
      if (bytes === 0 && tokens === 0) continue;
      const tier = this.tiers[t]!;
      done = Math.max(done, tier.readDone(bytes, nowMs));
      const c = tier.counters;
      c.loads++;
      c.bytesLoaded += bytes;
      c.tokensServed += tokens;
    }
    for (let i = 0; i < hit.entries.length; i++) {
      const e = hit.entries[i]!;
      const tier = this.tiers[hit.tierOf[i]!]!;
      tier.pin(e);
      tier.touch(e);
      tier.counters.blocksLoaded++;
    }
    return { hit, startMs: nowMs, doneMs: done };
  }

  /** The load finished (or its request left): its blocks may be evicted again. */
  release(load: OffloadLoad): void {
    const hit = load.hit;
    for (let i = 0; i < hit.entries.length; i++) this.tiers[hit.tierOf[i]!]!.unpin(hit.entries[i]!);
  }
}
