/* The repro programs of the failure classes (examples/repro_*.c), run as a user runs them: each must exit 0 (ocr-c
   behaves as described) and print the key lines of its finding: the naive failure next to ocr-c's behaviour.
   Plain run: ./examples/repro_* (build.sh builds them). Sanitizer run (OCR_SANITIZED=1): build/san/repro_*, built
   with AddressSanitizer and UBSan, so repro_loss_bad_input also shows that no bad input is read out of bounds and
   every program that no sanitizer fires. The references are inside the programs: the exact sigmoid in double, the
   records written, freshly computed target maps, the files read back. Usage errors exit 2.
   The --device cuda variants run on the emulated CUDA backend (build.sh's CUDA section links them to ocr_cuda.cu
   built with -DOCR_CUDA_EMULATE as build/repro_NAME_emu, and as build/san/repro_NAME_emu under the sanitizers, where
   a read out of bounds in a kernel is a heap overflow); the CPU build refuses --device cuda as a usage error. */
#define OCR_IMPLEMENTATION
#include "ocr_tensor.h"
#include "ocr_test.h"
#include "ocr_test_cli.h"
#include <unistd.h>

static ocr_ctx ctx;
static const char *bin_dir; /* "./examples" or "build/san" */
static const char *emu_dir; /* "build" or "build/san": the emulated CUDA builds */
static int sanitized;       /* OCR_SANITIZED=1: the sanitizer builds */

/* Runs dir/repro_<name> with args; checks exit status `code`, a clean stderr and every needle in stdout. */
static void expect_run_in(const char *dir, const char *name, const char *args, int code, const char *const *needles) {
    char cmd[1024], path[256];
    char *out, *err;
    int rc, i;
    snprintf(path, sizeof path, "%s/repro_%s", dir, name);
    if (access(path, X_OK) != 0) {
        OCR_CHECK_MSG(0, "%s is not built (./build.sh builds it)", path);
        return;
    }
    snprintf(cmd, sizeof cmd, "%s %s", path, args);
    rc = ocr_test_run(cmd, &out, &err);
    OCR_CHECK_MSG(rc == code, "'%s' exited %d, expected %d\nstdout:\n%s\nstderr:\n%s", cmd, rc, code, out, err);
    OCR_CHECK_MSG(!strstr(err, "Sanitizer") && !strstr(err, "runtime error"), "'%s': a sanitizer fired:\n%s", cmd, err);
    for (i = 0; needles && needles[i]; i++) OCR_CHECK_MSG(strstr(out, needles[i]) != NULL, "'%s': stdout lacks \"%s\":\n%s", cmd, needles[i], out);
    free(out);
    free(err);
}

static void expect_run(const char *name, const char *args, int code, const char *const *needles) {
    expect_run_in(bin_dir, name, args, code, needles);
}

/* A program without a device side says so in its --help. */
static void expect_host_only(const char *name) {
    static const char *const needles[] = {"Host-only by nature (no --device)", NULL};
    expect_run(name, "--help", 0, needles);
}

/* The CPU build has no CUDA backend: --device cuda is a usage error that says so. */
static void expect_no_cuda(const char *name) {
    char cmd[512];
    snprintf(cmd, sizeof cmd, "%s/repro_%s --device cuda", bin_dir, name);
    ocr_test_expect_exit(cmd, 2, "this CPU build has no CUDA backend");
}

static void expect_usage(const char *name) {
    char cmd[512];
    snprintf(cmd, sizeof cmd, "%s/repro_%s --help", bin_dir, name);
    ocr_test_expect_exit(cmd, 0, NULL);
    snprintf(cmd, sizeof cmd, "%s/repro_%s --bogus", bin_dir, name);
    ocr_test_expect_exit(cmd, 2, "unknown flag '--bogus'");
}

