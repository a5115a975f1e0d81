import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Readable } from "node:stream";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { CliIo } from "../io.js";
import { runCli } from "../main.js";
import type { EngineIo } from "./engine.js";

/** Captured output plus a fake standard input holding `lines`. */
function stdioIo(lines: readonly string[]): EngineIo & { stdout: string; stderr: string } {
  const io = {
    stdout: "",
    stderr: "",
    stderrIsTTY: false,
    stdin: Readable.from(lines.map((l) => `${l}\n`)),
    out(t: string) {
      io.stdout += t;
    },
    err(t: string) {
      io.stderr += t;
    },
  };
  return io;
}

const responses = (io: { stdout: string }): unknown[] =>
  io.stdout
    .split("\n")
    .filter((l) => l !== "")
    .map((l) => JSON.parse(l) as unknown);

// A linear profile at 10^6 B/token; engine block 4 (the conformance fixture of docs/rules/dynamo.md §8.3).
const PROFILE = { schema_version: 1, model: "linear", vllm_version: "0.32.0", tensor_parallel_size: 1, kv_bytes_per_token: 1_000_000 };
const ENGINE = { block_size: 4, num_gpu_blocks: 64, kv_transfer_bandwidth: 1, timing_model: { type: "fixed", prefill_ms: 10, decode_ms: 2 } };

let dir: string;
let profile: string;
let engineFile: string;
beforeAll(() => {
  dir = mkdtempSync(join(tmpdir(), "kvsim-engine-"));
  profile = join(dir, "profile.json");
  engineFile = join(dir, "engine.json");
  writeFileSync(profile, JSON.stringify(PROFILE));
  writeFileSync(engineFile, JSON.stringify(ENGINE));
});
afterAll(() => {
  rmSync(dir, { recursive: true, force: true });
});

describe("kvsim engine --stdio", () => {
  it("answers one line per line, errors included, and keeps serving to the end of input", async () => {
    const io = stdioIo([
      '{"id":1,"op":"submit","request":{"request_id":"a","tokens":[1,2,3,4],"max_output_tokens":2}}',
      "not json",
      '{"id":2,"op":"fly"}',
      '{"id":3,"op":"step","now_ms":0}',
      '{"id":4,"op":"reserve_destination","handoff_id":"h","request":{"request_id":"b","tokens":[1],"max_output_tokens":1}}',
      '{"id":5,"op":"step","now_ms":12}',
    ]);
    expect(await runCli(["engine", "--stdio", "--profile", profile, "--role", "aggregated", "--engine", JSON.stringify(ENGINE)], io)).toBe(0);
    expect(io.stderr).toBe("");
    const r = responses(io) as Record<string, unknown>[];
    expect(r.map((x) => [x.id, x.ok])).toEqual([
      [1, true],
      [null, false],
      [2, false],
      [3, true],
      [4, false],
      [5, true],
    ]);
    expect(r[1]!.error).toEqual({ code: "parse_error", message: "not JSON: unexpected token at character 1" });
    expect((r[2]!.error as { code: string }).code).toBe("invalid_request");
    expect(r[4]!.error).toEqual({
      code: "command_refused",
      message: "reserve_destination is a destination command: it needs a decode rank, this rank is aggregated",
    });
    // Aggregated, fixed 10 / 2: the first pass prefills 4 tokens and samples: 10 + 2 = 12 ms; the
    // second pass decodes the last token: 12 + 2 = 14 ms.
    expect(r[3]!.pass).toMatchObject({ start_ms: 0, end_ms: 12, prefill_ms: 10, decode_ms: 2 });
    expect(r[5]!.pass).toMatchObject({ start_ms: 12, end_ms: 14 });
  });

  it("takes the engine args from a file too", async () => {
    const io = stdioIo(['{"id":"i","op":"info"}']);
    expect(await runCli(["engine", "--stdio", "--profile", profile, "--role", "decode", "--engine", engineFile], io)).toBe(0);
    expect(responses(io)[0]).toMatchObject({
      id: "i",
      ok: true,
      role: "decode",
      engine_args: { block_size: 4, num_gpu_blocks: 64, worker_type: "decode", kv_transfer_bandwidth: 1 },
    });
  });

  it("refuses bad engine args before serving, naming the field (exit 2)", async () => {
    const io = stdioIo(['{"id":1,"op":"metrics"}']);
    expect(await runCli(["engine", "--stdio", "--profile", profile, "--role", "prefill", "--engine", '{"engine_type":"sglang"}'], io)).toBe(2);
    expect(io.stdout).toBe("");
    expect(io.stderr).toContain("--engine: engine_type: sglang is not supported: kvsim models the vLLM engine only");
  });

  it("needs --stdio", async () => {
    const io: CliIo & { stderr: string } = stdioIo([]);
    expect(await runCli(["engine", "--profile", profile, "--role", "prefill"], io)).toBe(2);
    expect(io.stderr).toContain("pass --stdio");
  });
});
