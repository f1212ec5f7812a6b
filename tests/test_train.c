/* ./examples/train_dbnet end to end, as a user runs it (build.sh builds it before the tests), on a tiny model:
   - a short run whose loss falls, with its run directory complete: metrics.jsonl (steps strictly increasing,
     validation at its training step), a TensorBoard event file, last/best checkpoints that load back into a model
     with the run's config, overlays, and the final JSON line;
   - resume exactness: a run stopped at step 4 and resumed gives, bit for bit, the losses and the weight average of the
     uninterrupted run;
   - validation at --val-scale 1.5 maps detections back to the images (a model that finds every whole image scores 1);
   - usage errors exit 2, missing inputs exit 1 naming them, --device cuda says this build has no CUDA (a usage error, exit 2). */
#define OCR_IMPLEMENTATION
#include "ocr_tensor.h"
#include "ocr_nn.h"
#include "ocr_loss.h"
#include "ocr_dbnet.h"
#include "ocr_data.h"
#include "ocr_test.h"
#include "ocr_test_cli.h"
#include <sys/stat.h>
#include <errno.h>
#include <unistd.h>

static const char *const TRAIN = "./examples/train_dbnet";
/* tiny and fast: 64x64 scenes, batch 2, the narrowest model */
#define TINY "--size 64 --batch 2 --width 0.05 --val-count 4 --val-size 64 --threads 2 --log-every 1 --workers 2"
#define dir ocr_test_cli_dir
static ocr_ctx ctx;

static void expect_exit(const char *args, int code, const char *needle) {
    char cmd[2048];
    snprintf(cmd, sizeof cmd, "%s %s", TRAIN, args);
    ocr_test_expect_exit(cmd, code, needle);
}

/* Reads run/metrics.jsonl: losses[step] for steps 1..max (NAN where absent); checks steps strictly increase. */
static int read_losses(const char *run_dir, double *losses, int max, int *n_val) {
    char path[300], *text, *line;
    int64_t last = -1;
    int n = 0, i;
    for (i = 0; i <= max; i++) losses[i] = NAN;
    *n_val = 0;
    snprintf(path, sizeof path, "%s/metrics.jsonl", run_dir);
    text = ocr_test_read_text(path);
    OCR_CHECK_MSG(text != NULL, "no %s", path);
    if (!text) return 0;
    for (line = text; *line; ) {
        char *end = strchr(line, '\n');
        size_t len = end ? (size_t)(end - line) : strlen(line);
        double step = ocr_test_json_number(line, len, "step"), loss = ocr_test_json_number(line, len, "train/loss");
        OCR_CHECK_MSG(step > (double)last, "%s: step %g after %lld", path, step, (long long)last);
        last = (int64_t)step;
        if (step >= 0 && step <= max && !isnan(loss)) { losses[(int)step] = loss; n++; }
        if (!isnan(ocr_test_json_number(line, len, "val/hmean"))) (*n_val)++;
        line = end ? end + 1 : line + len;
    }
    free(text);
    return n;
}

static void test_short_run(void) {
    char args[1024], path[256], *out, *err, *last;
    double losses[13], first, final;
    int rc, n, n_val;
    ocr_dbnet_config cfg;
    ocr_dbnet m;
    struct stat st;
    snprintf(args, sizeof args, "%s %s --steps 12 --eval-every 5 --save-every 6 --lr 0.005 --val-scale 1.5 --out %s/short", TRAIN, TINY, dir);
    rc = ocr_test_run(args, &out, &err);
    OCR_CHECK_MSG(rc == 0, "'%s' exited %d: %s", args, rc, err);
    /* the last stdout line is the summary */
    last = strrchr(out, '{');
    OCR_CHECK_MSG(last && ocr_test_json_number(last, strcspn(last, "\n"), "steps") == 12 && !isnan(ocr_test_json_number(last, strcspn(last, "\n"), "hmean")) &&
                      ocr_test_json_number(last, strcspn(last, "\n"), "images_per_second") > 0,
                  "last line: %s", last ? last : out);
    snprintf(path, sizeof path, "%s/short", dir);
    n = read_losses(path, losses, 12, &n_val);
    OCR_CHECK_MSG(n == 12, "%d losses logged, expected 12", n);
    OCR_CHECK_MSG(n_val == 3, "%d validations logged, expected 3 (steps 5, 10 and the last, 12, where the checkpoint is also written)", n_val);
    first = (losses[1] + losses[2] + losses[3]) / 3;
    final = (losses[10] + losses[11] + losses[12]) / 3;
    OCR_CHECK_MSG(final < 0.8 * first, "the loss did not fall: first steps %g, last steps %g", first, final);
    snprintf(path, sizeof path, "%s/short/overlays/step_000012_0.png", dir);
    OCR_CHECK_MSG(stat(path, &st) == 0 && st.st_size > 100, "no overlay %s", path);
    /* checkpoints load back with the run's config */
    snprintf(path, sizeof path, "%s/short/last.safetensors", dir);
    OCR_CHECK_OK(&ctx, ocr_dbnet_read_config(&ctx, path, &cfg));
    OCR_CHECK(fabs(cfg.width - 0.05f) < 1e-6 && cfg.depth == 18);
    OCR_CHECK_OK(&ctx, ocr_dbnet_init(&ctx, &m, &cfg));
    OCR_CHECK_OK(&ctx, ocr_dbnet_load(&ctx, &m, path));
    snprintf(path, sizeof path, "%s/short/best.safetensors", dir);
    OCR_CHECK_OK(&ctx, ocr_dbnet_load(&ctx, &m, path));
    ocr_dbnet_free(&m);
    free(out);
    free(err);
}

