/* ICDAR 2015 evaluation against tools/dbnet_eval_ref.py (the official DetectionIoUEvaluator rules on shapely),
   run live on 600 seeded random images with don't-care, invalid (bowtie, repeated, collinear, too short),
   overlapping, non-convex and duplicated (greedy-order) polygons: identical validity, intersection areas to
   1e-7, identical per-image counts and global P, R, H, and the care GT's heights (shapely's minimum rotated
   rectangle, to 1e-4) and counts by height bin. Plus hand-computed cases (recall by height among them) and bad
   inputs. The intersection and validity routines' own hand-computed cases are in tests/test_geom.c. */
#define _POSIX_C_SOURCE 200809L
#define OCR_IMPLEMENTATION
#include "ocr_tensor.h"
#include "ocr_nn.h"
#include "ocr_loss.h"
#include "ocr_dbnet.h"
#include "ocr_test.h"
#include <stdlib.h>
#include <unistd.h>

#define N_IMAGES 600
#define MAX_POLYS 8
#define MAX_PTS 16

typedef struct { int n_gt, n_det; ocr_polygon gt[MAX_POLYS], det[MAX_POLYS]; ocr_point pts[2 * MAX_POLYS][MAX_PTS]; } timage;

static timage images[N_IMAGES];

static float uni(ocr_rng *r, float lo, float hi) { return lo + (hi - lo) * ocr_rng_uniform(r); }

/* One polygon into pts: a rotated rectangle, an integer box, a non-convex star, or an invalid shape. */
static int make_shape(ocr_rng *r, ocr_point *pts) {
    int kind = (int)ocr_rng_below(r, 10), n = 4, k;
    float cx = uni(r, 20, 180), cy = uni(r, 20, 180), w = uni(r, 4, 60), h = uni(r, 3, 25), a = uni(r, 0, 3.14159f);
    float ca = cosf(a), sa = sinf(a);
    if (kind <= 3) { /* rotated rectangle */
        static const float sx[4] = {-1, 1, 1, -1}, sy[4] = {-1, -1, 1, 1};
        for (k = 0; k < 4; k++) {
            pts[k].x = cx + sx[k] * w / 2 * ca - sy[k] * h / 2 * sa;
            pts[k].y = cy + sx[k] * w / 2 * sa + sy[k] * h / 2 * ca;
        }
    } else if (kind <= 5) { /* ICDAR-style integer box */
        float x0 = floorf(cx), y0 = floorf(cy), x1 = x0 + floorf(w), y1 = y0 + floorf(h);
        pts[0].x = x0; pts[0].y = y0; pts[1].x = x1; pts[1].y = y0; pts[2].x = x1; pts[2].y = y1; pts[3].x = x0; pts[3].y = y1;
    } else if (kind <= 7) { /* star-shaped, non-convex, 5..12 vertices */
        n = 5 + (int)ocr_rng_below(r, 8);
        for (k = 0; k < n; k++) {
            float t = 6.2831853f * ((float)k + uni(r, 0, 0.8f)) / (float)n, rad = uni(r, 0.3f, 1.0f) * w / 2 + 2;
            pts[k].x = cx + rad * cosf(t);
            pts[k].y = cy + rad * sinf(t) * h / w * 2;
        }
    } else { /* invalid or degenerate */
        int bad = (int)ocr_rng_below(r, 5);
        pts[0].x = cx; pts[0].y = cy; pts[1].x = cx + w; pts[1].y = cy; pts[2].x = cx + w; pts[2].y = cy + h; pts[3].x = cx; pts[3].y = cy + h;
        if (bad == 0) { ocr_point t = pts[1]; pts[1] = pts[2]; pts[2] = t; }       /* bowtie */
        else if (bad == 1) { pts[2] = pts[1]; n = 4; }                               /* a repeated point: a valid triangle */
        else if (bad == 2) { pts[1].x = cx + w / 2; pts[1].y = cy + h / 2; pts[2].x = cx + w; pts[2].y = cy + h; n = 3; } /* collinear */
        else if (bad == 3) n = 2;                                                    /* too few points */
        else { pts[4] = pts[1]; pts[4].y += h / 2; pts[1].x = cx + w / 2; pts[1].y = cy + h; n = 5; } /* a vertex on an edge */
    }
    return n;
}

