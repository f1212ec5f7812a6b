#!/usr/bin/env python3
"""Reference fixtures for tests/test_nn_parity.c: PyTorch outputs and gradients of every ocr_nn.h op.

Run from the repository root:  /usr/bin/python3 tools/make_fixtures.py
Writes tests/fixtures/nn/<op>.safetensors. Inputs are drawn in float64, rounded to float32 (the values the C test
reads) and computed on in float64, so what is left between the two sides is ocr-c's float32 arithmetic.

Layout of each file: tensors "case<k>.<name>" (x, w, b, dy -> y, dx, dw, db, ...); __metadata__ holds "cases"
(the count) and the configuration "case<k>.<key>" as decimal strings. optim.safetensors and optim_init.safetensors
hold a 3-step training run of a conv-bn-relu-convtranspose network under SGD, SGD Nesterov and AdamW.
Deterministic: a fixed seed per file, so a rerun rewrites the same bytes.
"""
import os
import sys

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import ocr_st  # noqa: E402

OUT = os.path.join("tests", "fixtures", "nn")
torch.set_default_dtype(torch.float64)


def f32(t):
    """Rounds to float32 precision and comes back to float64: the exact values the C side gets."""
    return t.float().double()


def randn(*shape, scale=1.0, shift=0.0):
    return f32(torch.randn(*shape) * scale + shift)


class Fixture:
    """One fixture file: cases of config values and tensors, written to out/name.safetensors."""
    out = OUT

    def __init__(self, name, seed):
        self.name, self.tensors, self.meta, self.cases = name, {}, {}, 0
        torch.manual_seed(seed)

    def case(self, config, tensors):
        k = self.cases
        for key, v in config.items():
            self.meta["case%d.%s" % (k, key)] = repr(v) if isinstance(v, float) else str(int(v))
        for key, t in tensors.items():
            self.tensors["case%d.%s" % (k, key)] = t.detach()
        self.cases += 1

    def save(self):
        self.meta["cases"] = str(self.cases)
        os.makedirs(self.out, exist_ok=True)
        ocr_st.save(os.path.join(self.out, self.name + ".safetensors"), self.tensors, self.meta)


def leaf(t):
    return t.clone().requires_grad_(True)


def run(fn, inputs, dy=None):
    """y = fn(*inputs); backward of sum(dy * y); returns y, dy and the input gradients (None where unused)."""
    leaves = [leaf(t) if t is not None else None for t in inputs]
    y = fn(*leaves)
    if dy is None:
        dy = randn(*y.shape)
    y.backward(dy)
    return y, dy, [t.grad if t is not None else None for t in leaves]


