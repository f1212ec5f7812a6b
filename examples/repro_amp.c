/* repro_amp - the same short DBNet training in fp32, fp16 without loss scaling, fp16 with it, and bf16.

   The failure this reproduces: a detector trained with 16-bit mixed precision lost 11.8 points of H-mean against fp32,
   because its small gradients flushed to zero in float16 (whose smallest value is 2^-24) without loss scaling. This
   program runs examples/train_dbnet four times with one seed and settings, --amp fp32, fp16 --loss-scale off, fp16
   (dynamic loss scaling, PyTorch GradScaler's rule) and bf16, and prints for each the share of the gradient values
   that reached a convolution in the half type and were flushed to zero, the steps the scaler skipped, the loss curve
   and the final validation H-mean:

       repro_amp                         3000 steps each, half train_dbnet's default (4 to 9 minutes apiece on two cores)
       repro_amp --steps 1000            shorter, where run-to-run spread alone can exceed the tolerance
       repro_amp --steps 20 --size 64 --batch 2 --width 0.05 --val-count 4 --val-size 64      a smoke test

   Exit status: 0 when scaled fp16 and bf16 land within --tolerance (0.01) of fp32's H-mean and unscaled fp16 flushes
   more gradients to zero than scaled fp16 (the mechanism is shown even when the short run does not yet show it in
   the H-mean, which is then printed side by side); 1 otherwise; 2 bad flags. Runs are kept in --out. */
#define _POSIX_C_SOURCE 200809L
#define OCR_IMPLEMENTATION
#include "ocr_tensor.h"
#include "ocr_geom.h"
#include "ocr_nn.h"
#include "ocr_loss.h"
#include "ocr_dbnet.h"
#include "ocr_data.h"
#include "ocr_example.h"
#include <errno.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define SYNOPSIS "[options]\n\nHost-only by nature (no --device): it runs train_dbnet on the CPU, where bf16 and fp16 are emulated or " \
                 "run on AMX/AVX512_BF16 (ocr_nn.h's mixed-precision rules); train_dbnet --device cuda --amp does the same on a GPU."
#define CURVE_POINTS 10

typedef struct {
    const char *name, *amp, *loss_scale;
    double hmean, precision, recall, underflow, seconds, skipped, curve[CURVE_POINTS + 1];
    int underflow_samples, ok;
} variant;

/* Number `key` of the JSON object in line[0..len), or NAN. */
static double json_number(ocr_ctx *ctx, const char *line, size_t len, const char *key) {
    ocr_json_tok toks[256];
    int n, v;
    double d;
    if (ocr_json_parse(ctx, line, len, toks, 256, &n) != OCR_OK || toks[0].type != OCR_JSON_OBJECT) return NAN;
    v = ocr_json_find(line, toks, 0, key);
    return v >= 0 && ocr_json_number(line, &toks[v], &d) ? d : NAN;
}

