import { test } from "node:test";
import assert from "node:assert/strict";
import { createClient } from "../src/index.js";
import { fakeFetch, json, problem, setup } from "./helpers.js";

const body = {
  paymentInformation: { amount: 149.9, currency: "ILS", creditorAccount: { iban: "IL62 0108 0000 0009 9999 999" } },
  providerIds: ["demobank-sandbox"],
};

test("createPayment: one key, made once, the same on every retry; a flaky network never pays twice", async () => {
  let made = 0;
  const { client, calls, delays } = setup(
    [
      new TypeError("network down"),
      problem(409, { code: "IDEMPOTENCY_IN_PROGRESS", action: "retry_later", retryable: true }, { "Retry-After": "1" }),
      json(201, { id: "01K", payUrl: "https://bank.test/pay" }, { "Idempotent-Replayed": "true", "X-Request-Id": "r9" }),
    ],
    { newIdempotencyKey: () => `key-${++made}` },
  );
  const res = await client.createPayment(body);
  assert.equal(made, 1);
  assert.equal(calls.length, 3);
  for (const c of calls) {
    assert.equal(c.method, "POST");
    assert.equal(c.url, "https://bff.test/api/v2/payments");
    assert.equal(c.headers["idempotency-key"], "key-1");
    assert.equal(c.headers["x-csrf"], "1");
    assert.deepEqual(JSON.parse(c.body!), body);
  }
  assert.equal(delays.length, 2);
  assert.equal(delays[1], 1000);
  assert.deepEqual(res.data, { id: "01K", payUrl: "https://bank.test/pay" });
  assert.equal(res.status, 201);
  assert.equal(res.replayed, true);
  assert.equal(res.idempotencyKey, "key-1");
  assert.equal(res.requestId, "r9");
});

test("createPayment: a first answer is not replayed; each call gets a new key", async () => {
  const { client, calls } = setup([json(201, { id: "a", payUrl: "u" })]);
  const a = await client.createPayment(body);
  const b = await client.createPayment(body);
  assert.equal(a.replayed, false);
  assert.match(a.idempotencyKey, /^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/);
  assert.notEqual(a.idempotencyKey, b.idempotencyKey);
  assert.equal(calls[0]!.headers["idempotency-key"], a.idempotencyKey);
  assert.equal(calls[1]!.headers["idempotency-key"], b.idempotencyKey);
});

test("createPayment: the caller's key is used; PAYMENT_OUTCOME_UNKNOWN is not retried and carries the key", async () => {
  const { client, calls } = setup([
    problem(502, { code: "PAYMENT_OUTCOME_UNKNOWN", action: "check_status", retryable: false }),
  ]);
  await assert.rejects(client.createPayment(body, { idempotencyKey: "stored-key" }), (e: unknown) => {
    const err = e as { code: string; action: string; idempotencyKey: string };
    return err.code === "PAYMENT_OUTCOME_UNKNOWN" && err.action === "check_status" && err.idempotencyKey === "stored-key";
  });
  assert.equal(calls.length, 1);
  assert.equal(calls[0]!.headers["idempotency-key"], "stored-key");
});

test("createPayment: a replayed error answer says so", async () => {
  const { client } = setup([
    problem(400, { code: "VALIDATION_ERROR", action: "fix_request", retryable: false }, { "Idempotent-Replayed": "true" }),
  ]);
  await assert.rejects(client.createPayment(body), { code: "VALIDATION_ERROR", replayed: true });
});

test("createPayment: LEDGER_UNAVAILABLE and UPSTREAM_UNREACHABLE are retried with the same key", async () => {
  const { client, calls, delays } = setup([
    problem(503, { code: "LEDGER_UNAVAILABLE", action: "retry_later", retryable: true }),
    problem(502, { code: "UPSTREAM_UNREACHABLE", action: "retry_later", retryable: true }),
    json(201, { id: "p", payUrl: "u" }),
  ]);
  const res = await client.createPayment(body, { idempotencyKey: "k" });
  assert.equal(res.data.id, "p");
  assert.deepEqual(calls.map((c) => c.headers["idempotency-key"]), ["k", "k", "k"]);
  assert.equal(delays.length, 2);
});

