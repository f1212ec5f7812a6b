/* The recognizer's ops: the LSTM layer, log_softmax, rectangular max pooling, map-to-sequence, the classifier
   (linear) and the padding mask (ocr_nn.h), the CTC
   loss and its decoders (ocr_loss.h). Against PyTorch (tools/make_rec_fixtures.py: nn.LSTM with 2 bidirectional
   layers and smaller ones, F.log_softmax, F.max_pool2d with (2,1)-style windows, permute/reshape,
   F.ctc_loss with 'mean' and 'sum', repeats, 200 frames, a blank-dominated output, an impossible target under
   zero_infinity) on the fast paths (1 thread with the portable GEMM, 2 threads with the best kernel) and on the
   references; the fast paths against the references on odd sizes; finite differences for the LSTM, log_softmax and
   CTC (through log_softmax) gradients; CTC against closed forms (1 to 3 frames) and against the sum over every
   alignment enumerated; the decoders on hand-made tables and against every labelling enumerated (the beam search
   beats the greedy path where it must); the refusals. Regenerate the fixtures with:
   /usr/bin/python3 tools/make_rec_fixtures.py */
/* ocr-c build: own implementation */
#define _POSIX_C_SOURCE 200809L
#define OCR_IMPLEMENTATION
#include "ocr_tensor.h"
#include "ocr_nn.h"
#include "ocr_loss.h"
#include "ocr_test.h"
#include <float.h>

#define FIXTURES "tests/fixtures/rec/"
#define OUT_TOL 1e-4
#define GRAD_TOL 1e-3
#define FD_STEP 1e-2
#define FD_TOL 2e-3

/* ---------------------------------------------------------------- helpers */

/* Tensors of one test, freed together. */
#define POOL_MAX 96
typedef struct { ocr_ctx *ctx; ocr_tensor t[POOL_MAX]; int n; } pool;

static ocr_tensor *pool_slot(pool *p) {
    if (p->n == POOL_MAX) { fprintf(stderr, "test_rec_ops: raise POOL_MAX\n"); exit(2); }
    memset(&p->t[p->n], 0, sizeof p->t[p->n]);
    return &p->t[p->n++];
}
static void pool_free(pool *p) {
    int i;
    for (i = 0; i < p->n; i++) ocr_tensor_free(&p->t[i]);
    p->n = 0;
}
/* a zeroed tensor */
static ocr_tensor *pool_new(pool *p, const char *name, ocr_dtype dt, ocr_shape s) {
    ocr_tensor *t = pool_slot(p);
    OCR_CHECK_OK(p->ctx, ocr_tensor_alloc(p->ctx, t, name, dt, OCR_DEVICE_CPU, s));
    return t;
}
static ocr_tensor *pool_f32(pool *p, const char *name, ocr_shape s) { return pool_new(p, name, OCR_F32, s); }
static ocr_tensor *pool_uniform(pool *p, const char *name, ocr_shape s, float lo, float hi) {
    ocr_tensor *t = pool_f32(p, name, s);
    if (t->data) OCR_CHECK_OK(p->ctx, ocr_tensor_fill_uniform(p->ctx, t, lo, hi));
    return t;
}
static ocr_tensor *pool_i32(pool *p, const char *name, const int32_t *v, int64_t n) {
    ocr_tensor *t = pool_new(p, name, OCR_I32, ocr_shape1(n));
    if (t->data && n) memcpy(t->data, v, (size_t)n * sizeof(int32_t));
    return t;
}
/* fixture tensor "case<k>.<name>" */
static ocr_tensor *pool_read(pool *p, const ocr_safetensors *st, int k, const char *name) {
    char full[OCR_NAME_MAX];
    ocr_tensor *t = pool_slot(p);
    snprintf(full, sizeof full, "case%d.%s", k, name);
    OCR_CHECK_OK(p->ctx, ocr_safetensors_read(p->ctx, st, full, t));
    ocr_tensor_set_name(t, name);
    return t;
}
static double meta(const ocr_safetensors *st, int k, const char *key) {
    char full[OCR_NAME_MAX];
    const char *v;
    snprintf(full, sizeof full, "case%d.%s", k, key);
    v = ocr_safetensors_meta(st, full);
    OCR_CHECK_MSG(v != NULL, "fixture has no metadata '%s'", full);
    return v ? strtod(v, NULL) : 0.0;
}
static int fixture_open(ocr_ctx *ctx, ocr_safetensors *st, const char *name, int *cases) {
    char path[256];
    const char *v;
    snprintf(path, sizeof path, FIXTURES "%s.safetensors", name);
    *cases = 0;
    if (ocr_safetensors_open(ctx, st, path) != OCR_OK) {
        OCR_CHECK_MSG(0, "cannot open %s (run /usr/bin/python3 tools/make_rec_fixtures.py): %s", path, ocr_ctx_last_error(ctx));
        return 0;
    }
    v = ocr_safetensors_meta(st, "cases");
    *cases = v ? atoi(v) : 0;
    OCR_CHECK_MSG(*cases > 0, "%s has no cases", path);
    return 1;
}

/* got against ref (same shape, F32) by the scale-aware relative error */
static void expect_close(const char *what, const ocr_tensor *got, const ocr_tensor *ref, double tol) {
    char gs[96], rs[96];
    double err;
    if (!got || !ref || !got->data || !ref->data) { ocr_test__case_failed = 1; return; }
    if (!ocr_shape_equal(got->shape, ref->shape)) {
        OCR_CHECK_MSG(0, "%s: shape %s, reference %s", what, ocr_shape_str(got->shape, gs, sizeof gs), ocr_shape_str(ref->shape, rs, sizeof rs));
        return;
    }
    err = ocr_test_rel_err((const float *)got->data, (const float *)ref->data, ocr_tensor_numel(got), 1e-6);
    OCR_CHECK_MSG(err <= tol, "%s: relative error %.3g above %g", what, err, tol);
}

/* Variant 0: 1 thread, portable GEMM; 1: 2 threads, best kernel; 2: 2 threads on the references. */
#define N_VARIANTS 3
static const char *const variant_name[N_VARIANTS] = {"portable/1 thread", "best kernel/2 threads", "reference"};
static int ctx_variant(ocr_ctx *ctx, int variant) {
    if (ocr_ctx_init(ctx, variant ? 2 : 1, 7) != OCR_OK) { OCR_CHECK_MSG(0, "%s", ocr_ctx_last_error(ctx)); return 0; }
    ctx->cpu_kernel = variant ? OCR_CPU_KERNEL_AUTO : OCR_CPU_KERNEL_PORTABLE;
    if (variant == 2) ctx->debug_flags |= OCR_DEBUG_REFERENCE;
    else ctx->debug_flags &= ~(unsigned)OCR_DEBUG_REFERENCE;
    return 1;
}

static double dot(const ocr_tensor *y, const ocr_tensor *r) {
    int64_t i, n = ocr_tensor_numel(y);
    double s = 0.0;
    for (i = 0; i < n; i++) s += (double)((const float *)y->data)[i] * ((const float *)r->data)[i];
    return s;
}

/* ---------------------------------------------------------------- LSTM */

static const char *const lstm_kind[4] = {"weight_ih", "weight_hh", "bias_ih", "bias_hh"};

/* The weights and gradients structs over tensors [dir][kind] (kinds 2 and 3 NULL without bias). */
static void lstm_bind(int D, int bias, ocr_tensor *w[2][4], ocr_tensor *g[2][4], ocr_lstm_weights *lw, ocr_lstm_grads *lg) {
    int d;
    memset(lw, 0, sizeof *lw);
    if (lg) memset(lg, 0, sizeof *lg);
    lw->directions = D;
    for (d = 0; d < D; d++) {
        lw->w_ih[d] = w[d][0]; lw->w_hh[d] = w[d][1];
        lw->b_ih[d] = bias ? w[d][2] : NULL; lw->b_hh[d] = bias ? w[d][3] : NULL;
        if (lg && g) {
            lg->w_ih[d] = g[d][0]; lg->w_hh[d] = g[d][1];
            lg->b_ih[d] = bias ? g[d][2] : NULL; lg->b_hh[d] = bias ? g[d][3] : NULL;
        }
    }
}

/* One fixture case: the layers chained forward (each output against PyTorch's layer alone) and backward. */
static void lstm_case(ocr_ctx *ctx, const ocr_safetensors *st, int k, const char *variant) {
    pool p = {NULL, {{0}}, 0};
    int layers = (int)meta(st, k, "layers"), D = (int)meta(st, k, "directions"), bias = meta(st, k, "bias") != 0.0, l, d, i;
    ocr_tensor *w[2][2][4], *g[2][2][4], *y[2] = {NULL, NULL}, *saved[2] = {NULL, NULL}, *dxs[2] = {NULL, NULL}, *in[2];
    ocr_tensor *x, *dy, *lengths = NULL;
    char what[160], name[64], key[32];
    p.ctx = ctx;
    x = pool_read(&p, st, k, "x");
    dy = pool_read(&p, st, k, "dy");
    snprintf(key, sizeof key, "case%d.lengths", k);
    if (ocr_safetensors_meta(st, key)) lengths = pool_read(&p, st, k, "lengths"); /* packed-sequence cases */
    if (ocr_test__case_failed || layers < 1 || layers > 2) { OCR_CHECK(layers >= 1 && layers <= 2); pool_free(&p); return; }
    for (l = 0; l < layers; l++) {
        ocr_lstm_weights lw;
        ocr_shape ys, ss;
        for (d = 0; d < D; d++)
            for (i = 0; i < (bias ? 4 : 2); i++) {
                snprintf(name, sizeof name, "%s_l%d%s", lstm_kind[i], l, d ? "_reverse" : "");
                w[l][d][i] = pool_read(&p, st, k, name);
                g[l][d][i] = pool_f32(&p, name, w[l][d][i]->shape);
            }
        if (ocr_test__case_failed) { pool_free(&p); return; }
        lstm_bind(D, bias, w[l], NULL, &lw, NULL);
        in[l] = l ? y[l - 1] : x;
        OCR_CHECK_OK(ctx, ocr_nn_lstm_shapes(ctx, in[l]->shape, &lw, &ys, &ss));
        y[l] = pool_f32(&p, "y", ys);
        saved[l] = pool_f32(&p, "saved", ss);
        OCR_CHECK_OK(ctx, ocr_nn_lstm_forward(ctx, in[l], &lw, lengths, y[l], saved[l]));
        snprintf(name, sizeof name, "y_l%d", l);
        snprintf(what, sizeof what, "lstm case%d (%s%s) layer %d output", k, variant, lengths ? ", lengths" : "", l);
        expect_close(what, y[l], pool_read(&p, st, k, name), OUT_TOL);
    }
    snprintf(what, sizeof what, "lstm case%d (%s) output", k, variant);
    expect_close(what, y[layers - 1], pool_read(&p, st, k, "y"), OUT_TOL);
    for (l = layers - 1; l >= 0; l--) {
        ocr_lstm_weights lw;
        ocr_lstm_grads lg;
        lstm_bind(D, bias, w[l], g[l], &lw, &lg);
        dxs[l] = pool_f32(&p, "dx", in[l]->shape);
        OCR_CHECK_OK(ctx, ocr_nn_lstm_backward(ctx, in[l], &lw, y[l], saved[l], l == layers - 1 ? dy : dxs[l + 1], dxs[l], &lg));
    }
    snprintf(what, sizeof what, "lstm case%d (%s) dx", k, variant);
    expect_close(what, dxs[0], pool_read(&p, st, k, "dx"), GRAD_TOL);
    for (l = 0; l < layers; l++)
        for (d = 0; d < D; d++)
            for (i = 0; i < (bias ? 4 : 2); i++) {
                snprintf(name, sizeof name, "grad.%s_l%d%s", lstm_kind[i], l, d ? "_reverse" : "");
                snprintf(what, sizeof what, "lstm case%d (%s) %s", k, variant, name);
                expect_close(what, g[l][d][i], pool_read(&p, st, k, name), GRAD_TOL);
            }
    pool_free(&p);
}

