/* fuzz/fuzz_cli.c - the example programs' command-line parser (examples/ocr_example.h) on any arguments, with
   train_dbnet's real flag table and checks, and train_dbnet's settings read back from a checkpoint's metadata.

   The input's first byte picks the mode; the rest is split at '\n' and NUL into at most 64 arguments:
     0  the arguments are train_dbnet's command line (its settings table, every flag it has), then its checks;
     1  the arguments go to a table with one flag of each type (int, int64, float, string, bool);
     2  the arguments are "key=value" metadata pairs of a checkpoint, read back as train_dbnet --resume reads them,
        then its checks.
   Checks: a parse gives a positional count whose arguments are the input's non-flag arguments in their order, or
   --help / --version, or a refusal with a reason; every number set is within its type (a float finite and within
   float's range); and accepted settings, written as checkpoint metadata (ocr_ex_settings_to_meta), read back to the
   same values (a writer never writes what its reader refuses). */
#include "ocr_fuzz.h"
#include <float.h>
#include <math.h>
#define main ocr_fuzz_cli_train_dbnet_main
#include "../examples/train_dbnet.c"
#undef main
int ocr_fuzz_cli_train_dbnet_main(int argc, char **argv);

enum { OCR_FUZZ_CLI_MAX_ARGS = 64 };

typedef struct {
    int n;
    const char *keys[OCR_FUZZ_CLI_MAX_ARGS], *values[OCR_FUZZ_CLI_MAX_ARGS];
} ocr_fuzz_cli_pairs;

static const char *ocr_fuzz_cli_pairs_get(const void *src, const char *key) {
    const ocr_fuzz_cli_pairs *p = (const ocr_fuzz_cli_pairs *)src;
    int i;
    for (i = 0; i < p->n; i++) if (strcmp(p->keys[i], key) == 0) return p->values[i];
    return NULL;
}

static const char *ocr_fuzz_cli_meta_get(const void *src, const char *key) {
    const ocr_ex_meta *m = (const ocr_ex_meta *)src;
    int i;
    for (i = 0; i < m->n; i++) if (strcmp(m->keys[i], key) == 0) return m->values[i];
    return NULL;
}

/* A float a flag may hold: 0, or finite with FLT_MIN <= |v| <= FLT_MAX. */
static int ocr_fuzz_cli_float_ok(float v) { return v == 0.0f || (isfinite(v) && fabsf(v) >= FLT_MIN && fabsf(v) <= FLT_MAX); }

/* The positional arguments parse_args moved to argv[1..npos] are the non-flag arguments of orig, in order. */
static int ocr_fuzz_cli_positionals(char **orig, int argc, char **argv, int rc) {
    int k, j = 1;
    if (rc > argc - 1) return ocr_fuzz_fail("cli", "%d positional arguments of %d", rc, argc - 1);
    for (k = 0; k < rc; k++) {
        while (j < argc && orig[j] != argv[1 + k]) j++;
        if (j == argc) return ocr_fuzz_fail("cli", "positional %d is not an argument given, or out of order", k);
        if (strncmp(orig[j], "--", 2) == 0 && strcmp(orig[j], "--") != 0)
            return ocr_fuzz_fail("cli", "positional %d ('%s') is a flag", k, orig[j]);
        j++;
    }
    return OCR_FUZZ_ACCEPTED;
}

