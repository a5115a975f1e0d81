export {
  fromMockEngineArgs,
  toMockEngineArgs,
  toDynamoKvTransfer,
  DYNAMO_VLLM_BLOCK_SIZE,
  UNBOUNDED,
  type Conversion,
  type DynamoKvTransfer,
  type KvsimEngineArgs,
  type MockEngineArgs,
  type WorkerType,
} from "./engine-args.js";
export {
  toDynamoTiming,
  dynamoTimingIssues,
  toLegacyTiming,
  toDestinationTransfer,
  fromDynamoTiming,
  termsShape,
  transferablePromptTokens,
  transferTimingFor,
  dynamoDelayMs,
  handoffDelayMs,
  startTransferDelayMs,
  parseHandoffTiming,
  type HandoffTransferTiming,
  type LegacyHandoffTransferTiming,
  type DestinationTransfer,
  type TermsShape,
} from "./handoff-timing.js";
export {
  RouterEventPublisher,
  routerGroupIndex,
  toRouterEventData,
  fromRouterEventData,
  parseRouterKvEvent,
  type RouterKvEvent,
  type RouterKvEventData,
  type RouterStoredBlock,
} from "./kv-events.js";
export { parseJsonExact, stringifyJsonExact, JsonSyntaxError, type JsonValue } from "./json-u64.js";
export { createEngineSession, type EngineSession, type EngineSessionOptions } from "./session.js";
export type { ProtocolErrorCode, ProtocolOp } from "./protocol.js";
