"""Logits of Hugging Face's own Llama4ForCausalLM (modeling_llama4.py, read from HF_LLAMA4_MODELING) on a model folder
that `quark make-model --arch llama4` wrote, for tests/runtime/llama4_test.cc.

transformers itself is not installed where this runs (the Debian trixie chroot: python3-torch 2.6, safetensors), so
the modeling file is loaded as transformers.models.llama4.modeling_llama4 beside small stand-ins for the modules it
imports. What the stand-ins compute: ACT2FN["silu"], the Llama 3 inverse frequencies (HF's
_compute_llama3_parameters, float32) and the two masks (HF masking_utils' causal mask and its chunked overlay, query i
sees key j when j <= i and i // attention_chunk_size == j // attention_chunk_size, as eager float masks with the dtype's
minimum). Everything else (routing, experts, shared expert, RoPE, QK norm, temperature tuning, attention, norms) is
HF's code. The per-expert linears of the checkpoint are fused into HF's Llama4TextExperts parameters
(gate_up_proj[e] = [gate^T | up^T], down_proj[e] = down^T).

Usage: python3 hf_llama4_reference.py MODEL_DIR OUT.f64 [float32|float64]
Writes the logits of the two windows (tokens (i * 7919 + 13 + w * 101) % vocab, i < 16) as float64 [2, 16, vocab].
"""
import contextlib
import importlib.util
import json
import math
import os
import sys
import types
import typing

import torch
from safetensors.torch import load_file


def module(name, **attrs):
    m = types.ModuleType(name)
    m.__path__ = []  # a package, so that submodules and relative imports resolve
    m.__dict__.update(attrs)
    sys.modules[name] = m
    parent, _, child = name.rpartition(".")
    if parent:
        setattr(sys.modules[parent], child, m)
    return m


def identity_decorator(*args, **kwargs):
    if len(args) == 1 and callable(args[0]) and not kwargs:
        return args[0]
    return lambda f: f


class ModelOutput(dict):
    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.__dict__.update(kwargs)

    def __getattr__(self, name):  # HF's outputs answer None for a field not set
        if name.startswith("__"):
            raise AttributeError(name)
        return None

    def __getitem__(self, key):
        if isinstance(key, int):
            return [v for v in self.values() if v is not None][key]
        return super().__getitem__(key)


class PreTrainedModel(torch.nn.Module):
    def __init__(self, config, *args, **kwargs):
        super().__init__()
        self.config = config

    def post_init(self):
        pass


def llama3_inv_freq(config, device=None, seq_len=None):
    # HF modeling_rope_utils._compute_llama3_parameters.
    p = config.rope_parameters
    base, dim = p["rope_theta"], config.head_dim
    inv_freq = 1.0 / (base ** (torch.arange(0, dim, 2, dtype=torch.int64).to(device=device, dtype=torch.float) / dim))
    factor, low, high = p["factor"], p["low_freq_factor"], p["high_freq_factor"]
    old_context_len = p["original_max_position_embeddings"]
    low_freq_wavelen, high_freq_wavelen = old_context_len / low, old_context_len / high
    wavelen = 2 * math.pi / inv_freq
    inv_freq_llama = torch.where(wavelen > low_freq_wavelen, inv_freq / factor, inv_freq)
    smooth_factor = (old_context_len / wavelen - low) / (high - low)
    smoothed_inv_freq = (1 - smooth_factor) * inv_freq_llama / factor + smooth_factor * inv_freq_llama
    is_medium_freq = ~(wavelen < high_freq_wavelen) * ~(wavelen > low_freq_wavelen)
    return torch.where(is_medium_freq, smoothed_inv_freq, inv_freq_llama), 1.0


def eager_mask(input_embeds, visible):
    t = input_embeds.shape[1]
    q = torch.arange(t).view(t, 1)
    k = torch.arange(t).view(1, t)
    allowed = visible(q, k)
    mask = torch.zeros(t, t, dtype=input_embeds.dtype)
    mask.masked_fill_(~allowed, torch.finfo(input_embeds.dtype).min)
    return mask.view(1, 1, t, t)


def create_causal_mask(config, input_embeds, **kwargs):
    return eager_mask(input_embeds, lambda q, k: k <= q)


def create_chunked_causal_mask(config, input_embeds, **kwargs):
    c = config.attention_chunk_size
    return eager_mask(input_embeds, lambda q, k: (k <= q) & (torch.div(q, c, rounding_mode="floor") == torch.div(k, c, rounding_mode="floor")))


