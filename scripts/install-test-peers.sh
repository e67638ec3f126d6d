#!/usr/bin/env bash
# Installs the npm peers that quarkd's tests start (tests/peers: s3rver, @grpc/grpc-js, @grpc/proto-loader, and the
# export consumers node-llama-cpp (real llama.cpp, prebuilt) and onnxruntime-node)
# from the committed package-lock.json. Idempotent and offline-safe: when node_modules already matches the
# lock file, nothing is fetched.
set -euo pipefail

peers="$(cd "$(dirname "${BASH_SOURCE[0]}")/../tests/peers" && pwd)"
cd "$peers"
# The consumers ship their native binaries in the npm packages: no download at install time.
export NODE_LLAMA_CPP_SKIP_DOWNLOAD=true ONNXRUNTIME_NODE_INSTALL=skip

if ! command -v npm >/dev/null 2>&1; then
  echo "install-test-peers: npm not found (scripts/install-deps.sh installs nodejs)" >&2
  exit 1
fi

# llama.cpp's Sapphire Rapids CPU variant (AMX) in this snapshot computes Q8_0 products over rows of one 32-value block
# otherwise than its other CPU variants and its own dequantized weights (the tiny DeepSeek-V3 of
# node_gguf_deepseek_consumer: NLL 13.186 there, 13.588 with every other variant and in the engine). The tests compare
# with llama.cpp's reference CPU arithmetic, so that variant is set aside: on an AMX CPU llama.cpp loads its next best
# (AVX-512) variant, as on every other x86 machine.
set_aside_amx_variant() {
  local amx="node_modules/@node-llama-cpp/linux-x64/bins/linux-x64/libggml-cpu-sapphirerapids.so"
  if [ -f "$amx" ]; then mv "$amx" "$amx.set-aside"; fi
}

stamp="node_modules/.quark-lock.sha256"
want="$(sha256sum package-lock.json | cut -d' ' -f1)"
if [ -d node_modules ] && [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ] \
   && [ -f node_modules/s3rver/bin/s3rver.js ] && [ -d node_modules/@grpc/grpc-js ] \
   && [ -d node_modules/@grpc/proto-loader ] && [ -d node_modules/node-llama-cpp ] \
   && [ -d node_modules/@node-llama-cpp/linux-x64 ] && [ -d node_modules/onnxruntime-node ]; then
  set_aside_amx_variant
  echo "install-test-peers: tests/peers/node_modules is up to date"
  exit 0
fi

# npm ci refuses this lock file: node-llama-cpp names optional per-platform packages that were never published
# (npm records them without a version); npm install follows the lock file all the same.
npm install --no-audit --no-fund --loglevel=error
set_aside_amx_variant
echo "$want" > "$stamp"
echo "install-test-peers: installed $(ls node_modules | wc -l) packages into tests/peers/node_modules"
