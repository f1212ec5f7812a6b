/* ocr_tensor.h: contexts, threads, scratch, tensors and views, overflow-checked sizes, the ocr_check_* messages,
   the RNG's statistics, F16/BF16 conversions against numpy and torch (tests/fixtures/st/half.safetensors from
   tools/make_st_fixtures.py) and the strict JSON parser. */
#define OCR_IMPLEMENTATION
#define _GNU_SOURCE /* sched_getcpu and the CPU masks, for the pool's CPUs */
#include "ocr_tensor.h"
#include "ocr_test.h"
#include <float.h>
#include <stdarg.h>
#include <stdint.h>
#include <sched.h>
#include <time.h>


static int is_aligned64(const void *p) { return ((uintptr_t)p & 63) == 0; }

/* ---------------------------------------------------------------- context, threads, scratch */

static void test_ctx_init_free(void) {
    int threads;
    for (threads = 1; threads <= 2; threads++) {
        ocr_ctx ctx;
        OCR_CHECK_OK(&ctx, ocr_ctx_init(&ctx, threads, 5));
        OCR_CHECK(ctx.n_threads == threads);
        OCR_CHECK(ctx.device == OCR_DEVICE_CPU);
        OCR_CHECK((ctx.pool != NULL) == (threads > 1));
        OCR_CHECK(strcmp(ocr_ctx_last_error(&ctx), "no error") == 0);
        OCR_CHECK_OK(&ctx, ocr_ctx_set_threads(&ctx, 3));
        OCR_CHECK(ctx.n_threads == 3 && ctx.pool != NULL);
        OCR_CHECK_OK(&ctx, ocr_ctx_set_threads(&ctx, 1));
        OCR_CHECK(ctx.n_threads == 1 && ctx.pool == NULL);
        EXPECT_ERR(&ctx, ocr_ctx_set_threads(&ctx, OCR_MAX_THREADS + 1), OCR_EINVAL, "ocr_ctx_set_threads", "at most");
        OCR_CHECK(ctx.n_threads == 1);
        OCR_CHECK_OK(&ctx, ocr_ctx_set_threads(&ctx, 0)); /* all cores */
        OCR_CHECK(ctx.n_threads == ocr_cpu_count());
        ocr_ctx_free(&ctx);
        ocr_ctx_free(&ctx); /* a second free is harmless */
    }
    {
        ocr_ctx ctx;
        OCR_CHECK_OK(&ctx, ocr_ctx_init(&ctx, 0, 1));
        OCR_CHECK(ctx.n_threads >= 1 && ctx.n_threads <= OCR_MAX_THREADS);
        ocr_ctx_free(&ctx);
    }
}

static void test_debug_env(void) {
    ocr_ctx ctx;
    setenv("OCR_CHECK_NUMERICS", "1", 1);
    setenv("OCR_CPU_KERNEL", "portable", 1);
    OCR_CHECK_OK(&ctx, ocr_ctx_init(&ctx, 1, 1));
    OCR_CHECK(ctx.debug_flags & OCR_DEBUG_CHECK_NUMERICS);
    OCR_CHECK(!(ctx.debug_flags & OCR_DEBUG_CUDA_SYNC));
    OCR_CHECK(ctx.cpu_kernel == OCR_CPU_KERNEL_PORTABLE);
    ocr_ctx_free(&ctx);
    setenv("OCR_CHECK_NUMERICS", "0", 1);
    unsetenv("OCR_CPU_KERNEL");
    OCR_CHECK_OK(&ctx, ocr_ctx_init(&ctx, 1, 1));
    /* OCR_REFERENCE=1 ./build.sh test runs this too: that switch is the caller's, not this test's */
    OCR_CHECK((ctx.debug_flags & ~(unsigned)OCR_DEBUG_REFERENCE) == 0 && ctx.cpu_kernel == OCR_CPU_KERNEL_AUTO);
    ocr_ctx_free(&ctx);
    unsetenv("OCR_CHECK_NUMERICS");
}

typedef struct {
    int *hits;
    int calls[OCR_MAX_THREADS];
    int64_t begin[OCR_MAX_THREADS], end[OCR_MAX_THREADS];
    int bad_index;
} cover_arg;

static void cover_fn(void *argp, int64_t begin, int64_t end, int thread_index) {
    cover_arg *a = (cover_arg *)argp;
    int64_t i;
    if (thread_index < 0 || thread_index >= OCR_MAX_THREADS) { a->bad_index = 1; return; }
    a->calls[thread_index]++;
    a->begin[thread_index] = begin;
    a->end[thread_index] = end;
    for (i = begin; i < end; i++) a->hits[i]++;
}

static void test_parallel_for_cover(void) {
    static const int64_t ns[] = {0, 1, 2, 3, 5, 7, 8, 63, 64, 100, 1000, 4097};
    static const int64_t chunks[] = {0, 1, 3, 100};
    int threads, ni, ci, t, failures = 0;
    for (threads = 1; threads <= 8; threads++) {
        ocr_ctx ctx;
        OCR_CHECK_OK(&ctx, ocr_ctx_init(&ctx, threads, 1));
        for (ni = 0; ni < (int)(sizeof ns / sizeof ns[0]); ni++)
            for (ci = 0; ci < (int)(sizeof chunks / sizeof chunks[0]); ci++) {
                int64_t n = ns[ni], i, max_parts = chunks[ci] > 1 ? n / chunks[ci] : n;
                int rep, parts = 0;
                cover_arg a[2];
                for (rep = 0; rep < 2; rep++) {
                    memset(&a[rep], 0, sizeof a[rep]);
                    a[rep].hits = (int *)calloc((size_t)n + 1, sizeof(int));
                    ocr_parallel_for(&ctx, n, chunks[ci], cover_fn, &a[rep]);
                }
                for (i = 0; i < n; i++)
                    if (a[0].hits[i] != 1 || a[1].hits[i] != 1) failures++;
                OCR_CHECK(!a[0].bad_index && !a[1].bad_index);
                for (t = 0; t < OCR_MAX_THREADS; t++) {
                    if (a[0].calls[t] > 1 || (t >= threads && a[0].calls[t])) failures++;
                    if (a[0].calls[t] && a[0].begin[t] >= a[0].end[t]) failures++;
                    /* static split: the same ranges every time */
                    if (a[0].calls[t] != a[1].calls[t] || a[0].begin[t] != a[1].begin[t] || a[0].end[t] != a[1].end[t]) failures++;
                    parts += a[0].calls[t];
                }
                if (n > 0 && (parts < 1 || parts > threads || (max_parts >= 1 && parts > max_parts))) failures++;
                if (n == 0 && parts != 0) failures++;
                OCR_CHECK_MSG(failures == 0, "threads=%d n=%lld min_chunk=%lld parts=%d", threads, (long long)n,
                              (long long)chunks[ci], parts);
                failures = 0;
                free(a[0].hits);
                free(a[1].hits);
            }
        ocr_ctx_free(&ctx);
    }
}

/* The dynamic variant: every index exactly once, in chunks of the size asked (the last may be shorter) or, where one
   thread runs the job, the whole range at once, from valid thread indexes; many jobs back to back. */
typedef struct { int *hits; int bad; int64_t chunk, n; long calls; } dyn_arg;
static void dyn_fn(void *argp, int64_t begin, int64_t end, int thread_index) {
    dyn_arg *a = (dyn_arg *)argp;
    int64_t i;
    int whole = begin == 0 && end == a->n && thread_index == 0; /* one thread's job: the range at once */
    if (thread_index < 0 || thread_index >= OCR_MAX_THREADS || (!whole && (begin % a->chunk || (end - begin != a->chunk && end != a->n)))) a->bad = 1;
    __atomic_add_fetch(&a->calls, 1, __ATOMIC_RELAXED);
    for (i = begin; i < end; i++) __atomic_add_fetch(&a->hits[i], 1, __ATOMIC_RELAXED);
}

static void test_parallel_for_dynamic(void) {
    static const int64_t ns[] = {0, 1, 2, 7, 64, 1000, 4097};
    static const int64_t chunks[] = {1, 3, 100};
    int threads, ni, ci, rep;
    for (threads = 1; threads <= 4; threads++) {
        ocr_ctx ctx;
        OCR_CHECK_OK(&ctx, ocr_ctx_init(&ctx, threads, 1));
        for (ni = 0; ni < (int)(sizeof ns / sizeof ns[0]); ni++)
            for (ci = 0; ci < (int)(sizeof chunks / sizeof chunks[0]); ci++)
                for (rep = 0; rep < 20; rep++) {
                    dyn_arg a;
                    int64_t i, missed = 0;
                    memset(&a, 0, sizeof a);
                    a.n = ns[ni]; a.chunk = chunks[ci];
                    a.hits = (int *)calloc((size_t)a.n + 1, sizeof(int));
                    ocr_parallel_for_dynamic(&ctx, a.n, a.chunk, dyn_fn, &a);
                    for (i = 0; i < a.n; i++) missed += a.hits[i] != 1;
                    OCR_CHECK_MSG(!a.bad && missed == 0 && (a.calls == (a.n + a.chunk - 1) / a.chunk || (a.calls == 1 && (threads == 1 || a.n < 2 * a.chunk))),
                                  "threads=%d n=%lld chunk=%lld: bad %d, %lld indexes not run once, %ld calls", threads, (long long)a.n,
                                  (long long)a.chunk, a.bad, (long long)missed, a.calls);
                    free(a.hits);
                }
        ocr_ctx_free(&ctx);
    }
}

/* A pool must survive many short jobs back to back (generation counting, wakeups). */
static void sum_fn(void *argp, int64_t begin, int64_t end, int thread_index) {
    int64_t *partial = (int64_t *)argp, i, s = 0;
    for (i = begin; i < end; i++) s += i;
    partial[thread_index] += s;
}

static void test_parallel_for_many_jobs(void) {
    ocr_ctx ctx;
    int64_t partial[OCR_MAX_THREADS], total = 0;
    int job, t, jobs = ocr_test_sanitized() ? 1000 : 5000;
    OCR_CHECK_OK(&ctx, ocr_ctx_init(&ctx, 4, 1));
    memset(partial, 0, sizeof partial);
    for (job = 0; job < jobs; job++) ocr_parallel_for(&ctx, 1000, 1, sum_fn, partial);
    for (t = 0; t < OCR_MAX_THREADS; t++) total += partial[t];
    OCR_CHECK(total == (int64_t)jobs * (999 * 1000 / 2));
    ocr_ctx_free(&ctx);
}

