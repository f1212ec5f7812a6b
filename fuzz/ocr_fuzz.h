/* fuzz/ocr_fuzz.h - what every fuzz target shares: the library include and the failure report.

   Each fuzz/fuzz_NAME.c defines   static int ocr_fuzz_NAME(const uint8_t *data, size_t size)   which returns
     OCR_FUZZ_REJECTED (0)  the library refused the input cleanly (an OCR_E* code, nothing leaked),
     OCR_FUZZ_ACCEPTED (1)  the library accepted it and every check on the result held,
     OCR_FUZZ_FAILED  (-1)  a check on the library's behaviour failed (the message went to stderr).
   Built for libFuzzer (-DOCR_FUZZ_LIBFUZZER, see fuzz/run.sh) a file also defines LLVMFuzzerTestOneInput, which
   aborts on OCR_FUZZ_FAILED so libFuzzer keeps the input as a crash. tests/test_fuzz_regress.c includes every
   fuzz_NAME.c into one program and replays the seed corpora and the kept crash inputs through the same functions.
   Crashes, leaks and undefined behaviour are the sanitizers' to report; the checks here catch wrong answers. */
#ifndef OCR_FUZZ_H
#define OCR_FUZZ_H
#ifndef _POSIX_C_SOURCE
#define _POSIX_C_SOURCE 200809L
#endif
#ifndef OCR_IMPLEMENTATION
#define OCR_IMPLEMENTATION   /* one translation unit per target; build.sh's -DOCR_NO_IMPLEMENTATION overrides it */
#endif
#include "../ocr_tensor.h"
#include "../ocr_data.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <stdint.h>
#include <stdarg.h>

#define OCR_FUZZ_REJECTED 0
#define OCR_FUZZ_ACCEPTED 1
#define OCR_FUZZ_FAILED (-1)

#if defined(__GNUC__) || defined(__clang__)
#define OCR_FUZZ__UNUSED __attribute__((unused))
#define OCR_FUZZ__PRINTF(a, b) __attribute__((format(printf, a, b)))
#else
#define OCR_FUZZ__UNUSED
#define OCR_FUZZ__PRINTF(a, b)
#endif

/* Reports a failed check and returns OCR_FUZZ_FAILED, for  return ocr_fuzz_fail("...", ...);  */
OCR_FUZZ__UNUSED OCR_FUZZ__PRINTF(2, 3) static int ocr_fuzz_fail(const char *target, const char *fmt, ...) {
    va_list ap;
    fprintf(stderr, "ocr_fuzz_%s: check failed: ", target);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
    return OCR_FUZZ_FAILED;
}

/* A NUL-free copy of the input as the library sees text from a file: exactly size bytes on the heap, so a read
   one past the end is an AddressSanitizer report, never a lucky terminator. */
OCR_FUZZ__UNUSED static char *ocr_fuzz_copy(const uint8_t *data, size_t size) {
    char *s = (char *)malloc(size ? size : 1);
    if (s && size) memcpy(s, data, size);
    return s;
}

#endif /* OCR_FUZZ_H */

/* Each target file ends with OCR_FUZZ_ENTRY(name): the libFuzzer entry point when built for libFuzzer. */
#ifndef OCR_FUZZ_ENTRY
#ifdef OCR_FUZZ_LIBFUZZER
#define OCR_FUZZ_ENTRY(name) \
    int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size); \
    int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) { \
        if (ocr_fuzz_##name(data, size) == OCR_FUZZ_FAILED) abort(); \
        return 0; \
    }
#else
#define OCR_FUZZ_ENTRY(name)
#endif
#endif
