# shellcheck shell=bash disable=SC2034  # sourced: the variables are its callers'
# Sourced by the one-layer Llama-2-7B benchmarks (algorithms_7b_layer.sh, bench/runtime/huge_pages_7b_layer.sh) with
# their arguments: sets BUILD (the first argument, default build), QUARK, DIR, TOKENS, SCHEME, OUT (a scratch folder
# removed on exit) and QUARK_THREADS (default 2), and makes the model and its calibration ids in DIR when they are not
# there for TOKENS (quantize_bench writes both: hidden 4096, MLP 11008, 32 heads, bf16, seeded random weights; its own
# RTN run is the warm-up).
BUILD=${1:-build}
QUARK="$BUILD/core/cli/quark"
DIR=${DIR:-/tmp/quark_bench_7b_layer}
TOKENS=${TOKENS:-2048}
SCHEME=${SCHEME:-uint4_wo_128}
OUT=$(mktemp -d)
trap 'rm -rf "$OUT"' EXIT
export QUARK_THREADS=${QUARK_THREADS:-2}

if [ ! -f "$DIR/config.json" ] || [ "$(wc -w < "$DIR/calib.ids" 2>/dev/null)" != "$TOKENS" ]; then
  rm -rf "$DIR"
  "$BUILD/bench/quantize/quantize_bench" --dir "$DIR" --layers 1 --samples 1 --seq-len "$TOKENS" --presets "$SCHEME" \
    > /dev/null 2>&1 || { echo "quantize_bench failed" >&2; exit 1; }
fi
