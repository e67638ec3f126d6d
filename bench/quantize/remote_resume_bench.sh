#!/usr/bin/env bash
# Checkpoints in object storage (#34 item 1), measured through quarkd, real quark-workers and s3rver (the npm peer),
# on the Llama-2-7B shape (bf16, quantize_bench's synthetic weights and calibration ids):
#   1. Upload overhead per layer: the same UPLOAD_LAYERS-layer job with --remote-checkpoints=false and =true (job
#      wall times), and each layer's upload (bytes, seconds) as the job's events report it.
#   2. Resume on another worker: a LAYERS-layer job whose worker is killed (kill -9) once KILL_AT layers are committed
#      in s3rver; a second worker with a fresh data dir finishes it. Its time against an uninterrupted run's, and the
#      published files (all but manifest.json) compared byte for byte with cmp.
#
#   bench/quantize/remote_resume_bench.sh [BUILD_DIR]   env: UPLOAD_LAYERS (2), UPLOAD_ALGO (gptq: RTN's
#       weight-only checkpoints hold no tensors), LAYERS (8), KILL_AT (6), ALGO (algorithm of part 2, "" = RTN),
#       SCHEME (uint4_wo_128), DIR (/tmp/quark_remote_resume_bench), QUARK_THREADS
set -euo pipefail
build=$(cd "${1:-build}" && pwd)
src=$(cd "$(dirname "$0")/../.." && pwd)
upload_layers=${UPLOAD_LAYERS:-2}
layers=${LAYERS:-8}
kill_at=${KILL_AT:-6}
scheme=${SCHEME:-uint4_wo_128}
algo=${ALGO:-}
upload_algo=${UPLOAD_ALGO-gptq}
dir=${DIR:-/tmp/quark_remote_resume_bench}
mkdir -p "$dir"
rm -rf "$dir/run" && mkdir -p "$dir/run"
run="$dir/run"
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; }
trap cleanup EXIT
now() { date +%s.%N; }

model() {  # the N-layer model folder, made once
  local m="$dir/model-$1"
  [ -f "$m/config.json" ] || "$build/bench/quantize/quantize_bench" --dir "$m" --layers "$1" --presets uint4_wo_128 > /dev/null
  echo "$m"
}
wait_line() {  # FILE REGEX: the first capture of the first matching line, within 60 s
  for _ in $(seq 600); do
    if grep -qE "$2" "$1" 2>/dev/null; then sed -nE "s/.*$2.*/\1/p" "$1" | head -1; return; fi
    sleep 0.1
  done
  echo "no line matching '$2' in $1" >&2; cat "$1" >&2; exit 1
}

node --openssl-legacy-provider "$src/tests/peers/node_modules/s3rver/bin/s3rver.js" -d "$run/s3" -a 127.0.0.1 -p 0 --configure-bucket bench \
  > "$run/s3rver.log" 2>&1 &
pids+=($!)
s3=$(wait_line "$run/s3rver.log" 'listening on 127\.0\.0\.1:([0-9]+)')
"$build/server/quarkd" --data-dir "$run/quarkd" --listen 127.0.0.1:0 --metrics-listen "" --workers 0 \
  --allowed-roots "$dir" --lease-timeout-ms 2000 --heartbeat-interval-ms 200 --ready-file "$run/ready.json" \
  > "$run/quarkd.log" 2>&1 &
pids+=($!)
wait_line "$run/ready.json" '"grpc_port": ?([0-9]+)' > /dev/null
server="127.0.0.1:$(python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['grpc_port'])" "$run/ready.json")"
export AWS_ENDPOINT_URL="http://127.0.0.1:$s3" AWS_ACCESS_KEY_ID=S3RVER AWS_SECRET_ACCESS_KEY=S3RVER AWS_REGION=us-east-1

worker() {  # NAME [flags...]: starts a worker with its own data dir; its pid in $worker_pid
  local name=$1; shift
  "$build/worker/quark-worker" --server "$server" --worker-id "$name" --data-dir "$run/$name" --allowed-roots "$dir" \
    --skip-throughput-probe --lease-wait-ms 500 "$@" > "$run/$name.log" 2>&1 &
  worker_pid=$!
  pids+=($worker_pid)
}
quarkctl() { "$build/client/quarkctl" --server "$server" "$@"; }
submit() {  # MODEL ALGO [--wait]: prints the job id
  local m=$1 a=$2; shift 2
  local algo_flag=()
  [ -n "$a" ] && algo_flag=(--quant-algo "$a")
  quarkctl -o json submit --model "file://$m" --scheme "$scheme" "${algo_flag[@]}" --calib "file://$m/calib.ids" \
    --output s3://bench/out --max-attempts 3 --force "$@" | tail -1 |
    python3 -c "import json,sys; d=json.load(sys.stdin); print(d.get('id') or d['job']['id'])"
}
artifact_same() {  # JOB_A JOB_B: cmp of every published object but the manifest
  local a="$run/s3/bench/out/$1" b="$run/s3/bench/out/$2" same=identical n=0
  while IFS= read -r f; do
    case "$f" in *manifest.json*) continue ;; esac
    n=$((n + 1))
    cmp -s "$a/$f" "$b/$f" || same=DIFFERENT
  done < <(cd "$a" && find . -name '*._S3rver_object' | sort)
  [ "$n" -gt 0 ] || same="not compared (no objects under $a)"
  echo "$same"
}

