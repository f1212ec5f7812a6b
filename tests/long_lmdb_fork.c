/* long_lmdb_fork - a fork soak over an LMDB dataset (run by ./build.sh test-long; about 10 s on 2 idle cores).

   The pattern of a PyTorch DataLoader with forked workers, pushed hard: the parent writes an LMDB with
   ocr_lmdb_write_dataset, opens it with ocr_dataset_open_lmdb, reads from it, starts a loader with worker threads on
   it, and then forks FORKS children in waves of WAVE while it keeps reading (directly and through its loader).
   Every child reads the dataset object it inherited:
     - most read random records (pixels and labels, or labels only) and check each against the formula that made it;
     - every 4th runs its own loader with 2 worker threads over the inherited dataset and checks every batch;
     - every 10th forks a grandchild that reads as well (a worker of a worker);
     - one per wave is killed with SIGKILL at a random moment, as a crashed worker is; the others must not notice.
   Every child must exit 0 (the killed ones may also die of SIGKILL, nothing else), nothing may crash, and the parent
   reads every record correctly afterwards, also through a fresh open. The record contents come from formulas in this
   file, not from the library, so a record mixed up, cut or corrupted anywhere shows.

       long_lmdb_fork [case-name-filter]     OCR_LONG_SEED=N fixes the random choices (printed at the start) */
#define OCR_IMPLEMENTATION
#include "ocr_tensor.h"
#include "ocr_data.h"
#include "ocr_test.h"
#include <lmdb.h>
#include <errno.h>
#include <signal.h>
#include <time.h>
#include <unistd.h>
#include <sys/stat.h>
#include <sys/wait.h>

#define RECORDS 3000
#define FORKS 5000
#define WAVE 8
#define CHILD_READS 200
#define CHILD_BATCHES 50
#define WAVE_TIMEOUT_S 120
#define FIELD_H 16
#define FIELD_W 24

static char g_dir[64], g_path[128];
static ocr_ctx g_ctx;
static ocr_dataset g_ds;
static int g_ds_open;
static uint64_t g_seed;

/* ---- the records: record i is fully determined by i ---- */
static int rec_w(int64_t i) { return 8 + (int)(i % 13); }          /* 8..20 */
static int rec_h(int64_t i) { return 6 + (int)((i * 7) % 11); }    /* 6..16 */
static int rec_px(int64_t i, int x, int y, int c) { return (int)((i * 131 + x * 7 + y * 29 + c * 83) & 255); }
static int rec_npolys(int64_t i) { return 1 + (int)(i % 3); }
static int rec_ignore(int64_t i, int k) { return (i + k) % 7 == 3; }
static void rec_text(int64_t i, int k, char *buf, size_t cap) { snprintf(buf, cap, "r%lld/%d", (long long)i, k); }
/* corner q (0..3) of polygon k: a 3.25 x 2 rectangle, all coordinates exact in binary */
static void rec_corner(int64_t i, int k, int q, float *x, float *y) {
    float x0 = (float)((i + k) % 5) + 0.5f, y0 = 1.5f * (float)k;
    *x = x0 + (q == 1 || q == 2 ? 3.25f : 0.0f);
    *y = y0 + (q >= 2 ? 2.0f : 0.0f);
}

static uint64_t rnd(uint64_t *s) { /* xorshift64*: the test's own randomness, independent of the library */
    *s ^= *s >> 12; *s ^= *s << 25; *s ^= *s >> 27;
    return *s * 2685821657736338717ull;
}

