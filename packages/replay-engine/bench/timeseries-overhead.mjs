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
//     count, moved by 2-4% from run to run on a loaded machine). Counts still move by up to about
//     1% between runs of the same code (the trace is read asynchronously, so what V8 has seen
//     when it compiles varies), and the overhead by 1-3 points: take several runs and read the
//     spread before concluding on a change of a point or two. The replay's cost is
//     the run's count less what loading node and the modules costs (a run that stops before the
//     replay); the overhead is
//     (ts - plain) / (plain - load). Counts instructions, not time: cache misses are not weighed.
//     Slow: some 50x a normal run (the 1x trace takes minutes, 8x a good part of an hour).
//
//   cpu
//     KVSIM_BENCH_RUNS pairs (default 10) of plain and time-series runs, interleaved (ABAB...)
//     so that a change in the machine's load hits both alike; per pair the ratio of CPU time
//     (user + system); prints the median ratio with a distribution-free 95% confidence interval
//     (order statistics of the pair ratios). On a loaded machine the interval is wide.
//
//   node bench/timeseries-overhead.mjs                          agg and pd, 1x
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

/** Instructions of one child run (`args` after the bench script), and its JSON line if any. */
function instructions(args) {
  const child = spawnSync("valgrind", ["--tool=callgrind", "--callgrind-out-file=/dev/null", process.execPath, ...DETERMINISTIC, BENCH, ...args], {
    encoding: "utf8",
    maxBuffer: 1 << 24,
  });
  const m = /Collected\s*:\s*(\d+)/.exec(child.stderr);
  if (child.status !== 0 || m === null) throw new Error(`valgrind run ${args.join(" ")} failed (exit ${child.status}): ${child.stderr.trim().split("\n").slice(-3).join(" / ")}`);
  const line = child.stdout.trim().split("\n").pop() ?? "";
  return { count: Number(m[1]), result: line.startsWith("{") ? JSON.parse(line) : undefined };
}

/** CPU ms of the replay in one child run (the bench's own measure). */
function cpuRun(scenario, trace) {
  const child = spawnSync(process.execPath, [BENCH, "--one", scenario, trace], { encoding: "utf8", maxBuffer: 1 << 20 });
  const line = child.stdout.trim().split("\n").pop() ?? "";
  if (child.status !== 0 || !line.startsWith("{")) throw new Error(`${scenario} failed (exit ${child.status}): ${child.stderr.trim().split("\n").slice(-3).join(" / ")}`);
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
    console.log("time series overhead, instructions counted by valgrind --tool=callgrind (node single-threaded, fixed seeds)");
    const load = instructions(["--load"]).count;
    console.log(`loading node and the modules: ${(load / 1e6).toFixed(1)} M instructions (taken off every run)`);
    for (const trace of traces) {
      for (const name of pairs) {
        const [a, b] = PAIRS[name];
        const plain = instructions(["--one", a, files[trace]]);
        const ts = instructions(["--one", b, files[trace]]);
        const same = plain.result?.digest === ts.result?.digest ? "" : "  DIGESTS DIFFER";
        const n = plain.result?.requests ?? 1;
        const ratio = (ts.count - load) / (plain.count - load);
        console.log(
          `${name} ${trace}: ${a} ${((plain.count - load) / n / 1e3).toFixed(1)} k instructions/request, ${b} ${((ts.count - load) / n / 1e3).toFixed(1)}k: time series overhead ${pct(ratio)}${same}`,
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
