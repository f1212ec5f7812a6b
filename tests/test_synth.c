/* Synthetic scenes (ocr_synth.h): scenes are deterministic and thread-safe, polygons are tight around the rendered
   ink, faint text is marked ignore, odd sizes work and bad arguments are errors. */
/* ocr-c build: own implementation */
#define OCR_IMPLEMENTATION
#include "ocr_tensor.h"
#include "ocr_data.h"
#include "ocr_synth.h"
#include "ocr_test.h"
#include "ocr_test_poly.h"
#include <pthread.h>
#include <errno.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>


#define FONTS "/usr/share/fonts"
#define PHOTOS "/usr/share/backgrounds"
/* two small declared photographs: each photograph a test draws on is decoded once, the slow part of a scene */
#define TWO_PHOTOS PHOTOS "/mate/nature/FreshFlower.jpg," PHOTOS "/mate/nature/GreenMeadow.jpg"

/* One synthesizer with the default config for the whole program, but two photographs of the declared ones. */
static ocr_synth g_synth;
static int g_synth_ok;

static const ocr_synth *default_synth(void) {
    if (!g_synth_ok) {
        ocr_ctx ctx;
        ocr_synth_config cfg = ocr_synth_defaults();
        cfg.photo_path = TWO_PHOTOS;
        ocr_ctx_init(&ctx, 1, 1);
        g_synth_ok = ocr_synth_init(&ctx, &g_synth, &cfg) == OCR_OK;
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
    int scenes = ocr_test_sanitized() ? 4 : 16, n, i, k, x, y, checked_sides = 0, rotated = 0, small = 0, large = 0, tiny = 0;
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
    int n, i, x, y, scenes = ocr_test_sanitized() ? 6 : 12, words = 0, ignored = 0, digits = 0, non_latin = 0, punct = 0, cluttered = 0;
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
    OCR_CHECK_MSG(words >= 4 * scenes, "%d words in %d scenes", words, scenes); /* 5.4 a scene on average */
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

/* ---------------------------------------------------------------- declared fonts and photographs */

/* Packages build.sh installs beside the declared files: text faces the declared set leaves out (fonts-go's small
   caps, fonts-dejavu-core's math face) and the tests' symbol, icon and math fonts (fonts-font-awesome, fonts-lyx). */
static const char *const extra_fonts[] = {
    "truetype/dejavu/DejaVuMathTeXGyre.ttf", "fonts-go/Go-Smallcaps.ttf", "fonts-go/Go-Smallcaps-Italic.ttf",
    "opentype/font-awesome/FontAwesome.otf", "truetype/font-awesome/fontawesome-webfont.ttf", "truetype/lyx/cmex10.ttf",
    "truetype/lyx/cmmi10.ttf", "truetype/lyx/cmr10.ttf", "truetype/lyx/cmsy10.ttf", "truetype/lyx/dsrom10.ttf",
    "truetype/lyx/esint10.ttf", "truetype/lyx/eufm10.ttf", "truetype/lyx/msam10.ttf", "truetype/lyx/msbm10.ttf",
    "truetype/lyx/rsfs10.ttf", "truetype/lyx/stmary10.ttf", "truetype/lyx/wasy10.ttf"};

static int n_declared_fonts(void) { return (int)(sizeof ocr__syn_declared_fonts / sizeof ocr__syn_declared_fonts[0]); }
static int n_declared_photos(void) { return (int)(sizeof ocr__syn_declared_photos / sizeof ocr__syn_declared_photos[0]); }

/* mkdir -p of the folder part of path */
static void make_parents(const char *path) {
    char buf[4096];
    char *p;
    snprintf(buf, sizeof buf, "%s", path);
    for (p = buf + 1; *p; p++)
        if (*p == '/') { *p = 0; mkdir(buf, 0755); *p = '/'; }
}

static void link_into(const char *root, const char *rel, const char *target) {
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", root, rel);
    make_parents(path);
    if (symlink(target, path) != 0) fprintf(stderr, "  symlink %s: %s\n", path, strerror(errno));
}

static void remove_tree(const char *dir) {
    char cmd[4200];
    if (strncmp(dir, "/tmp/ocr_test_synth.", 20) != 0) return; /* never anything but our own folder */
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd) != 0) fprintf(stderr, "  could not remove %s\n", dir);
}

static uint64_t scenes_digest(const ocr_synth *sy, int n, int w, int h) {
    ocr_ctx ctx;
    ocr_hasher hh;
    int i;
    ocr_ctx_init(&ctx, 1, 1);
    ocr_hasher_init(&hh, 7);
    for (i = 0; i < n; i++) {
        ocr_sample s;
        if (ocr_synth_sample(&ctx, sy, 2025, i, w, h, &s) != OCR_OK) { ocr_ctx_free(&ctx); return 0; }
        ocr_hasher_u64(&hh, sample_digest(&s));
        ocr_hasher_u64(&hh, s.content_hash.lo);
        ocr_sample_free(&s);
    }
    ocr_ctx_free(&ctx);
    return ocr_hasher_final(&hh).lo;
}

/* The default scenes use the declared fonts only: a font root that also holds other text faces and symbol, icon and
   math fonts, under the same and under other folders, gives the same bits; both splits, all of the declared files. */
