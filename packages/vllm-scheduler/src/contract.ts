/**
 * The public shapes of one vLLM rank: commands in, outcomes out; `step(now)` plans one forward pass
 * and returns its duration and effects. The replay engine and the Dynamo adapter are written
 * against these.
 */
import type { KvEvent, PromptTokens } from "@kvsim/kv-pool";
import type { KvOffload } from "@kvsim/kv-offload";
import type { EngineSettings, Profile, Timing, TransferMode } from "@kvsim/profile-schema";
import type { TransferTerms } from "@kvsim/transfer-rules";

export type RankRole = "aggregated" | "prefill" | "decode";

export interface RankConfig {
  readonly role: RankRole;
  readonly profile: Profile;
  readonly engine: EngineSettings;
  readonly timing: Timing;
  /** Prefill ranks: how SourceHeld terms are priced (the spec's kv_transfer). */
  readonly kvTransfer?: { readonly mode: TransferMode; readonly bandwidthGbps?: number };
  /** Collect KV events into step and command effects. */
  readonly collectKvEvents?: boolean;
  /**
   * Offload tiers below the pool (kv-offload's KvOffload, built for this rank's cache groups; its
   * tiers may be shared with other ranks). Absent: the GPU pool only.
   */
  readonly offload?: KvOffload;
}

export interface RequestInput {
  readonly id: string;
  readonly prompt: PromptTokens;
  /** Output tokens to generate (the request finishes after this many). */
  readonly maxOutputTokens: number;
}

export type Command =
  | { readonly type: "submit"; readonly request: RequestInput }
  | { readonly type: "submit_handoff_prefill"; readonly handoffId: string; readonly request: RequestInput }
  | { readonly type: "release_source"; readonly handoffId: string }
  | { readonly type: "cancel_source"; readonly handoffId: string }
  | { readonly type: "reserve_destination"; readonly handoffId: string; readonly request: RequestInput }
  | { readonly type: "activate_destination"; readonly handoffId: string }
  | { readonly type: "cancel_destination"; readonly handoffId: string }
  | { readonly type: "cancel_request"; readonly requestId: string };

export type CommandType = Command["type"];

/** A fact a rank reports to the handoff coordinator. */
export type LifecycleFact =
  | {
      readonly type: "source_held";
      readonly handoffId: string;
      readonly requestId: string;
      readonly terms: TransferTerms;
      /** Pages the source holds until release_source or cancel_source. */
      readonly heldPages: number;
      /** Pages freed at completion before the hold (window blocks below the window, Mamba-type blocks but the running one, 0.32.0 checkpoints). */
      readonly releasedPages: number;
    }
  | {
      readonly type: "destination_reserved";
      readonly handoffId: string;
      readonly requestId: string;
      /** Missing units: full-attention blocks on a grouped rank, block-rounded tokens on a linear rank. */
      readonly missing: { readonly unit: "block"; readonly units: number } | { readonly unit: "token"; readonly units: number };
      /** The destination's own prefix hit in tokens. */
      readonly hitTokens: number;
    };

export interface TokenEmitted {
  readonly requestId: string;
  /** 0-based index of the output token. */
  readonly index: number;
  readonly atMs: number;
}

export interface Admission {
  readonly requestId: string;
  /** Prefix-cache hit tokens at this admission. */
  readonly reusedTokens: number;
  /** True for a request re-admitted after a preemption. */
  readonly resumed: boolean;
}

/** A request started loading prefix blocks from the offload tiers (it waits for them, as vLLM's WAITING_FOR_REMOTE_KVS). */
export interface OffloadLoadStarted {
  readonly requestId: string;
  /** Its GPU prefix hit, tokens. */
  readonly gpuHitTokens: number;
  /** Tokens it holds computed once the load is done (the GPU hit plus the tiers' part). */
  readonly tokens: number;
  /** Per tier (the spec's order), the prompt tokens it serves. */
  readonly tokensPerTier: readonly number[];
  /** Per tier, the bytes it loads (one TP rank's). */
  readonly bytesPerTier: readonly number[];
  readonly startMs: number;
  /** When the last byte is in the GPU pool: the request's prefill goes on from then. */
  readonly doneMs: number;
}

export interface RankMetrics {
  readonly running: number;
  readonly waiting: number;
  readonly pagesUsed: number;
  readonly pagesFree: number;
  readonly usage: number;
}

/** Everything a command or a step changed, for the driver to act on. */
export interface Effects {
  readonly tokens: readonly TokenEmitted[];
  readonly admissions: readonly Admission[];
  readonly preemptions: readonly { readonly requestId: string }[];
  readonly rejections: readonly { readonly requestId: string; readonly reason: string }[];
  /** Requests that produced their last token (or ended without one) and left the rank. */
  readonly finished: readonly { readonly requestId: string }[];
  readonly lifecycle: readonly LifecycleFact[];
  /** Loads from the offload tiers started (empty without tiers). */
  readonly offloadLoads: readonly OffloadLoadStarted[];
  readonly kvEvents: readonly KvEvent[];
  readonly metrics: RankMetrics;
}

export type CommandOutcome =
  | { readonly ok: true; readonly result: "submitted" | "accepted" | "applied" | "noop"; readonly effects: Effects }
  | { readonly ok: false; readonly reason: string };

/** Tokens one request computes in a pass. */
export interface ScheduledWork {
  readonly requestId: string;
  readonly tokens: number;
}

export interface StepResult {
  readonly startMs: number;
  readonly durationMs: number;
  readonly endMs: number;
  readonly prefillMs: number;
  readonly decodeMs: number;
  readonly scheduledTokens: number;
  /** Per request, in scheduling order (running requests first, then admissions). */
  readonly scheduled: readonly ScheduledWork[];
  /** Profile-table timing queries of this pass that fell outside the grid and were clamped (0 or more). */
  readonly clampedTimingQueries: number;
  readonly effects: Effects;
}
