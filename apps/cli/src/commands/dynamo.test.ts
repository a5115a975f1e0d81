import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { glmFlashProfile } from "@kvsim/profile-schema/testing";
import { runCli } from "../main.js";
import { captureIo } from "../test-io.js";

// GLM-5.3-Flash, TP 4, fp8 (docs/rules/grouped-pd.md §2; the arithmetic is in
// @kvsim/profile-schema/testing): 13,045,120 B per 2,176-token full-attention block; fixed =
// 22,528 + 19,537,920 + 17,367,040 = 36,927,488 B.
const GLM = glmFlashProfile("0.32.0");
const LINEAR = { schema_version: 1, model: "linear", vllm_version: "0.32.0", tensor_parallel_size: 1, kv_bytes_per_token: 131_072 };

let dir: string;
let glm: string;
let linear: string;
beforeAll(() => {
  dir = mkdtempSync(join(tmpdir(), "kvsim-dynamo-"));
  glm = join(dir, "glm.json");
  linear = join(dir, "linear.json");
  writeFileSync(glm, JSON.stringify(GLM));
  writeFileSync(linear, JSON.stringify(LINEAR));
});
afterAll(() => {
  rmSync(dir, { recursive: true, force: true });
});

describe("kvsim dynamo handoff-timing", () => {
  it("GLM, 1,000 tokens at 1 GB/s: kv_bytes_per_request 36,927,488 and 49.972608 ms", async () => {
    // T = 1,000 - 1 backoff = 999 -> cdiv(999, 2,176) = 1 block = 2,176 tokens at 13,045,120 / 2,176
    // = 5,995 B/token; 2,176 x 5,995 + 36,927,488 = 49,972,608 B at 10^9 B/s = 49.972608 ms.
    const io = captureIo();
    expect(await runCli(["dynamo", "handoff-timing", "--profile", glm, "--prompt-tokens", "1000", "--bandwidth", "1 GB/s"], io)).toBe(0);
    expect(io.stderr).toBe("");
    expect(JSON.parse(io.stdout)).toEqual({
      transfer_timing: { mode: "full_prompt", full_prompt_tokens: 2176, kv_bytes_per_token: 5995, kv_bytes_per_request: 36_927_488, bandwidth_gb_s: 1 },
      delay_ms: 49.972608,
    });
  });
  it("--legacy exits 2 and names the fixed bytes", async () => {
    const io = captureIo();
    expect(await runCli(["dynamo", "handoff-timing", "--profile", glm, "--prompt-tokens", "1000", "--bandwidth", "1 GB/s", "--legacy"], io)).toBe(2);
    expect(io.stdout).toBe("");
    expect(io.stderr).toContain("error: --legacy: the legacy four-field timing would lose the fixed bytes (36927488 B per request");
    expect(io.stderr).toContain("the block units");
  });
  it("no bandwidth: bandwidth_gb_s null and no delay; destination_missing mode is carried", async () => {
    const io = captureIo();
    expect(await runCli(["dynamo", "handoff-timing", "--profile", glm, "--prompt-tokens", "8192", "--mode", "destination_missing"], io)).toBe(0);
    // T = 8,191 -> 4 blocks x 2,176 = 8,704 tokens.
    expect(JSON.parse(io.stdout)).toEqual({
      transfer_timing: {
        mode: "destination_missing",
        full_prompt_tokens: 8704,
        kv_bytes_per_token: 5995,
        kv_bytes_per_request: 36_927_488,
        bandwidth_gb_s: null,
      },
      delay_ms: null,
    });
  });
  it("a linear profile has a lossless legacy form", async () => {
    // 4,096 x 131,072 = 536,870,912 B at 64 x 10^9 B/s = 8.388608 ms.
    const io = captureIo();
    expect(await runCli(["dynamo", "handoff-timing", "--profile", linear, "--prompt-tokens", "4096", "--bandwidth", "64 GB/s", "--legacy"], io)).toBe(0);
    expect(JSON.parse(io.stdout)).toEqual({
      transfer_timing: { mode: "full_prompt", full_prompt_tokens: 4096, kv_bytes_per_token: 131_072, bandwidth_gb_s: 64 },
      delay_ms: 8.388608,
    });
  });
  it("refuses a bandwidth of 0 (spell off by leaving it out)", async () => {
    const io = captureIo();
    expect(await runCli(["dynamo", "handoff-timing", "--profile", glm, "--prompt-tokens", "10", "--bandwidth-gbps", "0"], io)).toBe(2);
    expect(io.stderr).toContain("--bandwidth-gbps: bandwidth must be greater than 0 GB/s");
  });
});
