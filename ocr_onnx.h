/* ocr_onnx.h - ONNX export of DBNet and CRNN models, written by ocr-c's own protobuf encoder.  v0.1  MIT license

   Do this in exactly one C or C++ file:
       #define OCR_ONNX_IMPLEMENTATION        (the other modules' implementations go in the same or another file;
       #include "ocr_onnx.h"                 OCR_IMPLEMENTATION turns on every module)

   Usage (a checkpoint to a model ONNX Runtime, OpenVINO or TensorRT can run):
       ocr_dbnet m;
       ocr_onnx_options opt = ocr_onnx_options_default();   // DBNet's input normalisation, the probability map only
       opt.flags |= OCR_ONNX_THRESHOLD_MAP;                 // and the threshold map as a second output
       if (ocr_dbnet_init_from_file(&ctx, &m, "best.safetensors") ||
           ocr_dbnet_export_onnx(&ctx, &m, "model.onnx", &opt))
           fprintf(stderr, "%s\n", ocr_ctx_last_error(&ctx));

   The file: ONNX IR version 8, opset 17 of the default domain (ONNX 1.10 and later, ONNX Runtime 1.10 and later).
   Input "image", float [N,3,H,W] with N, H and W symbolic (dim_param "N", "H", "W"); H and W must be multiples of
   32, as for ocr_dbnet_forward. Output "prob", float [N,1,H,W], the probability map (sigmoid applied) that
   ocr_dbnet_forward gives in eval mode; with OCR_ONNX_THRESHOLD_MAP also "thresh", float [N,1,H,W], the threshold
   map with BN in eval mode (ocr-c computes it only in training). The graph is the model's own op plan
   (ocr_dbnet_op) node for node: Conv, ConvTranspose, BatchNormalization (not folded: runtimes fold it themselves),
   Relu, MaxPool, Resize (nearest, asymmetric, floor: exact integer upsampling), Add, Concat, Sigmoid. Weights are
   float32 initializers with the checkpoint's (PyTorch's) names. metadata_props: the checkpoint's config
   (ocr_dbnet.backbone, .width, .k, .prior_prob, .bn_momentum, .bn_eps, as ocr_dbnet_save writes them) and the input
   the model expects: input.channel_order ("BGR"), input.mean and input.std (three numbers each, on 0..255 pixel
   values: input = (pixel - mean) / std), input.size_multiple ("32"), input.layout ("NCHW").
   Limits: float32 only; no external data, so a model must serialise under protobuf's 2 GiB (DB-ResNet-18 at width
   1 is 48 MB). The file is written atomically (a temporary file, then a rename): never half a file.

   The recognizer (ocr_rec.h) exports the same way, ocr_rec_export_onnx: input "image", float [N,3,32,W] (N and W
   symbolic, W a multiple of 4, normalised as the detector's input), output "log_probs", float [T,N,classes] with
   T = W/4 symbolic, the log-probabilities ocr_rec_forward gives in eval mode without input lengths (class 0 the CTC
   blank). Nodes: Conv, BatchNormalization, Relu, MaxPool, then Transpose + Reshape (the map to a sequence), one
   bidirectional LSTM node per layer (PyTorch's gate rows i, f, g, o reordered to ONNX's i, o, f, c; both biases in B),
   Transpose + Reshape of its [T,2,N,H] output to [T,N,2H], MatMul + Add (the classifier) and LogSoftmax.
   metadata_props: ocr_rec.height, .channels, .hidden, .layers, .n_classes, .bn_momentum, .bn_eps and
   ocr_rec.charset (the key-file text, as ocr_rec_save writes them), the input's channel_order, mean, std, height,
   width_multiple and layout, and output.blank ("0") and output.layout ("TNC").

   Options: none. Dependencies: ocr_tensor.h, ocr_nn.h, ocr_dbnet.h, ocr_rec.h (and what they include).
*/
#ifndef OCR_ONNX_H
#define OCR_ONNX_H
#include "ocr_tensor.h"
#include "ocr_nn.h"
#include "ocr_dbnet.h"
#include "ocr_rec.h"
#ifdef __cplusplus
extern "C" {
#endif

#define OCR_ONNX_IR_VERSION 8
#define OCR_ONNX_OPSET 17

enum { OCR_ONNX_THRESHOLD_MAP = 1 }; /* ocr_onnx_options.flags */

typedef struct {
    unsigned flags;            /* OCR_ONNX_THRESHOLD_MAP: a second output "thresh" */
    const char *channel_order; /* "BGR" or "RGB": the image channels in input channels 0, 1, 2 */
    float mean[3], std[3];     /* per input channel, on 0..255 pixel values: input = (pixel - mean) / std */
} ocr_onnx_options;

/* The probability map only, and the input as ocr_data.h's OCR_NORM_DBNET makes it (what train_dbnet, detect and
   eval_dbnet feed the model): channels B, G, R, mean 122.67891434, 116.66876762, 104.00698793, std 255. */
OCRDEF ocr_onnx_options ocr_onnx_options_default(void);

/* Writes m (any device; its parameters are read on the host) as an ONNX model to path, atomically. opt NULL: the
   defaults. Errors, with the file left as it was: OCR_EINVAL (no model, bad options), OCR_EUNSUPPORTED (an op the
   exporter does not know), OCR_EOVERFLOW (over protobuf's 2 GiB), OCR_ENOMEM, OCR_EIO (naming the path). */
OCRDEF int ocr_dbnet_export_onnx(ocr_ctx *ctx, const ocr_dbnet *m, const char *path, const ocr_onnx_options *opt);
/* Writes the recognizer m (any device) as an ONNX model to path, atomically; opt NULL: the defaults (the detector's
   input normalisation, which ocr_rec.h's crops use too); opt->flags must be 0. Errors as ocr_dbnet_export_onnx's. */
OCRDEF int ocr_rec_export_onnx(ocr_ctx *ctx, const ocr_rec_model *m, const char *path, const ocr_onnx_options *opt);

#ifdef __cplusplus
}
#endif
#endif /* OCR_ONNX_H */

