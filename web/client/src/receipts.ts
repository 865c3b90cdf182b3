// Payment receipts: the BFF's signed statement of what its ledger knows of one payment
// (GET /bff/payments/{idempotencyKey}/receipt), checked offline against its published keys
// (GET /bff/receipts/jwks.json). The checks are those of the Go verifier
// (internal/receipts.Verify, cmd/verify-receipt): a compact JWS of typ bff-receipt+json, signed
// ES256 or EdDSA by the one public key its kid names, over the canonical JSON (RFC 8785) of a
// version 1 document. It needs Web Crypto (crypto.subtle), and Ed25519 in it for EdDSA.
import type { Receipt } from "./models.js";

/** The JWS header's typ of a receipt. */
export const receiptType = "bff-receipt+json";
/** The receipt document's version this client knows; another is refused. */
export const receiptVersion = 1;

/**
 * Why verifyReceipt refused a receipt (`ReceiptError.reason`):
 *
 * - `key_set`: the key set is not a JWK Set (`{"keys": [...]}`).
 * - `malformed`: not a compact JWS: not three base64url parts, a header that is not a JSON
 *   object, or one that names critical extensions (`crit`).
 * - `typ`: the header's typ is not `bff-receipt+json`: something else signed by the same key.
 * - `alg`: the header's alg is not ES256 or EdDSA, or the key is not one for it (its `alg`, `kty`
 *   or `crv` says otherwise).
 * - `kid`: no public key of the set has the header's kid (or several do).
 * - `key`: the key with that kid cannot be used: `use` other than `sig`, a missing or malformed
 *   `x`/`y`, or a point Web Crypto refuses.
 * - `unsupported`: this platform cannot check it: no Web Crypto, or none for Ed25519 (EdDSA).
 * - `signature`: the signature does not verify: the receipt was changed, or signed by another key.
 * - `not_canonical`: the signed payload is not canonical JSON (RFC 8785), or holds a number that is
 *   not an integer this client can read exactly.
 * - `version`: the document's version (`v`) is not 1.
 * - `document`: the payload is not a receipt document (a member missing or of the wrong type).
 */
export type ReceiptErrorReason =
  | "key_set" | "malformed" | "typ" | "alg" | "kid" | "key" | "unsupported" | "signature"
  | "not_canonical" | "version" | "document";

/** A refusal of verifyReceipt: the receipt is not one to rely on. Switch on `reason`. */
export class ReceiptError extends Error {
  override readonly name = "ReceiptError";
  readonly reason: ReceiptErrorReason;
  /** The kid the receipt's header named, once it was read. */
  readonly kid: string | undefined;

  constructor(reason: ReceiptErrorReason, detail: string, opts: { kid?: string | undefined; cause?: unknown } = {}) {
    super(`not a valid receipt: ${detail}`, opts.cause === undefined ? undefined : { cause: opts.cause });
    this.reason = reason;
    this.kid = opts.kid;
  }
}

/** Whether e is a ReceiptError (also across bundles: it checks the name and shape, not only the class). */
export function isReceiptError(e: unknown): e is ReceiptError {
  if (e instanceof ReceiptError) return true;
  return (
    typeof e === "object" &&
    e !== null &&
    (e as { name?: unknown }).name === "ReceiptError" &&
    typeof (e as { reason?: unknown }).reason === "string"
  );
}

/** A public key of a JWK Set (RFC 7517): EC P-256 for ES256, OKP Ed25519 for EdDSA. */
export interface ReceiptKey {
  kty?: string;
  kid?: string;
  alg?: string;
  use?: string;
  crv?: string;
  x?: string;
  y?: string;
  [member: string]: unknown;
}

/** A JWK Set (RFC 7517 section 5): what `receiptKeys()` answers, or a copy saved of it. */
export interface JsonWebKeySet {
  keys: readonly ReceiptKey[];
}

/** A receipt that verified: its document, and the kid of the key that signed it. */
export interface VerifiedReceipt {
  receipt: Receipt;
  kid: string;
}

