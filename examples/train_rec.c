/* train_rec - trains a CRNN text recognizer (ocr_rec.h) on the CPU, or on a GPU with --device cuda in the CUDA build
   (build/cuda/train_rec): model, CTC loss and optimizer then run on the device; crops are uploaded, readings decoded
   on the host.

   With no arguments it trains on word crops cut from synthetic scenes rendered on the fly (ocr_synth.h's declared
   training fonts and photographs; each word's quad rectified to height 32) and validates on words of other scenes
   and on words rendered only with the declared held-out fonts and photographs, reporting word accuracy, case-
   insensitive accuracy, CER, 1-NED and the share of empty predictions (the decode watch warns when that share stays
   high: a model collapsed to the CTC blank). Real data: --data lmdb:PATH (clovaai / PARSeq layout, plain UTF-8
   labels), folder:GT_FILE[,IMAGE_ROOT] (lines path<TAB>text) or icdar:DIR (the care words of detection ground truth).
   Every label is checked against the charset before training: one that does not encode is an error naming the sample
   and the character, or with --skip-unknown the word is left out and counted.

   The run directory (as train_dbnet's):
       metrics.jsonl, events.out.tfevents.*   the scalars, steps strictly increasing
       state.json                             names the committed state: state.<G>.safetensors (weights, settings and
                                              position) + state.<G>.optim.safetensors, with their sizes and CRC-32C
       last.safetensors (+ .optim)            the same pair under stable names; the weights load in PyTorch
                                              (tools/crnn_ref.py) and in examples/recognize and eval_rec
       best.safetensors                       the weights with the best validation word accuracy
       .lock                                  held by the process training in the directory
   --resume DIR continues exactly where the committed state left off (same batches, same metrics). The last line on
   stdout is one JSON object with the final figures.

   Under mpirun (built with MPI) each rank trains on its shard of every step's scenes (or of the dataset), the
   gradients, each weighted by its crops' share of all ranks' crops, are summed with one all-reduce, and rank 0 alone
   logs, validates and writes the run; a resume needs the same world size (docs/DISTRIBUTED.md).

   ./build.sh && ./examples/train_rec            (see --help for every flag) */
#define OCR_IMPLEMENTATION
#include "ocr_tensor.h"
#include "ocr_nn.h"
#include "ocr_loss.h"
#include "ocr_data.h"
#include "ocr_synth.h"
#include "ocr_rec.h"
#include "ocr_example.h"
#include "ocr_mpi.h"
#include <signal.h>
#include <time.h>
#include <sys/stat.h>
#include <sys/file.h>
#include <dirent.h>
#include <fcntl.h>

typedef struct {
    const char *data, *val, *charset, *channels, *resume, *out, *fonts, *photos, *words, *device;
    int steps, batch, words_per_scene, scene_size, max_width, min_text_px, max_text_px, hidden, layers, threads, workers, seed;
    int eval_every, log_every, save_every, val_count, heldout_count, warmup, stop_at, skip_unknown, check_numerics, overwrite;
    float lr, weight_decay, clip, synth_lines, words_prob;
} train_args;

#define FIELD(f, ctype) offsetof(train_args, f) + 0 * sizeof(&((train_args *)0)->f == (ctype *)0)
#define INT(f) OCR_EX_INT, FIELD(f, int)
#define FLOAT(f) OCR_EX_FLOAT, FIELD(f, float)
#define STRING(f) OCR_EX_STRING, FIELD(f, const char *)
#define BOOL(f) OCR_EX_BOOL, FIELD(f, int)
#define STORED OCR_EX_STORED, NULL
#define RUNTIME OCR_EX_RUNTIME, NULL
static const ocr_ex_setting kSettings[] = {
    {"--data", STRING(data), "synth", STORED,
     "training data: synth (word crops of scenes rendered on the fly), lmdb:PATH, folder:GT_FILE[,IMAGE_ROOT] or icdar:DIR"},
    {"--val", STRING(val), "synth", STORED, "validation data, same forms; synth: words of other scenes (another seed)"},
    {"--charset", STRING(charset), "european", STORED, "latin, latin+space, european (latin, Latin-1, Greek, Cyrillic: what the synthetic scenes draw) or a key file (one character per line, UTF-8)"},
    {"--skip-unknown", BOOL(skip_unknown), NULL, STORED,
     "leave out (and count) words with a character outside the charset instead of refusing the data; synthetic words "
     "outside it (accents, Greek, Cyrillic) are always left out"},
    {"--fonts", STRING(fonts), NULL, STORED, "fonts of the synthetic words: DIR|FILE,... (empty: the declared training set)"},
    {"--photos", STRING(photos), NULL, STORED, "photographs under synthetic words: DIR|FILE,..., or none (empty: the declared set)"},
    /* absent from runs that predate them: no list */
    {"--words", STRING(words), NULL, OCR_EX_STORED, "",
     "synthetic words: also real words from this UTF-8 list, one word per line (e.g. /usr/share/dict/american-english, "
     "package wamerican; empty: only the renderer's own)"},
    {"--words-prob", FLOAT(words_prob), "0.5", OCR_EX_STORED, "0.5", "with --words: share of the synthetic words drawn from the list"},
    {"--steps", INT(steps), "6000", STORED, "optimizer steps"},
    {"--batch", INT(batch), "32", STORED, "word crops per step (synth: about; scenes give up to --words-per-scene each)"},
    {"--words-per-scene", INT(words_per_scene), "16", STORED, "synth: word crops taken from each rendered scene"},
    {"--scene-size", INT(scene_size), "384", STORED, "synth: side of the rendered scenes in pixels"},
    {"--synth-lines", FLOAT(synth_lines), "300", STORED, "synth: text lines tried per megapixel"},
    {"--min-text-px", INT(min_text_px), "14", STORED, "synth: smallest font height in pixels"},
    {"--max-text-px", INT(max_text_px), "48", STORED, "synth: largest font height in pixels"},
    {"--max-width", INT(max_width), "256", STORED, "crop width cap (a multiple of 4; wider words are squeezed)"},
    {"--channels", STRING(channels), "16,32,64,64,128,128", STORED, "widths of the six conv blocks"},
    {"--hidden", INT(hidden), "96", STORED, "LSTM hidden size per direction"},
    {"--layers", INT(layers), "1", STORED,
     "bidirectional LSTM layers (one leaves CTC's all-blank phase about twice as soon as two: docs/RECOGNITION.md)"},
    {"--lr", FLOAT(lr), "2e-3", STORED, "peak learning rate (AdamW; linear warm-up, then poly decay, power 0.9)"},
    {"--warmup", INT(warmup), "100", STORED, "warm-up steps"},
    {"--weight-decay", FLOAT(weight_decay), "1e-4", STORED, "weight decay (not on BN parameters and biases)"},
    {"--clip", FLOAT(clip), "5", STORED, "global gradient-norm clip (0: none)"},
    {"--device", STRING(device), "cpu", RUNTIME, "cpu or cuda (the CUDA build, build/cuda/train_rec)"},
    {"--threads", INT(threads), "0", RUNTIME, "compute threads (0: all cores)"},
    {"--workers", INT(workers), "1", RUNTIME, "data loader threads"},
    {"--seed", INT(seed), "1", STORED, "seed of initialisation, data order and augmentation"},
    {"--resume", STRING(resume), NULL, RUNTIME, "continue the run in DIR from its committed state"},
    {"--overwrite", BOOL(overwrite), NULL, RUNTIME, "start a new run in an --out that holds one, deleting it (else refused)"},
    {"--out", STRING(out), NULL, RUNTIME, "run directory (default runs/rec-<time>)"},
    {"--eval-every", INT(eval_every), "1000", STORED, "validate every N steps (and at the end)"},
    {"--val-count", INT(val_count), "500", STORED, "validation words"},
    {"--heldout-count", INT(heldout_count), "-1", STORED,
     "with --val synth: words of a second set rendered only with the declared held-out fonts and photographs; -1: as "
     "many as --val-count, 0: none"},
    {"--log-every", INT(log_every), "20", RUNTIME, "log every N steps"},
    {"--save-every", INT(save_every), "200", RUNTIME, "commit the run's state every N steps"},
    {"--check-numerics", BOOL(check_numerics), NULL, RUNTIME, "check every layer's outputs and gradients for NaN/Inf"},
    {"--stop-at", INT(stop_at), "0", RUNTIME, "stop after this step as if interrupted (saves; for tests)"},
};
#undef FIELD
#undef INT
#undef FLOAT
#undef STRING
#undef BOOL
#undef STORED
#undef RUNTIME
enum { N_SETTINGS = sizeof kSettings / sizeof kSettings[0] };

