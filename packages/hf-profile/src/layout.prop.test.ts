import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { layoutCache, type LayerCache } from "./layout.js";

const layerArb: fc.Arbitrary<LayerCache> = fc.oneof(
  fc.constant<LayerCache>({ kind: "attention", bytesPerToken: 4096 }),
  fc.constantFrom(128, 1024).map<LayerCache>((window) => ({ kind: "attention", bytesPerToken: 4096, window })),
  fc.integer({ min: 1000, max: 5_000_000 }).map<LayerCache>((stateBytes) => ({ kind: "state", stateBytes, mixer: "mamba2" })),
);

describe("layoutCache invariants", () => {
  it("puts every layer in exactly one group, fits every block in its page, and sizes pages to hold every state", () => {
    const first: LayerCache = { kind: "attention", bytesPerToken: 4096 };
    const model = fc
      .tuple(fc.array(layerArb, { maxLength: 40 }), fc.constantFrom(undefined, 16, 32, 64))
      .map(([rest, blockSize]) => [[first, ...rest], blockSize] as const);
    fc.assert(
      fc.property(model, ([layers, blockSize]) => {
        const l = layoutCache(layers, { mla: false, blockSize, vllmVersion: "0.32.0" });
        if (l.kind === "linear") {
          expect(layers.every((x) => x.kind === "attention" && x.window === undefined)).toBe(true);
          return;
        }
        const count = (kind: string) => l.groups.filter((g) => g.kind === kind).reduce((s, g) => s + g.num_layers, 0);
        expect(count("state")).toBe(layers.filter((x) => x.kind === "state").length);
        expect(count("full_attention") + count("sliding_window")).toBe(layers.filter((x) => x.kind === "attention").length);
        const groupSize = Math.max(...l.groups.map((g) => g.num_layers));
        for (const g of l.groups) {
          expect(g.transfer_bytes_per_block).toBeLessThanOrEqual(l.pageSizeBytes);
          expect(g.block_size_tokens % 16).toBe(0);
          if (blockSize !== undefined) expect(g.block_size_tokens).toBeGreaterThanOrEqual(blockSize);
        }
        // One page holds one block of each of groupSize layers; the largest state fits a layer's share.
        const largest = Math.max(0, ...layers.map((x) => (x.kind === "state" ? x.stateBytes : 0)));
        expect(l.pageSizeBytes / groupSize).toBeGreaterThanOrEqual(largest);
      }),
      { seed: 1616, numRuns: 300 },
    );
  });
});
