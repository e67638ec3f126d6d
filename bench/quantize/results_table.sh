#!/usr/bin/env bash
# Produces the stories260K results table of docs/results.md: perplexity on the TinyStories fixture
# (L = 512, first 40 windows) for float32 and each preset, fake-quantized and reloaded from the export.
#
#   bench/quantize/results_table.sh [BUILD_DIR] [SHARED_DIR]
#
# Calibration: $SAMPLES (default 16) windows of 512 tokens from wiki.test.raw (seed 42), so the evaluation text is not calibrated on.
set -u
BUILD=${1:-build-quantize}
SHARED=${2:-$(cd "$(dirname "$0")/../../../shared" && pwd)}
MODEL=$SHARED/fixtures/stories260K
OUT=$(mktemp -d)
# Prefixes of the fixtures, so that each run does not tokenize megabytes: 160 KB of TinyStories hold well over the
# 40 x 512 evaluated tokens (the windows start at token 0, so the result is that of the whole file), and 200 KB of
# wikitext give the calibration windows.
EVAL=$OUT/eval.txt
CALIB=$OUT/calib.txt
head -c 160000 "$SHARED/fixtures/eval/tinystories_validation_prefix.txt" > "$EVAL"
head -c 200000 "$SHARED/fixtures/eval/wiki.test.raw" > "$CALIB"
SAMPLES=${SAMPLES:-16}
PRESETS=${PRESETS:-"int8 fp8 ptpc_fp8 w_int8_per_channel_a_int8_per_token_dynamic w_int8_a_int8_per_tensor_sym_dynamic
w_uint8_a_uint8_per_tensor_asym int4_wo_32 int4_wo_64 int4_wo_128 int4_wo_per_channel uint4_wo_32 uint4_wo_64
uint4_wo_128 uint4_wo_per_channel int4_wa_64 mxfp4 mxfp4_weight_only mxfp6_e3m2 mxfp6_e2m3 mxfp4_mxfp6_e2m3
mxfp4_fp8 mxfp8 mxint8 bfloat16"}
echo "| scheme | KV cache | float32 | fake-quantized | reloaded from export | fake vs float | note |"
echo "|---|---|---|---|---|---|---|"
run() {  # preset kv
  local preset=$1 kv=$2 dir="$OUT/$1_$2" args=()
  [ "$kv" != "-" ] && args+=(--kv-cache-dtype "$kv")
  local log
  log=$("$BUILD/core/cli/quark" quantize --model "$MODEL" --scheme "$preset" "${args[@]}" --calib "$CALIB" \
        --num-calib-samples "$SAMPLES" --seq-len 512 --eval "$EVAL" --eval-seq-len 512 --eval-max-windows 40 \
        --output "$dir" 2>&1)
  local line
  line=$(echo "$log" | grep '^perplexity:')
  if [ -z "$line" ]; then
    echo "| $preset | $kv | - | - | - | - | $(echo "$log" | tail -1 | sed 's/^quark quantize: //' | cut -c1-160) |"
  else
    set -- $line
    local f=$3 q=$5 r=$7
    local d
    d=$(awk -v a="$q" -v b="$f" 'BEGIN { printf "%+.2f%%", (a - b) / b * 100 }')
    echo "| $preset | $kv | $f | $q | $r | $d | |"
  fi
  rm -rf "$dir"
}
for p in $PRESETS; do run "$p" -; done
if [ -z "${NO_KV:-}" ]; then
  run fp8 fp8
  run int8 fp8
fi
rm -rf "$OUT"