static int is_synth(const char *spec) { return strcmp(spec, "synth") == 0; }
static int spec_ok(const char *spec) {
    return is_synth(spec) || ocr_ex_dataset_spec_ok(spec) || (strncmp(spec, "folder:", 7) == 0 && spec[7] && spec[7] != ',');
}

/* the six block widths of --channels, or 0 */
static int parse_channels(const char *s, int out[OCR_REC_BLOCKS]) {
    int b;
    for (b = 0; b < OCR_REC_BLOCKS; b++) {
        char *end;
        long v = strtol(s, &end, 10);
        if (end == s || v < 1 || v > 4096 || (b < OCR_REC_BLOCKS - 1 ? *end != ',' : *end != 0)) return 0;
        out[b] = (int)v;
        s = end + 1;
    }
    return 1;
}

static const char *settings_problem(const train_args *a) {
    int ch[OCR_REC_BLOCKS];
    if (a->steps < 1 || a->batch < 1 || a->words_per_scene < 1 || a->scene_size < 64 || a->max_width < 16 || a->max_width % 4 ||
        a->min_text_px < 6 || a->max_text_px < a->min_text_px || a->max_text_px > 400 || a->hidden < 1 || a->layers < 1 ||
        a->layers > OCR_REC_MAX_LAYERS || a->workers < 1 || a->log_every < 1 || a->save_every < 1 || a->eval_every < 0 || a->val_count < 1 ||
        a->heldout_count < -1 || a->warmup < 0 || !(a->lr > 0 && a->lr <= 1) || !(a->weight_decay >= 0 && a->weight_decay < 1) ||
        !(a->clip >= 0) || !(a->synth_lines > 0 && a->synth_lines <= 10000))
        return "--steps, --batch, --words-per-scene, --workers, --log-every, --save-every, --val-count must be >= 1, --scene-size >= 64, "
               "--max-width a multiple of 4 >= 16, 6 <= --min-text-px <= --max-text-px <= 400, --layers 1..4, --lr in (0, 1], "
               "--weight-decay in [0, 1), --clip >= 0, --synth-lines in (0, 10000], --warmup >= 0, --heldout-count >= -1";
    if (!(a->words_prob >= 0 && a->words_prob <= 1)) return "--words-prob must be in [0, 1]";
    if (!parse_channels(a->channels, ch)) return "--channels must be six positive integers separated by commas";
    if (!spec_ok(a->data) || !spec_ok(a->val)) return "--data and --val must be synth, lmdb:PATH, folder:GT_FILE[,ROOT] or icdar:DIR";
    return NULL;
}


/* the MPI job this process belongs to (rank 0 of 1 without one) */
static ocr_dist g_dist;

static void die(ocr_ctx *ctx, const char *what) {
    if (g_dist.world > 1) fprintf(stderr, "train_rec: rank %d of %d: %s: %s\n", g_dist.rank, g_dist.world, what, ocr_ctx_last_error(ctx));
    else fprintf(stderr, "train_rec: %s: %s\n", what, ocr_ctx_last_error(ctx));
    ocr_dist_abort(&g_dist, 1);
}

/* ---------------------------------------------------------------- data */

/* synth scenes (seed, count) or a dataset named on the command line */
static int open_data(ocr_ctx *ctx, const char *spec, const ocr_synth *synth, uint64_t seed, int64_t count, int size, ocr_dataset *ds) {
    if (is_synth(spec)) return ocr_dataset_open_synth(ctx, ds, synth, seed, count, size, size);
    if (strncmp(spec, "folder:", 7) == 0) {
        char gt[4096];
        const char *comma = strchr(spec + 7, ',');
        snprintf(gt, sizeof gt, "%.*s", comma ? (int)(comma - spec - 7) : (int)strlen(spec + 7), spec + 7);
        return ocr_rec_dataset_open_folder(ctx, ds, gt, comma ? comma + 1 : NULL);
    }
    return ocr_ex_open_dataset(ctx, spec, OCR_GT_POLYGON, ds);
}

static ocr_synth_config synth_config(const train_args *a, int heldout) {
    ocr_synth_config c = ocr_synth_defaults();
    c.font_path = heldout ? NULL : a->fonts;
    c.photo_path = heldout ? (a->photos && strcmp(a->photos, "none") == 0 ? "none" : NULL) : a->photos;
    c.split = heldout ? OCR_SYNTH_HELDOUT : OCR_SYNTH_TRAIN;
    c.lines_per_mpix = a->synth_lines;
    c.words_path = a->words; /* the held-out set too: other faces, the same kind of text */
    c.words_prob = a->words_prob;
    c.min_text_px = (float)a->min_text_px;
    c.max_text_px = (float)a->max_text_px;
    c.occlusion_prob = 0.0f; /* an occluded character cannot be read: its label would be noise */
    return c;
}

/* A validation set: the care words of the first samples of spec (synth: scenes of seed), at most count. */
static void val_open(ocr_ctx *ctx, ocr_rec_word_set *set, const char *spec, const ocr_synth *synth, uint64_t seed, int count,
                     const train_args *a, const ocr_charset *cs) {
    ocr_dataset ds;
    ocr_rec_crop_config cc = ocr_rec_crop_defaults();
    int64_t i;
    memset(set, 0, sizeof *set);
    cc.max_width = a->max_width;
    if (open_data(ctx, spec, synth, seed, 1000000, a->scene_size, &ds)) die(ctx, "opening the validation set");
    for (i = 0; i < ds.count && set->n < count; i++) {
        ocr_sample s;
        if (ocr_dataset_get(ctx, &ds, i, 0, &s)) die(ctx, "reading the validation set");
        /* synthetic words outside the charset are the renderer's, not a data error */
        if (ocr_rec_word_set_add(ctx, set, &s, cs, &cc, a->skip_unknown || is_synth(spec), count)) die(ctx, "validation words");
        ocr_sample_free(&s);
    }
    ocr_dataset_close(&ds);
    if (!set->n) { fprintf(stderr, "train_rec: the validation set %s holds no word the charset encodes\n", spec); exit(1); }
}

/* ---------------------------------------------------------------- validation */

typedef struct {
    int done;
    ocr_rec_eval e;
    ocr_rec_eval_result r;
} val_figures;

/* The first crops of a validation set, each with its label and the model's reading under it (green when read
   right, red when not), in the first of DejaVu Sans and Nanum Gothic that has each character: a picture of what the
   figures count. Written atomically to path; a failure is a warning, never the end of training. */
