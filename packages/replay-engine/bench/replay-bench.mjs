// `pnpm bench` for @kvsim/replay-engine: replays the public Mooncake synthetic trace (when the
// shared data folder is present) and a generated 8x trace through the built package, and prints,
// per scenario and trace, simulated requests per wall second and per CPU second (the replay's own
// user + system time: steadier than wall time on a shared machine), wall and CPU time per request,
// peak RSS and "live MB" (the V8 heap plus typed arrays' buffers still reachable once the replay
// is over, its result included: what a longer trace must not grow by more than its per-request
// records; peak RSS also counts garbage V8 lets pile up between collections), as the median of
// several runs with their spread (min..max). On the 1x trace it
// also prints "warm req/s": the same replay run a second time in the same process, as a sweep's
// later points run (the first replay of a process also waits for V8 to compile the hot code).
//
//   aggregated round robin   4 workers, a linear profile with 16-token blocks, polynomial timing
//   aggregated kv-aware      the same with the kv_aware router
//   P/D GLM                  2 prefill + 2 decode workers, the GLM-5.3-Flash grouped profile
//   P/D GLM, shared NICs     the same with its handoffs on kv_transfer.network (the network model's cost)
//   ... + CPU offload tier   agg-rr-offload: agg-rr with a 512 GiB write-through CPU tier per worker,
//                            256-token offloaded blocks (KVSIM_BENCH_OFFLOAD_BLOCK=16: one GPU block)
//   ... + time series        agg-rr-ts, pd-ts: the same replays sampling time series at the
//                            default interval (what sampling costs; compare with agg-rr, pd; when
//                            both ran, a last line gives the difference of the CPU medians, and
//                            bench/timeseries-overhead.mjs measures it steadily, by instructions)
//
// The 8x trace is 8 copies of the public trace one after another in time, each copy's hash ids
// moved to a range of its own (no prefix shared between copies): the same load for 8x as long,
// so memory should stay flat and the wall time per request the same. It is written once to the
// system's temporary folder (never into the repository).
//
// Every run is its own child process, so its peak RSS is its own. Figures are printed, never
// asserted: wall time depends on the machine and on what else runs on it (the load average is
// printed). Each run's digest is printed too: a performance change must leave it unchanged.
//
//   node bench/replay-bench.mjs                      everything (KVSIM_BENCH_RUNS runs each, default 3)
//   KVSIM_BENCH_SCENARIOS=agg-rr KVSIM_BENCH_TRACES=1x node bench/replay-bench.mjs
//   node bench/replay-bench.mjs --one <scenario> <trace-file>   one run, one JSON line (internal)
//   node bench/replay-bench.mjs --parse <scenario> <trace-file> imports and parsing only (internal)
//   node bench/replay-bench.mjs --trace <1x|8x>                  a trace's path (internal)
/* global console, process, setTimeout, URL */
import { spawnSync } from "node:child_process";
import { createReadStream, createWriteStream, existsSync, readFileSync, statSync } from "node:fs";
import { loadavg, tmpdir } from "node:os";
import { resolve } from "node:path";
import { performance } from "node:perf_hooks";
import { createInterface } from "node:readline";
import { once } from "node:events";
import { fileURLToPath } from "node:url";
import { setFlagsFromString } from "node:v8";
import { runInNewContext } from "node:vm";
import { SpecSchema, readTrace, validateProfile } from "@kvsim/profile-schema";
import { runReplay } from "../dist/index.js";

const repoRoot = fileURLToPath(new URL("../../../", import.meta.url));
// KVSIM_BENCH_TRACE: read the public trace from another path.
const TRACE = process.env.KVSIM_BENCH_TRACE ?? resolve(repoRoot, "../shared/data/traces/mooncake_synthetic_trace.jsonl");
const GLM_FILE = resolve(repoRoot, "apps/cli/examples/profiles/glm-5.3-flash-tp4-fp8-vllm-0.32.0.json");
const SCALE = 8;

