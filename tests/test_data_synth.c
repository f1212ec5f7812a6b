/* Synthetic scenes and augmentation (ocr_data.h [synth]): scenes are deterministic and thread-safe, polygons are
   tight around the rendered ink, faint text is marked ignore; every geometric step moves polygons with the pixels
   (single pixels, blocks, filled polygon masks through the whole random chain), resampling matches OpenCV
   (tests/fixtures/synth, tools/make_synth_fixtures.py), the EAST crop keeps text and cuts none, normalisation
   values are exact, and bad arguments are errors. */
#define OCR_IMPLEMENTATION
#include "ocr_tensor.h"
#include "ocr_data.h"
#include "ocr_test.h"
#include <pthread.h>

static int sanitized(void) { const char *v = getenv("OCR_SANITIZED"); return v && v[0] == '1'; }

/* One synthesizer with the system fonts for the whole program (loading fonts is the slow part of init). */
static ocr_synth g_synth;
static int g_synth_ok;

static const ocr_synth *default_synth(void) {
    if (!g_synth_ok) {
        ocr_ctx ctx;
        ocr_ctx_init(&ctx, 1, 1);
        g_synth_ok = ocr_synth_init(&ctx, &g_synth, NULL) == OCR_OK;
        if (!g_synth_ok) fprintf(stderr, "  ocr_synth_init: %s\n", ocr_ctx_last_error(&ctx));
        ocr_ctx_free(&ctx);
    }
    return g_synth_ok ? &g_synth : NULL;
}

/* ---------------------------------------------------------------- geometry helpers of the test itself */

/* Point-in-polygon by crossings (any simple polygon). */
static int inside_poly(const ocr_polygon *p, double x, double y) {
    int i, j, in = 0;
    for (i = 0, j = p->n_points - 1; i < p->n_points; j = i++) {
        double xi = p->points[i].x, yi = p->points[i].y, xj = p->points[j].x, yj = p->points[j].y;
        if ((yi > y) != (yj > y) && x < (xj - xi) * (y - yi) / (yj - yi) + xi) in = !in;
    }
    return in;
}

static double seg_dist(double x, double y, double x0, double y0, double x1, double y1) {
    double dx = x1 - x0, dy = y1 - y0, len2 = dx * dx + dy * dy, t = 0;
    if (len2 > 0) { t = ((x - x0) * dx + (y - y0) * dy) / len2; t = t < 0 ? 0 : t > 1 ? 1 : t; }
    dx = x - (x0 + t * dx);
    dy = y - (y0 + t * dy);
    return sqrt(dx * dx + dy * dy);
}

static double boundary_dist(const ocr_polygon *p, double x, double y) {
    double d = 1e30;
    int i;
    for (i = 0; i < p->n_points; i++) {
        const ocr_point *a = &p->points[i], *b = &p->points[(i + 1) % p->n_points];
        double di = seg_dist(x, y, a->x, a->y, b->x, b->y);
        if (di < d) d = di;
    }
    return d;
}

/* 0 inside, else the distance to the polygon. */
static double poly_dist(const ocr_polygon *p, double x, double y) { return inside_poly(p, x, y) ? 0.0 : boundary_dist(p, x, y); }

static int image_diff(const ocr_image *a, const ocr_image *b) {
    return a->width != b->width || a->height != b->height || a->channels != b->channels ||
           memcmp(a->pixels, b->pixels, (size_t)a->width * (size_t)a->height * (size_t)a->channels) != 0;
}

static int polys_same(const ocr_sample *a, const ocr_sample *b, double tol) {
    int i, k;
    if (a->n_polys != b->n_polys) return 0;
    for (i = 0; i < a->n_polys; i++) {
        const ocr_polygon *p = &a->polys[i], *q = &b->polys[i];
        if (p->n_points != q->n_points || p->ignore != q->ignore) return 0;
        if ((p->text == NULL) != (q->text == NULL) || (p->text && strcmp(p->text, q->text) != 0)) return 0;
        for (k = 0; k < p->n_points; k++)
            if (fabs(p->points[k].x - q->points[k].x) > tol || fabs(p->points[k].y - q->points[k].y) > tol) return 0;
    }
    return 1;
}

/* A sample with an image of grey level bg and the given polygons (copied, named p0, p1...); each polygon is also
   filled white at the pixel centres it contains, so pixels and polygons start out exactly aligned. */
static void make_mask_sample(ocr_ctx *ctx, ocr_sample *s, int w, int h, const float *quads, int n_quads, const int *ignore, int bg) {
    int i, x, y, k;
    memset(s, 0, sizeof *s);
    OCR_CHECK_OK(ctx, ocr_image_alloc(ctx, &s->image, w, h, 3));
    memset(s->image.pixels, bg, (size_t)w * h * 3);
    s->polys = (ocr_polygon *)calloc((size_t)n_quads + 1, sizeof(ocr_polygon));
    s->n_polys = n_quads;
    snprintf(s->id, sizeof s->id, "mask-sample");
    for (i = 0; i < n_quads; i++) {
        s->polys[i].points = (ocr_point *)malloc(4 * sizeof(ocr_point));
        s->polys[i].n_points = 4;
        s->polys[i].ignore = ignore ? ignore[i] : 0;
        s->polys[i].text = (char *)malloc(16);
        snprintf(s->polys[i].text, 16, "p%d", i);
        for (k = 0; k < 4; k++) { s->polys[i].points[k].x = quads[i * 8 + 2 * k]; s->polys[i].points[k].y = quads[i * 8 + 2 * k + 1]; }
    }
    for (y = 0; y < h; y++)
        for (x = 0; x < w; x++)
            for (i = 0; i < n_quads; i++)
                if (inside_poly(&s->polys[i], x + 0.5, y + 0.5)) memset(s->image.pixels + ((size_t)y * w + x) * 3, 255, 3);
}

/* Intensity-weighted centre of channel 0, in continuous coordinates. */
static void intensity_centroid(const ocr_image *img, double *cx, double *cy) {
    double sum = 0, sx = 0, sy = 0;
    int x, y;
    for (y = 0; y < img->height; y++)
        for (x = 0; x < img->width; x++) {
            double v = img->pixels[((size_t)y * img->width + x) * img->channels];
            sum += v; sx += v * (x + 0.5); sy += v * (y + 0.5);
        }
    *cx = sum > 0 ? sx / sum : -1;
    *cy = sum > 0 ? sy / sum : -1;
}

static void poly_centroid(const ocr_polygon *p, double *cx, double *cy) {
    int k;
    *cx = *cy = 0;
    for (k = 0; k < p->n_points; k++) { *cx += p->points[k].x / p->n_points; *cy += p->points[k].y / p->n_points; }
}

/* ---------------------------------------------------------------- synthetic scenes */

