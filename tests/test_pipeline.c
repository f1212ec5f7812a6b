/* End-to-end reading (ocr_rec.h's ocr_pipeline and ocr_e2e_evaluator, ocr_synth.h's ocr_painter, examples/ocr):
   the ICDAR 2015 end-to-end protocol against hand-computed cases (the official transcription rule case by case, and
   an image whose precision and recall are worked out by hand); polygon straightening against a drawn arc band and
   against the perspective crop of the same rectangle; the pipeline's decisions checked against what the same
   recognizer says of each orientation (tiny models with random weights: the decisions, not the reading, are under
   test), its reading order and its refusals; the painter's font fallback against each font alone; the programs
   examples/ocr and eval_dbnet --rec / --e2e on those models. */
#define _POSIX_C_SOURCE 200809L
#define OCR_IMPLEMENTATION
#include "ocr_tensor.h"
#include "ocr_nn.h"
#include "ocr_loss.h"
#include "ocr_dbnet.h"
#include "ocr_data.h"
#include "ocr_synth.h"
#include "ocr_rec.h"
#include "ocr_test.h"
#include "ocr_test_cli.h"
#include <sys/stat.h>
#include <unistd.h>

static char g_tmp[] = "/tmp/ocr_test_pipeline_XXXXXX";
static char g_det[300], g_rec[300];

static ocr_polygon quad_poly(ocr_point *store, float x0, float y0, float x1, float y1, const char *text, int ignore) {
    ocr_polygon p;
    store[0].x = x0; store[0].y = y0; store[1].x = x1; store[1].y = y0;
    store[2].x = x1; store[2].y = y1; store[3].x = x0; store[3].y = y1;
    p.points = store;
    p.n_points = 4;
    p.ignore = ignore;
    p.text = (char *)text;
    return p;
}

/* ---------------------------------------------------------------- the protocol */

static void test_transcription_rule(void) {
    /* the official transcription_match (ONLY_REMOVE_FIRST_LAST_CHARACTER) after upper-casing both */
    OCR_CHECK(ocr_e2e_transcription_match("Hello", "hello"));
    OCR_CHECK(ocr_e2e_transcription_match("HELLO", "HeLLo"));
    OCR_CHECK(ocr_e2e_transcription_match("hello!", "hello"));   /* a special last character of the GT may go */
    OCR_CHECK(ocr_e2e_transcription_match("(hello)", "hello"));  /* both ends */
    OCR_CHECK(ocr_e2e_transcription_match("(hello)", "(hello"));
    OCR_CHECK(ocr_e2e_transcription_match("'tis", "tis"));
    OCR_CHECK(ocr_e2e_transcription_match("\xC2\xB7" "ab", "ab")); /* U+00B7 is in the list */
    OCR_CHECK(!ocr_e2e_transcription_match("hello", "hello!"));  /* only the GT's characters are dropped */
    OCR_CHECK(!ocr_e2e_transcription_match("he.llo", "hello"));  /* only at the ends */
    OCR_CHECK(!ocr_e2e_transcription_match("hello-", "hello"));  /* '-' is not in the list */
    OCR_CHECK(!ocr_e2e_transcription_match("((a))", "a"));       /* one character per end */
    OCR_CHECK(ocr_e2e_transcription_match("!", ""));             /* as the official code: "!"[1:] == "" */
    OCR_CHECK(!ocr_e2e_transcription_match("", ""));             /* an empty GT never matches (the official code raises) */
    OCR_CHECK(ocr_e2e_transcription_match("\xC3\x89" "COLE", "\xC3\xA9" "cole")); /* Latin-1 capitals fold */
    OCR_CHECK(ocr_e2e_transcription_match("\xCE\x9A\xCE\xA8", "\xCE\xBA\xCF\x88"));  /* Greek */
    OCR_CHECK(ocr_e2e_transcription_match("\xCE\xA3\xCE\x86", "\xCF\x82\xCE\xAC"));  /* ΣΆ, ςά: final sigma, tonos */
    OCR_CHECK(ocr_e2e_transcription_match("\xD0\x81\xD0\x96", "\xD1\x91\xD0\xB6"));  /* ЁЖ, ёж */
    OCR_CHECK(!ocr_e2e_transcription_match("ab", "abc") && !ocr_e2e_transcription_match("abc", "ab"));
}

