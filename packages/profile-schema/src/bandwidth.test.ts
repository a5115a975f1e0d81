import { describe, expect, it } from "vitest";
import { parseBandwidth } from "./bandwidth.js";

const bps = (text: string): number => {
  const r = parseBandwidth(text);
  if (!r.ok) throw new Error(r.reason);
  return r.bytesPerSecond;
};
const reason = (text: string): string => {
  const r = parseBandwidth(text);
  if (r.ok) throw new Error(`${text} parsed as ${r.bytesPerSecond}`);
  return r.reason;
};

describe("parseBandwidth", () => {
  it("reads decimal bytes, bits and binary bytes per second", () => {
    expect(bps("50 GB/s")).toBe(50e9); // 50 x 10^9
    expect(bps("50GB/s")).toBe(50e9);
    expect(bps("  12.5 GB/s ")).toBe(12.5e9);
    expect(bps("400 Gbit/s")).toBe(50e9); // 400 x 10^9 / 8
    expect(bps("100 Mbit/s")).toBe(12.5e6); // 10^8 / 8
    expect(bps("1 GiB/s")).toBe(2 ** 30);
    expect(bps("2 MiB/s")).toBe(2 ** 21);
    expect(bps("1.6 TB/s")).toBe(1.6e12);
    expect(bps("1e3 MB/s")).toBe(1e9);
    expect(bps("8 Mbit/s")).toBe(1e6); // the smallest accepted: 1 MB/s
  });
  it("refuses a bare number and names the units to use", () => {
    expect(reason("50")).toBe('"50" is not a bandwidth: write it with a unit, e.g. "50 GB/s" (bytes) or "400 Gbit/s" (bits)');
  });
  it("refuses the ambiguous spellings Gbps, GBps and Gb/s", () => {
    expect(reason("400 Gbps")).toContain("is ambiguous (bits or bytes?)");
    expect(reason("50 GBps")).toContain("is ambiguous (bits or bytes?)");
    expect(reason("400 Gb/s")).toBe('"400 Gb/s" is ambiguous next to GB/s: spell bits as Gbit/s');
  });
  it("refuses unknown units and values outside [1 MB/s, 100 TB/s]", () => {
    expect(reason("50 gb/s")).toContain('has an unknown unit "gb/s"');
    expect(reason("50 GiBit/s")).toContain("unknown unit");
    expect(reason("999 kB/s")).toContain("outside the bandwidths kvsim accepts (1 MB/s to 100 TB/s)");
    expect(reason("2 PB/s")).toContain("unknown unit");
    expect(reason("101 TB/s")).toContain("outside the bandwidths");
    expect(reason("1e400 GB/s")).toContain("is not a finite bandwidth");
    expect(reason("-5 GB/s")).toContain("is not a bandwidth");
  });
});
