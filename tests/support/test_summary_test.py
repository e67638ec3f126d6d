#!/usr/bin/env python3
"""scripts/test_summary.py on a small JUnit file: counts, skip reasons, and exit 1 on an unexpected skip in CI only."""
import os
import subprocess
import sys
import tempfile

JUNIT = """<?xml version="1.0" encoding="UTF-8"?>
<testsuite name="(empty)" tests="4" failures="1" disabled="0" skipped="2">
 <testcase name="A.Passes" status="run"><system-out>ok</system-out></testcase>
 <testcase name="B.Fails" status="fail"><failure message="Failed"/><system-out>x</system-out></testcase>
 <testcase name="Cuda.Skips" status="notrun"><skipped message="SKIP_REGULAR_EXPRESSION_MATCHED"/><system-out>
[ RUN      ] Cuda.Skips
/work/main/tests/kernels/cuda_kernels_test.cc:44: Skipped
no CUDA device on this machine: the CUDA kernels were compiled and linked, not run
[  SKIPPED ] Cuda.Skips (0 ms)</system-out></testcase>
 <testcase name="node_thing" status="notrun"><skipped message="SKIP_RETURN_CODE=77"/><system-out>SKIP: node-llama-cpp is not installed
</system-out></testcase>
</testsuite>
"""


def run(script, junit, env):
    full = {k: v for k, v in os.environ.items() if k not in ("CI", "QUARK_REQUIRE_PEERS")}
    full.update(env)
    return subprocess.run([sys.executable, script, junit], env=full, capture_output=True, text=True)


def main():
    script = sys.argv[1]
    with tempfile.NamedTemporaryFile("w", suffix=".xml", delete=False) as f:
        f.write(JUNIT)
    try:
        local = run(script, f.name, {})
        assert local.returncode == 0, local
        assert "tests: 4 total, 2 run, 1 passed, 1 failed, 2 skipped" in local.stdout, local.stdout
        assert "skipped: Cuda.Skips: no CUDA device on this machine" in local.stdout, local.stdout
        assert "[allowed: GPU-labelled" in local.stdout, local.stdout
        assert "skipped (UNEXPECTED): node_thing: node-llama-cpp is not installed" in local.stdout, local.stdout
        assert "failed: B.Fails" in local.stdout, local.stdout
        for env in ({"CI": "true"}, {"QUARK_REQUIRE_PEERS": "1"}):
            ci = run(script, f.name, env)
            assert ci.returncode == 1, (env, ci)
            assert "1 unexpected skip(s)" in ci.stderr, ci.stderr
    finally:
        os.unlink(f.name)
    print("test_summary.py: counts, reasons and the CI exit status as expected")


if __name__ == "__main__":
    main()
