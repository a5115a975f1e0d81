import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { GroupedProfile } from "@kvsim/profile-schema";
import { glmFlashProfile } from "@kvsim/profile-schema/testing";
import { runCli } from "../main.js";
import { captureIo } from "../test-io.js";

// GLM-5.3-Flash, TP 4, fp8, vLLM 0.32.0 (docs/rules/grouped-pd.md §2; the arithmetic is in
// @kvsim/profile-schema/testing): 13,045,120 B per full-attention block, 36,927,488 fixed bytes.
const GLM = glmFlashProfile("0.32.0") as GroupedProfile;
// Rows at N 8,192 (T 8,191 = 4 full blocks: 4 x 13,045,120 = 52,180,480); fixed 22,528 + 2 x 9,768,960 + 2 x 8,683,520 = 36,927,488.
const GLM_ROWS_8192 = [
  { name: "full_attention", kind: "full_attention", blocks: 4, bytes: 52_180_480 },
  { name: "tail_ring", kind: "state", blocks: 1, bytes: 22_528 },
  { name: "kda_0", kind: "state", blocks: 1, bytes: 9_768_960 },
  { name: "kda_1", kind: "state", blocks: 1, bytes: 9_768_960 },
  { name: "kda_2", kind: "state", blocks: 1, bytes: 8_683_520 },
  { name: "kda_3", kind: "state", blocks: 1, bytes: 8_683_520 },
];

let dir = "";
let oldText = "";
const path = (name: string) => join(dir, name);

beforeAll(() => {
  dir = mkdtempSync(join(tmpdir(), "kvsim-transfer-"));
  writeFileSync(path("glm.json"), JSON.stringify(GLM));
  writeFileSync(
    path("linear.json"),
    JSON.stringify({ schema_version: 1, model: "test/linear", vllm_version: "0.32.0", tensor_parallel_size: 1, kv_bytes_per_token: 1000 }),
  );
  const old = { ...GLM, kv_cache_groups: GLM.kv_cache_groups.map((g) => (g.name === "tail_ring" ? { ...g, transfer_bytes_per_block: undefined } : g)) };
  oldText = JSON.stringify(old);
  writeFileSync(path("old.json"), oldText);
  writeFileSync(path("broken.json"), '{ "schema_version": 1, ');
});
afterAll(() => {
  rmSync(dir, { recursive: true, force: true });
});

async function run(args: readonly string[]) {
  const io = captureIo();
  const code = await runCli(["transfer", ...args], io);
  return { code, stdout: io.stdout, stderr: io.stderr };
}
async function json(args: readonly string[]) {
  const r = await run([...args, "--format", "json"]);
  expect(r.stderr).toBe("");
  expect(r.code).toBe(0);
  return JSON.parse(r.stdout) as Record<string, unknown>;
}

