#!/usr/bin/python3
"""Reference fixtures for tests/test_loss.c: the DB loss of the official DBNet code (L1BalanceCELoss:
BalanceCrossEntropyLoss + DiceLoss + MaskL1Loss, DBNET_REFERENCE.md section 3), written again here in PyTorch
from the formulas, evaluated in float64 on deterministic inputs, with gradients from autograd.

Two forms of every BCE are evaluated:
  official  F.binary_cross_entropy on sigmoid probabilities (each log clamped at -100), as the official code;
  exact     F.binary_cross_entropy_with_logits, the form ocr_loss.h computes.
They agree wherever the official log terms are not clamped; the script asserts so and records whether a case
touches the clamp. The C test compares values and gradients with the exact form, and with the official value
whenever the case does not touch the clamp. Gradients always come from the exact form: autograd through
F.binary_cross_entropy divides by max(p(1-p), 1e-12), which bends the gradient for |logit| > ~27 even in
float64.

OHEM ties: the sum of the kept negatives is checked against torch.topk; its gradient is given in equal shares
to the negatives tied with the k-th largest loss (the subgradient ocr_loss.h uses; topk picks a subset).

Usage: /usr/bin/python3 tools/make_loss_fixtures.py [out.safetensors]
       (default tests/fixtures/loss/db_loss.safetensors; deterministic)
"""
import os
import sys

import numpy as np
import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import ocr_st  # noqa: E402

OHEM, BALANCED, POS_WEIGHT = 0, 1, 2

# Each config: mode, negative_ratio, pos_weight, bce_eps, bce_w, dice_w, l1_w, binary_bce_w, k, dice_eps
CONFIGS = [
    ("official", [OHEM, 3.0, 1.0, 1e-6, 5.0, 1.0, 10.0, 0.0, 50.0, 1e-6]),
    ("balanced", [BALANCED, 3.0, 1.0, 1e-6, 5.0, 1.0, 10.0, 0.0, 50.0, 1e-6]),
    ("pos_weight", [POS_WEIGHT, 3.0, 4.0, 1e-6, 5.0, 1.0, 10.0, 0.0, 50.0, 1e-6]),
    ("paper", [OHEM, 3.0, 1.0, 1e-6, 1.0, 0.0, 10.0, 1.0, 50.0, 1e-6]),
    ("mixed", [OHEM, 1.5, 1.0, 1e-6, 2.0, 0.5, 3.0, 0.7, 30.0, 1e-3]),
]


def f32(v):
    return float(np.float32(v))


def classify(gt32, mask32):
    """Positive / negative pixels exactly as the official uint8 cast of float32 products."""
    pos = (gt32 * mask32).to(torch.uint8).bool()
    neg = ((1 - gt32) * mask32).to(torch.uint8).bool()
    return pos, neg


def balanced_bce(loss, gt32, mask32, mode, ratio, pos_weight, eps):
    pos, neg = classify(gt32, mask32)
    pc, nn = int(pos.sum()), int(neg.sum())
    pos_sum, neg_l = loss[pos].sum(), loss[neg]
    if mode == OHEM:
        kept = min(nn, int(pc * ratio))
        if pc + kept == 0:
            return loss.sum() * 0.0
        sel = loss.sum() * 0.0
        if kept > 0:
            ranked = torch.sort(neg_l.detach(), descending=True).values
            cut = ranked[kept - 1]
            above, equal = neg_l.detach() > cut, neg_l.detach() == cut
            share = (kept - int(above.sum())) / int(equal.sum())
            sel = neg_l[above].sum() + share * neg_l[equal].sum()
            official = torch.topk((loss.detach() * neg).reshape(-1), kept).values.sum()
            assert abs(float(sel) - float(official)) <= 1e-12 * max(1.0, abs(float(official))), (float(sel), float(official))
        return (pos_sum + sel) / (pc + kept + eps)
    if mode == BALANCED:
        if pc and nn:
            return 0.5 * pos_sum / pc + 0.5 * neg_l.sum() / nn
        if pc:
            return pos_sum / pc
        if nn:
            return neg_l.sum() / nn
        return loss.sum() * 0.0
    denom = pos_weight * pc + nn
    if denom == 0:
        return loss.sum() * 0.0
    return (pos_weight * pos_sum + neg_l.sum()) / (denom + eps)


