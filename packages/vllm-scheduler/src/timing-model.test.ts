import { engineSettings, type Profile } from "@kvsim/profile-schema";
import { describe, expect, it } from "vitest";
import {
  createTimingModel,
  expertShareTouched,
  polynomialDecodeMs,
  paddedBatchSize,
  polynomialPrefillMs,
  type DecodeBatch,
  type PrefillBatch,
  type StepBatch,
  type TimingEstimate,
  type TimingModel,
} from "./timing-model.js";

const EMPTY_STEP: StepBatch = {
  prefill: { count: 0, sumIsl: 0, sumPrefix: 0 },
  decode: { count: 0, sumSequenceTokens: 0 },
  promptRows: 0,
  promptTokens: 0,
  promptContextTokens: 0,
  decodeRows: 0,
  decodeKvTokens: 0,
};
/** The prefill part of a two-part model's price for a step with only this prefill batch. */
const prefillOf = (model: TimingModel, prefill: PrefillBatch): TimingEstimate => {
  const t = model.step({ ...EMPTY_STEP, prefill });
  return { ms: t.prefillMs, clamped: t.clamped > 0 };
};
/** The decode part of a two-part model's price for a step with only this decode batch. */
const decodeOf = (model: TimingModel, decode: DecodeBatch): TimingEstimate => {
  const t = model.step({ ...EMPTY_STEP, decode });
  return { ms: t.decodeMs, clamped: t.clamped > 0 };
};

const linear = (extra: Partial<Profile> = {}): Profile => ({
  schema_version: 1,
  model: "test/linear",
  vllm_version: "0.32.0",
  tensor_parallel_size: 1,
  kv_bytes_per_token: 1024,
  ...extra,
});

describe("fixed timing", () => {
  const model = createTimingModel({ type: "fixed", prefill_ms: 10, decode_ms: 2 }, linear(), engineSettings());
  it("charges prefill_ms when the pass has prompt work and decode_ms when it samples", () => {
    expect(prefillOf(model, { count: 3, sumIsl: 900, sumPrefix: 0 }).ms).toBe(10);
    expect(decodeOf(model, { count: 5, sumSequenceTokens: 50 }).ms).toBe(2);
  });
  it("charges nothing for an empty batch", () => {
    expect(prefillOf(model, { count: 0, sumIsl: 0, sumPrefix: 0 }).ms).toBe(0);
    expect(decodeOf(model, { count: 0, sumSequenceTokens: 0 }).ms).toBe(0);
  });
});

