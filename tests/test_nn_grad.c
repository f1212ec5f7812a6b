/* Finite-difference checks of every backward in ocr_nn.h, with respect to inputs and parameters, on odd shapes.
   The objective is L = sum(r * y) with a fixed random r, so dL/dy = r; central differences accumulate L in double.
   Every case also checks that backward accumulates (two calls give twice the gradient) and, where gradients are
   optional, that a NULL one is skipped while the others come out the same. A last case checks a convolution large
   enough to be split into several im2col chunks against direct loops. */
#define OCR_IMPLEMENTATION
#include "ocr_tensor.h"
#include "ocr_nn.h"
#include "ocr_test.h"

#define MAX_IN 4
/* Inputs are of order 1: the truncation error O(h^2) and the float32 rounding of L, O(1e-7 / h), both stay near
   1e-5 at this step, far below FD_TOL; a wrong gradient is off by order 1. */
#define FD_STEP 1e-2
#define FD_TOL 2e-3
#define FD_SAMPLES 48      /* elements checked per tensor when it has more than FD_ALL */
#define FD_ALL 128

typedef struct fd_op fd_op;
struct fd_op {
    const char *name;
    int n_in, optional_grads;
    ocr_tensor in[MAX_IN], grad[MAX_IN], y;
    ocr_tensor aux[4];          /* op state: BN running and saved statistics, max-pool argmax */
    ocr_conv_params cp;
    int kernel, stride, pad, factor, training;
    int (*forward)(ocr_ctx *ctx, fd_op *op);
    int (*backward)(ocr_ctx *ctx, fd_op *op, const ocr_tensor *dy, ocr_tensor **grads);
};

static void op_init(fd_op *op, const char *name, int (*fwd)(ocr_ctx *, fd_op *),
                    int (*bwd)(ocr_ctx *, fd_op *, const ocr_tensor *, ocr_tensor **), int optional_grads) {
    memset(op, 0, sizeof *op);
    op->name = name;
    op->forward = fwd;
    op->backward = bwd;
    op->optional_grads = optional_grads;
}

/* Adds a perturbed input filled uniformly in [lo, hi], with its zeroed gradient. */
static ocr_tensor *op_input(ocr_ctx *ctx, fd_op *op, const char *name, ocr_shape s, float lo, float hi) {
    char gname[64];
    ocr_tensor *t = &op->in[op->n_in];
    snprintf(gname, sizeof gname, "d%s", name);
    OCR_CHECK_OK(ctx, ocr_tensor_alloc(ctx, t, name, OCR_F32, OCR_DEVICE_CPU, s));
    OCR_CHECK_OK(ctx, ocr_tensor_fill_uniform(ctx, t, lo, hi));
    OCR_CHECK_OK(ctx, ocr_tensor_alloc(ctx, &op->grad[op->n_in], gname, OCR_F32, OCR_DEVICE_CPU, s));
    op->n_in++;
    return t;
}

static void op_free(fd_op *op) {
    int i;
    for (i = 0; i < MAX_IN; i++) { ocr_tensor_free(&op->in[i]); ocr_tensor_free(&op->grad[i]); }
    for (i = 0; i < 4; i++) ocr_tensor_free(&op->aux[i]);
    ocr_tensor_free(&op->y);
}

static double objective(const ocr_tensor *y, const float *r) {
    const float *v = (const float *)y->data;
    int64_t i, n = ocr_tensor_numel(y);
    double s = 0.0;
    for (i = 0; i < n; i++) s += (double)r[i] * v[i];
    return s;
}

static float *copy_floats(const ocr_tensor *t) {
    size_t bytes = ocr_tensor_bytes(t);
    float *p = (float *)malloc(bytes ? bytes : 1);
    memcpy(p, t->data, bytes);
    return p;
}

