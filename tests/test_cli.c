/* The command-line programs end to end: ./examples/detect and ./examples/eval_dbnet run as a user runs them
   (build.sh builds them before the tests), and the tools of issue 6 (export_torchvision.py, check_dbnet_torch.py).
   - eval_dbnet --gt/--pred on hand-computed cases (perfect match, a miss, a false positive, don't care, IoU exactly
     0.5 and just below/above it, a missing result file, trailing scores, a collinear polygon) and all of them at once,
     and recall by word height (the bins' edges, a rotated word, an empty bin's null);
   - detect and eval_dbnet --model on a generated ICDAR folder (every layout --data accepts, and LMDB) with a model
     whose probability map is 1 everywhere, so the expected boxes and figures are known exactly; a randomly
     initialised model for the plumbing (JSON lines parse, overlays decode, eval prints its JSON);
   - --help lists every flag, usage errors exit 2, missing files exit 1 naming the file;
   - the C model against the PyTorch reference through check_dbnet_torch.py, and an exported torchvision ResNet
     loading into the backbone. */
#define OCR_IMPLEMENTATION
#include "ocr_tensor.h"
#include "ocr_nn.h"
#include "ocr_loss.h"
#include "ocr_dbnet.h"
#include "ocr_data.h"
#include "ocr_synth.h"
#include "ocr_test.h"
#include "ocr_test_cli.h"

#include <errno.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

static const char *const DETECT = "./examples/detect";
static const char *const EVAL = "./examples/eval_dbnet";
static const char *const TRAIN = "./examples/train_dbnet";
static const char *const MAKE_SYNTH = "./examples/make_synth";
#define dir ocr_test_cli_dir       /* this run's scratch directory */
static ocr_ctx ctx;

/* ---------------------------------------------------------------- helpers */

static char *path_in(const char *name) {
    static char bufs[8][512];
    static int next;
    char *b = bufs[next++ % 8];
    snprintf(b, sizeof bufs[0], "%s/%s", dir, name);
    return b;
}

static void write_text(const char *path, const char *text) {
    FILE *f = fopen(path, "wb");
    OCR_CHECK_MSG(f != NULL, "cannot write %s", path);
    if (!f) return;
    fputs(text, f);
    fclose(f);
}

static void make_dir(const char *path) { OCR_CHECK_MSG(mkdir(path, 0755) == 0 || errno == EEXIST, "mkdir %s", path); }




/* The last non-empty line of s (modified in place). */
static char *last_line(char *s) {
    size_t n = strlen(s);
    while (n && (s[n - 1] == '\n' || s[n - 1] == '\r')) s[--n] = 0;
    while (n && s[n - 1] != '\n') n--;
    return s + n;
}


typedef struct {
    double precision, recall, hmean;
    int images, gt_care, det_care, matched;
    int heights;                  /* 1: check the care GT and matches by word height too (<16, 16-32, >32 px) */
    int care_h[3], matched_h[3];
} figures;

/* The JSON's figures by word height against want's: counts, and the recall (null for a bin without care GT). */
static int heights_match(const char *line, const figures *want) {
    static const char *const bins[3] = {"h_lt16", "h16_32", "h_gt32"};
    int b;
    for (b = 0; b < 3; b++) {
        char key[64];
        double recall;
        snprintf(key, sizeof key, "gt_care_%s", bins[b]);
        if (ocr_test_json_number(line, strlen(line), key) != want->care_h[b]) return 0;
        snprintf(key, sizeof key, "matched_%s", bins[b]);
        if (ocr_test_json_number(line, strlen(line), key) != want->matched_h[b]) return 0;
        snprintf(key, sizeof key, "\"recall_%s\":", bins[b]);
        if (!strstr(line, key)) return 0;
        snprintf(key, sizeof key, "recall_%s", bins[b]);
        recall = ocr_test_json_number(line, strlen(line), key);
        if (want->care_h[b] ? fabs(recall - (double)want->matched_h[b] / want->care_h[b]) > 1e-9 : !isnan(recall)) return 0;
    }
    return 1;
}

/* Runs an eval_dbnet command that must succeed and checks the JSON of its last line against want. */
static void expect_figures(const char *what, const char *cmd, const figures *want) {
    char *out, *err, *line;
    int rc = ocr_test_run(cmd, &out, &err);
    OCR_CHECK_MSG(rc == 0, "'%s' exited %d: %s", cmd, rc, err);
    line = last_line(out);
    OCR_CHECK_MSG(fabs(ocr_test_json_number(line, strlen(line), "precision") - want->precision) < 1e-9 && fabs(ocr_test_json_number(line, strlen(line), "recall") - want->recall) < 1e-9 &&
                      fabs(ocr_test_json_number(line, strlen(line), "hmean") - want->hmean) < 1e-9 && ocr_test_json_number(line, strlen(line), "images") == want->images &&
                      ocr_test_json_number(line, strlen(line), "gt_care") == want->gt_care && ocr_test_json_number(line, strlen(line), "det_care") == want->det_care &&
                      ocr_test_json_number(line, strlen(line), "matched") == want->matched && (!want->heights || heights_match(line, want)),
                  "%s: '%s': got %s; expected P %.10g R %.10g H %.10g images %d gt_care %d det_care %d matched %d, by height %d/%d %d/%d %d/%d",
                  what, cmd, line, want->precision, want->recall, want->hmean, want->images, want->gt_care, want->det_care, want->matched,
                  want->matched_h[0], want->care_h[0], want->matched_h[1], want->care_h[1], want->matched_h[2], want->care_h[2]);
    free(out);
    free(err);
}

static figures make_figures(int images, int gt_care, int det_care, int matched) {
    figures f;
    memset(&f, 0, sizeof f);
    f.images = images;
    f.gt_care = gt_care;
    f.det_care = det_care;
    f.matched = matched;
    f.precision = det_care ? (double)matched / det_care : 0.0;
    f.recall = gt_care ? (double)matched / gt_care : 0.0;
    f.hmean = f.precision + f.recall > 0 ? 2 * f.precision * f.recall / (f.precision + f.recall) : 0.0;
    return f;
}

/* ---------------------------------------------------------------- fixtures */

