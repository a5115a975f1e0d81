import { spawnSync } from "node:child_process";
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Readable } from "node:stream";
import { glmFlashProfile } from "@kvsim/profile-schema/testing";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { EngineIo } from "./commands/engine.js";
import { runCli } from "./main.js";
import { captureIo } from "./test-io.js";

/**
 * Issue 11's reproducers, each end to end through the CLI: every one is a located exit-2 refusal
 * (or a clean exit-1 run failure), with no stack trace, no hang and nothing half written.
 */

let dir = "";
const path = (name: string) => join(dir, name);
const write = (name: string, text: string | Buffer) => {
  writeFileSync(path(name), text);
  return path(name);
};

async function kvsim(...argv: string[]) {
  const io = captureIo();
  const code = await runCli(argv, io);
  expect(io.stderr).not.toMatch(/internal error|\n\s+at /);
  return { code, stdout: io.stdout, stderr: io.stderr };
}

const LINEAR = { schema_version: 1, model: "test/linear", vllm_version: "0.32.0", tensor_parallel_size: 1, kv_bytes_per_token: 1000 };
const GLM = glmFlashProfile("0.32.0");
const specYaml = (lines: readonly string[] = []) =>
  [
    "version: 1",
    "profile: ./linear.json",
    "topology: { kind: aggregated, workers: 1 }",
    "engine: { num_gpu_blocks: 64, block_size: 4 }",
    "timing: { type: fixed, prefill_ms: 10, decode_ms: 2 }",
    "workload: { synthetic: { requests: 2, input_tokens: 8, output_tokens: 2, rate_per_s: 10, seed: 1 } }",
    ...lines,
  ].join("\n");
const pdSpec = (profile: string, extra: readonly string[] = []) =>
  [
    "version: 1",
    `profile: ${profile}`,
    ...extra,
    "topology: { kind: disaggregated, prefill: { workers: 1 }, decode: { workers: 1 } }",
    "timing: { type: fixed, prefill_ms: 10, decode_ms: 2 }",
    "workload: { synthetic: { requests: 1, input_tokens: 8, output_tokens: 2 } }",
  ].join("\n");

beforeAll(() => {
  dir = mkdtempSync(join(tmpdir(), "kvsim-hardening-"));
  write("linear.json", JSON.stringify(LINEAR));
  write("glm.json", JSON.stringify(GLM, null, 2));
  write("spec.yaml", specYaml());
});
afterAll(() => {
  rmSync(dir, { recursive: true, force: true });
});

