#!/usr/bin/env python3
"""Reference for tests/test_dbnet_post.c: DBNet post-processing exactly as the official code runs it
(MhLiao/DB SegDetectorRepresenter; PaddleOCR DBPostProcess for score_mode 'slow'), on OpenCV, pyclipper and
shapely, applied to inputs the C test writes.

usage: dbnet_post_ref.py DIR
  reads  DIR/maps.bin   int32 count, then per map int32 H, W, dest_w, dest_h and H*W float32 probabilities
         DIR/polys.txt  one polygon per line: mask_w mask_h n x0 y0 ... (integers), for cv2.fillPoly
         DIR/clouds.txt one point set per line: n x0 y0 ... (integers), for get_mini_boxes
  writes DIR/ref.txt    whitespace-separated records (see write_map below)

Constants and steps checked one by one against the official structure/representers/seg_detector_representer.py
(MhLiao/DB): thresh 0.3 (class default), box_thresh 0.6 (eval.py/demo.py --box_thresh default; the class default
0.7 is overridden there), max_candidates 1000 (every experiments/*.yaml), min_size 3 and min_size + 2 after
unclipping, unclip ratio 1.5 in box mode and 2.0 hard-coded in polygon mode, polygon mode's approxPolyDP epsilon
0.002 * cv2.arcLength(contour, True) (this script had 0.01 until it was checked), fewer than 4 approximated points
dropped, box_score_fast on the float box (box mode) or the approximated points (polygon mode), round-then-clip to
[0, dest] when mapping back.

Deviation from the official code, where it would raise instead: an unclip that returns no polygon drops the
candidate; pieces of an offset are kept in a list (numpy >= 1.24 refuses ragged arrays); numpy's removed np.int
is spelled int."""
import struct
import sys

import numpy as np

try:
    import cv2
    import pyclipper
    from shapely.geometry import Polygon
except ImportError as exc:  # the C test reports this output as its failure
    sys.exit("dbnet_post_ref.py: missing Python package (%s); install python3-opencv python3-pyclipper python3-shapely" % exc)

THRESH = 0.3
BOX_THRESH = 0.6
MAX_CANDIDATES = 1000
MIN_SIZE = 3
POLY_EPSILON = 0.002  # polygons_from_bitmap: epsilon = 0.002 * cv2.arcLength(contour, True)


def mini_box(points):
    """get_mini_boxes: minAreaRect corners as TL, TR, BR, BL and the shorter side."""
    rect = cv2.minAreaRect(points)
    by_x = sorted(list(cv2.boxPoints(rect)), key=lambda p: p[0])
    tl, bl = (by_x[0], by_x[1]) if by_x[1][1] > by_x[0][1] else (by_x[1], by_x[0])
    tr, br = (by_x[2], by_x[3]) if by_x[3][1] > by_x[2][1] else (by_x[3], by_x[2])
    return [tl, tr, br, bl], min(rect[1])


def mean_inside(pred, points):
    """box_score_fast on a float box or integer polygon; box_score_slow when given the raw contour."""
    h, w = pred.shape
    pts = points.copy()
    xmin = int(np.clip(int(np.floor(pts[:, 0].min())), 0, w - 1))
    xmax = int(np.clip(int(np.ceil(pts[:, 0].max())), 0, w - 1))
    ymin = int(np.clip(int(np.floor(pts[:, 1].min())), 0, h - 1))
    ymax = int(np.clip(int(np.ceil(pts[:, 1].max())), 0, h - 1))
    mask = np.zeros((ymax - ymin + 1, xmax - xmin + 1), dtype=np.uint8)
    pts[:, 0] = pts[:, 0] - xmin
    pts[:, 1] = pts[:, 1] - ymin
    cv2.fillPoly(mask, pts.reshape(1, -1, 2).astype(np.int32), 1)
    return cv2.mean(pred[ymin:ymax + 1, xmin:xmax + 1], mask)[0]


def unclip(points, ratio):
    poly = Polygon(points)
    distance = poly.area * ratio / poly.length
    offset = pyclipper.PyclipperOffset()
    offset.AddPath(points, pyclipper.JT_ROUND, pyclipper.ET_CLOSEDPOLYGON)
    return [np.array(piece) for piece in offset.Execute(distance)]


def find_contours(pred):
    bitmap = pred > np.float32(THRESH)  # torch compares a float32 map with the threshold in float32
    return cv2.findContours((bitmap * 255).astype(np.uint8), cv2.RETR_LIST, cv2.CHAIN_APPROX_SIMPLE)[0]