enum { N_IMAGES = 3 };
static const int IMAGE_W[N_IMAGES] = {100, 64, 50}, IMAGE_H[N_IMAGES] = {60, 64, 130};
/* Against a detection covering each whole image: img_1 matched (IoU 0.947), img_2 a miss and a false positive
   (IoU 0.024), img_3 don't care (the ### region holds the whole detection). */
static const char *const IMAGE_GT[N_IMAGES] = {"1,1,99,1,99,59,1,59,full\n", "10,10,20,10,20,20,10,20,small\n",
                                               "0,0,50,0,50,130,0,130,###\n"};

static void write_image(const char *path, int w, int h, int seed) {
    ocr_image img;
    int i;
    OCR_CHECK_OK(&ctx, ocr_image_alloc(&ctx, &img, w, h, 3));
    for (i = 0; i < w * h * 3; i++) img.pixels[i] = (unsigned char)((i * 37 + seed * 101 + (i / (3 * w)) * 11) & 255);
    OCR_CHECK_OK(&ctx, ocr_image_save_png(&ctx, path, &img));
    ocr_image_free(&img);
}

/* images/ and gts/ under root, or both in root when flat */
static void write_icdar(const char *root, int flat) {
    char path[600];
    int i;
    make_dir(root);
    if (!flat) {
        snprintf(path, sizeof path, "%s/images", root);
        make_dir(path);
        snprintf(path, sizeof path, "%s/gts", root);
        make_dir(path);
    }
    for (i = 0; i < N_IMAGES; i++) {
        snprintf(path, sizeof path, "%s%s/img_%d.png", root, flat ? "" : "/images", i + 1);
        write_image(path, IMAGE_W[i], IMAGE_H[i], i);
        snprintf(path, sizeof path, "%s%s/gt_img_%d.txt", root, flat ? "" : "/gts", i + 1);
        write_text(path, IMAGE_GT[i]);
    }
}

/* A tiny model; text_everywhere: the probability head's last layer gives logit 20 at every pixel. */
static void write_model(const char *path, int text_everywhere) {
    ocr_dbnet m;
    ocr_dbnet_config cfg = ocr_dbnet_config_default();
    cfg.width = 0.125f;
    OCR_CHECK_OK(&ctx, ocr_dbnet_init(&ctx, &m, &cfg));
    if (text_everywhere) {
        ocr_tensor w = ocr_params_value(&m.params, ocr_params_find(&m.params, "decoder.binarize.6.weight"));
        ocr_tensor b = ocr_params_value(&m.params, ocr_params_find(&m.params, "decoder.binarize.6.bias"));
        OCR_CHECK_OK(&ctx, ocr_tensor_zero(&ctx, &w));
        OCR_CHECK_OK(&ctx, ocr_tensor_fill(&ctx, &b, 20.0));
    }
    OCR_CHECK_OK(&ctx, ocr_dbnet_save(&ctx, &m, path, NULL, NULL, 0));
    ocr_dbnet_free(&m);
}

/* ---------------------------------------------------------------- --help, usage and missing files */

static void check_help(const char *prog, const char *const *flags) {
    char cmd[256], *out, *err;
    int rc, i;
    snprintf(cmd, sizeof cmd, "%s --help", prog);
    rc = ocr_test_run(cmd, &out, &err);
    OCR_CHECK_MSG(rc == 0, "%s exited %d", cmd, rc);
    for (i = 0; flags[i]; i++) OCR_CHECK_MSG(strstr(out, flags[i]) != NULL, "%s does not list %s:\n%s", cmd, flags[i], out);
    free(out);
    free(err);
}

static void test_help(void) {
    static const char *const detect_flags[] = {"--model", "--poly", "--thresh", "--box-thresh", "--score", "--split-thresh", "--unclip", "--short-side",
                                               "--long-side", "--out", "--dump", "--threads", "--amp", "--help", NULL};
    static const char *const eval_flags[] = {"--model", "--data", "--gt", "--pred", "--gt-format", "--per-image", "--poly", "--thresh",
                                             "--box-thresh", "--score", "--split-thresh", "--unclip", "--short-side", "--long-side", "--threads", "--amp", "--help", NULL};
    check_help(DETECT, detect_flags);
    check_help(EVAL, eval_flags);
}

