import fc from "fast-check";
import { describe, expect, it } from "vitest";
import type { KvSequence } from "./contract.js";
import { createPathPrompt, createPromptTokens } from "./prompt-tokens.js";
import { group, manager, propRuns, tablesOf } from "./test-helpers.js";

/*
 * A sequence whose outputs come from an id function (appended by count) against a twin whose
 * same ids are appended one by one, on twin managers driven by the same random steps: every
 * prefix hit, block table, KV event and pool metric must be equal after every step. Several
 * sequences hash their outputs in turn, through the one array the generated ids are written to.
 */
type Op =
  /** Sequence slot i starts (dropping the one there): a token or path prompt over a small alphabet (so prompts share prefixes). */
  | { readonly t: "start"; readonly i: number; readonly tokens: readonly number[]; readonly path: boolean; readonly seed: number }
  /** Slot i appends n outputs and computes every token it has (allocate, then commit). */
  | { readonly t: "step"; readonly i: number; readonly n: number }
  /** Slot i is freed. */
  | { readonly t: "free"; readonly i: number };

const opArb: fc.Arbitrary<Op> = fc.oneof(
  {
    weight: 2,
    arbitrary: fc.record({
      t: fc.constant("start" as const),
      i: fc.nat(2),
      tokens: fc.array(fc.integer({ min: 1, max: 3 }), { minLength: 1, maxLength: 14 }),
      path: fc.boolean(),
      seed: fc.integer({ min: 0, max: 3 }),
    }),
  },
  { weight: 5, arbitrary: fc.record({ t: fc.constant("step" as const), i: fc.nat(2), n: fc.integer({ min: 1, max: 9 }) }) },
  { weight: 1, arbitrary: fc.record({ t: fc.constant("free" as const), i: fc.nat(2) }) },
);

/** Output k's id for a seed: four seeds share their first ids two by two (shared output blocks), some ids above 2^31. */
const idOf = (seed: number, k: number): number => (k < 4 ? (seed >> 1) * 7 + k : (Math.imul(seed + 1, 0x9e3779b1) ^ k) >>> 0);

const layouts = [[group("full_attention", 4)], [group("full_attention", 4), group("sliding_window", 4, { window_tokens: 8 })]];

describe("outputTokenIds against appendToken", () => {
  it("gives the same hits, tables, events and metrics", () => {
    fc.assert(
      fc.property(fc.constantFrom(0, 1), fc.boolean(), fc.array(opArb, { minLength: 1, maxLength: 40 }), (layout, events, ops) => {
        const gen = manager(48, layouts[layout]!, { events });
        const twin = manager(48, layouts[layout]!, { events });
        const slots: ({ g: KvSequence; e: KvSequence; seed: number; computed: number } | undefined)[] = [undefined, undefined, undefined];
        let n = 0;
        for (const op of ops) {
          const s = slots[op.i];
          if (op.t === "start") {
            if (s !== undefined) {
              gen.free(s.g);
              twin.free(s.e);
            }
            const prompt = () =>
              op.path ? createPathPrompt(Uint32Array.from(op.tokens), op.tokens.length * 2 - 1, 2) : createPromptTokens(Uint32Array.from(op.tokens));
            const id = `r${n++}`;
            const seed = op.seed;
            slots[op.i] = { g: gen.createSequence(id, prompt(), (k) => idOf(seed, k)), e: twin.createSequence(id, prompt()), seed, computed: 0 };
          } else if (s !== undefined && op.t === "step") {
            const first = s.e.numTokens - s.e.numPromptTokens;
            s.g.appendOutputs(op.n);
            for (let k = first; k < first + op.n; k++) s.e.appendToken(idOf(s.seed, k));
            const hitG = s.computed === 0 ? gen.findPrefixHit(s.g) : undefined;
            const hitE = s.computed === 0 ? twin.findPrefixHit(s.e) : undefined;
            expect(hitG?.tokens).toBe(hitE?.tokens);
            // A first step takes its hit (which the request's computed tokens do not count).
            const fresh = s.e.numTokens - s.computed - (hitE?.tokens ?? 0);
            const req = (hit: typeof hitG) => ({ computedTokens: s.computed, newTokens: fresh, ...(hit === undefined ? {} : { hit }) });
            const ok = gen.allocateSlots(s.g, req(hitG));
            expect(twin.allocateSlots(s.e, req(hitE))).toBe(ok);
            if (ok) {
              gen.commitComputed(s.g, s.e.numTokens);
              twin.commitComputed(s.e, s.e.numTokens);
              s.computed = s.e.numTokens;
            } else {
              gen.free(s.g);
              twin.free(s.e);
              slots[op.i] = undefined;
            }
          } else if (s !== undefined && op.t === "free") {
            gen.free(s.g);
            twin.free(s.e);
            slots[op.i] = undefined;
          }
          for (const live of slots) if (live !== undefined) expect(tablesOf(live.g)).toEqual(tablesOf(live.e));
          expect(gen.takeEvents()).toEqual(twin.takeEvents());
          expect(gen.metrics()).toEqual(twin.metrics());
        }
        // Probes: a token prompt holding each seed's first 12 outputs after a shared prompt.
        for (let seed = 0; seed < 4; seed++) {
          for (const head of [[1], [1, 2, 3, 1], [2, 2]]) {
            const tokens = Uint32Array.from([...head, ...Array.from({ length: 12 }, (_, k) => idOf(seed, k)), 9]);
            expect(gen.peekPrefixHitTokens(createPromptTokens(tokens))).toBe(twin.peekPrefixHitTokens(createPromptTokens(tokens)));
          }
        }
      }),
      { seed: 20261202, numRuns: propRuns(300) },
    );
  });
});