def boxes_from_bitmap(pred, contours, dest_w, dest_h, slow):
    height, width = pred.shape
    out = []
    for contour in contours[:MAX_CANDIDATES]:
        points, sside = mini_box(contour)
        if sside < MIN_SIZE:
            continue
        points = np.array(points)
        score = mean_inside(pred, contour.reshape(-1, 2) if slow else points.reshape(-1, 2))
        if BOX_THRESH > score:
            continue
        pieces = unclip(points, 1.5)
        if not pieces:
            continue
        grown = np.concatenate(pieces).reshape(-1, 1, 2)  # every piece, as reshape(-1, 1, 2) does
        box, sside = mini_box(grown)
        if sside < MIN_SIZE + 2:
            continue
        box = np.array(box)
        box[:, 0] = np.clip(np.round(box[:, 0] / width * dest_w), 0, dest_w)
        box[:, 1] = np.clip(np.round(box[:, 1] / height * dest_h), 0, dest_h)
        out.append((float(np.float32(score)), box.astype(np.int16).reshape(-1).tolist()))
    return out


def polygons_from_bitmap(pred, contours, dest_w, dest_h, slow):
    height, width = pred.shape
    out = []
    for contour in contours[:MAX_CANDIDATES]:
        epsilon = POLY_EPSILON * cv2.arcLength(contour, True)
        points = cv2.approxPolyDP(contour, epsilon, True).reshape((-1, 2))
        if points.shape[0] < 4:
            continue
        score = mean_inside(pred, contour.reshape(-1, 2) if slow else points)
        if BOX_THRESH > score:
            continue
        pieces = unclip(points, 2.0)
        if len(pieces) != 1:
            continue
        grown = pieces[0].reshape(-1, 2)
        _, sside = mini_box(grown.reshape((-1, 1, 2)))
        if sside < MIN_SIZE + 2:
            continue
        grown[:, 0] = np.clip(np.round(grown[:, 0] / width * dest_w), 0, dest_w)
        grown[:, 1] = np.clip(np.round(grown[:, 1] / height * dest_h), 0, dest_h)
        out.append((float(score), grown.reshape(-1).tolist()))
    return out


def ints(values):
    return " ".join(str(int(v)) for v in values)


def write_map(f, index, pred, dest_w, dest_h):
    contours = find_contours(pred)
    f.write("map %d %d\n" % (index, len(contours)))
    for c in contours:
        pts = c.reshape(-1, 2)
        f.write("contour %d %s\n" % (len(pts), ints(pts.reshape(-1))))
    for c in contours:
        box, sside = mini_box(c)
        f.write("rect %.9g %s\n" % (sside, " ".join("%.9g %.9g" % (p[0], p[1]) for p in box)))
    for c in contours:
        approx = cv2.approxPolyDP(c, POLY_EPSILON * cv2.arcLength(c, True), True).reshape(-1, 2)
        f.write("approx %d %s\n" % (len(approx), ints(approx.reshape(-1))))
    runs = (("box_fast", boxes_from_bitmap, False), ("box_slow", boxes_from_bitmap, True),
            ("poly_fast", polygons_from_bitmap, False), ("poly_slow", polygons_from_bitmap, True))
    for name, fn, slow in runs:
        dets = fn(pred, contours, dest_w, dest_h, slow)
        f.write("dets %s %d\n" % (name, len(dets)))
        for score, pts in dets:
            f.write("det %.17g %d %s\n" % (score, len(pts) // 2, ints(pts)))


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    folder = sys.argv[1]
    data = open(folder + "/maps.bin", "rb").read()
    (count,), pos = struct.unpack_from("<i", data, 0), 4
    with open(folder + "/ref.txt", "w") as f:
        for index in range(count):
            h, w, dest_w, dest_h = struct.unpack_from("<4i", data, pos)
            pos += 16
            pred = np.frombuffer(data, dtype="<f4", count=h * w, offset=pos).reshape(h, w).copy()
            pos += 4 * h * w
            write_map(f, index, pred, dest_w, dest_h)
        for line in open(folder + "/polys.txt"):
            v = [int(t) for t in line.split()]
            mw, mh, n = v[0], v[1], v[2]
            mask = np.zeros((mh, mw), dtype=np.uint8)
            cv2.fillPoly(mask, np.array(v[3:3 + 2 * n], dtype=np.int32).reshape(1, -1, 2), 1)
            f.write("fill %s\n" % "".join(str(int(b)) for b in mask.reshape(-1)))
        for line in open(folder + "/clouds.txt"):
            v = [int(t) for t in line.split()]
            box, sside = mini_box(np.array(v[1:1 + 2 * v[0]], dtype=np.int32).reshape(-1, 1, 2))
            f.write("cloud %.9g %s\n" % (sside, " ".join("%.9g %.9g" % (p[0], p[1]) for p in box)))
        f.write("end\n")


if __name__ == "__main__":
    main()
