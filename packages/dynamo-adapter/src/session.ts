import { createPromptTokens } from "@kvsim/kv-pool";
import { InputError, MAX_REQUEST_TOKENS, blocks, cdiv, isGroupedProfile, tokens, type Profile, type Tokens } from "@kvsim/profile-schema";
import { sourceTerms, withDestination } from "@kvsim/transfer-rules";
import {
  Rank,
  RankConfigError,
  TimingRefusedError,
  sampledTokenId,
  type Command,
  type Effects,
  type LifecycleFact,
  type RankMetrics,
  type RequestInput,
  type StepResult,
} from "@kvsim/vllm-scheduler";
import { fromMockEngineArgs, toMockEngineArgs, type KvsimEngineArgs, type MockEngineArgs, type WorkerType } from "./engine-args.js";
import {
  dynamoTimingIssues,
  handoffDelayMs,
  parseHandoffTiming,
  startTransferDelayMs,
  toDynamoTiming,
  transferablePromptTokens,
  transferTimingFor,
  type DestinationTransfer,
  type HandoffTransferTiming,
} from "./handoff-timing.js";
import { describeJson, stringifyJsonExact, type JsonValue } from "./json-u64.js";
import { RouterEventPublisher, routerGroupIndex, type RouterKvEvent } from "./kv-events.js";
import { parseLine, type ProtocolCommand, type ProtocolErrorCode, type ProtocolRequest, type RequestId } from "./protocol.js";

/**
 * A kvsim rank behind the line-delimited JSON protocol (see the package README for a transcript).
 * Pure: no I/O, no clock; the driver sends the time with every `step`.
 */

export interface EngineSessionOptions {
  readonly profile: Profile;
  readonly role: WorkerType;
  /** Dynamo `MockEngineArgs` JSON, already parsed; its worker_type, if any, must agree with `role`. */
  readonly engineArgs?: unknown;
  /** Names the engine args in errors (a file path, or `--engine`). */
  readonly engineArgsLabel?: string;
  /** Names the profile in errors (its file path). */
  readonly profileLabel?: string;
  /** The attention-DP rank stamped on KV events (default 0). */
  readonly dpRank?: number;
}

export interface EngineSession {
  /** The settings the rank runs with, as normalised Dynamo engine args. */
  readonly engineArgs: MockEngineArgs;
  /** Handles one request line and returns one response line (without a newline). Never throws. */
  handleLine(line: string): string;
}

/** One Dynamo-shaped engine output: a token, a completion without a token, or a rejection. */
interface ProtocolOutput {
  readonly request_id: string;
  readonly token_id: number | null;
  readonly index: number | null;
  readonly completed: boolean;
  readonly rejected: boolean;
  readonly at_ms: number | null;
  readonly reason?: string;
}

type LifecycleEvent =
  | {
      readonly source_held: {
        readonly handoff_id: string;
        readonly request_id: string;
        readonly transfer_timing: HandoffTransferTiming;
        readonly held_blocks: number;
      };
    }
  | {
      readonly destination_reserved: {
        readonly handoff_id: string;
        readonly request_id: string;
        readonly transferable_prompt_tokens: number;
        /** kvsim extension: the fixed bytes this destination still needs (0 on a full hit). */
        readonly kv_bytes_per_request: number;
        readonly hit_tokens: number;
      };
    };

interface ProtocolEffects {
  readonly admissions: readonly { readonly request_id: string; readonly reused_input_tokens: number; readonly resumed: boolean }[];
  readonly outputs: readonly ProtocolOutput[];
  readonly preemptions: readonly { readonly request_id: string }[];
  readonly lifecycle_events: readonly LifecycleEvent[];
  readonly kv_events: readonly RouterKvEvent[];
  readonly metrics: ProtocolMetrics;
}

interface ProtocolMetrics {
  readonly num_running: number;
  readonly num_waiting: number;
  readonly active_blocks: number;
  readonly free_blocks: number;
  readonly cache_usage: number;
  /** A step could schedule work now (running or waiting requests). */
  readonly has_work: boolean;
  /** The rank holds nothing: no request, held source or destination. */
  readonly drained: boolean;
}

