import { createPathPrompt, type PromptTokens } from "@kvsim/kv-pool";
import { InputError, MAX_VIRTUAL_TIME_MS, MAX_VIRTUAL_TIME_TEXT, type Spec, type SyntheticWorkload, type TraceRecord } from "@kvsim/profile-schema";
import { uniformFloat64 } from "pure-rand/distribution/uniformFloat64";
import { xoroshiro128plusFromState } from "pure-rand/generator/xoroshiro128plus";
import type { RandomGenerator } from "pure-rand/types/RandomGenerator";

/** One request as the replay sees it: normalised arrival, lengths and prompt tokens. */
export interface ReplayRequest {
  readonly id: string;
  /** 0-based position in the workload. */
  readonly index: number;
  /** Trace line, when the request came from a trace. */
  readonly line?: number;
  /** Virtual arrival: (file time - first file time) / speedup. */
  readonly arrivalMs: number;
  readonly outputTokens: number;
  /** Prompt length (read this: a Mooncake request builds `tokens` only when asked). */
  readonly inputTokens: number;
  readonly tokens: Uint32Array;
  /** The prompt over `tokens`, when lowering built it (a Mooncake path prompt: no token array). */
  readonly prompt?: PromptTokens;
  readonly sessionId?: string;
}

export interface LowerOptions {
  /** Tokens per Mooncake hash id. */
  readonly traceBlockSize: number;
  /** Arrival times are divided by it. */
  readonly speedup: number;
  /** Names the trace in errors. */
  readonly file: string;
}

/**
 * Length-only prompt tokens (docs/rules/replay.md §2.2): seed = (i x 1,000,003) mod 2^32,
 * token[k] = (seed + k) mod 2^32, so two length-only requests never share a first block.
 */
export function lengthOnlyTokens(index: number, length: number, arena?: TokenArena): Uint32Array {
  const seed = (index * 1_000_003) % 2 ** 32;
  const out = arena?.alloc(length) ?? new Uint32Array(length);
  for (let k = 0; k < length; k++) out[k] = seed + k; // a Uint32Array stores mod 2^32
  return out;
}

/**
 * Hands out prompt arrays carved from large shared buffers. A prompt is one typed array of tens of
 * thousands of tokens; allocating each on its own costs an off-heap allocation and adds external
 * memory pressure that makes the garbage collector run far more often. A chunk is freed once no
 * prompt in it is referenced. Returned arrays start zeroed only if the caller fills them all.
 */
export class TokenArena {
  private chunk = new Uint32Array(0);
  private used = 0;

  // 2^18 tokens (1 MiB): small enough that freed chunks are reused by the allocator instead of
  // being mapped afresh (page faults), large enough to hold several prompts.
  constructor(private readonly chunkTokens = 1 << 18) {}

  alloc(length: number): Uint32Array {
    if (length > this.chunkTokens >>> 2) return new Uint32Array(length);
    if (this.used + length > this.chunk.length) {
      this.chunk = new Uint32Array(this.chunkTokens);
      this.used = 0;
    }
    const out = this.chunk.subarray(this.used, this.used + length);
    this.used += length;
    return out;
  }
}

/**
 * The line numbers of records named `trace-<line>`: ascending integers as runs of consecutive
 * numbers (a trace's lines are one run, or a few), any other number in a Set. Membership is by
 * SameValueZero, as in a Set of the ids themselves.
 */
export class LineSet {
  private readonly starts: number[] = [];
  private readonly ends: number[] = [];
  private readonly others = new Set<number>();

  add(line: number): void {
    const k = this.ends.length;
    if (!Number.isInteger(line) || (k > 0 && line <= this.ends[k - 1]!)) this.others.add(line);
    else if (k > 0 && line === this.ends[k - 1]! + 1) this.ends[k - 1] = line;
    else {
      this.starts.push(line);
      this.ends.push(line);
    }
  }

