#!/usr/bin/env bash
# `make run`: the upstream simulator and the BFF with the development config
# (dev login, in-process store, plain-http cookie), serving the example web
# app (web/app) through static_dir. Needs Go, and Node.js (>= 20.19) for the
# web app: without npm the BFF runs with no app at /.
#
# One setting moves everything: PORT (default 8080) is the BFF's public port;
# the admin listener is on ADMIN_PORT (default PORT + 1010, so 9090) and the
# simulator on SIM_PORT (default PORT + 1, so 8081). The BFF's public URL,
# its upstream and the simulator's redirect allow-list (the example app's
# return pages) all follow: `make run PORT=3000`.
#
# RUN_AUTH (`make run AUTH=...`) picks how users sign in:
#   dev    (the default) config.dev.yaml's auth.mode dev: any user id, no password.
#   oidc   auth.mode oidc against the e2e tests' OpenID provider
#          (e2e/oidcprovider/provider.mjs, Node.js >= 20.19), started on
#          OP_PORT (default PORT + 2) with one client for the BFF
#          (client_secret_basic), and payments.step_up on: a payment of
#          100.00 or more in ILS (the example app's currency) or EUR, or any
#          payment in another currency, waits for the user's approval at the
#          provider (a one-time code, urn:bff:acr:mfa).
#   fapi2  the same with the provider's and the BFF's FAPI 2.0 profile: PAR,
#          private_key_jwt (a P-256 key generated at every start into a
#          temporary directory, its public part at /auth/jwks.json, which the
#          provider fetches) and DPoP-bound codes.
# The config is config.dev.yaml with BFF_* environment overrides, as for the
# ports. Every process started here is stopped when the script ends.
set -euo pipefail
cd "$(dirname "$0")/.."

PORT="${PORT:-8080}"
RUN_BFF_BIN="${RUN_BFF_BIN:-./bin/bff}"   # make build's; a test passes its own (not BFF_*: those are config keys)
RUN_SIM_BIN="${RUN_SIM_BIN:-./bin/upstream-sim}"
RUN_AUTH="${RUN_AUTH:-dev}"
case "$RUN_AUTH" in
  dev|oidc|fapi2) ;;
  *) echo "make run: AUTH=$RUN_AUTH is not dev, oidc or fapi2" >&2; exit 2 ;;
esac
ADMIN_PORT="${ADMIN_PORT:-$((PORT + 1010))}"
SIM_PORT="${SIM_PORT:-$((PORT + 1))}"
OP_PORT="${OP_PORT:-$((PORT + 2))}"
ports=(PORT ADMIN_PORT SIM_PORT)
if [ "$RUN_AUTH" != dev ]; then
  ports+=(OP_PORT)
fi
for v in "${ports[@]}"; do
  p="${!v}"
  if ! [[ "$p" =~ ^[0-9]+$ ]] || [ "$p" -lt 1 ] || [ "$p" -gt 65535 ]; then
    echo "make run: $v=$p is not a port (1-65535)" >&2
    exit 2
  fi
  # A port taken by another program would fail later with a less clear message.
  if (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null; then
    echo "make run: port $p ($v) is already in use on 127.0.0.1; choose another, e.g. make run PORT=$((PORT + 100))" >&2
    exit 2
  fi
done
PUBLIC="http://localhost:$PORT"

# The OpenID provider is the e2e tests' one, on Node.js: without it there is
# no sign-in at all, so stop here rather than start a BFF nobody can use.
OP_DIR=e2e/oidcprovider
OP_ISSUER="http://127.0.0.1:$OP_PORT"
if [ "$RUN_AUTH" != dev ] && ! ./scripts/check-node.sh; then
  echo "make run: AUTH=$RUN_AUTH runs the test OpenID provider ($OP_DIR) on Node.js; make run (AUTH=dev) needs no provider" >&2
  exit 2
fi

# Everything started below, and the run directory (the provider's config,
# the BFF's client keys), goes when the script ends, however it ends.
pids=()
run_dir=""
cleanup() {
  if [ "${#pids[@]}" -gt 0 ]; then
    kill "${pids[@]}" 2>/dev/null || true
    wait "${pids[@]}" 2>/dev/null || true
  fi
  if [ -n "$run_dir" ]; then
    rm -rf "$run_dir"
  fi
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# npm ci when the lock file is newer than what is installed in directory $1.
npm_ci_if_stale() {
  if [ ! -f "$1/node_modules/.package-lock.json" ] || [ "$1/package-lock.json" -nt "$1/node_modules/.package-lock.json" ]; then
    npm ci --prefix "$1" --no-audit --no-fund
  fi
}

# The example web app (RUN_APP, `make run APP=...`: web/app, or the React
# example web/react-app): install its dependencies when the lock file is
# newer than what is installed, then build dist/ (about a second).
APP="${RUN_APP:-web/app}"
case "$APP" in
  web/app|web/react-app) ;;
  *) echo "make run: APP=$APP is not an example app (web/app or web/react-app)" >&2; exit 2 ;;