class Refusal extends Error {
  constructor(
    readonly code: ProtocolErrorCode,
    message: string,
  ) {
    super(message);
  }
}

const ROLE_KEYS = ["worker_type", "is_prefill", "is_decode"];

/**
 * Builds a rank for `profile` in `role` from Dynamo engine args. Throws `InputError` (naming the
 * field) when the args are invalid, disagree with the role, or the rank cannot serve the role with
 * this profile; a prefill rank whose terms have no exact Dynamo form is refused here, before any
 * request, rather than at its first SourceHeld.
 */
export function createEngineSession(options: EngineSessionOptions): EngineSession {
  const label = options.engineArgsLabel ?? "<engine args>";
  const raw: unknown = options.engineArgs ?? {};
  const parsed = fromMockEngineArgs(raw, options.profile, label);
  // fromMockEngineArgs accepted it, so it is an object.
  const explicitRole = ROLE_KEYS.some((k) => Object.hasOwn(raw as object, k));
  if (explicitRole && parsed.role !== options.role) {
    throw new InputError(label, [{ path: "worker_type", message: `says ${parsed.role} but the session serves the ${options.role} role` }]);
  }
  const args: KvsimEngineArgs = { ...parsed, role: options.role };
  const dynamoArgs = toMockEngineArgs(args, options.profile);
  if (!dynamoArgs.ok) throw new InputError(label, [{ path: "", message: dynamoArgs.reason }]);
  let rank: Rank;
  try {
    rank = new Rank({
      role: args.role,
      profile: options.profile,
      engine: args.engine,
      timing: args.timing,
      kvTransfer: args.kvTransfer,
      collectKvEvents: true,
    });
  } catch (e) {
    if (e instanceof RankConfigError)
      throw new InputError(
        options.profileLabel ?? "<profile>",
        e.problems.map((p) => ({ path: p.path, message: p.message })),
        { cause: e },
      );
    throw e;
  }
  if (args.role === "prefill") {
    const issues = dynamoTimingIssues(options.profile);
    if (issues.length > 0)
      throw new InputError(
        options.profileLabel ?? "<profile>",
        issues.map((i) => ({ ...i, message: `${i.message} (a prefill session reports Dynamo's transfer timing)` })),
      );
  }
  return new Session(options.profile, args, dynamoArgs.value, rank, new RouterEventPublisher(routerGroupIndex(options.profile), options.dpRank ?? 0));
}

class Session implements EngineSession {
  private poisoned: string | undefined;
  /** End of the last pass: a step may not start before it. */
  private lastEndMs = 0;
  /** Destination handoffs not yet reserved: their prompt length, to price the fixed bytes they lack. */
  private readonly pendingDestinations = new Map<string, { readonly promptTokens: number; readonly requestId: string }>();
  /** Request id -> its pending destination handoff id (cleanup on cancel_request and rejection). */
  private readonly pendingByRequest = new Map<string, string>();
  /** A linear profile's engine block size (its missing tokens are counted in these blocks). */
  private readonly linearBlockSize: number | undefined;

  constructor(
    private readonly profile: Profile,
    private readonly args: KvsimEngineArgs,
    readonly engineArgs: MockEngineArgs,
    private readonly rank: Rank,
    private readonly events: RouterEventPublisher,
  ) {
    this.linearBlockSize = isGroupedProfile(profile) ? undefined : engineArgs.block_size;
  }

