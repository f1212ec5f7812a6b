/* ocr_geom.h - polygons and the geometry of text detection: offsetting, rasterisation, contours, minimum-area
   boxes, simplification, validity, intersection and the perspective transform.   v0.1  MIT license

   Do this in exactly one C or C++ file:
       #define OCR_GEOM_IMPLEMENTATION        (ocr_tensor.h's implementation goes in the same or another file;
       #include "ocr_geom.h"                 OCR_IMPLEMENTATION turns on every module)

   Usage (a probability map's text regions as boxes, then one box rectified for a recognizer):
       ocr_polyset contours = {0};                                  // zeroed before first use, reused after
       ocr_point box[4], dst[4];
       double H[9];
       int w, h, i, first = 0;
       ocr_find_contours(&ctx, bitmap, width, height, &contours);  // cv2.findContours(RETR_LIST, CHAIN_APPROX_SIMPLE)
       for (i = 0; i < contours.n_polys; first += contours.counts[i++]) {
           ocr_min_area_box(&ctx, contours.pts + first, contours.counts[i], box, NULL); // TL, TR, BR, BL
           ocr_quad_rectified_size(&ctx, box, &w, &h);
           dst[0].x = 0; dst[0].y = 0; dst[1].x = (float)w; dst[1].y = 0;
           dst[2].x = (float)w; dst[2].y = (float)h; dst[3].x = 0; dst[3].y = (float)h;
           if (ocr_perspective_transform(&ctx, dst, box, H) == OCR_OK) ... // crop pixel -> image pixel, to sample
       }
       ocr_polyset_free(&contours);

   Every routine matches the Python tool DBNet's official code calls, on the same inputs: ocr_poly_offset is
   pyclipper's PyclipperOffset (JT_ROUND, ET_CLOSEDPOLYGON), ocr_poly_fill cv2.fillPoly, ocr_find_contours
   cv2.findContours, ocr_min_area_box cv2.boxPoints(cv2.minAreaRect()), ocr_approx_poly cv2.approxPolyDP,
   ocr_poly_is_simple and ocr_poly_intersection_area shapely's is_valid/is_simple and intersection().area,
   ocr_perspective_transform cv2.getPerspectiveTransform. Orientation: y points down, so "clockwise" means
   clockwise on screen, and a clockwise polygon has a positive ocr_poly_area. Functions that take an ocr_ctx
   report bad input (NULL, non-finite or out-of-range coordinates) as OCR_E* with a message; the others are
   total functions of their input.

   Options: none of its own (OCR_STATIC, OCR_NO_IMPLEMENTATION and the allocator macros of ocr_tensor.h apply).
   Dependencies: ocr_tensor.h (ocr_ctx, errors, scratch memory), libm.
*/
#ifndef OCR_GEOM_H
#define OCR_GEOM_H
#include "ocr_tensor.h"
#ifdef __cplusplus
extern "C" {
#endif

/* ================================================================ [polygons] declarations */

/* A text instance: the one polygon type shared by ocr_data.h (labels, augmentation), ocr_synth.h and ocr_dbnet.h
   (targets, post-processing, evaluation). Pixel coordinates, x right, y down, any vertex count >= 3. */
typedef struct { float x, y; } ocr_point;
typedef struct {
    ocr_point *points;
    int n_points;
    int ignore;        /* "don't care" (### in ICDAR): masked out of training and evaluation */
    char *text;        /* UTF-8 transcription, or NULL */
} ocr_polygon;

/* A list of polygons in one buffer: polygon i has counts[i] points starting at pts + sum(counts[0..i)).
   Zero-initialise before first use; functions that fill one replace its contents and reuse its memory. */
typedef struct { ocr_point *pts; int *counts; int n_polys, n_pts, cap_pts, cap_polys; } ocr_polyset;
OCRDEF void ocr_polyset_free(ocr_polyset *ps);
OCRDEF double ocr_poly_area(const ocr_point *pts, int n);        /* signed shoelace area, > 0 when clockwise on screen */
OCRDEF double ocr_poly_perimeter(const ocr_point *pts, int n);
/* Offsets a closed polygon by delta pixels with round joins, as pyclipper's PyclipperOffset with JT_ROUND and
   ET_CLOSEDPOLYGON (delta > 0 grows, < 0 shrinks; a shrink may split or erase the polygon). As pyclipper, the
   input is truncated toward zero to integers (orientation does not matter) and the output has integer vertices:
   outer pieces have area > 0, holes area < 0, ordered as pyclipper usually orders them (lowest bottom first), so
   piece 0 is what DBNet's `Execute(d)[0]` takes. Rings that touch at a point (a hole pinched onto its outer
   ring, two pieces meeting at a corner) come out as one ring through that point twice, as pyclipper's do.
   Fewer than 3 distinct points give an empty set, and so does a result thinner than a pixel that Clipper's
   rounding collapses (slivers, lobes of self-intersecting polygons; see docs/LIMITS.md for how closely). */
OCRDEF int ocr_poly_offset(ocr_ctx *ctx, const ocr_point *pts, int n, double delta, ocr_polyset *out);

/* Largest |coordinate| (and |delta|) the geometry accepts: integer predicates stay exact and every offset
   result stays exactly representable in a float. */
#define OCR_POLY_MAX_COORD 4194304.0
/* OCR_OK when pts holds n >= 0 points (pts may be NULL only for n = 0), each coordinate finite and within
   +-OCR_POLY_MAX_COORD; else an error naming fn, the polygon `what` and the first bad point. */
OCRDEF int ocr_poly_check(ocr_ctx *ctx, const char *fn, const char *what, const ocr_point *pts, int n);
/* Orientation normalisation of DBNet's validate_polygons: reverses pts in place when the polygon runs
   counter-clockwise on screen (area < 0). Returns 1 when it reversed. */
OCRDEF int ocr_poly_make_clockwise(ocr_point *pts, int n);
/* cv2.fillPoly(img, [pts.astype(np.int32)], value) on a height x width F32 plane: vertices truncated toward zero,
   pixel centres at integer coordinates, the boundary (8-connected lines between the vertices) included and
   the interior filled by the even-odd rule; everything outside the plane is clipped. n may be 1 or 2 (a point,
   a line). */
OCRDEF int ocr_poly_fill(ocr_ctx *ctx, float *img, int height, int width, const ocr_point *pts, int n, float value);

/* ================================================================ [contours, boxes, simplification] declarations */

/* Borders of the non-zero regions of a width x height bitmap, outer and hole borders alike, with the points,
   start points and order of cv2.findContours(RETR_LIST, CHAIN_APPROX_SIMPLE) (Suzuki-Abe border following,
   8-connectivity). out must be zeroed or hold an earlier result (replaced). */
OCRDEF int ocr_find_contours(ocr_ctx *ctx, const uint8_t *bitmap, int width, int height, ocr_polyset *out);
/* The same without the copy, for a caller that writes its bitmap straight into the border follower's work image:
   ocr_contour_frame returns (width + 2) x (height + 2) bytes (plus 8 of padding) from ctx's scratch slot
   OCR_SCRATCH_OP0 whose one-pixel frame is 0; the caller sets pixel (x, y) at frame[(y + 1) * (width + 2) + x + 1]
   to 0 or 1 (no other value), then ocr_find_contours_framed traces it (and overwrites it). The frame stays valid
   until the next use of that scratch slot. NULL, with the error in ctx, when the size is bad or memory runs out. */
OCRDEF uint8_t *ocr_contour_frame(ocr_ctx *ctx, int width, int height);
OCRDEF int ocr_find_contours_framed(ocr_ctx *ctx, uint8_t *frame, int width, int height, ocr_polyset *out);
/* Minimum-area enclosing rectangle of a point set (rotating calipers over the convex hull), corners ordered
   TL, TR, BR, BL as the official get_mini_boxes; *short_side = its shorter side (0 for fewer than 3 hull points).
   For integer-valued points (contours, unclipped boxes) the corners are cv2.boxPoints(cv2.minAreaRect(pts)) to
   the bit: the same hull order, float32 calipers, centre/size/angle and corners rebuilt from them, so a corner
   meant to lie on an integer comes out a few 1e-6 off exactly when OpenCV's does (it truncates later). */
OCRDEF int ocr_min_area_box(ocr_ctx *ctx, const ocr_point *pts, int n, ocr_point box[4], float *short_side);
/* The same with its work memory in *work (*cap bytes; start both at NULL, 0), grown as needed and kept for the next
   call, so that a loop over many contours allocates once; the caller frees *work with OCR_FREE. */
OCRDEF int ocr_min_area_box_work(ocr_ctx *ctx, const ocr_point *pts, int n, ocr_point box[4], float *short_side, void **work,
                                 size_t *cap);
/* Douglas-Peucker approximation of a closed integer contour, as cv2.approxPolyDP(closed=True): the same
   start point, kept vertices and final collinear clean-up. out has room for n points; *n_out receives the count. */
OCRDEF int ocr_approx_poly(ocr_ctx *ctx, const ocr_point *pts, int n, double epsilon, ocr_point *out, int *n_out);
/* cv2.arcLength of a closed integer contour: float32 segment lengths summed in double, the perimeter polygon mode
   scales into approxPolyDP's epsilon. Kept apart from ocr_poly_perimeter because that epsilon must match OpenCV's
   to the last bit. */
OCRDEF double ocr_contour_arc_length(const ocr_point *pts, int n);

/* ================================================================ [validity, intersection] declarations */

/* 1 when the closed polygon is valid and simple as shapely sees it: at least 3 distinct vertices, no edge
   touching or crossing a non-adjacent edge, no spike (an edge folding back onto the previous one). A sweep over x
   tests only edges whose ranges overlap: about n log n for text polygons. */
OCRDEF int ocr_poly_is_simple(const ocr_point *pts, int n);
/* Exact area of the intersection of two simple polygons, convex or not, of either orientation. Edges are bucketed by
   y, so two polygons of n points cost about n log n unless their edges are long enough to span many buckets (then
   every pair is compared, as for small polygons). */
OCRDEF int ocr_poly_intersection_area(ocr_ctx *ctx, const ocr_point *a, int na, const ocr_point *b, int nb, double *area);

/* ================================================================ [perspective] declarations */

/* The homography H (row-major 3x3, H[8] = 1) that maps src[i] to dst[i] for i = 0..3, as
   cv2.getPerspectiveTransform(src, dst): the eight equations h0 x + h1 y + h2 - u (h6 x + h7 y + 1) = 0 and
   h3 x + h4 y + h5 - v (h6 x + h7 y + 1) = 0 solved in double by Gaussian elimination with partial pivoting.
   OCR_EINVAL when three points of src or of dst are collinear (no homography maps one quad onto the other),
   OCR_ENONFINITE / OCR_ERANGE for bad coordinates (as ocr_poly_check); H is untouched on error. */
OCRDEF int ocr_perspective_transform(ocr_ctx *ctx, const ocr_point src[4], const ocr_point dst[4], double H[9]);
/* (x, y) mapped by H: ((h0 x + h1 y + h2) / w, (h3 x + h4 y + h5) / w), w = h6 x + h7 y + h8. A point on the
   vanishing line (|w| <= DBL_EPSILON) maps to (0, 0), as cv2.perspectiveTransform does. */
OCRDEF void ocr_perspective_apply(const double H[9], double x, double y, double *ox, double *oy);
/* Size of the upright crop a text quad (TL, TR, BR, BL, as ocr_min_area_box gives) is rectified into: width the
   longer of the top and bottom edges, height the longer of the left and right edges, each rounded to the nearest
   integer (halves up) and at least 1. (PaddleOCR's get_rotate_crop_image truncates instead of rounding.) */
OCRDEF int ocr_quad_rectified_size(ocr_ctx *ctx, const ocr_point quad[4], int *width, int *height);

#ifdef __cplusplus
}
#endif
#endif /* OCR_GEOM_H */

