#!/usr/bin/env bash
# The CPU's large tensors on transparent huge pages (core/runtime/huge_page_allocator.h) against LibTorch's own
# allocator (QUARK_HUGE_PAGES=0), side by side: wall time and peak RSS of `quark quantize` on one Llama-2-7B-shaped
# decoder layer (bench/algorithms/layer_7b_fixture.sh: hidden 4096, MLP 11008, bf16, seeded
# random weights, 2048 calibration tokens), uint4 asymmetric groups of 128, each algorithm run with small pages, then
# with huge pages, each as its own process under /usr/bin/time -v.
#
#   bench/runtime/huge_pages_7b_layer.sh [BUILD_DIR]     (ALGOS="rtn gptq awq" SCHEME=uint4_wo_128 TOKENS=2048)
set -u
# shellcheck source=bench/algorithms/layer_7b_fixture.sh
source "$(dirname "$0")/../algorithms/layer_7b_fixture.sh" "$@"

# One run: prints "wall rss" (seconds, GB), or "failed" with the log's last line.
run() {
  local pages=$1 algo=$2
  local flags=()
  [ "$algo" = rtn ] || flags=(--quant-algo "$algo")
  rm -rf "$OUT/run"
  QUARK_HUGE_PAGES=$pages /usr/bin/time -v -o "$OUT/time" "$QUARK" quantize --model "$DIR" --scheme "$SCHEME" \
    --calib "$DIR/calib.ids" --num-calib-samples 1 --seq-len "$TOKENS" "${flags[@]}" --output "$OUT/run" \
    > "$OUT/log" 2>&1 || { echo "failed: $(tail -1 "$OUT/log" | cut -c1-120)"; return; }
  awk -F': ' '/Elapsed \(wall clock\)/ {n = split($2, p, ":"); s = 0; for (i = 1; i <= n; ++i) s = s * 60 + p[i];
                                         w = s}
              /Maximum resident set size/ {r = $2 / 1048576}
              END {printf "%.1f %.2f", w, r}' "$OUT/time"
}

echo "One Llama-2-7B-shaped layer, $TOKENS calibration tokens, $SCHEME, QUARK_THREADS=$QUARK_THREADS, $(nproc) cores;"
echo "transparent huge pages: $(cat /sys/kernel/mm/transparent_hugepage/enabled 2>/dev/null || echo absent)"
echo
echo "| algorithm | small pages: wall (s), peak RSS (GB) | huge pages: wall (s), peak RSS (GB) | speed-up |"
echo "|---|---|---|---|"
for algo in ${ALGOS:-rtn gptq awq}; do
  read -r small_wall small_rss <<< "$(run 0 "$algo")"
  read -r huge_wall huge_rss <<< "$(run 1 "$algo")"
  speedup=$(awk -v a="$small_wall" -v b="$huge_wall" 'BEGIN {if (b + 0 > 0) printf "%.2fx", a / b; else print "-"}')
  echo "| $algo | $small_wall, $small_rss | $huge_wall, $huge_rss | $speedup |"
done
