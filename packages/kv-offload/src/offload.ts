/**
 * One rank's view of its offload tiers: what the GPU pool stores and evicts feeds them, and a
 * prefix lookup continues past the GPU hit into them. A hit is loaded into the GPU pool by the
 * per-group rules of a P/D handoff (docs/rules/grouped-pd.md §2, the decode rank's side): the
 * missing full-attention blocks, the in-window blocks of window groups, the running state of a
 * Mamba-type group.
 */
import type { BlockKeyView, BlockListener, PromptTokens } from "@kvsim/kv-pool";
import type { CacheGroup } from "@kvsim/profile-schema";
import type { EvictedSink, TierStore } from "./tier-store.js";

/** How one cache group constrains and feeds a tier hit. */
interface GroupRule {
  readonly kind: "full" | "window" | "state" | "none";
  readonly blockSize: number;
  readonly window: number;
  readonly bytesPerBlock: number;
  /** GPU blocks of this group per offloaded block (the offload block size over the group's block size). */
  readonly k: number;
}

/** The pool a KvOffload looks keys up in (kv-pool's KvCacheManager). */
export interface OffloadKeySource {
  lookupKeys(prompt: PromptTokens, blockSize: number): BlockKeyView;
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
  /** The blocks loaded: their slots in their tiers, and which tier each comes from. */
  readonly slots: readonly number[];
  readonly tierOf: readonly number[];
}

/** A load in flight. */
export interface OffloadLoad {
  readonly hit: OffloadHit;
  readonly startMs: number;
  /** When the last tier's last byte is in the GPU pool. */
  readonly doneMs: number;
}

/**
 * What the last lookup for a request found, so the next one (its admission retried on a later
 * step) resumes the full-attention scan where it stopped: the blocks before were all held then,
 * and none left a tier since when no tier evicted anything (a block only leaves by eviction).
 */
export class LookupMemo {
  gpuHitTokens = -1;
  evictions = -1;
  fullEnd = 0;
  /** The hit found, kept while no tier stored or evicted a block and none had a store in flight: it is then the same hit. */
  hit: OffloadHit | undefined = undefined;
  stores = -1;
}

function gcd(a: number, b: number): number {
  while (b !== 0) [a, b] = [b, a % b];
  return a;
}

/**
 * The offload tiers of one rank, in order below its GPU pool (a tier may be shared with other
 * ranks). It is the pool's BlockListener: pass it as `blockListener` when creating the pool, then
 * `attach` the pool, whose keys lookups read. The caller sets `clockMs` to the time the pool's
 * changes happen at (a step's start for its evictions, its end for the blocks it computes).
 *
 * A tier holds offloaded blocks of `blockTokens` tokens (vLLM's offloading connector's
 * `block_size`, LMCache's chunk): k = blockTokens / B consecutive GPU blocks of a group, keyed by
 * the last one's key (a chained key names the whole prefix), stored once the GPU caches that last
 * block. A Mamba-type group's offloaded block is the one state at its end.
 */
export class KvOffload implements BlockListener {
  private readonly rules: readonly GroupRule[];
  /** Tokens per offloaded block: hits are whole multiples of it. */
  readonly blockTokens: number;
  /** False when no hit can ever be served (a non-caching attention group, or prefix caching off). */
  private readonly possible: boolean;
  private keys: OffloadKeySource | undefined;
  /** When the pool's changes being told now happen. */
  clockMs = 0;
  /** Set while the pool caches blocks just loaded from the tiers: they are not stored again (vLLM's connector resumes storing after them). */
  muted = false;
  /** The tier `find` found its block in. */
  private foundTier = -1;
  /** Per tier, the sink its evictions go to (the next tier when it keeps evictions). */
  private readonly sinks: (EvictedSink | undefined)[];
  /** The tiers that keep every block the GPU pool caches. */
  private readonly writeThrough: readonly number[];

