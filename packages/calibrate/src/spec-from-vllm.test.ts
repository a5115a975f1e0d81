import { InputError } from "@kvsim/profile-schema";
import { describe, expect, it } from "vitest";
import { deploymentFromMeta, deploymentFromServeArgs, gpuForDevice, parseTokenCount, specFromVllm, splitArgs } from "./spec-from-vllm.js";

/** A small meta.json as the shared vLLM runs write it (the fields kvsim reads). */
const META = {
  schema_version: 1,
  model: "test/model",
  vllm_version: "0.19.0",
  engine_kwargs: {
    model: "test/model",
    tensor_parallel_size: 2,
    data_parallel_size: 1,
    enable_expert_parallel: false,
    max_num_seqs: 64,
    max_num_batched_tokens: 4096,
    max_model_len: 8192,
  },
  kv_cache: { num_gpu_blocks: 1000, block_size: 16, gpu_memory_utilization: 0.9, enable_prefix_caching: false },
  hardware: { device_name: "NVIDIA GeForce RTX 4090" },
  resolved_config: {
    compilation_config: { cudagraph_capture_sizes: [1, 2, 4, 8] },
    scheduler_config: { async_scheduling: false, scheduler_reserve_full_isl: true, enable_chunked_prefill: true, long_prefill_token_threshold: 0 },
  },
};

describe("a spec from a run's meta.json", () => {
  it("puts each recorded setting where the spec keeps it", () => {
    const d = deploymentFromMeta(META, "meta.json");
    expect([d.model, d.vllmVersion, d.tensorParallelSize, d.gpu, d.notes]).toEqual(["test/model", "0.19.0", 2, "RTX-4090", []]);
    expect(d.engine).toEqual({
      num_gpu_blocks: 1000,
      block_size: 16,
      max_num_batched_tokens: 4096,
      max_num_seqs: 64,
      max_model_len: 8192,
      enable_prefix_caching: false,
      enable_chunked_prefill: true,
      async_scheduling: false,
      scheduler_reserve_full_isl: true,
      cudagraph_capture_sizes: [1, 2, 4, 8],
    });
    const { spec } = specFromVllm(d, { profile: "./p.json", trace: "./t.jsonl" });
    // A known GPU: the roofline on it, engine.gpu set.
    expect(spec).toMatchObject({
      profile: "./p.json",
      topology: { kind: "aggregated", workers: 1 },
      timing: { type: "roofline" },
      workload: { trace: "./t.jsonl", format: "kvsim" },
      engine: { gpu: "RTX-4090" },
    });
  });

  it("assumes vLLM's defaults for what the run does not record, and says so; data parallelism with its expert flag", () => {
    const d = deploymentFromMeta({ model: "m", engine_kwargs: { max_num_seqs: 8, data_parallel_size: 2, enable_expert_parallel: true } }, "meta.json");
    expect(d.engine).toMatchObject({
      async_scheduling: true,
      scheduler_reserve_full_isl: true,
      data_parallel_size: 2,
      enable_expert_parallel: true,
      block_size: 16,
    });
    expect(d.notes).toEqual([
      "async_scheduling: not recorded in the run, vLLM's default (on) assumed",
      "scheduler_reserve_full_isl: not recorded in the run, vLLM's default (on) assumed",
    ]);
    // No pool and no GPU: the note says how to get one; the timing falls back to the profile's tables.
    const { spec, notes } = specFromVllm(d, { profile: "./p.json" });
    expect(spec.timing).toEqual({ type: "profile" });
    expect(notes.some((n) => n.startsWith("num_gpu_blocks: not recorded, and no GPU"))).toBe(true);
  });

  it("refuses a field of the wrong type, naming it", () => {
    let error: unknown;
    try {
      deploymentFromMeta({ engine_kwargs: { max_num_seqs: "many" } }, "meta.json");
    } catch (e) {
      error = e;
    }
    expect(error).toBeInstanceOf(InputError);
    expect((error as InputError).issues).toEqual([{ path: "engine_kwargs.max_num_seqs", message: 'must be a positive whole number (got "many")' }]);
  });
});

