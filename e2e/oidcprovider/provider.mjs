// A real OpenID provider (panva/oidc-provider, OpenID Certified) for the
// BFF's end-to-end tests. Started by e2e/oidc_harness_test.go as
//
//	node provider.mjs /path/to/config.json
//
// (or with OIDC_PROVIDER_CONFIG=/path/to/config.json). The config is
//
//	{"port": 1234, "issuer": "http://127.0.0.1:1234", "clients": [ ...client metadata... ],
//	 "ttl": {...}, "par": "off", "dpop": false, "profile": "fapi2"}
//
// (ttl, par, dpop and profile optional: see "Security profile" below).
//
// It is deliberately test-only: plain http on loopback, keys generated at
// start, in-memory storage, no real user database (any username logs in, the
// username "reject" refuses), consent granted by the login form itself, and
// outgoing back-channel logout calls allowed to loopback addresses.
//
// Authentication levels (acr, acr_values_supported): a login is
// urn:bff:acr:pwd (amr ["pwd"]). When the request's acr_values names
// urn:bff:acr:mfa, the page also asks for a one-time code (input "otp"): any
// 6 digits give urn:bff:acr:mfa (amr ["pwd", "otp"]), except 000000, the
// wrong code, with which the login still completes but at urn:bff:acr:pwd
// (acr_values is voluntary, OpenID Connect Core 3.1.2.1: the relying party
// must check the acr it got); a code that is not 6 digits shows the page
// again (400, #op-otp-error). Every ID token carries acr, amr and auth_time.
//
// Payment approval (RFC 9396 rich authorization requests, two types, both
// listed in the discovery document's authorization_details_types_supported,
// which the BFF requires at start with payments.step_up, and allowed to every
// configured client unless its metadata says otherwise; any other type is
// invalid_authorization_details):
//
//   - payment_initiation (a payment, validated by paymentInitiation below);
//     a merchant payment's detail carries the merchant's name and account as
//     the BFF read them from the upstream when the approval started;
//   - payee_change (a change of where money goes: the BFF holds POST
//     /v2/merchants and PUT or DELETE /v2/merchants/{id} like a payment;
//     validated by payeeChange below): action create, update or delete,
//     merchantId for an update or a deletion, and optional name,
//     creditorAccount {iban} and website.
//
// A request with authorization_details shows each detail: a payment
// (#op-payment-amount "1000.00 EUR", #op-payment-payee, #op-payment-iban,
// #op-payment-merchant, #op-payment-debtor-iban, #op-payment-remittance) or a
// change (.op-payee-change: #op-payment-change "update a payee",
// #op-payment-merchant, #op-payment-payee, #op-payment-iban,
// #op-payment-website), an element only when its field was sent, and the
// buttons Approve (#op-approve, decision=approve) and Cancel (#op-cancel,
// decision=cancel). Approve logs in (login, otp as above) and grants exactly
// the requested details, which the token response then returns as
// authorization_details; Cancel ends the interaction with access_denied.
// The login field is prefilled from login_hint.
//
// Security profile: three optional top-level keys. Without any of them the
// provider is the front-channel one the tests have always used: PAR is off
// (no pushed_authorization_request_endpoint in discovery; a request_uri is
// request_uri_not_supported) and so is DPoP (no dpop_signing_alg_values_supported;
// a DPoP header is ignored and tokens are Bearer), although oidc-provider
// turns both on by default. One line at start names the mode ("oidc-provider
// mode: profile none, PAR off, DPoP off", or "oidc-provider mode: profile
// fapi2 (FAPI 2.0 Security Profile), PAR required, DPoP on with nonces, ...").
//
//   - "par": "off" (the default), "offered" or "required" (RFC 9126, at
//     pushed_authorization_request_endpoint, /request). offered: PAR is in
//     discovery and served, the front-channel request still works. required:
//     discovery also says require_pushed_authorization_requests true, and an
//     authorization request without a pushed request_uri is refused with a
//     303 to the redirect_uri: error=invalid_request, error_description "Pushed
//     Authorization Request must be used", state and iss. The browser then
//     goes to the authorization endpoint with only client_id and request_uri
//     (the interaction page shows the pushed request: acr_values, login_hint,
//     authorization_details); a request_uri lives 60 s and is single use (a
//     second use: the error page, 400 invalid_request_uri). PAR authenticates
//     the client as the token endpoint does; its answer is 201
//     {"request_uri", "expires_in": 60}.
//   - "dpop": false (the default) or true (RFC 9449). true: DPoP is in
//     discovery (dpop_signing_alg_values_supported ES256, Ed25519, EdDSA) and
//     every DPoP proof must carry a nonce of the provider's (its secret is
//     random at each start), at the token endpoint and wherever else a proof
//     is read (PAR, userinfo): a proof without one, or with a stale one, gets
//     400 {"error": "use_dpop_nonce"} (401 with WWW-Authenticate: DPoP
//     error="use_dpop_nonce" at userinfo) and the nonce in the DPoP-Nonce
//     header; the client retries with a new proof carrying it. A token
//     request with a proof gets token_type "DPoP" and a key-bound access
//     token; a proof of another key than the dpop_jkt sent in the
//     authorization request (or PAR), or no proof for such a code, is 400
//     invalid_grant, and the code is spent by the wrong key's attempt. A
//     client whose metadata has dpop_bound_access_tokens true must send a
//     proof at the token endpoint (400 invalid_grant without one; this check
//     comes before the code is spent). PAR accepts dpop_jkt, or a DPoP header
//     (nonce rules as above) whose key binds the code.
//   - "profile": "fapi2": the FAPI 2.0 Security Profile. It implies par
//     "required" and dpop true (a config saying otherwise is refused), turns
//     on oidc-provider's features.fapi profile "2.0", and:
//       * private_key_jwt is the only client authentication
//         (token_endpoint_auth_methods_supported ["private_key_jwt"];
//         assertions signed ES256, PS256 or EdDSA); a client_secret, in the
//         body or as Basic, is 401 invalid_client ("the provided
//         authentication mechanism does not match the registered client
//         authentication method"); the assertion's aud must be exactly the
//         issuer string (not the token or PAR endpoint, not an array: 401
//         invalid_client), with iss = sub = client_id, exp and a jti never
//         used before;
//       * PKCE S256 for every request (without: 400 invalid_request at PAR);
//         redirect_uri is required even for a client with only one;
//       * ID tokens (and logout tokens) are signed PS256
//         (id_token_signing_alg_values_supported ["PS256"]);
//       * the authorization response carries iss (it always does, and
//         discovery always says authorization_response_iss_parameter_supported).
//     A client's metadata is {client_id, redirect_uris, jwks_uri (or jwks),
//     dpop_bound_access_tokens: true, response_types ["code"], grant_types
//     ["authorization_code"]}, no client_secret; token_endpoint_auth_method
//     defaults to private_key_jwt and id_token_signed_response_alg to PS256.
//     Plain http on loopback is accepted for the issuer, redirect_uris and
//     jwks_uri (oidc-provider's FAPI 2.0 profile asks for no https).
//
// With any of these keys, every client's metadata is checked at start (an
// invalid client ends the provider with status 2 and oidc-provider's message),
// and a refusal at PAR or at the token endpoint is logged with
// oidc-provider's detail ("pushed_authorization_request.error client=...: ..."
// or "grant.error client=...: invalid_grant: DPoP proof key thumbprint does
// not match dpop_jkt"), which the response hides. fapi-check.mjs in this
// directory checks the fapi2 mode end to end (node fapi-check.mjs).
import * as crypto from 'node:crypto';
import * as fs from 'node:fs';
import * as http from 'node:http';
import { isDeepStrictEqual } from 'node:util';

