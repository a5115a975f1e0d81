import { createHash } from "node:crypto";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { runCli } from "../main.js";
import { captureIo } from "../test-io.js";
import { VERSION } from "../version.js";
import { changedSettings } from "./run-record.js";

const base = {
  version: 1,
  profile: "./p.json",
  topology: { kind: "aggregated", workers: 1 },
  timing: { type: "fixed", prefill_ms: 10, decode_ms: 2 },
  workload: { synthetic: { requests: 2, input_tokens: 8, output_tokens: 2 } },
};

describe("the settings changed from their defaults", () => {
  it("are none for a spec of required fields only, or of settings equal to their defaults", () => {
    expect(changedSettings(base)).toEqual({});
    // The documented defaults: 256 sequences, 8,192 batched tokens, round_robin, speedup 1, seed 0, mode destination_missing.
    const defaults = {
      ...base,
      engine: { max_num_seqs: 256, max_num_batched_tokens: 8192, enable_prefix_caching: true },
      router: "round_robin",
      kv_transfer: { mode: "destination_missing", fallback_latency_ms: 0 },
      workload: { synthetic: { ...base.workload.synthetic, seed: 0, shared_prefix_ratio: 0 } },
    };
    expect(changedSettings(defaults)).toEqual({});
  });
  it("name each changed or optional setting by its dotted path, with its value as written", () => {
    const spec = {
      ...base,
      engine: { max_num_seqs: 8, max_num_batched_tokens: 8192 },
      router: "kv_aware",
      sla: { ttft_ms: 500 },
      max_virtual_time_ms: 60_000,
      workload: { synthetic: { ...base.workload.synthetic, seed: 7 } },
    };
    expect(changedSettings(spec)).toEqual({
      "engine.max_num_seqs": 8,
      router: "kv_aware",
      "sla.ttft_ms": 500,
      max_virtual_time_ms: 60_000,
      "workload.synthetic.seed": 7,
    });
  });
  it("keep a required value of an optional section (a shared network's NIC), and leave out the timing's required values", () => {
    const spec = {
      ...base,
      topology: { kind: "disaggregated", prefill: { workers: 1 }, decode: { workers: 1 } },
      decode: { engine: { max_num_seqs: 4 } },
      kv_transfer: { network: { nic: { send: "50 GB/s", receive: "400 Gbit/s" } } },
    };
    expect(changedSettings(spec)).toEqual({
      "decode.engine.max_num_seqs": 4,
      "kv_transfer.network.nic.send": "50 GB/s",
      "kv_transfer.network.nic.receive": "400 Gbit/s",
    });
  });
});

const dir = mkdtempSync(join(tmpdir(), "kvsim-run-record-"));
afterAll(() => {
  rmSync(dir, { recursive: true, force: true });
});

describe("the report's run record", () => {
  it("gives the version, the spec's path, hash and --set flags, the model, topology, timing and changed settings, outside the digest", async () => {
    writeFileSync(
      join(dir, "p.json"),
      JSON.stringify({ schema_version: 1, model: "test/linear", vllm_version: "0.32.0", tensor_parallel_size: 1, kv_bytes_per_token: 1000 }),
    );
    const text = `${JSON.stringify({ ...base, engine: { num_gpu_blocks: 64, block_size: 4 } })}\n`;
    writeFileSync(join(dir, "s.json"), text);
    const replay = async (...extra: string[]) => {
      const io = captureIo();
      expect(await runCli(["replay", "--spec", join(dir, "s.json"), "--format", "json", ...extra], io)).toBe(0);
      return JSON.parse(io.stdout) as { run: Record<string, unknown>; digest: string };
    };
    const plain = await replay();
    expect(plain.run).toEqual({
      kvsim_version: VERSION,
      spec: { path: join(dir, "s.json"), sha256: createHash("sha256").update(text).digest("hex"), set: [] },
      model: "test/linear",
      profiles: [{ role: "all", path: join(dir, "p.json"), model: "test/linear", vllm_version: "0.32.0", tensor_parallel_size: 1 }],
      topology: { kind: "aggregated", workers: 1 },
      timing: { type: "fixed", prefill_ms: 10, decode_ms: 2 },
      // 64 pages against the default 16,384; block_size has no default (linear profiles need it).
      changed_settings: { "engine.num_gpu_blocks": 64, "engine.block_size": 4 },
    });
    // A --set that changes nothing the replay computes changes the record, not the digest.
    // (200 sequences instead of 256: two requests never meet either limit.)
    const set = await replay("--set", "engine.max_num_seqs=200");
    expect(set.run.spec).toMatchObject({ set: ["engine.max_num_seqs=200"] });
    expect(set.run.changed_settings).toEqual({ "engine.num_gpu_blocks": 64, "engine.block_size": 4, "engine.max_num_seqs": 200 });
    expect(set.digest).toBe(plain.digest);
  });
});
