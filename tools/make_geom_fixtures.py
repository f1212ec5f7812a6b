#!/usr/bin/python3
"""Reference fixture for tests/test_geom.c: perspective transforms from OpenCV.

For seeded random quadrilaterals (text quads rectified to upright crops, the other way round, general convex
quads, and rotated rectangles) it records cv2.getPerspectiveTransform(src, dst), the exact solution of the same
8x8 system (rational arithmetic, then rounded to double: OpenCV's own answer is off by up to ~1e-5 of the largest
entry on these ill-conditioned systems), and where cv2.perspectiveTransform sends three test points with the
exact H.
Coordinates are float32 values written exactly (%.9g), homographies and mapped points in double (%.17g).

Output: tests/fixtures/geom/perspective.txt, one case a line of 46 numbers:
    src x0 y0 .. x3 y3 (8), dst x0 y0 .. x3 y3 (8), OpenCV's H row-major (9), the exact H (9), then three times
    x y u v (12), where (u, v) is (x, y) mapped by the exact H.
Lines starting with # are comments.

Usage: /usr/bin/python3 tools/make_geom_fixtures.py [out.txt]    (deterministic)
"""
import os
import sys
from fractions import Fraction

import cv2
import numpy as np

N_CASES = 120


def rotated_rect(rng):
    cx, cy = rng.uniform(-200, 1200, 2)
    w, h = rng.uniform(4, 400), rng.uniform(4, 120)
    a = rng.uniform(-np.pi, np.pi)
    ux, uy, vx, vy = np.cos(a), np.sin(a), -np.sin(a), np.cos(a)
    s = [(-0.5, -0.5), (0.5, -0.5), (0.5, 0.5), (-0.5, 0.5)]
    return np.array([[cx + p * w * ux + q * h * vx, cy + p * w * uy + q * h * vy] for p, q in s])


def convex_quad(rng):
    # four angles around a centre, one per quadrant, with random radii: convex enough, never three collinear
    while True:
        c = rng.uniform(0, 800, 2)
        ang = np.sort(rng.uniform(0, 2 * np.pi, 4))
        r = rng.uniform(10, 300, 4)
        q = np.stack([c[0] + r * np.cos(ang), c[1] + r * np.sin(ang)], 1)
        if min_turn(q) > 1e-2:
            return q


def min_turn(q):
    # smallest |sin| of the turn at a vertex over the four triples: far from 0 means no three points collinear
    best = 1.0
    for i in range(4):
        a, b, c = [q[j] for j in range(4) if j != i]
        u, v = b - a, c - a
        best = min(best, abs(u[0] * v[1] - u[1] * v[0]) / (np.hypot(*u) * np.hypot(*v) + 1e-300))
    return best


def exact_homography(src, dst):
    """h0..h7 of x' = (h0 x + h1 y + h2) / (h6 x + h7 y + 1), y' likewise, solved exactly over the rationals."""
    rows = []
    for (x, y), (u, v) in zip(src.astype(np.float64), dst.astype(np.float64)):
        x, y, u, v = (Fraction(float(t)) for t in (x, y, u, v))
        rows.append([x, y, 1, 0, 0, 0, -x * u, -y * u, u])
        rows.append([0, 0, 0, x, y, 1, -x * v, -y * v, v])
    n = 8
    for k in range(n):  # Gauss-Jordan: exact, so any non-zero pivot will do
        p = next(i for i in range(k, n) if rows[i][k] != 0)
        rows[k], rows[p] = rows[p], rows[k]
        for i in range(n):
            if i != k and rows[i][k] != 0:
                f = rows[i][k] / rows[k][k]
                rows[i] = [a - f * b for a, b in zip(rows[i], rows[k])]
    return np.array([float(rows[k][n] / rows[k][k]) for k in range(n)] + [1.0])


def upright(w, h):
    return np.array([[0, 0], [w, 0], [w, h], [0, h]], dtype=np.float64)


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', 'tests',
                                                             'fixtures', 'geom', 'perspective.txt')
    rng = np.random.default_rng(20261125)
    lines = ['# cv2.getPerspectiveTransform and cv2.perspectiveTransform (OpenCV %s), from tools/make_geom_fixtures.py'
             % cv2.__version__,
             '# src x0 y0 .. x3 y3, dst x0 y0 .. x3 y3, OpenCV H (9, row-major), exact H (9), 3 x (x y u v)']
    for k in range(N_CASES):
        kind = k % 4
        if kind == 0:    # a jittered text quad onto its upright crop (recognition's use)
            src = rotated_rect(rng) + rng.uniform(-3, 3, (4, 2))
            dst = upright(round(rng.uniform(8, 320)), round(rng.uniform(8, 64)))
        elif kind == 1:  # the crop back into the image
            dst = rotated_rect(rng) + rng.uniform(-3, 3, (4, 2))
            src = upright(round(rng.uniform(8, 320)), round(rng.uniform(8, 64)))
        elif kind == 2:  # any convex quads
            src, dst = convex_quad(rng), convex_quad(rng)
        else:            # rotated rectangles: an affine map
            src, dst = rotated_rect(rng), upright(rng.uniform(4, 400), rng.uniform(4, 120))
        src, dst = src.astype(np.float32), dst.astype(np.float32)
        if min_turn(src.astype(np.float64)) < 1e-3 or min_turn(dst.astype(np.float64)) < 1e-3:
            continue
        H = cv2.getPerspectiveTransform(src, dst)
        # the corners, the centre and a point outside
        lo, hi = src.min(0).astype(np.float64), src.max(0).astype(np.float64)
        pts = np.array([src[k % 4].astype(np.float64), (lo + hi) / 2, hi + (hi - lo) * 0.25], dtype=np.float64)
        exact = exact_homography(src, dst)
        mapped = cv2.perspectiveTransform(pts.reshape(-1, 1, 2), exact.reshape(3, 3)).reshape(-1, 2)
        vals = ['%.9g' % v for v in src.reshape(-1)] + ['%.9g' % v for v in dst.reshape(-1)]
        vals += ['%.17g' % v for v in H.reshape(-1)]
        vals += ['%.17g' % v for v in exact]
        for p, m in zip(pts, mapped):
            vals += ['%.17g' % v for v in (p[0], p[1], m[0], m[1])]
        lines.append(' '.join(vals))
    os.makedirs(os.path.dirname(os.path.abspath(out)), exist_ok=True)
    with open(out, 'w') as f:
        f.write('\n'.join(lines) + '\n')
    print('%s: %d cases' % (out, len(lines) - 2))


if __name__ == '__main__':
    main()