/* ================================================================================================== */
#if defined(OCR_IMPLEMENTATION) && !defined(OCR_NO_IMPLEMENTATION) && !defined(OCR_GEOM_IMPLEMENTATION)
#define OCR_GEOM_IMPLEMENTATION
#endif
#if defined(OCR_GEOM_IMPLEMENTATION) && !defined(OCR__GEOM_IMPLEMENTED)
#define OCR__GEOM_IMPLEMENTED
#include <string.h>
#include <math.h>
#ifdef __cplusplus
extern "C" {
#endif

/* ================================================================ [polygons] implementation */

#define OCR__GEOM_PI 3.14159265358979323846
#define OCR__NO_RAW INT32_MAX /* arrangement node that is no vertex of the raw outline */

OCRDEF void ocr_polyset_free(ocr_polyset *ps) {
    if (!ps) return;
    OCR_FREE(ps->pts);
    OCR_FREE(ps->counts);
    memset(ps, 0, sizeof *ps);
}

/* Grows *p (capacity *cap elements of elem bytes) to hold need elements; 0 on overflow or no memory. */
static int ocr__geom_grow(void **p, int *cap, int64_t need, size_t elem) {
    int64_t c = *cap ? *cap : 16;
    size_t bytes;
    void *q;
    if (need <= *cap) return 1;
    while (c < need) c *= 2;
    if (c > INT32_MAX || !ocr_size_mul((size_t)c, elem, &bytes)) return 0;
    q = OCR_REALLOC(*p, bytes);
    if (!q) return 0;
    *p = q;
    *cap = (int)c;
    return 1;
}

/* Appends a polygon given as n interleaved integer-valued doubles. */
static int ocr__polyset_push(ocr_ctx *ctx, const char *fn, ocr_polyset *ps, const int64_t *xy, int n) {
    int i;
    if (!ocr__geom_grow((void **)&ps->counts, &ps->cap_polys, (int64_t)ps->n_polys + 1, sizeof(int)) ||
        !ocr__geom_grow((void **)&ps->pts, &ps->cap_pts, (int64_t)ps->n_pts + n, sizeof(ocr_point)))
        return ocr_error(ctx, OCR_ENOMEM, "%s: cannot grow the output polygon set to %lld points", fn, (long long)ps->n_pts + n);
    for (i = 0; i < n; i++) {
        ps->pts[ps->n_pts + i].x = (float)xy[2 * i];
        ps->pts[ps->n_pts + i].y = (float)xy[2 * i + 1];
    }
    ps->counts[ps->n_polys++] = n;
    ps->n_pts += n;
    return OCR_OK;
}

OCRDEF double ocr_poly_area(const ocr_point *pts, int n) {
    double s = 0.0;
    int i;
    if (!pts || n < 3) return 0.0;
    for (i = 0; i < n; i++) {
        const ocr_point *a = &pts[i], *b = &pts[i + 1 < n ? i + 1 : 0];
        s += (double)a->x * b->y - (double)b->x * a->y;
    }
    return 0.5 * s;
}

OCRDEF double ocr_poly_perimeter(const ocr_point *pts, int n) {
    double s = 0.0;
    int i;
    if (!pts || n < 2) return 0.0;
    for (i = 0; i < n; i++) {
        const ocr_point *a = &pts[i], *b = &pts[i + 1 < n ? i + 1 : 0];
        double dx = (double)b->x - a->x, dy = (double)b->y - a->y;
        s += sqrt(dx * dx + dy * dy);
    }
    return s;
}

OCRDEF int ocr_poly_check(ocr_ctx *ctx, const char *fn, const char *what, const ocr_point *pts, int n) {
    int i;
    if (n < 0) return ocr_error(ctx, OCR_EINVAL, "%s: polygon %s has %d points", fn, what, n);
    if (n > 0 && !pts) return ocr_error(ctx, OCR_EINVAL, "%s: polygon %s has %d points but a NULL point array", fn, what, n);
    for (i = 0; i < n; i++) {
        double x = pts[i].x, y = pts[i].y;
        if (!isfinite(x) || !isfinite(y))
            return ocr_error(ctx, OCR_ENONFINITE, "%s: polygon %s has non-finite point %d (%g, %g)", fn, what, i, x, y);
        if (fabs(x) > OCR_POLY_MAX_COORD || fabs(y) > OCR_POLY_MAX_COORD)
            return ocr_error(ctx, OCR_ERANGE, "%s: polygon %s has point %d (%g, %g) beyond +-%g", fn, what, i, x, y,
                             OCR_POLY_MAX_COORD);
    }
    return OCR_OK;
}

OCRDEF int ocr_poly_make_clockwise(ocr_point *pts, int n) {
    int i;
    if (!(ocr_poly_area(pts, n) < 0.0)) return 0;
    for (i = 0; i < n / 2; i++) {
        ocr_point t = pts[i];
        pts[i] = pts[n - 1 - i];
        pts[n - 1 - i] = t;
    }
    return 1;
}

/* ---- offsetting: the outline of every vertex moved along its edges' normals, then its positive-winding region */

/* Clipper's rounding of generated vertices: half away from zero, through a truncating cast. */
static int64_t ocr__clip_round(double v) { return v < 0 ? (int64_t)(v - 0.5) : (int64_t)(v + 0.5); }

typedef struct { int64_t *xy; int n, cap; } ocr__ipath;

static int ocr__ipath_push(ocr__ipath *p, int64_t x, int64_t y) {
    if (!ocr__geom_grow((void **)&p->xy, &p->cap, 2 * ((int64_t)p->n + 1), sizeof(int64_t))) return 0;
    p->xy[2 * p->n] = x;
    p->xy[2 * p->n + 1] = y;
    p->n++;
    return 1;
}

/* Drops consecutive repeats of a closed path in place (the closing repeat too); returns the new count. */
static int ocr__ipath_dedup(int64_t *xy, int n) {
    int i, k = 0;
    while (n > 1 && xy[2 * (n - 1)] == xy[0] && xy[2 * (n - 1) + 1] == xy[1]) n--;
    for (i = 0; i < n; i++) {
        if (k > 0 && xy[2 * i] == xy[2 * (k - 1)] && xy[2 * i + 1] == xy[2 * (k - 1) + 1]) continue;
        xy[2 * k] = xy[2 * i];
        xy[2 * k + 1] = xy[2 * i + 1];
        k++;
    }
    return k;
}

/* The raw outline of an offset by delta of the closed integer path src (n >= 3 distinct points, positive
   orientation). Convex corners get arcs whose sagitta stays within pyclipper's ArcTolerance of 0.25 px;
   reflex corners a small loop through the vertex itself, which the positive-winding pass removes. A vertex
   whose edges are (almost) collinear keeps the previous edge's normal for the next corner, as Clipper does. */
static int ocr__offset_outline(const int64_t *src, int n, double delta, ocr__ipath *raw) {
    double *nrm = (double *)OCR_MALLOC((size_t)n * 2 * sizeof(double));
    double ad = fabs(delta), tol = 0.25, steps, sin_step, cos_step, steps_per_rad;
    int j, k, ok = 1;
    if (!nrm) return 0;
    for (j = 0; j < n; j++) {
        int q = j + 1 < n ? j + 1 : 0;
        double dx = (double)(src[2 * q] - src[2 * j]), dy = (double)(src[2 * q + 1] - src[2 * j + 1]);
        double f = 1.0 / sqrt(dx * dx + dy * dy);
        nrm[2 * j] = dy * f;
        nrm[2 * j + 1] = -dx * f;
    }
    if (tol > ad * 0.25) tol = ad * 0.25;
    steps = OCR__GEOM_PI / acos(1.0 - tol / ad);
    if (steps > ad * OCR__GEOM_PI) steps = ad * OCR__GEOM_PI;
    sin_step = sin(2.0 * OCR__GEOM_PI / steps);
    cos_step = cos(2.0 * OCR__GEOM_PI / steps);
    steps_per_rad = steps / (2.0 * OCR__GEOM_PI);
    if (delta < 0) sin_step = -sin_step;
    for (j = 0, k = n - 1; j < n && ok; j++) {
        double px = (double)src[2 * j], py = (double)src[2 * j + 1];
        double kx = nrm[2 * k], ky = nrm[2 * k + 1], jx = nrm[2 * j], jy = nrm[2 * j + 1];
        double sin_a = kx * jy - jx * ky, cos_a = kx * jx + ky * jy;
        if (fabs(sin_a * delta) < 1.0) {
            if (cos_a > 0) { /* straight on: one point, and k stays */
                ok = ocr__ipath_push(raw, ocr__clip_round(px + kx * delta), ocr__clip_round(py + ky * delta));
                continue;
            }
        } else if (sin_a > 1.0) {
            sin_a = 1.0;
        } else if (sin_a < -1.0) {
            sin_a = -1.0;
        }
        if (sin_a * delta < 0) {
            ok = ocr__ipath_push(raw, ocr__clip_round(px + kx * delta), ocr__clip_round(py + ky * delta)) &&
                 ocr__ipath_push(raw, (int64_t)px, (int64_t)py) &&
                 ocr__ipath_push(raw, ocr__clip_round(px + jx * delta), ocr__clip_round(py + jy * delta));
        } else {
            int64_t i, n_arc = ocr__clip_round(steps_per_rad * fabs(atan2(sin_a, cos_a)));
            double x = kx, y = ky;
            if (n_arc < 1) n_arc = 1;
            for (i = 0; i < n_arc && ok; i++) {
                double x_prev = x;
                ok = ocr__ipath_push(raw, ocr__clip_round(px + x * delta), ocr__clip_round(py + y * delta));
                x = x * cos_step - sin_step * y;
                y = x_prev * sin_step + y * cos_step;
            }
            ok = ok && ocr__ipath_push(raw, ocr__clip_round(px + jx * delta), ocr__clip_round(py + jy * delta));
        }
        k = j;
    }
    OCR_FREE(nrm);
    return ok;
}

/* Horizontal bands over y: each item (an edge with y range [lo, hi]) is listed in every band it touches, so
   crossing tests and rays look at a few items instead of all. */
typedef struct { double y0, scale; int n_bands; int *first, *items; } ocr__bands;

static int ocr__band_of(const ocr__bands *b, double y) {
    double f = (y - b->y0) * b->scale;
    return f <= 0 ? 0 : f >= b->n_bands - 1 ? b->n_bands - 1 : (int)f;
}

static int ocr__bands_build(ocr__bands *b, const double *lo, const double *hi, int n) {
    double ymin = 0, ymax = 0, spans = 0;
    int i, k;
    memset(b, 0, sizeof *b);
    for (i = 0; i < n; i++) {
        if (i == 0 || lo[i] < ymin) ymin = lo[i];
        if (i == 0 || hi[i] > ymax) ymax = hi[i];
    }
    for (i = 0; i < n; i++) spans += hi[i] - lo[i];
    /* spans/height = how many items a horizontal line meets on average; more bands would only copy items */
    b->n_bands = 1;
    if (n > 1 && ymax > ymin) {
        double want = 4.0 * n / (spans / (ymax - ymin) + 1.0);
        b->n_bands = want < 1 ? 1 : want > n ? n : (int)want;
    }
    b->y0 = ymin;
    b->scale = ymax > ymin ? b->n_bands / (ymax - ymin) : 0.0;
    b->first = (int *)OCR_MALLOC(((size_t)b->n_bands + 1) * sizeof(int));
    if (!b->first) return 0;
    memset(b->first, 0, ((size_t)b->n_bands + 1) * sizeof(int));
    for (i = 0; i < n; i++)
        for (k = ocr__band_of(b, lo[i]); k <= ocr__band_of(b, hi[i]); k++) b->first[k + 1]++;
    for (k = 0; k < b->n_bands; k++) b->first[k + 1] += b->first[k];
    b->items = (int *)OCR_MALLOC(((size_t)b->first[b->n_bands] + 1) * sizeof(int));
    if (!b->items) return 0;
    {
        int *fill = (int *)OCR_MALLOC(((size_t)b->n_bands + 1) * sizeof(int));
        if (!fill) return 0;
        memcpy(fill, b->first, ((size_t)b->n_bands + 1) * sizeof(int));
        for (i = 0; i < n; i++)
            for (k = ocr__band_of(b, lo[i]); k <= ocr__band_of(b, hi[i]); k++) b->items[fill[k]++] = i;
        OCR_FREE(fill);
    }
    return 1;
}

static void ocr__bands_free(ocr__bands *b) {
    OCR_FREE(b->first);
    OCR_FREE(b->items);
    memset(b, 0, sizeof *b);
}

/* The planar arrangement of the raw outline: nodes (outline vertices and crossings), each edge split at every
   node on it, coincident pieces merged with their net multiplicity. */
typedef struct { double x, y; int parent, raw; } ocr__gnode;   /* raw: smallest outline index at this node */
typedef struct { int edge, node; double t; } ocr__gsplit;
typedef struct { int a, b, mult; } ocr__gfrag;

typedef struct {
    const int64_t *xy;   /* outline, m points */
    int m;
    int *vnode;          /* node of each outline vertex */
    ocr__gnode *nodes;
    int n_nodes, cap_nodes;
    ocr__gsplit *splits;
    int n_splits, cap_splits;
} ocr__arrangement;

static int ocr__arr_node(ocr__arrangement *g, double x, double y, int raw) {
    ocr__gnode *nd;
    if (!ocr__geom_grow((void **)&g->nodes, &g->cap_nodes, (int64_t)g->n_nodes + 1, sizeof(ocr__gnode))) return -1;
    nd = &g->nodes[g->n_nodes];
    nd->x = x;
    nd->y = y;
    nd->parent = g->n_nodes;
    nd->raw = raw;
    return g->n_nodes++;
}

static int ocr__arr_split(ocr__arrangement *g, int edge, int node, double t) {
    if (!ocr__geom_grow((void **)&g->splits, &g->cap_splits, (int64_t)g->n_splits + 1, sizeof(ocr__gsplit))) return 0;
    g->splits[g->n_splits].edge = edge;
    g->splits[g->n_splits].node = node;
    g->splits[g->n_splits].t = t;
    g->n_splits++;
    return 1;
}

static int ocr__uf_find(ocr__gnode *nodes, int i) {
    while (nodes[i].parent != i) {
        nodes[i].parent = nodes[nodes[i].parent].parent;
        i = nodes[i].parent;
    }
    return i;
}

/* Merges two nodes; an outline vertex (exact coordinates) wins over a computed crossing. */
static void ocr__uf_union(ocr__gnode *nodes, int a, int b) {
    a = ocr__uf_find(nodes, a);
    b = ocr__uf_find(nodes, b);
    if (a == b) return;
    if (nodes[b].raw < nodes[a].raw) { int t = a; a = b; b = t; }
    nodes[b].parent = a;
}

static int64_t ocr__orient(const int64_t *a, const int64_t *b, const int64_t *c) {
    return (b[0] - a[0]) * (c[1] - a[1]) - (b[1] - a[1]) * (c[0] - a[0]);
}

/* For collinear a, b, c: 1 when c lies strictly between a and b. */
static int ocr__strictly_inside(const int64_t *a, const int64_t *b, const int64_t *c) {
    int d = a[0] != b[0] ? 0 : 1;
    int64_t lo = a[d] < b[d] ? a[d] : b[d], hi = a[d] < b[d] ? b[d] : a[d];
    return c[d] > lo && c[d] < hi;
}

static double ocr__param_on(const int64_t *a, const int64_t *b, const int64_t *c) {
    double dx = (double)(b[0] - a[0]), dy = (double)(b[1] - a[1]);
    return ((double)(c[0] - a[0]) * dx + (double)(c[1] - a[1]) * dy) / (dx * dx + dy * dy);
}

/* Records where outline edges i and j meet: a proper crossing, or an endpoint of one inside the other. */
static int ocr__arr_pair(ocr__arrangement *g, int i, int j) {
    int m = g->m, i1 = i + 1 < m ? i + 1 : 0, j1 = j + 1 < m ? j + 1 : 0;
    const int64_t *a = g->xy + 2 * i, *b = g->xy + 2 * i1, *c = g->xy + 2 * j, *d = g->xy + 2 * j1;
    int64_t d1 = ocr__orient(a, b, c), d2 = ocr__orient(a, b, d), d3 = ocr__orient(c, d, a), d4 = ocr__orient(c, d, b);
    if (((d1 > 0 && d2 < 0) || (d1 < 0 && d2 > 0)) && ((d3 > 0 && d4 < 0) || (d3 < 0 && d4 > 0))) {
        double t = (double)d3 / ((double)d3 - (double)d4), u = (double)d1 / ((double)d1 - (double)d2);
        int node = ocr__arr_node(g, (double)a[0] + t * (double)(b[0] - a[0]), (double)a[1] + t * (double)(b[1] - a[1]), OCR__NO_RAW);
        return node >= 0 && ocr__arr_split(g, i, node, t) && ocr__arr_split(g, j, node, u);
    }
    if (d1 == 0 && ocr__strictly_inside(a, b, c) && !ocr__arr_split(g, i, g->vnode[j], ocr__param_on(a, b, c))) return 0;
    if (d2 == 0 && ocr__strictly_inside(a, b, d) && !ocr__arr_split(g, i, g->vnode[j1], ocr__param_on(a, b, d))) return 0;
    if (d3 == 0 && ocr__strictly_inside(c, d, a) && !ocr__arr_split(g, j, g->vnode[i], ocr__param_on(c, d, a))) return 0;
    if (d4 == 0 && ocr__strictly_inside(c, d, b) && !ocr__arr_split(g, j, g->vnode[i1], ocr__param_on(c, d, b))) return 0;
    return 1;
}

typedef struct { double x, y; int id; } ocr__gkey;

static int ocr__gkey_cmp(const void *pa, const void *pb) {
    const ocr__gkey *a = (const ocr__gkey *)pa, *b = (const ocr__gkey *)pb;
    if (a->x != b->x) return a->x < b->x ? -1 : 1;
    if (a->y != b->y) return a->y < b->y ? -1 : 1;
    return (a->id > b->id) - (a->id < b->id);
}

static int ocr__gsplit_cmp(const void *pa, const void *pb) {
    const ocr__gsplit *a = (const ocr__gsplit *)pa, *b = (const ocr__gsplit *)pb;
    if (a->edge != b->edge) return a->edge < b->edge ? -1 : 1;
    return (a->t > b->t) - (a->t < b->t);
}

static int ocr__gfrag_cmp(const void *pa, const void *pb) {
    const ocr__gfrag *a = (const ocr__gfrag *)pa, *b = (const ocr__gfrag *)pb;
    if (a->a != b->a) return a->a < b->a ? -1 : 1;
    return (a->b > b->b) - (a->b < b->b);
}

/* One traced boundary cycle: where its points start in the cycle buffer, and the order key. */
typedef struct { int start, count; int64_t bottom, left; } ocr__gcycle;

/* pyclipper's order is Clipper's creation order, and Clipper sweeps from the bottom of the screen up: the
   piece reaching lowest first; pieces ending on one row (typically a border the polygon was clipped to)
   left to right. Measured against pyclipper this picks the same first piece in ~85% of the rare shrinks that
   split (vertex-exact; most misses differ by a 1 px rounding of a crossing). */
static int ocr__gcycle_cmp(const void *pa, const void *pb) {
    const ocr__gcycle *a = (const ocr__gcycle *)pa, *b = (const ocr__gcycle *)pb;
    if (a->bottom != b->bottom) return a->bottom > b->bottom ? -1 : 1;
    if (a->left != b->left) return a->left < b->left ? -1 : 1;
    return (a->start > b->start) - (a->start < b->start);
}

/* Removes, in place, the vertices of a closed integer ring that repeat or lie on the line through their
   neighbours (spikes included) until none is left, as Clipper's output clean-up; returns the new count
   (< 3: nothing left). next, prev: n ints of scratch; stack: 3n. */
static int ocr__ring_clean(int64_t *xy, int n, int *next, int *prev, int *stack) {
    int i, top = 0, alive = n, count = 0;
    for (i = 0; i < n; i++) { next[i] = i + 1 < n ? i + 1 : 0; prev[i] = i ? i - 1 : n - 1; stack[top++] = i; }
    while (top && alive >= 3) {
        int v = stack[--top], p = prev[v], q = next[v];
        if (q < 0) continue; /* already removed */
        if ((xy[2 * v] - xy[2 * p]) * (xy[2 * q + 1] - xy[2 * p + 1]) != (xy[2 * v + 1] - xy[2 * p + 1]) * (xy[2 * q] - xy[2 * p]))
            continue;
        next[p] = q;
        prev[q] = p;
        next[v] = -1;
        alive--;
        stack[top++] = p;
        stack[top++] = q;
    }
    if (alive < 3) return 0;
    /* survivors keep their cyclic order, so copying them forward in index order is safe */
    for (i = 0; i < n; i++)
        if (next[i] >= 0) {
            xy[2 * count] = xy[2 * i];
            xy[2 * count + 1] = xy[2 * i + 1];
            count++;
        }
    return count;
}

/* Union-find root of ring r, halving the path on the way. */
static int ocr__ring_root(int *parent, int r) {
    while (parent[r] != r) {
        parent[r] = parent[parent[r]];
        r = parent[r];
    }
    return r;
}

/* Appends to out the boundary rings of the region where the closed integer outline xy (m >= 3 points) winds
   positively, as Clipper's union with the positive fill rule: the outline is cut at every crossing and touch,
   each piece knows the winding on its two sides (one ray per piece), pieces with text on exactly one side are
   the boundary, and rings are traced keeping the region on the left, then joined where they share a node
   (so a ring touching another at a point comes out as one ring, as Clipper reports it). */
static int ocr__positive_region(ocr_ctx *ctx, const char *fn, const int64_t *xy, int m, ocr_polyset *out) {
    ocr__arrangement g;
    ocr__bands eb, fb;
    ocr__gkey *keys = NULL;
    ocr__gfrag *frags = NULL;
    ocr__gcycle *cycles = NULL;
    double *lo = NULL, *hi = NULL, *angle = NULL;
    int *bfrom = NULL, *bto = NULL, *adj_first = NULL, *adj = NULL, *used = NULL, *ring = NULL, *scratch = NULL;
    int *succ = NULL, *ring_of = NULL, *node_entry = NULL, *ring_root = NULL;
    int64_t *cyc_xy = NULL;
    int n_frags = 0, cap_frags = 0, n_bound = 0, n_cycles = 0, cap_cycles = 0, n_cyc_pts = 0, cap_cyc_xy = 0;
    int n_entries = 0, n_rings = 0;
    int i, k, a, b, rc = OCR_OK;
    const double eps = 1e-6; /* crossings closer than this are one node */
    memset(&g, 0, sizeof g);
    memset(&eb, 0, sizeof eb);
    memset(&fb, 0, sizeof fb);
    g.xy = xy;
    g.m = m;
    g.vnode = (int *)OCR_MALLOC((size_t)m * sizeof(int));
    keys = (ocr__gkey *)OCR_MALLOC((size_t)m * sizeof(ocr__gkey));
    lo = (double *)OCR_MALLOC((size_t)m * sizeof(double));
    hi = (double *)OCR_MALLOC((size_t)m * sizeof(double));
    if (!g.vnode || !keys || !lo || !hi) goto nomem;

    /* nodes of the outline vertices: one per distinct point, remembering the first outline index there */
    for (i = 0; i < m; i++) { keys[i].x = (double)xy[2 * i]; keys[i].y = (double)xy[2 * i + 1]; keys[i].id = i; }
    qsort(keys, (size_t)m, sizeof *keys, ocr__gkey_cmp);
    for (i = 0; i < m; i++) {
        if (i == 0 || keys[i].x != keys[i - 1].x || keys[i].y != keys[i - 1].y)
            if (ocr__arr_node(&g, keys[i].x, keys[i].y, keys[i].id) < 0) goto nomem;
        g.vnode[keys[i].id] = g.n_nodes - 1;
    }

    /* split every edge at its endpoints and wherever another edge meets it */
    for (i = 0; i < m; i++) {
        int i1 = i + 1 < m ? i + 1 : 0;
        lo[i] = (double)(xy[2 * i + 1] < xy[2 * i1 + 1] ? xy[2 * i + 1] : xy[2 * i1 + 1]);
        hi[i] = (double)(xy[2 * i + 1] < xy[2 * i1 + 1] ? xy[2 * i1 + 1] : xy[2 * i + 1]);
        if (!ocr__arr_split(&g, i, g.vnode[i], 0.0) || !ocr__arr_split(&g, i, g.vnode[i1], 1.0)) goto nomem;
    }
    if (!ocr__bands_build(&eb, lo, hi, m)) goto nomem;
    for (k = 0; k < eb.n_bands; k++)
        for (a = eb.first[k]; a < eb.first[k + 1]; a++)
            for (b = a + 1; b < eb.first[k + 1]; b++) {
                int ei = eb.items[a] < eb.items[b] ? eb.items[a] : eb.items[b], ej = eb.items[a] ^ eb.items[b] ^ ei;
                int ki = ocr__band_of(&eb, lo[ei]), kj = ocr__band_of(&eb, lo[ej]);
                int ei1 = ei + 1 < m ? ei + 1 : 0, ej1 = ej + 1 < m ? ej + 1 : 0;
                int64_t ix0 = xy[2 * ei] < xy[2 * ei1] ? xy[2 * ei] : xy[2 * ei1], ix1 = xy[2 * ei] ^ xy[2 * ei1] ^ ix0;
                int64_t jx0 = xy[2 * ej] < xy[2 * ej1] ? xy[2 * ej] : xy[2 * ej1], jx1 = xy[2 * ej] ^ xy[2 * ej1] ^ jx0;
                if (k != (ki > kj ? ki : kj) || ix1 < jx0 || jx1 < ix0 || hi[ei] < lo[ej] || hi[ej] < lo[ei]) continue;
                if (!ocr__arr_pair(&g, ei, ej)) goto nomem;
            }

    /* merge crossings that coincide (three edges through one point) or land on a vertex */
    OCR_FREE(keys);
    keys = (ocr__gkey *)OCR_MALLOC((size_t)g.n_nodes * sizeof(ocr__gkey));
    if (!keys) goto nomem;
    for (i = 0; i < g.n_nodes; i++) { keys[i].x = g.nodes[i].x; keys[i].y = g.nodes[i].y; keys[i].id = i; }
    qsort(keys, (size_t)g.n_nodes, sizeof *keys, ocr__gkey_cmp);
    for (a = 0; a < g.n_nodes; a++)
        for (b = a + 1; b < g.n_nodes && keys[b].x - keys[a].x <= eps; b++)
            if (fabs(keys[b].y - keys[a].y) <= eps) ocr__uf_union(g.nodes, keys[a].id, keys[b].id);

    /* pieces between consecutive nodes along each edge; coincident pieces cancel or add up */
    qsort(g.splits, (size_t)g.n_splits, sizeof *g.splits, ocr__gsplit_cmp);
    for (i = 0; i + 1 < g.n_splits; i++) {
        int na = ocr__uf_find(g.nodes, g.splits[i].node), nb = ocr__uf_find(g.nodes, g.splits[i + 1].node);
        if (g.splits[i].edge != g.splits[i + 1].edge || na == nb) continue;
        if (!ocr__geom_grow((void **)&frags, &cap_frags, (int64_t)n_frags + 1, sizeof *frags)) goto nomem;
        frags[n_frags].a = na < nb ? na : nb;
        frags[n_frags].b = na < nb ? nb : na;
        frags[n_frags].mult = na < nb ? 1 : -1;
        n_frags++;
    }
    qsort(frags, (size_t)n_frags, sizeof *frags, ocr__gfrag_cmp);
    for (i = 0, k = 0; i < n_frags; i++) {
        if (k > 0 && frags[k - 1].a == frags[i].a && frags[k - 1].b == frags[i].b) frags[k - 1].mult += frags[i].mult;
        else frags[k++] = frags[i];
    }
    for (i = 0, n_frags = k, k = 0; i < n_frags; i++) {
        ocr__gfrag f = frags[i];
        if (f.mult == 0) continue;
        if (f.mult < 0) { int t = f.a; f.a = f.b; f.b = t; f.mult = -f.mult; }
        frags[k++] = f;
    }
    n_frags = k;
    if (n_frags == 0) goto done;

    /* winding on both sides of each piece from one ray towards +x through its midpoint; the ray counts an
       edge when its ends lie on different sides of y (ends at exactly y count as above), so shared nodes are
       counted once */
    OCR_FREE(lo);
    OCR_FREE(hi);
    lo = (double *)OCR_MALLOC((size_t)n_frags * sizeof(double));
    hi = (double *)OCR_MALLOC((size_t)n_frags * sizeof(double));
    bfrom = (int *)OCR_MALLOC((size_t)n_frags * sizeof(int));
    bto = (int *)OCR_MALLOC((size_t)n_frags * sizeof(int));
    if (!lo || !hi || !bfrom || !bto) goto nomem;
    memset(lo, 0, (size_t)n_frags * sizeof(double)); /* filled below; gcc -O1 cannot see it and warns */
    memset(hi, 0, (size_t)n_frags * sizeof(double));
    for (i = 0; i < n_frags; i++) {
        double ya = g.nodes[frags[i].a].y, yb = g.nodes[frags[i].b].y;
        lo[i] = ya < yb ? ya : yb;
        hi[i] = ya < yb ? yb : ya;
    }
    if (!ocr__bands_build(&fb, lo, hi, n_frags)) goto nomem;
    for (i = 0; i < n_frags; i++) {
        const ocr__gnode *p = &g.nodes[frags[i].a], *q = &g.nodes[frags[i].b];
        double mx = 0.5 * (p->x + q->x), my = 0.5 * (p->y + q->y);
        int wind = 0, kb = ocr__band_of(&fb, my), w_left, w_right, mult = frags[i].mult;
        for (a = fb.first[kb]; a < fb.first[kb + 1]; a++) {
            int o = fb.items[a];
            const ocr__gnode *u = &g.nodes[frags[o].a], *v = &g.nodes[frags[o].b];
            if (o == i || (u->y > my) == (v->y > my)) continue;
            if (u->x + (my - u->y) * (v->x - u->x) / (v->y - u->y) > mx) wind += v->y > u->y ? frags[o].mult : -frags[o].mult;
        }
        /* The ray crosses the piece only if its ends lie on different sides of my by the rule used above: a
           crossing on an axis-parallel edge carries rounding, so a piece can be tilted by an ulp while my rounds
           onto one end. Crossed: the left side of a->b is the one the ray leaves through when a->b heads up (+y).
           Not crossed: the ray runs just above the piece (ends at my count as below), on its +y side. */
        if ((p->y > my) != (q->y > my)) {
            w_left = q->y > p->y ? wind + mult : wind;
            w_right = w_left - mult;
        } else {
            w_left = q->x > p->x ? wind : wind + mult;
            w_right = w_left - mult;
        }
        if ((w_left > 0) == (w_right > 0)) continue;
        bfrom[n_bound] = w_left > 0 ? frags[i].a : frags[i].b;
        bto[n_bound] = w_left > 0 ? frags[i].b : frags[i].a;
        n_bound++;
    }
    if (n_bound == 0) goto done;

    /* trace rings with the region on the left */
    adj_first = (int *)OCR_MALLOC(((size_t)g.n_nodes + 1) * sizeof(int));
    adj = (int *)OCR_MALLOC((size_t)n_bound * sizeof(int));
    used = (int *)OCR_MALLOC((size_t)n_bound * sizeof(int));
    ring = (int *)OCR_MALLOC((size_t)n_bound * sizeof(int));
    succ = (int *)OCR_MALLOC((size_t)n_bound * sizeof(int));
    ring_of = (int *)OCR_MALLOC((size_t)n_bound * sizeof(int));
    angle = (double *)OCR_MALLOC((size_t)n_bound * sizeof(double));
    scratch = (int *)OCR_MALLOC((size_t)n_bound * 5 * sizeof(int));
    if (!adj_first || !adj || !used || !ring || !succ || !ring_of || !angle || !scratch) goto nomem;
    memset(adj_first, 0, ((size_t)g.n_nodes + 1) * sizeof(int));
    for (i = 0; i < n_bound; i++) {
        adj_first[bfrom[i] + 1]++;
        used[i] = 0;
        angle[i] = atan2(g.nodes[bto[i]].y - g.nodes[bfrom[i]].y, g.nodes[bto[i]].x - g.nodes[bfrom[i]].x);
    }
    for (i = 0; i < g.n_nodes; i++) adj_first[i + 1] += adj_first[i];
    for (i = 0; i < n_bound; i++) adj[i] = -1;
    for (i = 0; i < n_bound; i++) {
        int s = adj_first[bfrom[i]];
        while (adj[s] >= 0) s++;
        adj[s] = i;
    }
    /* ring[] takes the nodes of every ring one after the other; succ[] links each entry to the next of its ring */
    for (i = 0; i < n_bound; i++) {
        int e = i, first = n_entries;
        if (used[i]) continue;
        used[i] = 1;
        for (;;) {
            int v = bto[e], best = -1, o;
            double rev = angle[e] + OCR__GEOM_PI, best_cw = 10.0;
            ring[n_entries] = bfrom[e];
            ring_of[n_entries] = n_rings;
            succ[n_entries] = n_entries + 1;
            n_entries++;
            for (o = adj_first[v]; o < adj_first[v + 1]; o++) {
                int c = adj[o];
                double cw = rev - angle[c];
                if (used[c] && c != i) continue;
                if (cw <= 0) cw += 2 * OCR__GEOM_PI;
                if (cw > 2 * OCR__GEOM_PI) cw -= 2 * OCR__GEOM_PI;
                if (cw < best_cw) { best_cw = cw; best = c; }
            }
            if (best < 0) { n_entries = first; break; } /* an open chain: only possible through rounding trouble */
            if (best == i) break;
            used[best] = 1;
            e = best;
        }
        if (n_entries - first < 3) { n_entries = first; continue; }
        succ[n_entries - 1] = first;
        n_rings++;
    }
    /* Rings that share a node (a hole touching its outer ring, pieces meeting at a corner) come out of Clipper
       as one ring through that node twice; measured on approximated contours this matches pyclipper's piece
       count far more often than separate rings. Exchanging the successors of two entries at the same node
       joins their two cycles into one. */
    node_entry = (int *)OCR_MALLOC((size_t)g.n_nodes * sizeof(int));
    ring_root = (int *)OCR_MALLOC(((size_t)n_rings + 1) * sizeof(int));
    if (!node_entry || !ring_root || !ocr__geom_grow((void **)&cyc_xy, &cap_cyc_xy, 2 * (int64_t)n_entries, sizeof(int64_t)) ||
        !ocr__geom_grow((void **)&cycles, &cap_cycles, (int64_t)n_rings + 1, sizeof *cycles))
        goto nomem;
    for (i = 0; i < g.n_nodes; i++) node_entry[i] = -1;
    for (i = 0; i < n_rings; i++) ring_root[i] = i;
    for (k = 0; k < n_entries; k++) {
        int first = node_entry[ring[k]], ra, rb, t;
        if (first < 0) { node_entry[ring[k]] = k; continue; }
        ra = ocr__ring_root(ring_root, ring_of[first]);
        rb = ocr__ring_root(ring_root, ring_of[k]);
        if (ra == rb) continue;
        ring_root[rb] = ra;
        t = succ[first];
        succ[first] = succ[k];
        succ[k] = t;
    }
    for (k = 0; k < n_entries; k++) used[k] = 0;
    for (i = 0; i < n_entries; i++) {
        int len = 0, start = n_cyc_pts, count, at;
        int64_t bottom = 0, left = 0;
        if (used[i]) continue;
        for (at = i; !used[at]; at = succ[at], len++) {
            const ocr__gnode *nd = &g.nodes[ring[at]];
            int64_t x = ocr__clip_round(nd->x), y = ocr__clip_round(nd->y);
            used[at] = 1;
            cyc_xy[2 * (start + len)] = x;
            cyc_xy[2 * (start + len) + 1] = y;
            if (len == 0 || y > bottom || (y == bottom && x < left)) { bottom = y; left = x; }
        }
        count = ocr__ring_clean(cyc_xy + 2 * start, len, scratch, scratch + n_bound, scratch + 2 * n_bound);
        if (count < 3) continue;
        {
            double area2 = 0;
            for (k = 0; k < count; k++) {
                const int64_t *p = cyc_xy + 2 * (start + k), *q = cyc_xy + 2 * (start + (k + 1 < count ? k + 1 : 0));
                area2 += (double)p[0] * (double)q[1] - (double)q[0] * (double)p[1];
            }
            if (area2 == 0) continue;
        }
        cycles[n_cycles].start = start;
        cycles[n_cycles].count = count;
        cycles[n_cycles].bottom = bottom;
        cycles[n_cycles].left = left;
        n_cycles++;
        n_cyc_pts += count;
    }
    qsort(cycles, (size_t)n_cycles, sizeof *cycles, ocr__gcycle_cmp);
    for (i = 0; i < n_cycles && rc == OCR_OK; i++) rc = ocr__polyset_push(ctx, fn, out, cyc_xy + 2 * cycles[i].start, cycles[i].count);
    goto done;
nomem:
    rc = ocr_error(ctx, OCR_ENOMEM, "%s: out of memory while resolving the offset outline of %d points", fn, m);
done:
    ocr__bands_free(&eb);
    ocr__bands_free(&fb);
    OCR_FREE(g.vnode);
    OCR_FREE(g.nodes);
    OCR_FREE(g.splits);
    OCR_FREE(keys);
    OCR_FREE(frags);
    OCR_FREE(cycles);
    OCR_FREE(lo);
    OCR_FREE(hi);
    OCR_FREE(angle);
    OCR_FREE(bfrom);
    OCR_FREE(bto);
    OCR_FREE(adj_first);
    OCR_FREE(adj);
    OCR_FREE(used);
    OCR_FREE(ring);
    OCR_FREE(succ);
    OCR_FREE(ring_of);
    OCR_FREE(node_entry);
    OCR_FREE(ring_root);
    OCR_FREE(scratch);
    OCR_FREE(cyc_xy);
    return rc;
}



/* Sorts (x, y, path index) triples by y, then x. */
static int ocr__vertex_cmp(const void *pa, const void *pb) {
    const int64_t *a = (const int64_t *)pa, *b = (const int64_t *)pb;
    if (a[1] != b[1]) return (a[1] > b[1]) - (a[1] < b[1]);
    return (a[0] > b[0]) - (a[0] < b[0]);
}

/* 1 when the path has a vertex at (x, y) from which an edge runs up (towards smaller y) along the line to (tx, ty). */
static int ocr__joins_vertex(const int64_t *xy, int m, const int64_t *verts, int64_t x, int64_t y, int64_t tx, int64_t ty) {
    int64_t key[3];
    const int64_t *hit;
    int lo, k;
    key[0] = x;
    key[1] = y;
    key[2] = 0;
    hit = (const int64_t *)bsearch(key, verts, (size_t)m, 3 * sizeof(int64_t), ocr__vertex_cmp);
    if (!hit) return 0;
    for (lo = (int)((hit - verts) / 3); lo > 0 && verts[3 * (lo - 1)] == x && verts[3 * (lo - 1) + 1] == y; lo--) {}
    for (k = lo; k < m && verts[3 * k] == x && verts[3 * k + 1] == y; k++) {
        int j = (int)verts[3 * k + 2], side;
        for (side = 0; side < 2; side++) {
            const int64_t *u = xy + 2 * (side ? (j + 1 < m ? j + 1 : 0) : (j ? j - 1 : m - 1));
            if (u[1] < y && (u[0] - x) * (ty - y) == (u[1] - y) * (tx - x)) return 1;
        }
    }
    return 0;
}

/* The closed integer path xy (m points) bent as Clipper's scanline union bends it. Clipper sweeps the rows of the
   path's vertices keeping each edge's x on those rows rounded (from the edge's lower end: lower x + round(dx/dy *
   rows up)). Where that rounded point is a vertex of the path whose upward edge lies on the line from there to the
   first edge's upper end, Clipper joins the two (the first edge's output takes the point, and the shared piece
   cancels), so a ring thinner than a pixel there collapses onto itself and Clipper reports nothing of it. Appends
   the path with those points inserted to bent. */
static int ocr__scanline_bend(const int64_t *xy, int m, ocr__ipath *bent) {
    int64_t *verts = (int64_t *)OCR_MALLOC((size_t)m * 3 * sizeof(int64_t));
    int i, ok = 1;
    if (!verts) return 0;
    for (i = 0; i < m; i++) { verts[3 * i] = xy[2 * i]; verts[3 * i + 1] = xy[2 * i + 1]; verts[3 * i + 2] = i; }
    qsort(verts, (size_t)m, 3 * sizeof(int64_t), ocr__vertex_cmp);
    for (i = 0; i < m && ok; i++) {
        const int64_t *a = xy + 2 * i, *b = xy + 2 * (i + 1 < m ? i + 1 : 0);
        const int64_t *bot = a[1] > b[1] ? a : b, *top = a[1] > b[1] ? b : a;
        int lo = 0, hi = m, k, first, last, step;
        ok = ocr__ipath_push(bent, a[0], a[1]);
        if (bot[1] - top[1] < 2) continue;
        /* the vertices on rows strictly between the ends: [first, last] of the sorted list */
        while (lo < hi) { int mid = (lo + hi) / 2; if (verts[3 * mid + 1] <= top[1]) lo = mid + 1; else hi = mid; }
        first = lo;
        for (last = first; last < m && verts[3 * last + 1] < bot[1]; last++) {}
        last--;
        step = a[1] > b[1] ? -1 : 1;
        for (k = step > 0 ? first : last; ok && k >= first && k <= last; k += step) {
            int64_t row = verts[3 * k + 1], x;
            if (k != (step > 0 ? first : last) && verts[3 * (k - step) + 1] == row) continue; /* one test per row */
            x = bot[0] + ocr__clip_round((double)(top[0] - bot[0]) / (double)(top[1] - bot[1]) * (double)(row - bot[1]));
            if (ocr__joins_vertex(xy, m, verts, x, row, top[0], top[1])) ok = ocr__ipath_push(bent, x, row);
        }
    }
    OCR_FREE(verts);
    return ok;
}

/* 1 when the pieces are on average under 2 px wide (area below perimeter): only such can vanish in Clipper's
   rounding (ocr__scanline_bend), and the check costs a second resolution. */
static int ocr__polyset_thin(const ocr_polyset *ps) {
    double area = 0, perimeter = 0;
    int i, at;
    for (i = 0, at = 0; i < ps->n_polys; at += ps->counts[i++]) {
        area += fabs(ocr_poly_area(ps->pts + at, ps->counts[i]));
        perimeter += ocr_poly_perimeter(ps->pts + at, ps->counts[i]);
    }
    return area <= perimeter;
}

OCRDEF int ocr_poly_offset(ocr_ctx *ctx, const ocr_point *pts, int n, double delta, ocr_polyset *out) {
    const char *fn = "ocr_poly_offset";
    int64_t *src = NULL;
    ocr__ipath raw;
    int i, m, rc;
    double twice_area = 0;
    memset(&raw, 0, sizeof raw);
    if (!out) return ocr_error(ctx, OCR_EINVAL, "%s: out is NULL", fn);
    if ((rc = ocr_poly_check(ctx, fn, "pts", pts, n))) return rc;
    if (!isfinite(delta) || fabs(delta) > OCR_POLY_MAX_COORD)
        return ocr_error(ctx, OCR_EINVAL, "%s: delta %g is not finite or beyond +-%g", fn, delta, OCR_POLY_MAX_COORD);
    out->n_polys = 0;
    out->n_pts = 0;
    if (n < 3) return OCR_OK;
    src = (int64_t *)OCR_MALLOC((size_t)n * 2 * sizeof(int64_t));
    if (!src) return ocr_error(ctx, OCR_ENOMEM, "%s: cannot copy a polygon of %d points", fn, n);
    for (i = 0; i < n; i++) { /* pyclipper truncates toward zero */
        src[2 * i] = (int64_t)pts[i].x;
        src[2 * i + 1] = (int64_t)pts[i].y;
    }
    m = ocr__ipath_dedup(src, n);
    if (m < 3) goto done;
    for (i = 0; i < m; i++) { /* Clipper's orientation test: the trapezoid form of the shoelace sum */
        int p = i ? i - 1 : m - 1;
        twice_area -= ((double)src[2 * p] + (double)src[2 * i]) * ((double)src[2 * p + 1] - (double)src[2 * i + 1]);
    }
    if (twice_area < 0)
        for (i = 0; i < m / 2; i++) {
            int64_t tx = src[2 * i], ty = src[2 * i + 1];
            src[2 * i] = src[2 * (m - 1 - i)];
            src[2 * i + 1] = src[2 * (m - 1 - i) + 1];
            src[2 * (m - 1 - i)] = tx;
            src[2 * (m - 1 - i) + 1] = ty;
        }
    if (fabs(delta) < 1e-20) { /* no offset: just the positive region of the path itself */
        for (i = 0; i < m; i++)
            if (!ocr__ipath_push(&raw, src[2 * i], src[2 * i + 1])) break;
        if (i < m) { rc = ocr_error(ctx, OCR_ENOMEM, "%s: out of memory", fn); goto done; }
    } else if (!ocr__offset_outline(src, m, delta, &raw)) {
        rc = ocr_error(ctx, OCR_ENOMEM, "%s: out of memory building the offset outline of %d points", fn, m);
        goto done;
    }
    raw.n = ocr__ipath_dedup(raw.xy, raw.n);
    if (raw.n >= 3) rc = ocr__positive_region(ctx, fn, raw.xy, raw.n, out);
    if (rc == OCR_OK && out->n_polys > 0 && ocr__polyset_thin(out)) {
        ocr__ipath bent;
        ocr_polyset probe;
        memset(&bent, 0, sizeof bent);
        memset(&probe, 0, sizeof probe);
        if (!ocr__scanline_bend(raw.xy, raw.n, &bent)) rc = ocr_error(ctx, OCR_ENOMEM, "%s: out of memory", fn);
        else {
            bent.n = ocr__ipath_dedup(bent.xy, bent.n);
            if (bent.n >= 3) rc = ocr__positive_region(ctx, fn, bent.xy, bent.n, &probe);
            if (rc == OCR_OK && probe.n_polys == 0) { out->n_polys = 0; out->n_pts = 0; }
        }
        OCR_FREE(bent.xy);
        ocr_polyset_free(&probe);
    }
done:
    OCR_FREE(src);
    OCR_FREE(raw.xy);
    return rc;
}

/* ---- rasterisation with cv2.fillPoly's pixel rules */

/* Clips the segment to [0,w-1]x[0,h-1] as OpenCV's clipLine does before drawing: an end outside in y first
   slides along the segment to the nearest row border, then an end outside in x to the column border, each
   shift truncated to an integer. Returns 0 when nothing of the segment is left. */
static int ocr__geom_clip_line(int64_t w, int64_t h, int64_t *x1, int64_t *y1, int64_t *x2, int64_t *y2) {
    int64_t right = w - 1, bottom = h - 1;
    int c1 = (*x1 < 0) + (*x1 > right) * 2 + (*y1 < 0) * 4 + (*y1 > bottom) * 8;
    int c2 = (*x2 < 0) + (*x2 > right) * 2 + (*y2 < 0) * 4 + (*y2 > bottom) * 8;
    if ((c1 & c2) == 0 && (c1 | c2) != 0) {
        if (c1 & 12) {
            int64_t row = c1 < 8 ? 0 : bottom;
            *x1 += (int64_t)((double)(row - *y1) * (double)(*x2 - *x1) / (double)(*y2 - *y1));
            *y1 = row;
            c1 = (*x1 < 0) + (*x1 > right) * 2;
        }
        if (c2 & 12) {
            int64_t row = c2 < 8 ? 0 : bottom;
            *x2 += (int64_t)((double)(row - *y2) * (double)(*x2 - *x1) / (double)(*y2 - *y1));
            *y2 = row;
            c2 = (*x2 < 0) + (*x2 > right) * 2;
        }
        if ((c1 & c2) == 0 && (c1 | c2) != 0) {
            if (c1) {
                int64_t col = c1 == 1 ? 0 : right;
                *y1 += (int64_t)((double)(col - *x1) * (double)(*y2 - *y1) / (double)(*x2 - *x1));
                *x1 = col;
                c1 = 0;
            }
            if (c2) {
                int64_t col = c2 == 1 ? 0 : right;
                *y2 += (int64_t)((double)(col - *x2) * (double)(*y2 - *y1) / (double)(*x2 - *x1));
                *x2 = col;
                c2 = 0;
            }
        }
    }
    return (c1 | c2) == 0;
}

/* An 8-connected Bresenham line as OpenCV's LINE_8, drawn left to right: the major axis advances every step,
   the minor one when the error term is negative before the step. */
static void ocr__geom_line(float *img, int64_t w, int64_t h, int64_t x1, int64_t y1, int64_t x2, int64_t y2, float value) {
    int64_t dx, dy, major, minor, err, i, x, y, sy;
    int steep;
    if (!ocr__geom_clip_line(w, h, &x1, &y1, &x2, &y2)) return;
    if (x2 < x1) {
        int64_t t = x1; x1 = x2; x2 = t;
        t = y1; y1 = y2; y2 = t;
    }
    dx = x2 - x1;
    dy = y2 >= y1 ? y2 - y1 : y1 - y2;
    sy = y2 >= y1 ? 1 : -1;
    steep = dy > dx;
    major = steep ? dy : dx;
    minor = steep ? dx : dy;
    err = major - 2 * minor;
    for (i = 0, x = x1, y = y1; i <= major; i++) {
        int diagonal = err < 0;
        img[y * w + x] = value;
        err += diagonal ? 2 * major - 2 * minor : -2 * minor;
        if (steep) { y += sy; if (diagonal) x++; }
        else { x++; if (diagonal) y += sy; }
    }
}

/* floor(v / 65536) for the 16.16 fixed-point x of the scanline fill */
static int64_t ocr__geom_floor16(int64_t v) { return v >= 0 ? v / 65536 : -((-v + 65535) / 65536); }

typedef struct { int64_t y0, y1, x, dx; } ocr__scan_edge; /* rows [y0, y1), x in 16.16 at row y0, per-row step */

OCRDEF int ocr_poly_fill(ocr_ctx *ctx, float *img, int height, int width, const ocr_point *pts, int n, float value) {
    const char *fn = "ocr_poly_fill";
    ocr__scan_edge *edges;
    int64_t *xs, y, y_lo = 0, y_hi = 0;
    int i, k, n_edges = 0, rc;
    if (!img || height <= 0 || width <= 0)
        return ocr_error(ctx, OCR_EINVAL, "%s: image %p of %d x %d (height x width) is not a plane", fn, (void *)img, height, width);
    if ((rc = ocr_poly_check(ctx, fn, "pts", pts, n))) return rc;
    if (n == 0) return OCR_OK;
    edges = (ocr__scan_edge *)OCR_MALLOC((size_t)n * sizeof *edges);
    xs = (int64_t *)OCR_MALLOC((size_t)n * sizeof *xs);
    if (!edges || !xs) {
        OCR_FREE(edges);
        OCR_FREE(xs);
        return ocr_error(ctx, OCR_ENOMEM, "%s: cannot allocate the edge table of %d points", fn, n);
    }
    for (i = 0; i < n; i++) {
        const ocr_point *p = &pts[i ? i - 1 : n - 1], *q = &pts[i];
        int64_t x0 = (int64_t)p->x, y0 = (int64_t)p->y, x1 = (int64_t)q->x, y1 = (int64_t)q->y; /* astype(int32) */
        ocr__geom_line(img, width, height, x0, y0, x1, y1, value);
        if (y0 == y1) continue;
        edges[n_edges].dx = (x1 - x0) * 65536 / (y1 - y0);
        edges[n_edges].y0 = y0 < y1 ? y0 : y1;
        edges[n_edges].y1 = y0 < y1 ? y1 : y0;
        edges[n_edges].x = (y0 < y1 ? x0 : x1) * 65536;
        if (n_edges == 0 || edges[n_edges].y0 < y_lo) y_lo = edges[n_edges].y0;
        if (n_edges == 0 || edges[n_edges].y1 > y_hi) y_hi = edges[n_edges].y1;
        n_edges++;
    }
    /* rows inside [y0, y1) of each edge; on each row the pixel centres between the 1st-2nd, 3rd-4th...
       crossings, both ends included (the outline drawn above covers what the rounding leaves out) */
    if (n_edges >= 2) {
        if (y_lo < 0) y_lo = 0;
        if (y_hi > height) y_hi = height;
        for (y = y_lo; y < y_hi; y++) {
            int cnt = 0;
            for (i = 0; i < n_edges; i++) {
                int64_t x;
                if (y < edges[i].y0 || y >= edges[i].y1) continue;
                x = edges[i].x + (y - edges[i].y0) * edges[i].dx;
                for (k = cnt++; k > 0 && xs[k - 1] > x; k--) xs[k] = xs[k - 1];
                xs[k] = x;
            }
            for (k = 0; k + 1 < cnt; k += 2) {
                int64_t a = ocr__geom_floor16(xs[k] + 65535), b = ocr__geom_floor16(xs[k + 1]), x;
                if (a >= width || b < 0 || a > b) continue;
                if (a < 0) a = 0;
                if (b >= width) b = width - 1;
                for (x = a; x <= b; x++) img[y * width + x] = value;
            }
        }
    }
    OCR_FREE(edges);
    OCR_FREE(xs);
    return OCR_OK;
}

/* ================================================================ [contours, boxes, simplification] implementation */

/* Contour output, point by point (the border follower does not know a border's length in advance). */
static int ocr__polyset_begin(ocr_ctx *ctx, const char *fn, ocr_polyset *ps) {
    if (!ocr__geom_grow((void **)&ps->counts, &ps->cap_polys, (int64_t)ps->n_polys + 1, sizeof(int)))
        return ocr_error(ctx, OCR_ENOMEM, "%s: cannot grow the output to %lld polygons", fn, (long long)ps->n_polys + 1);
    ps->counts[ps->n_polys++] = 0;
    return OCR_OK;
}

static int ocr__polyset_add_point(ocr_ctx *ctx, const char *fn, ocr_polyset *ps, float x, float y) {
    if (!ocr__geom_grow((void **)&ps->pts, &ps->cap_pts, (int64_t)ps->n_pts + 1, sizeof(ocr_point)))
        return ocr_error(ctx, OCR_ENOMEM, "%s: cannot grow the output to %lld points", fn, (long long)ps->n_pts + 1);
    ps->pts[ps->n_pts].x = x;
    ps->pts[ps->n_pts].y = y;
    ps->n_pts++;
    ps->counts[ps->n_polys - 1]++;
    return OCR_OK;
}

/* ---------------------------------------------------------------- border following (Suzuki & Abe 1985) */

/* Work-image states. One border label suffices for a flat contour list; "east" marks a border pixel whose
   east neighbour was examined and found background, which stops it from starting a hole border later. */
enum { OCR__PX_BG = 0, OCR__PX_FG = 1, OCR__PX_SEEN = 2, OCR__PX_SEEN_EAST = 3 };
/* Chain codes as OpenCV numbers them: 0 east, then counter-clockwise on screen (y down). */
static const int ocr__chain_dx[8] = {1, 1, 0, -1, -1, -1, 0, 1};
static const int ocr__chain_dy[8] = {0, -1, -1, -1, 0, 1, 1, 1};

/* Follows one border from (x0, y0) of the padded image, emitting only the points where the chain code
   changes (CHAIN_APPROX_SIMPLE). An outer border starts with its west neighbour as background, a hole
   border with its east neighbour. */
static int ocr__follow_border(ocr_ctx *ctx, uint8_t *img, ptrdiff_t stride, int x0, int y0, int is_hole, ocr_polyset *out) {
    const char *fn = "ocr_find_contours";
    ptrdiff_t off[8], start = (ptrdiff_t)y0 * stride + x0, first, cur, next = 0;
    int k, dir, dir_from, last_dir, px = x0, py = y0, rc;
    for (k = 0; k < 8; k++) off[k] = ocr__chain_dx[k] + ocr__chain_dy[k] * stride;
    if ((rc = ocr__polyset_begin(ctx, fn, out))) return rc;
    /* Clockwise from the background neighbour to the first foreground neighbour. */
    dir_from = is_hole ? 0 : 4;
    dir = dir_from;
    do {
        dir = (dir + 7) & 7;
        if (img[start + off[dir]] != OCR__PX_BG) break;
    } while (dir != dir_from);
    if (dir == dir_from) { /* isolated pixel */
        img[start] = OCR__PX_SEEN_EAST;
        return ocr__polyset_add_point(ctx, fn, out, (float)(x0 - 1), (float)(y0 - 1));
    }
    first = start + off[dir];
    cur = start;
    last_dir = dir ^ 4;
    for (;;) {
        /* Counter-clockwise from just after the pixel we came from to the next foreground neighbour. */
        int back = dir, d = dir;
        do {
            d++;
            next = cur + off[d & 7];
        } while (img[next] == OCR__PX_BG);
        dir = d & 7;
        /* The scan passed east (code 0) and found background there iff 1 <= dir <= back. */
        if (dir >= 1 && dir <= back) img[cur] = OCR__PX_SEEN_EAST;
        else if (img[cur] == OCR__PX_FG) img[cur] = OCR__PX_SEEN;
        if (dir != last_dir) {
            if ((rc = ocr__polyset_add_point(ctx, fn, out, (float)(px - 1), (float)(py - 1)))) return rc;
            last_dir = dir;
        }
        px += ocr__chain_dx[dir];
        py += ocr__chain_dy[dir];
        if (next == start && cur == first) break;
        cur = next;
        dir = (dir + 4) & 7;
    }
    return OCR_OK;
}

/* The work image of border following, in ctx's scratch: the bitmap framed by one pixel of background (borders
   touching the image edge then need no bounds checks) plus 8 spare bytes for the word-at-a-time scan. The frame
   is cleared here; the caller writes the interior (OCR__PX_BG or OCR__PX_FG) at img + (y + 1) * (width + 2) + 1. */
static uint8_t *ocr__contour_image(ocr_ctx *ctx, const char *fn, int width, int height) {
    size_t bytes;
    ptrdiff_t stride = (ptrdiff_t)width + 2;
    uint8_t *img;
    int y;
    if (!ocr_size_mul((size_t)width + 2, (size_t)height + 2, &bytes) || !ocr_size_add(bytes, 8, &bytes)) {
        ocr_error(ctx, OCR_EOVERFLOW, "%s: bitmap %dx%d is too large", fn, width, height);
        return NULL;
    }
    if (!(img = (uint8_t *)ocr_ctx_scratch(ctx, OCR_SCRATCH_OP0, bytes))) return NULL;
    memset(img, 0, (size_t)stride);
    memset(img + (height + 1) * stride, 0, (size_t)stride + 8);
    for (y = 1; y <= height; y++) img[y * stride] = img[y * stride + width + 1] = OCR__PX_BG;
    return img;
}

/* Non-zero bytes among the 8 at p (the classic has-a-zero-byte test, inverted where needed). */
static uint64_t ocr__load8(const uint8_t *p) { uint64_t w; memcpy(&w, p, 8); return w; }
static int ocr__has_zero_byte(uint64_t w) { return ((w - 0x0101010101010101ull) & ~w & 0x8080808080808080ull) != 0; }

/* Suzuki & Abe's raster scan as a flat list needs it: an outer border starts at a foreground pixel not yet on
   any border whose west neighbour is background; a hole border at a pixel whose east neighbour is background,
   unless an earlier border already found that background east of it. Following never turns a pixel to or from
   background, so the scan skips runs of background and of foreground 8 bytes at a time. Borders are emitted
   last found first, as OpenCV lists them. */
static int ocr__trace_borders(ocr_ctx *ctx, uint8_t *img, int width, int height, ocr_polyset *out) {
    ptrdiff_t stride = (ptrdiff_t)width + 2;
    int y, i, rc, n_polys, first;
    out->n_polys = out->n_pts = 0;
    for (y = 1; y <= height; y++) {
        uint8_t *row = img + y * stride;
        int x = 1;
        for (;;) {
            while (x <= width && ocr__load8(row + x) == 0) x += 8;
            while (x <= width && row[x] == OCR__PX_BG) x++;
            if (x > width) break;
            if (row[x] == OCR__PX_FG && (rc = ocr__follow_border(ctx, img, stride, x, y, 0, out))) return rc;
            /* the frame ends every run by width + 1 */
            x++;
            while (!ocr__has_zero_byte(ocr__load8(row + x))) x += 8;
            while (row[x] != OCR__PX_BG) x++;
            if ((row[x - 1] == OCR__PX_FG || row[x - 1] == OCR__PX_SEEN) && (rc = ocr__follow_border(ctx, img, stride, x - 1, y, 1, out)))
                return rc;
        }
    }
    /* Reverse the list: all points, then each border's own points back, then the counts. */
    n_polys = out->n_polys;
    for (i = 0; i < out->n_pts / 2; i++) {
        ocr_point t = out->pts[i];
        out->pts[i] = out->pts[out->n_pts - 1 - i];
        out->pts[out->n_pts - 1 - i] = t;
    }
    for (i = 0; i < n_polys / 2; i++) {
        int t = out->counts[i];
        out->counts[i] = out->counts[n_polys - 1 - i];
        out->counts[n_polys - 1 - i] = t;
    }
    for (i = 0, first = 0; i < n_polys; first += out->counts[i], i++) {
        int a = first, b = first + out->counts[i] - 1;
        for (; a < b; a++, b--) { ocr_point t = out->pts[a]; out->pts[a] = out->pts[b]; out->pts[b] = t; }
    }
    return OCR_OK;
}

OCRDEF int ocr_find_contours(ocr_ctx *ctx, const uint8_t *bitmap, int width, int height, ocr_polyset *out) {
    const char *fn = "ocr_find_contours";
    uint8_t *img;
    int x, y, rc;
    if (!bitmap || !out) return ocr_error(ctx, OCR_EINVAL, "%s: bitmap and out must not be NULL", fn);
    if (width < 1 || height < 1 || width > (1 << 24) || height > (1 << 24))
        return ocr_error(ctx, OCR_EINVAL, "%s: bitmap size %dx%d must be 1..2^24 on each side", fn, width, height);
    if (!(img = ocr__contour_image(ctx, fn, width, height))) return ctx->last_status;
    for (y = 0; y < height; y++) {
        uint8_t *dst = img + (ptrdiff_t)(y + 1) * (width + 2) + 1;
        const uint8_t *src = bitmap + (size_t)y * width;
        for (x = 0; x < width; x++) dst[x] = src[x] ? OCR__PX_FG : OCR__PX_BG;
    }
    rc = ocr__trace_borders(ctx, img, width, height, out);
    if (rc) out->n_polys = out->n_pts = 0;
    return rc;
}

OCRDEF uint8_t *ocr_contour_frame(ocr_ctx *ctx, int width, int height) {
    const char *fn = "ocr_contour_frame";
    if (width < 1 || height < 1 || width > (1 << 24) || height > (1 << 24)) {
        ocr_error(ctx, OCR_EINVAL, "%s: bitmap size %dx%d must be 1..2^24 on each side", fn, width, height);
        return NULL;
    }
    return ocr__contour_image(ctx, fn, width, height);
}

OCRDEF int ocr_find_contours_framed(ocr_ctx *ctx, uint8_t *frame, int width, int height, ocr_polyset *out) {
    const char *fn = "ocr_find_contours_framed";
    int rc;
    if (!frame || !out) return ocr_error(ctx, OCR_EINVAL, "%s: frame and out must not be NULL", fn);
    if (width < 1 || height < 1 || width > (1 << 24) || height > (1 << 24))
        return ocr_error(ctx, OCR_EINVAL, "%s: bitmap size %dx%d must be 1..2^24 on each side", fn, width, height);
    rc = ocr__trace_borders(ctx, frame, width, height, out);
    if (rc) out->n_polys = out->n_pts = 0;
    return rc;
}

/* ---------------------------------------------------------------- minimum-area rectangle */

typedef struct { double x, y; } ocr__dpt;

static double ocr__cross3(ocr__dpt o, ocr__dpt a, ocr__dpt b) { return (a.x - o.x) * (b.y - o.y) - (a.y - o.y) * (b.x - o.x); }

/* The float32 code below reproduces OpenCV's rounding: fused multiply-adds would change it, so contraction is
   off here whatever the compiler flags (gcc contracts by default outside ISO mode, clang within expressions). */
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC push_options
#pragma GCC optimize("fp-contract=off")
#elif defined(__clang__)
#pragma STDC FP_CONTRACT OFF
#endif

/* A point with its position in the caller's array, which decides where cv2.convexHull starts the hull. */
typedef struct { float x, y; int idx; } ocr__hpt;

static int ocr__hpt_less(const void *a, const void *b) {
    const ocr__hpt *p = (const ocr__hpt *)a, *q = (const ocr__hpt *)b;
    if (p->x != q->x) return p->x < q->x ? -1 : 1;
    if (p->y != q->y) return p->y < q->y ? -1 : 1;
    return (p->idx > q->idx) - (p->idx < q->idx);
}

static double ocr__hpt_turn(const ocr__hpt *o, const ocr__hpt *a, const ocr__hpt *b) {
    return ((double)a->x - o->x) * ((double)b->y - o->y) - ((double)a->y - o->y) * ((double)b->x - o->x);
}

static void ocr__hpt_reverse(ocr__hpt *p, int lo, int hi) {
    for (; lo < hi; lo++, hi--) { ocr__hpt t = p[lo]; p[lo] = p[hi]; p[hi] = t; }
}

/* hull[0..n) starts at hull[first] afterwards. */
static void ocr__hpt_rotate(ocr__hpt *hull, int n, int first) {
    if (first <= 0) return;
    ocr__hpt_reverse(hull, 0, first - 1);
    ocr__hpt_reverse(hull, first, n - 1);
    ocr__hpt_reverse(hull, 0, n - 1);
}

/* The points of pts that can be hull vertices, sorted by (x, y), a repeated point standing for its first
   occurrence; returns their count. Integer x spanning fewer columns than n + 64 (contours, unclipped boxes) takes
   a counting pass that keeps each column's lowest and highest point; other sets are sorted. cols: room for
   2 * (n + 64) ints. */
static int ocr__hull_candidates(const ocr_point *pts, int n, ocr__hpt *cand, int *cols) {
    float lo_x = pts[0].x, hi_x = pts[0].x;
    int i, m = 0, integral = 1;
    for (i = 0; i < n; i++) {
        if (pts[i].x < lo_x) lo_x = pts[i].x;
        if (pts[i].x > hi_x) hi_x = pts[i].x;
        integral &= pts[i].x == floorf(pts[i].x);
    }
    if (integral && (double)hi_x - lo_x < (double)n + 64) {
        int span = (int)(hi_x - lo_x) + 1, c, *low = cols, *high = cols + span;
        for (c = 0; c < span; c++) low[c] = high[c] = -1;
        for (i = 0; i < n; i++) {
            c = (int)(pts[i].x - lo_x);
            if (low[c] < 0 || pts[i].y < pts[low[c]].y) low[c] = i;
            if (high[c] < 0 || pts[i].y > pts[high[c]].y) high[c] = i;
        }
        for (c = 0; c < span; c++) {
            if (low[c] < 0) continue;
            cand[m].x = pts[low[c]].x; cand[m].y = pts[low[c]].y; cand[m++].idx = low[c];
            if (pts[high[c]].y == pts[low[c]].y) continue;
            cand[m].x = pts[high[c]].x; cand[m].y = pts[high[c]].y; cand[m++].idx = high[c];
        }
        return m;
    }
    for (i = 0; i < n; i++) { cand[i].x = pts[i].x; cand[i].y = pts[i].y; cand[i].idx = i; }
    qsort(cand, (size_t)n, sizeof *cand, ocr__hpt_less);
    for (i = 0; i < n; i++)
        if (m == 0 || cand[i].x != cand[m - 1].x || cand[i].y != cand[m - 1].y) cand[m++] = cand[i];
    return m;
}

/* Strictly convex hull of the m candidates as cv2.convexHull returns it: counter-clockwise with y up, starting
   at the largest (x, y), unless the vertices' positions in the input run monotonically around it (always so for
   a contour); then it starts at the first (increasing) or the last (decreasing) of them. Monotone chain
   (Andrew); hull has room for m + 1 points. */
static int ocr__convex_hull(const ocr__hpt *pts, int m, ocr__hpt *hull) {
    int i, k = 0, lower, largest, rises = 0, lo = 0, hi = 0;
    if (m == 1) { hull[0] = pts[0]; return 1; }
    for (i = 0; i < m; i++) {
        while (k >= 2 && ocr__hpt_turn(&hull[k - 2], &hull[k - 1], &pts[i]) <= 0) k--;
        hull[k++] = pts[i];
    }
    largest = k - 1;
    lower = k + 1;
    for (i = m - 2; i >= 0; i--) {
        while (k >= lower && ocr__hpt_turn(&hull[k - 2], &hull[k - 1], &pts[i]) <= 0) k--;
        hull[k++] = pts[i];
    }
    k--; /* the last point repeats the first */
    ocr__hpt_rotate(hull, k, largest);
    if (k < 3) return k;
    for (i = 0; i < k; i++) {
        rises += hull[i].idx < hull[(i + 1) % k].idx;
        if (hull[i].idx < hull[lo].idx) lo = i;
        if (hull[i].idx > hull[hi].idx) hi = i;
    }
    if (rises == k - 1) ocr__hpt_rotate(hull, k, lo);
    else if (rises == 1) ocr__hpt_rotate(hull, k, hi);
    return k;
}

/* A rotated rectangle as cv2.RotatedRect holds it: centre, size (w along the angle), angle in degrees. */
typedef struct { float cx, cy, w, h, angle; } ocr__rrect;

/* Radians to degrees as minAreaRect does it: the float angle times 180 stays float, the division is double. */
static float ocr__rrect_degrees(float radians) {
    float scaled = radians * 180.0f;
    return (float)((double)scaled / OCR__GEOM_PI);
}

/* Rotating calipers over a counter-clockwise hull of n >= 3 points, in float32 as cv2.minAreaRect: four calipers
   start on the lowest, rightmost, highest and leftmost vertices (first of equals) with the first one pointing
   along +x. At each step the caliper whose next hull edge turns least from its own direction (compared by the
   sign of a cross product) moves onto that edge, the others turn with it, and the rectangle they span is kept
   when its area is <= the smallest so far. vx, vy, inv_len: room for n floats each. */
static void ocr__calipers_rect(const ocr__hpt *h, int n, float *vx, float *vy, float *inv_len, ocr__rrect *r) {
    int i, k, s[4] = {0, 0, 0, 0}, best_left = 0, best_low = 0;
    float a = 1.0f, b = 0.0f, min_area = 0.0f, best_a = 1.0f, best_b = 0.0f, best_w = 0.0f, best_h = 0.0f;
    float c1, c2, inv_det, ox, oy, ux, uy, wx, wy, t1, t2;
    for (i = 0; i < n; i++) {
        const ocr__hpt *next = &h[i + 1 < n ? i + 1 : 0];
        double dx, dy;
        if (h[i].y < h[s[0]].y) s[0] = i;
        if (h[i].x > h[s[1]].x) s[1] = i;
        if (h[i].y > h[s[2]].y) s[2] = i;
        if (h[i].x < h[s[3]].x) s[3] = i;
        vx[i] = next->x - h[i].x;
        vy[i] = next->y - h[i].y;
        dx = vx[i];
        dy = vy[i];
        inv_len[i] = (float)(1.0 / sqrt(dx * dx + dy * dy));
    }
    for (k = 0; k < n; k++) {
        /* each caliper's next edge, turned into the frame of caliper 0 */
        float ex[4], ey[4], dx, dy, width, height, area;
        int lead = 0, j, e;
        ex[0] = vx[s[0]];  ey[0] = vy[s[0]];
        ex[1] = vy[s[1]];  ey[1] = -vx[s[1]];
        ex[2] = -vx[s[2]]; ey[2] = -vy[s[2]];
        ex[3] = -vy[s[3]]; ey[3] = vx[s[3]];
        for (j = 1; j < 4; j++)
            if ((double)ex[j] * ey[lead] - (double)ey[j] * ex[lead] > 0) lead = j;
        e = s[lead];
        a = ex[lead] * inv_len[e];
        b = ey[lead] * inv_len[e];
        s[lead] = s[lead] + 1 < n ? s[lead] + 1 : 0;
        dx = h[s[1]].x - h[s[3]].x;
        dy = h[s[1]].y - h[s[3]].y;
        t1 = dx * a;
        t2 = dy * b;
        width = t1 + t2;
        dx = h[s[2]].x - h[s[0]].x;
        dy = h[s[2]].y - h[s[0]].y;
        t1 = dy * a;
        t2 = dx * b;
        height = t1 - t2;
        area = width * height;
        if (k == 0 || area <= min_area) {
            min_area = area;
            best_left = s[3]; best_low = s[0];
            best_a = a; best_b = b; best_w = width; best_h = height;
        }
    }
    /* The corner where the side through the leftmost support point (direction (a, b)) meets the side through
       the lowest one (direction (-b, a)), then the two side vectors from it. */
    a = best_a;
    b = best_b;
    t1 = a * h[best_left].x; t2 = h[best_left].y * b; c1 = t1 + t2;
    t1 = -b * h[best_low].x; t2 = h[best_low].y * a; c2 = t1 + t2;
    t1 = a * a; t2 = b * b; inv_det = 1.0f / (t1 + t2);
    t1 = c1 * a; t2 = c2 * b; ox = (t1 - t2) * inv_det;
    t1 = a * c2; t2 = b * c1; oy = (t1 + t2) * inv_det;
    ux = a * best_w;  uy = b * best_w;
    wx = -b * best_h; wy = a * best_h;
    r->cx = ox + (ux + wx) * 0.5f;
    r->cy = oy + (uy + wy) * 0.5f;
    r->w = (float)sqrt((double)ux * ux + (double)uy * uy);
    r->h = (float)sqrt((double)wx * wx + (double)wy * wy);
    r->angle = ocr__rrect_degrees((float)atan2((double)uy, (double)ux));
}

/* cv2.boxPoints: the corners from centre, size and angle, the last two mirrored through the centre. */
static void ocr__rrect_corners(const ocr__rrect *r, ocr_point p[4]) {
    double rad = (double)r->angle * OCR__GEOM_PI / 180.0;
    float b = (float)cos(rad) * 0.5f, a = (float)sin(rad) * 0.5f, ah = a * r->h, aw = a * r->w, bh = b * r->h, bw = b * r->w;
    p[0].x = r->cx - ah - bw;
    p[0].y = r->cy + bh - aw;
    p[1].x = r->cx + ah - bw;
    p[1].y = r->cy - bh - aw;
    p[2].x = 2.0f * r->cx - p[0].x;
    p[2].y = 2.0f * r->cy - p[0].y;
    p[3].x = 2.0f * r->cx - p[1].x;
    p[3].y = 2.0f * r->cy - p[1].y;
}

/* get_mini_boxes: corners sorted by x (stably); of the two left ones the upper is TL, of the two right ones
   the upper is TR (ties go to the second of the pair, as there). */
static void ocr__order_box(const ocr_point corners[4], ocr_point box[4]) {
    ocr_point s[4];
    int i, j;
    for (i = 0; i < 4; i++) {
        ocr_point p = corners[i];
        for (j = i; j > 0 && s[j - 1].x > p.x; j--) s[j] = s[j - 1];
        s[j] = p;
    }
    if (s[1].y > s[0].y) { box[0] = s[0]; box[3] = s[1]; } else { box[0] = s[1]; box[3] = s[0]; }
    if (s[3].y > s[2].y) { box[1] = s[2]; box[2] = s[3]; } else { box[1] = s[3]; box[2] = s[2]; }
}

OCRDEF int ocr_min_area_box_work(ocr_ctx *ctx, const ocr_point *pts, int n, ocr_point box[4], float *short_side, void **work,
                                 size_t *cap) {
    const char *fn = "ocr_min_area_box";
    ocr__hpt *cand, *hull;
    ocr__rrect r;
    ocr_point corners[4];
    size_t bytes;
    int i, nh;
    if (!pts || !box || n < 1 || !work || !cap)
        return ocr_error(ctx, OCR_EINVAL, "%s: need at least one point (got %d), a box and work memory", fn, n);
    for (i = 0; i < n; i++)
        if (!isfinite(pts[i].x) || !isfinite(pts[i].y))
            return ocr_error(ctx, OCR_ENONFINITE, "%s: point %d is (%g, %g)", fn, i, pts[i].x, pts[i].y);
    /* candidates (n), hull (n + 1), three floats per hull vertex, two ints per column (2 (n + 64)) */
    if (!ocr_size_mul((size_t)n + 64, 2 * sizeof(ocr__hpt) + 3 * sizeof(float) + 2 * sizeof(int), &bytes))
        return ocr_error(ctx, OCR_EOVERFLOW, "%s: %d points is too many", fn, n);
    if (*cap < bytes) {
        void *grown = OCR_REALLOC(*work, bytes);
        if (!grown) return ocr_error(ctx, OCR_ENOMEM, "%s: cannot allocate %zu bytes", fn, bytes);
        *work = grown;
        *cap = bytes;
    }
    cand = (ocr__hpt *)*work;
    hull = cand + n;
    nh = ocr__convex_hull(cand, ocr__hull_candidates(pts, n, cand, (int *)(void *)(hull + n + 1)), hull);
    if (nh >= 3) {
        float *vx = (float *)(void *)(hull + n + 1);
        ocr__calipers_rect(hull, nh, vx, vx + nh, vx + 2 * nh, &r);
    } else { /* a point or a segment: a flat rectangle along it */
        const ocr__hpt *p = &hull[0], *q = &hull[nh - 1];
        float fx = q->x - p->x, fy = q->y - p->y;
        r.cx = (p->x + q->x) * 0.5f;
        r.cy = (p->y + q->y) * 0.5f;
        r.w = (float)sqrt((double)fx * fx + (double)fy * fy);
        r.h = 0.0f;
        r.angle = nh == 2 ? ocr__rrect_degrees((float)atan2((double)fy, (double)fx)) : 0.0f;
    }
    ocr__rrect_corners(&r, corners);
    ocr__order_box(corners, box);
    if (short_side) *short_side = r.w < r.h ? r.w : r.h;
    return OCR_OK;
}

OCRDEF int ocr_min_area_box(ocr_ctx *ctx, const ocr_point *pts, int n, ocr_point box[4], float *short_side) {
    void *work = NULL;
    size_t cap = 0;
    int rc = ocr_min_area_box_work(ctx, pts, n, box, short_side, &work, &cap);
    OCR_FREE(work);
    return rc;
}

#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC pop_options
#elif defined(__clang__)
#pragma STDC FP_CONTRACT DEFAULT
#endif

/* ---------------------------------------------------------------- Douglas-Peucker (closed) */

OCRDEF double ocr_contour_arc_length(const ocr_point *pts, int n) {
    double total = 0.0;
    int i;
    for (i = 0; i < n; i++) {
        const ocr_point *a = &pts[i ? i - 1 : n - 1], *b = &pts[i];
        float dx = b->x - a->x, dy = b->y - a->y;
        total += sqrtf(dx * dx + dy * dy);
    }
    return total;
}

OCRDEF int ocr_approx_poly(ocr_ctx *ctx, const ocr_point *pts, int n, double epsilon, ocr_point *out, int *n_out) {
    const char *fn = "ocr_approx_poly";
    int *stack, top = 0, i, iter, start = 0, offset = 0, count = 0, kept, rd, wr;
    double eps2 = epsilon * epsilon, far_d = 0.0;
    ocr_point a, mid, b;
    if (!pts || !out || !n_out || n < 1) return ocr_error(ctx, OCR_EINVAL, "%s: need at least one point (got %d) and outputs", fn, n);
    if (!(epsilon >= 0) || !isfinite(epsilon)) return ocr_error(ctx, OCR_ERANGE, "%s: epsilon %g must be finite and >= 0", fn, epsilon);
    stack = (int *)OCR_MALLOC(sizeof(int) * 2 * ((size_t)n + 1));
    if (!stack) return ocr_error(ctx, OCR_ENOMEM, "%s: cannot allocate a stack for %d points", fn, n);
    /* Split points: three rounds of "the farthest point from the current start", beginning at point 0. */
    for (iter = 0; iter < 3; iter++) {
        start = (start + offset) % n;
        offset = 0;
        far_d = 0.0;
        for (i = 1; i < n; i++) {
            const ocr_point *p = &pts[(start + i) % n];
            double dx = p->x - pts[start].x, dy = p->y - pts[start].y, d = dx * dx + dy * dy;
            if (d > far_d) { far_d = d; offset = i; }
        }
    }
    if (far_d <= eps2) {
        out[count++] = pts[start];
    } else {
        int far = (start + offset) % n;
        stack[top++] = far; stack[top++] = start;   /* second half, processed after the first */
        stack[top++] = start; stack[top++] = far;
    }
    while (top > 0) {
        int s_end = stack[--top], s_begin = stack[--top], pos = (s_begin + 1) % n, split = -1;
        int keep = 1;
        if (pos != s_end) {
            double dx = (double)pts[s_end].x - pts[s_begin].x, dy = (double)pts[s_end].y - pts[s_begin].y, best = 0.0;
            for (; pos != s_end; pos = (pos + 1) % n) {
                double d = fabs(((double)pts[pos].y - pts[s_begin].y) * dx - ((double)pts[pos].x - pts[s_begin].x) * dy);
                if (d > best) { best = d; split = pos; }
            }
            keep = best * best <= eps2 * (dx * dx + dy * dy);
        }
        if (keep) {
            out[count++] = pts[s_begin];
        } else {
            stack[top++] = split; stack[top++] = s_end;
            stack[top++] = s_begin; stack[top++] = split;
        }
    }
    OCR_FREE(stack);
    /* Clean-up pass of OpenCV, in place and cyclic: a vertex nearly on the chord of its neighbours (within
       epsilon/sqrt(2), chord neither horizontal nor vertical, vertex between them) is dropped. */
    kept = count;
    rd = count - 1;
    a = out[rd];
    rd = 0;
    wr = 0;
    mid = out[rd];
    rd = (rd + 1) % count;
    for (i = 0; i < count && kept > 2; i++) {
        double dx, dy, dist, along;
        b = out[rd];
        rd = (rd + 1) % count;
        dx = (double)b.x - a.x;
        dy = (double)b.y - a.y;
        dist = fabs(((double)mid.x - a.x) * dy - ((double)mid.y - a.y) * dx);
        along = ((double)mid.x - a.x) * ((double)b.x - mid.x) + ((double)mid.y - a.y) * ((double)b.y - mid.y);
        if (dist * dist <= 0.5 * eps2 * (dx * dx + dy * dy) && dx != 0 && dy != 0 && along >= 0) {
            kept--;
            out[wr] = a = b;
            wr = (wr + 1) % count;
            mid = out[rd];
            rd = (rd + 1) % count;
            i++;
            continue;
        }
        out[wr] = a = mid;
        wr = (wr + 1) % count;
        mid = b;
    }
    *n_out = kept;
    return OCR_OK;
}

/* ================================================================ [validity, intersection] implementation */

/* Copies a polygon without consecutive repeats (cyclically) into out, as doubles; returns the count. */
static int ocr__ring_dedup(const ocr_point *pts, int n, ocr__dpt *out) {
    int i, m = 0;
    for (i = 0; i < n; i++) {
        if (m && out[m - 1].x == pts[i].x && out[m - 1].y == pts[i].y) continue;
        out[m].x = pts[i].x;
        out[m].y = pts[i].y;
        m++;
    }
    while (m > 1 && out[m - 1].x == out[0].x && out[m - 1].y == out[0].y) m--;
    return m;
}

static int ocr__sign(double v) { return (v > 0) - (v < 0); }

/* Whether closed segments ab and cd share a point. */
static int ocr__segments_touch(ocr__dpt a, ocr__dpt b, ocr__dpt c, ocr__dpt d) {
    int s1 = ocr__sign(ocr__cross3(a, b, c)), s2 = ocr__sign(ocr__cross3(a, b, d));
    int s3 = ocr__sign(ocr__cross3(c, d, a)), s4 = ocr__sign(ocr__cross3(c, d, b));
    if (s1 * s2 < 0 && s3 * s4 < 0) return 1;
#define OCR__ON(p, q, r) ((r).x >= ((p).x < (q).x ? (p).x : (q).x) && (r).x <= ((p).x > (q).x ? (p).x : (q).x) && \
                          (r).y >= ((p).y < (q).y ? (p).y : (q).y) && (r).y <= ((p).y > (q).y ? (p).y : (q).y))
    if ((s1 == 0 && OCR__ON(a, b, c)) || (s2 == 0 && OCR__ON(a, b, d)) || (s3 == 0 && OCR__ON(c, d, a)) || (s4 == 0 && OCR__ON(c, d, b)))
        return 1;
#undef OCR__ON
    return 0;
}

