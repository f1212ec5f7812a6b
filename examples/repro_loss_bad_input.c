/* repro_loss_bad_input - the DB loss fed the inputs that crash or poison Python training runs:
     a mask of another shape      the naive loop indexes the mask with the prediction's indices: reads past the
                                  end (on a GPU: "an illegal memory access was encountered", far from the cause)
     a target on another device   a pointer of the wrong address space dereferenced
     a NaN prediction             the loss is NaN and every gradient with it, steps later nobody knows why
     a non-binary target          a uint8 mask of 0/255 never divided by 255: the loss trains on garbage
     an unallocated mask          NULL data, read as if it were there
     an empty (all-zero) mask     a crop without text: a mean over no pixels is 0/0 = NaN
   ocr_loss_db checks every argument before touching memory and refuses each bad one with a message naming the
   argument, the tensor, its shape and device, or the first bad value and its index. It reads nothing out of bounds
   (the test runs this program under AddressSanitizer). An all-zero mask is valid input: the official code defines
   the loss there (0, no gradient), and so does ocr-c, where the naive mean gives NaN.
   With --device cuda (a CUDA build) the same cases run against the device loss: the inputs are uploaded, the values
   are checked by a kernel (same messages, same indices), and the target on another device is one left on the host
   while the prediction is on the GPU, refused with a message naming both devices.

       repro_loss_bad_input                       prints each case, what the naive code would do and ocr-c's message
       build/cuda/repro_loss_bad_input --device cuda

   Exit status: 0 when ocr-c refuses every bad input with a message that names it and handles the empty mask,
   1 otherwise (or no usable GPU), 2 bad flags (--device cuda in a build without CUDA). */
#define OCR_IMPLEMENTATION
#include "ocr_tensor.h"
#include "ocr_geom.h"   /* ocr_point, which ocr_example.h's drawing helpers take */
#include "ocr_loss.h"
#include "ocr_example.h"

enum { N = 1, H = 32, W = 32, HW = H * W };

typedef struct {
    float logits[HW], thresh[HW], gt_shrink[HW], mask_shrink[HW], gt_thresh[HW], mask_thresh[HW];
    float d_logits[HW], d_thresh[HW];
    float small_mask[(H / 2) * (W / 2)]; /* last: nothing of ours lies after it */
} buffers;

/* The six loss inputs as host views over b, every value valid: a square of text in the middle. */
static void make_inputs(buffers *b, ocr_tensor t[6]) {
    static const char *const names[6] = {"prob_logits", "thresh", "gt_shrink", "mask_shrink", "gt_thresh", "mask_thresh"};
    float *data[6];
    int i, j;
    data[0] = b->logits; data[1] = b->thresh; data[2] = b->gt_shrink; data[3] = b->mask_shrink; data[4] = b->gt_thresh;
    data[5] = b->mask_thresh;
    for (i = 0; i < H; i++)
        for (j = 0; j < W; j++) {
            int text = i >= 8 && i < 24 && j >= 8 && j < 24, p = i * W + j;
            b->logits[p] = text ? 2.0f : -2.0f;
            b->thresh[p] = 0.3f;
            b->gt_shrink[p] = (float)text;
            b->mask_shrink[p] = 1.0f;
            b->gt_thresh[p] = 0.5f;
            b->mask_thresh[p] = text ? 1.0f : 0.0f;
        }
    for (i = 0; i < 6; i++) t[i] = ocr_tensor_f32(names[i], ocr_shape4(N, 1, H, W), data[i]);
}

/* The loss's tensors where the context computes: on the CPU the host views over b themselves; on a device a copy of
   each input, except those in `keep`, which the case under test placed itself, and zeroed gradients there. The
   gradients are read back into b->d_logits and b->d_thresh. */
typedef struct { ocr_tensor in[6], dl, dt; } placed;

static int place(ocr_ctx *ctx, buffers *b, const ocr_tensor host[6], unsigned keep, placed *p) {
    int i, rc;
    memset(p, 0, sizeof *p);
    memset(b->d_logits, 0, sizeof b->d_logits);
    memset(b->d_thresh, 0, sizeof b->d_thresh);
    if (ctx->device == OCR_DEVICE_CPU) {
        for (i = 0; i < 6; i++) p->in[i] = host[i];
        p->dl = ocr_tensor_f32("d_prob_logits", ocr_shape4(N, 1, H, W), b->d_logits);
        p->dt = ocr_tensor_f32("d_thresh", ocr_shape4(N, 1, H, W), b->d_thresh);
        return OCR_OK;
    }
    for (i = 0; i < 6; i++) {
        if (keep & (1u << i)) { p->in[i] = host[i]; continue; }
        if ((rc = ocr_tensor_alloc(ctx, &p->in[i], host[i].name, OCR_F32, ctx->device, host[i].shape)) ||
            (rc = ocr_tensor_copy(ctx, &p->in[i], &host[i])))
            return rc;
    }
    if ((rc = ocr_tensor_alloc(ctx, &p->dl, "d_prob_logits", OCR_F32, ctx->device, ocr_shape4(N, 1, H, W)))) return rc;
    return ocr_tensor_alloc(ctx, &p->dt, "d_thresh", OCR_F32, ctx->device, ocr_shape4(N, 1, H, W));
}

