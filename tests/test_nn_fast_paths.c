/* The fast paths of ocr_nn against the library's own reference loops (the same public calls with OCR_DEBUG_REFERENCE set;
   tests/test_nn_parity.c holds that reference to PyTorch). Every lowering of its convolutions: the implicit (padded-image, phase-split)
   path for rows at least 32 wide at stride 1 and 2 with padding and dilation, the data gradient computed as a
   flipped-kernel convolution, the weight gradient from dot products (implicit and from im2col) and from the packed
   GEMM, the packed im2col path, 1x1 convolutions, groups, output-channel counts that leave partial 8-row panels and
   widths that leave partial 48-pixel blocks, Winograd F(4x4, 3x3) forward, data and weight gradients (gathered and row-loaded
   tiles, partial tiles, pads 0-2, several K blocks, one work item per image, the phases spread over the threads or
   the weight gradient's items in groups)
   and the shapes it is chosen for (and not), the shared-panels route and Winograd's bands of one image on two threads
   against one (bit for bit);
   each on 1 and 2 threads and with every micro-kernel this CPU runs. The sigmoid's vector exp against exp in double.
   And the fused BatchNorm + ReLU against the two ops it replaces (bit for bit, NaN and Inf included), the convolution
   with its bias and ReLU (or a residual and the ReLU) in the output pass against the separate ops (bit for bit),
   transposed convolutions with kernel = stride (and one general) against the reference, their fused ReLU and the
   one-output-channel path against the GEMM path (bit for bit), DBNet's eval forward with every BN folded into its
   convolution against the same forward running each BN as its own op (1e-4 relative) and with its fusions against
   the unfused forward (bit for bit), and the stem's vectorised 3x3/2 max pooling against the per-output loop (bit for
   bit, ties and NaN included). And every other op (BatchNorm, pointwise and add + ReLU, pooling, upsampling and
   upsample + add, concat and upsamplings + concat, ocr_gemm) against its reference. */
#define OCR_IMPLEMENTATION
#include "ocr_tensor.h"
#include "ocr_nn.h"
#include "ocr_loss.h"
#include "ocr_dbnet.h"
#include "ocr_test.h"
#include <float.h>

typedef struct { const char *name; int N, C, K, H, W, kh, kw, sh, sw, ph, pw, dil, groups; } geom;

/* Runs f with every op on its reference loop (OCR_DEBUG_REFERENCE), whatever the environment says, and restores the flags. */
#define ON_REFERENCE(ctx, f) do { unsigned flags_ = (ctx)->debug_flags; (ctx)->debug_flags |= OCR_DEBUG_REFERENCE; f; \
                                  (ctx)->debug_flags = flags_; } while (0)

/* Cases whose fast output differs in some bit from the reference's: none would mean the flag did not route. */
static int n_differing;

/* The bias and ReLU applied by the convolution's own output pass equal conv2d_forward (bias added) then relu_forward,
   bit for bit, and so does the residual added in that pass before the ReLU. */
static void conv_relu_case(ocr_ctx *ctx, const ocr_tensor *x, const ocr_tensor *w, ocr_conv_params p, const char *what) {
    ocr_tensor b, y1, y2, res;
    ocr_shape ys;
    memset(&b, 0, sizeof b); y1 = y2 = res = b;
    OCR_CHECK_OK(ctx, ocr_nn_conv2d_out_shape(ctx, x->shape, w->shape, p, &ys));
    OCR_CHECK_OK(ctx, ocr_tensor_alloc(ctx, &b, "b", OCR_F32, OCR_DEVICE_CPU, ocr_shape1(ys.dim[1])));
    OCR_CHECK_OK(ctx, ocr_tensor_alloc(ctx, &y1, "y1", OCR_F32, OCR_DEVICE_CPU, ys));
    OCR_CHECK_OK(ctx, ocr_tensor_alloc(ctx, &y2, "y2", OCR_F32, OCR_DEVICE_CPU, ys));
    if (!ocr_test__case_failed) {
        ocr_tensor_fill_uniform(ctx, &b, -0.3f, 0.3f);
        ocr_tensor_fill(ctx, &y2, 123.0); /* the fused op overwrites */
        OCR_CHECK_OK(ctx, ocr_nn_conv2d_forward(ctx, x, w, &b, p, &y1));
        OCR_CHECK_OK(ctx, ocr_nn_relu_forward(ctx, &y1, &y1));
        OCR_CHECK_OK(ctx, ocr_nn_conv2d_relu_forward(ctx, x, w, &b, p, &y2));
        OCR_CHECK_MSG(memcmp(y1.data, y2.data, ocr_tensor_bytes(&y1)) == 0, "%s: conv2d_relu_forward differs from conv2d_forward + relu",
                      what);
        OCR_CHECK_OK(ctx, ocr_nn_conv2d_relu_forward(ctx, x, w, NULL, p, &y2));
        OCR_CHECK_OK(ctx, ocr_nn_conv2d_forward(ctx, x, w, NULL, p, &y1));
        OCR_CHECK_OK(ctx, ocr_nn_relu_forward(ctx, &y1, &y1));
        OCR_CHECK_MSG(memcmp(y1.data, y2.data, ocr_tensor_bytes(&y1)) == 0, "%s: conv2d_relu_forward without bias differs", what);
        /* and with a residual added before the ReLU (the end of a ResNet block) */
        OCR_CHECK_OK(ctx, ocr_tensor_alloc(ctx, &res, "res", OCR_F32, OCR_DEVICE_CPU, ys));
        if (!ocr_test__case_failed) {
            ocr_tensor_fill_uniform(ctx, &res, -0.5f, 0.5f);
            OCR_CHECK_OK(ctx, ocr_nn_conv2d_add_relu_forward(ctx, x, w, &b, p, &res, &y2));
            OCR_CHECK_OK(ctx, ocr_nn_conv2d_forward(ctx, x, w, &b, p, &y1));
            OCR_CHECK_OK(ctx, ocr_nn_add_forward(ctx, &y1, &res, &y1));
            OCR_CHECK_OK(ctx, ocr_nn_relu_forward(ctx, &y1, &y1));
            OCR_CHECK_MSG(memcmp(y1.data, y2.data, ocr_tensor_bytes(&y1)) == 0, "%s: conv2d_add_relu_forward differs from conv2d_forward + "
                          "add_forward + relu_forward", what);
            OCR_CHECK_MSG(ocr_nn_conv2d_add_relu_forward(ctx, x, w, &b, p, &res, &res) == OCR_EINVAL, "%s: the residual as output accepted", what);
        }
    }
    ocr_tensor_free(&b); ocr_tensor_free(&y1); ocr_tensor_free(&y2); ocr_tensor_free(&res);
}

static void run_case(const geom *t, int threads, int kernel, double tol) {
    ocr_ctx ctx;
    ocr_conv_params p = ocr_conv_params_make(1, 0, t->dil, t->groups);
    ocr_tensor x, w, y, dy, dx, dw, ry, rdx, rdw;
    ocr_shape ys;
    long nx, nw, ny;
    char what[160];
    memset(&x, 0, sizeof x); w = y = dy = dx = dw = ry = rdx = rdw = x;
    p.stride_h = t->sh; p.stride_w = t->sw; p.pad_h = t->ph; p.pad_w = t->pw;
    OCR_CHECK_OK(&ctx, ocr_ctx_init(&ctx, threads, 7));
    ctx.cpu_kernel = kernel;
    ctx.debug_flags &= ~(unsigned)OCR_DEBUG_REFERENCE; /* the fast paths, even under OCR_REFERENCE=1 */
    OCR_CHECK_OK(&ctx, ocr_nn_conv2d_out_shape(&ctx, ocr_shape4(t->N, t->C, t->H, t->W), ocr_shape4(t->K, t->C / t->groups, t->kh, t->kw), p, &ys));
    OCR_CHECK_OK(&ctx, ocr_tensor_alloc(&ctx, &x, "x", OCR_F32, OCR_DEVICE_CPU, ocr_shape4(t->N, t->C, t->H, t->W)));
    OCR_CHECK_OK(&ctx, ocr_tensor_alloc(&ctx, &w, "w", OCR_F32, OCR_DEVICE_CPU, ocr_shape4(t->K, t->C / t->groups, t->kh, t->kw)));
    OCR_CHECK_OK(&ctx, ocr_tensor_alloc(&ctx, &y, "y", OCR_F32, OCR_DEVICE_CPU, ys));
    OCR_CHECK_OK(&ctx, ocr_tensor_alloc(&ctx, &dy, "dy", OCR_F32, OCR_DEVICE_CPU, ys));
    OCR_CHECK_OK(&ctx, ocr_tensor_alloc(&ctx, &dx, "dx", OCR_F32, OCR_DEVICE_CPU, x.shape));
    OCR_CHECK_OK(&ctx, ocr_tensor_alloc(&ctx, &dw, "dw", OCR_F32, OCR_DEVICE_CPU, w.shape));
    OCR_CHECK_OK(&ctx, ocr_tensor_alloc(&ctx, &ry, "ref_y", OCR_F32, OCR_DEVICE_CPU, ys));
    OCR_CHECK_OK(&ctx, ocr_tensor_alloc(&ctx, &rdx, "ref_dx", OCR_F32, OCR_DEVICE_CPU, x.shape));
    OCR_CHECK_OK(&ctx, ocr_tensor_alloc(&ctx, &rdw, "ref_dw", OCR_F32, OCR_DEVICE_CPU, w.shape));
    if (ocr_test__case_failed) goto done;
    nx = (long)ocr_tensor_numel(&x); nw = (long)ocr_tensor_numel(&w); ny = (long)ocr_tensor_numel(&y);
    ocr_tensor_fill_uniform(&ctx, &x, -1.0f, 1.0f);
    ocr_tensor_fill_uniform(&ctx, &w, -0.2f, 0.2f);
    ocr_tensor_fill_uniform(&ctx, &dy, -1.0f, 1.0f);
    /* gradients accumulate: start from a known non-zero value */
    ocr_tensor_fill(&ctx, &dx, 0.5);
    ocr_tensor_fill(&ctx, &dw, -0.25);
    ocr_tensor_fill(&ctx, &rdx, 0.5);
    ocr_tensor_fill(&ctx, &rdw, -0.25);
    OCR_CHECK_OK(&ctx, ocr_nn_conv2d_forward(&ctx, &x, &w, NULL, p, &y));
    OCR_CHECK_OK(&ctx, ocr_nn_conv2d_backward(&ctx, &x, &w, &dy, p, &dx, &dw, NULL));
    ON_REFERENCE(&ctx, OCR_CHECK_OK(&ctx, ocr_nn_conv2d_forward(&ctx, &x, &w, NULL, p, &ry)));
    ON_REFERENCE(&ctx, OCR_CHECK_OK(&ctx, ocr_nn_conv2d_backward(&ctx, &x, &w, &dy, p, &rdx, &rdw, NULL)));
    if (memcmp(y.data, ry.data, ocr_tensor_bytes(&y)) != 0) n_differing++;
    snprintf(what, sizeof what, "%s, %d thread(s), kernel %s: y", t->name, threads, ocr_gemm_kernel_name(&ctx));
    OCR_CHECK_MSG(ocr_test_rel_err((const float *)y.data, (const float *)ry.data, ny, 1e-6) <= tol, "%s off by %g", what,
                  ocr_test_rel_err((const float *)y.data, (const float *)ry.data, ny, 1e-6));
    OCR_CHECK_MSG(ocr_test_rel_err((const float *)dx.data, (const float *)rdx.data, nx, 1e-6) <= tol, "%s: dx off by %g", what,
                  ocr_test_rel_err((const float *)dx.data, (const float *)rdx.data, nx, 1e-6));
    OCR_CHECK_MSG(ocr_test_rel_err((const float *)dw.data, (const float *)rdw.data, nw, 1e-6) <= tol, "%s: dw off by %g", what,
                  ocr_test_rel_err((const float *)dw.data, (const float *)rdw.data, nw, 1e-6));
    conv_relu_case(&ctx, &x, &w, p, what);
done:
    ocr_tensor_free(&x); ocr_tensor_free(&w); ocr_tensor_free(&y); ocr_tensor_free(&dy); ocr_tensor_free(&dx); ocr_tensor_free(&dw);
    ocr_tensor_free(&ry); ocr_tensor_free(&rdx); ocr_tensor_free(&rdw);
    ocr_ctx_free(&ctx);
}

/* Whether the forward of t takes Winograd on the given kernel (AVX-512's or AVX2's; skipped where the CPU lacks it),
   against expect: its sums round differently from the direct path's (OCR_DEBUG_NO_WINOGRAD), so the outputs differ
   in some bit when it does and are equal when it does not. */
static void check_takes_winograd(const geom *t, int kernel, int expect) {
    ocr_ctx ctx;
    ocr_tensor x, w, y1, y2;
    int took;
    memset(&x, 0, sizeof x); w = y1 = y2 = x;
    OCR_CHECK_OK(&ctx, ocr_ctx_init(&ctx, 2, 7));
    ctx.cpu_kernel = kernel;
    ctx.debug_flags &= ~(unsigned)(OCR_DEBUG_REFERENCE | OCR_DEBUG_NO_WINOGRAD);
    if (strncmp(ocr_gemm_kernel_name(&ctx), kernel == OCR_CPU_KERNEL_AVX2 ? "avx2" : "avx512", kernel == OCR_CPU_KERNEL_AVX2 ? 4 : 6) != 0) {
        ocr_ctx_free(&ctx);
        return;
    }
    OCR_CHECK_OK(&ctx, ocr_tensor_alloc(&ctx, &x, "x", OCR_F32, OCR_DEVICE_CPU, ocr_shape4(t->N, t->C, t->H, t->W)));
    OCR_CHECK_OK(&ctx, ocr_tensor_alloc(&ctx, &w, "w", OCR_F32, OCR_DEVICE_CPU, ocr_shape4(t->K, t->C, 3, 3)));
    OCR_CHECK_OK(&ctx, ocr_tensor_alloc(&ctx, &y1, "y1", OCR_F32, OCR_DEVICE_CPU, ocr_shape4(t->N, t->K, t->H + 2 * t->ph - 2, t->W + 2 * t->pw - 2)));
    OCR_CHECK_OK(&ctx, ocr_tensor_alloc(&ctx, &y2, "y2", OCR_F32, OCR_DEVICE_CPU, y1.shape));
    if (!ocr_test__case_failed) {
        ocr_conv_params p = ocr_conv_params_make(1, t->ph, 1, 1);
        ocr_tensor_fill_uniform(&ctx, &x, -1.0f, 1.0f);
        ocr_tensor_fill_uniform(&ctx, &w, -0.2f, 0.2f);
        OCR_CHECK_OK(&ctx, ocr_nn_conv2d_forward(&ctx, &x, &w, NULL, p, &y1));
        ctx.debug_flags |= OCR_DEBUG_NO_WINOGRAD;
        OCR_CHECK_OK(&ctx, ocr_nn_conv2d_forward(&ctx, &x, &w, NULL, p, &y2));
        took = memcmp(y1.data, y2.data, ocr_tensor_bytes(&y1)) != 0;
        OCR_CHECK_MSG(took == expect, "%s: %s Winograd on %s", t->name, took ? "took" : "did not take", ocr_gemm_kernel_name(&ctx));
    }
    ocr_tensor_free(&x); ocr_tensor_free(&w); ocr_tensor_free(&y1); ocr_tensor_free(&y2);
    ocr_ctx_free(&ctx);
}

