#!/usr/bin/env python3
"""A float64 NumPy port of Hugging Face's DeepseekV3ForCausalLM forward (transformers'
models/deepseek_v3/modeling_deepseek_v3.py: DeepseekV3RMSNorm, DeepseekV3RotaryEmbedding with
_compute_yarn_parameters, apply_rotary_pos_emb_interleave, DeepseekV3Attention, DeepseekV3TopkRouter,
DeepseekV3MoE, DeepseekV3MLP, first_k_dense_replace; the MTP layers ignored as _keys_to_ignore_on_load_unexpected).
Written standalone because the Debian chroot this runs in has NumPy but neither torch nor transformers.

Usage: deepseek_v3_reference.py MODEL_DIR IDS OUT
  MODEL_DIR  a folder with config.json and F32/F64 safetensors (quark make-model --arch deepseek_v3 --dtype f32)
  IDS        windows separated by ';', token ids by ',' (all windows the same length)
  OUT        raw little-endian float64 logits [windows, tokens, vocab]
"""
import json
import math
import os
import sys

import numpy as np


def load_safetensors(model_dir):
    tensors = {}
    for name in sorted(os.listdir(model_dir)):
        if not name.endswith(".safetensors"):
            continue
        with open(os.path.join(model_dir, name), "rb") as f:
            data = f.read()
        size = int.from_bytes(data[:8], "little")
        header = json.loads(data[8:8 + size])
        base = 8 + size
        for key, info in header.items():
            if key == "__metadata__":
                continue
            dtype = {"F32": np.float32, "F64": np.float64}[info["dtype"]]
            start, end = info["data_offsets"]
            tensors[key] = np.frombuffer(data[base + start:base + end], dtype=dtype).reshape(info["shape"]).astype(np.float64)
    return tensors


def rms_norm(x, w, eps):
    return w * (x / np.sqrt((x * x).mean(-1, keepdims=True) + eps))


def silu(x):
    return x / (1.0 + np.exp(-x))


def linear(x, w):
    return x @ w.T


def yarn_get_mscale(scale=1.0, mscale=1.0):
    return 1.0 if scale <= 1 else 0.1 * mscale * math.log(scale) + 1.0


