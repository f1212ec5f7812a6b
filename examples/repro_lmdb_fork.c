/* repro_lmdb_fork - an LMDB dataset opened in the parent and read in forked children, as a PyTorch DataLoader's
   workers read the Dataset object built before the fork.

   Naive: the parent opens the environment with plain liblmdb and keeps a read transaction for its own reads (the
   dataset's __init__ counted the samples with it). The children inherit the environment, its reader-table slot and
   the parent's thread-local reader record; liblmdb forbids using an MDB_env after fork() and the children hit
   MDB_BAD_RSLOT ("Invalid reuse of reader locktable slot"), or with other patterns read through a slot the parent
   still owns (a writer may then recycle the pages under them), or crash. Each child runs in its own process here,
   so whatever it hits (a signal, an LMDB error code, wrong data) is contained and reported.
   ocr-c: ocr_dataset_open_lmdb ties the environment to the process that opened it; a child's first read opens its
   own environment (and never touches or closes the inherited one), so every child reads every record correctly,
   and the parent's handle keeps working.

       repro_lmdb_fork                          64 records, 4 children, in a temporary directory
       repro_lmdb_fork --records 500 --children 8 --dir /tmp/mylmdb

   Exit status: 0 when every ocr-c child and the parent read every record correctly, 1 otherwise, 2 bad flags. */
#define OCR_IMPLEMENTATION
#include "ocr_tensor.h"
#include "ocr_data.h"
#include "ocr_example.h"
#include <lmdb.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>

/* Record i: an 8x8 image of one grey level and a label naming i; any mix-up or corruption shows. */
static int record_grey(int64_t i) { return (int)((i * 37 + 11) & 255); }
static void record_label(int64_t i, char *buf, size_t cap) {
    snprintf(buf, cap, "[{\"points\": [[%lld, 1], [%lld, 1], [%lld, 5], [%lld, 5]], \"transcription\": \"rec%lld\"}]",
             (long long)i % 4, (long long)i % 4 + 3, (long long)i % 4 + 3, (long long)i % 4, (long long)i);
}

static int write_lmdb(ocr_ctx *ctx, const char *path, int records) {
    MDB_env *env = NULL;
    MDB_txn *txn = NULL;
    MDB_dbi dbi;
    MDB_val k, v;
    char key[32], label[256], count[32];
    ocr_image img;
    unsigned char *png;
    size_t png_size;
    int64_t i;
    int rc = OCR_OK, mrc;
    if (mkdir(path, 0755) != 0 && errno != EEXIST) return ocr_error(ctx, OCR_EIO, "write_lmdb: cannot create '%s': %s", path, strerror(errno));
    if ((mrc = mdb_env_create(&env)) || (mrc = mdb_env_set_mapsize(env, (size_t)1 << 26)) || (mrc = mdb_env_open(env, path, 0, 0644)) ||
        (mrc = mdb_txn_begin(env, NULL, 0, &txn)) || (mrc = mdb_dbi_open(txn, NULL, 0, &dbi)))
        goto done;
    if ((rc = ocr_image_alloc(ctx, &img, 8, 8, 3))) goto done;
    for (i = 0; i < records && !rc && !mrc; i++) {
        memset(img.pixels, record_grey(i), 8 * 8 * 3);
        if ((rc = ocr_image_encode_png(ctx, &img, &png, &png_size))) break;
        snprintf(key, sizeof key, "image-%09lld", (long long)i + 1);
        k.mv_data = key; k.mv_size = strlen(key); v.mv_data = png; v.mv_size = png_size;
        mrc = mdb_put(txn, dbi, &k, &v, 0);
        OCR_FREE(png);
        record_label(i, label, sizeof label);
        snprintf(key, sizeof key, "label-%09lld", (long long)i + 1);
        k.mv_data = key; k.mv_size = strlen(key); v.mv_data = label; v.mv_size = strlen(label);
        if (!mrc) mrc = mdb_put(txn, dbi, &k, &v, 0);
    }
    ocr_image_free(&img);
    snprintf(count, sizeof count, "%d", records);
    k.mv_data = (void *)"num-samples"; k.mv_size = 11; v.mv_data = count; v.mv_size = strlen(count);
    if (!rc && !mrc) mrc = mdb_put(txn, dbi, &k, &v, 0);
    if (!rc && !mrc) { mrc = mdb_txn_commit(txn); txn = NULL; }
done:
    if (txn) mdb_txn_abort(txn);
    if (env) mdb_env_close(env);
    if (mrc) rc = ocr_error(ctx, OCR_EIO, "write_lmdb: '%s': %s", path, mdb_strerror(mrc));
    return rc;
}

