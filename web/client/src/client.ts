import { BffError, isBffError } from "./errors.js";
import { answerError, send, buildUrl, type ApiResponse, type Query } from "./http.js";
import { SseParser } from "./sse.js";
import { defaultRetry, mayRetry, retryDelayMs, type RetryOptions } from "./retry.js";
import type {
  Account, AccountPage, AccountQuery, Connection, ConnectionCreate, ConnectionCreated,
  ConnectionPage, ConnectionQuery, DevSession, MobileToken, OpenBankingInit,
  OpenBankingInitReply, Page, Payment, PaymentCreate, PaymentCreated, PaymentEvent, PaymentPage,
  PaymentQuery, PaymentRecord, PaymentRecordPage, PaymentRecordQuery, Provider, ProviderQuery, ReceiptKeySet, RefreshReply, Session, SessionInfo,
  StepUpApproval, Transaction, TransactionCategory, TransactionPage, TransactionPatch, TransactionQuery,
} from "./models.js";

/** How the client proves who is calling. */
export type AuthMode = "cookie" | "token";

export interface ClientOptions {
  /**
   * The BFF's origin, e.g. "https://bff.example.com"; "" (the default) for a web app served from
   * the BFF's own origin. Paths are appended to it.
   */
  baseUrl?: string;
  /**
   * "cookie" (web apps): the browser sends the session cookie (`credentials: "include"`), and
   * every POST, PUT, PATCH and DELETE carries `X-CSRF: 1`.
   * "token" (native apps): `Authorization: Bearer <getToken()>`, no cookies
   * (`credentials: "omit"`), no CSRF header.
   */
  mode: AuthMode;
  /** Token mode: the session token, from the app's secure storage; null or undefined for none. */
  getToken?: () => string | null | undefined | Promise<string | null | undefined>;
  /**
   * Called with the error when a call answers `SESSION_REQUIRED` (action `login`), before the
   * error is thrown. The default, in cookie mode in a browser, navigates to
   * `/auth/login?returnTo=<current path and query>`; elsewhere it does nothing.
   */
  onSessionRequired?: (err: BffError) => void | Promise<void>;
  /** The fetch to use (default globalThis.fetch). */
  fetch?: typeof fetch;
  /** Retry settings; see RetryOptions. */
  retry?: Partial<RetryOptions>;
  /** How the client waits between retries (default setTimeout); tests inject their own. */
  sleep?: (ms: number, signal?: AbortSignal) => Promise<void>;
  /** A random number in [0, 1) for the backoff's jitter (default Math.random). */
  random?: () => number;
  /** Makes Idempotency-Keys (default crypto.randomUUID). */
  newIdempotencyKey?: () => string;
  /**
   * The longest one call may take in all, its attempts and the waits between them included
   * (default 20 s; 0 for no bound). The BFF gives up on a slow upstream after its
   * `upstream.timeout` (15 s by default) and the client retries that answer, so without a bound a
   * call could take three times as long. Past the bound the call is aborted and fails with
   * `CLIENT_TIMEOUT` (action `retry_later`): show it with a Retry.
   */
  totalTimeoutMs?: number;
  /**
   * Called once for a call still without its answer after slowAfterMs (default 3 s), so the app can
   * show "still trying…". It may return a function, called when that call settles.
   */
  onSlow?: (call: SlowCall) => void | (() => void);
  /** How long a call may run before onSlow (default 3000 ms). */
  slowAfterMs?: number;
}

/** A call that onSlow reports. */
export interface SlowCall {
  method: string;
  /** The path, without the query. */
  path: string;
}

/** The default of ClientOptions.totalTimeoutMs: above the BFF's 15 s upstream timeout, once. */
export const defaultTotalTimeoutMs = 20_000;
/** The default of ClientOptions.slowAfterMs. */
export const defaultSlowAfterMs = 3_000;

export interface RequestOptions {
  body?: unknown;
  query?: Query;
  headers?: Record<string, string>;
  /**
   * Sent as `Idempotency-Key`, and kept across the retries. A request with a key may be retried
   * after a network error; one without is retried only when its method is idempotent.
   */
  idempotencyKey?: string;
  signal?: AbortSignal;
  /** false: no retries for this call; or settings that override the client's. */
  retry?: false | Partial<RetryOptions>;
  /** This call's bound on its total time, over the client's totalTimeoutMs (0: none). */
  totalTimeoutMs?: number;
}

/** The result of a money-moving call. */
export interface MoneyResult<T> {
  data: T;
  /** The answer's status (201 for a new payment). */
  status: number;
  /** True when the BFF replayed the stored answer of an earlier request with the same key. */
  replayed: boolean;
  /** The key the request was sent with: keep it with the payment. */
  idempotencyKey: string;
  requestId: string | undefined;
}

