// Payment receipts: verifyReceipt against receipts signed here with Web Crypto (ES256, Ed25519)
// and against the Go signer's own output (test/fixtures/receipt-*, made once by
// internal/receipts.Sign with a signing.Derived key and an ES256 key), and the client's
// paymentReceipt() and receiptKeys().
import { test } from "node:test";
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import {
  canonicalJson, isBffError, isReceiptError, ReceiptError, verifyReceipt,
  type JsonWebKeySet, type Receipt, type ReceiptErrorReason, type ReceiptKey,
} from "../src/index.js";
import { json, problem, setup } from "./helpers.js";

const root = resolve(fileURLToPath(import.meta.url), "../../..");
const fixture = (name: string) => readFileSync(join(root, "test", "fixtures", name), "utf8");

const b64 = (b: Uint8Array | string) => Buffer.from(b).toString("base64url");

const doc: Receipt = {
  v: 1,
  iss: "https://app.example.com",
  issuedAt: "2026-12-05T10:02:11Z",
  userId: "alice",
  key: "9f1c",
  route: "/v2/payments",
  state: "done",
  status: 201,
  paymentId: "pay_8x2",
  amount: { minor: 123456, currency: "EUR", text: "1234.56" },
  payee: { name: "Zoë \"Café\"", account: "DE89 … 3000" },
  requestedAt: "2026-12-05T09:59:12Z",
  answeredAt: "2026-12-05T10:00:00.412Z",
  paymentStatus: "ACSC",
  paymentStatusAt: "2026-12-05T10:01:02Z",
  bodySha256: "kq8",
  approval: { acr: "urn:bff:acr:mfa", authTime: "2026-12-05T09:59:31Z", detailsSha256: "3qG" },
};

interface Signer {
  kid: string;
  alg: "ES256" | "EdDSA";
  privateKey: CryptoKey;
  jwk: ReceiptKey;
}

async function signer(alg: "ES256" | "EdDSA", kid: string): Promise<Signer> {
  const params = alg === "ES256" ? { name: "ECDSA", namedCurve: "P-256" } : { name: "Ed25519" };
  const pair = (await crypto.subtle.generateKey(params, true, ["sign", "verify"])) as CryptoKeyPair;
  const pub = await crypto.subtle.exportKey("jwk", pair.publicKey);
  const jwk: ReceiptKey = alg === "ES256"
    ? { kty: "EC", crv: "P-256", x: pub.x!, y: pub.y!, kid, alg, use: "sig" }
    : { kty: "OKP", crv: "Ed25519", x: pub.x!, kid, alg, use: "sig" };
  return { kid, alg, privateKey: pair.privateKey, jwk };
}

/** A compact JWS of payload (text) by s, with the header given (alg, kid and typ by default). */
async function sign(s: Signer, payload: string, header: Record<string, unknown> = {}): Promise<string> {
  const h = b64(JSON.stringify({ alg: s.alg, kid: s.kid, typ: "bff-receipt+json", ...header }));
  const p = b64(payload);
  const params = s.alg === "ES256" ? { name: "ECDSA", hash: "SHA-256" } : { name: "Ed25519" };
  const sig = await crypto.subtle.sign(params, s.privateKey, new TextEncoder().encode(`${h}.${p}`));
  return `${h}.${p}.${b64(new Uint8Array(sig))}`;
}

const ec = await signer("ES256", "ec-1");
const ed = await signer("EdDSA", "ed-1");
const jwks: JsonWebKeySet = { keys: [ec.jwk, ed.jwk] };

async function refused(p: Promise<unknown>, reason: ReceiptErrorReason, message?: RegExp) {
  await assert.rejects(p, (e: unknown) => {
    assert.ok(e instanceof ReceiptError, String(e));
    assert.ok(isReceiptError(e));
    assert.equal(e.reason, reason, e.message);
    assert.match(e.message, /^not a valid receipt: /);
    if (message) assert.match(e.message, message);
    return true;
  });
}