static void test_usage_errors(void) {
    char cmd[1024];
    const char *model = path_in("model_text.safetensors"), *img = path_in("icdar/images/img_1.png");
    snprintf(cmd, sizeof cmd, "%s --bogus", DETECT);
    ocr_test_expect_exit(cmd, 2, "unknown flag '--bogus'");
    snprintf(cmd, sizeof cmd, "%s --model %s --thresh abc %s", DETECT, model, img);
    ocr_test_expect_exit(cmd, 2, "--thresh needs a number");
    snprintf(cmd, sizeof cmd, "%s --model %s --short-side 1.5 %s", DETECT, model, img);
    ocr_test_expect_exit(cmd, 2, "--short-side needs an integer");
    snprintf(cmd, sizeof cmd, "%s --model %s --thresh 1.5 %s", DETECT, model, img);
    ocr_test_expect_exit(cmd, 2, "out of range");
    snprintf(cmd, sizeof cmd, "%s --model %s --score medium %s", DETECT, model, img);
    ocr_test_expect_exit(cmd, 2, "--score must be slow or fast");
    snprintf(cmd, sizeof cmd, "%s --model %s --split-thresh 0.2 %s", DETECT, model, img);
    ocr_test_expect_exit(cmd, 2, "--split-thresh 0 or above --thresh");
    snprintf(cmd, sizeof cmd, "%s %s", DETECT, img);
    ocr_test_expect_exit(cmd, 2, "--model is required");
    snprintf(cmd, sizeof cmd, "%s --model %s", DETECT, model);
    ocr_test_expect_exit(cmd, 2, "no image");
    snprintf(cmd, sizeof cmd, "%s --model %s --out %s %s %s/icdar_flat/img_1.png", DETECT, model, path_in("o"), img, dir);
    ocr_test_expect_exit(cmd, 2, "both write outputs named 'img_1'");
    snprintf(cmd, sizeof cmd, "%s", EVAL);
    ocr_test_expect_exit(cmd, 2, "either --model and --data, or --gt and --pred");
    snprintf(cmd, sizeof cmd, "%s --model %s --gt %s --pred %s", EVAL, model, dir, dir);
    ocr_test_expect_exit(cmd, 2, "either --model and --data, or --gt and --pred");
    snprintf(cmd, sizeof cmd, "%s --model %s --data folder:%s", EVAL, model, dir);
    ocr_test_expect_exit(cmd, 2, "--data must be");
    snprintf(cmd, sizeof cmd, "%s --gt %s --pred %s --gt-format xml", EVAL, dir, dir);
    ocr_test_expect_exit(cmd, 2, "--gt-format must be");
    snprintf(cmd, sizeof cmd, "%s --gt %s --pred %s stray", EVAL, dir, dir);
    ocr_test_expect_exit(cmd, 2, "unexpected argument: stray");
    snprintf(cmd, sizeof cmd, "%s --gt %s --pred %s --per-image=1", EVAL, dir, dir);
    ocr_test_expect_exit(cmd, 2, "takes no value");
    /* the CPU build has no CUDA backend: a usage error that names the CUDA build */
    snprintf(cmd, sizeof cmd, "%s --model %s --data icdar:%s/icdar --device cuda", EVAL, model, dir);
    ocr_test_expect_exit(cmd, 2, "this CPU build has no CUDA backend");
    snprintf(cmd, sizeof cmd, "%s --model %s --data icdar:%s/icdar --device tpu", EVAL, model, dir);
    ocr_test_expect_exit(cmd, 2, "--device must be cpu or cuda, not 'tpu'");
    /* a number a float cannot hold (1e99 became Inf, 1e-50 zero) or outside a flag's range is a usage error, refused
       before any work: no run directory appears (these ran and exited 1) */
    {
        static const struct { const char *prog, *args, *needle; } floats[] = {
            {"train", "--lr 1e99", "flag --lr needs a number within float's range"},
            {"train", "--width 1e39", "flag --width needs a number within float's range"},
            {"train", "--lr=-1e39", "flag --lr needs a number within float's range"},
            {"train", "--lr 1e-50", "got '1e-50'"},
            {"train", "--lr 11", "--lr in (0, 10]"},
            {"train", "--lr 0", "--lr in (0, 10]"},
            {"train", "--width 1e30", "--width in (0, 4]"},
            {"detect", "--thresh 1e99", "flag --thresh needs a number within float's range"},
            {"eval", "--unclip 3.5e38", "flag --unclip needs a number within float's range"}};
        struct stat sb;
        int i;
        for (i = 0; i < (int)(sizeof floats / sizeof floats[0]); i++) {
            const char *prog = floats[i].prog[0] == 't' ? TRAIN : floats[i].prog[0] == 'd' ? DETECT : EVAL;
            snprintf(cmd, sizeof cmd, "%s %s --out %s %s", prog, floats[i].args, path_in("never_made"),
                     prog == TRAIN ? "--steps 1" : prog == DETECT ? img : "");
            if (prog == EVAL) snprintf(cmd, sizeof cmd, "%s %s --gt %s --pred %s", EVAL, floats[i].args, dir, dir);
            ocr_test_expect_exit(cmd, 2, floats[i].needle);
            if (stat(path_in("never_made"), &sb) == 0) {
                OCR_CHECK_MSG(0, "'%s' created its output before refusing a flag", cmd);
                snprintf(cmd, sizeof cmd, "rm -rf %s", path_in("never_made"));
                if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", path_in("never_made"));
            }
        }
    }
}

static void test_missing_files(void) {
    char cmd[1024], *out, *err;
    const char *model = path_in("model_text.safetensors"), *img = path_in("icdar/images/img_1.png");
    int rc;
    snprintf(cmd, sizeof cmd, "%s --model %s/no_model.safetensors %s", DETECT, dir, img);
    ocr_test_expect_exit(cmd, 1, "no_model.safetensors");
    /* a missing image fails the run but not the other images */
    snprintf(cmd, sizeof cmd, "%s --model %s --short-side 64 %s/no_image.png %s", DETECT, model, dir, img);
    rc = ocr_test_run(cmd, &out, &err);
    OCR_CHECK_MSG(rc == 1 && strstr(err, "no_image.png") && strstr(out, "img_1.png") && !strstr(out, "no_image"),
                  "'%s' exited %d, stdout %s, stderr %s", cmd, rc, out, err);
    free(out);
    free(err);
    snprintf(cmd, sizeof cmd, "%s --model %s --short-side 64 %s/bad_model.safetensors", DETECT, model, dir);
    write_text(path_in("bad_model.safetensors"), "not an image");
    ocr_test_expect_exit(cmd, 1, "bad_model.safetensors");
    snprintf(cmd, sizeof cmd, "%s --model %s/bad_model.safetensors %s", DETECT, dir, img);
    ocr_test_expect_exit(cmd, 1, "bad_model.safetensors");
    snprintf(cmd, sizeof cmd, "%s --gt %s/no_gt_dir --pred %s", EVAL, dir, dir);
    ocr_test_expect_exit(cmd, 1, "no_gt_dir");
    snprintf(cmd, sizeof cmd, "%s --gt %s/icdar/gts --pred %s/no_pred_dir", EVAL, dir, dir);
    ocr_test_expect_exit(cmd, 1, "no_pred_dir");
    snprintf(cmd, sizeof cmd, "%s --gt %s/icdar/images --pred %s", EVAL, dir, dir);
    ocr_test_expect_exit(cmd, 1, "no ground-truth files");
    snprintf(cmd, sizeof cmd, "%s --model %s --data icdar:%s/no_data_dir", EVAL, model, dir);
    ocr_test_expect_exit(cmd, 1, "no_data_dir");
    snprintf(cmd, sizeof cmd, "%s --model %s --data lmdb:%s/no_lmdb", EVAL, model, dir);
    ocr_test_expect_exit(cmd, 1, "no_lmdb");
    snprintf(cmd, sizeof cmd, "%s --model %s/no_model.safetensors --data icdar:%s/icdar", EVAL, dir, dir);
    ocr_test_expect_exit(cmd, 1, "no_model.safetensors");
    /* malformed files name the file and the line */
    make_dir(path_in("bad_gt"));
    make_dir(path_in("bad_res"));
    write_text(path_in("bad_gt/gt_img_1.txt"), "0,0,10,0,10,10,0,10,a\n");
    write_text(path_in("bad_res/res_img_1.txt"), "0,0,10,0,10,10,0,10\n1,2,abc,4,5,6\n");
    snprintf(cmd, sizeof cmd, "%s --gt %s/bad_gt --pred %s/bad_res", EVAL, dir, dir);
    ocr_test_expect_exit(cmd, 1, "res_img_1.txt' line 2");
    write_text(path_in("bad_res/res_img_1.txt"), "0,0,10,0\n");
    ocr_test_expect_exit(cmd, 1, "res_img_1.txt' line 1: 4 numbers; a result polygon needs at least 3 points");
    write_text(path_in("bad_gt/gt_img_1.txt"), "0,0,10,0,10,x,0,10,a\n");
    write_text(path_in("bad_res/res_img_1.txt"), "");
    ocr_test_expect_exit(cmd, 1, "gt_img_1.txt");
}

