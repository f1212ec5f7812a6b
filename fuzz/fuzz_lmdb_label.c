/* fuzz/fuzz_lmdb_label.c - what the LMDB reader does with a label record: ocr_label_parse_json (ocr_data.h).

   The input is the record. The reader hands a record whose first non-blank byte is '[' to ocr_label_parse_json
   and takes anything else as recognition text; this target calls the parser on every input (so objects, scalars
   and garbage reach it too). Every polygon of an accepted label is checked: at least 3 points, coordinates finite
   within OCR_COORD_MAX. The record's other checks (UTF-8, the label's kind, the image beside it) are inline in the
   reader's get (ocr__lmdb_get) and need an LMDB environment; once they live in a function of their own that takes
   the two records' bytes, this target should call it. */
#include "ocr_fuzz.h"

static int ocr_fuzz_lmdb_label(const uint8_t *data, size_t size) {
    ocr_ctx ctx;
    ocr_polygon *polys = (ocr_polygon *)&ctx; /* must be reset by the parser */
    int n = -1, i, k, rc, res = OCR_FUZZ_ACCEPTED;
    char *text = ocr_fuzz_copy(data, size);
    if (!text) return OCR_FUZZ_REJECTED;
    ocr_ctx_init(&ctx, 1, 0);
    rc = ocr_label_parse_json(&ctx, "label-000000001", text, size, &polys, &n);
    if (rc) {
        if (polys || n) res = ocr_fuzz_fail("lmdb_label", "a refused label returned %d polygons", n);
        else if (!strstr(ocr_ctx_last_error(&ctx), "label-000000001")) res = ocr_fuzz_fail("lmdb_label", "the message does not name the key: %s", ocr_ctx_last_error(&ctx));
        else res = OCR_FUZZ_REJECTED;
        free(text);
        ocr_ctx_free(&ctx);
        return res;
    }
    if (n < 0 || (n > 0 && !polys)) res = ocr_fuzz_fail("lmdb_label", "%d polygons at %p", n, (void *)polys);
    for (i = 0; i < n && res == OCR_FUZZ_ACCEPTED; i++) {
        const ocr_polygon *p = &polys[i];
        if (p->n_points < 3) res = ocr_fuzz_fail("lmdb_label", "polygon %d has %d points", i, p->n_points);
        for (k = 0; k < p->n_points && res == OCR_FUZZ_ACCEPTED; k++)
            if (!isfinite(p->points[k].x) || !isfinite(p->points[k].y) || fabs(p->points[k].x) > OCR_COORD_MAX || fabs(p->points[k].y) > OCR_COORD_MAX)
                res = ocr_fuzz_fail("lmdb_label", "polygon %d point %d is (%g, %g)", i, k, p->points[k].x, p->points[k].y);
        if (res == OCR_FUZZ_ACCEPTED && p->text && strcmp(p->text, "###") == 0 && !p->ignore)
            res = ocr_fuzz_fail("lmdb_label", "polygon %d: '###' not marked ignore", i);
    }
    ocr_polygons_free(polys, n);
    free(text);
    ocr_ctx_free(&ctx);
    return res;
}

OCR_FUZZ_ENTRY(lmdb_label)