static void test_synth_declared_fonts_only(void) {
    char dir[64] = "/tmp/ocr_test_synth.XXXXXX";
    ocr_ctx ctx;
    ocr_synth real, mixed;
    ocr_synth_config cfg = ocr_synth_defaults();
    int i, split, n = ocr_test_sanitized() ? 6 : 20;
    if (!mkdtemp(dir)) { OCR_CHECK(0); return; }
    for (i = 0; i < n_declared_fonts(); i++) {
        char target[4096];
        snprintf(target, sizeof target, FONTS "/%s", ocr__syn_declared_fonts[i].file);
        link_into(dir, ocr__syn_declared_fonts[i].file, target);
    }
    for (i = 0; i < (int)(sizeof extra_fonts / sizeof extra_fonts[0]); i++) {
        char target[4096], rel[4096];
        snprintf(target, sizeof target, FONTS "/%s", extra_fonts[i]);
        link_into(dir, extra_fonts[i], target);
        snprintf(rel, sizeof rel, "aaa/%s", strrchr(extra_fonts[i], '/') + 1); /* sorts before everything */
        link_into(dir, rel, target);
    }
    link_into(dir, "truetype/dejavu/zzz-copy-of-DejaVuSans.ttf", FONTS "/truetype/dejavu/DejaVuSans.ttf");
    ocr_ctx_init(&ctx, 1, 1);
    cfg.photo_path = "none"; /* fonts only: photographs have their own tests */
    for (split = 0; split < 2; split++) {
        cfg.split = split;
        cfg.font_root = NULL;
        OCR_CHECK_OK(&ctx, ocr_synth_init(&ctx, &real, &cfg));
        cfg.font_root = dir;
        OCR_CHECK_OK(&ctx, ocr_synth_init(&ctx, &mixed, &cfg));
        OCR_CHECK(real.n_fonts == mixed.n_fonts && real.n_fonts > 20 / (1 + 2 * split));
        OCR_CHECK(ocr_hash_equal(real.identity, mixed.identity));
        for (i = 0; i < real.n_fonts && i < mixed.n_fonts; i++) {
            OCR_CHECK(strcmp(ocr_synth_font_file(&real, i), ocr_synth_font_file(&mixed, i)) == 0);
            OCR_CHECK(strstr(ocr_synth_font_file(&real, i), "lyx") == NULL && strstr(ocr_synth_font_file(&real, i), "awesome") == NULL);
        }
        {
            uint64_t a = scenes_digest(&real, n, 256, 192), b = scenes_digest(&mixed, n, 256, 192);
            OCR_CHECK_MSG(a != 0 && a == b, "split %d: scenes differ with extra fonts under the root (%016llx vs %016llx)", split,
                          (unsigned long long)a, (unsigned long long)b);
        }
        ocr_synth_free(&real);
        ocr_synth_free(&mixed);
    }
    /* the two splits share no file and no family */
    {
        int j;
        for (i = 0; i < n_declared_fonts(); i++)
            for (j = 0; j < n_declared_fonts(); j++)
                if (ocr__syn_declared_fonts[i].split != ocr__syn_declared_fonts[j].split)
                    OCR_CHECK_MSG(strcmp(ocr__syn_declared_fonts[i].family, ocr__syn_declared_fonts[j].family) != 0 &&
                                      strcmp(ocr__syn_declared_fonts[i].file, ocr__syn_declared_fonts[j].file) != 0,
                                  "%s is in both splits", ocr__syn_declared_fonts[i].family);
    }
    /* a declared file missing: an error naming the package to install */
    {
        char path[4096];
        ocr_synth none;
        snprintf(path, sizeof path, "%s/opentype/lobster/lobster.otf", dir);
        OCR_CHECK(unlink(path) == 0);
        cfg.split = OCR_SYNTH_HELDOUT;
        OCR_CHECK_ERR(&ctx, ocr_synth_init(&ctx, &none, &cfg), OCR_ENOTFOUND, "apt-get install fonts-lobster");
        cfg.split = OCR_SYNTH_TRAIN; /* the training split does not use it */
        OCR_CHECK_OK(&ctx, ocr_synth_init(&ctx, &none, &cfg));
        ocr_synth_free(&none);
    }
    remove_tree(dir);
    ocr_ctx_free(&ctx);
}

/* A custom font list keeps the text faces and refuses exactly the symbol, icon and math fonts, naming them. */
static void test_synth_refuses_symbol_fonts(void) {
    /* judged by hand: Computer Modern Roman and Euler Fraktur are alphabets of text letters; the others hold
       symbols, icons, math letters (the period is a triangle in cmmi10) or small capitals in the lowercase slots */
    static const char *const refused[] = {"FontAwesome.otf", "fontawesome-webfont.ttf", "cmex10.ttf", "cmmi10.ttf", "cmsy10.ttf",
                                          "dsrom10.ttf", "esint10.ttf", "msam10.ttf", "msbm10.ttf", "rsfs10.ttf", "stmary10.ttf",
                                          "wasy10.ttf", "DejaVuMathTeXGyre.ttf", "Go-Smallcaps.ttf"};
    static const char *const kept[] = {"DejaVuSans.ttf", "LiberationSerif-Regular.ttf", "Go-Mono.ttf", "cmr10.ttf", "eufm10.ttf",
                                       "Lobster.otf", "DancingScript-Regular.otf"};
    ocr_ctx ctx;
    ocr_synth sy;
    ocr_synth_config cfg = ocr_synth_defaults();
    const char *msg;
    int i, k;
    ocr_ctx_init(&ctx, 1, 1);
    cfg.photo_path = "none";
    cfg.font_path = FONTS "/truetype/dejavu/DejaVuSans.ttf," FONTS "/opentype/font-awesome," FONTS "/truetype/lyx,"
                    FONTS "/truetype/font-awesome/fontawesome-webfont.ttf," FONTS "/truetype/liberation2/LiberationSerif-Regular.ttf,"
                    FONTS "/truetype/dejavu/DejaVuMathTeXGyre.ttf," FONTS "/fonts-go/Go-Smallcaps.ttf," FONTS "/fonts-go/Go-Mono.ttf,"
                    FONTS "/opentype/lobster/lobster.otf," FONTS "/opentype/dancingscript/DancingScript-Regular.otf";
    OCR_CHECK_OK(&ctx, ocr_synth_init(&ctx, &sy, &cfg));
    msg = ocr_ctx_last_error(&ctx);
    OCR_CHECK_MSG(ocr_synth_font_count(&sy) == (int)(sizeof kept / sizeof kept[0]), "%d fonts kept", ocr_synth_font_count(&sy));
    for (i = 0; i < (int)(sizeof refused / sizeof refused[0]); i++)
        OCR_CHECK_MSG(strstr(msg, refused[i]) != NULL, "%s is not named as refused in: %s", refused[i], msg);
    for (i = 0; i < (int)(sizeof kept / sizeof kept[0]); i++) {
        int found = 0;
        for (k = 0; k < ocr_synth_font_count(&sy); k++) found |= strcasecmp(strrchr(ocr_synth_font_file(&sy, k), '/') + 1, kept[i]) == 0;
        OCR_CHECK_MSG(found && !strstr(msg, kept[i]), "%s is not kept", kept[i]);
    }
    for (k = 0; k < ocr_synth_font_count(&sy); k++) OCR_CHECK(sy.fonts[k].family == k); /* custom: one family per file */
    ocr_synth_free(&sy);
    /* nothing but symbol fonts: an error that says why */
    cfg.font_path = FONTS "/truetype/lyx/cmex10.ttf," FONTS "/truetype/font-awesome";
    OCR_CHECK_ERR(&ctx, ocr_synth_init(&ctx, &sy, &cfg), OCR_ENOTFOUND, "cmex10.ttf (no x-height");
    cfg.font_path = FONTS "/truetype/lyx/cmex10.ttf,/nonexistent.ttf";
    OCR_CHECK_ERR(&ctx, ocr_synth_init(&ctx, &sy, &cfg), OCR_ENOTFOUND, "/nonexistent.ttf");
    ocr_ctx_free(&ctx);
}