/* ---- the naive dataset: one environment and one long-lived read transaction, opened before the workers fork */
typedef struct { MDB_env *env; MDB_txn *txn; MDB_dbi dbi; } naive_dataset;

static int naive_open(naive_dataset *d, const char *path) {
    int rc;
    memset(d, 0, sizeof *d);
    if ((rc = mdb_env_create(&d->env)) || (rc = mdb_env_open(d->env, path, MDB_RDONLY, 0644)) ||
        (rc = mdb_txn_begin(d->env, NULL, MDB_RDONLY, &d->txn)) || (rc = mdb_dbi_open(d->txn, NULL, 0, &d->dbi)))
        return rc;
    return MDB_SUCCESS;
}

/* What a naive worker does for sample i: a read transaction on the (inherited) environment, two gets. */
static int naive_get(naive_dataset *d, int64_t i, char *label, size_t cap, unsigned char *png_head) {
    MDB_txn *txn;
    MDB_val k, v;
    char key[32];
    int rc;
    if ((rc = mdb_txn_begin(d->env, NULL, MDB_RDONLY, &txn))) return rc;
    snprintf(key, sizeof key, "label-%09lld", (long long)i + 1);
    k.mv_data = key; k.mv_size = strlen(key);
    if (!(rc = mdb_get(txn, d->dbi, &k, &v))) snprintf(label, cap, "%.*s", (int)v.mv_size, (const char *)v.mv_data);
    snprintf(key, sizeof key, "image-%09lld", (long long)i + 1);
    k.mv_data = key; k.mv_size = strlen(key);
    if (!rc && !(rc = mdb_get(txn, d->dbi, &k, &v))) memcpy(png_head, v.mv_data, v.mv_size < 8 ? v.mv_size : 8);
    mdb_txn_abort(txn);
    return rc;
}

/* Naive child: reads every record; writes what it found to fd; exits 0 when all were right. */
static void naive_child(naive_dataset *d, int records, int fd) {
    static const unsigned char png_magic[8] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n'};
    char msg[512], label[256], want[256];
    unsigned char head[8];
    int64_t i;
    int rc, code = 0;
    for (i = 0; i < records; i++) {
        memset(head, 0, sizeof head);
        if ((rc = naive_get(d, i, label, sizeof label, head))) {
            snprintf(msg, sizeof msg, "LMDB error %d at record %lld: %s", rc, (long long)i, mdb_strerror(rc));
            code = 3;
            break;
        }
        record_label(i, want, sizeof want);
        if (strcmp(label, want) != 0 || memcmp(head, png_magic, 8) != 0) {
            snprintf(msg, sizeof msg, "wrong data at record %lld: label '%.60s'", (long long)i, label);
            code = 4;
            break;
        }
    }
    if (!code) snprintf(msg, sizeof msg, "read all %d records (through an environment it must not use: luck, not safety)", records);
    if (write(fd, msg, strlen(msg)) < 0) code = 5;
    _exit(code);
}

