#!/usr/bin/env bash
# #35 item 2: perplexity of tinyllama-a (held-out split, 40 windows of 256 tokens) quantized with uint4 g128 and
# int4 g128 weight-only by round to nearest, GPTQ and AutoRound (auto-round's defaults: 200 iterations, lr 1/200,
# batch 8), calibrated on SAMPLES windows of SEQ tokens of its training split; wall seconds of each run beside it.
#
#   bench/algorithms/autoround_accuracy.sh [BUILD_DIR] [SHARED_DIR]      (SAMPLES=128 SEQ=256 by default)
set -u
source "$(dirname "$0")/accuracy_env.sh" "$@"
ERR=$(mktemp)
trap 'rm -f "$ERR"' EXIT

# "quantized perplexity (seconds)" of one run, a dash when it fails (the error goes to stderr)
ppl() {
  local start line
  start=$(date +%s.%N)
  line=$("$BUILD/core/cli/quark" quantize --model "$MODEL" --calib "$CALIB" --num-calib-samples "$SAMPLES" --seq-len "$SEQ" \
           --eval "$EVAL" --eval-seq-len 256 --eval-max-windows 40 "$@" 2>"$ERR" | grep '^perplexity:')
  if [ -z "$line" ]; then echo "- ($(tail -1 "$ERR" | cut -c1-80))"; return; fi
  echo "$(echo "$line" | awk '{print $5}') ($(echo "$(date +%s.%N) - $start" | bc | cut -c1-5) s)"
}
float=$("$BUILD/core/cli/quark" eval --model "$MODEL" --text "$EVAL" --seq-len 256 --max-windows 40 | awk '/^perplexity:/ {print $2}')
echo "float32 perplexity: $float"
echo
echo "| weights | RTN | GPTQ | AutoRound |"
echo "|---|---|---|---|"
for scheme in uint4_wo_128 int4_wo_128; do
  echo "| $scheme | $(ppl --scheme "$scheme") | $(ppl --scheme "$scheme" --quant-algo gptq) |" \
       "$(ppl --scheme "$scheme" --quant-algo autoround) |"
done
