#!/usr/bin/env bash
# 10,000 no-op jobs through quarkd replicas on one PostgreSQL with 8 worker processes, one replica killed (kill -9)
# every 10 s and started again; prints jobs/s, p50/p99 submit-to-running, and checks from the database that every
# job ended exactly once with a complete event log. STORE=sqlite REPLICAS=1 KILL_EVERY=0 runs the single-node
# SQLite baseline through the same client and workers.
#   bash bench/server/replicated_bench.sh [BUILD_DIR]      (env: JOBS WORKERS REPLICAS KILL_EVERY STORE)
set -euo pipefail
build="$(cd "${1:-build}" && pwd)"
jobs=${JOBS:-10000}; workers=${WORKERS:-8}; replicas=${REPLICAS:-3}; kill_every=${KILL_EVERY:-10}; store=${STORE:-postgres}
dir=$(mktemp -d /tmp/quark-rbench-XXXXXX)
chmod 755 "$dir"  # PostgreSQL runs as nobody under root
pids=()
killer_pid=""
cleanup() {
  [ -n "$killer_pid" ] && kill "$killer_pid" 2>/dev/null && wait "$killer_pid" 2>/dev/null || true
  for p in "${pids[@]}"; do kill -9 "$p" 2>/dev/null || true; done
  for f in "$dir"/r*.pid; do [ -f "$f" ] && kill -9 "$(cat "$f")" 2>/dev/null || true; done
  [ -n "${pg_bin:-}" ] && $as "$pg_bin/pg_ctl" -D "$dir/pg/data" -m immediate stop >/dev/null 2>&1 || true
  rm -rf "$dir"
}
trap cleanup EXIT
mkdir -p "$dir/models/m" "$dir/out"
touch "$dir/kills"
as=""; [ "$(id -u)" = 0 ] && as="runuser -u nobody --"

if [ "$store" = postgres ]; then
  source "$(dirname "$0")/bench_postgres.sh"
  start_bench_postgres "$dir"  # durable as in production (fsync on); the socket lives in the bench folder
fi

ports=(); for i in $(seq 0 $((replicas - 1))); do ports+=($((50161 + i))); done
start_replica() {
  local i=$1 store_args=()
  [ "$store" = postgres ] && store_args=(--store "$dsn" --replica-id "r$i")
  "$build/server/quarkd" "${store_args[@]}" --data-dir "$dir/r$i" --listen "127.0.0.1:${ports[$i]}" --metrics-listen "" \
      --workers 0 --allowed-roots "$dir/models,$dir/out" --heartbeat-interval-ms 500 --lease-timeout-ms 3000 \
      --log-level warn 2>>"$dir/r$i.log" &
  echo $! >"$dir/r$i.pid"  # a file: the killer restarts replicas in a subshell
  disown $!
}
for i in "${!ports[@]}"; do start_replica "$i"; done
sleep 1
# Each worker dials every replica, its first choice rotated (pick_first: it moves on when that one dies).
for w in $(seq 0 $((workers - 1))); do
  target="ipv4:"; for k in "${!ports[@]}"; do target+="127.0.0.1:${ports[$(((w + k) % replicas))]},"; done
  QUARK_TEST_WORKER_MODE=instant "$build/tests/server/quark_test_worker" --server "${target%,}" --worker-id "w$w" \
      2>/dev/null &
  pids+=($!)
  disown $!  # no "Killed" lines at exit
done
addresses=(); for p in "${ports[@]}"; do addresses+=("127.0.0.1:$p"); done
killer() {
  local k=0
  while sleep "$kill_every"; do
    kill -9 "$(cat "$dir/r$k.pid")" 2>/dev/null || true
    echo "killed replica r$k at $(date +%T.%N | cut -c1-12)" >>"$dir/kills"
    start_replica "$k"
    k=$(((k + 1) % replicas))
  done
}
t0=$(date +%s.%N)
if [ "$kill_every" -gt 0 ]; then killer & killer_pid=$!; fi
"$build/bench/server/replicated_submit" --jobs "$jobs" --threads 4 --model-uri "file://$dir/models/m" \
    --output-uri "file://$dir/out" "${addresses[@]}"

