/* bench_winograd - where Winograd F(4x4, 3x3) pays: each 3x3 stride-1 convolution shape of the models (DBNet at
   train_dbnet's width 0.25 and at the official width, the recognizer's blocks) timed forward and backward (data and
   weight gradients) on the Winograd path (forced, ocr__winograd_force) and on the direct paths
   (OCR_DEBUG_NO_WINOGRAD), alternating, median of the runs, with the path ocr_nn.h's rule (ocr__conv_winograd_ok)
   picks for it: a shape picked for Winograd should be faster there, one left on the direct paths should not.
   Winograd runs on the AVX-512 and AVX2 kernels (OCR_CPU_KERNEL=avx2 times the latter on an AVX-512 CPU); on the
   portable kernel the program says so and exits 0. The last line is JSON.
   usage: bench_winograd [--threads N] [--reps N] */
#define OCR_IMPLEMENTATION
#include "ocr_tensor.h"
#include "ocr_nn.h"
#include "bench_common.h"
#include "bench_peak.h"

static const struct { const char *name; int N, C, K, H, W; } shapes[] = {
    {"rec conv1 (32 crops 32x128)", 32, 16, 32, 16, 64},
    {"rec conv2", 32, 32, 64, 8, 32},
    {"rec conv3", 32, 64, 64, 8, 32},
    {"rec conv4", 32, 64, 128, 4, 32},
    {"rec conv5", 32, 128, 128, 2, 32},
    {"w0.25 layer2 (b8 320x320)", 8, 32, 32, 40, 40},
    {"w0.25 layer3", 8, 64, 64, 20, 20},
    {"w0.25 layer4", 8, 128, 128, 10, 10},
    {"w0.25 layer3 (b4 256x256 training)", 4, 64, 64, 16, 16},
    {"w0.25 decoder 3x3 (b8 320x320)", 8, 64, 16, 80, 80},
    {"w1 layer1 (b1 640x640)", 1, 64, 64, 160, 160},
    {"w1 layer2", 1, 128, 128, 80, 80},
    {"w1 layer3", 1, 256, 256, 40, 40},
    {"w1 layer4", 1, 512, 512, 20, 20},
    {"w1 decoder 3x3 (b1 640x640)", 1, 256, 64, 160, 160},
    {"w1 layer3 (736x1280 inference)", 1, 256, 256, 46, 80},
    {"w1 layer4 (736x1280 inference)", 1, 512, 512, 23, 40},
    {"w1 layer3 (320x320 inference)", 1, 256, 256, 20, 20},
    {"w1 layer4 (320x320 inference)", 1, 512, 512, 10, 10},
};

/* Times one forward and one backward (data and weight gradients) on Winograd wherever it can run (no_wino 0; the
   weight gradient still only from OCR__WINO_WGRAD_MIN_IN(_AVX2) input channels) or on the direct paths; 1 on an error (in
   ctx). */
static int time_shape(ocr_ctx *ctx, int no_wino, const ocr_tensor *x, const ocr_tensor *w, const ocr_tensor *dy,
                      ocr_tensor *y, ocr_tensor *dx, ocr_tensor *dw, double *fwd, double *bwd) {
    ocr_conv_params p = ocr_conv_params_make(1, 1, 1, 1);
    double t0, t1, t2;
#ifdef OCR__HAVE_AVX2
    ocr__winograd_force = !no_wino;
#endif
    if (no_wino) ctx->debug_flags |= OCR_DEBUG_NO_WINOGRAD;
    else ctx->debug_flags &= ~(unsigned)OCR_DEBUG_NO_WINOGRAD;
    t0 = now();
    if (ocr_nn_conv2d_forward(ctx, x, w, NULL, p, y)) return 1;
    t1 = now();
    if (ocr_nn_conv2d_backward(ctx, x, w, dy, p, dx, dw, NULL)) return 1;
    t2 = now();
    *fwd = t1 - t0;
    *bwd = t2 - t1;
    return 0;
}