esac
if [ "$RUN_AUTH" = dev ]; then
  app_line="Then open $PUBLIC: the example web app (sign in as alice)."
else
  app_line="Then open $PUBLIC: the example web app; its Sign in goes to the provider."
fi
if command -v npm >/dev/null 2>&1 && ./scripts/check-node.sh; then
  npm_ci_if_stale "$APP"
  npm run build --prefix "$APP" --silent
  export BFF_STATIC_DIR="${BFF_STATIC_DIR:-$APP/dist}"
else
  echo "starting without the example web app: it needs npm and Node.js >= 20.19" >&2
  app_line="No web app at /: install Node.js >= 20.19 (with npm) for it."
  if [ "$RUN_AUTH" != dev ]; then
    app_line="$app_line $PUBLIC/auth/login signs in all the same."
  fi
fi

# The example app's return pages, on both names a browser may use.
redirects="$PUBLIC/payment-done,$PUBLIC/connection-done,http://127.0.0.1:$PORT/payment-done,http://127.0.0.1:$PORT/connection-done"
# Payment-status webhooks to the BFF (config.dev.yaml's webhook_path), signed
# with the simulator's public development secret.
"$RUN_SIM_BIN" -listen "127.0.0.1:$SIM_PORT" -control -client-id dev-client -client-secret dev-secret \
  -allowed-redirect-urls "$redirects" -webhook-url "http://127.0.0.1:$PORT/webhooks/payments" &
pids+=($!)

up=""
for _ in $(seq 50); do
  if (exec 3<>"/dev/tcp/127.0.0.1/$SIM_PORT") 2>/dev/null; then up=1; break; fi
  sleep 0.1
done
if [ -z "$up" ]; then
  echo "make run: the upstream simulator did not start on 127.0.0.1:$SIM_PORT" >&2
  exit 1
fi

export BFF_LISTEN="127.0.0.1:$PORT" BFF_ADMIN_LISTEN="127.0.0.1:$ADMIN_PORT" BFF_PUBLIC_URL="$PUBLIC"
export BFF_UPSTREAM_BASE_URL="http://127.0.0.1:$SIM_PORT"

if [ "$RUN_AUTH" != dev ]; then
  npm_ci_if_stale "$OP_DIR"
  run_dir="$(mktemp -d "${TMPDIR:-/tmp}/bff-make-run.XXXXXX")"
  client_id=bff-make-run
  if [ "$RUN_AUTH" = fapi2 ]; then
    # The BFF's private_key_jwt key: a fresh P-256 key in a JWK Set. The
    # provider reads its public part from the BFF's /auth/jwks.json when the
    # first client assertion comes, so after the BFF is up.
    node -e '
      const crypto = require("node:crypto");
      const jwk = crypto.generateKeyPairSync("ec", { namedCurve: "P-256" }).privateKey.export({ format: "jwk" });
      const kid = "make-run-" + crypto.randomBytes(6).toString("hex");
      console.log(JSON.stringify({ keys: [{ ...jwk, kid, alg: "ES256", use: "sig" }] }));
    ' >"$run_dir/client-keys.json"
    op_profile='"profile": "fapi2",'
    client_auth="\"token_endpoint_auth_method\": \"private_key_jwt\",
      \"jwks_uri\": \"$PUBLIC/auth/jwks.json\",
      \"dpop_bound_access_tokens\": true,"
  else
    client_secret=make-run-dev-secret   # a development secret, as public as this script
    op_profile=""
    client_auth="\"token_endpoint_auth_method\": \"client_secret_basic\",
      \"client_secret\": \"$client_secret\","
  fi
  cat >"$run_dir/provider.json" <<JSON
{
  "port": $OP_PORT,
  "issuer": "$OP_ISSUER",
  $op_profile
  "clients": [
    {
      "client_id": "$client_id",
      $client_auth
      "redirect_uris": ["$PUBLIC/auth/callback"],
      "post_logout_redirect_uris": ["$PUBLIC/"],
      "backchannel_logout_uri": "$PUBLIC/auth/backchannel-logout",
      "backchannel_logout_session_required": true,
      "grant_types": ["authorization_code"],
      "response_types": ["code"]
    }
  ]
}
JSON
  # The BFF reads the provider's discovery document at start: wait for it.
  # Node starts the provider in about a second; on a loaded machine a start
  # has been seen to stall past 40 s, so each attempt gets 25 s and a
  # stalled one is stopped and started again, three attempts in all (as the
  # e2e tests' own harness does).
  discovery="$OP_ISSUER/.well-known/openid-configuration"
  up=""
  for attempt in 1 2 3; do
    NODE_ENV="test" node "$OP_DIR/provider.mjs" "$run_dir/provider.json" &
    op=$!
    pids+=("$op")
    deadline=$((SECONDS + 25))
    while [ "$SECONDS" -lt "$deadline" ]; do
      if ! kill -0 "$op" 2>/dev/null; then
        echo "make run: the OpenID provider ($OP_DIR/provider.mjs) exited; its output is above" >&2
        exit 1
      fi
      # A connect first (no process), the document once the port is open.
      if (exec 3<>"/dev/tcp/127.0.0.1/$OP_PORT") 2>/dev/null &&
        node -e 'fetch(process.argv[1], { signal: AbortSignal.timeout(2000) }).then((r) => process.exit(r.ok ? 0 : 1), () => process.exit(1))' "$discovery"; then
        up=1
        break
      fi
      sleep 0.2
    done
    [ -n "$up" ] && break
    echo "make run: the OpenID provider did not answer at $discovery within 25 s (attempt $attempt of 3); starting it again" >&2
    kill "$op" 2>/dev/null || true
    wait "$op" 2>/dev/null || true
  done
  if [ -z "$up" ]; then
    echo "make run: the OpenID provider did not answer at $discovery" >&2
    exit 1
  fi

  export BFF_AUTH_MODE=oidc BFF_AUTH_OIDC_ISSUER="$OP_ISSUER" BFF_AUTH_OIDC_CLIENT_ID="$client_id"
  export BFF_AUTH_OIDC_REDIRECT_URL="$PUBLIC/auth/callback" BFF_AUTH_OIDC_SCOPES='[openid, profile, email]'
  if [ "$RUN_AUTH" = fapi2 ]; then
    export BFF_AUTH_OIDC_PROFILE=fapi2 BFF_AUTH_OIDC_CLIENT_KEYS_FILE="$run_dir/client-keys.json"
    unset BFF_AUTH_OIDC_CLIENT_SECRET
  else
    export BFF_AUTH_OIDC_CLIENT_SECRET="$client_secret"
  fi
  # Payments the user approves (docs/payments.md): at or over 100.00 in the
  # app's ILS or in EUR; a currency not listed is always held.
  export BFF_PAYMENTS_STEP_UP_ENABLED=true BFF_PAYMENTS_STEP_UP_ACR_VALUES='["urn:bff:acr:mfa"]'
  export BFF_PAYMENTS_STEP_UP_THRESHOLDS='["ILS 100.00", "EUR 100.00"]'
