/* ocr_nn.h against PyTorch: outputs and gradients of every op on the fixtures tools/make_fixtures.py writes
   (float64 PyTorch on float32-rounded inputs), a 3-step training run of a conv-bn-relu-convtranspose network under
   SGD, SGD Nesterov and AdamW, gradient clipping, the poly schedule, ocr_params (views, save, load), the weight
   average (hand-computed), and the error paths: mis-shaped tensors are refused before anything is written, and NaN is caught under
   OCR_DEBUG_CHECK_NUMERICS. The op and training cases run on the fast paths (one thread with the portable GEMM, two
   with the best kernel) and on the reference loops (OCR_DEBUG_REFERENCE). Regenerate the fixtures with:
   /usr/bin/python3 tools/make_fixtures.py */
#define _POSIX_C_SOURCE 200809L
#define OCR_IMPLEMENTATION
#include "ocr_tensor.h"
#include "ocr_nn.h"
#include "ocr_test.h"
#include <unistd.h>

#define FIXTURES "tests/fixtures/nn/"
#define OUT_TOL 1e-4
#define GRAD_TOL 1e-3
#define REL_FLOOR 1e-6

/* ---------------------------------------------------------------- fixture access */

/* The tensors of one fixture case: read on demand by short name ("x" for "case3.x"), freed together. */
#define CASE_MAX 32
typedef struct {
    ocr_ctx *ctx;
    ocr_safetensors *st;
    const char *op;
    int k, n;
    ocr_tensor t[CASE_MAX];
} fcase;

static void fc_init(fcase *fc, ocr_ctx *ctx, ocr_safetensors *st, const char *op, int k) {
    memset(fc, 0, sizeof *fc);
    fc->ctx = ctx; fc->st = st; fc->op = op; fc->k = k;
}

/* The next free tensor of the case; running out is a bug of this file. */
static ocr_tensor *fc_slot(fcase *fc) {
    if (fc->n == CASE_MAX) { fprintf(stderr, "test_nn_parity: raise CASE_MAX\n"); exit(2); }
    return &fc->t[fc->n++];
}

static void fc_free(fcase *fc) {
    int i;
    for (i = 0; i < fc->n; i++) ocr_tensor_free(&fc->t[i]);
    fc->n = 0;
}

/* The fixture tensor, or an empty tensor (which every op refuses) after a failed check. */
static ocr_tensor *fc_in(fcase *fc, const char *name) {
    char full[OCR_NAME_MAX];
    ocr_tensor *t = fc_slot(fc);
    snprintf(full, sizeof full, "case%d.%s", fc->k, name);
    OCR_CHECK_OK(fc->ctx, ocr_safetensors_read(fc->ctx, fc->st, full, t));
    ocr_tensor_set_name(t, name);
    return t;
}

/* A zeroed F32 output (or gradient) named name. */
static ocr_tensor *fc_out(fcase *fc, const char *name, ocr_shape s) {
    ocr_tensor *t = fc_slot(fc);
    OCR_CHECK_OK(fc->ctx, ocr_tensor_alloc(fc->ctx, t, name, OCR_F32, OCR_DEVICE_CPU, s));
    return t;
}

static double fc_meta(fcase *fc, const char *key) {
    char full[OCR_NAME_MAX];
    const char *v;
    snprintf(full, sizeof full, "case%d.%s", fc->k, key);
    v = ocr_safetensors_meta(fc->st, full);
    OCR_CHECK_MSG(v != NULL, "%s: fixture has no metadata '%s'", fc->op, full);
    return v ? strtod(v, NULL) : 0.0;
}

static int fixture_open(ocr_ctx *ctx, ocr_safetensors *st, const char *op, int *cases) {
    char path[256];
    const char *v;
    snprintf(path, sizeof path, FIXTURES "%s.safetensors", op);
    *cases = 0;
    if (ocr_safetensors_open(ctx, st, path) != OCR_OK) {
        OCR_CHECK_MSG(0, "cannot open %s (run /usr/bin/python3 tools/make_fixtures.py): %s", path, ocr_ctx_last_error(ctx));
        return 0;
    }
    v = ocr_safetensors_meta(st, "cases");
    *cases = v ? atoi(v) : 0;
    OCR_CHECK_MSG(*cases > 0, "%s has no cases", path);
    return 1;
}

/* got against the F32 tensor ref (same shape) with a scale-aware relative error; what says where, e.g. "conv2d case3". */
static void expect_close_to(const char *what, const ocr_tensor *got, const ocr_tensor *ref, double tol) {
    char gs[96], rs[96];
    double err;
    if (!got->data || !ref->data) { ocr_test__case_failed = 1; return; }
    if (!ocr_shape_equal(got->shape, ref->shape) || ref->dtype != OCR_F32) {
        OCR_CHECK_MSG(0, "%s %s: shape %s, reference %s", what, got->name, ocr_shape_str(got->shape, gs, sizeof gs),
                      ocr_shape_str(ref->shape, rs, sizeof rs));
        return;
    }
    err = ocr_test_rel_err((const float *)got->data, (const float *)ref->data, ocr_tensor_numel(got), REL_FLOOR);
    OCR_CHECK_MSG(err <= tol, "%s %s: relative error %.3g above %g", what, got->name, err, tol);
}

static void expect_close(fcase *fc, const ocr_tensor *got, const char *ref_name, double tol) {
    char what[64];
    snprintf(what, sizeof what, "%s case%d", fc->op, fc->k);
    expect_close_to(what, got, fc_in(fc, ref_name), tol);
}

/* Variant 0: one thread and the portable GEMM; 1: two threads and the best kernel; 2 (VARIANT_REFERENCE): two threads
   with every op on its reference loop (OCR_DEBUG_REFERENCE), so the library's reference is itself held to PyTorch. */
#define N_VARIANTS 3
#define VARIANT_REFERENCE 2
static int ctx_variant(ocr_ctx *ctx, int variant) {
    if (ocr_ctx_init(ctx, variant ? 2 : 1, 99) != OCR_OK) { OCR_CHECK_MSG(0, "%s", ocr_ctx_last_error(ctx)); return 0; }
    ctx->cpu_kernel = variant ? OCR_CPU_KERNEL_AUTO : OCR_CPU_KERNEL_PORTABLE;
    if (variant == VARIANT_REFERENCE) ctx->debug_flags |= OCR_DEBUG_REFERENCE;
    else ctx->debug_flags &= ~(unsigned)OCR_DEBUG_REFERENCE; /* the fast paths, even under OCR_REFERENCE=1 */
    return 1;
}

/* Runs case_fn on every case of fixture op under every context variant. */
static void for_each_case(const char *op, void (*case_fn)(fcase *fc)) {
    int variant, k, cases;
    for (variant = 0; variant < N_VARIANTS; variant++) {
        ocr_ctx ctx;
        ocr_safetensors st;
        if (!ctx_variant(&ctx, variant)) return;
        if (fixture_open(&ctx, &st, op, &cases)) {
            for (k = 0; k < cases; k++) {
                fcase fc;
                fc_init(&fc, &ctx, &st, op, k);
                case_fn(&fc);
                fc_free(&fc);
            }
            ocr_safetensors_close(&st);
        }
        ocr_ctx_free(&ctx);
    }
}

/* ---------------------------------------------------------------- ops */

static ocr_conv_params fc_conv_params(fcase *fc, int transposed) {
    ocr_conv_params p = ocr_conv_params_make(1, 0, 1, (int)fc_meta(fc, "groups"));
    p.stride_h = (int)fc_meta(fc, "stride_h"); p.stride_w = (int)fc_meta(fc, "stride_w");
    p.pad_h = (int)fc_meta(fc, "pad_h"); p.pad_w = (int)fc_meta(fc, "pad_w");
    p.dil_h = (int)fc_meta(fc, "dil_h"); p.dil_w = (int)fc_meta(fc, "dil_w");
    if (transposed) { p.out_pad_h = (int)fc_meta(fc, "out_pad_h"); p.out_pad_w = (int)fc_meta(fc, "out_pad_w"); }
    return p;
}

