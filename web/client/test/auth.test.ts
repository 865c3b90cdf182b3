import { test } from "node:test";
import assert from "node:assert/strict";
import { empty, json, setup } from "./helpers.js";

test("cookie mode: credentials include, X-CSRF: 1 on POST, PUT, PATCH and DELETE only", async () => {
  const { client, calls } = setup([json(200, {})]);
  for (const m of ["GET", "HEAD", "POST", "PUT", "PATCH", "DELETE"]) {
    await client.request(m, "/api/v2/merchants");
  }
  for (const c of calls) {
    assert.equal(c.credentials, "include", c.method);
    assert.equal(c.headers["authorization"], undefined, c.method);
    const unsafe = ["POST", "PUT", "PATCH", "DELETE"].includes(c.method);
    assert.equal(c.headers["x-csrf"], unsafe ? "1" : undefined, c.method);
  }
  assert.deepEqual(calls.map((c) => c.method), ["GET", "HEAD", "POST", "PUT", "PATCH", "DELETE"]);
});

test("token mode: Authorization: Bearer from getToken, no cookies, no X-CSRF", async () => {
  let n = 0;
  const { client, calls } = setup([json(200, {})], {
    mode: "token",
    getToken: async () => `tok-${++n}`,
  });
  await client.request("GET", "/api/v2/payments");
  await client.request("POST", "/api/v2/connections", { body: { providerIds: ["x"] } });
  assert.equal(calls[0]!.headers["authorization"], "Bearer tok-1");
  assert.equal(calls[1]!.headers["authorization"], "Bearer tok-2");
  for (const c of calls) {
    assert.equal(c.credentials, "omit");
    assert.equal(c.headers["x-csrf"], undefined);
  }
});

test("token mode: no token sends no Authorization; the login endpoints never send one", async () => {
  const none = setup([json(200, {})], { mode: "token", getToken: () => null });
  await none.client.request("GET", "/auth/session");
  assert.equal(none.calls[0]!.headers["authorization"], undefined);

  const { client, calls } = setup([json(200, { sessionToken: "s", expiresIn: 1800 })], {
    mode: "token",
    getToken: () => "old",
  });
  const tok = await client.mobileToken("the-code", "the-verifier");
  assert.deepEqual(tok, { sessionToken: "s", expiresIn: 1800 });
  assert.equal(calls[0]!.method, "POST");
  assert.equal(calls[0]!.url, "https://bff.test/auth/mobile/token");
  assert.equal(calls[0]!.headers["authorization"], undefined);
  assert.equal(calls[0]!.headers["content-type"], "application/json");
  assert.deepEqual(JSON.parse(calls[0]!.body!), { code: "the-code", codeVerifier: "the-verifier" });
});

test("urls: baseUrl, query (undefined left out, arrays repeated) and encoded path ids", async () => {
  const { client, calls } = setup([json(200, { items: [], nextPage: null, count: 0 })]);
  await client.request("GET", "/api/v2/data/transactions", {
    query: { limit: 2, accountId: undefined, type: "CARD", x: ["a", "b"] },
  });
  await client.transaction("TRANSACTION#CARD#A#2026-07-22#B");
  await client.revokeSession("3q2/+=");
  assert.equal(calls[0]!.url, "https://bff.test/api/v2/data/transactions?limit=2&type=CARD&x=a&x=b");
  assert.equal(calls[1]!.url, "https://bff.test/api/v2/data/transactions/TRANSACTION%23CARD%23A%232026-07-22%23B");
  assert.equal(calls[2]!.url, "https://bff.test/auth/sessions/3q2%2F%2B%3D");
  assert.equal(calls[2]!.method, "DELETE");
  assert.equal(calls[2]!.headers["x-csrf"], "1");
});

test("mobileLoginUrl and loginUrl build the login navigations", () => {
  const { client } = setup([]);
  assert.equal(
    client.mobileLoginUrl({ redirectUri: "com.example.app:/oauth2redirect", codeChallenge: "abc", state: "s1" }),
    "https://bff.test/auth/login?client=mobile&redirect_uri=com.example.app%3A%2Foauth2redirect&code_challenge=abc&code_challenge_method=S256&state=s1",
  );
  assert.equal(client.loginUrl("/pay?x=1"), "https://bff.test/auth/login?returnTo=%2Fpay%3Fx%3D1");
});

test("session() is the session, or null without one (and no onSessionRequired)", async () => {
  let hooked = 0;
  const ok = setup([json(200, { userId: "alice", expiresAt: "2026-01-01T00:00:00Z" })]);
  assert.deepEqual(await ok.client.session(), { userId: "alice", expiresAt: "2026-01-01T00:00:00Z" });
  const none = setup(
    [new Response(JSON.stringify({ code: "SESSION_REQUIRED", action: "login", retryable: false, status: 401 }), {
      status: 401,
      headers: { "Content-Type": "application/problem+json" },
    })],
    { onSessionRequired: () => void hooked++ },
  );
  assert.equal(await none.client.session(), null);
  assert.equal(hooked, 0);
});

test("sessions, revokeSession, logoutEverywhere, devLogin", async () => {
  const { client, calls } = setup([
    json(200, { sessions: [{ id: "a", current: true }] }),
    empty(204),
    empty(204),
    json(200, { userId: "bob", sessionToken: "t", expiresAt: "x" }),
  ]);
  const list = await client.sessions();
  assert.equal(list.length, 1);
  assert.equal(list[0]!.id, "a");
  await client.revokeSession("a");
  await client.logoutEverywhere();
  const dev = await client.devLogin("bob");
  assert.equal(dev.sessionToken, "t");
  assert.deepEqual(
    calls.map((c) => `${c.method} ${new URL(c.url).pathname}`),
    ["GET /auth/sessions", "DELETE /auth/sessions/a", "DELETE /auth/sessions", "POST /auth/dev/login"],
  );
  assert.deepEqual(JSON.parse(calls[3]!.body!), { userId: "bob" });
});

test("caller headers: names are case-insensitive; a string body is sent as it is", async () => {
  const { client, calls } = setup([json(200, {})]);
  await client.request("PUT", "/api/v2/merchants/m1", {
    body: '{"name":"x"}',
    headers: { "content-type": "application/merge-patch+json", accept: "application/json, */*", "If-Match": '"v1"' },
  });
  await client.request("POST", "/api/v2/merchants", { body: { name: "y" } });
  assert.equal(calls[0]!.headers["content-type"], "application/merge-patch+json");
  assert.equal(calls[0]!.headers["accept"], "application/json, */*");
  assert.equal(calls[0]!.headers["if-match"], '"v1"');
  assert.equal(calls[0]!.body, '{"name":"x"}');
  assert.equal(calls[1]!.headers["content-type"], "application/json");
  assert.equal(calls[1]!.headers["accept"], "application/json");
});
