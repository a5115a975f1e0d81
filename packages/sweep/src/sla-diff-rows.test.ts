import { describe, expect, it } from "vitest";
import { badRow, diffReports, meetsSla, parseSla, rowsTable, slaPercentiles, SlaSyntaxError, type PointReport, type SweepRow } from "./index.js";

const report = (over: Partial<Record<string, unknown>> = {}) =>
  ({
    num_requests: 10,
    completed_requests: 10,
    p90_ttft_ms: 1500,
    p99_itl_ms: 40,
    goodput_rps: 4,
    handoffs: { count: 10, payload_bytes: 100, mean_delay_ms: 2 },
    ...over,
  }) as unknown as PointReport;

describe("SLAs", () => {
  it("parse terms joined by commas, with <= or >=", () => {
    expect(parseSla("p90_ttft_ms<=2000, p99_itl_ms <= 50,goodput_rps>=3.5")).toEqual([
      { metric: "p90_ttft_ms", op: "<=", value: 2000 },
      { metric: "p99_itl_ms", op: "<=", value: 50 },
      { metric: "goodput_rps", op: ">=", value: 3.5 },
    ]);
  });

  it("refuse unknown metrics, bad operators and bad numbers", () => {
    expect(() => parseSla("p90_ttf_ms<=2000")).toThrow(SlaSyntaxError);
    expect(() => parseSla("p90_ttf_ms<=2000")).toThrow(/"p90_ttf_ms" is not a report metric; one of: num_requests, /);
    expect(() => parseSla("p90_ttft_ms<2000")).toThrow('"p90_ttft_ms<2000" is not a term <metric><=<value> or <metric>>=<value>, e.g. p90_ttft_ms<=2000');
    expect(() => parseSla("p90_ttft_ms<=fast")).toThrow('"fast" in "p90_ttft_ms<=fast" is not a finite number');
    expect(() => parseSla("")).toThrow(SlaSyntaxError);
  });

  it("accept vLLM's names and any percentile, and say which percentiles the replay must add", () => {
    const sla = parseSla("median_ttft_ms<=100,p95_ttft_ms<=200,p99.9_e2el_ms<=900,p90_itl_ms<=5,request_goodput>=1");
    expect(sla.map((t) => t.metric)).toEqual(["median_ttft_ms", "p95_ttft_ms", "p99.9_e2el_ms", "p90_itl_ms", "request_goodput"]);
    // p90 is in every report; 95 and 99.9 must be asked for.
    expect(slaPercentiles(sla)).toEqual([95, 99.9]);
    expect(meetsSla(report({ "p99.9_e2el_ms": 800 }), parseSla("p99.9_e2el_ms<=900"))).toBe(true);
  });

  it("hold when every term holds and every request completed", () => {
    const sla = parseSla("p90_ttft_ms<=2000,p99_itl_ms<=40,handoffs.mean_delay_ms<=2");
    expect(meetsSla(report(), sla)).toBe(true);
    expect(meetsSla(report({ p99_itl_ms: 40.001 }), sla)).toBe(false);
    // 9 of 10 completed: percentiles over the 9 would flatter the point.
    expect(meetsSla(report({ completed_requests: 9 }), sla)).toBe(false);
    expect(meetsSla(null, sla)).toBe(false);
    expect(meetsSla(report(), parseSla("goodput_rps>=4"))).toBe(true);
    expect(meetsSla(report(), parseSla("goodput_rps>=4.5"))).toBe(false);
  });
});

