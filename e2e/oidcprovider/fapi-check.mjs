// An end-to-end check of provider.mjs's FAPI 2.0 mode ("profile": "fapi2"),
// standalone (node built-ins and jose, which oidc-provider depends on):
//
//	cd e2e/oidcprovider && node fapi-check.mjs
//
// It generates a relying party's ES256 key (client authentication) and a
// second one (DPoP), serves the first's public JWKS from a small http server
// on 127.0.0.1 (the client's jwks_uri), starts provider.mjs on a free port
// with one private_key_jwt client, and plays the client and the browser:
// discovery, the refused front-channel request, PAR (refused with a
// client_secret, accepted with a private_key_jwt assertion, PKCE S256,
// dpop_jkt and a payment_initiation detail), the interaction page (it must
// show the pushed payment), the code in the redirect with iss and state, and
// the code's redemption (refused without a DPoP proof and with another key's
// proof, then use_dpop_nonce and tokens with the bound key). One line per
// check; the first failure ends it with exit status 1 and the provider's log
// (-v prints the log after a pass too).
import { spawn } from 'node:child_process';
import * as crypto from 'node:crypto';
import * as fs from 'node:fs';
import * as http from 'node:http';
import * as os from 'node:os';
import * as path from 'node:path';
import { fileURLToPath } from 'node:url';
import { isDeepStrictEqual } from 'node:util';

import * as jose from 'jose';

const here = path.dirname(fileURLToPath(import.meta.url));
const CLIENT_ID = 'fapi-bff';
const PAYMENT = {
  type: 'payment_initiation',
  instructedAmount: { currency: 'EUR', amount: '12.34' },
  creditorName: 'Merchant A',
  creditorAccount: { iban: 'DE89370400440532013000' },
};

let provider; // the child process
let providerLog = '';
let jwksServer;

class CheckFailed extends Error {}

function ok(msg) {
  console.log(`ok   ${msg}`);
}
function note(msg) {
  console.log(`note ${msg}`);
}
function check(cond, msg, detail) {
  if (!cond) {
    throw new CheckFailed(`${msg}${detail === undefined ? '' : `\n     got: ${typeof detail === 'string' ? detail : JSON.stringify(detail)}`}`);
  }
  ok(msg);
}

function freePort() {
  return new Promise((resolve, reject) => {
    const srv = http.createServer();
    srv.listen(0, '127.0.0.1', () => {
      const { port } = srv.address();
      srv.close(() => resolve(port));
    });
    srv.on('error', reject);
  });
}

const rand = (n = 32) => crypto.randomBytes(n).toString('base64url');

// ---------------------------------------------------------------- the client's keys

const authKeys = await jose.generateKeyPair('ES256', { extractable: true });
const authPublicJWK = { ...(await jose.exportJWK(authKeys.publicKey)), kid: rand(8), alg: 'ES256', use: 'sig' };
const dpopKeys = await jose.generateKeyPair('ES256', { extractable: true });
const dpopPublicJWK = await jose.exportJWK(dpopKeys.publicKey);
const dpopJkt = await jose.calculateJwkThumbprint(dpopPublicJWK);
const otherKeys = await jose.generateKeyPair('ES256', { extractable: true });
const otherPublicJWK = await jose.exportJWK(otherKeys.publicKey);

// ---------------------------------------------------------------- the provider

const rpPort = await freePort();
const opPort = await freePort();
const issuer = `http://127.0.0.1:${opPort}`;
const redirectURI = `http://127.0.0.1:${rpPort}/auth/callback`;
const jwksURI = `http://127.0.0.1:${rpPort}/auth/jwks.json`;

async function startJWKSServer() {
  jwksServer = http.createServer((req, res) => {
    if (req.method === 'GET' && req.url === '/auth/jwks.json') {
      res.setHeader('Content-Type', 'application/json');
      res.end(JSON.stringify({ keys: [authPublicJWK] }));
      return;
    }
    res.statusCode = 404;
    res.end();
  });
  await new Promise((resolve) => { jwksServer.listen(rpPort, '127.0.0.1', resolve); });
}

