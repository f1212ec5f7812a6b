/* safetensors in ocr_tensor.h: round trips of every dtype, the reference implementation's byte-exact vectors, a
   file PyTorch wrote (tests/fixtures/st/tiny_torch.safetensors, tools/make_st_fixtures.py) loads here, a file
   written here passes tools/check_st_torch.py (strict layout + torch load_state_dict(strict=True)), malformed
   files are refused with a reason, random mutations load or fail cleanly, and the atomic file helpers. */
/* ocr-c build: own implementation */
#define OCR_IMPLEMENTATION
#define _POSIX_C_SOURCE 200809L
#include <stdlib.h>
/* The library's allocations go through these, so a test can tell how much a refused open allocated (and so read). */
static size_t st_largest_alloc;
static void *st_malloc(size_t n) { if (n > st_largest_alloc) st_largest_alloc = n; return malloc(n); }
static void *st_realloc(void *p, size_t n) { if (n > st_largest_alloc) st_largest_alloc = n; return realloc(p, n); }
#define OCR_MALLOC(n) st_malloc(n)
#define OCR_REALLOC(p, n) st_realloc((p), (n))
#define OCR_FREE(p) free(p)
#include "ocr_tensor.h"
#include "ocr_test.h"
#include <dirent.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdint.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>


static char tmp_dir[64];

/* ---------------------------------------------------------------- the pattern shared with tools/check_st_torch.py */

static int st_name_key(const char *name) {
    int k = 0, j;
    for (j = 0; name[j]; j++) k = (k + (j + 1) * (unsigned char)name[j]) % 1009;
    return k;
}

static int64_t st_base(const char *name, int64_t i) { return (i * 37 + (int64_t)st_name_key(name) * 11) % 101; }

/* The pattern value of element i as the tensor's dtype would store it. */
static double st_pattern(const char *name, ocr_dtype dt, int64_t i) {
    int64_t b = st_base(name, i);
    switch (dt) {
    case OCR_U8: return (double)(b * 2 + 3);
    case OCR_I32: return (double)((b - 50) * 40000001);
    case OCR_I64: return (double)((b - 50) * 1000000000039LL);
    default: return (double)(b - 50) / 64.0;
    }
}

static void st_fill(ocr_tensor *t) {
    int64_t i, n = ocr_tensor_numel(t);
    for (i = 0; i < n; i++) {
        if (t->dtype == OCR_I64) ((int64_t *)t->data)[i] = (st_base(t->name, i) - 50) * 1000000000039LL;
        else ocr_tensor_set(t, i, st_pattern(t->name, t->dtype, i));
    }
}

/* Number of elements that differ from the pattern (I64 compared exactly, beyond double precision). */
static int64_t st_mismatches(const ocr_tensor *t) {
    int64_t i, n = ocr_tensor_numel(t), bad = 0;
    for (i = 0; i < n; i++) {
        if (t->dtype == OCR_I64) bad += ((const int64_t *)t->data)[i] != (st_base(t->name, i) - 50) * 1000000000039LL;
        else bad += ocr_tensor_get(t, i) != st_pattern(t->name, t->dtype, i);
    }
    return bad;
}

/* TinyNet's state dict (tools/check_st_torch.py), in no particular order. */
typedef struct { const char *name; ocr_dtype dtype; int ndim; int64_t dim[4]; } st_spec;
static const st_spec tiny_net[] = {
    {"conv.weight", OCR_F32, 4, {4, 3, 3, 3}}, {"conv.bias", OCR_F32, 1, {4, 0, 0, 0}},
    {"bn.weight", OCR_F32, 1, {4, 0, 0, 0}}, {"bn.bias", OCR_F32, 1, {4, 0, 0, 0}},
    {"bn.running_mean", OCR_F32, 1, {4, 0, 0, 0}}, {"bn.running_var", OCR_F32, 1, {4, 0, 0, 0}},
    {"bn.num_batches_tracked", OCR_I64, 0, {0, 0, 0, 0}}, {"half_w", OCR_F16, 2, {2, 5, 0, 0}},
    {"bf16_w", OCR_BF16, 2, {3, 2, 0, 0}}, {"u8_w", OCR_U8, 1, {5, 0, 0, 0}}, {"i32_w", OCR_I32, 2, {2, 2, 0, 0}},
    {"empty_w", OCR_F32, 2, {0, 3, 0, 0}}, {"scale", OCR_F32, 0, {0, 0, 0, 0}}};
enum { TINY_N = sizeof tiny_net / sizeof tiny_net[0] };

static ocr_shape spec_shape(const st_spec *s) {
    ocr_shape sh;
    int d;
    memset(&sh, 0, sizeof sh);
    sh.ndim = s->ndim;
    for (d = 0; d < s->ndim; d++) sh.dim[d] = s->dim[d];
    return sh;
}

static int alloc_tiny(ocr_ctx *ctx, ocr_tensor *ts) {
    int i, rc;
    for (i = 0; i < TINY_N; i++) {
        if ((rc = ocr_tensor_alloc(ctx, &ts[i], tiny_net[i].name, tiny_net[i].dtype, OCR_DEVICE_CPU, spec_shape(&tiny_net[i]))))
            return rc;
        st_fill(&ts[i]);
    }
    return OCR_OK;
}

/* ---------------------------------------------------------------- file building helpers */

/* 8-byte length + header padded with spaces to a multiple of 8 + data. Caller frees. */
static unsigned char *make_file(const char *header, const void *data, size_t data_len, size_t *size) {
    size_t hlen = strlen(header), padded = (hlen + 7) & ~(size_t)7;
    unsigned char *b = (unsigned char *)malloc(8 + padded + data_len + 1);
    int i;
    for (i = 0; i < 8; i++) b[i] = (unsigned char)((uint64_t)padded >> (8 * i));
    memset(b + 8, ' ', padded);
    memcpy(b + 8, header, hlen);
    if (data_len) memcpy(b + 8 + padded, data, data_len);
    *size = 8 + padded + data_len;
    return b;
}

static void write_bytes(const char *path, const void *b, size_t n) {
    FILE *f = fopen(path, "wb");
    OCR_CHECK(f != NULL);
    if (!f) return;
    OCR_CHECK(fwrite(b, 1, n, f) == n);
    fclose(f);
}

/* ---------------------------------------------------------------- round trips */

