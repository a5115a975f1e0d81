import { MAX_VIRTUAL_TIME_MS, MAX_VIRTUAL_TIME_TEXT, type Spec, type TraceRecord } from "@kvsim/profile-schema";
import { TimingRefusedError, type IdTable, type Command, type CommandOutcome, type DecodeRun, type RequestInput, type StepResult } from "@kvsim/vllm-scheduler";
import TinyQueue from "tinyqueue";
import { HandoffCoordinator, type CommandAction, type HandoffAction, type HandoffInput } from "./coordinator.js";
import { checkDrained, NoProgress, stuckResult } from "./diagnostics.js";
import { EffectApplier, type HandoffFeed } from "./effects.js";
import { SlaLost, SlaStopWatch } from "./sla-stop.js";
import { EventQueue, Phase, Stage } from "./event-queue.js";
import type { GroupStep, LockstepGroup } from "./lockstep.js";
import { MetricsCollector } from "./metrics-collector.js";
import { speculativeDecodingReport } from "./report.js";
import { Sampler } from "./sampler.js";
import { lazyRecords, RequestLedger, type LiveRequest } from "./request-records.js";
import {
  buildTopology,
  dataParallelReport,
  rankOf,
  routingReport,
  samplerProbes,
  speculationStats,
  type RankSlot,
  type SpecWorker,
  type Topology,
} from "./topology.js";
import type { TransferNetwork } from "./transfer-network.js";
import { workloadRequests, type ReplayRequest } from "./workload.js";

export type { StuckRequest } from "./diagnostics.js";
import type { ReplayInput, ReplayProgress, ReplayResult } from "./replay-types.js";

export type { ReplayProgress, ReplayInput, ReplayResult } from "./replay-types.js";

/** Profile paths a spec references (base, prefill and decode), for the caller to load. */
export function specProfilePaths(spec: Spec): string[] {
  const refs = [spec.profile, spec.prefill?.profile, spec.decode?.profile];
  return [...new Set(refs.filter((r): r is string => typeof r === "string"))];
}

type QueuedPayload =
  | { readonly kind: "pass"; readonly slot: RankSlot; readonly step: StepResult }
  | { readonly kind: "run"; readonly slot: RankSlot; readonly run: DecodeRun }
  | { readonly kind: "transfer"; readonly live: LiveRequest }
  /** A rank's offload load lands: it may admit the request. */
  | { readonly kind: "wake"; readonly slot: RankSlot }
  | GroupStep;

/** A queued wake-up of a rank is due (a stale one only marks it changed, which costs one step() call). */
function wake(w: RankSlot, nowMs: number): void {
  if (w.wakeAtMs === nowMs) w.wakeAtMs = Infinity;
  w.dirty = true;
}

/** Queues a wake-up for when the rank's next offload load lands, unless one is queued for then. */
function scheduleWake(queue: EventQueue<QueuedPayload>, w: RankSlot): void {
  const t = w.rank.nextWakeMs();
  if (t === Infinity || t === w.wakeAtMs) return;
  w.wakeAtMs = t;
  queue.push(t, Phase.passCompletion, w.stage, w.order, { kind: "wake", slot: w });
}

/** The run cannot go on for a reason of its inputs that only the run could find (not a bug). */
class RunFailure extends Error {}

/**
 * Replays a spec's workload on virtual time and returns the report and per-request records, or,
 * when the replay can make no progress, which requests are stuck where and why.
 *
 * Never reads a clock; the same inputs give the same report and digest. Trace records are pulled
 * lazily as the clock reaches them. Throws an InputError for invalid trace content (the file and
 * line named) and for specs the ranks refuse.
 */
export async function runReplay(input: ReplayInput): Promise<ReplayResult> {
  const engine = new ReplayEngine(input);
  return engine.run();
}

