/* ocr_data.h [cache] and [loader]: the versioned cache (hits, a miss for every changed setting, corrupt and
   truncated entries detected and rebuilt), and the loader (identical batches for 1, 2 and 4 workers, order and
   augmentation set by (seed, epoch, index) only, a bad sample skipped and reported once, restart and shutdown in
   the middle of an epoch, cached transforms, a caller that holds every batch, workers niced without the caller). The reference is an in-memory
   dataset whose every pixel is known, and a serial re-computation of each batch. */
#define _POSIX_C_SOURCE 200809L
#define OCR_IMPLEMENTATION
#include "ocr_tensor.h"
#include "ocr_data.h"
#include "ocr_test.h"
#include <sys/resource.h>
#include <time.h>

static char g_tmp[256];

/* ---- cache */

static ocr_hash128 settings_hash(double shrink, int size, const char *norm) {
    ocr_hasher h;
    ocr_hasher_init(&h, 0);
    ocr_hasher_str(&h, "shrink_ratio"); ocr_hasher_f64(&h, shrink);
    ocr_hasher_str(&h, "size"); ocr_hasher_u64(&h, (uint64_t)size);
    ocr_hasher_str(&h, "norm"); ocr_hasher_str(&h, norm);
    return ocr_hasher_final(&h);
}

static void entry_path(const ocr_cache *c, ocr_hash128 key, char *path, size_t cap) {
    char hex[33];
    ocr_hash_hex(key, hex);
    snprintf(path, cap, "%s/%.2s/%s.ocrc", c->dir, hex, hex);
}

