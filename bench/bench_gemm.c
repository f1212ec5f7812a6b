/* bench_gemm - ocr_gemm against OpenBLAS's cblas_sgemm in the same run, at 1024^3 and at the GEMM shapes the DBNet
   convolutions lower to. OpenBLAS is loaded at run time (libopenblas-dev is for benchmarks only), so this program
   builds without it and says so when it is missing. Alternates the two (with a pause before each timed call, so
   neither runs while the other's threads still spin), excludes warm-up, prints the median of at least 5 runs, and a
   last JSON line with every figure and ratio, and each figure's share of this machine's measured fp32 peak
   (bench_peak.h). Debian's OpenBLAS 0.3.21 does not know every CPU here (on Intel Xeon model 207 it falls back to a
   generic kernel at a fifth of its speed): where the CPU has AVX-512 and OpenBLAS picked a kernel without it, this
   program restarts itself with OPENBLAS_CORETYPE=SkylakeX, so the peer is OpenBLAS at its best (set the variable
   yourself to choose another).
   usage: bench_gemm [--threads N] [--reps N] */
#define OCR_IMPLEMENTATION
#include "ocr_tensor.h"
#include "ocr_nn.h"
#include "bench_common.h"
#include "bench_peak.h"
#include <dlfcn.h>
#include <time.h>

typedef void (*sgemm_fn)(int order, int ta, int tb, int M, int N, int K, float alpha, const float *A, int lda, const float *B,
                         int ldb, float beta, float *C, int ldc);
typedef void (*set_threads_fn)(int);
typedef char *(*corename_fn)(void);

int main(int argc, char **argv) {
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
    int threads = 2, reps = 7, i, r, s, n_shapes = (int)(sizeof shapes / sizeof shapes[0]);
    char core[128] = "unknown";
    double peak;
    void *lib;
    sgemm_fn blas = NULL;
    ocr_ctx ctx;
    char json[4096];
    size_t jl;
    for (i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--threads") == 0 && i + 1 < argc) threads = atoi(argv[++i]);
        else if (strcmp(argv[i], "--reps") == 0 && i + 1 < argc) reps = atoi(argv[++i]);
        else { printf("usage: %s [--threads N] [--reps N]   (reps >= 5)\n", argv[0]); return strcmp(argv[i], "--help") == 0 ? 0 : 2; }
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
    printf("bench_gemm: %d threads, ocr-c kernel %s, peer %s%s%s\n", threads, ocr_gemm_kernel_name(&ctx),
           blas ? "OpenBLAS cblas_sgemm, core " : "none (apt-get install libopenblas-dev)", blas ? core : "",
           getenv("OPENBLAS_CORETYPE") ? " (OPENBLAS_CORETYPE set)" : "");
    printf("%-36s %12s %12s %8s %10s %10s\n", "shape", "ocr GFLOP/s", "blas GFLOP/s", "ratio", "ocr %peak", "blas %peak");
    jl = (size_t)snprintf(json, sizeof json, "{\"bench\":\"gemm\",\"threads\":%d,\"kernel\":\"%s\",\"blas_core\":\"%s\",\"fp32_peak_gflops\":%.1f,"
                          "\"results\":[", threads, ocr_gemm_kernel_name(&ctx), core, peak);
    for (s = 0; s < n_shapes; s++) {
        int M = shapes[s].M, N = shapes[s].N, K = shapes[s].K, ta = shapes[s].ta, tb = shapes[s].tb;
        int lda = ta ? M : K, ldb = tb ? K : N;
        float *A = (float *)ocr_aligned_alloc(sizeof(float) * (size_t)M * K), *B = (float *)ocr_aligned_alloc(sizeof(float) * (size_t)K * N);
        float *C = (float *)ocr_aligned_alloc(sizeof(float) * (size_t)M * N);
        double t_ocr[64], t_blas[64], flops = 2.0 * M * N * K, g_ocr, g_blas = 0;
        for (i = 0; i < M * K; i++) A[i] = ocr_rng_uniform(&ctx.rng) - 0.5f;
        for (i = 0; i < K * N; i++) B[i] = ocr_rng_uniform(&ctx.rng) - 0.5f;
        for (r = -1; r < reps && r < 64; r++) { /* r = -1 is the warm-up */
            double t0;
            bench_settle();
            t0 = now();
            ocr_gemm(&ctx, ta, tb, M, N, K, 1.0f, A, lda, B, ldb, 0.0f, C, N);
            if (r >= 0) t_ocr[r] = now() - t0;
            if (blas) {
                bench_settle();
                t0 = now();
                blas(101, ta ? 112 : 111, tb ? 112 : 111, M, N, K, 1.0f, A, lda, B, ldb, 0.0f, C, N); /* row-major */
                if (r >= 0) t_blas[r] = now() - t0;
            }
        }
        qsort(t_ocr, (size_t)reps, sizeof(double), cmp_double);
        g_ocr = flops / t_ocr[reps / 2] * 1e-9;
        if (blas) { qsort(t_blas, (size_t)reps, sizeof(double), cmp_double); g_blas = flops / t_blas[reps / 2] * 1e-9; }
        printf("%-36s %12.1f %12.1f %8.2f %9.0f%% %9.0f%%\n", shapes[s].name, g_ocr, g_blas, blas ? g_ocr / g_blas : 0.0,
               100 * g_ocr / peak, 100 * g_blas / peak);
        jl += (size_t)snprintf(json + jl, sizeof json - jl, "%s{\"shape\":\"%s\",\"ocr_gflops\":%.2f,\"blas_gflops\":%.2f,\"ratio\":%.3f}",
                               s ? "," : "", shapes[s].name, g_ocr, g_blas, blas ? g_ocr / g_blas : 0.0);
        ocr_aligned_free(A); ocr_aligned_free(B); ocr_aligned_free(C);
    }
    snprintf(json + jl, sizeof json - jl, "]}");
    printf("%s\n", json);
    ocr_ctx_free(&ctx);
    return 0;
}
