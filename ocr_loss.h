/* ocr_loss.h - numerically stable DBNet losses with their gradients.  v0.1  MIT license

   Do this in exactly one C or C++ file:
       #define OCR_LOSS_IMPLEMENTATION        (ocr_tensor.h's implementation goes in the same or another file;
       #include "ocr_loss.h"                 OCR_IMPLEMENTATION turns on every module)

   Usage (one training step of a DBNet; the model gives probability logits and the threshold map):
       ocr_db_loss_config cfg = ocr_db_loss_defaults();           // 5*BCE(OHEM 1:3) + 1*Dice + 10*L1, k = 50
       ocr_db_loss_terms terms;
       ocr_tensor_zero(&ctx, &d_logits); ocr_tensor_zero(&ctx, &d_thresh);
       if (ocr_loss_db(&ctx, &cfg, &logits, &thresh, &gt_shrink, &mask_shrink, &gt_thresh, &mask_thresh,
                       &terms, &d_logits, &d_thresh) != OCR_OK)
           fprintf(stderr, "%s\n", ocr_ctx_last_error(&ctx));    // names the argument, tensor, shape, bad value
       printf("loss %.4f (bce %.4f dice %.4f l1 %.4f)\n", terms.total, terms.bce, terms.dice, terms.l1);
       // then backward through the model with d_logits and d_thresh

   Every tensor is F32 [N,1,H,W] on ctx's device (CPU in this build), all of one shape. Targets and masks must
   lie in [0, 1], predictions must be finite; anything else is an error before any memory is written. Gradients
   ACCUMULATE (+=) into the given tensors (NULL skips one). Loss values are doubles. For every finite input and
   a configuration within its documented bounds, every loss value and every gradient the losses write is finite.

   Numerics (why this file exists):
   - BCE is computed from logits, l = max(x,0) - x*y + log1p(exp(-|x|)) split by the sign of x, so it never
     saturates. The official code takes F.binary_cross_entropy of sigmoid probabilities, which clamps each log
     at -100: where |logit| > ~37 (float64) or ~17 (float32) the official per-pixel loss is capped at 100 (or
     is imprecise) and its gradient vanishes, while ours is exact. Elsewhere the two agree.
   - The approximate binary map B = sigmoid(k(P - T)), P = sigmoid(logits), is evaluated through exp(-|z|) only,
     and its derivative as s/(1+s)^2 with s = exp(-|z|): no overflow in fp32 or fp16 for any finite input (the
     official reciprocal(1 + exp(-k(P-T))) overflows in fp16 and gives 0*inf = NaN in backward). z = k(P - T) is
     clamped to +-1e30 so that its BCE fits a float; only absurd thresholds (|T| > 1e30/k) reach the clamp, where
     the gradient is 0.
   - OHEM keeps the floor(ratio * positives) largest negative losses, found by a three-pass radix selection on
     the float bits (O(n), no sort). The sum equals the official topk sum in value; pixels tied with the k-th
     largest loss share its gradient equally (torch.topk gives it to an arbitrary subset).
   - Every reduction runs over fixed blocks of pixels with double accumulators: results are bit-identical for
     any thread count.

   Options: none. Dependencies: ocr_tensor.h, libm.
*/
#ifndef OCR_LOSS_H
#define OCR_LOSS_H
#include "ocr_tensor.h"
#ifdef __cplusplus
extern "C" {
#endif

/* ---- balanced binary cross-entropy from logits ----
   A pixel is positive when target*mask == 1, negative when (1-target)*mask == 1 (computed in float, as the
   official uint8 cast of those products); pixels with fractional products are ignored. With n_pos positives,
   n_neg negatives and l the per-pixel BCE:
     OHEM        (sum of positive l + sum of the K largest negative l) / (n_pos + K + eps),
                 K = min(n_neg, floor(ratio * n_pos)); 0 without positives, as the official BalanceCrossEntropyLoss
     BALANCED    mean l over positives / 2 + mean l over negatives / 2 (every negative, no mining); the mean of
                 the one class present when the other is absent; 0 when neither is
     POS_WEIGHT  (pos_weight * sum of positive l + sum of negative l) / (pos_weight * n_pos + n_neg + eps);
                 0 when that weight sum is 0 */
typedef enum { OCR_LOSS_BCE_OHEM = 0, OCR_LOSS_BCE_BALANCED = 1, OCR_LOSS_BCE_POS_WEIGHT = 2 } ocr_loss_bce_mode;

typedef struct {
    int mode;             /* ocr_loss_bce_mode */
    float negative_ratio; /* OHEM: negatives kept per positive (official 3); 0..1e6 */
    float pos_weight;     /* POS_WEIGHT: weight of a positive pixel, a negative weighs 1; 0..1e6 */
    float eps;            /* OHEM, POS_WEIGHT: added to the denominator (official 1e-6); 0..1 */
} ocr_loss_bce_config;

/* ---- the DB loss ----
   total = bce_weight * BCE(P) + dice_weight * Dice(B) + l1_weight * L1(T) + binary_bce_weight * BCE(B)
           + prob_dice_weight * Dice(P)
   BCE(P): balanced BCE of the probability logits against gt_shrink within mask_shrink (bce config)
   Dice(B): 1 - 2 sum(B*gt*mask) / (sum(B*mask) + sum(gt*mask) + dice_eps), sums over the whole batch
   L1(T):  sum(|T - gt_thresh| * mask_thresh) / sum(mask_thresh), 0 (zero gradient) when the mask is empty
   BCE(B): the paper's L_b, balanced BCE of B = sigmoid(k(P - T)) from its logit k(P - T) (bce config)
   Dice(P): Dice of P = sigmoid(prob_logits) itself against gt_shrink within mask_shrink (not in the official
            code). The BCE leaves the uncertain pixels between neighbouring words and at word edges near 0.5; the
            Dice gradient in logit space peaks there, so P comes out sharper: words stay apart at the 0.3
            binarization and their box scores (mean P) rise. train_dbnet's from-scratch recipe uses it.
   A term whose weight is 0 is skipped and reported as 0. */
typedef struct {
    float bce_weight;         /* official 5, paper 1 */
    float dice_weight;        /* official 1, paper 0 */
    float l1_weight;          /* official 10, paper 10 */
    float binary_bce_weight;  /* official 0, paper 1 */
    float prob_dice_weight;   /* official 0, paper 0 */
    float k;                  /* steepness of the step (50); 0 < k <= 1e4 */
    float dice_eps;           /* official 1e-6; 1e-8f..1 */
    float grad_scale;         /* multiplies every gradient, e.g. a mixed-precision loss scale; 0..1e12 */
    ocr_loss_bce_config bce;  /* for BCE(P) and BCE(B) */
} ocr_db_loss_config;
/* Each loss weight lies in 0..1e4. These bounds keep every gradient finite. */

typedef struct {
    double total;       /* weighted sum */
    double bce;         /* BCE(P), unweighted */
    double dice;        /* Dice(B), unweighted */
    double l1;          /* L1(T), unweighted */
    double bce_binary;  /* BCE(B), unweighted */
    double dice_prob;   /* Dice(P), unweighted */
} ocr_db_loss_terms;

OCRDEF ocr_loss_bce_config ocr_loss_bce_defaults(void);   /* OHEM, ratio 3, eps 1e-6, pos_weight 1 */
OCRDEF ocr_db_loss_config ocr_db_loss_defaults(void);     /* official code: 5*BCE(P) + 1*Dice(B) + 10*L1(T) */
OCRDEF ocr_db_loss_config ocr_db_loss_paper(void);        /* paper: 1*BCE(P) + 1*BCE(B) + 10*L1(T) */

/* prob_logits: pre-sigmoid probability map; thresh: threshold map T (a sigmoid output in the official head, any
   finite value accepted); gt_shrink, mask_shrink, gt_thresh, mask_thresh in [0, 1]. out may be NULL. */
OCRDEF int ocr_loss_db(ocr_ctx *ctx, const ocr_db_loss_config *cfg, const ocr_tensor *prob_logits, const ocr_tensor *thresh,
                       const ocr_tensor *gt_shrink, const ocr_tensor *mask_shrink, const ocr_tensor *gt_thresh,
                       const ocr_tensor *mask_thresh, ocr_db_loss_terms *out, ocr_tensor *d_prob_logits, ocr_tensor *d_thresh);

/* ---- each term on its own: *loss (may be NULL) gets the value, grad_scale * d(loss)/d(input) is added to the
   gradient tensor (NULL skips it) ---- */
/* cfg NULL: ocr_loss_bce_defaults() */
/* The BCE's per-pixel weights {positive, negative, negative tied with the OHEM cut} from the counts of one call:
   pos and neg pixels; for OHEM, kept negatives selected of which `above` lie strictly above the cut and `equal` tie
   with it (the tied ones share the remaining slots). One definition for the CPU and CUDA paths. */
OCRDEF void ocr_loss_bce_weights(const ocr_loss_bce_config *cfg, int64_t pos, int64_t neg, int64_t kept, int64_t above,
                                 int64_t equal, double w[3]);
OCRDEF int ocr_loss_bce(ocr_ctx *ctx, const ocr_loss_bce_config *cfg, const ocr_tensor *logits, const ocr_tensor *gt,
                        const ocr_tensor *mask, float grad_scale, double *loss, ocr_tensor *d_logits);
/* pred: probabilities in [0, 1]; weights (NULL: all 1) in [0, 1] multiply the mask, as the official DiceLoss */
OCRDEF int ocr_loss_dice(ocr_ctx *ctx, float eps, const ocr_tensor *pred, const ocr_tensor *gt, const ocr_tensor *mask,
                         const ocr_tensor *weights, float grad_scale, double *loss, ocr_tensor *d_pred);
/* pred: any finite values */
OCRDEF int ocr_loss_masked_l1(ocr_ctx *ctx, const ocr_tensor *pred, const ocr_tensor *target, const ocr_tensor *mask,
                              float grad_scale, double *loss, ocr_tensor *d_pred);
/* The DB step B = sigmoid(k * (sigmoid(prob_logits) - thresh)) and its backward (accumulates; NULL skips). */
OCRDEF int ocr_loss_db_step_forward(ocr_ctx *ctx, float k, const ocr_tensor *prob_logits, const ocr_tensor *thresh,
                                    ocr_tensor *binary);
OCRDEF int ocr_loss_db_step_backward(ocr_ctx *ctx, float k, const ocr_tensor *prob_logits, const ocr_tensor *thresh,
                                     const ocr_tensor *d_binary, ocr_tensor *d_prob_logits, ocr_tensor *d_thresh);

#ifdef OCR_CUDA
/* CUDA entry points (ocr_cuda.cu): the functions above validate everything, then call these when ctx->device is
   OCR_DEVICE_CUDA. Same arguments and semantics; OHEM's selection runs on the device too. */
OCRDEF int ocr_cuda_loss_db(ocr_ctx *ctx, const ocr_db_loss_config *cfg, const ocr_tensor *prob_logits, const ocr_tensor *thresh,
                            const ocr_tensor *gt_shrink, const ocr_tensor *mask_shrink, const ocr_tensor *gt_thresh,
                            const ocr_tensor *mask_thresh, ocr_db_loss_terms *out, ocr_tensor *d_prob_logits, ocr_tensor *d_thresh);
OCRDEF int ocr_cuda_loss_bce(ocr_ctx *ctx, const ocr_loss_bce_config *cfg, const ocr_tensor *logits, const ocr_tensor *gt,
                             const ocr_tensor *mask, float grad_scale, double *loss, ocr_tensor *d_logits);
OCRDEF int ocr_cuda_loss_dice(ocr_ctx *ctx, float eps, const ocr_tensor *pred, const ocr_tensor *gt, const ocr_tensor *mask,
                              const ocr_tensor *weights, float grad_scale, double *loss, ocr_tensor *d_pred);
OCRDEF int ocr_cuda_loss_masked_l1(ocr_ctx *ctx, const ocr_tensor *pred, const ocr_tensor *target, const ocr_tensor *mask,
                                   float grad_scale, double *loss, ocr_tensor *d_pred);
OCRDEF int ocr_cuda_loss_db_step_forward(ocr_ctx *ctx, float k, const ocr_tensor *prob_logits, const ocr_tensor *thresh,
                                         ocr_tensor *binary);
OCRDEF int ocr_cuda_loss_db_step_backward(ocr_ctx *ctx, float k, const ocr_tensor *prob_logits, const ocr_tensor *thresh,
                                          const ocr_tensor *d_binary, ocr_tensor *d_prob_logits, ocr_tensor *d_thresh);
#endif

#ifdef __cplusplus
}
#endif
#endif /* OCR_LOSS_H */

