"""Minimal safetensors reader/writer on numpy.

The interpreter these scripts run under (Debian's python3-torch) has no `safetensors` package, and the format is
small enough to handle directly: an 8-byte little-endian header length, a JSON header mapping each tensor name to
{dtype, shape, data_offsets} (offsets relative to the end of the header), then the raw little-endian data.
"""

import json
import struct

import numpy as np

# Only the dtypes these benchmarks exchange; BF16 has no numpy type, so it is widened by hand on read.
_NP_BY_ST = {"F64": "<f8", "F32": "<f4", "F16": "<f2", "I64": "<i8", "I32": "<i4", "I8": "i1", "U8": "u1"}
_ST_BY_NP = {np.dtype(v): k for k, v in _NP_BY_ST.items()}


def read(path):
    """Returns ({name: np.ndarray}, metadata dict). BF16 tensors come back as float32."""
    with open(path, "rb") as f:
        blob = f.read()
    if len(blob) < 8:
        raise ValueError(f"{path}: too short for a safetensors file ({len(blob)} bytes)")
    (header_len,) = struct.unpack("<Q", blob[:8])
    if 8 + header_len > len(blob):
        raise ValueError(f"{path}: header length {header_len} runs past the end of the file ({len(blob)} bytes)")
    header = json.loads(blob[8 : 8 + header_len])
    data = memoryview(blob)[8 + header_len :]
    metadata = header.pop("__metadata__", {}) or {}
    tensors = {}
    for name, info in header.items():
        begin, end = info["data_offsets"]
        shape = tuple(info["shape"])
        raw = data[begin:end]
        if info["dtype"] == "BF16":
            # bfloat16 is the top half of a float32: shift the 16 bits up.
            bits = np.frombuffer(raw, dtype="<u2").astype(np.uint32) << 16
            arr = bits.view(np.float32)
        elif info["dtype"] in _NP_BY_ST:
            arr = np.frombuffer(raw, dtype=_NP_BY_ST[info["dtype"]])
        else:
            raise ValueError(f"{path}: tensor {name!r} has unsupported dtype {info['dtype']!r}")
        count = int(np.prod(shape)) if shape else 1
        if arr.size != count:
            raise ValueError(f"{path}: tensor {name!r} has {arr.size} elements, shape {list(shape)} needs {count}")
        # Copy so the arrays own writable memory and the file blob can be freed.
        tensors[name] = arr.reshape(shape).copy()
    return tensors, metadata


def write(path, tensors, metadata=None):
    """Writes {name: np.ndarray}; metadata values must be strings (the format's rule)."""
    header = {}
    chunks = []
    offset = 0
    for name, arr in tensors.items():
        arr = np.ascontiguousarray(arr)
        dtype = arr.dtype.newbyteorder("<") if arr.dtype.byteorder == ">" else arr.dtype
        if np.dtype(dtype) not in _ST_BY_NP:
            raise ValueError(f"tensor {name!r}: dtype {arr.dtype} is not supported")
        raw = arr.astype(dtype, copy=False).tobytes()
        header[name] = {"dtype": _ST_BY_NP[np.dtype(dtype)], "shape": list(arr.shape),
                        "data_offsets": [offset, offset + len(raw)]}
        chunks.append(raw)
        offset += len(raw)
    if metadata:
        header["__metadata__"] = {str(k): str(v) for k, v in metadata.items()}
    encoded = json.dumps(header, separators=(",", ":")).encode()
    # Pad the header with spaces so the data starts 8-byte aligned, as the reference writer does.
    encoded += b" " * (-len(encoded) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(encoded)))
        f.write(encoded)
        for raw in chunks:
            f.write(raw)
