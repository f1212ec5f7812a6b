/* The bf16 GEMM and convolutions of mixed precision (ocr__gemm_bf16, ocr__conv_bf16_run in ocr_nn.h), for every kind
   this CPU runs (AMX-BF16, AVX512_BF16 and the fp32 fallback; the others are reported as skipped), against double-
   precision references computed on the same inputs rounded to bf16:
   - exact cases: inputs that are multiples of 1/8 in [-1, 1] (bf16 holds them exactly) make every product a multiple
     of 1/64 and every partial sum exact in fp32, so in any summation order the result must equal the reference bit
     for bit: a missing, doubled or misplaced term shows as a difference, however long the sum;
   - rounded cases: uniform random fp32 inputs, each result within 2 (terms + 2) 2^-24 (|alpha| S + |beta C|) of the
     reference on the bf16-rounded inputs, S being the sum of |a| |b| over its terms (the fp32 summation bound), which
     is far below what rounding the inputs differently (truncating, say) would cost;
   - the rounding itself through a GEMM with K = 1: ties to even, NaN, Inf, overflow to Inf (subnormal inputs are
     left out: both instructions read bf16 subnormals as zero);
   - the kinds against each other, 1 and 2 threads giving the same bits, beta 0 ignoring NaN in C, ldc padding left
     alone, the convolution modes on 3x3 s1/s2, 7x7 s2 p3, 1x1 s1/s2, groups 2, dilation 2 and 2x2/2 (a transposed
     convolution's geometry, through BWD_DATA), channel counts that leave partial tiles, batch 1, several chunks, each
     path (implicit in its row and virtual layouts, folded kernel width for few channels, flipped-kernel data gradient,
     im2col GEMMs);
   - the kind selection and error paths (bad sizes, scratch allocation failing). */
/* ocr-c build: own implementation */
#define OCR_IMPLEMENTATION
#define _POSIX_C_SOURCE 200809L
#include <stdlib.h>
#include <string.h>
static int fail_alloc; /* set: every allocation of the library fails */
static void *test_malloc(size_t n) { return fail_alloc ? NULL : malloc(n); }
static void *test_realloc(void *p, size_t n) { return fail_alloc ? NULL : realloc(p, n); }
#define OCR_MALLOC(n) test_malloc(n)
#define OCR_REALLOC(p, n) test_realloc(p, n)
#define OCR_FREE(p) free(p)
#include "ocr_tensor.h"
#include "ocr_nn.h"
#include "ocr_test.h"

static const char *kind_name[3] = {"none", "avx512-bf16", "amx-bf16"};
/* Under the sanitizers (OCR_SANITIZED=1, set by build.sh) about a third of the combinations run, the largest GEMM
   shapes none: the double-precision references dominate, and run ten times slower there. */
static int sanitized;

/* The best kind this CPU and process have (no limit set). */
static int best_kind(ocr_ctx *ctx) {
    int k;
    ocr__bf16_kind_limit = -1;
    k = ocr__bf16_kind(ctx);
    return k;
}

/* Limits the kernels to `kind`; 0 (and the case skipped) when the CPU lacks it. */
static int use_kind(ocr_ctx *ctx, int kind) {
    int best = best_kind(ctx);
    if (kind > best) {
        ocr_test_skip(kind == OCR__BF16_AMX ? "this CPU has no AMX-BF16 (or Linux did not grant the tile state, or OCR_BF16_KERNEL)"
                                            : "this CPU has no AVX512_BF16 (or OCR_BF16_KERNEL=none)");
        return 0;
    }
    ocr__bf16_kind_limit = kind;
    return 1;
}

static float bf(float x) { return ocr_bf16_to_f32(ocr_f32_to_bf16(x)); }
static float uni(ocr_ctx *ctx) { return ocr_rng_uniform(&ctx->rng) * 2.0f - 1.0f; }
static float dyadic(ocr_ctx *ctx) { return (float)((int)(ocr_rng_uniform(&ctx->rng) * 17.0f) - 8) / 8.0f; } /* -1..1 in 1/8 */

/* ---------------------------------------------------------------- GEMM */

typedef struct { int M, N, K; } shape;
static const shape shapes[] = {
    {1, 1, 1}, {5, 7, 3}, {31, 33, 31}, {32, 32, 32}, {33, 65, 47}, {64, 96, 100}, {100, 50, 513}, {17, 300, 64},
    {128, 1, 200}, {1, 128, 70}, {70, 70, 1030}, {257, 40, 33}, {8, 48, 64}, {40, 600, 4096},
};

