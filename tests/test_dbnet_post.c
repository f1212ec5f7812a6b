/* DBNet post-processing against the official code path run live by tools/dbnet_post_ref.py (OpenCV,
   pyclipper, shapely) on seeded random probability maps: contours, fill masks and approxPolyDP exactly,
   minimum-area boxes bit for bit (float32 corners of every contour and of random point clouds), and whole
   detections (box and polygon mode, fast and slow score): the same count, each matched with IoU >= 0.95 and
   the score within 1e-4, with no exception. Plus hand-computed cases and bad inputs. */
#define _POSIX_C_SOURCE 200809L
#define OCR_IMPLEMENTATION
#include "ocr_tensor.h"
#include "ocr_nn.h"
#include "ocr_loss.h"
#include "ocr_dbnet.h"
#include "ocr_test.h"
#include <stdlib.h>
#include <unistd.h>

#define N_SMOOTH 70
#define N_CHAOS 4
#define N_TEXT 40
#define N_MAPS (N_SMOOTH + N_CHAOS + N_TEXT)
#define N_FILL 400
#define N_CLOUD 3000
#define CLOUD_MAX 40
#define N_RUNS 4

static const char *const run_names[N_RUNS] = {"box_fast", "box_slow", "poly_fast", "poly_slow"};

typedef struct { int n; int *xy; } ipoly;
typedef struct { double score; int n; int *xy; } rdet;
typedef struct {
    int H, W, dest_w, dest_h;
    float *p;
    int n_contours;
    ipoly *contours, *approx;
    float (*rect)[9];          /* short side, then TL, TR, BR, BL */
    int n_dets[N_RUNS];
    rdet *dets[N_RUNS];
} tmap;

typedef struct { int w, h, n; int xy[16]; char *mask; } tfill;
typedef struct { int n; int xy[2 * CLOUD_MAX]; float rect[9]; } tcloud;

static tmap maps[N_MAPS];
static tfill fills[N_FILL];
static tcloud clouds[N_CLOUD];
static int ref_state; /* 0 not run, 1 ok, -1 failed */

/* ---------------------------------------------------------------- inputs */

static float uni(ocr_rng *r, float lo, float hi) { return lo + (hi - lo) * ocr_rng_uniform(r); }

/* A soft text-like blob: rectangle, ellipse, arc band, ring (which has a hole) or thin line, possibly cut
   by the border, with its peak probability between 0.45 and 1. */
static void add_blob(float *p, int H, int W, ocr_rng *r) {
    int type = (int)ocr_rng_below(r, 5), x, y;
    float cx = uni(r, -0.1f * W, 1.1f * W), cy = uni(r, -0.1f * H, 1.1f * H), ang = uni(r, 0, 3.14159265f);
    float peak = uni(r, 0.45f, 1.0f), sharp = uni(r, 1.0f, 4.0f), a = uni(r, 3, 0.35f * W), b = uni(r, 1.5f, 9);
    float ca = cosf(ang), sa = sinf(ang), extent = uni(r, 0.5f, 2.5f);
    if (type == 3 && a < b + 2) a = b + 2 + uni(r, 0, 6);
    for (y = 0; y < H; y++)
        for (x = 0; x < W; x++) {
            float u = (x - cx) * ca + (y - cy) * sa, v = -(x - cx) * sa + (y - cy) * ca, d, rr = sqrtf(u * u + v * v), val;
            switch (type) {
            case 0: d = fminf(a - fabsf(u), b - fabsf(v)); break;
            case 1: d = (1 - sqrtf((u / a) * (u / a) + (v / b) * (v / b))) * fminf(a, b); break;
            case 2: d = fminf(b - fabsf(rr - a), (extent - fabsf(atan2f(v, u))) * a); break;
            case 3: d = b - fabsf(rr - a); break;
            default: d = fminf(a - fabsf(u), 0.7f - fabsf(v)); break;
            }
            val = peak / (1 + expf(-d * sharp));
            if (val > p[y * W + x]) p[y * W + x] = val;
        }
}

/* A confident text line, as a trained model outputs: a rotated bar whose box mostly scores above box_thresh. */
static void add_text_line(float *p, int H, int W, ocr_rng *r) {
    float cx = uni(r, 0, (float)W), cy = uni(r, 0, (float)H), ang = uni(r, -0.6f, 0.6f) + (ocr_rng_below(r, 4) == 0 ? 1.5708f : 0);
    float half_len = uni(r, 6, 0.3f * W), half_h = uni(r, 2, 8), peak = uni(r, 0.8f, 1.0f), sharp = uni(r, 1.5f, 5.0f);
    float ca = cosf(ang), sa = sinf(ang);
    int x, y;
    for (y = 0; y < H; y++)
        for (x = 0; x < W; x++) {
            float u = (x - cx) * ca + (y - cy) * sa, v = -(x - cx) * sa + (y - cy) * ca;
            float val = peak / (1 + expf(-fminf(half_len - fabsf(u), half_h - fabsf(v)) * sharp));
            if (val > p[y * W + x]) p[y * W + x] = val;
        }
}

/* Distinct integer points: few or many, on a small grid (collinear runs, ties for every extreme) or spread up
   to 2^20; a fifth lie on one line. */
static void make_cloud(tcloud *c, ocr_rng *r) {
    static const int ranges[5] = {3, 6, 20, 300, 1 << 20};
    int range = ranges[ocr_rng_below(r, 5)], line = ocr_rng_below(r, 5) == 0, k, j, tries;
    c->n = 1 + (int)ocr_rng_below(r, CLOUD_MAX);
    for (k = 0; k < c->n; k++) {
        for (tries = 0; tries < 100; tries++) {
            int x = (int)ocr_rng_below(r, (uint32_t)range), y = line ? 2 * x + 1 : (int)ocr_rng_below(r, (uint32_t)range);
            for (j = 0; j < k && (c->xy[2 * j] != x || c->xy[2 * j + 1] != y); j++) {}
            if (j == k) { c->xy[2 * k] = x; c->xy[2 * k + 1] = y; break; }
        }
        if (tries == 100) break; /* the grid is full */
    }
    c->n = k;
}