class ReplayEngine implements HandoffFeed {
  private readonly spec: Spec;
  private readonly topology: Topology<LiveRequest>;
  /** Ranks that step on their own. */
  private readonly soloRanks: readonly RankSlot[];
  /** Lockstep groups (expert parallelism with D > 1). */
  private readonly groups: readonly LockstepGroup[];
  /** The pool a request enters: aggregated workers, or the prefill pool. */
  private readonly entryPool: readonly SpecWorker[];
  private readonly queue = new EventQueue<QueuedPayload>();
  private readonly ledger: RequestLedger;
  /** The live requests by id (the ledger's). */
  private readonly live: IdTable<LiveRequest>;
  private readonly effects: EffectApplier;
  private readonly collector: MetricsCollector;
  private readonly fallbackLatencyMs: number;
  /** Setup latency the coordinator adds (the private pipe's; the network pays its own). */
  private readonly pipeSetupMs: number;
  /** The shared network of handoffs, when the spec sets one; else each has a private pipe. */
  private readonly network: TransferNetwork<LiveRequest> | undefined;
  private readonly requests: AsyncIterator<ReplayRequest> | Iterator<ReplayRequest>;
  /** A trace's raw record iterator, kept to count what a cutoff left unread; closed at the end. */
  private readonly rawRecords: AsyncIterator<TraceRecord> | Iterator<TraceRecord> | undefined;
  private readonly onProgress: ((p: ReplayProgress) => void) | undefined;
  private now = 0;
  /** Time series, when asked for. */
  private readonly sampler: Sampler | undefined;
  private readonly quantilePoints: number | undefined;
  /** When the next request not yet released reaches the engine (Infinity when none is left). */
  private nextArrivalMs = Infinity;
  /**
   * The front end's overhead (spec.frontend): a request arrives (its records' arrival_ms, the
   * start of its TTFT and E2E) this long before the engine sees it.
   */
  private readonly frontendMs: number;
  private readonly fastDecode: boolean;
  /** Times of transfer completions in the heap (decode runs stop before them); stale ones are dropped lazily. */
  private readonly transferTimes = new TinyQueue<number>([], (a, b) => a - b);

  constructor(input: ReplayInput) {
    const { spec } = input;
    this.spec = spec;
    this.frontendMs = spec.frontend?.overhead_ms ?? 0;
    this.collector = new MetricsCollector(spec.sla, input.percentiles === undefined ? {} : { percentiles: input.percentiles });
    this.collector.ttftClock = spec.frontend === undefined ? "engine" : "client";
    if (input.stopWhen !== undefined) this.collector.watch = new SlaStopWatch(input.stopWhen);
    this.onProgress = input.onProgress;
    this.quantilePoints = input.quantiles;
    this.fastDecode = input.fastDecode ?? true;
    this.fallbackLatencyMs = spec.kv_transfer.fallback_latency_ms;
    this.pipeSetupMs = spec.kv_transfer.network === undefined ? (spec.kv_transfer.setup_latency_ms ?? 0) : 0;
    const t = buildTopology<LiveRequest>(spec, input.specFile ?? "<spec>", input.profiles);
    this.topology = t;
    this.soloRanks = t.soloRanks;
    this.groups = t.groups;
    this.entryPool = t.entryPool;
    this.network = t.network;
    if (t.network !== undefined) this.collector.attachNetwork(t.network);
    if (t.capacity !== undefined) this.collector.kvCapacity = t.capacity;
    const stream = workloadRequests(spec.workload, input.records, input.traceFile);
    this.requests = stream.requests;
    this.rawRecords = stream.raw;
    this.sampler = input.timeseries === undefined ? undefined : new Sampler(samplerProbes(t.allRanks), input.timeseries.sampleMs, t.offload?.probe());
    const progressEvery = Math.max(1, input.progressEvery ?? 256);
    this.ledger = new RequestLedger(this.collector, this.sampler, t, input.onProgress, progressEvery);
    this.live = this.ledger.live;
    this.effects = new EffectApplier(this.ledger, this.collector, this.sampler, t.entryPlacement, this, t.offload);
  }

