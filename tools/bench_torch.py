"""PyTorch peer for bench/bench_train.c: the same DB-ResNet (tools/dbnet_ref.py), driven line by line over stdin so
the C benchmark can alternate its own runs with these in one process lifetime (interpreter start and warm-up
excluded).

Commands (one per line; each answers one line on stdout):
    setup train|infer DEPTH WIDTH N H W THREADS   builds model, data and optimizer -> "ok"
    run                                            one training step (forward, DB loss, backward, SGD step), or
                                                   one inference (eval, no_grad) -> "<seconds>"
    mem                                            peak resident memory of this process so far (VmHWM) -> "<KiB>"
    quit
The loss is the official one: 5 * OHEM BCE(P) + Dice(B) + 10 * masked L1(T). Data are fixed random images with
rectangular text regions, as in bench_train.c.
"""
import sys
import time

import torch
import torch.nn.functional as F

import dbnet_ref


def db_loss(logits, thresh, gt, mask, gt_t, mask_t, k=50.0):
    prob = torch.sigmoid(logits)
    pos = (gt * mask).flatten()
    neg = ((1 - gt) * mask).flatten()
    n_pos = int(pos.sum())
    n_neg = min(int(neg.sum()), 3 * n_pos)
    bce = F.binary_cross_entropy_with_logits(logits.flatten(), gt.flatten(), reduction="none")
    neg_loss, _ = torch.topk(bce * neg, n_neg)
    l_bce = ((bce * pos).sum() + neg_loss.sum()) / (n_pos + n_neg + 1e-6)
    binary = torch.sigmoid(k * (prob - thresh))
    inter = (binary * gt * mask).sum()
    l_dice = 1 - 2 * inter / ((binary * mask).sum() + (gt * mask).sum() + 1e-6)
    l_l1 = ((thresh - gt_t).abs() * mask_t).sum() / (mask_t.sum() + 1e-6)
    return 5 * l_bce + l_dice + 10 * l_l1


def make_targets(n, h, w, gen):
    gt = torch.zeros(n, 1, h, w)
    gt_t = torch.full((n, 1, h, w), 0.3)
    mask_t = torch.zeros(n, 1, h, w)
    for i in range(n):
        for _ in range(8):
            bh = int(torch.randint(8, max(9, h // 6), (1,), generator=gen))
            bw = int(torch.randint(16, max(17, w // 3), (1,), generator=gen))
            y = int(torch.randint(0, h - bh, (1,), generator=gen))
            x = int(torch.randint(0, w - bw, (1,), generator=gen))
            gt[i, 0, y:y + bh, x:x + bw] = 1
            y0, y1, x0, x1 = max(0, y - 4), min(h, y + bh + 4), max(0, x - 4), min(w, x + bw + 4)
            mask_t[i, 0, y0:y1, x0:x1] = 1
            gt_t[i, 0, y0:y1, x0:x1] = 0.7
    return gt, torch.ones(n, 1, h, w), gt_t, mask_t


class Bench:
    def setup(self, mode, depth, width, n, h, w, threads, amp="fp32"):
        torch.set_num_threads(threads)
        # bf16: CPU autocast runs the convolutions in bfloat16; the loss stays fp32 as in ocr-c
        self.autocast = amp == "bf16"
        gen = torch.Generator().manual_seed(1)
        self.mode = mode
        self.model = dbnet_ref.DBNet(depth, width)
        dbnet_ref.official_init(self.model, 0.03)
        self.x = torch.rand(n, 3, h, w, generator=gen) * 2 - 1
        if mode == "train":
            self.model.train()
            self.targets = make_targets(n, h, w, gen)
            self.opt = torch.optim.SGD(self.model.parameters(), lr=1e-3, momentum=0.9, weight_decay=1e-4)
        else:
            self.model.eval()

    def run(self):
        t0 = time.perf_counter()
        if self.mode == "train":
            with torch.autocast("cpu", dtype=torch.bfloat16, enabled=self.autocast):
                logits, thresh = self.model(self.x)
            loss = db_loss(logits.float(), thresh.float(), *self.targets)
            self.opt.zero_grad(set_to_none=False)
            loss.backward()
            self.opt.step()
        else:
            with torch.no_grad(), torch.autocast("cpu", dtype=torch.bfloat16, enabled=self.autocast):
                self.model(self.x)
        return time.perf_counter() - t0


def main():
    b = Bench()
    for line in sys.stdin:
        f = line.split()
        if not f:
            continue
        if f[0] == "setup":
            b.setup(f[1], int(f[2]), float(f[3]), int(f[4]), int(f[5]), int(f[6]), int(f[7]), *f[8:9])
            print("ok", flush=True)
        elif f[0] == "run":
            print("%.6f" % b.run(), flush=True)
        elif f[0] == "mem":
            with open("/proc/self/status") as status:
                print(next(l.split()[1] for l in status if l.startswith("VmHWM:")), flush=True)
        elif f[0] == "quit":
            break
        else:
            print("error unknown command " + f[0], flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
