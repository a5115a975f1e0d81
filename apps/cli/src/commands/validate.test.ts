import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { isAbsolute, join, relative } from "node:path";
import { checkPdGate, parseProfile, type Profile } from "@kvsim/profile-schema";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { runCli } from "../main.js";
import { captureIo } from "../test-io.js";

async function validate(file: string, ...flags: string[]) {
  const io = captureIo();
  const code = await runCli(["validate", file, ...flags], io);
  return { code, stdout: io.stdout, stderr: io.stderr };
}

const examples = new URL("../../examples/profiles/", import.meta.url);
const example = (name: string) => new URL(name, examples).pathname;
/** A path as messages show it: relative to the working folder when inside it. */
const shownPath = (p: string) => {
  const rel = relative(process.cwd(), p);
  return rel !== "" && !rel.startsWith("..") && !isAbsolute(rel) ? rel : p;
};
const GLM_031 = "glm-5.3-flash-tp4-fp8-vllm-0.31.0.json";
const GLM_032 = "glm-5.3-flash-tp4-fp8-vllm-0.32.0.json";
const LLAMA = "llama-3.1-8b-instruct-tp1-bf16-vllm-0.32.0.json";
const GEMMA = "gemma-3-12b-it-tp1-bf16-vllm-0.32.0.json";

let dir = "";
beforeAll(() => {
  dir = mkdtempSync(join(tmpdir(), "kvsim-validate-"));
});
afterAll(() => {
  rmSync(dir, { recursive: true, force: true });
});
const write = (name: string, text: string) => {
  const path = join(dir, name);
  writeFileSync(path, text);
  return path;
};

/**
 * A small grouped profile, one group per line, so locations are easy to derive: line 2
 * schema_version ... line 4 vllm_version, line 6 page_size_bytes, line 7 "kv_cache_groups": [,
 * then group 0 on line 8 and group 1 on line 9; a group's first key starts at column 7.
 */
function profileText(opts: { version?: string; groups?: string[]; extra?: string } = {}): string {
  const groups = opts.groups ?? [
    '"name": "fa", "kind": "full_attention", "num_layers": 2, "block_size_tokens": 16, "prefix_cacheable": true, "transfer_bytes_per_block": 4096',
    '"name": "sw", "kind": "sliding_window", "window_tokens": 32, "num_layers": 2, "block_size_tokens": 16, "prefix_cacheable": true, "transfer_bytes_per_block": 4096',
  ];
  return [
    "{",
    '  "schema_version": 1,',
    '  "model": "test/hybrid",',
    `  "vllm_version": "${opts.version ?? "0.32.0"}",`,
    '  "tensor_parallel_size": 1,',
    `  "page_size_bytes": 4096,${opts.extra ?? ""}`,
    '  "kv_cache_groups": [',
    groups.map((g) => `    { ${g} }`).join(",\n"),
    "  ]",
    "}",
    "",
  ].join("\n");
}

