/* ocr_test_geom.h - random polygons shaped like text instances, and the live reference run, shared by
   tests/test_geom.c and tests/test_dbnet_targets.c. Include after ocr_test.h. */
#ifndef OCR_TEST_GEOM_H
#define OCR_TEST_GEOM_H
#include <stdarg.h>
#include <unistd.h>

/* ------------------------------------------------------------------ text buffers and the reference */

typedef struct { char *s; size_t n, cap; } text_buf;

OCR_TEST__UNUSED static void tb_printf(text_buf *b, const char *fmt, ...) {
    va_list ap;
    int need;
    va_start(ap, fmt);
    need = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    if (b->n + (size_t)need + 1 > b->cap) {
        b->cap = (b->n + (size_t)need + 1) * 2;
        b->s = (char *)realloc(b->s, b->cap);
    }
    va_start(ap, fmt);
    vsnprintf(b->s + b->n, b->cap - b->n, fmt, ap);
    va_end(ap);
    b->n += (size_t)need;
}

OCR_TEST__UNUSED static void tb_points(text_buf *b, const ocr_point *p, int n) {
    int i;
    tb_printf(b, "[");
    for (i = 0; i < n; i++) tb_printf(b, "%s%.9g,%.9g", i ? "," : "", (double)p[i].x, (double)p[i].y);
    tb_printf(b, "]");
}

/* Writes js into the fresh temporary directory dir (a mkdtemp template), runs tools/dbnet_targets_ref.py on it and
   opens its output in *st; 0 when the reference could not run. in_path and out_path (128 bytes each) get the two
   files' names for the caller to remove. */
OCR_TEST__UNUSED static int run_reference(ocr_ctx *ctx, const text_buf *js, char *dir, char *in_path, char *out_path, ocr_safetensors *st) {
    char cmd[512];
    int rc;
    if (!mkdtemp(dir)) { OCR_CHECK_MSG(0, "mkdtemp failed"); return 0; }
    snprintf(in_path, 128, "%s/in.json", dir);
    snprintf(out_path, 128, "%s/out.safetensors", dir);
    OCR_CHECK_OK(ctx, ocr_write_file_atomic(ctx, in_path, js->s, js->n));
    snprintf(cmd, sizeof cmd, "/usr/bin/python3 tools/dbnet_targets_ref.py %s %s", in_path, out_path);
    rc = system(cmd);
    OCR_CHECK_MSG(rc == 0, "'%s' exited with status %d: the reference needs /usr/bin/python3 with python3-opencv, "
                  "python3-pyclipper, python3-shapely and python3-numpy, run from the repository root", cmd, rc);
    if (rc != 0) return 0;
    OCR_CHECK_OK(ctx, ocr_safetensors_open(ctx, st, out_path));
    return 1;
}

/* Removes what run_reference left in dir (nothing when it never started: in_path still ""). */
OCR_TEST__UNUSED static void remove_reference(const char *dir, const char *in_path, const char *out_path) {
    if (!in_path[0]) return;
    remove(in_path);
    remove(out_path);
    rmdir(dir);
}

/* ------------------------------------------------------------------ random polygons */

OCR_TEST__UNUSED static float rnd(ocr_rng *r, float lo, float hi) { return lo + (hi - lo) * ocr_rng_uniform(r); }

/* Mostly arbitrary floats, sometimes whole or half pixels: edges through pixel centres are where the
   official threshold formula produces NaN, and integer vertices are where truncation matters. */
OCR_TEST__UNUSED static float snap(ocr_rng *r, float v) {
    uint32_t k = ocr_rng_below(r, 10);
    return k < 2 ? floorf(v) : k < 3 ? floorf(v) + 0.5f : v;
}

OCR_TEST__UNUSED static void reverse_points(ocr_point *p, int n) {
    int i;
    for (i = 0; i < n / 2; i++) { ocr_point t = p[i]; p[i] = p[n - 1 - i]; p[n - 1 - i] = t; }
}

