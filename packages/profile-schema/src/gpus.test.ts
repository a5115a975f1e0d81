import { describe, expect, it } from "vitest";
import { zodIssues } from "./document.js";
import { EngineOverridesSchema, engineSettings } from "./engine.js";
import { GIB, GPU_DATASHEETS, GPU_FIGURES, GpuInlineSchema, gpuDatasheet, KNOWN_GPU_NAMES, resolveGpu } from "./gpus.js";

/** The GPUs issue #35 asks for, with the memory each is marketed with (GB as NVIDIA writes it, 2^30 bytes). */
const MARKETED_GIB: Readonly<Record<string, number>> = {
  "H100-SXM": 80,
  "H100-PCIe": 80,
  "H100-NVL": 94,
  H200: 141,
  B200: 180,
  "A100-80GB": 80,
  "A100-40GB": 40,
  L40S: 48,
  L4: 24,
  A10: 24,
  "RTX-4090": 24,
  "RTX-5090": 32,
  "RTX-PRO-6000": 96,
};

/** Issues of an engine override as `path: message` lines. */
const engineIssues = (engine: unknown): string[] => {
  const r = EngineOverridesSchema.safeParse(engine, { reportInput: true });
  return r.success ? [] : zodIssues(r.error).map((i) => `${i.path}: ${i.message}`);
};

// A made-up GPU: 64 GiB, 400 / 800 TFLOPS, 3.2 TB/s, a 400 Gbit/s (= 50 GB/s) link.
const inline = {
  name: "Lab-GPU",
  memory_gib: 64,
  bf16_tflops: 400,
  fp8_tflops: 800,
  hbm_bandwidth: "3.2 TB/s",
  link_kind: "nvlink",
  link_bandwidth: "400 Gbit/s",
  link_latency_us: 3,
};

describe("GPU_DATASHEETS (the table's invariants)", () => {
  it("has every GPU issue #35 asks for", () => {
    expect(GPU_DATASHEETS.map((g) => g.name).sort()).toEqual(Object.keys(MARKETED_GIB).sort());
  });

  it("gives every GPU every figure, finite and positive (FP8 absent only on Ampere)", () => {
    for (const g of GPU_DATASHEETS) {
      for (const v of [g.memoryBytes, g.bf16Tflops, g.hbmGBps, g.link.GBps, g.link.latencyUs])
        expect(Number.isFinite(v) && v > 0, `${g.name}: ${v}`).toBe(true);
      expect(Number.isInteger(g.memoryBytes), g.name).toBe(true);
      expect(["nvlink", "pcie"]).toContain(g.link.kind);
      if (g.fp8Tflops !== undefined) expect(Number.isFinite(g.fp8Tflops) && g.fp8Tflops > 0, g.name).toBe(true);
    }
    expect(GPU_DATASHEETS.filter((g) => g.fp8Tflops === undefined).map((g) => g.name)).toEqual(["A100-80GB", "A100-40GB", "A10"]);
  });

  it("names a source for each figure, and nothing else; datasheet figures cite a URL, a missing FP8 says so", () => {
    for (const g of GPU_DATASHEETS) {
      expect(Object.keys(g.sources).sort(), g.name).toEqual([...GPU_FIGURES].sort());
      for (const f of GPU_FIGURES) expect(g.sources[f]!.trim().length, `${g.name}.${f}`).toBeGreaterThan(20);
      for (const f of ["bf16Tflops", "hbmGBps", "link"] as const) expect(g.sources[f], `${g.name}.${f}`).toContain("https://");
      if (g.fp8Tflops === undefined) expect(g.sources.fp8Tflops, g.name).toMatch(/^none: /);
      else expect(g.sources.fp8Tflops, g.name).toContain("https://");
      // Latencies are kvsim's assumptions, and say so.
      expect(g.sources.linkLatencyUs, g.name).toMatch(/^estimate/);
    }
  });

  it("has unique names and aliases, so a name never means two GPUs", () => {
    const all = GPU_DATASHEETS.flatMap((g) => [g.name, ...g.aliases]);
    expect(new Set(all).size).toBe(all.length);
    expect(KNOWN_GPU_NAMES).toEqual([...GPU_DATASHEETS.map((g) => g.name), ...GPU_DATASHEETS.flatMap((g) => g.aliases)]);
  });

  it("never rates FP8 below BF16", () => {
    for (const g of GPU_DATASHEETS) if (g.fp8Tflops !== undefined) expect(g.fp8Tflops, g.name).toBeGreaterThanOrEqual(g.bf16Tflops);
  });

  it("states memory as CUDA reports it: below the marketed size, by less than 10%", () => {
    for (const g of GPU_DATASHEETS) {
      const marketed = MARKETED_GIB[g.name]! * GIB;
      expect(g.memoryBytes, g.name).toBeLessThan(marketed);
      expect(g.memoryBytes, g.name).toBeGreaterThan(0.9 * marketed);
    }
  });

  it("uses dense figures and per-direction links (H100 SXM, by hand from its datasheet)", () => {
    const h100 = gpuDatasheet("H100-SXM")!;
    // BF16 1,979 and FP8 3,958 with sparsity: halved. NVLink 900 GB/s both ways: 450 each.
    expect([h100.bf16Tflops, h100.fp8Tflops, h100.hbmGBps, h100.link]).toEqual([989.5, 1979, 3350, { kind: "nvlink", GBps: 450, latencyUs: 2 }]);
    // PCIe Gen4 x16: 64 GB/s both ways = 32 per direction; Gen5: 64.
    expect([gpuDatasheet("L40S")!.link.GBps, gpuDatasheet("RTX-5090")!.link.GBps]).toEqual([32, 64]);
    // 79.18 GiB = 79 x 2^30 + 0.18 x 2^30 = 84,825,604,096 + 193,273,528.32 -> 85,018,877,624 bytes (as before).
    expect(h100.memoryBytes).toBe(85_018_877_624);
  });
});

