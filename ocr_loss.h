/* ocr_loss.h - numerically stable DBNet losses with their gradients; the CTC loss and decoders.  v0.1  MIT license

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

   CTC (the section "CTC" below): ocr_loss_ctc on log-probabilities [T, N, C] with concatenated targets, in log space
   with the impossible-target policy the caller chooses (CPU or CUDA); ocr_ctc_greedy_decode and ocr_ctc_beam_decode
   (on the host).

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

/* ---- CTC: the loss of a recognizer's per-frame class scores against an unaligned label sequence ----
   torch.nn.functional.ctc_loss's semantics. log_probs F32 [T, N, C]: log-probabilities (a log_softmax over C) of
   T frames, N samples, C classes, blank among them (cfg.blank, 0 by default). targets I32 [S]: every sample's labels
   concatenated (each in [0, C) and not blank), target_lengths and input_lengths I32 [N] (input_lengths[n] <= T frames
   of sample n count; later frames get no gradient); S = sum of target_lengths. The integer tensors live on the host.
   Per sample, nll = -log sum over the alignments that collapse to the target (repeats merged, blanks dropped) of
   the product of their frames' probabilities, computed by the forward-backward recursion in log space, in double:
   no underflow for long inputs (hundreds of frames) or outputs dominated by blank, and exact for repeated labels
   (two equal neighbours need a blank between them, so a target of length L with R equal neighbours needs at least
   L + R frames). A target that cannot fit its input length is, as the caller chooses (cfg.skip_impossible), an
   error naming the sample and the lengths, or a sample with 0 loss and 0 gradient counted in out->skipped (torch's
   zero_infinity, counted; the mean still divides by N, as torch's). Never NaN or Inf: log_probs must be finite, and
   the loss of a fitting target is then finite.
   Reduction OCR_CTC_MEAN: each sample's nll divided by its target length (at least 1), then the mean over the batch
   (torch's 'mean'); OCR_CTC_SUM: the sum of the nll.
   Gradient, added to d_log_probs (NULL skips it), times grad_scale: torch's, exp(log_probs) - posterior, where
   posterior[t, c] is the probability that frame t emits c given the target. It is the gradient w.r.t. the logits
   when log_probs = log_softmax(logits), and ocr_nn_log_softmax_backward maps it to itself (its rows sum to 0), so
   chaining that backward is right and optional; it is not the partial derivative w.r.t. log_probs as free
   variables (that is -posterior). On a CUDA context log_probs, sample_loss and d_log_probs are device tensors (the
   integer tensors stay on the host); the recursion runs there in double, the same operations in the same order. */
typedef enum { OCR_CTC_MEAN = 0, OCR_CTC_SUM = 1 } ocr_ctc_reduction;
typedef struct {
    int blank;            /* 0..C-1, default 0 */
    int reduction;        /* ocr_ctc_reduction, default OCR_CTC_MEAN */
    int skip_impossible;  /* 0 (default): an impossible target is an error naming the sample; 1: skipped and counted */
    float grad_scale;     /* multiplies the gradient (a loss scale, say); 0..1e12, default 1 */
} ocr_ctc_config;
typedef struct {
    double loss;            /* the reduced loss */
    int64_t skipped;        /* samples skipped as impossible (cfg.skip_impossible) */
    int64_t first_skipped;  /* the first of them, -1 when none */
} ocr_ctc_result;
OCRDEF ocr_ctc_config ocr_ctc_defaults(void);
/* out and sample_loss (F32 [N] on ctx's device: each sample's nll before the reduction, 0 when skipped) may be NULL */
OCRDEF int ocr_loss_ctc(ocr_ctx *ctx, const ocr_ctc_config *cfg, const ocr_tensor *log_probs, const ocr_tensor *targets,
                        const ocr_tensor *target_lengths, const ocr_tensor *input_lengths, ocr_ctc_result *out,
                        ocr_tensor *sample_loss, ocr_tensor *d_log_probs);

/* ---- CTC decoding: log_probs F32 [T, N, C] as above (on the host), input_lengths I32 [N] or NULL (all T frames) ----
   Greedy (best path): each frame's most probable class (the lowest index on ties), repeats collapsed, blanks dropped.
   labels I32 [N, T]: sample n's labels in labels[n, 0 .. lengths[n]), the rest -1; lengths I32 [N]; scores F32 [N]
   or NULL: the sum of the chosen frames' log-probabilities (the best path's log-probability). */
OCRDEF int ocr_ctc_greedy_decode(ocr_ctx *ctx, const ocr_tensor *log_probs, const ocr_tensor *input_lengths, int blank,
                                 ocr_tensor *labels, ocr_tensor *lengths, ocr_tensor *scores);