static double ocr__edge_minx(const ocr__dpt *r, int m, int i) { double a = r[i].x, b = r[(i + 1) % m].x; return a < b ? a : b; }

/* Edges sorted by smallest x and swept: only pairs whose x ranges overlap are tested (about linear for text
   polygons; every pair was tested before, 25,000 points took seconds). */
static int ocr__ring_is_simple(const ocr__dpt *r, int m) {
    int i, k, n_active = 0, ok = 1, *order, *active;
    if (m < 3) return 0;
    for (i = 0; i < m; i++) {
        ocr__dpt a = r[i], b = r[(i + 1) % m], c = r[(i + 2) % m];
        /* a spike: the next edge folds back along this one */
        if (ocr__cross3(a, b, c) == 0 && (b.x - a.x) * (c.x - b.x) + (b.y - a.y) * (c.y - b.y) < 0) return 0;
    }
    order = (int *)OCR_MALLOC(sizeof(int) * 2 * (size_t)m);
    if (!order) return 0;
    active = order + m;
    for (i = 0; i < m; i++) order[i] = i;
    {
        /* bottom-up merge sort on the edges' smallest x (qsort has no context argument, and global state is not
           allowed); active is the scratch buffer until the sweep */
        int width, *src = order, *dst = active;
        for (width = 1; width < m; width *= 2) {
            int lo;
            for (lo = 0; lo < m; lo += 2 * width) {
                int mid = lo + width < m ? lo + width : m, hi = lo + 2 * width < m ? lo + 2 * width : m, p = lo, q = mid, o = lo;
                while (p < mid && q < hi) dst[o++] = ocr__edge_minx(r, m, src[q]) < ocr__edge_minx(r, m, src[p]) ? src[q++] : src[p++];
                while (p < mid) dst[o++] = src[p++];
                while (q < hi) dst[o++] = src[q++];
            }
            { int *t = src; src = dst; dst = t; }
        }
        if (src != order) memcpy(order, src, sizeof(int) * (size_t)m);
    }
    for (k = 0; k < m && ok; k++) {
        int e = order[k], w = 0, t;
        ocr__dpt a = r[e], b = r[(e + 1) % m];
        double lo = a.x < b.x ? a.x : b.x, ylo = a.y < b.y ? a.y : b.y, yhi = a.y > b.y ? a.y : b.y;
        for (t = 0; t < n_active; t++) {
            int f = active[t];
            ocr__dpt c = r[f], d = r[(f + 1) % m];
            if ((c.x > d.x ? c.x : d.x) < lo) continue; /* ends before this edge starts: never needed again */
            active[w++] = f;
            if (f == (e + 1) % m || e == (f + 1) % m) continue; /* adjacent */
            if ((c.y > d.y ? c.y : d.y) < ylo || (c.y < d.y ? c.y : d.y) > yhi) continue;
            if (ocr__segments_touch(a, b, c, d)) { ok = 0; break; }
        }
        if (!ok) break;
        n_active = w;
        active[n_active++] = e;
    }
    OCR_FREE(order);
    return ok;
}

