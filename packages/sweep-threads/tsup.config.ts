import { defineConfig } from "tsup";

export default defineConfig({
  // The main thread's side, and the worker threads' side (an entry module imports it; see README).
  entry: ["src/index.ts", "src/worker.ts"],
  format: ["esm"],
  dts: true,
  sourcemap: true,
  clean: true,
  target: "node22",
});
