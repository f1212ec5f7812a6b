/* bench_peak.h - this machine's measured arithmetic peak, so every benchmark figure can be read as a share of the
   limit: a register-only loop of independent fused multiply-adds (no memory traffic, no dependency stalls) on one
   thread and on n threads at once, fp32 with the widest FMA the CPU has (AVX-512, else AVX2), and bf16 with
   AVX512_BF16's dot-product instruction (2 products per fp32 lane) where the CPU has it, and AMX-BF16's tile
   dot product (16 x 16 fp32 += 16 x 32 by 32 x 16 bf16) where the CPU and Linux allow it. A figure is the best of a
   few 50 ms runs (the machine is shared: the best is the closest to the hardware's own limit).
   Include after bench_common.h; bench_print_peak(threads) prints one line per figure and returns the fp32 peak on
   `threads` threads (GFLOP/s). */
#ifndef BENCH_PEAK_H
#define BENCH_PEAK_H
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>
#define BENCH_PEAK_X86 1
#endif

typedef struct { int kind; long iters; double flops; } bench_peak_job;
enum { BENCH_PEAK_SCALAR, BENCH_PEAK_AVX2, BENCH_PEAK_AVX512, BENCH_PEAK_BF16, BENCH_PEAK_AMX };
#if defined(BENCH_PEAK_X86) && defined(__x86_64__) && (defined(__clang__) ? __clang_major__ >= 12 : __GNUC__ >= 11)
#define BENCH_PEAK_HAVE_AMX 1
#endif

/* Twelve independent accumulators hide the FMA latency (4 cycles) on two pipes; the multiplier is 1 and the
   addend 0, so values never overflow or go denormal. Each iteration: 12 FMAs. The accumulators start at different
   values and pass through an empty asm each iteration: identical chains would be merged by the compiler (which
   once left 7 of the 12 FMAs and a latency-bound loop). */
#ifdef BENCH_PEAK_X86
__attribute__((target("avx2,fma"))) static double bench_peak_avx2(long iters) {
    __m256 a0 = _mm256_set1_ps(1.0f), a1 = _mm256_set1_ps(2.0f), a2 = _mm256_set1_ps(3.0f), a3 = _mm256_set1_ps(4.0f),
           a4 = _mm256_set1_ps(5.0f), a5 = _mm256_set1_ps(6.0f), a6 = _mm256_set1_ps(7.0f), a7 = _mm256_set1_ps(8.0f),
           a8 = _mm256_set1_ps(9.0f), a9 = _mm256_set1_ps(10.0f), a10 = _mm256_set1_ps(11.0f), a11 = _mm256_set1_ps(12.0f);
    __m256 m = _mm256_set1_ps(1.0f), z = _mm256_setzero_ps();
    long i;
    float out[8];
    for (i = 0; i < iters; i++) {
        a0 = _mm256_fmadd_ps(a0, m, z); a1 = _mm256_fmadd_ps(a1, m, z); a2 = _mm256_fmadd_ps(a2, m, z); a3 = _mm256_fmadd_ps(a3, m, z);
        a4 = _mm256_fmadd_ps(a4, m, z); a5 = _mm256_fmadd_ps(a5, m, z); a6 = _mm256_fmadd_ps(a6, m, z); a7 = _mm256_fmadd_ps(a7, m, z);
        a8 = _mm256_fmadd_ps(a8, m, z); a9 = _mm256_fmadd_ps(a9, m, z); a10 = _mm256_fmadd_ps(a10, m, z); a11 = _mm256_fmadd_ps(a11, m, z);
        __asm__ volatile("" : "+x"(a0), "+x"(a1), "+x"(a2), "+x"(a3), "+x"(a4), "+x"(a5), "+x"(a6), "+x"(a7), "+x"(a8), "+x"(a9),
                         "+x"(a10), "+x"(a11));
    }
    a0 = _mm256_add_ps(_mm256_add_ps(_mm256_add_ps(a0, a1), _mm256_add_ps(a2, a3)), _mm256_add_ps(_mm256_add_ps(a4, a5), a6));
    a0 = _mm256_add_ps(a0, _mm256_add_ps(_mm256_add_ps(a7, a8), _mm256_add_ps(_mm256_add_ps(a9, a10), a11)));
    _mm256_storeu_ps(out, a0);
    return (double)iters * 12 * 8 * 2 + (out[0] == 78.0f ? 0 : 1e-9); /* the result is used, so the loop stays */
}

