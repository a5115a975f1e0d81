import { describe, expect, it } from "vitest";
import { CUDA_GRAPH_ESTIMATE_BYTES, kvCapacity, resolveEngine, versionAtLeast } from "./capacity.js";
import { engineSettings } from "./engine.js";
import { GIB, gpuDatasheet, KNOWN_GPU_NAMES } from "./gpus.js";
import { validateProfile } from "./parse.js";

/**
 * A Llama-3.1-8B-like linear profile: 131,072 KV bytes per token; weights 8,030,261,248 params x 2
 * bytes + a 131,072 x 128 x 2-byte rotary cache = 16,094,076,928 bytes; 114,688 activation bytes
 * per batched token and 128,256 x 26 = 3,334,656 sampler bytes per sequence.
 */
const llama = (vllm = "0.19.0", tp = 1) =>
  validateProfile({
    schema_version: 1,
    model: "test/llama-8b",
    vllm_version: vllm,
    tensor_parallel_size: tp,
    kv_bytes_per_token: 131072,
    memory: { weights_bytes: 16_094_076_928, activation_bytes_per_token: 114_688, sampler_bytes_per_sequence: 3_334_656, provenance: "test" },
  });

const rtx4090 = { gpu: "RTX-4090", gpu_memory_utilization: 0.9, max_num_batched_tokens: 2048, max_num_seqs: 256 } as const;

describe("kvCapacity", () => {
  it("derives num_gpu_blocks term by term (RTX 4090, vLLM 0.19.0: no CUDA graph reserve)", () => {
    const r = kvCapacity(llama(), engineSettings(rtx4090));
    if (!r.ok) throw new Error(JSON.stringify(r.issues));
    // requested = ceil(25,250,627,584 x 0.9) = ceil(22,725,564,825.6) = 22,725,564,826
    // activation = 2,048 x 114,688 + min(256, 2,048) x 3,334,656 = 234,881,024 + 853,671,936 = 1,088,552,960
    // non-torch = 128 MiB = 134,217,728 (TP 1); CUDA graphs 0 before vLLM 0.21.0
    // KV = 22,725,564,826 - 16,094,076,928 - 1,088,552,960 - 134,217,728 = 5,408,717,210
    // page = 131,072 x 16 = 2,097,152; blocks = floor(5,408,717,210 / 2,097,152) = 2,579 (remainder 162,202)
    expect(r.capacity).toEqual({
      gpu: "RTX-4090",
      gpu_memory_bytes: 25_250_627_584,
      gpu_memory_utilization: 0.9,
      requested_bytes: 22_725_564_826,
      weights_bytes: 16_094_076_928,
      activation_bytes: 1_088_552_960,
      non_torch_bytes: 134_217_728,
      cuda_graph_bytes: 0,
      kv_cache_bytes: 5_408_717_210,
      page_bytes: 2_097_152,
      num_gpu_blocks: 2579,
      kv_cache_tokens: 2579 * 16,
      estimated: ["weights", "activation", "non_torch"],
    });
  });

  it("reserves the CUDA graph estimate from vLLM 0.21.0 on", () => {
    const r = kvCapacity(llama("0.32.0"), engineSettings(rtx4090));
    if (!r.ok) throw new Error(JSON.stringify(r.issues));
    // 0.75 GiB = 805,306,368 bytes less: 5,408,717,210 - 805,306,368 = 4,603,410,842 -> 2,195 pages
    expect(r.capacity.cuda_graph_bytes).toBe(805_306_368);
    expect(r.capacity.num_gpu_blocks).toBe(2195);
    expect(r.capacity.estimated).toContain("cuda_graph");
    expect(CUDA_GRAPH_ESTIMATE_BYTES).toBe(805_306_368);
  });

  it("adds the TP non-torch allowance and uses the engine's block size for a linear page", () => {
    const r = kvCapacity(llama("0.19.0", 2), engineSettings({ ...rtx4090, block_size: 32 }));
    if (!r.ok) throw new Error(JSON.stringify(r.issues));
    // non-torch 128 + 512 MiB = 671,088,640; KV = 5,408,717,210 + 134,217,728 - 671,088,640 = 4,871,846,298
    // page = 131,072 x 32 = 4,194,304 -> floor(4,871,846,298 / 4,194,304) = 1,161
    expect(r.capacity.non_torch_bytes).toBe(671_088_640);
    expect(r.capacity.kv_cache_bytes).toBe(4_871_846_298);
    expect(r.capacity.page_bytes).toBe(4_194_304);
    expect(r.capacity.num_gpu_blocks).toBe(1161);
    expect(r.capacity.kv_cache_tokens).toBe(1161 * 32);
  });

  it("takes given terms instead of estimates and needs no memory section then", () => {
    const bare = validateProfile({
      schema_version: 1,
      model: "test/grouped",
      vllm_version: "0.32.0",
      tensor_parallel_size: 1,
      page_size_bytes: 1_048_576,
      kv_cache_groups: [
        { name: "fa", kind: "full_attention", num_layers: 8, block_size_tokens: 16 },
        { name: "sw0", kind: "sliding_window", num_layers: 8, block_size_tokens: 32, window_tokens: 1024 },
        { name: "sw1", kind: "sliding_window", num_layers: 8, block_size_tokens: 32, window_tokens: 1024 },
      ],
    });
    const r = kvCapacity(
      bare,
      engineSettings({ gpu_memory_gib: 40, gpu_memory_utilization: 0.5, weights_gib: 10, activation_peak_gib: 1.5, cuda_graph_memory_gib: 0 }),
    );
    if (!r.ok) throw new Error(JSON.stringify(r.issues));
    // requested = 40 GiB x 0.5 = 20 GiB; KV = 20 - 10 - 1.5 - 0 = 8.5 GiB = 9,126,805,504 bytes
    // pages = 8.5 GiB / 1 MiB = 8,704; tokens = floor(8,704 / 3 groups) x 16 (the smallest block) = 2,901 x 16
    expect(r.capacity.requested_bytes).toBe(20 * GIB);
    expect(r.capacity.non_torch_bytes).toBe(0);
    expect(r.capacity.kv_cache_bytes).toBe(9_126_805_504);
    expect(r.capacity.num_gpu_blocks).toBe(8704);
    expect(r.capacity.kv_cache_tokens).toBe(2901 * 16);
    expect(r.capacity.estimated).toEqual([]);
  });

  it("names what is missing or contradictory", () => {
    const bare = validateProfile({ schema_version: 1, model: "test/bare", vllm_version: "0.32.0", tensor_parallel_size: 1, kv_bytes_per_token: 1024 });
    const r = kvCapacity(bare, engineSettings({ gpu: "H100-80GB", gpu_memory_gib: 80 }));
    expect(r.ok).toBe(false);
    if (r.ok) return;
    expect(r.issues.map((i) => i.path)).toEqual(["gpu_memory_gib", "weights_gib", "activation_peak_gib"]);
    expect(r.issues[1]!.message).toContain("test/bare has no memory.weights_bytes");
  });

  it("sizes the pool from every known GPU's memory, by name or alias, and from an inline GPU", () => {
    for (const name of KNOWN_GPU_NAMES) {
      const r = kvCapacity(llama(), engineSettings({ ...rtx4090, gpu: name }));
      if (!r.ok) throw new Error(`${name}: ${JSON.stringify(r.issues)}`);
      expect([r.capacity.gpu, r.capacity.gpu_memory_bytes]).toEqual([name, gpuDatasheet(name)!.memoryBytes]);
    }
    // H100-80GB is H100-SXM: 79.18 GiB either way.
    const alias = kvCapacity(llama(), engineSettings({ ...rtx4090, gpu: "H100-80GB" }));
    const canonical = kvCapacity(llama(), engineSettings({ ...rtx4090, gpu: "H100-SXM" }));
    expect(alias.ok && canonical.ok && alias.capacity.num_gpu_blocks === canonical.capacity.num_gpu_blocks).toBe(true);
    // An inline GPU of 24 GiB = 25,769,803,776 bytes: requested = ceil(x 0.9) = 23,192,823,399 (from 23,192,823,398.4).
    const inline = { name: "Lab-GPU", memory_gib: 24, bf16_tflops: 100, hbm_bandwidth: "1 TB/s", link_bandwidth: "32 GB/s", link_latency_us: 5 };
    const r = kvCapacity(llama(), engineSettings({ ...rtx4090, gpu: inline }));
    if (!r.ok) throw new Error(JSON.stringify(r.issues));
    expect([r.capacity.gpu, r.capacity.gpu_memory_bytes, r.capacity.requested_bytes]).toEqual(["Lab-GPU", 25_769_803_776, 23_192_823_399]);
  });

  it("refuses a GPU too small for the weights", () => {
    const r = kvCapacity(llama(), engineSettings({ gpu_memory_gib: 16 }));
    expect(r.ok).toBe(false);
    if (r.ok) return;
    expect(r.issues[0]!.path).toBe("gpu_memory_gib");
    expect(r.issues[0]!.message).toMatch(/^leaves no room for the KV cache: 14\.40 GiB usable \(16\.00 GiB x 0\.9\) - 14\.99 GiB weights/);
  });
});

