/* Mixed precision (ctx->amp) and the loss scaler: the vector rounding against the scalar conversions (which
   test_tensor checks against numpy and torch), every convolution under AMP against the fp32 op fed the rounded
   inputs (bit for bit: the rule is "round the inputs, then the fp32 op"), the overflow and underflow counts, the
   watch's rules, the scaler's state machine against hand-computed sequences, its checkpoint metadata, and a DBNet
   forward and backward in bf16 and fp16 within a stated distance of fp32. */
/* ocr-c build: own implementation */
#define _POSIX_C_SOURCE 200809L
#define OCR_IMPLEMENTATION
#include "ocr_tensor.h"
#include "ocr_nn.h"
#include "ocr_loss.h"
#include "ocr_dbnet.h"
#include "ocr_test.h"
#include <float.h>
#include <unistd.h>

static const int amps[2] = {OCR_AMP_BF16, OCR_AMP_F16};

static float bits_f(uint32_t b) { float f; memcpy(&f, &b, 4); return f; }
static uint32_t f_bits(float f) { uint32_t b; memcpy(&b, &f, 4); return b; }
static int same_float(float a, float b) { return (isnan(a) && isnan(b)) || f_bits(a) == f_bits(b); }

static void fill(ocr_ctx *ctx, ocr_tensor *t, float scale) {
    int64_t i, n = ocr_tensor_numel(t);
    for (i = 0; i < n; i++) ((float *)t->data)[i] = scale * ocr_rng_normal(&ctx->rng);
}

static int64_t count_diff(const ocr_tensor *a, const ocr_tensor *b) {
    int64_t i, n = ocr_tensor_numel(a), bad = 0;
    for (i = 0; i < n; i++) bad += !same_float(((float *)a->data)[i], ((float *)b->data)[i]);
    return bad;
}

/* The values where rounding decides: every 16-bit pattern widened, one float ulp either side, the exact midpoints
   between neighbours of both types, fp16's overflow and subnormal edges, and random bit patterns (NaN included). */
static int64_t edge_values(float *v, int64_t cap, ocr_rng *rng) {
    int64_t n = 0, i;
    for (i = 0; i < 65536 && n + 8 <= cap; i++) {
        float b = ocr_bf16_to_f32((uint16_t)i), h = ocr_f16_to_f32((uint16_t)i);
        v[n++] = b; v[n++] = bits_f(f_bits(b) + 1); v[n++] = bits_f(f_bits(b) - 1); v[n++] = bits_f(f_bits(b) | 0x8000u);
        v[n++] = h; v[n++] = bits_f(f_bits(h) + 1); v[n++] = bits_f(f_bits(h) - 1);
        v[n++] = bits_f(f_bits(h) + 0x1000u); /* half an fp16 ulp above a normal fp16 */
    }
    v[n++] = 65504.0f; v[n++] = 65519.99f; v[n++] = 65520.0f; v[n++] = -65520.0f; v[n++] = 1e30f; v[n++] = FLT_MAX;
    v[n++] = 5.9604645e-8f; v[n++] = 2.9802322e-8f; v[n++] = 2.9802326e-8f; v[n++] = 1e-40f; v[n++] = -0.0f;
    while (n < cap) v[n++] = bits_f((uint32_t)ocr_rng_u64(rng));
    return n;
}

/* The vector rounding (AVX-512, AVX2 with F16C, or none, as ctx->cpu_kernel and the CPU allow) gives the scalar
   conversion's result and counts, value for value. */
static void check_rounding(int cpu_kernel) {
    ocr_ctx ctx;
    ocr_amp_stats stats;
    int64_t n = 1 << 20, i, k;
    float *v = (float *)malloc((size_t)n * sizeof(float));
    OCR_CHECK_OK(&ctx, ocr_ctx_init(&ctx, 2, 7));
    ctx.cpu_kernel = cpu_kernel;
    n = edge_values(v, n, &ctx.rng);
    memset(&stats, 0, sizeof stats);
    ctx.amp_stats = &stats;
    for (k = 0; k < 2; k++) {
        const float *r;
        int64_t bad = 0, over = 0, under = 0;
        ctx.amp = amps[k];
        ocr_amp_stats_reset(&stats);
        /* an odd count and an odd start: the vector loop's tail and unaligned loads */
        r = ocr__amp_input(&ctx, v + 1, n - 3, 0, "edges", 1);
        OCR_CHECK(r != NULL);
        if (!r) break;
        for (i = 0; i < n - 3; i++) {
            float x = v[i + 1], want = ocr__amp_round1(ctx.amp, x);
            if (!same_float(r[i], want) && bad++ < 3)
                fprintf(stderr, "  %s: 0x%08x rounds to 0x%08x, scalar 0x%08x\n", ocr_amp_name(ctx.amp), (unsigned)f_bits(x),
                        (unsigned)f_bits(r[i]), (unsigned)f_bits(want));
            over += isinf(want) && !isinf(x);
            under += x != 0.0f && want == 0.0f;
        }
        OCR_CHECK_MSG(bad == 0, "%s, %d lanes: %lld of %lld values differ from the scalar conversion", ocr_amp_name(ctx.amp),
                      ocr__amp_lanes(&ctx), (long long)bad, (long long)(n - 3));
        OCR_CHECK(stats.count == 1 && stats.layer[0].grads == n - 3);
        OCR_CHECK_MSG(stats.layer[0].grads_overflowed == over && stats.layer[0].underflowed == under,
                      "%s: counted %lld overflows and %lld underflows, expected %lld and %lld", ocr_amp_name(ctx.amp),
                      (long long)stats.layer[0].grads_overflowed, (long long)stats.layer[0].underflowed, (long long)over, (long long)under);
        OCR_CHECK(ctx.amp != OCR_AMP_F16 || (over > 1000 && under > 1000)); /* the cases exist */
    }
    /* every bf16 survives the round trip through fp32 (NaNs stay NaN) */
    for (i = 0, k = 0; i < 65536; i++) {
        uint16_t back = ocr_f32_to_bf16(ocr_bf16_to_f32((uint16_t)i));
        if (back != (uint16_t)i && !(isnan(ocr_bf16_to_f32((uint16_t)i)) && isnan(ocr_bf16_to_f32(back)))) k++;
    }
    OCR_CHECK_MSG(k == 0, "%lld bf16 values change in a round trip", (long long)k);
    /* ties go to even: 1 + 2^-8 (halfway between bf16 1 and 1 + 2^-7) rounds down, 1 + 3 * 2^-8 up */
    OCR_CHECK(ocr_bf16_to_f32(ocr_f32_to_bf16(1.00390625f)) == 1.0f && ocr_bf16_to_f32(ocr_f32_to_bf16(1.01171875f)) == 1.015625f);
    OCR_CHECK(ocr_f16_to_f32(ocr_f32_to_f16(2049.0f)) == 2048.0f && ocr_f16_to_f32(ocr_f32_to_f16(2051.0f)) == 2052.0f);
    ocr_amp_stats_free(&stats);
    free(v);
    ocr_ctx_free(&ctx);
}

