#!/usr/bin/env python3
"""Peer of bench/bench_post.c: the official DBNet post-processing (OpenCV + pyclipper + shapely, as
tools/dbnet_post_ref.py runs it for the parity test) timed in-process, so interpreter start-up and imports are
not counted.

usage: bench_post_ref.py MAP DEST_W DEST_H
  MAP: int32 H, W, then H*W float32 probabilities (little-endian).
  Then reads commands on stdin, one per line, and answers each with one line:
    box | poly   runs binarize + findContours + boxes_from_bitmap (or polygons_from_bitmap), fast score,
                 once; answers "WALL_SECONDS CPU_SECONDS DETECTIONS" (CPU: this thread's)
    quit
"""
import struct
import sys
import time

import numpy as np

import dbnet_post_ref as ref


def main():
    if len(sys.argv) != 4:
        sys.exit(__doc__)
    data = open(sys.argv[1], "rb").read()
    h, w = struct.unpack_from("<2i", data, 0)
    pred = np.frombuffer(data, dtype="<f4", count=h * w, offset=8).reshape(h, w).copy()
    dest_w, dest_h = int(sys.argv[2]), int(sys.argv[3])
    for line in sys.stdin:
        cmd = line.strip()
        if cmd == "quit":
            break
        if cmd not in ("box", "poly"):
            print("error: unknown command %r" % cmd, flush=True)
            continue
        run = ref.boxes_from_bitmap if cmd == "box" else ref.polygons_from_bitmap
        start, start_cpu = time.perf_counter(), time.thread_time()
        dets = run(pred, ref.find_contours(pred), dest_w, dest_h, False)
        cpu = time.thread_time() - start_cpu
        print("%.9f %.9f %d" % (time.perf_counter() - start, cpu, len(dets)), flush=True)


if __name__ == "__main__":
    main()
