#!/usr/bin/env bash
# #35 "Measure": wall time and peak memory of each weight algorithm on one Llama-2-7B-shaped decoder layer (hidden
# 4096, MLP 11008, 32 heads, bf16, seeded random weights written by quantize_bench) calibrated on 2048 tokens (one
# sample), uint4 asymmetric groups of 128 (SCHEME), each run as its own `quark quantize` process under
# /usr/bin/time -v (peak RSS of the whole process: the layer, the activations, the algorithm's state, the export).
#
#   bench/algorithms/algorithms_7b_layer.sh [BUILD_DIR]        (SCHEME=uint4_wo_128 TOKENS=2048 AUTOROUND_ITERS=5
#                                                               ALGOS="rtn imatrix_mse gptq gptaq qronos awq rotation rotation+gptq autoround learned_rotation")
# AutoRound runs AUTOROUND_ITERS of auto-round's 200 steps (its time per step is the figure to scale). The learned
# rotation fits its 8 GiB budget on one layer and trains its 100 steps (many minutes on a CPU): leave it out of ALGOS
# unless that is the point.
set -u
# shellcheck source=bench/algorithms/layer_7b_fixture.sh
source "$(dirname "$0")/layer_7b_fixture.sh" "$@"
echo "{\"name\": \"autoround\", \"iters\": ${AUTOROUND_ITERS:-5}}" > "$OUT/autoround.json"
echo '{"name": "rotation", "trainable": true}' > "$OUT/learned_rotation.json"

algo_flags() {
  case "$1" in
    rtn) ;;
    imatrix_mse) echo "--observer imatrix_mse" ;;
    autoround) echo "--quant-algo autoround --quant-algo-config-file $OUT/autoround.json" ;;
    learned_rotation) echo "--quant-algo rotation --quant-algo-config-file $OUT/learned_rotation.json" ;;
    rotation+gptq) echo "--quant-algo rotation,gptq" ;;
    *) echo "--quant-algo $1" ;;
  esac
}

echo "One Llama-2-7B-shaped layer, $TOKENS calibration tokens, $SCHEME, QUARK_THREADS=$QUARK_THREADS, $(nproc) cores"
echo
echo "| algorithm | wall (s) | peak RSS (GB) | status |"
echo "|---|---|---|---|"
for algo in ${ALGOS:-rtn imatrix_mse gptq gptaq qronos awq rotation rotation+gptq autoround learned_rotation}; do
  rm -rf "$OUT/run"
  # shellcheck disable=SC2046 # algo_flags is a list of words
  /usr/bin/time -v -o "$OUT/time" "$QUARK" quantize --model "$DIR" --scheme "$SCHEME" --calib "$DIR/calib.ids" \
    --num-calib-samples 1 --seq-len "$TOKENS" $(algo_flags "$algo") --output "$OUT/run" > "$OUT/log" 2>&1
  rc=$?
  wall=$(awk -F': ' '/Elapsed \(wall clock\)/ {n = split($2, p, ":"); s = 0; for (i = 1; i <= n; ++i) s = s * 60 + p[i]; print s}' "$OUT/time")
  rss=$(awk -F': ' '/Maximum resident set size/ {printf "%.2f", $2 / 1048576}' "$OUT/time")
  status=ok
  [ $rc -eq 0 ] || status="refused/failed: $(grep -v -i openblas "$OUT/log" | tail -1 | sed 's/|/\\|/g' | cut -c1-140)"
  name=$algo
  [ "$algo" = autoround ] && name="autoround (${AUTOROUND_ITERS:-5} of 200 iters)"
  printf "| %s | %.1f | %s | %s |\n" "$name" "$wall" "$rss" "$status"
done
