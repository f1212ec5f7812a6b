"""Writes tests/fixtures/dbnet/: a tiny DBNet made and run by PyTorch (tools/dbnet_ref.py), for
tests/test_dbnet_model.c to check that ocr_dbnet.h loads a PyTorch-made checkpoint and reproduces it.

The model is ResNet-34 at width 1/32 (every channel count at its minimum of 8, 16 in layer4) with the official
initialisation drawn by PyTorch and a prior bias; the input is 2x3x32x64. Files (deterministic, ~200 kB):
  tiny_weights.safetensors   model.state_dict() with num_batches_tracked and the config in __metadata__
  tiny_io.safetensors        x, d_prob_logits, d_thresh (upstream gradients of the training outputs)
  tiny_expected.safetensors  what dbnet_ref.run_parity returns: training outputs, every parameter gradient,
                             BN buffers after the training forward, eval-mode probability map
Run from the repository root: /usr/bin/python3 tools/make_dbnet_fixtures.py
"""
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import dbnet_ref  # noqa: E402
import ocr_st  # noqa: E402

OUT = os.path.join("tests", "fixtures", "dbnet")
DEPTH, WIDTH, K, PRIOR, MOMENTUM, EPS = 34, 0.03125, 50.0, 0.03, 0.1, 1e-5


def main():
    torch.manual_seed(20240611)
    torch.set_num_threads(1)
    os.makedirs(OUT, exist_ok=True)
    model = dbnet_ref.DBNet(DEPTH, WIDTH, K, MOMENTUM, EPS)
    dbnet_ref.official_init(model, PRIOR)
    meta = dbnet_ref.config_meta(DEPTH, WIDTH, K, PRIOR, MOMENTUM, EPS)
    ocr_st.save(os.path.join(OUT, "tiny_weights.safetensors"), model.state_dict(), meta)
    io = {"x": torch.randn(2, 3, 32, 64), "d_prob_logits": torch.randn(2, 1, 32, 64), "d_thresh": torch.randn(2, 1, 32, 64)}
    ocr_st.save(os.path.join(OUT, "tiny_io.safetensors"), io)
    expected = dbnet_ref.run_parity(model, io["x"], io["d_prob_logits"], io["d_thresh"])
    ocr_st.save(os.path.join(OUT, "tiny_expected.safetensors"), expected)


if __name__ == "__main__":
    main()
