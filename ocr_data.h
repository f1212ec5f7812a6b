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

/* An 8-bit image: rows top to bottom, channels interleaved (3 = RGB). Shared by every stage of the pipeline. */
typedef struct { uint8_t *pixels; int width, height, channels; } ocr_image;

/* One labelled sample: the image and its text polygons (owned; free with ocr_sample_free). */
typedef struct {
    ocr_image image;
    ocr_polygon *polys;
    int n_polys;
    char id[256];    /* file name or LMDB key, for messages */
} ocr_sample;

OCRDEF int ocr_image_alloc(ocr_ctx *ctx, ocr_image *img, int width, int height, int channels);
OCRDEF void ocr_image_free(ocr_image *img);
OCRDEF void ocr_polygons_free(ocr_polygon *polys, int n);   /* frees points, text and the array */
OCRDEF void ocr_sample_free(ocr_sample *s);
/* Decodes JPEG, PNG or BMP (grey, RGB, RGBA -> RGB) with the system stb_image; corrupt data is an error. */
OCRDEF int ocr_image_decode(ocr_ctx *ctx, const void *bytes, size_t size, ocr_image *out);
OCRDEF int ocr_image_load(ocr_ctx *ctx, const char *path, ocr_image *out);
OCRDEF int ocr_image_save_png(ocr_ctx *ctx, const char *path, const ocr_image *img);

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
