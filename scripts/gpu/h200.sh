#!/usr/bin/env bash
# The H200 run (issue "GPU run on the H200"; docs/gpu.md, "The H200 run"): one call of the `device` tool that builds
# the GPU kit and measures what the issue asks, most important first, inside one deadline:
#   1. the kit (scripts/gpu/run.sh): build, the kit's tests (every CUDA kernel against the CPU kernel bit for bit,
#      GPTQ and streaming on cuda:0 against the CPU) and the kernels' throughput against the copy bandwidth;
#   2. the device's rates (scripts/gpu/device_rates.py: float32 / bf16 GEMM, Cholesky, copy), for the estimator;
#   3. GPTQ side by side on cuda:0: the engine (algo_bench) and IST-DASLab's and AMD Quark's GPTQ (carried in
#      gpu-kit/peers by prepare.sh) on the same 4096 x 4096 and 11008 x 4096 layers with 2048 tokens;
#   4. a real job on the 32-layer Llama-2-7B shape (bf16, seeded) with 128 x 2048 calibration tokens, fp8, on cuda:0
#      (the model is made in the background while the kit's tests run);
#   5. the pipeline on cuda:0 against the CPU on stories260K: RTN exports byte for byte, GPTQ and perplexities;
#   6. the same 7B job with uint4 g128 + GPTQ, for whatever time is left (its per-layer times extrapolate a cut).
# Every command's output lands in $WORK (default out-h200/); $OUT gets h200.jsonl (one line per figure), h200.log
# (what ran, when), the kit's results.json and run.log, and logs.tgz (every log), repacked every 10 s so that a call
# cut off at its limit still brings back what was done. Without a GPU (nvidia-smi lists none) the GPU steps are
# skipped, saying so.
#
#   run(command="bash scripts/gpu/h200.sh", carry=["gpu-kit"], timeout_s=590)
#
# QUARK_H200_STEPS picks and orders the steps (default "kit memory fp87b_bf16 gptq7b_bf16 awq side parity side11008 fp87b
# gptq7b rates"): kit, memory (pass_memory_bench on the 7B model, 16 x 2048 tokens, fp8 over 4 layers and uint4 g128 + GPTQ
# over 2: each layer's device allocated and reserved bytes against the device budget's formula, #27's 3.6x question),
# awq (AWQ on the 7B model's first layer, bf16, 8 x 2048 tokens, its searches batched and one at a time: time and
# memory),
# side
# (GPTQ side by side on the 4096 x 4096 layer: the engine's fused blocks and its column loop beside the peers),
# gptq7b and fp87b (the 7B jobs), parity (stories260K), side11008 (the 11008 x 4096 layer), rates (device_rates.py),
# and, not in the default list, moe (an MoE model in bf16: QUARK_H200_MOE, default deepseek_v3:deepseek-v3-4l, whose
# fourth layer has DeepSeek-V3's 256 routed experts, 30 GB; fp8 with 16 x 2048 token ids, QUARK_H200_MOE_CALIB, on
# whole layers and with the experts streamed in groups of QUARK_H200_MOE_GROUP, default 32: time, device memory, and
# whether the two exports are the same bytes).
# A second call on the still-warm machine can finish what the first left: the kit's build and the 7B model stay
# (QUARK_H200_STEPS="fp87b parity" QUARK_H200_SKIP_KIT=1 reuses both; the model is made again only if it is missing).
# Environment: QUARK_H200_BUDGET_S (seconds for everything, default 560), QUARK_H200_SCRATCH (model and exports,
# default build-h200-scratch; the 7B model takes 13.5 GB), and run.sh's own variables. For a dry run of this script's
# own logic on a machine without a GPU: QUARK_H200_SKIP_KIT=1 (an existing build in QUARK_KIT_BUILD_DIR),
# QUARK_H200_DEVICE=cpu, QUARK_H200_SHAPE=tiny, QUARK_H200_CALIB=4x64, QUARK_H200_LAYERS="256,512",
# QUARK_H200_PYTHON=/usr/bin/python3 (a python3 with torch; default: python3 on PATH, the GPU machine's).
set -uo pipefail
QUARK_H200_MOE=${QUARK_H200_MOE:-deepseek_v3:deepseek-v3-4l}

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
out=${OUT:-$root/out}
work=${WORK:-$root/out-h200}
build=${QUARK_KIT_BUILD_DIR:-$root/build-gpu-kit}
scratch=${QUARK_H200_SCRATCH:-$root/build-h200-scratch}
kit=${QUARK_GPU_KIT_DIR:-$root/gpu-kit}
deadline=$((SECONDS + ${QUARK_H200_BUDGET_S:-560}))
device=${QUARK_H200_DEVICE:-cuda:0}
shape=${QUARK_H200_SHAPE:-llama-2-7b}
calib=${QUARK_H200_CALIB:-128x2048}
samples=${calib%x*} seq_len=${calib#*x}
mkdir -p "$out" "$work" "$scratch"
jsonl=$work/h200.jsonl
log=$work/h200.log
: > "$jsonl"
: > "$log"

say() { echo "[$(date -u +%H:%M:%S) +${SECONDS}s] $*" | tee -a "$log"; }
left() { echo $((deadline - SECONDS)); }
# cap N: N seconds, or what is left before the deadline less a margin, whichever is smaller (at least 1).
cap() {
  local n=$1 l=$(($(left) - 5))
  ((l < n)) && n=$l
  ((n < 1)) && n=1
  echo "$n"
}
pack() {
  cp -f "$jsonl" "$log" "$out/" 2> /dev/null
  cp -f "$work/kit/results.json" "$work/kit/run.log" "$out/" 2> /dev/null
  tar -czf "$out/logs.tgz.part" -C "$work" . 2> /dev/null && mv -f "$out/logs.tgz.part" "$out/logs.tgz"
}
(while sleep 10; do pack; done) &
packer=$!
trap 'kill $packer 2> /dev/null; pack' EXIT

# The machine's python3 (with torch) runs without the kit's libraries on its path; the kit's programs with them.
# quark and the benchmarks make OpenMP's idle threads sleep by re-executing themselves with OMP_WAIT_POLICY=PASSIVE
# (core/base/openmp_wait_policy.h): exported once here, no engine program loads LibTorch's CUDA libraries twice.
# The Python peers and device_rates.py keep libgomp's default, as their users run them (peer, rates).
export OMP_WAIT_POLICY=PASSIVE
python=${QUARK_H200_PYTHON:-python3}
py() { env -u LD_LIBRARY_PATH "$python" "$@"; }
libs=$build/deps/usr/lib/x86_64-linux-gnu
measure() { # measure NAME TIMEOUT COMMAND...
  local name=$1 t=$2
  shift 2
  py "$root/scripts/gpu/measure.py" --name "$name" --log "$work/$name.log" --jsonl "$jsonl" --timeout "$t" \
    --env "LD_LIBRARY_PATH=$libs" -- "$@" | tee -a "$log"
}
# token_ids FILE MODEL SAMPLES SEQ_LEN SEED: seeded token ids below the model's vocabulary, the calibration set as a
# token-id file (SAMPLES lines of SEQ_LEN ids).
token_ids() {
  py -c 'import json, random, sys
vocab = json.load(open(sys.argv[2] + "/config.json"))["vocab_size"]
r = random.Random(int(sys.argv[5]))
with open(sys.argv[1], "w") as f:
    for _ in range(int(sys.argv[3])): f.write(" ".join(str(r.randrange(1, vocab)) for _ in range(int(sys.argv[4]))) + "\n")' "$@"
}
record() { py -c 'import json, sys; print(json.dumps(json.loads(sys.argv[1])))' "$1" >> "$jsonl"; }

gpu=0
if command -v nvidia-smi > /dev/null && nvidia-smi -L 2> /dev/null | grep -q '^GPU'; then gpu=1; fi
[[ $device == cpu ]] && gpu=1  # the dry run: every step, on the CPU
steps=" ${QUARK_H200_STEPS:-kit memory fp87b_bf16 gptq7b_bf16 awq side parity side11008 fp87b gptq7b rates} "
want() { [[ $steps == *" $1 "* ]]; }
say "H200 run: steps [${steps}], budget $(left) s, $(nproc) cores, $(free -g | awk '/Mem/{print $2}') GB, disk $(df -h "$scratch" | awk 'NR==2{print $4}') free; GPU: $(nvidia-smi -L 2> /dev/null | head -1)"

# 1. The kit. The engine's own figures are measured below instead (the same GPTQ beside the peers).
say "== kit (scripts/gpu/run.sh)"
# The 7B model is written while the kit's tests run: it needs only `quark`, which exists once the build step ends.
m7b=$scratch/$shape
ids=$scratch/calib-$calib.ids
(
  if [[ -e $m7b.done ]] || ! { want gptq7b || want fp87b || want gptq7b_bf16 || want fp87b_bf16 || want memory || want awq; }; then
    exit 0  # made by an earlier call, or not needed
  fi
  rm -rf "$m7b"
  until grep -q '^build' "$build/steps.tsv" 2> /dev/null; do sleep 2; done
  quark=$build/core/cli/quark
  [[ -x $quark ]] || { say "make-model: no quark built"; exit 1; }
  QUARK_THREADS=6 nice -n 10 env LD_LIBRARY_PATH="$libs" "$quark" make-model --arch llama --shape "$shape" \
    --dtype bf16 --seed 0 --out "$m7b" > "$work/make-model.log" 2>&1 || { say "make-model: failed"; exit 1; }
  token_ids "$ids" "$m7b" "$samples" "$seq_len" 0 && touch "$m7b.done"
  say "make-model: $shape done ($(du -sh "$m7b" 2> /dev/null | cut -f1))"
) &
maker=$!
if [[ ${QUARK_H200_SKIP_KIT:-0} == 1 ]] || ! want kit; then
  say "kit: skipped (QUARK_H200_SKIP_KIT=1), using the build in $build"
  grep -q '^build' "$build/steps.tsv" 2> /dev/null || printf 'build\t0\t0\tbuild.log\n' >> "$build/steps.tsv"
else
  OUT=$work/kit QUARK_KIT_ENGINE_BENCH=0 QUARK_BUILD_TIMEOUT=$(cap 330) QUARK_TEST_TIMEOUT=150 QUARK_BENCH_TIMEOUT=45 \
    timeout "$(cap 520)" bash "$root/scripts/gpu/run.sh" > "$work/run.out" 2>&1
  say "kit: status $? ($(grep -c . "$work/kit/run.log" 2> /dev/null) log lines)"
fi
algo=$build/bench/algorithms/algo_bench
quark=$build/core/cli/quark
if ((!gpu)); then
  say "no GPU listed by nvidia-smi: the device steps are skipped"
  wait $maker
  exit 0
fi

# GPTQ side by side on one layer (uint4 g128 asymmetric; with act order + static groups), one warm-up each: the
# engine's fused blocks, its column loop, and the peers.
peers=$kit/peers
reserve() { # seconds the 7B jobs still to come keep for themselves: the side by side starts no run inside them
  local r=15
  want gptq7b_bf16 && [[ ! -e $work/job7b_gptq_bf16.done ]] && r=$((r + 100))
  echo $r
}
side() { # side NAME LAYER COMMAND...: one implementation on one layer, its JSON line recorded
  local name=$1 layer=$2
  shift 2
  (($(left) < $(reserve))) && { say "$name $(basename "$layer"): skipped, $(left) s left"; return; }
  local line
  line=$(timeout "$(cap 60)" "$@" 2>> "$work/gptq.log" | tail -1)
  echo "$name $(basename "$layer"): ${line:0:200}" >> "$log"
  [[ $line == \{* ]] && record "{\"figure\": \"$name\", \"layer\": \"$(basename "$layer")\", \"result\": $line}"
}
peer() { # peer NAME LAYER FLAGS...: a Python peer on cuda:0, when prepare.sh carried it
  local name=$1 layer=$2
  shift 2
  [[ -d $peers/${name%%_*} ]] || return 0
  side "$name" "$layer" env -u LD_LIBRARY_PATH -u OMP_WAIT_POLICY "$python" "$root/bench/algorithms/peers/gptq_peers.py" \
    --peer "${name%%_*}" --repo "$peers/${name%%_*}" --input "$layer" --device "${device%:*}" --warmup "$@"
}
plain=(--bits 4 --group-size 128 --asym)
ordered=(--bits 4 --group-size 128 --asym --act-order --static-groups)
side_by_side() { # side_by_side N,K
  local nk=$1 layer=$scratch/layer-${1/,/x}.safetensors
  say "== GPTQ side by side on ${nk/,/ x }"
  [[ -e $layer ]] || py "$root/bench/algorithms/peers/make_gptq_input.py" --n "${nk%,*}" --k "${nk#*,}" --tokens 2048 \
    --seed 0 --out "$layer" >> "$work/gptq.log" 2>&1 || { say "make_gptq_input $nk failed"; return; }
  side engine_plain "$layer" env LD_LIBRARY_PATH="$libs" "$algo" gptq --input "$layer" "${plain[@]}" --device "$device" --warmup
  side engine_columns_plain "$layer" env LD_LIBRARY_PATH="$libs" "$algo" gptq --input "$layer" "${plain[@]}" \
    --device "$device" --warmup --column-loop
  peer ist_plain "$layer" "${plain[@]}"
  peer quark_plain "$layer" "${plain[@]}"
  side engine_ordered "$layer" env LD_LIBRARY_PATH="$libs" "$algo" gptq --input "$layer" "${ordered[@]}" --device "$device" --warmup
  peer ist_ordered "$layer" "${ordered[@]}"
  peer quark_ordered "$layer" "${ordered[@]}"
  # Quark captures CUDA graphs only with static groups (its default on a GPU then).
  [[ $device != cpu ]] && peer quark_graphs_ordered "$layer" "${ordered[@]}" --cuda-graphs
}

# The 7B jobs: the calibration pass over all 32 layers, exported.
wait_model() {
  while [[ ! -e $m7b.done ]] && kill -0 $maker 2> /dev/null && (($(left) > 30)); do sleep 2; done
  [[ -e $m7b.done ]] || { say "7B model not ready ($(tail -2 "$work/make-model.log" 2> /dev/null | tr '\n' ' '))"; return 1; }
}
job7b() { # job7b NAME TIMEOUT QUANTIZE-FLAGS...
  local name=$1 t=$2
  shift 2
  rm -rf "$scratch/export-$name"
  measure "$name" "$t" "$quark" quantize --model "$m7b" "$@" --calib "$ids" --num-calib-samples "$samples" \
    --seq-len "$seq_len" --device "$device" --output "$scratch/export-$name"
  du -sb "$scratch/export-$name" 2> /dev/null | sed "s/^/$name export bytes: /" >> "$log"
  rm -rf "$scratch/export-$name"
  touch "$work/$name.done"
}

# The pipeline on the device against the CPU (stories260K): export bytes, perplexities.
parity() {
  say "== pipeline parity (stories260K)"
  local s260=$kit/shared/fixtures/stories260K
  local text=$kit/shared/fixtures/eval/tinystories_validation_prefix.txt
  # Its 260K-parameter layers (64 x 172) take int8 and fp8 schemes (uint4 packs 8 to a word: 172 columns do not);
  # the perplexities over 8 windows of the first 16 KiB of the text.
  head -c 16384 "$text" > "$scratch/eval-16k.txt"
  eval_json() { # eval_json MODEL DEVICE: quark eval's JSON line (mean NLL, perplexity), or null
    local line
    line=$(timeout "$(cap 30)" env LD_LIBRARY_PATH="$libs" "$quark" eval --model "$1" --text "$scratch/eval-16k.txt" \
      --seq-len 128 --max-windows 8 --json --device "$2" 2>> "$work/eval.log" | tail -1)
    [[ $line == \{* ]] && echo "$line" || echo null
  }
  local run scheme algo_name name tag where other same f host_eval device_eval
  for run in "fp8" "int8" "w_int8_per_tensor_sym gptq"; do
    read -r scheme algo_name <<< "$run"
    name=parity_${scheme}${algo_name:+_$algo_name}
    for tag in host dev; do
      (($(left) < 15)) && return
      where=cpu
      [[ $tag == dev ]] && where=$device
      rm -rf "$scratch/$name-$tag"
      measure "$name-$tag" "$(cap 40)" "$quark" quantize --model "$s260" --scheme "$scheme" \
        ${algo_name:+--quant-algo "$algo_name"} --calib "$text" --num-calib-samples 8 --seq-len 128 \
        --eval "$scratch/eval-16k.txt" --eval-seq-len 128 --eval-max-windows 8 --device "$where" \
        --output "$scratch/$name-$tag" > /dev/null
    done
    other=$scratch/$name-dev
    if [[ -d $scratch/$name-host && -d $other ]]; then
      same=true
      for f in "$scratch/$name-host"/*; do cmp -s "$f" "$other/$(basename "$f")" || same=false; done
      # Both exports read back and evaluated the same way (on the CPU): the GPU-made one's perplexity beside the CPU's.
      host_eval=$(eval_json "$scratch/$name-host" cpu)
      device_eval=$(eval_json "$other" cpu)
      record "{\"figure\": \"$name\", \"exports_identical\": $same, \"cpu_export\": ${host_eval:-null}, \"device_export\": ${device_eval:-null}}"
    fi
  done
  # Evaluation itself on the device against the CPU: the float model's mean NLL.
  (($(left) > 15)) && record "{\"figure\": \"eval_float\", \"cpu\": $(eval_json "$s260" cpu), \"device\": $(eval_json "$s260" "$device")}"
}

# An MoE model on the device, whole layers against experts streamed in groups (#27: the MoE device paths, one load of
# each expert per pass, one sync a sample for the experts' tokens).
moe() {
  local arch=${QUARK_H200_MOE%%:*} moe_shape=${QUARK_H200_MOE#*:} moe_calib=${QUARK_H200_MOE_CALIB:-16x2048}
  local group=${QUARK_H200_MOE_GROUP:-32} model=$scratch/moe-$moe_shape moe_ids
  moe_ids=$scratch/moe-calib-$moe_calib.ids
  say "== MoE on the device ($arch $moe_shape, $moe_calib, whole layers and experts in groups of $group)"
  if [[ ! -e $model.done ]]; then
    rm -rf "$model"
    # A model cut short by the deadline is not marked made (a later call makes it again).
    measure moe_make_model "$(cap 240)" env QUARK_THREADS="$(nproc)" "$quark" make-model --arch "$arch" \
      --shape "$moe_shape" --dtype bf16 --seed 0 --out "$model" > /dev/null &&
    token_ids "$moe_ids" "$model" "${moe_calib%x*}" "${moe_calib#*x}" 1 && touch "$model.done"
  fi
  [[ -e $model.done ]] || { say "moe: no model"; return; }
  local g
  for g in 0 "$group"; do
    (($(left) < 30)) && { say "moe groups $g: not started, $(left) s left"; continue; }
    rm -rf "$scratch/export-moe-$g"
    rm -f "$work/moe-export-$g.sha256"
    # Hashed and removed at once (two fp8 exports of the model and the 7B model do not fit the disk together); only a
    # finished export is hashed.
    measure "moe_fp8_groups_$g" "$(cap 240)" "$quark" quantize --model "$model" --scheme fp8 --calib "$moe_ids" \
      --num-calib-samples "${moe_calib%x*}" --seq-len "${moe_calib#*x}" --compute-dtype bf16 --device "$device" \
      --expert-group-size "$g" --output "$scratch/export-moe-$g" > /dev/null &&
      (cd "$scratch/export-moe-$g" && sha256sum -- * > "$work/moe-export-$g.sha256")
    rm -rf "$scratch/export-moe-$g"
  done
  if [[ -s $work/moe-export-0.sha256 && -s $work/moe-export-$group.sha256 ]]; then
    local same=false
    cmp -s "$work/moe-export-0.sha256" "$work/moe-export-$group.sha256" && same=true
    record "{\"figure\": \"moe_exports_identical\", \"model\": \"$moe_shape\", \"group\": $group, \"identical\": $same}"
  fi
}

rates() {
  say "== device rates"
  [[ $device == cpu ]] && return
  local line
  line=$(timeout "$(cap 40)" env -u LD_LIBRARY_PATH -u OMP_WAIT_POLICY "$python" "$root/scripts/gpu/device_rates.py" 2> "$work/device_rates.log" | tail -1)
  [[ $line == \{* ]] && record "{\"figure\": \"device_rates\", \"result\": $line}"
}

layers=(${QUARK_H200_LAYERS:-4096,4096 11008,4096})
for step in $steps; do
  (($(left) < 15)) && { say "$step: not started, $(left) s left"; continue; }
  case $step in
    kit) ;;
    side) side_by_side "${layers[0]}" ;;
    side11008) [[ -n ${layers[1]:-} ]] && side_by_side "${layers[1]}" ;;
    gptq7b)
      # uint4 g128 + GPTQ, with all the time left (a cut job's per-layer times still say how long it takes).
      if wait_model; then
        say "== 7B uint4_wo_128 + GPTQ job ($(left) s left)"
        job7b job7b_gptq "$(cap 600)" --scheme uint4_wo_128 --quant-algo gptq
      fi ;;
    fp87b) wait_model && { say "== 7B fp8 job"; job7b job7b_fp8 "$(cap 300)" --scheme fp8; } ;;
    # The same jobs with --compute-dtype bf16 (the GPU's fast path: bf16 GEMMs; the second H200 session measured the
    # float32 ones at 237 s and ~410 s).
    fp87b_bf16) wait_model && { say "== 7B fp8 job, bf16 compute"; job7b job7b_fp8_bf16 "$(cap 300)" --scheme fp8 --compute-dtype bf16; } ;;
    gptq7b_bf16)
      if wait_model; then
        say "== 7B uint4_wo_128 + GPTQ job, bf16 compute ($(left) s left)"
        job7b job7b_gptq_bf16 "$(cap 400)" --scheme uint4_wo_128 --quant-algo gptq --compute-dtype bf16
      fi ;;
    parity) parity ;;
    rates) rates ;;
    moe) moe ;;
    memory)
      # Each layer's tensor bytes on the device (the caching allocator's allocated and reserved) against the formula.
      if wait_model; then
        say "== device memory per layer (pass_memory_bench, 16 x 2048: fp8 4 layers, uint4 g128 + GPTQ 2 layers)"
        for run in "fp8 4" "uint4_wo_128+gptq 2"; do
          read -r preset cut <<< "$run"
          timeout "$(cap 90)" env LD_LIBRARY_PATH="$libs" "$build/bench/quantize/pass_memory_bench" --model "$m7b" \
            --preset "$preset" --samples 16 --seq-len 2048 --device "$device" --max-layers "$cut" \
            > "$work/pass_memory_$preset.log" 2>&1
          say "memory $preset: status $?; $(head -1 "$work/pass_memory_$preset.log" | cut -c1-300)"
          tail -6 "$work/pass_memory_$preset.log" >> "$log"
        done
      fi ;;
    awq)
      # #27 item 2: AWQ's searches with their trials batched (the GPU's default, 2 GiB) and one at a time, on the
      # 7B model's first layer in bf16 (8 x 2048 tokens): the time, and the device memory against the formula.
      if wait_model; then
        say "== AWQ search batches (pass_memory_bench, uint4_wo_128 + AWQ, 8 x 2048, bf16, 1 layer)"
        for mb in -1 0; do
          timeout "$(cap 120)" env LD_LIBRARY_PATH="$libs" "$build/bench/quantize/pass_memory_bench" --model "$m7b" \
            --preset uint4_wo_128+awq --samples 8 --seq-len 2048 --compute-dtype bf16 --device "$device" \
            --max-layers 1 --search-batch-mb "$mb" > "$work/pass_memory_awq_$mb.log" 2>&1
          say "awq search batches $mb MiB: status $?; $(head -1 "$work/pass_memory_awq_$mb.log" | cut -c1-300)"
          tail -4 "$work/pass_memory_awq_$mb.log" >> "$log"
        done
      fi ;;
    *) say "unknown step '$step'" ;;
  esac
done
wait $maker 2> /dev/null
say "H200 run: done, $(left) s of the budget left"
