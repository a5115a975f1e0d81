import { z } from "zod";
import { ProfileSchema } from "./profile.js";
import { RouterPolicySchema, RouterSchema, RouterSettingsSchema, SpecSchema } from "./spec.js";

/** A JSON Schema document (draft 2020-12) as a plain JSON value. */
export type JsonSchema = Record<string, unknown>;

/** The `$id`s of the generated schemas; a file's `$schema` key may name its schema file instead. */
export const PROFILE_SCHEMA_ID = "urn:kvsim:schema:profile:v1";
export const SPEC_SCHEMA_ID = "urn:kvsim:schema:spec:v1";

/**
 * zod's export of the input shape (fields with defaults are optional), headed by `$id`, title and
 * description. Cross-field rules (one of kv_bytes_per_token and kv_cache_groups, window_tokens by
 * kind, unique names, complete grids) are not expressible here; `kvsim validate` checks them.
 */
function exportSchema(schema: z.ZodType, id: string, title: string, description: string): JsonSchema {
  const { $schema, ...body } = z.toJSONSchema(schema, { io: "input", target: "draft-2020-12", override: describeRouter }) as JsonSchema;
  return { $schema, $id: id, title, description, ...body };
}

/**
 * `router` parses a policy name through a mapping (so errors name their field), which zod exports
 * as "any string or object"; editors get the two forms a user writes instead.
 */
function describeRouter(ctx: { zodSchema: unknown; jsonSchema: Record<string, unknown> }): void {
  if (ctx.zodSchema !== RouterSchema) return;
  const forms = z.toJSONSchema(z.union([RouterPolicySchema, RouterSettingsSchema]), { io: "input", target: "draft-2020-12" }) as JsonSchema;
  Reflect.deleteProperty(forms, "$schema");
  for (const key of Object.keys(ctx.jsonSchema)) Reflect.deleteProperty(ctx.jsonSchema, key);
  Object.assign(ctx.jsonSchema, forms);
}

/** The JSON Schema of a kvsim profile file (v1), for editors and other languages. */
export function profileJsonSchema(): JsonSchema {
  return exportSchema(
    ProfileSchema,
    PROFILE_SCHEMA_ID,
    "kvsim profile v1",
    "One model deployment on one tensor-parallel rank: a linear (kv_bytes_per_token) or grouped (kv_cache_groups + page_size_bytes) KV layout and optional forward-pass timing tables. Generated from @kvsim/profile-schema; `kvsim validate` also checks the cross-field rules.",
  );
}

/** The JSON Schema of a kvsim replay spec (v1), for editors and other languages. */
export function specJsonSchema(): JsonSchema {
  return exportSchema(
    SpecSchema,
    SPEC_SCHEMA_ID,
    "kvsim replay spec v1",
    "A replay: profile, topology, engine settings, KV transfer, timing, workload, router and SLA. Generated from @kvsim/profile-schema; `kvsim validate` also checks the cross-field rules and the files it references.",
  );
}