static void test_vector_rounding_matches_scalar(void) {
    ocr_ctx probe;
    int lanes[3], k;
    static const int kernels[3] = {OCR_CPU_KERNEL_AUTO, OCR_CPU_KERNEL_AVX2, OCR_CPU_KERNEL_PORTABLE};
    OCR_CHECK_OK(&probe, ocr_ctx_init(&probe, 1, 1));
    for (k = 0; k < 3; k++) {
        probe.cpu_kernel = kernels[k];
        lanes[k] = ocr__amp_lanes(&probe);
        check_rounding(kernels[k]);
    }
    ocr_ctx_free(&probe);
    printf("  rounding checked with %d, %d and %d lanes\n", lanes[0], lanes[1], lanes[2]);
    if (lanes[0] != 16 || lanes[1] != 8)
        ocr_test_skip(lanes[1] != 8 ? "this CPU has no AVX2 with F16C: only the scalar rounding was checked"
                                    : "this CPU has no AVX-512: the AVX2 and scalar rounding were checked, not the AVX-512 one");
}

typedef struct { int k, s, p, groups, transposed; int64_t n, c, h, w, out; } conv_case;

/* fp32 copy of src with every value rounded as amp rounds */
static void rounded_copy(ocr_ctx *ctx, int amp, const ocr_tensor *src, ocr_tensor *dst, const char *name) {
    int64_t i, n = ocr_tensor_numel(src);
    OCR_CHECK_OK(ctx, ocr_tensor_alloc(ctx, dst, name, OCR_F32, OCR_DEVICE_CPU, src->shape));
    for (i = 0; i < n; i++) ((float *)dst->data)[i] = ocr__amp_round1(amp, ((const float *)src->data)[i]);
}

/* Forward and backward of one case under amp, and the fp32 op on the rounded inputs: equal bit for bit, except the
   bias gradient, which sums the unrounded fp32 gradient; on the bf16 kernels (AMX, AVX512_BF16: fast_bf16) equal within
   fp32 summation error. */