/* ---------------------------------------------------------------- eval --gt/--pred on hand-computed cases */

typedef struct {
    const char *what, *gt, *res; /* res NULL: no result file */
    int gt_care, det_care, matched;
} eval_case;

static const eval_case CASES[] = {
    {"perfect match", "0,0,10,0,10,10,0,10,word\n", "0,0,10,0,10,10,0,10\n", 1, 1, 1},
    {"one miss", "0,0,10,0,10,10,0,10,a\r\n20,0,30,0,30,10,20,10,b\r\n", "0,0,10,0,10,10,0,10\n", 2, 1, 1},
    {"one false positive", "0,0,10,0,10,10,0,10,a\n", "0,0,10,0,10,10,0,10,0.9\n50,50,60,50,60,60,50,60,0.7\n", 1, 2, 1},
    /* the second detection lies inside the ### region: don't care, neither counted nor matched */
    {"don't care", "0,0,10,0,10,10,0,10,a\n20,0,40,0,40,20,20,20,###\n", "0,0,10,0,10,10,0,10\n22,2,38,2,38,18,22,18\n", 1, 1, 1},
    {"IoU exactly 0.5 (not matched)", "0,0,100,0,100,100,0,100,t\n", "0,0,100,0,100,50,0,50\n", 1, 1, 0},
    {"IoU 0.49", "0,0,100,0,100,100,0,100,t\n", "0,0,100,0,100,49,0,49\n", 1, 1, 0},
    {"IoU 0.51, trailing score", "0,0,100,0,100,100,0,100,t\n", "0,0,100,0,100,51,0,51,0.87\n", 1, 1, 1},
    {"missing result file", "0,0,10,0,10,10,0,10,a\n", NULL, 1, 0, 0},
    {"six-point polygon with collinear points", "0,0,10,0,10,10,0,10,a\n", " 0, 0, 5,0,10,0,10,10,0,10,0,5\n\n", 1, 1, 1},
    {"only don't care, empty result file", "0,0,10,0,10,10,0,10,###\n", "", 0, 0, 0},
    {"two GT, the first detection matches the second", "0,0,10,0,10,10,0,10,a\n30,0,40,0,40,10,30,10,b\n",
     "30,0,40,0,40,10,30,10\n0,0,10,0,10,10,0,10\n", 2, 2, 2},
};
enum { N_CASES = (int)(sizeof CASES / sizeof CASES[0]) };

static void test_eval_files(void) {
    char gt_dir[600], res_dir[600], path[700], cmd[2048], *out, *err;
    int i, gt_care = 0, det_care = 0, matched = 0, rc;
    figures want;
    snprintf(gt_dir, sizeof gt_dir, "%s/all_gt", dir);
    snprintf(res_dir, sizeof res_dir, "%s/all_res", dir);
    make_dir(gt_dir);
    make_dir(res_dir);
    for (i = 0; i < N_CASES; i++) {
        const eval_case *c = &CASES[i];
        char one_gt[600], one_res[600];
        snprintf(one_gt, sizeof one_gt, "%s/case%d_gt", dir, i);
        snprintf(one_res, sizeof one_res, "%s/case%d_res", dir, i);
        make_dir(one_gt);
        make_dir(one_res);
        snprintf(path, sizeof path, "%s/gt_img_1.txt", one_gt);
        write_text(path, c->gt);
        snprintf(path, sizeof path, "%s/gt_img_%d.txt", gt_dir, i + 1);
        write_text(path, c->gt);
        if (c->res) {
            snprintf(path, sizeof path, "%s/res_img_1.txt", one_res);
            write_text(path, c->res);
            snprintf(path, sizeof path, "%s/res_img_%d.txt", res_dir, i + 1);
            write_text(path, c->res);
        }
        snprintf(cmd, sizeof cmd, "%s --gt %s --pred %s", EVAL, one_gt, one_res);
        want = make_figures(1, c->gt_care, c->det_care, c->matched);
        expect_figures(c->what, cmd, &want);
        gt_care += c->gt_care;
        det_care += c->det_care;
        matched += c->matched;
    }
    /* all cases at once: the sums, per-image lines in natural order, warnings for the missing and stray files */
    snprintf(path, sizeof path, "%s/res_img_99.txt", res_dir);
    write_text(path, "0,0,1,0,1,1\n");
    snprintf(cmd, sizeof cmd, "%s --gt %s --pred %s", EVAL, gt_dir, res_dir);
    want = make_figures(N_CASES, gt_care, det_care, matched);
    expect_figures("all cases", cmd, &want);
    snprintf(cmd, sizeof cmd, "%s --gt %s --pred %s --per-image", EVAL, gt_dir, res_dir);
    rc = ocr_test_run(cmd, &out, &err);
    OCR_CHECK_MSG(rc == 0, "'%s' exited %d", cmd, rc);
    {
        const char *at = out;
        for (i = 0; i < N_CASES && at; i++) {
            char name[32];
            snprintf(name, sizeof name, "img_%d ", i + 1);
            at = strstr(at, name);
            OCR_CHECK_MSG(at != NULL, "per-image line %s missing or out of order:\n%s", name, out);
        }
    }
    OCR_CHECK_MSG(strstr(err, "no result file") && strstr(err, "res_img_8.txt"), "no warning for the missing file: %s", err);
    OCR_CHECK_MSG(strstr(err, "1 result files") && strstr(err, "match no ground truth"), "no warning for res_img_99.txt: %s", err);
    free(out);
    free(err);
    /* by word height: 10 px (found), 16 and 32 px (the bin's edges; 16 found), 40 px (missed), a 45-degree rectangle
       of sides 14.1 and 28.3 px (height 14.1: under 16, found) */
    make_dir(path_in("heights_gt"));
    make_dir(path_in("heights_res"));
    write_text(path_in("heights_gt/gt_img_1.txt"), "0,0,50,0,50,10,0,10,a\n0,20,50,20,50,36,0,36,b\n0,50,50,50,50,82,0,82,c\n"
                                                  "0,100,50,100,50,140,0,140,d\n120,0,140,20,130,30,110,10,e\n");
    write_text(path_in("heights_res/res_img_1.txt"), "0,0,50,0,50,10,0,10\n0,20,50,20,50,36,0,36\n120,0,140,20,130,30,110,10\n");
    snprintf(cmd, sizeof cmd, "%s --gt %s --pred %s", EVAL, path_in("heights_gt"), path_in("heights_res"));
    want = make_figures(1, 5, 3, 3);
    want.heights = 1;
    want.care_h[0] = 2; want.matched_h[0] = 2;
    want.care_h[1] = 2; want.matched_h[1] = 1;
    want.care_h[2] = 1; want.matched_h[2] = 0;
    expect_figures("recall by height", cmd, &want);
    /* a bin without words has recall null */
    write_text(path_in("heights_gt/gt_img_1.txt"), "0,0,50,0,50,10,0,10,a\n");
    want = make_figures(1, 1, 3, 1);
    want.heights = 1;
    want.care_h[0] = 1; want.matched_h[0] = 1;
    expect_figures("recall by height, empty bins", cmd, &want);
    rc = ocr_test_run(cmd, &out, &err);
    OCR_CHECK_MSG(rc == 0 && strstr(out, "recall by word height:  <16 px 1/1 (1.0000)  16-32 px 0/0  >32 px 0/0"), "'%s': %s", cmd, out);
    free(out);
    free(err);
}

