/* GEMM against a double-precision triple loop, for every transpose pair, odd sizes, alpha/beta, both
   micro-kernels and 1 and 2 threads. */
#define OCR_IMPLEMENTATION
#include "ocr_tensor.h"
#include "ocr_nn.h"
#include "ocr_test.h"

static void ref_gemm(int ta, int tb, int M, int N, int K, float alpha, const float *A, int lda, const float *B, int ldb,
                     float beta, float *C, int ldc) {
    int i, j, k;
    for (i = 0; i < M; i++)
        for (j = 0; j < N; j++) {
            double s = 0.0;
            for (k = 0; k < K; k++) s += (double)(ta ? A[k * lda + i] : A[i * lda + k]) * (tb ? B[j * ldb + k] : B[k * ldb + j]);
            C[i * ldc + j] = (float)(alpha * s + (beta == 0.0f ? 0.0 : (double)beta * C[i * ldc + j]));
        }
}

static void run_case(ocr_ctx *ctx, int ta, int tb, int M, int N, int K, float alpha, float beta) {
    int lda = (ta ? M : K) + 3, ldb = (tb ? K : N) + 1, ldc = N + 2, i;
    int na = (ta ? K : M) * lda, nb = (tb ? N : K) * ldb, nc = M * ldc;
    float *A = (float *)malloc(sizeof(float) * (size_t)(na + 1)), *B = (float *)malloc(sizeof(float) * (size_t)(nb + 1));
    float *C = (float *)malloc(sizeof(float) * (size_t)(nc + 1)), *R = (float *)malloc(sizeof(float) * (size_t)(nc + 1));
    char what[128];
    for (i = 0; i < na; i++) A[i] = ocr_rng_uniform(&ctx->rng) * 2 - 1;
    for (i = 0; i < nb; i++) B[i] = ocr_rng_uniform(&ctx->rng) * 2 - 1;
    for (i = 0; i < nc; i++) C[i] = R[i] = beta == 0.0f ? NAN : ocr_rng_uniform(&ctx->rng); /* beta 0 must ignore C */
    ref_gemm(ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, R, ldc);
    OCR_CHECK_OK(ctx, ocr_gemm(ctx, ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc));
    /* columns past N (the ldc padding) must be untouched */
    for (i = 0; i < M; i++) { C[i * ldc + N] = C[i * ldc + N + 1] = 0; R[i * ldc + N] = R[i * ldc + N + 1] = 0; }
    snprintf(what, sizeof what, "%s ta=%d tb=%d M=%d N=%d K=%d alpha=%g beta=%g threads=%d", ocr_gemm_kernel_name(ctx), ta, tb,
             M, N, K, alpha, beta, ctx->n_threads);
    ocr_test_close(what, C, R, nc, 1e-4, 1e-4 * sqrt((double)K));
    free(A); free(B); free(C); free(R);
}

static void test_gemm_shapes(void) {
    static const int sizes[][3] = {{1, 1, 1}, {6, 16, 8}, {7, 17, 9}, {13, 50, 300}, {97, 33, 257}, {64, 576, 130},
                                   {5, 2100, 20}, {200, 3, 40}, {3, 5, 0},
                                   /* last panels of exactly 16 and 32 columns (AVX-512: straight into C) */
                                   {24, 64, 70}, {17, 80, 33}};
    int kernel, threads, s, ta, tb;
    for (kernel = OCR_CPU_KERNEL_PORTABLE; kernel <= OCR_CPU_KERNEL_AVX512; kernel++)
        for (threads = 1; threads <= 2; threads++) {
            ocr_ctx ctx;
            OCR_CHECK_OK(&ctx, ocr_ctx_init(&ctx, threads, 7));
            ctx.cpu_kernel = kernel;
            for (s = 0; s < (int)(sizeof sizes / sizeof sizes[0]); s++)
                for (ta = 0; ta < 2; ta++)
                    for (tb = 0; tb < 2; tb++) {
                        run_case(&ctx, ta, tb, sizes[s][0], sizes[s][1], sizes[s][2], 1.0f, 0.0f);
                        run_case(&ctx, ta, tb, sizes[s][0], sizes[s][1], sizes[s][2], -0.5f, 1.5f);
                    }
            ocr_ctx_free(&ctx);
        }
}

