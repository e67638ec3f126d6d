#!/usr/bin/env python3
"""The device rates the estimator's GPU model uses (core/estimate/throughput.h, NominalH200Throughput), measured on
cuda:0 with PyTorch and CUDA events: float32 GEMM with TF32 off (what LibTorch's C++ API does by default, so what the
engine's float32 passes get), bfloat16 GEMM, float32 Cholesky (cuSOLVER, GPTQ's factor) and the device-to-device copy
bandwidth (bytes read + written). Prints one JSON line. scripts/gpu/h200.sh runs it.

    device_rates.py [--n 8192] [--chol 4096,11008]
"""

import argparse
import json

import torch


def timed_ms(fn, repeats):
    for _ in range(2):
        fn()
    start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    torch.cuda.synchronize()
    start.record()
    for _ in range(repeats):
        fn()
    stop.record()
    torch.cuda.synchronize()
    return start.elapsed_time(stop) / repeats


def main():
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--n", type=int, default=8192)
    p.add_argument("--chol", default="4096,11008")
    args = p.parse_args()
    if not torch.cuda.is_available():
        raise SystemExit("device_rates.py: torch sees no CUDA device")
    torch.backends.cuda.matmul.allow_tf32 = False
    n = args.n
    result = {"device": torch.cuda.get_device_name(0), "torch": torch.__version__, "n": n}
    for name, dtype in (("gemm_fp32_tflops", torch.float32), ("gemm_bf16_tflops", torch.bfloat16)):
        a = torch.randn(n, n, device="cuda", dtype=dtype)
        b = torch.randn(n, n, device="cuda", dtype=dtype)
        ms = timed_ms(lambda: a @ b, 10)
        result[name] = round(2 * n**3 / (ms * 1e-3) / 1e12, 1)
        del a, b
    for k in (int(x) for x in args.chol.split(",")):
        x = torch.randn(k, 2 * k, device="cuda")
        h = x @ x.t() + k * torch.eye(k, device="cuda")
        ms = timed_ms(lambda: torch.linalg.cholesky(h), 5)
        result[f"cholesky_{k}_ms"] = round(ms, 2)
        result[f"cholesky_{k}_tflops"] = round(k**3 / 3 / (ms * 1e-3) / 1e12, 2)
        del x, h
    src = torch.empty(2**30, dtype=torch.uint8, device="cuda")
    dst = torch.empty_like(src)
    ms = timed_ms(lambda: dst.copy_(src), 10)
    result["copy_gbps"] = round(2 * src.numel() / (ms * 1e-3) / 1e9, 1)
    print(json.dumps(result), flush=True)


if __name__ == "__main__":
    main()