static int utf8_next(const char **s) {
    const unsigned char *p = (const unsigned char *)*s;
    int c;
    if (p[0] < 0x80) { c = p[0]; *s += 1; }
    else if ((p[0] >> 5) == 6) { c = (p[0] & 31) << 6 | (p[1] & 63); *s += 2; }
    else { c = (p[0] & 15) << 12 | (p[1] & 63) << 6 | (p[2] & 63); *s += 3; }
    return c;
}

/* Every character of every word has a glyph in the font that drew it (stb_truetype's lookup, asked afresh), with the
   declared sets and with fonts that lack Greek, Cyrillic and the euro sign. */
static void test_synth_glyph_coverage(void) {
    static const char *const paths[] = {NULL, NULL, FONTS "/truetype/quicksand/Quicksand-Regular.ttf," FONTS "/opentype/lobster/lobster.otf"};
    ocr_ctx ctx;
    int run, n, i, scenes = ocr_test_sanitized() ? 8 : 30;
    ocr_ctx_init(&ctx, 1, 1);
    for (run = 0; run < 3; run++) {
        ocr_synth sy;
        ocr_synth_config cfg = ocr_synth_defaults();
        int words = 0, missing = 0, greek_or_cyrillic = 0, fonts_used = 0;
        unsigned char used[256];
        cfg.photo_path = "none";
        cfg.split = run == 1 ? OCR_SYNTH_HELDOUT : OCR_SYNTH_TRAIN;
        cfg.font_path = paths[run];
        cfg.lines_per_mpix = 80;
        memset(used, 0, sizeof used);
        OCR_CHECK_OK(&ctx, ocr_synth_init(&ctx, &sy, &cfg));
        for (n = 0; n < scenes; n++) {
            ocr_sample s;
            int fonts[512];
            OCR_CHECK_OK(&ctx, ocr__syn_render(&ctx, &sy, 31, n, 320, 240, &s, fonts, 512, 0, NULL));
            for (i = 0; i < s.n_polys && i < 512; i++) {
                const char *t = s.polys[i].text;
                const stbtt_fontinfo *info = &sy.fonts[fonts[i]].info;
                words++;
                used[fonts[i] & 255] = 1;
                while (*t) {
                    int c = utf8_next(&t);
                    greek_or_cyrillic += c >= 0x370 && c < 0x500;
                    if (stbtt_FindGlyphIndex(info, c) == 0 && missing++ < 5)
                        fprintf(stderr, "  U+%04X of '%s' is not in %s\n", c, s.polys[i].text, ocr_synth_font_file(&sy, fonts[i]));
                }
            }
            ocr_sample_free(&s);
        }
        for (i = 0; i < 256; i++) fonts_used += used[i];
        OCR_CHECK_MSG(missing == 0 && words > 3 * scenes, "run %d: %d of the characters of %d words have no glyph", run, missing, words);
        /* Greek and Cyrillic words are drawn where a font has them, and become plain letters where none has */
        OCR_CHECK_MSG(run == 2 ? greek_or_cyrillic == 0 : greek_or_cyrillic > 0, "run %d: %d Greek or Cyrillic letters", run, greek_or_cyrillic);
        OCR_CHECK_MSG(fonts_used >= (run == 2 ? 2 : 10), "run %d: only %d fonts drew words", run, fonts_used);
        ocr_synth_free(&sy);
    }
    ocr_ctx_free(&ctx);
}

/* SHA-256 against the FIPS 180-4 examples and against sha256sum on files of the lengths around the block size. */
static void test_synth_sha256(void) {
    static const struct { const char *msg, *hex; } vec[] = {
        {"", "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"},
        {"abc", "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"},
        {"abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq", "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1"},
        {"abcdefghbcdefghicdefghijdefghijkefghijklfghijklmghijklmnhijklmnoijklmnopjklmnopqklmnopqrlmnopqrsmnopqrstnopqrstu",
         "cf5b16a778af8380036ce59e7b0492370b249b11e8f07a51afac45037afee9d1"}};
    static const int lens[] = {1, 55, 56, 63, 64, 65, 119, 120, 127, 128, 1000};
    char hex[65], dir[64] = "/tmp/ocr_test_synth.XXXXXX";
    unsigned char *million = (unsigned char *)malloc(1000000), buf[1000];
    int i;
    for (i = 0; i < (int)(sizeof vec / sizeof vec[0]); i++) {
        ocr__syn_sha256_hex((const unsigned char *)vec[i].msg, strlen(vec[i].msg), hex);
        OCR_CHECK_MSG(strcmp(hex, vec[i].hex) == 0, "sha256('%s') = %s", vec[i].msg, hex);
    }
    if (million) {
        memset(million, 'a', 1000000);
        ocr__syn_sha256_hex(million, 1000000, hex);
        OCR_CHECK(strcmp(hex, "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0") == 0);
        free(million);
    }
    if (!mkdtemp(dir)) { OCR_CHECK(0); return; }
    for (i = 0; i < (int)(sizeof buf); i++) buf[i] = (unsigned char)(i * 131 + 7);
    for (i = 0; i < (int)(sizeof lens / sizeof lens[0]); i++) {
        char path[128], cmd[256], line[128] = "";
        FILE *f, *p;
        snprintf(path, sizeof path, "%s/len%d", dir, lens[i]);
        if ((f = fopen(path, "wb")) != NULL) { fwrite(buf, 1, (size_t)lens[i], f); fclose(f); }
        snprintf(cmd, sizeof cmd, "sha256sum '%s'", path);
        if ((p = popen(cmd, "r")) != NULL) { if (!fgets(line, sizeof line, p)) line[0] = 0; pclose(p); }
        ocr__syn_sha256_hex(buf, (size_t)lens[i], hex);
        OCR_CHECK_MSG(strlen(line) >= 64 && strncmp(line, hex, 64) == 0, "%d bytes: %s, sha256sum says %.64s", lens[i], hex, line);
    }
    remove_tree(dir);
}