OCRDEF int ocr_poly_is_simple(const ocr_point *pts, int n) {
    ocr__dpt *r;
    int i, ok;
    if (!pts || n < 3) return 0;
    for (i = 0; i < n; i++)
        if (!isfinite(pts[i].x) || !isfinite(pts[i].y)) return 0;
    r = (ocr__dpt *)OCR_MALLOC(sizeof(ocr__dpt) * (size_t)n);
    if (!r) return 0;
    ok = ocr__ring_is_simple(r, ocr__ring_dedup(pts, n, r));
    OCR_FREE(r);
    return ok;
}

static double ocr__ring_area(const ocr__dpt *r, int m) {
    double s = 0.0;
    int i;
    for (i = 0; i < m; i++) s += (r[i].x - r[0].x) * (r[(i + 1) % m].y - r[0].y) - (r[(i + 1) % m].x - r[0].x) * (r[i].y - r[0].y);
    return 0.5 * s;
}

/* Point strictly inside a ring (crossing count); callers never ask about points on its boundary. */
static int ocr__ring_contains(const ocr__dpt *r, int m, ocr__dpt p) {
    int i, inside = 0;
    for (i = 0; i < m; i++) {
        ocr__dpt a = r[i], b = r[(i + 1) % m];
        if ((a.y > p.y) != (b.y > p.y) && p.x < a.x + (p.y - a.y) * (b.x - a.x) / (b.y - a.y)) inside = !inside;
    }
    return inside;
}