static void make_inputs(ocr_rng *r) {
    int m, i, k;
    for (m = 0; m < N_MAPS; m++) {
        tmap *t = &maps[m];
        int chaos = m >= N_SMOOTH && m < N_SMOOTH + N_CHAOS, text = m >= N_SMOOTH + N_CHAOS;
        t->H = chaos ? 16 + (int)ocr_rng_below(r, 24) : 40 + (int)ocr_rng_below(r, text ? 160 : 100);
        t->W = chaos ? 16 + (int)ocr_rng_below(r, 24) : 40 + (int)ocr_rng_below(r, text ? 160 : 100);
        t->dest_w = t->W / 2 + (int)ocr_rng_below(r, (uint32_t)(3 * t->W));
        t->dest_h = t->H / 2 + (int)ocr_rng_below(r, (uint32_t)(3 * t->H));
        t->p = (float *)calloc((size_t)(t->H * t->W), sizeof(float));
        if (chaos) {
            for (i = 0; i < t->H * t->W; i++) t->p[i] = ocr_rng_uniform(r);
            continue;
        }
        if (text)
            for (k = 2 + (int)ocr_rng_below(r, 7); k > 0; k--) add_text_line(t->p, t->H, t->W, r);
        else
            for (k = 1 + (int)ocr_rng_below(r, 6); k > 0; k--) add_blob(t->p, t->H, t->W, r);
        for (i = 0; i < t->H * t->W; i++) {
            float v = t->p[i] + 0.08f * ocr_rng_uniform(r);
            if (ocr_rng_below(r, 200) == 0) v = uni(r, 0.3f, 1.0f); /* isolated specks */
            t->p[i] = v > 1 ? 1 : v;
        }
    }
    for (i = 0; i < N_FILL; i++) {
        tfill *f = &fills[i];
        f->w = 1 + (int)ocr_rng_below(r, 30);
        f->h = 1 + (int)ocr_rng_below(r, 30);
        f->n = 1 + (int)ocr_rng_below(r, 8);
        for (k = 0; k < f->n; k++) {
            /* some vertices outside the mask, some repeating the previous row (horizontal edges) */
            f->xy[2 * k] = (int)ocr_rng_below(r, (uint32_t)(f->w + 16)) - 8;
            f->xy[2 * k + 1] = k && ocr_rng_below(r, 4) == 0 ? f->xy[2 * k - 1] : (int)ocr_rng_below(r, (uint32_t)(f->h + 16)) - 8;
        }
    }
    for (i = 0; i < N_CLOUD; i++) make_cloud(&clouds[i], r);
}

static int write_inputs(const char *dir) {
    char path[512];
    FILE *f;
    int m, i, k, count = N_MAPS;
    snprintf(path, sizeof path, "%s/maps.bin", dir);
    if (!(f = fopen(path, "wb"))) return 0;
    fwrite(&count, 4, 1, f);
    for (m = 0; m < N_MAPS; m++) {
        fwrite(&maps[m].H, 4, 1, f); fwrite(&maps[m].W, 4, 1, f);
        fwrite(&maps[m].dest_w, 4, 1, f); fwrite(&maps[m].dest_h, 4, 1, f);
        fwrite(maps[m].p, sizeof(float), (size_t)(maps[m].H * maps[m].W), f);
    }
    fclose(f);
    snprintf(path, sizeof path, "%s/polys.txt", dir);
    if (!(f = fopen(path, "w"))) return 0;
    for (i = 0; i < N_FILL; i++) {
        fprintf(f, "%d %d %d", fills[i].w, fills[i].h, fills[i].n);
        for (k = 0; k < 2 * fills[i].n; k++) fprintf(f, " %d", fills[i].xy[k]);
        fputc('\n', f);
    }
    fclose(f);
    snprintf(path, sizeof path, "%s/clouds.txt", dir);
    if (!(f = fopen(path, "w"))) return 0;
    for (i = 0; i < N_CLOUD; i++) {
        fprintf(f, "%d", clouds[i].n);
        for (k = 0; k < 2 * clouds[i].n; k++) fprintf(f, " %d", clouds[i].xy[k]);
        fputc('\n', f);
    }
    fclose(f);
    return 1;
}

/* ---------------------------------------------------------------- the reference's answers */

static char *ref_text, *ref_cur;

static char *tok(void) {
    char *s;
    while (*ref_cur == ' ' || *ref_cur == '\n') ref_cur++;
    if (!*ref_cur) return NULL;
    s = ref_cur;
    while (*ref_cur && *ref_cur != ' ' && *ref_cur != '\n') ref_cur++;
    if (*ref_cur) *ref_cur++ = 0;
    return s;
}
static int expect(const char *word) { char *s = tok(); return s && strcmp(s, word) == 0; }
static double num(void) { char *s = tok(); return s ? strtod(s, NULL) : NAN; }

static int read_ipoly(ipoly *p) {
    int k;
    p->n = (int)num();
    if (p->n < 0 || p->n > 1000000) return 0;
    p->xy = (int *)malloc(sizeof(int) * (size_t)(2 * p->n + 1));
    for (k = 0; k < 2 * p->n; k++) p->xy[k] = (int)num();
    return 1;
}

static int parse_ref(void) {
    int m, c, k, i;
    ref_cur = ref_text;
    for (m = 0; m < N_MAPS; m++) {
        tmap *t = &maps[m];
        if (!expect("map") || (int)num() != m) return 0;
        t->n_contours = (int)num();
        t->contours = (ipoly *)calloc((size_t)t->n_contours + 1, sizeof(ipoly));
        t->approx = (ipoly *)calloc((size_t)t->n_contours + 1, sizeof(ipoly));
        t->rect = (float (*)[9])calloc((size_t)t->n_contours + 1, sizeof *t->rect);
        for (c = 0; c < t->n_contours; c++)
            if (!expect("contour") || !read_ipoly(&t->contours[c])) return 0;
        for (c = 0; c < t->n_contours; c++) {
            if (!expect("rect")) return 0;
            for (k = 0; k < 9; k++) t->rect[c][k] = (float)num();
        }
        for (c = 0; c < t->n_contours; c++)
            if (!expect("approx") || !read_ipoly(&t->approx[c])) return 0;
        for (k = 0; k < N_RUNS; k++) {
            if (!expect("dets") || !expect(run_names[k])) return 0;
            t->n_dets[k] = (int)num();
            t->dets[k] = (rdet *)calloc((size_t)t->n_dets[k] + 1, sizeof(rdet));
            for (i = 0; i < t->n_dets[k]; i++) {
                ipoly ip;
                if (!expect("det")) return 0;
                t->dets[k][i].score = num();
                if (!read_ipoly(&ip)) return 0;
                t->dets[k][i].n = ip.n;
                t->dets[k][i].xy = ip.xy;
            }
        }
    }
    for (i = 0; i < N_FILL; i++) {
        char *s;
        if (!expect("fill") || !(s = tok()) || (int)strlen(s) != fills[i].w * fills[i].h) return 0;
        fills[i].mask = s;
    }
    for (i = 0; i < N_CLOUD; i++) {
        if (!expect("cloud")) return 0;
        for (k = 0; k < 9; k++) clouds[i].rect[k] = (float)num();
    }
    return expect("end");
}

