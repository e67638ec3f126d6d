#!/usr/bin/env bash
# The README's test command: installs every dependency, builds, and runs the whole test suite.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
if [ -f scripts/install-test-peers.sh ]; then bash scripts/install-test-peers.sh; fi
bash scripts/build.sh
# Where Debian's OpenBLAS does not know the CPU, every LibTorch process re-executes itself with OPENBLAS_CORETYPE set
# (core/base/blas_core.h): the same choice made once here spares each of the suite's thousands of processes a second
# LibTorch start (~0.7 s each). Nothing is set where OpenBLAS knows the CPU or the caller chose a core already.
coretype=$(python3 scripts/blas_coretype.py || true)
if [ -n "$coretype" ]; then
  export OPENBLAS_CORETYPE="$coretype"
  echo "test.sh: OpenBLAS reports a generic core on this CPU: OPENBLAS_CORETYPE=$coretype for the whole suite"
fi
# The summary (tests run / passed / skipped and each skip's reason) comes from ctest's JUnit file; with CI=true or
# QUARK_REQUIRE_PEERS=1 a missing test peer fails its test, and a skip not in tests/support/legitimate_skips.txt
# fails the run.
junit="$PWD/build/Testing/quark-junit.xml"
rm -f "$junit"
# Each GoogleTest suite's XML report (tests/support/gtest_suite.sh); test_summary.py reads them beside the JUnit file.
rm -rf "$PWD/build/Testing/gtest"
status=0
# ctest starts the tests it knows to be longest first (from its own record of earlier runs); a fresh build tree, as in
# CI, has no record, and a long suite started last would stretch the run by its length. The seed is one whole run's
# times (tests/support/ctest_cost_data.txt, ctest's CTestCostData.txt format: name, runs, seconds); ctest keeps its
# own record from then on.
if [ ! -f build/Testing/Temporary/CTestCostData.txt ]; then
  mkdir -p build/Testing/Temporary
  cp tests/support/ctest_cost_data.txt build/Testing/Temporary/CTestCostData.txt
fi
# One more test than cores: many tests spend their time waiting on processes they started (quarkd, workers, s3rver,
# PostgreSQL), and every engine process runs one thread (QUARK_THREADS=1); the suite is run so on the 2-core VM.
ctest --test-dir build --output-on-failure -j "$(( $(nproc) + 1 ))" --timeout 900 --output-junit "$junit" || status=$?
summary=0
python3 scripts/test_summary.py "$junit" || summary=$?
if [ "$status" -eq 0 ]; then status=$summary; fi
exit "$status"
