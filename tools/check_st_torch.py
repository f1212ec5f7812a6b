#!/usr/bin/env python3
"""Checks that a safetensors file written by ocr-c (tests/test_safetensors.c) is one PyTorch tooling accepts.

    /usr/bin/python3 tools/check_st_torch.py FILE [--expect-fail BAD...]
        exit 0 = FILE is ok (and every BAD is refused), 1 = a file was judged wrongly, 2 = usage or setup.
        The BAD files are negative controls: they show the checks can fail, for the price of one torch import.

1. Validates the layout strictly, as the reference implementation writes it: 8-byte length, header a multiple of 8
   bytes padded with spaces only, compact JSON identical to what the reference writer emits (__metadata__ first,
   tensors in data order, sorted by dtype alignment descending then name), contiguous data_offsets from 0, sizes
   equal to numel * dtype size, no trailing bytes.
2. Loads every tensor into torch and compares it with the deterministic pattern below (the C test writes the same).
3. Loads the tensors into TinyNet with load_state_dict(strict=True) and checks the module's state afterwards.

The pattern and TinyNet also define the PyTorch-written fixture (tools/make_st_fixtures.py), so both directions
of the interoperability test agree on one definition.
"""
import json
import os
import struct
import sys

# The reference writer's dtype order (its Dtype enum order), and element sizes.
DTYPE_RANK = {"U8": 0, "F16": 1, "BF16": 2, "I32": 3, "F32": 4, "I64": 5}
DTYPE_SIZE = {"U8": 1, "F16": 2, "BF16": 2, "I32": 4, "F32": 4, "I64": 8}
EXPECTED_META = {"format": "pt", "writer": "ocr-c", "note": "tab\t quote\" backslash\\ \u00e9 \U0001f600"}


def name_key(name):
    """A small hash of the tensor name, so every tensor gets a different pattern (C: st_name_key)."""
    return sum((j + 1) * b for j, b in enumerate(name.encode())) % 1009


def pattern_base(name, n):
    """Integers 0..100 for elements 0..n-1 of tensor `name`."""
    import numpy as np
    i = np.arange(n, dtype=np.int64)
    return (i * 37 + name_key(name) * 11) % 101


def pattern(name, dtype, shape):
    """The expected values as a numpy array: exact in every dtype (floats are multiples of 1/64 below 1)."""
    import numpy as np
    n = int(np.prod(shape, dtype=np.int64)) if len(shape) else 1
    b = pattern_base(name, n)
    if dtype in ("F32", "F16", "BF16"):
        v = (b - 50).astype(np.float32) / np.float32(64)
    elif dtype == "U8":
        v = (b * 2 + 3).astype(np.uint8)
    elif dtype == "I32":
        v = ((b - 50) * 40000001).astype(np.int32)
    elif dtype == "I64":
        v = (b - 50) * 1000000000039
    else:
        raise ValueError("no pattern for dtype %s" % dtype)
    return v.reshape(shape)


def tiny_net():
    import torch

    class TinyNet(torch.nn.Module):
        """conv + BatchNorm (with its I64 num_batches_tracked scalar) and one buffer of every other dtype."""

        def __init__(self):
            super().__init__()
            self.conv = torch.nn.Conv2d(3, 4, 3, padding=1)
            self.bn = torch.nn.BatchNorm2d(4)
            self.register_buffer("half_w", torch.zeros(2, 5, dtype=torch.float16))
            self.register_buffer("bf16_w", torch.zeros(3, 2, dtype=torch.bfloat16))
            self.register_buffer("u8_w", torch.zeros(5, dtype=torch.uint8))
            self.register_buffer("i32_w", torch.zeros(2, 2, dtype=torch.int32))
            self.register_buffer("empty_w", torch.zeros(0, 3))
            self.register_buffer("scale", torch.zeros(()))

    return TinyNet()


def torch_dtype_name(t):
    import torch
    return {torch.float32: "F32", torch.float16: "F16", torch.bfloat16: "BF16", torch.uint8: "U8",
            torch.int32: "I32", torch.int64: "I64"}[t.dtype]


def expected_torch(name, t):
    """The pattern for state-dict entry `name` shaped and typed like torch tensor t."""
    import torch
    dt = torch_dtype_name(t)
    v = torch.from_numpy(pattern(name, dt, list(t.shape)).copy())
    return v.to(t.dtype)


class CheckError(Exception):
    pass


def fail(msg):
    raise CheckError(msg)


