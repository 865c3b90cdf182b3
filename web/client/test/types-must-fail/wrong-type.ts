// Members of the wrong type, and a missing required one.
import { createClient } from "@fintech-bff/client";

const bff = createClient({ mode: "cookie" });
await bff.createPayment({
  paymentInformation: { amount: true, currency: "ILS" }, // error TS2322
  providerIds: "demobank-sandbox", // error TS2322
});
await bff.createPayment({ providerIds: ["demobank-sandbox"] }); // error TS2345
await bff.updateTransaction("TRANSACTION#BANK#1", { category: { main: "SHOPPING" } }); // error TS2741