/* Writes the inputs to a fresh temporary folder and runs the reference once for every test. */
static int reference(void) {
    ocr_ctx ctx;
    char dir[] = "/tmp/ocr_post_XXXXXX", cmd[1024], path[600];
    unsigned char *text = NULL;
    size_t size = 0;
    int status;
    if (ref_state) return ref_state > 0;
    ref_state = -1;
    if (ocr_ctx_init(&ctx, 1, 20240611) != OCR_OK) return 0;
    make_inputs(&ctx.rng);
    if (!mkdtemp(dir) || !write_inputs(dir)) {
        fprintf(stderr, "  cannot write the inputs to %s\n", dir);
        ocr_ctx_free(&ctx);
        return 0;
    }
    snprintf(cmd, sizeof cmd, "/usr/bin/python3 tools/dbnet_post_ref.py %s > %s/log.txt 2>&1", dir, dir);
    status = system(cmd);
    snprintf(path, sizeof path, "%s/ref.txt", dir);
    if (status != 0 || ocr_read_file(&ctx, path, (size_t)1 << 28, &text, &size) != OCR_OK) {
        char log[600];
        unsigned char *msg = NULL;
        size_t msg_size = 0;
        snprintf(log, sizeof log, "%s/log.txt", dir);
        if (ocr_read_file(&ctx, log, 1 << 20, &msg, &msg_size) == OCR_OK)
            fprintf(stderr, "  reference tools/dbnet_post_ref.py failed (status %d):\n%.*s\n", status, (int)msg_size, (char *)msg);
        free(msg);
        ocr_ctx_free(&ctx);
        return 0;
    }
    ref_text = (char *)realloc(text, size + 1);
    ref_text[size] = 0;
    if (!parse_ref()) fprintf(stderr, "  cannot parse %s near \"%.40s\"\n", path, ref_cur ? ref_cur : "");
    else ref_state = 1;
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    if (getenv("OCR_TEST_KEEP")) printf("     inputs and reference kept in %s\n", dir); /* for debugging */
    else if (system(cmd) != 0) fprintf(stderr, "  could not remove %s\n", dir);
    ocr_ctx_free(&ctx);
    return ref_state > 0;
}

/* ---------------------------------------------------------------- comparisons */

static ocr_point *to_points(const int *xy, int n) {
    ocr_point *p = (ocr_point *)malloc(sizeof(ocr_point) * (size_t)(n + 1));
    int k;
    for (k = 0; k < n; k++) { p[k].x = (float)xy[2 * k]; p[k].y = (float)xy[2 * k + 1]; }
    return p;
}

static void binarize(const tmap *t, uint8_t *bitmap) {
    int i;
    for (i = 0; i < t->H * t->W; i++) bitmap[i] = t->p[i] > 0.3f;
}

static int same_points(const ocr_point *pts, int n, const ipoly *ref) {
    int k;
    if (n != ref->n) return 0;
    for (k = 0; k < n; k++)
        if (pts[k].x != (float)ref->xy[2 * k] || pts[k].y != (float)ref->xy[2 * k + 1]) return 0;
    return 1;
}

static void test_contours_match_opencv(void) {
    ocr_ctx ctx;
    int m, c, total = 0, holes = 0;
    if (!reference()) { OCR_CHECK_MSG(0, "no reference"); return; }
    OCR_CHECK_OK(&ctx, ocr_ctx_init(&ctx, 1, 1));
    for (m = 0; m < N_MAPS; m++) {
        tmap *t = &maps[m];
        uint8_t *bitmap = (uint8_t *)malloc((size_t)(t->H * t->W));
        ocr_polyset ps;
        int first = 0;
        memset(&ps, 0, sizeof ps);
        binarize(t, bitmap);
        OCR_CHECK_OK(&ctx, ocr_find_contours(&ctx, bitmap, t->W, t->H, &ps));
        OCR_CHECK_MSG(ps.n_polys == t->n_contours, "map %d: %d contours, OpenCV finds %d", m, ps.n_polys, t->n_contours);
        for (c = 0; c < ps.n_polys && c < t->n_contours; first += ps.counts[c], c++) {
            int ok = same_points(ps.pts + first, ps.counts[c], &t->contours[c]);
            OCR_CHECK_MSG(ok, "map %d contour %d: %d points differ from OpenCV's %d (first (%g,%g) vs (%d,%d))", m, c, ps.counts[c],
                          t->contours[c].n, ps.pts[first].x, ps.pts[first].y, t->contours[c].xy[0], t->contours[c].xy[1]);
            if (ocr_poly_area(ps.pts + first, ps.counts[c]) > 0) holes++;
        }
        total += ps.n_polys;
        ocr_polyset_free(&ps);
        free(bitmap);
    }
    printf("     %d contours compared (%d hole borders)\n", total, holes);
    ocr_ctx_free(&ctx);
}

/* ocr_poly_fill (ocr_geom.h) scores every box; here against cv2.fillPoly on polygons partly outside the mask,
   with horizontal edges, self-intersections, one or two vertices. */
static void test_fill_matches_opencv(void) {
    ocr_ctx ctx;
    int i, k, bad = 0;
    if (!reference()) { OCR_CHECK_MSG(0, "no reference"); return; }
    OCR_CHECK_OK(&ctx, ocr_ctx_init(&ctx, 1, 1));
    for (i = 0; i < N_FILL; i++) {
        tfill *f = &fills[i];
        float mask[900];
        ocr_point *pts = to_points(f->xy, f->n);
        memset(mask, 0, sizeof mask);
        OCR_CHECK_OK(&ctx, ocr_poly_fill(&ctx, mask, f->h, f->w, pts, f->n, 1.0f));
        free(pts);
        for (k = 0; k < f->w * f->h; k++)
            if (mask[k] != (float)(f->mask[k] - '0')) break;
        if (k < f->w * f->h && bad++ < 5)
            fprintf(stderr, "  fill %d (%dx%d, %d vertices): pixel (%d,%d) is %d, OpenCV %c\n", i, f->w, f->h, f->n, k % f->w, k / f->w,
                    (int)mask[k], f->mask[k]);
    }
    OCR_CHECK_MSG(bad == 0, "%d of %d masks differ from cv2.fillPoly", bad, N_FILL);
    ocr_ctx_free(&ctx);
}

