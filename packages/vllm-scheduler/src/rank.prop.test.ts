/**
 * Property tests: random command and step sequences on aggregated, prefill and decode ranks keep
 * the rank's invariants. The test keeps its own ledger of each request's computed tokens from the
 * effects (admissions set it to the reused tokens, scheduled work adds, preemptions reset it,
 * activation sets min(T, N - 1)) and checks every emitted token against it.
 */
import { createPromptTokens, type PromptTokens } from "@kvsim/kv-pool";
import { engineSettings, tokens, type EngineSettings, type Profile } from "@kvsim/profile-schema";
import { hybridProfile } from "./test-helpers.js";
import { transferredTokens } from "@kvsim/transfer-rules";
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import type { CommandOutcome, Effects, RankRole, StepResult } from "./contract.js";
import { Rank } from "./rank.js";

type Op =
  | { readonly t: "new"; readonly len: number; readonly family: number; readonly maxOut: number }
  | { readonly t: "step" }
  | { readonly t: "cancel"; readonly pick: number }
  | { readonly t: "release"; readonly pick: number }
  | { readonly t: "cancelHandoff"; readonly pick: number }
  | { readonly t: "activate"; readonly pick: number };

interface Setup {
  readonly role: RankRole;
  readonly profile: Profile;
  readonly engine: EngineSettings;
  readonly ops: readonly Op[];
}

const linear = (blockSize: number): { profile: Profile; blockSize: number } => ({
  profile: { schema_version: 1, model: "test/linear", vllm_version: "0.32.0", tensor_parallel_size: 1, kv_bytes_per_token: 10 },
  blockSize,
});

const opArb: fc.Arbitrary<Op> = fc.oneof(
  {
    weight: 3,
    arbitrary: fc.record({
      t: fc.constant("new" as const),
      len: fc.integer({ min: 1, max: 24 }),
      family: fc.integer({ min: 0, max: 2 }),
      maxOut: fc.integer({ min: 0, max: 5 }),
    }),
  },
  { weight: 6, arbitrary: fc.constant({ t: "step" as const }) },
  { weight: 1, arbitrary: fc.record({ t: fc.constant("cancel" as const), pick: fc.nat() }) },
  { weight: 1, arbitrary: fc.record({ t: fc.constant("release" as const), pick: fc.nat() }) },
  { weight: 1, arbitrary: fc.record({ t: fc.constant("cancelHandoff" as const), pick: fc.nat() }) },
  { weight: 2, arbitrary: fc.record({ t: fc.constant("activate" as const), pick: fc.nat() }) },
);

const setupArb: fc.Arbitrary<Setup> = fc
  .record({
    role: fc.constantFrom<RankRole>("aggregated", "prefill", "decode"),
    kind: fc.constantFrom("linear", "hybrid-0.31.0", "hybrid-0.32.0"),
    blockSize: fc.constantFrom(2, 4, 8),
    pages: fc.integer({ min: 8, max: 64 }),
    budget: fc.integer({ min: 8, max: 64 }),
    seqs: fc.integer({ min: 1, max: 4 }),
    threshold: fc.constantFrom(0, 0, 4, 12),
    chunked: fc.constantFrom(true, true, true, false),
    caching: fc.boolean(),
    maxModelLen: fc.constantFrom(undefined, undefined, undefined, 20, 40),
    fullIsl: fc.boolean(),
    asyncScheduling: fc.boolean(),
    ops: fc.array(opArb, { minLength: 5, maxLength: 60, size: "max" }),
  })
  .map((s) => {
    const lin = s.kind === "linear" ? linear(s.blockSize) : undefined;
    const profile = lin?.profile ?? hybridProfile(s.kind === "hybrid-0.32.0" ? "0.32.0" : "0.31.0");
    const engine = engineSettings({
      num_gpu_blocks: s.pages,
      max_num_batched_tokens: s.budget,
      max_num_seqs: s.seqs,
      long_prefill_token_threshold: s.threshold,
      enable_chunked_prefill: s.chunked,
      enable_prefix_caching: s.caching,
      ...(lin === undefined ? {} : { block_size: lin.blockSize }),
      ...(s.maxModelLen === undefined ? {} : { max_model_len: s.maxModelLen }),
      scheduler_reserve_full_isl: s.fullIsl,
      // Async scheduling is modelled on aggregated ranks only.
      async_scheduling: s.asyncScheduling && s.role === "aggregated",
    });
    return { role: s.role, profile, engine, ops: s.ops };
  });

