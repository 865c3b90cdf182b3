import type { ProblemAction, ProblemCode } from "./generated/errors.js";

export type { ProblemAction, ProblemCode } from "./generated/errors.js";

/**
 * Codes the client itself gives to failures that carry no error envelope. The BFF never sends
 * them.
 *
 * - `NETWORK_ERROR`: no answer at all (offline, DNS, connection reset, CORS refusal). The request
 *   may or may not have reached the BFF.
 * - `UNEXPECTED_RESPONSE`: an answer that is not what the BFF sends: a non-2xx without
 *   `application/problem+json` (a proxy's or load balancer's HTML page), or a body that does
 *   not parse.
 * - `CLIENT_TIMEOUT`: no answer within the client's `totalTimeoutMs`, retries included; the
 *   call was aborted. Like `NETWORK_ERROR`, the request may or may not have been acted on.
 */
export type ClientErrorCode = "NETWORK_ERROR" | "UNEXPECTED_RESPONSE" | "CLIENT_TIMEOUT";

/**
 * A `code` of a BffError: one the OpenAPI document lists, a client-side one, or an upstream
 * error type the BFF passed on that the document does not know yet (handle those by `action`).
 * The `string & {}` keeps editor completion for the known codes.
 */
export type BffErrorCode = ProblemCode | ClientErrorCode | (string & {});

/** One entry of a validation error (`fields`). */
export interface ProblemField {
  /** The field's name or path (`amount`, `paymentInformation.creditorAccount.iban`), or "". */
  field: string;
  /** The whole entry, cleaned; safe to show. */
  message: string;
}

/** The members of the BFF's RFC 9457 error envelope (`application/problem+json`). */
export interface ProblemBody {
  type?: string;
  title?: string;
  status?: number;
  detail?: string;
  code?: string;
  action?: string;
  retryable?: boolean;
  fields?: ProblemField[];
  cost?: number;
  balance?: number;
  /** `STEP_UP_REQUIRED`: where the user approves the payment. */
  stepUpUrl?: string;
  /** `STEP_UP_REQUIRED`: the authentication classes an approval may reach. */
  acrValues?: string[];
  /** `STEP_UP_REQUIRED`: when the hold ends unless approved (RFC 3339). */
  expiresAt?: string;
  /** `STEP_UP_REQUIRED`: the oldest the approval's authentication may be, in seconds. */
  maxAge?: number;
  requestId?: string;
}

export interface BffErrorInit {
  status: number;
  code: BffErrorCode;
  action: ProblemAction;
  retryable: boolean;
  title?: string;
  detail?: string;
  type?: string;
  fields?: ProblemField[];
  cost?: number;
  balance?: number;
  requestId?: string;
  retryAfterSeconds?: number;
  replayed?: boolean;
  idempotencyKey?: string;
  method: string;
  path: string;
  cause?: unknown;
}

/**
 * Every failure of a call: an error envelope from the BFF, or a client-side failure
 * (`NETWORK_ERROR`, `UNEXPECTED_RESPONSE`, `CLIENT_TIMEOUT`). Switch on `code`; fall back on
 * `action` for a code you do not know.
 */
export class BffError extends Error {
  override readonly name = "BffError";
  /** The HTTP status; 0 for `NETWORK_ERROR` and `CLIENT_TIMEOUT`. */
  readonly status: number;
  readonly code: BffErrorCode;
  /** What to do next (docs/errors.md, "Actions"). */
  readonly action: ProblemAction;
  /** Whether the same request, repeated later unchanged, may succeed. */
  readonly retryable: boolean;
  readonly title: string | undefined;
  /** What went wrong, in English, safe to show. */
  readonly detail: string | undefined;
  /** `urn:bff:problem:<code>`. */
  readonly type: string | undefined;
  /** Validation errors, one per field; empty when there are none. */
  readonly fields: readonly ProblemField[];
  /** `INSUFFICIENT_CREDITS`: the credits the call needs. */
  readonly cost: number | undefined;
  /** `INSUFFICIENT_CREDITS`: the credits the organization has left. */
  readonly balance: number | undefined;
  /** The request's id (`requestId`, else the `X-Request-Id` header): quote it to support. */
  readonly requestId: string | undefined;
  /** `Retry-After` in seconds (from delay-seconds or an HTTP-date), when the answer had one. */
  readonly retryAfterSeconds: number | undefined;
  /** `Idempotent-Replayed: true`: the stored answer of an earlier request with the same key. */
  readonly replayed: boolean;
  /** The `Idempotency-Key` the request carried: repeat a payment with this key, never a new one. */
  readonly idempotencyKey: string | undefined;
  /** The request's method and path (without the query). */
  readonly method: string;
  readonly path: string;

