import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { RecordStore } from "./record-store.js";

describe("RecordStore", () => {
  it("gives back each record with the same keys in the same order and the same values, sorted by key", () => {
    const store = new RecordStore<object>();
    const a = { id: "a", t: 1.5, none: null, nested: { x: -0, y: Number.NaN, z: "q" }, flag: true };
    const b = { id: "b", t: 2, nested: { x: 1, y: 2, z: "r" } };
    const c = { id: "c", t: 3, none: null, nested: { x: 7, y: Infinity, z: "s" }, flag: false, u: undefined };
    // Keys 2, 0, 1: the array comes back as b, c, a... sorted by key: 0 -> c, 1 -> a, 2 -> b.
    store.add(2, b);
    store.add(0, c);
    store.add(1, a);
    const out = store.toArray();
    expect(out).toEqual([c, a, b]);
    expect(out.map((o) => JSON.stringify(o))).toEqual([c, a, b].map((o) => JSON.stringify(o)));
    expect(out.map((o) => Object.keys(o))).toEqual([c, a, b].map((o) => Object.keys(o)));
    // -0 and NaN survive the Float64Array (toEqual treats -0 and 0 as different).
    expect(Object.is((out[1] as typeof a).nested.x, -0)).toBe(true);
    expect(Number.isNaN((out[1] as typeof a).nested.y)).toBe(true);
    // The key `u` is there with the value undefined.
    expect("u" in out[0]!).toBe(true);
  });

  it("32-bit integers and other numbers both come back exactly (the edges of Int32, -0)", () => {
    const store = new RecordStore<Record<string, number>>();
    // 2^31 - 1 and -2^31 fit an Int32Array; 2^31, 0.5 and -0 do not (kept as doubles).
    const r = { max: 2 ** 31 - 1, min: -(2 ** 31), over: 2 ** 31, half: 0.5, negZero: -0, zero: 0 };
    store.add(0, r);
    // The second record reuses the first one's shape: a double where the shape has a double.
    const s = { max: 1, min: 2, over: 3, half: 4, negZero: 5, zero: 6 };
    store.add(1, s);
    // Here `max` is not an integer: a shape of its own.
    const t = { max: 1.25, min: 2, over: 3, half: 4, negZero: -0, zero: 6 };
    store.add(2, t);
    const [a, b, c] = store.toArray();
    expect(a).toEqual(r);
    expect(b).toEqual(s);
    expect(c).toEqual(t);
    expect(Object.is(a!.negZero, -0)).toBe(true);
    expect(Object.is(c!.negZero, -0)).toBe(true);
  });

  it("enum strings live in the shape, numbered strings as prefix and number; both come back equal", () => {
    const store = new RecordStore<{ request_id: string; status: string }>({ enumKeys: ["status"], numberedKeys: ["request_id"] });
    // Numbered: "trace-0", "trace-17", "42" (prefix ""), "x-1e5" (prefix "x-1e", number 5).
    // Plain strings: "trace-007" (leading zero), "t-1234567890" (10 digits), "abc" (no digits), "" (empty).
    const ids = ["trace-0", "trace-17", "42", "x-1e5", "trace-007", "t-1234567890", "abc", ""];
    const records = ids.map((request_id, i) => ({ request_id, status: i % 2 === 0 ? "completed" : "failed" }));
    records.forEach((r, i) => {
      store.add(i, r);
    });
    const out = store.toArray();
    expect(out).toEqual(records);
    expect(out.map((r) => JSON.stringify(r))).toEqual(records.map((r) => JSON.stringify(r)));
  });

  it("ties keep the order of insertion", () => {
    const store = new RecordStore<{ n: number }>();
    for (const n of [1, 2, 3]) store.add(5, { n });
    store.add(4, { n: 0 });
    // Key 4 first (n = 0), then the three of key 5 as added: 1, 2, 3.
    expect(store.toArray().map((r) => r.n)).toEqual([0, 1, 2, 3]);
  });

  it("keeps a record with an array or a class instance as it is", () => {
    const store = new RecordStore<object>();
    const withArray = { id: "x", list: [1, 2] };
    const withDate = { id: "y", at: new Date(0) };
    store.add(0, withArray);
    store.add(1, withDate);
    store.add(2, { id: "z" });
    const out = store.toArray();
    expect(out[0]).toBe(withArray);
    expect(out[1]).toBe(withDate);
    expect(out[2]).toEqual({ id: "z" });
    expect(store.length).toBe(3);
  });

  it("keys that look like array indices come first, as in the original", () => {
    const store = new RecordStore<object>();
    const r = { b: 1, 2: "two", a: 3, 1: "one" };
    store.add(0, r);
    const [out] = store.toArray();
    // Object.keys order: "1", "2" (ascending indices), then "b", "a" (insertion).
    expect(Object.keys(out!)).toEqual(["1", "2", "b", "a"]);
    expect(out).toEqual(r);
  });

  it("round-trips random records of mixed shapes (property, fixed seed)", () => {
    const leaf = fc.oneof(fc.double(), fc.integer(), fc.constant(null), fc.boolean(), fc.constant(undefined));
    const keys = fc.constantFrom("request_id", "status", "reason", "arrival_ms", "workers", "prefill", "decode", "0", "7");
    // Strings that look like request ids (numbered or not) and statuses, and arbitrary ones.
    const str = fc.oneof(
      fc.string({ maxLength: 4 }),
      fc.constantFrom("trace-1", "trace-01", "trace-999999999", "trace-1000000000", "7", "completed", "failed"),
    );
    const inner = fc.dictionary(keys, fc.oneof(leaf, str), { maxKeys: 4, noNullPrototype: true });
    const record = fc.dictionary(keys, fc.oneof(leaf, str, inner), { maxKeys: 6, noNullPrototype: true });
    fc.assert(
      fc.property(fc.array(fc.record({ key: fc.integer({ min: 0, max: 5 }), record }), { maxLength: 40 }), fc.boolean(), (items, named) => {
        // With and without enum and numbered keys (values of other kinds at those keys included).
        const store = new RecordStore<object>(named ? { enumKeys: ["status", "0"], numberedKeys: ["request_id", "decode"] } : {});
        for (const it of items) store.add(it.key, it.record);
        // The reference: a stable sort by key of the records as they were.
        const expected = items
          .map((it, i) => ({ ...it, i }))
          .sort((x, y) => x.key - y.key || x.i - y.i)
          .map((it) => it.record);
        const out = store.toArray();
        expect(out).toEqual(expected);
        expect(out.map((o) => JSON.stringify(o))).toEqual(expected.map((o) => JSON.stringify(o)));
        const keysDeep = (o: unknown): unknown =>
          typeof o === "object" && o !== null ? Object.entries(o).map(([k, v]) => [k, keysDeep(v)]) : Object.is(o, -0) ? "-0" : o;
        expect(out.map(keysDeep)).toEqual(expected.map(keysDeep));
      }),
      { seed: 4242, numRuns: 300 },
    );
  });
});
