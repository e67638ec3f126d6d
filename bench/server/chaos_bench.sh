#!/usr/bin/env bash
# The chaos benchmark (#33 item 1, long version of the ctest chaos_short): the same run (tests/chaos/chaos_run.sh:
# 2 quarkd replicas on PostgreSQL, 4 quark-workers in copy test mode, s3rver behind the fault proxy) twice, without
# faults and with them, on CHAOS_JOBS jobs (default 240) and CHAOS_REAL_JOBS real stories260K jobs (default 4).
# Prints each run's figures (jobs/s first submit to last completion, re-executions per 1,000 jobs, recovery per
# fault kind, attempt causes, invariants) and a summary; exits 1 when a run broke an invariant.
#   nice bash bench/server/chaos_bench.sh [BUILD_DIR]     (env: CHAOS_SEED CHAOS_JOBS CHAOS_REAL_JOBS CHAOS_COPY_MS)
set -uo pipefail
build="$(cd "${1:-build}" && pwd)"
here="$(cd "$(dirname "$0")" && pwd)"
export CHAOS_JOBS=${CHAOS_JOBS:-240} CHAOS_REAL_JOBS=${CHAOS_REAL_JOBS:-4} CHAOS_SEED=${CHAOS_SEED:-33}
export CHAOS_DEADLINE_S=${CHAOS_DEADLINE_S:-900}
rc=0
declare -A rate
for faults in 0 1; do
  echo "== faults $([ "$faults" = 1 ] && echo on || echo off): $CHAOS_JOBS copy jobs + $CHAOS_REAL_JOBS stories260K jobs, seed $CHAOS_SEED"
  err=$(mktemp /tmp/quark-chaos-bench-XXXXXX.err)
  out=$(CHAOS_FAULTS=$faults bash "$here/../../tests/chaos/chaos_run.sh" "$build" 2>"$err") || rc=1
  echo "$out"
  grep -E '^(chaos_run|chaos_check):' "$err" || true  # the components' warnings stay in the file
  rm -f "$err"
  rate[$faults]=$(echo "$out" | sed -n 's/^jobs\/s (first submit to last completion) //p')
done
echo "== summary: jobs/s without faults ${rate[0]:-?}, with faults ${rate[1]:-?}"
exit $rc
