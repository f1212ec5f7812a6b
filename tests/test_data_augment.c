/* Augmentation and normalisation (ocr_data.h [augment]): every geometric step moves polygons with the pixels (single
   pixels, blocks, filled polygon masks through the whole random chain), resampling matches OpenCV
   (tests/fixtures/synth, tools/make_synth_fixtures.py), the EAST crop keeps text and cuts none, normalisation values
   are exact, the test-time input size follows the official rule, and bad arguments are errors. */
#define OCR_IMPLEMENTATION
#include "ocr_tensor.h"
#include "ocr_data.h"
#include "ocr_test.h"
#include "ocr_test_poly.h"


/* ---------------------------------------------------------------- sample helpers of the test itself */

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
    int trial, trials = ocr_test_sanitized() ? 12 : 60, with_text = 0;
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

/* The test-time input size against values worked out from DBNET_REFERENCE 4.4's rule (demo.py: short side 736, the
   other side ceil(736 / short * long / 32) * 32, in double precision and that order), and its refusals. */
static void test_infer_input_size(void) {
    /* width, height, short_side, long_side -> in_w, in_h */
    static const int cases[][6] = {
        {1280, 720, 736, 0, 1312, 736},  /* 736 / 720 * 1280 / 32 = 40.9 -> 41 * 32 */
        {600, 900, 736, 0, 736, 1120},   /* portrait: 736 / 600 * 900 / 32 = 34.5 -> 35 * 32 */
        {500, 500, 736, 0, 736, 736},    /* square */
        {1000, 999, 736, 0, 768, 736},   /* 736 / 999 * 1000 / 32 = 23.02 -> 24 * 32 */
        {1280, 720, 700, 0, 1280, 704},  /* the side itself rounds up to 704; 704 / 720 * 1280 / 32 = 39.1 -> 40 * 32 */
        {1280, 720, 736, 1280, 1280, 736}, /* by the long side: 1280 / 1280 * 720 / 32 = 22.5 -> 23 * 32 */
        {720, 1280, 736, 1000, 576, 1024}, /* 1000 -> 1024; 1024 / 1280 * 720 / 32 = 18 exactly */
    };
    ocr_ctx ctx;
    int i, w, h;
    ocr_ctx_init(&ctx, 1, 1);
    for (i = 0; i < (int)(sizeof cases / sizeof cases[0]); i++) {
        w = h = -1;
        OCR_CHECK_OK(&ctx, ocr_infer_input_size(&ctx, cases[i][0], cases[i][1], cases[i][2], cases[i][3], &w, &h));
        OCR_CHECK_MSG(w == cases[i][4] && h == cases[i][5], "%dx%d short %d long %d: %dx%d, expected %dx%d", cases[i][0], cases[i][1],
                      cases[i][2], cases[i][3], w, h, cases[i][4], cases[i][5]);
    }
    OCR_CHECK_ERR(&ctx, ocr_infer_input_size(&ctx, 0, 10, 736, 0, &w, &h), OCR_ERANGE, "image 0x10");
    OCR_CHECK_ERR(&ctx, ocr_infer_input_size(&ctx, 10, 10, 0, 0, &w, &h), OCR_ERANGE, "side 0");
    OCR_CHECK_ERR(&ctx, ocr_infer_input_size(&ctx, 16000, 10, 736, 0, &w, &h), OCR_ERANGE, "scale the long side instead");
    OCR_CHECK_ERR(&ctx, ocr_infer_input_size(&ctx, 10, 10, 736, 0, NULL, &h), OCR_EINVAL, "NULL");
    ocr_ctx_free(&ctx);
}

/* The network input is ocr_sample_resize then ocr_image_normalize, bit for bit; an image of the input's size is only
   normalised; a flat image stays flat whatever the scale (checked against the normalisation formula). */