/* Runs train_dbnet with argv; its output goes to log. The exit status, or -1 when it could not run. */
static int run(char *const *args, const char *log) {
    pid_t pid;
    int status, fd;
    fflush(stdout);
    fflush(stderr);
    if ((pid = fork()) < 0) return -1;
    if (pid == 0) {
        if ((fd = open(log, O_WRONLY | O_CREAT | O_TRUNC, 0644)) < 0) _exit(126);
        dup2(fd, 1);
        dup2(fd, 2);
        close(fd);
        execv(args[0], args);
        _exit(127);
    }
    while (waitpid(pid, &status, 0) < 0)
        if (errno != EINTR) return -1;
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

/* The loss curve, the mean underflow share, the scaler's skips and the last validation from run/metrics.jsonl. */
static int read_metrics(ocr_ctx *ctx, const char *run_dir, int steps, variant *v) {
    char path[4400];
    unsigned char *text = NULL;
    size_t n = 0, pos = 0;
    int i;
    snprintf(path, sizeof path, "%s/metrics.jsonl", run_dir);
    if (ocr_read_file(ctx, path, (size_t)1 << 28, &text, &n)) return -1;
    for (i = 0; i <= CURVE_POINTS; i++) v->curve[i] = NAN;
    v->hmean = v->precision = v->recall = NAN;
    while (pos < n) {
        const char *line = (const char *)text + pos;
        size_t len = 0;
        double step, x;
        while (pos + len < n && line[len] != '\n') len++;
        pos += len + 1;
        step = json_number(ctx, line, len, "step");
        if (isnan(step)) continue;
        if (!isnan(x = json_number(ctx, line, len, "train/loss"))) {
            int k = (int)(step * CURVE_POINTS / steps + 0.5);
            if (k >= 0 && k <= CURVE_POINTS && fabs(step - (double)k * steps / CURVE_POINTS) < (double)steps / (2 * CURVE_POINTS))
                v->curve[k] = x;
        }
        if (!isnan(x = json_number(ctx, line, len, "amp/grad_underflow_fraction"))) { v->underflow += x; v->underflow_samples++; }
        if (!isnan(x = json_number(ctx, line, len, "amp/skipped_steps"))) v->skipped = x;
        if (!isnan(x = json_number(ctx, line, len, "val/hmean"))) v->hmean = x;
        if (!isnan(x = json_number(ctx, line, len, "val/precision"))) v->precision = x;
        if (!isnan(x = json_number(ctx, line, len, "val/recall"))) v->recall = x;
    }
    if (v->underflow_samples) v->underflow /= v->underflow_samples;
    OCR_FREE(text);
    return 0;
}

int main(int argc, char **argv) {
    const char *train = "./examples/train_dbnet", *out = NULL;
    int steps = 3000, size = 256, batch = 4, threads = 0, val_count = 200, val_size = 320, i, k, failed = 0;
    float width = 0.25f, tolerance = 0.01f;
    ocr_ex_flag flags[] = {
        {"--steps", OCR_EX_INT, &steps, "optimizer steps of each run"},
        {"--size", OCR_EX_INT, &size, "training crop size (multiple of 32)"},
        {"--batch", OCR_EX_INT, &batch, "images per step"},
        {"--width", OCR_EX_FLOAT, &width, "channel width multiplier of the model"},
        {"--val-count", OCR_EX_INT, &val_count, "validation images"},
        {"--val-size", OCR_EX_INT, &val_size, "validation image size (multiple of 32)"},
        {"--threads", OCR_EX_INT, &threads, "compute threads (0: all cores)"},
        {"--tolerance", OCR_EX_FLOAT, &tolerance, "largest H-mean difference to fp32 that passes"},
        {"--train", OCR_EX_STRING, &train, "the train_dbnet program to run"},
        {"--out", OCR_EX_STRING, &out, "directory for the four runs (default: a new one under /tmp)"},
    };
    const int n_flags = (int)(sizeof flags / sizeof flags[0]);
    variant vs[4] = {{"fp32", "fp32", "dynamic", 0, 0, 0, 0, 0, 0, {0}, 0, 0},
                     {"fp16, no loss scaling", "fp16", "off", 0, 0, 0, 0, 0, 0, {0}, 0, 0},
                     {"fp16, dynamic loss scaling", "fp16", "dynamic", 0, 0, 0, 0, 0, 0, {0}, 0, 0},
                     {"bf16", "bf16", "dynamic", 0, 0, 0, 0, 0, 0, {0}, 0, 0}};
    char dir[4096], run_dir[4200], log[4300], nums[7][32];
    ocr_ctx ctx;

    if (ocr_ex_parse(argc, argv, SYNOPSIS, flags, n_flags) != 0) {
        fprintf(stderr, "%s: unexpected argument '%s'\n", argv[0], argv[1]);
        return 2;
    }
    if (steps < 1 || size < 32 || size % 32 || batch < 1 || !(width > 0 && width <= 4) || val_count < 1 || val_size < 32 ||
        val_size % 32 || threads < 0 || !(tolerance >= 0)) {
        fprintf(stderr, "%s: out of range: --steps, --batch, --val-count >= 1, --size and --val-size multiples of 32, --width in "
                        "(0, 4], --threads >= 0, --tolerance >= 0\n", argv[0]);
        return 2;
    }
    if (access(train, X_OK) != 0) {
        fprintf(stderr, "%s: %s: %s (build it with ./build.sh, or name it with --train)\n", argv[0], train, strerror(errno));
        return 1;
    }
    if (out) {
        snprintf(dir, sizeof dir, "%s", out);
        if (mkdir(dir, 0755) != 0 && errno != EEXIST) { fprintf(stderr, "%s: cannot create %s: %s\n", argv[0], dir, strerror(errno)); return 1; }
    } else {
        snprintf(dir, sizeof dir, "/tmp/repro_amp.XXXXXX");
        if (!mkdtemp(dir)) { fprintf(stderr, "%s: cannot create a directory under /tmp: %s\n", argv[0], strerror(errno)); return 1; }
    }
    if (ocr_ctx_init(&ctx, 1, 0) != OCR_OK) return 1;
    snprintf(nums[0], sizeof nums[0], "%d", steps);
    snprintf(nums[1], sizeof nums[1], "%d", size);
    snprintf(nums[2], sizeof nums[2], "%d", batch);
    snprintf(nums[3], sizeof nums[3], "%g", (double)width);
    snprintf(nums[4], sizeof nums[4], "%d", val_count);
    snprintf(nums[5], sizeof nums[5], "%d", val_size);
    snprintf(nums[6], sizeof nums[6], "%d", threads);
    printf("repro_amp: %d steps of %d x %dx%d, width %g, validation %d images at %d, in %s\n", steps, batch, size, size, (double)width,
           val_count, val_size, dir);
    for (k = 0; k < 4; k++) {
        variant *v = &vs[k];
        double t0;
        int rc;
        char *args[40];
        int na = 0;
        snprintf(run_dir, sizeof run_dir, "%s/%s%s", dir, v->amp, strcmp(v->loss_scale, "off") == 0 ? "_unscaled" : "");
        snprintf(log, sizeof log, "%s.log", run_dir);
#define ARG(s) args[na++] = (char *)(s)
        ARG(train); ARG("--amp"); ARG(v->amp); ARG("--loss-scale"); ARG(v->loss_scale); ARG("--steps"); ARG(nums[0]);
        ARG("--size"); ARG(nums[1]); ARG("--batch"); ARG(nums[2]); ARG("--width"); ARG(nums[3]); ARG("--val-count"); ARG(nums[4]);
        ARG("--val-size"); ARG(nums[5]); ARG("--threads"); ARG(nums[6]); ARG("--eval-every"); ARG("0"); ARG("--log-every"); ARG("10");
        ARG("--out"); ARG(run_dir); ARG("--overwrite"); args[na] = NULL;
#undef ARG
        printf("  %-28s ", v->name);
        fflush(stdout);
        t0 = ocr_monotonic_seconds();
        rc = run(args, log);
        v->seconds = ocr_monotonic_seconds() - t0;
        if (rc != 0) {
            printf("train_dbnet exited %d: see %s\n", rc, log);
            failed = 1;
            continue;
        }
        if (read_metrics(&ctx, run_dir, steps, v)) {
            printf("%s\n", ocr_ctx_last_error(&ctx));
            failed = 1;
            continue;
        }
        v->ok = 1;
        printf("H-mean %.4f (P %.4f R %.4f)  %.0f s\n", v->hmean, v->precision, v->recall, v->seconds);
    }
    printf("\n%-28s %9s %12s %8s  loss at 0%%, 10%%, ..., 100%% of the steps\n", "", "H-mean", "grads -> 0", "skipped");
    for (k = 0; k < 4; k++) {
        variant *v = &vs[k];
        if (!v->ok) continue;
        printf("%-28s %9.4f %11.3f%% %8.0f ", v->name, v->hmean, 100.0 * v->underflow, v->skipped);
        for (i = 1; i <= CURVE_POINTS; i++) printf(isnan(v->curve[i]) ? "      -" : " %6.3f", v->curve[i]);
        printf("\n");
    }
    if (!failed) {
        double d16 = fabs(vs[2].hmean - vs[0].hmean), dbf = fabs(vs[3].hmean - vs[0].hmean), dun = vs[0].hmean - vs[1].hmean;
        int mechanism = vs[1].underflow > vs[2].underflow;
        printf("\nfp16 with loss scaling: %+.4f H-mean against fp32; bf16: %+.4f (tolerance %.3f)\n", vs[2].hmean - vs[0].hmean,
               vs[3].hmean - vs[0].hmean, (double)tolerance);
        printf("fp16 without it: %+.4f H-mean against fp32, %.3f%% of the gradients flushed to zero against %.3f%% with scaling\n",
               -dun, 100.0 * vs[1].underflow, 100.0 * vs[2].underflow);
        if (d16 > tolerance || dbf > tolerance || !mechanism) failed = 1;
    }
    printf("%s\n", failed ? "FAILED" : "OK: loss-scaled fp16 and bf16 keep fp32's accuracy; fp16 without scaling loses gradients");
    ocr_ctx_free(&ctx);
    return failed;
}
