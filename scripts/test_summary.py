#!/usr/bin/env python3
"""Prints what a ctest run did from its JUnit file (ctest --output-junit): tests run, passed, failed, skipped, and
each skipped test with its reason. A skip whose reason is not in tests/support/legitimate_skips.txt is unexpected;
with CI=true or QUARK_REQUIRE_PEERS=1 an unexpected skip makes this exit 1.

Usage: test_summary.py JUNIT.xml [LEGITIMATE_SKIPS.txt]"""
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
    if len(argv) < 2:
        print(__doc__, file=sys.stderr)
        return 2
    legit_path = argv[2] if len(argv) > 2 else os.path.join(os.path.dirname(__file__), "..", "tests", "support",
                                                            "legitimate_skips.txt")
    rules = load_legitimate(legit_path)
    cases = ET.parse(argv[1]).getroot().iter("testcase")
    passed, failed, skipped = [], [], []
    for case in cases:
        name = case.get("name")
        if case.find("skipped") is not None or case.get("status") in ("notrun", "disabled"):
            skipped.append((name, skip_reason(case.findtext("system-out") or "")))
        elif case.find("failure") is not None or case.get("status") == "fail":
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
