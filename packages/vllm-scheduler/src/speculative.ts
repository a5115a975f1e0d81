/**
 * Speculative decoding as a scheduler policy (vllm-rules 1.2 step 2, 1.3, 1.5): the drafter's
 * proposals, the acceptance draws and the counters the report reads. The one module that owns the
 * acceptance sampling (architecture.md, "Speculative decoding").
 *
 * A simulator has no logits, so whether a draft is accepted is drawn from the spec's acceptance
 * model: position i (from 1) is accepted with probability p_i given positions 1..i-1 were, and the
 * first rejection ends the accepted prefix, as vLLM's rejection sampler does. The draw for draft
 * position i of the step that samples output `index` of a request is a pure function of (seed,
 * request id, index, i): the same request accepts the same drafts on any rank, in any batch, and
 * whatever other requests run, so a run is deterministic for its seed and acceptance 0 never
 * depends on the draws.
 */
import { acceptanceByPosition, type SpeculativeConfig, type SpeculativeMethod } from "@kvsim/profile-schema";

/** What the drafts of a run came to (summed over the steps of one rank, or of a replay). */
export interface SpeculationStats {
  readonly method: SpeculativeMethod;
  readonly numSpeculativeTokens: number;
  /** Decode rows that verified at least one draft. */
  readonly verifiedRows: number;
  /** Draft tokens scheduled for verification. */
  readonly draftedTokens: number;
  /** Draft tokens accepted. */
  readonly acceptedTokens: number;
  /** Per draft position (k entries): rows whose draft at that position was accepted. */
  readonly acceptedAtPosition: readonly number[];
  /** Per draft position (k entries): rows that verified a draft at that position. */
  readonly draftedAtPosition: readonly number[];
}

/** Adds `b`'s counts to `a`'s (same method and k); either may be undefined. */
export function addSpeculationStats(a: SpeculationStats | undefined, b: SpeculationStats | undefined): SpeculationStats | undefined {
  if (a === undefined) return b;
  if (b === undefined) return a;
  return {
    method: a.method,
    numSpeculativeTokens: Math.max(a.numSpeculativeTokens, b.numSpeculativeTokens),
    verifiedRows: a.verifiedRows + b.verifiedRows,
    draftedTokens: a.draftedTokens + b.draftedTokens,
    acceptedTokens: a.acceptedTokens + b.acceptedTokens,
    acceptedAtPosition: addArrays(a.acceptedAtPosition, b.acceptedAtPosition),
    draftedAtPosition: addArrays(a.draftedAtPosition, b.draftedAtPosition),
  };
}

function addArrays(a: readonly number[], b: readonly number[]): number[] {
  const out = new Array<number>(Math.max(a.length, b.length)).fill(0);
  for (let i = 0; i < out.length; i++) out[i] = (a[i] ?? 0) + (b[i] ?? 0);
  return out;
}

/** murmur3's 32-bit finaliser: a bijection that spreads every input bit over the output. */
function fmix32(x: number): number {
  x ^= x >>> 16;
  x = Math.imul(x, 0x85ebca6b);
  x ^= x >>> 13;
  x = Math.imul(x, 0xc2b2ae35);
  x ^= x >>> 16;
  return x >>> 0;
}

/**
 * The uniform draw in [0, 1) for draft `position` (from 0) of the step sampling output `index` of
 * the request whose id hashes to `idHash`: two rounds of murmur3's finaliser over the inputs mixed
 * with odd constants (the golden ratio's, as token-ids.ts does), then the 32 bits over 2^32.
 */
function acceptanceDraw(seed: number, idHash: number, index: number, position: number): number {
  const a = fmix32((idHash ^ Math.imul(index + 1, 0x9e3779b1)) >>> 0);
  const b = fmix32((a ^ seed ^ Math.imul(position + 1, 0x7feb352d)) >>> 0);
  return b / 4294967296;
}

/** The speculative decoding of one rank (decode and aggregated roles; prefill ranks never speculate). */
export class Speculation {
  readonly method: SpeculativeMethod;
  /** k: drafts proposed per row and step. */
  readonly k: number;
  /**
   * vLLM's num_lookahead_tokens: the drafter of an EAGLE-style method (eagle, eagle3, mtp) and of a
   * draft model writes its own KV for the next proposals, so every running allocation holds k
   * slots more; n-gram lookup writes none.
   */
  readonly lookahead: number;
  private readonly p: Float64Array;
  private readonly seed: number;
  private verifiedRows = 0;
  private draftedTokens = 0;
  private acceptedTokens = 0;
  private readonly acceptedAt: Float64Array;
  private readonly draftedAt: Float64Array;

  constructor(config: SpeculativeConfig) {
    this.method = config.method;
    this.k = config.num_speculative_tokens;
    this.lookahead = config.method === "ngram" ? 0 : this.k;
    this.p = Float64Array.from(acceptanceByPosition(config));
    this.seed = (config.seed ?? 0) >>> 0;
    this.acceptedAt = new Float64Array(this.k);
    this.draftedAt = new Float64Array(this.k);
  }

  /**
   * How many of `drafts` drafts (<= k) the step sampling output `index` of the request accepts:
   * the longest prefix of positions whose draw falls below its probability. Counts them.
   */
  accept(idHash: number, index: number, drafts: number): number {
    let a = 0;
    while (a < drafts && acceptanceDraw(this.seed, idHash, index, a) < this.p[a]!) a++;
    this.verifiedRows++;
    this.draftedTokens += drafts;
    this.acceptedTokens += a;
    for (let i = 0; i < drafts; i++) this.draftedAt[i]!++;
    for (let i = 0; i < a; i++) this.acceptedAt[i]!++;
    return a;
  }

  stats(): SpeculationStats {
    return {
      method: this.method,
      numSpeculativeTokens: this.k,
      verifiedRows: this.verifiedRows,
      draftedTokens: this.draftedTokens,
      acceptedTokens: this.acceptedTokens,
      acceptedAtPosition: Array.from(this.acceptedAt),
      draftedAtPosition: Array.from(this.draftedAt),
    };
  }
}
