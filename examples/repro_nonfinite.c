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

       repro_nonfinite                                          NaN into backbone.layer3.0.conv2.weight[10]
       repro_nonfinite --layer decoder.out4.0 --index 3 --size 128

   Exit status: 0 when the watch names the layer, phase, tensor and index in the forward and the backward (context
   flag and environment variable alike), 1 otherwise, 2 bad flags. */
#define OCR_IMPLEMENTATION
#include "ocr_tensor.h"
#include "ocr_nn.h"
#include "ocr_loss.h"
#include "ocr_dbnet.h"
#include "ocr_example.h"
#include <time.h>

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* The message must name every one of these. */
static int names_all(const char *msg, const char *layer, const char *phase, const char *tensor) {
    return strstr(msg, layer) && strstr(msg, phase) && strstr(msg, tensor) && strstr(msg, "index");
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
    const char *layer = "backbone.layer3.0.conv2";
    int index = 10, size = 64, threads = 2, reps = 3, bad = 0, status, rc, r;
    ocr_ex_flag flags[] = {
        {"--layer", OCR_EX_STRING, &layer, "convolution whose weight (forward) and weight gradient (backward) get the NaN"},
        {"--index", OCR_EX_INT, &index, "flat index of the NaN in that weight"},
        {"--size", OCR_EX_INT, &size, "input height and width (a multiple of 32)"},
        {"--threads", OCR_EX_INT, &threads, "threads"},
        {"--reps", OCR_EX_INT, &reps, "training steps timed with the watch off and on"},
    };
    char wname[OCR_NAME_MAX], gname[OCR_NAME_MAX + 8], msg[OCR_ERROR_MAX];
    ocr_ctx ctx, env_ctx;
    ocr_dbnet m;
    ocr_dbnet_config cfg = ocr_dbnet_config_default();
    ocr_tensor x, prob, thresh, d_prob, d_thresh, gt, mask, w, clean;
    ocr_db_loss_config lcfg = ocr_db_loss_defaults();
    float saved;
    int wi;
    double t_off = 0.0, t_on = 0.0, t0;
    if (ocr_ex_parse(argc, argv, "[flags]", flags, (int)(sizeof flags / sizeof flags[0])) != 0) {
        fprintf(stderr, "%s: takes no positional arguments\n", argv[0]);
        return 2;
    }
    if (size < 32 || size > 1024 || size % 32 || threads < 1 || reps < 1 || reps > 100) {
        fprintf(stderr, "%s: need --size a multiple of 32 in [32, 1024], --threads >= 1, 1 <= --reps <= 100\n", argv[0]);
        return 2;
    }
    cfg.width = 0.125f;
    memset(&m, 0, sizeof m); /* so that every early exit frees what it has */
    memset(&x, 0, sizeof x); d_prob = d_thresh = gt = mask = clean = x;
    if (ocr_ctx_init(&ctx, threads, 1) != OCR_OK || ocr_dbnet_init(&ctx, &m, &cfg) != OCR_OK ||
        ocr_tensor_alloc(&ctx, &x, "images", OCR_F32, OCR_DEVICE_CPU, ocr_shape4(1, 3, size, size)) != OCR_OK ||
        ocr_tensor_alloc(&ctx, &d_prob, "d_prob_logits", OCR_F32, OCR_DEVICE_CPU, ocr_shape4(1, 1, size, size)) != OCR_OK ||
        ocr_tensor_alloc(&ctx, &d_thresh, "d_thresh", OCR_F32, OCR_DEVICE_CPU, ocr_shape4(1, 1, size, size)) != OCR_OK ||
        ocr_tensor_alloc(&ctx, &gt, "gt", OCR_F32, OCR_DEVICE_CPU, ocr_shape4(1, 1, size, size)) != OCR_OK ||
        ocr_tensor_alloc(&ctx, &mask, "mask", OCR_F32, OCR_DEVICE_CPU, ocr_shape4(1, 1, size, size)) != OCR_OK ||
        ocr_tensor_fill_normal(&ctx, &x, 0.0f, 1.0f) != OCR_OK || ocr_tensor_fill_normal(&ctx, &d_prob, 0.0f, 1e-3f) != OCR_OK ||
        ocr_tensor_fill_normal(&ctx, &d_thresh, 0.0f, 1e-3f) != OCR_OK || ocr_tensor_fill(&ctx, &mask, 1.0) != OCR_OK) {
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
    ctx.debug_flags &= ~(unsigned)OCR_DEBUG_CHECK_NUMERICS; /* the first runs are the unwatched ones, whatever the environment */
    if (ocr_dbnet_forward(&ctx, &m, &x, 1, &prob, &thresh) != OCR_OK ||
        ocr_tensor_alloc(&ctx, &clean, "clean_prob_logits", OCR_F32, OCR_DEVICE_CPU, prob.shape) != OCR_OK ||
        ocr_tensor_copy(&ctx, &clean, &prob) != OCR_OK) {
        fprintf(stderr, "%s: %s\n", argv[0], ocr_ctx_last_error(&ctx));
        status = 1;
        goto done;
    }
    saved = ((float *)w.data)[index];
    ((float *)w.data)[index] = NAN;
    printf("DBNet resnet18 width %g, input [1,3,%d,%d]; NaN written into %s[%d]\n\n", cfg.width, size, size, wname, index);

    /* 1. forward, watch off: the NaN either reaches the loss or, through a ReLU (max(NaN, 0) = 0 here), vanishes */
    rc = ocr_dbnet_forward(&ctx, &m, &x, 1, &prob, &thresh);
    printf("forward, watch off: %s; %lld of %lld probability logits are non-finite, the largest change from the clean model's is %g\n",
           rc ? ocr_ctx_last_error(&ctx) : "returns OK", (long long)count_nonfinite(&prob), (long long)ocr_tensor_numel(&prob),
           rc ? 0.0 : max_abs_diff(&prob, &clean));
    if (!rc) {
        ocr_db_loss_terms terms;
        rc = ocr_loss_db(&ctx, &lcfg, &prob, &thresh, &gt, &mask, &gt, &mask, &terms, NULL, NULL);
        if (rc)
            printf("  the first to notice is the loss, which cannot say where the NaN came from:\n  %s\n", ocr_ctx_last_error(&ctx));
        else
            printf("  the loss is %g, finite: the NaN was absorbed on the way (a ReLU maps NaN to 0) and nothing will ever flag it\n",
                   terms.total);
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
    if (setenv("OCR_CHECK_NUMERICS", "1", 1) != 0 || ocr_ctx_init(&env_ctx, threads, 1) != OCR_OK) {
        fprintf(stderr, "%s: cannot set up the environment run\n", argv[0]);
        status = 1;
        goto done;
    }
    rc = ocr_dbnet_forward(&env_ctx, &m, &x, 1, &prob, &thresh);
    printf("\nforward, watch on (OCR_CHECK_NUMERICS=1 in the environment): %s\n",
           rc == OCR_ENONFINITE && strcmp(ocr_ctx_last_error(&env_ctx), msg) == 0 ? "the same report" : ocr_ctx_last_error(&env_ctx));
    if (rc != OCR_ENONFINITE || strcmp(ocr_ctx_last_error(&env_ctx), msg) != 0) bad = 1;
    ocr_ctx_free(&env_ctx);
    unsetenv("OCR_CHECK_NUMERICS");

    /* 4. backward: the weight is sound again, a NaN sits in its gradient (a poisoned accumulation) */
    ((float *)w.data)[index] = saved;
    ocr_params_zero_grad(&m.params);
    m.params.grad[m.params.info[wi].offset + (size_t)index] = NAN;
    ctx.debug_flags &= ~(unsigned)OCR_DEBUG_CHECK_NUMERICS;
    rc = ocr_dbnet_forward(&ctx, &m, &x, 1, &prob, &thresh);
    if (!rc) rc = ocr_dbnet_backward(&ctx, &m, &d_prob, &d_thresh);
    {
        ocr_tensor g = ocr_params_grad(&m.params, wi);
        printf("\nNaN written into the gradient %s[%d] instead\nbackward, watch off: %s; %lld values of '%s' are NaN, and the "
               "optimizer would write them into the weights\n", wname, index, rc ? ocr_ctx_last_error(&ctx) : "returns OK",
               (long long)count_nonfinite(&g), gname);
    }
    ocr_params_zero_grad(&m.params);
    m.params.grad[m.params.info[wi].offset + (size_t)index] = NAN;
    ctx.debug_flags |= OCR_DEBUG_CHECK_NUMERICS;
    rc = ocr_dbnet_forward(&ctx, &m, &x, 1, &prob, &thresh);
    if (!rc) rc = ocr_dbnet_backward(&ctx, &m, &d_prob, &d_thresh);
    printf("backward, watch on:\n  %s\n", rc ? ocr_ctx_last_error(&ctx) : "returns OK");
    if (rc != OCR_ENONFINITE || !names_all(ocr_ctx_last_error(&ctx), layer, "backward", gname)) {
        printf("  UNEXPECTED: the watch did not name layer '%s', the backward phase, the tensor '%s' and the index\n", layer, gname);
        bad = 1;
    }

    /* 5. what the watch costs: a clean training step with it off and on */
    ocr_params_zero_grad(&m.params);
    for (r = 0; r <= reps; r++) {
        int on;
        for (on = 0; on < 2; on++) {
            if (on) ctx.debug_flags |= OCR_DEBUG_CHECK_NUMERICS;
            else ctx.debug_flags &= ~(unsigned)OCR_DEBUG_CHECK_NUMERICS;
            t0 = now();
            if (ocr_dbnet_forward(&ctx, &m, &x, 1, &prob, &thresh) || ocr_dbnet_backward(&ctx, &m, &d_prob, &d_thresh)) {
                printf("clean step failed: %s\n", ocr_ctx_last_error(&ctx));
                bad = 1;
            }
            if (r) *(on ? &t_on : &t_off) += now() - t0; /* round 0 warms up */
        }
    }
    printf("\ncost: a training step takes %.2f ms with the watch off, %.2f ms with it on (off: one flag test per layer)\n",
           1e3 * t_off / reps, 1e3 * t_on / reps);
    printf("\n%s\n", bad ? "FAIL: the watch did not report the layer as described"
                         : "OK: the watch named the layer, phase, tensor and index, forward and backward");
    status = bad;
done:
    ocr_tensor_free(&x); ocr_tensor_free(&d_prob); ocr_tensor_free(&d_thresh); ocr_tensor_free(&gt); ocr_tensor_free(&mask);
    ocr_tensor_free(&clean);
    ocr_dbnet_free(&m);
    ocr_ctx_free(&ctx);
    return status;
}