describe("polynomial timing (docs/rules/replay.md §4.2 vectors)", () => {
  // prefill(b, n) = 4.209989e-7 x^2 + 1.518344e-2 x + 16.50142 with x = b n.
  it("prefill vectors", () => {
    // x = 1024: 0.441449... + 15.54784256 + 16.50142 = 32.49071...
    expect(polynomialPrefillMs(1, 1024)).toBe(32.4907119025664);
    // x = 8192: 28.2526... + 124.3827... + 16.50142 = 169.1369...
    expect(polynomialPrefillMs(1, 8192)).toBe(169.1369184042496);
    // x = 4 x 512 = 2048: 1.7657... + 31.0957... + 16.50142 = 49.3629...
    expect(polynomialPrefillMs(4, 512)).toBe(49.3629024902656);
    // x = 128: 0.006897... + 1.94348... + 16.50142 = 18.4518...
    expect(polynomialPrefillMs(1, 128)).toBe(18.4517979659776);
    // A fully cached prompt (n = 0) and an empty batch cost nothing.
    expect(polynomialPrefillMs(1, 0)).toBe(0);
    expect(polynomialPrefillMs(0, 100)).toBe(0);
  });

  it("decode vectors", () => {
    // max(1, -25.74 p^2 + 54.01 p + 5.74)
    expect(polynomialDecodeMs(0, 100)).toBe(5.74); // p = 0
    // p = 0.5: -6.435 + 27.005 + 5.74 = 26.31 (one ulp above in doubles)
    expect(polynomialDecodeMs(50, 100)).toBe(26.310000000000002);
    // p = 1: -25.74 + 54.01 + 5.74 = 34.01; p is capped at 1
    expect(polynomialDecodeMs(100, 100)).toBe(34.01);
    expect(polynomialDecodeMs(2048, 1024)).toBe(polynomialDecodeMs(1024, 1024));
    // p = 4096 / (16384 x 64) = 1/256: -0.000392... + 0.210976... + 5.74 = 5.95058...
    expect(polynomialDecodeMs(4096, 16384 * 64)).toBe(5.950583801269532);
    // No KV capacity: p = 1.
    expect(polynomialDecodeMs(5, 0)).toBe(34.01);
  });

  it("takes integer means of the prefill batch", () => {
    const model = createTimingModel({ type: "polynomial" }, linear(), engineSettings());
    // 2 requests, Σ isl = 1025, Σ prefix = 0: mean isl floor(512.5) = 512, x = 2 x 512 = 1024.
    expect(prefillOf(model, { count: 2, sumIsl: 1025, sumPrefix: 0 }).ms).toBe(32.4907119025664);
    // 4 requests of 612 isl with 100 prefix each: n = 512, x = 2048.
    expect(prefillOf(model, { count: 4, sumIsl: 2448, sumPrefix: 400 }).ms).toBe(49.3629024902656);
  });

  it("prices decode against num_gpu_blocks x the linear block size", () => {
    // 16384 blocks x 64 tokens = 1,048,576 KV tokens; 4096 active gives p = 1/256.
    const model = createTimingModel({ type: "polynomial" }, linear(), engineSettings({ num_gpu_blocks: 16384, block_size: 64 }));
    expect(decodeOf(model, { count: 7, sumSequenceTokens: 4096 }).ms).toBe(5.950583801269532);
    // 524,288 active tokens: p = 0.5.
    expect(decodeOf(model, { count: 7, sumSequenceTokens: 524288 }).ms).toBe(26.310000000000002);
  });

  it("prices decode against num_gpu_blocks x the full-attention block size of a grouped profile", () => {
    const grouped: Profile = {
      schema_version: 1,
      model: "test/grouped",
      vllm_version: "0.32.0",
      tensor_parallel_size: 1,
      page_size_bytes: 1000,
      kv_cache_groups: [
        { name: "ring", kind: "state", num_layers: 1, block_size_tokens: 64, prefix_cacheable: false, transfer_bytes_per_block: 10 },
        { name: "fa", kind: "full_attention", num_layers: 1, block_size_tokens: 2176, prefix_cacheable: true, transfer_bytes_per_block: 100 },
      ],
    };
    // 100 blocks x 2176 = 217,600 KV tokens; 108,800 active gives p = 0.5.
    const model = createTimingModel({ type: "polynomial" }, grouped, engineSettings({ num_gpu_blocks: 100 }));
    expect(decodeOf(model, { count: 1, sumSequenceTokens: 108800 }).ms).toBe(26.310000000000002);
  });
});