typedef struct { int cpu[OCR_MAX_THREADS]; } cpus_job;
static void cpu_fn(void *arg, int64_t begin, int64_t end, int tid) {
    double t0 = ocr_monotonic_seconds();
    (void)begin; (void)end;
    ((cpus_job *)arg)->cpu[tid] = sched_getcpu();
    while (ocr_monotonic_seconds() - t0 < 2e-4) {} /* the parts overlap: one done at once would free its CPU */
}

/* With as many threads as the CPUs the process may use, a job after the pool slept runs its parts on distinct CPUs,
   also once the caller's thread has moved onto a worker's CPU (the pool then moves that worker). Without pinning a
   woken worker was placed on the caller's CPU here, every time (docs/PERFORMANCE.md). Three tries a round: under the
   suite another program may take a CPU for a moment. */
static void test_parallel_for_cpus(void) {
    cpu_set_t allowed, last;
    int n, i, k, round, attempt, cpu, last_cpu = -1, distinct = 0;
    ocr_ctx ctx;
    cpus_job j;
    if (getenv("OCR_NO_PIN_THREADS")) { ocr_test_skip("OCR_NO_PIN_THREADS is set"); return; }
    if (sched_getaffinity(0, sizeof allowed, &allowed) != 0 || (n = CPU_COUNT(&allowed)) < 2 || n > OCR_MAX_THREADS) {
        ocr_test_skip("needs 2 to OCR_MAX_THREADS CPUs in the process's affinity set");
        return;
    }
    for (cpu = 0; cpu < CPU_SETSIZE; cpu++) if (CPU_ISSET(cpu, &allowed)) last_cpu = cpu;
    CPU_ZERO(&last);
    CPU_SET(last_cpu, &last);
    OCR_CHECK_OK(&ctx, ocr_ctx_init(&ctx, n, 1));
    for (round = 0; round < 4; round++) {
        /* rounds 2 and 3: the caller's thread on the last CPU, which a worker holds */
        if (round >= 2) OCR_CHECK(sched_setaffinity(0, sizeof last, &last) == 0);
        for (attempt = 0, distinct = 0; attempt < 3 && !distinct; attempt++) {
            struct timespec pause = {0, 20000000}; /* the workers go to sleep */
            nanosleep(&pause, NULL);
            for (i = 0; i < n; i++) j.cpu[i] = -1;
            ocr_parallel_for(&ctx, n, 1, cpu_fn, &j);
            distinct = 1;
            for (i = 0; i < n; i++)
                for (k = 0; k < i; k++) distinct &= j.cpu[i] >= 0 && j.cpu[i] != j.cpu[k];
        }
        OCR_CHECK_MSG(distinct, "round %d: after the pool slept, parts 0 and 1 ran on CPUs %d and %d", round, j.cpu[0], j.cpu[1]);
        if (round >= 2) OCR_CHECK(sched_setaffinity(0, sizeof allowed, &allowed) == 0);
    }
    ocr_ctx_free(&ctx);
}

static void test_scratch(void) {
    ocr_ctx ctx;
    unsigned char *p, *q, *other;
    size_t sizes[] = {1, 100, 64, 1000, 1001, 5000, 3000, 100000}, prev = 0;
    int i;
    OCR_CHECK_OK(&ctx, ocr_ctx_init(&ctx, 1, 1));
    other = (unsigned char *)ocr_ctx_scratch(&ctx, OCR_SCRATCH_OP1, 256);
    OCR_CHECK(other != NULL && is_aligned64(other));
    for (i = 0; i < (int)(sizeof sizes / sizeof sizes[0]); i++) {
        p = (unsigned char *)ocr_ctx_scratch(&ctx, OCR_SCRATCH_OP0, sizes[i]);
        OCR_CHECK(p != NULL && is_aligned64(p));
        OCR_CHECK(ctx.scratch_size[OCR_SCRATCH_OP0] >= sizes[i]);
        OCR_CHECK(ctx.scratch_size[OCR_SCRATCH_OP0] >= prev); /* only grows */
        if (p) memset(p, 0xab, sizes[i]);                     /* the sanitizer build catches a short block */
        prev = ctx.scratch_size[OCR_SCRATCH_OP0];
    }
    /* a smaller request reuses the block */
    p = (unsigned char *)ocr_ctx_scratch(&ctx, OCR_SCRATCH_OP0, 10);
    q = (unsigned char *)ocr_ctx_scratch(&ctx, OCR_SCRATCH_OP0, prev);
    OCR_CHECK(p == q && ctx.scratch_size[OCR_SCRATCH_OP0] == prev);
    /* growth by at least half keeps slowly growing requests from reallocating every call */
    q = (unsigned char *)ocr_ctx_scratch(&ctx, OCR_SCRATCH_OP0, prev + 1);
    OCR_CHECK(q != NULL && ctx.scratch_size[OCR_SCRATCH_OP0] >= prev + prev / 2);
    /* slots are independent */
    OCR_CHECK(ocr_ctx_scratch(&ctx, OCR_SCRATCH_OP1, 256) == other);
    p = (unsigned char *)ocr_ctx_scratch(&ctx, OCR_SCRATCH_THREAD0 + OCR_MAX_THREADS - 1, 128);
    OCR_CHECK(p != NULL && p != other && p != q && is_aligned64(p));
    OCR_CHECK(ocr_ctx_scratch(&ctx, OCR_SCRATCH_SLOTS, 16) == NULL);
    EXPECT_ERR(&ctx, ctx.last_status, OCR_EINVAL, "ocr_ctx_scratch", "slot", "out of range");
    OCR_CHECK(ocr_ctx_scratch(&ctx, -1, 16) == NULL);
    ocr_ctx_free(&ctx);
}

/* ---------------------------------------------------------------- sizes, names, errors */

static void test_sizes_and_names(void) {
    size_t out = 7;
    char buf[96];
    int code;
    OCR_CHECK(ocr_size_mul(3, 5, &out) == 1 && out == 15);
    OCR_CHECK(ocr_size_mul(0, SIZE_MAX, &out) == 1 && out == 0);
    OCR_CHECK(ocr_size_mul(SIZE_MAX, 1, &out) == 1 && out == SIZE_MAX);
    OCR_CHECK(ocr_size_mul(SIZE_MAX / 2 + 1, 2, &out) == 0);
    OCR_CHECK(ocr_size_mul((size_t)1 << (sizeof(size_t) * 4), (size_t)1 << (sizeof(size_t) * 4), &out) == 0);
    OCR_CHECK(ocr_size_add(SIZE_MAX - 1, 1, &out) == 1 && out == SIZE_MAX);
    OCR_CHECK(ocr_size_add(SIZE_MAX, 1, &out) == 0);
    OCR_CHECK(ocr_size_add(1, SIZE_MAX, &out) == 0);
    OCR_CHECK(ocr_dtype_size(OCR_F32) == 4 && ocr_dtype_size(OCR_F16) == 2 && ocr_dtype_size(OCR_BF16) == 2 &&
              ocr_dtype_size(OCR_U8) == 1 && ocr_dtype_size(OCR_I32) == 4 && ocr_dtype_size(OCR_I64) == 8 &&
              ocr_dtype_size(OCR_DTYPE_COUNT) == 0);
    OCR_CHECK(strcmp(ocr_dtype_name(OCR_F32), "F32") == 0 && strcmp(ocr_dtype_name(OCR_BF16), "BF16") == 0 &&
              strcmp(ocr_dtype_name(OCR_I64), "I64") == 0 && strcmp(ocr_dtype_name(OCR_DTYPE_COUNT), "?") == 0);
    OCR_CHECK(strcmp(ocr_device_name(OCR_DEVICE_CPU), "cpu") == 0 && strcmp(ocr_device_name(OCR_DEVICE_CUDA), "cuda") == 0);
    for (code = OCR_OK; code >= OCR_ESTATE; code--) OCR_CHECK(strcmp(ocr_status_name(code), "UNKNOWN") != 0);
    OCR_CHECK(strcmp(ocr_status_name(OCR_EOVERFLOW), "EOVERFLOW") == 0 && strcmp(ocr_status_name(OCR_ESTATE), "ESTATE") == 0);
    OCR_CHECK(strcmp(ocr_status_name(OCR_ESTATE - 1), "UNKNOWN") == 0 && strcmp(ocr_status_name(1), "UNKNOWN") == 0);
    OCR_CHECK(strcmp(ocr_shape_str(ocr_shape4(2, 3, 64, 64), buf, sizeof buf), "[2,3,64,64]") == 0);
    OCR_CHECK(strcmp(ocr_shape_str(ocr_shape1(0), buf, sizeof buf), "[0]") == 0);
    {
        ocr_shape s0;
        memset(&s0, 0, sizeof s0);
        OCR_CHECK(strcmp(ocr_shape_str(s0, buf, sizeof buf), "[]") == 0 && ocr_shape_numel(s0) == 1);
    }
    /* a short buffer truncates but stays terminated */
    memset(buf, 'z', sizeof buf);
    ocr_shape_str(ocr_shape4(123456, 2, 3, 4), buf, 6);
    OCR_CHECK(strlen(buf) == 5 && strncmp(buf, "[1234", 5) == 0);
    OCR_CHECK(ocr_shape_equal(ocr_shape2(2, 3), ocr_shape2(2, 3)) && !ocr_shape_equal(ocr_shape2(2, 3), ocr_shape2(3, 2)) &&
              !ocr_shape_equal(ocr_shape1(6), ocr_shape2(6, 1)));
}

typedef struct { int calls, level; char last[OCR_ERROR_MAX]; } log_sink;
static void log_capture(void *user, int level, const char *message) {
    log_sink *s = (log_sink *)user;
    s->calls++;
    s->level = level;
    snprintf(s->last, sizeof s->last, "%s", message);
}

