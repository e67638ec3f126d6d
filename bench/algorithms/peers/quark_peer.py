"""AMD Quark's GPTQ (quark/torch/algorithm/gptq/gptq.py) driven on one weight matrix.

The algorithm is Quark's own code, loaded from the checkout given on the command line: GPTQ.add_batch_quantized
accumulates the Hessian and GPTQ.quantize runs the whole per-layer step (dead columns, BaseHessianAlgorithm's
_setup_quantizers / _apply_activation_order, damping, _compute_hinv_cholesky_factor, fasterquant_inner ->
fasterquant_inner_eager, un-permuting). Only two files of Quark are executed, gptq.py and algorithm/common.py; the
rest of the quark package they import is replaced by the stubs below, none of which is on the numerical path except
the fake quantizer.

Quark's ScaledFakeQuantize pulls in its whole quantization stack (kernels, config, export), so it is replaced by
QuarkIntFakeQuantizer: a per-channel (ch_axis 0) running min/max observer and integer fake quantization, written from
the project's numerics contract (/work/shared/spec/numerics.md, "Integer scale and zero point"), which states Quark's
integer semantics.
"""

import importlib.util
import os
import sys
import time
import types
from enum import Enum

import torch

# Integer grids from the numerics contract's data type table.
INT_RANGES = {"int8": (-128, 127), "uint8": (0, 255), "int4": (-8, 7), "uint4": (0, 15), "int3": (-4, 3),
              "int2": (-2, 1)}
_EPS = torch.finfo(torch.float32).eps


class _MinMaxObserver:
    """Running per-row min/max, the part of Quark's PerChannelMinMaxObserver (ch_axis 0) that GPTQ uses."""

    def __init__(self, qspec):
        self.qspec = qspec
        self.reset_min_max_vals()

    def reset_min_max_vals(self):
        self.min_val = None
        self.max_val = None

    def update(self, x):
        # [rows, cols] -> per-row extrema; ch_axis 0 keeps rows (output channels).
        x = x.detach().to(torch.float32)
        mn, mx = x.amin(dim=1), x.amax(dim=1)
        if self.min_val is None:
            self.min_val, self.max_val = mn, mx
        else:
            self.min_val, self.max_val = torch.minimum(self.min_val, mn), torch.maximum(self.max_val, mx)


class QuarkIntFakeQuantizer:
    """Stand-in for Quark's ScaledFakeQuantize with an integer dtype and a per-channel MinMax observer."""

    def __init__(self, qspec):
        self.qspec = qspec
        self.qmin, self.qmax = INT_RANGES[qspec.dtype]
        self.symmetric = qspec.symmetric
        self.observer = _MinMaxObserver(qspec)
        self.scale = None
        self.zero_point = None

    def observe(self, x):
        self.observer.update(x)
        self.scale, self.zero_point = self.calculate_qparams(self.observer.min_val, self.observer.max_val)

    def calculate_qparams(self, min_val, max_val):
        mn = torch.clamp(min_val, max=0.0)
        mx = torch.clamp(max_val, min=0.0)
        if self.symmetric:
            # Half the integer span (7.5 for int4), so both signs of the range fit; an unsigned type keeps z = 0.
            scale = torch.clamp(torch.maximum(-mn, mx) / (float(self.qmax - self.qmin) / 2), min=_EPS)
            zero = torch.zeros_like(scale)
        else:
            scale = torch.clamp((mx - mn) / float(self.qmax - self.qmin), min=_EPS)
            zero = torch.clamp(self.qmin - torch.round(mn / scale), self.qmin, self.qmax)
        finite = torch.isfinite(min_val) & torch.isfinite(max_val)
        scale = torch.where(finite, scale, torch.ones_like(scale))
        zero = torch.where(finite, zero, torch.zeros_like(zero))
        return scale, zero

    def fake_quantize_with_qparams(self, x, scale, zero_point):
        # One (scale, zero) per row of x; GPTQ passes a column as [rows, 1].
        shape = (-1,) + (1,) * (x.dim() - 1)
        s, z = scale.reshape(shape), zero_point.reshape(shape)
        # Multiply by the reciprocal (not divide) and round half to even (torch.round), as Quark does.
        q = torch.clamp(torch.round(x * (1.0 / s)) + z, self.qmin, self.qmax)
        return ((q - z) * s).to(x.dtype)


def _not_used(name):
    def fail(*args, **kwargs):
        raise NotImplementedError(f"stub {name} was called; the benchmark drives one layer, not a model")

    return fail


class _Logger:
    """Stands in for quark.common.utils.log.ScreenLogger: warnings to stderr, chatter dropped."""

    def __init__(self, name):
        self.name = name

    def warning(self, msg, *args, **kwargs):
        print(f"[quark {self.name}] {msg}", file=sys.stderr)

    error = warning

    def info(self, msg, *args, **kwargs):
        pass

    debug = info


class QSchemeType(Enum):
    per_tensor = "per_tensor"
    per_channel = "per_channel"
    per_group = "per_group"


