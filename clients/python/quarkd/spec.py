"""Building a quark.v1.JobSpec from keyword arguments (the same names as quarkctl submit's flags).

Bad input raises ValueError naming the argument, before anything is sent.
"""
import json

from google.protobuf import json_format

from ._stubs import config_pb2, service_pb2

EXPORT_FORMATS = {
    "hf_quark": service_pb2.EXPORT_FORMAT_HF_QUARK,
    "hf": service_pb2.EXPORT_FORMAT_HF_QUARK,
    "quark": service_pb2.EXPORT_FORMAT_HF_QUARK,
    "gguf": service_pb2.EXPORT_FORMAT_GGUF,
    "onnx": service_pb2.EXPORT_FORMAT_ONNX,
}
ALGORITHMS = {"gptq": "gptq", "awq": "awq", "smooth": "smoothquant", "smoothquant": "smoothquant",
              "autosmoothquant": "autosmoothquant", "rotation": "rotation"}
STATES = {name: service_pb2.JobState.Value("JOB_STATE_" + name.upper())
          for name in ("queued", "running", "succeeded", "failed", "cancelled")}


def _normalize(name):
    return str(name).lower().replace("-", "_")


def export_format(name):
    """hf_quark (hf, quark), gguf or onnx -> the ExportFormat value; ValueError naming `exports` otherwise."""
    value = EXPORT_FORMATS.get(_normalize(name))
    if value is None:
        raise ValueError(f'exports: "{name}" is not one of hf_quark, gguf, onnx')
    return value


def job_state(name):
    """queued, running, succeeded, failed, cancelled (or JOB_STATE_...) -> the JobState value."""
    normalized = _normalize(name)
    if normalized.startswith("job_state_"):
        normalized = normalized[len("job_state_"):]
    if normalized not in STATES:
        raise ValueError(f'states: "{name}" is not one of queued, running, succeeded, failed, cancelled')
    return STATES[normalized]


def _positive(name, value):
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"{name}: {value!r} is not an integer >= 1")
    return value


def _parse_dict(name, value, message):
    """`value` (a dict in protobuf's JSON form) parsed into `message`; ValueError naming `name`."""
    try:
        return json_format.ParseDict(value, message)
    except json_format.ParseError as error:
        raise ValueError(f"{name}: {error}") from None


def _json_object(name, text):
    """JSON text of an object as a dict; ValueError naming `name`."""
    try:
        value = json.loads(text)
    except json.JSONDecodeError as error:
        raise ValueError(f"{name}: not JSON: {error}") from None
    return value if isinstance(value, dict) else None


def _config(config):
    """A quark.v1.Config from a Config, a dict, or JSON text."""
    if isinstance(config, config_pb2.Config):
        return config
    if isinstance(config, str):
        config = _json_object("config", config)
    if not isinstance(config, dict):
        raise ValueError("config: expected a quark.v1.Config, a dict or JSON text of an object")
    return _parse_dict("config", config, config_pb2.Config())


def _algorithms(names):
    if isinstance(names, str):
        names = [n for n in names.split(",") if n]
    algos = []
    for name in names or ():
        field = ALGORITHMS.get(_normalize(name))
        if field is None:
            raise ValueError(f'quant_algo: unknown algorithm "{name}" (gptq, awq, smoothquant, autosmoothquant, rotation)')
        algo = config_pb2.AlgoConfig()
        getattr(algo, field).SetInParent()  # the algorithm with its defaults (Quark's LLM example)
        algos.append(algo)
    return algos


def parse_labels(labels, name="labels"):
    """A dict of labels from a dict or "KEY=VALUE" strings (as quarkctl --label); ValueError naming `name`."""
    if labels is None:
        return {}
    if isinstance(labels, dict):
        return {str(k): str(v) for k, v in labels.items()}
    out = {}
    for label in labels:  # "KEY=VALUE" strings, as quarkctl --label
        key, eq, value = str(label).partition("=")
        if not eq or not key:
            raise ValueError(f'{name}: "{label}" is not KEY=VALUE')
        out[key] = value
    return out


def build_spec(model=None, *, preset=None, config=None, kv_cache_dtype=None, exclude=(), calib=None,
               num_calib_samples=None, seq_len=None, seed=None, eval=None, output=None, exports=(), labels=None,
               gguf_type=None, max_ppl_increase=None, quant_algo=(), priority=None, max_attempts=None,
               deadline_seconds=None, force=False, resources=None, spec=None):
    """A quark.v1.JobSpec. `spec` (a JobSpec or a dict in its JSON form) is the base the other arguments override."""
    if preset and config is not None:
        raise ValueError("preset and config: give one, not both")
    if spec is None:
        out = service_pb2.JobSpec()
    elif isinstance(spec, service_pb2.JobSpec):
        out = service_pb2.JobSpec()
        out.CopyFrom(spec)
    elif isinstance(spec, dict):
        out = _parse_dict("spec", spec, service_pb2.JobSpec())
    else:
        raise ValueError(f"spec: expected a quark.v1.JobSpec or a dict, not {type(spec).__name__}")
    if model:
        out.model_uri = model
    if output:
        out.output_uri = output
    if preset:
        out.preset = preset
    if config is not None:
        out.config.CopyFrom(_config(config))
    if kv_cache_dtype:
        out.kv_cache_dtype = kv_cache_dtype
    out.exclude.extend(exclude or ())
    if calib:
        out.calibration.uri = calib
    if _positive("num_calib_samples", num_calib_samples):
        out.calibration.num_samples = num_calib_samples
    if _positive("seq_len", seq_len):
        out.calibration.seq_len = seq_len
    if seed is not None:
        out.calibration.seed = seed
    if eval:
        out.evaluation.uri = eval
    if max_ppl_increase is not None:
        out.evaluation.max_ppl_increase = float(max_ppl_increase)
    if exports:
        del out.export_formats[:]
        out.export_formats.extend(export_format(e) for e in exports)
    for key, value in parse_labels(labels).items():
        out.labels[key] = value
    if gguf_type:
        out.gguf_type = gguf_type
    out.algo_config.extend(_algorithms(quant_algo))
    if priority is not None:
        out.priority = int(priority)
    if _positive("max_attempts", max_attempts):
        out.max_attempts = max_attempts
    if _positive("deadline_seconds", deadline_seconds):
        out.deadline_seconds = deadline_seconds
    if force:
        out.force = True
    if resources:
        for key in ("gpus", "memory_mb", "cpus"):
            if key in resources:
                setattr(out.resources, key, int(resources[key]))
        unknown = set(resources) - {"gpus", "memory_mb", "cpus"}
        if unknown:
            raise ValueError(f"resources: unknown keys {sorted(unknown)} (gpus, memory_mb, cpus)")
    return out
