#!/usr/bin/env python3
"""compressed-tensors' transform classes run on a quarkd export's online transforms (R4; the peer of
tests/algorithms/online_r4_test.cc).

Usage: ct_transform.py EXPORT_DIR IN.safetensors OUT.safetensors
IN holds "input" [tokens, n] and, per module M, "M.weight": the engine's down_proj weight (W H / sqrt(n), as the
engine read it back from the export). The library validates the export's transform_config (TransformConfig,
extra="forbid") and its own serialisation must equal ours; every M becomes a torch.nn.Linear under its own name in
a module tree, apply_transform_config hangs the library's transforms on it (the online input hook; the weight_input
fusion), then the weights are set to IN's and the export's stored transform matrices are loaded into the library's
transform modules by their names (a module the export stores none for shares the stored one, as the library's tied
transform weights do). OUT gets "M.output" = M(input) as the library computes it. Prints one JSON line.
Runs in the trixie chroot with the library's src/ on PYTHONPATH (run_peer.sh), with ct_decompress.py's stand-ins.
"""
import json
import os
import sys

import ct_decompress  # noqa: F401  (the transformers / accelerate stand-ins, installed on import)

import torch  # noqa: E402
from safetensors.torch import load_file, save_file  # noqa: E402

import compressed_tensors  # noqa: E402
from compressed_tensors.transform import TransformConfig, apply_transform_config  # noqa: E402


def main():
    export_dir, in_path, out_path = sys.argv[1], sys.argv[2], sys.argv[3]
    with open(os.path.join(export_dir, "config.json")) as f:
        ours = json.load(f)["quantization_config"]["transform_config"]
    config = TransformConfig.model_validate(ours)  # extra="forbid" on the config, its schemes and their args
    theirs = json.loads(json.dumps(config.model_dump()))  # as ModelCompressor.update_config writes it
    report = {"library_version": compressed_tensors.__version__, "config_equal": theirs == ours,
              "library_config": theirs}

    stored = {}
    for file in sorted(os.listdir(export_dir)):
        if file.endswith(".safetensors"):
            stored.update({k: v for k, v in load_file(os.path.join(export_dir, file)).items() if "_input." in k})
    inputs = load_file(in_path)
    x = inputs.pop("input")
    modules = sorted(k[: -len(".weight")] for k in inputs)
    root = torch.nn.Module()
    for name in modules:
        w = inputs[name + ".weight"]
        parent = root
        parts = name.split(".")
        for part in parts[:-1]:
            if not hasattr(parent, part):
                parent.add_module(part, torch.nn.Module())
            parent = getattr(parent, part)
        parent.add_module(parts[-1], torch.nn.Linear(w.shape[1], w.shape[0], bias=False))

    apply_transform_config(root, config)

    out, loaded = {}, []
    with torch.no_grad():
        for name in modules:
            module = root.get_submodule(name)
            module.weight.copy_(inputs[name + ".weight"])
            for child_name, child in module.named_children():  # the library's transform submodules: R4_input
                key = f"{name}.{child_name}.weight"
                matrix = stored.get(key)
                if matrix is None:  # tied: the stored copy of the same scheme and size
                    matrix = next(v for k, v in stored.items()
                                  if k.endswith(f".{child_name}.weight") and v.shape == child.weight.shape)
                else:
                    loaded.append(key)
                child.weight.copy_(matrix)
            out[name + ".output"] = module(x).contiguous()
    save_file(out, out_path)
    report["modules"] = len(out)
    report["loaded"] = loaded
    report["transforms"] = sorted({type(m).__name__ for m in root.modules() if m is not root and
                                   not isinstance(m, torch.nn.Linear) and list(m.parameters(recurse=False))})
    print(json.dumps(report))


if __name__ == "__main__":
    main()
