#!/usr/bin/env bash
# #36 item 5: export time of a mixed recipe against a uniform one. `quark quantize` of tinyllama-a (RTN, no
# calibration) with uint4_wo_32 everywhere and with tests/export/data/mixed_recipe_g32.json (uint4 g32 by default,
# every o_proj int8 g32, layer 0's MLP int4 g32, layer 3's down_proj in float: three compressed-tensors config
# groups, three GGUF block types), each exported as hf_quark, compressed_tensors and gguf alone and all three in one
# pass. Prints the median wall time of REPEAT runs (default 5) and each export's size.
#   bench/export/mixed_export_bench.sh [BUILD_DIR] [MODEL_DIR]
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
build=${1:-$root/build}
model=${2:-$root/../shared/fixtures/tinyllama-a}
repeat=${REPEAT:-5}
work=${WORK:-/tmp/quark_mixed_export_bench}
recipe=$root/tests/export/data/mixed_recipe_g32.json
mkdir -p "$work"
measure() {  # label, quark quantize arguments...: "label  median wall  size"
  local label=$1; shift
  local times=()
  for _ in $(seq "$repeat"); do
    rm -rf "$work/$label"
    local start end
    start=$(date +%s.%N)
    "$build/core/cli/quark" quantize --model "$model" "$@" --output "$work/$label" >"$work/$label.log" 2>&1 ||
      { tail -5 "$work/$label.log"; return 1; }
    end=$(date +%s.%N)
    times+=("$(echo "$end - $start" | bc)")
  done
  local median size
  median=$(printf '%s\n' "${times[@]}" | sort -n | awk '{t[NR] = $1} END {print t[int((NR + 1) / 2)]}')
  size=$(du -sb "$work/$label" | awk '{printf "%.2f MB", $1 / 1e6}')
  printf '%-34s median wall %6.2f s (of %d)  output %s\n' "$label" "$median" "$repeat" "$size"
}
for format in hf_quark compressed_tensors gguf; do
  measure "uniform_$format" --scheme uint4_wo_32 --export "$format"
  measure "mixed_$format" --config "$recipe" --export "$format"
done
all=(--export hf_quark --export compressed_tensors --export gguf)
measure uniform_all_three --scheme uint4_wo_32 "${all[@]}"
measure mixed_all_three --config "$recipe" "${all[@]}"
