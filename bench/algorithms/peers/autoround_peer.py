"""Intel auto-round's own SignRound on the decoder layer that `algo_bench autoround --save DIR` saved (#35 item 2).

What runs is auto-round's code, read from AUTOROUND_SRC (a checkout of github.com/intel/auto-round; never committed
here): SignRoundQuantizer.quantize_block (algorithms/quantization/sign_round/quantizer.py) with its wrapper_block /
WrapperLinear / unwrapper_block (wrapper.py), get_quant_func and quant_tensor_asym (data_type/utils.py, int.py,
register.py), SignSGD (sign_sgd.py), torch's LinearLR, IndexSampler / collect_best_params / block_forward
(compressors/utils.py), is_nv_fp / BackendDataType (schemes.py), BlockForwardRunner (algorithms/block_runner.py), device_manager (utils/device_manager.py),
setup_ddp_if_needed_ (utils/distributed.py), check_to_quantized / set_module / to_device (utils/model.py), SUPPORTED_LAYER_TYPES
(utils/common.py), is_hpex_available (utils/device.py), prepare_special_model_block_inputs (special_model_handler.py)
and the logger (logger.py, envs.py). Whole files are loaded where their imports allow; otherwise the named
definitions are taken verbatim from the file (ast) into a module of that name ("picked" below).

Stubbed, because quantize_block does not execute them on this path (a float32 Llama block on the CPU, integer weights,
no activation quantization, no LFQ, one process, no torch.compile):
  - the packages' __init__ files (auto_round, .algorithms, .compressors, .data_type, .utils): they import the whole
    library (transformers, export formats, datasets); data_type's only job here, registering int.py's functions, is
    done by loading int.py itself.
  - auto_round.algorithms.quantization.base.BaseQuantizer (a bare base class: its __init__ is not called, the object
    is built with __new__ and given the attributes quantize_block reads), .sign_round.config.SignRoundConfig (only
    the decorator's argument; the lr resolution that runs, compute_lr / compute_minmax_lr, is picked from it),
    auto_round.algorithms.registry.register_pipeline_member (identity decorator).
  - transformers.pytorch_utils.Conv1D (a class no module here is: wrapper.py's type checks compare against it).
  - auto_round.schemes.QuantizationScheme (check_to_quantized's isinstance test: never one here).
  - names that raise if called: compile_func, htcore, mv_module_from_gpu, set_amax_for_all_moe_layers,
    clear_memory_if_reached_threshold, get_reciprocal (imported by int.py, used by other dtypes).
  - compress_context.clear_memory: a no-op (auto-round's frees cached device memory).
Settings: device_manager on "cpu" (its fields as configure("cpu") sets them); the block runner without autocast
(amp False: the layer is float32) and without torch.compile; the loss without autocast (model_context.amp True
selects nullcontext in _get_loss); WrapperLinear on layers marked bits 4, group_size G, sym False, data_type "int",
act_bits 16, scale_dtype float32 (--scale-dtype float16 for auto-round's default). random / torch seeded with --seed
as auto-round's set_seed does.

Usage (trixie chroot, python3-torch 2.6): AUTOROUND_SRC=SRC python3 autoround_peer.py DIR [--iters 200]
  [--batch 8] [--seed 42] [--scale-dtype float32]. Writes DIR/peer.json (one JSON line, also printed) and
  DIR/peer_weights.safetensors.
"""
import argparse
import ast
import importlib.util
import json
import math
import os
import random
import sys
import time
import types

import torch
import torch.nn as nn
import torch.nn.functional as F
from safetensors import safe_open
from safetensors.torch import save_file

LINEARS = ["self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj", "self_attn.o_proj", "mlp.gate_proj",
           "mlp.up_proj", "mlp.down_proj"]


# ---------------------------------------------------------------------------------------------------------------
# Loading auto-round's files
# ---------------------------------------------------------------------------------------------------------------
def src(relative):
    return os.path.join(os.environ["AUTOROUND_SRC"], relative)


def package(name):
    module = types.ModuleType(name)
    module.__path__ = []
    sys.modules[name] = module
    parent, _, child = name.rpartition(".")
    if parent in sys.modules:
        setattr(sys.modules[parent], child, module)
    return module


def module(name):
    if name in sys.modules:
        return sys.modules[name]
    m = types.ModuleType(name)
    sys.modules[name] = m
    parent, _, child = name.rpartition(".")
    if parent in sys.modules:
        setattr(sys.modules[parent], child, m)
    return m


