import { describe, expect, it } from "vitest";
import { engineSettings, EngineOverridesSchema } from "./engine.js";
import { InputError } from "./errors.js";
import { parseSpec } from "./parse.js";
import { SpecSchema, specDeprecations, TimingSchema } from "./spec.js";

const base = [
  "version: 1",
  "profile: ./profiles/glm.json",
  "topology:",
  "  kind: disaggregated",
  "  prefill: { workers: 2 }",
  "  decode: { workers: 3 }",
  "timing: { type: fixed, prefill_ms: 10, decode_ms: 2 }",
  "workload:",
  "  trace: ../traces/t.jsonl",
  "  format: mooncake",
];

function issues(text: string, file = "/work/specs/run.yaml"): string[] {
  try {
    parseSpec(text, file);
  } catch (e) {
    expect(e).toBeInstanceOf(InputError);
    return (e as InputError).message.split("\n");
  }
  throw new Error("expected an InputError");
}

describe("router", () => {
  const parse = (router: string) => parseSpec([...base, `router: ${router}`].join("\n"), "/work/specs/run.yaml").router;
  it("reads a policy name as the mapping with Dynamo's defaults (kv_aware: weight 1, temperature 0)", () => {
    expect(parse("kv_aware")).toStrictEqual({ policy: "kv_aware", overlap_score_weight: 1, router_temperature: 0, seed: 0 });
    expect(parse("round_robin")).toStrictEqual({ policy: "round_robin" });
    expect(parse("power_of_two")).toStrictEqual({ policy: "power_of_two", seed: 0 });
    expect(parse("weighted")).toStrictEqual({ policy: "weighted", prefix_weight: 1, queue_weight: 1, kv_utilization_weight: 1, seed: 0 });
  });
  it("reads a mapping with settings, filling the rest", () => {
    expect(parse("{ policy: kv_aware, overlap_score_weight: 2.5, router_temperature: 0.3 }")).toStrictEqual({
      policy: "kv_aware",
      overlap_score_weight: 2.5,
      router_temperature: 0.3,
      seed: 0,
    });
  });
  it("names the field of each problem: an unknown policy, an unknown key, a bad weight, a missing policy", () => {
    // base has 10 lines; router is line 11.
    expect(issues([...base, "router: fastest"].join("\n"))).toStrictEqual([
      "/work/specs/run.yaml:11:1: router.policy: must be round_robin, kv_aware, prefix_only, least_loaded, power_of_two or weighted",
    ]);
    expect(issues([...base, "router: { policy: round_robin, overlap_score_weight: 1 }"].join("\n"))[0]).toMatch(
      /^\/work\/specs\/run\.yaml:11:\d+: router\.overlap_score_weight: unknown key$/,
    );
    expect(issues([...base, "router: { policy: kv_aware, overlap_score_weight: -1 }"].join("\n"))[0]).toMatch(
      /router\.overlap_score_weight: must be from 0 to 1000000 \(got -1\)$/,
    );
    expect(issues([...base, "router: { overlap_score_weight: 1 }"].join("\n"))[0]).toMatch(/router\.policy: is missing: a router mapping names its policy/);
  });
});