import Provider, { errors } from 'oidc-provider';

const cfgPath = process.argv[2] || process.env.OIDC_PROVIDER_CONFIG;
if (!cfgPath) {
  console.error('usage: node provider.mjs config.json (or OIDC_PROVIDER_CONFIG=config.json)');
  process.exit(2);
}
const cfg = JSON.parse(fs.readFileSync(cfgPath, 'utf8'));
const port = Number(cfg.port);
const issuer = cfg.issuer || `http://127.0.0.1:${port}`;
const host = cfg.host || '127.0.0.1';
if (!port) {
  console.error('config: port is required');
  process.exit(2);
}

// The security profile (see the header comment): profile, par and dpop.
function configError(msg) {
  console.error(`config: ${msg}`);
  process.exit(2);
}
if (cfg.profile !== undefined && cfg.profile !== 'fapi2') {
  configError(`profile must be "fapi2" or absent, not ${JSON.stringify(cfg.profile)}`);
}
const fapi2 = cfg.profile === 'fapi2';
if (cfg.par !== undefined && !['off', 'offered', 'required'].includes(cfg.par)) {
  configError(`par must be "off", "offered" or "required", not ${JSON.stringify(cfg.par)}`);
}
if (cfg.dpop !== undefined && typeof cfg.dpop !== 'boolean') {
  configError(`dpop must be true or false, not ${JSON.stringify(cfg.dpop)}`);
}
if (fapi2 && cfg.par !== undefined && cfg.par !== 'required') {
  configError(`profile "fapi2" requires pushed authorization requests: par must be "required" or absent, not ${JSON.stringify(cfg.par)}`);
}
if (fapi2 && cfg.dpop === false) {
  configError('profile "fapi2" requires DPoP: dpop must be true or absent');
}
const par = cfg.par ?? (fapi2 ? 'required' : 'off');
const dpop = cfg.dpop ?? fapi2;

