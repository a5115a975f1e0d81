// What sampling time series costs the replay: each bench scenario against its "+ time series"
// twin (agg-rr / agg-rr-ts, pd / pd-ts) on the same trace, as a percentage of the replay's cost.
//
// Two methods (KVSIM_OVERHEAD_METHOD):
//
//   instructions (default when valgrind is installed)
//     Counts the instructions each run executes under `valgrind --tool=callgrind`, with node
//     single-threaded (V8 compiles and collects on the main thread: the same work, counted),
//     fixed hash and random seeds, and V8's predictable GC schedule (fixed young generation and
//     heap growing: by default V8 sizes them from timings, so how often it collects, and so the
//     count, moved by 2-4% from run to run on a loaded machine). The trace is read at once and
//     parsed before the replay starts (KVSIM_BENCH_PRELOAD=1): streamed, when each chunk of the
//     file arrived relative to the replay's work varied from run to run, and counts moved by up to
//     1% (the overhead by 1-3 points). Preloaded, most repeat runs of the same code agree to about
//     0.1%, but now and then one is some 100 M instructions off (a garbage collection more or
//     less, it seems): each kind of run is repeated (KVSIM_OVERHEAD_REPEATS, default 3) and the
//     medians are compared. The replay's cost is a run's count less that of a run that stops once
//     the trace is parsed (node, the modules and the parsing: `replay-bench.mjs --parse`); the
//     overhead is (ts - plain) / (plain - parsed), the share of the replay alone. Counts
//     instructions, not time: cache misses are not weighed.
//     Slow: some 50x a normal run (the 1x trace takes minutes, 8x a good part of an hour).
//
//   cpu
//     KVSIM_BENCH_RUNS pairs (default 10) of plain and time-series runs, interleaved (ABAB...)
//     so that a change in the machine's load hits both alike; the trace preloaded as above, CPU
//     time (user + system) counted from the replay's start; per pair the ratio; prints the median
//     ratio with a distribution-free 95% confidence interval (order statistics of the pair
//     ratios). On a loaded machine the interval is wide.
//
//   node bench/timeseries-overhead.mjs                          agg and pd, 1x
//   KVSIM_OVERHEAD_REPEATS=5 KVSIM_OVERHEAD_PAIRS=pd node bench/timeseries-overhead.mjs
//   KVSIM_OVERHEAD_PAIRS=pd KVSIM_BENCH_TRACES=1x,8x KVSIM_OVERHEAD_METHOD=cpu node bench/timeseries-overhead.mjs
/* global console, process, URL */
import { spawnSync } from "node:child_process";
import { fileURLToPath } from "node:url";

const BENCH = fileURLToPath(new URL("./replay-bench.mjs", import.meta.url));
const PAIRS = { agg: ["agg-rr", "agg-rr-ts"], pd: ["pd", "pd-ts"] };
const DETERMINISTIC = ["--single-threaded", "--predictable-gc-schedule", "--hash-seed=1", "--random-seed=1"];

function hasValgrind() {
  return spawnSync("valgrind", ["--version"], { encoding: "utf8" }).status === 0;
}

/** The children read and parse the trace before the replay starts (see the header). */
const PRELOADED = { ...process.env, KVSIM_BENCH_PRELOAD: "1" };

/** Instructions of one child run (`args` after the bench script), and its JSON line if any. */
function instructions(args) {
  const child = spawnSync("valgrind", ["--tool=callgrind", "--callgrind-out-file=/dev/null", process.execPath, ...DETERMINISTIC, BENCH, ...args], {
    encoding: "utf8",
    env: PRELOADED,
    maxBuffer: 1 << 24,
  });
  const m = /Collected\s*:\s*(\d+)/.exec(child.stderr);
  if (child.status !== 0 || m === null)
    throw new Error(`valgrind run ${args.join(" ")} failed (exit ${child.status}): ${child.stderr.trim().split("\n").slice(-3).join(" / ")}`);
  const line = child.stdout.trim().split("\n").pop() ?? "";
  return { count: Number(m[1]), result: line.startsWith("{") ? JSON.parse(line) : undefined };
}

/** CPU ms of the replay in one child run (the bench's own measure). */
function cpuRun(scenario, trace) {
  const child = spawnSync(process.execPath, [BENCH, "--one", scenario, trace], { encoding: "utf8", env: PRELOADED, maxBuffer: 1 << 20 });
  const line = child.stdout.trim().split("\n").pop() ?? "";
  if (child.status !== 0 || !line.startsWith("{"))
    throw new Error(`${scenario} failed (exit ${child.status}): ${child.stderr.trim().split("\n").slice(-3).join(" / ")}`);
  const res = JSON.parse(line);
  if (!res.ok) throw new Error(`${scenario} failed: ${res.reason}`);
  return res;
}

