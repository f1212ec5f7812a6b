#!/usr/bin/env python3
"""Reference for tests/test_dbnet_eval.c: the ICDAR 2015 IoU protocol as the official DBNet
DetectionIoUEvaluator (concern/icdar2015_eval/detection/iou.py, copied by PaddleOCR) applies it, on shapely.

usage: dbnet_eval_ref.py IN OUT
  IN:  "image n_gt n_det", then n_gt lines "g ignore n x0 y0 ...", then n_det lines "d n x0 y0 ..."
  OUT: per image "image gt_care det_care matched care_lt16 care_16_32 care_gt32 matched_lt16 matched_16_32
       matched_gt32", per polygon "valid 0|1", per valid (gt, det) pair "inter i j area", per care GT
       "height i h ambiguous" (ambiguous: 1 when another rectangle of the same least area has another shorter
       side); last "total precision recall hmean" (repr floats)
A polygon shapely cannot even build (fewer than 3 points) counts as invalid, as an invalid one is dropped.
Heights (not in the official evaluator; ocr_dbnet.h's ocr_eval_counts): the shorter side of the care GT's
minimum rotated rectangle, binned under 16, 16 to 32 inclusive, over 32."""
import sys

try:
    from shapely.geometry import Polygon
except ImportError as exc:
    sys.exit("dbnet_eval_ref.py: missing Python package (%s); install python3-shapely" % exc)


def valid(points):
    try:
        poly = Polygon(points)
        return poly.is_valid and poly.is_simple
    except (ValueError, TypeError):
        return False


def inter_area(a, b):
    return Polygon(a).intersection(Polygon(b)).area


def height(points):
    rect = list(Polygon(points).minimum_rotated_rectangle.exterior.coords)
    sides = [((rect[k + 1][0] - rect[k][0]) ** 2 + (rect[k + 1][1] - rect[k][1]) ** 2) ** 0.5 for k in range(2)]
    return min(sides)


def height_ambiguous(points):
    """1 when two hull edges give rectangles of the same least area with different shorter sides (a right
    triangle: along a leg or along the hypotenuse), so the height depends on which one an implementation keeps."""
    hull = list(Polygon(points).convex_hull.exterior.coords)[:-1]
    rects = []
    for k in range(len(hull)):
        (x0, y0), (x1, y1) = hull[k], hull[(k + 1) % len(hull)]
        length = ((x1 - x0) ** 2 + (y1 - y0) ** 2) ** 0.5
        if length == 0:
            continue
        ux, uy = (x1 - x0) / length, (y1 - y0) / length
        along = [x * ux + y * uy for x, y in hull]
        across = [-x * uy + y * ux for x, y in hull]
        w, h = max(along) - min(along), max(across) - min(across)
        rects.append((w * h, min(w, h)))
    least = min(area for area, _ in rects)
    sides = [side for area, side in rects if area <= least * (1 + 1e-6)]
    return int(max(sides) - min(sides) > 1e-4 * (1 + min(sides)))


def height_bin(h):
    return 0 if h < 16 else 1 if h <= 32 else 2


def evaluate(gt, det, out):
    gt_pols, dontcare = [], []
    for points, ignore in gt:
        ok = valid(points)
        out.append("valid %d" % ok)
        if ok:
            gt_pols.append(points)
            if ignore:
                dontcare.append(len(gt_pols) - 1)
    det_pols, det_dontcare = [], []
    for points in det:
        ok = valid(points)
        out.append("valid %d" % ok)
        if not ok:
            continue
        det_pols.append(points)
        area = Polygon(points).area
        for g in dontcare:
            covered = 0 if area == 0 else inter_area(gt_pols[g], points) / area
            if covered > 0.5:
                det_dontcare.append(len(det_pols) - 1)
                break
    for i, g in enumerate(gt_pols):
        for j, d in enumerate(det_pols):
            out.append("inter %d %d %r" % (i, j, inter_area(d, g)))
    care_bins, matched_bins = [0, 0, 0], [0, 0, 0]
    for i, g in enumerate(gt_pols):
        if i not in dontcare:
            h = height(g)
            out.append("height %d %r %d" % (i, h, height_ambiguous(g)))
            care_bins[height_bin(h)] += 1
    gt_used, det_used, matched = set(), set(), 0
    for i, g in enumerate(gt_pols):
        for j, d in enumerate(det_pols):
            if i in gt_used or j in det_used or i in dontcare or j in det_dontcare:
                continue
            iou = inter_area(d, g) / Polygon(d).union(Polygon(g)).area
            if iou > 0.5:
                gt_used.add(i)
                det_used.add(j)
                matched += 1
                matched_bins[height_bin(height(g))] += 1
    return (len(gt_pols) - len(dontcare), len(det_pols) - len(det_dontcare), matched), care_bins + matched_bins


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    lines = open(sys.argv[1]).read().split("\n")
    pos, out = 0, []
    sums = [0, 0, 0]
    while pos < len(lines) and lines[pos].startswith("image"):
        _, n_gt, n_det = lines[pos].split()
        pos += 1
        gt, det = [], []
        for _ in range(int(n_gt)):
            v = lines[pos].split()
            pos += 1
            n = int(v[2])
            gt.append(([(float(v[3 + 2 * k]), float(v[4 + 2 * k])) for k in range(n)], v[1] == "1"))
        for _ in range(int(n_det)):
            v = lines[pos].split()
            pos += 1
            n = int(v[1])
            det.append([(float(v[2 + 2 * k]), float(v[3 + 2 * k])) for k in range(n)])
        detail = []
        counts, bins = evaluate(gt, det, detail)
        out.append("image %d %d %d %d %d %d %d %d %d" % (counts + tuple(bins)))
        out.extend(detail)
        sums = [s + c for s, c in zip(sums, counts)]
    gt_care, det_care, matched = sums
    recall = 0 if gt_care == 0 else float(matched) / gt_care
    precision = 0 if det_care == 0 else float(matched) / det_care
    hmean = 0 if recall + precision == 0 else 2 * recall * precision / (recall + precision)
    out.append("total %r %r %r" % (float(precision), float(recall), float(hmean)))
    open(sys.argv[2], "w").write("\n".join(out) + "\n")


if __name__ == "__main__":
    main()
