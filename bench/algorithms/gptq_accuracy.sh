#!/usr/bin/env bash
# The RTN vs GPTQ table of docs/results.md: perplexity of the trained fixture tinyllama-a on its held-out split
# (40 windows of 256 tokens, [BOS] + text), calibrated on its training split (random windows), for each weight scheme
# rounded to nearest and with GPTQ (Quark's defaults: desc_act, static groups, damp 0.01, block 128), each exported
# and reloaded where the HF-quark format can pack it.
#
#   bench/algorithms/gptq_accuracy.sh [BUILD_DIR] [SHARED_DIR]      (SAMPLES=128 SEQ=256 by default)
set -u
source "$(dirname "$0")/accuracy_env.sh" "$@"
OUT=$(mktemp -d)
trap 'rm -rf "$OUT"' EXIT

write_int3_wo_128_config "$OUT/int3_wo_128.json"

echo "| scheme | float32 | RTN | GPTQ | GPTQ reloaded | GPTQ vs RTN (PPL) | GPTQ time (s) |"
echo "|---|---|---|---|---|---|---|"
for scheme in uint4_wo_32 uint4_wo_128 int4_wo_32 int4_wo_128 int3_wo_128 w_int8_a_int8_per_tensor_sym; do
  if [ -f "$OUT/$scheme.json" ]; then choose=(--config "$OUT/$scheme.json"); export_args=(); else choose=(--scheme "$scheme"); export_args=(--output "$OUT/gptq_$scheme"); fi
  common=(--model "$MODEL" "${choose[@]}" --calib "$CALIB" --num-calib-samples "$SAMPLES" --seq-len "$SEQ"
          --eval "$EVAL" --eval-seq-len 256 --eval-max-windows 40)
  rtn=$("$BUILD/core/cli/quark" quantize "${common[@]}" 2>&1 | grep '^perplexity:')
  start=$(date +%s.%N)
  gptq=$("$BUILD/core/cli/quark" quantize "${common[@]}" --quant-algo gptq "${export_args[@]}" 2>&1)
  seconds=$(echo "$(date +%s.%N) - $start" | bc)
  line=$(echo "$gptq" | grep '^perplexity:')
  if [ -z "$rtn" ] || [ -z "$line" ]; then
    echo "| $scheme | failed: $(echo "$gptq" | tail -1 | cut -c1-150) |"
    continue
  fi
  set -- $rtn; float=$3; rtn_ppl=$5
  set -- $line; gptq_ppl=$5; reloaded=${7:--}
  printf "| %s | %.4f | %.4f | %.4f | %s | %+.2f%% | %.1f |\n" "$scheme" "$float" "$rtn_ppl" "$gptq_ppl" "$reloaded" \
    "$(echo "($gptq_ppl - $rtn_ppl) / $rtn_ppl * 100" | bc -l)" "$seconds"
done