static void test_conv_paths(void) {
    static const geom cases[] = {
        /* implicit path (rows >= 32 wide) */
        {"3x3 s1 p1, 16->16, 80 wide (two 48-blocks, one partial)", 2, 16, 16, 6, 80, 3, 3, 1, 1, 1, 1, 1, 1},
        {"3x3 s1 p1, 8->12 (a partial 8-row panel), 37 wide", 1, 8, 12, 5, 37, 3, 3, 1, 1, 1, 1, 1, 1},
        {"7x7 s2 p3 (stem), 3->16, 70 wide input", 2, 3, 16, 9, 70, 7, 7, 2, 2, 3, 3, 1, 1},
        {"3x3 s2 p1, odd input 81 wide", 1, 6, 8, 7, 81, 3, 3, 2, 2, 1, 1, 1, 1},
        {"1x1 s2, 96 wide", 1, 5, 9, 4, 96, 1, 1, 2, 2, 0, 0, 1, 1},
        {"1x1 s1, 40 wide, 64 outputs (weight gradient through the GEMM)", 1, 7, 64, 3, 40, 1, 1, 1, 1, 0, 0, 1, 1},
        {"3x2 s1 x2, pad 3x1, dilation 2, 33 wide", 2, 3, 5, 8, 33, 3, 2, 1, 2, 3, 1, 2, 1},
        {"3x3 s1 p2 (pad past the flipped kernel's reach), 40 wide", 1, 4, 8, 5, 36, 3, 3, 1, 1, 2, 2, 1, 1},
        {"3x3 s1 p1, 4->40 outputs, 48 wide (im2col dot off, implicit dot on)", 1, 4, 40, 4, 48, 3, 3, 1, 1, 1, 1, 1, 1},
        /* rows of 16 to 31: the AVX2 kernels' implicit path (16-pixel blocks, 6-row panels), AVX-512's packed im2col */
        {"3x3 s1 p1, 16->16, 20 wide", 3, 16, 16, 20, 20, 3, 3, 1, 1, 1, 1, 1, 1},
        {"3x3 s1 p1, 5->7 (a partial 6-row panel), 17 wide (one column past a block)", 2, 5, 7, 6, 17, 3, 3, 1, 1, 1, 1, 1, 1},
        {"3x3 s2 p1, 6->9, 35 wide input (17 output columns)", 1, 6, 9, 9, 35, 3, 3, 2, 2, 1, 1, 1, 1},
        /* packed im2col path (rows under 16 wide) */
        {"3x3 s2 p1, 8->16, 19 wide", 2, 8, 16, 11, 19, 3, 3, 2, 2, 1, 1, 1, 1},
        {"3x3 s1 p1, 8->48 outputs (weight gradient through the GEMM), 10 wide", 2, 8, 48, 10, 10, 3, 3, 1, 1, 1, 1, 1, 1},
        {"3x3 groups 2, 40 wide", 1, 4, 6, 5, 40, 3, 3, 1, 1, 1, 1, 1, 2},
        /* on two threads, one chunk per image and large weights: every thread packs a share of the panels, then
           multiplies its share of the output channels (ocr__conv_fwd_rows_part) */
        {"3x3 s2 p1, 256->60 (a partial panel; shared panels on two threads), 12x14", 1, 256, 60, 12, 14, 3, 3, 2, 2, 1, 1, 1, 1},
        /* 3x3 stride 2, 32 outputs or more, rows of 32 or more: AVX-512's output-channel blocks (14 pixels x 32 channels) */
        {"3x3 s2 p1, 20->40 (a partial 32-channel block), 73 wide input (37 outputs: blocks of 14, 14, 9)", 2, 20, 40, 9, 73, 3, 3, 2, 2, 1, 1, 1, 1},
        {"3x3 s2 p0, 8->32, 70 wide input (34 outputs)", 1, 8, 32, 7, 70, 3, 3, 2, 2, 0, 0, 1, 1},
    };
    /* Winograd F(4x4, 3x3) on the AVX-512 and AVX2 kernels (the portable kernel takes the direct paths above): its
       transforms round more than a direct sum, so y, dx and dw get 2e-5 (measured: under 1e-5) */
    static const geom winograd[] = {
        {"Winograd: 16->32, 30x70 (rows of 18 tiles: partial groups, groups across 48-tile panels)", 1, 16, 32, 30, 70, 3, 3, 1, 1, 1, 1, 1, 1},
        {"Winograd: 64->68 (a partial 8-row panel; data gradient too), 2 images 21x27 (gathered tiles)", 2, 64, 68, 21, 27, 3, 3, 1, 1, 1, 1, 1, 1},
        {"Winograd: pad 0, 24->32, 40x75", 1, 24, 32, 40, 75, 3, 3, 1, 1, 0, 0, 1, 1},
        {"Winograd: pad 2, 16->32, 17x66 (85 tiles)", 1, 16, 32, 17, 66, 3, 3, 1, 1, 2, 2, 1, 1},
        {"Winograd: 264->32 (two K blocks; weight gradient over two work items), 16x68", 1, 264, 32, 16, 68, 3, 3, 1, 1, 1, 1, 1, 1},
        {"Winograd: 64->64 (weight gradient from gathered tiles), 2 images 21x27", 2, 64, 64, 21, 27, 3, 3, 1, 1, 1, 1, 1, 1},
        {"Winograd: 8 images 12x64 (one work item each)", 8, 16, 32, 12, 64, 3, 3, 1, 1, 1, 1, 1, 1},
        {"Winograd: 400->64, 44x28 (bands widened to fill a 48-tile panel: 6 + 5 rows of 7 tiles)", 1, 400, 64, 44, 28, 3, 3, 1, 1, 1, 1, 1, 1},
        {"Winograd: 64->68, one image 20x56 (one item of 70 tiles: on two threads each 8-row panel's weights transformed on their own, the last partial)", 1, 64, 68, 20, 56, 3, 3, 1, 1, 1, 1, 1, 1},
        {"Winograd: 128->64, 4 images 16x48 (weight gradient: four items summed in two groups, each whole on one thread)", 4, 128, 64, 16, 48, 3, 3, 1, 1, 1, 1, 1, 1},
    };
    /* one image of few tiles with many channels: on AVX-512 the tiles are the GEMM's rows (ocr__wino_rows_part), on
       AVX2 one item whose 6-row weight panels are transformed on their own (ocr__wino_panels_part; 9 tiles stay on
       the direct path there, and 17 too) */
    static const geom winograd_rows[] = {
        {"Winograd, tiles as rows: 128->256, one image 12x12 (9 tiles; weights in two chunks of input channels)", 1, 128, 256, 12, 12, 3, 3, 1, 1, 1, 1, 1, 1},
        {"Winograd, tiles as rows: 241->136, one image 4x68 (a row of 17 tiles: lanes across 8-row panels; a 40-channel last panel)", 1, 241, 136, 4, 68, 3, 3, 1, 1, 1, 1, 1, 1},
        {"Winograd, tiles as rows (AVX-512) or panels on their own (AVX2): 130->254, one image 32x29 (64 tiles; a partial last 6-row panel)", 1, 130, 254, 32, 29, 3, 3, 1, 1, 1, 1, 1, 1},
    };
    /* shapes where it does not pay on AVX-512; on AVX2, whose direct paths are slower and whose transforms do not
       gather, the first three pay (ocr__conv_winograd_ok) */
    static const geom no_winograd[] = {
        {"no Winograd on AVX-512: the recognizer's 64->128 at height 4 (8 tiles an image, a 48-column panel each)", 32, 64, 128, 4, 32, 3, 3, 1, 1, 1, 1, 1, 1},
        {"no Winograd on AVX-512: 32->32 at 40x40 (rows of 10 gathered tiles with 32 channels)", 2, 32, 32, 40, 40, 3, 3, 1, 1, 1, 1, 1, 1},
        {"no Winograd on AVX-512: 128->128 at 10x10", 8, 128, 128, 10, 10, 3, 3, 1, 1, 1, 1, 1, 1},
        {"no Winograd: the recognizer's 128->128 at height 2 (8 tiles an image: a 16-column panel each on AVX2)", 32, 128, 128, 2, 32, 3, 3, 1, 1, 1, 1, 1, 1},
    };
    static const int avx2_takes[] = {1, 1, 1, 0}, rows_avx2_takes[] = {0, 0, 1};
    static const int kernels[3] = {OCR_CPU_KERNEL_AUTO, OCR_CPU_KERNEL_AVX2, OCR_CPU_KERNEL_PORTABLE};
    /* under the sanitizers the Winograd shapes run on two threads only (their work split, hence their edges, is what
       differs with the thread count; one thread is the plain run's): the reference sums are most of the time there */
    int c, t, k, t_first = ocr_test_sanitized() ? 2 : 1;
    for (c = 0; c < (int)(sizeof cases / sizeof cases[0]); c++)
        for (t = 1; t <= 2; t++)
            for (k = 0; k < 3; k++) run_case(&cases[c], t, kernels[k], 2e-6);
    for (c = 0; c < (int)(sizeof winograd / sizeof winograd[0]); c++) { /* the AVX-512 and AVX2 kernels: those that take it */
        for (t = t_first; t <= 2; t++)
            for (k = 0; k < 2; k++) run_case(&winograd[c], t, kernels[k], 2e-5);
        for (k = 0; k < 2; k++) check_takes_winograd(&winograd[c], kernels[k], 1);
    }
    for (c = 0; c < (int)(sizeof winograd_rows / sizeof winograd_rows[0]); c++) {
        for (t = t_first; t <= 2; t++)
            for (k = 0; k < 2; k++) run_case(&winograd_rows[c], t, kernels[k], 2e-5);
        for (k = 0; k < 2; k++) check_takes_winograd(&winograd_rows[c], kernels[k], k == 0 || rows_avx2_takes[c]);
    }
    /* and shapes where it does not pay (ocr__conv_winograd_ok) stay on the direct paths */
    for (c = 0; c < (int)(sizeof no_winograd / sizeof no_winograd[0]); c++)
        for (k = 0; k < 2; k++) check_takes_winograd(&no_winograd[c], kernels[k], kernels[k] == OCR_CPU_KERNEL_AVX2 && avx2_takes[c]);
    OCR_CHECK_MSG(n_differing > 0, "every fast output equals the reference bit for bit: OCR_DEBUG_REFERENCE did not route");
}

/* The strided convolutions, and the stride-1 ones with rows under 48 wide, on AVX-512's output-channel blocks sum
   each output over the same taps in the same order as the implicit kernels do, so they give the AVX2 implicit path's
   bits exactly (the reference, whose order differs, is compared within a tolerance in test_conv_paths), and so do the
   stride-1 ones' data gradients, which run as forwards added into dx; Winograd, which would take some of the stride-1
   shapes, is off. Skipped without AVX-512. */
static void test_strided_blocks_same_bits(void) {
    static const geom cases[] = {
        {"3x3 s2 p1, 20->40, 73 wide input", 2, 20, 40, 9, 73, 3, 3, 2, 2, 1, 1, 1, 1},
        {"3x3 s2 p0, 8->100 (three 32-channel blocks and 4), 70 wide input", 1, 8, 100, 7, 70, 3, 3, 2, 2, 0, 0, 1, 1},
        {"3x3 s2 p1, 16->32, 64 wide input (32 outputs: blocks of 14, 14, 4)", 3, 16, 32, 10, 64, 3, 3, 2, 2, 1, 1, 1, 1},
        {"3x3 s2 p1, 64->128, bands of rows, 160 wide input", 1, 64, 128, 24, 160, 3, 3, 2, 2, 1, 1, 1, 1},
        {"3x3 s1 p1, 64->96, 23x40 (rows under one 48-pixel block; weights under the AVX2 forward's im2col size)", 1, 64, 96, 23, 40, 3, 3, 1, 1, 1, 1, 1, 1},
        {"3x3 s1 p1, 24->72, 2 images 5x47 (three 32-channel blocks, the last part-full; blocks of 14, 14, 14, 5)", 2, 24, 72, 5, 47, 3, 3, 1, 1, 1, 1, 1, 1},
    };
    int c, k, r;
#if defined(__GNUC__) && (defined(__x86_64__) || defined(__i386__))
    if (!__builtin_cpu_supports("avx512f")) { ocr_test_skip("this CPU has no AVX-512: strided convolutions take the implicit path"); return; }
#else
    ocr_test_skip("not an x86 build: strided convolutions take the portable paths");
    return;
#endif
    for (c = 0; c < (int)(sizeof cases / sizeof cases[0]); c++) {
        const geom *t = &cases[c];
        ocr_ctx ctx;
        ocr_tensor x, w, b, y[2];
        ocr_conv_params p = ocr_conv_params_make(t->sh, t->ph, 1, 1);
        ocr_shape ys;
        memset(&x, 0, sizeof x); w = b = y[0] = y[1] = x;
        OCR_CHECK_OK(&ctx, ocr_ctx_init(&ctx, 2, 11 + c));
        ctx.debug_flags &= ~(unsigned)OCR_DEBUG_REFERENCE;
        ctx.debug_flags |= OCR_DEBUG_NO_WINOGRAD;
        OCR_CHECK_OK(&ctx, ocr_nn_conv2d_out_shape(&ctx, ocr_shape4(t->N, t->C, t->H, t->W), ocr_shape4(t->K, t->C, t->kh, t->kw), p, &ys));
        OCR_CHECK_OK(&ctx, ocr_tensor_alloc(&ctx, &x, "x", OCR_F32, OCR_DEVICE_CPU, ocr_shape4(t->N, t->C, t->H, t->W)));
        OCR_CHECK_OK(&ctx, ocr_tensor_alloc(&ctx, &w, "w", OCR_F32, OCR_DEVICE_CPU, ocr_shape4(t->K, t->C, t->kh, t->kw)));
        OCR_CHECK_OK(&ctx, ocr_tensor_alloc(&ctx, &b, "b", OCR_F32, OCR_DEVICE_CPU, ocr_shape1(t->K)));
        for (k = 0; k < 2; k++) OCR_CHECK_OK(&ctx, ocr_tensor_alloc(&ctx, &y[k], "y", OCR_F32, OCR_DEVICE_CPU, ys));
        if (!ocr_test__case_failed) {
            ocr_tensor_fill_uniform(&ctx, &x, -1.0f, 1.0f);
            ocr_tensor_fill_uniform(&ctx, &w, -0.2f, 0.2f);
            ocr_tensor_fill_uniform(&ctx, &b, -0.5f, 0.5f);
            for (r = 0; r < 2; r++) { /* r 0: the output-channel blocks (AVX-512); 1: the AVX2 implicit path; bias and ReLU after each */
                ctx.cpu_kernel = r ? OCR_CPU_KERNEL_AVX2 : OCR_CPU_KERNEL_AUTO;
                OCR_CHECK_OK(&ctx, ocr_nn_conv2d_relu_forward(&ctx, &x, &w, &b, p, &y[r]));
            }
            OCR_CHECK_MSG(memcmp(y[0].data, y[1].data, ocr_tensor_bytes(&y[0])) == 0, "%s: the output-channel blocks differ from the implicit path", t->name);
            if (t->sh == 1) { /* a stride-1 data gradient runs as a forward into dx (flipped weights, added to dx) */
                ocr_tensor dx[2];
                memset(dx, 0, sizeof dx);
                for (r = 0; r < 2 && !ocr_test__case_failed; r++) {
                    OCR_CHECK_OK(&ctx, ocr_tensor_alloc(&ctx, &dx[r], "dx", OCR_F32, OCR_DEVICE_CPU, x.shape));
                    OCR_CHECK_OK(&ctx, ocr_tensor_fill(&ctx, &dx[r], 0.5));
                    ctx.cpu_kernel = r ? OCR_CPU_KERNEL_AVX2 : OCR_CPU_KERNEL_AUTO;
                    OCR_CHECK_OK(&ctx, ocr_nn_conv2d_backward(&ctx, &x, &w, &y[0], p, &dx[r], NULL, NULL));
                }
                OCR_CHECK_MSG(!ocr_test__case_failed && memcmp(dx[0].data, dx[1].data, ocr_tensor_bytes(&dx[0])) == 0,
                              "%s: the data gradient differs from the implicit path's", t->name);
                ocr_tensor_free(&dx[0]); ocr_tensor_free(&dx[1]);
            }
        }
        ocr_tensor_free(&x); ocr_tensor_free(&w); ocr_tensor_free(&b); ocr_tensor_free(&y[0]); ocr_tensor_free(&y[1]);
        ocr_ctx_free(&ctx);
    }
}