static void test_lstm_parity(void) {
    int variant, k, cases;
    for (variant = 0; variant < N_VARIANTS; variant++) {
        ocr_ctx ctx;
        ocr_safetensors st;
        if (!ctx_variant(&ctx, variant)) return;
        if (fixture_open(&ctx, &st, "lstm", &cases)) {
            for (k = 0; k < cases; k++) lstm_case(&ctx, &st, k, variant_name[variant]);
            ocr_safetensors_close(&st);
        }
        ocr_ctx_free(&ctx);
    }
}

/* A random bidirectional layer with its tensors, for the tests below. */
typedef struct {
    pool p;
    int64_t T, N, I, H;
    int D;
    ocr_tensor *x, *y, *saved, *dy, *dx, *w[2][4], *g[2][4];
    ocr_lstm_weights lw;
    ocr_lstm_grads lg;
} lstm_setup;

static void lstm_setup_make(ocr_ctx *ctx, lstm_setup *s, int64_t T, int64_t N, int64_t I, int64_t H, int D) {
    char name[64];
    int d, i;
    ocr_shape ys, ss;
    memset(s, 0, sizeof *s);
    s->p.ctx = ctx;
    s->T = T; s->N = N; s->I = I; s->H = H; s->D = D;
    s->x = pool_uniform(&s->p, "x", ocr_shape3(T, N, I), -1.0f, 1.0f);
    for (d = 0; d < D; d++)
        for (i = 0; i < 4; i++) {
            ocr_shape sh = i == 0 ? ocr_shape2(4 * H, I) : i == 1 ? ocr_shape2(4 * H, H) : ocr_shape1(4 * H);
            snprintf(name, sizeof name, "%s_l0%s", lstm_kind[i], d ? "_reverse" : "");
            s->w[d][i] = pool_uniform(&s->p, name, sh, -0.8f, 0.8f);
            snprintf(name, sizeof name, "grad.%s_l0%s", lstm_kind[i], d ? "_reverse" : "");
            s->g[d][i] = pool_f32(&s->p, name, sh);
        }
    lstm_bind(D, 1, s->w, s->g, &s->lw, &s->lg);
    OCR_CHECK_OK(ctx, ocr_nn_lstm_shapes(ctx, s->x->shape, &s->lw, &ys, &ss));
    s->y = pool_f32(&s->p, "y", ys);
    s->saved = pool_f32(&s->p, "saved", ss);
    s->dy = pool_uniform(&s->p, "dy", ys, -1.0f, 1.0f);
    s->dx = pool_f32(&s->p, "dx", s->x->shape);
}

static void lstm_zero_grads(ocr_ctx *ctx, lstm_setup *s) {
    int d, i;
    ocr_tensor_zero(ctx, s->dx);
    for (d = 0; d < s->D; d++) for (i = 0; i < 4; i++) ocr_tensor_zero(ctx, s->g[d][i]);
}

/* The fast paths against the references on odd sizes (both directions, a GEMM-sized batch), and inference without
   saved against the training forward. */
static void test_lstm_fast_vs_reference(void) {
    ocr_ctx ctx;
    lstm_setup s;
    pool q;
    ocr_tensor *y_ref, *saved_ref, *dx_ref, *g_ref[2][4], *y_inf;
    int d, i;
    char what[160];
    if (!ctx_variant(&ctx, 1)) return;
    lstm_setup_make(&ctx, &s, 9, 13, 17, 19, 2);
    q.ctx = &ctx; q.n = 0;
    y_ref = pool_f32(&q, "y_ref", s.y->shape);
    saved_ref = pool_f32(&q, "saved_ref", s.saved->shape);
    dx_ref = pool_f32(&q, "dx_ref", s.x->shape);
    y_inf = pool_f32(&q, "y_inf", s.y->shape);
    for (d = 0; d < 2; d++) for (i = 0; i < 4; i++) g_ref[d][i] = pool_f32(&q, "g_ref", s.g[d][i]->shape);
    if (!ocr_test__case_failed) {
        ocr_lstm_grads lg_ref;
        OCR_CHECK_OK(&ctx, ocr_nn_lstm_forward(&ctx, s.x, &s.lw, NULL, s.y, s.saved));
        OCR_CHECK_OK(&ctx, ocr_nn_lstm_backward(&ctx, s.x, &s.lw, s.y, s.saved, s.dy, s.dx, &s.lg));
        OCR_CHECK_OK(&ctx, ocr_nn_lstm_forward(&ctx, s.x, &s.lw, NULL, y_inf, NULL));
        OCR_CHECK_MSG(!memcmp(y_inf->data, s.y->data, ocr_tensor_bytes(y_inf)), "inference forward (saved NULL) differs from training");
        ctx.debug_flags |= OCR_DEBUG_REFERENCE;
        lstm_bind(2, 1, s.w, g_ref, &s.lw, &lg_ref);
        OCR_CHECK_OK(&ctx, ocr_nn_lstm_forward(&ctx, s.x, &s.lw, NULL, y_ref, saved_ref));
        OCR_CHECK_OK(&ctx, ocr_nn_lstm_backward(&ctx, s.x, &s.lw, y_ref, saved_ref, s.dy, dx_ref, &lg_ref));
        expect_close("lstm fast y", s.y, y_ref, 1e-5);
        expect_close("lstm fast saved", s.saved, saved_ref, 1e-5);
        expect_close("lstm fast dx", s.dx, dx_ref, 1e-5);
        for (d = 0; d < 2; d++)
            for (i = 0; i < 4; i++) {
                snprintf(what, sizeof what, "lstm fast %s", s.g[d][i]->name);
                expect_close(what, s.g[d][i], g_ref[d][i], 1e-5);
            }
    }
    pool_free(&q);
    pool_free(&s.p);
    ocr_ctx_free(&ctx);
}

/* The fast path gives the same bits on one thread as on several (2, 3, 4), where a step's gates are shared out in
   pieces of rows (33 rows of 4 x 24 gates: several pieces) and with per-sample lengths that end inside a piece; two
   directions and one; training (saved gates, then the backward) and inference (no saved gates, the same y). */
static void lstm_threads_case(int D, int threads) {
    ocr_ctx ctx[2];
    lstm_setup s;
    ocr_tensor lengths, y_infer;
    ocr_tensor *outs[3 + 8 + 1];   /* y, saved, dx, 4 gradients per direction, y_infer */
    void *first[3 + 8 + 1];
    int t, i, d, n_out = 0;
    memset(&lengths, 0, sizeof lengths);
    memset(&y_infer, 0, sizeof y_infer);
    memset(first, 0, sizeof first);
    for (t = 0; t < 2; t++) {
        OCR_CHECK_OK(&ctx[t], ocr_ctx_init(&ctx[t], t ? threads : 1, 7));
        ctx[t].debug_flags &= ~(unsigned)OCR_DEBUG_REFERENCE;
    }
    lstm_setup_make(&ctx[0], &s, 7, 33, 20, 24, D);
    OCR_CHECK_OK(&ctx[0], ocr_tensor_alloc(&ctx[0], &lengths, "lengths", OCR_I32, OCR_DEVICE_CPU, ocr_shape1(33)));
    OCR_CHECK_OK(&ctx[0], ocr_tensor_alloc(&ctx[0], &y_infer, "y_infer", OCR_F32, OCR_DEVICE_CPU, s.y->shape));
    if (ocr_test__case_failed) goto done;
    for (i = 0; i < 33; i++) ((int32_t *)lengths.data)[i] = 1 + (i * 5) % 7;
    outs[n_out++] = s.y; outs[n_out++] = s.saved; outs[n_out++] = s.dx;
    for (d = 0; d < D; d++) for (i = 0; i < 4; i++) outs[n_out++] = s.g[d][i];
    for (t = 0; t < 2; t++) {
        for (i = 2; i < n_out; i++) OCR_CHECK_OK(&ctx[t], ocr_tensor_zero(&ctx[t], outs[i])); /* the backward accumulates */
        OCR_CHECK_OK(&ctx[t], ocr_nn_lstm_forward(&ctx[t], s.x, &s.lw, &lengths, s.y, s.saved));
        OCR_CHECK_OK(&ctx[t], ocr_nn_lstm_backward(&ctx[t], s.x, &s.lw, s.y, s.saved, s.dy, s.dx, &s.lg));
        OCR_CHECK_OK(&ctx[t], ocr_nn_lstm_forward(&ctx[t], s.x, &s.lw, &lengths, &y_infer, NULL));
        outs[n_out] = &y_infer;
        for (i = 0; i <= n_out; i++) {
            if (t == 0) {
                if (!(first[i] = malloc(ocr_tensor_bytes(outs[i])))) { OCR_CHECK(0); goto done; }
                memcpy(first[i], outs[i]->data, ocr_tensor_bytes(outs[i]));
            } else
                OCR_CHECK_MSG(!memcmp(first[i], outs[i]->data, ocr_tensor_bytes(outs[i])), "lstm (%d direction(s)) %s: %d threads differ "
                              "from one", D, outs[i]->name, threads);
        }
        OCR_CHECK_MSG(!memcmp(y_infer.data, s.y->data, ocr_tensor_bytes(s.y)), "lstm: inference differs from training's forward");
    }
done:
    for (i = 0; i <= n_out; i++) free(first[i]);
    ocr_tensor_free(&lengths);
    ocr_tensor_free(&y_infer);
    pool_free(&s.p);
    ocr_ctx_free(&ctx[0]);
    ocr_ctx_free(&ctx[1]);
}
static void test_lstm_threads_same_bits(void) {
    lstm_threads_case(2, 2);
    lstm_threads_case(2, 4);
    lstm_threads_case(1, 2);
    lstm_threads_case(1, 3);
}

/* Finite differences of L = sum(r * y) against the backward, for x and every weight of both directions, on the fast
   path and on the reference; backward accumulates (twice gives double) and a NULL gradient is skipped. */
static void lstm_fd(int variant) {
    ocr_ctx ctx;
    lstm_setup s;
    ocr_tensor *in[9];
    float *g1[9];
    int d, i, m, n_in = 0, reported = 0;
    if (!ctx_variant(&ctx, variant)) return;
    lstm_setup_make(&ctx, &s, 4, 2, 3, 3, 2);
    if (ocr_test__case_failed) { pool_free(&s.p); ocr_ctx_free(&ctx); return; }
    in[n_in++] = s.x;
    for (d = 0; d < 2; d++) for (i = 0; i < 4; i++) in[n_in++] = s.w[d][i];
    OCR_CHECK_OK(&ctx, ocr_nn_lstm_forward(&ctx, s.x, &s.lw, NULL, s.y, s.saved));
    lstm_zero_grads(&ctx, &s);
    OCR_CHECK_OK(&ctx, ocr_nn_lstm_backward(&ctx, s.x, &s.lw, s.y, s.saved, s.dy, s.dx, &s.lg));
    for (m = 0; m < n_in; m++) {
        const ocr_tensor *gt = m == 0 ? s.dx : s.g[(m - 1) / 4][(m - 1) % 4];
        g1[m] = (float *)malloc(ocr_tensor_bytes(gt));
        memcpy(g1[m], gt->data, ocr_tensor_bytes(gt));
    }
    /* accumulation */
    OCR_CHECK_OK(&ctx, ocr_nn_lstm_backward(&ctx, s.x, &s.lw, s.y, s.saved, s.dy, s.dx, &s.lg));
    for (m = 0; m < n_in; m++) {
        const ocr_tensor *gt = m == 0 ? s.dx : s.g[(m - 1) / 4][(m - 1) % 4];
        int64_t e, n = ocr_tensor_numel(gt);
        for (e = 0; e < n; e++)
            if (fabsf(((const float *)gt->data)[e] - 2.0f * g1[m][e]) > 1e-5f * (1.0f + fabsf(g1[m][e]))) {
                OCR_CHECK_MSG(0, "lstm: %s after two backward calls is not twice the first at %lld", gt->name, (long long)e);
                break;
            }
    }
    /* NULL gradients skipped, the given ones the same */
    {
        ocr_lstm_grads only;
        memset(&only, 0, sizeof only);
        lstm_zero_grads(&ctx, &s);
        only.w_hh[1] = s.g[1][1];
        OCR_CHECK_OK(&ctx, ocr_nn_lstm_backward(&ctx, s.x, &s.lw, s.y, s.saved, s.dy, NULL, &only));
        OCR_CHECK_MSG(ocr_test_rel_err((const float *)s.g[1][1]->data, g1[6], ocr_tensor_numel(s.g[1][1]), 1e-6) < 1e-6,
                      "lstm: w_hh_reverse's gradient alone differs");
        OCR_CHECK_MSG(ocr_find_nonfinite(s.dx) < 0 && ((const float *)s.dx->data)[0] == 0.0f, "lstm: skipped dx was written");
        OCR_CHECK_OK(&ctx, ocr_nn_lstm_backward(&ctx, s.x, &s.lw, s.y, s.saved, s.dy, NULL, NULL));
    }
    for (m = 0; m < n_in; m++) {
        float *v = (float *)in[m]->data;
        int64_t e, n = ocr_tensor_numel(in[m]);
        for (e = 0; e < n; e++) {
            float orig = v[e];
            double lp, lm, fd, an = g1[m][e];
            v[e] = orig + (float)FD_STEP;
            OCR_CHECK_OK(&ctx, ocr_nn_lstm_forward(&ctx, s.x, &s.lw, NULL, s.y, NULL));
            lp = dot(s.y, s.dy);
            v[e] = orig - (float)FD_STEP;
            OCR_CHECK_OK(&ctx, ocr_nn_lstm_forward(&ctx, s.x, &s.lw, NULL, s.y, NULL));
            lm = dot(s.y, s.dy);
            v[e] = orig;
            fd = (lp - lm) / ((double)(orig + (float)FD_STEP) - (double)(orig - (float)FD_STEP));
            if (!(fabs(fd - an) <= FD_TOL * (fabs(an) > 1.0 ? fabs(an) : 1.0))) {
                ocr_test__case_failed = 1;
                if (reported++ < 5)
                    fprintf(stderr, "  lstm (%s): dL/d %s[%lld]: analytic %.7g, finite difference %.7g\n", variant_name[variant],
                            in[m]->name, (long long)e, an, fd);
            }
        }
    }
    for (m = 0; m < n_in; m++) free(g1[m]);
    pool_free(&s.p);
    ocr_ctx_free(&ctx);
}
static void test_lstm_grad_fd(void) { lstm_fd(1); lstm_fd(2); }