int main(int argc, char **argv) {
    int threads = 2, reps = 9, i, r, s;
    char json[8192];
    size_t jl = 0;
    ocr_ctx ctx;
    for (i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--threads") == 0 && i + 1 < argc) threads = atoi(argv[++i]);
        else if (strcmp(argv[i], "--reps") == 0 && i + 1 < argc) reps = atoi(argv[++i]);
        else { printf("usage: %s [--threads N] [--reps N]   (reps >= 5)\n", argv[0]); return strcmp(argv[i], "--help") == 0 ? 0 : 2; }
    }
    if (threads < 1 || reps < 5) { fprintf(stderr, "bench_winograd: --threads >= 1, --reps >= 5\n"); return 2; }
    (void)bench_print_peak(threads);
    if (ocr_ctx_init(&ctx, threads, 1)) { fprintf(stderr, "bench_winograd: %s\n", ctx.last_error); return 1; }
    ctx.debug_flags &= ~(unsigned)OCR_DEBUG_REFERENCE;
    if (strncmp(ocr_gemm_kernel_name(&ctx), "portable", 8) == 0) {
        printf("bench_winograd: skipped: Winograd runs on the AVX-512 and AVX2 kernels only (kernel here: %s)\n", ocr_gemm_kernel_name(&ctx));
        ocr_ctx_free(&ctx);
        return 0;
    }
    printf("bench_winograd: %d threads, kernel %s, median of %d after a warm-up, Winograd and direct alternating\n", threads,
           ocr_gemm_kernel_name(&ctx), reps);
    printf("%-36s %-20s %-7s %9s %9s %9s %9s %6s %6s\n", "shape", "N,C->K,HxW", "picked", "wino fwd", "wino bwd", "dir fwd", "dir bwd",
           "f w/d", "b w/d");
    jl += (size_t)snprintf(json + jl, sizeof json - jl, "{\"bench\":\"winograd\",\"threads\":%d,\"reps\":%d,\"results\":[", threads, reps);
    for (s = 0; s < (int)(sizeof shapes / sizeof shapes[0]); s++) {
        ocr_tensor x, w, y, y2, dy, dx, dw;
        double f[2][64], b[2][64], mf[2], mb[2];
        int m, picked, bad = 0;
        char dims[32];
        memset(&x, 0, sizeof x); w = y = y2 = dy = dx = dw = x;
        if (ocr_tensor_alloc(&ctx, &x, "x", OCR_F32, OCR_DEVICE_CPU, ocr_shape4(shapes[s].N, shapes[s].C, shapes[s].H, shapes[s].W)) ||
            ocr_tensor_alloc(&ctx, &w, "w", OCR_F32, OCR_DEVICE_CPU, ocr_shape4(shapes[s].K, shapes[s].C, 3, 3)) ||
            ocr_tensor_alloc(&ctx, &y, "y", OCR_F32, OCR_DEVICE_CPU, ocr_shape4(shapes[s].N, shapes[s].K, shapes[s].H, shapes[s].W)) ||
            ocr_tensor_alloc(&ctx, &y2, "y2", OCR_F32, OCR_DEVICE_CPU, y.shape) ||
            ocr_tensor_alloc(&ctx, &dy, "dy", OCR_F32, OCR_DEVICE_CPU, y.shape) ||
            ocr_tensor_alloc(&ctx, &dx, "dx", OCR_F32, OCR_DEVICE_CPU, x.shape) ||
            ocr_tensor_alloc(&ctx, &dw, "dw", OCR_F32, OCR_DEVICE_CPU, w.shape)) {
            fprintf(stderr, "bench_winograd: %s\n", ctx.last_error);
            return 1;
        }
        ocr_tensor_fill_uniform(&ctx, &x, -1.0f, 1.0f);
        ocr_tensor_fill_uniform(&ctx, &w, -0.1f, 0.1f);
        ocr_tensor_fill_uniform(&ctx, &dy, -1.0f, 1.0f);
        /* the path the rule picks: Winograd's sums round differently from the direct ones */
        bad |= time_shape(&ctx, 1, &x, &w, &dy, &y2, &dx, &dw, &mf[1], &mb[1]);
        ctx.debug_flags &= ~(unsigned)OCR_DEBUG_NO_WINOGRAD;
#ifdef OCR__HAVE_AVX2
        ocr__winograd_force = 0;
#endif
        bad |= ocr_nn_conv2d_forward(&ctx, &x, &w, NULL, ocr_conv_params_make(1, 1, 1, 1), &y);
        picked = memcmp(y.data, y2.data, ocr_tensor_bytes(&y)) != 0;
        bad |= time_shape(&ctx, 0, &x, &w, &dy, &y, &dx, &dw, &mf[0], &mb[0]); /* the forced Winograd's warm-up */
        for (r = 0; r < (reps < 64 ? reps : 64) && !bad; r++)
            for (m = 0; m < 2; m++) bad |= time_shape(&ctx, m, &x, &w, &dy, &y, &dx, &dw, &f[m][r], &b[m][r]);
        if (bad) { fprintf(stderr, "bench_winograd: %s\n", ctx.last_error); return 1; }
        for (m = 0; m < 2; m++) { mf[m] = median(f[m], r); mb[m] = median(b[m], r); }
        snprintf(dims, sizeof dims, "%d,%d->%d,%dx%d", shapes[s].N, shapes[s].C, shapes[s].K, shapes[s].H, shapes[s].W);
        printf("%-36s %-20s %-7s %8.3fms %8.3fms %8.3fms %8.3fms %6.2f %6.2f\n", shapes[s].name, dims, picked ? "wino" : "direct",
               mf[0] * 1e3, mb[0] * 1e3, mf[1] * 1e3, mb[1] * 1e3, mf[0] / mf[1], mb[0] / mb[1]);
        jl += (size_t)snprintf(json + jl, sizeof json - jl,
                               "%s{\"shape\":\"%s\",\"dims\":\"%s\",\"picked\":\"%s\",\"wino_fwd_ms\":%.4f,\"wino_bwd_ms\":%.4f,"
                               "\"direct_fwd_ms\":%.4f,\"direct_bwd_ms\":%.4f}",
                               s ? "," : "", shapes[s].name, dims, picked ? "winograd" : "direct", mf[0] * 1e3, mb[0] * 1e3, mf[1] * 1e3,
                               mb[1] * 1e3);
        ocr_tensor_free(&x); ocr_tensor_free(&w); ocr_tensor_free(&y); ocr_tensor_free(&y2);
        ocr_tensor_free(&dy); ocr_tensor_free(&dx); ocr_tensor_free(&dw);
    }
    printf("%s]}\n", json);
    ocr_ctx_free(&ctx);
    return 0;
}