/* ---------------------------------------------------------------- detect and eval --model */

/* Checks detect's JSON line for image i against a detection covering the whole image. */
static void check_detect_line(const char *line, int i, const char *image) {
    ocr_json_tok toks[256];
    int n, v, d, pts, k, sc;
    double x, y, score = -1;
    char got[512];
    OCR_CHECK_MSG(ocr_json_parse(&ctx, line, strlen(line), toks, 256, &n) == OCR_OK, "detect printed bad JSON: %s (%s)", line,
                  ocr_ctx_last_error(&ctx));
    if (ocr_json_parse(&ctx, line, strlen(line), toks, 256, &n) != OCR_OK) return;
    v = ocr_json_find(line, toks, 0, "image");
    OCR_CHECK(v >= 0 && ocr_json_string(line, &toks[v], got, sizeof got) && strcmp(got, image) == 0);
    OCR_CHECK(ocr_test_json_number(line, strlen(line), "width") == IMAGE_W[i] && ocr_test_json_number(line, strlen(line), "height") == IMAGE_H[i]);
    d = ocr_json_find(line, toks, 0, "detections");
    OCR_CHECK_MSG(d >= 0 && toks[d].type == OCR_JSON_ARRAY && toks[d].size == 1, "expected one detection: %s", line);
    if (d < 0 || toks[d].size != 1) return;
    v = ocr_json_child(toks, d, 0);
    pts = ocr_json_find(line, toks, v, "points");
    sc = ocr_json_find(line, toks, v, "score");
    OCR_CHECK_MSG(sc >= 0 && ocr_json_number(line, &toks[sc], &score) && score > 0.999 && score <= 1.0, "score %g: %s", score, line);
    OCR_CHECK_MSG(pts >= 0 && toks[pts].size == 4, "expected a 4-point box: %s", line);
    for (k = 0; pts >= 0 && k < toks[pts].size && k < 4; k++) {
        int p = ocr_json_child(toks, pts, k);
        static const int corner_x[4] = {0, 1, 1, 0}, corner_y[4] = {0, 0, 1, 1}; /* TL, TR, BR, BL */
        OCR_CHECK(ocr_json_number(line, &toks[ocr_json_child(toks, p, 0)], &x) && ocr_json_number(line, &toks[ocr_json_child(toks, p, 1)], &y));
        OCR_CHECK_MSG(x == corner_x[k] * IMAGE_W[i] && y == corner_y[k] * IMAGE_H[i], "point %d is (%g, %g): %s", k, x, y, line);
    }
}

