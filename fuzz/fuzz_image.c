/* fuzz/fuzz_image.c - the image decode path (ocr_data.h): structure checks, then the system stb_image.

   The input is the encoded file. ocr_image_probe and ocr_image_decode must agree: both accept or both refuse, with
   the same size. A decoded image is checked (RGB, inside the caps) and, when small, encoded to PNG and decoded
   again, which must give the same pixels. Built for libFuzzer the size caps are lowered (2048 a side, 4 M
   pixels), so the fuzzer spends its time on the parsers rather than on zeroing 200 MB images; the caps' own
   checks run either way. */
#ifdef OCR_FUZZ_LIBFUZZER
#ifndef OCR_IMAGE_MAX_SIDE
#define OCR_IMAGE_MAX_SIDE 2048
#endif
#ifndef OCR_IMAGE_MAX_PIXELS
#define OCR_IMAGE_MAX_PIXELS ((int64_t)1 << 22)
#endif
#endif
#include "ocr_fuzz.h"

static int ocr_fuzz_image(const uint8_t *data, size_t size) {
    ocr_ctx ctx;
    ocr_image probe, img, back;
    int rp, rd, res = OCR_FUZZ_ACCEPTED;
    ocr_ctx_init(&ctx, 1, 0);
    rp = ocr_image_probe(&ctx, data, size, &probe);
    rd = ocr_image_decode(&ctx, data, size, &img);
    if (rd) {
        ocr_ctx_free(&ctx);
        if (img.pixels) return ocr_fuzz_fail("image", "a refused image left pixels behind");
        /* The decoder may refuse what the header walk let through (stb finds the damage), never the reverse. */
        return OCR_FUZZ_REJECTED;
    }
    if (rp) res = ocr_fuzz_fail("image", "decoded a %dx%d image that ocr_image_probe refuses", img.width, img.height);
    else if (probe.width != img.width || probe.height != img.height)
        res = ocr_fuzz_fail("image", "probe says %dx%d, decode gives %dx%d", probe.width, probe.height, img.width, img.height);
    else if (!img.pixels || img.channels != 3 || img.width < 1 || img.height < 1 || img.width > OCR_IMAGE_MAX_SIDE ||
             img.height > OCR_IMAGE_MAX_SIDE || (int64_t)img.width * img.height > OCR_IMAGE_MAX_PIXELS)
        res = ocr_fuzz_fail("image", "decoded image %dx%d with %d channels", img.width, img.height, img.channels);
    else if ((int64_t)img.width * img.height <= 4096) {
        unsigned char *png = NULL;
        size_t png_size = 0;
        if (ocr_image_encode_png(&ctx, &img, &png, &png_size)) res = ocr_fuzz_fail("image", "PNG encode failed: %s", ocr_ctx_last_error(&ctx));
        else if (ocr_image_decode(&ctx, png, png_size, &back)) res = ocr_fuzz_fail("image", "own PNG refused: %s", ocr_ctx_last_error(&ctx));
        else {
            if (back.width != img.width || back.height != img.height ||
                memcmp(back.pixels, img.pixels, (size_t)img.width * (size_t)img.height * 3) != 0)
                res = ocr_fuzz_fail("image", "PNG round trip of a %dx%d image changes it", img.width, img.height);
            ocr_image_free(&back);
        }
        OCR_FREE(png);
    }
    ocr_image_free(&img);
    ocr_ctx_free(&ctx);
    return res;
}

OCR_FUZZ_ENTRY(image)
