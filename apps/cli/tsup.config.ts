import { defineConfig } from "tsup";

const WORKER = ["point-worker.js", "point-worker.js.map"];

export default defineConfig([
  {
    entry: { cli: "src/cli.ts" },
    format: ["esm"],
    dts: false,
    sourcemap: true,
    // The worker below is built beside the CLI at the same time: cleaning must leave it alone.
    clean: WORKER.map((f) => `!${f}`),
    target: "node22",
    // The workspace packages are bundled in, so the packed CLI installs alone (`npm pack`, then
    // `npm install -g ./kvsim-<version>.tgz`); their npm dependencies are the CLI's own
    // dependencies (package.json; a test checks the two lists agree). Most are bundled in too:
    // resolving and loading each package's many files was about half of the CLI's start-up.
    // External: the native addon, piscina (it starts its threads from its own files), BullMQ and
    // ioredis (loaded only for --queue), and uplot (its browser files are read from the package).
    noExternal: [/^(?!@node-rs\/|piscina|bullmq|ioredis|uplot)/],
    external: [/^@node-rs\//, /^piscina/, /^bullmq/, /^ioredis/, /^uplot/],
    esbuildOptions(options) {
      // Some bundled dependencies are CommonJS and require Node's builtins.
      options.banner = {
        js: '#!/usr/bin/env node\nimport { createRequire as __kvsimRequire } from "node:module";\nconst require = __kvsimRequire(import.meta.url);',
      };
    },
  },
  {
    // The entry of the sweep pool's worker threads, loaded beside cli.js. A thread loads one
    // file with only what a point needs: the workspace packages from their sources (so modules a
    // point does not use are left out: they have no side effects) and their npm dependencies
    // bundled in, which halves a thread's loading time against resolving and loading each
    // package's own files. @node-rs/xxhash is a native addon and stays external.
    entry: { "point-worker": "src/sweep/point-worker.ts" },
    format: ["esm"],
    dts: false,
    sourcemap: true,
    clean: false,
    target: "node22",
    noExternal: [/^(?!@node-rs\/)/],
    external: [/^@node-rs\//],
    esbuildOptions(options) {
      options.conditions = ["@kvsim/source"];
      options.mainFields = ["module", "main"];
      // Some bundled dependencies are CommonJS and require Node's builtins.
      options.banner = { js: 'import { createRequire as __kvsimRequire } from "node:module";\nconst require = __kvsimRequire(import.meta.url);' };
    },
  },
]);