def check_layout(data):
    """Strict structural validation; returns (header dict in file order, metadata)."""
    if len(data) < 8:
        fail("file has %d bytes" % len(data))
    n = struct.unpack("<Q", data[:8])[0]
    if n % 8 != 0:
        fail("header length %d is not a multiple of 8" % n)
    if 8 + n > len(data):
        fail("header length %d runs past the file (%d bytes)" % (n, len(data)))
    raw = data[8:8 + n]
    text = raw.rstrip(b" ")
    if len(raw) - len(text) >= 8:
        fail("header padded with %d spaces; the writer pads to the next multiple of 8 only" % (len(raw) - len(text)))
    try:
        pairs = json.loads(text.decode("utf-8"), object_pairs_hook=lambda kv: kv)
    except (UnicodeDecodeError, ValueError) as e:
        fail("header is not valid UTF-8 JSON: %s" % e)
    if not isinstance(pairs, list) or not all(isinstance(p, tuple) for p in pairs):
        fail("header is not a JSON object")
    keys = [k for k, _ in pairs]
    if len(set(keys)) != len(keys):
        fail("duplicate keys in the header")
    meta = {}
    if "__metadata__" in keys:
        if keys[0] != "__metadata__":
            fail("__metadata__ is not the first key")
        mpairs = pairs[0][1]
        if not isinstance(mpairs, list) or not all(isinstance(k, str) and isinstance(v, str) for k, v in mpairs):
            fail("__metadata__ must map strings to strings")
        meta = dict(mpairs)
        pairs = pairs[1:]
    entries = []
    for name, e in pairs:
        if not isinstance(e, list) or [k for k, _ in e] != ["dtype", "shape", "data_offsets"]:
            fail("entry %r must hold exactly dtype, shape, data_offsets in that order" % name)
        e = dict(e)
        if e["dtype"] not in DTYPE_RANK:
            fail("entry %r has dtype %r" % (name, e["dtype"]))
        entries.append((name, e))
    at = 0
    for name, e in entries:
        b, end = e["data_offsets"]
        numel = 1
        for d in e["shape"]:
            if not isinstance(d, int) or d < 0:
                fail("entry %r has a bad shape %r" % (name, e["shape"]))
            numel *= d
        if b != at:
            fail("entry %r starts at %d, expected %d: offsets must be contiguous in header order" % (name, b, at))
        if end - b != numel * DTYPE_SIZE[e["dtype"]]:
            fail("entry %r spans %d bytes, its shape needs %d" % (name, end - b, numel * DTYPE_SIZE[e["dtype"]]))
        at = end
    if at != len(data) - 8 - n:
        fail("tensors cover %d bytes but the data section has %d" % (at, len(data) - 8 - n))
    order = sorted(entries, key=lambda ne: (-DTYPE_RANK[ne[1]["dtype"]], ne[0].encode()))
    if [ne[0] for ne in order] != [ne[0] for ne in entries]:
        fail("tensors are not in writer order (dtype alignment descending, then name): %s"
             % [ne[0] for ne in entries])
    # Byte-exact against the reference writer's compact serialisation of the same header.
    header = {}
    if meta or "__metadata__" in keys:
        header["__metadata__"] = meta
    for name, e in entries:
        header[name] = {"dtype": e["dtype"], "shape": e["shape"], "data_offsets": e["data_offsets"]}
    again = json.dumps(header, separators=(",", ":"), ensure_ascii=False).encode("utf-8")
    if again != text:
        fail("header differs from the compact form the reference writer emits:\n  file: %r\n  want: %r" % (text, again))
    return entries, meta


def check_file(path):
    """Raises CheckError naming what is wrong with the file."""
    import torch
    import ocr_st

    with open(path, "rb") as f:
        data = f.read()
    entries, meta = check_layout(data)
    if meta != EXPECTED_META:
        fail("metadata %r, expected %r" % (meta, EXPECTED_META))

    tensors, _ = ocr_st.load(path)
    net = tiny_net()
    want = net.state_dict()
    for name, e in entries:
        t = tensors[name]
        if name not in want:
            fail("unexpected tensor %r" % name)
        if list(t.shape) != list(want[name].shape) or t.dtype != want[name].dtype:
            fail("%r is %s %s, TinyNet has %s %s" % (name, t.dtype, list(t.shape), want[name].dtype, list(want[name].shape)))
        if e["dtype"] != torch_dtype_name(t):
            fail("%r: dtype string %s for a %s tensor" % (name, e["dtype"], t.dtype))
        if not torch.equal(t, expected_torch(name, t)):
            fail("%r holds %s, expected the pattern %s" % (name, t.flatten()[:8].tolist(),
                                                          expected_torch(name, t).flatten()[:8].tolist()))
    try:
        net.load_state_dict(tensors, strict=True)
    except RuntimeError as e:
        fail("load_state_dict(strict=True) refused the tensors: %s" % e)
    for name, t in net.state_dict().items():
        if not torch.equal(t, expected_torch(name, t)):
            fail("after load_state_dict, %r differs from the pattern" % name)
    return len(entries)


def main():
    args = sys.argv[1:]
    if not args or args[0].startswith("-") or (len(args) > 1 and args[1] != "--expect-fail"):
        print("usage: check_st_torch.py FILE [--expect-fail BAD...]", file=sys.stderr)
        return 2
    try:
        import numpy  # noqa: F401
        import torch  # noqa: F401
    except ImportError as e:
        print("check_st_torch: needs python3-torch and python3-numpy (%s)" % e, file=sys.stderr)
        return 2
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    try:
        n = check_file(args[0])
    except CheckError as e:
        print("check_st_torch: %s: %s" % (args[0], e), file=sys.stderr)
        return 1
    print("check_st_torch: %s: %d tensors ok, loaded into TinyNet with strict=True" % (args[0], n))
    for bad in args[2:]:
        try:
            check_file(bad)
        except Exception as e:  # any refusal will do, including ocr_st's or torch's own
            print("check_st_torch: %s refused as expected: %s" % (bad, str(e).splitlines()[0][:160]))
            continue
        print("check_st_torch: %s was accepted but is wrong" % bad, file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