static void test_errors_and_log(void) {
    ocr_ctx ctx;
    log_sink sink;
    memset(&sink, 0, sizeof sink);
    OCR_CHECK_OK(&ctx, ocr_ctx_init(&ctx, 1, 1));
    OCR_CHECK(ocr_error(&ctx, OCR_ERANGE, "my_op: value %d", 42) == OCR_ERANGE);
    OCR_CHECK(ctx.last_status == OCR_ERANGE && strcmp(ocr_ctx_last_error(&ctx), "my_op: value 42") == 0);
    ocr_ctx_clear_error(&ctx);
    OCR_CHECK(ctx.last_status == OCR_OK && strcmp(ocr_ctx_last_error(&ctx), "no error") == 0);
    OCR_CHECK(ocr_error(NULL, OCR_EIO, "no context") == OCR_EIO);
    ocr_log(&ctx, OCR_LOG_INFO, "silent by default");
    ctx.log_fn = log_capture;
    ctx.log_user = &sink;
    ocr_log(&ctx, OCR_LOG_WARN, "step %d", 3);
    OCR_CHECK(sink.calls == 1 && sink.level == OCR_LOG_WARN && strcmp(sink.last, "step 3") == 0);
    ocr_error(&ctx, OCR_EINVAL, "op: bad");
    OCR_CHECK(sink.calls == 2 && sink.level == OCR_LOG_DEBUG && strcmp(sink.last, "op: bad") == 0);
    /* a message longer than the buffer is truncated, not overflowed */
    {
        char big[3 * OCR_ERROR_MAX];
        memset(big, 'x', sizeof big - 1);
        big[sizeof big - 1] = 0;
        ocr_error(&ctx, OCR_EINVAL, "%s", big);
        OCR_CHECK(strlen(ocr_ctx_last_error(&ctx)) == OCR_ERROR_MAX - 1);
    }
    ocr_ctx_free(&ctx);
}

/* ---------------------------------------------------------------- tensors */

static void test_tensor_alloc(void) {
    ocr_ctx ctx;
    ocr_dtype dt;
    static const int64_t sizes[] = {1, 3, 7, 64, 65, 1000, 4099};
    int si;
    char desc[200];
    OCR_CHECK_OK(&ctx, ocr_ctx_init(&ctx, 1, 1));
    for (dt = OCR_F32; dt < OCR_DTYPE_COUNT; dt = (ocr_dtype)(dt + 1))
        for (si = 0; si < (int)(sizeof sizes / sizeof sizes[0]); si++) {
            ocr_tensor t;
            size_t b, nonzero = 0;
            OCR_CHECK_OK(&ctx, ocr_tensor_alloc(&ctx, &t, "t", dt, OCR_DEVICE_CPU, ocr_shape2(sizes[si], 3)));
            OCR_CHECK(is_aligned64(t.data) && t.owns_data && t.dtype == dt && t.device == OCR_DEVICE_CPU);
            OCR_CHECK(ocr_tensor_numel(&t) == sizes[si] * 3 && ocr_tensor_bytes(&t) == (size_t)(sizes[si] * 3) * ocr_dtype_size(dt));
            for (b = 0; b < ocr_tensor_bytes(&t); b++) nonzero += ((unsigned char *)t.data)[b] != 0;
            OCR_CHECK(nonzero == 0);
            ocr_tensor_free(&t);
            OCR_CHECK(t.data == NULL && !t.owns_data);
            ocr_tensor_free(&t);
        }
    {
        ocr_tensor s, z;
        ocr_shape scalar;
        memset(&scalar, 0, sizeof scalar);
        OCR_CHECK_OK(&ctx, ocr_tensor_alloc(&ctx, &s, "scalar", OCR_F32, OCR_DEVICE_CPU, scalar));
        OCR_CHECK(ocr_tensor_numel(&s) == 1 && ocr_tensor_bytes(&s) == 4 && s.data != NULL);
        OCR_CHECK(strcmp(ocr_tensor_describe(&s, desc, sizeof desc), "'scalar' (F32 [], cpu)") == 0);
        OCR_CHECK_OK(&ctx, ocr_tensor_alloc(&ctx, &z, "empty", OCR_I64, OCR_DEVICE_CPU, ocr_shape3(4, 0, 2)));
        OCR_CHECK(ocr_tensor_numel(&z) == 0 && ocr_tensor_bytes(&z) == 0 && z.data != NULL);
        OCR_CHECK_OK(&ctx, ocr_check_tensor(&ctx, "f", &z));
        ocr_tensor_free(&s);
        ocr_tensor_free(&z);
    }
    {
        ocr_tensor t;
        char longname[200];
        memset(longname, 'n', sizeof longname - 1);
        longname[sizeof longname - 1] = 0;
        OCR_CHECK_OK(&ctx, ocr_tensor_alloc(&ctx, &t, longname, OCR_U8, OCR_DEVICE_CPU, ocr_shape1(2)));
        OCR_CHECK(strlen(t.name) == OCR_NAME_MAX - 1);
        ocr_tensor_set_name(&t, NULL);
        OCR_CHECK(t.name[0] == 0);
        OCR_CHECK(strcmp(ocr_tensor_describe(&t, desc, sizeof desc), "'?' (U8 [2], cpu)") == 0);
        ocr_tensor_free(&t);
        OCR_CHECK(strcmp(ocr_tensor_describe(NULL, desc, sizeof desc), "(null tensor)") == 0);
    }
    {
        ocr_tensor t;
        EXPECT_ERR(&ctx, ocr_tensor_alloc(&ctx, &t, "dev", OCR_F32, OCR_DEVICE_CUDA, ocr_shape1(4)), OCR_EUNSUPPORTED,
                   "ocr_tensor_alloc", "'dev'", "cuda");
        OCR_CHECK(t.data == NULL);
        EXPECT_ERR(&ctx, ocr_tensor_alloc(&ctx, &t, "dt", OCR_DTYPE_COUNT, OCR_DEVICE_CPU, ocr_shape1(4)), OCR_EDTYPE,
                   "ocr_tensor_alloc", "'dt'", "unknown dtype");
    }
    ocr_ctx_free(&ctx);
}

static void test_shape_limits(void) {
    ocr_ctx ctx;
    ocr_tensor t;
    ocr_shape s;
    int64_t big = (int64_t)1 << 40;
    OCR_CHECK_OK(&ctx, ocr_ctx_init(&ctx, 1, 1));
    /* exactly 2^40 elements is allowed by the shape check (not allocated here) */
    OCR_CHECK_OK(&ctx, ocr_shape_validate(&ctx, "f", "x", ocr_shape1(big)));
    OCR_CHECK_OK(&ctx, ocr_shape_validate(&ctx, "f", "x", ocr_shape4(1 << 10, 1 << 10, 1 << 10, 1 << 10)));
    EXPECT_ERR(&ctx, ocr_shape_validate(&ctx, "my_fn", "x", ocr_shape1(big + 1)), OCR_EOVERFLOW, "my_fn", "x", "2^40");
    /* counts that overflow int64 itself are caught before the multiplication */
    EXPECT_ERR(&ctx, ocr_tensor_alloc(&ctx, &t, "huge", OCR_F32, OCR_DEVICE_CPU, ocr_shape4(1 << 20, 1 << 20, 2, 1)),
               OCR_EOVERFLOW, "ocr_tensor_alloc", "huge", "[1048576,1048576,2,1]", "2^40");
    OCR_CHECK(t.data == NULL);
    EXPECT_ERR(&ctx, ocr_tensor_alloc(&ctx, &t, "wrap", OCR_U8, OCR_DEVICE_CPU,
                                      ocr_shape4((int64_t)1 << 62, (int64_t)1 << 62, 4, 4)), OCR_EOVERFLOW, "wrap", "2^40");
    EXPECT_ERR(&ctx, ocr_tensor_alloc(&ctx, &t, "maxdims", OCR_U8, OCR_DEVICE_CPU,
                                      ocr_shape4(INT64_MAX, INT64_MAX, INT64_MAX, INT64_MAX)), OCR_EOVERFLOW, "maxdims");
    EXPECT_ERR(&ctx, ocr_tensor_alloc(&ctx, &t, "neg", OCR_F32, OCR_DEVICE_CPU, ocr_shape3(2, -1, 3)), OCR_ESHAPE,
               "ocr_tensor_alloc", "neg", "negative dim 1", "[2,-1,3]");
    EXPECT_ERR(&ctx, ocr_tensor_alloc(&ctx, &t, "neg0", OCR_F32, OCR_DEVICE_CPU, ocr_shape1(INT64_MIN)), OCR_ESHAPE, "negative dim 0");
    s = ocr_shape4(1, 1, 1, 1);
    s.ndim = 5;
    EXPECT_ERR(&ctx, ocr_tensor_alloc(&ctx, &t, "five", OCR_F32, OCR_DEVICE_CPU, s), OCR_ESHAPE, "five", "5 dims");
    s.ndim = -1;
    EXPECT_ERR(&ctx, ocr_tensor_alloc(&ctx, &t, "minus", OCR_F32, OCR_DEVICE_CPU, s), OCR_ESHAPE, "minus", "-1 dims");
    /* the sizes a caller multiplies itself */
    {
        size_t bytes;
        OCR_CHECK(!ocr_size_mul((size_t)big, (size_t)1 << 30, &bytes) || sizeof(size_t) > 8);
        OCR_CHECK(ocr_aligned_alloc(SIZE_MAX) == NULL);
        OCR_CHECK(ocr_aligned_alloc(SIZE_MAX - 32) == NULL);
    }
    ocr_ctx_free(&ctx);
}

/* Blocks of 2 MB or more start 64 bytes past a 2 MB boundary on Linux, where the library asks for huge pages for
   them, and are plain 64-byte aligned blocks with OCR_NO_HUGE_PAGES=1; both hold every byte. */
static void test_aligned_alloc_large(void) {
    size_t n = ((size_t)3 << 20) + 5;
    int pass;
    for (pass = 0; pass < 2; pass++) {
        unsigned char *p;
        if (pass) setenv("OCR_NO_HUGE_PAGES", "1", 1);
        p = (unsigned char *)ocr_aligned_alloc(n);
        OCR_CHECK(p != NULL && is_aligned64(p));
        if (!p) continue;
        memset(p, 0xab, n);
        OCR_CHECK(p[0] == 0xab && p[n - 1] == 0xab);
#ifdef __linux__
        if (!pass) OCR_CHECK_MSG(((uintptr_t)p & (((uintptr_t)2 << 20) - 1)) == 64, "a 3 MB block at %p is not 64 bytes past a 2 MB boundary", (void *)p);
#endif
        ocr_aligned_free(p);
    }
    unsetenv("OCR_NO_HUGE_PAGES");
}

