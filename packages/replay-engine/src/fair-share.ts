import TinyQueue from "tinyqueue";

/**
 * A fluid network: links with capacities and flows that cross them. Every link is shared max-min
 * fairly by the flows on it (progressive filling: all flows grow at one pace, and a flow stops
 * growing when one of its links is full). Rates change only when a flow starts or finishes, so
 * between those instants every flow drains its bytes at a constant rate.
 *
 * A pure calculator: it has no clock; every call says what time it is, and time never goes back.
 * Changes at one instant are batched: rates are recomputed once, when the next finish time or a
 * finished flow is asked for, and only over the connected components (flows linked through shared
 * links) that changed; flows elsewhere keep their rates and finish times untouched. Finish times
 * live in an indexed heap updated in place, so a rescheduled flow leaves no stale event behind.
 *
 * Units: capacities and rates in bytes per millisecond, times in milliseconds. A flow alone on
 * its links finishes after exactly bytes / capacity ms (the private-pipe delay).
 */

/** A started flow; `payload` is the caller's. */
export interface Flow<T> {
  readonly id: number;
  readonly payload: T;
  readonly bytes: number;
  readonly links: readonly number[];
}

interface FlowState<T> extends Flow<T> {
  /** Positions of this flow in each of its links' flow lists (parallel to `links`). */
  readonly slots: number[];
  remaining: number;
  /** Bytes per ms since `lastMs`. */
  rate: number;
  lastMs: number;
  finishMs: number;
  /** Index in the finish heap; -1 when not in it. */
  heapIndex: number;
  /** Component-search and water-filling marks (the recompute epoch that last reached it). */
  seen: number;
  frozen: number;
}

/** What one link carried: bytes of finished flows, and time with at least one flow on it. */
export interface LinkStats {
  readonly capacity: number;
  readonly carriedBytes: number;
  readonly busyMs: number;
  readonly activeFlows: number;
}

interface ShareEntry {
  readonly share: number;
  readonly link: number;
  readonly version: number;
}

const byShare = (a: ShareEntry, b: ShareEntry): number => a.share - b.share || a.link - b.link;

/** Components with at most this many links are water-filled by scanning instead of with a heap. */
const SCAN_LINKS_UP_TO = 8;

export class FairShareNetwork<T> {
  private readonly capacity: number[] = [];
  private readonly onLink: FlowState<T>[][] = [];
  private readonly carried: number[] = [];
  private readonly busyMs: number[] = [];
  private readonly busySince: number[] = [];
  private readonly linkSeen: number[] = [];
  /** Water-filling scratch per link. */
  private readonly residual: number[] = [];
  private readonly unfrozen: number[] = [];
  private readonly version: number[] = [];

  /** Min-heap of active flows by (finish time, id). */
  private readonly heap: FlowState<T>[] = [];
  private nextId = 0;
  private epoch = 0;
  private lastMs = 0;
  /** Links whose flows changed at `dirtyMs` and whose components need new rates. */
  private readonly dirty: number[] = [];
  private dirtyMs = 0;
  /** Scratch lists of one component, reused across recomputes. */
  private readonly compLinks: number[] = [];
  private readonly compFlows: FlowState<T>[] = [];
  private readonly scanLinksUpTo: number;

  /**
   * `scanLinksUpTo`: components with at most this many links find the smallest share by a scan,
   * larger ones with a heap (default 8; both give the same rates, tests pin each path).
   */
  constructor(options: { readonly scanLinksUpTo?: number } = {}) {
    this.scanLinksUpTo = options.scanLinksUpTo ?? SCAN_LINKS_UP_TO;
  }

  /** Adds a link of `capacity` bytes per ms (> 0, finite) and returns its id (0, 1, ...). */
  addLink(capacity: number): number {
    if (!(capacity > 0) || !Number.isFinite(capacity)) throw new RangeError(`link capacity must be finite and > 0 bytes/ms, got ${capacity}`);
    const id = this.capacity.length;
    this.capacity.push(capacity);
    this.onLink.push([]);
    this.carried.push(0);
    this.busyMs.push(0);
    this.busySince.push(0);
    this.linkSeen.push(0);
    this.residual.push(0);
    this.unfrozen.push(0);
    this.version.push(0);
    return id;
  }

  get linkCount(): number {
    return this.capacity.length;
  }

  /** Flows started and not yet finished. */
  get activeCount(): number {
    return this.heap.length;
  }

