/* ocr_loss.h: parity with the PyTorch reference of the official DB loss (tools/make_loss_fixtures.py), finite
   differences on every term, O(n) OHEM selection against a sort, thousands of extreme inputs without NaN/Inf,
   and every bad-input class returning its error without reading out of bounds (run under ASan by build.sh). */
#define OCR_IMPLEMENTATION
#include "ocr_tensor.h"
#include "ocr_loss.h"
#include "ocr_test.h"

#include <float.h>

#define FIXTURE "tests/fixtures/loss/db_loss.safetensors"

static int all_finite(const float *p, int64_t n) {
    int64_t i;
    for (i = 0; i < n; i++) if (!isfinite(p[i])) return 0;
    return 1;
}

static double max_abs(const float *p, int64_t n) {
    double m = 0.0;
    int64_t i;
    for (i = 0; i < n; i++) if (fabs((double)p[i]) > m) m = fabs((double)p[i]);
    return m;
}

/* |got - ref| <= rtol |ref| + floor_rel * max|ref| for every element */
static int close_scaled(const char *what, const float *got, const float *ref, int64_t n, double rtol, double floor_rel) {
    return ocr_test_close(what, got, ref, (long long)n, rtol, floor_rel * max_abs(ref, n) + 1e-30);
}

static int close_scalar(const char *what, double got, double ref, double rtol, double atol) {
    if (fabs(got - ref) <= rtol * fabs(ref) + atol) return 1;
    fprintf(stderr, "  %s: got %.9g, expected %.9g\n", what, got, ref);
    ocr_test__case_failed = 1;
    return 0;
}

static ocr_db_loss_config config_from(const float *v) {
    ocr_db_loss_config c = ocr_db_loss_defaults();
    c.bce.mode = (int)v[0];
    c.bce.negative_ratio = v[1];
    c.bce.pos_weight = v[2];
    c.bce.eps = v[3];
    c.bce_weight = v[4];
    c.dice_weight = v[5];
    c.l1_weight = v[6];
    c.binary_bce_weight = v[7];
    c.k = v[8];
    c.dice_eps = v[9];
    return c;
}

/* ---------------------------------------------------------------- parity with the PyTorch reference */

static const char *const input_names[6] = {"prob_logits", "thresh", "gt_shrink", "mask_shrink", "gt_thresh", "mask_thresh"};

static void test_parity_reference(void) {
    ocr_ctx ctx;
    ocr_safetensors st;
    int n_cases, n_cfgs, c, k, i;
    const char *meta;
    OCR_CHECK_OK(&ctx, ocr_ctx_init(&ctx, 2, 1));
    if (ocr_safetensors_open(&ctx, &st, FIXTURE) != OCR_OK) {
        OCR_CHECK_MSG(0, "%s (regenerate with /usr/bin/python3 tools/make_loss_fixtures.py)", ocr_ctx_last_error(&ctx));
        ocr_ctx_free(&ctx);
        return;
    }
    meta = ocr_safetensors_meta(&st, "cases");
    n_cases = meta ? atoi(meta) : 0;
    meta = ocr_safetensors_meta(&st, "configs");
    n_cfgs = meta ? atoi(meta) : 0;
    OCR_CHECK(n_cases >= 10 && n_cfgs >= 5);
    for (c = 0; c < n_cases; c++) {
        ocr_tensor in[6], dx, dT, bin;
        char name[96];
        for (i = 0; i < 6; i++) {
            snprintf(name, sizeof name, "c%d.%s", c, input_names[i]);
            OCR_CHECK_OK(&ctx, ocr_safetensors_read(&ctx, &st, name, &in[i]));
        }
        OCR_CHECK_OK(&ctx, ocr_tensor_alloc(&ctx, &dx, "d_prob_logits", OCR_F32, OCR_DEVICE_CPU, in[0].shape));
        OCR_CHECK_OK(&ctx, ocr_tensor_alloc(&ctx, &dT, "d_thresh", OCR_F32, OCR_DEVICE_CPU, in[0].shape));
        OCR_CHECK_OK(&ctx, ocr_tensor_alloc(&ctx, &bin, "binary", OCR_F32, OCR_DEVICE_CPU, in[0].shape));
        for (k = 0; k < n_cfgs; k++) {
            ocr_tensor cfg_t, terms_t, off_t, rdx, rdT;
            ocr_db_loss_config cfg;
            ocr_db_loss_terms got;
            const float *ref, *off;
            char what[160];
            int64_t n = ocr_tensor_numel(&in[0]);
            snprintf(name, sizeof name, "c%d.k%d.config", c, k);
            OCR_CHECK_OK(&ctx, ocr_safetensors_read(&ctx, &st, name, &cfg_t));
            snprintf(name, sizeof name, "c%d.k%d.terms", c, k);
            OCR_CHECK_OK(&ctx, ocr_safetensors_read(&ctx, &st, name, &terms_t));
            snprintf(name, sizeof name, "c%d.k%d.official", c, k);
            OCR_CHECK_OK(&ctx, ocr_safetensors_read(&ctx, &st, name, &off_t));
            snprintf(name, sizeof name, "c%d.k%d.d_prob_logits", c, k);
            OCR_CHECK_OK(&ctx, ocr_safetensors_read(&ctx, &st, name, &rdx));
            snprintf(name, sizeof name, "c%d.k%d.d_thresh", c, k);
            OCR_CHECK_OK(&ctx, ocr_safetensors_read(&ctx, &st, name, &rdT));
            if (ocr_test__case_failed) { ocr_safetensors_close(&st); ocr_ctx_free(&ctx); return; }
            cfg = config_from((const float *)cfg_t.data);
            ref = (const float *)terms_t.data;
            off = (const float *)off_t.data;
            ocr_tensor_zero(&ctx, &dx);
            ocr_tensor_zero(&ctx, &dT);
            OCR_CHECK_OK(&ctx, ocr_loss_db(&ctx, &cfg, &in[0], &in[1], &in[2], &in[3], &in[4], &in[5], &got, &dx, &dT));
            snprintf(what, sizeof what, "case %d config %d total", c, k);
            close_scalar(what, got.total, ref[0], 1e-4, 1e-7);
            snprintf(what, sizeof what, "case %d config %d bce", c, k);
            close_scalar(what, got.bce, ref[1], 1e-4, 1e-7);
            snprintf(what, sizeof what, "case %d config %d dice", c, k);
            close_scalar(what, got.dice, ref[2], 1e-4, 1e-7);
            snprintf(what, sizeof what, "case %d config %d l1", c, k);
            close_scalar(what, got.l1, ref[3], 1e-4, 1e-7);
            snprintf(what, sizeof what, "case %d config %d bce_binary", c, k);
            close_scalar(what, got.bce_binary, ref[4], 1e-4, 1e-7);
            if (off[1] == 0.0f) { /* the official (probability, clamped) form is not in its clamp: it must agree too */
                snprintf(what, sizeof what, "case %d config %d total vs official form", c, k);
                close_scalar(what, got.total, off[0], 1e-4, 1e-7);
            }
            snprintf(what, sizeof what, "case %d config %d d_prob_logits", c, k);
            close_scaled(what, (const float *)dx.data, (const float *)rdx.data, n, 1e-4, 1e-6);
            snprintf(what, sizeof what, "case %d config %d d_thresh", c, k);
            close_scaled(what, (const float *)dT.data, (const float *)rdT.data, n, 1e-4, 1e-6);

            /* each term on its own must give the same values */
            if (cfg.bce_weight > 0.0f) {
                double v;
                OCR_CHECK_OK(&ctx, ocr_loss_bce(&ctx, &cfg.bce, &in[0], &in[2], &in[3], 1.0f, &v, NULL));
                snprintf(what, sizeof what, "case %d config %d ocr_loss_bce", c, k);
                close_scalar(what, v, ref[1], 1e-4, 1e-7);
            }
            if (cfg.dice_weight > 0.0f) {
                double v;
                OCR_CHECK_OK(&ctx, ocr_loss_db_step_forward(&ctx, cfg.k, &in[0], &in[1], &bin));
                OCR_CHECK_OK(&ctx, ocr_loss_dice(&ctx, cfg.dice_eps, &bin, &in[2], &in[3], NULL, 1.0f, &v, NULL));
                snprintf(what, sizeof what, "case %d config %d ocr_loss_dice", c, k);
                close_scalar(what, v, ref[2], 1e-4, 1e-7);
            }
            if (cfg.l1_weight > 0.0f) {
                double v;
                OCR_CHECK_OK(&ctx, ocr_loss_masked_l1(&ctx, &in[1], &in[4], &in[5], 1.0f, &v, NULL));
                snprintf(what, sizeof what, "case %d config %d ocr_loss_masked_l1", c, k);
                close_scalar(what, v, ref[3], 1e-4, 1e-7);
            }
            ocr_tensor_free(&cfg_t); ocr_tensor_free(&terms_t); ocr_tensor_free(&off_t);
            ocr_tensor_free(&rdx); ocr_tensor_free(&rdT);
        }
        for (i = 0; i < 6; i++) ocr_tensor_free(&in[i]);
        ocr_tensor_free(&dx); ocr_tensor_free(&dT); ocr_tensor_free(&bin);
    }
    ocr_safetensors_close(&st);
    ocr_ctx_free(&ctx);
}

