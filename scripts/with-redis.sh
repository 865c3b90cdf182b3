#!/usr/bin/env bash
# Runs a command with a Redis for the tests: the one at BFF_TEST_REDIS_ADDR
# (default 127.0.0.1:6379) when it answers, else a throwaway redis-server on
# a free port, stopped afterwards. Without either it fails, saying what to
# install: tests that need Redis never skip.
set -euo pipefail

addr="${BFF_TEST_REDIS_ADDR:-127.0.0.1:6379}"
host="${addr%:*}"
port="${addr##*:}"

answers() { # host port
  { exec 3<>"/dev/tcp/$1/$2"; } 2>/dev/null || return 1
  printf 'PING\r\n' >&3
  local reply
  read -r -t 2 reply <&3 || true
  exec 3>&- 3<&-
  [[ "$reply" == +PONG* ]]
}

if answers "$host" "$port"; then
  export BFF_TEST_REDIS_ADDR="$addr"
  exec "$@"
fi

if ! command -v redis-server >/dev/null 2>&1; then
  echo "No Redis answers at $addr and redis-server is not installed." >&2
  echo "Install it (Debian/Ubuntu: apt-get install -y redis-server) or set BFF_TEST_REDIS_ADDR." >&2
  exit 1
fi

port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])' 2>/dev/null || echo 6399)
dir=$(mktemp -d)
redis-server --port "$port" --bind 127.0.0.1 --save "" --appendonly no --dir "$dir" \
  --daemonize yes --pidfile "$dir/redis.pid" --logfile "$dir/redis.log"
cleanup() { kill "$(cat "$dir/redis.pid" 2>/dev/null)" 2>/dev/null || true; rm -rf "$dir"; }
trap cleanup EXIT
for _ in $(seq 50); do answers 127.0.0.1 "$port" && break; sleep 0.1; done
answers 127.0.0.1 "$port" || { echo "the throwaway redis-server did not start:" >&2; cat "$dir/redis.log" >&2; exit 1; }
echo "using a throwaway redis-server on 127.0.0.1:$port" >&2
export BFF_TEST_REDIS_ADDR="127.0.0.1:$port"
"$@"
