import { describe, expect, it } from "vitest";
import { InputError } from "./errors.js";
import { parseByteSize } from "./kv-offload.js";
import { parseSpec } from "./parse.js";

const base = [
  "version: 1",
  "profile: ./p.json",
  "topology: { kind: aggregated, workers: 2 }",
  "timing: { type: fixed, prefill_ms: 10, decode_ms: 2 }",
  "workload: { trace: t.jsonl, format: mooncake }",
];

function issues(text: string): string[] {
  try {
    parseSpec(text, "/w/s.yaml");
  } catch (e) {
    expect(e).toBeInstanceOf(InputError);
    return (e as InputError).message.split("\n");
  }
  throw new Error("expected an InputError");
}

describe("parseByteSize", () => {
  it("reads binary and decimal units to whole bytes", () => {
    expect(parseByteSize("200 GiB")).toEqual({ ok: true, bytes: 200 * 2 ** 30 });
    expect(parseByteSize("1.5TB")).toEqual({ ok: true, bytes: 1.5e12 });
    expect(parseByteSize("512 MiB")).toEqual({ ok: true, bytes: 512 * 2 ** 20 });
    expect(parseByteSize("10 kB")).toEqual({ ok: true, bytes: 10_000 });
    expect(parseByteSize("3 B")).toEqual({ ok: true, bytes: 3 });
  });

  it("refuses a bare number, an unknown unit, less than a byte and more than 2^53 bytes", () => {
    expect(parseByteSize("200")).toMatchObject({ ok: false, reason: expect.stringMatching(/has no unit/) });
    expect(parseByteSize("200 GB/s")).toMatchObject({ ok: false, reason: expect.stringMatching(/not a size/) });
    expect(parseByteSize("2 Gb")).toMatchObject({ ok: false, reason: expect.stringMatching(/unknown unit "Gb"/) });
    expect(parseByteSize("0.5 B")).toMatchObject({ ok: false, reason: expect.stringMatching(/less than one byte/) });
    expect(parseByteSize("9 PiB")).toMatchObject({ ok: false, reason: expect.stringMatching(/unknown unit/) });
    expect(parseByteSize("9000 TiB")).toMatchObject({ ok: false, reason: expect.stringMatching(/more than 2\^53/) });
    expect(parseByteSize("-1 GiB")).toMatchObject({ ok: false });
  });
});

describe("kv_offload in a spec", () => {
  it("parses tiers with their defaults", () => {
    const spec = parseSpec(
      [...base, "kv_offload:", "  tiers:", "    - { name: cpu, capacity: 200 GiB, read_bandwidth: 25 GB/s, write_bandwidth: 20 GB/s }"].join("\n"),
      "/w/s.yaml",
    );
    expect(spec.kv_offload).toEqual({
      tiers: [{ name: "cpu", capacity: 200 * 2 ** 30, read_bandwidth: 25e9, write_bandwidth: 20e9, latency_ms: 0, store: "write_through", shared: "worker" }],
    });
  });

  it("names the field of each problem", () => {
    const out = issues(
      [
        ...base,
        "kv_offload:",
        "  tiers:",
        "    - { name: cpu, capacity: 200, read_bandwidth: 25 GB/s, write_bandwidth: 20 GB/s, store: lru }",
        "    - { name: cpu, capacity: 1 TiB, read_bandwidth: 25 Gbps, write_bandwidth: 2 GB/s, shared: node, colour: red }",
      ].join("\n"),
    );
    const text = out.join("\n");
    expect(text).toMatch(/s\.yaml:8:20: kv_offload\.tiers\[0\]\.capacity: expected a size with its unit/);
    expect(text).toMatch(/kv_offload\.tiers\[0\]\.store.*write_through or on_evict/);
    expect(text).toMatch(/kv_offload\.tiers\[1\]\.read_bandwidth.*ambiguous/);
    expect(text).toMatch(/kv_offload\.tiers\[1\].*colour/);
  });

  it("refuses a repeated tier name and shared: node without workers_per_node", () => {
    const text = issues(
      [
        ...base,
        "kv_offload:",
        "  tiers:",
        "    - { name: cpu, capacity: 1 GiB, read_bandwidth: 25 GB/s, write_bandwidth: 20 GB/s, shared: node }",
        "    - { name: cpu, capacity: 1 TiB, read_bandwidth: 2 GB/s, write_bandwidth: 2 GB/s }",
      ].join("\n"),
    ).join("\n");
    expect(text).toMatch(/kv_offload\.tiers\[1\]\.name.*repeats the tier name "cpu"/);
    expect(text).toMatch(/kv_offload\.tiers\[0\]\.shared.*workers_per_node/);
    expect(issues([...base, "kv_offload: { tiers: [] }"].join("\n")).join("\n")).toMatch(/kv_offload\.tiers.*at least one tier/);
  });
});