/* Prefix beam search: keeps the beam_width most probable label prefixes, each prefix's probability summed over all
   its alignments (ending in blank or not), so that a label sequence spread over many paths beats a single best path.
   Each frame extends the prefixes by its beam_width most probable non-blank classes (and always by the class that
   leads to another kept prefix); with beam_width >= C - 1 no class is left out. labels I32 [N, K, T], lengths I32
   [N, K], scores F32 [N, K] (may be NULL), K <= beam_width: the K best hypotheses, best first, each with its log-
   probability log P(labels | frames); a hypothesis that does not exist (fewer than K prefixes) gets length -1 and
   score -inf. Ties go to the hypothesis found first. */
OCRDEF int ocr_ctc_beam_decode(ocr_ctx *ctx, const ocr_tensor *log_probs, const ocr_tensor *input_lengths, int blank, int beam_width,
                               ocr_tensor *labels, ocr_tensor *lengths, ocr_tensor *scores);

#ifdef OCR_CUDA
/* CUDA entry points (ocr_cuda.cu): the functions above validate everything, then call these when ctx->device is
   OCR_DEVICE_CUDA. Same arguments and semantics; OHEM's selection runs on the device too. */
OCRDEF int ocr_cuda_loss_db(ocr_ctx *ctx, const ocr_db_loss_config *cfg, const ocr_tensor *prob_logits, const ocr_tensor *thresh,
                            const ocr_tensor *gt_shrink, const ocr_tensor *mask_shrink, const ocr_tensor *gt_thresh,
                            const ocr_tensor *mask_thresh, ocr_db_loss_terms *out, ocr_tensor *d_prob_logits, ocr_tensor *d_thresh);
/* CTC on the device: ocr_loss_ctc checks the arguments and keeps the reduction; the integer arrays are its host
   copies (targets, target and input lengths, each sample's first label and first table double), nll [N] on the host.
   The tables stay in device scratch for ocr_cuda_ctc_gradient, which must follow with the same log_probs. */
OCRDEF int ocr_cuda_ctc_tables(ocr_ctx *ctx, const ocr_tensor *log_probs, const int32_t *targets, int64_t n_targets,
                               const int32_t *target_lengths, const int32_t *input_lengths, const int64_t *offsets, int64_t table_doubles,
                               int blank, double *nll);
OCRDEF int ocr_cuda_ctc_gradient(ocr_ctx *ctx, const ocr_tensor *log_probs, int blank, const double *weight, ocr_tensor *d_log_probs);
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

/* ---------------------------------------------------------------- CTC */

OCRDEF ocr_ctc_config ocr_ctc_defaults(void) {
    ocr_ctc_config c;
    c.blank = 0; c.reduction = OCR_CTC_MEAN; c.skip_impossible = 0; c.grad_scale = 1.0f;
    return c;
}

/* log(exp(a) + exp(b)) without overflow; -inf stands for probability 0 */
static double ocr__ctc_lse(double a, double b) {
    double m;
    if (a == -HUGE_VAL) return b;
    if (b == -HUGE_VAL) return a;
    m = a > b ? a : b;
    return m + log1p(exp(-fabs(a - b)));
}

/* Label s of the target extended with blanks: blank, l1, blank, l2, ..., blank (2L + 1 states) */
static int ocr__ctc_label(const int32_t *tgt, int s, int blank) { return s & 1 ? tgt[s / 2] : blank; }

/* Frames a target needs: one per label plus one blank between each pair of equal neighbours */
static int64_t ocr__ctc_min_frames(const int32_t *tgt, int64_t L) {
    int64_t i, need = L;
    for (i = 1; i < L; i++) need += tgt[i] == tgt[i - 1];
    return need;
}

typedef struct {
    const float *lp;                /* [T, N, C] */
    const int32_t *targets, *tlen, *ilen;
    const int64_t *tgt_off, *ab_off;/* per sample: first label in targets, first alpha/beta double in ab */
    int64_t T, N, C;
    int blank;
    double *ab;                     /* alpha then beta of each sample, [Tn, 2L+1] each */
    double *nll;                    /* [N]; HUGE_VAL when no alignment exists */
    double *post;                   /* per thread [C]: the current frame's posteriors */
    float *grad;                    /* d_log_probs or NULL */
    const double *weight;           /* [N]: grad_scale times the reduction's factor, 0 for skipped samples (second pass) */
} ocr__ctc_job;

