/* Fuzz regression: every seed of fuzz/corpus/NAME and every kept finding of tests/fixtures/fuzz/NAME replayed
   through the fuzz targets' own functions (fuzz/fuzz_NAME.c, included here), in sorted file order. A file named
   ok-* must be accepted, bad-* refused cleanly, any-* either; a kept finding (a crash, leak, timeout or failed
   check the fuzzer once found) must never fail a target's checks again, and is named bad-* when the fix is to
   refuse it. Under ./build.sh test's sanitizer build a
   finding that still crashes or leaks is reported by the sanitizers. */
#define _POSIX_C_SOURCE 200809L
#define OCR_IMPLEMENTATION
#include "../fuzz/ocr_fuzz.h"
#include "ocr_test.h"
#include <dirent.h>
#include <time.h>
#include "../fuzz/fuzz_safetensors.c"
#include "../fuzz/fuzz_image.c"
#include "../fuzz/fuzz_icdar_gt.c"
#include "../fuzz/fuzz_lmdb_label.c"
#include "../fuzz/fuzz_json.c"
#include "../fuzz/fuzz_results.c"
#include "../fuzz/fuzz_cli.c"

typedef int (*fuzz_fn)(const uint8_t *data, size_t size);
static const struct { const char *name; fuzz_fn fn; } g_targets[] = {
    {"safetensors", ocr_fuzz_safetensors}, {"image", ocr_fuzz_image}, {"icdar_gt", ocr_fuzz_icdar_gt},
    {"lmdb_label", ocr_fuzz_lmdb_label}, {"json", ocr_fuzz_json}, {"results", ocr_fuzz_results}, {"cli", ocr_fuzz_cli},
};
#define N_TARGETS ((int)(sizeof g_targets / sizeof g_targets[0]))

