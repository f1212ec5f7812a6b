/* fuzz/fuzz_icdar_gt.c - the ground-truth parser (ocr_gt_parse in ocr_data.h) in both grammars.

   The first byte picks the grammar (even: OCR_GT_ICDAR2015, odd: OCR_GT_POLYGON); the rest is the file. Every
   polygon of an accepted file is checked: 4 points in ICDAR 2015, at least 3 in the polygon grammar, coordinates
   finite within OCR_COORD_MAX, and "###" transcriptions (and only those) marked ignore. */
#include "ocr_fuzz.h"

static int ocr_fuzz_icdar_gt(const uint8_t *data, size_t size) {
    ocr_ctx ctx;
    ocr_polygon *polys = (ocr_polygon *)&ctx; /* must be reset by the parser */
    int n = -1, i, k, format, rc, res = OCR_FUZZ_ACCEPTED;
    char *text;
    if (size < 1) return OCR_FUZZ_REJECTED;
    format = (data[0] & 1) ? OCR_GT_POLYGON : OCR_GT_ICDAR2015;
    text = ocr_fuzz_copy(data + 1, size - 1);
    if (!text) return OCR_FUZZ_REJECTED;
    ocr_ctx_init(&ctx, 1, 0);
    rc = ocr_gt_parse(&ctx, "fuzz.txt", text, size - 1, format, &polys, &n);
    if (rc) {
        if (polys || n) res = ocr_fuzz_fail("icdar_gt", "a refused file returned %d polygons", n);
        else if (!strstr(ocr_ctx_last_error(&ctx), "fuzz.txt")) res = ocr_fuzz_fail("icdar_gt", "the message does not name the file: %s", ocr_ctx_last_error(&ctx));
        else res = OCR_FUZZ_REJECTED;
        free(text);
        ocr_ctx_free(&ctx);
        return res;
    }
    if (n < 0 || (n > 0 && !polys)) res = ocr_fuzz_fail("icdar_gt", "%d polygons at %p", n, (void *)polys);
    for (i = 0; i < n && res == OCR_FUZZ_ACCEPTED; i++) {
        const ocr_polygon *p = &polys[i];
        int hashes = p->text && strcmp(p->text, "###") == 0;
        if (format == OCR_GT_ICDAR2015 ? p->n_points != 4 : p->n_points < 3)
            res = ocr_fuzz_fail("icdar_gt", "polygon %d has %d points", i, p->n_points);
        for (k = 0; k < p->n_points && res == OCR_FUZZ_ACCEPTED; k++)
            if (!isfinite(p->points[k].x) || !isfinite(p->points[k].y) || fabs(p->points[k].x) > OCR_COORD_MAX || fabs(p->points[k].y) > OCR_COORD_MAX)
                res = ocr_fuzz_fail("icdar_gt", "polygon %d point %d is (%g, %g)", i, k, p->points[k].x, p->points[k].y);
        if (res == OCR_FUZZ_ACCEPTED && !p->ignore != !hashes)
            res = ocr_fuzz_fail("icdar_gt", "polygon %d: ignore %d with text '%s'", i, p->ignore, p->text ? p->text : "(null)");
    }
    ocr_polygons_free(polys, n);
    free(text);
    ocr_ctx_free(&ctx);
    return res;
}

OCR_FUZZ_ENTRY(icdar_gt)
