import type { Network } from "@kvsim/profile-schema";
import { FairShareNetwork } from "./fair-share.js";
import { Sample, summarize } from "./stats.js";

/**
 * The shared network of P/D handoffs (docs/rules/replay.md §8): every prefill worker
 * sends over its NIC, every decode worker receives over its NIC, and workers placed on one node
 * talk over the intra-node link instead. A transfer waits for a slot on both NICs (when they have
 * a concurrency limit), pays the setup latency, then moves its bytes as a flow that shares every
 * link it crosses max-min fairly with the others (FairShareNetwork).
 *
 * Pure and clock-free like the fluid model under it: the driver says when a transfer is requested
 * (`request`), asks when the next thing happens (`nextTimeMs`) and collects the transfers that
 * finished at that instant (`settle`). Bytes come from transfer-rules, unchanged.
 *
 * Concurrency limit: each NIC keeps a FIFO of the transfers waiting for it; a transfer starts when
 * it is first in line at both its NICs and both have a free slot. The earliest waiting transfer
 * overall is first in line at both of its NICs, so the queues never deadlock; a transfer held by a
 * busy receiver also holds back later ones at its sender (head-of-line blocking, as one FIFO per
 * NIC implies). Intra-node transfers take no NIC slot.
 */

export type TransferPath = "nic" | "intra_node";

/** One handoff's transfer as the network saw it (virtual ms; undefined until reached). */
export interface NetworkTransfer {
  readonly path: TransferPath;
  readonly bytes: number;
  /** Asked for (the destination was reserved). */
  readonly requestedMs: number;
  /** Got its NIC slots: setup begins. */
  readonly startMs: number | undefined;
  /** Setup done: bytes begin to move. */
  readonly firstByteMs: number | undefined;
  /** Last byte arrived. */
  readonly endMs: number | undefined;
}

interface Transfer<T> extends NetworkTransfer {
  readonly seq: number;
  readonly payload: T;
  readonly src: number;
  readonly dst: number;
  startMs: number | undefined;
  firstByteMs: number | undefined;
  endMs: number | undefined;
}

/** Where each worker sits: node indices by prefill and decode worker id. */
export interface NodePlacement {
  readonly prefill: readonly number[];
  readonly decode: readonly number[];
}

/**
 * Places workers on nodes of `gpusPerNode` GPUs, each worker taking its TP size in GPUs on one
 * node, in fill order (`prefill_first`: P0, P1, ..., D0, D1, ...; `interleaved`: P0, D0, P1, D1,
 * ..., then the rest of the larger pool). A worker that does not fit in what is left of a node
 * starts the next one. A reason when a worker needs more GPUs than a node has.
 */
export function placeOnNodes(
  gpusPerNode: number,
  fill: "prefill_first" | "interleaved",
  prefillTp: readonly number[],
  decodeTp: readonly number[],
): { readonly ok: true; readonly placement: NodePlacement } | { readonly ok: false; readonly reason: string } {
  const order: { readonly role: "prefill" | "decode"; readonly id: number; readonly tp: number }[] = [];
  const p = prefillTp.map((tp, id) => ({ role: "prefill" as const, id, tp }));
  const d = decodeTp.map((tp, id) => ({ role: "decode" as const, id, tp }));
  if (fill === "prefill_first") order.push(...p, ...d);
  else for (let i = 0; i < Math.max(p.length, d.length); i++) order.push(...(i < p.length ? [p[i]!] : []), ...(i < d.length ? [d[i]!] : []));
  const prefill = new Array<number>(p.length).fill(0);
  const decode = new Array<number>(d.length).fill(0);
  let node = 0;
  let used = 0;
  for (const w of order) {
    if (w.tp > gpusPerNode)
      return { ok: false, reason: `${w.role} worker ${w.id} has ${w.tp} TP ranks but a node has ${gpusPerNode} GPUs (a worker's TP ranks share one node)` };
    if (used + w.tp > gpusPerNode) {
      node++;
      used = 0;
    }
    (w.role === "prefill" ? prefill : decode)[w.id] = node;
    used += w.tp;
  }
  return { ok: true, placement: { prefill, decode } };
}