static void make_images(ocr_rng *r) {
    int i, k, j;
    for (i = 0; i < N_IMAGES; i++) {
        timage *im = &images[i];
        im->n_gt = (int)ocr_rng_below(r, 7);
        im->n_det = (int)ocr_rng_below(r, MAX_POLYS);
        for (k = 0; k < im->n_gt; k++) {
            im->gt[k].points = im->pts[k];
            im->gt[k].n_points = make_shape(r, im->pts[k]);
            im->gt[k].ignore = ocr_rng_below(r, 4) == 0;
        }
        for (k = 0; k < im->n_det; k++) {
            ocr_point *p = im->pts[MAX_POLYS + k];
            int how = (int)ocr_rng_below(r, 6);
            im->det[k].points = p;
            if (how <= 2 && im->n_gt) { /* a jittered copy of a GT: IoU anywhere around the 0.5 threshold */
                const ocr_polygon *g = &im->gt[ocr_rng_below(r, (uint32_t)im->n_gt)];
                float dx = uni(r, -8, 8), dy = uni(r, -4, 4), s = uni(r, 0.6f, 1.5f), gx = 0, gy = 0;
                for (j = 0; j < g->n_points; j++) { gx += g->points[j].x / (float)g->n_points; gy += g->points[j].y / (float)g->n_points; }
                for (j = 0; j < g->n_points; j++) {
                    p[j].x = gx + (g->points[j].x - gx) * s + dx + uni(r, -1, 1);
                    p[j].y = gy + (g->points[j].y - gy) * s + dy + uni(r, -1, 1);
                }
                im->det[k].n_points = g->n_points;
            } else if (how == 3 && k > 0) { /* a duplicate of an earlier detection: only the first may match */
                memcpy(p, im->det[k - 1].points, sizeof(ocr_point) * (size_t)im->det[k - 1].n_points);
                im->det[k].n_points = im->det[k - 1].n_points;
            } else {
                im->det[k].n_points = make_shape(r, p);
            }
        }
        /* a third of the images twice and a third 3.5 times as large (IoUs and validity unchanged): words in every
           height bin */
        if (i % 3)
            for (k = 0; k < 2 * MAX_POLYS; k++)
                for (j = 0; j < MAX_PTS; j++) {
                    im->pts[k][j].x *= i % 3 == 1 ? 2.0f : 3.5f;
                    im->pts[k][j].y *= i % 3 == 1 ? 2.0f : 3.5f;
                }
    }
}

static void write_points(FILE *f, const ocr_polygon *p) {
    int k;
    fprintf(f, " %d", p->n_points);
    for (k = 0; k < p->n_points; k++) fprintf(f, " %.17g %.17g", (double)p->points[k].x, (double)p->points[k].y); /* exact */
    fputc('\n', f);
}

static char *ref_text;

static int run_reference(void) {
    static int state;
    ocr_ctx ctx;
    char dir[] = "/tmp/ocr_eval_XXXXXX", in[600], out[600], cmd[2048];
    unsigned char *text = NULL;
    size_t size = 0;
    FILE *f;
    int i, k, status;
    if (state) return state > 0;
    state = -1;
    if (ocr_ctx_init(&ctx, 1, 77) != OCR_OK) return 0;
    make_images(&ctx.rng);
    if (!mkdtemp(dir)) { ocr_ctx_free(&ctx); return 0; }
    snprintf(in, sizeof in, "%s/cases.txt", dir);
    snprintf(out, sizeof out, "%s/ref.txt", dir);
    if (!(f = fopen(in, "w"))) { ocr_ctx_free(&ctx); return 0; }
    for (i = 0; i < N_IMAGES; i++) {
        fprintf(f, "image %d %d\n", images[i].n_gt, images[i].n_det);
        for (k = 0; k < images[i].n_gt; k++) { fprintf(f, "g %d", images[i].gt[k].ignore); write_points(f, &images[i].gt[k]); }
        for (k = 0; k < images[i].n_det; k++) { fprintf(f, "d"); write_points(f, &images[i].det[k]); }
    }
    fclose(f);
    snprintf(cmd, sizeof cmd, "/usr/bin/python3 tools/dbnet_eval_ref.py %s %s > %s/log.txt 2>&1", in, out, dir);
    status = system(cmd);
    if (status != 0 || ocr_read_file(&ctx, out, (size_t)1 << 28, &text, &size) != OCR_OK) {
        char log[700];
        unsigned char *msg = NULL;
        size_t msg_size = 0;
        snprintf(log, sizeof log, "%s/log.txt", dir);
        if (ocr_read_file(&ctx, log, 1 << 20, &msg, &msg_size) == OCR_OK)
            fprintf(stderr, "  reference tools/dbnet_eval_ref.py failed (status %d):\n%.*s\n", status, (int)msg_size, (char *)msg);
        free(msg);
    } else {
        ref_text = (char *)realloc(text, size + 1);
        ref_text[size] = 0;
        state = 1;
    }
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    if (system(cmd) != 0) fprintf(stderr, "  could not remove %s\n", dir);
    ocr_ctx_free(&ctx);
    return state > 0;
}

