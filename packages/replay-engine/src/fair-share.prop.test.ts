import { delayMsForBytes } from "@kvsim/transfer-rules";
import { bytes as asBytes } from "@kvsim/profile-schema";
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { FairShareNetwork, type Flow } from "./fair-share.js";

/** Relative slack for floating-point sums of rates. */
const EPS = 1e-9;

interface Scenario {
  readonly capacities: readonly number[];
  readonly flows: readonly { readonly gapMs: number; readonly links: readonly number[]; readonly bytes: number }[];
}

const scenarioArb: fc.Arbitrary<Scenario> = fc.record({
  capacities: fc.array(fc.integer({ min: 1, max: 1000 }), { minLength: 1, maxLength: 6 }),
  flows: fc.array(
    fc.record({
      gapMs: fc.integer({ min: 0, max: 20 }),
      links: fc.uniqueArray(fc.nat(), { minLength: 1, maxLength: 3 }),
      bytes: fc.integer({ min: 0, max: 50_000 }),
    }),
    { minLength: 1, maxLength: 25 },
  ),
});

interface Tracked {
  readonly flow: Flow<number>;
  readonly startMs: number;
  /** Bytes moved so far by integrating the rate between events. */
  moved: number;
  finishMs: number | undefined;
}

/**
 * Runs a scenario event by event (flow starts and finishes), checking the invariants after every
 * instant and integrating every flow's rate over the time to the next instant.
 */
function run(scenario: Scenario, scanLinksUpTo?: number): Tracked[] {
  const net = new FairShareNetwork<number>(scanLinksUpTo === undefined ? {} : { scanLinksUpTo });
  for (const c of scenario.capacities) net.addLink(c);
  const n = scenario.capacities.length;
  const starts: { at: number; links: number[]; bytes: number }[] = [];
  let t = 0;
  for (const f of scenario.flows) {
    t += f.gapMs;
    starts.push({ at: t, links: [...new Set(f.links.map((l) => l % n))], bytes: f.bytes });
  }
  const tracked: Tracked[] = [];
  const active = new Set<Tracked>();
  let next = 0;
  let now = 0;
  for (;;) {
    while (next < starts.length && starts[next]!.at === now) {
      const s = starts[next]!;
      const tr: Tracked = { flow: net.start(now, s.links, s.bytes, next), startMs: now, moved: 0, finishMs: undefined };
      tracked.push(tr);
      active.add(tr);
      next++;
    }
    for (let f = net.popFinished(now); f !== undefined; f = net.popFinished(now)) {
      const tr = tracked[f.payload]!;
      tr.finishMs = now;
      active.delete(tr);
    }
    checkInvariants(
      net,
      n,
      [...active].map((a) => a.flow),
    );
    const candidates = [net.nextFinishMs(), starts[next]?.at].filter((x): x is number => x !== undefined);
    if (candidates.length === 0) break;
    const to = Math.min(...candidates);
    for (const a of active) a.moved += net.rateOf(a.flow) * (to - now);
    now = to;
  }
  return tracked;
}

function checkInvariants(net: FairShareNetwork<number>, links: number, active: readonly Flow<number>[]): void {
  const load = new Array<number>(links).fill(0);
  const top = new Array<number>(links).fill(0);
  for (const f of active) {
    const r = net.rateOf(f);
    expect(r).toBeGreaterThan(0);
    for (const l of f.links) {
      load[l]! += r;
      top[l] = Math.max(top[l]!, r);
    }
  }
  // No link carries more than its capacity.
  for (let l = 0; l < links; l++) expect(load[l]!).toBeLessThanOrEqual(net.capacityOf(l) * (1 + EPS));
  // Max-min fairness: every flow crosses a saturated link on which no flow is faster than it.
  for (const f of active) {
    const r = net.rateOf(f);
    const bottleneck = f.links.some((l) => load[l]! >= net.capacityOf(l) * (1 - EPS) && r >= top[l]! * (1 - EPS));
    expect(bottleneck).toBe(true);
  }
}

describe("FairShareNetwork properties", () => {
  it("never loads a link beyond its capacity, limits every flow by a saturated link, and conserves bytes", () => {
    fc.assert(
      fc.property(scenarioArb, (scenario) => {
        const tracked = run(scenario);
        for (const tr of tracked) {
          // Every flow finishes, after it started, having moved exactly its bytes.
          expect(tr.finishMs).toBeDefined();
          expect(tr.finishMs!).toBeGreaterThanOrEqual(tr.startMs);
          expect(Math.abs(tr.moved - tr.flow.bytes)).toBeLessThanOrEqual(1e-6 * Math.max(1, tr.flow.bytes));
        }
      }),
    );
  });

  it("finds the same rates by scanning and with the heap", () => {
    fc.assert(
      fc.property(scenarioArb, (scenario) => {
        // Every component scanned, then every component through the heap (and its invariants).
        const scanned = run(scenario, Infinity);
        const heaped = run(scenario, 0);
        heaped.forEach((h, i) => {
          expect(h.finishMs).toBeCloseTo(scanned[i]!.finishMs!, 6);
        });
      }),
    );
  });

  it("with one transfer at a time equals the private-pipe delay of transfer-rules", () => {
    fc.assert(
      fc.property(
        fc.array(
          fc.record({
            gbps: fc.double({ min: 0.001, max: 1000, noNaN: true }),
            bytes: fc.integer({ min: 0, max: 2 ** 40 }),
            idleMs: fc.double({ min: 0, max: 100, noNaN: true }),
          }),
          { minLength: 1, maxLength: 10 },
        ),
        (transfers) => {
          // One send link and one receive link per bandwidth, as a NIC pair; GB/s x 10^6 = B/ms.
          const net = new FairShareNetwork<number>();
          let now = 0;
          transfers.forEach((tr, i) => {
            const send = net.addLink(tr.gbps * 1e6);
            const receive = net.addLink(tr.gbps * 1e6);
            now += tr.idleMs;
            net.start(now, [send, receive], tr.bytes, i);
            const end = net.nextFinishMs()!;
            expect(end).toBe(now + delayMsForBytes(asBytes(tr.bytes), tr.gbps));
            expect(net.popFinished(end)?.payload).toBe(i);
            now = end;
          });
        },
      ),
    );
  });
});
