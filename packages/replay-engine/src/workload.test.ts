import { InputError, type TraceRecord } from "@kvsim/profile-schema";
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { HashIdInterner, LineSet, lengthOnlyTokens, lowerTrace, seededGenerator, syntheticRequests, TokenArena, type ReplayRequest } from "./workload.js";

async function collect(it: AsyncIterable<ReplayRequest>): Promise<ReplayRequest[]> {
  const out: ReplayRequest[] = [];
  for await (const r of it) out.push(r);
  return out;
}

const rec = (line: number, arrivalMs: number, extra: Partial<TraceRecord> = {}): TraceRecord => ({
  line,
  arrivalMs,
  inputTokens: 4,
  outputTokens: 2,
  ...extra,
});
const opts = { traceBlockSize: 4, speedup: 1, file: "t.jsonl" };

describe("Mooncake hash ids to tokens", () => {
  it("docs/rules/replay.md §2.3 vector: ids [100, 200, 100], block 4, input 10 -> [0,0,0,0,1,1,1,1,0,0]", () => {
    expect(Array.from(new HashIdInterner().tokens([100, 200, 100], 10, 4))).toEqual([0, 0, 0, 0, 1, 1, 1, 1, 0, 0]);
  });
  it("interns in first-appearance order across requests: a later request reuses the same canonical ids", () => {
    const i = new HashIdInterner();
    i.tokens([7, 9], 4, 2); // 7 -> 0, 9 -> 1
    expect(Array.from(i.tokens([9, 8], 3, 2))).toEqual([1, 1, 2]); // 9 is 1, 8 is new -> 2; last block cut to 1 token
  });
});

describe("HashIdInterner at scale", () => {
  it("2,000 small ids (32-bit table, grown twice), then ids past 2^32 - 2: every id keeps its number", () => {
    const i = new HashIdInterner();
    const small = Array.from({ length: 2000 }, (_, k) => k * 7);
    // Canonical numbers 0..1,999 in order.
    expect(Array.from(i.canonical(small, 2000, 1))).toEqual(small.map((_, k) => k));
    // 2^32 - 1 is the 32-bit table's empty mark and 2^32 does not fit: the table widens; both are new (2,000, 2,001).
    expect(Array.from(i.canonical([2 ** 32 - 1, 7, 2 ** 32, 0, 13_993], 5, 1))).toEqual([2000, 1, 2001, 0, 1999]);
    expect(Array.from(i.canonical([2 ** 32, 2 ** 32 - 1, 5], 3, 1))).toEqual([2001, 2000, 2002]);
  });
  it("ids 0..9,999 in order, then ids up to and past 4 x (ids so far + 4,096): every id keeps its number", () => {
    const first = Array.from({ length: 10_000 }, (_, k) => k);
    const i = new HashIdInterner();
    // Dense ids (the direct array, grown from 1,024 to 16,384 entries): id k is number k.
    expect(Array.from(i.canonical(first, 10_000, 1))).toEqual(first);
    // 56,383 < 4 x (10,000 + 4,096) = 56,384: the array grows to 65,536 (number 10,000); 60,000 is
    // inside it (10,001); 100,000 is past it and past 4 x (10,002 + 4,096) = 56,392: the ids move to
    // the table, numbered again in order (100,000 is 10,002; 7, 60,000 and 9,999 keep theirs).
    expect(Array.from(i.canonical([56_383, 60_000, 100_000, 7, 60_000, 9_999], 6, 1))).toEqual([10_000, 10_001, 10_002, 7, 10_001, 9_999]);
    // 56,384 is not below 56,384: straight to the table (10,000); 5 keeps 5.
    const j = new HashIdInterner();
    j.canonical(first, 10_000, 1);
    expect(Array.from(j.canonical([56_384, 5, 56_384], 3, 1))).toEqual([10_000, 5, 10_000]);
  });
  it("a negative or fractional id is interned like any other (in the table), numbers kept", () => {
    const i = new HashIdInterner();
    // 3 -> 0, 1 -> 1 (dense), -2 moves them to the table: 2, then 0.5 -> 3.
    expect(Array.from(i.canonical([3, 1, -2, 0.5, 3, -2, 1], 7, 1))).toEqual([0, 1, 2, 3, 0, 2, 1]);
  });
  it("3,000 distinct ids up to 2^52 (past its first table) keep their first-appearance numbers", () => {
    const i = new HashIdInterner();
    const ids = Array.from({ length: 3000 }, (_, k) => (k % 2 === 0 ? k : 2 ** 52 - k));
    // One id per 1-token block: canonical id k for the k-th new id.
    expect(Array.from(i.canonical(ids, 3000, 1))).toEqual(ids.map((_, k) => k));
    // Seen again (reversed), the same numbers.
    expect(Array.from(i.canonical([...ids].reverse(), 3000, 1))).toEqual(ids.map((_, k) => 2999 - k));
  });
});