/* C = alpha op(A) op(B) + beta C in double over the given (already rounded) inputs; S = sum of |terms| */
static void ref_gemm(int ta, int tb, int M, int N, int K, float alpha, const float *A, int lda, const float *B, int ldb, float beta,
                     float *C, int ldc, double *S) {
    int i, j, k;
    for (i = 0; i < M; i++)
        for (j = 0; j < N; j++) {
            double s = 0.0, sa = 0.0;
            for (k = 0; k < K; k++) {
                double p = (double)(ta ? A[k * lda + i] : A[i * lda + k]) * (tb ? B[j * ldb + k] : B[k * ldb + j]);
                s += p;
                sa += fabs(p);
            }
            if (S) S[i * N + j] = fabs((double)alpha) * sa + (beta == 0.0f ? 0.0 : fabs((double)beta * C[i * ldc + j]));
            C[i * ldc + j] = (float)((double)alpha * s + (beta == 0.0f ? 0.0 : (double)beta * C[i * ldc + j]));
        }
}

typedef struct { float *A, *B, *C0; int lda, ldb, ldc, na, nb, nc; } gemm_data;

static void gemm_data_make(ocr_ctx *ctx, gemm_data *d, int ta, int tb, int M, int N, int K, int exact, float beta) {
    int i;
    d->lda = (ta ? M : K) + 3; d->ldb = (tb ? K : N) + 1; d->ldc = N + 2;
    d->na = (ta ? K : M) * d->lda; d->nb = (tb ? N : K) * d->ldb; d->nc = M * d->ldc;
    d->A = (float *)malloc(sizeof(float) * (size_t)d->na);
    d->B = (float *)malloc(sizeof(float) * (size_t)d->nb);
    d->C0 = (float *)malloc(sizeof(float) * (size_t)d->nc);
    for (i = 0; i < d->na; i++) d->A[i] = exact ? dyadic(ctx) : uni(ctx);
    for (i = 0; i < d->nb; i++) d->B[i] = exact ? dyadic(ctx) : uni(ctx);
    for (i = 0; i < d->nc; i++) d->C0[i] = beta == 0.0f ? NAN : exact ? dyadic(ctx) / 8.0f : uni(ctx);
}

static void gemm_data_free(gemm_data *d) { free(d->A); free(d->B); free(d->C0); }

/* One GEMM on ctx: exact (bit-equal to the reference) or within the summation bound; the ldc padding untouched.
   Returns the result (caller frees) for comparisons across kinds and threads. Without check: the GEMM only (a result
   compared bit for bit with a checked one needs no reference of its own). */
static float *gemm_check(ocr_ctx *ctx, const gemm_data *d, int ta, int tb, int M, int N, int K, float alpha, float beta, int exact,
                         const char *what, int check) {
    float *C = (float *)malloc(sizeof(float) * (size_t)d->nc), *R, *Ar, *Br;
    double *S;
    int i, j, bad = 0;
    memcpy(C, d->C0, sizeof(float) * (size_t)d->nc);
    if (!check) {
        OCR_CHECK_OK(ctx, ocr__gemm_bf16(ctx, ta, tb, M, N, K, alpha, d->A, d->lda, d->B, d->ldb, beta, C, d->ldc));
        return C;
    }
    R = (float *)malloc(sizeof(float) * (size_t)d->nc);
    Ar = (float *)malloc(sizeof(float) * (size_t)d->na);
    Br = (float *)malloc(sizeof(float) * (size_t)d->nb);
    S = (double *)malloc(sizeof(double) * (size_t)(M * N));
    memcpy(R, d->C0, sizeof(float) * (size_t)d->nc);
    for (i = 0; i < d->na; i++) Ar[i] = bf(d->A[i]);
    for (i = 0; i < d->nb; i++) Br[i] = bf(d->B[i]);
    ref_gemm(ta, tb, M, N, K, alpha, Ar, d->lda, Br, d->ldb, beta, R, d->ldc, S);
    OCR_CHECK_OK(ctx, ocr__gemm_bf16(ctx, ta, tb, M, N, K, alpha, d->A, d->lda, d->B, d->ldb, beta, C, d->ldc));
    for (i = 0; i < M && bad < 3; i++) {
        for (j = 0; j < N && bad < 3; j++) {
            float got = C[i * d->ldc + j], want = R[i * d->ldc + j];
            double tol = exact ? 0.0 : 2.0 * (K + 2) * ldexp(1.0, -24) * S[i * N + j] + 1e-30;
            if (!(fabs((double)got - want) <= tol)) {
                fprintf(stderr, "  %s: C[%d,%d] = %.9g, reference %.9g (tolerance %.3g)\n", what, i, j, got, want, tol);
                bad++;
            }
        }
        for (j = N; j < d->ldc; j++)
            if (memcmp(&C[i * d->ldc + j], &d->C0[i * d->ldc + j], sizeof(float))) {
                fprintf(stderr, "  %s: ldc padding C[%d,%d] overwritten\n", what, i, j);
                bad++;
            }
    }
    OCR_CHECK_MSG(bad == 0, "%s", what);
    free(R); free(Ar); free(Br); free(S);
    return C;
}

