"""Runs AMD Quark's own GPTAQ and Qronos (quark/torch/algorithm/gptaq/gptaq.py, qronos/qronos.py and the
BaseHessianAlgorithm of algorithm/common.py, loaded from QUARK_SRC) on seeded layer inputs, and saves the inputs,
Quark's statistics and Quark's quantized weights for tests/algorithms/asymmetric_gptq_peer_test.cc.

Only the algorithm classes run: their statistics (add_batch_quantized / add_batch_nonquantized on the quantized and
the float inputs, sample by sample, as the processors' hooks call them) and quantize(). The rest of Quark (logging,
configs, observers, block forwards) is not needed by those and is stubbed at import. The weight quantizer is uint4
asymmetric per group of 32 (static groups), blocks of 32 columns, as Quark's per-group GPTQ-family path builds it: a per-channel MinMax
observer on each group (torch.ao's calculate_qparams arithmetic, Quark's) and torch.fake_quantize_per_channel_affine.

Usage (inside the trixie chroot, python3-torch 2.6): QUARK_SRC=/path/to/Quark python3 quark_asymmetric.py OUT.safetensors

Also a module: bench/algorithms/peers/quark_asymmetric_peer.py times the same classes on a 7B-shaped linear through
load_quark_classes, new_instance, add_sample and quantize below.
"""
import importlib.util
import os
import sys
import types

import torch
import torch.nn as nn
from safetensors.torch import save_file

N, K, TOKENS, BATCHES, GROUP, BLOCK = 32, 64, 48, 3, 32, 32


class _Anything:
    """Whatever a stubbed name is used as: a base class, a logger, a no-op call."""

    def __init__(self, *args, **kwargs):
        pass

    def __getattr__(self, name):
        return lambda *args, **kwargs: None


class _Stub(types.ModuleType):
    """A quark.* module the algorithm classes import but do not use."""

    def __getattr__(self, name):
        if name.startswith("__"):
            raise AttributeError(name)
        value = type(name, (_Anything,), {})
        setattr(self, name, value)
        return value


class _StubFinder:
    real = {"quark.torch.algorithm.common", "quark.torch.algorithm.gptaq.gptaq", "quark.torch.algorithm.qronos.qronos"}

    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] != "quark" or name in self.real:
            return None
        return importlib.util.spec_from_loader(name, loader=self)

    def create_module(self, spec):
        module = _Stub(spec.name)
        module.__path__ = []
        return module

    def exec_module(self, module):
        pass


def load(name, relative):
    spec = importlib.util.spec_from_file_location(name, os.path.join(os.environ["QUARK_SRC"], relative))
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def load_quark_classes():
    """Quark's Gptaq and Qronos classes, from QUARK_SRC, with the rest of the quark package stubbed."""
    sys.meta_path.insert(0, _StubFinder())
    load("quark.torch.algorithm.common", "quark/torch/algorithm/common.py")
    gptaq = load("quark.torch.algorithm.gptaq.gptaq", "quark/torch/algorithm/gptaq/gptaq.py")
    qronos = load("quark.torch.algorithm.qronos.qronos", "quark/torch/algorithm/qronos/qronos.py")
    return gptaq.Gptaq, qronos.Qronos


class GroupQuantizer:
    """uint4 asymmetric, one (scale, zero_point) per row of what it observes: Quark's per-channel MinMax observer."""

    def __init__(self):
        self.scale = None
        self.zero_point = None
        self.observer = types.SimpleNamespace(reset_min_max_vals=lambda: None)

    def observe(self, x):
        min_neg = torch.clamp(torch.amin(x, dim=1), max=0)
        max_pos = torch.clamp(torch.amax(x, dim=1), min=0)
        scale = (max_pos - min_neg) / float(15 - 0)
        scale = torch.max(scale, torch.tensor([torch.finfo(torch.float32).eps]))
        zero_point = 0 - torch.round(min_neg / scale).to(torch.int)
        self.scale = scale
        self.zero_point = torch.clamp(zero_point, 0, 15)

    def fake_quantize_with_qparams(self, x, scale, zero_point):
        return torch.fake_quantize_per_channel_affine(x, scale, zero_point.to(torch.int32), 0, 0, 15)