/* The fast path's gate activations (ocr__gate_*: one e^x of x <= 0 by range reduction and a polynomial) against libm
   in double on a sweep of 400,001 points over [-20, 20] and the values where they switch or end: within 1.2e-7 of
   the true value or 3e-7 of it relatively (sigmoid far below 0), and tanh below 0.625 relatively; NaN stays NaN,
   +-inf saturate. Each level the CPU has (portable, AVX2, AVX-512) is checked; AVX2 and AVX-512 give the same bits. */
static void test_lstm_gates(void) {
    enum { SWEEP = 400001, EXTRA = 14, NV = SWEEP + EXTRA };
    static const float extra[EXTRA] = {0.0f, -0.0f, 0.625f, -0.625f, 0.62499994f, -0.62499994f, 1e-30f, -1e-30f, 87.0f, -87.0f, 90.0f, -90.0f,
                                       3.4e38f, -3.4e38f};
    float *a = (float *)malloc((size_t)NV * 5 * sizeof(float)), *h = (float *)malloc((size_t)NV * sizeof(float));
    float *out[3] = {NULL, NULL, NULL};
    int simd, have[3], i;
    have[0] = 1;
    have[1] = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
    have[2] = __builtin_cpu_supports("avx512f");
    if (!a || !h) { OCR_CHECK(0); goto done; }
    for (simd = 0; simd < 3; simd++) {
        double worst_s = 0, worst_t = 0;
        if (!have[simd]) continue;
        for (i = 0; i < NV; i++) {
            float v = i < SWEEP ? -20.0f + 40.0f * (float)i / (float)(SWEEP - 1) : extra[i - SWEEP];
            a[i] = v; a[NV + i] = 0.0f; a[2 * NV + i] = v; a[3 * NV + i] = 0.0f;
        }
        ocr__lstm_gates_row(simd, a, NULL, NULL, NULL, h, NV);  /* gate i = sigmoid(v), gate g = tanh(v) */
        for (i = 0; i < NV; i++) {
            double v = i < SWEEP ? (double)(-20.0f + 40.0f * (float)i / (float)(SWEEP - 1)) : (double)extra[i - SWEEP];
            double ts = 1.0 / (1.0 + exp(-v)), tt = tanh(v), es = fabs(a[i] - ts), et = fabs(a[2 * NV + i] - tt);
            if (es > 1.2e-7 && es > 3e-7 * fabs(ts)) worst_s = fmax(worst_s, es);
            if ((et > 1.2e-7 || fabs(v) < 0.625) && et > 3e-7 * fabs(tt)) worst_t = fmax(worst_t, et); /* near 0: relative */
        }
        OCR_CHECK_MSG(worst_s == 0 && worst_t == 0, "gates (simd level %d): sigmoid off by %.3g, tanh by %.3g", simd, worst_s, worst_t);
        if (!(out[simd] = (float *)malloc((size_t)NV * 2 * sizeof(float)))) { OCR_CHECK(0); goto done; }
        memcpy(out[simd], a, (size_t)NV * sizeof(float));
        memcpy(out[simd] + NV, a + 2 * NV, (size_t)NV * sizeof(float));
        {   /* NaN and the infinities, at every lane position of a vector */
            float sp[60], hh[12];   /* a row of 12: 5 x 12 gate values */
            for (i = 0; i < 12; i++) { sp[i] = i % 3 == 0 ? NAN : i % 3 == 1 ? INFINITY : -INFINITY; sp[12 + i] = 0; sp[24 + i] = sp[i]; sp[36 + i] = 0; }
            ocr__lstm_gates_row(simd, sp, NULL, NULL, NULL, hh, 12);
            for (i = 0; i < 12; i++) {
                if (i % 3 == 0) OCR_CHECK_MSG(sp[i] != sp[i] && sp[24 + i] != sp[24 + i], "gates (simd %d): NaN lost", simd);
                if (i % 3 == 1) OCR_CHECK_MSG(sp[i] == 1.0f && sp[24 + i] == 1.0f, "gates (simd %d): +inf gives %g %g", simd, sp[i], sp[24 + i]);
                if (i % 3 == 2) OCR_CHECK_MSG(sp[i] < 1e-37f && sp[24 + i] == -1.0f, "gates (simd %d): -inf gives %g %g", simd, sp[i], sp[24 + i]);
            }
        }
    }
    if (have[1] && have[2]) OCR_CHECK_MSG(!memcmp(out[1], out[2], (size_t)NV * 2 * sizeof(float)), "gates: AVX2 and AVX-512 differ");
done:
    for (i = 0; i < 3; i++) free(out[i]);
    free(a);
    free(h);
}

/* Mixed precision: the GEMMs read bf16-rounded inputs, the rest stays fp32: close to fp32 at bf16's precision. */
static void test_lstm_amp(void) {
    ocr_ctx ctx;
    lstm_setup s;
    pool q;
    ocr_tensor *y32;
    if (!ctx_variant(&ctx, 1)) return;
    lstm_setup_make(&ctx, &s, 5, 4, 6, 7, 2);
    q.ctx = &ctx; q.n = 0;
    y32 = pool_f32(&q, "y32", s.y->shape);
    if (!ocr_test__case_failed) {
        OCR_CHECK_OK(&ctx, ocr_nn_lstm_forward(&ctx, s.x, &s.lw, NULL, y32, s.saved));
        ctx.amp = OCR_AMP_BF16;
        OCR_CHECK_OK(&ctx, ocr_nn_lstm_forward(&ctx, s.x, &s.lw, NULL, s.y, s.saved));
        OCR_CHECK_OK(&ctx, ocr_nn_lstm_backward(&ctx, s.x, &s.lw, s.y, s.saved, s.dy, s.dx, &s.lg));
        expect_close("lstm bf16 y", s.y, y32, 3e-2);
        OCR_CHECK(ocr_find_nonfinite(s.dx) < 0);
    }
    pool_free(&q);
    pool_free(&s.p);
    ocr_ctx_free(&ctx);
}

/* ocr_lstm_params_add: torch's names and shapes, usable as the layer's weights. */
static void test_lstm_params(void) {
    ocr_ctx ctx;
    ocr_params P;
    int idx[8], i;
    static const char *const want[8] = {"rnn.weight_ih_l1", "rnn.weight_hh_l1", "rnn.bias_ih_l1", "rnn.bias_hh_l1",
                                        "rnn.weight_ih_l1_reverse", "rnn.weight_hh_l1_reverse", "rnn.bias_ih_l1_reverse",
                                        "rnn.bias_hh_l1_reverse"};
    if (!ctx_variant(&ctx, 1)) return;
    ocr_params_init(&P);
    OCR_CHECK_OK(&ctx, ocr_lstm_params_add(&ctx, &P, "rnn.", 1, 6, 5, 2, idx));
    OCR_CHECK_OK(&ctx, ocr_params_alloc(&ctx, &P));
    if (!ocr_test__case_failed) {
        ocr_tensor v[8], gr[8], x, y;
        ocr_lstm_weights lw;
        float xv[2 * 3 * 6], yv[2 * 3 * 10];
        for (i = 0; i < 8; i++) {
            OCR_CHECK_MSG(!strcmp(P.info[idx[i]].name, want[i]), "param %d named %s, expected %s", i, P.info[idx[i]].name, want[i]);
            v[i] = ocr_params_value(&P, idx[i]);
            gr[i] = ocr_params_grad(&P, idx[i]);
            ocr_tensor_fill_uniform(&ctx, &v[i], -0.3f, 0.3f);
        }
        OCR_CHECK(P.info[idx[0]].shape.dim[0] == 20 && P.info[idx[0]].shape.dim[1] == 6 && P.info[idx[1]].shape.dim[1] == 5 &&
                  P.info[idx[2]].shape.ndim == 1 && P.info[idx[2]].shape.dim[0] == 20);
        memset(&lw, 0, sizeof lw);
        lw.directions = 2;
        for (i = 0; i < 2; i++) {
            lw.w_ih[i] = &v[4 * i]; lw.w_hh[i] = &v[4 * i + 1]; lw.b_ih[i] = &v[4 * i + 2]; lw.b_hh[i] = &v[4 * i + 3];
        }
        for (i = 0; i < 36; i++) xv[i] = (float)(i % 7) * 0.1f - 0.3f;
        x = ocr_tensor_f32("x", ocr_shape3(2, 3, 6), xv);
        y = ocr_tensor_f32("y", ocr_shape3(2, 3, 10), yv);
        OCR_CHECK_OK(&ctx, ocr_nn_lstm_forward(&ctx, &x, &lw, NULL, &y, NULL));
        (void)gr;
    }
    EXPECT_ERR(&ctx, ocr_lstm_params_add(&ctx, &P, "rnn.", 0, 6, 5, 3, NULL), OCR_EINVAL, "directions = 3");
    ocr_params_free(&P);
    ocr_ctx_free(&ctx);
}

