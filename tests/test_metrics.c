/* Run metrics: steps never go back, same-step scalars merge, a reopened run continues after its last step, a run
   resumed from an earlier state drops what was logged after it (metrics.jsonl and the event files, torn records too)
   and marks the restart for TensorBoard, and the TensorBoard event file is valid TFRecord framing (CRC-32C known
   answers from the format notes, and a long input against the bitwise definition). */
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
    { /* long inputs take a table: the same CRC as the bitwise definition, also when continued in pieces */
        static unsigned char big[10007];
        uint32_t c = ~0u;
        size_t i;
        int k;
        for (i = 0; i < sizeof big; i++) big[i] = (unsigned char)(i * 2654435761u >> 13);
        for (i = 0; i < sizeof big; i++) {
            c ^= big[i];
            for (k = 0; k < 8; k++) c = c & 1u ? (c >> 1) ^ 0x82F63B78u : c >> 1;
        }
        OCR_CHECK(ocr_crc32c(0, big, sizeof big) == ~c);
        OCR_CHECK(ocr_crc32c(ocr_crc32c(0, big, 5000), big + 5000, sizeof big - 5000) == ~c);
        OCR_CHECK(ocr_crc32c(ocr_crc32c(0, big, 10), big + 10, sizeof big - 10) == ~c);
    }
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

/* Appends bytes to dir/name, as a process killed in the middle of a write leaves them. */
static void append_raw(const char *name, const void *bytes, size_t n) {
    char path[512];
    FILE *f;
    snprintf(path, sizeof path, "%s/%s", dir, name);
    f = fopen(path, "ab");
    OCR_CHECK(f != NULL);
    if (f) { OCR_CHECK(fwrite(bytes, 1, n, f) == n); fclose(f); }
}

/* One event's step (-1 without one) and whether it is a SessionLog START, decoded here from the protobuf wire format
   (Event: 1 wall_time fixed64, 2 step varint, 7 session_log {1 status varint}). */
static int64_t event_step(const unsigned char *p, size_t n, int *is_start) {
    size_t i = 0;
    int64_t step = -1;
    *is_start = 0;
    while (i < n) {
        unsigned key = p[i++];
        if (key == 0x09) i += 8;
        else if (key == 0x10) { uint64_t v = 0; int sh = 0; while (p[i] & 0x80) { v |= (uint64_t)(p[i++] & 0x7f) << sh; sh += 7; } v |= (uint64_t)p[i++] << sh; step = (int64_t)v; }
        else if ((key & 7) == 2) {
            size_t len = 0; int sh = 0;
            while (p[i] & 0x80) { len |= (size_t)(p[i++] & 0x7f) << sh; sh += 7; }
            len |= (size_t)p[i++] << sh;
            if (key >> 3 == 7 && len == 2 && p[i] == 0x08 && p[i + 1] == 0x01) *is_start = 1;
            i += len;
        } else { OCR_CHECK_MSG(0, "unexpected protobuf key 0x%x", key); return -2; }
    }
    return step;
}

/* Over every event file: the number of valid records, the largest step of a summary, the START markers' steps. */
static int scan_events(int64_t *max_summary_step, int64_t *starts, int max_starts, int *n_starts) {
    DIR *d = opendir(dir);
    struct dirent *e;
    int records = 0;
    *max_summary_step = -1;
    *n_starts = 0;
    while (d && (e = readdir(d))) {
        size_t n, at = 0;
        char *buf;
        if (!strstr(e->d_name, "tfevents")) continue;
        buf = read_text(e->d_name, &n);
        while (buf && at + 16 <= n) {
            const unsigned char *p = (const unsigned char *)buf + at;
            uint64_t len = le32(p) | (uint64_t)le32(p + 4) << 32;
            int start;
            int64_t s;
            if (at + 16 + len > n || masked(ocr_crc32c(0, p + 12, (size_t)len)) != le32(p + 12 + len)) break;
            s = event_step(p + 12, (size_t)len, &start);
            if (start && *n_starts < max_starts) starts[(*n_starts)++] = s;
            else if (!start && s > *max_summary_step) *max_summary_step = s;
            records++;
            at += 16 + (size_t)len;
        }
        OCR_CHECK_MSG(buf && at == n, "%s: %zu bytes after the last valid record", e->d_name, buf ? n - at : 0);
        free(buf);
    }
    if (d) closedir(d);
    return records;
}

/* A run killed after its state at step 6 was saved, having logged up to step 9 (a torn record at the end of each file),
   resumes at step 6: ocr_metrics_open refuses step 7 as already written (the bug); ocr_metrics_open_resume drops
   steps 7..9 and the torn records from metrics.jsonl and the event file, marks the restart for TensorBoard, and takes
   step 7 again. */
