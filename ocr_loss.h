/* ocr_loss.h - numerically stable DBNet losses with their gradients.  v0.1  MIT
   (skeleton: being written; see issue "Stable DB losses") */
#ifndef OCR_LOSS_H
#define OCR_LOSS_H
#include "ocr_tensor.h"
#ifdef __cplusplus
extern "C" {
#endif

#ifdef __cplusplus
}
#endif
#endif /* OCR_LOSS_H */

#if defined(OCR_IMPLEMENTATION) && !defined(OCR_LOSS_IMPLEMENTATION)
#define OCR_LOSS_IMPLEMENTATION
#endif
#if defined(OCR_LOSS_IMPLEMENTATION) && !defined(OCR__LOSS_IMPLEMENTED)
#define OCR__LOSS_IMPLEMENTED
#endif
