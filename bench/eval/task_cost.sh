#!/usr/bin/env bash
# Measures the task scorer on tinyllama-a and the 2-layer Llama-2-7B shape (one thread, CPU seconds) beside its
# counted work, then fits the cost model's coefficients (core/estimate/task_cost.h) and writes
# bench/eval/task_cost_fit.json. The 7B-shape folder is made with quantize_bench and the fixtures' Llama tokenizer.
#   bench/eval/task_cost.sh [BUILD_DIR]     (DIR=/var/tmp/<you>/task_cost to place the model; ~1.4 GB)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
build=${1:-$root/build}
fixtures=${QUARK_SHARED_DIR:-$root/../shared}/fixtures
dir=${DIR:-/tmp/quark_task_cost}
model7b="$dir/l7b2"
if [ ! -f "$model7b/model.safetensors" ]; then
  "$build/bench/quantize/quantize_bench" --dir "$model7b" --layers 2 --presets "" > /dev/null
  cp "$fixtures/tokenizers/llama2-32k.model" "$model7b/tokenizer.model"
fi
bench() { QUARK_THREADS=1 "$build/bench/eval/task_cost_bench" --tasks-dir "$fixtures/tasks" "$@"; }
{
  bench --model "$fixtures/tinyllama-a" --tasks arc_easy,arc_challenge,piqa,winogrande,lambada_openai --limit 10
  bench --model "$fixtures/tinyllama-a" --tasks mmlu --limit 1
  bench --model "$model7b" --tasks lambada_openai,winogrande,arc_easy,piqa --limit 3
} | tee "$dir/runs.jsonl"
bench --model "$model7b" --tasks arc_easy,arc_challenge,piqa,winogrande,lambada_openai,mmlu --limit 0 --count-only \
  > "$dir/fixtures.jsonl"
python3 "$here/fit_task_cost.py" "$dir/runs.jsonl" "$dir/fixtures.jsonl" > "$here/task_cost_fit.json"
cat "$here/task_cost_fit.json"
