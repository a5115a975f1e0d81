export type { BlockTransferTerms, TokenTransferTerms, TransferTerms } from "./terms.js";
