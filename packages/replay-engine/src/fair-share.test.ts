import { describe, expect, it } from "vitest";
import { FairShareNetwork, type Flow } from "./fair-share.js";

/** Pops every flow finishing at or before `now`, returning their payloads. */
function drain<T>(net: FairShareNetwork<T>, now: number): T[] {
  const out: T[] = [];
  for (let f = net.popFinished(now); f !== undefined; f = net.popFinished(now)) out.push(f.payload);
  return out;
}

/** Runs the network until no flow is left; returns each payload's finish time. */
function finishTimes<T>(net: FairShareNetwork<T>): Map<T, number> {
  const out = new Map<T, number>();
  for (let t = net.nextFinishMs(); t !== undefined; t = net.nextFinishMs()) for (const p of drain(net, t)) out.set(p, t);
  return out;
}

describe("FairShareNetwork", () => {
  it("a flow alone takes bytes / capacity", () => {
    const net = new FairShareNetwork<string>();
    const link = net.addLink(10); // 10 B/ms
    net.start(0, [link], 100, "a");
    expect(finishTimes(net)).toStrictEqual(new Map([["a", 10]])); // 100 / 10
  });

  it("two equal flows starting together on one link each take twice as long as one alone", () => {
    const net = new FairShareNetwork<string>();
    const link = net.addLink(10);
    const a = net.start(0, [link], 100, "a");
    const b = net.start(0, [link], 100, "b");
    expect(net.rateOf(a)).toBe(5); // 10 / 2
    expect(net.rateOf(b)).toBe(5);
    // Alone: 100 / 10 = 10 ms; shared: 100 / 5 = 20 ms each.
    expect(finishTimes(net)).toStrictEqual(
      new Map([
        ["a", 20],
        ["b", 20],
      ]),
    );
  });

  it("a short flow that starts while a long one runs finishes when its share says, and delays the long one by its bytes", () => {
    const net = new FairShareNetwork<string>();
    const link = net.addLink(10);
    net.start(0, [link], 200, "long"); // alone it would end at 20
    expect(net.nextFinishMs()).toBe(20);
    const short = net.start(5, [link], 30, "short");
    // At 5 the long flow has 200 - 5 x 10 = 150 B left; both now get 5 B/ms.
    expect(net.rateOf(short)).toBe(5);
    // The short one: 30 / 5 = 6 ms -> ends at 11. The long one has 150 - 6 x 5 = 120 B left at 11,
    // alone again at 10 B/ms: 12 ms more -> 23 = 20 + 30 / 10.
    expect(finishTimes(net)).toStrictEqual(
      new Map([
        ["short", 11],
        ["long", 23],
      ]),
    );
  });

  it("a receiving link shared by two senders halves each flow", () => {
    const net = new FairShareNetwork<string>();
    const p0 = net.addLink(10);
    const p1 = net.addLink(10);
    const d0 = net.addLink(10);
    const a = net.start(0, [p0, d0], 100, "p0->d0");
    const b = net.start(0, [p1, d0], 100, "p1->d0");
    expect([net.rateOf(a), net.rateOf(b)]).toStrictEqual([5, 5]); // d0's 10 B/ms over 2 flows
    expect(finishTimes(net)).toStrictEqual(
      new Map([
        ["p0->d0", 20],
        ["p1->d0", 20],
      ]),
    );
  });

  it("gives a flow the capacity a tighter link leaves unused (max-min, not equal split)", () => {
    const net = new FairShareNetwork<string>();
    const a = net.addLink(10);
    const b = net.addLink(4);
    const f1 = net.start(0, [a], 100, "f1");
    const f2 = net.start(0, [a, b], 100, "f2");
    const f3 = net.start(0, [b], 100, "f3");
    // b is the bottleneck: 4 / 2 = 2 each for f2 and f3; a has 10 - 2 = 8 left for f1.
    expect([net.rateOf(f1), net.rateOf(f2), net.rateOf(f3)]).toStrictEqual([8, 2, 2]);
    // f1 ends at 100 / 8 = 12.5; a then has only f2, still held to 2 by b: no change for f2 and f3
    // (both at 2 B/ms since 0, 100 B -> 50 ms).
    expect(finishTimes(net)).toStrictEqual(
      new Map([
        ["f1", 12.5],
        ["f2", 50],
        ["f3", 50],
      ]),
    );
  });

  it("leaves flows of an unconnected component untouched", () => {
    const net = new FairShareNetwork<string>();
    const x = net.addLink(10);
    const y = net.addLink(10);
    const lone = net.start(0, [x], 100, "lone");
    expect(net.nextFinishMs()).toBe(10);
    net.start(2, [y], 100, "other");
    net.start(2, [y], 100, "other2");
    expect(net.rateOf(lone)).toBe(10);
    expect(net.remainingAt(lone, 2)).toBe(80);
    expect(finishTimes(net).get("lone")).toBe(10);
  });

  it("keeps one heap entry per active flow however often rates change", () => {
    const net = new FairShareNetwork<number>();
    const link = net.addLink(100);
    const flows: Flow<number>[] = [];
    for (let i = 0; i < 50; i++) {
      flows.push(net.start(i, [link], 1000, i));
      expect(net.nextFinishMs()).toBeGreaterThan(i);
    }
    expect(net.activeCount).toBe(50);
    expect(finishTimes(net).size).toBe(50);
    expect(net.activeCount).toBe(0);
  });

  it("finishes a zero-byte flow at once", () => {
    const net = new FairShareNetwork<string>();
    const link = net.addLink(10);
    net.start(3, [link], 0, "empty");
    expect(net.nextFinishMs()).toBe(3);
    expect(drain(net, 3)).toStrictEqual(["empty"]);
  });

  it("counts the bytes a link carried and the time it was busy", () => {
    const net = new FairShareNetwork<string>();
    const link = net.addLink(10);
    net.start(0, [link], 100, "a");
    finishTimes(net); // ends at 10
    net.start(30, [link], 50, "b"); // 30 -> 35
    expect(net.stats(link, 32)).toStrictEqual({ capacity: 10, carriedBytes: 100, busyMs: 12, activeFlows: 1 }); // 10 + (32 - 30)
    finishTimes(net);
    expect(net.stats(link, 40)).toStrictEqual({ capacity: 10, carriedBytes: 150, busyMs: 15, activeFlows: 0 }); // 10 + 5
  });

  it("refuses time going back, unknown or repeated links and bad sizes", () => {
    const net = new FairShareNetwork<string>();
    const link = net.addLink(10);
    net.start(5, [link], 10, "a");
    expect(() => net.start(4, [link], 10, "b")).toThrow("time went back from 5 to 4 ms");
    expect(() => net.start(5, [7], 10, "c")).toThrow("unknown link 7");
    expect(() => net.start(5, [link, link], 10, "d")).toThrow("link 0 is listed twice");
    expect(() => net.start(5, [link], -1, "e")).toThrow("flow bytes must be finite and >= 0");
    expect(() => net.addLink(0)).toThrow("link capacity must be finite and > 0");
  });
});
