#!/usr/bin/python3
"""mit-han-lab/smoothquant on one saved Llama MLP block, W8A8 int8 per tensor, for comparison with
`algo_bench smoothquant`.

    /usr/bin/python3 bench/algorithms/peers/smoothquant_peer.py --repo /tmp/peers/smoothquant --input MLP.safetensors \
        [--alpha 0.5] [--pairs norm|both] [--eps 1e-5] [--threads N] [--out OUT.safetensors]

What runs is smoothquant's code, loaded from --repo: calibration.get_act_scales (its forward hooks on every
nn.Linear, max |x| per channel) over the block's inputs, smooth.smooth_ln_fcs_llama_like on
post_attention_layernorm -> gate_proj, up_proj (the call its smooth_lm makes for a Llama layer), then
fake_quant.quantize_llama_like(weight_quant="per_tensor", act_quant="per_tensor"): W8A8Linear, weights by
quantize_weight_per_tensor_absmax, inputs by quantize_activation_per_tensor_absmax on each forward. The block runs
its T tokens in one forward, so that "dynamic" per-tensor scale is the static scale of this calibration data.
get_act_scales reads a dataset through a tokenizer: the stand-ins here hand it the block's inputs, in --seq-len
windows, as its "input_ids".

smoothquant has no linear -> linear pair. With --pairs both, up_proj -> down_proj (Quark's Llama template) is
smoothed by this harness with smoothquant's formula (max |x| of down_proj's input from the same get_act_scales,
s = clamp(act^alpha / max|W[:, c]|^(1 - alpha), 1e-5); up_proj's rows / s, down_proj's columns * s).

Prints one JSON line: algo_s (get_act_scales + smoothing, time.perf_counter), rel_output_error = |Y - Yq|^2 / |Y|^2
of the block output with smoothquant's quantizer (amax / 127), rtn_rel_output_error (no smoothing), the same two with
Quark's int8 numerics (amax / 127.5, `*_quark_numerics`), the scale range per pair, threads.
"""

import argparse
import json
import sys
import time
import types

import torch

sys.dont_write_bytecode = True  # before importing the helper: no __pycache__ in the source tree
import mlp_block_np as mb  # noqa: E402


def parse_args():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--repo", required=True, help="checkout of mit-han-lab/smoothquant")
    p.add_argument("--input", required=True)
    p.add_argument("--alpha", type=float, default=0.5)
    p.add_argument("--pairs", choices=("norm", "both"), default="both")
    p.add_argument("--seq-len", type=int, default=512, help="tokens per get_act_scales sample")
    p.add_argument("--eps", type=float, default=1e-5, help="RMSNorm eps (Llama-2/3: 1e-5)")
    p.add_argument("--threads", type=int)
    p.add_argument("--out")
    return p.parse_args()


class _Rows:
    """What get_act_scales needs of a `datasets` dataset: shuffle() and rows with a "text" (here: a window index)."""

    def __init__(self, n):
        self.n = n

    def shuffle(self, seed=None):
        return self

    def __getitem__(self, i):
        return {"text": i}


def install_datasets_stub(windows):
    stub = types.ModuleType("datasets")
    stub.load_dataset = lambda *a, **k: _Rows(len(windows))
    sys.modules["datasets"] = stub

    def tokenizer(text, **kwargs):
        return types.SimpleNamespace(input_ids=windows[text])
    return tokenizer


def smooth_fc_fc(fc1, fc2, act_scales, alpha):
    """Harness code (smoothquant has none): smooth_ln_fcs's formula for a linear -> linear pair."""
    w_max = fc2.weight.abs().max(dim=0)[0].clamp(min=1e-5)
    scales = (act_scales.to(fc2.weight.dtype).pow(alpha) / w_max.pow(1 - alpha)).clamp(min=1e-5)
    fc1.weight.div_(scales.view(-1, 1))
    fc2.weight.mul_(scales.view(1, -1))
    return scales


