// Compile-time checks of the public types (tsc fails when they break), with a trivial run.
import { test } from "node:test";
import assert from "node:assert/strict";
import type { BffError, BffErrorCode, PaymentCreate, ProblemAction, ProblemCode, TransactionQuery } from "../src/index.js";

test("the public types accept what they should and refuse what they should not", () => {
  const known: ProblemCode = "PAYMENT_OUTCOME_UNKNOWN";
  const client: BffErrorCode = "NETWORK_ERROR";
  const upstream: BffErrorCode = "SOME_NEW_UPSTREAM_TYPE"; // passed-on codes are strings too
  // @ts-expect-error: not a code of the document
  const wrong: ProblemCode = "PAYMENT_FAILED";
  // @ts-expect-error: not an action
  const badAction: ProblemAction = "retry";
  const q: TransactionQuery = { accountId: "A", limit: 500, dateFrom: "2026-01-01" };
  const p: PaymentCreate = { paymentInformation: { amount: 1, currency: "ILS" }, providerIds: ["x"] };
  // @ts-expect-error: a request is exact (the upstream would ignore the misspelt member)
  const misspelt: PaymentCreate = { paymentInformation: {}, redirectURL: "https://app.test/" };
  const handle = (e: BffError): string => {
    if (e.is("INSUFFICIENT_CREDITS")) return `${e.cost ?? "?"}`;
    switch (e.action) {
      case "login": case "fix_request": case "retry_later": case "wait_for_credits": case "upgrade_plan":
      case "contact_support": case "reconnect_bank": case "check_status": case "none":
        return e.action;
      default: {
        const never: never = e.action; // every action is handled
        return never;
      }
    }
  };
  assert.ok(known && client && upstream && wrong && badAction && q && p && misspelt && handle);
});