static void test_roundtrip_all_dtypes(void) {
    static const st_spec specs[] = {
        {"f32", OCR_F32, 2, {2, 3, 0, 0}}, {"f16", OCR_F16, 1, {5, 0, 0, 0}}, {"bf16", OCR_BF16, 2, {3, 1, 0, 0}},
        {"u8", OCR_U8, 1, {7, 0, 0, 0}}, {"i32", OCR_I32, 2, {2, 2, 0, 0}}, {"i64", OCR_I64, 1, {3, 0, 0, 0}},
        {"scalar", OCR_F32, 0, {0, 0, 0, 0}}, {"empty", OCR_F32, 2, {0, 4, 0, 0}}, {"b_i32", OCR_I32, 1, {1, 0, 0, 0}},
        {"z_empty_i64", OCR_I64, 2, {2, 0, 0, 0}}, {"x4d", OCR_BF16, 4, {1, 2, 1, 3}},
        {"na\xc3\xafve \"quoted\" \\ name", OCR_U8, 1, {2, 0, 0, 0}}};
    enum { N = sizeof specs / sizeof specs[0] };
    /* the reference writer's order: I64 > F32 > I32 > BF16 > F16 > U8, then by name (bytes) */
    static const char *const order[N] = {"i64", "z_empty_i64", "empty", "f32", "scalar", "b_i32", "i32", "bf16", "x4d",
                                         "f16", "na\xc3\xafve \"quoted\" \\ name", "u8"};
    const char *mk[3] = {"format", "note", "empty"}, *mv[3] = {"pt", "tab\t nl\n \"q\" \\ \xc3\xa9 \xf0\x9f\x98\x80", ""};
    ocr_ctx ctx;
    ocr_tensor ts[N];
    const ocr_tensor *ptrs[N];
    unsigned char *buf = NULL;
    size_t size = 0, hlen = 0;
    ocr_safetensors st;
    char path[128];
    int i, pass;
    OCR_CHECK_OK(&ctx, ocr_ctx_init(&ctx, 1, 1));
    for (i = 0; i < N; i++) {
        OCR_CHECK_OK(&ctx, ocr_tensor_alloc(&ctx, &ts[i], specs[i].name, specs[i].dtype, OCR_DEVICE_CPU, spec_shape(&specs[i])));
        st_fill(&ts[i]);
        ptrs[i] = &ts[i];
    }
    OCR_CHECK_OK(&ctx, ocr_safetensors_serialize(&ctx, ptrs, N, mk, mv, 3, &buf, &size));
    if (!buf) { ocr_ctx_free(&ctx); return; }
    for (i = 0; i < 8; i++) hlen |= (size_t)buf[i] << (8 * i);
    OCR_CHECK(hlen % 8 == 0 && 8 + hlen <= size);
    OCR_CHECK(memcmp(buf + 8, "{\"__metadata__\":{\"format\":\"pt\",\"note\":\"tab\\t nl\\n \\\"q\\\" \\\\ \xc3\xa9", 49) == 0);
    snprintf(path, sizeof path, "%s/roundtrip.safetensors", tmp_dir);
    OCR_CHECK_OK(&ctx, ocr_safetensors_save(&ctx, path, ptrs, N, mk, mv, 3));
    for (pass = 0; pass < 2; pass++) {
        int order_ok = 1;
        if (pass == 0) OCR_CHECK_OK(&ctx, ocr_safetensors_open_memory(&ctx, &st, buf, size));
        else OCR_CHECK_OK(&ctx, ocr_safetensors_open(&ctx, &st, path));
        if (ctx.last_status) break;
        OCR_CHECK(st.size == size && st.data_start == 8 + hlen && (pass == 0 || memcmp(st.bytes, buf, size) == 0));
        OCR_CHECK(st.n_entries == N && st.n_meta == 3);
        OCR_CHECK(strcmp(ocr_safetensors_meta(&st, "format"), "pt") == 0 && strcmp(ocr_safetensors_meta(&st, "note"), mv[1]) == 0 &&
                  strcmp(ocr_safetensors_meta(&st, "empty"), "") == 0 && ocr_safetensors_meta(&st, "nope") == NULL);
        /* entries appear in the header in data order, and that order is the reference writer's */
        for (i = 0; i < N && i < st.n_entries; i++) {
            order_ok &= strcmp(st.entries[i].name, order[i]) == 0;
            if (i) order_ok &= st.entries[i].begin == st.entries[i - 1].end;
        }
        OCR_CHECK_MSG(order_ok, "pass %d: entries are not in the reference writer's order", pass);
        for (i = 0; i < N; i++) {
            ocr_tensor r;
            int k = ocr_safetensors_find(&st, specs[i].name);
            OCR_CHECK_MSG(k >= 0, "%s missing", specs[i].name);
            if (k < 0) continue;
            OCR_CHECK(st.entries[k].dtype == specs[i].dtype && ocr_shape_equal(st.entries[k].shape, spec_shape(&specs[i])));
            OCR_CHECK_OK(&ctx, ocr_safetensors_read(&ctx, &st, specs[i].name, &r));
            OCR_CHECK(r.dtype == specs[i].dtype && ocr_shape_equal(r.shape, ts[i].shape) && strcmp(r.name, specs[i].name) == 0);
            OCR_CHECK(memcmp(r.data, ts[i].data, ocr_tensor_bytes(&ts[i])) == 0 && st_mismatches(&r) == 0);
            ocr_tensor_free(&r);
        }
        OCR_CHECK(ocr_safetensors_find(&st, "nope") == -1);
        ocr_safetensors_close(&st);
        OCR_CHECK(st.bytes == NULL && st.entries == NULL);
    }
    free(buf);
    for (i = 0; i < N; i++) ocr_tensor_free(&ts[i]);
    ocr_ctx_free(&ctx);
}