/* Every shape, transpose pair and (alpha, beta), exact and rounded, on 1 and 2 threads (the same bits). */
static void gemm_kind(int kind) {
    static const float ab[][2] = {{1.0f, 0.0f}, {0.5f, 1.0f}, {-2.0f, 0.25f}, {1.0f, 1.0f}};
    ocr_ctx c1, c2;
    int s, t, a, exact;
    ocr_ctx_init(&c1, 1, 7);
    ocr_ctx_init(&c2, 2, 7);
    if (!use_kind(&c1, kind)) { ocr_ctx_free(&c1); ocr_ctx_free(&c2); return; }
    for (s = 0; s < (int)(sizeof shapes / sizeof shapes[0]); s++)
        for (t = 0; t < 4; t++)
            for (a = 0; a < 4; a++) {
                int M = shapes[s].M, N = shapes[s].N, K = shapes[s].K, ta = t & 1, tb = t >> 1;
                float alpha = ab[a][0], beta = ab[a][1];
                if (M * N * K > 2000000 && (t != 1 || a != 1)) continue; /* the largest shape: one combination */
                if (sanitized && (M * N * K > 2000000 || ((t + a + s) % 3 != 0 && M * N * K > 1000))) continue;
                for (exact = 0; exact < 2; exact++) {
                    gemm_data d;
                    char what[160];
                    float *C1, *C2;
                    gemm_data_make(&c1, &d, ta, tb, M, N, K, exact, beta);
                    snprintf(what, sizeof what, "%s %dx%dx%d ta=%d tb=%d alpha=%g beta=%g %s", kind_name[kind], M, N, K, ta, tb, alpha, beta,
                             exact ? "exact" : "rounded");
                    C1 = gemm_check(&c1, &d, ta, tb, M, N, K, alpha, beta, exact, what, 1);
                    C2 = gemm_check(&c2, &d, ta, tb, M, N, K, alpha, beta, exact, what, 0);
                    OCR_CHECK_MSG(memcmp(C1, C2, sizeof(float) * (size_t)d.nc) == 0, "%s: 1 and 2 threads differ", what);
                    free(C1); free(C2);
                    gemm_data_free(&d);
                }
            }
    ocr__bf16_kind_limit = -1;
    ocr_ctx_free(&c1);
    ocr_ctx_free(&c2);
}

static void test_gemm_amx(void) { gemm_kind(OCR__BF16_AMX); }
static void test_gemm_avx512bf16(void) { gemm_kind(OCR__BF16_AVX512); }
static void test_gemm_fallback(void) { gemm_kind(OCR__BF16_NONE); }

/* Each kind the CPU has against the fallback on the same rounded inputs: within twice the summation bound. */
static void test_gemm_kinds_agree(void) {
    ocr_ctx ctx;
    int best, k, t;
    ocr_ctx_init(&ctx, 2, 11);
    best = best_kind(&ctx);
    if (best == OCR__BF16_NONE) { ocr_test_skip("this CPU has no bf16 instructions: only the fallback runs"); ocr_ctx_free(&ctx); return; }
    for (t = 0; t < 4; t++) {
        int M = 70, N = 90, K = 300, ta = t & 1, tb = t >> 1, i, j;
        gemm_data d;
        float *C[3];
        double *S = (double *)malloc(sizeof(double) * (size_t)(M * N));
        float *R, *Ar, *Br;
        gemm_data_make(&ctx, &d, ta, tb, M, N, K, 0, 0.0f);
        R = (float *)malloc(sizeof(float) * (size_t)d.nc);
        Ar = (float *)malloc(sizeof(float) * (size_t)d.na);
        Br = (float *)malloc(sizeof(float) * (size_t)d.nb);
        for (i = 0; i < d.na; i++) Ar[i] = bf(d.A[i]);
        for (i = 0; i < d.nb; i++) Br[i] = bf(d.B[i]);
        ref_gemm(ta, tb, M, N, K, 1.0f, Ar, d.lda, Br, d.ldb, 0.0f, R, d.ldc, S);
        for (k = 0; k <= best; k++) {
            C[k] = (float *)malloc(sizeof(float) * (size_t)d.nc);
            memcpy(C[k], d.C0, sizeof(float) * (size_t)d.nc);
            ocr__bf16_kind_limit = k;
            OCR_CHECK_OK(&ctx, ocr__gemm_bf16(&ctx, ta, tb, M, N, K, 1.0f, d.A, d.lda, d.B, d.ldb, 0.0f, C[k], d.ldc));
        }
        for (k = 1; k <= best; k++) {
            int bad = 0;
            for (i = 0; i < M; i++)
                for (j = 0; j < N; j++) {
                    double tol = 4.0 * (K + 2) * ldexp(1.0, -24) * S[i * N + j];
                    if (!(fabs((double)C[k][i * d.ldc + j] - C[0][i * d.ldc + j]) <= tol)) bad++;
                }
            OCR_CHECK_MSG(bad == 0, "%s and the fallback differ beyond the bound in %d values (ta=%d tb=%d)", kind_name[k], bad, ta, tb);
        }
        for (k = 0; k <= best; k++) free(C[k]);
        free(S); free(R); free(Ar); free(Br);
        gemm_data_free(&d);
    }
    ocr__bf16_kind_limit = -1;
    ocr_ctx_free(&ctx);
}