/* ocr-c child: its own context, the dataset object inherited from the parent, every record checked. */
static void ocr_child(ocr_dataset *ds, int records, int fd) {
    char msg[OCR_ERROR_MAX + 64];
    ocr_ctx ctx;
    ocr_sample s;
    int64_t i, ok = 0;
    int code = 0;
    if (ocr_ctx_init(&ctx, 1, 0) != OCR_OK) _exit(6);
    snprintf(msg, sizeof msg, "?");
    for (i = 0; i < records; i++) {
        if (ocr_dataset_get(&ctx, ds, i, 0, &s) != OCR_OK) {
            snprintf(msg, sizeof msg, "record %lld: %s", (long long)i, ocr_ctx_last_error(&ctx));
            code = 3;
            break;
        }
        if (s.image.width == 8 && s.image.height == 8 && s.image.pixels[0] == record_grey(i) && s.image.pixels[191] == record_grey(i) &&
            s.n_polys == 1 && s.polys[0].n_points == 4 && s.polys[0].points[0].x == (float)(i % 4) && s.polys[0].text &&
            strncmp(s.polys[0].text, "rec", 3) == 0 && atoll(s.polys[0].text + 3) == i)
            ok++;
        else if (!code) {
            snprintf(msg, sizeof msg, "wrong data at record %lld", (long long)i);
            code = 4;
        }
        ocr_sample_free(&s);
    }
    if (!code) snprintf(msg, sizeof msg, "read all %lld records correctly (its own environment, opened on first use)", (long long)ok);
    ocr_dataset_close(ds); /* closes only what this process opened */
    ocr_ctx_free(&ctx);
    if (write(fd, msg, strlen(msg)) < 0) code = 5;
    _exit(code);
}

/* Forks n children at once (as a loader's workers) running body; prints what each hit. Returns how many failed. */
static int run_children(const char *who, int n, void (*body)(void *arg, int fd), void *arg) {
    pid_t pids[64];
    int fds[64], c, failed = 0;
    for (c = 0; c < n; c++) {
        int p[2];
        fflush(stdout);
        pids[c] = -1;
        if (pipe(p) != 0) continue;
        if ((pids[c] = fork()) == 0) { close(p[0]); body(arg, p[1]); _exit(7); }
        close(p[1]);
        fds[c] = p[0];
        if (pids[c] < 0) close(p[0]);
    }
    for (c = 0; c < n; c++) {
        char msg[OCR_ERROR_MAX + 64];
        ssize_t got = 0, r;
        int status;
        if (pids[c] < 0) { printf("  %s child %d: cannot start: %s\n", who, c, strerror(errno)); failed++; continue; }
        /* a report fits in the pipe buffer, so children never block on it */
        while ((r = read(fds[c], msg + got, sizeof msg - 1 - (size_t)got)) > 0) got += r;
        msg[got > 0 ? got : 0] = 0;
        close(fds[c]);
        waitpid(pids[c], &status, 0);
        if (WIFSIGNALED(status)) {
            printf("  %s child %d (pid %ld): killed by signal %d (%s)\n", who, c, (long)pids[c], WTERMSIG(status), strsignal(WTERMSIG(status)));
            failed++;
        } else {
            printf("  %s child %d (pid %ld): %s\n", who, c, (long)pids[c], msg[0] ? msg : "(no report)");
            failed += WEXITSTATUS(status) != 0;
        }
    }
    return failed;
}

typedef struct { naive_dataset *naive; ocr_dataset *ocr; int records; } child_args;
static void naive_body(void *arg, int fd) { child_args *a = (child_args *)arg; naive_child(a->naive, a->records, fd); }
static void ocr_body(void *arg, int fd) { child_args *a = (child_args *)arg; ocr_child(a->ocr, a->records, fd); }

