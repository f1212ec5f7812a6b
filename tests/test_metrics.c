/* Run metrics: steps never go back, same-step scalars merge, a reopened run continues after its last step, and
   the TensorBoard event file is valid TFRecord framing (CRC-32C known answers from the format notes). */
#define OCR_IMPLEMENTATION
#include "ocr_tensor.h"
#include "ocr_test.h"
#include <unistd.h>
#include <dirent.h>

static int contains(const unsigned char *hay, size_t n, const char *needle) {
    size_t k = strlen(needle), i;
    for (i = 0; i + k <= n; i++) if (memcmp(hay + i, needle, k) == 0) return 1;
    return 0;
}

static uint32_t masked(uint32_t c) { return ((c >> 15) | (c << 17)) + 0xa282ead8u; }
static uint32_t le32(const unsigned char *p) { return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24; }

static void test_crc32c_known_answers(void) {
    static const unsigned char len26[8] = {0x1a, 0, 0, 0, 0, 0, 0, 0};
    static const unsigned char event[26] = {0x09, 0, 0, 0, 0, 0, 0, 0xf0, 0x3f, 0x10, 0x01, 0x2a, 0x0d, 0x0a, 0x0b, 0x0a,
                                            0x04, 'l', 'o', 's', 's', 0x15, 0, 0, 0, 0x3f};
    OCR_CHECK(ocr_crc32c(0, "123456789", 9) == 0xE3069283u);
    OCR_CHECK(masked(ocr_crc32c(0, len26, 8)) == 0x2dd89b12u);
    OCR_CHECK(masked(ocr_crc32c(0, event, 26)) == 0xb15df927u);
}

static char dir[256];

static char *read_text(const char *name, size_t *n) {
    char path[512];
    unsigned char *buf = NULL;
    ocr_ctx ctx;
    ocr_ctx_init(&ctx, 1, 0);
    snprintf(path, sizeof path, "%s/%s", dir, name);
    if (ocr_read_file(&ctx, path, 1 << 24, &buf, n)) buf = NULL;
    ocr_ctx_free(&ctx);
    return (char *)buf;
}

/* Counts TFRecords, checking both CRCs of each, and whether a scalar tagged tag appears. */
static int check_events(int *n_records, const char *tag) {
    DIR *d = opendir(dir);
    struct dirent *e;
    int found_tag = 0;
    *n_records = 0;
    while (d && (e = readdir(d))) {
        size_t n, at = 0;
        char *buf;
        if (!strstr(e->d_name, "tfevents")) continue;
        buf = read_text(e->d_name, &n);
        while (buf && at + 12 <= n) {
            const unsigned char *p = (const unsigned char *)buf + at;
            uint64_t len = le32(p) | (uint64_t)le32(p + 4) << 32;
            OCR_CHECK(masked(ocr_crc32c(0, p, 8)) == le32(p + 8));
            if (at + 16 + len > n) { OCR_CHECK(!"record runs past the end of the file"); break; }
            OCR_CHECK(masked(ocr_crc32c(0, p + 12, (size_t)len)) == le32(p + 12 + len));
            if (contains(p + 12, (size_t)len, tag)) found_tag = 1;
            (*n_records)++;
            at += 16 + (size_t)len;
        }
        OCR_CHECK(buf && at == n);
        free(buf);
    }
    if (d) closedir(d);
    return found_tag;
}

static void test_metrics_steps(void) {
    ocr_ctx ctx;
    ocr_metrics m;
    size_t n;
    char *text;
    int records;
    unsigned char png[8] = {0x89, 'P', 'N', 'G', 0, 0, 0, 0};
    OCR_CHECK_OK(&ctx, ocr_ctx_init(&ctx, 1, 0));
    OCR_CHECK_OK(&ctx, ocr_metrics_open(&ctx, &m, dir));
    OCR_CHECK_OK(&ctx, ocr_metrics_scalar(&ctx, &m, 10, "loss", 0.5));
    OCR_CHECK_OK(&ctx, ocr_metrics_scalar(&ctx, &m, 10, "lr", 0.001));
    OCR_CHECK_OK(&ctx, ocr_metrics_scalar(&ctx, &m, 20, "loss", 0.25));
    OCR_CHECK_OK(&ctx, ocr_metrics_scalar(&ctx, &m, 20, "val/hmean", 0.75)); /* validation at the training step: merged */
    OCR_CHECK_ERR(&ctx, ocr_metrics_scalar(&ctx, &m, 15, "val/hmean", 0.7), OCR_ERANGE, "refused 'val/hmean' at step 15");
    OCR_CHECK_ERR(&ctx, ocr_metrics_scalar(&ctx, &m, 20, "loss", 0.1), OCR_ERANGE, "already logged");
    OCR_CHECK_OK(&ctx, ocr_metrics_scalar(&ctx, &m, 30, "loss", NAN));
    OCR_CHECK_OK(&ctx, ocr_metrics_image(&ctx, &m, 30, "val/overlay", 2, 1, 3, png, sizeof png));
    OCR_CHECK(m.refused == 2);
    OCR_CHECK_OK(&ctx, ocr_metrics_close(&ctx, &m));
    text = read_text("metrics.jsonl", &n);
    OCR_CHECK(text && strcmp(text, "{\"step\":10,\"loss\":0.5,\"lr\":0.001}\n{\"step\":20,\"loss\":0.25,\"val/hmean\":0.75}\n"
                                   "{\"step\":30,\"loss\":null}\n") == 0);
    free(text);
    /* a resumed run continues after step 30 */
    OCR_CHECK_OK(&ctx, ocr_metrics_open(&ctx, &m, dir));
    OCR_CHECK(m.last_step == 30);
    OCR_CHECK_ERR(&ctx, ocr_metrics_scalar(&ctx, &m, 30, "loss", 1), OCR_ERANGE, "steps never go back");
    OCR_CHECK_OK(&ctx, ocr_metrics_scalar(&ctx, &m, 31, "loss", 1));
    OCR_CHECK_OK(&ctx, ocr_metrics_close(&ctx, &m));
    OCR_CHECK(check_events(&records, "val/hmean"));
    OCR_CHECK(records == 2 + 6 + 1); /* two file_version records, 6 scalars, 1 image */
    ocr_ctx_free(&ctx);
}

int main(int argc, char **argv) {
    ocr_test_init(argc, argv);
    snprintf(dir, sizeof dir, "/tmp/ocr_test_metrics.%ld", (long)getpid());
    OCR_TEST_RUN(test_crc32c_known_answers);
    OCR_TEST_RUN(test_metrics_steps);
    {
        char cmd[300];
        snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
        if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", dir);
    }
    return ocr_test_finish();
}
