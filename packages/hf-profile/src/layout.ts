import { cdiv, type CacheGroup } from "@kvsim/profile-schema";

/** The state a recurrent (Mamba-type) layer keeps, by vLLM's state-shape calculator. */
export type StateMixer = "mamba" | "mamba2" | "gdn" | "kda";

/** What one layer keeps in the KV cache on one TP rank (vLLM's KVCacheSpec of that layer). */
export type LayerCache =
  /** K and V (or one MLA latent) per token; `window` for a sliding-window layer. */
  | { readonly kind: "attention"; readonly bytesPerToken: number; readonly window?: number }
  /** A fixed recurrent state (conv + SSM or linear-attention state), unpadded bytes. */
  | { readonly kind: "state"; readonly stateBytes: number; readonly mixer: StateMixer };

export interface LayoutOptions {
  /** Multi-head latent attention: vLLM's MLA backends need 64-token kernel blocks. */
  readonly mla: boolean;
  /** A user `--block-size`: vLLM raises it when it must, never lowers it. */
  readonly blockSize?: number | undefined;
  readonly vllmVersion: string;
}

/** A linear layout (one KV rate per token) or cache groups sharing one page size. */
export type CacheLayout =
  | { readonly kind: "linear"; readonly kvBytesPerToken: number; readonly blockSize: number; readonly notes: readonly string[] }
  | { readonly kind: "grouped"; readonly pageSizeBytes: number; readonly groups: readonly CacheGroup[]; readonly notes: readonly string[] };

/** vLLM's default attention block (FlashAttention kernels take multiples of 16). */
export const DEFAULT_BLOCK_SIZE = 16;
/** MLA backends (FlashMLA) work on 64-token blocks; vLLM forces the block size to 64. */
export const MLA_BLOCK_SIZE = 64;

const n = (v: number) => v.toLocaleString("en-US");

/** A layer's spec after block sizes are fixed: the key vLLM groups layers by. */
interface LayerSpec {
  readonly kind: CacheGroup["kind"];
  readonly window: number | undefined;
  readonly block: number;
  /** Padded page of one layer (one block). */
  readonly page: number;
  /** Unpadded bytes one block of this layer moves. */
  readonly real: number;
  readonly mixer: StateMixer | undefined;
}

const specKey = (s: LayerSpec) => `${s.kind}|${s.window ?? ""}|${s.block}|${s.page}|${s.real}|${s.mixer ?? ""}`;

/**
 * Lays out the KV cache of one TP rank from its layers' specs, by vLLM's rules:
 *
 * * Every layer full attention (no window, no state): one group of all layers. kvsim writes it as a
 *   linear profile (`kv_bytes_per_token`, the engine's block size), except for MLA, whose 64-token
 *   block a linear profile cannot carry: one full_attention group then.
 * * Otherwise (vLLM's hybrid allocator): with recurrent states, the attention block size is raised
 *   so one attention page holds the largest state, rounded to the kernel alignment, and the state
 *   page is padded to it (Platform._align_hybrid_block_size, "align"/"none" mamba cache modes);
 *   pages that still differ are unified by multiplying the smaller pages' block sizes
 *   (kv_cache_utils.unify_kv_cache_spec_page_size); layers with equal specs form buckets, the group
 *   size is the smallest bucket (the largest if it is under 1.5 times the smallest), and each bucket
 *   splits round-robin into groups of that size (_get_kv_cache_groups_uniform_page_size). One pool
 *   page then holds one block of every layer of a group: page = layer page x group size.
 */