typedef struct { const ocr_synth *synth; int64_t first, count; uint64_t *hashes; int failed; } render_job;

static uint64_t sample_digest(const ocr_sample *s) {
    ocr_hasher h;
    int i, k;
    ocr_hasher_init(&h, 1);
    ocr_hasher_update(&h, s->image.pixels, (size_t)s->image.width * s->image.height * s->image.channels);
    for (i = 0; i < s->n_polys; i++) {
        for (k = 0; k < s->polys[i].n_points; k++) { ocr_hasher_f64(&h, s->polys[i].points[k].x); ocr_hasher_f64(&h, s->polys[i].points[k].y); }
        ocr_hasher_str(&h, s->polys[i].text);
        ocr_hasher_u64(&h, (uint64_t)s->polys[i].ignore);
    }
    return ocr_hasher_final(&h).lo;
}

static void *render_thread(void *arg) {
    render_job *j = (render_job *)arg;
    ocr_ctx ctx;
    int64_t i;
    ocr_ctx_init(&ctx, 1, 99);
    for (i = 0; i < j->count; i++) {
        ocr_sample s;
        if (ocr_synth_sample(&ctx, j->synth, 11, j->first + i, 256, 192, &s)) { j->failed = 1; continue; }
        j->hashes[i] = sample_digest(&s);
        ocr_sample_free(&s);
    }
    ocr_ctx_free(&ctx);
    return NULL;
}

static void test_synth_deterministic_and_thread_safe(void) {
    const ocr_synth *sy = default_synth();
    ocr_ctx ctx;
    ocr_sample a, b, c, d;
    uint64_t serial[8], threaded[8];
    render_job jobs[2];
    pthread_t th[2];
    int i;
    OCR_CHECK(sy != NULL);
    if (!sy) return;
    OCR_CHECK(sy->n_fonts >= 1);
    ocr_ctx_init(&ctx, 1, 1);
    OCR_CHECK_OK(&ctx, ocr_synth_sample(&ctx, sy, 5, 3, 320, 240, &a));
    OCR_CHECK_OK(&ctx, ocr_synth_sample(&ctx, sy, 5, 3, 320, 240, &b));
    OCR_CHECK_OK(&ctx, ocr_synth_sample(&ctx, sy, 5, 4, 320, 240, &c));
    OCR_CHECK_OK(&ctx, ocr_synth_sample(&ctx, sy, 6, 3, 320, 240, &d));
    OCR_CHECK(!image_diff(&a.image, &b.image) && polys_same(&a, &b, 0.0));
    OCR_CHECK(ocr_hash_equal(a.content_hash, b.content_hash));
    OCR_CHECK(image_diff(&a.image, &c.image) && image_diff(&a.image, &d.image));
    OCR_CHECK(!ocr_hash_equal(a.content_hash, c.content_hash) && !ocr_hash_equal(a.content_hash, d.content_hash));
    OCR_CHECK(strcmp(a.id, "synth:5:3") == 0);
    ocr_sample_free(&a); ocr_sample_free(&b); ocr_sample_free(&c); ocr_sample_free(&d);
    /* two threads rendering at once (each with its own context) give what one thread gives */
    for (i = 0; i < 8; i++) {
        OCR_CHECK_OK(&ctx, ocr_synth_sample(&ctx, sy, 11, i, 256, 192, &a));
        serial[i] = sample_digest(&a);
        ocr_sample_free(&a);
    }
    for (i = 0; i < 2; i++) {
        jobs[i].synth = sy; jobs[i].first = 4 * i; jobs[i].count = 4; jobs[i].hashes = threaded + 4 * i; jobs[i].failed = 0;
        pthread_create(&th[i], NULL, render_thread, &jobs[i]);
    }
    for (i = 0; i < 2; i++) { pthread_join(th[i], NULL); OCR_CHECK(!jobs[i].failed); }
    OCR_CHECK(memcmp(serial, threaded, sizeof serial) == 0);
    ocr_ctx_free(&ctx);
}

/* Plain background: every pixel that is not background is ink of some word, and must lie on its polygon; every
   polygon holds ink, and ink reaches each of its four sides (the quad is the ink's box, not a loose one). */
