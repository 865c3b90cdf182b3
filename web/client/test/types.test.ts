// Compile-time checks of the public types (tsc fails when they break), with a trivial run.
import { test } from "node:test";
import assert from "node:assert/strict";
import { createClient } from "../src/index.js";
import type {
  BffError, BffErrorCode, IbanAccount, MerchantInput, OpenBankingInit, PaymentAmount, PaymentCreate, ProblemAction, ProblemCode,
  TransactionQuery,
} from "../src/index.js";

test("the public types accept what they should and refuse what they should not", () => {
  const known: ProblemCode = "PAYMENT_OUTCOME_UNKNOWN";
  const client: BffErrorCode = "NETWORK_ERROR";
  const upstream: BffErrorCode = "SOME_NEW_UPSTREAM_TYPE"; // passed-on codes are strings too
  // @ts-expect-error: not a code of the document
  const wrong: ProblemCode = "PAYMENT_FAILED";
  // @ts-expect-error: not an action
  const badAction: ProblemAction = "retry";
  const q: TransactionQuery = { accountId: "A", limit: 500, dateFrom: "2026-01-01" };
  const p: PaymentCreate = { paymentInformation: { amount: 1, currency: "ILS", merchantId: "m1" }, providerIds: ["x"] };
  const both: PaymentCreate = {
    paymentInformation: { amount: "1.50", currency: "ILS", merchantId: "m1", creditorAccount: { iban: "IL62" } },
  };
  const init: OpenBankingInit = { providerId: "demobank-sandbox", paymentId: "01K" };
  // The BFF's payment model: an amount is a number or a decimal string, a currency a string, an
  // account its IBAN; a creation may name one providerId; an init starts a payment or creates one.
  const amounts: PaymentAmount[] = [10.5, "10.50", 1500, "1500"];
  const account: IbanAccount = { iban: "DE89370400440532013000" };
  const one: PaymentCreate = { paymentInformation: { amount: amounts[1]!, currency: "EUR", creditorAccount: account }, providerId: "x" };
  const initNew: OpenBankingInit = { providerId: "demobank-sandbox", paymentInformation: one.paymentInformation };
  // @ts-expect-error: an init names an existing payment or describes a new one, never both
  const initBoth: OpenBankingInit = { providerId: "demobank-sandbox", paymentId: "01K", paymentInformation: one.paymentInformation };
  // @ts-expect-error: a creation always creates: it names no paymentId
  const createNamed: PaymentCreate = { paymentInformation: one.paymentInformation, paymentId: "01K" };
  // @ts-expect-error: an account is its IBAN, nothing else
  const withBic: IbanAccount = { iban: "DE89370400440532013000", bic: "COBADEFFXXX" };
  // @ts-expect-error: an amount is a number or a string
  const noAmount: PaymentAmount = null;
  // @ts-expect-error: a request is exact (the upstream would ignore the misspelt member)
  const misspelt: PaymentCreate = { paymentInformation: p.paymentInformation, redirectURL: "https://app.test/" };
  // What the upstream refuses (400 VALIDATION_ERROR) does not compile: a payment needs amount,
  // currency, and a merchant or a creditor account; open-banking-init a payment or its information.
  const bff = createClient({ mode: "token", getToken: () => "t" }); // never called: compiled only
  // @ts-expect-error: amount and currency are required
  const empty = () => bff.createPayment({ paymentInformation: {} });
  // @ts-expect-error: currency is required
  const noCurrency = () => bff.createPayment({ paymentInformation: { amount: 1, merchantId: "m1" } });
  // @ts-expect-error: neither merchantId nor creditorAccount
  const nobodyPaid = () => bff.createPayment({ paymentInformation: { amount: 1, currency: "ILS", creditorName: "Dana" } });
  // @ts-expect-error: neither paymentId nor paymentInformation
  const initOfNothing: OpenBankingInit = { providerId: "demobank-sandbox" };
  // A merchant's body is the BFF's merchant model (read once under payments.step_up): a name,
  // and an account and a website, nothing else.
  const merchant: MerchantInput = { name: "Landlord GmbH", iban: "DE89370400440532013000" };
  // @ts-expect-error: name is required
  const unnamed: MerchantInput = { iban: "DE89370400440532013000" };
  // @ts-expect-error: a member the model does not have (400 VALIDATION_ERROR under step-up)
  const withBicMerchant: MerchantInput = { name: "Landlord GmbH", bic: "COBADEFFXXX" };
  const handle = (e: BffError): string => {
    if (e.is("INSUFFICIENT_CREDITS")) return `${e.cost ?? "?"}`;
    switch (e.action) {
      case "login": case "fix_request": case "retry_later": case "wait_for_credits": case "upgrade_plan":
      case "contact_support": case "reconnect_bank": case "check_status": case "step_up": case "none":
        return e.action;
      default: {
        const never: never = e.action; // every action is handled
        return never;
      }
    }
  };
  assert.ok(known && client && upstream && wrong && badAction && q && p && both && init && misspelt && handle);
  assert.deepEqual([empty, noCurrency, nobodyPaid].map((f) => typeof f), ["function", "function", "function"]);
  assert.ok(initOfNothing && merchant && unnamed && withBicMerchant);
  assert.ok(one && initNew && initBoth && createNamed && withBic && noAmount === null);
});
