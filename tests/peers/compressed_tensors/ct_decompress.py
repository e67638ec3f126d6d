#!/usr/bin/env python3
"""compressed-tensors' own decompressors run on a quarkd export (the peer of tests/export/ct_peer_test.cc).

Usage: ct_decompress.py EXPORT_DIR OUT.safetensors
PYTHONPATH must reach the library's `src/` (a checkout of vllm-project/compressed-tensors, fetched at run time by
tests/peers/compressed_tensors/run_peer.sh, never committed). Needs torch, pydantic 2, safetensors, loguru, psutil,
tqdm (Debian trixie: python3-torch 2.6 ...). transformers, huggingface_hub and accelerate, which Debian does not
package, are stood in for: the library imports a few of their names at module level for model-level helpers that
the per-module decompressors used here never call.

Writes OUT.safetensors with `<module>.weight` as the library's decompressor returns it (its dtype), and prints one
JSON line: the library version, the config's, the format the library infers per group, and every difference between
the config's QuantizationArgs and the library's own serialisation of them (model_dump) after validation.
"""
import importlib.machinery
import json
import os
import sys
import types

STUBBED = ("transformers", "huggingface_hub", "accelerate")


class _Unavailable:
    def __init__(self, *args, **kwargs):
        raise RuntimeError("not available in the compressed-tensors peer (stand-in module)")


class _StandIn(types.ModuleType):
    def __getattr__(self, name):
        if name.startswith("__"):
            raise AttributeError(name)
        return type(name, (_Unavailable,), {})


class _StandInFinder:
    def find_spec(self, fullname, path=None, target=None):
        if fullname.split(".")[0] in STUBBED:
            return importlib.machinery.ModuleSpec(fullname, self, is_package=True)
        return None

    def create_module(self, spec):
        return _StandIn(spec.name)

    def exec_module(self, module):
        module.__path__ = []


sys.meta_path.insert(0, _StandInFinder())

import torch  # noqa: E402
from safetensors.torch import load_file, save_file  # noqa: E402

import compressed_tensors  # noqa: E402
from compressed_tensors.compressors.base import BaseCompressor  # noqa: E402
from compressed_tensors.compressors.format import infer_module_format  # noqa: E402
from compressed_tensors.quantization import QuantizationConfig  # noqa: E402
from compressed_tensors.utils.match import match_name  # noqa: E402


def group_for(config, qc, module):
    # The library's own name matching (exact names, "re:" as re.match); our linears are torch.nn.Linear, the class
    # target "Linear". vLLM's order: a name or regex target of any group first, then the class.
    if any(match_name(module, entry) for entry in qc.get("ignore", [])):
        return None, None
    for by_class in (False, True):
        for name, scheme in config.config_groups.items():
            for target in scheme.targets:
                if (target == "Linear") == by_class and (by_class or match_name(module, target)):
                    return name, scheme
    return None, None


def args_diffs(path, ours, theirs):
    out = []
    for key in sorted(set(ours) | set(theirs)):
        a, b = ours.get(key, "<absent>"), theirs.get(key, "<absent>")
        if a != b:
            out.append({"field": f"{path}.{key}", "ours": a, "library": b})
    return out


def main():
    export_dir, out_path = sys.argv[1], sys.argv[2]
    with open(os.path.join(export_dir, "config.json")) as f:
        qc = json.load(f)["quantization_config"]
    config = QuantizationConfig.model_validate(qc)  # extra="forbid" on schemes and args: unknown keys raise
    report = {"library_version": compressed_tensors.__version__, "config_version": qc.get("version"),
              "formats": {}, "args_diffs": []}
    for name, scheme in config.config_groups.items():
        report["formats"][name] = {"written": qc["config_groups"][name].get("format") or qc.get("format"),
                                   "inferred": str(infer_module_format(torch.nn.Linear, scheme).value)}
        for part in ("weights", "input_activations"):
            ours = qc["config_groups"][name].get(part)
            theirs = getattr(scheme, part)
            if ours is not None and theirs is not None:
                report["args_diffs"] += args_diffs(f"config_groups.{name}.{part}", ours,
                                                   json.loads(theirs.model_dump_json()))
    tensors = {}
    for file in sorted(os.listdir(export_dir)):
        if file.endswith(".safetensors"):
            tensors.update(load_file(os.path.join(export_dir, file)))
    modules = sorted({k.rsplit(".", 1)[0] for k in tensors if k.endswith((".weight_packed", ".weight_scale"))})
    out = {}
    for module in modules:
        group, scheme = group_for(config, qc, module)
        if scheme is None:
            raise SystemExit(f"{module}: quantized tensors but no config group targets it")
        fmt = qc["config_groups"][group].get("format") or qc["format"]
        compressor = BaseCompressor.get_value_from_registry(fmt)
        local = {k[len(module) + 1:]: v for k, v in tensors.items() if k.rsplit(".", 1)[0] == module}
        decompressed = compressor.decompress(local, scheme)
        out[module + ".weight"] = decompressed["weight"].contiguous()
    save_file(out, out_path)
    report["modules"] = len(out)
    print(json.dumps(report))


if __name__ == "__main__":
    main()
