"""Runs Hugging Face transformers' own gpt-oss layers (models/gpt_oss/modeling_gpt_oss.py: GptOssRMSNorm,
GptOssRotaryEmbedding, eager_attention_forward with the sinks, GptOssAttention, GptOssTopKRouter, GptOssExperts,
GptOssMLP, GptOssDecoderLayer) in float64 on a quark make-model checkpoint and writes its logits.

Only the modeling file runs; the rest of transformers (hub, tokenizers, generation) is not installed in the trixie
chroot, so the names the file imports from it are stubbed here, with two that compute: the masks, as
masking_utils builds them for eager attention (causal; sliding: kv_idx > q_idx - sliding_window; finfo.min where
hidden), and ROPE_INIT_FUNCTIONS["yarn"], transcribed from transformers' modeling_rope_utils._compute_yarn_parameters
(v4.56: head_dim, original_max_position_embeddings, truncate). The model's own loop (GptOssModel.forward: embed,
rotary, each layer with its layer type's mask, norm, lm_head) is spelled out below.

Usage (inside the chroot, python3-torch 2.6, python3-safetensors):
  HF_GPT_OSS_MODELING=/path/modeling_gpt_oss.py python3 gpt_oss_hf_reference.py MODEL_DIR IDS OUT
  IDS   windows separated by ';', token ids by ',' (all windows the same length)
  OUT   raw little-endian float64 logits [windows, tokens, vocab]
"""
import importlib.util
import json
import math
import os
import sys
import types

import torch
from safetensors.torch import load_file


