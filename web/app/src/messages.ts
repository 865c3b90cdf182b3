// Every sentence the example apps (web/app and web/react-app) show a user about an answer of
// the BFF, in one table a team can translate: copy this file, translate the strings on the
// right, keep the keys on the left. The keys are the `code` of an error (docs/errors.md,
// "Codes"), its `action` for a code the table does not know (the BFF passes on new codes of the
// upstream), and the statuses of payments and connections. Raw codes, upstream text and
// validation messages of the upstream are never shown: a user gets these sentences, and the
// requestId in small print for support.
import type { BffError, ProblemAction } from "../../client/src/index.ts";

/** The locale of the dates, amounts and numbers (format.ts); undefined: the browser's. */
export const locale: string | undefined = "en-IL";

/** What a user reads for an error, by its `code`. `{name}` is filled in by `say`. */
export const errorMessages: Record<string, string> = {
  // The client's own, when the BFF gave no answer.
  NETWORK_ERROR: "We could not reach the service. Check your connection and try again.",
  CLIENT_TIMEOUT: "This is taking too long. The bank may be busy: try again in a moment.",
  UNEXPECTED_RESPONSE: "Something went wrong on our side. Try again in a moment.",
  // Upstream and BFF availability.
  UPSTREAM_TIMEOUT: "The bank took too long to answer. Try again in a moment.",
  UPSTREAM_UNAVAILABLE: "The bank is not available right now. Try again in a moment.",
  UPSTREAM_UNREACHABLE: "We could not reach the bank. Try again in a moment.",
  UPSTREAM_ERROR: "The bank had a problem with this request. Try again in a moment.",
  MCP_TEMPORARILY_UNAVAILABLE: "The service is busy. Try again in a moment.",
  PROVIDER_UNAVAILABLE: "This bank is not available right now. Try again later or choose another bank.",
  SESSION_STORE_UNAVAILABLE: "We cannot check your sign-in right now. Try again in a moment.",
  LEDGER_UNAVAILABLE: "Payments are paused for a moment. Try again shortly: nothing was paid.",
  RATE_LIMITED: "Too many requests at once. Wait a few seconds and try again.",
  IDEMPOTENCY_IN_PROGRESS: "This payment is still being sent. Wait a moment before trying again.",
  // Requests the user can fix.
  VALIDATION_ERROR: "Some details were not accepted. Check the marked fields.",
  CLIENT_ERROR: "Some details were not accepted. Check them and try again.",
  BAD_REQUEST: "Some details were not accepted. Check them and try again.",
  NOT_FOUND: "We could not find that. It may have been removed.",
  // Sign-in.
  SESSION_REQUIRED: "Please sign in again.",
  LOGIN_FAILED: "Signing in did not work. Please try again.",
  // Credits, plans and banks.
  REFRESH_TOO_SOON: "Your data was refreshed a moment ago. You can refresh again in {seconds} seconds.",
  INSUFFICIENT_CREDITS: "Not enough credits to refresh now ({balance} left, {cost} needed). Try again later.",
  NO_REFRESHABLE_CONNECTIONS: "None of your banks can be refreshed. Connect a bank again first.",
  NOT_AVAILABLE_ON_PLAN: "Your plan does not include this. Upgrade your plan to use it.",
  ACCOUNT_LIMIT_REACHED: "You have reached the number of banks you can connect. Contact support to add more.",
  RESOURCE_LOCKED: "This cannot be changed yet. Try again in a little while.",
  // Payments.
  PAYMENT_OUTCOME_UNKNOWN: "We do not know yet whether this payment went through. Check your payments before paying again.",
  IDEMPOTENCY_KEY_REUSED: "This payment was already sent with other details. Start a new payment.",
  STEP_UP_REQUIRED: "This payment needs your approval before it is sent.",
  STEP_UP_DECLINED: "This payment was not approved, so it was not sent. Start a new payment to pay.",
};