static void test_read_into_and_lookup_errors(void) {
    ocr_ctx ctx;
    ocr_tensor w, h, ints, dst, r;
    const ocr_tensor *ptrs[3];
    unsigned char *buf = NULL;
    size_t size;
    ocr_safetensors st;
    int64_t i;
    OCR_CHECK_OK(&ctx, ocr_ctx_init(&ctx, 1, 1));
    OCR_CHECK_OK(&ctx, ocr_tensor_alloc(&ctx, &w, "w", OCR_F32, OCR_DEVICE_CPU, ocr_shape2(2, 3)));
    OCR_CHECK_OK(&ctx, ocr_tensor_alloc(&ctx, &h, "h", OCR_F16, OCR_DEVICE_CPU, ocr_shape2(2, 3)));
    OCR_CHECK_OK(&ctx, ocr_tensor_alloc(&ctx, &ints, "ints", OCR_I32, OCR_DEVICE_CPU, ocr_shape2(2, 3)));
    st_fill(&w); st_fill(&h); st_fill(&ints);
    ptrs[0] = &w; ptrs[1] = &h; ptrs[2] = &ints;
    OCR_CHECK_OK(&ctx, ocr_safetensors_serialize(&ctx, ptrs, 3, NULL, NULL, 0, &buf, &size));
    OCR_CHECK_OK(&ctx, ocr_safetensors_open_memory(&ctx, &st, buf, size));
    free(buf);
    if (ctx.last_status) { ocr_ctx_free(&ctx); return; }
    OCR_CHECK(st.n_meta == 0 && ocr_safetensors_meta(&st, "format") == NULL);
    /* F32 <-> F16/BF16 are converted on the way in */
    OCR_CHECK_OK(&ctx, ocr_tensor_alloc(&ctx, &dst, "dst", OCR_BF16, OCR_DEVICE_CPU, ocr_shape2(2, 3)));
    OCR_CHECK_OK(&ctx, ocr_safetensors_read_into(&ctx, &st, "w", &dst));
    for (i = 0; i < 6; i++) OCR_CHECK(ocr_tensor_get(&dst, i) == st_pattern("w", OCR_F32, i));
    ocr_tensor_free(&dst);
    OCR_CHECK_OK(&ctx, ocr_tensor_alloc(&ctx, &dst, "dst", OCR_F32, OCR_DEVICE_CPU, ocr_shape2(2, 3)));
    OCR_CHECK_OK(&ctx, ocr_safetensors_read_into(&ctx, &st, "h", &dst));
    for (i = 0; i < 6; i++) OCR_CHECK(ocr_tensor_get(&dst, i) == st_pattern("h", OCR_F16, i));
    EXPECT_ERR(&ctx, ocr_safetensors_read_into(&ctx, &st, "ints", &dst), OCR_EDTYPE, "ocr_safetensors_read_into", "'ints'", "I32",
               "F32");
    EXPECT_ERR(&ctx, ocr_safetensors_read_into(&ctx, &st, "nope", &dst), OCR_ENOTFOUND, "ocr_safetensors_read_into", "'nope'");
    ocr_tensor_free(&dst);
    OCR_CHECK_OK(&ctx, ocr_tensor_alloc(&ctx, &dst, "dst", OCR_F32, OCR_DEVICE_CPU, ocr_shape2(3, 2)));
    EXPECT_ERR(&ctx, ocr_safetensors_read_into(&ctx, &st, "w", &dst), OCR_ESHAPE, "ocr_safetensors_read_into", "'w'",
               "shape [2,3]", "'dst' (F32 [3,2], cpu)");
    {
        float dummy[6];
        ocr_tensor gpu = ocr_tensor_view("gpu", OCR_F32, OCR_DEVICE_CUDA, ocr_shape2(2, 3), dummy);
        EXPECT_ERR(&ctx, ocr_safetensors_read_into(&ctx, &st, "w", &gpu), OCR_EDEVICE, "ocr_safetensors_read_into", "'gpu'");
    }
    EXPECT_ERR(&ctx, ocr_safetensors_read(&ctx, &st, "missing", &r), OCR_ENOTFOUND, "ocr_safetensors_read", "'missing'");
    OCR_CHECK(r.data == NULL);
    ocr_tensor_free(&dst);
    ocr_safetensors_close(&st);
    ocr_safetensors_close(&st); /* closing twice is harmless */
    ocr_tensor_free(&w); ocr_tensor_free(&h); ocr_tensor_free(&ints);
    ocr_ctx_free(&ctx);
}

static void test_serialize_refusals(void) {
    ocr_ctx ctx;
    ocr_tensor a, b, c;
    const ocr_tensor *ptrs[2];
    unsigned char *buf = (unsigned char *)&ctx;
    size_t size = 5;
    float dummy[4];
    const char *k1[1] = {"k"}, *bad_v[1] = {"\xff"}, *bad_k[1] = {"\xc3"};
    OCR_CHECK_OK(&ctx, ocr_ctx_init(&ctx, 1, 1));
    OCR_CHECK_OK(&ctx, ocr_tensor_alloc(&ctx, &a, "same", OCR_F32, OCR_DEVICE_CPU, ocr_shape1(2)));
    OCR_CHECK_OK(&ctx, ocr_tensor_alloc(&ctx, &b, "same", OCR_U8, OCR_DEVICE_CPU, ocr_shape1(2)));
    ptrs[0] = &a; ptrs[1] = &b;
    EXPECT_ERR(&ctx, ocr_safetensors_serialize(&ctx, ptrs, 2, NULL, NULL, 0, &buf, &size), OCR_EINVAL, "ocr_safetensors_serialize",
               "two tensors are named", "'same'");
    OCR_CHECK(buf == NULL && size == 0);
    ocr_tensor_set_name(&b, "");
    EXPECT_ERR(&ctx, ocr_safetensors_serialize(&ctx, ptrs, 2, NULL, NULL, 0, &buf, &size), OCR_EINVAL, "needs a name");
    ocr_tensor_set_name(&b, "__metadata__");
    EXPECT_ERR(&ctx, ocr_safetensors_serialize(&ctx, ptrs, 2, NULL, NULL, 0, &buf, &size), OCR_EINVAL, "__metadata__");
    ocr_tensor_set_name(&b, "bad\xff" "name");
    EXPECT_ERR(&ctx, ocr_safetensors_serialize(&ctx, ptrs, 2, NULL, NULL, 0, &buf, &size), OCR_EINVAL, "ocr_safetensors_serialize",
               "not valid UTF-8");
    ocr_tensor_set_name(&b, "b");
    EXPECT_ERR(&ctx, ocr_safetensors_serialize(&ctx, ptrs, 2, k1, bad_v, 1, &buf, &size), OCR_EINVAL, "__metadata__",
               "not valid UTF-8");
    EXPECT_ERR(&ctx, ocr_safetensors_serialize(&ctx, ptrs, 2, bad_k, k1, 1, &buf, &size), OCR_EINVAL, "not valid UTF-8");
    {
        const char *dup_k[2] = {"k", "k"}, *dup_v[2] = {"1", "2"};
        EXPECT_ERR(&ctx, ocr_safetensors_serialize(&ctx, ptrs, 2, dup_k, dup_v, 2, &buf, &size), OCR_EINVAL,
                   "__metadata__ has the key 'k' twice");
    }
    EXPECT_ERR(&ctx, ocr_safetensors_serialize(&ctx, ptrs, -1, NULL, NULL, 0, &buf, &size), OCR_EINVAL, "negative");
    c = ocr_tensor_view("dev", OCR_F32, OCR_DEVICE_CUDA, ocr_shape1(4), dummy);
    ptrs[1] = &c;
    EXPECT_ERR(&ctx, ocr_safetensors_serialize(&ctx, ptrs, 2, NULL, NULL, 0, &buf, &size), OCR_EDEVICE, "ocr_safetensors_serialize",
               "'dev'", "cuda");
    ptrs[1] = NULL;
    EXPECT_ERR(&ctx, ocr_safetensors_serialize(&ctx, ptrs, 2, NULL, NULL, 0, &buf, &size), OCR_EINVAL, "NULL");
    /* a failed save leaves nothing behind */
    {
        char path[128];
        snprintf(path, sizeof path, "%s/refused.safetensors", tmp_dir);
        ptrs[1] = &c;
        OCR_CHECK(ocr_safetensors_save(&ctx, path, ptrs, 2, NULL, NULL, 0) == OCR_EDEVICE);
        OCR_CHECK(access(path, F_OK) != 0);
    }
    ocr_tensor_free(&a); ocr_tensor_free(&b);
    ocr_ctx_free(&ctx);
}