  handleLine(line: string): string {
    let parsed: ReturnType<typeof parseLine>;
    try {
      parsed = parseLine(line);
    } catch (e) {
      // parseLine answers every line; reaching here is a bug in it, not a reason to die.
      return this.error(null, "invalid_request", `the line could not be read: ${e instanceof Error ? e.message : String(e)}`);
    }
    if (!parsed.ok) return this.error(parsed.id, parsed.code, parsed.message);
    try {
      return stringifyJsonExact({ id: parsed.id, ok: true, ...this.handle(parsed.command) });
    } catch (e) {
      if (e instanceof Refusal) return this.error(parsed.id, e.code, e.message);
      if (e instanceof TimingRefusedError) {
        // timing outside_grid "refuse": the pass was planned but not priced, so the rank stopped mid-step.
        this.poisoned = e.message;
        return this.error(parsed.id, "timing_refused", `${e.message} (the rank stopped in the middle of this pass: the session refuses every later command)`);
      }
      // A broken invariant: the rank's state can no longer be trusted.
      const why = e instanceof Error ? e.message : String(e);
      this.poisoned = why;
      return this.error(parsed.id, "internal_error", `${why} (the session refuses every later command)`);
    }
  }

  private error(id: RequestId | null, code: ProtocolErrorCode, message: string): string {
    return stringifyJsonExact({ id, ok: false, error: { code, message } });
  }

  private handle(cmd: ProtocolCommand): Record<string, unknown> {
    switch (cmd.op) {
      case "metrics":
        return { metrics: this.metrics(this.rank.metrics()) };
      case "info":
        return { role: this.args.role, engine_args: this.engineArgs, router_group_index: this.events.groupIndex ?? null, dp_rank: this.events.dpRank };
      case "handoff_delay":
        return this.handoffDelay(cmd.transfer_timing, cmd.destination_reserved);
      case "step":
        return this.step(cmd.now_ms);
      case "submit":
      case "submit_handoff_prefill":
      case "reserve_destination":
      case "activate_destination":
      case "cancel_destination":
      case "release_source":
      case "cancel_source":
      case "cancel_request":
        return this.command(cmd);
    }
  }

  private assertLive(): void {
    if (this.poisoned !== undefined) throw new Refusal("session_poisoned", `an earlier internal error poisoned the session: ${this.poisoned}`);
  }

  private command(cmd: Exclude<ProtocolCommand, { op: "step" | "metrics" | "info" | "handoff_delay" }>): Record<string, unknown> {
    this.assertLive();
    let command: Command;
    switch (cmd.op) {
      case "submit":
        command = { type: "submit", request: requestInput(cmd.request) };
        break;
      case "submit_handoff_prefill":
        command = { type: "submit_handoff_prefill", handoffId: cmd.handoff_id, request: requestInput(cmd.request) };
        break;
      case "reserve_destination":
        command = { type: "reserve_destination", handoffId: cmd.handoff_id, request: requestInput(cmd.request) };
        break;
      case "activate_destination":
      case "cancel_destination":
      case "release_source":
      case "cancel_source":
        command = { type: cmd.op, handoffId: cmd.handoff_id };
        break;
      case "cancel_request":
        command = { type: "cancel_request", requestId: cmd.request_id };
        break;
    }
    const outcome = this.rank.submit(command);
    if (!outcome.ok) throw new Refusal("command_refused", outcome.reason);
    if (cmd.op === "reserve_destination") {
      this.pendingDestinations.set(cmd.handoff_id, { promptTokens: cmd.request.tokens.length, requestId: cmd.request.request_id });
      this.pendingByRequest.set(cmd.request.request_id, cmd.handoff_id);
    }
    if (cmd.op === "cancel_destination") this.forgetPending(this.pendingDestinations.get(cmd.handoff_id)?.requestId);
    if (cmd.op === "cancel_request") this.forgetPending(cmd.request_id);
    return { result: outcome.result, effects: this.effects(outcome.effects) };
  }

  private forgetPending(requestId: string | undefined): void {
    if (requestId === undefined) return;
    const handoffId = this.pendingByRequest.get(requestId);
    if (handoffId === undefined) return;
    this.pendingByRequest.delete(requestId);
    this.pendingDestinations.delete(handoffId);
  }

