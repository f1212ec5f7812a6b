/* ocr_example.h - what the example programs share: flag parsing with generated --help, a progress line, and
   polygon overlays. Not part of the library: plain static functions, included by each example after the ocr-c
   headers. */
#ifndef OCR_EXAMPLE_H
#define OCR_EXAMPLE_H
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <errno.h>
#include <math.h>
#include <unistd.h>

#if defined(__GNUC__) || defined(__clang__)
#define OCR_EX_UNUSED __attribute__((unused))
#else
#define OCR_EX_UNUSED
#endif

/* ---------------------------------------------------------------- flags */

typedef enum { OCR_EX_INT, OCR_EX_FLOAT, OCR_EX_STRING, OCR_EX_BOOL } ocr_ex_flag_type;
typedef struct {
    const char *name;       /* "--steps" */
    ocr_ex_flag_type type;
    void *value;            /* int*, float*, const char**, int* */
    const char *help;
} ocr_ex_flag;

OCR_EX_UNUSED static void ocr_ex_usage(FILE *f, const char *prog, const char *synopsis, const ocr_ex_flag *flags, int n) {
    int i;
    fprintf(f, "usage: %s %s\n\noptions:\n", prog, synopsis);
    for (i = 0; i < n; i++) {
        char def[64] = "";
        switch (flags[i].type) {
        case OCR_EX_INT: snprintf(def, sizeof def, " (default %d)", *(int *)flags[i].value); break;
        case OCR_EX_FLOAT: snprintf(def, sizeof def, " (default %g)", *(float *)flags[i].value); break;
        case OCR_EX_STRING:
            if (*(const char **)flags[i].value) snprintf(def, sizeof def, " (default %s)", *(const char **)flags[i].value);
            break;
        case OCR_EX_BOOL: break;
        }
        fprintf(f, "  %-22s %s%s\n", flags[i].name, flags[i].help, def);
    }
    fprintf(f, "  %-22s %s\n", "--help", "show this help and exit");
}

/* Parses argv. Returns the number of positional arguments moved to the front of argv (after argv[0]);
   exits 0 on --help and 2 on an unknown or malformed flag, with the reason and the usage on stderr. */
OCR_EX_UNUSED static int ocr_ex_parse(int argc, char **argv, const char *synopsis, const ocr_ex_flag *flags, int n) {
    int i, k, npos = 0;
    for (i = 1; i < argc; i++) {
        const char *a = argv[i], *val = NULL, *eq;
        size_t len;
        if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) { ocr_ex_usage(stdout, argv[0], synopsis, flags, n); exit(0); }
        if (strncmp(a, "--", 2) != 0 || strcmp(a, "--") == 0) { argv[1 + npos++] = argv[i]; continue; }
        eq = strchr(a, '=');
        len = eq ? (size_t)(eq - a) : strlen(a);
        for (k = 0; k < n; k++) if (strlen(flags[k].name) == len && strncmp(flags[k].name, a, len) == 0) break;
        if (k == n) {
            fprintf(stderr, "%s: unknown flag '%s'\n", argv[0], a);
            ocr_ex_usage(stderr, argv[0], synopsis, flags, n);
            exit(2);
        }
        if (flags[k].type == OCR_EX_BOOL) {
            if (eq) { fprintf(stderr, "%s: flag %s takes no value\n", argv[0], flags[k].name); exit(2); }
            *(int *)flags[k].value = 1;
            continue;
        }
        val = eq ? eq + 1 : (i + 1 < argc ? argv[++i] : NULL);
        if (!val) { fprintf(stderr, "%s: flag %s needs a value\n", argv[0], flags[k].name); exit(2); }
        if (flags[k].type == OCR_EX_STRING) { *(const char **)flags[k].value = val; continue; }
        {
            char *end;
            errno = 0;
            if (flags[k].type == OCR_EX_INT) {
                long v = strtol(val, &end, 10);
                if (errno || *end || end == val || v < -2147483647L || v > 2147483647L) {
                    fprintf(stderr, "%s: flag %s needs an integer, got '%s'\n", argv[0], flags[k].name, val);
                    exit(2);
                }
                *(int *)flags[k].value = (int)v;
            } else {
                double v = strtod(val, &end);
                if (errno || *end || end == val || !isfinite(v)) {
                    fprintf(stderr, "%s: flag %s needs a number, got '%s'\n", argv[0], flags[k].name, val);
                    exit(2);
                }
                *(float *)flags[k].value = (float)v;
            }
        }
    }
    return npos;
}

/* ---------------------------------------------------------------- progress */

/* "1m23s" */
OCR_EX_UNUSED static const char *ocr_ex_duration(double seconds, char *buf, size_t cap) {
    long s = seconds > 0 && seconds < 1e8 ? (long)(seconds + 0.5) : 0;
    if (s >= 3600) snprintf(buf, cap, "%ldh%02ldm", s / 3600, (s / 60) % 60);
    else if (s >= 60) snprintf(buf, cap, "%ldm%02lds", s / 60, s % 60);
    else snprintf(buf, cap, "%lds", s);
    return buf;
}

/* On a terminal, redraws one line with a bar; otherwise the caller prints plain lines. */
OCR_EX_UNUSED static void ocr_ex_progress(long step, long total, double elapsed, const char *fields) {
    char eta[32], el[32];
    int width = 24, filled = total > 0 ? (int)((double)step / (double)total * width) : 0, i;
    double remaining = step > 0 ? elapsed / (double)step * (double)(total - step) : 0.0;
    fprintf(stdout, "\r[");
    for (i = 0; i < width; i++) fputc(i < filled ? '#' : '.', stdout);
    fprintf(stdout, "] %ld/%ld %s %s eta %s \033[K", step, total, fields, ocr_ex_duration(elapsed, el, sizeof el),
            ocr_ex_duration(remaining, eta, sizeof eta));
    fflush(stdout);
}

/* ---------------------------------------------------------------- overlays */

/* Draws a thick line into an RGB image (clipped at the borders). */
OCR_EX_UNUSED static void ocr_ex_line(unsigned char *rgb, int w, int h, double x0, double y0, double x1, double y1,
                                      const unsigned char color[3], int thickness) {
    double len = hypot(x1 - x0, y1 - y0), t;
    int steps = (int)ceil(len * 2) + 1, s, dx, dy, r = thickness / 2;
    for (s = 0; s <= steps; s++) {
        t = (double)s / steps;
        for (dy = -r; dy <= r; dy++)
            for (dx = -r; dx <= r; dx++) {
                int x = (int)floor(x0 + (x1 - x0) * t + 0.5) + dx, y = (int)floor(y0 + (y1 - y0) * t + 0.5) + dy;
                if (x < 0 || y < 0 || x >= w || y >= h) continue;
                memcpy(rgb + ((size_t)y * w + x) * 3, color, 3);
            }
    }
}

OCR_EX_UNUSED static void ocr_ex_polygon(unsigned char *rgb, int w, int h, const ocr_point *pts, int n,
                                         const unsigned char color[3], int thickness) {
    int i;
    for (i = 0; i < n; i++)
        ocr_ex_line(rgb, w, h, pts[i].x, pts[i].y, pts[(i + 1) % n].x, pts[(i + 1) % n].y, color, thickness);
}

#endif
