import type { BffError } from "./errors.js";

/** How the client repeats a failed request that is safe to repeat. */
export interface RetryOptions {
  /** Attempts in all, the first included (default 3; 1 switches retries off). */
  maxAttempts: number;
  /** The first backoff delay, before jitter (default 500 ms); it doubles with each retry. */
  baseDelayMs: number;
  /**
   * The longest single wait (default 10 s). A `Retry-After` longer than this is not waited
   * for: the error is thrown at once, for the app to offer the action again later.
   */
  maxDelayMs: number;
  /** The most time spent waiting across all retries of one call (default 30 s). */
  maxTotalDelayMs: number;
}

export const defaultRetry: RetryOptions = {
  maxAttempts: 3,
  baseDelayMs: 500,
  maxDelayMs: 10_000,
  maxTotalDelayMs: 30_000,
};

const idempotentMethods = new Set(["GET", "HEAD", "OPTIONS", "PUT", "DELETE"]);

/**
 * Whether err may be retried for a request with this method and, maybe, an Idempotency-Key.
 *
 * - An error envelope is retried only when it says `retryable: true`, and only for an
 *   idempotent method (GET, HEAD, OPTIONS, PUT, DELETE) or a request with an Idempotency-Key.
 * - A failure without an answer (`NETWORK_ERROR`) or with a proxy's page instead of the BFF's
 *   answer (`UNEXPECTED_RESPONSE` with a 5xx) is retried only for GET and HEAD, or a request
 *   with an Idempotency-Key: for anything else the request may have been acted on.
 * - A POST or PATCH without an Idempotency-Key is never retried.
 */
export function mayRetry(err: BffError, method: string, hasIdempotencyKey: boolean): boolean {
  if (!err.retryable) return false;
  if (err.code === "NETWORK_ERROR" || err.code === "UNEXPECTED_RESPONSE") {
    return hasIdempotencyKey || method === "GET" || method === "HEAD";
  }
  return hasIdempotencyKey || idempotentMethods.has(method);
}

/**
 * The wait before retry number `retry` (1 for the first retry): the answer's `Retry-After` when
 * it has one, else exponential backoff with jitter, base * 2^(retry-1) capped at maxDelayMs, of
 * which a random half is taken off ("equal jitter"). Returns undefined when the wait would be
 * longer than maxDelayMs (a Retry-After too long to wait for in the app).
 */
export function retryDelayMs(
  err: BffError,
  retry: number,
  opts: RetryOptions,
  random: () => number,
): number | undefined {
  if (err.retryAfterSeconds !== undefined) {
    const ms = err.retryAfterSeconds * 1000;
    return ms > opts.maxDelayMs ? undefined : ms;
  }
  const exp = Math.min(opts.maxDelayMs, opts.baseDelayMs * 2 ** (retry - 1));
  return Math.round(exp / 2 + (random() * exp) / 2);
}

/**
 * Reads a Retry-After header: delay-seconds or an HTTP-date (RFC 9110, section 10.2.3), as
 * whole seconds from now (0 for a date in the past); undefined when absent or malformed.
 */
export function parseRetryAfter(value: string | null, now: number = Date.now()): number | undefined {
  if (value === null) return undefined;
  const v = value.trim();
  if (/^\d+$/.test(v)) return Number(v);
  const at = Date.parse(v);
  if (Number.isNaN(at)) return undefined;
  return Math.max(0, Math.ceil((at - now) / 1000));
}