/** What a user reads for an error whose code is not in errorMessages, by its `action`. */
export const actionMessages: Record<ProblemAction, string> = {
  retry_later: "Something went wrong for a moment. Try again shortly.",
  fix_request: "Something in this request was not accepted. Check it and try again.",
  login: "Please sign in again.",
  wait_for_credits: "Not enough credits right now. Try again later.",
  upgrade_plan: "Your plan does not include this.",
  contact_support: "Something went wrong. If it happens again, contact support with the reference below.",
  reconnect_bank: "Your bank connection needs to be renewed: connect the bank again.",
  check_status: "We do not know yet whether this went through. Check its status before trying again.",
  step_up: "This needs your approval first.",
  none: "Something went wrong.",
};

/** Plain words for a validation error at a field the app knows, by the field's name. */
export const fieldMessages: Record<string, string> = {
  amount: "Enter an amount, such as 12.50.",
  currency: "Enter a currency, such as ILS.",
  iban: "Enter the IBAN of the account to pay, such as IL62 0108 0000 0009 9999 999.",
  payee: "Enter the name of the person or business you pay.",
  remittance: "Enter a short description of the payment.",
  provider: "Choose a bank.",
  userId: "Enter a user id.",
};

/** The words for the rest of the pages' answers: a Retry, a reference, waiting. */
export const ui = {
  retry: "Try again",
  reference: "Reference for support: {requestId}",
  stillTrying: "Still trying… the bank is slow to answer.",
  loading: "Loading…",
  fieldHelp: "Check this field.",
  refreshAccepted: "Your data is being refreshed: new transactions appear in a few minutes.",
  refreshRunning: "A refresh is already running.",
  notLive: "These statuses are no longer updated: reload the page to see the latest.",
};

/**
 * A payment's status at the bank in words, by its ISO 20022 code; undefined for one not listed.
 * The bank's first statuses (INIT, RCVD, PDNG) come once the app has sent the payment, after an
 * approval in the app too: they say the bank has it (INIT: and waits for the user's confirmation
 * there), never "waiting for approval" as if an approval already given did not count.
 */
export const paymentStatus: Record<string, string> = {
  ACSC: "Paid", ACCC: "Paid", ACSP: "Being paid", ACTC: "Accepted", ACWC: "Accepted", ACFC: "Accepted",
  PATC: "Accepted", ACCP: "Accepted", PDNG: "Being processed by the bank", PENDING: "Being processed by the bank",
  RCVD: "Received by the bank", INIT: "Received by the bank, to be confirmed there", PART: "Partly paid",
  RJCT: "Rejected by the bank", CANC: "Cancelled", ERROR: "Failed at the bank",
};

/**
 * What became of a payment request the BFF recorded (`PaymentRecord`, GET /bff/payments), in
 * words: records.ts picks them from its `state` and `status`.
 */
export const recordWords = {
  /** in_flight: sent or being sent, no answer yet. */
  sending: "Sending",
  /** done with a 2xx: the bank took the request; the payment's status, which may still be a
   * rejection, is the bank's and follows in its own column. */
  sent: "Sent to the bank",
  /** done with any other status: the bank refused the request (why: refusedMessages). */
  notAccepted: "Not accepted",
  /** unknown: whether the bank acted is not known; the BFF keeps checking. */
  outcomeUnknown: "Outcome unknown",
  beingChecked: "Being checked: do not pay again yet",
  /** A sent payment whose status the BFF has not read from the bank yet. */
  statusNotKnown: "Not known yet",
  /** awaiting_approval: held for the user's approval (payments.step_up), not sent. */
  awaitingApproval: "Waiting for your approval",
  notSentYet: "Not sent yet",
  /** declined: held and never approved; never sent (why: declinedMessages). */
  declined: "Not sent",
  /** A state this app does not know (one the BFF added later). */
  other: "Unknown",
};

/** Why a payment held for the user's approval was not sent, by the record's `declined`. */
export const declinedMessages: Record<string, string> = {
  denied: "The approval was cancelled.",
  mismatch: "The approval did not match this payment.",
  expired: "It was not approved in time.",
  withdrawn: "Payments no longer wait for an approval here: start it again.",
};

/** Why a held payment was not sent, for a reason declinedMessages does not list. */
export const declinedOther = "It was not approved.";

