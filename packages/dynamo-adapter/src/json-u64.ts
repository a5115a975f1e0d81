/**
 * JSON with exact 64-bit integers. The router's block hashes are u64 values; a JS number holds
 * integers exactly only up to 2^53, so `JSON.parse`/`JSON.stringify` would round them. This
 * writer prints bigints as raw JSON integers, and this reader returns every integer literal that
 * a double cannot hold exactly as a bigint. Everything else follows RFC 8259.
 */

/** A parsed JSON value; integers beyond 2^53 - 1 in magnitude come back as bigint. */
export type JsonValue = null | boolean | number | bigint | string | readonly JsonValue[] | { readonly [key: string]: JsonValue };

/** Nesting deeper than this is refused, so a hostile line cannot overflow the stack. */
const MAX_DEPTH = 256;

/** Thrown by `parseJsonExact` with the character offset of the problem. */
export class JsonSyntaxError extends Error {
  override readonly name = "JsonSyntaxError";
  constructor(
    message: string,
    readonly offset: number,
  ) {
    super(`${message} at character ${offset + 1}`);
  }
}

const NUMBER = /-?(?:0|[1-9]\d*)(\.\d+)?([eE][+-]?\d+)?/y;

class Reader {
  pos = 0;
  constructor(private readonly text: string) {}

  fail(message: string): never {
    throw new JsonSyntaxError(message, this.pos);
  }

  skipWhitespace(): void {
    const t = this.text;
    while (this.pos < t.length) {
      const c = t.charCodeAt(this.pos);
      if (c === 0x20 || c === 0x09 || c === 0x0a || c === 0x0d) this.pos++;
      else break;
    }
  }

  value(depth: number): JsonValue {
    if (depth > MAX_DEPTH) this.fail(`nesting deeper than ${MAX_DEPTH}`);
    this.skipWhitespace();
    const c = this.text[this.pos];
    switch (c) {
      case "{":
        return this.object(depth);
      case "[":
        return this.array(depth);
      case '"':
        return this.string();
      case "t":
        return this.literal("true", true);
      case "f":
        return this.literal("false", false);
      case "n":
        return this.literal("null", null);
      case undefined:
        return this.fail("unexpected end of input");
      default:
        if (c === "-" || (c >= "0" && c <= "9")) return this.number();
        return this.fail(`unexpected character ${JSON.stringify(c)}`);
    }
  }

  literal<T extends JsonValue>(word: string, v: T): T {
    if (!this.text.startsWith(word, this.pos)) this.fail("unexpected token");
    this.pos += word.length;
    return v;
  }

  number(): number | bigint {
    NUMBER.lastIndex = this.pos;
    const m = NUMBER.exec(this.text);
    if (m === null) return this.fail("invalid number");
    this.pos += m[0].length;
    const n = Number(m[0]);
    if (m[1] === undefined && m[2] === undefined && !Number.isSafeInteger(n)) return BigInt(m[0]);
    return n;
  }

  string(): string {
    const t = this.text;
    const start = this.pos;
    this.pos++; // opening quote
    let escaped = false;
    for (;;) {
      const c = t.charCodeAt(this.pos);
      if (Number.isNaN(c)) this.fail("unterminated string");
      if (c === 0x22) break;
      if (c < 0x20) this.fail("control character in string");
      if (c === 0x5c) {
        escaped = true;
        this.pos += 2;
      } else {
        this.pos++;
      }
    }
    this.pos++; // closing quote
    const raw = t.slice(start, this.pos);
    if (!escaped) return raw.slice(1, -1);
    try {
      return JSON.parse(raw) as string;
    } catch {
      this.pos = start;
      return this.fail("invalid escape in string");
    }
  }

  array(depth: number): JsonValue[] {
    this.pos++;
    const out: JsonValue[] = [];
    this.skipWhitespace();
    if (this.text[this.pos] === "]") {
      this.pos++;
      return out;
    }
    for (;;) {
      out.push(this.value(depth + 1));
      this.skipWhitespace();
      const c = this.text[this.pos];
      this.pos++;
      if (c === "]") return out;
      if (c !== ",") {
        this.pos--;
        this.fail("expected ',' or ']'");
      }
    }
  }