static void test_cache(void) {
    ocr_ctx ctx;
    ocr_cache c;
    ocr_tensor t, u;
    const ocr_tensor *list[2];
    ocr_safetensors e;
    ocr_hash128 content = ocr_hash("image+label bytes", 17), key, other;
    ocr_cache_stats st;
    char dir[300], path[2300];
    int i;
    ocr_ctx_init(&ctx, 1, 5);
    snprintf(dir, sizeof dir, "%s/cache", g_tmp);
    OCR_CHECK_OK(&ctx, ocr_cache_open(&ctx, &c, dir));
    OCR_CHECK_OK(&ctx, ocr_tensor_alloc(&ctx, &t, "gt", OCR_F32, OCR_DEVICE_CPU, ocr_shape3(1, 8, 8)));
    OCR_CHECK_OK(&ctx, ocr_tensor_fill_uniform(&ctx, &t, -1, 1));
    OCR_CHECK_OK(&ctx, ocr_tensor_alloc(&ctx, &u, "mask", OCR_U8, OCR_DEVICE_CPU, ocr_shape2(3, 5)));
    list[0] = &t;
    list[1] = &u;
    key = ocr_cache_key("dbnet-targets-v1", content, settings_hash(0.4, 640, "bgr-mean"));
    OCR_CHECK_ERR(&ctx, ocr_cache_get(&ctx, &c, key, &e), OCR_ENOTFOUND, "no entry");
    OCR_CHECK_OK(&ctx, ocr_cache_put(&ctx, &c, key, list, 2));
    OCR_CHECK_OK(&ctx, ocr_cache_get(&ctx, &c, key, &e));
    {
        ocr_tensor back;
        OCR_CHECK_OK(&ctx, ocr_safetensors_read(&ctx, &e, "gt", &back));
        OCR_CHECK(back.data && memcmp(back.data, t.data, ocr_tensor_bytes(&t)) == 0);
        OCR_CHECK(ocr_safetensors_find(&e, "mask") >= 0);
        ocr_tensor_free(&back);
        ocr_safetensors_close(&e);
    }
    /* Every input of the key, changed alone, must miss. */
    {
        ocr_hash128 variants[6];
        variants[0] = ocr_cache_key("dbnet-targets-v1", content, settings_hash(0.41, 640, "bgr-mean"));
        variants[1] = ocr_cache_key("dbnet-targets-v1", content, settings_hash(0.4, 736, "bgr-mean"));
        variants[2] = ocr_cache_key("dbnet-targets-v1", content, settings_hash(0.4, 640, "imagenet"));
        variants[3] = ocr_cache_key("dbnet-targets-v2", content, settings_hash(0.4, 640, "bgr-mean"));
        variants[4] = ocr_cache_key("dbnet-targets-v1", ocr_hash("image+label bytez", 17), settings_hash(0.4, 640, "bgr-mean"));
        variants[5] = ocr_cache_key("dbnet-targets-v1", content, settings_hash(0.4000000001, 640, "bgr-mean"));
        for (i = 0; i < 6; i++) {
            OCR_CHECK_MSG(!ocr_hash_equal(variants[i], key), "variant %d has the same key", i);
            OCR_CHECK_ERR(&ctx, ocr_cache_get(&ctx, &c, variants[i], &e), OCR_ENOTFOUND, "no entry");
        }
    }
    st = ocr_cache_get_stats(&c);
    OCR_CHECK(st.hits == 1 && st.misses == 7 && st.writes == 1 && st.corrupt == 0);
    /* Damage the entry: each flipped byte or truncation is detected, the entry removed, then rebuilt. */
    entry_path(&c, key, path, sizeof path);
    for (i = 0; i < 4; i++) {
        unsigned char *b;
        size_t n;
        OCR_CHECK_OK(&ctx, ocr_read_file(&ctx, path, 1 << 20, &b, &n));
        if (!b) break;
        if (i == 0) b[n / 2] ^= 0x10;                  /* payload */
        if (i == 1) b[n - 1] ^= 0x01;                  /* checksum */
        if (i == 2) b[9] ^= 0x01;                      /* format version */
        OCR_CHECK_OK(&ctx, ocr_write_file_atomic(&ctx, path, b, i == 3 ? n - 7 : n)); /* 3: truncated */
        free(b);
        OCR_CHECK_ERR(&ctx, ocr_cache_get(&ctx, &c, key, &e), OCR_ENOTFOUND, "unusable");
        OCR_CHECK_ERR(&ctx, ocr_cache_get(&ctx, &c, key, &e), OCR_ENOTFOUND, "no entry"); /* removed */
        OCR_CHECK_OK(&ctx, ocr_cache_put(&ctx, &c, key, list, 2));
        OCR_CHECK_OK(&ctx, ocr_cache_get(&ctx, &c, key, &e));
        ocr_safetensors_close(&e);
    }
    /* An entry copied under another key's name (a renamed file) is refused too. */
    other = ocr_cache_key("other", content, content);
    {
        char opath[2300], cmd[7200];
        entry_path(&c, other, opath, sizeof opath);
        snprintf(cmd, sizeof cmd, "mkdir -p $(dirname %s) && cp %s %s", opath, path, opath);
        OCR_CHECK(system(cmd) == 0);
        OCR_CHECK_ERR(&ctx, ocr_cache_get(&ctx, &c, other, &e), OCR_ENOTFOUND, "holds another key");
    }
    st = ocr_cache_get_stats(&c);
    OCR_CHECK_MSG(st.corrupt == 5 && st.writes == 5, "corrupt %lld writes %lld", (long long)st.corrupt, (long long)st.writes);
    ocr_tensor_free(&t);
    ocr_tensor_free(&u);
    ocr_cache_close(&c);
    ocr_ctx_free(&ctx);
}

/* ---- an in-memory dataset: sample i is an 8x6 image whose pixels encode i, with one polygon; chosen samples fail */

typedef struct { int64_t bad_index; int no_hash; } mem_ds;

static int mem_get(ocr_dataset *ds, ocr_ctx *ctx, int64_t index, unsigned flags, ocr_sample *out) {
    mem_ds *m = (mem_ds *)ds->impl;
    double xy[8];
    int rc, k;
    memset(out, 0, sizeof *out);
    snprintf(out->id, sizeof out->id, "mem-%lld", (long long)index);
    if (index == m->bad_index) return ocr_error(ctx, OCR_EFORMAT, "mem_get: sample %lld is broken on purpose", (long long)index);
    if (!(flags & OCR_SAMPLE_LABELS_ONLY)) {
        if ((rc = ocr_image_alloc(ctx, &out->image, 8, 6, 3))) return rc;
        for (k = 0; k < 8 * 6 * 3; k++) out->image.pixels[k] = (uint8_t)((index * 7 + k) & 0xff);
    } else {
        out->image.width = 8;
        out->image.height = 6;
    }
    out->polys = (ocr_polygon *)calloc(1, sizeof(ocr_polygon));
    out->polys[0].points = (ocr_point *)malloc(4 * sizeof(ocr_point));
    out->polys[0].n_points = 4;
    out->polys[0].text = (char *)malloc(32);
    snprintf(out->polys[0].text, 32, "w%lld", (long long)index);
    for (k = 0; k < 8; k++) xy[k] = (double)index + k;
    for (k = 0; k < 4; k++) { out->polys[0].points[k].x = (float)xy[2 * k]; out->polys[0].points[k].y = (float)xy[2 * k + 1]; }
    out->n_polys = 1;
    if (!m->no_hash) out->content_hash = ocr_hash(&index, sizeof index);
    return OCR_OK;
}

