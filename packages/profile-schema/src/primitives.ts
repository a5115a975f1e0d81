import { z } from "zod";
import { MAX_DURATION_MS } from "./limits.js";
import { MAX_SAFE_BYTES } from "./units.js";

// Integers are checked with a refinement, not zod's `.int()`: `.int()` means a *safe* integer and
// refuses 2^53 (a valid byte count) with the integer message. `meta({ type: "integer" })` keeps
// the JSON Schema export saying "integer".

/** A finite number (NaN and infinities refused). */
export const finiteNumber = () => z.number({ error: "expected a finite number" });
/** A count: an integer >= 1 that a double holds exactly. */
export const positiveInt = () =>
  z
    .number()
    .min(1, { error: "must be at least 1", abort: true })
    .max(Number.MAX_SAFE_INTEGER, { error: "must be at most 2^53 - 1 (9007199254740991)", abort: true })
    .refine(Number.isInteger, { error: "expected an integer", abort: true })
    .meta({ type: "integer" });
/** A count that may be zero. */
export const nonNegativeInt = () =>
  z
    .number()
    .min(0, { error: "must not be negative", abort: true })
    .max(Number.MAX_SAFE_INTEGER, { error: "must be at most 2^53 - 1 (9007199254740991)", abort: true })
    .refine(Number.isInteger, { error: "expected an integer", abort: true })
    .meta({ type: "integer" });
/** A byte count: an integer in [1, 2^53]. */
export const byteCount = () =>
  z
    .number()
    .min(1, { error: "must be at least 1 byte", abort: true })
    .max(MAX_SAFE_BYTES, { error: "must be at most 2^53 bytes (9007199254740992)", abort: true })
    .refine(Number.isInteger, { error: "expected an integer byte count", abort: true })
    .meta({ type: "integer" });
/** A non-blank string. */
export const nonBlank = () => z.string().refine((s) => s.trim() !== "", { error: "must not be blank", abort: true });

/** Renders a bound for a message: 1000000 as "1000000", 0.001 as "0.001", 1e13 as "10^13". */
const bound = (n: number): string => (n >= 1e7 && Number.isInteger(Math.log10(n)) ? `10^${Math.log10(n)}` : String(n));

/**
 * A finite number in [min, max] (or (min, max] with `exclusiveMin`), refused with one message that
 * states the whole range and its unit: the schemas' physically meaningful bounds (limits.ts).
 */
export const rangedNumber = (min: number, max: number, unit: string, opts: { exclusiveMin?: boolean; note?: string } = {}) => {
  const range = `${opts.exclusiveMin === true ? `greater than ${bound(min)} and at most` : `from ${bound(min)} to`} ${bound(max)}${unit === "" ? "" : ` ${unit}`}`;
  const error = `must be ${range}${opts.note === undefined ? "" : `, ${opts.note}`}`;
  const base = finiteNumber();
  return (opts.exclusiveMin === true ? base.gt(min, { error, abort: true }) : base.min(min, { error, abort: true })).max(max, { error, abort: true });
};

/** A duration in ms in [0, MAX_DURATION_MS]. */
export const durationMs = () => rangedNumber(0, MAX_DURATION_MS, "ms", { note: "about 17 minutes" });