/** The GLM-5.3-Flash TP4 fp8 geometry of docs/rules/grouped-pd.md §2, used if the bundled profile is absent. */
const GLM_FALLBACK = {
  schema_version: 1,
  model: "zai-org/GLM-5.3-Flash",
  vllm_version: "0.32.0",
  tensor_parallel_size: 4,
  kv_cache_dtype: "fp8",
  page_size_bytes: 13045120,
  kv_cache_groups: [
    { name: "full_attention", kind: "full_attention", num_layers: 11, block_size_tokens: 2176, prefix_cacheable: true, transfer_bytes_per_block: 13045120 },
    { name: "tail_ring", kind: "state", num_layers: 11, block_size_tokens: 2176, prefix_cacheable: false, transfer_bytes_per_block: 22528 },
    {
      name: "kda_0",
      kind: "state",
      num_layers: 9,
      block_size_tokens: 2176,
      prefix_cacheable: true,
      transfer_bytes_per_block: 9768960,
      prefill_checkpoint_blocks: 1,
    },
    {
      name: "kda_1",
      kind: "state",
      num_layers: 9,
      block_size_tokens: 2176,
      prefix_cacheable: true,
      transfer_bytes_per_block: 9768960,
      prefill_checkpoint_blocks: 1,
    },
    {
      name: "kda_2",
      kind: "state",
      num_layers: 8,
      block_size_tokens: 2176,
      prefix_cacheable: true,
      transfer_bytes_per_block: 8683520,
      prefill_checkpoint_blocks: 1,
    },
    {
      name: "kda_3",
      kind: "state",
      num_layers: 8,
      block_size_tokens: 2176,
      prefix_cacheable: true,
      transfer_bytes_per_block: 8683520,
      prefill_checkpoint_blocks: 1,
    },
  ],
};

const linear = (router) => ({
  version: 1,
  profile: { schema_version: 1, model: "bench/linear-dense", vllm_version: "0.32.0", tensor_parallel_size: 1, kv_bytes_per_token: 131072 },
  topology: { kind: "aggregated", workers: 4 },
  // 65,536 blocks of 16 tokens hold 1M tokens per rank; the longest prompt has 191,378.
  engine: { num_gpu_blocks: 65536, block_size: 16, max_num_batched_tokens: 8192, max_num_seqs: 256, enable_prefix_caching: true },
  timing: { type: "polynomial" },
  workload: { trace: TRACE, format: "mooncake", trace_block_size: 512 },
  router,
});

const SCENARIOS = {
  "agg-rr": { label: "aggregated round robin", spec: () => linear("round_robin") },
  "agg-kv": { label: "aggregated kv-aware", spec: () => linear("kv_aware") },
  pd: {
    label: "P/D GLM 2+2",
    spec: () => ({
      version: 1,
      profile: existsSync(GLM_FILE) ? JSON.parse(readFileSync(GLM_FILE, "utf8")) : GLM_FALLBACK,
      topology: { kind: "disaggregated", prefill: { workers: 2 }, decode: { workers: 2 } },
      // 4,096 pages of 2,176 tokens per rank.
      engine: { num_gpu_blocks: 4096, max_num_batched_tokens: 8192, max_num_seqs: 256, enable_prefix_caching: true },
      kv_transfer: { bandwidth_gbps: 50, mode: "destination_missing" },
      timing: { type: "polynomial" },
      workload: { trace: TRACE, format: "mooncake", trace_block_size: 512 },
    }),
  },
  // The same P/D case with its handoffs on a shared network (kv_transfer.network): what the
  // network model costs. One 50 GB/s NIC per worker each way instead of a private 50 GB/s pipe.
  "pd-net": {
    label: "P/D GLM 2+2, shared NICs",
    spec: () => ({ ...SCENARIOS.pd.spec(), kv_transfer: { mode: "destination_missing", network: { nic: { send: "50 GB/s", receive: "50 GB/s" } } } }),
  },
  "agg-rr-ts": { label: "aggregated round robin + time series", spec: () => linear("round_robin"), timeseries: {} },
  // agg-rr with a write-through CPU offload tier per worker (kv_offload): what the tiers cost. The
  // GPU pools hold 1M tokens, so few prefixes come back from the tier, but it stores every block.
  "agg-rr-offload": {
    label: "aggregated round robin + CPU offload tier",
    spec: () => ({
      ...linear("round_robin"),
      // Offloaded blocks of 256 tokens (LMCache's chunk; KVSIM_BENCH_OFFLOAD_BLOCK=16 for one GPU block, vLLM's default).
      kv_offload: {
        tiers: [{ name: "cpu", capacity: "512 GiB", read_bandwidth: "25 GB/s", write_bandwidth: "25 GB/s", latency_ms: 0.05 }],
        block_size: Number(process.env.KVSIM_BENCH_OFFLOAD_BLOCK ?? 256),
      },
    }),
  },
  "pd-ts": { label: "P/D GLM 2+2 + time series", spec: () => SCENARIOS.pd.spec(), timeseries: {} },
};

