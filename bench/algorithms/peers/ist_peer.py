"""IST-DASLab/gptq (the reference GPTQ implementation) driven on one weight matrix.

Everything numerical is the peer's own code, imported from the checkout given on the command line: GPTQ.add_batch
accumulates the Hessian, Quantizer.find_params/quantize define the grid, GPTQ.fasterquant runs the algorithm. This
module only supplies what the peer takes from its environment (a `transformers` module, CUDA) and the timing.
"""

import contextlib
import inspect
import os
import sys
import time
import types

import torch


def _load(repo):
    if not os.path.isfile(os.path.join(repo, "gptq.py")) or not os.path.isfile(os.path.join(repo, "quant.py")):
        raise SystemExit(f"--repo {repo}: no gptq.py and quant.py there (expected an IST-DASLab/gptq checkout)")
    # gptq.py imports transformers only for isinstance(layer, transformers.Conv1D); a stand-in class that nothing
    # is an instance of keeps that check false without installing transformers.
    try:
        import transformers  # noqa: F401
    except ImportError:
        stub = types.ModuleType("transformers")
        stub.Conv1D = type("Conv1D", (torch.nn.Module,), {})
        sys.modules["transformers"] = stub
    # fasterquant ends with torch.cuda.synchronize(), which raises on a CPU-only build.
    if not torch.cuda.is_available():
        torch.cuda.synchronize = lambda *a, **k: None
    sys.path.insert(0, os.path.abspath(repo))
    # quant.py prints "CUDA extension not installed." on import; stdout is reserved for our JSON line.
    with contextlib.redirect_stdout(sys.stderr):
        import gptq
        import quant
    return gptq, quant


def _new_quantizer(quant, bits, asym):
    q = quant.Quantizer()
    q.configure(bits, perchannel=True, sym=not asym, mse=False)
    return q


def rtn(repo, weight, bits, group_size, asym):
    """Round-to-nearest with the peer's own quantizer, params per group on the original weight."""
    _, quant = _load(repo)
    q = _new_quantizer(quant, bits, asym)
    out = torch.empty_like(weight)
    step = weight.shape[1] if group_size <= 0 else group_size
    for c in range(0, weight.shape[1], step):
        cols = weight[:, c : c + step]
        q.find_params(cols, weight=True)
        out[:, c : c + step] = quant.quantize(cols, q.scale, q.zero, q.maxq)
    return out


def run(repo, weight, sequences, args):
    """Returns (dequantized weight, hessian seconds, quantize seconds, notes)."""
    gptq, quant = _load(repo)
    notes = []
    fq_params = inspect.signature(gptq.GPTQ.fasterquant).parameters
    fq_kwargs = dict(blocksize=args.block_size, percdamp=args.damp, groupsize=args.group_size, actorder=args.act_order)
    if "static_groups" in fq_params:
        fq_kwargs["static_groups"] = args.static_groups
    elif args.static_groups:
        notes.append("this IST-DASLab/gptq checkout has no static_groups; ran without it")

    layer = torch.nn.Linear(weight.shape[1], weight.shape[0], bias=False)
    layer.weight.data = weight.clone()

    sync = torch.cuda.synchronize if weight.is_cuda else (lambda: None)
    sync()
    t0 = time.perf_counter()
    g = gptq.GPTQ(layer)
    g.quantizer = _new_quantizer(quant, args.bits, args.asym)
    for seq in sequences:
        # [1, seq, K]: one sample per sequence, as the peer's forward hook sees a batch-1 layer input.
        g.add_batch(seq.unsqueeze(0), None)
    sync()
    t1 = time.perf_counter()
    # fasterquant prints its own timing and loss to stdout.
    with contextlib.redirect_stdout(sys.stderr):
        g.fasterquant(**fq_kwargs)
    sync()
    t2 = time.perf_counter()
    return layer.weight.data.clone(), t1 - t0, t2 - t1, notes
