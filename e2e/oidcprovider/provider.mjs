// A real OpenID provider (panva/oidc-provider, OpenID Certified) for the
// BFF's end-to-end tests. Started by e2e/oidc_harness_test.go as
//
//	node provider.mjs /path/to/config.json
//
// (or with OIDC_PROVIDER_CONFIG=/path/to/config.json). The config is
//
//	{"port": 1234, "issuer": "http://127.0.0.1:1234", "clients": [ ...client metadata... ]}
//
// It is deliberately test-only: plain http on loopback, keys generated at
// start, in-memory storage, no real user database (any username logs in, the
// username "reject" refuses), consent granted automatically, and outgoing
// back-channel logout calls allowed to loopback addresses.
import * as crypto from 'node:crypto';
import * as fs from 'node:fs';
import * as http from 'node:http';

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

// Signing key for ID tokens and logout tokens, fresh at every start.
const { privateKey } = crypto.generateKeyPairSync('rsa', { modulusLength: 2048 });
const signingJWK = {
  ...privateKey.export({ format: 'jwk' }),
  kid: crypto.randomBytes(8).toString('hex'),
  use: 'sig',
  alg: 'RS256',
};

const html = (s) => String(s).replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`);

const page = (title, body) => `<!DOCTYPE html>
<html><head><meta charset="utf-8"><title>${html(title)}</title></head>
<body>
${body}
</body></html>
`;

const configuration = {
  clients: cfg.clients || [],
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
    openid: ['sub'],
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

// The login "UI": GET shows a one-field form, POST logs the user in as the
// given username and grants the requested scopes, in one step.
async function interaction(req, res, uid, action) {
  const details = await provider.interactionDetails(req, res);
  if (details.uid !== uid) throw new errors.SessionNotFound('interaction uid mismatch');

  if (req.method === 'GET' && !action) {
    send(res, 200, 'text/html; charset=utf-8', page('Login', `<h1>Login (${html(details.prompt.name)})</h1>
<form method="post" action="/interaction/${html(uid)}/login">
<input name="login" autofocus>
<button type="submit">Sign in</button>
</form>`));
    return;
  }

  if (req.method === 'POST' && action === 'login') {
    const form = await readForm(req);
    const login = (form.get('login') || '').trim();
    if (!login) {
      send(res, 400, 'text/plain; charset=utf-8', 'login is required\n');
      return;
    }
    if (login === 'reject') {
      await provider.interactionFinished(req, res, {
        error: 'access_denied',
        error_description: 'the user refused',
      }, { mergeWithLastSubmission: false });
      return;
    }

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
    const grantId = await grant.save();

    await provider.interactionFinished(req, res, {
      login: { accountId, remember: true },
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
