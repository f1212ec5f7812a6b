/* eval_dbnet - precision, recall and H-mean with the ICDAR 2015 IoU protocol of the official DBNet code
   (ocr_evaluator: IoU > 0.5 one-to-one in order, don't-care regions, invalid polygons dropped), either
     for a model on a dataset:   eval_dbnet --model FILE --data icdar:DIR|icdar:IMAGES,GTS|lmdb:PATH
     or for result files:        eval_dbnet --gt DIR --pred DIR
   and end to end (ICDAR 2015's generic protocol, ocr_rec.h's ocr_e2e_evaluator: a matched detection counts when its
   transcription matches, case-insensitively) with a recognizer or for result files that carry transcriptions:
     eval_dbnet --model DET --rec REC --data ...   (reads with ocr_pipeline, times each image)
     eval_dbnet --gt DIR --pred DIR --e2e          (lines x1,y1,...,x4,y4,transcription: examples/ocr's res files)
   End to end, the JSON adds "e2e_precision", "e2e_recall", "e2e_fscore", "e2e_correct" and with --rec
   "seconds_per_image", "det_seconds_per_image", "rec_seconds_per_image".
   In the second form every ground-truth file DIR/gt_<name>.txt (or <name>.txt) is compared with
   PRED/res_<name>.txt (or PRED/<name>.txt): one polygon per line, comma-separated coordinates, an optional
   trailing score (an odd count of numbers) ignored. A missing result file counts as no detections, with a
   warning. Recall is also given by word height (ocr_evaluator: the shorter side of the care GT's minimum-area
   rectangle, under 16 px, 16 to 32, over 32). The last line on stdout is one JSON object:
     {"precision":...,"recall":...,"hmean":...,"images":...,"gt_care":...,"det_care":...,"matched":...,
      "recall_h_lt16":...,"gt_care_h_lt16":...,"matched_h_lt16":..., the same for h16_32 and h_gt32}
   where a bin without care GT has recall null.
   Exit status: 0, 1 on a runtime error (unreadable file or directory, bad data), 2 on a usage error. */
#define OCR_IMPLEMENTATION
#include "ocr_tensor.h"
#include "ocr_nn.h"
#include "ocr_loss.h"
#include "ocr_dbnet.h"
#include "ocr_data.h"
#include "ocr_rec.h"
#include "ocr_example.h"

#include <dirent.h>
#include <sys/stat.h>
#include <time.h>

static const char *const SYNOPSIS = "--model FILE [--rec FILE] --data icdar:DIR|lmdb:PATH [options]\n       eval_dbnet --gt DIR --pred DIR [--e2e] [options]";

static const char *prog = "eval_dbnet";

/* ---------------------------------------------------------------- result files */

/* Orders file names as people do: img_2 before img_10. */
static int natural_cmp(const void *pa, const void *pb) {
    const char *a = *(const char *const *)pa, *b = *(const char *const *)pb;
    while (*a && *b) {
        if (*a >= '0' && *a <= '9' && *b >= '0' && *b <= '9') {
            const char *ea = a, *eb = b;
            while (*a == '0') a++;
            while (*b == '0') b++;
            for (ea = a; *ea >= '0' && *ea <= '9'; ea++) {}
            for (eb = b; *eb >= '0' && *eb <= '9'; eb++) {}
            if (ea - a != eb - b) return ea - a < eb - b ? -1 : 1;
            for (; a < ea; a++, b++)
                if (*a != *b) return *a < *b ? -1 : 1;
            continue;
        }
        if (*a != *b) return (unsigned char)*a < (unsigned char)*b ? -1 : 1;
        a++;
        b++;
    }
    return *a ? 1 : *b ? -1 : 0;
}

static int ends_with(const char *s, const char *suffix) {
    size_t n = strlen(s), k = strlen(suffix);
    return n >= k && strcmp(s + n - k, suffix) == 0;
}