static void test_views_slice_reshape(void) {
    ocr_ctx ctx;
    float buf[24];
    ocr_tensor v, s, r;
    int i;
    char desc[200];
    OCR_CHECK_OK(&ctx, ocr_ctx_init(&ctx, 1, 1));
    for (i = 0; i < 24; i++) buf[i] = (float)i;
    v = ocr_tensor_f32("x", ocr_shape3(4, 2, 3), buf);
    OCR_CHECK(v.data == buf && !v.owns_data && v.dtype == OCR_F32 && v.device == OCR_DEVICE_CPU);
    OCR_CHECK(strcmp(ocr_tensor_describe(&v, desc, sizeof desc), "'x' (F32 [4,2,3], cpu)") == 0);
    ocr_tensor_free(&v); /* a view never frees the caller's memory (the sanitizer build would catch it) */
    OCR_CHECK(v.data == NULL);
    v = ocr_tensor_f32("x", ocr_shape3(4, 2, 3), buf);

    OCR_CHECK_OK(&ctx, ocr_tensor_slice(&ctx, &v, 1, 2, &s));
    OCR_CHECK(s.data == buf + 6 && !s.owns_data && ocr_shape_equal(s.shape, ocr_shape3(2, 2, 3)) && strcmp(s.name, "x") == 0);
    OCR_CHECK(ocr_tensor_get(&s, 0) == 6.0 && ocr_tensor_get(&s, 11) == 17.0);
    OCR_CHECK_OK(&ctx, ocr_tensor_slice(&ctx, &v, 4, 0, &s)); /* empty slice at the end */
    OCR_CHECK(ocr_tensor_numel(&s) == 0);
    OCR_CHECK_OK(&ctx, ocr_tensor_slice(&ctx, &v, 0, 4, &s));
    OCR_CHECK(s.data == buf);
    EXPECT_ERR(&ctx, ocr_tensor_slice(&ctx, &v, 3, 2, &s), OCR_ERANGE, "ocr_tensor_slice", "2 rows from row 3",
               "'x' (F32 [4,2,3], cpu)");
    EXPECT_ERR(&ctx, ocr_tensor_slice(&ctx, &v, -1, 1, &s), OCR_ERANGE, "ocr_tensor_slice");
    EXPECT_ERR(&ctx, ocr_tensor_slice(&ctx, &v, 0, -1, &s), OCR_ERANGE, "ocr_tensor_slice");
    EXPECT_ERR(&ctx, ocr_tensor_slice(&ctx, &v, INT64_MAX, 2, &s), OCR_ERANGE, "ocr_tensor_slice");
    EXPECT_ERR(&ctx, ocr_tensor_slice(&ctx, &v, 1, INT64_MAX, &s), OCR_ERANGE, "ocr_tensor_slice");
    {
        ocr_shape scalar;
        ocr_tensor sc;
        memset(&scalar, 0, sizeof scalar);
        sc = ocr_tensor_f32("sc", scalar, buf);
        EXPECT_ERR(&ctx, ocr_tensor_slice(&ctx, &sc, 0, 1, &s), OCR_ERANGE, "ocr_tensor_slice", "'sc'");
    }
    EXPECT_ERR(&ctx, ocr_tensor_slice(&ctx, NULL, 0, 1, &s), OCR_EINVAL, "ocr_tensor_slice", "NULL");

    OCR_CHECK_OK(&ctx, ocr_tensor_reshape(&ctx, &v, ocr_shape2(6, 4), &r));
    OCR_CHECK(r.data == buf && !r.owns_data && ocr_shape_equal(r.shape, ocr_shape2(6, 4)));
    OCR_CHECK_OK(&ctx, ocr_tensor_reshape(&ctx, &v, ocr_shape4(1, 24, 1, 1), &r));
    EXPECT_ERR(&ctx, ocr_tensor_reshape(&ctx, &v, ocr_shape2(5, 5), &r), OCR_ESHAPE, "ocr_tensor_reshape", "'x' (F32 [4,2,3], cpu)",
               "cannot become [5,5]");
    EXPECT_ERR(&ctx, ocr_tensor_reshape(&ctx, &v, ocr_shape2(-4, -6), &r), OCR_ESHAPE, "ocr_tensor_reshape", "negative dim");
    {
        ocr_tensor nodata = ocr_tensor_f32("nodata", ocr_shape1(3), NULL);
        EXPECT_ERR(&ctx, ocr_tensor_reshape(&ctx, &nodata, ocr_shape1(3), &r), OCR_EINVAL, "ocr_tensor_reshape", "'nodata'", "no data");
    }
    ocr_ctx_free(&ctx);
}

static void test_fill_copy_dtypes(void) {
    static const double src_vals[] = {0.0, 1.5, -2.25, 1000.75, 65504.0, 70000.0, -3.7, 255.5, 300.0};
    enum { N = 9 };
    ocr_ctx ctx;
    ocr_tensor f, t[OCR_DTYPE_COUNT], back;
    ocr_dtype dt;
    int i;
    OCR_CHECK_OK(&ctx, ocr_ctx_init(&ctx, 1, 1));
    OCR_CHECK_OK(&ctx, ocr_tensor_alloc(&ctx, &f, "src", OCR_F32, OCR_DEVICE_CPU, ocr_shape1(N)));
    for (i = 0; i < N; i++) ocr_tensor_set(&f, i, src_vals[i]);
    for (dt = OCR_F32; dt < OCR_DTYPE_COUNT; dt = (ocr_dtype)(dt + 1)) {
        OCR_CHECK_OK(&ctx, ocr_tensor_alloc(&ctx, &t[dt], "dst", dt, OCR_DEVICE_CPU, ocr_shape1(N)));
        OCR_CHECK_OK(&ctx, ocr_tensor_fill(&ctx, &t[dt], 3.0));
        for (i = 0; i < N; i++) OCR_CHECK(ocr_tensor_get(&t[dt], i) == 3.0);
        OCR_CHECK_OK(&ctx, ocr_tensor_copy(&ctx, &t[dt], &f));
    }
    for (i = 0; i < N; i++) {
        double v = src_vals[i];
        OCR_CHECK(ocr_tensor_get(&t[OCR_F32], i) == (double)(float)v);
        OCR_CHECK(ocr_tensor_get(&t[OCR_F16], i) == (double)ocr_f16_to_f32(ocr_f32_to_f16((float)v)));
        OCR_CHECK(ocr_tensor_get(&t[OCR_BF16], i) == (double)ocr_bf16_to_f32(ocr_f32_to_bf16((float)v)));
        /* integers truncate toward zero; U8 saturates at 0 and 255 */
        OCR_CHECK(ocr_tensor_get(&t[OCR_I32], i) == (double)(int32_t)v);
        OCR_CHECK(ocr_tensor_get(&t[OCR_I64], i) == (double)(int64_t)v);
        OCR_CHECK(ocr_tensor_get(&t[OCR_U8], i) == (v < 0 ? 0.0 : v > 255 ? 255.0 : (double)(uint8_t)v));
    }
    OCR_CHECK(isinf(ocr_tensor_get(&t[OCR_F16], 5)));       /* 70000 overflows float16 */
    OCR_CHECK(ocr_tensor_get(&t[OCR_BF16], 3) == 1000.0);   /* 8 significant bits */
    OCR_CHECK(ocr_tensor_get(&t[OCR_F16], 3) == 1001.0);    /* a tie (12 significant bits) rounds to even */
    /* back to F32 from every dtype, and same-dtype copies are exact byte copies */
    OCR_CHECK_OK(&ctx, ocr_tensor_alloc(&ctx, &back, "back", OCR_F32, OCR_DEVICE_CPU, ocr_shape1(N)));
    OCR_CHECK_OK(&ctx, ocr_tensor_copy(&ctx, &back, &t[OCR_I32]));
    OCR_CHECK(ocr_tensor_get(&back, 2) == -2.0 && ocr_tensor_get(&back, 8) == 300.0);
    {
        ocr_tensor same;
        OCR_CHECK_OK(&ctx, ocr_tensor_alloc(&ctx, &same, "same", OCR_BF16, OCR_DEVICE_CPU, ocr_shape1(N)));
        OCR_CHECK_OK(&ctx, ocr_tensor_copy(&ctx, &same, &t[OCR_BF16]));
        OCR_CHECK(memcmp(same.data, t[OCR_BF16].data, ocr_tensor_bytes(&same)) == 0);
        ocr_tensor_free(&same);
    }
    /* integer targets saturate, and NaN becomes 0 rather than undefined behaviour */
    {
        ocr_tensor big;
        OCR_CHECK_OK(&ctx, ocr_tensor_alloc(&ctx, &big, "big", OCR_F32, OCR_DEVICE_CPU, ocr_shape1(N)));
        ocr_tensor_set(&big, 0, 1e20);
        ocr_tensor_set(&big, 1, -1e20);
        ocr_tensor_set(&big, 2, NAN);
        ocr_tensor_set(&big, 3, INFINITY);
        OCR_CHECK_OK(&ctx, ocr_tensor_copy(&ctx, &t[OCR_I32], &big));
        OCR_CHECK_OK(&ctx, ocr_tensor_copy(&ctx, &t[OCR_I64], &big));
        OCR_CHECK_OK(&ctx, ocr_tensor_copy(&ctx, &t[OCR_U8], &big));
        OCR_CHECK(ocr_tensor_get(&t[OCR_I32], 0) == 2147483647.0 && ocr_tensor_get(&t[OCR_I32], 1) == -2147483648.0 &&
                  ocr_tensor_get(&t[OCR_I32], 2) == 0.0 && ocr_tensor_get(&t[OCR_I32], 3) == 2147483647.0);
        OCR_CHECK(((int64_t *)t[OCR_I64].data)[0] == INT64_MAX && ((int64_t *)t[OCR_I64].data)[1] == INT64_MIN &&
                  ((int64_t *)t[OCR_I64].data)[2] == 0);
        OCR_CHECK(ocr_tensor_get(&t[OCR_U8], 0) == 255.0 && ocr_tensor_get(&t[OCR_U8], 1) == 0.0 &&
                  ocr_tensor_get(&t[OCR_U8], 2) == 0.0);
        ocr_tensor_free(&big);
    }
    /* I64 values beyond 2^53 survive set/get through the exact int64 path of a same-dtype copy */
    ((int64_t *)t[OCR_I64].data)[0] = ((int64_t)1 << 60) + 1;
    {
        ocr_tensor i64b;
        OCR_CHECK_OK(&ctx, ocr_tensor_alloc(&ctx, &i64b, "i64b", OCR_I64, OCR_DEVICE_CPU, ocr_shape1(N)));
        OCR_CHECK_OK(&ctx, ocr_tensor_copy(&ctx, &i64b, &t[OCR_I64]));
        OCR_CHECK(((int64_t *)i64b.data)[0] == ((int64_t)1 << 60) + 1);
        ocr_tensor_free(&i64b);
    }
    /* U8 fill saturates */
    OCR_CHECK_OK(&ctx, ocr_tensor_fill(&ctx, &t[OCR_U8], 300.0));
    OCR_CHECK(ocr_tensor_get(&t[OCR_U8], 4) == 255.0);
    OCR_CHECK_OK(&ctx, ocr_tensor_fill(&ctx, &t[OCR_U8], -7.0));
    OCR_CHECK(ocr_tensor_get(&t[OCR_U8], 4) == 0.0);
    OCR_CHECK_OK(&ctx, ocr_tensor_zero(&ctx, &t[OCR_F16]));
    for (i = 0; i < N; i++) OCR_CHECK(((uint16_t *)t[OCR_F16].data)[i] == 0);
    /* errors name the function and both tensors */
    {
        ocr_tensor wrong, dev;
        float dummy[4] = {0};
        OCR_CHECK_OK(&ctx, ocr_tensor_alloc(&ctx, &wrong, "wrong", OCR_F32, OCR_DEVICE_CPU, ocr_shape2(3, 3)));
        EXPECT_ERR(&ctx, ocr_tensor_copy(&ctx, &wrong, &f), OCR_ESHAPE, "ocr_tensor_copy", "'wrong' (F32 [3,3], cpu)",
                   "'src' (F32 [9], cpu)");
        dev = ocr_tensor_view("gpu", OCR_F32, OCR_DEVICE_CUDA, ocr_shape1(4), dummy);
        EXPECT_ERR(&ctx, ocr_tensor_copy(&ctx, &back, &dev), OCR_EDEVICE, "ocr_tensor_copy", "'gpu'", "cuda");
        EXPECT_ERR(&ctx, ocr_tensor_fill(&ctx, &dev, 1.0), OCR_EDEVICE, "ocr_tensor_fill", "'gpu'");
        EXPECT_ERR(&ctx, ocr_tensor_zero(&ctx, NULL), OCR_EINVAL, "ocr_tensor_zero");
        ocr_tensor_free(&wrong);
    }
    for (dt = OCR_F32; dt < OCR_DTYPE_COUNT; dt = (ocr_dtype)(dt + 1)) ocr_tensor_free(&t[dt]);
    ocr_tensor_free(&f);
    ocr_tensor_free(&back);
    ocr_ctx_free(&ctx);
}

