"""The Llama MLP block the AWQ / SmoothQuant peers run on, and the stand-ins their imports need.

A saved block (safetensors) holds float32 `norm_weight` [H], `gate_proj` [I, H], `up_proj` [I, H], `down_proj` [H, I]
and `inputs` [T, H], the hidden states before post_attention_layernorm. `MlpBlock` is a torch module with HF's names
(post_attention_layernorm, mlp.gate_proj, mlp.up_proj, mlp.down_proj), so the peers' name lookups and isinstance
checks work on it. `install_transformers_stub` registers a minimal `transformers` whose Llama classes are the ones
here (RMSNorm and MLP written from HF's definitions: x * rsqrt(mean(x^2) + eps) * w in float32; down(silu(gate(x)) *
up(x))); every other model class the peers import is an empty placeholder that nothing here is an instance of.
None of these stand-ins does any of the algorithms' arithmetic.
"""

import os
import sys
import types

import torch
from torch import nn

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import safetensors_np  # noqa: E402

NAMES = ("norm_weight", "gate_proj", "up_proj", "down_proj", "inputs")


class LlamaRMSNorm(nn.Module):
    def __init__(self, weight, eps):
        super().__init__()
        self.weight = nn.Parameter(weight.clone(), requires_grad=False)
        self.variance_epsilon = eps

    def forward(self, x):
        dtype = x.dtype
        x = x.to(torch.float32)
        x = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.variance_epsilon)
        return self.weight * x.to(dtype)


class LlamaMLP(nn.Module):
    def __init__(self, gate, up, down):
        super().__init__()
        self.gate_proj = _linear(gate)
        self.up_proj = _linear(up)
        self.down_proj = _linear(down)
        self.act_fn = nn.SiLU()

    def forward(self, x):
        return self.down_proj(self.act_fn(self.gate_proj(x)) * self.up_proj(x))


def _linear(weight):
    out_features, in_features = weight.shape
    linear = nn.Linear(in_features, out_features, bias=False)
    with torch.no_grad():
        linear.weight.copy_(weight)
    linear.weight.requires_grad_(False)
    return linear


class MlpBlock(nn.Module):
    """post_attention_layernorm + mlp; forward = mlp(norm(x)) (no residual, as algo_bench's MlpOnlyLayer)."""

    def __init__(self, tensors, eps):
        super().__init__()
        self.post_attention_layernorm = LlamaRMSNorm(tensors["norm_weight"], eps)
        self.mlp = LlamaMLP(tensors["gate_proj"], tensors["up_proj"], tensors["down_proj"])

    def forward(self, x):
        return self.mlp(self.post_attention_layernorm(x))

    def weights(self):
        return {"norm_weight": self.post_attention_layernorm.weight.detach().clone(),
                **{n: getattr(self.mlp, n).weight.detach().clone() for n in ("gate_proj", "up_proj", "down_proj")}}


def load_block(path):
    tensors, metadata = safetensors_np.read(path)
    missing = [n for n in NAMES if n not in tensors]
    if missing:
        raise SystemExit(f"{path}: missing {missing} (has {sorted(tensors)})")
    t = {n: torch.from_numpy(tensors[n]).float() for n in NAMES}
    h, i = t["norm_weight"].numel(), t["gate_proj"].shape[0]
    if (t["gate_proj"].shape != (i, h) or t["up_proj"].shape != (i, h) or t["down_proj"].shape != (h, i)
            or t["inputs"].dim() != 2 or t["inputs"].shape[1] != h):
        raise SystemExit(f"{path}: needs norm_weight [H], gate_proj/up_proj [I, H], down_proj [H, I], inputs [T, H]")
    return t, metadata


def rel_error(y, yq):
    y, yq = y.double(), yq.double()
    return ((y - yq).pow(2).sum() / y.pow(2).sum()).item()


def quark_int(x, bits, signed, symmetric, group_size=None):
    """Quark's integer fake quantization as /work/shared/spec/numerics.md writes it (per tensor, or per group of
    `group_size` along the last axis): the numerics quarkd uses, to tell the peers' quantizer apart from their
    algorithm. min/max include 0; symmetric s = amax / ((qmax - qmin) / 2); q = clamp(round(x * (1/s)) + z)."""
    qmin, qmax = (-(2 ** (bits - 1)), 2 ** (bits - 1) - 1) if signed else (0, 2 ** bits - 1)
    shape = x.shape
    g = x.reshape(-1, group_size) if group_size else x.reshape(1, -1)
    mn = g.amin(dim=1, keepdim=True).clamp(max=0)
    mx = g.amax(dim=1, keepdim=True).clamp(min=0)
    eps = torch.finfo(torch.float32).eps
    if symmetric:
        s = (torch.maximum(-mn, mx) / ((qmax - qmin) / 2)).clamp(min=eps)
        z = torch.zeros_like(s)
    else:
        s = ((mx - mn) / (qmax - qmin)).clamp(min=eps)
        z = (qmin - torch.round(mn / s)).clamp(qmin, qmax)
    q = torch.clamp(torch.round(g * (1.0 / s)) + z, qmin, qmax)
    return ((q - z) * s).reshape(shape)


class _Placeholders(types.ModuleType):
    """A module whose every missing attribute is a new empty class (model classes the peers only isinstance-check)."""

    def __getattr__(self, name):
        if name.startswith("__"):
            raise AttributeError(name)
        cls = type(name, (nn.Module,), {})
        setattr(self, name, cls)
        return cls


def install_transformers_stub():
    packages = ["transformers", "transformers.models"]
    for name in packages:
        mod = types.ModuleType(name)
        mod.__path__ = []
        sys.modules[name] = mod
    for family in ("llama", "opt", "bloom", "qwen2", "mistral", "mixtral", "falcon"):
        pkg = types.ModuleType(f"transformers.models.{family}")
        pkg.__path__ = []
        sys.modules[pkg.__name__] = pkg
        sys.modules[f"{pkg.__name__}.modeling_{family}"] = _Placeholders(f"{pkg.__name__}.modeling_{family}")
    llama = sys.modules["transformers.models.llama.modeling_llama"]
    llama.LlamaRMSNorm = LlamaRMSNorm
    llama.LlamaMLP = LlamaMLP
    sys.modules["transformers.activations"] = _Placeholders("transformers.activations")
    # tqdm (not in Debian's python3-torch set) only wraps iterables in the code paths run here.
    if "tqdm" not in sys.modules:
        try:
            import tqdm  # noqa: F401
        except ImportError:
            stub = types.ModuleType("tqdm")
            stub.tqdm = lambda iterable=None, *a, **k: iterable
            sys.modules["tqdm"] = stub


def load_package_module(repo, package, relative_path, stubs=()):
    """Imports `package`.`module` from the checkout without running the package's __init__ (which pulls in CUDA
    kernels or datasets): the packages are registered as empty namespace modules pointing at the checkout."""
    for name in stubs:
        sys.modules.setdefault(name, types.ModuleType(name))
    parts = package.split(".")
    for k in range(1, len(parts) + 1):
        name = ".".join(parts[:k])
        if name not in sys.modules:
            mod = types.ModuleType(name)
            mod.__path__ = [os.path.join(repo, *parts[:k])]
            sys.modules[name] = mod
    import importlib
    return importlib.import_module(f"{package}.{relative_path}")