/** Prompts of one family share their prefix, so later requests can hit earlier ones' blocks. */
const familyPrompt = (family: number, len: number): PromptTokens => createPromptTokens(Uint32Array.from({ length: len }, (_, i) => family * 100_000 + i));

/** Runs `setup` and checks every invariant; returns a transcript for the determinism check. */
function run(setup: Setup): unknown[] {
  const { role, profile, engine } = setup;
  const rank = new Rank({ role, profile, engine, timing: { type: "fixed", prefill_ms: 10, decode_ms: 2 } });
  const usable = engine.num_gpu_blocks - 1;
  const transcript: unknown[] = [];
  const promptLen = new Map<string, number>(); // prompt tokens on this rank (T for a source)
  const computed = new Map<string, number>();
  const transferred = new Map<string, { n: number; t: number }>(); // destination requests
  const accepted = new Set<string>();
  const ended = new Map<string, "finished" | "cancelled" | "rejected">();
  const handoffs: string[] = [];
  const emitted = new Map<string, number>();
  let nextId = 0;
  let now = 0;

  const checkMetrics = (fx: Effects) => {
    expect(fx.metrics.pagesUsed + fx.metrics.pagesFree).toBe(usable);
    expect(fx.metrics.running).toBeLessThanOrEqual(engine.max_num_seqs);
    if (rank.isDrained()) expect(rank.metrics().pagesUsed).toBe(0);
  };
  const end = (id: string, how: "finished" | "cancelled" | "rejected") => {
    expect(accepted.has(id)).toBe(true);
    expect(ended.has(id)).toBe(false);
    ended.set(id, how);
  };
  const command = (outcome: CommandOutcome): CommandOutcome => {
    transcript.push(outcome);
    if (outcome.ok) {
      checkMetrics(outcome.effects);
      for (const r of outcome.effects.rejections) end(r.requestId, "rejected");
      expect(outcome.effects.tokens).toEqual([]);
    }
    return outcome;
  };
  const step = (): StepResult | undefined => {
    const r = rank.step(now);
    transcript.push(r ?? "idle");
    if (r === undefined) return undefined;
    expect(r.startMs).toBe(now);
    expect(r.endMs).toBe(r.startMs + r.durationMs);
    expect(r.durationMs).toBeGreaterThanOrEqual(0);
    if (role === "prefill") expect(r.decodeMs).toBe(0);
    if (role === "decode") expect(r.prefillMs).toBe(0);
    expect(r.scheduledTokens).toBeLessThanOrEqual(engine.max_num_batched_tokens);
    expect(r.scheduled.reduce((s, w) => s + w.tokens, 0)).toBe(r.scheduledTokens);
    expect(r.scheduled.length).toBeLessThanOrEqual(engine.max_num_seqs);
    expect(new Set(r.scheduled.map((w) => w.requestId)).size).toBe(r.scheduled.length);
    checkMetrics(r.effects);
    if (engine.async_scheduling) {
      // The pass that runs was planned at the previous call and the admissions and preemptions
      // are those of the plan made now, so the computed ledger does not apply; tokens still come
      // in order, one index after the other, and never more than asked.
      for (const tok of r.effects.tokens) {
        expect(tok.index).toBe(emitted.get(tok.requestId) ?? 0);
        emitted.set(tok.requestId, tok.index + 1);
        expect(tok.atMs).toBe(r.endMs);
      }
    } else {
      for (const p of r.effects.preemptions) computed.set(p.requestId, 0);
      for (const a of r.effects.admissions) {
        // A destination's first admission keeps the computed count its activation set.
        if (a.resumed || !transferred.has(a.requestId)) computed.set(a.requestId, a.reusedTokens);
      }
      for (const w of r.scheduled) computed.set(w.requestId, computed.get(w.requestId)! + w.tokens);
      for (const tok of r.effects.tokens) {
        // Token k is sampled when the whole prompt and the k earlier outputs are computed.
        expect(computed.get(tok.requestId)).toBe(promptLen.get(tok.requestId)! + tok.index);
        expect(tok.atMs).toBe(r.endMs);
      }
    }
    for (const f of r.effects.finished) end(f.requestId, "finished");
    for (const rej of r.effects.rejections) end(rej.requestId, "rejected");
    now = r.endMs;
    return r;
  };
  const live = (ids: readonly string[], pick: number): string | undefined => {
    const open = ids.filter((id) => !ended.has(id));
    return open.length === 0 ? undefined : open[pick % open.length];
  };
  const handoffRequest = (h: string) => `r${h.slice(1)}`;

  for (const op of setup.ops) {
    switch (op.t) {
      case "new": {
        const id = `r${nextId}`;
        const h = `h${nextId}`;
        nextId++;
        const prompt = familyPrompt(op.family, op.len);
        const req = { id, prompt, maxOutputTokens: op.maxOut };
        accepted.add(id);
        computed.set(id, 0);
        if (role === "aggregated") {
          promptLen.set(id, op.len);
          command(rank.submit({ type: "submit", request: req }));
        } else if (role === "prefill") {
          promptLen.set(id, transferredTokens(profile, tokens(op.len)));
          handoffs.push(h);
          command(rank.submit({ type: "submit_handoff_prefill", handoffId: h, request: req }));
        } else {
          promptLen.set(id, op.len);
          transferred.set(id, { n: op.len, t: transferredTokens(profile, tokens(op.len)) });
          handoffs.push(h);
          command(rank.submit({ type: "reserve_destination", handoffId: h, request: req }));
        }
        break;
      }
      case "step":
        step();
        break;
      case "cancel": {
        const id = live([...accepted], op.pick);
        if (id === undefined) break;
        const out = command(rank.submit({ type: "cancel_request", requestId: id }));
        // A held source has finished already; its cancel frees the hold.
        if (out.ok && out.result === "applied" && !ended.has(id)) end(id, "cancelled");
        break;
      }
      case "release":
      case "cancelHandoff": {
        if (role === "aggregated" || handoffs.length === 0) break;
        const h = handoffs[op.pick % handoffs.length]!;
        const type =
          op.t === "release" ? (role === "prefill" ? "release_source" : "activate_destination") : role === "prefill" ? "cancel_source" : "cancel_destination";
        const out = command(rank.submit({ type, handoffId: h }));
        const id = handoffRequest(h);
        if (out.ok && out.result === "applied" && op.t === "cancelHandoff" && !ended.has(id)) end(id, "cancelled");
        if (out.ok && out.result === "applied" && type === "activate_destination") {
          const { n, t } = transferred.get(id)!;
          computed.set(id, Math.min(t, n - 1));
        }
        break;
      }
      case "activate": {
        if (role !== "decode" || handoffs.length === 0) break;
        const h = handoffs[op.pick % handoffs.length]!;
        const out = command(rank.submit({ type: "activate_destination", handoffId: h }));
        if (out.ok && out.result === "applied") {
          const { n, t } = transferred.get(handoffRequest(h))!;
          computed.set(handoffRequest(h), Math.min(t, n - 1));
        }
        break;
      }
    }
  }

  // Drain: sources are released (a pending one then frees its blocks when it completes),
  // destinations not yet activated are cancelled, and steps run until the rank is idle. Every
  // request then ended exactly once and no page is used.
  if (role === "prefill") for (const h of handoffs) command(rank.submit({ type: "release_source", handoffId: h }));
  if (role === "decode") {
    for (const h of handoffs) {
      const out = command(rank.submit({ type: "cancel_destination", handoffId: h }));
      // Only destinations that were activated stay (cancel of an activated one also drops it).
      if (out.ok && out.result === "applied" && !ended.has(handoffRequest(h))) end(handoffRequest(h), "cancelled");
    }
  }
  for (let i = 0; i < 10_000 && step() !== undefined; i++);
  expect(rank.hasWork()).toBe(false);
  expect(rank.isDrained()).toBe(true);
  expect(rank.metrics().pagesUsed).toBe(0);
  expect([...accepted].filter((id) => !ended.has(id))).toEqual([]);
  return transcript;
}

describe("rank properties", () => {
  it("random command and step sequences keep block conservation, the budget, max_num_seqs, token causality and request conservation", () => {
    fc.assert(fc.property(setupArb, (setup) => void run(setup)));
  });

  it("the same inputs give the same outcomes", () => {
    fc.assert(
      fc.property(setupArb, (setup) => {
        expect(run(setup)).toEqual(run(setup));
      }),
      { numRuns: 30 },
    );
  });
});
