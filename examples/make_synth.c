/* make_synth - renders any synthetic text set into an ICDAR 2015 folder: OUT_DIR/images/img_N.png,
   OUT_DIR/gts/gt_img_N.txt (x1,y1,...,x4,y4,transcription per word, exact float coordinates; ### for don't-care
   words) and OUT_DIR/synth.json (the settings, the renderer's identity, every font and photograph with its sha256),
   which detect, eval_dbnet, make_lmdb, train_dbnet --data icdar:OUT_DIR and other tools read like any dataset.

     make_synth [--set val|heldout|train] [--run-seed 1] [flags] OUT_DIR

   --set picks what train_dbnet --seed RUN_SEED (default flags) validates on (val, the default), reports as held-out
   (heldout: fonts and photographs of the held-out families) or trains on (train: the first --count of its scenes);
   the other flags override single settings of the set. Exit status: 0 done, 1 failure, 2 usage error. */
#define OCR_IMPLEMENTATION
#include "ocr_tensor.h"
#include "ocr_geom.h"
#include "ocr_data.h"
#include "ocr_synth.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <errno.h>
#include <time.h>
#include <pthread.h>
#include <sys/stat.h>
#include "ocr_example.h"

/* train_dbnet's sets (examples/train_dbnet.c: the seeds it derives from --seed, its --size, --steps x --batch,
   --val-size, --val-count, --synth-lines and --synth-text-scale defaults). Kept in step with it by
   tests/test_make_synth.c, which renders each set here and through the library with these values. */
#define TRAIN_SEED(run) ((uint64_t)(run) * 7919u + 1u)
#define VAL_SEED(run) ((uint64_t)(run) * 7919u + 1000003u)
#define HELDOUT_SEED(run) ((uint64_t)(run) * 7919u + 2000003u)
enum { TRAIN_SIZE = 256, TRAIN_COUNT = 6000 * 4, VAL_SIZE = 320, VAL_COUNT = 200 };
static const float TRAIN_LINES = 90.0f, TRAIN_TEXT_SCALE = 1.0f;

typedef struct {
    const char *set, *split, *fonts, *font_root, *photos, *photo_root, *words;
    int64_t run_seed, seed;
    int count, size, width, height, threads;
    float photo_prob, lines, text_scale, words_prob;
} settings;

/* The set's values for every setting; 0, or -1 for an unknown set name. */
static int set_defaults(settings *s, const char *set, int64_t run_seed) {
    ocr_synth_config d = ocr_synth_defaults();
    s->set = set;
    s->run_seed = run_seed;
    s->fonts = s->font_root = s->photos = s->photo_root = s->words = NULL;
    s->photo_prob = d.photo_prob;
    s->words_prob = d.words_prob;
    s->lines = d.lines_per_mpix;
    s->text_scale = 1.0f;
    s->width = s->height = 0;
    s->threads = 1;
    s->split = "train";
    if (strcmp(set, "val") == 0) {
        s->seed = (int64_t)VAL_SEED(run_seed);
        s->size = VAL_SIZE;
        s->count = VAL_COUNT;
    } else if (strcmp(set, "heldout") == 0) {
        s->split = "heldout";
        s->seed = (int64_t)HELDOUT_SEED(run_seed);
        s->size = VAL_SIZE;
        s->count = VAL_COUNT;
    } else if (strcmp(set, "train") == 0) {
        s->seed = (int64_t)TRAIN_SEED(run_seed);
        s->size = TRAIN_SIZE;
        s->count = TRAIN_COUNT;
        s->lines = TRAIN_LINES;
        s->text_scale = TRAIN_TEXT_SCALE;
    } else {
        return -1;
    }
    return 0;
}

/* The value of --NAME VALUE or --NAME=VALUE in argv before parsing, or NULL: --set and --run-seed choose the other
   flags' defaults, so they are read first (and again by the parser, to the same effect). */
static const char *prescan(int argc, char **argv, const char *name) {
    size_t n = strlen(name);
    const char *found = NULL;
    int i;
    for (i = 1; i < argc; i++) {
        if (strcmp(argv[i], name) == 0 && i + 1 < argc) found = argv[++i];
        else if (strncmp(argv[i], name, n) == 0 && argv[i][n] == '=') found = argv[i] + n + 1;
    }
    return found;
}