/* The .txt files of dir, sorted naturally; NULL (with a message) when dir cannot be read. */
static char **list_txt(const char *dir, int *count) {
    DIR *d = opendir(dir);
    struct dirent *e;
    char **names = NULL;
    int n = 0, cap = 0;
    *count = 0;
    if (!d) {
        fprintf(stderr, "%s: cannot open directory '%s': %s\n", prog, dir, strerror(errno));
        return NULL;
    }
    while ((e = readdir(d)) != NULL) {
        if (e->d_name[0] == '.' || !ends_with(e->d_name, ".txt")) continue;
        if (n + 1 >= cap) {
            char **grown = (char **)realloc(names, (size_t)(cap = cap ? 2 * cap : 64) * sizeof *names);
            if (!grown) break;
            names = grown;
        }
        if (!(names[n] = strdup(e->d_name))) break;
        n++;
    }
    closedir(d);
    if (e) {
        fprintf(stderr, "%s: out of memory listing '%s'\n", prog, dir);
        while (n) free(names[--n]);
        free(names);
        return NULL;
    }
    if (!names && !(names = (char **)malloc(sizeof *names))) return NULL;
    qsort(names, (size_t)n, sizeof *names, natural_cmp);
    *count = n;
    return names;
}

static void free_names(char **names, int n) {
    while (n > 0) free(names[--n]);
    free(names);
}

static int file_exists(const char *path) {
    struct stat st;
    return stat(path, &st) == 0 && S_ISREG(st.st_mode);
}

/* ---------------------------------------------------------------- reporting */

static void print_image(const char *name, const ocr_eval_counts *c, int64_t e2e_correct) {
    /* per image as the official evaluator: no care GT gives recall 1 and precision 1 only without detections */
    double r = c->gt_care ? (double)c->matched / (double)c->gt_care : 1.0;
    double p = c->gt_care ? (c->det_care ? (double)c->matched / (double)c->det_care : 0.0) : (c->det_care ? 0.0 : 1.0);
    double h = p + r > 0 ? 2 * p * r / (p + r) : 0.0;
    printf("%-28s gt %4lld (+%lld don't care)  det %4lld (+%lld)  matched %4lld  P %.4f  R %.4f  H %.4f", name,
           (long long)c->gt_care, (long long)c->gt_dontcare, (long long)c->det_care, (long long)c->det_dontcare,
           (long long)c->matched, p, r, h);
    if (e2e_correct >= 0) printf("  read correctly %lld", (long long)e2e_correct);
    printf("\n");
}

/* e2e NULL: detection only; seconds: per image totals of the pipeline (NULL: not timed) */
static void print_summary(const ocr_evaluator *ev, const ocr_e2e_evaluator *e2e, const double *seconds) {
    static const char *const labels[OCR_EVAL_HEIGHT_BINS] = {"<16 px", "16-32 px", ">32 px"};
    ocr_eval_result r = ocr_eval_finish(ev);
    const ocr_eval_counts *t = &ev->total;
    int b;
    if (t->gt_invalid || t->det_invalid)
        fprintf(stderr, "%s: warning: dropped as not valid simple polygons (as the official evaluator): %lld GT, %lld detections\n", prog,
                (long long)t->gt_invalid, (long long)t->det_invalid);
    printf("images %lld  gt_care %lld (+%lld don't care)  det_care %lld (+%lld)  matched %lld  precision %.4f  recall %.4f  hmean %.4f\n",
           (long long)ev->n_images, (long long)t->gt_care, (long long)t->gt_dontcare, (long long)t->det_care, (long long)t->det_dontcare,
           (long long)t->matched, r.precision, r.recall, r.hmean);
    printf("recall by word height:");
    for (b = 0; b < OCR_EVAL_HEIGHT_BINS; b++) {
        printf("  %s %lld/%lld", labels[b], (long long)t->matched_by_height[b], (long long)t->gt_care_by_height[b]);
        if (t->gt_care_by_height[b]) printf(" (%.4f)", r.recall_by_height[b]);
    }
    printf("\n");
    if (e2e) {
        ocr_e2e_result er = ocr_e2e_eval_finish(e2e);
        printf("end to end: correct %lld  precision %.4f  recall %.4f  fscore %.4f\n", (long long)e2e->correct, er.precision, er.recall,
               er.fscore);
    }
    if (seconds && ev->n_images)
        printf("time per image: %.4f s (detection %.4f s, recognition %.4f s)\n", (seconds[0] + seconds[1]) / (double)ev->n_images,
               seconds[0] / (double)ev->n_images, seconds[1] / (double)ev->n_images);
    printf("{\"precision\":%.10g,\"recall\":%.10g,\"hmean\":%.10g,\"images\":%lld,\"gt_care\":%lld,\"det_care\":%lld,\"matched\":%lld",
           r.precision, r.recall, r.hmean, (long long)ev->n_images, (long long)t->gt_care, (long long)t->det_care, (long long)t->matched);
    for (b = 0; b < OCR_EVAL_HEIGHT_BINS; b++) {
        const char *name = ocr_eval_height_bin_name(b);
        if (t->gt_care_by_height[b]) printf(",\"recall_%s\":%.10g", name, r.recall_by_height[b]);
        else printf(",\"recall_%s\":null", name); /* no words of that height: no recall, rather than 0 */
        printf(",\"gt_care_%s\":%lld,\"matched_%s\":%lld", name, (long long)t->gt_care_by_height[b], name, (long long)t->matched_by_height[b]);
    }
    if (e2e) {
        ocr_e2e_result er = ocr_e2e_eval_finish(e2e);
        printf(",\"e2e_precision\":%.10g,\"e2e_recall\":%.10g,\"e2e_fscore\":%.10g,\"e2e_correct\":%lld", er.precision, er.recall,
               er.fscore, (long long)e2e->correct);
    }
    if (seconds && ev->n_images)
        printf(",\"seconds_per_image\":%.6g,\"det_seconds_per_image\":%.6g,\"rec_seconds_per_image\":%.6g",
               (seconds[0] + seconds[1]) / (double)ev->n_images, seconds[0] / (double)ev->n_images, seconds[1] / (double)ev->n_images);
    printf("}\n");
}

