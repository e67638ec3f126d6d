#!/usr/bin/python3
"""Makes a seeded test layer for the GPTQ side-by-side benchmark.

    /usr/bin/python3 bench/algorithms/peers/make_gptq_input.py --n N --k K --tokens T --seed S --out IN.safetensors

Writes float32 `weight` [N, K] and calibration `inputs` [T, K]. Plain i.i.d. Gaussians make a poor GPTQ test: with a
near-diagonal Hessian GPTQ has nothing to propagate and degenerates to round-to-nearest. So the activations get what
real LLM activations have: correlated channels (a low-rank shared component), channel scales spread over an order of
magnitude, and a few outlier channels 10-50x larger; the weight gets a few larger input columns.
"""

import argparse
import os
import sys

import torch

# No __pycache__ inside the source tree (this script's helpers), nor inside the peer checkouts.
sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import safetensors_np  # noqa: E402


def make_layer(n, k, tokens, seed):
    gen = torch.Generator().manual_seed(seed)
    torch.manual_seed(seed)

    weight = torch.randn(n, k, generator=gen) * 0.02
    # A few input columns with 3-8x larger weights, as seen after norms fold into linear layers.
    n_big_cols = max(1, k // 128)
    big_cols = torch.randperm(k, generator=gen)[:n_big_cols]
    weight[:, big_cols] *= 3.0 + 5.0 * torch.rand(n_big_cols, generator=gen)

    # Shared low-rank component: makes the Hessian strongly non-diagonal, which is what GPTQ exploits.
    rank = min(32, k)
    mixing = torch.randn(rank, k, generator=gen) / rank**0.5
    inputs = 0.6 * torch.randn(tokens, k, generator=gen) + 0.8 * torch.randn(tokens, rank, generator=gen) @ mixing
    # Small per-channel offsets: real activations are not zero-mean.
    inputs += 0.1 * torch.randn(k, generator=gen)

    # Per-channel scales spread over ~an order of magnitude (log-normal), plus outlier channels at 10-50x.
    channel_scale = torch.exp(0.6 * torch.randn(k, generator=gen))
    n_outliers = max(2, k // 256)
    outliers = torch.randperm(k, generator=gen)[:n_outliers]
    channel_scale[outliers] *= 10.0 + 40.0 * torch.rand(n_outliers, generator=gen)
    inputs *= channel_scale

    return weight.float().contiguous(), inputs.float().contiguous()


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--n", type=int, required=True, help="output features (rows of weight)")
    parser.add_argument("--k", type=int, required=True, help="input features (columns of weight)")
    parser.add_argument("--tokens", type=int, required=True, help="calibration tokens (rows of inputs)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", required=True, help="output .safetensors path")
    args = parser.parse_args()
    for name in ("n", "k", "tokens"):
        if getattr(args, name) <= 0:
            parser.error(f"--{name} must be positive, got {getattr(args, name)}")

    weight, inputs = make_layer(args.n, args.k, args.tokens, args.seed)
    safetensors_np.write(
        args.out,
        {"weight": weight.numpy(), "inputs": inputs.numpy()},
        metadata={"generator": "make_gptq_input.py", "seed": args.seed},
    )
    print(f"wrote {args.out}: weight {list(weight.shape)}, inputs {list(inputs.shape)}, seed {args.seed}")


if __name__ == "__main__":
    main()
