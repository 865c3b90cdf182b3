import { test } from "node:test";
import assert from "node:assert/strict";
import { createClient, isBffError } from "../src/index.js";
import { json, problem, setup } from "./helpers.js";

const unavailable = (headers: Record<string, string> = {}) =>
  problem(503, { code: "UPSTREAM_UNAVAILABLE", action: "retry_later", retryable: true }, headers);

test("a retryable answer is retried after its Retry-After, then succeeds", async () => {
  const { client, calls, delays } = setup([
    problem(429, { code: "RATE_LIMITED", action: "retry_later", retryable: true }, { "Retry-After": "2" }),
    json(200, { items: [], nextPage: null, count: 0 }),
  ]);
  const page = await client.payments();
  assert.equal(page.count, 0);
  assert.equal(calls.length, 2);
  assert.deepEqual(delays, [2000]);
});

test("without Retry-After: exponential backoff with jitter, bounded by maxAttempts", async () => {
  const { client, calls, delays } = setup([unavailable()], {
    retry: { maxAttempts: 4, baseDelayMs: 400, maxDelayMs: 1000 },
    random: () => 0.5,
  });
  await assert.rejects(client.accounts(), { code: "UPSTREAM_UNAVAILABLE" });
  assert.equal(calls.length, 4);
  // 400, 800, then capped at 1000; each takes off half of a random half: 0.75 of it with 0.5.
  assert.deepEqual(delays, [300, 600, 750]);
});

test("jitter stays within [half, whole] of the backoff", async () => {
  const lo = setup([unavailable()], { random: () => 0, retry: { baseDelayMs: 1000 } });
  await assert.rejects(lo.client.accounts());
  assert.deepEqual(lo.delays, [500, 1000]);
  const hi = setup([unavailable()], { random: () => 0.999999, retry: { baseDelayMs: 1000 } });
  await assert.rejects(hi.client.accounts());
  assert.deepEqual(hi.delays, [1000, 2000]);
});

test("the default is 3 attempts in all", async () => {
  const { client, calls, delays } = setup([unavailable({ "Retry-After": "1" })]);
  await assert.rejects(client.categories(), { code: "UPSTREAM_UNAVAILABLE" });
  assert.equal(calls.length, 3);
  assert.deepEqual(delays, [1000, 1000]);
});

test("a non-retryable answer is never retried", async () => {
  for (const [status, code, action] of [
    [400, "VALIDATION_ERROR", "fix_request"],
    [403, "NOT_AVAILABLE_ON_PLAN", "upgrade_plan"],
    [502, "UPSTREAM_AUTH_FAILED", "contact_support"],
    [502, "PAYMENT_OUTCOME_UNKNOWN", "check_status"],
  ] as const) {
    const { client, calls, delays } = setup([problem(status, { code, action, retryable: false }, { "Retry-After": "1" })]);
    await assert.rejects(client.request("GET", "/api/v2/payments"), { code });
    assert.equal(calls.length, 1, code);
    assert.deepEqual(delays, [], code);
  }
});

test("a retryable answer to a POST without an Idempotency-Key is not retried", async () => {
  const { client, calls } = setup([
    problem(502, { code: "UPSTREAM_ERROR", action: "retry_later", retryable: true }),
  ]);
  await assert.rejects(client.createConnection({ providerIds: ["demobank-sandbox"] }), (e: unknown) => {
    return (e as { code: string; retryable: boolean }).code === "UPSTREAM_ERROR";
  });
  assert.equal(calls.length, 1);
});

test("a retryable DELETE (idempotent) is retried", async () => {
  const { client, calls } = setup([
    problem(503, { code: "SESSION_STORE_UNAVAILABLE", action: "retry_later", retryable: true }),
    new Response(null, { status: 204 }),
  ]);
  await client.logoutEverywhere();
  assert.equal(calls.length, 2);
});

test("a Retry-After longer than maxDelayMs is not waited for: the error comes at once", async () => {
  const { client, calls, delays } = setup([
    problem(423, { code: "RESOURCE_LOCKED", action: "retry_later", retryable: true }, { "Retry-After": "60" }),
  ]);
  await assert.rejects(client.deleteConnection("c1"), (e: unknown) => {
    return (e as { retryAfterSeconds: number }).retryAfterSeconds === 60;
  });
  assert.equal(calls.length, 1);
  assert.deepEqual(delays, []);
});

test("the total cap stops retries whose waits would add up past it", async () => {
  const { client, calls, delays } = setup([unavailable({ "Retry-After": "4" })], {
    retry: { maxAttempts: 10, maxTotalDelayMs: 10_000 },
  });
  await assert.rejects(client.accounts());
  assert.deepEqual(delays, [4000, 4000]);
  assert.equal(calls.length, 3);
});