static void test_fill_random(void) {
    ocr_ctx ctx;
    ocr_tensor t;
    int64_t i, n = 100000;
    double sum = 0, sq = 0, mean, var, lo = 1e9, hi = -1e9;
    OCR_CHECK_OK(&ctx, ocr_ctx_init(&ctx, 1, 11));
    OCR_CHECK_OK(&ctx, ocr_tensor_alloc(&ctx, &t, "u", OCR_F32, OCR_DEVICE_CPU, ocr_shape1(n)));
    OCR_CHECK_OK(&ctx, ocr_tensor_fill_uniform(&ctx, &t, -2.0f, 3.0f));
    for (i = 0; i < n; i++) {
        double v = ((float *)t.data)[i];
        sum += v; sq += v * v;
        if (v < lo) lo = v;
        if (v > hi) hi = v;
    }
    mean = sum / n; var = sq / n - mean * mean;
    OCR_CHECK_MSG(lo >= -2.0 && hi < 3.0 && lo < -1.99 && hi > 2.99, "range [%g, %g]", lo, hi);
    OCR_CHECK_MSG(fabs(mean - 0.5) < 5 * sqrt(25.0 / 12 / n), "mean %g", mean);
    OCR_CHECK_MSG(fabs(var - 25.0 / 12) < 0.03, "var %g", var);
    OCR_CHECK_OK(&ctx, ocr_tensor_fill_normal(&ctx, &t, 1.0f, 0.5f));
    sum = sq = 0;
    for (i = 0; i < n; i++) { double v = ((float *)t.data)[i]; sum += v; sq += v * v; }
    mean = sum / n; var = sq / n - mean * mean;
    OCR_CHECK_MSG(fabs(mean - 1.0) < 5 * 0.5 / sqrt((double)n), "mean %g", mean);
    OCR_CHECK_MSG(fabs(var - 0.25) < 5 * 0.25 * sqrt(2.0 / n), "var %g", var);
    ocr_tensor_free(&t);
    ocr_ctx_free(&ctx);
}

/* ---------------------------------------------------------------- checks */

static void test_check_helpers(void) {
    ocr_ctx ctx;
    float a[24] = {0}, b[24] = {0};
    uint16_t h[6] = {0};
    int32_t iv[4] = {0, 5, -3, 2};
    ocr_tensor x, y, gpu, half, ints, bad;
    OCR_CHECK_OK(&ctx, ocr_ctx_init(&ctx, 1, 1));
    x = ocr_tensor_f32("feat", ocr_shape3(2, 3, 4), a);
    y = ocr_tensor_f32("grad", ocr_shape2(4, 6), b);
    gpu = ocr_tensor_view("dev_w", OCR_F32, OCR_DEVICE_CUDA, ocr_shape3(2, 3, 4), b);
    half = ocr_tensor_view("h", OCR_F16, OCR_DEVICE_CPU, ocr_shape2(2, 3), h);
    ints = ocr_tensor_view("labels", OCR_I32, OCR_DEVICE_CPU, ocr_shape2(2, 2), iv);

    OCR_CHECK_OK(&ctx, ocr_check_tensor(&ctx, "op", &x));
    EXPECT_ERR(&ctx, ocr_check_tensor(&ctx, "conv_fwd", NULL), OCR_EINVAL, "conv_fwd", "NULL");
    bad = ocr_tensor_f32("unalloc", ocr_shape1(5), NULL);
    EXPECT_ERR(&ctx, ocr_check_tensor(&ctx, "conv_fwd", &bad), OCR_EINVAL, "conv_fwd", "'unalloc'", "no data");
    bad = x; bad.dtype = (ocr_dtype)42;
    EXPECT_ERR(&ctx, ocr_check_tensor(&ctx, "conv_fwd", &bad), OCR_EDTYPE, "conv_fwd", "'feat'", "unknown dtype 42");
    bad = x; bad.shape.dim[1] = -3;
    EXPECT_ERR(&ctx, ocr_check_tensor(&ctx, "conv_fwd", &bad), OCR_ESHAPE, "conv_fwd", "feat", "negative dim 1", "[2,-3,4]");
    bad = x; bad.shape.ndim = 7;
    EXPECT_ERR(&ctx, ocr_check_tensor(&ctx, "conv_fwd", &bad), OCR_ESHAPE, "conv_fwd", "feat", "7 dims");
    bad = x; bad.shape = ocr_shape2((int64_t)1 << 21, (int64_t)1 << 21);
    EXPECT_ERR(&ctx, ocr_check_tensor(&ctx, "conv_fwd", &bad), OCR_EOVERFLOW, "conv_fwd", "feat", "[2097152,2097152]", "2^40");

    OCR_CHECK_OK(&ctx, ocr_check_shape(&ctx, "op", &x, ocr_shape3(2, 3, 4)));
    EXPECT_ERR(&ctx, ocr_check_shape(&ctx, "bn_fwd", &x, ocr_shape3(2, 4, 3)), OCR_ESHAPE, "bn_fwd", "'feat'", "F32", "[2,3,4]",
               "cpu", "expected shape [2,4,3]");
    EXPECT_ERR(&ctx, ocr_check_shape(&ctx, "bn_fwd", &x, ocr_shape2(2, 12)), OCR_ESHAPE, "expected shape [2,12]");
    {
        /* long shape strings must not clobber each other */
        ocr_tensor wide = ocr_tensor_f32("wide", ocr_shape4(0, 1099511627775, 1099511627775, 1099511627775), a);
        EXPECT_ERR(&ctx, ocr_check_shape(&ctx, "wide_op", &wide, ocr_shape4(0, 1099511627775, 1099511627775, 1099511627774)),
                   OCR_ESHAPE, "wide_op", "'wide' (F32 [0,1099511627775,1099511627775,1099511627775], cpu)",
                   "expected shape [0,1099511627775,1099511627775,1099511627774]");
    }
    OCR_CHECK_OK(&ctx, ocr_check_same_shape(&ctx, "op", &x, &gpu));
    EXPECT_ERR(&ctx, ocr_check_same_shape(&ctx, "add_fwd", &x, &y), OCR_ESHAPE, "add_fwd", "'feat' (F32 [2,3,4], cpu)",
               "'grad' (F32 [4,6], cpu)", "same shape");
    EXPECT_ERR(&ctx, ocr_check_same_shape(&ctx, "add_fwd", &x, NULL), OCR_EINVAL, "add_fwd", "NULL");

    OCR_CHECK_OK(&ctx, ocr_check_dtype(&ctx, "op", &half, OCR_F16));
    EXPECT_ERR(&ctx, ocr_check_dtype(&ctx, "cast", &half, OCR_F32), OCR_EDTYPE, "cast", "'h' (F16 [2,3], cpu)", "must be F32");
    EXPECT_ERR(&ctx, ocr_check_f32(&ctx, "relu_fwd", &ints), OCR_EDTYPE, "relu_fwd", "'labels' (I32 [2,2], cpu)", "must be F32");

    OCR_CHECK_OK(&ctx, ocr_check_device(&ctx, "op", &gpu, OCR_DEVICE_CUDA));
    EXPECT_ERR(&ctx, ocr_check_device(&ctx, "save", &gpu, OCR_DEVICE_CPU), OCR_EDEVICE, "save", "'dev_w' (F32 [2,3,4], cuda)",
               "is on cuda, expected cpu");
    EXPECT_ERR(&ctx, ocr_check_f32(&ctx, "relu_fwd", &gpu), OCR_EDEVICE, "relu_fwd", "'dev_w'", "cuda");
    OCR_CHECK_OK(&ctx, ocr_check_f32(&ctx, "relu_fwd", &x));
    OCR_CHECK_OK(&ctx, ocr_check_same_device(&ctx, "op", &x, &y));
    EXPECT_ERR(&ctx, ocr_check_same_device(&ctx, "matmul", &x, &gpu), OCR_EDEVICE, "matmul", "'feat'", "'dev_w'", "cuda", "cpu");

    /* finite: the first bad value, its flat index and its coordinates */
    OCR_CHECK_OK(&ctx, ocr_check_finite(&ctx, "op", &x));
    OCR_CHECK(ocr_find_nonfinite(&x) == -1);
    a[7] = NAN;
    a[20] = INFINITY;
    OCR_CHECK(ocr_find_nonfinite(&x) == 7);
    EXPECT_ERR(&ctx, ocr_check_finite(&ctx, "loss_bwd", &x), OCR_ENONFINITE, "loss_bwd", "'feat' (F32 [2,3,4], cpu)", "nan",
               "index 7 [0,1,3]");
    a[7] = 0;
    EXPECT_ERR(&ctx, ocr_check_finite(&ctx, "loss_bwd", &x), OCR_ENONFINITE, "inf", "index 20 [1,2,0]");
    a[20] = -INFINITY;
    EXPECT_ERR(&ctx, ocr_check_finite(&ctx, "loss_bwd", &x), OCR_ENONFINITE, "-inf", "index 20 [1,2,0]");
    a[20] = 0;
    h[4] = 0x7c00; /* F16 +Inf */
    EXPECT_ERR(&ctx, ocr_check_finite(&ctx, "amp", &half), OCR_ENONFINITE, "amp", "'h' (F16 [2,3], cpu)", "inf", "index 4 [1,1]");
    h[4] = 0;
    {
        uint16_t bf[3] = {0x3f80, 0x7fc0, 0};
        ocr_tensor tb = ocr_tensor_view("bf", OCR_BF16, OCR_DEVICE_CPU, ocr_shape1(3), bf);
        EXPECT_ERR(&ctx, ocr_check_finite(&ctx, "amp", &tb), OCR_ENONFINITE, "'bf' (BF16 [3], cpu)", "nan", "index 1 [1]");
    }
    OCR_CHECK_OK(&ctx, ocr_check_finite(&ctx, "op", &ints)); /* integers are always finite */
    EXPECT_ERR(&ctx, ocr_check_finite(&ctx, "upload", &gpu), OCR_EDEVICE, "upload", "'dev_w'");

    /* range: ERANGE with the value, index and bounds; NaN is ENONFINITE */
    a[5] = 1.5f;
    OCR_CHECK_OK(&ctx, ocr_check_range(&ctx, "op", &x, -2.0, 2.0));
    EXPECT_ERR(&ctx, ocr_check_range(&ctx, "prob_map", &x, 0.0, 1.0), OCR_ERANGE, "prob_map", "'feat' (F32 [2,3,4], cpu)",
               "value 1.5", "index 5 [0,1,1]", "outside [0, 1]");
    a[3] = NAN;
    EXPECT_ERR(&ctx, ocr_check_range(&ctx, "prob_map", &x, 0.0, 1.0), OCR_ENONFINITE, "prob_map", "nan", "index 3 [0,0,3]");
    a[3] = 0;
    EXPECT_ERR(&ctx, ocr_check_range(&ctx, "labels", &ints, 0.0, 4.0), OCR_ERANGE, "labels",
               "'labels' (I32 [2,2], cpu)", "value 5", "index 1 [0,1]", "outside [0, 4]");
    OCR_CHECK_OK(&ctx, ocr_check_range(&ctx, "labels", &ints, -3.0, 5.0));
    ocr_ctx_free(&ctx);
}