static void check_conv_case(const conv_case *cc, int amp, int reference, int fast_bf16) {
    ocr_ctx ctx;
    ocr_tensor x, w, b, y, y2, dy, dx, dw, db, dx2, dw2, db2, xr, wr, dyr;
    ocr_conv_params p = ocr_conv_params_make(cc->s, cc->p, 1, cc->groups);
    ocr_shape ys;
    int64_t bad;
    OCR_CHECK_OK(&ctx, ocr_ctx_init(&ctx, 2, 11));
    if (reference) ctx.debug_flags |= OCR_DEBUG_REFERENCE;
    OCR_CHECK_OK(&ctx, ocr_tensor_alloc(&ctx, &x, "x", OCR_F32, OCR_DEVICE_CPU, ocr_shape4(cc->n, cc->c, cc->h, cc->w)));
    OCR_CHECK_OK(&ctx, ocr_tensor_alloc(&ctx, &w, "layer.weight", OCR_F32, OCR_DEVICE_CPU,
                                        cc->transposed ? ocr_shape4(cc->c, cc->out / cc->groups, cc->k, cc->k)
                                                       : ocr_shape4(cc->out, cc->c / cc->groups, cc->k, cc->k)));
    OCR_CHECK_OK(&ctx, ocr_tensor_alloc(&ctx, &b, "layer.bias", OCR_F32, OCR_DEVICE_CPU, ocr_shape1(cc->out)));
    fill(&ctx, &x, 1.0f); fill(&ctx, &w, 0.2f); fill(&ctx, &b, 0.1f);
    OCR_CHECK_OK(&ctx, cc->transposed ? ocr_nn_conv_transpose2d_out_shape(&ctx, x.shape, w.shape, p, &ys)
                                      : ocr_nn_conv2d_out_shape(&ctx, x.shape, w.shape, p, &ys));
    OCR_CHECK_OK(&ctx, ocr_tensor_alloc(&ctx, &y, "y", OCR_F32, OCR_DEVICE_CPU, ys));
    OCR_CHECK_OK(&ctx, ocr_tensor_alloc(&ctx, &y2, "y2", OCR_F32, OCR_DEVICE_CPU, ys));
    OCR_CHECK_OK(&ctx, ocr_tensor_alloc(&ctx, &dy, "dy", OCR_F32, OCR_DEVICE_CPU, ys));
    fill(&ctx, &dy, 1e-3f);
    OCR_CHECK_OK(&ctx, ocr_tensor_alloc(&ctx, &dx, "dx", OCR_F32, OCR_DEVICE_CPU, x.shape));
    OCR_CHECK_OK(&ctx, ocr_tensor_alloc(&ctx, &dx2, "dx2", OCR_F32, OCR_DEVICE_CPU, x.shape));
    OCR_CHECK_OK(&ctx, ocr_tensor_alloc(&ctx, &dw, "dw", OCR_F32, OCR_DEVICE_CPU, w.shape));
    OCR_CHECK_OK(&ctx, ocr_tensor_alloc(&ctx, &dw2, "dw2", OCR_F32, OCR_DEVICE_CPU, w.shape));
    OCR_CHECK_OK(&ctx, ocr_tensor_alloc(&ctx, &db, "db", OCR_F32, OCR_DEVICE_CPU, b.shape));
    OCR_CHECK_OK(&ctx, ocr_tensor_alloc(&ctx, &db2, "db2", OCR_F32, OCR_DEVICE_CPU, b.shape));
    rounded_copy(&ctx, amp, &x, &xr, "xr"); rounded_copy(&ctx, amp, &w, &wr, "wr"); rounded_copy(&ctx, amp, &dy, &dyr, "dyr");
    if (ctx.last_status) goto done;

    ctx.amp = amp;
    OCR_CHECK(ocr__amp_bf16_fast(&ctx) == fast_bf16);
    if (cc->transposed) {
        OCR_CHECK_OK(&ctx, ocr_nn_conv_transpose2d_forward(&ctx, &x, &w, &b, p, &y));
        OCR_CHECK_OK(&ctx, ocr_nn_conv_transpose2d_backward(&ctx, &x, &w, &dy, p, &dx, &dw, &db));
    } else {
        OCR_CHECK_OK(&ctx, ocr_nn_conv2d_forward(&ctx, &x, &w, &b, p, &y));
        OCR_CHECK_OK(&ctx, ocr_nn_conv2d_backward(&ctx, &x, &w, &dy, p, &dx, &dw, &db));
    }
    ctx.amp = OCR_AMP_OFF;
    if (cc->transposed) {
        OCR_CHECK_OK(&ctx, ocr_nn_conv_transpose2d_forward(&ctx, &xr, &wr, &b, p, &y2));
        OCR_CHECK_OK(&ctx, ocr_nn_conv_transpose2d_backward(&ctx, &xr, &wr, &dyr, p, &dx2, &dw2, NULL));
        OCR_CHECK_OK(&ctx, ocr_nn_conv_transpose2d_backward(&ctx, &xr, &wr, &dy, p, NULL, NULL, &db2));
    } else {
        OCR_CHECK_OK(&ctx, ocr_nn_conv2d_forward(&ctx, &xr, &wr, &b, p, &y2));
        OCR_CHECK_OK(&ctx, ocr_nn_conv2d_backward(&ctx, &xr, &wr, &dyr, p, &dx2, &dw2, NULL));
        OCR_CHECK_OK(&ctx, ocr_nn_conv2d_backward(&ctx, &xr, &wr, &dy, p, NULL, NULL, &db2));
    }
    if (fast_bf16) {
        /* the bf16 kernels sum in their own order: within fp32 summation error of the largest value */
        double e = ocr_test_rel_err((float *)y.data, (float *)y2.data, ocr_tensor_numel(&y), 1e-30);
        if (ocr_test_rel_err((float *)dx.data, (float *)dx2.data, ocr_tensor_numel(&dx), 1e-30) > e)
            e = ocr_test_rel_err((float *)dx.data, (float *)dx2.data, ocr_tensor_numel(&dx), 1e-30);
        if (ocr_test_rel_err((float *)dw.data, (float *)dw2.data, ocr_tensor_numel(&dw), 1e-30) > e)
            e = ocr_test_rel_err((float *)dw.data, (float *)dw2.data, ocr_tensor_numel(&dw), 1e-30);
        bad = count_diff(&db, &db2);
        OCR_CHECK_MSG(e < 1e-5 && bad == 0, "bf16 (%s) k%d s%d p%d g%d%s: %.3g of the largest value from the fp32 op on rounded inputs, "
                      "%lld bias gradients differ", ocr_gemm_bf16_kernel_name(&ctx), cc->k, cc->s, cc->p, cc->groups,
                      cc->transposed ? " transposed" : "", e, (long long)bad);
    } else {
        bad = count_diff(&y, &y2) + count_diff(&dx, &dx2) + count_diff(&dw, &dw2) + count_diff(&db, &db2);
        OCR_CHECK_MSG(bad == 0, "%s %s k%d s%d p%d g%d%s: %lld values differ from the fp32 op on rounded inputs", ocr_amp_name(amp),
                      reference ? "reference" : "fast", cc->k, cc->s, cc->p, cc->groups, cc->transposed ? " transposed" : "", (long long)bad);
    }
    /* and the rounding matters: the fp32 op on the unrounded inputs differs */
    if (cc->k == 3 && !reference) {
        OCR_CHECK_OK(&ctx, cc->transposed ? ocr_nn_conv_transpose2d_forward(&ctx, &x, &w, &b, p, &y2) : ocr_nn_conv2d_forward(&ctx, &x, &w, &b, p, &y2));
        OCR_CHECK(count_diff(&y, &y2) > 0);
    }
done:
    ocr_tensor_free(&x); ocr_tensor_free(&w); ocr_tensor_free(&b); ocr_tensor_free(&y); ocr_tensor_free(&y2); ocr_tensor_free(&dy);
    ocr_tensor_free(&dx); ocr_tensor_free(&dw); ocr_tensor_free(&db); ocr_tensor_free(&dx2); ocr_tensor_free(&dw2); ocr_tensor_free(&db2);
    ocr_tensor_free(&xr); ocr_tensor_free(&wr); ocr_tensor_free(&dyr);
    ocr_ctx_free(&ctx);
}