static void test_e2e_by_hand(void) {
    ocr_ctx ctx;
    ocr_e2e_evaluator ev;
    ocr_e2e_result r;
    ocr_eval_counts counts;
    ocr_point gp[4][4], dp[5][4];
    ocr_polygon gt[4], det[5];
    const char *texts[5] = {"STOP", "Exit", "cafe", "noise", "zzz"};
    int64_t correct = -1;
    ocr_ctx_init(&ctx, 1, 1);
    /* care words: STOP, EXIT, cafe; one don't care; detections: STOP read right, EXIT read "Exit" (right: case),
       cafe read "cafe" but its box is offset (IoU 1/3: unmatched), a box inside the don't care (ignored), a box over
       nothing */
    gt[0] = quad_poly(gp[0], 10, 10, 50, 20, "STOP", 0);
    gt[1] = quad_poly(gp[1], 60, 10, 100, 20, "EXIT!", 0);
    gt[2] = quad_poly(gp[2], 10, 40, 50, 50, "cafe", 0);
    gt[3] = quad_poly(gp[3], 60, 40, 100, 50, NULL, 1);
    det[0] = quad_poly(dp[0], 11, 10, 50, 20, NULL, 0);
    det[1] = quad_poly(dp[1], 60, 10, 99, 21, NULL, 0);
    det[2] = quad_poly(dp[2], 30, 40, 70, 50, NULL, 0);   /* 20/60 of cafe's box */
    det[3] = quad_poly(dp[3], 62, 41, 98, 49, NULL, 0);
    det[4] = quad_poly(dp[4], 10, 80, 40, 90, NULL, 0);
    ocr_e2e_eval_init(&ev);
    OCR_CHECK_OK(&ctx, ocr_e2e_eval_add_image(&ctx, &ev, gt, 4, det, texts, 5, &counts, &correct));
    OCR_CHECK(counts.gt_care == 3 && counts.det_care == 4 && counts.det_dontcare == 1 && counts.matched == 2);
    OCR_CHECK(correct == 2);
    /* a second image: one word read wrongly */
    texts[0] = "5TOP";
    OCR_CHECK_OK(&ctx, ocr_e2e_eval_add_image(&ctx, &ev, gt, 1, det, texts, 1, &counts, &correct));
    OCR_CHECK(correct == 0 && counts.matched == 1);
    r = ocr_e2e_eval_finish(&ev);
    /* 2 correct of 4 care words and 5 care detections */
    OCR_CHECK(fabs(r.recall - 2.0 / 4) < 1e-12 && fabs(r.precision - 2.0 / 5) < 1e-12);
    OCR_CHECK(fabs(r.fscore - 2 * 0.5 * 0.4 / 0.9) < 1e-12);
    OCR_CHECK(fabs(r.det.recall - 3.0 / 4) < 1e-12 && fabs(r.det.precision - 3.0 / 5) < 1e-12);
    ocr_ctx_free(&ctx);
}

/* ---------------------------------------------------------------- straightening */

/* A white image with a dark arc band: radii 60 to 80 around (100, 130), angles 200 to 340 degrees (an upward bow). */
static void draw_band(ocr_image *img, ocr_point *poly, int *n) {
    const double cx = 100, cy = 130, r0 = 60, r1 = 80, a0 = 200 * 3.14159265358979 / 180, a1 = 340 * 3.14159265358979 / 180;
    int x, y, k, m = 12;
    for (y = 0; y < img->height; y++)
        for (x = 0; x < img->width; x++) {
            double dx = x + 0.5 - cx, dy = y + 0.5 - cy, r = sqrt(dx * dx + dy * dy), a = atan2(dy, dx);
            int in;
            if (a < 0) a += 2 * 3.14159265358979;
            in = r >= r0 && r <= r1 && a >= a0 && a <= a1;
            memset(img->pixels + ((size_t)y * img->width + x) * 3, in ? 20 : 235, 3);
        }
    /* the outline: outer arc left to right, inner arc back (clockwise on screen) */
    for (k = 0; k <= m; k++) {
        double a = a0 + (a1 - a0) * k / m;
        poly[k].x = (float)(cx + r1 * cos(a)); poly[k].y = (float)(cy + r1 * sin(a));
        poly[2 * m + 1 - k].x = (float)(cx + r0 * cos(a)); poly[2 * m + 1 - k].y = (float)(cy + r0 * sin(a));
    }
    *n = 2 * m + 2;
}

