// A payment's signed receipt, as both example apps offer it (Download receipt): the BFF's
// statement of what its ledger knows of one finished payment (GET /bff/payments/{key}/receipt, a
// compact JWS), verified here, in the browser, against the keys the BFF publishes
// (GET /bff/receipts/jwks.json) before it is shown or saved as a file. Used by web/react-app too.
import { isBffError, isReceiptError, ReceiptError, verifyReceipt } from "../../client/src/index.ts";
import type { BffClient, PaymentRecord, Receipt } from "../../client/src/index.ts";
import { formatMoney } from "./format.ts";
import { receiptWords } from "./messages.ts";
import { describeRecord } from "./records.ts";

/** Whether a record's payment has a receipt: its outcome is known (done, or declined: never sent). */
export function hasReceipt(rec: Pick<PaymentRecord, "state">): boolean {
  return rec.state === "done" || rec.state === "declined";
}

/** A receipt that verified and was saved: its document, the signing key's kid, the file's name. */
export interface SavedReceipt {
  receipt: Receipt;
  kid: string;
  file: string;
}

/**
 * Downloads the receipt of the payment made with this Idempotency-Key, verifies it against the
 * BFF's published keys, and saves it as `payment-receipt-<key>.jws`. One that does not verify, or
 * is another payment's, is not saved: a ReceiptError. A 409 (the outcome not known yet) and any
 * other failure of the client are its BffError.
 */
export async function downloadReceipt(bff: BffClient, key: string): Promise<SavedReceipt> {
  const [jws, keys] = await Promise.all([bff.paymentReceipt(key), bff.receiptKeys()]);
  const { receipt, kid } = await verifyReceipt(jws, keys);
  if (receipt.key !== key) throw new ReceiptError("document", "it is the receipt of another payment", { kid });
  const file = `payment-receipt-${key.replace(/[^\w.-]/g, "_")}.jws`;
  saveFile(jws, file, "application/jose");
  return { receipt, kid, file };
}

/** Saves text as a file the browser downloads: a Blob, and a click on an `<a download>`. */
function saveFile(text: string, file: string, type: string): void {
  const url = URL.createObjectURL(new Blob([text], { type }));
  const a = document.createElement("a");
  a.href = url;
  a.download = file;
  a.hidden = true;
  document.body.append(a);
  a.click();
  a.remove();
  // The download has its own copy once it starts.
  setTimeout(() => URL.revokeObjectURL(url), 60_000);
}

/**
 * Why a download failed, when the app says something of its own: `not_yet` for the 409 of a
 * payment whose outcome is not known yet (receiptWords.notYet), `not_verified` for a receipt that
 * did not verify (receiptWords.notVerified); undefined: the app's usual error display.
 */
export function receiptProblem(err: unknown): "not_yet" | "not_verified" | undefined {
  if (isBffError(err) && err.status === 409) return "not_yet";
  if (isReceiptError(err)) return "not_verified";
  return undefined;
}

/** A receipt's key facts, in words, in the order shown: amount, payee, status, payment id. */
export function receiptFacts(r: Receipt): { label: string; value: string }[] {
  const words = describeRecord(r);
  const payee = [r.payee?.name, r.payee?.account, r.payee?.merchantId].filter(Boolean).join(" · ");
  return [
    { label: receiptWords.amount, value: r.amount ? formatMoney({ amount: r.amount.text, currency: r.amount.currency }) : "" },
    { label: receiptWords.payee, value: payee },
    { label: receiptWords.status, value: `${words.request}: ${words.status}` },
    { label: receiptWords.paymentId, value: r.paymentId ?? "" },
  ].filter((f) => f.value !== "");
}
