/* repro_nonfinite - a NaN injected into one layer of a DBNet, found where it enters instead of where it ends.

   Without a watch, a NaN in one weight runs through the later layers: the forward "succeeds" and either the
   predictions are NaN and the first thing to notice is the loss, with no word of which layer started it, or a ReLU
   turns the NaN into 0 and a whole channel is silently dead. A NaN in a gradient goes into the weights with the
   optimizer's step and surfaces a step later. With ocr-c's
   numerics watch on, every layer checks its output in the forward and every gradient it writes in the backward,
   and the first non-finite value is reported with the layer's name, the phase, the tensor and the flat index.
   The watch is switched on by any of:
       ctx.debug_flags |= OCR_DEBUG_CHECK_NUMERICS;      in code
       OCR_CHECK_NUMERICS=1                              in the environment (read by ocr_ctx_init)
       train_dbnet --check-numerics                      on the trainer
   When off it costs one flag test per layer; the timing at the end compares a training step with it off and on.
   With --device cuda (a CUDA build) the model, its weights and gradients live on the GPU: the NaN is written into
   device memory, and the watch finds it with a kernel after each layer and names the same layer, op (forward or
   backward), tensor and index.

       repro_nonfinite                                          NaN into backbone.layer3.0.conv2.weight[10]
       repro_nonfinite --layer decoder.out4.0 --index 3 --size 128
       build/cuda/repro_nonfinite --device cuda
       build/repro_nonfinite_emu --device cuda --watched-only --layer decoder.thresh.6
                          on the emulated device (each CUDA thread an OS thread: seconds per step) the watched runs only,
                          on the last layer, where the watched forward runs to it and the watched backward stops at once

   Exit status: 0 when the watch names the layer, phase, tensor and index in the forward and the backward (context
   flag and environment variable alike), 1 otherwise (or no usable GPU), 2 bad flags (--device cuda in a build
   without CUDA). */
#define OCR_IMPLEMENTATION
#include "ocr_tensor.h"
#include "ocr_nn.h"
#include "ocr_loss.h"
#include "ocr_dbnet.h"
#include "ocr_example.h"
#include <time.h>

/* The message must name every one of these. */
static int names_all(const char *msg, const char *layer, const char *phase, const char *tensor) {
    return strstr(msg, layer) && strstr(msg, phase) && strstr(msg, tensor) && strstr(msg, "index");
}

/* t[index] = v, and its old value in *old, wherever t lives: one-element views copied to or from the host. */
static int swap_value(ocr_ctx *ctx, const ocr_tensor *t, int64_t index, float v, float *old) {
    ocr_tensor at = ocr_tensor_view(t->name, OCR_F32, t->device, ocr_shape1(1), (float *)t->data + index);
    ocr_tensor was = ocr_tensor_f32("old", ocr_shape1(1), old), now = ocr_tensor_f32("new", ocr_shape1(1), &v);
    int rc = ocr_tensor_copy(ctx, &was, &at);
    return rc ? rc : ocr_tensor_copy(ctx, &at, &now);
}

/* A tensor on ctx's device drawn from N(0, stddev^2) on the host, so that every device sees the same values. */
static int alloc_normal(ocr_ctx *ctx, ocr_tensor *t, const char *name, ocr_shape shape, float stddev) {
    ocr_tensor host;
    int rc;
    memset(t, 0, sizeof *t);
    if (!(rc = ocr_tensor_alloc(ctx, &host, name, OCR_F32, OCR_DEVICE_CPU, shape)) && !(rc = ocr_tensor_fill_normal(ctx, &host, 0.0f, stddev)) &&
        !(rc = ocr_tensor_alloc(ctx, t, name, OCR_F32, ctx->device, shape)))
        rc = ocr_tensor_copy(ctx, t, &host);
    ocr_tensor_free(&host);
    return rc;
}

/* A second context on the device of the first (the model's buffers live there). */
static int ctx_like(ocr_ctx *c, const ocr_ctx *like, int threads) {
    int rc = ocr_ctx_init(c, threads, 1);
#ifdef OCR_CUDA
    if (!rc && like->device == OCR_DEVICE_CUDA) rc = ocr_cuda_init(c, 0);
#else
    (void)like;
#endif
    return rc;
}

static double max_abs_diff(const ocr_tensor *a, const ocr_tensor *b) {
    int64_t i, n = ocr_tensor_numel(a);
    double d = 0.0;
    for (i = 0; i < n; i++) {
        double e = fabs((double)((const float *)a->data)[i] - ((const float *)b->data)[i]);
        if (!(e <= d)) d = e; /* NaN sticks */
    }
    return d;
}

