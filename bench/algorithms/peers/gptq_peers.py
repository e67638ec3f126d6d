#!/usr/bin/python3
"""Runs a public GPTQ implementation (a "peer") on one layer, for comparison with quarkd's C++ GPTQ.

    /usr/bin/python3 bench/algorithms/peers/gptq_peers.py --peer ist|quark --repo DIR --input IN.safetensors \
        --bits 4 --group-size 128 [--asym] [--act-order] [--static-groups] [--damp 0.01] [--block-size 128] \
        [--seq-len 2048] [--dtype int4] [--threads N] [--device cpu|cuda[:N]] [--warmup] [--cuda-graphs] \
        [--out OUT.safetensors]

IN.safetensors holds float32 `weight` [N, K] and calibration `inputs` [T, K] (make_gptq_input.py writes one). The
peer's code is loaded from --repo at run time and never copied here. Prints one JSON line on stdout:
  peer, hessian_s, quantize_s, total_s   wall-clock seconds (time.perf_counter) of the peer's own calls
  rel_output_error      ||X W^T - X Q^T||^2 / ||X W^T||^2 over the calibration inputs, Q the peer's result
  rtn_rel_output_error  the same for round-to-nearest with the same quantizer, per group on the original W
  threads               torch.get_num_threads()
plus the configuration and any notes about deviations. --out writes Q as float32 `weight`.

--device runs the peer on a GPU: the layer and its inputs are placed there before the clock starts (as algo_bench
places them), and the timings wait for the device (torch.cuda.synchronize). --warmup runs the whole peer once, untimed,
before the timed run (CUDA context, cuBLAS / cuSOLVER handles, kernel loading: algo_bench --warmup does the same).
--cuda-graphs (Quark only) passes use_cuda_graphs=True, Quark's default on CUDA devices.
"""

import argparse
import json
import os
import sys

import torch

# No __pycache__ inside the source tree (this script's helpers), nor inside the peer checkouts.
sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import safetensors_np  # noqa: E402

PEERS = ("ist", "quark")


def parse_args():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--peer", choices=PEERS, required=True)
    p.add_argument("--repo", required=True, help="checkout of the peer (IST-DASLab/gptq or amd/Quark)")
    p.add_argument("--input", required=True, help="safetensors with `weight` [N, K] and `inputs` [T, K]")
    p.add_argument("--bits", type=int, default=4, choices=(2, 3, 4, 8))
    p.add_argument("--group-size", type=int, default=128, help="columns per group; -1 = one group per output row")
    p.add_argument("--asym", action="store_true", help="asymmetric (zero point); default symmetric")
    p.add_argument("--act-order", action="store_true", help="quantize columns in decreasing Hessian diagonal")
    p.add_argument("--static-groups", action="store_true", help="group params from the original W, before GPTQ")
    p.add_argument("--damp", type=float, default=0.01, help="damping, a fraction of mean(diag(H))")
    p.add_argument("--block-size", type=int, default=128, help="GPTQ lazy-batch block size")
    p.add_argument("--seq-len", type=int, default=2048,
                   help="inputs are cut into consecutive sequences of this many tokens, one add_batch call (one "
                        "sample) each; a shorter tail is a sequence of its own")
    p.add_argument("--dtype", choices=("int8", "uint8", "int4", "uint4", "int3", "int2"),
                   help="quark only: Quark integer dtype (default int<bits>); IST-DASLab only knows --bits")
    p.add_argument("--threads", type=int, help="torch.set_num_threads")
    p.add_argument("--out", help="write the dequantized weight here as float32 `weight`")
    p.add_argument("--device", default="cpu", help="cpu (default), cuda or cuda:N")
    p.add_argument("--warmup", action="store_true", help="one untimed run of the peer first")
    p.add_argument("--cuda-graphs", action="store_true", help="Quark only: use_cuda_graphs=True")
    args = p.parse_args()

    if args.group_size == 0 or args.group_size < -1:
        p.error(f"--group-size must be positive or -1, got {args.group_size}")
    if args.block_size <= 0 or args.seq_len <= 0:
        p.error(f"--block-size and --seq-len must be positive, got {args.block_size} and {args.seq_len}")
    if args.damp < 0:
        p.error(f"--damp must be >= 0, got {args.damp}")
    if args.threads is not None and args.threads <= 0:
        p.error(f"--threads must be positive, got {args.threads}")
    if args.cuda_graphs and (args.peer != "quark" or not args.device.startswith("cuda")):
        p.error("--cuda-graphs applies to --peer quark on a cuda device only")
    if args.dtype is None:
        args.dtype = f"int{args.bits}"
    elif args.peer != "quark":
        p.error("--dtype applies to --peer quark only")
    elif int(args.dtype.rsplit("int", 1)[1]) != args.bits:
        p.error(f"--dtype {args.dtype} does not have --bits {args.bits}")
    return args


