import type { Network } from "@kvsim/profile-schema";
import { describe, expect, it } from "vitest";
import { placeOnNodes, TransferNetwork, type NetworkTransfer } from "./transfer-network.js";

/** 1 GB/s = 10^9 B/s = 10^6 B/ms on every NIC. */
const GBPS = 1e9;
const nic1: Network = { nic: { send: GBPS, receive: GBPS } };

/** Runs the network to idle; returns the finished payloads with their instants. */
function runAll<T>(net: TransferNetwork<T>): [number, T[]][] {
  const out: [number, T[]][] = [];
  for (let t = net.nextTimeMs(); t !== undefined; t = net.nextTimeMs()) {
    const done = net.settle(t);
    if (done.length > 0) out.push([t, done]);
  }
  return out;
}

const times = (t: NetworkTransfer) => [t.requestedMs, t.startMs, t.firstByteMs, t.endMs];

describe("TransferNetwork", () => {
  it("moves one transfer at the NIC rate: bytes / bandwidth", () => {
    const net = new TransferNetwork<string>(nic1, 0, 1, 1);
    const t = net.request(0, "a", 0, 0, 5e6);
    // 5 x 10^6 B at 10^6 B/ms = 5 ms.
    expect(runAll(net)).toStrictEqual([[5, ["a"]]]);
    expect(times(t)).toStrictEqual([0, 0, 0, 5]);
  });

  it("adds the setup latency once per transfer, before the first byte", () => {
    const net = new TransferNetwork<string>(nic1, 2, 1, 1);
    const a = net.request(0, "a", 0, 0, 5e6);
    const b = net.request(0, "b", 0, 0, 5e6);
    // Both: setup 0 -> 2; then 10^6 B/ms shared by two, 5 x 10^6 B each at 5 x 10^5 B/ms = 10 ms -> 12.
    expect(runAll(net)).toStrictEqual([[12, ["a", "b"]]]);
    expect(times(a)).toStrictEqual([0, 0, 2, 12]);
    expect(times(b)).toStrictEqual([0, 0, 2, 12]);
    // Later, alone: 2 + 5 = 7 ms after its request, the setup paid once.
    const c = net.request(20, "c", 0, 0, 5e6);
    expect(runAll(net)).toStrictEqual([[27, ["c"]]]);
    expect(times(c)).toStrictEqual([20, 20, 22, 27]);
  });

  it("halves each flow when a decode NIC receives from two prefill workers", () => {
    const net = new TransferNetwork<string>(nic1, 0, 2, 1);
    net.request(0, "p0", 0, 0, 1e6);
    net.request(0, "p1", 1, 0, 1e6);
    // Alone each would take 1 ms; the receiver's 10^6 B/ms splits in two: 2 ms.
    expect(runAll(net)).toStrictEqual([[2, ["p0", "p1"]]]);
  });

  it("does not slow transfers that share no NIC", () => {
    const net = new TransferNetwork<string>(nic1, 0, 2, 2);
    net.request(0, "p0->d0", 0, 0, 1e6);
    net.request(0, "p1->d1", 1, 1, 1e6);
    expect(runAll(net)).toStrictEqual([[1, ["p0->d0", "p1->d1"]]]);
  });

  it("queues the third of three transfers when a NIC runs two at once", () => {
    const net = new TransferNetwork<string>({ ...nic1, max_concurrent_transfers: 2 }, 0, 1, 1);
    const a = net.request(0, "a", 0, 0, 1e6);
    net.request(0, "b", 0, 0, 1e6);
    const c = net.request(0, "c", 0, 0, 1e6);
    // a and b share 10^6 B/ms: 2 ms each. c waits until 2, then runs alone: 1 ms -> 3.
    expect(runAll(net)).toStrictEqual([
      [2, ["a", "b"]],
      [3, ["c"]],
    ]);
    expect(times(a)).toStrictEqual([0, 0, 0, 2]);
    expect(times(c)).toStrictEqual([0, 2, 2, 3]);
    expect(net.handoffStats()).toMatchObject({ completed: 3, mean_queue_ms: 2 / 3, p99_queue_ms: 2 });
  });

  it("keeps each NIC's queue in arrival order, so a transfer held by a busy receiver holds back the next at its sender", () => {
    const net = new TransferNetwork<string>({ ...nic1, max_concurrent_transfers: 1 }, 0, 2, 2);
    net.request(0, "long p0->d0", 0, 0, 4e6); // 0 -> 4
    const held = net.request(0, "p1->d0", 1, 0, 1e6); // waits for d0 until 4, then 1 ms -> 5
    const behind = net.request(0, "p1->d1", 1, 1, 1e6); // d1 is free, but p1's line is held: 5 -> 6
    expect(runAll(net)).toStrictEqual([
      [4, ["long p0->d0"]],
      [5, ["p1->d0"]],
      [6, ["p1->d1"]],
    ]);
    expect(times(held)).toStrictEqual([0, 4, 4, 5]);
    expect(times(behind)).toStrictEqual([0, 5, 5, 6]);
  });

  it("returns transfers that finish together by decode worker, then request order", () => {
    const net = new TransferNetwork<string>(nic1, 0, 2, 2);
    net.request(0, "p0->d1", 0, 1, 1e6);
    net.request(0, "p1->d0", 1, 0, 1e6);
    expect(runAll(net)).toStrictEqual([[1, ["p1->d0", "p0->d1"]]]);
  });

  it("finishes a transfer of zero bytes after its setup", () => {
    const net = new TransferNetwork<string>(nic1, 0.5, 1, 1);
    const t = net.request(3, "empty", 0, 0, 0);
    expect(runAll(net)).toStrictEqual([[3.5, ["empty"]]]);
    expect(times(t)).toStrictEqual([3, 3, 3.5, 3.5]);
  });

  it("sends between workers of one node over the intra-node link, without a NIC slot", () => {
    // TP 4 on 8-GPU nodes, interleaved: P0 and D0 on node 0, P1 and D1 on node 1.
    const placed = placeOnNodes(8, "interleaved", [4, 4], [4, 4]);
    if (!placed.ok) throw new Error(placed.reason);
    const network: Network = { ...nic1, max_concurrent_transfers: 1, nodes: { gpus_per_node: 8, intra_node_bandwidth: 10 * GBPS, fill: "interleaved" } };
    const net = new TransferNetwork<string>(network, 0, 2, 2, placed.placement);
    expect([net.pathBetween(0, 0), net.pathBetween(0, 1), net.pathBetween(1, 1)]).toStrictEqual(["intra_node", "nic", "intra_node"]);
    net.request(0, "p0->d1 nic", 0, 1, 1e7); // 10^7 B at 10^6 B/ms: 10 ms
    net.request(0, "p0->d0 nvlink", 0, 0, 1e7); // at 10^7 B/ms: 1 ms, not held by the NIC's one slot
    expect(runAll(net)).toStrictEqual([
      [1, ["p0->d0 nvlink"]],
      [10, ["p0->d1 nic"]],
    ]);
    const r = net.report(20);
    expect(r.nic_transfers).toBe(1);
    expect(r.intra_node_transfers).toBe(1);
    expect(r.workers[0]).toStrictEqual({
      role: "prefill",
      worker: 0,
      node: 0,
      direction: "send",
      nic_gb_s: 1,
      nic_bytes: 1e7,
      nic_utilization: 0.5, // 10^7 B / (10^6 B/ms x 20 ms)
      nic_busy_ratio: 0.5, // busy 0 -> 10 of 20 ms
      intra_node_bytes: 1e7,
    });
  });

  it("reports delay percentiles over finished transfers", () => {
    const net = new TransferNetwork<number>(nic1, 1, 1, 1);
    for (let i = 0; i < 4; i++) {
      net.request(i * 100, i, 0, 0, (i + 1) * 1e6);
      runAll(net);
    }
    // Delays: 1 + 1, 1 + 2, 1 + 3, 1 + 4 ms. Nearest rank: p50 = sorted[round(3 x 0.5)] = sorted[2] = 4,
    // p90 = sorted[round(2.7)] = 5, p99 = sorted[3] = 5.
    expect(net.handoffStats()).toStrictEqual({
      completed: 4,
      mean_delay_ms: 3.5,
      p50_delay_ms: 4,
      p90_delay_ms: 5,
      p99_delay_ms: 5,
      mean_queue_ms: 0,
      p99_queue_ms: 0,
      mean_setup_ms: 1,
      mean_transfer_ms: 2.5,
      p99_transfer_ms: 4,
    });
  });
});