/* ================================================================================================== */
#if defined(OCR_IMPLEMENTATION) && !defined(OCR_NO_IMPLEMENTATION) && !defined(OCR_LOSS_IMPLEMENTATION)
#define OCR_LOSS_IMPLEMENTATION
#endif
#if defined(OCR_LOSS_IMPLEMENTATION) && !defined(OCR__LOSS_IMPLEMENTED)
#define OCR__LOSS_IMPLEMENTED
#include <stdio.h>
#include <string.h>
#include <math.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Reductions run over fixed blocks of this many pixels, so the summation order never depends on threads. */
#define OCR__LOSS_BLOCK 4096
#define OCR__LOSS_MIN_BLOCKS 4
#define OCR__LOSS_Z_MAX 1e30f
#define OCR__RADIX_BINS 2048

/* ---------------------------------------------------------------- stable scalar pieces */

/* exp of a non-positive number only: no overflow for any input, and an infinite input gives 0 or 1 */
static float ocr__loss_sigmoid(float x) {
    float s = expf(-fabsf(x));
    return x >= 0.0f ? 1.0f / (1.0f + s) : s / (1.0f + s);
}

/* sigmoid'(x) = s / (1+s)^2 with s = exp(-|x|) in [0, 1] */
static float ocr__loss_dsigmoid(float x) {
    float s = expf(-fabsf(x)), d = 1.0f + s;
    return s / (d * d);
}

/* BCE of logit x against target y in [0, 1]; each branch is a product of non-negatives, so the result is +0 or
   more (never -0: the OHEM keys rely on it), and it stays exact where y is close to 1 (no x - x*y cancellation). */
static float ocr__loss_bce1(float x, float y) {
    float lin = x >= 0.0f ? x * (1.0f - y) : -x * y;
    return lin + log1pf(expf(-fabsf(x)));
}

/* d BCE / dx = sigmoid(x) - y, written as (1-y) sigmoid(x) - y sigmoid(-x): exact for hard targets even where
   sigmoid(x) rounds to 1 (the difference form loses every digit there). */
static float ocr__loss_dbce1(float x, float y) {
    float s = expf(-fabsf(x)), hi = 1.0f / (1.0f + s), lo = s / (1.0f + s);
    return x >= 0.0f ? (1.0f - y) * hi - y * lo : (1.0f - y) * lo - y * hi;
}

/* The official code casts gt*mask and (1-gt)*mask to uint8: only exact ones count. */
static int ocr__loss_class(float g, float m) {
    float pos = g * m, neg = (1.0f - g) * m;
    return pos >= 1.0f ? 1 : neg >= 1.0f ? -1 : 0;
}