/** One worker's side of the network in the report. */
export interface NetworkWorkerReport {
  readonly role: "prefill" | "decode";
  readonly worker: number;
  /** Node index with `nodes`, else null (every worker on its own node). */
  readonly node: number | null;
  /** The NIC direction the worker uses: prefill workers send, decode workers receive. */
  readonly direction: "send" | "receive";
  /** That direction's capacity in decimal GB/s. */
  readonly nic_gb_s: number;
  /** Bytes of finished transfers through that NIC direction. */
  readonly nic_bytes: number;
  /** nic_bytes / (capacity x duration): the NIC's average load over the run. */
  readonly nic_utilization: number;
  /** Share of the duration with at least one flow on the NIC. */
  readonly nic_busy_ratio: number;
  /** Bytes of finished transfers over the intra-node link (with `nodes`). */
  readonly intra_node_bytes: number;
}

/** The `network` section of a report (only when the spec sets `kv_transfer.network`). */
export interface NetworkReport {
  readonly setup_latency_ms: number;
  readonly max_concurrent_transfers: number | null;
  /** Finished transfers by path. */
  readonly nic_transfers: number;
  readonly intra_node_transfers: number;
  readonly workers: readonly NetworkWorkerReport[];
}

/** Keys the network adds to the report's `handoffs` (delays over finished transfers). */
export interface NetworkHandoffStats {
  /** Transfers finished (handoffs.count counts those started). */
  readonly completed: number;
  /** Requested to last byte: queue + setup + transfer. */
  readonly mean_delay_ms: number;
  readonly p50_delay_ms: number;
  readonly p90_delay_ms: number;
  readonly p99_delay_ms: number;
  readonly mean_queue_ms: number;
  readonly p99_queue_ms: number;
  readonly mean_setup_ms: number;
  readonly mean_transfer_ms: number;
  readonly p99_transfer_ms: number;
}

const GB = 1e9;

export class TransferNetwork<T> {
  private readonly fluid = new FairShareNetwork<Transfer<T>>();
  private readonly setupLatencyMs: number;
  private readonly limit: number | undefined;
  private readonly placement: NodePlacement | undefined;
  private readonly prefillNic: number[] = [];
  private readonly decodeNic: number[] = [];
  private readonly prefillIntra: number[] = [];
  private readonly decodeIntra: number[] = [];
  /** NIC slot queues, prefill NICs first (index = worker id), then decode NICs. */
  private readonly active: number[];
  private readonly waiting: Transfer<T>[][];
  private readonly waitHead: number[];
  /** Transfers in setup, in first-byte order (the setup latency is one constant). */
  private readonly inSetup: Transfer<T>[] = [];
  private setupHead = 0;
  private seq = 0;
  private lastMs = 0;
  private nicDone = 0;
  private intraDone = 0;
  private readonly delay = new Sample();
  private readonly queue = new Sample();
  private readonly transfer = new Sample();
  private setupSum = 0;

  /**
   * `network` as parsed (bandwidths in bytes per second), the spec's setup latency, and the
   * placement of workers on nodes when `network.nodes` is set (see `placeOnNodes`).
   */
  constructor(
    private readonly network: Network,
    setupLatencyMs: number,
    prefillWorkers: number,
    decodeWorkers: number,
    placement?: NodePlacement,
  ) {
    if (!(setupLatencyMs >= 0) || !Number.isFinite(setupLatencyMs)) throw new RangeError(`setup latency must be finite and >= 0 ms, got ${setupLatencyMs}`);
    if (network.nodes !== undefined && placement === undefined) throw new Error("network.nodes needs a placement of workers on nodes");
    this.setupLatencyMs = setupLatencyMs;
    this.limit = network.max_concurrent_transfers;
    this.placement = network.nodes === undefined ? undefined : placement;
    // Capacities in bytes per ms: bytes per second / 1000 (50 GB/s -> 5 x 10^7, as GB/s x 10^6).
    for (let i = 0; i < prefillWorkers; i++) this.prefillNic.push(this.fluid.addLink(network.nic.send / 1000));
    for (let j = 0; j < decodeWorkers; j++) this.decodeNic.push(this.fluid.addLink(network.nic.receive / 1000));
    if (network.nodes !== undefined) {
      const intra = network.nodes.intra_node_bandwidth / 1000;
      for (let i = 0; i < prefillWorkers; i++) this.prefillIntra.push(this.fluid.addLink(intra));
      for (let j = 0; j < decodeWorkers; j++) this.decodeIntra.push(this.fluid.addLink(intra));
    }
    const nics = prefillWorkers + decodeWorkers;
    this.active = new Array<number>(nics).fill(0);
    this.waiting = Array.from({ length: nics }, () => []);
    this.waitHead = new Array<number>(nics).fill(0);
  }

