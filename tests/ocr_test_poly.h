/* Polygon and sample helpers shared by the tests of rendered and augmented samples (tests/test_synth.c,
   tests/test_data_augment.c): the tests' own geometry, written independently of ocr_geom.h so that they can
   check it. Include after ocr_test.h. */
#ifndef OCR_TEST_POLY_H
#define OCR_TEST_POLY_H
#include <math.h>
#include <string.h>

/* Point-in-polygon by crossings (any simple polygon). */
OCR_TEST__UNUSED static int inside_poly(const ocr_polygon *p, double x, double y) {
    int i, j, in = 0;
    for (i = 0, j = p->n_points - 1; i < p->n_points; j = i++) {
        double xi = p->points[i].x, yi = p->points[i].y, xj = p->points[j].x, yj = p->points[j].y;
        if ((yi > y) != (yj > y) && x < (xj - xi) * (y - yi) / (yj - yi) + xi) in = !in;
    }
    return in;
}

OCR_TEST__UNUSED static double seg_dist(double x, double y, double x0, double y0, double x1, double y1) {
    double dx = x1 - x0, dy = y1 - y0, len2 = dx * dx + dy * dy, t = 0;
    if (len2 > 0) { t = ((x - x0) * dx + (y - y0) * dy) / len2; t = t < 0 ? 0 : t > 1 ? 1 : t; }
    dx = x - (x0 + t * dx);
    dy = y - (y0 + t * dy);
    return sqrt(dx * dx + dy * dy);
}

OCR_TEST__UNUSED static double boundary_dist(const ocr_polygon *p, double x, double y) {
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
OCR_TEST__UNUSED static double poly_dist(const ocr_polygon *p, double x, double y) { return inside_poly(p, x, y) ? 0.0 : boundary_dist(p, x, y); }

OCR_TEST__UNUSED static int image_diff(const ocr_image *a, const ocr_image *b) {
    return a->width != b->width || a->height != b->height || a->channels != b->channels ||
           memcmp(a->pixels, b->pixels, (size_t)a->width * (size_t)a->height * (size_t)a->channels) != 0;
}

OCR_TEST__UNUSED static int polys_same(const ocr_sample *a, const ocr_sample *b, double tol) {
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

#endif /* OCR_TEST_POLY_H */