typedef struct { double t, x, y; } ocr__cut;

/* A ring's edges bucketed by y (one bucket per edge over the ring's y range), so that a point-in-ring query or the
   edges an edge may meet look at a few edges instead of all: the intersection of two 25,000-point polygons took
   seconds. Built only while the buckets hold at most 32 entries per edge (long edges spanning many buckets);
   otherwise every edge is scanned as before. */
typedef struct { double y0, y1, inv_h; int nb; int *start, *edges, *stamp, *cand; } ocr__ybuckets;

static int ocr__yb_at(const ocr__ybuckets *ix, double y) {
    double f = (y - ix->y0) * ix->inv_h;
    return !(f > 0) ? 0 : f >= ix->nb - 1 ? ix->nb - 1 : (int)f;
}

static int ocr__int_less(const void *a, const void *b) { int s = *(const int *)a, t = *(const int *)b; return s < t ? -1 : s > t; }

static void ocr__yb_free(ocr__ybuckets *ix) { OCR_FREE(ix->start); OCR_FREE(ix->edges); memset(ix, 0, sizeof *ix); }

static int ocr__yb_build(ocr__ybuckets *ix, const ocr__dpt *Q, int nq) {
    size_t total = 0;
    int j, b;
    memset(ix, 0, sizeof *ix);
    ix->y0 = ix->y1 = Q[0].y;
    for (j = 1; j < nq; j++) { ix->y0 = fmin(ix->y0, Q[j].y); ix->y1 = fmax(ix->y1, Q[j].y); }
    ix->nb = nq;
    ix->inv_h = ix->y1 > ix->y0 ? nq / (ix->y1 - ix->y0) : 0.0;
    for (j = 0; j < nq; j++) {
        ocr__dpt c = Q[j], d = Q[(j + 1) % nq];
        total += (size_t)(ocr__yb_at(ix, fmax(c.y, d.y)) - ocr__yb_at(ix, fmin(c.y, d.y)) + 1);
        if (total > 32 * (size_t)nq + 64) return 0;
    }
    ix->start = (int *)OCR_MALLOC(sizeof(int) * ((size_t)nq + 1 + 2 * (size_t)nq));
    ix->edges = (int *)OCR_MALLOC(sizeof(int) * (total ? total : 1));
    if (!ix->start || !ix->edges) { ocr__yb_free(ix); return 0; }
    ix->stamp = ix->start + nq + 1;
    ix->cand = ix->stamp + nq;
    for (b = 0; b <= nq; b++) ix->start[b] = 0;
    for (j = 0; j < nq; j++) {
        ocr__dpt c = Q[j], d = Q[(j + 1) % nq];
        for (b = ocr__yb_at(ix, fmin(c.y, d.y)); b <= ocr__yb_at(ix, fmax(c.y, d.y)); b++) ix->start[b + 1]++;
        ix->stamp[j] = -1;
    }
    for (b = 0; b < nq; b++) ix->start[b + 1] += ix->start[b];
    for (j = 0; j < nq; j++) { /* cand holds each bucket's fill position while building */
        ocr__dpt c = Q[j], d = Q[(j + 1) % nq];
        for (b = ocr__yb_at(ix, fmin(c.y, d.y)); b <= ocr__yb_at(ix, fmax(c.y, d.y)); b++) ix->cand[b] = 0;
    }
    for (j = 0; j < nq; j++) {
        ocr__dpt c = Q[j], d = Q[(j + 1) % nq];
        for (b = ocr__yb_at(ix, fmin(c.y, d.y)); b <= ocr__yb_at(ix, fmax(c.y, d.y)); b++) ix->edges[ix->start[b] + ix->cand[b]++] = j;
    }
    return 1;
}

