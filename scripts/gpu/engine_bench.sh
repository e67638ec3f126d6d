#!/usr/bin/env bash
# The GPU kit's engine figures (scripts/gpu/run.sh runs this after the kernel bench when the kit built the engine):
# GPTQ on one 4096 x 4096 layer with 2048 calibration tokens (uint4 g128 asymmetric, with and without act order) on
# the GPU and on every CPU core, the same layer's NVFP4, fp8 and W4A8 GPTQ on the GPU (NVFP4 also column by column: the
# float grids' fused blocks against the loop they replace), the perplexity of stories260K streamed on the GPU and on
# the CPU, and last GPTAQ (fused and column by column) and Qronos on the GPTQ layer's shape on the GPU. One JSON line
# per figure into ENGINE_BENCH_JSONL; a figure that fails prints {"figure": ..., "error": ...} and the script exits 1
# at the end. Without QUARK_EXPECT_CUDA (no GPU listed) the device figures are not run, saying so.
#
#   engine_bench.sh BUILD_DIR SHARED_DIR ENGINE_BENCH_JSONL
set -uo pipefail
build=$1 shared=$2 jsonl=$3
# What quark and algo_bench would set by re-executing themselves (core/base/openmp_wait_policy.h), set once here.
export OMP_WAIT_POLICY=PASSIVE
algo=$build/bench/algorithms/algo_bench
quark=$build/core/cli/quark
: > "$jsonl"
failed=0

# figure NAME COMMAND...: the command's last stdout line (a JSON object) tagged with NAME, or its error.
figure() {
  local name=$1
  shift
  echo "== $name: $*"
  local output rc
  output=$("$@" 2> "$jsonl.err")
  rc=$?
  cat "$jsonl.err"
  if ((rc == 0)) && [[ $(tail -n 1 <<< "$output") == \{* ]]; then
    python3 -c 'import json, sys; d = json.loads(sys.argv[2]); print(json.dumps({"figure": sys.argv[1], **d}))' \
      "$name" "$(tail -n 1 <<< "$output")" | tee -a "$jsonl"
  else
    failed=1
    python3 -c 'import json, sys; print(json.dumps({"figure": sys.argv[1], "status": int(sys.argv[2]), "error": sys.argv[3]}))' \
      "$name" "$rc" "$(tail -n 5 "$jsonl.err")$output" | tee -a "$jsonl"
  fi
}

layer=(gptq --random 4096,4096,2048 --bits 4 --group-size 128 --asym)
text=(--model "$shared/fixtures/stories260K" --text "$shared/fixtures/eval/tinystories_validation_prefix.txt"
  --seq-len 256 --max-windows 16 --json)
if [[ -n ${QUARK_EXPECT_CUDA:-} ]]; then
  figure gptq_cuda "$algo" "${layer[@]}" --device cuda:0
  figure gptq_cuda_act_order "$algo" "${layer[@]}" --act-order --static-groups --device cuda:0
  # The weight specs as `quark presets --show` gives them (NVFP4's is its two-element list).
  for preset in nvfp4_weight_only fp8 int4_fp8; do
    "$quark" presets --show "$preset" |
      python3 -c 'import json, sys; json.dump(json.load(sys.stdin)["global_quant_config"]["weight"], sys.stdout)' \
        > "$build/gptq_spec_$preset.json"
  done
  float_layer=(gptq --random 4096,4096,2048 --device cuda:0)
  figure gptq_cuda_nvfp4 "$algo" "${float_layer[@]}" --spec "$build/gptq_spec_nvfp4_weight_only.json"
  figure gptq_cuda_nvfp4_column_loop "$algo" "${float_layer[@]}" --spec "$build/gptq_spec_nvfp4_weight_only.json" \
    --column-loop
  figure gptq_cuda_fp8 "$algo" "${float_layer[@]}" --spec "$build/gptq_spec_fp8.json"
  figure gptq_cuda_w4a8 "$algo" "${float_layer[@]}" --spec "$build/gptq_spec_int4_fp8.json"
  figure eval_cuda "$quark" eval "${text[@]}" --device cuda:0
else
  echo "no GPU listed (QUARK_EXPECT_CUDA unset): the cuda figures are not run"
fi
figure gptq_cpu "$algo" "${layer[@]}" --threads "$(nproc)"
figure eval_cpu "$quark" eval "${text[@]}"
if [[ -n ${QUARK_EXPECT_CUDA:-} ]]; then
  # GPTAQ's and Qronos's column loops in GPTQ's fused blocks, and GPTAQ's column by column (the loop they replace):
  # last, so that every figure before them stands if the step's time runs out here.
  figure gptaq_cuda "$algo" gptaq --random 4096,4096,2048 --device cuda:0
  figure gptaq_cuda_column_loop "$algo" gptaq --random 4096,4096,2048 --device cuda:0 --column-loop
  figure qronos_cuda "$algo" qronos --random 4096,4096,2048 --device cuda:0
fi
rm -f "$jsonl.err"
exit $failed