/* Rounding through the GEMM (K = 1, the other factor 1): each value comes out as ocr_f32_to_bf16 rounds it. */
static void rounding_kind(int kind) {
    static const float special[] = {1.0f + 0x1p-8f, 1.0f + 0x3p-8f, 1.0f + 0x1p-8f + 0x1p-20f, -(1.0f + 0x1p-8f), -(1.0f + 0x3p-8f),
                                    65504.3f, 3.4e38f, -3.4e38f, FLT_MAX, 0x1.fffffep127f, 1e-30f, 0x1p-126f, -0x1p-126f, 0.0f, -0.0f,
                                    3.14159265f, -2.71828183f, 1.00390625f, 255.5f, 0x1.ff8p0f};
    ocr_ctx ctx;
    float vals[64], one[64], C[64];
    int n = (int)(sizeof special / sizeof special[0]), i, side;
    ocr_ctx_init(&ctx, 2, 3);
    if (!use_kind(&ctx, kind)) { ocr_ctx_free(&ctx); return; }
    for (i = 0; i < n; i++) vals[i] = special[i];
    vals[n++] = INFINITY;
    vals[n++] = -INFINITY;
    vals[n++] = NAN;
    for (i = 0; i < 64; i++) one[i] = 1.0f;
    for (side = 0; side < 4; side++) { /* the value in A or B, each stored plain or transposed */
        int ok = 1;
        for (i = 0; i < n; i++) C[i] = 123.0f;
        if (side == 0) OCR_CHECK_OK(&ctx, ocr__gemm_bf16(&ctx, 0, 0, n, 1, 1, 1.0f, vals, 1, one, 1, 0.0f, C, 1));
        if (side == 1) OCR_CHECK_OK(&ctx, ocr__gemm_bf16(&ctx, 1, 0, n, 1, 1, 1.0f, vals, n, one, 1, 0.0f, C, 1));
        if (side == 2) OCR_CHECK_OK(&ctx, ocr__gemm_bf16(&ctx, 0, 0, 1, n, 1, 1.0f, one, 1, vals, n, 0.0f, C, n));
        if (side == 3) OCR_CHECK_OK(&ctx, ocr__gemm_bf16(&ctx, 0, 1, 1, n, 1, 1.0f, one, 1, vals, 1, 0.0f, C, n));
        for (i = 0; i < n; i++) {
            float want = bf(vals[i]) + 0.0f; /* a sum starting from +0: -0 comes out +0 */
            if (isnan(want) ? !isnan(C[i]) : memcmp(&C[i], &want, 4) != 0) {
                fprintf(stderr, "  %s side %d: %.9g rounded to %.9g, expected %.9g\n", kind_name[kind], side, vals[i], C[i], want);
                ok = 0;
            }
        }
        OCR_CHECK(ok);
    }
    ocr__bf16_kind_limit = -1;
    ocr_ctx_free(&ctx);
}

static void test_rounding_amx(void) { rounding_kind(OCR__BF16_AMX); }
static void test_rounding_avx512bf16(void) { rounding_kind(OCR__BF16_AVX512); }
static void test_rounding_fallback(void) { rounding_kind(OCR__BF16_NONE); }

/* ---------------------------------------------------------------- convolutions */

typedef struct { const char *name; int N, C, K, H, W, kh, kw, sh, sw, ph, pw, dh, dw, groups; } geom;
static const geom geoms[] = {
    {"3x3 s1 p1, 20->24 ch", 2, 20, 24, 13, 13, 3, 3, 1, 1, 1, 1, 1, 1, 1},
    {"3x3 s1 p1, 64->64 ch, batch 1, 4 chunks", 1, 64, 64, 34, 34, 3, 3, 1, 1, 1, 1, 1, 1, 1},
    {"3x3 s2 p1", 2, 16, 40, 17, 19, 3, 3, 2, 2, 1, 1, 1, 1, 1},
    {"7x7 s2 p3, 3 ch", 2, 3, 16, 29, 29, 7, 7, 2, 2, 3, 3, 1, 1, 1},
    {"1x1 s1", 2, 48, 40, 11, 11, 1, 1, 1, 1, 0, 0, 1, 1, 1},
    {"1x1 s2", 2, 32, 64, 14, 14, 1, 1, 2, 2, 0, 0, 1, 1, 1},
    {"3x3 groups 2", 2, 16, 24, 10, 10, 3, 3, 1, 1, 1, 1, 1, 1, 2},
    {"3x3 dilation 2", 2, 24, 16, 15, 15, 3, 3, 1, 1, 2, 2, 2, 2, 1},
    {"2x2 s2 (transposed 2x2/2)", 2, 16, 32, 20, 20, 2, 2, 2, 2, 0, 0, 1, 1, 1},
    {"3x3 s1 p1, 8 ch, 2 chunks", 1, 8, 8, 64, 64, 3, 3, 1, 1, 1, 1, 1, 1, 1},
    {"1x3 s1x2 p0x1 d1x2, groups 3", 3, 9, 6, 7, 12, 1, 3, 1, 2, 0, 1, 1, 2, 3},
    {"3x3 s2x1 p1 d2x1, groups 2, 64->40 ch", 2, 64, 40, 11, 37, 3, 3, 2, 1, 1, 1, 2, 1, 2},
    {"5x5 s1 p2, 16->70 ch, batch 1", 1, 16, 70, 9, 50, 5, 5, 1, 1, 2, 2, 1, 1, 1},
    {"3x3 s1 p1, 32->48 ch, rows of 32", 2, 32, 48, 9, 32, 3, 3, 1, 1, 1, 1, 1, 1, 1},
    {"3x3 s2 p1, 40->33 ch, rows of 48", 2, 40, 33, 7, 96, 3, 3, 2, 2, 1, 1, 1, 1, 1},
    {"1x1 s1, rows of 100", 2, 24, 40, 5, 100, 1, 1, 1, 1, 0, 0, 1, 1, 1},
    {"7x7 s1 p3, 10->12 ch (im2col: 70 folded channels)", 1, 10, 12, 12, 13, 7, 7, 1, 1, 3, 3, 1, 1, 1},
};

