/**
 * Per-request records kept compactly until someone reads them.
 *
 * A replay keeps one record per terminal request for its caller (the CLI's `--requests` file, the
 * HTML report, calibration). As plain objects a P/D record costs about 800 bytes of heap (three
 * objects, a dozen boxed doubles); a long trace kept them all alive through the run. The store
 * keeps each record as its shape (the keys in order, the kind of each value: a 32-bit integer,
 * another number, a string, null, a nested object, ...; shapes are shared, there are a handful per
 * replay) plus its integers in one Int32Array, its other numbers in one Float64Array and its
 * strings in one array, and builds the objects again only when the records are read. Strings at
 * keys named as enumerations (a status, say) are part of the shape; strings at keys named as
 * numbered (`trace-17`) keep their prefix in the shape and their number with the integers. Built again, a record has the same keys in the same order and the same values
 * (a double stored in a Float64Array is the same double, -0 and NaN included), so its JSON and its
 * deep equality are unchanged. A record with a value the shapes do not describe (an array, say) is
 * kept as it is.
 */

/** One value of a shape: a number, a string, an object of its own shape, or a constant. */
type Slot =
  | { readonly key: string; readonly kind: "number" }
  | { readonly key: string; readonly kind: "int" }
  | { readonly key: string; readonly kind: "string" }
  | { readonly key: string; readonly kind: "object"; readonly shape: Shape }
  | { readonly key: string; readonly kind: "numbered"; readonly prefix: string }
  | { readonly key: string; readonly kind: "constant"; readonly value: null | undefined | boolean | string };

interface Shape {
  readonly slots: readonly Slot[];
}

/** Kept as is (its record is not a plain tree of numbers, strings, null, undefined and booleans). */
const AS_IS = 0xffff;
/** Nested objects deeper than this are kept as is (records nest two levels). */
const MAX_DEPTH = 4;

/** Numbers per chunk of the number store (fixed chunks: growth copies nothing). */
const CHUNK_BITS = 14;
const CHUNK = 1 << CHUNK_BITS;
const MASK = CHUNK - 1;

/** Keys whose string values are kept in a shape of their own. */
export interface RecordStoreOptions {
  /** String values from a small set (each value is part of the shape). */
  readonly enumKeys?: readonly string[];
  /** Strings that usually end in a decimal number after a shared prefix (request ids). */
  readonly numberedKeys?: readonly string[];
}

interface Keys {
  readonly enums: ReadonlySet<string>;
  readonly numbered: ReadonlySet<string>;
}

export class RecordStore<T extends object> {
  private readonly opts: Keys;
  private readonly shapeIds = new Map<string, number>();
  private readonly shapes: Shape[] = [];
  /** Per record, in insertion order: its sort key, its shape, where its numbers and strings start. */
  private keys = new Float64Array(64);
  private shapeOf = new Uint16Array(64);
  private numStart = new Uint32Array(64);
  private strStart = new Uint32Array(64);
  private intStart = new Uint32Array(64);
  private n = 0;
  private readonly numChunks: Float64Array[] = [];
  private numCount = 0;
  private readonly intChunks: Int32Array[] = [];
  private intCount = 0;
  private readonly strings: string[] = [];
  /** Records kept as they are, by insertion position. */
  private readonly asIs = new Map<number, T>();
  /** The shape of the last record stored (-1: none yet). */
  private last = -1;

  constructor(options: RecordStoreOptions = {}) {
    this.opts = { enums: new Set(options.enumKeys), numbered: new Set(options.numberedKeys) };
  }

  get length(): number {
    return this.n;
  }

  /** Keeps `record`, to be returned at its place in ascending `sortKey` (ties: insertion order). */
  add(sortKey: number, record: T): void {
    if (this.n === this.keys.length) this.grow();
    const i = this.n++;
    this.keys[i] = sortKey;
    this.numStart[i] = this.numCount;
    this.strStart[i] = this.strings.length;
    this.intStart[i] = this.intCount;
    // Most records have the shape of the one before: check it first (no key string built).
    const id = this.last >= 0 && matches(record, this.shapes[this.last]!, this.opts) ? this.last : this.shapeIdOf(record);
    if (id === undefined) {
      this.shapeOf[i] = AS_IS;
      this.asIs.set(i, record);
      return;
    }
    this.shapeOf[i] = id;
    this.last = id;
    this.write(record, this.shapes[id]!);
  }