/* One box against OpenCV's float32 answer (short side, then TL, TR, BR, BL): every value bit for bit. */
static int same_box(ocr_ctx *ctx, const int *xy, int n, const float ref[9], const char *what, int index) {
    ocr_point *pts = to_points(xy, n), box[4];
    float side = -1;
    int k, ok;
    ok = ocr_min_area_box(ctx, pts, n, box, &side) == OCR_OK && side == ref[0];
    for (k = 0; k < 4 && ok; k++) ok = box[k].x == ref[1 + 2 * k] && box[k].y == ref[2 + 2 * k];
    if (!ok)
        fprintf(stderr, "  %s %d (%d points): side %.9g box (%.9g,%.9g) (%.9g,%.9g) (%.9g,%.9g) (%.9g,%.9g)\n"
                        "      OpenCV side %.9g box (%.9g,%.9g) (%.9g,%.9g) (%.9g,%.9g) (%.9g,%.9g)\n",
                what, index, n, side, box[0].x, box[0].y, box[1].x, box[1].y, box[2].x, box[2].y, box[3].x, box[3].y, ref[0], ref[1],
                ref[2], ref[3], ref[4], ref[5], ref[6], ref[7], ref[8]);
    free(pts);
    return ok;
}

/* Does the contour visit a point twice (a one-pixel-wide neck)? Then the hull order hangs on which visit
   OpenCV's sort keeps: counted to show these are covered. */
static int has_repeats(const int *xy, int n) {
    int a, b;
    for (a = 0; a < n; a++)
        for (b = a + 1; b < n; b++)
            if (xy[2 * a] == xy[2 * b] && xy[2 * a + 1] == xy[2 * b + 1]) return 1;
    return 0;
}

static void test_min_area_box_matches_opencv(void) {
    ocr_ctx ctx;
    int m, c, total = 0, bad = 0, repeats = 0, i;
    if (!reference()) { OCR_CHECK_MSG(0, "no reference"); return; }
    OCR_CHECK_OK(&ctx, ocr_ctx_init(&ctx, 1, 1));
    for (m = 0; m < N_MAPS; m++)
        for (c = 0; c < maps[m].n_contours; c++, total++) {
            char what[32];
            snprintf(what, sizeof what, "map %d contour", m);
            bad += !same_box(&ctx, maps[m].contours[c].xy, maps[m].contours[c].n, maps[m].rect[c], what, c);
            repeats += has_repeats(maps[m].contours[c].xy, maps[m].contours[c].n);
        }
    for (i = 0; i < N_CLOUD; i++, total++) bad += !same_box(&ctx, clouds[i].xy, clouds[i].n, clouds[i].rect, "cloud", i);
    printf("     %d boxes compared bit for bit (%d contours with a repeated point, %d point clouds)\n", total, repeats, N_CLOUD);
    OCR_CHECK_MSG(bad == 0, "%d of %d boxes differ from cv2.boxPoints(cv2.minAreaRect())", bad, total);
    ocr_ctx_free(&ctx);
}

static void test_approx_matches_opencv(void) {
    ocr_ctx ctx;
    int m, c, total = 0;
    /* the reference approximates with the official 0.002 * arcLength; so must polygon mode's default */
    double eps = ocr_post_config_official(OCR_POST_POLYGON).poly_epsilon;
    if (!reference()) { OCR_CHECK_MSG(0, "no reference"); return; }
    OCR_CHECK_OK(&ctx, ocr_ctx_init(&ctx, 1, 1));
    for (m = 0; m < N_MAPS; m++) {
        tmap *t = &maps[m];
        for (c = 0; c < t->n_contours; c++) {
            int n = t->contours[c].n, n_out = -1;
            ocr_point *pts = to_points(t->contours[c].xy, n), *out = (ocr_point *)malloc(sizeof(ocr_point) * (size_t)n);
            OCR_CHECK_OK(&ctx, ocr_approx_poly(&ctx, pts, n, eps * ocr_contour_arc_length(pts, n), out, &n_out));
            OCR_CHECK_MSG(same_points(out, n_out, &t->approx[c]), "map %d contour %d: %d approximated points, OpenCV %d", m, c, n_out,
                          t->approx[c].n);
            total++;
            free(pts);
            free(out);
        }
    }
    printf("     %d approximations compared\n", total);
    ocr_ctx_free(&ctx);
}

static double iou_of(ocr_ctx *ctx, const ocr_point *a, int na, const ocr_point *b, int nb) {
    double inter = 0, aa = fabs(ocr_poly_area(a, na)), ab = fabs(ocr_poly_area(b, nb));
    if (ocr_poly_intersection_area(ctx, a, na, b, nb, &inter) != OCR_OK) return -1;
    return aa + ab - inter > 0 ? inter / (aa + ab - inter) : 0;
}

/* Every detection must agree, box mode included: ocr_min_area_box rounds as OpenCV's float32 minAreaRect and
   boxPoints do, so a corner meant to be an integer truncates as there in the score mask and the unclip. */