/* Refusals name the op, the tensor and the shapes, before anything is written. */
static void test_lstm_errors(void) {
    ocr_ctx ctx;
    lstm_setup s;
    ocr_tensor bad, *keep;
    const ocr_tensor *w_ih1;
    if (!ctx_variant(&ctx, 1)) return;
    lstm_setup_make(&ctx, &s, 3, 2, 4, 3, 2);
    if (ocr_test__case_failed) { pool_free(&s.p); ocr_ctx_free(&ctx); return; }
    ocr_tensor_fill(&ctx, s.y, 5.0);
    /* x of the wrong width: names the weight it disagrees with */
    OCR_CHECK_OK(&ctx, ocr_tensor_alloc(&ctx, &bad, "x", OCR_F32, OCR_DEVICE_CPU, ocr_shape3(3, 2, 5)));
    EXPECT_ERR(&ctx, ocr_nn_lstm_forward(&ctx, &bad, &s.lw, NULL, s.y, s.saved), OCR_ESHAPE, "ocr_nn_lstm_forward", "weight_ih_l0", "[12,5]");
    ocr_tensor_free(&bad);
    OCR_CHECK_OK(&ctx, ocr_tensor_alloc(&ctx, &bad, "x2d", OCR_F32, OCR_DEVICE_CPU, ocr_shape2(3, 4)));
    EXPECT_ERR(&ctx, ocr_nn_lstm_forward(&ctx, &bad, &s.lw, NULL, s.y, s.saved), OCR_ESHAPE, "ocr_nn_lstm_forward", "[3,4]", "[T, N, I]");
    ocr_tensor_free(&bad);
    /* y of the wrong shape */
    OCR_CHECK_OK(&ctx, ocr_tensor_alloc(&ctx, &bad, "y_small", OCR_F32, OCR_DEVICE_CPU, ocr_shape3(3, 2, 3)));
    EXPECT_ERR(&ctx, ocr_nn_lstm_forward(&ctx, s.x, &s.lw, NULL, &bad, s.saved), OCR_ESHAPE, "y_small", "[3,2,6]");
    ocr_tensor_free(&bad);
    /* a missing reverse weight, a bad direction count, a bad bias */
    w_ih1 = s.lw.w_ih[1];
    s.lw.w_ih[1] = NULL;
    EXPECT_ERR(&ctx, ocr_nn_lstm_forward(&ctx, s.x, &s.lw, NULL, s.y, s.saved), OCR_EINVAL, "w_ih[1] is NULL", "_reverse");
    s.lw.w_ih[1] = w_ih1;
    s.lw.directions = 3;
    EXPECT_ERR(&ctx, ocr_nn_lstm_forward(&ctx, s.x, &s.lw, NULL, s.y, s.saved), OCR_EINVAL, "directions = 3");
    s.lw.directions = 2;
    keep = s.w[1][3];
    s.lw.b_hh[1] = s.w[0][0];
    EXPECT_ERR(&ctx, ocr_nn_lstm_forward(&ctx, s.x, &s.lw, NULL, s.y, s.saved), OCR_ESHAPE, "weight_ih_l0", "[12]");
    s.lw.b_hh[1] = keep;
    /* a gradient of the wrong shape, y overlapping x, a dtype */
    s.lg.w_hh[0] = s.g[0][0];
    EXPECT_ERR(&ctx, ocr_nn_lstm_backward(&ctx, s.x, &s.lw, s.y, s.saved, s.dy, s.dx, &s.lg), OCR_ESHAPE, "grad.weight_ih_l0", "[12,3]");
    s.lg.w_hh[0] = s.g[0][1];
    EXPECT_ERR(&ctx, ocr_nn_lstm_backward(&ctx, s.x, &s.lw, s.y, s.saved, s.dy, s.x, &s.lg), OCR_EINVAL, "shares memory");
    EXPECT_ERR(&ctx, ocr_nn_lstm_backward(&ctx, s.x, &s.lw, s.y, NULL, s.dy, s.dx, &s.lg), OCR_EINVAL, "saved");
    OCR_CHECK_OK(&ctx, ocr_tensor_alloc(&ctx, &bad, "x_i32", OCR_I32, OCR_DEVICE_CPU, ocr_shape3(3, 2, 4)));
    EXPECT_ERR(&ctx, ocr_nn_lstm_forward(&ctx, &bad, &s.lw, NULL, s.y, s.saved), OCR_EDTYPE, "x_i32", "F32");
    ocr_tensor_free(&bad);
    /* lengths: a length beyond T or below 1 names the sample; the wrong count or dtype names the tensor */
    OCR_CHECK_OK(&ctx, ocr_tensor_alloc(&ctx, &bad, "lengths", OCR_I32, OCR_DEVICE_CPU, ocr_shape1(2)));
    ((int32_t *)bad.data)[0] = 3; ((int32_t *)bad.data)[1] = 4;
    EXPECT_ERR(&ctx, ocr_nn_lstm_forward(&ctx, s.x, &s.lw, &bad, s.y, s.saved), OCR_EINVAL, "lengths[1] = 4", "[1, T = 3]");
    ((int32_t *)bad.data)[1] = 0;
    EXPECT_ERR(&ctx, ocr_nn_lstm_forward(&ctx, s.x, &s.lw, &bad, s.y, s.saved), OCR_EINVAL, "lengths[1] = 0");
    ocr_tensor_free(&bad);
    OCR_CHECK_OK(&ctx, ocr_tensor_alloc(&ctx, &bad, "lengths3", OCR_I32, OCR_DEVICE_CPU, ocr_shape1(3)));
    EXPECT_ERR(&ctx, ocr_nn_lstm_forward(&ctx, s.x, &s.lw, &bad, s.y, s.saved), OCR_ESHAPE, "lengths3");
    ocr_tensor_free(&bad);
    OCR_CHECK_OK(&ctx, ocr_tensor_alloc(&ctx, &bad, "lengths_f32", OCR_F32, OCR_DEVICE_CPU, ocr_shape1(2)));
    EXPECT_ERR(&ctx, ocr_nn_lstm_forward(&ctx, s.x, &s.lw, &bad, s.y, s.saved), OCR_EDTYPE, "lengths_f32");
    ocr_tensor_free(&bad);
    OCR_CHECK_MSG(((const float *)s.y->data)[0] == 5.0f, "a refused forward wrote y");
    pool_free(&s.p);
    ocr_ctx_free(&ctx);
}

/* ---------------------------------------------------------------- log_softmax */

static void test_log_softmax_parity(void) {
    int variant, k, cases;
    char what[96];
    for (variant = 0; variant < N_VARIANTS; variant++) {
        ocr_ctx ctx;
        ocr_safetensors st;
        if (!ctx_variant(&ctx, variant)) return;
        if (fixture_open(&ctx, &st, "log_softmax", &cases)) {
            for (k = 0; k < cases; k++) {
                pool p;
                ocr_tensor *x, *dy, *y, *dx, *inplace;
                p.ctx = &ctx; p.n = 0;
                x = pool_read(&p, &st, k, "x"); dy = pool_read(&p, &st, k, "dy");
                if (!ocr_test__case_failed) {
                    y = pool_f32(&p, "y", x->shape); dx = pool_f32(&p, "dx", x->shape);
                    inplace = pool_f32(&p, "inplace", x->shape);
                    OCR_CHECK_OK(&ctx, ocr_nn_log_softmax_forward(&ctx, x, y));
                    OCR_CHECK_OK(&ctx, ocr_nn_log_softmax_backward(&ctx, y, dy, dx));
                    snprintf(what, sizeof what, "log_softmax case%d (%s) y", k, variant_name[variant]);
                    expect_close(what, y, pool_read(&p, &st, k, "y"), OUT_TOL);
                    snprintf(what, sizeof what, "log_softmax case%d (%s) dx", k, variant_name[variant]);
                    expect_close(what, dx, pool_read(&p, &st, k, "dx"), GRAD_TOL);
                    memcpy(inplace->data, x->data, ocr_tensor_bytes(x));
                    OCR_CHECK_OK(&ctx, ocr_nn_log_softmax_forward(&ctx, inplace, inplace));
                    OCR_CHECK_MSG(!memcmp(inplace->data, y->data, ocr_tensor_bytes(y)), "log_softmax in place differs");
                }
                pool_free(&p);
            }
            ocr_safetensors_close(&st);
        }
        ocr_ctx_free(&ctx);
    }
}

static void test_log_softmax_grad_fd(void) {
    ocr_ctx ctx;
    pool p;
    ocr_tensor *x, *y, *r, *dx;
    int64_t e, n;
    if (!ctx_variant(&ctx, 1)) return;
    p.ctx = &ctx; p.n = 0;
    x = pool_uniform(&p, "x", ocr_shape2(3, 5), -2.0f, 2.0f);
    y = pool_f32(&p, "y", x->shape); r = pool_uniform(&p, "r", x->shape, -1.0f, 1.0f); dx = pool_f32(&p, "dx", x->shape);
    if (!ocr_test__case_failed) {
        OCR_CHECK_OK(&ctx, ocr_nn_log_softmax_forward(&ctx, x, y));
        OCR_CHECK_OK(&ctx, ocr_nn_log_softmax_backward(&ctx, y, r, dx));
        n = ocr_tensor_numel(x);
        for (e = 0; e < n; e++) {
            float *v = (float *)x->data, orig = v[e];
            double lp, lm, fd, an = ((const float *)dx->data)[e];
            v[e] = orig + (float)FD_STEP; ocr_nn_log_softmax_forward(&ctx, x, y); lp = dot(y, r);
            v[e] = orig - (float)FD_STEP; ocr_nn_log_softmax_forward(&ctx, x, y); lm = dot(y, r);
            v[e] = orig;
            fd = (lp - lm) / ((double)(orig + (float)FD_STEP) - (double)(orig - (float)FD_STEP));
            OCR_CHECK_MSG(fabs(fd - an) <= FD_TOL * (fabs(an) > 1.0 ? fabs(an) : 1.0), "log_softmax dx[%lld]: %.7g vs fd %.7g",
                          (long long)e, an, fd);
        }
        /* a row spanning more than float's range: the smallest values are clamped to -FLT_MAX, not -inf */
        ((float *)x->data)[0] = 3e38f; ((float *)x->data)[1] = -3e38f;
        OCR_CHECK_OK(&ctx, ocr_nn_log_softmax_forward(&ctx, x, y));
        OCR_CHECK(((const float *)y->data)[0] == 0.0f && ((const float *)y->data)[1] == -FLT_MAX);
        ctx.debug_flags |= OCR_DEBUG_REFERENCE;
        OCR_CHECK_OK(&ctx, ocr_nn_log_softmax_forward(&ctx, x, y));
        OCR_CHECK(((const float *)y->data)[0] == 0.0f && ((const float *)y->data)[1] == -FLT_MAX);
        ctx.debug_flags &= ~(unsigned)OCR_DEBUG_REFERENCE;
        EXPECT_ERR(&ctx, ocr_nn_log_softmax_backward(&ctx, y, r, r), OCR_EINVAL, "ocr_nn_log_softmax_backward", "shares memory");
    }
    pool_free(&p);
    ocr_ctx_free(&ctx);
}

/* ---------------------------------------------------------------- rectangular pooling, map-to-sequence */

/* F.max_pool2d with rectangular windows: the output, the argmax, and ocr_nn_maxpool2d_backward on that argmax. */
static void test_maxpool_rect_parity(void) {
    int variant, k, cases;
    char what[96];
    for (variant = 0; variant < N_VARIANTS; variant++) {
        ocr_ctx ctx;
        ocr_safetensors st;
        if (!ctx_variant(&ctx, variant)) return;
        if (fixture_open(&ctx, &st, "maxpool_rect", &cases)) {
            for (k = 0; k < cases; k++) {
                pool p;
                ocr_tensor *x, *dy, *ref_arg, *y, *arg, *dx;
                p.ctx = &ctx; p.n = 0;
                x = pool_read(&p, &st, k, "x"); dy = pool_read(&p, &st, k, "dy"); ref_arg = pool_read(&p, &st, k, "argmax");
                if (!ocr_test__case_failed) {
                    y = pool_f32(&p, "y", dy->shape); arg = pool_new(&p, "argmax", OCR_I32, dy->shape); dx = pool_f32(&p, "dx", x->shape);
                    OCR_CHECK_OK(&ctx, ocr_nn_maxpool2d_rect_forward(&ctx, x, (int)meta(&st, k, "kh"), (int)meta(&st, k, "kw"),
                                                                     (int)meta(&st, k, "sh"), (int)meta(&st, k, "sw"),
                                                                     (int)meta(&st, k, "ph"), (int)meta(&st, k, "pw"), y, arg));
                    OCR_CHECK_OK(&ctx, ocr_nn_maxpool2d_backward(&ctx, dy, arg, dx));
                    snprintf(what, sizeof what, "maxpool_rect case%d (%s) y", k, variant_name[variant]);
                    expect_close(what, y, pool_read(&p, &st, k, "y"), 0.0);
                    OCR_CHECK_MSG(!memcmp(arg->data, ref_arg->data, ocr_tensor_bytes(arg)), "maxpool_rect case%d: argmax differs", k);
                    snprintf(what, sizeof what, "maxpool_rect case%d (%s) dx", k, variant_name[variant]);
                    expect_close(what, dx, pool_read(&p, &st, k, "dx"), 1e-6);
                    EXPECT_ERR(&ctx, ocr_nn_maxpool2d_rect_forward(&ctx, x, 2, 1, 2, 1, 0, 1, y, arg), OCR_EINVAL,
                               "ocr_nn_maxpool2d_rect_forward", "pad 0x1");
                    EXPECT_ERR(&ctx, ocr_nn_maxpool2d_rect_forward(&ctx, x, 2, 2, 1, 1, 0, 0, y, arg), OCR_ESHAPE, "'y'");
                }
                pool_free(&p);
            }
            ocr_safetensors_close(&st);
        }
        ocr_ctx_free(&ctx);
    }
}