async function startProvider() {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'fapi-check-'));
  const cfgPath = path.join(dir, 'config.json');
  fs.writeFileSync(cfgPath, JSON.stringify({
    port: opPort,
    issuer,
    profile: 'fapi2',
    clients: [{
      client_id: CLIENT_ID,
      redirect_uris: [redirectURI],
      token_endpoint_auth_method: 'private_key_jwt',
      jwks_uri: jwksURI,
      dpop_bound_access_tokens: true,
      response_types: ['code'],
      grant_types: ['authorization_code'],
    }],
  }, null, 2));
  provider = spawn(process.execPath, [path.join(here, 'provider.mjs'), cfgPath], {
    cwd: here,
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  provider.stdout.setEncoding('utf8');
  provider.stderr.setEncoding('utf8');
  provider.stderr.on('data', (d) => { providerLog += d; });
  await new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new CheckFailed('provider.mjs did not start within 10 s')), 10000);
    provider.on('exit', (code) => {
      clearTimeout(timer);
      reject(new CheckFailed(`provider.mjs exited with status ${code} at start`));
    });
    provider.stdout.on('data', (d) => {
      providerLog += d;
      if (providerLog.includes('listening on')) {
        clearTimeout(timer);
        resolve();
      }
    });
  });
  fs.rmSync(dir, { recursive: true, force: true });
  const modeLine = providerLog.split('\n').find((l) => l.startsWith('oidc-provider mode:'));
  check(modeLine?.startsWith('oidc-provider mode: profile fapi2'), 'provider.mjs logs its mode (profile fapi2) at start', modeLine);
}

function stop() {
  if (provider && provider.exitCode === null) provider.kill('SIGTERM');
  jwksServer?.close();
  jwksServer?.closeAllConnections();
}

// ---------------------------------------------------------------- client helpers

async function clientAssertion(aud = issuer) {
  const now = Math.floor(Date.now() / 1000);
  return new jose.SignJWT({})
    .setProtectedHeader({ alg: 'ES256', kid: authPublicJWK.kid })
    .setIssuer(CLIENT_ID)
    .setSubject(CLIENT_ID)
    .setAudience(aud)
    .setJti(rand(24))
    .setIssuedAt(now)
    .setExpirationTime(now + 60)
    .sign(authKeys.privateKey);
}

async function dpopProof(keys, jwk, htm, htu, nonce) {
  return new jose.SignJWT({ htm, htu, ...(nonce ? { nonce } : {}) })
    .setProtectedHeader({ alg: 'ES256', typ: 'dpop+jwt', jwk })
    .setJti(rand(24))
    .setIssuedAt()
    .sign(keys.privateKey);
}

async function postForm(url, form, headers = {}) {
  const res = await fetch(url, {
    method: 'POST',
    headers: { 'Content-Type': 'application/x-www-form-urlencoded', Accept: 'application/json', ...headers },
    body: new URLSearchParams(form).toString(),
    redirect: 'manual',
  });
  const text = await res.text();
  let json;
  try { json = JSON.parse(text); } catch { json = undefined; }
  return { status: res.status, headers: res.headers, json, text };
}

const show = (r) => `${r.status} ${r.json ? JSON.stringify(r.json) : r.text.slice(0, 300)}`;

function pkce() {
  const verifier = rand(32);
  return { verifier, challenge: crypto.hash('sha256', verifier, 'base64url') };
}

function authorizationParams(p, state, nonce) {
  return {
    response_type: 'code',
    client_id: CLIENT_ID,
    redirect_uri: redirectURI,
    scope: 'openid',
    state,
    nonce,
    code_challenge: p.challenge,
    code_challenge_method: 'S256',
    dpop_jkt: dpopJkt,
    authorization_details: JSON.stringify([PAYMENT]),
    acr_values: 'urn:bff:acr:mfa',
    prompt: 'login',
  };
}

async function pushAuthorizationRequest(meta, params) {
  return postForm(meta.pushed_authorization_request_endpoint, {
    ...params,
    client_assertion_type: 'urn:ietf:params:oauth:client-assertion-type:jwt-bearer',
    client_assertion: await clientAssertion(),
  });
}