def dice(pred, gt, mask, eps):
    inter = (pred * gt * mask).sum()
    union = (pred * mask).sum() + (gt * mask).sum() + eps
    return 1.0 - 2.0 * inter / union


def masked_l1(pred, gt, mask):
    msum = mask.sum()
    if float(msum) == 0.0:
        return msum
    return (torch.abs(pred - gt) * mask).sum() / msum


def db_loss(inputs, cfg, form):
    """Returns (terms [total, bce, dice, l1, bce_binary], d_logits, d_thresh, touches_clamp)."""
    mode, ratio, pw, beps, w_bce, w_dice, w_l1, w_bb, k, deps = cfg
    beps, deps, k, ratio, pw = f32(beps), f32(deps), f32(k), f32(ratio), f32(pw)
    x32, t32, gs32, ms32, gt32, mt32 = [torch.from_numpy(a) for a in inputs]
    x = x32.double().requires_grad_(True)
    t = t32.double().requires_grad_(True)
    gs, ms, gtt, mt = gs32.double(), ms32.double(), gt32.double(), mt32.double()
    p = torch.sigmoid(x)
    z = k * (p - t)
    binary = torch.reciprocal(1 + torch.exp(-z))  # the official step expression
    pos, neg = classify(gs32, ms32)
    used = pos | neg
    clamp = False

    def bce(logits, prob):
        nonlocal clamp
        if form == "official":
            with torch.no_grad():
                lp, l1p = torch.log(prob), torch.log1p(-prob)
                hit = ((lp < -100) & (gs > 0)) | ((l1p < -100) & (gs < 1))
                clamp = clamp or bool((hit & used).any())
            return F.binary_cross_entropy(prob, gs, reduction="none")
        return F.binary_cross_entropy_with_logits(logits, gs, reduction="none")

    zero = x.sum() * 0.0
    t_bce = balanced_bce(bce(x, p), gs32, ms32, mode, ratio, pw, beps) if w_bce > 0 else zero
    t_dice = dice(binary, gs, ms, deps) if w_dice > 0 else zero
    t_l1 = masked_l1(t, gtt, mt) if w_l1 > 0 else zero
    t_bb = balanced_bce(bce(z, binary), gs32, ms32, mode, ratio, pw, beps) if w_bb > 0 else zero
    total = f32(w_bce) * t_bce + f32(w_dice) * t_dice + f32(w_l1) * t_l1 + f32(w_bb) * t_bb
    total.backward()
    gx = x.grad if x.grad is not None else torch.zeros_like(x)
    gt_ = t.grad if t.grad is not None else torch.zeros_like(t)
    terms = np.array([float(v) for v in (total, t_bce, t_dice, t_l1, t_bb)])
    return terms, gx.numpy().astype(np.float32), gt_.numpy().astype(np.float32), clamp


def blobs(rng, shape, count, lo, hi):
    """Binary map with `count` random axis-aligned rectangles per image."""
    out = np.zeros(shape, np.float32)
    n, _, h, w = shape
    for i in range(n):
        for _ in range(count):
            bh, bw = rng.randint(lo, hi + 1), rng.randint(lo, hi + 1)
            y0, x0 = rng.randint(0, max(1, h - bh)), rng.randint(0, max(1, w - bw))
            out[i, 0, y0:y0 + bh, x0:x0 + bw] = 1.0
    return out