static int ocr__cut_less(const void *a, const void *b) {
    double s = ((const ocr__cut *)a)->t, t = ((const ocr__cut *)b)->t;
    return s < t ? -1 : s > t;
}

/* The same count over the edges of p's bucket: every edge that straddles p.y is there (the bucket index is monotone in
   y), and an edge can only change the parity when it straddles. */
static int ocr__ring_contains_ix(const ocr__dpt *r, int m, const ocr__ybuckets *ix, ocr__dpt p) {
    int k, b, inside = 0;
    if (!ix) return ocr__ring_contains(r, m, p);
    if (!(p.y >= ix->y0 && p.y <= ix->y1)) return 0;
    b = ocr__yb_at(ix, p.y);
    for (k = ix->start[b]; k < ix->start[b + 1]; k++) {
        ocr__dpt a = r[ix->edges[k]], c = r[(ix->edges[k] + 1) % m];
        if ((a.y > p.y) != (c.y > p.y) && p.x < a.x + (p.y - a.y) * (c.x - a.x) / (c.y - a.y)) inside = !inside;
    }
    return inside;
}

/* Green's theorem: the area of P ∩ Q (both counter-clockwise) is the integral of x dy - y dx over the parts of
   P's boundary inside Q plus the parts of Q's boundary inside P, halved. This adds P's part: each edge is cut
   where it meets Q's boundary and each piece is kept when its midpoint is inside Q. A piece lying on an edge
   of Q belongs to the intersection's boundary once when both run the same way, never when they run against
   each other; with_shared says whether this pass is the one that counts it. */
