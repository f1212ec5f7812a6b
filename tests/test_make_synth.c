/* examples/make_synth end to end (build.sh builds it before the tests):
   - the folder it writes reads back through the library's ICDAR reader (ocr_dataset_open_icdar) as exactly the
     scenes ocr_synth_sample renders with the same settings: pixels, every quad to the last float bit, the text,
     don't-care as ###; for each --set, and for flags that override single settings, on one thread and on several;
   - --set val|heldout|train take their sizes, counts and densities from train_dbnet's own --help defaults, and
     their seeds from the expressions in examples/train_dbnet.c;
   - synth.json lists the fonts the renderer loaded, with the sha256 sha256sum computes for the files;
   - bad flags exit 2 naming the problem;
   - --words: every care word of the folder is a word of the list, the folder is the library's scenes with that list,
     synth.json has sha256sum's digest of it; train_rec takes --words, stores it and refuses to resume with a list
     whose bytes changed. */
#define OCR_IMPLEMENTATION
#include "ocr_tensor.h"
#include "ocr_geom.h"
#include "ocr_data.h"
#include "ocr_synth.h"
#include "ocr_test.h"
#include "ocr_test_cli.h"

#include <unistd.h>

static const char *const MAKE_SYNTH = "./examples/make_synth";
static const char *const TRAIN = "./examples/train_dbnet";
#define dir ocr_test_cli_dir
static ocr_ctx ctx;

/* The "(default X)" that `prog --help` (ocr_ex_usage) prints for flag, as a number; NAN when absent. */
static double help_default(const char *help, const char *flag) {
    char key[64];
    const char *line, *def, *eol;
    snprintf(key, sizeof key, "  %s ", flag);
    if (!(line = strstr(help, key))) return NAN;
    eol = strchr(line, '\n');
    def = strstr(line, "(default ");
    if (!def || (eol && def > eol)) return NAN;
    return strtod(def + 9, NULL);
}

static char *help_of(const char *cmd) {
    char *out, *err;
    int rc = ocr_test_run(cmd, &out, &err);
    OCR_CHECK_MSG(rc == 0, "'%s' exited %d: %s", cmd, rc, err);
    free(err);
    return out;
}

/* The folder make_synth wrote at sub, against ocr_synth_sample with cfg, seed and size. */
static void check_folder(const char *sub, const ocr_synth_config *cfg, uint64_t seed, int count, int width, int height) {
    char images[600], gts[600];
    ocr_synth synth;
    ocr_dataset ds;
    int64_t i;
    snprintf(images, sizeof images, "%s/%s/images", dir, sub);
    snprintf(gts, sizeof gts, "%s/%s/gts", dir, sub);
    OCR_CHECK_OK(&ctx, ocr_synth_init(&ctx, &synth, cfg));
    if (ocr_dataset_open_icdar(&ctx, &ds, images, gts, OCR_GT_ICDAR2015) != OCR_OK) {
        OCR_CHECK_MSG(0, "%s: %s", sub, ocr_ctx_last_error(&ctx));
        ocr_synth_free(&synth);
        return;
    }
    OCR_CHECK_MSG(ds.count == count, "%s: %lld scenes, expected %d", sub, (long long)ds.count, count);
    for (i = 0; i < ds.count && i < count; i++) {
        ocr_sample a, b;
        int q, k, same = 1;
        memset(&a, 0, sizeof a);
        memset(&b, 0, sizeof b);
        OCR_CHECK_OK(&ctx, ocr_synth_sample(&ctx, &synth, seed, i, width, height, &a));
        OCR_CHECK_OK(&ctx, ocr_dataset_get(&ctx, &ds, i, 0, &b)); /* img_1.. sort in render order */
        OCR_CHECK_MSG(a.image.width == b.image.width && a.image.height == b.image.height && a.n_polys == b.n_polys,
                      "%s scene %lld: %dx%d with %d words, rendered %dx%d with %d", sub, (long long)i, b.image.width,
                      b.image.height, b.n_polys, a.image.width, a.image.height, a.n_polys);
        if (a.image.pixels && b.image.pixels && a.image.width == b.image.width && a.image.height == b.image.height)
            OCR_CHECK_MSG(memcmp(a.image.pixels, b.image.pixels, (size_t)a.image.width * (size_t)a.image.height * 3) == 0,
                          "%s scene %lld: the pixels differ", sub, (long long)i);
        for (q = 0; q < a.n_polys && q < b.n_polys; q++) {
            same &= a.polys[q].n_points == 4 && b.polys[q].n_points == 4 && a.polys[q].ignore == b.polys[q].ignore;
            for (k = 0; k < 4 && same; k++)
                same &= a.polys[q].points[k].x == b.polys[q].points[k].x && a.polys[q].points[k].y == b.polys[q].points[k].y;
            if (!a.polys[q].ignore) same &= a.polys[q].text && b.polys[q].text && strcmp(a.polys[q].text, b.polys[q].text) == 0;
        }
        OCR_CHECK_MSG(same, "%s scene %lld: the ground truth read back differs from the rendered scene", sub, (long long)i);
        ocr_sample_free(&a);
        ocr_sample_free(&b);
    }
    ocr_dataset_close(&ds);
    ocr_synth_free(&synth);
}