test("verifyReceipt: a receipt signed ES256 or EdDSA verifies, with its document and kid", async () => {
  for (const s of [ec, ed]) {
    const jws = await sign(s, canonicalJson(doc));
    assert.deepEqual(await verifyReceipt(jws, jwks), { receipt: doc, kid: s.kid });
    // The key set as its JSON text (a saved file), and the receipt as a file holds it.
    assert.deepEqual(await verifyReceipt(`${jws}\n`, JSON.stringify(jwks)), { receipt: doc, kid: s.kid });
  }
  // The fewest members: the schema's required ones.
  const least: Receipt = {
    v: 1, iss: "https://a", issuedAt: "t", userId: "u", key: "k", route: "/v2/payments", state: "declined", status: 403,
    requestedAt: "t",
  };
  assert.deepEqual((await verifyReceipt(await sign(ed, canonicalJson(least)), jwks)).receipt, least);
});

test("verifyReceipt: a changed payload or signature is refused", async () => {
  for (const s of [ec, ed]) {
    const jws = await sign(s, canonicalJson(doc));
    const [h, , sig] = jws.split(".") as [string, string, string];
    // Another amount, still canonical, under the first signature.
    const other = b64(canonicalJson({ ...doc, amount: { minor: 923456, currency: "EUR", text: "9234.56" } }));
    await refused(verifyReceipt(`${h}.${other}.${sig}`, jwks), "signature");
    // One bit of the signature.
    const bytes = Buffer.from(sig, "base64url");
    bytes[10] = bytes[10]! ^ 1;
    await refused(verifyReceipt(`${h}.${jws.split(".")[1]}.${b64(bytes)}`, jwks), "signature");
    // A signature cut short, and none.
    await refused(verifyReceipt(`${h}.${jws.split(".")[1]}.${b64(bytes.subarray(0, 63))}`, jwks), "signature");
    await refused(verifyReceipt(`${h}.${jws.split(".")[1]}.`, jwks), "signature");
  }
  // Signed by another key under the same kid (a set that is not the signer's).
  const impostor = await signer("EdDSA", "ed-1");
  await refused(verifyReceipt(await sign(impostor, canonicalJson(doc)), jwks), "signature");
});

test("verifyReceipt: a kid the set does not have, or has twice, or with a private part, is refused", async () => {
  const other = await signer("ES256", "ec-2");
  await refused(verifyReceipt(await sign(other, canonicalJson(doc)), jwks), "kid", /"ec-2"/);
  await refused(verifyReceipt(await sign(ec, canonicalJson(doc), { kid: undefined }), jwks), "kid");
  await refused(verifyReceipt(await sign(ec, canonicalJson(doc)), { keys: [ec.jwk, ec.jwk] }), "kid");
  await refused(verifyReceipt(await sign(ec, canonicalJson(doc)), { keys: [{ ...ec.jwk, d: "private" }] }), "kid");
  const e = await verifyReceipt(await sign(other, canonicalJson(doc)), jwks).catch((err: unknown) => err);
  assert.equal((e as ReceiptError).kid, "ec-2");
});

test("verifyReceipt: another typ is refused: something else signed by the same key", async () => {
  await refused(verifyReceipt(await sign(ec, canonicalJson(doc), { typ: "JWT" }), jwks), "typ");
  await refused(verifyReceipt(await sign(ed, canonicalJson(doc), { typ: undefined }), jwks), "typ");
  await refused(verifyReceipt(await sign(ed, canonicalJson(doc), { typ: "BFF-RECEIPT+JSON" }), jwks), "typ");
});

