import { InputError } from "@kvsim/profile-schema";
import { describe, expect, it } from "vitest";
import { runReplay, type ReplayResult } from "./replay.js";
import { byLength, glmProfile, linearProfile, traceSpec } from "./test-fixtures.js";

function ok(r: ReplayResult): Extract<ReplayResult, { ok: true }> {
  if (!r.ok) throw new Error(`replay failed: ${r.reason}`);
  return r;
}

// Linear profile of 10^6 B/token, full_prompt: a 4-token prompt moves 4 x 10^6 B, 4 ms at 1 GB/s
// (10^6 B/ms). Fixed timing 10 / 2 ms. The private-pipe S1 case: prefill 0 -> 10, transfer
// 10 -> 14, the decode rank's one-token row 14 -> 16 (token 0), 16 -> 18 (token 1).
const smallEngine = { num_gpu_blocks: 16, block_size: 4, max_num_seqs: 4, max_num_batched_tokens: 64 };
const NIC_1GB = { nic: { send: "1 GB/s", receive: "1 GB/s" } };
const pd = (prefill: number, decode: number, kvTransfer: Record<string, unknown>) =>
  traceSpec({
    profile: linearProfile(1_000_000),
    topology: { kind: "disaggregated", prefill: { workers: prefill }, decode: { workers: decode } },
    engine: smallEngine,
    timing: { type: "fixed", prefill_ms: 10, decode_ms: 2 },
    kv_transfer: { mode: "full_prompt", ...kvTransfer },
  });
const ttfts = (r: Extract<ReplayResult, { ok: true }>) => r.records.map((x) => x.ttft_ms);

