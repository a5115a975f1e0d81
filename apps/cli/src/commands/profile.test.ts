import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { parseProfile } from "@kvsim/profile-schema";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { runCli } from "../main.js";
import { captureIo } from "../test-io.js";

// Small configs (only the fields the derivation reads), each with its cache layout derived by hand.

/** Dense: 2 x 4 layers x 2 KV heads x 64 x 2 bytes = 2,048 B per token. */
const dense = {
  architectures: ["LlamaForCausalLM"],
  hidden_size: 256,
  num_hidden_layers: 4,
  num_attention_heads: 4,
  num_key_value_heads: 2,
  intermediate_size: 512,
  vocab_size: 1000,
  max_position_embeddings: 4096,
  torch_dtype: "bfloat16",
};

/** MLA: (kv_lora_rank 64 + rope 16) x 2 bytes = 160 B per token and layer; 64-token blocks: 64 x 4 x 160 = 40,960. */
const mla = {
  architectures: ["DeepseekV2ForCausalLM"],
  hidden_size: 256,
  num_hidden_layers: 4,
  num_attention_heads: 4,
  kv_lora_rank: 64,
  qk_rope_head_dim: 16,
  qk_nope_head_dim: 32,
  v_head_dim: 32,
  intermediate_size: 512,
  vocab_size: 1000,
};

/**
 * Gemma 3: 6 layers with pattern 3 -> layers 2 and 5 global, 4 local; group size 2: one full and
 * two sliding groups of 2 layers. Per layer and block 16 x 2 x 2 x 64 x 2 = 8,192; page 16,384.
 */
const gemma = {
  architectures: ["Gemma3ForCausalLM"],
  hidden_size: 256,
  num_hidden_layers: 6,
  num_attention_heads: 4,
  num_key_value_heads: 2,
  head_dim: 64,
  sliding_window: 64,
  sliding_window_pattern: 3,
  intermediate_size: 512,
  vocab_size: 1000,
};

/**
 * Nemotron-H: 4 Mamba-2, 2 attention, 2 MLP layers. State: conv 3 x (256 + 2 x 16) x 2 = 1,728 +
 * SSM 8 x 32 x 16 x 4 = 16,384 -> 18,112 B. Attention 2 x 2 x 64 x 2 = 512 B per token: block
 * 16 x cdiv(18,112, 8,192) = 48; page per layer 48 x 512 = 24,576; groups of 2: page 49,152.
 */
const nemotron = {
  architectures: ["NemotronHForCausalLM"],
  hidden_size: 256,
  num_hidden_layers: 8,
  hybrid_override_pattern: "M*M-M*M-",
  num_attention_heads: 4,
  num_key_value_heads: 2,
  head_dim: 64,
  mamba_num_heads: 8,
  mamba_head_dim: 32,
  ssm_state_size: 16,
  n_groups: 1,
  conv_kernel: 4,
  intermediate_size: 512,
  vocab_size: 1000,
};

/** Mistral with a window on every layer: one sliding-window group, no full attention (no P/D). */
const windowed = { ...dense, architectures: ["MistralForCausalLM"], sliding_window: 32 };

let dir = "";
const path = (name: string) => join(dir, name);

beforeAll(() => {
  dir = mkdtempSync(join(tmpdir(), "kvsim-profile-"));
  for (const [name, config] of Object.entries({ dense, mla, gemma, nemotron, windowed }))
    writeFileSync(path(`${name}.config.json`), JSON.stringify(config, null, 2));
  writeFileSync(path("unknown.config.json"), '{\n  "architectures": ["FancyNetForCausalLM"],\n  "hidden_size": 8\n}\n');
  writeFileSync(path("missing.config.json"), '{\n  "architectures": ["LlamaForCausalLM"],\n  "hidden_size": 256,\n  "num_hidden_layers": "four"\n}\n');
});
afterAll(() => {
  rmSync(dir, { recursive: true, force: true });
});

async function run(args: readonly string[]) {
  const io = captureIo();
  const code = await runCli(args, io);
  return { code, out: io.stdout, err: io.stderr };
}

/** from-hf to a file, then the profile as JSON. */
async function derive(name: string, extra: readonly string[] = []): Promise<Record<string, unknown>> {
  const r = await run(["profile", "from-hf", path(`${name}.config.json`), "--tp", "1", "--out", path(`${name}.profile.json`), "--force", ...extra]);
  expect(r.err).toBe("");
  expect(r.code).toBe(0);
  return JSON.parse(readFileSync(path(`${name}.profile.json`), "utf8")) as Record<string, unknown>;
}