static void test_detect_and_eval_model(void) {
    char cmd[4096], images[2048] = "", *out, *err, *line, *save;
    const char *text_model = path_in("model_text.safetensors");
    ocr_dataset ds;
    figures want = make_figures(N_IMAGES, 2, 2, 1);
    int rc, i;
    /* img_1's word (58 px high) is found, img_2's (10 px) missed */
    want.heights = 1;
    want.care_h[0] = 1; want.care_h[2] = 1; want.matched_h[2] = 1;
    for (i = 0; i < N_IMAGES; i++)
        snprintf(images + strlen(images), sizeof images - strlen(images), " %s/icdar/images/img_%d.png", dir, i + 1);
    snprintf(cmd, sizeof cmd, "%s --model %s --short-side 64 --threads 2 --out %s/det %s", DETECT, text_model, dir, images);
    rc = ocr_test_run(cmd, &out, &err);
    OCR_CHECK_MSG(rc == 0, "'%s' exited %d: %s", cmd, rc, err);
    for (i = 0, line = strtok_r(out, "\n", &save); i < N_IMAGES; i++, line = strtok_r(NULL, "\n", &save)) {
        char image[600], png[600];
        ocr_image shown, orig;
        OCR_CHECK_MSG(line != NULL, "detect printed %d lines, expected %d", i, N_IMAGES);
        if (!line) break;
        snprintf(image, sizeof image, "%s/icdar/images/img_%d.png", dir, i + 1);
        check_detect_line(line, i, image);
        /* the overlay: same size, the border drawn (green at (1,1)), the middle untouched */
        snprintf(png, sizeof png, "%s/det/img_%d.png", dir, i + 1);
        OCR_CHECK_OK(&ctx, ocr_image_load(&ctx, png, &shown));
        OCR_CHECK_OK(&ctx, ocr_image_load(&ctx, image, &orig));
        if (shown.pixels && orig.pixels && shown.width == orig.width && shown.height == orig.height) {
            size_t mid = ((size_t)(orig.height / 2) * orig.width + orig.width / 2) * 3, corner = ((size_t)orig.width + 1) * 3;
            OCR_CHECK(shown.pixels[corner] == 40 && shown.pixels[corner + 1] == 255 && shown.pixels[corner + 2] == 40);
            OCR_CHECK(memcmp(shown.pixels + mid, orig.pixels + mid, 3) == 0);
        } else {
            OCR_CHECK_MSG(0, "overlay %s missing or of the wrong size", png);
        }
        ocr_image_free(&shown);
        ocr_image_free(&orig);
    }
    free(out);
    free(err);

    /* the same figures from the model on every dataset layout, and from detect's result files */
    snprintf(cmd, sizeof cmd, "%s --model %s --short-side 64 --data icdar:%s/icdar", EVAL, text_model, dir);
    expect_figures("text-everywhere model", cmd, &want);
    snprintf(cmd, sizeof cmd, "%s --model %s --short-side 64 --data icdar:%s/icdar/images,%s/icdar/gts --per-image", EVAL, text_model, dir, dir);
    expect_figures("text-everywhere model", cmd, &want);
    snprintf(cmd, sizeof cmd, "%s --model %s --short-side 64 --data icdar:%s/icdar_flat", EVAL, text_model, dir);
    expect_figures("text-everywhere model", cmd, &want);
    snprintf(cmd, sizeof cmd, "%s --gt %s/icdar/gts --pred %s/det", EVAL, dir, dir);
    expect_figures("text-everywhere model", cmd, &want);
    OCR_CHECK_OK(&ctx, ocr_dataset_open_icdar(&ctx, &ds, path_in("icdar/images"), path_in("icdar/gts"), OCR_GT_ICDAR2015));
    OCR_CHECK_OK(&ctx, ocr_lmdb_write_dataset(&ctx, path_in("lmdb"), &ds, NULL, NULL));
    ocr_dataset_close(&ds);
    snprintf(cmd, sizeof cmd, "%s --model %s --short-side 64 --data lmdb:%s/lmdb", EVAL, text_model, dir);
    expect_figures("text-everywhere model", cmd, &want);
    /* in both half types (the model's map saturates: the same detections) */
    snprintf(cmd, sizeof cmd, "%s --model %s --short-side 64 --amp bf16 --data icdar:%s/icdar", EVAL, text_model, dir);
    expect_figures("text-everywhere model, bf16", cmd, &want);
    snprintf(cmd, sizeof cmd, "%s --model %s --short-side 64 --amp fp16 --data icdar:%s/icdar", EVAL, text_model, dir);
    expect_figures("text-everywhere model, fp16", cmd, &want);
    snprintf(cmd, sizeof cmd, "%s --model %s --short-side 64 --amp fp8 --data icdar:%s/icdar", EVAL, text_model, dir);
    ocr_test_expect_exit(cmd, 2, "--amp must be fp32, bf16 or fp16");
    snprintf(cmd, sizeof cmd, "%s --model %s --amp fp8 %s/icdar/images/img_1.png", DETECT, text_model, dir);
    ocr_test_expect_exit(cmd, 2, "--amp must be fp32, bf16 or fp16");

    /* polygon mode: one polygon per image, inside the image */
    snprintf(cmd, sizeof cmd, "%s --model %s --poly --short-side 64 %s/icdar/images/img_1.png", DETECT, text_model, dir);
    rc = ocr_test_run(cmd, &out, &err);
    OCR_CHECK_MSG(rc == 0 && strstr(out, "\"points\":[[") && !strstr(out, "},{"), "'%s' exited %d: %s%s", cmd, rc, out, err);
    free(out);
    free(err);
}

/* The input size detect builds, read back from --dump. */
static void check_input_size(const char *flags, const char *image, int want_w, int want_h) {
    char cmd[2048], *out, *err, stem[64], path[600];
    const char *base = strrchr(image, '/') + 1;
    ocr_safetensors st;
    int rc;
    snprintf(stem, sizeof stem, "%.*s", (int)(strrchr(base, '.') - base), base);
    snprintf(cmd, sizeof cmd, "%s --model %s %s --dump %s/dump %s", DETECT, path_in("model_random.safetensors"), flags, dir, image);
    rc = ocr_test_run(cmd, &out, &err);
    OCR_CHECK_MSG(rc == 0, "'%s' exited %d: %s", cmd, rc, err);
    snprintf(path, sizeof path, "%s/dump/%s.safetensors", dir, stem);
    rc = ocr_safetensors_open(&ctx, &st, path);
    OCR_CHECK_MSG(rc == OCR_OK, "%s", ocr_ctx_last_error(&ctx));
    if (rc == OCR_OK) {
        int in = ocr_safetensors_find(&st, "input"), pr = ocr_safetensors_find(&st, "prob");
        OCR_CHECK_MSG(in >= 0 && st.entries[in].shape.dim[2] == want_h && st.entries[in].shape.dim[3] == want_w,
                      "'%s': input is not %dx%d", cmd, want_w, want_h);
        OCR_CHECK(pr >= 0 && st.entries[pr].shape.dim[2] == want_h && st.entries[pr].shape.dim[3] == want_w);
        ocr_safetensors_close(&st);
    }
    free(out);
    free(err);
}