/* The whole protocol for one op: analytic gradients, accumulation, NULL gradients, then central differences. */
static void fd_check(ocr_ctx *ctx, fd_op *op) {
    ocr_tensor dy;
    ocr_tensor *grads[MAX_IN];
    float *g1[MAX_IN];
    int i, j;
    if (!op->y.data) return; /* construction failed and said so */
    for (i = 0; i < op->n_in; i++) if (!op->in[i].data || !op->grad[i].data) return;
    OCR_CHECK_OK(ctx, op->forward(ctx, op));
    OCR_CHECK_OK(ctx, ocr_tensor_alloc(ctx, &dy, "dy", OCR_F32, OCR_DEVICE_CPU, op->y.shape));
    OCR_CHECK_OK(ctx, ocr_tensor_fill_uniform(ctx, &dy, -1.0f, 1.0f));
    for (i = 0; i < op->n_in; i++) { ocr_tensor_zero(ctx, &op->grad[i]); grads[i] = &op->grad[i]; }
    OCR_CHECK_OK(ctx, op->backward(ctx, op, &dy, grads));
    for (i = 0; i < op->n_in; i++) g1[i] = copy_floats(&op->grad[i]);

    /* backward accumulates: a second call doubles every gradient */
    OCR_CHECK_OK(ctx, op->backward(ctx, op, &dy, grads));
    for (i = 0; i < op->n_in; i++) {
        int64_t k, n = ocr_tensor_numel(&op->grad[i]);
        float *twice = (float *)malloc(sizeof(float) * (size_t)(n ? n : 1));
        double err;
        for (k = 0; k < n; k++) twice[k] = 2.0f * g1[i][k];
        err = ocr_test_rel_err((const float *)op->grad[i].data, twice, n, 1e-6);
        OCR_CHECK_MSG(err <= 1e-6, "%s: gradient %s after two backward calls is off twice the first by rel err %.3g", op->name,
                      op->grad[i].name, err);
        free(twice);
    }

    /* a NULL gradient is skipped and the others come out unchanged */
    if (op->optional_grads) {
        for (j = 0; j < op->n_in; j++) {
            ocr_tensor *only[MAX_IN];
            double err;
            for (i = 0; i < op->n_in; i++) { only[i] = i == j ? &op->grad[i] : NULL; ocr_tensor_zero(ctx, &op->grad[i]); }
            OCR_CHECK_OK(ctx, op->backward(ctx, op, &dy, only));
            err = ocr_test_rel_err((const float *)op->grad[j].data, g1[j], ocr_tensor_numel(&op->grad[j]), 1e-6);
            OCR_CHECK_MSG(err <= 1e-6, "%s: %s computed alone differs from %s computed with the others (rel err %.3g)", op->name,
                          op->grad[j].name, op->grad[j].name, err);
        }
        {
            ocr_tensor *none[MAX_IN] = {NULL, NULL, NULL, NULL};
            OCR_CHECK_OK(ctx, op->backward(ctx, op, &dy, none));
        }
    }

    /* central differences on every element of small tensors, on a fixed sample of larger ones */
    for (i = 0; i < op->n_in; i++) {
        ocr_tensor *x = &op->in[i];
        float *xv = (float *)x->data;
        int64_t n = ocr_tensor_numel(x), s, count = n <= FD_ALL ? n : FD_SAMPLES;
        int reported = 0;
        for (s = 0; s < count; s++) {
            int64_t k = n <= FD_ALL ? s : s == 0 ? 0 : s == 1 ? n - 1 : (int64_t)ocr_rng_below(&ctx->rng, (uint32_t)n);
            float orig = xv[k];
            double lp, lm, fd, an = g1[i][k];
            xv[k] = orig + (float)FD_STEP;
            OCR_CHECK_OK(ctx, op->forward(ctx, op));
            lp = objective(&op->y, (const float *)dy.data);
            xv[k] = orig - (float)FD_STEP;
            OCR_CHECK_OK(ctx, op->forward(ctx, op));
            lm = objective(&op->y, (const float *)dy.data);
            xv[k] = orig;
            /* the step actually taken in float32, not the nominal one */
            fd = (lp - lm) / ((double)(orig + (float)FD_STEP) - (double)(orig - (float)FD_STEP));
            if (!(fabs(fd - an) <= FD_TOL * (fabs(an) > 1.0 ? fabs(an) : 1.0))) {
                ocr_test__case_failed = 1;
                if (reported++ < 3)
                    fprintf(stderr, "  %s: d L / d %s[%lld]: analytic %.7g, finite difference %.7g\n", op->name, x->name, (long long)k,
                            an, fd);
            }
        }
    }
    for (i = 0; i < op->n_in; i++) free(g1[i]);
    ocr_tensor_free(&dy);
}

/* ---------------------------------------------------------------- ops under test */

