#!/usr/bin/env bash
# #35 item 2: the engine's AutoRound and Intel auto-round's own SignRound code (bench/algorithms/peers/
# autoround_peer.py) on the same decoder layer of tinyllama-a: its float weights and its inputs on SAMPLES training
# and HELDOUT held-out windows of SEQ tokens of the train split, saved by `algo_bench autoround --save`. uint4
# asymmetric groups of GROUP, ITERS iterations, lr = minmax_lr = 1 / ITERS, batch BATCH, min-max tuning, best loss
# kept, seed 42 on both sides. Prints the two JSON lines and a side-by-side table with the loss curves' distance.
#
#   bench/algorithms/autoround_vs_peer.sh [BUILD_DIR] [SHARED_DIR]
#   (ITERS=200 SAMPLES=8 HELDOUT=8 BATCH=8 SEQ=128 GROUP=128 LAYER=0 SCALE_DTYPE=float32 THREADS=1;
#    AUTOROUND_GIT: a git dir of github.com/intel/auto-round, default /work/.mirror/intel+auto-round/repo,
#    AUTOROUND_REV: its commit, default HEAD; QUARK_TRIXIE_ROOT: the chroot, default /var/tmp/quark-trixie;
#    ALGO_BENCH: the binary, default BUILD_DIR/bench/algorithms/algo_bench)
# Exit 77 when a part is missing (root for the chroot, the chroot's torch / safetensors, auto-round's source).
set -euo pipefail
BUILD=${1:-build}
SHARED=${2:-$(cd "$(dirname "$0")/../../../shared" && pwd)}
HERE=$(cd "$(dirname "$0")" && pwd)
ITERS=${ITERS:-200} SAMPLES=${SAMPLES:-8} HELDOUT=${HELDOUT:-8} BATCH=${BATCH:-8} SEQ=${SEQ:-128}
GROUP=${GROUP:-128} LAYER=${LAYER:-0} SCALE_DTYPE=${SCALE_DTYPE:-float32} THREADS=${THREADS:-1}
GIT=${AUTOROUND_GIT:-/work/.mirror/intel+auto-round/repo}
REV=${AUTOROUND_REV:-HEAD}
ROOT=${QUARK_TRIXIE_ROOT:-/var/tmp/quark-trixie}
ALGO_BENCH=${ALGO_BENCH:-$BUILD/bench/algorithms/algo_bench}
missing() { echo "auto-round peer missing: $*" >&2; exit 77; }
[ "$(id -u)" -eq 0 ] || missing "the chroot needs root"
[ -x "$ROOT/usr/bin/python3" ] || missing "no trixie chroot at $ROOT (bash scripts/check-libtorch2.sh cpu makes one)"
for m in torch safetensors; do
  [ -d "$ROOT/usr/lib/python3/dist-packages/$m" ] || missing "python3 module $m not in $ROOT"
done
commit=$(git --git-dir="$GIT" rev-parse --verify "$REV^{commit}" 2>/dev/null) ||
  missing "no auto-round git dir at $GIT (set AUTOROUND_GIT; git clone --bare https://github.com/intel/auto-round)"

work=$(mktemp -d "$ROOT/tmp/autoround-peer.XXXXXX")
trap 'rm -rf "$work"' EXIT
inside=/tmp/$(basename "$work")
git --git-dir="$GIT" archive "$commit" auto_round | tar -x -C "$work"
cp "$HERE/peers/autoround_peer.py" "$work/"
export OMP_NUM_THREADS=$THREADS OPENBLAS_NUM_THREADS=$THREADS
"$ALGO_BENCH" autoround --model "$SHARED/fixtures/tinyllama-a" \
  --calib "$SHARED/fixtures/eval/tinystories_train_split.txt" --save "$work/layer" --layer "$LAYER" \
  --samples "$SAMPLES" --heldout "$HELDOUT" --seq-len "$SEQ" --iters "$ITERS" --batch "$BATCH" --group-size "$GROUP" \
  --threads "$THREADS" > /dev/null
chroot "$ROOT" /usr/bin/env -i PATH=/usr/bin:/bin HOME=/root LANG=C.UTF-8 AUTOROUND_SRC="$inside" \
  AUTOROUND_LABEL="intel/auto-round@$commit" PEER_THREADS="$THREADS" OMP_NUM_THREADS="$THREADS" \
  python3 "$inside/autoround_peer.py" "$inside/layer" --iters "$ITERS" --batch "$BATCH" --scale-dtype "$SCALE_DTYPE" \
  > /dev/null 2> >(grep -v -e "UCX  ERROR" -e "Error in cpuinfo" >&2)
cat "$work/layer/engine.json" "$work/layer/peer.json"
python3 - "$work/layer/engine.json" "$work/layer/peer.json" <<'PY'
import json, sys
e, p = (json.load(open(path)) for path in sys.argv[1:3])
print()
print(f"| layer {e['samples']} windows, {e['iters']} iters, batch {e['batch']}, g{e['group_size']} | engine | auto-round |")
print("|---|---|---|")
for key, fmt in [("first_loss", "{:.6e}"), ("best_loss", "{:.6e}"), ("best_iter", "{}"), ("heldout_mse", "{:.6e}"),
                 ("train_mse", "{:.6e}"), ("changed_fraction", "{:.4%}"), ("seconds", "{:.1f}")]:
    print(f"| {key} | {fmt.format(e[key])} | {fmt.format(p[key])} |")
print(f"| RTN heldout_mse | {e['rtn_heldout_mse']:.6e} | |")
print(f"| weights on another grid point than the other side's | {p['weights_on_another_grid_point_than_engine'] / p['weights']:.4%} | |")
le, lp = e["losses"], p["losses"]
rel = [abs(a - b) / b for a, b in zip(le, lp)]
first = next((i for i, r in enumerate(rel) if r > 1e-5), None)
print()
print(f"loss curves: iteration 0 relative difference {rel[0]:.2e}; first iteration differing by more than 1e-5: {first};"
      f" largest relative difference {max(rel):.3%} (iteration {rel.index(max(rel))})")
print("iteration: engine / auto-round loss")
for i in sorted({0, 1, 2, 5, 10, 25, 50, 100, len(le) // 2, len(le) - 1} & set(range(len(le)))):
    print(f"  {i}: {le[i]:.6e} / {lp[i]:.6e}")
PY