  /** The id of the shape of `record`, registered if new; undefined: keep the record as it is. */
  private shapeIdOf(record: T): number | undefined {
    const key = shapeKey(record, 0, this.opts);
    if (key === undefined) return undefined;
    let id = this.shapeIds.get(key);
    if (id === undefined) {
      if (this.shapes.length >= AS_IS) return undefined;
      id = this.shapes.length;
      this.shapes.push(shapeOf(record, this.opts));
      this.shapeIds.set(key, id);
    }
    return id;
  }

  /** Every record, built again, in ascending sort key (ties in insertion order). */
  toArray(): T[] {
    const order = Array.from({ length: this.n }, (_, i) => i);
    const keys = this.keys;
    order.sort((a, b) => keys[a]! - keys[b]! || a - b);
    return order.map((i) => this.get(i));
  }

  /** The record added `i`-th (0-based), built again. */
  get(i: number): T {
    if (!(i >= 0 && i < this.n)) throw new RangeError(`record ${i} of ${this.n}`);
    const s = this.shapeOf[i]!;
    if (s === AS_IS) return this.asIs.get(i)!;
    const cursor = { num: this.numStart[i]!, int: this.intStart[i]!, str: this.strStart[i]! };
    return this.read(this.shapes[s]!, cursor) as T;
  }

  private grow(): void {
    const size = this.keys.length * 2;
    const keys = new Float64Array(size);
    keys.set(this.keys);
    this.keys = keys;
    const shapeOf = new Uint16Array(size);
    shapeOf.set(this.shapeOf);
    this.shapeOf = shapeOf;
    const numStart = new Uint32Array(size);
    numStart.set(this.numStart);
    this.numStart = numStart;
    const strStart = new Uint32Array(size);
    strStart.set(this.strStart);
    this.strStart = strStart;
    const intStart = new Uint32Array(size);
    intStart.set(this.intStart);
    this.intStart = intStart;
  }

  private pushNumber(v: number): void {
    const c = this.numCount >>> CHUNK_BITS;
    if (c === this.numChunks.length) this.numChunks.push(new Float64Array(CHUNK));
    this.numChunks[c]![this.numCount & MASK] = v;
    this.numCount++;
  }

  private pushInt(v: number): void {
    const c = this.intCount >>> CHUNK_BITS;
    if (c === this.intChunks.length) this.intChunks.push(new Int32Array(CHUNK));
    this.intChunks[c]![this.intCount & MASK] = v;
    this.intCount++;
  }

  private write(o: object, shape: Shape): void {
    const rec = o as Record<string, unknown>;
    for (const slot of shape.slots) {
      const v = rec[slot.key];
      if (slot.kind === "number") this.pushNumber(v as number);
      else if (slot.kind === "int") this.pushInt(v as number);
      else if (slot.kind === "numbered") this.pushInt(Number((v as string).slice(slot.prefix.length)));
      else if (slot.kind === "string") this.strings.push(v as string);
      else if (slot.kind === "object") this.write(v as object, slot.shape);
    }
  }

  private read(shape: Shape, cursor: { num: number; int: number; str: number }): object {
    const out: Record<string, unknown> = {};
    for (const slot of shape.slots) {
      switch (slot.kind) {
        case "number": {
          const k = cursor.num++;
          out[slot.key] = this.numChunks[k >>> CHUNK_BITS]![k & MASK]!;
          break;
        }
        case "int": {
          const k = cursor.int++;
          out[slot.key] = this.intChunks[k >>> CHUNK_BITS]![k & MASK]!;
          break;
        }
        case "string":
          out[slot.key] = this.strings[cursor.str++]!;
          break;
        case "numbered": {
          const k = cursor.int++;
          out[slot.key] = `${slot.prefix}${this.intChunks[k >>> CHUNK_BITS]![k & MASK]!}`;
          break;
        }
        case "object":
          out[slot.key] = this.read(slot.shape, cursor);
          break;
        case "constant":
          out[slot.key] = slot.value;
          break;
      }
    }
    return out;
  }
}

/** A number an Int32Array holds as it is (-0 is not: it would come back as 0). */
function isInt32(v: unknown): v is number {
  return typeof v === "number" && (v | 0) === v && !Object.is(v, -0);
}

/**
 * The prefix of `s` when it is the prefix and a number below 10^9 in plain decimal (no sign, no
 * leading zero): the prefix and String(number) give `s` back. Undefined otherwise.
 */