/* x.permute(3, 0, 1, 2).reshape(W, N, C*H) and its backward, which accumulates */
static void test_map_to_seq_parity(void) {
    int variant, k, cases;
    char what[96];
    for (variant = 0; variant < N_VARIANTS; variant++) {
        ocr_ctx ctx;
        ocr_safetensors st;
        if (!ctx_variant(&ctx, variant)) return;
        if (fixture_open(&ctx, &st, "map_to_seq", &cases)) {
            for (k = 0; k < cases; k++) {
                pool p;
                ocr_tensor *x, *dy, *ref_y, *y, *dx;
                p.ctx = &ctx; p.n = 0;
                x = pool_read(&p, &st, k, "x"); dy = pool_read(&p, &st, k, "dy"); ref_y = pool_read(&p, &st, k, "y");
                if (!ocr_test__case_failed) {
                    y = pool_f32(&p, "y", ref_y->shape); dx = pool_f32(&p, "dx", x->shape);
                    OCR_CHECK_OK(&ctx, ocr_nn_map_to_seq_forward(&ctx, x, y));
                    OCR_CHECK_OK(&ctx, ocr_nn_map_to_seq_backward(&ctx, dy, dx));
                    OCR_CHECK_OK(&ctx, ocr_nn_map_to_seq_backward(&ctx, dy, dx));
                    snprintf(what, sizeof what, "map_to_seq case%d (%s) y", k, variant_name[variant]);
                    expect_close(what, y, ref_y, 0.0);
                    {
                        ocr_tensor *twice = pool_read(&p, &st, k, "dx");
                        int64_t i;
                        for (i = 0; twice->data && i < ocr_tensor_numel(twice); i++) ((float *)twice->data)[i] *= 2.0f;
                        snprintf(what, sizeof what, "map_to_seq case%d (%s) dx accumulated twice", k, variant_name[variant]);
                        expect_close(what, dx, twice, 0.0);
                    }
                    EXPECT_ERR(&ctx, ocr_nn_map_to_seq_forward(&ctx, x, dx), OCR_ESHAPE, "ocr_nn_map_to_seq_forward", "'dx'");
                }
                pool_free(&p);
            }
            ocr_safetensors_close(&st);
        }
        ocr_ctx_free(&ctx);
    }
}

/* The classifier (torch.nn.Linear): a hand-computed case forward and backward, then the fast path against the
   reference on odd sizes and a 3-D input, accumulating; mask_columns on a hand-made case and its refusal. */
static void test_linear_and_mask(void) {
    static const float xv[6] = {1, 2, 3, 4, 5, 6}, wv[6] = {1, 0, -1, 0.5f, 0.5f, 0.5f}, bv[2] = {0.25f, -1}, dyv[4] = {1, 0, 0, 2};
    static const float y_hand[4] = {-1.75f, 2.0f, -1.75f, 6.5f}, db_hand[2] = {1, 2}, dw_hand[6] = {1, 2, 3, 8, 10, 12};
    static const float dx_hand[6] = {1, 0, -1, 1, 1, 1};
    int variant, i;
    for (variant = 0; variant < N_VARIANTS; variant++) {
        ocr_ctx ctx;
        pool p;
        ocr_tensor *x, *w, *b, *y, *dy, *dx, *dw, *db;
        if (!ctx_variant(&ctx, variant)) return;
        p.ctx = &ctx; p.n = 0;
        x = pool_f32(&p, "x", ocr_shape2(2, 3)); w = pool_f32(&p, "fc.weight", ocr_shape2(2, 3)); b = pool_f32(&p, "fc.bias", ocr_shape1(2));
        y = pool_f32(&p, "y", ocr_shape2(2, 2)); dy = pool_f32(&p, "dy", ocr_shape2(2, 2));
        dx = pool_f32(&p, "dx", ocr_shape2(2, 3)); dw = pool_f32(&p, "dw", ocr_shape2(2, 3)); db = pool_f32(&p, "db", ocr_shape1(2));
        memcpy(x->data, xv, sizeof xv); memcpy(w->data, wv, sizeof wv); memcpy(b->data, bv, sizeof bv); memcpy(dy->data, dyv, sizeof dyv);
        OCR_CHECK_OK(&ctx, ocr_nn_linear_forward(&ctx, x, w, b, y));
        OCR_CHECK_OK(&ctx, ocr_nn_linear_backward(&ctx, x, w, dy, dx, dw, db));
        for (i = 0; i < 4; i++) OCR_CHECK_MSG(((float *)y->data)[i] == y_hand[i], "%s: y[%d] = %g, by hand %g", variant_name[variant], i, ((float *)y->data)[i], y_hand[i]);
        for (i = 0; i < 6; i++) {
            OCR_CHECK_MSG(((float *)dw->data)[i] == dw_hand[i], "%s: dw[%d] = %g, by hand %g", variant_name[variant], i, ((float *)dw->data)[i], dw_hand[i]);
            OCR_CHECK_MSG(((float *)dx->data)[i] == dx_hand[i], "%s: dx[%d] = %g, by hand %g", variant_name[variant], i, ((float *)dx->data)[i], dx_hand[i]);
        }
        for (i = 0; i < 2; i++) OCR_CHECK(((float *)db->data)[i] == db_hand[i]);
        EXPECT_ERR(&ctx, ocr_nn_linear_forward(&ctx, x, w, b, x), OCR_ESHAPE, "ocr_nn_linear_forward", "'x'");
        EXPECT_ERR(&ctx, ocr_nn_linear_forward(&ctx, y, w, b, dy), OCR_ESHAPE, "ocr_nn_linear_forward", "'y'", "'fc.weight'");
        {   /* the fast path against the reference: [5, 3, 17] -> [5, 3, 11], gradients accumulated onto nonzero values */
            ocr_ctx ref;
            ocr_tensor *x3 = pool_uniform(&p, "x3", ocr_shape3(5, 3, 17), -1, 1), *w3 = pool_uniform(&p, "w3", ocr_shape2(11, 17), -1, 1);
            ocr_tensor *b3 = pool_uniform(&p, "b3", ocr_shape1(11), -1, 1), *dy3 = pool_uniform(&p, "dy3", ocr_shape3(5, 3, 11), -1, 1);
            ocr_tensor *y3 = pool_f32(&p, "y3", ocr_shape3(5, 3, 11)), *yr = pool_f32(&p, "y_ref", ocr_shape3(5, 3, 11));
            ocr_tensor *g[3], *gr[3];
            const ocr_shape gs[3] = {x3->shape, w3->shape, b3->shape};
            for (i = 0; i < 3; i++) {
                g[i] = pool_uniform(&p, "grad", gs[i], -0.5f, 0.5f);
                gr[i] = pool_f32(&p, "grad_ref", gs[i]);
                memcpy(gr[i]->data, g[i]->data, ocr_tensor_bytes(g[i]));
            }
            OCR_CHECK_OK(&ref, ocr_ctx_init(&ref, 1, 3));
            ref.debug_flags |= OCR_DEBUG_REFERENCE;
            OCR_CHECK_OK(&ctx, ocr_nn_linear_forward(&ctx, x3, w3, b3, y3));
            OCR_CHECK_OK(&ref, ocr_nn_linear_forward(&ref, x3, w3, b3, yr));
            expect_close("linear forward against the reference", y3, yr, OUT_TOL);
            OCR_CHECK_OK(&ctx, ocr_nn_linear_backward(&ctx, x3, w3, dy3, g[0], g[1], g[2]));
            OCR_CHECK_OK(&ref, ocr_nn_linear_backward(&ref, x3, w3, dy3, gr[0], gr[1], gr[2]));
            expect_close("linear dx against the reference", g[0], gr[0], OUT_TOL);
            expect_close("linear dw against the reference", g[1], gr[1], OUT_TOL);
            expect_close("linear db against the reference", g[2], gr[2], OUT_TOL);
            OCR_CHECK_OK(&ctx, ocr_nn_linear_forward(&ctx, x3, w3, NULL, y3)); /* no bias: y - b */
            for (i = 0; i < 5 * 3 * 11; i++) ((float *)yr->data)[i] -= ((float *)b3->data)[i % 11];
            expect_close("linear forward without bias", y3, yr, OUT_TOL);
            ocr_ctx_free(&ref);
        }
        {
            static const int32_t widths[3] = {2, 5, 0};
            ocr_tensor *m = pool_uniform(&p, "map", ocr_shape4(3, 2, 1, 4), 1, 2), *wd = pool_i32(&p, "widths", widths, 3);
            int64_t k;
            OCR_CHECK_OK(&ctx, ocr_nn_mask_columns(&ctx, m, wd));
            for (k = 0; k < 24; k++) {
                int64_t n = k / 8, col = k % 4;
                float v = ((float *)m->data)[k];
                OCR_CHECK_MSG(col >= widths[n] ? v == 0.0f : v >= 1.0f, "mask_columns: sample %lld column %lld holds %g", (long long)n, (long long)col, v);
            }
            ((int32_t *)wd->data)[1] = -1;
            EXPECT_ERR(&ctx, ocr_nn_mask_columns(&ctx, m, wd), OCR_ERANGE, "ocr_nn_mask_columns", "widths[1] = -1");
        }
        pool_free(&p);
        ocr_ctx_free(&ctx);
    }
}

/* ---------------------------------------------------------------- CTC */

typedef struct {
    ocr_tensor *lp, *targets, *tl, *il, *grad, *nll;
} ctc_args;

/* the fixture cases, on 1 and on 2 threads (bit for bit the same) */
static void test_ctc_parity(void) {
    ocr_ctx ctx[2];
    ocr_safetensors st;
    int k, cases, v;
    char what[96];
    if (!ctx_variant(&ctx[0], 0)) return;
    if (!ctx_variant(&ctx[1], 1)) { ocr_ctx_free(&ctx[0]); return; }
    if (fixture_open(&ctx[0], &st, "ctc", &cases)) {
        for (k = 0; k < cases; k++) {
            pool p;
            ocr_tensor *lp, *tg, *tl, *il, *grad[2], *nll[2], *ref_loss;
            ocr_ctc_config cfg = ocr_ctc_defaults();
            ocr_ctc_result r[2];
            p.ctx = &ctx[0]; p.n = 0;
            lp = pool_read(&p, &st, k, "log_probs"); tg = pool_read(&p, &st, k, "targets");
            tl = pool_read(&p, &st, k, "target_lengths"); il = pool_read(&p, &st, k, "input_lengths");
            ref_loss = pool_read(&p, &st, k, "loss");
            if (ocr_test__case_failed) { pool_free(&p); break; }
            cfg.reduction = meta(&st, k, "reduction") != 0.0 ? OCR_CTC_SUM : OCR_CTC_MEAN;
            cfg.skip_impossible = meta(&st, k, "skip") != 0.0;
            for (v = 0; v < 2; v++) {
                grad[v] = pool_f32(&p, "grad", lp->shape);
                nll[v] = pool_f32(&p, "nll", ocr_shape1(lp->shape.dim[1]));
                OCR_CHECK_OK(&ctx[v], ocr_loss_ctc(&ctx[v], &cfg, lp, tg, tl, il, &r[v], nll[v], grad[v]));
            }
            if (ocr_test__case_failed) { pool_free(&p); continue; }
            OCR_CHECK_MSG(fabs(r[0].loss - ((const float *)ref_loss->data)[0]) <= 1e-5 * fabs(r[0].loss) + 1e-6,
                          "ctc case%d: loss %.9g, torch %.9g", k, r[0].loss, ((const float *)ref_loss->data)[0]);
            snprintf(what, sizeof what, "ctc case%d per-sample nll", k);
            expect_close(what, nll[0], pool_read(&p, &st, k, "nll"), 1e-5);
            snprintf(what, sizeof what, "ctc case%d gradient", k);
            expect_close(what, grad[0], pool_read(&p, &st, k, "grad"), 1e-4);
            OCR_CHECK_MSG(r[0].loss == r[1].loss && !memcmp(grad[0]->data, grad[1]->data, ocr_tensor_bytes(grad[0])),
                          "ctc case%d: 1 and 2 threads differ", k);
            if (cfg.skip_impossible) {
                OCR_CHECK_MSG(r[0].skipped == 1 && r[0].first_skipped == 1, "ctc case%d: skipped %lld first %lld", k,
                              (long long)r[0].skipped, (long long)r[0].first_skipped);
                cfg.skip_impossible = 0;
                EXPECT_ERR(&ctx[0], ocr_loss_ctc(&ctx[0], &cfg, lp, tg, tl, il, NULL, NULL, grad[0]), OCR_ERANGE, "ocr_loss_ctc",
                           "sample 1", "needs 4 frames", "input length is 3");
            } else {
                OCR_CHECK(r[0].skipped == 0 && r[0].first_skipped == -1);
            }
            pool_free(&p);
        }
        ocr_safetensors_close(&st);
    }
    ocr_ctx_free(&ctx[0]);
    ocr_ctx_free(&ctx[1]);
}