static void test_resume_exact(void) {
    char args[1024], run_a[256], run_b[256], *out, *err;
    double la[11], lb[11];
    int rc, n_val, s;
    snprintf(run_a, sizeof run_a, "%s/whole", dir);
    snprintf(run_b, sizeof run_b, "%s/resumed", dir);
    snprintf(args, sizeof args, "%s %s --steps 10 --eval-every 0 --save-every 3 --out %s", TRAIN, TINY, run_a);
    rc = ocr_test_run(args, &out, &err);
    OCR_CHECK_MSG(rc == 0, "'%s' exited %d: %s", args, rc, err);
    free(out); free(err);
    snprintf(args, sizeof args, "%s %s --steps 10 --eval-every 0 --save-every 3 --stop-at 4 --out %s", TRAIN, TINY, run_b);
    rc = ocr_test_run(args, &out, &err);
    OCR_CHECK_MSG(rc == 130 && strstr(err, "--resume"), "'%s' exited %d (expected 130, as interrupted): %s", args, rc, err);
    free(out); free(err);
    snprintf(args, sizeof args, "%s --resume %s --threads 2 --log-every 1 --workers 1", TRAIN, run_b);
    rc = ocr_test_run(args, &out, &err);
    OCR_CHECK_MSG(rc == 0, "'%s' exited %d: %s", args, rc, err);
    free(out); free(err);
    read_losses(run_a, la, 10, &n_val);
    read_losses(run_b, lb, 10, &n_val);
    for (s = 1; s <= 10; s++)
        OCR_CHECK_MSG(la[s] == lb[s], "step %d: loss %.9g uninterrupted, %.9g interrupted at 4 and resumed", s, la[s], lb[s]);
    /* the weight average (--ema, on by default) continues exactly too */
    {
        ocr_safetensors fa, fb;
        ocr_tensor ea, eb;
        char pa[300], pb[300];
        memset(&ea, 0, sizeof ea); eb = ea;
        snprintf(pa, sizeof pa, "%s/last.optim.safetensors", run_a);
        snprintf(pb, sizeof pb, "%s/last.optim.safetensors", run_b);
        OCR_CHECK_OK(&ctx, ocr_safetensors_open(&ctx, &fa, pa));
        OCR_CHECK_OK(&ctx, ocr_safetensors_open(&ctx, &fb, pb));
        if (ocr_test__case_failed) return;
        OCR_CHECK_OK(&ctx, ocr_safetensors_read(&ctx, &fa, "ema", &ea));
        OCR_CHECK_OK(&ctx, ocr_safetensors_read(&ctx, &fb, "ema", &eb));
        OCR_CHECK_MSG(ea.data && eb.data && ocr_tensor_bytes(&ea) == ocr_tensor_bytes(&eb) && memcmp(ea.data, eb.data, ocr_tensor_bytes(&ea)) == 0,
                      "the weight average after 10 steps differs between the uninterrupted and the resumed run");
        ocr_tensor_free(&ea); ocr_tensor_free(&eb);
        ocr_safetensors_close(&fa); ocr_safetensors_close(&fb);
    }
}

/* Validation at --val-scale maps the detections back to the validation images: a model whose probability map is near 1
   everywhere (head bias at logit(0.999999), learning rate ~0) finds one box covering each 64x64 image, the ground
   truth of each, so H is 1 at 1x and at 1.5x; a box left in the 96x96 input's coordinates would miss (IoU 0.44). */