/* z = k * (P - T) in double, clamped so that any loss of it fits a float. The clamp is flat (zero derivative);
   whether z sits on it is read from the float z alone, so a stored z answers the same as a recomputed one. */
static float ocr__loss_step_logit(float k, float P, float T) {
    double z = (double)k * ((double)P - (double)T);
    return (float)(z > OCR__LOSS_Z_MAX ? OCR__LOSS_Z_MAX : z < -OCR__LOSS_Z_MAX ? -OCR__LOSS_Z_MAX : z);
}
static int ocr__loss_step_inside(float z) { return fabsf(z) < OCR__LOSS_Z_MAX; }

/* OHEM keys: 0 for a pixel that is not negative, else the loss's bits + 1 (non-negative floats order as
   their bit patterns, so a radix selection on keys selects by loss). */
static uint32_t ocr__loss_key(float l) {
    uint32_t u;
    memcpy(&u, &l, sizeof u);
    return u + 1u;
}
static float ocr__loss_key_value(uint32_t key) {
    float l;
    key -= 1u;
    memcpy(&l, &key, sizeof l);
    return l;
}

static int64_t ocr__loss_blocks(int64_t n) { return (n + OCR__LOSS_BLOCK - 1) / OCR__LOSS_BLOCK; }
static void ocr__loss_block_range(int64_t b, int64_t n, int64_t *i0, int64_t *i1) {
    *i0 = b * OCR__LOSS_BLOCK;
    *i1 = *i0 + OCR__LOSS_BLOCK < n ? *i0 + OCR__LOSS_BLOCK : n;
}

/* ---------------------------------------------------------------- validation and scratch */

static int ocr__loss_cfg_value(ocr_ctx *ctx, const char *fn, const char *what, double v, double lo, double hi, int lo_open) {
    if (!(v <= hi) || !(lo_open ? v > lo : v >= lo))
        return ocr_error(ctx, OCR_EINVAL, "%s: %s = %g must be finite and in %s%g, %g]", fn, what, v, lo_open ? "(" : "[", lo, hi);
    return OCR_OK;
}

static int ocr__loss_check_bce_cfg(ocr_ctx *ctx, const char *fn, const ocr_loss_bce_config *c) {
    int rc;
    if (c->mode != OCR_LOSS_BCE_OHEM && c->mode != OCR_LOSS_BCE_BALANCED && c->mode != OCR_LOSS_BCE_POS_WEIGHT)
        return ocr_error(ctx, OCR_EINVAL, "%s: bce mode %d is not OCR_LOSS_BCE_OHEM, _BALANCED or _POS_WEIGHT", fn, c->mode);
    if ((rc = ocr__loss_cfg_value(ctx, fn, "bce.negative_ratio", c->negative_ratio, 0.0, 1e6, 0)) ||
        (rc = ocr__loss_cfg_value(ctx, fn, "bce.pos_weight", c->pos_weight, 0.0, 1e6, 0)) ||
        (rc = ocr__loss_cfg_value(ctx, fn, "bce.eps", c->eps, 0.0, 1.0, 0)))
        return rc;
    return OCR_OK;
}

/* "fn: argument NAME" as the prefix of every message about one argument */
static const char *ocr__loss_arg(char *buf, size_t cap, const char *fn, const char *arg) {
    snprintf(buf, cap, "%s: argument %s", fn, arg);
    return buf;
}

/* F32 on ctx's device with the shape of ref (or, for ref itself, [N,1,H,W]) */
static int ocr__loss_check_tensor(ocr_ctx *ctx, const char *fn, const char *arg, const ocr_tensor *t, const ocr_tensor *ref) {
    char who[160], d[200];
    int rc;
    ocr__loss_arg(who, sizeof who, fn, arg);
    if (!t) return ocr_error(ctx, OCR_EINVAL, "%s is NULL", who);
    if ((rc = ocr_check_f32(ctx, who, t))) return rc;
    if (!ref) {
        if (t->shape.ndim != 4 || t->shape.dim[1] != 1)
            return ocr_error(ctx, OCR_ESHAPE, "%s: tensor %s must be [N,1,H,W]", who, ocr_tensor_describe(t, d, sizeof d));
        return OCR_OK;
    }
    return ocr_check_shape(ctx, who, t, ref->shape);
}

/* Compared as integers: ordering pointers into different objects is undefined in C. */
static int ocr__loss_overlap(const ocr_tensor *a, const ocr_tensor *b) {
    uintptr_t a0, b0;
    if (!a || !b || !a->data || !b->data) return 0;
    a0 = (uintptr_t)a->data;
    b0 = (uintptr_t)b->data;
    return a0 < b0 + ocr_tensor_bytes(b) && b0 < a0 + ocr_tensor_bytes(a);
}

/* An output: checked like an input, and it must not share memory with any of others (every input and the other
   outputs), since the passes read inputs while they accumulate. */
static int ocr__loss_check_grad(ocr_ctx *ctx, const char *fn, const char *arg, const ocr_tensor *g, const ocr_tensor *ref,
                                const ocr_tensor *const *others, int n_others) {
    char who[160], d[200], e[200];
    int rc, i;
    if (!g) return OCR_OK;
    if ((rc = ocr__loss_check_tensor(ctx, fn, arg, g, ref))) return rc;
    for (i = 0; i < n_others; i++)
        if (ocr__loss_overlap(g, others[i]))
            return ocr_error(ctx, OCR_EINVAL, "%s: gradient tensor %s shares memory with tensor %s",
                             ocr__loss_arg(who, sizeof who, fn, arg), ocr_tensor_describe(g, d, sizeof d),
                             ocr_tensor_describe(others[i], e, sizeof e));
    return OCR_OK;
}

static int ocr__loss_check_values(ocr_ctx *ctx, const char *fn, const char *arg, const ocr_tensor *t, int unit_range) {
    char who[160];
    ocr__loss_arg(who, sizeof who, fn, arg);
    return unit_range ? ocr_check_range(ctx, who, t, 0.0, 1.0) : ocr_check_finite(ctx, who, t);
}

static int ocr__loss_cpu_only(ocr_ctx *ctx, const char *fn) {
#ifdef OCR_CUDA
    if (ctx->device == OCR_DEVICE_CUDA) return OCR_OK; /* dispatched to ocr_cuda.cu after validation */
#endif
    if (ctx->device != OCR_DEVICE_CPU)
        return ocr_error(ctx, OCR_EUNSUPPORTED, "%s: context device is %s; this build computes losses on the CPU only", fn,
                         ocr_device_name(ctx->device));
    return OCR_OK;
}

/* Scratch of one call, reserved before any output is written so that nothing can fail half way. */
typedef struct {
    float *z, *dz;       /* DB loss: logit of B and its gradient */
    uint32_t *keys;      /* OHEM keys */
    void *part;          /* per-block partial sums, or per-thread histograms */
} ocr__loss_scratch;

static int ocr__loss_reserve(ocr_ctx *ctx, const char *fn, int64_t n, int need_z, int need_keys, ocr__loss_scratch *s) {
    size_t part = (size_t)ocr__loss_blocks(n) * 4 * sizeof(double), hist = (size_t)ctx->n_threads * OCR__RADIX_BINS * sizeof(int64_t);
    size_t z_bytes, key_bytes;
    memset(s, 0, sizeof *s);
    if (!ocr_size_mul((size_t)n, 2 * sizeof(float), &z_bytes) || !ocr_size_mul((size_t)n, sizeof(uint32_t), &key_bytes))
        return ocr_error(ctx, OCR_EOVERFLOW, "%s: %lld pixels overflow the scratch size", fn, (long long)n);
    if (need_z) {
        if (!(s->z = (float *)ocr_ctx_scratch(ctx, OCR_SCRATCH_OP0, z_bytes))) return ctx->last_status;
        s->dz = s->z + n;
    }
    if (need_keys && !(s->keys = (uint32_t *)ocr_ctx_scratch(ctx, OCR_SCRATCH_OP1, key_bytes))) return ctx->last_status;
    if (!(s->part = ocr_ctx_scratch(ctx, OCR_SCRATCH_OP2, part > hist ? part : hist))) return ctx->last_status;
    return OCR_OK;
}