describe("parseSpec", () => {
  it("resolves relative paths against the spec's folder and keeps absolute ones", () => {
    const text = [...base, "decode: { profile: decode.json }", "prefill: { profile: /abs/prefill.json }"].join("\n");
    const spec = parseSpec(text, "/work/specs/run.yaml");
    expect(spec.profile).toBe("/work/specs/profiles/glm.json");
    expect(spec.workload.trace).toBe("/work/traces/t.jsonl");
    expect(spec.decode?.profile).toBe("/work/specs/decode.json");
    expect(spec.prefill?.profile).toBe("/abs/prefill.json");
  });
  it("fills the documented defaults", () => {
    const spec = parseSpec(base.join("\n"), "/work/specs/run.yaml");
    expect(spec.engine).toStrictEqual({});
    expect(spec.kv_transfer).toStrictEqual({ mode: "destination_missing", fallback_latency_ms: 0 });
    expect(spec.router).toStrictEqual({ policy: "round_robin" });
    expect(spec.workload.trace_block_size).toBe(512);
    expect(spec.workload.speedup).toBe(1);
  });
  it("refuses an unknown key with its line", () => {
    // base has 10 lines; the unknown key is line 11.
    expect(issues([...base, "colour: red"].join("\n"))).toStrictEqual(["/work/specs/run.yaml:11:1: colour: unknown key"]);
  });
  it("refuses a workload with neither a trace nor a synthetic source", () => {
    const text = [...base.slice(0, 7), "workload:", "  speedup: 2"].join("\n");
    expect(issues(text)).toStrictEqual(["/work/specs/run.yaml:8:1: workload: needs exactly one of trace or synthetic"]);
  });
  it("says that timing or topology is missing, rather than that its type or kind is wrong", () => {
    // Without lines 3-7 (topology) and 8 (timing); a missing key is located at the document.
    const text = [...base.slice(0, 2), ...base.slice(7)].join("\n");
    expect(issues(text)).toStrictEqual([
      "/work/specs/run.yaml:1:1: topology: is missing: a spec says how the workers are laid out, e.g. topology: { kind: aggregated, workers: 1 }",
      "/work/specs/run.yaml:1:1: timing: is missing: a spec says how long a forward pass takes, e.g. timing: { type: profile } (the profile's forward_pass tables) or timing: { type: fixed, prefill_ms: 20, decode_ms: 5 }",
    ]);
    // A present timing of an unknown type is still named as such, at its type key (column 11 of "timing: { type: magic }").
    expect(issues([...base.slice(0, 6), "timing: { type: magic }", ...base.slice(7)].join("\n"))).toStrictEqual([
      "/work/specs/run.yaml:7:11: timing.type: type must be fixed, polynomial, profile, linear or roofline",
    ]);
  });
  it("refuses a trace without its format", () => {
    const text = [...base.slice(0, 9)].join("\n");
    expect(issues(text)).toStrictEqual(["/work/specs/run.yaml:8:1: workload.format: is required with trace (mooncake, azure or kvsim)"]);
  });
  it("shows the problems inside an inline profile, not just that the union failed", () => {
    const text = [
      ...base.slice(0, 1),
      "profile:",
      "  schema_version: 1",
      "  model: m",
      '  vllm_version: "0.32.0"',
      "  tensor_parallel_size: 1",
      "  kv_bytes_per_token: -8",
      ...base.slice(2),
    ].join("\n");
    expect(issues(text)).toStrictEqual(["/work/specs/run.yaml:7:3: profile.kv_bytes_per_token: must be at least 1 byte (got -8)"]);
  });
  it("refuses role sections in an aggregated topology", () => {
    const text = [
      "version: 1",
      "profile: p.json",
      "topology: { kind: aggregated, workers: 1 }",
      "timing: { type: polynomial }",
      "workload: { synthetic: { requests: 1, input_tokens: 1, output_tokens: 1 } }",
      "decode: {}",
    ].join("\n");
    expect(issues(text)).toStrictEqual(["/work/specs/run.yaml:6:1: decode: applies to a disaggregated topology only"]);
  });
});

describe("engine settings", () => {
  it("a role override keeps only what it names (no defaults filled), so merging never resets the spec's engine", () => {
    expect(EngineOverridesSchema.parse({ max_num_seqs: 16 })).toStrictEqual({ max_num_seqs: 16 });
    const spec = parseSpec([...base, "engine: { num_gpu_blocks: 4096 }", "prefill: { engine: { max_num_seqs: 16 } }"].join("\n"), "/s.yaml");
    expect(engineSettings({ ...spec.engine, ...spec.prefill?.engine })).toStrictEqual({
      num_gpu_blocks: 4096,
      max_num_batched_tokens: 8192,
      max_num_seqs: 16,
      enable_prefix_caching: true,
      enable_chunked_prefill: true,
      long_prefill_token_threshold: 0,
      // Off unless set, so existing specs keep their results (vLLM turns the first two on by default).
      async_scheduling: false,
      scheduler_reserve_full_isl: false,
      data_parallel_size: 1,
      enable_expert_parallel: false,
    });
  });
  it("refuses a pool of one page (page 0 is the null page)", () => {
    expect(EngineOverridesSchema.safeParse({ num_gpu_blocks: 1 }).success).toBe(false);
  });
  it("takes vLLM's engine behaviours by vLLM's names and checks their ranges", () => {
    const engine = {
      async_scheduling: true,
      scheduler_reserve_full_isl: true,
      data_parallel_size: 2,
      enable_expert_parallel: true,
      cudagraph_capture_sizes: [1, 2, 4, 8],
    };
    expect(engineSettings(engine)).toMatchObject(engine);
    const messages = (o: object) => {
      const r = EngineOverridesSchema.safeParse(o);
      return r.success ? [] : r.error.issues.map((i) => `${i.path.join(".")}: ${i.message}`);
    };
    expect(messages({ data_parallel_size: 0 })).toEqual(["data_parallel_size: must be at least 1"]);
    expect(messages({ data_parallel_size: 1025 })).toEqual(["data_parallel_size: must be at most 1024"]);
    expect(messages({ cudagraph_capture_sizes: [] })).toEqual(["cudagraph_capture_sizes: must list at least one batch size"]);
    expect(messages({ cudagraph_capture_sizes: [1, 4, 4] })).toEqual(["cudagraph_capture_sizes: must be strictly increasing"]);
    expect(messages({ cudagraph_capture_sizes: [0, 1] })).toEqual(["cudagraph_capture_sizes.0: must be at least 1"]);
  });
});