/* ---- a generated dataset, the source ocr_lmdb_write_dataset copies ---- */
static int gen_fill(ocr_ctx *ctx, int64_t i, int pixels, ocr_sample *out) {
    int k, q, x, y, c, n = rec_npolys(i);
    char text[64];
    memset(out, 0, sizeof *out);
    snprintf(out->id, sizeof out->id, "gen-%lld", (long long)i);
    if (pixels) {
        int rc = ocr_image_alloc(ctx, &out->image, rec_w(i), rec_h(i), 3);
        if (rc) return rc;
        for (y = 0; y < rec_h(i); y++)
            for (x = 0; x < rec_w(i); x++)
                for (c = 0; c < 3; c++) out->image.pixels[((size_t)y * (size_t)rec_w(i) + (size_t)x) * 3 + (size_t)c] = (uint8_t)rec_px(i, x, y, c);
    } else {
        out->image.width = rec_w(i); out->image.height = rec_h(i); out->image.channels = 3;
    }
    out->polys = (ocr_polygon *)OCR_MALLOC(sizeof(ocr_polygon) * (size_t)n);
    if (!out->polys) return ocr_error(ctx, OCR_ENOMEM, "gen_fill: out of memory");
    memset(out->polys, 0, sizeof(ocr_polygon) * (size_t)n);
    out->n_polys = n;
    for (k = 0; k < n; k++) {
        ocr_polygon *p = &out->polys[k];
        p->points = (ocr_point *)OCR_MALLOC(sizeof(ocr_point) * 4);
        rec_text(i, k, text, sizeof text);
        p->text = (char *)OCR_MALLOC(strlen(text) + 1);
        if (!p->points || !p->text) { ocr_sample_free(out); return ocr_error(ctx, OCR_ENOMEM, "gen_fill: out of memory"); }
        memcpy(p->text, text, strlen(text) + 1);
        p->n_points = 4;
        p->ignore = rec_ignore(i, k);
        for (q = 0; q < 4; q++) rec_corner(i, k, q, &p->points[q].x, &p->points[q].y);
    }
    return OCR_OK;
}
static int gen_get(ocr_dataset *ds, ocr_ctx *ctx, int64_t index, unsigned flags, ocr_sample *out) {
    (void)ds;
    return gen_fill(ctx, index, !(flags & OCR_SAMPLE_LABELS_ONLY), out);
}
static int gen_get_encoded(ocr_dataset *ds, ocr_ctx *ctx, int64_t index, unsigned char **bytes, size_t *size) {
    ocr_sample s;
    int rc;
    (void)ds;
    if ((rc = gen_fill(ctx, index, 1, &s))) return rc;
    rc = ocr_image_encode_png(ctx, &s.image, bytes, size);
    ocr_sample_free(&s);
    return rc;
}