  object(depth: number): Record<string, JsonValue> {
    this.pos++;
    const out: Record<string, JsonValue> = {};
    this.skipWhitespace();
    if (this.text[this.pos] === "}") {
      this.pos++;
      return out;
    }
    for (;;) {
      this.skipWhitespace();
      if (this.text[this.pos] !== '"') this.fail("expected a double-quoted property name");
      const key = this.string();
      this.skipWhitespace();
      if (this.text[this.pos] !== ":") this.fail("expected ':'");
      this.pos++;
      // defineProperty, so a "__proto__" key is an own property like any other.
      Object.defineProperty(out, key, { value: this.value(depth + 1), enumerable: true, writable: true, configurable: true });
      this.skipWhitespace();
      const c = this.text[this.pos];
      this.pos++;
      if (c === "}") return out;
      if (c !== ",") {
        this.pos--;
        this.fail("expected ',' or '}'");
      }
    }
  }
}

/**
 * Parses one JSON text. Integer literals outside the safe range (|n| > 2^53 - 1) become bigints,
 * so u64 hashes survive exactly; other numbers are doubles as in `JSON.parse`. Throws
 * `JsonSyntaxError` on malformed text.
 */
export function parseJsonExact(text: string): JsonValue {
  const r = new Reader(text);
  const v = r.value(0);
  r.skipWhitespace();
  if (r.pos !== text.length) r.fail("unexpected content after the JSON value");
  return v;
}

/**
 * Serialises a value as compact JSON, writing bigints as raw integers. Object keys whose value is
 * undefined are left out (as `JSON.stringify` does); a non-finite number, a function or a symbol
 * is a broken invariant and throws.
 */
export function stringifyJsonExact(value: unknown): string {
  const parts: string[] = [];
  write(value, parts, 0);
  return parts.join("");
}

function write(v: unknown, out: string[], depth: number): void {
  if (depth > MAX_DEPTH) throw new RangeError(`value nests deeper than ${MAX_DEPTH}`);
  switch (typeof v) {
    case "bigint":
      out.push(v.toString());
      return;
    case "number":
      if (!Number.isFinite(v)) throw new RangeError(`cannot write the non-finite number ${v} as JSON`);
      out.push(JSON.stringify(v));
      return;
    case "string":
      out.push(JSON.stringify(v));
      return;
    case "boolean":
      out.push(v ? "true" : "false");
      return;
    case "object":
      if (v === null) {
        out.push("null");
        return;
      }
      if (Array.isArray(v)) {
        out.push("[");
        (v as readonly unknown[]).forEach((item, i) => {
          if (i > 0) out.push(",");
          write(item === undefined ? null : item, out, depth + 1);
        });
        out.push("]");
        return;
      }
      {
        out.push("{");
        let first = true;
        for (const [k, item] of Object.entries(v)) {
          if (item === undefined) continue;
          if (!first) out.push(",");
          first = false;
          out.push(JSON.stringify(k), ":");
          write(item, out, depth + 1);
        }
        out.push("}");
      }
      return;
    case "undefined":
    case "function":
    case "symbol":
      throw new TypeError(`cannot write a ${typeof v} as JSON`);
  }
}

/**
 * A short rendering of a parsed value for error messages: bigints as their digits, non-finite
 * numbers by name, at most about 80 characters however large or deep the value. Never throws.
 */
export function describeJson(v: unknown): string {
  const parts: string[] = [];
  let length = 0;
  const LIMIT = 80;
  const push = (s: string): boolean => {
    parts.push(s);
    length += s.length;
    return length <= LIMIT;
  };
  const visit = (x: unknown, depth: number): boolean => {
    if (typeof x === "bigint" || (typeof x === "number" && !Number.isFinite(x))) return push(String(x));
    if (typeof x === "number" || typeof x === "boolean" || x === null) return push(String(x));
    if (typeof x === "string") return push(JSON.stringify(x.length > LIMIT ? x.slice(0, LIMIT) : x));
    if (typeof x !== "object") return push(typeof x);
    if (depth > 8) return push(Array.isArray(x) ? "[...]" : "{...}");
    if (Array.isArray(x)) {
      if (!push("[")) return false;
      for (let i = 0; i < x.length; i++) {
        if ((i > 0 && !push(",")) || !visit(x[i] as unknown, depth + 1)) return false;
      }
      return push("]");
    }
    if (!push("{")) return false;
    let first = true;
    for (const k in x) {
      if (!Object.hasOwn(x, k)) continue;
      if ((!first && !push(",")) || !push(`${JSON.stringify(k)}:`) || !visit((x as Record<string, unknown>)[k], depth + 1)) return false;
      first = false;
    }
    return push("}");
  };
  if (v === undefined) return "nothing";
  const whole = visit(v, 0);
  const s = parts.join("");
  return whole && s.length <= LIMIT ? s : `${s.slice(0, LIMIT - 3)}...`;
}
