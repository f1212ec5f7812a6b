/* ocr_test.h - the tiny harness every test program uses.
   A test program defines test functions, lists them in main with OCR_TEST_RUN, and ends with
   return ocr_test_finish(); which prints "RESULT passed=P failed=F skipped=S" (build.sh sums these lines) and returns
   non-zero on any failure. Checks never abort, so one run reports every failing case. */
#ifndef OCR_TEST_H
#define OCR_TEST_H
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <math.h>

#if defined(__GNUC__) || defined(__clang__)
#define OCR_TEST__UNUSED __attribute__((unused))
#else
#define OCR_TEST__UNUSED
#endif
OCR_TEST__UNUSED static int ocr_test__passed, ocr_test__failed, ocr_test__skipped, ocr_test__case_failed;
static const char *ocr_test__filter;
static char ocr_test__skip_reason[256];

#define OCR_CHECK(cond) do { if (!(cond)) { ocr_test__case_failed = 1; \
    fprintf(stderr, "  %s:%d: check failed: %s\n", __FILE__, __LINE__, #cond); } } while (0)
#define OCR_CHECK_MSG(cond, ...) do { if (!(cond)) { ocr_test__case_failed = 1; \
    fprintf(stderr, "  %s:%d: check failed: %s: ", __FILE__, __LINE__, #cond); fprintf(stderr, __VA_ARGS__); \
    fputc('\n', stderr); } } while (0)