  async run(): Promise<ReplayResult> {
    const cap = this.spec.max_virtual_time_ms;
    let next = await this.pull();
    let stoppedAtCap = false;
    try {
      for (;;) {
        // Settle the current instant: heap events in their order, then arrivals, then idle
        // workers start passes; zero-duration passes and transfers complete in the same instant.
        for (;;) {
          for (let ev = this.queue.popDue(this.now); ev !== undefined; ev = this.queue.popDue(this.now)) {
            const p = ev.payload;
            if (p.kind === "pass") this.effects.completePass(p.slot, p.step, this.now, undefined);
            else if (p.kind === "run") this.effects.completeRun(p.slot, p.run);
            else if (p.kind === "group") this.completeGroupStep(p);
            else if (p.kind === "wake") wake(p.slot, this.now);
            else this.transferDone(p.live);
          }
          if (this.network?.nextTimeMs() === this.now) {
            for (const live of this.network.settle(this.now)) this.transferDone(live);
          }
          while (next !== undefined && next.arrivalMs + this.frontendMs <= this.now) {
            this.arrive(next);
            next = await this.pull();
          }
          for (const w of this.soloRanks) if (w.dirty && !w.busy) this.startPass(w);
          for (const g of this.groups) if (!g.busy) this.startGroupStep(g);
          if (this.queue.nextTimeMs() !== this.now && this.network?.nextTimeMs() !== this.now) break;
        }
        // Infinity, not undefined, for "none": the loop's comparisons see numbers only.
        const netNext = this.network?.nextTimeMs();
        const queueNext = this.queue.nextTimeMs();
        const heapNext = netNext === undefined ? queueNext : Math.min(queueNext, netNext);
        const t = next === undefined ? heapNext : Math.min(heapNext, next.arrivalMs + this.frontendMs);
        if (t === Infinity) break;
        if (this.collector.watch?.lost !== undefined) throw new SlaLost(this.collector.watch.lost);
        // The state now holds until t (or the cap): the samples due before then see it.
        this.sampler?.advance(cap !== undefined && t > cap ? cap : t);
        if (cap !== undefined && t > cap) {
          stoppedAtCap = true;
          break;
        }
        // Beyond it a double no longer resolves a pass: time would stop while work goes on.
        if (t > MAX_VIRTUAL_TIME_MS) {
          throw new RunFailure(
            `virtual time would pass ${MAX_VIRTUAL_TIME_TEXT} (next event at ${t} ms): the workload's passes and transfers take too long to model`,
          );
        }
        if (!(t >= this.now)) throw new Error(`virtual time went back from ${this.now} ms to ${t} ms`);
        this.now = t;
      }
      if (stoppedAtCap) await this.countCutoff(cap!, next);
    } catch (e) {
      if (e instanceof NoProgress) return stuckResult(this.live, this.now, e.message);
      if (e instanceof RunFailure) return { ok: false, reason: `the replay stopped at ${this.now} ms: ${e.message}`, stuck: [], atMs: this.now };
      if (e instanceof SlaLost) return e.result(this.now, this.collector.terminalCount);
      throw e;
    } finally {
      // Stopped early (cutoff, no progress, an error): let the record stream close its source.
      await this.requests.return?.();
      await this.rawRecords?.return?.();
    }
    if (this.live.size > 0 && !stoppedAtCap) {
      return stuckResult(this.live, this.now, `no event is pending and ${this.live.size} request(s) have not finished`);
    }
    if (!stoppedAtCap) checkDrained(this.soloRanks, this.groups);
    this.onProgress?.({ arrived: this.collector.arrivedCount, terminal: this.collector.terminalCount, nowMs: this.now });
    this.collector.dataParallel = dataParallelReport(this.topology);
    this.collector.routing = routingReport(this.spec.router.policy, this.topology);
    this.collector.speculative = speculativeDecodingReport(speculationStats(this.topology));
    this.collector.kvOffload = this.topology.offload?.report();
    const report = this.collector.report();
    const quantiles = this.quantilePoints === undefined ? undefined : this.collector.quantiles(this.quantilePoints);
    this.sampler?.finish(stoppedAtCap ? cap! : this.now);
    const readRecords = lazyRecords(this.ledger.records);
    return {
      ok: true,
      report,
      get records() {
        return readRecords();
      },
      ...(this.sampler === undefined ? {} : { timeseries: this.sampler.result() }),
      ...(quantiles === undefined ? {} : { quantiles }),
    };
  }

  /**
   * Tells the collector what the cutoff left: the in-flight requests' emitted tokens and the
   * requests that never arrived (`next`, already read, and every later one; a trace is read to its
   * end to count them, so a bad line after the cutoff is still an error).
   */
  private async countCutoff(cap: number, next: ReplayRequest | undefined): Promise<void> {
    const emitted = this.ledger.emittedInFlight();
    let notArrived = next === undefined ? 0 : 1;
    const synthetic = this.spec.workload.synthetic;
    if (synthetic !== undefined) notArrived = synthetic.requests - this.collector.arrivedCount;
    else if (this.rawRecords !== undefined && next !== undefined) {
      for (let r = await this.rawRecords.next(); r.done !== true; r = await this.rawRecords.next()) notArrived++;
    }
    this.collector.onCutoff(cap, emitted, notArrived);
  }

  private async pull(): Promise<ReplayRequest | undefined> {
    const r = await this.requests.next();
    const next = r.done === true ? undefined : r.value;
    this.nextArrivalMs = next === undefined ? Infinity : next.arrivalMs + this.frontendMs;
    return next;
  }

  /** A handoff's last byte arrived. */
  private transferDone(live: LiveRequest): void {
    this.sampler?.onTransferDone(live.handoff?.priced?.payloadBytes ?? 0);
    this.feed(live, { type: "transfer_completed", atMs: this.now });
  }