/* 0 on a write error; *skipped counts polygons that are not quads (ICDAR 2015 lines hold 4 points) */
static int write_gt(const char *path, const ocr_sample *s, long long *skipped) {
    FILE *f = fopen(path, "w");
    int i, k;
    if (!f) return 0;
    for (i = 0; i < s->n_polys; i++) {
        const ocr_polygon *p = &s->polys[i];
        if (p->n_points != 4) { ++*skipped; continue; } /* every synthetic word is a quad: never expected */
        /* exact float coordinates (ICDAR's readers take decimals), so evaluation sees the polygons training did */
        for (k = 0; k < 4; k++) fprintf(f, "%.9g,%.9g,", p->points[k].x, p->points[k].y);
        fprintf(f, "%s\n", p->ignore || !p->text ? "###" : p->text);
    }
    return fclose(f) == 0;
}

static void json_string(FILE *f, const char *s) {
    char quoted[3 * 4096] = "";  /* ocr_json_quote appends */
    if (ocr_json_quote(quoted, sizeof quoted, s ? s : "") < sizeof quoted) fputs(quoted, f);
    else fputs("\"(too long)\"", f);
}

/* OUT_DIR/synth.json: what rendered the folder, so a set can be compared and re-rendered. 0 on a write error. */
static int write_manifest(const char *path, const settings *s, const ocr_synth *synth) {
    FILE *f = fopen(path, "w");
    char hex[33];
    int i, n;
    if (!f) return 0;
    fprintf(f, "{\n  \"program\": \"make_synth\",\n  \"set\": ");
    json_string(f, s->set);
    fprintf(f, ",\n  \"run_seed\": %lld,\n  \"split\": ", (long long)s->run_seed);
    json_string(f, s->split);
    fprintf(f, ",\n  \"seed\": %lld,\n  \"count\": %d,\n  \"width\": %d,\n  \"height\": %d,\n", (long long)s->seed, s->count,
            s->width, s->height);
    fprintf(f, "  \"lines_per_mpix\": %.9g,\n  \"text_scale\": %.9g,\n  \"photo_prob\": %.9g,\n", (double)s->lines,
            (double)s->text_scale, (double)s->photo_prob);
    fprintf(f, "  \"fonts_arg\": ");
    json_string(f, s->fonts ? s->fonts : "");
    fprintf(f, ",\n  \"photos_arg\": ");
    json_string(f, s->photos ? s->photos : "");
    fprintf(f, ",\n  \"words_arg\": ");
    json_string(f, s->words ? s->words : "");
    if (ocr_synth_word_count(synth, NULL, NULL)) {
        int too_long, no_font, count = ocr_synth_word_count(synth, &too_long, &no_font);
        fprintf(f, ",\n  \"words\": {\"prob\": %.9g, \"count\": %d, \"too_long\": %d, \"no_font\": %d, \"sha256\": \"%s\"}",
                (double)s->words_prob, count, too_long, no_font, ocr_synth_words_sha256(synth));
    }
    fprintf(f, ",\n  \"renderer\": \"%s\",\n  \"fonts\": [", ocr_hash_hex(synth->identity, hex));
    for (i = 0, n = ocr_synth_font_count(synth); i < n; i++) {
        fprintf(f, "%s\n    {\"file\": ", i ? "," : "");
        json_string(f, ocr_synth_font_file(synth, i));
        fprintf(f, ", \"sha256\": \"%s\"}", ocr_synth_font_sha256(synth, i));
    }
    fprintf(f, "\n  ],\n  \"photos\": [");
    for (i = 0, n = ocr_synth_photo_count(synth); i < n; i++) {
        fprintf(f, "%s\n    {\"file\": ", i ? "," : "");
        json_string(f, ocr_synth_photo_file(synth, i));
        fprintf(f, ", \"sha256\": \"%s\"}", ocr_synth_photo_sha256(synth, i));
    }
    fprintf(f, "\n  ]\n}\n");
    return fclose(f) == 0;
}

/* ---------------------------------------------------------------- rendering on worker threads */

typedef struct {
    const settings *s;
    const ocr_synth *synth;
    const char *out;
    pthread_mutex_t lock;
    long long next, done, skipped;
    int failed;
    char error[1200]; /* "scene N: " and the context's message */
    double t0;
    int progress_every;
} job;

