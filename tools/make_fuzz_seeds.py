#!/usr/bin/python3
"""Writes the fuzz targets' seed corpora, fuzz/corpus/NAME/ (a few small files per target).

A seed's name says what the library must do with it, and tests/test_fuzz_regress.c checks it:
  ok-*   accepted,  bad-*  refused cleanly,  any-*  either (behaviour another change may decide).
Run from the repository root:  /usr/bin/python3 tools/make_fuzz_seeds.py   (Debian python3-numpy, python3-opencv)
The files are committed; rerunning writes the same bytes.
"""
import json
import os
import shutil
import struct
import zlib

import cv2
import numpy as np

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
CORPUS = os.path.join(ROOT, "fuzz", "corpus")


def write(target, name, data):
    d = os.path.join(CORPUS, target)
    os.makedirs(d, exist_ok=True)
    if isinstance(data, str):
        data = data.encode("utf-8")
    with open(os.path.join(d, name), "wb") as f:
        f.write(data)


# ---------------------------------------------------------------- safetensors
DT = {"F32": ("<f4", 4), "F16": ("<f2", 2), "BF16": (None, 2), "U8": ("u1", 1), "I32": ("<i4", 4), "I64": ("<i8", 8)}


def st_file(tensors, meta=None, header_text=None, pad=True):
    """tensors: list of (name, dtype, shape, raw bytes). Offsets in list order."""
    header, blobs, off = {}, [], 0
    if meta is not None:
        header["__metadata__"] = meta
    for name, dt, shape, raw in tensors:
        header[name] = {"dtype": dt, "shape": list(shape), "data_offsets": [off, off + len(raw)]}
        blobs.append(raw)
        off += len(raw)
    h = header_text if header_text is not None else json.dumps(header, separators=(",", ":"), ensure_ascii=False)
    h = h.encode("utf-8")
    if pad:
        h += b" " * ((8 - len(h) % 8) % 8)
    return struct.pack("<Q", len(h)) + h + b"".join(blobs)


def arr(dt, shape, values):
    n = int(np.prod(shape)) if shape else 1
    if dt == "BF16":
        f = np.asarray(values[:n], dtype="<f4").view("<u4") >> 16
        return f.astype("<u2").tobytes()
    return np.asarray(values[:n], dtype=DT[dt][0]).tobytes()


def seeds_safetensors():
    vals = [0.5, -1.25, 3.0, 1e-3, -0.0, 7.5, 2.0, -4.0]
    w = arr("F32", [2, 3], vals)
    write("safetensors", "ok-empty", st_file([]))
    write("safetensors", "ok-checkpoint", st_file(
        [("conv.weight", "F32", [2, 3], w), ("conv.bias", "F16", [3], arr("F16", [3], vals)),
         ("bn.num_batches", "I64", [1], arr("I64", [1], [130])), ("mask", "U8", [2, 2], bytes([0, 1, 255, 7])),
         ("steps", "I32", [2], arr("I32", [2], [1, -2])), ("empty", "F32", [0, 4], b"")],
        meta={"train.step": "130", "train.best_hmean": "0.8551", "note": "caf\u00e9 \"q\"\n\t"}))
    write("safetensors", "ok-bf16-escaped-name", st_file(
        [("layer\u00e9.w", "BF16", [1, 2], arr("BF16", [1, 2], vals)), ("s", "F32", [], arr("F32", [], vals))],
        header_text='{"layer\\u00e9.w":{"dtype":"BF16","shape":[1,2],"data_offsets":[0,4]},'
                    '"s":{"shape":[],"dtype":"F32","data_offsets":[4,8]},"__metadata__":{"k\\n":"v\\ud83d\\ude00"}}'))
    # "\u005f_metadata__" is the metadata key to every JSON reader
    write("safetensors", "ok-escaped-metadata-key", st_file([], header_text='{"\\u005f_metadata__":{"k":"v"}}'))
    good = st_file([("a", "F32", [2], arr("F32", [2], vals))])
    write("safetensors", "bad-truncated", good[:-3])
    write("safetensors", "bad-trailing", good + b"\0")
    write("safetensors", "bad-header-length", struct.pack("<Q", 1 << 40) + b"{}")
    write("safetensors", "bad-duplicate-key", st_file([], header_text='{"a":{"dtype":"U8","shape":[0],"data_offsets":[0,0]},'
                                                                       '"a":{"dtype":"U8","shape":[0],"data_offsets":[0,0]}}'))
    write("safetensors", "bad-overlap", st_file([], header_text='{"a":{"dtype":"U8","shape":[2],"data_offsets":[0,2]},'
                                                                 '"b":{"dtype":"U8","shape":[2],"data_offsets":[1,3]}}') + b"abc")
    write("safetensors", "bad-dtype", st_file([], header_text='{"a":{"dtype":"F64","shape":[1],"data_offsets":[0,8]}}') + bytes(8))
    write("safetensors", "bad-metadata-value", st_file([], header_text='{"__metadata__":{"a":1}}'))