/* ---------------------------------------------------------------- finite differences */

/* A small problem whose arrays the finite-difference loop perturbs in place. */
#define FD_N 2
#define FD_H 4
#define FD_W 6
#define FD_P (FD_N * FD_H * FD_W)

typedef struct {
    ocr_ctx *ctx;
    float x[FD_P], t[FD_P], gs[FD_P], ms[FD_P], gt[FD_P], mt[FD_P], w[FD_P];
    ocr_tensor X, T, GS, MS, GT, MT, W;
    ocr_db_loss_config cfg;
    int term; /* which function the loss callback evaluates */
    float r[FD_P]; /* random weights for the step's f = sum r_i B_i */
} fd_problem;

enum { FD_DB, FD_BCE, FD_DICE, FD_L1, FD_STEP };

static void fd_init(fd_problem *p, ocr_ctx *ctx) {
    ocr_shape s = ocr_shape4(FD_N, 1, FD_H, FD_W);
    int i, j;
    memset(p, 0, sizeof *p);
    p->ctx = ctx;
    p->X = ocr_tensor_f32("x", s, p->x); p->T = ocr_tensor_f32("t", s, p->t);
    p->GS = ocr_tensor_f32("gs", s, p->gs); p->MS = ocr_tensor_f32("ms", s, p->ms);
    p->GT = ocr_tensor_f32("gt", s, p->gt); p->MT = ocr_tensor_f32("mt", s, p->mt);
    p->W = ocr_tensor_f32("w", s, p->w);
    /* logits: distinct points of a 1/16 grid in [-2, 2] (a shuffled ramp), so OHEM ranks are well separated */
    for (i = 0; i < FD_P; i++) p->x[i] = -2.0f + (float)((i * 37) % 64) / 16.0f;
    for (i = 0; i < FD_P; i++) {
        p->gs[i] = (i % 3 == 0) ? 1.0f : 0.0f;
        p->ms[i] = (i % 11 == 5) ? 0.0f : 1.0f;
        p->mt[i] = (i % 4 == 1) ? 0.0f : (i % 5 == 2 ? 0.5f : 1.0f);
        p->w[i] = 0.25f + 0.75f * ocr_rng_uniform(&ctx->rng);
        p->r[i] = 2.0f * ocr_rng_uniform(&ctx->rng) - 1.0f;
    }
    p->gs[7] = 0.5f; /* a soft target: neither positive nor negative */
    /* thresholds: T = P - z/50 with z on a shuffled grid of step 1.5, so BCE(B) ranks are separated too */
    for (i = 0; i < FD_P; i++) {
        double P = 1.0 / (1.0 + exp(-(double)p->x[i]));
        j = (i * 29) % FD_P;
        p->t[i] = (float)(P - (-30.0 + 1.5 * j) / 50.0);
        p->gt[i] = p->t[i] + ((i & 1) ? 0.2f : -0.2f); /* |T - target| stays far from 0 */
        if (p->gt[i] < 0.0f || p->gt[i] > 1.0f) p->gt[i] = p->t[i] < 0.5f ? 0.9f : 0.1f;
    }
}

static double fd_loss(fd_problem *p, float *dx, float *dt) {
    ocr_ctx *ctx = p->ctx;
    ocr_tensor DX = ocr_tensor_f32("dx", p->X.shape, dx), DT = ocr_tensor_f32("dt", p->X.shape, dt);
    double v = 0.0;
    int rc = OCR_OK, i;
    switch (p->term) {
    case FD_DB: {
        ocr_db_loss_terms terms;
        rc = ocr_loss_db(ctx, &p->cfg, &p->X, &p->T, &p->GS, &p->MS, &p->GT, &p->MT, &terms, dx ? &DX : NULL, dt ? &DT : NULL);
        v = terms.total;
        break;
    }
    case FD_BCE: rc = ocr_loss_bce(ctx, &p->cfg.bce, &p->X, &p->GS, &p->MS, 1.0f, &v, dx ? &DX : NULL); break;
    case FD_DICE: {
        /* Dice of probabilities: x holds them here, on (0, 1) */
        rc = ocr_loss_dice(ctx, p->cfg.dice_eps, &p->X, &p->GS, &p->MS, &p->W, 1.0f, &v, dx ? &DX : NULL);
        break;
    }
    case FD_L1: rc = ocr_loss_masked_l1(ctx, &p->T, &p->GT, &p->MT, 1.0f, &v, dt ? &DT : NULL); break;
    case FD_STEP: {
        float b[FD_P];
        ocr_tensor B = ocr_tensor_f32("b", p->X.shape, b), R = ocr_tensor_f32("r", p->X.shape, p->r);
        rc = ocr_loss_db_step_forward(ctx, p->cfg.k, &p->X, &p->T, &B);
        for (i = 0; i < FD_P; i++) v += (double)p->r[i] * b[i];
        if (!rc && (dx || dt)) rc = ocr_loss_db_step_backward(ctx, p->cfg.k, &p->X, &p->T, &R, dx ? &DX : NULL, dt ? &DT : NULL);
        break;
    }
    default: break;
    }
    if (rc) {
        OCR_CHECK_MSG(0, "%s", ocr_ctx_last_error(ctx));
        return NAN;
    }
    return v;
}