/* ---- checks against the formulas: 1 when right, else 0 with a reason in msg ---- */
static int check_labels(int64_t i, const ocr_sample *s, char *msg, size_t cap) {
    int k, q;
    char text[64];
    if (s->image.width != rec_w(i) || s->image.height != rec_h(i)) {
        snprintf(msg, cap, "record %lld: image %dx%d, expected %dx%d", (long long)i, s->image.width, s->image.height, rec_w(i), rec_h(i));
        return 0;
    }
    if (s->n_polys != rec_npolys(i)) {
        snprintf(msg, cap, "record %lld: %d polygons, expected %d", (long long)i, s->n_polys, rec_npolys(i));
        return 0;
    }
    for (k = 0; k < s->n_polys; k++) {
        const ocr_polygon *p = &s->polys[k];
        if (p->n_points != 4 || !p->ignore != !rec_ignore(i, k)) {
            snprintf(msg, cap, "record %lld polygon %d: %d points, ignore %d", (long long)i, k, p->n_points, p->ignore);
            return 0;
        }
        for (q = 0; q < 4; q++) {
            float x, y;
            rec_corner(i, k, q, &x, &y);
            if (p->points[q].x != x || p->points[q].y != y) {
                snprintf(msg, cap, "record %lld polygon %d point %d: (%g, %g), expected (%g, %g)", (long long)i, k, q, (double)p->points[q].x,
                         (double)p->points[q].y, (double)x, (double)y);
                return 0;
            }
        }
        rec_text(i, k, text, sizeof text);
        if (!p->ignore && (!p->text || strcmp(p->text, text) != 0)) {
            snprintf(msg, cap, "record %lld polygon %d: text '%s', expected '%s'", (long long)i, k, p->text ? p->text : "(null)", text);
            return 0;
        }
    }
    return 1;
}
static int check_sample(int64_t i, const ocr_sample *s, int pixels, char *msg, size_t cap) {
    int x, y, c;
    if (!check_labels(i, s, msg, cap)) return 0;
    if (!pixels) return 1;
    if (!s->image.pixels || s->image.channels != 3) { snprintf(msg, cap, "record %lld: no RGB pixels", (long long)i); return 0; }
    for (y = 0; y < rec_h(i); y++)
        for (x = 0; x < rec_w(i); x++)
            for (c = 0; c < 3; c++)
                if (s->image.pixels[((size_t)y * (size_t)rec_w(i) + (size_t)x) * 3 + (size_t)c] != rec_px(i, x, y, c)) {
                    snprintf(msg, cap, "record %lld: pixel (%d, %d, %d) is %d, expected %d", (long long)i, x, y, c,
                             s->image.pixels[((size_t)y * (size_t)rec_w(i) + (size_t)x) * 3 + (size_t)c], rec_px(i, x, y, c));
                    return 0;
                }
    return 1;
}
/* One record read through ds and checked; 1 when right. */
static int read_check(ocr_ctx *ctx, ocr_dataset *ds, int64_t i, int pixels, char *msg, size_t cap) {
    ocr_sample s;
    int ok;
    if (ocr_dataset_get(ctx, ds, i, pixels ? 0 : OCR_SAMPLE_LABELS_ONLY, &s) != OCR_OK) {
        snprintf(msg, cap, "record %lld: %s", (long long)i, ocr_ctx_last_error(ctx));
        return 0;
    }
    ok = check_sample(i, &s, pixels, msg, cap);
    ocr_sample_free(&s);
    return ok;
}
/* Batch row b of a loader batch (default transform: value / 255 top-left in [3, FIELD_H, FIELD_W], zero elsewhere). */
static int check_batch(const ocr_batch *b, char *msg, size_t cap) {
    int r, x, y, c;
    if (b->size < 1 || b->fields[0].shape.ndim != 4 || b->fields[0].shape.dim[2] != FIELD_H || b->fields[0].shape.dim[3] != FIELD_W) {
        snprintf(msg, cap, "batch %lld: size %d, field of %d dims", (long long)b->number, b->size, b->fields[0].shape.ndim);
        return 0;
    }
    for (r = 0; r < b->size; r++) {
        int64_t i = b->indices[r];
        const float *f = (const float *)b->fields[0].data + (size_t)r * 3 * FIELD_H * FIELD_W;
        if (i < 0 || i >= RECORDS || b->n_polys[r] != rec_npolys(i)) {
            snprintf(msg, cap, "batch %lld row %d: index %lld with %d polygons", (long long)b->number, r, (long long)i, b->n_polys[r]);
            return 0;
        }
        for (c = 0; c < 3; c++)
            for (y = 0; y < FIELD_H; y++)
                for (x = 0; x < FIELD_W; x++) {
                    float want = x < rec_w(i) && y < rec_h(i) ? (float)rec_px(i, x, y, c) / 255.0f : 0.0f;
                    float got = f[((size_t)c * FIELD_H + (size_t)y) * FIELD_W + (size_t)x];
                    if (!(fabsf(got - want) <= 1e-6f)) {
                        snprintf(msg, cap, "batch %lld row %d (record %lld): value (%d, %d, %d) is %g, expected %g", (long long)b->number,
                                 r, (long long)i, c, y, x, (double)got, (double)want);
                        return 0;
                    }
                }
    }
    return 1;
}

static ocr_loader_config loader_config(uint64_t seed) {
    ocr_loader_config cfg = ocr_loader_config_default();
    cfg.batch_size = 4;
    cfg.n_workers = 2;
    cfg.seed = seed;
    cfg.n_fields = 1;
    cfg.field_names[0] = "image";
    cfg.field_shapes[0] = ocr_shape3(3, FIELD_H, FIELD_W);
    return cfg;
}

