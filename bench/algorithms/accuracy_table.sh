#!/usr/bin/env bash
# #35 item 5: one table of every weight algorithm (and rotation combinations) per scheme, on tinyllama-a and its
# outlier twin (`quark outlier-twin`: a few RMSNorm channels x40-100, the reading columns divided by the same; the
# float function is unchanged). Per cell: the quantized perplexity on the held-out split (40 windows of 256 tokens,
# [BOS] + text) after calibration on the training split, the HF-quark export read back (its perplexity must equal the
# quantized one) and the mean KL divergence of the reloaded export from the float model (`quark eval --kld`, as
# llama-perplexity --kl-divergence: the second half of each 256-token window scored).
#
#   bench/algorithms/accuracy_table.sh [BUILD_DIR] [SHARED_DIR]
#     SAMPLES=32 SEQ=256                       calibration windows
#     MODELS="base twin"                       which models
#     SCHEMES="uint4_wo_128 int3_wo_128 nvfp4 mxfp4"
#     ALGOS="rtn imatrix_mse gptq gptaq qronos autoround awq rotation rotation+gptq"
#     AUTOROUND_ITERS=200                      auto-round's default; fewer for a quicker table (said in the row name)
#     KLD=1                                    0: skip the KL divergence (it reruns the float model: ~30 s a cell here)
# Each algorithm runs with its defaults (Quark's for GPTQ/GPTAQ/Qronos/AWQ/rotation, auto-round's for AutoRound,
# llm-compressor's for imatrix_mse). A cell the engine refuses shows "refused: <reason>" (e.g. an algorithm that does
# not apply to a scheme); int3 has no HF-quark packing, so its cells have no reloaded perplexity and no KLD.
set -u
ACCURACY_SAMPLES=32 source "$(dirname "$0")/accuracy_env.sh" "$@"
start_table_run

write_int3_wo_128_config "$OUT/int3_wo_128.json"
echo "{\"name\": \"autoround\", \"iters\": ${AUTOROUND_ITERS:-200}}" > "$OUT/autoround.json"

# The flags that choose an algorithm (empty for round to nearest).
algo_flags() {
  case "$1" in
    rtn) ;;
    imatrix_mse) echo "--observer imatrix_mse" ;;
    autoround) echo "--quant-algo autoround --quant-algo-config-file $OUT/autoround.json" ;;
    rotation+gptq) echo "--quant-algo rotation,gptq" ;;
    *) echo "--quant-algo $1" ;;
  esac
}

# One cell: "ppl / reloaded / KLD (seconds)" (accuracy_env.sh); int3 is written by --config and has no export.
cell() {
  local model=$1 scheme=$2 algo=$3 choose
  if [ -f "$OUT/$scheme.json" ]; then choose=(--config "$OUT/$scheme.json"); else choose=(--scheme "$scheme" --output "$OUT/run"); fi
  # shellcheck disable=SC2046 # algo_flags is a list of words
  quantize_cell "$model" "${choose[@]}" $(algo_flags "$algo")
}

float=$("$QUARK" eval --model "$MODEL" --text "$EVAL" --seq-len 256 --max-windows 40 2>/dev/null | awk '/^perplexity:/ {print $2}')
echo "float32 perplexity (both models): $float; calibration $SAMPLES x $SEQ tokens; cells: quantized / reloaded / mean KLD (time)"
for which in ${MODELS:-base twin}; do
  model=$([ "$which" = base ] && echo "$MODEL" || echo "$OUT/twin")
  schemes=(${SCHEMES:-uint4_wo_128 int3_wo_128 nvfp4 mxfp4})
  echo
  echo "$([ "$which" = base ] && echo tinyllama-a || echo 'outlier twin')"
  echo
  printf "| algorithm |"; printf " %s |" "${schemes[@]}"; echo
  printf "|---|"; printf -- "---|%.0s" "${schemes[@]}"; echo
  for algo in ${ALGOS:-rtn imatrix_mse gptq gptaq qronos autoround awq rotation rotation+gptq}; do
    name=$algo
    [ "$algo" = autoround ] && name="autoround (${AUTOROUND_ITERS:-200} iters)"
    printf "| %s |" "$name"
    for scheme in "${schemes[@]}"; do printf " %s |" "$(cell "$model" "$scheme" "$algo")"; done
    echo
  done
done