/** The trace's records for one replay: streamed (the default) or read and parsed at once. */
async function traceRecords(spec, traceFile, preload) {
  const lines = preload ? readFileSync(traceFile, "utf8").split("\n") : createInterface({ input: createReadStream(traceFile, "utf8"), crlfDelay: Infinity });
  const records = readTrace(lines, { format: "mooncake", file: traceFile, traceBlockSize: spec.workload.trace_block_size });
  if (!preload) return records;
  const all = [];
  for await (const r of records) all.push(r);
  return all;
}

/**
 * One replay in this process; prints one JSON line with its figures. With KVSIM_BENCH_WARM=1 the
 * same replay then runs a second time in the same process (the trace read again the same way)
 * and its wall and CPU time are reported too: what a sweep's later points cost, once V8 has
 * compiled the hot code (the first replay of a process pays for that).
 */
async function runOne(name, traceFile, parseOnly = false) {
  const raw = SCENARIOS[name].spec();
  raw.workload.trace = traceFile;
  const spec = SpecSchema.parse({ ...raw, profile: validateProfile(raw.profile) });
  // KVSIM_BENCH_PRELOAD=1 (bench/timeseries-overhead.mjs): the trace is read at once and parsed
  // before the replay starts. Streamed (the default), when each chunk of the file arrives relative
  // to the replay's work varies from run to run, and with it what V8 has seen when it compiles:
  // instruction counts moved by about 1% between runs of the same code.
  const preload = parseOnly || process.env.KVSIM_BENCH_PRELOAD === "1";
  const timeseries = SCENARIOS[name].timeseries;
  const replay = async () => {
    const records = await traceRecords(spec, traceFile, preload);
    const t0 = performance.now();
    const cpu0 = process.cpuUsage();
    const result = await runReplay({ spec, records, traceFile, ...(timeseries === undefined ? {} : { timeseries }) });
    const cpu = process.cpuUsage(cpu0);
    return { result, wallMs: performance.now() - t0, cpuMs: (cpu.user + cpu.system) / 1000 };
  };
  if (parseOnly) {
    await traceRecords(spec, traceFile, true);
    return;
  }
  const { result, wallMs, cpuMs } = await replay();
  if (!result.ok) {
    console.log(JSON.stringify({ ok: false, reason: result.reason }));
    return;
  }
  const r = result.report;
  // Peak RSS of the first replay (the figure the bench compares between traces).
  const rssMb = process.resourceUsage().maxRSS / 1024;
  const warm = process.env.KVSIM_BENCH_WARM === "1" ? await warmTimes(replay, r.digest) : undefined;
  if (warm === null) {
    console.log(JSON.stringify({ ok: false, reason: "the second replay in the process gave another result" }));
    return;
  }
  // What stays reachable once the first replay is over (its report included): peak RSS also
  // counts the garbage V8 let pile up between collections, which grows with a longer replay
  // even when what is live does not.
  const liveMb = await liveMemoryMb();
  console.log(
    JSON.stringify({
      ok: true,
      requests: r.num_requests,
      completed: r.completed_requests,
      inputTokens: r.total_input_tokens,
      outputTokens: r.total_output_tokens,
      wallMs,
      cpuMs,
      ...(warm === undefined ? {} : { warmWallMs: warm.wallMs, warmCpuMs: warm.cpuMs }),
      rssMb,
      liveMb,
      digest: r.digest,
    }),
  );
}

/** Runs the replay again in this process; its wall and CPU ms, or null if it gave another digest (its result is dropped). */
async function warmTimes(replay, digest) {
  const { result, wallMs, cpuMs } = await replay();
  return result.ok && result.report.digest === digest ? { wallMs, cpuMs } : null;
}

