/**
 * A map from string ids to values for ids that come and go: a rank's requests and handoffs, a
 * replay's requests in flight. A `Map` allocates a new hash table whenever its deleted entries
 * fill the old one and whenever its size falls below a quarter of its capacity; with a few ids in
 * flight and thousands passing through, those tables lived long enough to be copied out of the
 * young generation (16.6 MB of them over the P/D replay of the 8x trace with shared NICs). This
 * table probes linearly and deletes by moving later entries back (no tombstones), so it allocates
 * only when it grows, and never shrinks.
 */
export class IdTable<V> {
  private keys: (string | undefined)[];
  private vals: (V | undefined)[];
  /** Each slot's key hash (probing compares it before the string, and deletion finds home slots by it). */
  private hashes: Int32Array;
  /** Each slot's insertion number, for `values()` in insertion order as a Map gives them. */
  private stamps: number[];
  private mask: number;
  private count = 0;
  private nextStamp = 0;

  /** Holds `initialCapacity` entries before it first grows (it keeps at least half its slots empty). */
  constructor(initialCapacity = 16) {
    let cap = 4;
    // Stryker disable next-line ConditionalExpression,EqualityOperator,ArithmeticOperator: VS-34
    while (cap < initialCapacity * 2) cap *= 2;
    this.mask = cap - 1;
    this.keys = new Array<string | undefined>(cap).fill(undefined);
    // Stryker disable next-line ArrayDeclaration: VS-35
    this.vals = new Array<V | undefined>(cap).fill(undefined);
    this.hashes = new Int32Array(cap);
    // Stryker disable next-line ArrayDeclaration: VS-36
    this.stamps = new Array<number>(cap).fill(0);
  }

  get size(): number {
    return this.count;
  }

  get(key: string): V | undefined {
    const i = this.find(key);
    // Stryker disable next-line ConditionalExpression: VS-37
    return i < 0 ? undefined : this.vals[i];
  }

  has(key: string): boolean {
    return this.find(key) >= 0;
  }

  /** Adds or replaces; a replaced value keeps its place in the insertion order (as in a Map). */
  set(key: string, value: V): void {
    const h = hashId(key);
    let i = h & this.mask;
    for (let k = this.keys[i]; k !== undefined; k = this.keys[i]) {
      // Stryker disable next-line ConditionalExpression: VS-38
      if (this.hashes[i] === h && k === key) {
        this.vals[i] = value;
        return;
      }
      i = (i + 1) & this.mask;
    }
    // At most half full: probe runs stay short.
    // Stryker disable next-line EqualityOperator: VS-39
    if ((this.count + 1) * 2 > this.keys.length) {
      this.grow();
      this.set(key, value);
      return;
    }
    this.keys[i] = key;
    this.vals[i] = value;
    this.hashes[i] = h;
    this.stamps[i] = this.nextStamp++;
    this.count++;
  }

  delete(key: string): boolean {
    let i = this.find(key);
    if (i < 0) return false;
    this.count--;
    // Backward-shift deletion: an entry after the hole moves into it unless its home slot lies
    // cyclically after the hole (up to the entry itself), where a lookup starting there still finds it.
    const mask = this.mask;
    for (let j = (i + 1) & mask; ; j = (j + 1) & mask) {
      const k = this.keys[j];
      if (k === undefined) break;
      const home = this.hashes[j]! & mask;
      // Stryker disable next-line EqualityOperator: VS-40
      if (i <= j ? i < home && home <= j : i < home || home <= j) continue;
      this.keys[i] = k;
      this.vals[i] = this.vals[j];
      this.hashes[i] = this.hashes[j]!;
      this.stamps[i] = this.stamps[j]!;
      i = j;
    }
    this.keys[i] = undefined;
    this.vals[i] = undefined;
    return true;
  }

  /** The values in insertion order (sorted on each call: for reports and error messages, not hot paths). */
  values(): V[] {
    const slots: number[] = [];
    // Stryker disable next-line EqualityOperator: VS-41
    for (let i = 0; i < this.keys.length; i++) if (this.keys[i] !== undefined) slots.push(i);
    slots.sort((a, b) => this.stamps[a]! - this.stamps[b]!);
    const out: V[] = [];
    for (const i of slots) out.push(this.vals[i]!);
    return out;
  }

  private find(key: string): number {
    const h = hashId(key);
    const { keys, hashes, mask } = this;
    let i = h & mask;
    for (let k = keys[i]; k !== undefined; k = keys[i]) {
      // Stryker disable next-line ConditionalExpression: VS-42
      if (hashes[i] === h && k === key) return i;
      i = (i + 1) & mask;
    }
    return -1;
  }

  private grow(): void {
    const { keys, vals, hashes, stamps } = this;
    const cap = keys.length * 2;
    this.mask = cap - 1;
    this.keys = new Array<string | undefined>(cap).fill(undefined);
    // Stryker disable next-line ArrayDeclaration: VS-43
    this.vals = new Array<V | undefined>(cap).fill(undefined);
    this.hashes = new Int32Array(cap);
    // Stryker disable next-line ArrayDeclaration: VS-44
    this.stamps = new Array<number>(cap).fill(0);
    // Stryker disable next-line EqualityOperator: VS-45
    for (let j = 0; j < keys.length; j++) {
      const k = keys[j];
      // Stryker disable next-line ConditionalExpression: VS-46
      if (k === undefined) continue;
      let i = hashes[j]! & this.mask;
      while (this.keys[i] !== undefined) i = (i + 1) & this.mask;
      this.keys[i] = k;
      this.vals[i] = vals[j];
      this.hashes[i] = hashes[j]!;
      this.stamps[i] = stamps[j]!;
    }
  }
}

/**
 * Two UTF-16 units per multiply (each step is a bijection of the running hash, so ids of one length
 * that differ in one pair never collide before the mix), then murmur3's finalizer so that the low
 * bits (the slot) depend on every unit.
 */
export function hashId(s: string): number {
  const n = s.length;
  let h = n;
  let i = 0;
  // Stryker disable next-line EqualityOperator,ArithmeticOperator: VS-47
  for (; i + 1 < n; i += 2) h = Math.imul(h ^ (s.charCodeAt(i) | (s.charCodeAt(i + 1) << 16)), 0x9e3779b1);
  // Stryker disable next-line ConditionalExpression,EqualityOperator: VS-48
  if (i < n) h = Math.imul(h ^ s.charCodeAt(i), 0x9e3779b1);
  h ^= h >>> 16;
  h = Math.imul(h, 0x85ebca6b);
  h ^= h >>> 13;
  h = Math.imul(h, 0xc2b2ae35);
  return h ^ (h >>> 16);
}