static void mem_open(ocr_dataset *ds, mem_ds *m, int64_t count, int64_t bad) {
    memset(ds, 0, sizeof *ds);
    m->bad_index = bad;
    m->no_hash = 0;
    ds->count = count;
    ds->impl = m;
    ds->get = mem_get;
    snprintf(ds->name, sizeof ds->name, "mem");
}

/* image = pixels/255 + uniform noise from rng (an "augmentation"); aux[0] = index, aux[1] = a normal draw */
static int noisy_transform(ocr_ctx *ctx, void *user, ocr_sample *s, int64_t index, ocr_rng *rng, ocr_tensor *fields) {
    float *img = (float *)fields[0].data, *aux = (float *)fields[1].data;
    int64_t i, n = ocr_tensor_numel(&fields[0]);
    int rc;
    (void)user;
    if ((rc = ocr_image_to_chw(ctx, &s->image, &fields[0]))) return rc;
    for (i = 0; i < n; i++) img[i] += 0.01f * ocr_rng_uniform(rng);
    aux[0] = (float)index;
    aux[1] = ocr_rng_normal(rng);
    s->polys[0].points[0].x += 1000.0f; /* the batch must carry the transformed polygons */
    return OCR_OK;
}

static ocr_loader_config base_config(int workers, int batch) {
    ocr_loader_config cfg = ocr_loader_config_default();
    cfg.n_workers = workers;
    cfg.batch_size = batch;
    cfg.seed = 99;
    cfg.n_fields = 2;
    cfg.field_names[0] = "image";
    cfg.field_shapes[0] = ocr_shape3(3, 6, 8);
    cfg.field_names[1] = "aux";
    cfg.field_shapes[1] = ocr_shape1(2);
    cfg.transform = noisy_transform;
    return cfg;
}

/* One epoch as a hash of every batch (sizes, indices, fields, polygons) in order. */
static ocr_hash128 run_epoch(ocr_ctx *ctx, ocr_loader *L, int64_t epoch, int64_t *n_batches, int64_t *n_samples, int check_aux) {
    ocr_hasher h;
    ocr_batch *b;
    ocr_hasher_init(&h, 0);
    *n_batches = *n_samples = 0;
    OCR_CHECK_OK(ctx, ocr_loader_start_epoch(ctx, L, epoch));
    for (;;) {
        int i, f;
        if (ocr_loader_next(ctx, L, &b) != OCR_OK) { OCR_CHECK_MSG(0, "%s", ocr_ctx_last_error(ctx)); break; }
        if (!b) break;
        OCR_CHECK(b->epoch == epoch && b->number >= *n_batches);
        ocr_hasher_u64(&h, (uint64_t)b->size);
        ocr_hasher_update(&h, b->indices, (size_t)b->size * sizeof(int64_t));
        for (f = 0; f < 2; f++) {
            OCR_CHECK(b->fields[f].shape.dim[0] == b->size);
            ocr_hasher_update(&h, b->fields[f].data, ocr_tensor_bytes(&b->fields[f]));
        }
        for (i = 0; i < b->size; i++) {
            OCR_CHECK(b->n_polys[i] == 1 && b->polys[i][0].points[0].x == 1000.0f + (float)b->indices[i]);
            if (check_aux) OCR_CHECK(((const float *)b->fields[1].data)[2 * i] == (float)b->indices[i]);
            ocr_hasher_str(&h, b->polys[i][0].text);
        }
        *n_batches += 1;
        *n_samples += b->size;
        ocr_loader_release(L, b);
    }
    return ocr_hasher_final(&h);
}