/* The reference implementation's own test vector, and its empty file. */
static void test_reference_vectors(void) {
    static const char hdr[] = "{\"attn.0\":{\"dtype\":\"F32\",\"shape\":[1,2,3],\"data_offsets\":[0,24]}}";
    unsigned char want[96], *buf = NULL;
    size_t size = 0;
    ocr_ctx ctx;
    ocr_tensor t, r;
    const ocr_tensor *ptrs[1];
    ocr_safetensors st;
    int i;
    OCR_CHECK(sizeof hdr - 1 == 64);
    memset(want, 0, 8);
    want[0] = 0x40;
    memcpy(want + 8, hdr, 64);
    for (i = 0; i < 6; i++) { /* little-endian floats 0..5, written byte by byte */
        float f = (float)i;
        uint32_t u;
        memcpy(&u, &f, 4);
        want[72 + 4 * i] = (unsigned char)u; want[73 + 4 * i] = (unsigned char)(u >> 8);
        want[74 + 4 * i] = (unsigned char)(u >> 16); want[75 + 4 * i] = (unsigned char)(u >> 24);
    }
    OCR_CHECK_OK(&ctx, ocr_ctx_init(&ctx, 1, 1));
    OCR_CHECK_OK(&ctx, ocr_tensor_alloc(&ctx, &t, "attn.0", OCR_F32, OCR_DEVICE_CPU, ocr_shape3(1, 2, 3)));
    for (i = 0; i < 6; i++) ((float *)t.data)[i] = (float)i;
    ptrs[0] = &t;
    OCR_CHECK_OK(&ctx, ocr_safetensors_serialize(&ctx, ptrs, 1, NULL, NULL, 0, &buf, &size));
    OCR_CHECK_MSG(size == 96 && buf && memcmp(buf, want, 96) == 0, "size %zu", size);
    free(buf);
    OCR_CHECK_OK(&ctx, ocr_safetensors_open_memory(&ctx, &st, want, 96));
    OCR_CHECK_OK(&ctx, ocr_safetensors_read(&ctx, &st, "attn.0", &r));
    OCR_CHECK(r.data && ocr_shape_equal(r.shape, ocr_shape3(1, 2, 3)) && ((float *)r.data)[5] == 5.0f);
    ocr_tensor_free(&r);
    ocr_safetensors_close(&st);
    /* no tensors, no metadata: "{}" padded to 8 */
    OCR_CHECK_OK(&ctx, ocr_safetensors_serialize(&ctx, ptrs, 0, NULL, NULL, 0, &buf, &size));
    OCR_CHECK(size == 16 && buf && memcmp(buf, "\x08\0\0\0\0\0\0\0{}      ", 16) == 0);
    free(buf);
    OCR_CHECK_OK(&ctx, ocr_safetensors_open_memory(&ctx, &st, "\x08\0\0\0\0\0\0\0{}      ", 16));
    OCR_CHECK(st.n_entries == 0 && st.n_meta == 0);
    ocr_safetensors_close(&st);
    /* other writers need not pad: a 2-byte header is fine, and so is whitespace before the object */
    OCR_CHECK_OK(&ctx, ocr_safetensors_open_memory(&ctx, &st, "\x02\0\0\0\0\0\0\0{}", 10));
    ocr_safetensors_close(&st);
    OCR_CHECK_OK(&ctx, ocr_safetensors_open_memory(&ctx, &st, "\x04\0\0\0\0\0\0\0 {} ", 12));
    ocr_safetensors_close(&st);
    ocr_tensor_free(&t);
    ocr_ctx_free(&ctx);
}

/* ---------------------------------------------------------------- PyTorch interoperability */

static void test_torch_written_file(void) {
    ocr_ctx ctx;
    ocr_safetensors st;
    int i;
    OCR_CHECK_OK(&ctx, ocr_ctx_init(&ctx, 1, 1));
    OCR_CHECK_OK(&ctx, ocr_safetensors_open(&ctx, &st, "tests/fixtures/st/tiny_torch.safetensors"));
    if (ctx.last_status) { ocr_ctx_free(&ctx); return; }
    OCR_CHECK(st.n_entries == TINY_N);
    OCR_CHECK(ocr_safetensors_meta(&st, "format") && strcmp(ocr_safetensors_meta(&st, "format"), "pt") == 0);
    for (i = 0; i < TINY_N; i++) {
        ocr_tensor r;
        int k = ocr_safetensors_find(&st, tiny_net[i].name);
        char sb[64];
        OCR_CHECK_MSG(k >= 0, "torch file lacks %s", tiny_net[i].name);
        if (k < 0) continue;
        OCR_CHECK_MSG(st.entries[k].dtype == tiny_net[i].dtype && ocr_shape_equal(st.entries[k].shape, spec_shape(&tiny_net[i])),
                      "%s: %s %s", tiny_net[i].name, ocr_dtype_name(st.entries[k].dtype),
                      ocr_shape_str(st.entries[k].shape, sb, sizeof sb));
        OCR_CHECK_OK(&ctx, ocr_safetensors_read(&ctx, &st, tiny_net[i].name, &r));
        OCR_CHECK_MSG(st_mismatches(&r) == 0, "%s: %lld values differ from the pattern", tiny_net[i].name, (long long)st_mismatches(&r));
        ocr_tensor_free(&r);
    }
    /* the BatchNorm counter is a 0-dim I64 of 8 bytes, beyond float precision */
    i = ocr_safetensors_find(&st, "bn.num_batches_tracked");
    OCR_CHECK(i >= 0 && st.entries[i].shape.ndim == 0 && st.entries[i].end - st.entries[i].begin == 8);
    ocr_safetensors_close(&st);
    ocr_ctx_free(&ctx);
}

/* Runs tools/check_st_torch.py; its exit status, or -1 when it could not run. */
static int run_torch_check(const char *args) {
    char cmd[1200];
    int status;
    snprintf(cmd, sizeof cmd, "/usr/bin/python3 tools/check_st_torch.py %s 2>&1", args);
    fflush(stdout);
    status = system(cmd);
    if (status == -1 || !WIFEXITED(status)) return -1;
    return WEXITSTATUS(status);
}

/* Writes TinyNet's tensors (pattern values) with the metadata check_st_torch.py expects; which_missing >= 0
   leaves that tensor out. */
static void save_tiny(ocr_ctx *ctx, const char *path, ocr_tensor *ts, int which_missing) {
    static const char *const mk[3] = {"format", "writer", "note"};
    static const char *const mv[3] = {"pt", "ocr-c", "tab\t quote\" backslash\\ \xc3\xa9 \xf0\x9f\x98\x80"};
    const ocr_tensor *ptrs[TINY_N];
    int i, n = 0;
    for (i = 0; i < TINY_N; i++)
        if (i != which_missing) ptrs[n++] = &ts[i];
    OCR_CHECK_OK(ctx, ocr_safetensors_save(ctx, path, ptrs, n, mk, mv, 3));
}

