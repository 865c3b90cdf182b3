import { test } from "node:test";
import assert from "node:assert/strict";
import { BffError, isBffError, parseRetryAfter, problemActions, problemCodes } from "../src/index.js";
import { json, problem, setup } from "./helpers.js";

async function failure(p: Promise<unknown>): Promise<BffError> {
  try {
    await p;
  } catch (e) {
    assert.ok(isBffError(e), `not a BffError: ${String(e)}`);
    return e;
  }
  assert.fail("no error");
}

test("every envelope member is mapped onto the BffError", async () => {
  const { client } = setup([
    problem(
      400,
      {
        type: "urn:bff:problem:VALIDATION_ERROR",
        title: "Validation failed",
        detail: "paymentInformation should not be empty",
        code: "VALIDATION_ERROR",
        action: "fix_request",
        retryable: false,
        fields: [
          { field: "paymentInformation", message: "paymentInformation should not be empty" },
          { field: "amount", message: '"amount" must be a number' },
        ],
        requestId: "5c0b8e1f",
        unknownMember: "ignored",
      },
      { "X-Request-Id": "5c0b8e1f" },
    ),
  ]);
  const e = await failure(client.createPayment({ paymentInformation: { amount: "twelve", currency: "ILS", merchantId: "m1" } }, { idempotencyKey: "k1" }));
  assert.ok(e instanceof Error);
  assert.ok(e instanceof BffError);
  assert.equal(e.name, "BffError");
  assert.equal(e.status, 400);
  assert.equal(e.code, "VALIDATION_ERROR");
  assert.equal(e.action, "fix_request");
  assert.equal(e.retryable, false);
  assert.equal(e.type, "urn:bff:problem:VALIDATION_ERROR");
  assert.equal(e.title, "Validation failed");
  assert.equal(e.detail, "paymentInformation should not be empty");
  assert.equal(e.requestId, "5c0b8e1f");
  assert.equal(e.fields.length, 2);
  assert.equal(e.fieldMessage("amount"), '"amount" must be a number');
  assert.equal(e.cost, undefined);
  assert.equal(e.retryAfterSeconds, undefined);
  assert.equal(e.idempotencyKey, "k1");
  assert.equal(e.method, "POST");
  assert.equal(e.path, "/api/v2/payments");
  assert.equal(e.message, "VALIDATION_ERROR: paymentInformation should not be empty");
  assert.ok(e.is("VALIDATION_ERROR"));
  assert.ok(e.is("CLIENT_ERROR", "VALIDATION_ERROR"));
  assert.ok(!e.is("PAYMENT_OUTCOME_UNKNOWN"));
});

test("cost, balance and Retry-After are mapped; requestId falls back on X-Request-Id", async () => {
  const { client } = setup([
    problem(
      402,
      { code: "INSUFFICIENT_CREDITS", action: "wait_for_credits", retryable: false, cost: 20, balance: 5 },
      { "X-Request-Id": "from-header", "Retry-After": "7" },
    ),
  ]);
  const e = await failure(client.refresh());
  assert.equal(e.cost, 20);
  assert.equal(e.balance, 5);
  assert.equal(e.requestId, "from-header");
  assert.equal(e.retryAfterSeconds, 7);
  assert.deepEqual(e.fields, []);
});

test("an upstream code the document does not know passes through, handled by action", async () => {
  const { client } = setup([
    problem(418, { code: "TEAPOT_REFUSED", action: "fix_request", retryable: false, detail: "no" }),
  ]);
  const e = await failure(client.providers());
  assert.equal(e.code, "TEAPOT_REFUSED");
  assert.equal(e.action, "fix_request");
  assert.equal(e.status, 418);
});

test("a network failure is NETWORK_ERROR (status 0) with its cause; never a raw TypeError", async () => {
  const cause = new TypeError("fetch failed");
  const { client } = setup([cause], { retry: { maxAttempts: 1 } });
  const e = await failure(client.payments());
  assert.equal(e.code, "NETWORK_ERROR");
  assert.equal(e.status, 0);
  assert.equal(e.action, "retry_later");
  assert.equal(e.retryable, true);
  assert.equal(e.cause, cause);

  const post = setup([cause]);
  const p = await failure(post.client.createConnection({ providerIds: ["x"] }));
  assert.equal(p.code, "NETWORK_ERROR");
  assert.equal(p.retryable, false, "a POST without a key may have been acted on");
});