#if defined(OCR_IMPLEMENTATION) && !defined(OCR_NO_IMPLEMENTATION) && !defined(OCR_ONNX_IMPLEMENTATION)
#define OCR_ONNX_IMPLEMENTATION
#endif
#if defined(OCR_ONNX_IMPLEMENTATION) && !defined(OCR__ONNX_IMPLEMENTED)
#define OCR__ONNX_IMPLEMENTED
#include <stdio.h>
#include <string.h>
#include <math.h>
#ifdef __cplusplus
extern "C" {
#endif

/* The protobuf wire-format writer is ocr_tensor.h's (ocr__pb_*), shared with its TensorBoard event files. */

/* ---- ONNX messages (onnx.proto: field numbers of ModelProto, GraphProto, NodeProto, AttributeProto, TensorProto,
   ValueInfoProto, TypeProto, TensorShapeProto, OperatorSetIdProto, StringStringEntryProto) ---- */
enum { OCR__ONNX_ATTR_FLOAT = 1, OCR__ONNX_ATTR_INT = 2, OCR__ONNX_ATTR_STRING = 3, OCR__ONNX_ATTR_INTS = 7 };
enum { OCR__ONNX_TENSOR_FLOAT = 1, OCR__ONNX_TENSOR_INT64 = 7 };
enum { OCR__ONNX_GRAPH_NODE = 1, OCR__ONNX_GRAPH_INITIALIZER = 5, OCR__ONNX_GRAPH_INPUT = 11, OCR__ONNX_GRAPH_OUTPUT = 12 };

static void ocr__onnx_attr_int(ocr__pb *b, const char *name, int64_t v) {
    size_t at = ocr__pb_open(b, 5);
    ocr__pb_string(b, 1, name);
    ocr__pb_int(b, 20, OCR__ONNX_ATTR_INT);
    ocr__pb_int(b, 3, v);
    ocr__pb_close(b, at);
}

static void ocr__onnx_attr_float(ocr__pb *b, const char *name, float v) {
    size_t at = ocr__pb_open(b, 5);
    ocr__pb_string(b, 1, name);
    ocr__pb_int(b, 20, OCR__ONNX_ATTR_FLOAT);
    ocr__pb_float(b, 2, v);
    ocr__pb_close(b, at);
}

static void ocr__onnx_attr_string(ocr__pb *b, const char *name, const char *v) {
    size_t at = ocr__pb_open(b, 5);
    ocr__pb_string(b, 1, name);
    ocr__pb_int(b, 20, OCR__ONNX_ATTR_STRING);
    ocr__pb_string(b, 4, v);
    ocr__pb_close(b, at);
}

static void ocr__onnx_attr_int_list(ocr__pb *b, const char *name, const int64_t *v, int n) {
    size_t at = ocr__pb_open(b, 5);
    int i;
    ocr__pb_string(b, 1, name);
    ocr__pb_int(b, 20, OCR__ONNX_ATTR_INTS);
    for (i = 0; i < n; i++) ocr__pb_int(b, 8, v[i]);
    ocr__pb_close(b, at);
}

/* n copies of v: square kernels, strides, and pads on every side */
static void ocr__onnx_attr_ints(ocr__pb *b, const char *name, int64_t v, int n) {
    int64_t vs[8];
    int i;
    for (i = 0; i < n && i < 8; i++) vs[i] = v;
    ocr__onnx_attr_int_list(b, name, vs, i);
}

/* Opens a NodeProto in the graph with its inputs, outputs, name and type; the caller adds attributes and closes it. */
static size_t ocr__onnx_node(ocr__pb *b, const char *op_type, const char *name, const char *const *in, int n_in, const char *out) {
    size_t at = ocr__pb_open(b, OCR__ONNX_GRAPH_NODE);
    int i;
    for (i = 0; i < n_in; i++) ocr__pb_string(b, 1, in[i]);
    ocr__pb_string(b, 2, out);
    ocr__pb_string(b, 3, name);
    ocr__pb_string(b, 4, op_type);
    return at;
}

/* A float32 initializer, its data little-endian in raw_data. */
static void ocr__onnx_initializer(ocr__pb *b, const char *name, const ocr_shape *shape, const float *data) {
    size_t at = ocr__pb_open(b, OCR__ONNX_GRAPH_INITIALIZER), n = (size_t)ocr_shape_numel(*shape);
    int d;
    for (d = 0; d < shape->ndim; d++) ocr__pb_int(b, 1, shape->dim[d]);
    ocr__pb_int(b, 2, OCR__ONNX_TENSOR_FLOAT);
    ocr__pb_string(b, 8, name);
    ocr__pb_floats(b, 9, data, n);
    ocr__pb_close(b, at);
}

/* A graph input or output, float with nd dims: dim d symbolic (named params[d]) when params[d] is not "", else
   values[d]. */
static void ocr__onnx_value_info_dims(ocr__pb *b, int field, const char *name, const char *const *params, const int64_t *values, int nd) {
    size_t vi = ocr__pb_open(b, field), type, tensor, shape, dim;
    int d;
    ocr__pb_string(b, 1, name);
    type = ocr__pb_open(b, 2);        /* ValueInfoProto.type */
    tensor = ocr__pb_open(b, 1);      /* TypeProto.tensor_type */
    ocr__pb_int(b, 1, OCR__ONNX_TENSOR_FLOAT);
    shape = ocr__pb_open(b, 2);       /* TypeProto.Tensor.shape */
    for (d = 0; d < nd; d++) {
        dim = ocr__pb_open(b, 1);     /* TensorShapeProto.dim */
        if (params[d][0]) ocr__pb_string(b, 2, params[d]); /* dim_param */
        else ocr__pb_int(b, 1, values[d]);                 /* dim_value */
        ocr__pb_close(b, dim);
    }
    ocr__pb_close(b, shape);
    ocr__pb_close(b, tensor);
    ocr__pb_close(b, type);
    ocr__pb_close(b, vi);
}

/* A detector's input or output: float [N, channels, H, W] with N, H and W symbolic. */
static void ocr__onnx_value_info(ocr__pb *b, int field, const char *name, int64_t channels) {
    static const char *const dims[4] = {"N", "", "H", "W"};
    int64_t values[4];
    values[0] = values[2] = values[3] = 0;
    values[1] = channels;
    ocr__onnx_value_info_dims(b, field, name, dims, values, 4);
}

/* An int64 initializer (Reshape's shape, Transpose needs none): raw_data little-endian */
static void ocr__onnx_initializer_i64(ocr__pb *b, const char *name, const int64_t *v, int n) {
    size_t at = ocr__pb_open(b, OCR__ONNX_GRAPH_INITIALIZER), raw;
    int i;
    ocr__pb_int(b, 1, n);
    ocr__pb_int(b, 2, OCR__ONNX_TENSOR_INT64);
    ocr__pb_string(b, 8, name);
    raw = ocr__pb_open(b, 9);
    for (i = 0; i < n; i++) ocr__pb_fixed(b, (uint64_t)v[i], 8);
    ocr__pb_close(b, raw);
    ocr__pb_close(b, at);
}

static void ocr__onnx_meta(ocr__pb *b, const char *key, const char *value) {
    size_t at = ocr__pb_open(b, 14);
    ocr__pb_string(b, 1, key);
    ocr__pb_string(b, 2, value);
    ocr__pb_close(b, at);
}

/* a number, as the checkpoints write it ("%.9g": integers as integers, floats round-tripping) */
static void ocr__onnx_meta_num(ocr__pb *b, const char *key, double v) {
    char value[40];
    snprintf(value, sizeof value, "%.9g", v);
    ocr__onnx_meta(b, key, value);
}

OCRDEF ocr_onnx_options ocr_onnx_options_default(void) {
    ocr_onnx_options o;
    int c;
    memset(&o, 0, sizeof o);
    o.channel_order = "BGR";
    o.mean[0] = 122.67891434f; o.mean[1] = 116.66876762f; o.mean[2] = 104.00698793f;
    for (c = 0; c < 3; c++) o.std[c] = 255.0f;
    return o;
}

/* Every node of the ops that run (keep[i]) with their initializers and the Resize scales, into the open graph. ops:
   the model's n_ops ops (ocr_dbnet_op). */
static int ocr__onnx_nodes(ocr_ctx *ctx, const ocr_dbnet *m, const ocr_dbnet_op_info *ops, int n_ops, const ocr_params *P,
                           const unsigned char *keep, ocr__pb *b) {
    const char *fn = "ocr_dbnet_export_onnx";
    int i, k, scales_done[9] = {0};
    for (i = 0; i < n_ops; i++) {
        const ocr_dbnet_op_info op = ops[i];
        const char *in[8], *kind = op.kind;
        char bn_out[OCR_NAME_MAX + 8], scales[32], relu_name[OCR_NAME_MAX + 8];
        int n_in = 0, params[4];
        size_t at;
        if (!keep[i]) continue;
        /* an op reads the graph input or the output of an earlier op, named after it */
        for (k = 0; k < op.n_inputs; k++) in[n_in++] = op.inputs[k] < 0 ? "image" : ops[op.inputs[k]].name;
        params[0] = op.weight; params[1] = op.bias; params[2] = op.running_mean; params[3] = op.running_var;
        for (k = 0; k < 4; k++) {
            ocr_tensor v;
            if (params[k] < 0) continue;
            v = ocr_params_value(P, params[k]);
            in[n_in++] = P->info[params[k]].name;
            ocr__onnx_initializer(b, P->info[params[k]].name, &v.shape, (const float *)v.data);
        }
        if (strcmp(kind, "conv") == 0 || strcmp(kind, "convT") == 0) {
            at = ocr__onnx_node(b, kind[4] == 'T' ? "ConvTranspose" : "Conv", op.name, in, n_in, op.name);
            ocr__onnx_attr_ints(b, "kernel_shape", op.kernel, 2);
            ocr__onnx_attr_ints(b, "strides", op.stride, 2);
            ocr__onnx_attr_ints(b, "pads", op.pad, 4);
            ocr__onnx_attr_ints(b, "dilations", 1, 2);
            ocr__onnx_attr_int(b, "group", 1);
        } else if (strcmp(kind, "bn") == 0 || strcmp(kind, "bn+relu") == 0) {
            int relu = kind[2] == '+';
            /* the fused ReLU is a node of its own, reading the BN's output under a name of its own */
            snprintf(bn_out, sizeof bn_out, "%s%s", op.name, relu ? "/bn" : "");
            at = ocr__onnx_node(b, "BatchNormalization", op.name, in, n_in, bn_out);
            ocr__onnx_attr_float(b, "epsilon", m->cfg.bn_eps);
            if (relu) {
                const char *x = bn_out;
                ocr__pb_close(b, at);
                snprintf(relu_name, sizeof relu_name, "%s/relu", op.name);
                at = ocr__onnx_node(b, "Relu", relu_name, &x, 1, op.name);
            }
        } else if (strcmp(kind, "maxpool") == 0) {
            at = ocr__onnx_node(b, "MaxPool", op.name, in, n_in, op.name);
            ocr__onnx_attr_ints(b, "kernel_shape", op.kernel, 2);
            ocr__onnx_attr_ints(b, "strides", op.stride, 2);
            ocr__onnx_attr_ints(b, "pads", op.pad, 4);
        } else if (strcmp(kind, "upsample") == 0) {
            if (op.factor < 2 || op.factor > 8)
                return ocr_error(ctx, OCR_EUNSUPPORTED, "%s: layer '%s' upsamples by %d; the exporter knows factors 2 to 8", fn, op.name, op.factor);
            /* Resize(X, roi = none, scales [1, 1, f, f]): nearest, asymmetric, floor takes output pixel i from input
               pixel floor(i / f), as ocr_nn_upsample_nearest does */
            snprintf(scales, sizeof scales, "resize_scales_%d", op.factor);
            if (!scales_done[op.factor]) {
                float s[4];
                ocr_shape four = ocr_shape1(4);
                s[0] = s[1] = 1.0f;
                s[2] = s[3] = (float)op.factor;
                ocr__onnx_initializer(b, scales, &four, s);
                scales_done[op.factor] = 1;
            }
            in[n_in++] = "";
            in[n_in++] = scales;
            at = ocr__onnx_node(b, "Resize", op.name, in, n_in, op.name);
            ocr__onnx_attr_string(b, "mode", "nearest");
            ocr__onnx_attr_string(b, "coordinate_transformation_mode", "asymmetric");
            ocr__onnx_attr_string(b, "nearest_mode", "floor");
        } else if (strcmp(kind, "relu") == 0 || strcmp(kind, "add") == 0 || strcmp(kind, "sigmoid") == 0) {
            at = ocr__onnx_node(b, kind[0] == 'r' ? "Relu" : kind[0] == 'a' ? "Add" : "Sigmoid", op.name, in, n_in, op.name);
        } else if (strcmp(kind, "concat") == 0) {
            at = ocr__onnx_node(b, "Concat", op.name, in, n_in, op.name);
            ocr__onnx_attr_int(b, "axis", 1);
        } else {
            return ocr_error(ctx, OCR_EUNSUPPORTED, "%s: layer '%s' is a '%s' op, which the ONNX exporter does not know", fn, op.name, kind);
        }
        ocr__pb_close(b, at);
    }
    return OCR_OK;
}

/* The options' input normalisation: an order of the channels and a finite mean and positive std per channel */
static int ocr__onnx_check_input(ocr_ctx *ctx, const char *fn, const ocr_onnx_options *o) {
    int c;
    if (!o->channel_order || (strcmp(o->channel_order, "BGR") != 0 && strcmp(o->channel_order, "RGB") != 0))
        return ocr_error(ctx, OCR_EINVAL, "%s: channel_order '%s' must be \"BGR\" or \"RGB\"", fn, o->channel_order ? o->channel_order : "(null)");
    for (c = 0; c < 3; c++)
        if (!isfinite(o->mean[c]) || !isfinite(o->std[c]) || !(o->std[c] > 0.0f))
            return ocr_error(ctx, OCR_EINVAL, "%s: input channel %d has mean %g and std %g; both must be finite and std > 0", fn, c, o->mean[c], o->std[c]);
    return OCR_OK;
}

/* ModelProto's head: IR version, producer, the description, opset_import */
static void ocr__onnx_begin(ocr__pb *b, const char *doc) {
    size_t opset_at;
    memset(b, 0, sizeof *b);
    ocr__pb_int(b, 1, OCR_ONNX_IR_VERSION);
    ocr__pb_string(b, 2, "ocr-c");
    ocr__pb_string(b, 3, OCR_VERSION);
    ocr__pb_string(b, 6, doc);
    opset_at = ocr__pb_open(b, 8); /* opset_import: the default domain at OCR_ONNX_OPSET */
    ocr__pb_string(b, 1, "");
    ocr__pb_int(b, 2, OCR_ONNX_OPSET);
    ocr__pb_close(b, opset_at);
}

/* The input normalisation's metadata_props */
static void ocr__onnx_input_meta(ocr__pb *b, const ocr_onnx_options *o) {
    char value[128];
    ocr__onnx_meta(b, "input.channel_order", o->channel_order);
    snprintf(value, sizeof value, "%.9g,%.9g,%.9g", o->mean[0], o->mean[1], o->mean[2]);
    ocr__onnx_meta(b, "input.mean", value);
    snprintf(value, sizeof value, "%.9g,%.9g,%.9g", o->std[0], o->std[1], o->std[2]);
    ocr__onnx_meta(b, "input.std", value);
    ocr__onnx_meta(b, "input.layout", "NCHW");
}

/* The finished model to path, atomically; b is freed either way */
static int ocr__onnx_finish(ocr_ctx *ctx, const char *fn, ocr__pb *b, const char *path) {
    char msg[OCR_ERROR_MAX];
    int rc = OCR_OK;
    if (b->oom) rc = ocr_error(ctx, OCR_ENOMEM, "%s: out of memory after %zu bytes of the model", fn, b->n);
    else if (b->n > (size_t)0x7fffffff)
        rc = ocr_error(ctx, OCR_EOVERFLOW, "%s: the model takes %zu bytes, over protobuf's 2 GiB (external data is not written)", fn, b->n);
    else if ((rc = ocr_write_file_atomic(ctx, path, b->p, b->n))) {
        snprintf(msg, sizeof msg, "%s", ocr_ctx_last_error(ctx));
        rc = ocr_error(ctx, rc, "%s: %s", fn, msg);
    }
    ocr__pb_free(b);
    return rc;
}

OCRDEF int ocr_dbnet_export_onnx(ocr_ctx *ctx, const ocr_dbnet *m, const char *path, const ocr_onnx_options *opt) {
    const char *fn = "ocr_dbnet_export_onnx";
    ocr_onnx_options o = opt ? *opt : ocr_onnx_options_default();
    ocr_params host;
    const ocr_params *P;
    ocr__pb b;
    ocr_dbnet_op_info *ops;
    unsigned char *keep;
    int n_ops, i, k, rc = OCR_OK, outputs[2], n_outputs = 0;
    char value[128];
    size_t graph_at;

    if (!m || !m->params.allocated || ocr_dbnet_op_count(m) == 0) return ocr_error(ctx, OCR_EINVAL, "%s: needs a model from ocr_dbnet_init", fn);
    if (!path || !path[0]) return ocr_error(ctx, OCR_EINVAL, "%s: no output path", fn);
    if (o.flags & ~(unsigned)OCR_ONNX_THRESHOLD_MAP) return ocr_error(ctx, OCR_EINVAL, "%s: unknown flags 0x%x", fn, o.flags & ~(unsigned)OCR_ONNX_THRESHOLD_MAP);
    if ((rc = ocr__onnx_check_input(ctx, fn, &o))) return rc;

    n_ops = ocr_dbnet_op_count(m);
    ops = (ocr_dbnet_op_info *)OCR_MALLOC((size_t)n_ops * sizeof *ops);
    keep = (unsigned char *)OCR_MALLOC((size_t)n_ops);
    if (!ops || !keep) { OCR_FREE(ops); OCR_FREE(keep); return ocr_error(ctx, OCR_ENOMEM, "%s: out of memory", fn); }
    /* eval's ops, and the threshold head (training's) when asked for */
    for (i = 0; i < n_ops; i++) {
        ops[i] = ocr_dbnet_op(m, i);
        keep[i] = (unsigned char)(ops[i].runs_in != OCR_DBNET_RUNS_TRAINING || (o.flags & OCR_ONNX_THRESHOLD_MAP));
    }
    /* the outputs: kept ops that no kept op reads, eval's own (the probability map) first */
    for (k = 0; k < 2; k++)
        for (i = 0; i < n_ops; i++) {
            int j, q, read = 0;
            if (!keep[i] || (ops[i].runs_in == OCR_DBNET_RUNS_EVAL) != (k == 0)) continue;
            for (j = 0; j < n_ops; j++)
                for (q = 0; q < ops[j].n_inputs; q++) read |= keep[j] && ops[j].inputs[q] == i;
            if (!read && n_outputs < 2) outputs[n_outputs] = i;
            n_outputs += !read;
        }
    if (n_outputs != ((o.flags & OCR_ONNX_THRESHOLD_MAP) ? 2 : 1))
        rc = ocr_error(ctx, OCR_EUNSUPPORTED, "%s: the model's plan has %d outputs where the exporter expects %d", fn, n_outputs,
                       (o.flags & OCR_ONNX_THRESHOLD_MAP) ? 2 : 1);

    /* the weights are read on the host */
    P = &m->params;
    ocr_params_init(&host);
    if (!rc && m->params.device != OCR_DEVICE_CPU) {
        rc = ocr_params_host_copy(ctx, &m->params, &host);
        P = &host;
    }
    if (rc) { OCR_FREE(ops); OCR_FREE(keep); return rc; }

    snprintf(value, sizeof value, "DB-ResNet-%d text detector (width %.9g), exported by ocr-c", m->cfg.depth, m->cfg.width);
    ocr__onnx_begin(&b, value);

    graph_at = ocr__pb_open(&b, 7);
    ocr__pb_string(&b, 2, "dbnet");
    ocr__onnx_value_info(&b, OCR__ONNX_GRAPH_INPUT, "image", 3);
    for (k = 0; k < n_outputs; k++) {
        ocr__onnx_value_info(&b, OCR__ONNX_GRAPH_OUTPUT, ops[outputs[k]].name, ops[outputs[k]].channels);
    }
    rc = ocr__onnx_nodes(ctx, m, ops, n_ops, P, keep, &b);
    ocr__pb_close(&b, graph_at);
    OCR_FREE(ops);
    OCR_FREE(keep);
    ocr_params_free(&host);

    if (!rc) {
        /* the checkpoint's config under its own keys, then the input the model expects */
        snprintf(value, sizeof value, "resnet%d", m->cfg.depth);
        ocr__onnx_meta(&b, "ocr_dbnet.backbone", value);
        ocr__onnx_meta_num(&b, "ocr_dbnet.width", m->cfg.width);
        ocr__onnx_meta_num(&b, "ocr_dbnet.k", m->cfg.k);
        ocr__onnx_meta_num(&b, "ocr_dbnet.prior_prob", m->cfg.prior_prob);
        ocr__onnx_meta_num(&b, "ocr_dbnet.bn_momentum", m->cfg.bn_momentum);
        ocr__onnx_meta_num(&b, "ocr_dbnet.bn_eps", m->cfg.bn_eps);
        ocr__onnx_input_meta(&b, &o);
        ocr__onnx_meta(&b, "input.size_multiple", "32");
        return ocr__onnx_finish(ctx, fn, &b, path);
    }
    ocr__pb_free(&b);
    return rc;
}

/* ---- the recognizer ---- */

/* The initializer of parameter `name` (PyTorch's) of P, under that name; NULL when P has no such parameter */
static const char *ocr__onnx_param(ocr__pb *b, const ocr_params *P, const char *name) {
    int i = ocr_params_find(P, name);
    ocr_tensor v;
    if (i < 0) return NULL;
    v = ocr_params_value(P, i);
    ocr__onnx_initializer(b, P->info[i].name, &v.shape, (const float *)v.data);
    return P->info[i].name;
}

/* Layer l's LSTM weights in ONNX's layout, both directions: W [2, 4H, I], R [2, 4H, H], B [2, 8H] (Wb then Rb), the
   gate blocks reordered from PyTorch's i, f, g, o to ONNX's i, o, f, c. Returns 0 when a parameter is missing. */
static int ocr__onnx_lstm_weights(ocr__pb *b, const ocr_params *P, int l, int64_t H, int64_t I, float *w, float *r, float *bias,
                                  char names[3][OCR_NAME_MAX]) {
    static const int onnx_from_torch[4] = {0, 3, 1, 2}; /* ONNX gate block k is PyTorch's block onnx_from_torch[k] */
    static const char *const kinds[4] = {"weight_ih", "weight_hh", "bias_ih", "bias_hh"};
    int d, k, q;
    for (d = 0; d < 2; d++)
        for (q = 0; q < 4; q++) {
            char name[OCR_NAME_MAX];
            int i;
            const float *src;
            int64_t cols = q == 0 ? I : q == 1 ? H : 1, g;
            float *dst = q == 0 ? w + d * 4 * H * I : q == 1 ? r + d * 4 * H * H : bias + d * 8 * H + (q == 3 ? 4 * H : 0);
            snprintf(name, sizeof name, "rnn.%s_l%d%s", kinds[q], l, d ? "_reverse" : "");
            if ((i = ocr_params_find(P, name)) < 0) return 0;
            src = (const float *)ocr_params_value(P, i).data;
            for (k = 0; k < 4; k++)
                for (g = 0; g < H * cols; g++) dst[k * H * cols + g] = src[onnx_from_torch[k] * H * cols + g];
        }
    for (q = 0; q < 3; q++) {
        static const char *const what[3] = {"W", "R", "B"};
        ocr_shape sh = q == 0 ? ocr_shape3(2, 4 * H, I) : q == 1 ? ocr_shape3(2, 4 * H, H) : ocr_shape2(2, 8 * H);
        snprintf(names[q], OCR_NAME_MAX, "rnn.l%d.onnx_%s", l, what[q]);
        ocr__onnx_initializer(b, names[q], &sh, q == 0 ? w : q == 1 ? r : bias);
    }
    return 1;
}

OCRDEF int ocr_rec_export_onnx(ocr_ctx *ctx, const ocr_rec_model *m, const char *path, const ocr_onnx_options *opt) {
    const char *fn = "ocr_rec_export_onnx";
    static const char *const in_dims[4] = {"N", "", "", "W"}, *const out_dims[3] = {"T", "N", ""};
    static const int64_t to_seq_perm[4] = {3, 0, 1, 2}, lstm_perm[4] = {0, 2, 1, 3}, keep_two[3] = {0, 0, -1};
    ocr_onnx_options o = opt ? *opt : ocr_onnx_options_default();
    ocr_params host;
    const ocr_params *P;
    ocr__pb b;
    int64_t in_values[4], out_values[3], H = m ? m->cfg.hidden : 0, I;
    float *w = NULL, *r = NULL, *bias = NULL, *fcw_t = NULL;
    char value[160], cur[OCR_NAME_MAX + 16], next[OCR_NAME_MAX + 16], *charset;
    size_t graph_at, at;
    int blk, l, rc = OCR_OK;

    if (!m || !m->params.allocated || !m->state_) return ocr_error(ctx, OCR_EINVAL, "%s: needs a model from ocr_rec_init", fn);
    if (!path || !path[0]) return ocr_error(ctx, OCR_EINVAL, "%s: no output path", fn);
    if (o.flags) return ocr_error(ctx, OCR_EINVAL, "%s: flags 0x%x: the recognizer has no optional output", fn, o.flags);
    if ((rc = ocr__onnx_check_input(ctx, fn, &o))) return rc;
    P = &m->params;
    ocr_params_init(&host);
    if (m->params.device != OCR_DEVICE_CPU) {
        if ((rc = ocr_params_host_copy(ctx, &m->params, &host))) return rc;
        P = &host;
    }
    I = m->cfg.channels[OCR_REC_BLOCKS - 1];
    w = (float *)OCR_MALLOC((size_t)(8 * H * (I > 2 * H ? I : 2 * H)) * sizeof(float));
    r = (float *)OCR_MALLOC((size_t)(8 * H * H) * sizeof(float));
    bias = (float *)OCR_MALLOC((size_t)(16 * H) * sizeof(float));
    fcw_t = (float *)OCR_MALLOC((size_t)(2 * H * m->cfg.n_classes) * sizeof(float));
    if (!(charset = ocr_charset_to_text(ctx, &m->charset))) rc = ctx->last_status;
    else if (!w || !r || !bias || !fcw_t) rc = ocr_error(ctx, OCR_ENOMEM, "%s: out of memory", fn);
    if (rc) goto done;

    snprintf(value, sizeof value, "CRNN text recognizer (%d classes, LSTM %d x 2 x %d), exported by ocr-c", m->cfg.n_classes, m->cfg.layers,
             m->cfg.hidden);
    ocr__onnx_begin(&b, value);
    graph_at = ocr__pb_open(&b, 7);
    ocr__pb_string(&b, 2, "crnn");
    in_values[0] = in_values[3] = 0; in_values[1] = 3; in_values[2] = m->cfg.height;
    ocr__onnx_value_info_dims(&b, OCR__ONNX_GRAPH_INPUT, "image", in_dims, in_values, 4);
    out_values[0] = out_values[1] = 0; out_values[2] = m->cfg.n_classes;
    ocr__onnx_value_info_dims(&b, OCR__ONNX_GRAPH_OUTPUT, "log_probs", out_dims, out_values, 3);
    ocr__onnx_initializer_i64(&b, "keep_two_axes", keep_two, 3);
    snprintf(cur, sizeof cur, "image");
    /* the convolution blocks: conv (no bias), BN, ReLU, the block's pooling */
    for (blk = 0; blk < OCR_REC_BLOCKS && !rc; blk++) {
        const char *in[5];
        char name[OCR_NAME_MAX];
        int k, ph, pw;
        static const char *const bn_parts[4] = {"weight", "bias", "running_mean", "running_var"};
        in[0] = cur;
        snprintf(name, sizeof name, "cnn.conv%d.weight", blk);
        if (!(in[1] = ocr__onnx_param(&b, P, name))) { rc = ocr_error(ctx, OCR_EINVAL, "%s: the model has no '%s'", fn, name); break; }
        snprintf(next, sizeof next, "cnn.conv%d", blk);
        at = ocr__onnx_node(&b, "Conv", next, in, 2, next);
        ocr__onnx_attr_ints(&b, "kernel_shape", 3, 2);
        ocr__onnx_attr_ints(&b, "strides", 1, 2);
        ocr__onnx_attr_ints(&b, "pads", 1, 4);
        ocr__pb_close(&b, at);
        in[0] = next;
        for (k = 0; k < 4; k++) {
            snprintf(name, sizeof name, "cnn.bn%d.%s", blk, bn_parts[k]);
            if (!(in[1 + k] = ocr__onnx_param(&b, P, name))) { rc = ocr_error(ctx, OCR_EINVAL, "%s: the model has no '%s'", fn, name); break; }
        }
        if (rc) break;
        snprintf(cur, sizeof cur, "cnn.bn%d", blk);
        at = ocr__onnx_node(&b, "BatchNormalization", cur, in, 5, cur);
        ocr__onnx_attr_float(&b, "epsilon", m->cfg.bn_eps);
        ocr__pb_close(&b, at);
        in[0] = cur;
        snprintf(next, sizeof next, "cnn.relu%d", blk);
        ocr__pb_close(&b, ocr__onnx_node(&b, "Relu", next, in, 1, next));
        snprintf(cur, sizeof cur, "%s", next);
        ocr_rec_block_pool(blk, &ph, &pw);
        if (ph) {
            int64_t win[2];
            win[0] = ph; win[1] = pw;
            in[0] = cur;
            snprintf(next, sizeof next, "cnn.pool%d", blk);
            at = ocr__onnx_node(&b, "MaxPool", next, in, 1, next);
            ocr__onnx_attr_int_list(&b, "kernel_shape", win, 2);
            ocr__onnx_attr_int_list(&b, "strides", win, 2);
            ocr__pb_close(&b, at);
            snprintf(cur, sizeof cur, "%s", next);
        }
    }
    /* map to sequence: [N, C, 1, W/4] -> [W/4, N, C, 1] -> [W/4, N, C] */
    if (!rc) {
        const char *in[2];
        in[0] = cur;
        at = ocr__onnx_node(&b, "Transpose", "to_seq", in, 1, "to_seq");
        ocr__onnx_attr_int_list(&b, "perm", to_seq_perm, 4);
        ocr__pb_close(&b, at);
        in[0] = "to_seq"; in[1] = "keep_two_axes";
        ocr__pb_close(&b, ocr__onnx_node(&b, "Reshape", "seq", in, 2, "seq"));
        snprintf(cur, sizeof cur, "seq");
    }
    for (l = 0; l < m->cfg.layers && !rc; l++) {
        char names[3][OCR_NAME_MAX];
        const char *in[4];
        int64_t in_size = l ? 2 * H : I;
        char y[32], yt[32];
        if (!ocr__onnx_lstm_weights(&b, P, l, H, in_size, w, r, bias, names)) {
            rc = ocr_error(ctx, OCR_EINVAL, "%s: the model lacks a weight of LSTM layer %d", fn, l);
            break;
        }
        in[0] = cur; in[1] = names[0]; in[2] = names[1]; in[3] = names[2];
        snprintf(y, sizeof y, "rnn.l%d", l);
        at = ocr__onnx_node(&b, "LSTM", y, in, 4, y);
        ocr__onnx_attr_string(&b, "direction", "bidirectional");
        ocr__onnx_attr_int(&b, "hidden_size", H);
        ocr__pb_close(&b, at);
        /* Y [T, 2, N, H] -> [T, N, 2, H] -> [T, N, 2H]: the forward direction's units first, as ocr_nn_lstm_forward */
        in[0] = y;
        snprintf(yt, sizeof yt, "rnn.l%d.tnd", l);
        at = ocr__onnx_node(&b, "Transpose", yt, in, 1, yt);
        ocr__onnx_attr_int_list(&b, "perm", lstm_perm, 4);
        ocr__pb_close(&b, at);
        in[0] = yt; in[1] = "keep_two_axes";
        snprintf(cur, sizeof cur, "rnn.l%d.out", l);
        ocr__pb_close(&b, ocr__onnx_node(&b, "Reshape", cur, in, 2, cur));
    }
    /* the classifier: MatMul with fc.weight transposed, Add fc.bias, LogSoftmax over the classes */
    if (!rc) {
        int i = ocr_params_find(P, "fc.weight");
        const char *in[2];
        if (i < 0 || ocr_params_find(P, "fc.bias") < 0) rc = ocr_error(ctx, OCR_EINVAL, "%s: the model has no classifier (fc.weight, fc.bias)", fn);
        else {
            const float *fw = (const float *)ocr_params_value(P, i).data;
            int64_t K = m->cfg.n_classes, c, k;
            ocr_shape ts = ocr_shape2(2 * H, K);
            for (c = 0; c < K; c++)
                for (k = 0; k < 2 * H; k++) fcw_t[k * K + c] = fw[c * 2 * H + k];
            ocr__onnx_initializer(&b, "fc.weight.T", &ts, fcw_t);
            in[0] = cur; in[1] = "fc.weight.T";
            ocr__pb_close(&b, ocr__onnx_node(&b, "MatMul", "fc.matmul", in, 2, "fc.matmul"));
            in[0] = "fc.matmul"; in[1] = ocr__onnx_param(&b, P, "fc.bias");
            ocr__pb_close(&b, ocr__onnx_node(&b, "Add", "fc", in, 2, "fc"));
            in[0] = "fc";
            at = ocr__onnx_node(&b, "LogSoftmax", "log_probs", in, 1, "log_probs");
            ocr__onnx_attr_int(&b, "axis", -1);
            ocr__pb_close(&b, at);
        }
    }
    ocr__pb_close(&b, graph_at);
    if (rc) { ocr__pb_free(&b); goto done; }
    ocr__onnx_meta_num(&b, "ocr_rec.height", m->cfg.height);
    snprintf(value, sizeof value, "%d,%d,%d,%d,%d,%d", m->cfg.channels[0], m->cfg.channels[1], m->cfg.channels[2], m->cfg.channels[3],
             m->cfg.channels[4], m->cfg.channels[5]);
    ocr__onnx_meta(&b, "ocr_rec.channels", value);
    ocr__onnx_meta_num(&b, "ocr_rec.hidden", m->cfg.hidden);
    ocr__onnx_meta_num(&b, "ocr_rec.layers", m->cfg.layers);
    ocr__onnx_meta_num(&b, "ocr_rec.n_classes", m->cfg.n_classes);
    ocr__onnx_meta_num(&b, "ocr_rec.bn_momentum", m->cfg.bn_momentum);
    ocr__onnx_meta_num(&b, "ocr_rec.bn_eps", m->cfg.bn_eps);
    ocr__onnx_meta(&b, "ocr_rec.charset", charset);
    ocr__onnx_input_meta(&b, &o);
    ocr__onnx_meta_num(&b, "input.height", m->cfg.height);
    ocr__onnx_meta(&b, "input.width_multiple", "4");
    ocr__onnx_meta(&b, "output.blank", "0");
    ocr__onnx_meta(&b, "output.layout", "TNC");
    rc = ocr__onnx_finish(ctx, fn, &b, path);
done:
    OCR_FREE(w); OCR_FREE(r); OCR_FREE(bias); OCR_FREE(fcw_t);
    OCR_FREE(charset);
    ocr_params_free(&host);
    return rc;
}

#ifdef __cplusplus
}
#endif
#endif /* OCR_ONNX_IMPLEMENTATION */