const pct = (r) => `${r >= 1 ? "+" : ""}${((r - 1) * 100).toFixed(2)}%`;

/** Largest k with P(Binomial(n, 1/2) < k) <= 0.025: the CI of the median is [x(k), x(n+1-k)] (1-based). */
function medianCiRank(n) {
  let k = 0;
  let below = 0;
  let term = 0.5 ** n; // P(X = 0)
  while (k < n && below + term <= 0.025) {
    below += term;
    term = (term * (n - k)) / (k + 1);
    k++;
  }
  return k; // 0: too few pairs for a 95% interval
}

function main() {
  const method = process.env.KVSIM_OVERHEAD_METHOD ?? (hasValgrind() ? "instructions" : "cpu");
  const pairs = (process.env.KVSIM_OVERHEAD_PAIRS ?? "agg,pd").split(",");
  const traces = (process.env.KVSIM_BENCH_TRACES ?? "1x").split(",");
  const files = Object.fromEntries(traces.map((t) => [t, spawnSync(process.execPath, [BENCH, "--trace", t], { encoding: "utf8" }).stdout.trim()]));
  if (method === "instructions") {
    const repeats = Math.max(1, Number(process.env.KVSIM_OVERHEAD_REPEATS ?? 3));
    console.log(
      `time series overhead, instructions counted by valgrind --tool=callgrind (node single-threaded, fixed seeds, trace parsed before the replay); median of ${repeats} run(s) of each, min..max`,
    );
    const mid = (xs) => [...xs].sort((u, v) => u - v)[Math.floor((xs.length - 1) / 2)];
    const range = (xs, f) => (xs.length === 1 ? f(xs[0]) : `${f(mid(xs))} (${f(Math.min(...xs))}..${f(Math.max(...xs))})`);
    for (const trace of traces) {
      for (const name of pairs) {
        const [a, b] = PAIRS[name];
        const parsed = [];
        const plain = [];
        const ts = [];
        let n = 1;
        let same = "";
        for (let i = 0; i < repeats; i++) {
          // What the run costs before the replay starts: node, the modules and parsing the trace.
          parsed.push(instructions(["--parse", a, files[trace]]).count);
          const p = instructions(["--one", a, files[trace]]);
          const t = instructions(["--one", b, files[trace]]);
          if (p.result?.digest !== t.result?.digest) same = "  DIGESTS DIFFER";
          n = p.result?.requests ?? 1;
          plain.push(p.count);
          ts.push(t.count);
        }
        // Medians of each, not per-repeat ratios: a run now and then collects once more or less
        // (some 100 M instructions, in any of the three kinds of run).
        const base = mid(parsed);
        const ratio = (mid(ts) - base) / (mid(plain) - base);
        const perRequest = (c) => `${((c - base) / n / 1e3).toFixed(1)}k`;
        console.log(
          `${name} ${trace}: before the replay ${range(parsed, (c) => `${(c / 1e6).toFixed(0)}M`)} instructions; replay instructions/request ${a} ${range(plain, perRequest)}, ${b} ${range(ts, perRequest)}: time series overhead ${pct(ratio)}${same}`,
        );
      }
    }
    return;
  }
  const runs = Math.max(2, Number(process.env.KVSIM_BENCH_RUNS ?? 10));
  console.log(`time series overhead, CPU time per request: ${runs} interleaved pairs, median pair ratio with a 95% distribution-free interval`);
  for (const trace of traces) {
    for (const name of pairs) {
      const [a, b] = PAIRS[name];
      const ratios = [];
      for (let i = 0; i < runs; i++) {
        // Alternate which of the two runs first, so neither always follows the other.
        const first = i % 2 === 0 ? a : b;
        const x = cpuRun(first, files[trace]);
        const y = cpuRun(first === a ? b : a, files[trace]);
        const [p, t] = first === a ? [x, y] : [y, x];
        if (p.digest !== t.digest) throw new Error(`${name} ${trace}: the digests differ`);
        ratios.push(t.cpuMs / p.cpuMs);
      }
      ratios.sort((u, v) => u - v);
      const med = ratios.length % 2 === 1 ? ratios[(ratios.length - 1) / 2] : (ratios[ratios.length / 2 - 1] + ratios[ratios.length / 2]) / 2;
      const k = medianCiRank(ratios.length);
      const ci = k === 0 ? "too few pairs for an interval" : `95% CI ${pct(ratios[k - 1])}..${pct(ratios[ratios.length - k])}`;
      console.log(`${name} ${trace}: time series overhead ${pct(med)} CPU/request (${ci}; pairs ${ratios.map(pct).join(" ")})`);
    }
  }
}

main();