static void test_image_network_input(void) {
    ocr_ctx ctx;
    ocr_image img;
    ocr_sample s;
    ocr_tensor got, ref, same, bad;
    ocr_rng rng;
    size_t i, n = 37 * 23 * 3;
    int c;
    ocr_ctx_init(&ctx, 2, 1);
    ocr_rng_seed(&rng, 3);
    OCR_CHECK_OK(&ctx, ocr_image_alloc(&ctx, &img, 37, 23, 3));
    for (i = 0; i < n; i++) img.pixels[i] = (uint8_t)ocr_rng_below(&rng, 256);
    OCR_CHECK_OK(&ctx, ocr_tensor_alloc(&ctx, &got, "got", OCR_F32, OCR_DEVICE_CPU, ocr_shape4(1, 3, 32, 64)));
    OCR_CHECK_OK(&ctx, ocr_tensor_alloc(&ctx, &ref, "ref", OCR_F32, OCR_DEVICE_CPU, ocr_shape4(1, 3, 32, 64)));
    OCR_CHECK_OK(&ctx, ocr_image_network_input(&ctx, &img, OCR_NORM_DBNET, &got));
    memset(&s, 0, sizeof s);
    OCR_CHECK_OK(&ctx, ocr_image_alloc(&ctx, &s.image, 37, 23, 3));
    memcpy(s.image.pixels, img.pixels, n);
    OCR_CHECK_OK(&ctx, ocr_sample_resize(&ctx, &s, 64, 32));
    OCR_CHECK_OK(&ctx, ocr_image_normalize(&ctx, &s.image, OCR_NORM_DBNET, &ref));
    OCR_CHECK(memcmp(got.data, ref.data, ocr_tensor_bytes(&got)) == 0);
    /* the image's own size: plain normalisation into a [3, H, W] tensor */
    OCR_CHECK_OK(&ctx, ocr_tensor_alloc(&ctx, &same, "same", OCR_F32, OCR_DEVICE_CPU, ocr_shape3(3, 32, 64)));
    OCR_CHECK_OK(&ctx, ocr_image_network_input(&ctx, &s.image, OCR_NORM_IMAGENET, &same));
    OCR_CHECK_OK(&ctx, ocr_image_normalize(&ctx, &s.image, OCR_NORM_IMAGENET, &ref));
    OCR_CHECK(memcmp(same.data, ref.data, ocr_tensor_bytes(&same)) == 0);
    /* flat RGB (10, 20, 30): channels B, G, R minus the DBNet means, / 255, at every pixel */
    for (i = 0; i < n; i++) img.pixels[i] = (uint8_t)(10 * (i % 3 + 1));
    OCR_CHECK_OK(&ctx, ocr_image_network_input(&ctx, &img, OCR_NORM_DBNET, &got));
    for (c = 0; c < 3; c++) {
        static const double mean[3] = {122.67891434, 116.66876762, 104.00698793}, value[3] = {30, 20, 10};
        const float *v = (const float *)got.data + (size_t)c * 32 * 64;
        for (i = 0; i < 32 * 64; i++)
            if (fabs(v[i] - (value[c] - mean[c]) / 255.0) > 1e-6) break;
        OCR_CHECK_MSG(i == 32 * 64, "channel %d pixel %d: %g", c, (int)i, i < 32 * 64 ? v[i] : 0.0);
    }
    OCR_CHECK_OK(&ctx, ocr_tensor_alloc(&ctx, &bad, "two", OCR_F32, OCR_DEVICE_CPU, ocr_shape4(2, 3, 32, 64)));
    OCR_CHECK_ERR(&ctx, ocr_image_network_input(&ctx, &img, OCR_NORM_DBNET, &bad), OCR_ESHAPE, "'two'");
    ocr_tensor_free(&bad);
    OCR_CHECK_OK(&ctx, ocr_tensor_alloc(&ctx, &bad, "half", OCR_F16, OCR_DEVICE_CPU, ocr_shape3(3, 32, 64)));
    OCR_CHECK_ERR(&ctx, ocr_image_network_input(&ctx, &img, OCR_NORM_DBNET, &bad), OCR_EDTYPE, "'half'");
    ocr_tensor_free(&bad);
    ocr_sample_free(&s);
    ocr_image_free(&img);
    ocr_tensor_free(&got);
    ocr_tensor_free(&ref);
    ocr_tensor_free(&same);
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
    OCR_TEST_RUN(test_flip_rotate_single_pixel);
    OCR_TEST_RUN(test_block_follows_polygon);
    OCR_TEST_RUN(test_crop_places_top_left);
    OCR_TEST_RUN(test_resample_matches_opencv);
    OCR_TEST_RUN(test_augment_masks_stay_aligned);
    OCR_TEST_RUN(test_augment_equals_steps);
    OCR_TEST_RUN(test_random_crop_rect);
    OCR_TEST_RUN(test_normalize_values);
    OCR_TEST_RUN(test_infer_input_size);
    OCR_TEST_RUN(test_image_network_input);
    OCR_TEST_RUN(test_augment_bad_arguments);
    return ocr_test_finish();
}
