/* ocr_tensor.h - tensors, contexts, errors, threads, RNG and safetensors for ocr-c.   v0.1  MIT license

   Do this in exactly one C or C++ file:
       #define OCR_TENSOR_IMPLEMENTATION      (or OCR_IMPLEMENTATION for every ocr-c header)
       #include "ocr_tensor.h"
   and link with -lm -lpthread.

   Usage:
       ocr_ctx ctx;
       ocr_tensor x;
       if (ocr_ctx_init(&ctx, 2, 42) != OCR_OK) return 1;           // 2 threads, RNG seed 42
       if (ocr_tensor_alloc(&ctx, &x, "x", OCR_F32, OCR_DEVICE_CPU, ocr_shape4(1, 3, 32, 32)) != OCR_OK ||
           ocr_tensor_fill_normal(&ctx, &x, 0.0f, 1.0f) != OCR_OK ||
           ocr_check_finite(&ctx, "my_op", &x) != OCR_OK)
           fprintf(stderr, "%s\n", ocr_ctx_last_error(&ctx));          // names the op, tensor, shape, value
       ocr_tensor_free(&x);
       ocr_ctx_free(&ctx);

   Conventions shared by every ocr-c module:
   - Layout is NCHW, W contiguous; shapes are outermost first (as PyTorch). At most 4 dims.
   - Every public function that can fail returns int: OCR_OK (0) or a negative OCR_E* code, and leaves a
     message in the context naming the function, the tensor, its shape, dtype, device and the first bad
     value. Library code never exits, aborts or prints; logging goes through ctx->log_fn (silent by default).
   - No mutable global state: threads, scratch memory, RNG and debug flags hang off an ocr_ctx. Two contexts
     in two threads never interfere. A context is used by one thread at a time.
   - Functions that compute gradients ACCUMULATE (+=) into them; callers zero gradients first.

   Options (define before including the implementation):
       OCR_STATIC                  make every function static
       OCR_NO_IMPLEMENTATION       ignore OCR_IMPLEMENTATION in this file (the implementation is compiled in
                                   another; build.sh compiles the library once and links every program to it)
       OCR_MALLOC/OCR_REALLOC/OCR_FREE   all or none: replace the allocator
       OCR_MAX_THREADS             thread-pool cap (default 64)
       OCR_SAFETENSORS_MAX_HEADER  header length cap for files from outside (default 100,000,000 bytes)
   Environment read by ocr_ctx_init: OCR_CHECK_NUMERICS=1, OCR_CUDA_SYNC_DEBUG=1, OCR_NO_WINOGRAD=1 and OCR_REFERENCE=1 set
   the debug flags;
   OCR_CPU_KERNEL=portable|avx2|avx512 forces a GEMM micro-kernel (default: the best the CPU supports).
   Dependencies: C99, POSIX threads, libm.
*/
#ifndef OCR_TENSOR_H
#define OCR_TENSOR_H

/* The implementation uses POSIX (threads, fsync, clock_gettime). This must come before the first system header,
   so an implementation file that includes system headers before ocr-c defines it itself. */
#if (defined(OCR_IMPLEMENTATION) || defined(OCR_TENSOR_IMPLEMENTATION)) && !defined(_POSIX_C_SOURCE) && !defined(_GNU_SOURCE)
#define _POSIX_C_SOURCE 200809L
#endif

#include <stddef.h>
#include <stdint.h>
#include <stdarg.h>
#include <stdlib.h>

/* Every module allocates through these (all or none may be replaced). */
#if defined(OCR_MALLOC) && defined(OCR_FREE) && defined(OCR_REALLOC)
#elif !defined(OCR_MALLOC) && !defined(OCR_FREE) && !defined(OCR_REALLOC)
#define OCR_MALLOC(sz) malloc(sz)
#define OCR_REALLOC(p, sz) realloc(p, sz)
#define OCR_FREE(p) free(p)
#define OCR__DEFAULT_ALLOCATOR
#else
#error "Define all or none of OCR_MALLOC, OCR_REALLOC and OCR_FREE."
#endif

#ifndef OCRDEF
#ifdef OCR_STATIC
#define OCRDEF static
#else
#define OCRDEF extern
#endif
#endif

#ifdef __cplusplus
extern "C" {
#endif

#define OCR_VERSION "0.1.0"
#define OCR_MAX_DIMS 4
#define OCR_NAME_MAX 96
#define OCR_ERROR_MAX 1024
#ifndef OCR_MAX_THREADS
#define OCR_MAX_THREADS 64
#endif
/* Largest element count of one tensor and largest image side; both refuse data we did not author. */
#define OCR_MAX_NUMEL ((int64_t)1 << 40)

#if defined(__GNUC__) || defined(__clang__)
#define OCR__PRINTF(f, a) __attribute__((format(printf, f, a)))
#else
#define OCR__PRINTF(f, a)
#endif

typedef enum {
    OCR_OK = 0,
    OCR_EINVAL = -1,       /* bad argument */
    OCR_ESHAPE = -2,       /* shapes disagree */
    OCR_EDTYPE = -3,       /* wrong dtype */
    OCR_EDEVICE = -4,      /* wrong or mixed device */
    OCR_ENOMEM = -5,       /* allocation failed */
    OCR_EIO = -6,          /* file system error */
    OCR_EFORMAT = -7,      /* malformed file or record */
    OCR_ENONFINITE = -8,   /* NaN or Inf where a finite value is required */
    OCR_ERANGE = -9,       /* value outside its allowed range */
    OCR_EOVERFLOW = -10,   /* size arithmetic overflow or a size above a cap */
    OCR_EUNSUPPORTED = -11,/* valid request this build cannot do */
    OCR_ECUDA = -12,       /* CUDA, cuBLAS or cuDNN failure */
    OCR_ENOTFOUND = -13,   /* missing name or key */
    OCR_ESTATE = -14       /* call made in the wrong state (e.g. backward before forward) */
} ocr_status;

typedef enum { OCR_F32 = 0, OCR_F16, OCR_BF16, OCR_U8, OCR_I32, OCR_I64, OCR_DTYPE_COUNT } ocr_dtype;
typedef enum { OCR_DEVICE_CPU = 0, OCR_DEVICE_CUDA = 1 } ocr_device;

enum {
    OCR_DEBUG_CHECK_NUMERICS = 1u << 0, /* every layer checks outputs and gradients for NaN/Inf */
    OCR_DEBUG_CUDA_SYNC = 1u << 1,      /* synchronise after every CUDA launch and name the kernel */
    OCR_DEBUG_NO_WINOGRAD = 1u << 2,    /* 3x3 convolutions on the direct path only (to compare numerics or speed) */
    /* every CPU op of ocr_nn.h (and ocr_gemm) runs its plain reference loop instead of its fast path (OCR_REFERENCE=1
       sets it): the CPU-side twin of OCR_CUDA_NO_CUBLAS, to tell a fast-path bug from a model bug in one run */
    OCR_DEBUG_REFERENCE = 1u << 3,
    /* Winograd's work items on the AVX-512 forward: bands of whole tile rows only, or runs of 48 tiles wherever they
       can run, instead of the rule's choice between them (the two give the same bits; the tests compare them) */
    OCR_DEBUG_WINO_ROW_BANDS = 1u << 4,
    OCR_DEBUG_WINO_TILE_RUNS = 1u << 5
};

enum { OCR_LOG_DEBUG = 0, OCR_LOG_INFO = 1, OCR_LOG_WARN = 2, OCR_LOG_ERROR = 3 };
typedef void (*ocr_log_fn)(void *user, int level, const char *message);

typedef struct { int ndim; int64_t dim[OCR_MAX_DIMS]; } ocr_shape;

/* xoshiro256** state plus the spare value of the polar normal method; plain data, so it checkpoints. */
typedef struct { uint64_t s[4]; int has_spare; float spare; } ocr_rng;

typedef struct ocr_tensor {
    void *data;             /* contiguous, row-major; 64-byte aligned when owned */
    ocr_shape shape;
    ocr_dtype dtype;
    ocr_device device;
    int owns_data;          /* 1 when ocr_tensor_free releases data */
    char name[OCR_NAME_MAX];
} ocr_tensor;

typedef struct ocr__pool ocr__pool;

/* Scratch slots: one per concurrent use, so nested users never clobber each other. */
enum { OCR_SCRATCH_OP0 = 0, OCR_SCRATCH_OP1 = 1, OCR_SCRATCH_OP2 = 2, OCR_SCRATCH_GEMM_A = 3, OCR_SCRATCH_GEMM_B = 4,
       OCR_SCRATCH_HALF0 = 5, /* OCR_SCRATCH_HALF0 + 0..2: an op's inputs rounded to the mixed-precision type */
       OCR_SCRATCH_THREAD0 = 8,
       OCR_SCRATCH_SLOTS = OCR_SCRATCH_THREAD0 + OCR_MAX_THREADS };

typedef struct ocr_ctx {
    ocr_device device;
    int n_threads;
    unsigned debug_flags;
    ocr_rng rng;
    ocr_log_fn log_fn;
    void *log_user;
    int last_status;
    char last_error[OCR_ERROR_MAX];
    ocr__pool *pool;
    void *scratch[OCR_SCRATCH_SLOTS];
    size_t scratch_size[OCR_SCRATCH_SLOTS];
    int cpu_kernel;        /* GEMM micro-kernel: OCR_CPU_KERNEL_AUTO, _PORTABLE, _AVX2, _AVX512 (env OCR_CPU_KERNEL) */
    int amp;               /* mixed precision, ocr_amp (ocr_nn.h names which op runs in which precision) */
    struct ocr_amp_stats *amp_stats; /* when set, the mixed-precision ops count overflows and underflows here */
    void *cuda;            /* backend state when built with OCR_CUDA */
    /* Data parallelism across processes: when set, training-mode batch normalisation on the CPU sums its per-channel
       statistics over every replica through this (in place, n doubles; 0 on success), so that each normalises with
       the whole global batch's (synchronised BN; examples/train_dbnet --sync-bn sets an MPI all-reduce). */
    int (*replica_sum)(void *user, double *values, int64_t n);
    void *replica_user;
} ocr_ctx;

/* Mixed precision: OCR_AMP_OFF computes everything in fp32; BF16 and F16 round the inputs of convolutions and GEMMs
   to that type and accumulate in fp32 (the rules: ocr_nn.h, "mixed precision"). */
typedef enum { OCR_AMP_OFF = 0, OCR_AMP_BF16 = 1, OCR_AMP_F16 = 2 } ocr_amp;

enum { OCR_CPU_KERNEL_AUTO = 0, OCR_CPU_KERNEL_PORTABLE = 1, OCR_CPU_KERNEL_AVX2 = 2, OCR_CPU_KERNEL_AVX512 = 3 };

/* ---- context, errors, logging ---- */
OCRDEF int ocr_ctx_init(ocr_ctx *ctx, int n_threads, uint64_t seed);   /* n_threads <= 0: all cores */
OCRDEF void ocr_ctx_free(ocr_ctx *ctx);
OCRDEF int ocr_ctx_set_threads(ocr_ctx *ctx, int n_threads);
OCRDEF const char *ocr_ctx_last_error(const ocr_ctx *ctx);
OCRDEF void ocr_ctx_clear_error(ocr_ctx *ctx);
OCRDEF const char *ocr_status_name(int status);
/* Records an error (message prefixed by nothing: callers start it with their function name) and returns code. */
OCRDEF int ocr_error(ocr_ctx *ctx, int code, const char *fmt, ...) OCR__PRINTF(3, 4);
OCRDEF void ocr_log(ocr_ctx *ctx, int level, const char *fmt, ...) OCR__PRINTF(3, 4);
OCRDEF void ocr_log_stderr(void *user, int level, const char *message); /* a ready-made log_fn */
/* Per-slot scratch memory that only grows; NULL (with an error) on failure. */
OCRDEF void *ocr_ctx_scratch(ocr_ctx *ctx, int slot, size_t bytes);
OCRDEF int ocr_cpu_count(void);
/* Seconds on the monotonic clock, for intervals (the thread pool's spin, the data loader's wait). */
OCRDEF double ocr_monotonic_seconds(void);

/* ---- threads: fn(arg, begin, end, thread_index) over a static, deterministic split of [0, n) ---- */
typedef void (*ocr_range_fn)(void *arg, int64_t begin, int64_t end, int thread_index);
OCRDEF void ocr_parallel_for(ocr_ctx *ctx, int64_t n, int64_t min_chunk, ocr_range_fn fn, void *arg);
/* The same, with the range handed out in chunks of `chunk` to whichever thread asks next (the whole range at once when
   one thread runs it): a thread the host holds up for a moment leaves its share to the others. Which thread runs an
   item varies from run to run, so only for items whose results do not depend on it (thread_index then picks scratch
   memory, never a partial sum). */
OCRDEF void ocr_parallel_for_dynamic(ocr_ctx *ctx, int64_t n, int64_t chunk, ocr_range_fn fn, void *arg);

/* ---- sizes ---- */
OCRDEF int ocr_size_mul(size_t a, size_t b, size_t *out);           /* 1 ok, 0 overflow */
OCRDEF int ocr_size_add(size_t a, size_t b, size_t *out);
OCRDEF ocr_shape ocr_shape1(int64_t d0);
OCRDEF ocr_shape ocr_shape2(int64_t d0, int64_t d1);
OCRDEF ocr_shape ocr_shape3(int64_t d0, int64_t d1, int64_t d2);
OCRDEF ocr_shape ocr_shape4(int64_t d0, int64_t d1, int64_t d2, int64_t d3);
OCRDEF int ocr_shape_equal(ocr_shape a, ocr_shape b);
OCRDEF int64_t ocr_shape_numel(ocr_shape s);                         /* assumes a validated shape */
OCRDEF int ocr_shape_validate(ocr_ctx *ctx, const char *fn, const char *what, ocr_shape s);
OCRDEF char *ocr_shape_str(ocr_shape s, char *buf, size_t cap);      /* "[2,3,64,64]" */
OCRDEF size_t ocr_dtype_size(ocr_dtype dt);
OCRDEF const char *ocr_dtype_name(ocr_dtype dt);                    /* safetensors names: F32, F16, ... */
OCRDEF const char *ocr_device_name(ocr_device d);

/* ---- tensors ---- */
OCRDEF int ocr_tensor_alloc(ocr_ctx *ctx, ocr_tensor *t, const char *name, ocr_dtype dt, ocr_device dev, ocr_shape shape);
OCRDEF void ocr_tensor_free(ocr_tensor *t);
/* A non-owning tensor over memory the caller keeps alive. */
OCRDEF ocr_tensor ocr_tensor_view(const char *name, ocr_dtype dt, ocr_device dev, ocr_shape shape, void *data);
OCRDEF ocr_tensor ocr_tensor_f32(const char *name, ocr_shape shape, float *data);   /* CPU F32 view */
/* View of rows [begin, begin+count) along dim 0. */
OCRDEF int ocr_tensor_slice(ocr_ctx *ctx, const ocr_tensor *t, int64_t begin, int64_t count, ocr_tensor *out);
OCRDEF int ocr_tensor_reshape(ocr_ctx *ctx, const ocr_tensor *t, ocr_shape shape, ocr_tensor *out);
OCRDEF int64_t ocr_tensor_numel(const ocr_tensor *t);
OCRDEF size_t ocr_tensor_bytes(const ocr_tensor *t);
OCRDEF char *ocr_tensor_describe(const ocr_tensor *t, char *buf, size_t cap); /* 'x' (F32 [1,3,32,32], cpu) */
OCRDEF void ocr_tensor_set_name(ocr_tensor *t, const char *name);
OCRDEF int ocr_tensor_fill(ocr_ctx *ctx, ocr_tensor *t, double value);
OCRDEF int ocr_tensor_zero(ocr_ctx *ctx, ocr_tensor *t);
/* Same shape, converts dtype. Large copies between separate buffers run on ctx's threads. */
OCRDEF int ocr_tensor_copy(ocr_ctx *ctx, ocr_tensor *dst, const ocr_tensor *src);
/* t where the host can read it: *out is t itself when t is on the CPU, else a view of its download into *staging
   (reallocated when the shape or dtype changes; ocr_tensor_free it when done). *out never owns its data. */
OCRDEF int ocr_tensor_on_host(ocr_ctx *ctx, const ocr_tensor *t, ocr_tensor *staging, ocr_tensor *out);
OCRDEF int ocr_tensor_fill_uniform(ocr_ctx *ctx, ocr_tensor *t, float lo, float hi);
OCRDEF int ocr_tensor_fill_normal(ocr_ctx *ctx, ocr_tensor *t, float mean, float stddev);
OCRDEF double ocr_tensor_get(const ocr_tensor *t, int64_t index);   /* any dtype, CPU; for tests and tools */
OCRDEF void ocr_tensor_set(ocr_tensor *t, int64_t index, double value);

/* ---- validation: each returns OCR_OK or an error naming fn, the tensor and what is wrong ---- */
OCRDEF int ocr_check_tensor(ocr_ctx *ctx, const char *fn, const ocr_tensor *t);  /* non-NULL, has data, valid shape */
OCRDEF int ocr_check_shape(ocr_ctx *ctx, const char *fn, const ocr_tensor *t, ocr_shape expected);
OCRDEF int ocr_check_same_shape(ocr_ctx *ctx, const char *fn, const ocr_tensor *a, const ocr_tensor *b);
OCRDEF int ocr_check_dtype(ocr_ctx *ctx, const char *fn, const ocr_tensor *t, ocr_dtype dt);
OCRDEF int ocr_check_device(ocr_ctx *ctx, const char *fn, const ocr_tensor *t, ocr_device dev);
OCRDEF int ocr_check_same_device(ocr_ctx *ctx, const char *fn, const ocr_tensor *a, const ocr_tensor *b);
OCRDEF int ocr_check_finite(ocr_ctx *ctx, const char *fn, const ocr_tensor *t); /* large F32 tensors: on ctx's threads */
OCRDEF int ocr_check_range(ocr_ctx *ctx, const char *fn, const ocr_tensor *t, double lo, double hi);
/* The usual preamble of an op on F32 tensors: valid, F32, on ctx's device... reported under fn. */
OCRDEF int ocr_check_f32(ocr_ctx *ctx, const char *fn, const ocr_tensor *t);
/* Index of the first non-finite F32/F16/BF16 value, or -1. */
OCRDEF int64_t ocr_find_nonfinite(const ocr_tensor *t);

/* ---- RNG ---- */
OCRDEF void ocr_rng_seed(ocr_rng *r, uint64_t seed);
OCRDEF uint64_t ocr_rng_u64(ocr_rng *r);
OCRDEF uint32_t ocr_rng_below(ocr_rng *r, uint32_t n);     /* uniform in [0, n), unbiased; n > 0 */
OCRDEF float ocr_rng_uniform(ocr_rng *r);                  /* [0, 1) */
OCRDEF float ocr_rng_normal(ocr_rng *r);                   /* N(0, 1) */

/* ---- half precision ---- */
OCRDEF uint16_t ocr_f32_to_f16(float f);                   /* round to nearest even, saturating to Inf */
OCRDEF float ocr_f16_to_f32(uint16_t h);
OCRDEF uint16_t ocr_f32_to_bf16(float f);
OCRDEF float ocr_bf16_to_f32(uint16_t h);

/* ---- aligned host memory (64 bytes) ---- */
OCRDEF void *ocr_aligned_alloc(size_t bytes);
OCRDEF void ocr_aligned_free(void *p);

/* ---- JSON (strict RFC 8259 subset used by safetensors headers and dataset labels) ---- */
typedef enum { OCR_JSON_NULL, OCR_JSON_BOOL, OCR_JSON_NUMBER, OCR_JSON_STRING, OCR_JSON_ARRAY, OCR_JSON_OBJECT } ocr_json_type;
typedef struct {
    ocr_json_type type;
    int64_t start, end;   /* byte range in the source; strings exclude their quotes */
    int size;             /* array: elements; object: key/value pairs */
    int next;             /* index of the token after this one's whole subtree */
} ocr_json_tok;
/* Parses exactly one value (surrounding whitespace allowed) into toks[0..*n_toks). Object children are
   alternating key (string) and value tokens. Rejects invalid UTF-8, control characters, bad escapes,
   depth > 64 and more than max_toks tokens. */
OCRDEF int ocr_json_parse(ocr_ctx *ctx, const char *src, size_t len, ocr_json_tok *toks, int max_toks, int *n_toks);
OCRDEF int ocr_json_find(const char *src, const ocr_json_tok *toks, int object, const char *key); /* value index or -1 */
OCRDEF int ocr_json_child(const ocr_json_tok *toks, int parent, int i);      /* i-th element / key, or -1 */
OCRDEF int ocr_json_streq(const char *src, const ocr_json_tok *tok, const char *s); /* raw (unescaped-free) compare */
/* Unescaped, NUL-terminated copy; fails (0) if it does not fit or holds \u0000. */
OCRDEF int ocr_json_string(const char *src, const ocr_json_tok *tok, char *out, size_t cap);
OCRDEF int ocr_json_number(const char *src, const ocr_json_tok *tok, double *out);
/* Appends s as a quoted, escaped JSON string to buf (at most cap bytes incl. NUL); returns bytes needed. */
OCRDEF size_t ocr_json_quote(char *buf, size_t cap, const char *s);

/* ---- safetensors (https://github.com/huggingface/safetensors format; files PyTorch tooling reads) ---- */
typedef struct {
    char name[OCR_NAME_MAX];
    ocr_dtype dtype;
    ocr_shape shape;
    size_t begin, end;    /* byte range inside the data section */
} ocr_safetensors_entry;

typedef struct {
    unsigned char *bytes;            /* whole file */
    size_t size;
    size_t data_start;               /* 8 + header length */
    ocr_safetensors_entry *entries;
    int n_entries;
    char **meta_keys, **meta_values; /* __metadata__ string pairs */
    int n_meta;
} ocr_safetensors;

/* Reads and strictly validates a file (or memory): any malformed input gives OCR_EFORMAT with a reason. */
OCRDEF int ocr_safetensors_open(ocr_ctx *ctx, ocr_safetensors *st, const char *path);
OCRDEF int ocr_safetensors_open_memory(ocr_ctx *ctx, ocr_safetensors *st, const void *bytes, size_t size);
OCRDEF void ocr_safetensors_close(ocr_safetensors *st);
OCRDEF int ocr_safetensors_find(const ocr_safetensors *st, const char *name);       /* index or -1 */
OCRDEF const char *ocr_safetensors_meta(const ocr_safetensors *st, const char *key);
/* Allocates out (CPU, the file's dtype and shape) and copies the data. */
OCRDEF int ocr_safetensors_read(ocr_ctx *ctx, const ocr_safetensors *st, const char *name, ocr_tensor *out);
/* Copies into an existing tensor of the same shape; F32<->F16/BF16 converted, others must match. */
OCRDEF int ocr_safetensors_read_into(ocr_ctx *ctx, const ocr_safetensors *st, const char *name, ocr_tensor *dst);
/* Writes atomically (temp file, fsync, rename). meta: n_meta key/value pairs, may be NULL. */
OCRDEF int ocr_safetensors_save(ocr_ctx *ctx, const char *path, const ocr_tensor *const *tensors, int n,
                                const char *const *meta_keys, const char *const *meta_values, int n_meta);
/* Same layout into a malloc'd buffer (*out, *out_size); the caller frees it with OCR_FREE / free. */
OCRDEF int ocr_safetensors_serialize(ocr_ctx *ctx, const ocr_tensor *const *tensors, int n,
                                     const char *const *meta_keys, const char *const *meta_values, int n_meta,
                                     unsigned char **out, size_t *out_size);
/* Writes bytes to path atomically: path.tmp.<pid>, fsync, rename, fsync of the directory. */
OCRDEF int ocr_write_file_atomic(ocr_ctx *ctx, const char *path, const void *bytes, size_t size);
/* Reads a whole file; max_size caps what is accepted. *out is freed with OCR_FREE / free. */
OCRDEF int ocr_read_file(ocr_ctx *ctx, const char *path, size_t max_size, unsigned char **out, size_t *out_size);

/* ---- run metrics: metrics.jsonl plus a TensorBoard event file, with steps that never go backwards ----
   Scalars logged for the same step are merged into one JSON object (written when a later step arrives or on
   close); a record whose step is behind the last one is refused with OCR_ERANGE and a message naming it, so a
   validation pass inside an epoch can never rewind the curve. Reopening a run directory continues after the
   last step already on disk. */
#define OCR_METRICS_MAX_SCALARS 64
typedef struct {
    void *jsonl, *events;            /* FILE* */
    int64_t last_step;               /* -1 before the first record */
    int64_t pending_step;
    int n_pending;
    char pending_names[OCR_METRICS_MAX_SCALARS][64];
    double pending_values[OCR_METRICS_MAX_SCALARS];
    int64_t refused;                 /* records refused so far */
} ocr_metrics;
OCRDEF int ocr_metrics_open(ocr_ctx *ctx, ocr_metrics *m, const char *dir);
/* Reopens dir's metrics for a run resumed from a state saved at step `step`: what was logged after that state (by a
   process that went on and died) is dropped first, so the resumed run logs those steps again. metrics.jsonl keeps its
   leading complete records with steps <= step; each events.out.tfevents.* file keeps its leading CRC-valid records up
   to the first with a step past `step`. Both writers append in step order, so what goes is a tail, cut by one
   truncate (atomic, and it needs no free disk). The new event file then starts with TensorBoard's restart marker,
   Event{step: step+1, session_log{status: START}} (what PyTorch's SummaryWriter(purge_step=step+1) writes): a
   TensorBoard that had already loaded the dropped events discards those at step+1 and later. */
OCRDEF int ocr_metrics_open_resume(ocr_ctx *ctx, ocr_metrics *m, const char *dir, int64_t step);
OCRDEF int ocr_metrics_scalar(ocr_ctx *ctx, ocr_metrics *m, int64_t step, const char *name, double value);
/* A PNG-encoded image for TensorBoard's image tab (jsonl gets nothing). */
OCRDEF int ocr_metrics_image(ocr_ctx *ctx, ocr_metrics *m, int64_t step, const char *tag, int width, int height,
                             int channels, const void *png, size_t png_size);
OCRDEF int ocr_metrics_flush(ocr_ctx *ctx, ocr_metrics *m);   /* writes the pending object and fsyncs both files */
OCRDEF int ocr_metrics_close(ocr_ctx *ctx, ocr_metrics *m);
OCRDEF uint32_t ocr_crc32c(uint32_t crc, const void *bytes, size_t n);   /* CRC-32C (Castagnoli); start with 0 */

/* ---- internal: the protobuf wire-format writer of the TensorBoard events here and of ocr_onnx.h's ONNX files ----
   Not API. Declared here, not static, because ocr_onnx.h's implementation may be compiled in another file than this
   header's. A message is a sequence of fields, each a key varint (field number << 3 | wire type) and a value: a varint
   (wire type 0), 8 little-endian bytes (1), a length varint and that many bytes (2: strings, bytes, nested messages)
   or 4 little-endian bytes (5). Varints are little-endian groups of 7 bits, the high bit set on every byte but the
   last; negative int64 values are their two's complement as uint64 (10 bytes). A nested message is written in place
   and its length inserted in front of it when it closes (ocr__pb_open / ocr__pb_close), so nothing is sized twice.
   Start from a zeroed ocr__pb. A failed allocation sets oom and makes every later write a no-op: the caller checks
   oom once at the end and reports OCR_ENOMEM; ocr__pb_free frees the buffer either way. */
typedef struct {
    unsigned char *p;
    size_t n, cap; /* bytes written, bytes allocated */
    int oom;
} ocr__pb;
OCRDEF void ocr__pb_raw(ocr__pb *b, const void *data, size_t size);    /* bytes as they are, no key */
OCRDEF void ocr__pb_fixed(ocr__pb *b, uint64_t v, int n_bytes);        /* the low n_bytes of v, little-endian, no key */
OCRDEF void ocr__pb_int(ocr__pb *b, int field, int64_t v);             /* int32, int64, uint32, uint64, bool and enum fields */
OCRDEF void ocr__pb_float(ocr__pb *b, int field, float v);
OCRDEF void ocr__pb_double(ocr__pb *b, int field, double v);
OCRDEF void ocr__pb_bytes(ocr__pb *b, int field, const void *data, size_t size);
OCRDEF void ocr__pb_string(ocr__pb *b, int field, const char *s);
/* n floats as one length-delimited field of little-endian float32: a packed repeated float, or ONNX raw_data */
OCRDEF void ocr__pb_floats(ocr__pb *b, int field, const float *v, size_t n);
OCRDEF size_t ocr__pb_open(ocr__pb *b, int field);    /* starts a nested message; returns what ocr__pb_close takes */
OCRDEF void ocr__pb_close(ocr__pb *b, size_t start);
OCRDEF void ocr__pb_free(ocr__pb *b);                  /* frees with this file's allocator; b is zeroed, ready again */

#ifdef OCR_CUDA
/* ---- CUDA backend (ocr_cuda.cu, linked into programs built with -DOCR_CUDA) ----
   ocr_cuda_init makes ctx->device OCR_DEVICE_CUDA; it fails with OCR_ECUDA and a clear message on a machine
   without a usable GPU. Tensors allocated on OCR_DEVICE_CUDA live in device memory (zero-filled); ocr_tensor_copy
   moves data between host and device; ocr_tensor_fill/zero, ocr_check_finite and ocr_check_range work on device
   tensors; ocr_ctx_free releases the backend. ocr_tensor_get/set and ocr_find_nonfinite stay host-only. */
OCRDEF int ocr_cuda_init(ocr_ctx *ctx, int device_index);
OCRDEF void ocr_cuda_release(ocr_ctx *ctx);                 /* ctx->device goes back to the CPU */
OCRDEF int ocr_cuda_set_cudnn(ocr_ctx *ctx, int enabled);   /* 1: convolutions through cuDNN (env OCR_CUDA_CUDNN=1) */
OCRDEF int ocr_cuda_set_cublas(ocr_ctx *ctx, int enabled);  /* 0: GEMM through the own kernel (env OCR_CUDA_NO_CUBLAS=1) */
OCRDEF const char *ocr_cuda_backend_name(ocr_ctx *ctx);
OCRDEF int ocr_cuda_synchronize(ocr_ctx *ctx, const char *what);
OCRDEF int ocr_cuda_alloc(ocr_ctx *ctx, void **ptr, size_t bytes, const char *name);
OCRDEF void ocr_cuda_free(void *ptr);
OCRDEF int ocr_cuda_memcpy(ocr_ctx *ctx, void *dst, ocr_device dst_dev, const void *src, ocr_device src_dev, size_t bytes);
OCRDEF int ocr_cuda_tensor_copy(ocr_ctx *ctx, ocr_tensor *dst, const ocr_tensor *src);
OCRDEF int ocr_cuda_fill(ocr_ctx *ctx, ocr_tensor *t, double value);
OCRDEF int ocr_cuda_check_values(ocr_ctx *ctx, const char *fn, const ocr_tensor *t, int check_range, double lo, double hi);
#endif

#ifdef __cplusplus
}
#endif
#endif /* OCR_TENSOR_H */

