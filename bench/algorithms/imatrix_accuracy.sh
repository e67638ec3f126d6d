#!/usr/bin/env bash
# #35 item 3: perplexity of tinyllama-a and of its outlier twin (`quark outlier-twin`: a few RMSNorm channels x40-100,
# the reading linears' columns divided by the same, so the float model is unchanged) quantized weight-only by round to
# nearest with the MinMax observer and with llm-compressor's imatrix_mse observer (`--observer imatrix_mse`: each
# weight's range searched with its layer's importance matrix from calibration), beside GPTQ; held-out split, 40
# windows of 256 tokens, calibrated on SAMPLES windows of SEQ tokens of the training split.
#
#   bench/algorithms/imatrix_accuracy.sh [BUILD_DIR] [SHARED_DIR]      (SAMPLES=128 SEQ=256; GPTQ=0 skips GPTQ)
set -u
source "$(dirname "$0")/accuracy_env.sh" "$@"
OUT=$(mktemp -d)
trap 'rm -rf "$OUT"' EXIT
"$BUILD/core/cli/quark" outlier-twin --model "$MODEL" --output "$OUT/twin" > /dev/null || exit 1

# "quantized perplexity (seconds)" of one run on model $1, a dash when it fails (the error goes to stderr)
ppl() {
  local model=$1 start line
  shift
  start=$(date +%s.%N)
  line=$("$BUILD/core/cli/quark" quantize --model "$model" --calib "$CALIB" --num-calib-samples "$SAMPLES" --seq-len "$SEQ" \
           --eval "$EVAL" --eval-seq-len 256 --eval-max-windows 40 "$@" 2>"$OUT/err" | grep '^perplexity:')
  if [ -z "$line" ]; then echo "- ($(tail -1 "$OUT/err" | cut -c1-80))"; return; fi
  echo "$(echo "$line" | awk '{print $5}') ($(echo "$(date +%s.%N) - $start" | bc | cut -c1-5) s)"
}
echo "| model | weights | float | RTN min_max | RTN imatrix_mse | GPTQ |"
echo "|---|---|---|---|---|---|"
for model in "$MODEL" "$OUT/twin"; do
  name=$([ "$model" = "$MODEL" ] && echo tinyllama-a || echo "outlier twin")
  float=$("$BUILD/core/cli/quark" eval --model "$model" --text "$EVAL" --seq-len 256 --max-windows 40 |
          awk '/^perplexity:/ {print $2}')
  for scheme in uint4_wo_128 int4_wo_128 uint4_wo_32; do
    gptq="-"
    [ "${GPTQ:-1}" = 1 ] && gptq=$(ppl "$model" --scheme "$scheme" --quant-algo gptq)
    echo "| $name | $scheme | $float | $(ppl "$model" --scheme "$scheme") |" \
         "$(ppl "$model" --scheme "$scheme" --observer imatrix_mse) | $gptq |"
  done
done
