import { existsSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Readable } from "node:stream";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { runCli } from "./main.js";
import type { StdinIo } from "./spec-input.js";
import { captureIo } from "./test-io.js";

/**
 * Issue 38, "the new commands under hostile input": each reproducer of the fuzz campaign, run end
 * to end, ends with a located refusal (exit 2, nothing written) or a clean run. The huge ones are
 * tested at their bounds here and in the packages (document-size, path-bounds, timeseries-bound,
 * the calibrate and hf-profile hostile tests), not by allocating gigabytes.
 */

let dir = "";
const path = (name: string) => join(dir, name);

async function kvsim(args: string[], stdin?: NodeJS.ReadableStream) {
  const io: StdinIo & { stdout: string; stderr: string } = Object.assign(captureIo(), stdin === undefined ? {} : { stdin });
  const code = await runCli(args, io);
  return { code, stdout: io.stdout, stderr: io.stderr };
}

const LLAMA = {
  architectures: ["LlamaForCausalLM"],
  hidden_size: 4096,
  num_hidden_layers: 32,
  num_attention_heads: 32,
  num_key_value_heads: 8,
  intermediate_size: 14336,
  vocab_size: 128256,
  max_position_embeddings: 131072,
  torch_dtype: "bfloat16",
};
const vllm = (id: string, o: Record<string, unknown> = {}) =>
  JSON.stringify({ request_id: id, input_toks: 4, output_toks: 3, queued_ts: 0, scheduled_ts: 0, first_token_ts: 0.012, last_token_ts: 0.016, ...o });

beforeAll(() => {
  dir = mkdtempSync(join(tmpdir(), "kvsim-hostile-"));
  writeFileSync(
    path("linear.json"),
    JSON.stringify({ schema_version: 1, model: "test/linear", vllm_version: "0.32.0", tensor_parallel_size: 1, kv_bytes_per_token: 1000 }),
  );
  writeFileSync(
    path("trace.jsonl"),
    '{"request_id":"a","arrival_ms":0,"input_tokens":4,"output_tokens":3}\n{"request_id":"b","arrival_ms":2000,"input_tokens":4,"output_tokens":3}\n',
  );
  writeFileSync(
    path("spec.yaml"),
    "version: 1\nprofile: ./linear.json\ntopology: { kind: aggregated, workers: 1 }\nengine: { num_gpu_blocks: 16, block_size: 4, max_num_seqs: 4 }\ntiming: { type: fixed, prefill_ms: 10, decode_ms: 2 }\nworkload: { trace: ./trace.jsonl, format: kvsim }\n",
  );
  writeFileSync(path("grid.yaml"), "engine.max_num_seqs: [4]\n");
});
afterAll(() => {
  rmSync(dir, { recursive: true, force: true });
});

/** An endless stream of zero bytes, as `< /dev/zero` gives. */
const zeros = () =>
  new Readable({
    read() {
      this.push(Buffer.alloc(2 ** 20));
    },
  });

describe("standard input is read within the 16 MiB cap", () => {
  it("validate - < /dev/zero and replay --spec - < /dev/zero are refused, naming <stdin>", async () => {
    for (const args of [
      ["validate", "-"],
      ["replay", "--spec", "-"],
    ]) {
      const r = await kvsim(args, zeros());
      expect(r.code).toBe(2);
      expect(r.stderr).toBe(
        "error: invalid input\n<stdin>: cannot read standard input: it is more than the 16 MiB kvsim reads for a profile, spec or engine-args file\n",
      );
    }
  });

  it("bytes that are not UTF-8 are refused", async () => {
    const r = await kvsim(["validate", "-"], Readable.from([Buffer.from([0x7b, 0xff, 0x7d])]));
    expect(r.code).toBe(2);
    expect(r.stderr).toContain("<stdin>: cannot read standard input: it is not UTF-8 text");
  });
});

