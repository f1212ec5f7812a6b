/* fuzz/fuzz_results.c - the detection result parser (ocr_result_parse in ocr_data.h: what detect writes and
   eval_dbnet reads), on any bytes.

   The input is the file. Every polygon of an accepted file has at least 3 points, finite within OCR_COORD_MAX, and
   no text; a refused file returns nothing and the message names the file. A line is never read past its newline:
   the input is an exact-size heap copy, so strtod-style reads past the end are sanitizer reports. */
#include "ocr_fuzz.h"

static int ocr_fuzz_results(const uint8_t *data, size_t size) {
    ocr_ctx ctx;
    ocr_polygon *polys = (ocr_polygon *)&ctx; /* must be reset by the parser */
    int n = -1, i, k, res = OCR_FUZZ_ACCEPTED;
    char *text = ocr_fuzz_copy(data, size);
    if (!text) return OCR_FUZZ_REJECTED;
    ocr_ctx_init(&ctx, 1, 0);
    if (ocr_result_parse(&ctx, "res_1.txt", text, size, &polys, &n)) {
        if (polys || n) res = ocr_fuzz_fail("results", "a refused file returned %d polygons", n);
        else if (!strstr(ocr_ctx_last_error(&ctx), "res_1.txt")) res = ocr_fuzz_fail("results", "the message does not name the file: %s", ocr_ctx_last_error(&ctx));
        else res = OCR_FUZZ_REJECTED;
        free(text);
        ocr_ctx_free(&ctx);
        return res;
    }
    for (i = 0; i < n && res == OCR_FUZZ_ACCEPTED; i++) {
        const ocr_polygon *p = &polys[i];
        if (p->n_points < 3 || p->text) res = ocr_fuzz_fail("results", "polygon %d: %d points, text %p", i, p->n_points, (void *)p->text);
        for (k = 0; k < p->n_points && res == OCR_FUZZ_ACCEPTED; k++)
            if (!isfinite(p->points[k].x) || !isfinite(p->points[k].y) || fabs(p->points[k].x) > OCR_COORD_MAX || fabs(p->points[k].y) > OCR_COORD_MAX)
                res = ocr_fuzz_fail("results", "polygon %d point %d is (%g, %g)", i, k, p->points[k].x, p->points[k].y);
    }
    /* one polygon per non-blank line */
    if (res == OCR_FUZZ_ACCEPTED) {
        int lines = 0;
        size_t pos = 0;
        while (pos < size) {
            size_t end = pos, j;
            int blank = 1;
            while (end < size && text[end] != '\n') end++;
            for (j = pos; j < end; j++)
                if (text[j] != ' ' && text[j] != '\t' && text[j] != '\r' && !(pos == 0 && j < 3 && size >= 3 && memcmp(text, "\xEF\xBB\xBF", 3) == 0)) blank = 0;
            lines += !blank;
            pos = end + 1;
        }
        if (lines != n) res = ocr_fuzz_fail("results", "%d non-blank lines gave %d polygons", lines, n);
    }
    ocr_polygons_free(polys, n);
    free(text);
    ocr_ctx_free(&ctx);
    return res;
}

OCR_FUZZ_ENTRY(results)
