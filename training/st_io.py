# SPDX-License-Identifier: Apache-2.0
"""Minimal safetensors reader/writer (the `safetensors` package is not in Debian)."""
import json
import struct

import numpy as np
import torch

_DT = {"F32": np.float32, "F64": np.float64, "I64": np.int64, "I32": np.int32}
_NAME = {np.dtype(v): k for k, v in _DT.items()}


def load(path):
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(n))
        data = f.read()
    out = {}
    for k, v in header.items():
        if k == "__metadata__":
            continue
        a, b = v["data_offsets"]
        arr = np.frombuffer(data[a:b], dtype=_DT[v["dtype"]]).reshape(v["shape"])
        out[k] = torch.from_numpy(arr.copy())
    return out


def save(tensors, path, metadata=None):
    """tensors: name -> torch tensor or numpy array (F32/F64/I64/I32). Keys written sorted."""
    header, blobs, off = {}, [], 0
    if metadata:
        header["__metadata__"] = {k: str(v) for k, v in metadata.items()}
    for k in sorted(tensors):
        t = tensors[k]
        a = np.ascontiguousarray(t.detach().cpu().numpy() if torch.is_tensor(t) else t)
        b = a.tobytes()
        header[k] = {"dtype": _NAME[a.dtype], "shape": list(a.shape), "data_offsets": [off, off + len(b)]}
        blobs.append(b)
        off += len(b)
    h = json.dumps(header, separators=(",", ":")).encode()
    h += b" " * ((8 - len(h) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)))
        f.write(h)
        for b in blobs:
            f.write(b)


def read_metadata(path):
    """The __metadata__ string map of a safetensors file."""
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        return json.loads(f.read(n)).get("__metadata__", {})
