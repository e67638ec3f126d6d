#!/usr/bin/env bash
# Installs the npm peers that quarkd's tests start (tests/peers: s3rver, @grpc/grpc-js, @grpc/proto-loader)
# from the committed package-lock.json. Idempotent and offline-safe: when node_modules already matches the
# lock file, nothing is fetched.
set -euo pipefail

peers="$(cd "$(dirname "${BASH_SOURCE[0]}")/../tests/peers" && pwd)"
cd "$peers"

if ! command -v npm >/dev/null 2>&1; then
  echo "install-test-peers: npm not found (scripts/install-deps.sh installs nodejs)" >&2
  exit 1
fi

stamp="node_modules/.quark-lock.sha256"
want="$(sha256sum package-lock.json | cut -d' ' -f1)"
if [ -d node_modules ] && [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ] \
   && [ -f node_modules/s3rver/bin/s3rver.js ] && [ -d node_modules/@grpc/grpc-js ] \
   && [ -d node_modules/@grpc/proto-loader ]; then
  echo "install-test-peers: tests/peers/node_modules is up to date"
  exit 0
fi

npm ci --no-audit --no-fund --loglevel=error
echo "$want" > "$stamp"
echo "install-test-peers: installed $(ls node_modules | wc -l) packages into tests/peers/node_modules"