def load(name, relative):
    """A whole file of auto-round as module `name`."""
    spec = importlib.util.spec_from_file_location(name, src(relative))
    m = importlib.util.module_from_spec(spec)
    sys.modules[name] = m
    parent, _, child = name.rpartition(".")
    if parent in sys.modules:
        setattr(sys.modules[parent], child, m)
    spec.loader.exec_module(m)
    return m


def pick(name, relative, names, prelude=""):
    """The top-level definitions `names` of a file, verbatim, into module `name` (after `prelude`'s imports)."""
    tree = ast.parse(open(src(relative)).read())
    wanted = []
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.ClassDef)) and node.name in names:
            wanted.append(node)
        elif isinstance(node, ast.Assign) and any(getattr(t, "id", None) in names for t in node.targets):
            wanted.append(node)
    found = {getattr(n, "name", None) or n.targets[0].id for n in wanted}
    missing = set(names) - found
    if missing:
        raise SystemExit(f"autoround peer: {sorted(missing)} not found in {relative}")
    m = module(name)
    exec(prelude, m.__dict__)
    exec(compile(ast.Module(body=wanted, type_ignores=[]), src(relative), "exec"), m.__dict__)
    return m


def pick_methods(relative, class_name, names):
    """Methods of a class, verbatim, as plain functions."""
    tree = ast.parse(open(src(relative)).read())
    for node in tree.body:
        if isinstance(node, ast.ClassDef) and node.name == class_name:
            body = [n for n in node.body if isinstance(n, ast.FunctionDef) and n.name in names]
            namespace = {}
            exec("from __future__ import annotations\n", namespace)
            exec(compile(ast.Module(body=body, type_ignores=[]), src(relative), "exec"), namespace)
            return {n: namespace[n] for n in names}
    raise SystemExit(f"autoround peer: class {class_name} not found in {relative}")


def unused(name):
    def fail(*args, **kwargs):
        raise RuntimeError(f"autoround peer: stubbed {name} was called (the stub list in the header is wrong)")

    return fail


def load_autoround():
    transformers = module("transformers")
    transformers.pytorch_utils = module("transformers.pytorch_utils")
    transformers.pytorch_utils.Conv1D = type("Conv1D", (nn.Module,), {})
    for p in ["auto_round", "auto_round.algorithms", "auto_round.algorithms.quantization",
              "auto_round.algorithms.quantization.sign_round", "auto_round.compressors", "auto_round.data_type",
              "auto_round.utils"]:
        package(p)
    load("auto_round.envs", "auto_round/envs.py")
    load("auto_round.logger", "auto_round/logger.py")
    pick("auto_round.schemes", "auto_round/schemes.py", ["BackendDataType", "is_nv_fp"], "from enum import Enum\n")
    sys.modules["auto_round.schemes"].QuantizationScheme = type("QuantizationScheme", (), {})

    utils = sys.modules["auto_round.utils"]
    utils.logger = sys.modules["auto_round.logger"].logger  # auto_round.utils re-exports it
    pick("auto_round.utils", "auto_round/utils/model.py", ["check_to_quantized", "set_module"], "import torch\n")
    pick("auto_round.utils.model", "auto_round/utils/model.py", ["to_device"], "import torch\n")
    pick("auto_round.utils", "auto_round/utils/common.py", ["SUPPORTED_LAYER_TYPES", "deepspeed_exists"],
         "import torch\nimport transformers\n")
    pick("auto_round.utils", "auto_round/utils/device.py", ["is_hpex_available"],
         "from functools import lru_cache\n_hpex_available = False\n")
    for name in ["compile_func", "htcore", "mv_module_from_gpu", "set_amax_for_all_moe_layers", "get_reciprocal"]:
        setattr(utils, name, unused(name))
    module("auto_round.utils.device").clear_memory_if_reached_threshold = unused("clear_memory_if_reached_threshold")
    dm = load("auto_round.utils.device_manager", "auto_round/utils/device_manager.py")
    dm.device_manager._major_device = "cpu"
    dm.device_manager._device_list = ["cpu"]
    dm.device_manager._device_map = "cpu"
    load("auto_round.utils.distributed", "auto_round/utils/distributed.py")

    pick("auto_round.compressors.utils", "auto_round/compressors/utils.py",
         ["block_forward", "IndexSampler", "collect_best_params"],
         "import random\nimport torch\nfrom typing import Union\nfrom torch.amp import autocast\n"
         "from auto_round.schemes import is_nv_fp\n")
    pick("auto_round.special_model_handler", "auto_round/special_model_handler.py",
         ["prepare_special_model_block_inputs"], "import torch\n")

    load("auto_round.data_type.register", "auto_round/data_type/register.py")
    load("auto_round.data_type.utils", "auto_round/data_type/utils.py")
    load("auto_round.data_type.int", "auto_round/data_type/int.py")
    data_type = sys.modules["auto_round.data_type"]
    data_type.QUANT_FUNC_WITH_DTYPE = sys.modules["auto_round.data_type.register"].QUANT_FUNC_WITH_DTYPE
    data_type.get_quant_func = sys.modules["auto_round.data_type.utils"].get_quant_func
    data_type.reshape_pad_tensor_by_group_size = sys.modules["auto_round.data_type.utils"].reshape_pad_tensor_by_group_size

    wrapper = load("auto_round.wrapper", "auto_round/wrapper.py")
    runner = load("auto_round.algorithms.block_runner", "auto_round/algorithms/block_runner.py")
    module("auto_round.algorithms.quantization.base").BaseQuantizer = type("BaseQuantizer", (), {})
    module("auto_round.algorithms.quantization.sign_round.config").SignRoundConfig = type("SignRoundConfig", (), {})
    module("auto_round.algorithms.registry").register_pipeline_member = lambda config: (lambda cls: cls)
    sgd = load("auto_round.algorithms.quantization.sign_round.sign_sgd",
               "auto_round/algorithms/quantization/sign_round/sign_sgd.py")
    quantizer = load("auto_round.algorithms.quantization.sign_round.quantizer",
                     "auto_round/algorithms/quantization/sign_round/quantizer.py")
    lr_methods = pick_methods("auto_round/algorithms/quantization/sign_round/config.py", "SignRoundConfig",
                              ["compute_lr", "compute_minmax_lr"])
    return types.SimpleNamespace(wrapper=wrapper, runner=runner, sgd=sgd, quantizer=quantizer, lr_methods=lr_methods)