/**
 * Checks a receipt (the compact JWS of `paymentReceipt(key)`, surrounding white space ignored)
 * against the BFF's receipt keys (`receiptKeys()`, or that JWK Set saved, as an object or its
 * JSON text), as the Go verifier does, and returns its document and the signing key's kid.
 * Rejects with a ReceiptError for every refusal. A receipt proves what that BFF recorded and
 * signed; it is not the bank's own statement.
 */
export async function verifyReceipt(receipt: string, jwks: JsonWebKeySet | string): Promise<VerifiedReceipt> {
  const keys = keySet(jwks);
  if (typeof receipt !== "string") throw new ReceiptError("malformed", "it is not text");
  const parts = receipt.trim().split(".");
  if (parts.length !== 3) throw new ReceiptError("malformed", "a compact JWS has three parts separated by dots");
  const [h64, p64, s64] = parts as [string, string, string];
  const headerBytes = base64url(h64);
  const payload = base64url(p64);
  const sig = base64url(s64);
  if (!headerBytes || !payload || !sig) throw new ReceiptError("malformed", "its parts are not base64url (without padding)");

  let header: unknown;
  try {
    header = JSON.parse(utf8(headerBytes));
  } catch (cause) {
    throw new ReceiptError("malformed", "its header is not JSON", { cause });
  }
  if (!isObject(header)) throw new ReceiptError("malformed", "its header is not a JSON object");
  const kid = typeof header["kid"] === "string" ? header["kid"] : undefined;
  const alg = header["alg"];
  if (alg !== "ES256" && alg !== "EdDSA") {
    throw new ReceiptError("alg", `its alg ${JSON.stringify(alg)} is not ES256 or EdDSA`, { kid });
  }
  if ("crit" in header) throw new ReceiptError("malformed", "its header names critical extensions (crit)", { kid });
  if (header["typ"] !== receiptType) throw new ReceiptError("typ", `its typ is not ${receiptType}`, { kid });
  if (kid === undefined) throw new ReceiptError("kid", "its header has no kid");

  const found = keys.filter((k) => isObject(k) && k["kid"] === kid);
  const key = found[0];
  // A private key is never published: a set holding one is not the BFF's public set.
  if (found.length !== 1 || !key || "d" in key) {
    throw new ReceiptError("kid", `no public key in the set has its kid ${JSON.stringify(kid)}`, { kid });
  }
  const cryptoKey = await importKey(key, alg, kid);

  if (sig.length !== 64) throw new ReceiptError("signature", "the signature does not verify", { kid });
  const signed = ascii(`${h64}.${p64}`);
  let ok: boolean;
  try {
    ok = await subtle(kid).verify(alg === "ES256" ? { name: "ECDSA", hash: "SHA-256" } : { name: "Ed25519" }, cryptoKey, sig, signed);
  } catch (cause) {
    throw new ReceiptError("signature", "the signature does not verify", { kid, cause });
  }
  if (!ok) throw new ReceiptError("signature", "the signature does not verify", { kid });

  let doc: unknown;
  try {
    const text = utf8(payload);
    doc = JSON.parse(text);
    if (!equalBytes(new TextEncoder().encode(canonicalJson(doc)), payload)) throw new Error("not canonical");
  } catch (cause) {
    throw new ReceiptError("not_canonical", "its document is not canonical JSON", { kid, cause });
  }
  if (!isObject(doc)) throw new ReceiptError("document", "its document is not a JSON object", { kid });
  if (doc["v"] !== receiptVersion) {
    throw new ReceiptError("version", `version ${JSON.stringify(doc["v"] ?? null)} is not ${receiptVersion}`, { kid });
  }
  const wrong = documentProblem(doc);
  if (wrong) throw new ReceiptError("document", wrong, { kid });
  return { receipt: doc as unknown as Receipt, kid };
}

function keySet(jwks: JsonWebKeySet | string): readonly ReceiptKey[] {
  let set: unknown = jwks;
  if (typeof jwks === "string") {
    try {
      set = JSON.parse(jwks);
    } catch (cause) {
      throw new ReceiptError("key_set", "the key set is not JSON", { cause });
    }
  }
  if (!isObject(set) || !Array.isArray(set["keys"])) {
    throw new ReceiptError("key_set", 'the key set is not a JWK Set ({"keys": [...]})');
  }
  return set["keys"] as readonly ReceiptKey[];
}