static ocr__conv_geom geom_make(const geom *q) {
    ocr__conv_geom g;
    memset(&g, 0, sizeof g);
    g.N = q->N; g.C = q->C; g.K = q->K; g.H = q->H; g.W = q->W; g.kh = q->kh; g.kw = q->kw;
    g.sh = q->sh; g.sw = q->sw; g.ph = q->ph; g.pw = q->pw; g.dh = q->dh; g.dw = q->dw; g.groups = q->groups;
    g.OH = (g.H + 2 * g.ph - g.dh * (g.kh - 1) - 1) / g.sh + 1;
    g.OW = (g.W + 2 * g.pw - g.dw * (g.kw - 1) - 1) / g.sw + 1;
    return g;
}

enum { M_FWD, M_FWD_ACC, M_DATA, M_WEIGHT, M_COUNT };
static const char *mode_name[M_COUNT] = {"forward (bias, relu)", "forward accumulating", "data gradient", "weight gradient"};

typedef struct { float *x, *w, *y, *b; int64_t nx, nw, ny; } conv_data;

static void conv_data_make(ocr_ctx *ctx, const ocr__conv_geom *g, conv_data *d, int exact) {
    int64_t i;
    d->nx = g->N * g->C * g->H * g->W; d->nw = g->K * (g->C / g->groups) * g->kh * g->kw; d->ny = g->N * g->K * g->OH * g->OW;
    d->x = (float *)malloc(sizeof(float) * (size_t)d->nx);
    d->w = (float *)malloc(sizeof(float) * (size_t)d->nw);
    d->y = (float *)malloc(sizeof(float) * (size_t)d->ny);
    d->b = (float *)malloc(sizeof(float) * (size_t)g->K);
    for (i = 0; i < d->nx; i++) d->x[i] = exact ? dyadic(ctx) : uni(ctx);
    for (i = 0; i < d->nw; i++) d->w[i] = exact ? dyadic(ctx) : uni(ctx);
    for (i = 0; i < d->ny; i++) d->y[i] = exact ? dyadic(ctx) : uni(ctx);
    for (i = 0; i < g->K; i++) d->b[i] = exact ? dyadic(ctx) : uni(ctx);
}

static void conv_data_free(conv_data *d) { free(d->x); free(d->w); free(d->y); free(d->b); }

static float *dup_map(const float *a, int64_t n, int mode) { /* mode 0: copy, 1: bf16-rounded, 2: |bf16-rounded| */
    float *r = (float *)malloc(sizeof(float) * (size_t)(n ? n : 1));
    int64_t i;
    for (i = 0; i < n; i++) r[i] = mode == 0 ? a[i] : mode == 1 ? bf(a[i]) : fabsf(bf(a[i]));
    return r;
}

/* The reference of one mode on (x, w, y) into out (its initial values being the accumulation target): y / dx / dw. */
static void conv_reference(ocr_ctx *ctx, const ocr__conv_geom *g, int mode, const float *x, const float *w, const float *y,
                           const float *b, float *out) {
    if (mode == M_FWD) OCR_CHECK_OK(ctx, ocr__ref_conv2d_forward(ctx, g, x, w, b, 1, out));
    else if (mode == M_FWD_ACC) {
        int64_t i, n = g->N * g->K * g->OH * g->OW;
        float *t = (float *)malloc(sizeof(float) * (size_t)n);
        OCR_CHECK_OK(ctx, ocr__ref_conv2d_forward(ctx, g, x, w, NULL, 0, t));
        for (i = 0; i < n; i++) out[i] += t[i];
        free(t);
    } else if (mode == M_DATA) OCR_CHECK_OK(ctx, ocr__ref_conv2d_backward(ctx, g, x, w, y, out, NULL, NULL));
    else OCR_CHECK_OK(ctx, ocr__ref_conv2d_backward(ctx, g, x, w, y, NULL, out, NULL));
}

