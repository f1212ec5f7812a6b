/* bench_pool - what one dispatch of the thread pool (ocr_parallel_for) costs: an empty job on every thread, back to
   back (the workers still spinning) and after the pool has been idle for 0.1 to 200 ms (the workers asleep), and the
   same for a job of ~50 us of arithmetic per thread, whose time on 2 threads should be half its time on 1. The figure
   that exposed KVM's pause-loop exiting: with PAUSE in the spin loops every dispatch cost 0.7-1.6 ms on the
   project's virtual machines.
   usage: bench_pool [--threads N] */
#define OCR_IMPLEMENTATION
#include "ocr_tensor.h"
#include "bench_common.h"
#include "bench_peak.h"

typedef struct { int64_t flops_per_item; volatile float sink[OCR_MAX_THREADS * 16]; } work_job;

static void empty_part(void *arg, int64_t begin, int64_t end, int tid) { (void)arg; (void)begin; (void)end; (void)tid; }

/* a dependent chain of multiply-adds: about flops_per_item / 2 cycles per item, no memory traffic */
static void work_part(void *arg, int64_t begin, int64_t end, int tid) {
    work_job *j = (work_job *)arg;
    float a = 1.0f + (float)tid * 1e-7f, b = 0.9999999f;
    int64_t i, k;
    for (i = begin; i < end; i++)
        for (k = 0; k < j->flops_per_item / 2; k++) a = a * b + 1e-9f;
    j->sink[tid * 16] = a;
}

static void sleep_us(long us) {
    struct timespec ts;
    ts.tv_sec = us / 1000000;
    ts.tv_nsec = (us % 1000000) * 1000L;
    nanosleep(&ts, NULL);
}

int main(int argc, char **argv) {
    static const long idle_us[] = {0, 100, 1000, 10000, 200000};
    int threads = 2, i, s, r;
    ocr_ctx ctx;
    work_job wj;
    char json[2048];
    size_t jl;
    for (i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--threads") == 0 && i + 1 < argc) threads = atoi(argv[++i]);
        else { printf("usage: %s [--threads N]\n", argv[0]); return strcmp(argv[i], "--help") == 0 ? 0 : 2; }
    }
    if (threads < 2) threads = 2;
    bench_print_peak(threads);
    if (ocr_ctx_init(&ctx, threads, 1) != OCR_OK) { fprintf(stderr, "%s\n", ocr_ctx_last_error(&ctx)); return 1; }
    printf("bench_pool: %d threads; medians of 21\n%-28s %14s %14s\n", threads, "pool idle before", "first job us", "next jobs us");
    jl = (size_t)snprintf(json, sizeof json, "{\"bench\":\"pool\",\"threads\":%d,\"empty\":[", threads);
    for (s = 0; s < (int)(sizeof idle_us / sizeof idle_us[0]); s++) {
        double first[21], next[21];
        for (r = 0; r < 21; r++) {
            double t0, t1, t2;
            int k;
            if (idle_us[s]) sleep_us(idle_us[s]);
            t0 = now();
            ocr_parallel_for(&ctx, threads, 1, empty_part, NULL);
            t1 = now();
            for (k = 0; k < 16; k++) ocr_parallel_for(&ctx, threads, 1, empty_part, NULL);
            t2 = now();
            first[r] = (t1 - t0) * 1e6;
            next[r] = (t2 - t1) / 16 * 1e6;
        }
        printf("%-28ld %14.1f %14.2f\n", idle_us[s], median(first, 21), median(next, 21));
        jl += (size_t)snprintf(json + jl, sizeof json - jl, "%s{\"idle_us\":%ld,\"first_us\":%.2f,\"next_us\":%.3f}", s ? "," : "", idle_us[s],
                               median(first, 21), median(next, 21));
    }
    {
        /* ~50 us per thread at 2 threads: the pool's overhead against the work it spreads */
        double one[21], all[21];
        ocr_ctx single;
        memset(&wj, 0, sizeof wj);
        wj.flops_per_item = 20000;
        if (ocr_ctx_init(&single, 1, 1) != OCR_OK) return 1;
        for (r = 0; r < 21; r++) {
            double t0 = now();
            ocr_parallel_for(&single, 2 * threads, 1, work_part, &wj);
            one[r] = (now() - t0) * 1e6;
            t0 = now();
            ocr_parallel_for(&ctx, 2 * threads, 1, work_part, &wj);
            all[r] = (now() - t0) * 1e6;
        }
        printf("a job of %d items: %.1f us on 1 thread, %.1f us on %d (speed-up %.2f)\n", 2 * threads, median(one, 21), median(all, 21), threads,
               median(one, 21) / median(all, 21));
        jl += (size_t)snprintf(json + jl, sizeof json - jl, "],\"work_one_us\":%.2f,\"work_all_us\":%.2f}", median(one, 21), median(all, 21));
        ocr_ctx_free(&single);
    }
    printf("%s\n", json);
    ocr_ctx_free(&ctx);
    return 0;
}
