/* repro_log_step - a metrics logger that receives steps out of order.

   The trainer logs train/loss at every step; a validation pass inside the epoch (here after step 7) is logged at
   the step of the epoch's end (epoch * steps_per_epoch = 10), a common slip when validation code counts epochs. A
   naive logger appends records as they come: the file goes 7, 10, 8, 9, 10, ... and TensorBoard draws the curve
   back and forth (or drops the points, depending on the version). ocr-c's metrics writer (ocr_tensor.h:
   ocr_metrics_*) merges the scalars of one step into one record, keeps steps strictly increasing and refuses a
   record behind the last step with OCR_ERANGE and a message naming it; the trainer's fix is to log validation at
   the training step it ran, which is then merged into that step's record.

       repro_log_step                          12 steps, 5 per epoch, validation after step 7
       repro_log_step --steps 30 --steps-per-epoch 8 --val-at 13 --dir /tmp/logs

   Exit status: 0 when ocr-c's files keep steps strictly increasing and every refused record was named, 1
   otherwise, 2 bad flags. */
#define OCR_IMPLEMENTATION
#include "ocr_tensor.h"
#include "ocr_geom.h"   /* ocr_point, which ocr_example.h's drawing helpers take */
#include "ocr_example.h"
#include <sys/stat.h>

typedef struct { int64_t step; const char *name; double value; } record;

/* The records in the order the trainer emits them; val_step is the step the validation is logged at. */
static int make_stream(record *r, int steps, int val_at, int64_t val_step) {
    int n = 0, s;
    for (s = 1; s <= steps; s++) {
        r[n].step = s; r[n].name = "train/loss"; r[n].value = 1.0 / s; n++;
        if (s == val_at) { r[n].step = val_step; r[n].name = "val/hmean"; r[n].value = 0.5; n++; }
    }
    return n;
}

/* Steps of a jsonl file, in order; returns how many lines, -1 when unreadable. */
static int read_steps(ocr_ctx *ctx, const char *path, int64_t *steps, int cap) {
    unsigned char *text;
    size_t size, i, line = 0;
    int n = 0;
    if (ocr_read_file(ctx, path, (size_t)1 << 24, &text, &size) != OCR_OK) return -1;
    for (i = 0; i <= size && n < cap; i++) {
        if (i < size && text[i] != '\n') continue;
        if (i > line) {
            ocr_json_tok toks[64];
            int nt, k;
            double v;
            if (ocr_json_parse(ctx, (const char *)text + line, i - line, toks, 64, &nt) == OCR_OK &&
                (k = ocr_json_find((const char *)text + line, toks, 0, "step")) >= 0 && ocr_json_number((const char *)text + line, &toks[k], &v))
                steps[n++] = (int64_t)v;
        }
        line = i + 1;
    }
    OCR_FREE(text);
    return n;
}

/* Prints the steps of a file and returns how many times they went back or repeated. */
static int show_steps(const char *who, const int64_t *steps, int n) {
    int i, back = 0;
    printf("  %s steps in the file:", who);
    for (i = 0; i < n; i++) {
        int wrong = i && steps[i] <= steps[i - 1];
        back += wrong;
        printf(" %s%lld", wrong ? "!" : "", (long long)steps[i]);
    }
    printf("\n");
    return back;
}

/* Feeds the stream to ocr_metrics in dir; returns the number of refused records (-1 on another error). */
static int log_with_ocr(ocr_ctx *ctx, const char *dir, const record *r, int n) {
    ocr_metrics m;
    int i, refused = 0;
    if (ocr_metrics_open(ctx, &m, dir) != OCR_OK) return -1;
    for (i = 0; i < n; i++) {
        int rc = ocr_metrics_scalar(ctx, &m, r[i].step, r[i].name, r[i].value);
        if (rc == OCR_ERANGE) {
            printf("    %s\n", ocr_ctx_last_error(ctx));
            refused++;
        } else if (rc) {
            ocr_metrics_close(ctx, &m);
            return -1;
        }
    }
    if (m.refused != refused) refused = -1; /* the writer's own count must agree */
    return ocr_metrics_close(ctx, &m) == OCR_OK ? refused : -1;
}

