# One ctest test per GoogleTest suite instead of one per test case.
#
# Why: a test process that links LibTorch spends ~0.7 s in LibTorch's static initialisation before its first line, and
# a suite's SetUpTestSuite (a model written, a tokenizer loaded) ran again in every case's process: per case, 1,388
# processes; per suite, 337, and ~1,450 s less test time on the 2-core CI machine (docs/results/service.md).
#
# quark_gtest_suites(TARGET t ENVIRONMENT vars... LABELS l... TIMEOUT s COST c)
# After t links, it lists t's suites (`t --gtest_list_tests`, run during the build rather than when ctest starts:
# ~120 listings at 0.7 s each would otherwise run one after another before the first test) into a ctest file of
# `add_test(<Suite> ...)`, which ctest includes. Each test runs tests/support/gtest_suite.sh, which keeps GoogleTest's
# XML report of the suite under <build>/Testing/gtest/ (scripts/test_summary.py reports every case from it, skips with
# their reasons) and exits 77 (ctest: skipped) when every case of the suite skipped.
# -DQUARK_TEST_PER_CASE=ON keeps CMake's gtest_discover_tests (one ctest test per case), e.g. to run a single case by
# name with ctest -R; the GPU kit uses it so that a crash takes down one case, not its suite.

set(QUARK_GTEST_SUITES_SCRIPT "${CMAKE_CURRENT_LIST_DIR}/QuarkGtestSuitesList.cmake")

function(quark_gtest_suites)
  cmake_parse_arguments(S "" "TARGET;TIMEOUT;COST" "ENVIRONMENT;LABELS" ${ARGN})
  set(list_file "${CMAKE_CURRENT_BINARY_DIR}/${S_TARGET}_suites.cmake")
  # Lists travel to the script with '|' for ';' (a command line would split them into separate arguments).
  string(REPLACE ";" "|" environment "${S_ENVIRONMENT}")
  string(REPLACE ";" "|" labels "${S_LABELS}")
  add_custom_command(TARGET ${S_TARGET} POST_BUILD
    COMMAND ${CMAKE_COMMAND}
      "-DEXECUTABLE=$<TARGET_FILE:${S_TARGET}>"
      "-DENVIRONMENT=${environment}"
      "-DLABELS=${labels}"
      "-DTIMEOUT=${S_TIMEOUT}"
      "-DCOST=${S_COST}"
      "-DRUNNER=${PROJECT_SOURCE_DIR}/tests/support/gtest_suite.sh"
      "-DREPORT_DIR=${PROJECT_BINARY_DIR}/Testing/gtest/${S_TARGET}"
      "-DOUTPUT=${list_file}"
      -P "${QUARK_GTEST_SUITES_SCRIPT}"
    BYPRODUCTS "${list_file}"
    VERBATIM)
  # ctest reads the list when it starts; an executable not built yet shows as <target>_NOT_BUILT (a failing test),
  # as with gtest_discover_tests.
  set(include_file "${CMAKE_CURRENT_BINARY_DIR}/${S_TARGET}_suites_include.cmake")
  file(WRITE "${include_file}"
    "if(EXISTS [==[${list_file}]==])\n"
    "  include([==[${list_file}]==])\n"
    "else()\n"
    "  add_test(${S_TARGET}_NOT_BUILT ${S_TARGET}_NOT_BUILT)\n"
    "endif()\n")
  set_property(DIRECTORY APPEND PROPERTY TEST_INCLUDE_FILES "${include_file}")
endfunction()