test("openBankingInit is keyed and retried like a payment", async () => {
  const { client, calls } = setup([
    new TypeError("reset"),
    json(200, { paymentId: "p", authorizationUrl: "https://bank.test/a" }),
  ]);
  const res = await client.openBankingInit({ providerId: "demobank-sandbox", paymentId: "p" }, { idempotencyKey: "ob" });
  assert.equal(res.data.authorizationUrl, "https://bank.test/a");
  assert.deepEqual(calls.map((c) => `${new URL(c.url).pathname} ${c.headers["idempotency-key"]}`), [
    "/api/v2/pay/open-banking-init ob",
    "/api/v2/pay/open-banking-init ob",
  ]);
});

test("payment bodies go as written, and the BFF's refusal of the payment model names the member, not retried", async () => {
  // The BFF reads the amount exactly (a number or a decimal string) and refuses what its payment
  // model does not accept, naming the member (docs/payments.md, "The payment model"): the client
  // sends the body unchanged, with the content type the BFF requires, and does not repeat it.
  const refusal = {
    type: "urn:bff:problem:VALIDATION_ERROR", title: "Validation failed", code: "VALIDATION_ERROR",
    action: "fix_request", retryable: false,
    detail: "paymentInformation.amount has more decimals than EUR has (2); nothing was sent",
    fields: [{ field: "paymentInformation.amount", message: "paymentInformation.amount has more decimals than EUR has (2)" }],
  };
  const { client, calls } = setup([problem(400, refusal), json(200, { paymentId: "01K", status: "PENDING" })]);
  const tooPrecise = {
    providerId: "demobank-sandbox",
    paymentInformation: { amount: "10.505", currency: "EUR", creditorAccount: { iban: "DE89370400440532013000" } },
  };
  await assert.rejects(client.openBankingInit(tooPrecise, { idempotencyKey: "k-init" }), (e: unknown) => {
    const err = e as { code: string; retryable: boolean; fieldMessage(f: string): string | undefined };
    return err.code === "VALIDATION_ERROR" && !err.retryable &&
      err.fieldMessage("paymentInformation.amount") === "paymentInformation.amount has more decimals than EUR has (2)";
  });
  assert.equal(calls.length, 1);
  assert.equal(calls[0]!.body, JSON.stringify(tooPrecise));
  assert.match(calls[0]!.headers["content-type"] ?? "", /^application\/json\b/);

  // Fixed, with the same key: nothing was claimed, so the key is still the payment's.
  const fixed = { ...tooPrecise, paymentInformation: { ...tooPrecise.paymentInformation, amount: "10.50" } };
  const res = await client.openBankingInit(fixed, { idempotencyKey: "k-init" });
  assert.equal(res.data.paymentId, "01K");
  assert.equal(calls[1]!.body, '{"providerId":"demobank-sandbox","paymentInformation":{"amount":"10.50","currency":"EUR","creditorAccount":{"iban":"DE89370400440532013000"}}}');
  assert.equal(calls[1]!.headers["idempotency-key"], "k-init");
});

test("request() with an idempotencyKey is retried after a network error, with that key", async () => {
  const { client, calls } = setup([new TypeError("reset"), json(201, { id: "m" })]);
  const res = await client.request("POST", "/api/v2/pay/other", { body: {}, idempotencyKey: "x" });
  assert.equal(res.status, 201);
  assert.deepEqual(calls.map((c) => c.headers["idempotency-key"]), ["x", "x"]);
});

test("payments list, get and cancel", async () => {
  const { client, calls } = setup([
    json(200, { items: [{ id: "a", status: "INIT" }], nextPage: null, count: 1 }),
    json(200, { id: "01K/x", status: "INIT" }),
    json(200, { id: "01K/x", status: "CANC" }),
  ]);
  assert.equal((await client.payments({ status: "INIT", limit: 10 })).count, 1);
  assert.equal((await client.payment("01K/x")).status, "INIT");
  assert.equal((await client.cancelPayment("01K/x")).status, "CANC");
  assert.deepEqual(calls.map((c) => `${c.method} ${c.url}`), [
    "GET https://bff.test/api/v2/payments?status=INIT&limit=10",
    "GET https://bff.test/api/v2/payments/01K%2Fx",
    "DELETE https://bff.test/api/v2/payments/01K%2Fx",
  ]);
});

test("the default fetch is globalThis.fetch, called at request time", async () => {
  const f = fakeFetch(json(200, { userId: "u", expiresAt: "t" }));
  const saved = globalThis.fetch;
  const client = createClient({ mode: "cookie" });
  globalThis.fetch = f.fetch;
  try {
    assert.equal((await client.session())?.userId, "u");
    assert.equal(f.calls[0]!.url, "/auth/session");
  } finally {
    globalThis.fetch = saved;
  }
});