/* ================================================================================================== */
#if defined(OCR_IMPLEMENTATION) && !defined(OCR_NO_IMPLEMENTATION) && !defined(OCR_TENSOR_IMPLEMENTATION)
#define OCR_TENSOR_IMPLEMENTATION
#endif

#if defined(OCR_TENSOR_IMPLEMENTATION) && !defined(OCR__TENSOR_IMPLEMENTED)
#define OCR__TENSOR_IMPLEMENTED

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <math.h>
#include <errno.h>
#include <pthread.h>
#include <unistd.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <dirent.h>
#include <time.h>
#ifdef __linux__
#include <sched.h>
#if defined(__GLIBC__) && !defined(__USE_GNU)
/* glibc declares these only for _GNU_SOURCE (the same prototypes; cpu_set_t itself is always there) */
int sched_getaffinity(pid_t pid, size_t cpusetsize, cpu_set_t *mask);
int sched_getcpu(void);
int pthread_setaffinity_np(pthread_t thread, size_t cpusetsize, const cpu_set_t *cpuset);
#endif
#include <sys/mman.h>
#if defined(MADV_HUGEPAGE)
#define OCR__MADV_HUGEPAGE MADV_HUGEPAGE
#elif defined(__GLIBC__) && (defined(__x86_64__) || defined(__i386__) || defined(__aarch64__) || defined(__arm__))
/* glibc declares madvise and its advice only for _DEFAULT_SOURCE, which POSIX feature macros turn off */
int madvise(void *addr, size_t length, int advice);
#define OCR__MADV_HUGEPAGE 14
#endif
#endif


#ifndef OCR_SAFETENSORS_MAX_HEADER
#define OCR_SAFETENSORS_MAX_HEADER 100000000u
#endif

