#!/usr/bin/env bash
# #35's accuracy rows of docs/results.md: tinyllama-a, uint4 asymmetric g128 weight only (SCHEME, default
# uint4_wo_128): RTN, GPTQ, GPTAQ and Qronos (Quark 0.13's defaults each), perplexity on the held-out split (40 windows
# of 256 tokens, [BOS] + text) after calibration on the training split (random windows), the GPTQ-family rows
# exported and reloaded: the settings of gptq_accuracy.sh, whose table this extends.
#
#   bench/algorithms/asymmetric_accuracy.sh [BUILD_DIR] [SHARED_DIR]      (SAMPLES=128 SEQ=256 by default)
set -u
quark="${1:-build}/core/cli/quark"
fixtures="${2:-$(cd "$(dirname "$0")/../../../shared" && pwd)}/fixtures"
scheme="${SCHEME:-uint4_wo_128}"
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
common=(--model "$fixtures/tinyllama-a" --scheme "$scheme" --num-calib-samples "${SAMPLES:-128}" --seq-len "${SEQ:-256}"
        --calib "$fixtures/eval/tinystories_train_split.txt" --eval "$fixtures/eval/tinystories_heldout_split.txt"
        --eval-seq-len 256 --eval-max-windows 40)
echo "| $scheme | float32 | perplexity | reloaded | vs RTN | time (s) |"
echo "|---|---|---|---|---|---|"
rtn_ppl=""
for algo in rtn gptq gptaq qronos; do
  args=()
  [ "$algo" = rtn ] || args=(--quant-algo "$algo" --output "$out/$algo")
  start=$(date +%s.%N)
  run=$("$quark" quantize "${common[@]}" "${args[@]}" 2>&1)
  seconds=$(echo "$(date +%s.%N) - $start" | bc)
  line=$(echo "$run" | grep '^perplexity:')
  if [ -z "$line" ]; then
    echo "| $algo | failed: $(echo "$run" | tail -1 | cut -c1-150) |"
    continue
  fi
  set -- $line
  [ -n "$rtn_ppl" ] || rtn_ppl=$5
  printf "| %s | %.4f | %.4f | %s | %+.2f%% | %.1f |\n" "$algo" "$3" "$5" "${7:--}" \
    "$(echo "($5 - $rtn_ppl) / $rtn_ppl * 100" | bc -l)" "$seconds"
done