describe("sweep --jobs", () => {
  it("--jobs 64 on a 1-point grid runs one job, in this thread, and says why", async () => {
    const r = await kvsim(["sweep", "--spec", path("spec.yaml"), "--grid", path("grid.yaml"), "--jobs", "64"]);
    expect(r.code).toBe(0);
    expect(r.stdout).toContain("(1 job; --jobs 64 capped by the grid's 1 point)");
  });

  it("a base spec whose --set names a missing trace exits 2, as replay does, instead of refusing every point", async () => {
    const args = ["--spec", path("spec.yaml"), "--set", `workload.trace=${path("nope.jsonl")}`];
    const sweep = await kvsim(["sweep", ...args, "--grid", path("grid.yaml"), "--jobs", "1"]);
    const replay = await kvsim(["replay", ...args]);
    expect([sweep.code, replay.code]).toEqual([2, 2]);
    expect(sweep.stderr).toBe(`error: invalid input\n${path("nope.jsonl")}: cannot read the trace: no such file\n`);
    expect(sweep.stderr).toBe(replay.stderr);
  });
});

describe("measured runs", () => {
  it("calibrate refuses a last_token_ts of 2^53 s, naming file, line and field", async () => {
    writeFileSync(path("m53.jsonl"), `${vllm("a")}\n${vllm("b", { last_token_ts: 2 ** 53 })}\n`);
    const r = await kvsim(["calibrate", "--spec", path("spec.yaml"), "--measured", path("m53.jsonl"), "--out", path("never.yaml")]);
    expect(r.code).toBe(2);
    expect(r.stderr).toBe(
      `error: invalid input\n${path("m53.jsonl")}:2: last_token_ts: must be from 0 to 10^10 seconds (about 317 years) (got 9007199254740992)\n`,
    );
    expect(existsSync(path("never.yaml"))).toBe(false);
  });

  it("compare reads a vllm bench JSON with one request of 130,000 inter-token gaps", async () => {
    writeFileSync(
      path("bench.json"),
      JSON.stringify({ input_lens: [4], output_lens: [130_001], ttfts: [0.1], itls: [new Array<number>(130_000).fill(0.001)], errors: [""] }),
    );
    writeFileSync(
      path("sim.jsonl"),
      `${JSON.stringify({ request_id: "bench-0", status: "completed", arrival_ms: 0, ttft_ms: 100, e2e_ms: 230_100, input_tokens: 4, output_tokens: 130_001 })}\n`,
    );
    const r = await kvsim(["compare", "--measured", path("bench.json"), "--requests", path("sim.jsonl"), "--format", "json"]);
    expect(r.code, r.stderr).toBe(0);
    // 130,000 gaps of 1 ms: the measured ITL p99 is 1 ms.
    const c = JSON.parse(r.stdout) as { latency: { metric: string; stat: string; measured: number }[] };
    expect(c.latency.find((l) => l.metric === "itl" && l.stat === "p99")!.measured).toBeCloseTo(1, 9);
  });

  it("refuses duplicate keys and a negative queued_ts in vLLM's per-request stats", async () => {
    writeFileSync(path("dup.jsonl"), `${vllm("a").replace('"queued_ts":0,', '"queued_ts":0,"queued_ts":0.5,')}\n`);
    writeFileSync(path("neg.jsonl"), `${vllm("a", { queued_ts: -1 })}\n`);
    const dup = await kvsim(["compare", "--measured", path("dup.jsonl"), "--requests", path("sim.jsonl")]);
    expect(dup.code).toBe(2);
    expect(dup.stderr).toMatch(/dup\.jsonl:1:\d+: queued_ts: duplicate key \(also at column \d+\)/);
    const neg = await kvsim(["compare", "--measured", path("neg.jsonl"), "--requests", path("sim.jsonl")]);
    expect(neg.code).toBe(2);
    expect(neg.stderr).toContain("neg.jsonl:1: queued_ts: must be from 0 to 10^10 seconds");
  });

  it("trace from-measured refuses 2^24 + 1 prompt tokens (replay would refuse the trace) and writes nothing", async () => {
    writeFileSync(path("huge.jsonl"), `${vllm("a", { input_toks: 2 ** 24 + 1 })}\n`);
    const r = await kvsim(["trace", "from-measured", "--measured", path("huge.jsonl"), "--out", path("t.jsonl")]);
    expect(r.code).toBe(2);
    expect(r.stderr).toContain("huge.jsonl:1: input_toks: must be at most 2^24 = 16777216 tokens, kvsim's largest request (got 16777217)");
    expect(existsSync(path("t.jsonl"))).toBe(false);
  });

  it("trace from-measured refuses a --prompts line naming a request the run does not have", async () => {
    writeFileSync(path("ok.jsonl"), `${vllm("a")}\n`);
    writeFileSync(path("prompts.jsonl"), '{"request_id":"a","input_tok_ids":[1,2,3,4]}\n{"request_id":"ghost","input_tok_ids":[1]}\n');
    const r = await kvsim(["trace", "from-measured", "--measured", path("ok.jsonl"), "--prompts", path("prompts.jsonl"), "--out", path("t2.jsonl")]);
    expect(r.code).toBe(2);
    expect(r.stderr).toContain(`${path("prompts.jsonl")}:2: request_id: ghost is not a request of the measured run`);
    expect(existsSync(path("t2.jsonl"))).toBe(false);
  });
});