/* Pass 1, samples [begin, end): alpha, beta and nll */
static void ocr__ctc_fwd_part(void *arg, int64_t begin, int64_t end, int tid) {
    const ocr__ctc_job *j = (const ocr__ctc_job *)arg;
    int64_t n;
    (void)tid;
    for (n = begin; n < end; n++) {
        const int32_t *tgt = j->targets + j->tgt_off[n];
        int64_t Tn = j->ilen[n], L = j->tlen[n], S = 2 * L + 1, t, s;
        double *alpha = j->ab + j->ab_off[n], *beta = alpha + Tn * S, logz;
        if (Tn == 0) { j->nll[n] = L == 0 ? 0.0 : HUGE_VAL; continue; }
        if (ocr__ctc_min_frames(tgt, L) > Tn) { j->nll[n] = HUGE_VAL; continue; }
#define OCR__CTC_LP(t, c) ((double)j->lp[((t) * j->N + n) * j->C + (c)])
        for (s = 0; s < S; s++) alpha[s] = s < 2 ? OCR__CTC_LP(0, ocr__ctc_label(tgt, (int)s, j->blank)) : -HUGE_VAL;
        for (t = 1; t < Tn; t++)
            for (s = 0; s < S; s++) {
                int l = ocr__ctc_label(tgt, (int)s, j->blank);
                const double *prev = alpha + (t - 1) * S;
                double a = prev[s];
                if (s >= 1) a = ocr__ctc_lse(a, prev[s - 1]);
                if (s >= 2 && l != j->blank && l != tgt[s / 2 - 1]) a = ocr__ctc_lse(a, prev[s - 2]);
                alpha[t * S + s] = a == -HUGE_VAL ? a : a + OCR__CTC_LP(t, l);
            }
        /* beta[t][s]: log-probability of the frames after t given state s at t (frame t's own emission excluded) */
        for (s = 0; s < S; s++) beta[(Tn - 1) * S + s] = s >= S - 2 ? 0.0 : -HUGE_VAL;
        for (t = Tn - 2; t >= 0; t--)
            for (s = 0; s < S; s++) {
                int l = ocr__ctc_label(tgt, (int)s, j->blank), k;
                double b = -HUGE_VAL;
                for (k = 0; k < 3 && s + k < S; k++) {
                    int lk = ocr__ctc_label(tgt, (int)(s + k), j->blank);
                    double nb = beta[(t + 1) * S + s + k];
                    if (k == 2 && (lk == j->blank || lk == l)) continue;
                    if (nb != -HUGE_VAL) b = ocr__ctc_lse(b, nb + OCR__CTC_LP(t + 1, lk));
                }
                beta[t * S + s] = b;
            }
        logz = alpha[(Tn - 1) * S + S - 1];
        if (S >= 2) logz = ocr__ctc_lse(logz, alpha[(Tn - 1) * S + S - 2]);
        j->nll[n] = isfinite(logz) ? -logz : HUGE_VAL;
    }
}

/* Pass 2, samples [begin, end): grad[t, n, c] += weight * (exp(lp) - posterior(t, c)) for t < input length */
static void ocr__ctc_grad_part(void *arg, int64_t begin, int64_t end, int tid) {
    const ocr__ctc_job *j = (const ocr__ctc_job *)arg;
    double *post = j->post + (int64_t)tid * j->C;
    int64_t n, t, s, c;
    for (n = begin; n < end; n++) {
        const int32_t *tgt = j->targets + j->tgt_off[n];
        int64_t Tn = j->ilen[n], S = 2 * (int64_t)j->tlen[n] + 1;
        const double *alpha = j->ab + j->ab_off[n], *beta = alpha + Tn * S;
        double w = j->weight[n], nll = j->nll[n];
        if (w == 0.0) continue;
        for (t = 0; t < Tn; t++) {
            float *g = j->grad + (t * j->N + n) * j->C;
            for (s = 0; s < S; s++) {
                double v = alpha[t * S + s] + beta[t * S + s];
                if (v != -HUGE_VAL) post[ocr__ctc_label(tgt, (int)s, j->blank)] += exp(v + nll);
            }
            for (c = 0; c < j->C; c++) {
                g[c] += (float)(w * (exp(OCR__CTC_LP(t, c)) - post[c]));
                post[c] = 0.0;
            }
        }
    }
#undef OCR__CTC_LP
}

/* An I32 host tensor of the given shape */
static int ocr__ctc_check_i32(ocr_ctx *ctx, const char *fn, const char *arg, const ocr_tensor *t, ocr_shape shape) {
    char who[160];
    int rc;
    ocr__loss_arg(who, sizeof who, fn, arg);
    if (!t) return ocr_error(ctx, OCR_EINVAL, "%s is NULL", who);
    if ((rc = ocr_check_dtype(ctx, who, t, OCR_I32)) || (rc = ocr_check_device(ctx, who, t, OCR_DEVICE_CPU))) return rc;
    return ocr_check_shape(ctx, who, t, shape);
}

/* log_probs F32 [T, N, C] on ctx's device with finite values */
static int ocr__ctc_check_log_probs(ocr_ctx *ctx, const char *fn, const ocr_tensor *lp) {
    char who[160], d[200];
    int rc;
    ocr__loss_arg(who, sizeof who, fn, "log_probs");
    if (!lp) return ocr_error(ctx, OCR_EINVAL, "%s is NULL", who);
    if ((rc = ocr_check_f32(ctx, who, lp))) return rc;
    if (lp->shape.ndim != 3 || lp->shape.dim[0] < 1 || lp->shape.dim[1] < 1 || lp->shape.dim[2] < 1)
        return ocr_error(ctx, OCR_ESHAPE, "%s: tensor %s must be [T, N, C] (frames, samples, classes), each >= 1", who,
                         ocr_tensor_describe(lp, d, sizeof d));
    if ((rc = ocr__loss_cpu_only(ctx, fn))) return rc;
    return ocr_check_finite(ctx, who, lp);
}

