import { setAt } from "./overrides.js";
import { InputError, parseDocumentText } from "@kvsim/profile-schema";
import { describe, expect, it } from "vitest";
import { applyOverrides, parseSetFlag, parseSpecPath, SpecInputError, specWithOverrides } from "./index.js";

const PROFILE = { schema_version: 1, model: "test/linear", vllm_version: "0.32.0", tensor_parallel_size: 1, kv_bytes_per_token: 1000 };

// A disaggregated spec with an inline profile, so no file is read. Line numbers matter below:
// line 1 version, 2 profile, 3 topology, 4 engine, 5 timing, 6 workload.
const PD_SPEC = `version: 1
profile: ${JSON.stringify(PROFILE)}
topology: { kind: disaggregated, prefill: { workers: 1 }, decode: { workers: 2 } }
engine: { num_gpu_blocks: 64, block_size: 4, max_num_seqs: 8 }
timing: { type: fixed, prefill_ms: 10, decode_ms: 2 }
workload: { trace: ./trace.jsonl, format: kvsim }
`;
const doc = (text = PD_SPEC, file = "/specs/pd.yaml") => parseDocumentText(text, file);
const set = (flag: string) => parseSetFlag(flag, "/work");

function thrown(fn: () => unknown): InputError {
  try {
    fn();
  } catch (e) {
    if (e instanceof InputError) return e;
    throw e;
  }
  throw new Error("expected an InputError");
}

describe("spec paths", () => {
  it("are keys joined by dots, with [n] for list items", () => {
    expect(parseSpecPath("engine.max_num_seqs")).toEqual(["engine", "max_num_seqs"]);
    expect(parseSpecPath("prefill.engine.num_gpu_blocks")).toEqual(["prefill", "engine", "num_gpu_blocks"]);
    expect(parseSpecPath("profile.kv_cache_groups[1].window_tokens")).toEqual(["profile", "kv_cache_groups", 1, "window_tokens"]);
    expect(parseSpecPath("$schema")).toEqual(["$schema"]);
    for (const bad of ["", "engine.", ".engine", "engine..x", "a b", "[0]", "engine[x]"]) expect(parseSpecPath(bad)).toBeUndefined();
  });
});

describe("--set flags", () => {
  it("parse the value as YAML: numbers, booleans, mappings, lists, null", () => {
    expect(set("engine.max_num_seqs=128")).toEqual({ path: ["engine", "max_num_seqs"], value: 128, source: "--set engine.max_num_seqs=128" });
    expect(set("workload.speedup=2.5").value).toBe(2.5);
    expect(set("engine.enable_prefix_caching=false").value).toBe(false);
    expect(set("topology={kind: aggregated, workers: 3}").value).toEqual({ kind: "aggregated", workers: 3 });
    expect(set("sla=null").value).toBeNull();
    expect(set("router=kv_aware").value).toBe("kv_aware");
  });

  it("resolve a relative profile or trace path against the folder they were given in", () => {
    expect(set("workload.trace=traces/t.jsonl").value).toBe("/work/traces/t.jsonl");
    expect(set("decode.profile=p.json").value).toBe("/work/p.json");
    expect(set("workload={trace: t.jsonl, format: kvsim}").value).toEqual({ trace: "/work/t.jsonl", format: "kvsim" });
    expect(set("workload.trace=/abs/t.jsonl").value).toBe("/abs/t.jsonl");
    // Not a path field: left as written.
    expect(set("router=./x").value).toBe("./x");
  });

  it("refuse a flag without '=', a bad path or an empty value, naming the flag", () => {
    const noEq = thrown(() => set("engine.max_num_seqs"));
    expect(noEq.message).toBe("--set engine.max_num_seqs: expected <path>=<value>, e.g. engine.max_num_seqs=128");
    expect(thrown(() => set("engine..x=1")).message).toBe(
      '--set engine..x=1: "engine..x" is not a spec path (keys joined by dots, e.g. prefill.engine.num_gpu_blocks)',
    );
    expect(thrown(() => set("sla=")).message).toBe("--set sla=: sla: needs a value after '=' (null removes the key)");
    expect(thrown(() => set("engine={a: 1")).file).toBe("--set engine={a: 1");
  });
});

describe("applying overrides", () => {
  it("copies along the path, creates missing mappings and removes a key set to null", () => {
    const base = { engine: { max_num_seqs: 8 }, sla: { ttft_ms: 1 } };
    const out = applyOverrides(base, [set("engine.max_num_seqs=64"), set("prefill.engine.num_gpu_blocks=512"), set("sla=null")]);
    expect(out).toEqual({ engine: { max_num_seqs: 64 }, prefill: { engine: { num_gpu_blocks: 512 } } });
    expect(base).toEqual({ engine: { max_num_seqs: 8 }, sla: { ttft_ms: 1 } });
    expect(setAt({ a: [1, 2, 3] }, ["a", 1], 9)).toEqual({ a: [1, 9, 3] });
  });

  it("refuses to set a key inside a scalar, naming the flag", () => {
    const e = thrown(() => applyOverrides({ engine: 5 }, [set("engine.max_num_seqs=64")]));
    expect(e.message).toBe("--set engine.max_num_seqs=64: engine.max_num_seqs: max_num_seqs is set inside something that is not a mapping");
  });
});