static void test_conv_rounds_its_inputs(void) {
    static const conv_case cases[] = {
        {3, 1, 1, 1, 0, 2, 16, 20, 20, 32},  /* Winograd on AVX-512 */
        {3, 2, 1, 1, 0, 2, 8, 17, 15, 16},   /* strided */
        {7, 2, 3, 1, 0, 1, 3, 33, 31, 8},    /* the stem */
        {1, 1, 0, 1, 0, 2, 24, 9, 11, 16},   /* pointwise */
        {3, 1, 1, 2, 0, 1, 8, 10, 12, 8},    /* groups */
        {2, 2, 0, 1, 1, 2, 16, 9, 10, 8},    /* the heads' transposed 2x2/2 */
        {3, 2, 1, 1, 1, 1, 8, 7, 6, 4},      /* a general transposed one */
    };
    size_t i;
    int k, ref, best;
    ocr_ctx probe;
    OCR_CHECK_OK(&probe, ocr_ctx_init(&probe, 1, 1));
    best = ocr__bf16_kind(&probe);
    ocr_ctx_free(&probe);
    for (i = 0; i < sizeof cases / sizeof cases[0]; i++)
        for (k = 0; k < 2; k++)
            for (ref = 0; ref < 2; ref++) {
                /* bf16 on the rounding path too, whatever the CPU has; then on its bf16 kernels */
                ocr__bf16_kind_limit = OCR__BF16_NONE;
                check_conv_case(&cases[i], amps[k], ref, 0);
                ocr__bf16_kind_limit = -1;
                if (amps[k] == OCR_AMP_BF16 && !ref && best != OCR__BF16_NONE) check_conv_case(&cases[i], amps[k], ref, 1);
            }
}

static void test_gemm_rounds_its_inputs(void) {
    ocr_ctx ctx;
    float A[5 * 7], B[7 * 6], Ar[5 * 7], Br[7 * 6], C[5 * 6], C2[5 * 6];
    int i, k;
    OCR_CHECK_OK(&ctx, ocr_ctx_init(&ctx, 2, 3));
    ocr__bf16_kind_limit = OCR__BF16_NONE; /* the rounding path: bit for bit (tests/test_gemm_bf16.c checks the bf16 kernels) */
    for (k = 0; k < 2; k++) {
        for (i = 0; i < 35; i++) { A[i] = ocr_rng_normal(&ctx.rng); Ar[i] = ocr__amp_round1(amps[k], A[i]); }
        for (i = 0; i < 42; i++) { B[i] = ocr_rng_normal(&ctx.rng); Br[i] = ocr__amp_round1(amps[k], B[i]); }
        for (i = 0; i < 30; i++) C[i] = C2[i] = (float)i;
        ctx.amp = amps[k];
        OCR_CHECK_OK(&ctx, ocr_gemm(&ctx, 1, 0, 5, 6, 7, 0.5f, A, 5, B, 6, 1.0f, C, 6)); /* A read transposed: 7 x 5 stored */
        ctx.amp = OCR_AMP_OFF;
        OCR_CHECK_OK(&ctx, ocr_gemm(&ctx, 1, 0, 5, 6, 7, 0.5f, Ar, 5, Br, 6, 1.0f, C2, 6));
        OCR_CHECK(memcmp(C, C2, sizeof C) == 0);
    }
    ocr__bf16_kind_limit = -1;
    ocr_ctx_free(&ctx);
}

/* fp16: an input beyond 65504 becomes Inf (counted, and the forward watch names the op); gradients below 2^-25
   vanish (counted, and the weight gradient loses them); bf16 keeps both. The backward watch stays quiet under AMP. */
