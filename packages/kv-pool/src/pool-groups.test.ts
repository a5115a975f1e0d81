import type { Profile } from "@kvsim/profile-schema";
import { engineSettings } from "@kvsim/profile-schema";
import { describe, expect, it } from "vitest";
import { poolGroupsForProfile } from "./pool-groups.js";

describe("poolGroupsForProfile refusals", () => {
  it("names both fields when a profile has neither groups nor a per-token rate", () => {
    const bare: Profile = { schema_version: 1, model: "m", vllm_version: "0.31.0", tensor_parallel_size: 1 };
    expect(() => poolGroupsForProfile(bare, engineSettings())).toThrow(new RangeError("a profile needs kv_cache_groups or kv_bytes_per_token"));
  });
});