def conv2d():
    fx = Fixture("conv2d", 1)
    # x shape, out channels, kernel, stride, pad, dilation, groups, bias
    cases = [((2, 3, 9, 11), 4, (3, 3), (1, 1), (1, 1), (1, 1), 1, 1),
             ((2, 3, 9, 11), 4, (3, 2), (2, 1), (1, 0), (1, 1), 1, 1),
             ((2, 3, 9, 11), 5, (3, 3), (1, 1), (2, 2), (2, 2), 1, 0),
             ((2, 4, 9, 11), 6, (3, 3), (2, 2), (1, 1), (1, 1), 2, 1),
             ((2, 5, 9, 11), 3, (1, 1), (1, 1), (0, 0), (1, 1), 1, 0),
             ((2, 5, 9, 11), 3, (1, 1), (2, 2), (0, 0), (1, 1), 1, 1),
             ((2, 3, 9, 11), 4, (7, 7), (2, 2), (3, 3), (1, 1), 1, 0)]
    for xs, cout, k, s, p, d, g, bias in cases:
        x = randn(*xs)
        w = randn(cout, xs[1] // g, *k, scale=0.3)
        b = randn(cout, scale=0.5) if bias else None
        y, dy, (dx, dw, db) = run(lambda x_, w_, b_: F.conv2d(x_, w_, b_, s, p, d, g), [x, w, b])
        t = dict(x=x, w=w, y=y, dy=dy, dx=dx, dw=dw)
        if bias:
            t.update(b=b, db=db)
        fx.case(dict(stride_h=s[0], stride_w=s[1], pad_h=p[0], pad_w=p[1], dil_h=d[0], dil_w=d[1], groups=g, bias=bias), t)
    fx.save()


def conv_transpose2d():
    fx = Fixture("conv_transpose2d", 2)
    # x shape, out channels, kernel, stride, pad, output padding, dilation, groups, bias
    cases = [((2, 4, 5, 6), 3, (2, 2), (2, 2), (0, 0), (0, 0), (1, 1), 1, 1),   # the DB head's upsampling
             ((2, 3, 5, 4), 4, (3, 3), (2, 2), (1, 1), (1, 1), (1, 1), 1, 1),
             ((2, 4, 4, 5), 6, (3, 3), (2, 2), (1, 1), (0, 0), (1, 1), 2, 1),
             ((1, 3, 5, 4), 2, (3, 2), (1, 2), (0, 1), (0, 1), (1, 1), 1, 0),
             ((2, 2, 4, 3), 3, (3, 3), (2, 2), (1, 1), (1, 1), (2, 2), 1, 0)]
    for xs, cout, k, s, p, op, d, g, bias in cases:
        x = randn(*xs)
        w = randn(xs[1], cout // g, *k, scale=0.3)
        b = randn(cout, scale=0.5) if bias else None
        y, dy, (dx, dw, db) = run(lambda x_, w_, b_: F.conv_transpose2d(x_, w_, b_, s, p, op, g, d), [x, w, b])
        t = dict(x=x, w=w, y=y, dy=dy, dx=dx, dw=dw)
        if bias:
            t.update(b=b, db=db)
        fx.case(dict(stride_h=s[0], stride_w=s[1], pad_h=p[0], pad_w=p[1], out_pad_h=op[0], out_pad_w=op[1],
                     dil_h=d[0], dil_w=d[1], groups=g, bias=bias), t)
    fx.save()


def batchnorm2d():
    fx = Fixture("batchnorm2d", 3)
    momentum, eps = 0.1, 1e-5
    # x shape, training, input scale, input shift (an offset tests cancellation in the variance)
    for xs, training, scale, shift in [((2, 3, 9, 11), 1, 2.0, 3.0), ((2, 3, 9, 11), 0, 1.5, -0.5),
                                       ((1, 4, 3, 2), 1, 1.0, 0.0), ((3, 2, 4, 5), 1, 0.1, 100.0)]:
        C = xs[1]
        x = randn(*xs, scale=scale, shift=shift)
        gamma, beta = randn(C, scale=0.3, shift=1.0), randn(C, scale=0.3)
        rm, rv = randn(C, scale=0.5), f32(torch.rand(C) + 0.5)
        rm_out, rv_out = rm.clone(), rv.clone()
        y, dy, (dx, dg, db) = run(lambda x_, g_, b_: F.batch_norm(x_, rm_out, rv_out, g_, b_, bool(training), momentum, eps),
                                  [x, gamma, beta])
        fx.case(dict(training=training, momentum=momentum, eps=eps),
                dict(x=x, gamma=gamma, beta=beta, running_mean=rm, running_var=rv, y=y, dy=dy, dx=dx, dgamma=dg, dbeta=db,
                     running_mean_out=rm_out, running_var_out=rv_out))
    fx.save()


def pointwise():
    fx = Fixture("relu", 4)
    x = randn(2, 3, 9, 11)
    x = torch.where(x.abs() < 0.01, x + 0.05, x)  # keep the kink out of the comparison
    y, dy, (dx,) = run(F.relu, [x])
    fx.case({}, dict(x=x, y=y, dy=dy, dx=dx))
    fx.save()

    fx = Fixture("sigmoid", 5)
    for x in [randn(2, 3, 9, 11, scale=3.0), f32(torch.tensor([-100.0, -30.0, -15.0, -1e-3, 0.0, 1e-3, 15.0, 30.0, 100.0]).view(1, 1, 3, 3))]:
        y, dy, (dx,) = run(torch.sigmoid, [x])
        fx.case({}, dict(x=x, y=y, dy=dy, dx=dx))
    fx.save()

    fx = Fixture("add", 6)
    a, b = randn(2, 3, 9, 11), randn(2, 3, 9, 11)
    y, dy, (da, db) = run(torch.add, [a, b])
    fx.case({}, dict(a=a, b=b, y=y, dy=dy, da=da, db=db))
    fx.save()


def pooling():
    fx = Fixture("maxpool2d", 7)
    for xs, k, s, p in [((2, 3, 9, 11), 3, 2, 1), ((1, 2, 8, 7), 2, 2, 0), ((2, 2, 5, 6), 3, 1, 1), ((1, 1, 7, 7), 3, 3, 0)]:
        x = randn(*xs)
        xl = leaf(x)
        y, idx = F.max_pool2d(xl, k, s, p, return_indices=True)
        dy = randn(*y.shape)
        y.backward(dy)
        fx.case(dict(kernel=k, stride=s, pad=p), dict(x=x, y=y, argmax=idx.to(torch.int32), dy=dy, dx=xl.grad))
    fx.save()

    fx = Fixture("upsample_nearest", 8)
    for xs, factor in [((2, 3, 4, 5), 2), ((1, 2, 3, 4), 3), ((1, 2, 2, 3), 1)]:
        x = randn(*xs)
        y, dy, (dx,) = run(lambda x_: F.interpolate(x_, scale_factor=factor, mode="nearest"), [x])
        fx.case(dict(factor=factor), dict(x=x, y=y, dy=dy, dx=dx))
    fx.save()

    fx = Fixture("concat", 9)
    for parts in [[(2, 1, 5, 6), (2, 2, 5, 6), (2, 3, 5, 6)], [(1, 4, 3, 3), (1, 1, 3, 3)]]:
        xs = [randn(*s) for s in parts]
        y, dy, dxs = run(lambda *p: torch.cat(p, 1), xs)
        t = dict(y=y, dy=dy)
        for i, (x, dx) in enumerate(zip(xs, dxs)):
            t["x%d" % i], t["dx%d" % i] = x, dx
        fx.case(dict(parts=len(parts)), t)
    fx.save()


def clip_grad_norm():
    fx = Fixture("clip_grad_norm", 10)
    shapes = [(4, 3, 3, 3), (4,), (2, 5)]
    for max_norm in [1.0, 1000.0]:
        params = [torch.zeros(*s, requires_grad=True) for s in shapes]
        grads = [randn(*s) for s in shapes]
        for p, g in zip(params, grads):
            p.grad = g.clone()
        norm = torch.nn.utils.clip_grad_norm_(params, max_norm)
        t = dict(norm=norm.view(1))
        for i, (p, g) in enumerate(zip(params, grads)):
            t["g%d" % i], t["clipped%d" % i] = g, p.grad
        fx.case(dict(max_norm=max_norm), t)
    fx.save()


# ---- a 3-step training run: conv3x3 (no bias) -> BN -> ReLU -> ConvTranspose k2 s2 (bias), loss 0.5*mean((y-t)^2)
NET = [("conv1.weight", (4, 3, 3, 3)), ("bn.weight", (4,)), ("bn.bias", (4,)), ("deconv.weight", (4, 2, 2, 2)),
       ("deconv.bias", (2,))]


def net_forward(p, rm, rv, x):
    h = F.conv2d(x, p["conv1.weight"], None, 1, 1)
    h = F.batch_norm(h, rm, rv, p["bn.weight"], p["bn.bias"], True, 0.1, 1e-5)
    return F.conv_transpose2d(F.relu(h), p["deconv.weight"], p["deconv.bias"], 2)


def optim():
    torch.manual_seed(11)
    init = {"conv1.weight": randn(4, 3, 3, 3, scale=0.3), "bn.weight": randn(4, scale=0.2, shift=1.0),
            "bn.bias": randn(4, scale=0.2), "deconv.weight": randn(4, 2, 2, 2, scale=0.5), "deconv.bias": randn(2, scale=0.2),
            "bn.running_mean": torch.zeros(4), "bn.running_var": torch.ones(4)}
    x, target = randn(2, 3, 6, 7), randn(2, 2, 12, 14)
    os.makedirs(OUT, exist_ok=True)
    ocr_st.save(os.path.join(OUT, "optim_init.safetensors"), init)
    tensors, meta = {"x": x, "target": target}, {}
    runs = [("sgd", lambda ps: torch.optim.SGD(ps, lr=0.05, momentum=0.9, weight_decay=1e-4), 0.05),
            ("sgd_nesterov", lambda ps: torch.optim.SGD(ps, lr=0.05, momentum=0.9, weight_decay=1e-4, nesterov=True), 0.05),
            ("adamw", lambda ps: torch.optim.AdamW(ps, lr=0.01), 0.01)]
    for name, make, lr in runs:
        p = {k: init[k].clone().requires_grad_(True) for k, _ in NET}
        rm, rv = init["bn.running_mean"].clone(), init["bn.running_var"].clone()
        opt = make([p[k] for k, _ in NET])
        meta[name + ".lr"] = repr(lr)
        for step in range(1, 4):
            opt.zero_grad()
            y = net_forward(p, rm, rv, x)
            loss = 0.5 * ((y - target) ** 2).mean()
            loss.backward()
            tensors["%s.loss%d" % (name, step)] = loss.detach().view(1)
            if step == 1 and name == "sgd":
                for k, _ in NET:
                    tensors["grad1." + k] = p[k].grad.clone()
            opt.step()
            for k, _ in NET:
                tensors["%s.step%d.%s" % (name, step, k)] = p[k].detach().clone()
            tensors["%s.step%d.bn.running_mean" % (name, step)] = rm.clone()
            tensors["%s.step%d.bn.running_var" % (name, step)] = rv.clone()
    ocr_st.save(os.path.join(OUT, "optim.safetensors"), tensors, meta)


if __name__ == "__main__":
    conv2d()
    conv_transpose2d()
    batchnorm2d()
    pointwise()
    pooling()
    clip_grad_norm()
    optim()
    total = sum(os.path.getsize(os.path.join(OUT, f)) for f in os.listdir(OUT))
    print("wrote %d files, %d bytes, under %s" % (len(os.listdir(OUT)), total, OUT))