static void test_f16_range_counts(void) {
    ocr_ctx ctx;
    ocr_amp_stats stats;
    ocr_tensor x, w, y, dy, dw;
    ocr_conv_params p = ocr_conv_params_make(1, 0, 1, 1);
    int k;
    OCR_CHECK_OK(&ctx, ocr_ctx_init(&ctx, 1, 5));
    memset(&stats, 0, sizeof stats);
    OCR_CHECK_OK(&ctx, ocr_tensor_alloc(&ctx, &x, "x", OCR_F32, OCR_DEVICE_CPU, ocr_shape4(1, 2, 4, 4)));
    OCR_CHECK_OK(&ctx, ocr_tensor_alloc(&ctx, &w, "head.weight", OCR_F32, OCR_DEVICE_CPU, ocr_shape4(3, 2, 1, 1)));
    OCR_CHECK_OK(&ctx, ocr_tensor_alloc(&ctx, &y, "y", OCR_F32, OCR_DEVICE_CPU, ocr_shape4(1, 3, 4, 4)));
    OCR_CHECK_OK(&ctx, ocr_tensor_alloc(&ctx, &dy, "dy", OCR_F32, OCR_DEVICE_CPU, ocr_shape4(1, 3, 4, 4)));
    OCR_CHECK_OK(&ctx, ocr_tensor_alloc(&ctx, &dw, "dw", OCR_F32, OCR_DEVICE_CPU, w.shape));
    if (ctx.last_status) goto done;
    for (k = 0; k < 32; k++) ((float *)x.data)[k] = k == 21 ? 1e5f : 1.0f; /* channel 1 */
    for (k = 0; k < 6; k++) ((float *)w.data)[k] = 0.5f;
    for (k = 0; k < 48; k++) ((float *)dy.data)[k] = k < 10 ? 1e-9f : 0.0f; /* 10 tiny gradients, the rest exactly 0 */
    ctx.amp_stats = &stats;
    for (k = 0; k < 2; k++) {
        ocr_amp_stats_reset(&stats);
        memset(dw.data, 0, ocr_tensor_bytes(&dw));
        ctx.amp = amps[k];
        ctx.debug_flags |= OCR_DEBUG_CHECK_NUMERICS;
        if (amps[k] == OCR_AMP_F16) {
            OCR_CHECK_ERR(&ctx, ocr_nn_conv2d_forward(&ctx, &x, &w, NULL, p, &y), OCR_ENONFINITE, "ocr_nn_conv2d_forward (forward)");
        } else {
            OCR_CHECK_OK(&ctx, ocr_nn_conv2d_forward(&ctx, &x, &w, NULL, p, &y));
        }
        OCR_CHECK_OK(&ctx, ocr_nn_conv2d_backward(&ctx, &x, &w, &dy, p, NULL, &dw, NULL));
        OCR_CHECK(stats.count == 1 && !strcmp(stats.layer[0].layer, "head.weight"));
        if (stats.count != 1) continue;
        OCR_CHECK(stats.layer[0].values == 32 + 6 + 32 && stats.layer[0].grads == 48); /* x, w forward; x for dw */
        OCR_CHECK(stats.layer[0].overflowed == (amps[k] == OCR_AMP_F16 ? 2 : 0)); /* x read by the forward and the backward */
        OCR_CHECK(stats.layer[0].underflowed == (amps[k] == OCR_AMP_F16 ? 10 : 0));
        OCR_CHECK((((float *)dw.data)[0] == 0.0f) == (amps[k] == OCR_AMP_F16));
    }
    /* the backward watch still fires without AMP */
    ctx.amp = OCR_AMP_OFF;
    ((float *)dy.data)[0] = INFINITY;
    OCR_CHECK_ERR(&ctx, ocr_nn_conv2d_backward(&ctx, &x, &w, &dy, p, NULL, &dw, NULL), OCR_ENONFINITE, "backward");
done:
    ocr_amp_stats_free(&stats);
    ocr_tensor_free(&x); ocr_tensor_free(&w); ocr_tensor_free(&y); ocr_tensor_free(&dy); ocr_tensor_free(&dw);
    ocr_ctx_free(&ctx);
}