__attribute__((target("avx512f"))) static double bench_peak_avx512(long iters) {
    __m512 a0 = _mm512_set1_ps(1.0f), a1 = _mm512_set1_ps(2.0f), a2 = _mm512_set1_ps(3.0f), a3 = _mm512_set1_ps(4.0f),
           a4 = _mm512_set1_ps(5.0f), a5 = _mm512_set1_ps(6.0f), a6 = _mm512_set1_ps(7.0f), a7 = _mm512_set1_ps(8.0f),
           a8 = _mm512_set1_ps(9.0f), a9 = _mm512_set1_ps(10.0f), a10 = _mm512_set1_ps(11.0f), a11 = _mm512_set1_ps(12.0f);
    __m512 m = _mm512_set1_ps(1.0f), z = _mm512_setzero_ps();
    long i;
    for (i = 0; i < iters; i++) {
        a0 = _mm512_fmadd_ps(a0, m, z); a1 = _mm512_fmadd_ps(a1, m, z); a2 = _mm512_fmadd_ps(a2, m, z); a3 = _mm512_fmadd_ps(a3, m, z);
        a4 = _mm512_fmadd_ps(a4, m, z); a5 = _mm512_fmadd_ps(a5, m, z); a6 = _mm512_fmadd_ps(a6, m, z); a7 = _mm512_fmadd_ps(a7, m, z);
        a8 = _mm512_fmadd_ps(a8, m, z); a9 = _mm512_fmadd_ps(a9, m, z); a10 = _mm512_fmadd_ps(a10, m, z); a11 = _mm512_fmadd_ps(a11, m, z);
        __asm__ volatile("" : "+v"(a0), "+v"(a1), "+v"(a2), "+v"(a3), "+v"(a4), "+v"(a5), "+v"(a6), "+v"(a7), "+v"(a8), "+v"(a9),
                         "+v"(a10), "+v"(a11));
    }
    a0 = _mm512_add_ps(_mm512_add_ps(_mm512_add_ps(a0, a1), _mm512_add_ps(a2, a3)), _mm512_add_ps(_mm512_add_ps(a4, a5), a6));
    a0 = _mm512_add_ps(a0, _mm512_add_ps(_mm512_add_ps(a7, a8), _mm512_add_ps(_mm512_add_ps(a9, a10), a11)));
    return (double)iters * 12 * 16 * 2 + (_mm512_reduce_add_ps(a0) == 1248.0f ? 0 : 1e-9);
}

/* vdpbf16ps: per fp32 lane, acc += a.lo * b.lo + a.hi * b.hi (bf16 pairs): 2 multiplies and 2 adds. b is 0, so the
   accumulators keep their values. */
