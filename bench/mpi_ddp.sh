#!/usr/bin/env bash
# mpi_ddp.sh - data-parallel training throughput on this machine, in one run: examples/train_dbnet as 1 process with 2
# threads against 2 MPI ranks with 1 thread each (the same global batch), and PyTorch the same way: 1 process with 2
# threads against 2 DistributedDataParallel processes (gloo) with 1 thread each, on the same model (DB-ResNet-18 at
# width 0.25, tools/dbnet_ref.py) and image size. Prints the CPU, then images per second for each row.
#
#   flock /tmp/ocr-cpu.lock bench/mpi_ddp.sh [--steps 30] [--warmup 10] [--batch 8] [--size 256] [--width 0.25]
#
# --batch is the global batch (each of 2 ranks takes half). Images per second are counted from the end of step
# --warmup to the end of the last: ocr-c's from its log lines (cumulative rate at both steps), PyTorch's timed around
# the steps after a barrier. ocr-c trains with its default recipe on synthetic scenes rendered while it trains (one
# loader thread per process, niced: its cost is in the figure); PyTorch on fixed random images and targets with the
# official DB loss and AdamW (tools/bench_torch.py), which it never has to make. ocr-c's 2-rank rows: --dist-loss
# global (the default: the whole batch's loss, each rank's maps gathered), local (each rank's loss, gradients averaged,
# as DDP does) and global with --sync-bn; mpirun --bind-to none (Open MPI binds each of 2 ranks to one core by default,
# where the loader thread then competes with the compute thread: one row shows that too). Each 2-rank row also gives
# rank 0's time per step in the gradient all-reduce and in the gathered loss (train_dbnet prints it).
#
# Needs ./build.sh (examples/train_dbnet built with MPI: libopenmpi-dev, openmpi-bin) and Debian's python3-torch.
# It times training: run it alone, under the lock.
set -euo pipefail
cd "$(dirname "$0")/.."

STEPS=30 WARMUP=10 BATCH=8 SIZE=256 WIDTH=0.25 OUT=build/mpi_ddp
while [ $# -gt 0 ]; do
    case "$1" in
    --steps) STEPS=$2; shift 2 ;;
    --warmup) WARMUP=$2; shift 2 ;;
    --batch) BATCH=$2; shift 2 ;;
    --size) SIZE=$2; shift 2 ;;
    --width) WIDTH=$2; shift 2 ;;
    --out) OUT=$2; shift 2 ;;
    -h|--help) sed -n '2,20p' "$0"; exit 0 ;;
    *) echo "mpi_ddp.sh: unknown argument $1" >&2; exit 2 ;;
    esac
done
[ $((BATCH % 2)) = 0 ] || { echo "mpi_ddp.sh: --batch must be even (2 ranks)" >&2; exit 2; }
TRAIN=./examples/train_dbnet PY=/usr/bin/python3   # a pyenv python3 on PATH lacks Debian's python3-torch
[ -x "$TRAIN" ] || { echo "mpi_ddp.sh: build first (./build.sh)" >&2; exit 1; }
command -v mpirun >/dev/null || { echo "mpi_ddp.sh: no mpirun (apt-get install openmpi-bin libopenmpi-dev, then ./build.sh)" >&2; exit 1; }
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
mkdir -p "$OUT"
TOTAL=$((WARMUP + STEPS)) HALF=$((BATCH / 2))

echo "CPU: $(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -1), $(nproc) cores; Open MPI $(mpirun --version 2>/dev/null | sed -n 's/.*(Open MPI) //p' | head -1); PyTorch $($PY -c 'import torch; print(torch.__version__)')"
echo "DB-ResNet-18 width $WIDTH, ${SIZE}x${SIZE}, global batch $BATCH, images/s over steps $((WARMUP + 1))-$TOTAL"

# ocr_rate LOG: images/s between the log lines of steps WARMUP and TOTAL ("step S/T ... R img/s", cumulative rates)
ocr_rate() {
    awk -v a="$WARMUP" -v b="$TOTAL" -v n="$BATCH" '
        $1 == "step" && index($2, "/") { split($2, s, "/"); for (i = 1; i <= NF; i++) if ($(i + 1) == "img/s") r[s[1]] = $i }
        END { if (!(a in r) || !(b in r)) { print "?"; exit } ta = a * n / r[a]; tb = b * n / r[b]; printf "%.1f", (b - a) * n / (tb - ta) }' "$1"
}
# the rank-0 exchange times train_dbnet prints, shortened
exchange() { sed -n 's/.*gradient all-reduce \([0-9.]*\) ms, loss maps gathered and the whole batch.s loss \([0-9.]*\) ms.* of a step.s \([0-9.]*\) ms/all-reduce \1 ms, gathered loss \2 ms of \3 ms a step/p' "$1"; }