fi

if [ "$RUN_AUTH" = dev ]; then
  cat <<TXT

  The BFF listens on $PUBLIC (admin: http://127.0.0.1:$ADMIN_PORT),
  in front of the upstream simulator on http://127.0.0.1:$SIM_PORT.

  $app_line

  Or try the API, in another terminal:

    curl -s -c /tmp/bff.jar -H 'Content-Type: application/json' \\
         -d '{"userId":"alice"}' $PUBLIC/auth/dev/login
    curl -s -b /tmp/bff.jar $PUBLIC/api/v2/payments
    curl -s -b /tmp/bff.jar -c /tmp/bff.jar -X POST -H 'X-CSRF: 1' $PUBLIC/auth/logout -o /dev/null -w '%{http_code}\n'
    curl -s -b /tmp/bff.jar $PUBLIC/api/v2/payments

  (the last one answers 401 SESSION_REQUIRED). A payment that succeeds, its record
  and its live status: README.md, "Try it". Ctrl-C stops both.

TXT
else
  if [ "$RUN_AUTH" = fapi2 ]; then
    profile_words=", auth.oidc.profile fapi2"
    fapi2_lines="
  FAPI 2.0: every authorization request goes through PAR, so the browser's URL
  at the provider carries only client_id and request_uri; the BFF authenticates
  with private_key_jwt (a key made for this run, public at $PUBLIC/auth/jwks.json)
  and redeems DPoP-bound codes.
"
  else
    profile_words=""
    fapi2_lines=""
  fi
  cat <<TXT

  The BFF listens on $PUBLIC (admin: http://127.0.0.1:$ADMIN_PORT),
  in front of the upstream simulator on http://127.0.0.1:$SIM_PORT.
  Users sign in at the test OpenID provider on $OP_ISSUER
  ($OP_DIR/provider.mjs): auth.mode oidc$profile_words.

  $app_line
  At the provider, sign in with any username (no password).

  Payments of 100.00 or more in ILS (the app's currency) or EUR, and any payment
  in another currency, wait for your approval at the provider: it shows the amount
  and the payee and asks a one-time code, any 6 digits. 000000 is the wrong code:
  the approval is then refused and the payment is never sent. Smaller payments are
  sent at once, as with AUTH=dev.
$fapi2_lines
  There is no dev login in this mode. Where a sign-in goes, in another terminal:

    curl -s -o /dev/null -w '%{redirect_url}\n' $PUBLIC/auth/login

  Ctrl-C stops the BFF, the simulator and the provider.

TXT
fi
# In the background, so that a signal to this script alone (not to its
# process group, as Ctrl-C's) also stops everything at once.
"$RUN_BFF_BIN" -config config.dev.yaml &
pids+=($!)
wait "$!"
