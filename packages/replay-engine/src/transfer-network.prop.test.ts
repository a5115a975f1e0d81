import type { Network } from "@kvsim/profile-schema";
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { TransferNetwork, type NetworkTransfer } from "./transfer-network.js";

interface Req {
  readonly gapMs: number;
  readonly src: number;
  readonly dst: number;
  readonly bytes: number;
}

const scenarioArb = fc.record({
  prefill: fc.integer({ min: 1, max: 3 }),
  decode: fc.integer({ min: 1, max: 3 }),
  limit: fc.option(fc.integer({ min: 1, max: 3 }), { nil: undefined }),
  setupMs: fc.constantFrom(0, 0.25, 2),
  requests: fc.array(fc.record({ gapMs: fc.integer({ min: 0, max: 5 }), src: fc.nat(), dst: fc.nat(), bytes: fc.integer({ min: 0, max: 5e6 }) }), {
    minLength: 1,
    maxLength: 30,
  }),
});

describe("TransferNetwork properties", () => {
  it("finishes every transfer, serves each NIC in arrival order and never runs more than the limit on a NIC", () => {
    fc.assert(
      fc.property(scenarioArb, (s) => {
        const network: Network = { nic: { send: 1e9, receive: 2e9 }, ...(s.limit === undefined ? {} : { max_concurrent_transfers: s.limit }) };
        const net = new TransferNetwork<number>(network, s.setupMs, s.prefill, s.decode);
        const reqs: (Req & { at: number })[] = [];
        let at = 0;
        for (const r of s.requests) {
          at += r.gapMs;
          reqs.push({ ...r, src: r.src % s.prefill, dst: r.dst % s.decode, at });
        }
        const views: NetworkTransfer[] = [];
        let next = 0;
        let now = 0;
        for (;;) {
          while (next < reqs.length && reqs[next]!.at === now) {
            const r = reqs[next]!;
            views.push(net.request(now, next, r.src, r.dst, r.bytes));
            next++;
          }
          net.settle(now);
          const t = [net.nextTimeMs(), reqs[next]?.at].filter((x): x is number => x !== undefined);
          if (t.length === 0) break;
          now = Math.min(...t);
        }
        views.forEach((v, i) => {
          expect(v.endMs).toBeDefined();
          expect(v.startMs!).toBeGreaterThanOrEqual(v.requestedMs);
          expect(v.firstByteMs! - v.startMs!).toBeCloseTo(s.setupMs, 12);
          // No faster than alone at the tighter of its two NICs (10^6 B/ms sending).
          expect(v.endMs! - v.firstByteMs!).toBeGreaterThanOrEqual(reqs[i]!.bytes / 1e6 - 1e-9);
        });
        if (s.limit === undefined) {
          for (const v of views) expect(v.startMs).toBe(v.requestedMs);
          return;
        }
        const nics = [...reqs.map((r) => `p${r.src}`), ...reqs.map((r) => `d${r.dst}`)];
        for (const nic of new Set(nics)) {
          const mine = views.filter((_, i) => `p${reqs[i]!.src}` === nic || `d${reqs[i]!.dst}` === nic);
          // Arrival order: start times never decrease along the request order.
          for (let k = 1; k < mine.length; k++) expect(mine[k]!.startMs!).toBeGreaterThanOrEqual(mine[k - 1]!.startMs!);
          // At every start, at most `limit` transfers on this NIC have started and not ended.
          for (const v of mine) {
            const running = mine.filter((w) => w.startMs! <= v.startMs! && w.endMs! > v.startMs!).length;
            expect(running).toBeLessThanOrEqual(s.limit);
          }
        }
      }),
    );
  });
});