  /**
   * `groups`: the rank pool's cache groups (kv-pool's poolGroupsForProfile), each with its
   * `transfer_bytes_per_block` (one TP rank's bytes of one block). `prefixCaching`: the engine's.
   * `blockTokens`: tokens per offloaded block, a multiple of every group's block size (default:
   * their lcm, the GPU block, as vLLM's connector).
   */
  constructor(
    readonly tiers: readonly TierStore[],
    groups: readonly CacheGroup[],
    prefixCaching: boolean,
    blockTokens?: number,
  ) {
    if (tiers.length === 0) throw new RangeError("an offload needs at least one tier");
    let possible = prefixCaching;
    let unit = 1;
    for (const g of groups) {
      const constrains = g.kind === "full_attention" || g.kind === "sliding_window" || g.kind === "convolution" || g.prefix_cacheable === true;
      if (!constrains) continue;
      if (g.prefix_cacheable !== true) possible = false;
      unit = (unit / gcd(unit, g.block_size_tokens)) * g.block_size_tokens;
    }
    const c = blockTokens ?? unit;
    if (!Number.isSafeInteger(c) || c < 1 || c % unit !== 0) {
      throw new RangeError(`the offloaded block of ${c} tokens must be a multiple of every cache group's block (${unit} tokens)`);
    }
    const rules: GroupRule[] = [];
    for (const g of groups) {
      const bytes = g.transfer_bytes_per_block;
      if (bytes === undefined) throw new RangeError(`cache group ${g.name} has no transfer_bytes_per_block: offloading needs each group's bytes per block`);
      let kind: GroupRule["kind"];
      if (g.kind === "full_attention") kind = "full";
      else if (g.kind === "sliding_window" || g.kind === "convolution") kind = "window";
      else kind = g.prefix_cacheable === true ? "state" : "none";
      const k = kind === "none" ? 1 : c / g.block_size_tokens;
      // A tier block holds k GPU blocks (one state for a Mamba-type group).
      if ((kind === "state" ? 1 : k) * bytes > 0x7fffffff) {
        throw new RangeError(`cache group ${g.name}: an offloaded block of ${k} x ${bytes} bytes; a tier holds blocks of at most 2^31 - 1 bytes`);
      }
      rules.push({
        kind,
        blockSize: g.block_size_tokens,
        window: "window_tokens" in g && g.window_tokens !== undefined ? g.window_tokens : 0,
        bytesPerBlock: bytes,
        k,
      });
    }
    this.rules = rules;
    this.blockTokens = c;
    this.possible = possible && rules.some((r) => r.kind !== "none");
    this.writeThrough = tiers.flatMap((t, i) => (t.config.store === "write_through" ? [i] : []));
    if (tiers[0]!.config.store === "on_evict" && rules.some((r) => r.kind !== "none" && r.k !== 1)) {
      throw new RangeError(
        "a first tier that keeps the GPU pool's evictions (on_evict) needs offloaded blocks of one GPU block: the pool evicts single blocks",
      );
    }
    this.sinks = tiers.map((_, i) => {
      const below = tiers[i + 1];
      if (below?.config.store !== "on_evict") return undefined;
      return (group: number, hi: number, lo: number, bytes: number) => {
        this.storeAt(i + 1, group, hi, lo, bytes);
      };
    });
  }

  /** The pool whose keys lookups read (the pool this offload listens to). */
  attach(keys: OffloadKeySource): void {
    this.keys = keys;
  }

  /**
   * BlockListener: the GPU pool cached blocks; write-through tiers keep each offloaded block whose
   * last GPU block is among them (one already held is marked used).
   */
  cached(group: number, keys: Int32Array, count: number, first: number): void {
    const wt = this.writeThrough;
    if (wt.length === 0 || this.muted) return;
    const r = this.rules[group]!;
    if (r.kind === "none") return;
    const k = r.k;
    const bytes = r.kind === "state" ? r.bytesPerBlock : r.bytesPerBlock * k;
    // Block first + i ends an offloaded block when (first + i + 1) is a multiple of k.
    for (let i = k - 1 - (first % k); i < count; i += k) {
      for (const t of wt) this.storeAt(t, group, keys[2 * i]!, keys[2 * i + 1]!, bytes);
    }
  }

  /** BlockListener: the GPU pool evicted a key's last copy; the first tier keeps it if it keeps evictions. */
  evicted(group: number, hi: number, lo: number): void {
    const r = this.rules[group]!;
    if (this.tiers[0]!.config.store === "on_evict" && r.kind !== "none") this.storeAt(0, group, hi, lo, r.bytesPerBlock);
  }

  private storeAt(t: number, group: number, hi: number, lo: number, bytes: number): void {
    this.tiers[t]!.store(group, hi, lo, bytes, this.clockMs, this.sinks[t]);
  }