static double ocr__boundary_inside(const ocr__dpt *P, int np, const ocr__dpt *Q, int nq, int with_shared, double tol, ocr__cut *cuts,
                                   double *shared) {
    double sum = 0.0, pad = 1e-9 + 4 * tol;
    int i, j, k, jj, nj;
    ocr__ybuckets yb, *ix = nq >= 16 && ocr__yb_build(&yb, Q, nq) ? &yb : NULL;
    for (i = 0; i < np; i++) {
        ocr__dpt a = P[i], b = P[(i + 1) % np];
        double ex = b.x - a.x, ey = b.y - a.y, len2 = ex * ex + ey * ey, len = sqrt(len2);
        int nc = 0, ns = 0;
        cuts[nc].t = 0; cuts[nc].x = a.x; cuts[nc].y = a.y; nc++;
        cuts[nc].t = 1; cuts[nc].x = b.x; cuts[nc].y = b.y; nc++;
        nj = nq;
        if (ix) { /* the edges of Q whose y range meets this edge's, in Q's order (the cuts come out as before) */
            int b0 = ocr__yb_at(ix, fmin(a.y, b.y) - pad), b1 = ocr__yb_at(ix, fmax(a.y, b.y) + pad), bb;
            nj = 0;
            for (bb = b0; bb <= b1; bb++)
                for (k = ix->start[bb]; k < ix->start[bb + 1]; k++)
                    if (ix->stamp[ix->edges[k]] != i) { ix->stamp[ix->edges[k]] = i; ix->cand[nj++] = ix->edges[k]; }
            qsort(ix->cand, (size_t)nj, sizeof(int), ocr__int_less);
        }
        for (jj = 0; jj < nj; jj++) {
            ocr__dpt c, d;
            j = ix ? ix->cand[jj] : jj;
            c = Q[j];
            d = Q[(j + 1) % nq];
            double fx = d.x - c.x, fy = d.y - c.y, flen = sqrt(fx * fx + fy * fy);
            double dc = ocr__cross3(a, b, c), dd = ocr__cross3(a, b, d), da = ocr__cross3(c, d, a), db = ocr__cross3(c, d, b);
            if (fabs(dc) <= tol * len && fabs(dd) <= tol * len && fabs(da) <= tol * flen && fabs(db) <= tol * flen) {
                /* collinear: Q's endpoints cut the edge, and the overlap is remembered */
                double tc = ((c.x - a.x) * ex + (c.y - a.y) * ey) / len2, td = ((d.x - a.x) * ex + (d.y - a.y) * ey) / len2;
                if (tc > 0 && tc < 1) { cuts[nc].t = tc; cuts[nc].x = c.x; cuts[nc].y = c.y; nc++; }
                if (td > 0 && td < 1) { cuts[nc].t = td; cuts[nc].x = d.x; cuts[nc].y = d.y; nc++; }
                shared[3 * ns] = tc < td ? tc : td;
                shared[3 * ns + 1] = tc < td ? td : tc;
                shared[3 * ns + 2] = ex * fx + ey * fy > 0;
                ns++;
                continue;
            }
            if (ocr__sign(dc) * ocr__sign(dd) > 0 || ocr__sign(da) * ocr__sign(db) > 0 || da == db) continue;
            {
                double t = da / (da - db);
                ocr__cut *cut = &cuts[nc];
                if (!(t > 0 && t < 1)) continue;
                cut->t = t;
                if (dc == 0) { cut->x = c.x; cut->y = c.y; }
                else if (dd == 0) { cut->x = d.x; cut->y = d.y; }
                else { cut->x = (da * b.x - db * a.x) / (da - db); cut->y = (da * b.y - db * a.y) / (da - db); }
                nc++;
            }
        }
        qsort(cuts, (size_t)nc, sizeof *cuts, ocr__cut_less);
        for (k = 0; k + 1 < nc; k++) {
            double tm = 0.5 * (cuts[k].t + cuts[k + 1].t);
            int s, on = -1;
            ocr__dpt m;
            if (!(cuts[k + 1].t > cuts[k].t)) continue;
            for (s = 0; s < ns; s++)
                if (tm > shared[3 * s] && tm < shared[3 * s + 1]) { on = shared[3 * s + 2] != 0; break; }
            m.x = a.x + tm * ex;
            m.y = a.y + tm * ey;
            if (on < 0 ? ocr__ring_contains_ix(Q, nq, ix, m) : (with_shared && on))
                sum += cuts[k].x * cuts[k + 1].y - cuts[k + 1].x * cuts[k].y;
        }
    }
    if (ix) ocr__yb_free(ix);
    return 0.5 * sum;
}

