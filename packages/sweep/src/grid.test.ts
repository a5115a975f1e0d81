import { InputError, parseDocumentText } from "@kvsim/profile-schema";
import { describe, expect, it } from "vitest";
import { checkGridPaths, expandGrid, MAX_GRID_POINTS, parseGrid, rangeValues } from "./index.js";

const grid = (text: string, file = "/g/grid.yaml") => parseGrid(parseDocumentText(text, file));

function thrown(fn: () => unknown): InputError {
  try {
    fn();
  } catch (e) {
    if (e instanceof InputError) return e;
    throw e;
  }
  throw new Error("expected an InputError");
}

describe("ranges", () => {
  it("run from `from` to `to` inclusive in steps, without float drift", () => {
    // (512 - 64) / 64 + 1 = 8 values.
    expect(rangeValues(64, 512, 64)).toEqual([64, 128, 192, 256, 320, 384, 448, 512]);
    expect(rangeValues(0.5, 1.5, 0.25)).toEqual([0.5, 0.75, 1, 1.25, 1.5]);
    // 0.1 + 2 x 0.1 is 0.30000000000000004 in doubles; rounded to 12 digits it is 0.3.
    expect(rangeValues(0.1, 0.3, 0.1)).toEqual([0.1, 0.2, 0.3]);
    // A step that does not land on `to` stops below it: 1, 4, 7 (10 would pass 9).
    expect(rangeValues(1, 9, 3)).toEqual([1, 4, 7]);
    expect(rangeValues(5, 5, 1)).toEqual([5]);
    expect(rangeValues(6, 5, 1)).toEqual([]);
  });
});

