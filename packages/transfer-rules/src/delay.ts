import { MAX_BANDWIDTH_GBPS, MIN_BANDWIDTH_GBPS, millis, type Bytes, type Millis } from "@kvsim/profile-schema";

/**
 * Why a bandwidth in decimal GB/s is refused, or undefined when it is usable: it must lie in
 * [MIN_BANDWIDTH_GBPS, MAX_BANDWIDTH_GBPS] (1 MB/s to 100 TB/s), so that a delay is never infinite
 * nor rounds to nothing. 0 is refused, not read as "off": no bandwidth is spelled `undefined`
 * (docs/rules/decisions.md §12).
 */
export function checkBandwidth(gbps: number): string | undefined {
  // Surviving mutants: TR-01 (MUTANTS.md).
  if (typeof gbps !== "number" || !Number.isFinite(gbps)) return `bandwidth must be a finite number of GB/s, got ${String(gbps)}`;
  if (gbps <= 0) return `bandwidth must be greater than 0 GB/s (leave it unset for no modelled delay), got ${gbps}`;
  if (gbps < MIN_BANDWIDTH_GBPS || gbps > MAX_BANDWIDTH_GBPS) {
    return `bandwidth must be at least ${MIN_BANDWIDTH_GBPS} and at most ${MAX_BANDWIDTH_GBPS} GB/s (1 MB/s to 100 TB/s), got ${gbps}`;
  }
  return undefined;
}

/** Throws a RangeError with the reason when `gbps` is not a usable bandwidth. */
export function assertBandwidth(gbps: number): void {
  const why = checkBandwidth(gbps);
  if (why !== undefined) throw new RangeError(why);
}

/**
 * Milliseconds to move `payload` bytes at `bandwidthGbps` decimal GB/s:
 * bytes / (GB/s x 10^9) x 1000, computed as bytes / (GB/s x 10^6) so that one rounding step keeps
 * exact decimals exact (89,107,968 B at 1 GB/s is 89.107968 ms, not 89.10796800000001).
 */
export function delayMsForBytes(payload: Bytes, bandwidthGbps: number): Millis {
  assertBandwidth(bandwidthGbps);
  if (!Number.isFinite(payload) || payload < 0) throw new RangeError(`payload must be a finite number of bytes >= 0, got ${payload}`);
  return millis(payload / (bandwidthGbps * 1e6));
}
