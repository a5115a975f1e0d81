// The effects of one step or command as they are collected (contract.ts's `Effects` when built).
import type { KvEvent } from "@kvsim/kv-pool";
import type { Admission, Effects, LifecycleFact, OffloadLoadStarted, RankMetrics, TokenEmitted } from "./contract.js";

/** The empty list every effect list starts as (see EffectsBuilder); never written. */
const NONE: never[] = [];

/** Appends to an effect list, making it at its first entry. */
function append<T>(list: T[], item: T): T[] {
  const out = list === NONE ? [] : list;
  out.push(item);
  return out;
}

/**
 * The effects of one step or command. Each list is the shared empty one until its first entry:
 * most steps and commands fill one or two of the six, and one builder is made per step and per
 * command.
 */
export class EffectsBuilder {
  tokens: TokenEmitted[] = NONE;
  admissions: Admission[] = NONE;
  preemptions: { readonly requestId: string }[] = NONE;
  rejections: { readonly requestId: string; readonly reason: string }[] = NONE;
  finished: { readonly requestId: string }[] = NONE;
  lifecycle: LifecycleFact[] = NONE;
  offloadLoads: OffloadLoadStarted[] = NONE;

  token(t: TokenEmitted): void {
    this.tokens = append(this.tokens, t);
  }

  admission(a: Admission): void {
    this.admissions = append(this.admissions, a);
  }

  preemption(requestId: string): void {
    this.preemptions = append(this.preemptions, { requestId });
  }

  rejection(requestId: string, reason: string): void {
    this.rejections = append(this.rejections, { requestId, reason });
  }

  finish(requestId: string): void {
    this.finished = append(this.finished, { requestId });
  }

  fact(f: LifecycleFact): void {
    this.lifecycle = append(this.lifecycle, f);
  }

  offloadLoad(l: OffloadLoadStarted): void {
    this.offloadLoads = append(this.offloadLoads, l);
  }

  get empty(): boolean {
    // Surviving mutants: VS-49 (MUTANTS.md).
    return (
      this.tokens.length === 0 &&
      this.admissions.length === 0 &&
      this.preemptions.length === 0 &&
      this.rejections.length === 0 &&
      this.finished.length === 0 &&
      this.lifecycle.length === 0 &&
      this.offloadLoads.length === 0
    );
  }

  build(kvEvents: readonly KvEvent[], metrics: RankMetrics): Effects {
    return {
      tokens: this.tokens,
      admissions: this.admissions,
      preemptions: this.preemptions,
      rejections: this.rejections,
      finished: this.finished,
      lifecycle: this.lifecycle,
      offloadLoads: this.offloadLoads,
      kvEvents,
      metrics,
    };
  }
}