static void test_eval_matches_shapely(void) {
    ocr_ctx ctx;
    ocr_evaluator ev;
    ocr_eval_result res;
    char *line, *save = NULL;
    int i, k, n_valid_checked = 0, n_inter = 0, invalid = 0, dontcare_det = 0, matched = 0, n_ties = 0;
    int care_bins[3] = {0, 0, 0}, matched_bins[3] = {0, 0, 0};  /* the reference's, over the images without a tie */
    int64_t all_care[3] = {0, 0, 0}, all_matched[3] = {0, 0, 0}; /* ours, per image, over all */
    double worst_inter = 0, worst_height = 0, p = -1, r = -1, h = -1;
    if (!run_reference()) { OCR_CHECK_MSG(0, "no reference"); return; }
    OCR_CHECK_OK(&ctx, ocr_ctx_init(&ctx, 1, 1));
    ocr_eval_init(&ev);
    line = strtok_r(ref_text, "\n", &save);
    for (i = 0; i < N_IMAGES && line; i++) {
        timage *im = &images[i];
        ocr_eval_counts c;
        int rg, rd, rm, rb[6], vg[MAX_POLYS], vd[MAX_POLYS], ng = 0, nd = 0, b, ambiguous;
        memset(&c, 0, sizeof c);
        OCR_CHECK_OK(&ctx, ocr_eval_add_image(&ctx, &ev, im->gt, im->n_gt, im->det, im->n_det, &c));
        if (sscanf(line, "image %d %d %d %d %d %d %d %d %d", &rg, &rd, &rm, &rb[0], &rb[1], &rb[2], &rb[3], &rb[4], &rb[5]) != 9) {
            OCR_CHECK_MSG(0, "bad reference line '%s'", line);
            break;
        }
        OCR_CHECK_MSG(c.gt_care == rg && c.det_care == rd && c.matched == rm,
                      "image %d: gt_care %lld det_care %lld matched %lld, reference %d %d %d", i, (long long)c.gt_care,
                      (long long)c.det_care, (long long)c.matched, rg, rd, rm);

        invalid += (int)(c.gt_invalid + c.det_invalid);
        dontcare_det += (int)c.det_dontcare;
        matched += (int)c.matched;
        for (k = 0; k < im->n_gt + im->n_det; k++) {
            const ocr_polygon *pg = k < im->n_gt ? &im->gt[k] : &im->det[k - im->n_gt];
            int v = -1, ours = ocr_poly_is_simple(pg->points, pg->n_points);
            line = strtok_r(NULL, "\n", &save);
            if (!line || sscanf(line, "valid %d", &v) != 1) { OCR_CHECK_MSG(0, "image %d: missing validity", i); break; }
            OCR_CHECK_MSG(ours == v, "image %d polygon %d (%d points): valid %d, shapely %d", i, k, pg->n_points, ours, v);
            if (v && k < im->n_gt) vg[ng++] = k;
            if (v && k >= im->n_gt) vd[nd++] = k - im->n_gt;
            n_valid_checked++;
        }
        for (k = 0; k < ng * nd; k++) {
            int gi, dj;
            double ref_area, area = -1;
            line = strtok_r(NULL, "\n", &save);
            if (!line || sscanf(line, "inter %d %d %lf", &gi, &dj, &ref_area) != 3) { OCR_CHECK_MSG(0, "image %d: missing intersection", i); break; }
            OCR_CHECK_OK(&ctx, ocr_poly_intersection_area(&ctx, im->det[vd[dj]].points, im->det[vd[dj]].n_points, im->gt[vg[gi]].points,
                                                          im->gt[vg[gi]].n_points, &area));
            OCR_CHECK_MSG(fabs(area - ref_area) <= 1e-7 * (1 + ref_area), "image %d gt %d det %d: intersection %.12g, shapely %.12g", i, vg[gi],
                          vd[dj], area, ref_area);
            if (fabs(area - ref_area) > worst_inter) worst_inter = fabs(area - ref_area);
            n_inter += ref_area > 0;
        }
        /* the care GT's heights: shapely's minimum_rotated_rectangle (double); where two rectangles have the least area
           (right triangles) the height is either, and that image's bins are not compared */
        for (k = 0, ambiguous = 0; k < rg; k++) {
            int gi, tie = 0;
            double ref_h;
            float ours = -1;
            ocr_point quad[4];
            line = strtok_r(NULL, "\n", &save);
            if (!line || sscanf(line, "height %d %lf %d", &gi, &ref_h, &tie) != 3 || gi < 0 || gi >= ng) {
                OCR_CHECK_MSG(0, "image %d: missing height", i);
                break;
            }
            ambiguous |= tie;
            n_ties += tie;
            if (tie) continue;
            OCR_CHECK_OK(&ctx, ocr_min_area_box(&ctx, im->gt[vg[gi]].points, im->gt[vg[gi]].n_points, quad, &ours));
            OCR_CHECK_MSG(fabs(ours - ref_h) <= 1e-4 * (1 + ref_h), "image %d gt %d: height %.9g, shapely %.9g", i, vg[gi], ours, ref_h);
            if (fabs(ours - ref_h) > worst_height) worst_height = fabs(ours - ref_h);
        }
        for (b = 0; b < OCR_EVAL_HEIGHT_BINS && !ambiguous; b++) {
            OCR_CHECK_MSG(c.gt_care_by_height[b] == rb[b] && c.matched_by_height[b] == rb[3 + b],
                          "image %d height bin %d: %lld care GT, %lld matched; reference %d, %d", i, b, (long long)c.gt_care_by_height[b],
                          (long long)c.matched_by_height[b], rb[b], rb[3 + b]);
            care_bins[b] += rb[b];
            matched_bins[b] += rb[3 + b];
        }
        for (b = 0; b < OCR_EVAL_HEIGHT_BINS; b++) { /* every image's, to check the evaluator's sums */
            all_care[b] += c.gt_care_by_height[b];
            all_matched[b] += c.matched_by_height[b];
        }
        line = strtok_r(NULL, "\n", &save);
    }
    OCR_CHECK_MSG(line && sscanf(line, "total %lf %lf %lf", &p, &r, &h) == 3, "missing totals");
    res = ocr_eval_finish(&ev);
    OCR_CHECK_MSG(res.precision == p && res.recall == r && res.hmean == h, "P %.17g R %.17g H %.17g, reference %.17g %.17g %.17g", res.precision,
                  res.recall, res.hmean, p, r, h);
    for (k = 0; k < OCR_EVAL_HEIGHT_BINS; k++)
        OCR_CHECK_MSG(ev.total.gt_care_by_height[k] == all_care[k] && ev.total.matched_by_height[k] == all_matched[k] &&
                          res.recall_by_height[k] == (all_care[k] ? (double)all_matched[k] / (double)all_care[k] : 0.0),
                      "height bin %d: %lld of %lld, recall %.17g; the images' sum %lld of %lld", k, (long long)ev.total.matched_by_height[k],
                      (long long)ev.total.gt_care_by_height[k], res.recall_by_height[k], (long long)all_matched[k], (long long)all_care[k]);
    printf("     %d images, %d polygons (%d invalid), %d overlapping pairs (worst area difference %.2g), %d don't-care detections, "
           "%d matches; P %.4f R %.4f H %.4f\n     care GT by height (<16/16-32/>32, images without a tie) %d/%d/%d, matched %d/%d/%d; "
           "worst height difference %.2g, %d ties left out\n",
           N_IMAGES, n_valid_checked, invalid, n_inter, worst_inter, dontcare_det, matched, res.precision, res.recall, res.hmean, care_bins[0],
           care_bins[1], care_bins[2], matched_bins[0], matched_bins[1], matched_bins[2], worst_height, n_ties);
    OCR_CHECK(invalid > 50 && dontcare_det > 20 && matched > 100 && n_inter > 500); /* the cases exercise every rule */
    for (k = 0; k < OCR_EVAL_HEIGHT_BINS; k++) OCR_CHECK_MSG(care_bins[k] > 50 && matched_bins[k] > 10, "height bin %d barely exercised", k);
    ocr_ctx_free(&ctx);
}