  has(line: number): boolean {
    if (this.others.has(line)) return true;
    if (!Number.isInteger(line)) return false;
    // The last run starting at or before the line.
    let lo = 0;
    let hi = this.starts.length - 1;
    while (lo <= hi) {
      const mid = (lo + hi) >>> 1;
      if (this.starts[mid]! <= line) lo = mid + 1;
      else hi = mid - 1;
    }
    return hi >= 0 && line <= this.ends[hi]!;
  }

  /** True when `id` is `trace-<line>` of a line in the set (`<line>` as String(line) writes it). */
  hasId(id: string): boolean {
    if (!id.startsWith("trace-")) return false;
    const text = id.slice("trace-".length);
    const line = Number(text);
    return String(line) === text && this.has(line);
  }
}

/**
 * Hash id -> canonical id (0, 1, 2, ... in first-appearance order), on typed arrays: a trace has a
 * distinct id per prompt block, so a Map would cost several times more per id.
 */
class IdMap {
  /**
   * While every id is a small integer (below DENSE_SPREAD x (ids so far + DENSE_SLACK), and below
   * DENSE_LIMIT): canonical id + 1 at index id, 0 for an id not seen. Mooncake traces number their
   * hash ids densely from 0, so a lookup is one read. The first id outside that range moves every
   * id to the table below, for good.
   */
  private dense: Uint32Array | undefined = new Uint32Array(1024);
  /**
   * Open addressing, linear probing, at most 3/4 full. Keys are 32-bit (EMPTY marks an empty slot)
   * until an id does not fit; then 64-bit doubles (-1 marks an empty slot: ids are non-negative
   * integers). Mooncake hash ids are small: the narrow table holds them in half the memory.
   */
  private keys: Uint32Array | Float64Array = new Uint32Array(1024).fill(EMPTY);
  private empty = EMPTY;
  private values = new Uint32Array(1024);
  private count = 0;

  get size(): number {
    return this.count;
  }

  /** The id's canonical number, assigning the next one to a new id. */
  intern(id: number): number {
    const dense = this.dense;
    if (dense !== undefined) {
      if (id < dense.length && id >= 0 && Number.isInteger(id)) {
        const v = dense[id]!;
        if (v !== 0) return v - 1;
        dense[id] = this.count + 1;
        return this.count++;
      }
      if (!this.growDense(id)) return this.intern(id);
      this.dense![id] = this.count + 1;
      return this.count++;
    }
    return this.internInTable(id);
  }

  /**
   * Makes the dense array reach `id` (true), or moves every id to the table when `id` is not a
   * small integer or would spread the array too thin (false).
   */
  private growDense(id: number): boolean {
    const dense = this.dense!;
    if (Number.isInteger(id) && id >= 0 && id < DENSE_LIMIT && id < DENSE_SPREAD * (this.count + DENSE_SLACK)) {
      let size = dense.length;
      while (size <= id) size *= 2;
      const grown = new Uint32Array(size);
      grown.set(dense);
      this.dense = grown;
      return true;
    }
    this.dense = undefined;
    const canonical = new Uint32Array(this.count);
    for (let k = 0; k < dense.length; k++) if (dense[k] !== 0) canonical[dense[k]! - 1] = k;
    // Numbered again in canonical order, so each id gets its own number back.
    this.count = 0;
    for (const id of canonical) this.internInTable(id);
    return false;
  }

  private internInTable(id: number): number {
    if (this.empty === EMPTY && (id >>> 0 !== id || id === EMPTY)) this.widen();
    let mask = this.keys.length - 1;
    for (let slot = IdMap.home(id, mask); ; slot = (slot + 1) & mask) {
      const k = this.keys[slot]!;
      if (k === id) return this.values[slot]!;
      if (k !== this.empty) continue;
      if (this.count > 0xffff_ffff) throw new Error("more than 2^32 distinct hash ids");
      if (4 * (this.count + 1) > 3 * this.keys.length) {
        this.rehash(this.keys.length * 2, this.empty === EMPTY);
        mask = this.keys.length - 1;
        slot = IdMap.home(id, mask);
        while (this.keys[slot] !== this.empty) slot = (slot + 1) & mask;
      }
      this.keys[slot] = id;
      this.values[slot] = this.count;
      return this.count++;
    }
  }

