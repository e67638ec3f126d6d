#!/usr/bin/env bash
# The chaos run (#33 item 1): CHAOS_JOBS copy jobs (quark-worker --test-mode copy: the real runner, model cache,
# disk, publish and signed manifest; the "quantization" copies a small model) and CHAOS_REAL_JOBS real stories260K
# fp8 jobs through 2 quarkd replicas on one real PostgreSQL with 4 real quark-workers and s3rver behind the fault
# proxy (tests/storage/support/fault_proxy.js). While they run, a seeded driver injects, one at a time and every
# kind once per round in a seeded order: kill-worker (kill -9, restarted 1 s later), kill-replica (kill -9,
# restarted), restart-postgres (immediate stop, 1 s down), s3-500 (every S3 request answered 500 for 1.5 s),
# s3-reset (every other request reset for 2 s), s3-slow (every request delayed 1 s for 3 s) and disk-full (a
# worker's tmpfs data dir filled for 3 s). At the end chaos_check checks the invariants (every job terminal once, its
# events complete and in order, manifests verify, nothing else under the output prefix) and this script checks
# that no lease or attempt is left open and no job folder is left on a worker's disk. Exit 1 on any violation.
#   bash tests/chaos/chaos_run.sh BUILD_DIR
# env: CHAOS_SEED (33), CHAOS_JOBS (60), CHAOS_REAL_JOBS (2), CHAOS_COPY_MS (300), CHAOS_FAULTS (1; 0 = no faults),
#      CHAOS_DEADLINE_S (150: jobs still running then are a violation), CHAOS_PAUSE_MS (700..1700 between faults)
# The worker disks are tmpfs mounts in a private mount namespace (root or an unprivileged user namespace); without
# one the disk-full fault cannot run: skipped (77), or a failure with CI=true or QUARK_REQUIRE_PEERS=1.
set -euo pipefail
trap 'echo "chaos_run: line $LINENO: a command failed (exit $?)" >&2' ERR
build="$(cd "${1:?usage: chaos_run.sh BUILD_DIR}" && pwd)"
src="$(cd "$(dirname "$0")/../.." && pwd)"
seed=${CHAOS_SEED:-33}; jobs=${CHAOS_JOBS:-60}; real_jobs=${CHAOS_REAL_JOBS:-2}; copy_ms=${CHAOS_COPY_MS:-300}
faults_on=${CHAOS_FAULTS:-1}; deadline_s=${CHAOS_DEADLINE_S:-150}; pause_ms=${CHAOS_PAUSE_MS:-700}
shared="${QUARK_SHARED_DIR:-$src/../shared}"
peer_missing() { exec sh "$src/tests/support/peer_missing.sh" "chaos_run: $*"; }

# A private mount namespace for the workers' tmpfs disks (re-exec once inside it).
if [ -z "${CHAOS_IN_NAMESPACE:-}" ]; then
  if unshare -m --propagation private true 2>/dev/null; then
    CHAOS_IN_NAMESPACE=1 exec unshare -m --propagation private bash "$0" "$@"
  elif unshare -U -r -m --propagation private true 2>/dev/null; then
    CHAOS_IN_NAMESPACE=1 exec unshare -U -r -m --propagation private bash "$0" "$@"
  fi
  peer_missing "no private mount namespace (unshare -m) for the workers' tmpfs disks"
fi
pg_bin=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -1)
[ -x "${pg_bin:-/nonexistent}/pg_ctl" ] || peer_missing "PostgreSQL is not installed (scripts/install-deps.sh)"
s3rver_js="$src/tests/peers/node_modules/s3rver/bin/s3rver.js"
[ -f "$s3rver_js" ] && command -v node >/dev/null || peer_missing "node or s3rver missing (scripts/install-test-peers.sh)"
for tool in quarkd/server/quarkd quark-worker/worker/quark-worker quarkctl/client/quarkctl chaos_check/tests/chaos/chaos_check; do
  [ -x "$build/${tool#*/}" ] || { echo "chaos_run: $build/${tool#*/} is not built (ninja ${tool%%/*})" >&2; exit 1; }
done