static void check_run(int run) {
    ocr_ctx ctx;
    ocr_post_config cfg = ocr_post_config_official(run < 2 ? OCR_POST_BOX : OCR_POST_POLYGON);
    ocr_detections d;
    int m, total = 0, identical = 0, disagree = 0;
    double worst_iou = 1, worst_score = 0;
    if (!reference()) { OCR_CHECK_MSG(0, "no reference"); return; }
    OCR_CHECK_OK(&ctx, ocr_ctx_init(&ctx, 1, 1));
    cfg.score_mode = run % 2 ? OCR_SCORE_SLOW : OCR_SCORE_FAST;
    memset(&d, 0, sizeof d);
    for (m = 0; m < N_MAPS; m++) {
        tmap *t = &maps[m];
        ocr_tensor prob = ocr_tensor_f32("prob", ocr_shape2(t->H, t->W), t->p);
        unsigned char used[1024];
        int i, j;
        OCR_CHECK_OK(&ctx, ocr_postprocess(&ctx, &cfg, &prob, t->dest_w, t->dest_h, &d));
        if (d.n != t->n_dets[run]) {
            fprintf(stderr, "  %s map %d: %d detections, reference %d\n", run_names[run], m, d.n, t->n_dets[run]);
            disagree += abs(d.n - t->n_dets[run]);
        }
        memset(used, 0, sizeof used);
        for (i = 0; i < t->n_dets[run]; i++) {
            rdet *r = &t->dets[run][i];
            ocr_point *rp = to_points(r->xy, r->n);
            double best = -1;
            int best_j = -1;
            for (j = 0; j < d.n && j < 1024; j++) {
                double iou;
                if (used[j]) continue;
                iou = iou_of(&ctx, d.polys[j].points, d.polys[j].n_points, rp, r->n);
                if (iou > best) { best = iou; best_j = j; }
            }
            if (!(best >= 0.95)) {
                fprintf(stderr, "  %s map %d detection %d: best IoU %g\n", run_names[run], m, i, best);
                disagree++;
                for (j = 0; j < r->n && j < 8; j++) fprintf(stderr, " (%d,%d)", r->xy[2 * j], r->xy[2 * j + 1]);
                fprintf(stderr, " <- reference\n");
                for (j = 0; best_j >= 0 && j < d.polys[best_j].n_points && j < 8; j++)
                    fprintf(stderr, " (%g,%g)", d.polys[best_j].points[j].x, d.polys[best_j].points[j].y);
                fprintf(stderr, " <- ours\n");
            }
            if (best_j >= 0) {
                double ds = fabs(d.scores[best_j] - r->score);
                used[best_j] = 1;
                if (!(ds <= 1e-4)) {
                    fprintf(stderr, "  %s map %d detection %d: score %.7f, reference %.7f\n", run_names[run], m, i, d.scores[best_j], r->score);
                    if (best >= 0.95) disagree++;
                }
                if (ds > worst_score) worst_score = ds;
                if (best < worst_iou) worst_iou = best;
                {
                    ipoly ip;
                    ip.n = r->n;
                    ip.xy = r->xy;
                    identical += same_points(d.polys[best_j].points, d.polys[best_j].n_points, &ip);
                }
            }
            total++;
            free(rp);
        }
    }
    printf("     %s: %d detections, %d with identical points, %d disagreeing, worst IoU %.4f, worst score difference %.2g\n",
           run_names[run], total, identical, disagree, worst_iou, worst_score);
    OCR_CHECK_MSG(total >= 15, "only %d reference detections: the maps test too little", total);
    OCR_CHECK_MSG(disagree == 0, "%d detections disagree with the reference", disagree);
    ocr_detections_free(&d);
    ocr_ctx_free(&ctx);
}

static void test_post_box_fast(void) { check_run(0); }
static void test_post_box_slow(void) { check_run(1); }
static void test_post_polygon_fast(void) { check_run(2); }
static void test_post_polygon_slow(void) { check_run(3); }

/* ---------------------------------------------------------------- hand-computed cases */

/* A 16x6 block of ones at x 8..23, y 10..15 in a 64x64 map. Its box (8,10)-(23,15) scores exactly 1;
   unclip: A = 75, L = 40, D = 75 * 1.5 / 40 = 2.8125, and the rounded offset reaches x 5..26, y 7..18. */
static void fill_block(float *p, int W, int x0, int y0, int x1, int y1) {
    int x, y;
    for (y = y0; y <= y1; y++)
        for (x = x0; x <= x1; x++) p[y * W + x] = 1.0f;
}

static void test_hand_block(void) {
    ocr_ctx ctx;
    static float p[64 * 64];
    ocr_tensor prob = ocr_tensor_f32("prob", ocr_shape4(1, 1, 64, 64), p);
    ocr_post_config cfg = ocr_post_config_official(OCR_POST_BOX);
    ocr_detections d;
    static const float same[8] = {5, 7, 26, 7, 26, 18, 5, 18}, doubled[8] = {10, 14, 52, 14, 52, 36, 10, 36};
    /* halved: 5/64*32 = 2.5 -> 2 and 7/64*32 = 3.5 -> 4 (half to even), 13, 9 */
    static const float halved[8] = {2, 4, 13, 4, 13, 9, 2, 9};
    const float *want[3];
    int sizes[3] = {64, 128, 32}, s, k;
    want[0] = same; want[1] = doubled; want[2] = halved;
    memset(p, 0, sizeof p);
    memset(&d, 0, sizeof d);
    fill_block(p, 64, 8, 10, 23, 15);
    OCR_CHECK_OK(&ctx, ocr_ctx_init(&ctx, 1, 1));
    for (s = 0; s < 3; s++) {
        OCR_CHECK_OK(&ctx, ocr_postprocess(&ctx, &cfg, &prob, sizes[s], sizes[s], &d));
        OCR_CHECK_MSG(d.n == 1, "size %d: %d detections", sizes[s], d.n);
        if (d.n != 1) continue;
        OCR_CHECK(d.polys[0].n_points == 4 && d.scores[0] == 1.0f);
        for (k = 0; k < 4; k++)
            OCR_CHECK_MSG(d.polys[0].points[k].x == want[s][2 * k] && d.polys[0].points[k].y == want[s][2 * k + 1],
                          "size %d corner %d: (%g,%g), expected (%g,%g)", sizes[s], k, d.polys[0].points[k].x, d.polys[0].points[k].y,
                          want[s][2 * k], want[s][2 * k + 1]);
    }
    /* Below box_thresh: 0.55 everywhere in the block. */
    for (k = 0; k < 64 * 64; k++) p[k] *= 0.55f;
    OCR_CHECK_OK(&ctx, ocr_postprocess(&ctx, &cfg, &prob, 64, 64, &d));
    OCR_CHECK(d.n == 0);
    cfg.box_thresh = 0.5;
    OCR_CHECK_OK(&ctx, ocr_postprocess(&ctx, &cfg, &prob, 64, 64, &d));
    OCR_CHECK(d.n == 1 && fabsf(d.scores[0] - 0.55f) < 1e-6f);
    ocr_detections_free(&d);
    ocr_ctx_free(&ctx);
}

/* Two blocks: OpenCV lists the lower one first, so max_candidates = 1 keeps only it. A block 3 pixels
   wide has a box side of 2 < min_size and is dropped. */
