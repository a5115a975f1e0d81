import { existsSync, mkdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { profileJsonSchema, specJsonSchema, type JsonSchema } from "@kvsim/profile-schema";
import { EXIT_OK, EXIT_RUN_FAILED, UsageError, writeTextAtomic } from "../io.js";
import type { RegisterCommand } from "./index.js";

/** The generated files: name and schema. The text is stable (2-space JSON, final newline). */
export function schemaFiles(): { name: string; schema: JsonSchema; text: string }[] {
  return [
    { name: "profile.schema.json", schema: profileJsonSchema() },
    { name: "spec.schema.json", schema: specJsonSchema() },
  ].map((f) => ({ ...f, text: `${JSON.stringify(f.schema, null, 2)}\n` }));
}

function readIfExists(file: string): string | undefined {
  try {
    return readFileSync(file, "utf8");
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code === "ENOENT") return undefined;
    throw new UsageError(`cannot read ${file}: ${String(e)}`);
  }
}

/** True when `text` is a schema this command wrote (same `$id`), so regenerating may replace it. */
function isOurSchema(text: string, id: unknown): boolean {
  try {
    return (JSON.parse(text) as { $id?: unknown }).$id === id;
  } catch {
    return false;
  }
}

export const registerSchemas: RegisterCommand = (program, ctx) => {
  program
    .command("schemas")
    .description("Write the JSON Schemas of profiles and specs (profile.schema.json, spec.schema.json) for editors and other languages.")
    .requiredOption("--out <dir>", "the folder to write them to (created if missing)")
    .option("--check", "write nothing: compare with the files in --out and exit 1 naming any stale or missing one")
    .option("--force", "overwrite a file of the same name that is not a kvsim schema")
    .action(
      ctx.run((opts: { out: string; check?: boolean; force?: boolean }) => {
        const files = schemaFiles();
        if (opts.check === true) {
          const stale = files.map((f) => ({ path: join(opts.out, f.name), want: f.text })).filter((f) => readIfExists(f.path) !== f.want);
          if (stale.length > 0) {
            // The command that rewrites this very folder (`pnpm schemas` writes the repository's own).
            const out = /^[\w./-]+$/.test(opts.out) ? opts.out : `'${opts.out.replaceAll("'", "'\\''")}'`;
            ctx.io.err(stale.map((f) => `error: ${f.path} is stale or missing; regenerate it with \`kvsim schemas --out ${out}\`\n`).join(""));
            return EXIT_RUN_FAILED;
          }
          ctx.io.out(`ok: ${files.map((f) => join(opts.out, f.name)).join(" and ")} are up to date\n`);
          return EXIT_OK;
        }
        // Refuse before writing anything, so a refused run changes nothing.
        const plan = files.map((f) => {
          const path = join(opts.out, f.name);
          const old = readIfExists(path);
          if (old !== undefined && opts.force !== true && !isOurSchema(old, f.schema.$id)) {
            throw new UsageError(`${path} exists and is not a kvsim schema; pass --force to overwrite it`);
          }
          return { path, text: f.text, changed: old !== f.text };
        });
        if (!existsSync(opts.out)) {
          try {
            mkdirSync(opts.out, { recursive: true });
          } catch (e) {
            throw new UsageError(`cannot create ${opts.out}: ${String(e)}`);
          }
        }
        for (const f of plan) {
          if (f.changed) writeTextAtomic(f.path, f.text, true);
          ctx.io.out(`${f.changed ? "wrote" : "unchanged"} ${f.path}\n`);
        }
        return EXIT_OK;
      }),
    );
};
