import { defineConfig } from "tsup";

export default defineConfig({
  // point-worker: the entry of the sweep pool's worker threads, loaded beside cli.js.
  entry: { cli: "src/cli.ts", "point-worker": "src/sweep/point-worker.ts" },
  format: ["esm"],
  dts: false,
  sourcemap: true,
  clean: true,
  target: "node20",
  banner: { js: "#!/usr/bin/env node" },
  // The workspace packages are bundled in, so the packed CLI installs alone (`npm pack`, then
  // `npm install -g ./kvsim-<version>.tgz`); their npm dependencies stay external and are the
  // CLI's own dependencies (package.json; a test checks the two lists agree).
  noExternal: [/^@kvsim\//],
});