  /**
   * The longest hit in the tiers that continues a GPU hit of `gpuHitTokens` (whole blocks), at most
   * `maxTokens` (vLLM keeps at least the last token to compute) and within the prompt's whole
   * offloaded blocks; undefined when the tiers add nothing. An offloaded block counts from the
   * first tier (in order) whose store of it completed by `nowMs`; the one holding the GPU hit's end
   * is read from there (vLLM's connector looks up from that block). The hit must leave every group
   * what it needs at its end: every full-attention block, the in-window blocks of window groups,
   * the state at its end for a Mamba-type group (vLLM's hybrid fixed point). Changes nothing.
   */
  lookup(prompt: PromptTokens, gpuHitTokens: number, maxTokens: number, nowMs: number, memo?: LookupMemo): OffloadHit | undefined {
    if (!this.possible) return undefined;
    const keys = this.keys;
    if (keys === undefined) throw new Error("an offload looks keys up in its pool: attach() it first");
    const c = this.blockTokens;
    const limit = Math.floor(Math.min(maxTokens, prompt.length) / c) * c;
    if (limit <= gpuHitTokens) return undefined;
    let evictions = 0;
    let stores = 0;
    let storesDone = 0;
    for (const t of this.tiers) {
      evictions += t.counters.blocksEvicted;
      stores += t.counters.blocksStored;
      storesDone = Math.max(storesDone, t.storesDoneAtMs);
    }
    const valid = memo?.gpuHitTokens === gpuHitTokens && memo.evictions === evictions;
    // Nothing stored, evicted or completing since the memo's hit was found: the same hit.
    if (valid && memo.stores === stores && memo.hit !== undefined) return memo.hit;
    // Full attention: the offloaded blocks from the one holding the GPU hit's end must all be held.
    const resume = valid ? Math.min(memo.fullEnd, limit) : Math.floor(gpuHitTokens / c) * c;
    let end = limit;
    for (let g = 0; g < this.rules.length; g++) {
      const r = this.rules[g]!;
      if (r.kind !== "full") continue;
      const view = keys.lookupKeys(prompt, r.blockSize);
      for (let chunk = resume / c; chunk < end / c; chunk++) {
        if (this.find(g, view, (chunk + 1) * r.k - 1, nowMs) < 0) {
          end = chunk * c;
          break;
        }
      }
    }
    let found: OffloadHit | undefined;
    for (let l = end; l > gpuHitTokens && found === undefined; l -= c) {
      if (this.holdsEnd(keys, prompt, gpuHitTokens, l, nowMs)) found = this.collect(keys, prompt, gpuHitTokens, l, nowMs);
    }
    if (memo !== undefined) {
      memo.gpuHitTokens = gpuHitTokens;
      memo.evictions = evictions;
      memo.fullEnd = end;
      // Kept only when no store was in flight: a block completing later could change the hit.
      memo.hit = storesDone <= nowMs ? found : undefined;
      memo.stores = stores;
    }
    return found;
  }

  /** The GPU blocks a hit ending at `l` loads, by group: [first, end) indices. */
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

  /** The GPU block index whose key names the offloaded block holding GPU block `i`. */
  private static chunkLast(r: GroupRule, i: number): number {
    return (Math.floor(i / r.k) + 1) * r.k - 1;
  }

  /** Window and state groups hold what a hit ending at `l` needs (full attention was checked). */
  private holdsEnd(keys: OffloadKeySource, prompt: PromptTokens, gpuHitTokens: number, l: number, nowMs: number): boolean {
    for (let g = 0; g < this.rules.length; g++) {
      const r = this.rules[g]!;
      if (r.kind !== "window" && r.kind !== "state") continue;
      const view = keys.lookupKeys(prompt, r.blockSize);
      const [from, to] = this.needed(r, gpuHitTokens, l);
      for (let i = from; i < to; i = KvOffload.chunkLast(r, i) + 1) if (this.find(g, view, KvOffload.chunkLast(r, i), nowMs) < 0) return false;
    }
    return true;
  }

  private collect(keys: OffloadKeySource, prompt: PromptTokens, gpuHitTokens: number, l: number, nowMs: number): OffloadHit {
    const n = this.tiers.length;
    const tokensPerTier = new Array<number>(n).fill(0);
    const bytesPerTier = new Array<number>(n).fill(0);
    const slots: number[] = [];
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
      const view = keys.lookupKeys(prompt, r.blockSize);
      const [from, to] = this.needed(r, gpuHitTokens, l);
      let t = -1;
      for (let i = from; i < to; i++) {
        if (i === from || i % r.k === 0) {
          // The next offloaded block: read (and pinned) once.
          slots.push(this.find(g, view, KvOffload.chunkLast(r, i), nowMs));
          t = this.foundTier;
          tierOf.push(t);
        }
        bytesPerTier[t]! += r.bytesPerBlock;
        if (g === tokenGroup && r.kind === "full") tokensPerTier[t]! += r.blockSize;
        else if (g === tokenGroup && i === to - 1) tokensPerTier[t]! += l - gpuHitTokens;
      }
    }
    return { gpuHitTokens, tokens: l, tokensPerTier, bytesPerTier, slots, tierOf };
  }

  /** The slot of block `i` of `view` in `group` in the first tier holding it ready at `nowMs` (that tier in `foundTier`), or -1. */
  private find(group: number, view: BlockKeyView, i: number, nowMs: number): number {
    const hi = view.blockHi(i);
    const lo = view.blockLo(i);
    for (let t = 0; t < this.tiers.length; t++) {
      const s = this.tiers[t]!.ready(group, hi, lo, nowMs);
      if (s >= 0) {
        this.foundTier = t;
        return s;
      }
    }
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
    for (let i = 0; i < hit.slots.length; i++) {
      const e = hit.slots[i]!;
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
    for (let i = 0; i < hit.slots.length; i++) this.tiers[hit.tierOf[i]!]!.unpin(hit.slots[i]!);
  }
}
