import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";
import { runCli } from "../main.js";
import { captureIo } from "../test-io.js";

const EXAMPLE = fileURLToPath(new URL("../../examples/replay-roofline.yaml", import.meta.url));

async function kvsim(...argv: string[]) {
  const io = captureIo();
  const code = await runCli(argv, io);
  return { code, stdout: io.stdout, stderr: io.stderr };
}

describe("kvsim replay with timing: roofline", () => {
  it("the bundled example says its step times rest on a datasheet and shipped efficiencies", async () => {
    const r = await kvsim("replay", "--spec", EXAMPLE, "--set", "workload.synthetic.requests=20");
    expect(r.code).toBe(0);
    expect(r.stdout).toContain("timing: roofline on H100-SXM's datasheet with the shipped efficiencies, not calibrated on this deployment");
  });
  it("names the efficiencies a spec sets", async () => {
    const r = await kvsim("replay", "--spec", EXAMPLE, "--set", "workload.synthetic.requests=20", "--set", "timing.memory_efficiency=0.9");
    expect(r.code).toBe(0);
    expect(r.stdout).toContain("timing: roofline on H100-SXM's datasheet with the spec's memory_efficiency and shipped values for the rest");
  });
  it("a slower memory makes every token slower", async () => {
    const json = async (...extra: string[]) => {
      const r = await kvsim("replay", "--spec", EXAMPLE, "--set", "workload.synthetic.requests=20", "--format", "json", ...extra);
      return JSON.parse(r.stdout) as { mean_tpot_ms: number };
    };
    const base = await json();
    const slow = await json("--set", "timing.memory_efficiency=0.4");
    expect(slow.mean_tpot_ms).toBeGreaterThan(base.mean_tpot_ms);
  });
  it("refuses, naming the field, a spec without a GPU or a profile without model_shape", async () => {
    const dir = mkdtempSync(join(tmpdir(), "kvsim-roofline-"));
    const profile = join(dir, "p.json");
    writeFileSync(profile, JSON.stringify({ schema_version: 1, model: "m", vllm_version: "0.19.0", tensor_parallel_size: 1, kv_bytes_per_token: 1024 }));
    const spec = join(dir, "s.yaml");
    writeFileSync(
      spec,
      [
        "version: 1",
        "profile: ./p.json",
        "topology: { kind: aggregated, workers: 1 }",
        "engine: { num_gpu_blocks: 100 }",
        "timing: { type: roofline }",
        "workload: { synthetic: { requests: 2, input_tokens: 8, output_tokens: 2 } }",
        "",
      ].join("\n"),
    );
    const r = await kvsim("validate", spec);
    expect(r.code).toBe(2);
    expect(r.stderr).toContain('timing.type: "roofline" timing needs the profile\'s model_shape, and profile m has none');
    expect(r.stderr).toContain("engine.gpu");
  });
});
