#!/usr/bin/env bash
# #36 sweep wall time vs the number of workers: for each N in WORKERS_LIST a fresh quarkd with N local quark-workers
# (one thread each) runs one `quarkctl submit --sweep CANDIDATES --wait` on MODEL (evaluation: EVAL_WINDOWS windows
# of 128 tokens, KLD on); prints the wall time from submit to the parent's end and the parent's table.
# With AUTO_BITS=B (#36 item 3) it runs `--auto CANDIDATES --target-bits B` instead (sensitivity passes on
# AUTO_SAMPLES samples of 256 tokens as child jobs, then one verification) and prints the search's rounds; with
# PASS_SPLITS=K (#36 item 4) each candidate's pass is split into K layer ranges (--pass-splits K; 1 = unsplit; unset =
# quarkd's policy: ceil(workers / candidates) ranges).
# Besides the wall time it prints the children's seconds summed (each row's seconds_total) and sum / wall: how many
# children ran at once on average (the fan-out), which only turns into a shorter wall time on free cores.
#   bash bench/server/sweep_bench.sh [BUILD_DIR]
#   (env: WORKERS_LIST="1 2" CANDIDATES=uint4_wo_128,int8,fp8,mxfp4 MODEL=tinyllama-a EVAL_WINDOWS=8 AUTO_BITS=
#    AUTO_SAMPLES=16 PASS_SPLITS= MODEL_DIR=: a model folder outside the fixtures, e.g. the 2-layer Llama-2-7B cut
#    `quantize_bench --dir D --layers 2 --presets "" --keep` writes, with a tokenizer.model copied in)
set -euo pipefail
build="$(cd "${1:-build}" && pwd)"
here="$(cd "$(dirname "$0")" && pwd)"
fixtures="$(cd "${QUARK_SHARED_DIR:-$here/../../../shared}/fixtures" && pwd)"
workers_list=${WORKERS_LIST:-"1 2"}
candidates=${CANDIDATES:-uint4_wo_128,int8,fp8,mxfp4}
model=${MODEL:-tinyllama-a}
model_dir=${MODEL_DIR:-$fixtures/$model}
windows=${EVAL_WINDOWS:-8}
dir=$(mktemp -d /tmp/quark-sweep-bench-XXXXXX)
quarkd_pid=""
cleanup() {
  [ -n "$quarkd_pid" ] && kill "$quarkd_pid" 2>/dev/null && wait "$quarkd_pid" 2>/dev/null || true
  rm -rf "$dir"
}
trap cleanup EXIT
cat > "$dir/job.json" <<JSON
{"model_uri": "file://$model_dir", "output_uri": "file://$dir/out", "max_attempts": 1,
 "evaluation": {"uri": "file://$fixtures/eval/tinystories_validation_prefix.txt", "seq_len": 128,
                "max_windows": $windows, "kld": true}}
JSON
echo "model $model_dir, candidates $candidates, $windows evaluation windows of 128 tokens, $(nproc) cores"
for n in $workers_list; do
  rm -rf "$dir/data" "$dir/out" "$dir/ready"
  QUARK_THREADS=1 OMP_NUM_THREADS=1 "$build/server/quarkd" --data-dir "$dir/data" --listen 127.0.0.1:0 \
      --metrics-listen "" --workers "$n" --worker-binary "$build/worker/quark-worker" \
      --allowed-roots "$fixtures,$dir,$model_dir" --worker-arg=--allowed-roots="$fixtures,$dir,$model_dir" \
      --worker-arg=--skip-throughput-probe --ready-file "$dir/ready" 2>"$dir/quarkd-$n.log" &
  quarkd_pid=$!
  for _ in $(seq 300); do [ -s "$dir/ready" ] && break; sleep 0.1; done
  addr=$(sed -n 's/.*"grpc": *"\([^"]*\)".*/\1/p' "$dir/ready")
  for _ in $(seq 600); do  # the local workers register (quarkd's policy counts the live ones)
    [ "$(grep -c 'registered slots' "$dir/quarkd-$n.log" || true)" -ge "$n" ] && break
    sleep 0.1
  done
  start=$(date +%s.%N)
  if [ -n "${AUTO_BITS:-}" ]; then
    search=(--auto "$candidates" --target-bits "$AUTO_BITS" --num-calib-samples "${AUTO_SAMPLES:-16}" --seq-len 256
            ${PASS_SPLITS:+--pass-splits "$PASS_SPLITS"})
  else
    search=(--sweep "$candidates")
  fi
  out=$("$build/client/quarkctl" --server "$addr" submit -f "$dir/job.json" "${search[@]}" --wait || true)
  end=$(date +%s.%N)
  id=$(echo "$out" | grep -o 'job-[0-9a-f]\{32\}' | head -1)
  wall=$(echo "$end - $start" | bc)
  table=$("$build/client/quarkctl" --server "$addr" get "$id" | sed -n '/^\(float perplexity\|SCHEME\)/,$p')
  summed=$(echo "$table" | awk '$0 ~ / SUCCEEDED / { s += $(NF - 1) } END { printf "%.1f", s }')
  echo "== $n worker(s): ${AUTO_BITS:+automatic search${PASS_SPLITS:+ (pass splits $PASS_SPLITS)}, }wall time $wall s," \
       "children's seconds summed $summed s, sum / wall $(echo "scale=2; $summed / $wall" | bc)"
  echo "$table"
  kill "$quarkd_pid"; wait "$quarkd_pid" 2>/dev/null || true; quarkd_pid=""
done