/* A text-box quad: a rotated rectangle with jittered corners. */
OCR_TEST__UNUSED static int gen_quad(ocr_rng *r, float cx, float cy, float scale, ocr_point *p) {
    float len = rnd(r, 6, scale), thick = rnd(r, 4, 0.4f * scale + 4);
    float ang = ocr_rng_below(r, 4) == 0 ? rnd(r, -1.6f, 1.6f) : rnd(r, -0.35f, 0.35f);
    float ux = cosf(ang), uy = sinf(ang), vx = -uy, vy = ux;
    static const float su[4] = {-0.5f, 0.5f, 0.5f, -0.5f}, sv[4] = {-0.5f, -0.5f, 0.5f, 0.5f};
    int i;
    for (i = 0; i < 4; i++) {
        p[i].x = snap(r, cx + su[i] * len * ux + sv[i] * thick * vx + rnd(r, -2, 2));
        p[i].y = snap(r, cy + su[i] * len * uy + sv[i] * thick * vy + rnd(r, -2, 2));
    }
    return 4;
}

/* A curved text line: a top chain left to right and a bottom chain back, 5..16 points in all. */
OCR_TEST__UNUSED static int gen_band(ocr_rng *r, float cx, float cy, float scale, ocr_point *p) {
    int n = 5 + (int)ocr_rng_below(r, 12), top = (n + 1) / 2, bottom = n - top, i;
    float len = rnd(r, 12, scale + 12), thick = rnd(r, 5, 0.3f * scale + 6), bend = rnd(r, -0.3f, 0.3f) * len;
    float ang = rnd(r, -0.4f, 0.4f), ux = cosf(ang), uy = sinf(ang);
    for (i = 0; i < n; i++) {
        int on_top = i < top;
        float t = on_top ? (top > 1 ? (float)i / (float)(top - 1) : 0.5f) : (bottom > 1 ? 1.0f - (float)(i - top) / (float)(bottom - 1) : 0.5f);
        float a = (t - 0.5f) * len, b = bend * sinf(3.14159265f * t) + (on_top ? -0.5f : 0.5f) * thick;
        p[i].x = snap(r, cx + a * ux - b * uy + rnd(r, -1, 1));
        p[i].y = snap(r, cy + a * uy + b * ux + rnd(r, -1, 1));
    }
    return n;
}

/* A star-shaped blob with 5..16 points: non-convex, may split when shrunk. */
OCR_TEST__UNUSED static int gen_star(ocr_rng *r, float cx, float cy, float scale, ocr_point *p) {
    int n = 5 + (int)ocr_rng_below(r, 12), i;
    float radius = rnd(r, 6, 0.5f * scale + 6), lo = rnd(r, 0.4f, 0.9f);
    for (i = 0; i < n; i++) {
        float a = 6.2831853f * ((float)i + rnd(r, 0.1f, 0.9f)) / (float)n, rr = radius * rnd(r, lo, 1.0f);
        p[i].x = snap(r, cx + rr * cosf(a));
        p[i].y = snap(r, cy + rr * sinf(a));
    }
    return n;
}

OCR_TEST__UNUSED static int gen_polygon(ocr_rng *r, float cx, float cy, float scale, ocr_point *p) {
    uint32_t kind = ocr_rng_below(r, 10);
    int n = kind < 5 ? gen_quad(r, cx, cy, scale, p) : kind < 8 ? gen_band(r, cx, cy, scale, p) : gen_star(r, cx, cy, scale, p);
    if (ocr_rng_below(r, 2)) reverse_points(p, n);
    return n;
}

/* ------------------------------------------------------------------ comparing results */

/* How many of the n pixels of img equal v. */
OCR_TEST__UNUSED static int count_value(const float *img, int n, float v) {
    int i, c = 0;
    for (i = 0; i < n; i++) c += img[i] == v;
    return c;
}

OCR_TEST__UNUSED static int cmp_xy(const void *a, const void *b) {
    const ocr_point *p = (const ocr_point *)a, *q = (const ocr_point *)b;
    if (p->x != q->x) return p->x < q->x ? -1 : 1;
    return (p->y > q->y) - (p->y < q->y);
}

/* 1 when the two polygons have the same vertices (in any rotation) */
OCR_TEST__UNUSED static int same_vertices(const ocr_point *a, const int32_t *b, int n) {
    ocr_point sa[4096], sb[4096];
    int i;
    if (n > 4096) return 0;
    for (i = 0; i < n; i++) { sa[i] = a[i]; sb[i].x = (float)b[2 * i]; sb[i].y = (float)b[2 * i + 1]; }
    qsort(sa, (size_t)n, sizeof *sa, cmp_xy);
    qsort(sb, (size_t)n, sizeof *sb, cmp_xy);
    for (i = 0; i < n; i++) if (sa[i].x != sb[i].x || sa[i].y != sb[i].y) return 0;
    return 1;
}

#endif /* OCR_TEST_GEOM_H */