// Signing key for ID tokens and logout tokens, fresh at every start: RS256,
// or PS256 with profile fapi2 (FAPI 2.0 allows only PS256, ES256 and EdDSA).
const idTokenAlg = fapi2 ? 'PS256' : 'RS256';
const { privateKey } = crypto.generateKeyPairSync('rsa', { modulusLength: 2048 });
const signingJWK = {
  ...privateKey.export({ format: 'jwk' }),
  kid: crypto.randomBytes(8).toString('hex'),
  use: 'sig',
  alg: idTokenAlg,
};

const html = (s) => String(s).replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`);

const page = (title, body) => `<!DOCTYPE html>
<html><head><meta charset="utf-8"><title>${html(title)}</title></head>
<body>
${body}
</body></html>
`;

// Authentication context classes, weakest first (see the header comment).
const ACR_PWD = 'urn:bff:acr:pwd';
const ACR_MFA = 'urn:bff:acr:mfa';

// The resource server payment approvals are for (see resourceIndicators).
const PAYMENTS_RESOURCE = 'urn:bff:payments';

// RFC 9396 section 2's common fields, allowed in every detail.
const RAR_COMMON = new Set(['type', 'locations', 'actions', 'datatypes', 'identifier', 'privileges']);
const PAYMENT_FIELDS = new Set([...RAR_COMMON, 'instructedAmount', 'creditorName', 'creditorAccount',
  'debtorAccount', 'merchantId', 'remittanceInformationUnstructured']);

const isObject = (v) => typeof v === 'object' && v !== null && !Array.isArray(v);
const isText = (v, max) => typeof v === 'string' && v.trim().length > 0 && v.length <= max;

function checkAccount(detail, name) {
  const acc = detail[name];
  if (acc === undefined) return;
  if (!isObject(acc) || Object.keys(acc).some((k) => k !== 'iban')
    || typeof acc.iban !== 'string' || !/^[A-Z]{2}[0-9]{2}[A-Z0-9]{11,30}$/.test(acc.iban)) {
    throw new errors.InvalidAuthorizationDetails(`payment_initiation: ${name} must be {"iban": "<IBAN, capitals, no spaces>"}`);
  }
}

// validate for type payment_initiation: instructedAmount {currency: ISO 4217
// code, amount: a positive decimal string}; creditorName, creditorAccount
// {iban}, debtorAccount {iban}, merchantId, remittanceInformationUnstructured
// optional; no other member but RFC 9396's common ones.
function paymentInitiation(ctx, detail) {
  const unknown = Object.keys(detail).filter((k) => !PAYMENT_FIELDS.has(k));
  if (unknown.length) {
    throw new errors.InvalidAuthorizationDetails(`payment_initiation: unknown member(s) ${unknown.join(', ')}`);
  }
  const amt = detail.instructedAmount;
  if (!isObject(amt) || Object.keys(amt).some((k) => k !== 'currency' && k !== 'amount')
    || typeof amt.currency !== 'string' || !/^[A-Z]{3}$/.test(amt.currency)
    || typeof amt.amount !== 'string' || !/^[0-9]{1,15}(\.[0-9]{1,5})?$/.test(amt.amount)
    || !/[1-9]/.test(amt.amount)) {
    throw new errors.InvalidAuthorizationDetails('payment_initiation: instructedAmount must be {"currency": "EUR", "amount": "1000.00"} with a positive decimal string amount');
  }
  for (const [name, max] of [['creditorName', 140], ['merchantId', 140], ['remittanceInformationUnstructured', 140]]) {
    if (detail[name] !== undefined && !isText(detail[name], max)) {
      throw new errors.InvalidAuthorizationDetails(`payment_initiation: ${name} must be a non-empty string of at most ${max} characters`);
    }
  }
  checkAccount(detail, 'creditorAccount');
  checkAccount(detail, 'debtorAccount');
}

// validate for type payee_change (a change of where money goes, held by the
// BFF like a payment): action create, update or delete; merchantId for an
// update or a deletion; name, creditorAccount {iban} and website optional
// strings; no other member but RFC 9396's common ones.
const PAYEE_FIELDS = new Set([...RAR_COMMON, 'action', 'merchantId', 'name', 'creditorAccount', 'website']);
function payeeChange(ctx, detail) {
  const unknown = Object.keys(detail).filter((k) => !PAYEE_FIELDS.has(k));
  if (unknown.length) {
    throw new errors.InvalidAuthorizationDetails(`payee_change: unknown member(s) ${unknown.join(', ')}`);
  }
  if (!['create', 'update', 'delete'].includes(detail.action)) {
    throw new errors.InvalidAuthorizationDetails('payee_change: action must be create, update or delete');
  }
  if (detail.action !== 'create' && !isText(detail.merchantId, 140)) {
    throw new errors.InvalidAuthorizationDetails('payee_change: an update or a deletion names its merchantId');
  }
  for (const [name, max] of [['name', 140], ['website', 2048]]) {
    if (detail[name] !== undefined && !isText(detail[name], max)) {
      throw new errors.InvalidAuthorizationDetails(`payee_change: ${name} must be a non-empty string of at most ${max} characters`);
    }
  }
  checkAccount(detail, 'creditorAccount');
}

// The details an authorization request asked for: params.authorization_details
// is the JSON text, already validated by the authorization endpoint.
function requestedDetails(params) {
  return params.authorization_details ? JSON.parse(params.authorization_details) : undefined;
}

const configuration = {
  // A client may ask for payment_initiation details unless its metadata in the
  // config says otherwise (oidc-provider's own default is no type at all).
  // With profile fapi2 a client authenticates with private_key_jwt and gets
  // PS256 ID tokens unless its metadata says otherwise.
  clients: (cfg.clients || []).map((c) => ({
    authorization_details_types: ['payment_initiation', 'payee_change'],
    ...(fapi2 ? { token_endpoint_auth_method: 'private_key_jwt', id_token_signed_response_alg: idTokenAlg } : {}),
    ...c,
  })),
  // profile fapi2: private_key_jwt is the only client authentication (no
  // client_secret of any kind, no public client), its assertions signed with
  // ES256, PS256 or EdDSA.
  ...(fapi2 ? {
    clientAuthMethods: ['private_key_jwt'],
    enabledJWA: { clientAuthSigningAlgValues: ['ES256', 'PS256', 'EdDSA'] },
  } : {}),
  acrValues: [ACR_PWD, ACR_MFA],
  jwks: { keys: [signingJWK] },
  cookies: {
    // Distinct names: cookies are not port-scoped, so a browser (cookie jar)
    // also sends the OP's cookies to a BFF on 127.0.0.1 and vice versa.
    names: {
      session: 'op_session',
      interaction: 'op_interaction',
      resume: 'op_interaction_resume',
    },
    keys: [crypto.randomBytes(32).toString('base64url')],
    // Plain http on loopback: never mark cookies Secure (oidc-provider only
    // does so when the request itself is https anyway).
    long: { httpOnly: true, sameSite: 'lax', secure: false },
    short: { httpOnly: true, sameSite: 'lax', secure: false },
  },
  claims: {
    // oidc-provider's defaults, which a claims object replaces.
    acr: null,
    auth_time: null,
    sid: null,
    iss: null,
    // acr, amr and auth_time under openid: every ID token carries them, not
    // only one whose request sent acr_values, max_age or prompt=login.
    openid: ['sub', 'acr', 'amr', 'auth_time'],
    profile: ['name'],
    email: ['email'],
  },
  scopes: ['openid', 'profile', 'email', 'offline_access'],
  // Put the scope-granted claims (name, email) in the ID token too, not only
  // at the userinfo endpoint.
  conformIdTokenClaims: false,
  responseTypes: ['code'],
  // Explicit lifetimes (seconds); the config file's "ttl" object overrides
  // them, e.g. {"IdToken": 5} to test expiry.
  ttl: {
    AccessToken: 3600,
    AuthorizationCode: 60,
    IdToken: 3600,
    Interaction: 3600,
    Grant: 86400,
    Session: 86400,
    ...(cfg.ttl || {}),
  },
  pkce: { required: () => true }, // S256 is the only method oidc-provider v9 accepts
  features: {
    devInteractions: { enabled: false },
    // oidc-provider's own FAPI 2.0 rules (profile fapi2): PKCE for every
    // client, a client assertion's aud must be exactly the issuer, and the
    // redirect_uri must be sent even when the client has only one.
    fapi: fapi2 ? { enabled: true, profile: '2.0' } : { enabled: false },
    // RFC 9126 (config "par"). oidc-provider enables it by default; off, it is
    // neither advertised nor served, and a request_uri is request_uri_not_supported.
    pushedAuthorizationRequests: {
      enabled: par !== 'off',
      requirePushedAuthorizationRequests: par === 'required',
    },
    // RFC 9449 (config "dpop"). oidc-provider enables it by default; off, a
    // DPoP header is ignored and tokens are Bearer. On, every proof must carry
    // a nonce of ours (a random secret per start): the first proof without one
    // gets use_dpop_nonce and the nonce in the DPoP-Nonce header.
    dPoP: dpop ? {
      enabled: true,
      nonceSecret: crypto.randomBytes(32),
      requireNonce: () => true,
    } : { enabled: false },
    backchannelLogout: { enabled: true },
    rpInitiatedLogout: {
      enabled: true,
      // A trivially parseable confirm page. `form` is oidc-provider's
      // <form id="op.logoutForm" method="post" action="..."><input type="hidden" name="xsrf" value="..."/></form>
      async logoutSource(ctx, form) {
        ctx.type = 'html';
        ctx.body = page('Logout', `<h1>Sign out?</h1>