static void conv_case(fcase *fc, int transposed) {
    ocr_ctx *ctx = fc->ctx;
    ocr_conv_params p = fc_conv_params(fc, transposed);
    ocr_tensor *x = fc_in(fc, "x"), *w = fc_in(fc, "w"), *dy = fc_in(fc, "dy");
    ocr_tensor *b = fc_meta(fc, "bias") != 0.0 ? fc_in(fc, "b") : NULL;
    ocr_tensor *y, *dx, *dw, *db;
    ocr_shape ys;
    if (transposed) OCR_CHECK_OK(ctx, ocr_nn_conv_transpose2d_out_shape(ctx, x->shape, w->shape, p, &ys));
    else OCR_CHECK_OK(ctx, ocr_nn_conv2d_out_shape(ctx, x->shape, w->shape, p, &ys));
    if (ocr_test__case_failed) return;
    y = fc_out(fc, "y", ys);
    dx = fc_out(fc, "dx", x->shape);
    dw = fc_out(fc, "dw", w->shape);
    db = b ? fc_out(fc, "db", b->shape) : NULL;
    if (transposed) {
        OCR_CHECK_OK(ctx, ocr_nn_conv_transpose2d_forward(ctx, x, w, b, p, y));
        OCR_CHECK_OK(ctx, ocr_nn_conv_transpose2d_backward(ctx, x, w, dy, p, dx, dw, db));
    } else {
        OCR_CHECK_OK(ctx, ocr_nn_conv2d_forward(ctx, x, w, b, p, y));
        OCR_CHECK_OK(ctx, ocr_nn_conv2d_backward(ctx, x, w, dy, p, dx, dw, db));
    }
    expect_close(fc, y, "y", OUT_TOL);
    expect_close(fc, dx, "dx", GRAD_TOL);
    expect_close(fc, dw, "dw", GRAD_TOL);
    if (b) expect_close(fc, db, "db", GRAD_TOL);
}
static void conv2d_case(fcase *fc) { conv_case(fc, 0); }
static void conv_transpose2d_case(fcase *fc) { conv_case(fc, 1); }
static void test_conv2d_parity(void) { for_each_case("conv2d", conv2d_case); }
static void test_conv_transpose2d_parity(void) { for_each_case("conv_transpose2d", conv_transpose2d_case); }

static void batchnorm2d_case(fcase *fc) {
    ocr_ctx *ctx = fc->ctx;
    int training = fc_meta(fc, "training") != 0.0;
    float momentum = (float)fc_meta(fc, "momentum"), eps = (float)fc_meta(fc, "eps");
    ocr_tensor *x = fc_in(fc, "x"), *gamma = fc_in(fc, "gamma"), *beta = fc_in(fc, "beta"), *dy = fc_in(fc, "dy");
    ocr_tensor *rm = fc_in(fc, "running_mean"), *rv = fc_in(fc, "running_var");
    ocr_tensor *sm = fc_out(fc, "save_mean", gamma->shape), *si = fc_out(fc, "save_invstd", gamma->shape);
    ocr_tensor *y = fc_out(fc, "y", x->shape), *dx = fc_out(fc, "dx", x->shape);
    ocr_tensor *dg = fc_out(fc, "dgamma", gamma->shape), *db = fc_out(fc, "dbeta", gamma->shape);
    OCR_CHECK_OK(ctx, ocr_nn_batchnorm2d_forward(ctx, x, gamma, beta, rm, rv, training, momentum, eps, sm, si, y));
    OCR_CHECK_OK(ctx, ocr_nn_batchnorm2d_backward(ctx, x, gamma, sm, si, dy, training, dx, dg, db));
    expect_close(fc, y, "y", OUT_TOL);
    /* momentum 0.1 and the unbiased batch variance, as torch */
    expect_close(fc, rm, "running_mean_out", OUT_TOL);
    expect_close(fc, rv, "running_var_out", OUT_TOL);
    expect_close(fc, dx, "dx", GRAD_TOL);
    expect_close(fc, dg, "dgamma", GRAD_TOL);
    expect_close(fc, db, "dbeta", GRAD_TOL);
}
static void test_batchnorm2d_parity(void) { for_each_case("batchnorm2d", batchnorm2d_case); }

static void relu_case(fcase *fc) {
    ocr_tensor *x = fc_in(fc, "x"), *dy = fc_in(fc, "dy"), *y = fc_out(fc, "y", x->shape), *dx = fc_out(fc, "dx", x->shape);
    OCR_CHECK_OK(fc->ctx, ocr_nn_relu_forward(fc->ctx, x, y));
    OCR_CHECK_OK(fc->ctx, ocr_nn_relu_backward(fc->ctx, y, dy, dx));
    expect_close(fc, y, "y", OUT_TOL);
    expect_close(fc, dx, "dx", GRAD_TOL);
}
static void sigmoid_case(fcase *fc) {
    ocr_tensor *x = fc_in(fc, "x"), *dy = fc_in(fc, "dy"), *y = fc_out(fc, "y", x->shape), *dx = fc_out(fc, "dx", x->shape);
    OCR_CHECK_OK(fc->ctx, ocr_nn_sigmoid_forward(fc->ctx, x, y));
    OCR_CHECK_OK(fc->ctx, ocr_nn_sigmoid_backward(fc->ctx, y, dy, dx));
    expect_close(fc, y, "y", OUT_TOL);
    expect_close(fc, dx, "dx", GRAD_TOL);
}
static void add_case(fcase *fc) {
    ocr_tensor *a = fc_in(fc, "a"), *b = fc_in(fc, "b"), *dy = fc_in(fc, "dy"), *y = fc_out(fc, "y", a->shape);
    ocr_tensor *da = fc_out(fc, "da", a->shape), *db = fc_out(fc, "db", b->shape);
    OCR_CHECK_OK(fc->ctx, ocr_nn_add_forward(fc->ctx, a, b, y));
    OCR_CHECK_OK(fc->ctx, ocr_nn_add_backward(fc->ctx, dy, da, db));
    expect_close(fc, y, "y", OUT_TOL);
    expect_close(fc, da, "da", GRAD_TOL);
    expect_close(fc, db, "db", GRAD_TOL);
}
static void test_pointwise_parity(void) {
    for_each_case("relu", relu_case);
    for_each_case("sigmoid", sigmoid_case);
    for_each_case("add", add_case);
}

static void maxpool2d_case(fcase *fc) {
    ocr_ctx *ctx = fc->ctx;
    int kernel = (int)fc_meta(fc, "kernel"), stride = (int)fc_meta(fc, "stride"), pad = (int)fc_meta(fc, "pad");
    ocr_tensor *x = fc_in(fc, "x"), *dy = fc_in(fc, "dy"), *ref_idx = fc_in(fc, "argmax");
    ocr_tensor *y = fc_out(fc, "y", dy->shape), *dx = fc_out(fc, "dx", x->shape), *idx = fc_slot(fc);
    OCR_CHECK_OK(ctx, ocr_tensor_alloc(ctx, idx, "argmax", OCR_I32, OCR_DEVICE_CPU, dy->shape));
    OCR_CHECK_OK(ctx, ocr_nn_maxpool2d_forward(ctx, x, kernel, stride, pad, y, idx));
    OCR_CHECK_OK(ctx, ocr_nn_maxpool2d_backward(ctx, dy, idx, dx));
    expect_close(fc, y, "y", OUT_TOL);
    expect_close(fc, dx, "dx", GRAD_TOL);
    /* the winners are PyTorch's return_indices, h*W+w in each plane */
    if (idx->data && ref_idx->data && ocr_shape_equal(idx->shape, ref_idx->shape))
        OCR_CHECK_MSG(memcmp(idx->data, ref_idx->data, ocr_tensor_bytes(idx)) == 0, "maxpool2d case%d: argmax differs from PyTorch's indices",
                      fc->k);
    else
        OCR_CHECK_MSG(0, "maxpool2d case%d: argmax reference missing or of another shape", fc->k);
}
static void upsample_case(fcase *fc) {
    int factor = (int)fc_meta(fc, "factor");
    ocr_tensor *x = fc_in(fc, "x"), *dy = fc_in(fc, "dy"), *y = fc_out(fc, "y", dy->shape), *dx = fc_out(fc, "dx", x->shape);
    OCR_CHECK_OK(fc->ctx, ocr_nn_upsample_nearest_forward(fc->ctx, x, factor, y));
    OCR_CHECK_OK(fc->ctx, ocr_nn_upsample_nearest_backward(fc->ctx, dy, factor, dx));
    expect_close(fc, y, "y", OUT_TOL);
    expect_close(fc, dx, "dx", GRAD_TOL);
}
static void concat_case(fcase *fc) {
    int parts = (int)fc_meta(fc, "parts"), i;
    const ocr_tensor *xs[8];
    ocr_tensor *dxs[8], *dy = fc_in(fc, "dy"), *y = fc_out(fc, "y", dy->shape);
    char name[16];
    if (parts < 1 || parts > 8) { OCR_CHECK_MSG(0, "concat case%d: %d parts", fc->k, parts); return; }
    for (i = 0; i < parts; i++) {
        snprintf(name, sizeof name, "x%d", i);
        xs[i] = fc_in(fc, name);
        snprintf(name, sizeof name, "dx%d", i);
        dxs[i] = fc_out(fc, name, xs[i]->shape);
    }
    OCR_CHECK_OK(fc->ctx, ocr_nn_concat_forward(fc->ctx, xs, parts, y));
    OCR_CHECK_OK(fc->ctx, ocr_nn_concat_backward(fc->ctx, dy, dxs, parts));
    expect_close(fc, y, "y", OUT_TOL);
    for (i = 0; i < parts; i++) {
        snprintf(name, sizeof name, "dx%d", i);
        expect_close(fc, dxs[i], name, GRAD_TOL);
    }
}
static void test_pool_upsample_concat_parity(void) {
    for_each_case("maxpool2d", maxpool2d_case);
    for_each_case("upsample_nearest", upsample_case);
    for_each_case("concat", concat_case);
}

