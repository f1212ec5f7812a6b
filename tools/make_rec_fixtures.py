#!/usr/bin/env python3
"""Reference fixtures for tests/test_rec_ops.c: PyTorch's nn.LSTM, F.log_softmax, F.max_pool2d with rectangular
windows, CRNN's map-to-sequence and F.ctc_loss.

Run from the repository root:  /usr/bin/python3 tools/make_rec_fixtures.py
Writes tests/fixtures/rec/{lstm,log_softmax,maxpool_rect,map_to_seq,ctc}.safetensors. As tools/make_fixtures.py: inputs drawn in float64,
rounded to float32 (what the C test reads) and computed on in float64, so what is left between the two sides is
ocr-c's float32 arithmetic. Tensors "case<k>.<name>", metadata "cases" and "case<k>.<key>". Deterministic (a fixed
seed per file).
"""
import os
import sys

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import make_fixtures  # noqa: E402  (float64 default, f32 rounding and the fixture writer of the nn fixtures)
from make_fixtures import f32, randn  # noqa: E402,F401

OUT = os.path.join("tests", "fixtures", "rec")


class Fixture(make_fixtures.Fixture):
    out = OUT


def lstm():
    """nn.LSTM (sequence first) of several layers; per layer its output (the next layer's input), the final output,
    dx and every parameter's gradient for a random dy."""
    fx = Fixture("lstm", 11)
    # T, N, I, H, layers, bidirectional, bias
    for T, N, I, H, layers, bidir, bias in [(6, 3, 4, 5, 2, True, True), (5, 2, 3, 4, 1, False, True),
                                            (4, 2, 3, 3, 1, True, False), (1, 2, 3, 2, 1, True, True)]:
        m = torch.nn.LSTM(I, H, num_layers=layers, bidirectional=bidir, bias=bias)
        with torch.no_grad():
            for p in m.parameters():
                p.copy_(f32(p * 1.5))   # a little beyond the default range, so the gates leave their linear part
        x = randn(T, N, I).requires_grad_(True)
        y, _ = m(x)
        dy = randn(*y.shape)
        y.backward(dy)
        t = {"x": x, "y": y, "dy": dy, "dx": x.grad}
        # each layer's output alone: the input of the next layer, so that a layer is checked on exact inputs
        h = x.detach()
        for k in range(layers):
            sub = torch.nn.LSTM(h.shape[2], H, num_layers=1, bidirectional=bidir, bias=bias)
            with torch.no_grad():
                for name, p in sub.named_parameters():
                    p.copy_(getattr(m, name.replace("_l0", "_l%d" % k)))
            h, _ = sub(h)
            t["y_l%d" % k] = h.detach()
            h = f32(h.detach())
            t["x_l%d" % (k + 1)] = h   # float32-rounded, as the C side passes it on
        for name, p in m.named_parameters():
            t[name] = p
            t["grad." + name] = p.grad
        fx.case({"T": T, "N": N, "I": I, "H": H, "layers": layers, "directions": 2 if bidir else 1, "bias": bias}, t)
    # per-sample lengths, as pack_padded_sequence (unsorted) and pad_packed_sequence back to T: padded outputs are 0,
    # the reverse direction starts at each sample's last step; x beyond a sample's length is random and must not matter
    pack = torch.nn.utils.rnn.pack_padded_sequence
    unpack = torch.nn.utils.rnn.pad_packed_sequence
    for T, N, I, H, layers, bidir, lengths in [(6, 4, 3, 4, 2, True, [3, 6, 1, 5]), (5, 3, 2, 3, 1, False, [5, 2, 4])]:
        m = torch.nn.LSTM(I, H, num_layers=layers, bidirectional=bidir)
        with torch.no_grad():
            for p in m.parameters():
                p.copy_(f32(p * 1.5))
        lens = torch.tensor(lengths)
        x = randn(T, N, I).requires_grad_(True)
        y, _ = m(pack(x, lens, enforce_sorted=False))
        y, _ = unpack(y, total_length=T)
        dy = randn(*y.shape)
        y.backward(dy)
        t = {"x": x, "y": y, "dy": dy, "dx": x.grad, "lengths": lens.to(torch.int32)}
        h = x.detach()
        for k in range(layers):
            sub = torch.nn.LSTM(h.shape[2], H, num_layers=1, bidirectional=bidir)
            with torch.no_grad():
                for name, p in sub.named_parameters():
                    p.copy_(getattr(m, name.replace("_l0", "_l%d" % k)))
            h, _ = unpack(sub(pack(h, lens, enforce_sorted=False))[0], total_length=T)
            t["y_l%d" % k] = h.detach()
            h = f32(h.detach())
            t["x_l%d" % (k + 1)] = h
        for name, p in m.named_parameters():
            t[name] = p
            t["grad." + name] = p.grad
        fx.case({"T": T, "N": N, "I": I, "H": H, "layers": layers, "directions": 2 if bidir else 1, "bias": True, "lengths": 1}, t)
    fx.save()