static void test_torch_loads_ocr_file(void) {
    ocr_ctx ctx;
    ocr_tensor ts[TINY_N], saved;
    char good[128], bad_value[128], bad_scalar[128], bad_missing[128], bad_pad[128], args[1024];
    unsigned char *b = NULL, *padded;
    size_t n = 0, hlen = 0;
    int i, rc, nbt = -1, scale = -1;
    OCR_CHECK_OK(&ctx, ocr_ctx_init(&ctx, 1, 1));
    OCR_CHECK_OK(&ctx, alloc_tiny(&ctx, ts));
    for (i = 0; i < TINY_N; i++) {
        if (!strcmp(tiny_net[i].name, "bn.num_batches_tracked")) nbt = i;
        if (!strcmp(tiny_net[i].name, "scale")) scale = i;
    }
    snprintf(good, sizeof good, "%s/tiny_ocr.safetensors", tmp_dir);
    save_tiny(&ctx, good, ts, -1);
    /* negative controls: each must be refused, so the checker is shown able to fail */
    snprintf(bad_missing, sizeof bad_missing, "%s/bad_missing.safetensors", tmp_dir);
    save_tiny(&ctx, bad_missing, ts, scale); /* load_state_dict(strict=True) must refuse a missing key */
    snprintf(bad_value, sizeof bad_value, "%s/bad_value.safetensors", tmp_dir);
    ((float *)ts[0].data)[3] += 1.0f / 64;   /* one value one pattern step off */
    save_tiny(&ctx, bad_value, ts, -1);
    ((float *)ts[0].data)[3] -= 1.0f / 64;
    snprintf(bad_scalar, sizeof bad_scalar, "%s/bad_scalar.safetensors", tmp_dir);
    saved = ts[nbt];                          /* the BN counter as [1] instead of a 0-dim scalar */
    OCR_CHECK_OK(&ctx, ocr_tensor_reshape(&ctx, &saved, ocr_shape1(1), &ts[nbt]));
    save_tiny(&ctx, bad_scalar, ts, -1);
    ts[nbt] = saved;
    snprintf(bad_pad, sizeof bad_pad, "%s/bad_pad.safetensors", tmp_dir);
    OCR_CHECK_OK(&ctx, ocr_read_file(&ctx, good, (size_t)1 << 20, &b, &n));
    if (b) {                                  /* 8 more spaces of padding than the writer's rule */
        for (i = 0; i < 8; i++) hlen |= (size_t)b[i] << (8 * i);
        padded = (unsigned char *)malloc(n + 8);
        memcpy(padded, b, 8 + hlen);
        memset(padded + 8 + hlen, ' ', 8);
        memcpy(padded + 16 + hlen, b + 8 + hlen, n - 8 - hlen);
        padded[0] = (unsigned char)(hlen + 8);
        padded[1] = (unsigned char)((hlen + 8) >> 8);
        write_bytes(bad_pad, padded, n + 8);
        free(padded);
        free(b);
    }
    snprintf(args, sizeof args, "'%s' --expect-fail '%s' '%s' '%s' '%s'", good, bad_value, bad_scalar, bad_missing, bad_pad);
    rc = run_torch_check(args);
    OCR_CHECK_MSG(rc == 0, "tools/check_st_torch.py exited with %d (it needs /usr/bin/python3 with python3-torch, python3-numpy)",
                  rc);
    for (i = 0; i < TINY_N; i++) ocr_tensor_free(&ts[i]);
    ocr_ctx_free(&ctx);
}

/* ---------------------------------------------------------------- malformed files */

static const unsigned char data8[16] = {0, 0, 128, 63, 0, 0, 0, 64, 1, 2, 3, 4, 5, 6, 7, 8};

typedef struct { const char *header; size_t data_len; const char *why; } bad_header;