describe("gpuDatasheet", () => {
  it("finds a GPU by name or alias, exactly: H100-80GB is H100-SXM", () => {
    expect(gpuDatasheet("H100-80GB")).toBe(gpuDatasheet("H100-SXM"));
    expect(gpuDatasheet("H100-80GB")!.name).toBe("H100-SXM");
    expect(gpuDatasheet("h100-sxm")).toBeUndefined();
    expect(gpuDatasheet("H100")).toBeUndefined();
  });
});

describe("GpuInlineSchema", () => {
  it("turns an inline description into a datasheet, bandwidths read with their units", () => {
    expect(GpuInlineSchema.parse(inline)).toEqual({
      name: "Lab-GPU",
      aliases: [],
      memoryBytes: 68_719_476_736, // 64 x 2^30
      bf16Tflops: 400,
      fp8Tflops: 800,
      hbmGBps: 3200, // 3.2 TB/s
      link: { kind: "nvlink", GBps: 50, latencyUs: 3 }, // 400 Gbit/s / 8
      sources: Object.fromEntries(GPU_FIGURES.map((f) => [f, "given inline in the spec"])),
    });
  });

  it("defaults the link to PCIe and FP8 to none", () => {
    const g = GpuInlineSchema.parse({ ...inline, link_kind: undefined, fp8_tflops: undefined });
    expect([g.link.kind, g.fp8Tflops]).toEqual(["pcie", undefined]);
  });
});

describe("engine.gpu", () => {
  it("takes every name and alias, and an inline description, each parsed again unchanged", () => {
    for (const name of KNOWN_GPU_NAMES) expect(engineIssues({ gpu: name }), name).toEqual([]);
    // Role overrides are merged over the spec's engine and parsed again: the inline form survives.
    const once = engineSettings({ gpu: inline } as never);
    expect(engineSettings(once as never).gpu).toEqual(inline);
  });

  it("resolves a name, an alias and an inline description to a datasheet", () => {
    expect(resolveGpu(engineSettings({ gpu: "H100-80GB" }))?.name).toBe("H100-SXM");
    expect(resolveGpu(engineSettings({ gpu: inline } as never))?.hbmGBps).toBe(3200);
    expect(resolveGpu(engineSettings({}))).toBeUndefined();
  });

  it("refuses an unknown name, listing the known ones", () => {
    expect(engineIssues({ gpu: "H100" })).toEqual([
      `gpu: must be a known GPU: ${KNOWN_GPU_NAMES.join(", ")} (kvsim gpus lists them), or a GPU described inline (or give gpu_memory_gib) (got "H100")`,
    ]);
    expect(KNOWN_GPU_NAMES.slice(0, 3)).toEqual(["H100-SXM", "H100-PCIe", "H100-NVL"]);
  });

  it("names the inline field at fault", () => {
    expect(engineIssues({ gpu: { ...inline, link_latency_us: undefined } })).toEqual(["gpu.link_latency_us: is required"]);
    expect(engineIssues({ gpu: { ...inline, hbm_bandwidth: "3350" } })).toEqual([
      'gpu.hbm_bandwidth: is not a bandwidth: write it with a unit, e.g. "50 GB/s" (bytes) or "400 Gbit/s" (bits) (got "3350")',
    ]);
    expect(engineIssues({ gpu: { ...inline, link_bandwidth: "50 Gbps" } })[0]).toMatch(
      /^gpu\.link_bandwidth: is ambiguous \(bits or bytes\?\): .* \(got "50 Gbps"\)$/,
    );
    expect(engineIssues({ gpu: { ...inline, memory_gib: 0 } })).toEqual(["gpu.memory_gib: must be greater than 0 (got 0)"]);
    expect(engineIssues({ gpu: { ...inline, fp8_tflops: 300 } })).toEqual([
      "gpu.fp8_tflops: must be at least bf16_tflops (400): FP8 tensor cores are never slower than BF16 ones",
    ]);
    expect(engineIssues({ gpu: { ...inline, link_kind: "infiniband" } })[0]).toMatch(/^gpu\.link_kind: /);
    expect(engineIssues({ gpu: { ...inline, hbm_gbps: 3350 } })).toEqual(["gpu.hbm_gbps: unknown key"]);
    expect(engineIssues({ gpu: 80 })).toEqual(["gpu: must be a known GPU's name (kvsim gpus lists them) or a GPU described inline"]);
  });
});