/* Central differences on every element of one input, against the analytic gradient. */
static void fd_compare(fd_problem *p, const char *what, float *input, const float *analytic, double h) {
    double gmax = max_abs(analytic, FD_P);
    int i, bad = 0;
    for (i = 0; i < FD_P; i++) {
        float keep = input[i], up = (float)(keep + h), down = (float)(keep - h);
        double fu, fd, num;
        input[i] = up;
        fu = fd_loss(p, NULL, NULL);
        input[i] = down;
        fd = fd_loss(p, NULL, NULL);
        input[i] = keep;
        num = (fu - fd) / ((double)up - (double)down);
        if (!(fabs(num - analytic[i]) <= 2e-3 * fabs(analytic[i]) + 2e-3 * gmax + 1e-7)) {
            if (bad++ < 4) fprintf(stderr, "  %s[%d]: analytic %.8g, finite difference %.8g\n", what, i, analytic[i], num);
            ocr_test__case_failed = 1;
        }
    }
    OCR_CHECK_MSG(gmax > 0.0, "%s: the gradient is all zero, the check would be vacuous", what);
}

static void fd_run(fd_problem *p, const char *what, int wrt_x, int wrt_t, double h) {
    float dx[FD_P], dt[FD_P];
    char name[160];
    memset(dx, 0, sizeof dx);
    memset(dt, 0, sizeof dt);
    fd_loss(p, wrt_x ? dx : NULL, wrt_t ? dt : NULL);
    if (wrt_x) { snprintf(name, sizeof name, "%s d/dx", what); fd_compare(p, name, p->x, dx, h); }
    if (wrt_t) { snprintf(name, sizeof name, "%s d/dT", what); fd_compare(p, name, p->t, dt, h); }
}

static void test_finite_differences(void) {
    ocr_ctx ctx;
    fd_problem p;
    int mode, i;
    OCR_CHECK_OK(&ctx, ocr_ctx_init(&ctx, 1, 3));
    for (mode = OCR_LOSS_BCE_OHEM; mode <= OCR_LOSS_BCE_POS_WEIGHT; mode++) {
        char what[64];
        fd_init(&p, &ctx);
        p.cfg = ocr_db_loss_defaults();
        p.cfg.bce.mode = mode;
        p.cfg.bce.negative_ratio = 1.5f; /* some negatives kept, some dropped */
        p.cfg.bce.pos_weight = 3.0f;
        p.term = FD_BCE;
        snprintf(what, sizeof what, "bce mode %d", mode);
        fd_run(&p, what, 1, 0, 1.0 / 1024);
        /* the whole DB loss in this BCE mode, with the paper's BCE(B) on as well */
        p.term = FD_DB;
        p.cfg.binary_bce_weight = 0.5f;
        snprintf(what, sizeof what, "db loss, bce mode %d", mode);
        fd_run(&p, what, 1, 1, 1.0 / 1024);
    }
    fd_init(&p, &ctx);
    p.cfg = ocr_db_loss_defaults();
    p.term = FD_DB;
    fd_run(&p, "db loss, official weights", 1, 1, 1.0 / 1024);
    p.cfg = ocr_db_loss_paper();
    fd_run(&p, "db loss, paper weights", 1, 1, 1.0 / 1024);
    p.cfg = ocr_db_loss_defaults();
    p.cfg.bce.mode = OCR_LOSS_BCE_POS_WEIGHT;
    p.cfg.bce.pos_weight = 3.0f;
    p.cfg.prob_dice_weight = 1.0f;
    fd_run(&p, "db loss with Dice(P), train_dbnet's recipe", 1, 1, 1.0 / 1024);
    p.term = FD_STEP;
    fd_run(&p, "step", 1, 1, 1.0 / 1024);
    p.term = FD_L1;
    fd_run(&p, "masked l1", 0, 1, 1.0 / 1024);
    /* Dice takes probabilities: put them in x */
    for (i = 0; i < FD_P; i++) p.x[i] = 0.05f + 0.9f * (float)((i * 37) % 64) / 64.0f;
    p.term = FD_DICE;
    fd_run(&p, "dice", 1, 0, 1.0 / 1024);
    ocr_ctx_free(&ctx);
}

/* Dice(P) alone against the formula in double: 1 - 2 sum(p g m) / (sum(p m) + sum(g m) + eps), p = sigmoid(x), and its
   logit gradient -2 m p (1-p) (g (S) - I) / S^2 with S the denominator and I the intersection. */
static void test_prob_dice(void) {
    enum { N = 777 };
    static float x[N], g[N], m[N], d[N];
    ocr_ctx ctx;
    ocr_shape s = ocr_shape4(1, 1, 1, N);
    ocr_tensor X = ocr_tensor_f32("x", s, x), G = ocr_tensor_f32("gt", s, g), M = ocr_tensor_f32("mask", s, m);
    ocr_tensor D = ocr_tensor_f32("d", s, d), T = ocr_tensor_f32("thresh", s, g);
    ocr_db_loss_config cfg = ocr_db_loss_defaults();
    ocr_db_loss_terms terms;
    double inter = 0, sp = 0, sg = 0, S, worst = 0;
    int i;
    OCR_CHECK_OK(&ctx, ocr_ctx_init(&ctx, 2, 5));
    for (i = 0; i < N; i++) {
        x[i] = 3.0f * ocr_rng_normal(&ctx.rng);
        g[i] = ocr_rng_uniform(&ctx.rng) < 0.3f ? 1.0f : 0.0f;
        m[i] = ocr_rng_uniform(&ctx.rng) < 0.1f ? 0.0f : 1.0f;
        d[i] = 0.0f;
    }
    for (i = 0; i < N; i++) {
        double p = 1.0 / (1.0 + exp(-(double)x[i]));
        inter += p * g[i] * m[i]; sp += p * m[i]; sg += (double)g[i] * m[i];
    }
    S = sp + sg + (double)cfg.dice_eps;
    cfg.bce_weight = cfg.dice_weight = cfg.l1_weight = 0.0f;
    cfg.prob_dice_weight = 2.0f;
    OCR_CHECK_OK(&ctx, ocr_loss_db(&ctx, &cfg, &X, &T, &G, &M, &G, &M, &terms, &D, NULL));
    close_scalar("Dice(P) value", terms.dice_prob, 1.0 - 2.0 * inter / S, 1e-6, 1e-9);
    close_scalar("Dice(P) weighted total", terms.total, 2.0 * (1.0 - 2.0 * inter / S), 1e-6, 1e-9);
    OCR_CHECK(terms.bce == 0.0 && terms.dice == 0.0 && terms.l1 == 0.0);
    for (i = 0; i < N; i++) {
        double p = 1.0 / (1.0 + exp(-(double)x[i]));
        double ref = 2.0 * -2.0 * m[i] * p * (1.0 - p) * ((double)g[i] * S - inter) / (S * S);
        double err = fabs(d[i] - ref) / (fabs(ref) + 1e-7);
        if (err > worst) worst = err;
    }
    OCR_CHECK_MSG(worst < 1e-4, "Dice(P) gradient: worst relative error %.3g", worst);
    ocr_ctx_free(&ctx);
}

/* ---------------------------------------------------------------- OHEM selection */

static int cmp_desc(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? 1 : x > y ? -1 : 0;
}

/* softplus written independently of the library, in double */
static double ref_bce(double x, double y) { return (x > 0 ? x : 0.0) - x * y + log1p(exp(-fabs(x))); }