static void test_malformed(void) {
    static const bad_header bad[] = {
        {"{\"a\":", 8, "header is not valid JSON"},
        {"[1,2]", 0, "header is not a JSON object"},
        {"\"str\"", 0, "header is not a JSON object"},
        {"{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]},"
         "\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[4,8]}}", 8,
         "header has the key 'a' twice"},
        {"{\"a\":[1]}", 0, "entry 'a' is not an object"},
        {"{\"a\":{\"shape\":[2],\"data_offsets\":[0,8]}}", 8, "entry 'a' has no dtype string"},
        {"{\"a\":{\"dtype\":32,\"shape\":[2],\"data_offsets\":[0,8]}}", 8, "entry 'a' has no dtype string"},
        {"{\"a\":{\"dtype\":\"F64\",\"shape\":[1],\"data_offsets\":[0,8]}}", 8, "entry 'a' has dtype 'F64'"},
        {"{\"a\":{\"dtype\":\"f32\",\"shape\":[2],\"data_offsets\":[0,8]}}", 8, "has dtype 'f32'"},
        {"{\"a\":{\"dtype\":\"F32\",\"shape\":2,\"data_offsets\":[0,8]}}", 8, "entry 'a' has no shape array"},
        {"{\"a\":{\"dtype\":\"F32\",\"data_offsets\":[0,8]}}", 8, "entry 'a' has no shape array"},
        {"{\"a\":{\"dtype\":\"F32\",\"shape\":[-2],\"data_offsets\":[0,8]}}", 8, "not a non-negative integer"},
        {"{\"a\":{\"dtype\":\"F32\",\"shape\":[1.5],\"data_offsets\":[0,8]}}", 8, "not a non-negative integer"},
        {"{\"a\":{\"dtype\":\"F32\",\"shape\":[1e13],\"data_offsets\":[0,8]}}", 8, "below 2^40"},
        {"{\"a\":{\"dtype\":\"F32\",\"shape\":[\"2\"],\"data_offsets\":[0,8]}}", 8, "not a non-negative integer"},
        {"{\"a\":{\"dtype\":\"U8\",\"shape\":[1048576,1048576,2],\"data_offsets\":[0,8]}}", 8, "more than 2^40 elements"},
        {"{\"a\":{\"dtype\":\"U8\",\"shape\":[1,1,1,1,8],\"data_offsets\":[0,8]}}", 8, "has 5 dims; ocr-c tensors have at most 4"},
        {"{\"a\":{\"dtype\":\"F32\",\"shape\":[2]}}", 8, "entry 'a' needs data_offsets"},
        {"{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,4,8]}}", 8, "needs data_offsets"},
        {"{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[-8,0]}}", 8, "needs data_offsets"},
        {"{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8.5]}}", 8, "needs data_offsets"},
        {"{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":\"0-8\"}}", 8, "needs data_offsets"},
        {"{\"a\":{\"dtype\":\"F32\",\"shape\":[0],\"data_offsets\":[8,0]}}", 8, "has begin 8 after end 0"},
        {"{\"a\":{\"dtype\":\"F32\",\"shape\":[3],\"data_offsets\":[0,8]}}", 8, "needs 12 bytes but its data_offsets span 8"},
        {"{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
         "\"b\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[12,16]}}", 16,
         "starts at 12 but the previous data ends at 8 (gap)"},
        {"{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
         "\"b\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[4,12]}}", 12,
         "(overlap)"},
        {"{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[4,12]}}", 12, "starts at 4 but the previous data ends at 0 (gap)"},
        {"{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}", 4, "(truncated file)"},
        {"{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}", 12, "(trailing bytes)"},
        {"{}", 1, "(trailing bytes)"},
        {"{\"__metadata__\":\"pt\"}", 0, "__metadata__ is not an object"},
        {"{\"__metadata__\":{\"k\":1}}", 0, "__metadata__ values must be strings"},
        {"{\"__metadata__\":{\"k\":{\"nested\":\"x\"}}}", 0, "__metadata__ values must be strings"},
        {"{\"__metadata__\":{\"k\":\"\\ud800\"}}", 0, "lone surrogate"},
        {"{\"__metadata__\":{\"k\":\"a\\u0000\"}}", 0, "\\u0000"},
        {"{\"a\xff\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}", 8, "invalid UTF-8"},
        {"{\"a\\u0000b\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}", 8, "holds \\u0000"},
        {"{\"\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}", 8, "is empty"},
        {"{\"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\":"
         "{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}", 8, "longer than 95 bytes"},
        {"{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8],\"strides\":[1]}}", 8, "entry 'a' has an unknown field"},
        {"{\"a\":{\"dtype\":\"F32\",\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}", 8, "entry 'a' has the key 'dtype' twice"},
        {"{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}} x", 8, "trailing characters"},
        {"{\"a\n\":{}}", 0, "control character"},
        {"{\"__metadata__\":{\"k\":\"1\",\"k\":\"2\"}}", 0, "__metadata__ has the key 'k' twice"},
    };
    ocr_ctx ctx;
    ocr_safetensors st;
    unsigned char *b;
    size_t size;
    int i;
    OCR_CHECK_OK(&ctx, ocr_ctx_init(&ctx, 1, 1));
    for (i = 0; i < (int)(sizeof bad / sizeof bad[0]); i++) {
        int rc;
        b = make_file(bad[i].header, data8, bad[i].data_len, &size);
        rc = ocr_safetensors_open_memory(&ctx, &st, b, size);
        OCR_CHECK_MSG(rc == OCR_EFORMAT && strstr(ocr_ctx_last_error(&ctx), bad[i].why) &&
                      strstr(ocr_ctx_last_error(&ctx), "ocr_safetensors_open"),
                      "case %d (%s): rc %d, message \"%s\", expected \"%s\"", i, bad[i].header, rc, ocr_ctx_last_error(&ctx),
                      bad[i].why);
        OCR_CHECK(st.bytes == NULL && st.entries == NULL && st.n_entries == 0);
        free(b);
    }
    /* nesting beyond 64 containers */
    {
        char deep[256];
        int k, len = 0;
        len += sprintf(deep, "{\"__metadata__\":{\"k\":");
        for (k = 0; k < 70; k++) deep[len++] = '[';
        for (k = 0; k < 70; k++) deep[len++] = ']';
        strcpy(deep + len, "}}");
        b = make_file(deep, data8, 0, &size);
        EXPECT_ERR(&ctx, ocr_safetensors_open_memory(&ctx, &st, b, size), OCR_EFORMAT, "header is not valid JSON",
                   "nesting deeper than 64");
        free(b);
    }
    /* the 8-byte length itself */
    EXPECT_ERR(&ctx, ocr_safetensors_open_memory(&ctx, &st, "\x02\0\0\0\0", 5), OCR_EFORMAT, "ocr_safetensors_open", "file has 5 bytes",
               "fewer than the 8-byte header length");
    EXPECT_ERR(&ctx, ocr_safetensors_open_memory(&ctx, &st, "", 0), OCR_EFORMAT, "file has 0 bytes");
    EXPECT_ERR(&ctx, ocr_safetensors_open_memory(&ctx, &st, "\xe8\x03\0\0\0\0\0\0{}      ", 16), OCR_EFORMAT,
               "header length 1000 runs past the end of the 16-byte file");
    EXPECT_ERR(&ctx, ocr_safetensors_open_memory(&ctx, &st, "\x01\xe1\xf5\x05\0\0\0\0{}      ", 16), OCR_EFORMAT,
               "header length 100000001 exceeds the 100000000-byte cap");
    EXPECT_ERR(&ctx, ocr_safetensors_open_memory(&ctx, &st, "\xff\xff\xff\xff\xff\xff\xff\xff{}      ", 16), OCR_EFORMAT,
               "exceeds the");
    EXPECT_ERR(&ctx, ocr_safetensors_open_memory(&ctx, &st, "\0\0\0\0\0\0\0\0{}", 10), OCR_EFORMAT, "header of 0 bytes");
    EXPECT_ERR(&ctx, ocr_safetensors_open_memory(&ctx, &st, "\x08\0\0\0\0\0\0\0{}\0\0\0\0\0\0", 16), OCR_EFORMAT,
               "header is not valid JSON");
    /* from a file: the reason and the path */
    {
        char path[128];
        snprintf(path, sizeof path, "%s/bad.safetensors", tmp_dir);
        b = make_file("{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}", data8, 12, &size);
        write_bytes(path, b, size);
        free(b);
        EXPECT_ERR(&ctx, ocr_safetensors_open(&ctx, &st, path), OCR_EFORMAT, "ocr_safetensors_open", "trailing bytes", path);
        snprintf(path, sizeof path, "%s/missing.safetensors", tmp_dir);
        EXPECT_ERR(&ctx, ocr_safetensors_open(&ctx, &st, path), OCR_EIO, "cannot open", path);
        EXPECT_ERR(&ctx, ocr_safetensors_open(&ctx, &st, tmp_dir), OCR_EIO, "not a regular file");
    }
    ocr_ctx_free(&ctx);
}

/* A sparse file of 1.5 GB (no disk used) whose first bytes are not a safetensors header, or whose header promises
   more data than the file holds, is refused after reading at most its header: the largest allocation stays small
   (reading the file whole took 1.5 GiB and seconds). */
static void sparse_file(const char *path, off_t size, const void *head, size_t head_len) {
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    OCR_CHECK(fd >= 0);
    if (fd < 0) return;
    OCR_CHECK(ftruncate(fd, size) == 0);
    OCR_CHECK(pwrite(fd, head, head_len, 0) == (ssize_t)head_len);
    close(fd);
}