/* ---------------------------------------------------------------- the two modes */

/* The transcriptions of parsed result lines, for the end-to-end evaluator ("###" lines are read as don't care by the
   parser: their text is gone, and they count as read wrongly). */
static const char **texts_of(const ocr_polygon *det, int n) {
    const char **t = (const char **)calloc((size_t)n + 1, sizeof *t);
    int j;
    for (j = 0; t && j < n; j++) t[j] = det[j].text ? det[j].text : "";
    return t;
}

static int eval_files(ocr_ctx *ctx, const char *gt_dir, const char *pred_dir, int gt_format, int per_image, int e2e) {
    ocr_e2e_evaluator e2e_ev;
    ocr_evaluator *ev = &e2e_ev.det;
    char **gts, **preds, *used;
    int n_gt, n_pred, i, k, rc = 0, missing = 0, unused = 0;
    if (!(gts = list_txt(gt_dir, &n_gt))) return 1;
    if (!(preds = list_txt(pred_dir, &n_pred))) { free_names(gts, n_gt); return 1; }
    if (n_gt == 0) {
        fprintf(stderr, "%s: no ground-truth files (.txt) in '%s'\n", prog, gt_dir);
        free_names(gts, n_gt);
        free_names(preds, n_pred);
        return 1;
    }
    used = (char *)calloc((size_t)n_pred + 1, 1);
    ocr_e2e_eval_init(&e2e_ev);
    for (i = 0; i < n_gt && used && !rc; i++) {
        char gt_path[4200], cand[2][4200], key[1024];
        unsigned char *gt_text = NULL, *pred_text = NULL;
        size_t gt_size, pred_size = 0;
        ocr_polygon *gt = NULL, *det = NULL;
        const char **texts = NULL;
        int n_g = 0, n_d = 0, c;
        ocr_eval_counts counts;
        int64_t correct = -1;
        int skip = strncmp(gts[i], "gt_", 3) == 0 ? 3 : 0;
        /* gt_img_1.txt -> img_1 */
        snprintf(key, sizeof key, "%.*s", (int)strlen(gts[i]) - 4 - skip, gts[i] + skip);
        snprintf(gt_path, sizeof gt_path, "%s/%s", gt_dir, gts[i]);
        snprintf(cand[0], sizeof cand[0], "%s/res_%s.txt", pred_dir, key);
        snprintf(cand[1], sizeof cand[1], "%s/%s.txt", pred_dir, key);
        for (c = 0; c < 2 && !file_exists(cand[c]); c++) {}
        if (ocr_read_file(ctx, gt_path, OCR_LABEL_MAX_BYTES, &gt_text, &gt_size) ||
            ocr_gt_parse(ctx, gt_path, (const char *)gt_text, gt_size, gt_format, &gt, &n_g) ||
            (c < 2 && (ocr_read_file(ctx, cand[c], OCR_LABEL_MAX_BYTES, &pred_text, &pred_size) ||
                       (e2e ? ocr_gt_parse(ctx, cand[c], (const char *)pred_text, pred_size, OCR_GT_ICDAR2015, &det, &n_d)
                            : ocr_result_parse(ctx, cand[c], (const char *)pred_text, pred_size, &det, &n_d))))) {
            fprintf(stderr, "%s: %s\n", prog, ocr_ctx_last_error(ctx));
            rc = 1;
        } else if (e2e && !(texts = texts_of(det, n_d))) {
            fprintf(stderr, "%s: out of memory\n", prog);
            rc = 1;
        } else if (e2e ? ocr_e2e_eval_add_image(ctx, &e2e_ev, gt, n_g, det, texts, n_d, &counts, &correct)
                       : ocr_eval_add_image(ctx, ev, gt, n_g, det, n_d, &counts)) {
            fprintf(stderr, "%s: %s\n", prog, ocr_ctx_last_error(ctx));
            rc = 1;
        } else {
            if (c == 2) {
                fprintf(stderr, "%s: warning: no result file for '%s' (neither '%s' nor '%s'): counted as no detections\n", prog, gt_path,
                        cand[0], cand[1]);
                missing++;
            } else {
                const char *name = strrchr(cand[c], '/') + 1;
                for (k = 0; k < n_pred; k++)
                    if (strcmp(preds[k], name) == 0) used[k] = 1;
            }
            if (per_image) print_image(key, &counts, correct);
        }
        free((void *)texts);
        OCR_FREE(gt_text);
        OCR_FREE(pred_text);
        ocr_polygons_free(gt, n_g);
        ocr_polygons_free(det, n_d);
    }
    if (!used) {
        fprintf(stderr, "%s: out of memory\n", prog);
        rc = 1;
    }
    if (!rc) {
        for (k = 0; k < n_pred; k++) unused += !used[k];
        if (unused)
            fprintf(stderr, "%s: warning: %d result files in '%s' match no ground truth and were not evaluated\n", prog, unused, pred_dir);
        if (missing) fprintf(stderr, "%s: warning: %d of %d images had no result file\n", prog, missing, n_gt);
        print_summary(ev, e2e ? &e2e_ev : NULL, NULL);
    }
    free(used);
    free_names(gts, n_gt);
    free_names(preds, n_pred);
    return rc;
}