static int g_warnings;
static char g_last_warning[2048];
static void count_log(void *user, int level, const char *msg) {
    (void)user;
    if (level == OCR_LOG_WARN) { g_warnings++; snprintf(g_last_warning, sizeof g_last_warning, "%s", msg); }
}

static void test_loader_workers(void) {
    ocr_ctx ctx;
    ocr_dataset ds;
    mem_ds m;
    ocr_hash128 ref0 = {0, 0}, ref1 = {0, 0};
    int w, workers[3] = {1, 2, 4};
    ocr_ctx_init(&ctx, 1, 0);
    mem_open(&ds, &m, 103, -1);
    for (w = 0; w < 3; w++) {
        ocr_loader *L;
        ocr_loader_config cfg = base_config(workers[w], 8);
        int64_t nb, ns;
        ocr_hash128 e0, e1, again;
        if (w == 2) cfg.prefetch = 1; /* shallow queue: workers wait for the consumer */
        OCR_CHECK_OK(&ctx, ocr_loader_create(&ctx, &L, &ds, &cfg));
        if (!L) continue;
        e0 = run_epoch(&ctx, L, 0, &nb, &ns, 1);
        OCR_CHECK(nb == 13 && ns == 103);
        e1 = run_epoch(&ctx, L, 1, &nb, &ns, 1);
        again = run_epoch(&ctx, L, 0, &nb, &ns, 1);
        OCR_CHECK_MSG(ocr_hash_equal(e0, again), "%d workers: epoch 0 differs on a second run", workers[w]);
        OCR_CHECK_MSG(!ocr_hash_equal(e0, e1), "%d workers: epochs 0 and 1 are identical", workers[w]);
        if (w == 0) { ref0 = e0; ref1 = e1; }
        OCR_CHECK_MSG(ocr_hash_equal(e0, ref0) && ocr_hash_equal(e1, ref1), "%d workers: batches differ from 1 worker", workers[w]);
        {
            ocr_loader_progress p = ocr_loader_get_progress(L);
            OCR_CHECK(p.epoch == 0 && p.batches_total == 13 && p.batches_done == 13 && p.samples_done == 3 * 103 && p.samples_failed == 0);
        }
        ocr_loader_free(L);
    }
    /* drop_last and no shuffle: batch k is samples [8k, 8k+8) in order. */
    {
        ocr_loader *L;
        ocr_loader_config cfg = base_config(2, 8);
        ocr_batch *b;
        int64_t k = 0;
        cfg.shuffle = 0;
        cfg.drop_last = 1;
        OCR_CHECK_OK(&ctx, ocr_loader_create(&ctx, &L, &ds, &cfg));
        OCR_CHECK_OK(&ctx, ocr_loader_start_epoch(&ctx, L, 0));
        while (ocr_loader_next(&ctx, L, &b) == OCR_OK && b) {
            int i;
            OCR_CHECK(b->size == 8);
            for (i = 0; i < b->size; i++) OCR_CHECK(b->indices[i] == k * 8 + i);
            k++;
            ocr_loader_release(L, b);
        }
        OCR_CHECK(k == 12);
        ocr_loader_free(L);
    }
    ocr_ctx_free(&ctx);
}

