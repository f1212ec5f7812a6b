"""Reference for tests/test_dbnet_targets.c: DBNet's training targets as the official code (MhLiao/DB) computes
them, built on Debian's python3-opencv, python3-pyclipper, python3-shapely and numpy (DBNET_REFERENCE.md 2.3-2.4),
plus raw cv2.fillPoly and pyclipper offsets for the geometry checks (also run by tests/test_geom.c, offsets only).

usage: dbnet_targets_ref.py IN.json OUT.safetensors

IN:  {"scenes":  [{"h": H, "w": W, "polys": [{"pts": [x0, y0, x1, y1, ...], "ignore": 0 or 1}, ...]}, ...],
      "fills":   [{"h": H, "w": W, "pts": [...]}, ...],
      "offsets": [{"pts": [...], "delta": d}, ...]}
     Coordinates are float32 values (printed exactly); delta is a double.
OUT: scenes concatenated in order, each map row-major:
      gt, mask, thresh_mask  U8   shrink map, its mask, threshold mask
      thresh                 F32  threshold map with the cosine clamped to [-1, 1] (the NaN fix)
      thresh_nan             U8   1 where the unclamped official formula gave NaN and the pixel kept an older value
      ignore                 U8   one per polygon: the ignore tag after MakeSegDetectionData
      fill                   U8   every fill case: cv2.fillPoly(zeros, [pts.astype(int32)], 1)
      offset                 I32  every offset case: piece count, each piece's point count, then the points (x, y)
"""
import json
import os
import sys

try:
    import cv2
    import numpy as np
    import pyclipper
    from shapely.geometry import Polygon
except ImportError as e:  # the C test turns a non-zero exit into a failure with this message
    sys.exit("dbnet_targets_ref.py: missing Python package (%s); install python3-opencv python3-pyclipper "
             "python3-shapely python3-numpy" % e)

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import ocr_st  # noqa: E402

SHRINK_RATIO, MIN_TEXT_SIZE, THRESH_MIN, THRESH_MAX = 0.4, 8, 0.3, 0.7


def offset(points, delta):
    pco = pyclipper.PyclipperOffset()
    pco.AddPath([tuple(p) for p in points], pyclipper.JT_ROUND, pyclipper.ET_CLOSEDPOLYGON)
    return pco.Execute(delta)


def official_area(polygon):
    # make_seg_detection_data.py's polygon_area: minus the shoelace area, accumulated in float32
    edge = 0
    for i in range(polygon.shape[0]):
        j = (i + 1) % polygon.shape[0]
        edge += (polygon[j, 0] - polygon[i, 0]) * (polygon[j, 1] + polygon[i, 1])
    return edge / 2.


def make_seg_detection_data(polygons, ignore_tags, h, w):
    """MakeSegDetectionData.process in training mode; mutates polygons and ignore_tags as the official code does."""
    for polygon in polygons:  # validate_polygons
        polygon[:, 0] = np.clip(polygon[:, 0], 0, w - 1)
        polygon[:, 1] = np.clip(polygon[:, 1], 0, h - 1)
    for i in range(len(polygons)):
        area = official_area(polygons[i])
        if abs(area) < 1:
            ignore_tags[i] = True
        if area > 0:
            polygons[i] = polygons[i][::-1, :]
    gt = np.zeros((h, w), dtype=np.float32)
    mask = np.ones((h, w), dtype=np.float32)
    for i in range(len(polygons)):
        polygon = polygons[i]
        height = max(polygon[:, 1]) - min(polygon[:, 1])
        width = max(polygon[:, 0]) - min(polygon[:, 0])
        if ignore_tags[i] or min(height, width) < MIN_TEXT_SIZE:
            cv2.fillPoly(mask, polygon.astype(np.int32)[np.newaxis, :, :], 0)
            ignore_tags[i] = True
            continue
        shape = Polygon(polygon)
        distance = shape.area * (1 - np.power(SHRINK_RATIO, 2)) / shape.length
        shrunk = offset(polygon, -distance)
        if shrunk == []:
            cv2.fillPoly(mask, polygon.astype(np.int32)[np.newaxis, :, :], 0)
            ignore_tags[i] = True
            continue
        shrunk = np.array(shrunk[0]).reshape(-1, 2)
        cv2.fillPoly(gt, [shrunk.astype(np.int32)], 1)
    return gt, mask


def edge_distance(xs, ys, point_1, point_2, fix_nan):
    """MakeBorderMap.distance: line distance inside the circle on the edge as diameter, else nearest endpoint."""
    square_distance_1 = np.square(xs - point_1[0]) + np.square(ys - point_1[1])
    square_distance_2 = np.square(xs - point_2[0]) + np.square(ys - point_2[1])
    square_distance = np.square(point_1[0] - point_2[0]) + np.square(point_1[1] - point_2[1])
    with np.errstate(divide="ignore", invalid="ignore"):
        cosin = (square_distance - square_distance_1 - square_distance_2) / (2 * np.sqrt(square_distance_1 * square_distance_2))
        if fix_nan:
            cosin = np.clip(cosin, -1, 1)
        square_sin = 1 - np.square(cosin)
        square_sin = np.nan_to_num(square_sin)
        result = np.sqrt(square_distance_1 * square_distance_2 * square_sin / square_distance)
    result[cosin < 0] = np.sqrt(np.fmin(square_distance_1, square_distance_2))[cosin < 0]
    return result


