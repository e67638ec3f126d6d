#!/usr/bin/env python3
"""Helpers of scripts/gpu/run.sh, in python3 (the one tool every GPU machine with PyTorch has).

results.py --steps STEPS.tsv --build DIR --out DIR   prints results.json: the machine, each step's status and
                                                     seconds, the tests (from ctest's JUnit file), the bench's figures
results.py --unpack PKG.deb --into DIR               extracts a .deb's files without dpkg (ar archive + data.tar.*)
results.py --pin-mtimes STATE.json --root DIR        gives every source file whose content is unchanged since the
                                                     last run the modification time it had then, so that a rerun
                                                     on a kept build folder rebuilds only what changed, whatever
                                                     times the copy of the tree carries
"""
import argparse
import io
import json
import os
import platform
import sys
import tarfile
import xml.etree.ElementTree as ET


def unpack(deb, into):
    """A .deb is an ar archive; its data.tar.{xz,gz,zst} holds the files."""
    with open(deb, "rb") as f:
        if f.read(8) != b"!<arch>\n":
            sys.exit(f"{deb}: not an ar archive")
        while True:
            header = f.read(60)
            if len(header) < 60:
                sys.exit(f"{deb}: no data.tar member")
            name = header[:16].decode().strip().rstrip("/")
            size = int(header[48:58].decode().strip())
            body = f.read(size)
            if size % 2:
                f.read(1)
            if name.startswith("data.tar"):
                if name.endswith(".zst"):
                    sys.exit(f"{deb}: zstd-compressed data (python3 cannot read it; install dpkg-deb or zstd)")
                with tarfile.open(fileobj=io.BytesIO(body), mode="r:*") as tar:
                    if hasattr(tarfile, "data_filter"):  # Python 3.12+ (and security updates of older ones)
                        tar.extractall(into, filter="data")
                    else:
                        tar.extractall(into)
                return


def pin_mtimes(state_path, root, skip):
    """Files whose sha1 is the one recorded get the recorded mtime back; others are recorded as they are."""
    import hashlib

    try:
        state = json.load(open(state_path))
    except (OSError, ValueError):
        state = {}
    pinned = changed = 0
    skip = {os.path.realpath(p) for p in skip}
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = [d for d in dirnames if d != ".git" and os.path.realpath(os.path.join(dirpath, d)) not in skip]
        for name in filenames:
            path = os.path.join(dirpath, name)
            if os.path.islink(path):
                continue
            digest = hashlib.sha1(open(path, "rb").read()).hexdigest()
            rel = os.path.relpath(path, root)
            st = os.stat(path)
            if rel in state and state[rel][0] == digest:
                os.utime(path, ns=(st.st_atime_ns, state[rel][1]))
                pinned += 1
            else:
                state[rel] = [digest, st.st_mtime_ns]
                changed += 1
    json.dump(state, open(state_path, "w"))
    print(f"{pinned} source files unchanged since the last run (times restored), {changed} new or changed")


def tests_from_junit(path):
    if not os.path.exists(path):
        return {"junit": "absent (ctest did not finish)"}
    counts = {"passed": 0, "failed": 0, "skipped": 0, "not_run": 0}
    failed, skipped = [], []
    for case in ET.parse(path).getroot().iter("testcase"):
        name = case.get("name", "?")
        status = case.get("status", "")
        if case.find("failure") is not None or status == "fail":
            counts["failed"] += 1
            failed.append(name)
        elif case.find("skipped") is not None or status in ("notrun", "disabled"):
            # ctest writes a GTEST_SKIP (matched by gtest_discover_tests' skip expression) as status "notrun" with
            # <skipped message="SKIP_REGULAR_EXPRESSION_MATCHED"/>; any other "notrun" could not start: a failure.
            element = case.find("skipped")
            message = element.get("message", "") if element is not None else status
            if "SKIP_REGULAR_EXPRESSION_MATCHED" in message or "Skipped" in message or status == "disabled":
                counts["skipped"] += 1
                skipped.append(name)
            else:
                counts["not_run"] += 1
                failed.append(name + " (not run: " + message + ")")
        else:
            counts["passed"] += 1
    counts["total"] = sum(counts.values())
    return {"counts": counts, "failed": failed, "skipped": skipped}


def results(args):
    steps = []
    if os.path.exists(args.steps):
        for line in open(args.steps):
            name, rc, secs, log = line.rstrip("\n").split("\t")
            steps.append({"step": name, "status": int(rc), "seconds": int(secs), "log": log})
    doc = {
        "kit": "quarkd GPU kit (scripts/gpu/run.sh)",
        "machine": {"host": platform.node(), "system": platform.platform(), "python": platform.python_version()},
        "steps": steps,
        "ok": bool(steps) and all(s["status"] == 0 for s in steps),
        "tests": tests_from_junit(os.path.join(args.build, "ctest.xml")),
    }
    bench = os.path.join(args.build, "bench.json")
    if os.path.exists(bench):
        try:
            doc["bench"] = json.load(open(bench))
        except ValueError as e:
            doc["bench"] = {"error": f"bench.json unreadable: {e}"}
    engine = os.path.join(args.build, "engine_bench.jsonl")
    if os.path.exists(engine):
        lines = [line for line in open(engine) if line.startswith("{")]
        try:
            doc["engine_bench"] = [json.loads(line) for line in lines]
        except ValueError as e:
            doc["engine_bench"] = {"error": f"engine_bench.jsonl unreadable: {e}"}
    json.dump(doc, sys.stdout, indent=1)
    print()


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--steps")
    p.add_argument("--build")
    p.add_argument("--unpack")
    p.add_argument("--into")
    p.add_argument("--pin-mtimes")
    p.add_argument("--root")
    p.add_argument("--skip", action="append", default=[])
    args = p.parse_args()
    if args.pin_mtimes:
        pin_mtimes(args.pin_mtimes, args.root, args.skip)
    elif args.unpack:
        unpack(args.unpack, args.into)
    else:
        results(args)


if __name__ == "__main__":
    main()