/* Sample i of epoch e computed alone equals row r of the batch: the serial reference. */
static void test_loader_matches_serial(void) {
    ocr_ctx ctx;
    ocr_dataset ds;
    mem_ds m;
    ocr_loader *L;
    ocr_loader_config cfg = base_config(3, 5);
    ocr_batch *b;
    ocr_ctx_init(&ctx, 1, 0);
    mem_open(&ds, &m, 23, -1);
    OCR_CHECK_OK(&ctx, ocr_loader_create(&ctx, &L, &ds, &cfg));
    OCR_CHECK_OK(&ctx, ocr_loader_start_epoch(&ctx, L, 4));
    while (ocr_loader_next(&ctx, L, &b) == OCR_OK && b) {
        int i;
        for (i = 0; i < b->size; i++) {
            ocr_sample s;
            ocr_tensor f[2];
            float img[3 * 6 * 8], aux[2];
            ocr_rng rng;
            ocr_hasher h;
            f[0] = ocr_tensor_f32("image", ocr_shape3(3, 6, 8), img);
            f[1] = ocr_tensor_f32("aux", ocr_shape1(2), aux);
            /* The documented seed: hash(seed; epoch, index).lo */
            ocr_hasher_init(&h, cfg.seed);
            ocr_hasher_u64(&h, 4);
            ocr_hasher_u64(&h, (uint64_t)b->indices[i]);
            ocr_rng_seed(&rng, ocr_hasher_final(&h).lo);
            OCR_CHECK_OK(&ctx, ocr_dataset_get(&ctx, &ds, b->indices[i], 0, &s));
            OCR_CHECK_OK(&ctx, noisy_transform(&ctx, NULL, &s, b->indices[i], &rng, f));
            OCR_CHECK(memcmp(img, (const float *)b->fields[0].data + i * 144, sizeof img) == 0);
            OCR_CHECK(memcmp(aux, (const float *)b->fields[1].data + i * 2, sizeof aux) == 0);
            ocr_sample_free(&s);
        }
        ocr_loader_release(L, b);
    }
    ocr_loader_free(L);
    ocr_ctx_free(&ctx);
}

static int nan_transform(ocr_ctx *ctx, void *user, ocr_sample *s, int64_t index, ocr_rng *rng, ocr_tensor *fields) {
    int rc = noisy_transform(ctx, user, s, index, rng, fields);
    if (index == 5) ((float *)fields[0].data)[17] = NAN;
    return rc;
}

static void test_loader_bad_sample(void) {
    ocr_ctx ctx;
    ocr_dataset ds;
    mem_ds m;
    ocr_loader *L;
    ocr_loader_config cfg = base_config(2, 4);
    int64_t nb, ns;
    ocr_ctx_init(&ctx, 1, 0);
    ctx.log_fn = count_log;
    g_warnings = 0;
    mem_open(&ds, &m, 30, 17);
    cfg.transform = nan_transform;
    OCR_CHECK_OK(&ctx, ocr_loader_create(&ctx, &L, &ds, &cfg));
    run_epoch(&ctx, L, 0, &nb, &ns, 1);
    OCR_CHECK(nb == 8 && ns == 28);
    OCR_CHECK_MSG(g_warnings == 2, "%d warnings", g_warnings);
    run_epoch(&ctx, L, 1, &nb, &ns, 1);
    OCR_CHECK(ns == 28);
    OCR_CHECK_MSG(g_warnings == 2, "reported again: %d warnings, last: %s", g_warnings, g_last_warning);
    {
        ocr_loader_progress p = ocr_loader_get_progress(L);
        OCR_CHECK(p.samples_failed == 4 && p.samples_done == 56);
    }
    ocr_loader_free(L);
    /* The messages name the sample and the cause. */
    g_warnings = 0;
    mem_open(&ds, &m, 30, 17);
    cfg.transform = noisy_transform;
    OCR_CHECK_OK(&ctx, ocr_loader_create(&ctx, &L, &ds, &cfg));
    run_epoch(&ctx, L, 0, &nb, &ns, 1);
    OCR_CHECK(g_warnings == 1 && strstr(g_last_warning, "sample 17 of 'mem'") && strstr(g_last_warning, "broken on purpose"));
    ocr_loader_free(L);
    cfg.transform = nan_transform;
    g_warnings = 0;
    mem_open(&ds, &m, 30, -1);
    OCR_CHECK_OK(&ctx, ocr_loader_create(&ctx, &L, &ds, &cfg));
    run_epoch(&ctx, L, 0, &nb, &ns, 1);
    OCR_CHECK(g_warnings == 1 && strstr(g_last_warning, "sample 5 ") && strstr(g_last_warning, "'image'") && strstr(g_last_warning, "non-finite"));
    ocr_loader_free(L);
    /* Every sample failing: batches are skipped, the epoch ends. */
    mem_open(&ds, &m, 1, 0);
    cfg.batch_size = 1;
    OCR_CHECK_OK(&ctx, ocr_loader_create(&ctx, &L, &ds, &cfg));
    run_epoch(&ctx, L, 0, &nb, &ns, 1);
    OCR_CHECK(nb == 0 && ns == 0);
    ocr_loader_free(L);
    ocr_ctx_free(&ctx);
}

