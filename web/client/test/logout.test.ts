import { afterEach, test } from "node:test";
import assert from "node:assert/strict";
import { empty, problem, setup } from "./helpers.js";

const g = globalThis as { location?: unknown };
afterEach(() => {
  delete g.location;
});

function fakeLocation(pathname = "/", search = "") {
  const assigned: string[] = [];
  g.location = { pathname, search, assign: (u: string) => void assigned.push(u) };
  return assigned;
}

const logoutUrl = "https://idp.test/logout?client_id=bff&post_logout_redirect_uri=https%3A%2F%2Fapp.test%2F";

test("logout: POST /auth/logout with X-CSRF, and a browser follows X-Logout-Url", async () => {
  const assigned = fakeLocation();
  const { client, calls } = setup([empty(204, { "X-Logout-Url": logoutUrl })]);
  const res = await client.logout();
  assert.equal(res.logoutUrl, logoutUrl);
  assert.deepEqual(assigned, [logoutUrl]);
  assert.equal(calls[0]!.method, "POST");
  assert.equal(calls[0]!.url, "https://bff.test/auth/logout");
  assert.equal(calls[0]!.headers["x-csrf"], "1");
});

test("logout: navigate false, or no browser, returns the URL without navigating", async () => {
  const assigned = fakeLocation();
  const { client } = setup([empty(204, { "X-Logout-Url": logoutUrl })]);
  assert.equal((await client.logout({ navigate: false })).logoutUrl, logoutUrl);
  assert.deepEqual(assigned, []);
  delete g.location;
  assert.equal((await client.logout()).logoutUrl, logoutUrl);
});

test("logout: no X-Logout-Url, no navigation; an ended session counts as logged out", async () => {
  const assigned = fakeLocation();
  const { client } = setup([
    empty(204),
    problem(401, { code: "SESSION_REQUIRED", action: "login", retryable: false }),
  ]);
  assert.equal((await client.logout()).logoutUrl, undefined);
  assert.equal((await client.logout()).logoutUrl, undefined);
  assert.deepEqual(assigned, []);
});

test("SESSION_REQUIRED: onSessionRequired is called once, then the error is thrown, not retried", async () => {
  const seen: string[] = [];
  const { client, calls } = setup(
    [problem(401, { code: "SESSION_REQUIRED", action: "login", retryable: false, requestId: "r1" })],
    { onSessionRequired: (e) => void seen.push(`${e.code} ${e.requestId}`) },
  );
  await assert.rejects(client.payments(), (e: unknown) => (e as { code: string }).code === "SESSION_REQUIRED");
  assert.deepEqual(seen, ["SESSION_REQUIRED r1"]);
  assert.equal(calls.length, 1);
});

test("SESSION_REQUIRED default in a browser (cookie mode): navigate to /auth/login?returnTo=<path+query>", async () => {
  const assigned = fakeLocation("/payments/new", "?amount=10&to=x y");
  const { client } = setup([problem(401, { code: "SESSION_REQUIRED", action: "login", retryable: false })], {
    onSessionRequired: undefined,
    baseUrl: "",
  });
  await assert.rejects(client.payments());
  assert.deepEqual(assigned, ["/auth/login?returnTo=%2Fpayments%2Fnew%3Famount%3D10%26to%3Dx+y"]);
});

test("SESSION_REQUIRED default without a browser, or in token mode: only throws", async () => {
  const node = setup([problem(401, { code: "SESSION_REQUIRED", action: "login", retryable: false })], {
    onSessionRequired: undefined,
  });
  await assert.rejects(node.client.payments(), { code: "SESSION_REQUIRED" });

  const assigned = fakeLocation("/x");
  const token = setup([problem(401, { code: "SESSION_REQUIRED", action: "login", retryable: false })], {
    onSessionRequired: undefined,
    mode: "token",
    getToken: () => "t",
  });
  await assert.rejects(token.client.payments(), { code: "SESSION_REQUIRED" });
  assert.deepEqual(assigned, []);
});
