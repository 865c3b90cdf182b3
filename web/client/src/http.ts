import { BffError, StepUpRequired, type ProblemAction, type ProblemBody } from "./errors.js";
import { problemActions } from "./generated/errors.js";
import { parseRetryAfter } from "./retry.js";

/** A query string as an object: undefined and null members are left out, arrays repeat the name. */
export type Query = Record<string, string | number | boolean | null | undefined | ReadonlyArray<string | number | boolean>>;

/** A successful answer. */
export interface ApiResponse<T> {
  data: T;
  status: number;
  headers: Headers;
  /** `Idempotent-Replayed: true`: the stored answer of an earlier request with the same key. */
  replayed: boolean;
  /** The `X-Request-Id` header. */
  requestId: string | undefined;
}

export interface SendInit {
  method: string;
  path: string;
  query?: Query | undefined;
  body?: unknown;
  headers: HeadersInit;
  credentials: RequestCredentials;
  signal?: AbortSignal | undefined;
  idempotencyKey?: string | undefined;
}

/** Whether a request may be repeated after a failure that left its outcome unknown. */
function repeatable(method: string, idempotencyKey: string | undefined): boolean {
  return idempotencyKey !== undefined || method === "GET" || method === "HEAD";
}

export function buildUrl(baseUrl: string, path: string, query?: Query): string {
  if (!path.startsWith("/")) throw new TypeError(`path must start with "/": ${path}`);
  let url = baseUrl.replace(/\/+$/, "") + path;
  if (query) {
    const qs = new URLSearchParams();
    for (const [k, v] of Object.entries(query)) {
      if (v === undefined || v === null) continue;
      if (Array.isArray(v)) for (const item of v) qs.append(k, String(item));
      else qs.append(k, String(v));
    }
    const s = qs.toString();
    if (s) url += (url.includes("?") ? "&" : "?") + s;
  }
  return url;
}

function isProblem(contentType: string | null): boolean {
  return contentType !== null && /^application\/problem\+json\s*(;|$)/i.test(contentType);
}

function isJson(contentType: string | null): boolean {
  return contentType !== null && /^application\/([a-z0-9.+-]*\+)?json\s*(;|$)/i.test(contentType);
}

// The actions the document enumerates: another one (from a newer BFF) is read by the status.
const actions: ReadonlySet<string> = new Set(problemActions);

function num(v: unknown): number | undefined {
  return typeof v === "number" && Number.isFinite(v) ? v : undefined;
}

function str(v: unknown): string | undefined {
  return typeof v === "string" ? v : undefined;
}

/** The action a status implies, as the BFF derives it for an upstream error with no known type. */
function actionForStatus(status: number): ProblemAction {
  return status === 408 || status === 429 || status >= 500 ? "retry_later" : "fix_request";
}

/**
 * Sends one request and reads its answer: the parsed body of a 2xx, else a BffError. It does not
 * retry.
 */
export async function send<T>(fetchFn: typeof fetch, baseUrl: string, init: SendInit): Promise<ApiResponse<T>> {
  const { method, path, idempotencyKey } = init;
  // Headers, not a plain object: names are case-insensitive, so a caller's "content-type"
  // replaces the default instead of being sent next to it.
  const headers = new Headers(init.headers);
  if (!headers.has("Accept")) headers.set("Accept", "application/json");
  let body: BodyInit | undefined;
  if (init.body !== undefined) {
    if (typeof init.body === "string") {
      body = init.body;
    } else {
      body = JSON.stringify(init.body);
      if (!headers.has("Content-Type")) headers.set("Content-Type", "application/json");
    }
  }
  if (idempotencyKey !== undefined) headers.set("Idempotency-Key", idempotencyKey);

  const url = buildUrl(baseUrl, path, init.query);
  const base = { method, path, idempotencyKey };
  let res: Response;
  try {
    const req: RequestInit = { method, headers, credentials: init.credentials };
    if (body !== undefined) req.body = body;
    if (init.signal) req.signal = init.signal;
    res = await fetchFn(url, req);
  } catch (cause) {
    // The caller's own abort is not a failure of the BFF: pass it on as it is.
    if (init.signal?.aborted) throw cause;
    throw new BffError({
      ...base,
      status: 0,
      code: "NETWORK_ERROR",
      action: "retry_later",
      retryable: repeatable(method, idempotencyKey),
      detail: "The BFF could not be reached; the request may or may not have arrived.",
      cause,
    });
  }

  const contentType = res.headers.get("Content-Type");
  const requestId = res.headers.get("X-Request-Id") ?? undefined;
  const replayed = res.headers.get("Idempotent-Replayed")?.trim().toLowerCase() === "true";
  let text: string;
  try {
    text = await res.text();
  } catch (cause) {
    if (init.signal?.aborted) throw cause;
    // The answer was cut off: as for no answer at all, the request may have been acted on.
    throw new BffError({
      ...base,
      status: res.status,
      code: "NETWORK_ERROR",
      action: "retry_later",
      retryable: repeatable(method, idempotencyKey),
      detail: "The answer was cut off before its end.",
      requestId,
      replayed,
      cause,
    });
  }

  if (res.ok) {
    let data: unknown = undefined;
    if (text !== "") {
      if (isJson(contentType)) {
        try {
          data = JSON.parse(text);
        } catch (cause) {
          throw new BffError({
            ...base,
            status: res.status,
            code: "UNEXPECTED_RESPONSE",
            // A keyed request (a payment) did succeed: its answer is what was lost.
            action: idempotencyKey !== undefined ? "check_status" : "contact_support",
            retryable: false,
            detail: "The answer's JSON body could not be read.",
            requestId,
            replayed,
            cause,
          });
        }
      } else {
        data = text;
      }
    }
    return { data: data as T, status: res.status, headers: res.headers, replayed, requestId };
  }

  throw answerError(res, text, base);
}

