#!/usr/bin/env python3
"""AMD Quark's own import code run on a quarkd HF-quark export (the peer of tests/export/quark_peer_test.cc).

Usage: quark_import.py EXPORT_DIR OUT.safetensors
PYTHONPATH must reach a gathered copy of Quark's source at commit 1d27b558 (`quark/...`, never committed here; see
tests/peers/quark/source_files.txt and run_peer.sh). Needs torch (Debian trixie: python3-torch 2.6), safetensors,
packaging, tqdm.

What runs is Quark's: QConfig.from_dict parses our quantization_config (its dataclass validation included),
QParamsLinear + its ImportBuilder allocate each linear's packed weight, scale and zero-point buffers with Quark's
shape inference (PackMethod.infer_packed_shape), _fix_loaded_weights_key_mismatch renames our tensors to Quark's
state_dict keys, torch's load_state_dict checks every shape, and the weight quantizer's forward (unpack_tensor,
unpack_params, quark.torch.kernel.dequantize; SequentialRealQuantizer for two-stage weights) returns the float weight
that QParamsLinear's forward multiplies with. The harness does what SafetensorsImporter._import_impl and _map_to_quark
(quark/torch/export/api.py) do for a plain torch model, minus multi-device hooks, weight tying and rotation: it cannot
import api.py itself, whose module-level imports reach most of Quark (ONNX, GGUF, rotation, accelerate, transformers).

Two pieces of that glue are the harness's own, because Quark's files for them are not in the stored source at this
commit: the layer-to-config lookup (`get_layer_quant_config`, quark/torch/export/main_export/quant_config_parser.py)
follows Quark's rules as its stored older version has them (layer_quant_config patterns by fnmatch in order, then
layer_type_quant_config, then global_quant_config; a module matching an `exclude` pattern keeps its float weight), and
`weight_format` / `pack_method` are read from the config's `export` block (what PretrainedConfig reads).

Stand-in modules (STUBBED below): imported at module level by the files above but never called on the import path of a
real-quantized nn.Linear; a stand-in's attributes are classes that raise when instantiated or called, so any use fails
loudly instead of passing:
  quark.version                      generated at build time (setuptools-scm); only a default of BaseQConfig.version
  quark.torch.export.api, .config    exporters and their JSON config (re-exported by quark.torch / quark.torch.export)
  quark.torch.export.main_export, .main_import, .prequantized_config_converter
                                     not stored at this commit; used by _build_quantized_model / PreserveBuilder only
  quark.torch.pruning, quark.torch.quantization.api, .config.template, .config.utils, .model_transformation
                                     quantization and pruning entry points, LLM templates, pretty-printing,
                                     attention quantization
  quark.torch.quantization.nn        QuantLinear (the fake-quantized module; isinstance checks only)
  quark.torch.quantization.tensor_quantize, .observer.observer, .observer.lsq_observer, .observer.tqt_observer
                                     calibration-time quantizers and observers: only their class identities are used
                                     (QTensorConfig validates `observer_cls` by name, realquantizer's isinstance
                                     checks);
                                     DynamicScaledQuantizer builds an observer only when an activation is quantized
  quark.torch.algorithm              rotation (QParamsLinearWithRotation, not built without a rotation config)
  quark.torch.kernel.hw_emulation.extensions, quark.torch.kernel.mx, quark.torch.kernel.float8_e5m3
                                     the JIT-built C++/Triton kernels: used by fake/real quantization and the fp8_e5m3
                                     scale format, not by dequantize (hw_emulation_interface's DTYPE_TO_DEQUANTIZE_FUNCS
                                     are plain torch for int, fp8, fp4/fp6 and per-block fp8)
  quark.torch.utils.accelerate_helper, .debug, .device, .exceptions, .torch_utils, .llm
                                     accelerate hooks, NaN asserts of fake quantization, tensor-parallel helpers

Writes OUT.safetensors with `<module>.weight` (float32) as Quark dequantizes it, and prints one JSON line: the source
commit, how many linears were imported, any checkpoint tensor of an imported linear that Quark's state_dict did not
take, and the weight quantizer Quark built per module (class and dtype of each stage).
"""
import fnmatch
import importlib
import importlib.machinery
import json
import os
import sys
import types

QUARK_COMMIT = "1d27b5582e4ecbb466fa1658e0bc91d01a5fbdd1"
EMBEDDINGS = ("embed_tokens", "embed_positions", "wte", "wpe", "word_embeddings")

