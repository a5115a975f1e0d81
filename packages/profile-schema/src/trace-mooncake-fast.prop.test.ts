import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { MooncakeTraceLineSchema, parseTraceLine } from "./trace.js";

/**
 * Mooncake lines skip the schema when a hand check shows it would accept them. Whatever the line,
 * the result must be what the schema decides: the record built from its output when it accepts,
 * an error when it refuses.
 */
/** Large enough that a few ids cover any count the schema allows (2^24 tokens), so limits are what decide. */
const BLOCK = 2 ** 22;
const number = fc.oneof(
  fc.integer({ min: -3, max: 20 }),
  fc.constantFrom(0, 0.5, 1.5, 2 ** 24, 2 ** 24 + 1, Number.MAX_SAFE_INTEGER, Number.MAX_SAFE_INTEGER + 2, -0, 1e300),
  fc.double({ noNaN: true, noDefaultInfinity: true }),
);
const anyValue = fc.oneof(number, fc.constantFrom(null, true, "", " ", "s1", "12"), fc.array(number, { maxLength: 3 }));
const lineArb = fc.record(
  {
    timestamp: fc.oneof(number, anyValue),
    input_length: fc.oneof(fc.integer({ min: 1, max: 2000 }), anyValue),
    output_length: fc.oneof(fc.integer({ min: 1, max: 50 }), anyValue),
    hash_ids: fc.oneof(fc.array(fc.oneof(fc.nat({ max: 99 }), number), { maxLength: 6 }), anyValue),
    session_id: fc.oneof(fc.constantFrom("a", " ", "", "s-2"), anyValue),
    extra: anyValue,
  },
  { requiredKeys: [] },
);

describe("Mooncake lines: the hand check agrees with the schema", () => {
  it("accepts exactly what the schema accepts, with the same record", () => {
    fc.assert(
      fc.property(lineArb, (obj) => {
        const text = JSON.stringify(obj);
        const parsed = MooncakeTraceLineSchema.safeParse(JSON.parse(text));
        let got: unknown;
        try {
          got = parseTraceLine("mooncake", text, 7, { file: "t.jsonl", traceBlockSize: BLOCK });
        } catch {
          got = "error";
        }
        if (!parsed.success) {
          expect(got).toBe("error");
          return;
        }
        const l = parsed.data;
        if (l.hash_ids.length * BLOCK < l.input_length) {
          expect(got).toBe("error");
          return;
        }
        expect(got).toEqual({
          line: 7,
          arrivalMs: l.timestamp,
          inputTokens: l.input_length,
          outputTokens: l.output_length,
          hashIds: l.hash_ids,
          ...(l.session_id === undefined ? {} : { sessionId: l.session_id }),
        });
      }),
      { numRuns: 2000 },
    );
  });
});