def draw_border_map(polygon, canvas, mask, fix_nan):
    polygon = np.array(polygon)
    shape = Polygon(polygon)
    distance = shape.area * (1 - np.power(SHRINK_RATIO, 2)) / shape.length
    padded = np.array(offset(polygon, distance)[0])
    cv2.fillPoly(mask, [padded.astype(np.int32)], 1.0)
    xmin, xmax = padded[:, 0].min(), padded[:, 0].max()
    ymin, ymax = padded[:, 1].min(), padded[:, 1].max()
    width, height = xmax - xmin + 1, ymax - ymin + 1
    polygon[:, 0] = polygon[:, 0] - xmin
    polygon[:, 1] = polygon[:, 1] - ymin
    xs = np.broadcast_to(np.linspace(0, width - 1, num=width).reshape(1, width), (height, width))
    ys = np.broadcast_to(np.linspace(0, height - 1, num=height).reshape(height, 1), (height, width))
    distance_map = np.zeros((polygon.shape[0], height, width), dtype=np.float32)
    for i in range(polygon.shape[0]):
        j = (i + 1) % polygon.shape[0]
        absolute_distance = edge_distance(xs, ys, polygon[i], polygon[j], fix_nan)
        distance_map[i] = np.clip(absolute_distance / distance, 0, 1)
    distance_map = distance_map.min(axis=0)
    xmin_valid = min(max(0, xmin), canvas.shape[1] - 1)
    xmax_valid = min(max(0, xmax), canvas.shape[1] - 1)
    ymin_valid = min(max(0, ymin), canvas.shape[0] - 1)
    ymax_valid = min(max(0, ymax), canvas.shape[0] - 1)
    canvas[ymin_valid:ymax_valid + 1, xmin_valid:xmax_valid + 1] = np.fmax(
        1 - distance_map[ymin_valid - ymin:ymax_valid - ymax + height, xmin_valid - xmin:xmax_valid - xmax + width],
        canvas[ymin_valid:ymax_valid + 1, xmin_valid:xmax_valid + 1])


def make_border_map(polygons, ignore_tags, h, w, fix_nan):
    canvas = np.zeros((h, w), dtype=np.float32)
    mask = np.zeros((h, w), dtype=np.float32)
    for i in range(len(polygons)):
        if ignore_tags[i]:
            continue
        draw_border_map(polygons[i], canvas, mask, fix_nan)
    return canvas * (THRESH_MAX - THRESH_MIN) + THRESH_MIN, mask


def points(flat):
    return np.array(flat, dtype=np.float32).reshape(-1, 2)


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    spec = json.load(open(sys.argv[1]))
    out = {k: [] for k in ("gt", "mask", "thresh_mask", "thresh", "thresh_nan", "ignore", "fill", "offset")}
    for scene in spec.get("scenes", []):
        h, w = scene["h"], scene["w"]
        polygons = [points(p["pts"]) for p in scene["polys"]]
        ignore_tags = [bool(p["ignore"]) for p in scene["polys"]]
        gt, mask = make_seg_detection_data(polygons, ignore_tags, h, w)
        thresh, thresh_mask = make_border_map([p.copy() for p in polygons], ignore_tags, h, w, fix_nan=True)
        official, _ = make_border_map([p.copy() for p in polygons], ignore_tags, h, w, fix_nan=False)
        out["gt"].append(gt.ravel() > 0.5)
        out["mask"].append(mask.ravel() > 0.5)
        out["thresh_mask"].append(thresh_mask.ravel() > 0.5)
        out["thresh"].append(thresh.ravel())
        out["thresh_nan"].append((official != thresh).ravel())
        out["ignore"].append(np.array(ignore_tags, dtype=bool))
    for case in spec.get("fills", []):
        img = np.zeros((case["h"], case["w"]), dtype=np.uint8)
        cv2.fillPoly(img, [points(case["pts"]).astype(np.int32)], 1)
        out["fill"].append(img.ravel())
    for case in spec.get("offsets", []):
        pieces = offset(points(case["pts"]), case["delta"])
        flat = [len(pieces)] + [len(p) for p in pieces] + [c for p in pieces for q in p for c in q]
        out["offset"].append(np.array(flat, dtype=np.int32))
    tensors = {}
    for name, parts in out.items():
        dtype = np.float32 if name == "thresh" else np.int32 if name == "offset" else np.uint8
        tensors[name] = np.concatenate(parts).astype(dtype) if parts else np.zeros(0, dtype=dtype)
    ocr_st.save(sys.argv[2], tensors)


if __name__ == "__main__":
    main()