# ---------------------------------------------------------------------------------------------------------------
# The decoder layer (HF Llama's, in plain torch)
# ---------------------------------------------------------------------------------------------------------------
class RmsNorm(nn.Module):
    def __init__(self, weight, eps):
        super().__init__()
        self.weight = nn.Parameter(weight, requires_grad=False)
        self.eps = eps

    def forward(self, x):
        variance = x.pow(2).mean(-1, keepdim=True)
        return self.weight * (x * torch.rsqrt(variance + self.eps))


def linear(weight):
    layer = nn.Linear(weight.shape[1], weight.shape[0], bias=False)
    layer.weight = nn.Parameter(weight.clone(), requires_grad=False)
    return layer


def rotate_half(x):
    half = x.shape[-1] // 2
    return torch.cat((-x[..., half:], x[..., :half]), dim=-1)


class Attention(nn.Module):
    def __init__(self, t, heads, kv_heads, head_dim, theta):
        super().__init__()
        self.q_proj, self.k_proj = linear(t["self_attn.q_proj.weight"]), linear(t["self_attn.k_proj.weight"])
        self.v_proj, self.o_proj = linear(t["self_attn.v_proj.weight"]), linear(t["self_attn.o_proj.weight"])
        self.heads, self.kv_heads, self.head_dim, self.theta = heads, kv_heads, head_dim, theta

    def forward(self, x):
        b, n, _ = x.shape
        q = self.q_proj(x).view(b, n, self.heads, self.head_dim).transpose(1, 2)
        k = self.k_proj(x).view(b, n, self.kv_heads, self.head_dim).transpose(1, 2)
        v = self.v_proj(x).view(b, n, self.kv_heads, self.head_dim).transpose(1, 2)
        inv_freq = 1.0 / (self.theta ** (torch.arange(0, self.head_dim, 2, dtype=torch.int64).float() / self.head_dim))
        freqs = torch.outer(torch.arange(n, dtype=torch.float32), inv_freq)
        emb = torch.cat((freqs, freqs), dim=-1)
        cos, sin = emb.cos(), emb.sin()
        q, k = q * cos + rotate_half(q) * sin, k * cos + rotate_half(k) * sin
        group = self.heads // self.kv_heads
        k, v = k.repeat_interleave(group, dim=1), v.repeat_interleave(group, dim=1)
        scores = (q @ k.transpose(-1, -2)) / math.sqrt(self.head_dim)
        scores = scores.masked_fill(torch.ones(n, n, dtype=torch.bool).triu(1), float("-inf"))
        out = torch.softmax(scores, dim=-1) @ v
        return self.o_proj(out.transpose(1, 2).reshape(b, n, -1))