dir=$(mktemp -d /tmp/quark-chaos-XXXXXX)
chmod 755 "$dir"  # PostgreSQL runs as nobody under root
as=""; [ "$(id -u)" = 0 ] && id nobody >/dev/null 2>&1 && as="runuser -u nobody --"
declare -A pid
cleanup() {
  [ -n "${driver_pid:-}" ] && kill "$driver_pid" 2>/dev/null || true
  for f in "$dir"/*.pid; do [ -f "$f" ] && kill -9 "$(cat "$f")" 2>/dev/null || true; done
  $as "$pg_bin/pg_ctl" -D "$dir/pg/data" -m immediate stop >/dev/null 2>&1 || true
  for w in 0 1 2 3; do umount "$dir/w$w" 2>/dev/null || true; done
  if [ -n "${CHAOS_KEEP_DIR:-}" ]; then echo "chaos_run: kept $dir"; else rm -rf "$dir"; fi
}
trap cleanup EXIT
now_ms() { date +%s%3N; }
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
wait_line() {  # FILE REGEX: the first capture group of the first matching line (30 s)
  for _ in $(seq 300); do
    local m; m=$(grep -oE "$2" "$1" 2>/dev/null | head -1 | grep -oE '[0-9]+$' || true)
    [ -n "$m" ] && { echo "$m"; return 0; }
    sleep 0.1
  done
  echo "chaos_run: no line /$2/ in $1: $(tail -5 "$1" 2>/dev/null)" >&2; return 1
}

# PostgreSQL (fsync off: a test; the benchmark's figures name it).
mkdir "$dir/pg"; [ -n "$as" ] && chown nobody "$dir/pg"
$as "$pg_bin/initdb" -D "$dir/pg/data" -A trust -U quark --no-sync -E UTF8 >/dev/null
pg_start() {
  $as "$pg_bin/pg_ctl" -D "$dir/pg/data" -o "-k $dir/pg -c listen_addresses='' -c fsync=off -c max_connections=200" \
      -l "$dir/pg/log" -w start >/dev/null
}
pg_start
dsn="postgres:///postgres?host=$dir/pg&user=quark"
sql() { psql -qAtX -h "$dir/pg" -U quark postgres -c "$1"; }

# s3rver, and the fault proxy in front of it (its rules file is what the driver rewrites).
mkdir -p "$dir/s3"
# --openssl-legacy-provider: s3rver mints listing continuation tokens with DES (see tests/storage/support/s3rver.cc).
# Through the tests' launcher (tests/storage/support/s3rver_launcher.js): a PUT answers once its object's file holds its
# bytes, as S3 is read-after-write consistent; the faults the chaos run injects are the proxy's, not s3rver's.
node --openssl-legacy-provider "$src/tests/storage/support/s3rver_launcher.js" "$src/tests/peers/node_modules" '{}' \
  -d "$dir/s3" -a 127.0.0.1 -p 0 -s --configure-bucket chaos >"$dir/s3rver.log" 2>&1 &
echo $! >"$dir/s3rver.pid"; disown $!
s3_port=$(wait_line "$dir/s3rver.log" 'listening on 127\.0\.0\.1:[0-9]+')
echo '[]' >"$dir/rules.json"
node "$src/tests/storage/support/fault_proxy.js" "http://127.0.0.1:$s3_port" "@$dir/rules.json" >"$dir/proxy.log" 2>&1 &
echo $! >"$dir/proxy.pid"; disown $!
proxy_port=$(wait_line "$dir/proxy.log" 'fault-proxy listening on [0-9]+')
export AWS_ACCESS_KEY_ID=S3RVER AWS_SECRET_ACCESS_KEY=S3RVER AWS_REGION=us-east-1
direct_s3="http://127.0.0.1:$s3_port"

# The models: a small synthetic one for the copy jobs (5 files, seeded bytes) and stories260K for the real ones.
mkdir -p "$dir/small"
for i in 1 2 3 4 5; do
  python3 -c "import random,sys; random.seed($seed*10+$i); sys.stdout.buffer.write(random.randbytes(16384*$i))" \
      >"$dir/small/part$i.bin"
done
AWS_ENDPOINT_URL=$direct_s3 "$build/tests/chaos/chaos_upload" "$dir/small" s3://chaos/models/small >/dev/null
if [ "$real_jobs" -gt 0 ]; then
  AWS_ENDPOINT_URL=$direct_s3 "$build/tests/chaos/chaos_upload" "$shared/fixtures/stories260K" \
      s3://chaos/models/stories260K >/dev/null
  mkdir -p "$dir/calib" && cp "$shared/fixtures/eval/tinystories_validation_prefix.txt" "$dir/calib/calib.txt"
  AWS_ENDPOINT_URL=$direct_s3 "$build/tests/chaos/chaos_upload" "$dir/calib" s3://chaos/data >/dev/null
fi
openssl genpkey -algorithm ed25519 -out "$dir/signing.pem" 2>/dev/null
openssl pkey -in "$dir/signing.pem" -pubout -out "$dir/signing.pub.pem"

# Two replicas on fixed ports (a restarted one comes back where the workers dial it).
ports=("$(free_port)" "$(free_port)")
start_replica() {
  "$build/server/quarkd" --store "$dsn" --replica-id "r$1" --data-dir "$dir/r$1" --listen "127.0.0.1:${ports[$1]}" \
      --metrics-listen "" --workers 0 --allowed-roots "$dir" --heartbeat-interval-ms 250 --lease-timeout-ms 2000 \
      --log-level warn 2>>"$dir/r$1.log" &
  echo $! >"$dir/r$1.pid"
  disown $!
}
start_replica 0; start_replica 1
for r in 0 1; do
  for _ in $(seq 100); do "$build/client/quarkctl" --server "127.0.0.1:${ports[$r]}" presets >/dev/null 2>&1 && break; sleep 0.2; done
done

# Four workers, each with a 48 MiB tmpfs data dir (job folders, the model cache), dialling both replicas.
for w in 0 1 2 3; do
  mkdir -p "$dir/w$w"
  mount -t tmpfs -o size=48m tmpfs "$dir/w$w" || peer_missing "cannot mount a tmpfs for the workers' disks"
done
start_worker() {
  AWS_ENDPOINT_URL="http://127.0.0.1:$proxy_port" "$build/worker/quark-worker" \
      --server "ipv4:127.0.0.1:${ports[$(($1 % 2))]},127.0.0.1:${ports[$((($1 + 1) % 2))]}" --worker-id "w$1" \
      --data-dir "$dir/w$1" --test-mode copy --signing-key "$dir/signing.pem" --lease-wait-ms 1000 \
      --log-level warn 2>>"$dir/w$1.log" &
  echo $! >"$dir/w$1.pid"
  disown $!  # no "Killed" lines
}
for w in 0 1 2 3; do start_worker "$w"; done

# The fault driver: rounds of the seven kinds in a seeded order; each fault logged "KIND START_MS END_MS [TARGET]".
rules() { echo "$1" >"$dir/rules.tmp" && mv "$dir/rules.tmp" "$dir/rules.json"; }
busy_worker() {  # a worker running a job now (seeded pick among them), else any
  local busy; busy=($(sql "SELECT DISTINCT worker_id FROM job_attempts WHERE ended_unix_ms IS NULL ORDER BY 1" 2>/dev/null || true))
  if [ "${#busy[@]}" -gt 0 ]; then echo "${busy[$((RANDOM % ${#busy[@]}))]}"; else echo "w$((RANDOM % 4))"; fi
}
fault() {
  local kind=$1 start end target=""
  start=$(now_ms)
  case $kind in
    kill-worker) target=$(busy_worker); kill -9 "$(cat "$dir/$target.pid")"; end=$(now_ms)
                 sleep 1; start_worker "${target#w}" ;;
    kill-replica) local r=$((RANDOM % 2)); kill -9 "$(cat "$dir/r$r.pid")"; end=$(now_ms); sleep 0.3; start_replica "$r" ;;
    restart-postgres) $as "$pg_bin/pg_ctl" -D "$dir/pg/data" -m immediate stop >/dev/null; sleep 1; pg_start; end=$(now_ms) ;;
    s3-500) rules '[{"status":500,"times":-1}]'; sleep 1.5; rules '[]'; end=$(now_ms) ;;
    s3-reset) rules '[{"reset":true,"every":2,"times":-1}]'; sleep 2; rules '[]'; end=$(now_ms) ;;
    s3-slow) rules '[{"delay_ms":1000,"times":-1}]'; sleep 3; rules '[]'; end=$(now_ms) ;;
    disk-full) target=$(busy_worker); dd if=/dev/zero of="$dir/$target/fill" bs=1M 2>/dev/null || true
               sleep 3; rm -f "$dir/$target/fill"; end=$(now_ms) ;;
  esac
  echo "$kind $start $end $target" >>"$dir/faults.log"
}
driver() {
  RANDOM=$seed
  local kinds=(kill-worker kill-replica restart-postgres s3-500 s3-reset s3-slow disk-full)
  while true; do
    local order=("${kinds[@]}")
    for ((i = ${#order[@]} - 1; i > 0; i--)); do local j=$((RANDOM % (i + 1))) t=${order[i]}; order[i]=${order[j]}; order[j]=$t; done
    for kind in "${order[@]}"; do
      sleep "$(printf '%d.%03d' $(((pause_ms + RANDOM % 1000) / 1000)) $(((pause_ms + RANDOM % 1000) % 1000)))"
      fault "$kind"
    done
  done
}

touch "$dir/faults.log"
# The faults begin with the submissions, so the first ones meet the queue full.
if [ "$faults_on" = 1 ]; then driver >>"$dir/driver.log" 2>&1 & driver_pid=$!; fi

# Submit everything at once, each job retried on the other replica (same request id) while one is down.
submit() {  # REQUEST_ID quarkctl-submit-args...
  local id=$1; shift
  for attempt in $(seq 100); do
    "$build/client/quarkctl" --server "127.0.0.1:${ports[$((attempt % 2))]}" submit --request-id "$id" \
        --output s3://chaos/out --max-attempts 10 "$@" >/dev/null 2>>"$dir/submit.log" && return 0
    sleep 0.1
  done
  echo "chaos_run: $id could not be submitted" >&2; return 1
}
submit_share() {  # K: every 4th job from K (quarkctl starts in about 0.3 s; four submit side by side)
  for ((i = $1; i <= jobs; i += 4)); do
    submit "copy-$i" --model s3://chaos/models/small --scheme fp8 --label "test-copy-ms=$copy_ms" || return 1
  done
  for ((i = $1; i <= real_jobs; i += 4)); do
    submit "real-$i" --model s3://chaos/models/stories260K --scheme fp8 --calib s3://chaos/data/calib.txt \
        --num-calib-samples 2 --seq-len 32 || return 1
  done
}
t0=$(now_ms)
submitters=()
for k in 1 2 3 4; do submit_share "$k" & submitters+=($!); done
for p in "${submitters[@]}"; do wait "$p"; done
total=$((jobs + real_jobs))
echo "submitted $total jobs in $(( $(now_ms) - t0 )) ms"

# Until every job is terminal (SUCCEEDED 3, FAILED 4, CANCELLED 5) or the deadline; the driver keeps going meanwhile.
deadline=$(( $(date +%s) + deadline_s ))
while [ "$(date +%s)" -lt "$deadline" ]; do
  done_jobs=$(sql "SELECT COUNT(*) FROM jobs WHERE state >= 3" 2>/dev/null || echo 0)
  [ "${done_jobs:-0}" -ge "$total" ] && break
  sleep 0.5
done
if [ -n "${driver_pid:-}" ]; then kill "$driver_pid" 2>/dev/null; wait "$driver_pid" 2>/dev/null || true; driver_pid=""; fi
rules '[]'; rm -f "$dir"/w*/fill
# A fault the driver was in the middle of may have left a process down: bring everything back for the checks.
for r in 0 1; do kill -0 "$(cat "$dir/r$r.pid")" 2>/dev/null || start_replica "$r"; done
for w in 0 1 2 3; do kill -0 "$(cat "$dir/w$w.pid")" 2>/dev/null || start_worker "$w"; done
# (PostgreSQL may be mid-start if the driver stopped inside a restart: then pg_start fails and it comes up anyway.)
pg_isready -q -h "$dir/pg" || pg_start || true
for _ in $(seq 150); do pg_isready -q -h "$dir/pg" && break; sleep 0.2; done
t1=$(now_ms)
for _ in $(seq 100); do [ "$(sql "SELECT COUNT(*) FROM jobs WHERE state >= 3")" -ge "$total" ] && break; sleep 0.2; done

violations=0
fail() { echo "VIOLATION $*"; violations=$((violations + 1)); }
[ "$(sql "SELECT COUNT(*) FROM jobs WHERE state >= 3")" -ge "$total" ] || fail "jobs not terminal after ${deadline_s} s"
echo "faults: $(wc -l <"$dir/faults.log") ($(cut -d' ' -f1 "$dir/faults.log" | sort | uniq -c | awk '{printf "%s %s, ", $2, $1}'))"
echo "proxy: $(grep -c '^fault .* 500$' "$dir/proxy.log" || true) answered 500, $(grep -c '^fault .* reset$' "$dir/proxy.log" || true) reset, $(grep -c '^fault .* delay' "$dir/proxy.log" || true) delayed"
sql "SELECT 'jobs/s (first submit to last completion) ' || ROUND($total / GREATEST(0.001, (MAX(a.ended_unix_ms) - MIN(j.created_unix_ms)) / 1000.0), 2)
     FROM jobs j JOIN job_attempts a ON a.job_id = j.id"
echo "attempts that did not succeed, by cause:"
sql "SELECT '  ' || COUNT(*) || ' x ' || cause FROM (SELECT LEFT(REGEXP_REPLACE(error, 'job-[0-9a-f]+', 'JOB', 'g'), 160)
     AS cause FROM job_attempts WHERE error <> '') x GROUP BY cause ORDER BY COUNT(*) DESC"
