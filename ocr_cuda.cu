/* ocr_cuda.cu - the CUDA backend of ocr-c: every kernel, cuBLAS/cuDNN glue and the extern "C" entry points.
   v0.1  MIT license

   Build (real GPU): compile this file with nvcc and the program's C file with -DOCR_CUDA, link both:
       nvcc -O2 -std=c++14 -DOCR_CUDNN -gencode arch=compute_80,code=sm_80 -gencode arch=compute_90,code=sm_90 \
            -gencode arch=compute_90,code=compute_90 -I. -c ocr_cuda.cu -o ocr_cuda.o
       gcc -std=c99 -O2 -DOCR_CUDA -I. -c train_dbnet.c && g++ train_dbnet.o ocr_cuda.o -L/usr/local/cuda/lib64 \
            -lcudnn -lcublas -lcudart -lm -lpthread
   Build (emulation, no GPU): g++ -std=c++11 -x c++ -DOCR_CUDA_EMULATE -I. -c ocr_cuda.cu (then link as above
   without the CUDA libraries). Each CUDA thread of a block is an OS thread; see the emulator section.

   Usage: ocr_cuda_init(&ctx, 0) makes ctx->device OCR_DEVICE_CUDA; tensors allocated with OCR_DEVICE_CUDA live in
   device memory, ocr_tensor_copy moves data between host and device, and every op of ocr_nn.h and ocr_loss.h
   dispatches here when ctx->device is CUDA. Everything a kernel needs is validated by the C headers first.

   Options:
       OCR_CUDNN                link cuDNN, for convolutions through it when asked (below)
       OCR_CUDA_EMULATE         build for the CPU emulator instead of nvcc
   Environment / context:
       OCR_CUDA_SYNC_DEBUG=1 or ctx->debug_flags |= OCR_DEBUG_CUDA_SYNC: synchronise after every launch and name
                                the kernel that failed (the tool for "an illegal memory access somewhere earlier")
       OCR_CUDA_CUDNN=1 or ocr_cuda_set_cudnn(ctx, 1): convolutions through cuDNN instead of the file's own im2col/col2im
                                kernels and GEMM (the default: on an H200 they trained DBNet 2.8x and the recognizer 2.4x
                                faster than cuDNN's legacy API did; docs/CUDA.md)
       OCR_CUDA_NO_CUBLAS=1 or ocr_cuda_set_cublas(ctx, 0): GEMM through the own kernel instead of cuBLAS
       ctx->amp = OCR_AMP_BF16 / OCR_AMP_F16: GEMM and convolution inputs rounded to that type, fp32 accumulation
                                (cublasGemmEx and cuDNN with tensor-core math; see "mixed precision" among the kernels)
   Launches go through OCR__LAUNCH only, never a raw triple-chevron, so every launch is checked. */

#if !defined(_GNU_SOURCE) && !defined(_POSIX_C_SOURCE)
#define _POSIX_C_SOURCE 200809L
#endif
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <stdint.h>
#include <math.h>
#include <float.h>

#ifndef OCR_CUDA
#define OCR_CUDA
#endif
#include "ocr_tensor.h"
#include "ocr_nn.h"
#include "ocr_loss.h"

/* ================================================================================================== emulator */
#ifdef OCR_CUDA_EMULATE
/* Semantics, not speed: the blocks of a launch run two at a time (so TSan can see races between blocks), and the
   threads of a block are OS threads. __syncthreads() is a barrier that must be reached, at the same place, by
   every thread of the block: a thread that exits or waits elsewhere is reported as a divergent barrier instead of
   hanging. __shared__ memory is one allocation per declaration and block, filled with 0xff bytes (NaN) so a read
   before any write shows. Warp shuffles and votes exchange values among the lanes named in their mask only, as on
   the device, so divergent code behaves as there. Atomics are real atomics. Device memory is host memory. */
#include <pthread.h>
#include <errno.h>
#include <time.h>
#include <unistd.h>
#include <semaphore.h>
#include <stdint.h>

struct dim3 {
    unsigned x, y, z;
    dim3(unsigned a = 1, unsigned b = 1, unsigned c = 1) : x(a), y(b), z(c) {}
};
static thread_local dim3 threadIdx, blockIdx, blockDim, gridDim;
static const int warpSize = 32;
#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __launch_bounds__(n)
#define OCR__EMU_STALL_SECONDS 60
#define OCR__EMU_MAX_SHARED 16

enum { OCR__EMU_RUNNING, OCR__EMU_AT_BARRIER, OCR__EMU_IN_WARP_OP, OCR__EMU_EXITED };

/* One warp-level collective in flight: the lanes of mask exchange 8-byte values and predicates. */
struct ocr__emu_coll {
    int warp;
    unsigned mask, arrived;
    int complete, readers;
    unsigned char value[32][8];
    int pred[32];
    ocr__emu_coll *next;
};

struct ocr__emu_launch;

/* The block a group of lane threads is running. Everything below is guarded by mu. */
struct ocr__emu_block {
    pthread_mutex_t mu;
    pthread_cond_t cv;               /* __syncthreads and the end of the block */
    pthread_cond_t warp_cv[32];      /* each warp's collectives: a completed shuffle wakes its own warp, not 1024 threads */
    ocr__emu_launch *launch;
    int n_threads;
    int *state;                      /* OCR__EMU_* per thread */
    int arrived, exited, done;       /* at the current __syncthreads, exited the kernel, at the end of the block */
    unsigned long generation, block_generation;
    const char *site_file;
    int site_line;
    int failed;                      /* this block saw an error: every waiter unwinds */
    void *shared[OCR__EMU_MAX_SHARED];  /* __shared__ declarations in the order the threads reach them (atomic) */
    size_t shared_bytes[OCR__EMU_MAX_SHARED];
    ocr__emu_coll *colls;
};

struct ocr__emu_launch {
    const char *kernel;
    dim3 grid, block;
    long n_blocks;
    int n_threads, n_groups;
    void (*fn)(void *);
    void *arg;
    pthread_mutex_t mu;              /* guards message */
    int failed;
    char message[900];
    ocr__emu_block groups[2];
};

struct ocr__emu_lane { ocr__emu_launch *launch; int group, tid; };

/* Thrown inside a kernel to unwind a thread once its block has failed. */
struct ocr__emu_abort {};

static thread_local ocr__emu_block *ocr__emu_cur;
static thread_local int ocr__emu_tid, ocr__emu_shared_seen;
static thread_local long ocr__emu_block_index;

static void ocr__emu_fail(ocr__emu_launch *L, const char *fmt, ...) OCR__PRINTF(2, 3);
static void ocr__emu_fail(ocr__emu_launch *L, const char *fmt, ...) {
    va_list ap;
    pthread_mutex_lock(&L->mu);
    if (!L->failed) {
        va_start(ap, fmt);
        vsnprintf(L->message, sizeof L->message, fmt, ap);
        va_end(ap);
        __atomic_store_n(&L->failed, 1, __ATOMIC_RELEASE);
    }
    pthread_mutex_unlock(&L->mu);
}

/* Marks the block failed (mu held) and wakes every waiter, at a barrier or in a warp operation. */
static void ocr__emu_wake_failed(ocr__emu_block *B) {
    int w;
    B->failed = 1;
    pthread_cond_broadcast(&B->cv);
    for (w = 0; w < 32; w++) pthread_cond_broadcast(&B->warp_cv[w]);
}

/* Marks the block failed (mu held), wakes every waiter and unwinds the calling thread. */
static void ocr__emu_block_fail(ocr__emu_block *B) {
    ocr__emu_wake_failed(B);
    pthread_mutex_unlock(&B->mu);
    throw ocr__emu_abort();
}

static void ocr__emu_thread_str(const ocr__emu_block *B, int tid, char *buf, size_t cap) {
    unsigned bx = B->launch->block.x, by = B->launch->block.y;
    snprintf(buf, cap, "thread (%u,%u,%u) of block %ld", (unsigned)tid % bx, (unsigned)tid / bx % by, (unsigned)tid / (bx * by),
             ocr__emu_block_index);
}

/* Waits on one of the block's conditions; a wait that lasts OCR__EMU_STALL_SECONDS is a deadlock the checks missed. */
static void ocr__emu_wait(ocr__emu_block *B, pthread_cond_t *cv, const char *what) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    ts.tv_sec += OCR__EMU_STALL_SECONDS;
    if (pthread_cond_timedwait(cv, &B->mu, &ts) == ETIMEDOUT) {
        char who[96];
        ocr__emu_thread_str(B, ocr__emu_tid, who, sizeof who);
        ocr__emu_fail(B->launch, "kernel '%s': %s waited %d s in %s: deadlock", B->launch->kernel, who, OCR__EMU_STALL_SECONDS, what);
        ocr__emu_block_fail(B);
    }
}

/* A thread leaving the warp collectives it belongs to (exit or barrier) while lanes of its warp wait for it. */
static void ocr__emu_check_colls(ocr__emu_block *B, const char *leaving_for) {
    ocr__emu_coll *c;
    int tid = ocr__emu_tid, lane = tid % 32;
    for (c = B->colls; c; c = c->next)
        if (!c->complete && c->warp == tid / 32 && (c->mask >> lane & 1u) && !(c->arrived >> lane & 1u)) {
            char who[96];
            ocr__emu_thread_str(B, tid, who, sizeof who);
            ocr__emu_fail(B->launch, "kernel '%s': divergent warp operation: %s %s while lanes 0x%08x of its warp wait for it in a "
                          "warp shuffle/vote with mask 0x%08x", B->launch->kernel, who, leaving_for, c->arrived, c->mask);
            ocr__emu_block_fail(B);
        }
}

static void ocr__emu_syncthreads(const char *file, int line) {
    ocr__emu_block *B = ocr__emu_cur;
    char who[96];
    unsigned long gen;
    pthread_mutex_lock(&B->mu);
    if (B->failed) { pthread_mutex_unlock(&B->mu); throw ocr__emu_abort(); }
    if (B->exited || (B->arrived && (B->site_line != line || strcmp(B->site_file, file) != 0)))
        ocr__emu_thread_str(B, ocr__emu_tid, who, sizeof who); /* only for the report: formatting is costly here */
    if (B->exited) {
        ocr__emu_fail(B->launch, "kernel '%s': divergent __syncthreads at %s:%d: %s waits there but %d thread(s) of the block "
                      "already exited the kernel", B->launch->kernel, file, line, who, B->exited);
        ocr__emu_block_fail(B);
    }
    if (B->arrived && (B->site_line != line || strcmp(B->site_file, file) != 0)) {
        ocr__emu_fail(B->launch, "kernel '%s': divergent __syncthreads: %s waits at %s:%d while %d thread(s) wait at %s:%d",
                      B->launch->kernel, who, file, line, B->arrived, B->site_file, B->site_line);
        ocr__emu_block_fail(B);
    }
    ocr__emu_check_colls(B, "reached __syncthreads");
    if (B->arrived == 0) { B->site_file = file; B->site_line = line; }
    gen = B->generation;
    if (++B->arrived == B->n_threads) {
        int t;
        /* released now, not when each waiter gets scheduled: a warp operation checks these states */
        for (t = 0; t < B->n_threads; t++) if (B->state[t] == OCR__EMU_AT_BARRIER) B->state[t] = OCR__EMU_RUNNING;
        B->arrived = 0;
        B->generation++;
        pthread_cond_broadcast(&B->cv);
    } else {
        B->state[ocr__emu_tid] = OCR__EMU_AT_BARRIER;
        while (B->generation == gen && !B->failed) ocr__emu_wait(B, &B->cv, "__syncthreads");
        if (B->failed) { pthread_mutex_unlock(&B->mu); throw ocr__emu_abort(); }
    }
    pthread_mutex_unlock(&B->mu);
}
#define __syncthreads() ocr__emu_syncthreads(__FILE__, __LINE__)

/* The k-th __shared__ declaration a thread reaches in this block is the k-th allocation of the block. Found
   without the block's mutex once published (acquire/release on the slot), so the lookup adds no ordering between
   the threads beyond the allocation itself: ThreadSanitizer still sees a missing __syncthreads as a race. */
static void *ocr__emu_shared(size_t bytes) {
    ocr__emu_block *B = ocr__emu_cur;
    int k = ocr__emu_shared_seen++;
    void *p;
    if (k >= OCR__EMU_MAX_SHARED) {
        pthread_mutex_lock(&B->mu);
        ocr__emu_fail(B->launch, "kernel '%s': more than %d __shared__ declarations", B->launch->kernel, OCR__EMU_MAX_SHARED);
        ocr__emu_block_fail(B);
    }
    p = __atomic_load_n(&B->shared[k], __ATOMIC_ACQUIRE);
    if (!p) {
        pthread_mutex_lock(&B->mu);
        p = __atomic_load_n(&B->shared[k], __ATOMIC_RELAXED);
        if (!p) {
            if (!(p = malloc(bytes ? bytes : 1))) {
                ocr__emu_fail(B->launch, "kernel '%s': out of memory for %zu bytes of __shared__", B->launch->kernel, bytes);
                ocr__emu_block_fail(B);
            }
            memset(p, 0xff, bytes);
            B->shared_bytes[k] = bytes;
            __atomic_store_n(&B->shared[k], p, __ATOMIC_RELEASE);
        }
        pthread_mutex_unlock(&B->mu);
    }
    if (B->shared_bytes[k] != bytes) {
        pthread_mutex_lock(&B->mu);
        ocr__emu_fail(B->launch, "kernel '%s': threads disagree on the size of __shared__ declaration %d (%zu vs %zu bytes)",
                      B->launch->kernel, k, B->shared_bytes[k], bytes);
        ocr__emu_block_fail(B);
    }
    return p;
}
#define OCR__SHARED(type, name, count) type *name = (type *)ocr__emu_shared(sizeof(type) * (count))

/* One warp collective: the calling lane contributes (value, pred) and, once every lane of mask has, reads the
   value of lane src (or its own when src < 0) and the predicates of all. */
static void ocr__emu_warp_op(unsigned mask, const void *value, size_t size, int pred, int src, void *out, unsigned *ballot) {
    ocr__emu_block *B = ocr__emu_cur;
    int tid = ocr__emu_tid, lane = tid % 32, warp = tid / 32, l;
    ocr__emu_coll *c;
    char who[96];
    pthread_mutex_lock(&B->mu);
    if (B->failed) { pthread_mutex_unlock(&B->mu); throw ocr__emu_abort(); }
    who[0] = 0;
    if (!(mask >> lane & 1u)) {
        ocr__emu_thread_str(B, tid, who, sizeof who);
        ocr__emu_fail(B->launch, "kernel '%s': %s calls a warp shuffle/vote with mask 0x%08x that does not name its own lane %d",
                      B->launch->kernel, who, mask, lane);
        ocr__emu_block_fail(B);
    }
    for (l = 0; l < 32; l++) {
        int t = warp * 32 + l;
        if (!(mask >> l & 1u)) continue;
        if (t >= B->n_threads || B->state[t] == OCR__EMU_EXITED || B->state[t] == OCR__EMU_AT_BARRIER) {
            ocr__emu_thread_str(B, tid, who, sizeof who);
            ocr__emu_fail(B->launch, "kernel '%s': divergent warp operation: %s waits for lane %d (mask 0x%08x), which %s",
                          B->launch->kernel, who, l, mask, t >= B->n_threads ? "does not exist in this block"
                          : B->state[t] == OCR__EMU_EXITED ? "has exited" : "waits at __syncthreads");
            ocr__emu_block_fail(B);
        }
    }
    if (src >= 0 && !(mask >> (src % 32) & 1u)) {
        ocr__emu_thread_str(B, tid, who, sizeof who);
        ocr__emu_fail(B->launch, "kernel '%s': %s reads lane %d, which is not in the shuffle mask 0x%08x (undefined on the device)",
                      B->launch->kernel, who, src, mask);
        ocr__emu_block_fail(B);
    }
    for (c = B->colls; c; c = c->next)
        if (!c->complete && c->warp == warp && c->mask == mask && !(c->arrived >> lane & 1u)) break;
    if (!c) {
        c = (ocr__emu_coll *)calloc(1, sizeof *c);
        if (!c) { ocr__emu_fail(B->launch, "kernel '%s': out of memory", B->launch->kernel); ocr__emu_block_fail(B); }
        c->warp = warp;
        c->mask = mask;
        c->next = B->colls;
        B->colls = c;
    }
    memcpy(c->value[lane], value, size);
    c->pred[lane] = pred != 0;
    c->arrived |= 1u << lane;
    if (c->arrived == mask) {
        for (l = 0; l < 32; l++) if (mask >> l & 1u) B->state[warp * 32 + l] = OCR__EMU_RUNNING;
        c->complete = 1;
        c->readers = __builtin_popcount(mask);
        pthread_cond_broadcast(&B->warp_cv[warp]);
    } else {
        B->state[tid] = OCR__EMU_IN_WARP_OP;
        while (!c->complete && !B->failed) ocr__emu_wait(B, &B->warp_cv[warp], "a warp shuffle/vote");
        if (B->failed) { pthread_mutex_unlock(&B->mu); throw ocr__emu_abort(); }
    }
    memcpy(out, c->value[src >= 0 ? src % 32 : lane], size);
    if (ballot) {
        *ballot = 0;
        for (l = 0; l < 32; l++) if ((mask >> l & 1u) && c->pred[l]) *ballot |= 1u << l;
    }
    if (--c->readers == 0) {
        ocr__emu_coll **pp = &B->colls;
        while (*pp != c) pp = &(*pp)->next;
        *pp = c->next;
        free(c);
    }
    pthread_mutex_unlock(&B->mu);
}

template <typename T> static inline T ocr__emu_shfl(unsigned mask, T v, int src_lane) {
    T out;
    ocr__emu_warp_op(mask, &v, sizeof v, 0, src_lane, &out, NULL);
    return out;
}
/* Source lanes as the PTX shfl modes compute them; a source outside the lane's width segment yields its own value. */
template <typename T> static inline T __shfl_sync(unsigned mask, T v, int src, int width = 32) {
    int lane = ocr__emu_tid % 32;
    return ocr__emu_shfl(mask, v, (lane / width) * width + (src % width + width) % width);
}
template <typename T> static inline T __shfl_down_sync(unsigned mask, T v, unsigned delta, int width = 32) {
    int lane = ocr__emu_tid % 32, s = lane + (int)delta;
    return ocr__emu_shfl(mask, v, s / width == lane / width && s < 32 ? s : lane);
}
template <typename T> static inline T __shfl_up_sync(unsigned mask, T v, unsigned delta, int width = 32) {
    int lane = ocr__emu_tid % 32, s = lane - (int)delta;
    return ocr__emu_shfl(mask, v, s >= 0 && s / width == lane / width ? s : lane);
}
template <typename T> static inline T __shfl_xor_sync(unsigned mask, T v, int lane_mask, int width = 32) {
    int lane = ocr__emu_tid % 32, s = lane ^ lane_mask;
    return ocr__emu_shfl(mask, v, s / width <= lane / width && s < 32 ? s : lane);
}
static inline unsigned __ballot_sync(unsigned mask, int pred) {
    unsigned b, dummy = 0, out;
    ocr__emu_warp_op(mask, &dummy, sizeof dummy, pred, -1, &out, &b);
    return b;
}
static inline int __any_sync(unsigned mask, int pred) { return __ballot_sync(mask, pred) != 0; }
static inline int __all_sync(unsigned mask, int pred) { return __ballot_sync(mask, pred) == mask; }
static inline void __syncwarp(unsigned mask = 0xffffffffu) { (void)__ballot_sync(mask, 1); }

/* Atomics: the __atomic builtins, which ThreadSanitizer understands; floats through compare-and-swap. */
static inline float atomicAdd(float *a, float v) {
    uint32_t *p = (uint32_t *)(void *)a, old = __atomic_load_n(p, __ATOMIC_RELAXED), nw;
    float f;
    do { memcpy(&f, &old, 4); f += v; memcpy(&nw, &f, 4); } while (!__atomic_compare_exchange_n(p, &old, nw, 0, __ATOMIC_SEQ_CST, __ATOMIC_RELAXED));
    memcpy(&f, &old, 4);
    return f;
}
static inline double atomicAdd(double *a, double v) {
    uint64_t *p = (uint64_t *)(void *)a, old = __atomic_load_n(p, __ATOMIC_RELAXED), nw;
    double f;
    do { memcpy(&f, &old, 8); f += v; memcpy(&nw, &f, 8); } while (!__atomic_compare_exchange_n(p, &old, nw, 0, __ATOMIC_SEQ_CST, __ATOMIC_RELAXED));
    memcpy(&f, &old, 8);
    return f;
}
static inline int atomicAdd(int *a, int v) { return __atomic_fetch_add(a, v, __ATOMIC_SEQ_CST); }
static inline unsigned atomicAdd(unsigned *a, unsigned v) { return __atomic_fetch_add(a, v, __ATOMIC_SEQ_CST); }
static inline unsigned long long atomicAdd(unsigned long long *a, unsigned long long v) { return __atomic_fetch_add(a, v, __ATOMIC_SEQ_CST); }
static inline int atomicMax(int *a, int v) {
    int old = __atomic_load_n(a, __ATOMIC_RELAXED);
    while (old < v && !__atomic_compare_exchange_n(a, &old, v, 0, __ATOMIC_SEQ_CST, __ATOMIC_RELAXED)) {}
    return old;
}
static inline unsigned long long atomicMin(unsigned long long *a, unsigned long long v) {
    unsigned long long old = __atomic_load_n(a, __ATOMIC_RELAXED);
    while (old > v && !__atomic_compare_exchange_n(a, &old, v, 0, __ATOMIC_SEQ_CST, __ATOMIC_RELAXED)) {}
    return old;
}
static inline int atomicCAS(int *a, int compare, int v) {
    __atomic_compare_exchange_n(a, &compare, v, 0, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST);
    return compare;
}
static inline unsigned atomicCAS(unsigned *a, unsigned compare, unsigned v) {
    __atomic_compare_exchange_n(a, &compare, v, 0, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST);
    return compare;
}
static inline unsigned __float_as_uint(float f) { unsigned u; memcpy(&u, &f, 4); return u; }
static inline float __uint_as_float(unsigned u) { float f; memcpy(&f, &u, 4); return f; }

/* A thread leaves the kernel: a barrier or warp operation still waiting for it can never complete. */
static void ocr__emu_thread_exit(ocr__emu_block *B, int aborted) {
    pthread_mutex_lock(&B->mu);
    if (!aborted && !B->failed) {
        if (B->arrived) {
            char who[96];
            ocr__emu_thread_str(B, ocr__emu_tid, who, sizeof who);
            ocr__emu_fail(B->launch, "kernel '%s': divergent __syncthreads at %s:%d: %s exited the kernel while %d thread(s) wait there",
                          B->launch->kernel, B->site_file, B->site_line, who, B->arrived);
            ocr__emu_wake_failed(B);
        } else {
            try { ocr__emu_check_colls(B, "exited the kernel"); } catch (ocr__emu_abort &) { pthread_mutex_lock(&B->mu); }
        }
    }
    B->state[ocr__emu_tid] = OCR__EMU_EXITED;
    B->exited++;
    pthread_mutex_unlock(&B->mu);
}

/* All threads of the group meet here after each block; the last one resets the block for the next. */
static void ocr__emu_block_end(ocr__emu_block *B) {
    unsigned long gen;
    int i;
    pthread_mutex_lock(&B->mu);
    gen = B->block_generation;
    if (++B->done == B->n_threads) {
        for (i = 0; i < OCR__EMU_MAX_SHARED; i++) { free(B->shared[i]); B->shared[i] = NULL; }
        while (B->colls) { ocr__emu_coll *c = B->colls; B->colls = c->next; free(c); }
        for (i = 0; i < B->n_threads; i++) B->state[i] = OCR__EMU_RUNNING;
        B->arrived = B->exited = B->done = B->failed = 0;
        B->generation++;
        B->block_generation++;
        pthread_cond_broadcast(&B->cv);
    } else {
        while (B->block_generation == gen) pthread_cond_wait(&B->cv, &B->mu);
    }
    pthread_mutex_unlock(&B->mu);
}