class Mlp(nn.Module):
    def __init__(self, t):
        super().__init__()
        self.gate_proj, self.up_proj = linear(t["mlp.gate_proj.weight"]), linear(t["mlp.up_proj.weight"])
        self.down_proj = linear(t["mlp.down_proj.weight"])

    def forward(self, x):
        return self.down_proj(F.silu(self.gate_proj(x)) * self.up_proj(x))


class LlamaBlock(nn.Module):
    def __init__(self, t, meta):
        super().__init__()
        eps = float(meta["rms_norm_eps"])
        self.input_layernorm = RmsNorm(t["input_layernorm.weight"], eps)
        self.self_attn = Attention(t, int(meta["num_attention_heads"]), int(meta["num_key_value_heads"]),
                                   int(meta["head_dim"]), float(meta["rope_theta"]))
        self.post_attention_layernorm = RmsNorm(t["post_attention_layernorm.weight"], eps)
        self.mlp = Mlp(t)

    def forward(self, hidden_states):
        h = hidden_states + self.self_attn(self.input_layernorm(hidden_states))
        return h + self.mlp(self.post_attention_layernorm(h))


# ---------------------------------------------------------------------------------------------------------------
# Running quantize_block
# ---------------------------------------------------------------------------------------------------------------
def make_quantizer(ar, args):
    cls = ar.quantizer.SignRoundQuantizer
    q = cls.__new__(cls)
    lr = 1.0 / args.iters  # auto-round's default lr (lr None -> 1 / iters for 4 bits), minmax_lr = lr
    q.iters, q.lr, q.minmax_lr, q.lr_scheduler, q.momentum = args.iters, lr, lr, None, 0.0
    q.enable_minmax_tuning, q.enable_norm_bias_tuning, q.gradient_accumulate_steps = True, False, 1
    q.enable_alg_ext, q.not_use_best_mse, q.enable_quanted_input = False, False, True
    q.dynamic_max_gap, q.enable_lfq = -1, False
    q.optimizer = q._get_optimizer(None)  # SignSGD
    q.wrapper_block = ar.wrapper.wrapper_block
    q.lr_is_auto = q.minmax_lr_is_auto = False
    q._logged_low_bit_lr = False
    config = types.SimpleNamespace(lr=lr, minmax_lr=lr, lr_is_auto=False, minmax_lr_is_auto=False)
    config.compute_lr = types.MethodType(ar.lr_methods["compute_lr"], config)
    config.compute_minmax_lr = types.MethodType(ar.lr_methods["compute_minmax_lr"], config)
    q._config = config
    q.config = types.SimpleNamespace(is_act_nv_fp=False)
    q.compress_context = types.SimpleNamespace(low_gpu_mem_usage=False, enable_torch_compile=False,
                                               cache_device="cpu", clear_memory=lambda: None)
    q.calibration_context = types.SimpleNamespace(batch_size=args.batch, batch_dim=0)
    q.model_context = types.SimpleNamespace(amp=True, amp_dtype=torch.float32, is_diffusion=False)
    q.block_forward = ar.runner.BlockForwardRunner(batch_size=args.batch, device=torch.device("cpu"),
                                                   cache_device="cpu", amp=False, amp_dtype=torch.float32,
                                                   enable_torch_compile=False)
    return q