#define SHEET_CROPS 24
static void write_sheet(ocr_ctx *ctx, const ocr_painter *painter, const char *path, const ocr_rec_word_set *set, char **texts) {
    static const uint8_t green[3] = {40, 220, 40}, red[3] = {255, 70, 60}, grey[3] = {200, 200, 200};
    const int text_px = 16, row_h = 32 + text_px + 10, width = 560;
    int n = set->n < SHEET_CROPS ? set->n : SHEET_CROPS, i, y, x, rc = 0;
    ocr_image sheet;
    char line[600];
    if (!n || !painter->n_fonts) return;
    if (ocr_image_alloc(ctx, &sheet, width, n * row_h, 3)) { fprintf(stderr, "train_rec: warning: validation sheet: %s\n", ocr_ctx_last_error(ctx)); return; }
    memset(sheet.pixels, 24, (size_t)width * n * row_h * 3);
    for (i = 0; i < n && !rc; i++) {
        const ocr_image *c = &set->crops[i];
        int right = strcmp(set->labels[i], texts[i]) == 0;
        for (y = 0; y < c->height && y < 32; y++)
            for (x = 0; x < c->width && x < width - 8; x++) {
                const uint8_t *src = c->pixels + ((size_t)y * c->width + x) * c->channels;
                uint8_t *dst = sheet.pixels + ((size_t)(i * row_h + 4 + y) * width + 4 + x) * 3;
                dst[0] = src[0]; dst[1] = src[c->channels == 3 ? 1 : 0]; dst[2] = src[c->channels == 3 ? 2 : 0];
            }
        rc = ocr_painter_draw(ctx, painter, &sheet, 4, (float)(i * row_h + 38), (float)text_px, grey, set->labels[i], NULL, NULL);
        snprintf(line, sizeof line, "-> %s", texts[i][0] ? texts[i] : "(empty)");
        if (!rc) rc = ocr_painter_draw(ctx, painter, &sheet, 12 + ocr_painter_measure(painter, set->labels[i], (float)text_px), (float)(i * row_h + 38),
                                       (float)text_px, right ? green : red, line, NULL, NULL);
    }
    if (rc || ocr_image_save_png(ctx, path, &sheet)) fprintf(stderr, "train_rec: warning: validation sheet %s: %s\n", path, ocr_ctx_last_error(ctx));
    ocr_image_free(&sheet);
}

/* sheet: where to draw the first crops with their readings (NULL: nowhere) */
static val_figures validate(ocr_ctx *ctx, ocr_rec_model *m, const ocr_rec_word_set *set, const ocr_painter *painter, const char *sheet) {
    val_figures f;
    char **texts = (char **)calloc((size_t)set->n, sizeof(char *));
    int i;
    if (!texts) { fprintf(stderr, "train_rec: out of memory\n"); exit(1); }
    if (ocr_rec_recognize(ctx, m, set->crops, set->n, 64, 0, texts, NULL)) die(ctx, "validation");
    if (sheet && painter) write_sheet(ctx, painter, sheet, set, texts);
    ocr_rec_eval_init(&f.e);
    for (i = 0; i < set->n; i++) {
        ocr_rec_eval_add(&f.e, set->labels[i], texts[i]);
        OCR_FREE(texts[i]);
    }
    free(texts);
    f.r = ocr_rec_eval_finish(&f.e);
    f.done = 1;
    return f;
}

static void log_figures(ocr_ctx *ctx, ocr_metrics *metrics, int64_t step, const char *pre, const val_figures *f) {
    static const char *const names[5] = {"accuracy", "accuracy_nocase", "cer", "one_minus_ned", "empty_share"};
    double v[5];
    char key[64];
    int i;
    v[0] = f->r.accuracy; v[1] = f->r.accuracy_nocase; v[2] = f->r.cer; v[3] = f->r.one_minus_ned; v[4] = f->r.empty_share;
    for (i = 0; i < 5; i++) {
        snprintf(key, sizeof key, "val/%s%s", pre, names[i]);
        if (ocr_metrics_scalar(ctx, metrics, step, key, v[i])) die(ctx, "metrics");
    }
}

static void print_figures_json(const char *pre, const val_figures *f) {
    if (f->done)
        printf(",\"%saccuracy\":%.4f,\"%saccuracy_nocase\":%.4f,\"%scer\":%.4f,\"%sone_minus_ned\":%.4f,\"%sempty_share\":%.4f,\"%swords\":%lld", pre,
               f->r.accuracy, pre, f->r.accuracy_nocase, pre, f->r.cer, pre, f->r.one_minus_ned, pre, f->r.empty_share, pre,
               (long long)f->e.words);
    else
        printf(",\"%saccuracy\":null,\"%saccuracy_nocase\":null,\"%scer\":null,\"%sone_minus_ned\":null,\"%sempty_share\":null,\"%swords\":0", pre,
               pre, pre, pre, pre, pre);
}

/* ---------------------------------------------------------------- the run directory

   As train_dbnet's (see its comment "the run directory"): the metrics are flushed, then state.<G>.safetensors and
   state.<G>.optim.safetensors are written (each atomically), then state.json naming them with sizes and CRC-32C is
   renamed into place (the commit), then last.* are pointed at them and older generations removed. A kill at any instant
   leaves a complete committed state; --resume trusts only state.json and the files it names. */
typedef ocr_ex_run_files run_files;

enum { N_ASSETS = 3 };
typedef struct {
    int64_t step, best_step, words_skipped, words_too_long;   /* the words the data gave that were left out, so far */
    double best_accuracy, seconds;
    const char *assets[N_ASSETS];       /* the synthetic sets' fonts, photographs and word list, "<sha256>  <file>" lines */
} train_state;
static const char *const kAssetKeys[N_ASSETS] = {"synth.fonts", "synth.photos", "synth.words"};

/* removes temporary files and the state files of generations other than keep (-1: all), and with all the run's files */
static void clean_run_dir(const char *run_dir, int64_t keep, int all) {
    static const char *const names[] = {"state.json", "last.safetensors", "last.optim.safetensors", "best.safetensors", "metrics.jsonl"};
    DIR *d = opendir(run_dir);
    struct dirent *e;
    char path[4096];
    size_t i;
    while (d && (e = readdir(d)) != NULL) {
        int64_t g = ocr_ex_state_generation(e->d_name);
        int tmp = strstr(e->d_name, ".tmp.") != NULL, events = strncmp(e->d_name, "events.out.tfevents.", 20) == 0;
        if (!tmp && (g < 0 || g == keep) && !(all && events)) continue;
        snprintf(path, sizeof path, "%s/%s", run_dir, e->d_name);
        unlink(path);
    }
    if (d) closedir(d);
    for (i = 0; all && i < sizeof names / sizeof names[0]; i++) {
        snprintf(path, sizeof path, "%s/%s", run_dir, names[i]);
        unlink(path);
    }
}