static ocr_polygon box(ocr_point *pts, float x0, float y0, float x1, float y1, int ignore) {
    ocr_polygon p;
    pts[0].x = x0; pts[0].y = y0; pts[1].x = x1; pts[1].y = y0; pts[2].x = x1; pts[2].y = y1; pts[3].x = x0; pts[3].y = y1;
    memset(&p, 0, sizeof p);
    p.points = pts;
    p.n_points = 4;
    p.ignore = ignore;
    return p;
}

static void test_hand_cases(void) {
    ocr_ctx ctx;
    ocr_evaluator ev;
    ocr_eval_counts c;
    ocr_eval_result res;
    ocr_point pg[4], pd[3][4], bow[4] = {{0, 0}, {10, 10}, {10, 0}, {0, 10}};
    ocr_polygon gt, det[3];
    OCR_CHECK_OK(&ctx, ocr_ctx_init(&ctx, 1, 1));
    /* greedy order: IoU 0.6 (first) is matched, the later IoU 0.8 is not */
    ocr_eval_init(&ev);
    gt = box(pg, 0, 0, 10, 10, 0);
    det[0] = box(pd[0], 0, 0, 10, 6, 0);
    det[1] = box(pd[1], 0, 0, 10, 8, 0);
    OCR_CHECK_OK(&ctx, ocr_eval_add_image(&ctx, &ev, &gt, 1, det, 2, &c));
    OCR_CHECK(c.matched == 1 && c.gt_care == 1 && c.det_care == 2);
    res = ocr_eval_finish(&ev);
    OCR_CHECK(res.precision == 0.5 && res.recall == 1.0 && fabs(res.hmean - 2.0 / 3.0) < 1e-15);
    /* IoU exactly 0.5 is not a match (strict) */
    det[0] = box(pd[0], 0, 0, 10, 5, 0);
    OCR_CHECK_OK(&ctx, ocr_eval_add_image(&ctx, &ev, &gt, 1, det, 1, &c));
    OCR_CHECK(c.matched == 0);
    /* don't care: a detection inside a ### region by 64/100 is ignored, one covering it by 36/100 is not */
    gt = box(pg, 0, 0, 10, 10, 1);
    det[0] = box(pd[0], 2, 2, 12, 12, 0);
    det[1] = box(pd[1], 4, 4, 14, 14, 0);
    OCR_CHECK_OK(&ctx, ocr_eval_add_image(&ctx, &ev, &gt, 1, det, 2, &c));
    OCR_CHECK(c.gt_care == 0 && c.gt_dontcare == 1 && c.det_dontcare == 1 && c.det_care == 1 && c.matched == 0);
    /* a bowtie detection and a 2-point GT are dropped */
    det[0].points = bow;
    det[0].n_points = 4;
    gt = box(pg, 0, 0, 10, 10, 0);
    gt.n_points = 2;
    OCR_CHECK_OK(&ctx, ocr_eval_add_image(&ctx, &ev, &gt, 1, det, 1, &c));
    OCR_CHECK(c.det_invalid == 1 && c.gt_invalid == 1 && c.det_care == 0 && c.gt_care == 0);
    /* totals: matched 1, care GT 2, care detections 2 + 1 + 1 */
    res = ocr_eval_finish(&ev);
    OCR_CHECK(ev.n_images == 4 && ev.total.matched == 1 && ev.total.gt_care == 2 && ev.total.det_care == 4);
    OCR_CHECK(res.precision == 0.25 && res.recall == 0.5);
    /* empty evaluation: all zero, no division by zero */
    ocr_eval_init(&ev);
    res = ocr_eval_finish(&ev);
    OCR_CHECK(res.precision == 0 && res.recall == 0 && res.hmean == 0);
    ocr_ctx_free(&ctx);
}