static void test_loader_shutdown(void) {
    ocr_ctx ctx;
    ocr_dataset ds;
    mem_ds m;
    int round;
    ocr_ctx_init(&ctx, 1, 0);
    mem_open(&ds, &m, 200, -1);
    for (round = 0; round < 6; round++) {
        ocr_loader *L;
        ocr_loader_config cfg = base_config(1 + round % 4, 4);
        ocr_batch *b = NULL, *held[8];
        int k, n_held = 0;
        OCR_CHECK_OK(&ctx, ocr_loader_create(&ctx, &L, &ds, &cfg));
        OCR_CHECK_ERR(&ctx, ocr_loader_next(&ctx, L, &b), OCR_ESTATE, "no epoch started");
        OCR_CHECK_OK(&ctx, ocr_loader_start_epoch(&ctx, L, 0));
        for (k = 0; k < round; k++) {
            OCR_CHECK_OK(&ctx, ocr_loader_next(&ctx, L, &b));
            if (b) ocr_loader_release(L, b);
        }
        if (round == 3) {
            /* Restart mid-epoch: the new epoch starts from its first batch. */
            int64_t nb, ns;
            run_epoch(&ctx, L, 2, &nb, &ns, 1);
            OCR_CHECK(nb == 50 && ns == 200);
        }
        if (round == 4) {
            /* Holding every buffer is an error, not a deadlock. */
            int rc = OCR_OK;
            while (n_held < 8 && (rc = ocr_loader_next(&ctx, L, &b)) == OCR_OK && b) held[n_held++] = b;
            OCR_CHECK_MSG(rc == OCR_ESTATE && strstr(ocr_ctx_last_error(&ctx), "release them"), "rc %d after holding %d", rc, n_held);
            for (k = 0; k < n_held; k++) ocr_loader_release(L, held[k]);
            OCR_CHECK_OK(&ctx, ocr_loader_next(&ctx, L, &b));
            OCR_CHECK(b != NULL);
        }
        ocr_loader_free(L); /* mid-epoch, workers busy or waiting */
    }
    ocr_ctx_free(&ctx);
}

static void test_loader_cache(void) {
    ocr_ctx ctx;
    ocr_dataset ds;
    mem_ds m;
    ocr_cache c;
    ocr_loader *L;
    ocr_loader_config cfg = base_config(2, 4);
    ocr_hash128 e0, e1;
    int64_t nb, ns;
    char dir[300];
    ocr_ctx_init(&ctx, 1, 0);
    snprintf(dir, sizeof dir, "%s/loader-cache", g_tmp);
    OCR_CHECK_OK(&ctx, ocr_cache_open(&ctx, &c, dir));
    mem_open(&ds, &m, 21, -1);
    cfg.cache = &c;
    cfg.cache_settings = settings_hash(0.4, 8, "none");
    OCR_CHECK_OK(&ctx, ocr_loader_create(&ctx, &L, &ds, &cfg));
    /* The transform's rng use makes epochs differ; with a cache the first epoch's values are served again. */
    e0 = run_epoch(&ctx, L, 0, &nb, &ns, 0);
    {
        ocr_loader_progress p = ocr_loader_get_progress(L);
        OCR_CHECK(p.cache_misses == 21 && p.cache_hits == 0);
    }
    e1 = run_epoch(&ctx, L, 0, &nb, &ns, 0);
    OCR_CHECK(ocr_hash_equal(e0, e1));
    {
        ocr_loader_progress p = ocr_loader_get_progress(L);
        ocr_cache_stats st = ocr_cache_get_stats(&c);
        OCR_CHECK_MSG(p.cache_hits == 21 && p.cache_misses == 21 && st.writes == 21, "hits %lld misses %lld writes %lld",
                      (long long)p.cache_hits, (long long)p.cache_misses, (long long)st.writes);
    }
    ocr_loader_free(L);
    /* A changed setting misses everything. */
    cfg.cache_settings = settings_hash(0.5, 8, "none");
    OCR_CHECK_OK(&ctx, ocr_loader_create(&ctx, &L, &ds, &cfg));
    run_epoch(&ctx, L, 3, &nb, &ns, 0);
    {
        ocr_loader_progress p = ocr_loader_get_progress(L);
        OCR_CHECK(p.cache_misses == 21 && p.cache_hits == 0);
    }
    ocr_loader_free(L);
    /* A source that cannot hash its samples (content_hash 0) is never cached: all would share one key. */
    m.no_hash = 1;
    OCR_CHECK_OK(&ctx, ocr_loader_create(&ctx, &L, &ds, &cfg));
    e0 = run_epoch(&ctx, L, 0, &nb, &ns, 0);
    e1 = run_epoch(&ctx, L, 1, &nb, &ns, 0);
    OCR_CHECK(!ocr_hash_equal(e0, e1));
    {
        ocr_loader_progress p = ocr_loader_get_progress(L);
        OCR_CHECK(p.cache_misses == 0 && p.cache_hits == 0);
    }
    ocr_loader_free(L);
    ocr_cache_close(&c);
    ocr_ctx_free(&ctx);
}

