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
#include <float.h>
#include <unistd.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

#if defined(__GNUC__) || defined(__clang__)
#define OCR_EX_UNUSED __attribute__((unused))
#else
#define OCR_EX_UNUSED
#endif

/* ---------------------------------------------------------------- flags */

typedef enum { OCR_EX_INT, OCR_EX_FLOAT, OCR_EX_STRING, OCR_EX_BOOL, OCR_EX_INT64 } ocr_ex_flag_type;
typedef struct {
    const char *name;       /* "--steps" */
    ocr_ex_flag_type type;
    void *value;            /* int*, float*, const char**, int*, int64_t* */
    const char *help;
} ocr_ex_flag;

OCR_EX_UNUSED static void ocr_ex_usage(FILE *f, const char *prog, const char *synopsis, const ocr_ex_flag *flags, int n) {
    int i;
    fprintf(f, "usage: %s %s\n\noptions:\n", prog, synopsis);
    for (i = 0; i < n; i++) {
        char def[64] = "";
        switch (flags[i].type) {
        case OCR_EX_INT: snprintf(def, sizeof def, " (default %d)", *(int *)flags[i].value); break;
        case OCR_EX_INT64: snprintf(def, sizeof def, " (default %lld)", (long long)*(int64_t *)flags[i].value); break;
        case OCR_EX_FLOAT: snprintf(def, sizeof def, " (default %g)", *(float *)flags[i].value); break;
        case OCR_EX_STRING:
            if (*(const char **)flags[i].value) snprintf(def, sizeof def, " (default %s)", *(const char **)flags[i].value);
            break;
        case OCR_EX_BOOL: break;
        }
        fprintf(f, "  %-22s %s%s\n", flags[i].name, flags[i].help, def);
    }
    fprintf(f, "  %-22s %s\n", "--help", "show this help and exit");
    fprintf(f, "  %-22s %s\n", "--version", "show the ocr-c version and exit");
}

/* Sets a flag's variable from text as the command line writes it (a bool takes 0 or 1). 0, or -1 when text is not a
   whole value of the flag's type (an integer in int's or int64_t's range; a finite number that a float holds: 1e99
   would become Inf, and 1e-50 zero). */
OCR_EX_UNUSED static int ocr_ex_flag_set(const ocr_ex_flag *f, const char *text) {
    char *end;
    errno = 0;
    if (f->type == OCR_EX_STRING) { *(const char **)f->value = text; return 0; }
    if (f->type == OCR_EX_INT64) {
        long long v = strtoll(text, &end, 10);
        if (errno || *end || end == text) return -1;
        *(int64_t *)f->value = (int64_t)v;
        return 0;
    }
    if (f->type == OCR_EX_INT || f->type == OCR_EX_BOOL) {
        long v = strtol(text, &end, 10);
        if (errno || *end || end == text || v < -2147483647L || v > 2147483647L || (f->type == OCR_EX_BOOL && v != 0 && v != 1)) return -1;
        *(int *)f->value = (int)v;
    } else {
        double v = strtod(text, &end);
        if (errno || *end || end == text || !isfinite(v) || fabs(v) > FLT_MAX || (v != 0 && fabs(v) < FLT_MIN)) return -1;
        *(float *)f->value = (float)v;
    }
    return 0;
}

/* What ocr_ex_parse_args found besides positional arguments. */
enum { OCR_EX_PARSE_HELP = -1, OCR_EX_PARSE_VERSION = -2, OCR_EX_PARSE_UNKNOWN = -3, OCR_EX_PARSE_BAD = -4 };

/* Parses argv against the flags, printing nothing and never exiting (the fuzz target drives it with arbitrary
   arguments). Returns the number of positional arguments moved to the front of argv (after argv[0]); or
   OCR_EX_PARSE_HELP / OCR_EX_PARSE_VERSION for --help (-h) / --version; or OCR_EX_PARSE_UNKNOWN (an unknown flag) /
   OCR_EX_PARSE_BAD (a missing or malformed value) with the reason in why. Flags before the failure keep what they
   were set to. */