/* Recall by word height, by hand: heights 15, 16, 32 and 33 (axis-aligned boxes 100 wide), a rectangle rotated 45
   degrees of sides 20 sqrt 2 and 10 sqrt 2 (height 14.14 whatever its width along the axes, 30), a parallelogram
   (slanted text: height is its distance between the long sides, 20, not its side of 22.4), and a don't-care and an
   invalid GT that count nowhere. Detected: the 16 and 33 boxes and the rotated rectangle. */
static void test_recall_by_height(void) {
    ocr_ctx ctx;
    ocr_evaluator ev;
    ocr_eval_counts c;
    ocr_eval_result res;
    ocr_point pg[8][4], pd[3][4], rot[4] = {{20, 0}, {40, 20}, {30, 30}, {10, 10}}, slant[4] = {{10, 100}, {110, 100}, {100, 120}, {0, 120}};
    ocr_polygon gt[8], det[3];
    static const int heights[4] = {15, 16, 32, 33};
    int k;
    OCR_CHECK_OK(&ctx, ocr_ctx_init(&ctx, 1, 1));
    for (k = 0; k < 4; k++) gt[k] = box(pg[k], 0, 200.0f + 50 * k, 100, 200.0f + 50 * k + heights[k], 0);
    gt[4] = box(pg[4], 0, 0, 1, 1, 0);
    gt[4].points = rot;
    gt[5] = box(pg[5], 0, 0, 1, 1, 0);
    gt[5].points = slant;
    gt[6] = box(pg[6], 200, 0, 300, 5, 1);       /* don't care */
    gt[7] = box(pg[7], 200, 100, 300, 150, 0);
    gt[7].n_points = 2;                          /* invalid */
    det[0] = box(pd[0], 0, 250, 100, 266, 0);    /* the 16 box */
    det[1] = box(pd[1], 0, 350, 100, 383, 0);    /* the 33 box */
    det[2] = box(pd[2], 0, 0, 1, 1, 0);
    det[2].points = rot;
    ocr_eval_init(&ev);
    OCR_CHECK_OK(&ctx, ocr_eval_add_image(&ctx, &ev, gt, 8, det, 3, &c));
    OCR_CHECK_MSG(c.gt_care == 6 && c.matched == 3, "gt_care %lld matched %lld", (long long)c.gt_care, (long long)c.matched);
    /* < 16: 15 and the rotated one (found); 16-32: 16 (found), 32 and the slanted one (20); > 32: 33 (found) */
    OCR_CHECK_MSG(c.gt_care_by_height[OCR_EVAL_H_LT16] == 2 && c.gt_care_by_height[OCR_EVAL_H_16_32] == 3 && c.gt_care_by_height[OCR_EVAL_H_GT32] == 1,
                  "care by height %lld/%lld/%lld", (long long)c.gt_care_by_height[0], (long long)c.gt_care_by_height[1],
                  (long long)c.gt_care_by_height[2]);
    OCR_CHECK(c.matched_by_height[OCR_EVAL_H_LT16] == 1 && c.matched_by_height[OCR_EVAL_H_16_32] == 1 && c.matched_by_height[OCR_EVAL_H_GT32] == 1);
    /* a second image, only the 15 box, found: the sums and the recalls */
    det[0] = box(pd[0], 0, 200, 100, 215, 0);
    OCR_CHECK_OK(&ctx, ocr_eval_add_image(&ctx, &ev, gt, 1, det, 1, &c));
    OCR_CHECK(c.gt_care_by_height[OCR_EVAL_H_LT16] == 1 && c.matched_by_height[OCR_EVAL_H_LT16] == 1 && c.gt_care_by_height[OCR_EVAL_H_16_32] == 0);
    res = ocr_eval_finish(&ev);
    OCR_CHECK(ev.total.gt_care_by_height[OCR_EVAL_H_LT16] == 3 && ev.total.matched_by_height[OCR_EVAL_H_LT16] == 2);
    OCR_CHECK_MSG(res.recall_by_height[OCR_EVAL_H_LT16] == 2.0 / 3.0 && res.recall_by_height[OCR_EVAL_H_16_32] == 1.0 / 3.0 &&
                      res.recall_by_height[OCR_EVAL_H_GT32] == 1.0 && res.recall == 4.0 / 7.0,
                  "recall by height %.17g %.17g %.17g, recall %.17g", res.recall_by_height[0], res.recall_by_height[1], res.recall_by_height[2],
                  res.recall);
    /* the edges, and a bin without care GT gives 0 */
    OCR_CHECK(ocr_eval_height_bin(15.999) == OCR_EVAL_H_LT16 && ocr_eval_height_bin(16) == OCR_EVAL_H_16_32 && ocr_eval_height_bin(32) == OCR_EVAL_H_16_32 &&
              ocr_eval_height_bin(32.001) == OCR_EVAL_H_GT32 && ocr_eval_height_bin(0) == OCR_EVAL_H_LT16);
    OCR_CHECK(!strcmp(ocr_eval_height_bin_name(0), "h_lt16") && !strcmp(ocr_eval_height_bin_name(1), "h16_32") &&
              !strcmp(ocr_eval_height_bin_name(2), "h_gt32") && ocr_eval_height_bin_name(3) == NULL && ocr_eval_height_bin_name(-1) == NULL);
    ocr_eval_init(&ev);
    OCR_CHECK_OK(&ctx, ocr_eval_add_image(&ctx, &ev, gt, 1, det, 1, &c));
    res = ocr_eval_finish(&ev);
    OCR_CHECK(res.recall_by_height[OCR_EVAL_H_LT16] == 1.0 && res.recall_by_height[OCR_EVAL_H_16_32] == 0.0 && res.recall_by_height[OCR_EVAL_H_GT32] == 0.0);
    ocr_ctx_free(&ctx);
}

