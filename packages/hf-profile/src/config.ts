import type { InputIssue } from "@kvsim/profile-schema";

/**
 * The largest integer a config field may hold: 2^24 for a width, a head count, an expert count or
 * a vocabulary or a window (the model shape's own bound, far beyond any model); 4096 for a layer
 * count (a field named `num_hidden_layers` or ending in `_layers`); 2^30 for positions. Larger
 * values are mistakes, and would make the derivation build per-layer lists of that length.
 */
export function maxConfigInt(key: string): number {
  if (key === "num_hidden_layers" || key.endsWith("_layers")) return 4096;
  if (key === "max_position_embeddings") return 2 ** 30;
  return 2 ** 24;
}

const bound = (max: number): string => (max === 2 ** 24 ? "2^24" : max === 2 ** 30 ? "2^30" : String(max));

/** A JSON object. */
export type JsonObject = Readonly<Record<string, unknown>>;

/** A value as JSON for a message, cut to 80 characters (a config list may hold a million entries). */
export function shortJson(v: unknown): string {
  // A config's values come from JSON; only a missing one (undefined) has no JSON text.
  const text = v === undefined ? "undefined" : JSON.stringify(v);
  return text.length > 80 ? `${text.slice(0, 77)}...` : text;
}

export const isObject = (v: unknown): v is JsonObject => typeof v === "object" && v !== null && !Array.isArray(v);

/**
 * Reads fields of one object of a config.json (the root, or a nested `text_config`), collecting a
 * located issue for each missing or ill-typed field instead of stopping at the first. A read that
 * fails returns NaN (numbers), "" (strings) or [] (lists), so a family can read everything it
 * needs and the caller refuses the config once, listing every problem.
 */
export class ConfigReader {
  constructor(
    readonly obj: JsonObject,
    /** Path of `obj` inside the file: "" for the root, "text_config" for a nested one. */
    readonly at: string,
    readonly issues: InputIssue[],
    /** Names what is being derived, for messages ("LlamaForCausalLM"). */
    readonly what: string,
    /** Paths of the fields read that were present, shared with children (a profile's provenance names them). */
    readonly read: Set<string> = new Set(),
  ) {}

  path(key: string): string {
    return this.at === "" ? key : `${this.at}.${key}`;
  }

  has(key: string): boolean {
    const present = this.obj[key] !== undefined && this.obj[key] !== null;
    if (present) this.read.add(this.path(key));
    return present;
  }

  private fail(key: string, message: string): void {
    this.issues.push({ path: this.path(key), message });
  }

  /** A required integer from min (default 1) to maxConfigInt(key). */
  int(key: string, min = 1): number {
    const v = this.obj[key];
    if (!this.has(key)) {
      this.fail(key, `is required to derive a profile for ${this.what}`);
      return Number.NaN;
    }
    if (typeof v !== "number" || !Number.isSafeInteger(v) || v < min) {
      this.fail(key, `must be an integer >= ${min} (got ${shortJson(v)})`);
      return Number.NaN;
    }
    const max = maxConfigInt(key);
    if (v > max) {
      this.fail(key, `must be at most ${bound(max)} (got ${v}); no model is that large`);
      return Number.NaN;
    }
    return v;
  }

  /** An optional integer >= min: undefined when absent or null. */
  optInt(key: string, min = 1): number | undefined {
    return this.has(key) ? this.int(key, min) : undefined;
  }

  /** A required finite number > 0. */
  positive(key: string): number {
    const v = this.obj[key];
    if (!this.has(key)) {
      this.fail(key, `is required to derive a profile for ${this.what}`);
      return Number.NaN;
    }
    if (typeof v !== "number" || !Number.isFinite(v) || v <= 0) {
      this.fail(key, `must be a number > 0 (got ${shortJson(v)})`);
      return Number.NaN;
    }
    return v;
  }

  optPositive(key: string): number | undefined {
    return this.has(key) ? this.positive(key) : undefined;
  }

  optBool(key: string): boolean | undefined {
    if (!this.has(key)) return undefined;
    const v = this.obj[key];
    if (typeof v !== "boolean") {
      this.fail(key, `must be true or false (got ${shortJson(v)})`);
      return undefined;
    }
    return v;
  }

  optString(key: string): string | undefined {
    if (!this.has(key)) return undefined;
    const v = this.obj[key];
    if (typeof v !== "string") {
      this.fail(key, `must be a string (got ${shortJson(v)})`);
      return undefined;
    }
    return v;
  }

  /** A required string. */
  string(key: string): string {
    const v = this.optString(key);
    if (v === undefined && !this.has(key)) this.fail(key, `is required to derive a profile for ${this.what}`);
    return v ?? "";
  }

  /** An optional list of strings. */
  optStrings(key: string): string[] | undefined {
    if (!this.has(key)) return undefined;
    const v = this.obj[key];
    if (!Array.isArray(v) || !v.every((x) => typeof x === "string")) {
      this.fail(key, `must be a list of strings (got ${shortJson(v)})`);
      return undefined;
    }
    return v;
  }

  /** An optional list of integers >= min. */
  optInts(key: string, min = 0): number[] | undefined {
    if (!this.has(key)) return undefined;
    const v = this.obj[key];
    const max = 2 ** 24;
    if (!Array.isArray(v) || !v.every((x) => typeof x === "number" && Number.isSafeInteger(x) && x >= min && x <= max)) {
      this.fail(key, `must be a list of integers from ${min} to 2^24 (got ${shortJson(v)})`);
      return undefined;
    }
    return v as number[];
  }

  /** A nested object, read with its own path. */
  child(key: string): ConfigReader | undefined {
    const v = this.obj[key];
    if (v === undefined || v === null) return undefined;
    if (!isObject(v)) {
      this.fail(key, `must be an object (got ${shortJson(v)})`);
      return undefined;
    }
    return new ConfigReader(v, this.path(key), this.issues, this.what, this.read);
  }

  /** A problem with a field's value that is not about its type. */
  refuse(key: string, message: string): void {
    this.fail(key, message);
  }
}
