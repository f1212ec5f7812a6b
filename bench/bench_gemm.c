/* bench_gemm - ocr_gemm against OpenBLAS's cblas_sgemm in the same run, at 1024^3 and at the GEMM shapes the DBNet
   convolutions lower to. OpenBLAS is loaded at run time (libopenblas-dev is for benchmarks only), so this program
   builds without it and says so when it is missing. Alternates the two (with a pause before each timed call, so
   neither runs while the other's threads still spin), excludes warm-up, prints the median of at least 5 runs, and a
   last JSON line with every figure and ratio, and each figure's share of this machine's measured fp32 peak
   (bench_peak.h). Debian's OpenBLAS 0.3.21 does not know every CPU here (on Intel Xeon model 207 it falls back to a
   generic kernel at a fifth of its speed): where the CPU has AVX-512 and OpenBLAS picked a kernel without it, this
   program restarts itself with OPENBLAS_CORETYPE=SkylakeX, so the peer is OpenBLAS at its best (set the variable
   yourself to choose another).
   Then the bf16 GEMM of mixed precision (ocr__gemm_bf16: AMX-BF16, AVX512_BF16 or the fp32 fallback, named) on the
   same shapes on 1 thread and on N, with each figure's share of the measured bf16 peak of its instruction and its
   speed against ocr_gemm's fp32 on N threads; and the 3x3 stride-1 convolutions of DB-ResNet-18 (layer1 to layer4
   and the decoder's largest, batch 4 at 640x640) in all three modes, ocr__conv_run's fp32 against
   ocr__conv_bf16_run on N threads.
   --back-to-back times each side's calls one after another, as a training step calls it (a pause only between the
   two sides and before each bf16 shape, then warm-up calls for BENCH_WARM_SECONDS): on some virtual machines a thread
   that slept for the pause comes back slowly, taking a few milliseconds, and the alternating default then measures
   the wake-up as much as the GEMM.
   usage: bench_gemm [--threads N] [--reps N] [--back-to-back] */
#define OCR_IMPLEMENTATION
#include "ocr_tensor.h"
#include "ocr_nn.h"
#include "bench_common.h"
#include "bench_peak.h"
#include <dlfcn.h>
#include <time.h>

#define BENCH_WARM_SECONDS 0.1

typedef void (*sgemm_fn)(int order, int ta, int tb, int M, int N, int K, float alpha, const float *A, int lda, const float *B,
                         int ldb, float beta, float *C, int ldc);

/* M = output channels, N = output pixels per chunk, K = Cin*kh*kw: forward convs of DBNet-ResNet-18 at 640x640 */
static const struct { const char *name; int M, N, K, ta, tb; } shapes[] = {
    {"square 1024^3", 1024, 1024, 1024, 0, 0},
    {"conv1 7x7 (64x4096x147)", 64, 4096, 147, 0, 0},
    {"layer1 3x3 (64x1820x576)", 64, 1820, 576, 0, 0},
    {"layer3 3x3 (256x455x2304)", 256, 455, 2304, 0, 0},
    {"layer4 3x3 (512x400x4608)", 512, 400, 4608, 0, 0},
    {"fpn 1x1 (256x6400x128)", 256, 6400, 128, 0, 0},
    {"bwd-data 3x3 (576x1820x64, A^T)", 576, 1820, 64, 1, 0},
    {"bwd-weight 3x3 (64x576x1820, B^T)", 64, 576, 1820, 0, 1},
};

/* The median of reps timed calls of the bf16 GEMM of shape s on ctx (after a warm-up), in seconds; a pause before
   each call, or before the warm-up only when back_to_back. */
static double bench_gemm_bf16_time(ocr_ctx *ctx, int s, int reps, int back_to_back, const float *A, const float *B, float *C) {
    double t[64];
    int r;
    for (r = -1; r < reps && r < 64; r++) {
        double t0;
        double w0;
        if (!back_to_back || r == -1) bench_settle();
        w0 = now();
        do {
            t0 = now();
            ocr__gemm_bf16(ctx, shapes[s].ta, shapes[s].tb, shapes[s].M, shapes[s].N, shapes[s].K, 1.0f, A, shapes[s].ta ? shapes[s].M : shapes[s].K,
                           B, shapes[s].tb ? shapes[s].K : shapes[s].N, 0.0f, C, shapes[s].N);
        } while (back_to_back && r == -1 && now() - w0 < BENCH_WARM_SECONDS);
        if (r >= 0) t[r] = now() - t0;
    }
    qsort(t, (size_t)reps, sizeof(double), cmp_double);
    return t[reps / 2];
}