  private static home(id: number, mask: number): number {
    let h = (id >>> 0) ^ Math.imul(Math.floor(id / 0x1_0000_0000), 0x9e37_79b1);
    h = Math.imul(h ^ (h >>> 16), 0x85eb_ca6b);
    h = Math.imul(h ^ (h >>> 13), 0xc2b2_ae35);
    return (h ^ (h >>> 16)) & mask;
  }

  /** From 32-bit keys to doubles, for an id that does not fit. */
  private widen(): void {
    this.rehash(this.keys.length, false);
  }

  private rehash(size: number, narrow: boolean): void {
    const keys = this.keys;
    const empty = this.empty;
    const values = this.values;
    this.keys = narrow ? new Uint32Array(size).fill(EMPTY) : new Float64Array(size).fill(-1);
    this.empty = narrow ? EMPTY : -1;
    this.values = new Uint32Array(size);
    const mask = size - 1;
    for (let i = 0; i < keys.length; i++) {
      if (keys[i] === empty) continue;
      let slot = IdMap.home(keys[i]!, mask);
      while (this.keys[slot] !== this.empty) slot = (slot + 1) & mask;
      this.keys[slot] = keys[i]!;
      this.values[slot] = values[i]!;
    }
  }
}

/** An empty slot of a 32-bit IdMap table (the one 32-bit value no key takes). */
const EMPTY = 0xffff_ffff;
/** The dense array holds ids below 2^24 (64 MiB at most)... */
const DENSE_LIMIT = 1 << 24;
/** ...and below 4 x (distinct ids so far + 4,096): at most 16 bytes per id past the first 64 KiB. */
const DENSE_SPREAD = 4;
const DENSE_SLACK = 4096;

/**
 * Mooncake hash ids to prompt tokens (docs/rules/replay.md §2.3): each distinct id is
 * interned, in first-appearance order over the whole stream, to a canonical id 0, 1, 2, ...; the
 * prompt repeats each canonical id for `blockSize` tokens (the last block may be cut short), so
 * equal id prefixes give equal token prefixes.
 */
export class HashIdInterner {
  private readonly ids = new IdMap();

  tokens(hashIds: readonly number[], length: number, blockSize: number, arena?: TokenArena): Uint32Array {
    const ids = this.canonical(hashIds, length, blockSize);
    const out = arena?.alloc(length) ?? new Uint32Array(length);
    for (let j = 0; j < ids.length; j++) out.fill(ids[j]!, j * blockSize, Math.min(length, (j + 1) * blockSize));
    return out;
  }

  /** The canonical ids of the first ceil(length / blockSize) hash ids: the token value of each block. */
  canonical(hashIds: readonly number[], length: number, blockSize: number): Uint32Array {
    const used = Math.ceil(length / blockSize);
    if (used > hashIds.length) throw new Error(`hash ids cover ${hashIds.length * blockSize} of ${length} tokens`);
    const out = new Uint32Array(used);
    for (let j = 0; j < used; j++) {
      out[j] = this.ids.intern(hashIds[j]!);
    }
    return out;
  }
}

/** A Mooncake request: its tokens are built only if someone reads them (the replay reads `inputTokens`). */
class PathRequest implements ReplayRequest {
  readonly id: string;
  readonly index: number;
  readonly line?: number;
  readonly arrivalMs: number;
  readonly outputTokens: number;
  readonly inputTokens: number;
  readonly sessionId?: string;

  constructor(
    fields: Omit<ReplayRequest, "tokens" | "prompt">,
    readonly prompt: PromptTokens,
  ) {
    this.id = fields.id;
    this.index = fields.index;
    if (fields.line !== undefined) this.line = fields.line;
    this.arrivalMs = fields.arrivalMs;
    this.outputTokens = fields.outputTokens;
    this.inputTokens = fields.inputTokens;
    if (fields.sessionId !== undefined) this.sessionId = fields.sessionId;
  }

