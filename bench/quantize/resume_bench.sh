#!/usr/bin/env bash
# Time saved by resume (#17): a GPTQ run of a Llama-2-7B-shaped bf16 model (quantize_bench's synthetic weights) is
# run once uninterrupted, once killed with SIGKILL as soon as its checkpoint names KILL_AT finished layers, and once
# more to resume it. Prints the three wall times and what the restart saved against starting over.
#
#   bench/quantize/resume_bench.sh [BUILD_DIR]   env: LAYERS (default 4), KILL_AT (3), SCHEME (uint4_wo_128),
#                                                ALGO (gptq), DIR (/tmp/quark_resume_bench), QUARK_THREADS,
#                                                SKIP_UNINTERRUPTED=1 (the killed and resumed runs only: a 32-layer
#                                                GPTQ run is 20 minutes; compare with a full run measured before)
set -euo pipefail
build=${1:-build}
layers=${LAYERS:-4}
kill_at=${KILL_AT:-3}
scheme=${SCHEME:-uint4_wo_128}
algo=${ALGO:-gptq}
dir=${DIR:-/tmp/quark_resume_bench}
quark="$build/core/cli/quark"
model="$dir/model"
work="$dir/runs"
if [ ! -f "$model/config.json" ] || ! grep -q "\"num_hidden_layers\": $layers" "$model/config.json"; then
  rm -rf "$model"
  "$build/bench/quantize/quantize_bench" --dir "$model" --layers "$layers" --presets uint4_wo_128 > /dev/null
fi
rm -rf "$work" && mkdir -p "$work"
run=("$quark" quantize --model "$model" --scheme "$scheme" --quant-algo "$algo" --calib "$model/calib.ids")

now() { date +%s.%N; }
finished() { python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['finished_layers'])" "$1" 2>/dev/null || echo 0; }

t_full=0
if [ "${SKIP_UNINTERRUPTED:-0}" != 1 ]; then
  t0=$(now); "${run[@]}" --output "$work/a" > "$work/a.log" 2>&1; t_full=$(echo "$(now) - $t0" | bc)
fi

t0=$(now)
"${run[@]}" --output "$work/b" --checkpoint-dir "$work/ckpt" > "$work/b1.log" 2>&1 &
pid=$!
until [ "$(finished "$work/ckpt/state.json")" -ge "$kill_at" ]; do
  kill -0 "$pid" 2>/dev/null || { echo "the run ended before layer $kill_at" >&2; exit 1; }
  sleep 0.05
done
kill -9 "$pid"; wait "$pid" 2>/dev/null || true
t_killed=$(echo "$(now) - $t0" | bc)
left=$(finished "$work/ckpt/state.json")

t0=$(now); "${run[@]}" --output "$work/b" --checkpoint-dir "$work/ckpt" > "$work/b2.log" 2>&1; t_resume=$(echo "$(now) - $t0" | bc)
grep -q "resumed at layer $left" "$work/b2.log" || { echo "no 'resumed at layer $left' in the resumed run" >&2; exit 1; }
same="not compared (no uninterrupted run)"
if [ -d "$work/a" ]; then
  same=identical
  for f in "$work"/a/*; do cmp -s "$f" "$work/b/$(basename "$f")" || same=DIFFERENT; done
fi

printf 'model: Llama-2-7B shapes, %s layers, bf16; %s + %s; threads %s\n' "$layers" "$scheme" "$algo" "${QUARK_THREADS:-default}"
printf '| run | wall (s) |\n|---|---|\n'
printf '| uninterrupted | %.1f |\n' "$t_full"
printf '| killed after %s of %s layers (kill -9) | %.1f |\n' "$left" "$layers" "$t_killed"
printf '| resumed at layer %s | %.1f |\n' "$left" "$t_resume"
printf '| starting over instead (= uninterrupted) | %.1f |\n' "$t_full"
printf 'saved by resuming: %.1f s of %.1f s; artifact %s to the uninterrupted run\n' \
  "$(echo "$t_full - $t_resume" | bc)" "$t_full" "$same"
