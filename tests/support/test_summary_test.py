#!/usr/bin/env python3
"""scripts/test_summary.py on a small JUnit file: counts, skip reasons, and exit 1 on an unexpected skip in CI only;
ctest tests that ran a GoogleTest suite count as the suite's cases from its XML report (gtest/ beside the JUnit)."""
import os
import subprocess
import sys
import tempfile

JUNIT = """<?xml version="1.0" encoding="UTF-8"?>
<testsuite name="(empty)" tests="7" failures="2" disabled="0" skipped="3">
 <testcase name="A.Passes" status="run"><system-out>ok</system-out></testcase>
 <testcase name="B.Fails" status="fail"><failure message="Failed"/><system-out>x</system-out></testcase>
 <testcase name="Cuda.Skips" status="notrun"><skipped message="SKIP_REGULAR_EXPRESSION_MATCHED"/><system-out>
[ RUN      ] Cuda.Skips
/work/main/tests/kernels/cuda_kernels_test.cc:44: Skipped
no CUDA device on this machine: the CUDA kernels were compiled and linked, not run
[  SKIPPED ] Cuda.Skips (0 ms)</system-out></testcase>
 <testcase name="Algos/Suite" status="run"><system-out>[==========]</system-out></testcase>
 <testcase name="Crashed" status="fail"><failure message="SEGFAULT"/><system-out>[ RUN      ] Crashed.One</system-out></testcase>
 <testcase name="AllSkip" status="notrun"><skipped message="SKIP_RETURN_CODE=77"/><system-out>[==========]</system-out></testcase>
 <testcase name="node_thing" status="notrun"><skipped message="SKIP_RETURN_CODE=77"/><system-out>SKIP: node-llama-cpp is not installed
</system-out></testcase>
</testsuite>
"""


# GoogleTest's reports (tests/support/gtest_suite.sh): a suite with a passed, a failed and a skipped case, and one whose
# cases all skipped. "Crashed" has no report (its process died first). "Stale" is a report of a suite this run did not
# run: it must not count.
REPORTS = {
    "suite_test/Algos__Suite.xml": """<?xml version="1.0" encoding="UTF-8"?>
<testsuites tests="3" failures="1" name="AllTests">
  <testsuite name="Algos/Suite" tests="3" failures="1" skipped="1">
    <testcase name="Works/a" status="run" result="completed" classname="Algos/Suite"/>
    <testcase name="Breaks/b" status="run" result="completed" classname="Algos/Suite">
      <failure message="x.cc:3&#x0A;Expected equality" type=""/>
    </testcase>
    <testcase name="Waits/c" status="run" result="skipped" classname="Algos/Suite">
      <skipped message="x.cc:9&#x0A;LibTorch sees no CUDA device here (CPU-only LibTorch or no GPU): not run"/>
    </testcase>
  </testsuite>
</testsuites>""",
    "suite_test/AllSkip.xml": """<?xml version="1.0" encoding="UTF-8"?>
<testsuites tests="2" name="AllTests">
  <testsuite name="AllSkip" tests="2" skipped="2">
    <testcase name="One" status="run" result="skipped"><skipped message="y.cc:1&#x0A;the gRPC peer is gone"/></testcase>
    <testcase name="Two" status="run" result="skipped"><skipped message="y.cc:2&#x0A;the gRPC peer is gone"/></testcase>
  </testsuite>
</testsuites>""",
    "other_test/Stale.xml": """<?xml version="1.0" encoding="UTF-8"?>
<testsuites tests="1" name="AllTests"><testsuite name="Stale" tests="1">
<testcase name="Old" status="run" result="completed"/></testsuite></testsuites>""",
}


def run(script, junit, env):
    full = {k: v for k, v in os.environ.items() if k not in ("CI", "QUARK_REQUIRE_PEERS")}
    full.update(env)
    return subprocess.run([sys.executable, script, junit], env=full, capture_output=True, text=True)


def main():
    script = sys.argv[1]
    with tempfile.TemporaryDirectory() as folder:
        junit = os.path.join(folder, "junit.xml")
        with open(junit, "w", encoding="utf-8") as f:
            f.write(JUNIT)
        for name, text in REPORTS.items():
            os.makedirs(os.path.dirname(os.path.join(folder, "gtest", name)), exist_ok=True)
            with open(os.path.join(folder, "gtest", name), "w", encoding="utf-8") as f:
                f.write(text)
        local = run(script, junit, {})
        assert local.returncode == 0, local
        assert "tests: 10 total, 5 run, 2 passed, 3 failed, 5 skipped" in local.stdout, local.stdout
        assert "skipped: Cuda.Skips: no CUDA device on this machine" in local.stdout, local.stdout
        assert "[allowed: GPU-labelled" in local.stdout, local.stdout
        assert "skipped (UNEXPECTED): node_thing: node-llama-cpp is not installed" in local.stdout, local.stdout
        assert "failed: B.Fails" in local.stdout, local.stdout
        assert "failed: Algos/Suite.Breaks/b" in local.stdout, local.stdout
        assert "failed: Crashed\n" in local.stdout, local.stdout
        assert "skipped: Algos/Suite.Waits/c: LibTorch sees no CUDA device here" in local.stdout, local.stdout
        assert "skipped (UNEXPECTED): AllSkip.Two: the gRPC peer is gone" in local.stdout, local.stdout
        assert "Stale" not in local.stdout, local.stdout
        for env in ({"CI": "true"}, {"QUARK_REQUIRE_PEERS": "1"}):
            ci = run(script, junit, env)
            assert ci.returncode == 1, (env, ci)
            assert "3 unexpected skip(s)" in ci.stderr, ci.stderr
        # One suite in two executables' reports: refused, naming it.
        os.makedirs(os.path.join(folder, "gtest", "third_test"))
        with open(os.path.join(folder, "gtest", "third_test", "AllSkip.xml"), "w", encoding="utf-8") as f:
            f.write(REPORTS["suite_test/AllSkip.xml"])
        duplicate = run(script, junit, {})
        assert duplicate.returncode != 0 and "the suite AllSkip is in two executables' reports" in duplicate.stderr, \
            duplicate
    print("test_summary.py: counts, reasons and the CI exit status as expected")


if __name__ == "__main__":
    main()