/* Runs one mode of ocr__conv_bf16_run; returns its output (caller frees). */
static float *conv_run(ocr_ctx *ctx, const ocr__conv_geom *g, int mode, const conv_data *d, const float *init) {
    int64_t n = mode == M_DATA ? d->nx : mode == M_WEIGHT ? d->nw : d->ny;
    float *out = dup_map(init, n, 0), *x = dup_map(d->x, d->nx, 0), *w = dup_map(d->w, d->nw, 0), *y = dup_map(d->y, d->ny, 0);
    ocr__conv_epilogue ep;
    memset(&ep, 0, sizeof ep);
    ep.bias = d->b; ep.relu = 1;
    if (mode == M_FWD) OCR_CHECK_OK(ctx, ocr__conv_bf16_run(ctx, g, OCR__CONV_FWD, x, w, out, 0, &ep));
    if (mode == M_FWD_ACC) OCR_CHECK_OK(ctx, ocr__conv_bf16_run(ctx, g, OCR__CONV_FWD, x, w, out, 1, NULL));
    if (mode == M_DATA) OCR_CHECK_OK(ctx, ocr__conv_bf16_run(ctx, g, OCR__CONV_BWD_DATA, out, w, y, 1, NULL));
    if (mode == M_WEIGHT) OCR_CHECK_OK(ctx, ocr__conv_bf16_run(ctx, g, OCR__CONV_BWD_WEIGHT, x, out, y, 1, NULL));
    OCR_CHECK_MSG(!memcmp(x, d->x, sizeof(float) * (size_t)d->nx) || mode == M_DATA, "the input was changed");
    OCR_CHECK_MSG(!memcmp(w, d->w, sizeof(float) * (size_t)d->nw) || mode == M_WEIGHT, "the weights were changed");
    OCR_CHECK_MSG(!memcmp(y, d->y, sizeof(float) * (size_t)d->ny) || mode == M_FWD || mode == M_FWD_ACC, "dy was changed");
    free(x); free(w); free(y);
    return out;
}

/* Every geometry and mode: exact inputs bit-equal to the reference, rounded inputs within the summation bound (terms:
   kdim, Kg kh kw, or N OH OW per output), 1 and 2 threads the same bits (the fallback's weight gradient: both within
   the bound). With the fallback the exact cases run without Winograd (whose transforms are not exact). */
static void conv_kind(int kind) {
    ocr_ctx c1, c2;
    int q, mode, exact;
    ocr_ctx_init(&c1, 1, 5);
    ocr_ctx_init(&c2, 2, 5);
    if (!use_kind(&c1, kind)) { ocr_ctx_free(&c1); ocr_ctx_free(&c2); return; }
    for (q = 0; q < (int)(sizeof geoms / sizeof geoms[0]); q++) {
        ocr__conv_geom g = geom_make(&geoms[q]);
        for (exact = 0; exact < 2; exact++) {
            conv_data d;
            float *xr, *wr, *yr, *xa, *wa, *ya;
            if (sanitized && (exact ? q % 2 != 0 : q % 3 != 0)) continue;
            conv_data_make(&c1, &g, &d, exact);
            xr = dup_map(d.x, d.nx, 1); wr = dup_map(d.w, d.nw, 1); yr = dup_map(d.y, d.ny, 1);
            xa = dup_map(d.x, d.nx, 2); wa = dup_map(d.w, d.nw, 2); ya = dup_map(d.y, d.ny, 2);
            for (mode = 0; mode < M_COUNT; mode++) {
                int64_t n = mode == M_DATA ? d.nx : mode == M_WEIGHT ? d.nw : d.ny, i, bad = 0;
                double terms = mode == M_DATA ? (double)(g.K / g.groups) * g.kh * g.kw
                             : mode == M_WEIGHT ? (double)g.N * g.OH * g.OW : (double)(g.C / g.groups) * g.kh * g.kw;
                float *init = (float *)malloc(sizeof(float) * (size_t)n), *ref, *S, *o1, *o2;
                char what[200];
                for (i = 0; i < n; i++) init[i] = mode == M_FWD ? NAN : exact ? dyadic(&c1) / 8.0f : uni(&c1);
                ref = dup_map(init, n, 0);
                conv_reference(&c1, &g, mode, xr, wr, yr, d.b, ref);
                S = (float *)calloc((size_t)n, sizeof(float)); /* sum of |terms|: the reference on absolute values */
                conv_reference(&c1, &g, mode == M_FWD ? M_FWD_ACC : mode, xa, wa, ya, NULL, S);
                if (exact) c1.debug_flags |= OCR_DEBUG_NO_WINOGRAD, c2.debug_flags |= OCR_DEBUG_NO_WINOGRAD;
                o1 = conv_run(&c1, &g, mode, &d, init);
                o2 = conv_run(&c2, &g, mode, &d, init);
                c1.debug_flags &= ~OCR_DEBUG_NO_WINOGRAD; c2.debug_flags &= ~OCR_DEBUG_NO_WINOGRAD;
                snprintf(what, sizeof what, "%s, %s, %s, %s", kind_name[kind], geoms[q].name, mode_name[mode], exact ? "exact" : "rounded");
                for (i = 0; i < 2 * n; i++) {
                    const float *o = i < n ? o1 : o2;
                    int64_t e = i % n;
                    double base = mode == M_FWD || mode == M_FWD_ACC ? 0.0 : fabs((double)init[e]);
                    double tol = exact ? 0.0 : 2.0 * (terms + 2) * ldexp(1.0, -24) * ((double)S[e] + base) + 1e-30;
                    if (mode == M_FWD && !exact) tol += ldexp(1.0, -23) * (fabs((double)ref[e]) + 1.0); /* the bias add (|b| <= 1) */
                    if (!(fabs((double)o[e] - ref[e]) <= tol)) {
                        if (bad < 3)
                            fprintf(stderr, "  %s, %d threads: [%lld] = %.9g, reference %.9g (tolerance %.3g)\n", what, i < n ? 1 : 2, (long long)e,
                                    o[e], ref[e], tol);
                        bad++;
                    }
                }
                OCR_CHECK_MSG(bad == 0, "%s: %lld of %lld values off", what, (long long)bad, (long long)n);
                /* the fallback's fp32 weight gradient sums per-thread partials: the same bits for a thread count only */
                if (kind != OCR__BF16_NONE || mode != M_WEIGHT)
                    OCR_CHECK_MSG(memcmp(o1, o2, sizeof(float) * (size_t)n) == 0, "%s: 1 and 2 threads differ", what);
                free(init); free(ref); free(S); free(o1); free(o2);
            }
            free(xr); free(wr); free(yr); free(xa); free(wa); free(ya);
            conv_data_free(&d);
        }
    }
    ocr__bf16_kind_limit = -1;
    ocr_ctx_free(&c1);
    ocr_ctx_free(&c2);
}