static void test_hand_candidates_and_min_size(void) {
    ocr_ctx ctx;
    static float p[64 * 64];
    ocr_tensor prob = ocr_tensor_f32("prob", ocr_shape2(64, 64), p);
    ocr_post_config cfg = ocr_post_config_official(OCR_POST_BOX);
    ocr_detections d;
    memset(p, 0, sizeof p);
    memset(&d, 0, sizeof d);
    fill_block(p, 64, 8, 4, 23, 9);
    fill_block(p, 64, 30, 40, 50, 47);
    fill_block(p, 64, 40, 20, 42, 30);
    OCR_CHECK_OK(&ctx, ocr_ctx_init(&ctx, 1, 1));
    OCR_CHECK_OK(&ctx, ocr_postprocess(&ctx, &cfg, &prob, 64, 64, &d));
    OCR_CHECK_MSG(d.n == 2, "%d detections", d.n);
    if (d.n == 2) OCR_CHECK(d.polys[0].points[0].y > 30 && d.polys[1].points[0].y < 10);
    cfg.max_candidates = 1;
    OCR_CHECK_OK(&ctx, ocr_postprocess(&ctx, &cfg, &prob, 64, 64, &d));
    OCR_CHECK(d.n == 1 && d.polys[0].points[0].y > 30);
    cfg.max_candidates = 1000;
    cfg.min_size = 2;
    OCR_CHECK_OK(&ctx, ocr_postprocess(&ctx, &cfg, &prob, 64, 64, &d));
    OCR_CHECK_MSG(d.n == 3, "min_size 2: %d detections", d.n);
    ocr_detections_free(&d);
    ocr_ctx_free(&ctx);
}

/* A plus sign: its border has 16 points (each inner corner is cut diagonally by 8-connected following). At 0.01 of
   the perimeter approxPolyDP merges each cut back into one corner (12 points); at the official 0.002 (polygon mode's
   default, seg_detector_representer.py) the cuts stay (16 points), as cv2 gives for both; polygon mode returns one
   polygon. */
static void test_hand_polygon(void) {
    ocr_ctx ctx;
    static float p[64 * 64];
    ocr_tensor prob = ocr_tensor_f32("prob", ocr_shape2(64, 64), p);
    ocr_post_config cfg = ocr_post_config_official(OCR_POST_POLYGON);
    ocr_detections d;
    ocr_polyset ps;
    uint8_t bitmap[64 * 64];
    ocr_point approx[64];
    int k, n = 0;
    memset(p, 0, sizeof p);
    memset(&d, 0, sizeof d);
    memset(&ps, 0, sizeof ps);
    fill_block(p, 64, 20, 10, 29, 49);
    fill_block(p, 64, 5, 25, 44, 34);
    for (k = 0; k < 64 * 64; k++) bitmap[k] = p[k] > 0.3f;
    OCR_CHECK_OK(&ctx, ocr_ctx_init(&ctx, 1, 1));
    OCR_CHECK_OK(&ctx, ocr_find_contours(&ctx, bitmap, 64, 64, &ps));
    OCR_CHECK(ps.n_polys == 1 && ps.n_pts == 16);
    /* outer borders start at the top-left pixel and run counter-clockwise on screen */
    if (ps.n_pts == 16) {
        OCR_CHECK(ps.pts[0].x == 20 && ps.pts[0].y == 10 && ps.pts[1].x == 20 && ps.pts[1].y == 24 && ps.pts[2].x == 19 && ps.pts[2].y == 25);
        OCR_CHECK_OK(&ctx, ocr_approx_poly(&ctx, ps.pts, 16, 0.01 * ocr_contour_arc_length(ps.pts, 16), approx, &n));
        OCR_CHECK(n == 12 && approx[1].x == 20 && approx[1].y == 24 && approx[2].x == 5 && approx[2].y == 25);
        OCR_CHECK(cfg.poly_epsilon == 0.002);
        OCR_CHECK_OK(&ctx, ocr_approx_poly(&ctx, ps.pts, 16, cfg.poly_epsilon * ocr_contour_arc_length(ps.pts, 16), approx, &n));
        OCR_CHECK(n == 16 && approx[1].x == 20 && approx[1].y == 24 && approx[2].x == 19 && approx[2].y == 25 && approx[3].x == 5 &&
                  approx[3].y == 25);
    }
    OCR_CHECK_OK(&ctx, ocr_postprocess(&ctx, &cfg, &prob, 64, 64, &d));
    OCR_CHECK_MSG(d.n == 1 && d.polys[0].n_points >= 12 && d.scores[0] > 0.95f, "%d detections, %d points", d.n, d.n ? d.polys[0].n_points : 0);
    ocr_polyset_free(&ps);
    ocr_detections_free(&d);
    ocr_ctx_free(&ctx);
}

/* Two 16x6 blocks at 0.9 (x 8..23 and 28..43, y 10..15) joined by a 4x2 bridge at 0.5: one region above 0.3, so
   the official post-processing gives one box over both. With split_thresh 0.8 each block is a core of 96 pixels:
   the bridge's pixels go to the nearer core (x 24..25 left, 26..27 right) and the cut between them leaves two
   boxes, one over each block. One core (the right block at 0.7) or a second core under min_size^2 pixels (a 2x2
   patch at 0.9 in it) changes nothing, nor does a split threshold no pixel exceeds. */