/* GradScaler's update rule, step by step, against a table worked out by hand (growth interval 3). */
static void test_scaler_state_machine(void) {
    static const struct { int nonfinite; float scale; int tracker; } seq[] = {
        {0, 65536, 1}, {0, 65536, 2}, {0, 131072, 0},  /* three clean steps: x2 */
        {1, 65536, 0},                                 /* a skip: x0.5, counter reset */
        {0, 65536, 1}, {1, 32768, 0}, {1, 16384, 0},   /* a clean step does not shield the next skip */
        {0, 16384, 1}, {0, 16384, 2}, {0, 32768, 0}, {0, 32768, 1},
    };
    ocr_ctx ctx;
    ocr_grad_scaler sc = ocr_grad_scaler_default(1), off = ocr_grad_scaler_default(0);
    size_t i;
    OCR_CHECK_OK(&ctx, ocr_ctx_init(&ctx, 1, 1));
    OCR_CHECK(sc.scale == 65536.0f && sc.growth_factor == 2.0f && sc.backoff_factor == 0.5f && sc.growth_interval == 2000);
    sc.growth_interval = 3;
    for (i = 0; i < sizeof seq / sizeof seq[0]; i++) {
        OCR_CHECK_OK(&ctx, ocr_grad_scaler_update(&ctx, &sc, seq[i].nonfinite));
        OCR_CHECK_MSG(sc.scale == seq[i].scale && sc.growth_tracker == seq[i].tracker, "step %d: scale %g tracker %d, expected %g %d",
                      (int)i, (double)sc.scale, sc.growth_tracker, (double)seq[i].scale, seq[i].tracker);
    }
    OCR_CHECK(sc.skipped == 3 && sc.skipped_in_a_row == 0);
    /* the default interval: 2000 clean steps, not 1999 */
    sc = ocr_grad_scaler_default(1);
    for (i = 0; i < 1999; i++) OCR_CHECK_OK(&ctx, ocr_grad_scaler_update(&ctx, &sc, 0));
    OCR_CHECK(sc.scale == 65536.0f);
    OCR_CHECK_OK(&ctx, ocr_grad_scaler_update(&ctx, &sc, 0));
    OCR_CHECK(sc.scale == 131072.0f && sc.growth_tracker == 0);
    /* growth stops at float's range; a disabled scaler keeps 1 and only counts */
    sc.scale = 2e38f; sc.growth_tracker = 1999;
    OCR_CHECK_OK(&ctx, ocr_grad_scaler_update(&ctx, &sc, 0));
    OCR_CHECK(sc.scale == 2e38f && sc.growth_tracker == 0);
    OCR_CHECK_OK(&ctx, ocr_grad_scaler_update(&ctx, &off, 1));
    OCR_CHECK(off.scale == 1.0f && off.skipped == 1);
    /* gradients non-finite at every scale: an error once the scale falls below 2^-24, naming the parameter */
    sc = ocr_grad_scaler_default(1);
    snprintf(sc.last_nonfinite, sizeof sc.last_nonfinite, "decoder.out2.weight");
    for (i = 0; i < 100 && ocr_grad_scaler_update(&ctx, &sc, 1) == OCR_OK; i++) {}
    OCR_CHECK_MSG(i == 40, "%d skips before the error, expected 40 (2^16 halved 40 times is 2^-24)", (int)i);
    OCR_CHECK(strstr(ocr_ctx_last_error(&ctx), "decoder.out2.weight") && strstr(ocr_ctx_last_error(&ctx), "every scale"));
    OCR_CHECK(sc.skipped_in_a_row == 41);
    ocr_ctx_free(&ctx);
}

static void test_scaler_scales_and_unscales(void) {
    ocr_ctx ctx;
    ocr_params P;
    ocr_grad_scaler sc = ocr_grad_scaler_default(1);
    ocr_tensor g0, g1, d;
    int ia, ib, ic, found = -1;
    int64_t i;
    float orig[12];
    OCR_CHECK_OK(&ctx, ocr_ctx_init(&ctx, 1, 1));
    ocr_params_init(&P);
    OCR_CHECK_OK(&ctx, ocr_params_add(&ctx, &P, "a.weight", ocr_shape1(8), 1, &ia));
    OCR_CHECK_OK(&ctx, ocr_params_add(&ctx, &P, "bn.running_mean", ocr_shape1(3), 0, &ib));
    OCR_CHECK_OK(&ctx, ocr_params_add(&ctx, &P, "b.weight", ocr_shape1(4), 1, &ic));
    OCR_CHECK_OK(&ctx, ocr_params_alloc(&ctx, &P));
    OCR_CHECK_OK(&ctx, ocr_tensor_alloc(&ctx, &d, "d_logits", OCR_F32, OCR_DEVICE_CPU, ocr_shape1(5)));
    if (ctx.last_status) { ocr_ctx_free(&ctx); return; }
    for (i = 0; i < 5; i++) ((float *)d.data)[i] = (float)i * 0.25f;
    OCR_CHECK_OK(&ctx, ocr_grad_scaler_scale(&ctx, &sc, &d));
    OCR_CHECK(((float *)d.data)[3] == 0.75f * 65536.0f);
    g0 = ocr_params_grad(&P, ia); g1 = ocr_params_grad(&P, ic);
    for (i = 0; i < 8; i++) orig[i] = ((float *)g0.data)[i] = 1e-3f * (float)(i + 1);
    for (i = 0; i < 4; i++) orig[8 + i] = ((float *)g1.data)[i] = -2.5f * (float)i;
    for (i = 0; i < 8; i++) ((float *)g0.data)[i] *= sc.scale;
    for (i = 0; i < 4; i++) ((float *)g1.data)[i] *= sc.scale;
    OCR_CHECK_OK(&ctx, ocr_grad_scaler_unscale(&ctx, &sc, &P, &found));
    OCR_CHECK(found == 0);
    for (i = 0; i < 8; i++) OCR_CHECK(((float *)g0.data)[i] == orig[i]); /* a power of two: exact */
    for (i = 0; i < 4; i++) OCR_CHECK(((float *)g1.data)[i] == orig[8 + i]);
    ((float *)g1.data)[2] = NAN;
    OCR_CHECK_OK(&ctx, ocr_grad_scaler_unscale(&ctx, &sc, &P, &found));
    OCR_CHECK(found == 1 && !strcmp(sc.last_nonfinite, "b.weight"));
    ocr_tensor_free(&d);
    ocr_params_free(&P);
    ocr_ctx_free(&ctx);
}

