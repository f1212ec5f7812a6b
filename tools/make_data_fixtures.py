#!/usr/bin/env python3
"""Fixtures for tests/test_data_io.c: tiny images in every format ocr-c decodes, the pixels OpenCV decodes from
them (the independent reference), and ICDAR / Total-Text style folders with awkward ground-truth files.

Deterministic: run from the repository root,  /usr/bin/python3 tools/make_data_fixtures.py
Writes tests/fixtures/data/ (about 20 KB)."""
import os
import sys

import cv2
import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import ocr_st  # noqa: E402

OUT = os.path.join("tests", "fixtures", "data")


def pattern(h, w, c, seed):
    """Smooth gradients plus a little noise: realistic for JPEG, distinct per channel."""
    rng = np.random.RandomState(seed)
    y, x = np.mgrid[0:h, 0:w]
    chans = []
    for k in range(c):
        v = (x * (7 + 5 * k) + y * (11 - 3 * k) + 40 * k) % 256
        chans.append(v + rng.randint(-6, 7, size=(h, w)))
    return np.clip(np.stack(chans, axis=-1), 0, 255).astype(np.uint8)


def write_images():
    d = os.path.join(OUT, "img")
    os.makedirs(d, exist_ok=True)
    h, w = 11, 17
    bgr = pattern(h, w, 3, 1)
    grey = pattern(h, w, 1, 2)[:, :, 0]
    bgra = np.concatenate([pattern(h, w, 3, 3), pattern(h, w, 1, 4)], axis=-1)
    grey16 = (pattern(h, w, 1, 5)[:, :, 0].astype(np.uint16) * 257 + 3).astype(np.uint16)
    files = {
        "rgb.png": (bgr, []), "grey.png": (grey, []), "rgba.png": (bgra, []), "grey16.png": (grey16, []),
        "rgb.jpg": (bgr, [cv2.IMWRITE_JPEG_QUALITY, 92]), "grey.jpg": (grey, [cv2.IMWRITE_JPEG_QUALITY, 92]),
        "progressive.jpg": (bgr, [cv2.IMWRITE_JPEG_QUALITY, 90, cv2.IMWRITE_JPEG_PROGRESSIVE, 1]),
        "rgb.bmp": (bgr, []), "grey.bmp": (grey, []),
    }
    expected = {}
    for name, (img, params) in sorted(files.items()):
        path = os.path.join(d, name)
        assert cv2.imwrite(path, img, params), path
        ref = cv2.imread(path, cv2.IMREAD_COLOR)  # grey -> replicated, alpha dropped, 16 -> 8 bit
        expected[name] = np.ascontiguousarray(ref[:, :, ::-1])
    ocr_st.save(os.path.join(d, "expected.safetensors"), expected)


def write(path, data):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "wb") as f:
        f.write(data)


def write_icdar():
    d = os.path.join(OUT, "icdar")
    for i, (name, seed) in enumerate([("img_1.png", 10), ("img_2.jpg", 11), ("img_10.bmp", 12)]):
        img = pattern(24 + 4 * i, 32, 3, seed)
        os.makedirs(os.path.join(d, "images"), exist_ok=True)
        assert cv2.imwrite(os.path.join(d, "images", name), img)
    # BOM, CRLF, commas inside the transcription, a don't-care, a quoted transcription, a blank line, a numeric text.
    write(os.path.join(d, "gts", "gt_img_1.txt"),
          b"\xef\xbb\xbf377,117,463,117,465,130,378,130,Genaxis Theatre\r\n"
          b"493,115,519,115,519,131,493,131,[06]\r\n"
          b"\r\n"
          b"374,155,409,155,409,170,374,170,###\r\n"
          b"1,2,3,4,5,6,7,8,Hello, world, again\r\n"
          b"10,20,30,20,30,40,10,40,\"say \\\"hi\\\"\"\r\n"
          b"-5,-6,50.5,-6,50.5,12.25,-5,12.25,2017\r\n")
    # Plain LF, no BOM, UTF-8 text, no trailing newline.
    write(os.path.join(d, "gts", "gt_img_2.txt"), "0,0,10,0,10,5,0,5,Stra\u00dfe\n2,2,8,2,8,4,2,4,\u65e5\u672c".encode())
    # DB's naming: <image name>.txt, and an empty file (an image without text).
    write(os.path.join(d, "gts", "img_10.bmp.txt"), b"")
    # Total-Text as converted by DB: n points then the transcription.
    t = os.path.join(OUT, "totaltext")
    os.makedirs(os.path.join(t, "images"), exist_ok=True)
    assert cv2.imwrite(os.path.join(t, "images", "img11.png"), pattern(40, 48, 3, 13))
    write(os.path.join(t, "gts", "img11.txt"),
          b"259,313,389,427,354,302,542,462,417,459,507,582,PAUL\n"
          b"1,1,9,1,9,9,1,9,5,12,###\n"
          b"0,0,4,0,4,4,12,34\n")


if __name__ == "__main__":
    write_images()
    write_icdar()
    print("wrote", OUT)