COMMON=(--steps "$TOTAL" --size "$SIZE" --width "$WIDTH" --photos none --val-count 2 --val-size 64 --heldout-count 0 --eval-every 0
        --log-every "$WARMUP" --workers 1 --save-every 100000)
row() { printf '%-66s %8s img/s  %s\n' "$1" "$2" "${3:-}"; }

run_ocr() { # LABEL LOG CMD...
    local label=$1 log=$2; shift 2
    rm -rf "$OUT/run"
    "$@" --out "$OUT/run" </dev/null >"$log" 2>&1 || { echo "mpi_ddp.sh: $label failed:"; tail -20 "$log"; exit 1; }
    row "$label" "$(ocr_rate "$log")" "$(exchange "$log")"
}
run_ocr "ocr-c  1 process x 2 threads, batch $BATCH" "$OUT/ocr_1x2.log" "$TRAIN" "${COMMON[@]}" --batch "$BATCH" --threads 2
run_ocr "ocr-c  2 ranks x 1 thread, batch $HALF each (--dist-loss global)" "$OUT/ocr_2x1.log" \
    mpirun -np 2 --bind-to none "$TRAIN" "${COMMON[@]}" --batch "$HALF" --threads 1
run_ocr "ocr-c  2 ranks x 1 thread, --dist-loss local" "$OUT/ocr_2x1_local.log" \
    mpirun -np 2 --bind-to none "$TRAIN" "${COMMON[@]}" --batch "$HALF" --threads 1 --dist-loss local
run_ocr "ocr-c  2 ranks x 1 thread, --sync-bn" "$OUT/ocr_2x1_syncbn.log" \
    mpirun -np 2 --bind-to none "$TRAIN" "${COMMON[@]}" --batch "$HALF" --threads 1 --sync-bn
run_ocr "ocr-c  2 ranks x 1 thread, mpirun's default binding (one core each)" "$OUT/ocr_2x1_bound.log" \
    mpirun -np 2 "$TRAIN" "${COMMON[@]}" --batch "$HALF" --threads 1

# PyTorch: one process, or DistributedDataParallel over 2 processes (gloo, per-rank BN as ocr-c's default)
cat >"$OUT/ddp.py" <<'EOF'
import os, sys, time
sys.path.insert(0, "tools")
import torch, torch.distributed as dist, torch.multiprocessing as mp
import dbnet_ref
from bench_torch import db_loss, make_targets

def worker(rank, world, batch, threads, size, width, warmup, steps, port):
    torch.set_num_threads(threads)
    if world > 1:
        dist.init_process_group("gloo", init_method="tcp://127.0.0.1:%d" % port, rank=rank, world_size=world)
    torch.manual_seed(1)
    model = dbnet_ref.DBNet(18, width)
    dbnet_ref.official_init(model, 0.03)
    model.train()
    if world > 1:
        model = torch.nn.parallel.DistributedDataParallel(model)
    gen = torch.Generator().manual_seed(1 + rank)
    x = torch.rand(batch, 3, size, size, generator=gen) * 2 - 1
    targets = make_targets(batch, size, size, gen)
    opt = torch.optim.AdamW(model.parameters(), lr=2e-3, weight_decay=1e-4)
    for i in range(warmup + steps):
        if i == warmup:
            if world > 1:
                dist.barrier()
            t0 = time.perf_counter()
        logits, thresh = model(x)
        loss = db_loss(logits, thresh, *targets)
        opt.zero_grad(set_to_none=False)
        loss.backward()
        opt.step()
    if world > 1:
        dist.barrier()
    if rank == 0:
        print("%.1f" % (batch * world * steps / (time.perf_counter() - t0)), flush=True)
    if world > 1:
        dist.destroy_process_group()

if __name__ == "__main__":
    world, batch, threads, size, width, warmup, steps = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), float(sys.argv[5]), int(sys.argv[6]), int(sys.argv[7])
    port = 29500 + os.getpid() % 1000
    if world == 1:
        worker(0, 1, batch, threads, size, width, warmup, steps, port)
    else:
        mp.spawn(worker, args=(world, batch, threads, size, width, warmup, steps, port), nprocs=world)
EOF
row "PyTorch 1 process x 2 threads, batch $BATCH" "$($PY "$OUT/ddp.py" 1 "$BATCH" 2 "$SIZE" "$WIDTH" "$WARMUP" "$STEPS")"
row "PyTorch DDP (gloo) 2 processes x 1 thread, batch $HALF each" "$($PY "$OUT/ddp.py" 2 "$HALF" 1 "$SIZE" "$WIDTH" "$WARMUP" "$STEPS")"