describe("report diffs", () => {
  it("put every metric side by side with the absolute and relative change", () => {
    const d = diffReports(
      { p90_ttft_ms: 200, preemptions: 0, handoffs: { count: 4 }, digest: "x" },
      { p90_ttft_ms: 150, preemptions: 3, handoffs: { count: 4 }, digest: "y" },
    );
    expect(d.metrics).toEqual([
      // 150 - 200 = -50; -50 / 200 = -0.25.
      { metric: "p90_ttft_ms", a: 200, b: 150, change: -50, relative: -0.25 },
      // From 0: no relative change.
      { metric: "preemptions", a: 0, b: 3, change: 3, relative: null },
      { metric: "handoffs.count", a: 4, b: 4, change: 0, relative: 0 },
    ]);
    expect(d.sameDigest).toBe(false);
  });

  it("fold the same figure under vLLM's names into one row, unless the values differ", () => {
    const a = {
      p50_ttft_ms: 10,
      median_ttft_ms: 10,
      mean_e2e_ms: 30,
      mean_e2el_ms: 30,
      p50_e2el_ms: 25,
      median_e2el_ms: 25,
      completed: 4,
      completed_requests: 4,
      digest: "x",
    };
    // b's median_ttft_ms (11) is not its p50 (12): kept as a row of its own.
    const b = {
      p50_ttft_ms: 12,
      median_ttft_ms: 11,
      mean_e2e_ms: 33,
      mean_e2el_ms: 33,
      p50_e2el_ms: 20,
      median_e2el_ms: 20,
      completed: 4,
      completed_requests: 4,
      digest: "y",
    };
    expect(diffReports(a, b).metrics).toEqual([
      // 12 - 10 = 2, 2 / 10 = 0.2.
      { metric: "p50_ttft_ms", a: 10, b: 12, change: 2, relative: 0.2 },
      // 11 - 10 = 1, 1 / 10 = 0.1.
      { metric: "median_ttft_ms", a: 10, b: 11, change: 1, relative: 0.1 },
      // 33 - 30 = 3, 3 / 30 = 0.1.
      { metric: "mean_e2e_ms", a: 30, b: 33, change: 3, relative: 0.1, aliases: ["mean_e2el_ms"] },
      // No p50_e2e_ms in the reports: the first of the group heads it; 20 - 25 = -5, -5 / 25 = -0.2.
      { metric: "p50_e2el_ms", a: 25, b: 20, change: -5, relative: -0.2, aliases: ["median_e2el_ms"] },
      // kvsim's name heads the row, at the place of the group's first member (vLLM's completed).
      { metric: "completed_requests", a: 4, b: 4, change: 0, relative: 0, aliases: ["completed"] },
    ]);
  });

  it("compare a latency that is null (no request completed) as a metric without a value", () => {
    const d = diffReports({ p90_ttft_ms: null, digest: "x" }, { p90_ttft_ms: 5, digest: "y" });
    expect([d.metrics, d.settings]).toEqual([[{ metric: "p90_ttft_ms", a: null, b: 5, change: null, relative: null }], []]);
  });

  it("list the other fields that differ, and metrics only one side has", () => {
    const a = { run: { spec: "a.yaml", settings: { "engine.max_num_seqs": 64, router: "kv_aware" } }, goodput_rps: 2 };
    const b = { run: { spec: "b.yaml", settings: { "engine.max_num_seqs": 128, router: "kv_aware" } } };
    const d = diffReports(a, b);
    expect(d.settings).toEqual([
      { setting: "run.spec", a: "a.yaml", b: "b.yaml" },
      { setting: "run.settings.engine.max_num_seqs", a: 64, b: 128 },
    ]);
    expect(d.metrics).toEqual([{ metric: "goodput_rps", a: 2, b: null, change: null, relative: null }]);
  });
});

describe("rows as a table", () => {
  it("have one column per setting and per metric; a bad row leaves its metric cells empty", () => {
    const ok: SweepRow = {
      point: 0,
      settings: { "engine.max_num_seqs": 64 },
      status: "ok",
      reason: null,
      report: report(),
      digest: "d0",
      wall_time_ms: 5,
      sla_met: true,
    };
    const bad = { ...badRow(1, { "engine.max_num_seqs": 0 }, "refused", "engine.max_num_seqs: must be at least 1 (got 0)", 1), sla_met: false };
    const t = rowsTable([ok, bad]);
    expect(t.columns).toEqual([
      "point",
      "engine.max_num_seqs",
      "status",
      "reason",
      "num_requests",
      "completed_requests",
      "p90_ttft_ms",
      "p99_itl_ms",
      "goodput_rps",
      "handoffs.count",
      "handoffs.payload_bytes",
      "handoffs.mean_delay_ms",
      "digest",
      "wall_time_ms",
      "sla_met",
    ]);
    expect(t.cells).toEqual([
      [0, 64, "ok", null, 10, 10, 1500, 40, 4, 10, 100, 2, "d0", 5, true],
      [1, 0, "refused", "engine.max_num_seqs: must be at least 1 (got 0)", null, null, null, null, null, null, null, null, null, 1, false],
    ]);
  });
});