describe("kvsim validate: the bundled example profiles", () => {
  it("accepts GLM-5.3-Flash on 0.32.0 and on 0.31.0: 6 groups, 1 full attention + 5 state, page 13,045,120 B", async () => {
    for (const [file, version] of [
      [GLM_032, "0.32.0"],
      [GLM_031, "0.31.0"],
    ] as const) {
      expect(await validate(example(file))).toStrictEqual({
        code: 0,
        stdout: `ok: profile zai-org/GLM-5.3-Flash, vLLM ${version}, grouped, 6 groups (full_attention 1, state 5), page 13,045,120 B\n`,
        stderr: "",
      });
    }
  });
  it("accepts the linear Llama 3.1 8B: 32 layers x 2 x 8 KV heads x 128 dims x 2 bytes = 131,072 B per token", async () => {
    expect(await validate(example(LLAMA))).toStrictEqual({
      code: 0,
      stdout: "ok: profile meta-llama/Llama-3.1-8B-Instruct, vLLM 0.32.0, linear, 131,072 B per token\n",
      stderr: "",
    });
  });
  it("accepts the Gemma 3 12B sliding-window model: 8 layers x 16 tokens x 2 x 8 heads x 256 dims x 2 bytes = 1,048,576 B pages", async () => {
    expect(await validate(example(GEMMA))).toStrictEqual({
      code: 0,
      stdout: "ok: profile google/gemma-3-12b-it, vLLM 0.32.0, grouped, 6 groups (full_attention 1, sliding_window 5), page 1,048,576 B\n",
      stderr: "",
    });
  });

  const load = (name: string): Profile => parseProfile(readFileSync(example(name), "utf8"), name);

  it("builds GLM-5.3-Flash from the oracle table of docs/rules/grouped-pd.md §2", () => {
    for (const name of [GLM_031, GLM_032]) {
      const p = load(name);
      const groups = p.kv_cache_groups ?? [];
      expect(groups.map((g) => [g.name, g.kind, g.num_layers, g.block_size_tokens, g.prefix_cacheable, g.transfer_bytes_per_block])).toStrictEqual([
        ["full_attention", "full_attention", 11, 2176, true, 11 * 1_114_112 + 11 * 71_808], // 13,045,120
        ["tail_ring", "state", 11, 2176, false, 11 * 2_048], // 22,528
        ["kda_0", "state", 9, 2176, true, 9 * 1_085_440], // 9,768,960
        ["kda_1", "state", 9, 2176, true, 9 * 1_085_440],
        ["kda_2", "state", 8, 2176, true, 8 * 1_085_440], // 8,683,520
        ["kda_3", "state", 8, 2176, true, 8 * 1_085_440],
      ]);
      // Fixed bytes (ring + four KDA groups): 22,528 + 2 x 9,768,960 + 2 x 8,683,520 = 36,927,488.
      expect(groups.slice(1).reduce((s, g) => s + (g.transfer_bytes_per_block ?? 0), 0)).toBe(36_927_488);
      expect([p.tensor_parallel_size, p.kv_cache_dtype, p.page_size_bytes]).toStrictEqual([4, "fp8", 13_045_120]);
      expect(checkPdGate(p, "prefill")).toStrictEqual([]);
      expect(checkPdGate(p, "decode")).toStrictEqual([]);
    }
    // Only 0.32.0 takes one FlashKDA checkpoint block on each of the four KDA groups.
    expect(load(GLM_032).kv_cache_groups?.map((g) => g.prefill_checkpoint_blocks)).toStrictEqual([undefined, undefined, 1, 1, 1, 1]);
    expect(load(GLM_031).kv_cache_groups?.map((g) => g.prefill_checkpoint_blocks)).toStrictEqual([
      undefined,
      undefined,
      undefined,
      undefined,
      undefined,
      undefined,
    ]);
  });

  it("say in the description and the provenance that the timings are illustrative, not measured", () => {
    for (const name of [GLM_031, GLM_032, LLAMA, GEMMA]) {
      const p = load(name);
      expect(p.description).toContain("illustrative, not measured");
      expect(p.forward_pass?.provenance.toLowerCase()).toContain("illustrative, not measured");
    }
  });

  it("carry complete, monotone timing grids: batch {1, 4, 16} x 5 new x 4 cached, batch {1, ..., 256} x 5 KV", () => {
    for (const name of [GLM_031, GLM_032, LLAMA, GEMMA]) {
      const fp = load(name).forward_pass!;
      // 3 x 5 x 4 = 60 prefill points; 6 x 5 = 30 decode points (the schema checks the grid).
      expect([fp.prefill.length, fp.decode.length]).toStrictEqual([60, 30]);
      expect([...new Set(fp.prefill.map((x) => x.batch_size))]).toStrictEqual([1, 4, 16]);
      expect([...new Set(fp.decode.map((x) => x.batch_size))]).toStrictEqual([1, 8, 32, 64, 128, 256]);
      // Monotone: a point that is >= another on every axis is not faster.
      const pre = fp.prefill;
      for (const a of pre) {
        for (const b of pre) {
          if (a.batch_size <= b.batch_size && a.new_tokens <= b.new_tokens && a.cached_tokens <= b.cached_tokens)
            expect(a.latency_ms).toBeLessThanOrEqual(b.latency_ms);
        }
      }
      for (const a of fp.decode) {
        for (const b of fp.decode) {
          if (a.batch_size <= b.batch_size && a.kv_tokens <= b.kv_tokens) expect(a.latency_ms).toBeLessThanOrEqual(b.latency_ms);
        }
      }
    }
  });
});