# 1. Upload overhead per layer.
m2=$(model "$upload_layers")
worker w-off --remote-checkpoints=false
t0=$(now); off_job=$(submit "$m2" "$upload_algo" --wait); t_off=$(echo "$(now) - $t0" | bc)
kill "$worker_pid"; wait "$worker_pid" 2>/dev/null || true
worker w-on
t0=$(now); on_job=$(submit "$m2" "$upload_algo" --wait); t_on=$(echo "$(now) - $t0" | bc)
kill "$worker_pid"; wait "$worker_pid" 2>/dev/null || true
quarkctl watch "$on_job" > "$run/events-on.txt" 2>&1 || true
uploads=$(grep -oE 'layer [0-9]+ uploaded to [^ ]+ \([0-9]+ bytes, [0-9.]+ s\)' "$run/events-on.txt" || true)

# 2. Killed at layer KILL_AT of LAYERS, finished by another worker.
m8=$(model "$layers")
worker w-ref --remote-checkpoints=false
t0=$(now); ref_job=$(submit "$m8" "$algo" --wait); t_full=$(echo "$(now) - $t0" | bc)
kill "$worker_pid"; wait "$worker_pid" 2>/dev/null || true
worker w-a
t0=$(now); job=$(submit "$m8" "$algo")
quarkctl watch "$job" > "$run/events-kill.txt" 2>&1 &
pids+=($!)
watch_pid=$!
until grep -q "checkpoint: layer $((kill_at - 1)) uploaded" "$run/events-kill.txt"; do
  kill -0 "$worker_pid" 2>/dev/null || { echo "worker w-a ended before layer $kill_at was uploaded" >&2; exit 1; }
  sleep 0.05
done
kill -9 "$worker_pid"; wait "$worker_pid" 2>/dev/null || true
t_killed=$(echo "$(now) - $t0" | bc)
t0=$(now); worker w-b
wait "$watch_pid" || true
t_resume=$(echo "$(now) - $t0" | bc)
state=$(quarkctl -o json get "$job" | python3 -c "import json,sys; print(json.load(sys.stdin).get('state'))")
grep -q "resumed at layer $kill_at of $layers" "$run/events-kill.txt" || { echo "no 'resumed at layer $kill_at'" >&2; exit 1; }
restored=$(grep -oE 'restored layers 0\.\.[0-9]+ from [^ ]+ \([0-9.]+ s\)' "$run/events-kill.txt" | head -1)
left=$( (find "$run/s3/bench/out/.quark-checkpoints" -type f 2>/dev/null || true) | wc -l)  # the folder goes too

printf 'model: Llama-2-7B shapes, bf16; threads %s; s3rver on loopback\n' "${QUARK_THREADS:-default}"
printf '\n%s-layer job, %s%s, wall from submit to end (quarkctl submit --wait):\n' "$upload_layers" "$scheme" \
  "${upload_algo:+ + $upload_algo}"
printf '| remote checkpoints | wall (s) |\n|---|---|\n| off | %.1f |\n| on | %.1f |\n' "$t_off" "$t_on"
printf 'overhead per layer: %.2f s\n' "$(echo "($t_on - $t_off) / $upload_layers" | bc -l)"
printf 'uploads (job events):\n%s\n' "$uploads"
printf '\n%s-layer job, %s%s, killed (kill -9) once %s layers were in s3rver, finished by a worker with a fresh data dir:\n' \
  "$layers" "$scheme" "${algo:+ + $algo}" "$kill_at"
printf '| run | wall (s) |\n|---|---|\n'
printf '| uninterrupted (remote checkpoints off) | %.1f |\n' "$t_full"
printf '| first worker, submit to kill -9 | %.1f |\n' "$t_killed"
printf '| second worker, start to job end (lease expiry, restore, %s layers) | %.1f |\n' "$((layers - kill_at))" "$t_resume"
printf 'restore: %s\n' "$restored"
printf 'final state %s; artifact %s to the uninterrupted run; checkpoint objects left in s3rver: %s\n' "$state" \
  "$(artifact_same "$ref_job" "$job")" "$left"