#ifdef __cplusplus
extern "C" {
#endif

/* ---------------------------------------------------------------- errors, logging */

static const char *const ocr__status_names[] = {
    "OK", "EINVAL", "ESHAPE", "EDTYPE", "EDEVICE", "ENOMEM", "EIO", "EFORMAT", "ENONFINITE",
    "ERANGE", "EOVERFLOW", "EUNSUPPORTED", "ECUDA", "ENOTFOUND", "ESTATE"};

OCRDEF const char *ocr_status_name(int status) {
    int i = -status;
    if (i < 0 || i >= (int)(sizeof(ocr__status_names) / sizeof(ocr__status_names[0]))) return "UNKNOWN";
    return ocr__status_names[i];
}

OCRDEF int ocr_error(ocr_ctx *ctx, int code, const char *fmt, ...) {
    va_list ap;
    if (!ctx) return code;
    va_start(ap, fmt);
    vsnprintf(ctx->last_error, sizeof ctx->last_error, fmt, ap);
    va_end(ap);
    ctx->last_status = code;
    if (ctx->log_fn) ctx->log_fn(ctx->log_user, OCR_LOG_DEBUG, ctx->last_error);
    return code;
}

OCRDEF void ocr_log(ocr_ctx *ctx, int level, const char *fmt, ...) {
    char msg[OCR_ERROR_MAX];
    va_list ap;
    if (!ctx || !ctx->log_fn) return;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    ctx->log_fn(ctx->log_user, level, msg);
}

OCRDEF void ocr_log_stderr(void *user, int level, const char *message) {
    static const char *const names[] = {"debug", "info", "warning", "error"};
    int min_level = user ? *(const int *)user : OCR_LOG_INFO;
    if (level < min_level) return;
    fprintf(stderr, "ocr %s: %s\n", names[level < 0 ? 0 : level > 3 ? 3 : level], message);
}

OCRDEF const char *ocr_ctx_last_error(const ocr_ctx *ctx) { return ctx->last_error[0] ? ctx->last_error : "no error"; }
OCRDEF void ocr_ctx_clear_error(ocr_ctx *ctx) { ctx->last_error[0] = 0; ctx->last_status = OCR_OK; }

/* ---------------------------------------------------------------- sizes, shapes, dtypes */

OCRDEF int ocr_size_mul(size_t a, size_t b, size_t *out) {
    if (a && b > (size_t)-1 / a) return 0;
    *out = a * b;
    return 1;
}
OCRDEF int ocr_size_add(size_t a, size_t b, size_t *out) {
    if (b > (size_t)-1 - a) return 0;
    *out = a + b;
    return 1;
}

OCRDEF ocr_shape ocr_shape1(int64_t d0) { ocr_shape s; memset(&s, 0, sizeof s); s.ndim = 1; s.dim[0] = d0; return s; }
OCRDEF ocr_shape ocr_shape2(int64_t d0, int64_t d1) { ocr_shape s = ocr_shape1(d0); s.ndim = 2; s.dim[1] = d1; return s; }
OCRDEF ocr_shape ocr_shape3(int64_t d0, int64_t d1, int64_t d2) { ocr_shape s = ocr_shape2(d0, d1); s.ndim = 3; s.dim[2] = d2; return s; }
OCRDEF ocr_shape ocr_shape4(int64_t d0, int64_t d1, int64_t d2, int64_t d3) {
    ocr_shape s = ocr_shape3(d0, d1, d2); s.ndim = 4; s.dim[3] = d3; return s;
}

OCRDEF int ocr_shape_equal(ocr_shape a, ocr_shape b) {
    int i;
    if (a.ndim != b.ndim) return 0;
    for (i = 0; i < a.ndim; i++) if (a.dim[i] != b.dim[i]) return 0;
    return 1;
}

OCRDEF int64_t ocr_shape_numel(ocr_shape s) {
    int64_t n = 1;
    int i;
    for (i = 0; i < s.ndim; i++) n *= s.dim[i];
    return n;
}

OCRDEF char *ocr_shape_str(ocr_shape s, char *buf, size_t cap) {
    size_t used = 0;
    int i;
    if (!cap) return buf;
    buf[0] = 0;
    used += (size_t)snprintf(buf, cap, "[");
    for (i = 0; i < s.ndim && i < OCR_MAX_DIMS && used < cap; i++)
        used += (size_t)snprintf(buf + used, cap - used, i ? ",%lld" : "%lld", (long long)s.dim[i]);
    if (used < cap) snprintf(buf + used, cap - used, "]");
    return buf;
}

OCRDEF int ocr_shape_validate(ocr_ctx *ctx, const char *fn, const char *what, ocr_shape s) {
    int64_t n = 1;
    int i;
    char sb[96];
    if (s.ndim < 0 || s.ndim > OCR_MAX_DIMS)
        return ocr_error(ctx, OCR_ESHAPE, "%s: %s has %d dims; ocr-c tensors have 0..%d", fn, what, s.ndim, OCR_MAX_DIMS);
    for (i = 0; i < s.ndim; i++) {
        if (s.dim[i] < 0)
            return ocr_error(ctx, OCR_ESHAPE, "%s: %s has negative dim %d in %s", fn, what, i, ocr_shape_str(s, sb, sizeof sb));
        if (s.dim[i] && n > OCR_MAX_NUMEL / s.dim[i])
            return ocr_error(ctx, OCR_EOVERFLOW, "%s: %s of shape %s has more than 2^40 elements", fn, what,
                             ocr_shape_str(s, sb, sizeof sb));
        n *= s.dim[i];
    }
    return OCR_OK;
}

OCRDEF size_t ocr_dtype_size(ocr_dtype dt) {
    switch (dt) {
    case OCR_F32: case OCR_I32: return 4;
    case OCR_F16: case OCR_BF16: return 2;
    case OCR_U8: return 1;
    case OCR_I64: return 8;
    default: return 0;
    }
}

OCRDEF const char *ocr_dtype_name(ocr_dtype dt) {
    static const char *const names[] = {"F32", "F16", "BF16", "U8", "I32", "I64"};
    return (unsigned)dt < OCR_DTYPE_COUNT ? names[dt] : "?";
}

OCRDEF const char *ocr_device_name(ocr_device d) { return d == OCR_DEVICE_CPU ? "cpu" : d == OCR_DEVICE_CUDA ? "cuda" : "?"; }

/* ---------------------------------------------------------------- memory */

static int ocr__env_flag(const char *name) {
    const char *v = getenv(name);
    return v && v[0] && strcmp(v, "0") != 0;
}

/* Blocks of 2 MB or more (activation arenas, large tensors, GEMM and convolution scratch) start on a 2 MB boundary
   and ask Linux for transparent huge pages, which it gives in its "madvise" mode only on request: fewer TLB misses,
   and physically indexed caches see the same layout from run to run (DB-ResNet-18's inference at 640x640 took about
   a tenth less time, docs/PERFORMANCE.md), for at most 2 MB of padding per block. OCR_NO_HUGE_PAGES=1 in the
   environment allocates as before. */
#define OCR__HUGE_PAGE_BYTES ((size_t)2 << 20)

OCRDEF void *ocr_aligned_alloc(size_t bytes) {
    /* Over-allocate, align by hand and keep the original pointer just below the block. */
    size_t total;
    unsigned char *raw = NULL, *p;
    if (!ocr_size_add(bytes, 64 + sizeof(void *), &total)) return NULL;
#if defined(OCR__DEFAULT_ALLOCATOR) && defined(OCR__MADV_HUGEPAGE)
    if (total >= OCR__HUGE_PAGE_BYTES && total <= SIZE_MAX - OCR__HUGE_PAGE_BYTES && !ocr__env_flag("OCR_NO_HUGE_PAGES")) {
        size_t rounded = (total + OCR__HUGE_PAGE_BYTES - 1) & ~(OCR__HUGE_PAGE_BYTES - 1);
        void *q = NULL;
        if (posix_memalign(&q, OCR__HUGE_PAGE_BYTES, rounded) == 0) {
            (void)madvise(q, rounded, OCR__MADV_HUGEPAGE); /* a hint: without huge pages the block works the same */
            raw = (unsigned char *)q;
        }
    }
#endif
    if (!raw) raw = (unsigned char *)OCR_MALLOC(total);
    if (!raw) return NULL;
    p = raw + sizeof(void *);
    p += (64 - ((uintptr_t)p & 63)) & 63;
    memcpy(p - sizeof(void *), &raw, sizeof(void *));
    return p;
}

OCRDEF void ocr_aligned_free(void *p) {
    void *raw;
    if (!p) return;
    memcpy(&raw, (unsigned char *)p - sizeof(void *), sizeof(void *));
    OCR_FREE(raw);
}

OCRDEF void *ocr_ctx_scratch(ocr_ctx *ctx, int slot, size_t bytes) {
    void *p;
    if (slot < 0 || slot >= OCR_SCRATCH_SLOTS) {
        ocr_error(ctx, OCR_EINVAL, "ocr_ctx_scratch: slot %d out of range", slot);
        return NULL;
    }
    if (ctx->scratch_size[slot] >= bytes && ctx->scratch[slot]) return ctx->scratch[slot];
    /* Grow by half again so a slowly growing request does not reallocate every call. */
    if (bytes < ctx->scratch_size[slot] + ctx->scratch_size[slot] / 2) bytes = ctx->scratch_size[slot] + ctx->scratch_size[slot] / 2;
    p = ocr_aligned_alloc(bytes ? bytes : 64);
    if (!p) {
        ocr_error(ctx, OCR_ENOMEM, "ocr_ctx_scratch: cannot allocate %zu bytes of scratch", bytes);
        return NULL;
    }
    ocr_aligned_free(ctx->scratch[slot]);
    ctx->scratch[slot] = p;
    ctx->scratch_size[slot] = bytes;
    return p;
}

/* ---------------------------------------------------------------- thread pool */

/* Workers (and the caller, waiting for them) spin for a while on the job generation before sleeping: waking a
   sleeping thread costs tens to hundreds of microseconds (more inside a VM), and a training step dispatches
   thousands of short jobs. The spin is bounded by time, checked every OCR__SPIN_CHECK loads, and has no PAUSE
   instruction: hypervisors treat a loop of PAUSEs as a vCPU waiting for a preempted lock holder and take the core
   away (KVM's pause-loop exiting), which made every dispatch cost 0.7-1.6 ms on the project's virtual machines
   instead of under a microsecond. */
#define OCR__SPIN_SECONDS 100e-6
#define OCR__SPIN_CHECK 256
#define OCR__CPU_RELAX() __asm__ __volatile__("" ::: "memory")

OCRDEF double ocr_monotonic_seconds(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* Spins until *word differs from value (differ = 1) or equals it (differ = 0), or the spin time is over; returns
   whether the condition came true. */
static int ocr__pool_spin(const unsigned long *word, unsigned long value, int differ, double seconds, const int *quit) {
    double deadline = 0;
    unsigned i;
    if (seconds <= 0) return 0;
    for (i = 1;; i++) {
        if ((__atomic_load_n(word, __ATOMIC_ACQUIRE) != value) == differ) return 1;
        if (quit && __atomic_load_n(quit, __ATOMIC_ACQUIRE)) return 0;
        if (i % OCR__SPIN_CHECK == 0) {
            double t = ocr_monotonic_seconds();
            if (deadline == 0) deadline = t + seconds;
            else if (t > deadline) return 0;
        }
        OCR__CPU_RELAX();
    }
}

struct ocr__pool {
    pthread_mutex_t mu;
    pthread_cond_t work_cv, done_cv;
    pthread_t threads[OCR_MAX_THREADS];
    int n_workers;            /* threads besides the caller */
    int pinned;               /* each worker keeps to one CPU (ocr__pool_plan_cpus) */
#if defined(__linux__) && defined(__GLIBC__)
    cpu_set_t allowed;        /* the creating thread's CPUs: what a worker gets back when pinning fails */
#endif
    int worker_cpu[OCR_MAX_THREADS]; /* worker i's CPU when pinned */
    int free_cpu;             /* the one no worker holds: the caller's */
    double spin_seconds;      /* 0 when threads outnumber cores: a spinner would hold the core its waker needs */
    unsigned long generation; /* bumped for every job; read atomically by spinning workers */
    unsigned long pending;    /* workers still running the current job (atomic) */
    int quit;
    /* current job */
    ocr_range_fn fn;
    void *arg;
    int64_t n;
    int n_parts;
    int64_t chunk;            /* > 0: dynamic, chunks claimed from next */
    int64_t next;             /* atomic */
};

static void ocr__pool_run_part(ocr__pool *p, int part) {
    int64_t begin, end;
    if (p->chunk > 0) {
        while ((begin = __atomic_fetch_add(&p->next, p->chunk, __ATOMIC_RELAXED)) < p->n) {
            end = begin + p->chunk < p->n ? begin + p->chunk : p->n;
            p->fn(p->arg, begin, end, part);
        }
        return;
    }
    begin = p->n * part / p->n_parts; end = p->n * (part + 1) / p->n_parts;
    if (begin < end) p->fn(p->arg, begin, end, part);
}

/* When the threads are as many as the CPUs the creating thread may run on, each worker keeps to one of them and the
   caller's thread, left free, finds the remaining one (ocr__pool_follow_caller). On the project's virtual machines the
   two vCPUs share no last-level cache (a cache line's round trip between them takes about 0.5 us, bench_pool), and
   Linux places a thread it wakes only on an idle CPU that shares the waker's cache: a worker woken after sleeping ran
   on the caller's CPU, both threads on one core, each dispatch taking 110 us instead of 1 until the load balancer
   moved it milliseconds later. With fewer threads than CPUs the scheduler keeps its freedom (a pinned worker could not
   leave a CPU another program took); OCR_NO_PIN_THREADS=1 turns pinning off. */
#define OCR__ULONG_BITS (int)(8 * sizeof(unsigned long)) /* the kernel's CPU masks: bit c of word c / that */
static void ocr__pool_plan_cpus(ocr__pool *p, int n_threads) {
    p->pinned = 0;
#if defined(__linux__) && defined(__GLIBC__)
    {
        int cpu, i, n_allowed = 0, order[OCR_MAX_THREADS];
        if (n_threads < 2 || ocr__env_flag("OCR_NO_PIN_THREADS") || sched_getaffinity(0, sizeof p->allowed, &p->allowed) != 0) return;
        for (cpu = 0; cpu < (int)(8 * sizeof p->allowed); cpu++)
            if (((const unsigned long *)&p->allowed)[cpu / OCR__ULONG_BITS] >> (cpu % OCR__ULONG_BITS) & 1) {
                if (n_allowed < n_threads) order[n_allowed] = cpu;
                n_allowed++;
            }
        if (n_allowed != n_threads) return;
        p->free_cpu = order[0];
        for (i = 1; i < n_threads; i++) p->worker_cpu[i - 1] = order[i];
        p->pinned = 1;
    }
#else
    (void)n_threads;
#endif
}

/* Keeps worker w to its CPU; 0 when the system refuses (the worker then runs where the scheduler puts it). */
static int ocr__pool_pin(ocr__pool *p, int w) {
#if defined(__linux__) && defined(__GLIBC__)
    cpu_set_t one;
    int cpu = p->worker_cpu[w];
    if (cpu < 0 || cpu >= (int)(8 * sizeof one)) return 0;
    memset(&one, 0, sizeof one);
    ((unsigned long *)&one)[cpu / OCR__ULONG_BITS] = 1ul << (cpu % OCR__ULONG_BITS);
    return pthread_setaffinity_np(p->threads[w], sizeof one, &one) == 0;
#else
    (void)p; (void)w;
    return 0;
#endif
}

/* Pinning refused (a cgroup changed since, say): every worker gets the creating thread's CPUs back. */
static void ocr__pool_unpin(ocr__pool *p) {
    int w;
    p->pinned = 0;
#if defined(__linux__) && defined(__GLIBC__)
    for (w = 0; w < p->n_workers; w++) (void)pthread_setaffinity_np(p->threads[w], sizeof p->allowed, &p->allowed);
#else
    (void)w;
#endif
}

/* Before a dispatch: when the caller's thread has moved onto a worker's CPU, that worker takes the free one (a
   system call, only then; reading the CPU costs nanoseconds). */
static void ocr__pool_follow_caller(ocr__pool *p) {
#if defined(__linux__) && defined(__GLIBC__)
    int cpu, w;
    if (!p->pinned || (cpu = sched_getcpu()) == p->free_cpu || cpu < 0) return;
    for (w = 0; w < p->n_workers; w++)
        if (p->worker_cpu[w] == cpu) {
            p->worker_cpu[w] = p->free_cpu;
            p->free_cpu = cpu;
            if (!ocr__pool_pin(p, w)) ocr__pool_unpin(p);
            return;
        }
#else
    (void)p;
#endif
}

typedef struct { ocr__pool *pool; int index; } ocr__worker_arg;

static void *ocr__pool_worker(void *argp) {
    ocr__pool *p = ((ocr__worker_arg *)argp)->pool;
    int index = ((ocr__worker_arg *)argp)->index;
    unsigned long seen = 0;
    OCR_FREE(argp);
    for (;;) {
        ocr__pool_spin(&p->generation, seen, 1, p->spin_seconds, &p->quit);
        pthread_mutex_lock(&p->mu);
        while (!p->quit && __atomic_load_n(&p->generation, __ATOMIC_ACQUIRE) == seen) pthread_cond_wait(&p->work_cv, &p->mu);
        if (p->quit) { pthread_mutex_unlock(&p->mu); return NULL; }
        seen = p->generation;
        pthread_mutex_unlock(&p->mu);
        if (index < p->n_parts) ocr__pool_run_part(p, index);
        if (__atomic_sub_fetch(&p->pending, 1, __ATOMIC_ACQ_REL) == 0) {
            pthread_mutex_lock(&p->mu);
            pthread_cond_signal(&p->done_cv);
            pthread_mutex_unlock(&p->mu);
        }
    }
}

static void ocr__pool_destroy(ocr__pool *p) {
    int i;
    if (!p) return;
    pthread_mutex_lock(&p->mu);
    __atomic_store_n(&p->quit, 1, __ATOMIC_RELEASE);
    pthread_cond_broadcast(&p->work_cv);
    pthread_mutex_unlock(&p->mu);
    for (i = 0; i < p->n_workers; i++) pthread_join(p->threads[i], NULL);
    pthread_mutex_destroy(&p->mu);
    pthread_cond_destroy(&p->work_cv);
    pthread_cond_destroy(&p->done_cv);
    OCR_FREE(p);
}

static int ocr__pool_create(ocr_ctx *ctx, int n_threads, ocr__pool **out) {
    ocr__pool *p;
    int i;
    *out = NULL;
    if (n_threads <= 1) return OCR_OK;
    p = (ocr__pool *)OCR_MALLOC(sizeof *p);
    if (!p) return ocr_error(ctx, OCR_ENOMEM, "ocr_ctx_init: cannot allocate the thread pool");
    memset(p, 0, sizeof *p);
    p->spin_seconds = n_threads <= ocr_cpu_count() ? OCR__SPIN_SECONDS : 0;
    ocr__pool_plan_cpus(p, n_threads);
    pthread_mutex_init(&p->mu, NULL);
    pthread_cond_init(&p->work_cv, NULL);
    pthread_cond_init(&p->done_cv, NULL);
    for (i = 0; i < n_threads - 1; i++) {
        ocr__worker_arg *wa = (ocr__worker_arg *)OCR_MALLOC(sizeof *wa);
        if (!wa) break;
        wa->pool = p;
        wa->index = i + 1;
        if (pthread_create(&p->threads[i], NULL, ocr__pool_worker, wa) != 0) { OCR_FREE(wa); break; }
        p->n_workers++;
        if (p->pinned && !ocr__pool_pin(p, i)) ocr__pool_unpin(p);
    }
    if (p->n_workers != n_threads - 1) {
        ocr__pool_destroy(p);
        return ocr_error(ctx, OCR_ENOMEM, "ocr_ctx_init: could start only some of %d threads", n_threads);
    }
    *out = p;
    return OCR_OK;
}

static void ocr__parallel_run(ocr_ctx *ctx, int64_t n, int64_t min_chunk, int64_t chunk, ocr_range_fn fn, void *arg) {
    ocr__pool *p = ctx->pool;
    int64_t parts = ctx->n_threads;
    if (n <= 0) return;
    if (min_chunk < 1) min_chunk = 1;
    if (parts > n / min_chunk) parts = n / min_chunk;
    if (!p || parts <= 1) { fn(arg, 0, n, 0); return; }
    ocr__pool_follow_caller(p);
    pthread_mutex_lock(&p->mu);
    p->fn = fn;
    p->arg = arg;
    p->n = n;
    p->n_parts = (int)parts;
    p->chunk = chunk;
    __atomic_store_n(&p->next, 0, __ATOMIC_RELAXED);
    __atomic_store_n(&p->pending, (unsigned long)p->n_workers, __ATOMIC_RELAXED);
    __atomic_store_n(&p->generation, p->generation + 1, __ATOMIC_RELEASE);
    pthread_cond_broadcast(&p->work_cv);
    pthread_mutex_unlock(&p->mu);
    ocr__pool_run_part(p, 0);
    /* the caller waits longer before sleeping: its core has nothing else of this job to do, and a late worker (its
       part was larger, or the host took its core for a moment) would otherwise also pay for waking the caller */
    ocr__pool_spin(&p->pending, 0, 0, 10 * p->spin_seconds, NULL);
    if (__atomic_load_n(&p->pending, __ATOMIC_ACQUIRE)) {
        pthread_mutex_lock(&p->mu);
        while (__atomic_load_n(&p->pending, __ATOMIC_ACQUIRE)) pthread_cond_wait(&p->done_cv, &p->mu);
        pthread_mutex_unlock(&p->mu);
    }
}

OCRDEF void ocr_parallel_for(ocr_ctx *ctx, int64_t n, int64_t min_chunk, ocr_range_fn fn, void *arg) {
    ocr__parallel_run(ctx, n, min_chunk, 0, fn, arg);
}

OCRDEF void ocr_parallel_for_dynamic(ocr_ctx *ctx, int64_t n, int64_t chunk, ocr_range_fn fn, void *arg) {
    if (chunk < 1) chunk = 1;
    ocr__parallel_run(ctx, n, chunk, chunk, fn, arg);
}

OCRDEF int ocr_cpu_count(void) {
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n < 1 ? 1 : n > OCR_MAX_THREADS ? OCR_MAX_THREADS : (int)n;
}

/* ---------------------------------------------------------------- context */

OCRDEF int ocr_ctx_set_threads(ocr_ctx *ctx, int n_threads) {
    ocr__pool *p;
    int rc;
    if (n_threads <= 0) n_threads = ocr_cpu_count();
    if (n_threads > OCR_MAX_THREADS)
        return ocr_error(ctx, OCR_EINVAL, "ocr_ctx_set_threads: %d threads requested, at most %d", n_threads, OCR_MAX_THREADS);
    if (ctx->pool && n_threads == ctx->n_threads) return OCR_OK;
    rc = ocr__pool_create(ctx, n_threads, &p);
    if (rc) return rc;
    ocr__pool_destroy(ctx->pool);
    ctx->pool = p;
    ctx->n_threads = n_threads;
    return OCR_OK;
}

OCRDEF int ocr_ctx_init(ocr_ctx *ctx, int n_threads, uint64_t seed) {
    memset(ctx, 0, sizeof *ctx);
    ctx->device = OCR_DEVICE_CPU;
    ctx->n_threads = 1;
    ocr_rng_seed(&ctx->rng, seed);
    if (ocr__env_flag("OCR_CHECK_NUMERICS")) ctx->debug_flags |= OCR_DEBUG_CHECK_NUMERICS;
    if (ocr__env_flag("OCR_CUDA_SYNC_DEBUG")) ctx->debug_flags |= OCR_DEBUG_CUDA_SYNC;
    if (ocr__env_flag("OCR_NO_WINOGRAD")) ctx->debug_flags |= OCR_DEBUG_NO_WINOGRAD;
    if (ocr__env_flag("OCR_REFERENCE")) ctx->debug_flags |= OCR_DEBUG_REFERENCE;
    {
        const char *k = getenv("OCR_CPU_KERNEL");
        if (k && strcmp(k, "portable") == 0) ctx->cpu_kernel = OCR_CPU_KERNEL_PORTABLE;
        if (k && strcmp(k, "avx2") == 0) ctx->cpu_kernel = OCR_CPU_KERNEL_AVX2;
        if (k && strcmp(k, "avx512") == 0) ctx->cpu_kernel = OCR_CPU_KERNEL_AVX512;
    }
    return ocr_ctx_set_threads(ctx, n_threads);
}

OCRDEF void ocr_ctx_free(ocr_ctx *ctx) {
    int i;
    if (!ctx) return;
#ifdef OCR_CUDA
    ocr_cuda_release(ctx);
#endif
    ocr__pool_destroy(ctx->pool);
    ctx->pool = NULL;
    for (i = 0; i < OCR_SCRATCH_SLOTS; i++) { ocr_aligned_free(ctx->scratch[i]); ctx->scratch[i] = NULL; ctx->scratch_size[i] = 0; }
}

/* ---------------------------------------------------------------- tensors */

OCRDEF void ocr_tensor_set_name(ocr_tensor *t, const char *name) {
    size_t n = name ? strlen(name) : 0;
    if (n >= sizeof t->name) n = sizeof t->name - 1;
    if (n) memcpy(t->name, name, n);
    t->name[n] = 0;
}

OCRDEF int64_t ocr_tensor_numel(const ocr_tensor *t) { return ocr_shape_numel(t->shape); }
OCRDEF size_t ocr_tensor_bytes(const ocr_tensor *t) { return (size_t)ocr_tensor_numel(t) * ocr_dtype_size(t->dtype); }

OCRDEF char *ocr_tensor_describe(const ocr_tensor *t, char *buf, size_t cap) {
    char sb[96];
    if (!t) { snprintf(buf, cap, "(null tensor)"); return buf; }
    snprintf(buf, cap, "'%s' (%s %s, %s)", t->name[0] ? t->name : "?", ocr_dtype_name(t->dtype),
             ocr_shape_str(t->shape, sb, sizeof sb), ocr_device_name(t->device));
    return buf;
}

OCRDEF ocr_tensor ocr_tensor_view(const char *name, ocr_dtype dt, ocr_device dev, ocr_shape shape, void *data) {
    ocr_tensor t;
    memset(&t, 0, sizeof t);
    t.data = data;
    t.shape = shape;
    t.dtype = dt;
    t.device = dev;
    ocr_tensor_set_name(&t, name);
    return t;
}

OCRDEF ocr_tensor ocr_tensor_f32(const char *name, ocr_shape shape, float *data) {
    return ocr_tensor_view(name, OCR_F32, OCR_DEVICE_CPU, shape, data);
}

OCRDEF int ocr_tensor_alloc(ocr_ctx *ctx, ocr_tensor *t, const char *name, ocr_dtype dt, ocr_device dev, ocr_shape shape) {
    size_t bytes;
    int rc;
    memset(t, 0, sizeof *t);
    ocr_tensor_set_name(t, name);
    if ((unsigned)dt >= OCR_DTYPE_COUNT) return ocr_error(ctx, OCR_EDTYPE, "ocr_tensor_alloc: '%s' has unknown dtype %d", t->name, (int)dt);
    if ((rc = ocr_shape_validate(ctx, "ocr_tensor_alloc", t->name, shape))) return rc;
#ifdef OCR_CUDA
    if (dev != OCR_DEVICE_CPU && dev != OCR_DEVICE_CUDA)
#else
    if (dev != OCR_DEVICE_CPU)
#endif
        return ocr_error(ctx, OCR_EUNSUPPORTED, "ocr_tensor_alloc: '%s' asks for device %s; this build has only the CPU backend",
                         t->name, ocr_device_name(dev));
    if (!ocr_size_mul((size_t)ocr_shape_numel(shape), ocr_dtype_size(dt), &bytes))
        return ocr_error(ctx, OCR_EOVERFLOW, "ocr_tensor_alloc: '%s' is too large", t->name);
#ifdef OCR_CUDA
    if (dev == OCR_DEVICE_CUDA) {
        if ((rc = ocr_cuda_alloc(ctx, &t->data, bytes, t->name))) return rc;
    } else
#endif
    {
        t->data = ocr_aligned_alloc(bytes ? bytes : 1);
        if (!t->data) return ocr_error(ctx, OCR_ENOMEM, "ocr_tensor_alloc: cannot allocate %zu bytes for '%s'", bytes, t->name);
        memset(t->data, 0, bytes);
    }
    t->shape = shape;
    t->dtype = dt;
    t->device = dev;
    t->owns_data = 1;
    return OCR_OK;
}

OCRDEF void ocr_tensor_free(ocr_tensor *t) {
    if (!t) return;
#ifdef OCR_CUDA
    if (t->owns_data && t->device == OCR_DEVICE_CUDA) ocr_cuda_free(t->data);
    else
#endif
    if (t->owns_data) ocr_aligned_free(t->data);
    t->data = NULL;
    t->owns_data = 0;
}

OCRDEF int ocr_tensor_slice(ocr_ctx *ctx, const ocr_tensor *t, int64_t begin, int64_t count, ocr_tensor *out) {
    int rc;
    size_t row;
    if ((rc = ocr_check_tensor(ctx, "ocr_tensor_slice", t))) return rc;
    if (t->shape.ndim < 1 || begin < 0 || count < 0 || begin > t->shape.dim[0] - count) {
        char d[200];
        return ocr_error(ctx, OCR_ERANGE, "ocr_tensor_slice: %lld rows from row %lld do not fit in dim 0 of %s", (long long)count,
                         (long long)begin, ocr_tensor_describe(t, d, sizeof d)); /* begin + count may overflow */
    }
    row = (size_t)(ocr_tensor_numel(t) / (t->shape.dim[0] ? t->shape.dim[0] : 1)) * ocr_dtype_size(t->dtype);
    *out = *t;
    out->owns_data = 0;
    out->shape.dim[0] = count;
    out->data = (unsigned char *)t->data + (size_t)begin * row;
    return OCR_OK;
}

OCRDEF int ocr_tensor_reshape(ocr_ctx *ctx, const ocr_tensor *t, ocr_shape shape, ocr_tensor *out) {
    int rc;
    if ((rc = ocr_check_tensor(ctx, "ocr_tensor_reshape", t))) return rc;
    if ((rc = ocr_shape_validate(ctx, "ocr_tensor_reshape", t->name, shape))) return rc;
    if (ocr_shape_numel(shape) != ocr_tensor_numel(t)) {
        char d[200], sb[96];
        return ocr_error(ctx, OCR_ESHAPE, "ocr_tensor_reshape: %s cannot become %s", ocr_tensor_describe(t, d, sizeof d),
                         ocr_shape_str(shape, sb, sizeof sb));
    }
    *out = *t;
    out->owns_data = 0;
    out->shape = shape;
    return OCR_OK;
}

OCRDEF double ocr_tensor_get(const ocr_tensor *t, int64_t i) {
    switch (t->dtype) {
    case OCR_F32: return ((const float *)t->data)[i];
    case OCR_F16: return ocr_f16_to_f32(((const uint16_t *)t->data)[i]);
    case OCR_BF16: return ocr_bf16_to_f32(((const uint16_t *)t->data)[i]);
    case OCR_U8: return ((const uint8_t *)t->data)[i];
    case OCR_I32: return ((const int32_t *)t->data)[i];
    case OCR_I64: return (double)((const int64_t *)t->data)[i];
    default: return 0.0;
    }
}

OCRDEF void ocr_tensor_set(ocr_tensor *t, int64_t i, double v) {
    switch (t->dtype) {
    case OCR_F32: ((float *)t->data)[i] = (float)v; break;
    case OCR_F16: ((uint16_t *)t->data)[i] = ocr_f32_to_f16((float)v); break;
    case OCR_BF16: ((uint16_t *)t->data)[i] = ocr_f32_to_bf16((float)v); break;
    /* Integers saturate and NaN becomes 0: an out-of-range float-to-int cast is undefined behaviour in C. */
    case OCR_U8: ((uint8_t *)t->data)[i] = (uint8_t)(v > 0 ? (v < 255 ? v : 255) : 0); break;
    case OCR_I32: ((int32_t *)t->data)[i] = v != v ? 0 : v <= -2147483648.0 ? INT32_MIN : v >= 2147483647.0 ? INT32_MAX : (int32_t)v; break;
    case OCR_I64:
        ((int64_t *)t->data)[i] = v != v ? 0 : v <= -9223372036854775808.0 ? INT64_MIN : v >= 9223372036854775808.0 ? INT64_MAX : (int64_t)v;
        break;
    default: break;
    }
}

static int ocr__check_cpu(ocr_ctx *ctx, const char *fn, const ocr_tensor *t) {
    int rc = ocr_check_tensor(ctx, fn, t);
    return rc ? rc : ocr_check_device(ctx, fn, t, OCR_DEVICE_CPU);
}

OCRDEF int ocr_tensor_fill(ocr_ctx *ctx, ocr_tensor *t, double v) {
    int64_t i, n;
    int rc;
#ifdef OCR_CUDA
    if (t && t->device == OCR_DEVICE_CUDA) return ocr_cuda_fill(ctx, t, v);
#endif
    rc = ocr__check_cpu(ctx, "ocr_tensor_fill", t);
    if (rc) return rc;
    n = ocr_tensor_numel(t);
    if (t->dtype == OCR_F32) {
        float *p = (float *)t->data, f = (float)v;
        for (i = 0; i < n; i++) p[i] = f;
    } else {
        for (i = 0; i < n; i++) ocr_tensor_set(t, i, v);
    }
    return OCR_OK;
}

OCRDEF int ocr_tensor_zero(ocr_ctx *ctx, ocr_tensor *t) {
    int rc;
#ifdef OCR_CUDA
    if (t && t->device == OCR_DEVICE_CUDA) return ocr_cuda_fill(ctx, t, 0.0);
#endif
    rc = ocr__check_cpu(ctx, "ocr_tensor_zero", t);
    if (rc) return rc;
    memset(t->data, 0, ocr_tensor_bytes(t));
    return OCR_OK;
}

/* Large copies between separate buffers run on every thread: the model's 11 MB input took 0.45 ms on one. */
#define OCR__COPY_PIECE ((size_t)1 << 18)
typedef struct { char *dst; const char *src; size_t bytes; } ocr__copy_job;
static int ocr__parallel_bytes(const void *dst, const void *src, size_t bytes) {
    const char *d = (const char *)dst, *s = (const char *)src;
    return bytes >= 4 * OCR__COPY_PIECE && (d + bytes <= s || s + bytes <= d);
}
static void ocr__copy_part(void *arg, int64_t begin, int64_t end, int tid) {
    const ocr__copy_job *j = (const ocr__copy_job *)arg;
    size_t from = (size_t)begin * OCR__COPY_PIECE, to = (size_t)end * OCR__COPY_PIECE;
    (void)tid;
    if (to > j->bytes) to = j->bytes;
    memcpy(j->dst + from, j->src + from, to - from);
}

OCRDEF int ocr_tensor_copy(ocr_ctx *ctx, ocr_tensor *dst, const ocr_tensor *src) {
    int64_t i, n;
    int rc;
#ifdef OCR_CUDA
    if ((dst && dst->device == OCR_DEVICE_CUDA) || (src && src->device == OCR_DEVICE_CUDA)) return ocr_cuda_tensor_copy(ctx, dst, src);
#endif
    if ((rc = ocr__check_cpu(ctx, "ocr_tensor_copy", dst)) || (rc = ocr__check_cpu(ctx, "ocr_tensor_copy", src)) ||
        (rc = ocr_check_same_shape(ctx, "ocr_tensor_copy", dst, src)))
        return rc;
    n = ocr_tensor_numel(src);
    if (dst->dtype == src->dtype && ocr__parallel_bytes(dst->data, src->data, ocr_tensor_bytes(src))) {
        ocr__copy_job j;
        j.dst = (char *)dst->data; j.src = (const char *)src->data; j.bytes = ocr_tensor_bytes(src);
        ocr_parallel_for(ctx, (int64_t)((j.bytes + OCR__COPY_PIECE - 1) / OCR__COPY_PIECE), 1, ocr__copy_part, &j);
    } else if (dst->dtype == src->dtype) memmove(dst->data, src->data, ocr_tensor_bytes(src));
    else for (i = 0; i < n; i++) ocr_tensor_set(dst, i, ocr_tensor_get(src, i));
    return OCR_OK;
}

OCRDEF int ocr_tensor_on_host(ocr_ctx *ctx, const ocr_tensor *t, ocr_tensor *staging, ocr_tensor *out) {
    int rc;
    if (t->device == OCR_DEVICE_CPU) { *out = *t; out->owns_data = 0; return OCR_OK; }
    if (!staging->data || !ocr_shape_equal(staging->shape, t->shape) || staging->dtype != t->dtype) {
        ocr_tensor_free(staging);
        if ((rc = ocr_tensor_alloc(ctx, staging, t->name, t->dtype, OCR_DEVICE_CPU, t->shape))) return rc;
    }
    if ((rc = ocr_tensor_copy(ctx, staging, t))) return rc;
    *out = *staging;
    out->owns_data = 0;
    return OCR_OK;
}

OCRDEF int ocr_tensor_fill_uniform(ocr_ctx *ctx, ocr_tensor *t, float lo, float hi) {
    int64_t i, n;
    int rc = ocr__check_cpu(ctx, "ocr_tensor_fill_uniform", t);
    if (rc) return rc;
    n = ocr_tensor_numel(t);
    for (i = 0; i < n; i++) ocr_tensor_set(t, i, lo + (hi - lo) * ocr_rng_uniform(&ctx->rng));
    return OCR_OK;
}

OCRDEF int ocr_tensor_fill_normal(ocr_ctx *ctx, ocr_tensor *t, float mean, float stddev) {
    int64_t i, n;
    int rc = ocr__check_cpu(ctx, "ocr_tensor_fill_normal", t);
    if (rc) return rc;
    n = ocr_tensor_numel(t);
    for (i = 0; i < n; i++) ocr_tensor_set(t, i, mean + stddev * ocr_rng_normal(&ctx->rng));
    return OCR_OK;
}

/* ---------------------------------------------------------------- validation */

OCRDEF int ocr_check_tensor(ocr_ctx *ctx, const char *fn, const ocr_tensor *t) {
    int rc;
    if (!t) return ocr_error(ctx, OCR_EINVAL, "%s: a required tensor is NULL", fn);
    if ((unsigned)t->dtype >= OCR_DTYPE_COUNT)
        return ocr_error(ctx, OCR_EDTYPE, "%s: tensor '%s' has unknown dtype %d", fn, t->name, (int)t->dtype);
    if ((rc = ocr_shape_validate(ctx, fn, t->name[0] ? t->name : "a tensor", t->shape))) return rc;
    if (!t->data && ocr_tensor_numel(t) > 0)
        return ocr_error(ctx, OCR_EINVAL, "%s: tensor '%s' has no data (not allocated, or already freed)", fn, t->name);
    return OCR_OK;
}

OCRDEF int ocr_check_shape(ocr_ctx *ctx, const char *fn, const ocr_tensor *t, ocr_shape expected) {
    char d[200], sb[96];
    int rc = ocr_check_tensor(ctx, fn, t);
    if (rc) return rc;
    if (!ocr_shape_equal(t->shape, expected))
        return ocr_error(ctx, OCR_ESHAPE, "%s: tensor %s, expected shape %s", fn, ocr_tensor_describe(t, d, sizeof d),
                         ocr_shape_str(expected, sb, sizeof sb));
    return OCR_OK;
}

OCRDEF int ocr_check_same_shape(ocr_ctx *ctx, const char *fn, const ocr_tensor *a, const ocr_tensor *b) {
    char da[200], db[200];
    int rc;
    if ((rc = ocr_check_tensor(ctx, fn, a)) || (rc = ocr_check_tensor(ctx, fn, b))) return rc;
    if (!ocr_shape_equal(a->shape, b->shape))
        return ocr_error(ctx, OCR_ESHAPE, "%s: tensor %s and tensor %s must have the same shape", fn,
                         ocr_tensor_describe(b, db, sizeof db), ocr_tensor_describe(a, da, sizeof da));
    return OCR_OK;
}

OCRDEF int ocr_check_dtype(ocr_ctx *ctx, const char *fn, const ocr_tensor *t, ocr_dtype dt) {
    char d[200];
    int rc = ocr_check_tensor(ctx, fn, t);
    if (rc) return rc;
    if (t->dtype != dt)
        return ocr_error(ctx, OCR_EDTYPE, "%s: tensor %s must be %s", fn, ocr_tensor_describe(t, d, sizeof d), ocr_dtype_name(dt));
    return OCR_OK;
}

OCRDEF int ocr_check_device(ocr_ctx *ctx, const char *fn, const ocr_tensor *t, ocr_device dev) {
    char d[200];
    int rc = ocr_check_tensor(ctx, fn, t);
    if (rc) return rc;
    if (t->device != dev)
        return ocr_error(ctx, OCR_EDEVICE, "%s: tensor %s is on %s, expected %s", fn, ocr_tensor_describe(t, d, sizeof d),
                         ocr_device_name(t->device), ocr_device_name(dev));
    return OCR_OK;
}

OCRDEF int ocr_check_same_device(ocr_ctx *ctx, const char *fn, const ocr_tensor *a, const ocr_tensor *b) {
    char da[200], db[200];
    int rc;
    if ((rc = ocr_check_tensor(ctx, fn, a)) || (rc = ocr_check_tensor(ctx, fn, b))) return rc;
    if (a->device != b->device)
        return ocr_error(ctx, OCR_EDEVICE, "%s: tensor %s is on %s but tensor %s is on %s", fn, ocr_tensor_describe(b, db, sizeof db),
                         ocr_device_name(b->device), ocr_tensor_describe(a, da, sizeof da), ocr_device_name(a->device));
    return OCR_OK;
}

OCRDEF int ocr_check_f32(ocr_ctx *ctx, const char *fn, const ocr_tensor *t) {
    int rc;
    if ((rc = ocr_check_dtype(ctx, fn, t, OCR_F32))) return rc;
    return ocr_check_device(ctx, fn, t, ctx->device);
}

/* 1 when one of p[0 .. OCR__SCAN_BLOCK) is an infinity or a NaN (exponent bits all ones). Free of branches, with a
   fixed count, so that compilers vectorise it at -O2: the scan of a 736x1280 input took 1.0 ms one isfinite at a
   time, as long as one of the model's convolutions. */
#define OCR__SCAN_BLOCK 256
static int ocr__f32_block_nonfinite(const float *p) {
    uint32_t bad = 0, u;
    int i;
    for (i = 0; i < OCR__SCAN_BLOCK; i++) {
        memcpy(&u, p + i, sizeof u);
        bad |= (u & 0x7f800000u) == 0x7f800000u;
    }
    return bad != 0;
}

OCRDEF int64_t ocr_find_nonfinite(const ocr_tensor *t) {
    int64_t i, n = ocr_tensor_numel(t);
    if (t->dtype == OCR_F32) {
        const float *p = (const float *)t->data;
        for (i = 0; i + OCR__SCAN_BLOCK <= n && !ocr__f32_block_nonfinite(p + i); i += OCR__SCAN_BLOCK) {}
        for (; i < n; i++) if (!isfinite(p[i])) return i;
    } else if (t->dtype == OCR_F16 || t->dtype == OCR_BF16) {
        for (i = 0; i < n; i++) if (!isfinite(ocr_tensor_get(t, i))) return i;
    }
    return -1;
}

#define OCR__SCAN_PIECE (64 * OCR__SCAN_BLOCK)
typedef struct { const float *p; int64_t n; int bad; } ocr__scan_job;
static void ocr__scan_part(void *arg, int64_t begin, int64_t end, int tid) {
    ocr__scan_job *j = (ocr__scan_job *)arg;
    int64_t i = begin * OCR__SCAN_PIECE, stop = end * OCR__SCAN_PIECE < j->n ? end * OCR__SCAN_PIECE : j->n, bad = 0;
    (void)tid;
    for (; i + OCR__SCAN_BLOCK <= stop && !bad; i += OCR__SCAN_BLOCK) bad = ocr__f32_block_nonfinite(j->p + i);
    for (; i < stop && !bad; i++) bad = !isfinite(j->p[i]);
    if (bad) __atomic_store_n(&j->bad, 1, __ATOMIC_RELAXED);
}

/* "[0,0,8,5]" for flat index i of shape s */
static char *ocr__index_str(ocr_shape s, int64_t i, char *buf, size_t cap) {
    ocr_shape idx = s;
    int d;
    for (d = s.ndim - 1; d >= 0; d--) {
        int64_t n = s.dim[d] ? s.dim[d] : 1;
        idx.dim[d] = i % n;
        i /= n;
    }
    return ocr_shape_str(idx, buf, cap);
}

OCRDEF int ocr_check_finite(ocr_ctx *ctx, const char *fn, const ocr_tensor *t) {
    char d[200], ib[96];
    int64_t i;
    int rc;
#ifdef OCR_CUDA
    if (t && t->device == OCR_DEVICE_CUDA) return ocr_cuda_check_values(ctx, fn, t, 0, 0.0, 0.0);
#endif
    rc = ocr__check_cpu(ctx, fn, t);
    if (rc) return rc;
    if (t->dtype == OCR_F32 && ocr_tensor_numel(t) >= 64 * OCR__SCAN_PIECE) {
        /* all threads look; the first bad value's index is then found one block after another */
        ocr__scan_job j;
        j.p = (const float *)t->data; j.n = ocr_tensor_numel(t); j.bad = 0;
        ocr_parallel_for(ctx, (j.n + OCR__SCAN_PIECE - 1) / OCR__SCAN_PIECE, 1, ocr__scan_part, &j);
        if (!__atomic_load_n(&j.bad, __ATOMIC_RELAXED)) return OCR_OK;
    }
    i = ocr_find_nonfinite(t);
    if (i >= 0)
        return ocr_error(ctx, OCR_ENONFINITE, "%s: tensor %s has non-finite value %g at index %lld %s", fn,
                         ocr_tensor_describe(t, d, sizeof d), ocr_tensor_get(t, i), (long long)i,
                         ocr__index_str(t->shape, i, ib, sizeof ib));
    return OCR_OK;
}

OCRDEF int ocr_check_range(ocr_ctx *ctx, const char *fn, const ocr_tensor *t, double lo, double hi) {
    char d[200], ib[96];
    int64_t i, n;
    int rc;
#ifdef OCR_CUDA
    if (t && t->device == OCR_DEVICE_CUDA) return ocr_cuda_check_values(ctx, fn, t, 1, lo, hi);
#endif
    rc = ocr__check_cpu(ctx, fn, t);
    if (rc) return rc;
    n = ocr_tensor_numel(t);
    for (i = 0; i < n; i++) {
        double v = ocr_tensor_get(t, i);
        if (!(v >= lo && v <= hi)) /* also catches NaN */
            return ocr_error(ctx, isfinite(v) ? OCR_ERANGE : OCR_ENONFINITE,
                             "%s: tensor %s has value %g at index %lld %s, outside [%g, %g]", fn,
                             ocr_tensor_describe(t, d, sizeof d), v, (long long)i, ocr__index_str(t->shape, i, ib, sizeof ib), lo, hi);
    }
    return OCR_OK;
}

/* ---------------------------------------------------------------- RNG: xoshiro256** seeded by splitmix64 */

static uint64_t ocr__splitmix64(uint64_t *x) {
    uint64_t z = (*x += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

OCRDEF void ocr_rng_seed(ocr_rng *r, uint64_t seed) {
    int i;
    for (i = 0; i < 4; i++) r->s[i] = ocr__splitmix64(&seed);
    r->has_spare = 0;
    r->spare = 0.0f;
}

static uint64_t ocr__rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

OCRDEF uint64_t ocr_rng_u64(ocr_rng *r) {
    uint64_t *s = r->s, result = ocr__rotl(s[1] * 5, 7) * 9, t = s[1] << 17;
    s[2] ^= s[0]; s[3] ^= s[1]; s[1] ^= s[2]; s[0] ^= s[3]; s[2] ^= t; s[3] = ocr__rotl(s[3], 45);
    return result;
}

OCRDEF uint32_t ocr_rng_below(ocr_rng *r, uint32_t n) {
    /* Lemire's multiply-shift with rejection keeps it unbiased. */
    uint64_t m = (uint64_t)(uint32_t)(ocr_rng_u64(r) >> 32) * n;
    uint32_t low = (uint32_t)m;
    if (n == 0) return 0;
    if (low < n) {
        uint32_t threshold = (uint32_t)(-n) % n;
        while (low < threshold) { m = (uint64_t)(uint32_t)(ocr_rng_u64(r) >> 32) * n; low = (uint32_t)m; }
    }
    return (uint32_t)(m >> 32);
}

OCRDEF float ocr_rng_uniform(ocr_rng *r) { return (float)(ocr_rng_u64(r) >> 40) * (1.0f / 16777216.0f); }

OCRDEF float ocr_rng_normal(ocr_rng *r) {
    double u, v, s;
    if (r->has_spare) { r->has_spare = 0; return r->spare; }
    do {
        u = (double)(ocr_rng_u64(r) >> 11) * (2.0 / 9007199254740992.0) - 1.0;
        v = (double)(ocr_rng_u64(r) >> 11) * (2.0 / 9007199254740992.0) - 1.0;
        s = u * u + v * v;
    } while (s >= 1.0 || s == 0.0);
    s = sqrt(-2.0 * log(s) / s);
    r->spare = (float)(v * s);
    r->has_spare = 1;
    return (float)(u * s);
}

/* ---------------------------------------------------------------- half precision */

OCRDEF uint16_t ocr_f32_to_f16(float f) {
    uint32_t x, sign, mant;
    int32_t exp;
    memcpy(&x, &f, 4);
    sign = (x >> 16) & 0x8000u;
    exp = (int32_t)((x >> 23) & 0xff);
    mant = x & 0x7fffffu;
    if (exp == 0xff) return (uint16_t)(sign | 0x7c00u | (mant ? 0x200u : 0)); /* Inf, NaN stays NaN */
    exp = exp - 127 + 15;
    if (exp >= 0x1f) return (uint16_t)(sign | 0x7c00u);                       /* overflow to Inf */
    if (exp <= 0) {                                                          /* subnormal or zero */
        uint32_t shift, m, half, rounded;
        if (exp < -10) return (uint16_t)sign;
        m = mant | 0x800000u;
        shift = (uint32_t)(14 - exp);
        half = 1u << (shift - 1);
        rounded = m >> shift;
        if ((m & ((half << 1) - 1)) > half || ((m & ((half << 1) - 1)) == half && (rounded & 1))) rounded++;
        return (uint16_t)(sign | rounded);
    }
    {
        uint32_t h = sign | ((uint32_t)exp << 10) | (mant >> 13), rest = mant & 0x1fffu;
        if (rest > 0x1000u || (rest == 0x1000u && (h & 1))) h++; /* may carry into the exponent: correct */
        return (uint16_t)h;
    }
}

OCRDEF float ocr_f16_to_f32(uint16_t h) {
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16, exp = (h >> 10) & 0x1f, mant = h & 0x3ffu, x;
    float f;
    if (exp == 0) {
        f = (float)mant * (1.0f / 16777216.0f); /* 2^-24 */
        memcpy(&x, &f, 4);
        x |= sign;
    } else if (exp == 0x1f) {
        x = sign | 0x7f800000u | (mant << 13);
    } else {
        x = sign | ((exp + 112) << 23) | (mant << 13);
    }
    memcpy(&f, &x, 4);
    return f;
}

OCRDEF uint16_t ocr_f32_to_bf16(float f) {
    uint32_t x;
    memcpy(&x, &f, 4);
    if ((x & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((x >> 16) | 0x40u); /* quiet NaN */
    x += 0x7fffu + ((x >> 16) & 1);
    return (uint16_t)(x >> 16);
}

OCRDEF float ocr_bf16_to_f32(uint16_t h) {
    uint32_t x = (uint32_t)h << 16;
    float f;
    memcpy(&f, &x, 4);
    return f;
}

/* ---------------------------------------------------------------- JSON */

typedef struct {
    const char *s;
    size_t len, pos;
    ocr_json_tok *toks;
    int max_toks, n;
    ocr_ctx *ctx;
} ocr__json;

static int ocr__json_fail(ocr__json *j, const char *what) {
    return ocr_error(j->ctx, OCR_EFORMAT, "ocr_json_parse: %s at byte %zu", what, j->pos);
}

static void ocr__json_ws(ocr__json *j) {
    while (j->pos < j->len && (j->s[j->pos] == ' ' || j->s[j->pos] == '\t' || j->s[j->pos] == '\n' || j->s[j->pos] == '\r')) j->pos++;
}

static int ocr__json_new(ocr__json *j, ocr_json_type type, int *idx) {
    if (j->n >= j->max_toks) return ocr__json_fail(j, "too many JSON values");
    *idx = j->n++;
    memset(&j->toks[*idx], 0, sizeof(ocr_json_tok));
    j->toks[*idx].type = type;
    j->toks[*idx].start = (int64_t)j->pos;
    return OCR_OK;
}

/* Length of the valid UTF-8 sequence at p (1..4), 0 if invalid. */
static int ocr__utf8_len(const unsigned char *p, size_t avail) {
    unsigned c = p[0];
    int n, i;
    uint32_t cp;
    if (c < 0x80) return 1;
    if (c >= 0xc2 && c <= 0xdf) { n = 2; cp = c & 0x1f; }
    else if (c >= 0xe0 && c <= 0xef) { n = 3; cp = c & 0x0f; }
    else if (c >= 0xf0 && c <= 0xf4) { n = 4; cp = c & 0x07; }
    else return 0;
    if ((size_t)n > avail) return 0;
    for (i = 1; i < n; i++) {
        if ((p[i] & 0xc0) != 0x80) return 0;
        cp = (cp << 6) | (p[i] & 0x3f);
    }
    if ((n == 3 && cp < 0x800) || (n == 4 && (cp < 0x10000 || cp > 0x10ffff)) || (cp >= 0xd800 && cp <= 0xdfff)) return 0;
    return n;
}

/* 1 when the NUL-terminated s is valid UTF-8: a writer must not emit a string its own reader refuses. */
static int ocr__utf8_valid(const char *s) {
    size_t len = strlen(s), i = 0;
    int n;
    for (; i < len; i += (size_t)n)
        if (!(n = ocr__utf8_len((const unsigned char *)s + i, len - i))) return 0;
    return 1;
}

static int ocr__json_string(ocr__json *j) {
    int idx, rc;
    j->pos++; /* opening quote */
    if ((rc = ocr__json_new(j, OCR_JSON_STRING, &idx))) return rc;
    while (j->pos < j->len) {
        unsigned char c = (unsigned char)j->s[j->pos];
        if (c == '"') { j->toks[idx].end = (int64_t)j->pos; j->pos++; j->toks[idx].next = j->n; return OCR_OK; }
        if (c < 0x20) return ocr__json_fail(j, "control character inside a string");
        if (c == '\\') {
            if (j->pos + 1 >= j->len) break;
            c = (unsigned char)j->s[j->pos + 1];
            if (c == 'u') {
                int k;
                for (k = 0; k < 4; k++) {
                    char h = j->pos + 2 + k < j->len ? j->s[j->pos + 2 + k] : 0;
                    if (!((h >= '0' && h <= '9') || (h >= 'a' && h <= 'f') || (h >= 'A' && h <= 'F')))
                        return ocr__json_fail(j, "bad \\u escape");
                }
                j->pos += 6;
            } else if (strchr("\"\\/bfnrt", (int)c) && c) {
                j->pos += 2;
            } else {
                return ocr__json_fail(j, "bad escape");
            }
            continue;
        }
        {
            int n = ocr__utf8_len((const unsigned char *)j->s + j->pos, j->len - j->pos);
            if (!n) return ocr__json_fail(j, "invalid UTF-8");
            j->pos += (size_t)n;
        }
    }
    return ocr__json_fail(j, "unterminated string");
}

static int ocr__json_number(ocr__json *j) {
    int idx, rc;
    size_t p = j->pos;
    const char *s = j->s;
    if ((rc = ocr__json_new(j, OCR_JSON_NUMBER, &idx))) return rc;
    if (p < j->len && s[p] == '-') p++;
    if (p < j->len && s[p] == '0') p++;
    else if (p < j->len && s[p] >= '1' && s[p] <= '9') while (p < j->len && s[p] >= '0' && s[p] <= '9') p++;
    else return ocr__json_fail(j, "bad number");
    if (p < j->len && s[p] == '.') {
        p++;
        if (!(p < j->len && s[p] >= '0' && s[p] <= '9')) return ocr__json_fail(j, "bad number");
        while (p < j->len && s[p] >= '0' && s[p] <= '9') p++;
    }
    if (p < j->len && (s[p] == 'e' || s[p] == 'E')) {
        p++;
        if (p < j->len && (s[p] == '+' || s[p] == '-')) p++;
        if (!(p < j->len && s[p] >= '0' && s[p] <= '9')) return ocr__json_fail(j, "bad number");
        while (p < j->len && s[p] >= '0' && s[p] <= '9') p++;
    }
    if (p - j->pos > 64) return ocr__json_fail(j, "number too long");
    j->pos = p;
    j->toks[idx].end = (int64_t)p;
    j->toks[idx].next = j->n;
    return OCR_OK;
}

static int ocr__json_value(ocr__json *j, int depth) {
    int idx, rc;
    char c;
    ocr__json_ws(j);
    if (j->pos >= j->len) return ocr__json_fail(j, "unexpected end of input");
    c = j->s[j->pos];
    if ((c == '{' || c == '[') && depth >= 64) return ocr__json_fail(j, "nesting deeper than 64"); /* containers only */
    if (c == '"') return ocr__json_string(j);
    if (c == '-' || (c >= '0' && c <= '9')) return ocr__json_number(j);
    if (c == '{' || c == '[') {
        int is_obj = c == '{';
        char close = is_obj ? '}' : ']';
        if ((rc = ocr__json_new(j, is_obj ? OCR_JSON_OBJECT : OCR_JSON_ARRAY, &idx))) return rc;
        j->pos++;
        ocr__json_ws(j);
        if (j->pos < j->len && j->s[j->pos] == close) {
            j->pos++;
        } else {
            for (;;) {
                if (is_obj) {
                    ocr__json_ws(j);
                    if (j->pos >= j->len || j->s[j->pos] != '"') return ocr__json_fail(j, "expected a string key");
                    if ((rc = ocr__json_string(j))) return rc;
                    ocr__json_ws(j);
                    if (j->pos >= j->len || j->s[j->pos] != ':') return ocr__json_fail(j, "expected ':'");
                    j->pos++;
                }
                if ((rc = ocr__json_value(j, depth + 1))) return rc;
                j->toks[idx].size++;
                ocr__json_ws(j);
                if (j->pos < j->len && j->s[j->pos] == ',') { j->pos++; continue; }
                if (j->pos < j->len && j->s[j->pos] == close) { j->pos++; break; }
                return ocr__json_fail(j, is_obj ? "expected ',' or '}'" : "expected ',' or ']'");
            }
        }
        j->toks[idx].end = (int64_t)j->pos;
        j->toks[idx].next = j->n;
        return OCR_OK;
    }
    {
        static const char *const words[] = {"true", "false", "null"};
        int w;
        for (w = 0; w < 3; w++) {
            size_t n = strlen(words[w]);
            if (j->len - j->pos >= n && memcmp(j->s + j->pos, words[w], n) == 0) {
                if ((rc = ocr__json_new(j, w == 2 ? OCR_JSON_NULL : OCR_JSON_BOOL, &idx))) return rc;
                j->pos += n;
                j->toks[idx].end = (int64_t)j->pos;
                j->toks[idx].next = j->n;
                return OCR_OK;
            }
        }
    }
    return ocr__json_fail(j, "unexpected character");
}

OCRDEF int ocr_json_parse(ocr_ctx *ctx, const char *src, size_t len, ocr_json_tok *toks, int max_toks, int *n_toks) {
    ocr__json j;
    int rc;
    j.s = src; j.len = len; j.pos = 0; j.toks = toks; j.max_toks = max_toks; j.n = 0; j.ctx = ctx;
    *n_toks = 0;
    if ((rc = ocr__json_value(&j, 0))) return rc;
    ocr__json_ws(&j);
    if (j.pos != len) return ocr__json_fail(&j, "trailing characters after the JSON value");
    *n_toks = j.n;
    return OCR_OK;
}

OCRDEF int ocr_json_child(const ocr_json_tok *toks, int parent, int i) {
    int k, idx = parent + 1, step = toks[parent].type == OCR_JSON_OBJECT ? 2 : 1;
    if (toks[parent].type != OCR_JSON_ARRAY && toks[parent].type != OCR_JSON_OBJECT) return -1;
    if (i < 0 || i >= toks[parent].size) return -1;
    for (k = 0; k < i * step; k++) idx = toks[idx].next;
    return idx;
}

OCRDEF int ocr_json_streq(const char *src, const ocr_json_tok *tok, const char *s) {
    size_t n = strlen(s);
    return tok->type == OCR_JSON_STRING && (size_t)(tok->end - tok->start) == n && memcmp(src + tok->start, s, n) == 0;
}

OCRDEF int ocr_json_find(const char *src, const ocr_json_tok *toks, int object, const char *key) {
    int i, k;
    if (toks[object].type != OCR_JSON_OBJECT) return -1;
    for (i = 0, k = object + 1; i < toks[object].size; i++) {
        if (ocr_json_streq(src, &toks[k], key)) return toks[k].next;
        k = toks[toks[k].next].next;
    }
    return -1;
}

static int ocr__hex(char c) { return c <= '9' ? c - '0' : (c | 0x20) - 'a' + 10; }

OCRDEF int ocr_json_string(const char *src, const ocr_json_tok *tok, char *out, size_t cap) {
    int64_t p = tok->start;
    size_t o = 0;
    if (tok->type != OCR_JSON_STRING || cap == 0) return 0;
    while (p < tok->end) {
        char c = src[p];
        if (c != '\\') { if (o + 1 >= cap) return 0; out[o++] = c; p++; continue; }
        c = src[p + 1];
        if (c != 'u') {
            static const char from[] = "\"\\/bfnrt", to[] = "\"\\/\b\f\n\r\t";
            if (o + 1 >= cap) return 0;
            out[o++] = to[strchr(from, c) - from];
            p += 2;
        } else {
            uint32_t cp = (uint32_t)(ocr__hex(src[p + 2]) << 12 | ocr__hex(src[p + 3]) << 8 | ocr__hex(src[p + 4]) << 4 | ocr__hex(src[p + 5]));
            p += 6;
            if (cp >= 0xd800 && cp <= 0xdbff && p + 5 < tok->end && src[p] == '\\' && src[p + 1] == 'u') {
                uint32_t lo = (uint32_t)(ocr__hex(src[p + 2]) << 12 | ocr__hex(src[p + 3]) << 8 | ocr__hex(src[p + 4]) << 4 | ocr__hex(src[p + 5]));
                if (lo >= 0xdc00 && lo <= 0xdfff) { cp = 0x10000 + ((cp - 0xd800) << 10) + (lo - 0xdc00); p += 6; }
            }
            if (cp == 0 || (cp >= 0xd800 && cp <= 0xdfff)) return 0; /* NUL or lone surrogate */
            if (o + 4 >= cap) return 0;
            if (cp < 0x80) out[o++] = (char)cp;
            else if (cp < 0x800) { out[o++] = (char)(0xc0 | cp >> 6); out[o++] = (char)(0x80 | (cp & 0x3f)); }
            else if (cp < 0x10000) { out[o++] = (char)(0xe0 | cp >> 12); out[o++] = (char)(0x80 | ((cp >> 6) & 0x3f)); out[o++] = (char)(0x80 | (cp & 0x3f)); }
            else { out[o++] = (char)(0xf0 | cp >> 18); out[o++] = (char)(0x80 | ((cp >> 12) & 0x3f)); out[o++] = (char)(0x80 | ((cp >> 6) & 0x3f)); out[o++] = (char)(0x80 | (cp & 0x3f)); }
        }
    }
    out[o] = 0;
    return 1;
}

OCRDEF int ocr_json_number(const char *src, const ocr_json_tok *tok, double *out) {
    char buf[80];
    size_t n = (size_t)(tok->end - tok->start);
    char *end;
    if (tok->type != OCR_JSON_NUMBER || n >= sizeof buf) return 0;
    memcpy(buf, src + tok->start, n);
    buf[n] = 0;
    *out = strtod(buf, &end);
    return end == buf + n && isfinite(*out);
}

OCRDEF size_t ocr_json_quote(char *buf, size_t cap, const char *s) {
    static const char ctl[] = "\b\f\n\r\t", short_form[] = "bfnrt"; /* as serde_json and Python write them */
    size_t len = strlen(buf), need = len;
    const unsigned char *p = (const unsigned char *)s;
#define OCR__PUT(ch) do { if (need + 1 < cap) buf[need] = (char)(ch); need++; } while (0)
    OCR__PUT('"');
    for (; *p; p++) {
        if (*p == '"' || *p == '\\') { OCR__PUT('\\'); OCR__PUT(*p); }
        else if (*p < 0x20 && strchr(ctl, (int)*p)) { OCR__PUT('\\'); OCR__PUT(short_form[strchr(ctl, (int)*p) - ctl]); }
        else if (*p < 0x20) {
            static const char hexd[] = "0123456789abcdef";
            OCR__PUT('\\'); OCR__PUT('u'); OCR__PUT('0'); OCR__PUT('0'); OCR__PUT(hexd[*p >> 4]); OCR__PUT(hexd[*p & 15]);
        } else OCR__PUT(*p);
    }
    OCR__PUT('"');
#undef OCR__PUT
    if (cap) buf[need < cap ? need : cap - 1] = 0;
    return need + 1;
}

/* ---------------------------------------------------------------- files */

OCRDEF int ocr_read_file(ocr_ctx *ctx, const char *path, size_t max_size, unsigned char **out, size_t *out_size) {
    FILE *f;
    long size;
    unsigned char *buf;
    struct stat sb;
    *out = NULL;
    *out_size = 0;
    /* A directory opens and "seeks" to a huge size on Linux: refuse anything but a regular file first. */
    if (stat(path, &sb) == 0 && !S_ISREG(sb.st_mode))
        return ocr_error(ctx, OCR_EIO, "ocr_read_file: '%s' is not a regular file", path);
    f = fopen(path, "rb");
    if (!f) return ocr_error(ctx, OCR_EIO, "ocr_read_file: cannot open '%s': %s", path, strerror(errno));
    if (fseek(f, 0, SEEK_END) != 0 || (size = ftell(f)) < 0 || fseek(f, 0, SEEK_SET) != 0) {
        fclose(f);
        return ocr_error(ctx, OCR_EIO, "ocr_read_file: cannot size '%s' (not a regular file?)", path);
    }
    if ((unsigned long)size > max_size) {
        fclose(f);
        return ocr_error(ctx, OCR_EOVERFLOW, "ocr_read_file: '%s' has %ld bytes, more than the %zu allowed", path, size, max_size);
    }
    buf = (unsigned char *)OCR_MALLOC((size_t)size + 1);
    if (!buf) { fclose(f); return ocr_error(ctx, OCR_ENOMEM, "ocr_read_file: cannot allocate %ld bytes for '%s'", size, path); }
    if (size && fread(buf, 1, (size_t)size, f) != (size_t)size) {
        OCR_FREE(buf);
        fclose(f);
        return ocr_error(ctx, OCR_EIO, "ocr_read_file: short read on '%s'", path);
    }
    fclose(f);
    buf[size] = 0;
    *out = buf;
    *out_size = (size_t)size;
    return OCR_OK;
}

OCRDEF int ocr_write_file_atomic(ocr_ctx *ctx, const char *path, const void *bytes, size_t size) {
    char tmp[4096], dir[4096];
    const unsigned char *p = (const unsigned char *)bytes;
    size_t done = 0;
    int fd;
    char *slash;
    if (snprintf(tmp, sizeof tmp, "%s.tmp.%ld", path, (long)getpid()) >= (int)sizeof tmp)
        return ocr_error(ctx, OCR_EINVAL, "ocr_write_file_atomic: path too long");
    fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd < 0) return ocr_error(ctx, OCR_EIO, "ocr_write_file_atomic: cannot create '%s': %s", tmp, strerror(errno));
    while (done < size) {
        ssize_t w = write(fd, p + done, size - done);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) {
            int e = errno;
            close(fd);
            unlink(tmp);
            return ocr_error(ctx, OCR_EIO, "ocr_write_file_atomic: writing '%s' failed: %s", tmp, strerror(e));
        }
        done += (size_t)w;
    }
    if (fsync(fd) != 0 || close(fd) != 0) {
        unlink(tmp);
        return ocr_error(ctx, OCR_EIO, "ocr_write_file_atomic: flushing '%s' failed: %s", tmp, strerror(errno));
    }
    if (rename(tmp, path) != 0) {
        int e = errno;
        unlink(tmp);
        return ocr_error(ctx, OCR_EIO, "ocr_write_file_atomic: renaming to '%s' failed: %s", path, strerror(e));
    }
    /* The rename itself is durable only once the directory is synced. */
    snprintf(dir, sizeof dir, "%s", path);
    slash = strrchr(dir, '/');
    if (slash) { if (slash == dir) slash[1] = 0; else *slash = 0; } else snprintf(dir, sizeof dir, ".");
    fd = open(dir, O_RDONLY);
    if (fd >= 0) { (void)fsync(fd); close(fd); }
    return OCR_OK;
}

/* ---------------------------------------------------------------- safetensors */

static int ocr__st_dtype(const char *src, const ocr_json_tok *t, ocr_dtype *out) {
    int i;
    for (i = 0; i < OCR_DTYPE_COUNT; i++) if (ocr_json_streq(src, t, ocr_dtype_name((ocr_dtype)i))) { *out = (ocr_dtype)i; return 1; }
    return 0;
}

OCRDEF void ocr_safetensors_close(ocr_safetensors *st) {
    int i;
    if (!st) return;
    for (i = 0; i < st->n_meta; i++) { OCR_FREE(st->meta_keys[i]); OCR_FREE(st->meta_values[i]); }
    OCR_FREE(st->meta_keys);
    OCR_FREE(st->meta_values);
    OCR_FREE(st->entries);
    OCR_FREE(st->bytes);
    memset(st, 0, sizeof *st);
}

static char *ocr__json_strdup(const char *src, const ocr_json_tok *t) {
    size_t cap = (size_t)(t->end - t->start) + 1; /* unescaping never grows a string */
    char *s = (char *)OCR_MALLOC(cap);
    if (s && !ocr_json_string(src, t, s, cap)) { OCR_FREE(s); return NULL; }
    return s;
}

static int ocr__st_cmp_begin(const void *a, const void *b) {
    const ocr_safetensors_entry *x = (const ocr_safetensors_entry *)a, *y = (const ocr_safetensors_entry *)b;
    return x->begin < y->begin ? -1 : x->begin > y->begin ? 1 : (x->end > y->end) - (x->end < y->end);
}

typedef struct { const char *s; size_t len; } ocr__key_ref;
static int ocr__key_ref_cmp(const void *a, const void *b) {
    const ocr__key_ref *x = (const ocr__key_ref *)a, *y = (const ocr__key_ref *)b;
    return x->len != y->len ? (x->len < y->len ? -1 : 1) : memcmp(x->s, y->s, x->len);
}

/* 1 when key token t stands for the string s, escaped or not: every JSON reader takes "\u005f_metadata__" for
   "__metadata__". s is short (a reserved key), so a longer escaped key cannot match. */
static int ocr__st_key_is(const char *src, const ocr_json_tok *t, const char *s) {
    char buf[96];
    size_t n = (size_t)(t->end - t->start);
    if (ocr_json_streq(src, t, s)) return 1;
    if (t->type != OCR_JSON_STRING || n >= sizeof buf || !memchr(src + t->start, '\\', n)) return 0;
    return ocr_json_string(src, t, buf, sizeof buf) && strcmp(buf, s) == 0;
}

/* OCR_OK, or OCR_EFORMAT naming a key that object holds twice: the format forbids it, and JSON readers disagree
   on which value wins. Keys are compared as the strings they stand for ("a" and "\u0061" are one key; a key
   that does not unescape, \u0000 or a lone surrogate, is compared raw: its reader refuses it anyway). Sorting
   keeps this O(n log n) for headers with very many keys. */
static int ocr__st_unique_keys(ocr_ctx *ctx, const char *fn, const char *src, const ocr_json_tok *toks, int object, const char *where) {
    int n = toks[object].size, i, k, rc = OCR_OK;
    ocr__key_ref *refs;
    char *unescaped = NULL;
    size_t escaped_bytes = 0, used = 0;
    if (n < 2) return OCR_OK;
    for (i = 0, k = object + 1; i < n; i++, k = toks[toks[k].next].next)
        if (memchr(src + toks[k].start, '\\', (size_t)(toks[k].end - toks[k].start))) escaped_bytes += (size_t)(toks[k].end - toks[k].start) + 1;
    refs = (ocr__key_ref *)OCR_MALLOC((size_t)n * sizeof *refs);
    if (escaped_bytes) unescaped = (char *)OCR_MALLOC(escaped_bytes); /* unescaping never grows a string */
    if (!refs || (escaped_bytes && !unescaped)) { OCR_FREE(refs); OCR_FREE(unescaped); return ocr_error(ctx, OCR_ENOMEM, "%s: out of memory", fn); }
    for (i = 0, k = object + 1; i < n; i++, k = toks[toks[k].next].next) {
        size_t len = (size_t)(toks[k].end - toks[k].start);
        refs[i].s = src + toks[k].start;
        refs[i].len = len;
        if (memchr(src + toks[k].start, '\\', len) && ocr_json_string(src, &toks[k], unescaped + used, len + 1)) {
            refs[i].s = unescaped + used;
            refs[i].len = strlen(unescaped + used);
            used += refs[i].len + 1;
        }
    }
    qsort(refs, (size_t)n, sizeof *refs, ocr__key_ref_cmp);
    for (i = 1; i < n && !rc; i++)
        if (ocr__key_ref_cmp(&refs[i - 1], &refs[i]) == 0)
            rc = ocr_error(ctx, OCR_EFORMAT, "%s: %s has the key '%.*s' twice", fn, where, refs[i].len > 80 ? 80 : (int)refs[i].len, refs[i].s);
    OCR_FREE(refs);
    OCR_FREE(unescaped);
    return rc;
}

/* Parses st->bytes (already owned by st). */
static int ocr__st_parse(ocr_ctx *ctx, ocr_safetensors *st) {
    const char *fn = "ocr_safetensors_open";
    uint64_t hlen = 0;
    const char *h;
    ocr_json_tok *toks = NULL;
    int n_toks = 0, max_toks, rc = OCR_OK, i, k, n_tensors = 0, next_key;
    size_t data_size, expect;
    int b;
    if (st->size < 8) return ocr_error(ctx, OCR_EFORMAT, "%s: file has %zu bytes, fewer than the 8-byte header length", fn, st->size);
    for (b = 7; b >= 0; b--) hlen = (hlen << 8) | st->bytes[b];
    if (hlen > OCR_SAFETENSORS_MAX_HEADER)
        return ocr_error(ctx, OCR_EFORMAT, "%s: header length %llu exceeds the %u-byte cap", fn, (unsigned long long)hlen,
                         (unsigned)OCR_SAFETENSORS_MAX_HEADER);
    if (hlen > st->size - 8)
        return ocr_error(ctx, OCR_EFORMAT, "%s: header length %llu runs past the end of the %zu-byte file", fn,
                         (unsigned long long)hlen, st->size);
    if (hlen < 2) return ocr_error(ctx, OCR_EFORMAT, "%s: header of %llu bytes cannot hold a JSON object", fn, (unsigned long long)hlen);
    st->data_start = 8 + (size_t)hlen;
    data_size = st->size - st->data_start;
    h = (const char *)st->bytes + 8;
    /* A JSON value needs at least one byte, so the header length bounds the token count. */
    max_toks = (int)(hlen < 4000000 ? hlen : 4000000) + 1;
    toks = (ocr_json_tok *)OCR_MALLOC((size_t)max_toks * sizeof *toks);
    if (!toks) return ocr_error(ctx, OCR_ENOMEM, "%s: cannot allocate the header parser", fn);
    if ((rc = ocr_json_parse(ctx, h, (size_t)hlen, toks, max_toks, &n_toks))) {
        char msg[OCR_ERROR_MAX];
        snprintf(msg, sizeof msg, "%s", ctx->last_error);
        rc = ocr_error(ctx, OCR_EFORMAT, "%s: header is not valid JSON (%s)", fn, msg);
        goto done;
    }
    if (toks[0].type != OCR_JSON_OBJECT) { rc = ocr_error(ctx, OCR_EFORMAT, "%s: header is not a JSON object", fn); goto done; }
    if ((rc = ocr__st_unique_keys(ctx, fn, h, toks, 0, "header"))) goto done;
    /* Keys are walked through next links: ocr_json_child per key would make this quadratic. */
    for (i = 0, k = 1; i < toks[0].size; i++, k = toks[toks[k].next].next)
        if (!ocr__st_key_is(h, &toks[k], "__metadata__")) n_tensors++;
    st->entries = (ocr_safetensors_entry *)OCR_MALLOC((size_t)(n_tensors ? n_tensors : 1) * sizeof *st->entries);
    if (!st->entries) { rc = ocr_error(ctx, OCR_ENOMEM, "%s: out of memory", fn); goto done; }
    for (i = 0, next_key = 1; i < toks[0].size; i++) {
        int key = next_key, val = toks[key].next, f;
        ocr_safetensors_entry *e;
        char name[OCR_NAME_MAX];
        size_t nbytes = 0;
        double d0, d1;
        next_key = toks[val].next;
        if (ocr__st_key_is(h, &toks[key], "__metadata__")) {
            int mk, mv;
            if (toks[val].type != OCR_JSON_OBJECT) { rc = ocr_error(ctx, OCR_EFORMAT, "%s: __metadata__ is not an object", fn); goto done; }
            if ((rc = ocr__st_unique_keys(ctx, fn, h, toks, val, "__metadata__"))) goto done;
            st->meta_keys = (char **)OCR_MALLOC((size_t)(toks[val].size + 1) * sizeof(char *));
            st->meta_values = (char **)OCR_MALLOC((size_t)(toks[val].size + 1) * sizeof(char *));
            if (!st->meta_keys || !st->meta_values) { rc = ocr_error(ctx, OCR_ENOMEM, "%s: out of memory", fn); goto done; }
            for (k = 0, mk = val + 1; k < toks[val].size; k++, mk = toks[mv].next) {
                mv = toks[mk].next;
                if (toks[mv].type != OCR_JSON_STRING) { rc = ocr_error(ctx, OCR_EFORMAT, "%s: __metadata__ values must be strings", fn); goto done; }
                st->meta_keys[st->n_meta] = ocr__json_strdup(h, &toks[mk]);
                st->meta_values[st->n_meta] = ocr__json_strdup(h, &toks[mv]);
                if (!st->meta_keys[st->n_meta] || !st->meta_values[st->n_meta]) {
                    OCR_FREE(st->meta_keys[st->n_meta]); OCR_FREE(st->meta_values[st->n_meta]);
                    rc = ocr_error(ctx, OCR_EFORMAT, "%s: __metadata__ holds a string with \\u0000 or a lone surrogate", fn);
                    goto done;
                }
                st->n_meta++;
            }
            continue;
        }
        if (!ocr_json_string(h, &toks[key], name, sizeof name) || !name[0]) {
            rc = ocr_error(ctx, OCR_EFORMAT, "%s: tensor name at byte %lld is empty, longer than %d bytes or holds \\u0000", fn,
                           (long long)toks[key].start, OCR_NAME_MAX - 1);
            goto done;
        }
        e = &st->entries[st->n_entries];
        memset(e, 0, sizeof *e);
        memcpy(e->name, name, sizeof name);
        if (toks[val].type != OCR_JSON_OBJECT) { rc = ocr_error(ctx, OCR_EFORMAT, "%s: entry '%s' is not an object", fn, name); goto done; }
        {
            char where[OCR_NAME_MAX + 16];
            snprintf(where, sizeof where, "entry '%s'", name);
            if ((rc = ocr__st_unique_keys(ctx, fn, h, toks, val, where))) goto done;
        }
        for (k = 0; k < toks[val].size; k++) {
            int fk = ocr_json_child(toks, val, k);
            if (!ocr_json_streq(h, &toks[fk], "dtype") && !ocr_json_streq(h, &toks[fk], "shape") && !ocr_json_streq(h, &toks[fk], "data_offsets")) {
                rc = ocr_error(ctx, OCR_EFORMAT, "%s: entry '%s' has an unknown field", fn, name);
                goto done;
            }
        }
        f = ocr_json_find(h, toks, val, "dtype");
        if (f < 0 || toks[f].type != OCR_JSON_STRING) { rc = ocr_error(ctx, OCR_EFORMAT, "%s: entry '%s' has no dtype string", fn, name); goto done; }
        if (!ocr__st_dtype(h, &toks[f], &e->dtype)) {
            rc = ocr_error(ctx, OCR_EFORMAT, "%s: entry '%s' has dtype '%.*s'; ocr-c reads F32, F16, BF16, U8, I32 and I64", fn, name,
                           (int)(toks[f].end - toks[f].start) > 20 ? 20 : (int)(toks[f].end - toks[f].start), h + toks[f].start);
            goto done;
        }
        f = ocr_json_find(h, toks, val, "shape");
        if (f < 0 || toks[f].type != OCR_JSON_ARRAY) { rc = ocr_error(ctx, OCR_EFORMAT, "%s: entry '%s' has no shape array", fn, name); goto done; }
        if (toks[f].size > OCR_MAX_DIMS) {
            rc = ocr_error(ctx, OCR_EFORMAT, "%s: entry '%s' has %d dims; ocr-c tensors have at most %d", fn, name, toks[f].size, OCR_MAX_DIMS);
            goto done;
        }
        e->shape.ndim = toks[f].size;
        for (k = 0; k < toks[f].size; k++) {
            int dk = ocr_json_child(toks, f, k);
            double d;
            if (!ocr_json_number(h, &toks[dk], &d) || d < 0 || d != floor(d) || d > (double)OCR_MAX_NUMEL) {
                rc = ocr_error(ctx, OCR_EFORMAT, "%s: entry '%s' has a shape entry that is not a non-negative integer below 2^40", fn, name);
                goto done;
            }
            e->shape.dim[k] = (int64_t)d;
        }
        if (ocr_shape_validate(ctx, fn, name, e->shape)) { rc = OCR_EFORMAT; ctx->last_status = rc; goto done; }
        f = ocr_json_find(h, toks, val, "data_offsets");
        if (f < 0 || toks[f].type != OCR_JSON_ARRAY || toks[f].size != 2 ||
            !ocr_json_number(h, &toks[ocr_json_child(toks, f, 0)], &d0) || !ocr_json_number(h, &toks[ocr_json_child(toks, f, 1)], &d1) ||
            d0 < 0 || d1 < 0 || d0 != floor(d0) || d1 != floor(d1) || d0 > 9.0e15 || d1 > 9.0e15) {
            rc = ocr_error(ctx, OCR_EFORMAT, "%s: entry '%s' needs data_offsets [begin, end] of non-negative integers", fn, name);
            goto done;
        }
        e->begin = (size_t)d0;
        e->end = (size_t)d1;
        if (e->begin > e->end) { rc = ocr_error(ctx, OCR_EFORMAT, "%s: entry '%s' has begin %zu after end %zu", fn, name, e->begin, e->end); goto done; }
        if (!ocr_size_mul((size_t)ocr_shape_numel(e->shape), ocr_dtype_size(e->dtype), &nbytes) || nbytes != e->end - e->begin) {
            char sb[96];
            rc = ocr_error(ctx, OCR_EFORMAT, "%s: entry '%s' (%s %s) needs %zu bytes but its data_offsets span %zu", fn, name,
                           ocr_dtype_name(e->dtype), ocr_shape_str(e->shape, sb, sizeof sb), nbytes, e->end - e->begin);
            goto done;
        }
        st->n_entries++;
    }
    /* The data section must be covered exactly: sorted by offset, contiguous from 0, no trailing bytes. */
    {
        ocr_safetensors_entry *sorted = (ocr_safetensors_entry *)OCR_MALLOC((size_t)(st->n_entries ? st->n_entries : 1) * sizeof *sorted);
        size_t at = 0;
        if (!sorted) { rc = ocr_error(ctx, OCR_ENOMEM, "%s: out of memory", fn); goto done; }
        if (st->n_entries) memcpy(sorted, st->entries, (size_t)st->n_entries * sizeof *sorted);
        qsort(sorted, (size_t)st->n_entries, sizeof *sorted, ocr__st_cmp_begin);
        for (i = 0; i < st->n_entries; i++) {
            if (sorted[i].begin != at) {
                rc = ocr_error(ctx, OCR_EFORMAT, "%s: entry '%s' starts at %zu but the previous data ends at %zu (%s)", fn,
                               sorted[i].name, sorted[i].begin, at, sorted[i].begin > at ? "gap" : "overlap");
                break;
            }
            at = sorted[i].end;
        }
        OCR_FREE(sorted);
        if (rc) goto done;
        expect = at;
        if (expect != data_size) {
            rc = ocr_error(ctx, OCR_EFORMAT, "%s: tensors cover %zu data bytes but the file holds %zu (%s)", fn, expect, data_size,
                           expect > data_size ? "truncated file" : "trailing bytes");
            goto done;
        }
    }
done:
    OCR_FREE(toks);
    return rc;
}

OCRDEF int ocr_safetensors_open_memory(ocr_ctx *ctx, ocr_safetensors *st, const void *bytes, size_t size) {
    int rc;
    memset(st, 0, sizeof *st);
    st->bytes = (unsigned char *)OCR_MALLOC(size ? size : 1);
    if (!st->bytes) return ocr_error(ctx, OCR_ENOMEM, "ocr_safetensors_open: cannot allocate %zu bytes", size);
    if (size) memcpy(st->bytes, bytes, size);
    st->size = size;
    rc = ocr__st_parse(ctx, st);
    if (rc) ocr_safetensors_close(st);
    return rc;
}

/* Reads the 8-byte length, then the header, and validates both against the file's size (JSON, every tensor's range
   inside the data section) before the data is read: a large file that is not safetensors, or whose header promises
   data it lacks, is refused after reading at most its header. */
OCRDEF int ocr_safetensors_open(ocr_ctx *ctx, ocr_safetensors *st, const char *path) {
    const char *fn = "ocr_safetensors_open";
    struct stat sb;
    FILE *f;
    long fsize;
    size_t size, have;
    uint64_t hlen = 0;
    int rc, b;
    memset(st, 0, sizeof *st);
    /* A directory opens and "seeks" to a huge size on Linux: refuse anything but a regular file first. */
    if (stat(path, &sb) == 0 && !S_ISREG(sb.st_mode)) return ocr_error(ctx, OCR_EIO, "%s: '%s' is not a regular file", fn, path);
    f = fopen(path, "rb");
    if (!f) return ocr_error(ctx, OCR_EIO, "%s: cannot open '%s': %s", fn, path, strerror(errno));
    if (fseek(f, 0, SEEK_END) != 0 || (fsize = ftell(f)) < 0 || fseek(f, 0, SEEK_SET) != 0) {
        fclose(f);
        return ocr_error(ctx, OCR_EIO, "%s: cannot size '%s' (not a regular file?)", fn, path);
    }
    if ((unsigned long)fsize > ((unsigned long)1 << 40) - 1) {
        fclose(f);
        return ocr_error(ctx, OCR_EOVERFLOW, "%s: '%s' has %ld bytes, more than the 2^40 allowed", fn, path, fsize);
    }
    size = (size_t)fsize;
    have = size < 8 ? size : 8;
    st->bytes = (unsigned char *)OCR_MALLOC(have + 1);
    if (!st->bytes) { fclose(f); return ocr_error(ctx, OCR_ENOMEM, "%s: out of memory", fn); }
    if (have && fread(st->bytes, 1, have, f) != have) goto short_read;
    if (have == 8) {
        for (b = 7; b >= 0; b--) hlen = (hlen << 8) | st->bytes[b];
        /* an implausible length is left for ocr__st_parse to refuse, with nothing more read */
        if (hlen <= OCR_SAFETENSORS_MAX_HEADER && hlen <= size - 8) {
            unsigned char *grown = (unsigned char *)OCR_REALLOC(st->bytes, 8 + (size_t)hlen + 1);
            if (!grown) { rc = ocr_error(ctx, OCR_ENOMEM, "%s: cannot allocate the %llu-byte header of '%s'", fn, (unsigned long long)hlen, path); goto fail; }
            st->bytes = grown;
            if (hlen && fread(st->bytes + 8, 1, (size_t)hlen, f) != (size_t)hlen) goto short_read;
            have = 8 + (size_t)hlen;
        }
    }
    /* ocr__st_parse reads only bytes [0, 8 + header length) and checks the tensors against the declared size */
    st->bytes[have] = 0;
    st->size = size;
    if ((rc = ocr__st_parse(ctx, st))) {
        char msg[OCR_ERROR_MAX];
        snprintf(msg, sizeof msg, "%s", ctx->last_error);
        ocr_error(ctx, rc, "%s (file '%s')", msg, path);
        goto fail;
    }
    if (size > have) {
        unsigned char *grown = (unsigned char *)OCR_REALLOC(st->bytes, size + 1);
        if (!grown) { rc = ocr_error(ctx, OCR_ENOMEM, "%s: cannot allocate %zu bytes for '%s'", fn, size, path); goto fail; }
        st->bytes = grown;
        if (fread(st->bytes + have, 1, size - have, f) != size - have) goto short_read;
    }
    st->bytes[size] = 0;
    fclose(f);
    return OCR_OK;
short_read:
    rc = ocr_error(ctx, OCR_EIO, "%s: short read on '%s' (did it shrink while being read?)", fn, path);
fail:
    fclose(f);
    ocr_safetensors_close(st);
    return rc;
}

OCRDEF int ocr_safetensors_find(const ocr_safetensors *st, const char *name) {
    int i;
    for (i = 0; i < st->n_entries; i++) if (strcmp(st->entries[i].name, name) == 0) return i;
    return -1;
}

OCRDEF const char *ocr_safetensors_meta(const ocr_safetensors *st, const char *key) {
    int i;
    for (i = 0; i < st->n_meta; i++) if (strcmp(st->meta_keys[i], key) == 0) return st->meta_values[i];
    return NULL;
}

OCRDEF int ocr_safetensors_read(ocr_ctx *ctx, const ocr_safetensors *st, const char *name, ocr_tensor *out) {
    int i = ocr_safetensors_find(st, name), rc;
    const ocr_safetensors_entry *e;
    memset(out, 0, sizeof *out);
    if (i < 0) return ocr_error(ctx, OCR_ENOTFOUND, "ocr_safetensors_read: no tensor named '%s' in the file", name);
    e = &st->entries[i];
    if ((rc = ocr_tensor_alloc(ctx, out, name, e->dtype, OCR_DEVICE_CPU, e->shape))) return rc;
    if (e->end > e->begin) memcpy(out->data, st->bytes + st->data_start + e->begin, e->end - e->begin);
    return OCR_OK;
}

OCRDEF int ocr_safetensors_read_into(ocr_ctx *ctx, const ocr_safetensors *st, const char *name, ocr_tensor *dst) {
    const char *fn = "ocr_safetensors_read_into";
    int i = ocr_safetensors_find(st, name), rc;
    const ocr_safetensors_entry *e;
    ocr_tensor src;
    if ((rc = ocr__check_cpu(ctx, fn, dst))) return rc;
    if (i < 0) return ocr_error(ctx, OCR_ENOTFOUND, "%s: no tensor named '%s' in the file", fn, name);
    e = &st->entries[i];
    if (!ocr_shape_equal(e->shape, dst->shape)) {
        char d[200], sb[96];
        return ocr_error(ctx, OCR_ESHAPE, "%s: file tensor '%s' has shape %s but the destination is %s", fn, name,
                         ocr_shape_str(e->shape, sb, sizeof sb), ocr_tensor_describe(dst, d, sizeof d));
    }
    if (e->dtype != dst->dtype) {
        int floats = (e->dtype == OCR_F32 || e->dtype == OCR_F16 || e->dtype == OCR_BF16) &&
                     (dst->dtype == OCR_F32 || dst->dtype == OCR_F16 || dst->dtype == OCR_BF16);
        if (!floats)
            return ocr_error(ctx, OCR_EDTYPE, "%s: file tensor '%s' is %s but the destination is %s", fn, name,
                             ocr_dtype_name(e->dtype), ocr_dtype_name(dst->dtype));
    }
    /* The data section may be unaligned for this dtype: go through an aligned copy. */
    if ((rc = ocr_safetensors_read(ctx, st, name, &src))) return rc;
    rc = ocr_tensor_copy(ctx, dst, &src);
    ocr_tensor_free(&src);
    return rc;
}

/* The reference writer's order: its Dtype enum, a total order by alignment (U8 < F16 < BF16 < I32 < F32 < I64). */
static int ocr__st_align_rank(ocr_dtype dt) {
    static const int rank[OCR_DTYPE_COUNT] = {4, 1, 2, 0, 3, 5}; /* F32, F16, BF16, U8, I32, I64 */
    return rank[dt];
}

OCRDEF int ocr_safetensors_serialize(ocr_ctx *ctx, const ocr_tensor *const *tensors, int n, const char *const *meta_keys,
                                     const char *const *meta_values, int n_meta, unsigned char **out, size_t *out_size) {
    const char *fn = "ocr_safetensors_serialize";
    int *order = NULL, i, j, rc = OCR_OK;
    char *header = NULL;
    size_t cap = 256, hlen, total, offset = 0;
    unsigned char *buf = NULL;
    *out = NULL;
    *out_size = 0;
    if (n < 0 || n_meta < 0) return ocr_error(ctx, OCR_EINVAL, "%s: negative count", fn);
    for (i = 0; i < n; i++) {
        char d[200];
        if ((rc = ocr__check_cpu(ctx, fn, tensors[i]))) return rc;
        if (!tensors[i]->name[0] || strcmp(tensors[i]->name, "__metadata__") == 0)
            return ocr_error(ctx, OCR_EINVAL, "%s: tensor %d needs a name (not empty, not __metadata__)", fn, i);
        if (!ocr__utf8_valid(tensors[i]->name))
            return ocr_error(ctx, OCR_EINVAL, "%s: the name of tensor %d is not valid UTF-8", fn, i);
        for (j = 0; j < i; j++)
            if (strcmp(tensors[i]->name, tensors[j]->name) == 0)
                return ocr_error(ctx, OCR_EINVAL, "%s: two tensors are named %s", fn, ocr_tensor_describe(tensors[i], d, sizeof d));
        cap += strlen(tensors[i]->name) * 6 + 128;
    }
    for (i = 0; i < n_meta; i++) {
        if (!meta_keys[i] || !meta_values[i] || !ocr__utf8_valid(meta_keys[i]) || !ocr__utf8_valid(meta_values[i]))
            return ocr_error(ctx, OCR_EINVAL, "%s: __metadata__ pair %d is NULL or not valid UTF-8", fn, i);
        for (j = 0; j < i; j++)
            if (strcmp(meta_keys[i], meta_keys[j]) == 0)
                return ocr_error(ctx, OCR_EINVAL, "%s: __metadata__ has the key '%s' twice", fn, meta_keys[i]);
        cap += (strlen(meta_keys[i]) + strlen(meta_values[i])) * 6 + 16;
    }
    order = (int *)OCR_MALLOC((size_t)(n ? n : 1) * sizeof(int));
    header = (char *)OCR_MALLOC(cap);
    if (!order || !header) { rc = ocr_error(ctx, OCR_ENOMEM, "%s: out of memory", fn); goto done; }
    /* Writer convention of the reference implementation: larger alignment first, then by name. */
    for (i = 0; i < n; i++) order[i] = i;
    for (i = 1; i < n; i++) {
        int v = order[i];
        for (j = i - 1; j >= 0; j--) {
            const ocr_tensor *a = tensors[order[j]], *b = tensors[v];
            int ra = ocr__st_align_rank(a->dtype), rb = ocr__st_align_rank(b->dtype);
            if (ra > rb || (ra == rb && strcmp(a->name, b->name) <= 0)) break;
            order[j + 1] = order[j];
        }
        order[j + 1] = v;
    }
    strcpy(header, "{");
    if (n_meta) {
        strcat(header, "\"__metadata__\":{");
        for (i = 0; i < n_meta; i++) {
            if (i) strcat(header, ",");
            ocr_json_quote(header, cap, meta_keys[i]);
            strcat(header, ":");
            ocr_json_quote(header, cap, meta_values[i]);
        }
        strcat(header, "}");
    }
    for (i = 0; i < n; i++) {
        const ocr_tensor *t = tensors[order[i]];
        size_t bytes = ocr_tensor_bytes(t), len;
        int d;
        if (n_meta || i) strcat(header, ",");
        ocr_json_quote(header, cap, t->name);
        len = strlen(header);
        len += (size_t)snprintf(header + len, cap - len, ":{\"dtype\":\"%s\",\"shape\":[", ocr_dtype_name(t->dtype));
        for (d = 0; d < t->shape.ndim; d++) len += (size_t)snprintf(header + len, cap - len, d ? ",%lld" : "%lld", (long long)t->shape.dim[d]);
        snprintf(header + len, cap - len, "],\"data_offsets\":[%zu,%zu]}", offset, offset + bytes);
        offset += bytes;
    }
    strcat(header, "}");
    hlen = strlen(header);
    hlen = (hlen + 7) & ~(size_t)7; /* pad with spaces so the data section is 8-byte aligned */
    if (!ocr_size_add(8 + hlen, offset, &total)) { rc = ocr_error(ctx, OCR_EOVERFLOW, "%s: file too large", fn); goto done; }
    buf = (unsigned char *)OCR_MALLOC(total);
    if (!buf) { rc = ocr_error(ctx, OCR_ENOMEM, "%s: cannot allocate %zu bytes", fn, total); goto done; }
    for (i = 0; i < 8; i++) buf[i] = (unsigned char)((uint64_t)hlen >> (8 * i));
    memset(buf + 8, ' ', hlen);
    memcpy(buf + 8, header, strlen(header));
    offset = 8 + hlen;
    for (i = 0; i < n; i++) {
        const ocr_tensor *t = tensors[order[i]];
        size_t bytes = ocr_tensor_bytes(t);
        if (bytes) memcpy(buf + offset, t->data, bytes);
        offset += bytes;
    }
    *out = buf;
    *out_size = total;
done:
    OCR_FREE(order);
    OCR_FREE(header);
    return rc;
}

OCRDEF int ocr_safetensors_save(ocr_ctx *ctx, const char *path, const ocr_tensor *const *tensors, int n,
                                const char *const *meta_keys, const char *const *meta_values, int n_meta) {
    unsigned char *buf;
    size_t size;
    int rc = ocr_safetensors_serialize(ctx, tensors, n, meta_keys, meta_values, n_meta, &buf, &size);
    if (rc) return rc;
    rc = ocr_write_file_atomic(ctx, path, buf, size);
    OCR_FREE(buf);
    return rc;
}

/* ---------------------------------------------------------------- run metrics */

OCRDEF uint32_t ocr_crc32c(uint32_t crc, const void *bytes, size_t n) {
    const unsigned char *p = (const unsigned char *)bytes;
    size_t i;
    int k;
    crc = ~crc;
    if (n >= 4096) { /* checkpoints are hashed whole: a byte table (built here, no global state) is 8x faster */
        uint32_t table[256];
        for (i = 0; i < 256; i++) {
            uint32_t c = (uint32_t)i;
            for (k = 0; k < 8; k++) c = (c >> 1) ^ (0x82F63B78u & (0u - (c & 1u)));
            table[i] = c;
        }
        for (i = 0; i < n; i++) crc = (crc >> 8) ^ table[(crc ^ p[i]) & 0xffu];
        return ~crc;
    }
    for (i = 0; i < n; i++) {
        crc ^= p[i];
        for (k = 0; k < 8; k++) crc = (crc >> 1) ^ (0x82F63B78u & (0u - (crc & 1u))); /* reflected Castagnoli */
    }
    return ~crc;
}

/* ---- the protobuf wire-format writer (declared above; developers.google.com/protocol-buffers/docs/encoding) ---- */
enum { OCR__PB_VARINT = 0, OCR__PB_FIXED64 = 1, OCR__PB_LEN = 2, OCR__PB_FIXED32 = 5 };

/* Room for more bytes at b->p + b->n; 0 (and b->oom) when an allocation fails or the size cannot be reached. */
static int ocr__pb_reserve(ocr__pb *b, size_t more) {
    size_t cap;
    unsigned char *p;
    if (b->oom) return 0;
    if (more <= b->cap - b->n) return 1;
    if (more > ((size_t)-1 >> 1) - b->n) { b->oom = 1; return 0; } /* doubling could not reach it without wrapping */
    cap = b->cap ? b->cap : 256;
    while (cap < b->n + more) cap *= 2;
    if (!(p = (unsigned char *)OCR_REALLOC(b->p, cap))) { b->oom = 1; return 0; }
    b->p = p;
    b->cap = cap;
    return 1;
}

static size_t ocr__pb_varint_size(uint64_t v) {
    size_t s = 1;
    while (v >= 0x80) { v >>= 7; s++; }
    return s;
}

static void ocr__pb_varint_at(unsigned char *p, uint64_t v) {
    while (v >= 0x80) { *p++ = (unsigned char)(v | 0x80); v >>= 7; }
    *p = (unsigned char)v;
}

static void ocr__pb_varint(ocr__pb *b, uint64_t v) {
    size_t s = ocr__pb_varint_size(v);
    if (!ocr__pb_reserve(b, s)) return;
    ocr__pb_varint_at(b->p + b->n, v);
    b->n += s;
}

static void ocr__pb_key(ocr__pb *b, int field, int wire) { ocr__pb_varint(b, ((uint64_t)field << 3) | (uint64_t)wire); }

OCRDEF void ocr__pb_raw(ocr__pb *b, const void *data, size_t size) {
    if (!size || !ocr__pb_reserve(b, size)) return;
    memcpy(b->p + b->n, data, size);
    b->n += size;
}

OCRDEF void ocr__pb_fixed(ocr__pb *b, uint64_t v, int n_bytes) {
    int i;
    if (!ocr__pb_reserve(b, (size_t)n_bytes)) return;
    for (i = 0; i < n_bytes; i++) b->p[b->n++] = (unsigned char)(v >> (8 * i));
}

OCRDEF void ocr__pb_int(ocr__pb *b, int field, int64_t v) {
    ocr__pb_key(b, field, OCR__PB_VARINT);
    ocr__pb_varint(b, (uint64_t)v);
}

OCRDEF void ocr__pb_float(ocr__pb *b, int field, float v) {
    uint32_t u;
    memcpy(&u, &v, 4);
    ocr__pb_key(b, field, OCR__PB_FIXED32);
    ocr__pb_fixed(b, u, 4);
}

OCRDEF void ocr__pb_double(ocr__pb *b, int field, double v) {
    uint64_t u;
    memcpy(&u, &v, 8);
    ocr__pb_key(b, field, OCR__PB_FIXED64);
    ocr__pb_fixed(b, u, 8);
}

OCRDEF void ocr__pb_bytes(ocr__pb *b, int field, const void *data, size_t size) {
    ocr__pb_key(b, field, OCR__PB_LEN);
    ocr__pb_varint(b, (uint64_t)size);
    ocr__pb_raw(b, data, size);
}

OCRDEF void ocr__pb_string(ocr__pb *b, int field, const char *s) { ocr__pb_bytes(b, field, s, strlen(s)); }

OCRDEF void ocr__pb_floats(ocr__pb *b, int field, const float *v, size_t n) {
    size_t i;
    if (n > ((size_t)-1 >> 2)) { b->oom = 1; return; } /* 4 n bytes would wrap */
    ocr__pb_key(b, field, OCR__PB_LEN);
    ocr__pb_varint(b, (uint64_t)n * 4);
    if (!ocr__pb_reserve(b, n * 4)) return;
    for (i = 0; i < n; i++) {
        uint32_t u;
        unsigned char *p = b->p + b->n + 4 * i;
        memcpy(&u, &v[i], 4);
        p[0] = (unsigned char)u; p[1] = (unsigned char)(u >> 8); p[2] = (unsigned char)(u >> 16); p[3] = (unsigned char)(u >> 24);
    }
    b->n += n * 4;
}

OCRDEF size_t ocr__pb_open(ocr__pb *b, int field) {
    ocr__pb_key(b, field, OCR__PB_LEN);
    return b->n;
}

OCRDEF void ocr__pb_close(ocr__pb *b, size_t start) {
    size_t len, s;
    if (b->oom) return;
    len = b->n - start;
    s = ocr__pb_varint_size((uint64_t)len);
    if (!ocr__pb_reserve(b, s)) return;
    memmove(b->p + start + s, b->p + start, len);
    ocr__pb_varint_at(b->p + start, (uint64_t)len);
    b->n += s;
}

OCRDEF void ocr__pb_free(ocr__pb *b) {
    OCR_FREE(b->p);
    memset(b, 0, sizeof *b);
}

static uint32_t ocr__masked_crc(const void *p, size_t n) {
    uint32_t c = ocr_crc32c(0, p, n);
    return ((c >> 15) | (c << 17)) + 0xa282ead8u;
}

/* Writes Event{wall_time, step (none when negative), field: payload} as one TFRecord: the event's length (8 bytes),
   its masked CRC, the event, the event's masked CRC. */
static int ocr__tb_event(ocr_ctx *ctx, ocr_metrics *m, int64_t step, int field, const void *payload, size_t size) {
    ocr__pb ev, rec;
    struct timespec ts;
    int rc = OCR_OK;
    memset(&ev, 0, sizeof ev);
    memset(&rec, 0, sizeof rec);
    clock_gettime(CLOCK_REALTIME, &ts);
    ocr__pb_double(&ev, 1, (double)ts.tv_sec + ts.tv_nsec * 1e-9);
    if (step >= 0) ocr__pb_int(&ev, 2, step);
    ocr__pb_bytes(&ev, field, payload, size);
    if (!ev.oom) {
        ocr__pb_fixed(&rec, (uint64_t)ev.n, 8);
        if (!rec.oom) ocr__pb_fixed(&rec, ocr__masked_crc(rec.p, 8), 4);
        ocr__pb_raw(&rec, ev.p, ev.n);
        ocr__pb_fixed(&rec, ocr__masked_crc(ev.p, ev.n), 4);
    }
    if (ev.oom || rec.oom) rc = ocr_error(ctx, OCR_ENOMEM, "ocr_metrics: out of memory encoding an event");
    else if (fwrite(rec.p, 1, rec.n, (FILE *)m->events) != rec.n || fflush((FILE *)m->events) != 0)
        rc = ocr_error(ctx, OCR_EIO, "ocr_metrics: writing the event file failed: %s", strerror(errno));
    ocr__pb_free(&ev);
    ocr__pb_free(&rec);
    return rc;
}

OCRDEF int ocr_metrics_open(ocr_ctx *ctx, ocr_metrics *m, const char *dir) {
    char path[4096], host[128];
    unsigned char *old = NULL;
    size_t old_size = 0;
    int rc;
    memset(m, 0, sizeof *m);
    m->last_step = m->pending_step = -1;
    if (mkdir(dir, 0755) != 0 && errno != EEXIST)
        return ocr_error(ctx, OCR_EIO, "ocr_metrics_open: cannot create directory '%s': %s", dir, strerror(errno));
    snprintf(path, sizeof path, "%s/metrics.jsonl", dir);
    /* Continue after the last step already on disk, so a resumed run never rewinds. */
    if (access(path, F_OK) == 0) {
        size_t i, line = 0;
        if ((rc = ocr_read_file(ctx, path, (size_t)1 << 32, &old, &old_size))) return rc;
        for (i = 0; i <= old_size; i++) {
            if (i == old_size || old[i] == '\n') {
                ocr_json_tok toks[2 * OCR_METRICS_MAX_SCALARS + 8];
                int n, s;
                double v;
                if (i > line && ocr_json_parse(NULL, (const char *)old + line, i - line, toks, (int)(sizeof toks / sizeof toks[0]), &n) == OCR_OK &&
                    (s = ocr_json_find((const char *)old + line, toks, 0, "step")) >= 0 &&
                    ocr_json_number((const char *)old + line, &toks[s], &v) && v > (double)m->last_step)
                    m->last_step = (int64_t)v;
                line = i + 1;
            }
        }
        OCR_FREE(old);
    }
    m->jsonl = fopen(path, "ab");
    if (!m->jsonl) return ocr_error(ctx, OCR_EIO, "ocr_metrics_open: cannot open '%s': %s", path, strerror(errno));
    if (gethostname(host, sizeof host) != 0) snprintf(host, sizeof host, "host");
    host[sizeof host - 1] = 0;
    {
        /* A new file per open, never overwriting one from an earlier open in the same second. */
        int k, fd = -1;
        for (k = 0; k < 1000 && fd < 0; k++) {
            snprintf(path, sizeof path, "%s/events.out.tfevents.%010ld.%s.%ld.%d", dir, (long)time(NULL), host, (long)getpid(), k);
            fd = open(path, O_WRONLY | O_CREAT | O_EXCL, 0644);
            if (fd < 0 && errno != EEXIST) break;
        }
        m->events = fd >= 0 ? fdopen(fd, "wb") : NULL;
        if (fd >= 0 && !m->events) close(fd);
    }
    if (!m->events) {
        fclose((FILE *)m->jsonl);
        m->jsonl = NULL;
        return ocr_error(ctx, OCR_EIO, "ocr_metrics_open: cannot create '%s': %s", path, strerror(errno));
    }
    return ocr__tb_event(ctx, m, -1, 3, "brain.Event:2", 13); /* Event.file_version */
}

static int ocr__metrics_write_pending(ocr_ctx *ctx, ocr_metrics *m) {
    FILE *f = (FILE *)m->jsonl;
    int i;
    if (!m->n_pending) return OCR_OK;
    fprintf(f, "{\"step\":%lld", (long long)m->pending_step);
    for (i = 0; i < m->n_pending; i++) {
        char q[200] = "";
        ocr_json_quote(q, sizeof q, m->pending_names[i]);
        if (isfinite(m->pending_values[i])) fprintf(f, ",%s:%.9g", q, m->pending_values[i]);
        else fprintf(f, ",%s:null", q); /* JSON has no NaN/Inf */
    }
    fprintf(f, "}\n");
    m->last_step = m->pending_step;
    m->n_pending = 0;
    if (fflush(f) != 0) return ocr_error(ctx, OCR_EIO, "ocr_metrics: writing metrics.jsonl failed: %s", strerror(errno));
    return OCR_OK;
}

static int ocr__metrics_accept(ocr_ctx *ctx, ocr_metrics *m, int64_t step, const char *name) {
    int64_t behind = m->n_pending ? m->pending_step : m->last_step;
    size_t len = name ? strlen(name) : 0, i;
    if (!m->jsonl) return ocr_error(ctx, OCR_ESTATE, "ocr_metrics: not open");
    if (len == 0 || len >= sizeof m->pending_names[0])
        return ocr_error(ctx, OCR_EINVAL, "ocr_metrics: a metric name must have 1..%d bytes", (int)sizeof m->pending_names[0] - 1);
    for (i = 0; i < len; i++)
        if ((unsigned char)name[i] < 0x20) return ocr_error(ctx, OCR_EINVAL, "ocr_metrics: metric name has a control character");
    if (step < 0 || step < behind || (step == m->last_step && !m->n_pending)) {
        m->refused++;
        return ocr_error(ctx, OCR_ERANGE, "ocr_metrics: refused '%s' at step %lld: step %lld is already written and steps never go back",
                         name, (long long)step, (long long)(m->n_pending ? m->pending_step : m->last_step));
    }
    return OCR_OK;
}

OCRDEF int ocr_metrics_scalar(ocr_ctx *ctx, ocr_metrics *m, int64_t step, const char *name, double value) {
    ocr__pb sum;
    size_t at;
    int i, rc;
    if ((rc = ocr__metrics_accept(ctx, m, step, name))) return rc;
    if (m->n_pending && step > m->pending_step && (rc = ocr__metrics_write_pending(ctx, m))) return rc;
    for (i = 0; i < m->n_pending; i++)
        if (strcmp(m->pending_names[i], name) == 0) {
            m->refused++;
            return ocr_error(ctx, OCR_ERANGE, "ocr_metrics: refused '%s' at step %lld: already logged at this step", name, (long long)step);
        }
    if (m->n_pending == OCR_METRICS_MAX_SCALARS)
        return ocr_error(ctx, OCR_EOVERFLOW, "ocr_metrics: more than %d scalars at step %lld", OCR_METRICS_MAX_SCALARS, (long long)step);
    m->pending_step = step;
    memcpy(m->pending_names[m->n_pending], name, strlen(name) + 1);
    m->pending_values[m->n_pending++] = value;
    /* Event.summary = Summary{value: Value{tag, simple_value}} */
    memset(&sum, 0, sizeof sum);
    at = ocr__pb_open(&sum, 1);
    ocr__pb_string(&sum, 1, name);
    ocr__pb_float(&sum, 2, (float)value);
    ocr__pb_close(&sum, at);
    rc = sum.oom ? ocr_error(ctx, OCR_ENOMEM, "ocr_metrics: out of memory") : ocr__tb_event(ctx, m, step, 5, sum.p, sum.n);
    ocr__pb_free(&sum);
    return rc;
}

OCRDEF int ocr_metrics_image(ocr_ctx *ctx, ocr_metrics *m, int64_t step, const char *tag, int width, int height, int channels,
                             const void *png, size_t png_size) {
    ocr__pb sum;
    size_t val, img;
    int rc;
    if (!m->events) return ocr_error(ctx, OCR_ESTATE, "ocr_metrics_image: not open");
    if (step < 0 || width < 1 || height < 1 || channels < 1 || channels > 4 || !png || !tag || !tag[0])
        return ocr_error(ctx, OCR_EINVAL, "ocr_metrics_image: bad image '%s' (%dx%dx%d at step %lld)", tag ? tag : "", width, height,
                         channels, (long long)step);
    /* Event.summary = Summary{value: Value{tag, image: Image{height, width, colorspace (channels), encoded_image_string}}} */
    memset(&sum, 0, sizeof sum);
    val = ocr__pb_open(&sum, 1);
    ocr__pb_string(&sum, 1, tag);
    img = ocr__pb_open(&sum, 4);
    ocr__pb_int(&sum, 1, height);
    ocr__pb_int(&sum, 2, width);
    ocr__pb_int(&sum, 3, channels);
    ocr__pb_bytes(&sum, 4, png, png_size);
    ocr__pb_close(&sum, img);
    ocr__pb_close(&sum, val);
    rc = sum.oom ? ocr_error(ctx, OCR_ENOMEM, "ocr_metrics_image: out of memory") : ocr__tb_event(ctx, m, step, 5, sum.p, sum.n);
    ocr__pb_free(&sum);
    return rc;
}

OCRDEF int ocr_metrics_flush(ocr_ctx *ctx, ocr_metrics *m) {
    int rc;
    if (!m->jsonl) return OCR_OK;
    if ((rc = ocr__metrics_write_pending(ctx, m))) return rc;
    if (fsync(fileno((FILE *)m->jsonl)) != 0 || fsync(fileno((FILE *)m->events)) != 0)
        return ocr_error(ctx, OCR_EIO, "ocr_metrics_flush: fsync failed: %s", strerror(errno));
    return OCR_OK;
}

OCRDEF int ocr_metrics_close(ocr_ctx *ctx, ocr_metrics *m) {
    int rc = ocr_metrics_flush(ctx, m);
    if (m->jsonl) fclose((FILE *)m->jsonl);
    if (m->events) fclose((FILE *)m->events);
    m->jsonl = m->events = NULL;
    return rc;
}

/* Cuts path to its first keep bytes (nothing when it is shorter) and makes that durable. */
static int ocr__metrics_truncate(ocr_ctx *ctx, const char *path, size_t keep, size_t size) {
    int fd;
    if (keep >= size) return OCR_OK;
    fd = open(path, O_WRONLY);
    if (fd < 0 || ftruncate(fd, (off_t)keep) != 0 || fsync(fd) != 0) {
        int e = errno;
        if (fd >= 0) close(fd);
        return ocr_error(ctx, OCR_EIO, "ocr_metrics_open_resume: cannot cut '%s' to %llu bytes: %s", path, (unsigned long long)keep,
                         strerror(e));
    }
    close(fd);
    return OCR_OK;
}

/* The length of the leading complete records of a metrics.jsonl with increasing steps <= step. */
static size_t ocr__metrics_jsonl_keep(const char *text, size_t n, int64_t step) {
    size_t at = 0;
    double last = -1;
    while (at < n) {
        const char *nl = (const char *)memchr(text + at, '\n', n - at);
        ocr_json_tok toks[2 * OCR_METRICS_MAX_SCALARS + 8];
        int nt, s;
        double v;
        if (!nl) break; /* a torn last line */
        if (ocr_json_parse(NULL, text + at, (size_t)(nl - (text + at)), toks, (int)(sizeof toks / sizeof toks[0]), &nt) != OCR_OK ||
            (s = ocr_json_find(text + at, toks, 0, "step")) < 0 || !ocr_json_number(text + at, &toks[s], &v) || v <= last ||
            v > (double)step)
            break;
        last = v;
        at = (size_t)(nl - text) + 1;
    }
    return at;
}

/* The length of the leading CRC-valid TFRecords of an event file whose Events have no step or one <= step. */
static size_t ocr__metrics_events_keep(const unsigned char *p, size_t n, int64_t step) {
    size_t at = 0;
    while (at + 12 <= n) {
        uint64_t len = 0, ev_step = 0;
        size_t i, end;
        int has_step = 0, ok = 1;
        for (i = 0; i < 8; i++) len |= (uint64_t)p[at + i] << (8 * i);
        if (ocr__masked_crc(p + at, 8) != ((uint32_t)p[at + 8] | (uint32_t)p[at + 9] << 8 | (uint32_t)p[at + 10] << 16 |
                                           (uint32_t)p[at + 11] << 24) ||
            len > n - at - 12 || n - at - 12 - len < 4)
            break;
        end = at + 12 + (size_t)len;
        if (ocr__masked_crc(p + at + 12, (size_t)len) !=
            ((uint32_t)p[end] | (uint32_t)p[end + 1] << 8 | (uint32_t)p[end + 2] << 16 | (uint32_t)p[end + 3] << 24))
            break;
        /* Event fields: 1 wall_time (fixed64), 2 step (varint), the rest length-delimited or fixed */
        for (i = at + 12; i < end && ok;) {
            uint64_t key = 0, v = 0;
            int sh = 0;
            while (i < end && sh < 64) { key |= (uint64_t)(p[i] & 0x7f) << sh; sh += 7; if (!(p[i++] & 0x80)) break; }
            switch ((int)(key & 7)) {
            case 0:
                sh = 0;
                while (i < end && sh < 64) { v |= (uint64_t)(p[i] & 0x7f) << sh; sh += 7; if (!(p[i++] & 0x80)) break; }
                if ((key >> 3) == 2) { has_step = 1; ev_step = v; }
                break;
            case 1: i += 8; break;
            case 5: i += 4; break;
            case 2:
                sh = 0;
                while (i < end && sh < 64) { v |= (uint64_t)(p[i] & 0x7f) << sh; sh += 7; if (!(p[i++] & 0x80)) break; }
                if (v > (uint64_t)(end - i)) ok = 0;
                else i += (size_t)v;
                break;
            default: ok = 0;
            }
        }
        if (!ok || (has_step && (int64_t)ev_step > step)) break;
        at = end + 4;
    }
    return at;
}

OCRDEF int ocr_metrics_open_resume(ocr_ctx *ctx, ocr_metrics *m, const char *dir, int64_t step) {
    char path[4096];
    unsigned char *buf = NULL;
    size_t size = 0;
    DIR *d;
    struct dirent *e;
    ocr__pb sl;
    int rc = OCR_OK;
    if (!m || !dir) return ocr_error(ctx, OCR_EINVAL, "ocr_metrics_open_resume: m or dir is NULL");
    memset(m, 0, sizeof *m);
    if (step < 0) return ocr_error(ctx, OCR_EINVAL, "ocr_metrics_open_resume: step %lld is negative", (long long)step);
    snprintf(path, sizeof path, "%s/metrics.jsonl", dir);
    if (access(path, F_OK) == 0) {
        if ((rc = ocr_read_file(ctx, path, (size_t)1 << 32, &buf, &size))) return rc;
        rc = ocr__metrics_truncate(ctx, path, ocr__metrics_jsonl_keep((const char *)buf, size, step), size);
        OCR_FREE(buf);
        if (rc) return rc;
    }
    d = opendir(dir);
    while (d && !rc && (e = readdir(d)) != NULL) {
        if (strncmp(e->d_name, "events.out.tfevents.", 20) != 0) continue;
        if (snprintf(path, sizeof path, "%s/%s", dir, e->d_name) >= (int)sizeof path) continue;
        if ((rc = ocr_read_file(ctx, path, (size_t)-1 >> 1, &buf, &size))) break;
        rc = ocr__metrics_truncate(ctx, path, ocr__metrics_events_keep(buf, size, step), size);
        OCR_FREE(buf);
    }
    if (d) closedir(d);
    if (rc || (rc = ocr_metrics_open(ctx, m, dir))) return rc;
    memset(&sl, 0, sizeof sl);
    ocr__pb_int(&sl, 1, 1); /* SessionLog.status = START (1); Event.session_log is field 7 */
    rc = sl.oom ? ocr_error(ctx, OCR_ENOMEM, "ocr_metrics_open_resume: out of memory") : ocr__tb_event(ctx, m, step + 1, 7, sl.p, sl.n);
    ocr__pb_free(&sl);
    if (rc) ocr_metrics_close(ctx, m);
    return rc;
}

#ifdef __cplusplus
}
#endif
#endif /* OCR_TENSOR_IMPLEMENTATION */

/*
MIT License. Copyright (c) 2026 the ocr-c authors.
Permission is hereby granted, free of charge, to any person obtaining a copy of this software and associated
documentation files (the "Software"), to deal in the Software without restriction, including without limitation the
rights to use, copy, modify, merge, publish, distribute, sublicense, and/or sell copies of the Software, and to permit
persons to whom the Software is furnished to do so, subject to the following conditions: The above copyright notice and
this permission notice shall be included in all copies or substantial portions of the Software.
THE SOFTWARE IS PROVIDED "AS IS", WITHOUT WARRANTY OF ANY KIND, EXPRESS OR IMPLIED.
*/
