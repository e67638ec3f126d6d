#!/usr/bin/env bash
# OpenMP's idle threads sleeping (OMP_WAIT_POLICY=PASSIVE, what `quark` and `quark-worker` now set for themselves:
# core/base/openmp_wait_policy.h) against libgomp's default (GOMP_SPINCOUNT=300000: they spin after every parallel
# region), side by side, each run its own `quark` process under /usr/bin/time: perplexity and task scoring of
# tinyllama-a, and RTN, GPTQ and GPTAQ of one Llama-2-7B-shaped layer (bench/algorithms/layer_7b_fixture.sh: hidden 4096,
# MLP 11008, bf16 seeded weights, 2048 calibration tokens, uint4_wo_128). Each pair runs spinning first, then sleeping.
#
#   bench/runtime/openmp_wait.sh [BUILD_DIR]     (ALGOS="rtn gptq gptaq" SHARED=../shared REPEATS=1)
set -u
# shellcheck source=bench/algorithms/layer_7b_fixture.sh
source "$(dirname "$0")/../algorithms/layer_7b_fixture.sh" "$@"
SHARED=${SHARED:-$(dirname "$0")/../../../shared}
TINY=$SHARED/fixtures/tinyllama-a

# One run: prints "wall" (seconds), or "failed" with the log's last line. $1: spin (libgomp's default) or sleep.
run() {
  local policy=(env -u OMP_WAIT_POLICY GOMP_SPINCOUNT=300000)
  [ "$1" = sleep ] && policy=(env -u GOMP_SPINCOUNT -u OMP_WAIT_POLICY)
  shift
  "${policy[@]}" /usr/bin/time -f "%e" -o "$OUT/time" "$QUARK" "$@" > "$OUT/log" 2>&1 ||
    { echo "failed: $(tail -1 "$OUT/log" | cut -c1-120)"; return; }
  cat "$OUT/time"
}

workload() {
  case $1 in
    perplexity) echo "eval --model $TINY --text $SHARED/fixtures/eval/tinystories_heldout_split.txt --seq-len 256 \
--max-windows 40 --json" ;;
    tasks) echo "eval --model $TINY --tasks arc_easy,piqa --limit 60 --tasks-dir $SHARED/fixtures/tasks --json" ;;
    rtn) echo "quantize --model $DIR --scheme $SCHEME --calib $DIR/calib.ids --num-calib-samples 1 --seq-len $TOKENS \
--output $OUT/run" ;;
    *) echo "quantize --model $DIR --scheme $SCHEME --calib $DIR/calib.ids --num-calib-samples 1 --seq-len $TOKENS \
--quant-algo $1 --output $OUT/run" ;;
  esac
}

echo "QUARK_THREADS=$QUARK_THREADS, $(nproc) cores; tinyllama-a (perplexity: 40 windows of 256 tokens; tasks: arc_easy"
echo "and piqa, 60 examples each); one Llama-2-7B-shaped layer, $TOKENS calibration tokens, $SCHEME"
echo
echo "| workload | spinning (GOMP_SPINCOUNT=300000): wall (s) | sleeping (PASSIVE): wall (s) | speed-up |"
echo "|---|---|---|---|"
for name in perplexity tasks ${ALGOS:-rtn gptq gptaq}; do
  for _ in $(seq "${REPEATS:-1}"); do
    rm -rf "$OUT/run"
    # shellcheck disable=SC2046 # the workload is a list of words
    spin=$(run spin $(workload "$name"))
    rm -rf "$OUT/run"
    # shellcheck disable=SC2046
    sleep=$(run sleep $(workload "$name"))
    speedup=$(awk -v a="$spin" -v b="$sleep" 'BEGIN {if (b + 0 > 0 && a + 0 > 0) printf "%.2fx", a / b; else print "-"}')
    echo "| $name | $spin | $sleep | $speedup |"
  done
done
