/* make_synth - renders synthetic text scenes into an ICDAR 2015 folder: OUT_DIR/images/img_N.png and
   OUT_DIR/gts/gt_img_N.txt (x1,y1,...,x4,y4,transcription per word, exact float coordinates; ### for don't-care words), which detect,
   eval_dbnet, make_lmdb and train_dbnet --data icdar:OUT_DIR read like any dataset.

     make_synth [--count 200] [--size 320] [--seed 1007922] OUT_DIR

   The default seed and size give the held-out scenes train_dbnet validates on by default (its --seed 1), so
   eval_dbnet --short-side 448 on them reproduces its validation figures. Exit status: 0 done, 1 failure, 2 usage error. */
#define OCR_IMPLEMENTATION
#include "ocr_tensor.h"
#include "ocr_geom.h"
#include "ocr_data.h"
#include "ocr_synth.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <errno.h>
#include <sys/stat.h>
#include "ocr_example.h"

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

int main(int argc, char **argv) {
    int count = 200, size = 320, npos;
    int64_t seed = 1007922;
    long long i, skipped = 0;
    const char *out;
    char path[4096];
    ocr_ctx ctx;
    ocr_synth synth;
    int rc = 0;
    const ocr_ex_flag flags[] = {
        {"--count", OCR_EX_INT, &count, "scenes to render, 1 to 1000000"},
        {"--size", OCR_EX_INT, &size, "side of each scene in pixels, 32 to 4096"},
        {"--seed", OCR_EX_INT64, &seed, "scene seed, >= 0 (the default is the held-out set train_dbnet --seed 1 validates on)"},
    };
    static const char *const synopsis =
        "[flags] OUT_DIR\n  Renders synthetic scenes into OUT_DIR/images/img_<i>.png with ICDAR 2015 ground truth in\n"
        "  OUT_DIR/gts/gt_img_<i>.txt (<i> from 1).";
    npos = ocr_ex_parse(argc, argv, synopsis, flags, (int)(sizeof flags / sizeof flags[0]));
    if (count < 1 || count > 1000000) { fprintf(stderr, "make_synth: --count must be 1 to 1000000, not %d\n", count); return 2; }
    if (size < 32 || size > 4096) { fprintf(stderr, "make_synth: --size must be 32 to 4096, not %d\n", size); return 2; }
    if (seed < 0) { fprintf(stderr, "make_synth: --seed must be a non-negative integer, not %lld\n", (long long)seed); return 2; }
    if (npos != 1) {
        fprintf(stderr, "make_synth: %s (see --help)\n", npos ? "one OUT_DIR only" : "give the OUT_DIR to write");
        return 2;
    }
    out = argv[1];
    snprintf(path, sizeof path, "%s/images", out);
    if ((mkdir(out, 0755) && errno != EEXIST) || (mkdir(path, 0755) && errno != EEXIST)) {
        fprintf(stderr, "make_synth: cannot create %s: %s\n", path, strerror(errno));
        return 1;
    }
    snprintf(path, sizeof path, "%s/gts", out);
    if (mkdir(path, 0755) && errno != EEXIST) { fprintf(stderr, "make_synth: cannot create %s: %s\n", path, strerror(errno)); return 1; }
    if (ocr_ctx_init(&ctx, 1, 0) != OCR_OK) { fprintf(stderr, "make_synth: %s\n", ocr_ctx_last_error(&ctx)); return 1; }
    if (ocr_synth_init(&ctx, &synth, NULL)) { fprintf(stderr, "make_synth: %s\n", ocr_ctx_last_error(&ctx)); ocr_ctx_free(&ctx); return 1; }
    for (i = 0; i < count && !rc; i++) {
        ocr_sample s;
        memset(&s, 0, sizeof s);
        if ((rc = ocr_synth_sample(&ctx, &synth, (uint64_t)seed, i, (int)size, (int)size, &s)) == OCR_OK) {
            snprintf(path, sizeof path, "%s/images/img_%lld.png", out, i + 1);
            rc = ocr_image_save_png(&ctx, path, &s.image);
        }
        if (rc == OCR_OK) {
            snprintf(path, sizeof path, "%s/gts/gt_img_%lld.txt", out, i + 1);
            if (!write_gt(path, &s, &skipped)) rc = ocr_error(&ctx, OCR_EIO, "cannot write %s: %s", path, strerror(errno));
        }
        ocr_sample_free(&s);
        if ((i + 1) % 50 == 0 || i + 1 == count) fprintf(stderr, "make_synth: %lld/%d scenes\n", i + 1, count);
    }
    if (skipped) fprintf(stderr, "make_synth: warning: %lld polygons were not quads and are missing from the ground truth\n", skipped);
    if (rc) fprintf(stderr, "make_synth: %s\n", ocr_ctx_last_error(&ctx));
    else printf("make_synth: wrote %d scenes to %s\n", count, out);
    ocr_synth_free(&synth);
    ocr_ctx_free(&ctx);
    return rc ? 1 : 0;
}