/* ---------------------------------------------------------------- clipping, schedule */

static void clip_case(fcase *fc) {
    ocr_ctx *ctx = fc->ctx;
    ocr_params P;
    int idx[3], ibuf, i;
    float norm = -1.0f;
    char name[32];
    ocr_params_init(&P);
    for (i = 0; i < 3; i++) {
        ocr_tensor *g;
        snprintf(name, sizeof name, "g%d", i);
        g = fc_in(fc, name);
        OCR_CHECK_OK(ctx, ocr_params_add(ctx, &P, name, g->shape, 1, &idx[i]));
        /* a buffer between the trainable tensors: its gradient must neither count nor be scaled */
        if (i == 0) OCR_CHECK_OK(ctx, ocr_params_add(ctx, &P, "buffer", ocr_shape1(5), 0, &ibuf));
    }
    OCR_CHECK_OK(ctx, ocr_params_alloc(ctx, &P));
    if (ocr_test__case_failed) { ocr_params_free(&P); return; }
    for (i = 0; i < 3; i++) {
        ocr_tensor gv = ocr_params_grad(&P, idx[i]);
        snprintf(name, sizeof name, "g%d", i);
        OCR_CHECK_OK(ctx, ocr_tensor_copy(ctx, &gv, fc_in(fc, name)));
    }
    {
        ocr_tensor bg = ocr_params_grad(&P, ibuf);
        OCR_CHECK_OK(ctx, ocr_tensor_fill(ctx, &bg, 100.0));
    }
    OCR_CHECK_OK(ctx, ocr_clip_grad_norm(ctx, &P, (float)fc_meta(fc, "max_norm"), &norm));
    {
        ocr_tensor nt = ocr_tensor_f32("norm", ocr_shape1(1), &norm), bg = ocr_params_grad(&P, ibuf);
        expect_close(fc, &nt, "norm", OUT_TOL);
        for (i = 0; i < 5; i++) OCR_CHECK(((const float *)bg.data)[i] == 100.0f);
    }
    for (i = 0; i < 3; i++) {
        ocr_tensor gv = ocr_params_grad(&P, idx[i]);
        snprintf(name, sizeof name, "clipped%d", i);
        expect_close(fc, &gv, name, OUT_TOL);
    }
    ocr_params_free(&P);
}

static void test_clip_grad_norm(void) {
    ocr_ctx ctx;
    ocr_params P;
    int i;
    for_each_case("clip_grad_norm", clip_case);
    /* a non-finite gradient is an error naming the parameter */
    if (!ctx_variant(&ctx, 0)) return;
    ocr_params_init(&P);
    OCR_CHECK_OK(&ctx, ocr_params_add(&ctx, &P, "head.weight", ocr_shape2(2, 3), 1, &i));
    OCR_CHECK_OK(&ctx, ocr_params_alloc(&ctx, &P));
    if (P.allocated) {
        P.grad[4] = INFINITY;
        OCR_CHECK_ERR(&ctx, ocr_clip_grad_norm(&ctx, &P, 1.0f, NULL), OCR_ENONFINITE, "head.weight.grad");
    }
    ocr_params_free(&P);
    ocr_ctx_free(&ctx);
}

/* The weight average: decay 0 copies, then avg = d avg + (1 - d) value on every entry (the BN-like buffer too),
   against hand-computed values; a decay outside [0, 1] or no buffer is an error. */
static void test_params_ema(void) {
    ocr_ctx ctx;
    ocr_params P;
    float avg[5];
    int i;
    if (!ctx_variant(&ctx, 0)) return;
    ocr_params_init(&P);
    OCR_CHECK_OK(&ctx, ocr_params_add(&ctx, &P, "w", ocr_shape1(3), 1, &i));
    OCR_CHECK_OK(&ctx, ocr_params_add(&ctx, &P, "running_mean", ocr_shape1(2), 0, &i));
    OCR_CHECK_OK(&ctx, ocr_params_alloc(&ctx, &P));
    if (P.allocated && P.numel == 5) {
        static const float first[5] = {4, -8, 0.5f, 100, -1}, second[5] = {8, 0, 0.5f, 0, 3}, want[5] = {5, -6, 0.5f, 75, 0};
        memcpy(P.data, first, sizeof first);
        for (i = 0; i < 5; i++) avg[i] = NAN; /* decay 0 replaces whatever was there */
        OCR_CHECK_OK(&ctx, ocr_params_ema(&ctx, avg, &P, 0.0f));
        OCR_CHECK(memcmp(avg, first, sizeof first) == 0);
        memcpy(P.data, second, sizeof second);
        OCR_CHECK_OK(&ctx, ocr_params_ema(&ctx, avg, &P, 0.75f));
        for (i = 0; i < 5; i++) OCR_CHECK_MSG(avg[i] == want[i], "avg[%d] = %g, expected %g", i, (double)avg[i], (double)want[i]);
        OCR_CHECK_ERR(&ctx, ocr_params_ema(&ctx, avg, &P, 1.5f), OCR_EINVAL, "decay 1.5 outside [0, 1]");
        OCR_CHECK_ERR(&ctx, ocr_params_ema(&ctx, avg, &P, NAN), OCR_EINVAL, "outside [0, 1]");
        OCR_CHECK_ERR(&ctx, ocr_params_ema(&ctx, NULL, &P, 0.5f), OCR_EINVAL, "no average buffer");
    }
    ocr_params_free(&P);
    ocr_ctx_free(&ctx);
}

static void test_lr_poly(void) {
    static const struct { long long step, total; double power; } c[] = {
        {0, 100, 0.9}, {1, 100, 0.9}, {50, 100, 0.9}, {99, 100, 0.9}, {100, 100, 0.9}, {250, 100, 0.9},
        {-5, 100, 0.9}, {7, 1200, 2.0}, {3, 10, 1.0}, {5, 0, 0.9}};
    int i;
    for (i = 0; i < (int)(sizeof c / sizeof c[0]); i++) {
        double base = 0.007, expect;
        float got = ocr_lr_poly((float)base, c[i].step, c[i].total, (float)c[i].power);
        if (c[i].total <= 0 || c[i].step >= c[i].total) expect = 0.0;
        else expect = base * pow(1.0 - (double)(c[i].step < 0 ? 0 : c[i].step) / (double)c[i].total, c[i].power);
        OCR_CHECK_MSG(fabs(got - expect) <= 1e-6 * base, "ocr_lr_poly(step %lld, total %lld, power %g) = %.9g, expected %.9g", c[i].step,
                      c[i].total, c[i].power, got, expect);
    }
}

/* ---------------------------------------------------------------- 3-step training runs */

/* conv3x3 (no bias) -> BN (training) -> ReLU -> ConvTranspose k2 s2 (bias); loss 0.5 * mean((y - target)^2) */
enum { P_CONV_W, P_BN_W, P_BN_B, P_BN_RM, P_BN_RV, P_DECONV_W, P_DECONV_B, P_COUNT };
static const char *const net_names[P_COUNT] = {"conv1.weight", "bn.weight", "bn.bias", "bn.running_mean", "bn.running_var",
                                               "deconv.weight", "deconv.bias"};

typedef struct {
    ocr_params P;
    ocr_tensor h1, h2, h3, y, dh1, dh2, dh3, dy, save_mean, save_invstd;
} tiny_net;