int main(int argc, char **argv) {
    static const char synopsis[] = "[flags]\n\nHost-only by nature (no --device): the metrics file is written on the host, "
                                   "whatever device\ncomputed the values.";
    int steps = 12, per_epoch = 5, val_at = 7, n, i, bad = 0, n_steps, back, refused;
    const char *dir = NULL;
    char tmp[64] = "/tmp/repro_log_step.XXXXXX", path[4300];
    ocr_ex_flag flags[] = {
        {"--steps", OCR_EX_INT, &steps, "training steps (2..1000)"},
        {"--steps-per-epoch", OCR_EX_INT, &per_epoch, "steps per epoch"},
        {"--val-at", OCR_EX_INT, &val_at, "the step after which validation runs, inside an epoch"},
        {"--dir", OCR_EX_STRING, &dir, "work directory, kept (default: a temporary one, removed)"},
    };
    record stream[1001];
    int64_t file_steps[1001], val_step;
    ocr_ctx ctx;
    FILE *f;
    if (ocr_ex_parse(argc, argv, synopsis, flags, (int)(sizeof flags / sizeof flags[0])) != 0) {
        fprintf(stderr, "%s: takes no positional arguments\n", argv[0]);
        return 2;
    }
    if (steps < 2 || steps > 1000 || per_epoch < 2 || val_at < 1 || val_at >= steps || val_at % per_epoch == 0) {
        fprintf(stderr, "%s: need 2 <= --steps <= 1000, --steps-per-epoch >= 2, and --val-at inside an epoch before the last step\n", argv[0]);
        return 2;
    }
    val_step = (int64_t)(val_at / per_epoch + 1) * per_epoch; /* the slip: the epoch's last step */
    if (val_step > steps) val_step = steps;
    if (!dir && !(dir = mkdtemp(tmp))) { fprintf(stderr, "%s: mkdtemp: %s\n", argv[0], strerror(errno)); return 1; }
    if ((mkdir(dir, 0755) != 0 && errno != EEXIST) || ocr_ctx_init(&ctx, 1, 0) != OCR_OK) {
        fprintf(stderr, "%s: cannot use '%s'\n", argv[0], dir);
        return 1;
    }
    n = make_stream(stream, steps, val_at, val_step);
    printf("%d training steps, %d per epoch; validation runs after step %d and is logged at step %lld (the epoch's end)\n\n", steps,
           per_epoch, val_at, (long long)val_step);

    /* naive: append every record as it comes */
    snprintf(path, sizeof path, "%s/naive.jsonl", dir);
    if (!(f = fopen(path, "w"))) { fprintf(stderr, "%s: cannot write '%s'\n", argv[0], path); return 1; }
    for (i = 0; i < n; i++) fprintf(f, "{\"step\": %lld, \"%s\": %.9g}\n", (long long)stream[i].step, stream[i].name, stream[i].value);
    fclose(f);
    printf("naive logger (appends each record):\n");
    n_steps = read_steps(&ctx, path, file_steps, 1001);
    back = show_steps("naive", file_steps, n_steps);
    printf("  -> %d record(s) behind the one before (marked !): the curve runs backwards\n\n", back);

    /* ocr-c: the same stream */
    printf("ocr-c's metrics writer, the same stream:\n");
    snprintf(path, sizeof path, "%s/run", dir);
    refused = log_with_ocr(&ctx, path, stream, n);
    snprintf(path, sizeof path, "%s/run/metrics.jsonl", dir);
    n_steps = read_steps(&ctx, path, file_steps, 1001);
    back = show_steps("ocr-c", file_steps, n_steps);
    printf("  -> steps strictly increasing: %s; %d records refused, each named above\n", back || n_steps < 1 ? "NO" : "yes", refused);
    if (refused < 1 || back || n_steps < 1) bad = 1;

    /* the fix in the trainer: validation logged at the step it ran */
    n = make_stream(stream, steps, val_at, val_at);
    printf("\nthe trainer's fix, validation logged at step %d where it ran:\n", val_at);
    snprintf(path, sizeof path, "%s/run_fixed", dir);
    refused = log_with_ocr(&ctx, path, stream, n);
    snprintf(path, sizeof path, "%s/run_fixed/metrics.jsonl", dir);
    n_steps = read_steps(&ctx, path, file_steps, 1001);
    back = show_steps("ocr-c", file_steps, n_steps);
    printf("  -> %d records refused; val/hmean merged into step %d's record\n", refused, val_at);
    if (refused != 0 || back || n_steps != steps) bad = 1;

    ocr_ctx_free(&ctx);
    if (dir == tmp) {
        snprintf(path, sizeof path, "rm -rf '%s'", dir);
        if (system(path) != 0) fprintf(stderr, "%s: could not remove '%s'\n", argv[0], dir);
    }
    printf("\n%s\n", bad ? "FAIL: ocr-c's metrics did not keep steps increasing or did not name what it refused"
                         : "OK: ocr-c's metrics kept steps strictly increasing and named every refused record");
    return bad;
}