// A browser: follows redirects by hand with its own cookie jar (name ->
// value; paths ignored: the provider's cookie names are distinct) until a
// redirect to the client's redirect_uri, which it returns as a URL.
class Browser {
  jar = new Map();

  async request(url, { method = 'GET', form } = {}) {
    const headers = {};
    if (this.jar.size) headers.Cookie = [...this.jar].map(([k, v]) => `${k}=${v}`).join('; ');
    if (form) headers['Content-Type'] = 'application/x-www-form-urlencoded';
    const res = await fetch(url, {
      method, headers, body: form ? new URLSearchParams(form).toString() : undefined, redirect: 'manual',
    });
    for (const c of res.headers.getSetCookie()) {
      const [pair, ...attrs] = c.split(';');
      const i = pair.indexOf('=');
      const name = pair.slice(0, i).trim();
      const value = pair.slice(i + 1).trim();
      const expired = attrs.some((a) => /^\s*expires=/i.test(a) && new Date(a.split('=')[1]) < new Date())
        || attrs.some((a) => /^\s*max-age=0\s*$/i.test(a));
      if (expired || value === '') this.jar.delete(name); else this.jar.set(name, value);
    }
    return { res, body: await res.text() };
  }

  // follow GETs from url until the redirect_uri (returned as a URL) or a
  // non-redirect answer (returned as { res, body, url }).
  async follow(first, start) {
    let { res, body } = first;
    let url = start;
    for (let i = 0; i < 10; i += 1) {
      if (res.status < 300 || res.status > 399) return { res, body, url };
      const next = new URL(res.headers.get('location'), url);
      if (next.href.startsWith(redirectURI)) return { redirect: next };
      url = next.href;
      ({ res, body } = await this.request(url));
    }
    throw new CheckFailed(`more than 10 redirects from ${start}`);
  }
}