static void render(const char *args, const char *sub) {
    char cmd[1200], *out, *err;
    int rc;
    snprintf(cmd, sizeof cmd, "%s %s %s/%s", MAKE_SYNTH, args, dir, sub);
    rc = ocr_test_run(cmd, &out, &err);
    OCR_CHECK_MSG(rc == 0 && strstr(out, "make_synth: wrote"), "'%s' exited %d: %s%s", cmd, rc, out, err);
    free(out);
    free(err);
}

/* Each --set, small, against the library with the set's settings written out here; and single flags over a set.
   Only the held-out case loads the declared photographs (seconds per load); the others draw procedural backgrounds. */
static void test_folder_is_the_library_scenes(void) {
    ocr_synth_config cfg = ocr_synth_defaults();
    cfg.photo_path = "none";
    render("--count 2 --size 96 --photos none", "val");
    check_folder("val", &cfg, 1u * 7919u + 1000003u, 2, 96, 96);

    cfg = ocr_synth_defaults();
    cfg.split = OCR_SYNTH_HELDOUT;
    render("--set heldout --count 2 --size 96", "heldout");
    check_folder("heldout", &cfg, 1u * 7919u + 2000003u, 2, 96, 96);

    cfg = ocr_synth_defaults(); /* train_dbnet --seed 3's training scenes, denser, on two threads */
    cfg.photo_path = "none";
    cfg.lines_per_mpix = 90;
    render("--set train --run-seed 3 --count 3 --size 64 --threads 2 --photos none", "train");
    check_folder("train", &cfg, 3u * 7919u + 1u, 3, 64, 64);

    cfg = ocr_synth_defaults(); /* every override at once */
    cfg.split = OCR_SYNTH_HELDOUT;
    cfg.photo_path = "none";
    cfg.photo_prob = 0.25f;
    cfg.lines_per_mpix = 120;
    cfg.min_text_px *= 0.5f;
    cfg.max_text_px *= 0.5f;
    render("--set val --split heldout --photos none --photo-prob 0.25 --lines 120 --text-scale 0.5 --width 80 --height 48 "
           "--seed 5 --count 2 --threads 3", "custom");
    check_folder("custom", &cfg, 5, 2, 80, 48);
}

