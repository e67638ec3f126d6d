#!/usr/bin/env python3
"""Prints the OPENBLAS_CORETYPE every quark binary would re-execute itself with on this machine, or nothing.

core/base/blas_core.cc (issue #33) re-executes each LibTorch process whose OpenBLAS reports an SSE-era core on a CPU
with AVX2/AVX-512 (Debian's OpenBLAS 0.3.21 on recent Xeons). scripts/test.sh exports this value once, so that the
suite's thousands of processes do not each load LibTorch twice; the decision is ChooseBlasCore's, restated: nothing
when OpenBLAS already knows the CPU, when the operator set OPENBLAS_CORETYPE, or when the CPU has neither extension.
"""
import ctypes
import os
import sys

GENERIC = {"unknown", "katmai", "coppermine", "northwood", "prescott", "banias", "atom", "core2", "penryn",
           "dunnington", "nehalem", "athlon", "opteron", "opteron_sse3", "barcelona", "nano", "bobcat"}


def cpu_flags():
    with open("/proc/cpuinfo") as f:
        for line in f:
            if line.startswith("flags"):
                return set(line.split(":", 1)[1].split())
    return set()


def main():
    if os.environ.get("OPENBLAS_CORETYPE"):
        return 0
    try:
        blas = ctypes.CDLL("libopenblas.so.0")
        blas.openblas_get_corename.restype = ctypes.c_char_p
    except (OSError, AttributeError):  # no OpenBLAS, or one without openblas_get_corename: nothing to choose
        return 0
    core = (blas.openblas_get_corename() or b"unknown").decode().lower()
    if core not in GENERIC:
        return 0
    flags = cpu_flags()
    if {"avx512f", "avx512bw", "avx512vl", "avx512dq"} <= flags:
        print("SkylakeX")
    elif {"avx2", "fma"} <= flags:
        print("Haswell")
    return 0


if __name__ == "__main__":
    sys.exit(main())
