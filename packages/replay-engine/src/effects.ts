import type { DecodeRun, Effects, IdTable, StepResult } from "@kvsim/vllm-scheduler";
import type { HandoffInput } from "./coordinator.js";
import { NoProgress } from "./diagnostics.js";
import type { Placement } from "./placement.js";
import type { MetricsCollector } from "./metrics-collector.js";
import type { LiveRequest, RequestLedger } from "./request-records.js";
import type { Sampler } from "./sampler.js";
import type { OffloadTiers } from "./offload-tiers.js";
import type { RankSlot } from "./topology.js";

/** Passes in a row that change nothing before a rank is declared stuck. */
const MAX_IDLE_PASSES = 1024;

/** Where a request's handoff coordinator takes its inputs (the replay's P/D dispatch). */
export interface HandoffFeed {
  feed(live: LiveRequest, input: HandoffInput): void;
}

/** Applies what ranks report (passes, decode runs, command outcomes) to the requests, the collector and the handoffs. */
export class EffectApplier {
  private readonly live: IdTable<LiveRequest>;

  constructor(
    private readonly ledger: RequestLedger,
    private readonly collector: MetricsCollector,
    private readonly sampler: Sampler | undefined,
    private readonly entryPlacement: Placement,
    private readonly handoffs: HandoffFeed,
    private readonly offload: OffloadTiers | undefined,
  ) {
    this.live = ledger.live;
  }

  /** A decode run's steps ended: each gave one token to every request of its batch. */
  completeRun(w: RankSlot, run: DecodeRun): void {
    this.sampler?.onRunDone(w.sampleIndex);
    w.busy = false;
    w.dirty = true;
    w.idlePasses = 0;
    w.metrics = run.metrics;
    const log = w.passLog;
    const ends = run.stepEndsMs;
    let entry0 = -1;
    for (let j = 0; j < run.steps; j++) {
      const e = log.append(ends[j]!);
      if (j === 0) entry0 = e;
    }
    const ids = run.requestIds;
    for (let i = 0; i < ids.length; i++) {
      const live = this.live.get(ids[i]!);
      if (live === undefined) throw new Error(`${w.label} emitted a token for unknown request ${ids[i]}`);
      const first = run.firstTokenIndex[i]!;
      for (let j = 0; j < run.steps; j++) this.ledger.recordToken(live, first + j, ends[j]!, log, entry0 + j);
    }
  }

  /** A pass ended: its effects apply now; `tokensAtMs` replaces its tokens' own times (a lockstep step's end). */
  completePass(w: RankSlot, step: StepResult, nowMs: number, tokensAtMs: number | undefined): void {
    w.busy = false;
    w.dirty = true;
    const e = step.effects;
    const changed =
      step.scheduledTokens > 0 ||
      e.tokens.length + e.admissions.length + e.preemptions.length + e.rejections.length + e.finished.length + e.lifecycle.length + e.offloadLoads.length > 0;
    w.idlePasses = changed ? 0 : w.idlePasses + 1;
    if (w.idlePasses >= MAX_IDLE_PASSES) {
      throw new NoProgress(`${w.label} ran ${MAX_IDLE_PASSES} passes in a row that changed nothing`);
    }
    this.apply(w, e, step.startMs, nowMs, tokensAtMs);
  }

  /**
   * Applies a rank's effects at `nowMs`; admissions are stamped at `admittedAt` (the pass start),
   * tokens at their own time or `tokensAtMs`.
   */
  apply(w: RankSlot, e: Effects, admittedAt: number, nowMs: number, tokensAtMs?: number): void {
    w.metrics = e.metrics;
    for (const a of e.admissions) {
      const live = this.live.get(a.requestId);
      if (live === undefined) continue;
      if (w.role === "decode") continue;
      live.admittedMs ??= admittedAt;
      live.reused = Math.max(live.reused, a.reusedTokens);
    }
    for (const l of e.offloadLoads) {
      this.offload?.onLoad(l);
      const live = this.live.get(l.requestId);
      if (live === undefined) continue;
      // By tier name; in P/D by role and name ("decode.cpu"), as both roles may have tiers.
      const names = this.offload!.tierNames(w.role);
      const served = (live.offloadTokens ??= {});
      for (let t = 0; t < names.length; t++) {
        const key = w.role === "aggregated" ? names[t]! : `${w.role}.${names[t]!}`;
        served[key] = (served[key] ?? 0) + l.tokensPerTier[t]!;
      }
      live.offloadLoadMs += l.doneMs - l.startMs;
    }
    for (const p of e.preemptions) {
      this.collector.onPreemption();
      const live = this.live.get(p.requestId);
      if (live !== undefined) live.preemptions++;
    }
    if (w.role !== "prefill") {
      let entry = -1;
      let entryMs = 0;
      for (const t of e.tokens) {
        const live = this.live.get(t.requestId);
        if (live === undefined) throw new Error(`${w.label} emitted a token for unknown request ${t.requestId}`);
        const atMs = tokensAtMs ?? t.atMs;
        // One log entry per pass (all its tokens carry its end time).
        if (entry < 0 || atMs !== entryMs) {
          entry = w.passLog.append(atMs);
          entryMs = atMs;
        }
        this.ledger.recordToken(live, t.index, atMs, w.passLog, entry);
      }
      this.sampler?.onOutputTokens(e.tokens.length);
    }
    for (const r of e.rejections) {
      const live = this.live.get(r.requestId);
      if (live === undefined) continue;
      if (live.handoff === undefined) this.ledger.terminate(live, "rejected", r.reason, nowMs);
      else {
        if (w.role === "prefill") live.rejected = r.reason;
        this.handoffs.feed(live, { type: "failed", atMs: nowMs, reason: `${w.label} rejected the request: ${r.reason}` });
      }
    }
    if (w.role !== "prefill") {
      for (const f of e.finished) {
        const live = this.live.get(f.requestId);
        if (live === undefined) continue;
        if (live.emitted < live.req.outputTokens) {
          this.ledger.terminate(live, "failed", `${w.label} finished the request after ${live.emitted} of ${live.req.outputTokens} output tokens`, nowMs);
        } else {
          this.ledger.terminate(live, "completed", undefined, nowMs);
        }
      }
    }
    for (const fact of e.lifecycle) {
      const live = this.live.get(fact.requestId);
      if (live === undefined) throw new Error(`${w.label} reported ${fact.type} for unknown request ${fact.requestId}`);
      if (fact.type === "source_held") {
        this.sampler?.onPrefillDone(live.req.inputTokens);
        // Dynamo's prefill router lets go of a request when its prefill returns.
        this.ledger.prefillEnded(live);
        if (live.entryPlaced !== undefined) this.entryPlacement.finished?.(live.entryPlaced);
        this.handoffs.feed(live, { type: "source_held", atMs: nowMs, terms: fact.terms });
      } else {
        live.decodeHitTokens = fact.hitTokens;
        this.handoffs.feed(live, { type: "destination_reserved", atMs: nowMs, hitTokens: fact.hitTokens });
      }
    }
  }
}
