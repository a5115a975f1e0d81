/**
 * vLLM's async scheduling (`async_scheduling: true`): the engine core keeps two steps in its batch
 * queue, so step k + 1 is planned while step k runs on the GPU, and the outputs of step k are
 * processed after step k + 1 was planned.
 *
 * At each step boundary T (the end of the step that just ran, when the next planned step starts):
 *   1. the outputs of the step that ended are processed: its tokens were reported with it; the
 *      requests that produced their last token in it are freed now;
 *   2. requests that arrived while it ran are already waiting (the driver submitted them);
 *   3. the step after the one now starting is planned, seeing the starting step's tokens as if
 *      they were already there (vLLM's output placeholders: a decode row is scheduled again at
 *      once, a prompt's next chunk too) and skipping requests whose last token is in flight (they
 *      still hold their blocks and a running slot);
 *   4. the step planned at the previous boundary runs from T for its priced duration.
 * So a request that arrives during a step is first scheduled in the step after the next one, its
 * admission (vLLM's `scheduled_ts`) is stamped one step before its first chunk runs, and blocks
 * and running slots freed by finished requests are seen one step later than synchronously. From an
 * idle rank two steps are planned at once (vLLM's batch queue fills before it blocks).
 */
import type { StepResult } from "./contract.js";
import { settleLoads } from "./offload-loads.js";
import { EffectsBuilder } from "./effects-builder.js";
import type { Req, RankState } from "./rank-state.js";
import { emitSampled, planStep, stepResult, type PlannedStep } from "./step.js";

export class AsyncScheduling {
  /** The step planned at the last boundary, to run from the next one. */
  private next: PlannedStep | undefined;
  /** Requests whose last token is in the step now running. */
  private inFlightFinishing: readonly Req[] = [];

  constructor(private readonly state: RankState) {}

  /** Work that needs another boundary even if nothing can be scheduled: a planned step or requests to free. */
  get pending(): boolean {
    return this.next !== undefined || this.inFlightFinishing.length > 0;
  }

  step(nowMs: number): StepResult | undefined {
    const state = this.state;
    this.releaseFinished();
    settleLoads(state, nowMs);
    const fx = new EffectsBuilder();
    let current = this.next;
    this.next = undefined;
    if (current === undefined && state.hasSchedulableWork()) current = planStep(state, fx, nowMs, false);
    // Surviving mutants: VS-09 (MUTANTS.md).
    if (current !== undefined && state.hasSchedulableWork()) this.next = planStep(state, fx, nowMs, false);
    if (current === undefined) return fx.empty ? undefined : stepResult(state, nowMs, undefined, fx);
    const endMs = nowMs + current.prefillMs + current.decodeMs;
    emitSampled(current, endMs, fx);
    // A request cancelled since the step was planned produces nothing (vLLM drops its outputs).
    for (const req of current.finishing) if (req.phase === "finishing") fx.finish(req.id);
    this.inFlightFinishing = current.finishing;
    return stepResult(state, nowMs, current, fx);
  }

  /** The step that ran has ended: the requests that produced their last token in it leave the rank. */
  private releaseFinished(): void {
    const state = this.state;
    // Stryker disable next-line BooleanLiteral: VS-10
    let removed = false;
    for (const req of this.inFlightFinishing) {
      if (req.phase !== "finishing") continue; // cancelled meanwhile
      if (!req.freed) {
        state.pool.free(req.seq);
        // Stryker disable next-line UpdateOperator: VS-11
        state.capacityGeneration++;
        state.finishingCount--;
        removed = true;
      }
      // Stryker disable next-line BooleanLiteral: VS-12
      if (req.handoff !== undefined) state.retireHandoff(req.handoff, false);
      state.forget(req);
    }
    this.inFlightFinishing = [];
    // Surviving mutants: VS-13 (MUTANTS.md).
    if (removed) state.compactRunning();
  }
}