static int cmp_str(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

/* Sorted names of the regular files in dir (dot files skipped); NULL with *n = 0 when dir does not exist. */
static char **list_dir(const char *dir, int *n) {
    DIR *d = opendir(dir);
    struct dirent *e;
    char **names = NULL;
    int cap = 0;
    *n = 0;
    if (!d) return NULL;
    while ((e = readdir(d)) != NULL) {
        if (e->d_name[0] == '.') continue;
        if (*n == cap) {
            char **nn = (char **)realloc(names, (size_t)(cap = cap ? cap * 2 : 16) * sizeof *nn);
            if (!nn) break;
            names = nn;
        }
        names[*n] = (char *)malloc(strlen(e->d_name) + 1);
        if (!names[*n]) break;
        strcpy(names[(*n)++], e->d_name);
    }
    closedir(d);
    if (*n) qsort(names, (size_t)*n, sizeof *names, cmp_str);
    return names;
}

static unsigned char *read_all(const char *path, size_t *size) {
    FILE *f = fopen(path, "rb");
    unsigned char *b = NULL;
    long len;
    *size = 0;
    if (!f) return NULL;
    if (fseek(f, 0, SEEK_END) == 0 && (len = ftell(f)) >= 0 && fseek(f, 0, SEEK_SET) == 0) {
        /* exactly the file's bytes, as libFuzzer hands them over */
        b = (unsigned char *)malloc(len ? (size_t)len : 1);
        if (b && fread(b, 1, (size_t)len, f) != (size_t)len) { free(b); b = NULL; }
        else *size = (size_t)len;
    }
    fclose(f);
    return b;
}

/* Replays dir through target t, checking the ok-/bad- prefixes. Returns the number of files. */
static int replay(int t, const char *dir) {
    int n, i;
    char **names = list_dir(dir, &n);
    for (i = 0; i < n; i++) {
        char path[1024];
        size_t size;
        unsigned char *b;
        int r;
        snprintf(path, sizeof path, "%s/%s", dir, names[i]);
        b = read_all(path, &size);
        OCR_CHECK_MSG(b != NULL, "cannot read %s", path);
        if (b) {
            r = g_targets[t].fn(b, size);
            OCR_CHECK_MSG(r != OCR_FUZZ_FAILED, "%s: a check of fuzz_%s failed (see above)", path, g_targets[t].name);
            if (strncmp(names[i], "ok-", 3) == 0) OCR_CHECK_MSG(r == OCR_FUZZ_ACCEPTED, "%s: a valid input was refused", path);
            if (strncmp(names[i], "bad-", 4) == 0) OCR_CHECK_MSG(r == OCR_FUZZ_REJECTED, "%s: an invalid input was accepted", path);
            free(b);
        }
        free(names[i]);
    }
    free(names);
    return n;
}

static void test_seed_corpora(void) {
    int t;
    for (t = 0; t < N_TARGETS; t++) {
        char dir[256];
        int n;
        snprintf(dir, sizeof dir, "fuzz/corpus/%s", g_targets[t].name);
        n = replay(t, dir);
        OCR_CHECK_MSG(n >= 3, "%s holds %d seeds (tools/make_fuzz_seeds.py writes them)", dir, n);
        printf("  %-12s %d seeds\n", g_targets[t].name, n);
    }
}

static void test_kept_findings(void) {
    int t, total = 0;
    for (t = 0; t < N_TARGETS; t++) {
        char dir[256];
        int n;
        snprintf(dir, sizeof dir, "tests/fixtures/fuzz/%s", g_targets[t].name);
        n = replay(t, dir);
        if (n) printf("  %-12s %d kept findings\n", g_targets[t].name, n);
        total += n;
    }
    printf("  %d kept findings in all\n", total);
}

/* A label near the reader's cap parses in linear time: ocr_label_parse_json once looked up every instance and
   every point from the start of its list, and 400,000 points took minutes (a 16 MiB label, the cap, most of an
   hour). The bound is loose: the linear walk takes well under a second, even under the sanitizers. */
static void test_label_linear(void) {
    const int n = 400000;
    size_t cap = (size_t)n * 16 + 64, len = 0;
    char *s = (char *)malloc(cap);
    struct timespec t0, t1;
    double seconds;
    int i, r;
    OCR_CHECK(s != NULL);
    if (!s) return;
    len += (size_t)snprintf(s + len, cap - len, "[{\"points\":[");
    for (i = 0; i < n; i++) len += (size_t)snprintf(s + len, cap - len, "%s[%d,%d]", i ? "," : "", i % 1000, i / 1000);
    len += (size_t)snprintf(s + len, cap - len, "]}]");
    clock_gettime(CLOCK_MONOTONIC, &t0);
    r = ocr_fuzz_lmdb_label((const uint8_t *)s, len);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    seconds = (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec);
    OCR_CHECK_MSG(r == OCR_FUZZ_ACCEPTED, "a label of %d points was refused", n);
    OCR_CHECK_MSG(seconds < 20.0, "a label of %d points (%zu bytes) took %.1f s to parse", n, len, seconds);
    free(s);
}

/* The checks can fail: a target whose library call misbehaves is reported, not passed. */
static void test_checks_bite(void) {
    static const uint8_t ok_json[] = "{\"a\":[1,2]}";
    OCR_CHECK(ocr_fuzz_json(ok_json, sizeof ok_json - 1) == OCR_FUZZ_ACCEPTED);
    OCR_CHECK(ocr_fuzz_json(ok_json, sizeof ok_json - 2) == OCR_FUZZ_REJECTED);
    OCR_CHECK(ocr_fuzz_fail("self-test", "this line is expected (test_checks_bite)") == OCR_FUZZ_FAILED);
}

int main(int argc, char **argv) {
    ocr_test_init(argc, argv);
    OCR_TEST_RUN(test_seed_corpora);
    OCR_TEST_RUN(test_kept_findings);
    OCR_TEST_RUN(test_checks_bite);
    OCR_TEST_RUN(test_label_linear);
    return ocr_test_finish();
}