/* The accessors name every font and photograph with the SHA-256 that sha256sum gives for its file. */
static void test_synth_asset_accessors(void) {
    ocr_ctx ctx;
    ocr_synth sy;
    ocr_synth_config cfg = ocr_synth_defaults();
    int i, k, n_train_fonts = 0, n_train_photos = 0;
    ocr_ctx_init(&ctx, 1, 1);
    OCR_CHECK_OK(&ctx, ocr_synth_init(&ctx, &sy, &cfg));
    for (i = 0; i < n_declared_fonts(); i++) n_train_fonts += ocr__syn_declared_fonts[i].split == OCR_SYNTH_TRAIN;
    for (i = 0; i < n_declared_photos(); i++) n_train_photos += ocr__syn_declared_photos[i].split == OCR_SYNTH_TRAIN;
    OCR_CHECK(ocr_synth_font_count(&sy) == n_train_fonts && ocr_synth_photo_count(&sy) == n_train_photos);
    OCR_CHECK(ocr_synth_font_file(&sy, -1) == NULL && ocr_synth_font_sha256(&sy, n_train_fonts) == NULL);
    OCR_CHECK(ocr_synth_photo_file(&sy, n_train_photos) == NULL && ocr_synth_photo_sha256(&sy, -1) == NULL);
    for (k = 0; k < 2; k++) {
        int count = k ? ocr_synth_photo_count(&sy) : ocr_synth_font_count(&sy);
        for (i = 0; i < count; i += count / 3) { /* a few of each */
            const char *file = k ? ocr_synth_photo_file(&sy, i) : ocr_synth_font_file(&sy, i);
            const char *sha = k ? ocr_synth_photo_sha256(&sy, i) : ocr_synth_font_sha256(&sy, i);
            char cmd[4200], line[128] = "";
            FILE *p;
            OCR_CHECK(file && file[0] != '/' && sha && strlen(sha) == 64);
            if (!file || !sha) continue;
            snprintf(cmd, sizeof cmd, "sha256sum '%s/%s'", k ? PHOTOS : FONTS, file);
            if ((p = popen(cmd, "r")) != NULL) { if (!fgets(line, sizeof line, p)) line[0] = 0; pclose(p); }
            OCR_CHECK_MSG(strncmp(line, sha, 64) == 0, "%s: %s, sha256sum says %.64s", file, sha, line);
        }
    }
    ocr_synth_free(&sy);
    ocr_ctx_free(&ctx);
}

/* ---------------------------------------------------------------- photographs */

/* Two threads on a fresh synthesizer (both decode photographs on first use, at once) give the serial scenes. */
static void test_synth_photos_deterministic_and_thread_safe(void) {
    ocr_ctx ctx;
    ocr_synth a, b;
    ocr_synth_config cfg = ocr_synth_defaults();
    uint64_t serial[8], threaded[8];
    render_job jobs[2];
    pthread_t th[2];
    int i, on_photo = 0;
    ocr_ctx_init(&ctx, 1, 1);
    cfg.photo_path = TWO_PHOTOS;
    cfg.photo_prob = 1;
    OCR_CHECK_OK(&ctx, ocr_synth_init(&ctx, &a, &cfg));
    OCR_CHECK_OK(&ctx, ocr_synth_init(&ctx, &b, &cfg));
    OCR_CHECK(a.n_photos == 2 && ocr_hash_equal(a.identity, b.identity));
    for (i = 0; i < 8; i++) {
        ocr_sample s;
        int photo = 0;
        OCR_CHECK_OK(&ctx, ocr__syn_render(&ctx, &a, 11, i, 256, 192, &s, NULL, 0, 0, &photo));
        serial[i] = sample_digest(&s);
        on_photo += photo;
        ocr_sample_free(&s);
    }
    OCR_CHECK(on_photo == 8);
    for (i = 0; i < 2; i++) {
        jobs[i].synth = &b; jobs[i].first = 4 * i; jobs[i].count = 4; jobs[i].hashes = threaded + 4 * i; jobs[i].failed = 0;
        pthread_create(&th[i], NULL, render_thread, &jobs[i]);
    }
    for (i = 0; i < 2; i++) { pthread_join(th[i], NULL); OCR_CHECK(!jobs[i].failed); }
    OCR_CHECK(memcmp(serial, threaded, sizeof serial) == 0);
    /* another photograph is another identity */
    ocr_synth_free(&b);
    cfg.photo_path = PHOTOS "/mate/nature/FreshFlower.jpg";
    OCR_CHECK_OK(&ctx, ocr_synth_init(&ctx, &b, &cfg));
    OCR_CHECK(!ocr_hash_equal(a.identity, b.identity));
    ocr_synth_free(&a);
    ocr_synth_free(&b);
    ocr_ctx_free(&ctx);
}

static int cmp_desc(const void *a, const void *b) { double x = *(const double *)a, y = *(const double *)b; return (x < y) - (x > y); }

/* Every word that is not ignore visibly changes what lies under it: against the same scene with its text left
   unpainted, enough of its pixels change, and the most changed 30% of them (its solid ink, or its outline) by at
   least min_contrast of the luminance range on average. */