/**
 * Memory in use after a full garbage collection, in MB: the V8 heap's live objects plus memory
 * held outside the heap (typed arrays' buffers). `gc` is exposed for this call only, through a
 * fresh context (the flag alone does not add it to the running one).
 */
async function liveMemoryMb() {
  setFlagsFromString("--expose-gc");
  const gc = runInNewContext("gc");
  // Typed arrays' buffers that a collection found dead are freed by a sweeper afterwards: until
  // it has run, `external` still counts them. Collect until the figure stops falling.
  let last = Infinity;
  for (let i = 0; i < 10; i++) {
    gc();
    await new Promise((done) => setTimeout(done, 10));
    const m = process.memoryUsage();
    const mb = (m.heapUsed + m.external) / 2 ** 20;
    if (mb >= last) return last;
    last = mb;
  }
  return last;
}

/** Writes the 8x trace (once): copy k shifted by k x (span + mean gap), its hash ids by k x (max id + 1). */
async function scaledTrace() {
  const out = resolve(tmpdir(), `kvsim-bench-mooncake-${SCALE}x.jsonl`);
  const source = statSync(TRACE);
  if (existsSync(out) && statSync(out).mtimeMs >= source.mtimeMs) return out;
  const rows = [];
  const lines = createInterface({ input: createReadStream(TRACE, "utf8"), crlfDelay: Infinity });
  for await (const line of lines) if (line.trim() !== "") rows.push(JSON.parse(line));
  const maxId = rows.reduce((m, r) => r.hash_ids.reduce((a, b) => Math.max(a, b), m), 0);
  const first = rows[0].timestamp;
  const span = rows[rows.length - 1].timestamp - first;
  const shift = span + span / Math.max(1, rows.length - 1);
  const tmp = `${out}.${process.pid}.tmp`;
  const w = createWriteStream(tmp);
  for (let k = 0; k < SCALE; k++) {
    for (const r of rows) {
      const row = { ...r, timestamp: r.timestamp + k * shift, hash_ids: r.hash_ids.map((id) => id + k * (maxId + 1)) };
      if (!w.write(`${JSON.stringify(row)}\n`)) await once(w, "drain");
    }
  }
  w.end();
  await once(w, "finish");
  const { renameSync } = await import("node:fs");
  renameSync(tmp, out);
  return out;
}

function median(xs) {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.floor((s.length - 1) / 2)];
}

function fmt(xs, digits) {
  const m = median(xs).toFixed(digits);
  if (xs.length === 1) return m;
  return `${m} (${Math.min(...xs).toFixed(digits)}..${Math.max(...xs).toFixed(digits)})`;
}