  /** The path between prefill worker `src` and decode worker `dst`. */
  pathBetween(src: number, dst: number): TransferPath {
    const p = this.placement;
    return p !== undefined && p.prefill[src] === p.decode[dst] ? "intra_node" : "nic";
  }

  /**
   * Asks for a transfer of `bytes` from prefill worker `src` to decode worker `dst` at `nowMs`.
   * The returned view fills in as the transfer starts, gets its first byte and ends.
   */
  request(nowMs: number, payload: T, src: number, dst: number, bytes: number): NetworkTransfer {
    this.advance(nowMs);
    if (this.prefillNic[src] === undefined) throw new RangeError(`unknown prefill worker ${src}`);
    if (this.decodeNic[dst] === undefined) throw new RangeError(`unknown decode worker ${dst}`);
    if (!(bytes >= 0) || !Number.isFinite(bytes)) throw new RangeError(`transfer bytes must be finite and >= 0, got ${bytes}`);
    const t: Transfer<T> = {
      seq: this.seq++,
      payload,
      src,
      dst,
      bytes,
      path: this.pathBetween(src, dst),
      requestedMs: nowMs,
      startMs: undefined,
      firstByteMs: undefined,
      endMs: undefined,
    };
    if (t.path === "intra_node" || this.limit === undefined) {
      this.begin(nowMs, t);
      return t;
    }
    const [a, b] = this.nicsOf(t);
    this.waiting[a]!.push(t);
    this.waiting[b]!.push(t);
    this.startWaiting(nowMs, a, b);
    return t;
  }

  /** When the next transfer gets its first byte or finishes, or undefined when idle. */
  nextTimeMs(): number | undefined {
    const s = this.inSetup[this.setupHead];
    const setupDue = s === undefined ? undefined : s.startMs! + this.setupLatencyMs;
    const flowDue = this.fluid.nextFinishMs();
    if (setupDue === undefined) return flowDue;
    return flowDue === undefined ? setupDue : Math.min(setupDue, flowDue);
  }

  /**
   * Runs everything due at `nowMs` (setups ending, flows finishing, queued transfers starting) and
   * returns the payloads of the transfers that finished, by decode worker id, then request order.
   */
  settle(nowMs: number): T[] {
    this.advance(nowMs);
    const done: Transfer<T>[] = [];
    for (;;) {
      let progressed = false;
      for (let s = this.inSetup[this.setupHead]; s !== undefined && s.startMs! + this.setupLatencyMs <= nowMs; s = this.inSetup[this.setupHead]) {
        this.setupHead++;
        progressed = true;
        s.firstByteMs = s.startMs! + this.setupLatencyMs;
        if (s.bytes === 0) this.finish(nowMs, s, done);
        else this.fluid.start(nowMs, this.linksOf(s), s.bytes, s);
      }
      if (this.setupHead > 1024 && this.setupHead * 2 > this.inSetup.length) {
        this.inSetup.splice(0, this.setupHead);
        this.setupHead = 0;
      }
      for (let f = this.fluid.popFinished(nowMs); f !== undefined; f = this.fluid.popFinished(nowMs)) {
        progressed = true;
        this.finish(nowMs, f.payload, done);
      }
      if (!progressed) break;
    }
    if (done.length > 1) done.sort((x, y) => x.dst - y.dst || x.seq - y.seq);
    return done.map((t) => t.payload);
  }

  /** The delays of finished transfers, for the report's `handoffs`. */
  handoffStats(): NetworkHandoffStats {
    const d = summarize(this.delay.values());
    const q = summarize(this.queue.values());
    const x = summarize(this.transfer.values());
    const n = this.delay.length;
    return {
      completed: n,
      mean_delay_ms: d.mean,
      p50_delay_ms: d.p50,
      p90_delay_ms: d.p90,
      p99_delay_ms: d.p99,
      mean_queue_ms: q.mean,
      p99_queue_ms: q.p99,
      mean_setup_ms: n > 0 ? this.setupSum / n : 0,
      mean_transfer_ms: x.mean,
      p99_transfer_ms: x.p99,
    };
  }