static void test_synth_photo_text_legible(void) {
    ocr_ctx ctx;
    ocr_synth sy;
    ocr_synth_config cfg = ocr_synth_defaults();
    int n, i, x, y, scenes = ocr_test_sanitized() ? 6 : 16, care = 0, checked = 0;
    double *deltas = (double *)malloc(320 * 240 * sizeof(double));
    ocr_ctx_init(&ctx, 1, 1);
    cfg.photo_path = TWO_PHOTOS;
    cfg.photo_prob = 1;
    cfg.blur_prob = 0;      /* the final blur and noise change every pixel: compare before them */
    cfg.noise_stddev = 0;
    cfg.occlusion_prob = 0; /* occluders would count as changes */
    cfg.clutter = 0;
    OCR_CHECK_OK(&ctx, ocr_synth_init(&ctx, &sy, &cfg));
    for (n = 0; n < scenes && deltas; n++) {
        ocr_sample s, under;
        OCR_CHECK_OK(&ctx, ocr__syn_render(&ctx, &sy, 5, n, 320, 240, &s, NULL, 0, 0, NULL));
        OCR_CHECK_OK(&ctx, ocr__syn_render(&ctx, &sy, 5, n, 320, 240, &under, NULL, 0, 1, NULL));
        OCR_CHECK(s.n_polys == under.n_polys);
        for (i = 0; i < s.n_polys; i++) {
            const ocr_polygon *p = &s.polys[i];
            double top = 0, area = 0;
            int changed = 0, k, n_top;
            float b[4] = {1e9f, 1e9f, -1e9f, -1e9f};
            if (p->ignore) continue;
            care++;
            for (k = 0; k < 4; k++) {
                b[0] = fminf(b[0], p->points[k].x); b[1] = fminf(b[1], p->points[k].y);
                b[2] = fmaxf(b[2], p->points[k].x); b[3] = fmaxf(b[3], p->points[k].y);
            }
            for (y = (int)b[1]; y < (int)ceilf(b[3]) && y < 240; y++)
                for (x = (int)b[0]; x < (int)ceilf(b[2]) && x < 320; x++) {
                    const uint8_t *q = s.image.pixels + ((size_t)y * 320 + x) * 3, *u = under.image.pixels + ((size_t)y * 320 + x) * 3;
                    double d = fabs((0.299 * q[0] + 0.587 * q[1] + 0.114 * q[2]) - (0.299 * u[0] + 0.587 * u[1] + 0.114 * u[2]));
                    if (!inside_poly(p, x + 0.5, y + 0.5)) continue;
                    area++;
                    if (d > 4) deltas[changed++] = d;
                }
            if (area < 16) continue;
            checked++;
            qsort(deltas, (size_t)changed, sizeof *deltas, cmp_desc);
            n_top = (int)(0.3 * changed) > 1 ? (int)(0.3 * changed) : 1;
            for (k = 0; k < n_top && k < changed; k++) top += deltas[k];
            OCR_CHECK_MSG(changed >= 0.05 * area && top / n_top >= cfg.min_contrast * 255,
                          "scene %d word '%s': %d of %.0f pixels changed, the top 30%% by %.1f levels on average", n, p->text, changed,
                          area, top / n_top);
        }
        ocr_sample_free(&s);
        ocr_sample_free(&under);
    }
    OCR_CHECK_MSG(checked > 2 * scenes, "%d care words checked (%d care)", checked, care);
    free(deltas);
    ocr_synth_free(&sy);
    ocr_ctx_free(&ctx);
}

/* With every effect on (perspective, arcs, outlines, shadows; only blur, noise, clutter and occluders off), whatever
   the text changed lies on or near its word's polygon: the quads of bent and foreshortened words hold their ink. */
static void test_synth_effects_stay_in_polygons(void) {
    ocr_ctx ctx;
    ocr_synth sy;
    ocr_synth_config cfg = ocr_synth_defaults();
    int n, i, x, y, scenes = ocr_test_sanitized() ? 6 : 24, stray = 0, changed = 0;
    ocr_ctx_init(&ctx, 1, 1);
    cfg.photo_path = "none";
    cfg.blur_prob = 0;
    cfg.noise_stddev = 0;
    cfg.occlusion_prob = 0;
    cfg.clutter = 0;
    cfg.lines_per_mpix = 80;
    OCR_CHECK_OK(&ctx, ocr_synth_init(&ctx, &sy, &cfg));
    for (n = 0; n < scenes; n++) {
        ocr_sample s, under;
        OCR_CHECK_OK(&ctx, ocr__syn_render(&ctx, &sy, 17, n, 320, 240, &s, NULL, 0, 0, NULL));
        OCR_CHECK_OK(&ctx, ocr__syn_render(&ctx, &sy, 17, n, 320, 240, &under, NULL, 0, 1, NULL));
        for (y = 0; y < 240; y++)
            for (x = 0; x < 320; x++) {
                const uint8_t *q = s.image.pixels + ((size_t)y * 320 + x) * 3, *u = under.image.pixels + ((size_t)y * 320 + x) * 3;
                double best = 1e30;
                if (abs(q[0] - u[0]) + abs(q[1] - u[1]) + abs(q[2] - u[2]) < 24) continue;
                changed++;
                for (i = 0; i < s.n_polys && best > 0; i++) {
                    double d = poly_dist(&s.polys[i], x + 0.5, y + 0.5);
                    best = d < best ? d : best;
                }
                /* outlines reach 4 px and shadows 6 px beyond the ink */
                if (best > 7.5 && stray++ < 3) fprintf(stderr, "  scene %d: pixel (%d,%d) changed %.1f px from every polygon\n", n, x, y, best);
            }
        ocr_sample_free(&s);
        ocr_sample_free(&under);
    }
    OCR_CHECK_MSG(stray == 0 && changed > 1000 * scenes, "%d of %d changed pixels away from the polygons", stray, changed);
    ocr_synth_free(&sy);
    ocr_ctx_free(&ctx);
}

/* photo_path "none" gives the procedural scenes: the same bits as the scenes of a synthesizer with photographs that
   drew no photograph, and no scene on a photograph. */