static void ohem_case(ocr_ctx *ctx, int64_t n, int levels, double pos_frac, float ratio, const char *what) {
    float *x = (float *)malloc((size_t)n * sizeof(float)), *g = (float *)malloc((size_t)n * sizeof(float));
    float *m = (float *)malloc((size_t)n * sizeof(float)), *d = (float *)calloc((size_t)n, sizeof(float));
    double *neg = (double *)malloc((size_t)n * sizeof(double)), pos_sum = 0.0, sel = 0.0, value = 0.0, grad_ref = 0.0, grad_sum = 0.0;
    ocr_shape s = ocr_shape4(1, 1, 1, n);
    ocr_tensor X = ocr_tensor_f32("x", s, x), G = ocr_tensor_f32("gt", s, g), M = ocr_tensor_f32("mask", s, m);
    ocr_tensor D = ocr_tensor_f32("d", s, d);
    ocr_loss_bce_config cfg = ocr_loss_bce_defaults();
    int64_t i, pc = 0, nn = 0, kept;
    char name[128];
    cfg.negative_ratio = ratio;
    for (i = 0; i < n; i++) {
        /* few distinct levels: many exact ties at the cut */
        x[i] = levels > 0 ? (float)((int)ocr_rng_below(&ctx->rng, (uint32_t)levels) - levels / 2) * 0.5f : 4.0f * ocr_rng_normal(&ctx->rng);
        g[i] = ocr_rng_uniform(&ctx->rng) < pos_frac ? 1.0f : 0.0f;
        m[i] = ocr_rng_uniform(&ctx->rng) < 0.05 ? 0.0f : 1.0f;
        if (m[i] == 1.0f && g[i] == 1.0f) { pc++; pos_sum += ref_bce(x[i], 1.0); grad_ref += 1.0 / (1.0 + exp(-(double)x[i])) - 1.0; }
        if (m[i] == 1.0f && g[i] == 0.0f) neg[nn++] = ref_bce(x[i], 0.0);
    }
    qsort(neg, (size_t)nn, sizeof(double), cmp_desc);
    kept = (int64_t)floor((double)pc * ratio);
    if (kept > nn) kept = nn;
    for (i = 0; i < kept; i++) {
        sel += neg[i];
        grad_ref += -expm1(-neg[i]); /* sigmoid(x) of a negative whose softplus(x) is neg[i] */
    }
    if (pc + kept > 0) { value = (pos_sum + sel) / ((double)(pc + kept) + cfg.eps); grad_ref /= (double)(pc + kept) + cfg.eps; }
    else grad_ref = 0.0;
    {
        double got;
        OCR_CHECK_OK(ctx, ocr_loss_bce(ctx, &cfg, &X, &G, &M, 1.0f, &got, &D));
        snprintf(name, sizeof name, "%s: value vs sort (n=%lld, k=%lld)", what, (long long)n, (long long)kept);
        close_scalar(name, got, value, 2e-6, 1e-12);
    }
    for (i = 0; i < n; i++) grad_sum += d[i];
    snprintf(name, sizeof name, "%s: gradient sum", what);
    close_scalar(name, grad_sum, grad_ref, 1e-4, 1e-9);
    free(x); free(g); free(m); free(d); free(neg);
}

static void test_ohem_selection_matches_sort(void) {
    ocr_ctx ctx;
    int threads;
    int64_t big = ocr_test_sanitized() ? 20000 : 300000;
    for (threads = 1; threads <= 2; threads++) {
        OCR_CHECK_OK(&ctx, ocr_ctx_init(&ctx, threads, 11));
        ohem_case(&ctx, big, 0, 0.1, 3.0f, "continuous");
        ohem_case(&ctx, big, 9, 0.1, 3.0f, "9 levels");
        ohem_case(&ctx, big, 1, 0.2, 3.0f, "all negatives tie");
        ohem_case(&ctx, 5000, 9, 0.5, 3.0f, "fewer negatives than the quota");
        ohem_case(&ctx, 5000, 9, 0.001, 0.5f, "ratio 0.5");
        ohem_case(&ctx, 1, 0, 0.0, 3.0f, "one pixel");
        ohem_case(&ctx, 7, 3, 0.3, 1e6f, "ratio 1e6");
        ocr_ctx_free(&ctx);
    }
}

/* Confident negatives have a loss of exactly 0 (the smallest key) or a subnormal one; the selection still ranks
   them exactly, which shows in which pixels get a gradient. */
static void test_ohem_tiny_losses(void) {
    ocr_ctx ctx;
    float x[8] = {3.0f, -1e4f, -1e4f, -95.0f, -100.0f, -80.0f, -1e4f, 2.0f}, g[8] = {1, 0, 0, 0, 0, 0, 0, 1};
    float m[8] = {1, 1, 1, 1, 1, 1, 1, 1}, d[8] = {0};
    ocr_shape s = ocr_shape4(1, 1, 1, 8);
    ocr_tensor X = ocr_tensor_f32("x", s, x), G = ocr_tensor_f32("gt", s, g), M = ocr_tensor_f32("mask", s, m);
    ocr_tensor D = ocr_tensor_f32("d", s, d);
    ocr_loss_bce_config cfg = ocr_loss_bce_defaults();
    double v, expect;
    OCR_CHECK_OK(&ctx, ocr_ctx_init(&ctx, 1, 1));
    /* 2 positives, ratio 3: all 6 negatives kept, zero losses included */
    OCR_CHECK_OK(&ctx, ocr_loss_bce(&ctx, &cfg, &X, &G, &M, 1.0f, &v, NULL));
    expect = (ref_bce(3, 1) + ref_bce(2, 1) + ref_bce(-95, 0) + ref_bce(-100, 0) + ref_bce(-80, 0)) / (8.0 + 1e-6);
    close_scalar("all kept", v, expect, 1e-6, 0.0);
    /* ratio 1: the 2 largest negatives, x = -80 (loss 1.8e-35) and x = -95 (loss 5.5e-42, subnormal) */
    cfg.negative_ratio = 1.0f;
    OCR_CHECK_OK(&ctx, ocr_loss_bce(&ctx, &cfg, &X, &G, &M, 1.0f, &v, &D));
    expect = (ref_bce(3, 1) + ref_bce(2, 1)) / (4.0 + 1e-6);
    close_scalar("two kept", v, expect, 1e-6, 0.0);
    OCR_CHECK(d[5] > 0.0f && d[3] > 0.0f && d[3] < d[5]);
    OCR_CHECK(d[1] == 0.0f && d[2] == 0.0f && d[4] == 0.0f && d[6] == 0.0f);
    OCR_CHECK(d[0] < 0.0f && d[7] < 0.0f && all_finite(d, 8));
    ocr_ctx_free(&ctx);
}

/* ---------------------------------------------------------------- defined behaviour at the edges */