static const ocr_tensor *opt_in(fd_op *op, int i) { return op->n_in > i ? &op->in[i] : NULL; }
static ocr_tensor *opt_grad(fd_op *op, ocr_tensor **grads, int i) { return op->n_in > i ? grads[i] : NULL; }

static int conv_fwd(ocr_ctx *ctx, fd_op *op) { return ocr_nn_conv2d_forward(ctx, &op->in[0], &op->in[1], opt_in(op, 2), op->cp, &op->y); }
static int conv_bwd(ocr_ctx *ctx, fd_op *op, const ocr_tensor *dy, ocr_tensor **g) {
    return ocr_nn_conv2d_backward(ctx, &op->in[0], &op->in[1], dy, op->cp, g[0], g[1], opt_grad(op, g, 2));
}
static int convt_fwd(ocr_ctx *ctx, fd_op *op) {
    return ocr_nn_conv_transpose2d_forward(ctx, &op->in[0], &op->in[1], opt_in(op, 2), op->cp, &op->y);
}
static int convt_bwd(ocr_ctx *ctx, fd_op *op, const ocr_tensor *dy, ocr_tensor **g) {
    return ocr_nn_conv_transpose2d_backward(ctx, &op->in[0], &op->in[1], dy, op->cp, g[0], g[1], opt_grad(op, g, 2));
}
static int bn_fwd(ocr_ctx *ctx, fd_op *op) {
    return ocr_nn_batchnorm2d_forward(ctx, &op->in[0], &op->in[1], &op->in[2], &op->aux[0], &op->aux[1], op->training, 0.1f, 1e-5f,
                                      &op->aux[2], &op->aux[3], &op->y);
}
static int bn_bwd(ocr_ctx *ctx, fd_op *op, const ocr_tensor *dy, ocr_tensor **g) {
    return ocr_nn_batchnorm2d_backward(ctx, &op->in[0], &op->in[1], &op->aux[2], &op->aux[3], dy, op->training, g[0], g[1], g[2]);
}
static int relu_fwd(ocr_ctx *ctx, fd_op *op) { return ocr_nn_relu_forward(ctx, &op->in[0], &op->y); }
static int relu_bwd(ocr_ctx *ctx, fd_op *op, const ocr_tensor *dy, ocr_tensor **g) { return ocr_nn_relu_backward(ctx, &op->y, dy, g[0]); }
static int sigmoid_fwd(ocr_ctx *ctx, fd_op *op) { return ocr_nn_sigmoid_forward(ctx, &op->in[0], &op->y); }
static int sigmoid_bwd(ocr_ctx *ctx, fd_op *op, const ocr_tensor *dy, ocr_tensor **g) {
    return ocr_nn_sigmoid_backward(ctx, &op->y, dy, g[0]);
}
static int add_fwd(ocr_ctx *ctx, fd_op *op) { return ocr_nn_add_forward(ctx, &op->in[0], &op->in[1], &op->y); }
static int add_bwd(ocr_ctx *ctx, fd_op *op, const ocr_tensor *dy, ocr_tensor **g) {
    (void)op;
    return ocr_nn_add_backward(ctx, dy, g[0], g[1]);
}
static int maxpool_fwd(ocr_ctx *ctx, fd_op *op) {
    return ocr_nn_maxpool2d_forward(ctx, &op->in[0], op->kernel, op->stride, op->pad, &op->y, &op->aux[0]);
}
static int maxpool_bwd(ocr_ctx *ctx, fd_op *op, const ocr_tensor *dy, ocr_tensor **g) {
    return ocr_nn_maxpool2d_backward(ctx, dy, &op->aux[0], g[0]);
}
static int upsample_fwd(ocr_ctx *ctx, fd_op *op) { return ocr_nn_upsample_nearest_forward(ctx, &op->in[0], op->factor, &op->y); }
static int upsample_bwd(ocr_ctx *ctx, fd_op *op, const ocr_tensor *dy, ocr_tensor **g) {
    return ocr_nn_upsample_nearest_backward(ctx, dy, op->factor, g[0]);
}
static int concat_fwd(ocr_ctx *ctx, fd_op *op) {
    const ocr_tensor *xs[MAX_IN];
    int i;
    for (i = 0; i < op->n_in; i++) xs[i] = &op->in[i];
    return ocr_nn_concat_forward(ctx, xs, op->n_in, &op->y);
}
static int concat_bwd(ocr_ctx *ctx, fd_op *op, const ocr_tensor *dy, ocr_tensor **g) { return ocr_nn_concat_backward(ctx, dy, g, op->n_in); }

