#!/usr/bin/env python3
"""PyTorch CRNN of the same architecture as ocr_rec.h: the module whose state_dict names ocr-c's recognizer uses,
and the independent reference for its parity tests.

The model: six conv3x3 (no bias) + BatchNorm + ReLU blocks, max pooling 2x2, 2x2, none, (2,1), (2,1), (2,1) (height
32 -> 1, width W -> W/4), the map [N, C, 1, W/4] read as the sequence [W/4, N, C], a bidirectional nn.LSTM of
`layers` layers, a Linear classifier over blank + charset and log_softmax. Names: cnn.conv0.weight,
cnn.bn0.{weight,bias,running_mean,running_var,num_batches_tracked}, ..., rnn.weight_ih_l0(_reverse), ...,
fc.weight, fc.bias. Checkpoints carry the config in their metadata (ocr_rec.channels "32,64,...", ocr_rec.hidden,
ocr_rec.layers, ocr_rec.n_classes, ocr_rec.bn_momentum, ocr_rec.bn_eps, ocr_rec.charset as key-file text).

Usage (from the repository root, with Debian's python3-torch):
    /usr/bin/python3 tools/crnn_ref.py fixtures
        writes tests/fixtures/rec_model/crnn_tiny_weights.safetensors (a tiny model's weights as ocr_rec_save
        writes them) and crnn_tiny_io.safetensors (a padded batch with its input lengths and CTC targets; the
        training-mode log-probabilities, the CTC loss ('mean'), the gradient of every parameter, the BN statistics
        after that forward and the eval-mode log-probabilities after it), computed in float64 on float32 values.
    /usr/bin/python3 tools/crnn_ref.py check WEIGHTS IO OUT
        loads WEIGHTS (an ocr_rec checkpoint) with load_state_dict(strict=True) and writes to OUT the eval-mode
        log_probs of IO's x.
    /usr/bin/python3 tools/crnn_ref.py train-step WEIGHTS IO OUT
        the same model in training mode on IO's x with its CTC targets (targets, target_lengths, input_lengths):
        OUT gets log_probs, the 'mean' CTC loss and grad.<name> of every parameter.
"""
import collections
import copy
import os
import sys

import torch
import torch.nn as nn
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import ocr_st  # noqa: E402

POOLS = [(2, 2), (2, 2), None, (2, 1), (2, 1), (2, 1)]
OUT = os.path.join("tests", "fixtures", "rec_model")