/* the weights with the settings and the position as "train." metadata (and the assets), and the optimizer file */
static void write_checkpoint(ocr_ctx *ctx, const char *weights, const char *optim, const ocr_rec_model *m, const ocr_optimizer *opt,
                             const train_args *a, const train_state *st) {
    ocr_ex_meta meta;
    const char *keys[OCR_EX_META_MAX + N_ASSETS], *values[OCR_EX_META_MAX + N_ASSETS];
    int i, n, at_step;
    ocr_ex_meta_init(&meta);
    if (ocr_ex_settings_to_meta(kSettings, N_SETTINGS, a, "train.", &meta)) { fprintf(stderr, "train_rec: the settings are too long to store\n"); exit(1); }
    at_step = meta.n;
    if (ocr_ex_meta_add(&meta, "train.step", "%lld", (long long)st->step) ||
        ocr_ex_meta_add(&meta, "train.best_accuracy", "%.9g", st->best_accuracy) ||
        ocr_ex_meta_add(&meta, "train.best_step", "%lld", (long long)st->best_step) ||
        ocr_ex_meta_add(&meta, "train.seconds", "%.3f", st->seconds) || ocr_ex_meta_add(&meta, "train.optim_step", "%lld", (long long)opt->step) ||
        ocr_ex_meta_add(&meta, "train.words_skipped", "%lld", (long long)st->words_skipped) ||
        ocr_ex_meta_add(&meta, "train.words_too_long", "%lld", (long long)st->words_too_long) ||
        ocr_ex_meta_add(&meta, "dist.world_size", "%d", g_dist.world)) { /* a resume needs the same (its shards) */
        fprintf(stderr, "train_rec: the settings are too long to store\n");
        exit(1);
    }
    for (i = 0; i < meta.n; i++) { keys[i] = meta.keys[i]; values[i] = meta.values[i]; }
    n = meta.n;
    for (i = 0; i < N_ASSETS; i++)
        if (st->assets[i]) { keys[n] = kAssetKeys[i]; values[n++] = st->assets[i]; }
    if (optim) {
        const char *ok[1], *ov[1];
        ok[0] = meta.keys[at_step]; ov[0] = meta.values[at_step]; /* train.step */
        if (ocr_optim_save(ctx, opt, NULL, optim, ok, ov, 1)) die(ctx, "saving the optimizer state");
    }
    if (ocr_rec_save(ctx, m, weights, keys, values, n)) die(ctx, "saving a checkpoint");
}

/* The model's two files of a commit (ocr_ex_write_state_fn). */
typedef struct {
    const ocr_rec_model *m;
    const ocr_optimizer *opt;
    const train_args *a;
    const train_state *st;
} state_parts;
static void write_state(void *user, ocr_ctx *ctx, const char *weights, const char *optim, int kill_point) {
    const state_parts *s = (const state_parts *)user;
    (void)kill_point;
    write_checkpoint(ctx, weights, optim, s->m, s->opt, s->a, s->st);
}

static void commit_state(ocr_ctx *ctx, const char *run_dir, run_files *rf, ocr_metrics *metrics, const ocr_rec_model *m,
                         const ocr_optimizer *opt, const train_args *a, const train_state *st) {
    state_parts parts;
    parts.m = m; parts.opt = opt; parts.a = a; parts.st = st;
    if (ocr_metrics_flush(ctx, metrics)) die(ctx, "metrics");
    ocr_ex_state_commit("train_rec", ctx, run_dir, rf, st->step, 1, write_state, &parts, NULL);
    clean_run_dir(run_dir, rf->generation, 0);
}

static void find_state(ocr_ctx *ctx, const char *run_dir, run_files *rf) {
    int format;
    if (ocr_ex_state_read("train_rec", ctx, run_dir, 1, rf, &format) == 0) return;
    fprintf(stderr, "train_rec: --resume %s: no committed state there (state.json); start it again with --out %s --overwrite\n", run_dir,
            run_dir);
    exit(1);
}

static const char *checkpoint_meta(const void *st, const char *key) { return ocr_safetensors_meta((const ocr_safetensors *)st, key); }

/* ---------------------------------------------------------------- batches by width

   A step's crops, sorted by width, are cut into at most MAX_GROUPS groups (of at least MIN_GROUP) that minimise the
   padded area plus a fixed cost per group; each group is one forward and backward (BN statistics per group), the
   CTC mean of each weighted by its share of the crops, and the step's gradient is their sum. */
enum { MAX_GROUPS = 4, MIN_GROUP = 8 };
typedef struct { int width, sample, word; } crop_ref;

static int by_width(const void *a, const void *b) {
    const crop_ref *x = (const crop_ref *)a, *y = (const crop_ref *)b;
    if (x->width != y->width) return x->width < y->width ? -1 : 1;
    if (x->sample != y->sample) return x->sample < y->sample ? -1 : 1;
    return x->word < y->word ? -1 : x->word > y->word;
}

/* cuts[0..g] with cuts[0] = 0 and cuts[g] = n; returns g */
static int width_groups(const crop_ref *c, int n, int max_width, int *cuts) {
    double best[MAX_GROUPS + 1][257];
    int from[MAX_GROUPS + 1][257], g, i, j, bg = 1;
    const double per_group = 4.0 * max_width; /* about what four full-width crops cost */
    if (n > 256) { cuts[0] = 0; cuts[1] = n; return 1; }
    for (g = 0; g <= MAX_GROUPS; g++)
        for (i = 0; i <= n; i++) best[g][i] = 1e300;
    best[0][0] = 0;
    for (g = 1; g <= MAX_GROUPS; g++)
        for (i = 1; i <= n; i++)
            for (j = 0; j < i; j++) {
                double cost;
                if (best[g - 1][j] >= 1e299 || (i - j < MIN_GROUP && !(j == 0 && i == n))) continue;
                cost = best[g - 1][j] + (double)(i - j) * c[i - 1].width + per_group;
                if (cost < best[g][i]) { best[g][i] = cost; from[g][i] = j; }
            }
    for (g = 2; g <= MAX_GROUPS; g++)
        if (best[g][n] < best[bg][n]) bg = g;
    cuts[bg] = n;
    for (g = bg, i = n; g > 0; g--) { cuts[g - 1] = from[g][i]; i = from[g][i]; }
    return bg;
}

/* ---------------------------------------------------------------- main */

