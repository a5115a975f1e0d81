import { z } from "zod";
import { MAX_BANDWIDTH_GBPS, MIN_BANDWIDTH_GBPS } from "./limits.js";

/**
 * Bandwidths written with an explicit unit: `50 GB/s` (decimal gigabytes), `400 Gbit/s`
 * (gigabits), `25 GiB/s` (binary). A bare number or an ambiguous spelling (`Gbps`, `Gb/s`,
 * `GBps`) is refused: "Gbps" reads as gigabits to some and gigabytes to others, 8x apart.
 */

const BYTE_PREFIX: Readonly<Record<string, number>> = { "": 1, k: 1e3, M: 1e6, G: 1e9, T: 1e12, Ki: 2 ** 10, Mi: 2 ** 20, Gi: 2 ** 30, Ti: 2 ** 40 };
const BIT_PREFIX: Readonly<Record<string, number>> = { "": 1, k: 1e3, M: 1e6, G: 1e9, T: 1e12 };

/** The bandwidths accepted, in bytes per second: limits.ts's range (1 MB/s to 100 TB/s). */
const MIN_BYTES_PER_S = MIN_BANDWIDTH_GBPS * 1e9;
const MAX_BYTES_PER_S = MAX_BANDWIDTH_GBPS * 1e9;

const SHAPE = /^\s*([0-9]+(?:\.[0-9]*)?(?:[eE][+-]?[0-9]+)?|\.[0-9]+(?:[eE][+-]?[0-9]+)?)\s*([A-Za-z]*)(?:\/s)?\s*$/;
const BYTES_UNIT = /^(|k|M|G|T|Ki|Mi|Gi|Ti)B$/;
const BITS_UNIT = /^(|k|M|G|T)bit$/;
const EXAMPLE = 'write it with a unit, e.g. "50 GB/s" (bytes) or "400 Gbit/s" (bits)';

/**
 * Reads a bandwidth with its unit and returns bytes per second: `50 GB/s` is 5 x 10^10,
 * `400 Gbit/s` is 5 x 10^10, `1 GiB/s` is 2^30. Units: B/s, kB/s, MB/s, GB/s, TB/s, KiB/s ...
 * TiB/s, bit/s, kbit/s, Mbit/s, Gbit/s, Tbit/s; the value must lie in [1 MB/s, 100 TB/s] (limits.ts).
 */
export function parseBandwidth(text: string): { readonly ok: true; readonly bytesPerSecond: number } | { readonly ok: false; readonly reason: string } {
  const m = SHAPE.exec(text);
  const fail = (reason: string) => ({ ok: false as const, reason });
  if (m === null || !text.includes("/s")) {
    if (/^\s*[0-9.]+(?:[eE][+-]?[0-9]+)?\s*(?:[kMGT]?(?:bps|Bps))\s*$/.test(text)) {
      return fail(`${JSON.stringify(text)} is ambiguous (bits or bytes?): ${EXAMPLE}`);
    }
    return fail(`${JSON.stringify(text)} is not a bandwidth: ${EXAMPLE}`);
  }
  const value = Number(m[1]);
  const unit = m[2] ?? "";
  let perSecond: number | undefined;
  const bytesUnit = BYTES_UNIT.exec(unit);
  const bitsUnit = BITS_UNIT.exec(unit);
  if (bytesUnit !== null) perSecond = value * BYTE_PREFIX[bytesUnit[1] ?? ""]!;
  else if (bitsUnit !== null) perSecond = (value * BIT_PREFIX[bitsUnit[1] ?? ""]!) / 8;
  else if (/^[kMGT]?b$/.test(unit))
    return fail(`${JSON.stringify(text)} is ambiguous next to ${unit.toUpperCase()}/s: spell bits as ${unit.slice(0, -1)}bit/s`);
  else return fail(`${JSON.stringify(text)} has an unknown unit ${JSON.stringify(`${unit}/s`)}: ${EXAMPLE}`);
  if (!Number.isFinite(perSecond)) return fail(`${JSON.stringify(text)} is not a finite bandwidth`);
  if (perSecond < MIN_BYTES_PER_S || perSecond > MAX_BYTES_PER_S) {
    return fail(`${JSON.stringify(text)} is outside the bandwidths kvsim accepts (1 MB/s to 100 TB/s)`);
  }
  return { ok: true, bytesPerSecond: perSecond };
}

/** A bandwidth with its unit (a string such as "50 GB/s"), parsed to bytes per second. */
export const bandwidthSchema = () =>
  z
    .string({ error: `expected a bandwidth with its unit, e.g. "50 GB/s" or "400 Gbit/s"` })
    .transform((text, ctx) => {
      const r = parseBandwidth(text);
      if (r.ok) return r.bytesPerSecond;
      ctx.addIssue({ code: "custom", message: r.reason });
      return z.NEVER;
    })
    .meta({ description: 'A bandwidth with its unit: "50 GB/s" (decimal bytes), "400 Gbit/s" (bits), "25 GiB/s" (binary bytes).' });
