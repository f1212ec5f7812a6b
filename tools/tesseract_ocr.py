#!/usr/bin/env python3
"""Tesseract 5 (Debian's tesseract-ocr with tesseract-ocr-eng) on a folder of images, one thread: the C and C++
world's usual OCR engine as a peer of ocr-c's end-to-end reader (bench/e2e_peers.sh). Writes one ICDAR 2015
end-to-end result file per image, OUT/res_<stem>.txt, in tools/ppocr_ocr.py's format: one line per word Tesseract
reports (its TSV output's level-5 rows with a confidence above 0 and a non-blank text), the word's axis-aligned box
as four clockwise corners from the top left.

usage: /usr/bin/python3 tools/tesseract_ocr.py [options] IMAGES OUT
  IMAGES          a folder of images (.png .jpg .jpeg .bmp), or an ICDAR folder holding images/
  --psm N         Tesseract's page segmentation mode (default 3, fully automatic page segmentation; 11 is sparse
                  text: as much text as possible in no particular order)
  --lang L        the trained data (default eng)
  --repeat N      read every image N times and time them all (default 1)

All images go to one tesseract process (a list file: Tesseract reads each as a page), so loading the trained data
is paid once, as a program that links libtesseract pays it. Its time is measured apart, as the run of the same
command on a blank 32 x 32 image (median of three), and taken out: ms per image is (the run's wall time - that) /
(images x N). OMP_THREAD_LIMIT=1 keeps Tesseract's OpenMP parts to one thread. The last stdout line is one JSON
object: images, words, psm, ms_startup, ms (per image), the Tesseract version.
"""
import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import ppocr_det  # noqa: E402  (list_images; exits with a message when cv2 or numpy is missing)
import ppocr_ocr  # noqa: E402  (icdar_line: the result format, one place)


def run_tesseract(tesseract, image_or_list, psm, lang):
    """The TSV text and the wall seconds of one tesseract run."""
    env = dict(os.environ, OMP_THREAD_LIMIT="1")
    t0 = time.perf_counter()
    proc = subprocess.run([tesseract, image_or_list, "-", "--psm", str(psm), "-l", lang, "tsv"], env=env,
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    seconds = time.perf_counter() - t0
    if proc.returncode != 0:
        sys.exit("tesseract_ocr.py: tesseract %s failed (exit %d): %s" %
                 (image_or_list, proc.returncode, proc.stderr.strip()[-500:]))
    return proc.stdout, seconds


def words_by_page(tsv):
    """{page number (from 1): [(quad, text), ...]}: level-5 (word) rows, conf > 0, text not blank."""
    pages = {}
    lines = tsv.split("\n")
    header = lines[0].split("\t")
    col = {name: k for k, name in enumerate(header)}
    for line in lines[1:]:
        f = line.split("\t")
        if len(f) < len(header) or f[col["level"]] != "5":
            continue
        text = f[col["text"]].strip()
        if not text or float(f[col["conf"]]) <= 0:
            continue
        x, y = int(f[col["left"]]), int(f[col["top"]])
        w, h = int(f[col["width"]]), int(f[col["height"]])
        quad = [(x, y), (x + w, y), (x + w, y + h), (x, y + h)]
        pages.setdefault(int(f[col["page_num"]]), []).append((quad, text))
    return pages


def main():
    ap = argparse.ArgumentParser(usage=argparse.SUPPRESS, description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("images")
    ap.add_argument("out")
    ap.add_argument("--psm", type=int, default=3)
    ap.add_argument("--lang", default="eng")
    ap.add_argument("--repeat", type=int, default=1)
    a = ap.parse_args()
    if a.repeat < 1 or not 0 <= a.psm <= 13:
        ap.error("--repeat must be at least 1 and --psm 0 to 13")
    tesseract = shutil.which("tesseract")
    if not tesseract:
        sys.exit("tesseract_ocr.py: tesseract is not installed (apt-get install tesseract-ocr tesseract-ocr-eng)")
    if not os.path.isdir(a.images):
        sys.exit("tesseract_ocr.py: %s is not a folder" % a.images)
    folder, names = ppocr_det.list_images(a.images)
    if not names:
        sys.exit("tesseract_ocr.py: no images in %s" % folder)
    os.makedirs(a.out, exist_ok=True)
    version = subprocess.run([tesseract, "--version"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                             text=True).stdout.split("\n")[0].strip()

    tmp = tempfile.mkdtemp(prefix="tesseract_ocr.")
    try:
        blank = os.path.join(tmp, "blank.png")
        ppocr_det.cv2.imwrite(blank, ppocr_det.np.full((32, 32), 255, dtype=ppocr_det.np.uint8))
        startup = statistics.median(run_tesseract(tesseract, blank, a.psm, a.lang)[1] for _ in range(3))
        listing = os.path.join(tmp, "images.txt")
        with open(listing, "w") as f:
            for name in names:
                f.writelines(os.path.abspath(os.path.join(folder, name)) + "\n" for _ in range(a.repeat))
        tsv, seconds = run_tesseract(tesseract, listing, a.psm, a.lang)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    pages = words_by_page(tsv)
    n_words = 0
    for i, name in enumerate(names):
        words = pages.get(i * a.repeat + 1, [])  # the first reading of image i
        n_words += len(words)
        with open(os.path.join(a.out, "res_%s.txt" % os.path.splitext(name)[0]), "w", encoding="utf-8") as f:
            f.writelines(ppocr_ocr.icdar_line(quad, text) + "\n" for quad, text in words)
    ms = 1e3 * max(seconds - startup, 0.0) / (len(names) * a.repeat)
    print(json.dumps({"images": len(names), "words": n_words, "psm": a.psm, "lang": a.lang, "repeat": a.repeat,
                      "threads": 1, "ms_startup": round(1e3 * startup, 2), "ms": round(ms, 2),
                      "tesseract": version}))


if __name__ == "__main__":
    main()