describe("resolveEngine", () => {
  it("fills num_gpu_blocks from GPU memory", () => {
    const r = resolveEngine(llama(), rtx4090);
    if (!r.ok) throw new Error(JSON.stringify(r.issues));
    expect(r.settings.num_gpu_blocks).toBe(2579);
    expect(r.capacity?.num_gpu_blocks).toBe(2579);
  });

  it("lets an explicit num_gpu_blocks win, as vLLM's num_gpu_blocks_override does", () => {
    const r = resolveEngine(llama(), { ...rtx4090, num_gpu_blocks: 100 });
    if (!r.ok) throw new Error(JSON.stringify(r.issues));
    expect(r.settings.num_gpu_blocks).toBe(100);
    expect(r.capacity).toBeUndefined();
  });

  it("keeps the default pool without memory fields and refuses memory fields without a GPU", () => {
    const plain = resolveEngine(llama(), {});
    expect(plain.ok && plain.settings.num_gpu_blocks).toBe(16384);
    const stray = resolveEngine(llama(), { gpu_memory_utilization: 0.8, weights_gib: 3 });
    expect(stray.ok).toBe(false);
    if (!stray.ok) expect(stray.issues.map((i) => i.path)).toEqual(["gpu_memory_utilization", "weights_gib"]);
  });
});

describe("versionAtLeast", () => {
  it("compares literal versions numerically", () => {
    expect(versionAtLeast("0.21.0", "0.21.0")).toBe(true);
    expect(versionAtLeast("0.19.0", "0.21.0")).toBe(false);
    expect(versionAtLeast("0.100.0", "0.21.0")).toBe(true);
    expect(versionAtLeast("1.0.0rc1", "0.21.0")).toBe(true);
  });
});