  get tokens(): Uint32Array {
    return this.prompt.tokens;
  }
}

/**
 * Lowers a stream of trace records to replay requests, lazily: one record is read per request
 * pulled. Arrivals are normalised (the first becomes 0, all divided by `speedup`) and must not go
 * back in time; request ids must be unique. Records without an id are named `trace-<line>`.
 */
export async function* lowerTrace(records: AsyncIterable<TraceRecord> | Iterable<TraceRecord>, opts: LowerOptions): AsyncGenerator<ReplayRequest> {
  const interner = new HashIdInterner();
  const arena = new TokenArena();
  // Ids the trace gives; the ids made from line numbers are kept as the numbers, in runs.
  const seen = new Set<string>();
  const generated = new LineSet();
  let index = 0;
  let first: number | undefined;
  let previous = -Infinity;
  const fail = (line: number, path: string, message: string): never => {
    throw new InputError(opts.file, [{ path, message, line }]);
  };
  for await (const r of records) {
    if (!Number.isFinite(r.arrivalMs)) fail(r.line, "arrival", `arrival time must be finite, got ${r.arrivalMs}`);
    if (r.arrivalMs < previous) {
      fail(r.line, "arrival", `arrival ${r.arrivalMs} ms is earlier than the previous request's ${previous} ms: a trace must be sorted by time`);
    }
    previous = r.arrivalMs;
    first ??= r.arrivalMs;
    const arrivalMs = (r.arrivalMs - first) / opts.speedup;
    if (!(arrivalMs <= MAX_VIRTUAL_TIME_MS))
      fail(r.line, "arrival", `arrives ${arrivalMs} ms after the first request, beyond ${MAX_VIRTUAL_TIME_TEXT} of virtual time`);
    const id = r.requestId ?? `trace-${r.line}`;
    if (r.requestId === undefined ? generated.has(r.line) || seen.has(id) : seen.has(id) || generated.hasId(id)) {
      fail(r.line, "request_id", `duplicate request id "${id}"`);
    }
    if (r.requestId === undefined) generated.add(r.line);
    else seen.add(id);
    const common = {
      id,
      index,
      line: r.line,
      arrivalMs,
      outputTokens: r.outputTokens,
      inputTokens: r.inputTokens,
      ...(r.sessionId === undefined ? {} : { sessionId: r.sessionId }),
    };
    if (r.hashIds !== undefined && r.inputTokenIds === undefined) {
      const capacity = r.hashIds.length * opts.traceBlockSize;
      if (capacity < r.inputTokens) {
        fail(
          r.line,
          "hash_ids",
          `${r.hashIds.length} hash ids x trace_block_size ${opts.traceBlockSize} = ${capacity} tokens, fewer than input_length ${r.inputTokens}`,
        );
      }
      // A path prompt: block keys from the hash-id path, no token array (kv-pool's createPathPrompt).
      const prompt = createPathPrompt(interner.canonical(r.hashIds, r.inputTokens, opts.traceBlockSize), r.inputTokens, opts.traceBlockSize);
      yield new PathRequest(common, prompt);
    } else {
      let tokens: Uint32Array;
      if (r.inputTokenIds !== undefined) {
        if (r.inputTokenIds.length !== r.inputTokens) fail(r.line, "input_token_ids", `has ${r.inputTokenIds.length} tokens, input length is ${r.inputTokens}`);
        tokens = r.inputTokenIds;
      } else {
        tokens = lengthOnlyTokens(index, r.inputTokens, arena);
      }
      yield { ...common, tokens };
    }
    index++;
  }
}

/** First token of the prefix every synthetic request shares; far from length-only seeds of small indices. */
const SHARED_PREFIX_SEED = 0x9e37_79b9;

const MASK64 = (1n << 64n) - 1n;