static int net_init(ocr_ctx *ctx, tiny_net *net, ocr_shape xs) {
    static const int64_t shapes[P_COUNT][5] = {{4, 4, 3, 3, 3}, {1, 4}, {1, 4}, {1, 4}, {1, 4}, {4, 4, 2, 2, 2}, {1, 2}};
    ocr_safetensors st;
    ocr_shape hs = ocr_shape4(xs.dim[0], 4, xs.dim[2], xs.dim[3]), ys = ocr_shape4(xs.dim[0], 2, xs.dim[2] * 2, xs.dim[3] * 2);
    int i, rc = OCR_OK;
    memset(net, 0, sizeof *net);
    ocr_params_init(&net->P);
    for (i = 0; i < P_COUNT && !rc; i++) {
        ocr_shape s = shapes[i][0] == 4 ? ocr_shape4(shapes[i][1], shapes[i][2], shapes[i][3], shapes[i][4]) : ocr_shape1(shapes[i][1]);
        rc = ocr_params_add(ctx, &net->P, net_names[i], s, i != P_BN_RM && i != P_BN_RV, NULL);
    }
    if (rc || (rc = ocr_params_alloc(ctx, &net->P))) return rc;
    if ((rc = ocr_safetensors_open(ctx, &st, FIXTURES "optim_init.safetensors"))) return rc;
    rc = ocr_params_load(ctx, &net->P, &st, NULL, 0);
    ocr_safetensors_close(&st);
    if (rc || (rc = ocr_tensor_alloc(ctx, &net->h1, "h1", OCR_F32, OCR_DEVICE_CPU, hs)) ||
        (rc = ocr_tensor_alloc(ctx, &net->h2, "h2", OCR_F32, OCR_DEVICE_CPU, hs)) ||
        (rc = ocr_tensor_alloc(ctx, &net->h3, "h3", OCR_F32, OCR_DEVICE_CPU, hs)) ||
        (rc = ocr_tensor_alloc(ctx, &net->dh1, "dh1", OCR_F32, OCR_DEVICE_CPU, hs)) ||
        (rc = ocr_tensor_alloc(ctx, &net->dh2, "dh2", OCR_F32, OCR_DEVICE_CPU, hs)) ||
        (rc = ocr_tensor_alloc(ctx, &net->dh3, "dh3", OCR_F32, OCR_DEVICE_CPU, hs)) ||
        (rc = ocr_tensor_alloc(ctx, &net->y, "y", OCR_F32, OCR_DEVICE_CPU, ys)) ||
        (rc = ocr_tensor_alloc(ctx, &net->dy, "dy", OCR_F32, OCR_DEVICE_CPU, ys)) ||
        (rc = ocr_tensor_alloc(ctx, &net->save_mean, "save_mean", OCR_F32, OCR_DEVICE_CPU, ocr_shape1(4))) ||
        (rc = ocr_tensor_alloc(ctx, &net->save_invstd, "save_invstd", OCR_F32, OCR_DEVICE_CPU, ocr_shape1(4))))
        return rc;
    return OCR_OK;
}

static void net_free(tiny_net *net) {
    ocr_tensor *t[] = {&net->h1, &net->h2, &net->h3, &net->y, &net->dh1, &net->dh2, &net->dh3, &net->dy, &net->save_mean, &net->save_invstd};
    int i;
    for (i = 0; i < (int)(sizeof t / sizeof t[0]); i++) ocr_tensor_free(t[i]);
    ocr_params_free(&net->P);
}

/* Forward and backward into P.grad (zeroed first); returns the status, *loss the loss. */
static int net_step(ocr_ctx *ctx, tiny_net *net, const ocr_tensor *x, const ocr_tensor *target, double *loss) {
    ocr_params *P = &net->P;
    ocr_tensor w1 = ocr_params_value(P, P_CONV_W), g = ocr_params_value(P, P_BN_W), b = ocr_params_value(P, P_BN_B);
    ocr_tensor rm = ocr_params_value(P, P_BN_RM), rv = ocr_params_value(P, P_BN_RV);
    ocr_tensor wd = ocr_params_value(P, P_DECONV_W), bd = ocr_params_value(P, P_DECONV_B);
    ocr_tensor dw1 = ocr_params_grad(P, P_CONV_W), dg = ocr_params_grad(P, P_BN_W), db = ocr_params_grad(P, P_BN_B);
    ocr_tensor dwd = ocr_params_grad(P, P_DECONV_W), dbd = ocr_params_grad(P, P_DECONV_B);
    ocr_conv_params same = ocr_conv_params_make(1, 1, 1, 1), up = ocr_conv_params_make(2, 0, 1, 1);
    int64_t i, n = ocr_tensor_numel(&net->y);
    double s = 0.0;
    int rc;
    if ((rc = ocr_nn_conv2d_forward(ctx, x, &w1, NULL, same, &net->h1)) ||
        (rc = ocr_nn_batchnorm2d_forward(ctx, &net->h1, &g, &b, &rm, &rv, 1, 0.1f, 1e-5f, &net->save_mean, &net->save_invstd, &net->h2)) ||
        (rc = ocr_nn_relu_forward(ctx, &net->h2, &net->h3)) || (rc = ocr_nn_conv_transpose2d_forward(ctx, &net->h3, &wd, &bd, up, &net->y)))
        return rc;
    for (i = 0; i < n; i++) {
        float d = ((const float *)net->y.data)[i] - ((const float *)target->data)[i];
        s += (double)d * d;
        ((float *)net->dy.data)[i] = d / (float)n;
    }
    *loss = 0.5 * s / (double)n;
    ocr_params_zero_grad(P);
    ocr_tensor_zero(ctx, &net->dh1); ocr_tensor_zero(ctx, &net->dh2); ocr_tensor_zero(ctx, &net->dh3);
    if ((rc = ocr_nn_conv_transpose2d_backward(ctx, &net->h3, &wd, &net->dy, up, &net->dh3, &dwd, &dbd)) ||
        (rc = ocr_nn_relu_backward(ctx, &net->h3, &net->dh3, &net->dh2)) ||
        (rc = ocr_nn_batchnorm2d_backward(ctx, &net->h1, &g, &net->save_mean, &net->save_invstd, &net->dh2, 1, &net->dh1, &dg, &db)) ||
        (rc = ocr_nn_conv2d_backward(ctx, x, &w1, &net->dh1, same, NULL, &dw1, NULL)))
        return rc;
    return OCR_OK;
}

static void optim_run(ocr_ctx *ctx, ocr_safetensors *st, const char *run, ocr_optim_config cfg) {
    tiny_net net;
    ocr_optimizer opt;
    ocr_tensor x, target, ref;
    float *prev = NULL;
    char key[OCR_NAME_MAX];
    const char *lr_s;
    float lr;
    int step, i;
    memset(&opt, 0, sizeof opt);
    snprintf(key, sizeof key, "%s.lr", run);
    lr_s = ocr_safetensors_meta(st, key);
    OCR_CHECK_MSG(lr_s != NULL, "optim fixture has no %s", key);
    lr = lr_s ? (float)strtod(lr_s, NULL) : 0.0f;
    OCR_CHECK_OK(ctx, ocr_safetensors_read(ctx, st, "x", &x));
    OCR_CHECK_OK(ctx, ocr_safetensors_read(ctx, st, "target", &target));
    OCR_CHECK_OK(ctx, net_init(ctx, &net, x.shape));
    OCR_CHECK_OK(ctx, ocr_optim_init(ctx, &opt, &net.P, cfg));
    if (ocr_test__case_failed) goto done;
    prev = (float *)malloc(net.P.numel * sizeof(float));
    for (step = 1; step <= 3; step++) {
        double loss = 0.0;
        float lossf;
        char what[64];
        snprintf(what, sizeof what, "%s step %d", run, step);
        memcpy(prev, net.P.data, net.P.numel * sizeof(float));
        OCR_CHECK_OK(ctx, net_step(ctx, &net, &x, &target, &loss));
        lossf = (float)loss;
        snprintf(key, sizeof key, "%s.loss%d", run, step);
        if (ocr_safetensors_read(ctx, st, key, &ref) == OCR_OK) {
            ocr_tensor lt = ocr_tensor_f32(key, ocr_shape1(1), &lossf);
            expect_close_to(what, &lt, &ref, OUT_TOL);
            ocr_tensor_free(&ref);
        } else OCR_CHECK_MSG(0, "%s", ocr_ctx_last_error(ctx));
        if (step == 1)
            for (i = 0; i < P_COUNT; i++) {
                ocr_tensor g = ocr_params_grad(&net.P, i);
                snprintf(key, sizeof key, "grad1.%s", net_names[i]);
                if (!net.P.info[i].trainable) continue;
                if (ocr_safetensors_read(ctx, st, key, &ref) == OCR_OK) { expect_close_to(what, &g, &ref, GRAD_TOL); ocr_tensor_free(&ref); }
                else OCR_CHECK_MSG(0, "%s", ocr_ctx_last_error(ctx));
            }
        OCR_CHECK_OK(ctx, ocr_optim_step(ctx, &opt, &net.P, lr));
        for (i = 0; i < P_COUNT; i++) {
            ocr_tensor p = ocr_params_value(&net.P, i);
            snprintf(key, sizeof key, "%s.step%d.%s", run, step, net_names[i]);
            if (ocr_safetensors_read(ctx, st, key, &ref) != OCR_OK) { OCR_CHECK_MSG(0, "%s", ocr_ctx_last_error(ctx)); continue; }
            expect_close_to(what, &p, &ref, OUT_TOL);
            if (net.P.info[i].trainable && ocr_shape_equal(p.shape, ref.shape)) {
                /* the update itself, which the parameter comparison dilutes by the parameter's size */
                int64_t k, n = ocr_tensor_numel(&p);
                const float *pp = prev + net.P.info[i].offset;
                float *got = (float *)malloc(sizeof(float) * (size_t)n), *want = (float *)malloc(sizeof(float) * (size_t)n);
                ocr_tensor pv;
                for (k = 0; k < n; k++) { got[k] = ((const float *)p.data)[k] - pp[k]; want[k] = ((const float *)ref.data)[k] - pp[k]; }
                pv = ocr_tensor_f32(net_names[i], p.shape, want);
                p.data = got;
                snprintf(key, sizeof key, "%s update", net_names[i]);
                ocr_tensor_set_name(&p, key);
                expect_close_to(what, &p, &pv, GRAD_TOL);
                free(got); free(want);
            }
            ocr_tensor_free(&ref);
        }
    }
done:
    free(prev);
    ocr_optim_free(&opt);
    net_free(&net);
    ocr_tensor_free(&x);
    ocr_tensor_free(&target);
}