describe("profile timing (multilinear interpolation in forward_pass)", () => {
  // Prefill grid: batch {1, 3} x new {100, 200} x cached {0, 100}, latency 4 b + new / 20 + cached / 50
  // (affine, so the interpolation reproduces it exactly inside the grid).
  const prefillPoints = [1, 3].flatMap((b) =>
    [100, 200].flatMap((n) => [0, 100].map((c) => ({ batch_size: b, new_tokens: n, cached_tokens: c, latency_ms: 4 * b + n / 20 + c / 50 }))),
  );
  // Decode grid: batch {1, 3} x kv {1000, 3000} with corners 4, 10, 6, 20 (not affine).
  const decodePoints = [
    { batch_size: 1, kv_tokens: 1000, latency_ms: 4 },
    { batch_size: 3, kv_tokens: 1000, latency_ms: 10 },
    { batch_size: 1, kv_tokens: 3000, latency_ms: 6 },
    { batch_size: 3, kv_tokens: 3000, latency_ms: 20 },
  ];
  const profile = linear({ forward_pass: { provenance: "test", prefill: prefillPoints, decode: decodePoints } });
  const refuse = createTimingModel({ type: "profile", outside_grid: "refuse" }, profile, engineSettings());
  const clamp = createTimingModel({ type: "profile", outside_grid: "clamp" }, profile, engineSettings());

  it("returns the measured value on a grid point", () => {
    // (batch 3, new 300 - 100 = 200, cached 100): 12 + 10 + 2 = 24
    expect(prefillOf(refuse, { count: 3, sumIsl: 300, sumPrefix: 100 })).toEqual({ ms: 24, clamped: false });
    // (batch 1, new 100, cached 0): 4 + 5 + 0 = 9
    expect(prefillOf(refuse, { count: 1, sumIsl: 100, sumPrefix: 0 })).toEqual({ ms: 9, clamped: false });
    expect(decodeOf(refuse, { count: 3, sumSequenceTokens: 3000 })).toEqual({ ms: 20, clamped: false });
    expect(decodeOf(refuse, { count: 1, sumSequenceTokens: 1000 })).toEqual({ ms: 4, clamped: false });
  });

  it("returns the mean of the corners at a cell's midpoint", () => {
    // Decode (2, 2000) is the centre of the cell: (4 + 10 + 6 + 20) / 4 = 10.
    expect(decodeOf(refuse, { count: 2, sumSequenceTokens: 2000 })).toEqual({ ms: 10, clamped: false });
    // On an edge: (2, 1000) is halfway between 4 and 10 = 7.
    expect(decodeOf(refuse, { count: 2, sumSequenceTokens: 1000 })).toEqual({ ms: 7, clamped: false });
    // Prefill centre (2, 150, 50): 8 + 7.5 + 1 = 16.5.
    expect(prefillOf(refuse, { count: 2, sumIsl: 200, sumPrefix: 50 })).toEqual({ ms: 16.5, clamped: false });
  });

  it("refuses a query outside the grid, naming the query and the grid range", () => {
    expect(() => decodeOf(refuse, { count: 4, sumSequenceTokens: 2000 })).toThrow(
      "forward_pass.decode: the query (batch_size 4, kv_tokens 2000) is outside the measured grid (batch_size 1..3, kv_tokens 1000..3000)",
    );
    expect(() => prefillOf(refuse, { count: 1, sumIsl: 250, sumPrefix: 0 })).toThrow(
      "forward_pass.prefill: the query (batch_size 1, new_tokens 250, cached_tokens 0) is outside the measured grid (batch_size 1..3, new_tokens 100..200, cached_tokens 0..100)",
    );
  });

  it("clamps each coordinate into the grid and reports it", () => {
    // (5, 5000) clamps to the corner (3, 3000) = 20.
    expect(decodeOf(clamp, { count: 5, sumSequenceTokens: 5000 })).toEqual({ ms: 20, clamped: true });
    // (2, 500): kv clamps to 1000, batch stays halfway: (4 + 10) / 2 = 7.
    expect(decodeOf(clamp, { count: 2, sumSequenceTokens: 500 })).toEqual({ ms: 7, clamped: true });
    // Prefill (1, new 1000 -> 200, cached 0): 4 + 10 + 0 = 14.
    expect(prefillOf(clamp, { count: 1, sumIsl: 1000, sumPrefix: 0 })).toEqual({ ms: 14, clamped: true });
  });

  it("needs the query to equal a single-valued axis", () => {
    const single = linear({
      forward_pass: {
        provenance: "test",
        prefill: [
          { batch_size: 1, new_tokens: 0, cached_tokens: 0, latency_ms: 1 },
          { batch_size: 1, new_tokens: 1000, cached_tokens: 0, latency_ms: 11 },
        ],
        decode: [],
      },
    });
    const model = createTimingModel({ type: "profile", outside_grid: "refuse" }, single, engineSettings());
    // new 250 of 0..1000: 1 + 0.25 x 10 = 3.5
    expect(prefillOf(model, { count: 1, sumIsl: 250, sumPrefix: 0 }).ms).toBe(3.5);
    expect(() => prefillOf(model, { count: 2, sumIsl: 250, sumPrefix: 0 })).toThrow("batch_size 1..1");
    expect(() => decodeOf(model, { count: 1, sumSequenceTokens: 10 })).toThrow("the profile has no forward_pass.decode table");
  });
});