${form}
<button type="submit" form="op.logoutForm" name="logout" value="yes">Yes, sign me out</button>
<button type="submit" form="op.logoutForm">No, stay signed in</button>`);
      },
      async postLogoutSuccessSource(ctx) {
        ctx.type = 'html';
        ctx.body = page('Signed out', '<p id="op-logged-out">Signed out.</p>');
      },
    },
    userinfo: { enabled: true },
    // oidc-provider refuses authorization_details without a resource
    // indicator: a request with them (and no resource of its own) is for
    // PAYMENTS_RESOURCE. A request without them gets no resource, as before:
    // its access token is the userinfo one, and so is a step-up's (the
    // resource is only the code's; the token request names none).
    resourceIndicators: {
      enabled: true,
      async defaultResource(ctx, client, oneOf) {
        if (oneOf) return oneOf;
        return ctx.oidc.params.authorization_details ? PAYMENTS_RESOURCE : undefined;
      },
      async getResourceServerInfo(ctx, indicator) {
        if (indicator !== PAYMENTS_RESOURCE) throw new errors.InvalidTarget();
        return { scope: '', accessTokenFormat: 'opaque' };
      },
    },
    richAuthorizationRequests: {
      enabled: true,
      types: { payment_initiation: { validate: paymentInitiation }, payee_change: { validate: payeeChange } },
      // The code carries the details this request asked for and the grant
      // holds (the user approved them), never details an earlier approval
      // left on the grant: a login without authorization_details gets none.
      async authorizationDetailsForGrantSource(ctx) {
        const requested = requestedDetails(ctx.oidc.params);
        if (!requested) return undefined;
        const granted = ctx.oidc.grant?.rar || [];
        return requested.filter((d) => granted.some((g) => isDeepStrictEqual(g, d)));
      },
      // The access token, and so the token response (RFC 9396 section 7),
      // carries what the code carried.
      async authorizationDetailsForAccessToken(ctx, token, source) {
        return source?.rar;
      },
      async authorizationDetailsForIntrospection(ctx, token) {
        return token.rar;
      },
    },
  },
  interactions: {
    url: (ctx, interaction) => `/interaction/${interaction.uid}`,
  },
  async findAccount(ctx, sub) {
    return {
      accountId: sub,
      async claims() {
        return { sub, email: `${sub}@example.test`, name: sub };
      },
    };
  },
  async renderError(ctx, out, error) {
    ctx.type = 'html';
    const lines = Object.entries(out).map(([k, v]) => `${k}: ${v}`).join('\n');
    ctx.body = page('Error', `<pre id="op-error">\n${html(lines)}\n</pre>`);
    console.error(`oidc-provider error page: ${JSON.stringify(out)}${error?.message ? ` (${error.message})` : ''}`);
  },
  // oidc-provider refuses outgoing requests (back-channel logout) to
  // special-use addresses such as 127.0.0.1; the test RPs live there.
  fetch(url, options) {
    delete options.dispatcher;
    return globalThis.fetch(url, options);
  },
};

const provider = new Provider(issuer, configuration);

provider.on('backchannel.success', (ctx, client, accountId, sid) => {
  console.log(`backchannel logout ok client=${client.clientId} sub=${accountId} sid=${sid}`);
});
provider.on('backchannel.error', (ctx, err, client, accountId, sid) => {
  console.error(`backchannel logout FAILED client=${client.clientId} sub=${accountId} sid=${sid}: ${err.message}`);
});
provider.on('server_error', (ctx, err) => console.error('server_error:', err));
// With PAR or DPoP on, a refusal at PAR or the token endpoint is logged with
// oidc-provider's detail, which the response hides (an invalid_grant's
// error_description is only "grant request is invalid"). use_dpop_nonce, the
// expected first answer to every DPoP proof without a nonce, is not.
if (par !== 'off' || dpop) {
  for (const event of ['pushed_authorization_request.error', 'grant.error']) {
    provider.on(event, (ctx, err) => {
      if (err.error === 'use_dpop_nonce') return;
      console.error(`${event} client=${ctx.oidc?.client?.clientId ?? '-'}: ${err.error}: ${err.error_detail || err.error_description || err.message}`);
    });
  }
}

function readForm(req) {
  return new Promise((resolve, reject) => {
    let body = '';
    req.setEncoding('utf8');
    req.on('data', (chunk) => {
      body += chunk;
      if (body.length > 64 * 1024) reject(new Error('body too large'));
    });
    req.on('end', () => resolve(new URLSearchParams(body)));
    req.on('error', reject);
  });
}

function send(res, status, type, body) {
  res.statusCode = status;
  res.setHeader('Content-Type', type);
  res.setHeader('Cache-Control', 'no-store');
  res.end(body);
}

// What an interaction asks of the user, from its authorization request.
function interactionView(details) {
  const { params } = details;
  const acrValues = String(params.acr_values || '').split(' ').filter(Boolean);
  return {
    mfa: acrValues.includes(ACR_MFA),
    payments: requestedDetails(params) || [],
    loginHint: typeof params.login_hint === 'string' ? params.login_hint : '',
  };
}

// One payment as the user approves it. The first payment's elements have the
// ids the browser tests read (#op-payment-amount, ...); a second one's end in
// -2, and so on. An element is there only when its field was sent.
function paymentHTML(detail, i) {
  const id = (name) => (i === 0 ? `op-payment-${name}` : `op-payment-${name}-${i + 1}`);
  const row = (name, label, value) => (value === undefined ? ''
    : `<dt>${label}</dt><dd id="${id(name)}">${html(value)}</dd>\n`);
  if (detail.type === 'payee_change') {
    return `<dl class="op-payee-change">
