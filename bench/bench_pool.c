/* bench_pool - what one dispatch of the thread pool (ocr_parallel_for) costs: an empty job on every thread, back to
   back (the workers still spinning) and after the pool has been idle for 0.1 to 200 ms (the workers asleep), and the
   same for a job of ~50 us of arithmetic per thread, whose time on 2 threads should be half its time on 1. The figure
   that exposed KVM's pause-loop exiting: with PAUSE in the spin loops every dispatch cost 0.7-1.6 ms on the
   project's virtual machines. Then what data costs between the cores: the round trip of one cache line between
   two threads (each waits for the other's write), and the read rate of a buffer the thread itself wrote against one
   another thread wrote just before, L2-sized and larger: what a thread pays for reading an operand that another
   thread packed or a layer's output that another thread computed.
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

/* one cache line's round trip between threads 0 and 1: each waits for the other's increment */
typedef struct { long rounds; double seconds; long flag __attribute__((aligned(64))); } pingpong_job;
static void pingpong_part(void *arg, int64_t begin, int64_t end, int tid) {
    pingpong_job *j = (pingpong_job *)arg;
    long r, mine = tid == 0 ? 0 : 1;
    double t0 = now();
    (void)begin; (void)end;
    if (tid > 1) return;
    for (r = 0; r < j->rounds; r++, mine += 2) {
        while (__atomic_load_n(&j->flag, __ATOMIC_ACQUIRE) != mine) {}
        __atomic_store_n(&j->flag, mine + 1, __ATOMIC_RELEASE);
    }
    if (tid == 0) j->seconds = now() - t0;
}

/* each thread's buffer written by it (write_part), then read by it or by the next thread (read_part) */
typedef struct { float *buf[OCR_MAX_THREADS]; int64_t floats; int other, threads; double seconds[OCR_MAX_THREADS]; volatile float sink[OCR_MAX_THREADS * 16]; } share_job;
static void write_part(void *arg, int64_t begin, int64_t end, int tid) {
    share_job *j = (share_job *)arg;
    int64_t i;
    (void)begin; (void)end;
    for (i = 0; i < j->floats; i++) j->buf[tid][i] = (float)(i & 255);
}
typedef float vec4 __attribute__((vector_size(16))); /* four independent sums in SSE registers: the loads bound it */
static void read_part(void *arg, int64_t begin, int64_t end, int tid) {
    share_job *j = (share_job *)arg;
    const vec4 *b = (const vec4 *)(const void *)j->buf[j->other ? (tid + 1) % j->threads : tid];
    vec4 a0 = {0}, a1 = {0}, a2 = {0}, a3 = {0};
    int64_t i;
    double t0 = now();
    (void)begin; (void)end;
    for (i = 0; i < j->floats / 4; i += 4) { a0 += b[i]; a1 += b[i + 1]; a2 += b[i + 2]; a3 += b[i + 3]; }
    j->seconds[tid] = now() - t0;
    a0 += a1 + a2 + a3;
    j->sink[tid * 16] = a0[0] + a0[3];
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
        jl += (size_t)snprintf(json + jl, sizeof json - jl, "],\"work_one_us\":%.2f,\"work_all_us\":%.2f", median(one, 21), median(all, 21));
        ocr_ctx_free(&single);
    }
    {
        pingpong_job pj;
        double rt[9];
        memset(&pj, 0, sizeof pj);
        pj.rounds = 20000;
        for (r = 0; r < 9; r++) {
            pj.flag = 0;
            ocr_parallel_for(&ctx, threads, 1, pingpong_part, &pj);
            rt[r] = pj.seconds / (double)pj.rounds * 1e9;
        }
        printf("one cache line between threads 0 and 1: %.0f ns a round trip (median of 9 x %ld)\n", median(rt, 9), pj.rounds);
        jl += (size_t)snprintf(json + jl, sizeof json - jl - 1, ",\"line_round_trip_ns\":%.1f", median(rt, 9));
    }
    {
        static const int64_t kib[] = {512, 4096};
        share_job sj;
        int k, other, t;
        memset(&sj, 0, sizeof sj);
        sj.threads = threads;
        for (k = 0; k < 2; k++) {
            double gbs[2];
            sj.floats = kib[k] * 256;
            for (t = 0; t < threads; t++)
                if (!(sj.buf[t] = (float *)ocr_aligned_alloc((size_t)sj.floats * sizeof(float)))) return 1;
            for (other = 0; other < 2; other++) {
                double rate[9];
                sj.other = other;
                for (r = 0; r < 9; r++) {
                    double slowest = 0;
                    ocr_parallel_for(&ctx, threads, 1, write_part, &sj);
                    ocr_parallel_for(&ctx, threads, 1, read_part, &sj);
                    for (t = 0; t < threads; t++) if (sj.seconds[t] > slowest) slowest = sj.seconds[t];
                    rate[r] = (double)sj.floats * sizeof(float) / slowest / 1e9;
                }
                gbs[other] = median(rate, 9);
            }
            printf("reading %5lld KiB per thread: written by itself %.1f GB/s, by another thread %.1f GB/s (slowest thread, median of 9)\n",
                   (long long)kib[k], gbs[0], gbs[1]);
            jl += (size_t)snprintf(json + jl, sizeof json - jl - 1, ",\"read_%lldk_own_gbs\":%.2f,\"read_%lldk_other_gbs\":%.2f", (long long)kib[k], gbs[0],
                                   (long long)kib[k], gbs[1]);
            for (t = 0; t < threads; t++) ocr_aligned_free(sj.buf[t]);
        }
    }
    printf("%s}\n", json);
    ocr_ctx_free(&ctx);
    return 0;
}