/* The caller's time waiting in ocr_loader_next is counted (what train_dbnet and train_rec log as "data wait"): a
   transform that sleeps 25 ms per sample makes the first batch of two wait at least the 50 ms of its samples; a batch
   already made when asked for adds almost nothing. */
static int slow_transform(ocr_ctx *ctx, void *user, ocr_sample *s, int64_t index, ocr_rng *rng, ocr_tensor *fields) {
    struct timespec t = {0, 25 * 1000 * 1000};
    nanosleep(&t, NULL);
    return noisy_transform(ctx, user, s, index, rng, fields);
}
static void test_loader_wait(void) {
    ocr_ctx ctx;
    ocr_dataset ds;
    mem_ds m;
    ocr_loader *L = NULL;
    ocr_loader_config cfg = base_config(1, 2);
    ocr_batch *b = NULL;
    ocr_loader_progress p;
    double before;
    ocr_ctx_init(&ctx, 1, 0);
    mem_open(&ds, &m, 8, -1);
    cfg.transform = slow_transform;
    OCR_CHECK_OK(&ctx, ocr_loader_create(&ctx, &L, &ds, &cfg));
    if (!L) { ocr_ctx_free(&ctx); return; }
    OCR_CHECK(ocr_loader_get_progress(L).wait_seconds == 0.0);
    OCR_CHECK_OK(&ctx, ocr_loader_start_epoch(&ctx, L, 0));
    OCR_CHECK_OK(&ctx, ocr_loader_next(&ctx, L, &b));
    OCR_CHECK(b != NULL);
    if (b) ocr_loader_release(L, b);
    p = ocr_loader_get_progress(L);
    OCR_CHECK_MSG(p.wait_seconds >= 0.04 && p.wait_seconds < 30.0, "waited %g s for a batch of two 25 ms samples", p.wait_seconds);
    before = p.wait_seconds;
    {
        struct timespec t = {0, 400 * 1000 * 1000}; /* the next batch (50 ms of work) is made meanwhile */
        nanosleep(&t, NULL);
    }
    OCR_CHECK_OK(&ctx, ocr_loader_next(&ctx, L, &b));
    OCR_CHECK(b != NULL);
    if (b) ocr_loader_release(L, b);
    p = ocr_loader_get_progress(L);
    OCR_CHECK_MSG(p.wait_seconds - before < 0.3, "waited %g s more for a batch made 400 ms before", p.wait_seconds - before);
    ocr_loader_free(L);
    ocr_ctx_free(&ctx);
}

