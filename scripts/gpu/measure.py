#!/usr/bin/env python3
"""Runs one command and measures it as docs/gpu.md's H200 run reports it (scripts/gpu/h200.sh calls this).

    measure.py --name NAME --log LOG --jsonl JSONL [--timeout S] [--env K=V ...] -- COMMAND ARGS...

LOG gets every line the command prints (stdout and stderr), each prefixed with the seconds since the start. One JSON
line is appended to JSONL:
  name, command, rc (124 when --timeout stopped it), wall_s,
  max_rss_mib            the command's peak resident memory (getrusage of the child: ru_maxrss),
  gpu_baseline_mib, gpu_peak_mib, gpu_peak_delta_mib
                         device memory in use before the start and its peak while the command ran (all processes on
                         the device, sampled every 0.2 s through NVML, else nvidia-smi; null without either),
  layers                 for `quark quantize`: the second at which each "quantize layer i/N" first appeared, and
  layer_s                the seconds between consecutive layers (what extrapolates a cut-short run),
  tail                   the last lines the command printed.
Uses only the standard library (and pynvml where importable): it must run under any python3 without torch.
"""

import argparse
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import threading
import time

LAYER_LINE = re.compile(r"quantize layer (\d+)/(\d+)")


class GpuMemorySampler:
    """Peak device memory in use (MiB), sampled in a thread."""

    def __init__(self, period_s=0.2):
        self.period_s = period_s
        self.read = self._reader()
        self.baseline = self.read() if self.read else None
        self.peak = self.baseline
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    @staticmethod
    def _reader():
        try:
            import pynvml  # nvidia-ml-py

            pynvml.nvmlInit()
            handle = pynvml.nvmlDeviceGetHandleByIndex(0)
            return lambda: pynvml.nvmlDeviceGetMemoryInfo(handle).used / 2**20
        except Exception:  # noqa: BLE001 (no NVML: fall back to nvidia-smi, else no figure)
            pass
        smi = shutil.which("nvidia-smi")
        if not smi:
            return None

        def read_smi():
            try:
                out = subprocess.run([smi, "--query-gpu=memory.used", "--format=csv,noheader,nounits", "-i", "0"],
                                     capture_output=True, text=True, timeout=5).stdout
                return float(out.strip().splitlines()[0])
            except (OSError, ValueError, IndexError, subprocess.TimeoutExpired):
                return None

        return read_smi if read_smi() is not None else None

    def _run(self):
        while not self._stop.wait(self.period_s):
            value = self.read()
            if value is not None and (self.peak is None or value > self.peak):
                self.peak = value

    def __enter__(self):
        if self.read:
            self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        if self.read:
            self._thread.join()


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--name", required=True)
    p.add_argument("--log", required=True)
    p.add_argument("--jsonl", required=True)
    p.add_argument("--timeout", type=float, default=0, help="seconds; 0 = none")
    p.add_argument("--env", action="append", default=[], help="K=V for the command only (repeatable)")
    p.add_argument("command", nargs=argparse.REMAINDER)
    args = p.parse_args()
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        p.error("no command after --")
    env = dict(os.environ)
    for item in args.env:
        key, sep, value = item.partition("=")
        if not sep:
            p.error(f"--env {item}: not K=V")
        env[key] = value

    layers, tail = {}, []
    start = time.monotonic()
    with GpuMemorySampler() as gpu, open(args.log, "a", encoding="utf-8", errors="replace") as log:
        log.write(f"== {args.name}: {' '.join(command)}\n")
        log.flush()
        try:
            child = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=env,
                                     start_new_session=True)
        except OSError as e:
            child = None
            tail.append(f"could not start: {e}")
        timed_out = False
        if child:
            def stop():
                nonlocal timed_out
                timed_out = True
                os.killpg(child.pid, signal.SIGKILL)

            timer = threading.Timer(args.timeout, stop) if args.timeout > 0 else None
            if timer:
                timer.start()
            for raw in child.stdout:
                line = raw.decode("utf-8", "replace").rstrip("\n")
                now = time.monotonic() - start
                log.write(f"[{now:8.2f}] {line}\n")
                log.flush()
                tail = (tail + [line])[-8:]
                match = LAYER_LINE.search(line)
                if match and match.group(1) not in layers:
                    layers[match.group(1)] = round(now, 2)
            _, status, usage = os.wait4(child.pid, 0)
            if timer:
                timer.cancel()
            rc = 124 if timed_out else (os.waitstatus_to_exitcode(status))
            max_rss_mib = round(usage.ru_maxrss / 1024, 1)
        else:
            rc, max_rss_mib = 127, None
    wall = time.monotonic() - start
    marks = [layers[k] for k in sorted(layers, key=int)]
    record = {
        "name": args.name, "command": command, "rc": rc, "wall_s": round(wall, 2), "max_rss_mib": max_rss_mib,
        "gpu_baseline_mib": gpu.baseline, "gpu_peak_mib": gpu.peak,
        "gpu_peak_delta_mib": None if gpu.peak is None else round(gpu.peak - gpu.baseline, 1),
        "layers": layers, "layer_s": [round(b - a, 2) for a, b in zip(marks, marks[1:])], "tail": tail,
    }
    with open(args.jsonl, "a", encoding="utf-8") as out:
        out.write(json.dumps(record) + "\n")
    print(json.dumps({k: record[k] for k in ("name", "rc", "wall_s", "max_rss_mib", "gpu_peak_delta_mib")}))
    return 0 if rc == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