describe("linear timing", () => {
  const coefficients = { step_ms: 5, per_sequence_ms: 0.5, per_kv_token_us: 2, per_prompt_token_us: 100, per_cached_token_us: 10, prompt_step_ms: 3 };
  const model = createTimingModel({ type: "linear", ...coefficients }, linear(), engineSettings({ cudagraph_capture_sizes: [1, 2, 4, 8] }));

  it("prices a decode-only step with its sequences padded to the next capture size", () => {
    // 3 rows run the 4-row graph: 5 + 0.5 x 4 + 2 us x 3,000 / 1,000 = 5 + 2 + 6 = 13 ms.
    expect(model.step({ ...EMPTY_STEP, decodeRows: 3, decodeKvTokens: 3000 })).toEqual({ prefillMs: 0, decodeMs: 13, clamped: 0 });
    // 9 rows are above the largest capture size: no padding, 5 + 4.5 = 9.5 ms.
    expect(model.step({ ...EMPTY_STEP, decodeRows: 9 }).decodeMs).toBe(9.5);
  });

  it("prices a step with prompt work without padding and with its surcharge", () => {
    // 2 decode rows (1,000 KV tokens) and a 512-token chunk after 256 held tokens: decode part
    // 5 + 0.5 x 3 + 2 = 8.5 ms; prompt part 3 + (100 x 512 + 10 x 256) / 1,000 = 3 + 53.76 ms.
    const t = model.step({ ...EMPTY_STEP, decodeRows: 2, decodeKvTokens: 1000, promptRows: 1, promptTokens: 512, promptContextTokens: 256 });
    expect(t.decodeMs).toBe(8.5);
    expect(t.prefillMs).toBeCloseTo(56.76, 12);
  });

  it("charges nothing for an empty step", () => {
    expect(model.step(EMPTY_STEP)).toEqual({ prefillMs: 0, decodeMs: 0, clamped: 0 });
  });
});

