import { z } from "zod";
import { MAX_SAFE_BYTES } from "./units.js";

/** A finite number (NaN and infinities refused). */
export const finiteNumber = () => z.number({ error: "expected a finite number" });
/** A count: an integer >= 1 that a double holds exactly. */
export const positiveInt = () => z.number().int({ error: "expected an integer" }).min(1, { error: "must be at least 1" }).max(Number.MAX_SAFE_INTEGER);
/** A count that may be zero. */
export const nonNegativeInt = () => z.number().int({ error: "expected an integer" }).min(0, { error: "must not be negative" }).max(Number.MAX_SAFE_INTEGER);
/** A byte count: an integer in [1, 2^53]. */
export const byteCount = () =>
  z
    .number()
    .int({ error: "expected an integer byte count" })
    .min(1, { error: "must be at least 1 byte" })
    .max(MAX_SAFE_BYTES, { error: "must be at most 2^53 bytes (9007199254740992)" });
/** Milliseconds: finite and >= 0. */
export const nonNegativeMs = () => finiteNumber().min(0, { error: "must not be negative" });
/** A non-blank string. */
export const nonBlank = () => z.string().refine((s) => s.trim() !== "", { error: "must not be blank" });
