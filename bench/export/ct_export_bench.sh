#!/usr/bin/env bash
# Export time and peak RSS per format (#30): `quark quantize` of a Llama-2-7B-shaped bf16 model (quantize_bench's
# synthetic model, LAYERS layers, default 2) with SCHEME (default uint4_wo_32, RTN: no calibration) exported as
# hf_quark alone, compressed_tensors alone, and both in one pass (plus gguf: the three-format pass); wall time and
# peak RSS from /usr/bin/time -v, and each export's size.
#   bench/export/ct_export_bench.sh [BUILD_DIR] [LAYERS] [SCHEME]
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
build=${1:-$root/build}
layers=${2:-2}
scheme=${3:-uint4_wo_32}
work=${WORK:-/tmp/quark_ct_export_bench}
mkdir -p "$work"
model=$work/llama7b_${layers}l
"$build/bench/quantize/quantize_bench" --dir "$model" --layers "$layers" --presets "" >/dev/null
test -f "$model/config.json"
cp "$root/../shared/fixtures/stories260K/tokenizer.model" "$model/tokenizer.model"
measure() {  # label, command...: prints "label wall_s peak_rss_gb size"
  local label=$1; shift
  rm -rf "$work/$label"
  /usr/bin/time -v "$@" --output "$work/$label" >"$work/$label.log" 2>&1 || { tail -5 "$work/$label.log"; return 1; }
  local size
  size=$(du -sb "$work/$label" | awk '{printf "%.2f GB", $1 / 1e9}')
  awk -v l="$label" -v s="$size" '/Elapsed \(wall clock\)/ {n = split($NF, t, ":"); w = t[n] + 60 * t[n - 1]}
    /Maximum resident/ {r = $NF / 1048576} END {printf "%-22s wall %7.1f s  peak RSS %6.2f GB  output %s\n", l, w, r, s}' \
    "$work/$label.log"
}
q=("$build/core/cli/quark" quantize --model "$model" --scheme "$scheme")
measure hf_quark "${q[@]}" --export hf_quark
measure compressed_tensors "${q[@]}" --export compressed_tensors
measure hf_quark+ct "${q[@]}" --export hf_quark --export compressed_tensors
measure hf_quark+ct+gguf "${q[@]}" --export hf_quark --export compressed_tensors --export gguf
