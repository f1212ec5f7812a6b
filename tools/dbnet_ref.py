"""PyTorch DBNet of the same architecture as ocr_dbnet.h: the independent reference for its parity tests.

Follows ../shared/DBNET_REFERENCE.md section 1 (official MhLiao/DB code): torchvision-layout ResNet-18/34 with
BasicBlocks (plain convolutions, no DCN), the SegDetector FPN neck and the binarize/thresh heads, with the
official initialisation. Module names give the state_dict keys ocr_dbnet.h uses (backbone.layer1.0.conv1.weight,
decoder.binarize.3.bias, ...). A width multiplier scales every channel count exactly as ocr_dbnet.h does.

Usage: dbnet_ref.py COMMAND... with the commands run in order:
    parity WEIGHTS IO OUT
        WEIGHTS: a checkpoint written by ocr_dbnet_save (config in __metadata__), loaded with strict=True.
        IO: x [N,3,H,W], d_prob_logits and d_thresh [N,1,H,W] (upstream gradients of the train outputs).
        OUT gets (computed in float64, stored as F32): prob_logits and thresh (train mode), grad.<param> for
        every trainable parameter, every buffer after the training forward (running stats,
        num_batches_tracked), eval_prob (eval mode, after).
    backbone WEIGHTS OUT
        Writes the backbone of WEIGHTS as a torchvision ResNet state_dict (no prefix, with fc.weight/fc.bias).
"""
import math
import sys

import torch
import torch.nn as nn

import ocr_st

META = "ocr_dbnet."
DEPTH_BLOCKS = {18: [2, 2, 2, 2], 34: [3, 4, 6, 3]}


def scaled(c, width):
    """Channel count c scaled by width: the nearest multiple of 8, at least 8."""
    return max(8, 8 * int(math.floor(c * width / 8.0 + 0.5)))


class BasicBlock(nn.Module):
    def __init__(self, cin, cout, stride, bn):
        super().__init__()
        self.conv1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
        self.bn1 = bn(cout)
        self.relu = nn.ReLU()
        self.conv2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
        self.bn2 = bn(cout)
        self.downsample = None
        if stride != 1 or cin != cout:
            self.downsample = nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False), bn(cout))

    def forward(self, x):
        y = self.relu(self.bn1(self.conv1(x)))
        y = self.bn2(self.conv2(y))
        return self.relu(y + (x if self.downsample is None else self.downsample(x)))


class ResNet(nn.Module):
    def __init__(self, depth, width, bn):
        super().__init__()
        ch = [scaled(c, width) for c in (64, 64, 128, 256, 512)]
        self.conv1 = nn.Conv2d(3, ch[0], 7, 2, 3, bias=False)
        self.bn1 = bn(ch[0])
        self.relu = nn.ReLU()
        self.maxpool = nn.MaxPool2d(3, 2, 1)
        cin = ch[0]
        for i, blocks in enumerate(DEPTH_BLOCKS[depth]):
            layers = []
            for b in range(blocks):
                layers.append(BasicBlock(cin, ch[i + 1], (1 if i == 0 else 2) if b == 0 else 1, bn))
                cin = ch[i + 1]
            setattr(self, "layer%d" % (i + 1), nn.Sequential(*layers))
        self.channels = ch[1:]

    def forward(self, x):
        x = self.maxpool(self.relu(self.bn1(self.conv1(x))))
        c2 = self.layer1(x)
        c3 = self.layer2(c2)
        c4 = self.layer3(c3)
        return c2, c3, c4, self.layer4(c4)


def head(inner, bn):
    mid = inner // 4
    return nn.Sequential(nn.Conv2d(inner, mid, 3, padding=1, bias=False), bn(mid), nn.ReLU(),
                         nn.ConvTranspose2d(mid, mid, 2, 2), bn(mid), nn.ReLU(),
                         nn.ConvTranspose2d(mid, 1, 2, 2), nn.Sigmoid())


class SegDetector(nn.Module):
    def __init__(self, in_ch, inner, bn):
        super().__init__()
        up = lambda f: nn.Upsample(scale_factor=f, mode="nearest")
        self.in5, self.in4, self.in3, self.in2 = [nn.Conv2d(c, inner, 1, bias=False) for c in reversed(in_ch)]
        q = inner // 4
        self.out5 = nn.Sequential(nn.Conv2d(inner, q, 3, padding=1, bias=False), up(8))
        self.out4 = nn.Sequential(nn.Conv2d(inner, q, 3, padding=1, bias=False), up(4))
        self.out3 = nn.Sequential(nn.Conv2d(inner, q, 3, padding=1, bias=False), up(2))
        self.out2 = nn.Conv2d(inner, q, 3, padding=1, bias=False)
        self.binarize = head(inner, bn)
        self.thresh = head(inner, bn)
        self.up2 = up(2)

    def forward(self, c2, c3, c4, c5, training):
        in5, in4, in3, in2 = self.in5(c5), self.in4(c4), self.in3(c3), self.in2(c2)
        out4 = self.up2(in5) + in4
        out3 = self.up2(out4) + in3
        out2 = self.up2(out3) + in2
        fuse = torch.cat([self.out5(in5), self.out4(out4), self.out3(out3), self.out2(out2)], 1)
        if not training:
            return self.binarize(fuse)
        # logits: the binarize head without its final Sigmoid (the C model hands logits to a stable BCE)
        return self.binarize[:-1](fuse), self.thresh(fuse)