/* ---------------------------------------------------------------- BCE */

typedef struct { int64_t pos, neg; double pos_sum, neg_sum; } ocr__bce_acc;

typedef struct {
    const float *x, *gt, *mask;
    int64_t n;
    int ohem;
    uint32_t *keys;
    ocr__bce_acc *acc;
    /* second pass */
    float *grad;             /* NULL: value only */
    float g_pos, g_neg, g_tie; /* gradient weight of a positive, a (selected) negative, a negative tied at the cut */
    uint32_t cut;            /* OHEM: negatives with a larger key are selected, those equal share g_tie */
    double *sel;             /* OHEM: per-block sum of the selected losses above the cut */
} ocr__bce_job;

static void ocr__bce_stats_part(void *arg, int64_t begin, int64_t end, int tid) {
    const ocr__bce_job *j = (const ocr__bce_job *)arg;
    int64_t b, i, i0, i1;
    (void)tid;
    for (b = begin; b < end; b++) {
        ocr__bce_acc a;
        memset(&a, 0, sizeof a);
        ocr__loss_block_range(b, j->n, &i0, &i1);
        for (i = i0; i < i1; i++) {
            int c = ocr__loss_class(j->gt[i], j->mask[i]);
            float l = c ? ocr__loss_bce1(j->x[i], j->gt[i]) : 0.0f;
            if (c > 0) { a.pos++; a.pos_sum += l; }
            else if (c < 0) { a.neg++; a.neg_sum += l; }
            if (j->ohem) j->keys[i] = c < 0 ? ocr__loss_key(l) : 0u;
        }
        j->acc[b] = a;
    }
}

static void ocr__bce_apply_part(void *arg, int64_t begin, int64_t end, int tid) {
    const ocr__bce_job *j = (const ocr__bce_job *)arg;
    int64_t b, i, i0, i1;
    (void)tid;
    for (b = begin; b < end; b++) {
        double sel = 0.0;
        ocr__loss_block_range(b, j->n, &i0, &i1);
        for (i = i0; i < i1; i++) {
            float w;
            int c;
            if (j->ohem) {
                uint32_t key = j->keys[i];
                if (key > j->cut) sel += ocr__loss_key_value(key);
                if (!j->grad) continue;
                c = ocr__loss_class(j->gt[i], j->mask[i]);
                w = c > 0 ? j->g_pos : key > j->cut ? j->g_neg : key == j->cut ? j->g_tie : 0.0f;
            } else {
                c = ocr__loss_class(j->gt[i], j->mask[i]);
                w = c > 0 ? j->g_pos : c < 0 ? j->g_neg : 0.0f;
            }
            if (w != 0.0f) j->grad[i] += w * ocr__loss_dbce1(j->x[i], j->gt[i]);
        }
        if (j->sel) j->sel[b] = sel;
    }
}

typedef struct {
    const uint32_t *keys;
    int64_t *hist;
    uint32_t prefix, prefix_mask, digit_mask;
    int shift;
} ocr__radix_job;

static void ocr__radix_part(void *arg, int64_t begin, int64_t end, int tid) {
    const ocr__radix_job *j = (const ocr__radix_job *)arg;
    int64_t *h = j->hist + (int64_t)tid * OCR__RADIX_BINS, i;
    for (i = begin; i < end; i++) {
        uint32_t key = j->keys[i];
        if ((key & j->prefix_mask) == j->prefix) h[(key >> j->shift) & j->digit_mask]++;
    }
}

/* The k-th largest of n keys (1 <= k <= n) by three radix passes of 11, 11 and 10 bits: O(n) whatever the
   data, ties included, and the keys are never moved. *above gets how many keys are larger, *equal how many
   are equal. hist holds n_threads * OCR__RADIX_BINS counts. */
static uint32_t ocr__radix_select(ocr_ctx *ctx, const uint32_t *keys, int64_t n, int64_t k, int64_t *hist,
                                  int64_t *above, int64_t *equal) {
    static const int shifts[3] = {21, 10, 0}, widths[3] = {11, 11, 10};
    ocr__radix_job j;
    int64_t need = k, count = 0;
    int pass, t, b;
    j.keys = keys;
    j.hist = hist;
    j.prefix = j.prefix_mask = 0u;
    for (pass = 0; pass < 3; pass++) {
        j.shift = shifts[pass];
        j.digit_mask = (1u << widths[pass]) - 1u;
        memset(hist, 0, (size_t)ctx->n_threads * OCR__RADIX_BINS * sizeof(int64_t));
        ocr_parallel_for(ctx, n, 1 << 15, ocr__radix_part, &j);
        for (t = 1; t < ctx->n_threads; t++)
            for (b = 0; b <= (int)j.digit_mask; b++) hist[b] += hist[(int64_t)t * OCR__RADIX_BINS + b];
        /* walk down from the largest digit until the k-th key falls in the bin */
        for (b = (int)j.digit_mask; b > 0 && hist[b] < need; b--) need -= hist[b];
        count = hist[b];
        j.prefix |= (uint32_t)b << j.shift;
        j.prefix_mask |= j.digit_mask << j.shift;
    }
    *above = k - need;
    *equal = count;
    return j.prefix;
}

/* BCE over n pixels; adds grad_scale * d(loss)/dx to grad when it is not NULL. Scratch reserved by the caller. */
static double ocr__bce_run(ocr_ctx *ctx, const ocr_loss_bce_config *cfg, const float *x, const float *gt, const float *mask,
                           int64_t n, const ocr__loss_scratch *s, float grad_scale, float *grad) {
    ocr__bce_job j;
    int64_t nb = ocr__loss_blocks(n), b, pos = 0, neg = 0, kept = 0, above = 0, equal = 1;
    double pos_sum = 0.0, neg_sum = 0.0, w_pos, w_neg, w_tie, w[3], value;
    memset(&j, 0, sizeof j);
    j.x = x; j.gt = gt; j.mask = mask; j.n = n;
    j.ohem = cfg->mode == OCR_LOSS_BCE_OHEM;
    j.keys = s->keys;
    j.acc = (ocr__bce_acc *)s->part;
    ocr_parallel_for(ctx, nb, OCR__LOSS_MIN_BLOCKS, ocr__bce_stats_part, &j);
    for (b = 0; b < nb; b++) {
        pos += j.acc[b].pos; neg += j.acc[b].neg;
        pos_sum += j.acc[b].pos_sum; neg_sum += j.acc[b].neg_sum;
    }
    j.cut = 0xffffffffu; /* no negative is above it: nothing selected */
    if (cfg->mode == OCR_LOSS_BCE_OHEM) {
        double quota = floor((double)pos * (double)cfg->negative_ratio);
        kept = quota < (double)neg ? (int64_t)quota : neg;
        if (kept > 0) j.cut = ocr__radix_select(ctx, s->keys, n, kept, (int64_t *)s->part, &above, &equal);
    }
    ocr_loss_bce_weights(cfg, pos, neg, kept, above, equal, w);
    w_pos = w[0]; w_neg = w[1]; w_tie = w[2];
    value = w_pos * pos_sum;
    if (!j.ohem) value += w_neg * neg_sum;
    j.g_pos = (float)(w_pos * grad_scale);
    j.g_neg = (float)(w_neg * grad_scale);
    j.g_tie = (float)(w_tie * grad_scale);
    j.grad = grad;
    j.sel = j.ohem ? (double *)s->part : NULL;
    if (j.ohem || grad) ocr_parallel_for(ctx, nb, OCR__LOSS_MIN_BLOCKS, ocr__bce_apply_part, &j);
    if (j.ohem && kept > 0) {
        double sel = (double)(kept - above) * ocr__loss_key_value(j.cut);
        for (b = 0; b < nb; b++) sel += j.sel[b];
        value += w_neg * sel;
    }
    return value;
}