static int64_t count_nonfinite(const ocr_tensor *t) {
    int64_t i, n = ocr_tensor_numel(t), bad = 0;
    for (i = 0; i < n; i++) bad += !isfinite(((const float *)t->data)[i]);
    return bad;
}

int main(int argc, char **argv) {
    const char *layer = "backbone.layer3.0.conv2", *device = "cpu";
    int index = 10, size = 64, threads = 2, reps = 3, watched_only = 0, bad = 0, status, rc, r;
    ocr_ex_flag flags[] = {
        {"--layer", OCR_EX_STRING, &layer, "convolution whose weight (forward) and weight gradient (backward) get the NaN"},
        {"--index", OCR_EX_INT, &index, "flat index of the NaN in that weight"},
        {"--size", OCR_EX_INT, &size, "input height and width (a multiple of 32)"},
        {"--threads", OCR_EX_INT, &threads, "threads"},
        {"--reps", OCR_EX_INT, &reps, "training steps timed with the watch off and on (0: no timing)"},
        {"--device", OCR_EX_STRING, &device, "where the model runs: cpu, or cuda in a CUDA build"},
        {"--watched-only", OCR_EX_BOOL, &watched_only, "only the watched runs: no unwatched or environment runs, no timing (for a slow "
                                                       "device such as the emulator)"},
    };
    char wname[OCR_NAME_MAX], gname[OCR_NAME_MAX + 8], msg[OCR_ERROR_MAX];
    ocr_ctx ctx, env_ctx;
    ocr_dbnet m;
    ocr_dbnet_config cfg = ocr_dbnet_config_default();
    /* x .. mask live on the model's device; clean and the staging tensors on the host, for counting */
    ocr_tensor x, prob, thresh, d_prob, d_thresh, gt, mask, w, g, clean, staging, seen;
    ocr_db_loss_config lcfg = ocr_db_loss_defaults();
    float saved, ignored;
    int wi;
    double t_off = 0.0, t_on = 0.0, t0;
    if (ocr_ex_parse(argc, argv, "[flags]", flags, (int)(sizeof flags / sizeof flags[0])) != 0) {
        fprintf(stderr, "%s: takes no positional arguments\n", argv[0]);
        return 2;
    }
    if (size < 32 || size > 1024 || size % 32 || threads < 1 || reps < 0 || reps > 100) {
        fprintf(stderr, "%s: need --size a multiple of 32 in [32, 1024], --threads >= 1, 0 <= --reps <= 100\n", argv[0]);
        return 2;
    }
    if (watched_only) reps = 0;
    cfg.width = 0.125f;
    memset(&m, 0, sizeof m); /* so that every early exit frees what it has */
    memset(&x, 0, sizeof x); d_prob = d_thresh = gt = mask = clean = staging = x;
    if (ocr_ctx_init(&ctx, threads, 1) != OCR_OK) { fprintf(stderr, "%s: %s\n", argv[0], ocr_ctx_last_error(&ctx)); return 1; }
    if ((status = ocr_ex_set_device(&ctx, argv[0], device)) != 0) {
        goto done;
    }
    if (ocr_dbnet_init(&ctx, &m, &cfg) != OCR_OK || alloc_normal(&ctx, &x, "images", ocr_shape4(1, 3, size, size), 1.0f) != OCR_OK ||
        alloc_normal(&ctx, &d_prob, "d_prob_logits", ocr_shape4(1, 1, size, size), 1e-3f) != OCR_OK ||
        alloc_normal(&ctx, &d_thresh, "d_thresh", ocr_shape4(1, 1, size, size), 1e-3f) != OCR_OK ||
        ocr_tensor_alloc(&ctx, &gt, "gt", OCR_F32, ctx.device, ocr_shape4(1, 1, size, size)) != OCR_OK ||
        ocr_tensor_alloc(&ctx, &mask, "mask", OCR_F32, ctx.device, ocr_shape4(1, 1, size, size)) != OCR_OK ||
        ocr_tensor_fill(&ctx, &mask, 1.0) != OCR_OK) {
        fprintf(stderr, "%s: %s\n", argv[0], ocr_ctx_last_error(&ctx));
        status = 1;
        goto done;
    }
    snprintf(wname, sizeof wname, "%s.weight", layer);
    snprintf(gname, sizeof gname, "%s.grad", wname);
    wi = ocr_params_find(&m.params, wname);
    w = wi >= 0 ? ocr_params_value(&m.params, wi) : x;
    if (wi < 0 || index < 0 || index >= ocr_tensor_numel(&w)) {
        fprintf(stderr, "%s: the model (resnet18, width %g) has no '%s' with an element %d\n", argv[0], cfg.width, wname, index);
        status = 2;
        goto done;
    }
    g = ocr_params_grad(&m.params, wi);
    ctx.debug_flags &= ~(unsigned)OCR_DEBUG_CHECK_NUMERICS; /* the first runs are the unwatched ones, whatever the environment */
    if ((!watched_only && (ocr_dbnet_forward(&ctx, &m, &x, 1, &prob, &thresh) != OCR_OK ||
                           ocr_tensor_alloc(&ctx, &clean, "clean_prob_logits", OCR_F32, OCR_DEVICE_CPU, prob.shape) != OCR_OK ||
                           ocr_tensor_copy(&ctx, &clean, &prob) != OCR_OK)) ||
        swap_value(&ctx, &w, index, NAN, &saved) != OCR_OK) {
        fprintf(stderr, "%s: %s\n", argv[0], ocr_ctx_last_error(&ctx));
        status = 1;
        goto done;
    }
    printf("DBNet resnet18 width %g on %s, input [1,3,%d,%d]; NaN written into %s[%d]\n\n", cfg.width, ocr_device_name(ctx.device), size,
           size, wname, index);

    /* 1. forward, watch off: the NaN either reaches the loss or, through a ReLU (max(NaN, 0) = 0 here), vanishes */
    if (!watched_only) {
        rc = ocr_dbnet_forward(&ctx, &m, &x, 1, &prob, &thresh);
        if (!rc) rc = ocr_tensor_on_host(&ctx, &prob, &staging, &seen);
        printf("forward, watch off: %s; %lld of %lld probability logits are non-finite, the largest change from the clean model's is "
               "%g\n", rc ? ocr_ctx_last_error(&ctx) : "returns OK", rc ? 0LL : (long long)count_nonfinite(&seen),
               (long long)ocr_tensor_numel(&clean), rc ? 0.0 : max_abs_diff(&seen, &clean));
        if (!rc) {
            ocr_db_loss_terms terms;
            rc = ocr_loss_db(&ctx, &lcfg, &prob, &thresh, &gt, &mask, &gt, &mask, &terms, NULL, NULL);
            if (rc)
                printf("  the first to notice is the loss, which cannot say where the NaN came from:\n  %s\n", ocr_ctx_last_error(&ctx));
            else
                printf("  the loss is %g, finite: the NaN was absorbed on the way (a ReLU maps NaN to 0) and nothing will ever flag "
                       "it\n", terms.total);
        }
    }

    /* 2. forward, watch on through the context flag */
    ctx.debug_flags |= OCR_DEBUG_CHECK_NUMERICS;
    rc = ocr_dbnet_forward(&ctx, &m, &x, 1, &prob, &thresh);
    printf("\nforward, watch on (ctx.debug_flags |= OCR_DEBUG_CHECK_NUMERICS):\n  %s\n", rc ? ocr_ctx_last_error(&ctx) : "returns OK");
    if (rc != OCR_ENONFINITE || !names_all(ocr_ctx_last_error(&ctx), layer, "forward", layer)) {
        printf("  UNEXPECTED: the watch did not name layer '%s', the forward phase, the tensor and the index\n", layer);
        bad = 1;
    }
    snprintf(msg, sizeof msg, "%s", ocr_ctx_last_error(&ctx));

    /* 3. the same through the environment variable */
    if (!watched_only) {
        if (setenv("OCR_CHECK_NUMERICS", "1", 1) != 0) {
            fprintf(stderr, "%s: cannot set OCR_CHECK_NUMERICS\n", argv[0]);
            status = 1;
            goto done;
        }
        if (ctx_like(&env_ctx, &ctx, threads) != OCR_OK) {
            fprintf(stderr, "%s: cannot set up the environment run: %s\n", argv[0], ocr_ctx_last_error(&env_ctx));
            ocr_ctx_free(&env_ctx);
            status = 1;
            goto done;
        }
        rc = ocr_dbnet_forward(&env_ctx, &m, &x, 1, &prob, &thresh);
        printf("\nforward, watch on (OCR_CHECK_NUMERICS=1 in the environment): %s\n",
               rc == OCR_ENONFINITE && strcmp(ocr_ctx_last_error(&env_ctx), msg) == 0 ? "the same report" : ocr_ctx_last_error(&env_ctx));
        if (rc != OCR_ENONFINITE || strcmp(ocr_ctx_last_error(&env_ctx), msg) != 0) bad = 1;
        ocr_ctx_free(&env_ctx);
        unsetenv("OCR_CHECK_NUMERICS");
    }

    /* 4. backward: the weight is sound again, a NaN sits in its gradient (a poisoned accumulation) */
    if (swap_value(&ctx, &w, index, saved, &ignored) != OCR_OK) {
        fprintf(stderr, "%s: %s\n", argv[0], ocr_ctx_last_error(&ctx));
        status = 1;
        goto done;
    }
    printf("\nNaN written into the gradient %s[%d] instead\n", wname, index);
    if (!watched_only) {
        ocr_params_zero_grad(&m.params);
        ctx.debug_flags &= ~(unsigned)OCR_DEBUG_CHECK_NUMERICS;
        rc = swap_value(&ctx, &g, index, NAN, &ignored);
        if (!rc) rc = ocr_dbnet_forward(&ctx, &m, &x, 1, &prob, &thresh);
        if (!rc) rc = ocr_dbnet_backward(&ctx, &m, &d_prob, &d_thresh);
        printf("backward, watch off: %s", rc ? ocr_ctx_last_error(&ctx) : "returns OK");
        if (!rc && !(rc = ocr_tensor_on_host(&ctx, &g, &staging, &seen)))
            printf("; %lld values of '%s' are NaN, and the optimizer would write them into the weights", (long long)count_nonfinite(&seen),
                   gname);
        printf("\n");
    }
    ocr_params_zero_grad(&m.params);
    ctx.debug_flags |= OCR_DEBUG_CHECK_NUMERICS;
    rc = swap_value(&ctx, &g, index, NAN, &ignored);
    if (!rc) rc = ocr_dbnet_forward(&ctx, &m, &x, 1, &prob, &thresh);
    if (!rc) rc = ocr_dbnet_backward(&ctx, &m, &d_prob, &d_thresh);
    printf("backward, watch on:\n  %s\n", rc ? ocr_ctx_last_error(&ctx) : "returns OK");
    if (rc != OCR_ENONFINITE || !names_all(ocr_ctx_last_error(&ctx), layer, "backward", gname)) {
        printf("  UNEXPECTED: the watch did not name layer '%s', the backward phase, the tensor '%s' and the index\n", layer, gname);
        bad = 1;
    }

    /* 5. what the watch costs: a clean training step with it off and on */
    ocr_params_zero_grad(&m.params);
    for (r = 0; reps && r <= reps; r++) {
        int on;
        for (on = 0; on < 2; on++) {
            if (on) ctx.debug_flags |= OCR_DEBUG_CHECK_NUMERICS;
            else ctx.debug_flags &= ~(unsigned)OCR_DEBUG_CHECK_NUMERICS;
            t0 = ocr_monotonic_seconds();
            if (ocr_dbnet_forward(&ctx, &m, &x, 1, &prob, &thresh) || ocr_dbnet_backward(&ctx, &m, &d_prob, &d_thresh) ||
                ocr_tensor_on_host(&ctx, &g, &staging, &seen)) { /* the download waits for the device to finish the step */
                printf("clean step failed: %s\n", ocr_ctx_last_error(&ctx));
                bad = 1;
            }
            if (r) *(on ? &t_on : &t_off) += ocr_monotonic_seconds() - t0; /* round 0 warms up */
        }
    }
    if (reps)
        printf("\ncost: a training step takes %.2f ms with the watch off, %.2f ms with it on (off: one flag test per layer)\n",
               1e3 * t_off / reps, 1e3 * t_on / reps);
    printf("\n%s on %s\n", bad ? "FAIL: the watch did not report the layer as described"
                               : "OK: the watch named the layer, phase, tensor and index, forward and backward", ocr_device_name(ctx.device));
    status = bad;
done:
    ocr_tensor_free(&x); ocr_tensor_free(&d_prob); ocr_tensor_free(&d_thresh); ocr_tensor_free(&gt); ocr_tensor_free(&mask);
    ocr_tensor_free(&clean); ocr_tensor_free(&staging);
    ocr_dbnet_free(&m);
    ocr_ctx_free(&ctx);
    return status;
}