static void test_synth_polygons_tight(void) {
    ocr_ctx ctx;
    ocr_synth sy;
    ocr_synth_config cfg = ocr_synth_defaults();
    int scenes = sanitized() ? 4 : 16, n, i, k, x, y, checked_sides = 0, rotated = 0, small = 0, large = 0, tiny = 0;
    ocr_ctx_init(&ctx, 1, 1);
    cfg.plain_background = 1;
    cfg.low_contrast_prob = 0; /* faint ink at the edges would be invisible, so sides could not be checked */
    cfg.lines_per_mpix = 60;
    OCR_CHECK_OK(&ctx, ocr_synth_init(&ctx, &sy, &cfg));
    for (n = 0; n < scenes; n++) {
        ocr_sample s;
        const uint8_t *bg;
        int W = 300 + 37 * n, H = 420 - 13 * n, stray = 0;
        int *ink_in = NULL;
        double (*side_gap)[4] = NULL;
        OCR_CHECK_OK(&ctx, ocr_synth_sample(&ctx, &sy, 77, n, W, H, &s));
        if (!s.image.pixels) continue;
        bg = s.image.pixels; /* text keeps 2 px from the border, so pixel (0, 0) is background */
        ink_in = (int *)calloc((size_t)s.n_polys + 1, sizeof(int));
        side_gap = (double (*)[4])malloc(((size_t)s.n_polys + 1) * sizeof *side_gap);
        for (i = 0; i < s.n_polys; i++) {
            for (k = 0; k < 4; k++) side_gap[i][k] = 1e30;
            for (k = 0; k < 4; k++)
                OCR_CHECK(s.polys[i].points[k].x >= 0 && s.polys[i].points[k].x <= W && s.polys[i].points[k].y >= 0 && s.polys[i].points[k].y <= H);
            {
                double h = hypot(s.polys[i].points[3].x - s.polys[i].points[0].x, s.polys[i].points[3].y - s.polys[i].points[0].y);
                double ang = atan2(s.polys[i].points[1].y - s.polys[i].points[0].y, s.polys[i].points[1].x - s.polys[i].points[0].x);
                small += h < 12; large += h > 40; rotated += fabs(ang) > 0.1;
            }
            { /* on a plain background only the size rule makes a word ignore */
                float x0 = s.polys[i].points[0].x, x1 = x0, y0 = s.polys[i].points[0].y, y1 = y0;
                int small_word;
                for (k = 1; k < 4; k++) {
                    x0 = fminf(x0, s.polys[i].points[k].x); x1 = fmaxf(x1, s.polys[i].points[k].x);
                    y0 = fminf(y0, s.polys[i].points[k].y); y1 = fmaxf(y1, s.polys[i].points[k].y);
                }
                small_word = x1 - x0 < 8 || y1 - y0 < 8;
                tiny += small_word;
                OCR_CHECK_MSG(s.polys[i].ignore == small_word, "scene %d word '%s' (%.1f x %.1f px) has ignore %d on a plain background",
                              n, s.polys[i].text, x1 - x0, y1 - y0, s.polys[i].ignore);
            }
        }
        for (y = 0; y < H; y++)
            for (x = 0; x < W; x++) {
                const uint8_t *p = s.image.pixels + ((size_t)y * W + x) * 3;
                int diff = abs(p[0] - bg[0]) + abs(p[1] - bg[1]) + abs(p[2] - bg[2]), owner = -1;
                double px = x + 0.5, py = y + 0.5, best = 1e30;
                if (!diff) continue;
                for (i = 0; i < s.n_polys; i++) {
                    double dd = poly_dist(&s.polys[i], px, py);
                    if (dd < best) { best = dd; owner = i; }
                }
                /* a pixel touched by the outline has its centre within half a diagonal of the ink box */
                if (best > 0.72) { if (stray++ < 3) fprintf(stderr, "  scene %d: ink pixel (%d,%d) is %.2f px from every polygon\n", n, x, y, best); continue; }
                if (best == 0) ink_in[owner]++;
                if (diff < 24) continue; /* faint antialiasing: not needed to show the sides are reached */
                for (k = 0; k < 4; k++) {
                    const ocr_point *a = &s.polys[owner].points[k], *b = &s.polys[owner].points[(k + 1) % 4];
                    double dd = seg_dist(px, py, a->x, a->y, b->x, b->y);
                    if (dd < side_gap[owner][k]) side_gap[owner][k] = dd;
                }
            }
        OCR_CHECK_MSG(stray == 0, "scene %d: %d ink pixels outside the polygons", n, stray);
        for (i = 0; i < s.n_polys; i++) {
            OCR_CHECK_MSG(ink_in[i] > 0, "scene %d: polygon %d '%s' holds no ink", n, i, s.polys[i].text);
            for (k = 0; k < 4; k++, checked_sides++)
                OCR_CHECK_MSG(side_gap[i][k] <= 1.6, "scene %d: polygon %d '%s' side %d has its nearest clear ink %.2f px away", n, i,
                              s.polys[i].text, k, side_gap[i][k]);
        }
        free(ink_in);
        free(side_gap);
        ocr_sample_free(&s);
    }
    OCR_CHECK(checked_sides > 40);
    OCR_CHECK_MSG(small > 0 && large > 0 && rotated > 0 && tiny > 0 && tiny < small, "variety: %d small (%d under 8 px, ignore), %d large, %d rotated words",
                  small, tiny, large, rotated);
    ocr_synth_free(&sy);
    ocr_ctx_free(&ctx);
}

static int utf8_valid(const char *s) {
    const unsigned char *p = (const unsigned char *)s;
    while (*p) {
        int n = *p < 0x80 ? 1 : (*p >> 5) == 6 ? 2 : (*p >> 4) == 14 ? 3 : 0, i;
        if (!n) return 0;
        for (i = 1; i < n; i++) if ((p[i] & 0xC0) != 0x80) return 0;
        p += n;
    }
    return 1;
}

/* Default scenes hold text of every kind and also strong edges that are not text (clutter). */
static void test_synth_scene_content(void) {
    const ocr_synth *sy = default_synth();
    ocr_ctx ctx;
    int n, i, x, y, scenes = sanitized() ? 4 : 12, words = 0, ignored = 0, digits = 0, non_latin = 0, punct = 0, cluttered = 0;
    if (!sy) return;
    ocr_ctx_init(&ctx, 1, 1);
    for (n = 0; n < scenes; n++) {
        ocr_sample s;
        int edges_outside = 0;
        OCR_CHECK_OK(&ctx, ocr_synth_sample(&ctx, sy, 2024, n, 480, 360, &s));
        if (!s.image.pixels) continue;
        for (i = 0; i < s.n_polys; i++) {
            const char *t = s.polys[i].text;
            words++;
            ignored += s.polys[i].ignore;
            OCR_CHECK(t && t[0] && utf8_valid(t));
            if (!t) continue;
            digits += strpbrk(t, "0123456789") != NULL;
            punct += strpbrk(t, ".,;:!?()-/%$+'\"@") != NULL;
            non_latin += (unsigned char)t[0] == 0xCE || (unsigned char)t[0] == 0xCF || (unsigned char)t[0] == 0xD0 || (unsigned char)t[0] == 0xD1;
        }
        /* strong luminance edges more than 3 px away from every word */
        for (y = 1; y < s.image.height - 1; y += 2)
            for (x = 1; x < s.image.width - 1; x += 2) {
                const uint8_t *p = s.image.pixels + ((size_t)y * s.image.width + x) * 3;
                int g = abs(p[3] - p[-3]) + abs(p[(size_t)s.image.width * 3] - p[-(ptrdiff_t)s.image.width * 3]), near = 0;
                if (g < 60) continue;
                for (i = 0; i < s.n_polys && !near; i++) near = poly_dist(&s.polys[i], x + 0.5, y + 0.5) < 3;
                edges_outside += !near;
            }
        cluttered += edges_outside > 30;
        ocr_sample_free(&s);
    }
    OCR_CHECK_MSG(words >= 5 * scenes, "%d words in %d scenes", words, scenes);
    OCR_CHECK_MSG(ignored > 0 && ignored < words / 3, "%d of %d words ignore", ignored, words);
    OCR_CHECK_MSG(digits > 0 && punct > 0 && non_latin > 0, "digits %d, punctuation %d, Greek/Cyrillic %d", digits, punct, non_latin);
    OCR_CHECK_MSG(cluttered >= scenes / 2, "only %d of %d scenes have clutter away from the text", cluttered, scenes);
    ocr_ctx_free(&ctx);
}

/* Faint text is ignore; well-contrasted text on a flat background never is. */
static void test_synth_faint_text_ignored(void) {
    ocr_ctx ctx;
    ocr_synth sy;
    ocr_synth_config cfg = ocr_synth_defaults();
    int n, i, words = 0, ignored = 0;
    ocr_ctx_init(&ctx, 1, 1);
    cfg.plain_background = 1;
    cfg.low_contrast_prob = 1;
    OCR_CHECK_OK(&ctx, ocr_synth_init(&ctx, &sy, &cfg));
    for (n = 0; n < 6; n++) {
        ocr_sample s;
        OCR_CHECK_OK(&ctx, ocr_synth_sample(&ctx, &sy, 3, n, 400, 300, &s));
        for (i = 0; i < s.n_polys; i++) { words++; ignored += s.polys[i].ignore; }
        ocr_sample_free(&s);
    }
    OCR_CHECK_MSG(words > 10 && ignored >= words * 9 / 10, "%d of %d faint words ignore", ignored, words);
    ocr_synth_free(&sy);
    ocr_ctx_free(&ctx);
}

