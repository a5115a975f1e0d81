import { z } from "zod";
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
