/* Synthetic scenes (ocr_synth.h): scenes are deterministic and thread-safe, polygons are tight around the rendered
   ink, faint text is marked ignore, odd sizes work and bad arguments are errors. */
#define OCR_IMPLEMENTATION
#include "ocr_tensor.h"
#include "ocr_data.h"
#include "ocr_synth.h"
#include "ocr_test.h"
#include "ocr_test_poly.h"
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
    cfg.font_path = "tests/test_synth.c"; /* a file that is not a font */
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

int main(int argc, char **argv) {
    ocr_test_init(argc, argv);
    OCR_TEST_RUN(test_synth_deterministic_and_thread_safe);
    OCR_TEST_RUN(test_synth_polygons_tight);
    OCR_TEST_RUN(test_synth_scene_content);
    OCR_TEST_RUN(test_synth_faint_text_ignored);
    OCR_TEST_RUN(test_synth_sizes_and_errors);
    if (g_synth_ok) ocr_synth_free(&g_synth);
    return ocr_test_finish();
}
