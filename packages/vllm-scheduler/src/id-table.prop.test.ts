/**
 * Property test: an IdTable driven by random sets and deletes over a few ids (many sharing a start
 * slot in the small table, and growth on the way) answers every lookup, its size and its values in
 * order as a Map does after each operation.
 */
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { IdTable } from "./id-table.js";

type Op = { readonly t: "set"; readonly id: number; readonly value: number } | { readonly t: "delete"; readonly id: number };

const ID_COUNT = 24;
const opArb: fc.Arbitrary<Op> = fc.oneof(
  fc.record({ t: fc.constant("set" as const), id: fc.nat({ max: ID_COUNT - 1 }), value: fc.integer() }),
  fc.record({ t: fc.constant("delete" as const), id: fc.nat({ max: ID_COUNT - 1 }) }),
);

describe("IdTable against a Map", () => {
  it("gives the same lookups, size and value order after every set and delete", () => {
    const ids = Array.from({ length: ID_COUNT }, (_, i) => `req-${i}`);
    let deletedFromRuns = 0;
    fc.assert(
      fc.property(fc.nat({ max: 8 }), fc.array(opArb, { minLength: 40, maxLength: 120, size: "max" }), (initial, ops) => {
        const table = new IdTable<number>(initial);
        const map = new Map<string, number>();
        for (const op of ops) {
          const id = ids[op.id]!;
          if (op.t === "set") {
            table.set(id, op.value);
            map.set(id, op.value);
          } else {
            if (map.size > 1 && map.has(id)) deletedFromRuns++;
            expect(table.delete(id)).toBe(map.delete(id));
          }
          expect(table.size).toBe(map.size);
          for (const other of ids) expect(table.get(other)).toBe(map.get(other));
          expect(table.values()).toEqual([...map.values()]);
        }
      }),
      { seed: 12, numRuns: 100 },
    );
    // Deletes among other entries happened (the case that moves entries back).
    expect(deletedFromRuns).toBeGreaterThan(1000);
  });
});