__attribute__((target("avx512f,avx512bf16"))) static double bench_peak_bf16(long iters) {
    __m512 a0 = _mm512_set1_ps(1.0f), a1 = _mm512_set1_ps(2.0f), a2 = _mm512_set1_ps(3.0f), a3 = _mm512_set1_ps(4.0f),
           a4 = _mm512_set1_ps(5.0f), a5 = _mm512_set1_ps(6.0f), a6 = _mm512_set1_ps(7.0f), a7 = _mm512_set1_ps(8.0f),
           a8 = _mm512_set1_ps(9.0f), a9 = _mm512_set1_ps(10.0f), a10 = _mm512_set1_ps(11.0f), a11 = _mm512_set1_ps(12.0f);
    __m512bh x = (__m512bh)_mm512_set1_epi16(0x3f80), y = (__m512bh)_mm512_setzero_si512();
    long i;
    for (i = 0; i < iters; i++) {
        a0 = _mm512_dpbf16_ps(a0, x, y); a1 = _mm512_dpbf16_ps(a1, x, y); a2 = _mm512_dpbf16_ps(a2, x, y); a3 = _mm512_dpbf16_ps(a3, x, y);
        a4 = _mm512_dpbf16_ps(a4, x, y); a5 = _mm512_dpbf16_ps(a5, x, y); a6 = _mm512_dpbf16_ps(a6, x, y); a7 = _mm512_dpbf16_ps(a7, x, y);
        a8 = _mm512_dpbf16_ps(a8, x, y); a9 = _mm512_dpbf16_ps(a9, x, y); a10 = _mm512_dpbf16_ps(a10, x, y); a11 = _mm512_dpbf16_ps(a11, x, y);
        __asm__ volatile("" : "+v"(a0), "+v"(a1), "+v"(a2), "+v"(a3), "+v"(a4), "+v"(a5), "+v"(a6), "+v"(a7), "+v"(a8), "+v"(a9),
                         "+v"(a10), "+v"(a11));
    }
    a0 = _mm512_add_ps(_mm512_add_ps(_mm512_add_ps(a0, a1), _mm512_add_ps(a2, a3)), _mm512_add_ps(_mm512_add_ps(a4, a5), a6));
    a0 = _mm512_add_ps(a0, _mm512_add_ps(_mm512_add_ps(a7, a8), _mm512_add_ps(_mm512_add_ps(a9, a10), a11)));
    return (double)iters * 12 * 16 * 4 + (_mm512_reduce_add_ps(a0) == 1248.0f ? 0 : 1e-9);
}
#endif

#ifdef BENCH_PEAK_HAVE_AMX
/* AMX-BF16 usable: CPUID.7.0 EDX bits 22 (amx-bf16) and 24 (amx-tile), XCR0 bits 17-18 (tile state saved) and
   Linux's permission for the tile data (arch_prctl ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA), asked here as ocr_nn.h
   asks it. */