static void test_step_overflow(void) {
    static const char *const sweep[] = {
        "naive fp32: exp(-k(P-T)) overflows to Inf at 5 of 81 points; the gradient is NaN at 5 points, up to P-T = -1.8",
        "naive fp16: exp(-k(P-T)) overflows to Inf at 36 of 81 points",
        "naive fp16: the gradient is flushed to 0",
        "ocr-c fp32: B, dB/dT and dB/dlogit finite and equal to the exact sigmoid at all 81 points",
        "ocr-c fp16: B, dB/dT and dB/dlogit finite and equal to the exact sigmoid at all 81 points",
        "OK: ocr-c's step and its gradient are finite and exact", NULL};
    /* within the threshold map's range fp32 is safe and fp16 is not; k = 1e4 stresses ocr-c's form */
    static const char *const in_range[] = {"naive fp32: no overflow in this range", "naive fp16: exp(-k(P-T)) overflows",
                                           "at all 401 points", "OK:", NULL};
    static const char *const steep[] = {"ocr-c fp32: B, dB/dT and dB/dlogit finite", "ocr-c fp16: B, dB/dT and dB/dlogit finite", "OK:", NULL};
    expect_run("step_overflow", "", 0, sweep);
    expect_run("step_overflow", "--from -1 --to 1 --points 401", 0, in_range);
    expect_run("step_overflow", "--k 10000 --from -3 --to 3 --points 301", 0, steep);
    expect_usage("step_overflow");
}

/* The device's step kernels over the same sweep: finite and exact where the naive form overflows. */
static void test_step_overflow_device(void) {
    static const char *const sweep[] = {
        "ocr-c's step runs on cuda", "naive fp32: exp(-k(P-T)) overflows to Inf at 5 of 81 points",
        "ocr-c fp32: B, dB/dT and dB/dlogit finite and equal to the exact sigmoid at all 81 points",
        "ocr-c fp16: B, dB/dT and dB/dlogit finite and equal to the exact sigmoid at all 81 points",
        "OK: ocr-c's step and its gradient are finite and exact on cuda", NULL};
    static const char *const steep[] = {"ocr-c fp32: B, dB/dT and dB/dlogit finite and equal to the exact sigmoid at all 301 points",
                                        "ocr-c fp16: B, dB/dT and dB/dlogit finite", "exact on cuda", NULL};
    expect_run_in(emu_dir, "step_overflow_emu", "--device cuda", 0, sweep);
    expect_run_in(emu_dir, "step_overflow_emu", "--device cuda --k 10000 --from -3 --to 3 --points 301", 0, steep);
    expect_no_cuda("step_overflow");
}

static void test_loss_bad_input(void) {
    static const char *const needles[] = {
        "argument mask_shrink: tensor 'mask_shrink' (F32 [1,1,16,16], cpu), expected shape [1,1,32,32] (ESHAPE)",
        "argument gt_shrink: tensor 'gt_shrink' (F32 [1,1,32,32], cuda) is on cuda, expected cpu (EDEVICE)",
        "argument prob_logits: tensor 'prob_logits' (F32 [1,1,32,32], cpu) has non-finite value nan at index 167 [0,0,5,7] (ENONFINITE)",
        "argument gt_shrink: tensor 'gt_shrink' (F32 [1,1,32,32], cpu) has value 255 at index 264 [0,0,8,8], outside [0, 1] (ERANGE)",
        "argument mask_thresh: tensor 'mask_thresh' has no data (not allocated, or already freed) (EINVAL)",
        "naive: L1 = sum / mask.sum() = 0 / 0 = nan", "every gradient finite",
        "OK: every bad input refused before any memory was read", NULL};
    expect_run("loss_bad_input", "", 0, needles);
    expect_run("loss_bad_input", "--threads 2", 0, needles);
    expect_usage("loss_bad_input");
}

/* The same cases against the device loss: values checked by a kernel, a target left on the host refused naming both
   devices. */