/* input_lengths I32 [N] in [0, T], or NULL */
static int ocr__ctc_check_input_lengths(ocr_ctx *ctx, const char *fn, const ocr_tensor *il, int64_t T, int64_t N) {
    int64_t n;
    int rc;
    if (!il) return OCR_OK;
    if ((rc = ocr__ctc_check_i32(ctx, fn, "input_lengths", il, ocr_shape1(N)))) return rc;
    for (n = 0; n < N; n++) {
        int32_t v = ((const int32_t *)il->data)[n];
        if (v < 0 || v > T)
            return ocr_error(ctx, OCR_ERANGE, "%s: input_lengths[%lld] = %d outside [0, %lld] (T, the frames of log_probs)", fn,
                             (long long)n, (int)v, (long long)T);
    }
    return OCR_OK;
}

OCRDEF int ocr_loss_ctc(ocr_ctx *ctx, const ocr_ctc_config *cfg, const ocr_tensor *log_probs, const ocr_tensor *targets,
                        const ocr_tensor *target_lengths, const ocr_tensor *input_lengths, ocr_ctc_result *out,
                        ocr_tensor *sample_loss, ocr_tensor *d_log_probs) {
    const char *fn = "ocr_loss_ctc";
    ocr_ctc_config defaults = ocr_ctc_defaults();
    ocr_ctc_result r;
    ocr__ctc_job j;
    const int32_t *tl, *il, *tg;
    int64_t T, N, C, n, total = 0, ab_total = 0, i;
    size_t bytes;
    double *nll, *weight, sum = 0.0;
    float *losses;
    int64_t *off, host_tables;
    int rc;
    if (!cfg) cfg = &defaults;
    if ((rc = ocr__ctc_check_log_probs(ctx, fn, log_probs))) return rc;
    T = log_probs->shape.dim[0]; N = log_probs->shape.dim[1]; C = log_probs->shape.dim[2];
    if (cfg->blank < 0 || cfg->blank >= C)
        return ocr_error(ctx, OCR_EINVAL, "%s: cfg.blank = %d outside the %lld classes of log_probs", fn, cfg->blank, (long long)C);
    if (cfg->reduction != OCR_CTC_MEAN && cfg->reduction != OCR_CTC_SUM)
        return ocr_error(ctx, OCR_EINVAL, "%s: cfg.reduction = %d is not OCR_CTC_MEAN or OCR_CTC_SUM", fn, cfg->reduction);
    if ((rc = ocr__loss_cfg_value(ctx, fn, "cfg.grad_scale", cfg->grad_scale, 0.0, 1e12, 0))) return rc;
    if ((rc = ocr__ctc_check_i32(ctx, fn, "target_lengths", target_lengths, ocr_shape1(N)))) return rc;
    if (!input_lengths) return ocr_error(ctx, OCR_EINVAL, "%s: argument input_lengths is NULL", fn);
    if ((rc = ocr__ctc_check_input_lengths(ctx, fn, input_lengths, T, N))) return rc;
    tl = (const int32_t *)target_lengths->data; il = (const int32_t *)input_lengths->data;
    for (n = 0; n < N; n++) {
        if (tl[n] < 0) return ocr_error(ctx, OCR_ERANGE, "%s: target_lengths[%lld] = %d is negative", fn, (long long)n, (int)tl[n]);
        total += tl[n];
    }
    if ((rc = ocr__ctc_check_i32(ctx, fn, "targets", targets, ocr_shape1(total)))) {
        char d[200];
        if (targets && targets->shape.ndim == 1 && targets->shape.dim[0] != total)
            return ocr_error(ctx, OCR_ESHAPE, "%s: targets %s holds %lld labels but target_lengths add up to %lld (targets are "
                             "the samples' labels concatenated)", fn, ocr_tensor_describe(targets, d, sizeof d),
                             (long long)targets->shape.dim[0], (long long)total);
        return rc;
    }
    tg = (const int32_t *)targets->data;
    for (n = 0, i = 0; n < N; n++) {
        int64_t k;
        for (k = 0; k < tl[n]; k++, i++)
            if (tg[i] < 0 || tg[i] >= C || tg[i] == cfg->blank)
                return ocr_error(ctx, OCR_ERANGE, "%s: sample %lld: label %lld (targets[%lld]) = %d is %s", fn, (long long)n,
                                 (long long)k, (long long)i, (int)tg[i],
                                 tg[i] == cfg->blank ? "the blank" : "outside the classes of log_probs");
        if (!cfg->skip_impossible && ocr__ctc_min_frames(tg + i - tl[n], tl[n]) > il[n])
            return ocr_error(ctx, OCR_ERANGE, "%s: sample %lld: its target of %d labels (%lld of them equal to the previous one, "
                             "each needing a blank between) needs %lld frames, its input length is %d (set cfg.skip_impossible to "
                             "skip such samples)", fn, (long long)n, (int)tl[n],
                             (long long)(ocr__ctc_min_frames(tg + i - tl[n], tl[n]) - tl[n]),
                             (long long)ocr__ctc_min_frames(tg + i - tl[n], tl[n]), (int)il[n]);
    }
    if (sample_loss) {
        char who[160], d[200];
        ocr__loss_arg(who, sizeof who, fn, "sample_loss");
        if ((rc = ocr_check_f32(ctx, who, sample_loss)) || (rc = ocr_check_shape(ctx, who, sample_loss, ocr_shape1(N)))) return rc;
        if (ocr__loss_overlap(sample_loss, log_probs))
            return ocr_error(ctx, OCR_EINVAL, "%s: tensor %s shares memory with log_probs", who, ocr_tensor_describe(sample_loss, d, sizeof d));
    }
    if (d_log_probs) {
        const ocr_tensor *others[2];
        others[0] = log_probs; others[1] = sample_loss;
        if ((rc = ocr__loss_check_grad(ctx, fn, "d_log_probs", d_log_probs, log_probs, others, 2))) return rc;
    }

    /* host scratch, all reserved before anything is written: per-sample offsets, nll and weights (and the sample
       losses as floats), on the CPU also alpha/beta and the posteriors (on CUDA those live on the device) */
    for (n = 0; n < N; n++) ab_total += 2 * (int64_t)il[n] * (2 * (int64_t)tl[n] + 1);
    host_tables = ctx->device == OCR_DEVICE_CPU ? ab_total + ctx->n_threads * C : 0;
    if (!ocr_size_mul((size_t)host_tables + (size_t)(N * 3), sizeof(double), &bytes))
        return ocr_error(ctx, OCR_EOVERFLOW, "%s: the recursion's tables overflow the scratch size", fn);
    if (!(nll = (double *)ocr_ctx_scratch(ctx, OCR_SCRATCH_OP0, bytes)) ||
        !(off = (int64_t *)ocr_ctx_scratch(ctx, OCR_SCRATCH_OP1, (size_t)(2 * N) * sizeof(int64_t))))
        return ctx->last_status;
    weight = nll + N;
    losses = (float *)(weight + N);
    j.ab = weight + 2 * N;
    j.post = host_tables ? j.ab + ab_total : j.ab;
    for (n = 0, total = 0, ab_total = 0; n < N; n++) {
        off[n] = total; off[N + n] = ab_total;
        total += tl[n];
        ab_total += 2 * (int64_t)il[n] * (2 * (int64_t)tl[n] + 1);
    }
    j.lp = (const float *)log_probs->data; j.targets = tg; j.tlen = tl; j.ilen = il; j.tgt_off = off; j.ab_off = off + N;
    j.T = T; j.N = N; j.C = C; j.blank = cfg->blank; j.nll = nll; j.weight = weight;
    j.grad = d_log_probs ? (float *)d_log_probs->data : NULL;
#ifdef OCR_CUDA
    if (ctx->device == OCR_DEVICE_CUDA) {
        if ((rc = ocr_cuda_ctc_tables(ctx, log_probs, tg, total, tl, il, off, ab_total, cfg->blank, nll))) return rc;
    } else
#endif
        ocr_parallel_for(ctx, N, 1, ocr__ctc_fwd_part, &j);

    r.skipped = 0; r.first_skipped = -1;
    for (n = 0; n < N; n++) {
        double factor = cfg->reduction == OCR_CTC_MEAN ? 1.0 / ((double)(tl[n] > 1 ? tl[n] : 1) * (double)N) : 1.0;
        if (nll[n] == HUGE_VAL) {
            /* only reachable with skip_impossible: the fit was checked above otherwise */
            if (!cfg->skip_impossible)
                return ocr_error(ctx, OCR_ERANGE, "%s: sample %lld has no alignment of its target to its %d frames", fn,
                                 (long long)n, (int)il[n]);
            if (r.first_skipped < 0) r.first_skipped = n;
            r.skipped++;
            nll[n] = 0.0; weight[n] = 0.0;
            continue;
        }
        sum += factor * nll[n];
        weight[n] = factor * cfg->grad_scale;
    }
    r.loss = sum;
    if (sample_loss) {
        ocr_tensor host = ocr_tensor_view("sample_loss (host)", OCR_F32, OCR_DEVICE_CPU, ocr_shape1(N), losses);
        for (n = 0; n < N; n++) losses[n] = (float)nll[n];
        if ((rc = ocr_tensor_copy(ctx, sample_loss, &host))) return rc;
    }
#ifdef OCR_CUDA
    if (d_log_probs && ctx->device == OCR_DEVICE_CUDA) {
        if ((rc = ocr_cuda_ctc_gradient(ctx, log_probs, cfg->blank, weight, d_log_probs))) return rc;
    } else
#endif
    if (d_log_probs) {
        memset(j.post, 0, (size_t)ctx->n_threads * (size_t)C * sizeof(double));
        ocr_parallel_for(ctx, N, 1, ocr__ctc_grad_part, &j);
    }
    if (out) *out = r;
    return OCR_OK;
}