  /** Per-worker NIC load over `durationMs` (the report's duration). */
  report(durationMs: number): NetworkReport {
    const workers: NetworkWorkerReport[] = [];
    const side = (role: "prefill" | "decode", worker: number, nic: number, intra: number | undefined): NetworkWorkerReport => {
      const s = this.fluid.stats(nic, durationMs);
      const node = this.placement === undefined ? null : (role === "prefill" ? this.placement.prefill : this.placement.decode)[worker]!;
      return {
        role,
        worker,
        node,
        direction: role === "prefill" ? "send" : "receive",
        nic_gb_s: (s.capacity * 1000) / GB,
        nic_bytes: s.carriedBytes,
        nic_utilization: durationMs > 0 ? s.carriedBytes / (s.capacity * durationMs) : 0,
        nic_busy_ratio: durationMs > 0 ? Math.min(1, s.busyMs / durationMs) : 0,
        intra_node_bytes: intra === undefined ? 0 : this.fluid.stats(intra, durationMs).carriedBytes,
      };
    };
    this.prefillNic.forEach((nic, i) => workers.push(side("prefill", i, nic, this.prefillIntra[i])));
    this.decodeNic.forEach((nic, j) => workers.push(side("decode", j, nic, this.decodeIntra[j])));
    return {
      setup_latency_ms: this.setupLatencyMs,
      max_concurrent_transfers: this.limit ?? null,
      nic_transfers: this.nicDone,
      intra_node_transfers: this.intraDone,
      workers,
    };
  }

  private advance(nowMs: number): void {
    if (!Number.isFinite(nowMs)) throw new RangeError(`time must be finite, got ${nowMs}`);
    if (nowMs < this.lastMs) throw new Error(`time went back from ${this.lastMs} to ${nowMs} ms`);
    this.lastMs = nowMs;
  }

  private nicsOf(t: Transfer<T>): readonly [number, number] {
    return [t.src, this.prefillNic.length + t.dst];
  }

  private linksOf(t: Transfer<T>): number[] {
    return t.path === "intra_node" ? [this.prefillIntra[t.src]!, this.decodeIntra[t.dst]!] : [this.prefillNic[t.src]!, this.decodeNic[t.dst]!];
  }

  private begin(nowMs: number, t: Transfer<T>): void {
    t.startMs = nowMs;
    if (t.path === "nic" && this.limit !== undefined) {
      const [a, b] = this.nicsOf(t);
      this.active[a]!++;
      this.active[b]!++;
    }
    this.inSetup.push(t);
  }

  private finish(nowMs: number, t: Transfer<T>, done: Transfer<T>[]): void {
    t.endMs = nowMs;
    done.push(t);
    this.delay.push(nowMs - t.requestedMs);
    this.queue.push(t.startMs! - t.requestedMs);
    this.setupSum += t.firstByteMs! - t.startMs!;
    this.transfer.push(nowMs - t.firstByteMs!);
    if (t.path === "intra_node") {
      this.intraDone++;
      return;
    }
    this.nicDone++;
    if (this.limit === undefined) return;
    const [a, b] = this.nicsOf(t);
    this.active[a]!--;
    this.active[b]!--;
    this.startWaiting(nowMs, a, b);
  }

  private headOf(nic: number): Transfer<T> | undefined {
    return this.waiting[nic]![this.waitHead[nic]!];
  }

  private dequeue(nic: number): void {
    const q = this.waiting[nic]!;
    const h = ++this.waitHead[nic]!;
    if (h === q.length) {
      q.length = 0;
      this.waitHead[nic] = 0;
    } else if (h > 1024 && h * 2 > q.length) {
      q.splice(0, h);
      this.waitHead[nic] = 0;
    }
  }

  /** Starts the transfers first in line at both their NICs while both have a free slot. */
  private startWaiting(nowMs: number, ...nics: number[]): void {
    const limit = this.limit!;
    const work = [...nics];
    while (work.length > 0) {
      const nic = work.pop()!;
      const t = this.headOf(nic);
      if (t === undefined) continue;
      const [a, b] = this.nicsOf(t);
      if (this.headOf(a) !== t || this.headOf(b) !== t || this.active[a]! >= limit || this.active[b]! >= limit) continue;
      this.dequeue(a);
      this.dequeue(b);
      this.begin(nowMs, t);
      work.push(a, b);
    }
  }
}
