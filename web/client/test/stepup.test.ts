// Payments the user approves: the 401 STEP_UP_REQUIRED as a StepUpRequired (never a lost
// session), the URLs that start an approval, the outcome read where it came back, a native
// app's code, and watchPayment() over a real local HTTP server.
import { afterEach, test } from "node:test";
import assert from "node:assert/strict";
import { createServer, type IncomingMessage, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import {
  BffError, createClient, isBffError, isStepUpRequired, mobileStepUpUrl, startStepUp, StepUpRequired, stepUpReturn,
  stepUpUrl, type PaymentRecord,
} from "../src/index.js";
import { json, problem, setup } from "./helpers.js";

const held = "https://bff.test/auth/step-up?payment=qX9n-1_Fee";
const challenge = 'Bearer error="insufficient_user_authentication", error_description="the payment needs your approval", acr_values="urn:bff:acr:mfa", max_age=300';

function stepUpAnswer(extra: Record<string, unknown> = {}) {
  return problem(401, {
    type: "urn:bff:problem:STEP_UP_REQUIRED", title: "Approval required", code: "STEP_UP_REQUIRED",
    action: "step_up", retryable: false, detail: "this payment needs your approval; nothing was sent",
    stepUpUrl: held, acrValues: ["urn:bff:acr:mfa"], expiresAt: "2026-11-28T14:11:45Z", maxAge: 300,
    requestId: "r1", ...extra,
  }, { "WWW-Authenticate": challenge });
}

const body = {
  paymentInformation: { amount: "1000.00", currency: "EUR", creditorName: "Dana", creditorAccount: { iban: "DE89370400440532013000" } },
  providerIds: ["demobank-sandbox"],
};

/** A browser's location for the test, restored after it. */
function fakeLocation(search = "") {
  const assigned: string[] = [];
  const loc = { pathname: "/pay", search, assign: (url: string) => void assigned.push(url) };
  (globalThis as { location?: unknown }).location = loc;
  return assigned;
}
afterEach(() => {
  delete (globalThis as { location?: unknown }).location;
});

async function failure(p: Promise<unknown>): Promise<BffError> {
  try {
    await p;
  } catch (e) {
    assert.ok(isBffError(e), `not a BffError: ${String(e)}`);
    return e;
  }
  assert.fail("no error");
}

// ---------------------------------------------------------------- the answer

test("a held payment rejects with StepUpRequired: its URL, classes, expiry, max age, challenge and key; sent once", async () => {
  let sessionRequired = 0;
  const { client, calls } = setup([stepUpAnswer()], { onSessionRequired: () => void sessionRequired++ });
  const e = await failure(client.createPayment(body, { idempotencyKey: "k-1000" }));
  assert.ok(e instanceof StepUpRequired);
  assert.ok(e instanceof BffError);
  assert.ok(isStepUpRequired(e));
  assert.equal(e.name, "BffError", "isBffError must keep recognising it across bundles");
  assert.equal(e.status, 401);
  assert.equal(e.code, "STEP_UP_REQUIRED");
  assert.equal(e.action, "step_up");
  assert.equal(e.retryable, false);
  assert.equal(e.stepUpUrl, held);
  assert.deepEqual(e.acrValues, ["urn:bff:acr:mfa"]);
  assert.equal(e.expiresAt, "2026-11-28T14:11:45Z");
  assert.equal(e.maxAgeSeconds, 300);
  assert.equal(e.challenge, challenge);
  assert.equal(e.idempotencyKey, "k-1000");
  assert.equal(e.requestId, "r1");
  assert.equal(calls.length, 1, "not retried: it is not retryable");
  assert.equal(sessionRequired, 0, "a step-up is not a lost session");
});

test("in cookie mode in a browser, STEP_UP_REQUIRED does not navigate to the login; SESSION_REQUIRED does", async () => {
  const assigned = fakeLocation();
  const c = createClient({ mode: "cookie", baseUrl: "https://bff.test", fetch: async () => stepUpAnswer() });
  await failure(c.createPayment(body, { idempotencyKey: "k" }));
  assert.deepEqual(assigned, []);
  const lost = createClient({
    mode: "cookie", baseUrl: "https://bff.test",
    fetch: async () => problem(401, { code: "SESSION_REQUIRED", action: "login", retryable: false }),
  });
  await failure(lost.createPayment(body, { idempotencyKey: "k" }));
  assert.deepEqual(assigned, ["https://bff.test/auth/login?returnTo=%2Fpay"]);
});

test("a repeat of the key while held gets the same StepUpRequired; without a stepUpUrl it stays a plain BffError", async () => {
  const { client } = setup([stepUpAnswer(), stepUpAnswer({ stepUpUrl: undefined, acrValues: "not an array" })]);
  const first = await failure(client.createPayment(body, { idempotencyKey: "k" }));
  assert.ok(isStepUpRequired(first));
  const bare = await failure(client.createPayment(body, { idempotencyKey: "k" }));
  assert.ok(!(bare instanceof StepUpRequired));
  assert.ok(!isStepUpRequired(bare));
  assert.equal(bare.code, "STEP_UP_REQUIRED");
  assert.equal(bare.action, "step_up", "step_up is one of the document's actions");
});

test("STEP_UP_DECLINED is a plain fix_request BffError with the key", async () => {
  const { client, calls } = setup([
    problem(403, { code: "STEP_UP_DECLINED", action: "fix_request", retryable: false }, { "Idempotent-Replayed": "true" }),
  ]);
  const e = await failure(client.openBankingInit({ providerId: "demobank-sandbox", paymentInformation: body.paymentInformation }, { idempotencyKey: "ob" }));
  assert.ok(!isStepUpRequired(e));
  assert.equal(e.code, "STEP_UP_DECLINED");
  assert.equal(e.action, "fix_request");
  assert.equal(e.idempotencyKey, "ob");
  assert.equal(calls.length, 1);
});

test("isStepUpRequired recognises one from another bundle by its shape", () => {
  const foreign = { name: "BffError", code: "STEP_UP_REQUIRED", stepUpUrl: held, is: () => true };
  assert.ok(isStepUpRequired(foreign));
  assert.ok(!isStepUpRequired({ ...foreign, stepUpUrl: undefined }));
  assert.ok(!isStepUpRequired({ ...foreign, code: "SESSION_REQUIRED" }));
  assert.ok(!isStepUpRequired(new Error("x")));
});

// ---------------------------------------------------------------- starting an approval

test("stepUpUrl adds returnTo, encoded, to the held payment's URL; startStepUp navigates there", async () => {
  const { client } = setup([stepUpAnswer()]);
  const e = await failure(client.createPayment(body, { idempotencyKey: "k" }));
  const want = held + "&returnTo=%2Fstep-up-done%3Fkey%3Dk+1%26x%3D%C3%A9";
  assert.equal(stepUpUrl(e as StepUpRequired, { returnTo: "/step-up-done?key=k 1&x=é" }), want);
  const assigned = fakeLocation();
  assert.equal(startStepUp(e as StepUpRequired, { returnTo: "/step-up-done?key=k 1&x=é" }), want);
  assert.deepEqual(assigned, [want]);
  // A record awaiting approval carries the URL too.
  const rec: Pick<PaymentRecord, "stepUpUrl"> = { stepUpUrl: "https://bff.test/auth/step-up?payment=zz" };
  assert.equal(stepUpUrl(rec, { returnTo: "/" }), "https://bff.test/auth/step-up?payment=zz&returnTo=%2F");
  assert.equal(stepUpUrl({ stepUpUrl: "/auth/step-up" }, { returnTo: "/a" }), "/auth/step-up?returnTo=%2Fa");
});

test("stepUpUrl refuses a returnTo that is not a same-origin path, and a URL that is not the BFF's http(s) one", () => {
  const from = { stepUpUrl: held };
  for (const returnTo of ["https://evil.test/", "//evil.test/", "/\\evil.test", "relative", "", "/a\nb", "/a\\b"]) {
    assert.throws(() => stepUpUrl(from, { returnTo }), TypeError, JSON.stringify(returnTo));
  }
  for (const url of ["javascript:alert(1)", "data:text/html,x", "//evil.test/auth/step-up", "", undefined]) {
    assert.throws(() => stepUpUrl({ stepUpUrl: url }, { returnTo: "/" }), TypeError, String(url));
  }
  assert.throws(() => startStepUp(from, { returnTo: "/" }), /needs a browser's location/);
});

test("mobileStepUpUrl adds the native app's parameters", () => {
  const url = new URL(mobileStepUpUrl({ stepUpUrl: held }, {
    redirectUri: "com.example.app:/oauth2redirect", codeChallenge: "c".repeat(43), state: "s 1",
  }));
  assert.equal(url.origin + url.pathname, "https://bff.test/auth/step-up");
  assert.deepEqual(Object.fromEntries(url.searchParams), {
    payment: "qX9n-1_Fee", client: "mobile", redirect_uri: "com.example.app:/oauth2redirect",
    code_challenge: "c".repeat(43), code_challenge_method: "S256", state: "s 1",
  });
  assert.equal(new URL(mobileStepUpUrl({ stepUpUrl: held }, { redirectUri: "r", codeChallenge: "c" })).searchParams.has("state"), false);
});

// ---------------------------------------------------------------- coming back

test("stepUpReturn reads the outcome and, approved, the key", () => {
  assert.deepEqual(stepUpReturn("?key=k1&stepUp=approved&payment=k1"), { outcome: "approved", idempotencyKey: "k1" });
  assert.deepEqual(stepUpReturn("?key=k1&stepUp=declined"), { outcome: "declined", idempotencyKey: undefined });
  assert.deepEqual(stepUpReturn("?stepUp=failed"), { outcome: "failed", idempotencyKey: undefined });
  assert.deepEqual(stepUpReturn("?stepUp=declined&payment=k1"), { outcome: "declined", idempotencyKey: undefined },
    "only an approval names a payment that was sent");
  assert.deepEqual(stepUpReturn("?stepUp=approved"), { outcome: "approved", idempotencyKey: undefined });
  assert.deepEqual(stepUpReturn("?stepUp=somethingNew&payment=k1"), { outcome: "failed", idempotencyKey: undefined },
    "an outcome this client does not know is never read as approved");
  assert.equal(stepUpReturn("?paymentId=01K"), undefined);
  assert.equal(stepUpReturn(""), undefined);
  fakeLocation("?stepUp=approved&payment=from-location");
  assert.deepEqual(stepUpReturn(), { outcome: "approved", idempotencyKey: "from-location" });
});

// ---------------------------------------------------------------- a native app's code

const approvedRecord: PaymentRecord = {
  key: "k-native", route: "/v2/payments", state: "done", status: 201, paymentId: "01K", paymentStatus: null,
  createdAt: "2026-11-28T14:00:00Z", updatedAt: "2026-11-28T14:01:00Z",
};

test("stepUpToken posts the code in the app's session and returns the payment's record; never retried", async () => {
  const { client, calls } = setup([json(200, { payment: approvedRecord })], { mode: "token", getToken: () => "tok" });
  assert.deepEqual(await client.stepUpToken("code-1", "verifier-1"), approvedRecord);
  assert.equal(calls.length, 1);
  assert.equal(calls[0]!.method, "POST");
  assert.equal(calls[0]!.url, "https://bff.test/auth/step-up/token");
  assert.equal(calls[0]!.headers["authorization"], "Bearer tok", "the session that made the payment");
  assert.deepEqual(JSON.parse(calls[0]!.body!), { code: "code-1", codeVerifier: "verifier-1" });

  const refused = setup([
    new TypeError("reset"),
    json(200, { payment: approvedRecord }),
  ], { mode: "token", getToken: () => "tok" });
  await failure(refused.client.stepUpToken("c", "v"));
  assert.equal(refused.calls.length, 1, "a code is used once: not even a network error is retried");

  const declined = setup([problem(403, { code: "STEP_UP_DECLINED", action: "fix_request", retryable: false })], { mode: "token", getToken: () => "tok" });
  assert.equal((await failure(declined.client.stepUpToken("c", "v"))).code, "STEP_UP_DECLINED");
});

// ---------------------------------------------------------------- watchPayment

function rec(key: string, updatedAt: string, paymentStatus: PaymentRecord["paymentStatus"], state: PaymentRecord["state"] = "done"): PaymentRecord {
  return {
    key, route: "/v2/payments", state, status: state === "done" ? 201 : 401, paymentId: state === "done" ? "pay-" + key : undefined,
    paymentStatus, createdAt: "2026-11-28T14:00:00Z", updatedAt,
  } as PaymentRecord;
}

function frame(id: number, r: PaymentRecord): string {
  return `id: ${id}\nevent: payment\ndata: ${JSON.stringify(r)}\n\n`;
}

/**
 * A local BFF for watchPayment: GET /bff/payments/{key} answers reads[n] (the n-th read, the
 * last repeating), and the n-th GET /bff/events answers streams[n](res) once the n-th read has
 * been answered, so what a test expects does not depend on which request lands first.
 */
async function serveWatch(reads: ((res: ServerResponse) => void)[], streams: ((res: ServerResponse) => void)[]) {
  let readsServed = 0;
  let streamsOpened = 0;
  const waiting: { n: number; go: () => void }[] = [];
  const lastEventIds: (string | undefined)[] = [];
  const closed: number[] = [];
  const server = createServer((req: IncomingMessage, res: ServerResponse) => {
    const path = new URL(req.url ?? "/", "http://x").pathname;
    if (path.startsWith("/bff/payments/")) {
      reads[Math.min(readsServed, reads.length - 1)]!(res);
      readsServed++;
      for (const w of waiting.splice(0)) if (w.n <= readsServed) w.go(); else waiting.push(w);
      return;
    }
    const n = ++streamsOpened;
    lastEventIds.push(req.headers["last-event-id"] as string | undefined);
    req.socket.on("close", () => closed.push(n));
    res.writeHead(200, { "Content-Type": "text/event-stream" });
    res.write("retry: 5\n\n");
    const go = () => streams[Math.min(n, streams.length) - 1]!(res);
    if (readsServed >= n) go();
    else waiting.push({ n, go });
  });
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  const base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  return {
    base, lastEventIds, closed,
    async close() {
      server.closeAllConnections();
      await new Promise<void>((r) => server.close(() => r()));
    },
  };
}

const answer = (r: PaymentRecord) => (res: ServerResponse) => {
  res.writeHead(200, { "Content-Type": "application/json" });
  res.end(JSON.stringify(r));
};

test("watchPayment: the record once the stream is open, then its newer states, each once, never an older one, across a reconnect", async () => {
  const init = rec("k", "2026-11-28T14:00:08Z", "INIT");
  // Nine decimals: later than 14:00:08Z, though "…08.123456789Z" < "…08Z" as strings.
  const actc = rec("k", "2026-11-28T14:00:08.123456789Z", "ACTC");
  const acsc = rec("k", "2026-11-28T14:00:09Z", "ACSC");
  const srv = await serveWatch([answer(init), answer(actc)], [
    (res) => {
      res.write(frame(1, rec("other", "2026-11-28T14:00:30Z", "RJCT"))); // another payment
      res.write(frame(2, init)); // the state already read
      res.write(frame(3, actc));
      res.write(frame(4, rec("k", "2026-11-28T14:00:07.9Z", "PENDING"))); // older, late
      res.end(); // the server ends the stream: the client reconnects, and reads again
    },
    (res) => {
      res.write(frame(5, acsc));
    },
  ]);
  try {
    const client = createClient({ mode: "cookie", baseUrl: srv.base });
    const seen: PaymentRecord["paymentStatus"][] = [];
    for await (const r of client.watchPayment("k")) {
      seen.push(r.paymentStatus);
      if (r.paymentStatus === "ACSC") break;
    }
    assert.deepEqual(seen, ["INIT", "ACTC", "ACSC"]);
    assert.deepEqual(srv.lastEventIds, [undefined, "4"]);
  } finally {
    await srv.close();
  }
});

test("watchPayment: an abort ends it without an error and closes the stream; a key never used fails it", async () => {
  const srv = await serveWatch([answer(rec("k", "2026-11-28T14:00:08Z", null, "awaiting_approval"))], [() => {}]);
  try {
    const client = createClient({ mode: "cookie", baseUrl: srv.base });
    const stop = new AbortController();
    const seen: PaymentRecord["state"][] = [];
    for await (const r of client.watchPayment("k", { signal: stop.signal })) {
      seen.push(r.state);
      stop.abort();
    }
    assert.deepEqual(seen, ["awaiting_approval"]);
    for (let i = 0; i < 200 && srv.closed.length === 0; i++) await new Promise((r) => setTimeout(r, 5));
    assert.deepEqual(srv.closed, [1], "the stream's connection is closed");
  } finally {
    await srv.close();
  }

  const gone = await serveWatch([(res) => {
    res.writeHead(404, { "Content-Type": "application/problem+json" });
    res.end(JSON.stringify({ status: 404, code: "ROUTE_NOT_FOUND", action: "fix_request", retryable: false }));
  }], [() => {}]);
  try {
    const client = createClient({ mode: "cookie", baseUrl: gone.base });
    await assert.rejects(async () => {
      for await (const r of client.watchPayment("never-used")) assert.fail(`yielded ${JSON.stringify(r)}`);
    }, { code: "ROUTE_NOT_FOUND" });
  } finally {
    await gone.close();
  }
});
