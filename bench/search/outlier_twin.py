#!/usr/bin/env python3
"""Writes the outlier twin of a float32 Llama-family HF folder (#36's comparison model).

In every decoder layer a few channels of input_layernorm and post_attention_layernorm are multiplied by a factor in
[40, 100] and the matching input columns of the linears that read them (q/k/v and gate/up) are divided by the same
factor: the float model computes the same function (up to rounding), but those channels' activations are 40-100x
larger, as the outlier channels of real LLMs are, which is what per-tensor activation quantization and small-group
weight quantization are sensitive to. Standard library only (no numpy): the fixture models are small.

usage: outlier_twin.py SRC_DIR DST_DIR [--channels 4] [--seed 36]
"""
import argparse
import array
import json
import os
import random
import shutil
import struct
import sys

READERS = {"input_layernorm": ("self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj"),
           "post_attention_layernorm": ("mlp.gate_proj", "mlp.up_proj")}


def read_safetensors(path):
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(n))
        data = f.read()
    tensors = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        if info["dtype"] != "F32":
            sys.exit(f"{path}: {name} is {info['dtype']}; only float32 models are supported")
        begin, end = info["data_offsets"]
        values = array.array("f")
        values.frombytes(data[begin:end])
        tensors[name] = (info["shape"], values)
    return header.get("__metadata__", {}), tensors


def write_safetensors(path, metadata, tensors):
    header, offset, blobs = {"__metadata__": metadata}, 0, []
    for name, (shape, values) in tensors.items():
        blob = values.tobytes()
        header[name] = {"dtype": "F32", "shape": shape, "data_offsets": [offset, offset + len(blob)]}
        offset += len(blob)
        blobs.append(blob)
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * ((8 - len(text) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)))
        f.write(text)
        for blob in blobs:
            f.write(blob)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("src")
    parser.add_argument("dst")
    parser.add_argument("--channels", type=int, default=4, help="outlier channels per norm")
    parser.add_argument("--seed", type=int, default=36)
    args = parser.parse_args()
    files = [f for f in os.listdir(args.src) if f.endswith(".safetensors")]
    if len(files) != 1:
        sys.exit(f"{args.src}: expected one .safetensors file, found {len(files)}")
    metadata, tensors = read_safetensors(os.path.join(args.src, files[0]))
    rng = random.Random(args.seed)
    layers = sorted({int(n.split(".")[2]) for n in tensors if n.startswith("model.layers.")})
    for layer in layers:
        prefix = f"model.layers.{layer}."
        for norm, readers in READERS.items():
            shape, w = tensors[prefix + norm + ".weight"]
            for c in rng.sample(range(shape[0]), args.channels):
                s = rng.uniform(40.0, 100.0)
                w[c] *= s
                for reader in readers:
                    (rows, cols), m = tensors[prefix + reader + ".weight"]
                    for r in range(rows):
                        m[r * cols + c] /= s
    os.makedirs(args.dst, exist_ok=True)
    for f in os.listdir(args.src):
        if not f.endswith(".safetensors"):
            shutil.copy(os.path.join(args.src, f), os.path.join(args.dst, f))
    write_safetensors(os.path.join(args.dst, files[0]), metadata, tensors)
    print(f"wrote {args.dst}: {args.channels} outlier channels x [40, 100] per norm in {len(layers)} layers")


if __name__ == "__main__":
    main()