export interface MoneyOptions {
  /** The payment's key, when the app made and stored one; else the client makes a UUID. */
  idempotencyKey?: string;
  signal?: AbortSignal;
  retry?: false | Partial<RetryOptions>;
}

export interface EventsOptions {
  /**
   * Resume after this event: the `id` of the last PaymentEvent the app handled (kept across a
   * page load, say). Without it the stream starts from now; read the current state in onOpen.
   */
  lastEventId?: string;
  /** Ends the stream: the iteration then finishes without an error. */
  signal?: AbortSignal;
  /**
   * Called each time a connection is open, the first and every reconnect, with the
   * `Last-Event-ID` it sent (undefined for none). A connection without one starts from now, so
   * this is where to (re)load the list (`paymentRecords()`): no change falls between the two.
   */
  onOpen?: (lastEventId: string | undefined) => void;
  /**
   * A connection that brings no byte for this long is taken as dead and replaced (default
   * 45 s: the BFF sends a heartbeat at least every 15 s; 0 for never).
   */
  idleTimeoutMs?: number;
  /** The longest wait between reconnects when they keep failing (default 30 s). */
  maxRetryDelayMs?: number;
}

export interface WatchOptions {
  /** Ends the watch: the iteration then finishes without an error. */
  signal?: AbortSignal;
  /** As EventsOptions.idleTimeoutMs. */
  idleTimeoutMs?: number;
  /** As EventsOptions.maxRetryDelayMs. */
  maxRetryDelayMs?: number;
}

/** The wait before a reconnect when the stream has sent no `retry:` (the standard's usual value). */
export const defaultEventRetryMs = 1_000;
/** The default of EventsOptions.idleTimeoutMs: three of the BFF's 15 s heartbeats. */
export const defaultEventIdleTimeoutMs = 45_000;
/** The default of EventsOptions.maxRetryDelayMs. */
export const defaultEventMaxRetryDelayMs = 30_000;

export interface LogoutOptions {
  /** In a browser, navigate to `X-Logout-Url` when the answer has one (default true). */
  navigate?: boolean;
}

export interface LogoutResult {
  /** The identity provider's logout page (`X-Logout-Url`), when the BFF gave one. */
  logoutUrl: string | undefined;
}

export interface MobileLoginParams {
  /** One of the BFF's `auth.mobile_redirect_uris`, e.g. "com.example.app:/oauth2redirect". */
  redirectUri: string;
  /** The S256 challenge of the app's PKCE code verifier (43 base64url characters). */
  codeChallenge: string;
  /** Handed back unchanged with the code. */
  state?: string;
}

interface BrowserLocation {
  pathname: string;
  search: string;
  assign(url: string): void;
}

function browserLocation(): BrowserLocation | undefined {
  const loc = (globalThis as { location?: Partial<BrowserLocation> }).location;
  if (loc && typeof loc.assign === "function" && typeof loc.pathname === "string") {
    return loc as BrowserLocation;
  }
  return undefined;
}

function defaultSleep(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal?.aborted) return reject(signal.reason);
    const t = setTimeout(() => {
      signal?.removeEventListener("abort", onAbort);
      resolve();
    }, ms);
    const onAbort = () => {
      clearTimeout(t);
      reject(signal?.reason);
    };
    signal?.addEventListener("abort", onAbort, { once: true });
  });
}

function defaultKey(): string {
  const c = (globalThis as { crypto?: { randomUUID?: () => string } }).crypto;
  if (c?.randomUUID) return c.randomUUID();
  throw new Error(
    "crypto.randomUUID is not available: pass newIdempotencyKey to createClient (React Native: a UUID library)",
  );
}

const unsafeMethods = new Set(["POST", "PUT", "PATCH", "DELETE"]);

/**
 * Whether a is a later state of a payment than b: a later updatedAt (compared as times: the
 * BFF writes up to nine decimals, so strings do not compare), or the same one with something
 * else changed (an event and a read of the same change are the same state).
 */
function newer(a: PaymentRecord, b: PaymentRecord): boolean {
  const ta = Date.parse(a.updatedAt);
  const tb = Date.parse(b.updatedAt);
  if (!Number.isNaN(ta) && !Number.isNaN(tb) && ta !== tb) return ta > tb;
  return a.updatedAt !== b.updatedAt || a.state !== b.state || a.status !== b.status ||
    a.paymentId !== b.paymentId || a.paymentStatus !== b.paymentStatus;
}

function seg(id: string): string {
  return encodeURIComponent(id);
}