static void test_scaler_checkpoint(void) {
    ocr_ctx ctx;
    ocr_params P;
    ocr_safetensors st;
    ocr_grad_scaler sc = ocr_grad_scaler_default(1), back = ocr_grad_scaler_default(0);
    char buf[512], path[] = "/tmp/ocr_test_amp_XXXXXX";
    const char *keys[8], *values[8];
    int n, idx, fd;
    OCR_CHECK_OK(&ctx, ocr_ctx_init(&ctx, 1, 1));
    ocr_params_init(&P);
    OCR_CHECK_OK(&ctx, ocr_params_add(&ctx, &P, "w", ocr_shape1(2), 1, &idx));
    OCR_CHECK_OK(&ctx, ocr_params_alloc(&ctx, &P));
    fd = mkstemp(path);
    OCR_CHECK(fd >= 0);
    if (fd >= 0) close(fd);
    sc.scale = 0.0078125f * 3.0f; sc.growth_tracker = 1234; sc.skipped = 17;
    n = ocr_grad_scaler_meta(&sc, buf, keys, values);
    OCR_CHECK(n == 4);
    OCR_CHECK_OK(&ctx, ocr_params_save(&ctx, &P, path, keys, values, n));
    if (ocr_safetensors_open(&ctx, &st, path) == OCR_OK) {
        OCR_CHECK_OK(&ctx, ocr_grad_scaler_from_meta(&ctx, &back, &st));
        OCR_CHECK(back.enabled == 1 && back.scale == sc.scale && back.growth_tracker == 1234 && back.skipped == 17);
        ocr_safetensors_close(&st);
    } else OCR_CHECK_MSG(0, "%s", ocr_ctx_last_error(&ctx));
    /* malformed values are refused and leave the scaler as it was */
    values[1] = "-4";
    OCR_CHECK_OK(&ctx, ocr_params_save(&ctx, &P, path, keys, values, n));
    if (ocr_safetensors_open(&ctx, &st, path) == OCR_OK) {
        back = ocr_grad_scaler_default(1);
        OCR_CHECK_ERR(&ctx, ocr_grad_scaler_from_meta(&ctx, &back, &st), OCR_EFORMAT, "amp.scale '-4'");
        OCR_CHECK(back.scale == 65536.0f);
        ocr_safetensors_close(&st);
    } else OCR_CHECK_MSG(0, "%s", ocr_ctx_last_error(&ctx));
    OCR_CHECK_OK(&ctx, ocr_params_save(&ctx, &P, path, keys, values, 1)); /* only amp.scaler_enabled */
    if (ocr_safetensors_open(&ctx, &st, path) == OCR_OK) {
        OCR_CHECK_ERR(&ctx, ocr_grad_scaler_from_meta(&ctx, &back, &st), OCR_EFORMAT, "incomplete");
        ocr_safetensors_close(&st);
    } else OCR_CHECK_MSG(0, "%s", ocr_ctx_last_error(&ctx));
    remove(path);
    ocr_params_free(&P);
    ocr_ctx_free(&ctx);
}

/* A DBNet's forward and backward (training mode) under bf16 and fp16 against fp32, on the same weights and input.
   Outputs: max |a - b| / max |b| over both maps. Gradients: the cosine between all parameter gradients together and
   the ratio of their norms. One rounding costs 2^-9 (bf16) or 2^-12 (fp16) relative, but through twenty layers of
   batch statistics and ReLU masks (a value near zero that changes sign changes the mask) a freshly initialised
   network's outputs move by about 3% (bf16) and 0.4% (fp16) of their largest value and the gradients' direction by
   cosines of about 0.94 and 0.99, whatever the gradient scale (measured with dl from 1e-5 to 1: no underflow at work).
   The limits leave a margin; a wrong rounding rule (fp16 treated as bf16, or the fp32 path) fails the checks that the
   half type was used and that fp16 lands closer than bf16. */