describe("TokenArena", () => {
  it("carves consecutive arrays from one chunk and starts a new chunk when one is full", () => {
    const arena = new TokenArena(16);
    const a = arena.alloc(3);
    const b = arena.alloc(1);
    const c = arena.alloc(2); // 3 + 1 + 2 = 6 tokens: all in the first 16-token chunk
    a.fill(1);
    b.fill(2);
    c.fill(3);
    expect([Array.from(a), Array.from(b), Array.from(c)]).toEqual([[1, 1, 1], [2], [3, 3]]);
    expect(a.buffer).toBe(c.buffer);
    expect([a.byteOffset, b.byteOffset, c.byteOffset]).toEqual([0, 12, 16]);
  });
  it("gives an array longer than a quarter chunk its own buffer (16 / 4 = 4 < 5)", () => {
    const arena = new TokenArena(16);
    const small = arena.alloc(4);
    const big = arena.alloc(5);
    expect(big.buffer).not.toBe(small.buffer);
    expect(big.length).toBe(5);
  });
  it("opens a new chunk when the rest of the current one is too short (4 + 4 + 4 + 4 = 16, then 1 more)", () => {
    const arena = new TokenArena(16);
    const first = arena.alloc(4);
    arena.alloc(4);
    arena.alloc(4);
    arena.alloc(4);
    const next = arena.alloc(1);
    expect(next.buffer).not.toBe(first.buffer);
    expect(next.byteOffset).toBe(0);
  });
});

describe("length-only tokens", () => {
  it("request 0 counts from 0; request 3 from 3 x 1,000,003 = 3,000,009", () => {
    expect(Array.from(lengthOnlyTokens(0, 3))).toEqual([0, 1, 2]);
    expect(Array.from(lengthOnlyTokens(3, 2))).toEqual([3_000_009, 3_000_010]);
  });
  it("wraps mod 2^32: index 5,000 -> 5,000 x 1,000,003 = 5,000,015,000 - 4,294,967,296 = 705,047,704", () => {
    expect(lengthOnlyTokens(5000, 1)[0]).toBe(705_047_704);
  });
});

