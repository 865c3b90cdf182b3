#!/usr/bin/env bash
# `make run`: the upstream simulator and the BFF with the development config
# (dev login, in-process store, plain-http cookie), serving the example web
# app (web/app) at http://localhost:8080 through static_dir. Needs Go, and
# Node.js (>= 20) for the web app: without npm the BFF runs with no app at /.
set -euo pipefail
cd "$(dirname "$0")/.."

# The example web app: install its one dev dependency (esbuild) when the lock
# file is newer than what is installed, then build dist/ (well under a second).
APP=web/app
app_line="Then open http://localhost:8080: the example web app (sign in as alice)."
if command -v npm >/dev/null 2>&1; then
  if [ ! -f "$APP/node_modules/.package-lock.json" ] || [ "$APP/package-lock.json" -nt "$APP/node_modules/.package-lock.json" ]; then
    npm ci --prefix "$APP" --no-audit --no-fund
  fi
  npm run build --prefix "$APP" --silent
  export BFF_STATIC_DIR="${BFF_STATIC_DIR:-$APP/dist}"
else
  echo "npm not found: starting without the example web app (install Node.js >= 20 for it)" >&2
  app_line="No web app at / (npm not found): install Node.js >= 20 for it."
fi

SIM_LISTEN="${SIM_LISTEN:-127.0.0.1:8081}"
./bin/upstream-sim -listen "$SIM_LISTEN" -control -client-id dev-client -client-secret dev-secret &
sim=$!
trap 'kill $sim 2>/dev/null || true' EXIT INT TERM

for _ in $(seq 50); do
  if (exec 3<>"/dev/tcp/${SIM_LISTEN%:*}/${SIM_LISTEN##*:}") 2>/dev/null; then break; fi
  sleep 0.1
done

cat <<TXT

  The BFF listens on http://localhost:8080 (admin: http://localhost:9090),
  in front of the upstream simulator on http://$SIM_LISTEN.

  $app_line

  Or try the API, in another terminal:

    curl -s -c /tmp/bff.jar -H 'Content-Type: application/json' \\
         -d '{"userId":"alice"}' http://localhost:8080/auth/dev/login
    curl -s -b /tmp/bff.jar http://localhost:8080/api/v2/payments
    curl -s -b /tmp/bff.jar -c /tmp/bff.jar -X POST -H 'X-CSRF: 1' http://localhost:8080/auth/logout -o /dev/null -w '%{http_code}\n'
    curl -s -b /tmp/bff.jar http://localhost:8080/api/v2/payments

  (the last one answers 401 SESSION_REQUIRED). Ctrl-C stops both.

TXT
./bin/bff -config config.dev.yaml