test("verifyReceipt: a payload that is not canonical JSON is refused, even signed", async () => {
  const payloads = [
    JSON.stringify(doc, null, 2), // white space
    JSON.stringify(doc), // members in the document's order, not sorted
    canonicalJson(doc).replace('"Zo\u00eb', '"Zo\\u00eb'), // an escape RFC 8785 does not make
    canonicalJson(doc).replace('"status":201', '"status":201.0'),
    canonicalJson(doc).replace('"status":201', '"status":2.01e2'),
    canonicalJson(doc).replace('"minor":123456', '"minor":1234.56'), // not an integer: refused, not guessed
    canonicalJson(doc).replace('"minor":123456', '"minor":12345678901234567890'), // not exact in a number
    canonicalJson(doc).replace('"key":"9f1c"', '"key":"9f1c","key":"9f1c"'), // a member twice
    `\ufeff${canonicalJson(doc)}`, // a byte order mark
    `${canonicalJson(doc)}\n`,
    canonicalJson(doc).replace('"key":"9f1c"', '"key":"\\ud800"'), // a lone surrogate
    "not json",
    "",
  ];
  for (const p of payloads) {
    await refused(verifyReceipt(await sign(ed, p), jwks), "not_canonical", undefined);
  }
  // Bytes that are not UTF-8.
  const h = b64(JSON.stringify({ alg: "EdDSA", kid: "ed-1", typ: "bff-receipt+json" }));
  const p = b64(Buffer.concat([Buffer.from('{"key":"'), Buffer.from([0xc3, 0x28]), Buffer.from('","v":1}')]));
  const sig = await crypto.subtle.sign({ name: "Ed25519" }, ed.privateKey, new TextEncoder().encode(`${h}.${p}`));
  await refused(verifyReceipt(`${h}.${p}.${b64(new Uint8Array(sig))}`, jwks), "not_canonical");
});

test("verifyReceipt: another version is refused; so is a document of the wrong shape", async () => {
  await refused(verifyReceipt(await sign(ec, canonicalJson({ ...doc, v: 2 })), jwks), "version", /version 2 is not 1/);
  const { v: _, ...noVersion } = doc;
  await refused(verifyReceipt(await sign(ec, canonicalJson(noVersion)), jwks), "version");
  await refused(verifyReceipt(await sign(ec, canonicalJson({ ...doc, v: "1" })), jwks), "version");
  await refused(verifyReceipt(await sign(ec, canonicalJson([doc])), jwks), "document");
  await refused(verifyReceipt(await sign(ec, canonicalJson({ ...doc, status: "201" })), jwks), "document", /status/);
  await refused(verifyReceipt(await sign(ec, canonicalJson({ ...doc, amount: { ...doc.amount, minor: "1" } })), jwks), "document", /amount\.minor/);
  const { userId: __, ...noUser } = doc;
  await refused(verifyReceipt(await sign(ec, canonicalJson(noUser)), jwks), "document", /userId is missing/);
});

test("verifyReceipt: an alg other than ES256 and EdDSA, or one the key is not for, is refused", async () => {
  // Signed by the Ed25519 key, but the header claims ES256 under its kid, and the reverse.
  await refused(verifyReceipt(await sign(ed, canonicalJson(doc), { alg: "ES256" }), jwks), "alg", /signed ES256, but the key "ed-1" is for EdDSA/);
  await refused(verifyReceipt(await sign(ec, canonicalJson(doc), { alg: "EdDSA" }), jwks), "alg", /signed EdDSA, but the key "ec-1" is for ES256/);
  // The same with keys that do not say their alg: their kty and crv do.
  const noAlg = { keys: jwks.keys.map(({ alg: _, ...k }) => k) };
  await refused(verifyReceipt(await sign(ed, canonicalJson(doc), { alg: "ES256" }), noAlg), "alg", /not EC P-256/);
  await refused(verifyReceipt(await sign(ec, canonicalJson(doc), { alg: "EdDSA" }), noAlg), "alg", /not OKP Ed25519/);
  // The key's own alg says otherwise.
  await refused(verifyReceipt(await sign(ed, canonicalJson(doc)), { keys: [{ ...ed.jwk, alg: "ES256" }] }), "alg");
  await refused(verifyReceipt(await sign(ed, canonicalJson(doc)), { keys: [{ ...ed.jwk, crv: "X25519" }] }), "alg");
  for (const alg of ["HS256", "none", "RS256", "PS256", "ES384", undefined]) {
    await refused(verifyReceipt(await sign(ec, canonicalJson(doc), { alg }), jwks), "alg");
  }
  // An HS256 forgery keyed with the public key's text: refused before any MAC is computed.
  const h = b64(JSON.stringify({ alg: "HS256", kid: "ed-1", typ: "bff-receipt+json" }));
  await refused(verifyReceipt(`${h}.${b64(canonicalJson(doc))}.${b64("mac")}`, jwks), "alg");
});

