#!/usr/bin/env bash
# The CUDA parity suite on a machine with an NVIDIA GPU, in one command (from the repository root):
#     tools/cuda_parity.sh
# Builds the real CUDA variants (./build.sh does, when nvcc is present), then runs every op of ocr_nn.h and
# ocr_loss.h on the GPU against the CPU backend (the default path: own convolution kernels with cuBLAS; then with
# OCR_CUDA_CUDNN=1 through cuDNN; then the own kernels only, cuBLAS switched off), one whole DBNet training step and
# eval forward against the CPU model (the same test program), the cuDNN isolation tool on the model's convolution
# shapes, a short train_dbnet + detect run and a short train_rec + eval_rec run with --device cuda (the recognizer's
# losses printed beside the CPU's).
# Exit status 0 when all agree.
#   --prebuilt   use build/cuda as it is (built on another machine: for a GPU machine without the build's packages)
#   --fonts DIR  the fonts of the synthetic scenes and words (--photos none), for a machine without them installed
#   --timing     then time train_dbnet on the GPU in fp32, --amp bf16 and --amp fp16 (images/s), and train_rec (crops/s)
set -euo pipefail
cd "$(dirname "$0")/.."
prebuilt=0 timing=0 synth_flags=""
while [ $# -gt 0 ]; do
    case $1 in
    --prebuilt) prebuilt=1 ;;
    --timing) timing=1 ;;
    --fonts) [ $# -ge 2 ] || { echo "cuda_parity: --fonts needs a folder" >&2; exit 2; }
             synth_flags="--fonts $2 --photos none"; shift ;;
    -h|--help) sed -n '2,/^set -e/p' "$0" | sed 's/^# \{0,1\}//;$d'; exit 0 ;;
    *) echo "cuda_parity: unknown option $1 (see --help)" >&2; exit 2 ;;
    esac
    shift
done
[ $prebuilt = 1 ] || ./build.sh
d=build/cuda
[ -x $d/test_cuda_parity ] || { echo "cuda_parity: $d/test_cuda_parity missing (is nvcc installed under \$CUDA_HOME?)"; exit 1; }
fail=0
echo "== ops on the GPU against the CPU: the default, own convolution kernels and cuBLAS GEMM"
OCR_CUDA_SYNC_DEBUG=1 $d/test_cuda_parity || fail=1
echo "== the same with cuDNN convolutions (OCR_CUDA_CUDNN=1)"
OCR_CUDA_SYNC_DEBUG=1 OCR_CUDA_CUDNN=1 $d/test_cuda_parity || fail=1
echo "== the same with the own kernels only"
OCR_CUDA_SYNC_DEBUG=1 OCR_CUDA_NO_CUBLAS=1 $d/test_cuda_parity || fail=1
echo "== the model's convolutions through cuDNN, the own kernels and the CPU"
while read -r shape; do
    # shellcheck disable=SC2086
    $d/repro_cudnn_isolate $shape || fail=1
done <<'SHAPES'
--n 2 --cin 3 --h 64 --w 64 --cout 64 --k 7 --stride 2 --pad 3
--n 2 --cin 64 --h 32 --w 32 --cout 64 --k 3 --pad 1
--n 2 --cin 128 --h 16 --w 16 --cout 256 --k 3 --stride 2 --pad 1
--n 2 --cin 512 --h 4 --w 4 --cout 256 --k 1 --pad 0
--n 2 --cin 256 --h 160 --w 160 --cout 64 --k 3 --pad 1
--n 2 --cin 64 --h 40 --w 40 --cout 64 --k 2 --stride 2 --pad 0 --transposed
SHAPES
echo "== train_dbnet on the GPU (a short run that validates and checkpoints), then detect with its checkpoint"
run=build/cuda/parity_run
rm -rf $run
# shellcheck disable=SC2086
if OCR_CUDA_SYNC_DEBUG=1 $d/train_dbnet --device cuda --steps 20 --batch 2 --size 128 --val-count 4 --val-size 128 --width 0.25 \
        --eval-every 10 --heldout-count 0 $synth_flags --out $run; then
    $d/detect --device cuda --model $run/last.safetensors --out $run/detect $run/overlays/*.png >/dev/null || fail=1
else
    fail=1
fi
echo "== train_rec on the GPU (a short run that validates and checkpoints), then eval_rec, and the same steps on the CPU"
rrun=build/cuda/parity_rec
rm -rf $rrun $rrun-cpu
rec_flags="--steps 40 --batch 16 --val-count 32 --heldout-count 0 --eval-every 20 --log-every 10 $synth_flags"
# shellcheck disable=SC2086
if OCR_CUDA_SYNC_DEBUG=1 $d/train_rec --device cuda $rec_flags --out $rrun > $rrun.log; then
    $d/eval_rec --device cuda --model $rrun/last.safetensors --data synth:val --count 32 >/dev/null || fail=1
    grep -o '"train/loss":[0-9.e+-]*' $rrun/metrics.jsonl | head -4
    if [ -x ./examples/train_rec ] && ./examples/train_rec $rec_flags --out $rrun-cpu > $rrun-cpu.log 2>&1; then
        # the losses of the two devices, step by step (rounding may move the last printed digit)
        paste -d' ' <(grep -o '"train/loss":[0-9.e+-]*' $rrun/metrics.jsonl) <(grep -o '"train/loss":[0-9.e+-]*' $rrun-cpu/metrics.jsonl) | head -4
    else
        echo "(no CPU train_rec here: run examples/train_rec $rec_flags on a CPU machine to compare the losses above)"
    fi
else
    cat $rrun.log; fail=1
fi
if [ $timing = 1 ]; then
    echo "== timing on the GPU: train_dbnet (defaults, 200 steps) in fp32 / bf16 / fp16, train_rec (defaults, 300 steps)"
    for amp in fp32 bf16 fp16; do
        # shellcheck disable=SC2086
        $d/train_dbnet --device cuda --amp $amp --steps 200 --eval-every 200 --val-count 50 --heldout-count 0 $synth_flags --out $d/time_dbnet_$amp \
            > $d/time_dbnet_$amp.log 2>&1 || { tail -5 $d/time_dbnet_$amp.log; fail=1; }
        echo "train_dbnet --amp $amp: $(grep -o '[0-9.]* img/s, data wait [0-9]*%' $d/time_dbnet_$amp.log | tail -1);" \
            "$(grep -o 'hmean [0-9.]*' $d/time_dbnet_$amp.log | tail -1)"
    done
    # shellcheck disable=SC2086
    $d/train_rec --device cuda --steps 300 --eval-every 300 --val-count 100 --heldout-count 0 $synth_flags --out $d/time_rec \
        > $d/time_rec.log 2>&1 || { tail -5 $d/time_rec.log; fail=1; }
    echo "train_rec: $(grep -o '[0-9.]* crops/s, data wait [0-9]*%' $d/time_rec.log | tail -1)"
fi
[ $fail = 0 ] && echo "cuda_parity: every check agrees" || echo "cuda_parity: FAILURES above"
exit $fail