/* ---------------------------------------------------------------- RNG */

/* Large F32 tensors are scanned and copied on every thread: the first bad value is still the one reported, wherever
   it lies (a thread's second piece, the tail past the last whole block), values at the edge of the range are not
   flagged, and an overlapping copy still moves like memmove. */
static void test_check_copy_large(void) {
    ocr_ctx ctx;
    ocr_tensor x, y;
    int64_t n = 3 * 736 * 1280 + 37, i, k; /* a whole number of neither blocks nor pieces */
    int64_t spots[] = {0, 255, 256, 16383, 16384, 1413120, 2826239, 2826240, 2826276};
    float *a;
    char want[64];
    OCR_CHECK_OK(&ctx, ocr_ctx_init(&ctx, 2, 1));
    OCR_CHECK_OK(&ctx, ocr_tensor_alloc(&ctx, &x, "img", OCR_F32, OCR_DEVICE_CPU, ocr_shape1(n)));
    OCR_CHECK_OK(&ctx, ocr_tensor_alloc(&ctx, &y, "copy", OCR_F32, OCR_DEVICE_CPU, ocr_shape1(n)));
    a = (float *)x.data;
    for (i = 0; i < n; i++) a[i] = (float)(i % 1000) - 500.0f;
    a[1] = FLT_MAX; a[2] = -FLT_MAX; a[3] = FLT_MIN; a[4] = 1e-45f; a[n - 1] = -FLT_MAX;
    OCR_CHECK_OK(&ctx, ocr_check_finite(&ctx, "op", &x));
    for (k = 0; k < (int64_t)(sizeof spots / sizeof spots[0]); k++) {
        float keep = a[spots[k]];
        OCR_CHECK(spots[k] < n);
        a[spots[k]] = k % 2 ? NAN : -INFINITY;
        if (spots[k] + 3 < n) a[spots[k] + 3] = INFINITY; /* a later one is never the one named */
        snprintf(want, sizeof want, "index %lld [%lld]", (long long)spots[k], (long long)spots[k]);
        OCR_CHECK(ocr_find_nonfinite(&x) == spots[k]);
        EXPECT_ERR(&ctx, ocr_check_finite(&ctx, "forward", &x), OCR_ENONFINITE, "'img'", k % 2 ? "nan" : "-inf", want);
        a[spots[k]] = keep;
        if (spots[k] + 3 < n) a[spots[k] + 3] = 0.0f;
    }
    OCR_CHECK_OK(&ctx, ocr_check_finite(&ctx, "op", &x));

    OCR_CHECK_OK(&ctx, ocr_tensor_copy(&ctx, &y, &x));
    OCR_CHECK(memcmp(x.data, y.data, (size_t)n * sizeof(float)) == 0);
    {
        /* overlapping views of one buffer, both ways */
        int64_t m = n - 1001;
        ocr_tensor lo = ocr_tensor_f32("lo", ocr_shape1(m), a), hi = ocr_tensor_f32("hi", ocr_shape1(m), a + 1001);
        float *b = (float *)y.data;
        OCR_CHECK_OK(&ctx, ocr_tensor_copy(&ctx, &hi, &lo));
        for (i = 0; i < n && (i < 1001 ? a[i] == b[i] : a[i] == b[i - 1001]); i++) {}
        OCR_CHECK(i == n);
        OCR_CHECK_OK(&ctx, ocr_tensor_copy(&ctx, &lo, &hi));
        for (i = 0; i < m && a[i] == b[i]; i++) {}
        OCR_CHECK(i == m);
    }
    ocr_tensor_free(&x);
    ocr_tensor_free(&y);
    ocr_ctx_free(&ctx);
}

static void test_rng_streams(void) {
    ocr_rng a, b, c;
    ocr_ctx ctx;
    int i, same_ab = 1, diff_ac = 0;
    ocr_rng_seed(&a, 1234);
    ocr_rng_seed(&b, 1234);
    ocr_rng_seed(&c, 1235);
    for (i = 0; i < 1000; i++) {
        uint64_t x = ocr_rng_u64(&a), y = ocr_rng_u64(&b), z = ocr_rng_u64(&c);
        same_ab &= x == y;
        diff_ac += x != z;
    }
    OCR_CHECK(same_ab && diff_ac == 1000);
    /* seed 0 still gives a working (non-zero) state */
    ocr_rng_seed(&a, 0);
    OCR_CHECK(ocr_rng_u64(&a) != 0 || ocr_rng_u64(&a) != 0);
    /* the context's RNG is seeded from ocr_ctx_init's seed */
    OCR_CHECK_OK(&ctx, ocr_ctx_init(&ctx, 1, 99));
    ocr_rng_seed(&a, 99);
    OCR_CHECK(ocr_rng_u64(&ctx.rng) == ocr_rng_u64(&a));
    ocr_ctx_free(&ctx);
    /* the state is plain data: a copy (a checkpoint) continues identically, including the normal's spare */
    ocr_rng_seed(&a, 7);
    (void)ocr_rng_normal(&a);
    b = a;
    for (i = 0; i < 100; i++) OCR_CHECK(ocr_rng_normal(&a) == ocr_rng_normal(&b) && ocr_rng_uniform(&a) == ocr_rng_uniform(&b));
}

static void test_rng_uniform_normal(void) {
    ocr_rng r;
    int i, n = 400000, within1 = 0;
    double sum = 0, sq = 0, mean, var, cube = 0, quad = 0;
    float lo = 1, hi = 0;
    ocr_rng_seed(&r, 42);
    for (i = 0; i < n; i++) {
        float u = ocr_rng_uniform(&r);
        if (u < lo) lo = u;
        if (u > hi) hi = u;
        sum += u; sq += (double)u * u;
    }
    mean = sum / n; var = sq / n - mean * mean;
    OCR_CHECK_MSG(lo >= 0.0f && hi < 1.0f, "uniform range [%g, %g]", lo, hi);
    OCR_CHECK_MSG(fabs(mean - 0.5) < 5 * sqrt(1.0 / 12 / n), "uniform mean %g", mean);
    OCR_CHECK_MSG(fabs(var - 1.0 / 12) < 5 * sqrt(1.0 / 180 / n), "uniform variance %g", var); /* Var of (u-1/2)^2 is 1/180 */
    sum = sq = 0;
    for (i = 0; i < n; i++) {
        double z = ocr_rng_normal(&r);
        sum += z; sq += z * z; cube += z * z * z; quad += z * z * z * z;
        within1 += fabs(z) < 1.0;
    }
    mean = sum / n; var = sq / n - mean * mean;
    OCR_CHECK_MSG(fabs(mean) < 5 / sqrt((double)n), "normal mean %g", mean);
    OCR_CHECK_MSG(fabs(var - 1) < 5 * sqrt(2.0 / n), "normal variance %g", var);
    OCR_CHECK_MSG(fabs(cube / n) < 5 * sqrt(15.0 / n), "normal third moment %g", cube / n);
    OCR_CHECK_MSG(fabs(quad / n - 3) < 5 * sqrt(96.0 / n), "normal fourth moment %g", quad / n);
    OCR_CHECK_MSG(fabs((double)within1 / n - 0.682689) < 5 * sqrt(0.2166 / n), "P(|z|<1) = %g", (double)within1 / n);
}