/* ---------------------------------------------------------------- Dice */

typedef struct {
    const float *pred, *gt, *mask, *w;
    int64_t n;
    int from_logits;   /* pred holds logits z and B = sigmoid(z); the gradient is then w.r.t. z */
    double *acc;       /* 3 per block: sum B*g*m*w, sum B*m*w, sum g*m*w */
    float *grad;
    float ga, gb;      /* d/dB_i = m_i w_i (ga * g_i + gb) */
} ocr__dice_job;

static void ocr__dice_stats_part(void *arg, int64_t begin, int64_t end, int tid) {
    const ocr__dice_job *j = (const ocr__dice_job *)arg;
    int64_t b, i, i0, i1;
    (void)tid;
    for (b = begin; b < end; b++) {
        double inter = 0.0, sp = 0.0, sg = 0.0;
        ocr__loss_block_range(b, j->n, &i0, &i1);
        for (i = i0; i < i1; i++) {
            float m = j->w ? j->mask[i] * j->w[i] : j->mask[i];
            float p = j->from_logits ? ocr__loss_sigmoid(j->pred[i]) : j->pred[i];
            inter += (double)p * j->gt[i] * m;
            sp += (double)p * m;
            sg += (double)j->gt[i] * m;
        }
        j->acc[3 * b] = inter;
        j->acc[3 * b + 1] = sp;
        j->acc[3 * b + 2] = sg;
    }
}

static void ocr__dice_grad_part(void *arg, int64_t begin, int64_t end, int tid) {
    const ocr__dice_job *j = (const ocr__dice_job *)arg;
    int64_t i;
    (void)tid;
    for (i = begin; i < end; i++) {
        float m = j->w ? j->mask[i] * j->w[i] : j->mask[i];
        float d = m * (j->ga * j->gt[i] + j->gb);
        if (j->from_logits) d *= ocr__loss_dsigmoid(j->pred[i]);
        j->grad[i] += d;
    }
}

static double ocr__dice_run(ocr_ctx *ctx, float eps, const float *pred, int from_logits, const float *gt, const float *mask,
                            const float *w, int64_t n, const ocr__loss_scratch *s, float grad_scale, float *grad) {
    ocr__dice_job j;
    int64_t nb = ocr__loss_blocks(n), b;
    double inter = 0.0, sp = 0.0, sg = 0.0, denom;
    memset(&j, 0, sizeof j);
    j.pred = pred; j.gt = gt; j.mask = mask; j.w = w; j.n = n; j.from_logits = from_logits;
    j.acc = (double *)s->part;
    ocr_parallel_for(ctx, nb, OCR__LOSS_MIN_BLOCKS, ocr__dice_stats_part, &j);
    for (b = 0; b < nb; b++) { inter += j.acc[3 * b]; sp += j.acc[3 * b + 1]; sg += j.acc[3 * b + 2]; }
    /* B, g, m, w >= 0, so denom >= eps > 0: never a division by ~0 */
    denom = sp + sg + (double)eps;
    if (grad) {
        /* L = 1 - 2I/D: dL/dB_i = m_i w_i (-2 g_i / D + 2 I / D^2) */
        j.ga = (float)(-2.0 / denom * grad_scale);
        j.gb = (float)(2.0 * inter / (denom * denom) * grad_scale);
        j.grad = grad;
        ocr_parallel_for(ctx, n, 1 << 14, ocr__dice_grad_part, &j);
    }
    return 1.0 - 2.0 * inter / denom;
}

/* ---------------------------------------------------------------- masked L1 */

typedef struct {
    const float *pred, *target, *mask;
    int64_t n;
    double *acc;   /* 2 per block: sum |pred - target| * mask, sum mask */
    float *grad;
    double g;      /* grad_scale / sum mask: may exceed a float when the mask is tiny, m_i * g never does */
} ocr__l1_job;

static void ocr__l1_stats_part(void *arg, int64_t begin, int64_t end, int tid) {
    const ocr__l1_job *j = (const ocr__l1_job *)arg;
    int64_t b, i, i0, i1;
    (void)tid;
    for (b = begin; b < end; b++) {
        double sa = 0.0, sm = 0.0;
        ocr__loss_block_range(b, j->n, &i0, &i1);
        for (i = i0; i < i1; i++) {
            sa += fabs((double)j->pred[i] - (double)j->target[i]) * j->mask[i];
            sm += j->mask[i];
        }
        j->acc[2 * b] = sa;
        j->acc[2 * b + 1] = sm;
    }
}

static void ocr__l1_grad_part(void *arg, int64_t begin, int64_t end, int tid) {
    const ocr__l1_job *j = (const ocr__l1_job *)arg;
    int64_t i;
    (void)tid;
    for (i = begin; i < end; i++) {
        float d = j->pred[i] - j->target[i];
        /* sign(0) = 0, as the subgradient torch.abs uses */
        if (d != 0.0f) j->grad[i] += (float)((d > 0.0f ? j->g : -j->g) * j->mask[i]);
    }
}

static double ocr__l1_run(ocr_ctx *ctx, const float *pred, const float *target, const float *mask, int64_t n,
                          const ocr__loss_scratch *s, float grad_scale, float *grad) {
    ocr__l1_job j;
    int64_t nb = ocr__loss_blocks(n), b;
    double sa = 0.0, sm = 0.0;
    memset(&j, 0, sizeof j);
    j.pred = pred; j.target = target; j.mask = mask; j.n = n;
    j.acc = (double *)s->part;
    ocr_parallel_for(ctx, nb, OCR__LOSS_MIN_BLOCKS, ocr__l1_stats_part, &j);
    for (b = 0; b < nb; b++) { sa += j.acc[2 * b]; sm += j.acc[2 * b + 1]; }
    if (sm == 0.0) return 0.0; /* empty mask: 0 and no gradient, as the official MaskL1Loss */
    if (grad) {
        j.g = grad_scale / sm;
        j.grad = grad;
        ocr_parallel_for(ctx, n, 1 << 14, ocr__l1_grad_part, &j);
    }
    return sa / sm;
}

/* ---------------------------------------------------------------- the DB step */

typedef struct {
    const float *x, *t, *d_in;  /* d_in: gradient w.r.t. z (from_binary 0) or w.r.t. B (from_binary 1) */
    float *z, *binary, *dx, *dt;
    float k;
    int from_binary;
} ocr__step_job;

static void ocr__step_fwd_part(void *arg, int64_t begin, int64_t end, int tid) {
    const ocr__step_job *j = (const ocr__step_job *)arg;
    int64_t i;
    (void)tid;
    for (i = begin; i < end; i++) {
        float z = ocr__loss_step_logit(j->k, ocr__loss_sigmoid(j->x[i]), j->t[i]);
        if (j->z) j->z[i] = z;
        if (j->binary) j->binary[i] = ocr__loss_sigmoid(z);
    }
}