  /** Starts a flow of `bytes` (>= 0) over distinct `links` at `nowMs`. */
  start(nowMs: number, links: readonly number[], bytes: number, payload: T): Flow<T> {
    this.advance(nowMs);
    if (links.length === 0) throw new Error("a flow needs at least one link");
    if (!(bytes >= 0) || !Number.isFinite(bytes)) throw new RangeError(`flow bytes must be finite and >= 0, got ${bytes}`);
    links.forEach((l, i) => {
      if (this.onLink[l] === undefined) throw new RangeError(`unknown link ${l}`);
      if (links.indexOf(l) !== i) throw new Error(`link ${l} is listed twice`);
    });
    const f: FlowState<T> = {
      id: this.nextId++,
      payload,
      bytes,
      links: [...links],
      slots: [],
      remaining: bytes,
      rate: 0,
      lastMs: nowMs,
      finishMs: Infinity,
      heapIndex: -1,
      seen: 0,
      frozen: 0,
    };
    for (const l of f.links) {
      const list = this.onLink[l]!;
      if (list.length === 0) this.busySince[l] = nowMs;
      f.slots.push(list.length);
      list.push(f);
      this.dirty.push(l);
    }
    this.heapPush(f);
    return f;
  }

  /** The earliest finish time of an active flow, or undefined when none is active. */
  nextFinishMs(): number | undefined {
    this.recompute();
    return this.heap[0]?.finishMs;
  }

  /**
   * Removes and returns the flow that finishes first if it finishes at or before `nowMs` (ties:
   * the earlier started), else undefined. Its links' other flows speed up from `nowMs` on.
   */
  popFinished(nowMs: number): Flow<T> | undefined {
    this.advance(nowMs);
    this.recompute();
    const f = this.heap[0];
    if (f === undefined || f.finishMs > nowMs) return undefined;
    this.heapRemove(f);
    for (let k = 0; k < f.links.length; k++) {
      const l: number = f.links[k]!;
      const list: FlowState<T>[] = this.onLink[l]!;
      const last: FlowState<T> = list.pop()!;
      const at: number = f.slots[k]!;
      if (last !== f) {
        list[at] = last;
        last.slots[last.links.indexOf(l)] = at;
      }
      this.carried[l]! += f.bytes;
      if (list.length === 0) this.busyMs[l]! += nowMs - this.busySince[l]!;
      else this.dirty.push(l);
    }
    return f;
  }

  /** The current rate of an active flow in bytes per ms (0 once finished). */
  rateOf(flow: Flow<T>): number {
    this.recompute();
    const f = flow as FlowState<T>;
    return f.heapIndex < 0 ? 0 : f.rate;
  }

  /** Bytes an active flow has left at `nowMs` (at its current rate). */
  remainingAt(flow: Flow<T>, nowMs: number): number {
    this.recompute();
    const f = flow as FlowState<T>;
    if (f.heapIndex < 0) return 0;
    return Math.max(0, f.remaining - f.rate * (nowMs - f.lastMs));
  }

  /** The active flows on a link. */
  flowsOn(link: number): readonly Flow<T>[] {
    this.recompute();
    return this.onLink[link] ?? [];
  }

  capacityOf(link: number): number {
    const c = this.capacity[link];
    if (c === undefined) throw new RangeError(`unknown link ${link}`);
    return c;
  }

  /** A link's totals, with busy time counted up to `nowMs`. */
  stats(link: number, nowMs: number): LinkStats {
    const capacity = this.capacityOf(link);
    const active = this.onLink[link]!.length;
    const open = active > 0 ? Math.max(0, nowMs - this.busySince[link]!) : 0;
    return { capacity, carriedBytes: this.carried[link]!, busyMs: this.busyMs[link]! + open, activeFlows: active };
  }

  /** Moves to `nowMs`: pending changes of an earlier instant get their rates first. */
  private advance(nowMs: number): void {
    if (!Number.isFinite(nowMs)) throw new RangeError(`time must be finite, got ${nowMs}`);
    if (nowMs < this.lastMs) throw new Error(`time went back from ${this.lastMs} to ${nowMs} ms`);
    if (this.dirty.length > 0 && nowMs !== this.dirtyMs) this.recompute();
    this.lastMs = nowMs;
    this.dirtyMs = nowMs;
  }

  /** New max-min fair rates over every component that changed since the last recompute. */
  private recompute(): void {
    if (this.dirty.length === 0) return;
    const t = this.dirtyMs;
    const epoch = ++this.epoch;
    const links = this.compLinks;
    const flows = this.compFlows;
    for (const seed of this.dirty) {
      if (this.linkSeen[seed] === epoch) continue;
      links.length = 0;
      flows.length = 0;
      this.component(seed, epoch, links, flows);
      this.waterFill(links, flows, t, epoch);
    }
    this.dirty.length = 0;
    flows.length = 0;
  }

  /** The links and flows connected to `seed` through shared links (depth-first). */
  private component(seed: number, epoch: number, links: number[], flows: FlowState<T>[]): void {
    const stack = [seed];
    this.linkSeen[seed] = epoch;
    while (stack.length > 0) {
      const l = stack.pop()!;
      links.push(l);
      for (const f of this.onLink[l]!) {
        if (f.seen === epoch) continue;
        f.seen = epoch;
        flows.push(f);
        for (const m of f.links) {
          if (this.linkSeen[m] !== epoch) {
            this.linkSeen[m] = epoch;
            stack.push(m);
          }
        }
      }
    }
  }