/* ---- the children: each exits 0 when every read was right, else prints why and exits 1 ---- */
static void child_reads(ocr_dataset *ds, uint64_t seed, const char *who) {
    char msg[OCR_ERROR_MAX + 128];
    ocr_ctx ctx;
    int n;
    if (ocr_ctx_init(&ctx, 1, seed) != OCR_OK) _exit(3);
    for (n = 0; n < CHILD_READS; n++) {
        int64_t i = (int64_t)(rnd(&seed) % RECORDS);
        if (!read_check(&ctx, ds, i, (int)(rnd(&seed) & 1), msg, sizeof msg)) {
            fprintf(stderr, "  %s (pid %ld): %s\n", who, (long)getpid(), msg);
            _exit(1);
        }
    }
    ocr_ctx_free(&ctx);
}
static void child_loader(ocr_dataset *ds, uint64_t seed) {
    char msg[OCR_ERROR_MAX + 128];
    ocr_ctx ctx;
    ocr_loader *L = NULL;
    ocr_loader_config cfg = loader_config(seed);
    ocr_batch *b;
    int n;
    if (ocr_ctx_init(&ctx, 1, seed) != OCR_OK) _exit(3);
    if (ocr_loader_create(&ctx, &L, ds, &cfg) || ocr_loader_start_epoch(&ctx, L, (int64_t)(seed % 5))) {
        fprintf(stderr, "  loader child (pid %ld): %s\n", (long)getpid(), ocr_ctx_last_error(&ctx));
        _exit(1);
    }
    for (n = 0; n < CHILD_BATCHES; n++) {
        if (ocr_loader_next(&ctx, L, &b) || !b) {
            fprintf(stderr, "  loader child (pid %ld): batch %d: %s\n", (long)getpid(), n, b ? ocr_ctx_last_error(&ctx) : "epoch ended early");
            _exit(1);
        }
        if (!check_batch(b, msg, sizeof msg)) { fprintf(stderr, "  loader child (pid %ld): %s\n", (long)getpid(), msg); _exit(1); }
        ocr_loader_release(L, b);
    }
    ocr_loader_free(L); /* mid-epoch: the workers stop with batches in flight */
    ocr_ctx_free(&ctx);
}
static void child_main(ocr_dataset *ds, int c, uint64_t seed) {
    if (c % 4 == 1) child_loader(ds, seed);
    else child_reads(ds, seed, "child");
    if (c % 10 == 3) { /* a grandchild reads through the same inherited object, then this child reads again */
        int status;
        pid_t g;
        fflush(NULL);
        g = fork();
        if (g == 0) { child_reads(ds, seed ^ 0x9e3779b97f4a7c15ull, "grandchild"); _exit(0); }
        if (g < 0 || waitpid(g, &status, 0) != g || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
            fprintf(stderr, "  child (pid %ld): its grandchild failed (status %d)\n", (long)getpid(), g < 0 ? -1 : status);
            _exit(1);
        }
        child_reads(ds, seed + 1, "child after its grandchild");
    }
    if (c % 2) ocr_dataset_close(ds); /* closes only what this process opened; half the children just exit */
    _exit(0);
}

/* ---- the cases ---- */
static void test_write_and_read(void) {
    ocr_dataset gen;
    char msg[OCR_ERROR_MAX + 128];
    int64_t i, bad = 0;
    memset(&gen, 0, sizeof gen);
    gen.count = RECORDS;
    snprintf(gen.name, sizeof gen.name, "generated");
    gen.get = gen_get;
    gen.get_encoded = gen_get_encoded;
    snprintf(g_path, sizeof g_path, "%s/data.lmdb", g_dir);
    OCR_CHECK_OK(&g_ctx, ocr_lmdb_write_dataset(&g_ctx, g_path, &gen, NULL, NULL));
    OCR_CHECK_OK(&g_ctx, ocr_dataset_open_lmdb(&g_ctx, &g_ds, g_path));
    if (ocr_test__case_failed) return;
    g_ds_open = 1;
    OCR_CHECK_MSG(g_ds.count == RECORDS, "the LMDB holds %lld records, %d written", (long long)g_ds.count, RECORDS);
    for (i = 0; i < g_ds.count && bad < 3; i++)
        if (!read_check(&g_ctx, &g_ds, i, 1, msg, sizeof msg)) { OCR_CHECK_MSG(0, "parent: %s", msg); bad++; }
    /* the checks themselves can fail: record 5 read as if it were record 6 */
    {
        ocr_sample s;
        OCR_CHECK_OK(&g_ctx, ocr_dataset_get(&g_ctx, &g_ds, 5, 0, &s));
        if (!ocr_test__case_failed) {
            OCR_CHECK_MSG(!check_sample(6, &s, 1, msg, sizeof msg), "the record check accepts record 5 as record 6");
            s.image.pixels[7] ^= 1;
            OCR_CHECK_MSG(!check_sample(5, &s, 1, msg, sizeof msg), "the record check misses a changed pixel");
            ocr_sample_free(&s);
        }
    }
}