OCR_EX_UNUSED static int ocr_ex_parse_args(int argc, char **argv, const ocr_ex_flag *flags, int n, char *why, size_t cap) {
    int i, k, npos = 0;
    if (cap) why[0] = '\0';
    for (i = 1; i < argc; i++) {
        const char *a = argv[i], *val = NULL, *eq;
        size_t len;
        if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) return OCR_EX_PARSE_HELP;
        if (strcmp(a, "--version") == 0) return OCR_EX_PARSE_VERSION;
        if (strncmp(a, "--", 2) != 0 || strcmp(a, "--") == 0) { argv[1 + npos++] = argv[i]; continue; }
        eq = strchr(a, '=');
        len = eq ? (size_t)(eq - a) : strlen(a);
        for (k = 0; k < n; k++) if (strlen(flags[k].name) == len && strncmp(flags[k].name, a, len) == 0) break;
        if (k == n) { snprintf(why, cap, "unknown flag '%s'", a); return OCR_EX_PARSE_UNKNOWN; }
        if (flags[k].type == OCR_EX_BOOL) {
            if (eq) { snprintf(why, cap, "flag %s takes no value", flags[k].name); return OCR_EX_PARSE_BAD; }
            *(int *)flags[k].value = 1;
            continue;
        }
        val = eq ? eq + 1 : (i + 1 < argc ? argv[++i] : NULL);
        if (!val) { snprintf(why, cap, "flag %s needs a value", flags[k].name); return OCR_EX_PARSE_BAD; }
        if (ocr_ex_flag_set(&flags[k], val) != 0) {
            snprintf(why, cap, "flag %s needs %s, got '%s'", flags[k].name,
                     flags[k].type == OCR_EX_FLOAT ? "a number within float's range (1.2e-38 <= |v| <= 3.4e38, or 0)" : "an integer", val);
            return OCR_EX_PARSE_BAD;
        }
    }
    return npos;
}

/* ocr_ex_parse_args for a program's main: the number of positional arguments; prints the usage and exits 0 on
   --help, prints the version and exits 0 on --version, prints the reason (and the usage, for an unknown flag) on
   stderr and exits 2 on a usage error. */
OCR_EX_UNUSED static int ocr_ex_parse(int argc, char **argv, const char *synopsis, const ocr_ex_flag *flags, int n) {
    char why[512];
    int rc = ocr_ex_parse_args(argc, argv, flags, n, why, sizeof why);
    if (rc == OCR_EX_PARSE_HELP) { ocr_ex_usage(stdout, argv[0], synopsis, flags, n); exit(0); }
    if (rc == OCR_EX_PARSE_VERSION) {
#ifdef OCR_VERSION
        printf("%s (ocr-c) %s\n", argv[0], OCR_VERSION);
#else
        printf("%s (ocr-c)\n", argv[0]);
#endif
        exit(0);
    }
    if (rc < 0) {
        fprintf(stderr, "%s: %s\n", argv[0], why);
        if (rc == OCR_EX_PARSE_UNKNOWN) ocr_ex_usage(stderr, argv[0], synopsis, flags, n);
        exit(2);
    }
    return rc;
}

/* ---------------------------------------------------------------- settings tables */

/* A program's settings described once, in one table: each row is a flag (parsed, and listed by --help with its
   default, through ocr_ex_parse) whose variable lives at offset in the program's settings struct, and says whether
   checkpoints keep it. A stored setting is written as the metadata pair "<prefix><name>" (the flag's name without
   "--", dashes as underscores: --weight-decay -> train.weight_decay) and read back on resume. Values are text as on
   the command line: ints "%d", floats "%.9g" (which reads back to the same float), strings as they are, a NULL string
   as "". */
enum { OCR_EX_RUNTIME = 0, OCR_EX_STORED = 1 };
typedef struct {
    const char *name;         /* "--weight-decay" */
    ocr_ex_flag_type type;
    size_t offset;            /* of the variable in the settings struct: offsetof(struct, field) */
    const char *def;          /* default, as the command line writes it; NULL: 0, or a NULL string */
    int stored;               /* OCR_EX_STORED: kept in checkpoints and restored on resume; OCR_EX_RUNTIME: not */
    const char *absent;       /* stored: what a checkpoint without the key means (it predates the setting); NULL: required */
    const char *help;
} ocr_ex_setting;

/* The row's flag, pointing into the settings struct at base. */
OCR_EX_UNUSED static ocr_ex_flag ocr_ex_setting_flag(const ocr_ex_setting *s, void *base) {
    ocr_ex_flag f;
    f.name = s->name;
    f.type = s->type;
    f.value = (char *)base + s->offset;
    f.help = s->help;
    return f;
}

/* "--weight-decay" -> "<prefix>weight_decay" */
OCR_EX_UNUSED static void ocr_ex_setting_key(const ocr_ex_setting *s, const char *prefix, char *key, size_t cap) {
    const char *n = strncmp(s->name, "--", 2) == 0 ? s->name + 2 : s->name;
    size_t i;
    snprintf(key, cap, "%s%s", prefix, n);
    for (i = strlen(prefix); i < cap && key[i]; i++) if (key[i] == '-') key[i] = '_';
}

/* Every variable to its default. A default that does not parse is the program's bug: it says so and aborts. */
OCR_EX_UNUSED static void ocr_ex_settings_defaults(const ocr_ex_setting *t, int n, void *base) {
    int i;
    for (i = 0; i < n; i++) {
        ocr_ex_flag f = ocr_ex_setting_flag(&t[i], base);
        if (!t[i].def) {
            if (f.type == OCR_EX_STRING) *(const char **)f.value = NULL;
            else if (f.type == OCR_EX_FLOAT) *(float *)f.value = 0.0f;
            else if (f.type == OCR_EX_INT64) *(int64_t *)f.value = 0;
            else *(int *)f.value = 0;
        } else if (ocr_ex_flag_set(&f, t[i].def) != 0) {
            fprintf(stderr, "ocr_ex_settings_defaults: the default '%s' of %s does not parse\n", t[i].def, t[i].name);
            abort();
        }
    }
}

