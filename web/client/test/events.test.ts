// events(): the SSE parser, and the stream's reconnects, against a real local HTTP server where
// the network matters (a dropped connection, a silent one, an abort) and a scripted fetch where
// only the answers do.
import { test } from "node:test";
import assert from "node:assert/strict";
import { createServer, type IncomingMessage, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { createClient, isBffError, SseParser, type PaymentEvent, type PaymentRecord, type SseEvent } from "../src/index.js";
import { problem, setup } from "./helpers.js";

// ---------------------------------------------------------------- the parser

function parseAll(chunks: string[]): { events: SseEvent[]; parser: SseParser } {
  const parser = new SseParser();
  const events: SseEvent[] = [];
  for (const c of chunks) events.push(...parser.push(c));
  return { events, parser };
}

const sample =
  "\ufeffretry: 2500\n" +
  ": keep-alive\n\n" +
  "id: 1\r\nevent: payment\r\ndata: {\"a\":1}\r\n\r\n" +
  "data:first\rdata: second\r\rid: 2\n" + // CR alone ends lines too; data without a space
  "event: payment\ndata\ndata:  two spaces\n\n" + // "data" alone is an empty line of data
  "id\nevent: other\ndata: x\n\n" + // "id" alone sets the id to ""
  "retry: soon\nretry: 7\nunknown: field\n: comment\n\n" +
  "id: 3\nevent: payment\ndata: cut off";

const want: SseEvent[] = [
  { event: "payment", data: "{\"a\":1}", id: "1" },
  { event: "message", data: "first\nsecond", id: "1" },
  { event: "payment", data: "\n two spaces", id: "2" },
  { event: "other", data: "x", id: "" },
];

test("SseParser: LF, CRLF and CR line ends, multi-line data, comments, retry:, id:, a BOM, an unfinished event dropped", () => {
  const { events, parser } = parseAll([sample]);
  assert.deepEqual(events, want);
  assert.equal(parser.retryMs, 7, "the latest valid retry: (\"soon\" is ignored)");
  assert.equal(parser.comments, 2);
  assert.equal(parser.lastEventId, "", "id: 3 came with an event the stream never ended");
});

test("SseParser: the same events whatever the pieces the stream arrives in", () => {
  // Every cut into two pieces, then one character at a time: through a CRLF pair, a field
  // name, the BOM, a multi-line data.
  for (let i = 0; i <= sample.length; i++) {
    assert.deepEqual(parseAll([sample.slice(0, i), sample.slice(i)]).events, want, `cut at ${i}`);
  }
  const byChar = parseAll([...sample]);
  assert.deepEqual(byChar.events, want);
  assert.equal(byChar.parser.retryMs, 7);
  // A CR at the end of one piece and its LF at the start of the next end one line, not two
  // (two would be an empty line: an early dispatch).
  assert.deepEqual(parseAll(["data: a\r", "\ndata: b\r\n", "\r\n"]).events, [{ event: "message", data: "a\nb", id: "" }]);
});

test("SseParser: an id: with NUL is ignored; reset() drops a cut-off event but keeps the last id", () => {
  const p = new SseParser();
  assert.deepEqual(p.push("id: 5\ndata: a\n\nid: 6\0\ndata: b\n\nid: 9\ndata: cut"), [
    { event: "message", data: "a", id: "5" },
    { event: "message", data: "b", id: "5" },
  ]);
  p.reset();
  assert.deepEqual(p.push("data: c\n\n"), [{ event: "message", data: "c", id: "5" }]);
});

// ---------------------------------------------------------------- the stream

function record(key: string, paymentStatus: PaymentRecord["paymentStatus"]): PaymentRecord {
  return {
    key, route: "/v2/payments", state: "done", status: 201, paymentId: "pay-" + key, paymentStatus,
    createdAt: "2025-06-01T10:00:00Z", updatedAt: "2025-06-01T10:00:07Z",
  };
}

function frame(id: number, rec: PaymentRecord): string {
  return `id: ${id}\nevent: payment\ndata: ${JSON.stringify(rec)}\n\n`;
}

/** A local HTTP server answering /bff/events with handle(req, res, n) for its n-th request (from 1). */
async function serve(handle: (req: IncomingMessage, res: ServerResponse, n: number) => void) {
  const requests: IncomingMessage[] = [];
  const closed: number[] = [];
  const server = createServer((req, res) => {
    requests.push(req);
    const n = requests.length;
    req.socket.on("close", () => closed.push(n));
    handle(req, res, n);
  });
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  const base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  return {
    base, requests, closed,
    async close() {
      server.closeAllConnections();
      await new Promise<void>((r) => server.close(() => r()));
    },
  };
}

function streamHead(res: ServerResponse): void {
  res.writeHead(200, { "Content-Type": "text/event-stream", "Cache-Control": "no-store" });
}

async function take(it: AsyncIterable<PaymentEvent>, n: number): Promise<PaymentEvent[]> {
  const out: PaymentEvent[] = [];
  for await (const ev of it) {
    out.push(ev);
    if (out.length === n) break;
  }
  return out;
}

test("events: a dropped connection is resumed with Last-Event-ID, token mode's bearer on each", async () => {
  const srv = await serve((req, res, n) => {
    streamHead(res);
    if (n === 1) {
      // An event cut in two writes, then the connection drops mid-way through the next one.
      const f = frame(41, record("k1", "ACTC"));
      res.write("retry: 10\n\n: keep-alive\n\n" + f.slice(0, 30));
      setTimeout(() => {
        res.write(f.slice(30) + "id: 42\nevent: payment\ndata: {\"key\"");
        setTimeout(() => req.socket.destroy(), 20);
      }, 20);
      return;
    }
    res.write(frame(42, record("k1", "ACSC")));
  });
  try {
    const opened: (string | undefined)[] = [];
    const client = createClient({ mode: "token", baseUrl: srv.base, getToken: () => "tok-1" });
    const got = await take(client.events({ onOpen: (id) => opened.push(id) }), 2);
    assert.deepEqual(got.map((e) => [e.id, e.event, e.data.key, e.data.paymentStatus]), [
      ["41", "payment", "k1", "ACTC"],
      ["42", "payment", "k1", "ACSC"],
    ]);
    assert.equal(srv.requests.length, 2);
    const [first, second] = srv.requests;
    assert.equal(first!.url, "/bff/events");
    assert.equal(first!.headers["accept"], "text/event-stream");
    assert.equal(first!.headers["last-event-id"], undefined, "the first connection starts from now");
    assert.equal(second!.headers["last-event-id"], "41", "the event cut off by the drop does not count");
    for (const r of srv.requests) assert.equal(r.headers["authorization"], "Bearer tok-1");
    assert.deepEqual(opened, [undefined, "41"]);
  } finally {
    await srv.close();
  }
});

test("events: after the server ends the stream, it reconnects after retry: from the last id given", async () => {
  const srv = await serve((_req, res, n) => {
    streamHead(res);
    if (n === 1) res.end("retry: 30\n\n" + frame(7, record("k2", null)));
    else res.write(frame(8, record("k2", "ACSC")));
  });
  try {
    const client = createClient({ mode: "cookie", baseUrl: srv.base });
    const started = Date.now();
    const got = await take(client.events({ lastEventId: "6" }), 2);
    assert.deepEqual(got.map((e) => e.id), ["7", "8"]);
    assert.equal(got[0]!.data.paymentStatus, null);
    assert.deepEqual(srv.requests.map((r) => r.headers["last-event-id"]), ["6", "7"]);
    assert.ok(Date.now() - started >= 30, "it waited the stream's retry: before reconnecting");
  } finally {
    await srv.close();
  }
});

test("events: 401 SESSION_REQUIRED ends the stream with the error, after onSessionRequired; no reconnect", async () => {
  const srv = await serve((_req, res) => {
    res.writeHead(401, { "Content-Type": "application/problem+json", "X-Request-Id": "r-401" });
    res.end(JSON.stringify({ type: "urn:bff:problem:SESSION_REQUIRED", title: "Session required", status: 401, code: "SESSION_REQUIRED", action: "login", retryable: false, requestId: "r-401" }));
  });
  try {
    let told = 0;
    const client = createClient({ mode: "cookie", baseUrl: srv.base, onSessionRequired: () => { told++; } });
    await assert.rejects(take(client.events(), 1), (err: unknown) => {
      assert.ok(isBffError(err));
      assert.equal(err.code, "SESSION_REQUIRED");
      assert.equal(err.status, 401);
      assert.equal(err.action, "login");
      assert.equal(err.requestId, "r-401");
      assert.equal(err.path, "/bff/events");
      return true;
    });
    assert.equal(told, 1);
    assert.equal(srv.requests.length, 1);
  } finally {
    await srv.close();
  }
});

test("events: 400 and 403 end the stream; an answer that is not an event stream too", async () => {
  for (const [reply, code] of [
    [problem(400, { code: "VALIDATION_ERROR", action: "fix_request", retryable: false, fields: [{ field: "Last-Event-ID", message: "not a decimal" }] }), "VALIDATION_ERROR"],
    [problem(403, { code: "FORBIDDEN", action: "fix_request", retryable: false }), "FORBIDDEN"],
    [new Response("<!doctype html>", { status: 200, headers: { "Content-Type": "text/html" } }), "UNEXPECTED_RESPONSE"],
  ] as const) {
    const { client, calls, delays } = setup([reply]);
    await assert.rejects(take(client.events({ lastEventId: "x" }), 1), (err: unknown) => isBffError(err) && err.code === code);
    assert.equal(calls.length, 1, code);
    assert.deepEqual(delays, [], code);
  }
});

const stream = (body: string) => new Response(body, { status: 200, headers: { "Content-Type": "text/event-stream" } });

test("events: 429 and 503 wait their Retry-After; network failures back off, doubling, capped", async () => {
  {
    const { client, calls, delays } = setup([
      problem(429, { code: "RATE_LIMITED", action: "retry_later", retryable: true }, { "Retry-After": "3" }),
      problem(503, { code: "LEDGER_UNAVAILABLE", action: "retry_later", retryable: true }, { "Retry-After": "1" }),
      problem(503, { code: "LEDGER_UNAVAILABLE", action: "retry_later", retryable: true }),
      stream(frame(1, record("k3", "ACSC"))),
    ]);
    const got = await take(client.events(), 1);
    assert.equal(got[0]!.id, "1");
    assert.equal(calls.length, 4);
    // Retry-After plus up to 1 s of jitter (random() is 0.5 here); the third has none: the
    // backoff of a third failure in a row, 4 s plus a quarter.
    assert.deepEqual(delays, [3500, 1500, 5000]);
  }
  {
    const down = new TypeError("fetch failed");
    const { client, delays } = setup([down, down, down, down, stream(frame(2, record("k4", "RJCT")))]);
    const got = await take(client.events({ maxRetryDelayMs: 3000 }), 1);
    assert.equal(got[0]!.data.paymentStatus, "RJCT");
    assert.deepEqual(delays, [1250, 2500, 3000, 3000]);
  }
});

test("events: a connection silent past idleTimeoutMs is replaced", async () => {
  const srv = await serve((_req, res, n) => {
    streamHead(res);
    if (n === 1) res.write("retry: 5\n\n"); // then nothing, not even a heartbeat
    else res.write(frame(3, record("k5", "ACSC")));
  });
  try {
    const client = createClient({ mode: "cookie", baseUrl: srv.base });
    const got = await take(client.events({ idleTimeoutMs: 100 }), 1);
    assert.equal(got[0]!.id, "3");
    assert.equal(srv.requests.length, 2);
  } finally {
    await srv.close();
  }
});

test("events: an abort ends the iteration without an error and closes the connection; also while waiting to reconnect", async () => {
  const srv = await serve((_req, res, n) => {
    streamHead(res);
    if (n === 1) {
      res.write(frame(1, record("k6", "ACTC")));
      const beat = setInterval(() => res.write(": keep-alive\n\n"), 20);
      res.on("close", () => clearInterval(beat));
    } else {
      res.end("retry: 60000\n\n"); // ends at once, asking for a minute's wait
    }
  });
  try {
    const client = createClient({ mode: "cookie", baseUrl: srv.base });
    const ac = new AbortController();
    const seen: string[] = [];
    for await (const ev of client.events({ signal: ac.signal })) {
      seen.push(ev.id);
      setTimeout(() => ac.abort(), 50);
    }
    assert.deepEqual(seen, ["1"]);
    for (let i = 0; i < 50 && !srv.closed.includes(1); i++) await new Promise((r) => setTimeout(r, 10));
    assert.ok(srv.closed.includes(1), "the aborted connection was closed");

    const ac2 = new AbortController();
    const started = Date.now();
    const done = take(client.events({ signal: ac2.signal, lastEventId: "1" }), 1);
    setTimeout(() => ac2.abort(), 100);
    assert.deepEqual(await done, []);
    assert.ok(Date.now() - started < 5000, "the minute's wait was cut short");
  } finally {
    await srv.close();
  }
});

test("paymentRecords and paymentRecord: GET /bff/payments with limit and cursor, one record by its key", async () => {
  const rec = record("a/b?", "ACSC");
  const { client, calls } = setup([
    new Response(JSON.stringify({ items: [rec], nextCursor: "c2" }), { headers: { "Content-Type": "application/json" } }),
    new Response(JSON.stringify(rec), { headers: { "Content-Type": "application/json" } }),
  ]);
  const page = await client.paymentRecords({ limit: 5, cursor: "c1" });
  assert.equal(page.nextCursor, "c2");
  assert.equal(page.items[0]!.paymentStatus, "ACSC");
  const one = await client.paymentRecord("a/b?");
  assert.equal(one.key, "a/b?");
  assert.deepEqual(calls.map((c) => [c.method, c.url]), [
    ["GET", "https://bff.test/bff/payments?limit=5&cursor=c1"],
    ["GET", "https://bff.test/bff/payments/a%2Fb%3F"],
  ]);
});