n=$(sql "SELECT COUNT(*) FROM jobs WHERE lease_id IS NOT NULL OR lease_worker IS NOT NULL"); [ "$n" = 0 ] || fail "$n jobs still hold a lease"
n=$(sql "SELECT COUNT(*) FROM job_attempts WHERE ended_unix_ms IS NULL"); [ "$n" = 0 ] || fail "$n attempts still open"
# The stored event log of every job is 1..n without a gap or a repeat (WatchJob, which chaos_check reads, may
# coalesce progress events; the store must not lose any).
n=$(sql "SELECT COUNT(*) FROM (SELECT job_id FROM job_events GROUP BY job_id
                               HAVING MIN(sequence) <> 1 OR MAX(sequence) <> COUNT(*)) x")
[ "$n" = 0 ] || fail "$n jobs whose stored event sequences are not 1..n"
n=$(sql "SELECT COUNT(*) FROM jobs j WHERE NOT EXISTS (SELECT 1 FROM job_events e WHERE e.job_id = j.id)")
[ "$n" = 0 ] || fail "$n jobs without events"
# A worker removes its job folder right after Complete, and a restarted one clears a killed one's when it starts
# (which takes a while on a loaded machine): up to 15 s.
for _ in $(seq 30); do
  left=$(find "$dir"/w[0-3]/jobs -mindepth 1 -maxdepth 1 2>/dev/null | head -5 || true)
  [ -z "$left" ] && break
  sleep 0.5