describe("placeOnNodes", () => {
  it("fills nodes in order, a worker's TP ranks on one node", () => {
    expect(placeOnNodes(8, "prefill_first", [4, 4], [4, 4])).toStrictEqual({ ok: true, placement: { prefill: [0, 0], decode: [1, 1] } });
    expect(placeOnNodes(8, "interleaved", [4, 4], [4, 4])).toStrictEqual({ ok: true, placement: { prefill: [0, 1], decode: [0, 1] } });
    // TP 3 on 8 GPUs: P0 (0-2), P1 (3-5), D0 needs 3 of the 2 left -> node 1.
    expect(placeOnNodes(8, "prefill_first", [3, 3], [3])).toStrictEqual({ ok: true, placement: { prefill: [0, 0], decode: [1] } });
    // Interleaved with a larger decode pool: P0 D0 | D1 D2 (TP 4 on 8).
    expect(placeOnNodes(8, "interleaved", [4], [4, 4, 4])).toStrictEqual({ ok: true, placement: { prefill: [0], decode: [0, 1, 1] } });
  });
  it("refuses a worker larger than a node", () => {
    expect(placeOnNodes(4, "prefill_first", [8], [4])).toStrictEqual({
      ok: false,
      reason: "prefill worker 0 has 8 TP ranks but a node has 4 GPUs (a worker's TP ranks share one node)",
    });
  });
});