/* log_probs [T, 1, C] from a table of probabilities (rows need not be normalised for the closed forms) */
static ocr_tensor *lp_table(pool *p, const double *prob, int T, int C) {
    ocr_tensor *t = pool_f32(p, "log_probs", ocr_shape3(T, 1, C));
    int i;
    if (t->data) for (i = 0; i < T * C; i++) ((float *)t->data)[i] = (float)log(prob[i]);
    return t;
}

static double ctc_nll(ocr_ctx *ctx, pool *p, const double *prob, int T, int C, const int32_t *tgt, int L, ocr_tensor **grad) {
    ocr_ctc_config cfg = ocr_ctc_defaults();
    ocr_ctc_result r;
    int32_t tl = L, il = T;
    ocr_tensor *lp = lp_table(p, prob, T, C);
    *grad = pool_f32(p, "grad", lp->shape);
    cfg.reduction = OCR_CTC_SUM;
    r.loss = NAN;
    OCR_CHECK_OK(ctx, ocr_loss_ctc(ctx, &cfg, lp, pool_i32(p, "targets", tgt, L), pool_i32(p, "target_lengths", &tl, 1),
                                   pool_i32(p, "input_lengths", &il, 1), &r, NULL, *grad));
    return r.loss;
}

/* The closed forms of one to three frames. Classes: 0 blank, 1 "a", 2 "b". */
static void test_ctc_closed_forms(void) {
    ocr_ctx ctx;
    pool p;
    ocr_tensor *g;
    const double q[3][3] = {{0.5, 0.3, 0.2}, {0.25, 0.6, 0.15}, {0.1, 0.7, 0.2}};
    const int32_t a[1] = {1}, ab[2] = {1, 2}, aa[2] = {1, 1};
    double nll, want;
    int c;
    if (!ctx_variant(&ctx, 1)) return;
    p.ctx = &ctx; p.n = 0;
    /* T=1, "a": -log q0(a); gradient q - onehot(a) */
    nll = ctc_nll(&ctx, &p, q[0], 1, 3, a, 1, &g);
    OCR_CHECK_MSG(fabs(nll + log(0.3)) < 1e-6, "T=1 'a': %.9g, expected %.9g", nll, -log(0.3));
    for (c = 0; c < 3; c++)
        OCR_CHECK_MSG(fabs(((const float *)g->data)[c] - (q[0][c] - (c == 1))) < 1e-6, "T=1 'a' gradient[%d] = %g", c,
                      ((const float *)g->data)[c]);
    /* T=2, "a": aa, a-, -a */
    want = -log(q[0][1] * q[1][1] + q[0][1] * q[1][0] + q[0][0] * q[1][1]);
    nll = ctc_nll(&ctx, &p, q[0], 2, 3, a, 1, &g);
    OCR_CHECK_MSG(fabs(nll - want) < 1e-6, "T=2 'a': %.9g, expected %.9g", nll, want);
    {   /* posterior of frame 0 emitting a: (aa + a-) / total */
        double tot = exp(-want), post_a = (q[0][1] * q[1][1] + q[0][1] * q[1][0]) / tot;
        OCR_CHECK_MSG(fabs(((const float *)g->data)[1] - (q[0][1] - post_a)) < 1e-6, "T=2 'a' gradient[0][a] = %g, expected %g",
                      ((const float *)g->data)[1], q[0][1] - post_a);
    }
    /* T=2, "ab": only ab */
    nll = ctc_nll(&ctx, &p, q[0], 2, 3, ab, 2, &g);
    OCR_CHECK_MSG(fabs(nll + log(q[0][1] * q[1][2])) < 1e-6, "T=2 'ab': %.9g", nll);
    /* T=3, "aa": only a-a */
    nll = ctc_nll(&ctx, &p, q[0], 3, 3, aa, 2, &g);
    want = -log(q[0][1] * q[1][0] * q[2][1]);
    OCR_CHECK_MSG(fabs(nll - want) < 1e-6, "T=3 'aa': %.9g, expected %.9g", nll, want);
    /* T=3, empty target: blanks only */
    nll = ctc_nll(&ctx, &p, q[0], 3, 3, NULL, 0, &g);
    want = -log(q[0][0] * q[1][0] * q[2][0]);
    OCR_CHECK_MSG(fabs(nll - want) < 1e-6, "T=3 '': %.9g, expected %.9g", nll, want);
    /* T=2, "aa" cannot fit (a blank must separate the two): an error naming the sample, or skipped and counted */
    {
        ocr_ctc_config cfg = ocr_ctc_defaults();
        ocr_ctc_result r;
        int32_t tl = 2, il = 2;
        ocr_tensor *lp = lp_table(&p, q[0], 2, 3), *grad = pool_f32(&p, "grad", lp->shape), *sl = pool_f32(&p, "sl", ocr_shape1(1));
        ocr_tensor *tg = pool_i32(&p, "targets", aa, 2), *tlt = pool_i32(&p, "tl", &tl, 1), *ilt = pool_i32(&p, "il", &il, 1);
        EXPECT_ERR(&ctx, ocr_loss_ctc(&ctx, &cfg, lp, tg, tlt, ilt, &r, sl, grad), OCR_ERANGE, "sample 0", "needs 3 frames");
        cfg.skip_impossible = 1;
        ocr_tensor_fill(&ctx, sl, 9.0);
        OCR_CHECK_OK(&ctx, ocr_loss_ctc(&ctx, &cfg, lp, tg, tlt, ilt, &r, sl, grad));
        OCR_CHECK(r.loss == 0.0 && r.skipped == 1 && r.first_skipped == 0 && ((const float *)sl->data)[0] == 0.0f);
        for (c = 0; c < 6; c++) OCR_CHECK(((const float *)grad->data)[c] == 0.0f);
    }
    pool_free(&p);
    ocr_ctx_free(&ctx);
}

/* -log p(target) and the posteriors by enumerating all C^T alignments of one sample (lp: T rows of C, stride ld) */
static double brute_ctc(const float *lp, int64_t ld, int T, int C, const int32_t *tgt, int L, double *post) {
    int64_t paths = 1, k;
    int t, i;
    double total = 0.0;
    for (t = 0; t < T; t++) paths *= C;
    for (i = 0; i < T * C; i++) post[i] = 0.0;
    for (k = 0; k < paths; k++) {
        int path[16], out[16], n = 0, prev = -1, match;
        int64_t r = k;
        double lpp = 0.0;
        for (t = 0; t < T; t++) { path[t] = (int)(r % C); r /= C; lpp += lp[t * ld + path[t]]; }
        for (t = 0; t < T; t++) {
            if (path[t] != 0 && path[t] != prev) out[n++] = path[t];
            prev = path[t];
        }
        match = n == L;
        for (i = 0; match && i < L; i++) match = out[i] == tgt[i];
        if (!match) continue;
        total += exp(lpp);
        for (t = 0; t < T; t++) post[t * C + path[t]] += exp(lpp);
    }
    for (i = 0; i < T * C; i++) post[i] /= total;
    return -log(total);
}

/* A batch of random frames against the enumeration: the nll of each sample, and the gradient exp(lp) - posterior
   (0 past the input length), under 'sum' and 'mean'. */
static void test_ctc_brute_force(void) {
    ocr_ctx ctx;
    pool p;
    enum { T = 6, N = 4, C = 4 };
    const int32_t flat[] = {1, 1, 2, 3, 2, 3, 3, 1}, tl[N] = {2, 3, 0, 3}, il[N] = {6, 5, 4, 6};
    ocr_tensor *logits, *lp, *grad, *nll, *tg, *tlt, *ilt;
    ocr_ctc_config cfg = ocr_ctc_defaults();
    ocr_ctc_result r;
    double post[T * C], sum_nll = 0.0, mean = 0.0;
    int n, t, c, off = 0;
    if (!ctx_variant(&ctx, 1)) return;
    p.ctx = &ctx; p.n = 0;
    logits = pool_uniform(&p, "logits", ocr_shape3(T, N, C), -2.0f, 2.0f);
    lp = pool_f32(&p, "lp", logits->shape); grad = pool_f32(&p, "grad", logits->shape); nll = pool_f32(&p, "nll", ocr_shape1(N));
    tg = pool_i32(&p, "targets", flat, 8); tlt = pool_i32(&p, "tl", tl, N); ilt = pool_i32(&p, "il", il, N);
    if (ocr_test__case_failed) { pool_free(&p); ocr_ctx_free(&ctx); return; }
    OCR_CHECK_OK(&ctx, ocr_nn_log_softmax_forward(&ctx, logits, lp));
    cfg.reduction = OCR_CTC_SUM;
    OCR_CHECK_OK(&ctx, ocr_loss_ctc(&ctx, &cfg, lp, tg, tlt, ilt, &r, nll, grad));
    for (n = 0; n < N; off += tl[n], n++) {
        const float *lpn = (const float *)lp->data + n * C;
        double want = brute_ctc(lpn, N * C, il[n], C, flat + off, tl[n], post);
        sum_nll += want;
        mean += want / (tl[n] > 1 ? tl[n] : 1) / N;
        OCR_CHECK_MSG(fabs(((const float *)nll->data)[n] - want) <= 1e-5 * want, "sample %d: nll %.9g, enumerated %.9g", n,
                      ((const float *)nll->data)[n], want);
        for (t = 0; t < T; t++)
            for (c = 0; c < C; c++) {
                double g = ((const float *)grad->data)[(t * N + n) * C + c];
                double e = t < il[n] ? exp((double)lpn[t * N * C + c]) - post[t * C + c] : 0.0;
                OCR_CHECK_MSG(fabs(g - e) < 2e-6, "sample %d gradient [%d][%d] = %.8g, enumerated %.8g", n, t, c, g, e);
            }
    }
    OCR_CHECK_MSG(fabs(r.loss - sum_nll) <= 1e-5 * sum_nll, "sum: %.9g, enumerated %.9g", r.loss, sum_nll);
    cfg.reduction = OCR_CTC_MEAN;
    OCR_CHECK_OK(&ctx, ocr_loss_ctc(&ctx, &cfg, lp, tg, tlt, ilt, &r, NULL, NULL));
    OCR_CHECK_MSG(fabs(r.loss - mean) <= 1e-5 * mean, "mean: %.9g, enumerated %.9g", r.loss, mean);
    pool_free(&p);
    ocr_ctx_free(&ctx);
}

/* Long and extreme inputs: 400 frames with 150 labels (repeats included), peaked and blank-dominated outputs, log-
   probabilities near -1e4: the loss and gradient stay finite, every frame's posteriors add up to 1. */