def _install_stubs():
    def module(name, **attrs):
        mod = sys.modules.get(name)
        if mod is None:
            mod = types.ModuleType(name)
            mod.__path__ = []  # a package, so submodules can be registered under it
            sys.modules[name] = mod
        for key, value in attrs.items():
            setattr(mod, key, value)
        parent, _, child = name.rpartition(".")
        if parent:
            setattr(module(parent), child, mod)
        return mod

    # A pass-through tqdm: no progress bar on stderr and no per-block bar overhead inside the timed region.
    module("tqdm", tqdm=lambda iterable=None, *a, **k: iterable)
    module("quark.common.utils.log", ScreenLogger=_Logger)
    module("quark.torch.algorithm.blockwise_tuning.blockwise_utils", block_forward=_not_used("block_forward"))
    module("quark.torch.algorithm.processor", BaseAlgoProcessor=type("BaseAlgoProcessor", (), {}))
    module("quark.torch.algorithm.utils.module",
           get_device=lambda m: next(m.parameters()).device,
           get_named_quant_linears=_not_used("get_named_quant_linears"),
           move_to_device=_not_used("move_to_device"))
    module("quark.torch.algorithm.utils.prepare",
           init_blockwise_algo=_not_used("init_blockwise_algo"),
           init_device_map=_not_used("init_device_map"),
           reset_model_kv_cache=_not_used("reset_model_kv_cache"))
    module("quark.torch.algorithm.utils.utils", clear_memory=lambda *a, **k: None)
    module("quark.torch.quantization.config.type", QSchemeType=QSchemeType)
    # _setup_quantizer builds a per-channel QTensorConfig from a per-group spec and asks FakeQuantizeBase for a
    # quantizer; both stand-ins just carry the fields through to QuarkIntFakeQuantizer.
    module("quark.torch.quantization.config.config", QTensorConfig=lambda **kw: types.SimpleNamespace(**kw))
    module("quark.torch.quantization.observer.observer",
           PerChannelMinMaxObserver=type("PerChannelMinMaxObserver", (), {}))
    fake_quantize_base = type("FakeQuantizeBase", (), {
        "get_fake_quantize": staticmethod(lambda qspec, device=None: QuarkIntFakeQuantizer(qspec))})
    module("quark.torch.quantization.tensor_quantize",
           FakeQuantizeBase=fake_quantize_base, ScaledFakeQuantize=QuarkIntFakeQuantizer)
    # Quark reads these from the environment; a CPU run without graphs is the eager path either way.
    module("quark.torch.utils", QUARK_DISABLE_CUDA_GRAPH=False, QUARK_GPTQ_DEBUG=False)


def _exec_file(name, path):
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod
    spec.loader.exec_module(mod)
    return mod


def _load(repo):
    paths = {name: os.path.join(repo, *name.split(".")) + ".py"
             for name in ("quark.torch.algorithm.common", "quark.torch.algorithm.gptq.gptq")}
    for path in paths.values():
        if not os.path.isfile(path):
            raise SystemExit(f"--repo {repo}: {path} not found (expected an amd/Quark checkout)")
    if "quark.torch.algorithm.gptq.gptq" not in sys.modules:
        _install_stubs()
        for name, path in paths.items():
            _exec_file(name, path)
    return sys.modules["quark.torch.algorithm.gptq.gptq"]


def _qspec(args):
    return types.SimpleNamespace(
        dtype=args.dtype, symmetric=not args.asym, ch_axis=0, is_dynamic=False,
        qscheme=QSchemeType.per_group if args.group_size > 0 else QSchemeType.per_channel,
        group_size=args.group_size, scale_type=None, round_method=None, mx_element_dtype=None, scale_format=None,
        scale_calculation_mode=None)


def rtn(weight, args):
    """Round-to-nearest with the same quantizer, params per group on the original weight."""
    qspec = _qspec(args)
    out = torch.empty_like(weight)
    step = weight.shape[1] if args.group_size <= 0 else args.group_size
    for c in range(0, weight.shape[1], step):
        q = QuarkIntFakeQuantizer(qspec)
        q.observe(weight[:, c : c + step])
        out[:, c : c + step] = q.fake_quantize_with_qparams(weight[:, c : c + step], q.scale, q.zero_point)
    return out


def run(repo, weight, sequences, args):
    """Returns (dequantized weight, hessian seconds, quantize seconds, notes)."""
    gptq = _load(repo)
    notes = []
    if args.act_order and not args.static_groups:
        # GPTQ.quantize un-permutes Q only when static_groups and actorder are both set; with act order alone the
        # weight it stores is still in Hessian-diagonal order. Reproduced as is, so the error shows it.
        notes.append("quark: act_order without static_groups leaves the weight column-permuted (GPTQ.quantize "
                     "only un-permutes when static_groups is set)")

    layer = torch.nn.Linear(weight.shape[1], weight.shape[0], bias=False)
    layer.weight.data = weight.clone()
    # The layer's own weight quantizer: _setup_quantizer keeps it for per-channel and derives a per-channel
    # quantizer from its spec for per-group, exactly as for a Quark-prepared QuantLinear.
    layer._weight_quantizer = QuarkIntFakeQuantizer(_qspec(args))
    layer._weight_quantizer.group_size = args.group_size

    sync = torch.cuda.synchronize if weight.is_cuda else (lambda: None)
    sync()
    t0 = time.perf_counter()
    g = gptq.GPTQ(layer)
    for seq in sequences:
        g.add_batch_quantized(seq.unsqueeze(0), None, "layer")
    sync()
    t1 = time.perf_counter()
    # Quark records its CUDA graphs inside quantize (and replays them), so a graph run's time includes the capture.
    g.quantize(args.block_size, args.damp, args.group_size, args.act_order, args.static_groups,
               use_cuda_graphs=args.cuda_graphs, graphs={})
    sync()
    t2 = time.perf_counter()
    return layer.weight.data.clone(), t1 - t0, t2 - t1, notes