static void test_header_checked_before_data(void) {
    const off_t big = (off_t)1536 * 1024 * 1024;
    char path[128];
    ocr_ctx ctx;
    ocr_safetensors st;
    unsigned char head[4096];
    size_t n;
    unsigned char *b;
    OCR_CHECK_OK(&ctx, ocr_ctx_init(&ctx, 1, 1));
    snprintf(path, sizeof path, "%s/garbage.safetensors", tmp_dir);
    /* garbage length: far past the cap */
    memcpy(head, "\x89PNG\r\n\x1a\n", 8);
    sparse_file(path, big, head, 8);
    st_largest_alloc = 0;
    EXPECT_ERR(&ctx, ocr_safetensors_open(&ctx, &st, path), OCR_EFORMAT, "exceeds the", path);
    OCR_CHECK_MSG(st_largest_alloc < ((size_t)1 << 20), "allocated %zu bytes to refuse a bad length", st_largest_alloc);
    /* a plausible length over bytes that are not JSON (zeros) */
    memcpy(head, "\xe8\x03\0\0\0\0\0\0", 8);
    sparse_file(path, big, head, 8);
    st_largest_alloc = 0;
    EXPECT_ERR(&ctx, ocr_safetensors_open(&ctx, &st, path), OCR_EFORMAT, "header is not valid JSON", path);
    OCR_CHECK_MSG(st_largest_alloc < ((size_t)1 << 20), "allocated %zu bytes to refuse a bad header", st_largest_alloc);
    /* a valid header whose one tensor (2e9 bytes) runs past the end of the 1.5 GB file */
    b = make_file("{\"a\":{\"dtype\":\"F32\",\"shape\":[500000000],\"data_offsets\":[0,2000000000]}}", NULL, 0, &n);
    OCR_CHECK(n <= sizeof head);
    memcpy(head, b, n);
    free(b);
    sparse_file(path, big, head, n);
    st_largest_alloc = 0;
    EXPECT_ERR(&ctx, ocr_safetensors_open(&ctx, &st, path), OCR_EFORMAT, "truncated file", path);
    OCR_CHECK_MSG(st_largest_alloc < ((size_t)1 << 20), "allocated %zu bytes to refuse a truncated file", st_largest_alloc);
    /* a file shorter than the 8-byte length, and a length that runs past the end */
    sparse_file(path, 5, "\x10\0\0\0\0", 5);
    EXPECT_ERR(&ctx, ocr_safetensors_open(&ctx, &st, path), OCR_EFORMAT, "fewer than the 8-byte header length", path);
    sparse_file(path, 20, "\x10\0\0\0\0\0\0\0{}", 10);
    EXPECT_ERR(&ctx, ocr_safetensors_open(&ctx, &st, path), OCR_EFORMAT, "runs past the end", path);
    /* the same tensor with its data present still loads, header first then data */
    {
        float v[3] = {1.5f, -2.0f, 0.25f};
        ocr_tensor t;
        b = make_file("{\"a\":{\"dtype\":\"F32\",\"shape\":[3],\"data_offsets\":[0,12]},\"__metadata__\":{\"k\":\"v\"}}", v, 12, &n);
        write_bytes(path, b, n);
        free(b);
        OCR_CHECK_OK(&ctx, ocr_safetensors_open(&ctx, &st, path));
        OCR_CHECK(st.size == n && st.n_entries == 1 && ocr_safetensors_meta(&st, "k") && !strcmp(ocr_safetensors_meta(&st, "k"), "v"));
        OCR_CHECK_OK(&ctx, ocr_safetensors_read(&ctx, &st, "a", &t));
        OCR_CHECK(t.data && memcmp(t.data, v, sizeof v) == 0);
        ocr_tensor_free(&t);
        ocr_safetensors_close(&st);
    }
    unlink(path);
    ocr_ctx_free(&ctx);
}

/* ---------------------------------------------------------------- fuzzing */

static void test_fuzz_mutations(void) {
    static const unsigned char interesting[] = {'"', '\\', '{', '}', '[', ']', ',', ':', '-', '0', '1', '9', 'e', '.', ' ',
                                                0, 0xff, 0xc3, 0x80};
    ocr_ctx ctx;
    ocr_tensor ts[TINY_N];
    const ocr_tensor *ptrs[TINY_N];
    const char *mk[1] = {"format"}, *mv[1] = {"pt"};
    unsigned char *valid = NULL, *m;
    size_t size = 0, hlen;
    ocr_rng rng;
    int iter, iters = 6000, i, loaded = 0, refused = 0, other = 0;
    OCR_CHECK_OK(&ctx, ocr_ctx_init(&ctx, 1, 1));
    OCR_CHECK_OK(&ctx, alloc_tiny(&ctx, ts));
    for (i = 0; i < TINY_N; i++) ptrs[i] = &ts[i];
    OCR_CHECK_OK(&ctx, ocr_safetensors_serialize(&ctx, ptrs, TINY_N, mk, mv, 1, &valid, &size));
    if (!valid) { ocr_ctx_free(&ctx); return; }
    hlen = 8 + (size_t)valid[0] + ((size_t)valid[1] << 8);
    m = (unsigned char *)malloc(size + 64);
    ocr_rng_seed(&rng, 2024);
    for (iter = 0; iter < iters; iter++) {
        size_t msize = size, k, n_edits = 1 + ocr_rng_below(&rng, 4);
        ocr_safetensors st;
        int rc, kind = (int)ocr_rng_below(&rng, 6);
        memcpy(m, valid, size);
        for (k = 0; k < n_edits; k++) {
            /* mostly inside the header, where the parser's decisions are */
            size_t at = ocr_rng_below(&rng, 4) ? ocr_rng_below(&rng, (uint32_t)hlen) : ocr_rng_below(&rng, (uint32_t)msize);
            if (kind == 0) m[at] ^= (unsigned char)(1u << ocr_rng_below(&rng, 8));
            else if (kind == 1) m[at] = interesting[ocr_rng_below(&rng, sizeof interesting)];
            else if (kind == 2) m[at] = (unsigned char)ocr_rng_below(&rng, 256);
            else if (kind == 3 && k == 0) msize = ocr_rng_below(&rng, (uint32_t)size); /* truncation */
            else if (kind == 4 && msize + 1 < size + 64) { /* insert a byte: shifts everything after it */
                memmove(m + at + 1, m + at, msize - at);
                m[at] = interesting[ocr_rng_below(&rng, sizeof interesting)];
                msize++;
            } else if (kind == 5) m[ocr_rng_below(&rng, 8)] = (unsigned char)ocr_rng_below(&rng, 256); /* the length */
        }
        rc = ocr_safetensors_open_memory(&ctx, &st, m, msize);
        if (rc == OCR_OK) {
            /* whatever was accepted must be readable entirely inside the buffer */
            for (i = 0; i < st.n_entries; i++) {
                ocr_tensor r;
                OCR_CHECK(st.entries[i].end <= st.size - st.data_start);
                if (ocr_safetensors_read(&ctx, &st, st.entries[i].name, &r) == OCR_OK) ocr_tensor_free(&r);
                else other++;
            }
            ocr_safetensors_close(&st);
            loaded++;
        } else if (rc == OCR_EFORMAT && strstr(ocr_ctx_last_error(&ctx), "ocr_safetensors_open: ")) {
            refused++;
        } else {
            if (other++ < 5) fprintf(stderr, "  mutation %d: rc %d: %s\n", iter, rc, ocr_ctx_last_error(&ctx));
        }
    }
    OCR_CHECK_MSG(other == 0, "%d mutations neither loaded nor failed with OCR_EFORMAT", other);
    OCR_CHECK_MSG(loaded > 50 && refused > iters / 2, "loaded %d, refused %d: the mutations do not exercise both paths", loaded,
                  refused);
    free(m);
    free(valid);
    for (i = 0; i < TINY_N; i++) ocr_tensor_free(&ts[i]);
    ocr_ctx_free(&ctx);
}