function spec(name: string, topology: "aggregated" | "disaggregated", engine: Record<string, unknown> = { num_gpu_blocks: 512 }): string {
  const file = path(`${name}.${topology}.spec.json`);
  const top = topology === "aggregated" ? { kind: "aggregated", workers: 1 } : { kind: "disaggregated", prefill: { workers: 1 }, decode: { workers: 1 } };
  writeFileSync(
    file,
    JSON.stringify({
      version: 1,
      profile: `./${name}.profile.json`,
      topology: top,
      engine,
      timing: { type: "fixed", prefill_ms: 5, decode_ms: 1 },
      kv_transfer: { bandwidth_gbps: 10 },
      workload: { synthetic: { requests: 6, input_tokens: 300, output_tokens: 4, rate_per_s: 20, seed: 3 } },
    }),
  );
  return file;
}

describe("kvsim profile from-hf", () => {
  it("derives each family's layout, as worked out by hand", async () => {
    expect((await derive("dense")).kv_bytes_per_token).toBe(2048);
    const m = await derive("mla");
    expect([m.page_size_bytes, (m.kv_cache_groups as { block_size_tokens: number }[])[0]!.block_size_tokens]).toEqual([40_960, 64]);
    const g = await derive("gemma");
    expect(g.page_size_bytes).toBe(16_384);
    expect((g.kv_cache_groups as { name: string; num_layers: number }[]).map((x) => `${x.name}:${x.num_layers}`)).toEqual([
      "full_attention:2",
      "sliding_window_0:2",
      "sliding_window_1:2",
    ]);
    const n = await derive("nemotron");
    expect(n.page_size_bytes).toBe(49_152);
    expect(
      (n.kv_cache_groups as { name: string; block_size_tokens: number; transfer_bytes_per_block: number }[]).map((x) => [
        x.name,
        x.block_size_tokens,
        x.transfer_bytes_per_block,
      ]),
    ).toEqual([
      ["full_attention", 48, 49_152],
      ["mamba2_0", 48, 36_224],
      ["mamba2_1", 48, 36_224],
    ]);
  });

  it("makes profiles that validate, price handoffs and replay (P/D where the gate allows)", async () => {
    for (const name of ["dense", "mla", "gemma", "nemotron", "windowed"]) {
      await derive(name);
      const v = await run(["validate", path(`${name}.profile.json`)]);
      expect(v.code, `${name}: ${v.err}`).toBe(0);
      const t = await run(["transfer", "--profile", path(`${name}.profile.json`), "--prompt-tokens", "300", "--format", "json"]);
      const pd = name !== "windowed";
      expect(t.code, `${name}: ${t.err}`).toBe(pd ? 0 : 2);
      if (pd) expect((JSON.parse(t.out) as { payload_bytes: number }).payload_bytes).toBeGreaterThan(0);
      for (const topology of pd ? (["aggregated", "disaggregated"] as const) : (["aggregated"] as const)) {
        const r = await run(["replay", "--spec", spec(name, topology), "--format", "json"]);
        expect(r.code, `${name} ${topology}: ${r.err}`).toBe(0);
        const report = JSON.parse(r.out) as { completed_requests: number; handoffs: { count: number } };
        expect(report.completed_requests).toBe(6);
        expect(report.handoffs.count).toBe(topology === "disaggregated" ? 6 : 0);
      }
    }
    // The window-only model passes validate with a note: a P/D rank refuses it.
    expect((await run(["validate", path("windowed.profile.json")])).err).toContain("aggregated replay only");
  });

  it("sizes the pool from GPU memory in a replay and reports it", async () => {
    await derive("nemotron");
    const r = await run([
      "replay",
      "--spec",
      spec("nemotron", "disaggregated", { gpu_memory_gib: 2, weights_gib: 0.5, activation_peak_gib: 0.5, cuda_graph_memory_gib: 0 }),
      "--format",
      "json",
    ]);
    expect(r.code, r.err).toBe(0);
    // (2 GiB x 0.9 - 0.5 - 0.5) = 0.8 GiB = 858,993,459.2 -> ceil(2 GiB x 0.9) = 1,932,735,284 - 1,073,741,824
    // = 858,993,460 B / 49,152 B pages = 17,476 pages.
    const report = JSON.parse(r.out) as { kv_capacity: { prefill: { num_gpu_blocks: number } } };
    expect(report.kv_capacity.prefill.num_gpu_blocks).toBe(17_476);
    const table = await run(["replay", "--spec", path("nemotron.disaggregated.spec.json")]);
    // floor(17,476 / 3 groups) x 48 tokens = 5,825 x 48 = 279,600 tokens
    expect(table.out).toContain(
      "KV pool (prefill)      17,476 pages (279,600 tokens) = (2.00 GiB x 0.9 - 0.50 weights - 0.50 activations - 0.00 CUDA graphs) / 49,152 B",
    );
  });

  it("prints the rules, the table and the capacity breakdown; JSON on stdout without --out", async () => {
    const r = await run(["profile", "from-hf", path("dense.config.json"), "--tp", "2", "--gpu-memory-gib", "4", "--cuda-graph-memory-gib", "0"]);
    expect(r.code).toBe(0);
    const profile = JSON.parse(r.out) as { kv_bytes_per_token: number; tensor_parallel_size: number };
    // 2 KV heads over 2 ranks: 2 x 4 x 1 x 64 x 2 = 1,024 B per token
    expect([profile.kv_bytes_per_token, profile.tensor_parallel_size]).toEqual([1024, 2]);
    expect(r.err).toContain("LlamaForCausalLM (dense), TP 2: the rules applied");
    expect(r.err).toContain("KV capacity (vLLM 0.32.0 rules;");
    expect(r.err).toMatch(/- CUDA graphs +0\.00 GiB {2}\(given\)/);
  });

  it("refuses an unknown architecture by name with its line, and bad fields with theirs", async () => {
    const u = await run(["profile", "from-hf", path("unknown.config.json"), "--tp", "1"]);
    expect(u.code).toBe(2);
    expect(u.err).toMatch(/unknown\.config\.json:2:\d+: architectures: unknown architecture "FancyNetForCausalLM"; kvsim knows: LlamaForCausalLM, /);
    const m = await run(["profile", "from-hf", path("missing.config.json"), "--tp", "1"]);
    expect(m.code).toBe(2);
    expect(m.err).toMatch(/missing\.config\.json:4:\d+: num_hidden_layers: must be an integer >= 1 \(got "four"\)/);
    expect(m.out).toBe("");
  });

  it("refuses bad flags before reading anything, and keeps an existing --out", async () => {
    expect((await run(["profile", "from-hf", path("dense.config.json"), "--tp", "0"])).code).toBe(2);
    expect((await run(["profile", "from-hf", path("dense.config.json"), "--tp", "1", "--kv-cache-dtype", "int3"])).code).toBe(2);
    expect((await run(["profile", "from-hf", path("dense.config.json"), "--tp", "1", "--vllm", "latest"])).err).toContain("--vllm must be a literal version");
    writeFileSync(path("taken.json"), "keep");
    const r = await run(["profile", "from-hf", path("dense.config.json"), "--tp", "1", "--out", path("taken.json")]);
    expect(r.code).toBe(2);
    expect(readFileSync(path("taken.json"), "utf8")).toBe("keep");
    const tp3 = await run(["profile", "from-hf", path("dense.config.json"), "--tp", "3", "--out", path("tp3.json")]);
    expect(tp3.err).toContain("num_attention_heads: 4 attention heads do not split over 3 TP ranks");
    expect(existsSync(path("tp3.json"))).toBe(false);
  });
});