static void test_conv_amx(void) { conv_kind(OCR__BF16_AMX); }
static void test_conv_avx512bf16(void) { conv_kind(OCR__BF16_AVX512); }
static void test_conv_fallback(void) { conv_kind(OCR__BF16_NONE); }

/* ---------------------------------------------------------------- selection and errors */

/* The kind follows /proc/cpuinfo's flags (read here independently), OCR_CPU_KERNEL's portable and avx2 turn it off,
   and the names say which kernel runs. */
static void test_kind_selection(void) {
    ocr_ctx ctx;
    FILE *f = fopen("/proc/cpuinfo", "r");
    char line[4096];
    int has_amx = 0, has_bf16 = 0, best;
    ocr_ctx_init(&ctx, 1, 1);
    while (f && fgets(line, sizeof line, f))
        if (!strncmp(line, "flags", 5)) {
            has_amx = strstr(line, " amx_bf16") && strstr(line, " amx_tile");
            has_bf16 = strstr(line, " avx512_bf16") && strstr(line, " avx512bw") != NULL;
            break;
        }
    if (f) fclose(f);
    best = best_kind(&ctx);
#ifdef OCR__HAVE_BF16
    if (!getenv("OCR_BF16_KERNEL") && f) {
        OCR_CHECK_MSG(best == (has_amx && has_bf16 ? OCR__BF16_AMX : has_bf16 ? OCR__BF16_AVX512 : OCR__BF16_NONE),
                      "kind %d with cpuinfo amx_bf16=%d avx512_bf16=%d", best, has_amx, has_bf16);
    }
#else
    OCR_CHECK(best == OCR__BF16_NONE);
    (void)has_amx; (void)has_bf16;
#endif
    OCR_CHECK(strstr(ocr_gemm_bf16_kernel_name(&ctx), best == OCR__BF16_AMX ? "amx-bf16" : best == OCR__BF16_AVX512 ? "avx512-bf16" : "fp32 fallback"));
    ctx.cpu_kernel = OCR_CPU_KERNEL_AVX2;
    OCR_CHECK(ocr__bf16_kind(&ctx) == OCR__BF16_NONE);
    OCR_CHECK(!strcmp(ocr_gemm_bf16_kernel_name(&ctx), "fp32 fallback"));
    ctx.cpu_kernel = OCR_CPU_KERNEL_PORTABLE;
    OCR_CHECK(ocr__bf16_kind(&ctx) == OCR__BF16_NONE);
    ctx.cpu_kernel = OCR_CPU_KERNEL_AUTO;
    ocr__bf16_kind_limit = OCR__BF16_NONE;
    OCR_CHECK(ocr__bf16_kind(&ctx) == OCR__BF16_NONE);
    ocr__bf16_kind_limit = OCR__BF16_AMX; /* a limit above what the CPU has changes nothing */
    OCR_CHECK(ocr__bf16_kind(&ctx) == best);
    ocr__bf16_kind_limit = -1;
    ocr_ctx_free(&ctx);
}

