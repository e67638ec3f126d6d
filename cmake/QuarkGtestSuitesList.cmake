# Script mode (cmake -P), run after a test executable links (cmake/QuarkGtestSuites.cmake): lists the executable's
# GoogleTest suites and writes OUTPUT, a ctest file with one add_test per suite.
# Input: EXECUTABLE, ENVIRONMENT and LABELS ('|'-separated), TIMEOUT, COST, RUNNER (tests/support/gtest_suite.sh),
# REPORT_DIR (where each suite's XML report goes), OUTPUT.
foreach(var EXECUTABLE RUNNER REPORT_DIR OUTPUT TIMEOUT)
  if(NOT DEFINED ${var} OR "${${var}}" STREQUAL "")
    message(FATAL_ERROR "QuarkGtestSuitesList.cmake: ${var} is not set")
  endif()
endforeach()
string(REPLACE "|" ";" environment "${ENVIRONMENT}")
string(REPLACE "|" ";" labels "${LABELS}")

execute_process(
  COMMAND /usr/bin/env ${environment} "${EXECUTABLE}" --gtest_list_tests
  OUTPUT_VARIABLE listing
  ERROR_VARIABLE listing_errors
  RESULT_VARIABLE listing_result
  TIMEOUT 120)
if(NOT listing_result EQUAL 0)
  message(FATAL_ERROR "${EXECUTABLE} --gtest_list_tests failed (${listing_result}):\n${listing}\n${listing_errors}")
endif()

# A suite's line starts in the first column and ends with '.', perhaps followed by "  # TypeParam = ..."; its cases
# are the indented lines under it.
string(REPLACE ";" "\\;" listing "${listing}")
string(REPLACE "\n" ";" lines "${listing}")
set(suites "")
foreach(line IN LISTS lines)
  if(line MATCHES "^([^ #][^ ]*)\\.( +#.*)?$")
    list(APPEND suites "${CMAKE_MATCH_1}")
  endif()
endforeach()
if(NOT suites)
  message(FATAL_ERROR "${EXECUTABLE} --gtest_list_tests listed no suite:\n${listing}")
endif()

set(content "# Written by cmake/QuarkGtestSuitesList.cmake from ${EXECUTABLE} --gtest_list_tests.\n")
foreach(suite IN LISTS suites)
  if(suite MATCHES "[^A-Za-z0-9_/]")
    message(FATAL_ERROR "${EXECUTABLE}: suite name '${suite}' cannot be one ctest test and one --gtest_filter")
  endif()
  string(REPLACE "/" "__" report "${suite}")
  set(command "[==[${RUNNER}]==] [==[${REPORT_DIR}/${report}.xml]==] /usr/bin/env")
  foreach(variable IN LISTS environment)
    string(APPEND command " [==[${variable}]==]")
  endforeach()
  string(APPEND command " [==[${EXECUTABLE}]==] [==[--gtest_filter=${suite}.*]==]")
  string(APPEND content
    "add_test([==[${suite}]==] ${command})\n"
    "set_tests_properties([==[${suite}]==] PROPERTIES LABELS [==[${labels}]==] TIMEOUT ${TIMEOUT} COST ${COST}"
    " SKIP_RETURN_CODE 77)\n")
endforeach()
file(WRITE "${OUTPUT}" "${content}")
