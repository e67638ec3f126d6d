#!/usr/bin/env bash
# The algorithm tables of docs/results.md (issue #12): perplexity of the trained fixture tinyllama-a on its held-out
# split (40 windows of 256 tokens, [BOS] + text), calibrated on its training split, for
#   - the W8A8 int8 schemes of Quark's Llama table (per tensor static, per channel static, per tensor dynamic, per
#     channel / per token dynamic), each without and with an int8 KV cache: RTN, SmoothQuant (alpha 0.5, as Quark's
#     table), AutoSmoothQuant, rotation + SmoothQuant;
#   - uint4 g128 and int4 g32 weight-only: RTN, AWQ, GPTQ, rotation + GPTQ.
#
#   bench/algorithms/algorithms_accuracy.sh [BUILD_DIR] [SHARED_DIR]      (SAMPLES=64 SEQ=256 by default)
set -u
ACCURACY_SAMPLES=64 source "$(dirname "$0")/accuracy_env.sh" "$@"
OUT=$(mktemp -d)
trap 'rm -rf "$OUT"' EXIT
echo '{"name": "smooth", "alpha": 0.5}' > "$OUT/smooth05.json"

# quantized perplexity of one run (a dash when it fails; the error goes to stderr)
ppl() {
  local line
  line=$("$BUILD/core/cli/quark" quantize --model "$MODEL" --calib "$CALIB" --num-calib-samples "$SAMPLES" --seq-len "$SEQ" \
           --eval "$EVAL" --eval-seq-len 256 --eval-max-windows 40 "$@" 2>"$OUT/err")
  line=$(echo "$line" | grep '^perplexity:')
  if [ -z "$line" ]; then echo "- ($(tail -1 "$OUT/err" | cut -c1-80))"; return; fi
  echo "$line" | awk '{print $5}'
}
float=$("$BUILD/core/cli/quark" eval --model "$MODEL" --text "$EVAL" --seq-len 256 --max-windows 40 | awk '/^perplexity:/ {print $2}')
echo "float32 perplexity: $float"
echo
echo "| W8A8 int8 scheme | KV cache | RTN | SmoothQuant a=0.5 | AutoSmoothQuant | rotation + SmoothQuant |"
echo "|---|---|---|---|---|---|"
for scheme in w_int8_a_int8_per_tensor_sym w_int8_per_channel_a_int8_per_tensor_sym w_int8_a_int8_per_tensor_sym_dynamic \
              w_int8_per_channel_a_int8_per_token_dynamic; do
  for kv in none int8; do
    kv_args=(); [ "$kv" = int8 ] && kv_args=(--kv-cache-dtype int8)
    rtn=$(ppl --scheme "$scheme" "${kv_args[@]}")
    sq=$(ppl --scheme "$scheme" "${kv_args[@]}" --quant-algo smoothquant --quant-algo-config-file "$OUT/smooth05.json")
    asq=$(ppl --scheme "$scheme" "${kv_args[@]}" --quant-algo autosmoothquant)
    rsq=$(ppl --scheme "$scheme" "${kv_args[@]}" --quant-algo rotation,smoothquant --quant-algo-config-file "$OUT/smooth05.json")
    echo "| $scheme | $kv | $rtn | $sq | $asq | $rsq |"
  done
done
echo
echo "| weight-only scheme | RTN | AWQ | GPTQ | rotation + GPTQ |"
echo "|---|---|---|---|---|"
for scheme in uint4_wo_128 int4_wo_32; do
  echo "| $scheme | $(ppl --scheme "$scheme") | $(ppl --scheme "$scheme" --quant-algo awq) | $(ppl --scheme "$scheme" --quant-algo gptq) | $(ppl --scheme "$scheme" --quant-algo rotation,gptq) |"
done