static void alloc_y(ocr_ctx *ctx, fd_op *op, ocr_shape s) { OCR_CHECK_OK(ctx, ocr_tensor_alloc(ctx, &op->y, "y", OCR_F32, OCR_DEVICE_CPU, s)); }

static ocr_conv_params conv_params(int sh, int sw, int ph, int pw, int dil, int groups) {
    ocr_conv_params p = ocr_conv_params_make(1, 0, dil, groups);
    p.stride_h = sh; p.stride_w = sw; p.pad_h = ph; p.pad_w = pw;
    return p;
}

/* ---------------------------------------------------------------- cases */

static ocr_ctx ctx_g;

static void conv_case(const char *name, ocr_shape xs, ocr_shape ws, int bias, ocr_conv_params p, int transposed) {
    fd_op op;
    ocr_shape ys;
    op_init(&op, name, transposed ? convt_fwd : conv_fwd, transposed ? convt_bwd : conv_bwd, 1);
    op.cp = p;
    op_input(&ctx_g, &op, "x", xs, -1.0f, 1.0f);
    op_input(&ctx_g, &op, "w", ws, -0.5f, 0.5f);
    if (transposed) OCR_CHECK_OK(&ctx_g, ocr_nn_conv_transpose2d_out_shape(&ctx_g, xs, ws, p, &ys));
    else OCR_CHECK_OK(&ctx_g, ocr_nn_conv2d_out_shape(&ctx_g, xs, ws, p, &ys));
    if (bias) op_input(&ctx_g, &op, "b", ocr_shape1(ys.dim[1]), -0.5f, 0.5f);
    alloc_y(&ctx_g, &op, ys);
    fd_check(&ctx_g, &op);
    op_free(&op);
}

static void test_conv2d_grad(void) {
    conv_case("conv stride 2 pad 1 bias", ocr_shape4(2, 3, 7, 9), ocr_shape4(4, 3, 3, 3), 1, conv_params(2, 2, 1, 1, 1, 1), 0);
    conv_case("conv non-square kernel, stride 1x2, pad 2x1, dilation 2, no bias", ocr_shape4(1, 2, 8, 7), ocr_shape4(3, 2, 3, 2), 0,
              conv_params(1, 2, 2, 1, 2, 1), 0);
    conv_case("conv stride 1, pad 3x1, dilation 2, non-square kernel (data gradient as a flipped-kernel conv)", ocr_shape4(2, 3, 7, 6),
              ocr_shape4(4, 3, 3, 2), 0, conv_params(1, 1, 3, 1, 2, 1), 0);
    conv_case("conv groups 2 bias", ocr_shape4(2, 4, 6, 5), ocr_shape4(6, 2, 3, 3), 1, conv_params(1, 1, 1, 1, 1, 2), 0);
    conv_case("conv 1x1 bias", ocr_shape4(2, 5, 4, 6), ocr_shape4(3, 5, 1, 1), 1, conv_params(1, 1, 0, 0, 1, 1), 0);
    conv_case("conv 1x1 stride 2 no bias", ocr_shape4(2, 3, 5, 8), ocr_shape4(2, 3, 1, 1), 0, conv_params(2, 2, 0, 0, 1, 1), 0);
}

static void test_conv_transpose2d_grad(void) {
    ocr_conv_params p = conv_params(2, 2, 1, 1, 1, 1);
    conv_case("convT k2 s2 bias (DB head)", ocr_shape4(2, 3, 4, 5), ocr_shape4(3, 2, 2, 2), 1, conv_params(2, 2, 0, 0, 1, 1), 1);
    p.out_pad_h = p.out_pad_w = 1;
    conv_case("convT k3 s2 p1 output_padding 1 bias", ocr_shape4(1, 2, 4, 3), ocr_shape4(2, 3, 3, 3), 1, p, 1);
    conv_case("convT groups 2 s2 p1 bias", ocr_shape4(2, 4, 3, 4), ocr_shape4(4, 2, 3, 3), 1, conv_params(2, 2, 1, 1, 1, 2), 1);
    p = conv_params(2, 1, 1, 0, 2, 1);
    p.out_pad_h = 1;
    conv_case("convT non-square kernel, stride 2x1, dilation 2, output_padding 1x0, no bias", ocr_shape4(1, 3, 3, 4),
              ocr_shape4(3, 2, 3, 2), 0, p, 1);
}