describe("linear timing", () => {
  it("fills every coefficient it is not given with 0", () => {
    expect(TimingSchema.parse({ type: "linear", step_ms: 5.5, per_kv_token_us: 0.12 })).toStrictEqual({
      type: "linear",
      step_ms: 5.5,
      per_sequence_ms: 0,
      per_kv_token_us: 0.12,
      per_prompt_token_us: 0,
      per_cached_token_us: 0,
      prompt_step_ms: 0,
    });
  });
  it("refuses negative and unknown coefficients", () => {
    const r = TimingSchema.safeParse({ type: "linear", per_sequence_ms: -1, per_token_ms: 2 });
    expect(r.success ? [] : r.error.issues.map((i) => `${i.path.join(".")}: ${i.message}`)).toEqual([
      "per_sequence_ms: must be from 0 to 1000000 ms, about 17 minutes",
      ': Unrecognized key: "per_token_ms"',
    ]);
  });
  it("takes an optional experts term whose cost defaults to 0, and refuses more experts per token than experts", () => {
    expect(TimingSchema.parse({ type: "linear", experts: { num_experts: 128, num_experts_per_tok: 8 } })).toMatchObject({
      experts: { num_experts: 128, num_experts_per_tok: 8, all_experts_ms: 0 },
    });
    const r = TimingSchema.safeParse({ type: "linear", experts: { num_experts: 4, num_experts_per_tok: 5, all_experts_ms: 1 } });
    expect(r.success ? [] : r.error.issues.map((i) => `${i.path.join(".")}: ${i.message}`)).toEqual([
      "experts.num_experts_per_tok: num_experts_per_tok must be at most num_experts",
    ]);
    const zero = TimingSchema.safeParse({ type: "linear", experts: { num_experts: 0, num_experts_per_tok: 1 } });
    expect(zero.success ? [] : zero.error.issues.map((i) => `${i.path.join(".")}: ${i.message}`)).toEqual(["experts.num_experts: must be at least 1"]);
  });
});

