/* repro_stale_cache - DBNet target maps cached under one target configuration and requested under another.

   A cache keyed by the sample alone (a file per sample id, the usual "if os.path.exists(cache_path): load") keeps
   serving the maps of the old configuration after shrink_ratio or the threshold range changed: training silently
   learns the old targets. ocr-c's cache (ocr_data.h: ocr_cache_*) keys an entry by ocr_cache_key(what, the sample's
   content hash, a hash of every setting the value depends on), so the changed configuration misses and the maps
   are rebuilt; going back to the old configuration finds its own, still valid, entry.

   With --dir the caches are kept, so a later run finds what an earlier one stored. Such entries are still valid (the
   key covers the configuration), so ocr-c's cache is expected to hit them: before the three runs a second handle on
   the same cache (its counters apart) looks up each configuration's entry, and the expected hits, misses and writes
   follow from what is already there.

       repro_stale_cache                                   shrink_ratio 0.4 -> 0.6, in a temporary directory
       repro_stale_cache --shrink-ratio 0.5 --thresh-max 0.8 --dir /tmp/cache_demo

   Exit status: 0 when ocr-c's cache misses exactly where it holds no entry for the configuration (and rebuilds),
   hits where it does, and serves the right maps for each; 1 otherwise; 2 bad flags. */
#define OCR_IMPLEMENTATION
#include "ocr_tensor.h"
#include "ocr_nn.h"
#include "ocr_loss.h"
#include "ocr_dbnet.h"
#include "ocr_data.h"
#include "ocr_example.h"
#include <sys/stat.h>

enum { H = 64, W = 96, N_MAPS = 4 };
static const char *const map_names[N_MAPS] = {"gt_shrink", "mask_shrink", "gt_thresh", "mask_thresh"};

/* The sample as a dataset stores it: its label bytes (the content hash covers them) and an id. */
static const char sample_id[] = "img_0001";
static const char sample_label[] =
    "[{\"points\": [[6, 8], [88, 8], [88, 30], [6, 30]], \"transcription\": \"HELLO\"},"
    " {\"points\": [[20, 38], [70, 40], [69, 58], [19, 56]], \"transcription\": \"world\"}]";

typedef struct { ocr_tensor t[N_MAPS]; } maps;

static int maps_alloc(ocr_ctx *ctx, maps *m) {
    int i, rc;
    for (i = 0; i < N_MAPS; i++)
        if ((rc = ocr_tensor_alloc(ctx, &m->t[i], map_names[i], OCR_F32, OCR_DEVICE_CPU, ocr_shape2(H, W)))) return rc;
    return OCR_OK;
}
static void maps_free(maps *m) { int i; for (i = 0; i < N_MAPS; i++) ocr_tensor_free(&m->t[i]); }

static int maps_compute(ocr_ctx *ctx, const ocr_dbnet_target_config *cfg, const ocr_polygon *polys, int n, maps *m) {
    return ocr_dbnet_targets(ctx, cfg, polys, n, &m->t[0], &m->t[1], &m->t[2], &m->t[3], NULL);
}

/* Pixels where a and b differ, over all four maps. */
static long maps_diff(const maps *a, const maps *b) {
    long d = 0;
    int i, j;
    for (i = 0; i < N_MAPS; i++)
        for (j = 0; j < H * W; j++) d += ((const float *)a->t[i].data)[j] != ((const float *)b->t[i].data)[j];
    return d;
}

static int maps_read(ocr_ctx *ctx, const ocr_safetensors *st, maps *m) {
    int i, rc;
    for (i = 0; i < N_MAPS; i++)
        if ((rc = ocr_safetensors_read_into(ctx, st, map_names[i], &m->t[i]))) return rc;
    return OCR_OK;
}

/* Every setting the maps depend on, and the map size. */
static ocr_hash128 settings_hash(const ocr_dbnet_target_config *cfg) {
    ocr_hasher h;
    ocr_hasher_init(&h, 0);
    ocr_hasher_f64(&h, cfg->shrink_ratio);
    ocr_hasher_f64(&h, cfg->min_text_size);
    ocr_hasher_f64(&h, cfg->thresh_min);
    ocr_hasher_f64(&h, cfg->thresh_max);
    ocr_hasher_u64(&h, H);
    ocr_hasher_u64(&h, W);
    return ocr_hasher_final(&h);
}

/* ---- the naive cache: one file per sample id ---- */
static int naive_get_or_build(ocr_ctx *ctx, const char *dir, const ocr_dbnet_target_config *cfg, const ocr_polygon *polys, int n,
                              maps *out, int *hit) {
    char path[4300];
    ocr_safetensors st;
    const ocr_tensor *ptrs[N_MAPS];
    int i, rc;
    struct stat sb;
    snprintf(path, sizeof path, "%s/%s.safetensors", dir, sample_id);
    *hit = stat(path, &sb) == 0;
    if (*hit) {
        if ((rc = ocr_safetensors_open(ctx, &st, path))) return rc;
        rc = maps_read(ctx, &st, out);
        ocr_safetensors_close(&st);
        return rc;
    }
    if ((rc = maps_compute(ctx, cfg, polys, n, out))) return rc;
    for (i = 0; i < N_MAPS; i++) ptrs[i] = &out->t[i];
    return ocr_safetensors_save(ctx, path, ptrs, N_MAPS, NULL, NULL, 0);
}