/* With j->z (the DB loss) z comes from the forward pass; alone it is recomputed. One exp serves P and P'. */
static void ocr__step_bwd_part(void *arg, int64_t begin, int64_t end, int tid) {
    const ocr__step_job *j = (const ocr__step_job *)arg;
    int64_t i;
    (void)tid;
    for (i = begin; i < end; i++) {
        float x = j->x[i], s = expf(-fabsf(x)), d = 1.0f + s, dz = j->d_in[i], z;
        z = j->z ? j->z[i] : ocr__loss_step_logit(j->k, x >= 0.0f ? 1.0f / d : s / d, j->t[i]);
        if (j->from_binary) dz *= ocr__loss_dsigmoid(z);
        if (!ocr__loss_step_inside(z) || dz == 0.0f) continue;
        if (j->dx) j->dx[i] += dz * j->k * (s / (d * d));
        if (j->dt) j->dt[i] -= dz * j->k;
    }
}

static void ocr__step_run(ocr_ctx *ctx, int backward, ocr__step_job *j, int64_t n) {
    ocr_parallel_for(ctx, n, 1 << 14, backward ? ocr__step_bwd_part : ocr__step_fwd_part, j);
}

/* ---------------------------------------------------------------- public API */

OCRDEF void ocr_loss_bce_weights(const ocr_loss_bce_config *cfg, int64_t pos, int64_t neg, int64_t kept, int64_t above,
                                 int64_t equal, double w[3]) {
    w[0] = w[1] = w[2] = 0.0;
    if (cfg->mode == OCR_LOSS_BCE_OHEM) {
        if (pos + kept > 0) {
            w[0] = w[1] = 1.0 / ((double)(pos + kept) + cfg->eps);
            w[2] = equal > 0 ? w[1] * (double)(kept - above) / (double)equal : 0.0;
        }
    } else if (cfg->mode == OCR_LOSS_BCE_BALANCED) {
        if (pos > 0) w[0] = (neg > 0 ? 0.5 : 1.0) / (double)pos;
        if (neg > 0) w[1] = (pos > 0 ? 0.5 : 1.0) / (double)neg;
    } else {
        double denom = (double)cfg->pos_weight * (double)pos + (double)neg;
        if (denom > 0.0) {
            w[0] = (double)cfg->pos_weight / (denom + cfg->eps);
            w[1] = 1.0 / (denom + cfg->eps);
        }
    }
}

OCRDEF ocr_loss_bce_config ocr_loss_bce_defaults(void) {
    ocr_loss_bce_config c;
    memset(&c, 0, sizeof c);
    c.mode = OCR_LOSS_BCE_OHEM;
    c.negative_ratio = 3.0f;
    c.pos_weight = 1.0f;
    c.eps = 1e-6f;
    return c;
}

OCRDEF ocr_db_loss_config ocr_db_loss_defaults(void) {
    ocr_db_loss_config c;
    memset(&c, 0, sizeof c);
    c.bce_weight = 5.0f;
    c.dice_weight = 1.0f;
    c.l1_weight = 10.0f;
    c.binary_bce_weight = 0.0f;
    c.k = 50.0f;
    c.dice_eps = 1e-6f;
    c.grad_scale = 1.0f;
    c.bce = ocr_loss_bce_defaults();
    return c;
}

OCRDEF ocr_db_loss_config ocr_db_loss_paper(void) {
    ocr_db_loss_config c = ocr_db_loss_defaults();
    c.bce_weight = 1.0f;
    c.dice_weight = 0.0f;
    c.binary_bce_weight = 1.0f;
    return c;
}

static int ocr__loss_check_db_cfg(ocr_ctx *ctx, const char *fn, const ocr_db_loss_config *c) {
    int rc;
    if (!c) return ocr_error(ctx, OCR_EINVAL, "%s: cfg is NULL (start from ocr_db_loss_defaults())", fn);
    if ((rc = ocr__loss_cfg_value(ctx, fn, "cfg.bce_weight", c->bce_weight, 0.0, 1e4, 0)) ||
        (rc = ocr__loss_cfg_value(ctx, fn, "cfg.dice_weight", c->dice_weight, 0.0, 1e4, 0)) ||
        (rc = ocr__loss_cfg_value(ctx, fn, "cfg.l1_weight", c->l1_weight, 0.0, 1e4, 0)) ||
        (rc = ocr__loss_cfg_value(ctx, fn, "cfg.binary_bce_weight", c->binary_bce_weight, 0.0, 1e4, 0)) ||
        (rc = ocr__loss_cfg_value(ctx, fn, "cfg.prob_dice_weight", c->prob_dice_weight, 0.0, 1e4, 0)) ||
        (rc = ocr__loss_cfg_value(ctx, fn, "cfg.k", c->k, 0.0, 1e4, 1)) ||
        (rc = ocr__loss_cfg_value(ctx, fn, "cfg.dice_eps", c->dice_eps, (double)1e-8f, 1.0, 0)) ||
        (rc = ocr__loss_cfg_value(ctx, fn, "cfg.grad_scale", c->grad_scale, 0.0, 1e12, 0)))
        return rc;
    return ocr__loss_check_bce_cfg(ctx, fn, &c->bce);
}