static void test_rng_below(void) {
    ocr_rng r;
    int i, k, n = 300000, counts[10] = {0}, thirds[3] = {0}, ok = 1;
    double chi2 = 0;
    ocr_rng_seed(&r, 3);
    for (i = 0; i < 1000; i++) ok &= ocr_rng_below(&r, 1) == 0;
    for (i = 0; i < 1000; i++) ok &= ocr_rng_below(&r, 7) < 7;
    for (i = 0; i < 1000; i++) ok &= ocr_rng_below(&r, UINT32_MAX) < UINT32_MAX;
    OCR_CHECK(ok);
    for (i = 0; i < n; i++) counts[ocr_rng_below(&r, 10)]++;
    for (k = 0; k < 10; k++) chi2 += (counts[k] - n / 10.0) * (counts[k] - n / 10.0) / (n / 10.0);
    OCR_CHECK_MSG(chi2 < 30.0, "chi-square over 10 buckets = %g (9 dof)", chi2); /* p < 5e-4 */
    /* n = 3*2^30: a plain multiply-shift hits every value divisible by 3 twice as often (P(r%3==0) = 1/2) */
    for (i = 0; i < n; i++) thirds[ocr_rng_below(&r, 3u << 30) % 3]++;
    for (k = 0; k < 3; k++)
        OCR_CHECK_MSG(fabs(thirds[k] / (double)n - 1.0 / 3) < 5 * sqrt(2.0 / 9 / n), "P(r %% 3 == %d) = %g", k, thirds[k] / (double)n);
}

/* ---------------------------------------------------------------- half precision vs numpy/torch */

static int f16_is_nan(uint16_t h) { return (h & 0x7c00) == 0x7c00 && (h & 0x3ff); }

static void test_half_fixture(void) {
    ocr_ctx ctx;
    ocr_safetensors st;
    ocr_tensor in, f16, bf16, all;
    int64_t i, n, bad16 = 0, badbf = 0, badall = 0;
    OCR_CHECK_OK(&ctx, ocr_ctx_init(&ctx, 1, 1));
    OCR_CHECK_OK(&ctx, ocr_safetensors_open(&ctx, &st, "tests/fixtures/st/half.safetensors"));
    if (ctx.last_status) { ocr_ctx_free(&ctx); return; }
    OCR_CHECK_OK(&ctx, ocr_safetensors_read(&ctx, &st, "f32_in", &in));
    OCR_CHECK_OK(&ctx, ocr_safetensors_read(&ctx, &st, "f16_out", &f16));
    OCR_CHECK_OK(&ctx, ocr_safetensors_read(&ctx, &st, "bf16_out", &bf16));
    OCR_CHECK_OK(&ctx, ocr_safetensors_read(&ctx, &st, "f16_all_as_f32", &all));
    n = ocr_tensor_numel(&in);
    OCR_CHECK(n > 3000 && ocr_tensor_numel(&f16) == n && ocr_tensor_numel(&bf16) == n && ocr_tensor_numel(&all) == 65536);
    OCR_CHECK(in.dtype == OCR_F32 && f16.dtype == OCR_F16 && bf16.dtype == OCR_BF16 && all.dtype == OCR_F32);
    for (i = 0; i < n && ctx.last_status == OCR_OK; i++) {
        float x = ((float *)in.data)[i];
        uint16_t want16 = ((uint16_t *)f16.data)[i], wantbf = ((uint16_t *)bf16.data)[i];
        uint16_t got16 = ocr_f32_to_f16(x), gotbf = ocr_f32_to_bf16(x);
        uint32_t xb;
        memcpy(&xb, &x, 4);
        if (isnan(x)) {
            /* NaN payloads differ between libraries; it must stay a NaN with its sign */
            if (!f16_is_nan(got16) || (got16 & 0x8000) != (want16 & 0x8000)) bad16++;
            if (!isnan(ocr_bf16_to_f32(gotbf)) || !isnan(ocr_bf16_to_f32(wantbf))) badbf++;
            continue;
        }
        if (got16 != want16 && bad16++ < 5)
            fprintf(stderr, "  f32 %.9g (0x%08x) -> f16 0x%04x, numpy 0x%04x\n", x, (unsigned)xb, got16, want16);
        if (gotbf != wantbf && badbf++ < 5)
            fprintf(stderr, "  f32 %.9g (0x%08x) -> bf16 0x%04x, torch 0x%04x\n", x, (unsigned)xb, gotbf, wantbf);
    }
    for (i = 0; i < 65536; i++) {
        float got = ocr_f16_to_f32((uint16_t)i), want = ((float *)all.data)[i];
        if (memcmp(&got, &want, 4) != 0 && badall++ < 5) fprintf(stderr, "  f16 0x%04x -> %.9g, numpy %.9g\n", (unsigned)i, got, want);
        /* every float16 survives the round trip through float32 bit for bit (NaNs included) */
        if (ocr_f32_to_f16(got) != (uint16_t)i && !(f16_is_nan((uint16_t)i) && f16_is_nan(ocr_f32_to_f16(got)))) badall++;
    }
    OCR_CHECK_MSG(bad16 == 0, "%lld of %lld float16 conversions differ from numpy", (long long)bad16, (long long)n);
    OCR_CHECK_MSG(badbf == 0, "%lld of %lld bfloat16 conversions differ from torch", (long long)badbf, (long long)n);
    OCR_CHECK_MSG(badall == 0, "%lld of 65536 float16 -> float32 widenings differ from numpy", (long long)badall);
    /* bfloat16 -> float32 is the upper half of the float32 bits */
    for (i = 0; i < 65536; i += 257) {
        float w = ocr_bf16_to_f32((uint16_t)i);
        uint32_t wb;
        memcpy(&wb, &w, 4);
        OCR_CHECK(wb == (uint32_t)i << 16);
    }
    ocr_tensor_free(&in); ocr_tensor_free(&f16); ocr_tensor_free(&bf16); ocr_tensor_free(&all);
    ocr_safetensors_close(&st);
    ocr_ctx_free(&ctx);
}

/* ---------------------------------------------------------------- JSON */

static int parse(ocr_ctx *ctx, const char *s, size_t len, ocr_json_tok *toks, int max_toks, int *n) {
    return ocr_json_parse(ctx, s, len, toks, max_toks, n);
}

static void test_json_valid(void) {
    static const char doc[] =
        "{\"a\": [1, 2.5, -3e+2], \"b\": {\"c\": null, \"d\": true, \"e\": false},\n"
        " \"s\": \"q\\\"\\\\\\/\\b\\f\\n\\r\\t\\u00e9\\ud83d\\ude00\\u0041\", \"u\": \"\xc3\xa9\xf0\x9f\x98\x80\"}";
    static const char want_s[] = "q\"\\/\b\f\n\r\t\xc3\xa9\xf0\x9f\x98\x80" "A";
    ocr_ctx ctx;
    ocr_json_tok toks[64];
    char out[64];
    double d;
    int n = -1;
    OCR_CHECK_OK(&ctx, ocr_ctx_init(&ctx, 1, 1));
    OCR_CHECK_OK(&ctx, parse(&ctx, doc, strlen(doc), toks, 64, &n));
    OCR_CHECK(n == 18);
    if (n != 18) { ocr_ctx_free(&ctx); return; }
    OCR_CHECK(toks[0].type == OCR_JSON_OBJECT && toks[0].size == 4 && toks[0].next == 18 && toks[0].start == 0 &&
              toks[0].end == (int64_t)strlen(doc));
    OCR_CHECK(toks[2].type == OCR_JSON_ARRAY && toks[2].size == 3 && toks[2].next == 6);
    OCR_CHECK(toks[7].type == OCR_JSON_OBJECT && toks[7].size == 3 && toks[7].next == 14);
    OCR_CHECK(toks[9].type == OCR_JSON_NULL && toks[11].type == OCR_JSON_BOOL && toks[13].type == OCR_JSON_BOOL);
    OCR_CHECK(doc[toks[11].start] == 't' && doc[toks[13].start] == 'f');
    OCR_CHECK(ocr_json_find(doc, toks, 0, "b") == 7 && ocr_json_find(doc, toks, 7, "d") == 11 && ocr_json_find(doc, toks, 0, "z") == -1);
    OCR_CHECK(ocr_json_find(doc, toks, 2, "a") == -1); /* not an object */
    OCR_CHECK(ocr_json_child(toks, 2, 1) == 4 && ocr_json_child(toks, 0, 2) == 14 && ocr_json_child(toks, 2, 3) == -1 &&
              ocr_json_child(toks, 2, -1) == -1 && ocr_json_child(toks, 3, 0) == -1);
    OCR_CHECK(ocr_json_number(doc, &toks[3], &d) && d == 1.0);
    OCR_CHECK(ocr_json_number(doc, &toks[4], &d) && d == 2.5);
    OCR_CHECK(ocr_json_number(doc, &toks[5], &d) && d == -300.0);
    OCR_CHECK(!ocr_json_number(doc, &toks[15], &d)); /* a string is not a number */
    OCR_CHECK(ocr_json_streq(doc, &toks[14], "s") && !ocr_json_streq(doc, &toks[14], "ss") && !ocr_json_streq(doc, &toks[3], "1"));
    OCR_CHECK(ocr_json_string(doc, &toks[15], out, sizeof out) && strcmp(out, want_s) == 0);
    OCR_CHECK(ocr_json_string(doc, &toks[17], out, sizeof out) && strcmp(out, "\xc3\xa9\xf0\x9f\x98\x80") == 0);
    OCR_CHECK(!ocr_json_string(doc, &toks[15], out, 8));   /* does not fit */
    OCR_CHECK(!ocr_json_string(doc, &toks[7], out, sizeof out)); /* not a string */
    {
        static const char *const ok_docs[] = {
            "  \n\t 42 \r\n", "\"str\"", "true", "false", "null", "{}", "[]", "[[], {}, [[]]]", "-0", "0.5e-10", "1E+2",
            "-123456789012345", "{\"\":\"\"}", "[\"\\u0000\"]", "{\"a\":{\"a\":{\"a\":1}}}", "[1,2,3]"};
        static const double nums[] = {42, -0.0, 0.5e-10, 100, -123456789012345.0};
        static const int num_docs[] = {0, 8, 9, 10, 11};
        int i;
        for (i = 0; i < (int)(sizeof ok_docs / sizeof ok_docs[0]); i++)
            OCR_CHECK_MSG(parse(&ctx, ok_docs[i], strlen(ok_docs[i]), toks, 64, &n) == OCR_OK, "%s: %s", ok_docs[i],
                          ocr_ctx_last_error(&ctx));
        for (i = 0; i < 5; i++) {
            OCR_CHECK_OK(&ctx, parse(&ctx, ok_docs[num_docs[i]], strlen(ok_docs[num_docs[i]]), toks, 64, &n));
            OCR_CHECK(n == 1 && toks[0].type == OCR_JSON_NUMBER && ocr_json_number(ok_docs[num_docs[i]], &toks[0], &d) && d == nums[i]);
        }
        OCR_CHECK_OK(&ctx, parse(&ctx, "[1e999]", 7, toks, 64, &n));
        OCR_CHECK(!ocr_json_number("[1e999]", &toks[1], &d)); /* valid JSON, but not a finite double */
        /* the length bounds the parse: a prefix of a longer buffer is a document of its own */
        OCR_CHECK_OK(&ctx, parse(&ctx, "[1]garbage", 3, toks, 64, &n));
        OCR_CHECK(n == 2);
    }
    ocr_ctx_free(&ctx);
}

