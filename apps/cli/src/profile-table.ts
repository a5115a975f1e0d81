import { CUDA_GRAPH_ESTIMATE_SINCE, GIB, isGroupedProfile, versionAtLeast, type KvCapacity, type ModelShape, type Profile } from "@kvsim/profile-schema";
import { tableLines } from "./text-table.js";

/** 1234567 -> "1,234,567" (fixed, locale-independent). */
export const thousands = (n: number): string => String(Math.round(n)).replace(/\B(?=(\d{3})+(?!\d))/g, ",");
const gib = (b: number) => `${(b / GIB).toFixed(2)} GiB`;

/** One group's or the linear layout's row of `profile show`, also used for its JSON. */
export interface ProfileRow {
  readonly name: string;
  readonly kind: string;
  readonly num_layers: number | undefined;
  readonly block_size_tokens: number;
  readonly window_tokens: number | undefined;
  readonly bytes_per_block: number | undefined;
  /** Per token held (attention); undefined for a state, which is a fixed size per request. */
  readonly bytes_per_token: number | undefined;
}

/** The rows of a profile: its groups, or the one linear layout at the engine's block size. */
export function profileRows(p: Profile, linearBlockSize: number): ProfileRow[] {
  if (!isGroupedProfile(p)) {
    const perToken = p.kv_bytes_per_token ?? 0;
    return [
      {
        name: "(linear)",
        kind: "full_attention",
        num_layers: undefined,
        block_size_tokens: linearBlockSize,
        window_tokens: undefined,
        bytes_per_block: perToken * linearBlockSize,
        bytes_per_token: perToken,
      },
    ];
  }
  return p.kv_cache_groups.map((g) => ({
    name: g.name,
    kind: g.kind,
    num_layers: g.num_layers,
    block_size_tokens: g.block_size_tokens,
    window_tokens: g.window_tokens,
    bytes_per_block: g.transfer_bytes_per_block,
    bytes_per_token: g.kind === "state" || g.transfer_bytes_per_block === undefined ? undefined : g.transfer_bytes_per_block / g.block_size_tokens,
  }));
}

/** The page (one pool block) of a profile: page_size_bytes, or kv_bytes_per_token x block size. */
export const pageBytes = (p: Profile, linearBlockSize: number): number =>
  isGroupedProfile(p) ? p.page_size_bytes : (p.kv_bytes_per_token ?? 0) * linearBlockSize;

/**
 * Tokens a pool of `pages` pages holds as vLLM logs it ("GPU KV cache size"): floor(pages /
 * groups) x the smallest block size; a linear pool: pages x the block size.
 */
export function capacityTokens(p: Profile, pages: number, linearBlockSize: number): number {
  if (!isGroupedProfile(p)) return pages * linearBlockSize;
  return Math.floor(pages / p.kv_cache_groups.length) * Math.min(...p.kv_cache_groups.map((g) => g.block_size_tokens));
}

const dash = (v: number | undefined) => (v === undefined ? "-" : thousands(v));