describe("what is not a regular file is refused before it is opened (no read until the process dies)", () => {
  it("/dev/zero, /dev/urandom and a symbolic link to /dev/zero, to validate", async () => {
    for (const [file, shown] of [
      ["/dev/zero", "/dev/zero"],
      ["/dev/urandom", "/dev/urandom"],
    ] as const) {
      expect(await kvsim("validate", file)).toEqual({
        code: 2,
        stdout: "",
        stderr: `error: invalid input\n${shown}: cannot read the file: it is a character device, not a regular file\n`,
      });
    }
    symlinkSync("/dev/zero", path("zero.json"));
    expect((await kvsim("validate", path("zero.json"))).stderr).toBe(
      `error: invalid input\n${path("zero.json")}: cannot read the file: it is a character device, not a regular file\n`,
    );
  });
  it("a FIFO, which would block forever", async () => {
    const made = spawnSync("mkfifo", [path("fifo.yaml")]);
    expect(made.status).toBe(0);
    expect((await kvsim("validate", path("fifo.yaml"))).stderr).toBe(
      `error: invalid input\n${path("fifo.yaml")}: cannot read the file: it is a FIFO (named pipe), not a regular file\n`,
    );
  });
  it("--engine /dev/zero, and profile: /dev/zero in a spec (validate and replay alike)", async () => {
    const r = await kvsim("engine", "--stdio", "--profile", path("linear.json"), "--role", "aggregated", "--engine", "/dev/zero");
    expect(r).toEqual({ code: 2, stdout: "", stderr: "error: invalid input\n/dev/zero: cannot read the file: it is a character device, not a regular file\n" });
    const spec = write("zero-profile.yaml", specYaml().replace("./linear.json", "/dev/zero"));
    // Reported where the spec names it: line 2 (`profile: /dev/zero`), column 1.
    const expected = `error: invalid input\n${spec}:2:1: profile: /dev/zero: cannot read the file: it is a character device, not a regular file\n`;
    expect((await kvsim("validate", spec)).stderr).toBe(expected);
    expect((await kvsim("replay", "--spec", spec)).stderr).toBe(expected);
  });
  it("a file over 16 MiB is refused with the limit, and bytes that are not UTF-8", async () => {
    const big = write("big.json", Buffer.alloc(16 * 2 ** 20 + 1, 0x20));
    expect((await kvsim("validate", big)).stderr).toBe(
      `error: invalid input\n${big}: cannot read the file: it is 16777217 bytes, more than the 16 MiB kvsim reads for a profile, spec or engine-args file\n`,
    );
    const binary = write("binary.yaml", Buffer.from([0x76, 0xff, 0xfe, 0x0a]));
    expect((await kvsim("validate", binary)).stderr).toBe(`error: invalid input\n${binary}: cannot read the file: it is not UTF-8 text\n`);
  });
  it("a trace that is a device, in validate and in replay", async () => {
    const spec = write("zero-trace.yaml", specYaml().replace(/workload:.*/, "workload: { trace: /dev/zero, format: kvsim }"));
    const expected = "error: invalid input\n/dev/zero: cannot read the trace: it is a character device, not a regular file\n";
    expect((await kvsim("validate", spec)).stderr).toBe(expected);
    expect((await kvsim("replay", "--spec", spec)).stderr).toBe(expected);
  });
  it("an Azure row longer than 4 KiB is refused at its line without reading it whole (the 50 MB row)", async () => {
    write("long-row.csv", `TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:15:46.6805900,374,44\n2023-11-16 18:15:47.0000000,${"1".repeat(5000)},5\n`);
    const spec = write("long-row.yaml", specYaml().replace(/workload:.*/, "workload: { trace: long-row.csv, format: azure }"));
    const expected = `error: invalid input\n${path("long-row.csv")}:3: the line is longer than 4 KiB, the longest an Azure CSV row may be\n`;
    expect((await kvsim("replay", "--spec", spec)).stderr).toBe(expected);
  });
});

describe("YAML aliases and deep nesting: validate and replay refuse alike", () => {
  it("an alias bomb and an unresolved alias", async () => {
    const ten = (x: string) => Array.from({ length: 10 }, () => x).join(",");
    const bomb = write("bomb.yaml", [`a: &a [${ten("x")}]`, `b: &b [${ten("*a")}]`, `c: [${ten("*b")}]`, specYaml()].join("\n"));
    // The first alias: line 2, after "b: &b [" (7 characters).
    const expected = `error: invalid input\n${bomb}:2:8: the YAML aliases expand to more than 100 copies (an alias bomb?); write the values out instead\n`;
    expect((await kvsim("validate", bomb)).stderr).toBe(expected);
    expect((await kvsim("replay", "--spec", bomb)).stderr).toBe(expected);
    const nope = write("nope.yaml", specYaml().replace("version: 1", "version: *nope"));
    expect((await kvsim("replay", "--spec", nope)).stderr).toBe(
      `error: invalid input\n${nope}:1:10: the alias *nope refers to no anchor (an anchor &nope must come before it)\n`,
    );
  });
  it("a profile of 5,000 nested [ and a deeply nested --engine", async () => {
    const deep = write("deep.json", `${"[".repeat(5000)}${"]".repeat(5000)}`);
    expect((await kvsim("validate", deep)).stderr).toBe(
      `error: invalid input\n${deep}:1:65: nests arrays and objects more than 64 levels deep; no kvsim document needs more than a few\n`,
    );
    const engine = `${'{"a":'.repeat(5000)}1${"}".repeat(5000)}`;
    // Level 65 opens after 64 times '{"a":' (5 characters): offset 320, column 321.
    expect((await kvsim("engine", "--stdio", "--profile", path("linear.json"), "--role", "aggregated", "--engine", engine)).stderr).toBe(
      "error: invalid input\n--engine:1:321: nests arrays and objects more than 64 levels deep; no kvsim document needs more than a few\n",
    );
  });
});

