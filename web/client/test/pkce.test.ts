import { test } from "node:test";
import assert from "node:assert/strict";
import { createPkce, pkceChallenge } from "../src/index.js";

test("pkceChallenge: RFC 7636 appendix B's example", async () => {
  assert.equal(
    await pkceChallenge("dBjftJeZ4CVP-mB92K27uhbUJU1p1r_wW1gFWFOEjXk"),
    "E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM",
  );
  await assert.rejects(pkceChallenge("short"), TypeError);
});

test("createPkce: a 43-character verifier and its challenge, fresh each time", async () => {
  const a = await createPkce();
  const b = await createPkce();
  assert.match(a.verifier, /^[A-Za-z0-9_-]{43}$/);
  assert.match(a.challenge, /^[A-Za-z0-9_-]{43}$/);
  assert.equal(a.challenge, await pkceChallenge(a.verifier));
  assert.notEqual(a.verifier, b.verifier);
});