// The browser's part for a pushed request: the authorization endpoint with
// client_id and request_uri, the interaction page (checked to show the
// payment), the approval (alice, a right one-time code), the redirect back.
// Returns the redirect's query.
async function browserStep(meta, requestURI, state, label) {
  const browser = new Browser();
  const authURL = `${meta.authorization_endpoint}?${new URLSearchParams({ client_id: CLIENT_ID, request_uri: requestURI })}`;
  const page = await browser.follow(await browser.request(authURL), authURL);
  check(page.res?.status === 200 && /\/interaction\/[^/]+$/.test(new URL(page.url).pathname),
    `${label}: the authorization endpoint with request_uri leads to the interaction page`,
    page.redirect ? `redirect to ${page.redirect}` : `${page.res.status} at ${page.url}: ${page.body.slice(0, 300)}`);
  check(/id="op-payment-amount">12\.34 EUR</.test(page.body) && page.body.includes('DE89370400440532013000')
    && page.body.includes('Merchant A') && page.body.includes('id="op-otp"'),
  `${label}: the page shows the pushed payment (12.34 EUR, Merchant A, the IBAN) and asks for the one-time code`, page.body);
  const action = /<form method="post" action="([^"]+)"/.exec(page.body)?.[1];
  check(action, `${label}: the page has the login form`, page.body);
  const formURL = new URL(action.replace(/&#47;/g, '/'), page.url).href;
  const posted = await browser.request(formURL, { method: 'POST', form: { login: 'alice', otp: '123456', decision: 'approve' } });
  const back = await browser.follow(posted, formURL);
  check(back.redirect, `${label}: approving redirects back to the redirect_uri`,
    back.res ? `${back.res.status} at ${back.url}: ${back.body.slice(0, 300)}` : undefined);
  const q = back.redirect.searchParams;
  check(q.get('code') && q.get('iss') === issuer && q.get('state') === state && !q.get('error'),
    `${label}: the authorization response has code, iss (the issuer) and state`, back.redirect.href);
  return q;
}

// A full authorization (PAR and the browser) for the refusal cases and the success.
async function authorize(meta, label) {
  const p = pkce();
  const state = rand(16);
  const par = await pushAuthorizationRequest(meta, authorizationParams(p, state, rand(16)));
  check(par.status === 201 && par.json?.request_uri, `${label}: PAR accepted`, show(par));
  const q = await browserStep(meta, par.json.request_uri, state, label);
  return { code: q.get('code'), verifier: p.verifier };
}

async function redeem(meta, { code, verifier }, dpopHeader) {
  return postForm(meta.token_endpoint, {
    grant_type: 'authorization_code',
    code,
    redirect_uri: redirectURI,
    code_verifier: verifier,
    client_assertion_type: 'urn:ietf:params:oauth:client-assertion-type:jwt-bearer',
    client_assertion: await clientAssertion(),
  }, dpopHeader ? { DPoP: dpopHeader } : {});
}

// A redemption with a DPoP proof of keys: the first without a nonce must be
// use_dpop_nonce with a DPoP-Nonce; the second carries it. Returns both answers.
async function redeemWithNonce(meta, grant, keys, jwk) {
  const first = await redeem(meta, grant, await dpopProof(keys, jwk, 'POST', meta.token_endpoint));
  const nonce = first.headers.get('dpop-nonce');
  if (first.status !== 400 || first.json?.error !== 'use_dpop_nonce' || !nonce) return { first };
  const second = await redeem(meta, grant, await dpopProof(keys, jwk, 'POST', meta.token_endpoint, nonce));
  return { first, second, nonce };
}

// ---------------------------------------------------------------- the checks

async function main() {
  await startJWKSServer();
  await startProvider();

  // 1. discovery
  const metaRes = await fetch(`${issuer}/.well-known/openid-configuration`);
  const meta = await metaRes.json();
  check(meta.issuer === issuer, 'discovery: issuer', meta.issuer);
  check(typeof meta.pushed_authorization_request_endpoint === 'string', 'discovery: pushed_authorization_request_endpoint', meta);
  check(meta.require_pushed_authorization_requests === true, 'discovery: require_pushed_authorization_requests true', meta.require_pushed_authorization_requests);
  check(meta.token_endpoint_auth_methods_supported?.includes('private_key_jwt'), 'discovery: private_key_jwt in token_endpoint_auth_methods_supported', meta.token_endpoint_auth_methods_supported);
  check(isDeepStrictEqual(meta.token_endpoint_auth_methods_supported, ['private_key_jwt']), 'discovery: private_key_jwt is the only client authentication', meta.token_endpoint_auth_methods_supported);
  check(isDeepStrictEqual([...(meta.token_endpoint_auth_signing_alg_values_supported || [])].sort(), ['ES256', 'EdDSA', 'PS256']), 'discovery: client assertions ES256, PS256 or EdDSA', meta.token_endpoint_auth_signing_alg_values_supported);
  check(meta.authorization_response_iss_parameter_supported === true, 'discovery: authorization_response_iss_parameter_supported true', meta.authorization_response_iss_parameter_supported);
  check(meta.dpop_signing_alg_values_supported?.includes('ES256'), 'discovery: ES256 in dpop_signing_alg_values_supported', meta.dpop_signing_alg_values_supported);
  check(meta.code_challenge_methods_supported?.includes('S256'), 'discovery: S256 in code_challenge_methods_supported', meta.code_challenge_methods_supported);
  check(isDeepStrictEqual(meta.id_token_signing_alg_values_supported, ['PS256']), 'discovery: ID tokens signed PS256', meta.id_token_signing_alg_values_supported);
  check(meta.authorization_details_types_supported?.includes('payment_initiation'), 'discovery: payment_initiation in authorization_details_types_supported', meta.authorization_details_types_supported);

  // 2. the front-channel request without PAR is refused
  {
    const p = pkce();
    const state = rand(16);
    const browser = new Browser();
    const url = `${meta.authorization_endpoint}?${new URLSearchParams(authorizationParams(p, state, rand(16)))}`;
    const out = await browser.follow(await browser.request(url), url);
    const q = out.redirect?.searchParams;
    check(q?.get('error') === 'invalid_request' && !q.get('code') && q.get('iss') === issuer && q.get('state') === state,
      'front channel without PAR refused: redirect to the redirect_uri with error=invalid_request, iss and state',
      out.redirect ? out.redirect.href : `${out.res.status} at ${out.url}: ${out.body.slice(0, 300)}`);
    note(`front channel without PAR: error_description "${q.get('error_description')}"`);
  }

  // 3. PAR: client authentication and the pushed request
  const params = () => authorizationParams(pkce(), rand(16), rand(16));
  {
    const r = await postForm(meta.pushed_authorization_request_endpoint, { ...params(), client_secret: 'a-client-secret-a-client-secret' });
    check(r.status === 401 && r.json?.error === 'invalid_client', 'PAR with client_secret in the body (no assertion) refused: 401 invalid_client', show(r));
  }
  {
    const r = await postForm(meta.pushed_authorization_request_endpoint, params(), {
      Authorization: `Basic ${Buffer.from(`${CLIENT_ID}:a-client-secret-a-client-secret`).toString('base64')}`,
    });
    check(r.status >= 400 && r.status < 500 && ['invalid_client', 'invalid_request'].includes(r.json?.error) && !r.json?.request_uri,
      `PAR with client_secret_basic refused: ${r.status} ${r.json?.error}`, show(r));
  }
  {
    const r = await postForm(meta.pushed_authorization_request_endpoint, {
      ...params(),
      client_assertion_type: 'urn:ietf:params:oauth:client-assertion-type:jwt-bearer',
      client_assertion: await clientAssertion(meta.token_endpoint),
    });
    check(r.status === 401 && r.json?.error === 'invalid_client', 'PAR with an assertion whose aud is the token endpoint (not the issuer) refused: 401 invalid_client', show(r));
  }
  {
    const { code_challenge: _c, code_challenge_method: _m, ...noPKCE } = params();
    const r = await pushAuthorizationRequest(meta, noPKCE);
    check(r.status === 400 && r.json?.error === 'invalid_request', 'PAR without PKCE refused: 400 invalid_request', show(r));
  }
  {
    const r = await pushAuthorizationRequest(meta, params());
    check(r.status === 201 && typeof r.json?.request_uri === 'string' && r.json.request_uri.startsWith('urn:ietf:params:oauth:request_uri:')
      && Number.isInteger(r.json.expires_in),
    `PAR with a private_key_jwt assertion, PKCE S256, dpop_jkt, authorization_details, acr_values, prompt login: 201 request_uri (expires_in ${r.json?.expires_in})`, show(r));
  }
  {
    // A DPoP header at PAR (instead of, or with, dpop_jkt) also needs a nonce.
    const p = params();
    const withProof = async (nonce) => postForm(meta.pushed_authorization_request_endpoint, {
      ...p,
      state: rand(16),
      client_assertion_type: 'urn:ietf:params:oauth:client-assertion-type:jwt-bearer',
      client_assertion: await clientAssertion(),
    }, { DPoP: await dpopProof(dpopKeys, dpopPublicJWK, 'POST', meta.pushed_authorization_request_endpoint, nonce) });
    const r1 = await withProof();
    const nonce = r1.headers.get('dpop-nonce');
    check(r1.status === 400 && r1.json?.error === 'use_dpop_nonce' && nonce,
      'PAR with a DPoP header without a nonce: 400 use_dpop_nonce with a DPoP-Nonce header', show(r1));
    const r2 = await withProof(nonce);
    check(r2.status === 201 && r2.json?.request_uri, 'PAR with a DPoP header carrying that nonce: 201 request_uri', show(r2));
  }

  // 4 and 5. Three authorizations: one code per refusal that may spend it.
  const a = await authorize(meta, 'code A');
  {
    const r = await redeem(meta, a);
    check(r.status === 400 && r.json?.error === 'invalid_grant', 'code A without a DPoP proof refused: 400 invalid_grant', show(r));
    note(`without a proof: "${r.json?.error_description}"`);
  }
  {
    const { first, second } = await redeemWithNonce(meta, a, otherKeys, otherPublicJWK);
    check(first.status === 400 && first.json?.error === 'use_dpop_nonce', 'code A with another key\'s proof, no nonce: 400 use_dpop_nonce first', show(first));
    check(second?.status === 400 && second.json?.error === 'invalid_grant', 'code A with another key\'s proof and the nonce refused: 400 invalid_grant', second && show(second));
    note(`another key: "${second.json?.error_description}"`);
  }
  {
    // After a wrong key, is the code spent? (oidc-provider consumes it before comparing dpop_jkt.)
    const { second } = await redeemWithNonce(meta, a, dpopKeys, dpopPublicJWK);
    check(second?.status === 400 && second.json?.error === 'invalid_grant',
      'code A with the bound key after the wrong-key attempt: refused too (400 invalid_grant, the code was spent)', second && show(second));
  }

  const b = await authorize(meta, 'code B');
  {
    const r = await redeem(meta, b, await dpopProof(otherKeys, otherPublicJWK, 'POST', meta.token_endpoint));
    check(r.status === 400 && r.json?.error === 'use_dpop_nonce', 'code B with another key\'s proof, no nonce: 400 use_dpop_nonce (the nonce is checked before the key)', show(r));
  }
  {
    const r = await redeem(meta, b);
    check(r.status === 400 && r.json?.error === 'invalid_grant', 'code B without a proof: 400 invalid_grant (does not spend the code, see below)', show(r));
  }
  {
    const { first, second, nonce } = await redeemWithNonce(meta, b, dpopKeys, dpopPublicJWK);
    check(first.status === 400 && first.json?.error === 'use_dpop_nonce' && nonce,
      'code B with the bound key, no nonce: 400 use_dpop_nonce with a DPoP-Nonce header', show(first));
    const tok = second?.json;
    check(second?.status === 200 && tok?.access_token, 'code B with the bound key and the nonce: 200 tokens', second && show(second));
    check(tok.token_type === 'DPoP', 'token_type DPoP', tok.token_type);
    check(typeof tok.id_token === 'string', 'id_token present', tok);
    check(isDeepStrictEqual(tok.authorization_details, [PAYMENT]), 'authorization_details in the token response are the pushed payment', tok.authorization_details);
    const jwks = jose.createRemoteJWKSet(new URL(meta.jwks_uri));
    const { payload, protectedHeader } = await jose.jwtVerify(tok.id_token, jwks, { issuer, audience: CLIENT_ID, algorithms: ['PS256'] });
    check(protectedHeader.alg === 'PS256' && payload.sub === 'alice' && payload.acr === 'urn:bff:acr:mfa'
      && isDeepStrictEqual(payload.amr, ['pwd', 'otp']),
    'the ID token: PS256, sub alice, acr urn:bff:acr:mfa, amr [pwd, otp]', { protectedHeader, payload });
    note(`token response: token_type ${tok.token_type}, expires_in ${tok.expires_in}, scope "${tok.scope}", refresh_token ${tok.refresh_token ? 'yes' : 'no'}, DPoP-Nonce header ${second.headers.get('dpop-nonce') ? 'yes' : 'no'}`);
    const again = await redeemWithNonce(meta, b, dpopKeys, dpopPublicJWK);
    const r = again.second || again.first;
    check(r.status === 400 && r.json?.error === 'invalid_grant', 'code B a second time: 400 invalid_grant', show(r));
  }

  // A pushed request's request_uri is single use.
  {
    const p = pkce();
    const state = rand(16);
    const r = await pushAuthorizationRequest(meta, authorizationParams(p, state, rand(16)));
    await browserStep(meta, r.json.request_uri, state, 'request_uri once');
    const browser = new Browser();
    const url = `${meta.authorization_endpoint}?${new URLSearchParams({ client_id: CLIENT_ID, request_uri: r.json.request_uri })}`;
    const out = await browser.follow(await browser.request(url), url);
    const err = out.redirect?.searchParams.get('error') || /error: ([a-z_]+)/.exec(out.body || '')?.[1];
    check(err === 'invalid_request_uri', `request_uri once: its second use is refused (${err})`, out.redirect?.href || `${out.res?.status} ${out.body?.slice(0, 300)}`);
  }
}

let status = 0;
try {
  await main();
  console.log('PASS: provider.mjs in fapi2 mode');
  if (process.argv.includes('-v')) console.log(`--- provider.mjs log ---\n${providerLog}`);
} catch (err) {
  status = 1;
  console.error(`FAIL ${err instanceof CheckFailed ? err.message : err.stack}`);
  console.error(`--- provider.mjs log ---\n${providerLog}`);
} finally {
  stop();
}
process.exitCode = status;