describe("linear timing with the experts term", () => {
  // 4 experts, each token routed to 2: a token misses a given expert with probability 1/2, so t
  // tokens touch the share 1 - (1/2)^t of the experts; touching all of them costs 8 ms.
  const experts = { num_experts: 4, num_experts_per_tok: 2, all_experts_ms: 8 };
  const base = { step_ms: 5, per_sequence_ms: 0, per_kv_token_us: 0, per_prompt_token_us: 100, per_cached_token_us: 0, prompt_step_ms: 0 };

  it("prices the expected share of the experts a decode-only step's padded rows touch", () => {
    const model = createTimingModel({ type: "linear", ...base, experts }, linear(), engineSettings({ cudagraph_capture_sizes: [1, 2, 4] }));
    // 1 row: 5 + 8 x (1 - 1/2) = 9 ms; 2 rows: 5 + 8 x (1 - 1/4) = 11 ms.
    expect(model.step({ ...EMPTY_STEP, decodeRows: 1, decodeKvTokens: 10 }).decodeMs).toBe(9);
    expect(model.step({ ...EMPTY_STEP, decodeRows: 2, decodeKvTokens: 20 }).decodeMs).toBe(11);
    // 3 rows run the 4-row graph: 5 + 8 x (1 - 1/16) = 5 + 7.5 = 12.5 ms; the shortcut agrees.
    expect(model.step({ ...EMPTY_STEP, decodeRows: 3, decodeKvTokens: 30 }).decodeMs).toBe(12.5);
    expect(model.decodeOnlyMs?.(3, 30)).toBe(12.5);
  });

  it("counts a mixed step's decode rows and prompt tokens, and reports the term as decode time", () => {
    const model = createTimingModel({ type: "linear", ...base, experts }, linear(), engineSettings());
    // 1 decode row + a 2-token chunk = 3 tokens: 5 + 8 x (1 - 1/8) = 12 ms of decode time; the
    // prompt part is 100 x 2 / 1,000 = 0.2 ms.
    const t = model.step({ ...EMPTY_STEP, decodeRows: 1, decodeKvTokens: 10, promptRows: 1, promptTokens: 2 });
    expect(t.decodeMs).toBe(12);
    expect(t.prefillMs).toBeCloseTo(0.2, 12);
  });

  it("counts every lockstep rank's tokens with expert parallelism, and only then", () => {
    const engine = { data_parallel_size: 2, cudagraph_capture_sizes: [1, 2, 4] };
    const ep = createTimingModel({ type: "linear", ...base, experts }, linear(), engineSettings({ ...engine, enable_expert_parallel: true }));
    const dense = createTimingModel({ type: "linear", ...base, experts }, linear(), engineSettings(engine));
    // 1 row on each of 2 ranks reaches this rank's experts as 2 tokens: 5 + 8 x 3/4 = 11 ms;
    // without expert parallelism a rank sees only its own token: 5 + 8 x 1/2 = 9 ms.
    expect(ep.step({ ...EMPTY_STEP, decodeRows: 1, decodeKvTokens: 10 }).decodeMs).toBe(11);
    expect(ep.decodeOnlyMs?.(1, 10)).toBe(11);
    expect(dense.step({ ...EMPTY_STEP, decodeRows: 1, decodeKvTokens: 10 }).decodeMs).toBe(9);
  });

  it("is today's linear model when absent or when all_experts_ms is 0", () => {
    const without = createTimingModel({ type: "linear", ...base }, linear(), engineSettings());
    const zero = createTimingModel({ type: "linear", ...base, experts: { ...experts, all_experts_ms: 0 } }, linear(), engineSettings());
    const batch = { ...EMPTY_STEP, decodeRows: 2, decodeKvTokens: 20 };
    expect(without.step(batch).decodeMs).toBe(5);
    expect(zero.step(batch).decodeMs).toBe(5);
  });
});

describe("expertShareTouched", () => {
  it("is 1 - (1 - k/E)^tokens, 0 for no tokens, and reaches 1 when every token takes every expert", () => {
    // 128 experts, top 8: 1 token touches 8/128 = 1/16 of them; 2 tokens 1 - (15/16)^2 = 31/256.
    expect(expertShareTouched(1, 128, 8)).toBeCloseTo(1 / 16, 15);
    expect(expertShareTouched(2, 128, 8)).toBeCloseTo(31 / 256, 15);
    expect(expertShareTouched(0, 128, 8)).toBe(0);
    expect(expertShareTouched(3, 8, 8)).toBe(1);
  });
});

describe("paddedBatchSize", () => {
  it("rounds up to the next capture size and leaves sizes above the largest alone", () => {
    const sizes = [1, 2, 4, 8, 16, 24];
    expect([1, 2, 3, 5, 8, 9, 17, 24, 25].map((n) => paddedBatchSize(n, sizes))).toEqual([1, 2, 4, 8, 8, 16, 24, 24, 25]);
    expect(paddedBatchSize(7, undefined)).toBe(7);
  });
});