static void test_synth_sizes_and_errors(void) {
    const ocr_synth *sy = default_synth();
    static const int sizes[][2] = {{1, 1}, {7, 3}, {33, 17}, {1500, 40}, {40, 900}, {97, 1203}};
    ocr_ctx ctx;
    ocr_synth bad, one;
    ocr_synth_config cfg;
    ocr_sample s;
    ocr_dataset ds;
    int i, k;
    if (!sy) return;
    ocr_ctx_init(&ctx, 1, 1);
    for (i = 0; i < (int)(sizeof sizes / sizeof sizes[0]); i++) {
        OCR_CHECK_OK(&ctx, ocr_synth_sample(&ctx, sy, 1, i, sizes[i][0], sizes[i][1], &s));
        OCR_CHECK(s.image.width == sizes[i][0] && s.image.height == sizes[i][1] && s.image.channels == 3);
        for (k = 0; k < s.n_polys; k++)
            OCR_CHECK(s.polys[k].points[0].x >= 0 && s.polys[k].points[2].x <= sizes[i][0] && s.polys[k].n_points == 4);
        ocr_sample_free(&s);
    }
    OCR_CHECK_ERR(&ctx, ocr_synth_sample(&ctx, sy, 1, 0, 0, 10, &s), OCR_ERANGE, "0x10");
    OCR_CHECK_ERR(&ctx, ocr_synth_sample(&ctx, sy, 1, 0, 10, OCR_IMAGE_MAX_SIDE + 1, &s), OCR_ERANGE, "ocr_synth_sample");
    OCR_CHECK(s.image.pixels == NULL && s.polys == NULL);
    memset(&bad, 0, sizeof bad);
    OCR_CHECK_ERR(&ctx, ocr_synth_sample(&ctx, &bad, 1, 0, 10, 10, &s), OCR_EINVAL, "ocr_synth_init first");
    cfg = ocr_synth_defaults();
    cfg.min_text_px = 50; cfg.max_text_px = 20;
    OCR_CHECK_ERR(&ctx, ocr_synth_init(&ctx, &bad, &cfg), OCR_EINVAL, "min_text_px");
    cfg = ocr_synth_defaults();
    cfg.blur_prob = NAN;
    OCR_CHECK_ERR(&ctx, ocr_synth_init(&ctx, &bad, &cfg), OCR_EINVAL, "config.blur_prob");
    cfg = ocr_synth_defaults();
    cfg.font_path = "/nonexistent/fonts";
    OCR_CHECK_ERR(&ctx, ocr_synth_init(&ctx, &bad, &cfg), OCR_ENOTFOUND, "/nonexistent/fonts");
    cfg.font_path = "tests"; /* a folder without fonts */
    OCR_CHECK_ERR(&ctx, ocr_synth_init(&ctx, &bad, &cfg), OCR_ENOTFOUND, "no usable");
    cfg.font_path = "tests/test_data_synth.c"; /* a file that is not a font */
    OCR_CHECK_ERR(&ctx, ocr_synth_init(&ctx, &bad, &cfg), OCR_ENOTFOUND, "no usable");
    cfg.font_path = "/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf";
    OCR_CHECK_OK(&ctx, ocr_synth_init(&ctx, &one, &cfg));
    OCR_CHECK(one.n_fonts == 1 && !ocr_hash_equal(one.identity, sy->identity));
    /* the dataset view renders the same scenes */
    OCR_CHECK_OK(&ctx, ocr_dataset_open_synth(&ctx, &ds, &one, 9, 5, 200, 100));
    OCR_CHECK(ds.count == 5);
    OCR_CHECK_OK(&ctx, ocr_dataset_get(&ctx, &ds, 4, 0, &s));
    {
        ocr_sample t;
        OCR_CHECK_OK(&ctx, ocr_synth_sample(&ctx, &one, 9, 4, 200, 100, &t));
        OCR_CHECK(!image_diff(&s.image, &t.image) && polys_same(&s, &t, 0));
        ocr_sample_free(&t);
    }
    ocr_sample_free(&s);
    OCR_CHECK_ERR(&ctx, ocr_dataset_get(&ctx, &ds, 5, 0, &s), OCR_ERANGE, "index 5");
    ocr_dataset_close(&ds);
    OCR_CHECK_ERR(&ctx, ocr_dataset_open_synth(&ctx, &ds, &one, 9, -1, 200, 100), OCR_ERANGE, "count -1");
    ocr_synth_free(&one);
    ocr_ctx_free(&ctx);
}

/* ---------------------------------------------------------------- augmentation */

static void test_flip_rotate_single_pixel(void) {
    ocr_ctx ctx;
    ocr_sample s;
    float quad[8] = {2, 1, 3, 1, 3, 2, 2, 2}; /* the square of pixel (2, 1) */
    double cx, cy;
    int x, y, lit = 0;
    ocr_ctx_init(&ctx, 1, 1);
    make_mask_sample(&ctx, &s, 9, 6, quad, 1, NULL, 0);
    OCR_CHECK_OK(&ctx, ocr_sample_flip(&ctx, &s));
    for (y = 0; y < 6; y++)
        for (x = 0; x < 9; x++) {
            int v = s.image.pixels[(y * 9 + x) * 3];
            OCR_CHECK_MSG(v == ((x == 6 && y == 1) ? 255 : 0), "flip: pixel (%d,%d) = %d", x, y, v);
        }
    poly_centroid(&s.polys[0], &cx, &cy);
    OCR_CHECK(fabs(cx - 6.5) < 1e-6 && fabs(cy - 1.5) < 1e-6);
    ocr_sample_free(&s);
    /* 90 degrees counter-clockwise on screen about the centre of an 8x8 image: pixel (x, y) -> (y, 7 - x) */
    make_mask_sample(&ctx, &s, 8, 8, quad, 1, NULL, 0);
    OCR_CHECK_OK(&ctx, ocr_sample_rotate(&ctx, &s, 90.0f));
    for (y = 0; y < 8; y++)
        for (x = 0; x < 8; x++) {
            int v = s.image.pixels[(y * 8 + x) * 3];
            lit += v != 0;
            OCR_CHECK_MSG(v == ((x == 1 && y == 5) ? 255 : 0), "rotate 90: pixel (%d,%d) = %d", x, y, v);
        }
    OCR_CHECK(lit == 1);
    poly_centroid(&s.polys[0], &cx, &cy);
    OCR_CHECK_MSG(fabs(cx - 1.5) < 1e-4 && fabs(cy - 5.5) < 1e-4, "rotated polygon centre (%g, %g)", cx, cy);
    ocr_sample_free(&s);
    ocr_ctx_free(&ctx);
}