def load_layer(path):
    tensors, _ = safetensors_np.read(path)
    for name in ("weight", "inputs"):
        if name not in tensors:
            raise SystemExit(f"{path}: no tensor `{name}` (has {sorted(tensors)})")
        if tensors[name].ndim != 2:
            raise SystemExit(f"{path}: `{name}` must be 2-D, got shape {list(tensors[name].shape)}")
    weight = torch.from_numpy(tensors["weight"]).float()
    inputs = torch.from_numpy(tensors["inputs"]).float()
    if weight.shape[1] != inputs.shape[1]:
        raise SystemExit(f"{path}: weight is {list(weight.shape)} but inputs are {list(inputs.shape)}; K must match")
    return weight.contiguous(), inputs.contiguous()


def rel_output_error(inputs, weight, quantized, ref_sq):
    # X (W - Q)^T directly rather than the difference of two outputs, so float32 loses nothing to cancellation;
    # the squared norms are summed in float64.
    diff = inputs @ (weight - quantized).t()
    return float(diff.double().square().sum() / ref_sq)


def main():
    args = parse_args()
    if args.threads is not None:
        torch.set_num_threads(args.threads)
    weight, inputs = load_layer(args.input)
    if args.group_size > weight.shape[1]:
        raise SystemExit(f"--group-size {args.group_size} exceeds K = {weight.shape[1]}")
    device = torch.device(args.device)
    if device.type == "cuda" and not torch.cuda.is_available():
        raise SystemExit(f"--device {args.device}: this torch sees no CUDA device")
    weight, inputs = weight.to(device), inputs.to(device)
    sequences = list(torch.split(inputs, args.seq_len))

    if args.peer == "ist":
        import ist_peer as peer_mod

        run = lambda: peer_mod.run(args.repo, weight, sequences, args)  # noqa: E731
        rtn_of = lambda: peer_mod.rtn(args.repo, weight, args.bits, args.group_size, args.asym)  # noqa: E731
    else:
        import quark_peer as peer_mod

        run = lambda: peer_mod.run(args.repo, weight, sequences, args)  # noqa: E731
        rtn_of = lambda: peer_mod.rtn(weight, args)  # noqa: E731
    if args.warmup:
        run()
    quantized, hessian_s, quantize_s, notes = run()
    rtn = rtn_of()

    ref_sq = (inputs @ weight.t()).double().square().sum()
    result = {
        "peer": args.peer,
        "hessian_s": round(hessian_s, 4),
        "quantize_s": round(quantize_s, 4),
        "total_s": round(hessian_s + quantize_s, 4),
        "rel_output_error": rel_output_error(inputs, weight, quantized, ref_sq),
        "rtn_rel_output_error": rel_output_error(inputs, weight, rtn, ref_sq),
        "threads": torch.get_num_threads(),
        "n": weight.shape[0], "k": weight.shape[1], "tokens": inputs.shape[0], "sequences": len(sequences),
        "bits": args.bits, "dtype": args.dtype if args.peer == "quark" else None, "group_size": args.group_size,
        "asym": args.asym, "act_order": args.act_order, "static_groups": args.static_groups, "damp": args.damp,
        "block_size": args.block_size, "torch": torch.__version__, "repo": os.path.abspath(args.repo),
        "device": str(device), "warmup": args.warmup, "cuda_graphs": args.cuda_graphs,
        "notes": notes,
    }
    if args.out:
        safetensors_np.write(args.out, {"weight": quantized.float().cpu().numpy()},
                             metadata={"peer": args.peer, "config": json.dumps({k: result[k] for k in (
                                 "bits", "dtype", "group_size", "asym", "act_order", "static_groups", "damp",
                                 "block_size")})})
    print(json.dumps(result), flush=True)


if __name__ == "__main__":
    main()
