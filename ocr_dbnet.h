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