/* log_probs on the host, the optional input_lengths, the blank */
static int ocr__ctc_check_decode(ocr_ctx *ctx, const char *fn, const ocr_tensor *log_probs, const ocr_tensor *input_lengths, int blank) {
    int rc;
    char who[160], d[200];
    ocr__loss_arg(who, sizeof who, fn, "log_probs");
    if (!log_probs) return ocr_error(ctx, OCR_EINVAL, "%s is NULL", who);
    if ((rc = ocr_check_dtype(ctx, who, log_probs, OCR_F32)) || (rc = ocr_check_device(ctx, who, log_probs, OCR_DEVICE_CPU))) return rc;
    if (log_probs->shape.ndim != 3 || log_probs->shape.dim[0] < 1 || log_probs->shape.dim[1] < 1 || log_probs->shape.dim[2] < 1)
        return ocr_error(ctx, OCR_ESHAPE, "%s: tensor %s must be [T, N, C] (frames, samples, classes), each >= 1", who,
                         ocr_tensor_describe(log_probs, d, sizeof d));
    if (blank < 0 || blank >= log_probs->shape.dim[2])
        return ocr_error(ctx, OCR_EINVAL, "%s: blank = %d outside the %lld classes of log_probs", fn, blank,
                         (long long)log_probs->shape.dim[2]);
    if ((rc = ocr_check_finite(ctx, who, log_probs))) return rc;
    return ocr__ctc_check_input_lengths(ctx, fn, input_lengths, log_probs->shape.dim[0], log_probs->shape.dim[1]);
}

