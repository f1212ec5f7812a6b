/* ./examples/train_dbnet end to end, as a user runs it (build.sh builds it before the tests), on a tiny model:
   - a short run whose loss falls, with its run directory complete: metrics.jsonl (steps strictly increasing,
     validation at its training step, the held-out set's figures and recall by height beside it), a TensorBoard event
     file, last/best checkpoints that load back into a model with the run's config and record the fonts and
     photographs (SHA-256, one recomputed by sha256sum) that the start output lists, overlays, and the final JSON line;
   - resume exactness: a run stopped at step 4 and resumed gives, bit for bit, the losses and the weight average of the
     uninterrupted run, also from a checkpoint whose optimizer file is in the format before ocr_optim_save's;
   - the settings table (kSettings in examples/train_dbnet.c): every flag is in --help with its default, and a run
     stopped with a non-default value for every stored setting resumes with all of them;
   - --resume refuses a run whose fonts changed (a font's bytes, a font added), naming the font;
   - validation at --val-scale 1.5 maps detections back to the images (a model that finds every whole image scores 1);
   - crashes and full disks: 30 SIGKILLs at random instants and inside the state commit (OCR_TEST_KILL_IN_SAVE), each
     followed by --resume, always leave one complete state and end bit for bit where an uninterrupted run ends
     (OCR_TEST_KILLS=N for more; OCR_TEST_SEED=S repeats a sequence); a write failing with EFBIG (RLIMIT_FSIZE, as a
     full disk) keeps the previous state, which resumes exactly; a checkpoint lacking a key --resume needs is an error
     naming the file and the key;
   - the run directory's lock (a second trainer or a --resume of a running run is refused naming its pid, a killed
     holder's lock is taken over), exit 2 for a new run in a directory holding one, and --overwrite;
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
#include <sys/file.h>
#include <sys/resource.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <time.h>
#include <unistd.h>

static const char *const TRAIN = "./examples/train_dbnet";
/* tiny and fast: 64x64 scenes, batch 2, the narrowest model; TINY without photographs (decoding them takes longer than
   such a run: test_short_run covers them) */
#define TINY_PHOTOS "--size 64 --batch 2 --width 0.05 --val-count 4 --val-size 64 --threads 2 --log-every 1 --workers 2"
#define TINY TINY_PHOTOS " --photos none"
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

/* A run's record of its fonts and photographs (key, e.g. synth.fonts, in the checkpoint at path): "<sha256>  <file>"
   lines, each also in the start output (err). The first file's hash is recomputed by sha256sum (coreutils) from
   root/<file>. The number of lines, -1 when the key is missing or a line is malformed. */
static int check_asset_record(const char *path, const char *key, const char *err, const char *root) {
    ocr_safetensors st;
    const char *v, *line;
    int n = 0;
    OCR_CHECK_OK(&ctx, ocr_safetensors_open(&ctx, &st, path));
    if (ocr_test__case_failed) return -1;
    v = ocr_safetensors_meta(&st, key);
    OCR_CHECK_MSG(v != NULL, "%s lacks %s", path, key);
    for (line = v ? v : ""; *line; line += strcspn(line, "\n") + 1, n++) {
        size_t len = strcspn(line, "\n"), k;
        char want[700];
        for (k = 0; k < 64 && ((line[k] >= '0' && line[k] <= '9') || (line[k] >= 'a' && line[k] <= 'f')); k++) {}
        OCR_CHECK_MSG(k == 64 && len > 66 && line[64] == ' ' && line[65] == ' ' && line[len] == '\n', "%s line %d is not '<sha256>  <file>': %.*s",
                      key, n + 1, (int)len, line);
        if (k != 64 || len <= 66 || len > 600) { n = -1; break; }
        snprintf(want, sizeof want, "\n  %.*s\n", (int)len, line);
        OCR_CHECK_MSG(strstr(err, want) != NULL, "the start output does not list %s's %.*s", key, (int)len, line);
        if (n == 0 && root) { /* an independent hash of the first file */
            char cmd[1400], *sum = NULL, *sum_err = NULL;
            int rc;
            snprintf(cmd, sizeof cmd, "sha256sum '%s/%.*s'", root, (int)(len - 66), line + 66);
            rc = ocr_test_run(cmd, &sum, &sum_err);
            OCR_CHECK_MSG(rc == 0 && sum && strncmp(sum, line, 64) == 0, "%s: '%s' gives %s, the record %.64s", key, cmd, sum ? sum : "", line);
            free(sum);
            free(sum_err);
        }
    }
    ocr_safetensors_close(&st);
    return n;
}