/* A 5x5 block through a small rotation, resizes and a crop: its intensity centre lands on its polygon's centre. */
static void test_block_follows_polygon(void) {
    ocr_ctx ctx;
    float quad[8] = {21, 13, 26, 13, 26, 18, 21, 18};
    double cx, cy, px, py;
    int step;
    ocr_ctx_init(&ctx, 2, 1);
    for (step = 0; step < 5; step++) {
        ocr_sample s;
        make_mask_sample(&ctx, &s, 60, 50, quad, 1, NULL, 0);
        switch (step) {
        case 0: OCR_CHECK_OK(&ctx, ocr_sample_rotate(&ctx, &s, 7.0f)); break;
        case 1: OCR_CHECK_OK(&ctx, ocr_sample_rotate(&ctx, &s, -9.5f)); break;
        case 2: OCR_CHECK_OK(&ctx, ocr_sample_resize(&ctx, &s, 139, 77)); break;
        case 3: OCR_CHECK_OK(&ctx, ocr_sample_resize(&ctx, &s, 30, 25)); break;
        default: OCR_CHECK_OK(&ctx, ocr_sample_crop(&ctx, &s, 10, 5, 40, 30, 64, 64)); break;
        }
        intensity_centroid(&s.image, &cx, &cy);
        OCR_CHECK(s.n_polys == 1);
        if (s.n_polys == 1) {
            poly_centroid(&s.polys[0], &px, &py);
            /* point sampling does not preserve mass exactly: a half-pixel convention error would be >= 0.25 px */
            OCR_CHECK_MSG(fabs(cx - px) < 0.1 && fabs(cy - py) < 0.1, "step %d: block centre (%.3f, %.3f), polygon centre (%.3f, %.3f)",
                          step, cx, cy, px, py);
        }
        ocr_sample_free(&s);
    }
    ocr_ctx_free(&ctx);
}

static void test_crop_places_top_left(void) {
    ocr_ctx ctx;
    ocr_sample s;
    float quads[16] = {20, 10, 30, 10, 30, 20, 20, 20, /* inside the crop */
                       80, 10, 90, 10, 90, 20, 80, 20}; /* outside it */
    int x, y, nonzero_pad = 0;
    ocr_ctx_init(&ctx, 1, 1);
    make_mask_sample(&ctx, &s, 100, 60, quads, 2, NULL, 0);
    /* 40x50 into 64x64: scale min(1.6, 1.28) = 1.28, placed part 51x64, the rest zero */
    OCR_CHECK_OK(&ctx, ocr_sample_crop(&ctx, &s, 10, 5, 40, 50, 64, 64));
    OCR_CHECK(s.image.width == 64 && s.image.height == 64);
    for (y = 0; y < 64; y++)
        for (x = 51; x < 64; x++) nonzero_pad += s.image.pixels[(y * 64 + x) * 3] != 0;
    OCR_CHECK(nonzero_pad == 0);
    OCR_CHECK(s.n_polys == 1);
    if (s.n_polys == 1) OCR_CHECK(fabs(s.polys[0].points[0].x - 10 * 51.0 / 40) < 1e-4 && fabs(s.polys[0].points[0].y - 5 * 64.0 / 50) < 1e-4);
    ocr_sample_free(&s);
    ocr_ctx_free(&ctx);
}

/* Resampling against OpenCV (fixture): equal within 2 levels where both interpolate inside the image. */
static void test_resample_matches_opencv(void) {
    ocr_ctx ctx;
    ocr_safetensors st;
    ocr_tensor input, ref, mask;
    static const char *const names[3] = {"resize_up", "resize_down", "rotate"};
    int t;
    ocr_ctx_init(&ctx, 1, 1);
    if (ocr_safetensors_open(&ctx, &st, "tests/fixtures/synth/warp_ref.safetensors") != OCR_OK) {
        OCR_CHECK_MSG(0, "%s (run /usr/bin/python3 tools/make_synth_fixtures.py)", ocr_ctx_last_error(&ctx));
        ocr_ctx_free(&ctx);
        return;
    }
    OCR_CHECK_OK(&ctx, ocr_safetensors_read(&ctx, &st, "input", &input));
    for (t = 0; t < 3; t++) {
        ocr_sample s;
        char mname[64];
        int64_t i, n, compared = 0, worst = 0;
        memset(&s, 0, sizeof s);
        snprintf(mname, sizeof mname, "%s_mask", names[t]);
        OCR_CHECK_OK(&ctx, ocr_safetensors_read(&ctx, &st, names[t], &ref));
        OCR_CHECK_OK(&ctx, ocr_safetensors_read(&ctx, &st, mname, &mask));
        OCR_CHECK_OK(&ctx, ocr_image_alloc(&ctx, &s.image, (int)input.shape.dim[1], (int)input.shape.dim[0], 3));
        memcpy(s.image.pixels, input.data, ocr_tensor_bytes(&input));
        if (t < 2) OCR_CHECK_OK(&ctx, ocr_sample_resize(&ctx, &s, (int)ref.shape.dim[1], (int)ref.shape.dim[0]));
        else OCR_CHECK_OK(&ctx, ocr_sample_rotate(&ctx, &s, 7.5f));
        OCR_CHECK(s.image.width == ref.shape.dim[1] && s.image.height == ref.shape.dim[0]);
        n = ocr_tensor_numel(&ref);
        for (i = 0; i < n && s.image.width == ref.shape.dim[1]; i++) {
            int d = abs((int)s.image.pixels[i] - (int)((uint8_t *)ref.data)[i]);
            if (!((uint8_t *)mask.data)[i / 3]) continue;
            compared++;
            if (d > worst) worst = d;
        }
        OCR_CHECK_MSG(worst <= 2 && compared > n / 6, "%s: worst difference %lld over %lld values", names[t], (long long)worst, (long long)compared);
        ocr_tensor_free(&ref);
        ocr_tensor_free(&mask);
        ocr_sample_free(&s);
    }
    ocr_tensor_free(&input);
    ocr_safetensors_close(&st);
    ocr_ctx_free(&ctx);
}

static double poly_area(const ocr_polygon *p) {
    double a = 0;
    int k;
    for (k = 0; k < p->n_points; k++) {
        const ocr_point *u = &p->points[k], *v = &p->points[(k + 1) % p->n_points];
        a += (double)u->x * v->y - (double)v->x * u->y;
    }
    return fabs(a) / 2;
}

/* The whole random chain on filled polygons: afterwards the image and the polygons' own masks disagree only next
   to a polygon edge. The source mask is a staircase (filled where pixel centres are inside), so an edge is known to
   half a source pixel: the allowed distance grows with the scale. Pixels that are exactly 0 have no source (padding,
   corners rotated in) and are not compared: polygons are not clipped (as in DBNet), the target maps clip them.
   Also: deterministic in the rng. */