def rope_parameters(cfg):
    """_compute_default_rope_parameters / _compute_yarn_parameters with dim = qk_rope_head_dim (HF's head_dim)."""
    base, dim = cfg["rope_theta"], cfg["qk_rope_head_dim"]
    pos_freqs = base ** (np.arange(0, dim, 2, dtype=np.float64) / dim)
    rs = cfg.get("rope_scaling")
    if not rs:
        return 1.0 / pos_freqs, 1.0
    factor = rs["factor"]
    original = rs.get("original_max_position_embeddings") or cfg["max_position_embeddings"]
    if "original_max_position_embeddings" in rs:
        factor = cfg["max_position_embeddings"] / original
    mscale, mscale_all_dim = rs.get("mscale"), rs.get("mscale_all_dim")
    attention_factor = rs.get("attention_factor")
    if attention_factor is None:
        if mscale and mscale_all_dim:
            attention_factor = yarn_get_mscale(factor, mscale) / yarn_get_mscale(factor, mscale_all_dim)
        else:
            attention_factor = yarn_get_mscale(factor)
    beta_fast, beta_slow = rs.get("beta_fast") or 32, rs.get("beta_slow") or 1

    def correction_dim(rotations):
        return (dim * math.log(original / (rotations * 2 * math.pi))) / (2 * math.log(base))

    low, high = correction_dim(beta_fast), correction_dim(beta_slow)
    if rs.get("truncate", True):
        low, high = math.floor(low), math.ceil(high)
    low, high = max(low, 0), min(high, dim - 1)
    if low == high:
        high += 0.001
    ramp = np.clip((np.arange(dim // 2, dtype=np.float64) - low) / (high - low), 0, 1)
    extrapolation_factor = 1 - ramp
    inv_freq = (1.0 / (factor * pos_freqs)) * (1 - extrapolation_factor) + (1.0 / pos_freqs) * extrapolation_factor
    return inv_freq, attention_factor


def rotate_half(x):
    half = x.shape[-1] // 2
    return np.concatenate([-x[..., half:], x[..., :half]], axis=-1)


def deinterleave(x):
    d = x.shape[-1]
    return x.reshape(*x.shape[:-1], d // 2, 2).swapaxes(-1, -2).reshape(x.shape)


def attention(cfg, w, p, x, cos, sin):
    T = x.shape[0]
    H, nope, rope, vd, kvr = (cfg["num_attention_heads"], cfg["qk_nope_head_dim"], cfg["qk_rope_head_dim"],
                              cfg["v_head_dim"], cfg["kv_lora_rank"])
    qk = nope + rope
    if cfg.get("q_lora_rank"):
        q = linear(rms_norm(linear(x, w[p + "q_a_proj.weight"]), w[p + "q_a_layernorm.weight"], cfg["rms_norm_eps"]),
                   w[p + "q_b_proj.weight"])
    else:
        q = linear(x, w[p + "q_proj.weight"])
    q = q.reshape(T, H, qk).transpose(1, 0, 2)
    q_pass, q_rot = q[..., :nope], q[..., nope:]
    ckv = linear(x, w[p + "kv_a_proj_with_mqa.weight"])
    k_pass, k_rot = ckv[:, :kvr], ckv[:, kvr:]
    kv = linear(rms_norm(k_pass, w[p + "kv_a_layernorm.weight"], cfg["rms_norm_eps"]), w[p + "kv_b_proj.weight"])
    kv = kv.reshape(T, H, nope + vd).transpose(1, 0, 2)
    k_pass, value = kv[..., :nope], kv[..., nope:]
    k_rot = k_rot[None]
    if cfg.get("rope_interleave", True):
        q_rot, k_rot = deinterleave(q_rot), deinterleave(k_rot)
    q_rot = q_rot * cos + rotate_half(q_rot) * sin
    k_rot = np.broadcast_to(k_rot * cos + rotate_half(k_rot) * sin, (H, T, rope))
    query = np.concatenate([q_pass, q_rot], -1)
    key = np.concatenate([k_pass, k_rot], -1)
    scaling = qk ** -0.5
    rs = cfg.get("rope_scaling")
    if rs and rs.get("mscale_all_dim"):
        m = yarn_get_mscale(rs["factor"], rs["mscale_all_dim"])
        scaling = scaling * m * m
    scores = query @ key.transpose(0, 2, 1) * scaling
    scores = scores + np.triu(np.full((T, T), -np.inf), 1)
    scores = np.exp(scores - scores.max(-1, keepdims=True))
    probs = scores / scores.sum(-1, keepdims=True)
    out = (probs @ value).transpose(1, 0, 2).reshape(T, H * vd)
    return linear(out, w[p + "o_proj.weight"])


def mlp(w, p, x):
    return linear(silu(linear(x, w[p + "gate_proj.weight"])) * linear(x, w[p + "up_proj.weight"]), w[p + "down_proj.weight"])


def moe(cfg, w, p, x):
    E, G, TG, K = cfg["n_routed_experts"], cfg["n_group"], cfg["topk_group"], cfg["num_experts_per_tok"]
    scores = 1.0 / (1.0 + np.exp(-linear(x, w[p + "gate.weight"])))
    choice = scores + w[p + "gate.e_score_correction_bias"][None]
    grouped = choice.reshape(-1, G, E // G)
    group_scores = np.sort(grouped, -1)[..., -2:].sum(-1)
    out = np.zeros_like(x)
    for t in range(x.shape[0]):
        groups = np.argsort(-group_scores[t], kind="stable")[:TG]
        keep = np.zeros(E, dtype=bool)
        for g in groups:
            keep[g * (E // G):(g + 1) * (E // G)] = True
        masked = np.where(keep, choice[t], 0.0)
        chosen = np.argsort(-masked, kind="stable")[:K]
        weights = scores[t, chosen]
        if cfg.get("norm_topk_prob", True):
            weights = weights / (weights.sum() + 1e-20)
        weights = weights * cfg["routed_scaling_factor"]
        for e, wt in zip(chosen, weights):
            out[t] += wt * mlp(w, f"{p}experts.{e}.", x[t:t + 1])[0]
    return out + mlp(w, p + "shared_experts.", x)


def forward(cfg, w, ids):
    eps = cfg["rms_norm_eps"]
    T = len(ids)
    inv_freq, attention_factor = rope_parameters(cfg)
    angles = np.outer(np.arange(T, dtype=np.float64), inv_freq)
    angles = np.concatenate([angles, angles], -1)
    cos, sin = np.cos(angles) * attention_factor, np.sin(angles) * attention_factor
    h = w["model.embed_tokens.weight"][ids]
    for i in range(cfg["num_hidden_layers"]):
        p = f"model.layers.{i}."
        h = h + attention(cfg, w, p + "self_attn.", rms_norm(h, w[p + "input_layernorm.weight"], eps), cos, sin)
        n = rms_norm(h, w[p + "post_attention_layernorm.weight"], eps)
        h = h + (moe(cfg, w, p + "mlp.", n) if i >= cfg.get("first_k_dense_replace", 0) else mlp(w, p + "mlp.", n))
    h = rms_norm(h, w["model.norm.weight"], eps)
    head = w["model.embed_tokens.weight"] if cfg.get("tie_word_embeddings") else w["lm_head.weight"]
    return linear(h, head)


def main():
    model_dir, ids_text, out_path = sys.argv[1:4]
    with open(os.path.join(model_dir, "config.json")) as f:
        cfg = json.load(f)
    weights = load_safetensors(model_dir)
    windows = [[int(t) for t in window.split(",")] for window in ids_text.split(";")]
    logits = np.stack([forward(cfg, weights, np.array(ids)) for ids in windows])
    logits.astype("<f8").tofile(out_path)
    print(f"wrote {logits.shape} float64 logits to {out_path}")


if __name__ == "__main__":
    main()