int main(int argc, char **argv) {
    static const char synopsis[] = "[flags]\n\nHost-only by nature (no --device): LMDB environments and fork() belong to host "
                                   "processes;\na GPU training run's data loader workers meet the same failure, and the same fix.";
    int records = 64, children = 4, naive_failed, ocr_failed, rc, parent_ok = 1;
    const char *dir = NULL;
    char tmp[64] = "/tmp/repro_lmdb_fork.XXXXXX", path[4200];
    ocr_ex_flag flags[] = {
        {"--records", OCR_EX_INT, &records, "records in the LMDB (1..100000)"},
        {"--children", OCR_EX_INT, &children, "forked children per side (1..64)"},
        {"--dir", OCR_EX_STRING, &dir, "work directory, kept (default: a temporary one, removed)"},
    };
    ocr_ctx ctx;
    ocr_dataset ds;
    ocr_sample s;
    naive_dataset naive;
    child_args args;
    if (ocr_ex_parse(argc, argv, synopsis, flags, (int)(sizeof flags / sizeof flags[0])) != 0) {
        fprintf(stderr, "%s: takes no positional arguments\n", argv[0]);
        return 2;
    }
    if (records < 1 || records > 100000 || children < 1 || children > 64) {
        fprintf(stderr, "%s: need 1 <= --records <= 100000 and 1 <= --children <= 64\n", argv[0]);
        return 2;
    }
    if (!dir && !(dir = mkdtemp(tmp))) { fprintf(stderr, "%s: mkdtemp: %s\n", argv[0], strerror(errno)); return 1; }
    if (mkdir(dir, 0755) != 0 && errno != EEXIST) { fprintf(stderr, "%s: cannot create '%s': %s\n", argv[0], dir, strerror(errno)); return 1; }
    snprintf(path, sizeof path, "%s/data.lmdb", dir);
    if (ocr_ctx_init(&ctx, 1, 0) != OCR_OK || write_lmdb(&ctx, path, records) != OCR_OK) {
        fprintf(stderr, "%s: %s\n", argv[0], ocr_ctx_last_error(&ctx));
        return 1;
    }
    printf("LMDB '%s': %d records, read by %d forked children on each side\n\n", path, records, children);

    printf("naive: plain liblmdb environment and read transaction opened in the parent, used in the children\n");
    if ((rc = naive_open(&naive, path))) { fprintf(stderr, "%s: naive open: %s\n", argv[0], mdb_strerror(rc)); return 1; }
    args.naive = &naive;
    args.records = records;
    naive_failed = run_children("naive", children, naive_body, &args);
    printf("  -> %d of %d naive children failed; the parent is unharmed (each failure stayed in its child)\n\n", naive_failed, children);
    mdb_txn_abort(naive.txn);
    mdb_env_close(naive.env);

    printf("ocr-c: ocr_dataset_open_lmdb in the parent, which reads from it, then the same dataset in the children\n");
    if (ocr_dataset_open_lmdb(&ctx, &ds, path) != OCR_OK || ocr_dataset_get(&ctx, &ds, 0, 0, &s) != OCR_OK) {
        fprintf(stderr, "%s: %s\n", argv[0], ocr_ctx_last_error(&ctx));
        return 1;
    }
    ocr_sample_free(&s);
    args.ocr = &ds;
    ocr_failed = run_children("ocr-c", children, ocr_body, &args);
    /* the parent's own environment still serves it */
    for (rc = 0; rc < records && parent_ok; rc++) {
        parent_ok = ocr_dataset_get(&ctx, &ds, rc, OCR_SAMPLE_LABELS_ONLY, &s) == OCR_OK && s.n_polys == 1;
        if (parent_ok) ocr_sample_free(&s);
    }
    printf("  -> %d of %d ocr-c children failed; the parent then read all %d records %s\n", ocr_failed, children, records,
           parent_ok ? "correctly" : "WITH ERRORS");
    if (!parent_ok) printf("  parent: %s\n", ocr_ctx_last_error(&ctx));
    ocr_dataset_close(&ds);
    ocr_ctx_free(&ctx);
    if (dir == tmp) {
        snprintf(path, sizeof path, "%s/data.lmdb/data.mdb", dir); unlink(path);
        snprintf(path, sizeof path, "%s/data.lmdb/lock.mdb", dir); unlink(path);
        snprintf(path, sizeof path, "%s/data.lmdb", dir); rmdir(path);
        rmdir(dir);
    }
    printf("\n%s\n", ocr_failed || !parent_ok ? "FAIL: ocr-c's dataset did not serve every child" : "OK: every ocr-c child read every record correctly");
    return ocr_failed || !parent_ok;
}