describe("size limits that keep a typo from exhausting memory", () => {
  const base = {
    version: 1,
    profile: { schema_version: 1, model: "m", vllm_version: "0.32.0", tensor_parallel_size: 1, kv_bytes_per_token: 1 },
    timing: { type: "fixed", prefill_ms: 1, decode_ms: 1 },
    workload: { synthetic: { requests: 1, input_tokens: 1, output_tokens: 1 } },
  };
  const issues = (extra: object): string[] => {
    const r = SpecSchema.safeParse({ ...base, ...extra });
    return r.success ? [] : r.error.issues.map((i) => `${i.path.join(".")}: ${i.message}`);
  };
  it("allows 2^24 pages per rank and 1,024 workers per pool, and refuses one more", () => {
    // 2^24 = 16,777,216.
    expect(issues({ topology: { kind: "aggregated", workers: 1024 }, engine: { num_gpu_blocks: 16_777_216 } })).toEqual([]);
    expect(issues({ topology: { kind: "aggregated", workers: 1 }, engine: { num_gpu_blocks: 16_777_217 } })).toEqual([
      "engine.num_gpu_blocks: must be at most 16777216 (2^24) pages per rank",
    ]);
    expect(issues({ topology: { kind: "disaggregated", prefill: { workers: 1025 }, decode: { workers: 1 } } })).toEqual([
      "topology.prefill.workers: must be at most 1024",
    ]);
    // A synthetic request is bounded like a trace request: 2^24 + 1 = 16,777,217 tokens is refused.
    expect(
      issues({ topology: { kind: "aggregated", workers: 1 }, workload: { synthetic: { requests: 1, input_tokens: 16_777_217, output_tokens: 1 } } }),
    ).toEqual(["workload.synthetic.input_tokens: must be at most 16777216 (2^24) tokens"]);
  });
  it("bounds a pool's ranks (workers x data_parallel_size) at 1,024, naming the role's own setting", () => {
    // 512 workers x 2 = 1,024 ranks: allowed; 3 x 512 = 1,536: refused at engine.data_parallel_size.
    expect(issues({ topology: { kind: "aggregated", workers: 512 }, engine: { data_parallel_size: 2 } })).toEqual([]);
    expect(issues({ topology: { kind: "aggregated", workers: 512 }, engine: { data_parallel_size: 3 } })).toEqual([
      "engine.data_parallel_size: 3 ranks per worker on 512 workers make 1536 ranks; at most 1024 ranks per pool",
    ]);
    // The decode role's override is the one named; the prefill pool (1 x 2) is fine.
    const pd = {
      topology: { kind: "disaggregated", prefill: { workers: 1 }, decode: { workers: 600 } },
      engine: { data_parallel_size: 2 },
      decode: { engine: { data_parallel_size: 4 } },
    };
    expect(issues(pd)).toEqual([
      "decode.engine.data_parallel_size: 4 ranks per worker on 600 workers of the decode pool make 2400 ranks; at most 1024 ranks per pool",
    ]);
  });
});

describe("kv_transfer.bandwidth", () => {
  const pd = [...base.filter((l) => !l.startsWith("kv_transfer"))];
  const transfer = (line: string) => parseSpec([...pd, line].join("\n"), "/work/specs/run.yaml").kv_transfer;
  it("takes a unit and is read as decimal GB/s: 50 GB/s and 400 Gbit/s (/ 8) are both 50", () => {
    expect(transfer("kv_transfer: { bandwidth: 50 GB/s }")).toStrictEqual({ bandwidth_gbps: 50, mode: "destination_missing", fallback_latency_ms: 0 });
    expect(transfer("kv_transfer: { bandwidth: 400 Gbit/s }").bandwidth_gbps).toBe(50);
    // The deprecated key is the same setting.
    expect(transfer("kv_transfer: { bandwidth_gbps: 50 }")).toStrictEqual(transfer("kv_transfer: { bandwidth: 50 GB/s }"));
  });
  it("refuses both keys at once, and an ambiguous or bare value", () => {
    // Line 11 (pd has 10 lines); bandwidth_gbps follows "kv_transfer: { " (15) and "bandwidth: 50 GB/s, " (20): column 36.
    expect(issues([...pd, "kv_transfer: { bandwidth: 50 GB/s, bandwidth_gbps: 50 }"].join("\n"))).toStrictEqual([
      "/work/specs/run.yaml:11:36: kv_transfer.bandwidth_gbps: and bandwidth say the same thing; keep bandwidth (with its unit) only",
    ]);
    expect(issues([...pd, "kv_transfer: { bandwidth: 50 Gbps }"].join("\n"))[0]).toContain('kv_transfer.bandwidth: "50 Gbps" is ambiguous (bits or bytes?)');
    expect(issues([...pd, "kv_transfer: { bandwidth: 50 }"].join("\n"))[0]).toContain("kv_transfer.bandwidth: expected a bandwidth with its unit");
  });
  it("lists bandwidth_gbps as deprecated, with what to write instead (50 GB/s = 400 Gbit/s)", () => {
    expect(specDeprecations({ kv_transfer: { bandwidth_gbps: 50 } })).toStrictEqual([
      {
        path: "kv_transfer.bandwidth_gbps",
        message: 'is deprecated: it means gigabytes per second, but "Gbps" reads as gigabits (8x less); write bandwidth: 50 GB/s (or in Gbit/s: 400 Gbit/s)',
      },
    ]);
    expect(specDeprecations({ kv_transfer: { bandwidth: "50 GB/s" } })).toStrictEqual([]);
    expect(specDeprecations(null)).toStrictEqual([]);
  });
});

