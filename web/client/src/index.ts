export {
  createClient, defaultEventIdleTimeoutMs, defaultEventMaxRetryDelayMs, defaultEventRetryMs, defaultSlowAfterMs,
  defaultTotalTimeoutMs,
} from "./client.js";
export type {
  AuthMode, BffClient, ClientOptions, EventsOptions, LogoutOptions, LogoutResult, MobileLoginParams,
  MoneyOptions, MoneyResult, RequestOptions, SlowCall, WatchOptions,
} from "./client.js";
export { BffError, isBffError, isStepUpRequired, StepUpRequired } from "./errors.js";
export type { BffErrorCode, BffErrorInit, ClientErrorCode, ProblemBody, ProblemField, StepUpRequiredInit } from "./errors.js";
export { mobileStepUpUrl, startStepUp, stepUpReturn, stepUpUrl } from "./stepup.js";
export type { StepUpOptions, StepUpOutcome, StepUpReturn, StepUpTarget } from "./stepup.js";
export { problemActions, problemCodes } from "./generated/errors.js";
export type { ProblemAction, ProblemCode } from "./generated/errors.js";
export type { ApiResponse, Query } from "./http.js";
export { defaultRetry, parseRetryAfter } from "./retry.js";
export type { RetryOptions } from "./retry.js";
export type * from "./models.js";
export type { components, operations, paths } from "./generated/openapi.js";
export { createPkce, pkceChallenge } from "./pkce.js";
export {
  canonicalJson, isReceiptError, ReceiptError, receiptType, receiptVersion, verifyReceipt,
} from "./receipts.js";
export type { JsonWebKeySet, ReceiptErrorReason, ReceiptKey, VerifiedReceipt } from "./receipts.js";
export { SseParser } from "./sse.js";
export type { SseEvent } from "./sse.js";