STUBBED = (
    "quark.torch.export.api",
    "quark.torch.export.config",
    "quark.torch.export.main_export",
    "quark.torch.export.main_import",
    "quark.torch.export.prequantized_config_converter",
    "quark.torch.pruning",
    "quark.torch.quantization.api",
    "quark.torch.quantization.config.template",
    "quark.torch.quantization.config.utils",
    "quark.torch.quantization.model_transformation",
    "quark.torch.quantization.nn",
    "quark.torch.quantization.tensor_quantize",
    "quark.torch.quantization.observer.observer",
    "quark.torch.quantization.observer.lsq_observer",
    "quark.torch.quantization.observer.tqt_observer",
    "quark.torch.algorithm",
    "quark.torch.kernel.hw_emulation.extensions",
    "quark.torch.kernel.mx",
    "quark.torch.kernel.float8_e5m3",
    "quark.torch.utils.accelerate_helper",
    "quark.torch.utils.debug",
    "quark.torch.utils.device",
    "quark.torch.utils.exceptions",
    "quark.torch.utils.torch_utils",
    "quark.torch.utils.llm",
)


class _StandIn(types.ModuleType):
    """A module whose every attribute is a class that raises when instantiated (or called as a function)."""

    def __getattr__(self, name):
        if name.startswith("__"):
            raise AttributeError(name)
        module = self.__name__

        def unavailable(*args, **kwargs):
            raise RuntimeError(f"{module}.{name} is not available in the Quark peer (stand-in module)")

        # One class per name, kept on the module, so identities are stable (OBSERVER_MAP maps names to them).
        cls = type(name, (), {"__init__": unavailable, "__module__": module})
        setattr(self, name, cls)
        return cls


class _StandInFinder:
    def find_spec(self, fullname, path=None, target=None):
        if any(fullname == s or fullname.startswith(s + ".") for s in STUBBED):
            return importlib.machinery.ModuleSpec(fullname, self, is_package=True)
        return None

    def create_module(self, spec):
        return _StandIn(spec.name)

    def exec_module(self, module):
        module.__path__ = []
        if module.__name__ == "quark.torch.export.api":
            # The real api.py (imported first by quark/torch/__init__.py) loads quark.torch.utils early, through its
            # own `from quark.torch.utils import getattr_recursive, ...` and the rotation code before it; Quark relies
            # on that order: quark.torch.utils.pack and quark.torch.quantization.utils import each other.
            importlib.import_module("quark.torch.utils")


def check_source(root, manifest):
    """Every gathered file present with the character count the store gives; exit 77 naming the first that is not."""
    with open(manifest) as f:
        for line in f:
            if not line.strip() or line.startswith("#"):
                continue
            path, chars = line.split()
            full = os.path.join(root, path)
            if not os.path.isfile(full):
                print(f"Quark peer missing: {path} not in the gathered source {root}", file=sys.stderr)
                sys.exit(77)
            with open(full, encoding="utf-8") as g:
                have = len(g.read())
            if have != int(chars):
                print(f"Quark peer missing: the gathered {path} has {have} characters, the stored file at "
                      f"{QUARK_COMMIT[:8]} {chars} (gather it again)", file=sys.stderr)
                sys.exit(77)


def layer_config(qconfig, name):
    """Quark's get_layer_quant_config for an nn.Linear (see the module docstring)."""
    import torch.nn as nn

    for pattern in qconfig.exclude:
        if fnmatch.fnmatch(name, pattern):
            return None
    for pattern, config in qconfig.layer_quant_config.items():
        if fnmatch.fnmatch(name, pattern):
            return config
    return qconfig.layer_type_quant_config.get(nn.Linear, qconfig.global_quant_config)


def build_qlinear(out_features, in_features, bias, config, qconfig, export, device):
    """QParamsLinear.from_module on an nn.Linear of this shape, as _map_to_quark (quark/torch/export/api.py) does."""
    import torch.nn as nn

    from quark.torch.export.nn.modules.qparamslinear import QParamsLinear

    linear = nn.Linear(in_features, out_features, bias=bias, device=device)
    return QParamsLinear.from_module(linear=linear, custom_mode=export["custom_mode"],
                                     pack_method=export["pack_method"], algo_config=qconfig.algo_config,
                                     quant_config=config)