static void test_augment_masks_stay_aligned(void) {
    ocr_ctx ctx;
    ocr_augment_config cfg = ocr_augment_defaults();
    int trial, trials = sanitized() ? 12 : 60, with_text = 0;
    ocr_ctx_init(&ctx, 1, 1);
    cfg.crop_width = 160;
    cfg.crop_height = 128;
    for (trial = 0; trial < trials; trial++) {
        ocr_rng gen, rng, rng2;
        ocr_sample s, again;
        float quads[6 * 8];
        int ignore[6], n = 1 + trial % 6, i, x, y, far_off = 0;
        double area_before, scale = 3.0, tolerance;
        ocr_rng_seed(&gen, 1000 + (uint64_t)trial);
        for (i = 0; i < n; i++) { /* rotated rectangles of various sizes, inside the image (no pixels outside it) */
            float a = 3 + ocr_rng_uniform(&gen) * 25, b = 2 + ocr_rng_uniform(&gen) * 10, r = a + b + 2;
            float cx = r + ocr_rng_uniform(&gen) * (200 - 2 * r), cy = r + ocr_rng_uniform(&gen) * (130 - 2 * r);
            float t = (ocr_rng_uniform(&gen) - 0.5f) * 1.2f, c = cosf(t), sn = sinf(t);
            float lx[4] = {-1, 1, 1, -1}, ly[4] = {-1, -1, 1, 1};
            int k;
            for (k = 0; k < 4; k++) { quads[i * 8 + 2 * k] = cx + lx[k] * a * c - ly[k] * b * sn; quads[i * 8 + 2 * k + 1] = cy + lx[k] * a * sn + ly[k] * b * c; }
            ignore[i] = i == 3;
        }
        make_mask_sample(&ctx, &s, 200, 130, quads, n, ignore, 40);
        make_mask_sample(&ctx, &again, 200, 130, quads, n, ignore, 40);
        area_before = poly_area(&s.polys[0]);
        ocr_rng_seed(&rng, (uint64_t)trial);
        ocr_rng_seed(&rng2, (uint64_t)trial);
        OCR_CHECK_OK(&ctx, ocr_augment_sample(&ctx, &rng, &cfg, &s));
        OCR_CHECK_OK(&ctx, ocr_augment_sample(&ctx, &rng2, &cfg, &again));
        OCR_CHECK(!image_diff(&s.image, &again.image) && polys_same(&s, &again, 0));
        OCR_CHECK(s.image.width == 160 && s.image.height == 128);
        for (i = 0; i < s.n_polys; i++) with_text += !s.polys[i].ignore;
        for (i = 0; i < s.n_polys; i++) /* the chain scales every area alike; polygon p0 may have been dropped */
            if (strcmp(s.polys[i].text, "p0") == 0) scale = sqrt(poly_area(&s.polys[i]) / area_before);
        tolerance = 0.75 + 0.5 * scale;
        for (y = 0; y < s.image.height; y++)
            for (x = 0; x < s.image.width; x++) {
                int v = s.image.pixels[((size_t)y * s.image.width + x) * 3], lit = v >= 148, in = 0; /* between 40 and 255 */
                double edge = 1e30;
                if (v == 0) continue;
                for (i = 0; i < s.n_polys; i++) {
                    double d = boundary_dist(&s.polys[i], x + 0.5, y + 0.5);
                    in |= inside_poly(&s.polys[i], x + 0.5, y + 0.5);
                    if (d < edge) edge = d;
                }
                if (lit != in && edge > tolerance) {
                    if (far_off++ < 3)
                        fprintf(stderr, "  trial %d: pixel (%d,%d) is %s but %s a polygon (%.2f px from an edge)\n", trial, x, y,
                                lit ? "lit" : "dark", in ? "inside" : "outside", edge);
                }
            }
        OCR_CHECK_MSG(far_off == 0, "trial %d: %d pixels disagree with the polygons away from their edges", trial, far_off);
        ocr_sample_free(&s);
        ocr_sample_free(&again);
    }
    OCR_CHECK(with_text > trials / 2);
    ocr_ctx_free(&ctx);
}

/* ocr_augment_sample equals its steps done one at a time with the same draws (polygons exactly, pixels up to the
   extra blur of resampling several times). */
static void test_augment_equals_steps(void) {
    ocr_ctx ctx;
    ocr_augment_config cfg = ocr_augment_defaults();
    float quads[16] = {30, 20, 70, 24, 68, 40, 28, 36, 100, 60, 140, 60, 140, 75, 100, 75};
    int trial;
    ocr_ctx_init(&ctx, 1, 1);
    cfg.crop_width = cfg.crop_height = 96;
    for (trial = 0; trial < 8; trial++) {
        ocr_rng a, b;
        ocr_sample one, steps;
        int rect[4], flip, i, k;
        float angle, scale;
        double mad = 0;
        make_mask_sample(&ctx, &one, 170, 100, quads, 2, NULL, 0);
        make_mask_sample(&ctx, &steps, 170, 100, quads, 2, NULL, 0);
        ocr_rng_seed(&a, 500 + (uint64_t)trial);
        ocr_rng_seed(&b, 500 + (uint64_t)trial);
        OCR_CHECK_OK(&ctx, ocr_augment_sample(&ctx, &a, &cfg, &one));
        flip = ocr_rng_uniform(&b) < cfg.flip_prob;
        angle = (2.0f * ocr_rng_uniform(&b) - 1.0f) * cfg.max_rotate_deg;
        scale = cfg.min_scale + (cfg.max_scale - cfg.min_scale) * ocr_rng_uniform(&b);
        if (flip) OCR_CHECK_OK(&ctx, ocr_sample_flip(&ctx, &steps));
        OCR_CHECK_OK(&ctx, ocr_sample_rotate(&ctx, &steps, angle));
        OCR_CHECK_OK(&ctx, ocr_sample_resize(&ctx, &steps, (int)rint(170 * (double)scale), (int)rint(100 * (double)scale)));
        OCR_CHECK_OK(&ctx, ocr_random_crop_rect(&ctx, &b, steps.polys, steps.n_polys, steps.image.width, steps.image.height,
                                                cfg.crop_max_tries, cfg.crop_min_side_ratio, rect));
        OCR_CHECK_OK(&ctx, ocr_sample_crop(&ctx, &steps, rect[0], rect[1], rect[2], rect[3], 96, 96));
        OCR_CHECK_MSG(polys_same(&one, &steps, 1e-3), "trial %d: polygons differ between the fused chain and the steps", trial);
        for (i = 0, k = 96 * 96 * 3; i < k; i++) mad += abs(one.image.pixels[i] - steps.image.pixels[i]);
        OCR_CHECK_MSG(mad / k < 6, "trial %d: mean pixel difference %.2f", trial, mad / k);
        ocr_sample_free(&one);
        ocr_sample_free(&steps);
    }
    ocr_ctx_free(&ctx);
}