  private step(nowMs: number): Record<string, unknown> {
    this.assertLive();
    if (nowMs < this.lastEndMs) {
      throw new Refusal("invalid_time", `now_ms ${nowMs} is before the end of the last pass (${this.lastEndMs} ms)`);
    }
    const r: StepResult | undefined = this.rank.step(nowMs);
    if (r === undefined) return { result: "idle", pass: null, effects: this.effects(undefined) };
    this.lastEndMs = r.endMs;
    return {
      result: "pass",
      pass: {
        start_ms: r.startMs,
        end_ms: r.endMs,
        duration_ms: r.durationMs,
        prefill_ms: r.prefillMs,
        decode_ms: r.decodeMs,
        scheduled_tokens: r.scheduledTokens,
      },
      effects: this.effects(r.effects),
    };
  }

  private handoffDelay(timingJson: JsonValue, destinationJson: JsonValue | undefined): Record<string, unknown> {
    const timing = parseHandoffTiming(timingJson);
    if (!timing.ok) throw new Refusal("invalid_request", timing.reason);
    // Token counts are rounded up to whole blocks: full-attention blocks, or a linear rank's engine blocks.
    const unit = isGroupedProfile(this.profile) ? fullAttentionBlock(this.profile) : (this.linearBlockSize ?? 1);
    const maxTokens = cdiv(MAX_REQUEST_TOKENS, unit) * unit;
    if (timing.value.full_prompt_tokens > maxTokens) {
      throw new Refusal(
        "invalid_request",
        `transfer_timing.full_prompt_tokens must be at most ${maxTokens} (the longest prompt, 2^24 tokens, in whole ${unit}-token blocks), got ${timing.value.full_prompt_tokens}`,
      );
    }
    let destination: DestinationTransfer | undefined;
    if (destinationJson !== undefined) {
      const d = destinationJson;
      if (typeof d !== "object" || d === null || Array.isArray(d)) throw new Refusal("invalid_request", "destination_reserved must be an object");
      const o = d as Readonly<Record<string, JsonValue>>;
      const t = o.transferable_prompt_tokens;
      const req = o.kv_bytes_per_request;
      if (typeof t !== "number" || !Number.isSafeInteger(t) || t < 0) {
        throw new Refusal("invalid_request", `destination_reserved.transferable_prompt_tokens must be an integer >= 0, got ${describeJson(t)}`);
      }
      if (req !== undefined && (typeof req !== "number" || !Number.isSafeInteger(req) || req < 0)) {
        throw new Refusal("invalid_request", `destination_reserved.kv_bytes_per_request must be an integer >= 0, got ${describeJson(req)}`);
      }
      const whole = cdiv(timing.value.full_prompt_tokens, unit) * unit;
      if (t > whole) {
        throw new Refusal(
          "invalid_request",
          `destination_reserved.transferable_prompt_tokens must be at most ${whole} (transfer_timing.full_prompt_tokens in whole ${unit}-token blocks): a destination cannot lack more than the whole prompt, got ${t}`,
        );
      }
      destination = req === undefined ? { transferable_prompt_tokens: t } : { transferable_prompt_tokens: t, kv_bytes_per_request: req };
    }
    const charged = destination === undefined ? timing.value : transferTimingFor(timing.value, destination);
    let delay: number | undefined;
    try {
      delay = handoffDelayMs(timing.value, destination);
    } catch (e) {
      // A payload beyond 2^53 bytes: the input's fault, not the session's.
      if (e instanceof RangeError) throw new Refusal("invalid_request", e.message);
      throw e;
    }
    const setup = this.args.kvTransfer.setupLatencyMs;
    // The setup latency goes into the delay the driver schedules (StartTransfer.delay_ms).
    if (setup !== undefined) return { delay_ms: startTransferDelayMs(timing.value, destination, setup), setup_latency_ms: setup, transfer_timing: charged };
    return { delay_ms: delay ?? null, transfer_timing: charged };
  }

