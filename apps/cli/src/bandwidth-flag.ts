import { parseBandwidth } from "@kvsim/profile-schema";
import { checkBandwidth } from "@kvsim/transfer-rules";
import { numberOption, UsageError, type CliIo } from "./io.js";

/** The bandwidth flags of `transfer` and `dynamo handoff-timing`. */
export interface BandwidthFlags {
  /** With its unit: `50 GB/s`, `400 Gbit/s`. */
  readonly bandwidth?: string;
  /** Deprecated: decimal GB/s without a unit. */
  readonly bandwidthGbps?: string;
}

export const BANDWIDTH_FLAG_HELP = 'transfer bandwidth with its unit, e.g. "50 GB/s" (bytes) or "400 Gbit/s" (bits); without it no delay is modelled';
export const BANDWIDTH_GBPS_FLAG_HELP = "deprecated: the bandwidth in decimal GB/s (gigabytes, not gigabits); use --bandwidth";

/**
 * The bandwidth the flags give, in decimal GB/s (what transfer-rules takes), or undefined for
 * none. `--bandwidth` takes a unit; `--bandwidth-gbps` still works and warns on stderr, since
 * "Gbps" reads as gigabits and it means gigabytes (8x apart). Both at once are bad usage.
 */
export function bandwidthFromFlags(io: CliIo, flags: BandwidthFlags): number | undefined {
  if (flags.bandwidth !== undefined && flags.bandwidthGbps !== undefined)
    throw new UsageError("--bandwidth and --bandwidth-gbps give the same thing; keep --bandwidth (with its unit)");
  if (flags.bandwidth !== undefined) {
    const r = parseBandwidth(flags.bandwidth);
    if (!r.ok) throw new UsageError(`--bandwidth: ${r.reason}`);
    return r.bytesPerSecond / 1e9;
  }
  if (flags.bandwidthGbps === undefined) return undefined;
  const gbps = numberOption("--bandwidth-gbps", flags.bandwidthGbps);
  const bad = checkBandwidth(gbps);
  if (bad !== undefined) throw new UsageError(`--bandwidth-gbps: ${bad}`);
  io.err(
    `warning: --bandwidth-gbps is deprecated: it means gigabytes per second, but "Gbps" reads as gigabits (8x less); write --bandwidth "${flags.bandwidthGbps} GB/s"\n`,
  );
  return gbps;
}