describe("lowerTrace", () => {
  it("normalises arrivals: first -> 0, divided by speedup (file times 1000, 1010, 1030 at speedup 2 -> 0, 5, 15)", async () => {
    const out = await collect(lowerTrace([rec(1, 1000), rec(2, 1010), rec(3, 1030)], { ...opts, speedup: 2 }));
    expect(out.map((r) => r.arrivalMs)).toEqual([0, 5, 15]);
    expect(out.map((r) => r.id)).toEqual(["trace-1", "trace-2", "trace-3"]);
    expect(out.map((r) => r.index)).toEqual([0, 1, 2]);
  });
  it("uses token ids as given, hash ids through the interner, and length-only tokens otherwise", async () => {
    const out = await collect(
      lowerTrace(
        [
          rec(1, 0, { inputTokenIds: Uint32Array.from([5, 6, 7, 8]) }),
          rec(2, 0, { hashIds: [42, 43], inputTokens: 5 }),
          rec(3, 0, { requestId: "r3", inputTokens: 2 }),
        ],
        opts,
      ),
    );
    expect(Array.from(out[0]!.tokens)).toEqual([5, 6, 7, 8]);
    expect(Array.from(out[1]!.tokens)).toEqual([0, 0, 0, 0, 1]);
    // index 2: seed 2 x 1,000,003 = 2,000,006
    expect(Array.from(out[2]!.tokens)).toEqual([2_000_006, 2_000_007]);
    expect(out[2]!.id).toBe("r3");
  });
  it("refuses a duplicate request id, naming the file and line", async () => {
    const bad = lowerTrace([rec(1, 0, { requestId: "a" }), rec(2, 0, { requestId: "a" })], opts);
    await expect(collect(bad)).rejects.toThrow(InputError);
    await expect(collect(lowerTrace([rec(1, 0, { requestId: "a" }), rec(2, 0, { requestId: "a" })], opts))).rejects.toThrow(
      /t\.jsonl:2: request_id: duplicate request id "a"/,
    );
  });
  it("a given id equal to a made one (trace-<line>) is a duplicate, either way round", async () => {
    // Line 2 has no id: it is "trace-2"; line 3 says "trace-2".
    await expect(collect(lowerTrace([rec(2, 0), rec(3, 0, { requestId: "trace-2" })], opts))).rejects.toThrow(
      /t\.jsonl:3: request_id: duplicate request id "trace-2"/,
    );
    // Line 1 says "trace-4"; line 4 has no id.
    await expect(collect(lowerTrace([rec(1, 0, { requestId: "trace-4" }), rec(4, 0)], opts))).rejects.toThrow(
      /t\.jsonl:4: request_id: duplicate request id "trace-4"/,
    );
    // "trace-02" is not "trace-2": no duplicate.
    expect((await collect(lowerTrace([rec(2, 0), rec(3, 0, { requestId: "trace-02" })], opts))).map((r) => r.id)).toEqual(["trace-2", "trace-02"]);
  });
  it("finds the same duplicates as a set of the ids (property, fixed seed)", () => {
    // Lines: integers in and out of order, repeats, -0, fractions, NaN; given ids that may spell a made one.
    const line = fc.oneof(fc.integer({ min: 0, max: 12 }), fc.constantFrom(-0, 1.5, Number.NaN, 1e21, -3));
    const given = fc.constantFrom("trace-0", "trace-3", "trace-03", "trace-1.5", "trace-NaN", "trace-1e+21", "trace--3", "a", "trace-");
    fc.assert(
      fc.property(fc.array(fc.record({ line, id: fc.option(given) }), { maxLength: 30 }), (items) => {
        const ids = new Set<string>();
        const seen = new Set<string>();
        const lines = new LineSet();
        for (const { line: l, id } of items) {
          const name = id ?? `trace-${l}`;
          const expected = ids.has(name);
          ids.add(name);
          // The check lowerTrace makes.
          const got = id === null ? lines.has(l) || seen.has(name) : seen.has(name) || lines.hasId(name);
          expect(got).toBe(expected);
          if (id === null) lines.add(l);
          else seen.add(name);
        }
      }),
      { seed: 3131, numRuns: 500 },
    );
  });
  it("refuses an arrival earlier than the previous one", async () => {
    await expect(collect(lowerTrace([rec(1, 10), rec(2, 9)], opts))).rejects.toThrow(/t\.jsonl:2: arrival: .*sorted by time/);
  });
  it("refuses hash ids that cannot cover the input (2 ids x 4 = 8 < 9)", async () => {
    await expect(collect(lowerTrace([rec(5, 0, { hashIds: [1, 2], inputTokens: 9 })], opts))).rejects.toThrow(
      /t\.jsonl:5: hash_ids: .*8 tokens, fewer than input_length 9/,
    );
  });
  it("reads lazily: a bad later record does not stop the first one from being yielded", async () => {
    const it = lowerTrace([rec(1, 0), rec(2, -1)], opts)[Symbol.asyncIterator]();
    expect((await it.next()).value?.id).toBe("trace-1");
    await expect(it.next()).rejects.toThrow(/sorted by time/);
  });
});

describe("syntheticRequests", () => {
  const base = { requests: 4, input_tokens: 10, output_tokens: 3, seed: 7, shared_prefix_ratio: 0.5 };
  it("without a rate every request arrives at 0; ids synthetic-<i>; fixed lengths", () => {
    const out = [...syntheticRequests(base)];
    expect(out.map((r) => r.arrivalMs)).toEqual([0, 0, 0, 0]);
    expect(out.map((r) => r.id)).toEqual(["synthetic-0", "synthetic-1", "synthetic-2", "synthetic-3"]);
    expect(out.every((r) => r.tokens.length === 10 && r.outputTokens === 3)).toBe(true);
  });
  it("shares floor(10 x 0.5) = 5 prefix tokens; the rest are the request's length-only tokens", () => {
    const [a, b] = [...syntheticRequests(base)];
    expect(Array.from(a!.tokens.subarray(0, 5))).toEqual(Array.from(b!.tokens.subarray(0, 5)));
    expect(Array.from(a!.tokens.subarray(5))).toEqual([0, 1, 2, 3, 4]);
    expect(Array.from(b!.tokens.subarray(5))).toEqual([1_000_003, 1_000_004, 1_000_005, 1_000_006, 1_000_007]);
  });
  it("Poisson arrivals: first at 0, non-decreasing, the same for the same seed and different for another", () => {
    const arrivals = (seed: number) => [...syntheticRequests({ ...base, requests: 50, rate_per_s: 10, seed })].map((r) => r.arrivalMs);
    const a = arrivals(1);
    expect(a[0]).toBe(0);
    expect(a.every((t, i) => i === 0 || t >= a[i - 1]!)).toBe(true);
    expect(arrivals(1)).toEqual(a);
    expect(arrivals(2)).not.toEqual(a);
  });
});