/* A polygon of 25,000 points (a regular polygon approximating a circle, r = 100) against a square inside it, itself
   and a non-simple copy: the areas and IoUs are known in closed form. The validity check compared every pair of edges
   and the intersection cut every edge against every edge (12 s for one image); now both look only at edges whose
   ranges overlap. No time is asserted: a quadratic path shows as a test that takes minutes. */
static void test_large_polygon(void) {
    enum { N = 25000 };
    const double r = 100.0, cx = 300.0, cy = 200.0, pi = 3.14159265358979323846;
    ocr_ctx ctx;
    ocr_evaluator ev;
    ocr_eval_counts c;
    ocr_point *circle = (ocr_point *)malloc(N * sizeof(ocr_point)), *bad = (ocr_point *)malloc(N * sizeof(ocr_point)), sq[4], half[4];
    ocr_polygon gt, det[2];
    double a_circle, area, want, s = 60.0;
    int i;
    OCR_CHECK_OK(&ctx, ocr_ctx_init(&ctx, 1, 1));
    /* vertices at integer-friendly angles; float coordinates, so the area is that of the float polygon */
    for (i = 0; i < N; i++) {
        circle[i].x = (float)(cx + r * cos(2 * pi * i / N));
        circle[i].y = (float)(cy + r * sin(2 * pi * i / N));
    }
    a_circle = fabs(ocr_poly_area(circle, N));
    OCR_CHECK(fabs(a_circle - 0.5 * N * r * r * sin(2 * pi / N)) < 1e-3 && fabs(a_circle - pi * r * r) < 0.01);
    OCR_CHECK(ocr_poly_is_simple(circle, N));
    /* a square of side 2s inside: the intersection is the square */
    sq[0].x = (float)(cx - s); sq[0].y = (float)(cy - s); sq[1].x = (float)(cx + s); sq[1].y = (float)(cy - s);
    sq[2].x = (float)(cx + s); sq[2].y = (float)(cy + s); sq[3].x = (float)(cx - s); sq[3].y = (float)(cy + s);
    OCR_CHECK_OK(&ctx, ocr_poly_intersection_area(&ctx, circle, N, sq, 4, &area));
    OCR_CHECK_MSG(fabs(area - 4 * s * s) < 1e-6, "area %.9g, want %.9g", area, 4 * s * s);
    /* the right half (x >= cx) of a box taller and wider than the circle: half of the polygon, by symmetry */
    half[0].x = (float)cx; half[0].y = (float)(cy - 2 * r); half[1].x = (float)(cx + 2 * r); half[1].y = (float)(cy - 2 * r);
    half[2].x = (float)(cx + 2 * r); half[2].y = (float)(cy + 2 * r); half[3].x = (float)cx; half[3].y = (float)(cy + 2 * r);
    OCR_CHECK_OK(&ctx, ocr_poly_intersection_area(&ctx, circle, N, half, 4, &area));
    want = 0.5 * N * r * r * sin(2 * pi / N) / 2;
    OCR_CHECK_MSG(fabs(area - want) < 0.05, "half area %.9g, want about %.9g", area, want);
    /* with itself: its own area */
    OCR_CHECK_OK(&ctx, ocr_poly_intersection_area(&ctx, circle, N, circle, N, &area));
    OCR_CHECK_MSG(fabs(area - a_circle) < 1e-6 * a_circle, "self area %.9g, want %.9g", area, a_circle);
    /* one vertex pulled across the polygon makes it self-crossing */
    memcpy(bad, circle, N * sizeof(ocr_point));
    bad[N / 4].x = (float)cx;
    bad[N / 4].y = (float)(cy - 1.5 * r);
    OCR_CHECK(!ocr_poly_is_simple(bad, N));
    /* evaluation: the GT is matched by itself (IoU 1) and by the square (IoU 4s^2 / area = 0.458: no match) */
    ocr_eval_init(&ev);
    memset(&gt, 0, sizeof gt);
    gt.points = circle;
    gt.n_points = N;
    det[0] = gt;
    OCR_CHECK_OK(&ctx, ocr_eval_add_image(&ctx, &ev, &gt, 1, det, 1, &c));
    OCR_CHECK(c.matched == 1 && c.gt_care == 1 && c.det_care == 1);
    memset(&det[0], 0, sizeof det[0]);
    det[0].points = sq;
    det[0].n_points = 4;
    det[1].points = bad;
    det[1].n_points = N;
    det[1].ignore = 0;
    det[1].text = NULL;
    OCR_CHECK_OK(&ctx, ocr_eval_add_image(&ctx, &ev, &gt, 1, det, 2, &c));
    OCR_CHECK(c.matched == 0 && c.gt_care == 1 && c.det_care == 1 && c.det_invalid == 1);
    /* a larger square (s = 75, IoU 22500 / 31415.9 = 0.716) is matched */
    s = 75.0;
    sq[0].x = (float)(cx - s); sq[0].y = (float)(cy - s); sq[1].x = (float)(cx + s); sq[1].y = (float)(cy - s);
    sq[2].x = (float)(cx + s); sq[2].y = (float)(cy + s); sq[3].x = (float)(cx - s); sq[3].y = (float)(cy + s);
    OCR_CHECK_OK(&ctx, ocr_eval_add_image(&ctx, &ev, &gt, 1, det, 1, &c));
    OCR_CHECK(c.matched == 1);
    free(circle);
    free(bad);
    ocr_ctx_free(&ctx);
}

