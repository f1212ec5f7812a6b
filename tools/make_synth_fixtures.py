#!/usr/bin/python3
"""OpenCV references for the resampling in ocr_data.h's augmentation (tests/test_data_augment.c).

Writes tests/fixtures/synth/warp_ref.safetensors: a smooth random RGB image and what cv2.resize (INTER_LINEAR) and
cv2.warpAffine (rotation about the centre, INTER_LINEAR, constant 0 border) make of it. OpenCV works in pixel-index
coordinates (centre of pixel i at i); ocr-c's continuous coordinates put it at i + 0.5, so a rotation about
((W-1)/2, (H-1)/2) in OpenCV is ocr-c's rotation about (W/2, H/2). Each reference comes with a mask of the pixels
whose source point lies at least 1.5 px inside the image: there both sides interpolate between the same four
pixels; at the border they legitimately differ (OpenCV blends with the zero border, ocr-c extends the edge).
Deterministic: fixed seed, no time or platform input. Run from the repository root: /usr/bin/python3 tools/make_synth_fixtures.py
"""
import os
import sys

import cv2
import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import ocr_st  # noqa: E402

W, H = 48, 40
ROT_DEG = 7.5
SIZES = {"up": (77, 61), "down": (21, 17)}


def smooth_image(rng):
    # Coarse random grid upsampled: gradients stay small, so OpenCV's fixed-point weights (1/32 px positions in
    # warpAffine, 11-bit weights in resize) move a value by at most about one level.
    coarse = rng.uniform(0, 255, size=(6, 7, 3)).astype(np.float32)
    img = cv2.resize(coarse, (W, H), interpolation=cv2.INTER_CUBIC)
    return np.clip(np.rint(img), 0, 255).astype(np.uint8)


def interior(src_x, src_y):
    return ((src_x >= 1.5) & (src_x <= W - 2.5) & (src_y >= 1.5) & (src_y <= H - 2.5)).astype(np.uint8)


def main():
    rng = np.random.default_rng(20240611)
    img = smooth_image(rng)
    out = {"input": img}
    for name, (w, h) in SIZES.items():
        out["resize_" + name] = cv2.resize(img, (w, h), interpolation=cv2.INTER_LINEAR)
        xs = (np.arange(w) + 0.5) * W / w - 0.5
        ys = (np.arange(h) + 0.5) * H / h - 0.5
        out["resize_" + name + "_mask"] = interior(xs[None, :].repeat(h, 0), ys[:, None].repeat(w, 1))
    m = cv2.getRotationMatrix2D(((W - 1) / 2.0, (H - 1) / 2.0), ROT_DEG, 1.0)
    out["rotate"] = cv2.warpAffine(img, m, (W, H), flags=cv2.INTER_LINEAR, borderMode=cv2.BORDER_CONSTANT, borderValue=0)
    inv = cv2.invertAffineTransform(m)
    gx, gy = np.meshgrid(np.arange(W, dtype=np.float64), np.arange(H, dtype=np.float64))
    out["rotate_mask"] = interior(inv[0, 0] * gx + inv[0, 1] * gy + inv[0, 2], inv[1, 0] * gx + inv[1, 1] * gy + inv[1, 2])
    os.makedirs("tests/fixtures/synth", exist_ok=True)
    ocr_st.save("tests/fixtures/synth/warp_ref.safetensors", out,
                metadata={"rotate_deg": repr(ROT_DEG), "opencv": cv2.__version__, "script": "tools/make_synth_fixtures.py"})


if __name__ == "__main__":
    main()