/* Rings without repeats, counter-clockwise, translated so that coordinates stay small. */
static int ocr__intersection_area(ocr_ctx *ctx, const char *fn, const ocr_point *a, int na, const ocr_point *b, int nb, double *area) {
    ocr__dpt *ra, *rb;
    ocr__cut *cuts;
    double *shared, ox, oy, scale = 0.0, tol;
    size_t bytes;
    int ma, mb, i, n_max = na > nb ? na : nb;
    *area = 0.0;
    if (!ocr_size_mul((size_t)n_max * 3 + 4, sizeof(ocr__cut) + 2 * sizeof(ocr__dpt), &bytes))
        return ocr_error(ctx, OCR_EOVERFLOW, "%s: polygons of %d and %d points are too large", fn, na, nb);
    ra = (ocr__dpt *)ocr_ctx_scratch(ctx, OCR_SCRATCH_OP2, bytes);
    if (!ra) return OCR_ENOMEM;
    rb = ra + n_max;
    cuts = (ocr__cut *)(rb + n_max);
    shared = (double *)(cuts + 2 * n_max + 2);
    ma = ocr__ring_dedup(a, na, ra);
    mb = ocr__ring_dedup(b, nb, rb);
    if (ma < 3 || mb < 3) return OCR_OK;
    ox = ra[0].x;
    oy = ra[0].y;
    for (i = 0; i < ma; i++) { ra[i].x -= ox; ra[i].y -= oy; scale = fmax(scale, fmax(fabs(ra[i].x), fabs(ra[i].y))); }
    for (i = 0; i < mb; i++) { rb[i].x -= ox; rb[i].y -= oy; scale = fmax(scale, fmax(fabs(rb[i].x), fabs(rb[i].y))); }
#define OCR__MAKE_CCW(r, m) do { if (ocr__ring_area(r, m) < 0) { int lo_, hi_; for (lo_ = 0, hi_ = (m) - 1; lo_ < hi_; lo_++, hi_--) { \
        ocr__dpt t_ = (r)[lo_]; (r)[lo_] = (r)[hi_]; (r)[hi_] = t_; } } } while (0)
    OCR__MAKE_CCW(ra, ma);
    OCR__MAKE_CCW(rb, mb);
#undef OCR__MAKE_CCW
    /* distances below this count as collinear: a few ulps of the coordinates' magnitude */
    tol = 1e-12 * (scale > 1 ? scale : 1);
    *area = ocr__boundary_inside(ra, ma, rb, mb, 1, tol, cuts, shared) + ocr__boundary_inside(rb, mb, ra, ma, 0, tol, cuts, shared);
    if (*area < 0) *area = 0;
    return OCR_OK;
}

OCRDEF int ocr_poly_intersection_area(ocr_ctx *ctx, const ocr_point *a, int na, const ocr_point *b, int nb, double *area) {
    const char *fn = "ocr_poly_intersection_area";
    int rc;
    if (!area) return ocr_error(ctx, OCR_EINVAL, "%s: area must not be NULL", fn);
    if ((rc = ocr_poly_check(ctx, fn, "a", a, na)) || (rc = ocr_poly_check(ctx, fn, "b", b, nb))) return rc;
    return ocr__intersection_area(ctx, fn, a, na, b, nb, area);
}

/* ================================================================ [perspective] implementation */

/* Whether some three of the four points lie on one line, to within rounding of their coordinates. */
static int ocr__quad_has_collinear(const ocr_point q[4], int *which) {
    int i;
    for (i = 0; i < 4; i++) {
        /* the triple that leaves point i out */
        const ocr_point *a = &q[i == 0 ? 1 : 0], *b = &q[i <= 1 ? 2 : 1], *c = &q[i <= 2 ? 3 : 2];
        double ux = (double)b->x - a->x, uy = (double)b->y - a->y, vx = (double)c->x - a->x, vy = (double)c->y - a->y;
        double cross = ux * vy - uy * vx, scale = (ux * ux + uy * uy) + (vx * vx + vy * vy);
        if (fabs(cross) <= 1e-9 * scale) { *which = i; return 1; }
    }
    return 0;
}

OCRDEF int ocr_perspective_transform(ocr_ctx *ctx, const ocr_point src[4], const ocr_point dst[4], double H[9]) {
    const char *fn = "ocr_perspective_transform";
    double a[8][9], scale = 0.0; /* the augmented system [A | b] */
    int i, j, k, left, rc;
    if (!src || !dst || !H) return ocr_error(ctx, OCR_EINVAL, "%s: src, dst and H must not be NULL", fn);
    if ((rc = ocr_poly_check(ctx, fn, "src", src, 4)) || (rc = ocr_poly_check(ctx, fn, "dst", dst, 4))) return rc;
    if (ocr__quad_has_collinear(src, &left))
        return ocr_error(ctx, OCR_EINVAL, "%s: src points other than point %d are collinear: no homography", fn, left);
    if (ocr__quad_has_collinear(dst, &left))
        return ocr_error(ctx, OCR_EINVAL, "%s: dst points other than point %d are collinear: no homography", fn, left);
    /* rows i: the u equation of point i; rows i + 4: its v equation; unknowns h0..h7 */
    for (i = 0; i < 4; i++) {
        double x = src[i].x, y = src[i].y, u = dst[i].x, v = dst[i].y;
        double ru[9] = {x, y, 1, 0, 0, 0, -x * u, -y * u, u}, rv[9] = {0, 0, 0, x, y, 1, -x * v, -y * v, v};
        memcpy(a[i], ru, sizeof ru);
        memcpy(a[i + 4], rv, sizeof rv);
    }
    for (i = 0; i < 8; i++)
        for (j = 0; j < 8; j++) scale = fmax(scale, fabs(a[i][j]));
    for (k = 0; k < 8; k++) {
        int p = k;
        for (i = k + 1; i < 8; i++)
            if (fabs(a[i][k]) > fabs(a[p][k])) p = i;
        /* cannot happen once no three points are collinear, short of rounding on nearly collinear ones */
        if (!(fabs(a[p][k]) > 1e-13 * scale)) return ocr_error(ctx, OCR_EINVAL, "%s: the system is singular (column %d)", fn, k);
        if (p != k)
            for (j = 0; j < 9; j++) { double t = a[k][j]; a[k][j] = a[p][j]; a[p][j] = t; }
        for (i = k + 1; i < 8; i++) {
            double f = a[i][k] / a[k][k];
            for (j = k; j < 9; j++) a[i][j] -= f * a[k][j];
        }
    }
    {
        double h[9];
        for (k = 7; k >= 0; k--) {
            double s = a[k][8];
            for (j = k + 1; j < 8; j++) s -= a[k][j] * h[j];
            h[k] = s / a[k][k];
        }
        h[8] = 1.0;
        for (k = 0; k < 9; k++)
            if (!isfinite(h[k])) return ocr_error(ctx, OCR_EINVAL, "%s: the solution is not finite (h%d = %g)", fn, k, h[k]);
        memcpy(H, h, sizeof h);
    }
    return OCR_OK;
}

OCRDEF void ocr_perspective_apply(const double H[9], double x, double y, double *ox, double *oy) {
    double w = H[6] * x + H[7] * y + H[8];
    if (fabs(w) > 2.220446049250313e-16) {
        *ox = (H[0] * x + H[1] * y + H[2]) / w;
        *oy = (H[3] * x + H[4] * y + H[5]) / w;
    } else {
        *ox = *oy = 0.0;
    }
}

OCRDEF int ocr_quad_rectified_size(ocr_ctx *ctx, const ocr_point quad[4], int *width, int *height) {
    const char *fn = "ocr_quad_rectified_size";
    double top, bottom, left, right, w, h;
    int rc;
    if (!quad || !width || !height) return ocr_error(ctx, OCR_EINVAL, "%s: quad, width and height must not be NULL", fn);
    if ((rc = ocr_poly_check(ctx, fn, "quad", quad, 4))) return rc;
    top = hypot((double)quad[1].x - quad[0].x, (double)quad[1].y - quad[0].y);
    bottom = hypot((double)quad[2].x - quad[3].x, (double)quad[2].y - quad[3].y);
    left = hypot((double)quad[3].x - quad[0].x, (double)quad[3].y - quad[0].y);
    right = hypot((double)quad[2].x - quad[1].x, (double)quad[2].y - quad[1].y);
    w = floor((top > bottom ? top : bottom) + 0.5);
    h = floor((left > right ? left : right) + 0.5);
    *width = w < 1 ? 1 : (int)w;
    *height = h < 1 ? 1 : (int)h;
    return OCR_OK;
}

#ifdef __cplusplus
}
#endif
#endif /* OCR_GEOM_IMPLEMENTATION */

/*
MIT License. Copyright (c) 2026 the ocr-c authors.
Permission is hereby granted, free of charge, to any person obtaining a copy of this software and associated
documentation files (the "Software"), to deal in the Software without restriction, including without limitation the
rights to use, copy, modify, merge, publish, distribute, sublicense, and/or sell copies of the Software, and to permit
persons to whom the Software is furnished to do so, subject to the following conditions: The above copyright notice and
this permission notice shall be included in all copies or substantial portions of the Software.
THE SOFTWARE IS PROVIDED "AS IS", WITHOUT WARRANTY OF ANY KIND, EXPRESS OR IMPLIED.
*/