test("verifyReceipt: a key that is not for signing or not a point is refused", async () => {
  const jws = await sign(ec, canonicalJson(doc));
  await refused(verifyReceipt(jws, { keys: [{ ...ec.jwk, use: "enc" }] }), "key", /use "enc"/);
  await refused(verifyReceipt(jws, { keys: [{ ...ec.jwk, y: undefined }] }), "key");
  await refused(verifyReceipt(jws, { keys: [{ ...ec.jwk, y: ec.jwk.x }] }), "key"); // not on the curve
  await refused(verifyReceipt(await sign(ed, canonicalJson(doc)), { keys: [{ ...ed.jwk, x: "AAAA" }] }), "key");
  // Without use and alg, the key still verifies (both are optional in a JWK).
  const { use: _u, alg: _a, ...bare } = ec.jwk;
  assert.equal((await verifyReceipt(jws, { keys: [bare] })).kid, "ec-1");
});

test("verifyReceipt: what is not a compact JWS, or not a key set, is refused", async () => {
  const jws = await sign(ed, canonicalJson(doc));
  const [h, p, s] = jws.split(".") as [string, string, string];
  for (const bad of [`${h}.${p}`, `${jws}.x`, "", `${h}=.${p}.${s}`, `${h}.${p}.${s.replace(/.$/, "+")}`, `${h} .${p}.${s}`, `${b64("{")}.${p}.${s}`, `${b64("[1]")}.${p}.${s}`]) {
    await refused(verifyReceipt(bad, jwks), "malformed");
  }
  await refused(verifyReceipt(await sign(ed, canonicalJson(doc), { crit: ["exp"], exp: 1 }), jwks), "malformed", /crit/);
  await refused(verifyReceipt(jws, "{not json"), "key_set");
  await refused(verifyReceipt(jws, "[]"), "key_set");
  await refused(verifyReceipt(jws, { keys: {} } as unknown as JsonWebKeySet), "key_set");
});

test("verifyReceipt: where Web Crypto has no Ed25519, EdDSA fails with a clear error", async () => {
  const subtle = crypto.subtle as SubtleCrypto & { importKey: SubtleCrypto["importKey"] };
  const real = subtle.importKey;
  Object.defineProperty(subtle, "importKey", {
    configurable: true,
    value: (...args: Parameters<SubtleCrypto["importKey"]>) => {
      const alg = args[2] as { name?: string };
      if (alg.name === "Ed25519") return Promise.reject(new DOMException("Unrecognized algorithm name", "NotSupportedError"));
      return (real as (...a: unknown[]) => Promise<CryptoKey>).apply(subtle, args);
    },
  });
  try {
    await refused(verifyReceipt(await sign(ed, canonicalJson(doc)), jwks), "unsupported", /cannot verify EdDSA \(Ed25519\)/);
    // ES256 still works there.
    assert.equal((await verifyReceipt(await sign(ec, canonicalJson(doc)), jwks)).kid, "ec-1");
  } finally {
    delete (subtle as unknown as Record<string, unknown>)["importKey"];
  }
  assert.equal(crypto.subtle.importKey, real);
});