/* The bf16 GEMM rows: every shape on 1 thread (ctx1) and on `threads` (ctxn), against fp32_gflops (ocr_gemm on
   `threads`); appends to the JSON line. */
static size_t bench_gemm_bf16(ocr_ctx *ctx1, ocr_ctx *ctxn, int threads, int reps, int back_to_back, const double *fp32_gflops, char *json,
                              size_t cap, size_t jl) {
    int n_shapes = (int)(sizeof shapes / sizeof shapes[0]), s, i, amx = strstr(ocr_gemm_bf16_kernel_name(ctxn), "amx") != NULL;
    double p1 = amx ? bench_peak_bf16_measured.amx_one : bench_peak_bf16_measured.one;
    double pn = amx ? bench_peak_bf16_measured.amx_all : bench_peak_bf16_measured.all;
    if (bench_peak_bf16_measured.threads != threads && threads > 1) pn = 0;
    printf("bench_gemm: bf16 GEMM (op(A), op(B) rounded to bf16, fp32 sums), kernel %s; %% of the measured %s peak\n",
           ocr_gemm_bf16_kernel_name(ctxn), amx ? "AMX-BF16" : "vdpbf16ps");
    printf("%-36s %12s %8s %12s %8s %10s\n", "shape", "1 thr GF/s", "%peak", "", "%peak", "vs fp32");
    jl += (size_t)snprintf(json + jl, cap - jl, ",\"bf16_kernel\":\"%s\",\"bf16_peak_gflops\":[%.1f,%.1f],\"bf16\":[",
                           ocr_gemm_bf16_kernel_name(ctxn), p1, pn);
    for (s = 0; s < n_shapes; s++) {
        int M = shapes[s].M, N = shapes[s].N, K = shapes[s].K;
        float *A = (float *)ocr_aligned_alloc(sizeof(float) * (size_t)M * K), *B = (float *)ocr_aligned_alloc(sizeof(float) * (size_t)K * N);
        float *C = (float *)ocr_aligned_alloc(sizeof(float) * (size_t)M * N);
        double flops = 2.0 * M * N * K, g1, gn;
        char label[32];
        for (i = 0; i < M * K; i++) A[i] = ocr_rng_uniform(&ctxn->rng) - 0.5f;
        for (i = 0; i < K * N; i++) B[i] = ocr_rng_uniform(&ctxn->rng) - 0.5f;
        g1 = flops / bench_gemm_bf16_time(ctx1, s, reps, back_to_back, A, B, C) * 1e-9;
        gn = flops / bench_gemm_bf16_time(ctxn, s, reps, back_to_back, A, B, C) * 1e-9;
        snprintf(label, sizeof label, "%d thr GF/s", threads);
        if (s == 0) printf("%-36s %12s %8s %12s %8s %10s\n", "", "", "", label, "", "");
        printf("%-36s %12.1f %7.0f%% %12.1f %7.0f%% %9.2fx\n", shapes[s].name, g1, p1 > 0 ? 100 * g1 / p1 : 0.0, gn,
               pn > 0 ? 100 * gn / pn : 0.0, gn / fp32_gflops[s]);
        jl += (size_t)snprintf(json + jl, cap - jl, "%s{\"shape\":\"%s\",\"gflops_1\":%.2f,\"gflops_n\":%.2f,\"vs_fp32\":%.3f}", s ? "," : "",
                               shapes[s].name, g1, gn, gn / fp32_gflops[s]);
        ocr_aligned_free(A); ocr_aligned_free(B); ocr_aligned_free(C);
    }
    return jl + (size_t)snprintf(json + jl, cap - jl, "]");
}

/* The 3x3 stride-1 convolutions of DB-ResNet-18 at width 1 and 640x640 (layer1 to layer4, and the decoder's 256 to 64
   channels at 160x160) at batch 4, each mode on ocr__conv_run (fp32: Winograd, implicit or packed im2col, as the layer
   would run) and ocr__conv_bf16_run, alternated; medians of reps runs. */
