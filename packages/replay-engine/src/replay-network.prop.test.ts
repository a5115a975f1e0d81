import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { runReplay, type ReplayResult } from "./replay.js";
import type { RequestRecord } from "./report.js";
import { byLength, linearProfile, traceSpec } from "./test-fixtures.js";

const requestsArb = (maxGapMs: number) =>
  fc.array(fc.record({ gapMs: fc.integer({ min: 0, max: maxGapMs }), input: fc.integer({ min: 1, max: 40 }), output: fc.integer({ min: 1, max: 4 }) }), {
    minLength: 1,
    maxLength: 12,
  });

function records(reqs: readonly { gapMs: number; input: number; output: number }[]) {
  let t = 0;
  return reqs.map((r, i) => {
    t += r.gapMs;
    return byLength(i + 1, t, r.input, r.output);
  });
}

function ok(r: ReplayResult): Extract<ReplayResult, { ok: true }> {
  if (!r.ok) throw new Error(`no progress: ${r.reason}`);
  return r;
}

// 10^5 B/token at 1 GB/s: a 40-token prompt moves in 4 ms. Fixed 3 / 1 ms passes.
const spec = (prefill: number, decode: number, kvTransfer: Record<string, unknown>) =>
  traceSpec({
    profile: linearProfile(100_000),
    topology: { kind: "disaggregated", prefill: { workers: prefill }, decode: { workers: decode } },
    engine: { num_gpu_blocks: 64, block_size: 4, max_num_seqs: 4, max_num_batched_tokens: 64 },
    timing: { type: "fixed", prefill_ms: 3, decode_ms: 1 },
    kv_transfer: { mode: "full_prompt", ...kvTransfer },
  });

const le = (a: number | null | undefined, b: number | null | undefined) => a === null || a === undefined || b === null || b === undefined || a <= b;

function checkTransferCausality(r: RequestRecord): void {
  const h = r.handoff!;
  expect(le(h.destination_reserved_ms, h.transfer_start_ms)).toBe(true);
  expect(le(h.transfer_start_ms, h.transfer_first_byte_ms)).toBe(true);
  expect(le(h.transfer_first_byte_ms, h.transfer_end_ms)).toBe(true);
  expect(h.transfer_end_ms).toBe(h.destination_activated_ms);
  expect(le(h.destination_activated_ms, r.first_token_ms)).toBe(true);
}

describe("P/D replay on a shared network, random traces", () => {
  it("completes every request causally, deterministically, and never faster than the private pipe", async () => {
    await fc.assert(
      fc.asyncProperty(
        requestsArb(6),
        fc.integer({ min: 1, max: 2 }),
        fc.integer({ min: 1, max: 2 }),
        fc.option(fc.integer({ min: 1, max: 2 }), { nil: undefined }),
        fc.constantFrom(0, 0.5),
        async (reqs, p, d, limit, setup) => {
          const network = { nic: { send: "1 GB/s", receive: "1 GB/s" }, ...(limit === undefined ? {} : { max_concurrent_transfers: limit }) };
          const s = spec(p, d, { network, setup_latency_ms: setup });
          const a = ok(await runReplay({ spec: s, records: records(reqs) }));
          expect(a.report.completed_requests).toBe(reqs.length);
          expect(a.report.handoffs.completed).toBe(reqs.length);
          for (const r of a.records) {
            checkTransferCausality(r);
            // No transfer beats its bytes alone on the NIC plus the setup.
            expect(r.handoff!.delay_ms!).toBeGreaterThanOrEqual(setup + r.handoff!.payload_bytes! / 1e6 - 1e-9);
          }
          const b = ok(await runReplay({ spec: s, records: records(reqs) }));
          expect(b.report.digest).toBe(a.report.digest);
        },
      ),
      { numRuns: 50 },
    );
  });

  it("with one transfer at a time gives the private pipe's latencies", async () => {
    await fc.assert(
      fc.asyncProperty(requestsArb(0), fc.constantFrom(0, 0.5), async (reqs, setup) => {
        // Requests 1,000 ms apart: each is done long before the next arrives.
        const spaced = records(reqs.map((r) => ({ ...r, gapMs: 1000 })));
        const pipe = ok(await runReplay({ spec: spec(1, 1, { bandwidth_gbps: 1, setup_latency_ms: setup }), records: spaced }));
        const net = ok(
          await runReplay({ spec: spec(1, 1, { network: { nic: { send: "1 GB/s", receive: "1 GB/s" } }, setup_latency_ms: setup }), records: spaced }),
        );
        expect(net.records.map((r) => [r.first_token_ms, r.last_token_ms])).toStrictEqual(pipe.records.map((r) => [r.first_token_ms, r.last_token_ms]));
        const rest = (r: object) => Object.fromEntries(Object.entries(r).filter(([k]) => !["handoffs", "network", "digest"].includes(k)));
        expect(rest(net.report)).toStrictEqual(rest(pipe.report));
      }),
      { numRuns: 30 },
    );
  });
});
