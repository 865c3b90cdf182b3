#!/usr/bin/env bash
# Node.js >= 20.19 is what the test identity provider (oidc-provider 9) and
# the web app's build need; Debian 12's own nodejs package is 18. Exits
# non-zero with what to do when node is missing or older.
set -euo pipefail
need="20.19.0"
if ! command -v node >/dev/null 2>&1; then
  echo "Node.js >= $need is needed (the test identity provider, the example app's build): install it from https://nodejs.org or NodeSource's Debian packages; Debian 12's own nodejs is 18" >&2
  exit 1
fi
have="$(node -p 'process.versions.node')"
if [ "$(printf '%s\n%s\n' "$need" "$have" | sort -V | head -n 1)" != "$need" ]; then
  echo "Node.js $have is too old: >= $need is needed (the test identity provider, the example app's build); install a newer one from https://nodejs.org or NodeSource's Debian packages (Debian 12's own nodejs is 18)" >&2
  exit 1
fi