def make_inputs():
    torch.manual_seed(35)
    channel_scale = torch.exp(torch.randn(K) * 0.8)
    mix = torch.randn(K // 4, K)
    floats, quantized = [], []
    for _ in range(BATCHES):
        x = (torch.randn(TOKENS, K // 4) @ mix + 0.3 * torch.randn(TOKENS, K)) * channel_scale
        drift = (torch.randn(TOKENS, K // 4) @ mix) * channel_scale * 0.15
        # float16 values (the file stores them so), used as float32 by both sides
        floats.append(x.half().float().unsqueeze(0))
        quantized.append((x + drift).half().float().unsqueeze(0))
    weight = torch.randn(N, K)
    return torch.cat(floats), torch.cat(quantized), weight


def new_instance(cls, weight):
    """What BaseHessianAlgorithm.__init__ and the subclass's leave behind for a Linear with this weight [N, K], with
    GroupQuantizer as the per-group observer (its __init__ would build one from Quark's config classes, stubbed here)."""
    columns = weight.shape[1]
    algo = cls.__new__(cls)
    algo.layer = nn.Linear(columns, weight.shape[0], bias=False)
    algo.layer.weight.data = weight.clone()
    algo.layer._weight_quantizer = types.SimpleNamespace(scale=None, zero_point=None)
    algo.device = torch.device("cpu")
    algo.columns = columns
    algo.H = torch.zeros((columns, columns))
    algo.nsamples = 0
    algo.q_input = None
    algo.quantizer = GroupQuantizer()
    if cls.__name__ == "Gptaq":
        algo.delta_X_Xt = torch.zeros((columns, columns))
    else:
        algo.G = torch.zeros((columns, columns))
    return algo


def add_sample(algo, quantized, original):
    """One calibration sample [1, T, K], in the processors' order: the quantized forward's hook, then the float one's."""
    algo.add_batch_quantized(quantized, None, "layer")
    algo.add_batch_nonquantized(original, None, "layer")


def quantize(algo, block, group, act_order, static_groups=True):
    """quantize() as the processors' _quantize_layer calls it, with Quark 0.13's config defaults: GPTAQConfig
    damp_percent 0.01 and alpha 0.25; QronosConfig alpha 1e-3 and beta 1e4."""
    if type(algo).__name__ == "Gptaq":
        algo.quantize(block, 0.01, 0.25, group, act_order, static_groups)
    else:
        algo.quantize(block, 1e-3, 1e4, group, act_order, static_groups)


def run(cls, floats, quantized, weight, act_order):
    algo = new_instance(cls, weight)
    for b in range(BATCHES):
        add_sample(algo, quantized[b : b + 1], floats[b : b + 1])
    stats = {"hessian": algo.H.clone(), "cross": (algo.delta_X_Xt if cls.__name__ == "Gptaq" else algo.G).clone()}
    quantize(algo, BLOCK, GROUP, act_order)
    return stats, algo.layer.weight.data.clone(), algo.layer._weight_quantizer.scale


def main():
    gptaq, qronos = load_quark_classes()
    torch.set_num_threads(1)
    floats, quantized, weight = make_inputs()
    out = {"float_inputs": floats.half(), "quantized_inputs": quantized.half(), "weight": weight}
    for name, cls in (("gptaq", gptaq), ("qronos", qronos)):
        for act_order in (False, True):
            tag = f"{name}_{'desc_act' if act_order else 'in_order'}"
            stats, q, scale = run(cls, floats, quantized, weight, act_order)
            if not act_order:
                out[f"{name}_hessian"] = stats["hessian"]
                out[f"{name}_cross"] = stats["cross"]
            out[f"{tag}_weight"] = q
            out[f"{tag}_scale"] = scale.contiguous()
    save_file({k: v.contiguous() for k, v in out.items()}, sys.argv[1],
              metadata={"torch": torch.__version__, "quark_src": os.environ.get("QUARK_SRC_LABEL", "")})


if __name__ == "__main__":
    main()