static double dark_share(const ocr_image *crop, int row, int from, int to) {
    int x, dark = 0;
    for (x = from; x < to; x++) dark += crop->pixels[((size_t)row * crop->width + x) * 3] < 128;
    return (double)dark / (to - from);
}

static void test_polygon_straightening(void) {
    ocr_ctx ctx;
    ocr_image img, straight, plain, a, b;
    ocr_rec_crop_config cc = ocr_rec_crop_defaults();
    ocr_point poly[26], quad[4], rect[8];
    ocr_polygon p;
    int n, x, y, maxdiff = 0;
    ocr_ctx_init(&ctx, 1, 1);
    OCR_CHECK_OK(&ctx, ocr_image_alloc(&ctx, &img, 200, 140, 3));
    draw_band(&img, poly, &n);
    p.points = poly; p.n_points = n; p.ignore = 0; p.text = NULL;
    OCR_CHECK_OK(&ctx, ocr_rec_polygon_quad(&ctx, &p, quad));
    cc.margin = 0.15f;
    cc.max_width = 512;
    OCR_CHECK_OK(&ctx, ocr_rec_crop_polygon(&ctx, &img, poly, n, quad, &cc, &straight));
    OCR_CHECK_OK(&ctx, ocr_rec_crop(&ctx, &img, quad, &cc, NULL, 0, &plain));
    /* straightened, the band's middle row is dark from end to end and the margin rows are light; the plain crop of its
       bounding box has the bow's ends low and its middle high */
    if (straight.pixels && plain.pixels) {
        int w = straight.width, m = (int)(0.12 * w);
        OCR_CHECK_MSG(w >= 4 * cc.height, "a band about 200 px long and 20 high should crop wide, got %dx%d", w, straight.height);
        OCR_CHECK_MSG(dark_share(&straight, cc.height / 2, m, w - m) > 0.95, "middle row %.2f dark",
                      dark_share(&straight, cc.height / 2, m, w - m));
        OCR_CHECK(dark_share(&straight, 1, m, w - m) < 0.05 && dark_share(&straight, cc.height - 2, m, w - m) < 0.05);
        OCR_CHECK_MSG(dark_share(&plain, plain.height / 2, plain.width / 8, plain.width - plain.width / 8) < 0.8,
                      "the plain crop's middle row should cross the bow (%.2f dark)",
                      dark_share(&plain, plain.height / 2, plain.width / 8, plain.width - plain.width / 8));
    }
    /* a rectangle given as 8 points straightens to what the perspective crop of its corners gives */
    rect[0].x = 40; rect[0].y = 50; rect[1].x = 90; rect[1].y = 50; rect[2].x = 140; rect[2].y = 50; rect[3].x = 140; rect[3].y = 70;
    rect[4].x = 140; rect[4].y = 90; rect[5].x = 90; rect[5].y = 90; rect[6].x = 40; rect[6].y = 90; rect[7].x = 40; rect[7].y = 70;
    quad[0].x = 40; quad[0].y = 50; quad[1].x = 140; quad[1].y = 50; quad[2].x = 140; quad[2].y = 90; quad[3].x = 40; quad[3].y = 90;
    for (y = 0; y < img.height; y++)
        for (x = 0; x < img.width; x++) memset(img.pixels + ((size_t)y * img.width + x) * 3, (x * 7 + y * 3) % 256, 3);
    cc.margin = 0.1f;
    OCR_CHECK_OK(&ctx, ocr_rec_crop_polygon(&ctx, &img, rect, 8, quad, &cc, &a));
    OCR_CHECK_OK(&ctx, ocr_rec_crop(&ctx, &img, quad, &cc, NULL, 0, &b));
    OCR_CHECK_MSG(a.width == b.width && a.height == b.height, "%dx%d against %dx%d", a.width, a.height, b.width, b.height);
    if (a.width == b.width && a.height == b.height)
        for (x = 0; x < a.width * a.height * 3; x++) {
            int d = abs((int)a.pixels[x] - (int)b.pixels[x]);
            maxdiff = d > maxdiff ? d : maxdiff;
        }
    /* the polygon's extent is measured 2% in from each end: a sub-pixel shift of the sampling grid */
    OCR_CHECK_MSG(maxdiff <= 24, "largest difference %d", maxdiff);
    EXPECT_ERR(&ctx, ocr_rec_crop_polygon(&ctx, &img, rect, 2, quad, &cc, &a), OCR_EINVAL, "ocr_rec_crop_polygon", ">= 3 points");
    ocr_image_free(&a); ocr_image_free(&b);
    ocr_image_free(&straight); ocr_image_free(&plain); ocr_image_free(&img);
    ocr_ctx_free(&ctx);
}