static void test_ctc_long_stable(void) {
    ocr_ctx ctx;
    pool p;
    enum { T = 400, N = 3, C = 12, L = 150 };
    int32_t flat[N * L], tl[N] = {L, L, L}, il[N] = {T, 390, 2 * L};
    ocr_tensor *logits, *lp, *grad, *tg, *tlt, *ilt;
    ocr_ctc_config cfg = ocr_ctc_defaults();
    ocr_ctc_result r;
    int i, n, t, c, mode;
    if (!ctx_variant(&ctx, 1)) return;
    p.ctx = &ctx; p.n = 0;
    for (i = 0; i < N * L; i++) flat[i] = 1 + (int32_t)ocr_rng_below(&ctx.rng, 3); /* 3 labels: many repeats */
    for (n = 0; n < N; n++) {   /* each needs at most 2L - 1 frames: fits in 300 */
        int need = L;
        for (i = 1; i < L; i++) need += flat[n * L + i] == flat[n * L + i - 1];
        OCR_CHECK(need <= il[n]);
    }
    logits = pool_f32(&p, "logits", ocr_shape3(T, N, C));
    lp = pool_f32(&p, "lp", logits->shape); grad = pool_f32(&p, "grad", logits->shape);
    tg = pool_i32(&p, "targets", flat, N * L); tlt = pool_i32(&p, "tl", tl, N); ilt = pool_i32(&p, "il", il, N);
    for (mode = 0; mode < 3 && !ocr_test__case_failed; mode++) {
        float *z = (float *)logits->data;
        ocr_tensor_fill_normal(&ctx, logits, 0.0f, mode == 0 ? 25.0f : 1.0f);
        if (mode == 1) for (i = 0; i < T * N; i++) z[i * C] += 30.0f;                /* blank e^30 times likelier */
        if (mode == 2) for (i = 0; i < T * N * C; i++) z[i] = i % C ? -1e4f : 0.0f;  /* labels at e^-10000 */
        OCR_CHECK_OK(&ctx, ocr_nn_log_softmax_forward(&ctx, logits, lp));
        ocr_tensor_zero(&ctx, grad);
        OCR_CHECK_OK(&ctx, ocr_loss_ctc(&ctx, &cfg, lp, tg, tlt, ilt, &r, NULL, grad));
        OCR_CHECK_MSG(isfinite(r.loss) && r.loss > 0.0, "mode %d: loss %g", mode, r.loss);
        OCR_CHECK_MSG(ocr_find_nonfinite(grad) < 0, "mode %d: non-finite gradient", mode);
        for (n = 0; n < N; n++)
            for (t = 0; t < T; t++) {
                double s = 0.0;
                for (c = 0; c < C; c++) {
                    float g = ((const float *)grad->data)[(t * N + n) * C + c];
                    OCR_CHECK(fabsf(g) <= 1.0f / L / N + 1e-6f);
                    s += g;
                }
                if (fabs(s) > 1e-6) { OCR_CHECK_MSG(0, "mode %d sample %d frame %d: gradient row sums to %g", mode, n, t, s); t = T; n = N; }
            }
    }
    pool_free(&p);
    ocr_ctx_free(&ctx);
}

/* Finite differences through log_softmax: logits -> log_softmax -> CTC ('sum'), against the CTC gradient chained
   through log_softmax's backward, which leaves it unchanged. */
static void test_ctc_grad_fd(void) {
    ocr_ctx ctx;
    pool p;
    enum { T = 5, N = 2, C = 4 };
    const int32_t flat[] = {1, 2, 2, 3}, tl[N] = {3, 1}, il[N] = {5, 4};
    ocr_tensor *z, *lp, *g_lp, *dz, *tg, *tlt, *ilt;
    ocr_ctc_config cfg = ocr_ctc_defaults();
    ocr_ctc_result r;
    int64_t e;
    int reported = 0;
    if (!ctx_variant(&ctx, 1)) return;
    p.ctx = &ctx; p.n = 0;
    z = pool_uniform(&p, "z", ocr_shape3(T, N, C), -1.5f, 1.5f);
    lp = pool_f32(&p, "lp", z->shape); g_lp = pool_f32(&p, "g_lp", z->shape); dz = pool_f32(&p, "dz", z->shape);
    tg = pool_i32(&p, "targets", flat, 4); tlt = pool_i32(&p, "tl", tl, N); ilt = pool_i32(&p, "il", il, N);
    if (ocr_test__case_failed) { pool_free(&p); ocr_ctx_free(&ctx); return; }
    cfg.reduction = OCR_CTC_SUM;
    OCR_CHECK_OK(&ctx, ocr_nn_log_softmax_forward(&ctx, z, lp));
    OCR_CHECK_OK(&ctx, ocr_loss_ctc(&ctx, &cfg, lp, tg, tlt, ilt, &r, NULL, g_lp));
    OCR_CHECK_OK(&ctx, ocr_nn_log_softmax_backward(&ctx, lp, g_lp, dz));
    OCR_CHECK_MSG(ocr_test_rel_err((const float *)dz->data, (const float *)g_lp->data, T * N * C, 1e-3) < 1e-5,
                  "log_softmax's backward changed the CTC gradient");
    for (e = 0; e < T * N * C; e++) {
        float *v = (float *)z->data, orig = v[e];
        double lpl, lml, fd, an = ((const float *)dz->data)[e];
        ocr_ctc_result rp, rm;
        v[e] = orig + (float)FD_STEP;
        ocr_nn_log_softmax_forward(&ctx, z, lp);
        OCR_CHECK_OK(&ctx, ocr_loss_ctc(&ctx, &cfg, lp, tg, tlt, ilt, &rp, NULL, NULL));
        v[e] = orig - (float)FD_STEP;
        ocr_nn_log_softmax_forward(&ctx, z, lp);
        OCR_CHECK_OK(&ctx, ocr_loss_ctc(&ctx, &cfg, lp, tg, tlt, ilt, &rm, NULL, NULL));
        v[e] = orig;
        lpl = rp.loss; lml = rm.loss;
        fd = (lpl - lml) / ((double)(orig + (float)FD_STEP) - (double)(orig - (float)FD_STEP));
        if (!(fabs(fd - an) <= FD_TOL * (fabs(an) > 1.0 ? fabs(an) : 1.0)) && reported++ < 5)
            OCR_CHECK_MSG(0, "ctc dL/dz[%lld]: analytic %.7g, finite difference %.7g", (long long)e, an, fd);
    }
    OCR_CHECK_MSG(reported == 0, "%d gradient values off", reported);
    pool_free(&p);
    ocr_ctx_free(&ctx);
}

/* Refusals name the argument, the sample, the label; nothing is written on a refusal. */
static void test_ctc_errors(void) {
    ocr_ctx ctx;
    pool p;
    enum { T = 4, N = 2, C = 3 };
    const int32_t flat[] = {1, 2, 1}, tl[N] = {2, 1}, il[N] = {4, 3};
    ocr_tensor *lp, *grad, *tg, *tlt, *ilt, *tmp;
    ocr_ctc_config cfg = ocr_ctc_defaults();
    int i;
    if (!ctx_variant(&ctx, 1)) return;
    p.ctx = &ctx; p.n = 0;
    lp = pool_f32(&p, "log_probs", ocr_shape3(T, N, C)); grad = pool_f32(&p, "grad", lp->shape);
    tg = pool_i32(&p, "targets", flat, 3); tlt = pool_i32(&p, "target_lengths", tl, N); ilt = pool_i32(&p, "input_lengths", il, N);
    if (ocr_test__case_failed) { pool_free(&p); ocr_ctx_free(&ctx); return; }
    ocr_tensor_fill(&ctx, lp, log(1.0 / 3));
    ocr_tensor_fill(&ctx, grad, 7.0);
    ((int32_t *)tg->data)[2] = 0;
    EXPECT_ERR(&ctx, ocr_loss_ctc(&ctx, &cfg, lp, tg, tlt, ilt, NULL, NULL, grad), OCR_ERANGE, "sample 1", "label 0", "the blank");
    ((int32_t *)tg->data)[2] = 3;
    EXPECT_ERR(&ctx, ocr_loss_ctc(&ctx, &cfg, lp, tg, tlt, ilt, NULL, NULL, grad), OCR_ERANGE, "sample 1", "= 3", "outside the classes");
    ((int32_t *)tg->data)[2] = 1;
    ((int32_t *)ilt->data)[1] = 5;
    EXPECT_ERR(&ctx, ocr_loss_ctc(&ctx, &cfg, lp, tg, tlt, ilt, NULL, NULL, grad), OCR_ERANGE, "input_lengths[1] = 5", "[0, 4]");
    ((int32_t *)ilt->data)[1] = 3;
    ((int32_t *)tlt->data)[1] = 2;
    EXPECT_ERR(&ctx, ocr_loss_ctc(&ctx, &cfg, lp, tg, tlt, ilt, NULL, NULL, grad), OCR_ESHAPE, "targets", "3 labels", "add up to 4");
    ((int32_t *)tlt->data)[1] = -1;
    EXPECT_ERR(&ctx, ocr_loss_ctc(&ctx, &cfg, lp, tg, tlt, ilt, NULL, NULL, grad), OCR_ERANGE, "target_lengths[1] = -1");
    ((int32_t *)tlt->data)[1] = 1;
    cfg.blank = 3;
    EXPECT_ERR(&ctx, ocr_loss_ctc(&ctx, &cfg, lp, tg, tlt, ilt, NULL, NULL, grad), OCR_EINVAL, "cfg.blank = 3");
    cfg.blank = 0;
    cfg.grad_scale = NAN;
    EXPECT_ERR(&ctx, ocr_loss_ctc(&ctx, &cfg, lp, tg, tlt, ilt, NULL, NULL, grad), OCR_EINVAL, "cfg.grad_scale");
    cfg.grad_scale = 1.0f;
    ((float *)lp->data)[5] = NAN;
    EXPECT_ERR(&ctx, ocr_loss_ctc(&ctx, &cfg, lp, tg, tlt, ilt, NULL, NULL, grad), OCR_ENONFINITE, "log_probs");
    ((float *)lp->data)[5] = -INFINITY;
    EXPECT_ERR(&ctx, ocr_loss_ctc(&ctx, &cfg, lp, tg, tlt, ilt, NULL, NULL, grad), OCR_ENONFINITE, "log_probs");
    ((float *)lp->data)[5] = (float)log(1.0 / 3);
    EXPECT_ERR(&ctx, ocr_loss_ctc(&ctx, &cfg, lp, tg, tlt, ilt, NULL, NULL, lp), OCR_EINVAL, "d_log_probs", "shares memory");
    tmp = pool_f32(&p, "targets_f32", ocr_shape1(3));
    EXPECT_ERR(&ctx, ocr_loss_ctc(&ctx, &cfg, lp, tmp, tlt, ilt, NULL, NULL, grad), OCR_EDTYPE, "targets", "I32");
    tmp = pool_f32(&p, "lp_2d", ocr_shape2(T, C));
    EXPECT_ERR(&ctx, ocr_loss_ctc(&ctx, &cfg, tmp, tg, tlt, ilt, NULL, NULL, grad), OCR_ESHAPE, "lp_2d", "[T, N, C]");
    tmp = pool_f32(&p, "sample_loss", ocr_shape1(3));
    EXPECT_ERR(&ctx, ocr_loss_ctc(&ctx, &cfg, lp, tg, tlt, ilt, NULL, tmp, grad), OCR_ESHAPE, "sample_loss", "[2]");
    for (i = 0; i < T * N * C; i++)
        if (((const float *)grad->data)[i] != 7.0f) { OCR_CHECK_MSG(0, "a refused call wrote the gradient at %d", i); break; }
    /* and an accepted call accumulates */
    OCR_CHECK_OK(&ctx, ocr_loss_ctc(&ctx, &cfg, lp, tg, tlt, ilt, NULL, NULL, grad));
    {
        int changed = 0;
        for (i = 0; i < T * N * C; i++) {
            float g = ((const float *)grad->data)[i];
            changed += g != 7.0f;
            OCR_CHECK(fabsf(g - 7.0f) < 1.0f);
        }
        OCR_CHECK(changed > 0);
    }
    pool_free(&p);
    ocr_ctx_free(&ctx);
}

/* ---------------------------------------------------------------- decoding */