static int gradients_to_host(ocr_ctx *ctx, buffers *b, placed *p) {
    ocr_tensor dl = ocr_tensor_f32("d_prob_logits", ocr_shape4(N, 1, H, W), b->d_logits);
    ocr_tensor dt = ocr_tensor_f32("d_thresh", ocr_shape4(N, 1, H, W), b->d_thresh);
    int rc;
    if (ctx->device == OCR_DEVICE_CPU) return OCR_OK;
    if ((rc = ocr_tensor_copy(ctx, &dl, &p->dl))) return rc;
    return ocr_tensor_copy(ctx, &dt, &p->dt);
}

static void unplace(placed *p) {
    int i;
    for (i = 0; i < 6; i++) ocr_tensor_free(&p->in[i]); /* the kept views own nothing */
    ocr_tensor_free(&p->dl);
    ocr_tensor_free(&p->dt);
}

/* The DB loss on t (host views, placed where ctx computes except `keep`); its gradients end up in b. Returns the
   loss's status; a failure to place the inputs or fetch the gradients is reported in *setup. */
static int run_loss(ocr_ctx *ctx, buffers *b, const ocr_tensor t[6], unsigned keep, ocr_db_loss_terms *terms, int *setup) {
    ocr_db_loss_config cfg = ocr_db_loss_defaults();
    placed p;
    int rc = OCR_OK;
    if ((*setup = place(ctx, b, t, keep, &p)) == OCR_OK) {
        rc = ocr_loss_db(ctx, &cfg, &p.in[0], &p.in[1], &p.in[2], &p.in[3], &p.in[4], &p.in[5], terms, &p.dl, &p.dt);
        *setup = gradients_to_host(ctx, b, &p); /* a copy that succeeds leaves the loss's message in place */
    }
    if (*setup) rc = *setup;
    unplace(&p);
    return rc;
}

/* One bad input: ocr-c must return `code` with a message holding `expect`; the gradients stay untouched. */
static int refused(ocr_ctx *ctx, buffers *b, const char *title, const char *naive, const ocr_tensor t[6], unsigned keep, int code,
                   const char *expect) {
    ocr_db_loss_terms terms;
    int rc, setup, i, untouched = 1;
    ocr_ctx_clear_error(ctx);
    rc = run_loss(ctx, b, t, keep, &terms, &setup);
    if (setup) {
        printf("%s\n  UNEXPECTED: could not set the case up: %s\n", title, ocr_ctx_last_error(ctx));
        return 1;
    }
    for (i = 0; i < HW; i++) untouched &= b->d_logits[i] == 0.0f && b->d_thresh[i] == 0.0f;
    printf("%s\n  naive: %s\n  ocr-c: %s (%s)\n", title, naive, ocr_ctx_last_error(ctx), ocr_status_name(rc));
    if (rc == code && strstr(ocr_ctx_last_error(ctx), expect) && untouched) return 0;
    printf("  UNEXPECTED: wanted %s with a message naming \"%s\"%s\n", ocr_status_name(code), expect,
           untouched ? "" : " and no gradient written");
    return 1;
}