describe("kvsim transfer --format json", () => {
  it("prices the GLM-5.3-Flash 0.32.0 oracle at N 8,192 and 1 GB/s", async () => {
    const r = await run(["--profile", path("glm.json"), "--prompt-tokens", "8192", "--bandwidth", "1 GB/s", "--format", "json"]);
    expect(r.code).toBe(0);
    // 89,107,968 B / 10^9 B/s x 1000 = 89.107968 ms, printed without a binary tail.
    expect(r.stdout).toContain('"delay_ms": 89.107968\n');
    expect(JSON.parse(r.stdout)).toEqual({
      model: "zai-org/GLM-5.3-Flash",
      vllm_version: "0.32.0",
      unit: "block",
      block_size_tokens: 2176,
      mode: "full_prompt",
      prompt_tokens: 8192,
      backoff_tokens: 1,
      transferred_tokens: 8191,
      prompt_units: 4,
      bytes_per_unit: 13_045_120,
      groups: GLM_ROWS_8192,
      fixed_bytes: 36_927_488,
      // 52,180,480 + 36,927,488
      payload_bytes: 89_107_968,
      bandwidth_gbps: 1,
      delay_ms: 89.107968,
    });
  });
  it("without a bandwidth, delay_ms is null", async () => {
    const out = await json(["--profile", path("glm.json"), "--prompt-tokens", "1000"]);
    // N 1,000: T 999 = 1 block: 13,045,120 + 36,927,488 = 49,972,608.
    expect(out).toMatchObject({ payload_bytes: 49_972_608, delay_ms: null, bandwidth_gbps: null });
  });
  it("a partial destination hit defaults to destination_missing and charges what is missing", async () => {
    // Hit 4,352 = 2 blocks; 4 - 2 = 2 missing: 2 x 13,045,120 = 26,090,240 + 36,927,488 = 63,017,728 B = 63.017728 ms.
    const out = await json(["--profile", path("glm.json"), "--prompt-tokens", "8192", "--destination-cached-tokens", "4352", "--bandwidth", "1 GB/s"]);
    expect(out).toMatchObject({
      mode: "destination_missing",
      destination_cached_tokens: 4352,
      missing_units: 2,
      missing_fixed_bytes: 36_927_488,
      fixed_bytes: 36_927_488,
      payload_bytes: 63_017_728,
      delay_ms: 63.017728,
    });
    expect((out.groups as { blocks: number }[]).map((g) => g.blocks)).toEqual([2, 1, 1, 1, 1, 1]);
  });
  it("a full destination hit moves nothing; --mode full_prompt still charges the whole prompt", async () => {
    // 8,705 prompt tokens: T = 8,704 = 4 x 2,176 needs 4 blocks, and the destination holds all 4
    // (8,704 tokens; a destination never holds more of a prompt than it has). Full prompt: the
    // same 4 blocks as for 8,192 tokens, so the same rows.
    const hit = ["--profile", path("glm.json"), "--prompt-tokens", "8705", "--destination-cached-tokens", "8704", "--bandwidth", "1 GB/s"];
    const out = await json(hit);
    expect(out).toMatchObject({ missing_units: 0, missing_fixed_bytes: 0, fixed_bytes: 0, payload_bytes: 0, delay_ms: 0 });
    expect((out.groups as { bytes: number }[]).every((g) => g.bytes === 0)).toBe(true);
    const full = await json([...hit, "--mode", "full_prompt"]);
    expect(full).toMatchObject({ mode: "full_prompt", missing_units: 0, fixed_bytes: 36_927_488, payload_bytes: 89_107_968, groups: GLM_ROWS_8192 });
  });
  it("a linear profile counts tokens: exact for the full prompt, block-rounded for what is missing", async () => {
    const full = await json(["--profile", path("linear.json"), "--prompt-tokens", "10", "--block-size", "4"]);
    // 10 tokens x 1,000 B = 10,000 B; the row covers cdiv(10, 4) = 3 engine blocks.
    expect(full).toEqual({
      model: "test/linear",
      vllm_version: "0.32.0",
      unit: "token",
      engine_block_size_tokens: 4,
      mode: "full_prompt",
      prompt_tokens: 10,
      backoff_tokens: 0,
      transferred_tokens: 10,
      prompt_units: 10,
      bytes_per_unit: 1000,
      groups: [{ name: "kv", kind: "full_attention", blocks: 3, bytes: 10_000 }],
      fixed_bytes: 0,
      payload_bytes: 10_000,
      bandwidth_gbps: null,
      delay_ms: null,
    });
    // No hit: cdiv(10, 4) x 4 = 12 tokens x 1,000 = 12,000 B; at 2 GB/s 12,000 / 2e9 s = 0.006 ms.
    const missing = await json([
      "--profile",
      path("linear.json"),
      "--prompt-tokens",
      "10",
      "--block-size",
      "4",
      "--destination-cached-tokens",
      "0",
      "--bandwidth",
      "2 GB/s",
    ]);
    expect(missing).toMatchObject({ mode: "destination_missing", missing_units: 12, payload_bytes: 12_000, delay_ms: 0.006 });
    expect(missing).not.toHaveProperty("block_size_tokens");
  });
});