/* A 1x1 stride-1 unpadded convolution on AVX-512 reads its blocks straight from the image, flat over rows, and copies
   only an image's last part-full block: each output is still the sum over the input channels in order, so it gives
   the bits of the padded-band route, which a 3x3 convolution (padding 1, no Winograd) with only the centre tap
   non-zero takes (the other taps add exact zeros): plain, and with bias and ReLU. Skipped without AVX-512. */
static void test_pointwise_direct_same_bits(void) {
    static const geom cases[] = {
        {"1x1, 16->64, 2 images 37x50 (1850 pixels: the last block 26 of 48)", 2, 16, 64, 37, 50, 1, 1, 1, 1, 0, 0, 1, 1},
        {"1x1, 5->20, 3x50 (blocks 48, 48, 48 and 6; 20 outputs: a part-full row panel)", 1, 5, 20, 3, 50, 1, 1, 1, 1, 0, 0, 1, 1},
        {"1x1, 300->9, 4x96 (whole blocks only)", 1, 300, 9, 4, 96, 1, 1, 1, 1, 0, 0, 1, 1},
    };
    int c, r, k, i;
#if defined(__GNUC__) && (defined(__x86_64__) || defined(__i386__))
    if (!__builtin_cpu_supports("avx512f")) { ocr_test_skip("this CPU has no AVX-512: 1x1 convolutions take the AVX2 paths"); return; }
#else
    ocr_test_skip("not an x86 build: 1x1 convolutions take the portable paths");
    return;
#endif
    for (c = 0; c < (int)(sizeof cases / sizeof cases[0]); c++) {
        const geom *t = &cases[c];
        ocr_ctx ctx;
        ocr_tensor x, w[2], b, y[2], yb[2];
        ocr_shape ys = ocr_shape4(t->N, t->K, t->H, t->W);
        memset(&x, 0, sizeof x); w[0] = w[1] = b = y[0] = y[1] = yb[0] = yb[1] = x;
        OCR_CHECK_OK(&ctx, ocr_ctx_init(&ctx, 2, 41 + c));
        ctx.debug_flags &= ~(unsigned)OCR_DEBUG_REFERENCE;
        ctx.debug_flags |= OCR_DEBUG_NO_WINOGRAD;
        OCR_CHECK_OK(&ctx, ocr_tensor_alloc(&ctx, &x, "x", OCR_F32, OCR_DEVICE_CPU, ocr_shape4(t->N, t->C, t->H, t->W)));
        OCR_CHECK_OK(&ctx, ocr_tensor_alloc(&ctx, &w[0], "w", OCR_F32, OCR_DEVICE_CPU, ocr_shape4(t->K, t->C, 1, 1)));
        OCR_CHECK_OK(&ctx, ocr_tensor_alloc(&ctx, &w[1], "w3", OCR_F32, OCR_DEVICE_CPU, ocr_shape4(t->K, t->C, 3, 3)));
        OCR_CHECK_OK(&ctx, ocr_tensor_alloc(&ctx, &b, "b", OCR_F32, OCR_DEVICE_CPU, ocr_shape1(t->K)));
        for (r = 0; r < 2; r++) {
            OCR_CHECK_OK(&ctx, ocr_tensor_alloc(&ctx, &y[r], "y", OCR_F32, OCR_DEVICE_CPU, ys));
            OCR_CHECK_OK(&ctx, ocr_tensor_alloc(&ctx, &yb[r], "y_bias_relu", OCR_F32, OCR_DEVICE_CPU, ys));
        }
        if (!ocr_test__case_failed) {
            float *w1 = (float *)w[0].data, *w3 = (float *)w[1].data;
            ocr_tensor_fill_uniform(&ctx, &x, -1.0f, 1.0f);
            ocr_tensor_fill_uniform(&ctx, &w[0], -0.2f, 0.2f);
            ocr_tensor_fill_uniform(&ctx, &b, -0.5f, 0.5f);
            for (k = 0; k < t->K * t->C; k++)
                for (i = 0; i < 9; i++) w3[k * 9 + i] = i == 4 ? w1[k] : 0.0f;
            for (r = 0; r < 2; r++) { /* r 0: the direct route (1x1); 1: the padded band (3x3, centre tap) */
                ocr_conv_params p = ocr_conv_params_make(1, r, 1, 1);
                OCR_CHECK_OK(&ctx, ocr_nn_conv2d_forward(&ctx, &x, &w[r], NULL, p, &y[r]));
                OCR_CHECK_OK(&ctx, ocr_nn_conv2d_relu_forward(&ctx, &x, &w[r], &b, p, &yb[r]));
            }
            OCR_CHECK_MSG(memcmp(y[0].data, y[1].data, ocr_tensor_bytes(&y[0])) == 0, "%s: the direct route's y differs from the padded band's", t->name);
            OCR_CHECK_MSG(memcmp(yb[0].data, yb[1].data, ocr_tensor_bytes(&yb[0])) == 0, "%s: the direct route's bias + ReLU output differs",
                          t->name);
        }
        ocr_tensor_free(&x); ocr_tensor_free(&w[0]); ocr_tensor_free(&w[1]); ocr_tensor_free(&b);
        for (r = 0; r < 2; r++) { ocr_tensor_free(&y[r]); ocr_tensor_free(&yb[r]); }
        ocr_ctx_free(&ctx);
    }
}

/* The shared-panels route (two threads: each packs a share of an image's panels, then multiplies a share of the
   output channels) sums each output in the same order as the per-chunk route (one thread), on every kernel: the same
   bits, with the bias, ReLU and residual applied to each thread's rows. */
static void test_shared_panels_same_bits(void) {
    static const geom cases[] = {
        {"3x3 s2 p1, 256->60, 12x14", 1, 256, 60, 12, 14, 3, 3, 2, 2, 1, 1, 1, 1},
        {"1x1 s2, 512->260, 2 images 14x30", 2, 512, 260, 14, 30, 1, 1, 2, 2, 0, 0, 1, 1},
        {"3x3 s1 p1, 128->136, 9x13 (the direct path where Winograd is off)", 1, 128, 136, 9, 13, 3, 3, 1, 1, 1, 1, 1, 1},
    };
    static const int kernels[3] = {OCR_CPU_KERNEL_AUTO, OCR_CPU_KERNEL_AVX2, OCR_CPU_KERNEL_PORTABLE};
    int c, k, t;
    for (c = 0; c < (int)(sizeof cases / sizeof cases[0]); c++)
        for (k = 0; k < 3; k++) {
            const geom *g = &cases[c];
            ocr_ctx ctx;
            ocr_tensor x, w, b, res, y[2];
            ocr_conv_params p = ocr_conv_params_make(g->sh, g->ph, 1, 1);
            ocr_shape ys;
            memset(&x, 0, sizeof x); w = b = res = y[0] = y[1] = x;
            OCR_CHECK_OK(&ctx, ocr_ctx_init(&ctx, 2, 21 + c));
            ctx.debug_flags &= ~(unsigned)OCR_DEBUG_REFERENCE;
            ctx.debug_flags |= OCR_DEBUG_NO_WINOGRAD;
            ctx.cpu_kernel = kernels[k];
            OCR_CHECK_OK(&ctx, ocr_nn_conv2d_out_shape(&ctx, ocr_shape4(g->N, g->C, g->H, g->W), ocr_shape4(g->K, g->C, g->kh, g->kw), p, &ys));
            OCR_CHECK_OK(&ctx, ocr_tensor_alloc(&ctx, &x, "x", OCR_F32, OCR_DEVICE_CPU, ocr_shape4(g->N, g->C, g->H, g->W)));
            OCR_CHECK_OK(&ctx, ocr_tensor_alloc(&ctx, &w, "w", OCR_F32, OCR_DEVICE_CPU, ocr_shape4(g->K, g->C, g->kh, g->kw)));
            OCR_CHECK_OK(&ctx, ocr_tensor_alloc(&ctx, &b, "b", OCR_F32, OCR_DEVICE_CPU, ocr_shape1(g->K)));
            OCR_CHECK_OK(&ctx, ocr_tensor_alloc(&ctx, &res, "res", OCR_F32, OCR_DEVICE_CPU, ys));
            for (t = 0; t < 2; t++) OCR_CHECK_OK(&ctx, ocr_tensor_alloc(&ctx, &y[t], "y", OCR_F32, OCR_DEVICE_CPU, ys));
            if (!ocr_test__case_failed) {
                ocr_tensor_fill_uniform(&ctx, &x, -1.0f, 1.0f);
                ocr_tensor_fill_uniform(&ctx, &w, -0.05f, 0.05f);
                ocr_tensor_fill_uniform(&ctx, &b, -0.5f, 0.5f);
                ocr_tensor_fill_uniform(&ctx, &res, -0.5f, 0.5f);
                for (t = 0; t < 2; t++) {
                    OCR_CHECK_OK(&ctx, ocr_ctx_set_threads(&ctx, 2 - t));
                    OCR_CHECK_OK(&ctx, ocr_nn_conv2d_add_relu_forward(&ctx, &x, &w, &b, p, &res, &y[t]));
                }
                OCR_CHECK_MSG(memcmp(y[0].data, y[1].data, ocr_tensor_bytes(&y[0])) == 0, "%s, kernel %s: two threads differ from one",
                              g->name, ocr_gemm_kernel_name(&ctx));
            }
            ocr_tensor_free(&x); ocr_tensor_free(&w); ocr_tensor_free(&b); ocr_tensor_free(&res);
            ocr_tensor_free(&y[0]); ocr_tensor_free(&y[1]);
            ocr_ctx_free(&ctx);
        }
}

/* Winograd on one image of a few bands: on two threads 2 to 4 bands per thread (ocr__conv_winograd, where that adds
   no padding tiles) or each band's phases spread over the threads, on one thread bands sized by the buffer budget. Every tile is
   summed over the same channels in the same order in any band, so the forward and the data gradient (a flipped
   forward) must give one thread's bits on two; so must Winograd's weight gradient, whose bands (and groups of them)
   are set by the buffer budget alone. The reference comparisons of test_conv_paths cover the values. */
static void test_winograd_bands_same_bits(void) {
    static const geom cases[] = {
        {"32->32, 92x160 (bands of 6, 6, 6 and 5 rows of 40 tiles: two a thread on two)", 1, 32, 32, 92, 160, 3, 3, 1, 1, 1, 1, 1, 1},
        {"64->64, 46x80 (AVX-512: runs of 96 tiles, on two five of 48; AVX2: bands of 7 + 5 tile rows of 20, on two six of 2)", 1, 64, 64, 46, 80, 3, 3, 1, 1, 1, 1, 1, 1},
        {"400->64, 44x28 (6 + 5 rows of 7; on two, phases spread on AVX-512, six bands of 2 on AVX2's 16-tile panels)", 1, 400, 64, 44, 28, 3, 3, 1, 1, 1, 1, 1, 1},
        {"128->64, 4 images 16x48 (the weight gradient's four items in two groups: one a thread on two)", 4, 128, 64, 16, 48, 3, 3, 1, 1, 1, 1, 1, 1},
    };
    static const int kernels[2] = {OCR_CPU_KERNEL_AUTO, OCR_CPU_KERNEL_AVX2};
    int c, k, t;
    for (c = 0; c < (int)(sizeof cases / sizeof cases[0]); c++)
        for (k = 0; k < 2; k++) {
            const geom *g = &cases[c];
            ocr_ctx ctx;
            ocr_tensor x, w, dy, y[2], dx[2], dw[2];
            ocr_conv_params p = ocr_conv_params_make(1, 1, 1, 1);
            memset(&x, 0, sizeof x); w = dy = y[0] = y[1] = dx[0] = dx[1] = dw[0] = dw[1] = x;
            OCR_CHECK_OK(&ctx, ocr_ctx_init(&ctx, 2, 31 + c));
            ctx.debug_flags &= ~(unsigned)(OCR_DEBUG_REFERENCE | OCR_DEBUG_NO_WINOGRAD);
            ctx.cpu_kernel = kernels[k];
            if (k == 1 && strncmp(ocr_gemm_kernel_name(&ctx), "avx2", 4) != 0) { ocr_ctx_free(&ctx); continue; } /* no AVX2 here */
            OCR_CHECK_OK(&ctx, ocr_tensor_alloc(&ctx, &x, "x", OCR_F32, OCR_DEVICE_CPU, ocr_shape4(g->N, g->C, g->H, g->W)));
            OCR_CHECK_OK(&ctx, ocr_tensor_alloc(&ctx, &w, "w", OCR_F32, OCR_DEVICE_CPU, ocr_shape4(g->K, g->C, 3, 3)));
            OCR_CHECK_OK(&ctx, ocr_tensor_alloc(&ctx, &dy, "dy", OCR_F32, OCR_DEVICE_CPU, ocr_shape4(g->N, g->K, g->H, g->W)));
            for (t = 0; t < 2; t++) {
                OCR_CHECK_OK(&ctx, ocr_tensor_alloc(&ctx, &y[t], "y", OCR_F32, OCR_DEVICE_CPU, dy.shape));
                OCR_CHECK_OK(&ctx, ocr_tensor_alloc(&ctx, &dx[t], "dx", OCR_F32, OCR_DEVICE_CPU, x.shape));
                OCR_CHECK_OK(&ctx, ocr_tensor_alloc(&ctx, &dw[t], "dw", OCR_F32, OCR_DEVICE_CPU, w.shape));
            }
            if (!ocr_test__case_failed) {
                ocr_tensor_fill_uniform(&ctx, &x, -1.0f, 1.0f);
                ocr_tensor_fill_uniform(&ctx, &w, -0.05f, 0.05f);
                ocr_tensor_fill_uniform(&ctx, &dy, -1.0f, 1.0f);
                for (t = 0; t < 2; t++) {
                    OCR_CHECK_OK(&ctx, ocr_ctx_set_threads(&ctx, 2 - t));
                    OCR_CHECK_OK(&ctx, ocr_nn_conv2d_forward(&ctx, &x, &w, NULL, p, &y[t]));
                    OCR_CHECK_OK(&ctx, ocr_nn_conv2d_backward(&ctx, &x, &w, &dy, p, &dx[t], &dw[t], NULL));
                }
                OCR_CHECK_MSG(memcmp(y[0].data, y[1].data, ocr_tensor_bytes(&y[0])) == 0, "%s, kernel %s: two threads' y differs from one's",
                              g->name, ocr_gemm_kernel_name(&ctx));
                OCR_CHECK_MSG(memcmp(dx[0].data, dx[1].data, ocr_tensor_bytes(&dx[0])) == 0, "%s, kernel %s: two threads' dx differs from "
                              "one's", g->name, ocr_gemm_kernel_name(&ctx));
                if (g->C >= 128) /* where both kernels take Winograd's weight gradient (the direct ones split the pixels) */
                    OCR_CHECK_MSG(memcmp(dw[0].data, dw[1].data, ocr_tensor_bytes(&dw[0])) == 0, "%s, kernel %s: two threads' dw differs "
                                  "from one's", g->name, ocr_gemm_kernel_name(&ctx));
            }
            ocr_tensor_free(&x); ocr_tensor_free(&w); ocr_tensor_free(&dy);
            for (t = 0; t < 2; t++) { ocr_tensor_free(&y[t]); ocr_tensor_free(&dx[t]); ocr_tensor_free(&dw[t]); }
            ocr_ctx_free(&ctx);
        }
}

/* ocr_nn_concat_conv2d_forward against concat_upsampled_forward then the convolution, bit for bit, on the AVX-512 and
   AVX2 kernels, 1 and 2 threads: Winograd reading the parts (one work item per band, the tiles as the GEMMs' rows, the
   phases spread over the threads), where cat must stay as it was (NaN here), and a shape Winograd does not take, where
   cat must hold the concatenation. And its refusals. */