static void bn_case(const char *name, ocr_shape xs, int training) {
    fd_op op;
    int64_t C = xs.dim[1];
    int i;
    op_init(&op, name, bn_fwd, bn_bwd, 1);
    op.training = training;
    op_input(&ctx_g, &op, "x", xs, -1.0f, 3.0f);
    op_input(&ctx_g, &op, "gamma", ocr_shape1(C), 0.5f, 1.5f);
    op_input(&ctx_g, &op, "beta", ocr_shape1(C), -0.5f, 0.5f);
    for (i = 0; i < 4; i++) {
        static const char *const names[4] = {"running_mean", "running_var", "save_mean", "save_invstd"};
        OCR_CHECK_OK(&ctx_g, ocr_tensor_alloc(&ctx_g, &op.aux[i], names[i], OCR_F32, OCR_DEVICE_CPU, ocr_shape1(C)));
    }
    OCR_CHECK_OK(&ctx_g, ocr_tensor_fill_uniform(&ctx_g, &op.aux[0], 0.0f, 1.0f));
    OCR_CHECK_OK(&ctx_g, ocr_tensor_fill_uniform(&ctx_g, &op.aux[1], 0.5f, 2.0f));
    alloc_y(&ctx_g, &op, xs);
    fd_check(&ctx_g, &op);
    op_free(&op);
}

static void test_batchnorm2d_grad(void) {
    bn_case("batchnorm training", ocr_shape4(2, 3, 4, 5), 1);
    bn_case("batchnorm eval", ocr_shape4(2, 3, 4, 5), 0);
    bn_case("batchnorm training, 3 values per channel", ocr_shape4(1, 2, 1, 3), 1);
}

static void test_pointwise_grad(void) {
    fd_op op;
    int64_t i, n;
    float *v;
    /* relu: inputs kept farther than the step from the kink */
    op_init(&op, "relu", relu_fwd, relu_bwd, 0);
    v = (float *)op_input(&ctx_g, &op, "x", ocr_shape4(2, 3, 5, 7), -1.0f, 1.0f)->data;
    n = ocr_tensor_numel(&op.in[0]);
    for (i = 0; i < n; i++) v[i] += v[i] >= 0.0f ? 0.05f : -0.05f;
    alloc_y(&ctx_g, &op, op.in[0].shape);
    fd_check(&ctx_g, &op);
    op_free(&op);

    op_init(&op, "sigmoid", sigmoid_fwd, sigmoid_bwd, 0);
    op_input(&ctx_g, &op, "x", ocr_shape4(2, 3, 5, 7), -4.0f, 4.0f);
    alloc_y(&ctx_g, &op, op.in[0].shape);
    fd_check(&ctx_g, &op);
    op_free(&op);

    op_init(&op, "add", add_fwd, add_bwd, 1);
    op_input(&ctx_g, &op, "a", ocr_shape4(2, 3, 4, 5), -1.0f, 1.0f);
    op_input(&ctx_g, &op, "b", ocr_shape4(2, 3, 4, 5), -1.0f, 1.0f);
    alloc_y(&ctx_g, &op, op.in[0].shape);
    fd_check(&ctx_g, &op);
    op_free(&op);
}

static void maxpool_case(const char *name, ocr_shape xs, int kernel, int stride, int pad) {
    fd_op op;
    ocr_shape ys;
    int64_t i, n = ocr_shape_numel(xs);
    float *v;
    op_init(&op, name, maxpool_fwd, maxpool_bwd, 0);
    op.kernel = kernel; op.stride = stride; op.pad = pad;
    v = (float *)op_input(&ctx_g, &op, "x", xs, 0.0f, 0.0f)->data;
    /* a shuffled grid 0.05 apart: no two values of a window come within the step of each other */
    for (i = 0; i < n; i++) v[i] = (float)(i - n / 2) * 0.05f;
    for (i = n - 1; i > 0; i--) {
        int64_t k = (int64_t)ocr_rng_below(&ctx_g.rng, (uint32_t)(i + 1));
        float t = v[i]; v[i] = v[k]; v[k] = t;
    }
    ys = ocr_shape4(xs.dim[0], xs.dim[1], (xs.dim[2] + 2 * pad - kernel) / stride + 1, (xs.dim[3] + 2 * pad - kernel) / stride + 1);
    OCR_CHECK_OK(&ctx_g, ocr_tensor_alloc(&ctx_g, &op.aux[0], "argmax", OCR_I32, OCR_DEVICE_CPU, ys));
    alloc_y(&ctx_g, &op, ys);
    fd_check(&ctx_g, &op);
    op_free(&op);
}