static int eval_model(ocr_ctx *ctx, const char *model_path, const char *data, int gt_format, const ocr_post_config *post,
                      int short_side, int long_side, float scale, int per_image) {
    ocr_dbnet model;
    ocr_dataset ds;
    ocr_evaluator ev;
    ocr_detections dets;
    ocr_tensor x, prob_host;
    int64_t i;
    int rc = 0, progress = isatty(fileno(stderr)) && !per_image;
    double start = ocr_monotonic_seconds();
    if (ocr_dbnet_init_from_file(ctx, &model, model_path)) {
        fprintf(stderr, "%s: cannot load the model '%s': %s\n", prog, model_path, ocr_ctx_last_error(ctx));
        return 1;
    }
    if (ocr_ex_open_dataset(ctx, data, gt_format, &ds)) {
        fprintf(stderr, "%s: cannot open the dataset '%s': %s\n", prog, data, ocr_ctx_last_error(ctx));
        ocr_dbnet_free(&model);
        return 1;
    }
    memset(&dets, 0, sizeof dets);
    memset(&x, 0, sizeof x);
    memset(&prob_host, 0, sizeof prob_host);
    ocr_eval_init(&ev);
    for (i = 0; i < ds.count && !rc; i++) {
        ocr_sample s;
        ocr_tensor prob;
        ocr_eval_counts counts;
        int in_w = 0, in_h = 0;
        ocr_tensor_free(&x); /* the last image's input */
        if (ocr_dataset_get(ctx, &ds, i, 0, &s) ||
            (scale > 0 ? ocr_infer_input_size_scaled(ctx, s.image.width, s.image.height, scale, OCR_IMAGE_MAX_SIDE, &in_w, &in_h)
                       : ocr_infer_input_size(ctx, s.image.width, s.image.height, short_side, long_side, &in_w, &in_h)) ||
            ocr_tensor_alloc(ctx, &x, "input", OCR_F32, OCR_DEVICE_CPU, ocr_shape4(1, 3, in_h, in_w)) ||
            ocr_image_network_input(ctx, &s.image, OCR_NORM_DBNET, &x) || ocr_dbnet_forward(ctx, &model, &x, 0, &prob, NULL) ||
            ocr_tensor_on_host(ctx, &prob, &prob_host, &prob) || ocr_postprocess(ctx, post, &prob, s.image.width, s.image.height, &dets) ||
            ocr_eval_add_image(ctx, &ev, s.polys, s.n_polys, dets.polys, dets.n, &counts)) {
            fprintf(stderr, "%s: sample %lld ('%s') of '%s': %s\n", prog, (long long)i, s.id, data, ocr_ctx_last_error(ctx));
            rc = 1;
        } else if (per_image) {
            print_image(s.id, &counts, -1);
        } else if (progress) {
            char fields[64];
            snprintf(fields, sizeof fields, "images");
            ocr_ex_progress(stderr, (long)i + 1, (long)ds.count, ocr_monotonic_seconds() - start, fields);
        }
        ocr_sample_free(&s);
    }
    if (progress) fprintf(stderr, "\r\033[K");
    if (!rc) print_summary(&ev, NULL, NULL);
    ocr_tensor_free(&x);
    ocr_tensor_free(&prob_host);
    ocr_detections_free(&dets);
    ocr_dataset_close(&ds);
    ocr_dbnet_free(&model);
    return rc;
}