describe("P/D replay on a shared network (fixed timing, hand-derived)", () => {
  it("one transfer alone takes what the private pipe takes", async () => {
    const pipe = ok(await runReplay({ spec: pd(1, 1, { bandwidth_gbps: 1 }), records: [byLength(1, 0, 4, 2)] }));
    const net = ok(await runReplay({ spec: pd(1, 1, { network: NIC_1GB }), records: [byLength(1, 0, 4, 2)] }));
    expect(ttfts(pipe)).toStrictEqual([16]);
    expect(ttfts(net)).toStrictEqual([16]);
    const h = net.records[0]!.handoff!;
    expect([h.transfer_path, h.transfer_start_ms, h.transfer_first_byte_ms, h.transfer_end_ms]).toStrictEqual(["nic", 10, 10, 14]);
    expect([h.queue_ms, h.setup_ms, h.transfer_ms, h.delay_ms, h.bandwidth_gbps]).toStrictEqual([0, 0, 4, 4, null]);
    expect(pipe.records[0]!.handoff!.transfer_path).toBeUndefined();
  });

  it("two transfers that start together on one NIC pair each take twice as long", async () => {
    // Both prefill in the pass 0 -> 10 and are held at 10; they share 10^6 B/ms: 8 ms each -> 18.
    // Decode 18 -> 20 (token 0 of both): TTFT 20 (4 ms later than the private pipe's 16).
    const records = [byLength(1, 0, 4, 2), byLength(2, 0, 4, 2)];
    const pipe = ok(await runReplay({ spec: pd(1, 1, { bandwidth_gbps: 1 }), records }));
    const net = ok(await runReplay({ spec: pd(1, 1, { network: NIC_1GB }), records }));
    expect(ttfts(pipe)).toStrictEqual([16, 16]);
    expect(ttfts(net)).toStrictEqual([20, 20]);
    expect(net.records.map((x) => x.handoff!.transfer_ms)).toStrictEqual([8, 8]);
    expect(net.report.handoffs).toMatchObject({ count: 2, payload_bytes: 8e6, completed: 2, mean_delay_ms: 8, p99_delay_ms: 8 });
  });

  it("a decode NIC receiving from two prefill workers halves each flow; two decode workers do not", async () => {
    // Round robin: r1 -> P0, r2 -> P1. One decode worker: both flows into D0 at 5 x 10^5 B/ms -> 8 ms.
    const records = [byLength(1, 0, 4, 2), byLength(2, 0, 4, 2)];
    const oneDecode = ok(await runReplay({ spec: pd(2, 1, { network: NIC_1GB }), records }));
    expect(oneDecode.records.map((x) => [x.workers.prefill, x.workers.decode])).toStrictEqual([
      [0, 0],
      [1, 0],
    ]);
    expect(ttfts(oneDecode)).toStrictEqual([20, 20]);
    // Two decode workers: P0 -> D0 and P1 -> D1 share no NIC: 4 ms each, TTFT 16.
    const twoDecode = ok(await runReplay({ spec: pd(2, 2, { network: NIC_1GB }), records }));
    expect(ttfts(twoDecode)).toStrictEqual([16, 16]);
  });

  it("the setup latency adds once per transfer, on the private pipe and on the network", async () => {
    // 10 + 1.5 (setup) + 4 (bytes) + 2 (one-token row) = 17.5.
    const records = [byLength(1, 0, 4, 2)];
    const pipe = ok(await runReplay({ spec: pd(1, 1, { bandwidth_gbps: 1, setup_latency_ms: 1.5 }), records }));
    const net = ok(await runReplay({ spec: pd(1, 1, { network: NIC_1GB, setup_latency_ms: 1.5 }), records }));
    expect(ttfts(pipe)).toStrictEqual([17.5]);
    expect(pipe.records[0]!.handoff!.delay_ms).toBe(5.5);
    expect(ttfts(net)).toStrictEqual([17.5]);
    expect([net.records[0]!.handoff!.transfer_first_byte_ms, net.records[0]!.handoff!.setup_ms]).toStrictEqual([11.5, 1.5]);
    // Two at once on the network: setup 10 -> 11.5 for both, then 8 ms shared -> 19.5; TTFT 21.5.
    const two = ok(await runReplay({ spec: pd(1, 1, { network: NIC_1GB, setup_latency_ms: 1.5 }), records: [byLength(1, 0, 4, 2), byLength(2, 0, 4, 2)] }));
    expect(ttfts(two)).toStrictEqual([21.5, 21.5]);
    expect(two.report.handoffs).toMatchObject({ mean_setup_ms: 1.5, mean_transfer_ms: 8 });
  });

  it("a concurrent-transfer limit of two queues the third of three", async () => {
    // Three held at 10. r1 and r2 share the NIC pair: 10 -> 18. r3 waits 8 ms, then alone 18 -> 22.
    // Decode: r1, r2 token 0 at 20, token 1 at 22; r3 activated at 22 after that pass: token 0 at 24.
    const records = [byLength(1, 0, 4, 2), byLength(2, 0, 4, 2), byLength(3, 0, 4, 2)];
    const r = ok(await runReplay({ spec: pd(1, 1, { network: { ...NIC_1GB, max_concurrent_transfers: 2 } }), records }));
    expect(ttfts(r)).toStrictEqual([20, 20, 24]);
    const h3 = r.records[2]!.handoff!;
    expect([h3.destination_reserved_ms, h3.transfer_start_ms, h3.transfer_end_ms, h3.queue_ms, h3.transfer_ms]).toStrictEqual([10, 18, 22, 8, 4]);
    expect(r.report.handoffs).toMatchObject({ completed: 3, p99_queue_ms: 8, p99_delay_ms: 12 });
  });

  it("workers on one node use the intra-node link", async () => {
    // TP 1 on 2-GPU nodes: P0 and D0 on node 0. 4 x 10^6 B at 10 GB/s (10^7 B/ms): 0.4 ms.
    // TTFT = 10 + 0.4 + 2 = 12.4.
    const spec = pd(1, 1, { network: { ...NIC_1GB, nodes: { gpus_per_node: 2, intra_node_bandwidth: "10 GB/s" } } });
    const r = ok(await runReplay({ spec, records: [byLength(1, 0, 4, 2)] }));
    expect(r.records[0]!.handoff!.transfer_path).toBe("intra_node");
    expect(r.records[0]!.ttft_ms).toBeCloseTo(12.4, 12);
    expect(r.report.network).toMatchObject({ nic_transfers: 0, intra_node_transfers: 1 });
    expect(r.report.network!.workers.map((w) => [w.role, w.node, w.nic_bytes, w.intra_node_bytes])).toStrictEqual([
      ["prefill", 0, 0, 4e6],
      ["decode", 0, 0, 4e6],
    ]);
  });

  it("reports NIC load per worker over the run", async () => {
    // One 4 x 10^6 B transfer 10 -> 14 on 1 GB/s NICs; the run lasts 18 ms (E2E of r1).
    const r = ok(await runReplay({ spec: pd(1, 1, { network: NIC_1GB }), records: [byLength(1, 0, 4, 2)] }));
    expect(r.report.duration_ms).toBe(18);
    expect(r.report.network).toStrictEqual({
      setup_latency_ms: 0,
      max_concurrent_transfers: null,
      nic_transfers: 1,
      intra_node_transfers: 0,
      workers: [
        // 4 x 10^6 / (10^6 B/ms x 18 ms) = 2 / 9; busy 4 of 18 ms = 2 / 9.
        {
          role: "prefill",
          worker: 0,
          node: null,
          direction: "send",
          nic_gb_s: 1,
          nic_bytes: 4e6,
          nic_utilization: 4 / 18,
          nic_busy_ratio: 4 / 18,
          intra_node_bytes: 0,
        },
        {
          role: "decode",
          worker: 0,
          node: null,
          direction: "receive",
          nic_gb_s: 1,
          nic_bytes: 4e6,
          nic_utilization: 4 / 18,
          nic_busy_ratio: 4 / 18,
          intra_node_bytes: 0,
        },
      ],
    });
  });

  it("refuses a worker whose TP ranks do not fit on a node, naming the field", async () => {
    // GLM-5.3-Flash is TP 4; nodes of 2 GPUs cannot hold one worker.
    const spec = traceSpec({
      profile: glmProfile(),
      topology: { kind: "disaggregated", prefill: { workers: 1 }, decode: { workers: 1 } },
      timing: { type: "fixed", prefill_ms: 10, decode_ms: 2 },
      kv_transfer: { network: { ...NIC_1GB, nodes: { gpus_per_node: 2, intra_node_bandwidth: "10 GB/s" } } },
    });
    const run = runReplay({ spec, specFile: "s.yaml", records: [byLength(1, 0, 4, 2)] });
    await expect(run).rejects.toBeInstanceOf(InputError);
    await expect(run).rejects.toThrow(
      "s.yaml: kv_transfer.network.nodes.gpus_per_node: prefill worker 0 has 4 TP ranks but a node has 2 GPUs (a worker's TP ranks share one node)",
    );
  });
});