static void test_synth_photo_none_is_procedural(void) {
    ocr_ctx ctx;
    ocr_synth none, half;
    ocr_synth_config cfg = ocr_synth_defaults();
    int n, procedural = 0, photo_scenes = 0, scenes = ocr_test_sanitized() ? 8 : 20;
    ocr_ctx_init(&ctx, 1, 1);
    cfg.photo_path = "none";
    OCR_CHECK_OK(&ctx, ocr_synth_init(&ctx, &none, &cfg));
    OCR_CHECK(none.n_photos == 0 && ocr_synth_photo_count(&none) == 0);
    cfg.photo_path = PHOTOS "/mate/nature/FreshFlower.jpg";
    cfg.photo_prob = 0.5f;
    OCR_CHECK_OK(&ctx, ocr_synth_init(&ctx, &half, &cfg));
    for (n = 0; n < scenes; n++) {
        ocr_sample a, b;
        int pa = -1, pb = -1;
        OCR_CHECK_OK(&ctx, ocr__syn_render(&ctx, &none, 9, n, 200, 150, &a, NULL, 0, 0, &pa));
        OCR_CHECK_OK(&ctx, ocr__syn_render(&ctx, &half, 9, n, 200, 150, &b, NULL, 0, 0, &pb));
        OCR_CHECK(pa == 0);
        if (pb) photo_scenes++;
        else {
            procedural++;
            OCR_CHECK_MSG(!image_diff(&a.image, &b.image) && polys_same(&a, &b, 0), "scene %d differs without a photograph", n);
        }
        ocr_sample_free(&a);
        ocr_sample_free(&b);
    }
    OCR_CHECK_MSG(procedural >= scenes / 5 && photo_scenes >= scenes / 5, "%d procedural, %d photo scenes", procedural, photo_scenes);
    ocr_synth_free(&none);
    ocr_synth_free(&half);
    ocr_ctx_free(&ctx);
}

/* A declared photograph missing under photo_root is an error naming its package; a custom list with no image, or a
   file that is no image, is an error too. */
static void test_synth_photo_errors(void) {
    char dir[64] = "/tmp/ocr_test_synth.XXXXXX";
    ocr_ctx ctx;
    ocr_synth sy;
    ocr_synth_config cfg = ocr_synth_defaults();
    int i;
    if (!mkdtemp(dir)) { OCR_CHECK(0); return; }
    ocr_ctx_init(&ctx, 1, 1);
    for (i = 0; i < n_declared_photos(); i++) {
        char target[4096];
        if (strstr(ocr__syn_declared_photos[i].package, "lomiri")) continue; /* leave these out */
        snprintf(target, sizeof target, PHOTOS "/%s", ocr__syn_declared_photos[i].file);
        link_into(dir, ocr__syn_declared_photos[i].file, target);
    }
    cfg.photo_root = dir;
    OCR_CHECK_ERR(&ctx, ocr_synth_init(&ctx, &sy, &cfg), OCR_ENOTFOUND, "apt-get install lomiri-wallpapers-16.04");
    OCR_CHECK(strstr(ocr_ctx_last_error(&ctx), "mate-backgrounds") == NULL);
    cfg.photo_prob = 0; /* photographs unused: not needed */
    OCR_CHECK_OK(&ctx, ocr_synth_init(&ctx, &sy, &cfg));
    OCR_CHECK(sy.n_photos == 0);
    ocr_synth_free(&sy);
    cfg.photo_prob = 0.5f;
    cfg.photo_path = FONTS "/truetype/dejavu"; /* a folder without images */
    OCR_CHECK_ERR(&ctx, ocr_synth_init(&ctx, &sy, &cfg), OCR_ENOTFOUND, "no .jpg");
    cfg.photo_path = FONTS "/truetype/dejavu/DejaVuSans.ttf"; /* not an image */
    OCR_CHECK_ERR(&ctx, ocr_synth_init(&ctx, &sy, &cfg), OCR_EUNSUPPORTED, "DejaVuSans.ttf");
    cfg.photo_path = "none";
    cfg.photo_prob = 2;
    OCR_CHECK_ERR(&ctx, ocr_synth_init(&ctx, &sy, &cfg), OCR_EINVAL, "photo_prob");
    cfg.photo_prob = 0.5f;
    cfg.split = 2;
    OCR_CHECK_ERR(&ctx, ocr_synth_init(&ctx, &sy, &cfg), OCR_EINVAL, "split");
    remove_tree(dir);
    ocr_ctx_free(&ctx);
}

/* ---------------------------------------------------------------- word lists */

static int write_file(const char *path, const char *text) {
    FILE *f = fopen(path, "wb");
    int ok = f && fwrite(text, 1, strlen(text), f) == strlen(text);
    if (f) ok &= fclose(f) == 0;
    return ok;
}

static int in_list(const char *word, const char *const *list, int n) {
    int i;
    for (i = 0; i < n; i++)
        if (strcmp(word, list[i]) == 0) return 1;
    return 0;
}

static void render_serial(const ocr_synth *sy, int n, uint64_t *out) {
    ocr_ctx ctx;
    int i;
    ocr_ctx_init(&ctx, 1, 1);
    for (i = 0; i < n; i++) {
        ocr_sample s;
        out[i] = 0;
        OCR_CHECK_OK(&ctx, ocr_synth_sample(&ctx, sy, 11, i, 256, 192, &s));
        if (s.image.pixels) out[i] = sample_digest(&s);
        ocr_sample_free(&s);
    }
    ocr_ctx_free(&ctx);
}

/* With words_prob 1 every word of a scene is a word of the list as written (a trailing CR stripped), words too long
   or without a font are left out and counted; words_prob 0 gives the scenes and identity of no list; the identity
   follows the list's bytes, not its path; scenes stay deterministic and thread-safe. */
