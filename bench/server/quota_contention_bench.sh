#!/usr/bin/env bash
# #29: does the PostgreSQL storage-quota counter serialize one tenant's submissions across replicas? Every job,
# event and attempt row a tenant writes updates its one tenant_storage row (triggers, migration 6/7), which stays
# row-locked until the writing transaction commits. Two quarkd replicas on one PostgreSQL (fsync on, as in
# production; no workers: the jobs stay queued) take SubmitJob calls from THREADS client threads split over both,
# in three modes of JOBS submissions each:
#   one-tenant   every thread a submitter of tenant "t0" (one shared counter row; quota max_stored_bytes set)
#   n-tenants    thread k a submitter of tenant "tk" (a counter row each)
#   no-counter   as one-tenant with the counter's triggers dropped (the store before the quota)
# alternating over ROUNDS rounds, and samples pg_stat_activity every 50 ms for backends waiting on a lock.
# Then quota_counter_bench: the same writes through the store alone (see its header).
#   bash bench/server/quota_contention_bench.sh [BUILD_DIR]      (env: JOBS THREADS ROUNDS STORE_JOBS)
set -euo pipefail
build="$(cd "${1:-build}" && pwd)"
jobs=${JOBS:-1000}; threads=${THREADS:-8}; rounds=${ROUNDS:-3}
dir=$(mktemp -d /tmp/quark-qbench-XXXXXX)
chmod 755 "$dir"  # PostgreSQL runs as nobody under root
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill -9 "$p" 2>/dev/null || true; wait "$p" 2>/dev/null || true; done
  [ -n "${pg_bin:-}" ] && $as "$pg_bin/pg_ctl" -D "$dir/pg/data" -m immediate stop >/dev/null 2>&1 || true
  rm -rf "$dir"
}
trap cleanup EXIT
mkdir -p "$dir/models/m" "$dir/out"
source "$(dirname "$0")/bench_postgres.sh"
start_bench_postgres "$dir"

sha() { printf '%s' "$1" | sha256sum | cut -d' ' -f1; }
entries=""; tenants=""; one=(); many=()
for k in $(seq 0 $((threads - 1))); do
  # one-tenant: thread k is "one-k" of tenant t0; n-tenants: thread k is "many-k" of tenant tk (thread 0: one-0).
  one+=(--token "qk_bench_t0_thread_$k")
  entries+="{\"name\": \"one-$k\", \"sha256\": \"$(sha "qk_bench_t0_thread_$k")\", \"tenant\": \"t0\", \"role\": \"submitter\"},"
  if [ "$k" = 0 ]; then many+=(--token "qk_bench_t0_thread_0"); else
    many+=(--token "qk_bench_t${k}_thread_$k")
    entries+="{\"name\": \"many-$k\", \"sha256\": \"$(sha "qk_bench_t${k}_thread_$k")\", \"tenant\": \"t$k\", \"role\": \"submitter\"},"
  fi
  tenants+="\"t$k\": {\"max_stored_bytes\": 1099511627776},"
done
printf '{"tokens": [%s], "tenants": {%s}}\n' "${entries%,}" "${tenants%,}" >"$dir/tokens.json"
chmod 600 "$dir/tokens.json"

for i in 0 1; do
  "$build/server/quarkd" --store "$dsn" --replica-id "r$i" --data-dir "$dir/r$i" --listen "127.0.0.1:$((50171 + i))" \
      --metrics-listen "" --workers 0 --allowed-roots "$dir/models,$dir/out" --tokens-file "$dir/tokens.json" \
      --log-level warn 2>>"$dir/r$i.log" &
  pids+=($!)
done
sleep 2
sampler() {  # every 50 ms: backends waiting on a lock (a row lock shows as a wait on the holder's transaction id)
  local n=0 waits=0
  while [ ! -f "$dir/stop" ]; do
    waits=$((waits + $(sql "SELECT COUNT(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock'")))
    n=$((n + 1))
    sleep 0.05
  done
  echo "$n $waits" >"$dir/waits"
}
triggers() {  # off | on: the counter's triggers (migrations 6 and 7)
  if [ "$1" = off ]; then
    sql "DROP TRIGGER jobs_bytes ON jobs; DROP TRIGGER job_events_bytes ON job_events;
         DROP TRIGGER job_attempts_bytes ON job_attempts"
  else
    sql "CREATE TRIGGER jobs_bytes AFTER INSERT OR UPDATE OF job OR DELETE ON jobs FOR EACH ROW EXECUTE FUNCTION jobs_bytes();
         CREATE TRIGGER job_events_bytes AFTER INSERT OR DELETE ON job_events FOR EACH ROW EXECUTE FUNCTION job_events_bytes();
         CREATE TRIGGER job_attempts_bytes AFTER INSERT OR UPDATE OR DELETE ON job_attempts
           FOR EACH ROW EXECUTE FUNCTION job_attempts_bytes()"
  fi
}
run() {
  local mode=$1 round=$2; shift 2
  rm -f "$dir/stop" "$dir/waits"
  sampler & local sampler_pid=$!
  local out
  out=$("$build/bench/server/replicated_submit" --jobs "$jobs" --threads "$threads" --model-uri "file://$dir/models/m" \
      --output-uri "file://$dir/out" --request-prefix "$mode-$round-" "$@" 127.0.0.1:50171 127.0.0.1:50172)
  touch "$dir/stop"; wait "$sampler_pid"
  read -r n waits <"$dir/waits"
  printf '| %s | %s | %s | %s | %s |\n' "$round" "$mode" "$(grep -o '([0-9]* jobs/s)' <<<"$out" | tr -d '()')" \
    "$(grep -o 'p50.*' <<<"$out")" "$(awk -v w="$waits" -v n="$n" 'BEGIN { printf "%.2f (%d samples)", w / n, n }')"
}
echo "$jobs SubmitJob calls per run from $threads threads over 2 replicas; modes alternate, $rounds rounds"
echo "| round | mode | rate | SubmitJob ms | backends waiting on a lock, mean |"
echo "|---|---|---|---|---|"
for round in $(seq "$rounds"); do
  run one-tenant "$round" "${one[@]}"
  run n-tenants "$round" "${many[@]}"
  triggers off
  run no-counter "$round" "${one[@]}"
  triggers on
done
sql "SELECT 'jobs stored ' || COUNT(*) FROM jobs" >&2
# The store alone (no gRPC, no quarkd CPU): CreateJob from THREADS threads over two replicas' connection pools.
echo
echo "store alone: quota_counter_bench, $threads threads x ${STORE_JOBS:-300} jobs per run"
"$build/bench/server/quota_counter_bench" --dsn "$dsn" --threads "$threads" --jobs "${STORE_JOBS:-300}" --rounds "$rounds"