int main(int argc, char **argv) {
    train_args a;
    ocr_ctx ctx;
    ocr_charset cs;
    ocr_rec_model model;
    ocr_rec_config mcfg;
    ocr_optimizer opt;
    ocr_synth train_synth, heldout_synth;
    ocr_dataset train_ds, shard_ds;
    ocr_dist_shard shard;
    ocr_loader *loader = NULL;
    ocr_loader_config lcfg;
    ocr_rec_words_config wc;
    ocr_metrics metrics;
    ocr_painter painter;
    ocr_rec_word_set val, heldout;
    val_figures last_val, last_heldout;
    ocr_rec_decode_watch watch = ocr_rec_decode_watch_default();
    train_state st;
    ocr_safetensors resume_st;
    run_files rf;
    crop_ref *refs = NULL;
    ocr_tensor x, targets, target_lengths, input_lengths, d_lp;
    char run_dir[2048], path[4096], why[8192];
    const char *problem;
    int64_t batches_per_epoch, total_steps, saved_step = -1, crops_total = 0;
    int i, synth_data, heldout_count, L, tty = isatty(2) && getenv("TERM") && strcmp(getenv("TERM"), "dumb") != 0;
    int log_level = OCR_LOG_WARN, loader_batch, eval_done_at_end = 0;
    double t_start, seconds_before = 0;
    int is_root;

    memset(&st, 0, sizeof st);
    memset(&rf, 0, sizeof rf);
    memset(&x, 0, sizeof x); memset(&targets, 0, sizeof targets); memset(&target_lengths, 0, sizeof target_lengths);
    memset(&input_lengths, 0, sizeof input_lengths); memset(&d_lp, 0, sizeof d_lp);
    if (ocr_ex_settings_parse(argc, argv, "[options]", kSettings, N_SETTINGS, &a) != 0) {
        fprintf(stderr, "train_rec: unexpected argument '%s' (see --help)\n", argv[1]);
        return 2;
    }
    /* under an MPI launcher: one rank of the job; rank 0 alone logs, validates and writes the run */
    if ((i = ocr_dist_init(&g_dist, "train_rec", &argc, &argv, 600)) != 0) return i;
    is_root = g_dist.rank == 0;
    if (!is_root) {
        tty = 0;
        if (!freopen("/dev/null", "w", stdout)) { /* its summary line is rank 0's */ }
    }
    if (a.threads == 0 && g_dist.local_world > 1) a.threads = ocr_cpu_count() / g_dist.local_world > 1 ? ocr_cpu_count() / g_dist.local_world : 1;
    if (ocr_ctx_init(&ctx, a.threads, (uint64_t)a.seed) != OCR_OK) die(&ctx, "starting");
    ctx.log_fn = ocr_log_stderr;
    ctx.log_user = &log_level;
    if (a.check_numerics) ctx.debug_flags |= OCR_DEBUG_CHECK_NUMERICS;
    if (g_dist.world > 1 && strcmp(a.device, "cpu") != 0) {
        if (is_root) fprintf(stderr, "train_rec: --device %s under MPI: data parallelism runs on the CPU only for the recognizer\n", a.device);
        return 2;
    }
    if ((i = ocr_ex_set_device(&ctx, "train_rec", a.device)) != 0) return i;

    /* a resumed run takes its settings from its checkpoint; only threads, workers and logging may change */
    if (a.resume) {
        struct stat sb;
        if (a.overwrite) { fprintf(stderr, "train_rec: --overwrite starts a new run; it does not go with --resume\n"); return 2; }
        snprintf(run_dir, sizeof run_dir, "%s", a.resume);
        if (stat(run_dir, &sb) != 0 || !S_ISDIR(sb.st_mode)) { fprintf(stderr, "train_rec: --resume %s: not a directory\n", run_dir); return 1; }
        if (is_root) ocr_ex_lock_run_dir("train_rec", run_dir);
        find_state(&ctx, run_dir, &rf); /* every rank reads the same state */
        if (is_root) clean_run_dir(run_dir, rf.generation, 0);
        if (ocr_safetensors_open(&ctx, &resume_st, rf.weights)) die(&ctx, "--resume");
        if (ocr_ex_settings_from_meta("train_rec", rf.weights, kSettings, N_SETTINGS, &a, "train.", checkpoint_meta, &resume_st, why, sizeof why)) {
            fprintf(stderr, "train_rec: %s\n", why);
            return 1;
        }
        st.step = (int64_t)ocr_ex_meta_number("train_rec", &resume_st, rf.weights, "train.step", 0);
        st.best_accuracy = ocr_ex_meta_number("train_rec", &resume_st, rf.weights, "train.best_accuracy", 0);
        st.best_step = (int64_t)ocr_ex_meta_number("train_rec", &resume_st, rf.weights, "train.best_step", 0);
        seconds_before = ocr_ex_meta_number("train_rec", &resume_st, rf.weights, "train.seconds", 0);
        st.words_skipped = (int64_t)ocr_ex_meta_number("train_rec", &resume_st, rf.weights, "train.words_skipped", 0);
        st.words_too_long = (int64_t)ocr_ex_meta_number("train_rec", &resume_st, rf.weights, "train.words_too_long", 0);
        if (st.step != rf.step) { fprintf(stderr, "train_rec: --resume: state.json and %s disagree on the step\n", rf.weights); return 1; }
        {
            const char *w = ocr_safetensors_meta(&resume_st, "dist.world_size");
            int run_world = w ? atoi(w) : 1; /* a checkpoint from before data parallelism: one process */
            if (run_world != g_dist.world) {
                if (is_root)
                    fprintf(stderr, "train_rec: --resume %s: the run was trained by %d process%s (dist.world_size in %s) and this is %d: its "
                                    "data shards would change; resume it with mpirun -np %d (or, for 1, without mpirun)\n", run_dir, run_world,
                            run_world == 1 ? "" : "es", rf.weights, g_dist.world, run_world);
                else ocr_dist__sleep(0.5); /* rank 0 says it before the launcher ends the job */
                return 1;
            }
        }
    } else if (a.out) {
        snprintf(run_dir, sizeof run_dir, "%s", a.out);
    } else {
        char stamp[64];
        time_t t = time(NULL);
        strftime(stamp, sizeof stamp, "%Y%m%d-%H%M%S", localtime(&t));
        mkdir("runs", 0755);
        snprintf(run_dir, sizeof run_dir, "runs/rec-%s", stamp);
    }
    if ((problem = settings_problem(&a)) != NULL) {
        fprintf(stderr, "train_rec: %s%s%s\n", a.resume ? rf.weights : "", a.resume ? ": " : "", problem);
        return a.resume ? 1 : 2;
    }
    if (a.fonts && !a.fonts[0]) a.fonts = NULL;
    if (a.photos && !a.photos[0]) a.photos = NULL;
    if (a.words && !a.words[0]) a.words = NULL;
    synth_data = is_synth(a.data);
    heldout_count = !is_synth(a.val) ? 0 : a.heldout_count < 0 ? a.val_count : a.heldout_count;
    if (is_root && mkdir(run_dir, 0755) != 0 && errno != EEXIST) { fprintf(stderr, "train_rec: cannot create %s: %s\n", run_dir, strerror(errno)); return 1; }
    if (!a.resume && is_root) {
        ocr_ex_lock_run_dir("train_rec", run_dir);
        if (ocr_ex_file_in(run_dir, "state.json") || ocr_ex_file_in(run_dir, "metrics.jsonl") || ocr_ex_file_in(run_dir, "last.safetensors")) {
            if (!a.overwrite) {
                fprintf(stderr, "train_rec: %s already holds a run: continue it with --resume %s, or start a new one in it with --overwrite "
                                "(which deletes it)\n", run_dir, run_dir);
                return 2;
            }
            clean_run_dir(run_dir, -1, 1);
        }
    }

    /* charset and model */
    if (ocr_charset_init(&ctx, &cs, a.charset)) die(&ctx, "--charset");
    mcfg = ocr_rec_config_default();
    parse_channels(a.channels, mcfg.channels);
    mcfg.hidden = a.hidden;
    mcfg.layers = a.layers;
    if (ocr_rec_init(&ctx, &model, &mcfg, &cs)) die(&ctx, "building the model");
    if (ocr_optim_init(&ctx, &opt, &model.params, ocr_optim_adamw(0.9f, 0.999f, 1e-8f, a.weight_decay))) die(&ctx, "optimizer");
    if (a.resume) {
        ocr_safetensors ost;
        if (ocr_rec_load(&ctx, &model, rf.weights)) die(&ctx, "--resume");
        opt.step = (int64_t)ocr_ex_meta_number("train_rec", &resume_st, rf.weights, "train.optim_step", 0);
        if (ocr_safetensors_open(&ctx, &ost, rf.optim) || ocr_optim_load(&ctx, &opt, NULL, &ost)) die(&ctx, "--resume: the optimizer state");
        if ((int64_t)ocr_ex_meta_number("train_rec", &ost, rf.optim, "train.step", 0) != st.step) {
            fprintf(stderr, "train_rec: --resume: %s is not from step %lld as %s\n", rf.optim, (long long)st.step, rf.weights);
            return 1;
        }
        ocr_safetensors_close(&ost);
    }

    /* data */
    memset(&train_synth, 0, sizeof train_synth);
    memset(&heldout_synth, 0, sizeof heldout_synth);
    if (synth_data || is_synth(a.val)) {
        ocr_synth_config c = synth_config(&a, 0);
        static const char *const what[N_ASSETS] = {"fonts", "photographs", "word list (--words)"};
        if (ocr_synth_init(&ctx, &train_synth, &c)) die(&ctx, "synthetic words (--fonts, --photos, --words)");
        st.assets[0] = ocr_ex_asset_list("train_rec", &train_synth, 0);
        st.assets[1] = ocr_ex_asset_list("train_rec", &train_synth, 1);
        if (ocr_synth_word_count(&train_synth, NULL, NULL)) {
            int too_long, no_font, n = ocr_synth_word_count(&train_synth, &too_long, &no_font);
            char *line = (char *)malloc(64 + 2 + strlen(a.words) + 2);
            if (!line) { fprintf(stderr, "train_rec: out of memory\n"); return 1; }
            sprintf(line, "%s  %s\n", ocr_synth_words_sha256(&train_synth), a.words);
            st.assets[2] = line;
            if (is_root)
                fprintf(stderr, "train_rec: %d words of %s (each word drawn from it with chance %g); left out: %d over 24 characters, %d with a character "
                                "no font has\n", n, a.words, (double)a.words_prob, too_long, no_font);
        }
        for (i = 0; a.resume && i < N_ASSETS; i++) {
            const char *recorded = ocr_safetensors_meta(&resume_st, kAssetKeys[i]);
            /* a run recorded without a list has none now either: --words is restored from the checkpoint */
            if (recorded && (!st.assets[i] || strcmp(recorded, st.assets[i]) != 0)) {
                fprintf(stderr, "train_rec: --resume: the %s loaded now differ%s from what the run recorded (%s in %s): its words would "
                                "differ from those it trained on; restore %s or start a new run\n", what[i], i == 2 ? "s" : "",
                        kAssetKeys[i], rf.weights, i == 2 ? "it" : "them");
                return 1;
            }
        }
    }
    if (!is_root) heldout_count = 0; /* validation is rank 0's */
    if (heldout_count > 0) {
        ocr_synth_config c = synth_config(&a, 1);
        if (ocr_synth_init(&ctx, &heldout_synth, &c)) die(&ctx, "held-out words (the declared held-out fonts and photographs)");
    }
    L = a.max_width / 4;
    if (!synth_data) {
        /* every label encodes before any training, or the run stops here naming the first that does not */
        int64_t words = 0, skipped = 0;
        char first[2048];
        if (open_data(&ctx, a.data, NULL, 0, 0, 0, &train_ds)) die(&ctx, "--data");
        if (ocr_rec_check_labels(&ctx, &train_ds, &cs, a.max_width, a.skip_unknown, &words, &skipped, first, sizeof first)) {
            fprintf(stderr, "train_rec: --data %s: %s\n(--skip-unknown leaves such words out; --charset names the characters to learn)\n",
                    a.data, ocr_ctx_last_error(&ctx));
            return 1;
        }
        fprintf(stderr, "train_rec: %s: %lld words%s", a.data, (long long)words, skipped ? "" : "\n");
        if (skipped)
            fprintf(stderr, ", %lld left out with a character outside the charset (--skip-unknown), the first: %s\n", (long long)skipped, first);
        if (words - skipped < 1) { fprintf(stderr, "train_rec: no word of --data encodes\n"); return 1; }
    } else if (ocr_dataset_open_synth(&ctx, &train_ds, &train_synth, (uint64_t)a.seed * 7919u + 1,
                                      (int64_t)a.steps * ((a.batch + a.words_per_scene - 1) / a.words_per_scene) * g_dist.world, a.scene_size,
                                      a.scene_size)) {
        die(&ctx, "synthetic words");
    }
    memset(&wc, 0, sizeof wc);
    wc.charset = &cs;
    wc.crop = ocr_rec_crop_defaults();
    wc.crop.max_width = a.max_width;
    wc.max_words = synth_data ? a.words_per_scene : 1;
    wc.augment = 1;
    wc.skip_unknown = synth_data || a.skip_unknown;
    lcfg = ocr_loader_config_default();
    loader_batch = synth_data ? (a.batch + a.words_per_scene - 1) / a.words_per_scene : a.batch;
    lcfg.batch_size = loader_batch;
    lcfg.n_workers = a.workers;
    lcfg.worker_nice = 19; /* the step's threads own the cores; rendering fills their gaps */
    lcfg.shuffle = !synth_data;
    lcfg.drop_last = 1;
    lcfg.seed = (uint64_t)a.seed;
    ocr_rec_loader_setup(&wc, &lcfg);
    if (g_dist.world > 1) ocr_dist_shard_open(&g_dist, &shard_ds, &shard, &train_ds, loader_batch, synth_data); /* this rank's part */
    if (ocr_loader_create(&ctx, &loader, g_dist.world > 1 ? &shard_ds : &train_ds, &lcfg)) die(&ctx, "data loader");
    batches_per_epoch = (g_dist.world > 1 ? shard_ds.count : train_ds.count) / loader_batch;
    if (batches_per_epoch < 1) { fprintf(stderr, "train_rec: the training set has fewer than --batch samples\n"); return 1; }
    total_steps = a.steps;

    if (!is_root) memset(&val, 0, sizeof val);
    else if (is_synth(a.val)) val_open(&ctx, &val, "synth", &train_synth, (uint64_t)a.seed * 7919u + 1000003u, a.val_count, &a, &cs);
    else val_open(&ctx, &val, a.val, NULL, 0, a.val_count, &a, &cs);
    memset(&heldout, 0, sizeof heldout);
    if (heldout_count > 0) {
        val_open(&ctx, &heldout, "synth", &heldout_synth, (uint64_t)a.seed * 7919u + 2000003u, heldout_count, &a, &cs);
        ocr_synth_free(&heldout_synth);
    }

    refs = (crop_ref *)malloc((size_t)loader_batch * (size_t)wc.max_words * sizeof *refs);
    if (!refs) { fprintf(stderr, "train_rec: out of memory\n"); return 1; }
    if (is_root && (a.resume ? ocr_metrics_open_resume(&ctx, &metrics, run_dir, st.step) : ocr_metrics_open(&ctx, &metrics, run_dir)))
        die(&ctx, "metrics");
    memset(&painter, 0, sizeof painter);
    if (is_root) {
        /* the validation sheets; without their fonts training goes on without them */
        snprintf(path, sizeof path, "%s/overlays", run_dir);
        if (mkdir(path, 0755) != 0 && errno != EEXIST)
            fprintf(stderr, "train_rec: warning: no validation sheets: cannot create %s: %s\n", path, strerror(errno));
        else if (ocr_painter_open(&ctx, &painter, "/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf,/usr/share/fonts/truetype/nanum/NanumGothic.ttf"))
            fprintf(stderr, "train_rec: warning: no validation sheets: %s\n", ocr_ctx_last_error(&ctx));
    }
    if (g_dist.world > 1) { /* every rank starts from the same weights, step and settings */
        ocr_ex_meta meta;
        uint32_t crc = 0;
        int64_t lo, hi;
        ocr_ex_meta_init(&meta);
        if (ocr_ex_settings_to_meta(kSettings, N_SETTINGS, &a, "train.", &meta) == 0) crc = ocr_crc32c(crc, meta.text, meta.used);
        crc = ocr_crc32c(crc, model.params.data, model.params.numel * sizeof(float));
        crc = ocr_crc32c(crc, &st.step, sizeof st.step);
        ocr_dist_minmax_i64(&g_dist, (int64_t)crc, &lo, &hi, "MPI_Allreduce of the starting weights' CRC");
        if (lo != hi) {
            fprintf(stderr, "train_rec: rank %d: the ranks start from different settings, weights or steps (their CRC-32C differ): every "
                            "rank must have the same flags and read the same --resume directory\n", g_dist.rank);
            ocr_dist_abort(&g_dist, 1);
        }
    }
    signal(SIGINT, ocr_ex_on_signal);
    signal(SIGTERM, ocr_ex_on_signal);

    char where[160];
    if (is_root) fprintf(stderr, "train_rec: %s a CRNN (channels %s, LSTM %d x 2 x %d), %zu parameters, charset '%s' (%d classes), %lld steps of about %d "
                    "crops on %s; validation %d words%s%s, run %s\n",
            a.resume ? "resuming" : "training", a.channels, a.layers, a.hidden, ocr_params_trainable_count(&model.params), cs.name,
            cs.n_classes, (long long)total_steps, a.batch, ocr_ex_compute_name(&ctx, where, sizeof where), val.n, heldout.n ? " and " : "",
            heldout.n ? "held-out words" : "", run_dir);
    if (is_root && g_dist.world > 1)
        fprintf(stderr, "train_rec: data parallel over %d ranks (MPI, %d on this host): about %d crops per rank, %d in total; learning rate %g "
                        "per rank and in total (one step on the gradient of all the crops, not scaled with the ranks)\n", g_dist.world,
                g_dist.local_world, a.batch, a.batch * g_dist.world, (double)a.lr);
    if (heldout.n) fprintf(stderr, "train_rec: held-out validation: %d words of the declared held-out fonts and photographs\n", heldout.n);
    if (is_root && (val.skipped || heldout.skipped))
        fprintf(stderr, "train_rec: validation leaves out %lld + %lld words with characters outside the charset\n", (long long)val.skipped,
                (long long)heldout.skipped);

    memset(&last_val, 0, sizeof last_val);
    memset(&last_heldout, 0, sizeof last_heldout);
    t_start = ocr_monotonic_seconds();
    {
        int64_t epoch = -1;
        while (st.step < total_steps && !ocr_ex_stop) {
            ocr_batch *batch = NULL;
            int64_t want_epoch = st.step / batches_per_epoch, want_number = st.step % batches_per_epoch;
            int n = 0, n_all, g, groups, cuts[MAX_GROUPS + 1], b, k;
            double loss = 0;
            float lr, norm = 0;
            const float *words, *counts;
            if (want_epoch != epoch) {
                if (ocr_loader_start_epoch_at(&ctx, loader, want_epoch, want_number)) die(&ctx, "data loader");
                epoch = want_epoch;
            }
            if (ocr_loader_next(&ctx, loader, &batch)) die(&ctx, "data loader");
            if (!batch || batch->number != want_number) {
                fprintf(stderr, "train_rec: the loader gave batch %lld, expected %lld\n", batch ? (long long)batch->number : -1LL, (long long)want_number);
                return 1;
            }
            words = (const float *)batch->fields[OCR_REC_F_WORDS].data;
            counts = (const float *)batch->fields[OCR_REC_F_COUNTS].data;
            for (b = 0; b < batch->size; b++) {
                st.words_skipped += (int64_t)counts[b * 4 + 1];
                st.words_too_long += (int64_t)counts[b * 4 + 2];
                for (k = 0; k < (int)counts[b * 4]; k++) {
                    refs[n].width = (int)words[((size_t)b * wc.max_words + k) * (2 + L)];
                    refs[n].sample = b;
                    refs[n].word = k;
                    n++;
                }
            }
            ocr_params_zero_grad(&model.params);
            g_dist.step = st.step + 1;
            if (g_dist.world > 1) { /* all ranks' crops: each group's CTC mean weighs its share of them; the counts are the job's */
                double c[3];
                c[0] = n; c[1] = 0; c[2] = 0;
                for (b = 0; b < batch->size; b++) { c[1] += counts[b * 4 + 1]; c[2] += counts[b * 4 + 2]; }
                st.words_skipped -= (int64_t)c[1];
                st.words_too_long -= (int64_t)c[2];
                ocr_dist_sum_f64(&g_dist, c, 3, "MPI_Allreduce of the crop counts");
                n_all = (int)c[0];
                st.words_skipped += (int64_t)c[1];
                st.words_too_long += (int64_t)c[2];
            } else n_all = n;
            if (n > 0) {
                qsort(refs, (size_t)n, sizeof *refs, by_width);
                groups = width_groups(refs, n, a.max_width, cuts);
                for (g = 0; g < groups; g++) {
                    int gn = cuts[g + 1] - cuts[g], W = refs[cuts[g + 1] - 1].width, total = 0, j;
                    ocr_ctc_config cc = ocr_ctc_defaults();
                    ocr_ctc_result res;
                    ocr_tensor xv, tv, tlv, ilv, dv, lp;
                    int64_t per = (int64_t)3 * 32 * a.max_width;
                    /* the group's crops, their widths trimmed to the group's widest */
                    ocr_tensor_free(&x);
                    ocr_tensor_free(&targets); ocr_tensor_free(&target_lengths); ocr_tensor_free(&input_lengths); ocr_tensor_free(&d_lp);
                    for (j = 0; j < gn; j++) total += (int)words[((size_t)refs[cuts[g] + j].sample * wc.max_words + refs[cuts[g] + j].word) * (2 + L) + 1];
                    if (ocr_tensor_alloc(&ctx, &x, "x", OCR_F32, OCR_DEVICE_CPU, ocr_shape4(gn, 3, 32, W)) ||
                        ocr_tensor_alloc(&ctx, &targets, "targets", OCR_I32, OCR_DEVICE_CPU, ocr_shape1(total)) ||
                        ocr_tensor_alloc(&ctx, &target_lengths, "target_lengths", OCR_I32, OCR_DEVICE_CPU, ocr_shape1(gn)) ||
                        ocr_tensor_alloc(&ctx, &input_lengths, "input_lengths", OCR_I32, OCR_DEVICE_CPU, ocr_shape1(gn)) ||
                        ocr_tensor_alloc(&ctx, &d_lp, "d_log_probs", OCR_F32, ctx.device, ocr_shape3(W / 4, gn, cs.n_classes)))
                        die(&ctx, "batch");
                    for (j = 0, total = 0; j < gn; j++) {
                        const crop_ref *r = &refs[cuts[g] + j];
                        const float *w = words + ((size_t)r->sample * wc.max_words + r->word) * (2 + L);
                        const float *src = (const float *)batch->fields[OCR_REC_F_IMAGES].data + ((int64_t)r->sample * wc.max_words + r->word) * per;
                        int row, len = (int)w[1], c;
                        for (row = 0; row < 3 * 32; row++)
                            memcpy((float *)x.data + ((size_t)j * 3 * 32 + row) * W, src + (size_t)row * a.max_width, (size_t)W * sizeof(float));
                        ((int32_t *)target_lengths.data)[j] = len;
                        ((int32_t *)input_lengths.data)[j] = (int)w[0] / 4;
                        for (c = 0; c < len; c++) ((int32_t *)targets.data)[total++] = (int32_t)w[2 + c];
                    }
                    xv = x; tv = targets; tlv = target_lengths; ilv = input_lengths; dv = d_lp;
                    cc.grad_scale = (float)gn / (float)n_all;
                    /* trained on the padded group (no input lengths to the forward), read with them (ocr_rec_recognize):
                       measured better end to end than training with them too (docs/RECOGNITION.md, "Padding") */
                    if (ocr_rec_forward(&ctx, &model, &xv, NULL, 1, &lp) || ocr_tensor_zero(&ctx, &dv) ||
                        ocr_loss_ctc(&ctx, &cc, &lp, &tv, &tlv, &ilv, &res, NULL, &dv) || ocr_rec_backward(&ctx, &model, &dv))
                        die(&ctx, "training step");
                    loss += res.loss * gn / n_all;
                }
            }
            if (g_dist.world > 1 && n_all > 0) { /* the gradient of the mean CTC over every rank's crops, and that mean */
                ocr_dist_sum_f32(&g_dist, model.params.grad, model.params.numel, "MPI_Allreduce of the gradients");
                ocr_dist_sum_f64(&g_dist, &loss, 1, "MPI_Allreduce of the logged loss");
            }
            crops_total += n_all;
            lr = a.lr * (st.step < a.warmup ? (float)(st.step + 1) / (float)(a.warmup + 1) : 1.0f) * ocr_lr_poly(1.0f, st.step, total_steps, 0.9f);
            if (n_all > 0) {
                if (a.clip > 0 ? ocr_clip_grad_norm(&ctx, &model.params, a.clip, &norm) : ocr_clip_grad_norm(&ctx, &model.params, 1e30f, &norm))
                    die(&ctx, "gradient");
                if (ocr_optim_step(&ctx, &opt, &model.params, lr)) die(&ctx, "optimizer");
            }
            ocr_loader_release(loader, batch);
            st.step++;

            if (is_root && (st.step % a.log_every == 0 || st.step == total_steps)) {
                double el = ocr_monotonic_seconds() - t_start, cps = (double)crops_total / (el > 0 ? el : 1);
                double data_wait = ocr_loader_get_progress(loader).wait_seconds / (el > 0 ? el : 1); /* share of the time */
                char line[512];
                if (ocr_metrics_scalar(&ctx, &metrics, st.step, "train/loss", loss) || ocr_metrics_scalar(&ctx, &metrics, st.step, "train/lr", lr) ||
                    ocr_metrics_scalar(&ctx, &metrics, st.step, "train/grad_norm", norm) ||
                    ocr_metrics_scalar(&ctx, &metrics, st.step, "train/crops", n_all) ||
                    ocr_metrics_scalar(&ctx, &metrics, st.step, "train/crops_per_second", cps) ||
                    ocr_metrics_scalar(&ctx, &metrics, st.step, "train/words_skipped", (double)st.words_skipped) ||
                    ocr_metrics_scalar(&ctx, &metrics, st.step, "train/data_wait_fraction", data_wait))
                    die(&ctx, "metrics");
                snprintf(line, sizeof line,
                         "loss %.4f lr %.2e grad %.2f | %d crops, %.1f crops/s, data wait %.0f%% | left out %lld outside the charset, %lld too long",
                         loss, lr, norm, n_all, cps, 100.0 * data_wait, (long long)st.words_skipped, (long long)st.words_too_long);
                if (tty) ocr_ex_progress(stderr, (long)st.step, (long)total_steps, el, line);
                else { printf("step %lld/%lld %s\n", (long long)st.step, (long long)total_steps, line); fflush(stdout); }
            }
            if (is_root && ((a.eval_every > 0 && st.step % a.eval_every == 0) || st.step == total_steps)) {
                {
                    char sheet[4200], sheet_heldout[4200];
                    snprintf(sheet, sizeof sheet, "%s/overlays/val_step_%06lld.png", run_dir, (long long)st.step);
                    snprintf(sheet_heldout, sizeof sheet_heldout, "%s/overlays/heldout_step_%06lld.png", run_dir, (long long)st.step);
                    last_val = validate(&ctx, &model, &val, &painter, sheet);
                    if (heldout.n) last_heldout = validate(&ctx, &model, &heldout, &painter, sheet_heldout);
                }
                eval_done_at_end = st.step == total_steps;
                if (tty) fputc('\n', stderr);
                printf("step %lld validation: accuracy %.4f (case-insensitive %.4f) CER %.4f 1-NED %.4f empty %.4f", (long long)st.step,
                       last_val.r.accuracy, last_val.r.accuracy_nocase, last_val.r.cer, last_val.r.one_minus_ned, last_val.r.empty_share);
                if (heldout.n)
                    printf(" | held-out accuracy %.4f (case-insensitive %.4f) CER %.4f empty %.4f", last_heldout.r.accuracy,
                           last_heldout.r.accuracy_nocase, last_heldout.r.cer, last_heldout.r.empty_share);
                printf("\n");
                fflush(stdout);
                log_figures(&ctx, &metrics, st.step, "", &last_val);
                if (heldout.n) log_figures(&ctx, &metrics, st.step, "heldout_", &last_heldout);
                /* the decode watch: a model that predicts nothing has collapsed to the blank, whatever its loss says */
                if (ocr_rec_decode_watch_update(&watch, last_val.r.empty_share))
                    fprintf(stderr, "train_rec: warning: %.0f%% of the validation predictions are empty, at %d validations in a row: the model "
                                    "predicts only the CTC blank (labels encoded against the wrong charset, or dropped to empty targets, teach "
                                    "exactly this; examples/repro_rec_empty)\n", 100.0 * last_val.r.empty_share, watch.in_a_row);
                if (last_val.r.accuracy > st.best_accuracy || st.best_step == 0) {
                    st.best_accuracy = last_val.r.accuracy;
                    st.best_step = st.step;
                    st.seconds = seconds_before + ocr_monotonic_seconds() - t_start;
                    snprintf(path, sizeof path, "%s/best.safetensors", run_dir);
                    write_checkpoint(&ctx, path, NULL, &model, &opt, &a, &st);
                }
            }
            if (st.step % a.save_every == 0 || st.step == a.stop_at || st.step == total_steps) {
                st.seconds = seconds_before + ocr_monotonic_seconds() - t_start;
                if (is_root) commit_state(&ctx, run_dir, &rf, &metrics, &model, &opt, &a, &st);
                saved_step = st.step;
            }
            if (st.step == a.stop_at) ocr_ex_stop = 1;
            if (g_dist.world > 1) { /* a signal to one rank stops every rank after the same step */
                int64_t stop;
                ocr_dist_minmax_i64(&g_dist, ocr_ex_stop ? 1 : 0, NULL, &stop, "MPI_Allreduce of the stop flag");
                ocr_ex_stop = stop != 0;
            }
        }
    }
    if (tty) fputc('\n', stderr);
    st.seconds = seconds_before + ocr_monotonic_seconds() - t_start;
    if (saved_step != st.step && is_root) commit_state(&ctx, run_dir, &rf, &metrics, &model, &opt, &a, &st);
    if (ocr_ex_stop && st.step < total_steps && is_root)
        fprintf(stderr, "train_rec: interrupted at step %lld; saved %s/last.safetensors; continue with --resume %s\n", (long long)st.step,
                run_dir, run_dir);
    if (is_root && ocr_metrics_close(&ctx, &metrics)) die(&ctx, "metrics");
    {
        double el = ocr_monotonic_seconds() - t_start;
        printf("{");
        printf("\"steps\":%lld", (long long)st.step);
        print_figures_json("", &last_val);
        print_figures_json("heldout_", &last_heldout);
        printf(",\"words_left_out\":%lld,\"seconds\":%.1f,\"crops_per_second\":%.2f,\"validated\":%s,\"run\":\"%s\"}\n", (long long)st.words_skipped,
               st.seconds, (double)crops_total / (el > 0 ? el : 1), eval_done_at_end ? "true" : "false", run_dir);
    }
    ocr_loader_free(loader);
    ocr_dataset_close(&train_ds);
    ocr_rec_word_set_free(&val);
    ocr_rec_word_set_free(&heldout);
    ocr_synth_free(&train_synth);
    free((char *)st.assets[0]);
    free((char *)st.assets[1]);
    free((char *)st.assets[2]);
    free(refs);
    ocr_tensor_free(&x); ocr_tensor_free(&targets); ocr_tensor_free(&target_lengths); ocr_tensor_free(&input_lengths); ocr_tensor_free(&d_lp);
    ocr_optim_free(&opt);
    ocr_painter_close(&painter);
    ocr_rec_free(&model);
    ocr_charset_free(&cs);
    if (a.resume) ocr_safetensors_close(&resume_st);
    ocr_ctx_free(&ctx);
    /* no rank leaves before rank 0 has written everything: the launcher ends the job when the first one exits */
    ocr_dist_barrier(&g_dist, "MPI_Barrier at the end of the run (rank 0 writes the last state)");
    ocr_dist_finish(&g_dist);
    return ocr_ex_stop && st.step < total_steps ? 130 : 0;
}
