"""Minimal safetensors reader/writer for ocr-c's reference scripts (Debian has no python3-safetensors).

Writes the layout of the reference implementation: __metadata__ first, tensors sorted by dtype (the reference's
alignment order, largest first) then name, header padded with spaces to a multiple of 8. Reads with the same strict
checks ocr-c applies (contiguous offsets from 0, no trailing bytes)."""
import json
import struct

import numpy as np

_NP = {"F32": np.float32, "F16": np.float16, "U8": np.uint8, "I32": np.int32, "I64": np.int64}
# The reference writer sorts by its Dtype enum order (a total order by alignment), not by item size alone.
_RANK = {"U8": 0, "F16": 1, "BF16": 2, "I32": 3, "F32": 4, "I64": 5}


def _to_numpy(t):
    if hasattr(t, "detach"):  # torch tensor
        import torch
        if t.dtype == torch.bfloat16:
            return t.detach().contiguous().view(torch.int16).cpu().numpy().view(np.uint16), "BF16"
        t = t.detach().contiguous().cpu().numpy()
    a = np.asarray(t)
    a = a if a.flags.c_contiguous else a.copy(order="C")  # not ascontiguousarray: it turns 0-dim into [1]
    for name, dt in _NP.items():
        if a.dtype == dt:
            return a, name
    if a.dtype == np.float64:
        return a.astype(np.float32), "F32"
    if a.dtype == np.bool_:
        return a.astype(np.uint8), "U8"
    raise TypeError("unsupported dtype %s" % a.dtype)


def save(path, tensors, metadata=None):
    items = [(name,) + _to_numpy(t) for name, t in tensors.items()]
    items.sort(key=lambda it: (-_RANK[it[2]], it[0].encode()))
    header, offset, blobs = {}, 0, []
    if metadata:
        header["__metadata__"] = {str(k): str(v) for k, v in metadata.items()}
    for name, arr, dt in items:
        b = arr.tobytes()
        header[name] = {"dtype": dt, "shape": list(arr.shape), "data_offsets": [offset, offset + len(b)]}
        offset += len(b)
        blobs.append(b)
    h = json.dumps(header, separators=(",", ":")).encode()
    h += b" " * ((8 - len(h) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h + b"".join(blobs))


def load(path, as_torch=True):
    """Returns (dict name -> tensor, metadata dict)."""
    data = open(path, "rb").read()
    n = struct.unpack("<Q", data[:8])[0]
    header = json.loads(data[8:8 + n])
    meta = header.pop("__metadata__", {}) or {}
    body = data[8 + n:]
    at, out = 0, {}
    for name, e in sorted(header.items(), key=lambda kv: kv[1]["data_offsets"]):
        b, end = e["data_offsets"]
        if b != at:
            raise ValueError("%s: offsets not contiguous" % name)
        at = end
        dt = e["dtype"]
        if dt == "BF16":
            arr = np.frombuffer(body[b:end], dtype=np.uint16).reshape(e["shape"])
            if as_torch:
                import torch
                out[name] = torch.from_numpy(arr.astype(np.int16).copy()).view(torch.bfloat16)
                continue
        else:
            arr = np.frombuffer(body[b:end], dtype=_NP[dt]).reshape(e["shape"]).copy()
        if as_torch:
            import torch
            out[name] = torch.from_numpy(arr)
        else:
            out[name] = arr
    if at != len(body):
        raise ValueError("trailing bytes")
    return out, meta