  constructor(init: BffErrorInit) {
    super(
      init.detail ? `${init.code}: ${init.detail}` : init.code,
      init.cause === undefined ? undefined : { cause: init.cause },
    );
    this.status = init.status;
    this.code = init.code;
    this.action = init.action;
    this.retryable = init.retryable;
    this.title = init.title;
    this.detail = init.detail;
    this.type = init.type;
    this.fields = init.fields ?? [];
    this.cost = init.cost;
    this.balance = init.balance;
    this.requestId = init.requestId;
    this.retryAfterSeconds = init.retryAfterSeconds;
    this.replayed = init.replayed ?? false;
    this.idempotencyKey = init.idempotencyKey;
    this.method = init.method;
    this.path = init.path;
  }

  /** Whether this error has one of the given codes: `e.is("PAYMENT_OUTCOME_UNKNOWN")`. */
  is(...codes: BffErrorCode[]): boolean {
    return codes.includes(this.code);
  }

  /** The validation message of one field, if the answer named it. */
  fieldMessage(field: string): string | undefined {
    return this.fields.find((f) => f.field === field)?.message;
  }
}

/** Whether e is a BffError (also across bundles: it checks the name and shape, not only the class). */
export function isBffError(e: unknown): e is BffError {
  if (e instanceof BffError) return true;
  return (
    typeof e === "object" &&
    e !== null &&
    (e as { name?: unknown }).name === "BffError" &&
    typeof (e as { code?: unknown }).code === "string" &&
    typeof (e as { is?: unknown }).is === "function"
  );
}

export interface StepUpRequiredInit extends BffErrorInit {
  stepUpUrl: string;
  acrValues: readonly string[];
  expiresAt: string | undefined;
  maxAgeSeconds: number | undefined;
  challenge: string | undefined;
}

/**
 * 401 `STEP_UP_REQUIRED` (action `step_up`): the BFF holds this payment for the user's approval
 * (`payments.step_up`, docs/payments.md, "Payments the user approves"). Nothing was sent, and the
 * session is fine: this is not a lost session, and the client does not call onSessionRequired.
 * Send the user to `stepUpUrl` (`startStepUp(err, {returnTo})` in a browser, `mobileStepUpUrl`
 * in a native app); once approved, the payment is sent once under `idempotencyKey`.
 */
export class StepUpRequired extends BffError {
  declare readonly code: "STEP_UP_REQUIRED";
  declare readonly action: "step_up";
  /** Where the user approves the payment: the BFF's `GET /auth/step-up?payment=…`, absolute. */
  readonly stepUpUrl: string;
  /** The authentication context classes an approval may reach (`payments.step_up.acr_values`). */
  readonly acrValues: readonly string[];
  /** When the hold ends unless approved (RFC 3339, UTC); then the payment is declined, never sent. */
  readonly expiresAt: string | undefined;
  /** The oldest the approval's authentication may be, in seconds (`maxAge`), when the BFF sets one. */
  readonly maxAgeSeconds: number | undefined;
  /** The answer's `WWW-Authenticate` (RFC 9470's challenge), when it could be read. */
  readonly challenge: string | undefined;

  constructor(init: StepUpRequiredInit) {
    super(init);
    this.stepUpUrl = init.stepUpUrl;
    this.acrValues = [...init.acrValues];
    this.expiresAt = init.expiresAt;
    this.maxAgeSeconds = init.maxAgeSeconds;
    this.challenge = init.challenge;
  }
}

/**
 * Whether e is a StepUpRequired: a BffError with code `STEP_UP_REQUIRED` and its `stepUpUrl`
 * (also across bundles, by its shape).
 */
export function isStepUpRequired(e: unknown): e is StepUpRequired {
  if (e instanceof StepUpRequired) return true;
  return isBffError(e) && e.code === "STEP_UP_REQUIRED" && typeof (e as { stepUpUrl?: unknown }).stepUpUrl === "string";
}