describe("a spec with overrides", () => {
  it("takes engine.max_num_seqs, prefill.engine.num_gpu_blocks, topology.decode.workers and workload.speedup", () => {
    const spec = specWithOverrides(doc(), [
      set("engine.max_num_seqs=128"),
      set("prefill.engine.num_gpu_blocks=1024"),
      set("topology.decode.workers=4"),
      set("workload.speedup=2"),
    ]);
    expect(spec.engine.max_num_seqs).toBe(128);
    expect(spec.prefill?.engine?.num_gpu_blocks).toBe(1024);
    expect(spec.topology).toEqual({ kind: "disaggregated", prefill: { workers: 1 }, decode: { workers: 4 } });
    expect(spec.workload.speedup).toBe(2);
    // The spec's own relative trace path resolves against its folder; a --set path against /work.
    expect(spec.workload.trace).toBe("/specs/trace.jsonl");
    expect(specWithOverrides(doc(), [set("workload.trace=t2.jsonl")]).workload.trace).toBe("/work/t2.jsonl");
  });

  it("sets a router setting inside a router written as a policy name (router: kv_aware)", () => {
    const spec = specWithOverrides(doc(`${PD_SPEC}router: kv_aware\n`), [set("router.overlap_score_weight=2"), set("router.router_temperature=0.5")]);
    expect(spec.router).toEqual({ policy: "kv_aware", overlap_score_weight: 2, router_temperature: 0.5, seed: 0 });
    // A setting the policy does not have is an unknown key, blamed on the flag.
    const e = thrown(() => specWithOverrides(doc(`${PD_SPEC}router: round_robin\n`), [set("router.overlap_score_weight=2")]));
    expect(e.message).toBe("--set router.overlap_score_weight=2: router.overlap_score_weight: unknown key");
  });

  it("without overrides is the spec file, validated", () => {
    expect(specWithOverrides(doc()).engine.max_num_seqs).toBe(8);
  });

  it("blames a bad value on the --set flag that set it", () => {
    const e = thrown(() => specWithOverrides(doc(), [set("engine.max_num_seqs=0")]));
    expect(e.file).toBe("--set engine.max_num_seqs=0");
    expect(e.message).toBe("--set engine.max_num_seqs=0: engine.max_num_seqs: must be at least 1 (got 0)");
    const unknown = thrown(() => specWithOverrides(doc(), [set("engine.max_num_seq=3")]));
    // One letter from engine.max_num_seqs: suggested.
    expect(unknown.message).toBe("--set engine.max_num_seq=3: engine.max_num_seq: unknown key (did you mean max_num_seqs?)");
    const workers = thrown(() => specWithOverrides(doc(), [set("topology.decode.workers=two")]));
    expect(workers.message).toMatch(/^--set topology\.decode\.workers=two: topology\.decode\.workers: /);
  });

  it("names the spec file and line for its own problems, and each flag for its own", () => {
    const bad = PD_SPEC.replace("max_num_seqs: 8", "max_num_seqs: -1");
    const e = thrown(() => specWithOverrides(doc(bad), [set("workload.speedup=0")]));
    expect(e).toBeInstanceOf(SpecInputError);
    // engine is on line 4; the max_num_seqs key follows "engine: { " (10 characters),
    // "num_gpu_blocks: 64, " (20) and "block_size: 4, " (15): column 10 + 20 + 15 + 1 = 46.
    expect(e.message.split("\n")).toEqual([
      "/specs/pd.yaml:4:46: engine.max_num_seqs: must be at least 1 (got -1)",
      "--set workload.speedup=0: workload.speedup: must be from 0.000001 to 1000000 (got 0)",
    ]);
  });

  it("says which override changed a mapping whose problem is above it", () => {
    // Setting synthetic next to the trace leaves a workload with both: a problem of `workload`.
    const e = thrown(() => specWithOverrides(doc(), [set("workload.synthetic={requests: 2, input_tokens: 4, output_tokens: 2}")]));
    // Line 6 is the workload; its format key follows "workload: { trace: ./trace.jsonl, " (34 characters).
    expect(e.message.split("\n")).toEqual([
      "/specs/pd.yaml:6:1: workload: needs exactly one of trace or synthetic (with --set workload.synthetic={requests: 2, input_tokens: 4, output_tokens: 2})",
      "/specs/pd.yaml:6:35: workload.format: applies to trace workloads only",
    ]);
  });
});
