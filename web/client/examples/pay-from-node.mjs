// @ts-check
// The README's walkthrough as a Node.js script, against a BFF in `auth.mode: dev` (`make run` at
// the repository's root): log in, pay, read the payment's record and its live status, log out.
// Node's fetch keeps no cookies, so a script uses token mode, as a native app does.
//
//   npm ci --prefix web/client && npm run build --prefix web/client   # dist/, imported below
//   BFF_URL=http://localhost:8080 node web/client/examples/pay-from-node.mjs
//
// e2e/walkthrough_test.go runs it against the real BFF and simulator; `npm test` type-checks it.
import { randomUUID } from "node:crypto";
import { createClient } from "@fintech-bff/client";

const baseUrl = process.env.BFF_URL ?? "http://localhost:8080";
let token = "";
const bff = createClient({ mode: "token", baseUrl, getToken: () => token });

// Log in: the dev login (auth.mode dev only) answers a sessionToken, sent as Authorization: Bearer.
const me = await bff.devLogin("alice");
token = me.sessionToken;
console.log(`logged in as ${me.userId}`);

// The stream of alice's payment changes starts from now: open it first, and wait until it is open.
/** @type {(value?: unknown) => void} */
let opened = () => {};
const open = new Promise((resolve) => (opened = resolve));
const stream = bff.events({ onOpen: () => opened() });
const key = randomUUID(); // the payment's Idempotency-Key
const event = (async () => {
  for await (const ev of stream) {
    if (ev.data.key === key && ev.data.paymentStatus) return ev; // leaving the loop closes the stream
  }
})();
await open;

// Pay a sandbox bank: without production access the API refuses any other.
const paid = await bff.createPayment(
  {
    paymentInformation: {
      amount: 12.5,
      currency: "ILS",
      creditorName: "Dana Levi",
      creditorAccount: { iban: "IL620108000000099999999" },
    },
    providerIds: ["demobank-sandbox"],
  },
  { idempotencyKey: key },
);
console.log(`paid: ${paid.status} ${paid.data.id}; alice approves at ${paid.data.payUrl}`);

// The BFF's record of it (GET /bff/payments, newest first), and its status from the stream.
const { items } = await bff.paymentRecords({ limit: 5 });
const record = items.find((r) => r.key === key);
console.log(`record: ${record?.state} ${record?.status} paymentId ${record?.paymentId}`);
const ev = await event;
console.log(`event ${ev?.id}: ${ev?.event} ${ev?.data.state} ${ev?.data.status} paymentStatus ${ev?.data.paymentStatus}`);

// Log out: this session ends, on every instance; alice's other sessions go on.
await bff.logout();
console.log("logged out");