static void test_short_run(void) {
    char args[1024], path[256], *out, *err, *last;
    double losses[13], first, final;
    int rc, n, n_val, b;
    ocr_dbnet_config cfg;
    ocr_dbnet m;
    struct stat st;
    /* with the declared fonts and photographs (the default) */
    snprintf(args, sizeof args, "%s %s --steps 12 --eval-every 5 --save-every 6 --lr 0.005 --val-scale 1.5 --out %s/short", TRAIN, TINY_PHOTOS,
             dir);
    rc = ocr_test_run(args, &out, &err);
    OCR_CHECK_MSG(rc == 0, "'%s' exited %d: %s", args, rc, err);
    /* the last stdout line is the summary, with the held-out set's figures and recall by height */
    last = strrchr(out, '{');
    OCR_CHECK_MSG(last && ocr_test_json_number(last, strcspn(last, "\n"), "steps") == 12 && !isnan(ocr_test_json_number(last, strcspn(last, "\n"), "hmean")) &&
                      ocr_test_json_number(last, strcspn(last, "\n"), "images_per_second") > 0 &&
                      !isnan(ocr_test_json_number(last, strcspn(last, "\n"), "heldout_hmean")) &&
                      !isnan(ocr_test_json_number(last, strcspn(last, "\n"), "heldout_precision")) &&
                      !isnan(ocr_test_json_number(last, strcspn(last, "\n"), "heldout_recall")),
                  "last line: %s", last ? last : out);
    for (b = 0; b < 3 && last; b++) { /* each bin is there: a number, or null without words of that height */
        static const char *const keys[6] = {"\"recall_h_lt16\":", "\"recall_h16_32\":", "\"recall_h_gt32\":", "\"heldout_recall_h_lt16\":",
                                            "\"heldout_recall_h16_32\":", "\"heldout_recall_h_gt32\":"};
        OCR_CHECK_MSG(strstr(last, keys[b]) && strstr(last, keys[3 + b]), "last line lacks %s or %s: %s", keys[b], keys[3 + b], last);
    }
    OCR_CHECK_MSG(strstr(out, "step 5 validation: precision") && strstr(out, " heldout_hmean ") && strstr(out, "recall by height"),
                  "no held-out figures in the validation lines: %s", out);
    snprintf(path, sizeof path, "%s/short", dir);
    n = read_losses(path, losses, 12, &n_val);
    OCR_CHECK_MSG(n == 12, "%d losses logged, expected 12", n);
    OCR_CHECK_MSG(n_val == 3, "%d validations logged, expected 3 (steps 5, 10 and the last, 12, where the checkpoint is also written)", n_val);
    {
        char *text, *at;
        int n_held = 0, n_bins = 0;
        snprintf(path, sizeof path, "%s/short/metrics.jsonl", dir);
        text = ocr_test_read_text(path);
        for (at = text; at && (at = strstr(at, "\"val/heldout_hmean\":")) != NULL; at++) n_held++;
        for (at = text; at && (at = strstr(at, "\"val/recall_h")) != NULL; at++) n_bins++;
        OCR_CHECK_MSG(n_held == 3 && text && strstr(text, "\"val/heldout_precision\":") && strstr(text, "\"val/heldout_recall\":"),
                      "val/heldout_hmean logged %d times, expected 3, with its precision and recall", n_held);
        OCR_CHECK_MSG(n_bins >= 3, "recall by height logged %d times", n_bins);
        free(text);
    }
    /* the fonts and photographs, named with their SHA-256 in the checkpoint and the start output */
    snprintf(path, sizeof path, "%s/short/last.safetensors", dir);
    OCR_CHECK_MSG(check_asset_record(path, "synth.fonts", err, "/usr/share/fonts") > 0, "no training fonts recorded");
    OCR_CHECK_MSG(check_asset_record(path, "synth.photos", err, "/usr/share/backgrounds") > 0, "no training photographs recorded");
    OCR_CHECK_MSG(check_asset_record(path, "synth.heldout_fonts", err, "/usr/share/fonts") > 0, "no held-out fonts recorded");
    OCR_CHECK_MSG(check_asset_record(path, "synth.heldout_photos", err, "/usr/share/backgrounds") > 0, "no held-out photographs recorded");
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

/* Turns a run directory into what train_dbnet wrote before state.json: last.safetensors + last.optim.safetensors only. */
static void to_old_layout(const char *run) {
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -f %s/state.json %s/state.*.safetensors", run, run);
    OCR_CHECK(system(cmd) == 0);
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
    to_old_layout(run_b);
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

/* fp16 with the loss scaler: a run interrupted and resumed ends bit for bit where the uninterrupted one does, with the
   scaler's state (scale, clean-step counter) carried through the checkpoint, and state.json in format 2. */
static void test_resume_exact_fp16(void) {
    char args[1024], run_a[256], run_b[256], path[300], *out, *err;
    double la[11], lb[11];
    int rc, n_val, s, k;
    const char *runs[2];
    snprintf(run_a, sizeof run_a, "%s/whole_fp16", dir);
    snprintf(run_b, sizeof run_b, "%s/resumed_fp16", dir);
    runs[0] = run_a; runs[1] = run_b;
    snprintf(args, sizeof args, "%s %s --amp fp16 --steps 10 --eval-every 0 --save-every 3 --out %s", TRAIN, TINY, run_a);
    rc = ocr_test_run(args, &out, &err);
    OCR_CHECK_MSG(rc == 0 && strstr(err, "precision fp16 with dynamic loss scaling"), "'%s' exited %d: %s", args, rc, err);
    OCR_CHECK_MSG(strstr(out, "fp16 underflow") && strstr(out, " scale "), "no mixed-precision figures in the log: %s", out);
    free(out); free(err);
    snprintf(args, sizeof args, "%s %s --amp fp16 --steps 10 --eval-every 0 --save-every 3 --stop-at 4 --out %s", TRAIN, TINY, run_b);
    rc = ocr_test_run(args, &out, &err);
    OCR_CHECK_MSG(rc == 130, "'%s' exited %d (expected 130, as interrupted): %s", args, rc, err);
    free(out); free(err);
    snprintf(args, sizeof args, "%s --resume %s --threads 2 --log-every 1 --workers 1", TRAIN, run_b);
    rc = ocr_test_run(args, &out, &err);
    OCR_CHECK_MSG(rc == 0 && strstr(err, "precision fp16"), "'%s' exited %d: %s", args, rc, err);
    free(out); free(err);
    read_losses(run_a, la, 10, &n_val);
    read_losses(run_b, lb, 10, &n_val);
    for (s = 1; s <= 10; s++)
        OCR_CHECK_MSG(la[s] == lb[s], "fp16 step %d: loss %.9g uninterrupted, %.9g interrupted at 4 and resumed", s, la[s], lb[s]);
    /* The scaler's state after step 10 is the same in both runs. The counter counts clean steps since the last
       change of scale and the step count since the start: a resumed run with a fresh scaler would differ in one. */
    for (k = 0; k < 2; k++) {
        static char want[3][64];
        static const char *const keys[3] = {"amp.scale", "amp.growth_tracker", "amp.skipped"};
        ocr_safetensors st;
        char *manifest;
        int j;
        snprintf(path, sizeof path, "%s/last.optim.safetensors", runs[k]);
        OCR_CHECK_OK(&ctx, ocr_safetensors_open(&ctx, &st, path));
        if (ocr_test__case_failed) return;
        for (j = 0; j < 3; j++) {
            const char *v = ocr_safetensors_meta(&st, keys[j]);
            OCR_CHECK_MSG(v != NULL, "%s lacks %s", path, keys[j]);
            if (!v) continue;
            if (k == 0) snprintf(want[j], sizeof want[j], "%s", v);
            else OCR_CHECK_MSG(!strcmp(v, want[j]), "%s: %s is %s, the uninterrupted run's %s", path, keys[j], v, want[j]);
        }
        if (k == 0) OCR_CHECK_MSG(atoi(want[1]) + atoi(want[2]) <= 10, "counter %s and %s skips after 10 steps", want[1], want[2]);
        ocr_safetensors_close(&st);
        snprintf(path, sizeof path, "%s/state.json", runs[k]);
        manifest = ocr_test_read_text(path);
        OCR_CHECK_MSG(manifest && strstr(manifest, "\"format\":2"), "%s: %s", path, manifest ? manifest : "missing");
        free(manifest);
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
    OCR_CHECK_MSG(strstr(out, "(default 0.002)") && strstr(out, "(default 6000)") && strstr(out, "(default adamw)"),
                  "--help lost the defaults of --lr, --steps or --optimizer:\n%s", out);
    free(out);
    free(err);
}

/* --amp auto, the default, is bf16 where the CPU multiplies bf16 natively and fp32 elsewhere (OCR_BF16_KERNEL=none
   plays a CPU without the instructions); the start line says it was the default, and the checkpoint stores the
   precision picked, so a resume where the other one would be picked continues in the run's. */
static void test_amp_default(void) {
    const char *want = ocr_amp_name(ocr_amp_default(&ctx));
    char args[1024], run[256], path[300], line[128], *out, *err;
    int rc, k;
    for (k = 0; k < 2; k++) {
        const char *env = k ? "OCR_BF16_KERNEL=none " : "", *expect = k ? "fp32" : want, *got;
        ocr_safetensors st;
        snprintf(run, sizeof run, "%s/amp_default_%d", dir, k);
        snprintf(args, sizeof args, "%s%s %s --steps 3 --stop-at 1 --eval-every 0 --out %s", env, TRAIN, TINY, run);
        rc = ocr_test_run(args, &out, &err);
        snprintf(line, sizeof line, "precision %s", expect);
        OCR_CHECK_MSG(rc == 130 && strstr(err, line) && strstr(err, "(the default"), "'%s' exited %d (expected 130) without '%s "
                      "... (the default': %s", args, rc, line, err);
        free(out); free(err);
        snprintf(path, sizeof path, "%s/last.safetensors", run);
        OCR_CHECK_OK(&ctx, ocr_safetensors_open(&ctx, &st, path));
        if (ocr_test__case_failed) return;
        got = ocr_safetensors_meta(&st, "train.amp");
        OCR_CHECK_MSG(got && strcmp(got, expect) == 0, "train.amp is '%s', expected '%s'", got ? got : "(missing)", expect);
        got = ocr_safetensors_meta(&st, "train.val_post"); /* the validations' post-processing, named */
        OCR_CHECK_MSG(got && strstr(got, "split_thresh 0.8") && strstr(got, "score slow"), "train.val_post is '%s'", got ? got : "(missing)");
        ocr_safetensors_close(&st);
        /* resumed the other way round: the run's precision, not the one this CPU (or setting) would pick */
        snprintf(args, sizeof args, "%s%s --resume %s --threads 2 --workers 1", k ? "" : "OCR_BF16_KERNEL=none ", TRAIN, run);
        rc = ocr_test_run(args, &out, &err);
        OCR_CHECK_MSG(rc == 0 && strstr(err, line) && !strstr(err, "(the default") && !strstr(err, "post-processing is now"),
                      "'%s' exited %d, left '%s' or warned: %s", args, rc, line, err);
        free(out); free(err);
    }
}

/* A run stopped with a non-default value for every stored setting, resumed with no flags but --resume (and the ones a
   resume may change), writes every one of them back: the resumed run used them. */
static void test_resume_restores_settings(void) {
    static const struct { const char *flag, *value; } given[] = {
        {"--data", "synth"}, {"--val", "synth"}, {"--fonts", "/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf"}, {"--photos", "none"},
        {"--heldout-count", "2"}, {"--steps", "4"}, {"--epochs", "2"}, {"--batch", "2"}, {"--size", "64"},
        {"--lr", "0.003"}, {"--optimizer", "sgd"}, {"--weight-decay", "0.0002"}, {"--backbone", "resnet18"}, {"--width", "0.08"},
        {"--prior", "0.05"}, {"--balanced-fraction", "0.5"}, {"--pos-weight", "2"}, {"--prob-dice", "5"}, {"--ema", "0.9"},
        {"--synth-lines", "60"}, {"--synth-text-scale", "1.2"}, {"--clip", "3"}, {"--seed", "5"}, {"--init", ""},
        {"--eval-every", "3"}, {"--val-count", "4"}, {"--val-size", "64"}, {"--val-scale", "1.5"}, {"--amp", "bf16"}, {"--loss-scale", "off"}};
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

/* --resume refuses a run whose fonts changed since it started (a font's bytes, a font added to its folder), naming the
   font, and resumes once they are back: the scenes after a resume must be the ones the run would have trained on. */
static void test_resume_changed_fonts(void) {
    char args[1024], fonts[256], run[256], cmd[1024], *out, *err;
    int rc;
    snprintf(fonts, sizeof fonts, "%s/fonts", dir);
    snprintf(run, sizeof run, "%s/fonts_run", dir);
    snprintf(cmd, sizeof cmd, "mkdir -p %s && cp /usr/share/fonts/truetype/dejavu/DejaVuSans.ttf %s/", fonts, fonts);
    OCR_CHECK(system(cmd) == 0);
    snprintf(args, sizeof args, "%s %s --fonts %s --steps 4 --eval-every 2 --stop-at 2 --out %s", TRAIN, TINY, fonts, run);
    rc = ocr_test_run(args, &out, &err);
    OCR_CHECK_MSG(rc == 130 && strstr(err, "/fonts/DejaVuSans.ttf"), "'%s' exited %d (expected 130, as interrupted): %s", args, rc, err);
    free(out); free(err);
    /* the same name, another font's bytes */
    snprintf(cmd, sizeof cmd, "cp /usr/share/fonts/truetype/dejavu/DejaVuSans-Bold.ttf %s/DejaVuSans.ttf", fonts);
    OCR_CHECK(system(cmd) == 0);
    snprintf(args, sizeof args, "%s --resume %s --threads 2", TRAIN, run);
    rc = ocr_test_run(args, &out, &err);
    OCR_CHECK_MSG(rc == 1 && strstr(err, "--resume: the font ") && strstr(err, "/fonts/DejaVuSans.ttf has SHA-256") && strstr(err, "synth.fonts"),
                  "a resume with a changed font exited %d (expected 1 naming it): %s", rc, err);
    free(out); free(err);
    /* the font back, and one more in the folder */
    snprintf(cmd, sizeof cmd, "cp /usr/share/fonts/truetype/dejavu/DejaVuSans.ttf %s/ && cp /usr/share/fonts/truetype/dejavu/DejaVuSerif.ttf %s/",
             fonts, fonts);
    OCR_CHECK(system(cmd) == 0);
    rc = ocr_test_run(args, &out, &err);
    OCR_CHECK_MSG(rc == 1 && strstr(err, "/fonts/DejaVuSerif.ttf") && strstr(err, "was not when the run started"),
                  "a resume with an added font exited %d (expected 1 naming it): %s", rc, err);
    free(out); free(err);
    /* as it was: the run resumes and ends */
    snprintf(cmd, sizeof cmd, "rm %s/DejaVuSerif.ttf", fonts);
    OCR_CHECK(system(cmd) == 0);
    rc = ocr_test_run(args, &out, &err);
    OCR_CHECK_MSG(rc == 0 && strstr(out, "\"steps\":4"), "the resume with the run's fonts exited %d: %s", rc, err);
    free(out); free(err);
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
        /* the words are 63 px high; no held-out set without synthetic validation */
        OCR_CHECK_MSG(last && ocr_test_json_number(last, strcspn(last, "\n"), "recall_h_gt32") == 1.0 && strstr(last, "\"recall_h_lt16\":null") &&
                          strstr(last, "\"heldout_hmean\":null") && !strstr(err, "held-out") && !strstr(err, "fonts of"),
                      "--val-scale %g: %s %s", (double)scales[i], last ? last : out, err);
        free(out);
        free(err);
    }
}


/* ---------------------------------------------------------------- crashes, full disks and the run directory */

typedef struct { int exited, code, signal; } child_result;

static uint64_t g_rng;
static uint64_t rnd(void) { g_rng ^= g_rng << 13; g_rng ^= g_rng >> 7; g_rng ^= g_rng << 17; return g_rng; }

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* Runs TRAIN with args (words split at spaces), stdout and stderr to dir/child_{out,err}.txt. kill_point > 0 sets
   OCR_TEST_KILL_IN_SAVE; kill_after >= 0: SIGKILL after that many seconds if still running; fsize > 0: a file-size
   limit (RLIMIT_FSIZE, SIGXFSZ ignored), so a write past it fails with EFBIG as on a full disk. */
static child_result run_child(const char *args, int kill_point, double kill_after, long fsize, char **err) {
    char copy[2048], *argv[64], *tok, path[300];
    child_result r;
    int n = 0, status = 0;
    pid_t pid;
    double t0 = now_s();
    memset(&r, 0, sizeof r);
    argv[n++] = (char *)TRAIN;
    snprintf(copy, sizeof copy, "%s", args);
    for (tok = strtok(copy, " "); tok && n < 63; tok = strtok(NULL, " ")) argv[n++] = tok;
    argv[n] = NULL;
    fflush(stdout);
    pid = fork();
    if (pid == 0) {
        int fo, fe;
        snprintf(path, sizeof path, "%s/child_out.txt", dir);
        fo = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        snprintf(path, sizeof path, "%s/child_err.txt", dir);
        fe = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        if (fo < 0 || fe < 0 || dup2(fo, 1) < 0 || dup2(fe, 2) < 0) _exit(126);
        if (kill_point > 0) {
            char v[16];
            snprintf(v, sizeof v, "%d", kill_point);
            setenv("OCR_TEST_KILL_IN_SAVE", v, 1);
        } else unsetenv("OCR_TEST_KILL_IN_SAVE");
        if (fsize > 0) {
            struct rlimit rl;
            rl.rlim_cur = rl.rlim_max = (rlim_t)fsize;
            signal(SIGXFSZ, SIG_IGN);
            if (setrlimit(RLIMIT_FSIZE, &rl) != 0) _exit(125);
        }
        execv(TRAIN, argv);
        _exit(127);
    }
    OCR_CHECK_MSG(pid > 0, "fork failed");
    if (pid <= 0) return r;
    if (kill_after >= 0) {
        struct timespec ms = {0, 500000};
        while (now_s() - t0 < kill_after && waitpid(pid, &status, WNOHANG) == 0) nanosleep(&ms, NULL);
        if (waitpid(pid, &status, WNOHANG) == 0) kill(pid, SIGKILL);
        else goto done;
    }
    waitpid(pid, &status, 0);
done:
    r.exited = WIFEXITED(status);
    r.code = r.exited ? WEXITSTATUS(status) : -1;
    r.signal = WIFSIGNALED(status) ? WTERMSIG(status) : 0;
    if (err) {
        snprintf(path, sizeof path, "%s/child_err.txt", dir);
        *err = ocr_test_read_text(path);
        if (!*err) *err = strdup("");
    }
    return r;
}

/* The differences between the tensors of two safetensors files (names, dtypes, shapes, bytes); metadata is not
   compared (train.seconds is a wall time). -1 when one does not open. */
static int compare_tensors(const char *pa, const char *pb) {
    ocr_safetensors a, b;
    int i, d = 0;
    if (ocr_safetensors_open(&ctx, &a, pa)) return -1;
    if (ocr_safetensors_open(&ctx, &b, pb)) { ocr_safetensors_close(&a); return -1; }
    if (a.n_entries != b.n_entries) d++;
    for (i = 0; i < a.n_entries; i++) {
        const ocr_safetensors_entry *ea = &a.entries[i];
        int j = ocr_safetensors_find(&b, ea->name);
        const ocr_safetensors_entry *eb = j >= 0 ? &b.entries[j] : NULL;
        if (!eb || ea->dtype != eb->dtype || ea->end - ea->begin != eb->end - eb->begin ||
            memcmp(a.bytes + a.data_start + ea->begin, b.bytes + b.data_start + eb->begin, (size_t)(ea->end - ea->begin)) != 0)
            d++;
    }
    ocr_safetensors_close(&a);
    ocr_safetensors_close(&b);
    return d;
}

/* Blanks the values of the metrics that measure time (throughput, the data loader's wait) in one JSON line. */
static void drop_timing_values(char *line) {
    const char *name;
    int k;
    for (k = 0; (name = ocr_test_timing_metric(k)) != NULL; k++) {
        char key[96], *v;
        snprintf(key, sizeof key, "\"%s\":", name);
        if ((v = strstr(line, key)) != NULL) {
            char *val = v + strlen(key);
            size_t n = strcspn(val, ",}");
            memmove(val, val + n, strlen(val + n) + 1);
        }
    }
}

/* metrics.jsonl of two runs, line by line, without the timing metrics' values: the number of lines that differ. */
static int compare_metrics(const char *run_a, const char *run_b, int *n_lines) {
    char pa[300], pb[300], *ta, *tb, *la, *lb;
    int d = 0;
    snprintf(pa, sizeof pa, "%s/metrics.jsonl", run_a);
    snprintf(pb, sizeof pb, "%s/metrics.jsonl", run_b);
    ta = ocr_test_read_text(pa);
    tb = ocr_test_read_text(pb);
    *n_lines = 0;
    if (!ta || !tb) { free(ta); free(tb); return -1; }
    for (la = ta, lb = tb; *la || *lb; (*n_lines)++) {
        size_t na = strcspn(la, "\n"), nb = strcspn(lb, "\n");
        char ca[4096], cb[4096];
        if (na >= sizeof ca || nb >= sizeof cb) { d++; break; }
        memcpy(ca, la, na); ca[na] = 0;
        memcpy(cb, lb, nb); cb[nb] = 0;
        drop_timing_values(ca);
        drop_timing_values(cb);
        if (strcmp(ca, cb) != 0) d++;
        la += na + (la[na] ? 1 : 0);
        lb += nb + (lb[nb] ? 1 : 0);
    }
    free(ta);
    free(tb);
    return d;
}

/* Summary records (Events with a step) over a run's event files, after TensorBoard's purge: a SessionLog START at step s
   drops the summaries already read with steps >= s. Files in name order, as TensorBoard reads them. */
static int count_summaries(const char *run) {
    char cmd[400], *list, *name;
    int64_t steps[4096];
    int n = 0, i;
    snprintf(cmd, sizeof cmd, "ls %s | grep tfevents | sort > %s/events_list.txt", run, dir);
    if (system(cmd) != 0) return -1;
    snprintf(cmd, sizeof cmd, "%s/events_list.txt", dir);
    list = ocr_test_read_text(cmd);
    for (name = list ? strtok(list, "\n") : NULL; name; name = strtok(NULL, "\n")) {
        char path[600];
        unsigned char *b;
        size_t size, at = 0;
        snprintf(path, sizeof path, "%s/%s", run, name);
        if (ocr_read_file(&ctx, path, (size_t)1 << 30, &b, &size)) { n = -1; break; }
        while (at + 16 <= size) {
            uint64_t len = 0, step = 0;
            size_t p, end;
            int has_step = 0, start = 0, k;
            for (k = 0; k < 8; k++) len |= (uint64_t)b[at + k] << (8 * k);
            end = at + 12 + (size_t)len;
            if (end + 4 > size) break;
            for (p = at + 12; p < end;) { /* Event: 1 fixed64, 2 varint step, else length-delimited (7: session_log) */
                unsigned key = b[p++];
                if (key == 0x09) p += 8;
                else if (key == 0x10) { int sh = 0; step = 0; do { step |= (uint64_t)(b[p] & 0x7f) << sh; sh += 7; } while (b[p++] & 0x80); has_step = 1; }
                else { size_t l = 0; int sh = 0; do { l |= (size_t)(b[p] & 0x7f) << sh; sh += 7; } while (b[p++] & 0x80); if (key == 0x3a) start = 1; p += l; }
            }
            if (start) { for (i = 0, k = 0; i < n; i++) if (steps[i] < (int64_t)step) steps[k++] = steps[i]; n = k; }
            else if (has_step && n < 4096) steps[n++] = (int64_t)step;
            at = end + 4;
        }
        free(b);
    }
    free(list);
    return n;
}

/* The run directory holds a complete state: state.json names two files with its sizes and CRCs. Returns its step,
   -1 when there is no state.json yet. */
static int64_t check_state(const char *run) {
    static const char *const which[2] = {"weights", "optim"};
    char path[400], *text;
    ocr_json_tok toks[64];
    int nt, f, i;
    double v;
    int64_t step = -1;
    snprintf(path, sizeof path, "%s/state.json", run);
    if (access(path, F_OK) != 0) return -1;
    text = ocr_test_read_text(path);
    OCR_CHECK_MSG(text && ocr_json_parse(&ctx, text, strlen(text), toks, 64, &nt) == OCR_OK, "%s does not parse", path);
    if (!text || ocr_test__case_failed) { free(text); return -2; }
    i = ocr_json_find(text, toks, 0, "step");
    if (i >= 0 && ocr_json_number(text, &toks[i], &v)) step = (int64_t)v;
    for (f = 0; f < 2; f++) {
        char name[128], key[64], file[600];
        unsigned char *b;
        size_t size;
        double want_size = -1, want_crc = -1;
        i = ocr_json_find(text, toks, 0, which[f]);
        OCR_CHECK_MSG(i >= 0 && ocr_json_string(text, &toks[i], name, sizeof name), "%s: no %s", path, which[f]);
        if (i < 0) break;
        snprintf(key, sizeof key, "%s_bytes", which[f]);
        if ((i = ocr_json_find(text, toks, 0, key)) >= 0) ocr_json_number(text, &toks[i], &want_size);
        snprintf(key, sizeof key, "%s_crc32c", which[f]);
        if ((i = ocr_json_find(text, toks, 0, key)) >= 0) ocr_json_number(text, &toks[i], &want_crc);
        snprintf(file, sizeof file, "%s/%s", run, name);
        OCR_CHECK_MSG(ocr_read_file(&ctx, file, (size_t)1 << 30, &b, &size) == OCR_OK, "%s names %s, which does not read", path, file);
        if (ocr_test__case_failed) break;
        OCR_CHECK_MSG((double)size == want_size && (double)ocr_crc32c(0, b, size) == want_crc, "%s does not match %s", file, path);
        free(b);
    }
    free(text);
    return step;
}

/* Runs killed with SIGKILL at random instants and inside their checkpoint writes (OCR_TEST_KILL_IN_SAVE), each followed
   by --resume, always find a complete state and end bit for bit where an uninterrupted run ends: the weights, the
   optimizer state and weight average, the best checkpoint, metrics.jsonl (but its speeds) and, after TensorBoard's
   purge, as many summaries. Before the state was committed as one unit, the pair could come from two steps (refused),
   and before the metrics rollback the resumed run died at its first logged step. */
#define KILL_ARGS TINY " --steps 60 --eval-every 20 --save-every 1"
static void test_kill_resume(void) {
    char args[1024], whole[256], chain[256], pa[300], pb[300], *err = NULL;
    const char *env = getenv("OCR_TEST_KILLS");
    int want = env && atoi(env) > 0 ? atoi(env) : 30, kills = 0, in_save = 0, chains = 0, attempts = 0, d, n_lines;
    double t0, t_start = now_s(), duration;
    child_result r;
    snprintf(whole, sizeof whole, "%s/kill_whole", dir);
    snprintf(args, sizeof args, "%s --out %s", KILL_ARGS, whole);
    t0 = now_s();
    r = run_child(args, 0, -1, 0, &err);
    duration = now_s() - t0;
    OCR_CHECK_MSG(r.exited && r.code == 0, "'%s' ended with exit %d, signal %d: %s", args, r.code, r.signal, err);
    free(err);
    if (ocr_test__case_failed) return;
    while (kills < want || chains == 0 || attempts > 0) {
        int64_t before, after;
        int point = 0;
        double delay = -1;
        if (attempts == 0) snprintf(chain, sizeof chain, "%s/kill_chain_%d", dir, chains);
        if (++attempts > 20 * want + 100) { OCR_CHECK_MSG(0, "%d processes without finishing", attempts); return; }
        before = check_state(chain);
        if (before < 0) snprintf(args, sizeof args, "%s --out %s --overwrite", KILL_ARGS, chain); /* nothing to resume yet */
        else snprintf(args, sizeof args, "--resume %s --threads 2 --log-every 1 --workers %d", chain, 1 + (int)(rnd() % 2));
        if (kills < want) {
            if (rnd() % 3 == 0) point = 1 + (int)(rnd() % 5);
            else delay = (double)(rnd() % 1000) / 1000.0 * duration / 15;
        }
        r = run_child(args, point, delay, 0, &err);
        after = check_state(chain);
        if (ocr_test__case_failed) { fprintf(stderr, "after '%s' (kill point %d, delay %.3f s): %s\n", args, point, delay, err); free(err); return; }
        if (r.signal == SIGKILL) {
            kills++;
            in_save += point > 0;
            OCR_CHECK_MSG(after >= before, "the state went back from step %lld to %lld", (long long)before, (long long)after);
            OCR_CHECK_MSG(point < 4 || after > before || before == 60, "killed after state.json but the state stayed at %lld", (long long)before);
        } else if (r.exited && r.code == 0) {
            OCR_CHECK_MSG(after == 60, "a process exited 0 with the state at step %lld", (long long)after);
            chains++;
            attempts = 0;
            /* the chain ends where the uninterrupted run does */
            snprintf(pa, sizeof pa, "%s/last.safetensors", whole);
            snprintf(pb, sizeof pb, "%s/last.safetensors", chain);
            OCR_CHECK_MSG((d = compare_tensors(pa, pb)) == 0, "weights: %d differences", d);
            snprintf(pa, sizeof pa, "%s/last.optim.safetensors", whole);
            snprintf(pb, sizeof pb, "%s/last.optim.safetensors", chain);
            OCR_CHECK_MSG((d = compare_tensors(pa, pb)) == 0, "optimizer state and weight average: %d differences", d);
            snprintf(pa, sizeof pa, "%s/best.safetensors", whole);
            snprintf(pb, sizeof pb, "%s/best.safetensors", chain);
            OCR_CHECK_MSG((d = compare_tensors(pa, pb)) == 0, "best checkpoint: %d differences", d);
            d = compare_metrics(whole, chain, &n_lines);
            OCR_CHECK_MSG(d == 0 && n_lines == 60, "metrics.jsonl: %d of %d lines differ", d, n_lines);
            OCR_CHECK_MSG(count_summaries(whole) == count_summaries(chain) && count_summaries(whole) > 60 * 7,
                          "TensorBoard summaries after the purge: %d uninterrupted, %d killed and resumed", count_summaries(whole),
                          count_summaries(chain));
        } else {
            OCR_CHECK_MSG(0, "'%s' (kill point %d) ended with exit %d, signal %d: %s", args, point, r.code, r.signal, err);
        }
        free(err);
        if (ocr_test__case_failed) return;
    }
    printf("     %d kills (%d inside a state commit) over %d chain(s), each resumed to the uninterrupted run's end (%.0f s)\n", kills, in_save,
           chains, now_s() - t_start);
    /* the comparisons can fail: another run's state differs */
    snprintf(pa, sizeof pa, "%s/last.safetensors", whole);
    snprintf(pb, sizeof pb, "%s/short/last.safetensors", dir);
    OCR_CHECK_MSG(compare_tensors(pa, pb) != 0, "the comparison finds no difference between two different runs");
}

/* A disk that fills during a checkpoint write (a file-size limit: the write fails with EFBIG) leaves the previous
   state, which resumes to the uninterrupted run's end; before, the resume died on the metrics the failed run logged. */
static void test_full_disk(void) {
    char args[1024], run_a[256], run_c[256], path[300], *err, *before, *after;
    double la[11], lc[11];
    int n_val, s;
    long fsize;
    struct stat sb;
    child_result r;
    snprintf(run_a, sizeof run_a, "%s/whole", dir); /* test_resume_exact's uninterrupted run */
    snprintf(run_c, sizeof run_c, "%s/full_disk", dir);
    snprintf(args, sizeof args, "%s --steps 10 --eval-every 0 --save-every 3 --stop-at 4 --out %s", TINY, run_c);
    r = run_child(args, 0, -1, 0, &err);
    OCR_CHECK_MSG(r.exited && r.code == 130, "'%s' ended with exit %d, signal %d: %s", args, r.code, r.signal, err);
    free(err);
    snprintf(path, sizeof path, "%s/last.optim.safetensors", run_c);
    OCR_CHECK_MSG(stat(path, &sb) == 0, "no %s", path);
    if (ocr_test__case_failed) return;
    fsize = (long)sb.st_size / 2; /* the optimizer file, the largest, cannot be written again */
    snprintf(path, sizeof path, "%s/state.json", run_c);
    before = ocr_test_read_text(path);
    snprintf(args, sizeof args, "--resume %s --threads 2 --log-every 1 --workers 1", run_c);
    r = run_child(args, 0, -1, fsize, &err);
    OCR_CHECK_MSG(r.exited && r.code == 1 && strstr(err, "File too large"), "the resume under a %ld-byte file limit ended with exit %d, "
                  "signal %d: %s", fsize, r.code, r.signal, err);
    free(err);
    after = ocr_test_read_text(path);
    OCR_CHECK_MSG(before && after && strcmp(before, after) == 0, "state.json changed: %s -> %s", before, after);
    OCR_CHECK_MSG(check_state(run_c) == 4, "the state at step 4 did not survive");
    free(before);
    free(after);
    r = run_child(args, 0, -1, 0, &err);
    OCR_CHECK_MSG(r.exited && r.code == 0, "the resume after the full disk ended with exit %d, signal %d: %s", r.code, r.signal, err);
    free(err);
    read_losses(run_a, la, 10, &n_val);
    read_losses(run_c, lc, 10, &n_val);
    for (s = 1; s <= 10; s++)
        OCR_CHECK_MSG(la[s] == lc[s], "step %d: loss %.9g uninterrupted, %.9g after the full disk", s, la[s], lc[s]);
    {
        char pa[300], pc[300];
        int d;
        snprintf(pa, sizeof pa, "%s/last.optim.safetensors", run_a);
        snprintf(pc, sizeof pc, "%s/last.optim.safetensors", run_c);
        OCR_CHECK_MSG((d = compare_tensors(pa, pc)) == 0, "optimizer state: %d differences after the full disk", d);
    }
}

/* Rewrites path's metadata without key (the tensors stay). */
static void drop_meta_key(const char *path, const char *key) {
    ocr_safetensors st;
    ocr_tensor t[256];
    const ocr_tensor *ptrs[256];
    const char *keys[128], *vals[128];
    int i, n = 0;
    OCR_CHECK_OK(&ctx, ocr_safetensors_open(&ctx, &st, path));
    if (ocr_test__case_failed) return;
    OCR_CHECK(st.n_entries <= 256 && st.n_meta <= 128);
    for (i = 0; i < st.n_entries && i < 256; i++) { OCR_CHECK_OK(&ctx, ocr_safetensors_read(&ctx, &st, st.entries[i].name, &t[i])); ptrs[i] = &t[i]; }
    for (i = 0; i < st.n_meta && i < 128; i++)
        if (strcmp(st.meta_keys[i], key) != 0) { keys[n] = st.meta_keys[i]; vals[n] = st.meta_values[i]; n++; }
    OCR_CHECK_MSG(n == st.n_meta - 1, "%s has no %s to drop", path, key);
    if (!ocr_test__case_failed) OCR_CHECK_OK(&ctx, ocr_safetensors_save(&ctx, path, ptrs, st.n_entries, keys, vals, n));
    for (i = 0; i < st.n_entries && i < 256; i++) ocr_tensor_free(&t[i]);
    ocr_safetensors_close(&st);
}

/* --resume of a checkpoint without a key it needs is an error naming the file and the key (it was a NULL read), in a
   run directory from before state.json and in one with it (state.json re-made to match the edited file). */
static void test_resume_missing_keys(void) {
    static const char *const keys[] = {"train.step", "train.best_hmean", "train.best_step", "train.seconds", "train.optim_step", "train.lr"};
    char args[1024], run[256], path[300], want[300], *err;
    int k;
    child_result r;
    for (k = 0; k < (int)(sizeof keys / sizeof keys[0]); k++) {
        int old = k % 2 == 0;
        snprintf(run, sizeof run, "%s/missing_%d", dir, k);
        snprintf(args, sizeof args, "%s --steps 6 --eval-every 0 --save-every 3 --stop-at 3 --out %s", TINY, run);
        r = run_child(args, 0, -1, 0, &err);
        OCR_CHECK_MSG(r.exited && r.code == 130, "'%s' ended with exit %d: %s", args, r.code, err);
        free(err);
        if (old) {
            to_old_layout(run);
            snprintf(path, sizeof path, "%s/last.safetensors", run);
            drop_meta_key(path, keys[k]);
        } else { /* the state file named by state.json, and state.json made to match it */
            char *text, *at;
            unsigned char *b;
            size_t size;
            FILE *f;
            snprintf(path, sizeof path, "%s/state.000001.safetensors", run);
            drop_meta_key(path, keys[k]);
            if (ocr_read_file(&ctx, path, (size_t)1 << 30, &b, &size)) { OCR_CHECK(0); return; }
            snprintf(want, sizeof want, "%s/state.json", run);
            text = ocr_test_read_text(want);
            at = text ? strstr(text, "\"optim\"") : NULL;
            OCR_CHECK(at != NULL);
            if (!at) { free(b); free(text); return; }
            f = fopen(want, "w");
            OCR_CHECK(f != NULL);
            if (f) {
                fprintf(f, "{\"format\":1,\"generation\":1,\"step\":3,\"weights\":\"state.000001.safetensors\",\"weights_bytes\":%llu,"
                        "\"weights_crc32c\":%lu,%s", (unsigned long long)size, (unsigned long)ocr_crc32c(0, b, size), at);
                fclose(f);
            }
            free(b);
            free(text);
        }
        snprintf(args, sizeof args, "--resume %s --threads 2", run);
        r = run_child(args, 0, -1, 0, &err);
        snprintf(want, sizeof want, "%s lacks '%s'", old ? "last.safetensors" : "state.000001.safetensors", keys[k]);
        OCR_CHECK_MSG(r.exited && r.code == 1 && strstr(err, want), "--resume without %s: exit %d, signal %d (expected 1 and '%s'): %s",
                      keys[k], r.code, r.signal, want, err);
        free(err);
    }
    /* a state file that no longer matches state.json is refused, naming both */
    snprintf(path, sizeof path, "%s/missing_1/state.000001.safetensors", dir);
    drop_meta_key(path, "train.lr");
    snprintf(args, sizeof args, "--resume %s/missing_1 --threads 2", dir);
    r = run_child(args, 0, -1, 0, &err);
    OCR_CHECK_MSG(r.exited && r.code == 1 && strstr(err, "state.000001.safetensors has") && strstr(err, "state.json says"),
                  "a state file changed after state.json: exit %d: %s", r.code, err);
    free(err);
}

/* One trainer per run directory (a second, or a --resume, is refused naming the first's pid; the lock of a killed one is
   taken over); a directory holding a run is not touched by a new run without --resume (exit 2), and --overwrite starts
   over in it. */
static void test_run_dir_guard(void) {
    char args[1024], run[256], path[300], want[64], *err, *before, *after;
    pid_t pid;
    int status, i;
    child_result r;
    snprintf(run, sizeof run, "%s/guarded", dir);
    /* the first trainer, long enough to be caught running */
    pid = fork();
    if (pid == 0) {
        char out[300];
        snprintf(out, sizeof out, "%s/guard_first.txt", dir);
        if (!freopen(out, "w", stdout) || !freopen(out, "w", stderr)) _exit(126);
        execl(TRAIN, TRAIN, "--size", "64", "--batch", "2", "--width", "0.05", "--val-count", "4", "--val-size", "64", "--threads", "1",
              "--photos", "none", "--steps", "100000", "--eval-every", "0", "--save-every", "1", "--out", run, (char *)NULL);
        _exit(127);
    }
    snprintf(path, sizeof path, "%s/state.json", run);
    for (i = 0; i < 3000 && access(path, F_OK) != 0; i++) { struct timespec ms = {0, 10000000}; nanosleep(&ms, NULL); }
    OCR_CHECK_MSG(access(path, F_OK) == 0, "the first trainer wrote no state in 30 s");
    snprintf(want, sizeof want, "process %ld on", (long)pid);
    snprintf(args, sizeof args, "%s --steps 5 --out %s", TINY, run);
    r = run_child(args, 0, -1, 0, &err);
    OCR_CHECK_MSG(r.exited && r.code == 1 && strstr(err, "in use") && strstr(err, want), "a second trainer: exit %d (expected 1 naming %s): %s",
                  r.code, want, err);
    free(err);
    snprintf(args, sizeof args, "--resume %s --threads 1", run);
    r = run_child(args, 0, -1, 0, &err);
    OCR_CHECK_MSG(r.exited && r.code == 1 && strstr(err, "in use") && strstr(err, want), "a --resume of a running run: exit %d: %s", r.code, err);
    free(err);
    kill(pid, SIGKILL);
    waitpid(pid, &status, 0);
    /* the killed trainer's lock is no obstacle: the resume trains (until this test kills it too) */
    pid = fork();
    if (pid == 0) {
        snprintf(path, sizeof path, "%s/guard_second.txt", dir);
        if (!freopen(path, "w", stdout) || !freopen(path, "w", stderr)) _exit(126);
        execl(TRAIN, TRAIN, "--resume", run, "--threads", "1", (char *)NULL);
        _exit(127);
    }
    snprintf(path, sizeof path, "%s/guard_second.txt", dir);
    for (i = 0, err = NULL; i < 3000; i++) {
        struct timespec ms = {0, 10000000};
        free(err);
        err = ocr_test_read_text(path);
        if ((err && strstr(err, "resuming")) || waitpid(pid, &status, WNOHANG) != 0) break;
        nanosleep(&ms, NULL);
    }
    kill(pid, SIGKILL);
    waitpid(pid, &status, 0);
    OCR_CHECK_MSG(err && strstr(err, "resuming") && WIFSIGNALED(status), "a --resume after the holder was killed: %s", err ? err : "");
    free(err);

    /* a finished run is not touched without --resume */
    snprintf(run, sizeof run, "%s/finished", dir);
    snprintf(args, sizeof args, "%s --steps 2 --eval-every 2 --out %s", TINY, run);
    r = run_child(args, 0, -1, 0, &err);
    OCR_CHECK_MSG(r.exited && r.code == 0, "'%s': exit %d: %s", args, r.code, err);
    free(err);
    snprintf(path, sizeof path, "%s/last.safetensors", run);
    before = ocr_test_read_text(path);
    snprintf(path, sizeof path, "%s/metrics.jsonl", run);
    {
        char *m_before = ocr_test_read_text(path);
        snprintf(args, sizeof args, "%s --steps 3 --out %s", TINY, run);
        r = run_child(args, 0, -1, 0, &err);
        OCR_CHECK_MSG(r.exited && r.code == 2 && strstr(err, "already holds a run") && strstr(err, "--resume") && strstr(err, "--overwrite"),
                      "a new run in a finished run's directory: exit %d (expected 2): %s", r.code, err);
        free(err);
        after = ocr_test_read_text(path);
        OCR_CHECK_MSG(m_before && after && strcmp(m_before, after) == 0, "its metrics.jsonl changed");
        free(after);
        free(m_before);
    }
    snprintf(path, sizeof path, "%s/last.safetensors", run);
    after = ocr_test_read_text(path);
    OCR_CHECK_MSG(before && after && memcmp(before, after, 1000) == 0, "its last.safetensors changed");
    free(before);
    free(after);
    /* --overwrite starts over there */
    snprintf(args, sizeof args, "%s --steps 3 --eval-every 0 --out %s --overwrite", TINY, run);
    r = run_child(args, 0, -1, 0, &err);
    OCR_CHECK_MSG(r.exited && r.code == 0, "--overwrite: exit %d: %s", r.code, err);
    free(err);
    {
        double losses[4];
        int n_val;
        OCR_CHECK_MSG(read_losses(run, losses, 3, &n_val) == 3 && check_state(run) == 3, "--overwrite did not leave a fresh 3-step run");
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
    expect_exit("--heldout-count -2", 2, "--heldout-count >= -1");
    expect_exit("--optimizer adam", 2, "--optimizer must be sgd or adamw");
    expect_exit("--device cuda", 2, "no CUDA");
    snprintf(args, sizeof args, "--resume %s --overwrite", dir);
    expect_exit(args, 2, "--overwrite starts a new run");
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
    {
        const char *seed = getenv("OCR_TEST_SEED");
        g_rng = seed && *seed ? strtoull(seed, NULL, 10) : (uint64_t)time(NULL) ^ ((uint64_t)getpid() << 20);
        if (!g_rng) g_rng = 1;
        printf("test_train: OCR_TEST_SEED=%llu\n", (unsigned long long)g_rng);
    }
    if (access(TRAIN, X_OK) != 0) {
        fprintf(stderr, "test_train: %s must be built first (./build.sh builds it)\n", TRAIN);
        printf("FAIL program_built\nRESULT passed=0 failed=1\n");
        return 1;
    }
    if (ocr_ctx_init(&ctx, 1, 7) != OCR_OK) return 1;
    ocr_test_cli_ctx = &ctx;
    snprintf(dir, sizeof dir, "/tmp/ocr_test_train.XXXXXX");
    if (!mkdtemp(dir)) { fprintf(stderr, "test_train: mkdtemp failed\n"); return 1; }
    OCR_TEST_RUN_PROGRAMS(test_usage_errors);
    OCR_TEST_RUN_PROGRAMS(test_help_lists_every_setting);
    OCR_TEST_RUN_PROGRAMS(test_short_run);
    OCR_TEST_RUN_PROGRAMS(test_resume_exact);
    OCR_TEST_RUN_PROGRAMS(test_resume_exact_fp16);
    OCR_TEST_RUN_PROGRAMS(test_resume_restores_settings);
    OCR_TEST_RUN_PROGRAMS(test_amp_default);
    OCR_TEST_RUN_PROGRAMS(test_resume_changed_fonts);
    OCR_TEST_RUN_PROGRAMS(test_val_scale_mapping);
    OCR_TEST_RUN_PROGRAMS(test_full_disk);
    OCR_TEST_RUN_PROGRAMS(test_resume_missing_keys);
    OCR_TEST_RUN_PROGRAMS(test_run_dir_guard);
    OCR_TEST_RUN_PROGRAMS(test_kill_resume);
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    if (system(cmd) != 0) fprintf(stderr, "test_train: could not remove %s\n", dir);
    ocr_ctx_free(&ctx);
    return ocr_test_finish();
}