test("verifyReceipt: the Go signer's receipts verify (EdDSA derived key, ES256), with the Go verifier's document", async () => {
  const keys = fixture("receipt-jwks.json");
  for (const name of ["receipt-eddsa", "receipt-es256"]) {
    const jws = fixture(`${name}.jws`);
    const expected = JSON.parse(fixture(`${name}.expected.json`)) as { kid: string; receipt: Record<string, unknown> };
    // The Go verifier's JSON writes every member, omitting only empty optional ones, as the JWS does.
    const got = await verifyReceipt(jws, keys);
    assert.equal(got.kid, expected.kid);
    assert.deepEqual(got.receipt, expected.receipt);
    assert.deepEqual(await verifyReceipt(jws, JSON.parse(keys) as JsonWebKeySet), got);
    // Changed by one character of its payload: refused.
    const [h, p, s] = jws.trim().split(".") as [string, string, string];
    const changed = Buffer.from(p, "base64url").toString("utf8").replace('"v":1', '"v":2');
    await refused(verifyReceipt(`${h}.${b64(changed)}.${s}`, keys), "signature");
  }
  // The Go payload is exactly this package's canonical JSON of the document it states.
  const eddsa = await verifyReceipt(fixture("receipt-eddsa.jws"), keys);
  const payload = Buffer.from(fixture("receipt-eddsa.jws").trim().split(".")[1]!, "base64url").toString("utf8");
  assert.equal(canonicalJson(eddsa.receipt), payload);
  assert.match(payload, /"name":"Zoë \\"Café\\" <Søn> & Co\u2028\\u0001 💶"/);
  assert.equal(eddsa.receipt.payee?.account, "DE89 … 3000");
  const es256 = await verifyReceipt(fixture("receipt-es256.jws"), keys);
  assert.equal(es256.kid, "es256-2026-01");
  assert.equal(es256.receipt.state, "declined");
  assert.equal(es256.receipt.declined, "expired");
  // Only the key that signed it: the other key of the set does not verify it under its kid.
  const onlyEd = (JSON.parse(keys) as JsonWebKeySet).keys.filter((k) => k.kty === "OKP");
  await refused(verifyReceipt(fixture("receipt-es256.jws"), { keys: onlyEd }), "kid");
});

test("canonicalJson: RFC 8785's order of names (UTF-16 code units) and its strings", () => {
  // RFC 8785 section 3.2.3's example: the emoji sorts before U+FB33 by code units.
  const names = { "\u20ac": 1, "\r": 2, "\ufb33": 3, "1": 4, "\ud83d\ude00": 5, "\u0080": 6, "\u00f6": 7 };
  assert.equal(canonicalJson(names), '{"\\r":2,"1":4,"\u0080":6,"\u00f6":7,"\u20ac":1,"\ud83d\ude00":5,"\ufb33":3}');
  assert.equal(
    canonicalJson({ s: "\u20ac$\u000f\nA'B\"\\\\\"/", b: [true, false, null], n: [0, -0, -1, 9007199254740991], e: {}, a: [] }),
    '{"a":[],"b":[true,false,null],"e":{},"n":[0,0,-1,9007199254740991],"s":"€$\\u000f\\nA\'B\\"\\\\\\\\\\"/"}',
  );
  assert.equal(canonicalJson("\b\t\f\r\u001f\u007f\u2028"), '"\\b\\t\\f\\r\\u001f\u007f\u2028"');
  for (const bad of [1.5, 2 ** 53, NaN, Infinity, undefined, 1n, "\ud800", { k: () => 1 }]) {
    assert.throws(() => canonicalJson(bad), TypeError, String(bad));
  }
});

// ------------------------------------------------------------------ the client's calls

const jose = (body: string, status = 200, headers: Record<string, string> = {}) =>
  new Response(body, { status, headers: { "Content-Type": "application/jose", ...headers } });