static void test_dbnet_amp_close_to_fp32(void) {
    static const double limit_out[2] = {0.06, 0.012}, limit_cos[2] = {0.90, 0.97};
    ocr_ctx ctx;
    ocr_dbnet m;
    ocr_dbnet_config cfg = ocr_dbnet_config_default();
    ocr_tensor x, prob, thresh, dl, dt, ref_prob, ref_thresh;
    float *ref_grad = NULL;
    double out_err[2] = {0, 0}, cosine[2] = {0, 0};
    int k, pass;
    int64_t i;
    OCR_CHECK_OK(&ctx, ocr_ctx_init(&ctx, 2, 21));
    cfg.width = 0.25f;
    OCR_CHECK_OK(&ctx, ocr_dbnet_init(&ctx, &m, &cfg));
    OCR_CHECK_OK(&ctx, ocr_tensor_alloc(&ctx, &x, "x", OCR_F32, OCR_DEVICE_CPU, ocr_shape4(2, 3, 64, 64)));
    OCR_CHECK_OK(&ctx, ocr_tensor_alloc(&ctx, &dl, "dl", OCR_F32, OCR_DEVICE_CPU, ocr_shape4(2, 1, 64, 64)));
    OCR_CHECK_OK(&ctx, ocr_tensor_alloc(&ctx, &dt, "dt", OCR_F32, OCR_DEVICE_CPU, ocr_shape4(2, 1, 64, 64)));
    OCR_CHECK_OK(&ctx, ocr_tensor_alloc(&ctx, &ref_prob, "ref_prob", OCR_F32, OCR_DEVICE_CPU, ocr_shape4(2, 1, 64, 64)));
    OCR_CHECK_OK(&ctx, ocr_tensor_alloc(&ctx, &ref_thresh, "ref_thresh", OCR_F32, OCR_DEVICE_CPU, ocr_shape4(2, 1, 64, 64)));
    if (ctx.last_status) goto done;
    ref_grad = (float *)malloc(m.params.numel * sizeof(float));
    fill(&ctx, &x, 1.0f); fill(&ctx, &dl, 1e-3f); fill(&ctx, &dt, 1e-3f);
    for (pass = 0; pass < 3; pass++) {
        int amp = pass == 0 ? OCR_AMP_OFF : amps[pass - 1];
        double md = 0, mr = 1e-30, dot = 0, na = 0, nb = 0, ratio;
        ctx.amp = amp;
        OCR_CHECK_OK(&ctx, ocr_dbnet_forward(&ctx, &m, &x, 1, &prob, &thresh));
        ocr_params_zero_grad(&m.params);
        OCR_CHECK_OK(&ctx, ocr_dbnet_backward(&ctx, &m, &dl, &dt));
        if (ctx.last_status) break;
        if (pass == 0) {
            memcpy(ref_prob.data, prob.data, ocr_tensor_bytes(&prob));
            memcpy(ref_thresh.data, thresh.data, ocr_tensor_bytes(&thresh));
            memcpy(ref_grad, m.params.grad, m.params.numel * sizeof(float));
            continue;
        }
        for (i = 0; i < ocr_tensor_numel(&prob); i++) {
            double a = ((float *)prob.data)[i], b = ((float *)ref_prob.data)[i];
            double c = ((float *)thresh.data)[i], e = ((float *)ref_thresh.data)[i];
            if (!(fabs(a - b) <= md)) md = fabs(a - b);
            if (!(fabs(c - e) <= md)) md = fabs(c - e);
            if (fabs(b) > mr) mr = fabs(b);
            if (fabs(e) > mr) mr = fabs(e);
        }
        for (i = 0; i < (int64_t)m.params.numel; i++) {
            double a = m.params.grad[i], b = ref_grad[i];
            dot += a * b; na += a * a; nb += b * b;
        }
        k = pass - 1;
        out_err[k] = md / mr;
        cosine[k] = dot / sqrt(na * nb);
        ratio = sqrt(na / nb);
        printf("  %s: outputs %.2e of fp32's largest (limit %.2g); gradients: cosine %.4f (limit %.2f), norm ratio %.4f\n",
               ocr_amp_name(amp), out_err[k], limit_out[k], cosine[k], limit_cos[k], ratio);
        OCR_CHECK_MSG(out_err[k] <= limit_out[k], "%s outputs differ from fp32 by %.3g of their largest", ocr_amp_name(amp), out_err[k]);
        OCR_CHECK_MSG(cosine[k] >= limit_cos[k], "%s gradients: cosine %.4f to fp32's", ocr_amp_name(amp), cosine[k]);
        OCR_CHECK_MSG(ratio > 0.95 && ratio < 1.05, "%s gradients: norm %.4f of fp32's", ocr_amp_name(amp), ratio);
        OCR_CHECK(md > 0 && cosine[k] < 1.0); /* the half type was really used */
    }
    OCR_CHECK(out_err[1] < out_err[0] && cosine[1] > cosine[0]); /* fp16's 11 bits beat bf16's 8 */
done:
    free(ref_grad);
    ocr_tensor_free(&x); ocr_tensor_free(&dl); ocr_tensor_free(&dt); ocr_tensor_free(&ref_prob); ocr_tensor_free(&ref_thresh);
    ocr_dbnet_free(&m);
    ocr_ctx_free(&ctx);
}

static void test_amp_names(void) {
    int a = -1;
    OCR_CHECK(ocr_amp_parse("bf16", &a) && a == OCR_AMP_BF16);
    OCR_CHECK(ocr_amp_parse("fp16", &a) && a == OCR_AMP_F16);
    OCR_CHECK(ocr_amp_parse("fp32", &a) && a == OCR_AMP_OFF);
    OCR_CHECK(!ocr_amp_parse("fp8", &a) && a == OCR_AMP_OFF);
    OCR_CHECK(!strcmp(ocr_amp_name(OCR_AMP_BF16), "bf16") && !strcmp(ocr_amp_name(OCR_AMP_F16), "fp16"));
}

int main(int argc, char **argv) {
    ocr_test_init(argc, argv);
    OCR_TEST_RUN(test_amp_names);
    OCR_TEST_RUN(test_vector_rounding_matches_scalar);
    OCR_TEST_RUN(test_conv_rounds_its_inputs);
    OCR_TEST_RUN(test_gemm_rounds_its_inputs);
    OCR_TEST_RUN(test_f16_range_counts);
    OCR_TEST_RUN(test_scaler_state_machine);
    OCR_TEST_RUN(test_scaler_scales_and_unscales);
    OCR_TEST_RUN(test_scaler_checkpoint);
    OCR_TEST_RUN(test_dbnet_amp_close_to_fp32);
    return ocr_test_finish();
}