class CRNN(nn.Module):
    def __init__(self, n_classes, channels=(32, 64, 128, 128, 256, 256), hidden=128, layers=2, bn_momentum=0.1,
                 bn_eps=1e-5):
        super().__init__()
        mods = collections.OrderedDict()
        cin = 3
        for b, (c, pool) in enumerate(zip(channels, POOLS)):
            mods["conv%d" % b] = nn.Conv2d(cin, c, 3, 1, 1, bias=False)
            mods["bn%d" % b] = nn.BatchNorm2d(c, eps=bn_eps, momentum=bn_momentum)
            mods["relu%d" % b] = nn.ReLU()
            if pool:
                mods["pool%d" % b] = nn.MaxPool2d(pool, pool)
            cin = c
        self.cnn = nn.Sequential(mods)
        self.rnn = nn.LSTM(cin, hidden, num_layers=layers, bidirectional=True)
        self.fc = nn.Linear(2 * hidden, n_classes)

    def forward(self, x, lengths=None):
        """lengths (frames per crop, its width / 4) or None: with them the columns beyond each crop are zeroed after
        every ReLU and the LSTM reads packed sequences, as ocr_rec_forward's input_lengths"""
        if lengths is None:
            f = self.cnn(x)                               # [N, C, 1, W/4]
        else:
            f, shrink = x, 1
            for name, mod in self.cnn.named_children():
                f = mod(f)
                if name.startswith("relu"):
                    mask = torch.ones_like(f)
                    for n, frames in enumerate(lengths.tolist()):
                        mask[n, :, :, frames * 4 // shrink:] = 0
                    f = f * mask
                elif name.startswith("pool"):
                    shrink *= mod.kernel_size[1] if isinstance(mod.kernel_size, tuple) else mod.kernel_size
        seq = f.permute(3, 0, 1, 2).flatten(2)            # [T, N, C]
        if lengths is None:
            y, _ = self.rnn(seq)
        else:
            packed = nn.utils.rnn.pack_padded_sequence(seq, lengths.long(), enforce_sorted=False)
            y, _ = nn.utils.rnn.pad_packed_sequence(self.rnn(packed)[0], total_length=seq.shape[0])
        return F.log_softmax(self.fc(y), dim=2)           # [T, N, classes]


def config_meta(n_classes, channels, hidden, layers, charset, bn_momentum=0.1, bn_eps=1e-5):
    return {"format": "pt", "ocr_rec.input": "dbnet", "ocr_rec.height": "32",
            "ocr_rec.channels": ",".join(str(c) for c in channels), "ocr_rec.hidden": str(hidden),
            "ocr_rec.layers": str(layers), "ocr_rec.n_classes": str(n_classes),
            "ocr_rec.bn_momentum": repr(float(bn_momentum)), "ocr_rec.bn_eps": repr(float(bn_eps)),
            "ocr_rec.charset": "".join(c + "\n" for c in charset)}


def model_from_meta(meta):
    return CRNN(int(meta["ocr_rec.n_classes"]), [int(c) for c in meta["ocr_rec.channels"].split(",")],
                int(meta["ocr_rec.hidden"]), int(meta["ocr_rec.layers"]), float(meta["ocr_rec.bn_momentum"]),
                float(meta["ocr_rec.bn_eps"]))


def f32(t):
    return t.float().double()


def fixtures():
    torch.manual_seed(23)
    charset = "abcdef"
    channels, hidden, layers = (4, 8, 8, 8, 16, 16), 6, 2
    n_classes = len(charset) + 1
    m = CRNN(n_classes, channels, hidden, layers).double()
    with torch.no_grad():
        for name, p in m.named_parameters():
            p.copy_(f32(p * (1.5 if name.startswith("rnn.") else 1.0)))
        for mod in m.modules():
            if isinstance(mod, nn.BatchNorm2d):   # statistics and affine parameters away from the defaults
                mod.weight.copy_(f32(torch.rand_like(mod.weight) + 0.5))
                mod.bias.copy_(f32(torch.rand_like(mod.bias) * 0.4 - 0.2))
                mod.running_mean.copy_(f32(torch.randn_like(mod.running_mean) * 0.1))
                mod.running_var.copy_(f32(torch.rand_like(mod.running_var) + 0.5))
                mod.num_batches_tracked.fill_(3)
    weights = {k: (v.float() if v.is_floating_point() else v) for k, v in m.state_dict().items()}
    masked = copy.deepcopy(m)
    os.makedirs(OUT, exist_ok=True)
    ocr_st.save(os.path.join(OUT, "crnn_tiny_weights.safetensors"), weights,
                config_meta(n_classes, channels, hidden, layers, charset))

    # three crops padded to width 24 (6 frames): the second is 16 wide (4 frames), the third 20 (5 frames)
    N, W = 3, 24
    input_lengths = [6, 4, 5]
    x = f32(torch.randn(N, 3, 32, W))
    for n, frames in enumerate(input_lengths):
        x[n, :, :, 4 * frames:] = 0
    targets = [[1, 2, 2], [3, 4], [5, 6, 5, 1]]   # a repeat needing a blank between; 4 frames each at least
    flat = torch.tensor([c for t in targets for c in t], dtype=torch.int32)
    tl = torch.tensor([len(t) for t in targets], dtype=torch.int32)
    il = torch.tensor(input_lengths, dtype=torch.int32)
    io = {"x": x, "targets": flat, "target_lengths": tl, "input_lengths": il}

    def step(model, prefix, lengths):
        """a training step's log_probs, 'mean' CTC loss, gradients and BN buffers, then the eval log_probs"""
        model.train()
        lp = model(x, lengths)
        loss = F.ctc_loss(lp, flat.long(), il.long(), tl.long(), blank=0, reduction="mean")
        loss.backward()
        io[prefix + "log_probs"] = lp.detach()
        io[prefix + "loss"] = loss.detach().reshape(1)
        for name, p in model.named_parameters():
            io[prefix + "grad." + name] = p.grad
        for name, b in model.named_buffers():
            io[prefix + "after." + name] = b
        model.eval()
        with torch.no_grad():
            io[prefix + "eval_log_probs"] = model(x, lengths)

    step(m, "", None)
    # the same from the same weights with the input lengths given: padding masked, packed LSTM sequences
    step(masked, "masked.", il)
    ocr_st.save(os.path.join(OUT, "crnn_tiny_io.safetensors"), io, {"charset": charset})


def check(weights_path, io_path, out_path):
    weights, meta = ocr_st.load(weights_path)
    m = model_from_meta(meta).double()
    m.load_state_dict({k: (v.double() if v.is_floating_point() else v) for k, v in weights.items()}, strict=True)
    io, _ = ocr_st.load(io_path)
    m.eval()
    with torch.no_grad():
        lp = m(io["x"].double())
    ocr_st.save(out_path, {"log_probs": lp})


def train_step(weights_path, io_path, out_path):
    """training forward, CTC ('mean') and backward on IO's x, targets, target_lengths, input_lengths"""
    weights, meta = ocr_st.load(weights_path)
    m = model_from_meta(meta).double()
    m.load_state_dict({k: (v.double() if v.is_floating_point() else v) for k, v in weights.items()}, strict=True)
    io, _ = ocr_st.load(io_path)
    m.train()
    lp = m(io["x"].double())
    loss = F.ctc_loss(lp, io["targets"].long(), io["input_lengths"].long(), io["target_lengths"].long(), blank=0, reduction="mean")
    loss.backward()
    out = {"log_probs": lp.detach(), "loss": loss.detach().reshape(1)}
    for name, p in m.named_parameters():
        out["grad." + name] = p.grad
    ocr_st.save(out_path, out)


def main(argv):
    torch.set_default_dtype(torch.float64)
    if argv[1:] == ["fixtures"]:
        fixtures()
    elif len(argv) == 5 and argv[1] == "check":
        check(argv[2], argv[3], argv[4])
    elif len(argv) == 5 and argv[1] == "train-step":
        train_step(argv[2], argv[3], argv[4])
    else:
        sys.stderr.write(__doc__)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
