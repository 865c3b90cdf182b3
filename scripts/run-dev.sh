#!/usr/bin/env bash
# `make run`: the upstream simulator and the BFF with the development config
# (dev login, in-process store, plain-http cookie). Needs Go only.
set -euo pipefail
cd "$(dirname "$0")/.."

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
  Try, in another terminal:

    curl -s -c /tmp/bff.jar -H 'Content-Type: application/json' \\
         -d '{"userId":"alice"}' http://localhost:8080/auth/dev/login
    curl -s -b /tmp/bff.jar http://localhost:8080/api/v2/payments
    curl -s -b /tmp/bff.jar -c /tmp/bff.jar -X POST -H 'X-CSRF: 1' http://localhost:8080/auth/logout -o /dev/null -w '%{http_code}\n'
    curl -s -b /tmp/bff.jar http://localhost:8080/api/v2/payments

  (the last one answers 401 SESSION_REQUIRED). Ctrl-C stops both.

TXT
./bin/bff -config config.dev.yaml
