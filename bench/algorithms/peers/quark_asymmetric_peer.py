"""AMD Quark's own GPTAQ or Qronos on one linear, timed as `algo_bench gptaq|qronos --load-inputs` times the engine.

Reads x (the float model's input [T, K]), xq (the quantized model's [T, K]) and w [N, K] from a file that
`algo_bench gptaq --save-inputs` wrote, and runs Quark's classes (loaded from QUARK_SRC with the rest of Quark stubbed,
by tests/peers/quark_algorithms/quark_asymmetric.py) as Quark's processors call them: add_batch_quantized(xq) then
add_batch_nonquantized(x) for the one sample (the statistics), then quantize(blocksize, ...) with Quark 0.13's defaults
(the quantize time). uint4 asymmetric per group (Quark's per-channel MinMax observer on each group), static groups.

Prints one JSON line with the engine's fields: stats_s, quantize_s, total_s, peak_rss_mb (of this process, after
quantize), rel_output_error = |X W^T - X~ Q^T|^2 / |X W^T|^2 in float64 and rtn_rel_output_error (the same quantizer
per group on W).

Usage (inside the trixie chroot, python3-torch 2.6; bench/algorithms/asymmetric_vs_quark.sh runs it):
  QUARK_SRC=/path/to/Quark python3 quark_asymmetric_peer.py --method gptaq --inputs IN.safetensors --threads 2
"""
import argparse
import json
import os
import resource
import struct
import sys
import time

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
# Beside this file when the driver copies both into the chroot; in the tree, where the correctness peer lives.
sys.path[:0] = [HERE, os.path.join(HERE, "..", "..", "..", "tests", "peers", "quark_algorithms")]
import quark_asymmetric  # noqa: E402


def read_inputs(path):
    """x, xq and w as float32 tensors, each read into memory of its own (one copy, nothing left mapped), as the
    engine reads them, so both sides' peak RSS holds the inputs once."""
    with open(path, "rb") as f:
        (header_len,) = struct.unpack("<Q", f.read(8))
        header = json.loads(f.read(header_len))
        tensors = {}
        for name in ("x", "xq", "w"):
            info = header.get(name)
            if info is None or info["dtype"] != "F32" or len(info["shape"]) != 2:
                raise SystemExit(f"{path}: needs float32 matrices x, xq [T, K] and w [N, K]; `{name}` is {info}")
            begin, end = info["data_offsets"]
            buffer = bytearray(end - begin)
            f.seek(8 + header_len + begin)
            if f.readinto(buffer) != len(buffer):
                raise SystemExit(f"{path}: `{name}` runs past the end of the file")
            tensors[name] = torch.frombuffer(buffer, dtype=torch.float32).view(info["shape"])
    x, xq, w = tensors["x"], tensors["xq"], tensors["w"]
    if xq.shape != x.shape or w.shape[1] != x.shape[1]:
        raise SystemExit(f"{path}: x {list(x.shape)}, xq {list(xq.shape)} and w {list(w.shape)} do not share K")
    return x, xq, w, header.get("__metadata__", {})


def relative_error(x, w, xq, q):
    reference = (x @ w.t()).double()
    return ((reference - (xq @ q.t()).double()).pow(2).sum() / reference.pow(2).sum()).item()


def rtn(w, group):
    quantizer = quark_asymmetric.GroupQuantizer()
    out = torch.empty_like(w)
    for i in range(0, w.shape[1], group):
        quantizer.observe(w[:, i : i + group])
        out[:, i : i + group] = quantizer.fake_quantize_with_qparams(w[:, i : i + group], quantizer.scale,
                                                                     quantizer.zero_point)
    return out


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--method", choices=("gptaq", "qronos"), required=True)
    parser.add_argument("--inputs", required=True, help="x, xq, w as algo_bench --save-inputs writes them")
    parser.add_argument("--group-size", type=int, default=128)
    parser.add_argument("--block-size", type=int, default=128)
    parser.add_argument("--no-act-order", dest="act_order", action="store_false")
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    gptaq, qronos = quark_asymmetric.load_quark_classes()
    x, xq, w, metadata = read_inputs(args.inputs)

    algo = quark_asymmetric.new_instance(gptaq if args.method == "gptaq" else qronos, w)
    start = time.perf_counter()
    quark_asymmetric.add_sample(algo, xq.unsqueeze(0), x.unsqueeze(0))
    stats_s = time.perf_counter() - start
    quantize_start = time.perf_counter()
    quark_asymmetric.quantize(algo, args.block_size, args.group_size, args.act_order)
    quantize_s, total_s = time.perf_counter() - quantize_start, time.perf_counter() - start
    peak_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0
    q = algo.layer.weight.data
    print(json.dumps({
        "algorithm": args.method,
        "implementation": "quark",
        "shape": list(w.shape),
        "tokens": x.shape[0],
        "inputs": args.inputs,
        "inputs_metadata": metadata,
        "threads": torch.get_num_threads(),
        "stats_s": stats_s,
        "quantize_s": quantize_s,
        "total_s": total_s,
        "peak_rss_mb": peak_mb,
        "rel_output_error": relative_error(x, w, xq, q),
        "rtn_rel_output_error": relative_error(x, w, xq, rtn(w, args.group_size)),
        "torch": torch.__version__,
    }), flush=True)


if __name__ == "__main__":
    main()