done
[ -z "$left" ] || fail "job folders left on the workers' disks: $left"
# Publishes by more than one attempt (each attempt writes into its own attempt-N folder and a superseded one removes
# what it wrote, so they are counted, not judged; chaos_check judges what stays visible): from the proxy's log of
# forwarded requests, jobs with a manifest.json PUT into two or more attempt folders, and manifests written twice.
echo "jobs published by more than one attempt: $(grep -oE '^forward PUT /chaos/out/[^/]+/attempt-[0-9]+/manifest.json' \
    "$dir/proxy.log" | sort -u | sed -E 's|/attempt-[0-9]+/manifest.json||' | uniq -d | wc -l)"
echo "manifests written more than once: $(grep -oE '^forward PUT /chaos/out/[^/]+/attempt-[0-9]+/manifest.json' \
    "$dir/proxy.log" | sort | uniq -d | wc -l)"
# Folders under the output prefix that belong to no job (s3rver keeps objects as files under its data folder).
unknown=$(comm -23 <(ls "$dir/s3/chaos/out" 2>/dev/null | sort) <(sql "SELECT id FROM jobs" | sort) | head -5)
[ -z "$unknown" ] || fail "output folders of no job: $unknown"
copy_files=$(find "$dir/small" -type f | wc -l)
AWS_ENDPOINT_URL=$direct_s3 "$build/tests/chaos/chaos_check" --server "127.0.0.1:${ports[0]}" --output s3://chaos/out \
    --key "$dir/signing.pub.pem" --jobs "$total" --copy-files "$copy_files" --faults "$dir/faults.log" || violations=$((violations + 1))
if [ "$violations" -gt 0 ]; then
  echo "chaos_run: seed $seed: invariants broken; logs follow" >&2
  for f in r0 r1 w0 w1 w2 w3; do echo "== $f.log" >&2; tail -20 "$dir/$f.log" >&2; done
  exit 1
fi
echo "chaos_run: seed $seed: every invariant holds"