OCRDEF int ocr_loss_db(ocr_ctx *ctx, const ocr_db_loss_config *cfg, const ocr_tensor *prob_logits, const ocr_tensor *thresh,
                       const ocr_tensor *gt_shrink, const ocr_tensor *mask_shrink, const ocr_tensor *gt_thresh,
                       const ocr_tensor *mask_thresh, ocr_db_loss_terms *out, ocr_tensor *d_prob_logits, ocr_tensor *d_thresh) {
    const char *fn = "ocr_loss_db";
    const ocr_tensor *all[7];
    ocr__loss_scratch s;
    ocr_db_loss_terms r;
    ocr__step_job sj;
    const float *x, *T, *gs, *ms, *gtt, *mt;
    float *dx, *dT;
    int64_t n;
    int rc, need_z, need_keys, grads = d_prob_logits || d_thresh;
    if ((rc = ocr__loss_check_db_cfg(ctx, fn, cfg)) ||
        (rc = ocr__loss_check_tensor(ctx, fn, "prob_logits", prob_logits, NULL)) ||
        (rc = ocr__loss_check_tensor(ctx, fn, "thresh", thresh, prob_logits)) ||
        (rc = ocr__loss_check_tensor(ctx, fn, "gt_shrink", gt_shrink, prob_logits)) ||
        (rc = ocr__loss_check_tensor(ctx, fn, "mask_shrink", mask_shrink, prob_logits)) ||
        (rc = ocr__loss_check_tensor(ctx, fn, "gt_thresh", gt_thresh, prob_logits)) ||
        (rc = ocr__loss_check_tensor(ctx, fn, "mask_thresh", mask_thresh, prob_logits)))
        return rc;
    all[0] = prob_logits; all[1] = thresh; all[2] = gt_shrink; all[3] = mask_shrink; all[4] = gt_thresh; all[5] = mask_thresh;
    all[6] = d_thresh;
    if ((rc = ocr__loss_check_grad(ctx, fn, "d_prob_logits", d_prob_logits, prob_logits, all, 7))) return rc;
    all[6] = d_prob_logits;
    if ((rc = ocr__loss_check_grad(ctx, fn, "d_thresh", d_thresh, prob_logits, all, 7)) ||
        (rc = ocr__loss_cpu_only(ctx, fn)) ||
        (rc = ocr__loss_check_values(ctx, fn, "prob_logits", prob_logits, 0)) ||
        (rc = ocr__loss_check_values(ctx, fn, "thresh", thresh, 0)) ||
        (rc = ocr__loss_check_values(ctx, fn, "gt_shrink", gt_shrink, 1)) ||
        (rc = ocr__loss_check_values(ctx, fn, "mask_shrink", mask_shrink, 1)) ||
        (rc = ocr__loss_check_values(ctx, fn, "gt_thresh", gt_thresh, 1)) ||
        (rc = ocr__loss_check_values(ctx, fn, "mask_thresh", mask_thresh, 1)))
        return rc;
#ifdef OCR_CUDA
    if (ctx->device == OCR_DEVICE_CUDA) return ocr_cuda_loss_db(ctx, cfg, prob_logits, thresh, gt_shrink, mask_shrink, gt_thresh, mask_thresh, out, d_prob_logits, d_thresh);
#endif
    n = ocr_tensor_numel(prob_logits);
    need_z = cfg->dice_weight > 0.0f || cfg->binary_bce_weight > 0.0f;
    need_keys = cfg->bce.mode == OCR_LOSS_BCE_OHEM && (cfg->bce_weight > 0.0f || cfg->binary_bce_weight > 0.0f);
    if ((rc = ocr__loss_reserve(ctx, fn, n, need_z, need_keys, &s))) return rc;

    x = (const float *)prob_logits->data; T = (const float *)thresh->data;
    gs = (const float *)gt_shrink->data; ms = (const float *)mask_shrink->data;
    gtt = (const float *)gt_thresh->data; mt = (const float *)mask_thresh->data;
    dx = d_prob_logits ? (float *)d_prob_logits->data : NULL;
    dT = d_thresh ? (float *)d_thresh->data : NULL;
    memset(&r, 0, sizeof r);
    memset(&sj, 0, sizeof sj);
    sj.x = x; sj.t = T; sj.k = cfg->k; sj.z = s.z; sj.d_in = s.dz; sj.dx = dx; sj.dt = dT;
    if (need_z) {
        ocr__step_run(ctx, 0, &sj, n);
        if (grads) memset(s.dz, 0, (size_t)n * sizeof(float));
    }
    if (cfg->bce_weight > 0.0f)
        r.bce = ocr__bce_run(ctx, &cfg->bce, x, gs, ms, n, &s, cfg->bce_weight * cfg->grad_scale, dx);
    if (cfg->dice_weight > 0.0f)
        r.dice = ocr__dice_run(ctx, cfg->dice_eps, s.z, 1, gs, ms, NULL, n, &s, cfg->dice_weight * cfg->grad_scale,
                               grads ? s.dz : NULL);
    if (cfg->binary_bce_weight > 0.0f)
        r.bce_binary = ocr__bce_run(ctx, &cfg->bce, s.z, gs, ms, n, &s, cfg->binary_bce_weight * cfg->grad_scale,
                                    grads ? s.dz : NULL);
    if (cfg->l1_weight > 0.0f) r.l1 = ocr__l1_run(ctx, T, gtt, mt, n, &s, cfg->l1_weight * cfg->grad_scale, dT);
    if (cfg->prob_dice_weight > 0.0f)
        r.dice_prob = ocr__dice_run(ctx, cfg->dice_eps, x, 1, gs, ms, NULL, n, &s, cfg->prob_dice_weight * cfg->grad_scale, dx);
    if (need_z && grads) ocr__step_run(ctx, 1, &sj, n);
    r.total = (double)cfg->bce_weight * r.bce + (double)cfg->dice_weight * r.dice + (double)cfg->l1_weight * r.l1 +
              (double)cfg->binary_bce_weight * r.bce_binary + (double)cfg->prob_dice_weight * r.dice_prob;
    if (out) *out = r;
    return OCR_OK;
}

OCRDEF int ocr_loss_bce(ocr_ctx *ctx, const ocr_loss_bce_config *cfg, const ocr_tensor *logits, const ocr_tensor *gt,
                        const ocr_tensor *mask, float grad_scale, double *loss, ocr_tensor *d_logits) {
    const char *fn = "ocr_loss_bce";
    const ocr_tensor *all[3];
    ocr_loss_bce_config defaults = ocr_loss_bce_defaults();
    ocr__loss_scratch s;
    double v;
    int rc;
    if (!cfg) cfg = &defaults;
    all[0] = logits; all[1] = gt; all[2] = mask;
    if ((rc = ocr__loss_check_bce_cfg(ctx, fn, cfg)) || (rc = ocr__loss_cfg_value(ctx, fn, "grad_scale", grad_scale, 0.0, 1e12, 0)) ||
        (rc = ocr__loss_check_tensor(ctx, fn, "logits", logits, NULL)) ||
        (rc = ocr__loss_check_tensor(ctx, fn, "gt", gt, logits)) ||
        (rc = ocr__loss_check_tensor(ctx, fn, "mask", mask, logits)) ||
        (rc = ocr__loss_check_grad(ctx, fn, "d_logits", d_logits, logits, all, 3)) || (rc = ocr__loss_cpu_only(ctx, fn)) ||
        (rc = ocr__loss_check_values(ctx, fn, "logits", logits, 0)) ||
        (rc = ocr__loss_check_values(ctx, fn, "gt", gt, 1)) ||
        (rc = ocr__loss_check_values(ctx, fn, "mask", mask, 1)) ||
        (rc = ocr__loss_reserve(ctx, fn, ocr_tensor_numel(logits), 0, cfg->mode == OCR_LOSS_BCE_OHEM, &s)))
        return rc;
#ifdef OCR_CUDA
    if (ctx->device == OCR_DEVICE_CUDA) return ocr_cuda_loss_bce(ctx, cfg, logits, gt, mask, grad_scale, loss, d_logits);
#endif
    v = ocr__bce_run(ctx, cfg, (const float *)logits->data, (const float *)gt->data, (const float *)mask->data,
                     ocr_tensor_numel(logits), &s, grad_scale, d_logits ? (float *)d_logits->data : NULL);
    if (loss) *loss = v;
    return OCR_OK;
}

OCRDEF int ocr_loss_dice(ocr_ctx *ctx, float eps, const ocr_tensor *pred, const ocr_tensor *gt, const ocr_tensor *mask,
                         const ocr_tensor *weights, float grad_scale, double *loss, ocr_tensor *d_pred) {
    const char *fn = "ocr_loss_dice";
    const ocr_tensor *all[4];
    ocr__loss_scratch s;
    double v;
    int rc;
    all[0] = pred; all[1] = gt; all[2] = mask; all[3] = weights;
    if ((rc = ocr__loss_cfg_value(ctx, fn, "eps", eps, (double)1e-8f, 1.0, 0)) ||
        (rc = ocr__loss_cfg_value(ctx, fn, "grad_scale", grad_scale, 0.0, 1e12, 0)) ||
        (rc = ocr__loss_check_tensor(ctx, fn, "pred", pred, NULL)) ||
        (rc = ocr__loss_check_tensor(ctx, fn, "gt", gt, pred)) ||
        (rc = ocr__loss_check_tensor(ctx, fn, "mask", mask, pred)) ||
        (weights && (rc = ocr__loss_check_tensor(ctx, fn, "weights", weights, pred))) ||
        (rc = ocr__loss_check_grad(ctx, fn, "d_pred", d_pred, pred, all, 4)) || (rc = ocr__loss_cpu_only(ctx, fn)) ||
        (rc = ocr__loss_check_values(ctx, fn, "pred", pred, 1)) ||
        (rc = ocr__loss_check_values(ctx, fn, "gt", gt, 1)) ||
        (rc = ocr__loss_check_values(ctx, fn, "mask", mask, 1)) ||
        (weights && (rc = ocr__loss_check_values(ctx, fn, "weights", weights, 1))) ||
        (rc = ocr__loss_reserve(ctx, fn, ocr_tensor_numel(pred), 0, 0, &s)))
        return rc;
#ifdef OCR_CUDA
    if (ctx->device == OCR_DEVICE_CUDA) return ocr_cuda_loss_dice(ctx, eps, pred, gt, mask, weights, grad_scale, loss, d_pred);
#endif
    v = ocr__dice_run(ctx, eps, (const float *)pred->data, 0, (const float *)gt->data, (const float *)mask->data,
                      weights ? (const float *)weights->data : NULL, ocr_tensor_numel(pred), &s, grad_scale,
                      d_pred ? (float *)d_pred->data : NULL);
    if (loss) *loss = v;
    return OCR_OK;
}

