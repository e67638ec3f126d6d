#!/usr/bin/env bash
# The README's test command: installs every dependency, builds, and runs the whole test suite.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
if [ -f scripts/install-test-peers.sh ]; then bash scripts/install-test-peers.sh; fi
bash scripts/build.sh
ctest --test-dir build --output-on-failure -j "$(nproc)" --timeout 900