def compute_yarn_parameters(config, device, seq_len=None):
    """transformers.modeling_rope_utils._compute_yarn_parameters (v4.56)."""
    base = config.rope_theta
    partial_rotary_factor = getattr(config, "partial_rotary_factor", 1.0)
    head_dim = getattr(config, "head_dim", config.hidden_size // config.num_attention_heads)
    dim = int(head_dim * partial_rotary_factor)
    factor = config.rope_scaling["factor"]
    attention_factor = config.rope_scaling.get("attention_factor")
    mscale = config.rope_scaling.get("mscale")
    mscale_all_dim = config.rope_scaling.get("mscale_all_dim")
    if "original_max_position_embeddings" in config.rope_scaling:
        original_max_position_embeddings = config.rope_scaling["original_max_position_embeddings"]
        factor = config.max_position_embeddings / original_max_position_embeddings
    else:
        original_max_position_embeddings = config.max_position_embeddings

    def get_mscale(scale, mscale=1):
        if scale <= 1:
            return 1.0
        return 0.1 * mscale * math.log(scale) + 1.0

    if attention_factor is None:
        if mscale and mscale_all_dim:
            attention_factor = float(get_mscale(factor, mscale) / get_mscale(factor, mscale_all_dim))
        else:
            attention_factor = get_mscale(factor)
    beta_fast = config.rope_scaling.get("beta_fast") or 32
    beta_slow = config.rope_scaling.get("beta_slow") or 1

    def find_correction_dim(num_rotations, dim, base, max_position_embeddings):
        return (dim * math.log(max_position_embeddings / (num_rotations * 2 * math.pi))) / (2 * math.log(base))

    def find_correction_range(low_rot, high_rot, dim, base, max_position_embeddings, truncate):
        low = find_correction_dim(low_rot, dim, base, max_position_embeddings)
        high = find_correction_dim(high_rot, dim, base, max_position_embeddings)
        if truncate:
            low = math.floor(low)
            high = math.ceil(high)
        return max(low, 0), min(high, dim - 1)

    def linear_ramp_factor(min, max, dim):
        if min == max:
            max += 0.001
        linear_func = (torch.arange(dim, dtype=torch.float32) - min) / (max - min)
        return torch.clamp(linear_func, 0, 1)

    pos_freqs = base ** (torch.arange(0, dim, 2).to(device=device, dtype=torch.float) / dim)
    inv_freq_extrapolation = 1.0 / pos_freqs
    inv_freq_interpolation = 1.0 / (factor * pos_freqs)
    truncate = config.rope_scaling.get("truncate", True)
    low, high = find_correction_range(beta_fast, beta_slow, dim, base, original_max_position_embeddings, truncate)
    inv_freq_extrapolation_factor = 1 - linear_ramp_factor(low, high, dim // 2).to(device=device, dtype=torch.float)
    inv_freq = (
        inv_freq_interpolation * (1 - inv_freq_extrapolation_factor)
        + inv_freq_extrapolation * inv_freq_extrapolation_factor
    )
    return inv_freq, attention_factor


def identity_decorator(*args, **kwargs):
    if len(args) == 1 and callable(args[0]) and not kwargs:
        return args[0]
    return lambda f: f


class Anything:
    def __init__(self, *args, **kwargs):
        pass

    def __class_getitem__(cls, item):
        return cls


def install_stubs():
    names = {
        "transformers": {},
        "transformers.models": {},
        "transformers.models.gpt_oss": {},
        "transformers.cache_utils": {"Cache": Anything, "DynamicCache": Anything},
        "transformers.generation": {"GenerationMixin": Anything},
        "transformers.integrations": {},
        "transformers.integrations.hub_kernels": {"use_kernel_forward_from_hub": identity_decorator},
        "transformers.masking_utils": {"create_causal_mask": None, "create_sliding_window_causal_mask": None},
        "transformers.modeling_layers": {"GenericForSequenceClassification": Anything,
                                         "GenericForTokenClassification": Anything,
                                         "GradientCheckpointingLayer": torch.nn.Module},
        "transformers.modeling_outputs": {"MoeCausalLMOutputWithPast": Anything, "MoeModelOutputWithPast": Anything},
        "transformers.modeling_rope_utils": {"ROPE_INIT_FUNCTIONS": {"yarn": compute_yarn_parameters},
                                             "dynamic_rope_update": identity_decorator},
        "transformers.modeling_utils": {"ALL_ATTENTION_FUNCTIONS": {}, "PreTrainedModel": torch.nn.Module},
        "transformers.processing_utils": {"Unpack": Anything},
        "transformers.utils": {"TransformersKwargs": Anything, "auto_docstring": identity_decorator,
                               "can_return_tuple": identity_decorator},
        "transformers.utils.deprecation": {"deprecate_kwarg": identity_decorator},
        "transformers.utils.generic": {"OutputRecorder": Anything, "check_model_inputs": identity_decorator},
        "transformers.models.gpt_oss.configuration_gpt_oss": {"GptOssConfig": Anything},
    }
    for name, attributes in names.items():
        module = types.ModuleType(name)
        module.__path__ = []
        for key, value in attributes.items():
            setattr(module, key, value)
        sys.modules[name] = module


def load_modeling(path):
    install_stubs()
    name = "transformers.models.gpt_oss.modeling_gpt_oss"
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def masks(config, seq, dtype):
    """masking_utils for eager attention: additive [1, 1, T, T], finfo.min where a key is hidden."""
    q = torch.arange(seq)[:, None]
    kv = torch.arange(seq)[None, :]
    causal = kv <= q
    sliding = causal & (kv > q - config.sliding_window) if config.sliding_window else causal
    hidden = torch.finfo(dtype).min

    def additive(allowed):
        return torch.zeros(allowed.shape, dtype=dtype).masked_fill(~allowed, hidden)[None, None]

    return {"full_attention": additive(causal), "sliding_attention": additive(sliding)}


def main():
    model_dir, ids_text, out_path = sys.argv[1], sys.argv[2], sys.argv[3]
    hf = load_modeling(os.environ["HF_GPT_OSS_MODELING"])
    with open(os.path.join(model_dir, "config.json")) as f:
        raw = json.load(f)
    config = types.SimpleNamespace(**raw)
    config._attn_implementation = "eager"
    config.attention_dropout = raw.get("attention_dropout", 0.0)
    weights = {}
    for name in sorted(os.listdir(model_dir)):
        if name.endswith(".safetensors"):
            weights.update(load_file(os.path.join(model_dir, name)))
    dtype = torch.float64
    torch.set_grad_enabled(False)
    layers = []
    for i in range(config.num_hidden_layers):
        layer = hf.GptOssDecoderLayer(config, i)
        # The HF expert's clamp and gain are its constants; the checkpoint's config must agree (quark reads them).
        assert layer.mlp.experts.alpha == raw["swiglu_alpha"] and layer.mlp.experts.limit == raw["swiglu_limit"]
        prefix = f"model.layers.{i}."
        state = {k[len(prefix):]: v for k, v in weights.items() if k.startswith(prefix)}
        layer.load_state_dict(state, strict=True)
        layers.append(layer.to(dtype).eval())
    rotary = hf.GptOssRotaryEmbedding(config)
    norm = hf.GptOssRMSNorm(config.hidden_size, eps=config.rms_norm_eps)
    norm.load_state_dict({"weight": weights["model.norm.weight"]})
    norm = norm.to(dtype)
    embed = weights["model.embed_tokens.weight"].to(dtype)
    head = weights["model.embed_tokens.weight" if raw.get("tie_word_embeddings") else "lm_head.weight"].to(dtype)
    windows = [[int(t) for t in w.split(",")] for w in ids_text.split(";")]
    ids = torch.tensor(windows, dtype=torch.long)
    hidden = embed[ids]
    position_ids = torch.arange(ids.shape[1])[None]
    position_embeddings = rotary(hidden, position_ids)
    mask = masks(config, ids.shape[1], dtype)
    for layer in layers:
        hidden = layer(hidden, attention_mask=mask[layer.attention_type], position_ids=position_ids,
                       position_embeddings=position_embeddings)
    logits = torch.nn.functional.linear(norm(hidden), head)
    with open(out_path, "wb") as f:
        f.write(logits.contiguous().numpy().astype("<f8").tobytes())
    print(f"wrote {out_path}: logits {list(logits.shape)}, |logits| max {logits.abs().max().item():.4f}")


if __name__ == "__main__":
    main()