static void *ocr__emu_lane_main(void *argp) {
    ocr__emu_lane *a = (ocr__emu_lane *)argp;
    ocr__emu_launch *L = a->launch;
    ocr__emu_block *B = &L->groups[a->group];
    long b;
    int tid = a->tid;
    ocr__emu_cur = B;
    ocr__emu_tid = tid;
    blockDim = L->block;
    gridDim = L->grid;
    threadIdx = dim3((unsigned)tid % L->block.x, (unsigned)tid / L->block.x % L->block.y, (unsigned)tid / (L->block.x * L->block.y));
    for (b = a->group; b < L->n_blocks; b += L->n_groups) {
        int aborted = 0;
        ocr__emu_block_index = b;
        blockIdx = dim3((unsigned)(b % L->grid.x), (unsigned)(b / L->grid.x % L->grid.y), (unsigned)(b / ((long)L->grid.x * L->grid.y)));
        ocr__emu_shared_seen = 0;
        if (!__atomic_load_n(&L->failed, __ATOMIC_ACQUIRE)) {
            try { L->fn(L->arg); } catch (ocr__emu_abort &) { aborted = 1; }
        }
        ocr__emu_thread_exit(B, aborted);
        ocr__emu_block_end(B);
    }
    return NULL;
}

template <typename F> static void ocr__emu_call(void *f) { (*(F *)f)(); }

/* The lane threads live from the first launch to the end of the process, each asleep on its own semaphore between
   launches: starting and joining a thousand OS threads per launch (or waking them all for a launch of a few) made
   the emulated tests spend most of their time in the OS. One launch at a time has the pool; a forked child starts
   a pool of its own. */
#define OCR__EMU_MAX_LANES 2048 /* two blocks of 1024 threads */
static pthread_mutex_t ocr__emu_launch_mu = PTHREAD_MUTEX_INITIALIZER; /* one launch at a time; guards the pool */
static pthread_mutex_t ocr__emu_pool_mu = PTHREAD_MUTEX_INITIALIZER;   /* with ocr__emu_pool_idle: the launch waits for the last lane */
static pthread_cond_t ocr__emu_pool_idle = PTHREAD_COND_INITIALIZER;
static int ocr__emu_pool_size, ocr__emu_pool_busy;
static pid_t ocr__emu_pool_pid;
static sem_t ocr__emu_pool_wake[OCR__EMU_MAX_LANES];
static ocr__emu_lane *ocr__emu_pool_lane[OCR__EMU_MAX_LANES]; /* what thread i runs when woken */

static void *ocr__emu_pool_main(void *argp) {
    int i = (int)(intptr_t)argp;
    for (;;) {
        while (sem_wait(&ocr__emu_pool_wake[i]) != 0) {}
        ocr__emu_lane_main(ocr__emu_pool_lane[i]);
        /* only the last lane takes the mutex: the others would queue on it for nothing */
        if (__atomic_sub_fetch(&ocr__emu_pool_busy, 1, __ATOMIC_ACQ_REL) == 0) {
            pthread_mutex_lock(&ocr__emu_pool_mu);
            pthread_cond_signal(&ocr__emu_pool_idle);
            pthread_mutex_unlock(&ocr__emu_pool_mu);
        }
    }
    return NULL;
}

/* Grows the pool to n threads (ocr__emu_launch_mu held); returns how many there are. */
static int ocr__emu_pool_grow(int n) {
    pthread_attr_t attr;
    pthread_t thread;
    if (ocr__emu_pool_pid != getpid()) { ocr__emu_pool_pid = getpid(); ocr__emu_pool_size = 0; } /* a fork has no threads */
    if (ocr__emu_pool_size >= n) return ocr__emu_pool_size;
    pthread_attr_init(&attr);
    pthread_attr_setstacksize(&attr, (size_t)1 << 20);
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    while (ocr__emu_pool_size < n) {
        int i = ocr__emu_pool_size;
        if (sem_init(&ocr__emu_pool_wake[i], 0, 0) != 0) break;
        if (pthread_create(&thread, &attr, ocr__emu_pool_main, (void *)(intptr_t)i) != 0) { sem_destroy(&ocr__emu_pool_wake[i]); break; }
        ocr__emu_pool_size++;
    }
    pthread_attr_destroy(&attr);
    return ocr__emu_pool_size;
}

/* Runs f as the body of every thread of the grid; returns 0, or -1 with L->message set. */
static int ocr__emu_run(ocr__emu_launch *L) {
    ocr__emu_lane *lanes;
    int g, t, w, have, n;
    L->n_threads = (int)(L->block.x * L->block.y * L->block.z);
    L->n_blocks = (long)L->grid.x * L->grid.y * L->grid.z;
    L->n_groups = L->n_blocks > 1 ? 2 : 1;
    n = L->n_groups * L->n_threads;
    lanes = (ocr__emu_lane *)calloc((size_t)n, sizeof *lanes);
    for (g = 0; g < L->n_groups; g++) {
        ocr__emu_block *B = &L->groups[g];
        pthread_mutex_init(&B->mu, NULL);
        pthread_cond_init(&B->cv, NULL);
        for (w = 0; w < 32; w++) pthread_cond_init(&B->warp_cv[w], NULL);
        B->launch = L;
        B->n_threads = L->n_threads;
        B->state = (int *)calloc((size_t)L->n_threads, sizeof(int));
        if (!B->state) L->failed = 1;
    }
    if (!lanes || L->failed) {
        snprintf(L->message, sizeof L->message, "kernel '%s': emulator out of memory", L->kernel);
        L->failed = 1;
    } else {
        for (g = 0; g < L->n_groups; g++)
            for (t = 0; t < L->n_threads; t++) {
                ocr__emu_lane *a = &lanes[g * L->n_threads + t];
                a->launch = L; a->group = g; a->tid = t;
            }
        pthread_mutex_lock(&ocr__emu_launch_mu);
        have = ocr__emu_pool_grow(n);
        if (have < n) {
            /* no lane runs: a missing one would hang the others at the first barrier */
            ocr__emu_fail(L, "kernel '%s': the emulator could start only %d of %d threads", L->kernel, have, n);
        } else {
            __atomic_store_n(&ocr__emu_pool_busy, n, __ATOMIC_RELEASE);
            for (t = 0; t < n; t++) { ocr__emu_pool_lane[t] = &lanes[t]; sem_post(&ocr__emu_pool_wake[t]); }
            pthread_mutex_lock(&ocr__emu_pool_mu);
            while (__atomic_load_n(&ocr__emu_pool_busy, __ATOMIC_ACQUIRE) > 0) pthread_cond_wait(&ocr__emu_pool_idle, &ocr__emu_pool_mu);
            pthread_mutex_unlock(&ocr__emu_pool_mu);
        }
        pthread_mutex_unlock(&ocr__emu_launch_mu);
    }
    for (g = 0; g < L->n_groups; g++) {
        pthread_mutex_destroy(&L->groups[g].mu);
        pthread_cond_destroy(&L->groups[g].cv);
        for (w = 0; w < 32; w++) pthread_cond_destroy(&L->groups[g].warp_cv[w]);
        free(L->groups[g].state);
    }
    free(lanes);
    return L->failed ? -1 : 0;
}

template <typename F> static int ocr__emu_launch_fn(char *message, size_t cap, const char *kernel, dim3 grid, dim3 block, F f) {
    ocr__emu_launch *L;
    int rc;
    if (grid.x * grid.y * grid.z == 0 || block.x * block.y * block.z == 0 || block.x * block.y * block.z > 1024) {
        snprintf(message, cap, "kernel '%s': invalid configuration: grid (%u,%u,%u), block (%u,%u,%u)", kernel, grid.x, grid.y, grid.z,
                 block.x, block.y, block.z);
        return -1;
    }
    L = new ocr__emu_launch();
    memset(L->groups, 0, sizeof L->groups);
    pthread_mutex_init(&L->mu, NULL);
    L->kernel = kernel;
    L->grid = grid;
    L->block = block;
    L->fn = ocr__emu_call<F>;
    L->arg = &f;
    L->failed = 0;
    L->message[0] = 0;
    rc = ocr__emu_run(L);
    if (rc) snprintf(message, cap, "%s", L->message);
    pthread_mutex_destroy(&L->mu);
    delete L;
    return rc;
}
#define OCR__BLOCK 64  /* threads per 1-D block: two warps, so cross-warp reductions are exercised */
#define OCR__TILE 8    /* GEMM block: 8x8 threads */
#define OCR__GEMM_KT 256 /* k extent of the GEMM tiles in shared memory: emulated barriers are costly, so few per tile */
#define OCR__MAX_GRID 4
#else /* ============================================================================================= real CUDA */
#include <cuda_runtime.h>
#include <cublas_v2.h>
#ifdef OCR_CUDNN
#include <cudnn.h>
#endif
#define OCR__SHARED(type, name, count) __shared__ type name[count]
#define OCR__BLOCK 256
#define OCR__TILE 16
#define OCR__GEMM_KT 16
#define OCR__MAX_GRID 4096
#endif

/* ================================================================================================== backend state */

#define OCR__DSCRATCH_SLOTS 15
/* HALF0..2: an op's inputs rounded to ctx->amp's type; HALF_OUT: a cuDNN result in that type; SEQ0..2: the LSTM's
   gates or gradients and CTC's tables (their GEMMs use HALF0..1 under mixed precision, so these stay apart) */
enum { OCR__DS_COL = 0, OCR__DS_Z = 1, OCR__DS_KEYS = 2, OCR__DS_PART = 3, OCR__DS_SMALL = 4, OCR__DS_WORKSPACE = 5,
       OCR__DS_FIND = 6, OCR__DS_REDUCED = 7, OCR__DS_HALF0 = 8, OCR__DS_HALF_OUT = 11, OCR__DS_SEQ0 = 12, OCR__DS_SEQ1 = 13,
       OCR__DS_SEQ2 = 14 };

/* cuDNN's algorithm for one convolution (mode, type, geometry), asked once per shape: the heuristic query is slow with
   bf16/fp16 descriptors (on an H200, bf16 training went from 0.7 to 4.2 images/s when each shape asked once) */
typedef struct { int64_t key[18]; int algo; size_t ws_bytes; } ocr__cudnn_choice;

typedef struct {
    int device;
    int use_cudnn, use_cublas;
    char op[640];                            /* the op being run and its tensors, for every error message */
    void *scratch[OCR__DSCRATCH_SLOTS];      /* device scratch that only grows */
    size_t scratch_size[OCR__DSCRATCH_SLOTS];
    int64_t ctc_samples;                     /* samples of the CTC tables in scratch (ocr_cuda_ctc_tables), -1 when none */
#ifndef OCR_CUDA_EMULATE
    cublasHandle_t cublas;
#ifdef OCR_CUDNN
    cudnnHandle_t cudnn;
    ocr__cudnn_choice cudnn_choice[64];
    int n_cudnn_choice;
#endif
#endif
} ocr__cuda_state;

static ocr__cuda_state *ocr__st(ocr_ctx *ctx) { return ctx ? (ocr__cuda_state *)ctx->cuda : NULL; }

static const char *ocr__op_str(ocr_ctx *ctx) {
    ocr__cuda_state *s = ocr__st(ctx);
    return s && s->op[0] ? s->op : "(no op)";
}

/* Records the op and its tensors: every later CUDA error of this call names them. */
static void ocr__op(ocr_ctx *ctx, const char *fn, const ocr_tensor *a, const ocr_tensor *b, const ocr_tensor *c, const ocr_tensor *d) {
    ocr__cuda_state *s = ocr__st(ctx);
    const ocr_tensor *ts[4];
    size_t used;
    int i;
    if (!s) return;
    ts[0] = a; ts[1] = b; ts[2] = c; ts[3] = d;
    used = (size_t)snprintf(s->op, sizeof s->op, "%s", fn);
    for (i = 0; i < 4 && used < sizeof s->op; i++) {
        char desc[200];
        if (!ts[i]) continue;
        used += (size_t)snprintf(s->op + used, sizeof s->op - used, "%s%s", i ? ", " : " with ", ocr_tensor_describe(ts[i], desc, sizeof desc));
    }
}

