/* ocr_dbnet.h - DBNet: ResNet backbone, FPN neck, DB head, target maps, post-processing, ICDAR evaluation.
   v0.1  MIT

   Do this in exactly one C or C++ file:
       #define OCR_DBNET_IMPLEMENTATION       (OCR_IMPLEMENTATION turns on every module)
       #include "ocr_dbnet.h"
   Dependencies: ocr_tensor.h, ocr_nn.h, ocr_loss.h.
*/
#ifndef OCR_DBNET_H
#define OCR_DBNET_H
#include "ocr_tensor.h"
#include "ocr_nn.h"
#include "ocr_loss.h"
#ifdef __cplusplus
extern "C" {
#endif

/* ================================================================ [model] declarations */

/* ================================================================ [geometry] declarations */

/* A list of polygons in one buffer: polygon i has counts[i] points starting at pts + sum(counts[0..i)). */
typedef struct { ocr_point *pts; int *counts; int n_polys, n_pts, cap_pts, cap_polys; } ocr_polyset;
OCRDEF void ocr_polyset_free(ocr_polyset *ps);
OCRDEF double ocr_poly_area(const ocr_point *pts, int n);        /* signed shoelace area, > 0 when clockwise on screen */
OCRDEF double ocr_poly_perimeter(const ocr_point *pts, int n);
/* Offsets a closed polygon by delta pixels with round joins, as pyclipper's PyclipperOffset with JT_ROUND and
   ET_CLOSEDPOLYGON (delta > 0 grows, < 0 shrinks; a shrink may split or erase the polygon). */
OCRDEF int ocr_poly_offset(ocr_ctx *ctx, const ocr_point *pts, int n, double delta, ocr_polyset *out);

/* ================================================================ [targets] declarations */

/* ================================================================ [postprocess] declarations */

/* ================================================================ [eval] declarations */

#ifdef __cplusplus
}
#endif
#endif /* OCR_DBNET_H */

#if defined(OCR_IMPLEMENTATION) && !defined(OCR_DBNET_IMPLEMENTATION)
#define OCR_DBNET_IMPLEMENTATION
#endif
#if defined(OCR_DBNET_IMPLEMENTATION) && !defined(OCR__DBNET_IMPLEMENTED)
#define OCR__DBNET_IMPLEMENTED
#include <stdio.h>
#include <string.h>
#include <math.h>
#ifdef __cplusplus
extern "C" {
#endif

/* ================================================================ [model] implementation */

/* ================================================================ [geometry] implementation */

/* ================================================================ [targets] implementation */

/* ================================================================ [postprocess] implementation */

/* ================================================================ [eval] implementation */

#ifdef __cplusplus
}
#endif
#endif /* OCR_DBNET_IMPLEMENTATION */
