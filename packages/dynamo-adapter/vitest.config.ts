import { packageVitestConfig } from "../../tooling/vitest.shared.js";

export default packageVitestConfig("dynamo-adapter");