static void test_optim_parity(void) {
    int variant;
    for (variant = 0; variant < N_VARIANTS; variant++) {
        ocr_ctx ctx;
        ocr_safetensors st;
        if (!ctx_variant(&ctx, variant)) return;
        if (ocr_safetensors_open(&ctx, &st, FIXTURES "optim.safetensors") == OCR_OK) {
            optim_run(&ctx, &st, "sgd", ocr_optim_sgd(0.9f, 1e-4f, 0));
            optim_run(&ctx, &st, "sgd_nesterov", ocr_optim_sgd(0.9f, 1e-4f, 1));
            optim_run(&ctx, &st, "adamw", ocr_optim_adamw(0.9f, 0.999f, 1e-8f, 1e-2f));
            ocr_safetensors_close(&st);
        } else OCR_CHECK_MSG(0, "%s (run /usr/bin/python3 tools/make_fixtures.py)", ocr_ctx_last_error(&ctx));
        ocr_ctx_free(&ctx);
    }
}

/* ---------------------------------------------------------------- ocr_params */

static int all_equal(const float *p, int64_t n, float v) {
    int64_t i;
    for (i = 0; i < n; i++) if (p[i] != v) return 0;
    return 1;
}

/* Registers the three parameters of the save/load tests under prefix and allocates them. */
static void params_make(ocr_ctx *ctx, ocr_params *P, const char *prefix, int with_extra) {
    char name[OCR_NAME_MAX];
    ocr_params_init(P);
    snprintf(name, sizeof name, "%senc.conv.weight", prefix);
    OCR_CHECK_OK(ctx, ocr_params_add(ctx, P, name, ocr_shape4(2, 3, 3, 3), 1, NULL));
    snprintf(name, sizeof name, "%senc.bn.running_mean", prefix);
    OCR_CHECK_OK(ctx, ocr_params_add(ctx, P, name, ocr_shape1(2), 0, NULL));
    snprintf(name, sizeof name, "%shead.bias", prefix);
    OCR_CHECK_OK(ctx, ocr_params_add(ctx, P, name, ocr_shape1(5), 1, NULL));
    if (with_extra) OCR_CHECK_OK(ctx, ocr_params_add(ctx, P, "extra.weight", ocr_shape1(3), 1, NULL));
    OCR_CHECK_OK(ctx, ocr_params_alloc(ctx, P));
}

static void test_params(void) {
    ocr_ctx ctx;
    ocr_params P, Q;
    ocr_safetensors st;
    char dir[] = "/tmp/ocr_test_nn_params_XXXXXX", path[128];
    const char *mk[1] = {"epoch"}, *mv[1] = {"3"};
    int i, idx;
    size_t k;
    if (!ctx_variant(&ctx, 0)) return;
    OCR_CHECK(mkdtemp(dir) != NULL);
    snprintf(path, sizeof path, "%s/params.safetensors", dir);

    /* registration, lookup and views */
    params_make(&ctx, &P, "", 0);
    if (!P.allocated) goto done;
    OCR_CHECK(P.count == 3);
    OCR_CHECK(ocr_params_find(&P, "enc.conv.weight") == 0 && ocr_params_find(&P, "enc.bn.running_mean") == 1);
    OCR_CHECK(ocr_params_find(&P, "head.bias") == 2 && ocr_params_find(&P, "head") == -1);
    OCR_CHECK(ocr_params_trainable_count(&P) == 54 + 5);
    OCR_CHECK_ERR(&ctx, ocr_params_add(&ctx, &P, "late", ocr_shape1(1), 1, &idx), OCR_ESTATE, "late");
    for (i = 0; i < P.count; i++) {
        ocr_tensor v = ocr_params_value(&P, i), g = ocr_params_grad(&P, i);
        char gname[OCR_NAME_MAX + 8];
        snprintf(gname, sizeof gname, "%s.grad", P.info[i].name);
        OCR_CHECK(ocr_shape_equal(v.shape, P.info[i].shape) && v.dtype == OCR_F32 && !v.owns_data);
        OCR_CHECK((float *)v.data == P.data + P.info[i].offset && (float *)g.data == P.grad + P.info[i].offset);
        OCR_CHECK(((uintptr_t)v.data & 63) == 0 && ((uintptr_t)g.data & 63) == 0);
        OCR_CHECK(strcmp(v.name, P.info[i].name) == 0 && strcmp(g.name, gname) == 0);
        OCR_CHECK(all_equal((const float *)v.data, ocr_tensor_numel(&v), 0.0f));
        OCR_CHECK(P.info[i].trainable == (i != 1) && P.info[i].decay == (i != 1));
    }
    for (k = 0; k < P.numel; k++) { P.data[k] = (float)k * 0.25f - 3.0f; P.grad[k] = 1.0f; }
    ocr_params_zero_grad(&P);
    OCR_CHECK(all_equal(P.grad, (int64_t)P.numel, 0.0f));
    {
        ocr_params D;
        ocr_params_init(&D);
        OCR_CHECK_OK(&ctx, ocr_params_add(&ctx, &D, "a", ocr_shape1(2), 1, NULL));
        OCR_CHECK_ERR(&ctx, ocr_params_add(&ctx, &D, "a", ocr_shape1(3), 1, NULL), OCR_EINVAL, "'a' is already registered");
        ocr_params_free(&D);
    }

    /* save, then load back: strict, with a prefix, with missing and unexpected tensors */
    OCR_CHECK_OK(&ctx, ocr_params_save(&ctx, &P, path, mk, mv, 1));
    if (ocr_safetensors_open(&ctx, &st, path) != OCR_OK) { OCR_CHECK_MSG(0, "%s", ocr_ctx_last_error(&ctx)); goto done; }
    OCR_CHECK(st.n_entries == 3);
    OCR_CHECK(ocr_safetensors_meta(&st, "epoch") && strcmp(ocr_safetensors_meta(&st, "epoch"), "3") == 0);

    params_make(&ctx, &Q, "", 0);
    OCR_CHECK_OK(&ctx, ocr_params_load(&ctx, &Q, &st, NULL, 0));
    for (i = 0; i < Q.count; i++) {
        ocr_tensor a = ocr_params_value(&P, i), b = ocr_params_value(&Q, i);
        OCR_CHECK_MSG(memcmp(a.data, b.data, ocr_tensor_bytes(&a)) == 0, "'%s' differs after save and load", a.name);
    }
    ocr_params_free(&Q);

    params_make(&ctx, &Q, "model.", 0);
    OCR_CHECK_OK(&ctx, ocr_params_load(&ctx, &Q, &st, "model.", 0));
    for (i = 0; i < Q.count; i++) {
        ocr_tensor a = ocr_params_value(&P, i), b = ocr_params_value(&Q, i);
        OCR_CHECK_MSG(memcmp(a.data, b.data, ocr_tensor_bytes(&a)) == 0, "'%s' differs after a prefixed load", b.name);
    }
    ocr_params_free(&Q);

    /* a parameter the file lacks: strict load refuses and changes nothing; ALLOW_MISSING leaves it alone */
    params_make(&ctx, &Q, "", 1);
    if (Q.allocated) {
        for (k = 0; k < Q.numel; k++) Q.data[k] = 7.0f;
        OCR_CHECK_ERR(&ctx, ocr_params_load(&ctx, &Q, &st, NULL, 0), OCR_ENOTFOUND, "'extra.weight'");
        OCR_CHECK_MSG(all_equal(Q.data, (int64_t)Q.numel, 7.0f), "a refused load changed parameters");
        OCR_CHECK_OK(&ctx, ocr_params_load(&ctx, &Q, &st, NULL, OCR_LOAD_ALLOW_MISSING));
        OCR_CHECK(all_equal(Q.data + Q.info[3].offset, 3, 7.0f));
        OCR_CHECK(memcmp(Q.data + Q.info[2].offset, P.data + P.info[2].offset, 5 * sizeof(float)) == 0);
    }
    ocr_params_free(&Q);

    /* a tensor of the file no parameter takes: strict refuses, ALLOW_UNEXPECTED loads the rest */
    ocr_params_init(&Q);
    OCR_CHECK_OK(&ctx, ocr_params_add(&ctx, &Q, "enc.conv.weight", ocr_shape4(2, 3, 3, 3), 1, NULL));
    OCR_CHECK_OK(&ctx, ocr_params_add(&ctx, &Q, "head.bias", ocr_shape1(5), 1, NULL));
    OCR_CHECK_OK(&ctx, ocr_params_alloc(&ctx, &Q));
    if (Q.allocated) {
        OCR_CHECK_ERR(&ctx, ocr_params_load(&ctx, &Q, &st, NULL, 0), OCR_ENOTFOUND, "'enc.bn.running_mean'");
        OCR_CHECK_MSG(all_equal(Q.data, (int64_t)Q.numel, 0.0f), "a refused load changed parameters");
        OCR_CHECK_OK(&ctx, ocr_params_load(&ctx, &Q, &st, NULL, OCR_LOAD_ALLOW_UNEXPECTED));
        OCR_CHECK(memcmp(Q.data + Q.info[1].offset, P.data + P.info[2].offset, 5 * sizeof(float)) == 0);
    }
    ocr_params_free(&Q);

    /* a tensor of another shape */
    ocr_params_init(&Q);
    OCR_CHECK_OK(&ctx, ocr_params_add(&ctx, &Q, "head.bias", ocr_shape1(6), 1, NULL));
    OCR_CHECK_OK(&ctx, ocr_params_alloc(&ctx, &Q));
    if (Q.allocated) OCR_CHECK_ERR(&ctx, ocr_params_load(&ctx, &Q, &st, NULL, OCR_LOAD_ALLOW_UNEXPECTED), OCR_ESHAPE, "head.bias");
    ocr_params_free(&Q);
    ocr_safetensors_close(&st);
done:
    ocr_params_free(&P);
    remove(path);
    rmdir(dir);
    ocr_ctx_free(&ctx);
}

