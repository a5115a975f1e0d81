import { KvTransferSchema } from "@kvsim/profile-schema";
import { describe, expect, it } from "vitest";
import { fromMockEngineArgs, toDynamoKvTransfer, toMockEngineArgs } from "./engine-args.js";
import { startTransferDelayMs, type HandoffTransferTiming } from "./handoff-timing.js";
import { parseJsonExact, stringifyJsonExact, type JsonValue } from "./json-u64.js";
import { createEngineSession } from "./session.js";
import { GLM, LLAMA_8B, refusal } from "./test-profiles.js";

// GLM-5.3-Flash at N = 1,000 (docs/rules/grouped-pd.md §2): 1 full-attention block of 2,176 tokens at
// 5,995 B per token + 36,927,488 fixed bytes = 49,972,608 B: 49.972608 ms at 1 GB/s.
const GLM_1000: HandoffTransferTiming = {
  mode: "destination_missing",
  full_prompt_tokens: 2176,
  kv_bytes_per_token: 5995,
  kv_bytes_per_request: 36_927_488,
  bandwidth_gb_s: 1,
};
const ALL_MISSING = { transferable_prompt_tokens: 2176, kv_bytes_per_request: 36_927_488 };

describe("the per-transfer setup latency through Dynamo's shapes", () => {
  it("engine args carry it in the kvsim extension kv_transfer_setup_latency_ms, both ways", () => {
    const args = fromMockEngineArgs({ kv_transfer_bandwidth: 1, kv_transfer_setup_latency_ms: 0.5 }, LLAMA_8B);
    expect(args.kvTransfer).toStrictEqual({ mode: "full_prompt", bandwidthGbps: 1, setupLatencyMs: 0.5 });
    const back = toMockEngineArgs(args, LLAMA_8B);
    expect(back.ok && back.value.kv_transfer_setup_latency_ms).toBe(0.5);
    // 0 and null mean none, as an absent value.
    expect(fromMockEngineArgs({ kv_transfer_setup_latency_ms: 0 }, LLAMA_8B).kvTransfer).toStrictEqual({ mode: "full_prompt" });
    expect(fromMockEngineArgs({ kv_transfer_setup_latency_ms: null }, LLAMA_8B).kvTransfer).toStrictEqual({ mode: "full_prompt" });
  });

  it("refuses a negative or absurd latency, naming the field", () => {
    expect(refusal(() => fromMockEngineArgs({ kv_transfer_setup_latency_ms: -1 }, LLAMA_8B))).toStrictEqual([
      "kv_transfer_setup_latency_ms: must be a number of ms in [0, 1000000], got -1",
    ]);
    expect(refusal(() => fromMockEngineArgs({ kv_transfer_setup_latency_ms: "1ms" }, LLAMA_8B))).toStrictEqual([
      'kv_transfer_setup_latency_ms: must be a number of ms in [0, 1000000], got "1ms"',
    ]);
  });

  it("StartTransfer.delay_ms = setup + bytes / bandwidth, and the setup alone when nothing moves", () => {
    // 0.5 + 49.972608 = 50.472608 ms.
    expect(startTransferDelayMs(GLM_1000, ALL_MISSING, 0.5)).toBe(50.472608);
    // A full destination hit moves nothing (kvsim semantics): the setup is still paid once.
    expect(startTransferDelayMs(GLM_1000, { transferable_prompt_tokens: 0, kv_bytes_per_request: 0 }, 0.5)).toBe(0.5);
    // No bandwidth: Dynamo's None counts as 0 ms.
    expect(startTransferDelayMs({ ...GLM_1000, bandwidth_gb_s: null }, ALL_MISSING, 0.5)).toBe(0.5);
    expect(startTransferDelayMs(GLM_1000, ALL_MISSING, 0)).toBe(49.972608);
  });

  it("a session with a setup latency answers handoff_delay with it included", () => {
    const engine = { kv_transfer_bandwidth: 1, kv_transfer_timing_mode: "destination_missing", kv_transfer_setup_latency_ms: 0.5 };
    const decode = createEngineSession({ profile: GLM, role: "decode", engineArgs: engine });
    const line = stringifyJsonExact({ id: 1, op: "handoff_delay", transfer_timing: GLM_1000, destination_reserved: ALL_MISSING });
    const r = parseJsonExact(decode.handleLine(line)) as Record<string, JsonValue>;
    expect(r).toMatchObject({ ok: true, delay_ms: 50.472608, setup_latency_ms: 0.5 });
    expect(decode.engineArgs.kv_transfer_setup_latency_ms).toBe(0.5);
  });
});

describe("toDynamoKvTransfer", () => {
  const kv = (v: unknown) => KvTransferSchema.parse(v);
  it("maps bandwidth, mode and setup latency", () => {
    expect(toDynamoKvTransfer(kv({ bandwidth_gbps: 50, mode: "destination_missing", setup_latency_ms: 0.2 }))).toStrictEqual({
      ok: true,
      value: { kv_transfer_bandwidth: 50, kv_transfer_timing_mode: "destination_missing", kv_transfer_setup_latency_ms: 0.2 },
    });
    expect(toDynamoKvTransfer(kv({}))).toStrictEqual({
      ok: true,
      value: { kv_transfer_bandwidth: null, kv_transfer_timing_mode: "destination_missing", kv_transfer_setup_latency_ms: 0 },
    });
  });
  it("refuses, by name, the parts of a shared network Dynamo would drop", () => {
    const r = toDynamoKvTransfer(
      kv({
        setup_latency_ms: 0.2,
        network: { nic: { send: "50 GB/s", receive: "50 GB/s" }, max_concurrent_transfers: 4, nodes: { gpus_per_node: 8, intra_node_bandwidth: "450 GB/s" } },
      }),
    );
    expect(r.ok).toBe(false);
    const reason = r.ok ? "" : r.reason;
    expect(reason).toMatch(/^Dynamo's engine args would drop kv_transfer\.network\.nic \(/);
    expect(reason).toContain("; kv_transfer.network.max_concurrent_transfers (");
    expect(reason).toContain("; kv_transfer.network.nodes (");
  });
  it("refuses a fallback latency Dynamo would turn into 0 ms", () => {
    expect(toDynamoKvTransfer(kv({ fallback_latency_ms: 3 }))).toStrictEqual({
      ok: false,
      reason:
        "Dynamo's engine args would drop kv_transfer.fallback_latency_ms (3 ms: Dynamo charges 0 ms for a timing without bandwidth; use setup_latency_ms)",
    });
  });
});
