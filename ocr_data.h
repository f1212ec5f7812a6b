/* ocr_data.h - images, ICDAR folders, fork-safe LMDB, versioned map cache, augmentation, batch loader and
   synthetic text scenes.  v0.1  MIT

   Do this in exactly one C or C++ file:
       #define OCR_DATA_IMPLEMENTATION        (OCR_IMPLEMENTATION turns on every module)
       #include "ocr_data.h"
   Link with -llmdb -lm -lpthread. Uses the system stb headers (libstb-dev: -I/usr/include/stb).
   Dependencies: ocr_tensor.h only.
*/
#ifndef OCR_DATA_H
#define OCR_DATA_H
#include "ocr_tensor.h"
#ifdef __cplusplus
extern "C" {
#endif

/* ================================================================ [io] declarations: images, ICDAR, LMDB */

/* ================================================================ [synth] declarations: synthetic scenes, augmentation */

/* ================================================================ [cache] declarations */

/* ================================================================ [loader] declarations */

#ifdef __cplusplus
}
#endif
#endif /* OCR_DATA_H */

#if defined(OCR_IMPLEMENTATION) && !defined(OCR_DATA_IMPLEMENTATION)
#define OCR_DATA_IMPLEMENTATION
#endif
#if defined(OCR_DATA_IMPLEMENTATION) && !defined(OCR__DATA_IMPLEMENTED)
#define OCR__DATA_IMPLEMENTED
#ifdef __cplusplus
extern "C" {
#endif

/* ================================================================ [io] implementation */

/* ================================================================ [synth] implementation */

/* ================================================================ [cache] implementation */

/* ================================================================ [loader] implementation */

#ifdef __cplusplus
}
#endif
#endif /* OCR_DATA_IMPLEMENTATION */