static void test_synth_word_list(void) {
    static const char *const kept[] = {"apple", "Banana", "zebra's", "\303\211clair", "x9-Z,", "abcdefghijklmnopqrstuvwx"};
    static const int candidates[] = {0x4E00, 0xAC00, 0x0F40, 0x1200, 0xE000};
    const int n_kept = (int)(sizeof kept / sizeof kept[0]);
    const ocr_synth *base = default_synth();
    char dir[64] = "/tmp/ocr_test_synth.XXXXXX", path[128], path2[128], path3[128], text[512], uncovered[8];
    ocr_ctx ctx;
    ocr_synth list, zero, other, same;
    ocr_synth_config cfg = ocr_synth_defaults();
    uint64_t a[4], b[4], threaded[4];
    render_job jobs[2];
    pthread_t th[2];
    int i, k, f, too_long = -1, no_font = -1, n_polys = 0, seen[6] = {0}, distinct = 0, cp = 0;
    OCR_CHECK(base != NULL);
    if (!base || !mkdtemp(dir)) { OCR_CHECK(0); return; }
    for (k = 0; k < (int)(sizeof candidates / sizeof candidates[0]) && !cp; k++) { /* a character no loaded font has */
        for (f = 0; f < base->n_fonts && !ocr__syn_font_covers(&base->fonts[f], &candidates[k], 1); f++) {}
        if (f == base->n_fonts) cp = candidates[k];
    }
    OCR_CHECK(cp != 0);
    uncovered[ocr_utf8_put(cp, uncovered)] = 0;
    snprintf(text, sizeof text, "apple\nBanana\r\n\nzebra's\n\303\211clair\nx9-Z,\nabcdefghijklmnopqrstuvwxy\nabcdefghijklmnopqrstuvwx\nno%sfont\n",
             uncovered);
    snprintf(path, sizeof path, "%s/words.txt", dir);
    snprintf(path2, sizeof path2, "%s/copy.txt", dir);
    snprintf(path3, sizeof path3, "%s/changed.txt", dir);
    OCR_CHECK(write_file(path, text) && write_file(path2, text));
    text[0] = 'A'; /* one byte differs */
    OCR_CHECK(write_file(path3, text));
    ocr_ctx_init(&ctx, 1, 1);
    cfg.photo_path = TWO_PHOTOS; /* as default_synth */
    cfg.words_path = path;
    cfg.words_prob = 1;
    OCR_CHECK_OK(&ctx, ocr_synth_init(&ctx, &list, &cfg));
    OCR_CHECK(ocr_synth_word_count(&list, &too_long, &no_font) == n_kept && too_long == 1 && no_font == 1);
    OCR_CHECK(!ocr_hash_equal(list.identity, base->identity));
    for (i = 0; i < 6; i++) {
        ocr_sample s;
        OCR_CHECK_OK(&ctx, ocr_synth_sample(&ctx, &list, 3, i, 256, 192, &s));
        for (k = 0; k < s.n_polys; k++) {
            int w;
            n_polys++;
            OCR_CHECK_MSG(s.polys[k].text && in_list(s.polys[k].text, kept, n_kept), "scene %d word '%s' is not in the list", i,
                          s.polys[k].text ? s.polys[k].text : "(null)");
            for (w = 0; w < n_kept; w++)
                if (s.polys[k].text && strcmp(s.polys[k].text, kept[w]) == 0 && !seen[w]) { seen[w] = 1; distinct++; }
        }
        ocr_sample_free(&s);
    }
    OCR_CHECK_MSG(n_polys >= 10 && distinct >= 4, "%d words, %d distinct", n_polys, distinct);
    /* deterministic, and two threads give what one gives */
    render_serial(&list, 4, a);
    render_serial(&list, 4, b);
    for (i = 0; i < 2; i++) {
        jobs[i].synth = &list; jobs[i].first = 2 * i; jobs[i].count = 2; jobs[i].hashes = threaded + 2 * i; jobs[i].failed = 0;
        pthread_create(&th[i], NULL, render_thread, &jobs[i]);
    }
    for (i = 0; i < 2; i++) { pthread_join(th[i], NULL); OCR_CHECK(!jobs[i].failed); }
    OCR_CHECK(memcmp(a, b, sizeof a) == 0 && memcmp(a, threaded, sizeof a) == 0);
    /* words_prob 0: the list is checked, then the scenes are those of no list, bit for bit */
    cfg.words_prob = 0;
    OCR_CHECK_OK(&ctx, ocr_synth_init(&ctx, &zero, &cfg));
    OCR_CHECK(ocr_hash_equal(zero.identity, base->identity) && ocr_synth_word_count(&zero, NULL, NULL) == 0);
    OCR_CHECK(ocr_synth_words_sha256(&zero) == NULL);
    render_serial(&zero, 4, a);
    render_serial(base, 4, b);
    OCR_CHECK(memcmp(a, b, sizeof a) == 0);
    ocr_synth_free(&zero);
    /* the identity: the list's bytes and words_prob, not its path */
    cfg.words_prob = 1;
    cfg.words_path = path2;
    OCR_CHECK_OK(&ctx, ocr_synth_init(&ctx, &same, &cfg));
    OCR_CHECK(ocr_hash_equal(same.identity, list.identity));
    ocr_synth_free(&same);
    cfg.words_path = path3;
    OCR_CHECK_OK(&ctx, ocr_synth_init(&ctx, &other, &cfg));
    OCR_CHECK(!ocr_hash_equal(other.identity, list.identity));
    ocr_synth_free(&other);
    cfg.words_path = path;
    cfg.words_prob = 0.5f;
    OCR_CHECK_OK(&ctx, ocr_synth_init(&ctx, &other, &cfg));
    OCR_CHECK(!ocr_hash_equal(other.identity, list.identity) && !ocr_hash_equal(other.identity, base->identity));
    ocr_synth_free(&other);
    ocr_synth_free(&list);
    /* the list's SHA-256, against sha256sum's */
    OCR_CHECK(write_file(path, "apple\n"));
    cfg.font_path = FONTS "/truetype/dejavu/DejaVuSans.ttf";
    cfg.photo_path = "none";
    OCR_CHECK_OK(&ctx, ocr_synth_init(&ctx, &list, &cfg));
    OCR_CHECK(ocr_synth_words_sha256(&list) && strcmp(ocr_synth_words_sha256(&list),
                                                      "303980bcb9e9e6cdec515230791af8b0ab1aaa244b58a8d99152673aa22197d0") == 0);
    ocr_synth_free(&list);
    remove(path); remove(path2); remove(path3);
    rmdir(dir);
    ocr_ctx_free(&ctx);
}

/* A list with invalid UTF-8, a control character, whitespace or no usable word is refused, naming the file and the
   line; so is a missing file and a words_prob outside [0, 1]. */