static void test_fork_soak(void) {
    char msg[OCR_ERROR_MAX + 128];
    uint64_t r = g_seed;
    ocr_loader *L = NULL;
    ocr_loader_config cfg = loader_config(g_seed);
    int64_t parent_reads = 0, parent_batches = 0, epoch = 0;
    int forked = 0, failed = 0, killed = 0, wave = 0, parent_bad = 0;
    if (!g_ds_open) { OCR_CHECK_MSG(0, "no dataset (the first case failed)"); return; }
    /* the parent's own loader keeps 2 worker threads reading while it forks */
    OCR_CHECK_OK(&g_ctx, ocr_loader_create(&g_ctx, &L, &g_ds, &cfg));
    OCR_CHECK_OK(&g_ctx, ocr_loader_start_epoch(&g_ctx, L, epoch));
    if (ocr_test__case_failed) { if (L) ocr_loader_free(L); return; }
    while (forked < FORKS) {
        pid_t pids[WAVE];
        int n = FORKS - forked < WAVE ? FORKS - forked : WAVE, c, left, victim = (int)(rnd(&r) % (uint64_t)n);
        int victim_kill_after = 1 + (int)(rnd(&r) % 12); /* parent iterations (a read and a batch each) before SIGKILL */
        time_t t0 = time(NULL);
        for (c = 0; c < n; c++) {
            uint64_t seed = rnd(&r);
            fflush(NULL);
            pids[c] = fork();
            if (pids[c] == 0) child_main(&g_ds, forked + c, seed);
            if (pids[c] < 0) { OCR_CHECK_MSG(0, "fork: %s", strerror(errno)); failed++; }
        }
        /* the parent reads (directly and through its loader) until the whole wave has exited */
        for (left = n, c = 0; left > 0; c++) {
            int k, status;
            ocr_batch *b = NULL;
            int64_t i = (int64_t)(rnd(&r) % RECORDS);
            if (!read_check(&g_ctx, &g_ds, i, (int)(i & 1), msg, sizeof msg) && parent_bad++ < 3) OCR_CHECK_MSG(0, "parent: %s", msg);
            parent_reads++;
            if (ocr_loader_next(&g_ctx, L, &b) != OCR_OK) {
                if (parent_bad++ < 3) OCR_CHECK_MSG(0, "parent loader: %s", ocr_ctx_last_error(&g_ctx));
            } else if (!b) {
                OCR_CHECK_OK(&g_ctx, ocr_loader_start_epoch(&g_ctx, L, ++epoch));
            } else {
                if (!check_batch(b, msg, sizeof msg) && parent_bad++ < 3) OCR_CHECK_MSG(0, "parent loader: %s", msg);
                parent_batches++;
                ocr_loader_release(L, b);
            }
            if (wave % 2 == 0 && c == victim_kill_after && pids[victim] > 0) kill(pids[victim], SIGKILL);
            for (k = 0; k < n; k++) {
                pid_t w;
                if (pids[k] <= 0) continue;
                w = waitpid(pids[k], &status, WNOHANG);
                if (w == 0) {
                    if (time(NULL) - t0 > WAVE_TIMEOUT_S) {
                        kill(pids[k], SIGKILL);
                        waitpid(pids[k], &status, 0);
                        OCR_CHECK_MSG(0, "child %d still running after %d s: killed", forked + k, WAVE_TIMEOUT_S);
                        failed++;
                        pids[k] = 0;
                        left--;
                    }
                    continue;
                }
                if (w < 0) { OCR_CHECK_MSG(0, "waitpid: %s", strerror(errno)); failed++; }
                else if (WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL && wave % 2 == 0 && k == victim) killed++;
                else if (WIFSIGNALED(status)) {
                    OCR_CHECK_MSG(0, "child %d died of signal %d (%s)", forked + k, WTERMSIG(status), strsignal(WTERMSIG(status)));
                    failed++;
                }
                else if (WEXITSTATUS(status) != 0) { OCR_CHECK_MSG(0, "child %d exited %d", forked + k, WEXITSTATUS(status)); failed++; }
                pids[k] = 0;
                left--;
            }
        }
        forked += n;
        wave++;
    }
    ocr_loader_free(L);
    printf("     %d children in waves of %d (%d killed on purpose), %d failed; the parent meanwhile read %lld records and %lld "
           "batches, %d wrong\n", forked, WAVE, killed, failed, (long long)parent_reads, (long long)parent_batches, parent_bad);
    OCR_CHECK_MSG(failed == 0, "%d of %d children failed", failed, forked);
    OCR_CHECK(parent_bad == 0);
}

