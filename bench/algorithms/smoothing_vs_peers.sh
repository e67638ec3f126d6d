#!/usr/bin/env bash
# AWQ and SmoothQuant side by side: the engine's algo_bench and the Python peers (mit-han-lab/llm-awq and
# mit-han-lab/smoothquant, run by bench/algorithms/peers/{awq,smoothquant}_peer.py from checkouts given here) on the
# same saved Llama MLP blocks, with the same threads. Prints one table row per block, algorithm, implementation and
# thread count: seconds (for AWQ also the clip search's; quarkd's clip_s is that search run once more, apart), the
# block's output error, the RTN error (the peers' also with Quark's integer numerics), and the chosen scales.
#
#   bench/algorithms/smoothing_vs_peers.sh AWQ_DIR SQ_DIR BLOCK.safetensors...
#   (BUILD=build THREADS="2" ALGOS="awq smoothquant smoothquant-norm" EPS=1e-5 to change them)
#
# Blocks: `algo_bench dump-mlp` (a trained model's layer with its own hidden states) or peers/make_mlp_input.py.
set -u
AWQ=$1 SQ=$2
shift 2
BUILD=${BUILD:-build}
THREADS=${THREADS:-"2"}
ALGOS=${ALGOS:-"awq smoothquant smoothquant-norm"}
EPS=${EPS:-1e-5}
PY=/usr/bin/python3  # Debian's, with python3-torch
HERE=$(cd "$(dirname "$0")" && pwd)
# One row from the JSON line: the error columns with Quark's numerics too where the peer reports them.
row() {
  python3 -c '
import json, sys
block, algo, impl, t = sys.argv[1:5]
d = json.loads(sys.stdin.read().strip().splitlines()[-1])
qn = d.get("rel_output_error_quark_numerics")
rqn = d.get("rtn_rel_output_error_quark_numerics")
clip = d.get("clip_s", -1)
pairs = "; ".join("%s r=%s [%.4g, %.4g]" % (p["prev_op"].split(".")[-1], p.get("ratio", "-") if p.get("ratio", -1) >= 0 else "-",
                  p["scale_min"], p["scale_max"]) for p in d["pairs"])
print("| %s | %s | %s | %s | %.2f | %s | %.6g | %.6g | %s | %s | %s |" % (block, algo, impl, t, d["algo_s"],
      "-" if clip < 0 else "%.2f" % clip, d["rel_output_error"], d["rtn_rel_output_error"],
      "-" if qn is None else "%.6g" % qn, "-" if rqn is None else "%.6g" % rqn, pairs))
' "$@"
}
echo "| block | algorithm | implementation | threads | algo (s) | of it clip (s) | rel. output error | RTN error |" \
     "error, Quark numerics | RTN, Quark numerics | scales per pair (ratio, min, max) |"
echo "|---|---|---|---|---|---|---|---|---|---|---|"
for block in "$@"; do
  name=$(basename "$block" .safetensors)
  for algo in $ALGOS; do
    for t in $THREADS; do
      for impl in quarkd peer; do
        export OMP_NUM_THREADS=$t OPENBLAS_NUM_THREADS=$t
        case $algo:$impl in
          awq:quarkd) out=$("$BUILD/bench/algorithms/algo_bench" awq --input "$block" --eps "$EPS" --threads "$t" --time-clip) ;;
          awq:peer) out=$("$PY" "$HERE/peers/awq_peer.py" --repo "$AWQ" --input "$block" --eps "$EPS" --threads "$t") ;;
          smoothquant*:quarkd)
            out=$("$BUILD/bench/algorithms/algo_bench" smoothquant --input "$block" --eps "$EPS" --threads "$t" \
                    --pairs "$([ "$algo" = smoothquant-norm ] && echo norm || echo both)") ;;
          smoothquant*:peer)
            out=$("$PY" "$HERE/peers/smoothquant_peer.py" --repo "$SQ" --input "$block" --eps "$EPS" --threads "$t" \
                    --pairs "$([ "$algo" = smoothquant-norm ] && echo norm || echo both)") ;;
        esac
        label=$impl
        [ "$impl" = peer ] && label=$([ "$algo" = awq ] && echo llm-awq || echo smoothquant)
        if [ -z "$out" ]; then echo "| $name | $algo | $label | $t | failed |"; continue; fi
        echo "$out" | row "$name" "$algo" "$label" "$t"
      done
    done
  done
done
