#!/usr/bin/env bash
# GPTQ side by side: the engine's algo_bench and the Python peers (IST-DASLab's gptq.py and Quark's GPTQ, run by
# bench/algorithms/peers/gptq_peers.py from checkouts given here) on the same saved layers, with the same threads.
# Prints one table row per layer, configuration, implementation and thread count: seconds and the output error.
#
# Every implementation runs REPEATS times (default 3) and its fastest run is reported, the peers' as ours: a shared
# 2-core VM's neighbours move single runs by 10-20%.
#
#   bench/algorithms/gptq_vs_peers.sh IST_DIR QUARK_DIR LAYER.safetensors... [-- algo_bench flags]
#   (BUILD=build THREADS="1 2" REPEATS=3 CONFIGS="--bits 4 --group-size 128 --asym|..." to change them)
set -u
IST=$1 QUARK=$2
shift 2
BUILD=${BUILD:-build}
THREADS=${THREADS:-"1 2"}
REPEATS=${REPEATS:-3}
CONFIGS=${CONFIGS:-"--bits 4 --group-size 128 --asym|--bits 4 --group-size 128 --asym --act-order --static-groups"}
PY=/usr/bin/python3  # Debian's, with python3-torch
HERE=$(cd "$(dirname "$0")" && pwd)
field() { python3 -c "import json,sys; d=json.loads(sys.stdin.read().strip().splitlines()[-1]); print(d.get('$1', '-'))"; }
# The JSON line with the smallest total_s among the lines on stdin (nothing when there is none).
fastest() {
  python3 -c "
import json, sys
runs = [json.loads(l) for l in sys.stdin if l.strip().startswith('{')]
if runs: print(json.dumps(min(runs, key=lambda d: d['total_s'])))"
}
echo "| layer | config | implementation | threads | hessian (s) | quantize (s) | total (s) | rel. output error | RTN error |"
echo "|---|---|---|---|---|---|---|---|---|"
IFS='|' read -r -a configs <<< "$CONFIGS"
for layer in "$@"; do
  for config in "${configs[@]}"; do
    for t in $THREADS; do
      for impl in engine engine-fast ist quark; do
        # The same threads everywhere: LibTorch's (OpenMP) and OpenBLAS's.
        export OMP_NUM_THREADS=$t OPENBLAS_NUM_THREADS=$t
        out=$(for _ in $(seq "$REPEATS"); do
          case $impl in
            engine) "$BUILD/bench/algorithms/algo_bench" gptq --input "$layer" $config --threads "$t" ;;
            engine-fast) "$BUILD/bench/algorithms/algo_bench" gptq --input "$layer" $config --threads "$t" --fast-linalg ;;
            *) "$PY" "$HERE/peers/gptq_peers.py" --peer "$impl" --repo "$([ $impl = ist ] && echo "$IST" || echo "$QUARK")" \
                 --input "$layer" $config --threads "$t" 2>/dev/null ;;
          esac
        done | fastest)
        if [ -z "$out" ]; then echo "| $(basename "$layer") | $config | $impl | $t | failed |"; continue; fi
        printf "| %s | %s | %s | %s | %.2f | %.2f | %.2f | %.7g | %.7g |\n" "$(basename "$layer" .safetensors)" "$config" "$impl" "$t" \
          "$(echo "$out" | field hessian_s)" "$(echo "$out" | field quantize_s)" "$(echo "$out" | field total_s)" \
          "$(echo "$out" | field rel_output_error)" "$(echo "$out" | field rtn_rel_output_error)"
      done
    done
  done
done