/**
 * The BffError of a non-2xx answer whose body is text: its error envelope, or
 * UNEXPECTED_RESPONSE when it has none. The one place an answer becomes an error, for send and
 * for the event stream's refusals.
 */
export function answerError(res: Response, text: string, base: { method: string; path: string; idempotencyKey?: string | undefined }): BffError {
  const { method, idempotencyKey } = base;
  const contentType = res.headers.get("Content-Type");
  const requestId = res.headers.get("X-Request-Id") ?? undefined;
  const replayed = res.headers.get("Idempotent-Replayed")?.trim().toLowerCase() === "true";
  const retryAfterSeconds = parseRetryAfter(res.headers.get("Retry-After"));
  if (isProblem(contentType)) {
    let p: ProblemBody | undefined;
    try {
      const parsed: unknown = JSON.parse(text);
      if (parsed && typeof parsed === "object" && typeof (parsed as ProblemBody).code === "string") {
        p = parsed as ProblemBody;
      }
    } catch {
      p = undefined;
    }
    if (p) {
      const action = typeof p.action === "string" && actions.has(p.action)
        ? (p.action as ProblemAction)
        : actionForStatus(res.status);
      const fields = Array.isArray(p.fields)
        ? p.fields
            .filter((f) => f && typeof f === "object")
            .map((f) => ({ field: str(f.field) ?? "", message: str(f.message) ?? "" }))
        : [];
      const init = {
        ...base,
        status: res.status,
        code: p.code as string,
        action,
        retryable: p.retryable === true,
        title: str(p.title),
        detail: str(p.detail),
        type: str(p.type),
        fields,
        cost: num(p.cost),
        balance: num(p.balance),
        requestId: str(p.requestId) ?? requestId,
        retryAfterSeconds,
        replayed,
      };
      const stepUpUrl = str(p.stepUpUrl);
      if (p.code === "STEP_UP_REQUIRED" && stepUpUrl) {
        return new StepUpRequired({
          ...init,
          stepUpUrl,
          acrValues: Array.isArray(p.acrValues) ? p.acrValues.filter((v): v is string => typeof v === "string") : [],
          expiresAt: str(p.expiresAt),
          maxAgeSeconds: num(p.maxAge),
          // A cross-origin answer shows it only when the BFF exposes it (CORS).
          challenge: res.headers.get("WWW-Authenticate") ?? undefined,
        });
      }
      return new BffError(init);
    }
  }

  // Not the BFF's envelope: a proxy's or load balancer's page, or an unreadable body.
  const transient = res.status === 408 || res.status === 429 || res.status >= 500;
  return new BffError({
    ...base,
    status: res.status,
    code: "UNEXPECTED_RESPONSE",
    action: actionForStatus(res.status),
    retryable: transient && repeatable(method, idempotencyKey),
    detail: `HTTP ${res.status} without an error envelope (${contentType ?? "no Content-Type"}).`,
    requestId,
    retryAfterSeconds,
    replayed,
  });
}
