// What the upstream refuses with 400 VALIDATION_ERROR: a payment without amount or currency, or
// with neither a merchant nor a creditor account; an init with neither a payment nor its
// information; and an answer's paymentInformation (nothing promised) sent again as it is.
import { createClient, type Payment } from "@fintech-bff/client";

const bff = createClient({ mode: "cookie" });
await bff.createPayment({ paymentInformation: {} }); // error TS2322
await bff.createPayment({ paymentInformation: { amount: 12.5, merchantId: "m1" } }); // error TS2322
await bff.createPayment({ paymentInformation: { amount: 12.5, currency: "ILS", creditorName: "Dana Levi" } }); // error TS2322
await bff.openBankingInit({ providerId: "demobank-sandbox" }); // error TS2345

declare const read: Payment;
await bff.createPayment({ paymentInformation: read.paymentInformation ?? {} }); // error TS2322