/* ---------------------------------------------------------------- error paths */

#define SENTINEL 7.0f
typedef struct { ocr_ctx ctx; ocr_tensor t[64]; int n; } tpool;

/* An F32 tensor filled with SENTINEL, so a refused call can be seen to have written nothing. */
static ocr_tensor *tp_slot(tpool *p) {
    if (p->n == (int)(sizeof p->t / sizeof p->t[0])) { fprintf(stderr, "test_nn_parity: raise the tpool size\n"); exit(2); }
    return &p->t[p->n++];
}

static ocr_tensor *tp(tpool *p, const char *name, ocr_shape s) {
    ocr_tensor *t = tp_slot(p);
    OCR_CHECK_OK(&p->ctx, ocr_tensor_alloc(&p->ctx, t, name, OCR_F32, OCR_DEVICE_CPU, s));
    OCR_CHECK_OK(&p->ctx, ocr_tensor_fill(&p->ctx, t, SENTINEL));
    return t;
}

static int untouched(const ocr_tensor *t) {
    return t->dtype == OCR_F32 ? all_equal((const float *)t->data, ocr_tensor_numel(t), SENTINEL) : 1;
}

/* call fails with code, naming fn and the tensor, and leaves out0 and out1 as they were */
#define EXPECT_REFUSED(p, call, code, fn, tensor, out0, out1) do { \
    OCR_CHECK_ERR(&(p)->ctx, call, code, fn); \
    OCR_CHECK_MSG(strstr(ocr_ctx_last_error(&(p)->ctx), tensor) != NULL, "message \"%s\" does not name %s", \
                  ocr_ctx_last_error(&(p)->ctx), tensor); \
    OCR_CHECK_MSG(untouched(out0) && untouched(out1), "%s wrote into its outputs before refusing", fn); } while (0)

