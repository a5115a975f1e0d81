/**
 * vLLM data parallelism as the replay models it (see the package README, "Data parallelism"):
 * a worker with `data_parallel_size` D is D ranks behind one front end, which places each request
 * with vLLM's data-parallel load balancer; with `enable_expert_parallel` the D ranks step in
 * lockstep, waves and all.
 */
import type { RankConfig } from "@kvsim/vllm-scheduler";
import { createTimingModel } from "@kvsim/vllm-scheduler";

/** What the balancer reads of one rank: its scheduler's queue lengths. */
export interface DpLoad {
  load(): { readonly running: number; readonly waiting: number };
}

/**
 * vLLM's data-parallel load balancer: the rank with the least `waiting x 4 + running`; ties go to
 * the lowest rank (vLLM scans from the front end's start index, 0 with one API server, and keeps
 * the first strict minimum). The counts are the ranks' own at this instant. O(D).
 */
export function pickDpRank(ranks: readonly DpLoad[]): number {
  let best = 0;
  let bestScore = Infinity;
  for (let i = 0; i < ranks.length; i++) {
    const l = ranks[i]!.load();
    const score = l.waiting * 4 + l.running;
    if (score < bestScore) {
      best = i;
      bestScore = score;
    }
  }
  return best;
}

/** vLLM checks whether any rank still has requests (an all-reduce) once every this many steps of a wave. */
export const WAVE_CHECK_STEPS = 32;

/**
 * The price of the dummy batch an idle expert-parallel rank runs: the rank's timing model on a
 * one-token batch (a one-token prompt row on a prefill rank, one decode row over a one-token
 * sequence otherwise), profile tables clamped. It sets the length of a step only when no rank of
 * the group has work (the wave's tail): beside a busy rank the dummy is padded to the busy rank's
 * token count, as vLLM pads every rank's batch to the largest, and costs no more than it.
 */
export function dummyStepMs(config: RankConfig): number {
  const timing = config.timing.type === "profile" ? { ...config.timing, outside_grid: "clamp" as const } : config.timing;
  const model = createTimingModel(timing, config.profile, config.engine);
  const prompt = config.role === "prefill";
  const price = model.step({
    prefill: prompt ? { count: 1, sumIsl: 1, sumPrefix: 0 } : { count: 0, sumIsl: 0, sumPrefix: 0 },
    decode: prompt ? { count: 0, sumSequenceTokens: 0 } : { count: 1, sumSequenceTokens: 1 },
    promptRows: prompt ? 1 : 0,
    promptTokens: prompt ? 1 : 0,
    promptContextTokens: 0,
    decodeRows: prompt ? 0 : 1,
    decodeKvTokens: prompt ? 0 : 1,
  });
  return price.prefillMs + price.decodeMs;
}

/**
 * The shared clock of D lockstep ranks: whether a wave is running and how many steps it has taken.
 * vLLM's ranks run a step together (a rank without work runs a dummy batch) while the wave runs;
 * after every step a rank counts it, and on every 32nd step of the wave they agree whether any rank
 * still holds requests: if none does, the wave ends and the ranks pause until a request arrives.
 */
export class LockstepClock {
  /** True from a step that runs work until the wave's end. */
  waveRunning = false;
  /** Steps of the running wave (real and dummy). */
  steps = 0;
  /** Counters for the report. */
  totalSteps = 0;
  dummySteps = 0;
  waves = 0;

  /**
   * The length of a group step, given each rank's own step price (undefined for a rank that runs
   * no work): the slowest rank's; undefined when no rank runs work (see {@link tailStep}).
   */
  static stepMs(prices: readonly (number | undefined)[]): number | undefined {
    let longest: number | undefined;
    for (const p of prices) if (p !== undefined && (longest === undefined || p > longest)) longest = p;
    return longest;
  }

  /** A step with work starts: a wave starts with it if none was running. */
  startWork(): void {
    if (!this.waveRunning) {
      this.waveRunning = true;
      this.waves++;
    }
  }

  /** True when the ranks run a dummy step now: the wave runs and no rank holds a request (its tail, before the next check). */
  tailStep(anyUnfinished: boolean): boolean {
    return this.waveRunning && !anyUnfinished;
  }

  /** A step (work or dummy) ended: count it, and end the wave at a check step that finds every rank empty. */
  endStep(dummy: boolean, anyUnfinished: boolean): void {
    this.steps++;
    this.totalSteps++;
    if (dummy) this.dummySteps++;
    if (this.steps % WAVE_CHECK_STEPS === 0 && !anyUnfinished) {
      this.waveRunning = false;
      this.steps = 0;
    }
  }
}