static void test_bad_inputs(void) {
    ocr_ctx ctx;
    ocr_evaluator ev;
    ocr_point pg[4], pd[4];
    ocr_polygon gt = box(pg, 0, 0, 10, 10, 0), det = box(pd, 0, 0, 10, 6, 0);
    OCR_CHECK_OK(&ctx, ocr_ctx_init(&ctx, 1, 1));
    ocr_eval_init(&ev);
    pd[2].x = NAN;
    OCR_CHECK_ERR(&ctx, ocr_eval_add_image(&ctx, &ev, &gt, 1, &det, 1, NULL), OCR_ENONFINITE, "detection 0");
    OCR_CHECK(ev.n_images == 0);
    OCR_CHECK_ERR(&ctx, ocr_eval_add_image(&ctx, &ev, NULL, 1, &det, 0, NULL), OCR_EINVAL, "ocr_eval_add_image");
    OCR_CHECK_OK(&ctx, ocr_eval_add_image(&ctx, &ev, NULL, 0, NULL, 0, NULL));
    OCR_CHECK(ev.n_images == 1);
    ocr_ctx_free(&ctx);
}

int main(int argc, char **argv) {
    ocr_test_init(argc, argv);
    OCR_TEST_RUN(test_eval_matches_shapely);
    OCR_TEST_RUN(test_hand_cases);
    OCR_TEST_RUN(test_recall_by_height);
    OCR_TEST_RUN(test_large_polygon);
    OCR_TEST_RUN(test_bad_inputs);
    free(ref_text);
    return ocr_test_finish();
}