/* Scenes are numbered by index, so the folder is the same for any number of threads. */
static void *worker(void *arg) {
    job *j = (job *)arg;
    ocr_ctx ctx;
    char path[4096];
    if (ocr_ctx_init(&ctx, 1, 0) != OCR_OK) {
        pthread_mutex_lock(&j->lock);
        if (!j->failed) snprintf(j->error, sizeof j->error, "%s", ocr_ctx_last_error(&ctx));
        j->failed = 1;
        pthread_mutex_unlock(&j->lock);
        return NULL;
    }
    for (;;) {
        long long i, skipped = 0;
        ocr_sample smp;
        int rc;
        pthread_mutex_lock(&j->lock);
        i = j->failed || j->next >= j->s->count ? -1 : j->next++;
        pthread_mutex_unlock(&j->lock);
        if (i < 0) break;
        memset(&smp, 0, sizeof smp);
        rc = ocr_synth_sample(&ctx, j->synth, (uint64_t)j->s->seed, i, j->s->width, j->s->height, &smp);
        if (rc == OCR_OK) {
            snprintf(path, sizeof path, "%s/images/img_%lld.png", j->out, i + 1);
            rc = ocr_image_save_png(&ctx, path, &smp.image);
        }
        if (rc == OCR_OK) {
            snprintf(path, sizeof path, "%s/gts/gt_img_%lld.txt", j->out, i + 1);
            if (!write_gt(path, &smp, &skipped)) rc = ocr_error(&ctx, OCR_EIO, "cannot write %s: %s", path, strerror(errno));
        }
        ocr_sample_free(&smp);
        pthread_mutex_lock(&j->lock);
        j->skipped += skipped;
        if (rc != OCR_OK && !j->failed) {
            j->failed = 1;
            snprintf(j->error, sizeof j->error, "scene %lld: %s", i + 1, ocr_ctx_last_error(&ctx));
        }
        if (rc == OCR_OK && (++j->done % j->progress_every == 0 || j->done == j->s->count)) {
            double t = ocr_monotonic_seconds() - j->t0;
            fprintf(stderr, "make_synth: %lld/%d scenes, %.0f s, %.1f scenes/s\n", j->done, j->s->count, t,
                    t > 0 ? (double)j->done / t : 0.0);
        }
        pthread_mutex_unlock(&j->lock);
    }
    ocr_ctx_free(&ctx);
    return NULL;
}

/* mkdir -p: "data/scenes" must work on a fresh checkout without data/ */
static int make_dir(const char *path) {
    char buf[4096];
    size_t i, n = strlen(path);
    if (n >= sizeof buf) { fprintf(stderr, "make_synth: the path '%s' is too long\n", path); return -1; }
    memcpy(buf, path, n + 1);
    for (i = 1; i <= n; i++)
        if (buf[i] == '/' || buf[i] == 0) {
            char c = buf[i];
            buf[i] = 0;
            if (mkdir(buf, 0755) != 0 && errno != EEXIST) {
                fprintf(stderr, "make_synth: cannot create %s: %s\n", buf, strerror(errno));
                return -1;
            }
            buf[i] = c;
        }
    return 0;
}

