import { createPromptTokens, type PromptTokens } from "@kvsim/kv-pool";
import { IdTable, type RankRole } from "@kvsim/vllm-scheduler";
import type { HandoffCoordinator } from "./coordinator.js";
import { TokenTrack } from "./itl.js";
import type { PassLog } from "./pass-log.js";
import type { Placed, Placement } from "./placement.js";
import { RecordStore } from "./record-store.js";
import type { MetricsCollector } from "./metrics-collector.js";
import type { HandoffRecord, RequestRecord, RequestStatus } from "./report.js";
import type { ReplayProgress } from "./replay.js";
import type { RoutingTally } from "./routing-report.js";
import type { Sampler } from "./sampler.js";
import type { RankSlot, Topology } from "./topology.js";
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
  /** With offload tiers: the prompt tokens each tier served it (tiers' order), and how long its loads took. */
  offloadTokens: Record<string, number> | undefined;
  offloadLoadMs: number;
}

/**
 * The requests of a replay from arrival to terminal record: the live ones by id, their tokens, and
 * the records of those that ended (with the collector, the routers and progress told).
 */
export class RequestLedger {
  readonly live = new IdTable<LiveRequest>();
  /** Terminal records, kept compactly by their workload index and built again when read. */
  readonly records = new RecordStore<RequestRecord>({ enumKeys: ["status", "mode", "unit", "transfer_path"], numberedKeys: ["request_id"] });
  private nextProgress: number;

  private readonly entryPlacement: Placement;
  private readonly decodePlacement: Placement | undefined;
  private readonly entryTally: RoutingTally;
  private readonly disaggregated: boolean;
  private readonly dpRoles: ReadonlySet<RankRole>;

  constructor(
    private readonly collector: MetricsCollector,
    private readonly sampler: Sampler | undefined,
    topology: Topology<LiveRequest>,
    private readonly onProgress: ((p: ReplayProgress) => void) | undefined,
    private readonly progressEvery: number,
  ) {
    this.entryPlacement = topology.entryPlacement;
    this.decodePlacement = topology.decodePlacement;
    this.entryTally = topology.entryTally;
    this.disaggregated = topology.disaggregated;
    this.dpRoles = topology.dpRoles;
    this.nextProgress = progressEvery;
  }

  /** A request reached the engine: it is live from now. */
  arrive(req: ReplayRequest): LiveRequest {
    this.collector.onArrival(req.arrivalMs);
    this.sampler?.onArrival();
    const live: LiveRequest = {
      req,
      prompt: req.prompt ?? createPromptTokens(req.tokens),
      admittedMs: undefined,
      firstTokenMs: NaN,
      lastTokenMs: NaN,
      emitted: 0,
      track: new TokenTrack(),
      reused: 0,
      preemptions: 0,
      entry: undefined,
      entryPlaced: undefined,
      decodePlaced: undefined,
      decode: undefined,
      decodeHitTokens: undefined,
      handoff: undefined,
      rejected: undefined,
      offloadTokens: undefined,
      offloadLoadMs: 0,
    };
    this.live.set(req.id, live);
    return live;
  }

  /** The prefill of a request ended on its entry rank: its router and tally learn it. */
  prefillEnded(live: LiveRequest): void {
    if (live.entryPlaced === undefined) return;
    this.entryPlacement.prefillDone?.(live.entryPlaced);
    this.entryTally.computed(live.entryPlaced.index, live.req.inputTokens - live.reused);
  }

  /** Token `index` of a request at `atMs`, entry `entry` of its rank's pass log. */
  recordToken(live: LiveRequest, index: number, atMs: number, log: PassLog, entry: number): void {
    if (index !== live.emitted) throw new Error(`request ${live.req.id}: token ${index} arrived, expected token ${live.emitted}`);
    // Causality: arrival <= first token <= every later token.
    if (!(atMs >= live.req.arrivalMs) || (live.emitted > 0 && !(atMs >= live.lastTokenMs))) {
      throw new Error(
        `request ${live.req.id}: token ${index} at ${atMs} ms is before its arrival (${live.req.arrivalMs} ms) or its previous token (${live.emitted > 0 ? live.lastTokenMs : "none"} ms)`,
      );
    }
    if (live.emitted === 0) {
      live.firstTokenMs = atMs;
      // Aggregated: the first token ends the prefill (in P/D the prefill rank reports it).
      if (!this.disaggregated) {
        this.sampler?.onPrefillDone(live.req.inputTokens);
        this.prefillEnded(live);
      }
    }
    // Gaps count up to the requested outputs (a token past them would have no gap slot).
    if (index < live.req.outputTokens) live.track.add(log, entry);
    live.lastTokenMs = atMs;
    live.emitted++;
  }

  /** A request ends at `nowMs` with `status` (once: a request no longer live is left alone). */
  terminate(live: LiveRequest, status: RequestStatus, reason: string | undefined, nowMs: number): void {
    if (this.live.get(live.req.id) !== live) return;
    this.live.delete(live.req.id);
    if (live.entryPlaced !== undefined) this.entryPlacement.finished?.(live.entryPlaced);
    if (live.decodePlaced !== undefined) this.decodePlacement!.finished?.(live.decodePlaced);
    if (live.handoff !== undefined) {
      // The replay sends no more commands for its handoff (a terminal request's last action was
      // its coordinator's `complete`): its ranks drop what they kept of it.
      live.entry?.rank.forgetHandoff(live.req.id);
      live.decode?.rank.forgetHandoff(live.req.id);
    }
    const { req } = live;
    const completed = status === "completed";
    this.sampler?.onTerminal(completed);
    const first = live.emitted > 0 ? live.firstTokenMs : undefined;
    const last = live.emitted > 0 ? live.lastTokenMs : undefined;
    const terminalMs = last ?? nowMs;
    this.collector.onTerminal({
      status,
      inputTokens: req.inputTokens,
      outputTokens: live.emitted,
      arrivalMs: req.arrivalMs,
      terminalMs,
      firstTokenMs: first,
      lastTokenMs: last,
      reusedTokens: live.reused,
      gaps: completed ? live.track : undefined,
      ...(reason === undefined ? {} : { reason }),
    });
    const record = terminalRecord(live, status, reason, this.disaggregated, this.dpRoles);
    this.records.add(
      req.index,
      live.offloadTokens === undefined ? record : { ...record, offload: { tokens: live.offloadTokens, load_ms: live.offloadLoadMs } },
    );
    if (this.onProgress !== undefined && this.collector.terminalCount >= this.nextProgress) {
      this.nextProgress += this.progressEvery;
      this.onProgress({ arrived: this.collector.arrivedCount, terminal: this.collector.terminalCount, nowMs: nowMs });
    }
  }

  /** Tokens the live requests emitted (what a cutoff leaves in flight). */
  emittedInFlight(): number {
    let emitted = 0;
    for (const live of this.live.values()) emitted += live.emitted;
    return emitted;
  }
}

/**
 * The terminal record of a request that ends with `status`. `dpRoles`: the roles whose workers
 * have more than one data-parallel rank (their records name the rank).
 */
function terminalRecord(
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