/* Two threads give the same bits as one, whichever way the work is split (rows and K blocks shared, or a serial
   GEMM per column share for few rows): every tile starts at the same row and column and sums K in the same order. */
/* Every thread count shares the work out differently (one rectangle of C per thread in a grid chosen by cost, or
   the shared K blocks): 2, 3 and 4 threads must each give one thread's bits. The sizes reach each grid: columns
   only, rows only (520 x 100), 2 x 2 (384 x 384 on 4), and the shared path. */
static void test_gemm_threads_same_bits(void) {
    static const int sizes[][3] = {{64, 576, 300}, {5, 2100, 20}, {64, 200, 1000}, {300, 500, 600}, {8, 97, 33}, {520, 100, 700}, {384, 384, 500}};
    ocr_ctx one, many;
    int s, ta, tb, threads;
    OCR_CHECK_OK(&one, ocr_ctx_init(&one, 1, 3));
    for (threads = 2; threads <= 4; threads++) {
        OCR_CHECK_OK(&many, ocr_ctx_init(&many, threads, 3));
        for (s = 0; s < (int)(sizeof sizes / sizeof sizes[0]); s++)
            for (ta = 0; ta < 2; ta++)
                for (tb = 0; tb < 2; tb++) {
                    int M = sizes[s][0], N = sizes[s][1], K = sizes[s][2], i;
                    float *A = (float *)malloc(sizeof(float) * (size_t)M * K), *B = (float *)malloc(sizeof(float) * (size_t)K * N);
                    float *C1 = (float *)malloc(sizeof(float) * (size_t)M * N), *C2 = (float *)malloc(sizeof(float) * (size_t)M * N);
                    for (i = 0; i < M * K; i++) A[i] = ocr_rng_uniform(&one.rng) - 0.5f;
                    for (i = 0; i < K * N; i++) B[i] = ocr_rng_uniform(&one.rng) - 0.5f;
                    for (i = 0; i < M * N; i++) C1[i] = C2[i] = ocr_rng_uniform(&one.rng);
                    OCR_CHECK_OK(&one, ocr_gemm(&one, ta, tb, M, N, K, 0.7f, A, ta ? M : K, B, tb ? K : N, 0.5f, C1, N));
                    OCR_CHECK_OK(&many, ocr_gemm(&many, ta, tb, M, N, K, 0.7f, A, ta ? M : K, B, tb ? K : N, 0.5f, C2, N));
                    OCR_CHECK_MSG(memcmp(C1, C2, sizeof(float) * (size_t)M * N) == 0, "M=%d N=%d K=%d ta=%d tb=%d: %d threads differ from 1", M,
                                  N, K, ta, tb, threads);
                    free(A); free(B); free(C1); free(C2);
                }
        ocr_ctx_free(&many);
    }
    ocr_ctx_free(&one);
}

static void test_gemm_bad_args(void) {
    ocr_ctx ctx;
    float a[4] = {0}, b[4] = {0}, c[4] = {0};
    OCR_CHECK_OK(&ctx, ocr_ctx_init(&ctx, 1, 1));
    OCR_CHECK_ERR(&ctx, ocr_gemm(&ctx, 0, 0, 2, 2, 2, 1, a, 1, b, 2, 0, c, 2), OCR_EINVAL, "lda=1");
    OCR_CHECK_ERR(&ctx, ocr_gemm(&ctx, 0, 0, -1, 2, 2, 1, a, 2, b, 2, 0, c, 2), OCR_EINVAL, "M=-1");
    ocr_ctx_free(&ctx);
}

int main(int argc, char **argv) {
    ocr_test_init(argc, argv);
    OCR_TEST_RUN(test_gemm_shapes);
    OCR_TEST_RUN(test_gemm_threads_same_bits);
    OCR_TEST_RUN(test_gemm_bad_args);
    return ocr_test_finish();
}
