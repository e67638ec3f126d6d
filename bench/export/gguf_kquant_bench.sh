#!/usr/bin/env bash
# Q4_K_M of a Llama-2-7B-shaped bf16 model: quark's GGUF export (`quark quantize --export gguf --gguf-type Q4_K_M`,
# from the safetensors) beside llama.cpp's own llama-quantize (tools/quantize of node-llama-cpp's
# llama/gitRelease.bundle, built here against its prebuilt libllama / libllama-common / libggml, run on the BF16 GGUF
# of the same model), both on THREADS threads; wall time and peak RSS from /usr/bin/time -v (user/system CPU seconds
# in $WORK/*.log), and the two files' sizes.
#   bench/export/gguf_kquant_bench.sh [BUILD_DIR] [LAYERS] [THREADS]
# LAYERS 32 is the whole 7B shape (`quark make-model --arch llama --shape llama-2-7b`, 13.5 GB of bf16); other counts
# take quantize_bench's synthetic model of that many layers. Disk: the steps run so that at most the model and one
# 13.5 GB BF16 GGUF exist at once (ours is measured and removed first; the safetensors go before llama-quantize runs).
# The whole run holds /work/bin/heavy.lock when it exists (one heavy run at a time on the shared machine).
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
build=${1:-$root/build}
layers=${2:-2}
threads=${3:-1}
work=${WORK:-/tmp/quark_gguf_kquant_bench}
if [ -z "${QUARK_HEAVY_LOCKED:-}" ] && [ -e /work/bin/heavy.lock ]; then
  QUARK_HEAVY_LOCKED=1 exec flock /work/bin/heavy.lock "$0" "$build" "$layers" "$threads"
fi
libs=$root/tests/peers/node_modules/@node-llama-cpp/linux-x64/bins/linux-x64
bundle=$root/tests/peers/node_modules/node-llama-cpp/llama/gitRelease.bundle
tokenizer=$root/../shared/fixtures/stories260K/tokenizer.model
mkdir -p "$work"
model=$work/llama7b_${layers}l
if [ ! -x "$work/llama-quantize" ]; then
  rm -rf "$work/llama.cpp" && git -c advice.detachedHead=false clone -q "$bundle" "$work/llama.cpp"
  (cd "$work/llama.cpp" && g++ -O2 -std=c++17 tools/quantize/quantize.cpp tools/quantize/main.cpp -Iinclude \
    -Iggml/include -Icommon -Ivendor -o "$work/llama-quantize" "$libs/libllama.v0.5.0.so" \
    "$libs/libllama-common.so" "$libs/libggml-base.so" "$libs/libggml.v0.5.0.so" -Wl,-rpath,"$libs")
fi
# The model (bf16 safetensors; the stories260K tokenizer beside it for the GGUF vocabulary).
if [ ! -f "$model/config.json" ]; then
  if [ "$layers" = 32 ]; then
    "$build/core/cli/quark" make-model --arch llama --shape llama-2-7b --dtype bf16 --out "$model" \
      --tokenizer "$tokenizer" >/dev/null
  else
    "$build/bench/quantize/quantize_bench" --dir "$model" --layers "$layers" --presets "" >/dev/null
    cp "$tokenizer" "$model/tokenizer.model"
  fi
fi
test -f "$model/config.json"
measure() {  # label, command...: prints "label wall_s peak_rss_gb"
  local label=$1; shift
  /usr/bin/time -v "$@" >"$work/$label.log" 2>&1 || { tail -5 "$work/$label.log"; return 1; }
  awk -v l="$label" '/Elapsed \(wall clock\)/ {n = split($NF, t, ":"); s = t[n] + 60 * t[n - 1] + 3600 * (n > 2 ? t[1] : 0)}
    /User time/ {u = $NF} /System time/ {y = $NF}
    /Maximum resident/ {r = $NF / 1048576} END {printf "%-16s wall %7.1f s  CPU %7.1f + %5.1f s  peak RSS %6.2f GB\n", l, s, u, y, r}' "$work/$label.log"
}
rm -rf "$work/bf16" "$work/ours" "$work/theirs.gguf"
OMP_NUM_THREADS=$threads measure quark_Q4_K_M "$build/core/cli/quark" quantize --model "$model" --export gguf \
  --gguf-type Q4_K_M --output "$work/ours"
ours_bytes=$(stat -c %s "$work/ours/model.gguf")
rm -rf "$work/ours"
OMP_NUM_THREADS=$threads "$build/core/cli/quark" quantize --model "$model" --export gguf --gguf-type BF16 \
  --output "$work/bf16" >/dev/null
if [ "$layers" = 32 ]; then rm -rf "$model"; fi  # 13.5 GB: the BF16 GGUF is llama-quantize's input
measure llama-quantize "$work/llama-quantize" "$work/bf16/model.gguf" "$work/theirs.gguf" Q4_K_M "$threads"
# File sizes (tests/export/gguf_mixture_test.cc checks the bytes tensor by tensor on real models).
echo "$ours_bytes ours (quark)"
stat -c '%s theirs (llama-quantize)' "$work/theirs.gguf"
rm -rf "$work/bf16" "$work/theirs.gguf"
