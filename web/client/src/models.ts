// The request and response types of the client's helpers, named after the schemas and
// operations of api/openapi.yaml. Nothing here is written by hand beyond the names: the shapes
// come from src/generated/openapi.ts (`npm run gen`).
import type { components, operations } from "./generated/openapi.js";

type Schemas = components["schemas"];

/** The query parameters of an operation of the OpenAPI document, by its operationId. */
export type QueryOf<Op extends keyof operations> = NonNullable<operations[Op]["parameters"]["query"]>;

// Sessions
export type Session = Schemas["Session"];
export type SessionInfo = Schemas["SessionInfo"];
export type DevSession = Schemas["DevSession"];
export type MobileToken = Schemas["MobileToken"];

// Payments
export type PaymentStatus = Schemas["PaymentStatus"];
/**
 * A payment request's amount: a number or a string holding a plain decimal (`10.5`, `"10.50"`),
 * greater than 0, with at most the currency's minor-unit digits (EUR 2, JPY 0) and 15 significant
 * digits, no sign or exponent. The BFF reads it exactly (never through a float) and refuses
 * anything else with 400 VALIDATION_ERROR naming `paymentInformation.amount`.
 */
export type PaymentAmount = Schemas["PaymentAmount"];
/** A bank account in a payment request: its IBAN, nothing else. */
export type IbanAccount = Schemas["IbanAccount"];
/** What a new payment pays: exactly the members the BFF's payment model has. */
export type PaymentInformation = Schemas["PaymentInformation"];
export type PaymentCreate = Schemas["PaymentCreate"];
export type PaymentCreated = Schemas["PaymentCreated"];
export type Payment = Schemas["Payment"];
export type PaymentPage = Schemas["PaymentPage"];
export type PaymentQuery = QueryOf<"listPayments">;
export type OpenBankingInit = Schemas["OpenBankingInit"];
export type OpenBankingInitReply = Schemas["OpenBankingInitReply"];

// The BFF's own record of the caller's payments (GET /bff/payments) and their changes
// (GET /bff/events)
export type PaymentRecord = Schemas["PaymentRecord"];
export type PaymentRecordPage = Schemas["PaymentRecordPage"];
export type PaymentRecordQuery = QueryOf<"listPaymentRecords">;
/** One event of `events()`: a payment of the caller changed; `data` is its latest state. */
export type PaymentEvent = Schemas["PaymentEvent"];
/** `PaymentRecord.paymentStatus` when known. */
export type PaymentRecordStatus = NonNullable<PaymentRecord["paymentStatus"]>;
/** `PaymentRecord.state`: `awaiting_approval` and `declined` are payments held for the user's approval. */
export type PaymentRecordState = PaymentRecord["state"];

// Payment receipts: the document a receipt's JWS signs (GET /bff/payments/{key}/receipt; see
// verifyReceipt), and the JWK Set of the keys receipts are signed with (GET /bff/receipts/jwks.json)
/** What a receipt states: the payload of its JWS, once verifyReceipt has checked it. */
export type Receipt = Schemas["Receipt"];
/** The receipts' public keys, as `receiptKeys()` answers them: each with `kid`, `alg` and `use` `sig`. */
export type ReceiptKeySet = operations["getReceiptKeys"]["responses"][200]["content"]["application/jwk-set+json"];

// Payments the user approves (step-up): the 401 STEP_UP_REQUIRED body, and a native app's
// approval (POST /auth/step-up/token)
export type StepUpRequiredProblem = Schemas["StepUpRequired"];
export type StepUpTokenRequest = Schemas["StepUpTokenRequest"];
export type StepUpApproval = Schemas["StepUpApproval"];

// Bank connections and their data
export type ConnectionCreate = Schemas["ConnectionCreate"];
export type ConnectionCreated = Schemas["ConnectionCreated"];
export type Connection = Schemas["Connection"];
export type ConnectionPage = Schemas["ConnectionPage"];
export type ConnectionQuery = QueryOf<"listConnections">;
export type RefreshReply = Schemas["RefreshReply"];
export type Account = Schemas["Account"];
export type AccountPage = Schemas["AccountPage"];
export type AccountQuery = QueryOf<"listAccounts">;
export type Transaction = Schemas["Transaction"];
export type TransactionPage = Schemas["TransactionPage"];
export type TransactionQuery = QueryOf<"listTransactions">;
export type TransactionPatch = Schemas["TransactionPatch"];
export type TransactionCategory = Schemas["TransactionCategory"];
export type Provider = Schemas["Provider"];
export type ProviderQuery = QueryOf<"listProviders">;

// Merchants: a merchant's account is where every payment to it goes. With the BFF's
// payments.step_up, creating, changing or deleting one is held for the user's approval like a
// payment: send it with an idempotencyKey (`request("PUT", path, {body, idempotencyKey})`), and
// expect a StepUpRequired.
export type Merchant = Schemas["Merchant"];
export type MerchantPage = Schemas["MerchantPage"];
/** The body of a merchant's creation or change: `name` (required), `iban`, `website`, nothing else. */
export type MerchantInput = Schemas["MerchantInput"];

/** A page of a paged list: `{items, nextPage, count}`; `nextPage` is null on the last page. */
export interface Page<T> {
  items: T[];
  nextPage: string | null;
  count?: number;
}