/* 64 nested containers are allowed, 65 are not, with or without a value inside. */
static void test_json_depth(void) {
    ocr_ctx ctx;
    ocr_json_tok toks[200];
    char deep[300];
    int n, k, depth, with_value;
    OCR_CHECK_OK(&ctx, ocr_ctx_init(&ctx, 1, 1));
    for (depth = 63; depth <= 66; depth++)
        for (with_value = 0; with_value <= 1; with_value++) {
            size_t len = 0;
            int rc;
            for (k = 0; k < depth; k++) deep[len++] = '[';
            if (with_value) deep[len++] = '7';
            for (k = 0; k < depth; k++) deep[len++] = ']';
            rc = parse(&ctx, deep, len, toks, 200, &n);
            if (depth <= 64)
                OCR_CHECK_MSG(rc == OCR_OK && n == depth + with_value, "%d nested arrays (value %d): %s", depth, with_value,
                              ocr_ctx_last_error(&ctx));
            else
                EXPECT_ERR(&ctx, rc, OCR_EFORMAT, "ocr_json_parse", "nesting deeper than 64");
        }
    ocr_ctx_free(&ctx);
}

static void test_json_invalid(void) {
    static const struct { const char *doc; size_t len; const char *why; } bad[] = {
        {"[1,2,]", 0, "unexpected character at byte 5"},
        {"{\"a\":1,}", 0, "expected a string key"},
        {"\"\\x\"", 0, "bad escape"},
        {"\"\\u12G4\"", 0, "bad \\u escape"},
        {"\"\\u12\"", 0, "bad \\u escape"},
        {"\"\xc3\x28\"", 0, "invalid UTF-8"},
        {"\"\xc0\xaf\"", 0, "invalid UTF-8"},             /* overlong '/' */
        {"\"\xe0\x80\xaf\"", 0, "invalid UTF-8"},         /* overlong, 3 bytes */
        {"\"\xed\xa0\x80\"", 0, "invalid UTF-8"},         /* an encoded surrogate */
        {"\"\xf4\x90\x80\x80\"", 0, "invalid UTF-8"},     /* above U+10FFFF */
        {"\"\xff\"", 0, "invalid UTF-8"},
        {"\"\xe2\x82\"", 0, "invalid UTF-8"},             /* truncated sequence */
        {"\"a\x01" "b\"", 0, "control character"},
        {"\"a\nb\"", 0, "control character"},
        {"\"a\0b\"", 5, "control character"},
        {"{} x", 0, "trailing characters after the JSON value at byte 3"},
        {"[1]\0", 4, "trailing characters"},
        {"\"abc", 0, "unterminated string"},
        {"\"abc\\", 0, "unterminated string"},
        {"[1, 2", 0, "expected ',' or ']'"},
        {"{\"a\":1", 0, "expected ',' or '}'"},
        {"{\"a\" 1}", 0, "expected ':'"},
        {"{a:1}", 0, "expected a string key"},
        {"{1:1}", 0, "expected a string key"},
        {"['a']", 0, "unexpected character"},
        {"01", 0, "trailing characters"},
        {"1.", 0, "bad number"},
        {".5", 0, "unexpected character"},
        {"-", 0, "bad number"},
        {"+1", 0, "unexpected character"},
        {"1e", 0, "bad number"},
        {"1e+", 0, "bad number"},
        {"0x10", 0, "trailing characters"},
        {"tru", 0, "unexpected character"},
        {"True", 0, "unexpected character"},
        {"nulll", 0, "trailing characters"},
        {"", 0, "unexpected end of input"},
        {"   ", 0, "unexpected end of input"},
        {"[", 0, "unexpected end of input"},
        {"{\"a\":}", 0, "unexpected character"},
        {"[1 2]", 0, "expected ',' or ']'"},
        {"NaN", 0, "unexpected character"},
        {"[Infinity]", 0, "unexpected character"},
    };
    ocr_ctx ctx;
    ocr_json_tok toks[16];
    int i, n;
    OCR_CHECK_OK(&ctx, ocr_ctx_init(&ctx, 1, 1));
    for (i = 0; i < (int)(sizeof bad / sizeof bad[0]); i++) {
        size_t len = bad[i].len ? bad[i].len : strlen(bad[i].doc);
        int rc = parse(&ctx, bad[i].doc, len, toks, 16, &n);
        OCR_CHECK_MSG(rc == OCR_EFORMAT && strstr(ocr_ctx_last_error(&ctx), bad[i].why) &&
                      strstr(ocr_ctx_last_error(&ctx), "ocr_json_parse"),
                      "case %d: rc %d, message \"%s\", expected \"%s\"", i, rc, ocr_ctx_last_error(&ctx), bad[i].why);
        OCR_CHECK(n == 0);
    }
    /* more values than tokens */
    EXPECT_ERR(&ctx, parse(&ctx, "[1,2,3]", 7, toks, 3, &n), OCR_EFORMAT, "too many JSON values");
    OCR_CHECK_OK(&ctx, parse(&ctx, "[1,2,3]", 7, toks, 4, &n));
    EXPECT_ERR(&ctx, parse(&ctx, "1", 1, toks, 0, &n), OCR_EFORMAT, "too many JSON values");
    ocr_ctx_free(&ctx);
}

/* Escapes the parser accepts but ocr_json_string must refuse: lone surrogates and U+0000. */
static void test_json_string_refusals(void) {
    static const char *const docs[] = {"\"\\ud800\"", "\"\\udc00\"", "\"a\\ud800\\u0041\"", "\"\\ud800\\ud800\"",
                                       "\"\\u0000\"", "\"x\\u0000y\"", "\"\\ude00\\ud83d\""};
    ocr_ctx ctx;
    ocr_json_tok toks[4];
    char out[64];
    int i, n;
    OCR_CHECK_OK(&ctx, ocr_ctx_init(&ctx, 1, 1));
    for (i = 0; i < (int)(sizeof docs / sizeof docs[0]); i++) {
        OCR_CHECK_OK(&ctx, parse(&ctx, docs[i], strlen(docs[i]), toks, 4, &n));
        OCR_CHECK_MSG(!ocr_json_string(docs[i], &toks[0], out, sizeof out), "%s was unescaped", docs[i]);
    }
    OCR_CHECK_OK(&ctx, parse(&ctx, "\"\\uD83D\\uDE00\"", 14, toks, 4, &n)); /* upper-case hex */
    OCR_CHECK(ocr_json_string("\"\\uD83D\\uDE00\"", &toks[0], out, sizeof out) && strcmp(out, "\xf0\x9f\x98\x80") == 0);
    OCR_CHECK(!ocr_json_string("\"\\uD83D\\uDE00\"", &toks[0], out, 0));
    ocr_ctx_free(&ctx);
}

static void test_json_quote(void) {
    char buf[128], small[8], out[128];
    ocr_ctx ctx;
    ocr_json_tok toks[4];
    const char *s = "a\"b\\c\n\t\x01\x1f/\xc3\xa9";
    size_t need;
    int n;
    OCR_CHECK_OK(&ctx, ocr_ctx_init(&ctx, 1, 1));
    strcpy(buf, "x=");
    need = ocr_json_quote(buf, sizeof buf, s);
    /* short escapes where JSON has them (as serde_json and Python write), \u00XX for the other controls */
    OCR_CHECK_MSG(strcmp(buf, "x=\"a\\\"b\\\\c\\n\\t\\u0001\\u001f/\xc3\xa9\"") == 0, "quoted: %s", buf);
    OCR_CHECK(need == strlen(buf) + 1);
    OCR_CHECK_OK(&ctx, parse(&ctx, buf + 2, strlen(buf + 2), toks, 4, &n));
    OCR_CHECK(ocr_json_string(buf + 2, &toks[0], out, sizeof out) && strcmp(out, s) == 0);
    small[0] = 0;
    OCR_CHECK(ocr_json_quote(small, sizeof small, "abcdefghij") == 13);
    OCR_CHECK(strcmp(small, "\"abcdef") == 0);
    ocr_ctx_free(&ctx);
}

int main(int argc, char **argv) {
    ocr_test_init(argc, argv);
    OCR_TEST_RUN(test_ctx_init_free);
    OCR_TEST_RUN(test_debug_env);
    OCR_TEST_RUN(test_aligned_alloc_large);
    OCR_TEST_RUN(test_parallel_for_cover);
    OCR_TEST_RUN(test_parallel_for_many_jobs);
    OCR_TEST_RUN(test_parallel_for_dynamic);
    OCR_TEST_RUN(test_parallel_for_cpus);
    OCR_TEST_RUN(test_scratch);
    OCR_TEST_RUN(test_sizes_and_names);
    OCR_TEST_RUN(test_errors_and_log);
    OCR_TEST_RUN(test_tensor_alloc);
    OCR_TEST_RUN(test_shape_limits);
    OCR_TEST_RUN(test_views_slice_reshape);
    OCR_TEST_RUN(test_check_copy_large);
    OCR_TEST_RUN(test_fill_copy_dtypes);
    OCR_TEST_RUN(test_fill_random);
    OCR_TEST_RUN(test_check_helpers);
    OCR_TEST_RUN(test_rng_streams);
    OCR_TEST_RUN(test_rng_uniform_normal);
    OCR_TEST_RUN(test_rng_below);
    OCR_TEST_RUN(test_half_fixture);
    OCR_TEST_RUN(test_json_valid);
    OCR_TEST_RUN(test_json_depth);
    OCR_TEST_RUN(test_json_invalid);
    OCR_TEST_RUN(test_json_string_refusals);
    OCR_TEST_RUN(test_json_quote);
    return ocr_test_finish();
}