typedef struct { const char *name; int N, H, W, K, relu, n, ch[4], f[4], winograd; /* 1: on AVX-512, 2: on AVX2 */ } concat_conv_case;
static unsigned concat_extra_flags = 0; /* debug flags the cases below run with (test_winograd_tile_items_same_bits) */
static void test_concat_conv_same_bits(void) {
    static const concat_conv_case cases[] = {
        {"4 parts (x8, x4, x2, x1) of 16 channels to 32 at 64x64, batch 2, bias and ReLU", 2, 64, 64, 32, 1, 4, {16, 16, 16, 16}, {8, 4, 2, 1}, 3},
        {"128 (x2) + 128 channels to 128 at 16x16 (16 tiles: the tiles as rows on AVX-512, not Winograd on AVX2)", 1, 16, 16, 128, 0, 2, {128, 128}, {2, 1}, 1},
        {"200 (x2) + 200 channels to 64 at 44x28 (phases spread on AVX-512)", 1, 44, 28, 64, 1, 2, {200, 200}, {2, 1}, 3},
        {"8 (x2) + 8 channels to 16 at 32x32 (not Winograd: cat written)", 1, 32, 32, 16, 1, 2, {8, 8}, {2, 1}, 0},
    };
    static const int kernels[2] = {OCR_CPU_KERNEL_AUTO, OCR_CPU_KERNEL_AVX2};
    int c, k, t, i;
    for (c = 0; c < (int)(sizeof cases / sizeof cases[0]); c++)
        for (k = 0; k < 2; k++)
            for (t = 1; t <= 2; t++) {
                const concat_conv_case *q = &cases[c];
                ocr_ctx ctx;
                ocr_tensor parts[4], cat, cat_ref, w, b, y, y_ref;
                const ocr_tensor *ptrs[4];
                ocr_conv_params p = ocr_conv_params_make(1, 1, 1, 1);
                int C = 0;
                memset(&cat, 0, sizeof cat); cat_ref = w = b = y = y_ref = cat;
                for (i = 0; i < 4; i++) { parts[i] = cat; ptrs[i] = &parts[i]; }
                OCR_CHECK_OK(&ctx, ocr_ctx_init(&ctx, t, 41 + c));
                ctx.debug_flags &= ~(unsigned)(OCR_DEBUG_REFERENCE | OCR_DEBUG_NO_WINOGRAD);
                ctx.debug_flags |= concat_extra_flags;
                ctx.cpu_kernel = kernels[k];
                if (k == 1 && strncmp(ocr_gemm_kernel_name(&ctx), "avx2", 4) != 0) { ocr_ctx_free(&ctx); continue; } /* no AVX2 here */
                for (i = 0; i < q->n; i++) {
                    OCR_CHECK_OK(&ctx, ocr_tensor_alloc(&ctx, &parts[i], "part", OCR_F32, OCR_DEVICE_CPU, ocr_shape4(q->N, q->ch[i], q->H / q->f[i], q->W / q->f[i])));
                    C += q->ch[i];
                }
                OCR_CHECK_OK(&ctx, ocr_tensor_alloc(&ctx, &cat, "cat", OCR_F32, OCR_DEVICE_CPU, ocr_shape4(q->N, C, q->H, q->W)));
                OCR_CHECK_OK(&ctx, ocr_tensor_alloc(&ctx, &cat_ref, "cat_ref", OCR_F32, OCR_DEVICE_CPU, cat.shape));
                OCR_CHECK_OK(&ctx, ocr_tensor_alloc(&ctx, &w, "w", OCR_F32, OCR_DEVICE_CPU, ocr_shape4(q->K, C, 3, 3)));
                OCR_CHECK_OK(&ctx, ocr_tensor_alloc(&ctx, &b, "b", OCR_F32, OCR_DEVICE_CPU, ocr_shape1(q->K)));
                OCR_CHECK_OK(&ctx, ocr_tensor_alloc(&ctx, &y, "y", OCR_F32, OCR_DEVICE_CPU, ocr_shape4(q->N, q->K, q->H, q->W)));
                OCR_CHECK_OK(&ctx, ocr_tensor_alloc(&ctx, &y_ref, "y_ref", OCR_F32, OCR_DEVICE_CPU, y.shape));
                if (!ocr_test__case_failed) {
                    int64_t n_cat = ocr_tensor_numel(&cat), e, nan_left = 0;
                    for (i = 0; i < q->n; i++) ocr_tensor_fill_uniform(&ctx, &parts[i], -1.0f, 1.0f);
                    ocr_tensor_fill_uniform(&ctx, &w, -0.05f, 0.05f);
                    ocr_tensor_fill_uniform(&ctx, &b, -0.5f, 0.5f);
                    for (e = 0; e < n_cat; e++) ((float *)cat.data)[e] = NAN;
                    OCR_CHECK_OK(&ctx, ocr_nn_concat_upsampled_forward(&ctx, ptrs, q->f, q->n, &cat_ref));
                    OCR_CHECK_OK(&ctx, q->relu ? ocr_nn_conv2d_relu_forward(&ctx, &cat_ref, &w, &b, p, &y_ref) : ocr_nn_conv2d_forward(&ctx, &cat_ref, &w, &b, p, &y_ref));
                    OCR_CHECK_OK(&ctx, ocr_nn_concat_conv2d_forward(&ctx, ptrs, q->f, q->n, &cat, &w, &b, p, q->relu, &y));
                    OCR_CHECK_MSG(memcmp(y.data, y_ref.data, ocr_tensor_bytes(&y)) == 0, "%s, kernel %s, %d thread(s): differs from the concatenation "
                                  "then the convolution (relative %g)", q->name, ocr_gemm_kernel_name(&ctx), t,
                                  ocr_test_rel_err((const float *)y.data, (const float *)y_ref.data, (long long)ocr_tensor_numel(&y), 1e-6));
                    for (e = 0; e < n_cat; e++) nan_left += isnan(((const float *)cat.data)[e]) != 0;
                    if (q->winograd & (strncmp(ocr_gemm_kernel_name(&ctx), "avx512", 6) == 0 ? 1 : 2)) OCR_CHECK_MSG(nan_left == n_cat, "%s, kernel %s: cat was written (%lld of %lld values): not Winograd's route", q->name,
                                                   ocr_gemm_kernel_name(&ctx), (long long)(n_cat - nan_left), (long long)n_cat);
                    else OCR_CHECK_MSG(memcmp(cat.data, cat_ref.data, ocr_tensor_bytes(&cat)) == 0, "%s, kernel %s: cat does not hold the "
                                       "concatenation", q->name, ocr_gemm_kernel_name(&ctx));
                    if (c == 0 && k == 0 && t == 1) {
                        const ocr_tensor *nine[9];
                        int f9[9];
                        for (i = 0; i < 9; i++) { nine[i] = &parts[0]; f9[i] = 8; }
                        OCR_CHECK_ERR(&ctx, ocr_nn_concat_conv2d_forward(&ctx, nine, f9, 9, &cat, &w, &b, p, 1, &y), OCR_EINVAL, "at most 8");
                        ocr_tensor alias = ocr_tensor_view("alias", OCR_F32, OCR_DEVICE_CPU, parts[3].shape, cat.data);
                        ptrs[3] = &alias;
                        OCR_CHECK_ERR(&ctx, ocr_nn_concat_conv2d_forward(&ctx, ptrs, q->f, q->n, &cat, &w, &b, p, 1, &y), OCR_EINVAL, "must not alias");
                        ptrs[3] = &parts[3];
                        OCR_CHECK_ERR(&ctx, ocr_nn_concat_conv2d_forward(&ctx, ptrs, q->f, q->n, &cat, &w, &b, p, 1, &cat), OCR_ESHAPE, "cat");
                        OCR_CHECK_ERR(&ctx, ocr_nn_concat_conv2d_forward(&ctx, ptrs, NULL, q->n, &cat, &w, &b, p, 1, &y), OCR_EINVAL, "factor");
                    }
                }
                for (i = 0; i < 4; i++) ocr_tensor_free(&parts[i]);
                ocr_tensor_free(&cat); ocr_tensor_free(&cat_ref); ocr_tensor_free(&w); ocr_tensor_free(&b);
                ocr_tensor_free(&y); ocr_tensor_free(&y_ref);
                ocr_ctx_free(&ctx);
            }
}

/* The AVX-512 forward's items as runs of 48-tile panels that start and end anywhere in a tile row (ocr__wino_plan's
   tiles) against bands of whole tile rows: the same bits, forward and data gradient, 1 and 2 threads, on shapes that
   put an item's edges in every place (rows of 20, 17, 19, 18 tiles on the permuted path, 10 and 7 on the gathered
   one, zero padding of 0 and 2, two images). */
static void test_winograd_tile_items_same_bits(void) {
    static const geom cases[] = {
        {"64->64, 46x80 (rows of 20 tiles)", 1, 64, 64, 46, 80, 3, 3, 1, 1, 1, 1, 1, 1},
        {"16->32, 17x66, pad 2 (rows of 17)", 1, 16, 32, 17, 66, 3, 3, 1, 1, 2, 2, 1, 1},
        {"24->32, 40x75, pad 0 (rows of 19, the last tile partial)", 1, 24, 32, 40, 75, 3, 3, 1, 1, 0, 0, 1, 1},
        {"16->32, 30x70 (rows of 18)", 1, 16, 32, 30, 70, 3, 3, 1, 1, 1, 1, 1, 1},
        {"256->64, 40x40 (rows of 10, gathered)", 1, 256, 64, 40, 40, 3, 3, 1, 1, 1, 1, 1, 1},
        {"64->68, 2 images 21x27 (rows of 7)", 2, 64, 68, 21, 27, 3, 3, 1, 1, 1, 1, 1, 1},
    };
    int c, t, mode;
    {
        ocr_ctx probe;
        int avx512;
        OCR_CHECK_OK(&probe, ocr_ctx_init(&probe, 1, 1));
        avx512 = strncmp(ocr_gemm_kernel_name(&probe), "avx512", 6) == 0;
        ocr_ctx_free(&probe);
        if (!avx512) { ocr_test_skip("the tile runs are the AVX-512 kernel's, and this CPU (or build) has none"); return; }
    }
    for (c = 0; c < (int)(sizeof cases / sizeof cases[0]); c++)
        for (t = 1; t <= 2; t++) {
            const geom *g = &cases[c];
            ocr_ctx ctx;
            ocr_tensor x, w, dy, y[2], dx[2];
            ocr_conv_params p = ocr_conv_params_make(1, g->ph, 1, 1);
            int OH = g->H + 2 * g->ph - 2, OW = g->W + 2 * g->pw - 2;
            memset(&x, 0, sizeof x); w = dy = y[0] = y[1] = dx[0] = dx[1] = x;
            OCR_CHECK_OK(&ctx, ocr_ctx_init(&ctx, t, 71 + c));
            ctx.debug_flags &= ~(unsigned)(OCR_DEBUG_REFERENCE | OCR_DEBUG_NO_WINOGRAD);
            OCR_CHECK_OK(&ctx, ocr_tensor_alloc(&ctx, &x, "x", OCR_F32, OCR_DEVICE_CPU, ocr_shape4(g->N, g->C, g->H, g->W)));
            OCR_CHECK_OK(&ctx, ocr_tensor_alloc(&ctx, &w, "w", OCR_F32, OCR_DEVICE_CPU, ocr_shape4(g->K, g->C, 3, 3)));
            OCR_CHECK_OK(&ctx, ocr_tensor_alloc(&ctx, &dy, "dy", OCR_F32, OCR_DEVICE_CPU, ocr_shape4(g->N, g->K, OH, OW)));
            for (mode = 0; mode < 2; mode++) {
                OCR_CHECK_OK(&ctx, ocr_tensor_alloc(&ctx, &y[mode], "y", OCR_F32, OCR_DEVICE_CPU, dy.shape));
                OCR_CHECK_OK(&ctx, ocr_tensor_alloc(&ctx, &dx[mode], "dx", OCR_F32, OCR_DEVICE_CPU, x.shape));
            }
            if (!ocr_test__case_failed) {
                ocr_tensor_fill_uniform(&ctx, &x, -1.0f, 1.0f);
                ocr_tensor_fill_uniform(&ctx, &w, -0.05f, 0.05f);
                ocr_tensor_fill_uniform(&ctx, &dy, -1.0f, 1.0f);
                for (mode = 0; mode < 2; mode++) {
                    ctx.debug_flags &= ~(unsigned)(OCR_DEBUG_WINO_ROW_BANDS | OCR_DEBUG_WINO_TILE_RUNS);
                    ctx.debug_flags |= mode ? OCR_DEBUG_WINO_TILE_RUNS : OCR_DEBUG_WINO_ROW_BANDS;
                    OCR_CHECK_OK(&ctx, ocr_nn_conv2d_forward(&ctx, &x, &w, NULL, p, &y[mode]));
                    OCR_CHECK_OK(&ctx, ocr_nn_conv2d_backward(&ctx, &x, &w, &dy, p, &dx[mode], NULL, NULL));
                }
                OCR_CHECK_MSG(memcmp(y[0].data, y[1].data, ocr_tensor_bytes(&y[0])) == 0, "%s, %d thread(s): y from runs of tiles differs "
                              "from bands of rows (relative %g)", g->name, t,
                              ocr_test_rel_err((const float *)y[1].data, (const float *)y[0].data, (long long)ocr_tensor_numel(&y[0]), 1e-6));
                OCR_CHECK_MSG(memcmp(dx[0].data, dx[1].data, ocr_tensor_bytes(&dx[0])) == 0, "%s, %d thread(s): dx from runs of tiles "
                              "differs from bands of rows", g->name, t);
            }
            ocr_tensor_free(&x); ocr_tensor_free(&w); ocr_tensor_free(&dy);
            for (mode = 0; mode < 2; mode++) { ocr_tensor_free(&y[mode]); ocr_tensor_free(&dx[mode]); }
            ocr_ctx_free(&ctx);
        }
    /* reading a concatenation's parts, whose rows are written whole */
    concat_extra_flags = OCR_DEBUG_WINO_TILE_RUNS;
    test_concat_conv_same_bits();
    concat_extra_flags = 0;
}

/* ocr_nn_conv_transpose2d_pair_forward against the two transposed convolutions in turn (ReLU after the first), bit
   for bit, on the AVX-512 and AVX2 kernels (the first's rows read from the band buffer, mid left unwritten: NaN here)
   and the portable one (mid written), 1 and 2 threads, rows that leave partial vectors and chunks, a batch of 2; and
   its refusals. */