/* The sets' defaults are train_dbnet's: its --help for sizes, counts and densities, its source for the seeds. */
static void test_sets_follow_train_dbnet(void) {
    char cmd[600], *train, *val, *heldout, *tr, *src;
    ocr_synth_config d = ocr_synth_defaults();
    if (access(TRAIN, X_OK) != 0) { OCR_CHECK_MSG(0, "%s must be built first (./build.sh)", TRAIN); return; }
    snprintf(cmd, sizeof cmd, "%s --help", TRAIN);
    train = help_of(cmd);
    snprintf(cmd, sizeof cmd, "%s --set val --help", MAKE_SYNTH);
    val = help_of(cmd);
    snprintf(cmd, sizeof cmd, "%s --set heldout --run-seed 1 --help", MAKE_SYNTH);
    heldout = help_of(cmd);
    snprintf(cmd, sizeof cmd, "%s --set=train --help", MAKE_SYNTH);
    tr = help_of(cmd);
    OCR_CHECK(help_default(val, "--size") == help_default(train, "--val-size"));
    OCR_CHECK(help_default(val, "--count") == help_default(train, "--val-count"));
    OCR_CHECK(help_default(val, "--lines") == (double)d.lines_per_mpix); /* validation keeps the defaults */
    OCR_CHECK(help_default(val, "--text-scale") == 1);
    OCR_CHECK(help_default(val, "--seed") == 1 * 7919 + 1000003);
    OCR_CHECK(help_default(heldout, "--size") == help_default(train, "--val-size"));
    OCR_CHECK(help_default(heldout, "--count") == help_default(train, "--val-count"));
    OCR_CHECK(help_default(heldout, "--seed") == 1 * 7919 + 2000003);
    OCR_CHECK(strstr(heldout, "(default heldout)") != NULL);
    OCR_CHECK(help_default(tr, "--size") == help_default(train, "--size"));
    OCR_CHECK(help_default(tr, "--count") == help_default(train, "--steps") * help_default(train, "--batch"));
    OCR_CHECK(help_default(tr, "--lines") == help_default(train, "--synth-lines"));
    OCR_CHECK(help_default(tr, "--text-scale") == help_default(train, "--synth-text-scale"));
    OCR_CHECK(help_default(tr, "--seed") == 1 * 7919 + 1);
    /* the seeds' expressions, as train_dbnet derives them from its --seed */
    src = ocr_test_read_text("examples/train_dbnet.c");
    OCR_CHECK_MSG(src && strstr(src, "(uint64_t)a.seed * 7919u + 1000003u"), "train_dbnet's validation seed changed");
    OCR_CHECK_MSG(src && strstr(src, "(uint64_t)a.seed * 7919u + 2000003u"), "train_dbnet's held-out seed changed");
    OCR_CHECK_MSG(src && strstr(src, "(uint64_t)a.seed * 7919u + 1,"), "train_dbnet's training seed changed");
    free(src);
    free(train);
    free(val);
    free(heldout);
    free(tr);
}

/* synth.json names the fonts the renderer loaded, with sha256sum's digest of each file. */
static void test_manifest(void) {
    char path[600], cmd[1400], *json, *out, *err, file[1024], sha[80];
    ocr_json_tok toks[4096];
    int n = 0, fonts, first, rc;
    ocr_synth synth;
    ocr_synth_config cfg = ocr_synth_defaults();
    render("--count 1 --size 64 --photos none", "manifest");
    snprintf(path, sizeof path, "%s/manifest/synth.json", dir);
    json = ocr_test_read_text(path);
    OCR_CHECK_MSG(json != NULL, "no %s", path);
    if (!json) return;
    OCR_CHECK_OK(&ctx, ocr_json_parse(&ctx, json, strlen(json), toks, 4096, &n));
    cfg.photo_path = "none";
    OCR_CHECK_OK(&ctx, ocr_synth_init(&ctx, &synth, &cfg));
    fonts = n ? ocr_json_find(json, toks, 0, "fonts") : -1;
    OCR_CHECK(fonts >= 0 && toks[fonts].type == OCR_JSON_ARRAY && toks[fonts].size == ocr_synth_font_count(&synth));
    OCR_CHECK(n && ocr_json_find(json, toks, 0, "seed") >= 0 && ocr_json_find(json, toks, 0, "photos") >= 0);
    first = fonts >= 0 ? ocr_json_child(toks, fonts, 0) : -1;
    if (first >= 0 && ocr_json_string(json, &toks[ocr_json_find(json, toks, first, "file")], file, sizeof file) &&
        ocr_json_string(json, &toks[ocr_json_find(json, toks, first, "sha256")], sha, sizeof sha)) {
        OCR_CHECK(strcmp(file, ocr_synth_font_file(&synth, 0)) == 0);
        /* declared fonts are named relative to the font root */
        snprintf(cmd, sizeof cmd, "cd /usr/share/fonts && sha256sum '%s'", file);
        rc = ocr_test_run(cmd, &out, &err);
        OCR_CHECK_MSG(rc == 0 && strncmp(out, sha, 64) == 0, "synth.json says %s for %s, sha256sum: %s%s", sha, file, out, err);
        free(out);
        free(err);
    } else {
        OCR_CHECK_MSG(0, "synth.json lists no font with file and sha256");
    }
    ocr_synth_free(&synth);
    free(json);
}