/* An ocr-c call that must succeed; prints the context's message when it does not. */
#define OCR_CHECK_OK(ctx, call) do { int ocr_test__rc = (call); if (ocr_test__rc != 0) { ocr_test__case_failed = 1; \
    fprintf(stderr, "  %s:%d: %s returned %d: %s\n", __FILE__, __LINE__, #call, ocr_test__rc, ocr_ctx_last_error(ctx)); } } while (0)
/* An ocr-c call that must fail with a given code and a message containing a substring. */
#define OCR_CHECK_ERR(ctx, call, code, substr) do { int ocr_test__rc = (call); \
    if (ocr_test__rc != (code) || !strstr(ocr_ctx_last_error(ctx), (substr))) { ocr_test__case_failed = 1; \
    fprintf(stderr, "  %s:%d: %s returned %d (expected %d) with message \"%s\" (expected to contain \"%s\")\n", \
            __FILE__, __LINE__, #call, ocr_test__rc, (int)(code), ocr_ctx_last_error(ctx), (substr)); } } while (0)

#define OCR_TEST_RUN(fn) ocr_test__run(#fn, fn)
/* A case whose work is the unsanitized programs it runs (./examples/..., python3, node), its own code only reading
   what they wrote: the sanitizer pass (OCR_SANITIZED=1, set by build.sh) would run the same binaries again and check
   nothing new, so the case runs in the plain pass only (the suite's ten minutes). */
#define OCR_TEST_RUN_PROGRAMS(fn) ocr_test__run_programs(#fn, fn)

OCR_TEST__UNUSED static int ocr_test_sanitized(void) { const char *v = getenv("OCR_SANITIZED"); return v && v[0] == '1'; }

/* Marks the running case skipped, with the reason (a CPU without the instructions a path needs, say); the case then
   counts neither as passed nor as failed, unless a check in it failed. Return from the case after calling it. */
OCR_TEST__UNUSED static void ocr_test_skip(const char *reason) {
    snprintf(ocr_test__skip_reason, sizeof ocr_test__skip_reason, "%s", reason);
}

OCR_TEST__UNUSED static void ocr_test__run(const char *name, void (*fn)(void)) {
    if (ocr_test__filter && !strstr(name, ocr_test__filter)) return;
    double t0 = ocr_monotonic_seconds(), seconds;
    char took[32] = "";
    ocr_test__case_failed = 0;
    ocr_test__skip_reason[0] = 0;
    fn();
    /* a case's time, when it is long enough to matter to the suite's ten minutes */
    seconds = ocr_monotonic_seconds() - t0;
    if (seconds >= 0.5) snprintf(took, sizeof took, " (%.1f s)", seconds);
    if (ocr_test__case_failed) { ocr_test__failed++; printf("FAIL %s%s\n", name, took); }
    else if (ocr_test__skip_reason[0]) { ocr_test__skipped++; printf("SKIP %s: %s\n", name, ocr_test__skip_reason); }
    else { ocr_test__passed++; printf("ok   %s%s\n", name, took); }
    fflush(stdout);
}

OCR_TEST__UNUSED static void ocr_test__run_programs(const char *name, void (*fn)(void)) {
    if (ocr_test__filter && !strstr(name, ocr_test__filter)) return;
    if (ocr_test_sanitized()) printf("plain pass only: %s\n", name);
    else ocr_test__run(name, fn);
}

/* argv[1], when given, runs only the cases whose name contains it. */
OCR_TEST__UNUSED static void ocr_test_init(int argc, char **argv) { ocr_test__filter = argc > 1 ? argv[1] : NULL; }

OCR_TEST__UNUSED static int ocr_test_finish(void) {
    printf("RESULT passed=%d failed=%d skipped=%d\n", ocr_test__passed, ocr_test__failed, ocr_test__skipped);
    return ocr_test__failed ? 1 : 0;
}

/* Compares n floats with |a-b| <= atol + rtol*|ref|; prints the worst few. Returns 1 when all agree. */
OCR_TEST__UNUSED static int ocr_test_close(const char *what, const float *got, const float *ref, long long n, double rtol, double atol) {
    long long i, bad = 0, worst = -1;
    double worst_excess = 0.0;
    for (i = 0; i < n; i++) {
        double d = fabs((double)got[i] - (double)ref[i]), lim = atol + rtol * fabs((double)ref[i]);
        if (!(d <= lim)) {
            if (bad < 3) fprintf(stderr, "  %s[%lld]: got %.8g, expected %.8g\n", what, i, got[i], ref[i]);
            if (worst < 0 || d - lim > worst_excess || isnan(d)) { worst = i; worst_excess = d - lim; }
            bad++;
        }
    }
    if (bad) {
        fprintf(stderr, "  %s: %lld of %lld values differ (rtol %g, atol %g); worst at %lld: %.8g vs %.8g\n", what, bad, n, rtol,
                atol, worst, got[worst], ref[worst]);
        ocr_test__case_failed = 1;
    }
    return bad == 0;
}

/* max |a-b| / max(max|ref|, floor): a scale-aware relative error for whole tensors */
OCR_TEST__UNUSED static double ocr_test_rel_err(const float *got, const float *ref, long long n, double floor_) {
    double md = 0.0, mr = floor_;
    long long i;
    for (i = 0; i < n; i++) {
        double d = fabs((double)got[i] - (double)ref[i]);
        if (!(d <= md)) md = d; /* NaN sticks */
        if (fabs((double)ref[i]) > mr) mr = fabs((double)ref[i]);
    }
    return md / mr;
}
#ifdef OCR_TENSOR_H
#include <stdarg.h>
/* An ocr-c call that must return `code` with a message containing every listed substring:
   EXPECT_ERR(&ctx, call, OCR_ESHAPE, "fn_name", "'x'", "[2,3]"). */
#define EXPECT_ERR(ctx, call, code, ...) ocr_test__expect_err(__LINE__, #call, (ctx), (call), (code), __VA_ARGS__, (const char *)NULL)
OCR_TEST__UNUSED static void ocr_test__expect_err(int line, const char *what, ocr_ctx *ctx, int rc, int code, ...) {
    const char *msg = ocr_ctx_last_error(ctx), *sub;
    va_list ap;
    OCR_CHECK_MSG(rc == code, "line %d: %s returned %d (%s), expected %d (%s); message: %s", line, what, rc, ocr_status_name(rc), code,
                  ocr_status_name(code), msg);
    va_start(ap, code);
    while ((sub = va_arg(ap, const char *)) != NULL)
        OCR_CHECK_MSG(strstr(msg, sub) != NULL, "line %d: %s: message \"%s\" lacks \"%s\"", line, what, msg, sub);
    va_end(ap);
}
#endif
#endif