static void test_convt_pair_same_bits(void) {
    static const int sizes[][4] = {{2, 64, 10, 12}, {1, 16, 7, 9}, {1, 64, 40, 40}}; /* N, C, H, W of x */
    static const int kernels[3] = {OCR_CPU_KERNEL_AUTO, OCR_CPU_KERNEL_AVX2, OCR_CPU_KERNEL_PORTABLE};
    int c, k, t;
    for (c = 0; c < (int)(sizeof sizes / sizeof sizes[0]); c++)
        for (k = 0; k < 3; k++)
            for (t = 1; t <= 2; t++) {
                ocr_ctx ctx;
                ocr_tensor x, w1, b1, w2, b2, mid, mid_ref, y, y_ref;
                ocr_conv_params p = ocr_conv_params_make(2, 0, 1, 1);
                int N = sizes[c][0], C = sizes[c][1], H = sizes[c][2], W = sizes[c][3];
                memset(&x, 0, sizeof x); w1 = b1 = w2 = b2 = mid = mid_ref = y = y_ref = x;
                OCR_CHECK_OK(&ctx, ocr_ctx_init(&ctx, t, 61 + c));
                ctx.debug_flags &= ~(unsigned)OCR_DEBUG_REFERENCE;
                ctx.cpu_kernel = kernels[k];
                if (k == 1 && strncmp(ocr_gemm_kernel_name(&ctx), "avx2", 4) != 0) { ocr_ctx_free(&ctx); continue; } /* no AVX2 here */
                OCR_CHECK_OK(&ctx, ocr_tensor_alloc(&ctx, &x, "x", OCR_F32, OCR_DEVICE_CPU, ocr_shape4(N, C, H, W)));
                OCR_CHECK_OK(&ctx, ocr_tensor_alloc(&ctx, &w1, "w1", OCR_F32, OCR_DEVICE_CPU, ocr_shape4(C, C, 2, 2)));
                OCR_CHECK_OK(&ctx, ocr_tensor_alloc(&ctx, &b1, "b1", OCR_F32, OCR_DEVICE_CPU, ocr_shape1(C)));
                OCR_CHECK_OK(&ctx, ocr_tensor_alloc(&ctx, &w2, "w2", OCR_F32, OCR_DEVICE_CPU, ocr_shape4(C, 1, 2, 2)));
                OCR_CHECK_OK(&ctx, ocr_tensor_alloc(&ctx, &b2, "b2", OCR_F32, OCR_DEVICE_CPU, ocr_shape1(1)));
                OCR_CHECK_OK(&ctx, ocr_tensor_alloc(&ctx, &mid, "mid", OCR_F32, OCR_DEVICE_CPU, ocr_shape4(N, C, 2 * H, 2 * W)));
                OCR_CHECK_OK(&ctx, ocr_tensor_alloc(&ctx, &mid_ref, "mid_ref", OCR_F32, OCR_DEVICE_CPU, mid.shape));
                OCR_CHECK_OK(&ctx, ocr_tensor_alloc(&ctx, &y, "y", OCR_F32, OCR_DEVICE_CPU, ocr_shape4(N, 1, 4 * H, 4 * W)));
                OCR_CHECK_OK(&ctx, ocr_tensor_alloc(&ctx, &y_ref, "y_ref", OCR_F32, OCR_DEVICE_CPU, y.shape));
                if (!ocr_test__case_failed) {
                    int64_t n_mid = ocr_tensor_numel(&mid), e, nan_left = 0;
                    const char *kn = ocr_gemm_kernel_name(&ctx);
                    ocr_tensor_fill_uniform(&ctx, &x, -1.0f, 1.0f);
                    ocr_tensor_fill_uniform(&ctx, &w1, -0.2f, 0.2f);
                    ocr_tensor_fill_uniform(&ctx, &b1, -0.3f, 0.3f);
                    ocr_tensor_fill_uniform(&ctx, &w2, -0.2f, 0.2f);
                    ocr_tensor_fill_uniform(&ctx, &b2, -0.3f, 0.3f);
                    for (e = 0; e < n_mid; e++) ((float *)mid.data)[e] = NAN;
                    OCR_CHECK_OK(&ctx, ocr_nn_conv_transpose2d_relu_forward(&ctx, &x, &w1, &b1, p, &mid_ref));
                    OCR_CHECK_OK(&ctx, ocr_nn_conv_transpose2d_forward(&ctx, &mid_ref, &w2, &b2, p, &y_ref));
                    OCR_CHECK_OK(&ctx, ocr_nn_conv_transpose2d_pair_forward(&ctx, &x, &w1, &b1, &mid, &w2, &b2, &y));
                    OCR_CHECK_MSG(memcmp(y.data, y_ref.data, ocr_tensor_bytes(&y)) == 0, "x %dx%dx%dx%d, kernel %s, %d thread(s): differs from the "
                                  "two transposed convolutions (relative %g)", N, C, H, W, kn, t,
                                  ocr_test_rel_err((const float *)y.data, (const float *)y_ref.data, (long long)ocr_tensor_numel(&y), 1e-6));
                    for (e = 0; e < n_mid; e++) nan_left += isnan(((const float *)mid.data)[e]) != 0;
                    if (strncmp(kn, "avx", 3) == 0) OCR_CHECK_MSG(nan_left == n_mid, "x %dx%dx%dx%d: mid was written by %s", N, C, H, W, kn);
                    else OCR_CHECK_MSG(memcmp(mid.data, mid_ref.data, ocr_tensor_bytes(&mid)) == 0, "x %dx%dx%dx%d, kernel %s: mid does not hold "
                                       "the first's output", N, C, H, W, kn);
                    if (c == 0 && k == 0 && t == 1) {
                        ocr_tensor w2c = ocr_tensor_view("w2c", OCR_F32, OCR_DEVICE_CPU, ocr_shape4(C / 2, 2, 2, 2), w2.data);
                        OCR_CHECK_ERR(&ctx, ocr_nn_conv_transpose2d_pair_forward(&ctx, &x, &w1, &b1, &mid, &w2, &b2, &mid), OCR_ESHAPE, "mid");
                        OCR_CHECK_ERR(&ctx, ocr_nn_conv_transpose2d_pair_forward(&ctx, &x, &w1, &b1, &x, &w2, &b2, &y), OCR_ESHAPE, "x");
                        OCR_CHECK_ERR(&ctx, ocr_nn_conv_transpose2d_pair_forward(&ctx, &x, &w1, &b1, NULL, &w2, &b2, &y), OCR_EINVAL, "mid");
                        OCR_CHECK_ERR(&ctx, ocr_nn_conv_transpose2d_pair_forward(&ctx, &x, &w1, &b1, &mid, &w2c, &b2, &y), OCR_ESHAPE, "w2c");
                    }
                }
                ocr_tensor_free(&x); ocr_tensor_free(&w1); ocr_tensor_free(&b1); ocr_tensor_free(&w2); ocr_tensor_free(&b2);
                ocr_tensor_free(&mid); ocr_tensor_free(&mid_ref); ocr_tensor_free(&y); ocr_tensor_free(&y_ref);
                ocr_ctx_free(&ctx);
            }
}

/* The sigmoid on every kernel (AVX-512's and AVX2's polynomial exp, the scalar expf of the portable one) against exp
   in double: within 4e-7 relative across [-110, 110] in steps of 1/128 (outputs under 1e-37 within 4e-37 absolute;
   AVX-512 measured 1.6e-7), 0 and 1 at -inf and +inf, NaN kept, 0.5 at -0 and 0, the largest floats; 28170 values,
   so the last vector is part full. The two vector paths give the same bits. */
static void test_sigmoid_paths(void) {
    static const int kernels[3] = {OCR_CPU_KERNEL_AUTO, OCR_CPU_KERNEL_AVX2, OCR_CPU_KERNEL_PORTABLE};
    enum { N = 28160 + 10 };
    static float wide[N]; /* the AVX-512 path's outputs, for the AVX2 path's bits */
    int k, have_wide = 0;
    int64_t i;
    for (k = 0; k < 3; k++) {
        ocr_ctx ctx;
        ocr_tensor x, y;
        memset(&x, 0, sizeof x); y = x;
        OCR_CHECK_OK(&ctx, ocr_ctx_init(&ctx, 2, 5));
        ctx.debug_flags &= ~(unsigned)OCR_DEBUG_REFERENCE;
        ctx.cpu_kernel = kernels[k];
        OCR_CHECK_OK(&ctx, ocr_tensor_alloc(&ctx, &x, "x", OCR_F32, OCR_DEVICE_CPU, ocr_shape1(N)));
        OCR_CHECK_OK(&ctx, ocr_tensor_alloc(&ctx, &y, "y", OCR_F32, OCR_DEVICE_CPU, ocr_shape1(N)));
        if (!ocr_test__case_failed) {
            float *xs = (float *)x.data, *ys = (float *)y.data;
            const float special[10] = {-INFINITY, INFINITY, NAN, -0.0f, 0.0f, FLT_MAX, -FLT_MAX, 1e-40f, -87.5f, -103.9f};
            double worst = 0.0;
            int64_t at = -1;
            for (i = 0; i < N - 10; i++) xs[i] = -110.0f + (float)i / 128.0f;
            for (i = 0; i < 10; i++) xs[N - 10 + i] = special[i];
            OCR_CHECK_OK(&ctx, ocr_nn_sigmoid_forward(&ctx, &x, &y));
            for (i = 0; i < N; i++) {
                double ref = 1.0 / (1.0 + exp(-(double)xs[i])), err;
                if (xs[i] != xs[i]) { OCR_CHECK_MSG(ys[i] != ys[i], "sigmoid(NaN) = %g, kernel %s", ys[i], ocr_gemm_kernel_name(&ctx)); continue; }
                err = ref < 1e-37 ? fabs(ys[i] - ref) / 1e-37 * 1e-7 : fabs(ys[i] - ref) / ref;
                if (err > worst) { worst = err; at = i; }
            }
            OCR_CHECK_MSG(worst <= 4e-7, "kernel %s: sigmoid(%.9g) = %.9g, off by %g relative", ocr_gemm_kernel_name(&ctx),
                          at >= 0 ? xs[at] : 0.0, at >= 0 ? ys[at] : 0.0, worst);
            OCR_CHECK(ys[N - 10] == 0.0f && ys[N - 9] == 1.0f && ys[N - 7] == 0.5f && ys[N - 6] == 0.5f);
            if (strncmp(ocr_gemm_kernel_name(&ctx), "avx512", 6) == 0) { memcpy(wide, ys, sizeof wide); have_wide = 1; }
            if (have_wide && strncmp(ocr_gemm_kernel_name(&ctx), "avx2", 4) == 0)
                OCR_CHECK_MSG(memcmp(wide, ys, sizeof wide) == 0, "the AVX2 sigmoid's bits differ from the AVX-512 one's");
        }
        ocr_tensor_free(&x); ocr_tensor_free(&y);
        ocr_ctx_free(&ctx);
    }
}

static int same_bits(const ocr_tensor *a, const ocr_tensor *b) {
    return memcmp(a->data, b->data, ocr_tensor_bytes(a)) == 0;
}

/* Fused BN+ReLU against the unfused pair, bit for bit; batchnorm2d_apply against the forward it repeats; both
   backwards in place (dx = dy) against a zeroed dx. */
static void test_bn_relu_fused(void) {
    enum { N = 3, C = 5, H = 7, W = 9 };
    ocr_ctx ctx;
    ocr_tensor t[20];
    const char *names[20] = {"x", "gamma", "beta", "rm1", "rv1", "sm1", "si1", "y1", "rm2", "rv2", "sm2", "si2", "y2", "dy",
                             "dx1", "dg1", "db1", "dx2", "dg2", "db2"};
    ocr_tensor tmp, extra[2];
    int i, training;
    memset(t, 0, sizeof t);
    memset(extra, 0, sizeof extra);
    memset(&tmp, 0, sizeof tmp);
    OCR_CHECK_OK(&ctx, ocr_ctx_init(&ctx, 2, 3));
    for (training = 0; training <= 1; training++) {
        for (i = 0; i < 20; i++) {
            int vec = (i >= 1 && i <= 6) || (i >= 8 && i <= 11) || i == 15 || i == 16 || i == 18 || i == 19;
            OCR_CHECK_OK(&ctx, ocr_tensor_alloc(&ctx, &t[i], names[i], OCR_F32, OCR_DEVICE_CPU, vec ? ocr_shape1(C) : ocr_shape4(N, C, H, W)));
            OCR_CHECK_OK(&ctx, ocr_tensor_fill_uniform(&ctx, &t[i], 0.5f, 1.5f));
        }
        OCR_CHECK_OK(&ctx, ocr_tensor_alloc(&ctx, &tmp, "relu_grad", OCR_F32, OCR_DEVICE_CPU, ocr_shape4(N, C, H, W)));
        if (ocr_test__case_failed) break;
        ocr_tensor_fill_uniform(&ctx, &t[0], -2.0f, 2.0f);
        ocr_tensor_fill_uniform(&ctx, &t[2], -0.5f, 0.5f);
        ocr_tensor_fill_uniform(&ctx, &t[13], -1.0f, 1.0f);
        /* a masked-out Inf gradient and a NaN input must behave as in the unfused pair */
        ((float *)t[13].data)[4] = INFINITY;
        ((float *)t[0].data)[N * C * H * W - 1] = NAN;
        for (i = 0; i < C; i++) { ((float *)t[8].data)[i] = ((float *)t[3].data)[i]; ((float *)t[9].data)[i] = ((float *)t[4].data)[i]; }
        for (i = 0; i < 3; i++) memcpy(t[17 + i].data, t[14 + i].data, ocr_tensor_bytes(&t[14 + i]));
        OCR_CHECK_OK(&ctx, ocr_nn_batchnorm2d_forward(&ctx, &t[0], &t[1], &t[2], &t[3], &t[4], training, 0.1f, 1e-5f, &t[5], &t[6], &t[7]));
        OCR_CHECK_OK(&ctx, ocr_nn_relu_forward(&ctx, &t[7], &t[7]));
        OCR_CHECK_OK(&ctx, ocr_nn_batchnorm2d_relu_forward(&ctx, &t[0], &t[1], &t[2], &t[8], &t[9], training, 0.1f, 1e-5f, &t[10], &t[11], &t[12]));
        OCR_CHECK(same_bits(&t[7], &t[12]) && same_bits(&t[3], &t[8]) && same_bits(&t[4], &t[9]) && same_bits(&t[5], &t[10]) &&
                  same_bits(&t[6], &t[11]));
        if (((float *)t[13].data)[4] == INFINITY && ((float *)t[7].data)[4] > 0.0f) ((float *)t[13].data)[4] = 1.0f; /* keep it masked */
        OCR_CHECK_OK(&ctx, ocr_tensor_zero(&ctx, &tmp));
        OCR_CHECK_OK(&ctx, ocr_nn_relu_backward(&ctx, &t[7], &t[13], &tmp));
        OCR_CHECK_OK(&ctx, ocr_nn_batchnorm2d_backward(&ctx, &t[0], &t[1], &t[5], &t[6], &tmp, training, &t[14], &t[15], &t[16]));
        OCR_CHECK_OK(&ctx, ocr_nn_batchnorm2d_relu_backward(&ctx, &t[0], &t[12], &t[1], &t[10], &t[11], &t[13], training, &t[17], &t[18], &t[19]));
        OCR_CHECK_MSG(same_bits(&t[14], &t[17]) && same_bits(&t[15], &t[18]) && same_bits(&t[16], &t[19]),
                      "fused backward differs from relu_backward + batchnorm2d_backward (training %d)", training);
        OCR_CHECK_ERR(&ctx, ocr_nn_batchnorm2d_relu_forward(&ctx, &t[0], &t[1], &t[2], &t[8], &t[9], training, 0.1f, 1e-5f, &t[10], &t[11], &t[0]),
                      OCR_EINVAL, "must not alias");
        /* the output again from the saved statistics (what a backward recomputes), and both backwards in place */
        for (i = 0; i < 2; i++)
            OCR_CHECK_OK(&ctx, ocr_tensor_alloc(&ctx, &extra[i], i ? "dy_in_place" : "zeroed_dx", OCR_F32, OCR_DEVICE_CPU, ocr_shape4(N, C, H, W)));
        if (ocr_test__case_failed) break;
        OCR_CHECK_OK(&ctx, ocr_nn_batchnorm2d_apply(&ctx, &t[0], &t[1], &t[2], &t[10], &t[11], 1, &extra[0]));
        OCR_CHECK_MSG(same_bits(&extra[0], &t[12]), "batchnorm2d_apply differs from the forward (training %d)", training);
        for (i = 0; i < 2; i++) {
            const ocr_tensor *dy = i ? &t[13] : &tmp;
            OCR_CHECK_OK(&ctx, ocr_tensor_zero(&ctx, &extra[0]));
            memcpy(extra[1].data, dy->data, ocr_tensor_bytes(dy));
            if (i) {
                OCR_CHECK_OK(&ctx, ocr_nn_batchnorm2d_relu_backward(&ctx, &t[0], &t[12], &t[1], &t[10], &t[11], dy, training, &extra[0], NULL, NULL));
                OCR_CHECK_OK(&ctx, ocr_nn_batchnorm2d_relu_backward(&ctx, &t[0], &t[12], &t[1], &t[10], &t[11], &extra[1], training, &extra[1], NULL, NULL));
            } else {
                OCR_CHECK_OK(&ctx, ocr_nn_batchnorm2d_backward(&ctx, &t[0], &t[1], &t[5], &t[6], dy, training, &extra[0], NULL, NULL));
                OCR_CHECK_OK(&ctx, ocr_nn_batchnorm2d_backward(&ctx, &t[0], &t[1], &t[5], &t[6], &extra[1], training, &extra[1], NULL, NULL));
            }
            OCR_CHECK_MSG(same_bits(&extra[0], &extra[1]), "%s backward in place differs from a zeroed dx (training %d)", i ? "fused" : "plain", training);
        }
        OCR_CHECK_ERR(&ctx, ocr_nn_batchnorm2d_backward(&ctx, &t[0], &t[1], &t[5], &t[6], &tmp, training, &t[0], NULL, NULL), OCR_EINVAL, "overlaps 'x'");
        for (i = 0; i < 20; i++) ocr_tensor_free(&t[i]);
        for (i = 0; i < 2; i++) ocr_tensor_free(&extra[i]);
        ocr_tensor_free(&tmp);
    }
    for (i = 0; i < 20; i++) ocr_tensor_free(&t[i]);
    for (i = 0; i < 2; i++) ocr_tensor_free(&extra[i]);
    ocr_tensor_free(&tmp);
    ocr_ctx_free(&ctx);
}

