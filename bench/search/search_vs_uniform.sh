#!/usr/bin/env bash
# #36 item 6: searched mixed recipes against uniform schemes on tinyllama-a and its outlier twin (outlier_twin.py):
# bits per weight (the estimator's HF-quark arithmetic, scales included) and perplexity on the held-out split, plus
# the sensitivity pass time per candidate. Run from the build directory:
#   bash ../bench/search/search_vs_uniform.sh [WORK_DIR]
# Prints a markdown table; WORK_DIR (default a temp folder) receives the twin, the cache and the reports.
set -euo pipefail
QUARK=${QUARK:-./core/cli/quark}
SHARED=${QUARK_SHARED_DIR:-../../shared}
WORK=${1:-$(mktemp -d)}
HERE=$(cd "$(dirname "$0")" && pwd)
CALIB=(--calib "$SHARED/fixtures/eval/tinystories_train_split.txt" --num-calib-samples 16 --seq-len 256)
EVAL=(--eval "$SHARED/fixtures/eval/tinystories_heldout_split.txt")
CANDIDATES=uint4_wo_128,uint4_wo_32,int8,fp8
export QUARK_THREADS=${QUARK_THREADS:-1} OMP_NUM_THREADS=${OMP_NUM_THREADS:-1}

python3 "$HERE/outlier_twin.py" "$SHARED/fixtures/tinyllama-a" "$WORK/tinyllama-a-outliers" >&2

ppl() { sed -n 's/^perplexity: float \([0-9.]*\)  quantized \([0-9.]*\).*/\1 \2/p'; }
bits() { sed -n 's/^round [0-9]*: \([0-9.]*\) bits.*/\1/p' | tail -1; }

echo "| model | recipe | bits/weight | ppl float | ppl quantized | groups |"
echo "|---|---|---|---|---|---|"
for model in "$SHARED/fixtures/tinyllama-a" "$WORK/tinyllama-a-outliers"; do
  name=$(basename "$model")
  "$QUARK" sensitivity --model "$model" --candidates "$CANDIDATES" "${CALIB[@]}" --cache-dir "$WORK/cache" \
    > "$WORK/$name.sensitivity.txt"
  echo "sensitivity pass seconds ($name, $CANDIDATES): $(sed -n 's/^pass seconds *//p' "$WORK/$name.sensitivity.txt")" >&2
  for scheme in uint4_wo_128 uint4_wo_64 uint4_wo_32 int8 fp8; do
    # One candidate and a loose budget: the scheme uniformly, with the search's size arithmetic and measurement.
    out=$("$QUARK" quantize --model "$model" --auto --candidates "$scheme" --target-bits 64 "${CALIB[@]}" "${EVAL[@]}" \
      --sensitivity-cache "$WORK/cache" 2>/dev/null)
    read -r pf pq <<< "$(echo "$out" | ppl)"
    echo "| $name | uniform $scheme | $(echo "$out" | bits) | $pf | $pq | all |"
  done
  for target in 4.5 5; do
    out=$("$QUARK" quantize --model "$model" --auto --candidates "$CANDIDATES" --target-bits "$target" "${CALIB[@]}" \
      "${EVAL[@]}" --sensitivity-cache "$WORK/cache" --auto-report "$WORK/$name.$target.json" 2>/dev/null)
    read -r pf pq <<< "$(echo "$out" | ppl)"
    echo "| $name | searched <= $target | $(echo "$out" | bits) | $pf | $pq | $(echo "$out" | sed -n 's/^recipe: //p') |"
  done
done
