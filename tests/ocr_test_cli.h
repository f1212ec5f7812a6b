/* ocr_test_cli.h - running the example programs from a test: a command with its stdout and stderr captured, and
   numbers read from the JSON lines they print. Include after ocr_tensor.h and ocr_test.h; the including test sets
   ocr_test_cli_dir (a scratch directory it owns) and ocr_test_cli_ctx before the first call. */
#ifndef OCR_TEST_CLI_H
#define OCR_TEST_CLI_H
#include <sys/wait.h>

static char ocr_test_cli_dir[64];   /* a short mkdtemp path */
static ocr_ctx *ocr_test_cli_ctx;

/* The whole file as a NUL-terminated string (free it), or NULL. */
/* The trainers' metrics that measure time (throughput, the data loader's wait): they differ between any two runs, so
   comparisons of runs leave them aside. The i-th name, NULL past the last. */
OCR_TEST__UNUSED static const char *ocr_test_timing_metric(int i) {
    static const char *const names[] = {"train/images_per_second", "train/data_wait_fraction", NULL};
    return i >= 0 && i < 2 ? names[i] : NULL;
}

OCR_TEST__UNUSED static char *ocr_test_read_text(const char *path) {
    unsigned char *bytes = NULL;
    size_t size = 0;
    if (ocr_read_file(ocr_test_cli_ctx, path, (size_t)1 << 26, &bytes, &size) != OCR_OK) return NULL;
    return (char *)bytes; /* ocr_read_file NUL-terminates */
}

/* Runs a shell command; *out and *err get its stdout and stderr (free them). Returns its exit status, -1 when it
   did not exit normally. */
OCR_TEST__UNUSED static int ocr_test_run(const char *cmd, char **out, char **err) {
    char full[8192], out_path[300], err_path[300];
    int status;
    snprintf(out_path, sizeof out_path, "%s/run_stdout.txt", ocr_test_cli_dir);
    snprintf(err_path, sizeof err_path, "%s/run_stderr.txt", ocr_test_cli_dir);
    snprintf(full, sizeof full, "(%s) >%s 2>%s", cmd, out_path, err_path);
    status = system(full);
    *out = ocr_test_read_text(out_path);
    *err = ocr_test_read_text(err_path);
    if (!*out) *out = strdup("");
    if (!*err) *err = strdup("");
    return status == -1 || !WIFEXITED(status) ? -1 : WEXITSTATUS(status);
}

/* A command that must exit with `code` and print `needle` on stderr (NULL: anything). */
OCR_TEST__UNUSED static void ocr_test_expect_exit(const char *cmd, int code, const char *needle) {
    char *out, *err;
    int rc = ocr_test_run(cmd, &out, &err);
    OCR_CHECK_MSG(rc == code, "'%s' exited %d, expected %d; stderr: %s", cmd, rc, code, err);
    OCR_CHECK_MSG(!needle || strstr(err, needle), "'%s': stderr does not mention '%s': %s", cmd, needle, err);
    free(out);
    free(err);
}

/* Number `key` of the JSON object in line[0..len), or NAN. */
OCR_TEST__UNUSED static double ocr_test_json_number(const char *line, size_t len, const char *key) {
    ocr_json_tok toks[256];
    int n, v;
    double d;
    if (ocr_json_parse(ocr_test_cli_ctx, line, len, toks, 256, &n) != OCR_OK || toks[0].type != OCR_JSON_OBJECT) return NAN;
    v = ocr_json_find(line, toks, 0, key);
    return v >= 0 && ocr_json_number(line, &toks[v], &d) ? d : NAN;
}
#endif
