import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { formatPath, InputError } from "./errors.js";
import { parseProfile } from "./parse.js";
import type { CacheGroup, ForwardPass, Profile } from "./profile.js";

// ---- arbitraries of valid profiles -------------------------------------------------------------

const nonBlank = fc.string({ minLength: 1, maxLength: 12 }).filter((s) => s.trim() !== "");
const count = fc.integer({ min: 1, max: 1_000_000 });
/** Byte counts over the whole allowed range [1, 2^53]. */
const byteCount = fc.bigInt(1n, 2n ** 53n).map(Number);
const version = fc.tuple(fc.nat(99), fc.nat(99), fc.nat(99)).map((v) => v.join("."));
const latency = fc.double({ min: 0, max: 1e6, noNaN: true, noDefaultInfinity: true }).map((x) => (Object.is(x, -0) ? 0 : x));

const groupFields = {
  name: nonBlank,
  num_layers: count,
  block_size_tokens: count,
  prefix_cacheable: fc.boolean(),
  transfer_bytes_per_block: byteCount,
  prefill_checkpoint_blocks: fc.nat(8),
};
const required = ["name", "kind", "num_layers", "block_size_tokens"] as const;
const windowGroup = fc.record(
  { ...groupFields, kind: fc.constantFrom("sliding_window" as const, "convolution" as const), window_tokens: count },
  { requiredKeys: [...required, "window_tokens"], noNullPrototype: true },
);
const otherGroup = fc.record(
  { ...groupFields, kind: fc.constantFrom("full_attention" as const, "state" as const) },
  { requiredKeys: [...required], noNullPrototype: true },
);
const groups: fc.Arbitrary<CacheGroup[]> = fc.uniqueArray(fc.oneof(windowGroup, otherGroup), { selector: (g) => g.name, minLength: 1, maxLength: 6 });

/** The cartesian product of the axes, one latency per point: always a complete grid. */
function grid<T>(axes: readonly (readonly number[])[], make: (point: number[], latency: number) => T): fc.Arbitrary<T[]> {
  const points = axes.reduce<number[][]>((acc, axis) => acc.flatMap((p) => axis.map((v) => [...p, v])), [[]]);
  return fc.array(latency, { minLength: points.length, maxLength: points.length }).map((ls) => points.map((p, i) => make(p, ls[i]!)));
}
const axis = (min: number, max: number) => fc.uniqueArray(fc.integer({ min, max }), { minLength: 1, maxLength: 3 });
const forwardPass: fc.Arbitrary<ForwardPass> = fc
  .record(
    { provenance: nonBlank, p: fc.tuple(axis(1, 256), axis(0, 100_000), axis(0, 100_000)), d: fc.tuple(axis(1, 256), axis(0, 1_000_000)) },
    { noNullPrototype: true },
  )
  .chain(({ provenance, p, d }) =>
    fc.record(
      {
        provenance: fc.constant(provenance),
        prefill: grid(p, ([b, n, c], l) => ({ batch_size: b!, new_tokens: n!, cached_tokens: c!, latency_ms: l })),
        decode: grid(d, ([b, k], l) => ({ batch_size: b!, kv_tokens: k!, latency_ms: l })),
      },
      { noNullPrototype: true },
    ),
  );

const common = {
  $schema: fc.constant("./profile.schema.json"),
  schema_version: fc.constant(1 as const),
  model: nonBlank,
  description: fc.string({ maxLength: 20 }),
  vllm_version: version,
  tensor_parallel_size: fc.integer({ min: 1, max: 64 }),
  kv_cache_dtype: nonBlank,
  forward_pass: forwardPass,
};
const commonRequired = ["schema_version", "model", "vllm_version", "tensor_parallel_size"] as const;

const groupedProfile: fc.Arbitrary<Profile> = fc
  .record(
    { ...common, kv_cache_groups: groups, page_size_bytes: byteCount },
    { requiredKeys: [...commonRequired, "kv_cache_groups", "page_size_bytes"], noNullPrototype: true },
  )
  // A block's payload fits in its page: the page is at least the largest transfer.
  .map((p) => ({ ...p, page_size_bytes: Math.max(p.page_size_bytes, ...p.kv_cache_groups.map((g) => g.transfer_bytes_per_block ?? 0)) }));
const linearProfile: fc.Arbitrary<Profile> = fc.record(
  { ...common, kv_bytes_per_token: byteCount },
  { requiredKeys: [...commonRequired, "kv_bytes_per_token"], noNullPrototype: true },
);
const anyProfile = fc.oneof(groupedProfile, linearProfile);

// ---- mutations to invalid values ---------------------------------------------------------------