test("network errors: GET is retried; retry false switches retries off", async () => {
  const { client, calls } = setup([new TypeError("fetch failed"), json(200, [])]);
  assert.deepEqual(await client.providers(), []);
  assert.equal(calls.length, 2);

  const off = setup([new TypeError("fetch failed")]);
  await assert.rejects(off.client.request("GET", "/api/v2/providers", { retry: false }), { code: "NETWORK_ERROR" });
  assert.equal(off.calls.length, 1);
});

test("network errors: a POST or PATCH without a key is never retried", async () => {
  const { client, calls } = setup([new TypeError("fetch failed")]);
  await assert.rejects(client.request("POST", "/api/v2/merchants", { body: { name: "x" } }), { code: "NETWORK_ERROR" });
  await assert.rejects(client.updateTransaction("sk", { note: "n" }), { code: "NETWORK_ERROR" });
  assert.equal(calls.length, 2);
});

test("a proxy's 502 page is retried for a GET", async () => {
  const { client, calls } = setup([
    new Response("<html>bad gateway</html>", { status: 502, headers: { "Content-Type": "text/html" } }),
    json(200, { items: [], nextPage: null }),
  ]);
  await client.connections();
  assert.equal(calls.length, 2);
});

/** A fetch that answers nothing until its request is aborted, as a slow upstream does. */
function hangingFetch() {
  let calls = 0;
  const fn = (_input: RequestInfo | URL, init?: RequestInit) => {
    calls++;
    return new Promise<Response>((_, reject) => {
      const s = init?.signal;
      if (s?.aborted) return reject(s.reason);
      s?.addEventListener("abort", () => reject(s.reason), { once: true });
    });
  };
  return { fetch: fn as typeof fetch, calls: () => calls };
}

test("totalTimeoutMs bounds a call that gets no answer: CLIENT_TIMEOUT, retry_later, retryable for a GET", async () => {
  const f = hangingFetch();
  const client = createClient({ mode: "cookie", fetch: f.fetch, totalTimeoutMs: 50 });
  const began = Date.now();
  await assert.rejects(client.accounts(), (e: unknown) => {
    assert.ok(isBffError(e));
    assert.equal(e.code, "CLIENT_TIMEOUT");
    assert.equal(e.action, "retry_later");
    assert.equal(e.retryable, true);
    assert.equal(e.status, 0);
    return true;
  });
  assert.ok(Date.now() - began < 5_000, "the bound ended the call");
  assert.equal(f.calls(), 1);
});

test("totalTimeoutMs bounds the retries too: a retry that cannot start before the bound is not made", async () => {
  const { client, calls, delays } = setup([unavailable({ "Retry-After": "5" })], { totalTimeoutMs: 1_000 });
  await assert.rejects(client.accounts(), { code: "UPSTREAM_UNAVAILABLE" });
  assert.equal(calls.length, 1);
  assert.deepEqual(delays, []);
});

test("a call's own totalTimeoutMs overrides the client's; 0 switches the bound off", async () => {
  const f = hangingFetch();
  const client = createClient({ mode: "cookie", fetch: f.fetch, totalTimeoutMs: 0 });
  await assert.rejects(client.request("GET", "/api/v2/providers", { totalTimeoutMs: 30 }), { code: "CLIENT_TIMEOUT" });
  const ctl = new AbortController();
  const p = client.request("GET", "/api/v2/providers", { signal: ctl.signal });
  setTimeout(() => ctl.abort(new Error("the caller's")), 30);
  // The caller's abort is passed on as it is, not turned into a timeout.
  await assert.rejects(p, { message: "the caller's" });
});

test("onSlow is called once for a call still unanswered after slowAfterMs, and its return when it settles", async () => {
  const f = hangingFetch();
  const events: string[] = [];
  const client = createClient({
    mode: "cookie", fetch: f.fetch, totalTimeoutMs: 80, slowAfterMs: 20,
    onSlow: (call) => {
      events.push(`slow ${call.method} ${call.path}`);
      return () => events.push("settled");
    },
  });
  await assert.rejects(client.accounts(), { code: "CLIENT_TIMEOUT" });
  assert.deepEqual(events, ["slow GET /api/v2/data/accounts", "settled"]);

  const fast = setup([json(200, { items: [], nextPage: null, count: 0 })], {
    slowAfterMs: 1_000, onSlow: () => { events.push("fast call slow"); },
  });
  await fast.client.accounts();
  assert.deepEqual(events, ["slow GET /api/v2/data/accounts", "settled"]);
});