OCRDEF int ocr_loss_masked_l1(ocr_ctx *ctx, const ocr_tensor *pred, const ocr_tensor *target, const ocr_tensor *mask,
                              float grad_scale, double *loss, ocr_tensor *d_pred) {
    const char *fn = "ocr_loss_masked_l1";
    const ocr_tensor *all[3];
    ocr__loss_scratch s;
    double v;
    int rc;
    all[0] = pred; all[1] = target; all[2] = mask;
    if ((rc = ocr__loss_cfg_value(ctx, fn, "grad_scale", grad_scale, 0.0, 1e12, 0)) ||
        (rc = ocr__loss_check_tensor(ctx, fn, "pred", pred, NULL)) ||
        (rc = ocr__loss_check_tensor(ctx, fn, "target", target, pred)) ||
        (rc = ocr__loss_check_tensor(ctx, fn, "mask", mask, pred)) ||
        (rc = ocr__loss_check_grad(ctx, fn, "d_pred", d_pred, pred, all, 3)) || (rc = ocr__loss_cpu_only(ctx, fn)) ||
        (rc = ocr__loss_check_values(ctx, fn, "pred", pred, 0)) ||
        (rc = ocr__loss_check_values(ctx, fn, "target", target, 1)) ||
        (rc = ocr__loss_check_values(ctx, fn, "mask", mask, 1)) ||
        (rc = ocr__loss_reserve(ctx, fn, ocr_tensor_numel(pred), 0, 0, &s)))
        return rc;
#ifdef OCR_CUDA
    if (ctx->device == OCR_DEVICE_CUDA) return ocr_cuda_loss_masked_l1(ctx, pred, target, mask, grad_scale, loss, d_pred);
#endif
    v = ocr__l1_run(ctx, (const float *)pred->data, (const float *)target->data, (const float *)mask->data,
                    ocr_tensor_numel(pred), &s, grad_scale, d_pred ? (float *)d_pred->data : NULL);
    if (loss) *loss = v;
    return OCR_OK;
}

OCRDEF int ocr_loss_db_step_forward(ocr_ctx *ctx, float k, const ocr_tensor *prob_logits, const ocr_tensor *thresh,
                                    ocr_tensor *binary) {
    const char *fn = "ocr_loss_db_step_forward";
    const ocr_tensor *all[2];
    ocr__step_job j;
    int rc;
    all[0] = prob_logits; all[1] = thresh;
    if ((rc = ocr__loss_cfg_value(ctx, fn, "k", k, 0.0, 1e4, 1)) ||
        (rc = ocr__loss_check_tensor(ctx, fn, "prob_logits", prob_logits, NULL)) ||
        (rc = ocr__loss_check_tensor(ctx, fn, "thresh", thresh, prob_logits)) ||
        (rc = ocr__loss_check_tensor(ctx, fn, "binary", binary, prob_logits)) ||
        (rc = ocr__loss_check_grad(ctx, fn, "binary", binary, prob_logits, all, 2)) || (rc = ocr__loss_cpu_only(ctx, fn)) ||
        (rc = ocr__loss_check_values(ctx, fn, "prob_logits", prob_logits, 0)) ||
        (rc = ocr__loss_check_values(ctx, fn, "thresh", thresh, 0)))
        return rc;
#ifdef OCR_CUDA
    if (ctx->device == OCR_DEVICE_CUDA) return ocr_cuda_loss_db_step_forward(ctx, k, prob_logits, thresh, binary);
#endif
    memset(&j, 0, sizeof j);
    j.x = (const float *)prob_logits->data; j.t = (const float *)thresh->data; j.k = k; j.binary = (float *)binary->data;
    ocr__step_run(ctx, 0, &j, ocr_tensor_numel(prob_logits));
    return OCR_OK;
}

OCRDEF int ocr_loss_db_step_backward(ocr_ctx *ctx, float k, const ocr_tensor *prob_logits, const ocr_tensor *thresh,
                                     const ocr_tensor *d_binary, ocr_tensor *d_prob_logits, ocr_tensor *d_thresh) {
    const char *fn = "ocr_loss_db_step_backward";
    const ocr_tensor *all[4];
    ocr__step_job j;
    int rc;
    all[0] = prob_logits; all[1] = thresh; all[2] = d_binary; all[3] = d_thresh;
    if ((rc = ocr__loss_cfg_value(ctx, fn, "k", k, 0.0, 1e4, 1)) ||
        (rc = ocr__loss_check_tensor(ctx, fn, "prob_logits", prob_logits, NULL)) ||
        (rc = ocr__loss_check_tensor(ctx, fn, "thresh", thresh, prob_logits)) ||
        (rc = ocr__loss_check_tensor(ctx, fn, "d_binary", d_binary, prob_logits)) ||
        (rc = ocr__loss_check_grad(ctx, fn, "d_prob_logits", d_prob_logits, prob_logits, all, 4)))
        return rc;
    all[3] = d_prob_logits;
    if ((rc = ocr__loss_check_grad(ctx, fn, "d_thresh", d_thresh, prob_logits, all, 4)) || (rc = ocr__loss_cpu_only(ctx, fn)) ||
        (rc = ocr__loss_check_values(ctx, fn, "prob_logits", prob_logits, 0)) ||
        (rc = ocr__loss_check_values(ctx, fn, "thresh", thresh, 0)) ||
        (rc = ocr__loss_check_values(ctx, fn, "d_binary", d_binary, 0)))
        return rc;
#ifdef OCR_CUDA
    if (ctx->device == OCR_DEVICE_CUDA) return ocr_cuda_loss_db_step_backward(ctx, k, prob_logits, thresh, d_binary, d_prob_logits, d_thresh);
#endif
    memset(&j, 0, sizeof j);
    j.x = (const float *)prob_logits->data; j.t = (const float *)thresh->data; j.k = k; j.from_binary = 1;
    j.d_in = (const float *)d_binary->data;
    j.dx = d_prob_logits ? (float *)d_prob_logits->data : NULL;
    j.dt = d_thresh ? (float *)d_thresh->data : NULL;
    ocr__step_run(ctx, 1, &j, ocr_tensor_numel(prob_logits));
    return OCR_OK;
}

#ifdef __cplusplus
}
#endif
#endif /* OCR_LOSS_IMPLEMENTATION */

/*
MIT License. Copyright (c) 2026 the ocr-c authors.
Permission is hereby granted, free of charge, to any person obtaining a copy of this software and associated
documentation files (the "Software"), to deal in the Software without restriction, including without limitation the
rights to use, copy, modify, merge, publish, distribute, sublicense, and/or sell copies of the Software, and to permit
persons to whom the Software is furnished to do so, subject to the following conditions: The above copyright notice and
this permission notice shall be included in all copies or substantial portions of the Software.
THE SOFTWARE IS PROVIDED "AS IS", WITHOUT WARRANTY OF ANY KIND, EXPRESS OR IMPLIED.
*/
