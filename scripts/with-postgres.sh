#!/usr/bin/env bash
# Runs a command with a PostgreSQL for the tests: the server at
# BFF_TEST_POSTGRES_URL (default the local server's postgres user on
# 127.0.0.1:5432, trust auth). When it does not answer and the machine has
# a Debian cluster, the cluster is started. Without either it fails, saying
# what to install: tests that need PostgreSQL never skip. Each test makes a
# database of its own and drops it.
set -euo pipefail

url="${BFF_TEST_POSTGRES_URL:-postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable}"
export BFF_TEST_POSTGRES_URL="$url"

answers() { pg_isready -d "$url" -t 2 >/dev/null 2>&1; }

if ! command -v pg_isready >/dev/null 2>&1; then
  echo "PostgreSQL's client tools are not installed (Debian/Ubuntu: apt-get install -y postgresql)." >&2
  exit 1
fi
if ! answers; then
  if command -v pg_ctlcluster >/dev/null 2>&1 && [ -d /etc/postgresql ] && [ -n "$(ls /etc/postgresql 2>/dev/null)" ]; then
    version=$(ls /etc/postgresql | sort -V | tail -n 1)
    echo "starting the PostgreSQL $version cluster" >&2
    pg_ctlcluster --skip-systemctl-redirect "$version" main start || true
    for _ in $(seq 100); do answers && break; sleep 0.1; done
  fi
fi
if ! answers; then
  echo "No PostgreSQL answers at ${url%%\?*} (start it, e.g. pg_ctlcluster --skip-systemctl-redirect 15 main start," >&2
  echo "or set BFF_TEST_POSTGRES_URL to a server where the user may create databases)." >&2
  exit 1
fi
exec "$@"
