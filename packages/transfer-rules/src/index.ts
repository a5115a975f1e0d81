export type { BlockTransferTerms, TokenTransferTerms, TransferTerms } from "./terms.js";
export { blocksToTokens, tokensToBlocksCeil, tokensToBlocksFloor } from "./conversions.js";
export { checkBandwidth, delayMsForBytes } from "./delay.js";
export { transferProfileIssues } from "./profile-check.js";
export { LINEAR_GROUP_NAME, backoffTokens, transferredTokens, groupPayload, type GroupPayload, type LinearOptions } from "./rules.js";
export { sourceTerms, withDestination, payloadBytes, chargedFixedBytes, transferDelayMs, type SourceTermsOptions } from "./source-terms.js";