static void test_hand_split(void) {
    ocr_ctx ctx;
    static float p[64 * 64];
    ocr_tensor prob = ocr_tensor_f32("prob", ocr_shape2(64, 64), p);
    ocr_post_config off = ocr_post_config_official(OCR_POST_BOX), on = off;
    ocr_detections d, ref;
    int x, y, k, mode;
    memset(&d, 0, sizeof d);
    memset(&ref, 0, sizeof ref);
    OCR_CHECK_OK(&ctx, ocr_ctx_init(&ctx, 1, 1));
    on.split_thresh = 0.8f;
    on.box_thresh = 0.5;
    off.box_thresh = 0.5;
    memset(p, 0, sizeof p);
    fill_block(p, 64, 8, 10, 23, 15);
    fill_block(p, 64, 28, 10, 43, 15);
    for (y = 10; y <= 15; y++)
        for (x = 8; x <= 43; x++) p[y * 64 + x] *= 0.9f;
    for (y = 12; y <= 13; y++)
        for (x = 24; x <= 27; x++) p[y * 64 + x] = 0.5f;
    OCR_CHECK_OK(&ctx, ocr_postprocess(&ctx, &off, &prob, 64, 64, &d));
    OCR_CHECK_MSG(d.n == 1 && d.polys[0].points[0].x < 8 && d.polys[0].points[1].x > 43, "official: %d detections", d.n);
    OCR_CHECK_OK(&ctx, ocr_postprocess(&ctx, &on, &prob, 64, 64, &d));
    OCR_CHECK_MSG(d.n == 2, "split: %d detections", d.n);
    if (d.n == 2) {
        float lo[2] = {1e9f, 1e9f}, hi[2] = {-1e9f, -1e9f};
        for (k = 0; k < 4; k++) {
            int i;
            for (i = 0; i < 2; i++) {
                lo[i] = fminf(lo[i], d.polys[i].points[k].x);
                hi[i] = fmaxf(hi[i], d.polys[i].points[k].x);
            }
        }
        /* in OpenCV's order the right block's contour comes first (found later in the raster, listed first) */
        if (lo[0] > lo[1]) {
            float t = lo[0]; lo[0] = lo[1]; lo[1] = t;
            t = hi[0]; hi[0] = hi[1]; hi[1] = t;
        }
        OCR_CHECK_MSG(lo[0] >= 4 && lo[0] <= 6 && hi[0] >= 26 && hi[0] <= 29 && lo[1] >= 23 && lo[1] <= 26 && hi[1] >= 45 && hi[1] <= 48,
                      "boxes x %g..%g and %g..%g", lo[0], hi[0], lo[1], hi[1]);
        OCR_CHECK(d.scores[0] > 0.8f && d.scores[1] > 0.8f);
    }
    for (mode = 0; mode < 3; mode++) {
        ocr_post_config one = on;
        if (mode == 0)
            for (y = 10; y <= 15; y++)
                for (x = 28; x <= 43; x++) p[y * 64 + x] = 0.7f;
        if (mode == 1) p[12 * 64 + 35] = p[12 * 64 + 36] = p[13 * 64 + 35] = p[13 * 64 + 36] = 0.9f;
        if (mode == 2) {
            fill_block(p, 64, 28, 10, 43, 15);
            one.split_thresh = 1.0f;
        }
        OCR_CHECK_OK(&ctx, ocr_postprocess(&ctx, &off, &prob, 64, 64, &ref));
        OCR_CHECK_OK(&ctx, ocr_postprocess(&ctx, &one, &prob, 64, 64, &d));
        OCR_CHECK_MSG(d.n == ref.n && d.n == 1 && d.n_points == ref.n_points &&
                          memcmp(d.point_buf, ref.point_buf, sizeof(ocr_point) * (size_t)d.n_points) == 0 && d.scores[0] == ref.scores[0],
                      "case %d: %d detections, official %d", mode, d.n, ref.n);
    }
    on.split_thresh = 0.2f;
    OCR_CHECK_ERR(&ctx, ocr_postprocess(&ctx, &on, &prob, 64, 64, &d), OCR_EINVAL, "split_thresh 0.2");
    ocr_detections_free(&d);
    ocr_detections_free(&ref);
    ocr_ctx_free(&ctx);
}

/* The split on random maps of text lines and blobs with noise and specks (what ASan and UBSan see it run on):
   every detection of the default config scores at least its box threshold and lies in the image, and a split
   threshold no pixel exceeds gives the unsplit config's detections exactly. */
static void test_split_random_maps(void) {
    ocr_ctx ctx;
    ocr_detections d, ref;
    float *p = (float *)malloc(200 * 200 * sizeof(float));
    int m, mode, i, k, split_dets = 0, plain_dets = 0;
    memset(&d, 0, sizeof d);
    memset(&ref, 0, sizeof ref);
    OCR_CHECK_OK(&ctx, ocr_ctx_init(&ctx, 1, 977));
    for (m = 0; m < 60 && p; m++) {
        int H = 24 + (int)ocr_rng_below(&ctx.rng, 176), W = 24 + (int)ocr_rng_below(&ctx.rng, 176);
        ocr_tensor prob = ocr_tensor_f32("prob", ocr_shape2(H, W), p);
        memset(p, 0, (size_t)(H * W) * sizeof(float));
        for (k = 1 + (int)ocr_rng_below(&ctx.rng, 8); k > 0; k--)
            if (m % 3) add_text_line(p, H, W, &ctx.rng);
            else add_blob(p, H, W, &ctx.rng);
        for (i = 0; i < H * W; i++) {
            float v = p[i] + 0.08f * ocr_rng_uniform(&ctx.rng);
            if (ocr_rng_below(&ctx.rng, 200) == 0) v = uni(&ctx.rng, 0.3f, 1.0f);
            p[i] = v > 1 ? 1 : v;
        }
        for (mode = 0; mode < 2; mode++) {
            ocr_post_config cfg = ocr_post_config_default(mode ? OCR_POST_POLYGON : OCR_POST_BOX), none = cfg, never = cfg;
            none.split_thresh = 0;
            never.split_thresh = 1.0f;
            OCR_CHECK_OK(&ctx, ocr_postprocess(&ctx, &cfg, &prob, W, H, &d));
            for (i = 0; i < d.n; i++) {
                OCR_CHECK_MSG(d.scores[i] >= cfg.box_thresh, "map %d: detection %d scores %g", m, i, d.scores[i]);
                for (k = 0; k < d.polys[i].n_points; k++)
                    OCR_CHECK(d.polys[i].points[k].x >= 0 && d.polys[i].points[k].x <= W && d.polys[i].points[k].y >= 0 &&
                              d.polys[i].points[k].y <= H);
            }
            split_dets += d.n;
            OCR_CHECK_OK(&ctx, ocr_postprocess(&ctx, &none, &prob, W, H, &ref));
            plain_dets += ref.n;
            OCR_CHECK_OK(&ctx, ocr_postprocess(&ctx, &never, &prob, W, H, &d));
            OCR_CHECK_MSG(d.n == ref.n && d.n_points == ref.n_points &&
                              (d.n_points == 0 || memcmp(d.point_buf, ref.point_buf, sizeof(ocr_point) * (size_t)d.n_points) == 0),
                          "map %d mode %d: split threshold 1 gives %d detections, no split %d", m, mode, d.n, ref.n);
        }
    }
    /* the maps have lines that touch: the split must find some of them */
    OCR_CHECK_MSG(split_dets > plain_dets, "%d detections with the split, %d without", split_dets, plain_dets);
    free(p);
    ocr_detections_free(&d);
    ocr_detections_free(&ref);
    ocr_ctx_free(&ctx);
}

