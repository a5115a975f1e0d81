import { packageVitestConfig } from "../../tooling/vitest.shared.js";

export default packageVitestConfig("kv-offload");