describe("kvsim validate: refused profiles (exit 2, the field path named)", () => {
  it("accepts the small test profile itself", async () => {
    const r = await validate(write("ok.json", profileText()));
    expect([r.code, r.stdout]).toStrictEqual([
      0,
      "ok: profile test/hybrid, vLLM 0.32.0, grouped, 2 groups (full_attention 1, sliding_window 1), page 4,096 B\n",
    ]);
  });
  it("an unknown key", async () => {
    const file = write("unknown.json", profileText({ extra: ' "colour": "red",' }));
    // Line 6 is `  "page_size_bytes": 4096, "colour": "red",`: 2 spaces, the 17-character key (columns
    // 3-19), ": " (20-21), 4096 (22-25), "," (26), a space (27): the new key starts at column 28.
    expect(await validate(file)).toStrictEqual({ code: 2, stdout: "", stderr: `error: invalid input\n${file}:6:28: colour: unknown key\n` });
  });
  it("duplicate group names", async () => {
    const file = write("dup.json", profileText().replace('"name": "sw"', '"name": "fa"'));
    expect((await validate(file)).stderr).toBe(
      `error: invalid input\n${file}:9:7: kv_cache_groups[1].name: duplicate group name "fa" (also kv_cache_groups[0])\n`,
    );
  });
  it("window_tokens on a full-attention group", async () => {
    const file = write("fa-window.json", profileText().replace('{ "name": "fa"', '{ "window_tokens": 64, "name": "fa"'));
    const r = await validate(file);
    expect(r.code).toBe(2);
    expect(r.stderr).toBe(
      `error: invalid input\n${file}:8:7: kv_cache_groups[0].window_tokens: is only allowed on sliding_window and convolution groups, not on a full_attention group\n`,
    );
  });
  it("a sliding-window group without window_tokens", async () => {
    const file = write("sw-no-window.json", profileText().replace('"window_tokens": 32, ', ""));
    const r = await validate(file);
    expect(r.code).toBe(2);
    // The field is missing, so the location is the group's (line 9, its "{" at column 5).
    expect(r.stderr).toBe(`error: invalid input\n${file}:9:5: kv_cache_groups[1].window_tokens: is required for a sliding_window group\n`);
  });
  it("transfer_bytes_per_block of 2^53 + 1", async () => {
    const text = profileText({
      groups: [
        '"transfer_bytes_per_block": 9007199254740993, "name": "fa", "kind": "full_attention", "num_layers": 2, "block_size_tokens": 16, "prefix_cacheable": true',
      ],
    });
    const file = write("big.json", text.replace('"page_size_bytes": 4096', '"page_size_bytes": 9007199254740992'));
    const r = await validate(file);
    expect(r.code).toBe(2);
    expect(r.stderr).toBe(
      `error: invalid input\n${file}:8:7: kv_cache_groups[0].transfer_bytes_per_block: must be at most 2^53 = 9007199254740992 (got 9007199254740993, too large to hold exactly)\n`,
    );
  });
  it("a negative and a fractional block_size_tokens", async () => {
    const neg = write(
      "neg.json",
      profileText().replace(
        '"name": "fa", "kind": "full_attention", "num_layers": 2, "block_size_tokens": 16',
        '"block_size_tokens": -16, "name": "fa", "kind": "full_attention", "num_layers": 2',
      ),
    );
    expect(await validate(neg)).toStrictEqual({
      code: 2,
      stdout: "",
      stderr: `error: invalid input\n${neg}:8:7: kv_cache_groups[0].block_size_tokens: must be at least 1 (got -16)\n`,
    });
    const frac = write(
      "frac.json",
      profileText().replace(
        '"name": "sw", "kind": "sliding_window", "window_tokens": 32, "num_layers": 2, "block_size_tokens": 16',
        '"block_size_tokens": 2.5, "name": "sw", "kind": "sliding_window", "window_tokens": 32, "num_layers": 2',
      ),
    );
    expect(await validate(frac)).toStrictEqual({
      code: 2,
      stdout: "",
      stderr: `error: invalid input\n${frac}:9:7: kv_cache_groups[1].block_size_tokens: expected an integer (got 2.5)\n`,
    });
  });
  it("both kv_bytes_per_token and kv_cache_groups", async () => {
    const file = write("both.json", profileText({ extra: ' "kv_bytes_per_token": 4096,' }));
    const r = await validate(file);
    expect(r.code).toBe(2);
    // The added key starts at column 28 of line 6, as in the unknown-key case.
    expect(r.stderr).toBe(
      `error: invalid input\n${file}:6:28: kv_bytes_per_token: a profile has either kv_bytes_per_token (linear) or kv_cache_groups (grouped), never both\n`,
    );
  });
  it("malformed JSON, with line and column", async () => {
    // Line 3 loses its comma; the parser expects ',' where line 4's key starts (column 3).
    const file = write("broken.json", profileText().replace('"model": "test/hybrid",', '"model": "test/hybrid"'));
    expect(await validate(file)).toStrictEqual({ code: 2, stdout: "", stderr: `error: invalid input\n${file}:4:3: malformed JSON: expected ','\n` });
  });
  it("lists every problem at once", async () => {
    const file = write(
      "many.json",
      profileText({ version: "latest" }).replace('"num_layers": 2, "block_size_tokens": 16, "prefix', '"num_layers": 0, "block_size_tokens": 16, "prefix'),
    );
    const r = await validate(file);
    expect(r.code).toBe(2);
    expect(
      r.stderr
        .split("\n")
        .filter((l) => l.startsWith(file))
        .map((l) => l.split(": ")[1]),
    ).toStrictEqual(["vllm_version", "kv_cache_groups[0].num_layers"]);
  });
  it("names a missing file, and a file that is neither a profile nor a spec", async () => {
    const missing = join(dir, "nope.json");
    expect(await validate(missing)).toStrictEqual({ code: 2, stdout: "", stderr: `error: invalid input\n${missing}: cannot read the file: no such file\n` });
    const other = write("other.json", '{ "colour": "red" }');
    expect((await validate(other)).stderr).toBe(
      `error: invalid input\n${other}:1:1: is neither a profile (it has no schema_version) nor a spec (it has no version)\n`,
    );
    // Without its marker, a document with profile keys is checked as a profile (and one with spec
    // keys as a spec, as replay reads it), so the schema names what is missing.
    const profile = write("unmarked.json", '{ "model": "x" }');
    expect((await validate(profile)).stderr).toBe(
      `error: invalid input\n${profile}:1:1: schema_version: must be 1\n${profile}:1:1: vllm_version: is required\n${profile}:1:1: tensor_parallel_size: is required\n`,
    );
  });
  it("accepts an old grouped profile without markers, with a note that P/D refuses it", async () => {
    const file = write("old.json", profileText({ groups: ['"name": "fa", "kind": "full_attention", "num_layers": 2, "block_size_tokens": 16'] }));
    const r = await validate(file);
    expect(r.code).toBe(0);
    expect(r.stdout).toBe("ok: profile test/hybrid, vLLM 0.32.0, grouped, 1 group (full_attention 1), page 4,096 B\n");
    expect(r.stderr).toBe(
      [
        "note: aggregated replay only; a P/D prefill or decode rank refuses this profile:",
        `  ${file}:8:5: kv_cache_groups[0].prefix_cacheable: prefix_cacheable is required on every group for P/D (kv_cache_groups[0] "fa" has none)`,
        `  ${file}:8:5: kv_cache_groups[0].transfer_bytes_per_block: transfer_bytes_per_block is required on every group for P/D (kv_cache_groups[0] "fa" has none)`,
        "",
      ].join("\n"),
    );
  });
});