describe("the bundled example profiles' model_shape", () => {
  // The public config.json figures, as hf-profile's tests carry them.
  const llama8b = {
    architectures: ["LlamaForCausalLM"],
    hidden_size: 4096,
    num_hidden_layers: 32,
    num_attention_heads: 32,
    num_key_value_heads: 8,
    intermediate_size: 14336,
    vocab_size: 128256,
    torch_dtype: "bfloat16",
  };
  const gemma3_12b = {
    architectures: ["Gemma3ForConditionalGeneration"],
    text_config: {
      hidden_size: 3840,
      num_hidden_layers: 48,
      num_attention_heads: 16,
      num_key_value_heads: 8,
      head_dim: 256,
      intermediate_size: 15360,
      sliding_window: 1024,
      sliding_window_pattern: 6,
      vocab_size: 262208,
    },
    torch_dtype: "bfloat16",
  };
  it.each([
    ["llama-3.1-8b-instruct-tp1-bf16-vllm-0.32.0.json", llama8b],
    ["gemma-3-12b-it-tp1-bf16-vllm-0.32.0.json", gemma3_12b],
  ])("%s: written by hand, the same as from-hf derives", async (file, config) => {
    const example = parseProfile(readFileSync(new URL(`../../examples/profiles/${file}`, import.meta.url), "utf8"), file);
    writeFileSync(path("public.config.json"), JSON.stringify(config));
    const r = await run(["profile", "from-hf", path("public.config.json"), "--tp", "1", "--out", path("public.profile.json"), "--force"]);
    expect(r.code, r.err).toBe(0);
    const derived = parseProfile(readFileSync(path("public.profile.json"), "utf8"), "public.profile.json");
    expect({ ...example.model_shape, provenance: "" }).toEqual({ ...derived.model_shape, provenance: "" });
  });
});