static void test_error_paths(void) {
    tpool p;
    ocr_conv_params c1 = ocr_conv_params_make(1, 1, 1, 1), up = ocr_conv_params_make(2, 0, 1, 1);
    ocr_tensor *x, *w, *b, *y, *dx, *dw, *db, *bad, *rm, *rv, *sm, *si, *g, *be, *idx;
    const ocr_tensor *parts[3];
    ocr_tensor *dparts[3];
    int i;
    memset(&p, 0, sizeof p);
    if (!ctx_variant(&p.ctx, 0)) return;

    /* conv2d: x [2,3,9,11], w [4,3,3,3], b [4] -> y [2,4,9,11] */
    x = tp(&p, "x", ocr_shape4(2, 3, 9, 11)); w = tp(&p, "w", ocr_shape4(4, 3, 3, 3)); b = tp(&p, "b", ocr_shape1(4));
    y = tp(&p, "y", ocr_shape4(2, 4, 9, 11)); dx = tp(&p, "dx", x->shape); dw = tp(&p, "dw", w->shape); db = tp(&p, "db", b->shape);
    if (ocr_test__case_failed) goto done;
    bad = tp(&p, "y_bad", ocr_shape4(2, 4, 9, 10));
    EXPECT_REFUSED(&p, ocr_nn_conv2d_forward(&p.ctx, x, w, b, c1, bad), OCR_ESHAPE, "ocr_nn_conv2d_forward", "'y_bad'", bad, bad);
    bad = tp(&p, "w_bad", ocr_shape4(4, 2, 3, 3));
    EXPECT_REFUSED(&p, ocr_nn_conv2d_forward(&p.ctx, x, bad, b, c1, y), OCR_ESHAPE, "ocr_nn_conv2d_forward", "'w_bad'", y, y);
    bad = tp(&p, "b_bad", ocr_shape1(5));
    EXPECT_REFUSED(&p, ocr_nn_conv2d_forward(&p.ctx, x, w, bad, c1, y), OCR_ESHAPE, "ocr_nn_conv2d_forward", "'b_bad'", y, y);
    bad = tp(&p, "x_3d", ocr_shape3(3, 9, 11));
    EXPECT_REFUSED(&p, ocr_nn_conv2d_forward(&p.ctx, bad, w, b, c1, y), OCR_ESHAPE, "ocr_nn_conv2d_forward", "'x_3d'", y, y);
    bad = tp(&p, "dy_bad", ocr_shape4(2, 4, 9, 9));
    EXPECT_REFUSED(&p, ocr_nn_conv2d_backward(&p.ctx, x, w, bad, c1, dx, dw, db), OCR_ESHAPE, "ocr_nn_conv2d_backward", "'dy_bad'", dx, dw);
    bad = tp(&p, "dw_bad", ocr_shape4(4, 3, 3, 2));
    EXPECT_REFUSED(&p, ocr_nn_conv2d_backward(&p.ctx, x, w, y, c1, dx, bad, db), OCR_ESHAPE, "ocr_nn_conv2d_backward", "'dw_bad'", dx, db);
    bad = tp(&p, "db_bad", ocr_shape1(3));
    EXPECT_REFUSED(&p, ocr_nn_conv2d_backward(&p.ctx, x, w, y, c1, dx, dw, bad), OCR_ESHAPE, "ocr_nn_conv2d_backward", "'db_bad'", dx, dw);

    /* conv_transpose2d k2 s2: x [2,3,9,11] (as above), wt [3,2,2,2] -> [2,2,18,22] */
    w = tp(&p, "wt", ocr_shape4(3, 2, 2, 2)); dw = tp(&p, "dwt", w->shape); y = tp(&p, "yt", ocr_shape4(2, 2, 18, 22));
    bad = tp(&p, "yt_bad", ocr_shape4(2, 2, 18, 21));
    EXPECT_REFUSED(&p, ocr_nn_conv_transpose2d_forward(&p.ctx, x, w, NULL, up, bad), OCR_ESHAPE, "ocr_nn_conv_transpose2d_forward",
                   "'yt_bad'", bad, bad);
    bad = tp(&p, "wt_bad", ocr_shape4(4, 2, 2, 2));
    EXPECT_REFUSED(&p, ocr_nn_conv_transpose2d_forward(&p.ctx, x, bad, NULL, up, y), OCR_ESHAPE, "ocr_nn_conv_transpose2d_forward",
                   "'wt_bad'", y, y);
    bad = tp(&p, "dx_bad", ocr_shape4(2, 3, 9, 10));
    EXPECT_REFUSED(&p, ocr_nn_conv_transpose2d_backward(&p.ctx, x, w, y, up, bad, dw, NULL), OCR_ESHAPE, "ocr_nn_conv_transpose2d_backward",
                   "'dx_bad'", dw, bad);

    /* batchnorm2d on x [2,3,9,11]: nothing written, running statistics included */
    g = tp(&p, "gamma", ocr_shape1(3)); be = tp(&p, "beta", ocr_shape1(3)); rm = tp(&p, "running_mean", ocr_shape1(3));
    rv = tp(&p, "running_var", ocr_shape1(3)); sm = tp(&p, "save_mean", ocr_shape1(3)); si = tp(&p, "save_invstd", ocr_shape1(3));
    y = tp(&p, "y_bn", x->shape);
    bad = tp(&p, "gamma_bad", ocr_shape1(4));
    EXPECT_REFUSED(&p, ocr_nn_batchnorm2d_forward(&p.ctx, x, bad, be, rm, rv, 1, 0.1f, 1e-5f, sm, si, y), OCR_ESHAPE,
                   "ocr_nn_batchnorm2d_forward", "'gamma_bad'", y, rm);
    OCR_CHECK(untouched(rv) && untouched(sm) && untouched(si));
    bad = tp(&p, "running_var_bad", ocr_shape1(2));
    EXPECT_REFUSED(&p, ocr_nn_batchnorm2d_forward(&p.ctx, x, g, be, rm, bad, 1, 0.1f, 1e-5f, sm, si, y), OCR_ESHAPE,
                   "ocr_nn_batchnorm2d_forward", "'running_var_bad'", y, rm);
    bad = tp(&p, "dgamma_bad", ocr_shape1(2));
    EXPECT_REFUSED(&p, ocr_nn_batchnorm2d_backward(&p.ctx, x, g, sm, si, y, 1, dx, bad, be), OCR_ESHAPE, "ocr_nn_batchnorm2d_backward",
                   "'dgamma_bad'", dx, be);
    bad = tp(&p, "dx_bn_bad", ocr_shape4(2, 3, 9, 10));
    EXPECT_REFUSED(&p, ocr_nn_batchnorm2d_backward(&p.ctx, x, g, sm, si, y, 1, bad, g, be), OCR_ESHAPE, "ocr_nn_batchnorm2d_backward",
                   "'dx_bn_bad'", g, be);

    /* pointwise */
    bad = tp(&p, "y_pw_bad", ocr_shape4(2, 3, 9, 10));
    EXPECT_REFUSED(&p, ocr_nn_relu_forward(&p.ctx, x, bad), OCR_ESHAPE, "ocr_nn_relu_forward", "'y_pw_bad'", bad, bad);
    EXPECT_REFUSED(&p, ocr_nn_relu_backward(&p.ctx, x, x, bad), OCR_ESHAPE, "ocr_nn_relu_backward", "'y_pw_bad'", bad, bad);
    EXPECT_REFUSED(&p, ocr_nn_sigmoid_forward(&p.ctx, x, bad), OCR_ESHAPE, "ocr_nn_sigmoid_forward", "'y_pw_bad'", bad, bad);
    EXPECT_REFUSED(&p, ocr_nn_sigmoid_backward(&p.ctx, x, bad, dx), OCR_ESHAPE, "ocr_nn_sigmoid_backward", "'y_pw_bad'", dx, dx);
    EXPECT_REFUSED(&p, ocr_nn_add_forward(&p.ctx, x, bad, y), OCR_ESHAPE, "ocr_nn_add_forward", "'y_pw_bad'", y, y);
    EXPECT_REFUSED(&p, ocr_nn_add_backward(&p.ctx, x, dx, bad), OCR_ESHAPE, "ocr_nn_add_backward", "'y_pw_bad'", dx, bad);
    {
        ocr_tensor *h = tp_slot(&p);
        OCR_CHECK_OK(&p.ctx, ocr_tensor_alloc(&p.ctx, h, "x_f16", OCR_F16, OCR_DEVICE_CPU, x->shape));
        EXPECT_REFUSED(&p, ocr_nn_relu_forward(&p.ctx, h, y), OCR_EDTYPE, "ocr_nn_relu_forward", "'x_f16'", y, y);
    }

    /* max pooling 3x3 s2 p1: [2,3,9,11] -> [2,3,5,6] */
    y = tp(&p, "y_pool", ocr_shape4(2, 3, 5, 6));
    idx = tp_slot(&p);
    OCR_CHECK_OK(&p.ctx, ocr_tensor_alloc(&p.ctx, idx, "argmax", OCR_I32, OCR_DEVICE_CPU, y->shape));
    bad = tp(&p, "y_pool_bad", ocr_shape4(2, 3, 5, 5));
    EXPECT_REFUSED(&p, ocr_nn_maxpool2d_forward(&p.ctx, x, 3, 2, 1, bad, idx), OCR_ESHAPE, "ocr_nn_maxpool2d_forward", "'y_pool_bad'", bad, bad);
    bad = tp(&p, "argmax_f32", y->shape);
    EXPECT_REFUSED(&p, ocr_nn_maxpool2d_forward(&p.ctx, x, 3, 2, 1, y, bad), OCR_EDTYPE, "ocr_nn_maxpool2d_forward", "'argmax_f32'", y, bad);
    if (idx->data) {
        /* a corrupt argmax (the last entry out of the plane) is refused before any gradient is scattered */
        for (i = 0; i < (int)ocr_tensor_numel(idx); i++) ((int32_t *)idx->data)[i] = i % 99;
        ((int32_t *)idx->data)[ocr_tensor_numel(idx) - 1] = 99;
        EXPECT_REFUSED(&p, ocr_nn_maxpool2d_backward(&p.ctx, y, idx, dx), OCR_ERANGE, "ocr_nn_maxpool2d_backward", "'argmax'", dx, dx);
    }

    /* nearest upsampling x2: [2,3,9,11] -> [2,3,18,22] */
    y = tp(&p, "y_up", ocr_shape4(2, 3, 18, 22));
    bad = tp(&p, "y_up_bad", ocr_shape4(2, 3, 18, 21));
    EXPECT_REFUSED(&p, ocr_nn_upsample_nearest_forward(&p.ctx, x, 2, bad), OCR_ESHAPE, "ocr_nn_upsample_nearest_forward", "'y_up_bad'", bad, bad);
    bad = tp(&p, "dx_up_bad", ocr_shape4(2, 3, 9, 10));
    EXPECT_REFUSED(&p, ocr_nn_upsample_nearest_backward(&p.ctx, y, 2, bad), OCR_ESHAPE, "ocr_nn_upsample_nearest_backward", "'y_up'", bad, bad);

    /* concat of [2,3,9,11], [2,1,9,11], [2,2,9,11] -> [2,6,9,11] */
    y = tp(&p, "y_cat", ocr_shape4(2, 6, 9, 11));
    parts[0] = x; parts[1] = tp(&p, "x1", ocr_shape4(2, 1, 9, 11)); parts[2] = tp(&p, "x2_bad", ocr_shape4(2, 2, 9, 10));
    EXPECT_REFUSED(&p, ocr_nn_concat_forward(&p.ctx, parts, 3, y), OCR_ESHAPE, "ocr_nn_concat_forward", "'x2_bad'", y, y);
    parts[2] = tp(&p, "x2", ocr_shape4(2, 3, 9, 11));
    EXPECT_REFUSED(&p, ocr_nn_concat_forward(&p.ctx, parts, 3, y), OCR_ESHAPE, "ocr_nn_concat_forward", "'y_cat'", y, y);
    dparts[0] = dx; dparts[1] = tp(&p, "dx1", ocr_shape4(2, 1, 9, 11)); dparts[2] = tp(&p, "dx2_bad", ocr_shape4(2, 2, 8, 11));
    EXPECT_REFUSED(&p, ocr_nn_concat_backward(&p.ctx, y, dparts, 3), OCR_ESHAPE, "ocr_nn_concat_backward", "'dx2_bad'", dx, dparts[1]);
done:
    for (i = 0; i < p.n; i++) ocr_tensor_free(&p.t[i]);
    ocr_ctx_free(&p.ctx);
}

