#!/usr/bin/env python3
"""Prints what a ctest run did from its JUnit file (ctest --output-junit): tests run, passed, failed, skipped, and
each skipped test with its reason. A skip whose reason is not in tests/support/legitimate_skips.txt is unexpected;
with CI=true or QUARK_REQUIRE_PEERS=1 an unexpected skip makes this exit 1.

A ctest test that runs one GoogleTest suite (cmake/QuarkGtestSuites.cmake) counts as the suite's cases: GoogleTest's
XML reports say how each case ended (tests/support/gtest_suite.sh writes them to <build>/Testing/gtest/; read from
JUNIT.xml's folder's gtest/ unless --gtest-reports names the folder). A suite whose process died before its report
counts as one failed test under the suite's name.

Usage: test_summary.py JUNIT.xml [LEGITIMATE_SKIPS.txt] [--gtest-reports DIR]"""
import os
import re
import sys
import xml.etree.ElementTree as ET


def peers_required():
    require = os.environ.get("QUARK_REQUIRE_PEERS", "")
    return (require not in ("", "0")) or os.environ.get("CI", "") in ("1", "true", "TRUE", "True")


def skip_reason(out):
    """The gtest skip message (the line after 'file:line: Skipped') or a node test's 'SKIP: ...' line."""
    lines = out.splitlines()
    for i, line in enumerate(lines):
        if line.endswith(": Skipped") and i + 1 < len(lines):
            return lines[i + 1].strip()
        if line.startswith("SKIP: "):
            return line[len("SKIP: "):].strip()
    return "(no reason printed)"


def gtest_skip_reason(message):
    """GoogleTest's <skipped message="FILE:LINE\nREASON...">: the reason's first line."""
    lines = [line.strip() for line in (message or "").splitlines()]
    reason = [line for line in lines[1:] if line]
    return reason[0] if reason else "(no reason printed)"


def load_gtest_reports(folder):
    """{suite name: [(case name, 'passed'|'failed'|'skipped', skip reason)]} from every XML report under folder."""
    suites, where = {}, {}
    for dirpath, _, files in os.walk(folder):
        for name in sorted(files):
            if not name.endswith(".xml"):
                continue
            path = os.path.join(dirpath, name)
            for suite in ET.parse(path).getroot().iter("testsuite"):
                suite_name = suite.get("name")
                if suite_name in where:
                    raise SystemExit(f"test_summary: the suite {suite_name} is in two executables' reports "
                                     f"({where[suite_name]}, {path}): ctest runs it under one name, rename one")
                where[suite_name] = path
                cases = []
                for case in suite.iter("testcase"):
                    full = f"{suite_name}.{case.get('name')}"
                    skipped = case.find("skipped")
                    if case.find("failure") is not None or case.find("error") is not None:
                        cases.append((full, "failed", ""))
                    elif skipped is not None or case.get("result") == "skipped":
                        cases.append((full, "skipped", gtest_skip_reason(skipped.get("message") if skipped is not None
                                                                         else "")))
                    elif case.get("result") == "suppressed" or case.get("status") == "notrun":
                        continue  # a DISABLED_ case GoogleTest lists but never runs
                    else:
                        cases.append((full, "passed", ""))
                suites[suite_name] = cases
    return suites


def load_legitimate(path):
    rules = []
    with open(path, encoding="utf-8") as f:
        for line in f:
            if not line.strip() or line.startswith("#"):
                continue
            regex, _, why = line.rstrip("\n").partition("\t")
            rules.append((re.compile(regex), why))
    return rules


def main(argv):
    reports = None
    if "--gtest-reports" in argv:
        at = argv.index("--gtest-reports")
        if at + 1 >= len(argv):
            print(__doc__, file=sys.stderr)
            return 2
        reports = argv[at + 1]
        argv = argv[:at] + argv[at + 2:]
    if len(argv) < 2:
        print(__doc__, file=sys.stderr)
        return 2
    legit_path = argv[2] if len(argv) > 2 else os.path.join(os.path.dirname(__file__), "..", "tests", "support",
                                                            "legitimate_skips.txt")
    rules = load_legitimate(legit_path)
    cases = ET.parse(argv[1]).getroot().iter("testcase")
    suites = load_gtest_reports(reports or os.path.join(os.path.dirname(os.path.abspath(argv[1])), "gtest"))
    passed, failed, skipped = [], [], []
    for case in cases:
        name = case.get("name")
        ctest_failed = case.find("failure") is not None or case.get("status") == "fail"
        if name in suites:
            for full, outcome, reason in suites[name]:
                if outcome == "skipped":
                    skipped.append((full, reason))
                elif outcome == "failed":
                    failed.append(full)
                else:
                    passed.append(full)
            if ctest_failed and not any(outcome == "failed" for _, outcome, _ in suites[name]):
                failed.append(f"{name} (the process failed after its cases passed: see ctest's log)")
        elif case.find("skipped") is not None or case.get("status") in ("notrun", "disabled"):
            skipped.append((name, skip_reason(case.findtext("system-out") or "")))
        elif ctest_failed:
            failed.append(name)
        else:
            passed.append(name)
    total = len(passed) + len(failed) + len(skipped)
    print(f"tests: {total} total, {len(passed) + len(failed)} run, {len(passed)} passed, {len(failed)} failed, "
          f"{len(skipped)} skipped")
    unexpected = 0
    for name, reason in sorted(skipped):
        why = next((w for r, w in rules if r.search(reason)), None)
        if why is None:
            unexpected += 1
            print(f"  skipped (UNEXPECTED): {name}: {reason}")
        else:
            print(f"  skipped: {name}: {reason} [allowed: {why}]")
    for name in sorted(failed):
        print(f"  failed: {name}")
    if unexpected and peers_required():
        print(f"{unexpected} unexpected skip(s) with CI=true / QUARK_REQUIRE_PEERS=1: "
              "see tests/support/legitimate_skips.txt", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