describe("kvsim profile show", () => {
  it("prints groups, page, bytes per block and per token, and the capacity of a block count", async () => {
    await derive("gemma");
    const r = await run(["profile", "show", path("gemma.profile.json"), "--num-gpu-blocks", "1000"]);
    expect(r.code).toBe(0);
    // A group of 2 layers: 2 x 8,192 = 16,384 B per block, 16,384 / 16 = 1,024 B per token.
    expect(r.out).toContain("sliding_window_0  sliding_window       2     16      64       16,384        1,024");
    expect(r.out).toContain("per token 1,024 B full attention + 2,048 B sliding window (inside the window)");
    expect(r.out).toContain("page      16,384 bytes");
    // floor(1,000 / 3 groups) x 16 = 333 x 16 = 5,328 tokens
    expect(r.out).toContain("capacity  1,000 pages = 5,328 tokens");
  });

  it("prints the model shape a derived profile carries", async () => {
    await derive("nemotron");
    const r = await run(["profile", "show", path("nemotron.profile.json")]);
    expect(r.code, r.err).toBe(0);
    // "M*M-M*M-": 6 mixer blocks (4 Mamba-2, 2 attention) and 2 squared-ReLU MLP blocks. Mamba-2 at
    // TP 1: in_proj 256 x (2 x 256 + 2 x 1 x 16 + 8) = 141,312 + out_proj 256 x 256 = 65,536.
    expect(r.out).toContain("shape     6 layers, hidden 256, vocabulary 1,000\n");
    expect(r.out).toContain("attention 2 layers: 4 heads, 2 KV heads, head dim 64\n");
    expect(r.out).toContain("mixer     4 mamba2 layers: 206,848 parameters, 18,112 B state per sequence each\n");
    expect(r.out).toContain("mlp       2 layers, width 512 (up and down only)\n");
    expect(r.out).toContain("weights   2 B per weight\n");
    await derive("mla");
    const m = await run(["profile", "show", path("mla.profile.json"), "--format", "json"]);
    const out = JSON.parse(m.out) as { model_shape: { attention: { mla: unknown } } };
    expect(out.model_shape.attention.mla).toEqual({ kv_lora_rank: 64, qk_nope_head_dim: 32, qk_rope_head_dim: 16, v_head_dim: 32 });
    const text = await run(["profile", "show", path("mla.profile.json")]);
    expect(text.out).toContain("attention 4 layers: MLA, 4 heads, no q rank, kv rank 64, qk 32 + 16 rope, v 32\n");
    expect(text.out).toContain("mlp       4 layers, width 512 (gated)\n");
  });

  it("gives the same as JSON, and a linear profile's capacity at the engine's block size", async () => {
    await derive("dense");
    const r = await run(["profile", "show", path("dense.profile.json"), "--num-gpu-blocks", "100", "--block-size", "32", "--format", "json"]);
    expect(r.code).toBe(0);
    const out = JSON.parse(r.out) as { layout: string; page_size_bytes: number; capacity_tokens: number; groups: { bytes_per_token: number }[] };
    // page 2,048 x 32 = 65,536; 100 pages x 32 tokens = 3,200 tokens
    expect([out.layout, out.page_size_bytes, out.capacity_tokens, out.groups[0]!.bytes_per_token]).toEqual(["linear", 65_536, 3200, 2048]);
  });

  it("derives the pool from GPU memory with the breakdown, and refuses both ways at once", async () => {
    await derive("gemma");
    const r = await run([
      "profile",
      "show",
      path("gemma.profile.json"),
      "--gpu-memory-gib",
      "1",
      "--weights-gib",
      "0.25",
      "--activation-peak-gib",
      "0.25",
      "--cuda-graph-memory-gib",
      "0",
    ]);
    expect(r.code, r.err).toBe(0);
    // ceil(1 GiB x 0.9) = 966,367,642 - 536,870,912 = 429,496,730 B / 16,384 = 26,214 pages
    // floor(26,214 / 3) x 16 = 8,738 x 16 = 139,808 tokens
    expect(r.out).toMatch(/num_gpu_blocks +26,214 {2}pages = 139,808 tokens/);
    const both = await run(["profile", "show", path("gemma.profile.json"), "--gpu", "H100-80GB", "--num-gpu-blocks", "10"]);
    expect(both.code).toBe(2);
  });
});