def install_stand_ins():
    module("transformers")
    module("transformers.models")
    module("transformers.models.llama4")
    module("transformers.models.llama4.configuration_llama4", Llama4VisionConfig=object, Llama4Config=object,
           Llama4TextConfig=object)
    module("transformers.initialization", normal_=torch.nn.init.normal_)
    module("transformers.activations", ACT2FN={"silu": torch.nn.SiLU()})
    module("transformers.cache_utils", Cache=object, DynamicCache=object)
    module("transformers.generation", GenerationMixin=object)
    module("transformers.integrations", use_kernel_forward_from_hub=lambda name: (lambda cls: cls))
    module("transformers.masking_utils", create_causal_mask=create_causal_mask,
           create_chunked_causal_mask=create_chunked_causal_mask)
    kwargs_type = typing.TypedDict("Kwargs", {}, total=False)
    module("transformers.modeling_flash_attention_utils", FlashAttentionKwargs=kwargs_type)
    module("transformers.modeling_layers", GradientCheckpointingLayer=torch.nn.Module)
    module("transformers.modeling_outputs", BaseModelOutput=ModelOutput, BaseModelOutputWithPast=ModelOutput,
           CausalLMOutputWithPast=ModelOutput, ModelOutput=ModelOutput)
    module("transformers.modeling_rope_utils", ROPE_INIT_FUNCTIONS={"llama3": llama3_inv_freq},
           dynamic_rope_update=identity_decorator)
    module("transformers.modeling_utils", ALL_ATTENTION_FUNCTIONS={}, PreTrainedModel=PreTrainedModel)
    module("transformers.processing_utils", Unpack=typing.Unpack)
    import logging
    module("transformers.utils", TransformersKwargs=kwargs_type, auto_docstring=identity_decorator,
           can_return_tuple=identity_decorator, logging=types.SimpleNamespace(get_logger=logging.getLogger))
    module("transformers.utils.generic", check_model_inputs=identity_decorator,
           maybe_autocast=lambda **kwargs: contextlib.nullcontext())


def load_modeling(path):
    install_stand_ins()
    name = "transformers.models.llama4.modeling_llama4"
    spec = importlib.util.spec_from_file_location(name, path)
    m = importlib.util.module_from_spec(spec)
    m.__package__ = "transformers.models.llama4"
    sys.modules[name] = m
    spec.loader.exec_module(m)
    return m


def text_config(model_dir):
    with open(os.path.join(model_dir, "config.json")) as f:
        raw = json.load(f)
    assert raw["model_type"] == "llama4_text", raw["model_type"]
    c = types.SimpleNamespace(**raw)
    c._attn_implementation = "eager"
    c.pad_token_id = raw.get("pad_token_id")
    c.attention_dropout = raw.get("attention_dropout", 0.0)
    c.initializer_range = 0.02
    scaling = raw.get("rope_scaling") or {}
    c.rope_parameters = dict(scaling, rope_theta=raw["rope_theta"], rope_type=scaling.get("rope_type", "default"))
    return c


def state_dict(model_dir, config):
    tensors = {}
    for name in sorted(os.listdir(model_dir)):
        if name.endswith(".safetensors"):
            tensors.update(load_file(os.path.join(model_dir, name)))
    out = {}
    for layer in range(config.num_hidden_layers):
        p = f"model.layers.{layer}.feed_forward.experts."
        if layer not in config.moe_layers:
            continue
        gate_up, down = [], []
        for e in range(config.num_local_experts):
            gate = tensors.pop(f"{p}{e}.gate_proj.weight")
            up = tensors.pop(f"{p}{e}.up_proj.weight")
            gate_up.append(torch.cat([gate.t(), up.t()], dim=1))
            down.append(tensors.pop(f"{p}{e}.down_proj.weight").t())
        out[p + "gate_up_proj"] = torch.stack(gate_up)
        out[p + "down_proj"] = torch.stack(down)
    out.update(tensors)
    if config.tie_word_embeddings:
        out["lm_head.weight"] = out["model.embed_tokens.weight"]
    return out


def main():
    model_dir, out_path = sys.argv[1], sys.argv[2]
    dtype = getattr(torch, sys.argv[3] if len(sys.argv) > 3 else "float32")
    modeling = load_modeling(os.environ["HF_LLAMA4_MODELING"])
    config = text_config(model_dir)
    model = modeling.Llama4ForCausalLM(config)
    model.load_state_dict(state_dict(model_dir, config), strict=True)
    model = model.to(dtype).eval()
    vocab = config.vocab_size
    ids = torch.tensor([[(i * 7919 + 13 + w * 101) % vocab for i in range(16)] for w in range(2)])
    with torch.no_grad():
        logits = model(input_ids=ids).logits
    logits.to(torch.float64).contiguous().numpy().tofile(out_path)
    print(f"wrote {out_path}: logits {tuple(logits.shape)} {dtype}, max |logit| {logits.abs().max().item():.4f}")


if __name__ == "__main__":
    main()
