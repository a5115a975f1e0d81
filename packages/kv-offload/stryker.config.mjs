// @ts-check
import { strykerConfig } from "../../tooling/stryker.shared.mjs";

export default strykerConfig({ mutate: ["src/**/*.ts", "!src/**/*.test.ts", "!src/index.ts"] });
