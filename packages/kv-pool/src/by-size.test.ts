import { describe, expect, it } from "vitest";
import { BySize } from "./by-size.js";

describe("BySize", () => {
  it("keeps the first size's entry and any later sizes' apart, and has nothing for a size never set", () => {
    const m = new BySize<string>();
    expect(m.get(16)).toBeUndefined();
    m.set(16, "a");
    m.set(32, "b");
    m.set(2176, "c");
    expect([m.get(16), m.get(32), m.get(2176), m.get(64), m.get(0)]).toEqual(["a", "b", "c", undefined, undefined]);
  });
});