describe("grid files", () => {
  it("expand lists and ranges to their cartesian product, the first path outermost", () => {
    const g = grid("engine.max_num_seqs: [64, 128, 256]\ntopology.decode.workers: { from: 1, to: 2, step: 1 }\n");
    expect(g.size).toBe(6); // 3 x 2
    const points = expandGrid(g);
    expect(points.map((p) => p.settings)).toEqual([
      { "engine.max_num_seqs": 64, "topology.decode.workers": 1 },
      { "engine.max_num_seqs": 64, "topology.decode.workers": 2 },
      { "engine.max_num_seqs": 128, "topology.decode.workers": 1 },
      { "engine.max_num_seqs": 128, "topology.decode.workers": 2 },
      { "engine.max_num_seqs": 256, "topology.decode.workers": 1 },
      { "engine.max_num_seqs": 256, "topology.decode.workers": 2 },
    ]);
    expect(points.map((p) => p.index)).toEqual([0, 1, 2, 3, 4, 5]);
    expect(points[3]!.overrides).toEqual([
      { path: ["engine", "max_num_seqs"], value: 128, source: "/g/grid.yaml:1" },
      { path: ["topology", "decode", "workers"], value: 2, source: "/g/grid.yaml:2" },
    ]);
  });

  it("move the paths of one zip group together: one axis", () => {
    const g = grid(
      [
        "prefill.engine.num_gpu_blocks: { values: [256, 512], zip: mem }",
        "engine.max_num_seqs: [8, 16, 32]",
        "decode.engine.num_gpu_blocks: { values: [1024, 2048], zip: mem }",
      ].join("\n"),
    );
    // Two axes: mem (2 positions) and max_num_seqs (3): 6 points, mem outermost.
    expect(g.axes.map((a) => [a.zip, a.size])).toEqual([
      ["mem", 2],
      [undefined, 3],
    ]);
    const points = expandGrid(g);
    expect(points).toHaveLength(6);
    expect(points[4]!.settings).toEqual({ "prefill.engine.num_gpu_blocks": 512, "decode.engine.num_gpu_blocks": 2048, "engine.max_num_seqs": 16 });
  });

  it("take values of any type, and resolve relative trace and profile paths against the grid's folder", () => {
    const points = expandGrid(grid("workload.trace: [a.jsonl, /abs/b.jsonl]\nsla: [null, { ttft_ms: 100 }]\n"));
    expect(points.map((p) => p.settings)).toEqual([
      { "workload.trace": "/g/a.jsonl", sla: null },
      { "workload.trace": "/g/a.jsonl", sla: { ttft_ms: 100 } },
      { "workload.trace": "/abs/b.jsonl", sla: null },
      { "workload.trace": "/abs/b.jsonl", sla: { ttft_ms: 100 } },
    ]);
  });

  it("refuse malformed entries, naming the file, line and path", () => {
    const e = thrown(() => grid("engine.max_num_seqs: []\ntopology..workers: [1]\nworkload.speedup: { from: 1, to: 2, step: 0 }\nrouter: kv_aware\n"));
    // Line 3: "workload.speedup: { " (20 characters) + "from: 1, " (9) + "to: 2, " (7): step at column 37.
    expect(e.message.split("\n")).toEqual([
      "/g/grid.yaml:1:1: engine.max_num_seqs: needs at least one value (got [])",
      "/g/grid.yaml:2:1: topology..workers: is not a spec path (keys joined by dots, e.g. engine.max_num_seqs)",
      "/g/grid.yaml:3:37: workload.speedup.step: must be greater than 0 (got 0)",
      "/g/grid.yaml:4:1: router: expected a list of values, {from, to, step} or {values, zip}",
    ]);
    expect(thrown(() => grid("[1, 2]")).message).toBe("/g/grid.yaml: a grid maps spec paths to their values, e.g. engine.max_num_seqs: [64, 128, 256]");
    expect(thrown(() => grid("workload.speedup: { from: 2, to: 1, step: 1 }")).message).toBe(
      "/g/grid.yaml:1:1: workload.speedup: the range is empty (to is below from)",
    );
  });

  it("refuse a zip group whose paths have different lengths", () => {
    const e = thrown(() => grid("a.x: { values: [1, 2], zip: z }\nb.y: { values: [1, 2, 3], zip: z }\n"));
    expect(e.message).toBe("/g/grid.yaml:2:1: b.y: zip group z moves its paths together, but this has 3 values and a.x (line 1) has 2");
  });

  it(`refuse a product over ${MAX_GRID_POINTS} points`, () => {
    // 1,000 x 1,000 = 10^6 points.
    const e = thrown(() => grid("a.x: { from: 1, to: 1000, step: 1 }\nb.y: { from: 1, to: 1000, step: 1 }\n"));
    expect(e.message).toBe(`/g/grid.yaml: expands to 1000000 points; at most ${MAX_GRID_POINTS} are allowed`);
  });

  it("paths that are no spec field are refused before anything runs", () => {
    const base = {
      version: 1,
      profile: "p.json",
      topology: { kind: "aggregated", workers: 1 },
      timing: { type: "polynomial" },
      workload: { synthetic: { requests: 1, input_tokens: 4, output_tokens: 2 } },
    };
    const g = grid("engine.max_num_seq: [1, 2]\nengine.max_num_seqs: [0, 2]\n");
    // max_num_seqs 0 is a bad value for one point (its row says so), not a bad path.
    expect(
      thrown(() => {
        checkGridPaths(g, base);
      }).message,
    ).toBe("/g/grid.yaml:1: engine.max_num_seq: is not a field of a spec (engine.max_num_seq: unknown key)");
    expect(() => {
      checkGridPaths(grid("engine.max_num_seqs: [0, 2]\n"), base);
    }).not.toThrow();
  });

  it("router settings are grid paths, also under a router written as a policy name", () => {
    const base = {
      version: 1,
      profile: "p.json",
      topology: { kind: "aggregated", workers: 1 },
      timing: { type: "polynomial" },
      workload: { synthetic: { requests: 1, input_tokens: 4, output_tokens: 2 } },
      router: "kv_aware",
    };
    const g = grid("router.overlap_score_weight: [0.5, 1, 2]\nrouter.router_temperature: [0, 0.5]\n");
    expect(() => {
      checkGridPaths(g, base);
    }).not.toThrow();
    expect(expandGrid(g)).toHaveLength(6);
    expect(
      thrown(() => {
        checkGridPaths(grid("router.overlap_weight: [1]\n"), base);
      }).message,
    ).toBe("/g/grid.yaml:1: router.overlap_weight: is not a field of a spec (router.overlap_weight: unknown key)");
  });
});
