import type { IdTable } from "@kvsim/vllm-scheduler";
import type { LockstepGroup } from "./lockstep.js";
import type { LiveRequest } from "./request-records.js";
import type { RankSlot } from "./topology.js";

/** A request the replay could not move, where it sits and why. */
export interface StuckRequest {
  readonly request_id: string;
  readonly where: string;
  readonly why: string;
}

/** Stuck requests listed in a no-progress error. */
const MAX_STUCK_LISTED = 10;

/** The result of a replay that can make no progress at `nowMs`: why, and the first requests still live. */
export function stuckResult(
  live: IdTable<LiveRequest>,
  nowMs: number,
  reason: string,
): { readonly ok: false; readonly reason: string; readonly stuck: readonly StuckRequest[]; readonly atMs: number } {
  const stuck: StuckRequest[] = [];
  for (const l of live.values()) {
    if (stuck.length >= MAX_STUCK_LISTED) break;
    stuck.push(describe(l));
  }
  const more = live.size > stuck.length ? ` (the first ${stuck.length} of ${live.size} listed)` : "";
  return { ok: false, reason: `the replay can make no progress at ${nowMs} ms: ${reason}${more}`, stuck, atMs: nowMs };
}

/** Where a live request sits and why it does not move, from its handoff's phase and its ranks' last metrics. */
function describe(live: LiveRequest): StuckRequest {
  const rankState = (w: RankSlot) => {
    const m = w.metrics;
    const pages = m === undefined ? "" : `; ${m.running} running, ${m.waiting} waiting, ${m.pagesFree} of ${m.pagesUsed + m.pagesFree} pages free`;
    return `${w.label}${pages}`;
  };
  const prompt = `prompt of ${live.req.inputTokens} tokens, ${live.req.outputTokens} output tokens`;
  const h = live.handoff;
  if (h === undefined || h.phase === "prefilling" || h.phase === "submitting" || h.phase === "new") {
    const w = live.entry;
    const where = w === undefined ? "not placed" : `on ${w.label}`;
    const state =
      live.admittedMs === undefined ? "waiting for admission" : live.emitted > 0 ? `running after ${live.emitted} tokens` : "admitted, no token yet";
    return { request_id: live.req.id, where: `${where}, ${state}`, why: `${prompt}; ${w === undefined ? "" : rankState(w)}` };
  }
  const src = live.entry === undefined ? "" : ` (source held on ${live.entry.label})`;
  const dst = live.decode;
  switch (h.phase) {
    case "reserving":
    case "awaiting_reservation":
      return {
        request_id: live.req.id,
        where: `awaiting a destination reservation on ${dst?.label ?? "decode worker ?"}${src}`,
        why: `${prompt}; the decode rank has not found room for it; ${dst === undefined ? "" : rankState(dst)}`,
      };
    case "transferring":
    case "activating":
    case "releasing":
      return { request_id: live.req.id, where: `in transfer to ${dst?.label ?? "decode worker ?"}${src}`, why: prompt };
    case "complete":
    case "failed":
      return {
        request_id: live.req.id,
        where: `on ${dst?.label ?? "decode worker ?"}, ${live.emitted > 0 ? `decoding after ${live.emitted} tokens` : "waiting to decode"}`,
        why: `${prompt}; ${dst === undefined ? "" : rankState(dst)}`,
      };
  }
}

/** Block conservation at the end: with every request terminal, no rank holds a request or a page. */
export function checkDrained(soloRanks: readonly RankSlot[], groups: readonly LockstepGroup[]): void {
  const check = (w: RankSlot) => {
    const used = w.rank.metrics().pagesUsed;
    if (!w.rank.isDrained() || used !== 0) throw new Error(`${w.label} still holds requests or ${used} pages after every request ended`);
  };
  for (const w of soloRanks) check(w);
  for (const g of groups) for (const w of g.ranks) check(w);
}

/** A rank ran too many passes in a row that changed nothing: the replay can make no progress. */
export class NoProgress extends Error {}