static void test_synth_word_list_errors(void) {
    static const struct { const char *text, *expect; } bad[] = {
        {"ok\n\xC3(\n", "line 2: invalid UTF-8 at byte 1"},
        {"ok\nfine\nta\tb\n", "line 3: control character U+0009"},
        {"ok\n\xC2\x85\n", "line 2: control character U+0085"},
        {"ok\ntwo words\n", "line 2: whitespace (U+0020)"},
        {"ok\nnb\xC2\xA0sp\n", "line 2: whitespace (U+00A0)"},
        {"ok\r\nmid\rcr\n", "line 2: control character U+000D"},
        {"ok\n\xED\xA0\x80\n", "line 2: invalid UTF-8"}, /* a UTF-16 surrogate */
        {"\n\r\n\n", "no usable word in its 3 lines"},
        {"abcdefghijklmnopqrstuvwxyz\n", "no usable word in its 1 lines (1 over 24 characters"},
    };
    char dir[64] = "/tmp/ocr_test_synth.XXXXXX", path[128], expect[256];
    ocr_ctx ctx;
    ocr_synth sy;
    ocr_synth_config cfg = ocr_synth_defaults();
    int i;
    if (!mkdtemp(dir)) { OCR_CHECK(0); return; }
    snprintf(path, sizeof path, "%s/words.txt", dir);
    ocr_ctx_init(&ctx, 1, 1);
    cfg.font_path = FONTS "/truetype/dejavu/DejaVuSans.ttf";
    cfg.photo_path = "none";
    cfg.words_path = path;
    for (i = 0; i < (int)(sizeof bad / sizeof bad[0]); i++) {
        OCR_CHECK(write_file(path, bad[i].text));
        snprintf(expect, sizeof expect, "words file %s", path);
        OCR_CHECK_ERR(&ctx, ocr_synth_init(&ctx, &sy, &cfg), OCR_EFORMAT, expect);
        OCR_CHECK_ERR(&ctx, ocr_synth_init(&ctx, &sy, &cfg), OCR_EFORMAT, bad[i].expect);
    }
    cfg.words_prob = 0; /* checked even when unused */
    OCR_CHECK_ERR(&ctx, ocr_synth_init(&ctx, &sy, &cfg), OCR_EFORMAT, "no usable word");
    cfg.words_prob = 1.5f;
    OCR_CHECK(write_file(path, "ok\n"));
    OCR_CHECK_ERR(&ctx, ocr_synth_init(&ctx, &sy, &cfg), OCR_EINVAL, "words_prob");
    cfg.words_prob = 0.5f;
    remove(path);
    OCR_CHECK(ocr_synth_init(&ctx, &sy, &cfg) != OCR_OK && strstr(ocr_ctx_last_error(&ctx), path));
    rmdir(dir);
    ocr_ctx_free(&ctx);
}

static int cmp_str(const void *a, const void *b) { return strcmp(*(const char *const *)a, *(const char *const *)b); }

/* Debian's wamerican (build.sh installs it): every word loads, and every word of a scene is a line of the file. */
static void test_synth_word_list_wamerican(void) {
    const char *dict = "/usr/share/dict/american-english";
    ocr_ctx ctx;
    ocr_synth sy;
    ocr_synth_config cfg = ocr_synth_defaults();
    unsigned char *bytes = NULL;
    size_t size = 0, p;
    char **lines = NULL;
    int n_lines = 0, i, k, too_long = -1, no_font = -1, n_words = 0;
    ocr_ctx_init(&ctx, 1, 1);
    if (ocr_read_file(&ctx, dict, (size_t)64 << 20, &bytes, &size)) {
        OCR_CHECK_MSG(0, "%s (build.sh installs the package wamerican)", ocr_ctx_last_error(&ctx));
        ocr_ctx_free(&ctx);
        return;
    }
    lines = (char **)malloc((size + 1) * sizeof *lines);
    for (p = 0; lines && p < size;) { /* the file's lines, split independently of the library */
        char *start = (char *)bytes + p, *nl = (char *)memchr(start, '\n', size - p);
        if (!nl) break;
        *nl = 0;
        lines[n_lines++] = start;
        p = (size_t)(nl - (char *)bytes) + 1;
    }
    qsort(lines, (size_t)n_lines, sizeof *lines, cmp_str);
    cfg.photo_path = TWO_PHOTOS;
    cfg.words_path = dict;
    cfg.words_prob = 1;
    OCR_CHECK_OK(&ctx, ocr_synth_init(&ctx, &sy, &cfg));
    k = ocr_synth_word_count(&sy, &too_long, &no_font);
    OCR_CHECK_MSG(k > 90000 && k + no_font == n_lines && too_long == 0 && no_font < 100, "%d words of %d lines, %d too long, %d without a font",
                  k, n_lines, too_long, no_font);
    for (i = 0; i < 3; i++) {
        ocr_sample s;
        OCR_CHECK_OK(&ctx, ocr_synth_sample(&ctx, &sy, 21, i, 320, 240, &s));
        for (k = 0; k < s.n_polys; k++, n_words++) {
            const char *t = s.polys[k].text;
            OCR_CHECK_MSG(t && bsearch(&t, lines, (size_t)n_lines, sizeof *lines, cmp_str), "'%s' is no line of %s", t ? t : "(null)", dict);
        }
        ocr_sample_free(&s);
    }
    OCR_CHECK_MSG(n_words >= 5, "%d words", n_words);
    ocr_synth_free(&sy);
    free(lines);
    OCR_FREE(bytes);
    ocr_ctx_free(&ctx);
}

int main(int argc, char **argv) {
    ocr_test_init(argc, argv);
    OCR_TEST_RUN(test_synth_deterministic_and_thread_safe);
    OCR_TEST_RUN(test_synth_polygons_tight);
    OCR_TEST_RUN(test_synth_scene_content);
    OCR_TEST_RUN(test_synth_faint_text_ignored);
    OCR_TEST_RUN(test_synth_sizes_and_errors);
    OCR_TEST_RUN(test_synth_declared_fonts_only);
    OCR_TEST_RUN(test_synth_refuses_symbol_fonts);
    OCR_TEST_RUN(test_synth_glyph_coverage);
    OCR_TEST_RUN(test_synth_sha256);
    OCR_TEST_RUN(test_synth_asset_accessors);
    OCR_TEST_RUN(test_synth_photos_deterministic_and_thread_safe);
    OCR_TEST_RUN(test_synth_photo_text_legible);
    OCR_TEST_RUN(test_synth_effects_stay_in_polygons);
    OCR_TEST_RUN(test_synth_photo_none_is_procedural);
    OCR_TEST_RUN(test_synth_photo_errors);
    OCR_TEST_RUN(test_synth_word_list);
    OCR_TEST_RUN(test_synth_word_list_errors);
    OCR_TEST_RUN(test_synth_word_list_wamerican);
    if (g_synth_ok) ocr_synth_free(&g_synth);
    return ocr_test_finish();
}
