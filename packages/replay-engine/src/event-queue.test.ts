import { describe, expect, it } from "vitest";
import { EventQueue, Phase, Stage } from "./event-queue.js";

function drain(q: EventQueue<string>, now: number): string[] {
  const out: string[] = [];
  for (let e = q.popDue(now); e !== undefined; e = q.popDue(now)) out.push(e.payload);
  return out;
}

describe("EventQueue", () => {
  it("orders by time first", () => {
    const q = new EventQueue<string>();
    q.push(5, Phase.passCompletion, Stage.prefill, 0, "t5");
    q.push(1, Phase.transferCompletion, Stage.decode, 3, "t1");
    expect(q.nextTimeMs()).toBe(1);
    expect(drain(q, 10)).toEqual(["t1", "t5"]);
  });

  it("at one time: pass completions, then transfer completions, whatever the stage and worker", () => {
    const q = new EventQueue<string>();
    q.push(7, Phase.transferCompletion, Stage.prefill, 0, "transfer");
    q.push(7, Phase.passCompletion, Stage.decode, 9, "pass");
    expect(drain(q, 7)).toEqual(["pass", "transfer"]);
  });

  it("within a phase: prefill stage before decode, lower worker id first, then insertion order", () => {
    const q = new EventQueue<string>();
    q.push(2, Phase.passCompletion, Stage.decode, 0, "d0");
    q.push(2, Phase.passCompletion, Stage.prefill, 1, "p1-first");
    q.push(2, Phase.passCompletion, Stage.prefill, 0, "p0");
    q.push(2, Phase.passCompletion, Stage.prefill, 1, "p1-second");
    expect(drain(q, 2)).toEqual(["p0", "p1-first", "p1-second", "d0"]);
  });

  it("pops only events due at or before now", () => {
    const q = new EventQueue<string>();
    q.push(3, Phase.passCompletion, Stage.aggregated, 0, "a");
    expect(q.popDue(2.999)).toBeUndefined();
    expect(q.size).toBe(1);
    expect(q.popDue(3)?.payload).toBe("a");
    expect(q.nextTimeMs()).toBe(Infinity);
  });

  it("nextTimeMs: the earliest time, Infinity when empty (never undefined)", () => {
    const q = new EventQueue<string>();
    expect(q.nextTimeMs()).toBe(Infinity);
    expect(q.popDue(Infinity)).toBeUndefined();
    q.push(4, Phase.passCompletion, Stage.aggregated, 0, "b");
    q.push(2, Phase.passCompletion, Stage.aggregated, 0, "a");
    // Earliest of 4 and 2.
    expect(q.nextTimeMs()).toBe(2);
    expect(drain(q, 2)).toEqual(["a"]);
    expect(q.nextTimeMs()).toBe(4);
    expect(drain(q, 4)).toEqual(["b"]);
    // Drained: empty again.
    expect(q.nextTimeMs()).toBe(Infinity);
    expect(q.popDue(10)).toBeUndefined();
  });

  it("pops many interleaved pushes in (time, phase, stage, worker, insertion) order", () => {
    // 200 events on 5 times x 2 phases x 2 stages x 3 workers, so most keys repeat and only the
    // insertion order tells them apart; pushed in a scrambled order, with pops in between.
    const q = new EventQueue<string>();
    const pushed: { t: number; ph: Phase; st: Stage; w: number; n: number }[] = [];
    const popped: string[] = [];
    for (let n = 0; n < 200; n++) {
      const k = (n * 37) % 60;
      const e = { t: 10 + (k % 5), ph: (Math.floor(k / 5) % 2) as Phase, st: (Math.floor(k / 10) % 2) as Stage, w: Math.floor(k / 20), n };
      pushed.push(e);
      q.push(e.t, e.ph, e.st, e.w, `e${n}`);
      // Now and then the events of time 9 and before are due: none is, so nothing pops early.
      if (n % 50 === 49) popped.push(...drain(q, 9));
    }
    expect(popped).toEqual([]);
    expect(q.size).toBe(200);
    popped.push(...drain(q, 12));
    popped.push(...drain(q, 100));
    const expected = [...pushed].sort((a, b) => a.t - b.t || a.ph - b.ph || a.st - b.st || a.w - b.w || a.n - b.n).map((e) => `e${e.n}`);
    expect(popped).toEqual(expected);
    expect(q.size).toBe(0);
  });

  it("refuses a non-finite time", () => {
    const q = new EventQueue<string>();
    expect(() => {
      q.push(Number.NaN, Phase.passCompletion, Stage.aggregated, 0, "x");
    }).toThrow(/finite/);
  });
});