/* ---------------------------------------------------------------- the pipeline */

/* Tiny models with random weights, written once for the tests below. */
static void make_models(void) {
    ocr_ctx ctx;
    ocr_dbnet det;
    ocr_rec_model rec;
    ocr_charset cs;
    ocr_dbnet_config dc = ocr_dbnet_config_default();
    ocr_rec_config rc = ocr_rec_config_default();
    static const int ch[OCR_REC_BLOCKS] = {8, 8, 16, 16, 16, 16};
    ocr_ctx_init(&ctx, 1, 1);
    ocr_rng_seed(&ctx.rng, 7);
    dc.width = 0.125f;
    dc.prior_prob = 0.5f; /* a random detector that finds something */
    memcpy(rc.channels, ch, sizeof ch);
    rc.hidden = 16;
    rc.layers = 1;
    snprintf(g_det, sizeof g_det, "%s/det.safetensors", g_tmp);
    snprintf(g_rec, sizeof g_rec, "%s/rec.safetensors", g_tmp);
    OCR_CHECK_OK(&ctx, ocr_dbnet_init(&ctx, &det, &dc));
    OCR_CHECK_OK(&ctx, ocr_dbnet_save(&ctx, &det, g_det, NULL, NULL, 0));
    OCR_CHECK_OK(&ctx, ocr_charset_init(&ctx, &cs, "latin"));
    OCR_CHECK_OK(&ctx, ocr_rec_init(&ctx, &rec, &rc, &cs));
    OCR_CHECK_OK(&ctx, ocr_rec_save(&ctx, &rec, g_rec, NULL, NULL, 0));
    ocr_charset_free(&cs);
    ocr_rec_free(&rec);
    ocr_dbnet_free(&det);
    ocr_ctx_free(&ctx);
}

static void test_pipeline_refusals(void) {
    ocr_ctx ctx;
    ocr_pipeline p;
    ocr_pipeline_config pc = ocr_pipeline_config_default();
    char keys[300];
    FILE *f;
    ocr_ctx_init(&ctx, 1, 1);
    EXPECT_ERR(&ctx, ocr_pipeline_open(&ctx, &p, g_rec, g_det, &pc), OCR_EINVAL, "given as the detector, is a recognizer", "swap");
    EXPECT_ERR(&ctx, ocr_pipeline_open(&ctx, &p, g_det, g_det, &pc), OCR_EINVAL, "given as the recognizer, is a detector", "swap");
    EXPECT_ERR(&ctx, ocr_pipeline_open(&ctx, &p, g_det, "/nonexistent/rec.safetensors", &pc), OCR_EIO, "recognizer", "/nonexistent/rec");
    pc.crop.height = 48;
    EXPECT_ERR(&ctx, ocr_pipeline_open(&ctx, &p, g_det, g_rec, &pc), OCR_EINVAL, "height 48", "reads height 32");
    pc = ocr_pipeline_config_default();
    snprintf(keys, sizeof keys, "%s/keys.txt", g_tmp);
    f = fopen(keys, "w");
    if (f) { fputs("a\nb\n\xED\x95\x9C\n", f); fclose(f); }
    pc.charset = keys;
    EXPECT_ERR(&ctx, ocr_pipeline_open(&ctx, &p, g_det, g_rec, &pc), OCR_EINVAL, "another charset", "95 classes", "4 classes");
    pc = ocr_pipeline_config_default();
    pc.charset = "latin";
    OCR_CHECK_OK(&ctx, ocr_pipeline_open(&ctx, &p, g_det, g_rec, &pc));
    ocr_pipeline_close(&p);
    pc.rotate_below = 2;
    EXPECT_ERR(&ctx, ocr_pipeline_open(&ctx, &p, g_det, g_rec, &pc), OCR_EINVAL, "rotate_below 2");
    ocr_ctx_free(&ctx);
}