/* Transposed convolutions whose kernel equals the stride (one GEMM per chunk of input rows, each output written
   once, a large output with non-temporal stores) and a general one, against the reference, with its backward and the ReLU-fused forward, on the AVX-512 and
   AVX2 kernels. */
static void test_conv_transpose_paths(void) {
    static const geom cases[] = {
        /* name, N, C = output channels, K = input channels, H, W (output), kernel, stride, pad, dilation, groups */
        {"2x2/2, 16->16, 80x96 out (DBNet head)", 2, 16, 16, 80, 96, 2, 2, 2, 2, 0, 0, 1, 1},
        {"2x2/2, 16->16, 30x42 out (rows of 21: partial vectors)", 1, 16, 16, 30, 42, 2, 2, 2, 2, 0, 0, 1, 1},
        {"2x2/2, 16->1, 64x40 out (the last head layer)", 3, 1, 16, 64, 40, 2, 2, 2, 2, 0, 0, 1, 1},
        /* 8.4 MB out: stored around the caches (OCR__STREAM_BYTES), rows of 514 floats whose starts move through
           the 64-byte alignments, so streamed and plain stores mix */
        {"2x2/2, 8->8, 512x514 out (streamed stores)", 1, 8, 8, 512, 514, 2, 2, 2, 2, 0, 0, 1, 1},
        {"3x2/3x2, 5->7, 27x14 out", 1, 7, 5, 27, 14, 3, 2, 3, 2, 0, 0, 1, 1},
        {"3x3/2 pad 1 (general path), 4->6", 2, 6, 4, 15, 17, 3, 3, 2, 2, 1, 1, 1, 1},
    };
    static const int kernels[2] = {OCR_CPU_KERNEL_AUTO, OCR_CPU_KERNEL_AVX2};
    int c, threads, k;
    for (k = 0; k < 2; k++)
    for (c = 0; c < (int)(sizeof cases / sizeof cases[0]); c++)
        for (threads = 1; threads <= 2; threads++) {
            const geom *t = &cases[c];
            ocr_ctx ctx;
            ocr_conv_params p = ocr_conv_params_make(t->sh, t->ph, 1, 1);
            ocr_tensor xin, w, b, y, ry, dy, g[6];
            int OH = (t->H + 2 * t->ph - t->kh) / t->sh + 1, OW = (t->W + 2 * t->pw - t->kw) / t->sw + 1, i;
            long ny = (long)t->N * t->C * t->H * t->W;
            memset(&xin, 0, sizeof xin); w = b = y = ry = dy = xin;
            memset(g, 0, sizeof g);
            p.stride_w = t->sw; p.pad_w = t->pw;
            OCR_CHECK_OK(&ctx, ocr_ctx_init(&ctx, threads, 5));
            ctx.debug_flags &= ~(unsigned)OCR_DEBUG_REFERENCE;
            ctx.cpu_kernel = kernels[k];
            if (k == 1 && strncmp(ocr_gemm_kernel_name(&ctx), "avx2", 4) != 0) { ocr_ctx_free(&ctx); continue; } /* no AVX2 here */
            OCR_CHECK_OK(&ctx, ocr_tensor_alloc(&ctx, &xin, "x", OCR_F32, OCR_DEVICE_CPU, ocr_shape4(t->N, t->K, OH, OW)));
            OCR_CHECK_OK(&ctx, ocr_tensor_alloc(&ctx, &w, "w", OCR_F32, OCR_DEVICE_CPU, ocr_shape4(t->K, t->C, t->kh, t->kw)));
            OCR_CHECK_OK(&ctx, ocr_tensor_alloc(&ctx, &b, "b", OCR_F32, OCR_DEVICE_CPU, ocr_shape1(t->C)));
            OCR_CHECK_OK(&ctx, ocr_tensor_alloc(&ctx, &y, "y", OCR_F32, OCR_DEVICE_CPU, ocr_shape4(t->N, t->C, t->H, t->W)));
            OCR_CHECK_OK(&ctx, ocr_tensor_alloc(&ctx, &ry, "ref_y", OCR_F32, OCR_DEVICE_CPU, y.shape));
            OCR_CHECK_OK(&ctx, ocr_tensor_alloc(&ctx, &dy, "dy", OCR_F32, OCR_DEVICE_CPU, y.shape));
            for (i = 0; i < 6; i++) /* dx, dw, db of the fast path, then of the reference */
                OCR_CHECK_OK(&ctx, ocr_tensor_alloc(&ctx, &g[i], i % 3 == 0 ? "dx" : i % 3 == 1 ? "dw" : "db", OCR_F32, OCR_DEVICE_CPU,
                                                    i % 3 == 0 ? xin.shape : i % 3 == 1 ? w.shape : b.shape));
            if (!ocr_test__case_failed) {
                ocr_tensor_fill_uniform(&ctx, &xin, -1.0f, 1.0f);
                ocr_tensor_fill_uniform(&ctx, &w, -0.5f, 0.5f);
                ocr_tensor_fill_uniform(&ctx, &b, -0.5f, 0.5f);
                ocr_tensor_fill_uniform(&ctx, &dy, -1.0f, 1.0f);
                ocr_tensor_fill(&ctx, &y, 7.0); /* every output must be written */
                for (i = 0; i < 6; i++) ocr_tensor_fill(&ctx, &g[i], 0.5); /* gradients accumulate */
                OCR_CHECK_OK(&ctx, ocr_nn_conv_transpose2d_forward(&ctx, &xin, &w, &b, p, &y));
                OCR_CHECK_OK(&ctx, ocr_nn_conv_transpose2d_backward(&ctx, &xin, &w, &dy, p, &g[0], &g[1], &g[2]));
                ON_REFERENCE(&ctx, OCR_CHECK_OK(&ctx, ocr_nn_conv_transpose2d_forward(&ctx, &xin, &w, &b, p, &ry)));
                ON_REFERENCE(&ctx, OCR_CHECK_OK(&ctx, ocr_nn_conv_transpose2d_backward(&ctx, &xin, &w, &dy, p, &g[3], &g[4], &g[5])));
                OCR_CHECK_MSG(ocr_test_rel_err((const float *)y.data, (const float *)ry.data, ny, 1e-6) <= 2e-6, "%s, %s, %d thread(s): off by %g",
                              t->name, ocr_gemm_kernel_name(&ctx), threads, ocr_test_rel_err((const float *)y.data, (const float *)ry.data, ny, 1e-6));
                for (i = 0; i < 3; i++)
                    OCR_CHECK_MSG(ocr_test_rel_err((const float *)g[i].data, (const float *)g[i + 3].data, (long long)ocr_tensor_numel(&g[i]), 1e-6) <= 2e-6,
                                  "%s, %s, %d thread(s): %s off by %g", t->name, ocr_gemm_kernel_name(&ctx), threads, g[i].name,
                                  ocr_test_rel_err((const float *)g[i].data, (const float *)g[i + 3].data, (long long)ocr_tensor_numel(&g[i]), 1e-6));
                /* the fused ReLU (inference with BN folded) equals the op then relu_forward, bit for bit */
                ocr_tensor_fill(&ctx, &ry, 7.0);
                OCR_CHECK_OK(&ctx, ocr_nn_conv_transpose2d_relu_forward(&ctx, &xin, &w, &b, p, &ry));
                OCR_CHECK_OK(&ctx, ocr_nn_relu_forward(&ctx, &y, &y));
                OCR_CHECK_MSG(memcmp(y.data, ry.data, ocr_tensor_bytes(&y)) == 0, "%s, %s, %d thread(s): conv_transpose2d_relu_forward differs "
                              "from conv_transpose2d_forward + relu_forward", t->name, ocr_gemm_kernel_name(&ctx), threads);
            }
            ocr_tensor_free(&xin); ocr_tensor_free(&w); ocr_tensor_free(&b); ocr_tensor_free(&y); ocr_tensor_free(&ry); ocr_tensor_free(&dy);
            for (i = 0; i < 6; i++) ocr_tensor_free(&g[i]);
            ocr_ctx_free(&ctx);
        }
}

/* The one-output-channel 2x2/2 transposed convolution (DBNet's last head layer: sums in registers straight from the
   input planes) against channel 0 of a two-channel one with the same weights there (the GEMM path): bit for bit, on
   the AVX-512 and AVX2 kernels, with and without the fused ReLU, row widths that leave a partial vector (37: 16 + 16
   + 5 and 8 + 8 + ... + 5; 13: under one AVX2 step of 16), 1 and 2 threads. */
static void test_conv_transpose_one_channel(void) {
    static const int kernels[2] = {OCR_CPU_KERNEL_AUTO, OCR_CPU_KERNEL_AVX2}, widths[2] = {37, 13};
    int kern, wide, threads, relu;
    for (kern = 0; kern < 2; kern++)
        for (wide = 0; wide < 2; wide++)
            for (threads = 1; threads <= 2; threads++)
                for (relu = 0; relu <= 1; relu++) {
                    enum { N = 2, K = 24, OH = 9 };
                    const int OW = widths[wide];
                    ocr_ctx ctx;
                    ocr_conv_params p = ocr_conv_params_make(2, 0, 1, 1);
                    ocr_tensor x, w1, w2, b1, b2, y1, y2;
                    memset(&x, 0, sizeof x); w1 = w2 = b1 = b2 = y1 = y2 = x;
                    OCR_CHECK_OK(&ctx, ocr_ctx_init(&ctx, threads, 21));
                    ctx.debug_flags &= ~(unsigned)OCR_DEBUG_REFERENCE;
                    ctx.cpu_kernel = kernels[kern];
                    if (kern == 1 && strncmp(ocr_gemm_kernel_name(&ctx), "avx2", 4) != 0) { ocr_ctx_free(&ctx); continue; } /* no AVX2 here */
                    OCR_CHECK_OK(&ctx, ocr_tensor_alloc(&ctx, &x, "x", OCR_F32, OCR_DEVICE_CPU, ocr_shape4(N, K, OH, OW)));
                    OCR_CHECK_OK(&ctx, ocr_tensor_alloc(&ctx, &w1, "w1", OCR_F32, OCR_DEVICE_CPU, ocr_shape4(K, 1, 2, 2)));
                    OCR_CHECK_OK(&ctx, ocr_tensor_alloc(&ctx, &w2, "w2", OCR_F32, OCR_DEVICE_CPU, ocr_shape4(K, 2, 2, 2)));
                    OCR_CHECK_OK(&ctx, ocr_tensor_alloc(&ctx, &b1, "b1", OCR_F32, OCR_DEVICE_CPU, ocr_shape1(1)));
                    OCR_CHECK_OK(&ctx, ocr_tensor_alloc(&ctx, &b2, "b2", OCR_F32, OCR_DEVICE_CPU, ocr_shape1(2)));
                    OCR_CHECK_OK(&ctx, ocr_tensor_alloc(&ctx, &y1, "y1", OCR_F32, OCR_DEVICE_CPU, ocr_shape4(N, 1, 2 * OH, 2 * OW)));
                    OCR_CHECK_OK(&ctx, ocr_tensor_alloc(&ctx, &y2, "y2", OCR_F32, OCR_DEVICE_CPU, ocr_shape4(N, 2, 2 * OH, 2 * OW)));
                    if (!ocr_test__case_failed) {
                        const float *w1d = (const float *)w1.data;
                        float *w2d = (float *)w2.data;
                        int k, t, n;
                        ocr_tensor_fill_uniform(&ctx, &x, -1.0f, 1.0f);
                        ocr_tensor_fill_uniform(&ctx, &w1, -0.5f, 0.5f);
                        ocr_tensor_fill_uniform(&ctx, &w2, -0.5f, 0.5f);
                        ocr_tensor_fill_uniform(&ctx, &b2, -0.5f, 0.5f);
                        for (k = 0; k < K; k++) for (t = 0; t < 4; t++) w2d[k * 8 + t] = w1d[k * 4 + t]; /* output channel 0 */
                        ((float *)b1.data)[0] = ((const float *)b2.data)[0];
                        ocr_tensor_fill(&ctx, &y1, 7.0);
                        OCR_CHECK_OK(&ctx, relu ? ocr_nn_conv_transpose2d_relu_forward(&ctx, &x, &w1, &b1, p, &y1) : ocr_nn_conv_transpose2d_forward(&ctx, &x, &w1, &b1, p, &y1));
                        OCR_CHECK_OK(&ctx, relu ? ocr_nn_conv_transpose2d_relu_forward(&ctx, &x, &w2, &b2, p, &y2) : ocr_nn_conv_transpose2d_forward(&ctx, &x, &w2, &b2, p, &y2));
                        for (n = 0; n < N; n++)
                            OCR_CHECK_MSG(memcmp((const float *)y1.data + n * 4 * OH * OW, (const float *)y2.data + n * 8 * OH * OW, (size_t)(4 * OH * OW) * sizeof(float)) == 0,
                                          "kernel %s, width %d, %d thread(s), relu %d, image %d: the one-channel path differs from channel 0 of the GEMM path",
                                          ocr_gemm_kernel_name(&ctx), OW, threads, relu, n);
                    }
                    ocr_tensor_free(&x); ocr_tensor_free(&w1); ocr_tensor_free(&w2); ocr_tensor_free(&b1); ocr_tensor_free(&b2);
                    ocr_tensor_free(&y1); ocr_tensor_free(&y2);
                    ocr_ctx_free(&ctx);
                }
}

/* Every BN's affine parameters and running statistics drawn away from their initial values (found by the running
   mean's public name), so that every fold does something. */
static void randomize_bns(ocr_ctx *ctx, ocr_dbnet *m) {
    int i;
    for (i = 0; i < m->params.count; i++) {
        const char *name = m->params.info[i].name, *suffix = strstr(name, ".running_mean");
        static const char *const parts[4] = {"weight", "bias", "running_mean", "running_var"};
        static const float lo[4] = {0.5f, -0.2f, -0.2f, 0.5f}, hi[4] = {1.5f, 0.2f, 0.2f, 2.0f};
        int k;
        if (!suffix || suffix[13] != 0) continue;
        for (k = 0; k < 4; k++) {
            char full[256];
            ocr_tensor t;
            int j;
            snprintf(full, sizeof full, "%.*s.%s", (int)(suffix - name), name, parts[k]);
            j = ocr_params_find(&m->params, full);
            OCR_CHECK_MSG(j >= 0, "no parameter %s", full);
            if (j < 0) continue;
            t = ocr_params_value(&m->params, j);
            ocr_tensor_fill_uniform(ctx, &t, lo[k], hi[k]);
        }
    }
}