describe("kvsim transfer (table)", () => {
  it("prints one row per group, the totals and the delay", async () => {
    const r = await run(["--profile", path("glm.json"), "--prompt-tokens", "8192", "--bandwidth", "1 GB/s"]);
    expect(r.code).toBe(0);
    const lines = r.stdout.split("\n");
    expect(lines).toContain("profile      zai-org/GLM-5.3-Flash (vLLM 0.32.0; grouped, full-attention block 2,176 tokens)");
    expect(lines).toContain("prompt       8,192 tokens: backoff 1, transferred 8,191 tokens = 4 blocks");
    expect(lines).toContain("group           kind            blocks       bytes");
    expect(lines).toContain("full_attention  full_attention       4  52,180,480");
    expect(lines).toContain("tail_ring       state                1      22,528");
    expect(lines).toContain("kda_3           state                1   8,683,520");
    // 4 + 5 x 1 = 9 blocks.
    expect(lines).toContain("total                                9  89,107,968");
    expect(lines).toContain("payload      89,107,968 bytes = 4 blocks x 13,045,120 + 36,927,488 fixed");
    expect(lines).toContain("delay        89.107968 ms at 1 GB/s");
  });
  it("prints a linear profile's pseudo-group row in engine blocks and its payload in tokens", async () => {
    const r = await run([
      "--profile",
      path("linear.json"),
      "--prompt-tokens",
      "10",
      "--destination-cached-tokens",
      "4",
      "--block-size",
      "4",
      "--bandwidth",
      "1 GB/s",
    ]);
    expect(r.code).toBe(0);
    const lines = r.stdout.split("\n");
    expect(lines).toContain("profile      test/linear (vLLM 0.32.0; linear, 1,000 bytes per token, engine block 4 tokens)");
    expect(lines).toContain("prompt       10 tokens: backoff 0, transferred 10 tokens");
    // Hit 4 = 1 whole block; cdiv(10, 4) - 1 = 2 blocks = 8 tokens x 1,000 = 8,000 B; at 1 GB/s 8,000 / 10^6 = 0.008 ms.
    expect(lines).toContain("destination  holds 4 tokens; lacks 8 tokens and 0 fixed bytes");
    expect(lines).toContain("kv     full_attention       2  8,000");
    expect(lines).toContain("payload      8,000 bytes = 8 tokens x 1,000 + 0 fixed");
    expect(lines).toContain("delay        0.008 ms at 1 GB/s");
  });
  it("shows the destination and says when no delay is modelled", async () => {
    const r = await run(["--profile", path("glm.json"), "--prompt-tokens", "8192", "--destination-cached-tokens", "4352"]);
    expect(r.code).toBe(0);
    expect(r.stdout).toContain("destination  holds 4,352 tokens; lacks 2 blocks and 36,927,488 fixed bytes\n");
    expect(r.stdout).toContain("payload      63,017,728 bytes = 2 blocks x 13,045,120 + 36,927,488 fixed\n");
    expect(r.stdout).toContain("delay        not modelled (no --bandwidth)\n");
  });
});

describe("kvsim transfer --bandwidth", () => {
  it("takes bytes or bits: 50 GB/s and 400 Gbit/s (400 / 8 = 50 GB/s) give the same delay, with nothing on stderr", async () => {
    const bytes = await run(["--profile", path("glm.json"), "--prompt-tokens", "8192", "--bandwidth", "50 GB/s", "--format", "json"]);
    const bits = await run(["--profile", path("glm.json"), "--prompt-tokens", "8192", "--bandwidth", "400 Gbit/s", "--format", "json"]);
    expect([bytes.code, bytes.stderr, bits.code, bits.stderr]).toEqual([0, "", 0, ""]);
    // 89,107,968 bytes at 5 x 10^10 B/s = 1.78215936 ms.
    expect((JSON.parse(bytes.stdout) as { delay_ms: number }).delay_ms).toBeCloseTo(1.78215936, 12);
    expect(bits.stdout).toBe(bytes.stdout);
  });
  it("still takes the deprecated --bandwidth-gbps (gigabytes), with a warning on stderr saying what to write", async () => {
    const old = await run(["--profile", path("glm.json"), "--prompt-tokens", "8192", "--bandwidth-gbps", "50", "--format", "json"]);
    const now = await run(["--profile", path("glm.json"), "--prompt-tokens", "8192", "--bandwidth", "50 GB/s", "--format", "json"]);
    expect(old.code).toBe(0);
    expect(old.stdout).toBe(now.stdout);
    expect(old.stderr).toBe(
      'warning: --bandwidth-gbps is deprecated: it means gigabytes per second, but "Gbps" reads as gigabits (8x less); write --bandwidth "50 GB/s"\n',
    );
  });
});

