import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { profileJsonSchema, specJsonSchema } from "@kvsim/profile-schema";
import { afterAll, describe, expect, it } from "vitest";
import { runCli } from "../main.js";
import { captureIo } from "../test-io.js";

async function kvsim(...argv: string[]) {
  const io = captureIo();
  const code = await runCli(argv, io);
  return { code, stdout: io.stdout, stderr: io.stderr };
}

const made: string[] = [];
const fresh = () => {
  const dir = mkdtempSync(join(tmpdir(), "kvsim-schemas-"));
  made.push(dir);
  return dir;
};
afterAll(() => {
  for (const dir of made) rmSync(dir, { recursive: true, force: true });
});
const text = (schema: unknown) => `${JSON.stringify(schema, null, 2)}\n`;

describe("kvsim schemas", () => {
  it("writes both schemas, creating the folder, as 2-space JSON with a final newline", async () => {
    const out = join(fresh(), "nested", "schemas");
    expect(await kvsim("schemas", "--out", out)).toStrictEqual({
      code: 0,
      stdout: `wrote ${join(out, "profile.schema.json")}\nwrote ${join(out, "spec.schema.json")}\n`,
      stderr: "",
    });
    expect(readFileSync(join(out, "profile.schema.json"), "utf8")).toBe(text(profileJsonSchema()));
    expect(readFileSync(join(out, "spec.schema.json"), "utf8")).toBe(text(specJsonSchema()));
    // A second run finds nothing to change.
    expect((await kvsim("schemas", "--out", out)).stdout).toBe(`unchanged ${join(out, "profile.schema.json")}\nunchanged ${join(out, "spec.schema.json")}\n`);
  });
  it("--check passes on fresh files and exits 1 naming a stale or missing one, writing nothing", async () => {
    const out = fresh();
    await kvsim("schemas", "--out", out);
    expect(await kvsim("schemas", "--out", out, "--check")).toStrictEqual({
      code: 0,
      stdout: `ok: ${join(out, "profile.schema.json")} and ${join(out, "spec.schema.json")} are up to date\n`,
      stderr: "",
    });
    writeFileSync(join(out, "spec.schema.json"), "{}\n");
    expect(await kvsim("schemas", "--out", out, "--check")).toStrictEqual({
      code: 1,
      stdout: "",
      stderr: `error: ${join(out, "spec.schema.json")} is stale or missing; regenerate it with \`kvsim schemas --out ${out}\`\n`,
    });
    // The advice rewrites the folder checked, quoted for the shell when it needs to be.
    const spaced = join(fresh(), "my schemas");
    expect((await kvsim("schemas", "--out", spaced, "--check")).stderr).toContain(`regenerate it with \`kvsim schemas --out '${spaced}'\`\n`);
    expect(readFileSync(join(out, "spec.schema.json"), "utf8")).toBe("{}\n");
    const empty = fresh();
    expect((await kvsim("schemas", "--out", empty, "--check")).code).toBe(1);
    expect(existsSync(join(empty, "profile.schema.json"))).toBe(false);
  });
  it("refuses to overwrite a file that is not a kvsim schema without --force, changing nothing", async () => {
    const out = fresh();
    writeFileSync(join(out, "spec.schema.json"), '{ "mine": true }\n');
    expect(await kvsim("schemas", "--out", out)).toStrictEqual({
      code: 2,
      stdout: "",
      stderr: `error: ${join(out, "spec.schema.json")} exists and is not a kvsim schema; pass --force to overwrite it\n`,
    });
    expect(existsSync(join(out, "profile.schema.json"))).toBe(false);
    expect((await kvsim("schemas", "--out", out, "--force")).code).toBe(0);
    expect(readFileSync(join(out, "spec.schema.json"), "utf8")).toBe(text(specJsonSchema()));
  });
  it("needs --out", async () => {
    expect((await kvsim("schemas")).code).toBe(2);
  });
  it("the committed schema files are up to date", async () => {
    const committed = fileURLToPath(new URL("../../../../packages/profile-schema/schemas", import.meta.url));
    expect((await kvsim("schemas", "--out", committed, "--check")).code).toBe(0);
  });
});
