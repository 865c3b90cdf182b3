// A program a team writes against the installed package (test/package.test.ts compiles it with
// moduleResolution nodenext, strict, skipLibCheck off, then runs it): ESM, the types, and the
// requests and answers as the OpenAPI document has them.
import {
  createClient, isBffError, isReceiptError, problemCodes, verifyReceipt,
  type JsonWebKeySet, type Payment, type PaymentCreate, type ReceiptKeySet, type Session, type VerifiedReceipt,
} from "@fintech-bff/client";

const sent: { url: string; key: string | null; body: unknown }[] = [];
const bff = createClient({
  mode: "token",
  baseUrl: "https://bff.test",
  getToken: () => "session-token",
  newIdempotencyKey: () => "key-1",
  fetch: async (input, init) => {
    const headers = new Headers(init?.headers);
    sent.push({ url: String(input), key: headers.get("Idempotency-Key"), body: JSON.parse(String(init?.body)) });
    return new Response(JSON.stringify({ id: "p1", payUrl: "https://bank.test/pay", newMember: 1 }), {
      status: 201,
      headers: { "Content-Type": "application/json" },
    });
  },
});

// A request has exactly the members the document names.
const body: PaymentCreate = {
  paymentInformation: {
    amount: 149.9,
    currency: "ILS",
    creditorName: "Shop",
    creditorAccount: { iban: "IL620108000000099999999" },
  },
  providerIds: ["demobank-sandbox"],
  redirectUrl: "https://app.example.com/payment-done",
};
const made = await bff.createPayment(body);
const payUrl: string = made.data.payUrl;

// An answer is open where the upstream is: members it adds later are there to read...
const newMember: unknown = made.data["newMember"];
const payment: Payment = {
  id: "p1",
  status: "ACSC",
  paymentInformation: { amount: "149.90", currency: "ILS", bankReference: "B-1" },
  settledBy: "bank",
};
// ...and none of an answer's members is promised, so a payment's information, as read, is
// completed before it is sent again (a request needs amount, currency, a merchant or creditor).
const read = payment.paymentInformation;
const again: PaymentCreate = {
  paymentInformation: { amount: read?.amount ?? 0, currency: read?.currency ?? "ILS", merchantId: read?.merchantId ?? "m1" },
  providerIds: ["demobank-sandbox"],
};

// An answer the BFF makes itself is exact.
const me: Session = { userId: "u1", expiresAt: "2026-01-01T00:00:00Z" };

// A receipt is checked offline against a key set the BFF answered (or a saved copy of it).
const published: ReceiptKeySet = { keys: [{ kty: "OKP", kid: "k1", alg: "EdDSA", use: "sig", crv: "Ed25519", x: "AAAA" }] };
const saved: JsonWebKeySet = published;
const receiptReason = await verifyReceipt("not.a-receipt", saved).then(
  (v: VerifiedReceipt) => v.receipt.state,
  (e: unknown) => (isReceiptError(e) ? e.reason : "other"),
);

console.log(JSON.stringify({
  status: made.status,
  key: made.idempotencyKey,
  payUrl,
  newMember,
  sent,
  again: again.paymentInformation.currency,
  user: me.userId,
  codes: problemCodes.includes("PAYMENT_OUTCOME_UNKNOWN"),
  isBffError: isBffError(new Error("x")),
  receiptReason,
}));
