/* bench_recompute - what computing activations again in the backward costs: a DBNet training forward and backward on
   the CPU with the default layout (BN+ReLU outputs and three convolution outputs recomputed) against the same model
   with OCR_DBNET_NO_RECOMPUTE (everything the backward reads kept), alternating in one process after one
   warm-up each, median of the reps; prints the CPU's measured peak (bench_peak.h), a table and one JSON line.
   usage: bench_recompute [--reps N (>= 5)] [--width W] [--size S] [--batch N] [--threads T]   (default 7, 1, 640, 1, 2) */
#define OCR_IMPLEMENTATION
#include "ocr_tensor.h"
#include "ocr_nn.h"
#include "ocr_loss.h"
#include "ocr_dbnet.h"
#include "bench_common.h"
#include "bench_peak.h"

#define MAX_REPS 64

static void die(ocr_ctx *ctx, const char *what) {
    fprintf(stderr, "bench_recompute: %s: %s\n", what, ocr_ctx_last_error(ctx));
    exit(1);
}

int main(int argc, char **argv) {
    int reps = 7, size = 640, batch = 1, threads = 2, r, k, i;
    float width = 1.0f;
    double sec[2][MAX_REPS], med[2], mib[2], peak;
    char cpu[160];
    ocr_ctx ctx;
    ocr_dbnet m;
    ocr_dbnet_config cfg = ocr_dbnet_config_default();
    ocr_tensor x, dp, dt, prob, thresh;
    for (i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--reps") == 0 && i + 1 < argc) reps = atoi(argv[++i]);
        else if (strcmp(argv[i], "--width") == 0 && i + 1 < argc) width = (float)atof(argv[++i]);
        else if (strcmp(argv[i], "--size") == 0 && i + 1 < argc) size = atoi(argv[++i]);
        else if (strcmp(argv[i], "--batch") == 0 && i + 1 < argc) batch = atoi(argv[++i]);
        else if (strcmp(argv[i], "--threads") == 0 && i + 1 < argc) threads = atoi(argv[++i]);
        else {
            printf("usage: %s [--reps N (5..%d)] [--width W] [--size S (multiple of 32)] [--batch N] [--threads T]\n", argv[0], MAX_REPS);
            return strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0 ? 0 : 2;
        }
    }
    if (reps < 5 || reps > MAX_REPS || size < 32 || size % 32 || batch < 1 || threads < 1) {
        fprintf(stderr, "bench_recompute: needs 5 <= reps <= %d, size a positive multiple of 32, batch and threads >= 1\n", MAX_REPS);
        return 2;
    }
    cfg.width = width;
    bench_cpu_model(cpu, sizeof cpu);
    peak = bench_print_peak(threads);
    if (ocr_ctx_init(&ctx, threads, 1) || ocr_dbnet_init(&ctx, &m, &cfg)) die(&ctx, "setup");
    if (ocr_tensor_alloc(&ctx, &x, "x", OCR_F32, OCR_DEVICE_CPU, ocr_shape4(batch, 3, size, size)) ||
        ocr_tensor_alloc(&ctx, &dp, "d_prob_logits", OCR_F32, OCR_DEVICE_CPU, ocr_shape4(batch, 1, size, size)) ||
        ocr_tensor_alloc(&ctx, &dt, "d_thresh", OCR_F32, OCR_DEVICE_CPU, ocr_shape4(batch, 1, size, size)))
        die(&ctx, "inputs");
    ocr_tensor_fill_normal(&ctx, &x, 0.0f, 1.0f);
    ocr_tensor_fill_normal(&ctx, &dp, 0.0f, 1e-3f);
    ocr_tensor_fill_normal(&ctx, &dt, 0.0f, 1e-3f);
    for (r = -1; r < reps; r++)
        for (k = 0; k < 2; k++) {
            double t0;
            if (ocr_dbnet_set_options(&ctx, &m, k ? OCR_DBNET_NO_RECOMPUTE : 0)) die(&ctx, "options");
            bench_settle();
            t0 = now();
            if (ocr_dbnet_forward(&ctx, &m, &x, 1, &prob, &thresh)) die(&ctx, "forward");
            if (ocr_dbnet_backward(&ctx, &m, &dp, &dt)) die(&ctx, "backward");
            if (r >= 0) sec[k][r] = now() - t0;
            mib[k] = (double)ocr_dbnet_memory(&m).values_need_bytes / 1048576.0;
        }
    for (k = 0; k < 2; k++) med[k] = median(sec[k], reps);
    printf("bench_recompute: DB-ResNet-18 width %g, %dx%d, batch %d, %d threads, forward + backward, median of %d after 1 warm-up\n",
           (double)width, size, size, batch, threads, reps);
    printf("layout                 seconds  activations MiB\n");
    printf("recompute (default)    %7.3f  %15.0f\n", med[0], mib[0]);
    printf("no recompute (keep)    %7.3f  %15.0f\n", med[1], mib[1]);
    printf("{\"bench\":\"recompute\",\"cpu\":\"%s\",\"fp32_peak_gflops\":%.1f,\"width\":%g,\"size\":%d,\"batch\":%d,\"threads\":%d,\"reps\":%d,\"recompute_s\":%.4f,\"keep_s\":%.4f,"
           "\"time_ratio\":%.3f,\"recompute_activations_mib\":%.1f,\"keep_activations_mib\":%.1f}\n",
           cpu, peak, (double)width, size, batch, threads, reps, med[0], med[1], med[0] / med[1], mib[0], mib[1]);
    ocr_tensor_free(&x); ocr_tensor_free(&dp); ocr_tensor_free(&dt);
    ocr_dbnet_free(&m);
    ocr_ctx_free(&ctx);
    return 0;
}