static void test_loader_config_errors(void) {
    ocr_ctx ctx;
    ocr_dataset ds;
    mem_ds m;
    ocr_loader *L;
    ocr_loader_config cfg;
    ocr_ctx_init(&ctx, 1, 0);
    mem_open(&ds, &m, 5, -1);
    cfg = base_config(0, 4);
    OCR_CHECK_ERR(&ctx, ocr_loader_create(&ctx, &L, &ds, &cfg), OCR_ERANGE, "n_workers 0");
    cfg = base_config(1, 4);
    cfg.field_shapes[1] = ocr_shape4(1, 1, 1, 1);
    OCR_CHECK_ERR(&ctx, ocr_loader_create(&ctx, &L, &ds, &cfg), OCR_ESHAPE, "field 'aux' has per-sample shape [1,1,1,1]");
    cfg = base_config(1, 4);
    cfg.transform = NULL;
    OCR_CHECK_ERR(&ctx, ocr_loader_create(&ctx, &L, &ds, &cfg), OCR_EINVAL, "without a transform");
    /* Without a transform: the image, top-left, /255. */
    cfg.n_fields = 1;
    cfg.field_shapes[0] = ocr_shape3(3, 7, 9);
    OCR_CHECK_OK(&ctx, ocr_loader_create(&ctx, &L, &ds, &cfg));
    if (L) {
        ocr_batch *b;
        OCR_CHECK_OK(&ctx, ocr_loader_start_epoch(&ctx, L, 0));
        OCR_CHECK_OK(&ctx, ocr_loader_next(&ctx, L, &b));
        if (b) {
            const float *t = (const float *)b->fields[0].data;
            int64_t i0 = b->indices[0];
            OCR_CHECK(b->fields[0].shape.ndim == 4 && b->fields[0].shape.dim[1] == 3 && b->fields[0].shape.dim[3] == 9);
            OCR_CHECK(fabsf(t[0] - (float)((i0 * 7) & 0xff) / 255.0f) < 1e-7f && t[8] == 0.0f && t[6 * 9] == 0.0f);
            ocr_loader_release(L, b);
        }
        ocr_loader_free(L);
    }
    ocr_ctx_free(&ctx);
}

/* aux[0] = the nice value of the thread running the transform */
static int nice_transform(ocr_ctx *ctx, void *user, ocr_sample *s, int64_t index, ocr_rng *rng, ocr_tensor *fields) {
    (void)ctx; (void)user; (void)s; (void)index; (void)rng;
    ((float *)fields[1].data)[0] = (float)getpriority(PRIO_PROCESS, 0);
    return OCR_OK;
}

/* worker_nice lowers the workers' priority only (Linux: nice is per thread), by the amount asked, capped at 19. */
static void test_loader_worker_nice(void) {
    ocr_ctx ctx;
    ocr_dataset ds;
    mem_ds m;
    ocr_loader *L;
    ocr_loader_config cfg;
    ocr_batch *b;
    int base = getpriority(PRIO_PROCESS, 0), want = base + 7 > 19 ? 19 : base + 7, i;
    ocr_ctx_init(&ctx, 1, 0);
    mem_open(&ds, &m, 8, -1);
    cfg = base_config(2, 4);
    cfg.transform = nice_transform;
    cfg.worker_nice = 20;
    OCR_CHECK_ERR(&ctx, ocr_loader_create(&ctx, &L, &ds, &cfg), OCR_ERANGE, "worker_nice 20 outside 0..19");
    cfg.worker_nice = 7;
    OCR_CHECK_OK(&ctx, ocr_loader_create(&ctx, &L, &ds, &cfg));
    if (L) {
        OCR_CHECK_OK(&ctx, ocr_loader_start_epoch(&ctx, L, 0));
        while (ocr_loader_next(&ctx, L, &b) == OCR_OK && b) {
            for (i = 0; i < b->size; i++) OCR_CHECK(((const float *)b->fields[1].data)[2 * i] == (float)want);
            ocr_loader_release(L, b);
        }
        ocr_loader_free(L);
    }
    OCR_CHECK(getpriority(PRIO_PROCESS, 0) == base);
    ocr_ctx_free(&ctx);
}

int main(int argc, char **argv) {
    char cmd[300];
    ocr_test_init(argc, argv);
    snprintf(g_tmp, sizeof g_tmp, "/tmp/ocr_test_data_loader.XXXXXX");
    if (!mkdtemp(g_tmp)) { perror("mkdtemp"); return 1; }
    OCR_TEST_RUN(test_cache);
    OCR_TEST_RUN(test_loader_workers);
    OCR_TEST_RUN(test_loader_matches_serial);
    OCR_TEST_RUN(test_loader_bad_sample);
    OCR_TEST_RUN(test_loader_shutdown);
    OCR_TEST_RUN(test_loader_cache);
    OCR_TEST_RUN(test_loader_wait);
    OCR_TEST_RUN(test_loader_config_errors);
    OCR_TEST_RUN(test_loader_worker_nice);
    snprintf(cmd, sizeof cmd, "rm -rf %s", g_tmp);
    if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", g_tmp);
    return ocr_test_finish();
}
