import { describe, expect, it } from "vitest";
import { DYNAMO_VLLM_BLOCK_SIZE, UNBOUNDED, fromMockEngineArgs, toMockEngineArgs } from "./engine-args.js";
import { GLM, LLAMA_8B, refusal } from "./test-profiles.js";

/** Dynamo's defaults for a linear profile (docs/rules/dynamo.md §3), written out. */
const DEFAULTS = {
  role: "aggregated",
  engine: {
    num_gpu_blocks: 16384,
    block_size: 64,
    max_num_batched_tokens: 8192,
    max_num_seqs: 256,
    enable_prefix_caching: true,
    enable_chunked_prefill: true,
    long_prefill_token_threshold: 0,
    async_scheduling: false,
    scheduler_reserve_full_isl: false,
    data_parallel_size: 1,
    enable_expert_parallel: false,
  },
  timing: { type: "polynomial" },
  kvTransfer: { mode: "full_prompt" },
};

describe("fromMockEngineArgs: defaults (docs/rules/dynamo.md §3 and §8.7)", () => {
  it("empty args: vLLM block 64, 16,384 blocks, 256 seqs, 8,192 tokens, caching and chunking on, aggregated, full_prompt, no bandwidth, polynomial", () => {
    expect(fromMockEngineArgs({}, LLAMA_8B)).toEqual(DEFAULTS);
    expect(DYNAMO_VLLM_BLOCK_SIZE).toBe(64);
  });
  it("block_size 0 materialises 64; a grouped profile takes its block from its groups", () => {
    expect(fromMockEngineArgs({ block_size: 0 }, LLAMA_8B).engine.block_size).toBe(64);
    expect(fromMockEngineArgs({}, GLM).engine.block_size).toBeUndefined();
    expect(fromMockEngineArgs({ block_size: 2176 }, GLM).engine.block_size).toBeUndefined();
  });
  it("maps every supported field", () => {
    const r = fromMockEngineArgs(
      {
        engine_type: "vllm",
        worker_type: "prefill",
        block_size: 16,
        num_gpu_blocks: 1000,
        max_num_seqs: 8,
        max_num_batched_tokens: 2048,
        max_model_len: 4096,
        enable_prefix_caching: false,
        enable_chunked_prefill: false,
        speedup_ratio: 1,
        decode_speedup_ratio: 1,
        preemption_mode: "lifo",
        kv_bytes_per_token: 131072,
        kv_transfer_bandwidth: 64,
        kv_transfer_timing_mode: "destination_missing",
        timing_model: { type: "fixed", prefill_ms: 7, decode_ms: 3 },
      },
      LLAMA_8B,
    );
    expect(r).toEqual({
      role: "prefill",
      engine: {
        num_gpu_blocks: 1000,
        block_size: 16,
        max_num_batched_tokens: 2048,
        max_num_seqs: 8,
        max_model_len: 4096,
        enable_prefix_caching: false,
        enable_chunked_prefill: false,
        long_prefill_token_threshold: 0,
        async_scheduling: false,
        scheduler_reserve_full_isl: false,
        data_parallel_size: 1,
        enable_expert_parallel: false,
      },
      timing: { type: "fixed", prefill_ms: 7, decode_ms: 3 },
      kvTransfer: { mode: "destination_missing", bandwidthGbps: 64 },
    });
  });
  it("null batch limits are unbounded", () => {
    const e = fromMockEngineArgs({ max_num_seqs: null, max_num_batched_tokens: null }, LLAMA_8B).engine;
    expect(e.max_num_seqs).toBe(UNBOUNDED);
    expect(e.max_num_batched_tokens).toBe(Number.MAX_SAFE_INTEGER);
  });
  it("bandwidth 0 or null is off: an absent value, never 0", () => {
    expect(fromMockEngineArgs({ kv_transfer_bandwidth: 0 }, LLAMA_8B).kvTransfer).toEqual({ mode: "full_prompt" });
    expect(fromMockEngineArgs({ kv_transfer_bandwidth: null }, LLAMA_8B).kvTransfer).toEqual({ mode: "full_prompt" });
  });
  it("legacy role flags and capitalised enum spellings", () => {
    expect(fromMockEngineArgs({ is_prefill: true }, LLAMA_8B).role).toBe("prefill");
    expect(fromMockEngineArgs({ is_decode: true, is_prefill: false }, LLAMA_8B).role).toBe("decode");
    expect(fromMockEngineArgs({ worker_type: "Decode", kv_transfer_timing_mode: "DestinationMissing", engine_type: "Vllm" }, LLAMA_8B)).toMatchObject({
      role: "decode",
      kvTransfer: { mode: "destination_missing" },
    });
  });
  it("inert values of unsupported fields ask for nothing: the settings are the defaults", () => {
    const inert = {
      sglang: null,
      trtllm: null,
      dp_size: 1,
      aic_backend: null,
      aic_mtp_seed: 42,
      num_g2_blocks: null,
      enable_g4_storage: false,
      zmq_kv_events_port: null,
      bandwidth_g1_to_g2_gbps: null,
    };
    expect(fromMockEngineArgs(inert, LLAMA_8B)).toEqual(DEFAULTS);
    // Beside a supported field, they leave it as given.
    expect(fromMockEngineArgs({ ...inert, num_gpu_blocks: 100 }, LLAMA_8B)).toEqual({ ...DEFAULTS, engine: { ...DEFAULTS.engine, num_gpu_blocks: 100 } });
  });
});