class DBNet(nn.Module):
    def __init__(self, depth=18, width=1.0, k=50.0, bn_momentum=0.1, bn_eps=1e-5):
        super().__init__()
        bn = lambda c: nn.BatchNorm2d(c, eps=bn_eps, momentum=bn_momentum)
        self.k = k
        self.backbone = ResNet(depth, width, bn)
        self.decoder = SegDetector(self.backbone.channels, scaled(256, width), bn)

    def forward(self, x):
        return self.decoder(*self.backbone(x), training=self.training)


def official_init(model, prior_prob=0.0):
    """torchvision ResNet init for the backbone, SegDetector.weights_init for the decoder (section 1.5)."""
    for m in model.backbone.modules():
        if isinstance(m, nn.Conv2d):
            nn.init.kaiming_normal_(m.weight, mode="fan_out", nonlinearity="relu")
        elif isinstance(m, nn.BatchNorm2d):
            nn.init.ones_(m.weight)
            nn.init.zeros_(m.bias)
    for m in model.decoder.modules():
        if "Conv" in m.__class__.__name__:
            nn.init.kaiming_normal_(m.weight)  # ConvTranspose2d biases keep PyTorch's default uniform init
        elif isinstance(m, nn.BatchNorm2d):
            m.weight.data.fill_(1.0)
            m.bias.data.fill_(1e-4)
    if prior_prob > 0:
        model.decoder.binarize[6].bias.data.fill_(math.log(prior_prob / (1.0 - prior_prob)))


def config_meta(depth, width, k, prior_prob, bn_momentum, bn_eps):
    """The __metadata__ ocr_dbnet_save writes (numbers as C's %.9g of the float value)."""
    f = lambda v: "%.9g" % float(torch.tensor(v, dtype=torch.float32))
    return {"format": "pt", META + "backbone": "resnet%d" % depth, META + "width": f(width), META + "k": f(k),
            META + "prior_prob": f(prior_prob), META + "bn_momentum": f(bn_momentum), META + "bn_eps": f(bn_eps)}


def model_from_meta(meta):
    backbone = meta[META + "backbone"]
    assert backbone in ("resnet18", "resnet34"), backbone
    return DBNet(int(backbone[6:]), float(meta[META + "width"]), float(meta[META + "k"]),
                 float(meta[META + "bn_momentum"]), float(meta[META + "bn_eps"]))


def run_parity(model, x, d_prob, d_thresh):
    """Train-mode forward and backward, then an eval-mode forward; returns every tensor the C test compares.
    Runs in float64 (converting the model in place): the reference is then exact to the float32 results, so a
    comparison measures the C model's own rounding only."""
    model.double().train()
    model.zero_grad()
    xr = x.double()
    logits, thresh = model(xr)
    ((logits * d_prob.double()).sum() + (thresh * d_thresh.double()).sum()).backward()
    out = {"prob_logits": logits.detach(), "thresh": thresh.detach()}
    for name, p in model.named_parameters():
        out["grad." + name] = p.grad.detach().clone()
    for name, b in model.named_buffers():
        out[name] = b.detach().clone()
    model.eval()
    with torch.no_grad():
        out["eval_prob"] = model(xr)
    return out


def main(argv):
    """Runs the commands of argv in order, so one interpreter start serves a whole test."""
    torch.set_num_threads(2)
    i = 0
    while i < len(argv):
        if argv[i] == "parity" and i + 3 < len(argv):
            weights, meta = ocr_st.load(argv[i + 1])
            model = model_from_meta(meta)
            model.load_state_dict(weights, strict=True)
            io, _ = ocr_st.load(argv[i + 2])
            ocr_st.save(argv[i + 3], run_parity(model, io["x"], io["d_prob_logits"], io["d_thresh"]))
            i += 4
        elif argv[i] == "backbone" and i + 2 < len(argv):
            weights, meta = ocr_st.load(argv[i + 1])
            model = model_from_meta(meta)
            model.load_state_dict(weights, strict=True)
            sd = dict(model.backbone.state_dict())
            sd["fc.weight"] = torch.randn(10, model.backbone.channels[-1])
            sd["fc.bias"] = torch.randn(10)
            ocr_st.save(argv[i + 2], sd)
            i += 3
        else:
            sys.stderr.write(__doc__)
            return 2
    return 0 if argv else 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
