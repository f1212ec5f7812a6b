/* fuzz/fuzz_json.c - the JSON parser (ocr_tensor.h) and the token walkers, on any bytes.

   The input is the document. After a successful parse every token is visited: strings unescaped (and quoted back
   with ocr_json_quote, which must parse again to the same bytes), numbers converted, arrays and objects walked
   with ocr_json_child and ocr_json_find (each key of an object must find its own value), and the token tree's
   next/size links checked against each other. The parse is then repeated with one token too few, which must
   fail cleanly: the token array is allocated to the exact count, so a write past it is a sanitizer report. Each
   parse is also run without a context (ctx NULL), as the LMDB reader's label probe does. */
#include "ocr_fuzz.h"

/* Every key of object o must find a value, and the first key equal to it is the one found (the parser keeps
   duplicate keys; the safetensors reader refuses them itself). */
static int ocr_fuzz_json__object(const char *src, const ocr_json_tok *t, int o) {
    int i, k = o + 1;
    for (i = 0; i < t[o].size; i++) {
        char key[64];
        if (t[k].type != OCR_JSON_STRING) return ocr_fuzz_fail("json", "object %d key %d is not a string", o, i);
        /* the lookups walk the object from its start: the first 64 members only, or long objects take seconds */
        if (i < 64 && ocr_json_child(t, o, i) != k) return ocr_fuzz_fail("json", "ocr_json_child(%d, %d) is not the walked key", o, i);
        /* ocr_json_find compares raw bytes: keys without backslashes that fit are looked up. */
        if (i < 64 && t[k].end - t[k].start < (int64_t)sizeof key && !memchr(src + t[k].start, '\\', (size_t)(t[k].end - t[k].start)) &&
            !memchr(src + t[k].start, 0, (size_t)(t[k].end - t[k].start))) {
            int f, j, kk;
            memcpy(key, src + t[k].start, (size_t)(t[k].end - t[k].start));
            key[t[k].end - t[k].start] = 0;
            f = ocr_json_find(src, t, o, key);
            for (j = 0, kk = o + 1; j < i; j++, kk = t[t[kk].next].next)
                if (ocr_json_streq(src, &t[kk], key)) break;
            if (f != t[kk].next) return ocr_fuzz_fail("json", "ocr_json_find(\"%s\") gave %d, not %d", key, f, t[kk].next);
        }
        k = t[t[k].next].next;
    }
    if (k != t[o].next) return ocr_fuzz_fail("json", "object %d: its members end at %d, its next is %d", o, k, t[o].next);
    return OCR_FUZZ_ACCEPTED;
}

static int ocr_fuzz_json__string(ocr_ctx *ctx, const char *src, const ocr_json_tok *tok) {
    size_t cap = (size_t)(tok->end - tok->start) + 1, qcap;
    char *s = (char *)malloc(cap), *q = NULL, *back = NULL;
    ocr_json_tok qt[2];
    int n = 0, rc = OCR_FUZZ_ACCEPTED;
    if (!s) return OCR_FUZZ_REJECTED;
    if (!ocr_json_string(src, tok, s, cap)) { free(s); return OCR_FUZZ_ACCEPTED; } /* \u0000 or a lone surrogate */
    /* The unescaped string never grows; it quotes back to JSON that parses to the same bytes. */
    if (strlen(s) >= cap) { free(s); return ocr_fuzz_fail("json", "unescaped string longer than its source"); }
    q = (char *)calloc(1, 1);
    qcap = q ? ocr_json_quote(q, 1, s) : 0;
    free(q);
    q = (char *)calloc(1, qcap ? qcap : 1);
    back = (char *)malloc(cap);
    if (!q || !back) { free(s); free(q); free(back); return OCR_FUZZ_REJECTED; }
    if (ocr_json_quote(q, qcap, s) != qcap) rc = ocr_fuzz_fail("json", "ocr_json_quote needs a different size the second time");
    else if (ocr_json_parse(ctx, q, strlen(q), qt, 2, &n) || n != 1 || qt[0].type != OCR_JSON_STRING)
        rc = ocr_fuzz_fail("json", "ocr_json_quote wrote %s, which does not parse back: %s", q, ocr_ctx_last_error(ctx));
    else if (!ocr_json_string(q, &qt[0], back, cap) || strcmp(back, s) != 0)
        rc = ocr_fuzz_fail("json", "quoting and parsing back changes the string (%s)", q);
    free(s); free(q); free(back);
    return rc;
}

