"""Checks that an ocr-c checkpoint gives the same probability map in C and in the PyTorch reference DBNet.

Usage: check_dbnet_torch.py --model CHECKPOINT --image IMAGE [--detect ./examples/detect] [--short-side S |
       --long-side L] [--tolerance 1e-3]

Runs `detect --dump` on the image, which writes the network input it built (resized and normalised) and the
probability map the C model computed. Then, independently of the C code:
  1. preprocesses the image the official way (cv2.imread as BGR, cv2.resize of the float image to the size
     demo.py computes, mean subtraction, /255) and compares it with the C input (the C code resizes 8-bit pixels,
     so they may differ by rounding: at most 1/255 is accepted);
  2. loads the checkpoint into tools/dbnet_ref.py (load_state_dict strict=True, eval mode, float64) and runs it on
     the C input: the probability maps must agree within --tolerance (absolute).
The reference's map on its own preprocessing is reported too, for information. Exit status 0 when both checks
pass, 1 when one fails, 2 on a usage or setup error."""
import argparse
import math
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

MEAN_BGR = (122.67891434, 116.66876762, 104.00698793)


def input_size(width, height, short_side, long_side):
    """The network input size as ocr_data.h (ocr_infer_input_size) and demo.py compute it."""
    by_long = long_side > 0
    target = long_side if by_long else short_side
    target = (target + 31) // 32 * 32
    w_is_ref = width >= height if by_long else width < height
    ref, other = (width, height) if w_is_ref else (height, width)
    other = int(math.ceil(target / ref * other / 32) * 32)
    return (target, other) if w_is_ref else (other, target)


def official_input(cv2, np, path, size):
    img = cv2.imread(path, cv2.IMREAD_COLOR)
    if img is None:
        raise SystemExit("check_dbnet_torch: OpenCV cannot read '%s'" % path)
    img = cv2.resize(img.astype("float32"), size)
    img = (img - np.array(MEAN_BGR, dtype=np.float32)) / 255.0
    return img.transpose(2, 0, 1)[None].astype(np.float32)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model", required=True)
    ap.add_argument("--image", required=True)
    ap.add_argument("--detect", default=os.path.join(os.path.dirname(HERE), "examples", "detect"))
    ap.add_argument("--short-side", type=int, default=736)
    ap.add_argument("--long-side", type=int, default=0)
    ap.add_argument("--tolerance", type=float, default=1e-3)
    args = ap.parse_args()
    try:
        import cv2
        import numpy as np
        import torch
        import dbnet_ref
        import ocr_st
    except ImportError as e:
        sys.stderr.write("check_dbnet_torch: %s (needs python3-torch, python3-numpy, python3-opencv)\n" % e)
        return 2
    for path, what in ((args.model, "checkpoint"), (args.image, "image"), (args.detect, "detect program")):
        if not os.path.isfile(path):
            sys.stderr.write("check_dbnet_torch: %s '%s' does not exist\n" % (what, path))
            return 2

    with tempfile.TemporaryDirectory(prefix="check_dbnet_torch.") as tmp:
        cmd = [args.detect, "--model", args.model, "--dump", tmp, "--short-side", str(args.short_side),
               "--long-side", str(args.long_side), "--threads", "2", args.image]
        run = subprocess.run(cmd, capture_output=True, text=True)
        if run.returncode != 0:
            sys.stderr.write("check_dbnet_torch: %s failed (exit %d):\n%s" % (" ".join(cmd), run.returncode, run.stderr))
            return 1
        stem = os.path.splitext(os.path.basename(args.image))[0]
        dump, meta = ocr_st.load(os.path.join(tmp, stem + ".safetensors"), as_torch=False)
    x_c, prob_c = dump["input"], dump["prob"]
    width, height = int(meta["width"]), int(meta["height"])

    size = input_size(width, height, args.short_side, args.long_side)
    ok = True
    if x_c.shape != (1, 3, size[1], size[0]):
        print("input shape: C %s, expected %s" % (list(x_c.shape), [1, 3, size[1], size[0]]))
        return 1
    x_ref = official_input(cv2, np, args.image, size)
    d_in = float(np.abs(x_ref - x_c).max())
    print("input %dx%d -> %dx%d: max |C - official preprocessing| = %.3g (limit %.3g)" % (width, height, size[0], size[1], d_in, 1 / 255))
    ok &= d_in <= 1 / 255 + 1e-6

    weights, meta = ocr_st.load(args.model)
    model = dbnet_ref.model_from_meta(meta)
    model.load_state_dict(weights, strict=True)
    model.double().eval()
    torch.set_num_threads(2)
    with torch.no_grad():
        prob_ref = model(torch.from_numpy(x_c).double()).numpy()
        prob_own = model(torch.from_numpy(x_ref).double()).numpy()
    d_prob = float(np.abs(prob_ref - prob_c).max())
    print("probability map %s: max |C - PyTorch| = %.3g (tolerance %.3g), mean p = %.4f" % (list(prob_c.shape), d_prob, args.tolerance,
                                                                                          float(prob_c.mean())))
    print("for information: PyTorch on its own preprocessing differs from C by at most %.3g" % float(np.abs(prob_own - prob_c).max()))
    ok &= d_prob <= args.tolerance
    print("agree" if ok else "DISAGREE")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
