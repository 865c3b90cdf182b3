// Payments the user approves (step-up, RFC 9470 and RFC 9396; docs/payments.md, "Payments the
// user approves"): a payment the BFF holds answers 401 STEP_UP_REQUIRED (a StepUpRequired) with
// its stepUpUrl. These helpers send the user there and read where the approval came back to.
import type { MobileLoginParams } from "./client.js";

/** Anything that names a held payment's approval: a StepUpRequired, or a PaymentRecord `awaiting_approval`. */
export interface StepUpTarget {
  stepUpUrl?: string | undefined;
}

export interface StepUpOptions {
  /**
   * Where the browser comes back after the approval: a same-origin relative path of the app
   * (`/payment-approval?key=…`), as for the login. The BFF adds `stepUp` (and, approved,
   * `payment`) to its query.
   */
  returnTo: string;
}

/** How an approval ended, as the BFF's redirect back says (`stepUp=`). */
export type StepUpOutcome = "approved" | "declined" | "failed";

/** What the page the approval came back to reads from its query (stepUpReturn). */
export interface StepUpReturn {
  /**
   * `approved`: the payment was sent, once; read its record (`paymentRecord(idempotencyKey)`)
   * or follow it (`watchPayment`). `declined`: it was not approved (cancelled, a mismatch, too
   * late) and never sent; to pay, start again with a new key. `failed`: the approval did not
   * complete; the payment may still wait for one (its record says `awaiting_approval`, with a
   * `stepUpUrl` to try again). An outcome this client does not know reads `failed`.
   */
  outcome: StepUpOutcome;
  /** `approved`: the payment's Idempotency-Key (`payment=`); otherwise absent. */
  idempotencyKey: string | undefined;
}

function held(from: StepUpTarget): string {
  const url = from.stepUpUrl;
  if (typeof url !== "string" || url === "") {
    throw new TypeError("no stepUpUrl: this payment does not wait for an approval");
  }
  // The BFF's own URL, absolute on its public URL: never a javascript: or data: URL to navigate to.
  if (!/^https?:\/\//i.test(url) && !(url.startsWith("/") && !url.startsWith("//"))) {
    throw new TypeError(`stepUpUrl is not an http(s) URL: ${url}`);
  }
  return url;
}

function withQuery(url: string, params: Record<string, string | undefined>): string {
  const q = new URLSearchParams();
  for (const [k, v] of Object.entries(params)) if (v !== undefined) q.append(k, v);
  const s = q.toString();
  return s === "" ? url : url + (url.includes("?") ? "&" : "?") + s;
}

/** Whether p is a same-origin relative path, as the BFF takes `returnTo`. */
function relativePath(p: string): boolean {
  // eslint-disable-next-line no-control-regex
  return p.startsWith("/") && !p.startsWith("//") && !p.startsWith("/\\") && !/[\\\u0000-\u001f\u007f]/.test(p);
}

/**
 * The URL that starts the approval in a browser: `stepUpUrl` with `returnTo`. The browser must
 * carry the session that made the payment (cookie mode, the same site).
 */
export function stepUpUrl(from: StepUpTarget, opts: StepUpOptions): string {
  const url = held(from);
  if (!relativePath(opts.returnTo)) {
    throw new TypeError(`returnTo must be a same-origin relative path such as "/payments": ${opts.returnTo}`);
  }
  return withQuery(url, { returnTo: opts.returnTo });
}

/**
 * Sends the browser to approve a held payment: `location.assign(stepUpUrl(from, opts))`, a
 * full-page navigation (not fetch). Returns the URL. The approval comes back to `returnTo`;
 * read it there with stepUpReturn(). Throws outside a browser (use mobileStepUpUrl).
 */
export function startStepUp(from: StepUpTarget, opts: StepUpOptions): string {
  const url = stepUpUrl(from, opts);
  const loc = (globalThis as { location?: { assign?: (url: string) => void } }).location;
  if (typeof loc?.assign !== "function") {
    throw new Error("startStepUp needs a browser's location: a native app opens mobileStepUpUrl() in the system browser");
  }
  loc.assign(url);
  return url;
}

/**
 * Native apps: the URL to open in the system browser to approve a held payment (RFC 8252, as
 * for the login; no session is needed in the browser). The BFF then redirects to redirectUri
 * with `code` and `state` (or `error=access_denied` and `state` when the user cancelled: the
 * payment is declined); redeem the code with `stepUpToken(code, verifier)` in the session that
 * made the payment.
 */
export function mobileStepUpUrl(from: StepUpTarget, p: MobileLoginParams): string {
  return withQuery(held(from), {
    client: "mobile",
    redirect_uri: p.redirectUri,
    code_challenge: p.codeChallenge,
    code_challenge_method: "S256",
    state: p.state,
  });
}

const outcomes: ReadonlySet<string> = new Set<StepUpOutcome>(["approved", "declined", "failed"]);

/**
 * Reads the approval's outcome from the query of the page it came back to (`stepUp=`, and
 * `payment=` when approved): undefined when the query has no `stepUp`. search defaults to
 * `location.search`.
 */
export function stepUpReturn(search?: string): StepUpReturn | undefined {
  const s = search ?? (globalThis as { location?: { search?: string } }).location?.search ?? "";
  const q = new URLSearchParams(s);
  const got = q.get("stepUp");
  if (got === null) return undefined;
  const outcome = (outcomes.has(got) ? got : "failed") as StepUpOutcome;
  const key = q.get("payment");
  return { outcome, idempotencyKey: outcome === "approved" && key ? key : undefined };
}
