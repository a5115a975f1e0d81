import { describe, expect, it } from "vitest";
import { specProblemPath, specRankConfigs } from "./rank-configs.js";
import { glmProfile, linearProfile, traceSpec } from "./test-fixtures.js";

const fixed = { type: "fixed", prefill_ms: 10, decode_ms: 2 };
const engine = { num_gpu_blocks: 16, block_size: 4, max_num_seqs: 4, max_num_batched_tokens: 64 };
const pd = { kind: "disaggregated", prefill: { workers: 1 }, decode: { workers: 1 } };

describe("specRankConfigs: a spec and its profiles to each role's rank configuration", () => {
  it("builds one configuration per role, the prefill role with the spec's transfer settings", () => {
    const p = linearProfile(1000);
    const spec = traceSpec({ profile: p, topology: pd, engine, timing: fixed, kv_transfer: { bandwidth_gbps: 25 } });
    const { configs, problems } = specRankConfigs(spec, { prefill: p, decode: p });
    expect(problems).toEqual([]);
    expect(configs.map((c) => [c.role, c.config.engine.max_num_seqs, c.config.kvTransfer?.bandwidthGbps])).toEqual([
      ["prefill", 4, 25],
      ["decode", 4, undefined],
    ]);
  });

  it("places an engine problem where the field is set: the role's override, else the spec's engine", () => {
    // A grouped profile takes its block sizes from its cache groups: engine.block_size is refused.
    const glm = glmProfile("0.32.0");
    const base = { profile: glm, topology: pd, engine: { num_gpu_blocks: 64 }, timing: fixed };
    const inDecode = traceSpec({ ...base, decode: { engine: { block_size: 16 } } });
    const r = specRankConfigs(inDecode, { prefill: glm, decode: glm });
    expect(r.problems.map((q) => specProblemPath(inDecode, q.at))).toEqual(["decode.engine.block_size"]);
    expect(r.problems[0]!.message).toBe("decode rank: applies to linear profiles only; a grouped profile takes its block sizes from kv_cache_groups");
    // The prefill rank, unaffected, is built.
    expect(r.configs.map((c) => c.role)).toEqual(["prefill"]);
    const inBoth = traceSpec({ ...base, engine: { num_gpu_blocks: 64, block_size: 16 } });
    expect(specRankConfigs(inBoth, { prefill: glm, decode: glm }).problems.map((q) => specProblemPath(inBoth, q.at))).toEqual([
      "engine.block_size",
      "engine.block_size",
    ]);
  });

  it("reports a timing that needs what the profile lacks once, at timing.type, not once per role", () => {
    const p = linearProfile(1000);
    const spec = traceSpec({ profile: p, topology: pd, engine, timing: { type: "profile" } });
    const { configs, problems } = specRankConfigs(spec, { prefill: p, decode: p });
    expect(configs).toEqual([]);
    expect(problems).toHaveLength(1);
    expect(problems[0]!.at).toEqual({ in: "spec", path: ["timing", "type"] });
    expect(problems[0]!.message).toMatch(/^"profile" timing needs the profile's forward_pass tables, and profile .* has none/);
  });

  it("checks the P/D gate of each role's profile before anything else, at the profile's field", () => {
    const old = { ...glmProfile("0.31.0"), vllm_version: "0.30.0" };
    const spec = traceSpec({ profile: old, topology: pd, engine: { num_gpu_blocks: 64 }, timing: fixed });
    const { problems } = specRankConfigs(spec, { prefill: old, decode: old });
    expect(problems.map((q) => [q.at, q.message.split(":")[0]])).toEqual([
      [{ in: "profile", role: "prefill", path: "vllm_version" }, "prefill role"],
      [{ in: "profile", role: "decode", path: "vllm_version" }, "decode role"],
    ]);
    expect(specProblemPath(spec, problems[1]!.at)).toBe("profile: vllm_version");
  });

  it("leaves out a role whose profile could not be loaded, and checks the others", () => {
    const p = linearProfile(1000);
    const spec = traceSpec({ profile: p, topology: pd, engine, timing: fixed });
    expect(specRankConfigs(spec, { decode: p }).configs.map((c) => c.role)).toEqual(["decode"]);
  });
});
