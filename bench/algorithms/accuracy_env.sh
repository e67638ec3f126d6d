# Sourced by the *_accuracy.sh scripts: the build, the shared fixtures and the tinyllama-a train/held-out split they
# all measure on. Arguments: [BUILD_DIR] [SHARED_DIR]; SAMPLES (default ACCURACY_SAMPLES, else 128) and SEQ (256).
BUILD=${1:-build}
SHARED=${2:-$(cd "$(dirname "${BASH_SOURCE[0]}")/../../../shared" && pwd)}
MODEL=$SHARED/fixtures/tinyllama-a
CALIB=$SHARED/fixtures/eval/tinystories_train_split.txt
EVAL=$SHARED/fixtures/eval/tinystories_heldout_split.txt
SAMPLES=${SAMPLES:-${ACCURACY_SAMPLES:-128}}
SEQ=${SEQ:-256}
QUARK="$BUILD/core/cli/quark"

# The table scripts' start: a scratch folder $OUT removed on exit, one thread per run unless QUARK_THREADS says
# otherwise, and tinyllama-a's outlier twin in $OUT/twin.
start_table_run() {
  OUT=$(mktemp -d)
  trap 'rm -rf "$OUT"' EXIT
  export QUARK_THREADS=${QUARK_THREADS:-1}
  "$QUARK" outlier-twin --model "$MODEL" --output "$OUT/twin" > /dev/null 2>&1 || { echo "outlier-twin failed" >&2; exit 1; }
}

# int3 has no preset: writes Quark's quantization_config for symmetric int3 groups of 128, weight only, to "$1".
write_int3_wo_128_config() {
  cat > "$1" <<'JSON'
{"quant_method": "quark", "global_quant_config": {"input_tensors": null, "output_tensors": null, "bias": null,
 "weight": {"dtype": "int3", "qscheme": "per_group", "ch_axis": 1, "group_size": 128, "symmetric": true,
            "is_dynamic": false, "round_method": "half_even", "scale_type": "float", "observer_cls": "PerChannelMinMaxObserver"}},
 "exclude": ["lm_head"]}
JSON
}

# The last line of a refused run, for a table cell: "refused: <reason>" ("|" escaped, 110 characters).
refused_cell() {
  echo "refused: $(echo "$1" | grep -v -i openblas | tail -1 | sed 's/|/\\|/g' | cut -c1-110)"
}

# The mean KL divergence of the export in "$1" from the float model "$2" on the held-out split (`quark eval --kld`,
# as llama-perplexity --kl-divergence: the second half of each 256-token window), "?" when the evaluation fails.
# Needs QUARK set.
mean_kld() {
  "$QUARK" eval --model "$1" --kld --reference "$2" --text "$EVAL" --seq-len 256 --max-windows 40 --json 2>/dev/null |
    grep '^{' | python3 -c 'import json,sys; print("%.5f" % json.load(sys.stdin)["kld_mean"]["value"])' 2>/dev/null ||
    echo "?"
}

# One table cell, "quantized / reloaded / KLD (seconds)": `quark quantize` of model "$1" on the calibration and
# held-out splits with the remaining arguments (the scheme or --config, the algorithm flags, and `--output $OUT/run`
# where an export is wanted). "reloaded" is the perplexity of the export read back (compressed-tensors' when one is
# written, else HF-quark's); the KLD is measured on $OUT/run when it exists. Needs QUARK and OUT set.
quantize_cell() {
  local model=$1 dir="$OUT/run" run line seconds kld="-" reloaded start
  shift
  rm -rf "$dir"
  start=$(date +%s.%N)
  run=$("$QUARK" quantize --model "$model" --calib "$CALIB" --num-calib-samples "$SAMPLES" --seq-len "$SEQ" \
          --eval "$EVAL" --eval-seq-len 256 --eval-max-windows 40 "$@" 2>&1)
  seconds=$(echo "$(date +%s.%N) - $start" | bc)
  line=$(echo "$run" | grep '^perplexity:')
  if [ -z "$line" ]; then
    refused_cell "$run"
    return
  fi
  # "perplexity: float F  quantized Q  reloaded R[  gguf G][  compressed_tensors C]"
  reloaded=$(echo "$line" | awk '{r = $7; for (i = 8; i < NF; i++) if ($i == "compressed_tensors") r = $(i + 1); print r}')
  if [ "${KLD:-1}" = 1 ] && [ -d "$dir" ]; then
    kld=$(mean_kld "$dir" "$model")
  fi
  printf "%.4f / %s / %s (%.0f s)" "$(echo "$line" | awk '{print $5}')" "${reloaded:--}" "$kld" "$seconds"
}