static void test_detect_random_model(void) {
    char cmd[4096], *out, *err, *line, *save;
    int rc, i, lines = 0;
    write_image(path_in("tiny.png"), 7, 3, 9);
    snprintf(cmd, sizeof cmd, "%s --model %s --short-side 64 --out %s/det_random %s/icdar/images/img_1.png %s/icdar/images/img_3.png %s",
             DETECT, path_in("model_random.safetensors"), dir, dir, dir, path_in("tiny.png"));
    rc = ocr_test_run(cmd, &out, &err);
    OCR_CHECK_MSG(rc == 0, "'%s' exited %d: %s", cmd, rc, err);
    for (line = strtok_r(out, "\n", &save); line; line = strtok_r(NULL, "\n", &save), lines++) {
        ocr_json_tok toks[4096];
        int n;
        OCR_CHECK_MSG(ocr_json_parse(&ctx, line, strlen(line), toks, 4096, &n) == OCR_OK && ocr_json_find(line, toks, 0, "detections") >= 0,
                      "bad JSON line: %s", line);
    }
    OCR_CHECK_MSG(lines == 3, "%d JSON lines for 3 images", lines);
    for (i = 0; i < 3; i++) {
        static const char *const names[3] = {"img_1", "img_3", "tiny"};
        char png[600];
        ocr_image img;
        snprintf(png, sizeof png, "%s/det_random/%s.png", dir, names[i]);
        OCR_CHECK_OK(&ctx, ocr_image_load(&ctx, png, &img));
        ocr_image_free(&img);
        snprintf(png, sizeof png, "%s/det_random/res_%s.txt", dir, names[i]);
        OCR_CHECK_MSG(access(png, R_OK) == 0, "%s missing", png);
    }
    free(out);
    free(err);
    snprintf(cmd, sizeof cmd, "%s --model %s --short-side 64 --data icdar:%s/icdar", EVAL, path_in("model_random.safetensors"), dir);
    rc = ocr_test_run(cmd, &out, &err);
    line = last_line(out);
    OCR_CHECK_MSG(rc == 0 && ocr_test_json_number(line, strlen(line), "images") == N_IMAGES && ocr_test_json_number(line, strlen(line), "precision") >= 0 && ocr_test_json_number(line, strlen(line), "recall") >= 0,
                  "'%s' exited %d: %s %s", cmd, rc, line, err);
    free(out);
    free(err);
    /* resizing as demo.py: short side to the limit, the other side ceil(.../32)*32; or the long side */
    check_input_size("--short-side 64", path_in("icdar/images/img_1.png"), 128, 64);   /* 100x60: 64/60*100 = 106.7 -> 128 */
    check_input_size("--short-side 50", path_in("icdar/images/img_3.png"), 64, 192);   /* 50x130: 64/50*130 = 166.4 -> 192 */
    check_input_size("--long-side 64", path_in("icdar/images/img_3.png"), 32, 64);     /* 64/130*50 = 24.6 -> 32 */
    check_input_size("", path_in("icdar/images/img_2.png"), 736, 736);
    check_input_size("--short-side 32", path_in("tiny.png"), 96, 32);                  /* 32/3*7 = 74.7 -> 96 */
    /* a 2000x1 strip: its short side at 736 would make the long side 1.47 M px; --long-side handles it */
    write_image(path_in("strip.png"), 2000, 1, 4);
    snprintf(cmd, sizeof cmd, "%s --model %s %s", DETECT, path_in("model_random.safetensors"), path_in("strip.png"));
    ocr_test_expect_exit(cmd, 1, "use --long-side");
    check_input_size("--long-side 256", path_in("strip.png"), 256, 32);
}

/* ---------------------------------------------------------------- the Python tools */

static void test_check_dbnet_torch(void) {
    char cmd[2048], *out, *err;
    int rc;
    snprintf(cmd, sizeof cmd, "/usr/bin/python3 tools/check_dbnet_torch.py --model %s --image %s --detect %s --short-side 64",
             path_in("model_random.safetensors"), path_in("icdar/images/img_1.png"), DETECT);
    rc = ocr_test_run(cmd, &out, &err);
    OCR_CHECK_MSG(rc == 0 && strstr(out, "agree"), "'%s' exited %d (needs python3-torch, python3-numpy, python3-opencv):\n%s%s", cmd, rc,
                  out, err);
    free(out);
    free(err);
}

static void test_export_torchvision(void) {
    char cmd[2048];
    const char *file = path_in("r18.safetensors"), *pth = path_in("r18.pth"), *again = path_in("r18_again.safetensors");
    ocr_dbnet m;
    ocr_dbnet_config cfg = ocr_dbnet_config_default();
    ocr_safetensors st;
    int rc, i;
    /* One interpreter, as each start costs seconds: a random ResNet-18 exported, saved as a .pth, exported again
       from it with --weights, and that file refused as a ResNet-34 (exit status 1). */
    snprintf(cmd, sizeof cmd,
             "/usr/bin/python3 -c \"import sys, torch; sys.path.insert(0, 'tools'); import ocr_st, export_torchvision as e; "
             "run = lambda *a: (setattr(sys, 'argv', ['export_torchvision.py'] + list(a)), e.main())[1]; "
             "assert run('--depth', '18', '--seed', '3', '--out', '%s') == 0; "
             "torch.save(ocr_st.load('%s')[0], '%s'); "
             "assert run('--depth', '18', '--weights', '%s', '--out', '%s') == 0; "
             "sys.exit(run('--depth', '34', '--weights', '%s', '--out', '%s.34'))\"",
             file, file, pth, pth, again, pth, again);
    ocr_test_expect_exit(cmd, 1, "is not a ResNet-34 state_dict");
    /* both files load into the backbone and hold the same values */
    rc = ocr_dbnet_init(&ctx, &m, &cfg);
    OCR_CHECK_MSG(rc == OCR_OK, "%s", ocr_ctx_last_error(&ctx));
    if (rc) return;
    rc = ocr_safetensors_open(&ctx, &st, file);
    OCR_CHECK_MSG(rc == OCR_OK, "%s", ocr_ctx_last_error(&ctx));
    for (i = 0; i < 2 && rc == OCR_OK; i++) {
        static const char *const names[2][2] = {{"backbone.conv1.weight", "conv1.weight"},
                                                {"backbone.layer4.1.bn2.running_var", "layer4.1.bn2.running_var"}};
        ocr_tensor p, ref;
        OCR_CHECK_OK(&ctx, ocr_dbnet_load_backbone(&ctx, &m, i ? again : file));
        OCR_CHECK_OK(&ctx, ocr_safetensors_read(&ctx, &st, names[i][1], &ref));
        p = ocr_params_value(&m.params, ocr_params_find(&m.params, names[i][0]));
        OCR_CHECK_MSG(ref.data && ocr_shape_equal(p.shape, ref.shape) && memcmp(p.data, ref.data, ocr_tensor_bytes(&ref)) == 0,
                      "%s differs from the exported %s", names[i][0], names[i][1]);
        ocr_tensor_free(&ref);
    }
    if (rc == OCR_OK) ocr_safetensors_close(&st);
    ocr_dbnet_free(&m);
}