static void test_maxpool2d_grad(void) {
    maxpool_case("maxpool 3x3 s2 p1", ocr_shape4(2, 2, 7, 9), 3, 2, 1);
    maxpool_case("maxpool 2x2 s2 p0", ocr_shape4(1, 2, 6, 5), 2, 2, 0);
}

static void upsample_case(const char *name, ocr_shape xs, int factor) {
    fd_op op;
    op_init(&op, name, upsample_fwd, upsample_bwd, 0);
    op.factor = factor;
    op_input(&ctx_g, &op, "x", xs, -1.0f, 1.0f);
    alloc_y(&ctx_g, &op, ocr_shape4(xs.dim[0], xs.dim[1], xs.dim[2] * factor, xs.dim[3] * factor));
    fd_check(&ctx_g, &op);
    op_free(&op);
}

static void test_upsample_grad(void) {
    upsample_case("upsample nearest x2", ocr_shape4(2, 2, 3, 4), 2);
    upsample_case("upsample nearest x3", ocr_shape4(1, 2, 3, 2), 3);
}

static void test_concat_grad(void) {
    fd_op op;
    op_init(&op, "concat of 3", concat_fwd, concat_bwd, 0);
    op_input(&ctx_g, &op, "x0", ocr_shape4(2, 1, 3, 4), -1.0f, 1.0f);
    op_input(&ctx_g, &op, "x1", ocr_shape4(2, 2, 3, 4), -1.0f, 1.0f);
    op_input(&ctx_g, &op, "x2", ocr_shape4(2, 3, 3, 4), -1.0f, 1.0f);
    alloc_y(&ctx_g, &op, ocr_shape4(2, 6, 3, 4));
    fd_check(&ctx_g, &op);
    op_free(&op);
}

/* A convolution with more output pixels than one im2col chunk holds, so forward and both backward passes cross
   chunk boundaries (that do not fall on row starts); checked against direct loops in double. */