  private arrive(req: ReplayRequest): void {
    const live = this.ledger.arrive(req);
    if (this.topology.disaggregated) {
      live.handoff = new HandoffCoordinator(req.id, this.topology.price, this.fallbackLatencyMs, this.pipeSetupMs);
      this.feed(live, { type: "start", atMs: this.now });
      return;
    }
    const w = this.placeEntry(live);
    const outcome = this.submit(w, { type: "submit", request: this.requestInput(live, req.outputTokens) });
    if (!outcome.ok) this.ledger.terminate(live, "rejected", outcome.reason, this.now);
    else this.effects.apply(w, outcome.effects, this.now, this.now);
  }

  /** Places a request on the aggregated or prefill pool and returns its rank. */
  private placeEntry(live: LiveRequest): RankSlot {
    const placed = this.topology.entryPlacement.place(live.prompt);
    live.entryPlaced = placed;
    this.topology.entryTally.placed(placed.index);
    const w = rankOf(this.entryPool[placed.index]!);
    live.entry = w;
    return w;
  }

  private requestInput(live: LiveRequest, maxOutputTokens: number): RequestInput {
    return { id: live.req.id, prompt: live.prompt, maxOutputTokens };
  }

  private submit(w: RankSlot, command: Command): CommandOutcome {
    w.dirty = true;
    return w.rank.submit(command);
  }

  /** Plans a rank's pass from now (undefined: nothing to run); the rank is no longer dirty. */
  private stepRank(w: RankSlot): StepResult | undefined {
    w.dirty = false;
    let step: StepResult | undefined;
    try {
      step = w.rank.step(this.now);
    } catch (e) {
      // outside_grid: refuse, and this pass left the measured grid: a result of the workload.
      if (e instanceof TimingRefusedError) throw new RunFailure(`${w.label} could not price a pass: ${e.message}`);
      throw e;
    }
    if (step !== undefined && (!(step.endMs >= this.now) || !Number.isFinite(step.endMs))) {
      throw new Error(`${w.label} planned a pass ending at ${step.endMs} ms, before now (${this.now} ms)`);
    }
    if (step !== undefined) this.sampler?.onPass(w.sampleIndex, step.scheduledTokens, step.durationMs);
    if (this.topology.offload !== undefined) scheduleWake(this.queue, w);
    return step;
  }

  private startPass(w: RankSlot): void {
    if (this.fastDecode && w.role !== "prefill") {
      w.dirty = false;
      // With time series, a run that may hold samples records its pages at their times: the rank's
      // state moves to the run's end when it starts, and a sample inside it must see its step's.
      const horizon = this.runHorizon(w);
      const pagesAt = this.sampler?.samplesBefore(horizon);
      const run = w.rank.decodeRun(this.now, {
        pagesAt,
        startBeforeMs: horizon,
        endByMs: Math.min(this.spec.max_virtual_time_ms ?? Infinity, MAX_VIRTUAL_TIME_MS),
      });
      if (this.topology.offload !== undefined) scheduleWake(this.queue, w);
      if (run !== undefined) {
        w.busy = true;
        w.passEndMs = run.endMs;
        this.sampler?.onRunStarted(w.sampleIndex, run.startMs, run.stepEndsMs, run.steps, run.requestIds.length, run.pages);
        this.queue.push(run.endMs, Phase.passCompletion, w.stage, w.order, { kind: "run", slot: w, run });
        return;
      }
    }
    const step = this.stepRank(w);
    if (step === undefined) return;
    w.busy = true;
    w.passEndMs = step.endMs;
    this.queue.push(step.endMs, Phase.passCompletion, w.stage, w.order, { kind: "pass", slot: w, step });
  }

  /** Starts a lockstep step of a group now when it wants one: every changed rank plans its pass. */
  private startGroupStep(g: LockstepGroup): void {
    if (!g.wantsStep()) return;
    const steps: (StepResult | undefined)[] = [];
    for (const w of g.ranks) steps.push(w.dirty ? this.stepRank(w) : undefined);
    const step = g.start(steps, this.now);
    if (step === undefined) return;
    const first = g.ranks[0]!;
    this.queue.push(step.endMs, Phase.passCompletion, first.stage, first.order, step);
  }

  /** A lockstep step ended now: every rank's pass completes, its tokens at the step's end. */
  private completeGroupStep(step: GroupStep): void {
    const g = step.group;
    g.busy = false;
    const steps = step.steps;
    for (let i = 0; i < g.ranks.length; i++) {
      const w = g.ranks[i]!;
      w.busy = false;
      const s = steps[i];
      if (s !== undefined) this.effects.completePass(w, s, this.now, this.now);
    }
    g.endStep(step);
  }