describe("numbers and payloads beyond what a double holds", () => {
  it("a 400-digit number and __proto__ in --engine", async () => {
    const r = await kvsim("engine", "--stdio", "--profile", path("linear.json"), "--role", "aggregated", "--engine", `{"num_gpu_blocks": 1${"0".repeat(399)}}`);
    expect(r.stderr).toBe(
      "error: invalid input\n--engine:1:2: num_gpu_blocks: must be at most 2^53 = 9007199254740992 (got a 400-digit integer, too large to hold exactly)\n",
    );
    expect((await kvsim("engine", "--stdio", "--profile", path("linear.json"), "--role", "aggregated", "--engine", '{"__proto__":{}}')).stderr).toBe(
      "error: invalid input\n--engine: __proto__: unknown key\n",
    );
  });
  it("duplicate keys and 2^53 + 1 in --engine are refused as in profiles", async () => {
    // The second key starts at offset 22: column 23; the first at column 2.
    expect(
      (await kvsim("engine", "--stdio", "--profile", path("linear.json"), "--role", "aggregated", "--engine", '{"num_gpu_blocks":100,"num_gpu_blocks":200}'))
        .stderr,
    ).toBe("error: invalid input\n--engine:1:23: num_gpu_blocks: duplicate key (also at column 2)\n");
    expect(
      (await kvsim("engine", "--stdio", "--profile", path("linear.json"), "--role", "aggregated", "--engine", '{"num_gpu_blocks":9007199254740993}')).stderr,
    ).toBe("error: invalid input\n--engine:1:2: num_gpu_blocks: must be at most 2^53 = 9007199254740992 (got 9007199254740993, too large to hold exactly)\n");
  });
  it("transfer --prompt-tokens 1e15 and a profile of 2^53 bytes per token are refused before pricing", async () => {
    expect((await kvsim("transfer", "--profile", path("glm.json"), "--prompt-tokens", "1e15")).stderr).toBe(
      "error: --prompt-tokens must be at most 16777216 (2^24), the longest prompt a request may have, got 1e15\n",
    );
    const huge = write("huge.json", JSON.stringify({ ...LINEAR, kv_bytes_per_token: 2 ** 53 }, null, 2));
    expect((await kvsim("validate", huge)).code).toBe(0);
    // Pretty-printed: kv_bytes_per_token is on line 6, indented 2.
    expect((await kvsim("transfer", "--profile", huge, "--prompt-tokens", "2")).stderr).toBe(
      `error: invalid input\n${huge}:6:3: kv_bytes_per_token: kv_bytes_per_token must be at most 536870912 (2^29) to price a handoff: the longest prompt (2^24 tokens) would move 9007199254740992 x 2^24 bytes, beyond 2^53 (got 9007199254740992)\n`,
    );
  });
  it("--bandwidth-gbps 5e-324 and 1e308 are refused with the range", async () => {
    for (const bw of ["5e-324", "1e308"]) {
      expect((await kvsim("transfer", "--profile", path("glm.json"), "--prompt-tokens", "1000", "--bandwidth-gbps", bw)).stderr).toBe(
        `error: --bandwidth-gbps: bandwidth must be at least 0.001 and at most 100000 GB/s (1 MB/s to 100 TB/s), got ${Number(bw)}\n`,
      );
    }
  });
});