/* End to end: ocr_pipeline reads each image; the detections and their texts are scored both ways. */
static int eval_pipeline(ocr_ctx *ctx, const char *det_path, const char *rec_path, const char *data, int gt_format,
                         const ocr_pipeline_config *pc, int per_image) {
    ocr_pipeline pipe;
    ocr_dataset ds;
    ocr_e2e_evaluator ev;
    ocr_reading reading;
    int64_t i;
    int rc = 0, progress = isatty(fileno(stderr)) && !per_image;
    double start = ocr_monotonic_seconds(), seconds[2] = {0, 0};
    if (ocr_pipeline_open(ctx, &pipe, det_path, rec_path, pc)) {
        fprintf(stderr, "%s: %s\n", prog, ocr_ctx_last_error(ctx));
        return 1;
    }
    if (ocr_ex_open_dataset(ctx, data, gt_format, &ds)) {
        fprintf(stderr, "%s: cannot open the dataset '%s': %s\n", prog, data, ocr_ctx_last_error(ctx));
        ocr_pipeline_close(&pipe);
        return 1;
    }
    memset(&reading, 0, sizeof reading);
    ocr_e2e_eval_init(&ev);
    for (i = 0; i < ds.count && !rc; i++) {
        ocr_sample s;
        ocr_eval_counts counts;
        ocr_polygon *polys = NULL;
        const char **texts = NULL;
        int64_t correct = 0;
        int j;
        if (ocr_dataset_get(ctx, &ds, i, 0, &s) || ocr_pipeline_read(ctx, &pipe, &s.image, &reading)) {
            fprintf(stderr, "%s: sample %lld ('%s') of '%s': %s\n", prog, (long long)i, s.id, data, ocr_ctx_last_error(ctx));
            rc = 1;
        } else if (!(polys = (ocr_polygon *)calloc((size_t)reading.n + 1, sizeof *polys)) ||
                   !(texts = (const char **)calloc((size_t)reading.n + 1, sizeof *texts))) {
            fprintf(stderr, "%s: out of memory\n", prog);
            rc = 1;
        } else {
            for (j = 0; j < reading.n; j++) {
                polys[j] = reading.lines[j].poly;
                texts[j] = reading.lines[j].text;
            }
            seconds[0] += reading.det_seconds;
            seconds[1] += reading.rec_seconds;
            if (ocr_e2e_eval_add_image(ctx, &ev, s.polys, s.n_polys, polys, texts, reading.n, &counts, &correct)) {
                fprintf(stderr, "%s: sample %lld ('%s'): %s\n", prog, (long long)i, s.id, ocr_ctx_last_error(ctx));
                rc = 1;
            } else if (per_image) {
                print_image(s.id, &counts, correct);
            } else if (progress) {
                ocr_ex_progress(stderr, (long)i + 1, (long)ds.count, ocr_monotonic_seconds() - start, "images");
            }
        }
        free(polys);
        free((void *)texts);
        ocr_sample_free(&s);
    }
    if (progress) fprintf(stderr, "\r\033[K");
    if (!rc) print_summary(&ev.det, &ev, seconds);
    ocr_reading_free(&reading);
    ocr_dataset_close(&ds);
    ocr_pipeline_close(&pipe);
    return rc;
}

