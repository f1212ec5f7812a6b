/* ocr_onnx.h - ONNX export of DBNet models, written by ocr-c's own protobuf encoder.  v0.1  MIT license

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

   Options: none. Dependencies: ocr_tensor.h, ocr_nn.h, ocr_dbnet.h (and what they include).
*/
#ifndef OCR_ONNX_H
#define OCR_ONNX_H
#include "ocr_tensor.h"
#include "ocr_nn.h"
#include "ocr_dbnet.h"
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
enum { OCR__ONNX_TENSOR_FLOAT = 1 };
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

/* n copies of v: square kernels, strides, and pads on every side */
static void ocr__onnx_attr_ints(ocr__pb *b, const char *name, int64_t v, int n) {
    size_t at = ocr__pb_open(b, 5);
    int i;
    ocr__pb_string(b, 1, name);
    ocr__pb_int(b, 20, OCR__ONNX_ATTR_INTS);
    for (i = 0; i < n; i++) ocr__pb_int(b, 8, v);
    ocr__pb_close(b, at);
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

/* A graph input or output: float [N, channels, H, W] with N, H and W symbolic. */
static void ocr__onnx_value_info(ocr__pb *b, int field, const char *name, int64_t channels) {
    static const char *const dims[4] = {"N", "", "H", "W"};
    size_t vi = ocr__pb_open(b, field), type, tensor, shape, dim;
    int d;
    ocr__pb_string(b, 1, name);
    type = ocr__pb_open(b, 2);        /* ValueInfoProto.type */
    tensor = ocr__pb_open(b, 1);      /* TypeProto.tensor_type */
    ocr__pb_int(b, 1, OCR__ONNX_TENSOR_FLOAT);
    shape = ocr__pb_open(b, 2);       /* TypeProto.Tensor.shape */
    for (d = 0; d < 4; d++) {
        dim = ocr__pb_open(b, 1);     /* TensorShapeProto.dim */
        if (dims[d][0]) ocr__pb_string(b, 2, dims[d]); /* dim_param */
        else ocr__pb_int(b, 1, channels);              /* dim_value */
        ocr__pb_close(b, dim);
    }
    ocr__pb_close(b, shape);
    ocr__pb_close(b, tensor);
    ocr__pb_close(b, type);
    ocr__pb_close(b, vi);
}

static void ocr__onnx_meta(ocr__pb *b, const char *key, const char *value) {
    size_t at = ocr__pb_open(b, 14);
    ocr__pb_string(b, 1, key);
    ocr__pb_string(b, 2, value);
    ocr__pb_close(b, at);
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

OCRDEF int ocr_dbnet_export_onnx(ocr_ctx *ctx, const ocr_dbnet *m, const char *path, const ocr_onnx_options *opt) {
    const char *fn = "ocr_dbnet_export_onnx";
    ocr_onnx_options o = opt ? *opt : ocr_onnx_options_default();
    ocr_params host;
    const ocr_params *P;
    ocr__pb b;
    ocr_dbnet_op_info *ops;
    unsigned char *keep;
    int n_ops, i, k, c, rc = OCR_OK, outputs[2], n_outputs = 0;
    char value[128], msg[OCR_ERROR_MAX];
    size_t opset_at, graph_at;

    if (!m || !m->params.allocated || ocr_dbnet_op_count(m) == 0) return ocr_error(ctx, OCR_EINVAL, "%s: needs a model from ocr_dbnet_init", fn);
    if (!path || !path[0]) return ocr_error(ctx, OCR_EINVAL, "%s: no output path", fn);
    if (o.flags & ~(unsigned)OCR_ONNX_THRESHOLD_MAP) return ocr_error(ctx, OCR_EINVAL, "%s: unknown flags 0x%x", fn, o.flags & ~(unsigned)OCR_ONNX_THRESHOLD_MAP);
    if (!o.channel_order || (strcmp(o.channel_order, "BGR") != 0 && strcmp(o.channel_order, "RGB") != 0))
        return ocr_error(ctx, OCR_EINVAL, "%s: channel_order '%s' must be \"BGR\" or \"RGB\"", fn, o.channel_order ? o.channel_order : "(null)");
    for (c = 0; c < 3; c++)
        if (!isfinite(o.mean[c]) || !isfinite(o.std[c]) || !(o.std[c] > 0.0f))
            return ocr_error(ctx, OCR_EINVAL, "%s: input channel %d has mean %g and std %g; both must be finite and std > 0", fn, c, o.mean[c], o.std[c]);

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

    memset(&b, 0, sizeof b);
    ocr__pb_int(&b, 1, OCR_ONNX_IR_VERSION);
    ocr__pb_string(&b, 2, "ocr-c");
    ocr__pb_string(&b, 3, OCR_VERSION);
    snprintf(value, sizeof value, "DB-ResNet-%d text detector (width %.9g), exported by ocr-c", m->cfg.depth, m->cfg.width);
    ocr__pb_string(&b, 6, value);
    opset_at = ocr__pb_open(&b, 8); /* opset_import: the default domain at OCR_ONNX_OPSET */
    ocr__pb_string(&b, 1, "");
    ocr__pb_int(&b, 2, OCR_ONNX_OPSET);
    ocr__pb_close(&b, opset_at);

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
        snprintf(value, sizeof value, "%.9g", m->cfg.width);
        ocr__onnx_meta(&b, "ocr_dbnet.width", value);
        snprintf(value, sizeof value, "%.9g", m->cfg.k);
        ocr__onnx_meta(&b, "ocr_dbnet.k", value);
        snprintf(value, sizeof value, "%.9g", m->cfg.prior_prob);
        ocr__onnx_meta(&b, "ocr_dbnet.prior_prob", value);
        snprintf(value, sizeof value, "%.9g", m->cfg.bn_momentum);
        ocr__onnx_meta(&b, "ocr_dbnet.bn_momentum", value);
        snprintf(value, sizeof value, "%.9g", m->cfg.bn_eps);
        ocr__onnx_meta(&b, "ocr_dbnet.bn_eps", value);
        ocr__onnx_meta(&b, "input.channel_order", o.channel_order);
        snprintf(value, sizeof value, "%.9g,%.9g,%.9g", o.mean[0], o.mean[1], o.mean[2]);
        ocr__onnx_meta(&b, "input.mean", value);
        snprintf(value, sizeof value, "%.9g,%.9g,%.9g", o.std[0], o.std[1], o.std[2]);
        ocr__onnx_meta(&b, "input.std", value);
        ocr__onnx_meta(&b, "input.size_multiple", "32");
        ocr__onnx_meta(&b, "input.layout", "NCHW");
        if (b.oom) rc = ocr_error(ctx, OCR_ENOMEM, "%s: out of memory after %zu bytes of the model", fn, b.n);
        else if (b.n > (size_t)0x7fffffff)
            rc = ocr_error(ctx, OCR_EOVERFLOW, "%s: the model takes %zu bytes, over protobuf's 2 GiB (external data is not written)", fn, b.n);
        else if ((rc = ocr_write_file_atomic(ctx, path, b.p, b.n))) {
            snprintf(msg, sizeof msg, "%s", ocr_ctx_last_error(ctx));
            rc = ocr_error(ctx, rc, "%s: %s", fn, msg);
        }
    }
    ocr__pb_free(&b);
    return rc;
}

#ifdef __cplusplus
}
#endif
#endif /* OCR_ONNX_IMPLEMENTATION */
