// Members no request of the document has, at the top and nested. (tsc reports one excess
// member per argument, so each mistake has a call of its own.)
import { createClient } from "@fintech-bff/client";

const bff = createClient({ mode: "cookie" });
await bff.createPayment({
  paymentInformation: { amount: 1, currency: "ILS", merchantId: "m1" },
  callbackUrl: "https://app.example.com/hook", // error TS2353
});
await bff.createPayment({
  paymentInformation: {
    amount: 1,
    currency: "ILS",
    creditorAccount: { iban: "IL620108000000099999999", bic: "POALILIT" }, // error TS2353
  },
});
await bff.openBankingInit({ providerId: "demobank-sandbox", paymentID: "p1" }); // error TS2561
await bff.createConnection({ providerIds: ["demobank-sandbox"], redirectURL: "https://app.example.com/c" }); // error TS2561
await bff.updateTransaction("TRANSACTION#BANK#1", { notes: "rent" }); // error TS2561