async function main() {
  if (process.argv[2] === "--one") {
    await runOne(process.argv[3], process.argv[4]);
    return;
  }
  // What --one does before the replay starts, with the trace preloaded (as KVSIM_BENCH_PRELOAD=1):
  // node, the imports and parsing the trace; bench/timeseries-overhead.mjs takes it off each run.
  if (process.argv[2] === "--parse") {
    await runOne(process.argv[3], process.argv[4], true);
    return;
  }
  // The trace file of "1x" or "8x" (writes the 8x one if needed), for bench/timeseries-overhead.mjs.
  if (process.argv[2] === "--trace") {
    console.log(process.argv[3] === `${SCALE}x` ? await scaledTrace() : TRACE);
    return;
  }
  if (!existsSync(TRACE)) {
    console.log(`replay-engine bench: ${TRACE} is absent, skipping`);
    return;
  }
  const runs = Math.max(1, Number(process.env.KVSIM_BENCH_RUNS ?? 3));
  const scenarios = (process.env.KVSIM_BENCH_SCENARIOS ?? Object.keys(SCENARIOS).join(",")).split(",");
  const traces = (process.env.KVSIM_BENCH_TRACES ?? `1x,${SCALE}x`).split(",");
  const files = { "1x": TRACE };
  if (traces.includes(`${SCALE}x`)) files[`${SCALE}x`] = await scaledTrace();
  console.log(`replay-engine bench: the public Mooncake trace (1x) and ${SCALE} copies of it in a row (${SCALE}x); 16-token blocks for the linear profile`);
  console.log(
    `median of ${runs} run(s), spread min..max; load average at start ${loadavg()
      .map((l) => l.toFixed(2))
      .join(" ")} (figures are noisy on a shared machine)`,
  );
  const header = [
    "scenario",
    "trace",
    "requests",
    "simulated req/s",
    "warm req/s",
    "req/CPU-s",
    "wall ms/request",
    "CPU ms/request",
    "peak RSS MB",
    "live MB",
    "digest",
  ];
  const rows = [];
  /** Median CPU ms per request by "scenario trace", for the time series overhead line. */
  const cpuMedians = new Map();
  let failed = false;
  for (const name of scenarios) {
    if (SCENARIOS[name] === undefined) throw new Error(`unknown scenario ${name} (${Object.keys(SCENARIOS).join(", ")})`);
    for (const trace of traces) {
      const results = [];
      for (let i = 0; i < runs; i++) {
        // The warm figure (a second replay in the same process) only where it is cheap: the 1x trace.
        const env = { ...process.env, KVSIM_BENCH_WARM: trace === "1x" ? "1" : "0" };
        const child = spawnSync(process.execPath, [fileURLToPath(import.meta.url), "--one", name, files[trace]], { encoding: "utf8", maxBuffer: 1 << 20, env });
        const line = child.stdout.trim().split("\n").pop() ?? "";
        const res =
          child.status === 0 && line.startsWith("{")
            ? JSON.parse(line)
            : { ok: false, reason: `exit ${child.status}: ${child.stderr.trim().split("\n").slice(-3).join(" / ")}` };
        if (!res.ok) {
          console.log(`${SCENARIOS[name].label} ${trace}: FAILED: ${res.reason}`);
          failed = true;
          break;
        }
        results.push(res);
      }
      if (results.length === 0) continue;
      cpuMedians.set(`${name} ${trace}`, median(results.map((r) => r.cpuMs / r.requests)));
      const digests = [...new Set(results.map((r) => r.digest))];
      const r0 = results[0];
      const complete = r0.completed === r0.requests ? "" : ` (${r0.completed} completed)`;
      rows.push([
        SCENARIOS[name].label,
        trace,
        `${r0.requests}${complete}`,
        fmt(
          results.map((r) => r.requests / (r.wallMs / 1000)),
          0,
        ),
        r0.warmWallMs === undefined
          ? "-"
          : fmt(
              results.map((r) => r.requests / (r.warmWallMs / 1000)),
              0,
            ),
        fmt(
          results.map((r) => r.requests / (r.cpuMs / 1000)),
          0,
        ),
        fmt(
          results.map((r) => r.wallMs / r.requests),
          3,
        ),
        fmt(
          results.map((r) => r.cpuMs / r.requests),
          3,
        ),
        fmt(
          results.map((r) => r.rssMb),
          0,
        ),
        fmt(
          results.map((r) => r.liveMb),
          1,
        ),
        digests.length === 1 ? digests[0].slice(0, 16) : `DIFFERENT across runs: ${digests.map((d) => d.slice(0, 8)).join(", ")}`,
      ]);
    }
  }
  const widths = header.map((h, i) => Math.max(h.length, ...rows.map((r) => r[i].length)));
  const print = (cells) =>
    console.log(
      cells
        .map((c, i) => c.padEnd(widths[i]))
        .join("  ")
        .trimEnd(),
    );
  print(header);
  for (const r of rows) print(r);
  // A scenario and its "+ time series" twin on the same trace: what sampling cost, from the medians
  // (as noisy as they are; bench/timeseries-overhead.mjs counts instructions instead).
  const overheads = [];
  for (const [key, withTs] of cpuMedians) {
    const [name, trace] = key.split(" ");
    const plain = name.endsWith("-ts") ? cpuMedians.get(`${name.slice(0, -3)} ${trace}`) : undefined;
    if (plain !== undefined) overheads.push(`${name.slice(0, -3)} ${trace} ${withTs >= plain ? "+" : ""}${((withTs / plain - 1) * 100).toFixed(1)}%`);
  }
  if (overheads.length > 0)
    console.log(`time series overhead (median CPU/request, noisy; node bench/timeseries-overhead.mjs measures it): ${overheads.join(", ")}`);
  if (failed) process.exitCode = 1;
}

await main();
