// A misspelt member of a payment: the upstream would ignore `redirectURL` and pay without it.
import { createClient, type PaymentCreate } from "@fintech-bff/client";

const bff = createClient({ mode: "cookie" });
await bff.createPayment({
  paymentInformation: { amount: 1, currency: "ILS", merchantId: "m1" },
  providerIds: ["demobank-sandbox"],
  redirectURL: "https://app.example.com/payment-done", // error TS2561
});

const body: PaymentCreate = {
  paymentInformation: { amount: 1, currency: "ILS", merchantID: "m1" }, // error TS2561
};
await bff.createPayment(body);