/* one region read alone, with no rotation tried: its confidence */
static float read_one(ocr_ctx *ctx, ocr_pipeline *p, const ocr_image *img, const ocr_point q[4], char *text, size_t cap) {
    ocr_polygon poly;
    ocr_point pts[4];
    ocr_reading r;
    float conf = -1;
    memcpy(pts, q, sizeof pts);
    poly.points = pts; poly.n_points = 4; poly.ignore = 0; poly.text = NULL;
    memset(&r, 0, sizeof r);
    OCR_CHECK_OK(ctx, ocr_pipeline_read_regions(ctx, p, img, &poly, NULL, 1, &r));
    if (r.n == 1) {
        conf = r.lines[0].rec_score;
        snprintf(text, cap, "%s", r.lines[0].text);
        OCR_CHECK(r.lines[0].rotation == 0);
    }
    ocr_reading_free(&r);
    return conf;
}

static void test_pipeline_decisions(void) {
    ocr_ctx ctx;
    ocr_pipeline p;
    ocr_pipeline_config pc = ocr_pipeline_config_default();
    ocr_image img;
    ocr_reading r;
    ocr_point store[6][4], turned[4];
    ocr_polygon regions[6];
    float conf0[6], conf180[6];
    char t0[6][64], t180[6][64];
    int i, x, y;
    ocr_ctx_init(&ctx, 1, 1);
    OCR_CHECK_OK(&ctx, ocr_image_alloc(&ctx, &img, 240, 160, 3));
    for (y = 0; y < img.height; y++)
        for (x = 0; x < img.width; x++) {
            uint8_t *q = img.pixels + ((size_t)y * img.width + x) * 3;
            q[0] = (uint8_t)((x * 13 + y * 7) % 251); q[1] = (uint8_t)((x * x + y) % 253); q[2] = (uint8_t)(y * 3 % 256);
        }
    /* six regions, given out of reading order: two rows of horizontal boxes and a tall one */
    regions[0] = quad_poly(store[0], 130, 80, 200, 100, NULL, 0);
    regions[1] = quad_poly(store[1], 10, 12, 90, 30, NULL, 0);
    regions[2] = quad_poly(store[2], 10, 82, 100, 98, NULL, 0);
    regions[3] = quad_poly(store[3], 120, 10, 180, 32, NULL, 0);
    regions[4] = quad_poly(store[4], 210, 10, 230, 70, NULL, 0);   /* 20 wide, 60 high: read top to bottom */
    regions[5] = quad_poly(store[5], 100, 120, 190, 140, NULL, 0);
    pc.min_confidence = 0;
    pc.keep_empty = 1;
    pc.rotate_below = 0;
    OCR_CHECK_OK(&ctx, ocr_pipeline_open(&ctx, &p, g_det, g_rec, &pc));
    memset(&r, 0, sizeof r);
    OCR_CHECK_OK(&ctx, ocr_pipeline_read_regions(&ctx, &p, &img, regions, NULL, 6, &r));
    OCR_CHECK(r.n == 6 && r.detections == 6);
    if (r.n == 6) {
        /* reading order: row 1 (y 10-32 and the tall box, whose centre is at y 40, further down), then row 2, then row 3 */
        OCR_CHECK(r.lines[0].poly.points[0].x == 10 && r.lines[1].poly.points[0].x == 120);
        OCR_CHECK(r.lines[2].poly.points[0].x == 210 && r.lines[2].rotation == 90);
        /* read top to bottom: the quad starts at the top right corner */
        OCR_CHECK(r.lines[2].quad[0].x == 230 && r.lines[2].quad[0].y == 10 && r.lines[2].quad[1].x == 230 && r.lines[2].quad[1].y == 70);
        OCR_CHECK(r.lines[3].poly.points[0].x == 10 && r.lines[4].poly.points[0].x == 130 && r.lines[5].poly.points[0].x == 100);
        for (i = 0; i < 6; i++) OCR_CHECK(r.lines[i].det_score == 1.0f && r.lines[i].rec_score > 0 && r.lines[i].rec_score <= 1);
    }
    /* each region's two readings, upright and turned, asked for one at a time */
    for (i = 0; i < 6; i++) {
        ocr_point q[4];
        int k;
        memcpy(q, store[i], sizeof q);
        if (i == 4) { /* the tall one as the pipeline turns it */
            ocr_point t[4] = {{230, 10}, {230, 70}, {210, 70}, {210, 10}};
            memcpy(q, t, sizeof q);
        }
        conf0[i] = read_one(&ctx, &p, &img, q, t0[i], sizeof t0[i]);
        for (k = 0; k < 4; k++) turned[k] = q[(k + 2) % 4];
        conf180[i] = read_one(&ctx, &p, &img, turned, t180[i], sizeof t180[i]);
    }
    ocr_pipeline_close(&p);
    /* trying every crop both ways keeps, for each, the reading of higher confidence */
    pc.rotate_below = 1;
    OCR_CHECK_OK(&ctx, ocr_pipeline_open(&ctx, &p, g_det, g_rec, &pc));
    OCR_CHECK_OK(&ctx, ocr_pipeline_read_regions(&ctx, &p, &img, regions, NULL, 6, &r));
    for (i = 0; i < 6 && r.n == 6; i++) {
        int j, base = i == 4 ? 90 : 0;
        for (j = 0; j < 6 && (r.lines[j].poly.points[0].x != store[i][0].x || r.lines[j].poly.points[0].y != store[i][0].y); j++) {}
        if (j == 6) { OCR_CHECK_MSG(0, "region %d lost", i); continue; }
        if (conf180[i] > conf0[i]) {
            OCR_CHECK_MSG(r.lines[j].rotation == base + 180 && strcmp(r.lines[j].text, t180[i]) == 0 &&
                              fabsf(r.lines[j].rec_score - conf180[i]) < 1e-3f,
                          "region %d: turned reads '%s' at %.4f, upright '%s' at %.4f; the pipeline kept '%s' (rotation %d)", i, t180[i],
                          conf180[i], t0[i], conf0[i], r.lines[j].text, r.lines[j].rotation);
        } else {
            OCR_CHECK_MSG(r.lines[j].rotation == base && strcmp(r.lines[j].text, t0[i]) == 0 && fabsf(r.lines[j].rec_score - conf0[i]) < 1e-3f,
                          "region %d: upright '%s' at %.4f should stay (turned '%s' at %.4f); kept '%s' rotation %d", i, t0[i], conf0[i],
                          t180[i], conf180[i], r.lines[j].text, r.lines[j].rotation);
        }
    }
    /* a region under a pixel across is left out, not an error for the image */
    {
        ocr_point dot[4] = {{50, 50}, {50.5f, 50}, {50.5f, 50}, {50, 50}};
        ocr_polygon two[2];
        ocr_reading r1;
        memset(&r1, 0, sizeof r1);
        two[0] = regions[1];
        two[1].points = dot; two[1].n_points = 4; two[1].ignore = 0; two[1].text = NULL;
        OCR_CHECK_OK(&ctx, ocr_pipeline_read_regions(&ctx, &p, &img, two, NULL, 2, &r1));
        OCR_CHECK(r1.n == 1 && r1.detections == 2 && r1.lines[0].poly.points[0].x == 10);
        ocr_reading_free(&r1);
    }
    /* dropping: nothing passes a confidence of 1, and empty readings go unless kept */
    ocr_pipeline_close(&p);
    pc.min_confidence = 1;
    OCR_CHECK_OK(&ctx, ocr_pipeline_open(&ctx, &p, g_det, g_rec, &pc));
    OCR_CHECK_OK(&ctx, ocr_pipeline_read_regions(&ctx, &p, &img, regions, NULL, 6, &r));
    OCR_CHECK(r.n == 0 && r.detections == 6);
    /* the whole image: detection, then reading; the same twice */
    {
        ocr_reading r2;
        memset(&r2, 0, sizeof r2);
        p.cfg.min_confidence = 0;
        OCR_CHECK_OK(&ctx, ocr_pipeline_read(&ctx, &p, &img, &r));
        OCR_CHECK_OK(&ctx, ocr_pipeline_read(&ctx, &p, &img, &r2));
        OCR_CHECK(r.n == r2.n && r.detections == r2.detections && r.det_seconds > 0);
        for (i = 0; i < r.n && i < r2.n; i++) OCR_CHECK(strcmp(r.lines[i].text, r2.lines[i].text) == 0);
        ocr_reading_free(&r2);
    }
    ocr_reading_free(&r);
    ocr_pipeline_close(&p);
    ocr_image_free(&img);
    ocr_ctx_free(&ctx);
}