int main(int argc, char **argv) {
    const char *model_path = NULL, *data = NULL, *gt_dir = NULL, *pred_dir = NULL, *gt_format_name = "icdar2015", *amp_name = "fp32";
    const char *rec_path = NULL, *device = "cpu";
    int per_image = 0, short_side = 736, long_side = 0, threads = 0, gt_format, npos, rc, amp = OCR_AMP_OFF, e2e = 0, beam = 0;
    float scale = 0.0f;
    ocr_ex_post_flags pf = ocr_ex_post_flags_default();
    float rotate_below = ocr_pipeline_config_default().rotate_below, min_confidence = ocr_pipeline_config_default().min_confidence;
    float margin = ocr_pipeline_config_default().crop.margin;
    ocr_ex_flag flags[] = {
        {"--model", OCR_EX_STRING, &model_path, "checkpoint to evaluate on --data"},
        {"--data", OCR_EX_STRING, &data, "icdar:DIR (images in DIR/images or DIR; ground truth in DIR/gts, DIR/gt or beside them), icdar:IMAGES,GTS or lmdb:PATH"},
        {"--gt", OCR_EX_STRING, &gt_dir, "directory of ground-truth files gt_<name>.txt or <name>.txt (with --pred)"},
        {"--pred", OCR_EX_STRING, &pred_dir, "directory of result files res_<name>.txt: x1,y1,...,xn,yn[,score] per line"},
        {"--e2e", OCR_EX_BOOL, &e2e, "with --pred: result lines are x1,y1,...,x4,y4,transcription, scored end to end as well"},
        {"--rec", OCR_EX_STRING, &rec_path, "with --model: a recognizer; read each image with both (ocr_pipeline) and score end to end"},
        {"--scale", OCR_EX_FLOAT, &scale, "model: scale images by this (sides rounded up to multiples of 32) instead of --short-side (0: off)"},
        {"--rotate-below", OCR_EX_FLOAT, &rotate_below, "with --rec: crops read with a lower confidence are also read turned 180 degrees"},
        {"--min-confidence", OCR_EX_FLOAT, &min_confidence, "with --rec: lines read with a lower confidence are dropped"},
        {"--beam", OCR_EX_INT, &beam, "with --rec: CTC prefix beam width (0: best path)"},
        {"--margin", OCR_EX_FLOAT, &margin, "with --rec: each detection is cropped with this fraction of its height around it"},
        {"--gt-format", OCR_EX_STRING, &gt_format_name, "ground truth lines: icdar2015 (4 points, text) or polygon (n points, text)"},
        {"--per-image", OCR_EX_BOOL, &per_image, "print the figures of every image"},
        OCR_EX_POST_FLAGS(pf, "model: "),
        {"--short-side", OCR_EX_INT, &short_side, "model: resize so the short side is this (rounded up to a multiple of 32)"},
        {"--long-side", OCR_EX_INT, &long_side, "model: resize so the long side is this instead (0: use --short-side)"},
        {"--threads", OCR_EX_INT, &threads, "CPU threads; 0: all cores"},
        {"--amp", OCR_EX_STRING, &amp_name, "model: precision of the convolutions, fp32, bf16 or fp16 (ocr_nn.h's mixed-precision rules)"},
        {"--device", OCR_EX_STRING, &device, "model: cpu or cuda (the CUDA build, build/cuda/eval_dbnet; with --rec both models)"},
    };
    const int n_flags = (int)(sizeof flags / sizeof flags[0]);
    const char *usage_error = NULL;
    ocr_ctx ctx;
    ocr_post_config post;

    prog = argv[0];
    npos = ocr_ex_parse(argc, argv, SYNOPSIS, flags, n_flags);
    gt_format = strcmp(gt_format_name, "icdar2015") == 0 ? OCR_GT_ICDAR2015 : strcmp(gt_format_name, "polygon") == 0 ? OCR_GT_POLYGON : -1;
    if (npos) usage_error = "unexpected argument";
    else if (gt_format < 0) usage_error = "--gt-format must be icdar2015 or polygon";
    else if (!ocr_amp_parse(amp_name, &amp)) usage_error = "--amp must be fp32, bf16 or fp16";
    else if (!((model_path && data && !gt_dir && !pred_dir) || (gt_dir && pred_dir && !model_path && !data)))
        usage_error = "give either --model and --data, or --gt and --pred";
    else if ((rec_path && !model_path) || (e2e && !pred_dir))
        usage_error = "--rec goes with --model, --e2e with --pred";
    else if (!(scale == 0 || (scale >= 0.1f && scale <= 8)) || !(rotate_below >= 0 && rotate_below <= 1) ||
             !(min_confidence >= 0 && min_confidence <= 1) || beam < 0 || !(margin >= 0 && margin < 2))
        usage_error = "out of range: --scale 0 or in [0.1, 8], --rotate-below and --min-confidence in [0, 1], --beam >= 0, --margin in [0, 2)";
    else if (data && !ocr_ex_dataset_spec_ok(data))
        usage_error = "--data must be icdar:DIR, icdar:IMAGES,GTS or lmdb:PATH";
    else if ((usage_error = ocr_ex_post_config(&pf, &post)) != NULL)
        ;
    else if (short_side < 1 || short_side > OCR_IMAGE_MAX_SIDE || long_side < 0 || long_side > OCR_IMAGE_MAX_SIDE || threads < 0)
        usage_error = "out of range: --short-side in [1, 16384], --long-side in [0, 16384], --threads >= 0";
    if (usage_error) {
        fprintf(stderr, "%s: %s%s%s\n", prog, usage_error, npos ? ": " : "", npos ? argv[1] : "");
        ocr_ex_usage(stderr, prog, SYNOPSIS, flags, n_flags);
        return 2;
    }
    if (ocr_ctx_init(&ctx, threads, 0) != OCR_OK) {
        fprintf(stderr, "%s: %s\n", prog, ocr_ctx_last_error(&ctx));
        return 1;
    }
    ctx.amp = amp;
    if ((rc = ocr_ex_set_device(&ctx, prog, device)) != 0) {
        ocr_ctx_free(&ctx);
        return rc;
    }
    if (gt_dir) {
        rc = eval_files(&ctx, gt_dir, pred_dir, gt_format, per_image, e2e);
    } else {
        if (rec_path) {
            ocr_pipeline_config pc = ocr_pipeline_config_default();
            pc.post = post;
            if (scale > 0) pc.det_scale = scale;
            else if (long_side > 0) pc.det_long_side = long_side;
            else pc.det_short_side = short_side;
            pc.rotate_below = rotate_below;
            pc.min_confidence = min_confidence;
            pc.beam_width = beam;
            pc.crop.margin = margin;
            rc = eval_pipeline(&ctx, model_path, rec_path, data, gt_format, &pc, per_image);
        } else {
            rc = eval_model(&ctx, model_path, data, gt_format, &post, short_side, long_side, scale, per_image);
        }
    }
    ocr_ctx_free(&ctx);
    return rc;
}