def make_case(name, seed, shape):
    rng = np.random.RandomState(seed)
    x = rng.normal(0.0, 2.0, shape).astype(np.float32)
    t = rng.uniform(0.0, 1.0, shape).astype(np.float32)
    gs = blobs(rng, shape, 2, 2, max(2, shape[2] // 3))
    ms = (rng.uniform(size=shape) > 0.1).astype(np.float32)
    gtt = rng.uniform(0.3, 0.7, shape).astype(np.float32)
    mt = np.clip(blobs(rng, shape, 2, 3, max(3, shape[2] // 2)) + gs, 0, 1).astype(np.float32)
    if name == "logit30":
        x = rng.uniform(-30.0, 30.0, shape).astype(np.float32)
    elif name == "logit1e4":
        x = (rng.choice([-1.0, 1.0], shape) * 10.0 ** rng.uniform(-2, 4, shape)).astype(np.float32)
        x.reshape(-1)[:4] = [1e4, -1e4, 3e3, -3e3]
    elif name == "background":
        gs[:] = 0.0
    elif name == "empty_masks":
        ms[:] = 0.0
        mt[:] = 0.0
    elif name == "ignored_image":
        ms[1] = 0.0
        mt[1] = 0.0
    elif name == "soft":
        gs = np.where(rng.uniform(size=shape) < 0.3, rng.uniform(size=shape), gs).astype(np.float32)
        ms = np.where(rng.uniform(size=shape) < 0.3, rng.uniform(size=shape), ms).astype(np.float32)
        gs.reshape(-1)[:3] = [1e-9, 2.0 ** -26, 0.99999994]  # rounds (1-g)*m to 1, to 1, and g*m below 1
        ms.reshape(-1)[:3] = 1.0
        mt = np.where(rng.uniform(size=shape) < 0.3, rng.uniform(size=shape), mt).astype(np.float32)
        t.reshape(-1)[::7] = gtt.reshape(-1)[::7]  # |T - target| = 0: zero subgradient
    elif name == "ties":
        x = rng.randint(-3, 4, shape).astype(np.float32)
        t = (rng.randint(0, 5, shape) / 4.0).astype(np.float32)
    elif name == "thresh_wide":
        x = rng.normal(0.0, 4.0, shape).astype(np.float32)
        t = rng.uniform(-2.0, 3.0, shape).astype(np.float32)
    elif name == "mostly_positive":
        gs = (rng.uniform(size=shape) < 0.8).astype(np.float32)
    return [x, t, gs, ms, gtt, mt]


CASES = [
    ("normal", 1, (2, 1, 16, 24)),
    ("logit30", 2, (1, 1, 24, 20)),
    ("logit1e4", 3, (2, 1, 8, 12)),
    ("background", 4, (2, 1, 12, 12)),
    ("empty_masks", 5, (1, 1, 10, 14)),
    ("ignored_image", 6, (2, 1, 16, 16)),
    ("soft", 7, (1, 1, 16, 16)),
    ("ties", 8, (3, 1, 7, 13)),
    ("thresh_wide", 9, (1, 1, 20, 20)),
    ("mostly_positive", 10, (1, 1, 12, 16)),
]
INPUT_NAMES = ["prob_logits", "thresh", "gt_shrink", "mask_shrink", "gt_thresh", "mask_thresh"]


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else os.path.join("tests", "fixtures", "loss", "db_loss.safetensors")
    torch.set_num_threads(1)
    tensors = {}
    clamped_cases = []
    for ci, (name, seed, shape) in enumerate(CASES):
        inputs = make_case(name, seed, shape)
        for nm, a in zip(INPUT_NAMES, inputs):
            tensors["c%d.%s" % (ci, nm)] = a
        for ki, (cname, cfg) in enumerate(CONFIGS):
            terms, gx, gt_, _ = db_loss(inputs, cfg, "exact")
            off, _, _, clamp = db_loss(inputs, cfg, "official")
            if not clamp:
                assert np.allclose(terms, off, rtol=1e-4, atol=1e-9), (name, cname, terms, off)
            else:
                clamped_cases.append("%s/%s" % (name, cname))
            key = "c%d.k%d." % (ci, ki)
            tensors[key + "config"] = np.array(cfg, np.float32)
            tensors[key + "terms"] = terms.astype(np.float32)
            tensors[key + "official"] = np.array([off[0], 1.0 if clamp else 0.0], np.float32)
            tensors[key + "d_prob_logits"] = gx
            tensors[key + "d_thresh"] = gt_
    meta = {"cases": str(len(CASES)), "configs": str(len(CONFIGS)),
            "case_names": ",".join(c[0] for c in CASES), "config_names": ",".join(c[0] for c in CONFIGS),
            "generator": "tools/make_loss_fixtures.py", "torch": torch.__version__}
    os.makedirs(os.path.dirname(out) or ".", exist_ok=True)
    ocr_st.save(out, tensors, meta)
    print("wrote %s (%d tensors, %d bytes); cases touching the -100 clamp: %s" %
          (out, len(tensors), os.path.getsize(out), ", ".join(clamped_cases) or "none"))


if __name__ == "__main__":
    main()