${row('change', 'Change', `${detail.action} a payee`)}${row('merchant', 'Merchant', detail.merchantId)}\
${row('payee', 'Payee', detail.name)}${row('iban', 'Payee IBAN', detail.creditorAccount?.iban)}\
${row('website', 'Website', detail.website)}</dl>`;
  }
  const amt = detail.instructedAmount;
  return `<dl class="op-payment">
${row('amount', 'Amount', `${amt.amount} ${amt.currency}`)}${row('payee', 'Payee', detail.creditorName)}\
${row('iban', 'Payee IBAN', detail.creditorAccount?.iban)}${row('merchant', 'Merchant', detail.merchantId)}\
${row('debtor-iban', 'From account', detail.debtorAccount?.iban)}\
${row('remittance', 'Reference', detail.remittanceInformationUnstructured)}</dl>`;
}

// The interaction page: one form posting to /interaction/{uid}/login with
// "login" (prefilled from login_hint), "otp" when urn:bff:acr:mfa was asked
// for, and either a "Sign in" button or, for a payment, Approve and Cancel.
function interactionPage(uid, details, view, { login, error, otpError } = {}) {
  const pay = view.payments.length > 0;
  const value = login ?? view.loginHint;
  return page(pay ? 'Approve payment' : 'Login', `<h1>Login (${html(details.prompt.name)})</h1>