function numberedPrefix(s: string): string | undefined {
  let i = s.length;
  while (i > 0 && s.charCodeAt(i - 1) >= 48 && s.charCodeAt(i - 1) <= 57) i--;
  const digits = s.length - i;
  if (digits === 0 || digits > 9 || (digits > 1 && s.charCodeAt(i) === 48)) return undefined;
  return s.slice(0, i);
}

/** A plain object: made by an object literal (anything else is kept as is). */
function isPlain(v: unknown): v is Record<string, unknown> {
  if (typeof v !== "object" || v === null || Array.isArray(v)) return false;
  const proto = Object.getPrototypeOf(v) as unknown;
  return proto === Object.prototype;
}

/**
 * The shape of `o` as a string (its keys in order with each value's kind), or undefined when a
 * value is of a kind the store does not describe. Only own enumerable string keys count: a plain
 * object's keys iterate in insertion order unless they look like array indices, which come first,
 * ascending; the object built again is filled in the order listed, so the order is the same.
 */
function shapeKey(o: unknown, depth: number, opts: Keys): string | undefined {
  if (!isPlain(o) || depth > MAX_DEPTH) return undefined;
  let key = "{";
  for (const k of Object.keys(o)) {
    const v = o[k];
    // JSON escapes the key, so no key can forge a separator.
    key += JSON.stringify(k);
    switch (typeof v) {
      case "number":
        key += isInt32(v) ? "i," : "n,";
        break;
      case "string": {
        if (opts.enums.has(k)) {
          key += `=${JSON.stringify(v)},`;
          break;
        }
        const prefix = opts.numbered.has(k) ? numberedPrefix(v) : undefined;
        key += prefix === undefined ? "s," : `#${JSON.stringify(prefix)},`;
        break;
      }
      case "boolean":
        key += v ? "t," : "f,";
        break;
      case "undefined":
        key += "u,";
        break;
      case "object": {
        if (v === null) {
          key += "z,";
          break;
        }
        const inner = shapeKey(v, depth + 1, opts);
        if (inner === undefined) return undefined;
        key += `${inner},`;
        break;
      }
      case "bigint":
      case "function":
      case "symbol":
        return undefined;
    }
  }
  return `${key}}`;
}

/** True when `o` has exactly the keys of `shape`, in its order, with values of its kinds. */
function matches(o: unknown, shape: Shape, opts: Keys): boolean {
  if (!isPlain(o)) return false;
  const slots = shape.slots;
  let i = 0;
  for (const k in o) {
    if (!Object.hasOwn(o, k)) return false;
    const slot = slots[i++];
    if (slot?.key !== k) return false;
    const v = o[k];
    switch (slot.kind) {
      case "number":
        if (typeof v !== "number") return false;
        break;
      case "int":
        if (!isInt32(v)) return false;
        break;
      case "string":
        // At an enum key a string is a constant; at a numbered key a string with a number must be numbered.
        if (typeof v !== "string" || opts.enums.has(k) || (opts.numbered.has(k) && numberedPrefix(v) !== undefined)) return false;
        break;
      case "numbered":
        if (typeof v !== "string" || numberedPrefix(v) !== slot.prefix) return false;
        break;
      case "constant":
        if (v !== slot.value) return false;
        break;
      case "object":
        if (!matches(v, slot.shape, opts)) return false;
        break;
    }
  }
  return i === slots.length;
}

/** The shape of `o` (shapeKey accepted it). */
function shapeOf(o: object, opts: Keys): Shape {
  const rec = o as Record<string, unknown>;
  const slots: Slot[] = [];
  for (const key of Object.keys(rec)) {
    const v = rec[key];
    if (typeof v === "number") slots.push({ key, kind: isInt32(v) ? "int" : "number" });
    else if (typeof v === "string") {
      const prefix = opts.numbered.has(key) ? numberedPrefix(v) : undefined;
      if (opts.enums.has(key)) slots.push({ key, kind: "constant", value: v });
      else if (prefix !== undefined) slots.push({ key, kind: "numbered", prefix });
      else slots.push({ key, kind: "string" });
    } else if (v === null || v === undefined || typeof v === "boolean") slots.push({ key, kind: "constant", value: v });
    else slots.push({ key, kind: "object", shape: shapeOf(v, opts) });
  }
  return { slots };
}