# ---------------------------------------------------------------- images
def png_chunk(kind, payload):
    return struct.pack(">I", len(payload)) + kind + payload + struct.pack(">I", zlib.crc32(kind + payload) & 0xffffffff)


def png_raw(w, h, depth, color, rows, interlace=0, extra=b""):
    ihdr = struct.pack(">IIBBBBB", w, h, depth, color, 0, 0, interlace)
    return (b"\x89PNG\r\n\x1a\n" + png_chunk(b"IHDR", ihdr) + extra +
            png_chunk(b"IDAT", zlib.compress(rows, 9)) + png_chunk(b"IEND", b""))


def seeds_image():
    rng = np.random.RandomState(20)
    rgb = rng.randint(0, 256, (3, 4, 3), dtype=np.uint8)
    grey = rng.randint(0, 256, (2, 3), dtype=np.uint8)
    write("image", "ok-rgb.png", cv2.imencode(".png", rgb)[1].tobytes())
    write("image", "ok-grey.png", cv2.imencode(".png", grey)[1].tobytes())
    write("image", "ok-rgba16.png", cv2.imencode(".png", rng.randint(0, 65536, (2, 2, 4)).astype(np.uint16))[1].tobytes())
    # palette with transparency, filter types 0..2 per row (hand-made: OpenCV writes no palette images)
    rows = b"\x00\x00\x01\x02" + b"\x01\x01\x01\x00" + b"\x02\x00\x00\x01"
    write("image", "ok-palette.png", png_raw(3, 3, 8, 3, rows, extra=png_chunk(b"PLTE", bytes(range(9))) + png_chunk(b"tRNS", b"\x80")))
    # Adam7 interlaced 2x2 grey: passes 1 (1 px), 6 (1 px), 7 (row of 2)
    write("image", "ok-interlaced.png", png_raw(2, 2, 8, 0, b"\x00\x10" + b"\x00\x20" + b"\x00\x30\x40", interlace=1))
    big = np.tile(np.arange(16, dtype=np.uint8)[None, :, None] * 16, (8, 1, 3))
    write("image", "ok-baseline.jpg", cv2.imencode(".jpg", big, [cv2.IMWRITE_JPEG_QUALITY, 50])[1].tobytes())
    write("image", "ok-progressive.jpg", cv2.imencode(".jpg", big[:, :8], [cv2.IMWRITE_JPEG_QUALITY, 30,
                                                                        cv2.IMWRITE_JPEG_PROGRESSIVE, 1])[1].tobytes())
    write("image", "ok-grey.jpg", cv2.imencode(".jpg", grey, [cv2.IMWRITE_JPEG_QUALITY, 40])[1].tobytes())
    bmp = cv2.imencode(".bmp", rgb[:, :3])[1].tobytes()
    write("image", "ok-rgb.bmp", bmp)
    write("image", "ok-grey8.bmp", cv2.imencode(".bmp", grey)[1].tobytes())
    # top-down BMP (negative height): valid; issue #20 says it is refused today, so either outcome for now
    td = bytearray(bmp)
    h = struct.unpack_from("<i", td, 22)[0]
    struct.pack_into("<i", td, 22, -h)
    write("image", "any-topdown.bmp", bytes(td))
    png = cv2.imencode(".png", rgb)[1].tobytes()
    write("image", "bad-truncated.png", png[:-10])
    bad_crc = bytearray(png)
    bad_crc[30] ^= 1
    write("image", "bad-crc.png", bytes(bad_crc))
    jpg = cv2.imencode(".jpg", big)[1].tobytes()
    write("image", "bad-truncated.jpg", jpg[:len(jpg) // 2])
    write("image", "bad-text", b"not an image\n")


# ---------------------------------------------------------------- ground truth (first byte: '0' ICDAR 2015, '1' polygon)
def seeds_icdar_gt():
    write("icdar_gt", "ok-icdar2015", "0\ufeff377,117,463,117,465,130,378,130,Genaxis Theatre\r\n"
                                      "493,115,519,115,519,131,493,131,[06]\r\n\r\n"
                                      "374,155,409,155,409,170,374,170,###\n"
                                      "10,10,60,10,60,30,10,30,2,500,000\n"
                                      "  1.5, 2e1 ,3,4,-5,6,7,8,\"quoted, \\\"text\\\"\"\n"
                                      "0,0,1,0,1,1,0,1,\n")
    write("icdar_gt", "ok-polygon", "1\n10,10,20,5,30,10,30,20,10,20,curved text,with comma\n"
                                    "0,0,4,0,2,3,###\n1,1,2,2,3,1,\"###\"\n5,5,6,6,7,5,8,8,9,9,\n"
                                    "1,2,3,4,5,6,7,8\n")
    # an odd count of numbers before the text: issue #20 makes this an error (a missing coordinate)
    write("icdar_gt", "any-polygon-odd", "1" + "5,5,6,6,7,5,8,8,9,9,10,text\n")
    write("icdar_gt", "ok-empty", "0")
    write("icdar_gt", "bad-icdar-short", "0" + "10,10,60,10,60,30,text\n")
    write("icdar_gt", "bad-icdar-nonnumber", "0" + "10,10,x,10,60,30,10,30,text\n")
    write("icdar_gt", "bad-polygon-two-points", "1" + "1,2,3,4,text\n")
    write("icdar_gt", "bad-range", "0" + "1e7,0,1,0,1,1,0,1,far\n")
    write("icdar_gt", "bad-utf8", b"0" + b"0,0,1,0,1,1,0,1,\xc3\x28\n")


# ---------------------------------------------------------------- detection result files (eval_dbnet --pred)
def seeds_results():
    write("results", "ok-boxes", "10,10,60,10,60,30,10,30,0.93\r\n\n1.5,2,3,4,5,6\n")
    write("results", "ok-polygon", "\ufeff0,0,10,0,12,5,10,10,0,10\n")
    write("results", "ok-empty", "")
    write("results", "bad-trailing-comma", "10,10,60,10,60,30,10,\n30,40,50\n")
    write("results", "bad-two-points", "1,2,3,4\n")
    write("results", "bad-nonnumber", "1,2,3,x,5,6\n")
    write("results", "bad-nan-score", "0,0,1,0,1,1,nan\n")


# ---------------------------------------------------------------- LMDB labels (PaddleOCR-style JSON)
def seeds_lmdb_label():
    write("lmdb_label", "ok-label", '[{"transcription": "Genaxis", "points": [[377, 117], [463, 117], [465, 130], [378, 130]]},'
                                    ' {"transcription": "###", "points": [[1.5, 2], [3, 4], [5e1, -6]]},'
                                    ' {"points": [[0,0],[1,0],[1,1],[0,1],[0.5,2]], "transcription": null, "ignore": true},'
                                    ' {"points": [[0,0],[4,0],[4,4]], "transcription": "caf\\u00e9 \\ud83d\\ude00", "ignore": false}]')
    write("lmdb_label", "ok-empty", " [ ] \n")
    write("lmdb_label", "bad-object", '{"points": [[0,0],[1,0],[1,1]]}')
    write("lmdb_label", "bad-two-points", '[{"points": [[0,0],[1,0]]}]')
    write("lmdb_label", "bad-range", '[{"points": [[0,0],[1e999,0],[1,1]]}]')
    write("lmdb_label", "bad-nul", '[{"points": [[0,0],[1,0],[1,1]], "transcription": "a\\u0000b"}]')
    write("lmdb_label", "bad-text", "plain recognition text")


# ---------------------------------------------------------------- JSON documents
def seeds_json():
    write("json", "ok-header", '{"__metadata__":{"format":"pt"},"w":{"dtype":"F32","shape":[2,3],"data_offsets":[0,24]}}')
    write("json", "ok-values", ' [0, -0, 1.5e-3, -2E+10, 1e308, true, false, null, "", "\\"\\\\\\/\\b\\f\\n\\r\\t", '
                               '"\\u00e9\\u4e2d\\ud83d\\ude00", "\u00e9\u4e2d\U0001f600", {}, [], {"a":{"a":[{}]}}] ')
    write("json", "ok-nested", "[" * 60 + "1" + "]" * 60)
    write("json", "ok-duplicate-keys", '{"a":1,"b":2,"a":3}')
    write("json", "ok-lone-surrogate", '["\\ud800", "\\u0000"]')
    write("json", "bad-trailing", '{"a":1} x')
    write("json", "bad-deep", "[" * 70 + "]" * 70)
    write("json", "bad-control", '["a\tb"]')
    write("json", "bad-number", "[01, 1.]")
    write("json", "bad-utf8", b'["\xed\xa0\x80"]')


def train_dbnet_settings():
    """(flag, default text or None, stored) of every row of train_dbnet's settings table (examples/train_dbnet.c)."""
    import re
    with open(os.path.join(ROOT, "examples", "train_dbnet.c")) as f:
        src = f.read()
    table = src[src.index("kSettings[] = {"):src.index("};", src.index("kSettings[] = {"))]
    rows = re.findall(r'\{"(--[a-z0-9-]+)", [A-Z]+\(\w+\), ("[^"]*"|NULL), (STORED|RUNTIME|OCR_EX_STORED|OCR_EX_RUNTIME)', table)
    assert len(rows) == table.count('{"--'), "a row of kSettings did not parse"
    return [(name, None if d == "NULL" else d[1:-1], "STORED" in kind) for name, d, kind in rows]


def train_dbnet_flags():
    return [name for name, _, _ in train_dbnet_settings()]


def seeds_cli():
    # the first byte is the mode: 0 train_dbnet's command line, 1 one flag of each type, 2 checkpoint metadata
    write("cli", "ok-train-defaults", b"\x00")
    write("cli", "ok-train-flags", b"\x00--steps\n40\n--lr=1e-3\n--width\n0.5\n--optimizer\nsgd\n--check-numerics\n--out\nruns/x")
    write("cli", "bad-train-range", b"\x00--size\n33")
    write("cli", "bad-train-unknown", b"\x00--bogus\n1")
    write("cli", "bad-train-float", b"\x00--lr\n1e99")
    write("cli", "bad-train-missing-value", b"\x00--steps")
    write("cli", "bad-train-bool-value", b"\x00--overwrite=1")
    write("cli", "bad-train-help", b"\x00--help")
    write("cli", "ok-types", b"\x01--int=-3\n--long\n9223372036854775807\n--float\n-1.5e-38\n--string=\n--bool\npos\n--\n-x")
    write("cli", "bad-types-int", b"\x01--int\n2147483648")
    write("cli", "bad-types-long", b"\x01--long\n9223372036854775808")
    write("cli", "bad-types-tiny", b"\x01--float\n1e-40")
    stored = ["train.%s=%s" % (n[2:].replace("-", "_"), d or "") for n, d, kept in train_dbnet_settings() if kept]
    write("cli", "ok-meta", ("\x02" + "\n".join(stored)).encode())
    write("cli", "bad-meta-incomplete", b"\x02train.steps=50\ntrain.lr=0.00200000009\ntrain.data=synth\ntrain.init=")
    write("cli", "bad-meta-value", b"\x02train.steps=five")
    write("cli", "bad-meta-range", b"\x02train.width=0")


DICTS = {
    "json": ['"{"', '"}"', '"["', '"]"', '":"', '","', '"\\""', '"true"', '"false"', '"null"', '"-0"', '"1e308"', '"0.5E-3"',
             '"\\\\u"', '"\\\\ud83d\\\\ude00"', '"\\\\n"', '"\\xc3\\xa9"', '"\\xf0\\x9f\\x98\\x80"'],
    "safetensors": ['"\\"dtype\\""', '"\\"shape\\""', '"\\"data_offsets\\""', '"\\"__metadata__\\""', '"\\"F32\\""', '"\\"F16\\""',
                    '"\\"BF16\\""', '"\\"U8\\""', '"\\"I32\\""', '"\\"I64\\""', '"{"', '"}"', '"["', '"]"', '":"', '","',
                    '"\\x08\\x00\\x00\\x00\\x00\\x00\\x00\\x00"'],
    "image": ['"\\x89PNG\\x0d\\x0a\\x1a\\x0a"', '"IHDR"', '"IDAT"', '"IEND"', '"PLTE"', '"tRNS"', '"\\xff\\xd8\\xff"', '"\\xff\\xc0"',
              '"\\xff\\xc2"', '"\\xff\\xc4"', '"\\xff\\xda"', '"\\xff\\xdb"', '"\\xff\\xdd"', '"\\xff\\xd9"', '"\\xff\\xe0"', '"BM"',
              '"\\x28\\x00\\x00\\x00"'],
    "icdar_gt": ['","', '"###"', '"\\""', '"\\x0d\\x0a"', '"\\xef\\xbb\\xbf"', '"1e5"', '"-0.5"', '"1000000"', '" "'],
    "results": ['","', '"\\x0d\\x0a"', '"\\xef\\xbb\\xbf"', '"1e5"', '"-0.5"', '"0.93"', '"nan"', '" "'],
    "cli": ['"--"', '"="', '"\\x0a"', '"-h"', '"--help"', '"--version"', '"1e-38"', '"3.4e38"', '"2147483647"', '"-2147483648"',
            '"9223372036854775807"', '"nan"', '"inf"', '"0x10"', '"train."'] +
           ['"%s"' % f for f in train_dbnet_flags()] + ['"train.%s="' % f[2:].replace("-", "_") for f in train_dbnet_flags()],
    "lmdb_label": ['"\\"points\\""', '"\\"transcription\\""', '"\\"ignore\\""', '"###"', '"[["', '"]]"', '"],["', '"true"',
                   '"null"', '"{"', '"}"', '":"', '","'],
}


def main():
    if os.path.isdir(CORPUS):
        shutil.rmtree(CORPUS)
    seeds_safetensors()
    seeds_image()
    seeds_icdar_gt()
    seeds_lmdb_label()
    seeds_json()
    seeds_results()
    seeds_cli()
    for name, tokens in DICTS.items():
        with open(os.path.join(ROOT, "fuzz", name + ".dict"), "w") as f:
            f.write("# libFuzzer dictionary for fuzz/fuzz_%s.c (written by tools/make_fuzz_seeds.py)\n" % name)
            f.write("".join(t + "\n" for t in tokens))
    for t in sorted(os.listdir(CORPUS)):
        files = os.listdir(os.path.join(CORPUS, t))
        size = sum(os.path.getsize(os.path.join(CORPUS, t, f)) for f in files)
        print("fuzz/corpus/%s: %d files, %d bytes" % (t, len(files), size))


if __name__ == "__main__":
    main()