static size_t bench_conv_bf16(ocr_ctx *ctx, int threads, int reps, char *json, size_t cap, size_t jl) {
    static const struct { const char *name; int C, K, HW; } layers[] = {
        {"layer1 3x3 64ch 160x160", 64, 64, 160},    {"layer2 3x3 128ch 80x80", 128, 128, 80},
        {"layer3 3x3 256ch 40x40", 256, 256, 40},    {"layer4 3x3 512ch 20x20", 512, 512, 20},
        {"decoder 3x3 256->64 160x160", 256, 64, 160}};
    const int n_layers = (int)(sizeof layers / sizeof layers[0]);
    static const char *mode_name[3] = {"forward", "data grad", "weight grad"};
    int l, m, r, v;
    printf("bench_gemm: convolutions, batch 4, %d threads: fp32 (ocr__conv_run) against bf16 (ocr__conv_bf16_run, %s)\n", threads,
           ocr_gemm_bf16_kernel_name(ctx));
    printf("%-28s %-12s %9s %10s %9s %10s %8s\n", "layer", "mode", "fp32 ms", "GFLOP/s", "bf16 ms", "GFLOP/s", "speedup");
    jl += (size_t)snprintf(json + jl, cap - jl, ",\"conv\":[");
    for (l = 0; l < n_layers; l++) {
        ocr__conv_geom g;
        size_t nx, nw, ny, i;
        float *x, *w, *y, *dx, *dw;
        double flops;
        memset(&g, 0, sizeof g);
        g.N = 4; g.C = layers[l].C; g.K = layers[l].K; g.H = g.W = g.OH = g.OW = layers[l].HW;
        g.kh = g.kw = 3; g.sh = g.sw = 1; g.ph = g.pw = 1; g.dh = g.dw = 1; g.groups = 1;
        nx = (size_t)(g.N * g.C * g.H * g.W); nw = (size_t)(g.K * g.C * 9); ny = (size_t)(g.N * g.K * g.OH * g.OW);
        x = (float *)ocr_aligned_alloc(nx * 4); dx = (float *)ocr_aligned_alloc(nx * 4);
        w = (float *)ocr_aligned_alloc(nw * 4); dw = (float *)ocr_aligned_alloc(nw * 4); y = (float *)ocr_aligned_alloc(ny * 4);
        for (i = 0; i < nx; i++) x[i] = dx[i] = ocr_rng_uniform(&ctx->rng) - 0.5f;
        for (i = 0; i < nw; i++) w[i] = dw[i] = ocr_rng_uniform(&ctx->rng) - 0.5f;
        for (i = 0; i < ny; i++) y[i] = ocr_rng_uniform(&ctx->rng) - 0.5f;
        flops = 2.0 * g.N * g.K * g.OH * g.OW * g.C * 9;
        for (m = 0; m < 3; m++) {
            double t[2][64], med[2];
            for (r = -1; r < reps && r < 64; r++)
                for (v = 0; v < 2; v++) {
                    double t0;
                    int rc;
                    bench_settle();
                    t0 = now();
                    if (v == 0) rc = m == 0 ? ocr__conv_run(ctx, &g, OCR__CONV_FWD, x, w, y, 0)
                                   : m == 1 ? ocr__conv_backward_data(ctx, &g, dx, w, y) : ocr__conv_run(ctx, &g, OCR__CONV_BWD_WEIGHT, x, dw, y, 1);
                    else rc = ocr__conv_bf16_run(ctx, &g, m, m == 1 ? dx : x, m == 2 ? dw : w, y, 0, NULL);
                    if (rc) { fprintf(stderr, "bench_gemm: %s\n", ocr_ctx_last_error(ctx)); exit(1); }
                    if (r >= 0) t[v][r] = now() - t0;
                }
            for (v = 0; v < 2; v++) { qsort(t[v], (size_t)reps, sizeof(double), cmp_double); med[v] = t[v][reps / 2]; }
            printf("%-28s %-12s %9.2f %10.0f %9.2f %10.0f %7.2fx\n", layers[l].name, mode_name[m], med[0] * 1e3, flops / med[0] * 1e-9,
                   med[1] * 1e3, flops / med[1] * 1e-9, med[0] / med[1]);
            jl += (size_t)snprintf(json + jl, cap - jl, "%s{\"layer\":\"%s\",\"mode\":\"%s\",\"fp32_ms\":%.3f,\"bf16_ms\":%.3f}",
                                   l || m ? "," : "", layers[l].name, mode_name[m], med[0] * 1e3, med[1] * 1e3);
        }
        ocr_aligned_free(x); ocr_aligned_free(dx); ocr_aligned_free(w); ocr_aligned_free(dw); ocr_aligned_free(y);
    }
    return jl + (size_t)snprintf(json + jl, cap - jl, "]");
}
typedef void (*set_threads_fn)(int);
typedef char *(*corename_fn)(void);