/* The EAST crop: inside the image, sides >= ratio, keeps a care polygon, and cuts through none. */
static void test_random_crop_rect(void) {
    ocr_ctx ctx;
    int trial, cropped = 0;
    ocr_ctx_init(&ctx, 1, 1);
    for (trial = 0; trial < 400; trial++) {
        ocr_rng gen, rng;
        ocr_polygon polys[8];
        ocr_point pts[8][4];
        int W = 50 + trial % 300, H = 40 + (trial * 7) % 200, n = trial % 8, i, k, rect[4], kept = 0;
        ocr_rng_seed(&gen, (uint64_t)trial);
        for (i = 0; i < n; i++) {
            float x = ocr_rng_uniform(&gen) * W - 10, y = ocr_rng_uniform(&gen) * H - 5, w = 2 + ocr_rng_uniform(&gen) * W / 4, h = 2 + ocr_rng_uniform(&gen) * H / 5;
            pts[i][0].x = x; pts[i][0].y = y; pts[i][1].x = x + w; pts[i][1].y = y + 1;
            pts[i][2].x = x + w; pts[i][2].y = y + h; pts[i][3].x = x - 1; pts[i][3].y = y + h;
            polys[i].points = pts[i]; polys[i].n_points = 4; polys[i].ignore = i == 2; polys[i].text = NULL;
        }
        ocr_rng_seed(&rng, (uint64_t)trial * 31);
        OCR_CHECK_OK(&ctx, ocr_random_crop_rect(&ctx, &rng, polys, n, W, H, 10, 0.1f, rect));
        OCR_CHECK(rect[0] >= 0 && rect[1] >= 0 && rect[2] >= 1 && rect[3] >= 1 && rect[0] + rect[2] <= W && rect[1] + rect[3] <= H);
        if (rect[0] == 0 && rect[1] == 0 && rect[2] == W && rect[3] == H) continue;
        cropped++;
        OCR_CHECK(rect[2] >= 0.1 * W && rect[3] >= 0.1 * H);
        for (i = 0; i < n; i++) {
            double lo_x = 1e9, hi_x = -1e9, lo_y = 1e9, hi_y = -1e9;
            int a, b;
            if (polys[i].ignore) continue;
            for (k = 0; k < 4; k++) {
                lo_x = fmin(lo_x, rint(pts[i][k].x)); hi_x = fmax(hi_x, rint(pts[i][k].x));
                lo_y = fmin(lo_y, rint(pts[i][k].y)); hi_y = fmax(hi_y, rint(pts[i][k].y));
            }
            kept += !(hi_x < rect[0] || lo_x > rect[0] + rect[2] || hi_y < rect[1] || lo_y > rect[1] + rect[3]);
            /* covered columns [a, b) (clipped) hold neither crop edge column */
            a = (int)fmax(0, fmin(W, lo_x)); b = (int)fmax(0, fmin(W, hi_x));
            OCR_CHECK_MSG(!(a <= rect[0] && rect[0] < b) && !(a <= rect[0] + rect[2] && rect[0] + rect[2] < b),
                          "trial %d: crop x edges %d, %d cut polygon %d covering columns [%d, %d)", trial, rect[0], rect[0] + rect[2], i, a, b);
            a = (int)fmax(0, fmin(H, lo_y)); b = (int)fmax(0, fmin(H, hi_y));
            OCR_CHECK_MSG(!(a <= rect[1] && rect[1] < b) && !(a <= rect[1] + rect[3] && rect[1] + rect[3] < b),
                          "trial %d: crop y edges cut polygon %d", trial, i);
        }
        OCR_CHECK_MSG(kept > 0, "trial %d: the crop keeps no care polygon", trial);
    }
    OCR_CHECK(cropped > 150);
    /* an ignore polygon over the whole image leaves every gap open: crops still happen */
    {
        ocr_point big[4] = {{0, 0}, {100, 0}, {100, 80}, {0, 80}}, small[4] = {{40, 30}, {50, 30}, {50, 40}, {40, 40}};
        ocr_polygon two[2];
        int rect[4];
        ocr_rng rng;
        cropped = 0;
        memset(two, 0, sizeof two);
        two[0].points = big; two[0].n_points = 4; two[0].ignore = 1;
        two[1].points = small; two[1].n_points = 4;
        ocr_rng_seed(&rng, 5);
        for (trial = 0; trial < 50; trial++) {
            OCR_CHECK_OK(&ctx, ocr_random_crop_rect(&ctx, &rng, two, 2, 100, 80, 10, 0.1f, rect));
            cropped += rect[2] < 100 || rect[3] < 80;
        }
        OCR_CHECK(cropped > 25);
        /* no care polygon: the whole image */
        two[1].ignore = 1;
        OCR_CHECK_OK(&ctx, ocr_random_crop_rect(&ctx, &rng, two, 2, 100, 80, 10, 0.1f, rect));
        OCR_CHECK(rect[0] == 0 && rect[1] == 0 && rect[2] == 100 && rect[3] == 80);
    }
    ocr_ctx_free(&ctx);
}