def mse(block, inputs, targets):
    with torch.no_grad():
        out = torch.cat([block(inputs[i : i + 1]) for i in range(inputs.shape[0])])
    return (out.double() - targets.double()).pow(2).mean().item()


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("dir")
    parser.add_argument("--iters", type=int, default=200)
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--seed", type=int, default=42)
    parser.add_argument("--scale-dtype", choices=["float32", "float16"], default="float32")
    args = parser.parse_args()
    torch.set_num_threads(int(os.environ.get("PEER_THREADS", "1")))
    ar = load_autoround()

    path = os.path.join(args.dir, "layer.safetensors")
    with safe_open(path, "pt") as f:
        meta = f.metadata()
        t = {k: f.get_tensor(k) for k in f.keys()}
    group = int(meta["group_size"])
    block = LlamaBlock(t, meta)
    train, heldout = t["train_inputs"], t["heldout_inputs"]
    with torch.no_grad():
        check = torch.cat([block(train[i : i + 1]) for i in range(train.shape[0])])
    float_diff = (check - t["train_targets"]).abs().max().item()
    scale = t["train_targets"].abs().max().item()
    if float_diff > 1e-5 * max(1.0, scale):
        raise SystemExit(f"autoround peer: the float layer differs from the engine's by {float_diff} (max |y| {scale})")
    float_weights = {name: t[name + ".weight"].clone() for name in LINEARS}
    scale_dtype = torch.float32 if args.scale_dtype == "float32" else torch.float16
    for name in LINEARS:
        layer = block.get_submodule(name)
        layer.bits, layer.group_size, layer.sym, layer.data_type = 4, group, False, "int"
        layer.act_bits, layer.scale_dtype = 16, scale_dtype

    random.seed(args.seed)  # auto-round's set_seed: random, numpy, torch
    torch.manual_seed(args.seed)
    q = make_quantizer(ar, args)
    losses = []
    get_loss = q._get_loss

    def recording_loss(*a, **k):  # one call per iteration here (batch = the whole global batch)
        loss = get_loss(*a, **k)
        losses.append(loss.item())
        return loss

    q._get_loss = recording_loss
    summaries = []
    ar.quantizer.logger.infoclean = lambda message, *a, **k: summaries.append(message)
    fp_inputs = [train[i : i + 1] for i in range(train.shape[0])]
    fp_outputs = [t["train_targets"][i : i + 1] for i in range(train.shape[0])]
    block_ctx = types.SimpleNamespace(block_index=0, block_cnt=1, block_name="model.layers.0")
    start = time.perf_counter()
    best_params = q.quantize_block(block, fp_inputs, {}, fp_outputs, None, block_ctx)
    seconds = time.perf_counter() - start

    changed = weights = 0
    rounded = {}
    for name in LINEARS:
        layer = block.get_submodule(name)
        w = float_weights[name].reshape(-1, group)
        s = layer.scale.reshape(-1, 1).float()
        v = best_params[name]["value"].reshape(-1, group)
        x = w / s  # quant_tensor_asym's tensor / scale
        changed += torch.ne(torch.round(x + v), torch.round(x)).sum().item()
        weights += w.numel()
        rounded[name + ".weight"] = layer.weight.detach().clone().contiguous()
    best_iter = min(range(len(losses)), key=lambda i: (losses[i], i))
    result = {
        "side": "auto-round",
        "source": os.environ.get("AUTOROUND_LABEL", os.environ["AUTOROUND_SRC"]),
        "iters": args.iters,
        "batch": args.batch,
        "samples": train.shape[0],
        "scale_dtype": args.scale_dtype,
        "float_layer_max_abs_diff": float_diff,
        "first_loss": losses[0],
        "best_loss": losses[best_iter],
        "best_iter": best_iter,
        "heldout_mse": mse(block, heldout, t["heldout_targets"]),
        "train_mse": mse(block, train, t["train_targets"]),
        "changed_roundings": changed,
        "weights": weights,
        "changed_fraction": changed / weights,
        "seconds": seconds,
        "threads": torch.get_num_threads(),
        "summary": summaries[-1] if summaries else "",
        "losses": losses,
    }
    engine_path = os.path.join(args.dir, "engine_weights.safetensors")
    if os.path.exists(engine_path):
        # Another grid point: more than half of auto-round's step apart (the two sides' scales differ in their last
        # bits, so exact equality would count almost every weight).
        differing = 0
        with safe_open(engine_path, "pt") as f:
            for name in LINEARS:
                step = block.get_submodule(name).scale.reshape(-1, 1).float()
                gap = (f.get_tensor(name + ".weight") - rounded[name + ".weight"]).reshape(-1, group).abs()
                differing += torch.gt(gap, 0.5 * step).sum().item()
        result["weights_on_another_grid_point_than_engine"] = differing
    save_file(rounded, os.path.join(args.dir, "peer_weights.safetensors"))
    line = json.dumps(result)
    with open(os.path.join(args.dir, "peer.json"), "w") as out:
        out.write(line + "\n")
    print(line)


if __name__ == "__main__":
    main()