/* ---------------------------------------------------------------- files */

static int count_dir_entries(const char *dir, const char *containing) {
    DIR *d = opendir(dir);
    struct dirent *e;
    int n = 0;
    if (!d) return -1;
    while ((e = readdir(d)) != NULL) n += strstr(e->d_name, containing) != NULL;
    closedir(d);
    return n;
}

static void test_file_helpers(void) {
    ocr_ctx ctx;
    char path[256], longpath[5000], sub[128];
    unsigned char *b = NULL;
    size_t n = 0;
    OCR_CHECK_OK(&ctx, ocr_ctx_init(&ctx, 1, 1));
    snprintf(sub, sizeof sub, "%s/files", tmp_dir);
    OCR_CHECK(mkdir(sub, 0755) == 0);
    snprintf(path, sizeof path, "%s/ckpt.bin", sub);
    OCR_CHECK_OK(&ctx, ocr_write_file_atomic(&ctx, path, "first version", 13));
    OCR_CHECK_OK(&ctx, ocr_read_file(&ctx, path, 100, &b, &n));
    OCR_CHECK(n == 13 && b && memcmp(b, "first version", 13) == 0 && b[13] == 0);
    free(b);
    OCR_CHECK_OK(&ctx, ocr_write_file_atomic(&ctx, path, "v2", 2)); /* replaces, never appends */
    OCR_CHECK_OK(&ctx, ocr_read_file(&ctx, path, 100, &b, &n));
    OCR_CHECK(n == 2 && b && memcmp(b, "v2", 2) == 0);
    free(b);
    OCR_CHECK_OK(&ctx, ocr_write_file_atomic(&ctx, path, "", 0));
    OCR_CHECK_OK(&ctx, ocr_read_file(&ctx, path, 100, &b, &n));
    OCR_CHECK(n == 0 && b != NULL && b[0] == 0);
    free(b);
    /* no temporary file is left behind, and only the one file exists */
    OCR_CHECK(count_dir_entries(sub, ".tmp.") == 0 && count_dir_entries(sub, "ckpt") == 1);
    /* a relative path (no directory part) works too */
    {
        char cwd[4096];
        OCR_CHECK(getcwd(cwd, sizeof cwd) != NULL);
        OCR_CHECK(chdir(sub) == 0);
        OCR_CHECK_OK(&ctx, ocr_write_file_atomic(&ctx, "rel.bin", "r", 1));
        OCR_CHECK(chdir(cwd) == 0);
        OCR_CHECK(count_dir_entries(sub, "rel.bin") == 1 && count_dir_entries(sub, ".tmp.") == 0);
    }
    /* errors */
    snprintf(path, sizeof path, "%s/no/such/dir/x.bin", tmp_dir);
    EXPECT_ERR(&ctx, ocr_write_file_atomic(&ctx, path, "x", 1), OCR_EIO, "ocr_write_file_atomic", "cannot create", "no/such/dir");
    memset(longpath, 'a', sizeof longpath - 1);
    longpath[sizeof longpath - 1] = 0;
    EXPECT_ERR(&ctx, ocr_write_file_atomic(&ctx, longpath, "x", 1), OCR_EINVAL, "path too long");
    EXPECT_ERR(&ctx, ocr_write_file_atomic(&ctx, sub, "x", 1), OCR_EIO, "renaming"); /* a directory is in the way */
    OCR_CHECK(count_dir_entries(tmp_dir, ".tmp.") == 0);
    snprintf(path, sizeof path, "%s/ckpt.bin", sub);
    OCR_CHECK_OK(&ctx, ocr_write_file_atomic(&ctx, path, "0123456789", 10));
    EXPECT_ERR(&ctx, ocr_read_file(&ctx, path, 9, &b, &n), OCR_EOVERFLOW, "ocr_read_file", "has 10 bytes, more than the 9 allowed");
    OCR_CHECK(b == NULL && n == 0);
    OCR_CHECK_OK(&ctx, ocr_read_file(&ctx, path, 10, &b, &n));
    free(b);
    snprintf(path, sizeof path, "%s/absent.bin", sub);
    EXPECT_ERR(&ctx, ocr_read_file(&ctx, path, 100, &b, &n), OCR_EIO, "ocr_read_file", "cannot open", "absent.bin",
               "No such file");
    EXPECT_ERR(&ctx, ocr_read_file(&ctx, sub, (size_t)1 << 62, &b, &n), OCR_EIO, "ocr_read_file", "not a regular file");
    OCR_CHECK(b == NULL);
    ocr_ctx_free(&ctx);
}

static void remove_tree(const char *dir) {
    DIR *d = opendir(dir);
    struct dirent *e;
    char p[512];
    if (!d) return;
    while ((e = readdir(d)) != NULL) {
        struct stat sb;
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
        snprintf(p, sizeof p, "%s/%s", dir, e->d_name);
        if (lstat(p, &sb) == 0 && S_ISDIR(sb.st_mode)) remove_tree(p);
        else unlink(p);
    }
    closedir(d);
    rmdir(dir);
}

int main(int argc, char **argv) {
    int rc;
    ocr_test_init(argc, argv);
    strcpy(tmp_dir, "/tmp/ocr_test_st_XXXXXX");
    if (!mkdtemp(tmp_dir)) { perror("mkdtemp"); return 1; }
    OCR_TEST_RUN(test_roundtrip_all_dtypes);
    OCR_TEST_RUN(test_read_into_and_lookup_errors);
    OCR_TEST_RUN(test_serialize_refusals);
    OCR_TEST_RUN(test_reference_vectors);
    OCR_TEST_RUN(test_torch_written_file);
    OCR_TEST_RUN(test_torch_loads_ocr_file);
    OCR_TEST_RUN(test_malformed);
    OCR_TEST_RUN(test_header_checked_before_data);
    OCR_TEST_RUN(test_fuzz_mutations);
    OCR_TEST_RUN(test_file_helpers);
    rc = ocr_test_finish();
    remove_tree(tmp_dir);
    return rc;
}
