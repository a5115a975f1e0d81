import type { PromptTokens } from "@kvsim/kv-pool";
import type { RankRole } from "@kvsim/vllm-scheduler";
import type { HandoffCoordinator } from "./coordinator.js";
import type { TokenTrack } from "./itl.js";
import type { Placed } from "./placement.js";
import type { RecordStore } from "./record-store.js";
import type { HandoffRecord, RequestRecord, RequestStatus } from "./report.js";
import type { RankSlot } from "./topology.js";
import type { NetworkTransfer } from "./transfer-network.js";
import type { ReplayRequest } from "./workload.js";

/** A request between its arrival and its terminal record. */
export interface LiveRequest {
  readonly req: ReplayRequest;
  readonly prompt: PromptTokens;
  admittedMs: number | undefined;
  /**
   * The first and last token times, NaN before the first token (`emitted` 0). Always numbers, so
   * V8 keeps the fields as doubles and a store allocates nothing; `number | undefined` fields
   * box every new time (a heap number per token).
   */
  firstTokenMs: number;
  lastTokenMs: number;
  emitted: number;
  /** Where its tokens fell in its rank's pass log; ITL gaps are read from there. */
  readonly track: TokenTrack;
  reused: number;
  preemptions: number;
  /** The rank of the entry pool: aggregated, or the prefill rank in P/D. */
  entry: RankSlot | undefined;
  /** The routers' placements, told when the prefill ends and when the request leaves. */
  entryPlaced: Placed | undefined;
  decodePlaced: Placed | undefined;
  decode: RankSlot | undefined;
  decodeHitTokens: number | undefined;
  handoff: HandoffCoordinator | undefined;
  /** Its transfer on the shared network (with `kv_transfer.network`). */
  transfer?: NetworkTransfer;
  /** A rejection reason reported by the prefill rank, kept for the terminal record. */
  rejected: string | undefined;
}

/**
 * The terminal record of a request that ends with `status`. `dpRoles`: the roles whose workers
 * have more than one data-parallel rank (their records name the rank).
 */
export function terminalRecord(
  live: LiveRequest,
  status: RequestStatus,
  reason: string | undefined,
  disaggregated: boolean,
  dpRoles: ReadonlySet<RankRole>,
): RequestRecord {
  const { req } = live;
  const first = live.emitted > 0 ? live.firstTokenMs : undefined;
  const last = live.emitted > 0 ? live.lastTokenMs : undefined;
  return {
    request_id: req.id,
    status,
    ...(reason === undefined ? {} : { reason }),
    arrival_ms: req.arrivalMs,
    admitted_ms: live.admittedMs ?? null,
    first_token_ms: first ?? null,
    last_token_ms: last ?? null,
    ttft_ms: first === undefined ? null : first - req.arrivalMs,
    tpot_ms: first !== undefined && last !== undefined && live.emitted >= 2 ? (last - first) / (live.emitted - 1) : null,
    e2e_ms: last === undefined ? null : last - req.arrivalMs,
    input_tokens: req.inputTokens,
    output_tokens: live.emitted,
    requested_output_tokens: req.outputTokens,
    reused_tokens: live.reused,
    preemptions: live.preemptions,
    workers: workersOf(live, disaggregated),
    ...(dpRoles.size === 0 ? {} : { dp_ranks: dpRanksOf(live, dpRoles) }),
    ...(live.handoff === undefined ? {} : { handoff: handoffRecord(live, live.handoff) }),
  };
}

/** Plain literals, not spreads: spreading conditional parts gave every record's object a map of its own. */
function workersOf(live: LiveRequest, disaggregated: boolean): RequestRecord["workers"] {
  const { entry, decode } = live;
  if (!disaggregated) return entry === undefined ? {} : { aggregated: entry.id };
  if (entry === undefined) return decode === undefined ? {} : { decode: decode.id };
  return decode === undefined ? { prefill: entry.id } : { prefill: entry.id, decode: decode.id };
}

/** The data-parallel rank of each of its workers, for the roles with D > 1. */
function dpRanksOf(live: LiveRequest, dpRoles: ReadonlySet<RankRole>): NonNullable<RequestRecord["dp_ranks"]> {
  const out: { aggregated?: number; prefill?: number; decode?: number } = {};
  for (const w of [live.entry, live.decode]) if (w !== undefined && dpRoles.has(w.role)) out[w.role] = w.dp;
  return out;
}

function handoffRecord(live: LiveRequest, h: HandoffCoordinator): HandoffRecord {
  const p = h.priced;
  const t = p?.terms;
  return {
    source_held_ms: h.times.sourceHeldMs ?? null,
    destination_reserved_ms: h.times.destinationReservedMs ?? null,
    destination_activated_ms: h.times.destinationActivatedMs ?? null,
    source_released_ms: h.times.sourceReleasedMs ?? null,
    destination_hit_tokens: live.decodeHitTokens ?? null,
    mode: t?.mode ?? null,
    unit: t?.unit ?? null,
    block_size_tokens: t?.unit === "block" ? t.blockSizeTokens : null,
    backoff_tokens: t?.backoffTokens ?? null,
    transferred_tokens: t?.transferredTokens ?? null,
    prompt_units: t?.promptUnits ?? null,
    missing_units: t?.missing?.units ?? null,
    bytes_per_unit: t?.bytesPerUnit ?? null,
    fixed_bytes: t === undefined ? null : t.mode === "destination_missing" && t.missing !== undefined ? t.missing.fixedBytes : t.fixedBytes,
    payload_bytes: p?.payloadBytes ?? null,
    bandwidth_gbps: t?.bandwidthGbps ?? null,
    delay_ms: h.delayMs ?? null,
    ...(live.transfer === undefined ? {} : networkTimes(live.transfer)),
  };
}

/** A handoff record's network fields; its delay runs from the request to the last byte. */
function networkTimes(t: NetworkTransfer): Partial<HandoffRecord> {
  const since = (a: number | undefined, b: number | undefined) => (a === undefined || b === undefined ? null : a - b);
  return {
    delay_ms: since(t.endMs, t.requestedMs),
    transfer_path: t.path,
    transfer_start_ms: t.startMs ?? null,
    transfer_first_byte_ms: t.firstByteMs ?? null,
    transfer_end_ms: t.endMs ?? null,
    queue_ms: since(t.startMs, t.requestedMs),
    setup_ms: since(t.firstByteMs, t.startMs),
    transfer_ms: since(t.endMs, t.firstByteMs),
  };
}

/**
 * The records, built from the store when first read (most callers read only the report), then
 * kept (the store is dropped). Outside the engine, so the result keeps only the store alive.
 */
export function lazyRecords(store: RecordStore<RequestRecord>): () => readonly RequestRecord[] {
  let from: RecordStore<RequestRecord> | undefined = store;
  let records: readonly RequestRecord[] | undefined;
  return () => {
    if (records === undefined) {
      records = from!.toArray();
      from = undefined;
    }
    return records;
  };
}