static void test_edge_cases(void) {
    ocr_ctx ctx;
    enum { P = 24 };
    float x[P], t[P], zero[P], one[P], d[P], d2[P];
    ocr_shape s = ocr_shape4(1, 1, 4, 6);
    ocr_tensor X = ocr_tensor_f32("x", s, x), T = ocr_tensor_f32("t", s, t), Z = ocr_tensor_f32("zero", s, zero);
    ocr_tensor O = ocr_tensor_f32("one", s, one), D = ocr_tensor_f32("d", s, d), D2 = ocr_tensor_f32("d2", s, d2);
    ocr_db_loss_config cfg = ocr_db_loss_defaults();
    ocr_db_loss_terms r;
    double v;
    int i, mode;
    OCR_CHECK_OK(&ctx, ocr_ctx_init(&ctx, 1, 5));
    for (i = 0; i < P; i++) { x[i] = ocr_rng_normal(&ctx.rng) * 3; t[i] = ocr_rng_uniform(&ctx.rng); zero[i] = 0; one[i] = 1; }
    /* no positive: OHEM BCE is 0 with no gradient at all, as the official code */
    memset(d, 0, sizeof d);
    OCR_CHECK_OK(&ctx, ocr_loss_bce(&ctx, NULL, &X, &Z, &O, 1.0f, &v, &D));
    OCR_CHECK(v == 0.0 && max_abs(d, P) == 0.0);
    /* no positive, balanced and pos_weight modes: mean BCE of the negatives */
    for (mode = OCR_LOSS_BCE_BALANCED; mode <= OCR_LOSS_BCE_POS_WEIGHT; mode++) {
        ocr_loss_bce_config bc = ocr_loss_bce_defaults();
        double expect = 0.0;
        bc.mode = mode;
        bc.eps = 0.0f;
        for (i = 0; i < P; i++) expect += ref_bce(x[i], 0.0) / P;
        OCR_CHECK_OK(&ctx, ocr_loss_bce(&ctx, &bc, &X, &Z, &O, 1.0f, &v, NULL));
        close_scalar("negatives only", v, expect, 1e-6, 0.0);
    }
    /* empty masks: BCE 0, L1 0, Dice 1, and no gradient anywhere */
    memset(d, 0, sizeof d);
    memset(d2, 0, sizeof d2);
    OCR_CHECK_OK(&ctx, ocr_loss_db(&ctx, &cfg, &X, &T, &O, &Z, &O, &Z, &r, &D, &D2));
    OCR_CHECK(r.bce == 0.0 && r.l1 == 0.0 && r.dice == 1.0 && r.total == 1.0);
    OCR_CHECK(max_abs(d, P) == 0.0 && max_abs(d2, P) == 0.0);
    /* eps 0 with nothing to average: still 0, never 0/0 */
    for (mode = OCR_LOSS_BCE_OHEM; mode <= OCR_LOSS_BCE_POS_WEIGHT; mode++) {
        ocr_loss_bce_config bc = ocr_loss_bce_defaults();
        bc.mode = mode;
        bc.eps = 0.0f;
        OCR_CHECK_OK(&ctx, ocr_loss_bce(&ctx, &bc, &X, &O, &Z, 1.0f, &v, &D));
        OCR_CHECK(v == 0.0);
    }
    /* masked L1 over an empty mask */
    OCR_CHECK_OK(&ctx, ocr_loss_masked_l1(&ctx, &T, &O, &Z, 1.0f, &v, &D2));
    OCR_CHECK(v == 0.0 && max_abs(d2, P) == 0.0);
    /* gradients accumulate, and grad_scale scales them */
    memset(d, 0, sizeof d);
    memset(d2, 0, sizeof d2);
    for (i = 0; i < P; i++) { zero[i] = (i % 3 == 0) ? 1.0f : 0.0f; one[i] = (i % 7 == 0) ? 0.0f : 1.0f; }
    cfg.binary_bce_weight = 0.5f;
    OCR_CHECK_OK(&ctx, ocr_loss_db(&ctx, &cfg, &X, &T, &Z, &O, &O, &O, &r, &D, &D2));
    {
        float a[P], b[P], a2[P], b2[P];
        memcpy(a, d, sizeof a);
        memcpy(b, d2, sizeof b);
        OCR_CHECK_OK(&ctx, ocr_loss_db(&ctx, &cfg, &X, &T, &Z, &O, &O, &O, &r, &D, &D2));
        for (i = 0; i < P; i++) { a2[i] = 2 * a[i]; b2[i] = 2 * b[i]; }
        close_scaled("accumulated d_prob_logits", d, a2, P, 1e-6, 1e-7);
        close_scaled("accumulated d_thresh", d2, b2, P, 1e-6, 1e-7);
        memset(d, 0, sizeof d);
        memset(d2, 0, sizeof d2);
        cfg.grad_scale = 1024.0f;
        OCR_CHECK_OK(&ctx, ocr_loss_db(&ctx, &cfg, &X, &T, &Z, &O, &O, &O, &r, &D, &D2));
        for (i = 0; i < P; i++) { a2[i] = 1024 * a[i]; b2[i] = 1024 * b[i]; }
        close_scaled("grad_scale d_prob_logits", d, a2, P, 1e-6, 1e-7);
        close_scaled("grad_scale d_thresh", d2, b2, P, 1e-6, 1e-7);
    }
    /* the weighted total is the sum of the weighted terms */
    close_scalar("total", r.total, 5 * r.bce + 1 * r.dice + 10 * r.l1 + 0.5 * r.bce_binary, 1e-12, 0.0);
    ocr_ctx_free(&ctx);
}

/* Fixed blocks and double accumulators: bit-identical results for 1 and 2 threads. */
static void test_thread_determinism(void) {
    ocr_ctx c1, c2;
    const int64_t H = 160, W = 192, N = 2, P = N * H * W;
    ocr_shape s = ocr_shape4(N, 1, H, W);
    float *buf = (float *)malloc((size_t)P * 10 * sizeof(float));
    ocr_tensor in[6], d[4];
    ocr_db_loss_config cfg = ocr_db_loss_paper();
    ocr_db_loss_terms r1, r2;
    int64_t i;
    int k;
    OCR_CHECK_OK(&c1, ocr_ctx_init(&c1, 1, 9));
    OCR_CHECK_OK(&c2, ocr_ctx_init(&c2, 2, 9));
    for (k = 0; k < 6; k++) in[k] = ocr_tensor_f32(input_names[k], s, buf + k * P);
    for (k = 0; k < 4; k++) d[k] = ocr_tensor_f32("d", s, buf + (6 + k) * P);
    for (i = 0; i < P; i++) {
        buf[i] = 3 * ocr_rng_normal(&c1.rng);
        buf[P + i] = ocr_rng_uniform(&c1.rng);
        buf[2 * P + i] = ocr_rng_uniform(&c1.rng) < 0.15f ? 1.0f : 0.0f;
        buf[3 * P + i] = ocr_rng_uniform(&c1.rng) < 0.05f ? 0.0f : 1.0f;
        buf[4 * P + i] = 0.3f + 0.4f * ocr_rng_uniform(&c1.rng);
        buf[5 * P + i] = ocr_rng_uniform(&c1.rng) < 0.4f ? 1.0f : 0.0f;
    }
    memset(buf + 6 * P, 0, (size_t)P * 4 * sizeof(float));
    cfg.dice_weight = 1.0f; /* every term on */
    OCR_CHECK_OK(&c1, ocr_loss_db(&c1, &cfg, &in[0], &in[1], &in[2], &in[3], &in[4], &in[5], &r1, &d[0], &d[1]));
    OCR_CHECK_OK(&c2, ocr_loss_db(&c2, &cfg, &in[0], &in[1], &in[2], &in[3], &in[4], &in[5], &r2, &d[2], &d[3]));
    OCR_CHECK(memcmp(&r1, &r2, sizeof r1) == 0);
    OCR_CHECK(memcmp(d[0].data, d[2].data, (size_t)P * sizeof(float)) == 0);
    OCR_CHECK(memcmp(d[1].data, d[3].data, (size_t)P * sizeof(float)) == 0);
    free(buf);
    ocr_ctx_free(&c1);
    ocr_ctx_free(&c2);
}

/* ---------------------------------------------------------------- extreme inputs */

static float extreme_value(ocr_rng *r) {
    static const float picks[] = {0.0f, -0.0f, 1e-45f, -1e-45f, 1e-30f, 1e-3f, -1e-3f, 0.5f, 17.0f, -17.0f, 30.0f, -30.0f,
                                  88.7f, -88.7f, 104.0f, -104.0f, 1e4f, -1e4f, 1e20f, -1e20f, 1e30f, -1e30f, 3e38f, -3e38f,
                                  FLT_MAX, -FLT_MAX};
    uint32_t u = ocr_rng_below(r, 3);
    if (u == 0) return picks[ocr_rng_below(r, (uint32_t)(sizeof picks / sizeof picks[0]))];
    if (u == 1) return ocr_rng_normal(r) * 50.0f;
    return (ocr_rng_uniform(r) * 2.0f - 1.0f) * powf(10.0f, 38.0f * ocr_rng_uniform(r));
}

