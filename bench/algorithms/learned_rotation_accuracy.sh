#!/usr/bin/env bash
# #35 item 4: perplexity of tinyllama-a and of its outlier twin (`quark outlier-twin`) quantized by round to nearest
# with no rotation, with the Hadamard rotation (`--quant-algo rotation`: R1 and R2 folded into the weights), and with
# R1 learned by Cayley SGD (learned_rotation_bench: trained on STEPS steps of one SEQ-token window of the training
# split for the scheme, folded the same way, written as a float model that `quark quantize` then quantizes with
# the same scheme and no algorithm); held-out split, 40 windows of 256 tokens.
#
#   bench/algorithms/learned_rotation_accuracy.sh [BUILD_DIR] [SHARED_DIR]   (STEPS=100 SCHEMES="uint4_wo_128 int4_wa_64"
#                                                                             MODELS="base twin" BENCH_FLAGS=--train-r2)
set -u
source "$(dirname "$0")/accuracy_env.sh" "$@"
STEPS=${STEPS:-100}
SCHEMES=${SCHEMES:-uint4_wo_128 int4_wa_64}
OUT=$(mktemp -d)
trap 'rm -rf "$OUT"' EXIT
"$BUILD/core/cli/quark" outlier-twin --model "$MODEL" --output "$OUT/twin" > /dev/null || exit 1

# "quantized perplexity" of one run on model $1 (a dash when it fails; the error goes to stderr)
ppl() {
  local model=$1 line
  shift
  line=$("$BUILD/core/cli/quark" quantize --model "$model" --calib "$CALIB" --num-calib-samples "$SAMPLES" \
           --seq-len "$SEQ" --eval "$EVAL" --eval-seq-len 256 --eval-max-windows 40 "$@" 2>"$OUT/err" |
         grep '^perplexity:')
  if [ -z "$line" ]; then echo "- ($(tail -1 "$OUT/err" | cut -c1-80))"; return; fi
  echo "$line" | awk '{print $5}'
}
echo "| model | scheme | float | RTN | Hadamard R1+R2 | learned R1 (+ Hadamard R2) | training (s) | loss first/last 10% | peak RSS (MiB) |"
echo "|---|---|---|---|---|---|---|---|---|"
for which in ${MODELS:-base twin}; do
  model=$([ "$which" = base ] && echo "$MODEL" || echo "$OUT/twin")
  name=$([ "$model" = "$MODEL" ] && echo tinyllama-a || echo "outlier twin")
  float=$("$BUILD/core/cli/quark" eval --model "$model" --text "$EVAL" --seq-len 256 --max-windows 40 |
          awk '/^perplexity:/ {print $2}')
  for scheme in $SCHEMES; do
    rm -rf "$OUT/learned"
    stats=$("$BUILD/bench/algorithms/learned_rotation_bench" --model "$model" --calib "$CALIB" --scheme "$scheme" \
              --output "$OUT/learned" --samples "$STEPS" --seq-len "$SEQ" --steps "$STEPS" ${BENCH_FLAGS:-}) || exit 1
    echo "$stats" >&2
    read -r train first last rss < <(echo "$stats" | python3 -c \
      'import json,sys; r=json.load(sys.stdin); print("%.1f %.4f %.4f %d" % (r["train_s"], r["first_10pct_loss"], r["last_10pct_loss"], r["peak_rss_mib"]))')
    echo "| $name | $scheme | $float | $(ppl "$model" --scheme "$scheme") | $(ppl "$model" --scheme "$scheme" --quant-algo rotation) |" \
         "$(ppl "$OUT/learned" --scheme "$scheme") | $train | $first / $last | $rss |"
  done
done