describe("what validate accepts, replay runs; what it refuses, replay refuses with the same message", () => {
  const cases: readonly (readonly [string, string, string])[] = [
    [
      "bandwidth_gbps: 5e-324",
      "kv_transfer: { bandwidth_gbps: 5e-324 }",
      "kv_transfer.bandwidth_gbps: must be from 0.001 to 100000 GB/s, 1 MB/s to 100 TB/s (got 5e-324)",
    ],
    [
      "fallback_latency_ms: 1e308",
      "kv_transfer: { fallback_latency_ms: 1e308 }",
      "kv_transfer.fallback_latency_ms: must be from 0 to 1000000 ms, about 17 minutes (got 1e+308)",
    ],
    ["max_virtual_time_ms: 1e308", "max_virtual_time_ms: 1e308", "max_virtual_time_ms: must be from 0 to 10^13 ms, about 317 years (got 1e+308)"],
  ];
  it.each(cases)("%s", async (_, line, message) => {
    const spec = write("agree.yaml", specYaml([line]));
    // The added line is line 7; its key starts at column 1, the nested key at column 15.
    const v = await kvsim("validate", spec);
    const r = await kvsim("replay", "--spec", spec);
    expect(v.code).toBe(2);
    expect(r).toEqual({ ...v, stdout: "" });
    expect(v.stderr).toMatch(
      new RegExp(`^error: invalid input\\n${spec.replace(/[.*+?^${}()|[\]\\]/g, "\\$&")}:7:\\d+: ${message.replace(/[.*+?^${}()|[\]\\]/g, "\\$&")}\\n$`),
    );
  });
  it("timing 1e308, rate 5e-324 and a forward-pass latency of 1e308", async () => {
    const timing = write("timing.yaml", specYaml().replace("prefill_ms: 10", "prefill_ms: 1e308"));
    expect((await kvsim("replay", "--spec", timing)).stderr).toBe(
      `error: invalid input\n${timing}:5:24: timing.prefill_ms: must be from 0 to 1000000 ms, about 17 minutes (got 1e+308)\n`,
    );
    const rate = write("rate.yaml", specYaml().replace("rate_per_s: 10", "rate_per_s: 5e-324"));
    expect((await kvsim("replay", "--spec", rate)).stderr).toMatch(
      /:6:\d+: workload\.synthetic\.rate_per_s: must be from 0\.01 to 1000000 requests per second \(got 5e-324\)\n$/,
    );
    write(
      "slow.json",
      JSON.stringify({ ...LINEAR, forward_pass: { provenance: "t", prefill: [], decode: [{ batch_size: 1, kv_tokens: 1, latency_ms: 1e308 }] } }, null, 1),
    );
    const slow = write(
      "slow.yaml",
      specYaml()
        .replace("./linear.json", "./slow.json")
        .replace(/timing:.*/, "timing: { type: profile, outside_grid: clamp }"),
    );
    const v = await kvsim("validate", slow);
    expect(v.stderr).toMatch(/slow\.json:\d+:\d+: forward_pass\.decode\[0\]\.latency_ms: must be from 0 to 1000000 ms, about 17 minutes \(got 1e\+308\)\n$/);
    expect((await kvsim("replay", "--spec", slow)).stderr).toBe(v.stderr);
  });
  it("a P/D gate failure is blamed on the profile file and line, in replay as in validate", async () => {
    // The 0.31.0 layout (no checkpoint blocks) relabelled 0.30.0: only the version is wrong.
    write("old.json", JSON.stringify({ ...glmFlashProfile("0.31.0"), vllm_version: "0.30.0" }, null, 2));
    const spec = write("gate.yaml", pdSpec("./old.json"));
    const v = await kvsim("validate", spec);
    const r = await kvsim("replay", "--spec", spec);
    // vllm_version is on line 4 of the pretty-printed profile, after 2 spaces.
    expect(r.stderr).toBe(
      [
        "error: invalid input",
        `${path("old.json")}:4:3: vllm_version: prefill role: vllm_version must be 0.31.0 or 0.32.0 for a grouped P/D rank (got 0.30.0)`,
        `${path("old.json")}:4:3: vllm_version: decode role: vllm_version must be 0.31.0 or 0.32.0 for a grouped P/D rank (got 0.30.0)`,
        "",
      ].join("\n"),
    );
    expect(v.stderr).toBe(r.stderr);
  });
  it("an engine setting the rank refuses is refused by validate too, at its spec line", async () => {
    // block_size applies to linear profiles only.
    const spec = write("block.yaml", pdSpec("./glm.json", ["engine: { block_size: 16 }"]));
    const v = await kvsim("validate", spec);
    expect(v.stderr).toBe(
      [
        "error: invalid input",
        `${spec}:3:11: engine.block_size: prefill rank: applies to linear profiles only; a grouped profile takes its block sizes from kv_cache_groups`,
        `${spec}:3:11: engine.block_size: decode rank: applies to linear profiles only; a grouped profile takes its block sizes from kv_cache_groups`,
        "",
      ].join("\n"),
    );
    expect((await kvsim("replay", "--spec", spec)).stderr).toBe(v.stderr);
  });
  it("a pass outside the measured grid with outside_grid refuse is a clean run failure (exit 1)", async () => {
    write(
      "grid.json",
      JSON.stringify({
        ...LINEAR,
        forward_pass: {
          provenance: "t",
          prefill: [{ batch_size: 1, new_tokens: 1, cached_tokens: 0, latency_ms: 1 }],
          decode: [{ batch_size: 1, kv_tokens: 1, latency_ms: 1 }],
        },
      }),
    );
    const spec = write(
      "grid.yaml",
      specYaml()
        .replace("./linear.json", "./grid.json")
        .replace(/timing:.*/, "timing: { type: profile, outside_grid: refuse }"),
    );
    const r = await kvsim("replay", "--spec", spec, "--report", path("grid-report.json"));
    expect(r.code).toBe(1);
    expect(r.stderr).toMatch(
      /^error: the replay stopped at 0 ms: aggregated worker 0 could not price a pass: forward_pass\.prefill: the query \(batch_size 1, new_tokens 8, cached_tokens 0\) is outside the measured grid/,
    );
    expect(existsSync(path("grid-report.json"))).toBe(false);
  });
});