/* The stored settings of a, written as metadata and read back into b, are a's. */
static int ocr_fuzz_cli_roundtrip(const train_args *a) {
    ocr_ex_meta *m = (ocr_ex_meta *)malloc(sizeof *m);
    train_args b;
    char why[512];
    int i, rc = OCR_FUZZ_ACCEPTED;
    if (!m) return OCR_FUZZ_REJECTED;
    ocr_ex_meta_init(m);
    if (ocr_ex_settings_to_meta(kSettings, N_SETTINGS, a, "train.", m) != 0) { free(m); return OCR_FUZZ_ACCEPTED; } /* too long to store */
    ocr_ex_settings_defaults(kSettings, N_SETTINGS, &b);
    if (ocr_ex_settings_from_meta("train_dbnet", "fuzz", kSettings, N_SETTINGS, &b, "train.", ocr_fuzz_cli_meta_get, m, why, sizeof why)) {
        free(m);
        return ocr_fuzz_fail("cli", "settings written as metadata are refused when read back: %s", why);
    }
    for (i = 0; i < N_SETTINGS && rc == OCR_FUZZ_ACCEPTED; i++) {
        const char *pa = (const char *)a + kSettings[i].offset, *pb = (const char *)&b + kSettings[i].offset;
        if (!kSettings[i].stored) continue;
        switch (kSettings[i].type) {
        case OCR_EX_INT: case OCR_EX_BOOL:
            if (*(const int *)pa != *(const int *)pb) rc = ocr_fuzz_fail("cli", "%s: %d read back as %d", kSettings[i].name, *(const int *)pa, *(const int *)pb);
            break;
        case OCR_EX_INT64:
            if (*(const int64_t *)pa != *(const int64_t *)pb) rc = ocr_fuzz_fail("cli", "%s changed on the way back", kSettings[i].name);
            break;
        case OCR_EX_FLOAT:
            if (memcmp(pa, pb, sizeof(float)) != 0)
                rc = ocr_fuzz_fail("cli", "%s: %.9g read back as %.9g", kSettings[i].name, (double)*(const float *)pa, (double)*(const float *)pb);
            break;
        case OCR_EX_STRING: {
            /* "" and NULL are one value where the default is NULL (no file given) */
            const char *sa = *(const char *const *)pa, *sb = *(const char *const *)pb;
            if (strcmp(sa ? sa : "", sb ? sb : "") != 0 || (kSettings[i].def && !sb))
                rc = ocr_fuzz_fail("cli", "%s: '%s' read back as '%s'", kSettings[i].name, sa ? sa : "(null)", sb ? sb : "(null)");
            break;
        }
        }
    }
    free(m);
    return rc;
}

/* Every int, float and int64 of the table within its type's range. */
static int ocr_fuzz_cli_values(const ocr_ex_flag *flags, int n) {
    int i;
    for (i = 0; i < n; i++) {
        if (flags[i].type == OCR_EX_FLOAT && !ocr_fuzz_cli_float_ok(*(const float *)flags[i].value))
            return ocr_fuzz_fail("cli", "%s holds %g", flags[i].name, (double)*(const float *)flags[i].value);
        if (flags[i].type == OCR_EX_BOOL && *(const int *)flags[i].value != 0 && *(const int *)flags[i].value != 1)
            return ocr_fuzz_fail("cli", "bool %s holds %d", flags[i].name, *(const int *)flags[i].value);
    }
    return OCR_FUZZ_ACCEPTED;
}