/* Eval forward with BN folded into the convolutions against the unfolded one, with BN statistics and affine
   parameters drawn away from their initial values so that every fold does something. */
static void test_dbnet_bn_fold(void) {
    ocr_ctx ctx;
    ocr_dbnet m;
    ocr_dbnet_config cfg = ocr_dbnet_config_default();
    ocr_tensor x, prob;
    float *ref_prob = NULL;
    int threads;
    memset(&ctx, 0, sizeof ctx);
    memset(&x, 0, sizeof x);
    memset(&m, 0, sizeof m);
    cfg.width = 0.25f;
    for (threads = 1; threads <= 2; threads++) {
        OCR_CHECK_OK(&ctx, ocr_ctx_init(&ctx, threads, 11));
        OCR_CHECK_OK(&ctx, ocr_dbnet_init(&ctx, &m, &cfg));
        OCR_CHECK_OK(&ctx, ocr_tensor_alloc(&ctx, &x, "x", OCR_F32, OCR_DEVICE_CPU, ocr_shape4(2, 3, 64, 96)));
        if (ocr_test__case_failed) break;
        ocr_tensor_fill_uniform(&ctx, &x, -1.0f, 1.0f);
        randomize_bns(&ctx, &m);
        OCR_CHECK_OK(&ctx, ocr_dbnet_set_options(&ctx, &m, OCR_DBNET_NO_BN_FOLD));
        OCR_CHECK_OK(&ctx, ocr_dbnet_forward(&ctx, &m, &x, 0, &prob, NULL));
        if (ocr_test__case_failed) break;
        ref_prob = (float *)malloc(ocr_tensor_bytes(&prob));
        if (!ref_prob) { OCR_CHECK_MSG(0, "out of memory"); break; }
        memcpy(ref_prob, prob.data, ocr_tensor_bytes(&prob));
        OCR_CHECK_OK(&ctx, ocr_dbnet_set_options(&ctx, &m, 0));
        OCR_CHECK_OK(&ctx, ocr_dbnet_forward(&ctx, &m, &x, 0, &prob, NULL));
        printf("     %d thread(s): folded eval forward vs unfolded: probability map %.2e (relative)\n", threads,
               ocr_test_rel_err((const float *)prob.data, ref_prob, (long long)ocr_tensor_numel(&prob), 1e-6));
        OCR_CHECK_MSG(ocr_test_rel_err((const float *)prob.data, ref_prob, (long long)ocr_tensor_numel(&prob), 1e-6) <= 1e-4,
                      "%d thread(s): folded probability map off by %g", threads,
                      ocr_test_rel_err((const float *)prob.data, ref_prob, (long long)ocr_tensor_numel(&prob), 1e-6));
        /* the fold reads the parameters of this call: a changed BN shows at once (nothing folded is cached) */
        {
            ocr_tensor beta = ocr_params_value(&m.params, ocr_params_find(&m.params, "decoder.binarize.4.bias"));
            ocr_tensor_fill(&ctx, &beta, -1e3);
        }
        OCR_CHECK_OK(&ctx, ocr_dbnet_forward(&ctx, &m, &x, 0, &prob, NULL));
        OCR_CHECK_MSG(memcmp(prob.data, ref_prob, ocr_tensor_bytes(&prob)) != 0, "a changed BN bias did not change the folded forward");
        free(ref_prob);
        ref_prob = NULL;
        ocr_tensor_free(&x);
        ocr_dbnet_free(&m);
        ocr_ctx_free(&ctx);
    }
    free(ref_prob);
    ocr_tensor_free(&x);
    ocr_dbnet_free(&m);
    ocr_ctx_free(&ctx);
}

/* The eval fusions (a residual block's addition and ReLU inside its folded convolution, add + ReLU, upsample + add)
   against the same forward with each op on its own: bit for bit, on shapes that take the convolution's Winograd
   (whole rows of tiles and scattered tiles), implicit and im2col paths, a batch of 2, 1 and 2 threads. */
static void test_dbnet_eval_fusion(void) {
    static const float widths[2] = {0.25f, 0.5f};
    int wi, threads;
    for (wi = 0; wi < 2; wi++)
        for (threads = 1; threads <= 2; threads++) {
            ocr_ctx ctx;
            ocr_dbnet m;
            ocr_dbnet_config cfg = ocr_dbnet_config_default();
            ocr_tensor x, prob;
            float *ref = NULL;
            memset(&m, 0, sizeof m);
            memset(&x, 0, sizeof x);
            cfg.width = widths[wi];
            OCR_CHECK_OK(&ctx, ocr_ctx_init(&ctx, threads, 12));
            OCR_CHECK_OK(&ctx, ocr_dbnet_init(&ctx, &m, &cfg));
            OCR_CHECK_OK(&ctx, ocr_tensor_alloc(&ctx, &x, "x", OCR_F32, OCR_DEVICE_CPU, ocr_shape4(2, 3, 128, 256)));
            if (!ocr_test__case_failed) {
                ocr_tensor_fill_uniform(&ctx, &x, -1.0f, 1.0f);
                randomize_bns(&ctx, &m);
                OCR_CHECK_OK(&ctx, ocr_dbnet_set_options(&ctx, &m, OCR_DBNET_NO_FUSION));
                OCR_CHECK_OK(&ctx, ocr_dbnet_forward(&ctx, &m, &x, 0, &prob, NULL));
            }
            if (!ocr_test__case_failed && (ref = (float *)malloc(ocr_tensor_bytes(&prob))) != NULL) {
                memcpy(ref, prob.data, ocr_tensor_bytes(&prob));
                OCR_CHECK_OK(&ctx, ocr_dbnet_set_options(&ctx, &m, 0));
                OCR_CHECK_OK(&ctx, ocr_dbnet_forward(&ctx, &m, &x, 0, &prob, NULL));
                OCR_CHECK_MSG(memcmp(prob.data, ref, ocr_tensor_bytes(&prob)) == 0, "width %g, %d thread(s): the fused eval forward differs "
                              "from the unfused one (relative %g)", widths[wi], threads,
                              ocr_test_rel_err((const float *)prob.data, ref, (long long)ocr_tensor_numel(&prob), 1e-6));
            }
            free(ref);
            ocr_tensor_free(&x);
            ocr_dbnet_free(&m);
            ocr_ctx_free(&ctx);
        }
}

/* A pooling case: x [2, 3, H, W] of quantised values (many ties) with NaNs at random, y1, y2 [2, 3, OH, OW] and their
   argmax i1, i2 (t[0..4]); 0 when an allocation failed (reported). */
static int pool_case(ocr_ctx *ctx, int H, int W, int OH, int OW, int nan_every, ocr_tensor t[5]) {
    static const char *const names[5] = {"x", "y1", "y2", "i1", "i2"};
    long n, k;
    int i;
    memset(t, 0, 5 * sizeof *t);
    for (i = 0; i < 5; i++)
        OCR_CHECK_OK(ctx, ocr_tensor_alloc(ctx, &t[i], names[i], i < 3 ? OCR_F32 : OCR_I32, OCR_DEVICE_CPU, i ? ocr_shape4(2, 3, OH, OW)
                                                                                                          : ocr_shape4(2, 3, H, W)));
    if (ocr_test__case_failed) return 0;
    n = (long)ocr_tensor_numel(&t[0]);
    for (k = 0; k < n; k++) ((float *)t[0].data)[k] = (float)(int)(ocr_rng_uniform(&ctx->rng) * 5.0f); /* many ties */
    for (k = 0; k < n / nan_every + 1; k++) ((float *)t[0].data)[(long)(ocr_rng_uniform(&ctx->rng) * (float)n) % n] = NAN;
    return 1;
}

/* The stem's 3x3 / stride 2 / pad 1 max pooling on the AVX-512 and AVX2 paths against the per-output path (forced
   with the portable kernel), bit for bit in values and argmax: quantised values (ties: the first in scan order wins),
   NaNs (the first NaN wins), planes of odd and even sizes, rows from 3 to 71 outputs (partial vectors, one full and
   more, a row's last vector with and without the float past its windows); and without argmax, as the eval forward
   calls it. */
static void test_maxpool_stem_path(void) {
    static const int sizes[][2] = {{7, 9}, {8, 64}, {11, 70}, {5, 33}, {9, 141}, {4, 6}, {6, 35}, {5, 34}};
    static const int kernels[2] = {OCR_CPU_KERNEL_AUTO, OCR_CPU_KERNEL_AVX2};
    int c, k;
    for (c = 0; c < (int)(sizeof sizes / sizeof sizes[0]); c++) {
        ocr_ctx ctx;
        ocr_tensor t[5];
        int H = sizes[c][0], W = sizes[c][1], OH = (H - 1) / 2 + 1, OW = (W - 1) / 2 + 1, i;
        OCR_CHECK_OK(&ctx, ocr_ctx_init(&ctx, 2, 5 + c));
        if (pool_case(&ctx, H, W, OH, OW, 40, t)) {
            ctx.cpu_kernel = OCR_CPU_KERNEL_PORTABLE;
            OCR_CHECK_OK(&ctx, ocr_nn_maxpool2d_forward(&ctx, &t[0], 3, 2, 1, &t[2], &t[4]));
            for (k = 0; k < 2; k++) {
                const char *kn;
                ctx.cpu_kernel = kernels[k];
                kn = ocr_gemm_kernel_name(&ctx);
                if (k == 1 && strncmp(kn, "avx2", 4) != 0) continue; /* no AVX2 here */
                OCR_CHECK_OK(&ctx, ocr_nn_maxpool2d_forward(&ctx, &t[0], 3, 2, 1, &t[1], &t[3]));
                OCR_CHECK_MSG(memcmp(t[1].data, t[2].data, ocr_tensor_bytes(&t[1])) == 0 && memcmp(t[3].data, t[4].data, ocr_tensor_bytes(&t[3])) == 0,
                              "%dx%d, kernel %s: the vector max pooling differs from the per-output one", H, W, kn);
                /* without argmax (the eval forward's running maximum, NaN windows done again one by one) */
                OCR_CHECK_OK(&ctx, ocr_nn_maxpool2d_forward(&ctx, &t[0], 3, 2, 1, &t[1], NULL));
                OCR_CHECK_MSG(memcmp(t[1].data, t[2].data, ocr_tensor_bytes(&t[1])) == 0, "%dx%d, kernel %s: the vector max pooling without argmax differs",
                              H, W, kn);
            }
        }
        for (i = 0; i < 5; i++) ocr_tensor_free(&t[i]);
        ocr_ctx_free(&ctx);
    }
}

/* The recognizer's pools without padding on the AVX-512 and AVX2 paths (2x2 at stride 2, and the rectangular 2x1 at
   (2, 1), 3x1 at (2, 1), 2x2 at (1, 2)) against the reference, bit for bit in values and argmax: quantised values
   (ties: the first in scan order wins), NaNs (the first NaN wins), odd sizes, rows of 1 to 70 outputs (full and part
   vectors of both widths). Skipped where the CPU has neither. */
static void test_maxpool_nopad_path(void) {
    static const int sizes[][2] = {{8, 9}, {4, 64}, {33, 141}, {2, 2}, {5, 35}, {3, 16}};
    static const int windows[][4] = {{2, 2, 2, 2}, {2, 1, 2, 1}, {3, 1, 2, 1}, {2, 2, 1, 2}}; /* kh kw sh sw */
    static const int kernels[2] = {OCR_CPU_KERNEL_AUTO, OCR_CPU_KERNEL_AVX2};
    int c, w, k, ran = 0;
    for (k = 0; k < 2; k++)
        for (c = 0; c < (int)(sizeof sizes / sizeof sizes[0]); c++)
            for (w = 0; w < 4; w++) {
                const int *q = windows[w];
                ocr_ctx ctx;
                ocr_tensor t[5];
                int H = sizes[c][0], W = sizes[c][1], OH = (H - q[0]) / q[2] + 1, OW = (W - q[1]) / q[3] + 1, r, i;
                const char *kn;
                if (H < q[0] || W < q[1]) continue;
                OCR_CHECK_OK(&ctx, ocr_ctx_init(&ctx, 2, 9 + c));
                ctx.cpu_kernel = kernels[k];
                kn = ocr_gemm_kernel_name(&ctx);
                if (strncmp(kn, k ? "avx2" : "avx512", k ? 4 : 6) != 0) { ocr_ctx_free(&ctx); continue; } /* not on this CPU */
                ran = 1;
                if (pool_case(&ctx, H, W, OH, OW, 30, t)) {
                    for (r = 0; r < 2; r++) { /* r 0: the fast path into y1, i1; 1: the reference into y2, i2 */
                        if (r) ctx.debug_flags |= OCR_DEBUG_REFERENCE;
                        if (q[0] == q[1] && q[2] == q[3])
                            OCR_CHECK_OK(&ctx, ocr_nn_maxpool2d_forward(&ctx, &t[0], q[0], q[2], 0, &t[1 + r], &t[3 + r]));
                        else
                            OCR_CHECK_OK(&ctx, ocr_nn_maxpool2d_rect_forward(&ctx, &t[0], q[0], q[1], q[2], q[3], 0, 0, &t[1 + r], &t[3 + r]));
                    }
                    OCR_CHECK_MSG(memcmp(t[1].data, t[2].data, ocr_tensor_bytes(&t[1])) == 0 && memcmp(t[3].data, t[4].data, ocr_tensor_bytes(&t[3])) == 0,
                                  "%dx%d, window %dx%d stride %dx%d, kernel %s: the vector max pooling differs from the reference", H, W, q[0], q[1],
                                  q[2], q[3], kn);
                }
                for (i = 0; i < 5; i++) ocr_tensor_free(&t[i]);
                ocr_ctx_free(&ctx);
            }
    if (!ran) ocr_test_skip("this CPU has neither AVX-512 nor AVX2: these pools take the reference's loop");
}

/* The tensors of test_ops_vs_reference: allocated on demand, freed together. */
static ocr_tensor op_pool[96];
static int op_pool_n;
static ocr_tensor *op_tensor(ocr_ctx *ctx, const char *name, ocr_dtype dtype, ocr_shape shape) {
    ocr_tensor *t = &op_pool[op_pool_n < 95 ? op_pool_n++ : 95];
    memset(t, 0, sizeof *t);
    OCR_CHECK_OK(ctx, ocr_tensor_alloc(ctx, t, name, dtype, OCR_DEVICE_CPU, shape));
    return t;
}
static void op_close(const char *what, const ocr_tensor *fast, const ocr_tensor *ref, double tol) {
    double e = fast->dtype != OCR_F32 ? 0.0 : ocr_test_rel_err((const float *)fast->data, (const float *)ref->data, (long long)ocr_tensor_numel(fast), 1e-6);
    OCR_CHECK_MSG(tol == 0.0 ? memcmp(fast->data, ref->data, ocr_tensor_bytes(fast)) == 0 : e <= tol,
                  "%s: %s differs from the reference (relative error %g)", what, fast->name, e);
}

/* Every other op's fast path against its reference on two threads (where the fast paths split their work), index 0 the
   fast path and 1 the reference: BatchNorm in training and eval, plain and fused with ReLU (outputs, running and saved
   statistics, all three gradients), ReLU, sigmoid and add with their gradients, each on every kernel (rows of 407
   floats: the vector forms and their tails); max pooling (values and argmax, with
   ties and a NaN), nearest upsampling and concat bit for bit, as they compute the same floats; ocr_gemm in its four
   transpose forms with alpha and beta. */