static void test_write_icdar(void) {
    ocr_ctx ctx;
    static float p[64 * 64];
    ocr_tensor prob = ocr_tensor_f32("prob", ocr_shape2(64, 64), p);
    ocr_post_config cfg = ocr_post_config_official(OCR_POST_BOX);
    ocr_detections d;
    char dir[] = "/tmp/ocr_post_XXXXXX", path[256];
    unsigned char *text = NULL;
    size_t size = 0;
    memset(p, 0, sizeof p);
    memset(&d, 0, sizeof d);
    fill_block(p, 64, 8, 10, 23, 15);
    OCR_CHECK_OK(&ctx, ocr_ctx_init(&ctx, 1, 1));
    OCR_CHECK(mkdtemp(dir) != NULL);
    snprintf(path, sizeof path, "%s/res_img_1.txt", dir);
    OCR_CHECK_OK(&ctx, ocr_postprocess(&ctx, &cfg, &prob, 128, 128, &d));
    OCR_CHECK_OK(&ctx, ocr_detections_write_icdar(&ctx, path, &d, 0));
    OCR_CHECK_OK(&ctx, ocr_read_file(&ctx, path, 4096, &text, &size));
    OCR_CHECK(text && size == 24 && memcmp(text, "10,14,52,14,52,36,10,36\n", 24) == 0);
    free(text);
    text = NULL;
    OCR_CHECK_OK(&ctx, ocr_detections_write_icdar(&ctx, path, &d, 1));
    OCR_CHECK_OK(&ctx, ocr_read_file(&ctx, path, 4096, &text, &size));
    OCR_CHECK(text && size == 33 && memcmp(text, "10,14,52,14,52,36,10,36,1.000000\n", 33) == 0);
    free(text);
    d.n = 0;
    OCR_CHECK_OK(&ctx, ocr_detections_write_icdar(&ctx, path, &d, 0));
    OCR_CHECK_OK(&ctx, ocr_read_file(&ctx, path, 4096, &text, &size));
    OCR_CHECK(size == 0);
    free(text);
    remove(path);
    rmdir(dir);
    ocr_detections_free(&d);
    ocr_ctx_free(&ctx);
}

static void test_bad_inputs(void) {
    ocr_ctx ctx;
    static float p[8 * 8];
    int32_t ints[64];
    ocr_tensor prob = ocr_tensor_f32("prob", ocr_shape2(8, 8), p), batch = ocr_tensor_f32("prob", ocr_shape3(2, 4, 8), p);
    ocr_tensor wrong = ocr_tensor_view("prob", OCR_I32, OCR_DEVICE_CPU, ocr_shape2(8, 8), ints);
    ocr_post_config cfg = ocr_post_config_official(OCR_POST_BOX), bad = cfg;
    ocr_detections d;
    memset(p, 0, sizeof p);
    memset(&d, 0, sizeof d);
    OCR_CHECK_OK(&ctx, ocr_ctx_init(&ctx, 1, 1));
    p[13] = NAN;
    OCR_CHECK_ERR(&ctx, ocr_postprocess(&ctx, &cfg, &prob, 8, 8, &d), OCR_ENONFINITE, "index 13");
    p[13] = 3.5f; /* logits passed by mistake */
    OCR_CHECK_ERR(&ctx, ocr_postprocess(&ctx, &cfg, &prob, 8, 8, &d), OCR_ERANGE, "value 3.5 at index 13");
    p[13] = 0;
    OCR_CHECK_ERR(&ctx, ocr_postprocess(&ctx, &cfg, &batch, 8, 8, &d), OCR_ESHAPE, "[2,4,8]");
    OCR_CHECK_ERR(&ctx, ocr_postprocess(&ctx, &cfg, &wrong, 8, 8, &d), OCR_EDTYPE, "prob");
    OCR_CHECK_ERR(&ctx, ocr_postprocess(&ctx, &cfg, &prob, 0, 8, &d), OCR_EINVAL, "0x8");
    bad.unclip_ratio = -1;
    OCR_CHECK_ERR(&ctx, ocr_postprocess(&ctx, &bad, &prob, 8, 8, &d), OCR_EINVAL, "unclip_ratio -1");
    bad = cfg;
    bad.mode = 7;
    OCR_CHECK_ERR(&ctx, ocr_postprocess(&ctx, &bad, &prob, 8, 8, &d), OCR_EINVAL, "mode 7");
    OCR_CHECK_OK(&ctx, ocr_postprocess(&ctx, &cfg, &prob, 8, 8, &d));
    OCR_CHECK(d.n == 0);
    ocr_detections_free(&d);
    ocr_ctx_free(&ctx);
}

int main(int argc, char **argv) {
    int m, c, k;
    ocr_test_init(argc, argv);
    OCR_TEST_RUN(test_contours_match_opencv);
    OCR_TEST_RUN(test_fill_matches_opencv);
    OCR_TEST_RUN(test_min_area_box_matches_opencv);
    OCR_TEST_RUN(test_approx_matches_opencv);
    OCR_TEST_RUN(test_post_box_fast);
    OCR_TEST_RUN(test_post_box_slow);
    OCR_TEST_RUN(test_post_polygon_fast);
    OCR_TEST_RUN(test_post_polygon_slow);
    OCR_TEST_RUN(test_hand_block);
    OCR_TEST_RUN(test_hand_candidates_and_min_size);
    OCR_TEST_RUN(test_hand_polygon);
    OCR_TEST_RUN(test_hand_split);
    OCR_TEST_RUN(test_split_random_maps);
    OCR_TEST_RUN(test_write_icdar);
    OCR_TEST_RUN(test_bad_inputs);
    for (m = 0; m < N_MAPS; m++) {
        free(maps[m].p);
        for (c = 0; c < maps[m].n_contours; c++) { free(maps[m].contours[c].xy); free(maps[m].approx[c].xy); }
        free(maps[m].contours); free(maps[m].approx); free(maps[m].rect);
        for (k = 0; k < N_RUNS; k++) {
            for (c = 0; c < maps[m].n_dets[k]; c++) free(maps[m].dets[k][c].xy);
            free(maps[m].dets[k]);
        }
    }
    free(ref_text);
    return ocr_test_finish();
}