def unpacked_shape(name, local, config, qconfig, export):
    """The [out, in] for which Quark's ImportBuilder allocates exactly the shapes of the module's tensors in the export
    (`local`, renamed to Quark's state_dict keys): candidates from the packed weight's dimensions and packing ratios."""
    p0, p1 = local["weight"].shape
    candidates = sorted({(a, b) for a in (p0, p1, p1 * 8) for b in (p0, p1, p1 * 2, p1 * 4 // 3, p1 * 8)})
    matches, weight_matches, refusals = [], [], []
    for out_features, in_features in candidates:
        try:
            qlinear = build_qlinear(out_features, in_features, "bias" in local, config, qconfig, export, "meta")
        except (ValueError, AssertionError, ZeroDivisionError, NotImplementedError) as e:
            refusals.append(f"{type(e).__name__}: {e}")
            continue
        state = qlinear.state_dict()
        if tuple(state["weight"].shape) == tuple(local["weight"].shape):
            weight_matches.append((out_features, in_features))
        if all(k in local and tuple(local[k].shape) == tuple(v.shape) for k, v in state.items()):
            matches.append((out_features, in_features))
    # When only the weight fits, Quark's own load (missing keys, load_state_dict's size mismatch) says what differs.
    chosen = matches if matches else weight_matches
    if not chosen and len(refusals) == len(candidates) and len(set(refusals)) == 1:
        # Quark cannot build a QParamsLinear of any shape for this config: its own message says why.
        raise SystemExit(f"{name}: Quark's QParamsLinear refuses the config: {refusals[0]}")
    if len(chosen) != 1:
        shapes = {k: tuple(v.shape) for k, v in local.items()}
        raise SystemExit(f"{name}: no single [out, in] for which Quark allocates the exported weight {shapes} "
                         f"(matches: {chosen})")
    return chosen[0]


def describe(quantizer):
    stages = list(quantizer) if hasattr(quantizer, "__iter__") else [quantizer]
    return [{"class": type(q).__name__, "dtype": q.qspec.dtype.value,
             "qscheme": getattr(q.qspec.qscheme, "value", None), "scale_quant": bool(q.qspec.is_scale_quant)}
            for q in stages]


def main():
    export_dir, out_path = sys.argv[1], sys.argv[2]
    manifest = os.environ.get("QUARK_PEER_MANIFEST")
    if manifest:
        check_source(os.environ["QUARK_PEER_SRC"], manifest)
    sys.meta_path.insert(0, _StandInFinder())

    import torch
    import torch.nn as nn
    from safetensors.torch import load_file, save_file

    from quark.torch.export.utils import _fix_loaded_weights_key_mismatch
    from quark.torch.quantization.config.config import QConfig

    with open(os.path.join(export_dir, "config.json")) as f:
        qc = json.load(f)["quantization_config"]
    custom_mode = qc["quant_method"]
    weight_format = qc["export"]["weight_format"]
    pack_method = qc["export"]["pack_method"]
    if custom_mode != "quark" or weight_format != "real_quantized":
        raise SystemExit(f"quant_method {custom_mode!r}, weight_format {weight_format!r}: this peer reads Quark's "
                         "native real_quantized exports only")
    qconfig = QConfig.from_dict(json.loads(json.dumps(qc)))  # from_dict may edit the dicts it is given

    checkpoint = {}
    for file in sorted(os.listdir(export_dir)):
        if file.endswith(".safetensors"):
            checkpoint.update(load_file(os.path.join(export_dir, file)))

    # The plain model: every module whose 2-D weight comes with quantization tensors and that a layer config covers
    # becomes an nn.Linear of the shape Quark's packing implies, then a QParamsLinear as _map_to_quark builds it. A 2-D
    # float weight the config would quantize (other than an embedding, which Quark never replaces) is reported.
    export = {"custom_mode": custom_mode, "pack_method": pack_method}
    model = nn.Module()
    modules = {}
    state = {}
    float_but_configured = []
    for key in sorted(checkpoint):
        if not key.endswith(".weight") or checkpoint[key].dim() != 2:
            continue
        name = key[: -len(".weight")]
        config = layer_config(qconfig, name)
        if config is None or config.weight is None:
            continue
        if not any(k.startswith(name + ".weight_scale") for k in checkpoint):
            if name.rsplit(".", 1)[-1] not in EMBEDDINGS:
                float_but_configured.append(name)
            continue
        # SafetensorsImporter: rename the checkpoint's keys to QParamsLinear's (weight_scale -> weight_quantizer.scale).
        ours = {k: v for k, v in checkpoint.items() if k.rsplit(".", 1)[0] == name}
        renamed = _fix_loaded_weights_key_mismatch(ours, weight_format=weight_format, custom_mode=custom_mode)
        local = {k[len(name) + 1:]: v for k, v in renamed.items()}
        out_features, in_features = unpacked_shape(name, local, config, qconfig, export)
        qlinear = build_qlinear(out_features, in_features, "bias" in local, config, qconfig, export, "cpu")
        parent = model
        for part in name.split(".")[:-1]:
            if not hasattr(parent, part):
                parent.add_module(part, nn.Module())
            parent = getattr(parent, part)
        parent.add_module(name.split(".")[-1], qlinear)
        modules[name] = qlinear
        state.update(renamed)

    # SafetensorsImporter: refuse a checkpoint missing a key of the model, then load with assign=True.
    missing = sorted(k for k in model.state_dict() if k not in state)
    if missing:
        raise SystemExit(f"The loaded checkpoint misses the weight keys {missing[:8]} (of {len(missing)}) "
                         "present in Quark's model")
    result = model.load_state_dict(state, assign=True, strict=False)

    out = {}
    with torch.no_grad():
        for name, qlinear in modules.items():
            out[name + ".weight"] = qlinear._get_qweight(qlinear.weight).to(torch.float32).contiguous()
    save_file(out, out_path)
    print(json.dumps({
        "quark_commit": QUARK_COMMIT,
        "modules": len(out),
        "unexpected_keys": sorted(result.unexpected_keys),
        "float_but_configured": float_but_configured,
        "weight_quantizers": sorted({json.dumps(describe(q.weight_quantizer)) for q in modules.values()}),
    }))


if __name__ == "__main__":
    main()
