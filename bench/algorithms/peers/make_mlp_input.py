#!/usr/bin/python3
"""Makes a seeded random Llama MLP block for the AWQ / SmoothQuant side-by-side benchmark.

    /usr/bin/python3 bench/algorithms/peers/make_mlp_input.py --hidden 4096 --intermediate 11008 --tokens 2048 \
        --seed 0 --out mlp-7b.safetensors

Writes float32 `norm_weight` [H], `gate_proj` [I, H], `up_proj` [I, H], `down_proj` [H, I] and `inputs` [T, H]
(hidden states before post_attention_layernorm), the block `algo_bench awq|smoothquant` and the peers read. A block
from a trained model, with the model's own hidden states, comes from `algo_bench dump-mlp` instead.

Plain Gaussians would give AWQ and SmoothQuant nothing to do, so the block has what trained Llama layers have: a
residual stream with a few massive outlier channels (50-200x) and a log-normal spread of channel scales, a norm
weight that varies per channel (and damps the outlier channels a little), weights with a spread of column and row
scales. Real hidden states are also shared across channels; a low-rank component gives that.
"""

import argparse
import os
import sys

import torch

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import safetensors_np  # noqa: E402


def make_block(hidden, intermediate, tokens, seed):
    gen = torch.Generator().manual_seed(seed)
    rank = min(32, hidden)
    x = torch.randn(tokens, hidden, generator=gen) + 0.5 * (
        torch.randn(tokens, rank, generator=gen) @ (torch.randn(rank, hidden, generator=gen) / rank**0.5))
    channel = torch.exp(0.5 * torch.randn(hidden, generator=gen))
    outliers = torch.randperm(hidden, generator=gen)[: max(2, hidden // 512)]
    channel[outliers] *= 50.0 + 150.0 * torch.rand(len(outliers), generator=gen)
    x = x * channel * 0.05

    norm = (0.3 + 0.4 * torch.rand(hidden, generator=gen)) * torch.exp(0.3 * torch.randn(hidden, generator=gen))
    norm[outliers] *= 0.2

    def weight(rows, cols):
        w = torch.randn(rows, cols, generator=gen) * (0.5 / cols**0.5)
        w *= torch.exp(0.3 * torch.randn(rows, 1, generator=gen))
        w *= torch.exp(0.3 * torch.randn(1, cols, generator=gen))
        return w

    return {"norm_weight": norm, "gate_proj": weight(intermediate, hidden), "up_proj": weight(intermediate, hidden),
            "down_proj": weight(hidden, intermediate), "inputs": x}


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--hidden", type=int, default=4096)
    parser.add_argument("--intermediate", type=int, default=11008)
    parser.add_argument("--tokens", type=int, default=2048)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", required=True)
    args = parser.parse_args()
    for name in ("hidden", "intermediate", "tokens"):
        if getattr(args, name) <= 0:
            parser.error(f"--{name} must be positive, got {getattr(args, name)}")
    block = make_block(args.hidden, args.intermediate, args.tokens, args.seed)
    safetensors_np.write(args.out, {k: v.float().contiguous().numpy() for k, v in block.items()},
                         metadata={"generator": "make_mlp_input.py", "seed": args.seed})
    print(f"wrote {args.out}: H {args.hidden}, I {args.intermediate}, T {args.tokens}, seed {args.seed}")


if __name__ == "__main__":
    main()