static void test_loss_bad_input_device(void) {
    static const char *const needles[] = {
        "valid inputs [1,1,32,32] on cuda: loss 2.634818",
        "argument mask_shrink: tensor 'mask_shrink' (F32 [1,1,16,16], cuda), expected shape [1,1,32,32] (ESHAPE)",
        "gt_shrink on cpu, the context and the predictions on cuda",
        "argument gt_shrink: tensor 'gt_shrink' (F32 [1,1,32,32], cpu) is on cpu, expected cuda (EDEVICE)",
        "argument prob_logits: tensor 'prob_logits' (F32 [1,1,32,32], cuda) has non-finite value nan at index 167 [0,0,5,7] (ENONFINITE)",
        "argument gt_shrink: tensor 'gt_shrink' (F32 [1,1,32,32], cuda) has value 255 at index 264 [0,0,8,8], outside [0, 1] (ERANGE)",
        "argument mask_thresh: tensor 'mask_thresh' has no data (not allocated, or already freed) (EINVAL)",
        "naive: L1 = sum / mask.sum() = 0 / 0 = nan", "every gradient finite",
        "OK: every bad input refused before any memory was read, with its message on cuda", NULL};
    expect_run_in(emu_dir, "loss_bad_input_emu", "--device cuda", 0, needles);
    expect_no_cuda("loss_bad_input");
}

static void test_lmdb_fork(void) {
    char args[256], line[128];
    static const char *const needles[] = {
        "MDB_BAD_RSLOT", "-> 4 of 4 naive children failed; the parent is unharmed",
        "ocr-c child 3 (pid", "-> 0 of 4 ocr-c children failed; the parent then read all 64 records correctly",
        "OK: every ocr-c child read every record correctly", NULL};
    static const char *const more[] = {"-> 0 of 6 ocr-c children failed; the parent then read all 300 records correctly", NULL};
    char *out, *err, *p;
    int n = 0;
    expect_run("lmdb_fork", "", 0, needles);
    /* every ocr-c child reports every record */
    snprintf(args, sizeof args, "%s/repro_lmdb_fork --records 300 --children 6 --dir %s/lmdb", bin_dir, ocr_test_cli_dir);
    OCR_CHECK(ocr_test_run(args, &out, &err) == 0);
    snprintf(line, sizeof line, "read all 300 records correctly (its own environment");
    for (p = out; (p = strstr(p, line)) != NULL; p++) n++;
    OCR_CHECK_MSG(n == 6, "%d of 6 ocr-c children read every record:\n%s", n, out);
    free(out);
    free(err);
    snprintf(args, sizeof args, "--records 300 --children 6 --dir %s/lmdb2", ocr_test_cli_dir);
    expect_run("lmdb_fork", args, 0, more);
    expect_usage("lmdb_fork");
    expect_host_only("lmdb_fork");
}

/* repro_amp on a tiny configuration: the four runs complete, the table and the verdict print (the H-means are all 0 after
   20 steps; the full-length comparison is in docs/TRAINING.md). train_dbnet is the plain build's in both runs, so the
   sanitizer run (which checks repro_amp itself) trains 5 steps. */
static void test_amp(void) {
    static const char *const needles[] = {"fp16, no loss scaling", "fp16, dynamic loss scaling", "bf16", "grads -> 0",
                                          "fp16 with loss scaling: +0.0000 H-mean against fp32", "OK: loss-scaled fp16", NULL};
    char args[512];
    snprintf(args, sizeof args, "--steps %d --size 64 --batch 2 --width 0.05 --val-count %d --val-size 64 --threads 2 "
                                "--train ./examples/train_dbnet --out %s/amp", sanitized ? 5 : 20, sanitized ? 2 : 4, ocr_test_cli_dir);
    expect_run("amp", args, 0, needles);
    expect_usage("amp");
    expect_host_only("amp");
}