/* Sets the defaults, then parses argv against the table as ocr_ex_parse does (its return value, --help and exits). */
OCR_EX_UNUSED static int ocr_ex_settings_parse(int argc, char **argv, const char *synopsis, const ocr_ex_setting *t, int n, void *base) {
    ocr_ex_flag *flags = (ocr_ex_flag *)malloc((size_t)(n > 0 ? n : 1) * sizeof *flags);
    int i, npos;
    if (!flags) { fprintf(stderr, "%s: out of memory\n", argv[0]); exit(1); }
    ocr_ex_settings_defaults(t, n, base);
    for (i = 0; i < n; i++) flags[i] = ocr_ex_setting_flag(&t[i], base);
    npos = ocr_ex_parse(argc, argv, synopsis, flags, n);
    free(flags);
    return npos;
}

/* Metadata pairs for a checkpoint, with their text in one buffer. */
#define OCR_EX_META_MAX 96
typedef struct {
    int n;
    const char *keys[OCR_EX_META_MAX], *values[OCR_EX_META_MAX];
    char text[32768];
    size_t used;
} ocr_ex_meta;

OCR_EX_UNUSED static void ocr_ex_meta_init(ocr_ex_meta *m) { m->n = 0; m->used = 0; }

/* Adds key = printf(fmt, ...). 0, or -1 when the pairs or their text do not fit (nothing is cut short). */
#if defined(__GNUC__) || defined(__clang__)
__attribute__((format(printf, 3, 4)))
#endif
OCR_EX_UNUSED static int ocr_ex_meta_add(ocr_ex_meta *m, const char *key, const char *fmt, ...) {
    size_t room = sizeof m->text - m->used, klen = strlen(key) + 1;
    va_list ap;
    int len;
    if (m->n >= OCR_EX_META_MAX || klen >= room) return -1;
    memcpy(m->text + m->used, key, klen);
    va_start(ap, fmt);
    len = vsnprintf(m->text + m->used + klen, room - klen, fmt, ap);
    va_end(ap);
    if (len < 0 || (size_t)len >= room - klen) return -1;
    m->keys[m->n] = m->text + m->used;
    m->values[m->n] = m->text + m->used + klen;
    m->n++;
    m->used += klen + (size_t)len + 1;
    return 0;
}

/* The stored settings as "<prefix><name>" pairs, in the table's order. 0, or -1 when they do not fit. */
OCR_EX_UNUSED static int ocr_ex_settings_to_meta(const ocr_ex_setting *t, int n, const void *base, const char *prefix, ocr_ex_meta *m) {
    int i, rc = 0;
    for (i = 0; i < n && rc == 0; i++) {
        const void *v = (const char *)base + t[i].offset;
        char key[128];
        if (!t[i].stored) continue;
        ocr_ex_setting_key(&t[i], prefix, key, sizeof key);
        switch (t[i].type) {
        case OCR_EX_INT: case OCR_EX_BOOL: rc = ocr_ex_meta_add(m, key, "%d", *(const int *)v); break;
        case OCR_EX_INT64: rc = ocr_ex_meta_add(m, key, "%lld", (long long)*(const int64_t *)v); break;
        case OCR_EX_FLOAT: rc = ocr_ex_meta_add(m, key, "%.9g", (double)*(const float *)v); break;
        case OCR_EX_STRING: rc = ocr_ex_meta_add(m, key, "%s", *(const char *const *)v ? *(const char *const *)v : ""); break;
        }
    }
    return rc;
}

/* The stored settings back from a checkpoint's metadata: lookup(src, key) gives a value or NULL (e.g.
   ocr_safetensors_meta). Strings point into src's text, which must outlive them; "" gives NULL where the default is
   NULL. 0; or -1 with the reason in why (naming file, src's name, and the key) when a key is missing (and has no
   value for older checkpoints) or a value does not parse. Prints nothing: the metadata is a file's, as hostile as
   the command line (fuzz/fuzz_cli.c feeds it). */
