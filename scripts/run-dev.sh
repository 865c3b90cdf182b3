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
set -euo pipefail
cd "$(dirname "$0")/.."

PORT="${PORT:-8080}"
RUN_BFF_BIN="${RUN_BFF_BIN:-./bin/bff}"   # make build's; a test passes its own (not BFF_*: those are config keys)
RUN_SIM_BIN="${RUN_SIM_BIN:-./bin/upstream-sim}"
ADMIN_PORT="${ADMIN_PORT:-$((PORT + 1010))}"
SIM_PORT="${SIM_PORT:-$((PORT + 1))}"
for v in PORT ADMIN_PORT SIM_PORT; do
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

# The example web app (RUN_APP, `make run APP=...`: web/app, or the React
# example web/react-app): install its dependencies when the lock file is
# newer than what is installed, then build dist/ (about a second).
APP="${RUN_APP:-web/app}"
case "$APP" in
  web/app|web/react-app) ;;
  *) echo "make run: APP=$APP is not an example app (web/app or web/react-app)" >&2; exit 2 ;;
esac
app_line="Then open $PUBLIC: the example web app (sign in as alice)."
if command -v npm >/dev/null 2>&1 && ./scripts/check-node.sh; then
  if [ ! -f "$APP/node_modules/.package-lock.json" ] || [ "$APP/package-lock.json" -nt "$APP/node_modules/.package-lock.json" ]; then
    npm ci --prefix "$APP" --no-audit --no-fund
  fi
  npm run build --prefix "$APP" --silent
  export BFF_STATIC_DIR="${BFF_STATIC_DIR:-$APP/dist}"
else
  echo "starting without the example web app: it needs npm and Node.js >= 20.19" >&2
  app_line="No web app at /: install Node.js >= 20.19 (with npm) for it."
fi

# The example app's return pages, on both names a browser may use.
redirects="$PUBLIC/payment-done,$PUBLIC/connection-done,http://127.0.0.1:$PORT/payment-done,http://127.0.0.1:$PORT/connection-done"
# Payment-status webhooks to the BFF (config.dev.yaml's webhook_path), signed
# with the simulator's public development secret.
"$RUN_SIM_BIN" -listen "127.0.0.1:$SIM_PORT" -control -client-id dev-client -client-secret dev-secret \
  -allowed-redirect-urls "$redirects" -webhook-url "http://127.0.0.1:$PORT/webhooks/payments" &
sim=$!
trap 'kill $sim 2>/dev/null || true' EXIT INT TERM

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
"$RUN_BFF_BIN" -config config.dev.yaml