describe("fromMockEngineArgs: refusals name the field", () => {
  it("is_prefill and is_decode both true (8.7)", () => {
    expect(refusal(() => fromMockEngineArgs({ is_prefill: true, is_decode: true }, LLAMA_8B))).toEqual([
      "is_decode: is_prefill and is_decode cannot both be true",
    ]);
  });
  it("an unknown key (8.7)", () => {
    expect(refusal(() => fromMockEngineArgs({ num_gpu_blocks: 10, bogus: 1 }, LLAMA_8B))).toEqual(["bogus: unknown key"]);
  });
  it("other engines", () => {
    expect(refusal(() => fromMockEngineArgs({ engine_type: "sglang" }, LLAMA_8B))).toEqual([
      "engine_type: sglang is not supported: kvsim models the vLLM engine only",
    ]);
    expect(refusal(() => fromMockEngineArgs({ engine_type: "trtllm" }, LLAMA_8B))).toEqual([
      "engine_type: trtllm is not supported: kvsim models the vLLM engine only",
    ]);
  });
  it("unsupported features with a live value, every one listed", () => {
    const issues = refusal(() =>
      fromMockEngineArgs(
        {
          sglang: { page_size: 8 },
          aic_nextn: 2,
          aic_backend: "trtllm",
          num_g2_blocks: 100,
          bandwidth_g2_to_g3_gbps: 5,
          zmq_kv_events_port: 5557,
          dp_size: 2,
          startup_time: 3,
          planner_profile_data: "p.npz",
        },
        LLAMA_8B,
      ),
    );
    expect(issues).toEqual([
      "sglang: is not supported: SGLang scheduler settings: kvsim models the vLLM engine only",
      "aic_nextn: is not supported: multi-token prediction (MTP) is not modelled",
      "aic_backend: is not supported: AIConfigurator timing is not available in kvsim: give the timing in timing_model",
      "num_g2_blocks: is not supported: KVBM lower tiers and KV offload are not modelled",
      "bandwidth_g2_to_g3_gbps: is not supported: KVBM lower tiers and KV offload are not modelled",
      "zmq_kv_events_port: is not supported: the vLLM-native ZMQ KV event wire is not served: KV events come back in the router format",
      "dp_size: is not supported: attention data parallelism: one engine session is one DP rank (run one session per rank)",
      "startup_time: is not supported: a simulated start-up delay is not modelled",
      "planner_profile_data: is not supported: NPZ/profiler timing data is not read: give the timing in timing_model",
    ]);
  });
  it("speedup ratios other than 1", () => {
    expect(refusal(() => fromMockEngineArgs({ speedup_ratio: 10, decode_speedup_ratio: 0 }, LLAMA_8B))).toEqual([
      "speedup_ratio: must be 1, got 10: kvsim reports modelled milliseconds and the driver owns wall-clock scaling",
      "decode_speedup_ratio: must be 1, got 0: kvsim reports modelled milliseconds and the driver owns wall-clock scaling",
    ]);
  });
  it("fifo preemption", () => {
    expect(refusal(() => fromMockEngineArgs({ preemption_mode: "fifo" }, LLAMA_8B))).toEqual([
      "preemption_mode: fifo is not supported: kvsim preempts as vLLM v1 does, the tail of the running list (lifo)",
    ]);
  });
  it("engine values through the profile schema's engine settings (zod), by field", () => {
    const issues = refusal(() => fromMockEngineArgs({ num_gpu_blocks: 1, max_num_seqs: 0, enable_prefix_caching: "yes" }, LLAMA_8B));
    expect(issues).toHaveLength(3);
    expect(issues[0]).toMatch(/^num_gpu_blocks: must be at least 2/);
    expect(issues[1]).toMatch(/^max_num_seqs: must be at least 1/);
    expect(issues[2]).toMatch(/^enable_prefix_caching: /);
  });
  it("block sizes: 1 is too small; a grouped profile refuses a size that is not its groups'", () => {
    expect(refusal(() => fromMockEngineArgs({ block_size: 1 }, LLAMA_8B))).toEqual(["block_size: must be an integer >= 2 (or 0 for the default), got 1"]);
    expect(refusal(() => fromMockEngineArgs({ block_size: 64 }, GLM))).toEqual([
      "block_size: is 64 but a grouped profile takes its block size from its full-attention groups (2176 tokens)",
    ]);
  });
  it("kv_bytes_per_token must agree with a linear profile and is refused for a grouped one", () => {
    expect(refusal(() => fromMockEngineArgs({ kv_bytes_per_token: 1000 }, LLAMA_8B))).toEqual([
      "kv_bytes_per_token: is 1000 but the profile's kv_bytes_per_token is 131072; kvsim prices KV from the profile",
    ]);
    expect(refusal(() => fromMockEngineArgs({ kv_bytes_per_token: 5995 }, GLM))[0]).toMatch(/^kv_bytes_per_token: must be null for a grouped profile/);
  });
  it("negative bandwidth, a bad timing mode, a bad timing model", () => {
    expect(
      refusal(() =>
        fromMockEngineArgs(
          { kv_transfer_bandwidth: -1, kv_transfer_timing_mode: "eager", timing_model: { type: "fixed", prefill_ms: -1, decode_ms: 1 } },
          LLAMA_8B,
        ),
      ),
    ).toEqual([
      "kv_transfer_bandwidth: must be a finite number of GB/s >= 0 (0 or null: no transfer delay), got -1",
      'kv_transfer_timing_mode: must be full_prompt or destination_missing, got "eager"',
      "timing_model.prefill_ms: must be from 0 to 1000000 ms, about 17 minutes (got -1)",
    ]);
  });
  it("not an object", () => {
    expect(refusal(() => fromMockEngineArgs([1], LLAMA_8B))).toEqual([": engine args must be a JSON object of Dynamo MockEngineArgs fields, got an array"]);
  });
});