static void test_stale_cache(void) {
    static const char *const needles[] = {
        "run 2, changed config: shrink_ratio 0.6", "naive (key: sample id)         hit  -> STALE maps",
        "ocr-c (key: content + config)  miss, rebuilt and stored -> maps match this configuration",
        "ocr-c (key: content + config)  hit  -> maps match this configuration",
        "ocr-c cache: 1 hits, 2 misses, 2 writes", "naive cache: served stale maps in 1 of 3 runs", "OK:", NULL};
    static const char *const thresh[] = {"thresh 0.2..0.8", "STALE maps", "ocr-c cache: 1 hits, 2 misses, 2 writes", "OK:", NULL};
    expect_run("stale_cache", "", 0, needles);
    expect_run("stale_cache", "--shrink-ratio 0.4 --thresh-min 0.2 --thresh-max 0.8", 0, thresh);
    /* a kept --dir: the second run finds the first run's entries, still valid, and expects hits there (it reported FAIL);
       a third run with another changed configuration misses and rebuilds only that one */
    {
        static const char *const first[] = {"ocr-c cache: 1 hits, 2 misses, 2 writes", "OK: ocr-c's cache missed and rebuilt", NULL};
        static const char *const again[] = {"already holds both configurations' entries from an earlier run",
                                            "ocr-c (key: content + config)  hit  -> maps match this configuration",
                                            "ocr-c cache: 3 hits, 0 misses, 0 writes", "naive cache: served stale maps in 1 of 3 runs",
                                            "OK: ocr-c's cache served the entries an earlier run stored", NULL};
        static const char *const other[] = {"already holds the default configuration's entry",
                                            "ocr-c (key: content + config)  miss, rebuilt and stored -> maps match this configuration",
                                            "ocr-c cache: 2 hits, 1 misses, 1 writes", "OK: ocr-c's cache missed and rebuilt", NULL};
        char args[256];
        snprintf(args, sizeof args, "--dir %s/stale_cache_kept", ocr_test_cli_dir);
        expect_run("stale_cache", args, 0, first);
        expect_run("stale_cache", args, 0, again);
        snprintf(args, sizeof args, "--dir %s/stale_cache_kept --shrink-ratio 0.5", ocr_test_cli_dir);
        expect_run("stale_cache", args, 0, other);
    }
    /* the same configuration twice is a usage error: nothing to show */
    expect_run("stale_cache", "--shrink-ratio 0.4", 2, NULL);
    expect_usage("stale_cache");
    expect_host_only("stale_cache");
}

static void test_nonfinite(void) {
    static const char *const needles[] = {
        "forward, watch off: returns OK",
        "ocr_dbnet_forward: layer 'backbone.layer3.0.conv2': ocr_nn_conv2d_forward (forward): first non-finite value nan in output "
        "'backbone.layer3.0.conv2' (F32 [1,32,4,4], cpu) at flat index",
        "(OCR_CHECK_NUMERICS=1 in the environment): the same report",
        "ocr_dbnet_backward: layer 'backbone.layer3.0.conv2': ocr_nn_conv2d_backward (backward): first non-finite value nan in output "
        "'backbone.layer3.0.conv2.weight.grad' (F32 [32,32,3,3], cpu) at flat index 10",
        "cost: a training step takes", "OK: the watch named the layer", NULL};
    static const char *const decoder[] = {"layer 'decoder.binarize.3': ocr_nn_conv_transpose2d_forward (forward)",
                                          "layer 'decoder.binarize.3': ocr_nn_conv_transpose2d_backward (backward)",
                                          "'decoder.binarize.3.weight.grad'", "at flat index 5", "OK:", NULL};
    expect_run("nonfinite", "--reps 1", 0, needles);
    expect_run("nonfinite", "--layer decoder.binarize.3 --index 5 --reps 1", 0, decoder);
    expect_run("nonfinite", "--layer no.such.layer", 2, NULL);
    expect_usage("nonfinite");
}

/* The watch on the device: the model's weights and gradients in device memory, found by a kernel after each layer.
   The emulator runs a DBNet step in seconds, not milliseconds: the watched runs only, on the last layer, where the
   watched forward runs to the end and the watched backward stops at once. Minutes under the sanitizers: plain only. */
