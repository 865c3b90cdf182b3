// A payment the BFF holds for the user's approval (payments.step_up), in both example apps:
// where the approval comes back to, and the request kept to repeat after it. After its approval
// the payment is sent once; repeating the same request with the same key gets its stored answer
// (201, Idempotent-Replayed) with the bank's payUrl, never a second payment. The request waits in
// this tab's sessionStorage until then; without it (another tab, storage off) the page that the
// approval comes back to still shows the payment's status.
import type { PaymentCreate } from "../../client/src/index.ts";

/** The app's page an approval comes back to, with the payment's key of its own (kept whatever the outcome). */
export function approvalReturn(key: string): string {
  return "/step-up-done?key=" + encodeURIComponent(key);
}

const heldName = (key: string) => "bff-example:held-payment:" + key;

/** Keeps the request of a held payment, by its key, until it is repeated. */
export function keepHeld(key: string, body: PaymentCreate): void {
  try {
    sessionStorage.setItem(heldName(key), JSON.stringify(body));
  } catch {
    // Storage is off: no "Continue to your bank" after the approval.
  }
}

/** The request kept for key, if this tab kept one. */
export function heldBody(key: string): PaymentCreate | undefined {
  try {
    const v = sessionStorage.getItem(heldName(key));
    return v ? (JSON.parse(v) as PaymentCreate) : undefined;
  } catch {
    return undefined;
  }
}

/** Forgets the request kept for key (repeated, or the payment was declined). */
export function dropHeld(key: string): void {
  try {
    sessionStorage.removeItem(heldName(key));
  } catch {
    // Nothing kept.
  }
}
