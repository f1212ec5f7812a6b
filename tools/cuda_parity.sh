#!/usr/bin/env bash
# The CUDA parity suite on a machine with an NVIDIA GPU, in one command (from the repository root):
#     tools/cuda_parity.sh
# Builds the real CUDA variants (./build.sh does, when nvcc is present), then runs every op of ocr_nn.h and
# ocr_loss.h on the GPU against the CPU backend (cuDNN + cuBLAS path, then the own kernels with cuDNN and cuBLAS
# switched off), one whole DBNet training step and eval forward against the CPU model (the same test program), the
# cuDNN isolation tool on the model's convolution shapes, a short train_dbnet + detect run and a short train_rec +
# eval_rec run with --device cuda (the recognizer's losses printed beside the CPU's).
# Exit status 0 when all agree.
set -euo pipefail
cd "$(dirname "$0")/.."
./build.sh
d=build/cuda
[ -x $d/test_cuda_parity ] || { echo "cuda_parity: $d/test_cuda_parity missing (is nvcc installed under \$CUDA_HOME?)"; exit 1; }
fail=0
echo "== ops on the GPU against the CPU: cuDNN convolutions, cuBLAS GEMM"
OCR_CUDA_SYNC_DEBUG=1 $d/test_cuda_parity || fail=1
echo "== the same with the own kernels only"
OCR_CUDA_SYNC_DEBUG=1 OCR_CUDA_NO_CUDNN=1 OCR_CUDA_NO_CUBLAS=1 $d/test_cuda_parity || fail=1
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
if OCR_CUDA_SYNC_DEBUG=1 $d/train_dbnet --device cuda --steps 20 --batch 2 --size 128 --val-count 4 --val-size 128 --width 0.25 \
        --eval-every 10 --out $run; then
    $d/detect --device cuda --model $run/last.safetensors --out $run/detect $run/overlays/*.png >/dev/null || fail=1
else
    fail=1
fi
echo "== train_rec on the GPU (a short run that validates and checkpoints), then eval_rec, and the same steps on the CPU"
rrun=build/cuda/parity_rec
rm -rf $rrun $rrun-cpu
rec_flags="--steps 40 --batch 16 --val-count 32 --heldout-count 0 --eval-every 20 --log-every 10"
# shellcheck disable=SC2086
if OCR_CUDA_SYNC_DEBUG=1 $d/train_rec --device cuda $rec_flags --out $rrun > $rrun.log && ./examples/train_rec $rec_flags --out $rrun-cpu > $rrun-cpu.log; then
    $d/eval_rec --device cuda --model $rrun/last.safetensors --data synth:val --count 32 >/dev/null || fail=1
    # the losses of the two devices, step by step (rounding may move the last printed digit)
    paste -d' ' <(grep -o '"train/loss":[0-9.e+-]*' $rrun/metrics.jsonl) <(grep -o '"train/loss":[0-9.e+-]*' $rrun-cpu/metrics.jsonl) | head -4
else
    fail=1
fi
[ $fail = 0 ] && echo "cuda_parity: every check agrees" || echo "cuda_parity: FAILURES above"
exit $fail