describe("output files: checked before the run, written all or nothing, never a device", () => {
  const listing = () => readdirSync(dir).filter((f) => f.startsWith(".") || f.endsWith(".tmp"));
  it("refuses a device even with --force, and leaves it alone", async () => {
    expect(await kvsim("replay", "--spec", path("spec.yaml"), "--report", "/dev/null", "--force")).toEqual({
      code: 2,
      stdout: "",
      stderr: "error: cannot write --report /dev/null: it is a character device; kvsim writes its outputs to regular files only\n",
    });
  });
  it("refuses a missing folder before the run, and a --report/--requests pair writes neither", async () => {
    expect((await kvsim("replay", "--spec", path("spec.yaml"), "--report", path("nope/dir/r.json"))).stderr).toBe(
      `error: cannot write --report ${path("nope/dir/r.json")}: the folder ${path("nope/dir")} does not exist\n`,
    );
    const r = await kvsim("replay", "--spec", path("spec.yaml"), "--report", path("ok.json"), "--requests", path("nope/x.jsonl"));
    expect(r.code).toBe(2);
    expect(existsSync(path("ok.json"))).toBe(false);
  });
  it("refuses a directory, '' and '.' (with --force too) and leaves no temporary file", async () => {
    mkdirSync(path("somedir"));
    expect((await kvsim("replay", "--spec", path("spec.yaml"), "--report", path("somedir"), "--force")).stderr).toBe(
      `error: cannot write --report ${path("somedir")}: it is a directory; kvsim writes its outputs to regular files only\n`,
    );
    expect(await kvsim("replay", "--spec", path("spec.yaml"), "--report", "")).toEqual({
      code: 2,
      stdout: "",
      stderr: "error: --report is empty; name a file\n",
    });
    expect((await kvsim("replay", "--spec", path("spec.yaml"), "--report", ".", "--force")).stderr).toBe(
      "error: cannot write --report .: it is a directory; kvsim writes its outputs to regular files only\n",
    );
    expect(listing()).toEqual([]);
    expect(readdirSync(path("somedir"))).toEqual([]);
  });
  it("refuses two flags naming the same file, and writes both files when all is well", async () => {
    expect((await kvsim("replay", "--spec", path("spec.yaml"), "--report", path("a.json"), "--requests", join(dir, ".", "a.json"))).stderr).toBe(
      `error: --report and --requests name the same file (${join(dir, ".", "a.json")}); give each its own\n`,
    );
    const ok = await kvsim("replay", "--spec", path("spec.yaml"), "--report", path("r.json"), "--requests", path("r.jsonl"), "--format", "json");
    expect(ok.code).toBe(0);
    expect(JSON.parse(readFileSync(path("r.json"), "utf8"))).toMatchObject({ num_requests: 2, completed_requests: 2 });
    // Two requests: two lines.
    expect(readFileSync(path("r.jsonl"), "utf8").trimEnd().split("\n")).toHaveLength(2);
    expect(listing()).toEqual([]);
    // Existing files need --force; a symbolic link is followed, not replaced.
    expect((await kvsim("replay", "--spec", path("spec.yaml"), "--report", path("r.json"))).stderr).toBe(
      `error: ${path("r.json")} already exists; pass --force to overwrite it\n`,
    );
    symlinkSync(path("r.json"), path("link.json"));
    expect((await kvsim("replay", "--spec", path("spec.yaml"), "--report", path("link.json"), "--force")).code).toBe(0);
    expect(readdirSync(dir).includes("link.json")).toBe(true);
    expect(JSON.parse(readFileSync(path("r.json"), "utf8"))).toMatchObject({ num_requests: 2 });
  });
});

