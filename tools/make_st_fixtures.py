#!/usr/bin/env python3
"""Reference fixtures for tests/test_tensor.c and tests/test_safetensors.c.

Run from the repository root:  /usr/bin/python3 tools/make_st_fixtures.py
Deterministic (fixed seed): a rerun rewrites the same bytes. Writes into tests/fixtures/st/:

  tiny_torch.safetensors  model.state_dict() of tools/check_st_torch.py's TinyNet (Conv2d + BatchNorm2d with the I64
                          num_batches_tracked scalar, plus F16, BF16, U8, I32, empty and 0-dim buffers), every entry
                          set by torch to the deterministic pattern of check_st_torch.py, saved through tools/ocr_st.py
                          with {"format": "pt"} metadata. The C test recomputes the pattern.
  half.safetensors        float32 -> float16 / bfloat16 conversions by numpy and torch:
                          f32_in [N] F32        inputs: specials, subnormals, exact halfway cases and their
                                                neighbours for both formats, overflow, Inf, NaN with payloads
                          f16_out [N] F16       numpy astype(float16) (round to nearest even)
                          bf16_out [N] BF16     torch .to(bfloat16) (round to nearest even)
                          f16_all_as_f32 [65536] F32   every float16 bit pattern widened by numpy
"""
import os
import sys

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import check_st_torch  # noqa: E402
import ocr_st  # noqa: E402

OUT = os.path.join("tests", "fixtures", "st")


def f32_from_bits(bits):
    return np.asarray(bits, dtype=np.uint32).view(np.float32)


def conversion_inputs():
    rng = np.random.default_rng(20240611)
    bits = [
        0x00000000, 0x80000000, 0x7F800000, 0xFF800000,              # zeros, infinities
        0x7FC00000, 0xFFC00000, 0x7F800001, 0x7FBFFFFF, 0xFFA00000,  # NaNs: quiet, signalling, payloads
        0x00000001, 0x807FFFFF, 0x00400000,                          # float32 subnormals (flush to 0 in f16)
        0x3F800000, 0xBF800000, 0x3F7FFFFF, 0x3FC00000,
    ]
    values = [
        65504.0, -65504.0, 65519.0, 65519.99, 65520.0, -65520.0, 65536.0, 1e10, -1e38, 3.4028235e38,
        2.0 ** -14, 2.0 ** -14 - 2.0 ** -24, 2.0 ** -24, -(2.0 ** -24), 2.0 ** -25, 2.0 ** -25 * (1 + 2.0 ** -23),
        2.0 ** -25 * (1 - 2.0 ** -24), 3 * 2.0 ** -26, 1.5 * 2.0 ** -24, 2.5 * 2.0 ** -24, 2.0 ** -26, 2.0 ** -40,
        1.0 + 2.0 ** -11, 1.0 + 3 * 2.0 ** -11, 1.0 + 2.0 ** -11 + 2.0 ** -23, 2048.0 + 1.0, 2048.0 + 3.0,
        1.0 + 2.0 ** -8, 1.0 + 3 * 2.0 ** -8, 0.1, -0.1, 1.0 / 3.0, 3.14159265, 1000.75,
    ]
    xs = [f32_from_bits(bits), np.asarray(values, dtype=np.float32)]
    # Every finite float16 h: its exact value, the exact midpoint to the next one and both float32 neighbours of
    # that midpoint (the round-half-to-even cases).
    h = rng.choice(np.arange(0, 0x7BFF, dtype=np.uint16), 600, replace=False)
    h[:8] = [0, 1, 2, 0x3FF, 0x400, 0x401, 0x7BFE, 0x3C00]
    h = np.concatenate([h, h[:200] | 0x8000]).astype(np.uint16)
    lo = h.view(np.float16).astype(np.float64)
    hi = (h + 1).astype(np.uint16).view(np.float16).astype(np.float64)
    hi[(h & 0x7FFF) == 0x7BFF] = 65536.0 * np.sign(lo[(h & 0x7FFF) == 0x7BFF] + 0.5)
    mid = ((lo + hi) / 2).astype(np.float32)  # exact: float16 has 11 significant bits, float32 24
    xs += [lo.astype(np.float32), mid, np.nextafter(mid, np.float32(np.inf)), np.nextafter(mid, np.float32(-np.inf))]
    # bfloat16 halfway cases: low 16 bits 0x8000 and its neighbours, odd and even upper halves, up to the largest.
    up = rng.integers(0, 0x7F80, 300, dtype=np.uint32)
    up[:4] = [0x7F7F, 0x7F7E, 0x0000, 0x3F80]
    up = np.concatenate([up, up[:100] | 0x8000])
    for low in (0x8000, 0x7FFF, 0x8001, 0x0000):
        xs.append(f32_from_bits((up << 16) | low))
    # Random float32 bit patterns around float16's exponent range, both signs.
    e = rng.integers(127 - 30, 127 + 20, 500, dtype=np.uint32)
    m = rng.integers(0, 1 << 23, 500, dtype=np.uint32)
    s = rng.integers(0, 2, 500, dtype=np.uint32)
    xs.append(f32_from_bits((s << 31) | (e << 23) | m))
    return np.concatenate(xs).astype(np.float32)


def make_half():
    x = conversion_inputs()
    with np.errstate(over="ignore", invalid="ignore"):
        f16 = x.astype(np.float16)
    bf16 = torch.from_numpy(x.copy()).to(torch.bfloat16)
    # Two libraries, one rounding rule: torch's float16 must agree with numpy's bit for bit (NaNs aside).
    t16 = torch.from_numpy(x.copy()).to(torch.float16).numpy()
    nan = np.isnan(x)
    assert np.array_equal(t16.view(np.uint16)[~nan], f16.view(np.uint16)[~nan]), "numpy and torch disagree on float16"
    all16 = np.arange(65536, dtype=np.uint32).astype(np.uint16).view(np.float16).astype(np.float32)
    ocr_st.save(os.path.join(OUT, "half.safetensors"),
                {"f32_in": x, "f16_out": f16, "bf16_out": bf16, "f16_all_as_f32": all16},
                {"inputs": str(len(x))})
    return len(x)


def make_tiny_torch():
    torch.manual_seed(0)
    net = check_st_torch.tiny_net()
    with torch.no_grad():
        for name, t in net.state_dict().items():
            t.copy_(check_st_torch.expected_torch(name, t))
    ocr_st.save(os.path.join(OUT, "tiny_torch.safetensors"), net.state_dict(), {"format": "pt"})


def main():
    os.makedirs(OUT, exist_ok=True)
    n = make_half()
    make_tiny_torch()
    total = sum(os.path.getsize(os.path.join(OUT, f)) for f in os.listdir(OUT))
    print("make_st_fixtures: %d conversion inputs; %s holds %d bytes" % (n, OUT, total))


if __name__ == "__main__":
    main()