describe("a spec from vllm serve arguments", () => {
  it("maps the flags, in any of vLLM's spellings", () => {
    const d = deploymentFromServeArgs([
      "vllm serve org/model --max-num-seqs 128 --max-num-batched-tokens=8192 -tp 2 --async-scheduling --no-enable-prefix-caching --max_model_len 32K --compilation-config '{\"cudagraph_capture_sizes\": [1, 2, 4]}' --port 8000 --kv-cache-dtype fp8",
    ]);
    expect([d.model, d.tensorParallelSize]).toEqual(["org/model", 2]);
    // 32K = 32 x 1,024 = 32,768.
    expect(d.engine).toEqual({
      block_size: 16,
      max_num_batched_tokens: 8192,
      max_num_seqs: 128,
      max_model_len: 32768,
      enable_prefix_caching: false,
      enable_chunked_prefill: true,
      async_scheduling: true,
      scheduler_reserve_full_isl: true,
      cudagraph_capture_sizes: [1, 2, 4],
    });
    // --port changes nothing kvsim models and is not listed; --kv-cache-dtype is.
    expect(d.notes).toEqual(["scheduler_reserve_full_isl: not given, vLLM's default (on) assumed", "not modelled, left out: --kv-cache-dtype"]);
  });

  it("takes --cuda-graph-sizes as a list, data parallelism, enforce-eager (no graphs, no graph memory)", () => {
    const d = deploymentFromServeArgs([
      "--cuda-graph-sizes",
      "8",
      "2",
      "4",
      "--data-parallel-size",
      "2",
      "--enable-expert-parallel",
      "--scheduler-reserve-full-isl",
      "--no-async-scheduling",
      "--num-gpu-blocks-override",
      "500",
    ]);
    expect(d.engine).toMatchObject({
      num_gpu_blocks: 500,
      cudagraph_capture_sizes: [2, 4, 8],
      data_parallel_size: 2,
      enable_expert_parallel: true,
      async_scheduling: false,
      scheduler_reserve_full_isl: true,
    });
    const eager = deploymentFromServeArgs(["--enforce-eager", "--cuda-graph-sizes", "1", "2"]);
    expect([eager.engine.cudagraph_capture_sizes, eager.engine.cuda_graph_memory_gib]).toEqual([undefined, 0]);
  });

  it("refuses bad values naming the flag", () => {
    expect(() => deploymentFromServeArgs(["--max-num-seqs", "lots"])).toThrow(InputError);
    expect(() => deploymentFromServeArgs(["--gpu-memory-utilization", "1.5"])).toThrow(/--gpu-memory-utilization: must be in \(0, 1\]/);
  });
});

describe("helpers", () => {
  it("read token counts as vLLM does: k thousands, K powers of 1,024", () => {
    expect([parseTokenCount("2048"), parseTokenCount("32k"), parseTokenCount("32K"), parseTokenCount("1m"), parseTokenCount("x")]).toEqual([
      2048,
      32000,
      32768,
      1_000_000,
      undefined,
    ]);
  });
  it("split a quoted argument string", () => {
    expect(splitArgs(`a --b 'c d' "e"`)).toEqual(["a", "--b", "c d", "e"]);
  });
  it("name kvsim's GPU for a CUDA device name", () => {
    expect([
      gpuForDevice("NVIDIA GeForce RTX 4090"),
      gpuForDevice("NVIDIA H100 80GB HBM3"),
      gpuForDevice("NVIDIA RTX PRO 6000 Blackwell Server Edition"),
      gpuForDevice("Tesla T4"),
    ]).toEqual(["RTX-4090", "H100-SXM", "RTX-PRO-6000", undefined]);
  });
});
