export { parseSetFlag, parseSpecPath, applyOverrides, setAt, resolvePathValues, specWithOverrides, SpecInputError, type SpecOverride, type PathKey, type SourcedIssue } from "./overrides.js";