/* An output on the host: dtype and shape */
static int ocr__ctc_check_out(ocr_ctx *ctx, const char *fn, const char *arg, const ocr_tensor *t, ocr_dtype dt, ocr_shape s) {
    char who[160];
    int rc;
    ocr__loss_arg(who, sizeof who, fn, arg);
    if (!t) return ocr_error(ctx, OCR_EINVAL, "%s is NULL", who);
    if ((rc = ocr_check_dtype(ctx, who, t, dt)) || (rc = ocr_check_device(ctx, who, t, OCR_DEVICE_CPU))) return rc;
    return ocr_check_shape(ctx, who, t, s);
}

OCRDEF int ocr_ctc_greedy_decode(ocr_ctx *ctx, const ocr_tensor *log_probs, const ocr_tensor *input_lengths, int blank,
                                 ocr_tensor *labels, ocr_tensor *lengths, ocr_tensor *scores) {
    const char *fn = "ocr_ctc_greedy_decode";
    int64_t T, N, C, n, t, c;
    int rc;
    if ((rc = ocr__ctc_check_decode(ctx, fn, log_probs, input_lengths, blank))) return rc;
    T = log_probs->shape.dim[0]; N = log_probs->shape.dim[1]; C = log_probs->shape.dim[2];
    if ((rc = ocr__ctc_check_out(ctx, fn, "labels", labels, OCR_I32, ocr_shape2(N, T))) ||
        (rc = ocr__ctc_check_out(ctx, fn, "lengths", lengths, OCR_I32, ocr_shape1(N))) ||
        (scores && (rc = ocr__ctc_check_out(ctx, fn, "scores", scores, OCR_F32, ocr_shape1(N)))))
        return rc;
    for (n = 0; n < N; n++) {
        const float *lp = (const float *)log_probs->data;
        int32_t *out = (int32_t *)labels->data + n * T;
        int64_t Tn = input_lengths ? ((const int32_t *)input_lengths->data)[n] : T, len = 0;
        int prev = blank;
        double score = 0.0;
        for (t = 0; t < Tn; t++) {
            const float *row = lp + (t * N + n) * C;
            int best = 0;
            for (c = 1; c < C; c++) if (row[c] > row[best]) best = (int)c;
            score += row[best];
            if (best != blank && best != prev) out[len++] = best;
            prev = best;
        }
        for (t = len; t < T; t++) out[t] = -1;
        ((int32_t *)lengths->data)[n] = (int32_t)len;
        if (scores) ((float *)scores->data)[n] = (float)score;
    }
    return OCR_OK;
}

/* Prefix beam search of one sample at a time on each thread, in buffers reserved by the caller. */
typedef struct {
    int32_t *prefix;   /* [B, T] */
    int32_t *len, *parent;  /* [B]: prefix length; the kept beam equal to this one without its last label, or -1 */
    double *pb, *pnb;  /* [B]: log-probability of the prefix's alignments ending in blank / in its last label */
} ocr__beam_set;
typedef struct { int src, ext, order; double pb, pnb, total; } ocr__beam_cand;
typedef struct {
    const float *lp;
    const int32_t *ilen;
    int64_t T, N, C;
    int blank, B, E, K;
    unsigned char *mem;        /* per thread: per_thread bytes */
    size_t per_thread;
    int32_t *labels, *lengths; /* outputs [N, K, T], [N, K] */
    float *scores;             /* [N, K] or NULL */
} ocr__beam_job;

