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

       repro_loss_bad_input          prints each case, what the naive code would do and ocr-c's message

   Exit status: 0 when ocr-c refuses every bad input with a message that names it and handles the empty mask,
   1 otherwise, 2 bad flags. */
#define OCR_IMPLEMENTATION
#include "ocr_tensor.h"
#include "ocr_loss.h"
#include "ocr_example.h"

enum { N = 1, H = 32, W = 32, HW = H * W };

typedef struct {
    float logits[HW], thresh[HW], gt_shrink[HW], mask_shrink[HW], gt_thresh[HW], mask_thresh[HW];
    float d_logits[HW], d_thresh[HW];
    float small_mask[(H / 2) * (W / 2)]; /* last: nothing of ours lies after it */
} buffers;

/* The six loss inputs as views over b, every value valid: a square of text in the middle. */
static void make_inputs(buffers *b, ocr_tensor t[6], ocr_tensor *dl, ocr_tensor *dt) {
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
    *dl = ocr_tensor_f32("d_prob_logits", ocr_shape4(N, 1, H, W), b->d_logits);
    *dt = ocr_tensor_f32("d_thresh", ocr_shape4(N, 1, H, W), b->d_thresh);
}

static int run_loss(ocr_ctx *ctx, ocr_tensor t[6], ocr_tensor *dl, ocr_tensor *dt, ocr_db_loss_terms *terms) {
    ocr_db_loss_config cfg = ocr_db_loss_defaults();
    memset(dl->data, 0, sizeof(float) * HW);
    memset(dt->data, 0, sizeof(float) * HW);
    return ocr_loss_db(ctx, &cfg, &t[0], &t[1], &t[2], &t[3], &t[4], &t[5], terms, dl, dt);
}

/* One bad input: ocr-c must return `code` with a message holding `expect`; the gradients stay untouched. */
static int refused(ocr_ctx *ctx, const char *title, const char *naive, ocr_tensor t[6], ocr_tensor *dl, ocr_tensor *dt, int code,
                   const char *expect) {
    ocr_db_loss_terms terms;
    int rc, i, untouched = 1;
    ocr_ctx_clear_error(ctx);
    rc = run_loss(ctx, t, dl, dt, &terms);
    for (i = 0; i < HW; i++) untouched &= ((float *)dl->data)[i] == 0.0f && ((float *)dt->data)[i] == 0.0f;
    printf("%s\n  naive: %s\n  ocr-c: %s (%s)\n", title, naive, ocr_ctx_last_error(ctx), ocr_status_name(rc));
    if (rc == code && strstr(ocr_ctx_last_error(ctx), expect) && untouched) return 0;
    printf("  UNEXPECTED: wanted %s with a message naming \"%s\"%s\n", ocr_status_name(code), expect,
           untouched ? "" : " and no gradient written");
    return 1;
}

int main(int argc, char **argv) {
    int threads = 1;
    ocr_ex_flag flags[] = {{"--threads", OCR_EX_INT, &threads, "threads of the loss (1..64)"}};
    ocr_ctx ctx;
    buffers *b;
    ocr_tensor t[6], dl, dt;
    ocr_db_loss_terms terms;
    double naive_sum = 0.0, naive_count = 0.0;
    int bad = 0, rc, i, finite;
    if (ocr_ex_parse(argc, argv, "[flags]", flags, 1) != 0 || threads < 1 || threads > 64) {
        fprintf(stderr, "%s: takes only --threads N (1..64)\n", argv[0]);
        return 2;
    }
    if (ocr_ctx_init(&ctx, threads, 0) != OCR_OK) { fprintf(stderr, "%s\n", ocr_ctx_last_error(&ctx)); return 1; }
    b = (buffers *)calloc(1, sizeof *b);
    if (!b) { fprintf(stderr, "%s: out of memory\n", argv[0]); return 1; }

    make_inputs(b, t, &dl, &dt);
    rc = run_loss(&ctx, t, &dl, &dt, &terms);
    printf("valid inputs [%d,1,%d,%d]: loss %.6f (bce %.6f dice %.6f l1 %.6f)\n\n", N, H, W, terms.total, terms.bce, terms.dice, terms.l1);
    if (rc) { printf("UNEXPECTED: the valid inputs were refused: %s\n", ocr_ctx_last_error(&ctx)); bad = 1; }

    /* the short mask ends the heap block of b, so any read past it is a heap overflow that ASan reports */
    t[3] = ocr_tensor_f32("mask_shrink", ocr_shape4(N, 1, H / 2, W / 2), b->small_mask);
    bad |= refused(&ctx, "1. mask of another shape: mask_shrink [1,1,16,16] for predictions [1,1,32,32]",
                   "mask[i] for i < 1024 reads 768 floats past the 256 of the mask", t, &dl, &dt, OCR_ESHAPE, "mask_shrink");

    make_inputs(b, t, &dl, &dt);
    t[2] = ocr_tensor_view("gt_shrink", OCR_F32, OCR_DEVICE_CUDA, ocr_shape4(N, 1, H, W), b->gt_shrink);
    bad |= refused(&ctx, "2. target on another device: gt_shrink on cuda, the context and the predictions on the cpu",
                   "dereferences a device pointer on the host (segfault) or a host pointer in a kernel (illegal address)", t, &dl,
                   &dt, OCR_EDEVICE, "gt_shrink");

    make_inputs(b, t, &dl, &dt);
    b->logits[5 * W + 7] = NAN;
    bad |= refused(&ctx, "3. NaN prediction: prob_logits[0,0,5,7] = NaN",
                   "loss = nan, every gradient nan, the weights nan after the optimizer step", t, &dl, &dt, OCR_ENONFINITE,
                   "index 167 [0,0,5,7]");

    make_inputs(b, t, &dl, &dt);
    for (i = 0; i < HW; i++) b->gt_shrink[i] *= 255.0f;
    bad |= refused(&ctx, "4. non-binary target: gt_shrink read from a PNG as 0/255 and never divided by 255",
                   "BCE against 255 is about -500 per text pixel: a loss without a minimum", t, &dl, &dt, OCR_ERANGE,
                   "outside [0, 1]");

    make_inputs(b, t, &dl, &dt);
    t[5].data = NULL;
    bad |= refused(&ctx, "5. unallocated mask: mask_thresh with no data (never allocated, or already freed)",
                   "reads through a NULL or dangling pointer", t, &dl, &dt, OCR_EINVAL, "mask_thresh");

    /* 6. all-zero masks: the naive masked mean divides by zero; ocr-c (as the official code) defines the loss there */
    make_inputs(b, t, &dl, &dt);
    for (i = 0; i < HW; i++) {
        b->mask_shrink[i] = 0.0f;
        b->mask_thresh[i] = 0.0f;
        naive_sum += fabs(b->thresh[i] - b->gt_thresh[i]) * b->mask_thresh[i];
        naive_count += b->mask_thresh[i];
    }
    ocr_ctx_clear_error(&ctx);
    rc = run_loss(&ctx, t, &dl, &dt, &terms);
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
    printf("\n%s\n", bad ? "FAIL: ocr-c did not refuse every bad input as described"
                         : "OK: every bad input refused before any memory was read, with its message");
    return bad;
}
