/* fuzz/fuzz_safetensors.c - the safetensors reader (ocr_tensor.h) on any bytes, as a checkpoint or a model file.

   The input is the file. When ocr_safetensors_open_memory accepts it, every tensor is read (ocr_safetensors_read,
   and ocr_safetensors_read_into an F32 tensor when it is a float), found by name, every metadata key looked up,
   and the whole file written again with ocr_safetensors_serialize: the reader must accept what the writer writes
   and find the same tensors, bytes and metadata in it (writers never write what their readers refuse). */
#include "ocr_fuzz.h"

static int ocr_fuzz_safetensors__same(ocr_ctx *ctx, const ocr_safetensors *a, const ocr_tensor *ts, int n) {
    ocr_safetensors b;
    int i, res = OCR_FUZZ_ACCEPTED;
    unsigned char *buf = NULL;
    size_t size = 0;
    const ocr_tensor **ptrs = (const ocr_tensor **)malloc((size_t)(n ? n : 1) * sizeof *ptrs);
    if (!ptrs) return OCR_FUZZ_REJECTED;
    for (i = 0; i < n; i++) ptrs[i] = &ts[i];
    if (ocr_safetensors_serialize(ctx, ptrs, n, (const char *const *)a->meta_keys, (const char *const *)a->meta_values, a->n_meta,
                                  &buf, &size)) {
        free(ptrs);
        return ocr_fuzz_fail("safetensors", "the writer refuses what the reader accepted: %s", ocr_ctx_last_error(ctx));
    }
    free(ptrs);
    if (ocr_safetensors_open_memory(ctx, &b, buf, size)) {
        res = ocr_fuzz_fail("safetensors", "the reader refuses what the writer wrote: %s", ocr_ctx_last_error(ctx));
        OCR_FREE(buf);
        return res;
    }
    OCR_FREE(buf);
    if (b.n_entries != n || b.n_meta != a->n_meta) res = ocr_fuzz_fail("safetensors", "rewritten file: %d tensors and %d metadata pairs, not %d and %d",
                                                                       b.n_entries, b.n_meta, n, a->n_meta);
    for (i = 0; i < a->n_meta && res == OCR_FUZZ_ACCEPTED; i++) {
        const char *v = ocr_safetensors_meta(&b, a->meta_keys[i]);
        if (!v || strcmp(v, a->meta_values[i]) != 0) res = ocr_fuzz_fail("safetensors", "rewritten file: metadata key %d changed", i);
    }
    for (i = 0; i < n && res == OCR_FUZZ_ACCEPTED; i++) {
        int j = ocr_safetensors_find(&b, ts[i].name);
        const ocr_safetensors_entry *e = j >= 0 ? &b.entries[j] : NULL;
        if (!e || e->dtype != ts[i].dtype || !ocr_shape_equal(e->shape, ts[i].shape) || e->end - e->begin != ocr_tensor_bytes(&ts[i]) ||
            (e->end > e->begin && memcmp(b.bytes + b.data_start + e->begin, ts[i].data, e->end - e->begin) != 0))
            res = ocr_fuzz_fail("safetensors", "rewritten file: tensor '%s' differs", ts[i].name);
    }
    ocr_safetensors_close(&b);
    return res;
}

static int ocr_fuzz_safetensors(const uint8_t *data, size_t size) {
    ocr_ctx ctx;
    ocr_safetensors st;
    ocr_tensor *ts = NULL;
    int i, n_read = 0, res = OCR_FUZZ_ACCEPTED;
    ocr_ctx_init(&ctx, 1, 0);
    if (ocr_safetensors_open_memory(&ctx, &st, data, size)) {
        for (i = 0; i < (int)sizeof st; i++)
            if (((const unsigned char *)&st)[i]) { ocr_ctx_free(&ctx); return ocr_fuzz_fail("safetensors", "a refused file left state behind"); }
        ocr_ctx_free(&ctx);
        return OCR_FUZZ_REJECTED;
    }
    ts = (ocr_tensor *)calloc((size_t)(st.n_entries ? st.n_entries : 1), sizeof *ts);
    if (!ts) { ocr_safetensors_close(&st); ocr_ctx_free(&ctx); return OCR_FUZZ_REJECTED; }
    for (i = 0; i < st.n_entries && res == OCR_FUZZ_ACCEPTED; i++) {
        const ocr_safetensors_entry *e = &st.entries[i];
        if (ocr_safetensors_find(&st, e->name) != i) { res = ocr_fuzz_fail("safetensors", "tensor %d ('%s') is found at another index", i, e->name); break; }
        if (e->begin > e->end || e->end > st.size - st.data_start) { res = ocr_fuzz_fail("safetensors", "tensor '%s' reaches past the file", e->name); break; }
        if (ocr_safetensors_read(&ctx, &st, e->name, &ts[i])) { res = ocr_fuzz_fail("safetensors", "cannot read accepted tensor '%s': %s", e->name, ocr_ctx_last_error(&ctx)); break; }
        n_read++;
        if (ocr_tensor_bytes(&ts[i]) != e->end - e->begin) { res = ocr_fuzz_fail("safetensors", "tensor '%s' read with another size", e->name); break; }
        if (e->dtype == OCR_F32 || e->dtype == OCR_F16 || e->dtype == OCR_BF16) {
            ocr_tensor f;
            if (ocr_tensor_alloc(&ctx, &f, "f32", OCR_F32, OCR_DEVICE_CPU, e->shape) == OCR_OK) {
                if (ocr_safetensors_read_into(&ctx, &st, e->name, &f)) res = ocr_fuzz_fail("safetensors", "read_into F32 of '%s' failed: %s", e->name, ocr_ctx_last_error(&ctx));
                ocr_tensor_free(&f);
            }
        }
    }
    for (i = 0; i < st.n_meta && res == OCR_FUZZ_ACCEPTED; i++) {
        const char *v = ocr_safetensors_meta(&st, st.meta_keys[i]);
        if (!v) res = ocr_fuzz_fail("safetensors", "metadata key %d is not found", i);
    }
    if (res == OCR_FUZZ_ACCEPTED && ocr_safetensors_find(&st, "") != -1) res = ocr_fuzz_fail("safetensors", "a tensor with an empty name");
    if (res == OCR_FUZZ_ACCEPTED) res = ocr_fuzz_safetensors__same(&ctx, &st, ts, st.n_entries);
    for (i = 0; i < n_read; i++) ocr_tensor_free(&ts[i]);
    free(ts);
    ocr_safetensors_close(&st);
    ocr_ctx_free(&ctx);
    return res;
}

OCR_FUZZ_ENTRY(safetensors)