/* Bad sizes are refused with a message; M or N 0 do nothing; K 0 and alpha 0 leave beta C (beta 0: zeros, NaN
   ignored); a failing scratch allocation is reported, for every kind. */
static void test_errors(void) {
    ocr_ctx ctx;
    float A[64], B[64], C[64];
    int i, kind, best;
    ocr__conv_geom g;
    for (i = 0; i < 64; i++) A[i] = B[i] = 1.0f;
    ocr_ctx_init(&ctx, 2, 1);
    OCR_CHECK_ERR(&ctx, ocr__gemm_bf16(&ctx, 0, 0, -1, 2, 2, 1.0f, A, 2, B, 2, 0.0f, C, 2), OCR_EINVAL, "bad sizes");
    OCR_CHECK_ERR(&ctx, ocr__gemm_bf16(&ctx, 0, 0, 2, 2, 3, 1.0f, A, 2, B, 2, 0.0f, C, 2), OCR_EINVAL, "lda=2");
    OCR_CHECK_ERR(&ctx, ocr__gemm_bf16(&ctx, 0, 1, 2, 4, 3, 1.0f, A, 3, B, 2, 0.0f, C, 4), OCR_EINVAL, "ldb=2");
    OCR_CHECK_ERR(&ctx, ocr__gemm_bf16(&ctx, 0, 0, 2, 4, 3, 1.0f, A, 3, B, 4, 0.0f, C, 3), OCR_EINVAL, "ldc=3");
    for (i = 0; i < 64; i++) C[i] = 7.0f;
    OCR_CHECK_OK(&ctx, ocr__gemm_bf16(&ctx, 0, 0, 0, 4, 3, 1.0f, A, 3, B, 4, 0.0f, C, 4));
    OCR_CHECK(C[0] == 7.0f);
    OCR_CHECK_OK(&ctx, ocr__gemm_bf16(&ctx, 0, 0, 2, 4, 0, 1.0f, A, 1, B, 4, 0.5f, C, 4));
    OCR_CHECK(C[0] == 3.5f && C[7] == 3.5f && C[8] == 7.0f);
    for (i = 0; i < 8; i++) C[i] = NAN;
    OCR_CHECK_OK(&ctx, ocr__gemm_bf16(&ctx, 0, 0, 2, 4, 3, 0.0f, A, 3, B, 4, 0.0f, C, 4));
    OCR_CHECK(C[0] == 0.0f && C[7] == 0.0f);
    ocr_ctx_free(&ctx);
    memset(&g, 0, sizeof g);
    g.N = 1; g.C = 4; g.K = 4; g.H = g.W = 6; g.kh = g.kw = 3; g.sh = g.sw = 1; g.ph = g.pw = 1; g.dh = g.dw = 1; g.groups = 1;
    g.OH = g.OW = 6;
    ocr_ctx_init(&ctx, 2, 1);
    best = best_kind(&ctx);
    for (kind = 0; kind <= best; kind++) {
        ocr_ctx fresh;
        float x[144], w[144], y[144];
        int mode;
        for (i = 0; i < 144; i++) x[i] = w[i] = y[i] = 0.5f;
        ocr__bf16_kind_limit = kind;
        for (mode = 0; mode < 4; mode++) {
            ocr_ctx_init(&fresh, 2, 1); /* no scratch allocated yet */
            fail_alloc = 1;
            if (mode == 3) OCR_CHECK_ERR(&fresh, ocr__gemm_bf16(&fresh, 0, 0, 8, 8, 8, 1.0f, A, 8, B, 8, 0.0f, C, 8), OCR_ENOMEM, "scratch");
            else OCR_CHECK_ERR(&fresh, ocr__conv_bf16_run(&fresh, &g, mode, x, w, y, 0, NULL), OCR_ENOMEM, "scratch");
            fail_alloc = 0;
            ocr_ctx_free(&fresh);
        }
    }
    ocr__bf16_kind_limit = -1;
    ocr_ctx_free(&ctx);
}

int main(int argc, char **argv) {
    ocr_test_init(argc, argv);
    sanitized = ocr_test_sanitized();
    OCR_TEST_RUN(test_kind_selection);
    OCR_TEST_RUN(test_errors);
    OCR_TEST_RUN(test_rounding_amx);
    OCR_TEST_RUN(test_rounding_avx512bf16);
    OCR_TEST_RUN(test_rounding_fallback);
    OCR_TEST_RUN(test_gemm_amx);
    OCR_TEST_RUN(test_gemm_avx512bf16);
    OCR_TEST_RUN(test_gemm_fallback);
    OCR_TEST_RUN(test_gemm_kinds_agree);
    OCR_TEST_RUN(test_conv_amx);
    OCR_TEST_RUN(test_conv_avx512bf16);
    OCR_TEST_RUN(test_conv_fallback);
    return ocr_test_finish();
}