interface Mutation {
  /** Where the refusal must point. */
  readonly path: readonly (string | number)[];
  /** Sets the invalid value on a deep copy of the profile. */
  readonly apply: (p: Record<string, unknown>) => void;
}

const at = (root: Record<string, unknown>, path: readonly (string | number)[]): Record<string, unknown> =>
  path.reduce<Record<string, unknown>>((o, k) => o[k] as Record<string, unknown>, root);

/** Sets `path` to `value` (or deletes it when `value` is undefined); refused at `reported`. */
const set = (path: readonly (string | number)[], value: unknown, reported = path): Mutation => ({
  path: reported,
  apply: (p) => {
    const parent = at(p, path.slice(0, -1));
    const key = path[path.length - 1]!;
    if (value === undefined) Reflect.deleteProperty(parent, key);
    else parent[key] = value;
  },
});

/** Every single-field mutation of `p` to an invalid value, each with the path it must be refused at. */
function mutations(p: Profile): Mutation[] {
  const out: Mutation[] = [
    set(["schema_version"], 2),
    set(["model"], " "),
    set(["vllm_version"], "latest"),
    set(["tensor_parallel_size"], 0),
    set(["tensor_parallel_size"], 1.5),
    set(["description"], 5),
    set(["$schema"], false),
    set(["kv_cache_dtype"], ""),
    set(["extra_field"], 1),
  ];
  if (p.kv_bytes_per_token !== undefined) out.push(set(["kv_bytes_per_token"], 0), set(["kv_bytes_per_token"], 2 ** 54), set(["kv_bytes_per_token"], 0.5));
  if (p.page_size_bytes !== undefined) out.push(set(["page_size_bytes"], -1), set(["page_size_bytes"], undefined), set(["page_size_bytes"], "4096"));
  p.kv_cache_groups?.forEach((g, i) => {
    const gp = (field: string) => ["kv_cache_groups", i, field];
    out.push(
      set(gp("name"), ""),
      set(gp("kind"), "mamba"),
      set(gp("num_layers"), 0),
      set(gp("block_size_tokens"), -16),
      set(gp("block_size_tokens"), 16.5),
      set(gp("prefix_cacheable"), "yes"),
      set(gp("transfer_bytes_per_block"), 0),
      set(gp("prefill_checkpoint_blocks"), -1),
      set(gp("unknown"), true),
    );
    if (i > 0) out.push(set(gp("name"), p.kv_cache_groups?.[0]?.name));
    if (g.kind === "sliding_window" || g.kind === "convolution") out.push(set(gp("window_tokens"), undefined), set(gp("window_tokens"), 0));
    else out.push(set(gp("window_tokens"), 64));
    // A payload one byte over its page (2^53 + 1 would round back to 2^53, so only below it).
    if (p.page_size_bytes !== undefined && p.page_size_bytes < Number.MAX_SAFE_INTEGER) out.push(set(gp("transfer_bytes_per_block"), p.page_size_bytes + 1));
  });
  if (p.forward_pass !== undefined) {
    out.push(set(["forward_pass", "provenance"], ""));
    const first = p.forward_pass.prefill[0];
    if (first !== undefined) {
      out.push(set(["forward_pass", "prefill", 0, "latency_ms"], -1), set(["forward_pass", "prefill", 0, "batch_size"], 0));
      // A second point at the same place breaks the grid.
      out.push(set(["forward_pass", "prefill", p.forward_pass.prefill.length], { ...first }, ["forward_pass", "prefill"]));
    }
    if (p.forward_pass.decode[0] !== undefined) out.push(set(["forward_pass", "decode", 0, "kv_tokens"], -1));
  }
  return out;
}

describe("profile properties", () => {
  it("every valid generated profile survives a JSON round trip unchanged", () => {
    fc.assert(
      fc.property(anyProfile, (p) => {
        expect(parseProfile(JSON.stringify(p), "p.json")).toStrictEqual(p);
      }),
    );
  });
  it("every mutation of one field to an invalid value is refused with that field's path, and only it", () => {
    fc.assert(
      fc.property(anyProfile, fc.nat(), (p, pick) => {
        const all = mutations(p);
        const m = all[pick % all.length]!;
        const copy = structuredClone(p) as unknown as Record<string, unknown>;
        m.apply(copy);
        let error: unknown;
        try {
          parseProfile(JSON.stringify(copy), "p.json");
        } catch (e) {
          error = e;
        }
        expect(error).toBeInstanceOf(InputError);
        expect([...new Set((error as InputError).issues.map((i) => i.path))]).toStrictEqual([formatPath(m.path)]);
      }),
      { numRuns: 500 },
    );
  });
});
