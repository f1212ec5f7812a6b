"""PyTorch peer for bench/bench_rec.c: the same CRNN (tools/crnn_ref.py's module), driven line by line over stdin so
the C benchmark alternates its runs with these in one process lifetime (interpreter start and warm-up excluded).

Commands (one per line; each answers one line on stdout):
    setup N W CLASSES THREADS HIDDEN LAYERS C0,C1,C2,C3,C4,C5   model, data (N crops of 32 x W), AdamW -> "ok"
    train      one training step: forward, CTC loss (mean), backward, AdamW step -> "<seconds>"
    infer      one inference: eval mode, no_grad forward -> "<seconds>"
    quit
Data: fixed random crops, labels of 4 to 10 random classes per crop (seed 0), every frame an input frame, as
bench_rec.c makes them (the values differ; the shapes and work are the same).
"""
import sys
import time

import torch
import torch.nn.functional as F

import crnn_ref


def main():
    model = opt = x = targets = tlens = ilens = None
    for line in sys.stdin:
        cmd = line.split()
        if not cmd:
            continue
        if cmd[0] == "quit":
            break
        if cmd[0] == "setup":
            n, w, classes, threads, hidden, layers = (int(v) for v in cmd[1:7])
            channels = [int(c) for c in cmd[7].split(",")]
            torch.set_num_threads(threads)
            gen = torch.Generator().manual_seed(0)
            model = crnn_ref.CRNN(classes, channels, hidden, layers)
            opt = torch.optim.AdamW(model.parameters(), lr=1e-3, weight_decay=1e-4)
            x = torch.randn(n, 3, 32, w, generator=gen)
            tlens = torch.randint(4, 11, (n,), generator=gen)
            targets = torch.randint(1, classes, (int(tlens.sum()),), generator=gen)
            ilens = torch.full((n,), w // 4, dtype=torch.long)
            print("ok", flush=True)
        elif cmd[0] == "train":
            t0 = time.perf_counter()
            model.train()
            opt.zero_grad(set_to_none=False)
            lp = model(x)
            loss = F.ctc_loss(lp, targets, ilens, tlens, blank=0, reduction="mean", zero_infinity=True)
            loss.backward()
            opt.step()
            print("%.9f" % (time.perf_counter() - t0), flush=True)
        elif cmd[0] == "infer":
            t0 = time.perf_counter()
            model.eval()
            with torch.no_grad():
                model(x)
            print("%.9f" % (time.perf_counter() - t0), flush=True)
        else:
            print("error: unknown command %r" % cmd[0], flush=True)


if __name__ == "__main__":
    main()