/* make_synth's folder reads back through ocr_dataset_open_icdar as exactly the scenes ocr_synth_sample renders (same
   pixels, every word's quad to the last float bit, don't-care as ###), so evaluating on it is evaluating on them. */
static void test_make_synth(void) {
    char cmd[1200], images[600], gts[600];
    ocr_synth synth;
    ocr_dataset ds;
    int64_t i;
    snprintf(cmd, sizeof cmd, "%s --count 3 --size 96 --seed 11 %s/synth >/dev/null 2>&1", MAKE_SYNTH, dir);
    OCR_CHECK(system(cmd) == 0);
    snprintf(images, sizeof images, "%s/synth/images", dir);
    snprintf(gts, sizeof gts, "%s/synth/gts", dir);
    OCR_CHECK_OK(&ctx, ocr_synth_init(&ctx, &synth, NULL));
    OCR_CHECK_OK(&ctx, ocr_dataset_open_icdar(&ctx, &ds, images, gts, OCR_GT_ICDAR2015));
    OCR_CHECK(ds.count == 3);
    for (i = 0; i < ds.count && i < 3; i++) {
        ocr_sample a, b;
        int q, k, same = 1;
        OCR_CHECK_OK(&ctx, ocr_synth_sample(&ctx, &synth, 11, i, 96, 96, &a));
        OCR_CHECK_OK(&ctx, ocr_dataset_get(&ctx, &ds, i, 0, &b));  /* img_1..img_3 sort as the render order */
        OCR_CHECK(a.image.width == b.image.width && a.image.height == b.image.height && a.n_polys == b.n_polys);
        if (a.image.pixels && b.image.pixels && a.image.width == b.image.width && a.image.height == b.image.height)
            OCR_CHECK(memcmp(a.image.pixels, b.image.pixels, (size_t)a.image.width * (size_t)a.image.height * 3) == 0);
        for (q = 0; q < a.n_polys && q < b.n_polys; q++) {
            same &= a.polys[q].n_points == 4 && b.polys[q].n_points == 4 && a.polys[q].ignore == b.polys[q].ignore;
            for (k = 0; k < 4 && same; k++)
                same &= a.polys[q].points[k].x == b.polys[q].points[k].x && a.polys[q].points[k].y == b.polys[q].points[k].y;
            if (!a.polys[q].ignore) same &= a.polys[q].text && b.polys[q].text && strcmp(a.polys[q].text, b.polys[q].text) == 0;
        }
        OCR_CHECK_MSG(same, "scene %lld: the ground truth read back differs from the rendered scene", (long long)i);
        ocr_sample_free(&a);
        ocr_sample_free(&b);
    }
    ocr_dataset_close(&ds);
    ocr_synth_free(&synth);
    snprintf(cmd, sizeof cmd, "%s --count 0 %s/synth0", MAKE_SYNTH, dir);
    ocr_test_expect_exit(cmd, 2, "--count must be 1 to 1000000");
    snprintf(cmd, sizeof cmd, "%s --seed 99999999999 --count 1x %s/synth0", MAKE_SYNTH, dir);
    ocr_test_expect_exit(cmd, 2, "flag --count needs an integer");
    snprintf(cmd, sizeof cmd, "%s --size 20 %s/synth0", MAKE_SYNTH, dir);
    ocr_test_expect_exit(cmd, 2, "--size must be 32 to 4096");
    snprintf(cmd, sizeof cmd, "%s --bogus %s/synth0", MAKE_SYNTH, dir);
    ocr_test_expect_exit(cmd, 2, "unknown flag");
}

int main(int argc, char **argv) {
    char cmd[128];
    ocr_test_init(argc, argv);
    if (access(DETECT, X_OK) != 0 || access(EVAL, X_OK) != 0) {
        fprintf(stderr, "test_cli: %s and %s must be built first (./build.sh builds them)\n", DETECT, EVAL);
        printf("FAIL programs_built\n");
        printf("RESULT passed=0 failed=1\n");
        return 1;
    }
    if (ocr_ctx_init(&ctx, 2, 7) != OCR_OK) return 1;
    ocr_test_cli_ctx = &ctx;
    snprintf(dir, sizeof dir, "/tmp/ocr_test_cli.XXXXXX");
    if (!mkdtemp(dir)) { fprintf(stderr, "test_cli: mkdtemp failed\n"); return 1; }
    write_icdar(path_in("icdar"), 0);
    write_icdar(path_in("icdar_flat"), 1);
    write_model(path_in("model_text.safetensors"), 1);
    write_model(path_in("model_random.safetensors"), 0);
    OCR_TEST_RUN_PROGRAMS(test_help);
    OCR_TEST_RUN_PROGRAMS(test_usage_errors);
    OCR_TEST_RUN_PROGRAMS(test_missing_files);
    OCR_TEST_RUN_PROGRAMS(test_eval_files);
    OCR_TEST_RUN_PROGRAMS(test_detect_and_eval_model);
    OCR_TEST_RUN_PROGRAMS(test_detect_random_model);
    OCR_TEST_RUN_PROGRAMS(test_check_dbnet_torch);
    OCR_TEST_RUN_PROGRAMS(test_export_torchvision);
    OCR_TEST_RUN_PROGRAMS(test_make_synth);
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    if (system(cmd) != 0) fprintf(stderr, "test_cli: could not remove %s\n", dir);
    ocr_ctx_free(&ctx);
    return ocr_test_finish();
}