/** Creates a client of the BFF. See README.md. */
export function createClient(options: ClientOptions) {
  const baseUrl = options.baseUrl ?? "";
  const mode = options.mode;
  if (mode !== "cookie" && mode !== "token") throw new TypeError(`mode must be "cookie" or "token"`);
  const fetchFn: typeof fetch = options.fetch ?? ((input, init) => globalThis.fetch(input, init));
  const sleep = options.sleep ?? defaultSleep;
  const random = options.random ?? Math.random;
  const newKey = options.newIdempotencyKey ?? defaultKey;
  const clientRetry: RetryOptions = { ...defaultRetry, ...options.retry };
  const clientTotalMs = options.totalTimeoutMs ?? defaultTotalTimeoutMs;
  const slowAfterMs = options.slowAfterMs ?? defaultSlowAfterMs;

  /** The URL that starts the browser login, coming back to returnTo (a same-origin path). */
  function loginUrl(returnTo?: string): string {
    return buildUrl(baseUrl, "/auth/login", returnTo === undefined ? undefined : { returnTo });
  }

  async function sessionRequired(err: BffError): Promise<void> {
    if (options.onSessionRequired) return options.onSessionRequired(err);
    const loc = browserLocation();
    if (mode === "cookie" && loc) loc.assign(loginUrl(loc.pathname + loc.search));
  }

  interface Internal extends RequestOptions {
    /** Send no session (login endpoints). */
    anonymous?: boolean;
    /** Do not call onSessionRequired (the caller handles SESSION_REQUIRED itself). */
    quietSession?: boolean;
  }

  async function call<T>(method: string, path: string, opts: Internal = {}): Promise<ApiResponse<T>> {
    method = method.toUpperCase();
    const totalMs = opts.totalTimeoutMs ?? clientTotalMs;
    // One signal for every attempt and wait: the caller's abort or the bound, whichever comes
    // first. (AbortSignal.any is not in every runtime the client supports: React Native.)
    const bound = new AbortController();
    let timedOut = false;
    const onCallerAbort = () => bound.abort(opts.signal?.reason);
    if (opts.signal?.aborted) onCallerAbort();
    else opts.signal?.addEventListener("abort", onCallerAbort, { once: true });
    const deadline = totalMs > 0
      ? setTimeout(() => { timedOut = true; bound.abort(); }, totalMs)
      : undefined;
    let settled: (() => void) | undefined;
    const slow = options.onSlow
      ? setTimeout(() => { settled = options.onSlow?.({ method, path }) ?? undefined; }, slowAfterMs)
      : undefined;
    const started = Date.now();
    try {
      return await attempts<T>(method, path, opts, bound.signal, totalMs > 0 ? started + totalMs : Infinity);
    } catch (err) {
      if (!timedOut) throw err;
      const hasKey = opts.idempotencyKey !== undefined;
      throw new BffError({
        method, path, idempotencyKey: opts.idempotencyKey,
        status: 0,
        code: "CLIENT_TIMEOUT",
        action: "retry_later",
        // As after NETWORK_ERROR: a request in flight may have been acted on.
        retryable: hasKey || method === "GET" || method === "HEAD",
        detail: `No answer within ${totalMs} ms, retries included.`,
        cause: err,
      });
    } finally {
      clearTimeout(deadline);
      clearTimeout(slow);
      opts.signal?.removeEventListener("abort", onCallerAbort);
      settled?.();
    }
  }

  /** The attempts of one call, each with signal, none started or waited for past endsAt. */
  async function attempts<T>(method: string, path: string, opts: Internal, signal: AbortSignal, endsAt: number): Promise<ApiResponse<T>> {
    const retry: RetryOptions =
      opts.retry === false ? { ...clientRetry, maxAttempts: 1 } : { ...clientRetry, ...opts.retry };
    const hasKey = opts.idempotencyKey !== undefined;
    let waited = 0;
    for (let attempt = 1; ; attempt++) {
      const headers = new Headers(opts.headers);
      if (mode === "cookie") {
        if (unsafeMethods.has(method)) headers.set("X-CSRF", "1");
      } else if (!opts.anonymous && options.getToken) {
        const token = await options.getToken();
        if (token) headers.set("Authorization", `Bearer ${token}`);
      }
      try {
        return await send<T>(fetchFn, baseUrl, {
          method,
          path,
          query: opts.query,
          body: opts.body,
          headers,
          credentials: mode === "cookie" ? "include" : "omit",
          signal,
          idempotencyKey: opts.idempotencyKey,
        });
      } catch (err) {
        if (!isBffError(err)) throw err;
        if (err.code === "SESSION_REQUIRED") {
          if (!opts.quietSession) await sessionRequired(err);
          throw err;
        }
        if (attempt >= retry.maxAttempts || !mayRetry(err, method, hasKey)) throw err;
        const delay = retryDelayMs(err, attempt, retry, random);
        if (delay === undefined || waited + delay > retry.maxTotalDelayMs) throw err;
        // A retry that could not start before the bound: this answer says more than a timeout.
        if (Date.now() + delay >= endsAt) throw err;
        waited += delay;
        await sleep(delay, signal);
      }
    }
  }

  async function data<T>(method: string, path: string, opts?: Internal): Promise<T> {
    return (await call<T>(method, path, opts)).data;
  }

  async function money<T>(path: string, body: unknown, opts: MoneyOptions = {}): Promise<MoneyResult<T>> {
    // One key per payment, made once, before the first attempt: every retry reuses it.
    const idempotencyKey = opts.idempotencyKey ?? newKey();
    const init: Internal = { body, idempotencyKey };
    if (opts.signal) init.signal = opts.signal;
    if (opts.retry !== undefined) init.retry = opts.retry;
    const res = await call<T>("POST", path, init);
    return { data: res.data, status: res.status, replayed: res.replayed, idempotencyKey, requestId: res.requestId };
  }

  /** Yields the pages of a paged list, following `nextPage` until it is null. */
  async function* pages<T>(path: string, query: Query = {}, opts: { signal?: AbortSignal } = {}): AsyncGenerator<Page<T>> {
    let cursor: string | null | undefined = (query["nextPage"] as string | undefined) ?? undefined;
    const seen = new Set<string>();
    for (;;) {
      const init: Internal = { query: { ...query, nextPage: cursor ?? undefined } };
      if (opts.signal) init.signal = opts.signal;
      const page = await data<Page<T>>("GET", path, init);
      yield page;
      cursor = page.nextPage;
      if (cursor === null || cursor === undefined || cursor === "") return;
      if (seen.has(cursor)) {
        throw new BffError({
          method: "GET", path, status: 200, code: "UNEXPECTED_RESPONSE", action: "contact_support",
          retryable: false, detail: "The list returned a nextPage cursor it had returned before.",
        });
      }
      seen.add(cursor);
    }
  }

  /**
   * The caller's payment changes (GET /bff/events) read with fetch, so that token mode's
   * Authorization header goes along (EventSource sends none). Reconnects by itself; see events()
   * in the returned object.
   */
  async function* events(opts: EventsOptions = {}): AsyncGenerator<PaymentEvent, void, undefined> {
    const path = "/bff/events";
    const signal = opts.signal;
    const idleMs = opts.idleTimeoutMs ?? defaultEventIdleTimeoutMs;
    const maxDelay = opts.maxRetryDelayMs ?? defaultEventMaxRetryDelayMs;
    const parser = new SseParser();
    let lastId = opts.lastEventId === "" ? undefined : opts.lastEventId;
    let retryMs = defaultEventRetryMs;
    // Connections in a row that failed or brought nothing: each doubles the wait, up to maxDelay.
    let failures = 0;
    // The wait before the next connection; undefined for none (the first).
    let delay: number | undefined;

    // The server's retry: (or the default), doubled per failure in a row, capped, plus up to half
    // again at random: clients dropped together (an instance shutting down) do not come back
    // together.
    // A server's retry: longer than maxDelay is still waited for: it is the server's to set.
    const backoff = () => {
      const cap = Math.max(maxDelay, retryMs);
      const d = Math.min(cap, retryMs * 2 ** Math.max(0, failures - 1));
      return Math.min(cap, Math.round(d + (random() * d) / 2));
    };

    while (!signal?.aborted) {
      if (delay !== undefined) {
        try {
          await sleep(delay, signal);
        } catch (err) {
          if (signal?.aborted) return;
          throw err;
        }
      }
      const conn = new AbortController();
      const onAbort = () => conn.abort(signal?.reason);
      signal?.addEventListener("abort", onAbort, { once: true });
      let idle: ReturnType<typeof setTimeout> | undefined;
      // Restarted by every byte: a connection silent past idleMs is aborted and replaced.
      const touch = () => {
        if (idleMs <= 0) return;
        clearTimeout(idle);
        idle = setTimeout(() => conn.abort(), idleMs);
      };
      try {
        const headers = new Headers({ Accept: "text/event-stream" });
        if (lastId !== undefined) headers.set("Last-Event-ID", lastId);
        if (mode === "token" && options.getToken) {
          const token = await options.getToken();
          if (token) headers.set("Authorization", `Bearer ${token}`);
        }
        touch();
        let res: Response;
        try {
          res = await fetchFn(buildUrl(baseUrl, path), {
            method: "GET",
            headers,
            credentials: mode === "cookie" ? "include" : "omit",
            cache: "no-store",
            signal: conn.signal,
          });
        } catch {
          if (signal?.aborted) return;
          failures++; // no answer: offline, refused, or no headers within idleMs
          delay = backoff();
          continue;
        }
        if (!res.ok) {
          let text = "";
          try {
            text = await res.text();
          } catch {
            if (signal?.aborted) return;
          }
          const err = answerError(res, text, { method: "GET", path });
          if (err.code === "SESSION_REQUIRED") {
            await sessionRequired(err);
            throw err;
          }
          // A refusal (400, 401, 403, 404, ...) would be refused again: it ends the stream. Too
          // many streams (429), no ledger or Redis (503) and other 5xx are waited out: their
          // Retry-After when they have one, else the backoff.
          const s = res.status;
          if (s !== 408 && s !== 429 && s < 500) throw err;
          failures++;
          delay = (s === 429 || s === 503) && err.retryAfterSeconds !== undefined
            ? err.retryAfterSeconds * 1000 + Math.round(random() * 1000)
            : backoff();
          continue;
        }
        const contentType = res.headers.get("Content-Type");
        if (!res.body || contentType === null || !/^text\/event-stream\s*(;|$)/i.test(contentType)) {
          // Not awaited: a tee'd body's cancel waits for its other branch.
          res.body?.cancel().catch(() => {});
          // An app's index.html (a BFF without /bff/events serving static_dir), or a fetch that
          // cannot stream (React Native's own): reconnecting would not help.
          throw new BffError({
            method: "GET", path, status: res.status, code: "UNEXPECTED_RESPONSE", action: "contact_support",
            retryable: false, requestId: res.headers.get("X-Request-Id") ?? undefined,
            detail: res.body
              ? `The event stream answered ${contentType ?? "no Content-Type"}, not text/event-stream.`
              : "This fetch cannot read a streamed body.",
          });
        }
        parser.reset();
        opts.onOpen?.(lastId);
        let heard = false;
        const reader = res.body.getReader();
        const decoder = new TextDecoder();
        try {
          for (;;) {
            const { done, value } = await reader.read();
            if (done) break;
            touch();
            if (value.length > 0) heard = true;
            const got = parser.push(decoder.decode(value, { stream: true }));
            if (parser.retryMs !== undefined) retryMs = parser.retryMs;
            if (parser.lastEventId !== "") lastId = parser.lastEventId;
            for (const ev of got) {
              // Another event name is one this client does not know yet: skipped.
              if (ev.event !== "payment") continue;
              let data: PaymentRecord;
              try {
                data = JSON.parse(ev.data) as PaymentRecord;
              } catch {
                continue; // not JSON: nothing to show; the next change of it will be
              }
              yield { id: ev.id, event: "payment", data };
            }
          }
        } catch {
          // Dropped: the network, or idleMs of silence. Reconnected below.
          if (signal?.aborted) return;
        } finally {
          reader.cancel().catch(() => {});
        }
        // The stream ended (a shutdown, a proxy's timeout) or dropped: reconnect after retry:,
        // sooner than a failure's backoff when it had brought something.
        failures = heard ? 0 : failures + 1;
        delay = backoff();
      } finally {
        clearTimeout(idle);
        signal?.removeEventListener("abort", onAbort);
        conn.abort();
      }
    }
  }

  /**
   * One payment's states: its record read each time the event stream (re)opens, merged with the
   * stream's events of it, each yielded once and never an older state after a newer one.
   */
  async function* watchPayment(key: string, opts: WatchOptions = {}): AsyncGenerator<PaymentRecord, void, undefined> {
    const stop = new AbortController();
    const onAbort = () => stop.abort(opts.signal?.reason);
    if (opts.signal?.aborted) return;
    opts.signal?.addEventListener("abort", onAbort, { once: true });
    const ready: PaymentRecord[] = [];
    let latest: PaymentRecord | undefined;
    let failure: { err: unknown } | undefined;
    let ended = false;
    let wake: (() => void) | undefined;
    const signal = () => {
      wake?.();
      wake = undefined;
    };
    const offer = (rec: PaymentRecord) => {
      if (rec.key !== key || (latest && !newer(rec, latest))) return;
      latest = rec;
      ready.push(rec);
      signal();
    };
    const fail = (err: unknown) => {
      if (stop.signal.aborted) return;
      failure ??= { err };
      stop.abort();
      signal();
    };
    const evOpts: EventsOptions = {
      signal: stop.signal,
      // The stream sends changes from now on: the record as it stands is read once it is open.
      onOpen: () => {
        data<PaymentRecord>("GET", `/bff/payments/${seg(key)}`, { signal: stop.signal }).then(offer, fail);
      },
    };
    if (opts.idleTimeoutMs !== undefined) evOpts.idleTimeoutMs = opts.idleTimeoutMs;
    if (opts.maxRetryDelayMs !== undefined) evOpts.maxRetryDelayMs = opts.maxRetryDelayMs;
    const pump = (async () => {
      try {
        for await (const ev of events(evOpts)) offer(ev.data);
      } catch (err) {
        fail(err);
      } finally {
        ended = true;
        signal();
      }
    })();
    try {
      for (;;) {
        const next = ready.shift();
        if (next) {
          yield next;
          continue;
        }
        if (failure) throw failure.err;
        if (ended || opts.signal?.aborted) return;
        await new Promise<void>((resolve) => (wake = resolve));
      }
    } finally {
      opts.signal?.removeEventListener("abort", onAbort);
      stop.abort();
      await pump;
    }
  }

  return {
    mode,
    loginUrl,

    /** Any BFF call: the parsed body with the status, headers and replay flag. */
    request<T = unknown>(method: string, path: string, opts?: RequestOptions): Promise<ApiResponse<T>> {
      return call<T>(method, path, opts);
    },

    /** Yields the pages of any paged list (`{items, nextPage, count}`). */
    pages,

    // ------------------------------------------------------------------ sessions

    /**
     * The current session, or null when there is none (SESSION_REQUIRED, for which
     * onSessionRequired is not called: use it to decide whether to show the login).
     */
    async session(): Promise<Session | null> {
      try {
        return await data<Session>("GET", "/auth/session", { quietSession: true });
      } catch (err) {
        if (isBffError(err) && err.code === "SESSION_REQUIRED") return null;
        throw err;
      }
    },

    /** The caller's user's sessions on every device, oldest first. */
    async sessions(): Promise<SessionInfo[]> {
      return (await data<{ sessions: SessionInfo[] }>("GET", "/auth/sessions")).sessions;
    },

    /** Ends one of the user's sessions, by the `id` of `sessions()`. */
    async revokeSession(id: string): Promise<void> {
      await call("DELETE", `/auth/sessions/${seg(id)}`);
    },

    /**
     * Ends this session. When the BFF answers `X-Logout-Url` (the identity provider's logout
     * page), a browser navigates there unless navigate is false; it is returned either way. A
     * session that had already ended counts as logged out.
     */
    async logout(opts: LogoutOptions = {}): Promise<LogoutResult> {
      let logoutUrl: string | undefined;
      try {
        const res = await call("POST", "/auth/logout", { quietSession: true, retry: false });
        logoutUrl = res.headers.get("X-Logout-Url") ?? undefined;
      } catch (err) {
        if (isBffError(err) && err.code === "SESSION_REQUIRED") return { logoutUrl: undefined };
        throw err;
      }
      const loc = browserLocation();
      if (logoutUrl && loc && opts.navigate !== false) loc.assign(logoutUrl);
      return { logoutUrl };
    },

    /** Ends every session of the user, on every device. */
    async logoutEverywhere(): Promise<void> {
      await call("DELETE", "/auth/sessions");
    },

    /**
     * Development only (`auth.mode: dev`; 404 ROUTE_NOT_FOUND otherwise): a session for userId.
     * Cookie mode gets the cookie; token mode uses the returned `sessionToken`.
     */
    devLogin(userId: string): Promise<DevSession> {
      return data<DevSession>("POST", "/auth/dev/login", { body: { userId }, anonymous: true, retry: false });
    },

    /**
     * Native apps: the URL to open in the system browser to log in (RFC 8252); the BFF then
     * redirects to redirectUri with `code` and `state`, for mobileToken.
     */
    mobileLoginUrl(p: MobileLoginParams): string {
      return buildUrl(baseUrl, "/auth/login", {
        client: "mobile",
        redirect_uri: p.redirectUri,
        code_challenge: p.codeChallenge,
        code_challenge_method: "S256",
        state: p.state,
      });
    },

    /**
     * Native apps: redeems the one-time code of a payment's approval (after `mobileStepUpUrl`),
     * in the session that made the payment: the BFF checks the approval and sends the payment
     * once. Returns the payment's record after that send. Not retried: a code is used once.
     * STEP_UP_DECLINED (403): the approval did not match, and the payment is ended, never sent.
     */
    async stepUpToken(code: string, codeVerifier: string): Promise<PaymentRecord> {
      const res = await data<StepUpApproval>("POST", "/auth/step-up/token", { body: { code, codeVerifier }, retry: false });
      return res.payment;
    },

    /** Native apps: redeems the one-time code for a session token. */
    mobileToken(code: string, codeVerifier: string): Promise<MobileToken> {
      return data<MobileToken>("POST", "/auth/mobile/token", {
        body: { code, codeVerifier },
        anonymous: true,
        retry: false,
      });
    },

    // ------------------------------------------------------------------ payments

    /**
     * Creates a payment (POST /api/v2/payments) with an Idempotency-Key, made here unless given,
     * and kept across retries: a flaky network never pays twice. On PAYMENT_OUTCOME_UNKNOWN, do
     * not create a new payment: repeat later with `err.idempotencyKey`.
     */
    createPayment(body: PaymentCreate, opts?: MoneyOptions): Promise<MoneyResult<PaymentCreated>> {
      return money<PaymentCreated>("/api/v2/payments", body, opts);
    },

    /** Starts the open-banking consent of a payment (POST /api/v2/pay/open-banking-init); money-moving, keyed like createPayment. */
    openBankingInit(body: OpenBankingInit, opts?: MoneyOptions): Promise<MoneyResult<OpenBankingInitReply>> {
      return money<OpenBankingInitReply>("/api/v2/pay/open-banking-init", body, opts);
    },

    payments(query: PaymentQuery = {}): Promise<PaymentPage> {
      return data<PaymentPage>("GET", "/api/v2/payments", { query });
    },
    paymentPages(query: PaymentQuery = {}): AsyncGenerator<Page<Payment>> {
      return pages<Payment>("/api/v2/payments", query);
    },
    payment(id: string): Promise<Payment> {
      return data<Payment>("GET", `/api/v2/payments/${seg(id)}`);
    },
    /** Cancels a payment (DELETE /api/v2/payments/{id}); the answer is the payment, status CANC. */
    cancelPayment(id: string): Promise<Payment> {
      return data<Payment>("DELETE", `/api/v2/payments/${seg(id)}`);
    },

    // ------------------------------------------------------------------ the BFF's payment records

    /**
     * A page of the caller's payments as the BFF records them (GET /bff/payments), newest first,
     * each with its latest known `paymentStatus` (null until known); `limit` 1 to 100 (default
     * 20), `cursor` the previous page's `nextCursor`.
     */
    paymentRecords(query: PaymentRecordQuery = {}): Promise<PaymentRecordPage> {
      return data<PaymentRecordPage>("GET", "/bff/payments", { query });
    },
    /**
     * One of the caller's payments by the Idempotency-Key it was made with (GET
     * /bff/payments/{key}); 404 ROUTE_NOT_FOUND for a key the caller never used.
     */
    paymentRecord(idempotencyKey: string): Promise<PaymentRecord> {
      return data<PaymentRecord>("GET", `/bff/payments/${seg(idempotencyKey)}`);
    },
    /**
     * The signed receipt of one of the caller's finished payments, by its Idempotency-Key (GET
     * /bff/payments/{key}/receipt): the compact JWS as text (`application/jose`), to save as a file
     * or check with `verifyReceipt(jws, await client.receiptKeys())`. It is not checked here.
     * 409 IDEMPOTENCY_IN_PROGRESS (retried like any GET, then thrown) while the BFF does not know
     * the outcome yet, `detail` saying why (being sent, awaiting approval, being settled); 404
     * ROUTE_NOT_FOUND for a key the caller never used; UNEXPECTED_RESPONSE for an answer that is
     * not a JWS (a BFF without receipts serving the app's index.html).
     */
    async paymentReceipt(idempotencyKey: string): Promise<string> {
      const path = `/bff/payments/${seg(idempotencyKey)}/receipt`;
      const res = await call<unknown>("GET", path, { headers: { Accept: "application/jose" } });
      const contentType = res.headers.get("Content-Type");
      if (typeof res.data !== "string" || contentType === null || !/^application\/jose\s*(;|$)/i.test(contentType)) {
        throw new BffError({
          method: "GET", path, status: res.status, code: "UNEXPECTED_RESPONSE", action: "contact_support",
          retryable: false, requestId: res.requestId,
          detail: `The receipt answered ${contentType ?? "no Content-Type"}, not application/jose.`,
        });
      }
      return res.data.trim();
    },
    /**
     * The JWK Set of the keys receipts are signed with (GET /bff/receipts/jwks.json; public, no
     * session needed): every key still published, so older receipts verify too. Save it next to
     * the receipts you keep: a receipt outlives the keys a deployment publishes.
     */
    async receiptKeys(): Promise<ReceiptKeySet> {
      const path = "/bff/receipts/jwks.json";
      const res = await call<unknown>("GET", path, { anonymous: true, quietSession: true });
      const set = res.data as { keys?: unknown } | null | undefined;
      if (typeof set !== "object" || set === null || !Array.isArray(set.keys)) {
        throw new BffError({
          method: "GET", path, status: res.status, code: "UNEXPECTED_RESPONSE", action: "contact_support",
          retryable: false, requestId: res.requestId,
          detail: `The receipt keys answered ${res.headers.get("Content-Type") ?? "no Content-Type"}, not a JWK Set.`,
        });
      }
      return set as ReceiptKeySet;
    },
    /**
     * The caller's payment changes, live (GET /bff/events): `for await (const ev of
     * client.events({signal}))`, `ev.data` the payment's latest state. Read with fetch (token
     * mode sends its Authorization header), it reconnects by itself after a drop or the server's
     * end, after the stream's `retry:` (1 s by default, with jitter, backing off when it keeps
     * failing), sending `Last-Event-ID` so that nothing is missed; 429 and 503 wait their
     * Retry-After. It ends without an error when `signal` aborts or the loop breaks, and throws a
     * BffError on a refusal: SESSION_REQUIRED (after onSessionRequired), VALIDATION_ERROR,
     * FORBIDDEN, or UNEXPECTED_RESPONSE for an answer that is not an event stream.
     */
    events(opts: EventsOptions = {}): AsyncGenerator<PaymentEvent, void, undefined> {
      return events(opts);
    },
    /**
     * One payment, live, by its Idempotency-Key: `for await (const rec of
     * client.watchPayment(key, {signal}))` yields its record as it stands once the event stream
     * is open (and again after a reconnect, when it changed), then each change of it from the
     * stream; never an older state after a newer one. For the page an approval returns to
     * (stepUpReturn), or /payment-done. It ends when signal aborts or the loop breaks, and throws
     * what events() throws, or the record's read failing (ROUTE_NOT_FOUND for a key never used).
     */
    watchPayment(idempotencyKey: string, opts: WatchOptions = {}): AsyncGenerator<PaymentRecord, void, undefined> {
      return watchPayment(idempotencyKey, opts);
    },

    // ------------------------------------------------------------------ connections and data

    connections(query: ConnectionQuery = {}): Promise<ConnectionPage> {
      return data<ConnectionPage>("GET", "/api/v2/connections", { query });
    },
    connectionPages(query: ConnectionQuery = {}): AsyncGenerator<Page<Connection>> {
      return pages<Connection>("/api/v2/connections", query);
    },
    connection(id: string): Promise<Connection> {
      return data<Connection>("GET", `/api/v2/connections/${seg(id)}`);
    },
    /** Starts connecting a bank: send the user to `connectUrl`. Not retried (no key). */
    createConnection(body: ConnectionCreate): Promise<ConnectionCreated> {
      return data<ConnectionCreated>("POST", "/api/v2/connections", { body });
    },
    /** Deletes a connection; 423 RESOURCE_LOCKED while it is younger than 90 minutes. */
    async deleteConnection(id: string): Promise<void> {
      await call("DELETE", `/api/v2/connections/${seg(id)}`);
    },

    accounts(query: AccountQuery = {}): Promise<AccountPage> {
      return data<AccountPage>("GET", "/api/v2/data/accounts", { query });
    },
    accountPages(query: AccountQuery = {}): AsyncGenerator<Page<Account>> {
      return pages<Account>("/api/v2/data/accounts", query);
    },
    account(id: string): Promise<Account> {
      return data<Account>("GET", `/api/v2/data/accounts/${seg(id)}`);
    },

    transactions(query: TransactionQuery = {}): Promise<TransactionPage> {
      return data<TransactionPage>("GET", "/api/v2/data/transactions", { query });
    },
    /** Every page of transactions: `for await (const page of client.transactionPages({limit: 500}))`. */
    transactionPages(query: TransactionQuery = {}, opts?: { signal?: AbortSignal }): AsyncGenerator<Page<Transaction>> {
      return pages<Transaction>("/api/v2/data/transactions", query, opts);
    },
    /** One transaction by its `SK` (not its `id`); the SK is percent-encoded here. */
    transaction(sk: string): Promise<Transaction> {
      return data<Transaction>("GET", `/api/v2/data/transactions/${seg(sk)}`);
    },
    updateTransaction(sk: string, patch: TransactionPatch): Promise<Transaction> {
      return data<Transaction>("PATCH", `/api/v2/data/transactions/${seg(sk)}`, { body: patch });
    },
    categories(): Promise<TransactionCategory[]> {
      return data<TransactionCategory[]>("GET", "/api/v2/data/transaction-categories");
    },
    providers(query: ProviderQuery = {}): Promise<Provider[]> {
      return data<Provider[]>("GET", "/api/v2/providers", { query });
    },
    /**
     * The on-demand refresh (20 credits). Not retried: REFRESH_TOO_SOON, INSUFFICIENT_CREDITS
     * and NO_REFRESHABLE_CONNECTIONS are answers to show.
     */
    refresh(): Promise<RefreshReply> {
      return data<RefreshReply>("POST", "/api/chat/chat/connections/refresh", { retry: false });
    },
  };
}

/** A client made by createClient. */
export type BffClient = ReturnType<typeof createClient>;