static void test_usage_errors(void) {
    static const char *const cases[][2] = {
        {"--set bogus", "--set must be val, heldout or train"},
        {"--run-seed -1", "--run-seed must be an integer"},
        {"--split both", "--split must be train or heldout"},
        {"--photo-prob 1.5", "--photo-prob must be 0 to 1"},
        {"--lines -1", "--lines must be 0 to 10000"},
        {"--text-scale 0", "--text-scale must be 0.1 to 10"},
        {"--width 16", "--width and --height must be 32 to 4096"},
        {"--threads 0", "--threads must be 1 to 256"},
        {"--count 0", "--count must be 1 to 1000000"},
        {"--fonts ''", "--fonts needs"},
        {"--words ''", "--words needs a FILE"},
        {"--words-prob 2", "--words-prob must be 0 to 1"},
        {"--bogus", "unknown flag"},
    };
    char cmd[800];
    size_t i;
    for (i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        snprintf(cmd, sizeof cmd, "%s %s %s/never", MAKE_SYNTH, cases[i][0], dir);
        ocr_test_expect_exit(cmd, 2, cases[i][1]);
    }
    snprintf(cmd, sizeof cmd, "%s --count 1", MAKE_SYNTH);
    ocr_test_expect_exit(cmd, 2, "give the OUT_DIR");
    snprintf(cmd, sizeof cmd, "%s/never", dir);
    OCR_CHECK_MSG(access(cmd, F_OK) != 0, "a refused command created %s", cmd);
    /* an output folder whose parents do not exist yet (the README's data/scenes on a fresh checkout) */
    snprintf(cmd, sizeof cmd, "%s --count 1 --size 64 %s/new/parents/set", MAKE_SYNTH, dir);
    ocr_test_expect_exit(cmd, 0, NULL);
    snprintf(cmd, sizeof cmd, "%s/new/parents/set/gts/gt_img_1.txt", dir);
    OCR_CHECK_MSG(access(cmd, R_OK) == 0, "make_synth did not create %s", cmd);
}

static int write_text(const char *path, const char *text) {
    FILE *f = fopen(path, "wb");
    int ok = f && fwrite(text, 1, strlen(text), f) == strlen(text);
    if (f) ok &= fclose(f) == 0;
    return ok;
}

/* --words FILE --words-prob 1: the ground truth holds only words of the list (a CR before the newline stripped) */
static void test_words(void) {
    static const char *const words[] = {"apple", "Banana", "zebra's", "\303\211clair", "x9,y"};
    static const char *const list = "apple\nBanana\r\nzebra's\n\303\211clair\nx9,y\n";
    char path[600], args[900], cmd[1400], file[700], *json, *out, *err;
    ocr_synth_config cfg = ocr_synth_defaults();
    ocr_json_tok toks[4096];
    int n = 0, i, k, rc, labels = 0, node;
    snprintf(path, sizeof path, "%s/words.txt", dir);
    OCR_CHECK(write_text(path, list));
    snprintf(args, sizeof args, "--count 3 --size 128 --photos none --lines 200 --words %s --words-prob 1", path);
    render(args, "words");
    cfg.photo_path = "none";
    cfg.lines_per_mpix = 200;
    cfg.words_path = path;
    cfg.words_prob = 1;
    check_folder("words", &cfg, 1u * 7919u + 1000003u, 3, 128, 128);
    for (i = 1; i <= 3; i++) { /* x1,...,y4,label: the label is everything after the eighth comma */
        char *gt, *line;
        snprintf(file, sizeof file, "%s/words/gts/gt_img_%d.txt", dir, i);
        gt = ocr_test_read_text(file);
        OCR_CHECK_MSG(gt != NULL, "no %s", file);
        for (line = gt; line && *line;) {
            char *nl = strchr(line, '\n'), *label = line;
            int commas = 0, known = 0;
            if (nl) *nl = 0;
            while (*label && commas < 8) commas += *label++ == ',';
            for (k = 0; k < (int)(sizeof words / sizeof words[0]); k++) known |= strcmp(label, words[k]) == 0;
            OCR_CHECK_MSG(commas == 8 && (known || strcmp(label, "###") == 0), "%s: '%s' is no word of the list", file, label);
            labels += known;
            line = nl ? nl + 1 : NULL;
        }
        free(gt);
    }
    OCR_CHECK_MSG(labels >= 3, "%d care words from the list", labels);
    snprintf(file, sizeof file, "%s/words/synth.json", dir);
    json = ocr_test_read_text(file);
    OCR_CHECK_MSG(json != NULL, "no %s", file);
    if (json) {
        char sha[80] = "";
        OCR_CHECK_OK(&ctx, ocr_json_parse(&ctx, json, strlen(json), toks, 4096, &n));
        node = n ? ocr_json_find(json, toks, 0, "words") : -1;
        node = node >= 0 ? ocr_json_find(json, toks, node, "sha256") : -1;
        OCR_CHECK(node >= 0 && ocr_json_string(json, &toks[node], sha, sizeof sha));
        snprintf(cmd, sizeof cmd, "sha256sum '%s'", path);
        rc = ocr_test_run(cmd, &out, &err);
        OCR_CHECK_MSG(rc == 0 && sha[0] && strncmp(out, sha, 64) == 0, "synth.json says '%s', sha256sum: %s%s", sha, out, err);
        free(out);
        free(err);
        free(json);
    }
    /* a list with two words on a line stops make_synth, naming the line */
    snprintf(file, sizeof file, "%s/bad_words.txt", dir);
    OCR_CHECK(write_text(file, "apple\ntwo words\n"));
    snprintf(cmd, sizeof cmd, "%s --count 1 --size 64 --photos none --words %s %s/never_words", MAKE_SYNTH, file, dir);
    ocr_test_expect_exit(cmd, 1, "line 2: whitespace");
}