/** The `profile show` table: the header, one row per group, the page, per-token bytes and memory. */
export function formatProfile(p: Profile, linearBlockSize: number, pages: number | undefined): string {
  const lines: string[] = [];
  lines.push(
    `profile   ${p.model} (vLLM ${p.vllm_version}, TP ${p.tensor_parallel_size}${p.kv_cache_dtype === undefined ? "" : `, KV cache ${p.kv_cache_dtype}`})`,
  );
  const rows = profileRows(p, linearBlockSize);
  if (isGroupedProfile(p)) {
    lines.push(
      `layout    grouped: ${p.kv_cache_groups.length} cache group${p.kv_cache_groups.length === 1 ? "" : "s"} sharing one pool of ${thousands(p.page_size_bytes)}-byte pages`,
    );
  } else {
    lines.push(
      `layout    linear: ${thousands(p.kv_bytes_per_token ?? 0)} bytes per token; the engine's block of ${thousands(linearBlockSize)} tokens makes a ${thousands(pageBytes(p, linearBlockSize))}-byte page`,
    );
  }
  lines.push("");
  const table = [
    ["group", "kind", "layers", "block", "window", "bytes/block", "bytes/token"],
    ...rows.map((r) => [
      r.name,
      r.kind,
      dash(r.num_layers),
      thousands(r.block_size_tokens),
      dash(r.window_tokens),
      dash(r.bytes_per_block),
      dash(r.bytes_per_token),
    ]),
  ];
  lines.push(...tableLines(table, "llrrrrr"), "");
  const perToken = (kind: string) => rows.filter((r) => r.kind === kind).reduce((s, r) => s + (r.bytes_per_token ?? 0), 0);
  const state = rows.filter((r) => r.kind === "state").reduce((s, r) => s + (r.bytes_per_block ?? 0), 0);
  const parts = [`${thousands(perToken("full_attention"))} B full attention`];
  if (perToken("sliding_window") > 0) parts.push(`${thousands(perToken("sliding_window"))} B sliding window (inside the window)`);
  const fixed = state > 0 ? `; plus ${thousands(state)} B of state per request (one block per state group)` : "";
  lines.push(`per token ${parts.join(" + ")}${fixed}`);
  lines.push(
    `page      ${thousands(pageBytes(p, linearBlockSize))} bytes${isGroupedProfile(p) ? " (a block of any group takes one page; bytes/block is what a handoff moves, without padding)" : ""}`,
  );
  if (pages !== undefined) {
    lines.push(
      `capacity  ${thousands(pages)} pages = ${thousands(capacityTokens(p, pages, linearBlockSize))} tokens${isGroupedProfile(p) ? ` (floor(${thousands(pages)} / ${p.kv_cache_groups.length} groups) x ${Math.min(...p.kv_cache_groups.map((g) => g.block_size_tokens))}, vLLM's "GPU KV cache size")` : ""}`,
    );
  }
  const m = p.memory;
  if (m !== undefined) {
    const w = m.weights_bytes === undefined ? "weights not estimated" : `weights ${gib(m.weights_bytes)} (${thousands(m.weights_bytes)} B)`;
    lines.push(
      `memory    ${w}; activations ${thousands(m.activation_bytes_per_token)} B per batched token + ${thousands(m.sampler_bytes_per_sequence)} B per sampled sequence (estimates)`,
    );
  }
  if (p.model_shape !== undefined) lines.push("", ...formatShape(p.model_shape));
  return `${lines.join("\n")}\n`;
}

/** The model shape in a few lines (whole model): layers, attention, MLP/MoE, mixer, vocabulary, weight bytes. */
function formatShape(s: ModelShape): string[] {
  const lines = [
    `shape     ${thousands(s.num_layers)} layers, hidden ${thousands(s.hidden_size)}, vocabulary ${thousands(s.vocab_size)}${s.tie_word_embeddings ? " (tied LM head)" : ""}`,
  ];
  const a = s.attention;
  if (a !== undefined && a.layers > 0) {
    const heads =
      a.mla === undefined
        ? `${a.num_heads} heads, ${a.num_kv_heads} KV heads, head dim ${a.head_dim}${a.v_head_dim === undefined ? "" : ` (values ${a.v_head_dim})`}`
        : `MLA, ${a.num_heads} heads, ${a.mla.q_lora_rank === undefined ? "no q rank" : `q rank ${thousands(a.mla.q_lora_rank)}`}, kv rank ${thousands(a.mla.kv_lora_rank)}, qk ${a.mla.qk_nope_head_dim} + ${a.mla.qk_rope_head_dim} rope, v ${a.mla.v_head_dim}`;
    const sliding = a.sliding_layers > 0 ? `; ${a.sliding_layers} sliding, window ${thousands(a.sliding_window ?? 0)}` : "";
    lines.push(`attention ${a.layers} layers: ${heads}${a.output_gate ? ", output gate" : ""}${sliding}`);
  }
  const m = s.linear_mixer;
  if (m !== undefined && m.layers > 0) {
    lines.push(
      `mixer     ${m.layers} ${m.kind} layers${m.parallel_attention ? " beside attention" : ""}: ${thousands(m.params_per_layer)} parameters, ${thousands(m.state_bytes_per_layer)} B state per sequence each`,
    );
  }
  if (s.mlp !== undefined && s.mlp.layers > 0)
    lines.push(`mlp       ${s.mlp.layers} layers, width ${thousands(s.mlp.intermediate_size)}${s.mlp.gated ? " (gated)" : " (up and down only)"}`);
  const e = s.moe;
  if (e !== undefined && e.layers > 0) {
    const shared = e.shared_expert_intermediate_size > 0 ? ` + shared width ${thousands(e.shared_expert_intermediate_size)}` : "";
    lines.push(
      `moe       ${e.layers} layers, ${e.num_experts} experts of width ${thousands(e.expert_intermediate_size)}, top ${e.num_experts_per_tok}${shared}`,
    );
  }
  const experts = s.expert_weight_bytes === undefined ? "" : `, experts ${s.expert_weight_bytes} B`;
  lines.push(`weights   ${s.weight_bytes} B per weight${experts}${s.fp8_compute ? ", FP8 compute" : ""}`);
  return lines;
}

/** The term-by-term derivation of num_gpu_blocks from GPU memory; `~` marks kvsim's estimates. */
export function formatCapacity(c: KvCapacity, vllmVersion: string, shape: { readonly batchedTokens: number; readonly sequences: number }): string {
  const est = (term: KvCapacity["estimated"][number]) => (c.estimated.includes(term) ? "~" : " ");
  const rows: string[][] = [
    ["GPU memory", " ", gib(c.gpu_memory_bytes), `${c.gpu ?? "given"} (${thousands(c.gpu_memory_bytes)} B)`],
    [`x utilization ${c.gpu_memory_utilization}`, " ", gib(c.requested_bytes), ""],
    ["- weights", est("weights"), gib(c.weights_bytes), ""],
    [
      "- activation peak",
      est("activation"),
      gib(c.activation_bytes),
      c.estimated.includes("activation")
        ? `(${thousands(shape.batchedTokens)} batched tokens, ${thousands(Math.min(shape.sequences, shape.batchedTokens))} sequences)`
        : "",
    ],
    ["- non-torch", est("non_torch"), gib(c.non_torch_bytes), ""],
    [
      "- CUDA graphs",
      est("cuda_graph"),
      gib(c.cuda_graph_bytes),
      c.estimated.includes("cuda_graph")
        ? ""
        : versionAtLeast(vllmVersion, CUDA_GRAPH_ESTIMATE_SINCE)
          ? "(given)"
          : `(vLLM before ${CUDA_GRAPH_ESTIMATE_SINCE} reserves none)`,
    ],
    ["= KV cache", " ", gib(c.kv_cache_bytes), `(${thousands(c.kv_cache_bytes)} B)`],
    ["/ page", " ", `${thousands(c.page_bytes)} B`, ""],
    ["num_gpu_blocks", " ", thousands(c.num_gpu_blocks), `pages = ${thousands(c.kv_cache_tokens)} tokens`],
  ];
  const body = tableLines(rows, "llrl").map((l) => `  ${l}`);
  return `KV capacity (vLLM ${vllmVersion} rules; ~ marks kvsim's estimates of what vLLM measures at start-up)\n${body.join("\n")}\n`;
}