describe("messages that name the right file, line and field, and the kind of document", () => {
  it("dynamo handoff-timing names the profile file and field of an inexact block", async () => {
    const inexact = {
      ...LINEAR,
      kv_bytes_per_token: undefined,
      page_size_bytes: 4096,
      kv_cache_groups: [{ name: "fa", kind: "full_attention", num_layers: 1, block_size_tokens: 16, prefix_cacheable: true, transfer_bytes_per_block: 1000 }],
    };
    const file = write("inexact.json", JSON.stringify(inexact, null, 2));
    // The group opens on line 8 ("kv_cache_groups": [ is line 7), its transfer_bytes_per_block on line 14, indented 6.
    expect((await kvsim("dynamo", "handoff-timing", "--profile", file, "--prompt-tokens", "100")).stderr).toBe(
      `error: invalid input\n${file}:14:7: kv_cache_groups[0].transfer_bytes_per_block: has no exact Dynamo transfer timing: a grouped source counts full-attention blocks of 16 tokens at 1000 B per block, which is not a whole number of bytes per token (1000 / 16 = 62.5); block units are never passed as tokens inexactly\n`,
    );
  });
  it("--engine '[1]' is inline JSON, refused as not an object", async () => {
    expect((await kvsim("engine", "--stdio", "--profile", path("linear.json"), "--role", "aggregated", "--engine", "[1]")).stderr).toBe(
      "error: invalid input\n--engine: engine args must be a JSON object of Dynamo MockEngineArgs fields, got an array\n",
    );
  });
  it("replay --spec <a profile>, validate <a JSONL trace>, transfer --profile <a spec>", async () => {
    expect((await kvsim("replay", "--spec", path("linear.json"))).stderr).toBe(
      `error: invalid input\n${path("linear.json")}:1:1: this is a profile (it has schema_version), not a spec; a spec has version: 1 and names its profile, e.g. profile: ./this-file.json\n`,
    );
    const trace = write(
      "t.jsonl",
      '{"request_id":"a","arrival_ms":0,"input_tokens":4,"output_tokens":2}\n{"request_id":"b","arrival_ms":1,"input_tokens":4,"output_tokens":2}\n',
    );
    expect((await kvsim("validate", trace)).stderr).toBe(
      `error: invalid input\n${trace}:1: expected one JSON or YAML document (a profile or a spec), but this is a JSON Lines file (one JSON object per line, like a Mooncake or kvsim trace); a trace is checked through the spec that names it (workload.trace)\n`,
    );
    expect((await kvsim("transfer", "--profile", path("spec.yaml"), "--prompt-tokens", "4")).stderr).toBe(
      `error: invalid input\n${path("spec.yaml")}:1:1: this is a spec (it has version), not a profile; a profile has schema_version: 1 (the spec names its profile under profile:)\n`,
    );
  });
});