/* best first; among equal totals the candidate made first */
static int ocr__beam_cmp(const void *a, const void *b) {
    const ocr__beam_cand *x = (const ocr__beam_cand *)a, *y = (const ocr__beam_cand *)b;
    if (x->total != y->total) return x->total > y->total ? -1 : 1;
    return x->order < y->order ? -1 : x->order > y->order;
}

static void ocr__beam_part(void *arg, int64_t begin, int64_t end, int tid) {
    const ocr__beam_job *j = (const ocr__beam_job *)arg;
    const int B = j->B, E = j->E;
    const int64_t T = j->T;
    unsigned char *m = j->mem + (size_t)tid * j->per_thread;
    ocr__beam_set set[2];
    ocr__beam_cand *cand;
    int *top, k, i, q;
    int64_t n, t;
    /* carve this thread's buffers: two beam sets, candidates, the frame's top classes */
    for (k = 0; k < 2; k++) {
        set[k].pb = (double *)m; m += sizeof(double) * (size_t)B;
        set[k].pnb = (double *)m; m += sizeof(double) * (size_t)B;
        set[k].len = (int32_t *)m; m += sizeof(int32_t) * (size_t)B;
        set[k].parent = (int32_t *)m; m += sizeof(int32_t) * (size_t)B;
        set[k].prefix = (int32_t *)m; m += sizeof(int32_t) * (size_t)B * (size_t)T;
        m += (8 - ((uintptr_t)m & 7)) & 7;
    }
    cand = (ocr__beam_cand *)m; m += sizeof(ocr__beam_cand) * (size_t)B * (size_t)(E + 1);
    top = (int *)m;
    for (n = begin; n < end; n++) {
        int64_t Tn = j->ilen ? j->ilen[n] : T;
        ocr__beam_set *cur = &set[0], *nxt = &set[1], *sw;
        int count = 1;
        cur->len[0] = 0; cur->parent[0] = -1; cur->pb[0] = 0.0; cur->pnb[0] = -HUGE_VAL;
        for (t = 0; t < Tn; t++) {
            const float *lp = j->lp + (t * j->N + n) * j->C;
            int nc = 0, e = 0;
            /* the frame's E most probable non-blank classes, best first, the lower index on ties */
            for (k = 0; k < (int)j->C; k++) {
                if (k == j->blank) continue;
                if (e < E || lp[k] > lp[top[e - 1]]) {
                    int at = e < E ? e++ : e - 1;
                    while (at > 0 && lp[k] > lp[top[at - 1]]) { top[at] = top[at - 1]; at--; }
                    top[at] = k;
                }
            }
            /* each kept prefix again: a blank, or its last label repeated (merged) */
            for (i = 0; i < count; i++) {
                ocr__beam_cand *cd = &cand[nc++];
                cd->src = i; cd->ext = -1;
                cd->pb = ocr__ctc_lse(cur->pb[i], cur->pnb[i]) + lp[j->blank];
                cd->pnb = cur->len[i] ? cur->pnb[i] + lp[cur->prefix[i * T + cur->len[i] - 1]] : -HUGE_VAL;
            }
            /* a prefix that extends another kept one by c also collects that one's extension by c */
            for (i = 0; i < count; i++) {
                int p = cur->parent[i], c;
                if (p < 0) continue;
                c = cur->prefix[i * T + cur->len[i] - 1];
                cand[i].pnb = ocr__ctc_lse(cand[i].pnb, (cur->len[p] && cur->prefix[p * T + cur->len[p] - 1] == c ? cur->pb[p]
                                                         : ocr__ctc_lse(cur->pb[p], cur->pnb[p])) + lp[c]);
            }
            /* new prefixes: each kept one extended by the frame's top classes */
            for (i = 0; i < count; i++)
                for (k = 0; k < e; k++) {
                    int c = top[k], last = cur->len[i] ? cur->prefix[i * T + cur->len[i] - 1] : -1, other = 0;
                    ocr__beam_cand *cd;
                    for (q = 0; q < count && !other; q++)
                        other = cur->parent[q] == i && cur->prefix[q * T + cur->len[q] - 1] == c;
                    if (other) continue;
                    cd = &cand[nc++];
                    cd->src = i; cd->ext = c; cd->pb = -HUGE_VAL;
                    cd->pnb = (c == last ? cur->pb[i] : ocr__ctc_lse(cur->pb[i], cur->pnb[i])) + lp[c];
                }
            for (i = 0; i < nc; i++) { cand[i].total = ocr__ctc_lse(cand[i].pb, cand[i].pnb); cand[i].order = i; }
            qsort(cand, (size_t)nc, sizeof *cand, ocr__beam_cmp);
            /* the best B become the next frame's prefixes */
            for (i = 0; i < nc && i < B && cand[i].total != -HUGE_VAL; i++) {
                const ocr__beam_cand *cd = &cand[i];
                int32_t L = cur->len[cd->src];
                memcpy(nxt->prefix + (int64_t)i * T, cur->prefix + (int64_t)cd->src * T, sizeof(int32_t) * (size_t)L);
                if (cd->ext >= 0) nxt->prefix[(int64_t)i * T + L++] = cd->ext;
                nxt->len[i] = L; nxt->pb[i] = cd->pb; nxt->pnb[i] = cd->pnb;
            }
            count = i;
            for (i = 0; i < count; i++) {
                nxt->parent[i] = -1;
                for (q = 0; q < count && nxt->parent[i] < 0; q++)
                    if (nxt->len[q] == nxt->len[i] - 1 &&
                        !memcmp(nxt->prefix + (int64_t)q * T, nxt->prefix + (int64_t)i * T, sizeof(int32_t) * (size_t)nxt->len[q]))
                        nxt->parent[i] = q;
            }
            sw = cur; cur = nxt; nxt = sw;
        }
        for (k = 0; k < j->K; k++) {
            int32_t *out = j->labels + (n * j->K + k) * T;
            int64_t x, L = k < count ? cur->len[k] : 0;
            for (x = 0; x < T; x++) out[x] = x < L ? cur->prefix[(int64_t)k * T + x] : -1;
            j->lengths[n * j->K + k] = k < count ? cur->len[k] : -1;
            if (j->scores) j->scores[n * j->K + k] = k < count ? (float)ocr__ctc_lse(cur->pb[k], cur->pnb[k]) : -HUGE_VALF;
        }
    }
}