describe("kv_transfer.network", () => {
  const pd = [...base.filter((l) => !l.startsWith("kv_transfer"))];
  it("parses NIC and intra-node bandwidths with their units to bytes per second", () => {
    const text = [
      ...pd,
      "kv_transfer:",
      "  setup_latency_ms: 0.5",
      "  network:",
      "    nic: { send: 50 GB/s, receive: 400 Gbit/s }",
      "    max_concurrent_transfers: 2",
      "    nodes: { gpus_per_node: 8, intra_node_bandwidth: 450 GB/s }",
    ].join("\n");
    const spec = parseSpec(text, "/work/specs/run.yaml");
    expect(spec.kv_transfer).toStrictEqual({
      mode: "destination_missing",
      fallback_latency_ms: 0,
      setup_latency_ms: 0.5,
      network: {
        nic: { send: 50e9, receive: 50e9 }, // 400 Gbit/s = 50 x 10^9 B/s
        max_concurrent_transfers: 2,
        nodes: { gpus_per_node: 8, intra_node_bandwidth: 450e9, fill: "prefill_first" },
      },
    });
  });
  it("leaves the parsed kv_transfer unchanged when no network or setup latency is given", () => {
    expect(parseSpec(pd.join("\n"), "/work/specs/run.yaml").kv_transfer).toStrictEqual({ mode: "destination_missing", fallback_latency_ms: 0 });
  });
  it("refuses a bandwidth without a unit, naming the field", () => {
    const lines = issues([...pd, "kv_transfer: { network: { nic: { send: 50, receive: 50 GB/s } } }"].join("\n"));
    expect(lines.some((l) => l.includes("kv_transfer.network.nic.send") && l.includes("expected a bandwidth with its unit"))).toBe(true);
  });
  it("refuses network together with bandwidth_gbps or a fallback latency", () => {
    const lines = issues(
      [...pd, "kv_transfer: { bandwidth_gbps: 50, fallback_latency_ms: 3, network: { nic: { send: 50 GB/s, receive: 50 GB/s } } }"].join("\n"),
    );
    expect(lines.some((l) => l.includes("kv_transfer.bandwidth_gbps: prices a private pipe per handoff"))).toBe(true);
    expect(lines.some((l) => l.includes("kv_transfer.fallback_latency_ms: applies to the private pipe"))).toBe(true);
  });
  it("refuses network in an aggregated topology", () => {
    const agg = pd.map((l) => l.replace("kind: disaggregated", "kind: aggregated")).filter((l) => !l.includes("prefill:") && !l.includes("decode:"));
    agg.splice(agg.indexOf("  kind: aggregated") + 1, 0, "  workers: 2");
    const lines = issues([...agg, "kv_transfer: { network: { nic: { send: 50 GB/s, receive: 50 GB/s } } }"].join("\n"));
    expect(lines.some((l) => l.includes("kv_transfer.network: applies to a disaggregated topology only"))).toBe(true);
  });
  it("refuses network with data-parallel ranks, where the data_parallel_size is set", () => {
    const net = "kv_transfer: { network: { nic: { send: 50 GB/s, receive: 50 GB/s } } }";
    const lines = issues([...pd, net, "decode: { engine: { data_parallel_size: 2 } }"].join("\n"));
    expect(lines.filter((l) => l.includes("data_parallel_size"))).toEqual([
      "/work/specs/run.yaml:12:21: decode.engine.data_parallel_size: 2 ranks per worker of the decode pool: kv_transfer.network has one NIC per worker, which data-parallel ranks would share (not modelled); use data_parallel_size 1 or the private pipe (bandwidth_gbps)",
    ]);
    expect(issues([...pd, net, "engine: { data_parallel_size: 2 }"].join("\n")).filter((l) => l.includes("data_parallel_size"))).toHaveLength(2);
  });
  it("refuses a negative or absurd setup latency", () => {
    expect(
      issues([...pd, "kv_transfer: { setup_latency_ms: -1 }"].join("\n")).some((l) => l.includes("kv_transfer.setup_latency_ms: must be from 0 to 1000000 ms")),
    ).toBe(true);
    expect(
      issues([...pd, "kv_transfer: { setup_latency_ms: 1e9 }"].join("\n")).some((l) =>
        l.includes("kv_transfer.setup_latency_ms: must be from 0 to 1000000 ms"),
      ),
    ).toBe(true);
  });
});