describe("kvsim transfer --help", () => {
  it("documents the default mode", async () => {
    const r = await run(["--help"]);
    expect(r.code).toBe(0);
    expect(r.stdout.replace(/\s+/g, " ")).toContain("(default: destination_missing when --destination-cached-tokens is given, else full_prompt)");
  });
});

describe("kvsim transfer: bad input exits 2 and prints nothing on stdout", () => {
  const glm = () => ["--profile", path("glm.json")];
  it.each([
    [["--prompt-tokens", "0"], "--prompt-tokens must be at least 1, got 0"],
    [["--prompt-tokens", "1.5"], '--prompt-tokens must be an integer, got "1.5"'],
    [["--prompt-tokens", "many"], '--prompt-tokens must be a finite number, got "many"'],
    [["--prompt-tokens", "10", "--bandwidth-gbps", "0"], "--bandwidth-gbps: bandwidth must be greater than 0 GB/s"],
    [["--prompt-tokens", "10", "--bandwidth-gbps", "-2"], "--bandwidth-gbps: bandwidth must be greater than 0 GB/s"],
    [["--prompt-tokens", "10", "--bandwidth", "50 Gbps"], '--bandwidth: "50 Gbps" is ambiguous (bits or bytes?)'],
    [["--prompt-tokens", "10", "--bandwidth", "50"], '--bandwidth: "50" is not a bandwidth'],
    [["--prompt-tokens", "10", "--bandwidth", "50 GB/s", "--bandwidth-gbps", "50"], "--bandwidth and --bandwidth-gbps give the same thing"],
    [["--prompt-tokens", "10", "--destination-cached-tokens", "-1"], "--destination-cached-tokens must be at least 0, got -1"],
    [["--prompt-tokens", "10", "--mode", "eventually"], "argument 'eventually' is invalid"],
    [["--prompt-tokens", "10", "--format", "xml"], "argument 'xml' is invalid"],
    [["--prompt-tokens", "10", "--block-size", "4"], "--block-size applies to linear profiles only"],
  ])("%j", async (args, message) => {
    const r = await run([...glm(), ...args]);
    expect(r.code).toBe(2);
    expect(r.stderr).toContain(message);
    expect(r.stdout).toBe("");
  });
  it("a missing --profile or --prompt-tokens", async () => {
    expect((await run(["--prompt-tokens", "10"])).code).toBe(2);
    expect((await run(glm())).code).toBe(2);
  });
  it("an unreadable or invalid profile names the file", async () => {
    const missing = await run(["--profile", path("nope.json"), "--prompt-tokens", "10"]);
    expect(missing.code).toBe(2);
    expect(missing.stderr).toContain(`${path("nope.json")}: cannot read the file: no such file`);
    const broken = await run(["--profile", path("broken.json"), "--prompt-tokens", "10"]);
    expect(broken.code).toBe(2);
    expect(broken.stderr).toContain(path("broken.json"));
  });
  it("a grouped profile without the transfer markers is refused, naming the group", async () => {
    const r = await run(["--profile", path("old.json"), "--prompt-tokens", "10"]);
    expect(r.code).toBe(2);
    // The field is absent, so the message points at its group: the object that opens with "tail_ring", on line 1.
    const column = oldText.indexOf('{"name":"tail_ring"') + 1;
    expect(r.stderr).toContain(
      `${path("old.json")}:1:${column}: kv_cache_groups[1].transfer_bytes_per_block: transfer_bytes_per_block is required on every group for P/D (kv_cache_groups[1] "tail_ring" has none)`,
    );
    expect(r.stdout).toBe("");
  });
});