/**
 * The words of a payment's signed receipt (receipt.ts): **Download receipt** on a payment whose
 * outcome is known, what the app says once it verified the receipt, and the facts it states.
 */
export const receiptWords = {
  download: "Download receipt",
  downloading: "Downloading and checking the receipt…",
  verified: "Verified receipt: signed by {iss}, key {kid}",
  saved: "Saved as {file}.",
  /** 409 IDEMPOTENCY_IN_PROGRESS: the BFF does not know the payment's outcome yet. */
  notYet: "This payment's outcome is not known yet, so there is no receipt for it. Try again once it is.",
  /** verifyReceipt refused it: the file is not saved. */
  notVerified: "This receipt could not be verified, so it was not saved. Do not rely on it.",
  amount: "Amount",
  payee: "Payee",
  status: "Status",
  paymentId: "Payment id",
};

/** The words of a payment the BFF holds for the user's approval (payments.step_up). */
export const approvalWords = {
  needed: "This payment needs your approval",
  explain: "Nothing has been sent yet. Approve it with your sign-in provider, which shows you the amount and the payee; it is then sent once.",
  until: "Approve it before {time}, or it is cancelled.",
  approve: "Approve the payment",
  startOver: "Start a new payment instead",
  checking: "Checking the payment…",
  approved: "Payment approved and sent to your bank",
  /** The bank's status of an approved payment that was sent (paymentStatus's words). */
  atBank: "At your bank: {status}",
  approvedRefused: "Payment approved, but the bank did not accept it",
  approvedUnknown: "Payment approved: we are checking whether it went through",
  continueAtBank: "Continue to your bank",
  continueHint: "Your bank asks you to confirm the payment.",
  declined: "Payment not sent",
  declinedNext: "Nothing was paid. To pay, start a new payment.",
  failed: "The approval did not complete",
  failedNext: "Nothing has been sent.",
  tryAgain: "Try approving again",
  none: "This page was opened without a payment approval.",
};

/**
 * Why the bank refused a payment request, by the HTTP status the BFF answered it with (a record
 * keeps no code). A 403 reads as NOT_AVAILABLE_ON_PLAN's sentence, the one the pay page showed for
 * it: the plan's refusal is the 403 a payment meets (docs/errors.md; FORBIDDEN, a 403 with no
 * type, is a gateway's or a policy's).
 */
export const refusedMessages: Record<number, string> = {
  400: "Some details were not accepted.",
  402: "Not enough credits.",
  403: errorMessages.NOT_AVAILABLE_ON_PLAN!,
  404: "The bank could not find what it refers to.",
  409: "It conflicted with another request.",
  422: "Some details were not accepted.",
  429: "Too many requests at the bank.",
};

/** Why the bank refused a request, for a status refusedMessages does not list. */
export const refusedOther = "The bank did not accept it.";

/** A connection's status in words. */
export const connectionStatus: Record<string, string> = {
  ACTIVE: "Connected", PENDING: "Waiting for approval", EXPIRED: "Expired: connect again",
  ERROR: "Not working: connect again", REVOKED: "Disconnected", INACTIVE: "Not active",
};

/** A session's sign-in method in words. */
export const sessionMethod: Record<string, string> = {
  dev: "Development sign-in", oidc: "Identity provider", mobile: "Mobile app",
};

/** template with each `{name}` replaced by vars[name] ("?" when absent). */
export function fill(template: string, vars: Record<string, string | number | undefined> = {}): string {
  return template.replace(/\{(\w+)\}/g, (_, k: string) => String(vars[k] ?? "?"));
}

/** The sentence for err: its code's, else its action's; never the code or the upstream's text. */
export function say(err: BffError): string {
  const t = errorMessages[err.code] ?? actionMessages[err.action] ?? actionMessages.none;
  return fill(t, { seconds: err.retryAfterSeconds, cost: err.cost, balance: err.balance });
}

/** Whether the answer says to try again: the place for a Retry button. */
export function offersRetry(err: BffError): boolean {
  return err.action === "retry_later";
}

/** A status in words from table, or a neutral word for one it does not know. */
export function statusWords(table: Record<string, string>, status: string | undefined): string {
  return (status && table[status]) || "Unknown";
}