  private effects(fx: Effects | undefined): ProtocolEffects {
    if (fx === undefined) {
      return { admissions: [], outputs: [], preemptions: [], lifecycle_events: [], kv_events: [], metrics: this.metrics(this.rank.metrics()) };
    }
    const finished = new Set(fx.finished.map((f) => f.requestId));
    // The last token of a finished request in this batch carries completed = true.
    const lastTokenOf = new Map<string, number>();
    fx.tokens.forEach((t, i) => lastTokenOf.set(t.requestId, i));
    const outputs: ProtocolOutput[] = fx.tokens.map((t, i) => ({
      request_id: t.requestId,
      token_id: sampledTokenId(t.requestId, t.index),
      index: t.index,
      completed: finished.has(t.requestId) && lastTokenOf.get(t.requestId) === i,
      rejected: false,
      at_ms: t.atMs,
    }));
    for (const id of finished) {
      if (!lastTokenOf.has(id)) outputs.push({ request_id: id, token_id: null, index: null, completed: true, rejected: false, at_ms: null });
    }
    for (const r of fx.rejections) {
      this.forgetPending(r.requestId);
      outputs.push({ request_id: r.requestId, token_id: null, index: null, completed: false, rejected: true, at_ms: null, reason: r.reason });
    }
    return {
      admissions: fx.admissions.map((a) => ({ request_id: a.requestId, reused_input_tokens: a.reusedTokens, resumed: a.resumed })),
      outputs,
      preemptions: fx.preemptions.map((p) => ({ request_id: p.requestId })),
      lifecycle_events: fx.lifecycle.map((f) => this.lifecycle(f)),
      kv_events: this.events.publish(fx.kvEvents),
      metrics: this.metrics(fx.metrics),
    };
  }

  private lifecycle(fact: LifecycleFact): LifecycleEvent {
    if (fact.type === "source_held") {
      const timing = toDynamoTiming(fact.terms);
      // createEngineSession checked that this profile's terms have an exact Dynamo form.
      if (!timing.ok) throw new Error(`source_held ${fact.handoffId}: ${timing.reason}`);
      return { source_held: { handoff_id: fact.handoffId, request_id: fact.requestId, transfer_timing: timing.value, held_blocks: fact.heldPages } };
    }
    const pending = this.pendingDestinations.get(fact.handoffId);
    if (pending === undefined) throw new Error(`destination_reserved for handoff ${fact.handoffId}, which this session did not reserve`);
    this.forgetPending(pending.requestId);
    const transferable =
      fact.missing.unit === "block" ? transferablePromptTokens(blocks(fact.missing.units), fullAttentionBlock(this.profile)) : fact.missing.units;
    return {
      destination_reserved: {
        handoff_id: fact.handoffId,
        request_id: fact.requestId,
        transferable_prompt_tokens: transferable,
        kv_bytes_per_request: this.missingFixedBytes(pending.promptTokens, fact.hitTokens),
        hit_tokens: fact.hitTokens,
      },
    };
  }

  /** The window and state bytes a destination holding `hit` tokens still needs for an N-token prompt. */
  private missingFixedBytes(n: number, hit: number): number {
    const opts = { mode: "destination_missing" as const, blockSizeTokens: this.linearBlockSize };
    const terms = withDestination(sourceTerms(this.profile, tokens(n), opts), this.profile, tokens(hit), opts);
    return terms.missing?.fixedBytes ?? 0;
  }

  private metrics(m: RankMetrics): ProtocolMetrics {
    return {
      num_running: m.running,
      num_waiting: m.waiting,
      active_blocks: m.pagesUsed,
      free_blocks: m.pagesFree,
      cache_usage: m.usage,
      has_work: this.rank.hasWork(),
      drained: this.rank.isDrained(),
    };
  }
}

function fullAttentionBlock(profile: Profile): Tokens {
  const g = profile.kv_cache_groups?.find((x) => x.kind === "full_attention");
  if (g === undefined) throw new Error("a grouped destination without a full-attention group reported missing blocks");
  return tokens(g.block_size_tokens);
}

function requestInput(r: ProtocolRequest): RequestInput {
  return { id: r.request_id, prompt: createPromptTokens(Uint32Array.from(r.tokens)), maxOutputTokens: r.max_output_tokens };
}