static void test_conv_chunked_vs_direct(void) {
    enum { N = 1, C = 64, H = 48, W = 48, K = 8, KH = 3, KW = 3 };
    ocr_ctx two, *ctx = &two;
    ocr_conv_params p = ocr_conv_params_make(1, 1, 1, 1);
    ocr_tensor x, w, y, dy, dx, dw;
    double *ry = (double *)calloc((size_t)N * K * H * W, sizeof(double));
    double *rdx = (double *)calloc((size_t)N * C * H * W, sizeof(double)), *rdw = (double *)calloc((size_t)K * C * KH * KW, sizeof(double));
    float *fy = (float *)malloc(sizeof(float) * N * K * H * W), *fdx = (float *)malloc(sizeof(float) * N * C * H * W);
    float *fdw = (float *)malloc(sizeof(float) * K * C * KH * KW);
    const float *xv, *wv, *dyv;
    int n, c, k, h, ww, i, j;
    OCR_CHECK_OK(ctx, ocr_ctx_init(ctx, 2, 5));
    OCR_CHECK_OK(ctx, ocr_tensor_alloc(ctx, &x, "x", OCR_F32, OCR_DEVICE_CPU, ocr_shape4(N, C, H, W)));
    OCR_CHECK_OK(ctx, ocr_tensor_alloc(ctx, &w, "w", OCR_F32, OCR_DEVICE_CPU, ocr_shape4(K, C, KH, KW)));
    OCR_CHECK_OK(ctx, ocr_tensor_alloc(ctx, &y, "y", OCR_F32, OCR_DEVICE_CPU, ocr_shape4(N, K, H, W)));
    OCR_CHECK_OK(ctx, ocr_tensor_alloc(ctx, &dy, "dy", OCR_F32, OCR_DEVICE_CPU, ocr_shape4(N, K, H, W)));
    OCR_CHECK_OK(ctx, ocr_tensor_alloc(ctx, &dx, "dx", OCR_F32, OCR_DEVICE_CPU, ocr_shape4(N, C, H, W)));
    OCR_CHECK_OK(ctx, ocr_tensor_alloc(ctx, &dw, "dw", OCR_F32, OCR_DEVICE_CPU, ocr_shape4(K, C, KH, KW)));
    if (ocr_test__case_failed) goto done;
    ocr_tensor_fill_uniform(ctx, &x, -1.0f, 1.0f);
    ocr_tensor_fill_uniform(ctx, &w, -0.1f, 0.1f);
    ocr_tensor_fill_uniform(ctx, &dy, -1.0f, 1.0f);
    OCR_CHECK_OK(ctx, ocr_nn_conv2d_forward(ctx, &x, &w, NULL, p, &y));
    OCR_CHECK_OK(ctx, ocr_nn_conv2d_backward(ctx, &x, &w, &dy, p, &dx, &dw, NULL));
    xv = (const float *)x.data; wv = (const float *)w.data; dyv = (const float *)dy.data;
    for (n = 0; n < N; n++)
        for (k = 0; k < K; k++)
            for (c = 0; c < C; c++)
                for (i = 0; i < KH; i++)
                    for (j = 0; j < KW; j++) {
                        double wk = wv[((k * C + c) * KH + i) * KW + j], sw = 0.0;
                        for (h = 0; h < H; h++) {
                            int ih = h - 1 + i;
                            if (ih < 0 || ih >= H) continue;
                            for (ww = 0; ww < W; ww++) {
                                int iw = ww - 1 + j, yi = ((n * K + k) * H + h) * W + ww, xi = ((n * C + c) * H + ih) * W + iw;
                                if (iw < 0 || iw >= W) continue;
                                ry[yi] += wk * xv[xi];
                                rdx[xi] += wk * dyv[yi];
                                sw += (double)dyv[yi] * xv[xi];
                            }
                        }
                        rdw[((k * C + c) * KH + i) * KW + j] += sw;
                    }
    for (i = 0; i < N * K * H * W; i++) fy[i] = (float)ry[i];
    for (i = 0; i < N * C * H * W; i++) fdx[i] = (float)rdx[i];
    for (i = 0; i < K * C * KH * KW; i++) fdw[i] = (float)rdw[i];
    OCR_CHECK(ocr_test_rel_err((const float *)y.data, fy, N * K * H * W, 1e-6) <= 1e-5);
    OCR_CHECK(ocr_test_rel_err((const float *)dx.data, fdx, N * C * H * W, 1e-6) <= 1e-5);
    OCR_CHECK(ocr_test_rel_err((const float *)dw.data, fdw, K * C * KH * KW, 1e-6) <= 1e-5);
done:
    ocr_tensor_free(&x); ocr_tensor_free(&w); ocr_tensor_free(&y); ocr_tensor_free(&dy); ocr_tensor_free(&dx); ocr_tensor_free(&dw);
    free(ry); free(rdx); free(rdw); free(fy); free(fdx); free(fdw);
    ocr_ctx_free(ctx);
}

int main(int argc, char **argv) {
    ocr_test_init(argc, argv);
    /* one thread: thousands of tiny forwards would spend their time waking a pool on a busy machine; the
       parallel splits are checked by the chunked case here and by test_nn_parity */
    if (ocr_ctx_init(&ctx_g, 1, 2024) != OCR_OK) { fprintf(stderr, "%s\n", ocr_ctx_last_error(&ctx_g)); return 1; }
    ctx_g.debug_flags |= OCR_DEBUG_CHECK_NUMERICS;
    OCR_TEST_RUN(test_conv2d_grad);
    OCR_TEST_RUN(test_conv_transpose2d_grad);
    OCR_TEST_RUN(test_batchnorm2d_grad);
    OCR_TEST_RUN(test_pointwise_grad);
    OCR_TEST_RUN(test_maxpool2d_grad);
    OCR_TEST_RUN(test_upsample_grad);
    OCR_TEST_RUN(test_concat_grad);
    OCR_TEST_RUN(test_conv_chunked_vs_direct);
    ocr_ctx_free(&ctx_g);
    return ocr_test_finish();
}