/* ---- ocr-c's cache: the key covers the sample's content and the whole configuration ---- */
static int ocr_get_or_build(ocr_ctx *ctx, ocr_cache *cache, ocr_hash128 content, const ocr_dbnet_target_config *cfg,
                            const ocr_polygon *polys, int n, maps *out, int *hit) {
    ocr_hash128 key = ocr_cache_key("dbnet-targets-v1", content, settings_hash(cfg));
    ocr_safetensors st;
    const ocr_tensor *ptrs[N_MAPS];
    int i, rc = ocr_cache_get(ctx, cache, key, &st);
    *hit = rc == OCR_OK;
    if (*hit) {
        rc = maps_read(ctx, &st, out);
        ocr_safetensors_close(&st);
        return rc;
    }
    if (rc != OCR_ENOTFOUND) return rc;
    if ((rc = maps_compute(ctx, cfg, polys, n, out))) return rc;
    for (i = 0; i < N_MAPS; i++) ptrs[i] = &out->t[i];
    return ocr_cache_put(ctx, cache, key, ptrs, N_MAPS);
}

/* A flag's float as the decimal the user typed (0.4f would otherwise be 0.4000000059604645). */
static double as_typed(float v) {
    char b[32];
    snprintf(b, sizeof b, "%g", v);
    return atof(b);
}

static void remove_tree(const char *dir) {
    char cmd[4300];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd) != 0) fprintf(stderr, "could not remove '%s'\n", dir);
}