int main(int argc, char **argv) {
    int threads = 1;
    const char *device = "cpu";
    ocr_ex_flag flags[] = {{"--threads", OCR_EX_INT, &threads, "threads of the loss (1..64)"},
                           {"--device", OCR_EX_STRING, &device, "where the loss runs: cpu, or cuda in a CUDA build"}};
    ocr_ctx ctx;
    buffers *b;
    ocr_tensor t[6];
    ocr_db_loss_terms terms;
    const char *here, *other;
    char title[160], expect[160];
    double naive_sum = 0.0, naive_count = 0.0;
    int bad = 0, rc, setup, i, finite;
    if (ocr_ex_parse(argc, argv, "[flags]", flags, 2) != 0 || threads < 1 || threads > 64) {
        fprintf(stderr, "%s: takes only --threads N (1..64) and --device\n", argv[0]);
        return 2;
    }
    if (ocr_ctx_init(&ctx, threads, 0) != OCR_OK) { fprintf(stderr, "%s\n", ocr_ctx_last_error(&ctx)); return 1; }
    if ((rc = ocr_ex_set_device(&ctx, argv[0], device)) != 0) {
        ocr_ctx_free(&ctx);
        return rc;
    }
    here = ocr_device_name(ctx.device);
    other = ocr_device_name(ctx.device == OCR_DEVICE_CPU ? OCR_DEVICE_CUDA : OCR_DEVICE_CPU);
    b = (buffers *)calloc(1, sizeof *b);
    if (!b) { fprintf(stderr, "%s: out of memory\n", argv[0]); ocr_ctx_free(&ctx); return 1; }

    make_inputs(b, t);
    memset(&terms, 0, sizeof terms);
    rc = run_loss(&ctx, b, t, 0, &terms, &setup);
    printf("valid inputs [%d,1,%d,%d] on %s: loss %.6f (bce %.6f dice %.6f l1 %.6f)\n\n", N, H, W, here, terms.total, terms.bce, terms.dice,
           terms.l1);
    if (rc) { printf("UNEXPECTED: the valid inputs were refused: %s\n", ocr_ctx_last_error(&ctx)); bad = 1; }

    /* the short mask ends the heap block of b (or is its own device allocation), so any read past it is a heap
       overflow that ASan reports */
    make_inputs(b, t);
    t[3] = ocr_tensor_f32("mask_shrink", ocr_shape4(N, 1, H / 2, W / 2), b->small_mask);
    bad |= refused(&ctx, b, "1. mask of another shape: mask_shrink [1,1,16,16] for predictions [1,1,32,32]",
                   "mask[i] for i < 1024 reads 768 floats past the 256 of the mask (on a GPU: an illegal memory access, reported "
                   "at some later call)", t, 0, OCR_ESHAPE, "mask_shrink");

    /* on the CPU a cuda tag on host memory: refused before anything reads it; on the device a target left on the host */
    make_inputs(b, t);
    if (ctx.device == OCR_DEVICE_CPU) t[2] = ocr_tensor_view("gt_shrink", OCR_F32, OCR_DEVICE_CUDA, ocr_shape4(N, 1, H, W), b->gt_shrink);
    snprintf(title, sizeof title, "2. target on another device: gt_shrink on %s, the context and the predictions on %s", other, here);
    snprintf(expect, sizeof expect, "tensor 'gt_shrink' (F32 [1,1,32,32], %s) is on %s, expected %s", other, other, here);
    bad |= refused(&ctx, b, title, "dereferences a device pointer on the host (segfault) or a host pointer in a kernel (illegal address)",
                   t, 1u << 2, OCR_EDEVICE, expect);

    make_inputs(b, t);
    b->logits[5 * W + 7] = NAN;
    bad |= refused(&ctx, b, "3. NaN prediction: prob_logits[0,0,5,7] = NaN",
                   "loss = nan, every gradient nan, the weights nan after the optimizer step", t, 0, OCR_ENONFINITE,
                   "index 167 [0,0,5,7]");

    make_inputs(b, t);
    for (i = 0; i < HW; i++) b->gt_shrink[i] *= 255.0f;
    bad |= refused(&ctx, b, "4. non-binary target: gt_shrink read from a PNG as 0/255 and never divided by 255",
                   "BCE against 255 is about -500 per text pixel: a loss without a minimum", t, 0, OCR_ERANGE, "outside [0, 1]");

    make_inputs(b, t);
    t[5] = ocr_tensor_view("mask_thresh", OCR_F32, ctx.device, ocr_shape4(N, 1, H, W), NULL);
    bad |= refused(&ctx, b, "5. unallocated mask: mask_thresh with no data (never allocated, or already freed)",
                   "reads through a NULL or dangling pointer", t, 1u << 5, OCR_EINVAL, "mask_thresh");

    /* 6. all-zero masks: the naive masked mean divides by zero; ocr-c (as the official code) defines the loss there */
    make_inputs(b, t);
    for (i = 0; i < HW; i++) {
        b->mask_shrink[i] = 0.0f;
        b->mask_thresh[i] = 0.0f;
        naive_sum += fabs(b->thresh[i] - b->gt_thresh[i]) * b->mask_thresh[i];
        naive_count += b->mask_thresh[i];
    }
    ocr_ctx_clear_error(&ctx);
    rc = run_loss(&ctx, b, t, 0, &terms, &setup);
    for (finite = 1, i = 0; i < HW; i++) finite &= isfinite(b->d_logits[i]) && isfinite(b->d_thresh[i]);
    printf("6. empty masks: mask_shrink and mask_thresh all zero (a crop with no text)\n  naive: L1 = sum / mask.sum() = %g / %g = %g\n",
           naive_sum, naive_count, fabs(naive_sum / naive_count)); /* fabs: print "nan", not "-nan" */
    if (rc == OCR_OK && finite && isfinite(terms.total))
        printf("  ocr-c: defined as the official code: loss %.6f (bce %g, l1 %g), every gradient finite\n", terms.total, terms.bce, terms.l1);
    else {
        printf("  UNEXPECTED: %s\n", rc ? ocr_ctx_last_error(&ctx) : "a non-finite loss or gradient");
        bad = 1;
    }
    free(b);
    ocr_ctx_free(&ctx);
    printf("\n%s on %s\n", bad ? "FAIL: ocr-c did not refuse every bad input as described"
                               : "OK: every bad input refused before any memory was read, with its message", here);
    return bad;
}