static void test_metrics_resume(void) {
    ocr_ctx ctx;
    ocr_metrics m;
    unsigned char png[8] = {0x89, 'P', 'N', 'G', 0, 0, 0, 0};
    char *text;
    size_t n;
    int64_t s, max_step, starts[4];
    int n_starts, records;
    OCR_CHECK_OK(&ctx, ocr_ctx_init(&ctx, 1, 0));
    {
        char cmd[300];
        snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
        OCR_CHECK(system(cmd) == 0);
    }
    OCR_CHECK_OK(&ctx, ocr_metrics_open(&ctx, &m, dir));
    for (s = 1; s <= 9; s++) {
        OCR_CHECK_OK(&ctx, ocr_metrics_scalar(&ctx, &m, s, "loss", 1.0 / (double)s));
        if (s % 3 == 0) OCR_CHECK_OK(&ctx, ocr_metrics_image(&ctx, &m, s, "val/overlay", 2, 1, 3, png, sizeof png));
        if (s == 6) OCR_CHECK_OK(&ctx, ocr_metrics_flush(&ctx, &m)); /* the state saved at step 6 */
    }
    OCR_CHECK_OK(&ctx, ocr_metrics_close(&ctx, &m));
    append_raw("metrics.jsonl", "{\"step\":10,\"lo", 14);
    {
        DIR *d = opendir(dir);
        struct dirent *e;
        while (d && (e = readdir(d))) if (strstr(e->d_name, "tfevents")) append_raw(e->d_name, "\x30\0\0\0\0\0\0\0\x11", 9);
        if (d) closedir(d);
    }
    /* the bug: a plain reopen continues after step 9 and refuses the resumed run's step 7 */
    OCR_CHECK_OK(&ctx, ocr_metrics_open(&ctx, &m, dir));
    OCR_CHECK_ERR(&ctx, ocr_metrics_scalar(&ctx, &m, 7, "loss", 0.5), OCR_ERANGE, "already written");
    OCR_CHECK_OK(&ctx, ocr_metrics_close(&ctx, &m));
    /* the fix */
    OCR_CHECK_OK(&ctx, ocr_metrics_open_resume(&ctx, &m, dir, 6));
    text = read_text("metrics.jsonl", &n);
    OCR_CHECK_MSG(text && strcmp(text, "{\"step\":1,\"loss\":1}\n{\"step\":2,\"loss\":0.5}\n{\"step\":3,\"loss\":0.333333333}\n"
                                       "{\"step\":4,\"loss\":0.25}\n{\"step\":5,\"loss\":0.2}\n{\"step\":6,\"loss\":0.166666667}\n") == 0,
                  "metrics.jsonl after the resume at step 6:\n%s", text ? text : "(none)");
    free(text);
    records = scan_events(&max_step, starts, 4, &n_starts);
    OCR_CHECK_MSG(max_step == 6 && n_starts == 1 && starts[0] == 7 && records == (1 + 6 + 2) + 1 + 2,
                  "events after the resume at step 6: last summary step %lld, %d START markers (first at %lld), %d records", (long long)max_step,
                  n_starts, n_starts ? (long long)starts[0] : -1LL, records);
    OCR_CHECK_OK(&ctx, ocr_metrics_scalar(&ctx, &m, 7, "loss", 0.5));
    OCR_CHECK_OK(&ctx, ocr_metrics_close(&ctx, &m));
    text = read_text("metrics.jsonl", &n);
    OCR_CHECK(text && strstr(text, "{\"step\":6,\"loss\":0.166666667}\n{\"step\":7,\"loss\":0.5}\n") && !strstr(text, "step\":8"));
    free(text);
    /* a resume at or past the last step keeps everything (the new START marker at 8 purges nothing) */
    OCR_CHECK_OK(&ctx, ocr_metrics_open_resume(&ctx, &m, dir, 7));
    OCR_CHECK(m.last_step == 7);
    OCR_CHECK_OK(&ctx, ocr_metrics_close(&ctx, &m));
    records = scan_events(&max_step, starts, 4, &n_starts);
    OCR_CHECK_MSG(max_step == 7 && n_starts == 2 && records == (1 + 6 + 2) + 1 + 3 + 2,
                  "after a second resume at step 7: last summary step %lld, %d START markers, %d records", (long long)max_step, n_starts, records);
    OCR_CHECK_ERR(&ctx, ocr_metrics_open_resume(&ctx, &m, dir, -1), OCR_EINVAL, "negative");
    ocr_ctx_free(&ctx);
}

int main(int argc, char **argv) {
    ocr_test_init(argc, argv);
    snprintf(dir, sizeof dir, "/tmp/ocr_test_metrics.%ld", (long)getpid());
    OCR_TEST_RUN(test_crc32c_known_answers);
    OCR_TEST_RUN(test_metrics_steps);
    OCR_TEST_RUN(test_metrics_resume);
    {
        char cmd[300];
        snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
        if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", dir);
    }
    return ocr_test_finish();
}
