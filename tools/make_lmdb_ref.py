#!/usr/bin/env python3
"""Reference LMDB datasets for tests/test_data_io.c, written with Debian's python3-lmdb (the independent writer).

    /usr/bin/python3 tools/make_lmdb_ref.py OUTDIR        writes OUTDIR/good, OUTDIR/bad, OUTDIR/nonum (LMDB
                                                          directories) and OUTDIR/expected.safetensors
    /usr/bin/python3 tools/make_lmdb_ref.py --check DIR   reads an LMDB that ocr-c wrote and prints one line per
                                                          sample (key sizes, texts, points), the layout checked

Layout (clovaai / PaddleOCR convention, 1-based): num-samples = ASCII count, image-%09d = encoded image bytes,
label-%09d = UTF-8 JSON [{"transcription": ..., "points": [[x, y], ...]}, ...] or plain text (recognition).
Deterministic: every image and label comes from a fixed seed."""
import json
import os
import sys

import cv2
import lmdb
import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import ocr_st  # noqa: E402

TEXTS = ["Genaxis Theatre", "Stra\u00dfe", "\u65e5\u672c\u8a9e", "###", "a,b \"q\"", "", "2017", "x\\y"]


def image(rng, h, w):
    y, x = np.mgrid[0:h, 0:w]
    base = np.stack([(x * 5 + y * 3) % 256, (x * 2 + y * 7) % 256, (x + y * 11) % 256], axis=-1)
    return np.clip(base + rng.randint(-8, 9, size=(h, w, 3)), 0, 255).astype(np.uint8)


def good_samples():
    rng = np.random.RandomState(1234)
    out = []
    for i in range(12):
        h, w = 20 + 3 * i, 28 + 5 * (i % 4)
        fmt = ["png", "jpg", "bmp"][i % 3]
        ok, enc = cv2.imencode("." + fmt, image(rng, h, w))
        assert ok
        polys = []
        for k in range(i % 4):
            n = 4 if k % 2 == 0 else 4 + 2 * (1 + (i + k) % 5)  # quads and Total-Text style polygons
            pts = [[round(float(v), 2) for v in rng.uniform(-3, 60, size=2)] for _ in range(n)]
            polys.append({"transcription": TEXTS[(i + k) % len(TEXTS)], "points": pts})
        if i == 11:
            label = "plain text, for a recognition set"
        else:
            label = json.dumps(polys, ensure_ascii=(i % 2 == 0))
        out.append((enc.tobytes(), label.encode("utf-8"), polys, fmt, (h, w)))
    return out


def write_lmdb(path, records):
    env = lmdb.open(path, map_size=1 << 26)
    with env.begin(write=True) as txn:
        for k, v in records:
            txn.put(k.encode(), v)
    env.close()


def main(outdir):
    os.makedirs(outdir, exist_ok=True)
    good = good_samples()
    recs, expected, meta = [], {}, {"num": str(len(good))}
    for i, (img, label, polys, fmt, (h, w)) in enumerate(good, 1):
        recs += [("image-%09d" % i, img), ("label-%09d" % i, label)]
        dec = cv2.imdecode(np.frombuffer(img, np.uint8), cv2.IMREAD_COLOR)
        expected["image-%09d" % i] = np.ascontiguousarray(dec[:, :, ::-1])
        if label.startswith(b"["):
            pts = [p for poly in polys for p in poly["points"]]
            info = [[len(p["points"]), int(p["transcription"] == "###")] for p in polys]
            texts = [p["transcription"] for p in polys]
        else:
            pts, info, texts = [[0, 0], [w, 0], [w, h], [0, h]], [[4, 0]], [label.decode()]
        expected["points-%09d" % i] = np.array(pts, np.float32).reshape(-1, 2)
        expected["info-%09d" % i] = np.array(info, np.int32).reshape(-1, 2)
        meta["texts-%09d" % i] = json.dumps(texts)
        meta["format-%09d" % i] = fmt
    recs.append(("num-samples", str(len(good)).encode()))
    write_lmdb(os.path.join(outdir, "good"), recs)
    ocr_st.save(os.path.join(outdir, "expected.safetensors"), expected, meta)

    png = good[0][0]
    quad = [[0, 0], [4, 0], [4, 4], [0, 4]]
    bad = [
        json.dumps([{"points": quad, "transcription": "x"}])[:-3],                  # 1: truncated JSON
        json.dumps([{"points": quad[:2], "transcription": "x"}]),                  # 2: two points
        '[{"points": [[0, 0], [1e999, 0], [4, 4]], "transcription": "x"}]',        # 3: infinite coordinate
        json.dumps([{"points": quad, "transcription": "x"}]),                      # 4: image key missing
        json.dumps([{"points": quad, "transcription": "x"}]),                      # 5: truncated PNG
        b'[{"points": [[0,0],[4,0],[4,4]], "transcription": "\xff\xfe"}]',          # 6: not UTF-8
        json.dumps([{"points": [[0, 0, 1], [4, 0], [4, 4]]}]),                     # 7: a point with 3 values
        json.dumps([{"points": "0,0,4,0,4,4"}]),                                   # 8: points not a list
        json.dumps([{"points": quad, "transcription": "fine"}]),                   # 9: a good record
    ]
    recs = []
    for i, label in enumerate(bad, 1):
        if i != 4:
            recs.append(("image-%09d" % i, png[: len(png) // 2] if i == 5 else png))
        recs.append(("label-%09d" % i, label if isinstance(label, bytes) else label.encode()))
    recs.append(("num-samples", b"10"))  # 10: both keys missing
    write_lmdb(os.path.join(outdir, "bad"), recs)
    write_lmdb(os.path.join(outdir, "nonum"), [("image-000000001", png)])


def check(path):
    """The independent read-back of an LMDB written by ocr-c."""
    env = lmdb.open(path, readonly=True, lock=False)
    with env.begin() as txn:
        n = int(txn.get(b"num-samples").decode("ascii"))
        print("num-samples", n)
        for i in range(1, n + 1):
            img = txn.get(b"image-%09d" % i)
            label = json.loads(txn.get(b"label-%09d" % i).decode("utf-8"))
            dec = cv2.imdecode(np.frombuffer(img, np.uint8), cv2.IMREAD_COLOR)
            assert dec is not None, i
            parts = ["%d bytes %dx%d" % (len(img), dec.shape[1], dec.shape[0])]
            for p in label:
                parts.append("%s:%s" % (p["transcription"], ";".join("%g,%g" % (x, y) for x, y in p["points"])))
            print("sample", i, " | ".join(parts))
        extra = sum(1 for _ in txn.cursor()) - 1 - 2 * n
        assert extra == 0, "unexpected keys: %d" % extra
    env.close()


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "--check":
        check(sys.argv[2])
    elif len(sys.argv) == 2:
        main(sys.argv[1])
    else:
        sys.exit(__doc__)