OCR_EX_UNUSED static int ocr_ex_settings_from_meta(const char *prog, const char *file, const ocr_ex_setting *t, int n, void *base,
                                                   const char *prefix, const char *(*lookup)(const void *src, const char *key),
                                                   const void *src, char *why, size_t cap) {
    int i;
    for (i = 0; i < n; i++) {
        ocr_ex_flag f = ocr_ex_setting_flag(&t[i], base);
        char key[128];
        const char *v;
        if (!t[i].stored) continue;
        ocr_ex_setting_key(&t[i], prefix, key, sizeof key);
        v = lookup(src, key);
        if (!v) v = t[i].absent;
        if (!v) { snprintf(why, cap, "%s lacks '%s' in its metadata: not a %s checkpoint", file, key, prog); return -1; }
        if (f.type == OCR_EX_STRING && !t[i].def && !v[0]) { *(const char **)f.value = NULL; continue; }
        if (ocr_ex_flag_set(&f, v) != 0) {
            snprintf(why, cap, "%s has '%s' = '%.200s', not a valid value of %s", file, key, v, t[i].name);
            return -1;
        }
    }
    return 0;
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
OCR_EX_UNUSED static void ocr_ex_progress(FILE *f, long step, long total, double elapsed, const char *fields) {
    char eta[32], el[32];
    int width = 24, filled = total > 0 ? (int)((double)step / (double)total * width) : 0, i;
    double remaining = step > 0 ? elapsed / (double)step * (double)(total - step) : 0.0;
    fprintf(f, "\r[");
    for (i = 0; i < width; i++) fputc(i < filled ? '#' : '.', f);
    fprintf(f, "] %ld/%ld %s %s eta %s \033[K", step, total, fields, ocr_ex_duration(elapsed, el, sizeof el),
            ocr_ex_duration(remaining, eta, sizeof eta));
    fflush(f);
}

/* ---------------------------------------------------------------- per-image outputs */

/* File name without directory and last extension: what an image's outputs are named after. */
OCR_EX_UNUSED static void ocr_ex_stem(const char *path, char *out, size_t cap) {
    const char *base = strrchr(path, '/'), *dot;
    base = base ? base + 1 : path;
    dot = strrchr(base, '.');
    snprintf(out, cap, "%.*s", (int)(dot && dot != base ? (size_t)(dot - base) : strlen(base)), base);
}

/* 1 when no two of the n paths share a stem (their outputs would overwrite each other's), else says which and 0. */
OCR_EX_UNUSED static int ocr_ex_unique_stems(const char *prog, char *const *paths, int n) {
    char stem[1024], other[1024];
    int i, j;
    for (i = 0; i < n; i++)
        for (j = 0; j < i; j++) {
            ocr_ex_stem(paths[i], stem, sizeof stem);
            ocr_ex_stem(paths[j], other, sizeof other);
            if (strcmp(stem, other) == 0) {
                fprintf(stderr, "%s: '%s' and '%s' would both write outputs named '%s'; run them separately\n", prog, paths[j], paths[i],
                        stem);
                return 0;
            }
        }
    return 1;
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

/* A polygon that stays legible on any background and size: a dark outline under a bright line that thickens with
   the image. */
OCR_EX_UNUSED static void ocr_ex_polygon_legible(unsigned char *rgb, int w, int h, const ocr_point *pts, int n,
                                                 const unsigned char color[3]) {
    static const unsigned char dark[3] = {0, 0, 0};
    int thickness = 3 + 2 * ((w < h ? w : h) / 500);
    ocr_ex_polygon(rgb, w, h, pts, n, dark, thickness + 4);
    ocr_ex_polygon(rgb, w, h, pts, n, color, thickness);
}

/* ---------------------------------------------------------------- run directories (the trainers) */

#include <fcntl.h>
#include <signal.h>
#include <sys/file.h>

/* Set by ocr_ex_on_signal (SIGINT, SIGTERM): the trainers finish the step, save and stop. */
static volatile sig_atomic_t ocr_ex_stop;
OCR_EX_UNUSED static void ocr_ex_on_signal(int sig) { (void)sig; ocr_ex_stop = 1; }

/* Holds DIR/.lock for the process's lifetime (the descriptor stays open), writing "pid on host" into it; exits naming
   the holder when another process has it. */
OCR_EX_UNUSED static void ocr_ex_lock_run_dir(const char *prog, const char *run_dir) {
    char path[4096], host[256], text[512];
    int fd, len;
    snprintf(path, sizeof path, "%s/.lock", run_dir);
    fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (fd < 0) { fprintf(stderr, "%s: cannot lock the run directory: %s: %s\n", prog, path, strerror(errno)); exit(1); }
    if (flock(fd, LOCK_EX | LOCK_NB) != 0) {
        ssize_t n = read(fd, text, sizeof text - 1);
        text[n > 0 ? n : 0] = 0;
        text[strcspn(text, "\n")] = 0;
        fprintf(stderr, "%s: %s is in use: process %s holds %s; one process trains in a run directory at a time\n", prog, run_dir,
                text[0] ? text : "(unknown)", path);
        exit(1);
    }
    if (gethostname(host, sizeof host) != 0) snprintf(host, sizeof host, "?");
    host[sizeof host - 1] = 0;
    len = snprintf(text, sizeof text, "%ld on %s\n", (long)getpid(), host);
    if (ftruncate(fd, 0) != 0 || write(fd, text, (size_t)len) != len) { /* the lock holds without its note */ }
}

/* Whether dir/name exists. */
OCR_EX_UNUSED static int ocr_ex_file_in(const char *dir, const char *name) {
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    return access(path, F_OK) == 0;
}

/* "state.<digits>.safetensors" or "state.<digits>.optim.safetensors" (a committed state's files): its generation, else
   -1. */
OCR_EX_UNUSED static int64_t ocr_ex_state_generation(const char *name) {
    const char *p = name + 6;
    int64_t g = 0;
    if (strncmp(name, "state.", 6) != 0 || *p < '0' || *p > '9') return -1;
    for (; *p >= '0' && *p <= '9' && g < ((int64_t)1 << 50); p++) g = g * 10 + (*p - '0');
    return strcmp(p, ".safetensors") == 0 || strcmp(p, ".optim.safetensors") == 0 ? g : -1;
}

/* dst becomes another name of src (a hard link renamed into place); without hard links, 1 and nothing changed. */
OCR_EX_UNUSED static int ocr_ex_link_over(const char *src, const char *dst) {
    char tmp[4200];
    snprintf(tmp, sizeof tmp, "%s.tmp.%ld", dst, (long)getpid());
    unlink(tmp);
    if (link(src, tmp) != 0) return 1;
    if (rename(tmp, dst) != 0) { unlink(tmp); return 1; }
    return 0;
}

#ifdef OCR_TENSOR_H
/* A file's size and CRC-32C (what state.json records of each file it commits). */
OCR_EX_UNUSED static int ocr_ex_file_digest(ocr_ctx *ctx, const char *path, size_t *size, uint32_t *crc) {
    unsigned char *bytes;
    int rc = ocr_read_file(ctx, path, (size_t)-1 >> 1, &bytes, size);
    if (rc) return rc;
    *crc = ocr_crc32c(0, bytes, *size);
    OCR_FREE(bytes);
    return OCR_OK;
}

/* state.json's field key: a count, or a plain file name in the run directory; exits naming the file otherwise. */
OCR_EX_UNUSED static void ocr_ex_manifest_field(const char *prog, const char *path, const char *text, const ocr_json_tok *toks,
                                                const char *key, int64_t *count, char *name, size_t cap) {
    int i = ocr_json_find(text, toks, 0, key);
    double v;
    if (i >= 0 && count && toks[i].type == OCR_JSON_NUMBER && ocr_json_number(text, &toks[i], &v) && v >= 0 && v < 9e15 && v == floor(v)) {
        *count = (int64_t)v;
        return;
    }
    if (i >= 0 && name && toks[i].type == OCR_JSON_STRING && ocr_json_string(text, &toks[i], name, cap) && name[0] && name[0] != '.' &&
        !strchr(name, '/'))
        return;
    fprintf(stderr, "%s: --resume: %s %s '%s' (expected %s)\n", prog, path, i < 0 ? "lacks" : "has a malformed", key,
            count ? "a count" : "a file name in the run directory");
    exit(1);
}

/* A number stored in a checkpoint's metadata; exits naming the file and key when it is missing, not a number or below
   min. */
OCR_EX_UNUSED static double ocr_ex_meta_number(const char *prog, const ocr_safetensors *st, const char *file, const char *key, double min) {
    const char *s = ocr_safetensors_meta(st, key);
    char *end = NULL;
    double v = 0;
    if (s) v = strtod(s, &end);
    if (!s || end == s || *end || !isfinite(v) || v < min) {
        fprintf(stderr, "%s: --resume: %s %s '%s'%s%s%s%s\n", prog, file, s ? "has a malformed" : "lacks", key, s ? " = '" : "", s ? s : "",
                s ? "' (expected a number)" : " in its metadata: not a checkpoint of ", s ? "" : prog);
        exit(1);
    }
    return v;
}

/* The run's committed state: state.json names state.<generation>.safetensors and .optim.safetensors with their sizes
   and CRC-32C; last.* are other names of them. The order of a commit: both files written in full (atomically), their
   digests taken, state.json replaced atomically, then last.* relinked; a kill at any point leaves the previous state
   or the new one whole. */
typedef struct {
    int64_t generation;            /* of the state on disk: 0 before the first commit (or a directory from before state.json) */
    int64_t step;                  /* state.json's */
    char weights[4096], optim[4096];
} ocr_ex_run_files;

/* Writes the model's two files; kill_point > 0 is the crash tests' point between them (0: none). copies: last.* on a
   file system without hard links. */
typedef void (*ocr_ex_write_state_fn)(void *user, ocr_ctx *ctx, const char *weights, const char *optim, int kill_point);

OCR_EX_UNUSED static void ocr_ex__state_die(const char *prog, ocr_ctx *ctx, const char *what) {
    fprintf(stderr, "%s: %s: %s\n", prog, what, ocr_ctx_last_error(ctx));
    exit(1);
}

/* Commits the state at step as generation rf->generation + 1 in format, then rf names it. kill (may be NULL) is
   called at points 1, 3, 4 and 5 of the commit for the crash tests (2 is the writer's). */
OCR_EX_UNUSED static void ocr_ex_state_commit(const char *prog, ocr_ctx *ctx, const char *run_dir, ocr_ex_run_files *rf, int64_t step,
                                              int format, ocr_ex_write_state_fn write, void *user, void (*kill)(int)) {
    ocr_ex_run_files next;
    char path[4096], text[2048], wname[64], oname[64];
    size_t wsize = 0, osize = 0;
    uint32_t wcrc = 0, ocrc = 0;
    int len;
    if (kill) kill(1);
    next.generation = rf->generation + 1;
    next.step = step;
    snprintf(wname, sizeof wname, "state.%06lld.safetensors", (long long)next.generation);
    snprintf(oname, sizeof oname, "state.%06lld.optim.safetensors", (long long)next.generation);
    snprintf(next.weights, sizeof next.weights, "%s/%s", run_dir, wname);
    snprintf(next.optim, sizeof next.optim, "%s/%s", run_dir, oname);
    write(user, ctx, next.weights, next.optim, 2);
    if (kill) kill(3);
    if (ocr_ex_file_digest(ctx, next.weights, &wsize, &wcrc) || ocr_ex_file_digest(ctx, next.optim, &osize, &ocrc))
        ocr_ex__state_die(prog, ctx, "reading the run's state back");
    len = snprintf(text, sizeof text,
                   "{\"format\":%d,\"generation\":%lld,\"step\":%lld,\"weights\":\"%s\",\"weights_bytes\":%llu,\"weights_crc32c\":%lu,"
                   "\"optim\":\"%s\",\"optim_bytes\":%llu,\"optim_crc32c\":%lu}\n",
                   format, (long long)next.generation, (long long)next.step, wname, (unsigned long long)wsize, (unsigned long)wcrc, oname,
                   (unsigned long long)osize, (unsigned long)ocrc);
    snprintf(path, sizeof path, "%s/state.json", run_dir);
    if (ocr_write_file_atomic(ctx, path, text, (size_t)len)) ocr_ex__state_die(prog, ctx, "committing the run's state (the previous one stays)");
    if (kill) kill(4);
    *rf = next;
    snprintf(path, sizeof path, "%s/last.safetensors", run_dir);
    if (ocr_ex_link_over(next.weights, path)) {
        char optim_path[4096];
        snprintf(optim_path, sizeof optim_path, "%s/last.optim.safetensors", run_dir);
        write(user, ctx, path, optim_path, 0); /* a file system without hard links: copies */
    } else {
        snprintf(path, sizeof path, "%s/last.optim.safetensors", run_dir);
        if (ocr_ex_link_over(next.optim, path)) {
            fprintf(stderr, "%s: cannot link %s to %s: %s\n", prog, path, next.optim, strerror(errno));
            exit(1);
        }
    }
    if (kill) kill(5);
}

/* The state --resume continues from: state.json's, its files checked against their sizes and CRC-32C; its format
   (1 to max_format) in *format. 1 when the directory has no state.json (the caller says what that means), else 0;
   anything wrong with it exits naming the file. */
OCR_EX_UNUSED static int ocr_ex_state_read(const char *prog, ocr_ctx *ctx, const char *run_dir, int max_format, ocr_ex_run_files *rf,
                                           int *format) {
    static const char *const which[2] = {"weights", "optim"};
    char path[4096], key[64], name[256];
    unsigned char *text = NULL;
    size_t n = 0;
    ocr_json_tok toks[64];
    int nt, f;
    int64_t fmt = 0, want_size, want_crc;
    memset(rf, 0, sizeof *rf);
    snprintf(path, sizeof path, "%s/state.json", run_dir);
    if (access(path, F_OK) != 0) return 1;
    if (ocr_read_file(ctx, path, 1 << 16, &text, &n)) ocr_ex__state_die(prog, ctx, "--resume");
    if (ocr_json_parse(ctx, (const char *)text, n, toks, 64, &nt) || toks[0].type != OCR_JSON_OBJECT)
        ocr_ex__state_die(prog, ctx, "--resume: state.json");
    ocr_ex_manifest_field(prog, path, (const char *)text, toks, "format", &fmt, NULL, 0);
    if (fmt < 1 || fmt > max_format) {
        fprintf(stderr, "%s: --resume: %s is in format %lld; this %s reads formats 1 to %d\n", prog, path, (long long)fmt, prog, max_format);
        exit(1);
    }
    *format = (int)fmt;
    ocr_ex_manifest_field(prog, path, (const char *)text, toks, "generation", &rf->generation, NULL, 0);
    ocr_ex_manifest_field(prog, path, (const char *)text, toks, "step", &rf->step, NULL, 0);
    for (f = 0; f < 2; f++) {
        size_t size;
        uint32_t crc;
        char *dst = f ? rf->optim : rf->weights;
        ocr_ex_manifest_field(prog, path, (const char *)text, toks, which[f], NULL, name, sizeof name);
        snprintf(key, sizeof key, "%s_bytes", which[f]);
        ocr_ex_manifest_field(prog, path, (const char *)text, toks, key, &want_size, NULL, 0);
        snprintf(key, sizeof key, "%s_crc32c", which[f]);
        ocr_ex_manifest_field(prog, path, (const char *)text, toks, key, &want_crc, NULL, 0);
        snprintf(dst, sizeof rf->weights, "%s/%s", run_dir, name);
        if (access(dst, F_OK) != 0) {
            fprintf(stderr, "%s: --resume: %s names %s, which is missing: %s\n", prog, path, dst, strerror(errno));
            exit(1);
        }
        if (ocr_ex_file_digest(ctx, dst, &size, &crc)) ocr_ex__state_die(prog, ctx, "reading the run's state back");
        if ((int64_t)size != want_size || (int64_t)crc != want_crc) {
            fprintf(stderr, "%s: --resume: %s has %llu bytes with CRC-32C %lu but %s says %lld bytes with %lld: changed since it was "
                            "saved\n", prog, dst, (unsigned long long)size, (unsigned long)crc, path, (long long)want_size, (long long)want_crc);
            exit(1);
        }
    }
    OCR_FREE(text);
    return 0;
}
#endif

#ifdef OCR_DBNET_H
/* The post-processing flags of detect, eval_dbnet and ocr, starting from ocr_post_config_default's values.
   OCR_EX_POST_FLAGS(f, "detector: ") lists them in a program's flag table. */
typedef struct {
    float thresh, box_thresh, unclip, split_thresh;
    const char *score;
    int poly;
} ocr_ex_post_flags;
#define OCR_EX_POST_FLAGS(f, prefix)                                                                                        \
    {"--poly", OCR_EX_BOOL, &(f).poly, prefix "polygons (approximated contours) instead of 4-point boxes"},                 \
    {"--thresh", OCR_EX_FLOAT, &(f).thresh, prefix "a pixel is text when its probability exceeds this"},                    \
    {"--box-thresh", OCR_EX_FLOAT, &(f).box_thresh, prefix "detections whose score is lower are dropped"},                  \
    {"--score", OCR_EX_STRING, &(f).score, prefix "a detection's score: its mean probability inside its contour (slow) or its rectangle (fast, official)"}, \
    {"--split-thresh", OCR_EX_FLOAT, &(f).split_thresh, prefix "a region holding several cores above this is split between them (0: off, official)"}, \
    {"--unclip", OCR_EX_FLOAT, &(f).unclip, prefix "unclip ratio; 0: the official 1.5 for boxes, 2.0 for polygons"}

OCR_EX_UNUSED static ocr_ex_post_flags ocr_ex_post_flags_default(void) {
    ocr_post_config c = ocr_post_config_default(OCR_POST_BOX);
    ocr_ex_post_flags f;
    f.thresh = c.thresh;
    f.box_thresh = (float)c.box_thresh;
    f.unclip = 0;
    f.split_thresh = c.split_thresh;
    f.score = c.score_mode == OCR_SCORE_SLOW ? "slow" : "fast";
    f.poly = 0;
    return f;
}

/* The config the flags give, or NULL with the reason for a usage error. */
OCR_EX_UNUSED static const char *ocr_ex_post_config(const ocr_ex_post_flags *f, ocr_post_config *out) {
    *out = ocr_post_config_default(f->poly ? OCR_POST_POLYGON : OCR_POST_BOX);
    if (strcmp(f->score, "slow") != 0 && strcmp(f->score, "fast") != 0) return "--score must be slow or fast";
    if (!(f->thresh >= 0 && f->thresh <= 1) || !(f->box_thresh >= 0 && f->box_thresh <= 1) || !(f->unclip >= 0) ||
        !(f->split_thresh == 0 || (f->split_thresh > f->thresh && f->split_thresh <= 1)))
        return "out of range: --thresh and --box-thresh must be in [0, 1], --unclip >= 0, --split-thresh 0 or above --thresh up to 1";
    out->thresh = f->thresh;
    out->box_thresh = f->box_thresh;
    out->split_thresh = f->split_thresh;
    out->score_mode = strcmp(f->score, "slow") == 0 ? OCR_SCORE_SLOW : OCR_SCORE_FAST;
    if (f->unclip > 0) out->unclip_ratio = f->unclip;
    return NULL;
}
#endif

#ifdef OCR_SYNTH_H
/* One line per font (photos: photograph) of s, "<sha256>  <file>\n" as sha256sum prints it, in the order s uses them. */
OCR_EX_UNUSED static char *ocr_ex_asset_list(const char *prog, const ocr_synth *s, int photos) {
    int n = photos ? ocr_synth_photo_count(s) : ocr_synth_font_count(s), i;
    size_t cap = 1, used = 0;
    char *text;
    for (i = 0; i < n; i++) cap += 64 + 2 + strlen(photos ? ocr_synth_photo_file(s, i) : ocr_synth_font_file(s, i)) + 1;
    if (!(text = (char *)malloc(cap))) { fprintf(stderr, "%s: out of memory\n", prog); exit(1); }
    text[0] = 0;
    for (i = 0; i < n; i++)
        used += (size_t)snprintf(text + used, cap - used, "%s  %s\n", photos ? ocr_synth_photo_sha256(s, i) : ocr_synth_font_sha256(s, i),
                                 photos ? ocr_synth_photo_file(s, i) : ocr_synth_font_file(s, i));
    return text;
}
#endif

/* ---------------------------------------------------------------- device */
#ifdef OCR_TENSOR_H
/* --device: "cpu", or "cuda" in a CUDA build (ocr_cuda_init, which says clearly when there is no usable GPU).
   Returns 0, else prints why and returns the exit status: 2 for a usage error (an unknown device, or cuda in a build
   without CUDA), 1 when the CUDA build finds no usable GPU. */
OCR_EX_UNUSED static int ocr_ex_set_device(ocr_ctx *ctx, const char *prog, const char *device) {
    if (strcmp(device, "cpu") == 0) return 0;
    if (strcmp(device, "cuda") != 0) {
        fprintf(stderr, "%s: --device must be cpu or cuda, not '%s'\n", prog, device);
        return 2;
    }
#ifdef OCR_CUDA
    if (ocr_cuda_init(ctx, 0) != OCR_OK) {
        fprintf(stderr, "%s: --device cuda: %s\n", prog, ocr_ctx_last_error(ctx));
        return 1;
    }
    fprintf(stderr, "%s: running on %s\n", prog, ocr_cuda_backend_name(ctx));
    return 0;
#else
    (void)ctx;
    fprintf(stderr, "%s: --device cuda: this CPU build has no CUDA backend; use the CUDA build (build/cuda/, made by ./build.sh "
                    "where nvcc is installed) or --device cpu\n", prog);
    return 2; /* a flag value this build cannot take: a usage error, like any other */
#endif
}

#ifdef OCR_NN_H
/* Where a program computes, for its start line: "N threads (GEMM kernel)" on the CPU, the CUDA backend on a GPU. */
OCR_EX_UNUSED static const char *ocr_ex_compute_name(ocr_ctx *ctx, char *buf, size_t size) {
#ifdef OCR_CUDA
    if (ctx->device == OCR_DEVICE_CUDA) {
        snprintf(buf, size, "%s", ocr_cuda_backend_name(ctx));
        return buf;
    }
#endif
    snprintf(buf, size, "%d threads (GEMM %s)", ctx->n_threads, ocr_gemm_kernel_name(ctx));
    return buf;
}
#endif

#endif

/* ---------------------------------------------------------------- datasets (needs ocr_data.h) */
#if defined(OCR_DATA_H)
#include <sys/stat.h>

OCR_EX_UNUSED static int ocr_ex_is_dir(const char *path) {
    struct stat st;
    return stat(path, &st) == 0 && S_ISDIR(st.st_mode);
}

/* 1 when spec names a dataset ocr_ex_open_dataset understands (checked before any work, for a usage error). */
OCR_EX_UNUSED static int ocr_ex_dataset_spec_ok(const char *spec) {
    return spec && ((strncmp(spec, "icdar:", 6) == 0 && spec[6] && spec[6] != ',') || (strncmp(spec, "lmdb:", 5) == 0 && spec[5]));
}

/* Opens a dataset named on the command line:
     lmdb:PATH              an LMDB in the standard layout (ocr_dataset_open_lmdb)
     icdar:IMAGES,GTS       images in IMAGES, ground truth in GTS (gt_<stem>.txt, <name>.txt or <stem>.txt)
     icdar:DIR              images in DIR/images (else DIR), ground truth in DIR/gts, else DIR/gt, else beside them */
OCR_EX_UNUSED static int ocr_ex_open_dataset(ocr_ctx *ctx, const char *spec, int gt_format, ocr_dataset *ds) {
    char images[4096], gts[4096];
    const char *rest, *comma;
    if (!ocr_ex_dataset_spec_ok(spec))
        return ocr_error(ctx, OCR_EINVAL, "dataset '%s': expected icdar:DIR, icdar:IMAGES,GTS or lmdb:PATH", spec ? spec : "");
    if (spec[0] == 'l') return ocr_dataset_open_lmdb(ctx, ds, spec + 5);
    rest = spec + 6;
    comma = strchr(rest, ',');
    if (comma) {
        snprintf(images, sizeof images, "%.*s", (int)(comma - rest), rest);
        snprintf(gts, sizeof gts, "%s", comma + 1);
    } else {
        snprintf(images, sizeof images, "%s/images", rest);
        if (!ocr_ex_is_dir(images)) snprintf(images, sizeof images, "%s", rest);
        snprintf(gts, sizeof gts, "%s/gts", rest);
        if (!ocr_ex_is_dir(gts)) snprintf(gts, sizeof gts, "%s/gt", rest);
        if (!ocr_ex_is_dir(gts)) snprintf(gts, sizeof gts, "%s", images);
    }
    return ocr_dataset_open_icdar(ctx, ds, images, gts, gt_format);
}
#endif

#endif