  /**
   * The time before which a decode run of `w` may start its steps: nothing that could change what
   * the rank sees happens before it. An aggregated worker sees only requests placed on it, at
   * arrivals. A decode worker gets commands from prefill pass completions (reservations), from
   * transfer completions (activations) and from what follows arrivals; a prefill worker that
   * waits with work may start a pass after any event (a release frees its pages), so then every
   * pending event bounds the run.
   */
  private runHorizon(w: RankSlot): number {
    let t = this.nextArrivalMs;
    if (w.role === "aggregated") return t;
    const transfers = this.transferTimes;
    while (transfers.length > 0 && transfers.peek()! <= this.now) transfers.pop();
    if (transfers.length > 0) t = Math.min(t, transfers.peek()!);
    const net = this.network?.nextTimeMs();
    if (net !== undefined) t = Math.min(t, net);
    for (const fe of this.entryPool) {
      for (const p of fe.ranks) {
        if (p.busy) t = Math.min(t, p.passEndMs);
        else if (p.rank.hasWork()) t = Math.min(t, this.queue.nextTimeMs());
      }
    }
    return t;
  }

  /** Feeds one input to a request's coordinator and runs the actions it asks for. */
  feed(live: LiveRequest, input: HandoffInput): void {
    const h = live.handoff;
    if (h === undefined) throw new Error(`request ${live.req.id} has no handoff`);
    for (const action of h.on(input)) this.execute(live, h, action);
  }

  /** Sends a handoff's command to a worker, feeds the outcome back (`what`, when it waits for one), applies its effects. */
  private command(live: LiveRequest, w: RankSlot, c: Command, what: CommandAction | undefined): void {
    const outcome = this.submit(w, c);
    if (what !== undefined) {
      this.feed(
        live,
        outcome.ok
          ? { type: "outcome", action: what, atMs: this.now, ok: true }
          : { type: "outcome", action: what, atMs: this.now, ok: false, reason: outcome.reason },
      );
    }
    if (outcome.ok) this.effects.apply(w, outcome.effects, this.now, this.now);
  }

  private execute(live: LiveRequest, h: HandoffCoordinator, action: HandoffAction): void {
    const id = live.req.id;
    switch (action.type) {
      case "submit_prefill": {
        const w = this.placeEntry(live);
        // The hidden prefill request: the prompt with an output limit of one token.
        this.command(live, w, { type: "submit_handoff_prefill", handoffId: id, request: this.requestInput(live, 1) }, "submit_prefill");
        return;
      }
      case "reserve_destination": {
        const placed = this.topology.decodePlacement!.place(live.prompt);
        live.decodePlaced = placed;
        this.topology.decodeTally!.placed(placed.index);
        const w = rankOf(this.topology.decodePool[placed.index]!);
        live.decode = w;
        this.command(live, w, { type: "reserve_destination", handoffId: id, request: this.requestInput(live, live.req.outputTokens) }, "reserve_destination");
        return;
      }
      case "start_transfer": {
        const priced = h.priced!;
        if (this.network !== undefined) {
          // The network times it; the collector counts it now and takes its delay from the network.
          this.collector.onTransferStarted(priced.payloadBytes, 0);
          this.sampler?.onTransferStarted();
          live.transfer = this.network.request(this.now, live, live.entry!.id, live.decode!.id, priced.payloadBytes);
          return;
        }
        if (!(action.delayMs >= 0) || !Number.isFinite(action.delayMs)) throw new Error(`request ${id}: transfer delay ${action.delayMs} ms`);
        this.collector.onTransferStarted(priced.payloadBytes, action.delayMs);
        this.sampler?.onTransferStarted();
        this.queue.push(this.now + action.delayMs, Phase.transferCompletion, Stage.decode, live.decode!.order, { kind: "transfer", live });
        if (this.fastDecode) this.transferTimes.push(this.now + action.delayMs);
        return;
      }
      case "activate_destination":
        this.command(live, live.decode!, { type: "activate_destination", handoffId: id }, "activate_destination");
        return;
      case "release_source":
        this.command(live, live.entry!, { type: "release_source", handoffId: id }, "release_source");
        return;
      case "cancel_source":
        this.command(live, live.entry!, { type: "cancel_source", handoffId: id }, undefined);
        return;
      case "cancel_destination":
        this.command(live, live.decode!, { type: "cancel_destination", handoffId: id }, undefined);
        return;
      case "complete":
        if (!action.ok) {
          if (live.rejected !== undefined) this.ledger.terminate(live, "rejected", live.rejected, this.now);
          else this.ledger.terminate(live, "failed", action.reason, this.now);
        }
        return;
    }
  }
}
