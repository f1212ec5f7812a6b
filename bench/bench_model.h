/* bench_model.h - the arithmetic of one DBNet run, counted from the model's own op list (ocr_dbnet_op), so a timing
   reads as GFLOP/s and as a share of the measured peak (bench_peak.h). Include after ocr_dbnet.h.
   Counted: the multiply-adds of the convolutions and transposed convolutions, 2 flops each (groups are 1 in DBNet;
   ocr_dbnet_op_info has no group count). Left out: BN, ReLU, pooling, upsampling, sums, concatenation, sigmoid, the
   loss and the optimiser: memory-bound, few operations per value.
   Convention (the usual one): a training step counts 3x the forward of the training graph, since the backward of a
   convolution computes the input gradient and the weight gradient, each as many multiply-adds as the forward (the
   network input's gradient, which nobody needs, and our recomputation of some convolutions in the backward are not
   subtracted or added: the figure is the work, not what a given implementation spends). Inference counts the eval
   graph (the threshold head, which runs only in training, left out).
   Hand check, backbone.conv1 at 640x640: 7x7 stride 2, 3 -> 64 channels, output 320x320:
   64 * 320 * 320 * 3 * 7 * 7 = 963,379,200 multiply-adds (at 224x224: 64 * 112 * 112 * 147 = 118.0 M, torchvision's
   figure for ResNet-18's first layer). Totals, width 1: the backbone's convolutions at 224x224 sum to 1.814 GMAC
   (torchvision lists 1.81 G for ResNet-18, whose fc adds 0.5 M) and at 640x640 to 14.80 GMAC (the same x pixels);
   the whole eval model at 640x640 to 24.83 GMAC, most of the rest in decoder.out2 and binarize.0 (3.77 G each: 3x3
   over 256 channels at 1/4 scale). */
#ifndef BENCH_MODEL_H
#define BENCH_MODEL_H
#include <string.h>

/* What op reads first, into *in: the op that wrote it (its index is returned), or the image, of which only the
   channels are known (3: ocr_dbnet_forward takes [N,3,H,W]; -1 is returned). */
static inline int bench_dbnet_input_op(const ocr_dbnet *m, const ocr_dbnet_op_info *op, ocr_dbnet_op_info *in) {
    if (op->n_inputs < 1 || op->inputs[0] < 0) { memset(in, 0, sizeof *in); in->channels = 3; return -1; }
    *in = ocr_dbnet_op(m, op->inputs[0]);
    return op->inputs[0];
}

/* Multiply-adds of one op for one image at the last forward's input size (0 for an op that is not a convolution). */
static inline double bench_dbnet_op_macs(const ocr_dbnet *m, const ocr_dbnet_op_info *op) {
    ocr_dbnet_op_info in;
    double k2 = (double)op->kernel * op->kernel;
    int from = bench_dbnet_input_op(m, op, &in);
    /* every output value: in_c * k * k products */
    if (strcmp(op->kind, "conv") == 0) return (double)op->channels * op->height * op->width * in.channels * k2;
    /* a transposed convolution scatters every input value through a k x k kernel into each output channel:
       in_h * in_w * in_c * out_c * k * k products (with DBNet's k = stride = 2, pad 0: out_h * out_w * in_c * out_c,
       each output value receiving one product per input channel) */
    if (strcmp(op->kind, "convT") == 0 && from >= 0) return (double)in.height * in.width * in.channels * op->channels * k2;
    return 0;
}

/* Convolution multiply-adds of one image's forward at the last forward's input size (0 before any forward): the
   training graph (training != 0) or the eval graph. */
static inline double bench_dbnet_forward_macs(const ocr_dbnet *m, int training) {
    double macs = 0;
    int i, skip = training ? OCR_DBNET_RUNS_EVAL : OCR_DBNET_RUNS_TRAINING;
    for (i = 0; i < ocr_dbnet_op_count(m); i++) {
        ocr_dbnet_op_info op = ocr_dbnet_op(m, i);
        if (op.runs_in != skip) macs += bench_dbnet_op_macs(m, &op);
    }
    return macs;
}

/* FLOPs of one run on `images` images at the last forward's input size: an inference, or a training step (3x the
   training forward, see above). */
static inline double bench_dbnet_flops(const ocr_dbnet *m, int training, int64_t images) {
    return 2.0 * (training ? 3.0 : 1.0) * bench_dbnet_forward_macs(m, training) * (double)images;
}

/* One line for a program's header: how the figures were counted. */
#define BENCH_DBNET_FLOPS_CONVENTION                                                                                     \
    "GFLOP: convolution multiply-adds from the model's op list x 2; a training step counts 3x its forward (forward, "   \
    "input and weight gradients), inference the eval graph; elementwise ops, loss and optimiser not counted"

#endif /* BENCH_MODEL_H */