/**
 * Kolmogorov-Smirnov statistic of `sample` against the exponential law of mean `mean`:
 * D = max over the sorted sample of max(F(x_i) - i / n, (i + 1) / n - F(x_i)), F(x) = 1 - e^(-x / mean).
 */
function ksExponential(sample: readonly number[], mean: number): number {
  const xs = [...sample].sort((a, b) => a - b);
  const n = xs.length;
  let d = 0;
  xs.forEach((x, i) => {
    const f = 1 - Math.exp(-x / mean);
    d = Math.max(d, f - i / n, (i + 1) / n - f);
  });
  return d;
}
/** The KS critical value at the 0.1 % level for n draws (large-n form): 1.949 / sqrt(n). */
const ksCritical = (n: number) => 1.949 / Math.sqrt(n);

describe("synthetic arrivals are Poisson for every seed, small ones included", () => {
  const gaps = (seed: number, requests: number, rate: number) => {
    const t = [...syntheticRequests({ requests, input_tokens: 1, output_tokens: 1, rate_per_s: rate, seed, shared_prefix_ratio: 0 })].map((r) => r.arrivalMs);
    return t.slice(1).map((x, i) => x - t[i]!);
  };

  it("the generator's state comes from SplitMix64 (published vector for seed 0: e220a8397b1dcdaf, 6e789e6aa1b965f4)", () => {
    const state = (seededGenerator(0) as unknown as { getState(): number[] }).getState().map((w) => (w >>> 0).toString(16).padStart(8, "0"));
    expect(state).toEqual(["e220a839", "7b1dcdaf", "6e789e6a", "a1b965f4"]);
  });

  it("the first gap over seeds 0..399 at 1 req/s follows Exp(mean 1,000 ms): KS D below 1.949 / sqrt(400) = 0.0975", () => {
    // Seeding the state with the seed itself made every small seed's first gap 8 to 26 times the mean.
    const first = Array.from({ length: 400 }, (_, seed) => gaps(seed, 2, 1)[0]!);
    expect(ksExponential(first, 1000)).toBeLessThan(ksCritical(400));
    // Seed 1's first gap was 17,903 ms; 1 - e^(-x / 1000) of a uniform draw is above 10 s once in e^10 (22,026) seeds.
    expect(Math.max(...first.slice(0, 10))).toBeLessThan(10_000);
  });

  it("99 gaps each of seeds 0..99 at 20 req/s: mean 50 ms within 3 sigma (50 / sqrt(9,900) = 0.503 ms each) and KS D below 1.949 / sqrt(9,900) = 0.0196", () => {
    const all = Array.from({ length: 100 }, (_, seed) => gaps(seed, 100, 20)).flat();
    expect(all).toHaveLength(9_900);
    const mean = all.reduce((s, x) => s + x, 0) / all.length;
    expect(Math.abs(mean - 50)).toBeLessThan(3 * 0.503);
    expect(ksExponential(all, 50)).toBeLessThan(ksCritical(9_900));
  });

  it("the first draws of seeds 0..999 are uniform on [0, 1): KS against U(0, 1) below 1.949 / sqrt(1,000) = 0.0616", async () => {
    const { uniformFloat64 } = await import("pure-rand/distribution/uniformFloat64");
    const u = Array.from({ length: 1000 }, (_, seed) => uniformFloat64(seededGenerator(seed))).sort((a, b) => a - b);
    const d = Math.max(...u.map((x, i) => Math.max(x - i / u.length, (i + 1) / u.length - x)));
    expect(d).toBeLessThan(ksCritical(1000));
  });
});

describe("Mooncake prompts", () => {
  it("lowerTrace hands Mooncake requests a prompt over their tokens", async () => {
    const [r] = await collect(lowerTrace([rec(1, 0, { inputTokens: 6, hashIds: [100, 200] })], opts));
    // Canonical ids 0 and 1, 4 tokens each, cut at 6: 0 0 0 0 1 1.
    expect(Array.from(r!.prompt!.tokens)).toEqual([0, 0, 0, 0, 1, 1]);
    expect(r!.prompt!.tokens).toBe(r!.tokens);
  });
});