static int ocr_fuzz_cli(const uint8_t *data, size_t size) {
    char *text, *args[OCR_FUZZ_CLI_MAX_ARGS + 1], *orig[OCR_FUZZ_CLI_MAX_ARGS + 1], why[96];
    ocr_ex_flag flags[N_SETTINGS > 5 ? N_SETTINGS : 5];
    train_args a;
    int mode, argc = 1, i, rc, res;
    size_t start, k;
    if (size < 1) return OCR_FUZZ_REJECTED;
    mode = data[0] % 3;
    text = (char *)malloc(size); /* the arguments, NUL-terminated in place of the separators */
    if (!text) return OCR_FUZZ_REJECTED;
    memcpy(text, data + 1, size - 1);
    text[size - 1] = '\0';
    args[0] = (char *)"prog";
    for (start = 0, k = 0; k < size && argc < OCR_FUZZ_CLI_MAX_ARGS; k++) {
        if (k == size - 1 || text[k] == '\n' || text[k] == '\0') {
            text[k] = '\0';
            if (k > start || k < size - 1) args[argc++] = text + start;
            start = k + 1;
        }
    }
    args[argc] = NULL;
    memcpy(orig, args, sizeof args);

    if (mode == 1) {
        int iv = 7, bv = 0;
        int64_t lv = 9;
        float fv = 0.5f;
        const char *sv = NULL;
        const ocr_ex_flag table[5] = {
            {"--int", OCR_EX_INT, &iv, "an int"}, {"--long", OCR_EX_INT64, &lv, "an int64"}, {"--float", OCR_EX_FLOAT, &fv, "a float"},
            {"--string", OCR_EX_STRING, &sv, "a string"}, {"--bool", OCR_EX_BOOL, &bv, "a bool"},
        };
        /* a reason buffer of varying size, down to none: the message is cut, never overrun */
        size_t cap = (size_t)(data[0] / 3) % (sizeof why + 1);
        rc = ocr_ex_parse_args(argc, args, table, 5, why, cap);
        res = ocr_fuzz_cli_values(table, 5);
        if (res == OCR_FUZZ_ACCEPTED && rc >= 0) res = ocr_fuzz_cli_positionals(orig, argc, args, rc);
        if (res == OCR_FUZZ_ACCEPTED && (rc == OCR_EX_PARSE_UNKNOWN || rc == OCR_EX_PARSE_BAD) && cap > 1 && !why[0])
            res = ocr_fuzz_fail("cli", "a refusal without a reason");
        if (res == OCR_FUZZ_ACCEPTED && cap && strlen(why) >= cap) res = ocr_fuzz_fail("cli", "the reason overran its buffer");
        if (res == OCR_FUZZ_ACCEPTED && sv && (sv < text || sv >= text + size)) res = ocr_fuzz_fail("cli", "a string flag points outside the arguments");
        free(text);
        return res == OCR_FUZZ_ACCEPTED && rc < 0 ? OCR_FUZZ_REJECTED : res;
    }

    ocr_ex_settings_defaults(kSettings, N_SETTINGS, &a);
    for (i = 0; i < N_SETTINGS; i++) flags[i] = ocr_ex_setting_flag(&kSettings[i], &a);
    if (mode == 0) {
        rc = ocr_ex_parse_args(argc, args, flags, N_SETTINGS, why, sizeof why);
        res = ocr_fuzz_cli_values(flags, N_SETTINGS);
        if (res == OCR_FUZZ_ACCEPTED && rc >= 0) res = ocr_fuzz_cli_positionals(orig, argc, args, rc);
        if (res == OCR_FUZZ_ACCEPTED && (rc == OCR_EX_PARSE_UNKNOWN || rc == OCR_EX_PARSE_BAD) && !why[0])
            res = ocr_fuzz_fail("cli", "a refusal without a reason");
    } else {
        ocr_fuzz_cli_pairs pairs;
        char reason[512];
        pairs.n = 0;
        for (i = 1; i < argc; i++) {
            char *eq = strchr(args[i], '=');
            if (!eq) continue;
            *eq = '\0';
            pairs.keys[pairs.n] = args[i];
            pairs.values[pairs.n++] = eq + 1;
        }
        rc = ocr_ex_settings_from_meta("train_dbnet", "fuzz.safetensors", kSettings, N_SETTINGS, &a, "train.", ocr_fuzz_cli_pairs_get,
                                       &pairs, reason, sizeof reason);
        res = ocr_fuzz_cli_values(flags, N_SETTINGS);
        if (res == OCR_FUZZ_ACCEPTED && rc != 0 && !reason[0]) res = ocr_fuzz_fail("cli", "metadata refused without a reason");
    }
    if (res == OCR_FUZZ_ACCEPTED && rc >= 0 && settings_problem(&a) == NULL) {
        res = ocr_fuzz_cli_roundtrip(&a);
        free(text);
        return res;
    }
    free(text);
    return res == OCR_FUZZ_ACCEPTED ? OCR_FUZZ_REJECTED : res;
}

OCR_FUZZ_ENTRY(cli)