static float unit_value(ocr_rng *r) {
    static const float picks[] = {0.0f, 1.0f, 1e-45f, 1e-9f, 0.5f, 0.99999994f, -0.0f};
    return ocr_rng_below(r, 2) ? picks[ocr_rng_below(r, (uint32_t)(sizeof picks / sizeof picks[0]))] : ocr_rng_uniform(r);
}

static float config_weight(ocr_rng *r, float hi) {
    uint32_t u = ocr_rng_below(r, 4);
    return u == 0 ? 0.0f : u == 1 ? hi : u == 2 ? 1.0f : hi * powf(10.0f, -12.0f * ocr_rng_uniform(r));
}

static void test_extreme_inputs_stay_finite(void) {
    ocr_ctx ctx;
    int iter, iters = ocr_test_sanitized() ? 800 : 4000, failures = 0;
    enum { MAXP = 3 * 6 * 7 };
    float buf[10][MAXP];
    OCR_CHECK_OK(&ctx, ocr_ctx_init(&ctx, 1, 2024));
    for (iter = 0; iter < iters; iter++) {
        ocr_rng *r = &ctx.rng;
        ocr_shape s = ocr_shape4(1 + (int)ocr_rng_below(r, 3), 1, 1 + (int)ocr_rng_below(r, 6), 1 + (int)ocr_rng_below(r, 7));
        int64_t n = ocr_shape_numel(s), i;
        ocr_tensor t[10];
        ocr_db_loss_config cfg = ocr_db_loss_defaults();
        ocr_db_loss_terms res;
        double v;
        int k, ok = 1;
        for (k = 0; k < 10; k++) t[k] = ocr_tensor_f32(k < 6 ? input_names[k] : "grad", s, buf[k]);
        for (i = 0; i < n; i++) {
            buf[0][i] = extreme_value(r);
            buf[1][i] = ocr_rng_below(r, 2) ? unit_value(r) : extreme_value(r);
            for (k = 2; k < 6; k++) buf[k][i] = unit_value(r);
            buf[6][i] = buf[7][i] = buf[8][i] = 0.0f;
            buf[9][i] = (ocr_rng_uniform(r) * 2 - 1) * 1e3f;
        }
        cfg.bce.mode = (int)ocr_rng_below(r, 3);
        cfg.bce.negative_ratio = config_weight(r, 1e6f);
        cfg.bce.pos_weight = config_weight(r, 1e6f);
        cfg.bce.eps = ocr_rng_below(r, 2) ? 0.0f : config_weight(r, 1.0f);
        cfg.bce_weight = config_weight(r, 1e4f);
        cfg.dice_weight = config_weight(r, 1e4f);
        cfg.l1_weight = config_weight(r, 1e4f);
        cfg.binary_bce_weight = config_weight(r, 1e4f);
        cfg.k = ocr_rng_below(r, 2) ? 50.0f : 1e4f * powf(10.0f, -6.0f * ocr_rng_uniform(r));
        cfg.dice_eps = ocr_rng_below(r, 2) ? 1e-8f : 1e-6f;
        cfg.grad_scale = ocr_rng_below(r, 2) ? 1.0f : config_weight(r, 1e12f);
        if (ocr_loss_db(&ctx, &cfg, &t[0], &t[1], &t[2], &t[3], &t[4], &t[5], &res, &t[6], &t[7]) != OCR_OK) {
            if (failures++ < 3) fprintf(stderr, "  iteration %d: %s\n", iter, ocr_ctx_last_error(&ctx));
            continue;
        }
        ok = isfinite(res.total) && isfinite(res.bce) && isfinite(res.dice) && isfinite(res.l1) && isfinite(res.bce_binary) &&
             res.bce >= 0 && res.bce_binary >= 0 && res.l1 >= 0 && res.dice >= 0 && res.dice <= 1 &&
             all_finite(buf[6], n) && all_finite(buf[7], n);
        /* each term alone, and the step both ways */
        ok = ok && ocr_loss_bce(&ctx, &cfg.bce, &t[0], &t[2], &t[3], cfg.grad_scale, &v, &t[6]) == OCR_OK && isfinite(v);
        ok = ok && ocr_loss_db_step_forward(&ctx, cfg.k, &t[0], &t[1], &t[8]) == OCR_OK && all_finite(buf[8], n);
        ok = ok && ocr_loss_dice(&ctx, cfg.dice_eps, &t[8], &t[2], &t[3], &t[4], cfg.grad_scale, &v, &t[6]) == OCR_OK &&
             isfinite(v);
        ok = ok && ocr_loss_masked_l1(&ctx, &t[1], &t[4], &t[5], cfg.grad_scale, &v, &t[7]) == OCR_OK && isfinite(v);
        ok = ok && ocr_loss_db_step_backward(&ctx, cfg.k, &t[0], &t[1], &t[9], &t[6], &t[7]) == OCR_OK;
        ok = ok && all_finite(buf[6], n) && all_finite(buf[7], n);
        if (!ok && failures++ < 3)
            fprintf(stderr, "  iteration %d: non-finite or out-of-range result (total %g bce %g dice %g l1 %g bce_b %g) %s\n",
                    iter, res.total, res.bce, res.dice, res.l1, res.bce_binary, ocr_ctx_last_error(&ctx));
    }
    OCR_CHECK_MSG(failures == 0, "%d of %d random extreme cases failed", failures, iters);
    ocr_ctx_free(&ctx);
}

/* The step alone at the values that break the official expression in fp16/fp32. */
static void test_step_saturation(void) {
    ocr_ctx ctx;
    float x[6] = {1e4f, -1e4f, 0.0f, 30.0f, -FLT_MAX, FLT_MAX}, t[6] = {0.0f, 1.0f, 0.5f, -FLT_MAX, FLT_MAX, 0.9f};
    float b[6], up[6] = {1, 1, 1, 1, 1, 1}, dx[6] = {0}, dt[6] = {0};
    ocr_shape s = ocr_shape4(1, 1, 1, 6);
    ocr_tensor X = ocr_tensor_f32("x", s, x), T = ocr_tensor_f32("t", s, t), B = ocr_tensor_f32("b", s, b);
    ocr_tensor U = ocr_tensor_f32("u", s, up), DX = ocr_tensor_f32("dx", s, dx), DT = ocr_tensor_f32("dt", s, dt);
    OCR_CHECK_OK(&ctx, ocr_ctx_init(&ctx, 1, 1));
    OCR_CHECK_OK(&ctx, ocr_loss_db_step_forward(&ctx, 50.0f, &X, &T, &B));
    OCR_CHECK(b[0] == 1.0f && b[1] > 0.0f && b[1] < 1e-20f && b[2] == 0.5f && b[3] == 1.0f && b[4] == 0.0f && b[5] > 0.99f);
    OCR_CHECK_OK(&ctx, ocr_loss_db_step_backward(&ctx, 50.0f, &X, &T, &U, &DX, &DT));
    OCR_CHECK(all_finite(dx, 6) && all_finite(dt, 6));
    OCR_CHECK(fabsf(dx[2] - 50.0f * 0.25f * 0.25f) < 1e-5f); /* x = 0, T = 1/2: P' = 1/4, B' = 1/4 */
    OCR_CHECK(fabsf(dt[2] + 50.0f * 0.25f) < 1e-5f);
    OCR_CHECK(dx[0] == 0.0f && dt[0] < 0.0f);               /* P saturated; B' = e^-50 > 0 still flows to T */
    OCR_CHECK(dx[3] == 0.0f && dt[3] == 0.0f && dx[4] == 0.0f && dt[4] == 0.0f); /* z beyond the clamp */
    ocr_ctx_free(&ctx);
}

