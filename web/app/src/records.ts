// What a payment record of the BFF (GET /bff/payments, and each event of GET /bff/events) says
// to a user, in one place both example apps use: what became of the request, and the payment's
// status or why there is none. A request the bank refused is never "sent".
import type { PaymentRecord, StepUpOutcome } from "../../client/src/index.ts";
import {
  approvalWords, declinedMessages, declinedOther, fill, paymentStatus, recordWords, refusedMessages, refusedOther, statusWords,
} from "./messages.ts";

/** A record in words: the request's fate, and the payment's status or why there is none. */
export interface RecordWords {
  request: string;
  status: string;
}

/**
 * What describeRecord reads of a record: its state, the status answered, why it was declined and
 * the bank's status. A receipt's document (receipt.ts) states the same.
 */
export interface RecordOutcome {
  state: string;
  status?: number | undefined;
  declined?: string | undefined;
  paymentStatus?: string | null | undefined;
}

/** Why a declined record was not sent. */
function declinedWhy(rec: RecordOutcome): string {
  return (rec.declined && declinedMessages[rec.declined]) || declinedOther;
}

/**
 * Whether a is a later state of a payment than b (an event, or a read, of the same payment): a
 * later updatedAt, compared as times (the BFF writes up to nine decimals, and "…08.5Z" sorts
 * before "…08Z" as a string), or the same time with something else changed.
 */
export function isNewer(a: PaymentRecord, b: PaymentRecord): boolean {
  const ta = Date.parse(a.updatedAt);
  const tb = Date.parse(b.updatedAt);
  if (!Number.isNaN(ta) && !Number.isNaN(tb) && ta !== tb) return ta > tb;
  return a.updatedAt !== b.updatedAt || a.state !== b.state || a.status !== b.status ||
    a.paymentId !== b.paymentId || a.paymentStatus !== b.paymentStatus;
}

const badStatuses = new Set(["RJCT", "CANC", "ERROR"]);

/** The statuses after which a payment does not change (the BFF stops following it). */
const finalStatuses = new Set(["ACSC", "ACCC", "RJCT", "CANC", "ERROR"]);

/**
 * Whether a payment shown with status `shown` moves to `status`, which came later (an event, or
 * a read when the event stream opened): a final status is not undone by an older state of the
 * payment arriving late.
 */
export function statusMoves(shown: string, status: string): boolean {
  return status !== shown && !(finalStatuses.has(shown) && !finalStatuses.has(status));
}

/**
 * What the page an approval came back to shows (both apps): which view (its element id is
 * `step-up-<view>`), its words and tone, and what it offers. The record, once read, wins over
 * the redirect's outcome: it is the BFF's word now (approved in another tab, declined since).
 */
export interface ApprovalView {
  view: "approved" | "declined" | "failed" | "checking" | "none";
  tone: "ok" | "error" | "pending";
  title: string;
  detail: string;
  /** awaiting_approval with a stepUpUrl: offer to approve again. */
  canApprove: boolean;
  /** Sent and taken by the bank, which still waits for the user's consent (payUrl). */
  canContinue: boolean;
}

export function describeApproval(outcome: StepUpOutcome | undefined, rec: PaymentRecord | undefined): ApprovalView {
  const view = (v: ApprovalView["view"], tone: ApprovalView["tone"], title: string, detail: string, more: Partial<ApprovalView> = {}): ApprovalView =>
    ({ view: v, tone, title, detail, canApprove: false, canContinue: false, ...more });
  if (rec?.state === "declined") return view("declined", "error", approvalWords.declined, `${declinedWhy(rec)} ${approvalWords.declinedNext}`);
  if (rec?.state === "awaiting_approval") {
    return view("failed", "error", approvalWords.failed, approvalWords.failedNext, { canApprove: !!rec.stepUpUrl });
  }
  if (rec) {
    const words = describeRecord(rec);
    const detail = `${words.request}: ${words.status}`;
    if (rec.state === "done" && rec.status !== undefined && (rec.status < 200 || rec.status >= 300)) {
      return view("approved", "error", approvalWords.approvedRefused, detail);
    }
    if (rec.state === "done") {
      const consent = rec.paymentStatus === null || rec.paymentStatus === "INIT";
      const tone = rec.paymentStatus && badStatuses.has(rec.paymentStatus) ? "error" : consent ? "pending" : "ok";
      // The title says it was sent: the detail is the bank's status alone, not "Sent" again.
      return view("approved", tone, approvalWords.approved, fill(approvalWords.atBank, { status: words.status }), { canContinue: consent });
    }
    return view("approved", "pending", approvalWords.approvedUnknown, detail);
  }
  switch (outcome) {
    case "approved": return view("checking", "pending", approvalWords.checking, "");
    case "declined": return view("declined", "error", approvalWords.declined, approvalWords.declinedNext);
    case "failed": return view("failed", "error", approvalWords.failed, approvalWords.failedNext);
  }
  return view("none", "error", approvalWords.none, "");
}

/**
 * Reads a record: `in_flight` is sending; `done` with a 2xx is sent, with the payment's status
 * as the bank last gave it; `done` with any other status is not accepted, with why; `unknown`
 * is an outcome not known yet, which the BFF keeps checking (do not pay again). A receipt's
 * document reads the same.
 */
export function describeRecord(rec: RecordOutcome): RecordWords {
  const known = rec.paymentStatus ? statusWords(paymentStatus, rec.paymentStatus) : undefined;
  switch (rec.state) {
    case "in_flight":
      return { request: recordWords.sending, status: known ?? recordWords.statusNotKnown };
    case "done":
      if (rec.status !== undefined && rec.status >= 200 && rec.status < 300) {
        return { request: recordWords.sent, status: known ?? recordWords.statusNotKnown };
      }
      return {
        request: recordWords.notAccepted,
        status: (rec.status !== undefined && refusedMessages[rec.status]) || refusedOther,
      };
    case "unknown":
      return { request: recordWords.outcomeUnknown, status: known ?? recordWords.beingChecked };
    case "awaiting_approval":
      return { request: recordWords.awaitingApproval, status: recordWords.notSentYet };
    case "declined":
      return { request: recordWords.declined, status: declinedWhy(rec) };
    default:
      return { request: recordWords.other, status: known ?? recordWords.statusNotKnown };
  }
}