/**
 * A xoroshiro128+ generator whose 128-bit state is drawn from `seed` by SplitMix64, the seeding
 * the generator's authors recommend. pure-rand's own `xoroshiro128plus(seed)` puts the seed into
 * the state as is, so small seeds start from nearly-zero states whose first outputs are far from
 * uniform (seed 1's first draw is 1 - 2^-31: a first gap 21 times the mean). SplitMix64 spreads
 * every seed over the whole state, so the first draws are uniform for every seed.
 */
export function seededGenerator(seed: number): RandomGenerator {
  let state = BigInt(seed) & MASK64;
  const next = (): bigint => {
    state = (state + 0x9e37_79b9_7f4a_7c15n) & MASK64;
    let z = state;
    z = ((z ^ (z >> 30n)) * 0xbf58_476d_1ce4_e5b9n) & MASK64;
    z = ((z ^ (z >> 27n)) * 0x94d0_49bb_1331_11ebn) & MASK64;
    return z ^ (z >> 31n);
  };
  const s0 = next();
  let s1 = next();
  if (s0 === 0n && s1 === 0n) s1 = 1n; // the all-zero state is the generator's one fixed point
  const hi = (x: bigint) => Number(BigInt.asIntN(32, x >> 32n));
  const lo = (x: bigint) => Number(BigInt.asIntN(32, x));
  // pure-rand's state order: high and low 32 bits of s0, then of s1.
  return xoroshiro128plusFromState([hi(s0), lo(s0), hi(s1), lo(s1)]);
}

/**
 * A seeded synthetic workload: `requests` requests of fixed lengths, Poisson arrivals at
 * `rate_per_s` (exponential gaps from `seededGenerator(seed)`; no rate: all at 0), and a prefix of
 * floor(input_tokens x shared_prefix_ratio) tokens shared by every request, the rest length-only
 * tokens unique to the request. Ids are `synthetic-<i>`.
 */
export function* syntheticRequests(w: SyntheticWorkload): Generator<ReplayRequest> {
  const rng = seededGenerator(w.seed);
  const shared = Math.floor(w.input_tokens * w.shared_prefix_ratio);
  const prefix = new Uint32Array(shared);
  for (let k = 0; k < shared; k++) prefix[k] = SHARED_PREFIX_SEED + k;
  let t = 0;
  for (let i = 0; i < w.requests; i++) {
    if (i > 0 && w.rate_per_s !== undefined) t += (-Math.log(1 - uniformFloat64(rng)) / w.rate_per_s) * 1000;
    const tokens = new Uint32Array(w.input_tokens);
    tokens.set(prefix);
    tokens.set(lengthOnlyTokens(i, w.input_tokens - shared), shared);
    yield { id: `synthetic-${i}`, index: i, arrivalMs: t, outputTokens: w.output_tokens, inputTokens: tokens.length, tokens };
  }
}

/**
 * A spec workload's requests: the synthetic generator, or the trace's records lowered lazily. `raw`:
 * the trace's record iterator, read through a view without `return`, so stopping the lowering
 * leaves the records open for a cutoff to count what it left; the caller closes them.
 */
export function workloadRequests(
  w: Spec["workload"],
  records: AsyncIterable<TraceRecord> | Iterable<TraceRecord> | undefined,
  traceFile: string | undefined,
): { requests: AsyncIterator<ReplayRequest> | Iterator<ReplayRequest>; raw: AsyncIterator<TraceRecord> | Iterator<TraceRecord> | undefined } {
  if (w.synthetic !== undefined) return { requests: syntheticRequests(w.synthetic), raw: undefined };
  if (records === undefined) throw new Error("the spec's workload is a trace: pass its records to runReplay");
  const file = traceFile ?? w.trace ?? "<trace>";
  const raw = Symbol.asyncIterator in records ? records[Symbol.asyncIterator]() : records[Symbol.iterator]();
  const view: AsyncIterable<TraceRecord> = { [Symbol.asyncIterator]: () => ({ next: async () => raw.next() }) };
  return { requests: lowerTrace(view, { traceBlockSize: w.trace_block_size, speedup: w.speedup, file })[Symbol.asyncIterator](), raw };
}
