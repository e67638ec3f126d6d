#!/usr/bin/env bash
# GPTAQ and Qronos side by side: the engine's `algo_bench gptaq|qronos` and AMD Quark's own Gptaq / Qronos classes
# (bench/algorithms/peers/quark_asymmetric_peer.py, run in the Debian trixie chroot that scripts/check-libtorch2.sh
# builds) on the same saved inputs (x, xq, w from `algo_bench --save-inputs`), with the same threads: uint4 asymmetric
# per group of 128, static groups, desc_act, blocks of 128, each at Quark 0.13's defaults. Prints one table row per
# linear, method, implementation and thread count: seconds, peak RSS and the output error, and for Quark's rows how far
# its error is from the engine's.
#
# Every implementation runs REPEATS times (default 3) and its fastest run is reported, as gptq_vs_peers.sh does.
# Both sides get the same BLAS and the same vector kernels: the chroot's python3-torch links the netlib reference BLAS
# (a 2048^3 product takes 19 s there, 0.36 s with OpenBLAS) and, with no /proc or /sys in the chroot, cpuinfo fails and
# ATen runs its non-AVX kernels. So Quark's side runs with this machine's OpenBLAS (the library the engine links,
# copied into the run's scratch folder and put first by LD_LIBRARY_PATH, as Debian's libblas.so.3 alternative would),
# OPENBLAS_CORETYPE=SkylakeX as the engine sets for itself on this CPU, and /proc and /sys mounted into the chroot in a
# private mount namespace (unshare -m; nothing is mounted for anyone else).
# Needs root (chroot) and QUARK_SRC: a directory holding quark/torch/algorithm/{common.py,gptaq/gptaq.py,
# qronos/qronos.py} of a Quark checkout (never committed here).
#
#   QUARK_SRC=/path/to/Quark bench/algorithms/asymmetric_vs_quark.sh N,K,T...     e.g. 4096,4096,2048 4096,11008,2048
#   (BUILD=build THREADS="1 2" REPEATS=3 METHODS="gptaq qronos" SEED=0 DRIFT=0.1 QUARK_TRIXIE_ROOT=/var/tmp/quark-trixie)
set -u
BUILD=${BUILD:-build}
THREADS=${THREADS:-"1 2"}
REPEATS=${REPEATS:-3}
METHODS=${METHODS:-"gptaq qronos"}
root=${QUARK_TRIXIE_ROOT:-/var/tmp/quark-trixie}
src=${QUARK_SRC:-}
here=$(cd "$(dirname "$0")" && pwd)
[ "$(id -u)" -eq 0 ] || { echo "asymmetric_vs_quark.sh: the chroot needs root" >&2; exit 2; }
[ -x "$root/usr/bin/python3" ] || { echo "no trixie chroot at $root (bash scripts/check-libtorch2.sh cpu makes one)" >&2; exit 2; }
[ -n "$src" ] && [ -f "$src/quark/torch/algorithm/gptaq/gptaq.py" ] && [ -f "$src/quark/torch/algorithm/qronos/qronos.py" ] ||
  { echo "set QUARK_SRC to a Quark source tree (quark/torch/algorithm/{common,gptaq/gptaq,qronos/qronos}.py)" >&2; exit 2; }
work=$(mktemp -d "$root/tmp/asym-vs-quark.XXXXXX")
trap 'rm -rf "$work"' EXIT
inside="/tmp/$(basename "$work")"
mkdir -p "$work/src"
(cd "$src" && cp --parents quark/torch/algorithm/common.py quark/torch/algorithm/gptaq/gptaq.py \
  quark/torch/algorithm/qronos/qronos.py "$work/src/")
cp "$here/peers/quark_asymmetric_peer.py" "$here/../../tests/peers/quark_algorithms/quark_asymmetric.py" "$work/"
mkdir -p "$work/blas"
blas=${OPENBLAS_DIR:-/usr/lib/x86_64-linux-gnu/openblas-pthread}
cp -L "$blas/libblas.so.3" "$blas/liblapack.so.3" "$blas/libopenblas.so.0" "$work/blas/" ||
  { echo "no OpenBLAS in $blas (OPENBLAS_DIR names another)" >&2; exit 2; }

field() { python3 -c "import json,sys; d=json.loads(sys.stdin.read().strip().splitlines()[-1]); print(d.get('$1', '-'))"; }
# The JSON line with the smallest total_s among the lines on stdin (nothing when there is none).
fastest() {
  python3 -c "
import json, sys
runs = [json.loads(l) for l in sys.stdin if l.strip().startswith('{')]
if runs: print(json.dumps(min(runs, key=lambda d: d['total_s'])))"
}
run_once() {  # impl method threads
  case $1 in
    engine) "$BUILD/bench/algorithms/algo_bench" "$2" --load-inputs "$work/inputs.safetensors" --threads "$3" ;;
    quark) unshare -m --propagation private -- bash -c 'mount --bind /sys "$0/sys" && mount -t proc proc "$0/proc" &&
             exec chroot "$0" "$@"' "$root" /usr/bin/env -i PATH=/usr/bin:/bin HOME=/root LANG=C.UTF-8 \
             QUARK_SRC="$inside/src" LD_LIBRARY_PATH="$inside/blas" OPENBLAS_CORETYPE=SkylakeX OMP_NUM_THREADS="$3" \
             OPENBLAS_NUM_THREADS="$3" python3 "$inside/quark_asymmetric_peer.py" --method "$2" \
             --inputs "$inside/inputs.safetensors" --threads "$3" 2>/dev/null ;;
  esac
}

echo "$(nproc) cores; load average at the start: $(cut -d' ' -f1-3 /proc/loadavg)"
echo
echo "| linear (N x K, T) | method | implementation | threads | statistics (s) | quantize (s) | total (s) | peak RSS (MB) | rel. output error | vs engine | RTN error |"
echo "|---|---|---|---|---|---|---|---|---|---|---|"
for shape in "$@"; do
  "$BUILD/bench/algorithms/algo_bench" gptaq --random "$shape" --seed "${SEED:-0}" --drift "${DRIFT:-0.1}" \
    --save-inputs "$work/inputs.safetensors" > /dev/null || { echo "| $shape | saving the inputs failed |"; continue; }
  IFS=, read -r n k t <<< "$shape"
  for method in $METHODS; do
    for threads in $THREADS; do
      engine_error=
      for impl in engine quark; do
        export OMP_NUM_THREADS=$threads OPENBLAS_NUM_THREADS=$threads
        out=$(for _ in $(seq "$REPEATS"); do run_once "$impl" "$method" "$threads"; done | fastest)
        if [ -z "$out" ]; then echo "| $n x $k, $t | $method | $impl | $threads | failed |"; continue; fi
        error=$(echo "$out" | field rel_output_error)
        [ "$impl" = engine ] && engine_error=$error
        vs=-
        [ "$impl" = quark ] && [ -n "$engine_error" ] &&
          vs=$(python3 -c "print(f'{($error - $engine_error) / $engine_error * 100:+.4f}%')")
        printf "| %s x %s, %s | %s | %s | %s | %.2f | %.2f | %.2f | %.0f | %.7g | %s | %.7g |\n" "$n" "$k" "$t" "$method" \
          "$impl" "$threads" "$(echo "$out" | field stats_s)" "$(echo "$out" | field quantize_s)" \
          "$(echo "$out" | field total_s)" "$(echo "$out" | field peak_rss_mb)" "$error" "$vs" \
          "$(echo "$out" | field rtn_rel_output_error)"
      done
    done
  done
done
echo
echo "load average at the end: $(cut -d' ' -f1-3 /proc/loadavg)"
