#!/usr/bin/env bash
# Runs every native fuzz target of the module for the given time each.
set -euo pipefail
cd "$(dirname "$0")/.."
t="${1:-60s}"
grep -rl --include='*_test.go' '^func Fuzz' . | while read -r f; do
  pkg="./$(dirname "${f#./}")"
  grep -o '^func Fuzz[A-Za-z0-9_]*' "$f" | sed 's/^func //' | while read -r fn; do
    echo "== $pkg $fn ($t)"
    ./scripts/with-redis.sh go test -run='^$' -fuzz="^${fn}\$" -fuzztime="$t" "$pkg"
  done
done