int main(int argc, char **argv) {
    int threads = 2, reps = 7, back_to_back = 0, i, r, s, n_shapes = (int)(sizeof shapes / sizeof shapes[0]);
    double fp32_gflops[16];
    ocr_ctx ctx1;
    char core[128] = "unknown";
    double peak;
    void *lib;
    sgemm_fn blas = NULL;
    ocr_ctx ctx;
    char json[8192];
    size_t jl;
    for (i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--threads") == 0 && i + 1 < argc) threads = atoi(argv[++i]);
        else if (strcmp(argv[i], "--reps") == 0 && i + 1 < argc) reps = atoi(argv[++i]);
        else if (strcmp(argv[i], "--back-to-back") == 0) back_to_back = 1;
        else { printf("usage: %s [--threads N] [--reps N] [--back-to-back]   (reps >= 5)\n", argv[0]); return strcmp(argv[i], "--help") == 0 ? 0 : 2; }
    }
    if (reps < 5) reps = 5;
    if (threads < 1) threads = 1;
    if (ocr_ctx_init(&ctx, threads, 1) != OCR_OK) { fprintf(stderr, "%s\n", ocr_ctx_last_error(&ctx)); return 1; }
    lib = dlopen("libopenblas.so.0", RTLD_NOW);
    if (!lib) lib = dlopen("libopenblas.so", RTLD_NOW);
    if (lib) {
        /* POSIX guarantees data and function pointers convert through dlsym; memcpy keeps ISO C quiet */
        void *p_st = dlsym(lib, "openblas_set_num_threads"), *p_gemm = dlsym(lib, "cblas_sgemm"), *p_core = dlsym(lib, "openblas_get_corename");
        set_threads_fn st = NULL;
        corename_fn cn = NULL;
        if (p_st) memcpy(&st, &p_st, sizeof st);
        if (p_gemm) memcpy(&blas, &p_gemm, sizeof blas);
        if (p_core) memcpy(&cn, &p_core, sizeof cn);
        if (cn && cn()) snprintf(core, sizeof core, "%s", cn());
        if (__builtin_cpu_supports("avx512f") && !getenv("OPENBLAS_CORETYPE") && !strstr(core, "Skylake") && !strstr(core, "Cooper") &&
            !strstr(core, "Sapphire")) {
            fprintf(stderr, "bench_gemm: OpenBLAS picked '%s' on a CPU with AVX-512: restarting with OPENBLAS_CORETYPE=SkylakeX\n", core);
            setenv("OPENBLAS_CORETYPE", "SkylakeX", 1);
            execv("/proc/self/exe", argv);
            fprintf(stderr, "bench_gemm: cannot restart itself; OpenBLAS stays on '%s'\n", core);
        }
        if (st) st(threads);
    }
    peak = bench_print_peak(threads);
    printf("bench_gemm: %d threads, %s, ocr-c kernel %s, peer %s%s%s\n", threads,
           back_to_back ? "each side's calls back to back" : "the two alternating, a pause before each call", ocr_gemm_kernel_name(&ctx),
           blas ? "OpenBLAS cblas_sgemm, core " : "none (apt-get install libopenblas-dev)", blas ? core : "",
           getenv("OPENBLAS_CORETYPE") ? " (OPENBLAS_CORETYPE set)" : "");
    printf("%-36s %12s %12s %8s %10s %10s\n", "shape", "ocr GFLOP/s", "blas GFLOP/s", "ratio", "ocr %peak", "blas %peak");
    jl = (size_t)snprintf(json, sizeof json, "{\"bench\":\"gemm\",\"back_to_back\":%d,\"threads\":%d,\"kernel\":\"%s\",\"blas_core\":\"%s\",\"fp32_peak_gflops\":%.1f,"
                          "\"results\":[", back_to_back, threads, ocr_gemm_kernel_name(&ctx), core, peak);
    for (s = 0; s < n_shapes; s++) {
        int M = shapes[s].M, N = shapes[s].N, K = shapes[s].K, ta = shapes[s].ta, tb = shapes[s].tb;
        int lda = ta ? M : K, ldb = tb ? K : N;
        float *A = (float *)ocr_aligned_alloc(sizeof(float) * (size_t)M * K), *B = (float *)ocr_aligned_alloc(sizeof(float) * (size_t)K * N);
        float *C = (float *)ocr_aligned_alloc(sizeof(float) * (size_t)M * N);
        double t_ocr[64], t_blas[64], flops = 2.0 * M * N * K, g_ocr, g_blas = 0;
        int side;
        for (i = 0; i < M * K; i++) A[i] = ocr_rng_uniform(&ctx.rng) - 0.5f;
        for (i = 0; i < K * N; i++) B[i] = ocr_rng_uniform(&ctx.rng) - 0.5f;
        for (side = 0; side < (back_to_back ? 2 : 1); side++)
            for (r = -1; r < reps && r < 64; r++) { /* r = -1 is the warm-up */
                double t0;
                if (!back_to_back || r == -1) bench_settle();
                if (!back_to_back || side == 0) {
                    double w0 = now();
                    do {
                        t0 = now();
                        ocr_gemm(&ctx, ta, tb, M, N, K, 1.0f, A, lda, B, ldb, 0.0f, C, N);
                    } while (back_to_back && r == -1 && now() - w0 < BENCH_WARM_SECONDS);
                    if (r >= 0) t_ocr[r] = now() - t0;
                }
                if (blas && (!back_to_back || side == 1)) {
                    double w0;
                    if (!back_to_back) bench_settle();
                    w0 = now();
                    do {
                        t0 = now();
                        blas(101, ta ? 112 : 111, tb ? 112 : 111, M, N, K, 1.0f, A, lda, B, ldb, 0.0f, C, N); /* row-major */
                    } while (back_to_back && r == -1 && now() - w0 < BENCH_WARM_SECONDS);
                    if (r >= 0) t_blas[r] = now() - t0;
                }
            }
        qsort(t_ocr, (size_t)reps, sizeof(double), cmp_double);
        g_ocr = flops / t_ocr[reps / 2] * 1e-9;
        if (blas) { qsort(t_blas, (size_t)reps, sizeof(double), cmp_double); g_blas = flops / t_blas[reps / 2] * 1e-9; }
        printf("%-36s %12.1f %12.1f %8.2f %9.0f%% %9.0f%%\n", shapes[s].name, g_ocr, g_blas, blas ? g_ocr / g_blas : 0.0,
               100 * g_ocr / peak, 100 * g_blas / peak);
        fp32_gflops[s] = g_ocr;
        jl += (size_t)snprintf(json + jl, sizeof json - jl, "%s{\"shape\":\"%s\",\"ocr_gflops\":%.2f,\"blas_gflops\":%.2f,\"ratio\":%.3f}",
                               s ? "," : "", shapes[s].name, g_ocr, g_blas, blas ? g_ocr / g_blas : 0.0);
        ocr_aligned_free(A); ocr_aligned_free(B); ocr_aligned_free(C);
    }
    jl += (size_t)snprintf(json + jl, sizeof json - jl, "]");
    if (ocr_ctx_init(&ctx1, 1, 1) != OCR_OK) { fprintf(stderr, "%s\n", ocr_ctx_last_error(&ctx1)); return 1; }
    jl = bench_gemm_bf16(&ctx1, &ctx, threads, reps, back_to_back, fp32_gflops, json, sizeof json, jl);
    jl = bench_conv_bf16(&ctx, threads, reps, json, sizeof json, jl);
    snprintf(json + jl, sizeof json - jl, "}");
    printf("%s\n", json);
    ocr_ctx_free(&ctx1);
    ocr_ctx_free(&ctx);
    return 0;
}
