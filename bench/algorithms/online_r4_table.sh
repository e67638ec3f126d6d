#!/usr/bin/env bash
# #35 item 4: the rotation's r4 (SpinQuant's R4: an online Hadamard on down_proj's input) against rotation alone
# (R1 + R2), on tinyllama-a and its outlier twin (`quark outlier-twin`), for a W4A4 scheme and uint4_wo_128. Every
# cell exports compressed-tensors (the one format that carries R4: transform_config) and reads it back as `quark eval`
# does; per cell: the quantized perplexity on the held-out split (40 windows of 256 tokens), the compressed-tensors
# export read back, and the mean KL divergence of the read-back from the float model (`quark eval --kld`).
#
#   bench/algorithms/online_r4_table.sh [BUILD_DIR] [SHARED_DIR]
#     SAMPLES=32 SEQ=256                  calibration windows
#     MODELS="base twin"  SCHEMES="nvfp4 mxfp4 uint4_wo_128"  KLD=1
set -u
ACCURACY_SAMPLES=32 source "$(dirname "$0")/accuracy_env.sh" "$@"
start_table_run
echo '{"name": "rotation"}' > "$OUT/rotation.json"
echo '{"name": "rotation", "r4": true}' > "$OUT/rotation_r4.json"

# One cell: "ppl / reloaded / KLD (seconds)" (accuracy_env.sh), exported as compressed-tensors.
cell() {
  quantize_cell "$1" --scheme "$2" --quant-algo rotation --quant-algo-config-file "$OUT/$3.json" \
    --export compressed_tensors --output "$OUT/run"
}

float=$("$QUARK" eval --model "$MODEL" --text "$EVAL" --seq-len 256 --max-windows 40 2>/dev/null | awk '/^perplexity:/ {print $2}')
echo "float32 perplexity (both models): $float; calibration $SAMPLES x $SEQ tokens; cells: quantized / reloaded (compressed-tensors) / mean KLD (time)"
for which in ${MODELS:-base twin}; do
  model=$([ "$which" = base ] && echo "$MODEL" || echo "$OUT/twin")
  schemes=(${SCHEMES:-nvfp4 mxfp4 uint4_wo_128})
  echo
  echo "$([ "$which" = base ] && echo tinyllama-a || echo 'outlier twin')"
  echo
  printf "| rotation |"; printf " %s |" "${schemes[@]}"; echo
  printf "|---|"; printf -- "---|%.0s" "${schemes[@]}"; echo
  for algo in rotation rotation_r4; do
    printf "| %s |" "$([ "$algo" = rotation ] && echo "R1 + R2" || echo "R1 + R2 + R4 (online)")"
    for scheme in "${schemes[@]}"; do printf " %s |" "$(cell "$model" "$scheme" "$algo")"; done
    echo
  done
done