static void test_ops_vs_reference(void) {
    enum { N = 2, C = 6, H = 11, W = 37 };
    ocr_ctx ctx;
    ocr_shape xs = ocr_shape4(N, C, H, W), cs = ocr_shape1(C);
    static const int kernels[3] = {OCR_CPU_KERNEL_AUTO, OCR_CPU_KERNEL_AVX2, OCR_CPU_KERNEL_PORTABLE};
    ocr_tensor *x, *gamma, *beta, *dy, *t[2][8], *p[2][4];
    unsigned flags;
    int r, training, relu, i, kn;
    char what[96];
    OCR_CHECK_OK(&ctx, ocr_ctx_init(&ctx, 2, 17));
    flags = ctx.debug_flags & ~(unsigned)OCR_DEBUG_REFERENCE;
    x = op_tensor(&ctx, "x", OCR_F32, xs); gamma = op_tensor(&ctx, "gamma", OCR_F32, cs);
    beta = op_tensor(&ctx, "beta", OCR_F32, cs); dy = op_tensor(&ctx, "dy", OCR_F32, xs);
    for (r = 0; r < 2; r++) {
        static const char *const names[8] = {"y", "dx", "running_mean", "running_var", "save_mean", "save_invstd", "dgamma", "dbeta"};
        for (i = 0; i < 8; i++) t[r][i] = op_tensor(&ctx, names[i], OCR_F32, i < 2 ? xs : cs);
    }
    if (ocr_test__case_failed) goto done;
    ocr_tensor_fill_uniform(&ctx, x, -2.0f, 3.0f);
    ocr_tensor_fill_uniform(&ctx, gamma, 0.5f, 1.5f);
    ocr_tensor_fill_uniform(&ctx, beta, -0.5f, 0.5f);
    ocr_tensor_fill_uniform(&ctx, dy, -1.0f, 1.0f);
    /* BatchNorm and the pointwise ops on every kernel: their row helpers follow its vector width */
    for (kn = 0; kn < 3; kn++)
    for (training = 0; training <= 1; training++)
        for (relu = 0; relu <= 1; relu++) {
            ctx.cpu_kernel = kernels[kn];
            for (r = 0; r < 2; r++) {
                ocr_tensor **v = t[r];
                ctx.debug_flags = flags | (r ? (unsigned)OCR_DEBUG_REFERENCE : 0u);
                ocr_tensor_fill(&ctx, v[1], 0.5); ocr_tensor_fill(&ctx, v[6], 0.5); ocr_tensor_fill(&ctx, v[7], 0.5); /* accumulated */
                ocr_tensor_fill(&ctx, v[2], 0.1); ocr_tensor_fill(&ctx, v[3], 1.3);
                if (relu) {
                    OCR_CHECK_OK(&ctx, ocr_nn_batchnorm2d_relu_forward(&ctx, x, gamma, beta, v[2], v[3], training, 0.1f, 1e-5f, v[4], v[5], v[0]));
                    OCR_CHECK_OK(&ctx, ocr_nn_batchnorm2d_relu_backward(&ctx, x, v[0], gamma, v[4], v[5], dy, training, v[1], v[6], v[7]));
                } else {
                    OCR_CHECK_OK(&ctx, ocr_nn_batchnorm2d_forward(&ctx, x, gamma, beta, v[2], v[3], training, 0.1f, 1e-5f, v[4], v[5], v[0]));
                    OCR_CHECK_OK(&ctx, ocr_nn_batchnorm2d_backward(&ctx, x, gamma, v[4], v[5], dy, training, v[1], v[6], v[7]));
                }
            }
            snprintf(what, sizeof what, "batchnorm2d%s, training %d, kernel %s", relu ? " + relu" : "", training, ocr_gemm_kernel_name(&ctx));
            for (i = 0; i < 8; i++) op_close(what, t[0][i], t[1][i], 1e-5);
        }
    /* pointwise: y, dx (accumulated) and add's second gradient */
    for (r = 0; r < 2; r++) p[r][0] = op_tensor(&ctx, "db", OCR_F32, xs);
    if (ocr_test__case_failed) goto done;
    for (kn = 0; kn < 3; kn++)
    for (i = 0; i < 4; i++) {
        static const char *const ops[4] = {"relu", "sigmoid", "add", "add_relu (forward)"};
        ctx.cpu_kernel = kernels[kn];
        for (r = 0; r < 2; r++) {
            ocr_tensor *y = t[r][0], *dx = t[r][1], *dx2 = p[r][0];
            ctx.debug_flags = flags | (r ? (unsigned)OCR_DEBUG_REFERENCE : 0u);
            ocr_tensor_fill(&ctx, dx, 0.5); ocr_tensor_fill(&ctx, dx2, -0.5);
            if (i == 0) { OCR_CHECK_OK(&ctx, ocr_nn_relu_forward(&ctx, x, y)); OCR_CHECK_OK(&ctx, ocr_nn_relu_backward(&ctx, y, dy, dx)); }
            if (i == 1) { OCR_CHECK_OK(&ctx, ocr_nn_sigmoid_forward(&ctx, x, y)); OCR_CHECK_OK(&ctx, ocr_nn_sigmoid_backward(&ctx, y, dy, dx)); }
            if (i == 2) { OCR_CHECK_OK(&ctx, ocr_nn_add_forward(&ctx, x, dy, y)); OCR_CHECK_OK(&ctx, ocr_nn_add_backward(&ctx, dy, dx, dx2)); }
            if (i == 3) OCR_CHECK_OK(&ctx, ocr_nn_add_relu_forward(&ctx, x, dy, y));
        }
        snprintf(what, sizeof what, "%s, kernel %s", ops[i], ocr_gemm_kernel_name(&ctx));
        op_close(what, t[0][0], t[1][0], 1e-6);
        op_close(what, t[0][1], t[1][1], 1e-6);
        op_close(what, p[0][0], p[1][0], 1e-6);
    }
    ctx.cpu_kernel = OCR_CPU_KERNEL_AUTO;
    /* max pooling (the stem's 3x3/2 pad 1 and a 2x2/2 window), quantised values for ties and one NaN */
    {
        static const int pools[2][3] = {{3, 2, 1}, {2, 2, 0}};
        float *xv = (float *)x->data;
        for (i = 0; i < N * C * H * W; i++) xv[i] = (float)(int)(xv[i] * 2.0f);
        xv[5 * W + 7] = NAN;
        for (i = 0; i < 2; i++) {
            int k = pools[i][0], s = pools[i][1], pad = pools[i][2];
            ocr_shape ys = ocr_shape4(N, C, (H + 2 * pad - k) / s + 1, (W + 2 * pad - k) / s + 1);
            for (r = 0; r < 2; r++) {
                ocr_tensor *y = op_tensor(&ctx, "pooled", OCR_F32, ys), *idx = op_tensor(&ctx, "argmax", OCR_I32, ys);
                p[r][0] = y; p[r][1] = idx; p[r][2] = t[r][1];
                if (ocr_test__case_failed) goto done;
                ctx.debug_flags = flags | (r ? (unsigned)OCR_DEBUG_REFERENCE : 0u);
                ocr_tensor_fill(&ctx, t[r][1], 0.5);
                OCR_CHECK_OK(&ctx, ocr_nn_maxpool2d_forward(&ctx, x, k, s, pad, y, idx));
                OCR_CHECK_OK(&ctx, ocr_nn_maxpool2d_backward(&ctx, y, idx, t[r][1])); /* y as the gradient: any values do */
            }
            snprintf(what, sizeof what, "maxpool2d %dx%d/%d pad %d", k, k, s, pad);
            for (r = 0; r < 3; r++) op_close(what, p[0][r], p[1][r], 0.0);
        }
    }
    /* nearest upsampling by 2 and 3 and concat, forward and backward, and the upsampling added to another tensor */
    for (i = 2; i <= 3; i++) {
        ocr_shape us = ocr_shape4(N, C, H * i, W * i);
        for (r = 0; r < 2; r++) {
            ocr_tensor *y = op_tensor(&ctx, "upsampled", OCR_F32, us), *a = op_tensor(&ctx, "a", OCR_F32, us);
            int64_t k;
            p[r][0] = y; p[r][1] = t[r][1]; p[r][2] = a;
            if (ocr_test__case_failed) goto done;
            ctx.debug_flags = flags | (r ? (unsigned)OCR_DEBUG_REFERENCE : 0u);
            ocr_tensor_fill(&ctx, t[r][1], 0.5);
            OCR_CHECK_OK(&ctx, ocr_nn_upsample_nearest_forward(&ctx, dy, i, y));
            OCR_CHECK_OK(&ctx, ocr_nn_upsample_nearest_backward(&ctx, y, i, t[r][1]));
            for (k = 0; k < ocr_tensor_numel(a); k++) ((float *)a->data)[k] = (float)sin(0.37 * (double)k);
            OCR_CHECK_OK(&ctx, ocr_nn_add_upsampled_forward(&ctx, a, dy, i, a)); /* in place over a */
        }
        snprintf(what, sizeof what, "upsample_nearest x%d", i);
        op_close(what, p[0][0], p[1][0], 0.0);
        op_close(what, p[0][1], p[1][1], 0.0);
        snprintf(what, sizeof what, "add_upsampled x%d", i);
        op_close(what, p[0][2], p[1][2], 0.0);
    }
    for (r = 0; r < 2; r++) {
        const ocr_tensor *parts[3];
        ocr_tensor *grads[3];
        ocr_tensor *y = op_tensor(&ctx, "concatenated", OCR_F32, ocr_shape4(N, 3 * C, H, W));
        p[r][0] = y;
        if (ocr_test__case_failed) goto done;
        ctx.debug_flags = flags | (r ? (unsigned)OCR_DEBUG_REFERENCE : 0u);
        parts[0] = x; parts[1] = dy; parts[2] = x;
        grads[0] = t[r][1]; grads[1] = p[r][1] = op_tensor(&ctx, "dx_b", OCR_F32, xs); grads[2] = p[r][2] = op_tensor(&ctx, "dx_c", OCR_F32, xs);
        if (ocr_test__case_failed) goto done;
        for (i = 0; i < 3; i++) ocr_tensor_fill(&ctx, grads[i], 0.25 * i);
        OCR_CHECK_OK(&ctx, ocr_nn_concat_forward(&ctx, parts, 3, y));
        OCR_CHECK_OK(&ctx, ocr_nn_concat_backward(&ctx, y, grads, 3));
    }
    op_close("concat", p[0][0], p[1][0], 0.0);
    op_close("concat", t[0][1], t[1][1], 0.0);
    op_close("concat", p[0][1], p[1][1], 0.0);
    op_close("concat", p[0][2], p[1][2], 0.0);
    /* the fused upsampling + concat: factors 1 (the concat above) and 2, 1, 3 */
    for (r = 0; r < 2; r++) {
        static const int ones[3] = {1, 1, 1}, mixed[3] = {2, 1, 3};
        const ocr_tensor *parts[3];
        ocr_tensor *y = op_tensor(&ctx, "concat_up1", OCR_F32, ocr_shape4(N, 3 * C, H, W));
        ocr_tensor *small2 = op_tensor(&ctx, "small2", OCR_F32, ocr_shape4(N, C, 3 * H, 3 * W));
        ocr_tensor *mid = op_tensor(&ctx, "mid", OCR_F32, ocr_shape4(N, C, 6 * H, 6 * W));
        ocr_tensor *small3 = op_tensor(&ctx, "small3", OCR_F32, ocr_shape4(N, C, 2 * H, 2 * W));
        ocr_tensor *y3 = op_tensor(&ctx, "concat_up", OCR_F32, ocr_shape4(N, 3 * C, 6 * H, 6 * W));
        int64_t k;
        t[r][2] = y; t[r][3] = y3;
        if (ocr_test__case_failed) goto done;
        ctx.debug_flags = flags | (r ? (unsigned)OCR_DEBUG_REFERENCE : 0u);
        parts[0] = x; parts[1] = dy; parts[2] = x;
        OCR_CHECK_OK(&ctx, ocr_nn_concat_upsampled_forward(&ctx, parts, ones, 3, y));
        for (k = 0; k < ocr_tensor_numel(small2); k++) ((float *)small2->data)[k] = (float)sin(0.29 * (double)k);
        for (k = 0; k < ocr_tensor_numel(mid); k++) ((float *)mid->data)[k] = (float)sin(0.53 * (double)k);
        for (k = 0; k < ocr_tensor_numel(small3); k++) ((float *)small3->data)[k] = (float)cos(0.41 * (double)k);
        parts[0] = small2; parts[1] = mid; parts[2] = small3;
        OCR_CHECK_OK(&ctx, ocr_nn_concat_upsampled_forward(&ctx, parts, mixed, 3, y3));
    }
    op_close("concat_upsampled x1", t[0][2], p[0][0], 0.0);
    op_close("concat_upsampled x1", t[1][2], p[0][0], 0.0);
    op_close("concat_upsampled x2, x1, x3", t[0][3], t[1][3], 0.0);
    /* ocr_gemm: C = 0.7 op(A) op(B) + 0.3 C for the four transpose forms */
    for (i = 0; i < 4; i++) {
        enum { M = 37, NN = 29, K = 53 };
        ocr_tensor *a = op_tensor(&ctx, "A", OCR_F32, ocr_shape1(M * K)), *b = op_tensor(&ctx, "B", OCR_F32, ocr_shape1(K * NN));
        int ta = i & 1, tb = i >> 1;
        for (r = 0; r < 2; r++) p[r][0] = op_tensor(&ctx, "C", OCR_F32, ocr_shape1(M * NN));
        if (ocr_test__case_failed) goto done;
        ocr_tensor_fill_uniform(&ctx, a, -1.0f, 1.0f);
        ocr_tensor_fill_uniform(&ctx, b, -1.0f, 1.0f);
        ocr_tensor_fill_uniform(&ctx, p[0][0], -1.0f, 1.0f);
        memcpy(p[1][0]->data, p[0][0]->data, ocr_tensor_bytes(p[0][0]));
        for (r = 0; r < 2; r++) {
            ctx.debug_flags = flags | (r ? (unsigned)OCR_DEBUG_REFERENCE : 0u);
            OCR_CHECK_OK(&ctx, ocr_gemm(&ctx, ta, tb, M, NN, K, 0.7f, (const float *)a->data, ta ? M : K, (const float *)b->data, tb ? K : NN,
                                        0.3f, (float *)p[r][0]->data, NN));
        }
        snprintf(what, sizeof what, "gemm trans_a %d trans_b %d", ta, tb);
        op_close(what, p[0][0], p[1][0], 1e-5);
    }
done:
    for (i = 0; i < op_pool_n; i++) ocr_tensor_free(&op_pool[i]);
    op_pool_n = 0;
    ocr_ctx_free(&ctx);
}

int main(int argc, char **argv) {
    ocr_test_init(argc, argv);
    OCR_TEST_RUN(test_conv_paths);
    OCR_TEST_RUN(test_bn_relu_fused);
    OCR_TEST_RUN(test_conv_transpose_paths);
    OCR_TEST_RUN(test_conv_transpose_one_channel);
    OCR_TEST_RUN(test_dbnet_bn_fold);
    OCR_TEST_RUN(test_dbnet_eval_fusion);
    OCR_TEST_RUN(test_strided_blocks_same_bits);
    OCR_TEST_RUN(test_pointwise_direct_same_bits);
    OCR_TEST_RUN(test_shared_panels_same_bits);
    OCR_TEST_RUN(test_winograd_bands_same_bits);
    OCR_TEST_RUN(test_winograd_tile_items_same_bits);
    OCR_TEST_RUN(test_concat_conv_same_bits);
    OCR_TEST_RUN(test_convt_pair_same_bits);
    OCR_TEST_RUN(test_sigmoid_paths);
    OCR_TEST_RUN(test_maxpool_stem_path);
    OCR_TEST_RUN(test_maxpool_nopad_path);
    OCR_TEST_RUN(test_ops_vs_reference);
    return ocr_test_finish();
}