def main():
    args = parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    mb.install_transformers_stub()
    tensors, _ = mb.load_block(args.input)
    x = tensors["inputs"].unsqueeze(0)  # [1, T, H]
    windows = list(x.split(args.seq_len, dim=1))
    tokenizer = install_datasets_stub(windows)
    calibration = mb.load_package_module(args.repo, "smoothquant", "calibration")
    smooth = mb.load_package_module(args.repo, "smoothquant", "smooth")
    fake_quant = mb.load_package_module(args.repo, "smoothquant", "fake_quant")

    def w8a8_output(weights):
        q = mb.MlpBlock({**tensors, **weights}, args.eps)
        fake_quant.quantize_llama_like(types.SimpleNamespace(model=q), weight_quant="per_tensor",
                                       act_quant="per_tensor")
        return q(x.clone())[0]

    def quark_w8a8_output(weights):
        q8 = lambda t: mb.quark_int(t, 8, True, True)  # noqa: E731
        w = {n: q8(weights[n]) for n in ("gate_proj", "up_proj", "down_proj")}
        h = mb.LlamaRMSNorm(weights["norm_weight"], args.eps)(x)[0]
        hq = q8(h)
        m = torch.nn.functional.silu(hq @ w["gate_proj"].t()) * (hq @ w["up_proj"].t())
        return q8(m) @ w["down_proj"].t()

    with torch.no_grad():
        block = mb.MlpBlock(tensors, args.eps)
        y = block(x)[0]
        original = block.weights()
        rtn = w8a8_output(original)
        rtn_quark = quark_w8a8_output(original)

        start = time.perf_counter()
        act_scales = calibration.get_act_scales(block, tokenizer, "unused.jsonl", num_samples=len(windows),
                                                seq_len=args.seq_len)
        pairs = []
        fcs = [block.mlp.gate_proj, block.mlp.up_proj]
        before = block.post_attention_layernorm.weight.clone()
        smooth.smooth_ln_fcs_llama_like(block.post_attention_layernorm, fcs, act_scales["mlp.gate_proj"], args.alpha)
        pairs.append(("post_attention_layernorm", ["mlp.gate_proj", "mlp.up_proj"],
                      before / block.post_attention_layernorm.weight))
        if args.pairs == "both":
            s = smooth_fc_fc(block.mlp.up_proj, block.mlp.down_proj, act_scales["mlp.down_proj"], args.alpha)
            pairs.append(("mlp.up_proj", ["mlp.down_proj"], s))
        algo_s = time.perf_counter() - start

        transformed = block.weights()
        yq = w8a8_output(transformed)
        yq_quark = quark_w8a8_output(transformed)

    line = {
        "algorithm": "smoothquant", "implementation": "smoothquant",
        "hidden": x.shape[2], "intermediate": tensors["gate_proj"].shape[0], "tokens": x.shape[1],
        "threads": torch.get_num_threads(), "alpha": args.alpha, "pairs_mode": args.pairs,
        "algo_s": algo_s,
        "rel_output_error": mb.rel_error(y, yq),
        "rtn_rel_output_error": mb.rel_error(y, rtn),
        "rel_output_error_quark_numerics": mb.rel_error(y, yq_quark),
        "rtn_rel_output_error_quark_numerics": mb.rel_error(y, rtn_quark),
        "pairs": [{"prev_op": p, "layers": l, "scale_min": s.double().min().item(),
                   "scale_max": s.double().max().item(),
                   "scale_mean": s.double().mean().item()} for p, l, s in pairs],
        "notes": ["up_proj -> down_proj smoothed by the harness (smoothquant has no linear -> linear pair)"]
        if args.pairs == "both" else [],
    }
    print(json.dumps(line))
    if args.out:
        out = {"norm_weight": transformed["norm_weight"]}
        for n in ("gate_proj", "up_proj", "down_proj"):
            out[f"{n}_scaled"] = transformed[n]
            out[n] = fake_quant.quantize_weight_per_tensor_absmax(transformed[n].clone())
        for k, (_, _, s) in enumerate(pairs):
            out[f"scales_{k}"] = s
        mb.safetensors_np.write(args.out, {k: v.float().contiguous().numpy() for k, v in out.items()},
                                metadata={"algorithm": "smoothquant", "implementation": "smoothquant"})


if __name__ == "__main__":
    main()