def log_softmax():
    fx = Fixture("log_softmax", 12)
    for shape, scale, shift in [((4, 3, 7), 1.0, 0.0), ((3, 2, 11), 30.0, 500.0), ((5, 37), 3.0, -80.0)]:
        x = randn(*shape, scale=scale, shift=shift).requires_grad_(True)
        y = F.log_softmax(x, dim=-1)
        dy = randn(*shape)
        y.backward(dy)
        fx.case({"scale": scale}, {"x": x, "y": y, "dy": dy, "dx": x.grad})
    fx.save()


def maxpool_rect():
    """F.max_pool2d with rectangular windows (CRNN's height-only pools), its argmax and its backward."""
    fx = Fixture("maxpool_rect", 14)
    for kernel, stride, pad in [((2, 1), (2, 1), (0, 0)), ((2, 2), (2, 1), (0, 1)), ((3, 2), (1, 2), (1, 1))]:
        x = randn(2, 3, 8, 7).requires_grad_(True)
        y, idx = F.max_pool2d(x, kernel, stride, pad, return_indices=True)
        dy = randn(*y.shape)
        y.backward(dy)
        fx.case({"kh": kernel[0], "kw": kernel[1], "sh": stride[0], "sw": stride[1], "ph": pad[0], "pw": pad[1]},
                {"x": x, "y": y, "argmax": idx.int(), "dy": dy, "dx": x.grad})
    fx.save()


def map_to_seq():
    """CRNN's map-to-sequence, x [N, C, H, W] -> [W, N, C*H], as a PyTorch module writes it."""
    fx = Fixture("map_to_seq", 15)
    for shape in [(2, 3, 1, 5), (2, 3, 2, 4)]:
        x = randn(*shape).requires_grad_(True)
        n, c, h, w = shape
        y = x.permute(3, 0, 1, 2).reshape(w, n, c * h)
        dy = randn(*y.shape)
        y.backward(dy)
        fx.case({"H": h}, {"x": x, "y": y, "dy": dy, "dx": x.grad})
    fx.save()


def ctc():
    """F.ctc_loss on log_softmax outputs rounded to float32 (the values the C side reads), blank 0."""
    fx = Fixture("ctc", 13)

    def case(T, C, targets, input_lengths, reduction, blank_boost=0.0, zero_infinity=False, scale=1.0):
        N = len(targets)
        logits = randn(T, N, C, scale=scale)
        logits[:, :, 0] += blank_boost
        lp = f32(F.log_softmax(logits, dim=-1)).requires_grad_(True)
        flat = torch.tensor([c for t in targets for c in t], dtype=torch.int32)
        tl = torch.tensor([len(t) for t in targets], dtype=torch.int32)
        il = torch.tensor(input_lengths, dtype=torch.int32)
        loss = F.ctc_loss(lp, flat.long(), il.long(), tl.long(), blank=0, reduction=reduction, zero_infinity=zero_infinity)
        loss.backward()
        nll = F.ctc_loss(lp.detach(), flat.long(), il.long(), tl.long(), blank=0, reduction="none",
                         zero_infinity=zero_infinity)
        fx.case({"reduction": 0 if reduction == "mean" else 1, "skip": zero_infinity},
                {"log_probs": lp, "targets": flat, "target_lengths": tl, "input_lengths": il,
                 "loss": loss.reshape(1), "nll": nll, "grad": lp.grad})

    # repeats (1 1, 3 3 3), an empty target, input lengths below T
    for reduction in ("mean", "sum"):
        case(12, 6, [[1, 1, 2], [3, 3, 3], [], [5, 4, 2, 1]], [12, 10, 7, 9], reduction)
    # long sequences: 200 frames, labels with repeats
    g = torch.Generator().manual_seed(5)
    long_targets = [torch.randint(1, 5, (n,), generator=g).tolist() for n in (60, 37)]
    case(200, 5, long_targets, [200, 181], "mean")
    # blank-dominated output: blank about e^12 times likelier than any label at every frame
    case(80, 8, [[2, 7, 7, 1, 3], [4]], [80, 64], "sum", blank_boost=12.0)
    # an impossible target (3 labels with 1 repeat need 4 frames, sample 1 has 3), zeroed by zero_infinity
    case(8, 4, [[1, 2], [2, 2, 3], [3, 1, 1, 2]], [8, 3, 8], "mean", zero_infinity=True)
    fx.save()


if __name__ == "__main__":
    lstm()
    log_softmax()
    maxpool_rect()
    map_to_seq()
    ctc()