describe("kvsim validate: specs", () => {
  const mooncake = [
    '{"timestamp": 0, "input_length": 1000, "output_length": 8, "hash_ids": [1, 2]}',
    '{"timestamp": 10, "input_length": 600, "output_length": 4, "hash_ids": [1, 3]}',
    "",
    '{"timestamp": 25, "input_length": 300, "output_length": 2, "hash_ids": [4]}',
    "",
  ].join("\n");
  const spec = (lines: string[]) => ["version: 1", ...lines].join("\n");
  const disagg = [
    "topology:",
    "  kind: disaggregated",
    "  prefill: { workers: 2 }",
    "  decode: { workers: 2 }",
    "timing: { type: fixed, prefill_ms: 10, decode_ms: 2 }",
  ];

  it("loads the profile by relative path, runs the gate and streams the trace", async () => {
    writeFileSync(join(dir, "glm.json"), readFileSync(example(GLM_032)));
    write("trace.jsonl", mooncake);
    const file = write("pd.yaml", spec(["profile: ./glm.json", ...disagg, "workload: { trace: trace.jsonl, format: mooncake }"]));
    expect(await validate(file)).toStrictEqual({
      code: 0,
      stdout: `ok: spec v1, disaggregated 2 prefill + 2 decode, profile zai-org/GLM-5.3-Flash, trace ${join(dir, "trace.jsonl")} (3 requests)\n`,
      stderr: "",
    });
  });
  it("reads an Azure trace with CRLF line ends", async () => {
    write("azure.csv", "TIMESTAMP,ContextTokens,GeneratedTokens\r\n2023-11-16 18:15:46.6805900,374,44\r\n2023-11-16 18:15:47.0000000,10,1\r\n");
    const file = write(
      "azure.yaml",
      spec([
        "profile: " + example(LLAMA),
        "topology: { kind: aggregated, workers: 1 }",
        "timing: { type: profile }",
        "workload: { trace: azure.csv, format: azure }",
      ]),
    );
    expect((await validate(file)).stdout).toBe(
      `ok: spec v1, aggregated 1 worker, profile meta-llama/Llama-3.1-8B-Instruct, trace ${join(dir, "azure.csv")} (2 requests)\n`,
    );
  });
  it("summarises a synthetic workload with an inline profile", async () => {
    const inline = '{ schema_version: 1, model: tiny, vllm_version: "0.32.0", tensor_parallel_size: 1, kv_bytes_per_token: 1024 }';
    const file = write(
      "synthetic.yaml",
      spec([
        `profile: ${inline}`,
        "topology: { kind: aggregated, workers: 3 }",
        "timing: { type: polynomial }",
        "workload: { synthetic: { requests: 100, input_tokens: 64, output_tokens: 8 } }",
      ]),
    );
    expect(await validate(file)).toStrictEqual({ code: 0, stdout: "ok: spec v1, aggregated 3 workers, profile tiny, synthetic 100 requests\n", stderr: "" });
  });
  it("runs the P/D gate for both roles, naming role and field at the profile's line", async () => {
    write("old-version.json", profileText({ version: "0.30.0" }));
    const file = write(
      "gate.yaml",
      spec(["profile: old-version.json", ...disagg, "workload: { synthetic: { requests: 1, input_tokens: 1, output_tokens: 1 } }"]),
    );
    const p = join(dir, "old-version.json");
    expect(await validate(file)).toStrictEqual({
      code: 2,
      stdout: "",
      stderr: [
        "error: invalid input",
        `${p}:4:3: vllm_version: prefill role: vllm_version must be 0.31.0 or 0.32.0 for a grouped P/D rank (got 0.30.0)`,
        `${p}:4:3: vllm_version: decode role: vllm_version must be 0.31.0 or 0.32.0 for a grouped P/D rank (got 0.30.0)`,
        "",
      ].join("\n"),
    });
  });
  it("points gate problems of an inline profile into the spec, with the profile's path", async () => {
    const inline =
      '{ schema_version: 1, model: m, vllm_version: "0.32.0", tensor_parallel_size: 1, page_size_bytes: 64, kv_cache_groups: [{ name: s, kind: state, num_layers: 1, block_size_tokens: 16, prefix_cacheable: true, transfer_bytes_per_block: 64 }] }';
    const file = write(
      "inline-gate.yaml",
      spec([`profile: ${inline}`, ...disagg, "workload: { synthetic: { requests: 1, input_tokens: 1, output_tokens: 1 } }"]),
    );
    const r = await validate(file);
    // Line 2 is "profile: " (9 characters) + the inline profile, where "{ " (2), "schema_version: 1, " (19),
    // "model: m, " (10), 'vllm_version: "0.32.0", ' (24), "tensor_parallel_size: 1, " (25) and
    // "page_size_bytes: 64, " (21) come first: 9 + 101 = 110 characters, so the key is at column 111.
    expect(r.stderr.split("\n").slice(1, 3)).toStrictEqual([
      `${file}:2:111: profile.kv_cache_groups: prefill role: kv_cache_groups needs at least one full_attention group: a grouped handoff counts in full-attention blocks`,
      `${file}:2:111: profile.kv_cache_groups: decode role: kv_cache_groups needs at least one full_attention group: a grouped handoff counts in full-attention blocks`,
    ]);
  });
  it("refuses prefill and decode roles with different cache layouts at the spec's decode.profile, naming both files", async () => {
    const file = write(
      "topology.yaml",
      spec([
        `profile: ${example(GLM_032)}`,
        `decode: { profile: ${example(LLAMA)} }`,
        ...disagg,
        "workload: { synthetic: { requests: 1, input_tokens: 1, output_tokens: 1 } }",
      ]),
    );
    const r = await validate(file);
    expect(r.code).toBe(2);
    // Line 3 is `decode: { profile: ...`: "profile" starts at column 11.
    expect(r.stderr).toBe(
      `error: invalid input\n${file}:3:11: decode.profile: decode role: the prefill and decode profiles have different KV layouts: the prefill profile is grouped (kv_cache_groups), the decode profile linear (kv_bytes_per_token); a grouped rank counts in blocks, a linear rank in tokens, so no handoff can pass between them (prefill: ${shownPath(example(GLM_032))}, decode: ${shownPath(example(LLAMA))})\n`,
    );
  });
  it("lists every problem: a missing profile, a bad trace line, and timing without tables", async () => {
    write(
      "bad-trace.jsonl",
      '{"timestamp": 0, "input_length": 10, "output_length": 1, "hash_ids": [1]}\n{"timestamp": 1, "input_length": -3, "output_length": 1, "hash_ids": [1]}\n',
    );
    const file = write(
      "many.yaml",
      spec(["profile: missing.json", ...disagg.slice(0, 4), "timing: { type: profile }", "workload: { trace: bad-trace.jsonl, format: mooncake }"]),
    );
    const r = await validate(file);
    expect(r.code).toBe(2);
    expect(r.stderr).toBe(
      // The unreadable profile is reported where the spec names it: line 2, `profile: missing.json`, column 1.
      [
        "error: invalid input",
        `${file}:2:1: profile: ${join(dir, "missing.json")}: cannot read the file: no such file`,
        `${join(dir, "bad-trace.jsonl")}:2: input_length: must be at least 1 (got -3)`,
        "",
      ].join("\n"),
    );
    // A --set that names a missing profile is blamed on the flag, not on the spec's line; its
    // relative path is taken from the working folder, as the README says for --set.
    const gone = join(dir, "gone.json");
    const viaFlag = await validate(file, "--set", `profile=${gone}`);
    expect(viaFlag.stderr.split("\n")[1]).toBe(`--set profile=${gone}: profile: ${gone}: cannot read the file: no such file`);
    write("no-tables.json", profileText());
    const noTables = write(
      "no-tables.yaml",
      spec([
        "profile: no-tables.json",
        ...disagg.slice(0, 4),
        "timing: { type: profile }",
        "workload: { synthetic: { requests: 1, input_tokens: 1, output_tokens: 1 } }",
      ]),
    );
    // Line 1 version, 2 profile, 3-6 topology, 7 `timing: { type: profile }`: "type" is at column 11.
    expect((await validate(noTables)).stderr).toBe(
      `error: invalid input\n${noTables}:7:11: timing.type: "profile" timing needs the profile's forward_pass tables, and profile test/hybrid has none: measure its passes, or use timing type roofline (from the model_shape kvsim profile from-hf writes), linear (fitted by kvsim calibrate) or fixed\n`,
    );
  });
  it("names a missing trace file", async () => {
    const file = write(
      "no-trace.yaml",
      spec([
        `profile: ${example(LLAMA)}`,
        "topology: { kind: aggregated, workers: 1 }",
        "timing: { type: polynomial }",
        "workload: { trace: gone.jsonl, format: kvsim }",
      ]),
    );
    expect((await validate(file)).stderr).toBe(`error: invalid input\n${join(dir, "gone.jsonl")}: cannot read the trace: no such file\n`);
  });
  it("refuses an unknown spec key and a spec without a workload source, with lines", async () => {
    const unknown = write(
      "unknown.yaml",
      spec([
        `profile: ${example(LLAMA)}`,
        "topology: { kind: aggregated, workers: 1 }",
        "timing: { type: polynomial }",
        "workload: { synthetic: { requests: 1, input_tokens: 1, output_tokens: 1 } }",
        "colour: red",
      ]),
    );
    expect(await validate(unknown)).toStrictEqual({ code: 2, stdout: "", stderr: `error: invalid input\n${unknown}:6:1: colour: unknown key\n` });
    const noSource = write(
      "no-source.yaml",
      spec([`profile: ${example(LLAMA)}`, "topology: { kind: aggregated, workers: 1 }", "timing: { type: polynomial }", "workload: { speedup: 2 }"]),
    );
    expect((await validate(noSource)).stderr).toBe(`error: invalid input\n${noSource}:5:1: workload: needs exactly one of trace or synthetic\n`);
  });
});