test("paymentReceipt: GET /bff/payments/{key}/receipt with the session, the JWS as text", async () => {
  const jws = fixture("receipt-eddsa.jws");
  const { client, calls } = setup([jose(jws, 200, { "Content-Disposition": 'attachment; filename="payment-receipt.jws"' })]);
  assert.equal(await client.paymentReceipt("key/1 ü"), jws.trim());
  assert.equal(calls.length, 1);
  assert.equal(calls[0]!.method, "GET");
  assert.equal(calls[0]!.url, "https://bff.test/bff/payments/key%2F1%20%C3%BC/receipt");
  assert.equal(calls[0]!.headers["accept"], "application/jose");
  assert.equal(calls[0]!.credentials, "include");
  assert.equal(calls[0]!.headers["x-csrf"], undefined);

  const token = setup([jose(jws)], { mode: "token", getToken: () => "tok" });
  await token.client.paymentReceipt("k");
  assert.equal(token.calls[0]!.headers["authorization"], "Bearer tok");
  assert.equal(token.calls[0]!.credentials, "omit");
});

test("paymentReceipt: refusals are BffErrors; 409 while the outcome is unknown is retried, then thrown", async () => {
  const inProgress = problem(409, {
    code: "IDEMPOTENCY_IN_PROGRESS", action: "retry_later", retryable: true,
    detail: "this payment waits for your approval: it has a receipt once it is sent or declined",
  }, { "Retry-After": "1" });
  const busy = setup([inProgress]);
  await assert.rejects(busy.client.paymentReceipt("k"), (e: unknown) => {
    assert.ok(isBffError(e));
    assert.equal(e.code, "IDEMPOTENCY_IN_PROGRESS");
    assert.equal(e.status, 409);
    assert.match(e.detail ?? "", /approval/);
    return true;
  });
  assert.equal(busy.calls.length, 3);
  assert.deepEqual(busy.delays, [1000, 1000]);

  const later = setup([inProgress, jose("a.b.c")]);
  assert.equal(await later.client.paymentReceipt("k"), "a.b.c");

  const missing = setup([problem(404, { code: "ROUTE_NOT_FOUND", action: "fix_request", retryable: false })]);
  await assert.rejects(missing.client.paymentReceipt("never"), { name: "BffError", code: "ROUTE_NOT_FOUND", status: 404 });
  assert.equal(missing.calls.length, 1);

  let asked = 0;
  const gone = setup([problem(401, { code: "SESSION_REQUIRED", action: "login", retryable: false })], {
    onSessionRequired: () => void asked++,
  });
  await assert.rejects(gone.client.paymentReceipt("k"), { code: "SESSION_REQUIRED" });
  assert.equal(asked, 1);

  // A BFF without receipts behind an app's index.html, or JSON: not a receipt.
  for (const res of [new Response("<!doctype html>", { status: 200, headers: { "Content-Type": "text/html" } }), json(200, { jws: "a.b.c" })]) {
    const odd = setup([res]);
    await assert.rejects(odd.client.paymentReceipt("k"), { code: "UNEXPECTED_RESPONSE", action: "contact_support", retryable: false });
  }
});

test("receiptKeys: GET /bff/receipts/jwks.json without the session; what it answers verifies what paymentReceipt answers", async () => {
  const keys = fixture("receipt-jwks.json");
  const { client, calls } = setup(
    [
      (req) => req.url.endsWith("/jwks.json")
        ? new Response(keys, { headers: { "Content-Type": "application/jwk-set+json", "Cache-Control": "public, max-age=300" } })
        : jose(fixture("receipt-es256.jws")),
    ],
    { mode: "token", getToken: () => "tok" },
  );
  const set = await client.receiptKeys();
  assert.deepEqual(set, JSON.parse(keys));
  assert.equal(calls[0]!.url, "https://bff.test/bff/receipts/jwks.json");
  assert.equal(calls[0]!.headers["authorization"], undefined);
  const { receipt, kid } = await verifyReceipt(await client.paymentReceipt("k-declined-1"), set);
  assert.equal(kid, "es256-2026-01");
  assert.equal(receipt.key, "k-declined-1");

  for (const res of [new Response("<!doctype html>", { headers: { "Content-Type": "text/html" } }), json(200, { keys: "none" })]) {
    const odd = setup([res]);
    await assert.rejects(odd.client.receiptKeys(), { code: "UNEXPECTED_RESPONSE" });
  }
});