/* Best path on a hand-made table (ties to the lower index), input lengths, the path's score. */
static void test_ctc_greedy(void) {
    ocr_ctx ctx;
    pool p;
    enum { T = 9, C = 4 };
    /* frame winners: 1 1 0 1 2 2 0 0 3; in sample 1, frame 3 ties classes 2 and 3 above 1 */
    const int win[T] = {1, 1, 0, 1, 2, 2, 0, 0, 3};
    ocr_tensor *lp, *labels, *lengths, *scores, *ilt;
    const int32_t il[2] = {9, 5};
    double score = 0.0;
    int t, c, n;
    if (!ctx_variant(&ctx, 1)) return;
    p.ctx = &ctx; p.n = 0;
    lp = pool_f32(&p, "lp", ocr_shape3(T, 2, C));
    labels = pool_new(&p, "labels", OCR_I32, ocr_shape2(2, T)); lengths = pool_new(&p, "lengths", OCR_I32, ocr_shape1(2));
    scores = pool_f32(&p, "scores", ocr_shape1(2)); ilt = pool_i32(&p, "il", il, 2);
    if (ocr_test__case_failed) { pool_free(&p); ocr_ctx_free(&ctx); return; }
    for (t = 0; t < T; t++)
        for (n = 0; n < 2; n++)
            for (c = 0; c < C; c++) {
                float v = c == win[t] ? -0.2f : -2.5f - 0.1f * (float)c;
                if (n == 1 && t == 3 && (c == 2 || c == 3)) v = -0.1f;   /* tie: class 2 wins */
                ((float *)lp->data)[(t * 2 + n) * C + c] = v;
            }
    for (t = 0; t < T; t++) score += -0.2f;
    OCR_CHECK_OK(&ctx, ocr_ctc_greedy_decode(&ctx, lp, NULL, 0, labels, lengths, scores));
    {
        const int32_t *lb = (const int32_t *)labels->data, *ln = (const int32_t *)lengths->data;
        OCR_CHECK_MSG(ln[0] == 4 && lb[0] == 1 && lb[1] == 1 && lb[2] == 2 && lb[3] == 3 && lb[4] == -1, "greedy sample 0: %d: %d %d %d %d",
                      ln[0], lb[0], lb[1], lb[2], lb[3]);
        OCR_CHECK(fabs(((const float *)scores->data)[0] - score) < 1e-5);
    }
    OCR_CHECK_OK(&ctx, ocr_ctc_greedy_decode(&ctx, lp, ilt, 0, labels, lengths, NULL));
    {   /* sample 1, 5 frames: 1 1 0 2 2 -> "1 2" */
        const int32_t *lb = (const int32_t *)labels->data + T, *ln = (const int32_t *)lengths->data;
        OCR_CHECK_MSG(ln[1] == 2 && lb[0] == 1 && lb[1] == 2 && lb[2] == -1, "greedy sample 1: %d: %d %d", ln[1], lb[0], lb[1]);
    }
    EXPECT_ERR(&ctx, ocr_ctc_greedy_decode(&ctx, lp, NULL, 4, labels, lengths, NULL), OCR_EINVAL, "blank = 4");
    EXPECT_ERR(&ctx, ocr_ctc_greedy_decode(&ctx, lp, NULL, 0, lengths, lengths, NULL), OCR_ESHAPE, "labels");
    pool_free(&p);
    ocr_ctx_free(&ctx);
}

/* Two frames, each blank 0.4, a 0.35, b 0.25: the best path is blank-blank (""), p 0.16, but "a" has p 0.4025
   over three paths (aa, a-, -a) and "b" 0.2625; the beam search finds them in that order, greedy does not. */
static void test_ctc_beam_beats_greedy(void) {
    ocr_ctx ctx;
    pool p;
    const double row[3] = {0.4, 0.35, 0.25};
    double prob[6];
    ocr_tensor *lp, *labels, *lengths, *scores, *g_labels, *g_len;
    int i;
    if (!ctx_variant(&ctx, 1)) return;
    p.ctx = &ctx; p.n = 0;
    for (i = 0; i < 6; i++) prob[i] = row[i % 3];
    lp = lp_table(&p, prob, 2, 3);
    labels = pool_new(&p, "labels", OCR_I32, ocr_shape3(1, 3, 2)); lengths = pool_new(&p, "lengths", OCR_I32, ocr_shape2(1, 3));
    scores = pool_f32(&p, "scores", ocr_shape2(1, 3));
    g_labels = pool_new(&p, "g_labels", OCR_I32, ocr_shape2(1, 2)); g_len = pool_new(&p, "g_len", OCR_I32, ocr_shape1(1));
    if (ocr_test__case_failed) { pool_free(&p); ocr_ctx_free(&ctx); return; }
    OCR_CHECK_OK(&ctx, ocr_ctc_greedy_decode(&ctx, lp, NULL, 0, g_labels, g_len, NULL));
    OCR_CHECK_MSG(((const int32_t *)g_len->data)[0] == 0, "greedy should give the empty string here");
    OCR_CHECK_OK(&ctx, ocr_ctc_beam_decode(&ctx, lp, NULL, 0, 3, labels, lengths, scores));
    {
        const int32_t *lb = (const int32_t *)labels->data, *ln = (const int32_t *)lengths->data;
        const float *sc = (const float *)scores->data;
        OCR_CHECK_MSG(ln[0] == 1 && lb[0] == 1 && fabs(sc[0] - log(0.4025)) < 1e-6, "beam 1st: len %d label %d score %g", ln[0], lb[0], sc[0]);
        OCR_CHECK_MSG(ln[1] == 1 && lb[2] == 2 && fabs(sc[1] - log(0.2625)) < 1e-6, "beam 2nd: len %d label %d score %g", ln[1], lb[2], sc[1]);
        OCR_CHECK_MSG(ln[2] == 0 && lb[4] == -1 && fabs(sc[2] - log(0.16)) < 1e-6, "beam 3rd: len %d score %g", ln[2], sc[2]);
    }
    EXPECT_ERR(&ctx, ocr_ctc_beam_decode(&ctx, lp, NULL, 0, 2, labels, lengths, scores), OCR_ESHAPE, "labels", "K <= beam_width 2");
    EXPECT_ERR(&ctx, ocr_ctc_beam_decode(&ctx, lp, NULL, 0, 0, labels, lengths, scores), OCR_EINVAL, "beam_width = 0");
    pool_free(&p);
    ocr_ctx_free(&ctx);
}

/* Every labelling's probability by enumerating the alignments of one sample; returns how many labellings. */
typedef struct { int len; int lab[8]; double p; } labelling;
static int enumerate_labellings(const float *lp, int64_t ld, int T, int C, labelling *out, int cap) {
    int64_t paths = 1, k;
    int t, count = 0, i;
    for (t = 0; t < T; t++) paths *= C;
    for (k = 0; k < paths; k++) {
        labelling cur;
        int prev = -1, found = -1;
        int64_t r = k;
        double lpp = 0.0;
        cur.len = 0;
        for (t = 0; t < T; t++) {
            int c = (int)(r % C);
            r /= C;
            lpp += lp[t * ld + c];
            if (c != 0 && c != prev) cur.lab[cur.len++] = c;
            prev = c;
        }
        for (i = 0; i < count && found < 0; i++)
            if (out[i].len == cur.len && !memcmp(out[i].lab, cur.lab, sizeof(int) * (size_t)cur.len)) found = i;
        if (found < 0) {
            if (count == cap) return -1;
            cur.p = 0.0;
            out[found = count++] = cur;
        }
        out[found].p += exp(lpp);
    }
    return count;
}
static int labelling_cmp(const void *a, const void *b) {
    double x = ((const labelling *)a)->p, y = ((const labelling *)b)->p;
    return x > y ? -1 : x < y;
}

/* A beam wide enough to keep every prefix is exact: its K best against the enumeration, on random tables of two
   samples (one shorter), including a peaked one where repeats matter. */
static void test_ctc_beam_exact(void) {
    ocr_ctx ctx;
    pool p;
    enum { T = 5, N = 2, C = 4, K = 6, B = 400 };
    static labelling all[512];
    const int32_t il[N] = {5, 4};
    ocr_tensor *logits, *lp, *labels, *lengths, *scores, *ilt;
    int n, k, i, round;
    if (!ctx_variant(&ctx, 1)) return;
    p.ctx = &ctx; p.n = 0;
    logits = pool_f32(&p, "logits", ocr_shape3(T, N, C)); lp = pool_f32(&p, "lp", logits->shape);
    labels = pool_new(&p, "labels", OCR_I32, ocr_shape3(N, K, T)); lengths = pool_new(&p, "lengths", OCR_I32, ocr_shape2(N, K));
    scores = pool_f32(&p, "scores", ocr_shape2(N, K)); ilt = pool_i32(&p, "il", il, N);
    for (round = 0; round < 3 && !ocr_test__case_failed; round++) {
        ocr_tensor_fill_normal(&ctx, logits, 0.0f, round == 2 ? 3.0f : 1.0f);
        OCR_CHECK_OK(&ctx, ocr_nn_log_softmax_forward(&ctx, logits, lp));
        OCR_CHECK_OK(&ctx, ocr_ctc_beam_decode(&ctx, lp, ilt, 0, B, labels, lengths, scores));
        for (n = 0; n < N; n++) {
            int count = enumerate_labellings((const float *)lp->data + n * C, N * C, il[n], C, all, 512);
            OCR_CHECK(count >= K);
            if (count < K) break;
            qsort(all, (size_t)count, sizeof *all, labelling_cmp);
            for (k = 0; k < K; k++) {
                const int32_t *lb = (const int32_t *)labels->data + (n * K + k) * T;
                int len = ((const int32_t *)lengths->data)[n * K + k], same = len == all[k].len;
                for (i = 0; same && i < len; i++) same = lb[i] == all[k].lab[i];
                OCR_CHECK_MSG(same, "round %d sample %d: hypothesis %d differs from the enumeration's (length %d vs %d)", round, n, k,
                              len, all[k].len);
                OCR_CHECK_MSG(fabs(((const float *)scores->data)[n * K + k] - log(all[k].p)) < 2e-5,
                              "round %d sample %d hypothesis %d: score %.7g, enumerated %.7g", round, n, k,
                              ((const float *)scores->data)[n * K + k], log(all[k].p));
            }
        }
    }
    /* fewer prefixes than asked: one frame, one label -> "" and "1"; the third does not exist */
    {
        double prob[2] = {0.3, 0.7};
        ocr_tensor *one = lp_table(&p, prob, 1, 2), *lb = pool_new(&p, "lb", OCR_I32, ocr_shape3(1, 3, 1));
        ocr_tensor *ln = pool_new(&p, "ln", OCR_I32, ocr_shape2(1, 3)), *sc = pool_f32(&p, "sc", ocr_shape2(1, 3));
        OCR_CHECK_OK(&ctx, ocr_ctc_beam_decode(&ctx, one, NULL, 0, 3, lb, ln, sc));
        OCR_CHECK(((const int32_t *)ln->data)[0] == 1 && ((const int32_t *)lb->data)[0] == 1 && ((const int32_t *)ln->data)[1] == 0 &&
                  ((const int32_t *)ln->data)[2] == -1 && ((const float *)sc->data)[2] == -INFINITY);
    }
    pool_free(&p);
    ocr_ctx_free(&ctx);
}

int main(int argc, char **argv) {
    ocr_test_init(argc, argv);
    OCR_TEST_RUN(test_lstm_parity);
    OCR_TEST_RUN(test_lstm_fast_vs_reference);
    OCR_TEST_RUN(test_lstm_threads_same_bits);
    OCR_TEST_RUN(test_lstm_grad_fd);
    OCR_TEST_RUN(test_lstm_gates);
    OCR_TEST_RUN(test_lstm_amp);
    OCR_TEST_RUN(test_lstm_params);
    OCR_TEST_RUN(test_lstm_errors);
    OCR_TEST_RUN(test_log_softmax_parity);
    OCR_TEST_RUN(test_log_softmax_grad_fd);
    OCR_TEST_RUN(test_maxpool_rect_parity);
    OCR_TEST_RUN(test_map_to_seq_parity);
    OCR_TEST_RUN(test_linear_and_mask);
    OCR_TEST_RUN(test_ctc_parity);
    OCR_TEST_RUN(test_ctc_closed_forms);
    OCR_TEST_RUN(test_ctc_brute_force);
    OCR_TEST_RUN(test_ctc_long_stable);
    OCR_TEST_RUN(test_ctc_grad_fd);
    OCR_TEST_RUN(test_ctc_errors);
    OCR_TEST_RUN(test_ctc_greedy);
    OCR_TEST_RUN(test_ctc_beam_beats_greedy);
    OCR_TEST_RUN(test_ctc_beam_exact);
    return ocr_test_finish();
}