/** The Web Crypto key of a JWK for alg, after checking that the JWK is one for it. */
async function importKey(key: ReceiptKey, alg: "ES256" | "EdDSA", kid: string): Promise<CryptoKey> {
  if (key.alg !== undefined && key.alg !== alg) {
    throw new ReceiptError("alg", `it is signed ${alg}, but the key ${JSON.stringify(kid)} is for ${String(key.alg)}`, { kid });
  }
  const [kty, crv] = alg === "ES256" ? ["EC", "P-256"] : ["OKP", "Ed25519"];
  if (key.kty !== kty || key.crv !== crv) {
    throw new ReceiptError("alg", `it is signed ${alg}, but the key ${JSON.stringify(kid)} is not ${kty} ${crv}`, { kid });
  }
  if (key.use !== undefined && key.use !== "sig") {
    throw new ReceiptError("key", `the key ${JSON.stringify(kid)} has use ${JSON.stringify(key.use)}, not sig`, { kid });
  }
  const coordinate = (v: unknown) => typeof v === "string" && base64url(v)?.length === 32;
  if (!coordinate(key.x) || (alg === "ES256" && !coordinate(key.y))) {
    throw new ReceiptError("key", `the key ${JSON.stringify(kid)} is not a ${crv} public key`, { kid });
  }
  // Only the members that make the point: Web Crypto checks alg, use and key_ops by its own names.
  const jwk: JsonWebKey = alg === "ES256"
    ? { kty, crv, x: key.x as string, y: key.y as string, ext: true }
    : { kty, crv, x: key.x as string, ext: true };
  const params = alg === "ES256" ? { name: "ECDSA", namedCurve: "P-256" } : { name: "Ed25519" };
  try {
    return await subtle(kid).importKey("jwk", jwk, params, false, ["verify"]);
  } catch (cause) {
    if ((cause as { name?: unknown } | null)?.name === "NotSupportedError") {
      throw new ReceiptError("unsupported", `this platform's Web Crypto cannot verify ${alg} (${crv})`, { kid, cause });
    }
    throw new ReceiptError("key", `the key ${JSON.stringify(kid)} is not a ${crv} public key`, { kid, cause });
  }
}

function subtle(kid: string): SubtleCrypto {
  const s = (globalThis as { crypto?: Partial<Crypto> }).crypto?.subtle;
  if (!s) throw new ReceiptError("unsupported", "Web Crypto (crypto.subtle) is not available here", { kid });
  return s;
}

/** Why doc is not a receipt document, or undefined: the members and types of the Receipt schema. */
function documentProblem(doc: Record<string, unknown>): string | undefined {
  const str = (o: Record<string, unknown>, name: string, required: boolean, at = "") =>
    o[name] === undefined ? (required ? `${at}${name} is missing` : undefined)
      : typeof o[name] === "string" ? undefined : `${at}${name} is not a string`;
  const int = (o: Record<string, unknown>, name: string, at = "") =>
    Number.isSafeInteger(o[name]) ? undefined : `${at}${name} is not an integer`;
  const obj = (name: string, check: (o: Record<string, unknown>) => string | undefined) => {
    const o = doc[name];
    if (o === undefined) return undefined;
    return isObject(o) ? check(o) : `${name} is not an object`;
  };
  const problems = [
    ...["iss", "issuedAt", "userId", "key", "route", "state", "requestedAt"].map((n) => str(doc, n, true)),
    int(doc, "status"),
    ...["declined", "paymentId", "answeredAt", "paymentStatus", "paymentStatusAt", "bodySha256"].map((n) => str(doc, n, false)),
    obj("amount", (a) => int(a, "minor", "amount.") ?? str(a, "currency", true, "amount.") ?? str(a, "text", true, "amount.")),
    obj("payee", (p) => str(p, "name", false, "payee.") ?? str(p, "account", false, "payee.") ?? str(p, "merchantId", false, "payee.")),
    obj("approval", (a) =>
      str(a, "acr", true, "approval.") ?? str(a, "authTime", true, "approval.") ?? str(a, "detailsSha256", true, "approval.")),
  ];
  return problems.find((p) => p !== undefined);
}

