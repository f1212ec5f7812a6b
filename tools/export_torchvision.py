"""Exports torchvision ResNet-18/34 weights to safetensors for `train_dbnet --init` (ocr_dbnet_load_backbone).

Usage: export_torchvision.py --depth 18|34 --out FILE.safetensors [--weights STATE_DICT.pth] [--seed S]

ImageNet-pretrained weights need a download, which this project never does: fetch the torchvision checkpoint
yourself (resnet18-f37072fd.pth or resnet34-b627a593.pth from download.pytorch.org/models/) and pass it with
--weights. Without --weights the file holds the network torchvision builds, randomly initialised from --seed
(useful to check the pipeline; it is what ocr_dbnet_init draws anyway).

The state_dict is loaded into the torchvision model with strict=True, so a file of another depth or layout is
refused, then written with torchvision's key names (conv1.weight, bn1.running_mean, layer1.0.downsample.0.weight,
..., fc.weight; num_batches_tracked as I64): the layout ocr_dbnet_load_backbone reads (it ignores fc.* and
num_batches_tracked). Without torchvision (Debian: python3-torchvision) the same network, with the same key
names and initialisation, is built from tools/dbnet_ref.py."""
import argparse
import os
import sys

import torch
import torch.nn as nn

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import dbnet_ref  # noqa: E402
import ocr_st  # noqa: E402


class RefResNet(nn.Module):
    """torchvision's ResNet (BasicBlock) from the reference DBNet's backbone at width 1, plus the fc layer."""

    def __init__(self, depth):
        super().__init__()
        backbone = dbnet_ref.ResNet(depth, 1.0, nn.BatchNorm2d)
        for name, child in backbone.named_children():
            self.add_module(name, child)
        self.fc = nn.Linear(backbone.channels[-1], 1000)
        # torchvision's initialisation: kaiming normal (fan_out) convolutions, BN weight 1 and bias 0
        for m in self.modules():
            if isinstance(m, nn.Conv2d):
                nn.init.kaiming_normal_(m.weight, mode="fan_out", nonlinearity="relu")
            elif isinstance(m, nn.BatchNorm2d):
                nn.init.ones_(m.weight)
                nn.init.zeros_(m.bias)


def build(depth):
    try:
        import torchvision
    except ImportError:
        sys.stderr.write("export_torchvision: torchvision is not installed; building the same network from tools/dbnet_ref.py\n")
        return RefResNet(depth), "tools/dbnet_ref.py"
    return getattr(torchvision.models, "resnet%d" % depth)(weights=None), "torchvision " + torchvision.__version__


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--depth", type=int, choices=(18, 34), required=True)
    ap.add_argument("--out", required=True, help="safetensors file to write")
    ap.add_argument("--weights", help="a torchvision ResNet state_dict saved with torch.save (.pth)")
    ap.add_argument("--seed", type=int, default=0, help="seed of the random initialisation")
    args = ap.parse_args()
    torch.manual_seed(args.seed)
    model, builder = build(args.depth)
    source = "random initialisation, seed %d" % args.seed
    if args.weights:
        try:
            sd = torch.load(args.weights, map_location="cpu")
        except (OSError, RuntimeError) as e:
            sys.stderr.write("export_torchvision: cannot read '%s': %s\n" % (args.weights, e))
            return 1
        if isinstance(sd, dict) and isinstance(sd.get("state_dict"), dict):
            sd = sd["state_dict"]
        try:
            model.load_state_dict(sd, strict=True)
        except (RuntimeError, TypeError, AttributeError) as e:
            sys.stderr.write("export_torchvision: '%s' is not a ResNet-%d state_dict: %s\n" % (args.weights, args.depth, e))
            return 1
        source = args.weights
    state = model.state_dict()
    ocr_st.save(args.out, state, {"format": "pt", "source": source, "architecture": "resnet%d" % args.depth})
    n_params = sum(p.numel() for p in model.parameters())
    print("wrote %s: ResNet-%d (%s, %d tensors, %d parameters) from %s" % (args.out, args.depth, builder, len(state), n_params, source))
    return 0


if __name__ == "__main__":
    sys.exit(main())