test("a proxy's HTML 502 is UNEXPECTED_RESPONSE, as is a problem body that does not parse", async () => {
  const html = new Response("<html><title>502 Bad Gateway</title></html>", {
    status: 502,
    headers: { "Content-Type": "text/html" },
  });
  const { client } = setup([html], { retry: { maxAttempts: 1 } });
  const e = await failure(client.accounts());
  assert.equal(e.code, "UNEXPECTED_RESPONSE");
  assert.equal(e.status, 502);
  assert.equal(e.action, "retry_later");
  assert.equal(e.retryable, true);

  const bad = setup([
    new Response("{not json", { status: 400, headers: { "Content-Type": "application/problem+json" } }),
  ]);
  const b = await failure(bad.client.accounts());
  assert.equal(b.code, "UNEXPECTED_RESPONSE");
  assert.equal(b.action, "fix_request");
  assert.equal(b.retryable, false);
});

test("a 2xx with unreadable JSON is UNEXPECTED_RESPONSE; 204 gives undefined", async () => {
  const { client } = setup([
    new Response("{oops", { status: 200, headers: { "Content-Type": "application/json" } }),
    new Response(null, { status: 204 }),
  ]);
  const e = await failure(client.payments());
  assert.equal(e.code, "UNEXPECTED_RESPONSE");
  const r = await client.request("DELETE", "/api/v2/connections/x");
  assert.equal(r.data, undefined);
  assert.equal(r.status, 204);
});

test("the caller's abort passes through as it is", async () => {
  const ac = new AbortController();
  ac.abort(new Error("user left"));
  const { client } = setup([json(200, {})]);
  await assert.rejects(client.request("GET", "/api/v2/payments", { signal: ac.signal }), { message: "user left" });
});

test("isBffError recognises BffErrors only", () => {
  assert.ok(isBffError(new BffError({ status: 0, code: "NETWORK_ERROR", action: "retry_later", retryable: true, method: "GET", path: "/" })));
  assert.ok(!isBffError(new Error("x")));
  assert.ok(!isBffError({ code: "X" }));
  assert.ok(!isBffError(null));
});

test("parseRetryAfter reads delay-seconds and HTTP-dates", () => {
  const now = Date.parse("2026-01-01T00:00:00Z");
  assert.equal(parseRetryAfter("120", now), 120);
  assert.equal(parseRetryAfter(" 0 ", now), 0);
  assert.equal(parseRetryAfter("Thu, 01 Jan 2026 00:00:30 GMT", now), 30);
  assert.equal(parseRetryAfter("Wed, 31 Dec 2025 23:00:00 GMT", now), 0);
  assert.equal(parseRetryAfter("soon", now), undefined);
  assert.equal(parseRetryAfter(null, now), undefined);
});

test("the generated unions list the document's codes and actions", () => {
  for (const c of ["SESSION_REQUIRED", "PAYMENT_OUTCOME_UNKNOWN", "IDEMPOTENCY_IN_PROGRESS", "CSRF_REJECTED", "STEP_UP_REQUIRED", "STEP_UP_DECLINED"]) {
    assert.ok((problemCodes as readonly string[]).includes(c), c);
  }
  assert.deepEqual(
    [...problemActions].sort(),
    ["check_status", "contact_support", "fix_request", "login", "none", "reconnect_bank", "retry_later", "step_up", "upgrade_plan", "wait_for_credits"],
  );
});

test("an answer cut off mid-body is NETWORK_ERROR, retried for a GET", async () => {
  const cut = () =>
    new Response(
      new ReadableStream({
        start(c) {
          c.enqueue(new TextEncoder().encode('{"items":['));
          c.error(new TypeError("terminated"));
        },
      }),
      { status: 200, headers: { "Content-Type": "application/json" } },
    );
  const { client, calls } = setup([cut, json(200, { items: [], nextPage: null })]);
  assert.deepEqual(await client.payments(), { items: [], nextPage: null });
  assert.equal(calls.length, 2);

  const post = setup([cut]);
  const e = await failure(post.client.createConnection({ providerIds: ["x"] }));
  assert.equal(e.code, "NETWORK_ERROR");
  assert.equal(e.status, 200);
  assert.equal(e.retryable, false);
  assert.equal(post.calls.length, 1);
});