  /**
   * Progressive filling: repeatedly take the link whose fair share (capacity left / flows not yet
   * fixed) is smallest, fix its flows at that share, and charge it to their other links.
   */
  private waterFill(links: readonly number[], flows: readonly FlowState<T>[], t: number, epoch: number): void {
    for (const f of flows) {
      // Bring the bytes left up to `t` at the old rate.
      f.remaining = Math.max(0, f.remaining - f.rate * (t - f.lastMs));
      f.lastMs = t;
    }
    if (links.length <= this.scanLinksUpTo) this.waterFillSmall(links, t, epoch);
    else this.waterFillHeap(links, t, epoch);
  }

  /** Few links: find the smallest share by a scan each round (no allocation). */
  private waterFillSmall(links: readonly number[], t: number, epoch: number): void {
    for (const l of links) {
      this.residual[l] = this.capacity[l]!;
      this.unfrozen[l] = this.onLink[l]!.length;
    }
    for (;;) {
      let best = -1;
      let bestShare = Infinity;
      for (const l of links) {
        const n = this.unfrozen[l]!;
        if (n === 0) continue;
        const share = Math.max(0, this.residual[l]!) / n;
        if (share < bestShare || (share === bestShare && l < best)) {
          best = l;
          bestShare = share;
        }
      }
      if (best < 0) return;
      for (const f of this.onLink[best]!) {
        if (f.frozen === epoch) continue;
        f.frozen = epoch;
        this.setRate(f, bestShare, t);
        for (const m of f.links) {
          if (m === best) continue;
          this.residual[m]! -= bestShare;
          this.unfrozen[m]!--;
        }
      }
      this.unfrozen[best] = 0;
    }
  }

  /** Many links: the smallest share from a heap with lazily dropped stale entries. */
  private waterFillHeap(links: readonly number[], t: number, epoch: number): void {
    const shares = new TinyQueue<ShareEntry>([], byShare);
    for (const l of links) {
      const n = this.onLink[l]!.length;
      this.residual[l] = this.capacity[l]!;
      this.unfrozen[l] = n;
      const v = ++this.version[l]!;
      if (n > 0) shares.push({ share: this.capacity[l]! / n, link: l, version: v });
    }
    for (let e = shares.pop(); e !== undefined; e = shares.pop()) {
      const l = e.link;
      if (e.version !== this.version[l] || this.unfrozen[l] === 0) continue;
      const share = Math.max(0, this.residual[l]!) / this.unfrozen[l]!;
      for (const f of this.onLink[l]!) {
        if (f.frozen === epoch) continue;
        f.frozen = epoch;
        this.setRate(f, share, t);
        for (const m of f.links) {
          if (m === l) continue;
          this.residual[m]! -= share;
          const left = --this.unfrozen[m]!;
          const v = ++this.version[m]!;
          if (left > 0) shares.push({ share: Math.max(0, this.residual[m]!) / left, link: m, version: v });
        }
      }
      this.unfrozen[l] = 0;
    }
  }

  private setRate(f: FlowState<T>, rate: number, t: number): void {
    if (rate === f.rate && f.finishMs !== Infinity) return;
    if (!(rate > 0)) throw new Error(`flow ${f.id} got no bandwidth (rate ${rate})`);
    f.rate = rate;
    f.finishMs = t + f.remaining / rate;
    this.heapUpdate(f);
  }

  // The finish heap: ordered by (finishMs, id), positions kept in each flow.

  private less(a: FlowState<T>, b: FlowState<T>): boolean {
    return a.finishMs < b.finishMs || (a.finishMs === b.finishMs && a.id < b.id);
  }

  private heapPush(f: FlowState<T>): void {
    f.heapIndex = this.heap.length;
    this.heap.push(f);
    this.siftUp(f.heapIndex);
  }

  private heapUpdate(f: FlowState<T>): void {
    this.siftUp(f.heapIndex);
    this.siftDown(f.heapIndex);
  }

  private heapRemove(f: FlowState<T>): void {
    const i = f.heapIndex;
    const last = this.heap.pop()!;
    f.heapIndex = -1;
    if (last === f) return;
    this.heap[i] = last;
    last.heapIndex = i;
    this.siftUp(i);
    this.siftDown(last.heapIndex);
  }

  private siftUp(i: number): void {
    const h = this.heap;
    const f = h[i]!;
    while (i > 0) {
      const p = (i - 1) >> 1;
      const parent = h[p]!;
      if (!this.less(f, parent)) break;
      h[i] = parent;
      parent.heapIndex = i;
      i = p;
    }
    h[i] = f;
    f.heapIndex = i;
  }

  private siftDown(i: number): void {
    const h = this.heap;
    const n = h.length;
    const f = h[i]!;
    for (;;) {
      const l = 2 * i + 1;
      if (l >= n) break;
      const r = l + 1;
      const c = r < n && this.less(h[r]!, h[l]!) ? r : l;
      const child = h[c]!;
      if (!this.less(child, f)) break;
      h[i] = child;
      child.heapIndex = i;
      i = c;
    }
    h[i] = f;
    f.heapIndex = i;
  }
}
