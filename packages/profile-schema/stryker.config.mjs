// @ts-check
import { strykerConfig } from "../../tooling/stryker.shared.mjs";

// Only the group geometry: the block counts transfer-rules and kv-pool share (docs/rules/grouped-pd.md §2).
export default strykerConfig({ mutate: ["src/geometry.ts"] });
