// What the BFF's payment model refuses with 400 VALIDATION_ERROR, before anything is claimed or
// sent: an init with both an existing payment and a new one, a creation naming a paymentId, an
// amount that is neither a number nor a string, and a member paymentInformation does not have.
import { createClient, type OpenBankingInit, type PaymentAmount } from "@fintech-bff/client";

const bff = createClient({ mode: "cookie" });
const info = { amount: "10.50", currency: "EUR", creditorAccount: { iban: "DE89370400440532013000" } };
await bff.openBankingInit({ providerId: "demobank-sandbox", paymentId: "01K", paymentInformation: info }); // error TS2345
const both: OpenBankingInit = { providerId: "demobank-sandbox", paymentId: "01K", paymentInformation: info }; // error TS2322
await bff.createPayment({ paymentInformation: info, paymentId: "01K" }); // error TS2353
await bff.createPayment({ paymentInformation: { ...info, amount: null } }); // error TS2322
await bff.createPayment({ paymentInformation: { amount: 10.5, currency: "EUR", merchantId: "m1", endToEndId: "E2E-1" } }); // error TS2353
const amount: PaymentAmount = 10n; // error TS2322
