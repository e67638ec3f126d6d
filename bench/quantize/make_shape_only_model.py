#!/usr/bin/env python3
"""A Llama-shaped HF folder whose safetensors holds the header and no data (a sparse file of the right size): what
estimate_bench needs to estimate a model nobody can store here (the 70B shape), with --extrapolate-layers for depth.

  make_shape_only_model.py --shape llama-2-70b|llama-2-7b --layers 1 --out DIR
"""
import argparse, json, os, struct

SHAPES = {
    "llama-2-7b": dict(hidden_size=4096, intermediate_size=11008, num_attention_heads=32, num_key_value_heads=32),
    "llama-2-70b": dict(hidden_size=8192, intermediate_size=28672, num_attention_heads=64, num_key_value_heads=8),
}

def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--shape", required=True, choices=sorted(SHAPES))
    ap.add_argument("--layers", type=int, default=1)
    ap.add_argument("--out", required=True)
    a = ap.parse_args()
    s = SHAPES[a.shape]
    h, m, heads, kv = s["hidden_size"], s["intermediate_size"], s["num_attention_heads"], s["num_key_value_heads"]
    vocab, head_dim = 32000, h // heads
    config = dict(architectures=["LlamaForCausalLM"], model_type="llama", vocab_size=vocab, max_position_embeddings=4096,
                  num_hidden_layers=a.layers, rms_norm_eps=1e-5, rope_theta=10000.0, tie_word_embeddings=False,
                  torch_dtype="bfloat16", hidden_act="silu", **s)
    tensors = [("model.embed_tokens.weight", [vocab, h])]
    for i in range(a.layers):
        p = f"model.layers.{i}."
        tensors += [(p + "self_attn.q_proj.weight", [h, h]), (p + "self_attn.k_proj.weight", [kv * head_dim, h]),
                    (p + "self_attn.v_proj.weight", [kv * head_dim, h]), (p + "self_attn.o_proj.weight", [h, h]),
                    (p + "mlp.gate_proj.weight", [m, h]), (p + "mlp.up_proj.weight", [m, h]),
                    (p + "mlp.down_proj.weight", [h, m]), (p + "input_layernorm.weight", [h]),
                    (p + "post_attention_layernorm.weight", [h])]
    tensors += [("model.norm.weight", [h]), ("lm_head.weight", [vocab, h])]
    header, offset = {}, 0
    for name, shape in tensors:
        n = 2
        for d in shape:
            n *= d
        header[name] = dict(dtype="BF16", shape=shape, data_offsets=[offset, offset + n])
        offset += n
    raw = json.dumps(header, separators=(",", ":")).encode()
    raw += b" " * (-len(raw) % 8)
    os.makedirs(a.out, exist_ok=True)
    with open(os.path.join(a.out, "config.json"), "w") as f:
        json.dump(config, f, indent=1)
    path = os.path.join(a.out, "model.safetensors")
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(raw)) + raw)
        f.truncate(8 + len(raw) + offset)  # sparse: no data written
    print(f"wrote {a.out}: {a.shape}, {a.layers} layer(s), {offset / 1e9:.2f} GB of tensors (sparse)")

if __name__ == "__main__":
    main()