int main(int argc, char **argv) {
    settings s;
    const char *set = prescan(argc, argv, "--set"), *run_text = prescan(argc, argv, "--run-seed");
    long long run_seed = 1;
    int npos, i, started = 0, rc = 0;
    char path[4096], *end;
    ocr_ctx ctx;
    ocr_synth synth;
    ocr_synth_config cfg;
    pthread_t threads[256];
    job j;
    if (run_text) {
        errno = 0;
        run_seed = strtoll(run_text, &end, 10);
        if (errno || *end || end == run_text || run_seed < 0 || run_seed > 2147483647LL) {
            fprintf(stderr, "make_synth: --run-seed must be an integer, 0 to 2147483647, not '%s'\n", run_text);
            return 2;
        }
    }
    if (set_defaults(&s, set ? set : "val", (int64_t)run_seed)) {
        fprintf(stderr, "make_synth: --set must be val, heldout or train, not '%s'\n", set);
        return 2;
    }
    {
        const ocr_ex_flag flags[] = {
            {"--set", OCR_EX_STRING, &s.set, "val (what train_dbnet validates on), heldout (its held-out set) or "
                                             "train (its training scenes): the defaults of the flags below"},
            {"--run-seed", OCR_EX_INT64, &s.run_seed, "the train_dbnet --seed whose set --set names"},
            {"--split", OCR_EX_STRING, &s.split, "train or heldout: which families of the declared fonts and photographs"},
            {"--fonts", OCR_EX_STRING, &s.fonts, "DIR|FILE,...: these fonts instead of the split's declared set"},
            {"--font-root", OCR_EX_STRING, &s.font_root, "where the declared fonts are installed (default /usr/share/fonts)"},
            {"--photos", OCR_EX_STRING, &s.photos, "none (procedural backgrounds only) or DIR|FILE,...: instead of the "
                                                   "split's declared photographs"},
            {"--photo-root", OCR_EX_STRING, &s.photo_root, "where the declared photographs are installed "
                                                           "(default /usr/share/backgrounds)"},
            {"--photo-prob", OCR_EX_FLOAT, &s.photo_prob, "share of scenes drawn on a photograph, 0 to 1"},
            {"--words", OCR_EX_STRING, &s.words, "FILE: also draw words from this UTF-8 list, one word per line (e.g. "
                                                 "/usr/share/dict/american-english, package wamerican)"},
            {"--words-prob", OCR_EX_FLOAT, &s.words_prob, "with --words: share of the words taken from the list, 0 to 1"},
            {"--lines", OCR_EX_FLOAT, &s.lines, "text lines tried per megapixel (train_dbnet's --synth-lines), 0 to 10000"},
            {"--text-scale", OCR_EX_FLOAT, &s.text_scale, "text heights times this (train_dbnet's --synth-text-scale), 0.1 to 10"},
            {"--size", OCR_EX_INT, &s.size, "side of each scene in pixels, 32 to 4096"},
            {"--width", OCR_EX_INT, &s.width, "scene width, 32 to 4096 (0: --size)"},
            {"--height", OCR_EX_INT, &s.height, "scene height, 32 to 4096 (0: --size)"},
            {"--count", OCR_EX_INT, &s.count, "scenes to render, 1 to 1000000 (scenes 0 to count - 1 of the seed)"},
            {"--seed", OCR_EX_INT64, &s.seed, "scene seed, >= 0"},
            {"--threads", OCR_EX_INT, &s.threads, "rendering threads, 1 to 256 (the folder is the same for any number)"},
        };
        static const char *const synopsis =
            "[--set val|heldout|train] [flags] OUT_DIR\n  Renders synthetic scenes into OUT_DIR/images/img_<i>.png with ICDAR 2015 "
            "ground truth in\n  OUT_DIR/gts/gt_img_<i>.txt (<i> from 1) and the settings, fonts and photographs in "
            "OUT_DIR/synth.json.\n  The defaults shown are those of the chosen --set and --run-seed.";
        npos = ocr_ex_parse(argc, argv, synopsis, flags, (int)(sizeof flags / sizeof flags[0]));
    }
    if (s.count < 1 || s.count > 1000000) { fprintf(stderr, "make_synth: --count must be 1 to 1000000, not %d\n", s.count); return 2; }
    if (s.size < 32 || s.size > 4096) { fprintf(stderr, "make_synth: --size must be 32 to 4096, not %d\n", s.size); return 2; }
    if ((s.width && (s.width < 32 || s.width > 4096)) || (s.height && (s.height < 32 || s.height > 4096))) {
        fprintf(stderr, "make_synth: --width and --height must be 32 to 4096 (or 0: --size), not %d and %d\n", s.width, s.height);
        return 2;
    }
    if (s.seed < 0) { fprintf(stderr, "make_synth: --seed must be a non-negative integer, not %lld\n", (long long)s.seed); return 2; }
    if (strcmp(s.split, "train") != 0 && strcmp(s.split, "heldout") != 0) {
        fprintf(stderr, "make_synth: --split must be train or heldout, not '%s'\n", s.split);
        return 2;
    }
    if (!(s.photo_prob >= 0 && s.photo_prob <= 1)) { fprintf(stderr, "make_synth: --photo-prob must be 0 to 1, not %g\n", (double)s.photo_prob); return 2; }
    if (!(s.lines >= 0 && s.lines <= 10000)) { fprintf(stderr, "make_synth: --lines must be 0 to 10000, not %g\n", (double)s.lines); return 2; }
    if (!(s.text_scale >= 0.1f && s.text_scale <= 10)) {
        fprintf(stderr, "make_synth: --text-scale must be 0.1 to 10, not %g\n", (double)s.text_scale);
        return 2;
    }
    if (s.threads < 1 || s.threads > 256) { fprintf(stderr, "make_synth: --threads must be 1 to 256, not %d\n", s.threads); return 2; }
    if (s.fonts && !*s.fonts) { fprintf(stderr, "make_synth: --fonts needs DIR|FILE,...\n"); return 2; }
    if (s.photos && !*s.photos) { fprintf(stderr, "make_synth: --photos needs none or DIR|FILE,...\n"); return 2; }
    if (s.words && !*s.words) { fprintf(stderr, "make_synth: --words needs a FILE\n"); return 2; }
    if (!(s.words_prob >= 0 && s.words_prob <= 1)) { fprintf(stderr, "make_synth: --words-prob must be 0 to 1, not %g\n", (double)s.words_prob); return 2; }
    if (npos != 1) {
        fprintf(stderr, "make_synth: %s (see --help)\n", npos ? "one OUT_DIR only" : "give the OUT_DIR to write");
        return 2;
    }
    if (!s.width) s.width = s.size;
    if (!s.height) s.height = s.size;

    cfg = ocr_synth_defaults();
    cfg.split = strcmp(s.split, "heldout") == 0 ? OCR_SYNTH_HELDOUT : OCR_SYNTH_TRAIN;
    cfg.font_path = s.fonts;
    cfg.font_root = s.font_root;
    cfg.photo_path = s.photos;
    cfg.photo_root = s.photo_root;
    cfg.photo_prob = s.photo_prob;
    cfg.lines_per_mpix = s.lines;
    cfg.words_path = s.words;
    cfg.words_prob = s.words_prob;
    cfg.min_text_px *= s.text_scale;
    cfg.max_text_px *= s.text_scale;

    if (make_dir(argv[1])) return 1;
    snprintf(path, sizeof path, "%s/images", argv[1]);
    if (make_dir(path)) return 1;
    snprintf(path, sizeof path, "%s/gts", argv[1]);
    if (make_dir(path)) return 1;
    if (ocr_ctx_init(&ctx, 1, 0) != OCR_OK) { fprintf(stderr, "make_synth: %s\n", ocr_ctx_last_error(&ctx)); return 1; }
    if (ocr_synth_init(&ctx, &synth, &cfg)) {
        fprintf(stderr, "make_synth: %s\n", ocr_ctx_last_error(&ctx));
        ocr_ctx_free(&ctx);
        return 1;
    }
    fprintf(stderr, "make_synth: set %s (train_dbnet --seed %lld), split %s, seed %lld, %d scenes of %dx%d, %d fonts, %d photographs\n",
            s.set, (long long)s.run_seed, s.split, (long long)s.seed, s.count, s.width, s.height,
            ocr_synth_font_count(&synth), ocr_synth_photo_count(&synth));
    if (ocr_synth_word_count(&synth, NULL, NULL)) {
        int too_long, no_font, n = ocr_synth_word_count(&synth, &too_long, &no_font);
        fprintf(stderr, "make_synth: %d words of %s (each word drawn from it with chance %g); left out: %d over 24 characters, %d with a character no font has\n", n,
                s.words, (double)s.words_prob, too_long, no_font);
    }
    snprintf(path, sizeof path, "%s/synth.json", argv[1]);
    if (!write_manifest(path, &s, &synth)) {
        fprintf(stderr, "make_synth: cannot write %s: %s\n", path, strerror(errno));
        rc = 1;
    }

    memset(&j, 0, sizeof j);
    j.s = &s;
    j.synth = &synth;
    j.out = argv[1];
    j.t0 = ocr_monotonic_seconds();
    j.progress_every = s.count <= 1000 ? 50 : s.count / 50;
    pthread_mutex_init(&j.lock, NULL);
    for (i = 0; !rc && i < s.threads; i++) {
        if (pthread_create(&threads[i], NULL, worker, &j) != 0) break;
        started++;
    }
    for (i = 0; i < started; i++) pthread_join(threads[i], NULL);
    pthread_mutex_destroy(&j.lock);
    if (!rc && !started) { snprintf(j.error, sizeof j.error, "cannot start a rendering thread"); j.failed = 1; }
    if (j.skipped) fprintf(stderr, "make_synth: warning: %lld polygons were not quads and are missing from the ground truth\n", j.skipped);
    if (j.failed) { fprintf(stderr, "make_synth: %s\n", j.error); rc = 1; }
    if (!rc) printf("make_synth: wrote %d scenes to %s\n", s.count, argv[1]);
    ocr_synth_free(&synth);
    ocr_ctx_free(&ctx);
    return rc;
}