/* train_rec --words: stored with the run's settings; a resume with a list whose bytes changed is refused, one with
   the same list goes on. */
static void test_train_rec_words(void) {
    static const char *const rec = "./examples/train_rec";
    static const char *const tiny = "--steps 4 --eval-every 2 --val-count 12 --heldout-count 0 --channels 8,8,8,8,8,8 --hidden 8 "
                                    "--log-every 2 --save-every 2 --threads 2";
    char path[600], cmd[1600], *out, *err;
    int rc;
    if (access(rec, X_OK) != 0) { OCR_CHECK_MSG(0, "%s must be built first (./build.sh)", rec); return; }
    snprintf(cmd, sizeof cmd, "%s --help", rec);
    out = help_of(cmd);
    OCR_CHECK(out && strstr(out, "  --words ") && strstr(out, "  --words-prob "));
    free(out);
    snprintf(cmd, sizeof cmd, "%s --words-prob 1.5", rec);
    ocr_test_expect_exit(cmd, 2, "--words-prob must be in [0, 1]");
    snprintf(path, sizeof path, "%s/rec_words.txt", dir);
    OCR_CHECK(write_text(path, "apple\nbanana\ncherry\n"));
    snprintf(cmd, sizeof cmd, "%s %s --words %s --words-prob 1 --stop-at 2 --out %s/rec_run", rec, tiny, path, dir);
    rc = ocr_test_run(cmd, &out, &err);
    OCR_CHECK_MSG(rc == 130 && strstr(err, "3 words of"), /* --stop-at exits as interrupted */
                  "'%s' exited %d: %s%s", cmd, rc, out, err);
    free(out);
    free(err);
    OCR_CHECK(write_text(path, "apple\nbanana\ncherries\n"));
    snprintf(cmd, sizeof cmd, "%s --resume %s/rec_run", rec, dir);
    ocr_test_expect_exit(cmd, 1, "synth.words");
    OCR_CHECK(write_text(path, "apple\nbanana\ncherry\n"));
    rc = ocr_test_run(cmd, &out, &err);
    OCR_CHECK_MSG(rc == 0 && strstr(out, "\"steps\":4"), "'%s' exited %d: %s%s", cmd, rc, out, err);
    free(out);
    free(err);
}

int main(int argc, char **argv) {
    char cmd[128];
    ocr_test_init(argc, argv);
    if (access(MAKE_SYNTH, X_OK) != 0) {
        fprintf(stderr, "test_make_synth: %s must be built first (./build.sh builds it)\n", MAKE_SYNTH);
        printf("FAIL programs_built\nRESULT passed=0 failed=1 skipped=0\n");
        return 1;
    }
    if (ocr_ctx_init(&ctx, 1, 7) != OCR_OK) return 1;
    ocr_test_cli_ctx = &ctx;
    snprintf(dir, sizeof dir, "/tmp/ocr_test_make_synth.XXXXXX");
    if (!mkdtemp(dir)) { fprintf(stderr, "test_make_synth: mkdtemp failed\n"); return 1; }
    OCR_TEST_RUN_PROGRAMS(test_folder_is_the_library_scenes);
    OCR_TEST_RUN_PROGRAMS(test_sets_follow_train_dbnet);
    OCR_TEST_RUN_PROGRAMS(test_manifest);
    OCR_TEST_RUN_PROGRAMS(test_usage_errors);
    OCR_TEST_RUN_PROGRAMS(test_words);
    OCR_TEST_RUN_PROGRAMS(test_train_rec_words);
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    if (system(cmd) != 0) fprintf(stderr, "test_make_synth: could not remove %s\n", dir);
    ocr_ctx_free(&ctx);
    return ocr_test_finish();
}