if [ "$store" = postgres ]; then
  until [ "$(sql "SELECT COUNT(*) FROM jobs WHERE state >= 3")" -ge "$jobs" ]; do sleep 0.2; done
  t1=$(date +%s.%N)
  if [ -n "$killer_pid" ]; then kill "$killer_pid"; wait "$killer_pid" 2>/dev/null || true; killer_pid=""; fi
  echo "kills: $(wc -l <"$dir/kills" 2>/dev/null || echo 0) ($(tr '\n' ' ' <"$dir/kills" 2>/dev/null))"
  sql "SELECT 'jobs ' || COUNT(*) || ', succeeded ' || COUNT(*) FILTER (WHERE state = 3) ||
              ', distinct request ids ' || COUNT(DISTINCT request_id) FROM jobs"
  sql "SELECT 'jobs/s (first submit to last completion) ' ||
              ROUND($jobs / ((MAX(a.ended_unix_ms) - MIN(j.created_unix_ms)) / 1000.0), 0)
       FROM jobs j JOIN job_attempts a ON a.job_id = j.id"
  sql "SELECT 'submit->running ms: p50 ' || ROUND(percentile_cont(0.5) WITHIN GROUP (ORDER BY d)::numeric, 1) ||
              ', p99 ' || ROUND(percentile_cont(0.99) WITHIN GROUP (ORDER BY d)::numeric, 1) ||
              ', max ' || MAX(d)
       FROM (SELECT a.started_unix_ms - j.created_unix_ms AS d FROM jobs j
             JOIN job_attempts a ON a.job_id = j.id AND a.number = 1) x"
  sql "SELECT 'jobs with more than one attempt (lease lost with a killed replica) ' || COUNT(*)
       FROM (SELECT job_id FROM job_attempts GROUP BY job_id HAVING COUNT(*) > 1) x"
  # QUEUED, then per attempt RUNNING + (QUEUED again | the final state): a lost or doubled event shows here.
  sql "SELECT 'jobs whose event log is not 1 + 2 x attempts events ' || COUNT(*) FROM (
         SELECT j.id, (SELECT COUNT(*) FROM job_events e WHERE e.job_id = j.id) AS events,
                (SELECT COUNT(*) FROM job_attempts a WHERE a.job_id = j.id) AS attempts FROM jobs j) x
       WHERE events <> 1 + 2 * attempts"
  sql "SELECT 'attempts still open ' || COUNT(*) FROM job_attempts WHERE ended_unix_ms IS NULL"
else
  db="$dir/r0/quarkd.db"
  until [ "$(sqlite3 "$db" "SELECT COUNT(*) FROM jobs WHERE state >= 3" 2>/dev/null || echo 0)" -ge "$jobs" ]; do sleep 0.2; done
  sqlite3 "$db" "SELECT 'jobs ' || COUNT(*) || ', succeeded ' || SUM(state = 3) FROM jobs;
                 SELECT 'jobs/s (first submit to last completion) ' ||
                        ROUND($jobs / ((MAX(a.ended_unix_ms) - MIN(j.created_unix_ms)) / 1000.0), 0)
                 FROM jobs j JOIN job_attempts a ON a.job_id = j.id;"
  sqlite3 "$db" "SELECT a.started_unix_ms - j.created_unix_ms FROM jobs j JOIN job_attempts a
                 ON a.job_id = j.id AND a.number = 1 ORDER BY 1" |
    awk '{v[NR]=$1} END {printf "submit->running ms: p50 %s, p99 %s, max %s\n", v[int(NR*0.5)], v[int(NR*0.99)], v[NR]}'
fi
