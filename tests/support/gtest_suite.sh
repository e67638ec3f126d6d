#!/bin/sh
# Runs one GoogleTest suite for ctest (cmake/QuarkGtestSuites.cmake): gtest_suite.sh REPORT.xml COMMAND...
# COMMAND is the test executable with --gtest_filter=<Suite>.*; GoogleTest writes the suite's XML report to REPORT.xml
# (scripts/test_summary.py reports each case from it). Exits with the executable's status, or 77 (ctest: skipped) when
# the suite ran and every one of its cases skipped.
report=$1
shift
rm -f "$report"  # a report left by an earlier run must not stand for this one (a crash writes none)
"$@" "--gtest_output=xml:$report"
status=$?
if [ "$status" -eq 0 ] && [ -f "$report" ] && grep -q 'result="skipped"' "$report" \
    && ! grep -q 'result="completed"' "$report"; then
  exit 77
fi
exit "$status"