#ifdef OCR_CUDA_EMULATE
/* The emulator runs launches synchronously: an error is known when the launch returns. */
#define OCR__LAUNCH(ctx, kernel, grid, block, ...)                                                                  \
    do {                                                                                                           \
        char msg_[1000];                                                                                            \
        if (ocr__emu_launch_fn(msg_, sizeof msg_, #kernel, dim3 grid, dim3 block, [=]() { kernel(__VA_ARGS__); }))  \
            return ocr_error(ctx, OCR_ECUDA, "%s: %s (emulated launch)", ocr__op_str(ctx), msg_);                  \
    } while (0)
#else
/* Every CUDA runtime call, checked: the message names the call, the op and its tensors. */
static int ocr__cuda_check(ocr_ctx *ctx, cudaError_t err, const char *call, int line) {
    if (err == cudaSuccess) return OCR_OK;
    return ocr_error(ctx, OCR_ECUDA, "%s: %s failed: %s (%s) at ocr_cuda.cu:%d", ocr__op_str(ctx), call, cudaGetErrorString(err),
                     cudaGetErrorName(err), line);
}
#define OCR__CU(ctx, call) ocr__cuda_check(ctx, (call), #call, __LINE__)

static int ocr__sync_debug(ocr_ctx *ctx) {
    const char *e;
    if (ctx && (ctx->debug_flags & OCR_DEBUG_CUDA_SYNC)) return 1;
    e = getenv("OCR_CUDA_SYNC_DEBUG");
    return e && e[0] && strcmp(e, "0") != 0;
}

static int ocr__launched(ocr_ctx *ctx, const char *kernel) {
    cudaError_t err = cudaGetLastError();
    if (err != cudaSuccess)
        return ocr_error(ctx, OCR_ECUDA, "%s: launch of kernel '%s' failed: %s (%s)", ocr__op_str(ctx), kernel, cudaGetErrorString(err),
                         cudaGetErrorName(err));
    if (ocr__sync_debug(ctx) && (err = cudaDeviceSynchronize()) != cudaSuccess)
        return ocr_error(ctx, OCR_ECUDA, "%s: kernel '%s' failed: %s (%s) (sync-debug: this kernel, not an earlier one)",
                         ocr__op_str(ctx), kernel, cudaGetErrorString(err), cudaGetErrorName(err));
    return OCR_OK;
}
#define OCR__LAUNCH(ctx, kernel, grid, block, ...)                                                                  \
    do {                                                                                                           \
        kernel<<<dim3 grid, dim3 block>>>(__VA_ARGS__);                                                            \
        { int rc_ = ocr__launched(ctx, #kernel); if (rc_) return rc_; }                                           \
    } while (0)
#endif

/* ---- device memory: the only places that allocate, free or copy it ---- */

static int ocr__dmalloc(ocr_ctx *ctx, void **p, size_t bytes, const char *what) {
    *p = NULL;
#ifdef OCR_CUDA_EMULATE
    *p = malloc(bytes ? bytes : 1);
    if (!*p) return ocr_error(ctx, OCR_ENOMEM, "%s: cannot allocate %zu bytes of device memory for %s", ocr__op_str(ctx), bytes, what);
    return OCR_OK;
#else
    {
        cudaError_t err = cudaMalloc(p, bytes ? bytes : 1);
        if (err != cudaSuccess) {
            *p = NULL;
            (void)cudaGetLastError(); /* an allocation failure is not sticky: clear it */
            return ocr_error(ctx, err == cudaErrorMemoryAllocation ? OCR_ENOMEM : OCR_ECUDA,
                             "%s: cudaMalloc of %zu bytes for %s failed: %s (%s)", ocr__op_str(ctx), bytes, what, cudaGetErrorString(err),
                             cudaGetErrorName(err));
        }
        return OCR_OK;
    }
#endif
}

static void ocr__dfree(void *p) {
#ifdef OCR_CUDA_EMULATE
    free(p);
#else
    if (p) (void)cudaFree(p);
#endif
}

enum { OCR__H2D, OCR__D2H, OCR__D2D, OCR__H2H };

static int ocr__dcopy(ocr_ctx *ctx, void *dst, const void *src, size_t bytes, int kind) {
    if (!bytes) return OCR_OK;
#ifdef OCR_CUDA_EMULATE
    (void)kind;
    memmove(dst, src, bytes);
    (void)ctx;
    return OCR_OK;
#else
    return OCR__CU(ctx, cudaMemcpy(dst, src, bytes, kind == OCR__H2D ? cudaMemcpyHostToDevice : kind == OCR__D2H ? cudaMemcpyDeviceToHost
                                                   : kind == OCR__D2D ? cudaMemcpyDeviceToDevice : cudaMemcpyHostToHost));
#endif
}

static int ocr__dzero(ocr_ctx *ctx, void *p, size_t bytes) {
    if (!bytes) return OCR_OK;
#ifdef OCR_CUDA_EMULATE
    (void)ctx;
    memset(p, 0, bytes);
    return OCR_OK;
#else
    return OCR__CU(ctx, cudaMemset(p, 0, bytes));
#endif
}

static void *ocr__dscratch(ocr_ctx *ctx, int slot, size_t bytes) {
    ocr__cuda_state *s = ocr__st(ctx);
    void *p;
    if (s->scratch_size[slot] >= bytes && s->scratch[slot]) return s->scratch[slot];
    if (bytes < s->scratch_size[slot] + s->scratch_size[slot] / 2) bytes = s->scratch_size[slot] + s->scratch_size[slot] / 2;
    ocr__dfree(s->scratch[slot]);
    s->scratch[slot] = NULL;
    s->scratch_size[slot] = 0;
    if (ocr__dmalloc(ctx, &p, bytes, "device scratch")) return NULL;
    s->scratch[slot] = p;
    s->scratch_size[slot] = bytes;
    return p;
}

/* Blocks for n items in a grid-stride loop. */
static unsigned ocr__grid(int64_t n) {
    int64_t g = (n + OCR__BLOCK - 1) / OCR__BLOCK;
    return (unsigned)(g < 1 ? 1 : g > OCR__MAX_GRID ? OCR__MAX_GRID : g);
}

#define OCR__FOR_EACH(i, n) for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < (n); i += (int64_t)gridDim.x * blockDim.x)

/* ================================================================================================== kernels */

/* Sum of v over the block, returned to every thread. blockDim.x is a multiple of 32. */
static __device__ double ocr__block_sum(double v) {
    OCR__SHARED(double, part, 33);
    int lane = (int)(threadIdx.x & 31u), warp = (int)(threadIdx.x >> 5), n_warps = (int)(blockDim.x >> 5), o;
    for (o = 16; o > 0; o >>= 1) v += __shfl_down_sync(0xffffffffu, v, (unsigned)o);
    if (lane == 0) part[warp] = v;
    __syncthreads();
    if (warp == 0) {
        v = lane < n_warps ? part[lane] : 0.0;
        for (o = 16; o > 0; o >>= 1) v += __shfl_down_sync(0xffffffffu, v, (unsigned)o);
        if (lane == 0) part[32] = v;
    }
    __syncthreads();
    v = part[32];
    __syncthreads(); /* part may be reused by the next call */
    return v;
}

/* ---- fills, checks, pointwise ---- */

static __global__ void ocr__k_fill_f32(float *p, int64_t n, float v) { OCR__FOR_EACH(i, n) p[i] = v; }
static __global__ void ocr__k_fill_i32(int32_t *p, int64_t n, int32_t v) { OCR__FOR_EACH(i, n) p[i] = v; }
static __global__ void ocr__k_fill_u8(unsigned char *p, int64_t n, unsigned char v) { OCR__FOR_EACH(i, n) p[i] = v; }

/* *first = smallest index whose value is non-finite (range 0) or outside [lo, hi] (range 1; NaN included) */
static __global__ void ocr__k_find_bad(const float *p, int64_t n, int range, double lo, double hi, unsigned long long *first) {
    OCR__FOR_EACH(i, n) {
        double v = p[i];
        int bad = range ? !(v >= lo && v <= hi) : !isfinite(v);
        if (bad) atomicMin(first, (unsigned long long)i);
    }
}

enum { OCR__CU_PW_RELU, OCR__CU_PW_RELU_BWD, OCR__CU_PW_SIGMOID, OCR__CU_PW_SIGMOID_BWD, OCR__CU_PW_ADD, OCR__CU_PW_ACC,
       OCR__CU_PW_SCALE, OCR__CU_PW_EMA };

static __device__ float ocr__sigmoid(float x) {
    float s = expf(-fabsf(x));
    return x >= 0.0f ? 1.0f / (1.0f + s) : s / (1.0f + s);
}
static __device__ float ocr__dsigmoid(float x) {
    float s = expf(-fabsf(x)), d = 1.0f + s;
    return s / (d * d);
}

/* The same formulas as ocr_nn.h's pointwise ops, element for element. */
static __global__ void ocr__k_pointwise(int op, const float *a, const float *b, float *y, int64_t n, float scale) {
    OCR__FOR_EACH(i, n) {
        switch (op) {
        case OCR__CU_PW_RELU: y[i] = a[i] < 0.0f ? 0.0f : a[i]; break; /* NaN stays NaN, as on the CPU */
        case OCR__CU_PW_RELU_BWD: y[i] += a[i] > 0.0f ? b[i] : 0.0f; break;
        case OCR__CU_PW_SIGMOID: y[i] = ocr__sigmoid(a[i]); break;
        case OCR__CU_PW_SIGMOID_BWD: y[i] += b[i] * a[i] * (1.0f - a[i]); break;
        case OCR__CU_PW_ADD: y[i] = a[i] + b[i]; break;
        case OCR__CU_PW_ACC: y[i] += a[i]; break;
        case OCR__CU_PW_EMA: y[i] = scale * y[i] + (1.0f - scale) * a[i]; break;
        default: y[i] *= scale; break;
        }
    }
}

/* ---- mixed precision (ctx->amp): the inputs of GEMMs and convolutions rounded to bf16 or fp16, held as their 16
   bits. Two distinct types so that kernels templated on their input type (float, ocr__bf16, ocr__f16) tell them
   apart; the real build hands the same bits to cuBLAS and cuDNN as CUDA_R_16BF / CUDA_R_16F. ---- */
struct ocr__bf16 { uint16_t bits; };
struct ocr__f16 { uint16_t bits; };

/* The rounding of ocr_f32_to_bf16 / ocr_f32_to_f16, bit for bit (nearest even; fp16 overflows to Inf and keeps
   subnormals; NaN stays a quiet NaN), so the device reads the very inputs the CPU backend reads. */
static __device__ void ocr__half_store(ocr__bf16 *dst, float f) {
    uint32_t x = __float_as_uint(f);
    if ((x & 0x7fffffffu) > 0x7f800000u) { dst->bits = (uint16_t)((x >> 16) | 0x40u); return; }
    x += 0x7fffu + ((x >> 16) & 1u);
    dst->bits = (uint16_t)(x >> 16);
}

static __device__ void ocr__half_store(ocr__f16 *dst, float f) {
    uint32_t x = __float_as_uint(f), sign = (x >> 16) & 0x8000u, mant = x & 0x7fffffu;
    int32_t exp = (int32_t)((x >> 23) & 0xffu);
    if (exp == 0xff) { dst->bits = (uint16_t)(sign | 0x7c00u | (mant ? 0x200u : 0u)); return; }
    exp = exp - 127 + 15;
    if (exp >= 0x1f) { dst->bits = (uint16_t)(sign | 0x7c00u); return; }
    if (exp <= 0) {
        uint32_t m = mant | 0x800000u, shift, half, rounded, rest;
        if (exp < -10) { dst->bits = (uint16_t)sign; return; }
        shift = (uint32_t)(14 - exp);
        half = 1u << (shift - 1);
        rounded = m >> shift;
        rest = m & ((half << 1) - 1);
        if (rest > half || (rest == half && (rounded & 1u))) rounded++;
        dst->bits = (uint16_t)(sign | rounded);
        return;
    }
    {
        uint32_t h = sign | ((uint32_t)exp << 10) | (mant >> 13), rest = mant & 0x1fffu;
        if (rest > 0x1000u || (rest == 0x1000u && (h & 1u))) h++; /* a carry into the exponent is the right result */
        dst->bits = (uint16_t)h;
    }
}

/* The value a kernel computes with: exact widening to fp32 */
static __device__ __forceinline__ float ocr__f32(float v) { return v; }
static __device__ __forceinline__ float ocr__f32(ocr__bf16 v) { return __uint_as_float((uint32_t)v.bits << 16); }
static __device__ __forceinline__ float ocr__f32(ocr__f16 v) {
    uint32_t sign = (uint32_t)(v.bits & 0x8000u) << 16, exp = (v.bits >> 10) & 0x1fu, mant = v.bits & 0x3ffu;
    if (exp == 0) return __uint_as_float(__float_as_uint((float)mant * (1.0f / 16777216.0f)) | sign); /* subnormal: mant 2^-24 */
    if (exp == 0x1f) return __uint_as_float(sign | 0x7f800000u | (mant << 13));
    return __uint_as_float(sign | ((exp + 112u) << 23) | (mant << 13));
}

template <typename T> static __global__ void ocr__k_to_half(const float *src, T *dst, int64_t n) {
    OCR__FOR_EACH(i, n) ocr__half_store(dst + i, src[i]);
}

/* out (=, or += when accumulate) the widened half values: where cuDNN had to write its result in the half type */
template <typename T> static __global__ void ocr__k_from_half(const T *src, float *out, int64_t n, int accumulate) {
    OCR__FOR_EACH(i, n) out[i] = accumulate ? out[i] + ocr__f32(src[i]) : ocr__f32(src[i]);
}

/* ---- GEMM: row-major C = alpha op(A) op(B) + beta C. A TILE x TILE block computes a GEMM_MN x GEMM_MN tile of C,
   each thread GEMM_R x GEMM_R outputs strided by TILE; the A and B tiles in shared memory span GEMM_KT values of k.
   Every output sums its k in order, as one thread per output would. A and B are fp32, or half values widened
   exactly as they are loaded (the tiles and the sums stay fp32). ---- */
#define OCR__GEMM_R 4
#define OCR__GEMM_MN (OCR__TILE * OCR__GEMM_R)
template <typename T>
static __global__ void ocr__k_gemm(int ta, int tb, int64_t M, int64_t N, int64_t K, float alpha, const T *A, int64_t lda,
                                   const T *B, int64_t ldb, float beta, float *C, int64_t ldc) {
    OCR__SHARED(float, As, OCR__GEMM_MN * OCR__GEMM_KT);   /* As[row][k] */
    OCR__SHARED(float, Bs, OCR__GEMM_KT * OCR__GEMM_MN);   /* Bs[k][col] */
    int tx = (int)threadIdx.x, ty = (int)threadIdx.y, t = ty * OCR__TILE + tx, e, k, i, j;
    int64_t row0 = (int64_t)blockIdx.y * OCR__GEMM_MN, col0 = (int64_t)blockIdx.x * OCR__GEMM_MN, k0;
    float acc[OCR__GEMM_R][OCR__GEMM_R];
    for (i = 0; i < OCR__GEMM_R; i++)
        for (j = 0; j < OCR__GEMM_R; j++) acc[i][j] = 0.0f;
    for (k0 = 0; k0 < K; k0 += OCR__GEMM_KT) {
        /* consecutive threads load consecutive k of A and consecutive columns of B */
        for (e = t; e < OCR__GEMM_MN * OCR__GEMM_KT; e += OCR__TILE * OCR__TILE) {
            int64_t r = row0 + e / OCR__GEMM_KT, ka = k0 + e % OCR__GEMM_KT, kb = k0 + e / OCR__GEMM_MN, c = col0 + e % OCR__GEMM_MN;
            As[e] = r < M && ka < K ? ocr__f32(ta ? A[ka * lda + r] : A[r * lda + ka]) : 0.0f;
            Bs[e] = kb < K && c < N ? ocr__f32(tb ? B[c * ldb + kb] : B[kb * ldb + c]) : 0.0f;
        }
        __syncthreads();
        for (k = 0; k < OCR__GEMM_KT; k++)
            for (i = 0; i < OCR__GEMM_R; i++) {
                float a = As[(ty + i * OCR__TILE) * OCR__GEMM_KT + k];
                for (j = 0; j < OCR__GEMM_R; j++) acc[i][j] += a * Bs[k * OCR__GEMM_MN + tx + j * OCR__TILE];
            }
        __syncthreads();
    }
    for (i = 0; i < OCR__GEMM_R; i++)
        for (j = 0; j < OCR__GEMM_R; j++) {
            int64_t r = row0 + ty + i * OCR__TILE, c = col0 + tx + j * OCR__TILE;
            if (r < M && c < N) {
                float *out = C + r * ldc + c;
                *out = beta == 0.0f ? alpha * acc[i][j] : alpha * acc[i][j] + beta * *out; /* beta 0 must not propagate NaN from C */
            }
        }
}

/* ---- convolution lowering, in the conv2d sense (input x [C,H,W] of one image and group, output [K,OH,OW]) ---- */
typedef struct {
    int64_t N, C, H, W, K, OH, OW;
    int kh, kw, sh, sw, ph, pw, dh, dw, groups;
} ocr__cu_conv_geom;

/* col [Cg*kh*kw, OH*OW] from x [Cg, H, W], in x's type (padding is +0 in every type) */
template <typename T> static __global__ void ocr__k_im2col(ocr__cu_conv_geom g, const T *x, T *col, int64_t Cg) {
    int64_t P = g.OH * g.OW;
    OCR__FOR_EACH(i, Cg * g.kh * g.kw * P) {
        int64_t r = i / P, p = i % P, c = r / (g.kh * g.kw), ki = (r / g.kw) % g.kh, kj = r % g.kw;
        int64_t ih = (p / g.OW) * g.sh - g.ph + ki * g.dh, iw = (p % g.OW) * g.sw - g.pw + kj * g.dw;
        col[i] = ih >= 0 && ih < g.H && iw >= 0 && iw < g.W ? x[(c * g.H + ih) * g.W + iw] : T();
    }
}

/* dx [Cg, H, W] += the columns that read each input pixel: a gather, so no two threads write one value */
static __global__ void ocr__k_col2im(ocr__cu_conv_geom g, const float *col, float *dx, int64_t Cg) {
    int64_t P = g.OH * g.OW;
    OCR__FOR_EACH(i, Cg * g.H * g.W) {
        int64_t c = i / (g.H * g.W), ih = (i / g.W) % g.H, iw = i % g.W;
        float s = 0.0f;
        int ki, kj;
        for (ki = 0; ki < g.kh; ki++) {
            int64_t th = ih + g.ph - ki * g.dh, oh;
            if (th < 0 || th % g.sh) continue;
            oh = th / g.sh;
            if (oh >= g.OH) continue;
            for (kj = 0; kj < g.kw; kj++) {
                int64_t tw = iw + g.pw - kj * g.dw, ow;
                if (tw < 0 || tw % g.sw) continue;
                ow = tw / g.sw;
                if (ow >= g.OW) continue;
                s += col[((c * g.kh + ki) * g.kw + kj) * P + oh * g.OW + ow];
            }
        }
        dx[i] += s;
    }
}

static __global__ void ocr__k_bias_add(float *y, const float *b, int64_t C, int64_t P, int64_t n) {
    OCR__FOR_EACH(i, n) y[i] += b[(i / P) % C];
}

/* one block per channel: db[c] += sum over images and pixels of dy */
static __global__ void ocr__k_bias_grad(const float *dy, float *db, int64_t N, int64_t C, int64_t P) {
    int64_t c = blockIdx.x, i;
    double s = 0.0;
    for (i = threadIdx.x; i < N * P; i += blockDim.x) s += dy[((i / P) * C + c) * P + i % P];
    s = ocr__block_sum(s);
    if (threadIdx.x == 0) db[c] += (float)s;
}

/* ---- batch normalisation: one block per channel, the same double-precision statistics as ocr_nn.h ---- */
static __global__ void ocr__k_bn_forward(const float *x, const float *gamma, const float *beta, float *rmean, float *rvar,
                                         float *smean, float *sinv, float *y, int64_t N, int64_t C, int64_t P, int training,
                                         float momentum, float eps) {
    int64_t c = blockIdx.x, count = N * P, i;
    double mean, var;
    float m, inv, scale, shift;
    if (training) {
        double s = 0.0, ss = 0.0;
        for (i = threadIdx.x; i < count; i += blockDim.x) s += x[((i / P) * C + c) * P + i % P];
        mean = ocr__block_sum(s) / (double)count;
        for (i = threadIdx.x; i < count; i += blockDim.x) { double d = x[((i / P) * C + c) * P + i % P] - mean; ss += d * d; }
        ss = ocr__block_sum(ss);
        var = ss / (double)count;
        if (threadIdx.x == 0) {
            rmean[c] = (1.0f - momentum) * rmean[c] + momentum * (float)mean;
            rvar[c] = (1.0f - momentum) * rvar[c] + momentum * (float)(count > 1 ? ss / (double)(count - 1) : var);
        }
    } else {
        mean = rmean[c];
        var = rvar[c];
    }
    m = (float)mean;
    inv = (float)(1.0 / sqrt(var + (double)eps));
    if (threadIdx.x == 0) { smean[c] = m; sinv[c] = inv; }
    scale = inv * (gamma ? gamma[c] : 1.0f);
    shift = (beta ? beta[c] : 0.0f) - m * scale;
    for (i = threadIdx.x; i < count; i += blockDim.x) {
        int64_t k = ((i / P) * C + c) * P + i % P;
        y[k] = x[k] * scale + shift;
    }
}

static __global__ void ocr__k_bn_backward(const float *x, const float *gamma, const float *mean, const float *invstd, const float *dy,
                                          float *dx, float *dgamma, float *dbeta, int64_t N, int64_t C, int64_t P, int training) {
    int64_t c = blockIdx.x, count = N * P, i;
    double sdy = 0.0, sdyx = 0.0;
    float m = mean[c], inv = invstd[c], g = gamma ? gamma[c] : 1.0f, k, a, b;
    for (i = threadIdx.x; i < count; i += blockDim.x) {
        int64_t j = ((i / P) * C + c) * P + i % P;
        sdy += dy[j];
        sdyx += dy[j] * ((x[j] - m) * inv);
    }
    sdy = ocr__block_sum(sdy);
    sdyx = ocr__block_sum(sdyx);
    if (threadIdx.x == 0) {
        if (dgamma) dgamma[c] += (float)sdyx;
        if (dbeta) dbeta[c] += (float)sdy;
    }
    if (!dx) return;
    k = g * inv;
    a = (float)(sdy / (double)count);
    b = (float)(sdyx / (double)count);
    for (i = threadIdx.x; i < count; i += blockDim.x) {
        int64_t j = ((i / P) * C + c) * P + i % P;
        dx[j] += training ? k * (dy[j] - a - (x[j] - m) * inv * b) : k * dy[j];
    }
}

/* ---- pooling, upsampling, concat ---- */
/* square (ocr_nn_maxpool2d_forward) and rectangular (ocr_nn_maxpool2d_rect_forward) windows alike */
static __global__ void ocr__k_maxpool(const float *x, float *y, int32_t *idx, int64_t planes, int64_t H, int64_t W, int64_t OH,
                                      int64_t OW, int kh, int kw, int sh, int sw, int ph, int pw) {
    OCR__FOR_EACH(i, planes * OH * OW) {
        int64_t plane = i / (OH * OW), oh = (i / OW) % OH, ow = i % OW, ih, iw, arg = -1;
        const float *xp = x + plane * H * W;
        float best = -INFINITY;
        for (ih = oh * sh - ph; ih < oh * sh - ph + kh && !(arg >= 0 && isnan(best)); ih++) {
            if (ih < 0 || ih >= H) continue;
            for (iw = ow * sw - pw; iw < ow * sw - pw + kw; iw++) {
                float v;
                if (iw < 0 || iw >= W) continue;
                v = xp[ih * W + iw];
                if (arg < 0 || v > best || isnan(v)) { best = v; arg = ih * W + iw; if (isnan(v)) break; } /* NaN wins */
            }
        }
        y[i] = best;
        if (idx) idx[i] = (int32_t)arg;
    }
}

/* *first = smallest position whose index lies outside [0, HW) */
static __global__ void ocr__k_check_index(const int32_t *idx, int64_t n, int64_t HW, unsigned long long *first) {
    OCR__FOR_EACH(i, n) if (idx[i] < 0 || idx[i] >= HW) atomicMin(first, (unsigned long long)i);
}

/* Windows overlap, so outputs scatter with atomics (the backward has no window geometry to gather with). */
static __global__ void ocr__k_maxpool_bwd(const float *dy, const int32_t *idx, float *dx, int64_t P, int64_t HW, int64_t n) {
    OCR__FOR_EACH(i, n) atomicAdd(&dx[(i / P) * HW + idx[i]], dy[i]);
}

/* ---- the recognizer's sequence ops ---- */
/* log_softmax, one thread per row: the maximum, the sum of exp in double (as the CPU's), then the row */
static __global__ void ocr__k_log_softmax(const float *x, float *y, int64_t rows, int64_t C) {
    OCR__FOR_EACH(r, rows) {
        const float *xr = x + r * C;
        float m = xr[0], lse;
        double s = 0.0;
        int64_t c;
        for (c = 1; c < C; c++) m = xr[c] > m ? xr[c] : m;
        for (c = 0; c < C; c++) s += expf(xr[c] - m);
        lse = m + (float)log(s);
        for (c = 0; c < C; c++) {
            float v = xr[c] - lse;
            y[r * C + c] = v < -FLT_MAX ? -FLT_MAX : v;
        }
    }
}

/* its backward from the output: dx += dy - exp(y) * sum(dy) per row */
static __global__ void ocr__k_log_softmax_bwd(const float *y, const float *dy, float *dx, int64_t rows, int64_t C) {
    OCR__FOR_EACH(r, rows) {
        double s = 0.0;
        float sf;
        int64_t c;
        for (c = 0; c < C; c++) s += dy[r * C + c];
        sf = (float)s;
        for (c = 0; c < C; c++) dx[r * C + c] += dy[r * C + c] - expf(y[r * C + c]) * sf;
    }
}

/* map-to-sequence, one thread per element of the map x [N, C, H, W] and its place in seq [W, N, C*H]: a bijection,
   so the backward accumulates without atomics */
static __global__ void ocr__k_map_to_seq(float *map, float *seq, int64_t N, int64_t CH, int64_t W, int backward) {
    OCR__FOR_EACH(i, N * CH * W) {
        int64_t w = i % W, ch = (i / W) % CH, n = i / (W * CH);
        float *at = seq + (w * N + n) * CH + ch;
        if (backward) map[i] += *at;
        else *at = map[i];
    }
}

/* linear's bias: every row of y [R, K] starts as b (0 without one); the product is then added by the GEMM */
static __global__ void ocr__k_rows_from_bias(float *y, const float *b, int64_t R, int64_t K) {
    OCR__FOR_EACH(i, R * K) y[i] = b ? b[i % K] : 0.0f;
}

/* db[k] += the column sums of dy [R, K], a thread per column, in fp32 and row order as the CPU's */
static __global__ void ocr__k_column_sums(const float *dy, int64_t R, int64_t K, float *db) {
    OCR__FOR_EACH(k, K) {
        float s = db[k];
        int64_t r;
        for (r = 0; r < R; r++) s += dy[r * K + k];
        db[k] = s;
    }
}

/* x [N, rows, W]: column w of sample n zeroed from widths[n] on */
static __global__ void ocr__k_mask_columns(float *x, const int32_t *widths, int64_t N, int64_t rows, int64_t W) {
    OCR__FOR_EACH(i, N * rows * W) if (i % W >= widths[i / (rows * W)]) x[i] = 0.0f;
}

/* One LSTM step's pointwise part, a thread per (sample, hidden unit), ocr_nn.h's formulas: the gate pre-activations
   in sv (this step's rows [N, 5H]) become the activated gates, then the cell c and the output h. A sample whose
   length ends before step t is padding: zero gates, cell and output. */
static __global__ void ocr__k_lstm_step(float *sv, const float *c_prev, const float *b_ih, const float *b_hh, float *y, int64_t ldy,
                                        const int32_t *len, int64_t t, int64_t N, int64_t H) {
    OCR__FOR_EACH(i, N * H) {
        int64_t n = i / H, k = i % H;
        float *a = sv + n * 5 * H, ai = a[k], af = a[H + k], ag = a[2 * H + k], ao = a[3 * H + k], gi, gf, gg, go, c;
        if (len && t >= len[n]) {
            a[k] = a[H + k] = a[2 * H + k] = a[3 * H + k] = a[4 * H + k] = 0.0f;
            y[n * ldy + k] = 0.0f;
            continue;
        }
        if (b_ih) { ai += b_ih[k]; af += b_ih[H + k]; ag += b_ih[2 * H + k]; ao += b_ih[3 * H + k]; }
        if (b_hh) { ai += b_hh[k]; af += b_hh[H + k]; ag += b_hh[2 * H + k]; ao += b_hh[3 * H + k]; }
        gi = ocr__sigmoid(ai); gf = ocr__sigmoid(af); gg = tanhf(ag); go = ocr__sigmoid(ao);
        c = (c_prev ? gf * c_prev[n * 5 * H + 4 * H + k] : 0.0f) + gi * gg;
        a[k] = gi; a[H + k] = gf; a[2 * H + k] = gg; a[3 * H + k] = go; a[4 * H + k] = c;
        y[n * ldy + k] = go * tanhf(c);
    }
}

/* Its backward, a thread per (sample, hidden unit): da (this step's rows [N, 4H]) from dh (the recurrent gradient,
   NULL at the last step) + dy and the cell gradient dc [N, H], carried in place to the previous step */
static __global__ void ocr__k_lstm_step_bwd(const float *sv, const float *c_prev, const float *dy, int64_t ldy, const float *dh, float *dc,
                                            float *da, int64_t N, int64_t H) {
    OCR__FOR_EACH(i, N * H) {
        int64_t n = i / H, k = i % H;
        const float *g = sv + n * 5 * H;
        float gi = g[k], gf = g[H + k], gg = g[2 * H + k], go = g[3 * H + k], tc = tanhf(g[4 * H + k]);
        float dht = (dh ? dh[i] : 0.0f) + dy[n * ldy + k], dct = dc[i] + dht * go * (1.0f - tc * tc);
        float *d = da + n * 4 * H;
        d[k] = dct * gg * gi * (1.0f - gi);
        d[H + k] = c_prev ? dct * c_prev[n * 5 * H + 4 * H + k] * gf * (1.0f - gf) : 0.0f;
        d[2 * H + k] = dct * gi * (1.0f - gg * gg);
        d[3 * H + k] = dht * tc * go * (1.0f - go);
        dc[i] = dct * gf;
    }
}

/* The bias gradients, a thread per column of da [rows, cols]: the column's sum in double in row order, as the CPU's */
static __global__ void ocr__k_lstm_bias_grad(const float *da, int64_t rows, int64_t cols, float *db_ih, float *db_hh) {
    OCR__FOR_EACH(c, cols) {
        double s = 0.0;
        int64_t r;
        for (r = 0; r < rows; r++) s += da[r * cols + c];
        if (db_ih) db_ih[c] += (float)s;
        if (db_hh) db_hh[c] += (float)s;
    }
}

/* ---- CTC, ocr_loss.h's recursion and gradient operation for operation (in double) ---- */
static __device__ double ocr__cu_ctc_lse(double a, double b) {
    double m;
    if (a == -HUGE_VAL) return b;
    if (b == -HUGE_VAL) return a;
    m = a > b ? a : b;
    return m + log1p(exp(-fabs(a - b)));
}
static __device__ int ocr__cu_ctc_label(const int32_t *tgt, int64_t s, int blank) { return s & 1 ? tgt[s / 2] : blank; }

/* A block per sample, its threads over the 2L+1 states; a barrier between frames. meta: each sample's first label in
   targets [N], then its first double in ab [N]; lens: target lengths [N], then input lengths [N]. ab receives alpha
   then beta ([Tn, 2L+1] each), nll the negative log-likelihood (HUGE_VAL when no alignment exists). */
static __global__ void ocr__k_ctc_tables(const float *lp, const int32_t *targets, const int64_t *meta, const int32_t *lens, int64_t N,
                                         int64_t C, int blank, double *ab, double *nll) {
    for (int64_t n = blockIdx.x; n < N; n += gridDim.x) {
        const int32_t *tgt = targets + meta[n];
        int64_t Tn = lens[N + n], L = lens[n], S = 2 * L + 1, need = L, t, s, i;
        double *alpha = ab + meta[N + n], *beta = alpha + Tn * S;
        for (i = 1; i < L; i++) need += tgt[i] == tgt[i - 1];
        if (Tn == 0 || need > Tn) { /* the same for every thread of the block: no barrier is skipped by some only */
            if (threadIdx.x == 0) nll[n] = Tn == 0 && L == 0 ? 0.0 : HUGE_VAL;
            continue;
        }
#define OCR__CU_CTC_LP(t, c) ((double)lp[((t) * N + n) * C + (c)])
        for (s = threadIdx.x; s < S; s += blockDim.x) alpha[s] = s < 2 ? OCR__CU_CTC_LP(0, ocr__cu_ctc_label(tgt, s, blank)) : -HUGE_VAL;
        __syncthreads();
        for (t = 1; t < Tn; t++) {
            for (s = threadIdx.x; s < S; s += blockDim.x) {
                int l = ocr__cu_ctc_label(tgt, s, blank);
                const double *prev = alpha + (t - 1) * S;
                double a = prev[s];
                if (s >= 1) a = ocr__cu_ctc_lse(a, prev[s - 1]);
                if (s >= 2 && l != blank && l != tgt[s / 2 - 1]) a = ocr__cu_ctc_lse(a, prev[s - 2]);
                alpha[t * S + s] = a == -HUGE_VAL ? a : a + OCR__CU_CTC_LP(t, l);
            }
            __syncthreads();
        }
        for (s = threadIdx.x; s < S; s += blockDim.x) beta[(Tn - 1) * S + s] = s >= S - 2 ? 0.0 : -HUGE_VAL;
        __syncthreads();
        for (t = Tn - 2; t >= 0; t--) {
            for (s = threadIdx.x; s < S; s += blockDim.x) {
                int l = ocr__cu_ctc_label(tgt, s, blank), k;
                double b = -HUGE_VAL;
                for (k = 0; k < 3 && s + k < S; k++) {
                    int lk = ocr__cu_ctc_label(tgt, s + k, blank);
                    double nb = beta[(t + 1) * S + s + k];
                    if (k == 2 && (lk == blank || lk == l)) continue;
                    if (nb != -HUGE_VAL) b = ocr__cu_ctc_lse(b, nb + OCR__CU_CTC_LP(t + 1, lk));
                }
                beta[t * S + s] = b;
            }
            __syncthreads();
        }
        if (threadIdx.x == 0) {
            double logz = alpha[(Tn - 1) * S + S - 1];
            if (S >= 2) logz = ocr__cu_ctc_lse(logz, alpha[(Tn - 1) * S + S - 2]);
            nll[n] = isfinite(logz) ? -logz : HUGE_VAL;
        }
    }
#undef OCR__CU_CTC_LP
}

/* grad[t, n, c] += weight[n] * (exp(lp) - posterior(t, c)), a thread per element; the posterior sums the states
   labelled c in state order, as the CPU's per-frame accumulation does */
static __global__ void ocr__k_ctc_grad(const float *lp, const int32_t *targets, const int64_t *meta, const int32_t *lens, int64_t T,
                                       int64_t N, int64_t C, int blank, const double *ab, const double *nll, const double *weight, float *grad) {
    OCR__FOR_EACH(i, T * N * C) {
        int64_t t = i / (N * C), n = (i / C) % N, c = i % C, Tn = lens[N + n], S = 2 * (int64_t)lens[n] + 1, s;
        const int32_t *tgt = targets + meta[n];
        const double *alpha = ab + meta[N + n], *beta = alpha + Tn * S;
        double post = 0.0;
        if (t >= Tn || weight[n] == 0.0) continue;
        for (s = c == blank ? 0 : 1; s < S; s += 2) {
            double v = alpha[t * S + s] + beta[t * S + s];
            if ((c == blank || tgt[s / 2] == c) && v != -HUGE_VAL) post += exp(v + nll[n]);
        }
        grad[i] += (float)(weight[n] * (exp((double)lp[i]) - post));
    }
}

static __global__ void ocr__k_upsample(const float *x, float *y, int64_t H, int64_t W, int f, int64_t n) {
    OCR__FOR_EACH(i, n) {
        int64_t OW = W * f, plane = i / (H * f * OW), h = (i / OW) % (H * f), w = i % OW;
        y[i] = x[plane * H * W + (h / f) * W + w / f];
    }
}

static __global__ void ocr__k_upsample_bwd(const float *dy, float *dx, int64_t H, int64_t W, int f, int64_t n) {
    OCR__FOR_EACH(i, n) {
        int64_t plane = i / (H * W), h = (i / W) % H, w = i % W, a, b;
        const float *src = dy + plane * H * W * f * f;
        float s = 0.0f;
        for (a = 0; a < f; a++)
            for (b = 0; b < f; b++) s += src[(h * f + a) * W * f + w * f + b];
        dx[i] += s;
    }
}

/* part [N, ci, P] <-> channels [off, off+ci) of whole [N, C, P]; backward accumulates into the part */
static __global__ void ocr__k_concat(float *whole, float *part, int64_t N, int64_t C, int64_t off, int64_t ci, int64_t P, int backward) {
    OCR__FOR_EACH(i, N * ci * P) {
        int64_t n = i / (ci * P), r = i % (ci * P);
        float *w = whole + (n * C + off) * P + r;
        if (backward) part[i] += *w;
        else *w = part[i];
    }
}

/* ---- losses: the scalar formulas of ocr_loss.h, element for element ---- */
#define OCR__Z_MAX 1e30f
#define OCR__CU_RADIX_BINS 2048

static __device__ float ocr__bce1(float x, float y) {
    float lin = x >= 0.0f ? x * (1.0f - y) : -x * y;
    return lin + log1pf(expf(-fabsf(x)));
}
static __device__ float ocr__dbce1(float x, float y) {
    float s = expf(-fabsf(x)), hi = 1.0f / (1.0f + s), lo = s / (1.0f + s);
    return x >= 0.0f ? (1.0f - y) * hi - y * lo : (1.0f - y) * lo - y * hi;
}
static __device__ int ocr__cu_loss_class(float g, float m) {
    float pos = g * m, neg = (1.0f - g) * m;
    return pos >= 1.0f ? 1 : neg >= 1.0f ? -1 : 0;
}
static __device__ float ocr__step_logit(float k, float P, float T) {
    double z = (double)k * ((double)P - (double)T);
    return (float)(z > OCR__Z_MAX ? OCR__Z_MAX : z < -OCR__Z_MAX ? -OCR__Z_MAX : z);
}
static __device__ uint32_t ocr__cu_loss_key(float l) { return __float_as_uint(l) + 1u; }
static __device__ float ocr__cu_loss_key_value(uint32_t key) { return __uint_as_float(key - 1u); }

/* per block: positives, negatives, and their loss sums; OHEM keys of the negatives */
static __global__ void ocr__k_bce_stats(const float *x, const float *gt, const float *mask, int64_t n, uint32_t *keys, double *part) {
    double pos = 0.0, neg = 0.0, pos_sum = 0.0, neg_sum = 0.0;
    OCR__FOR_EACH(i, n) {
        int c = ocr__cu_loss_class(gt[i], mask[i]);
        float l = c ? ocr__bce1(x[i], gt[i]) : 0.0f;
        if (c > 0) { pos += 1.0; pos_sum += l; }
        else if (c < 0) { neg += 1.0; neg_sum += l; }
        if (keys) keys[i] = c < 0 ? ocr__cu_loss_key(l) : 0u;
    }
    pos = ocr__block_sum(pos);
    neg = ocr__block_sum(neg);
    pos_sum = ocr__block_sum(pos_sum);
    neg_sum = ocr__block_sum(neg_sum);
    if (threadIdx.x == 0) {
        double *p = part + 4 * blockIdx.x;
        p[0] = pos; p[1] = neg; p[2] = pos_sum; p[3] = neg_sum;
    }
}

/* out[j] = sum over blocks b of part[b * n_values + j], in block order: deterministic */
static __global__ void ocr__k_reduce_parts(const double *part, int64_t n_blocks, int64_t n_values, double *out) {
    int64_t j = blockIdx.x, b;
    double s = 0.0;
    for (b = threadIdx.x; b < n_blocks; b += blockDim.x) s += part[b * n_values + j];
    s = ocr__block_sum(s);
    if (threadIdx.x == 0) out[j] = s;
}

/* OHEM's k-th largest key by three radix passes, all on the device; state: prefix, prefix mask, need, count */
typedef struct { uint32_t prefix, prefix_mask; unsigned long long need, count; } ocr__radix_state;

static __global__ void ocr__k_radix_hist(const uint32_t *keys, int64_t n, const ocr__radix_state *st, int shift, uint32_t digit_mask,
                                         unsigned long long *hist) {
    OCR__SHARED(unsigned, local, OCR__CU_RADIX_BINS);
    uint32_t prefix = st->prefix, pmask = st->prefix_mask;
    int b;
    for (b = (int)threadIdx.x; b < OCR__CU_RADIX_BINS; b += (int)blockDim.x) local[b] = 0u;
    __syncthreads();
    OCR__FOR_EACH(i, n) {
        uint32_t key = keys[i];
        if ((key & pmask) == prefix) atomicAdd(&local[(key >> shift) & digit_mask], 1u);
    }
    __syncthreads();
    for (b = (int)threadIdx.x; b <= (int)digit_mask; b += (int)blockDim.x)
        if (local[b]) atomicAdd(&hist[b], (unsigned long long)local[b]);
}

/* one thread: walk down from the largest digit until the need-th key falls in the bin; clears hist for the next pass */
static __global__ void ocr__k_radix_walk(ocr__radix_state *st, unsigned long long *hist, int shift, uint32_t digit_mask) {
    unsigned long long need = st->need;
    int b;
    for (b = (int)digit_mask; b > 0 && hist[b] < need; b--) need -= hist[b];
    st->need = need;
    st->count = hist[b];
    st->prefix |= (uint32_t)b << shift;
    st->prefix_mask |= digit_mask << shift;
    for (b = 0; b <= (int)digit_mask; b++) hist[b] = 0;
}

/* gradient of every pixel; per block, the sum of the selected negative losses above the cut */
static __global__ void ocr__k_bce_apply(const float *x, const float *gt, const float *mask, int64_t n, int ohem, const uint32_t *keys,
                                        float *grad, float g_pos, float g_neg, float g_tie, uint32_t cut, double *sel_part) {
    double sel = 0.0;
    OCR__FOR_EACH(i, n) {
        float w;
        int c = ocr__cu_loss_class(gt[i], mask[i]);
        if (ohem) {
            uint32_t key = keys[i];
            if (key > cut) sel += ocr__cu_loss_key_value(key);
            w = c > 0 ? g_pos : key > cut ? g_neg : key == cut ? g_tie : 0.0f;
        } else {
            w = c > 0 ? g_pos : c < 0 ? g_neg : 0.0f;
        }
        if (grad && w != 0.0f) grad[i] += w * ocr__dbce1(x[i], gt[i]);
    }
    if (sel_part) {
        sel = ocr__block_sum(sel);
        if (threadIdx.x == 0) sel_part[blockIdx.x] = sel;
    }
}

static __global__ void ocr__k_dice_stats(const float *pred, int from_logits, const float *gt, const float *mask, const float *w,
                                         int64_t n, double *part) {
    double inter = 0.0, sp = 0.0, sg = 0.0;
    OCR__FOR_EACH(i, n) {
        float m = w ? mask[i] * w[i] : mask[i], p = from_logits ? ocr__sigmoid(pred[i]) : pred[i];
        inter += (double)p * gt[i] * m;
        sp += (double)p * m;
        sg += (double)gt[i] * m;
    }
    inter = ocr__block_sum(inter);
    sp = ocr__block_sum(sp);
    sg = ocr__block_sum(sg);
    if (threadIdx.x == 0) { part[3 * blockIdx.x] = inter; part[3 * blockIdx.x + 1] = sp; part[3 * blockIdx.x + 2] = sg; }
}

static __global__ void ocr__k_dice_grad(const float *pred, int from_logits, const float *gt, const float *mask, const float *w, int64_t n,
                                        float ga, float gb, float *grad) {
    OCR__FOR_EACH(i, n) {
        float m = w ? mask[i] * w[i] : mask[i], d = m * (ga * gt[i] + gb);
        if (from_logits) d *= ocr__dsigmoid(pred[i]);
        grad[i] += d;
    }
}

static __global__ void ocr__k_l1_stats(const float *pred, const float *target, const float *mask, int64_t n, double *part) {
    double sa = 0.0, sm = 0.0;
    OCR__FOR_EACH(i, n) {
        sa += fabs((double)pred[i] - (double)target[i]) * mask[i];
        sm += mask[i];
    }
    sa = ocr__block_sum(sa);
    sm = ocr__block_sum(sm);
    if (threadIdx.x == 0) { part[2 * blockIdx.x] = sa; part[2 * blockIdx.x + 1] = sm; }
}

static __global__ void ocr__k_l1_grad(const float *pred, const float *target, const float *mask, int64_t n, double g, float *grad) {
    OCR__FOR_EACH(i, n) {
        float d = pred[i] - target[i];
        if (d != 0.0f) grad[i] += (float)((d > 0.0f ? g : -g) * mask[i]); /* sign(0) = 0, as torch.abs */
    }
}

static __global__ void ocr__k_step_fwd(const float *x, const float *t, float k, float *z, float *binary, int64_t n) {
    OCR__FOR_EACH(i, n) {
        float zi = ocr__step_logit(k, ocr__sigmoid(x[i]), t[i]);
        if (z) z[i] = zi;
        if (binary) binary[i] = ocr__sigmoid(zi);
    }
}

/* d_in: gradient w.r.t. z (from_binary 0, z stored by the forward) or w.r.t. B (from_binary 1, z recomputed) */
static __global__ void ocr__k_step_bwd(const float *x, const float *t, float k, const float *z_saved, const float *d_in, int from_binary,
                                       float *dx, float *dt, int64_t n) {
    OCR__FOR_EACH(i, n) {
        float xi = x[i], s = expf(-fabsf(xi)), d = 1.0f + s, dz = d_in[i], z;
        z = z_saved ? z_saved[i] : ocr__step_logit(k, xi >= 0.0f ? 1.0f / d : s / d, t[i]);
        if (from_binary) dz *= ocr__dsigmoid(z);
        if (!(fabsf(z) < OCR__Z_MAX) || dz == 0.0f) continue;
        if (dx) dx[i] += dz * k * (s / (d * d));
        if (dt) dt[i] -= dz * k;
    }
}

/* ---- optimizers (torch.optim.SGD / AdamW, the formulas of ocr_optim_step) and reductions ---- */
static __global__ void ocr__k_sgd(float *p, const float *g, float *m, int64_t n, float lr, float momentum, float dampening, float wd,
                                  int nesterov, int first) {
    OCR__FOR_EACH(i, n) {
        float d = g[i] + wd * p[i];
        if (momentum != 0.0f) {
            m[i] = first ? d : momentum * m[i] + (1.0f - dampening) * d;
            d = nesterov ? d + momentum * m[i] : m[i];
        }
        p[i] -= lr * d;
    }
}

static __global__ void ocr__k_adamw(float *p, const float *g, float *m, float *v, int64_t n, float lr, float wd, float beta1, float beta2,
                                    float eps, float step_size, float bc2_sqrt) {
    OCR__FOR_EACH(i, n) {
        float gi = g[i];
        p[i] *= 1.0f - lr * wd;
        m[i] += (gi - m[i]) * (1.0f - beta1);
        v[i] = beta2 * v[i] + (1.0f - beta2) * gi * gi;
        p[i] -= step_size * m[i] / (sqrtf(v[i]) / bc2_sqrt + eps);
    }
}

static __global__ void ocr__k_sumsq(const float *x, int64_t n, double *part) {
    double s = 0.0;
    OCR__FOR_EACH(i, n) s += (double)x[i] * x[i];
    s = ocr__block_sum(s);
    if (threadIdx.x == 0) part[blockIdx.x] = s;
}

/* ================================================================================================== entry points */

extern "C" {

static int ocr__ready(ocr_ctx *ctx, const char *fn) {
    if (!ctx) return OCR_EINVAL;
    if (!ctx->cuda) return ocr_error(ctx, OCR_ESTATE, "%s: the CUDA backend is not initialised on this context (call ocr_cuda_init)", fn);
    return OCR_OK;
}

/* Every tensor an entry point touches must be device memory: a host pointer in a kernel is an illegal access. */
static int ocr__on_dev(ocr_ctx *ctx, const char *fn, const ocr_tensor *t) {
    int rc;
    if (!t) return OCR_OK;
    if ((rc = ocr_check_tensor(ctx, fn, t))) return rc;
    return ocr_check_device(ctx, fn, t, OCR_DEVICE_CUDA);
}

static int ocr__begin(ocr_ctx *ctx, const char *fn, const ocr_tensor *a, const ocr_tensor *b, const ocr_tensor *c, const ocr_tensor *d) {
    int rc;
    if ((rc = ocr__ready(ctx, fn)) || (rc = ocr__on_dev(ctx, fn, a)) || (rc = ocr__on_dev(ctx, fn, b)) || (rc = ocr__on_dev(ctx, fn, c)) ||
        (rc = ocr__on_dev(ctx, fn, d)))
        return rc;
    ocr__op(ctx, fn, a, b, c, d);
    return OCR_OK;
}

static int ocr__cu_env_flag(const char *name) {
    const char *v = getenv(name);
    return v && v[0] && strcmp(v, "0") != 0;
}

#if !defined(OCR_CUDA_EMULATE)
static int ocr__cublas_check(ocr_ctx *ctx, cublasStatus_t st, const char *call, int line) {
    if (st == CUBLAS_STATUS_SUCCESS) return OCR_OK;
    return ocr_error(ctx, OCR_ECUDA, "%s: %s failed: %s at ocr_cuda.cu:%d", ocr__op_str(ctx), call, cublasGetStatusString(st), line);
}
#define OCR__BLAS(ctx, call) ocr__cublas_check(ctx, (call), #call, __LINE__)
#endif
#if !defined(OCR_CUDA_EMULATE) && defined(OCR_CUDNN)
static int ocr__cudnn_check(ocr_ctx *ctx, cudnnStatus_t st, const char *call, int line) {
    if (st == CUDNN_STATUS_SUCCESS) return OCR_OK;
    return ocr_error(ctx, OCR_ECUDA, "%s: %s failed: %s at ocr_cuda.cu:%d (unset OCR_CUDA_CUDNN to route convolutions around cuDNN)",
                     ocr__op_str(ctx), call, cudnnGetErrorString(st), line);
}
#define OCR__DNN(ctx, call) ocr__cudnn_check(ctx, (call), #call, __LINE__)
#endif

OCRDEF int ocr_cuda_init(ocr_ctx *ctx, int device_index) {
    const char *fn = "ocr_cuda_init";
    ocr__cuda_state *s;
    if (!ctx) return OCR_EINVAL;
    if (ctx->cuda) { ctx->device = OCR_DEVICE_CUDA; return OCR_OK; }
    if (device_index < 0) return ocr_error(ctx, OCR_EINVAL, "%s: device index %d must be >= 0", fn, device_index);
#ifndef OCR_CUDA_EMULATE
    {
        int count = 0;
        cudaError_t err = cudaGetDeviceCount(&count);
        if (err != cudaSuccess || count == 0)
            return ocr_error(ctx, OCR_ECUDA, "%s: no usable CUDA device: cudaGetDeviceCount %s%s%s. This CUDA build needs an NVIDIA GPU "
                             "and driver; on this machine use --device cpu", fn, err != cudaSuccess ? "failed: " : "found 0 devices",
                             err != cudaSuccess ? cudaGetErrorString(err) : "", err != cudaSuccess ? "" : "");
        if (device_index >= count)
            return ocr_error(ctx, OCR_EINVAL, "%s: device %d requested but only %d CUDA device(s) exist", fn, device_index, count);
        if ((err = cudaSetDevice(device_index)) != cudaSuccess)
            return ocr_error(ctx, OCR_ECUDA, "%s: cudaSetDevice(%d) failed: %s", fn, device_index, cudaGetErrorString(err));
    }
#endif
    s = (ocr__cuda_state *)calloc(1, sizeof *s);
    if (!s) return ocr_error(ctx, OCR_ENOMEM, "%s: out of memory", fn);
    s->device = device_index;
    s->ctc_samples = -1;
    s->use_cudnn = ocr__cu_env_flag("OCR_CUDA_CUDNN");
    s->use_cublas = !ocr__cu_env_flag("OCR_CUDA_NO_CUBLAS");
    snprintf(s->op, sizeof s->op, "%s", fn);
    ctx->cuda = s;
#ifndef OCR_CUDA_EMULATE
    if (ocr__cublas_check(ctx, cublasCreate(&s->cublas), "cublasCreate", __LINE__)) { int rc = ctx->last_status; ocr_cuda_release(ctx); return rc; }
#ifdef OCR_CUDNN
    if (ocr__cudnn_check(ctx, cudnnCreate(&s->cudnn), "cudnnCreate", __LINE__)) { int rc = ctx->last_status; ocr_cuda_release(ctx); return rc; }
#endif
#endif
    ctx->device = OCR_DEVICE_CUDA;
    return OCR_OK;
}

OCRDEF void ocr_cuda_release(ocr_ctx *ctx) {
    ocr__cuda_state *s = ocr__st(ctx);
    int i;
    if (!s) return;
    for (i = 0; i < OCR__DSCRATCH_SLOTS; i++) ocr__dfree(s->scratch[i]);
#ifndef OCR_CUDA_EMULATE
    if (s->cublas) cublasDestroy(s->cublas);
#ifdef OCR_CUDNN
    if (s->cudnn) cudnnDestroy(s->cudnn);
#endif
#endif
    free(s);
    ctx->cuda = NULL;
    if (ctx->device == OCR_DEVICE_CUDA) ctx->device = OCR_DEVICE_CPU;
}

OCRDEF int ocr_cuda_set_cudnn(ocr_ctx *ctx, int enabled) {
    int rc = ocr__ready(ctx, "ocr_cuda_set_cudnn");
    if (!rc) ocr__st(ctx)->use_cudnn = enabled != 0;
    return rc;
}

OCRDEF int ocr_cuda_set_cublas(ocr_ctx *ctx, int enabled) {
    int rc = ocr__ready(ctx, "ocr_cuda_set_cublas");
    if (!rc) ocr__st(ctx)->use_cublas = enabled != 0;
    return rc;
}

OCRDEF const char *ocr_cuda_backend_name(ocr_ctx *ctx) {
    ocr__cuda_state *s = ocr__st(ctx);
#ifdef OCR_CUDA_EMULATE
    (void)s;
    return "emulated (own kernels on CPU threads)";
#else
#ifdef OCR_CUDNN
    if (s && s->use_cudnn) return s->use_cublas ? "cuda (cuDNN convolutions, cuBLAS GEMM)" : "cuda (cuDNN convolutions, own GEMM)";
#endif
    return s && s->use_cublas ? "cuda (own convolution kernels, cuBLAS GEMM)" : "cuda (own kernels only)";
#endif
}

OCRDEF int ocr_cuda_synchronize(ocr_ctx *ctx, const char *what) {
    int rc = ocr__ready(ctx, "ocr_cuda_synchronize");
    if (rc) return rc;
    snprintf(ocr__st(ctx)->op, sizeof ocr__st(ctx)->op, "ocr_cuda_synchronize (%s)", what ? what : "");
#ifdef OCR_CUDA_EMULATE
    return OCR_OK;
#else
    return OCR__CU(ctx, cudaDeviceSynchronize());
#endif
}

OCRDEF int ocr_cuda_alloc(ocr_ctx *ctx, void **ptr, size_t bytes, const char *name) {
    int rc = ocr__ready(ctx, "ocr_tensor_alloc");
    *ptr = NULL;
    if (rc) return rc;
    snprintf(ocr__st(ctx)->op, sizeof ocr__st(ctx)->op, "ocr_tensor_alloc of '%s' on cuda", name ? name : "?");
    if ((rc = ocr__dmalloc(ctx, ptr, bytes, name ? name : "a tensor"))) return rc;
    if ((rc = ocr__dzero(ctx, *ptr, bytes))) { ocr__dfree(*ptr); *ptr = NULL; }
    return rc;
}

OCRDEF void ocr_cuda_free(void *ptr) { ocr__dfree(ptr); }

OCRDEF int ocr_cuda_memcpy(ocr_ctx *ctx, void *dst, ocr_device dst_dev, const void *src, ocr_device src_dev, size_t bytes) {
    int rc = ocr__ready(ctx, "ocr_cuda_memcpy");
    if (rc) return rc;
    snprintf(ocr__st(ctx)->op, sizeof ocr__st(ctx)->op, "ocr_cuda_memcpy of %zu bytes %s -> %s", bytes, ocr_device_name(src_dev),
             ocr_device_name(dst_dev));
    if (bytes && (!dst || !src)) return ocr_error(ctx, OCR_EINVAL, "%s: NULL pointer", ocr__st(ctx)->op);
    return ocr__dcopy(ctx, dst, src, bytes, src_dev == OCR_DEVICE_CUDA ? (dst_dev == OCR_DEVICE_CUDA ? OCR__D2D : OCR__D2H)
                                                                         : (dst_dev == OCR_DEVICE_CUDA ? OCR__H2D : OCR__H2H));
}

OCRDEF int ocr_cuda_tensor_copy(ocr_ctx *ctx, ocr_tensor *dst, const ocr_tensor *src) {
    const char *fn = "ocr_tensor_copy";
    char d[200], e[200];
    int rc;
    if ((rc = ocr__ready(ctx, fn)) || (rc = ocr_check_same_shape(ctx, fn, dst, src))) return rc;
    if (dst->dtype != src->dtype)
        return ocr_error(ctx, OCR_EUNSUPPORTED, "%s: %s -> %s converts dtype across devices; convert on the host first", fn,
                         ocr_tensor_describe(src, d, sizeof d), ocr_tensor_describe(dst, e, sizeof e));
    if ((dst->device != OCR_DEVICE_CPU && dst->device != OCR_DEVICE_CUDA) || (src->device != OCR_DEVICE_CPU && src->device != OCR_DEVICE_CUDA))
        return ocr_error(ctx, OCR_EDEVICE, "%s: unknown device in %s -> %s", fn, ocr_tensor_describe(src, d, sizeof d), ocr_tensor_describe(dst, e, sizeof e));
    ocr__op(ctx, fn, src, dst, NULL, NULL);
    return ocr__dcopy(ctx, dst->data, src->data, ocr_tensor_bytes(src),
                      src->device == OCR_DEVICE_CUDA ? (dst->device == OCR_DEVICE_CUDA ? OCR__D2D : OCR__D2H)
                                                     : (dst->device == OCR_DEVICE_CUDA ? OCR__H2D : OCR__H2H));
}

OCRDEF int ocr_cuda_fill(ocr_ctx *ctx, ocr_tensor *t, double value) {
    const char *fn = "ocr_tensor_fill";
    int64_t n;
    int rc;
    if ((rc = ocr__begin(ctx, fn, t, NULL, NULL, NULL))) return rc;
    n = ocr_tensor_numel(t);
    if (value == 0.0 && !signbit(value)) return ocr__dzero(ctx, t->data, ocr_tensor_bytes(t));
    if (n == 0) return OCR_OK;
    if (t->dtype == OCR_F32) OCR__LAUNCH(ctx, ocr__k_fill_f32, (ocr__grid(n)), (OCR__BLOCK), (float *)t->data, n, (float)value);
    else if (t->dtype == OCR_I32) {
        int32_t v = value != value ? 0 : value <= -2147483648.0 ? INT32_MIN : value >= 2147483647.0 ? INT32_MAX : (int32_t)value;
        OCR__LAUNCH(ctx, ocr__k_fill_i32, (ocr__grid(n)), (OCR__BLOCK), (int32_t *)t->data, n, v);
    } else if (t->dtype == OCR_U8) {
        unsigned char v = (unsigned char)(value > 0 ? (value < 255 ? value : 255) : 0);
        OCR__LAUNCH(ctx, ocr__k_fill_u8, (ocr__grid(n)), (OCR__BLOCK), (unsigned char *)t->data, n, v);
    } else {
        char d[200];
        return ocr_error(ctx, OCR_EUNSUPPORTED, "%s: %s: device fills are F32, I32 and U8 (or 0 for any dtype)", fn, ocr_tensor_describe(t, d, sizeof d));
    }
    return OCR_OK;
}

/* The device side of ocr_check_finite / ocr_check_range: same messages, found by a kernel. */
OCRDEF int ocr_cuda_check_values(ocr_ctx *ctx, const char *fn, const ocr_tensor *t, int check_range, double lo, double hi) {
    unsigned long long *first, found = ~0ull;
    char d[200], sb[96];
    ocr_shape idx;
    float v;
    int64_t n, rest;
    int rc, k;
    if ((rc = ocr__ready(ctx, fn)) || (rc = ocr__on_dev(ctx, fn, t))) return rc;
    if (t->dtype != OCR_F32) {
        if (!check_range && t->dtype != OCR_F16 && t->dtype != OCR_BF16) return OCR_OK; /* integers are always finite */
        return ocr_error(ctx, OCR_EUNSUPPORTED, "%s: checking values of %s on the device needs F32", fn, ocr_tensor_describe(t, d, sizeof d));
    }
    n = ocr_tensor_numel(t);
    if (n == 0) return OCR_OK;
    ocr__op(ctx, fn, t, NULL, NULL, NULL);
    if (!(first = (unsigned long long *)ocr__dscratch(ctx, OCR__DS_FIND, sizeof *first))) return ctx->last_status;
    if ((rc = ocr__dcopy(ctx, first, &found, sizeof found, OCR__H2D))) return rc;
    OCR__LAUNCH(ctx, ocr__k_find_bad, (ocr__grid(n)), (OCR__BLOCK), (const float *)t->data, n, check_range, lo, hi, first);
    if ((rc = ocr__dcopy(ctx, &found, first, sizeof found, OCR__D2H))) return rc;
    if (found == ~0ull) return OCR_OK;
    if ((rc = ocr__dcopy(ctx, &v, (const float *)t->data + found, sizeof v, OCR__D2H))) return rc;
    idx = t->shape;
    for (k = t->shape.ndim - 1, rest = (int64_t)found; k >= 0; k--) {
        int64_t dk = t->shape.dim[k] ? t->shape.dim[k] : 1;
        idx.dim[k] = rest % dk;
        rest /= dk;
    }
    if (!check_range)
        return ocr_error(ctx, OCR_ENONFINITE, "%s: tensor %s has non-finite value %g at index %lld %s", fn, ocr_tensor_describe(t, d, sizeof d),
                         (double)v, (long long)found, ocr_shape_str(idx, sb, sizeof sb));
    return ocr_error(ctx, isfinite(v) ? OCR_ERANGE : OCR_ENONFINITE, "%s: tensor %s has value %g at index %lld %s, outside [%g, %g]", fn,
                     ocr_tensor_describe(t, d, sizeof d), (double)v, (long long)found, ocr_shape_str(idx, sb, sizeof sb), lo, hi);
}

/* ---------------------------------------------------------------- GEMM */

/* From here to the convolutions' end the helpers are templates on the input type (float, ocr__bf16, ocr__f16), which
   cannot have C linkage; the entry points among them keep the C linkage of their declarations in ocr_nn.h. */
} /* extern "C" */

#ifndef OCR_CUDA_EMULATE
/* cuBLAS per input type, arguments already in column-major order: SGEMM for fp32; GemmEx for half inputs (16-bit A
   and B, fp32 C, fp32 accumulation on the tensor cores). */
static int ocr__cublas_gemm(ocr_ctx *ctx, cublasOperation_t opb, cublasOperation_t opa, int n, int m, int k, const float *alpha,
                            const float *B, int ldb, const float *A, int lda, const float *beta, float *C, int ldc) {
    return OCR__BLAS(ctx, cublasSgemm(ocr__st(ctx)->cublas, opb, opa, n, m, k, alpha, B, ldb, A, lda, beta, C, ldc));
}

static int ocr__cublas_gemm_half(ocr_ctx *ctx, cudaDataType_t type, cublasOperation_t opb, cublasOperation_t opa, int n, int m, int k,
                                 const float *alpha, const void *B, int ldb, const void *A, int lda, const float *beta, float *C, int ldc) {
    return OCR__BLAS(ctx, cublasGemmEx(ocr__st(ctx)->cublas, opb, opa, n, m, k, alpha, B, type, ldb, A, type, lda, beta, C, CUDA_R_32F, ldc,
                                       CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT_TENSOR_OP));
}

static int ocr__cublas_gemm(ocr_ctx *ctx, cublasOperation_t opb, cublasOperation_t opa, int n, int m, int k, const float *alpha,
                            const ocr__bf16 *B, int ldb, const ocr__bf16 *A, int lda, const float *beta, float *C, int ldc) {
    return ocr__cublas_gemm_half(ctx, CUDA_R_16BF, opb, opa, n, m, k, alpha, B, ldb, A, lda, beta, C, ldc);
}

static int ocr__cublas_gemm(ocr_ctx *ctx, cublasOperation_t opb, cublasOperation_t opa, int n, int m, int k, const float *alpha,
                            const ocr__f16 *B, int ldb, const ocr__f16 *A, int lda, const float *beta, float *C, int ldc) {
    return ocr__cublas_gemm_half(ctx, CUDA_R_16F, opb, opa, n, m, k, alpha, B, ldb, A, lda, beta, C, ldc);
}
#endif

/* C (fp32) = alpha op(A) op(B) + beta C with A and B of type T. */
template <typename T>
static int ocr__gemm_dev(ocr_ctx *ctx, int ta, int tb, int64_t M, int64_t N, int64_t K, float alpha, const T *A, int64_t lda,
                         const T *B, int64_t ldb, float beta, float *C, int64_t ldc) {
    if (M == 0 || N == 0) return OCR_OK;
#ifndef OCR_CUDA_EMULATE
    if (ocr__st(ctx)->use_cublas && M <= INT32_MAX && N <= INT32_MAX && K <= INT32_MAX && lda <= INT32_MAX && ldb <= INT32_MAX &&
        ldc <= INT32_MAX) {
        /* row-major C = op(A) op(B) is column-major C^T = op(B)^T op(A)^T */
        if (K == 0) { alpha = 0.0f; K = 1; }
        return ocr__cublas_gemm(ctx, tb ? CUBLAS_OP_T : CUBLAS_OP_N, ta ? CUBLAS_OP_T : CUBLAS_OP_N, (int)N, (int)M, (int)K, &alpha, B,
                                (int)(ldb > 0 ? ldb : 1), A, (int)(lda > 0 ? lda : 1), &beta, C, (int)ldc);
    }
#endif
    if ((M + OCR__GEMM_MN - 1) / OCR__GEMM_MN > 65535 || (N + OCR__GEMM_MN - 1) / OCR__GEMM_MN > INT32_MAX)
        return ocr_error(ctx, OCR_EOVERFLOW, "%s: GEMM M=%lld N=%lld exceeds the own kernel's grid", ocr__op_str(ctx), (long long)M, (long long)N);
    OCR__LAUNCH(ctx, ocr__k_gemm<T>, ((unsigned)((N + OCR__GEMM_MN - 1) / OCR__GEMM_MN), (unsigned)((M + OCR__GEMM_MN - 1) / OCR__GEMM_MN)),
                (OCR__TILE, OCR__TILE), ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
    return OCR_OK;
}

/* src (n fp32 values) rounded to T in device scratch slot OCR__DS_HALF0 + which. */
template <typename T> static int ocr__amp_round(ocr_ctx *ctx, int which, const float *src, int64_t n, T **out) {
    size_t bytes;
    if (!ocr_size_mul((size_t)n, sizeof(T), &bytes)) return ocr_error(ctx, OCR_EOVERFLOW, "%s: %lld values to round", ocr__op_str(ctx), (long long)n);
    if (!(*out = (T *)ocr__dscratch(ctx, OCR__DS_HALF0 + which, bytes ? bytes : sizeof(T)))) return ctx->last_status;
    if (n) OCR__LAUNCH(ctx, ocr__k_to_half<T>, (ocr__grid(n)), (OCR__BLOCK), src, *out, n);
    return OCR_OK;
}

/* op(A) and op(B) as stored (rows of lda / ldb; the last row need only reach its last column) rounded to T, then the
   GEMM on them with the same strides. */
template <typename T>
static int ocr__gemm_amp(ocr_ctx *ctx, int ta, int tb, int64_t M, int64_t N, int64_t K, float alpha, const float *A, int64_t lda,
                         const float *B, int64_t ldb, float beta, float *C, int64_t ldc) {
    int64_t a_n = ((ta ? K : M) - 1) * lda + (ta ? M : K), b_n = ((tb ? N : K) - 1) * ldb + (tb ? K : N);
    T *ha, *hb;
    int rc;
    if ((rc = ocr__amp_round(ctx, 0, A, a_n, &ha)) || (rc = ocr__amp_round(ctx, 1, B, b_n, &hb))) return rc;
    return ocr__gemm_dev(ctx, ta, tb, M, N, K, alpha, ha, lda, hb, ldb, beta, C, ldc);
}

static int ocr__amp_valid(ocr_ctx *ctx) {
    if (ctx->amp == OCR_AMP_OFF || ctx->amp == OCR_AMP_BF16 || ctx->amp == OCR_AMP_F16) return OCR_OK;
    return ocr_error(ctx, OCR_EINVAL, "%s: ctx->amp is %d, not OCR_AMP_OFF, OCR_AMP_BF16 or OCR_AMP_F16", ocr__op_str(ctx), ctx->amp);
}

OCRDEF int ocr_cuda_gemm(ocr_ctx *ctx, int trans_a, int trans_b, int64_t M, int64_t N, int64_t K, float alpha, const float *A, int64_t lda,
                         const float *B, int64_t ldb, float beta, float *C, int64_t ldc) {
    const char *fn = "ocr_cuda_gemm";
    int rc = ocr__ready(ctx, fn);
    if (rc) return rc;
    if (M < 0 || N < 0 || K < 0 || ldc < N || lda < (trans_a ? M : K) || ldb < (trans_b ? K : N))
        return ocr_error(ctx, OCR_EINVAL, "%s: bad sizes M=%lld N=%lld K=%lld lda=%lld ldb=%lld ldc=%lld", fn, (long long)M, (long long)N,
                         (long long)K, (long long)lda, (long long)ldb, (long long)ldc);
    snprintf(ocr__st(ctx)->op, sizeof ocr__st(ctx)->op, "%s M=%lld N=%lld K=%lld", fn, (long long)M, (long long)N, (long long)K);
    if ((rc = ocr__amp_valid(ctx))) return rc;
    /* with no product to take (alpha 0, K 0, an empty C) the result is beta C in any precision: the fp32 path, as on the CPU */
    if (ctx->amp != OCR_AMP_OFF && M > 0 && N > 0 && K > 0 && alpha != 0.0f)
        return ctx->amp == OCR_AMP_BF16 ? ocr__gemm_amp<ocr__bf16>(ctx, trans_a, trans_b, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc)
                                        : ocr__gemm_amp<ocr__f16>(ctx, trans_a, trans_b, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
    return ocr__gemm_dev(ctx, trans_a, trans_b, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
}

/* ---------------------------------------------------------------- convolutions */

enum { OCR__FWD, OCR__BWD_DATA, OCR__BWD_WEIGHT };

/* Geometry in the conv2d sense from already validated tensors: for a transposed convolution x and y swap roles. */
static ocr__cu_conv_geom ocr__cu_conv_geometry(const ocr_tensor *x, const ocr_tensor *w, const ocr_tensor *y, ocr_conv_params p, int transposed) {
    ocr__cu_conv_geom g;
    const ocr_tensor *in = transposed ? y : x, *out = transposed ? x : y;
    memset(&g, 0, sizeof g);
    g.N = in->shape.dim[0]; g.C = in->shape.dim[1]; g.H = in->shape.dim[2]; g.W = in->shape.dim[3];
    g.K = out->shape.dim[1]; g.OH = out->shape.dim[2]; g.OW = out->shape.dim[3];
    g.kh = (int)w->shape.dim[2]; g.kw = (int)w->shape.dim[3];
    g.sh = p.stride_h; g.sw = p.stride_w; g.ph = p.pad_h; g.pw = p.pad_w; g.dh = p.dil_h; g.dw = p.dil_w; g.groups = p.groups;
    return g;
}

/* The file's own path: im2col / col2im + GEMM per image and group (the pieces ocr_nn.h's CPU path also uses).
   mode FWD: y (= or +=) conv(x, w); BWD_DATA: x += conv^T(y, w); BWD_WEIGHT: w += y (x) x. The mode's two inputs
   have type T; its output is out, fp32 (for T = float the mode's own x, y or w: that T pointer is not read). */
template <typename T>
static int ocr__conv_own(ocr_ctx *ctx, const ocr__cu_conv_geom *g, int mode, const T *x, const T *w, const T *y, float *out, int accumulate) {
    int64_t Cg = g->C / g->groups, Kg = g->K / g->groups, kdim = Cg * g->kh * g->kw, P = g->OH * g->OW, HW = g->H * g->W, n, gr;
    int pointwise = g->kh == 1 && g->kw == 1 && g->sh == 1 && g->sw == 1 && g->ph == 0 && g->pw == 0;
    void *col = NULL;
    size_t bytes;
    int rc;
    if (!pointwise) {
        /* im2col's columns are in the input type; BWD_DATA's columns are a GEMM result, fp32 */
        if (!ocr_size_mul((size_t)kdim * (mode == OCR__BWD_DATA ? sizeof(float) : sizeof(T)), (size_t)P, &bytes))
            return ocr_error(ctx, OCR_EOVERFLOW, "%s: im2col buffer too large", ocr__op_str(ctx));
        if (!(col = ocr__dscratch(ctx, OCR__DS_COL, bytes))) return ctx->last_status;
    }
    for (n = 0; n < g->N; n++)
        for (gr = 0; gr < g->groups; gr++) {
            int64_t xo = (n * g->C + gr * Cg) * HW, yo = (n * g->K + gr * Kg) * P, wo = gr * Kg * kdim;
            if (mode == OCR__BWD_DATA) {
                if (pointwise) rc = ocr__gemm_dev(ctx, 1, 0, kdim, P, Kg, 1.0f, w + wo, kdim, y + yo, P, 1.0f, out + xo, HW);
                else {
                    if ((rc = ocr__gemm_dev(ctx, 1, 0, kdim, P, Kg, 1.0f, w + wo, kdim, y + yo, P, 0.0f, (float *)col, P))) return rc;
                    OCR__LAUNCH(ctx, ocr__k_col2im, (ocr__grid(Cg * HW)), (OCR__BLOCK), *g, (const float *)col, out + xo, Cg);
                }
            } else {
                const T *B = x + xo;
                if (!pointwise) {
                    OCR__LAUNCH(ctx, ocr__k_im2col<T>, (ocr__grid(kdim * P)), (OCR__BLOCK), *g, x + xo, (T *)col, Cg);
                    B = (const T *)col;
                }
                if (mode == OCR__FWD) rc = ocr__gemm_dev(ctx, 0, 0, Kg, P, kdim, 1.0f, w + wo, kdim, B, P, accumulate ? 1.0f : 0.0f, out + yo, P);
                else rc = ocr__gemm_dev(ctx, 0, 1, Kg, kdim, P, 1.0f, y + yo, P, B, P, 1.0f, out + wo, kdim);
            }
            if (rc) return rc;
        }
    return OCR_OK;
}

#if !defined(OCR_CUDA_EMULATE) && defined(OCR_CUDNN)
/* The same three modes through cuDNN's legacy convolution API on x, w and y of type dt, accumulating in fp32 (the
   convolution descriptor's type): fp32 data with FMA math (no TF32) for parity with the CPU; bf16 / fp16 data with
   tensor-core math. */
static int ocr__conv_cudnn(ocr_ctx *ctx, const ocr__cu_conv_geom *g, int mode, cudnnDataType_t dt, void *x, void *w, void *y, int accumulate) {
    cudnnHandle_t h = ocr__st(ctx)->cudnn;
    cudnnTensorDescriptor_t xd = NULL, yd = NULL;
    cudnnFilterDescriptor_t wd = NULL;
    cudnnConvolutionDescriptor_t cd = NULL;
    float alpha = 1.0f, beta = accumulate ? 1.0f : 0.0f;
    size_t ws_bytes = 0;
    void *ws = NULL;
    int rc, got = 0, i;
    if ((rc = OCR__DNN(ctx, cudnnCreateTensorDescriptor(&xd))) || (rc = OCR__DNN(ctx, cudnnCreateTensorDescriptor(&yd))) ||
        (rc = OCR__DNN(ctx, cudnnCreateFilterDescriptor(&wd))) || (rc = OCR__DNN(ctx, cudnnCreateConvolutionDescriptor(&cd))) ||
        (rc = OCR__DNN(ctx, cudnnSetTensor4dDescriptor(xd, CUDNN_TENSOR_NCHW, dt, (int)g->N, (int)g->C, (int)g->H, (int)g->W))) ||
        (rc = OCR__DNN(ctx, cudnnSetTensor4dDescriptor(yd, CUDNN_TENSOR_NCHW, dt, (int)g->N, (int)g->K, (int)g->OH, (int)g->OW))) ||
        (rc = OCR__DNN(ctx, cudnnSetFilter4dDescriptor(wd, dt, CUDNN_TENSOR_NCHW, (int)g->K, (int)(g->C / g->groups), g->kh, g->kw))) ||
        (rc = OCR__DNN(ctx, cudnnSetConvolution2dDescriptor(cd, g->ph, g->pw, g->sh, g->sw, g->dh, g->dw, CUDNN_CROSS_CORRELATION, CUDNN_DATA_FLOAT))) ||
        (rc = OCR__DNN(ctx, cudnnSetConvolutionGroupCount(cd, g->groups))) ||
        (rc = OCR__DNN(ctx, cudnnSetConvolutionMathType(cd, dt == CUDNN_DATA_FLOAT ? CUDNN_FMA_MATH : CUDNN_TENSOR_OP_MATH))))
        goto done;
    {
        int64_t key[18] = {mode, (int64_t)dt, g->N, g->C, g->H, g->W, g->K, g->OH, g->OW, g->kh, g->kw, g->sh, g->sw, g->ph, g->pw,
                           g->dh, g->dw, g->groups};
        ocr__cuda_state *s = ocr__st(ctx);
        ocr__cudnn_choice *c = NULL;
        for (i = 0; i < s->n_cudnn_choice && !c; i++)
            if (memcmp(s->cudnn_choice[i].key, key, sizeof key) == 0) c = &s->cudnn_choice[i];
        if (!c) {
            int algo = -1;
            if (mode == OCR__FWD) {
                cudnnConvolutionFwdAlgoPerf_t perf[8];
                if ((rc = OCR__DNN(ctx, cudnnGetConvolutionForwardAlgorithm_v7(h, xd, wd, cd, yd, 8, &got, perf)))) goto done;
                for (i = got - 1; i >= 0; i--) if (perf[i].status == CUDNN_STATUS_SUCCESS) algo = (int)perf[i].algo;
                if (algo < 0) algo = (int)CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM;
                rc = OCR__DNN(ctx, cudnnGetConvolutionForwardWorkspaceSize(h, xd, wd, cd, yd, (cudnnConvolutionFwdAlgo_t)algo, &ws_bytes));
            } else if (mode == OCR__BWD_DATA) {
                cudnnConvolutionBwdDataAlgoPerf_t perf[8];
                if ((rc = OCR__DNN(ctx, cudnnGetConvolutionBackwardDataAlgorithm_v7(h, wd, yd, cd, xd, 8, &got, perf)))) goto done;
                for (i = got - 1; i >= 0; i--) if (perf[i].status == CUDNN_STATUS_SUCCESS) algo = (int)perf[i].algo;
                if (algo < 0) algo = (int)CUDNN_CONVOLUTION_BWD_DATA_ALGO_1;
                rc = OCR__DNN(ctx, cudnnGetConvolutionBackwardDataWorkspaceSize(h, wd, yd, cd, xd, (cudnnConvolutionBwdDataAlgo_t)algo, &ws_bytes));
            } else {
                cudnnConvolutionBwdFilterAlgoPerf_t perf[8];
                if ((rc = OCR__DNN(ctx, cudnnGetConvolutionBackwardFilterAlgorithm_v7(h, xd, yd, cd, wd, 8, &got, perf)))) goto done;
                for (i = got - 1; i >= 0; i--) if (perf[i].status == CUDNN_STATUS_SUCCESS) algo = (int)perf[i].algo;
                if (algo < 0) algo = (int)CUDNN_CONVOLUTION_BWD_FILTER_ALGO_1;
                rc = OCR__DNN(ctx, cudnnGetConvolutionBackwardFilterWorkspaceSize(h, xd, yd, cd, wd, (cudnnConvolutionBwdFilterAlgo_t)algo, &ws_bytes));
            }
            if (rc) goto done;
            /* full: the oldest half makes room (shapes seen once, such as validation's, do not pin the table) */
            if (s->n_cudnn_choice == 64) {
                memmove(s->cudnn_choice, s->cudnn_choice + 32, 32 * sizeof s->cudnn_choice[0]);
                s->n_cudnn_choice = 32;
            }
            c = &s->cudnn_choice[s->n_cudnn_choice++];
            memcpy(c->key, key, sizeof key);
            c->algo = algo;
            c->ws_bytes = ws_bytes;
        }
        ws_bytes = c->ws_bytes;
        if (ws_bytes && !(ws = ocr__dscratch(ctx, OCR__DS_WORKSPACE, ws_bytes))) { rc = ctx->last_status; goto done; }
        if (mode == OCR__FWD)
            rc = OCR__DNN(ctx, cudnnConvolutionForward(h, &alpha, xd, x, wd, w, cd, (cudnnConvolutionFwdAlgo_t)c->algo, ws, ws_bytes, &beta, yd, y));
        else if (mode == OCR__BWD_DATA)
            rc = OCR__DNN(ctx, cudnnConvolutionBackwardData(h, &alpha, wd, w, yd, y, cd, (cudnnConvolutionBwdDataAlgo_t)c->algo, ws, ws_bytes, &beta, xd, x));
        else
            rc = OCR__DNN(ctx, cudnnConvolutionBackwardFilter(h, &alpha, xd, x, yd, y, cd, (cudnnConvolutionBwdFilterAlgo_t)c->algo, ws, ws_bytes, &beta, wd, w));
    }
    if (!rc) rc = ocr__launched(ctx, mode == OCR__FWD ? "cudnnConvolutionForward" : mode == OCR__BWD_DATA ? "cudnnConvolutionBackwardData"
                                                                                                       : "cudnnConvolutionBackwardFilter");
done:
    if (cd) cudnnDestroyConvolutionDescriptor(cd);
    if (wd) cudnnDestroyFilterDescriptor(wd);
    if (yd) cudnnDestroyTensorDescriptor(yd);
    if (xd) cudnnDestroyTensorDescriptor(xd);
    return rc;
}

static int ocr__cudnn_fits(ocr_ctx *ctx, const ocr__cu_conv_geom *g) {
    return ocr__st(ctx)->use_cudnn && g->N <= INT32_MAX && g->C <= INT32_MAX && g->H <= INT32_MAX && g->W <= INT32_MAX && g->K <= INT32_MAX &&
           g->OH <= INT32_MAX && g->OW <= INT32_MAX;
}

static cudnnDataType_t ocr__cudnn_type(const ocr__bf16 *) { return CUDNN_DATA_BFLOAT16; }
static cudnnDataType_t ocr__cudnn_type(const ocr__f16 *) { return CUDNN_DATA_HALF; }
#endif

/* One mode in fp32: x, w and y as they are, the mode's output among them. */
static int ocr__cu_conv_run(ocr_ctx *ctx, const ocr__cu_conv_geom *g, int mode, float *x, float *w, float *y, int accumulate) {
#if !defined(OCR_CUDA_EMULATE) && defined(OCR_CUDNN)
    if (ocr__cudnn_fits(ctx, g)) return ocr__conv_cudnn(ctx, g, mode, CUDNN_DATA_FLOAT, x, w, y, accumulate);
#endif
    return ocr__conv_own(ctx, g, mode, x, w, y, mode == OCR__FWD ? y : mode == OCR__BWD_DATA ? x : w, accumulate);
}

/* One mode under mixed precision: its two inputs rounded to T (x, w, y into scratch HALF0, 1, 2), products
   accumulated in fp32 into its output, which stays fp32 (and keeps its old value under accumulate). */
template <typename T>
static int ocr__cu_conv_amp(ocr_ctx *ctx, const ocr__cu_conv_geom *g, int mode, float *x, float *w, float *y, int accumulate) {
    int64_t nx = g->N * g->C * g->H * g->W, nw = g->K * (g->C / g->groups) * g->kh * g->kw, ny = g->N * g->K * g->OH * g->OW;
    float *out = mode == OCR__FWD ? y : mode == OCR__BWD_DATA ? x : w;
    T *hx = NULL, *hw = NULL, *hy = NULL;
    int rc = OCR_OK;
    if ((mode != OCR__BWD_DATA && (rc = ocr__amp_round(ctx, 0, x, nx, &hx))) || (mode != OCR__BWD_WEIGHT && (rc = ocr__amp_round(ctx, 1, w, nw, &hw))) ||
        (mode != OCR__FWD && (rc = ocr__amp_round(ctx, 2, y, ny, &hy))))
        return rc;
#if !defined(OCR_CUDA_EMULATE) && defined(OCR_CUDNN)
    if (ocr__cudnn_fits(ctx, g)) {
        /* cuDNN's legacy API takes x, w and y of one type, so the result comes out in T: rounded once more (within the
           half-precision tolerance the inputs already cost; PyTorch's autocast convolutions return the same), then
           widened into out, so that accumulating into out (dx +=, dw +=) stays fp32 */
        int64_t n_out = mode == OCR__FWD ? ny : mode == OCR__BWD_DATA ? nx : nw;
        T *h = (T *)ocr__dscratch(ctx, OCR__DS_HALF_OUT, (size_t)(n_out ? n_out : 1) * sizeof(T));
        if (!h) return ctx->last_status;
        if ((rc = ocr__conv_cudnn(ctx, g, mode, ocr__cudnn_type((const T *)NULL), mode == OCR__BWD_DATA ? (void *)h : (void *)hx,
                                  mode == OCR__BWD_WEIGHT ? (void *)h : (void *)hw, mode == OCR__FWD ? (void *)h : (void *)hy, 0)))
            return rc;
        if (n_out) OCR__LAUNCH(ctx, ocr__k_from_half<T>, (ocr__grid(n_out)), (OCR__BLOCK), (const T *)h, out, n_out, accumulate);
        return OCR_OK;
    }
#endif
    return ocr__conv_own(ctx, g, mode, (const T *)hx, (const T *)hw, (const T *)hy, out, accumulate);
}

/* One mode in ctx->amp's precision (the entry points have checked it). */
static int ocr__cu_conv(ocr_ctx *ctx, const ocr__cu_conv_geom *g, int mode, float *x, float *w, float *y, int accumulate) {
    if (ctx->amp == OCR_AMP_BF16) return ocr__cu_conv_amp<ocr__bf16>(ctx, g, mode, x, w, y, accumulate);
    if (ctx->amp == OCR_AMP_F16) return ocr__cu_conv_amp<ocr__f16>(ctx, g, mode, x, w, y, accumulate);
    return ocr__cu_conv_run(ctx, g, mode, x, w, y, accumulate);
}

static int ocr__cu_bias_add(ocr_ctx *ctx, float *y, const float *b, int64_t N, int64_t C, int64_t P) {
    OCR__LAUNCH(ctx, ocr__k_bias_add, (ocr__grid(N * C * P)), (OCR__BLOCK), y, b, C, P, N * C * P);
    return OCR_OK;
}

static int ocr__cu_bias_grad(ocr_ctx *ctx, const float *dy, float *db, int64_t N, int64_t C, int64_t P) {
    if (C > INT32_MAX) return ocr_error(ctx, OCR_EOVERFLOW, "%s: %lld channels", ocr__op_str(ctx), (long long)C);
    OCR__LAUNCH(ctx, ocr__k_bias_grad, ((unsigned)C), (OCR__BLOCK), dy, db, N, C, P);
    return OCR_OK;
}

OCRDEF int ocr_cuda_conv2d_forward(ocr_ctx *ctx, const ocr_tensor *x, const ocr_tensor *w, const ocr_tensor *b, ocr_conv_params p,
                                   ocr_tensor *y) {
    ocr__cu_conv_geom g;
    int rc;
    if ((rc = ocr__begin(ctx, "ocr_nn_conv2d_forward (cuda)", x, w, b, y)) || (rc = ocr__amp_valid(ctx))) return rc;
    g = ocr__cu_conv_geometry(x, w, y, p, 0);
    if ((rc = ocr__cu_conv(ctx, &g, OCR__FWD, (float *)x->data, (float *)w->data, (float *)y->data, 0))) return rc;
    return b ? ocr__cu_bias_add(ctx, (float *)y->data, (const float *)b->data, g.N, g.K, g.OH * g.OW) : OCR_OK;
}

OCRDEF int ocr_cuda_conv2d_backward(ocr_ctx *ctx, const ocr_tensor *x, const ocr_tensor *w, const ocr_tensor *dy, ocr_conv_params p,
                                    ocr_tensor *dx, ocr_tensor *dw, ocr_tensor *db) {
    ocr__cu_conv_geom g;
    int rc;
    if ((rc = ocr__begin(ctx, "ocr_nn_conv2d_backward (cuda)", x, w, dy, dx)) || (rc = ocr__on_dev(ctx, "ocr_nn_conv2d_backward", dw)) ||
        (rc = ocr__on_dev(ctx, "ocr_nn_conv2d_backward", db)) || (rc = ocr__amp_valid(ctx)))
        return rc;
    g = ocr__cu_conv_geometry(x, w, dy, p, 0);
    if (dx && (rc = ocr__cu_conv(ctx, &g, OCR__BWD_DATA, (float *)dx->data, (float *)w->data, (float *)dy->data, 1))) return rc;
    if (dw && (rc = ocr__cu_conv(ctx, &g, OCR__BWD_WEIGHT, (float *)x->data, (float *)dw->data, (float *)dy->data, 1))) return rc;
    return db ? ocr__cu_bias_grad(ctx, (const float *)dy->data, (float *)db->data, g.N, g.K, g.OH * g.OW) : OCR_OK;
}

OCRDEF int ocr_cuda_conv_transpose2d_forward(ocr_ctx *ctx, const ocr_tensor *x, const ocr_tensor *w, const ocr_tensor *b,
                                             ocr_conv_params p, ocr_tensor *y) {
    ocr__cu_conv_geom g;
    int rc;
    if ((rc = ocr__begin(ctx, "ocr_nn_conv_transpose2d_forward (cuda)", x, w, b, y)) || (rc = ocr__amp_valid(ctx))) return rc;
    g = ocr__cu_conv_geometry(x, w, y, p, 1);
    /* a transposed convolution is the data gradient of the convolution it transposes */
    if ((rc = ocr__dzero(ctx, y->data, ocr_tensor_bytes(y))) ||
        (rc = ocr__cu_conv(ctx, &g, OCR__BWD_DATA, (float *)y->data, (float *)w->data, (float *)x->data, 1)))
        return rc;
    return b ? ocr__cu_bias_add(ctx, (float *)y->data, (const float *)b->data, g.N, g.C, g.H * g.W) : OCR_OK;
}

OCRDEF int ocr_cuda_conv_transpose2d_backward(ocr_ctx *ctx, const ocr_tensor *x, const ocr_tensor *w, const ocr_tensor *dy,
                                              ocr_conv_params p, ocr_tensor *dx, ocr_tensor *dw, ocr_tensor *db) {
    ocr__cu_conv_geom g;
    int rc;
    if ((rc = ocr__begin(ctx, "ocr_nn_conv_transpose2d_backward (cuda)", x, w, dy, dx)) ||
        (rc = ocr__on_dev(ctx, "ocr_nn_conv_transpose2d_backward", dw)) || (rc = ocr__on_dev(ctx, "ocr_nn_conv_transpose2d_backward", db)) ||
        (rc = ocr__amp_valid(ctx)))
        return rc;
    g = ocr__cu_conv_geometry(x, w, dy, p, 1);
    if (dx && (rc = ocr__cu_conv(ctx, &g, OCR__FWD, (float *)dy->data, (float *)w->data, (float *)dx->data, 1))) return rc;
    if (dw && (rc = ocr__cu_conv(ctx, &g, OCR__BWD_WEIGHT, (float *)dy->data, (float *)dw->data, (float *)x->data, 1))) return rc;
    return db ? ocr__cu_bias_grad(ctx, (const float *)dy->data, (float *)db->data, g.N, g.C, g.H * g.W) : OCR_OK;
}

extern "C" {

/* ---------------------------------------------------------------- batch normalisation */

OCRDEF int ocr_cuda_batchnorm2d_forward(ocr_ctx *ctx, const ocr_tensor *x, const ocr_tensor *gamma, const ocr_tensor *beta,
                                        ocr_tensor *running_mean, ocr_tensor *running_var, int training, float momentum, float eps,
                                        ocr_tensor *save_mean, ocr_tensor *save_invstd, ocr_tensor *y) {
    const char *fn = "ocr_nn_batchnorm2d_forward (cuda)";
    int64_t N, C, P;
    int rc;
    if ((rc = ocr__begin(ctx, fn, x, gamma, running_mean, y)) || (rc = ocr__on_dev(ctx, fn, beta)) || (rc = ocr__on_dev(ctx, fn, running_var)) ||
        (rc = ocr__on_dev(ctx, fn, save_mean)) || (rc = ocr__on_dev(ctx, fn, save_invstd)))
        return rc;
    N = x->shape.dim[0]; C = x->shape.dim[1]; P = x->shape.dim[2] * x->shape.dim[3];
    if (C == 0) return OCR_OK;
    if (C > INT32_MAX) return ocr_error(ctx, OCR_EOVERFLOW, "%s: %lld channels", fn, (long long)C);
    OCR__LAUNCH(ctx, ocr__k_bn_forward, ((unsigned)C), (OCR__BLOCK), (const float *)x->data, gamma ? (const float *)gamma->data : NULL,
                beta ? (const float *)beta->data : NULL, (float *)running_mean->data, (float *)running_var->data,
                (float *)save_mean->data, (float *)save_invstd->data, (float *)y->data, N, C, P, training, momentum, eps);
    return OCR_OK;
}

OCRDEF int ocr_cuda_batchnorm2d_backward(ocr_ctx *ctx, const ocr_tensor *x, const ocr_tensor *gamma, const ocr_tensor *save_mean,
                                         const ocr_tensor *save_invstd, const ocr_tensor *dy, int training, ocr_tensor *dx,
                                         ocr_tensor *dgamma, ocr_tensor *dbeta) {
    const char *fn = "ocr_nn_batchnorm2d_backward (cuda)";
    int64_t C;
    int rc;
    if ((rc = ocr__begin(ctx, fn, x, dy, dx, gamma)) || (rc = ocr__on_dev(ctx, fn, save_mean)) || (rc = ocr__on_dev(ctx, fn, save_invstd)) ||
        (rc = ocr__on_dev(ctx, fn, dgamma)) || (rc = ocr__on_dev(ctx, fn, dbeta)))
        return rc;
    C = x->shape.dim[1];
    if (C == 0) return OCR_OK;
    if (C > INT32_MAX) return ocr_error(ctx, OCR_EOVERFLOW, "%s: %lld channels", fn, (long long)C);
    OCR__LAUNCH(ctx, ocr__k_bn_backward, ((unsigned)C), (OCR__BLOCK), (const float *)x->data, gamma ? (const float *)gamma->data : NULL,
                (const float *)save_mean->data, (const float *)save_invstd->data, (const float *)dy->data, dx ? (float *)dx->data : NULL,
                dgamma ? (float *)dgamma->data : NULL, dbeta ? (float *)dbeta->data : NULL, x->shape.dim[0], C,
                x->shape.dim[2] * x->shape.dim[3], training);
    return OCR_OK;
}

/* ---------------------------------------------------------------- pointwise */

static int ocr__cu_pw(ocr_ctx *ctx, const char *fn, int op, const ocr_tensor *a, const ocr_tensor *b, ocr_tensor *y) {
    int64_t n;
    int rc;
    if ((rc = ocr__begin(ctx, fn, a, b, y, NULL))) return rc;
    n = ocr_tensor_numel(y);
    if (n) OCR__LAUNCH(ctx, ocr__k_pointwise, (ocr__grid(n)), (OCR__BLOCK), op, (const float *)a->data, b ? (const float *)b->data : NULL,
                       (float *)y->data, n, 1.0f);
    return OCR_OK;
}

OCRDEF int ocr_cuda_relu_forward(ocr_ctx *ctx, const ocr_tensor *x, ocr_tensor *y) {
    return ocr__cu_pw(ctx, "ocr_nn_relu_forward (cuda)", OCR__CU_PW_RELU, x, NULL, y);
}
OCRDEF int ocr_cuda_relu_backward(ocr_ctx *ctx, const ocr_tensor *y, const ocr_tensor *dy, ocr_tensor *dx) {
    return ocr__cu_pw(ctx, "ocr_nn_relu_backward (cuda)", OCR__CU_PW_RELU_BWD, y, dy, dx);
}
OCRDEF int ocr_cuda_sigmoid_forward(ocr_ctx *ctx, const ocr_tensor *x, ocr_tensor *y) {
    return ocr__cu_pw(ctx, "ocr_nn_sigmoid_forward (cuda)", OCR__CU_PW_SIGMOID, x, NULL, y);
}
OCRDEF int ocr_cuda_sigmoid_backward(ocr_ctx *ctx, const ocr_tensor *y, const ocr_tensor *dy, ocr_tensor *dx) {
    return ocr__cu_pw(ctx, "ocr_nn_sigmoid_backward (cuda)", OCR__CU_PW_SIGMOID_BWD, y, dy, dx);
}
OCRDEF int ocr_cuda_add_forward(ocr_ctx *ctx, const ocr_tensor *a, const ocr_tensor *b, ocr_tensor *y) {
    return ocr__cu_pw(ctx, "ocr_nn_add_forward (cuda)", OCR__CU_PW_ADD, a, b, y);
}
OCRDEF int ocr_cuda_add_backward(ocr_ctx *ctx, const ocr_tensor *dy, ocr_tensor *da, ocr_tensor *db) {
    int rc = OCR_OK;
    if (da) rc = ocr__cu_pw(ctx, "ocr_nn_add_backward (cuda)", OCR__CU_PW_ACC, dy, NULL, da);
    if (!rc && db) rc = ocr__cu_pw(ctx, "ocr_nn_add_backward (cuda)", OCR__CU_PW_ACC, dy, NULL, db);
    return rc;
}

/* ---------------------------------------------------------------- pooling, upsampling, concat */

static int ocr__cu_maxpool(ocr_ctx *ctx, const char *fn, const ocr_tensor *x, int kh, int kw, int sh, int sw, int ph, int pw,
                           ocr_tensor *y, ocr_tensor *argmax) {
    int64_t n;
    int rc;
    if ((rc = ocr__begin(ctx, fn, x, y, argmax, NULL))) return rc;
    n = ocr_tensor_numel(y);
    if (n) OCR__LAUNCH(ctx, ocr__k_maxpool, (ocr__grid(n)), (OCR__BLOCK), (const float *)x->data, (float *)y->data,
                       argmax ? (int32_t *)argmax->data : NULL, x->shape.dim[0] * x->shape.dim[1], x->shape.dim[2], x->shape.dim[3],
                       y->shape.dim[2], y->shape.dim[3], kh, kw, sh, sw, ph, pw);
    return OCR_OK;
}

OCRDEF int ocr_cuda_maxpool2d_forward(ocr_ctx *ctx, const ocr_tensor *x, int kernel, int stride, int pad, ocr_tensor *y, ocr_tensor *argmax) {
    return ocr__cu_maxpool(ctx, "ocr_nn_maxpool2d_forward (cuda)", x, kernel, kernel, stride, stride, pad, pad, y, argmax);
}
OCRDEF int ocr_cuda_maxpool2d_rect_forward(ocr_ctx *ctx, const ocr_tensor *x, int kh, int kw, int sh, int sw, int ph, int pw,
                                          ocr_tensor *y, ocr_tensor *argmax) {
    return ocr__cu_maxpool(ctx, "ocr_nn_maxpool2d_rect_forward (cuda)", x, kh, kw, sh, sw, ph, pw, y, argmax);
}

OCRDEF int ocr_cuda_maxpool2d_backward(ocr_ctx *ctx, const ocr_tensor *dy, const ocr_tensor *argmax, ocr_tensor *dx) {
    const char *fn = "ocr_nn_maxpool2d_backward (cuda)";
    unsigned long long *first, found = ~0ull;
    int64_t n, HW;
    int rc;
    if ((rc = ocr__begin(ctx, fn, dy, argmax, dx, NULL))) return rc;
    n = ocr_tensor_numel(dy);
    HW = dx->shape.dim[2] * dx->shape.dim[3];
    if (!n) return OCR_OK;
    /* every index is checked before the first is used, so a corrupt argmax leaves dx as it was */
    if (!(first = (unsigned long long *)ocr__dscratch(ctx, OCR__DS_FIND, sizeof *first))) return ctx->last_status;
    if ((rc = ocr__dcopy(ctx, first, &found, sizeof found, OCR__H2D))) return rc;
    OCR__LAUNCH(ctx, ocr__k_check_index, (ocr__grid(n)), (OCR__BLOCK), (const int32_t *)argmax->data, n, HW, first);
    if ((rc = ocr__dcopy(ctx, &found, first, sizeof found, OCR__D2H))) return rc;
    if (found != ~0ull) {
        int32_t bad = 0;
        if ((rc = ocr__dcopy(ctx, &bad, (const int32_t *)argmax->data + found, sizeof bad, OCR__D2H))) return rc;
        return ocr_error(ctx, OCR_ERANGE, "ocr_nn_maxpool2d_backward: argmax '%s' holds %d at %lld, outside the %lld-pixel input plane",
                         argmax->name, (int)bad, (long long)found, (long long)HW);
    }
    OCR__LAUNCH(ctx, ocr__k_maxpool_bwd, (ocr__grid(n)), (OCR__BLOCK), (const float *)dy->data, (const int32_t *)argmax->data,
                (float *)dx->data, dy->shape.dim[2] * dy->shape.dim[3], HW, n);
    return OCR_OK;
}

OCRDEF int ocr_cuda_upsample_nearest_forward(ocr_ctx *ctx, const ocr_tensor *x, int factor, ocr_tensor *y) {
    int64_t n;
    int rc;
    if ((rc = ocr__begin(ctx, "ocr_nn_upsample_nearest_forward (cuda)", x, y, NULL, NULL))) return rc;
    n = ocr_tensor_numel(y);
    if (n) OCR__LAUNCH(ctx, ocr__k_upsample, (ocr__grid(n)), (OCR__BLOCK), (const float *)x->data, (float *)y->data, x->shape.dim[2],
                       x->shape.dim[3], factor, n);
    return OCR_OK;
}

OCRDEF int ocr_cuda_upsample_nearest_backward(ocr_ctx *ctx, const ocr_tensor *dy, int factor, ocr_tensor *dx) {
    int64_t n;
    int rc;
    if ((rc = ocr__begin(ctx, "ocr_nn_upsample_nearest_backward (cuda)", dy, dx, NULL, NULL))) return rc;
    n = ocr_tensor_numel(dx);
    if (n) OCR__LAUNCH(ctx, ocr__k_upsample_bwd, (ocr__grid(n)), (OCR__BLOCK), (const float *)dy->data, (float *)dx->data, dx->shape.dim[2],
                       dx->shape.dim[3], factor, n);
    return OCR_OK;
}

static int ocr__concat(ocr_ctx *ctx, const char *fn, ocr_tensor *whole, ocr_tensor *const *parts, int n, int backward) {
    int64_t off = 0, P = whole->shape.dim[2] * whole->shape.dim[3], N = whole->shape.dim[0], C = whole->shape.dim[1];
    int i, rc;
    for (i = 0; i < n; i++) {
        int64_t ci = parts[i]->shape.dim[1];
        if ((rc = ocr__begin(ctx, fn, whole, parts[i], NULL, NULL))) return rc;
        if (N * ci * P > 0)
            OCR__LAUNCH(ctx, ocr__k_concat, (ocr__grid(N * ci * P)), (OCR__BLOCK), (float *)whole->data, (float *)parts[i]->data, N, C, off,
                        ci, P, backward);
        off += ci;
    }
    return OCR_OK;
}

/* ---------------------------------------------------------------- the recognizer's sequence ops */

OCRDEF int ocr_cuda_log_softmax_forward(ocr_ctx *ctx, const ocr_tensor *x, ocr_tensor *y) {
    int64_t C = x->shape.dim[x->shape.ndim - 1], rows;
    int rc;
    if ((rc = ocr__begin(ctx, "ocr_nn_log_softmax_forward (cuda)", x, y, NULL, NULL))) return rc;
    rows = ocr_tensor_numel(x) / C;
    if (rows) OCR__LAUNCH(ctx, ocr__k_log_softmax, (ocr__grid(rows)), (OCR__BLOCK), (const float *)x->data, (float *)y->data, rows, C);
    return OCR_OK;
}

OCRDEF int ocr_cuda_log_softmax_backward(ocr_ctx *ctx, const ocr_tensor *y, const ocr_tensor *dy, ocr_tensor *dx) {
    int64_t C = y->shape.dim[y->shape.ndim - 1], rows;
    int rc;
    if ((rc = ocr__begin(ctx, "ocr_nn_log_softmax_backward (cuda)", y, dy, dx, NULL))) return rc;
    rows = ocr_tensor_numel(y) / C;
    if (rows)
        OCR__LAUNCH(ctx, ocr__k_log_softmax_bwd, (ocr__grid(rows)), (OCR__BLOCK), (const float *)y->data, (const float *)dy->data,
                    (float *)dx->data, rows, C);
    return OCR_OK;
}

static int ocr__cu_map_to_seq(ocr_ctx *ctx, const char *fn, const ocr_tensor *map, const ocr_tensor *seq, int backward) {
    int64_t n = ocr_tensor_numel(map);
    int rc;
    if ((rc = ocr__begin(ctx, fn, map, seq, NULL, NULL))) return rc;
    if (n)
        OCR__LAUNCH(ctx, ocr__k_map_to_seq, (ocr__grid(n)), (OCR__BLOCK), (float *)map->data, (float *)seq->data, map->shape.dim[0],
                    map->shape.dim[1] * map->shape.dim[2], map->shape.dim[3], backward);
    return OCR_OK;
}
OCRDEF int ocr_cuda_map_to_seq_forward(ocr_ctx *ctx, const ocr_tensor *x, ocr_tensor *y) {
    return ocr__cu_map_to_seq(ctx, "ocr_nn_map_to_seq_forward (cuda)", x, y, 0);
}
OCRDEF int ocr_cuda_map_to_seq_backward(ocr_ctx *ctx, const ocr_tensor *dy, ocr_tensor *dx) {
    return ocr__cu_map_to_seq(ctx, "ocr_nn_map_to_seq_backward (cuda)", dx, dy, 1);
}

/* ocr_cuda_gemm inside another op: a failure of the GEMM is named by the GEMM; the op's name is restored after it */
static int ocr__op_gemm(ocr_ctx *ctx, int ta, int tb, int64_t M, int64_t N, int64_t K, float alpha, const float *A, int64_t lda,
                        const float *B, int64_t ldb, float beta, float *C, int64_t ldc) {
    ocr__cuda_state *s = ocr__st(ctx);
    char op[sizeof s->op];
    int rc;
    memcpy(op, s->op, sizeof op);
    if ((rc = ocr_cuda_gemm(ctx, ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc))) return rc;
    memcpy(s->op, op, sizeof op);
    return OCR_OK;
}

static int ocr__lstm_weights_on_dev(ocr_ctx *ctx, const char *fn, const ocr_lstm_weights *w) {
    int d, rc;
    for (d = 0; d < w->directions; d++)
        if ((rc = ocr__on_dev(ctx, fn, w->w_ih[d])) || (rc = ocr__on_dev(ctx, fn, w->w_hh[d])) || (rc = ocr__on_dev(ctx, fn, w->b_ih[d])) ||
            (rc = ocr__on_dev(ctx, fn, w->b_hh[d])))
            return rc;
    return OCR_OK;
}

/* ocr_nn.h's fast path on the device: every step's input projection in one GEMM, then per step the recurrent GEMM
   (h_prev W_hh^T added to the step's gate rows) and the pointwise kernel. lengths stays on the host (ocr_nn.h
   checked it there); a copy goes to the device. */
OCRDEF int ocr_cuda_lstm_forward(ocr_ctx *ctx, const ocr_tensor *x, const ocr_lstm_weights *w, const ocr_tensor *lengths, ocr_tensor *y,
                                 ocr_tensor *saved) {
    const char *fn = "ocr_nn_lstm_forward (cuda)";
    int64_t T = x->shape.dim[0], N = x->shape.dim[1], I = x->shape.dim[2], H = w->w_hh[0]->shape.dim[1], DH = w->directions * H, s;
    int32_t *len = NULL;
    float *gates = NULL, *Y = (float *)y->data;
    size_t bytes;
    int d, rc;
    if ((rc = ocr__begin(ctx, fn, x, w->w_ih[0], y, saved)) || (rc = ocr__lstm_weights_on_dev(ctx, fn, w))) return rc;
    if (lengths) {
        if (!(len = (int32_t *)ocr__dscratch(ctx, OCR__DS_SEQ2, (size_t)N * sizeof(int32_t)))) return ctx->last_status;
        if ((rc = ocr__dcopy(ctx, len, lengths->data, (size_t)N * sizeof(int32_t), OCR__H2D))) return rc;
    }
    if (!saved) {   /* inference: one direction's gates and cells at a time */
        if (!ocr_size_mul((size_t)(T * N), (size_t)(5 * H) * sizeof(float), &bytes))
            return ocr_error(ctx, OCR_EOVERFLOW, "%s: T*N*5H too large", fn);
        if (!(gates = (float *)ocr__dscratch(ctx, OCR__DS_SEQ0, bytes))) return ctx->last_status;
    }
    for (d = 0; d < w->directions; d++) {
        float *sv = saved ? (float *)saved->data + d * T * N * 5 * H : gates;
        const float *w_hh = (const float *)w->w_hh[d]->data;
        const float *b_ih = w->b_ih[d] ? (const float *)w->b_ih[d]->data : NULL, *b_hh = w->b_hh[d] ? (const float *)w->b_hh[d]->data : NULL;
        if ((rc = ocr__op_gemm(ctx, 0, 1, T * N, 4 * H, I, 1.0f, (const float *)x->data, I, (const float *)w->w_ih[d]->data, I, 0.0f, sv,
                               5 * H)))
            return rc;
        for (s = 0; s < T; s++) {
            int64_t t = d ? T - 1 - s : s, tp = d ? t + 1 : t - 1;
            if (s > 0 && (rc = ocr__op_gemm(ctx, 0, 1, N, 4 * H, H, 1.0f, Y + tp * N * DH + d * H, DH, w_hh, H, 1.0f, sv + t * N * 5 * H, 5 * H)))
                return rc;
            OCR__LAUNCH(ctx, ocr__k_lstm_step, (ocr__grid(N * H)), (OCR__BLOCK), sv + t * N * 5 * H,
                        s > 0 ? (const float *)sv + tp * N * 5 * H : (const float *)NULL, b_ih, b_hh, Y + t * N * DH + d * H, DH,
                        (const int32_t *)len, t, N, H);
        }
    }
    return OCR_OK;
}

/* Backward through time as ocr_nn.h's fast path: per step (latest first) the pointwise kernel, then dh = da W_hh
   for the step before; then dx, dW_ih and dW_hh as one GEMM each over all steps, and the bias sums. */
OCRDEF int ocr_cuda_lstm_backward(ocr_ctx *ctx, const ocr_tensor *x, const ocr_lstm_weights *w, const ocr_tensor *y, const ocr_tensor *saved,
                                  const ocr_tensor *dy, ocr_tensor *dx, const ocr_lstm_grads *g) {
    const char *fn = "ocr_nn_lstm_backward (cuda)";
    int64_t T = x->shape.dim[0], N = x->shape.dim[1], I = x->shape.dim[2], H = w->w_hh[0]->shape.dim[1], DH = w->directions * H, s;
    const float *Y = (const float *)y->data, *DY = (const float *)dy->data;
    float *da, *dh, *dc;
    size_t da_bytes, dhc_bytes;
    int d, i, rc;
    if ((rc = ocr__begin(ctx, fn, x, y, saved, dy)) || (rc = ocr__on_dev(ctx, fn, dx)) || (rc = ocr__lstm_weights_on_dev(ctx, fn, w)))
        return rc;
    for (d = 0; d < w->directions; d++) {
        ocr_tensor *gr[4];
        gr[0] = g->w_ih[d]; gr[1] = g->w_hh[d]; gr[2] = g->b_ih[d]; gr[3] = g->b_hh[d];
        for (i = 0; i < 4; i++) if ((rc = ocr__on_dev(ctx, fn, gr[i]))) return rc;
    }
    if (!ocr_size_mul((size_t)(T * N), (size_t)(4 * H) * sizeof(float), &da_bytes) || !ocr_size_mul((size_t)(N * H), 2 * sizeof(float), &dhc_bytes))
        return ocr_error(ctx, OCR_EOVERFLOW, "%s: T*N*4H too large", fn);
    if (!(da = (float *)ocr__dscratch(ctx, OCR__DS_SEQ0, da_bytes)) || !(dh = (float *)ocr__dscratch(ctx, OCR__DS_SEQ1, dhc_bytes)))
        return ctx->last_status;
    dc = dh + N * H;
    for (d = 0; d < w->directions; d++) {
        const float *sv = (const float *)saved->data + d * T * N * 5 * H, *w_hh = (const float *)w->w_hh[d]->data;
        float *dw_ih = g->w_ih[d] ? (float *)g->w_ih[d]->data : NULL, *dw_hh = g->w_hh[d] ? (float *)g->w_hh[d]->data : NULL;
        float *db_ih = g->b_ih[d] ? (float *)g->b_ih[d]->data : NULL, *db_hh = g->b_hh[d] ? (float *)g->b_hh[d]->data : NULL;
        if ((rc = ocr__dzero(ctx, dc, (size_t)(N * H) * sizeof(float)))) return rc;
        for (s = T - 1; s >= 0; s--) {
            int64_t t = d ? T - 1 - s : s, tp = d ? t + 1 : t - 1;
            OCR__LAUNCH(ctx, ocr__k_lstm_step_bwd, (ocr__grid(N * H)), (OCR__BLOCK), sv + t * N * 5 * H,
                        s > 0 ? sv + tp * N * 5 * H : (const float *)NULL, DY + t * N * DH + d * H, DH,
                        s < T - 1 ? (const float *)dh : (const float *)NULL, dc, da + t * N * 4 * H, N, H);
            if (s > 0 && (rc = ocr__op_gemm(ctx, 0, 0, N, H, 4 * H, 1.0f, da + t * N * 4 * H, 4 * H, w_hh, H, 0.0f, dh, H))) return rc;
        }
        if (dx && (rc = ocr__op_gemm(ctx, 0, 0, T * N, I, 4 * H, 1.0f, da, 4 * H, (const float *)w->w_ih[d]->data, I, 1.0f,
                                     (float *)dx->data, I)))
            return rc;
        if (dw_ih && (rc = ocr__op_gemm(ctx, 1, 0, 4 * H, I, T * N, 1.0f, da, 4 * H, (const float *)x->data, I, 1.0f, dw_ih, I))) return rc;
        /* h_prev of step t is y[t-1] (forward) or y[t+1] (reverse): the da rows of steps 1.. against y shifted by one step */
        if (dw_hh && T > 1 &&
            (rc = ocr__op_gemm(ctx, 1, 0, 4 * H, H, (T - 1) * N, 1.0f, d ? da : da + N * 4 * H, 4 * H, d ? Y + N * DH + d * H : Y + d * H,
                               DH, 1.0f, dw_hh, H)))
            return rc;
        if (db_ih || db_hh) OCR__LAUNCH(ctx, ocr__k_lstm_bias_grad, (ocr__grid(4 * H)), (OCR__BLOCK), (const float *)da, T * N, 4 * H, db_ih, db_hh);
    }
    return OCR_OK;
}

OCRDEF int ocr_cuda_linear_forward(ocr_ctx *ctx, const ocr_tensor *x, const ocr_tensor *w, const ocr_tensor *b, ocr_tensor *y) {
    const char *fn = "ocr_nn_linear_forward (cuda)";
    int64_t I = w->shape.dim[1], K = w->shape.dim[0], R = ocr_tensor_numel(y) / (K ? K : 1);
    int rc;
    if ((rc = ocr__begin(ctx, fn, x, w, b, y))) return rc;
    if (R * K == 0) return OCR_OK;
    OCR__LAUNCH(ctx, ocr__k_rows_from_bias, (ocr__grid(R * K)), (OCR__BLOCK), (float *)y->data, b ? (const float *)b->data : (const float *)NULL,
                R, K);
    return ocr__op_gemm(ctx, 0, 1, R, K, I, 1.0f, (const float *)x->data, I, (const float *)w->data, I, 1.0f, (float *)y->data, K);
}

OCRDEF int ocr_cuda_linear_backward(ocr_ctx *ctx, const ocr_tensor *x, const ocr_tensor *w, const ocr_tensor *dy, ocr_tensor *dx,
                                    ocr_tensor *dw, ocr_tensor *db) {
    const char *fn = "ocr_nn_linear_backward (cuda)";
    int64_t I = w->shape.dim[1], K = w->shape.dim[0], R = ocr_tensor_numel(dy) / (K ? K : 1);
    const float *g = (const float *)dy->data;
    int rc;
    if ((rc = ocr__begin(ctx, fn, x, w, dy, dx)) || (rc = ocr__on_dev(ctx, fn, dw)) || (rc = ocr__on_dev(ctx, fn, db))) return rc;
    if (db && K) OCR__LAUNCH(ctx, ocr__k_column_sums, (ocr__grid(K)), (OCR__BLOCK), g, R, K, (float *)db->data);
    if (dw && (rc = ocr__op_gemm(ctx, 1, 0, K, I, R, 1.0f, g, K, (const float *)x->data, I, 1.0f, (float *)dw->data, I))) return rc;
    if (dx && (rc = ocr__op_gemm(ctx, 0, 0, R, I, K, 1.0f, g, K, (const float *)w->data, I, 1.0f, (float *)dx->data, I))) return rc;
    return OCR_OK;
}

/* widths stays on the host (ocr_nn.h checked it there); a copy goes to the device */
OCRDEF int ocr_cuda_mask_columns(ocr_ctx *ctx, ocr_tensor *x, const ocr_tensor *widths) {
    const char *fn = "ocr_nn_mask_columns (cuda)";
    int64_t N = x->shape.dim[0], n = ocr_tensor_numel(x);
    int32_t *v;
    int rc;
    if ((rc = ocr__begin(ctx, fn, x, NULL, NULL, NULL))) return rc;
    if (!n) return OCR_OK;
    if (!(v = (int32_t *)ocr__dscratch(ctx, OCR__DS_SEQ2, (size_t)N * sizeof(int32_t)))) return ctx->last_status;
    if ((rc = ocr__dcopy(ctx, v, widths->data, (size_t)N * sizeof(int32_t), OCR__H2D))) return rc;
    OCR__LAUNCH(ctx, ocr__k_mask_columns, (ocr__grid(n)), (OCR__BLOCK), (float *)x->data, (const int32_t *)v, N,
                x->shape.dim[1] * x->shape.dim[2], x->shape.dim[3]);
    return OCR_OK;
}

/* The CTC arrays in device scratch SEQ1, one layout for both calls: each sample's offsets [2N] (int64), then the
   target and input lengths [2N] and the targets (int32) */
typedef struct { int64_t *offsets; int32_t *lengths, *targets; } ocr__cu_ctc_meta;
static ocr__cu_ctc_meta ocr__cu_ctc_layout(void *seq1, int64_t N) {
    ocr__cu_ctc_meta m;
    m.offsets = (int64_t *)seq1;
    m.lengths = (int32_t *)(m.offsets + 2 * N);
    m.targets = m.lengths + 2 * N;
    return m;
}

/* CTC for ocr_loss_ctc, which checks everything and keeps the reduction (one place for both devices). The host
   arrays: targets [n_targets], target and input lengths [N], offsets [2N] (each sample's first label, then its first
   double of the tables); nll [N] receives each sample's negative log-likelihood (HUGE_VAL: no alignment). The tables
   stay in device scratch for ocr_cuda_ctc_gradient, which follows with the same log_probs. */
OCRDEF int ocr_cuda_ctc_tables(ocr_ctx *ctx, const ocr_tensor *log_probs, const int32_t *targets, int64_t n_targets,
                               const int32_t *target_lengths, const int32_t *input_lengths, const int64_t *offsets, int64_t table_doubles,
                               int blank, double *nll) {
    const char *fn = "ocr_loss_ctc (cuda)";
    int64_t N = log_probs->shape.dim[1], C = log_probs->shape.dim[2];
    size_t meta_bytes = (size_t)(2 * N) * sizeof(int64_t) + (size_t)(2 * N + n_targets) * sizeof(int32_t), tab_bytes;
    void *seq1;
    ocr__cu_ctc_meta meta;
    double *tables, *dnll;
    int rc;
    if ((rc = ocr__begin(ctx, fn, log_probs, NULL, NULL, NULL))) return rc;
    if (!ocr_size_mul((size_t)table_doubles, sizeof(double), &tab_bytes)) return ocr_error(ctx, OCR_EOVERFLOW, "%s: tables too large", fn);
    if (!(seq1 = ocr__dscratch(ctx, OCR__DS_SEQ1, meta_bytes)) ||
        !(tables = (double *)ocr__dscratch(ctx, OCR__DS_SEQ0, tab_bytes ? tab_bytes : sizeof(double))) ||
        !(dnll = (double *)ocr__dscratch(ctx, OCR__DS_SEQ2, (size_t)(2 * N) * sizeof(double))))
        return ctx->last_status;
    meta = ocr__cu_ctc_layout(seq1, N);
    if ((rc = ocr__dcopy(ctx, meta.offsets, offsets, (size_t)(2 * N) * sizeof(int64_t), OCR__H2D)) ||
        (rc = ocr__dcopy(ctx, meta.lengths, target_lengths, (size_t)N * sizeof(int32_t), OCR__H2D)) ||
        (rc = ocr__dcopy(ctx, meta.lengths + N, input_lengths, (size_t)N * sizeof(int32_t), OCR__H2D)) ||
        (rc = ocr__dcopy(ctx, meta.targets, targets, (size_t)n_targets * sizeof(int32_t), OCR__H2D)))
        return rc;
    OCR__LAUNCH(ctx, ocr__k_ctc_tables, ((unsigned)(N < OCR__MAX_GRID ? N : OCR__MAX_GRID)), (OCR__BLOCK), (const float *)log_probs->data,
                (const int32_t *)meta.targets, (const int64_t *)meta.offsets, (const int32_t *)meta.lengths, N, C, blank, tables, dnll);
    ocr__st(ctx)->ctc_samples = N;
    return ocr__dcopy(ctx, nll, dnll, (size_t)N * sizeof(double), OCR__D2H);
}

/* grad += weight[n] * (exp(log_probs) - posterior) on frames t < input_lengths[n], weight (host, [N]) being
   grad_scale times the reduction's factor, 0 for a skipped sample */
OCRDEF int ocr_cuda_ctc_gradient(ocr_ctx *ctx, const ocr_tensor *log_probs, int blank, const double *weight, ocr_tensor *d_log_probs) {
    const char *fn = "ocr_loss_ctc (cuda, gradient)";
    ocr__cuda_state *st;
    int64_t T = log_probs->shape.dim[0], N = log_probs->shape.dim[1], C = log_probs->shape.dim[2];
    ocr__cu_ctc_meta meta;
    double *dnll;
    int rc;
    if ((rc = ocr__begin(ctx, fn, log_probs, d_log_probs, NULL, NULL))) return rc;
    st = ocr__st(ctx);
    if (st->ctc_samples != N)
        return ocr_error(ctx, OCR_ESTATE, "%s: the tables in scratch are for %lld samples, not %lld: call ocr_cuda_ctc_tables first", fn,
                         (long long)st->ctc_samples, (long long)N);
    meta = ocr__cu_ctc_layout(st->scratch[OCR__DS_SEQ1], N);
    dnll = (double *)st->scratch[OCR__DS_SEQ2];
    if ((rc = ocr__dcopy(ctx, dnll + N, weight, (size_t)N * sizeof(double), OCR__H2D))) return rc;
    OCR__LAUNCH(ctx, ocr__k_ctc_grad, (ocr__grid(T * N * C)), (OCR__BLOCK), (const float *)log_probs->data,
                (const int32_t *)meta.targets, (const int64_t *)meta.offsets, (const int32_t *)meta.lengths, T, N, C, blank,
                (const double *)st->scratch[OCR__DS_SEQ0],
                (const double *)dnll, (const double *)(dnll + N), (float *)d_log_probs->data);
    st->ctc_samples = -1;
    return OCR_OK;
}

OCRDEF int ocr_cuda_concat_forward(ocr_ctx *ctx, const ocr_tensor *const *xs, int n, ocr_tensor *y) {
    /* the forward reads the parts only; the shared helper takes them as writable for the backward */
    return ocr__concat(ctx, "ocr_nn_concat_forward (cuda)", y, (ocr_tensor *const *)xs, n, 0);
}

OCRDEF int ocr_cuda_concat_backward(ocr_ctx *ctx, const ocr_tensor *dy, ocr_tensor *const *dxs, int n) {
    return ocr__concat(ctx, "ocr_nn_concat_backward (cuda)", (ocr_tensor *)dy, dxs, n, 1);
}

/* ---------------------------------------------------------------- optimizers, reductions */

OCRDEF int ocr_cuda_sgd_update(ocr_ctx *ctx, float *param, const float *grad, float *momentum_buf, int64_t n, float lr, float momentum,
                               float dampening, float weight_decay, int nesterov, int first_step) {
    int rc = ocr__ready(ctx, "ocr_cuda_sgd_update");
    if (rc) return rc;
    snprintf(ocr__st(ctx)->op, sizeof ocr__st(ctx)->op, "ocr_cuda_sgd_update of %lld values", (long long)n);
    if (n > 0) OCR__LAUNCH(ctx, ocr__k_sgd, (ocr__grid(n)), (OCR__BLOCK), param, grad, momentum_buf, n, lr, momentum, dampening,
                           weight_decay, nesterov, first_step);
    return OCR_OK;
}

OCRDEF int ocr_cuda_adamw_update(ocr_ctx *ctx, float *param, const float *grad, float *m, float *v, int64_t n, float lr, float beta1,
                                 float beta2, float eps, float weight_decay, int64_t steps_done) {
    double t = (double)(steps_done + 1);
    float bc1 = (float)(1.0 - pow(beta1, t)), bc2_sqrt = (float)sqrt(1.0 - pow(beta2, t));
    int rc = ocr__ready(ctx, "ocr_cuda_adamw_update");
    if (rc) return rc;
    snprintf(ocr__st(ctx)->op, sizeof ocr__st(ctx)->op, "ocr_cuda_adamw_update of %lld values", (long long)n);
    if (n > 0) OCR__LAUNCH(ctx, ocr__k_adamw, (ocr__grid(n)), (OCR__BLOCK), param, grad, m, v, n, lr, weight_decay, beta1, beta2, eps,
                           lr / bc1, bc2_sqrt);
    return OCR_OK;
}

/* Sums n_values columns of per-block partials [n_blocks, n_values] on the device and brings the totals back. */
static int ocr__reduce(ocr_ctx *ctx, const double *part, int64_t n_blocks, int64_t n_values, double *host_out) {
    double *out = (double *)ocr__dscratch(ctx, OCR__DS_REDUCED, (size_t)n_values * sizeof(double));
    if (!out) return ctx->last_status;
    OCR__LAUNCH(ctx, ocr__k_reduce_parts, ((unsigned)n_values), (OCR__BLOCK), part, n_blocks, n_values, out);
    return ocr__dcopy(ctx, host_out, out, (size_t)n_values * sizeof(double), OCR__D2H);
}

static double *ocr__parts(ocr_ctx *ctx, int64_t n_blocks, int64_t n_values) {
    return (double *)ocr__dscratch(ctx, OCR__DS_PART, (size_t)(n_blocks * n_values) * sizeof(double));
}

OCRDEF int ocr_cuda_sum_squares(ocr_ctx *ctx, const float *x, int64_t n, double *out) {
    unsigned G = ocr__grid(n);
    double *part;
    int rc = ocr__ready(ctx, "ocr_cuda_sum_squares");
    if (rc) return rc;
    *out = 0.0;
    snprintf(ocr__st(ctx)->op, sizeof ocr__st(ctx)->op, "ocr_cuda_sum_squares of %lld values", (long long)n);
    if (n <= 0) return OCR_OK;
    if (!(part = ocr__parts(ctx, G, 1))) return ctx->last_status;
    OCR__LAUNCH(ctx, ocr__k_sumsq, (G), (OCR__BLOCK), x, n, part);
    return ocr__reduce(ctx, part, G, 1, out);
}

OCRDEF int ocr_cuda_zero_bytes(void *ptr, size_t bytes) {
    if (!bytes) return OCR_OK;
#ifdef OCR_CUDA_EMULATE
    memset(ptr, 0, bytes);
    return OCR_OK;
#else
    return cudaMemset(ptr, 0, bytes) == cudaSuccess ? OCR_OK : OCR_ECUDA;
#endif
}

OCRDEF int ocr_cuda_scale(ocr_ctx *ctx, float *x, int64_t n, float s) {
    int rc = ocr__ready(ctx, "ocr_cuda_scale");
    if (rc) return rc;
    snprintf(ocr__st(ctx)->op, sizeof ocr__st(ctx)->op, "ocr_cuda_scale of %lld values", (long long)n);
    if (n > 0) OCR__LAUNCH(ctx, ocr__k_pointwise, (ocr__grid(n)), (OCR__BLOCK), (int)OCR__CU_PW_SCALE, (const float *)NULL, (const float *)NULL, x, n, s);
    return OCR_OK;
}

OCRDEF int ocr_cuda_ema(ocr_ctx *ctx, float *avg, const float *x, int64_t n, float decay) {
    int rc = ocr__ready(ctx, "ocr_cuda_ema");
    if (rc) return rc;
    snprintf(ocr__st(ctx)->op, sizeof ocr__st(ctx)->op, "ocr_cuda_ema of %lld values", (long long)n);
    if (n > 0) OCR__LAUNCH(ctx, ocr__k_pointwise, (ocr__grid(n)), (OCR__BLOCK), (int)OCR__CU_PW_EMA, x, (const float *)NULL, avg, n, decay);
    return OCR_OK;
}

/* ---------------------------------------------------------------- losses (called by ocr_loss.h after its validation) */

static float ocr__host_key_value(uint32_t key) {
    float l;
    key -= 1u;
    memcpy(&l, &key, sizeof l);
    return l;
}

/* The BCE of ocr_loss.h on the device; OHEM's selection runs there too (radix passes over the keys). */
static int ocr__bce_dev(ocr_ctx *ctx, const ocr_loss_bce_config *cfg, const float *x, const float *gt, const float *mask, int64_t n,
                        float grad_scale, float *grad, double *value_out) {
    unsigned G = ocr__grid(n);
    int ohem = cfg->mode == OCR_LOSS_BCE_OHEM, rc, pass;
    int64_t pos, neg, kept = 0, above = 0, equal = 1;
    double stats[4], w_pos = 0.0, w_neg = 0.0, w_tie = 0.0, value;
    uint32_t cut = 0xffffffffu, *keys = NULL;
    double *part;
    size_t key_bytes;
    *value_out = 0.0;
    if (n == 0) return OCR_OK;
    if (!ocr_size_mul((size_t)n, sizeof(uint32_t), &key_bytes)) return ocr_error(ctx, OCR_EOVERFLOW, "%s: too many pixels", ocr__op_str(ctx));
    if (!(part = ocr__parts(ctx, G, 4))) return ctx->last_status;
    if (ohem && !(keys = (uint32_t *)ocr__dscratch(ctx, OCR__DS_KEYS, key_bytes))) return ctx->last_status;
    OCR__LAUNCH(ctx, ocr__k_bce_stats, (G), (OCR__BLOCK), x, gt, mask, n, keys, part);
    if ((rc = ocr__reduce(ctx, part, G, 4, stats))) return rc;
    pos = (int64_t)stats[0];
    neg = (int64_t)stats[1];
    if (ohem) {
        double quota = floor((double)pos * (double)cfg->negative_ratio);
        kept = quota < (double)neg ? (int64_t)quota : neg;
        if (kept > 0) {
            static const int shifts[3] = {21, 10, 0}, widths[3] = {11, 11, 10};
            ocr__radix_state st, *dst;
            unsigned long long *hist;
            size_t off = (sizeof st + 63) & ~(size_t)63;
            unsigned char *small = (unsigned char *)ocr__dscratch(ctx, OCR__DS_SMALL, off + OCR__CU_RADIX_BINS * sizeof(unsigned long long));
            if (!small) return ctx->last_status;
            dst = (ocr__radix_state *)(void *)small;
            hist = (unsigned long long *)(void *)(small + off);
            memset(&st, 0, sizeof st);
            st.need = (unsigned long long)kept;
            if ((rc = ocr__dcopy(ctx, dst, &st, sizeof st, OCR__H2D)) || (rc = ocr__dzero(ctx, hist, OCR__CU_RADIX_BINS * sizeof *hist))) return rc;
            for (pass = 0; pass < 3; pass++) {
                uint32_t digit_mask = (1u << widths[pass]) - 1u;
                OCR__LAUNCH(ctx, ocr__k_radix_hist, (G), (OCR__BLOCK), keys, n, dst, shifts[pass], digit_mask, hist);
                OCR__LAUNCH(ctx, ocr__k_radix_walk, (1), (1), dst, hist, shifts[pass], digit_mask);
            }
            if ((rc = ocr__dcopy(ctx, &st, dst, sizeof st, OCR__D2H))) return rc;
            cut = st.prefix;
            above = kept - (int64_t)st.need;
            equal = (int64_t)st.count;
        }
    }
    {
        double w[3];
        ocr_loss_bce_weights(cfg, pos, neg, kept, above, equal, w);
        w_pos = w[0]; w_neg = w[1]; w_tie = w[2];
    }
    value = w_pos * stats[2];
    if (!ohem) value += w_neg * stats[3];
    if (ohem || grad)
        OCR__LAUNCH(ctx, ocr__k_bce_apply, (G), (OCR__BLOCK), x, gt, mask, n, ohem, keys, grad, (float)(w_pos * grad_scale),
                    (float)(w_neg * grad_scale), (float)(w_tie * grad_scale), cut, ohem ? part : (double *)NULL);
    if (ohem && kept > 0) {
        double sel;
        if ((rc = ocr__reduce(ctx, part, G, 1, &sel))) return rc;
        value += w_neg * (sel + (double)(kept - above) * ocr__host_key_value(cut));
    }
    *value_out = value;
    return OCR_OK;
}

static int ocr__dice_dev(ocr_ctx *ctx, float eps, const float *pred, int from_logits, const float *gt, const float *mask, const float *w,
                         int64_t n, float grad_scale, float *grad, double *value_out) {
    unsigned G = ocr__grid(n);
    double s[3] = {0.0, 0.0, 0.0}, denom, *part;
    int rc;
    if (n > 0) {
        if (!(part = ocr__parts(ctx, G, 3))) return ctx->last_status;
        OCR__LAUNCH(ctx, ocr__k_dice_stats, (G), (OCR__BLOCK), pred, from_logits, gt, mask, w, n, part);
        if ((rc = ocr__reduce(ctx, part, G, 3, s))) return rc;
    }
    denom = s[1] + s[2] + (double)eps;
    if (grad && n > 0)
        OCR__LAUNCH(ctx, ocr__k_dice_grad, (ocr__grid(n)), (OCR__BLOCK), pred, from_logits, gt, mask, w, n, (float)(-2.0 / denom * grad_scale),
                    (float)(2.0 * s[0] / (denom * denom) * grad_scale), grad);
    *value_out = 1.0 - 2.0 * s[0] / denom;
    return OCR_OK;
}

static int ocr__l1_dev(ocr_ctx *ctx, const float *pred, const float *target, const float *mask, int64_t n, float grad_scale, float *grad,
                       double *value_out) {
    unsigned G = ocr__grid(n);
    double s[2] = {0.0, 0.0}, *part;
    int rc;
    *value_out = 0.0;
    if (n == 0) return OCR_OK;
    if (!(part = ocr__parts(ctx, G, 2))) return ctx->last_status;
    OCR__LAUNCH(ctx, ocr__k_l1_stats, (G), (OCR__BLOCK), pred, target, mask, n, part);
    if ((rc = ocr__reduce(ctx, part, G, 2, s))) return rc;
    if (s[1] == 0.0) return OCR_OK; /* empty mask: 0 and no gradient, as the official MaskL1Loss */
    if (grad) OCR__LAUNCH(ctx, ocr__k_l1_grad, (ocr__grid(n)), (OCR__BLOCK), pred, target, mask, n, grad_scale / s[1], grad);
    *value_out = s[0] / s[1];
    return OCR_OK;
}

#define OCR__F(t) ((const float *)(t)->data)
#define OCR__G(t) ((t) ? (float *)(t)->data : (float *)NULL)

OCRDEF int ocr_cuda_loss_bce(ocr_ctx *ctx, const ocr_loss_bce_config *cfg, const ocr_tensor *logits, const ocr_tensor *gt,
                             const ocr_tensor *mask, float grad_scale, double *loss, ocr_tensor *d_logits) {
    double v;
    int rc;
    if ((rc = ocr__begin(ctx, "ocr_loss_bce (cuda)", logits, gt, mask, d_logits)) ||
        (rc = ocr__bce_dev(ctx, cfg, OCR__F(logits), OCR__F(gt), OCR__F(mask), ocr_tensor_numel(logits), grad_scale, OCR__G(d_logits), &v)))
        return rc;
    if (loss) *loss = v;
    return OCR_OK;
}

OCRDEF int ocr_cuda_loss_dice(ocr_ctx *ctx, float eps, const ocr_tensor *pred, const ocr_tensor *gt, const ocr_tensor *mask,
                              const ocr_tensor *weights, float grad_scale, double *loss, ocr_tensor *d_pred) {
    double v;
    int rc;
    if ((rc = ocr__begin(ctx, "ocr_loss_dice (cuda)", pred, gt, mask, d_pred)) || (rc = ocr__on_dev(ctx, "ocr_loss_dice", weights)) ||
        (rc = ocr__dice_dev(ctx, eps, OCR__F(pred), 0, OCR__F(gt), OCR__F(mask), weights ? OCR__F(weights) : NULL, ocr_tensor_numel(pred),
                            grad_scale, OCR__G(d_pred), &v)))
        return rc;
    if (loss) *loss = v;
    return OCR_OK;
}

OCRDEF int ocr_cuda_loss_masked_l1(ocr_ctx *ctx, const ocr_tensor *pred, const ocr_tensor *target, const ocr_tensor *mask, float grad_scale,
                                   double *loss, ocr_tensor *d_pred) {
    double v;
    int rc;
    if ((rc = ocr__begin(ctx, "ocr_loss_masked_l1 (cuda)", pred, target, mask, d_pred)) ||
        (rc = ocr__l1_dev(ctx, OCR__F(pred), OCR__F(target), OCR__F(mask), ocr_tensor_numel(pred), grad_scale, OCR__G(d_pred), &v)))
        return rc;
    if (loss) *loss = v;
    return OCR_OK;
}

OCRDEF int ocr_cuda_loss_db_step_forward(ocr_ctx *ctx, float k, const ocr_tensor *prob_logits, const ocr_tensor *thresh, ocr_tensor *binary) {
    int64_t n;
    int rc;
    if ((rc = ocr__begin(ctx, "ocr_loss_db_step_forward (cuda)", prob_logits, thresh, binary, NULL))) return rc;
    n = ocr_tensor_numel(prob_logits);
    if (n) OCR__LAUNCH(ctx, ocr__k_step_fwd, (ocr__grid(n)), (OCR__BLOCK), OCR__F(prob_logits), OCR__F(thresh), k, (float *)NULL,
                       (float *)binary->data, n);
    return OCR_OK;
}

OCRDEF int ocr_cuda_loss_db_step_backward(ocr_ctx *ctx, float k, const ocr_tensor *prob_logits, const ocr_tensor *thresh,
                                          const ocr_tensor *d_binary, ocr_tensor *d_prob_logits, ocr_tensor *d_thresh) {
    int64_t n;
    int rc;
    if ((rc = ocr__begin(ctx, "ocr_loss_db_step_backward (cuda)", prob_logits, thresh, d_binary, d_prob_logits)) ||
        (rc = ocr__on_dev(ctx, "ocr_loss_db_step_backward", d_thresh)))
        return rc;
    n = ocr_tensor_numel(prob_logits);
    if (n) OCR__LAUNCH(ctx, ocr__k_step_bwd, (ocr__grid(n)), (OCR__BLOCK), OCR__F(prob_logits), OCR__F(thresh), k, (const float *)NULL,
                       OCR__F(d_binary), 1, OCR__G(d_prob_logits), OCR__G(d_thresh), n);
    return OCR_OK;
}

OCRDEF int ocr_cuda_loss_db(ocr_ctx *ctx, const ocr_db_loss_config *cfg, const ocr_tensor *prob_logits, const ocr_tensor *thresh,
                            const ocr_tensor *gt_shrink, const ocr_tensor *mask_shrink, const ocr_tensor *gt_thresh,
                            const ocr_tensor *mask_thresh, ocr_db_loss_terms *out, ocr_tensor *d_prob_logits, ocr_tensor *d_thresh) {
    const char *fn = "ocr_loss_db (cuda)";
    ocr_db_loss_terms r;
    const float *x, *T, *gs, *ms;
    float *dx, *dT, *z = NULL, *dz = NULL;
    int64_t n;
    int rc, need_z, grads = d_prob_logits || d_thresh;
    size_t z_bytes;
    if ((rc = ocr__begin(ctx, fn, prob_logits, thresh, gt_shrink, mask_shrink)) || (rc = ocr__on_dev(ctx, fn, gt_thresh)) ||
        (rc = ocr__on_dev(ctx, fn, mask_thresh)) || (rc = ocr__on_dev(ctx, fn, d_prob_logits)) || (rc = ocr__on_dev(ctx, fn, d_thresh)))
        return rc;
    n = ocr_tensor_numel(prob_logits);
    x = OCR__F(prob_logits); T = OCR__F(thresh); gs = OCR__F(gt_shrink); ms = OCR__F(mask_shrink);
    dx = OCR__G(d_prob_logits); dT = OCR__G(d_thresh);
    memset(&r, 0, sizeof r);
    need_z = (cfg->dice_weight > 0.0f || cfg->binary_bce_weight > 0.0f) && n > 0;
    if (need_z) {
        if (!ocr_size_mul((size_t)n, 2 * sizeof(float), &z_bytes)) return ocr_error(ctx, OCR_EOVERFLOW, "%s: too many pixels", fn);
        if (!(z = (float *)ocr__dscratch(ctx, OCR__DS_Z, z_bytes))) return ctx->last_status;
        dz = z + n;
        OCR__LAUNCH(ctx, ocr__k_step_fwd, (ocr__grid(n)), (OCR__BLOCK), x, T, cfg->k, z, (float *)NULL, n);
        if (grads && (rc = ocr__dzero(ctx, dz, (size_t)n * sizeof(float)))) return rc;
    }
    if (cfg->bce_weight > 0.0f && (rc = ocr__bce_dev(ctx, &cfg->bce, x, gs, ms, n, cfg->bce_weight * cfg->grad_scale, dx, &r.bce))) return rc;
    if (cfg->dice_weight > 0.0f &&
        (rc = ocr__dice_dev(ctx, cfg->dice_eps, z, 1, gs, ms, NULL, n, cfg->dice_weight * cfg->grad_scale, grads ? dz : NULL, &r.dice)))
        return rc;
    if (cfg->binary_bce_weight > 0.0f &&
        (rc = ocr__bce_dev(ctx, &cfg->bce, z, gs, ms, n, cfg->binary_bce_weight * cfg->grad_scale, grads ? dz : NULL, &r.bce_binary)))
        return rc;
    if (cfg->l1_weight > 0.0f &&
        (rc = ocr__l1_dev(ctx, T, OCR__F(gt_thresh), OCR__F(mask_thresh), n, cfg->l1_weight * cfg->grad_scale, dT, &r.l1)))
        return rc;
    if (cfg->prob_dice_weight > 0.0f && n > 0 &&
        (rc = ocr__dice_dev(ctx, cfg->dice_eps, x, 1, gs, ms, NULL, n, cfg->prob_dice_weight * cfg->grad_scale, dx, &r.dice_prob)))
        return rc;
    if (need_z && grads)
        OCR__LAUNCH(ctx, ocr__k_step_bwd, (ocr__grid(n)), (OCR__BLOCK), x, T, cfg->k, (const float *)z, (const float *)dz, 0, dx, dT, n);
    r.total = (double)cfg->bce_weight * r.bce + (double)cfg->dice_weight * r.dice + (double)cfg->l1_weight * r.l1 +
              (double)cfg->binary_bce_weight * r.bce_binary + (double)cfg->prob_dice_weight * r.dice_prob;
    if (out) *out = r;
    return OCR_OK;
}

/* ---------------------------------------------------------------- emulator self-tests (emulation builds only) */
#ifdef OCR_CUDA_EMULATE
/* Known kernels that check the emulator itself, run by tests/test_cuda_emu.cpp:
   "warp"                 shuffles (down, xor, up, indexed, half-warp masks in divergent code), votes, atomics:
                          compared with values computed here on the host
   "divergent_barrier"    __syncthreads inside a branch half the block skips: must fail naming the barrier
   "barrier_sites"        two halves wait at two different __syncthreads: must fail
   "exit_before_barrier"  one thread returns before a barrier: must fail
   "divergent_shuffle"    a full-mask shuffle that half the warp never reaches: must fail
   "race"                 a missing __syncthreads between shared-memory writes and reads (ThreadSanitizer must flag it)
   "oob"                  one thread writes one element past a device buffer (AddressSanitizer must flag it) */
#define OCR__FULL 0xffffffffu
static __global__ void ocr__k_emu_warp(const int *in, int *out, int *total, float *ftotal, int *maxv) {
    int gid = (int)(blockIdx.x * blockDim.x + threadIdx.x), lane = (int)(threadIdx.x & 31u), v = in[gid], o;
    int s = v, x = v, scan = v, half = v, any, all, bcast;
    unsigned b;
    for (o = 16; o > 0; o >>= 1) s += __shfl_down_sync(OCR__FULL, s, (unsigned)o);
    for (o = 16; o > 0; o >>= 1) x += __shfl_xor_sync(OCR__FULL, x, o);
    for (o = 1; o < 32; o <<= 1) { int t = __shfl_up_sync(OCR__FULL, scan, (unsigned)o); if (lane >= o) scan += t; }
    b = __ballot_sync(OCR__FULL, v & 1);
    any = __any_sync(OCR__FULL, v > 90);
    all = __all_sync(OCR__FULL, v >= 3);
    if (lane < 16) { for (o = 8; o > 0; o >>= 1) half += __shfl_xor_sync(0x0000ffffu, half, o); }
    else { for (o = 8; o > 0; o >>= 1) half += __shfl_xor_sync(0xffff0000u, half, o); }
    bcast = __shfl_sync(OCR__FULL, v, 5);
    atomicAdd(total, v);
    atomicAdd(ftotal, (float)v);
    atomicMax(maxv, v);
    out[gid * 8 + 0] = s; out[gid * 8 + 1] = x; out[gid * 8 + 2] = scan; out[gid * 8 + 3] = (int)b;
    out[gid * 8 + 4] = any; out[gid * 8 + 5] = all; out[gid * 8 + 6] = half; out[gid * 8 + 7] = bcast;
}

static __global__ void ocr__k_emu_divergent_barrier(int *out) {
    if (threadIdx.x < 16) __syncthreads();
    out[threadIdx.x] = 1;
}
static __global__ void ocr__k_emu_barrier_sites(int *out) {
    if (threadIdx.x < 16) __syncthreads();
    else __syncthreads();
    out[threadIdx.x] = 1;
}
static __global__ void ocr__k_emu_exit_before_barrier(int *out) {
    if (threadIdx.x == 3) return;
    __syncthreads();
    out[threadIdx.x] = 1;
}
static __global__ void ocr__k_emu_divergent_shuffle(int *out) {
    int v = (int)threadIdx.x;
    if ((threadIdx.x & 31u) < 16) v = __shfl_sync(OCR__FULL, v, 0);
    out[threadIdx.x] = v;
}
static __global__ void ocr__k_emu_race(int *out) {
    OCR__SHARED(int, sh, 64);
    sh[threadIdx.x] = (int)threadIdx.x;
    /* missing __syncthreads(): the read below races with the neighbour's write */
    out[blockIdx.x * blockDim.x + threadIdx.x] = sh[(threadIdx.x + 1) % blockDim.x];
}
static __global__ void ocr__k_emu_oob(int *out, int n) {
    int i = (int)(blockIdx.x * blockDim.x + threadIdx.x);
    if (i <= n) out[i] = i; /* <= : one element too far */
}

static int ocr__emu_expect(ocr_ctx *ctx, const char *what, long long got, long long want) {
    if (got == want) return OCR_OK;
    return ocr_error(ctx, OCR_ECUDA, "ocr_cuda_emu_selftest: %s is %lld, expected %lld", what, got, want);
}

static int ocr__emu_warp_test(ocr_ctx *ctx) {
    enum { BLOCKS = 3, THREADS = 64, N = BLOCKS * THREADS };
    int in[N], *out = (int *)calloc(N * 8, sizeof(int)), total = 0, maxv = -1, i, rc = OCR_OK;
    float ftotal = 0.0f;
    for (i = 0; i < N; i++) in[i] = (i * 37 + 11) % 97;
    if (!out) return ocr_error(ctx, OCR_ENOMEM, "ocr_cuda_emu_selftest: out of memory");
    {
        char msg[1000];
        if (ocr__emu_launch_fn(msg, sizeof msg, "ocr__k_emu_warp", dim3(BLOCKS), dim3(THREADS),
                               [&]() { ocr__k_emu_warp(in, out, &total, &ftotal, &maxv); }))
            rc = ocr_error(ctx, OCR_ECUDA, "ocr_cuda_emu_selftest: %s", msg);
    }
    for (i = 0; i < N && !rc; i++) {
        int w0 = i / 32 * 32, lane = i % 32, j, s = 0, scan = 0, half = 0, any = 0, all = 1;
        unsigned b = 0;
        char what[64];
        for (j = 0; j < 32; j++) {
            s += in[w0 + j];
            if (j <= lane) scan += in[w0 + j];
            if ((j < 16) == (lane < 16)) half += in[w0 + j];
            if (in[w0 + j] & 1) b |= 1u << j;
            any |= in[w0 + j] > 90;
            all &= in[w0 + j] >= 3;
        }
        snprintf(what, sizeof what, "thread %d", i);
        if ((lane == 0 && (rc = ocr__emu_expect(ctx, "shfl_down warp sum", out[i * 8], s))) ||
            (rc = ocr__emu_expect(ctx, "shfl_xor warp sum", out[i * 8 + 1], s)) ||
            (rc = ocr__emu_expect(ctx, "shfl_up inclusive scan", out[i * 8 + 2], scan)) ||
            (rc = ocr__emu_expect(ctx, "ballot", (unsigned)out[i * 8 + 3], b)) || (rc = ocr__emu_expect(ctx, "any", out[i * 8 + 4], any)) ||
            (rc = ocr__emu_expect(ctx, "all", out[i * 8 + 5], all)) ||
            (rc = ocr__emu_expect(ctx, "half-warp xor sum in divergent code", out[i * 8 + 6], half)) ||
            (rc = ocr__emu_expect(ctx, "indexed shfl from lane 5", out[i * 8 + 7], in[w0 + 5])))
            break;
    }
    if (!rc) {
        int want = 0, wmax = -1;
        for (i = 0; i < N; i++) { want += in[i]; if (in[i] > wmax) wmax = in[i]; }
        if (!(rc = ocr__emu_expect(ctx, "atomicAdd int total", total, want)) && !(rc = ocr__emu_expect(ctx, "atomicMax", maxv, wmax)))
            rc = ocr__emu_expect(ctx, "atomicAdd float total", (long long)ftotal, want); /* small integers: exact in float */
    }
    free(out);
    return rc;
}

OCRDEF int ocr_cuda_emu_selftest(ocr_ctx *ctx, const char *name) {
    int *buf;
    int rc = OCR_OK;
    if (strcmp(name, "warp") == 0) return ocr__emu_warp_test(ctx);
    if (!(buf = (int *)calloc(128, sizeof(int)))) return ocr_error(ctx, OCR_ENOMEM, "ocr_cuda_emu_selftest: out of memory");
    snprintf(ctx->last_error, sizeof ctx->last_error, "no error");
    {
        ocr__cuda_state tmp;
        void *saved = ctx->cuda;
        memset(&tmp, 0, sizeof tmp);
        snprintf(tmp.op, sizeof tmp.op, "ocr_cuda_emu_selftest '%s'", name);
        ctx->cuda = &tmp; /* the launch macro names the op from the state */
        rc = [&]() -> int {
            if (strcmp(name, "divergent_barrier") == 0) OCR__LAUNCH(ctx, ocr__k_emu_divergent_barrier, (1), (32), buf);
            else if (strcmp(name, "barrier_sites") == 0) OCR__LAUNCH(ctx, ocr__k_emu_barrier_sites, (1), (32), buf);
            else if (strcmp(name, "exit_before_barrier") == 0) OCR__LAUNCH(ctx, ocr__k_emu_exit_before_barrier, (1), (32), buf);
            else if (strcmp(name, "divergent_shuffle") == 0) OCR__LAUNCH(ctx, ocr__k_emu_divergent_shuffle, (1), (64), buf);
            else if (strcmp(name, "race") == 0) OCR__LAUNCH(ctx, ocr__k_emu_race, (2), (64), buf);
            else if (strcmp(name, "oob") == 0) {
                int *small = (int *)malloc(40 * sizeof(int));
                if (!small) return ocr_error(ctx, OCR_ENOMEM, "ocr_cuda_emu_selftest: out of memory");
                OCR__LAUNCH(ctx, ocr__k_emu_oob, (2), (32), small, 40);
                free(small);
            } else return ocr_error(ctx, OCR_EINVAL, "ocr_cuda_emu_selftest: unknown test '%s'", name);
            return OCR_OK;
        }();
        ctx->cuda = saved;
    }
    free(buf);
    return rc;
}
#endif

} /* extern "C" */

/*
MIT License. Copyright (c) 2026 the ocr-c authors.
Permission is hereby granted, free of charge, to any person obtaining a copy of this software and associated
documentation files (the "Software"), to deal in the Software without restriction, including without limitation the
rights to use, copy, modify, merge, publish, distribute, sublicense, and/or sell copies of the Software, and to permit
persons to whom the Software is furnished to do so, subject to the following conditions: The above copyright notice and
this permission notice shall be included in all copies or substantial portions of the Software.
THE SOFTWARE IS PROVIDED "AS IS", WITHOUT WARRANTY OF ANY KIND, EXPRESS OR IMPLIED.
*/