int main(int argc, char **argv) {
    static const char synopsis[] = "[flags]\n\nHost-only by nature (no --device): the data loader builds and caches the target "
                                   "maps on the host,\nwhatever device trains on them.";
    ocr_dbnet_target_config cfgs[3];
    float shrink = 0.6f, tmin = 0.3f, tmax = 0.7f;
    const char *dir = NULL;
    char tmp[64] = "/tmp/repro_stale_cache.XXXXXX", naive_dir[4200], ocr_dir[4200];
    ocr_ex_flag flags[] = {
        {"--shrink-ratio", OCR_EX_FLOAT, &shrink, "shrink_ratio of the second configuration (the first is the default, 0.4)"},
        {"--thresh-min", OCR_EX_FLOAT, &tmin, "thresh_min of the second configuration"},
        {"--thresh-max", OCR_EX_FLOAT, &tmax, "thresh_max of the second configuration"},
        {"--dir", OCR_EX_STRING, &dir, "work directory, kept (default: a temporary one, removed)"},
    };
    static const char *const run_names[3] = {"run 1, default config", "run 2, changed config", "run 3, default config again"};
    ocr_ctx ctx;
    ocr_cache cache, probe;
    ocr_polygon *polys = NULL;
    ocr_hash128 content;
    maps fresh, naive, cached;
    int n_polys = 0, run, bad = 0, naive_stale = 0, stored[2] = {0, 0}, n_stored = 0, c;
    int64_t want_hits = 0, want_writes = 0;
    if (ocr_ex_parse(argc, argv, synopsis, flags, (int)(sizeof flags / sizeof flags[0])) != 0) {
        fprintf(stderr, "%s: takes no positional arguments\n", argv[0]);
        return 2;
    }
    cfgs[0] = cfgs[2] = ocr_dbnet_target_config_default();
    cfgs[1] = cfgs[0];
    cfgs[1].shrink_ratio = as_typed(shrink);
    cfgs[1].thresh_min = as_typed(tmin);
    cfgs[1].thresh_max = as_typed(tmax);
    if (!(shrink > 0.0f && shrink < 1.0f && tmin >= 0.0f && tmin < tmax && tmax <= 1.0f) ||
        (cfgs[1].shrink_ratio == cfgs[0].shrink_ratio && cfgs[1].thresh_min == cfgs[0].thresh_min && cfgs[1].thresh_max == cfgs[0].thresh_max)) {
        fprintf(stderr, "%s: the second configuration must differ from the default and have 0 < shrink < 1, 0 <= min < max <= 1\n", argv[0]);
        return 2;
    }
    if (!dir && !(dir = mkdtemp(tmp))) { fprintf(stderr, "%s: mkdtemp: %s\n", argv[0], strerror(errno)); return 1; }
    snprintf(naive_dir, sizeof naive_dir, "%s/naive", dir);
    snprintf(ocr_dir, sizeof ocr_dir, "%s/ocr", dir);
    if (ocr_ctx_init(&ctx, 1, 0) != OCR_OK || (mkdir(dir, 0755) != 0 && errno != EEXIST) || (mkdir(naive_dir, 0755) != 0 && errno != EEXIST) ||
        ocr_cache_open(&ctx, &cache, ocr_dir) != OCR_OK ||
        ocr_label_parse_json(&ctx, sample_id, sample_label, strlen(sample_label), &polys, &n_polys) != OCR_OK ||
        maps_alloc(&ctx, &fresh) || maps_alloc(&ctx, &naive) || maps_alloc(&ctx, &cached)) {
        fprintf(stderr, "%s: setup failed in '%s': %s\n", argv[0], dir, ocr_ctx_last_error(&ctx));
        return 1;
    }
    content = ocr_hash(sample_label, strlen(sample_label));
    printf("sample '%s' (%d polygons), target maps %dx%d; caches in '%s'\n", sample_id, n_polys, W, H, dir);
    /* what an earlier run with the same --dir left: looked up through a second handle, whose counters stay apart */
    if (ocr_cache_open(&ctx, &probe, ocr_dir) != OCR_OK) {
        fprintf(stderr, "%s: setup failed in '%s': %s\n", argv[0], dir, ocr_ctx_last_error(&ctx));
        return 1;
    }
    for (c = 0; c < 2; c++) {
        ocr_safetensors st;
        int rc = ocr_cache_get(&ctx, &probe, ocr_cache_key("dbnet-targets-v1", content, settings_hash(&cfgs[c])), &st);
        if (rc == OCR_OK) ocr_safetensors_close(&st);
        else if (rc != OCR_ENOTFOUND) {
            fprintf(stderr, "%s: reading the cache in '%s': %s\n", argv[0], ocr_dir, ocr_ctx_last_error(&ctx));
            return 1;
        }
        stored[c] = rc == OCR_OK;
        n_stored += stored[c];
    }
    ocr_cache_close(&probe);
    if (n_stored)
        printf("ocr-c's cache already holds %s from an earlier run in '%s': still valid, so expected to hit\n",
               n_stored == 2 ? "both configurations' entries" : stored[0] ? "the default configuration's entry" : "the changed configuration's entry",
               ocr_dir);
    for (run = 0; run < 3; run++) {
        const ocr_dbnet_target_config *cfg = &cfgs[run];
        long naive_diff, ocr_diff;
        int naive_hit, ocr_hit;
        printf("\n%s: shrink_ratio %g, thresh %g..%g\n", run_names[run], cfg->shrink_ratio, cfg->thresh_min, cfg->thresh_max);
        if (maps_compute(&ctx, cfg, polys, n_polys, &fresh) ||
            naive_get_or_build(&ctx, naive_dir, cfg, polys, n_polys, &naive, &naive_hit) ||
            ocr_get_or_build(&ctx, &cache, content, cfg, polys, n_polys, &cached, &ocr_hit)) {
            printf("  error: %s\n", ocr_ctx_last_error(&ctx));
            bad = 1;
            break;
        }
        naive_diff = maps_diff(&naive, &fresh);
        ocr_diff = maps_diff(&cached, &fresh);
        printf("  %-30s %-4s -> %s\n", "naive (key: sample id)", naive_hit ? "hit" : "miss",
               naive_diff ? "STALE maps" : "maps match this configuration");
        if (naive_diff) printf("      %ld pixels of the four maps differ from this configuration's targets\n", naive_diff);
        printf("  %-30s %-4s -> %s\n", "ocr-c (key: content + config)", ocr_hit ? "hit" : "miss, rebuilt and stored",
               ocr_diff ? "WRONG maps" : "maps match this configuration");
        naive_stale += naive_diff != 0;
        /* expected: a hit where an entry for this configuration is stored (by an earlier run, or by run 1 for run 3),
           else a miss and a write */
        {
            int want_hit = stored[run == 1] || run == 2;
            want_hits += want_hit;
            want_writes += !want_hit;
            if (ocr_diff || ocr_hit != want_hit) bad = 1;
        }
    }
    {
        ocr_cache_stats st = ocr_cache_get_stats(&cache);
        printf("\nocr-c cache: %lld hits, %lld misses, %lld writes (one entry per configuration)\n", (long long)st.hits,
               (long long)st.misses, (long long)st.writes);
        if (st.hits != want_hits || st.misses != 3 - want_hits || st.writes != want_writes || st.corrupt) bad = 1;
    }
    printf("naive cache: served stale maps in %d of 3 runs\n", naive_stale);
    ocr_polygons_free(polys, n_polys);
    maps_free(&fresh); maps_free(&naive); maps_free(&cached);
    ocr_cache_close(&cache);
    ocr_ctx_free(&ctx);
    if (dir == tmp) remove_tree(dir);
    printf("\n%s\n", bad ? "FAIL: ocr-c's cache did not miss and rebuild exactly where it held no entry for the configuration"
                 : !stored[1] ? "OK: ocr-c's cache missed and rebuilt under the changed configuration, and never served stale maps"
                              : "OK: ocr-c's cache served the entries an earlier run stored, each matching its configuration, and never "
                                "served stale maps");
    return bad;
}