describe("the stdio engine over a stream", () => {
  function stdio(chunks: readonly string[]): EngineIo & { stdout: string; stderr: string } {
    const io = {
      stdout: "",
      stderr: "",
      stderrIsTTY: false,
      stdin: Readable.from(chunks.map((c) => Buffer.from(c))),
      out(t: string) {
        io.stdout += t;
      },
      err(t: string) {
        io.stderr += t;
      },
    };
    return io;
  }
  it("a CR inside a line is JSON blank space, not a line end: one request, one answer", async () => {
    const io = stdio(['{"id":1,\r"op":"submit","request":{"request_id":"r","tokens":[1,2,3],"max_output_tokens":1}}\r\n', '{"id":2,"op":"metrics"}\n']);
    expect(await runCli(["engine", "--stdio", "--profile", path("linear.json"), "--role", "aggregated"], io)).toBe(0);
    const answers = io.stdout
      .trimEnd()
      .split("\n")
      .map((l) => JSON.parse(l) as { id: number; ok: boolean });
    expect(answers.map((a) => [a.id, a.ok])).toEqual([
      [1, true],
      [2, true],
    ]);
  });
});

describe("the deprecated kv_transfer.bandwidth_gbps", () => {
  it("still works, with a located warning on stderr in validate and replay; bandwidth with a unit gives the same digest, no warning", async () => {
    const old = write("old.yaml", pdSpec("./glm.json", ["kv_transfer: { bandwidth_gbps: 50 }"]));
    const now = write("new.yaml", pdSpec("./glm.json", ["kv_transfer: { bandwidth: 400 Gbit/s }"]));
    // Line 3 (after version and profile); the key follows "kv_transfer: { " (15 characters): column 16.
    const warning = `warning: ${old}:3:16: kv_transfer.bandwidth_gbps: is deprecated: it means gigabytes per second, but "Gbps" reads as gigabits (8x less); write bandwidth: 50 GB/s (or in Gbit/s: 400 Gbit/s)\n`;
    const checked = await kvsim("validate", old);
    expect([checked.code, checked.stderr]).toEqual([0, warning]);
    const a = await kvsim("replay", "--spec", old, "--format", "json");
    const b = await kvsim("replay", "--spec", now, "--format", "json");
    expect([a.code, a.stderr, b.code, b.stderr]).toEqual([0, warning, 0, ""]);
    expect((JSON.parse(a.stdout) as { digest: string }).digest).toBe((JSON.parse(b.stdout) as { digest: string }).digest);
    // A sweep warns once, for its base spec, not once per point.
    const sweep = await kvsim("sweep", "--spec", old, "--grid", write("g.yaml", "engine.max_num_seqs: [4, 8]\n"), "--jobs", "1", "--format", "json");
    expect([sweep.code, sweep.stderr]).toEqual([0, warning]);
  });
});
