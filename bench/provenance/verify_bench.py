#!/usr/bin/env python3
"""quarkctl verify on artifacts the real quark-worker published and signed (#34).

Starts quarkd (TLS, tokens, --signing-key, one real quark-worker) with the Python client's test harness, runs a
ptpc_fp8 job on each fixture model, and times `quarkctl verify` on its manifest (best of 3, process start and the
GetSigningKey call included). Prints one line per model. Not run by the tests.

    QUARK_BINARY_DIR=build QUARKD_PYTHON_STUBS=build/clients/python/gen \
        /usr/bin/python3 bench/provenance/verify_bench.py [stories260K tinyllama-a]
"""
import os
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "clients", "python"))
os.environ.setdefault("QUARK_BINARY_DIR", os.path.join(ROOT, "build"))
os.environ.setdefault("QUARKD_PYTHON_STUBS", os.path.join(os.environ["QUARK_BINARY_DIR"], "clients/python/gen"))

import quarkd  # noqa: E402
from tests.quarkd_process import FIXTURES, TOKENS, Quarkd  # noqa: E402


def main(models):
    server = Quarkd(signing_key=True)
    quarkctl = os.path.join(os.environ["QUARK_BINARY_DIR"], "client/quarkctl")
    try:
        with quarkd.Client(server.address, token=TOKENS["submitter"], tls=server.ca) as client:
            for model in models:
                job = client.submit(f"file://{FIXTURES}/{model}", preset="ptpc_fp8",
                                    output=f"file://{server.dir}/out", max_attempts=1)
                job.wait(timeout=1800, raise_on_failure=True)
                size = sum(a.size_bytes for a in job.artifacts)
                argv = [quarkctl, "--server", server.address, "--tls-ca", server.ca, "--token", TOKENS["submitter"],
                        "verify", job.manifest_uri]
                best, code = float("inf"), None
                for _ in range(3):
                    start = time.monotonic()
                    code = subprocess.run(argv, capture_output=True).returncode
                    best = min(best, time.monotonic() - start)
                print(f"{model}: {len(job.artifacts)} files, {size / 1e6:.1f} MB: quarkctl verify exit {code}, "
                      f"best of 3 {best:.3f} s")
    finally:
        server.cleanup()


if __name__ == "__main__":
    main(sys.argv[1:] or ["stories260K", "tinyllama-a"])
