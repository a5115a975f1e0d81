import { z } from "zod";
import { bandwidthSchema } from "./bandwidth.js";
import { MAX_SAFE_BYTES } from "./units.js";
import { durationMs, nonBlank, positiveInt } from "./primitives.js";
import { MAX_REQUEST_TOKENS } from "./limits.js";

/**
 * KV cache offloading (vLLM's offloading connector, LMCache, Dynamo's KV block manager): tiers of
 * host memory or disk below each worker's GPU pool. A prefix lookup continues past the GPU hit into
 * the tiers; hit blocks are loaded before the request's prefill continues. See the kv-offload
 * package README for the model.
 */

const BYTE_PREFIX: Readonly<Record<string, number>> = { "": 1, k: 1e3, M: 1e6, G: 1e9, T: 1e12, Ki: 2 ** 10, Mi: 2 ** 20, Gi: 2 ** 30, Ti: 2 ** 40 };
const SIZE_SHAPE = /^\s*([0-9]+(?:\.[0-9]*)?(?:[eE][+-]?[0-9]+)?|\.[0-9]+(?:[eE][+-]?[0-9]+)?)\s*([A-Za-z]*)\s*$/;
const SIZE_UNIT = /^(|k|M|G|T|Ki|Mi|Gi|Ti)B$/;
const SIZE_EXAMPLE = 'write it with a unit, e.g. "200 GiB" (binary) or "500 GB" (decimal)';

/**
 * Reads a memory or disk size with its unit and returns whole bytes: `200 GiB` is 200 x 2^30,
 * `1.5 TB` is 1.5 x 10^12. Units: B, kB, MB, GB, TB (decimal), KiB, MiB, GiB, TiB (binary); a
 * bare number is refused (bytes or GiB?). At least 1 byte, at most 2^53 bytes (8 PiB).
 */
export function parseByteSize(text: string): { readonly ok: true; readonly bytes: number } | { readonly ok: false; readonly reason: string } {
  const m = SIZE_SHAPE.exec(text);
  const fail = (reason: string) => ({ ok: false as const, reason });
  if (m === null) return fail(`${JSON.stringify(text)} is not a size: ${SIZE_EXAMPLE}`);
  const unit = SIZE_UNIT.exec(m[2] ?? "");
  if (unit === null) {
    return m[2] === ""
      ? fail(`${JSON.stringify(text)} has no unit: ${SIZE_EXAMPLE}`)
      : fail(`${JSON.stringify(text)} has an unknown unit ${JSON.stringify(m[2])}: ${SIZE_EXAMPLE}`);
  }
  const value = Math.floor(Number(m[1]) * BYTE_PREFIX[unit[1] ?? ""]!);
  if (!Number.isFinite(value) || value < 1) return fail(`${JSON.stringify(text)} is less than one byte`);
  if (value > MAX_SAFE_BYTES) return fail(`${JSON.stringify(text)} is more than 2^53 bytes (8 PiB)`);
  return { ok: true, bytes: value };
}

/** A size with its unit (a string such as "200 GiB"), parsed to whole bytes. */
const byteSizeSchema = () =>
  z
    .string({ error: `expected a size with its unit, e.g. "200 GiB" or "500 GB"` })
    .transform((text, ctx) => {
      const r = parseByteSize(text);
      if (r.ok) return r.bytes;
      ctx.addIssue({ code: "custom", message: r.reason });
      return z.NEVER;
    })
    .meta({ description: 'A size with its unit: "200 GiB" (binary), "500 GB" (decimal).' });

/** The most tiers below a GPU pool. */
export const MAX_OFFLOAD_TIERS = 8;

const TierSchema = z.strictObject({
  name: nonBlank().describe("The tier's name in the report (e.g. cpu, disk)."),
  capacity: byteSizeSchema().describe(
    'What the tier holds per worker, summed over its TP ranks as vLLM\'s --kv-offloading-size counts it (each TP rank keeps its own shard): "200 GiB". Per node when shared: node.',
  ),
  read_bandwidth: bandwidthSchema().describe('Loads into the GPU pool, per GPU (each TP rank moves its shard over its own link): "25 GB/s".'),
  write_bandwidth: bandwidthSchema().describe('Stores from the GPU pool (or the tier above), per GPU: "25 GB/s".'),
  latency_ms: durationMs().default(0).describe("Paid once by every load before its first byte, ms (0 to 10^6)."),
  store: z
    .enum(["write_through", "on_evict"], { error: "must be write_through or on_evict" })
    .default("write_through")
    .describe(
      "write_through: keeps every block once the GPU computes it (vLLM's offloading connector, LMCache); on_evict: keeps what the tier above (the GPU pool for the first tier) evicts.",
    ),
  shared: z
    .enum(["worker", "node"], { error: "must be worker or node" })
    .default("worker")
    .describe("worker: each worker has its own; node: the workers of a node share one (kv_offload.workers_per_node), as a shared host cache does."),
});
export type OffloadTier = z.infer<typeof TierSchema>;

export const KvOffloadSchema = z
  .strictObject({
    tiers: z
      .array(TierSchema)
      .min(1, { error: "must list at least one tier", abort: true })
      .max(MAX_OFFLOAD_TIERS, { error: `must list at most ${MAX_OFFLOAD_TIERS} tiers`, abort: true })
      .describe("The tiers in order below the GPU pool (the first is the fastest)."),
    block_size: positiveInt()
      .max(MAX_REQUEST_TOKENS, { error: `must be at most ${MAX_REQUEST_TOKENS} (2^24) tokens`, abort: true })
      .optional()
      .describe(
        "Tokens per offloaded block (vLLM's offloading connector's block_size, LMCache's chunk_size, often 256): a multiple of the GPU block; the tiers store, look up and evict whole offloaded blocks. Absent: one GPU block, as vLLM's connector. A first tier with store: on_evict needs one GPU block.",
      ),
    workers_per_node: positiveInt()
      .max(1024, { error: "must be at most 1024", abort: true })
      .optional()
      .describe("Workers of a pool per node (consecutive workers share a node): needed by a tier with shared: node."),
  })
  .superRefine((o, ctx) => {
    const seen = new Set<string>();
    o.tiers.forEach((t, i) => {
      if (seen.has(t.name)) ctx.addIssue({ code: "custom", path: ["tiers", i, "name"], message: `repeats the tier name "${t.name}"` });
      seen.add(t.name);
      if (t.shared === "node" && o.workers_per_node === undefined) {
        ctx.addIssue({ code: "custom", path: ["tiers", i, "shared"], message: "node needs kv_offload.workers_per_node (how many workers share a node)" });
      }
    });
  });
export type KvOffload = z.infer<typeof KvOffloadSchema>;