/**
 * The canonical JSON (RFC 8785, JCS) of a JSON value: object members sorted by their names' UTF-16
 * code units, no white space, strings escaped as RFC 8785 says (only `"`, `\` and control
 * characters; everything else as it is, in UTF-8 once encoded). Numbers must be integers that a
 * JavaScript number holds exactly (a receipt has no other): anything else throws a TypeError
 * rather than guess at its serialisation, as do lone surrogates, and values that are not JSON
 * (undefined, functions, symbols, bigints, NaN).
 */
export function canonicalJson(value: unknown): string {
  if (value === null) return "null";
  switch (typeof value) {
    case "boolean":
      return value ? "true" : "false";
    case "number":
      if (!Number.isSafeInteger(value)) throw new TypeError(`canonicalJson: ${value} is not an integer it can write exactly`);
      return Object.is(value, -0) ? "0" : String(value);
    case "string":
      return quote(value);
    case "object": {
      if (Array.isArray(value)) return `[${value.map(canonicalJson).join(",")}]`;
      const o = value as Record<string, unknown>;
      // The default sort compares UTF-16 code units, as RFC 8785 section 3.2.3 asks.
      const names = Object.keys(o).sort();
      return `{${names.map((n) => `${quote(n)}:${canonicalJson(o[n])}`).join(",")}}`;
    }
    default:
      throw new TypeError(`canonicalJson: a ${typeof value} is not a JSON value`);
  }
}

const loneSurrogate = /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/;

/** A string as RFC 8785 section 3.2.2.2 writes it. */
function quote(s: string): string {
  if (loneSurrogate.test(s)) throw new TypeError("canonicalJson: a string holds a lone surrogate (not I-JSON)");
  let out = '"';
  for (const ch of s) {
    const c = ch.codePointAt(0)!;
    switch (ch) {
      case '"': out += '\\"'; break;
      case "\\": out += "\\\\"; break;
      case "\b": out += "\\b"; break;
      case "\t": out += "\\t"; break;
      case "\n": out += "\\n"; break;
      case "\f": out += "\\f"; break;
      case "\r": out += "\\r"; break;
      default:
        out += c < 0x20 ? `\\u${c.toString(16).padStart(4, "0")}` : ch;
    }
  }
  return out + '"';
}

function isObject(v: unknown): v is Record<string, unknown> {
  return typeof v === "object" && v !== null && !Array.isArray(v);
}

/** The bytes of base64url text without padding (RFC 7515 section 2), or undefined when it is not that. */
function base64url(s: string): Uint8Array<ArrayBuffer> | undefined {
  if (!/^[A-Za-z0-9_-]*$/.test(s) || s.length % 4 === 1) return undefined;
  const alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
  const out = new Uint8Array(Math.floor((s.length * 3) / 4));
  let bits = 0;
  let acc = 0;
  let n = 0;
  for (const ch of s) {
    acc = (acc << 6) | alphabet.indexOf(ch);
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      out[n++] = (acc >> bits) & 0xff;
    }
  }
  // The bits left over must be zero: one text per byte string.
  if ((acc & ((1 << bits) - 1)) !== 0) return undefined;
  return out;
}

/** UTF-8 text of bytes: invalid UTF-8 throws, and a byte order mark is kept (then refused by JSON.parse). */
function utf8(b: Uint8Array): string {
  return new TextDecoder("utf-8", { fatal: true, ignoreBOM: true }).decode(b);
}

function ascii(s: string): Uint8Array<ArrayBuffer> {
  return new TextEncoder().encode(s);
}

function equalBytes(a: Uint8Array, b: Uint8Array): boolean {
  if (a.length !== b.length) return false;
  for (let i = 0; i < a.length; i++) if (a[i] !== b[i]) return false;
  return true;
}