${pay ? `<section id="op-payment">
<h2>Approve this payment</h2>
${view.payments.map(paymentHTML).join('\n')}
</section>` : ''}
${error ? `<p id="op-form-error" role="alert">${html(error)}</p>` : ''}
<form method="post" action="/interaction/${html(uid)}/login">
<label>Username <input id="op-login" name="login" value="${html(value)}"${view.mfa ? '' : ' autofocus'}></label>
${view.mfa ? `<label>One-time code <input id="op-otp" name="otp" inputmode="numeric" autocomplete="one-time-code" autofocus></label>
${otpError ? `<p id="op-otp-error" role="alert">${html(otpError)}</p>` : ''}` : ''}
${pay ? `<button type="submit" id="op-approve" name="decision" value="approve">Approve</button>
<button type="submit" id="op-cancel" name="decision" value="cancel">Cancel</button>`
    : '<button type="submit">Sign in</button>'}
</form>`);
}

// The login "UI": GET shows the form, POST logs the user in as the given
// username at the level the one-time code earns (see the header comment) and
// grants the requested scopes and authorization details, in one step.
async function interaction(req, res, uid, action) {
  const details = await provider.interactionDetails(req, res);
  if (details.uid !== uid) throw new errors.SessionNotFound('interaction uid mismatch');
  const view = interactionView(details);
  const show = (status, opts) => send(res, status, 'text/html; charset=utf-8', interactionPage(uid, details, view, opts));

  if (req.method === 'GET' && !action) {
    show(200);
    return;
  }

  if (req.method === 'POST' && action === 'login') {
    const form = await readForm(req);
    const decision = form.get('decision') || '';
    if (decision === 'cancel') {
      await provider.interactionFinished(req, res, {
        error: 'access_denied',
        error_description: view.payments.length ? 'the user cancelled the payment' : 'the user cancelled',
      }, { mergeWithLastSubmission: false });
      return;
    }
    const login = (form.get('login') || '').trim();
    if (view.payments.length && decision !== 'approve') {
      show(400, { login, error: 'Approve or cancel the payment.' });
      return;
    }
    if (!login) {
      show(400, { login, error: 'Enter a username.' });
      return;
    }
    if (login === 'reject') {
      await provider.interactionFinished(req, res, {
        error: 'access_denied',
        error_description: 'the user refused',
      }, { mergeWithLastSubmission: false });
      return;
    }

    // Any 6 digits are a right code but 000000 (see the header comment).
    const otp = (form.get('otp') || '').trim();
    if (view.mfa && !/^[0-9]{6}$/.test(otp)) {
      show(400, { login, otpError: 'Enter the 6-digit one-time code.' });
      return;
    }
    const mfa = /^[0-9]{6}$/.test(otp) && otp !== '000000';

    const { params, session } = details;
    // A consent-only prompt (the user already has an OP session, e.g. a
    // second client) keeps the session's account; otherwise log in as `login`.
    const accountId = details.prompt.name !== 'login' && session?.accountId ? session.accountId : login;

    let grant;
    if (details.grantId && session?.accountId === accountId) {
      grant = await provider.Grant.find(details.grantId);
    }
    if (!grant) {
      grant = new provider.Grant({ accountId, clientId: params.client_id });
    }
    const missing = details.prompt.details || {};
    grant.addOIDCScope(String(params.scope || 'openid'));
    if (missing.missingOIDCClaims) grant.addOIDCClaims(missing.missingOIDCClaims);
    if (missing.missingResourceScopes) {
      for (const [indicator, scopes] of Object.entries(missing.missingResourceScopes)) {
        grant.addResourceScope(indicator, scopes.join(' '));
      }
    }
    // Approve grants exactly the details the request asked for (the prompt
    // lists them only when consent is the pending prompt, not behind login).
    for (const detail of view.payments) {
      if (!(grant.rar || []).some((g) => isDeepStrictEqual(g, detail))) grant.addRar(detail);
    }
    const grantId = await grant.save();

    await provider.interactionFinished(req, res, {
      login: {
        accountId,
        acr: mfa ? ACR_MFA : ACR_PWD,
        amr: mfa ? ['pwd', 'otp'] : ['pwd'],
        ts: Math.floor(Date.now() / 1000),
        remember: true,
      },
      consent: { grantId },
    }, { mergeWithLastSubmission: false });
    return;
  }

  send(res, 405, 'text/plain; charset=utf-8', 'method not allowed\n');
}

const opCallback = provider.callback();

const server = http.createServer(async (req, res) => {
  const m = /^\/interaction\/([^/?]+)(?:\/([a-z]+))?\/?(?:\?.*)?$/.exec(req.url);
  if (!m) {
    opCallback(req, res);
    return;
  }
  try {
    await interaction(req, res, m[1], m[2]);
  } catch (err) {
    console.error(`interaction ${req.method} ${req.url}: ${err.message}`);
    if (!res.headersSent) {
      const status = err.statusCode || err.status || 500;
      send(res, status, 'text/plain; charset=utf-8', `${err.name}: ${err.message}\n`);
    } else {
      res.end();
    }
  }
});

console.log(fapi2
  ? 'oidc-provider mode: profile fapi2 (FAPI 2.0 Security Profile), PAR required, DPoP on with nonces, private_key_jwt only, PKCE S256, PS256 ID tokens'
  : `oidc-provider mode: profile none, PAR ${par}, DPoP ${dpop ? 'on with nonces' : 'off'}`);

// With any of the new keys, every client's metadata is checked at start (a
// fapi2 client without jwks or jwks_uri, or with a client_secret method,
// ends it with status 2) rather than at its first request, as oidc-provider
// does by default.
if (fapi2 || cfg.par !== undefined || cfg.dpop !== undefined) {
  for (const c of configuration.clients) {
    try {
      await provider.Client.find(String(c.client_id));
    } catch (err) {
      configError(`client ${c.client_id}: ${err.error_description || err.message}`);
    }
  }
}

server.listen(port, host, () => {
  console.log(`oidc-provider listening on ${issuer}`);
});

function shutdown(signal) {
  server.close(() => process.exit(0));
  server.closeAllConnections();
  setTimeout(() => process.exit(0), 2000).unref();
  console.log(`oidc-provider: ${signal}, shutting down`);
}
process.on('SIGTERM', () => shutdown('SIGTERM'));
process.on('SIGINT', () => shutdown('SIGINT'));