export function layoutCache(layers: readonly LayerCache[], options: LayoutOptions): CacheLayout {
  const notes: string[] = [];
  const attention = layers.filter((l): l is Extract<LayerCache, { kind: "attention" }> => l.kind === "attention");
  const states = layers.filter((l): l is Extract<LayerCache, { kind: "state" }> => l.kind === "state");
  if (attention.length === 0) throw new RangeError("an attention-free model (recurrent layers only) is not modelled: kvsim profiles need an attention group");
  const align = options.mla ? MLA_BLOCK_SIZE : DEFAULT_BLOCK_SIZE;
  const user = options.blockSize;

  if (states.length === 0 && attention.every((l) => l.window === undefined)) {
    const perToken = attention.reduce((s, l) => s + l.bytesPerToken, 0);
    if (!options.mla) {
      const block = user ?? DEFAULT_BLOCK_SIZE;
      notes.push(
        `every layer is full attention: one group of ${attention.length} layers, ${n(perToken)} KV bytes per token (kv_cache_utils._get_kv_cache_groups_uniform_spec)`,
      );
      if (user !== undefined) notes.push(`a linear profile takes its block size from the engine: set engine.block_size: ${user}`);
      return { kind: "linear", kvBytesPerToken: perToken, blockSize: block, notes };
    }
    const block = user !== undefined && user % MLA_BLOCK_SIZE === 0 ? user : MLA_BLOCK_SIZE;
    if (user !== undefined && block !== user)
      notes.push(`block size ${user} raised to ${block}: vLLM's MLA backends need a multiple of ${MLA_BLOCK_SIZE} tokens`);
    notes.push(
      `every layer is MLA: one full_attention group of ${attention.length} layers, ${n(perToken)} latent bytes per token, ${block}-token blocks (vLLM forces ${MLA_BLOCK_SIZE} for FlashMLA)`,
    );
    const page = block * perToken;
    return {
      kind: "grouped",
      pageSizeBytes: page,
      groups: [
        {
          name: "full_attention",
          kind: "full_attention",
          num_layers: attention.length,
          block_size_tokens: block,
          prefix_cacheable: true,
          transfer_bytes_per_block: page,
        },
      ],
      notes,
    };
  }

  // The attention block size, raised for recurrent states.
  let attentionBlock = user ?? align;
  let statePage: number | undefined;
  if (states.length > 0) {
    const perToken = new Set(attention.map((l) => l.bytesPerToken));
    if (perToken.size !== 1) {
      throw new RangeError(`a model with recurrent states needs one attention page size per token (got ${[...perToken].join(", ")} bytes)`);
    }
    const attnPerToken = [...perToken][0]!;
    const largest = Math.max(...states.map((s) => s.stateBytes));
    const a = Math.max(align, user ?? DEFAULT_BLOCK_SIZE);
    const needed = a * cdiv(largest, a * attnPerToken);
    attentionBlock = Math.max(needed, user ?? 0);
    statePage = attentionBlock * attnPerToken;
    notes.push(
      `attention block ${n(attentionBlock)} tokens: the smallest multiple of ${a} whose page (${n(attentionBlock)} x ${n(attnPerToken)} B = ${n(statePage)} B) holds the largest state (${n(largest)} B); states are padded to that page (Platform._align_hybrid_block_size, align mode)`,
    );
  }

  let specs: LayerSpec[] = layers.map((l) =>
    l.kind === "attention"
      ? {
          kind: l.window === undefined ? "full_attention" : "sliding_window",
          window: l.window,
          block: attentionBlock,
          page: attentionBlock * l.bytesPerToken,
          real: attentionBlock * l.bytesPerToken,
          mixer: undefined,
        }
      : { kind: "state", window: undefined, block: attentionBlock, page: statePage ?? 0, real: l.stateBytes, mixer: l.mixer },
  );

  // Unify page sizes by growing the block size of the smaller pages.
  const maxPage = Math.max(...specs.map((s) => s.page));
  if (specs.some((s) => s.page !== maxPage)) {
    specs = specs.map((s) => {
      if (s.page === maxPage) return s;
      if (maxPage % s.page !== 0)
        throw new RangeError(`page sizes ${n(s.page)} and ${n(maxPage)} B cannot be unified: the larger is not a multiple of the smaller`);
      const ratio = maxPage / s.page;
      return { ...s, block: s.block * ratio, page: maxPage, real: s.real * ratio };
    });
    notes.push(`smaller pages unified to ${n(maxPage)} B by multiplying their block sizes (kv_cache_utils.unify_kv_cache_spec_page_size)`);
  }

  // Buckets of identical specs, in order of first appearance.
  const buckets = new Map<string, LayerSpec[]>();
  for (const s of specs) {
    const k = specKey(s);
    const list = buckets.get(k);
    if (list === undefined) buckets.set(k, [s]);
    else list.push(s);
  }
  const sizes = [...buckets.values()].map((b) => b.length);
  const smallest = Math.min(...sizes);
  const largest = Math.max(...sizes);
  const groupSize = largest < smallest * 1.5 ? largest : smallest;

  const order: Record<CacheGroup["kind"], number> = { full_attention: 0, sliding_window: 1, convolution: 2, state: 3 };
  const ordered = [...buckets.values()].sort((x, y) => order[x[0]!.kind] - order[y[0]!.kind]);
  const baseName = (s: LayerSpec) => (s.kind === "state" ? s.mixer! : s.kind);
  const baseCounts = new Map<string, number>();
  for (const b of ordered) baseCounts.set(baseName(b[0]!), (baseCounts.get(baseName(b[0]!)) ?? 0) + 1);

  const groups: CacheGroup[] = [];
  for (const bucket of ordered) {
    const s = bucket[0]!;
    let base: string = baseName(s);
    if ((baseCounts.get(base) ?? 0) > 1) base = s.window !== undefined ? `${base}_${s.window}` : `${base}_b${s.block}`;
    const count = cdiv(bucket.length, groupSize);
    for (let i = 0; i < count; i++) {
      // layers[i::count]: group i takes every count-th layer of the bucket from i.
      const layersInGroup = Math.ceil((bucket.length - i) / count);
      groups.push({
        name: count > 1 ? `${base}_${i}` : base,
        kind: s.kind,
        num_layers: layersInGroup,
        block_size_tokens: s.block,
        ...(s.window === undefined ? {} : { window_tokens: s.window }),
        prefix_cacheable: true,
        transfer_bytes_per_block: s.real * layersInGroup,
        // vLLM 0.32.0's FlashKDA prefill takes checkpoint blocks at the end of the prompt.
        ...(s.mixer === "kda" && options.vllmVersion === "0.32.0" ? { prefill_checkpoint_blocks: 1 } : {}),
      });
    }
  }
  const page = maxPage * groupSize;
  notes.push(
    `${buckets.size} layer type${buckets.size === 1 ? "" : "s"} (${ordered.map((b) => `${b.length} ${baseName(b[0]!)}`).join(", ")}) in groups of ${groupSize} layers: ${groups.length} group${groups.length === 1 ? "" : "s"}, page ${n(maxPage)} B x ${groupSize} = ${n(page)} B (kv_cache_utils._get_kv_cache_groups_uniform_page_size)`,
  );
  return { kind: "grouped", pageSizeBytes: page, groups, notes };
}
