import type { StepResult } from "@kvsim/vllm-scheduler";
import { LockstepClock } from "./data-parallel.js";
import type { RankSlot } from "./topology.js";

/** A lockstep step in the event queue: each rank's own pass (undefined: a dummy batch); `counted` unless it only carried zero-length passes. */
export interface GroupStep {
  readonly kind: "group";
  readonly group: LockstepGroup;
  readonly steps: readonly (StepResult | undefined)[];
  readonly counted: boolean;
  /** When the step ends: its slowest rank's pass, the dummy's price, or now. */
  readonly endMs: number;
}

/** The D expert-parallel ranks of one spec worker, stepping together on one clock. */
export class LockstepGroup {
  readonly ranks: RankSlot[] = [];
  readonly clock = new LockstepClock();
  busy = false;

  /** `dummyMs`: the price of a step in which no rank has work (the wave's tail). */
  constructor(readonly dummyMs: number) {}

  /** True when a rank of the group holds a request (running or waiting): vLLM's unfinished requests. */
  anyUnfinished(): boolean {
    for (const w of this.ranks) {
      const l = w.rank.load();
      if (l.running + l.waiting > 0) return true;
    }
    return false;
  }

  /** True when the group steps now: a rank has something new, or the wave's tail needs a dummy step. */
  wantsStep(): boolean {
    for (const w of this.ranks) if (w.dirty) return true;
    return this.clock.tailStep(this.anyUnfinished());
  }

  /**
   * Starts a step at `nowMs` from the passes its changed ranks planned (`steps`, one per rank): it
   * lasts as long as the slowest one (ranks without work run a dummy batch padded to it). Without
   * work on any rank, the step is the dummy's price if the wave runs with every rank empty;
   * otherwise (work that cannot run yet) the group waits for a change: undefined.
   */
  start(steps: readonly (StepResult | undefined)[], nowMs: number): GroupStep | undefined {
    const prices: (number | undefined)[] = [];
    let effectsOnly = false;
    for (const step of steps) {
      const works = step !== undefined && step.scheduledTokens > 0;
      prices.push(works ? step.durationMs : undefined);
      if (step !== undefined && !works) effectsOnly = true;
    }
    const longest = LockstepClock.stepMs(prices);
    let end: number;
    let counted = true;
    if (longest !== undefined) {
      this.clock.startWork();
      end = nowMs + longest;
    } else if (effectsOnly) {
      // Passes that only preempted or rejected: applied now, then the group plans again.
      end = nowMs;
      counted = false;
    } else if (this.clock.tailStep(this.anyUnfinished())) {
      end = nowMs + this.dummyMs;
    } else {
      return undefined;
    }
    this.busy = true;
    for (const w of this.ranks) {
      w.busy = true;
      w.passEndMs = end;
    }
    return { kind: "group", group: this, steps, counted, endMs: end };
  }

  /** A step's passes completed (the caller applied them): the clock counts it. */
  endStep(step: GroupStep): void {
    if (!step.counted) return;
    let dummy = true;
    for (const s of step.steps) if (s !== undefined && s.scheduledTokens > 0) dummy = false;
    this.clock.endStep(dummy, this.anyUnfinished());
  }
}