static int bench_peak_amx_usable(void) {
    unsigned a, b, c, d, lo, hi;
    long rc = -1;
    __asm__ __volatile__("cpuid" : "=a"(a), "=b"(b), "=c"(c), "=d"(d) : "a"(0u), "c"(0u));
    if (a < 7) return 0;
    __asm__ __volatile__("cpuid" : "=a"(a), "=b"(b), "=c"(c), "=d"(d) : "a"(7u), "c"(0u));
    if (!(d & (1u << 22)) || !(d & (1u << 24))) return 0;
    __asm__ __volatile__("cpuid" : "=a"(a), "=b"(b), "=c"(c), "=d"(d) : "a"(1u), "c"(0u));
    if (!(c & (1u << 27))) return 0;
    __asm__ __volatile__("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
    (void)hi;
    if ((lo & (3u << 17)) != (3u << 17)) return 0;
#ifdef __linux__
    __asm__ __volatile__("syscall" : "=a"(rc) : "a"(158L), "D"(0x1023L), "S"(18L) : "rcx", "r11", "memory");
#endif
    return rc == 0;
}

/* Four independent 16 x 16 fp32 accumulator tiles, each step 4 tdpbf16ps (2 x 16 x 16 x 32 flops each) on two A and
   two B tiles loaded once: the tile unit's arithmetic limit. The inputs are mixed values, not zeros (the unit draws
   less power, and runs faster, on zeros), with signs alternating so the sums stay small. The configuration is built
   as bytes, with a compiler barrier: GCC 12's ldtilecfg names only 8 bytes of it as read. */
__attribute__((target("amx-tile,amx-bf16"))) static double bench_peak_amx(long iters) {
    unsigned char cfg[64];
    unsigned short ab[4][512]; /* two A tiles, two B tiles */
    float out[256];
    long i;
    int t;
    memset(cfg, 0, sizeof cfg);
    cfg[0] = 1;
    for (t = 0; t < 8; t++) { cfg[16 + 2 * t] = 64; cfg[48 + t] = 16; }
    for (t = 0; t < 4 * 512; t++) ab[t / 512][t % 512] = (unsigned short)(0x3f80 + (t * 37 % 64) + (t & 1 ? 0x8000 : 0));
    __asm__ __volatile__("" : : "r"(cfg), "r"(ab) : "memory");
    _tile_loadconfig(cfg);
    _tile_zero(0); _tile_zero(1); _tile_zero(2); _tile_zero(3);
    _tile_loadd(4, ab[0], 64); _tile_loadd(5, ab[1], 64); _tile_loadd(6, ab[2], 64); _tile_loadd(7, ab[3], 64);
    for (i = 0; i < iters; i++) {
        _tile_dpbf16ps(0, 4, 6); _tile_dpbf16ps(1, 4, 7); _tile_dpbf16ps(2, 5, 6); _tile_dpbf16ps(3, 5, 7);
    }
    _tile_stored(0, out, 64);
    __asm__ __volatile__("" : : "r"(out) : "memory");
    _tile_release();
    return (double)iters * 4 * 16 * 16 * 32 * 2 + (out[0] == 1e30f ? 1e-9 : 0); /* the result is used, so the loop stays */
}
#endif

static double bench_peak_scalar(long iters) {
    volatile float sink;
    float a0 = 1, a1 = 1, a2 = 1, a3 = 1;
    long i;
    for (i = 0; i < iters; i++) { a0 = a0 * 1.0f + 0.0f; a1 = a1 * 1.0f + 0.0f; a2 = a2 * 1.0f + 0.0f; a3 = a3 * 1.0f + 0.0f; }
    sink = a0 + a1 + a2 + a3;
    (void)sink;
    return (double)iters * 4 * 2;
}

static void *bench_peak_thread(void *arg) {
    bench_peak_job *j = (bench_peak_job *)arg;
#ifdef BENCH_PEAK_X86
    if (j->kind == BENCH_PEAK_AVX512) { j->flops = bench_peak_avx512(j->iters); return NULL; }
    if (j->kind == BENCH_PEAK_AVX2) { j->flops = bench_peak_avx2(j->iters); return NULL; }
    if (j->kind == BENCH_PEAK_BF16) { j->flops = bench_peak_bf16(j->iters); return NULL; }
#endif
#ifdef BENCH_PEAK_HAVE_AMX
    if (j->kind == BENCH_PEAK_AMX) { j->flops = bench_peak_amx(j->iters); return NULL; }
#endif
    j->flops = bench_peak_scalar(j->iters);
    return NULL;
}

static double bench_peak_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* GFLOP/s of `kind` on `threads` threads running the loop at once: the best of 5 runs of about 50 ms. */
static double bench_peak_measure(int kind, int threads) {
    bench_peak_job jobs[64];
    pthread_t tid[64];
    long iters = 1000;
    double best = 0, t0, dt = 0, flops;
    int run, i;
    if (threads < 1) threads = 1;
    if (threads > 64) threads = 64;
    for (;;) { /* calibrate on one thread to ~50 ms */
        jobs[0].kind = kind;
        jobs[0].iters = iters;
        t0 = bench_peak_now();
        bench_peak_thread(&jobs[0]);
        dt = bench_peak_now() - t0;
        if (dt > 0.01 || iters > (1L << 40)) break;
        iters *= 4;
    }
    iters = (long)((double)iters * 0.05 / (dt > 1e-6 ? dt : 1e-6)) + 1;
    for (run = 0; run < 5; run++) {
        for (i = 0; i < threads; i++) { jobs[i].kind = kind; jobs[i].iters = iters; }
        t0 = bench_peak_now();
        for (i = 1; i < threads; i++)
            if (pthread_create(&tid[i], NULL, bench_peak_thread, &jobs[i]) != 0) jobs[i].iters = 0, tid[i] = 0;
        bench_peak_thread(&jobs[0]);
        for (i = 1; i < threads; i++) if (jobs[i].iters) pthread_join(tid[i], NULL);
        dt = bench_peak_now() - t0;
        for (flops = 0, i = 0; i < threads; i++) flops += jobs[i].iters ? jobs[i].flops : 0;
        if (flops / dt > best) best = flops / dt;
    }
    return best * 1e-9;
}

/* The CPU model, from /proc/cpuinfo. */
static void bench_cpu_model(char *buf, size_t cap) {
    FILE *f = fopen("/proc/cpuinfo", "r");
    char line[512];
    snprintf(buf, cap, "unknown CPU");
    if (!f) return;
    while (fgets(line, sizeof line, f)) {
        char *colon = strchr(line, ':');
        if (strncmp(line, "model name", 10) == 0 && colon) {
            size_t n;
            colon += 2;
            n = strcspn(colon, "\n");
            snprintf(buf, cap, "%.*s", (int)n, colon);
            break;
        }
    }
    fclose(f);
}

/* The fp32 peaks bench_print_peak measured (GFLOP/s), for a program that times at more than one thread count. */
static struct { int threads; double one, all; } bench_peak_fp32_measured;

/* The bf16 peaks bench_print_peak measured (GFLOP/s; 0 where the CPU lacks the instructions): vdpbf16ps and AMX. */
static struct { int threads; double one, all, amx_one, amx_all; } bench_peak_bf16_measured;

/* The fp32 peak bench_print_peak measured on t threads: t = 1 or the count it was given; 0 for any other. */
static inline double bench_peak_fp32_on(int t) {
    return t == 1 ? bench_peak_fp32_measured.one : t == bench_peak_fp32_measured.threads ? bench_peak_fp32_measured.all : 0;
}

/* Prints the CPU and its measured peaks (fp32 on 1 thread and on `threads`, bf16 where the CPU has AVX512_BF16);
   returns the fp32 peak on `threads` threads in GFLOP/s. */
static double bench_print_peak(int threads) {
    char model[256];
    int kind = BENCH_PEAK_SCALAR;
    const char *isa = "scalar";
    double one, all;
    bench_cpu_model(model, sizeof model);
#ifdef BENCH_PEAK_X86
    if (__builtin_cpu_supports("avx512f")) { kind = BENCH_PEAK_AVX512; isa = "AVX-512 FMA"; }
    else if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) { kind = BENCH_PEAK_AVX2; isa = "AVX2 FMA"; }
#endif
    one = bench_peak_measure(kind, 1);
    all = threads > 1 ? bench_peak_measure(kind, threads) : one;
    bench_peak_fp32_measured.threads = threads > 1 ? threads : 1;
    bench_peak_fp32_measured.one = one;
    bench_peak_fp32_measured.all = all;
    printf("cpu: %s; measured fp32 peak (%s, register-only loop): %.0f GFLOP/s on 1 thread", model, isa, one);
    if (threads > 1) printf(", %.0f on %d", all, threads);
    printf("\n");
#ifdef BENCH_PEAK_X86
    if (__builtin_cpu_supports("avx512bf16")) {
        double b1 = bench_peak_measure(BENCH_PEAK_BF16, 1), bn = threads > 1 ? bench_peak_measure(BENCH_PEAK_BF16, threads) : b1;
        printf("cpu: measured bf16 peak (AVX512_BF16 vdpbf16ps, 2 products per fp32 lane): %.0f GFLOP/s on 1 thread", b1);
        if (threads > 1) printf(", %.0f on %d", bn, threads);
        printf("\n");
        bench_peak_bf16_measured.threads = threads > 1 ? threads : 1;
        bench_peak_bf16_measured.one = b1;
        bench_peak_bf16_measured.all = bn;
    } else {
        printf("cpu: no AVX512_BF16: bf16 peak not measured\n");
    }
#endif
#ifdef BENCH_PEAK_HAVE_AMX
    if (bench_peak_amx_usable()) {
        double a1 = bench_peak_measure(BENCH_PEAK_AMX, 1), an = threads > 1 ? bench_peak_measure(BENCH_PEAK_AMX, threads) : a1;
        printf("cpu: measured bf16 peak (AMX-BF16 tdpbf16ps, 4 accumulator tiles, mixed inputs): %.0f GFLOP/s on 1 thread", a1);
        if (threads > 1) printf(", %.0f on %d", an, threads);
        printf("\n");
        bench_peak_bf16_measured.amx_one = a1;
        bench_peak_bf16_measured.amx_all = an;
    }
#endif
    return all;
}
#endif /* BENCH_PEAK_H */