describe("toMockEngineArgs", () => {
  it("writes the normalised args: defaults filled, unbounded as null, off bandwidth as null", () => {
    const args = fromMockEngineArgs({ max_num_seqs: null, worker_type: "decode" }, LLAMA_8B);
    expect(toMockEngineArgs(args, LLAMA_8B)).toEqual({
      ok: true,
      value: {
        engine_type: "vllm",
        worker_type: "decode",
        block_size: 64,
        num_gpu_blocks: 16384,
        max_num_seqs: null,
        max_num_batched_tokens: 8192,
        max_model_len: null,
        enable_prefix_caching: true,
        enable_chunked_prefill: true,
        speedup_ratio: 1,
        decode_speedup_ratio: 1,
        preemption_mode: "lifo",
        kv_bytes_per_token: 131072,
        kv_transfer_bandwidth: null,
        kv_transfer_timing_mode: "full_prompt",
        kv_transfer_setup_latency_ms: 0,
        timing_model: { type: "polynomial" },
      },
    });
  });
  it("a grouped profile writes its full-attention block size and no per-token rate", () => {
    const r = toMockEngineArgs(fromMockEngineArgs({ kv_transfer_bandwidth: 1 }, GLM), GLM);
    expect(r.ok && r.value.block_size).toBe(2176);
    expect(r.ok && r.value.kv_bytes_per_token).toBeNull();
    expect(r.ok && r.value.kv_transfer_bandwidth).toBe(1);
  });
  it("round trip: args -> kvsim -> args -> kvsim is the identity on kvsim settings", () => {
    const first = fromMockEngineArgs(
      {
        worker_type: "prefill",
        block_size: 32,
        max_num_batched_tokens: null,
        kv_transfer_bandwidth: 25,
        timing_model: { type: "fixed", prefill_ms: 1, decode_ms: 2 },
      },
      LLAMA_8B,
    );
    const back = toMockEngineArgs(first, LLAMA_8B);
    if (!back.ok) throw new Error(back.reason);
    expect(fromMockEngineArgs(back.value, LLAMA_8B)).toEqual(first);
  });
  it("refuses a setting Dynamo has no field for", () => {
    const args = fromMockEngineArgs({}, LLAMA_8B);
    expect(toMockEngineArgs({ ...args, engine: { ...args.engine, long_prefill_token_threshold: 512 } }, LLAMA_8B)).toEqual({
      ok: false,
      reason: "long_prefill_token_threshold 512 has no MockEngineArgs field (Dynamo caps no per-request chunk)",
    });
    expect(toMockEngineArgs({ ...args, engine: { ...args.engine, async_scheduling: true } }, LLAMA_8B)).toEqual({
      ok: false,
      reason: "async_scheduling has no MockEngineArgs field",
    });
    expect(toMockEngineArgs({ ...args, engine: { ...args.engine, data_parallel_size: 2 } }, LLAMA_8B)).toEqual({
      ok: false,
      reason: "data_parallel_size 2: one kvsim rank serves one data-parallel rank",
    });
  });
});
