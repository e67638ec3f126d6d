#!/usr/bin/python3
"""mit-han-lab/llm-awq's AWQ on one saved Llama MLP block, for comparison with `algo_bench awq`.

    /usr/bin/python3 bench/algorithms/peers/awq_peer.py --repo /tmp/peers/llm-awq --input MLP.safetensors \
        [--bits 4] [--group-size 128] [--eps 1e-5] [--threads N] [--out OUT.safetensors]

What runs is llm-awq's code, loaded from --repo (awq/quantize/auto_scale.py, auto_clip.py, quantizer.py), in the
order of its run_awq for one Llama decoder layer restricted to the MLP: the inputs of every linear recorded by a
forward hook (run_awq's cache_input_hook), the scale search of auto_scale_block for its two MLP pairs
(post_attention_layernorm -> gate/up inspecting mlp, up_proj -> down_proj), apply_scale (which also divides the
recorded inputs), auto_clip_block and apply_clip; then pseudo_quantize_tensor on every weight (its
pseudo_quantize_model_weight). auto_scale_block's pairs are chosen by an isinstance switch over whole decoder
layers, so its two nested functions (_search_module_scale, _auto_get_scale) are taken from its code object and
called with the Llama branch's MLP arguments, unchanged. `.cuda()` is a no-op here (CPU build).

Prints one JSON line: algo_s (the calls above, time.perf_counter; clip_s: auto_clip_block + apply_clip of it),
rel_output_error = |Y - Yq|^2 / |Y|^2 of the block output with llm-awq's quantizer, rtn_rel_output_error
(pseudo_quantize_tensor of the original weights), the same two with Quark's integer numerics (`*_quark_numerics`),
the ratio and scale range per pair, threads. --clip-only N times only auto_clip_layer, on the first N row batches of
each linear, extrapolated to all rows (for blocks where the whole run takes too long).
--out writes the scaled and clipped float weights (*_scaled, norm_weight) and their quantized values.
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
    p.add_argument("--repo", required=True, help="checkout of mit-han-lab/llm-awq")
    p.add_argument("--input", required=True)
    p.add_argument("--bits", type=int, default=4)
    p.add_argument("--group-size", type=int, default=128, help="-1: one group per row")
    p.add_argument("--eps", type=float, default=1e-5, help="RMSNorm eps (Llama-2/3: 1e-5)")
    p.add_argument("--threads", type=int)
    p.add_argument("--out")
    p.add_argument("--clip-only", type=int, metavar="BATCHES",
                   help="only time auto_clip_layer on the first BATCHES output-channel batches of each linear of the "
                        "unscaled block and extrapolate to all rows (its cost is the same for every batch)")
    return p.parse_args()


def nested_functions(outer, env):
    """The functions defined inside `outer`, built from its code object with free variables taken from `env`."""
    outer = getattr(outer, "__wrapped__", outer)  # under @torch.no_grad()
    fns = {}
    for const in outer.__code__.co_consts:
        if isinstance(const, types.CodeType) and const.co_name not in fns:
            fns[const.co_name] = const
    built = {}

    def build(name):
        code = fns[name]
        cells = tuple(types.CellType(env[v] if v in env else build(v)) for v in code.co_freevars)
        built[name] = types.FunctionType(code, outer.__globals__, name, None, cells)
        return built[name]

    return fns, build


def recover_ratio(x_mean, scales, n_grid=20):
    """The grid ratio whose candidate (auto_scale's formula: clamp(x^r, 1e-4) / sqrt(max * min)) is `scales`."""
    errs = []
    for i in range(n_grid):
        c = x_mean.pow(i / n_grid).clamp(min=1e-4).view(-1)
        c = c / (c.max() * c.min()).sqrt()
        errs.append((c - scales).abs().max().item())
    return min(range(n_grid), key=lambda i: errs[i]) / n_grid


@torch.no_grad()
def clip_only(auto_clip, block, x, args):
    """llm-awq's auto_clip_layer on the first batches of rows of each linear; seconds extrapolated to all rows."""
    q_config = {"zero_point": True, "q_group_size": args.group_size}
    normed = block.post_attention_layernorm(x)
    inputs = {"gate_proj": normed, "up_proj": normed,
              "down_proj": torch.nn.functional.silu(block.mlp.gate_proj(normed)) * block.mlp.up_proj(normed)}
    measured, extrapolated = 0.0, 0.0
    for name, inp in inputs.items():
        w = getattr(block.mlp, name).weight
        batch = 256 if w.shape[0] % 256 == 0 else 64  # auto_clip_layer's oc_batch_size
        rows = min(w.shape[0], batch * args.clip_only)
        start = time.perf_counter()
        auto_clip.auto_clip_layer(w[:rows], inp, n_bit=args.bits, q_config=q_config)
        seconds = time.perf_counter() - start
        measured += seconds
        extrapolated += seconds * w.shape[0] / rows
    return {"algorithm": "awq-clip-only", "implementation": "llm-awq", "threads": torch.get_num_threads(),
            "clip_s_measured": measured, "clip_s": extrapolated, "batches_per_linear": args.clip_only}


def main():
    args = parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    # CPU build: llm-awq moves each linear (and the scales) to the GPU and back.
    torch.nn.Module.cuda = lambda self, *a, **k: self
    torch.Tensor.cuda = lambda self, *a, **k: self
    mb.install_transformers_stub()
    quantizer = mb.load_package_module(args.repo, "awq.quantize", "quantizer", stubs=["awq_inference_engine"])
    auto_scale = mb.load_package_module(args.repo, "awq.quantize", "auto_scale")
    auto_clip = mb.load_package_module(args.repo, "awq.quantize", "auto_clip")
    pseudo_quantize_tensor = quantizer.pseudo_quantize_tensor

    tensors, _ = mb.load_block(args.input)
    q_config = {"zero_point": True, "q_group_size": args.group_size}  # llm-awq's entry.py defaults
    block = mb.MlpBlock(tensors, args.eps)
    x = tensors["inputs"].unsqueeze(0)  # [1, T, H]: one sample
    linears = ("gate_proj", "up_proj", "down_proj")

    def quantized_output(weights, quantize):
        q = mb.MlpBlock({**tensors, "norm_weight": weights["norm_weight"],
                         **{n: quantize(weights[n]) for n in linears}}, args.eps)
        return q(x)[0]

    if args.clip_only:
        print(json.dumps(clip_only(auto_clip, block, x, args)))
        return
    with torch.no_grad():
        y = block(x)[0]
        original = block.weights()
        awq_q = lambda w: pseudo_quantize_tensor(w, n_bit=args.bits, **q_config)  # noqa: E731
        group = args.group_size if args.group_size > 0 else None
        quark_q = lambda w: mb.quark_int(w, args.bits, False, False, group or w.shape[1])  # noqa: E731
        rtn = quantized_output(original, awq_q)
        rtn_quark = quantized_output(original, quark_q)

        start = time.perf_counter()
        # run_awq: record every linear's input during the block's forward.
        input_feat = {}
        named_linears = {n: m for n, m in block.named_modules() if isinstance(m, torch.nn.Linear)}
        handles = [m.register_forward_hook(
            lambda m, inp, out, name=n: input_feat.setdefault(name, []).append(inp[0].detach().cpu()))
            for n, m in named_linears.items()]
        block(x)
        for h in handles:
            h.remove()
        input_feat = {k: torch.cat(v, dim=0) for k, v in input_feat.items()}
        # (for the report only: the ratio llm-awq chose is not returned; mean |x| lets us recover it)
        x_means = [input_feat[n].abs().view(-1, input_feat[n].shape[-1]).mean(0)
                   for n in ("mlp.gate_proj", "mlp.down_proj")]
        # auto_scale_block, Llama branch, MLP pairs.
        _, build = nested_functions(auto_scale.auto_scale_block, {
            "module": block, "w_bit": args.bits, "q_config": q_config,
            "pseudo_quantize_tensor": pseudo_quantize_tensor})
        w_quantize_func = build("w_quantize_func")
        _, build = nested_functions(auto_scale.auto_scale_block, {
            "module": block, "w_quantize_func": w_quantize_func, "pseudo_quantize_tensor": pseudo_quantize_tensor})
        auto_get_scale = build("_auto_get_scale")
        scales_list = [
            auto_get_scale(prev_op=block.post_attention_layernorm, layers=[block.mlp.gate_proj, block.mlp.up_proj],
                           inp=input_feat["mlp.gate_proj"], module2inspect=block.mlp, kwargs={}),
            auto_get_scale(prev_op=block.mlp.up_proj, layers=[block.mlp.down_proj],
                           inp=input_feat["mlp.down_proj"], module2inspect=None, kwargs={}),
        ]
        auto_scale.apply_scale(block, scales_list, input_feat_dict=input_feat)
        clip_start = time.perf_counter()
        clip_list = auto_clip.auto_clip_block(block, w_bit=args.bits, q_config=q_config, input_feat=input_feat)
        auto_clip.apply_clip(block, clip_list)
        algo_s = time.perf_counter() - start
        clip_s = time.perf_counter() - clip_start

        transformed = block.weights()
        yq = quantized_output(transformed, awq_q)
        yq_quark = quantized_output(transformed, quark_q)

    pairs = []
    for (prev, layers, scales), x_mean in zip(scales_list, x_means):
        s = scales.double()
        pairs.append({"prev_op": prev, "layers": list(layers), "ratio": recover_ratio(x_mean, scales),
                      "scale_min": s.min().item(),
                      "scale_max": s.max().item(), "scale_mean": s.mean().item()})
    line = {
        "algorithm": "awq", "implementation": "llm-awq",
        "hidden": x.shape[2], "intermediate": tensors["gate_proj"].shape[0], "tokens": x.shape[1],
        "threads": torch.get_num_threads(), "bits": args.bits, "group_size": args.group_size,
        "algo_s": algo_s,
        "clip_s": clip_s,
        "rel_output_error": mb.rel_error(y, yq),
        "rtn_rel_output_error": mb.rel_error(y, rtn),
        "rel_output_error_quark_numerics": mb.rel_error(y, yq_quark),
        "rtn_rel_output_error_quark_numerics": mb.rel_error(y, rtn_quark),
        "pairs": pairs,
    }
    print(json.dumps(line))
    if args.out:
        out = {"norm_weight": transformed["norm_weight"]}
        for n in linears:
            out[f"{n}_scaled"] = transformed[n]
            out[n] = awq_q(transformed[n])
        for k, (_, _, scales) in enumerate(scales_list):
            out[f"scales_{k}"] = scales
        mb.safetensors_np.write(args.out, {k: v.float().contiguous().numpy() for k, v in out.items()},
                                metadata={"algorithm": "awq", "implementation": "llm-awq"})


if __name__ == "__main__":
    main()