/* With OCR_DEBUG_CHECK_NUMERICS a NaN weight makes the forward fail naming the op and its output; without the
   flag the same call succeeds (the check is what catches it, not an accident of the data). */
static void test_check_numerics(void) {
    ocr_ctx ctx;
    ocr_tensor x, w, y, dy, dx;
    ocr_conv_params c1 = ocr_conv_params_make(1, 1, 1, 1);
    if (!ctx_variant(&ctx, 1)) return;
    OCR_CHECK_OK(&ctx, ocr_tensor_alloc(&ctx, &x, "x", OCR_F32, OCR_DEVICE_CPU, ocr_shape4(2, 3, 9, 11)));
    OCR_CHECK_OK(&ctx, ocr_tensor_alloc(&ctx, &w, "w", OCR_F32, OCR_DEVICE_CPU, ocr_shape4(4, 3, 3, 3)));
    OCR_CHECK_OK(&ctx, ocr_tensor_alloc(&ctx, &y, "y", OCR_F32, OCR_DEVICE_CPU, ocr_shape4(2, 4, 9, 11)));
    OCR_CHECK_OK(&ctx, ocr_tensor_alloc(&ctx, &dy, "dy", OCR_F32, OCR_DEVICE_CPU, y.shape));
    OCR_CHECK_OK(&ctx, ocr_tensor_alloc(&ctx, &dx, "dx", OCR_F32, OCR_DEVICE_CPU, x.shape));
    if (!ocr_test__case_failed) {
        ocr_tensor_fill_uniform(&ctx, &x, -1.0f, 1.0f);
        ocr_tensor_fill_uniform(&ctx, &w, -1.0f, 1.0f);
        ocr_tensor_fill_uniform(&ctx, &dy, -1.0f, 1.0f);
        ((float *)w.data)[5] = NAN;
        ctx.debug_flags = 0;
        OCR_CHECK_OK(&ctx, ocr_nn_conv2d_forward(&ctx, &x, &w, NULL, c1, &y));
        ctx.debug_flags = OCR_DEBUG_CHECK_NUMERICS;
        OCR_CHECK_ERR(&ctx, ocr_nn_conv2d_forward(&ctx, &x, &w, NULL, c1, &y), OCR_ENONFINITE, "ocr_nn_conv2d_forward");
        OCR_CHECK_MSG(strstr(ocr_ctx_last_error(&ctx), "'y'") && strstr(ocr_ctx_last_error(&ctx), "nan"),
                      "message \"%s\" names neither the output nor the value", ocr_ctx_last_error(&ctx));
        /* the same for a gradient: an Inf in dy reaches dx */
        ((float *)w.data)[5] = 0.5f;
        ((float *)dy.data)[17] = INFINITY;
        OCR_CHECK_ERR(&ctx, ocr_nn_conv2d_backward(&ctx, &x, &w, &dy, c1, &dx, NULL, NULL), OCR_ENONFINITE, "'dx'");
    }
    ocr_tensor_free(&x); ocr_tensor_free(&w); ocr_tensor_free(&y); ocr_tensor_free(&dy); ocr_tensor_free(&dx);
    ocr_ctx_free(&ctx);
}

/* A NaN must never be hidden: ReLU (alone and fused after BN) passes it on, as PyTorch does, so the numerics watch
   and the loss still see it; its gradient there is 0, as PyTorch's. */
/* OCR_REFERENCE in the environment, read by ocr_ctx_init, sets OCR_DEBUG_REFERENCE ("0" or empty does not); the
   caller's environment is restored after. */
static void test_reference_env(void) {
    static const char *const values[4] = {"1", "0", "", NULL};
    const char *old = getenv("OCR_REFERENCE");
    char *saved = old ? strdup(old) : NULL;
    int i;
    for (i = 0; i < 4; i++) {
        ocr_ctx ctx;
        if (values[i]) setenv("OCR_REFERENCE", values[i], 1);
        else unsetenv("OCR_REFERENCE");
        OCR_CHECK_OK(&ctx, ocr_ctx_init(&ctx, 1, 1));
        OCR_CHECK_MSG(((ctx.debug_flags & OCR_DEBUG_REFERENCE) != 0) == (i == 0), "OCR_REFERENCE=%s: flag %s", values[i] ? values[i] : "(unset)",
                      (ctx.debug_flags & OCR_DEBUG_REFERENCE) ? "set" : "not set");
        ocr_ctx_free(&ctx);
    }
    if (saved) setenv("OCR_REFERENCE", saved, 1);
    else unsetenv("OCR_REFERENCE");
    free(saved);
}

static void test_relu_keeps_nan(void) {
    ocr_ctx ctx;
    float xv[9] = {-1.0f, 0.0f, 2.0f, NAN, -NAN, 3.0f, -2.0f, NAN, 1.0f}, yv[9], gv[9], dxv[9];
    float gamma[1] = {1.0f}, beta[1] = {0.0f}, rm[1] = {0.0f}, rv[1] = {1.0f}, sm[1], si[1];
    ocr_tensor x = ocr_tensor_f32("x", ocr_shape4(1, 1, 3, 3), xv), y = ocr_tensor_f32("y", ocr_shape4(1, 1, 3, 3), yv);
    ocr_tensor g = ocr_tensor_f32("dy", ocr_shape4(1, 1, 3, 3), gv), dx = ocr_tensor_f32("dx", ocr_shape4(1, 1, 3, 3), dxv);
    ocr_tensor tg = ocr_tensor_f32("gamma", ocr_shape1(1), gamma), tb = ocr_tensor_f32("beta", ocr_shape1(1), beta);
    ocr_tensor trm = ocr_tensor_f32("rm", ocr_shape1(1), rm), trv = ocr_tensor_f32("rv", ocr_shape1(1), rv);
    ocr_tensor tsm = ocr_tensor_f32("sm", ocr_shape1(1), sm), tsi = ocr_tensor_f32("si", ocr_shape1(1), si);
    int i;
    OCR_CHECK_OK(&ctx, ocr_ctx_init(&ctx, 1, 1));
    for (i = 0; i < 9; i++) gv[i] = 1.0f, dxv[i] = 0.0f;
    OCR_CHECK_OK(&ctx, ocr_nn_relu_forward(&ctx, &x, &y));
    for (i = 0; i < 9; i++) OCR_CHECK_MSG(isnan(xv[i]) ? isnan(yv[i]) : yv[i] == (xv[i] > 0 ? xv[i] : 0.0f), "relu(%g) = %g", xv[i], yv[i]);
    OCR_CHECK_OK(&ctx, ocr_nn_relu_backward(&ctx, &y, &g, &dx));
    for (i = 0; i < 9; i++) OCR_CHECK_MSG(dxv[i] == (yv[i] > 0 ? 1.0f : 0.0f), "relu'(%g) = %g", xv[i], dxv[i]);
    /* eval-mode BN with identity statistics, fused with ReLU */
    OCR_CHECK_OK(&ctx, ocr_nn_batchnorm2d_relu_forward(&ctx, &x, &tg, &tb, &trm, &trv, 0, 0.1f, 1e-5f, &tsm, &tsi, &y));
    for (i = 0; i < 9; i++) OCR_CHECK_MSG(isnan(xv[i]) == isnan(yv[i]), "bn+relu(%g) = %g", xv[i], yv[i]);
    ocr_ctx_free(&ctx);
}

int main(int argc, char **argv) {
    ocr_test_init(argc, argv);
    OCR_TEST_RUN(test_reference_env);
    OCR_TEST_RUN(test_relu_keeps_nan);
    OCR_TEST_RUN(test_conv2d_parity);
    OCR_TEST_RUN(test_conv_transpose2d_parity);
    OCR_TEST_RUN(test_batchnorm2d_parity);
    OCR_TEST_RUN(test_pointwise_parity);
    OCR_TEST_RUN(test_pool_upsample_concat_parity);
    OCR_TEST_RUN(test_clip_grad_norm);
    OCR_TEST_RUN(test_params_ema);
    OCR_TEST_RUN(test_lr_poly);
    OCR_TEST_RUN(test_optim_parity);
    OCR_TEST_RUN(test_params);
    OCR_TEST_RUN(test_error_paths);
    OCR_TEST_RUN(test_check_numerics);
    return ocr_test_finish();
}
