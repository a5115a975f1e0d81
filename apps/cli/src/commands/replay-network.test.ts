import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { runCli } from "../main.js";
import { captureIo } from "../test-io.js";

// A linear profile of 10^6 B/token in P/D, full_prompt: a 4-token prompt moves 4 x 10^6 B.
const LINEAR = JSON.stringify({ schema_version: 1, model: "test/linear", vllm_version: "0.32.0", tensor_parallel_size: 1, kv_bytes_per_token: 1_000_000 });
const spec = (kvTransfer: string) => `version: 1
profile: ./linear.json
topology: { kind: disaggregated, prefill: { workers: 1 }, decode: { workers: 1 } }
engine: { num_gpu_blocks: 16, block_size: 4, max_num_seqs: 4, max_num_batched_tokens: 64 }
timing: { type: fixed, prefill_ms: 10, decode_ms: 2 }
workload: { trace: ./trace.jsonl, format: kvsim }
kv_transfer:
${kvTransfer}
`;
const TWO_REQUESTS =
  '{"request_id":"a","arrival_ms":0,"input_tokens":4,"output_tokens":2}\n{"request_id":"b","arrival_ms":0,"input_tokens":4,"output_tokens":2}\n';

let dir: string;
beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), "kvsim-network-"));
  writeFileSync(join(dir, "linear.json"), LINEAR);
  writeFileSync(join(dir, "trace.jsonl"), TWO_REQUESTS);
});
afterEach(() => {
  rmSync(dir, { recursive: true, force: true });
});

async function replay(kvTransfer: string) {
  writeFileSync(join(dir, "spec.yaml"), spec(kvTransfer));
  const io = captureIo({ stderrIsTTY: false });
  const code = await runCli(["replay", "--spec", join(dir, "spec.yaml")], io);
  return { code, out: io.stdout, err: io.stderr };
}

describe("kvsim replay with kv_transfer.network", () => {
  it("prints the handoff delay percentiles and each NIC's utilization", async () => {
    // Both prompts are held at 10 and share the 1 GB/s NIC pair: 8 x 10^6 B at 10^6 B/ms, both end
    // at 18; decode 18 -> 20 -> 22. Each NIC carried 8 x 10^6 B over 22 ms: 8 / 22 = 36.4 %.
    const r = await replay("  mode: full_prompt\n  network: { nic: { send: 1 GB/s, receive: 8 Gbit/s } }");
    expect(r.code).toBe(0);
    expect(r.out).toContain("handoffs               2, 8,000,000 bytes, mean delay 8.000 ms\n");
    expect(r.out).toContain("handoff delay          p50 8.000, p90 8.000, p99 8.000 ms (mean queue 0.000, setup 0.000, transfer 8.000 ms)\n");
    expect(r.out).toContain("NIC utilization        P0 36.4 %, D0 36.4 %\n");
  });
  it("refuses a bandwidth without an explicit unit, naming the file, line and field (exit 2)", async () => {
    const r = await replay("  network: { nic: { send: 50 Gbps, receive: 50 GB/s } }");
    expect(r.code).toBe(2);
    expect(r.err).toMatch(/spec\.yaml:8:\d+: kv_transfer\.network\.nic\.send: "50 Gbps" is ambiguous \(bits or bytes\?\)/);
  });
});
