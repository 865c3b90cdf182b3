// A smoke test of the built client against a running BFF in `auth.mode: dev` with the upstream
// simulator behind it (`make run`), from Node: token mode, and cookie mode through a small
// cookie jar. Not part of `npm test`, which needs no server.
//
//   npm run build && BFF_URL=http://localhost:8080 npm run smoke
import assert from "node:assert/strict";
import { randomUUID } from "node:crypto";
import { createClient, isBffError } from "../dist/index.js";

const baseUrl = process.env.BFF_URL || "http://localhost:8080";
const user = `smoke-${randomUUID().slice(0, 8)}`;
let step = "";
const ok = (msg) => console.log(`ok   ${msg}`);

async function rejects(p, code) {
  try {
    await p;
  } catch (e) {
    assert.ok(isBffError(e), `${step}: not a BffError: ${e}`);
    assert.equal(e.code, code, `${step}: ${e.message}`);
    return e;
  }
  assert.fail(`${step}: no error, expected ${code}`);
}

// ---------------------------------------------------------------- token mode
let token = null;
let sessionRequired = 0;
const bff = createClient({
  mode: "token",
  baseUrl,
  getToken: () => token,
  onSessionRequired: () => void sessionRequired++,
});

step = "devLogin";
const dev = await bff.devLogin(user);
token = dev.sessionToken;
assert.equal(dev.userId, user);
ok(`token mode: devLogin(${user})`);

step = "session";
assert.equal((await bff.session())?.userId, user);
assert.equal((await bff.sessions()).filter((s) => s.current).length, 1);
ok("session() and sessions()");

step = "lists";
const providers = await bff.providers({ includeFakeProviders: true });
assert.ok(providers.some((p) => p.providerFriendlyId === "demobank-sandbox"));
assert.ok((await bff.categories()).length > 0);
const first = await bff.transactions({ limit: 500 });
let seen = 0;
let pages = 0;
for await (const page of bff.transactionPages({ limit: 500 })) {
  seen += page.items.length;
  pages++;
}
assert.equal(seen, first.count);
assert.ok(pages > 1, "the seeded transactions span several pages of 500");
ok(`providers(), categories(), transactionPages(): ${seen} transactions in ${pages} pages`);

step = "createPayment";
const body = {
  paymentInformation: {
    amount: 12.5,
    currency: "ILS",
    remittanceInformation: "client smoke",
    creditorName: "Dana Levi",
    creditorAccount: { iban: "IL62 0108 0000 0009 9999 999" },
  },
  providerIds: ["demobank-sandbox"],
};
const paid = await bff.createPayment(body);
assert.equal(paid.status, 201);
assert.equal(paid.replayed, false);
const again = await bff.createPayment(body, { idempotencyKey: paid.idempotencyKey });
assert.equal(again.replayed, true);
assert.equal(again.data.id, paid.data.id);
assert.equal((await bff.payment(paid.data.id)).id, paid.data.id);
ok(`createPayment(): 201 ${paid.data.id}; the same key replayed the same payment`);

step = "errors";
const reused = await rejects(bff.createPayment({ ...body, redirectUrl: undefined, providerIds: ["testbank-sandbox"] }, { idempotencyKey: paid.idempotencyKey }), "IDEMPOTENCY_KEY_REUSED");
assert.equal(reused.status, 422);
const invalid = await rejects(bff.createPayment({ paymentInformation: { currency: "ILS" } }), "VALIDATION_ERROR");
assert.equal(invalid.action, "fix_request");
assert.ok(invalid.requestId);
assert.ok(invalid.fields.length > 0, "fields");
await rejects(bff.request("POST", "/api/v2/payments", { body }), "IDEMPOTENCY_KEY_REQUIRED");
await rejects(bff.request("GET", "/api/v2/nowhere"), "ROUTE_NOT_FOUND");
ok("IDEMPOTENCY_KEY_REUSED, VALIDATION_ERROR with fields, IDEMPOTENCY_KEY_REQUIRED, ROUTE_NOT_FOUND");

step = "logout";
const out = await bff.logout();
assert.equal(out.logoutUrl, undefined);
await rejects(bff.payments(), "SESSION_REQUIRED");
assert.equal(sessionRequired, 1);
ok("logout(); then SESSION_REQUIRED and onSessionRequired");

// ---------------------------------------------------------------- cookie mode
// Node's fetch keeps no cookies: a one-cookie jar stands in for the browser.
let cookie = "";
const jarFetch = async (url, init = {}) => {
  const headers = new Headers(init.headers);
  if (cookie && init.credentials === "include") headers.set("Cookie", cookie);
  const res = await fetch(url, { ...init, headers });
  const set = res.headers.get("set-cookie");
  if (set) {
    const pair = set.split(";")[0];
    cookie = pair.endsWith("=") ? "" : pair;
  }
  return res;
};
const web = createClient({ mode: "cookie", baseUrl, fetch: jarFetch, onSessionRequired: () => {} });

step = "cookie";
await web.devLogin(user);
assert.ok(cookie, "the dev login set a cookie");
assert.equal((await web.session())?.userId, user);
const conn = await web.createConnection({ providerIds: ["demobank-sandbox"] });
assert.ok(conn.id && conn.connectUrl);
ok("cookie mode: devLogin, session(), createConnection() (a POST with X-CSRF: 1)");

const noCsrf = createClient({
  mode: "cookie",
  baseUrl,
  fetch: (url, init) => {
    const h = new Headers(init.headers);
    h.delete("X-CSRF");
    return jarFetch(url, { ...init, headers: h });
  },
});
await rejects(noCsrf.createConnection({ providerIds: ["demobank-sandbox"] }), "CSRF_REJECTED");
ok("without X-CSRF the same POST is CSRF_REJECTED");

await rejects(web.deleteConnection(conn.id), "RESOURCE_LOCKED");
ok("deleteConnection() of a new connection: RESOURCE_LOCKED, not waited for (Retry-After 60)");

await web.logoutEverywhere();
assert.equal(await web.session(), null);
ok("logoutEverywhere(); session() is null");
console.log("smoke: all passed");