static int ocr_fuzz_json(const uint8_t *data, size_t size) {
    ocr_ctx ctx;
    ocr_json_tok *toks;
    char *src = ocr_fuzz_copy(data, size);
    int n = 0, i, rc, res = OCR_FUZZ_ACCEPTED, max_toks = (int)(size < 100000 ? size : 100000) + 1;
    if (!src) return OCR_FUZZ_REJECTED;
    ocr_ctx_init(&ctx, 1, 0);
    toks = (ocr_json_tok *)malloc((size_t)max_toks * sizeof *toks);
    if (!toks) { free(src); ocr_ctx_free(&ctx); return OCR_FUZZ_REJECTED; }
    rc = ocr_json_parse(&ctx, src, size, toks, max_toks, &n);
    {
        /* without a context (the LMDB reader probes labels so): the same answer, no message to write */
        int n0 = -1;
        if (ocr_json_parse(NULL, src, size, toks, max_toks, &n0) != rc || n0 != n) {
            res = ocr_fuzz_fail("json", "parsing without a context gives another result (%d tokens, not %d)", n0, n);
            goto done;
        }
    }
    if (rc) {
        if (n != 0) res = ocr_fuzz_fail("json", "failed parse left n_toks = %d", n);
        else if (!ocr_ctx_last_error(&ctx)[0]) res = ocr_fuzz_fail("json", "failed parse (%d) without a message", rc);
        else res = OCR_FUZZ_REJECTED;
        goto done;
    }
    if (n < 1 || n > max_toks) { res = ocr_fuzz_fail("json", "n_toks = %d of %d", n, max_toks); goto done; }
    if (toks[0].next != n) { res = ocr_fuzz_fail("json", "the root's subtree ends at %d, not %d", toks[0].next, n); goto done; }
    for (i = 0; i < n && res == OCR_FUZZ_ACCEPTED; i++) {
        const ocr_json_tok *t = &toks[i];
        double d;
        if (t->start < 0 || t->end < t->start || t->end > (int64_t)size || t->next <= i || t->next > n) {
            res = ocr_fuzz_fail("json", "token %d: range [%lld, %lld), next %d", i, (long long)t->start, (long long)t->end, t->next);
            break;
        }
        switch (t->type) {
        case OCR_JSON_STRING: res = ocr_fuzz_json__string(&ctx, src, t); break;
        case OCR_JSON_NUMBER:
            if (ocr_json_number(src, t, &d) && !isfinite(d)) res = ocr_fuzz_fail("json", "token %d: number %g accepted", i, d);
            break;
        case OCR_JSON_OBJECT: res = ocr_fuzz_json__object(src, toks, i); break;
        case OCR_JSON_ARRAY: {
            int k, e = i + 1;
            for (k = 0; k < t->size && res == OCR_FUZZ_ACCEPTED; k++, e = toks[e].next)
                if (k < 64 && ocr_json_child(toks, i, k) != e) res = ocr_fuzz_fail("json", "array %d: child %d is not token %d", i, k, e);
            if (res == OCR_FUZZ_ACCEPTED && e != t->next) res = ocr_fuzz_fail("json", "array %d: elements end at %d, next is %d", i, e, t->next);
            if (ocr_json_child(toks, i, t->size) != -1 || ocr_json_child(toks, i, -1) != -1)
                res = ocr_fuzz_fail("json", "array %d: a child outside [0, %d) was found", i, t->size);
            break;
        }
        default:
            if (t->size != 0 || t->next != i + 1) res = ocr_fuzz_fail("json", "scalar token %d has children", i);
        }
        if (t->type != OCR_JSON_OBJECT && ocr_json_find(src, toks, i, "a") != -1) res = ocr_fuzz_fail("json", "ocr_json_find in a non-object");
    }
    if (res == OCR_FUZZ_ACCEPTED) {
        /* Exactly one token too few: a clean refusal. */
        ocr_json_tok *few = (ocr_json_tok *)malloc((size_t)n * sizeof *few);
        int n2 = -1;
        if (few && n > 1 && ocr_json_parse(&ctx, src, size, few, n - 1, &n2) == OCR_OK)
            res = ocr_fuzz_fail("json", "%d tokens parsed into an array of %d", n, n - 1);
        free(few);
    }
done:
    free(toks);
    free(src);
    ocr_ctx_free(&ctx);
    return res;
}

OCR_FUZZ_ENTRY(json)