/* ---------------------------------------------------------------- the painter */

#define DEJAVU "/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf"
#define NANUM "/usr/share/fonts/truetype/nanum/NanumGothic.ttf"

static void test_painter_fallback(void) {
    ocr_ctx ctx;
    ocr_painter both, nanum;
    ocr_image a, b;
    static const uint8_t white[3] = {255, 255, 255};
    int missing = -1, same = 1, ink = 0;
    int32_t first = 0;
    size_t k;
    ocr_ctx_init(&ctx, 1, 1);
    OCR_CHECK_OK(&ctx, ocr_painter_open(&ctx, &both, DEJAVU "," NANUM));
    OCR_CHECK_OK(&ctx, ocr_painter_open(&ctx, &nanum, NANUM));
    OCR_CHECK(ocr_painter_font_of(&both, 'A') == 0 && ocr_painter_font_of(&both, 0xD55C) == 1 && ocr_painter_font_of(&both, 0x10FFFD) == -1);
    OCR_CHECK_OK(&ctx, ocr_image_alloc(&ctx, &a, 120, 40, 3));
    OCR_CHECK_OK(&ctx, ocr_image_alloc(&ctx, &b, 120, 40, 3));
    memset(a.pixels, 0, (size_t)120 * 40 * 3);
    memset(b.pixels, 0, (size_t)120 * 40 * 3);
    /* Hangul comes from Nanum: drawn through the pair it is exactly what Nanum alone draws */
    OCR_CHECK_OK(&ctx, ocr_painter_draw(&ctx, &both, &a, 4, 4, 24, white, "\xED\x95\x9C\xEA\xB5\xAD", &missing, &first));
    OCR_CHECK(missing == 0);
    OCR_CHECK_OK(&ctx, ocr_painter_draw(&ctx, &nanum, &b, 4, 4, 24, white, "\xED\x95\x9C\xEA\xB5\xAD", NULL, NULL));
    for (k = 0; k < (size_t)120 * 40 * 3; k++) {
        same &= a.pixels[k] == b.pixels[k];
        ink += a.pixels[k] > 128;
    }
    OCR_CHECK_MSG(same && ink > 100, "Hangul drawn through the pair differs from Nanum's (ink %d)", ink);
    /* a character no font has is a box, counted and named */
    OCR_CHECK_OK(&ctx, ocr_painter_draw(&ctx, &both, &a, 4, 4, 24, white, "a\xF4\x8F\xBF\xBD" "b", &missing, &first));
    OCR_CHECK(missing == 1 && first == 0x10FFFD);
    EXPECT_ERR(&ctx, ocr_painter_draw(&ctx, &both, &a, 4, 4, 24, white, "a\xC3", NULL, NULL), OCR_EFORMAT, "not UTF-8", "byte 1");
    ocr_painter_close(&nanum); /* opening over an open painter would drop its fonts */
    EXPECT_ERR(&ctx, ocr_painter_open(&ctx, &nanum, DEJAVU ",/nonexistent/font.ttf"), OCR_EIO, "/nonexistent/font.ttf");
    OCR_CHECK(nanum.n_fonts == 0 && nanum.fonts == NULL);
    ocr_image_free(&a); ocr_image_free(&b);
    ocr_painter_close(&both);
    ocr_ctx_free(&ctx);
}

