import type { MeasuredRun } from "./measured.js";

/**
 * The engine's pickup of a simulated request: the first step boundary after its arrival, where
 * vLLM's per-request stats start their clock (`queued_ts`, stamped when the engine core takes the
 * request from its input queue, once a step, right before it schedules).
 */

/** Where a simulated request's TTFT and E2E start: its arrival (what a client sees), or the engine's pickup. */
export type SimulatedClockStart = "arrival" | "engine-pickup";

/** The times of one simulated request that place its pickup (virtual ms; null when it has none). */
export interface PickupTimes {
  readonly arrivalMs: number;
  readonly admittedMs: number | null;
  readonly firstTokenMs: number | null;
  readonly lastTokenMs: number | null;
}

/**
 * Each request's wait from its arrival to the engine's pickup, in ms: its admission minus its
 * arrival when it was admitted no later than the first step end any request recorded at or after
 * its arrival (so at the first boundary after it); else 0 (it waited for a slot and its clock
 * starts at its arrival, at most a step early against a wait of seconds).
 */
export function pickupWaits(requests: readonly PickupTimes[]): number[] {
  const list: number[] = [];
  for (const r of requests) {
    if (r.firstTokenMs !== null) list.push(r.firstTokenMs);
    if (r.lastTokenMs !== null) list.push(r.lastTokenMs);
  }
  const ends = Float64Array.from(list).sort();
  const nextEnd = (t: number): number => {
    let lo = 0;
    let hi = ends.length;
    while (lo < hi) {
      const mid = (lo + hi) >> 1;
      if (ends[mid]! < t) lo = mid + 1;
      else hi = mid;
    }
    return lo < ends.length ? ends[lo]! : Infinity;
  };
  return requests.map((r) => (r.admittedMs !== null && r.admittedMs <= nextEnd(r.arrivalMs) ? Math.max(0, r.admittedMs - r.arrivalMs) : 0));
}

/**
 * A simulated run (kvsim records) with each request's TTFT and E2E from the engine's pickup, when
 * its records carried the times that place it (`pickupWaitMs`); TPOT does not change.
 */
export function fromEnginePickup(run: MeasuredRun): MeasuredRun {
  return {
    ...run,
    requests: run.requests.map((r) => {
      const wait = Math.min(r.pickupWaitMs ?? 0, r.ttftMs);
      return wait === 0 ? r : { ...r, ttftMs: r.ttftMs - wait, e2eMs: r.e2eMs - wait };
    }),
  };
}
