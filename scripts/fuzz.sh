#!/usr/bin/env bash
# The fuzz campaign: configures and builds ./build-fuzz with clang (libFuzzer + ASan + UBSan, tests/fuzz), then runs
# each target in turn for N executions or T seconds from its seed corpus (tests/fuzz/corpus/<target>) and its
# dictionary (tests/fuzz/dict/<target>.dict), and prints one line per target: executions, seconds, exec/s, corpus
# size, crashes. Crash, leak and timeout inputs land in build-fuzz/fuzz/crashes/<target>/; the exit status is 1 when
# any target found one.
#
#   scripts/fuzz.sh                       every target, 1,000,000 executions each
#   scripts/fuzz.sh -n 50000 uri_fuzz     one target, 50,000 executions
#   scripts/fuzz.sh -t 1800 job_file_fuzz 30 minutes (with -n too: whichever ends first)
#   scripts/fuzz.sh --update-corpus ...   afterwards, merge (-merge=1, minimizing) what the run found into the
#                                         checked-in seed corpus
# Environment: FUZZ_NICE (default 10) lowers the priority; FUZZ_BUILD (default build-fuzz) is the build folder.
set -euo pipefail
cd "$(dirname "$0")/.."

runs=1000000
seconds=0
update_corpus=0
targets=()
while [ $# -gt 0 ]; do
  case "$1" in
    -n) runs="$2"; shift 2 ;;
    -t) seconds="$2"; shift 2 ;;
    --update-corpus) update_corpus=1; shift ;;
    -h|--help) sed -n '2,14p' "$0"; exit 0 ;;
    -*) echo "fuzz.sh: unknown option $1" >&2; exit 2 ;;
    *) targets+=("$1"); shift ;;
  esac
done

all_targets=(safetensors_fuzz config_json_fuzz job_file_fuzz model_config_fuzz gguf_fuzz tokenizer_json_fuzz
             s3_xml_fuzz uri_fuzz tokens_file_fuzz request_limits_fuzz jsonl_calibration_fuzz)
[ "${#targets[@]}" -gt 0 ] || targets=("${all_targets[@]}")

# The longest input each target gets: a little over its largest real input of interest (headers, configs, URIs).
max_len() {
  case "$1" in
    gguf_fuzz|tokenizer_json_fuzz|request_limits_fuzz) echo 8192 ;;
    uri_fuzz) echo 1024 ;;
    *) echo 4096 ;;
  esac
}

build="${FUZZ_BUILD:-build-fuzz}"
nice_level="${FUZZ_NICE:-10}"
command -v clang++ >/dev/null || { echo "fuzz.sh: clang++ is missing (scripts/install-deps.sh installs it)" >&2; exit 2; }
cmake -S . -B "$build" -G Ninja -DCMAKE_C_COMPILER=clang -DCMAKE_CXX_COMPILER=clang++ -DQUARK_BUILD_BENCH=OFF >/dev/null
nice -n "$nice_level" cmake --build "$build" --target "${targets[@]}" -- -j "${FUZZ_JOBS:-2}"

# Every UB report and every ASan error stops the run and leaves its input behind.
export ASAN_OPTIONS="halt_on_error=1:abort_on_error=1:detect_leaks=1:detect_stack_use_after_return=1"
export UBSAN_OPTIONS="halt_on_error=1:abort_on_error=1:print_stacktrace=1"

work="$build/fuzz"
found=0
printf '%-20s %12s %9s %9s %8s %8s\n' target executions seconds exec/s corpus crashes
for t in "${targets[@]}"; do
  seeds="tests/fuzz/corpus/$t"
  corpus="$work/corpus/$t"
  crashes="$work/crashes/$t"
  log="$work/logs/$t.log"
  mkdir -p "$corpus" "$crashes" "$(dirname "$log")"
  args=(-runs="$runs" -max_len="$(max_len "$t")" -timeout=30 -rss_limit_mb=4096 -print_final_stats=1
        -artifact_prefix="$crashes/")
  [ "$seconds" -gt 0 ] && args+=(-max_total_time="$seconds")
  [ -f "tests/fuzz/dict/$t.dict" ] && args+=(-dict="tests/fuzz/dict/$t.dict")
  # Crashes of earlier runs stay in the folder; only the ones newer than this marker count.
  marker="$work/logs/$t.started"
  touch "$marker"
  start=$(date +%s.%N)
  status=0
  nice -n "$nice_level" "$build/tests/fuzz/$t" "${args[@]}" "$corpus" "$seeds" >"$log" 2>&1 || status=$?
  end=$(date +%s.%N)
  executions=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
  elapsed=$(awk -v a="$start" -v b="$end" 'BEGIN { printf "%.1f", b - a }')
  rate=$(awk -v n="${executions:-0}" -v s="$elapsed" 'BEGIN { printf "%.0f", (s > 0 ? n / s : 0) }')
  n_crashes=$(find "$crashes" -type f -newer "$marker" | wc -l)
  printf '%-20s %12s %9s %9s %8s %8s\n' "$t" "${executions:-?}" "$elapsed" "$rate" \
    "$(find "$corpus" -type f | wc -l)" "$n_crashes"
  if [ "$status" -ne 0 ] || [ "$n_crashes" -gt 0 ]; then
    found=1
    echo "  $t: exit status $status; inputs in $crashes/, log $log" >&2
    grep -m 3 -E 'ERROR|runtime error|SUMMARY' "$log" | sed 's/^/  /' >&2 || true
  fi
  if [ "$update_corpus" -eq 1 ] && [ "$status" -eq 0 ]; then
    # The checked-in seeds stay small (FUZZ_CORPUS_BYTES, default 64 KiB per target): the named inputs (hand-written
    # seeds and the crash_* regression inputs) stay, and the inputs of a minimizing merge (-merge=1: the smallest
    # input for each feature) of the seeds and the run's finds are added smallest first while they fit.
    merged="$work/merged/$t"
    rm -rf "$merged" && mkdir -p "$merged"
    nice -n "$nice_level" "$build/tests/fuzz/$t" -merge=1 -max_len="$(max_len "$t")" "$merged" "$seeds" "$corpus" \
      >"$work/logs/$t.merge.log" 2>&1
    find "$seeds" -type f -regextype posix-extended -regex '.*/[0-9a-f]{40}' -delete
    budget="${FUZZ_CORPUS_BYTES:-65536}"
    used=$(find "$seeds" -type f -printf '%s\n' | awk '{ n += $1 } END { print n + 0 }')
    while read -r bytes file; do
      [ $((used + bytes)) -le "$budget" ] || break
      cp "$file" "$seeds/" && used=$((used + bytes))
    done < <(find "$merged" -type f -printf '%s %p\n' | sort -n)
    echo "  $t: seed corpus now $(find "$seeds" -type f | wc -l) files, $used bytes"
  fi
done
exit "$found"