/* ---------------------------------------------------------------- bad inputs */

static void test_bad_inputs(void) {
    ocr_ctx ctx;
    enum { N = 2, H = 8, W = 8, P = N * H * W };
    ocr_shape s = ocr_shape4(N, 1, H, W);
    /* exact-size heap buffers: an out-of-bounds read is an ASan error */
    float *x = (float *)calloc(P, sizeof(float)), *t = (float *)calloc(P, sizeof(float)), *gs = (float *)calloc(P, sizeof(float));
    float *ms = (float *)calloc(P, sizeof(float)), *gtt = (float *)calloc(P, sizeof(float)), *mt = (float *)calloc(P, sizeof(float));
    float *dx = (float *)malloc(P * sizeof(float)), *dt = (float *)malloc(P * sizeof(float));
    float *small = (float *)calloc(N * 4 * 4, sizeof(float)), *wide = (float *)calloc(2 * P, sizeof(float));
    uint16_t *half = (uint16_t *)calloc(P, sizeof(uint16_t));
    ocr_tensor X = ocr_tensor_f32("logits", s, x), T = ocr_tensor_f32("thr", s, t), GS = ocr_tensor_f32("gt", s, gs);
    ocr_tensor MS = ocr_tensor_f32("mask", s, ms), GT = ocr_tensor_f32("tgt", s, gtt), MT = ocr_tensor_f32("tmask", s, mt);
    ocr_tensor DX = ocr_tensor_f32("dx", s, dx), DT = ocr_tensor_f32("dt", s, dt);
    ocr_tensor SMALL = ocr_tensor_f32("small_mask", ocr_shape4(N, 1, 4, 4), small);
    ocr_tensor TWO = ocr_tensor_f32("two_channels", ocr_shape4(N, 2, H, W), wide);
    ocr_tensor FLAT = ocr_tensor_f32("flat", ocr_shape3(N, H, W), wide);
    ocr_tensor HALF = ocr_tensor_view("half_mask", OCR_F16, OCR_DEVICE_CPU, s, half);
    ocr_tensor GPU = ocr_tensor_view("gpu_mask", OCR_F32, OCR_DEVICE_CUDA, s, (void *)16); /* never dereferenced */
    ocr_tensor ALIAS = ocr_tensor_f32("alias", s, gs);
    ocr_db_loss_config cfg = ocr_db_loss_defaults(), bad;
    ocr_db_loss_terms r;
    int i;
    OCR_CHECK_OK(&ctx, ocr_ctx_init(&ctx, 1, 1));
    for (i = 0; i < P; i++) { dx[i] = 7.0f; dt[i] = 7.0f; ms[i] = mt[i] = 1.0f; }

#define DB(a, b, c, d, e, f, g, h) ocr_loss_db(&ctx, &cfg, a, b, c, d, e, f, &r, g, h)
    /* mis-shaped and mis-placed tensors: the message names the argument, the tensor and both shapes */
    OCR_CHECK_ERR(&ctx, DB(&X, &T, &GS, &SMALL, &GT, &MT, &DX, &DT), OCR_ESHAPE, "argument mask_shrink");
    OCR_CHECK_ERR(&ctx, DB(&X, &T, &GS, &SMALL, &GT, &MT, &DX, &DT), OCR_ESHAPE, "'small_mask' (F32 [2,1,4,4], cpu)");
    OCR_CHECK_ERR(&ctx, DB(&X, &T, &GS, &SMALL, &GT, &MT, &DX, &DT), OCR_ESHAPE, "expected shape [2,1,8,8]");
    OCR_CHECK_ERR(&ctx, DB(&X, &T, &GS, &MS, &GT, &SMALL, &DX, &DT), OCR_ESHAPE, "argument mask_thresh");
    OCR_CHECK_ERR(&ctx, DB(&X, &TWO, &GS, &MS, &GT, &MT, &DX, &DT), OCR_ESHAPE, "argument thresh: tensor 'two_channels'");
    OCR_CHECK_ERR(&ctx, DB(&TWO, &T, &GS, &MS, &GT, &MT, &DX, &DT), OCR_ESHAPE, "must be [N,1,H,W]");
    OCR_CHECK_ERR(&ctx, DB(&FLAT, &T, &GS, &MS, &GT, &MT, &DX, &DT), OCR_ESHAPE, "'flat' (F32 [2,8,8], cpu) must be [N,1,H,W]");
    OCR_CHECK_ERR(&ctx, DB(&X, &T, &GS, &MS, &HALF, &MT, &DX, &DT), OCR_EDTYPE, "argument gt_thresh: tensor 'half_mask' (F16");
    OCR_CHECK_ERR(&ctx, DB(&X, &T, &GS, &GPU, &GT, &MT, &DX, &DT), OCR_EDEVICE, "'gpu_mask' (F32 [2,1,8,8], cuda) is on cuda, expected cpu");
    OCR_CHECK_ERR(&ctx, DB(&X, &T, NULL, &MS, &GT, &MT, &DX, &DT), OCR_EINVAL, "argument gt_shrink is NULL");
    OCR_CHECK_ERR(&ctx, DB(&X, &T, &GS, &MS, &GT, &MT, &SMALL, &DT), OCR_ESHAPE, "argument d_prob_logits");
    OCR_CHECK_ERR(&ctx, DB(&X, &T, &GS, &MS, &GT, &MT, &DX, &GPU), OCR_EDEVICE, "argument d_thresh");
    OCR_CHECK_ERR(&ctx, DB(&X, &T, &GS, &MS, &GT, &MT, &ALIAS, &DT), OCR_EINVAL, "shares memory with tensor 'gt'");
    OCR_CHECK_ERR(&ctx, DB(&X, &T, &GS, &MS, &GT, &MT, &DX, &DX), OCR_EINVAL, "shares memory");

    /* bad values: the message names the argument, the first bad value and its index */
    x[37] = NAN;
    OCR_CHECK_ERR(&ctx, DB(&X, &T, &GS, &MS, &GT, &MT, &DX, &DT), OCR_ENONFINITE, "argument prob_logits: tensor 'logits'");
    OCR_CHECK_ERR(&ctx, DB(&X, &T, &GS, &MS, &GT, &MT, &DX, &DT), OCR_ENONFINITE, "at index 37 [0,0,4,5]");
    x[37] = 0.0f;
    t[100] = -INFINITY;
    OCR_CHECK_ERR(&ctx, DB(&X, &T, &GS, &MS, &GT, &MT, &DX, &DT), OCR_ENONFINITE, "argument thresh: tensor 'thr' (F32 [2,1,8,8], cpu) has non-finite value -inf at index 100");
    t[100] = 0.0f;
    gs[5] = 1.5f;
    OCR_CHECK_ERR(&ctx, DB(&X, &T, &GS, &MS, &GT, &MT, &DX, &DT), OCR_ERANGE, "argument gt_shrink: tensor 'gt' (F32 [2,1,8,8], cpu) has value 1.5 at index 5");
    gs[5] = 0.0f;
    ms[70] = -0.25f;
    OCR_CHECK_ERR(&ctx, DB(&X, &T, &GS, &MS, &GT, &MT, &DX, &DT), OCR_ERANGE, "argument mask_shrink: tensor 'mask' (F32 [2,1,8,8], cpu) has value -0.25 at index 70");
    ms[70] = 1.0f;
    gtt[3] = NAN;
    OCR_CHECK_ERR(&ctx, DB(&X, &T, &GS, &MS, &GT, &MT, &DX, &DT), OCR_ENONFINITE, "argument gt_thresh");
    gtt[3] = 0.0f;
    mt[127] = 2.0f;
    OCR_CHECK_ERR(&ctx, DB(&X, &T, &GS, &MS, &GT, &MT, &DX, &DT), OCR_ERANGE, "argument mask_thresh: tensor 'tmask' (F32 [2,1,8,8], cpu) has value 2 at index 127");
    mt[127] = 1.0f;

    /* bad configurations */
    bad = cfg; bad.k = NAN;
    OCR_CHECK_ERR(&ctx, ocr_loss_db(&ctx, &bad, &X, &T, &GS, &MS, &GT, &MT, &r, &DX, &DT), OCR_EINVAL, "cfg.k = nan");
    bad = cfg; bad.k = 0.0f;
    OCR_CHECK_ERR(&ctx, ocr_loss_db(&ctx, &bad, &X, &T, &GS, &MS, &GT, &MT, &r, &DX, &DT), OCR_EINVAL, "cfg.k = 0 must be finite and in (0, 10000]");
    bad = cfg; bad.l1_weight = -1.0f;
    OCR_CHECK_ERR(&ctx, ocr_loss_db(&ctx, &bad, &X, &T, &GS, &MS, &GT, &MT, &r, &DX, &DT), OCR_EINVAL, "cfg.l1_weight = -1");
    bad = cfg; bad.dice_eps = 0.0f;
    OCR_CHECK_ERR(&ctx, ocr_loss_db(&ctx, &bad, &X, &T, &GS, &MS, &GT, &MT, &r, &DX, &DT), OCR_EINVAL, "cfg.dice_eps = 0");
    bad = cfg; bad.bce.mode = 7;
    OCR_CHECK_ERR(&ctx, ocr_loss_db(&ctx, &bad, &X, &T, &GS, &MS, &GT, &MT, &r, &DX, &DT), OCR_EINVAL, "bce mode 7");
    bad = cfg; bad.bce.negative_ratio = INFINITY;
    OCR_CHECK_ERR(&ctx, ocr_loss_db(&ctx, &bad, &X, &T, &GS, &MS, &GT, &MT, &r, &DX, &DT), OCR_EINVAL, "bce.negative_ratio = inf");
    OCR_CHECK_ERR(&ctx, ocr_loss_db(&ctx, NULL, &X, &T, &GS, &MS, &GT, &MT, &r, &DX, &DT), OCR_EINVAL, "cfg is NULL");
#undef DB
    /* nothing was written by any failing call */
    for (i = 0; i < P; i++) OCR_CHECK(dx[i] == 7.0f && dt[i] == 7.0f);

    /* each term on its own validates the same way */
    OCR_CHECK_ERR(&ctx, ocr_loss_bce(&ctx, NULL, &X, &GS, &SMALL, 1.0f, NULL, &DX), OCR_ESHAPE, "ocr_loss_bce: argument mask");
    OCR_CHECK_ERR(&ctx, ocr_loss_bce(&ctx, NULL, &X, &GS, &MS, NAN, NULL, &DX), OCR_EINVAL, "grad_scale = nan");
    ms[0] = 1.0001f;
    OCR_CHECK_ERR(&ctx, ocr_loss_dice(&ctx, 1e-6f, &GS, &GS, &MS, NULL, 1.0f, NULL, &DX), OCR_ERANGE, "ocr_loss_dice: argument mask");
    ms[0] = 1.0f;
    x[0] = 1.25f;
    OCR_CHECK_ERR(&ctx, ocr_loss_dice(&ctx, 1e-6f, &X, &GS, &MS, NULL, 1.0f, NULL, &DX), OCR_ERANGE, "ocr_loss_dice: argument pred: tensor 'logits' (F32 [2,1,8,8], cpu) has value 1.25 at index 0");
    OCR_CHECK_ERR(&ctx, ocr_loss_dice(&ctx, 0.0f, &GS, &GS, &MS, NULL, 1.0f, NULL, &DX), OCR_EINVAL, "eps = 0");
    OCR_CHECK_ERR(&ctx, ocr_loss_dice(&ctx, 1e-6f, &GS, &GS, &MS, &SMALL, 1.0f, NULL, &DX), OCR_ESHAPE, "argument weights");
    x[0] = 0.0f;
    OCR_CHECK_ERR(&ctx, ocr_loss_masked_l1(&ctx, &T, &SMALL, &MT, 1.0f, NULL, &DT), OCR_ESHAPE, "ocr_loss_masked_l1: argument target");
    OCR_CHECK_ERR(&ctx, ocr_loss_masked_l1(&ctx, &T, &GT, &MT, 1.0f, NULL, &T), OCR_EINVAL, "argument d_pred: gradient tensor 'thr'");
    OCR_CHECK_ERR(&ctx, ocr_loss_db_step_forward(&ctx, 50.0f, &X, &T, &X), OCR_EINVAL, "argument binary");
    OCR_CHECK_ERR(&ctx, ocr_loss_db_step_forward(&ctx, 50.0f, &X, &SMALL, &DX), OCR_ESHAPE, "argument thresh");
    OCR_CHECK_ERR(&ctx, ocr_loss_db_step_backward(&ctx, -1.0f, &X, &T, &GS, &DX, &DT), OCR_EINVAL, "k = -1");
    OCR_CHECK_ERR(&ctx, ocr_loss_db_step_backward(&ctx, 50.0f, &X, &T, &GPU, &DX, &DT), OCR_EDEVICE, "argument d_binary");
    for (i = 0; i < P; i++) OCR_CHECK(dx[i] == 7.0f && dt[i] == 7.0f);

    /* a context on another device: refused before any memory is read */
    ctx.device = OCR_DEVICE_CUDA;
    {
        ocr_tensor G1 = GPU, G2 = GPU, G3 = GPU, G4 = GPU, G5 = GPU, G6 = GPU;
        OCR_CHECK_ERR(&ctx, ocr_loss_db(&ctx, &cfg, &G1, &G2, &G3, &G4, &G5, &G6, &r, NULL, NULL), OCR_EUNSUPPORTED, "CPU only");
    }
    ctx.device = OCR_DEVICE_CPU;

    free(x); free(t); free(gs); free(ms); free(gtt); free(mt); free(dx); free(dt); free(small); free(wide); free(half);
    ocr_ctx_free(&ctx);
}

int main(int argc, char **argv) {
    ocr_test_init(argc, argv);
    OCR_TEST_RUN(test_parity_reference);
    OCR_TEST_RUN(test_finite_differences);
    OCR_TEST_RUN(test_prob_dice);
    OCR_TEST_RUN(test_ohem_selection_matches_sort);
    OCR_TEST_RUN(test_ohem_tiny_losses);
    OCR_TEST_RUN(test_edge_cases);
    OCR_TEST_RUN(test_thread_determinism);
    OCR_TEST_RUN(test_extreme_inputs_stay_finite);
    OCR_TEST_RUN(test_step_saturation);
    OCR_TEST_RUN(test_bad_inputs);
    return ocr_test_finish();
}
