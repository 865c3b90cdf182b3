// What a payment record of the BFF (GET /bff/payments, and each event of GET /bff/events) says
// to a user, in one place both example apps use: what became of the request, and the payment's
// status or why there is none. A request the bank refused is never "sent".
import type { PaymentRecord } from "../../client/src/index.ts";
import { paymentStatus, recordWords, refusedMessages, refusedOther, statusWords } from "./messages.ts";

/** A record in words: the request's fate, and the payment's status or why there is none. */
export interface RecordWords {
  request: string;
  status: string;
}

/**
 * Reads a record: `in_flight` is sending; `done` with a 2xx is sent, with the payment's status
 * as the bank last gave it; `done` with any other status is not accepted, with why; `unknown`
 * is an outcome not known yet, which the BFF keeps checking (do not pay again).
 */
export function describeRecord(rec: PaymentRecord): RecordWords {
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
    default:
      return { request: recordWords.other, status: known ?? recordWords.statusNotKnown };
  }
}