static void test_val_scale_mapping(void) {
    static const float scales[2] = {1.0f, 1.5f};
    char root[128], path[256], args[1024], *out, *err, *last;
    int i, rc;
    snprintf(root, sizeof root, "%s/full", dir);
    OCR_CHECK_MSG(mkdir(root, 0755) == 0 || errno == EEXIST, "mkdir %s", root);
    for (i = 0; i < 2; i++) {
        snprintf(path, sizeof path, "%s/%s", root, i ? "gts" : "images");
        OCR_CHECK_MSG(mkdir(path, 0755) == 0 || errno == EEXIST, "mkdir %s", path);
    }
    for (i = 1; i <= 2; i++) {
        ocr_image img;
        FILE *f;
        OCR_CHECK_OK(&ctx, ocr_image_alloc(&ctx, &img, 64, 64, 3));
        if (ocr_test__case_failed) return;
        memset(img.pixels, 90 * i, (size_t)64 * 64 * 3);
        snprintf(path, sizeof path, "%s/images/img_%d.png", root, i);
        OCR_CHECK_OK(&ctx, ocr_image_save_png(&ctx, path, &img));
        ocr_image_free(&img);
        snprintf(path, sizeof path, "%s/gts/gt_img_%d.txt", root, i);
        f = fopen(path, "w");
        OCR_CHECK_MSG(f != NULL, "cannot write %s", path);
        if (!f) return;
        fputs("0,0,63,0,63,63,0,63,page\n", f);
        fclose(f);
    }
    for (i = 0; i < 2; i++) {
        snprintf(args, sizeof args, "%s --data icdar:%s --val icdar:%s --size 64 --batch 1 --width 0.05 --val-size 64 --threads 2 "
                                    "--steps 1 --lr 1e-12 --prior 0.999999 --val-scale %g --out %s/full_run_%d", TRAIN, root, root, (double)scales[i], dir, i);
        rc = ocr_test_run(args, &out, &err);
        OCR_CHECK_MSG(rc == 0, "'%s' exited %d: %s", args, rc, err);
        last = strrchr(out, '{');
        OCR_CHECK_MSG(last && ocr_test_json_number(last, strcspn(last, "\n"), "hmean") == 1.0, "--val-scale %g: %s", (double)scales[i],
                      last ? last : out);
        free(out);
        free(err);
    }
}

static void test_usage_errors(void) {
    char args[512];
    expect_exit("--help", 0, NULL);
    expect_exit("--steps abc", 2, "--steps needs an integer");
    expect_exit("--bogus 1", 2, "unknown flag '--bogus'");
    expect_exit("--size 100", 2, "multiples of 32");
    expect_exit("--synth-lines -5", 2, "--synth-lines in [0, 10000]");
    expect_exit("--synth-text-scale 0", 2, "--synth-text-scale in [0.1, 10]");
    expect_exit("--val-scale 0.1", 2, "--val-scale 0 or in [0.25, 4]");
    expect_exit("--ema 1", 2, "--ema in [0, 1)");
    expect_exit("--optimizer adam", 2, "--optimizer must be sgd or adamw");
    expect_exit("--device cuda", 2, "no CUDA");
    snprintf(args, sizeof args, "--data icdar:%s/no_such_dir --out %s/x", dir, dir);
    expect_exit(args, 1, "no_such_dir");
    snprintf(args, sizeof args, "--data lmdb:%s/no_such_lmdb --out %s/y", dir, dir);
    expect_exit(args, 1, "no_such_lmdb");
    snprintf(args, sizeof args, "--resume %s/no_such_run", dir);
    expect_exit(args, 1, "no_such_run");
}

int main(int argc, char **argv) {
    char cmd[128];
    ocr_test_init(argc, argv);
    if (access(TRAIN, X_OK) != 0) {
        fprintf(stderr, "test_train: %s must be built first (./build.sh builds it)\n", TRAIN);
        printf("FAIL program_built\nRESULT passed=0 failed=1\n");
        return 1;
    }
    if (ocr_ctx_init(&ctx, 1, 7) != OCR_OK) return 1;
    ocr_test_cli_ctx = &ctx;
    snprintf(dir, sizeof dir, "/tmp/ocr_test_train.XXXXXX");
    if (!mkdtemp(dir)) { fprintf(stderr, "test_train: mkdtemp failed\n"); return 1; }
    OCR_TEST_RUN(test_usage_errors);
    OCR_TEST_RUN(test_short_run);
    OCR_TEST_RUN(test_resume_exact);
    OCR_TEST_RUN(test_val_scale_mapping);
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    if (system(cmd) != 0) fprintf(stderr, "test_train: could not remove %s\n", dir);
    ocr_ctx_free(&ctx);
    return ocr_test_finish();
}
