import { readFileSync } from "node:fs";
import { describe, expect, it } from "vitest";
import { profileJsonSchema, specJsonSchema } from "./json-schema.js";

type Node = Record<string, unknown> & { properties?: Record<string, Node>; items?: Node; required?: string[] };

describe("JSON Schema export", () => {
  it("heads the profile schema with the draft, $id and title", () => {
    const s = profileJsonSchema();
    expect(Object.keys(s).slice(0, 4)).toStrictEqual(["$schema", "$id", "title", "description"]);
    expect(s.$schema).toBe("https://json-schema.org/draft/2020-12/schema");
    expect(s.$id).toBe("urn:kvsim:schema:profile:v1");
    expect(s.title).toBe("kvsim profile v1");
  });
  it("requires exactly the profile fields without which no profile is valid, and refuses other keys", () => {
    const s = profileJsonSchema() as Node;
    expect(s.required).toStrictEqual(["schema_version", "model", "vllm_version", "tensor_parallel_size"]);
    expect(s.additionalProperties).toBe(false);
    expect(Object.keys(s.properties ?? {})).toContain("$schema");
  });
  it("says byte counts are integers in [1, 2^53]", () => {
    const group = (profileJsonSchema() as Node).properties?.kv_cache_groups?.items;
    const bytes = group?.properties?.transfer_bytes_per_block;
    expect([bytes?.type, bytes?.minimum, bytes?.maximum]).toStrictEqual(["integer", 1, 9_007_199_254_740_992]);
    expect(group?.required).toStrictEqual(["name", "kind", "num_layers", "block_size_tokens"]);
  });
  it("makes spec fields with defaults optional (the schema describes what a user writes)", () => {
    const s = specJsonSchema() as Node;
    expect(s.$id).toBe("urn:kvsim:schema:spec:v1");
    // engine, kv_transfer and router have defaults; prefill, decode, sla, max_virtual_time_ms are optional.
    expect(s.required).toStrictEqual(["version", "profile", "topology", "timing", "workload"]);
  });
  it("matches the committed files (regenerate with `pnpm schemas`)", () => {
    const committed = (name: string) => readFileSync(new URL(`../schemas/${name}`, import.meta.url), "utf8");
    expect(committed("profile.schema.json")).toBe(`${JSON.stringify(profileJsonSchema(), null, 2)}\n`);
    expect(committed("spec.schema.json")).toBe(`${JSON.stringify(specJsonSchema(), null, 2)}\n`);
  });
});