static void test_after_soak(void) {
    char msg[OCR_ERROR_MAX + 128];
    ocr_dataset fresh;
    int64_t i, bad = 0;
    if (!g_ds_open) { OCR_CHECK_MSG(0, "no dataset (the first case failed)"); return; }
    for (i = 0; i < RECORDS && bad < 3; i++)
        if (!read_check(&g_ctx, &g_ds, i, 1, msg, sizeof msg)) { OCR_CHECK_MSG(0, "parent after the soak: %s", msg); bad++; }
    ocr_dataset_close(&g_ds);
    g_ds_open = 0;
    /* a fresh open: the environment and its reader table are still usable after 200 children (some killed mid-read) */
    OCR_CHECK_OK(&g_ctx, ocr_dataset_open_lmdb(&g_ctx, &fresh, g_path));
    if (ocr_test__case_failed) return;
    for (i = 0; i < RECORDS && bad < 3; i++)
        if (!read_check(&g_ctx, &fresh, i, 0, msg, sizeof msg)) { OCR_CHECK_MSG(0, "fresh open: %s", msg); bad++; }
    ocr_dataset_close(&fresh);
    {   /* for the record: reader slots left by the children killed inside a read transaction */
        MDB_env *env;
        int dead = -1;
        if (mdb_env_create(&env) == 0) {
            if (mdb_env_set_maxreaders(env, 1024) == 0 && mdb_env_open(env, g_path, MDB_RDONLY, 0644) == 0) mdb_reader_check(env, &dead);
            mdb_env_close(env);
        }
        printf("     stale reader slots of dead processes in the lock file: %d\n", dead);
    }
}

int main(int argc, char **argv) {
    char cmd[128];
    const char *s = getenv("OCR_LONG_SEED");
    ocr_test_init(argc, argv);
    g_seed = s && *s ? strtoull(s, NULL, 10) : (uint64_t)time(NULL) ^ ((uint64_t)getpid() << 20);
    if (!g_seed) g_seed = 1;
    printf("long_lmdb_fork: OCR_LONG_SEED=%llu\n", (unsigned long long)g_seed);
    if (ocr_ctx_init(&g_ctx, 1, 5) != OCR_OK) return 1;
    snprintf(g_dir, sizeof g_dir, "/tmp/ocr_long_lmdb_fork.XXXXXX");
    if (!mkdtemp(g_dir)) { fprintf(stderr, "long_lmdb_fork: mkdtemp failed\n"); return 1; }
    OCR_TEST_RUN(test_write_and_read);
    OCR_TEST_RUN(test_fork_soak);
    OCR_TEST_RUN(test_after_soak);
    if (g_ds_open) ocr_dataset_close(&g_ds);
    snprintf(cmd, sizeof cmd, "rm -rf %s", g_dir);
    if (system(cmd) != 0) fprintf(stderr, "long_lmdb_fork: could not remove %s\n", g_dir);
    ocr_ctx_free(&g_ctx);
    return ocr_test_finish();
}