describe("diff", () => {
  it("refuses a number that overflows a double (1e400 read as Infinity), located", async () => {
    writeFileSync(path("a.json"), '{"digest": "x",\n "mean_ttft_ms": 1e400}');
    writeFileSync(path("b.json"), '{"digest": "y", "mean_ttft_ms": 1}');
    const r = await kvsim(["diff", path("a.json"), path("b.json")]);
    expect(r.code).toBe(2);
    expect(r.stderr).toBe(
      `error: invalid input\n${path("a.json")}:2:2: mean_ttft_ms: is not a finite number (1e400 and the like overflow a double; kvsim writes none)\n`,
    );
  });
});

describe("profile from-hf", () => {
  const fromHf = async (config: Record<string, unknown>) => {
    writeFileSync(path("config.json"), JSON.stringify(config, null, 1));
    return kvsim(["profile", "from-hf", path("config.json"), "--tp", "1"]);
  };

  it("refuses architectures named after Object.prototype members, a huge layer count and an unknown dtype, each located", async () => {
    for (const name of ["constructor", "toString", "__proto__"]) {
      const r = await fromHf({ ...LLAMA, architectures: [name] });
      expect(r.code).toBe(2);
      expect(r.stderr).toContain(`config.json:2:2: architectures: unknown architecture "${name}"`);
    }
    // Written with one space of indent: "{", the architectures list on lines 2 to 4, then one key a line.
    const layers = await fromHf({ ...LLAMA, num_hidden_layers: 2 ** 53 - 1 });
    expect(layers.code).toBe(2);
    expect(layers.stderr).toContain("config.json:6:2: num_hidden_layers: must be at most 4096 (got 9007199254740991)");
    const dtype = await fromHf({ ...LLAMA, torch_dtype: "float7" });
    expect(dtype.code).toBe(2);
    expect(dtype.stderr).toContain('config.json:12:2: torch_dtype: unknown dtype "float7"');
  });
});

describe("replay --timeseries --sample-ms", () => {
  it("a 1 µs interval over a 2-second run stops at the values' limit with exit 2, naming the flag, and writes nothing", async () => {
    const r = await kvsim(["replay", "--spec", path("spec.yaml"), "--timeseries", path("ts.csv"), "--sample-ms", "0.001", "--report", path("r.json")]);
    expect(r.code).toBe(2);
    // 15 values a sample (8, 5 and 2 for the one cache group): 1,048,576 samples fit 2^24 values, twice as many do not.
    expect(r.stderr).toMatch(
      /^error: --sample-ms 0\.001: the run had 1,048,576 samples of 15 values at 1048\.57\d+ ms and was not over; kvsim keeps at most 16,777,216 values/,
    );
    expect(readdirSync(dir).filter((f) => f === "ts.csv" || f === "r.json" || f.endsWith(".tmp"))).toEqual([]);
  });
});

describe("--set paths and large documents", () => {
  it("a --set path of 60,000 keys is refused at once, its text cut short", async () => {
    const r = await kvsim(["replay", "--spec", path("spec.yaml"), "--set", `${Array.from({ length: 60_000 }, () => "a").join(".")}=1`]);
    expect(r.code).toBe(2);
    expect(r.stderr).toMatch(
      /^error: invalid input\n--set a\.a\.a.*\.\.\. \(120001 characters\): the path is 119999 characters long; a spec path has at most 1024\n$/,
    );
  });

  it("a YAML spec of more than 100,000 lines is refused before it is parsed, located", async () => {
    writeFileSync(path("long.yaml"), `version: 1\n${"#\n".repeat(100_000)}`);
    const r = await kvsim(["validate", path("long.yaml")]);
    expect(r.code).toBe(2);
    // Line 1, then 100,000 comment lines: the 100,001st line break ends line 100,001.
    expect(r.stderr).toMatch(/long\.yaml:100001:2: has more than 100,000 lines and commas; /);
  });
});