OCRDEF int ocr_ctc_beam_decode(ocr_ctx *ctx, const ocr_tensor *log_probs, const ocr_tensor *input_lengths, int blank, int beam_width,
                               ocr_tensor *labels, ocr_tensor *lengths, ocr_tensor *scores) {
    const char *fn = "ocr_ctc_beam_decode";
    ocr__beam_job j;
    size_t set_bytes, bytes;
    int64_t K;
    int rc;
    if ((rc = ocr__ctc_check_decode(ctx, fn, log_probs, input_lengths, blank))) return rc;
    if (beam_width < 1 || beam_width > 4096)
        return ocr_error(ctx, OCR_EINVAL, "%s: beam_width = %d outside [1, 4096]", fn, beam_width);
    j.T = log_probs->shape.dim[0]; j.N = log_probs->shape.dim[1]; j.C = log_probs->shape.dim[2];
    if (!labels || labels->shape.ndim != 3 || labels->shape.dim[1] < 1 || labels->shape.dim[1] > beam_width) {
        char d[200];
        if (!labels) return ocr_error(ctx, OCR_EINVAL, "%s: argument labels is NULL", fn);
        return ocr_error(ctx, OCR_ESHAPE, "%s: argument labels: tensor %s must be [N, K, T] with 1 <= K <= beam_width %d", fn,
                         ocr_tensor_describe(labels, d, sizeof d), beam_width);
    }
    K = labels->shape.dim[1];
    if ((rc = ocr__ctc_check_out(ctx, fn, "labels", labels, OCR_I32, ocr_shape3(j.N, K, j.T))) ||
        (rc = ocr__ctc_check_out(ctx, fn, "lengths", lengths, OCR_I32, ocr_shape2(j.N, K))) ||
        (scores && (rc = ocr__ctc_check_out(ctx, fn, "scores", scores, OCR_F32, ocr_shape2(j.N, K)))))
        return rc;
    j.B = beam_width;
    j.E = (int)(j.C - 1 < beam_width ? j.C - 1 : beam_width);
    j.K = (int)K;
    j.blank = blank;
    j.lp = (const float *)log_probs->data;
    j.ilen = input_lengths ? (const int32_t *)input_lengths->data : NULL;
    j.labels = (int32_t *)labels->data; j.lengths = (int32_t *)lengths->data;
    j.scores = scores ? (float *)scores->data : NULL;
    /* the layout ocr__beam_part carves, rounded up generously */
    if (!ocr_size_mul((size_t)j.B, (size_t)j.T * sizeof(int32_t) + 2 * sizeof(double) + 2 * sizeof(int32_t), &set_bytes) ||
        !ocr_size_mul((size_t)j.B * (size_t)(j.E + 1), sizeof(ocr__beam_cand), &bytes) ||
        !ocr_size_add(bytes, 2 * (set_bytes + 8) + (size_t)(j.E + 1) * sizeof(int) + 64, &j.per_thread) ||
        !ocr_size_mul(j.per_thread, (size_t)ctx->n_threads, &bytes))
        return ocr_error(ctx, OCR_EOVERFLOW, "%s: beam_width %d over %lld frames overflows the scratch size", fn, beam_width,
                         (long long)j.T);
    j.per_thread = (j.per_thread + 63) & ~(size_t)63;
    if (!(j.mem = (unsigned char *)ocr_ctx_scratch(ctx, OCR_SCRATCH_OP0, j.per_thread * (size_t)ctx->n_threads))) return ctx->last_status;
    ocr_parallel_for(ctx, j.N, 1, ocr__beam_part, &j);
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
