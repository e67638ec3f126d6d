#!/usr/bin/env bash
# #37 item 4: plain Q4_K_M vs imatrix Q4_K_M vs K-quant-aware GPTQ Q4_K_M (with and without the imatrix) of tinyllama-a
# and its outlier twin, each file measured by llama.cpp (node-llama-cpp) and by `quark eval` on the same ids: the
# node test tests/node/gguf_kquant_gptq_test.mjs with the accuracy scripts' calibration (SAMPLES windows of SEQ tokens
# of the training split) and 16 held-out windows of 256 tokens. Prints one JSON line per file.
#
#   bench/export/kquant_gptq_accuracy.sh [BUILD_DIR] [SHARED_DIR]      (SAMPLES=128 SEQ=256 by default; TWIN=only
#   measures the outlier twin alone, TWIN=0 tinyllama-a alone)
set -eu
source "$(dirname "$0")/../algorithms/accuracy_env.sh" "$@"
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
QUARK_SOURCE_DIR=$ROOT QUARK_BINARY_DIR=$(cd "$BUILD" && pwd) QUARK_SHARED_DIR=$SHARED \
QUARK_KGPTQ_SAMPLES=$SAMPLES QUARK_KGPTQ_CALIB_SEQ=$SEQ QUARK_KGPTQ_SEQ=256 QUARK_KGPTQ_WINDOWS=16 QUARK_KGPTQ_TWIN=${TWIN:-1} \
  node "$ROOT/tests/node/gguf_kquant_gptq_test.mjs"