/* ---------------------------------------------------------------- the programs */

static void test_programs(void) {
    ocr_ctx ctx;
    ocr_image img;
    char cmd[2048], path[300], *out, *err, *res;
    int rc, x, y;
    ocr_ctx_init(&ctx, 1, 1);
    ocr_test_cli_ctx = &ctx;
    snprintf(ocr_test_cli_dir, sizeof ocr_test_cli_dir, "%s", g_tmp);
    OCR_CHECK_OK(&ctx, ocr_image_alloc(&ctx, &img, 96, 64, 3));
    for (y = 0; y < 64; y++)
        for (x = 0; x < 96; x++) memset(img.pixels + ((size_t)y * 96 + x) * 3, (x / 8 + y / 8) % 2 ? 230 : 30, 3);
    snprintf(path, sizeof path, "%s/img_1.png", g_tmp);
    OCR_CHECK_OK(&ctx, ocr_image_save_png(&ctx, path, &img));
    ocr_test_expect_exit("./examples/ocr --help", 0, NULL);
    ocr_test_expect_exit("./examples/ocr --det x.safetensors img.png", 2, "--det and --rec are required");
    snprintf(cmd, sizeof cmd, "./examples/ocr --det %s --rec %s --rotate-below 3 %s", g_det, g_rec, path);
    ocr_test_expect_exit(cmd, 2, "out of range");
    snprintf(cmd, sizeof cmd, "./examples/ocr --det %s --rec %s %s", g_rec, g_det, path);
    ocr_test_expect_exit(cmd, 1, "swap");
    snprintf(cmd, sizeof cmd, "./examples/ocr --det %s --rec %s --out %s/o a/x.png b/x.jpg", g_det, g_rec, g_tmp);
    ocr_test_expect_exit(cmd, 2, "would both write outputs named 'x'");
    snprintf(cmd, sizeof cmd, "./examples/ocr --det %s --rec %s %s/missing.png %s", g_det, g_rec, g_tmp, path);
    ocr_test_expect_exit(cmd, 1, "missing.png");
    /* a reading with every line kept, overlays and result files */
    snprintf(cmd, sizeof cmd, "./examples/ocr --det %s --rec %s --min-confidence 0 --threads 1 --out %s/out %s", g_det, g_rec, g_tmp, path);
    rc = ocr_test_run(cmd, &out, &err);
    OCR_CHECK_MSG(rc == 0, "ocr exited %d: %s", rc, err);
    OCR_CHECK_MSG(strstr(out, "\"lines\":[") && ocr_test_json_number(out, strlen(out), "width") == 96, "stdout: %s", out);
    free(out); free(err);
    snprintf(path, sizeof path, "%s/out/img_1.png", g_tmp);
    OCR_CHECK_MSG(access(path, R_OK) == 0, "no overlay %s", path);
    snprintf(path, sizeof path, "%s/out/res_img_1.txt", g_tmp);
    res = ocr_test_read_text(path);
    OCR_CHECK_MSG(res != NULL, "no result file %s", path);
    if (res) {
        ocr_polygon *polys = NULL;
        int n = 0;
        OCR_CHECK_OK(&ctx, ocr_gt_parse(&ctx, path, res, strlen(res), OCR_GT_ICDAR2015, &polys, &n));
        ocr_polygons_free(polys, n);
        free(res);
    }
    /* scoring them: the result files end to end, and the pipeline itself, agree */
    snprintf(path, sizeof path, "%s/gts", g_tmp);
    mkdir(path, 0755);
    snprintf(path, sizeof path, "%s/gts/gt_img_1.txt", g_tmp);
    {
        FILE *f = fopen(path, "w");
        if (f) { fputs("10,10,50,10,50,30,10,30,word\n60,30,90,30,90,50,60,50,###\n", f); fclose(f); }
    }
    snprintf(path, sizeof path, "%s/images", g_tmp);
    mkdir(path, 0755);
    snprintf(cmd, sizeof cmd, "cp %s/img_1.png %s/images/", g_tmp, g_tmp);
    OCR_CHECK(system(cmd) == 0);
    snprintf(cmd, sizeof cmd, "./examples/eval_dbnet --gt %s/gts --pred %s/out --e2e", g_tmp, g_tmp);
    rc = ocr_test_run(cmd, &out, &err);
    OCR_CHECK_MSG(rc == 0 && strstr(out, "\"e2e_fscore\":"), "eval_dbnet --e2e exited %d: %s %s", rc, out, err);
    free(out); free(err);
    snprintf(cmd, sizeof cmd, "./examples/eval_dbnet --model %s --rec %s --data icdar:%s --scale 1.4 --min-confidence 0 --threads 1", g_det,
             g_rec, g_tmp);
    rc = ocr_test_run(cmd, &out, &err);
    OCR_CHECK_MSG(rc == 0 && strstr(out, "\"e2e_correct\":0") && strstr(out, "\"seconds_per_image\":"), "eval_dbnet --rec exited %d: %s %s", rc,
                  out, err);
    free(out); free(err);
    ocr_test_expect_exit("./examples/eval_dbnet --gt a --pred b --rec c", 2, "--rec goes with --model");
    ocr_image_free(&img);
    ocr_ctx_free(&ctx);
}

int main(int argc, char **argv) {
    char cmd[300];
    ocr_test_init(argc, argv);
    if (!mkdtemp(g_tmp)) { fprintf(stderr, "test_pipeline: mkdtemp failed\n"); return 1; }
    OCR_TEST_RUN(test_transcription_rule);
    OCR_TEST_RUN(test_e2e_by_hand);
    OCR_TEST_RUN(test_polygon_straightening);
    make_models();
    OCR_TEST_RUN(test_pipeline_refusals);
    OCR_TEST_RUN(test_pipeline_decisions);
    OCR_TEST_RUN(test_painter_fallback);
    OCR_TEST_RUN(test_programs);
    snprintf(cmd, sizeof cmd, "rm -rf %s", g_tmp);
    if (system(cmd) != 0) fprintf(stderr, "test_pipeline: could not remove %s\n", g_tmp);
    return ocr_test_finish();
}