static void test_normalize_values(void) {
    ocr_ctx ctx;
    ocr_image img, grey;
    ocr_tensor t, t4, bad;
    uint8_t px[6] = {10, 20, 30, 200, 100, 0}, g[2] = {0, 255};
    const float *v;
    ocr_ctx_init(&ctx, 1, 1);
    img.pixels = px; img.width = 2; img.height = 1; img.channels = 3;
    grey.pixels = g; grey.width = 2; grey.height = 1; grey.channels = 1;
    OCR_CHECK_OK(&ctx, ocr_tensor_alloc(&ctx, &t, "x", OCR_F32, OCR_DEVICE_CPU, ocr_shape3(3, 1, 2)));
    OCR_CHECK_OK(&ctx, ocr_image_normalize(&ctx, &img, OCR_NORM_DBNET, &t));
    v = (const float *)t.data;
    /* channel 0 is blue minus 122.679, channel 2 red minus 104.007, all / 255 */
    OCR_CHECK(fabs(v[0] - (30 - 122.67891434) / 255) < 1e-6 && fabs(v[1] - (0 - 122.67891434) / 255) < 1e-6);
    OCR_CHECK(fabs(v[2] - (20 - 116.66876762) / 255) < 1e-6 && fabs(v[3] - (100 - 116.66876762) / 255) < 1e-6);
    OCR_CHECK(fabs(v[4] - (10 - 104.00698793) / 255) < 1e-6 && fabs(v[5] - (200 - 104.00698793) / 255) < 1e-6);
    OCR_CHECK_OK(&ctx, ocr_image_normalize(&ctx, &img, OCR_NORM_IMAGENET, &t));
    OCR_CHECK(fabs(v[0] - (10 / 255.0 - 0.485) / 0.229) < 1e-5 && fabs(v[1] - (200 / 255.0 - 0.485) / 0.229) < 1e-5);
    OCR_CHECK(fabs(v[2] - (20 / 255.0 - 0.456) / 0.224) < 1e-5 && fabs(v[5] - (0 / 255.0 - 0.406) / 0.225) < 1e-5);
    OCR_CHECK_OK(&ctx, ocr_tensor_alloc(&ctx, &t4, "x4", OCR_F32, OCR_DEVICE_CPU, ocr_shape4(1, 3, 1, 2)));
    OCR_CHECK_OK(&ctx, ocr_image_normalize(&ctx, &grey, OCR_NORM_IMAGENET, &t4));
    v = (const float *)t4.data;
    OCR_CHECK(fabs(v[1] - (1 - 0.485) / 0.229) < 1e-5 && fabs(v[3] - (1 - 0.456) / 0.224) < 1e-5 && fabs(v[4] - (-0.406 / 0.225)) < 1e-5);
    OCR_CHECK_ERR(&ctx, ocr_image_normalize(&ctx, &img, (ocr_norm_mode)7, &t), OCR_EINVAL, "unknown mode 7");
    OCR_CHECK_OK(&ctx, ocr_tensor_alloc(&ctx, &bad, "wrong", OCR_F32, OCR_DEVICE_CPU, ocr_shape3(3, 2, 2)));
    OCR_CHECK_ERR(&ctx, ocr_image_normalize(&ctx, &img, OCR_NORM_DBNET, &bad), OCR_ESHAPE, "'wrong'");
    ocr_tensor_free(&bad);
    OCR_CHECK_OK(&ctx, ocr_tensor_alloc(&ctx, &bad, "half", OCR_F16, OCR_DEVICE_CPU, ocr_shape3(3, 1, 2)));
    OCR_CHECK_ERR(&ctx, ocr_image_normalize(&ctx, &img, OCR_NORM_DBNET, &bad), OCR_EDTYPE, "'half'");
    img.channels = 2;
    OCR_CHECK_ERR(&ctx, ocr_image_normalize(&ctx, &img, OCR_NORM_DBNET, &t), OCR_EINVAL, "2 channels");
    ocr_tensor_free(&bad);
    ocr_tensor_free(&t);
    ocr_tensor_free(&t4);
    ocr_ctx_free(&ctx);
}

static void test_augment_bad_arguments(void) {
    ocr_ctx ctx;
    ocr_sample s;
    ocr_rng rng;
    ocr_augment_config cfg = ocr_augment_defaults();
    float quads[16] = {1, 1, 5, 1, 5, 5, 1, 5, 2, 2, 6, 2, 6, 6, 2, 6};
    double singular[6] = {1, 2, 0, 2, 4, 0};
    int rect[4];
    ocr_ctx_init(&ctx, 1, 1);
    ocr_rng_seed(&rng, 1);
    make_mask_sample(&ctx, &s, 20, 10, quads, 2, NULL, 0);
    OCR_CHECK_ERR(&ctx, ocr_sample_flip(&ctx, NULL), OCR_EINVAL, "ocr_sample_flip");
    OCR_CHECK_ERR(&ctx, ocr_sample_resize(&ctx, &s, 0, 10), OCR_ERANGE, "ocr_sample_resize");
    OCR_CHECK_ERR(&ctx, ocr_sample_crop(&ctx, &s, 0, 0, 0, 5, 10, 10), OCR_ERANGE, "ocr_sample_crop");
    OCR_CHECK_ERR(&ctx, ocr_sample_warp(&ctx, &s, singular, 10, 10, 10, 10), OCR_EINVAL, "singular");
    OCR_CHECK_ERR(&ctx, ocr_sample_rotate(&ctx, &s, NAN), OCR_ENONFINITE, "angle");
    cfg.min_scale = 0;
    OCR_CHECK_ERR(&ctx, ocr_augment_sample(&ctx, &rng, &cfg, &s), OCR_EINVAL, "scale 0");
    cfg = ocr_augment_defaults();
    OCR_CHECK_ERR(&ctx, ocr_augment_sample(&ctx, NULL, &cfg, &s), OCR_EINVAL, "rng");
    s.polys[1].points[2].y = NAN;
    OCR_CHECK_ERR(&ctx, ocr_augment_sample(&ctx, &rng, &cfg, &s), OCR_ENONFINITE, "polygon 1 point 2");
    s.polys[1].points[2].y = 3e7f;
    OCR_CHECK_ERR(&ctx, ocr_sample_flip(&ctx, &s), OCR_ERANGE, "'mask-sample' polygon 1 point 2");
    OCR_CHECK_ERR(&ctx, ocr_random_crop_rect(&ctx, &rng, s.polys, 2, 20, 10, 10, 0.1f, rect), OCR_ERANGE, "polygon 1");
    s.polys[1].points[2].y = 6;
    OCR_CHECK_ERR(&ctx, ocr_random_crop_rect(&ctx, &rng, s.polys, 2, 20, 10, 10, 1.5f, rect), OCR_EINVAL, "min_side_ratio");
    /* a failed call leaves the sample as it was */
    OCR_CHECK(s.image.width == 20 && s.n_polys == 2 && s.polys[0].points[0].x == 1);
    ocr_image_free(&s.image);
    OCR_CHECK_ERR(&ctx, ocr_sample_rotate(&ctx, &s, 3), OCR_EINVAL, "no pixels");
    ocr_sample_free(&s);
    ocr_ctx_free(&ctx);
}

int main(int argc, char **argv) {
    ocr_test_init(argc, argv);
    OCR_TEST_RUN(test_synth_deterministic_and_thread_safe);
    OCR_TEST_RUN(test_synth_polygons_tight);
    OCR_TEST_RUN(test_synth_scene_content);
    OCR_TEST_RUN(test_synth_faint_text_ignored);
    OCR_TEST_RUN(test_synth_sizes_and_errors);
    OCR_TEST_RUN(test_flip_rotate_single_pixel);
    OCR_TEST_RUN(test_block_follows_polygon);
    OCR_TEST_RUN(test_crop_places_top_left);
    OCR_TEST_RUN(test_resample_matches_opencv);
    OCR_TEST_RUN(test_augment_masks_stay_aligned);
    OCR_TEST_RUN(test_augment_equals_steps);
    OCR_TEST_RUN(test_random_crop_rect);
    OCR_TEST_RUN(test_normalize_values);
    OCR_TEST_RUN(test_augment_bad_arguments);
    if (g_synth_ok) ocr_synth_free(&g_synth);
    return ocr_test_finish();
}
