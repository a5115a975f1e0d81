import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { runCli } from "../main.js";
import { captureIo } from "../test-io.js";

async function run(args: readonly string[]) {
  const io = captureIo();
  const code = await runCli(args, io);
  return { code, out: io.stdout, err: io.stderr };
}

interface GpuJson {
  name: string;
  aliases: string[];
  memory_bytes: number;
  memory_gib: number;
  bf16_tflops: number;
  fp8_tflops: number | null;
  hbm_gbps: number;
  link: { kind: string; gbps: number; latency_us: number };
  sources: Record<string, string>;
}

const NAMES = ["H100-SXM", "H100-PCIe", "H100-NVL", "H200", "B200", "A100-80GB", "A100-40GB", "L40S", "L4", "A10", "RTX-4090", "RTX-5090", "RTX-PRO-6000"];

describe("kvsim gpus", () => {
  it("prints the table: one row per GPU under a two-line header, then what the figures mean", async () => {
    const r = await run(["gpus"]);
    expect([r.code, r.err]).toEqual([0, ""]);
    const lines = r.out.split("\n");
    expect(lines[0]).toMatch(/^name +aliases +memory +BF16 +FP8 +HBM +link +latency$/);
    expect(lines[1]).toMatch(/^ +GiB +TFLOPS +TFLOPS +GB\/s +GB\/s +µs$/);
    expect(lines.slice(2, 15).map((l) => l.split(/ +/)[0])).toEqual(NAMES);
    // H100 SXM: 79.18 GiB, 1,979 / 2 = 989.5 BF16, 3,958 / 2 = 1,979 FP8, 3,350 GB/s, NVLink 900 / 2 = 450 GB/s, 2 µs.
    expect(lines[2]!.split(/ +/)).toEqual(["H100-SXM", "H100-80GB", "79.18", "989.5", "1,979", "3,350", "nvlink", "450", "2"]);
    // A10: no FP8; PCIe Gen4 32 GB/s per direction.
    expect(lines[11]!.split(/ +/)).toEqual(["A10", "-", "21.99", "125", "-", "600", "pcie", "32", "5"]);
    expect(r.out).toContain("link latencies are kvsim's estimates. Sources: --format json.\n");
  });

  it("prints JSON with every figure and its source", async () => {
    const r = await run(["gpus", "--format", "json"]);
    expect([r.code, r.err]).toEqual([0, ""]);
    const { gpus } = JSON.parse(r.out) as { gpus: GpuJson[] };
    expect(gpus.map((g) => g.name)).toEqual(NAMES);
    for (const g of gpus) {
      expect(Object.keys(g)).toEqual(["name", "aliases", "memory_bytes", "memory_gib", "bf16_tflops", "fp8_tflops", "hbm_gbps", "link", "sources"]);
      expect(Object.keys(g.sources)).toEqual(["memory_bytes", "bf16_tflops", "fp8_tflops", "hbm_gbps", "link", "link_latency_us"]);
    }
    // H100-SXM by hand: 79.18 x 2^30 = 85,018,877,624 bytes (rounded); 79.18 GiB shown.
    const h100 = gpus[0]!;
    expect({ ...h100, sources: undefined }).toEqual({
      name: "H100-SXM",
      aliases: ["H100-80GB"],
      memory_bytes: 85_018_877_624,
      memory_gib: 79.18,
      bf16_tflops: 989.5,
      fp8_tflops: 1979,
      hbm_gbps: 3350,
      link: { kind: "nvlink", gbps: 450, latency_us: 2 },
      sources: undefined,
    });
    expect(h100.sources.bf16_tflops).toContain("https://");
    // No FP8 tensor cores: null, and the source says none.
    const a100 = gpus.find((g) => g.name === "A100-40GB")!;
    expect([a100.fp8_tflops, a100.sources.fp8_tflops?.startsWith("none: ")]).toEqual([null, true]);
  });

  it("refuses another format and arguments with one hint line (exit 2)", async () => {
    expect(await run(["gpus", "--format", "xml"])).toEqual({
      code: 2,
      out: "",
      err: "error: option '--format <format>' argument 'xml' is invalid. Allowed choices are table, json.\nhint: `kvsim gpus --help` shows its usage\n",
    });
    const extra = await run(["gpus", "H100"]);
    expect(extra.code).toBe(2);
    expect(extra.err).toMatch(/\nhint: `kvsim gpus --help` shows its usage\n$/);
  });
});

describe("--gpu of profile from-hf and profile show", () => {
  let dir = "";
  const path = (name: string) => join(dir, name);
  // Dense: 2 x 4 layers x 2 KV heads x 64 x 2 bytes = 2,048 B per token.
  const config = {
    architectures: ["LlamaForCausalLM"],
    hidden_size: 256,
    num_hidden_layers: 4,
    num_attention_heads: 4,
    num_key_value_heads: 2,
    intermediate_size: 512,
    vocab_size: 1000,
    max_position_embeddings: 4096,
    torch_dtype: "bfloat16",
  };
  beforeAll(() => {
    dir = mkdtempSync(join(tmpdir(), "kvsim-gpus-"));
    writeFileSync(path("config.json"), JSON.stringify(config));
  });
  afterAll(() => {
    rmSync(dir, { recursive: true, force: true });
  });

  it("takes every name and alias; an alias sizes the pool as its GPU does", async () => {
    const made = await run(["profile", "from-hf", path("config.json"), "--tp", "1", "--gpu", "B200", "--out", path("p.json"), "--force"]);
    expect([made.code, made.err]).toEqual([0, ""]);
    expect(made.out).toMatch(/GPU memory +178\.35 GiB {2}B200 \(/);
    const pages = async (gpu: string) => {
      const r = await run(["profile", "show", path("p.json"), "--gpu", gpu, "--format", "json"]);
      expect([r.code, r.err], gpu).toEqual([0, ""]);
      return (JSON.parse(r.out) as { kv_capacity: { gpu: string; num_gpu_blocks: number } }).kv_capacity;
    };
    for (const gpu of ["H100-SXM", "H100-PCIe", "H100-NVL", "H200", "A100-40GB", "L40S", "L4", "A10", "RTX-PRO-6000-Blackwell"])
      expect((await pages(gpu)).gpu).toBe(gpu);
    expect((await pages("H100-80GB")).num_gpu_blocks).toBe((await pages("H100-SXM")).num_gpu_blocks);
  });

  it("refuses an unknown GPU with the known names and one hint line (exit 2)", async () => {
    const r = await run(["profile", "show", path("p.json"), "--gpu", "h100"]);
    expect(r.code).toBe(2);
    expect(r.err).toMatch(
      /^error: option '--gpu <name>' argument 'h100' is invalid\. Known GPUs: H100-SXM, H100-PCIe, .*RTX-PRO-6000-Blackwell \(`kvsim gpus` lists them; or give --gpu-memory-gib\)\.\nhint: `kvsim profile show --help` shows its usage\n$/,
    );
  });
});