static void test_nonfinite_device(void) {
    static const char *const needles[] = {
        "DBNet resnet18 width 0.125 on cuda",
        "ocr_dbnet_forward: layer 'decoder.thresh.6': ocr_nn_conv_transpose2d_forward: tensor 'decoder.thresh.6' (F32 [1,1,64,64], cuda) "
        "has non-finite value nan at index",
        "ocr_dbnet_backward: layer 'decoder.thresh.6': ocr_nn_conv_transpose2d_backward: tensor 'decoder.thresh.6.weight.grad' "
        "(F32 [8,1,2,2], cuda) has non-finite value nan at index 10 [2,0,1,0]",
        "OK: the watch named the layer, phase, tensor and index, forward and backward on cuda", NULL};
    expect_no_cuda("nonfinite");
    if (sanitized) {
        printf("     (sanitizer build: the emulated device variant runs in the plain build)\n");
        return;
    }
    expect_run_in(emu_dir, "nonfinite_emu", "--device cuda --watched-only --layer decoder.thresh.6 --index 10", 0, needles);
}

static void test_log_step(void) {
    static const char *const needles[] = {
        "naive steps in the file: 1 2 3 4 5 6 7 10 !8 9 10 11 12",
        "ocr_metrics: refused 'train/loss' at step 8: step 10 is already written and steps never go back",
        "ocr_metrics: refused 'train/loss' at step 9: step 10 is already written",
        "ocr-c steps in the file: 1 2 3 4 5 6 7 10 11 12\n", "2 records refused, each named above",
        "ocr-c steps in the file: 1 2 3 4 5 6 7 8 9 10 11 12\n", "0 records refused", "OK:", NULL};
    static const char *const longer[] = {"validation runs after step 13 and is logged at step 16", "refused 'train/loss' at step 14",
                                         "refused 'train/loss' at step 15", "2 records refused", "OK:", NULL};
    expect_run("log_step", "", 0, needles);
    expect_run("log_step", "--steps 30 --steps-per-epoch 8 --val-at 13", 0, longer);
    expect_run("log_step", "--val-at 10", 2, NULL); /* an epoch's end is not inside an epoch */
    expect_usage("log_step");
    expect_host_only("log_step");
}

/* A recognizer fed labels its charset cannot encode: empty targets naively, refused by ocr-c naming the key and the
   character, and the collapse to the blank caught by the decode watch. */
static void test_rec_empty(void) {
    static const char *const needles[] = {
        "naive (unknown characters dropped): 12 of 12 targets are empty, and training goes on",
        "sample 'image-000000001' of 'lmdb:", "U+D55C", "is not in the charset 'latin' (94 characters)",
        "(19 Hangul syllables) every label encodes: yes", "empty predictions 100% -> decode watch: WARNING",
        "verdict: ocr-c refuses labels the charset cannot encode", NULL};
    expect_run("rec_empty", "--threads 2", 0, needles);
    expect_usage("rec_empty");
    expect_host_only("rec_empty");
}

int main(int argc, char **argv) {
    char cmd[128];
    ocr_test_init(argc, argv);
    sanitized = ocr_test_sanitized();
    bin_dir = sanitized ? "build/san" : "./examples";
    emu_dir = sanitized ? "build/san" : "build";
    if (ocr_ctx_init(&ctx, 1, 7) != OCR_OK) return 1;
    ocr_test_cli_ctx = &ctx;
    snprintf(ocr_test_cli_dir, sizeof ocr_test_cli_dir, "/tmp/ocr_test_repro.XXXXXX");
    if (!mkdtemp(ocr_test_cli_dir)) { fprintf(stderr, "test_repro: mkdtemp failed\n"); return 1; }
    OCR_TEST_RUN(test_step_overflow);
    OCR_TEST_RUN(test_step_overflow_device);
    OCR_TEST_RUN(test_loss_bad_input);
    OCR_TEST_RUN(test_loss_bad_input_device);
    OCR_TEST_RUN(test_lmdb_fork);
    OCR_TEST_RUN(test_amp);
    OCR_TEST_RUN(test_stale_cache);
    OCR_TEST_RUN(test_nonfinite);
    OCR_TEST_RUN(test_nonfinite_device);
    OCR_TEST_RUN(test_log_step);
    OCR_TEST_RUN(test_rec_empty);
    snprintf(cmd, sizeof cmd, "rm -rf %s", ocr_test_cli_dir);
    if (system(cmd) != 0) fprintf(stderr, "test_repro: could not remove %s\n", ocr_test_cli_dir);
    ocr_ctx_free(&ctx);
    return ocr_test_finish();
}
