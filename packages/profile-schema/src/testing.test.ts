import { describe, expect, it } from "vitest";
import { isGroupedProfile } from "./profile.js";
import { checkPdGate } from "./pd-gate.js";
import { glmFlashProfile, linearTestProfile } from "./testing.js";

describe("test profiles", () => {
  it("GLM-5.3-Flash matches the table of docs/rules/grouped-pd.md §2 and passes the P/D gate on both versions", () => {
    for (const version of ["0.31.0", "0.32.0"] as const) {
      const p = glmFlashProfile(version);
      if (!isGroupedProfile(p)) throw new Error("GLM is grouped");
      expect(p.kv_cache_groups.map((g) => g.transfer_bytes_per_block)).toEqual([13_045_120, 22_528, 9_768_960, 9_768_960, 8_683_520, 8_683_520]);
      // Fixed bytes: everything but full attention = 36,927,488.
      expect(p.kv_cache_groups.slice(1).reduce((a, g) => a + (g.transfer_bytes_per_block ?? 0), 0)).toBe(36_927_488);
      expect(p.kv_cache_groups.map((g) => g.prefill_checkpoint_blocks ?? 0)).toEqual(version === "0.32.0" ? [0, 0, 1, 1, 1, 1] : [0, 0, 0, 0, 0, 0]);
      expect(checkPdGate(p, "prefill")).toEqual([]);
    }
  });
  it("a linear profile is a rate per token", () => {
    expect(linearTestProfile(1_000_000).kv_bytes_per_token).toBe(1_000_000);
  });
});
