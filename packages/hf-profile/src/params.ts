/**
 * Parameter counts and activation widths of one TP rank, per building block, following how vLLM
 * shards each layer (ColumnParallel / RowParallel linears split by TP, replicated KV heads when
 * there are fewer than ranks, vocab-parallel embeddings padded to 64 rows). Counts are elements;
 * norms, biases and small per-head vectors are approximate (they are well under 0.1% of a model).
 */

/** Elements per rank, by how they are stored. */
export interface WeightParts {
  /** Embedding and LM head (model dtype; never quantized here). */
  embedding: number;
  /** Attention, mixer and dense-MLP linears (quantized with the checkpoint). */
  linear: number;
  /** Routed experts (quantized with the checkpoint, or MXFP4). */
  experts: number;
  /** Norms, routers, convolutions, biases and small vectors (model dtype). */
  other: number;
}

export const emptyParts = (): WeightParts => ({ embedding: 0, linear: 0, experts: 0, other: 0 });

export function addParts(into: WeightParts, p: Partial<WeightParts>, times = 1): void {
  into.embedding += (p.embedding ?? 0) * times;
  into.linear += (p.linear ?? 0) * times;
  into.experts += (p.experts ?? 0) * times;
  into.other += (p.other ?? 0) * times;
}

/** KV heads on one rank: split when there are at least as many as ranks, else one replica each. */
export const kvHeadsPerRank = (kvHeads: number, tp: number) => (kvHeads >= tp ? kvHeads / tp : 1);

/** One block's parameters and its widest per-token activation (elements, one rank). */
export interface Block {
  readonly parts: Partial<WeightParts>;
  /** Output width of its widest projection per token on one rank. */
  readonly width: number;
}

/**
 * Grouped-query attention: q, k, v and o projections. `outputGate`: q_proj also projects a gate
 * per query element (Qwen3-Next), so it is twice as wide; o_proj is not.
 */
export function gqaAttention(hidden: number, heads: number, kvHeads: number, headDim: number, tp: number, outputGate = false): Block {
  const q = (heads / tp) * headDim;
  const qProj = outputGate ? 2 * q : q;
  const kv = kvHeadsPerRank(kvHeads, tp) * headDim;
  return { parts: { linear: hidden * (qProj + 2 * kv) + q * hidden }, width: qProj + 2 * kv };
}

export interface MlaDims {
  readonly heads: number;
  readonly qLoraRank: number | undefined;
  readonly kvLoraRank: number;
  readonly qkNopeHeadDim: number;
  readonly qkRopeHeadDim: number;
  readonly vHeadDim: number;
}

/** Multi-head latent attention (DeepSeek V2/V3): the low-rank projections are replicated. */
export function mlaAttention(hidden: number, d: MlaDims, tp: number): Block {
  const headsRank = d.heads / tp;
  const qkHead = d.qkNopeHeadDim + d.qkRopeHeadDim;
  const q = d.qLoraRank === undefined ? hidden * headsRank * qkHead : hidden * d.qLoraRank + d.qLoraRank * headsRank * qkHead;
  const kvA = hidden * (d.kvLoraRank + d.qkRopeHeadDim);
  const kvB = d.kvLoraRank * headsRank * (d.qkNopeHeadDim + d.vHeadDim);
  const o = headsRank * d.vHeadDim * hidden;
  return {
    parts: { linear: q + kvA + kvB + o, other: (d.qLoraRank ?? 0) + d.kvLoraRank },
    width: headsRank * (qkHead + d.qkNopeHeadDim + d.vHeadDim) + d.kvLoraRank + d.qkRopeHeadDim,
  };
}

/** A gated MLP (gate, up, down). */
export function denseMlp(hidden: number, intermediate: number, tp: number): Block {
  return { parts: { linear: (3 * hidden * intermediate) / tp }, width: intermediate / tp };
}

/** A mixture-of-experts MLP: routed experts (split by TP), optional shared experts, a replicated router. */
export function moeMlp(hidden: number, experts: number, topK: number, expertIntermediate: number, sharedIntermediate: number, tp: number): Block {
  return {
    parts: { experts: (3 * hidden * expertIntermediate * experts) / tp, linear: (3 * hidden * sharedIntermediate) / tp, other: hidden * experts },
    width: (topK * expertIntermediate + sharedIntermediate) / tp,
  };
}

/** Mamba-2 mixer (in_proj to x, z, B, C, dt; depthwise conv; out_proj), groups extended for TP. */
export function mamba2Mixer(hidden: number, dInner: number, groups: number, stateSize: number, heads: number, convKernel: number, tp: number): Block {
  const bc = 2 * groups * stateSize;
  const inProj = hidden * (2 * dInner + bc + heads);
  return {
    parts: { linear: (inProj + dInner * hidden) / tp, other: ((dInner + bc) * (convKernel + 1) + 3 * heads + dInner) / tp },
    width: (2 * dInner + bc + heads) / tp,
  };
}

/** Mamba-1 mixer (Jamba). */
export function mamba1Mixer(hidden: number, dInner: number, stateSize: number, convKernel: number, dtRank: number, tp: number): Block {
  const linear = hidden * 2 * dInner + dInner * (dtRank + 2 * stateSize) + dtRank * dInner + dInner * hidden;
  return { parts: { linear: linear / tp, other: (dInner * (convKernel + 1) + dInner * stateSize + 2 * dInner) / tp }, width: (2 * dInner) / tp };
}

/** Gated DeltaNet (Qwen3-Next linear attention). */
export function gatedDeltaNet(hidden: number, kHeads: number, vHeads: number, kDim: number, vDim: number, convKernel: number, tp: number): Block {
  const key = kHeads * kDim;
  const value = vHeads * vDim;
  const inProj = hidden * (2 * key + 2 * value + 2 * vHeads);
  return {
    parts: { linear: (inProj + value * hidden) / tp, other: ((2 * key + value) * convKernel + 2 * vHeads) / tp + vDim },
    width: (2 * key + 2 * value + 2 * vHeads) / tp,
  };
}

/** Kimi Delta Attention (Kimi Linear): q, k, v, gates and their low-rank factors, short convolutions. */
export function kimiDeltaAttention(hidden: number, heads: number, headDim: number, convKernel: number, tp: number): Block {
  const proj = heads * headDim;
  const linear = (4 * hidden * proj) / tp + 2 * (hidden * headDim + (headDim * proj) / tp) + (hidden * heads) / tp;
  return { parts: { linear, other: (3 * proj * convKernel + 2 * proj) / tp }, width: (3 * proj) / tp };
}
