/* ./examples/train_dbnet end to end, as a user runs it (build.sh builds it before the tests), on a tiny model:
   - a short run whose loss falls, with its run directory complete: metrics.jsonl (steps strictly increasing,
     validation at its training step), a TensorBoard event file, last/best checkpoints that load back into a model
     with the run's config, overlays, and the final JSON line;
   - resume exactness: a run stopped at step 4 and resumed gives, bit for bit, the losses and the weight average of the
     uninterrupted run, also from a checkpoint whose optimizer file is in the format before ocr_optim_save's;
   - the settings table (kSettings in examples/train_dbnet.c): every flag is in --help with its default, and a run
     stopped with a non-default value for every stored setting resumes with all of them;
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

/* Rewrites run/last.optim.safetensors as train_dbnet wrote it before ocr_optim_save: the same tensors, train.step only. */
static void to_old_optim_format(const char *run) {
    static const char *const names[3] = {"optim.m", "optim.v", "ema"};
    char path[300];
    ocr_safetensors st;
    ocr_tensor t[3];
    const ocr_tensor *ptrs[3];
    const char *key = "train.step", *step;
    int i;
    snprintf(path, sizeof path, "%s/last.optim.safetensors", run);
    OCR_CHECK_OK(&ctx, ocr_safetensors_open(&ctx, &st, path));
    if (ocr_test__case_failed) return;
    step = ocr_safetensors_meta(&st, "train.step");
    OCR_CHECK_MSG(step && ocr_safetensors_meta(&st, "optim.version") && st.n_entries == 3,
                  "%s: expected train.step, optim.version and three tensors", path);
    for (i = 0; i < 3; i++) { OCR_CHECK_OK(&ctx, ocr_safetensors_read(&ctx, &st, names[i], &t[i])); ptrs[i] = &t[i]; }
    if (!ocr_test__case_failed) OCR_CHECK_OK(&ctx, ocr_safetensors_save(&ctx, path, ptrs, 3, &key, &step, 1));
    for (i = 0; i < 3; i++) ocr_tensor_free(&t[i]);
    ocr_safetensors_close(&st);
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
    /* a checkpoint from before the library's optimizer format (the tensors and train.step only) resumes as exactly */
    snprintf(run_b, sizeof run_b, "%s/resumed_old_format", dir);
    snprintf(args, sizeof args, "%s %s --steps 10 --eval-every 0 --save-every 3 --stop-at 4 --out %s", TRAIN, TINY, run_b);
    rc = ocr_test_run(args, &out, &err);
    OCR_CHECK_MSG(rc == 130, "'%s' exited %d (expected 130, as interrupted): %s", args, rc, err);
    free(out); free(err);
    to_old_optim_format(run_b);
    snprintf(args, sizeof args, "%s --resume %s --threads 2 --log-every 1 --workers 1", TRAIN, run_b);
    rc = ocr_test_run(args, &out, &err);
    OCR_CHECK_MSG(rc == 0, "'%s' exited %d: %s", args, rc, err);
    free(out); free(err);
    read_losses(run_b, lb, 10, &n_val);
    for (s = 1; s <= 10; s++)
        OCR_CHECK_MSG(la[s] == lb[s], "step %d: loss %.9g uninterrupted, %.9g resumed from the old optimizer format", s, la[s], lb[s]);
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

/* The rows of kSettings in examples/train_dbnet.c: {"--name", TYPE(field), default or NULL, STORED/RUNTIME/..., ...}. */
typedef struct { char name[64], type[16], def[64]; int has_def, stored; } setting_row;

static int read_settings_table(setting_row *rows, int cap) {
    char *src = ocr_test_read_text("examples/train_dbnet.c"), *p, *end;
    int n = 0;
    OCR_CHECK_MSG(src != NULL, "cannot read examples/train_dbnet.c (run from the repository root)");
    if (!src) return 0;
    p = strstr(src, "kSettings[] = {");
    end = p ? strstr(p, "\n};") : NULL;
    OCR_CHECK_MSG(p && end, "no kSettings table in examples/train_dbnet.c");
    while (p && end && (p = strstr(p, "{\"--")) != NULL && p < end && n < cap) {
        setting_row *r = &rows[n++];
        char *q = p + 2, *t;
        memset(r, 0, sizeof *r);
        snprintf(r->name, sizeof r->name, "--%.*s", (int)strcspn(q + 2, "\""), q + 2);
        q = strchr(q, ',') + 1;
        while (*q == ' ') q++;
        snprintf(r->type, sizeof r->type, "%.*s", (int)strcspn(q, "("), q);
        q = strchr(q, ')') + 1;
        q = strchr(q, ',') + 1;
        while (*q == ' ') q++;
        r->has_def = *q == '"';
        if (r->has_def) snprintf(r->def, sizeof r->def, "%.*s", (int)strcspn(q + 1, "\""), q + 1);
        q = strchr(q + 1, ',') + 1;
        while (*q == ' ') q++;
        r->stored = strncmp(q, "STORED", 6) == 0 || strncmp(q, "OCR_EX_STORED", 13) == 0;
        t = strchr(q, '\n');
        p = t ? t : end;
    }
    free(src);
    return n;
}

static void test_help_lists_every_setting(void) {
    setting_row rows[64];
    char cmd[256], line[160], *out, *err;
    int n = read_settings_table(rows, 64), i, rc;
    OCR_CHECK_MSG(n >= 30, "read %d rows of the settings table", n);
    snprintf(cmd, sizeof cmd, "%s --help", TRAIN);
    rc = ocr_test_run(cmd, &out, &err);
    OCR_CHECK_MSG(rc == 0, "%s exited %d", cmd, rc);
    if (!out) return;
    for (i = 0; i < n; i++) {
        const setting_row *r = &rows[i];
        char *at;
        snprintf(line, sizeof line, "\n  %.100s ", r->name); /* flag names are short */
        at = strstr(out, line);
        OCR_CHECK_MSG(at != NULL, "--help does not list %s:\n%s", r->name, out);
        if (!at || !r->has_def || strcmp(r->type, "BOOL") == 0) continue;
        /* the default as --help prints it: %d, %g of the float, the string */
        if (strcmp(r->type, "INT") == 0) snprintf(line, sizeof line, "(default %d)", atoi(r->def));
        else if (strcmp(r->type, "FLOAT") == 0) snprintf(line, sizeof line, "(default %g)", (double)(float)atof(r->def));
        else snprintf(line, sizeof line, "(default %s)", r->def);
        at += 1;
        {
            const char *found = strstr(at, line);
            OCR_CHECK_MSG(found && found < at + strcspn(at, "\n"), "--help's line for %s lacks %s: %.*s", r->name, line,
                          (int)strcspn(at, "\n"), at);
        }
    }
    OCR_CHECK_MSG(strstr(out, "(default 0.002)") && strstr(out, "(default 3000)") && strstr(out, "(default adamw)"),
                  "--help lost the defaults of --lr, --steps or --optimizer:\n%s", out);
    free(out);
    free(err);
}

/* A run stopped with a non-default value for every stored setting, resumed with no flags but --resume (and the ones a
   resume may change), writes every one of them back: the resumed run used them. */
static void test_resume_restores_settings(void) {
    static const struct { const char *flag, *value; } given[] = {
        {"--data", "synth"}, {"--val", "synth"}, {"--steps", "4"}, {"--epochs", "2"}, {"--batch", "2"}, {"--size", "64"},
        {"--lr", "0.003"}, {"--optimizer", "sgd"}, {"--weight-decay", "0.0002"}, {"--backbone", "resnet18"}, {"--width", "0.08"},
        {"--prior", "0.05"}, {"--balanced-fraction", "0.5"}, {"--pos-weight", "2"}, {"--prob-dice", "5"}, {"--ema", "0.9"},
        {"--synth-lines", "60"}, {"--synth-text-scale", "1.2"}, {"--clip", "3"}, {"--seed", "5"}, {"--init", ""},
        {"--eval-every", "3"}, {"--val-count", "4"}, {"--val-size", "64"}, {"--val-scale", "1.5"}};
    enum { N_GIVEN = sizeof given / sizeof given[0] };
    setting_row rows[64];
    char args[2048], run[256], path[300], key[64], want[64], *out, *err;
    int n = read_settings_table(rows, 64), i, k, rc, n_stored = 0;
    size_t len;
    ocr_safetensors st;
    /* the list above covers every stored setting of the table */
    for (i = 0; i < n; i++) {
        if (!rows[i].stored) continue;
        n_stored++;
        for (k = 0; k < N_GIVEN && strcmp(given[k].flag, rows[i].name) != 0; k++) {}
        OCR_CHECK_MSG(k < N_GIVEN, "stored setting %s is not in this test's list: add it with a value other than its default", rows[i].name);
    }
    OCR_CHECK_MSG(n_stored == N_GIVEN, "%d stored settings in the table, %d in this test", n_stored, (int)N_GIVEN);
    snprintf(run, sizeof run, "%s/settings", dir);
    len = (size_t)snprintf(args, sizeof args, "%s --threads 2 --workers 2 --log-every 1 --stop-at 2 --out %s", TRAIN, run);
    for (k = 0; k < N_GIVEN; k++)
        if (given[k].value[0]) len += (size_t)snprintf(args + len, sizeof args - len, " %s %s", given[k].flag, given[k].value);
    rc = ocr_test_run(args, &out, &err);
    OCR_CHECK_MSG(rc == 130, "'%s' exited %d (expected 130, as interrupted): %s", args, rc, err);
    free(out); free(err);
    snprintf(args, sizeof args, "%s --resume %s --threads 2 --workers 1", TRAIN, run);
    rc = ocr_test_run(args, &out, &err);
    OCR_CHECK_MSG(rc == 0, "'%s' exited %d: %s", args, rc, err);
    OCR_CHECK_MSG(err && strstr(err, "resuming DB-ResNet-18 width 0.08,") && strstr(err, "4 steps of 2 x 64x64") &&
                      strstr(err, "validation 4 images run at 96x96"),
                  "the resumed run's first line does not show its settings: %s", err ? err : "");
    free(out); free(err);
    snprintf(path, sizeof path, "%s/last.safetensors", run);
    OCR_CHECK_OK(&ctx, ocr_safetensors_open(&ctx, &st, path));
    if (ocr_test__case_failed) return;
    OCR_CHECK_MSG(ocr_safetensors_meta(&st, "train.step") && strcmp(ocr_safetensors_meta(&st, "train.step"), "4") == 0,
                  "the resumed run did not reach step 4");
    for (k = 0; k < N_GIVEN; k++) {
        const char *got;
        size_t j;
        snprintf(key, sizeof key, "train.%s", given[k].flag + 2);
        for (j = 6; key[j]; j++) if (key[j] == '-') key[j] = '_';
        got = ocr_safetensors_meta(&st, key);
        for (i = 0; i < n && strcmp(rows[i].name, given[k].flag) != 0; i++) {}
        /* what the first run stored: ints and strings as given, floats as "%.9g" of the float */
        if (i < n && strcmp(rows[i].type, "FLOAT") == 0) snprintf(want, sizeof want, "%.9g", (double)(float)atof(given[k].value));
        else snprintf(want, sizeof want, "%s", given[k].value);
        OCR_CHECK_MSG(got && strcmp(got, want) == 0, "after the resume %s is '%s', expected '%s'", key, got ? got : "(missing)", want);
    }
    ocr_safetensors_close(&st);
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
    OCR_TEST_RUN(test_help_lists_every_setting);
    OCR_TEST_RUN(test_short_run);
    OCR_TEST_RUN(test_resume_exact);
    OCR_TEST_RUN(test_resume_restores_settings);
    OCR_TEST_RUN(test_val_scale_mapping);
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    if (system(cmd) != 0) fprintf(stderr, "test_train: could not remove %s\n", dir);
    ocr_ctx_free(&ctx);
    return ocr_test_finish();
}
