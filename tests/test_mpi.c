/* Data-parallel training (docs/DISTRIBUTED.md): examples/train_dbnet under mpirun, and the pieces it stands on.
   In-process (always):
   - synchronised batch normalisation (ctx->replica_sum, ocr_nn.h): two replicas in two threads, each with half a batch,
     give the outputs, statistics, running statistics and input gradients of one BN over the whole batch, and their
     dgamma/dbeta add up to its (plain and fused with ReLU);
   - a build without MPI started by a launcher as one of 2 processes refuses (examples/ocr_mpi.h), as one of 1 runs.
   With mpirun and ./examples/train_dbnet built with MPI (build.sh does when mpicc is installed; else skipped, saying so):
   - 2 ranks x batch 2 with --sync-bn end 3 SGD steps with the weights and BN statistics of 1 process x batch 4 (within
     float rounding), the same losses, one log, the start line's per-rank and total batch and learning rate, and
     dist.world_size 2 in the checkpoint; without --sync-bn the BN statistics differ (the comparison sees them);
   - the same 2 ranks in two network namespaces joined by a veth pair, started as on two hosts (mpirun's rsh agent
     enters the other namespace), the traffic crossing the veth (its byte counters), with the same weights (root and
     ip netns needed, else skipped);
   - a rank killed at step 2 ends the job within seconds, mpirun naming rank 1; a rank that stops answering makes the
     other exit after --dist-timeout naming its rank and the collective it waited in;
   - a 2-rank run stopped at step 3 and resumed under mpirun ends bit for bit where the uninterrupted one does;
   - --resume with another world size is refused, both ways, naming the run's;
   - a dataset's shards: 11 samples over 2 ranks with batch 2 are 2 batches an epoch (one process: 5);
   - train_rec under mpirun: rank 0 alone logs, a stopped and resumed run ends bit for bit as the uninterrupted one,
     one process cannot resume it.
   Under the sanitizers (OCR_SANITIZED=1) only the in-process cases run: the others run the plain ./examples/train_dbnet. */
#define _POSIX_C_SOURCE 200809L
#define OCR_IMPLEMENTATION
#include "ocr_tensor.h"
#include "ocr_nn.h"
#include "ocr_test.h"
#include "ocr_test_cli.h"
#include "examples/ocr_mpi.h"
#include <pthread.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

static const char *const TRAIN = "./examples/train_dbnet";
/* launched by root too (the test machines run as root); more ranks than cores allowed */
#define MPIRUN "mpirun --allow-run-as-root --oversubscribe"
#define TINY "--size 64 --width 0.05 --val-count 2 --val-size 64 --heldout-count 0 --photos none --log-every 1 --workers 1 --threads 1 --eval-every 0"
#define dir ocr_test_cli_dir
static ocr_ctx ctx;

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* ---------------------------------------------------------------- synchronised BN, two replicas in threads */

enum { BN_N = 4, BN_C = 3, BN_H = 5, BN_W = 6 };
typedef struct {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int arrived, generation;
    double *slot[2];
} replica_link;

/* a two-party barrier */
static void link_wait(replica_link *l) {
    int gen;
    pthread_mutex_lock(&l->mu);
    gen = l->generation;
    if (++l->arrived == 2) { l->arrived = 0; l->generation++; pthread_cond_broadcast(&l->cv); }
    else while (gen == l->generation) pthread_cond_wait(&l->cv, &l->mu);
    pthread_mutex_unlock(&l->mu);
}

typedef struct {
    replica_link *link;
    int index;
    double buf[64];
} replica_user;

/* what MPI_Allreduce(MPI_SUM) does for two ranks: each adds the other's values (in rank order, as a reduction would) */
static int replica_sum(void *user, double *values, int64_t n) {
    replica_user *u = (replica_user *)user;
    int64_t i;
    memcpy(u->buf, values, (size_t)n * sizeof(double));
    u->link->slot[u->index] = u->buf;
    link_wait(u->link);
    for (i = 0; i < n; i++) values[i] = u->link->slot[0][i] + u->link->slot[1][i];
    link_wait(u->link); /* nobody overwrites its slot before both have read */
    return 0;
}

typedef struct {
    replica_user user;
    int relu;
    const float *x, *dy, *gamma, *beta;    /* this replica's half of the batch */
    float y[BN_N / 2 * BN_C * BN_H * BN_W], dx[BN_N / 2 * BN_C * BN_H * BN_W];
    float rmean[BN_C], rvar[BN_C], smean[BN_C], sinv[BN_C], dgamma[BN_C], dbeta[BN_C];
    int rc;
} replica_job;

/* one training step of BN (or BN + ReLU) on x [n, C, H, W] with output gradient dy */
static int bn_step(ocr_ctx *c, int relu, int n, const float *x, const float *dy, const float *gamma, const float *beta, float *y, float *dx,
                   float *rmean, float *rvar, float *smean, float *sinv, float *dgamma, float *dbeta) {
    ocr_tensor tx, ty, tdy, tdx, tg, tb, trm, trv, tsm, tsi, tdg, tdb;
    int rc;
    tx = ocr_tensor_view("x", OCR_F32, OCR_DEVICE_CPU, ocr_shape4(n, BN_C, BN_H, BN_W), (void *)x);
    ty = ocr_tensor_view("y", OCR_F32, OCR_DEVICE_CPU, ocr_shape4(n, BN_C, BN_H, BN_W), y);
    tdy = ocr_tensor_view("dy", OCR_F32, OCR_DEVICE_CPU, ocr_shape4(n, BN_C, BN_H, BN_W), (void *)dy);
    tdx = ocr_tensor_view("dx", OCR_F32, OCR_DEVICE_CPU, ocr_shape4(n, BN_C, BN_H, BN_W), dx);
    tg = ocr_tensor_view("gamma", OCR_F32, OCR_DEVICE_CPU, ocr_shape1(BN_C), (void *)gamma);
    tb = ocr_tensor_view("beta", OCR_F32, OCR_DEVICE_CPU, ocr_shape1(BN_C), (void *)beta);
    trm = ocr_tensor_view("rmean", OCR_F32, OCR_DEVICE_CPU, ocr_shape1(BN_C), rmean);
    trv = ocr_tensor_view("rvar", OCR_F32, OCR_DEVICE_CPU, ocr_shape1(BN_C), rvar);
    tsm = ocr_tensor_view("smean", OCR_F32, OCR_DEVICE_CPU, ocr_shape1(BN_C), smean);
    tsi = ocr_tensor_view("sinv", OCR_F32, OCR_DEVICE_CPU, ocr_shape1(BN_C), sinv);
    tdg = ocr_tensor_view("dgamma", OCR_F32, OCR_DEVICE_CPU, ocr_shape1(BN_C), dgamma);
    tdb = ocr_tensor_view("dbeta", OCR_F32, OCR_DEVICE_CPU, ocr_shape1(BN_C), dbeta);
    if (relu) {
        if ((rc = ocr_nn_batchnorm2d_relu_forward(c, &tx, &tg, &tb, &trm, &trv, 1, 0.1f, 1e-5f, &tsm, &tsi, &ty))) return rc;
        return ocr_nn_batchnorm2d_relu_backward(c, &tx, &ty, &tg, &tsm, &tsi, &tdy, 1, &tdx, &tdg, &tdb);
    }
    if ((rc = ocr_nn_batchnorm2d_forward(c, &tx, &tg, &tb, &trm, &trv, 1, 0.1f, 1e-5f, &tsm, &tsi, &ty))) return rc;
    return ocr_nn_batchnorm2d_backward(c, &tx, &tg, &tsm, &tsi, &tdy, 1, &tdx, &tdg, &tdb);
}

static void *replica_main(void *arg) {
    replica_job *j = (replica_job *)arg;
    ocr_ctx c;
    int k;
    if (ocr_ctx_init(&c, 1, 1) != OCR_OK) { j->rc = -1; return NULL; }
    c.replica_sum = replica_sum;
    c.replica_user = &j->user;
    for (k = 0; k < BN_C; k++) { j->rmean[k] = 0.0f; j->rvar[k] = 1.0f; j->dgamma[k] = j->dbeta[k] = 0.0f; }
    j->rc = bn_step(&c, j->relu, BN_N / 2, j->x, j->dy, j->gamma, j->beta, j->y, j->dx, j->rmean, j->rvar, j->smean, j->sinv, j->dgamma,
                    j->dbeta);
    if (j->rc) fprintf(stderr, "replica %d: %s\n", j->user.index, ocr_ctx_last_error(&c));
    ocr_ctx_free(&c);
    return NULL;
}

static void test_sync_bn_replicas(void) {
    enum { HALF = BN_N / 2 * BN_C * BN_H * BN_W, ALL = 2 * HALF };
    static float x[ALL], dy[ALL], y[ALL], dx[ALL];
    float gamma[BN_C] = {0.7f, 1.3f, -0.4f}, beta[BN_C] = {0.1f, -0.2f, 0.3f};
    float rmean[BN_C], rvar[BN_C], smean[BN_C], sinv[BN_C], dgamma[BN_C], dbeta[BN_C], sum_dg[BN_C], sum_db[BN_C];
    ocr_rng rng;
    int relu, i, k;
    ocr_rng_seed(&rng, 11);
    /* the halves differ in mean and spread: per-replica statistics would differ from the whole batch's */
    for (i = 0; i < ALL; i++) {
        x[i] = (float)(ocr_rng_uniform(&rng) * (i < HALF ? 2.0 : 5.0) + (i < HALF ? -1.0 : 2.0));
        dy[i] = (float)(ocr_rng_uniform(&rng) - 0.5);
    }
    for (relu = 0; relu < 2; relu++) {
        replica_link link;
        replica_job jobs[2];
        pthread_t th[2];
        /* one BN over the whole batch: the reference (backward accumulates into dx) */
        for (k = 0; k < BN_C; k++) { rmean[k] = 0.0f; rvar[k] = 1.0f; dgamma[k] = dbeta[k] = 0.0f; }
        memset(dx, 0, sizeof dx);
        OCR_CHECK_OK(&ctx, bn_step(&ctx, relu, BN_N, x, dy, gamma, beta, y, dx, rmean, rvar, smean, sinv, dgamma, dbeta));
        memset(&link, 0, sizeof link);
        pthread_mutex_init(&link.mu, NULL);
        pthread_cond_init(&link.cv, NULL);
        for (k = 0; k < 2; k++) {
            memset(&jobs[k], 0, sizeof jobs[k]);
            jobs[k].user.link = &link;
            jobs[k].user.index = k;
            jobs[k].relu = relu;
            jobs[k].x = x + k * HALF;
            jobs[k].dy = dy + k * HALF;
            jobs[k].gamma = gamma;
            jobs[k].beta = beta;
            OCR_CHECK(pthread_create(&th[k], NULL, replica_main, &jobs[k]) == 0);
        }
        for (k = 0; k < 2; k++) pthread_join(th[k], NULL);
        pthread_mutex_destroy(&link.mu);
        pthread_cond_destroy(&link.cv);
        OCR_CHECK_MSG(jobs[0].rc == 0 && jobs[1].rc == 0, "a replica failed (relu %d)", relu);
        for (k = 0; k < 2; k++) {
            char what[64];
            snprintf(what, sizeof what, "replica %d y (relu %d)", k, relu);
            OCR_CHECK(ocr_test_close(what, jobs[k].y, y + k * HALF, HALF, 1e-5, 1e-6));
            snprintf(what, sizeof what, "replica %d dx (relu %d)", k, relu);
            OCR_CHECK(ocr_test_close(what, jobs[k].dx, dx + k * HALF, HALF, 1e-4, 1e-6));
            snprintf(what, sizeof what, "replica %d mean", k);
            OCR_CHECK(ocr_test_close(what, jobs[k].smean, smean, BN_C, 1e-6, 1e-7));
            snprintf(what, sizeof what, "replica %d invstd", k);
            OCR_CHECK(ocr_test_close(what, jobs[k].sinv, sinv, BN_C, 1e-6, 1e-7));
            snprintf(what, sizeof what, "replica %d running mean", k);
            OCR_CHECK(ocr_test_close(what, jobs[k].rmean, rmean, BN_C, 1e-6, 1e-7));
            snprintf(what, sizeof what, "replica %d running var", k);
            OCR_CHECK(ocr_test_close(what, jobs[k].rvar, rvar, BN_C, 1e-6, 1e-7));
        }
        /* each replica's share of the parameter gradients: what the gradient all-reduce adds up */
        for (k = 0; k < BN_C; k++) {
            sum_dg[k] = jobs[0].dgamma[k] + jobs[1].dgamma[k];
            sum_db[k] = jobs[0].dbeta[k] + jobs[1].dbeta[k];
        }
        OCR_CHECK(ocr_test_close("dgamma summed", sum_dg, dgamma, BN_C, 1e-5, 1e-6));
        OCR_CHECK(ocr_test_close("dbeta summed", sum_db, dbeta, BN_C, 1e-5, 1e-6));
        /* and one replica alone (its own statistics) does not: the check sees the synchronisation */
        {
            float y_own[HALF], dx_own[HALF] = {0}, rm[BN_C] = {0, 0, 0}, rv[BN_C] = {1, 1, 1}, sm[BN_C], si[BN_C], dg[BN_C] = {0, 0, 0}, db[BN_C] = {0, 0, 0};
            double worst = 0;
            OCR_CHECK_OK(&ctx, bn_step(&ctx, relu, BN_N / 2, x, dy, gamma, beta, y_own, dx_own, rm, rv, sm, si, dg, db));
            for (i = 0; i < HALF; i++) worst = fabs(y_own[i] - y[i]) > worst ? fabs(y_own[i] - y[i]) : worst;
            OCR_CHECK_MSG(worst > 0.1, "half a batch normalised alone is within %g of the whole batch's: the test cannot tell", worst);
        }
    }
}

/* ---------------------------------------------------------------- a build without MPI under a launcher */

static void test_no_mpi_build_refuses_launch(void) {
    ocr_dist d;
    int saved = dup(2), devnull = open("/dev/null", O_WRONLY), rc_two, rc_one;
    /* this test is built without OCR_WITH_MPI: the trainer's situation in a build without MPI */
    setenv("OMPI_COMM_WORLD_SIZE", "2", 1);
    if (devnull >= 0) dup2(devnull, 2);
    rc_two = ocr_dist_init(&d, "test_mpi", NULL, NULL, 0);
    if (rc_two == 0) ocr_dist_finish(&d);
    setenv("OMPI_COMM_WORLD_SIZE", "1", 1);
    rc_one = ocr_dist_init(&d, "test_mpi", NULL, NULL, 0);
    if (saved >= 0) { dup2(saved, 2); close(saved); }
    if (devnull >= 0) close(devnull);
    unsetenv("OMPI_COMM_WORLD_SIZE");
    OCR_CHECK_MSG(rc_two != 0, "one of 2 launched processes without MPI went on (status %d)", rc_two);
    OCR_CHECK_MSG(rc_one == 0 && d.world == 1 && d.rank == 0, "one of 1 launched processes: status %d, world %d, rank %d", rc_one, d.world, d.rank);
    if (rc_one == 0) ocr_dist_finish(&d);
}

/* ---------------------------------------------------------------- train_dbnet under mpirun */

static char g_skip_why[256]; /* why the mpirun cases cannot run here; empty when they can */

/* Whether mpirun runs ./examples/train_dbnet as 2 ranks: a build without MPI says so (and its refusal is checked). */
static int mpi_ready(void) {
    static int checked;
    char cmd[1024], *out, *err;
    int rc;
    if (checked) return g_skip_why[0] == 0;
    checked = 1;
    if (system("command -v mpirun >/dev/null 2>&1") != 0) {
        snprintf(g_skip_why, sizeof g_skip_why, "no mpirun (build.sh installs openmpi-bin)");
        return 0;
    }
    snprintf(cmd, sizeof cmd, MPIRUN " -np 2 %s %s --steps 1 --batch 2 --out %s/probe </dev/null", TRAIN, TINY, dir);
    rc = ocr_test_run(cmd, &out, &err);
    if (strstr(err, "built without MPI")) {
        OCR_CHECK_MSG(rc != 0, "the build without MPI went on under mpirun: %s", err);
        snprintf(g_skip_why, sizeof g_skip_why, "%s was built without MPI (no mpicc when it was built); it refused mpirun, as it must", TRAIN);
    } else if (rc != 0) {
        OCR_CHECK_MSG(0, "'%s' exited %d: %s", cmd, rc, err);
        snprintf(g_skip_why, sizeof g_skip_why, "mpirun failed");
    }
    free(out);
    free(err);
    return g_skip_why[0] == 0;
}

/* Runs cmd, which must exit with code (-1: anything but 0); returns its stderr (free it). */
static char *run_expect(const char *cmd, int code, char **out_text) {
    char *out, *err;
    int rc = ocr_test_run(cmd, &out, &err);
    OCR_CHECK_MSG(code < 0 ? rc != 0 : rc == code, "'%s' exited %d, expected %s%d: %s", cmd, rc, code < 0 ? "not " : "", code < 0 ? 0 : code, err);
    if (out_text) *out_text = out;
    else free(out);
    return err;
}

/* The largest |a - b| over a tensor relative to its largest |a| (floor 1e-3), the worst over the F32 tensors of two
   checkpoints whose names contain `only` (NULL: all); other tensors must be equal. -1 when they do not pair up. */
static double checkpoint_diff(const char *pa, const char *pb, const char *only, char *worst_name, size_t cap) {
    ocr_safetensors a, b;
    double worst = 0;
    int i;
    if (ocr_safetensors_open(&ctx, &a, pa) != OCR_OK) return -1;
    if (ocr_safetensors_open(&ctx, &b, pb) != OCR_OK) { ocr_safetensors_close(&a); return -1; }
    if (worst_name) worst_name[0] = 0;
    if (a.n_entries != b.n_entries) worst = -1;
    for (i = 0; i < a.n_entries && worst >= 0; i++) {
        const ocr_safetensors_entry *ea = &a.entries[i];
        int j = ocr_safetensors_find(&b, ea->name);
        const ocr_safetensors_entry *eb = j >= 0 ? &b.entries[j] : NULL;
        const unsigned char *da = a.bytes + a.data_start + ea->begin, *dbb;
        size_t n;
        if (!eb || eb->end - eb->begin != ea->end - ea->begin) { worst = -1; break; }
        dbb = b.bytes + b.data_start + eb->begin;
        if (only && !strstr(ea->name, only)) continue;
        if (ea->dtype != OCR_F32) {
            if (memcmp(da, dbb, ea->end - ea->begin) != 0) { worst = 1e9; if (worst_name) snprintf(worst_name, cap, "%s", ea->name); }
            continue;
        }
        {
            const float *fa = (const float *)(const void *)da, *fb = (const float *)(const void *)dbb;
            double amax = 1e-3, dmax = 0;
            n = (ea->end - ea->begin) / sizeof(float);
            while (n--) {
                if (fabs(fa[n]) > amax) amax = fabs(fa[n]);
                if (fabs(fa[n] - fb[n]) > dmax) dmax = fabs(fa[n] - fb[n]);
            }
            if (dmax / amax > worst) { worst = dmax / amax; if (worst_name) snprintf(worst_name, cap, "%s", ea->name); }
        }
    }
    ocr_safetensors_close(&a);
    ocr_safetensors_close(&b);
    return worst;
}

/* losses[s] = train/loss at step s (1..max) from run/metrics.jsonl, NAN where absent */
static void read_losses(const char *run, double *losses, int max) {
    char path[300], *text, *line;
    int i;
    for (i = 0; i <= max; i++) losses[i] = NAN;
    snprintf(path, sizeof path, "%s/metrics.jsonl", run);
    text = ocr_test_read_text(path);
    OCR_CHECK_MSG(text != NULL, "no %s", path);
    for (line = text; line && *line;) {
        char *end = strchr(line, '\n');
        size_t len = end ? (size_t)(end - line) : strlen(line);
        double step = ocr_test_json_number(line, len, "step"), loss = ocr_test_json_number(line, len, "train/loss");
        if (step >= 1 && step <= max && !isnan(loss)) losses[(int)step] = loss;
        line = end ? end + 1 : line + len;
    }
    free(text);
}

static int count_of(const char *text, const char *needle) {
    int n = 0;
    const char *at;
    for (at = text; (at = strstr(at, needle)) != NULL; at += strlen(needle)) n++;
    return n;
}

/* SGD (no moments that magnify rounding in gradients of nearly 0), 3 steps */
#define EQUAL_ARGS TINY " --optimizer sgd --lr 0.02 --steps 3"

/* one process with batch 4: the reference of the 2-rank runs (made once) */
static const char *one_process_run(void) {
    static char run[128];
    if (!run[0]) {
        char cmd[1024];
        snprintf(run, sizeof run, "%s/one", dir);
        snprintf(cmd, sizeof cmd, "%s %s --batch 4 --out %s", TRAIN, EQUAL_ARGS, run);
        free(run_expect(cmd, 0, NULL));
    }
    return run;
}

static void test_two_ranks_equal_doubled_batch(void) {
    char cmd[1024], a[300], b[300], worst[128], *out, *err;
    double la[4], lb[4], d;
    int s;
    ocr_safetensors st;
    if (!mpi_ready()) { ocr_test_skip(g_skip_why); return; }
    snprintf(a, sizeof a, "%s/last.safetensors", one_process_run());
    snprintf(cmd, sizeof cmd, MPIRUN " -np 2 %s %s --batch 2 --sync-bn --out %s/two </dev/null", TRAIN, EQUAL_ARGS, dir);
    err = run_expect(cmd, 0, &out);
    OCR_CHECK_MSG(strstr(err, "batch 2 per rank, 4 in total") && strstr(err, "learning rate 0.02 per rank and in total") &&
                      strstr(err, "data parallel over 2 ranks"), "the start line does not state the batch and learning rate per rank and in total: %s", err);
    OCR_CHECK_MSG(count_of(out, "step 1/3 ") == 1 && count_of(err, "train_dbnet: training DB-ResNet") == 1,
                  "rank 0 alone logs: 'step 1/3' %d times, the start line %d times", count_of(out, "step 1/3 "),
                  count_of(err, "train_dbnet: training DB-ResNet"));
    free(out);
    free(err);
    snprintf(b, sizeof b, "%s/two/last.safetensors", dir);
    d = checkpoint_diff(a, b, NULL, worst, sizeof worst);
    OCR_CHECK_MSG(d >= 0 && d < 1e-5, "2 ranks x 2 with --sync-bn end %g (relative, in %s) from 1 process x 4", d, worst);
    snprintf(a, sizeof a, "%s", one_process_run());
    read_losses(a, la, 3);
    snprintf(b, sizeof b, "%s/two", dir);
    read_losses(b, lb, 3);
    for (s = 1; s <= 3; s++)
        OCR_CHECK_MSG(fabs(la[s] - lb[s]) <= 1e-5 * fabs(la[s]), "step %d: loss %.9g with 1 process, %.9g with 2 ranks", s, la[s], lb[s]);
    snprintf(b, sizeof b, "%s/two/last.safetensors", dir);
    OCR_CHECK_OK(&ctx, ocr_safetensors_open(&ctx, &st, b));
    if (!ocr_test__case_failed) {
        const char *w = ocr_safetensors_meta(&st, "dist.world_size"), *sb = ocr_safetensors_meta(&st, "dist.sync_bn");
        OCR_CHECK_MSG(w && strcmp(w, "2") == 0 && sb && strcmp(sb, "1") == 0, "dist.world_size %s, dist.sync_bn %s", w ? w : "-", sb ? sb : "-");
        ocr_safetensors_close(&st);
    }
    /* each rank's own BN statistics: rank 0's running statistics are its half batch's, visibly */
    snprintf(cmd, sizeof cmd, MPIRUN " -np 2 %s %s --batch 2 --out %s/two_own_bn </dev/null", TRAIN, EQUAL_ARGS, dir);
    free(run_expect(cmd, 0, NULL));
    snprintf(a, sizeof a, "%s/last.safetensors", one_process_run());
    snprintf(b, sizeof b, "%s/two_own_bn/last.safetensors", dir);
    d = checkpoint_diff(a, b, "running_var", worst, sizeof worst);
    OCR_CHECK_MSG(d > 1e-3, "without --sync-bn the running variances are within %g of the whole batch's: the comparison cannot tell", d);
}

/* Two network namespaces joined by a veth pair stand in for two hosts: mpirun runs in the first, its rsh agent starts
   the daemon of the second inside it, and the ranks talk TCP over the veth only. */
static void test_two_namespaces(void) {
    char ns[2][32], veth[2][16], ip[2][32], subnet[32], agent[300], cmd[2048], path[300], worst[128], *out, *err;
    long long rx0 = -1, rx1 = -1;
    int k, unique = (int)(getpid() % 200) + 20, ok;
    double d;
    FILE *f;
    if (!mpi_ready()) { ocr_test_skip(g_skip_why); return; }
    if (geteuid() != 0) { ocr_test_skip("network namespaces need root"); return; }
    if (system("command -v ip >/dev/null 2>&1") != 0) { ocr_test_skip("no ip command (iproute2)"); return; }
    for (k = 0; k < 2; k++) {
        snprintf(ns[k], sizeof ns[k], "ocrmpi%d%c", (int)getpid(), 'a' + k);
        snprintf(veth[k], sizeof veth[k], "om%d%c", (int)getpid() % 100000, 'a' + k);
        snprintf(ip[k], sizeof ip[k], "10.231.%d.%d", unique, k + 1);
    }
    snprintf(subnet, sizeof subnet, "10.231.%d.0/24", unique);
    snprintf(cmd, sizeof cmd,
             "ip netns add %s && ip netns add %s && ip link add %s type veth peer name %s && ip link set %s netns %s && "
             "ip link set %s netns %s && ip -n %s addr add %s/24 dev %s && ip -n %s addr add %s/24 dev %s && ip -n %s link set %s up && "
             "ip -n %s link set %s up && ip -n %s link set lo up && ip -n %s link set lo up",
             ns[0], ns[1], veth[0], veth[1], veth[0], ns[0], veth[1], ns[1], ns[0], ip[0], veth[0], ns[1], ip[1], veth[1], ns[0], veth[0], ns[1],
             veth[1], ns[0], ns[1]);
    snprintf(path, sizeof path, "%s/netns_setup.log", dir);
    {
        char full[2700];
        snprintf(full, sizeof full, "(%s) >%s 2>&1", cmd, path);
        ok = system(full) == 0;
    }
    if (!ok) {
        char *log = ocr_test_read_text(path), why[250];
        snprintf(why, sizeof why, "this container cannot make network namespaces joined by a veth pair: %.150s", log ? log : "");
        free(log);
        snprintf(cmd, sizeof cmd, "ip netns del %s 2>/dev/null; ip netns del %s 2>/dev/null; true", ns[0], ns[1]);
        if (system(cmd) != 0) { /* nothing to undo */ }
        ocr_test_skip(why);
        return;
    }
    /* plm_rsh_agent: "<host> <command>" -> the command inside that host's namespace */
    snprintf(agent, sizeof agent, "%s/netns_rsh", dir);
    f = fopen(agent, "w");
    OCR_CHECK(f != NULL);
    if (f) {
        fprintf(f, "#!/bin/sh\nhost=$1; shift\ncase \"$host\" in %s) ns=%s ;; %s) ns=%s ;; *) echo \"netns_rsh: no host $host\" >&2; exit 1 ;; esac\n"
                   "exec ip netns exec \"$ns\" /bin/sh -c \"$*\"\n", ip[0], ns[0], ip[1], ns[1]);
        fclose(f);
        chmod(agent, 0755);
    }
    snprintf(cmd, sizeof cmd, "ip netns exec %s cat /sys/class/net/%s/statistics/rx_bytes", ns[1], veth[1]);
    if (ocr_test_run(cmd, &out, &err) == 0) rx0 = atoll(out);
    free(out); free(err);
    snprintf(cmd, sizeof cmd,
             "timeout 120 ip netns exec %s " MPIRUN " --mca plm_rsh_agent %s --mca plm_rsh_no_tree_spawn 1 --mca btl tcp,self "
             "--mca btl_tcp_if_include %s --mca oob_tcp_if_include %s --host %s,%s -np 2 %s %s --batch 2 --sync-bn --out %s/netns </dev/null",
             ns[0], agent, subnet, subnet, ip[0], ip[1], TRAIN, EQUAL_ARGS, dir);
    err = run_expect(cmd, 0, NULL);
    OCR_CHECK_MSG(strstr(err, "data parallel over 2 ranks (MPI, 1 on this host)"), "the ranks do not see two hosts: %s", err);
    free(err);
    snprintf(cmd, sizeof cmd, "ip netns exec %s cat /sys/class/net/%s/statistics/rx_bytes", ns[1], veth[1]);
    if (ocr_test_run(cmd, &out, &err) == 0) rx1 = atoll(out);
    free(out); free(err);
    /* 3 steps: at least the gradients (38,546 floats) and the gathered maps crossed */
    OCR_CHECK_MSG(rx0 >= 0 && rx1 - rx0 > 3 * 38546 * 4, "%lld bytes arrived over the veth (before %lld): the ranks did not talk through it",
                  rx1 - rx0, rx0);
    snprintf(path, sizeof path, "%s/last.safetensors", one_process_run());
    snprintf(cmd, sizeof cmd, "%s/netns/last.safetensors", dir);
    d = checkpoint_diff(path, cmd, NULL, worst, sizeof worst);
    OCR_CHECK_MSG(d >= 0 && d < 1e-5, "2 ranks over the veth end %g (relative, in %s) from 1 process x 4", d, worst);
    snprintf(cmd, sizeof cmd, "ip netns del %s; ip netns del %s", ns[0], ns[1]);
    OCR_CHECK_MSG(system(cmd) == 0, "could not remove the namespaces %s and %s", ns[0], ns[1]);
}

static void test_dead_or_hung_rank(void) {
    char cmd[1024], *err;
    double t0, el;
    if (!mpi_ready()) { ocr_test_skip(g_skip_why); return; }
    /* killed: mpirun ends the job and names the rank */
    snprintf(cmd, sizeof cmd, "OCR_TEST_DIST_KILL=1:2 timeout 60 " MPIRUN " -np 2 %s %s --steps 6 --batch 2 --out %s/killed </dev/null", TRAIN,
             TINY, dir);
    t0 = now_s();
    err = run_expect(cmd, -1, NULL);
    el = now_s() - t0;
    OCR_CHECK_MSG(el < 30, "the job took %.1f s to end after rank 1 was killed", el);
    OCR_CHECK_MSG(strstr(err, "rank 1") && strstr(err, "signal 9"), "the error does not name the killed rank 1: %s", err);
    free(err);
    /* hung: the other exits after --dist-timeout, naming itself and the collective */
    snprintf(cmd, sizeof cmd, "OCR_TEST_DIST_HANG=1:2 timeout 60 " MPIRUN " -np 2 %s %s --steps 6 --batch 2 --dist-timeout 2 --out %s/hung </dev/null",
             TRAIN, TINY, dir);
    t0 = now_s();
    err = run_expect(cmd, -1, NULL);
    el = now_s() - t0;
    OCR_CHECK_MSG(el < 30, "the job took %.1f s to end with rank 1 hung and --dist-timeout 2", el);
    OCR_CHECK_MSG(strstr(err, "rank 0 of 2") && strstr(err, "has waited") && strstr(err, "at step 2"),
                  "rank 0 did not say it waited in vain at step 2: %s", err);
    free(err);
}

/* --dist-loss local and each rank's own BN: the other paths, and what a resume must restore for them */
#define RESUME_ARGS TINY " --steps 6 --batch 2 --save-every 2 --dist-loss local"

static void test_resume_under_mpi(void) {
    char cmd[1024], a[300], b[300], worst[128];
    double la[7], lb[7], d;
    int s;
    if (!mpi_ready()) { ocr_test_skip(g_skip_why); return; }
    snprintf(cmd, sizeof cmd, MPIRUN " -np 2 %s %s --out %s/full </dev/null", TRAIN, RESUME_ARGS, dir);
    free(run_expect(cmd, 0, NULL));
    snprintf(cmd, sizeof cmd, MPIRUN " -np 2 %s %s --stop-at 3 --out %s/part </dev/null", TRAIN, RESUME_ARGS, dir);
    free(run_expect(cmd, 130, NULL));
    /* another world size is refused, naming the run's */
    snprintf(cmd, sizeof cmd, "%s --resume %s/part", TRAIN, dir);
    ocr_test_expect_exit(cmd, 1, "was trained by 2 processes");
    snprintf(cmd, sizeof cmd, MPIRUN " -np 2 %s --resume %s/part --threads 1 --workers 1 --log-every 1 </dev/null", TRAIN, dir);
    free(run_expect(cmd, 0, NULL));
    snprintf(a, sizeof a, "%s/full", dir);
    snprintf(b, sizeof b, "%s/part", dir);
    read_losses(a, la, 6);
    read_losses(b, lb, 6);
    for (s = 1; s <= 6; s++) OCR_CHECK_MSG(la[s] == lb[s], "step %d: loss %.9g uninterrupted, %.9g stopped at 3 and resumed", s, la[s], lb[s]);
    snprintf(a, sizeof a, "%s/full/last.safetensors", dir);
    snprintf(b, sizeof b, "%s/part/last.safetensors", dir);
    d = checkpoint_diff(a, b, NULL, worst, sizeof worst);
    OCR_CHECK_MSG(d == 0, "the resumed run's weights differ from the uninterrupted run's by %g (in %s)", d, worst);
}

static void test_resume_other_world_refused(void) {
    char cmd[1024], *err;
    if (!mpi_ready()) { ocr_test_skip(g_skip_why); return; }
    snprintf(cmd, sizeof cmd, "%s %s --steps 4 --batch 2 --stop-at 1 --out %s/single", TRAIN, TINY, dir);
    free(run_expect(cmd, 130, NULL));
    snprintf(cmd, sizeof cmd, MPIRUN " -np 2 %s --resume %s/single </dev/null", TRAIN, dir);
    err = run_expect(cmd, -1, NULL);
    OCR_CHECK_MSG(strstr(err, "was trained by 1 process (dist.world_size") && strstr(err, "and this is 2"),
                  "a 1-process run resumed by 2 ranks is not refused naming both: %s", err);
    free(err);
}

/* A dataset (an ICDAR folder of 11 scenes): each of 2 ranks gets 5 (sample i to rank i mod 2, the 11th left out),
   2 batches of 2 per epoch, so 2 epochs are 4 steps; one process with batch 2 has 5 batches an epoch, 10 steps. */
static void test_dataset_shards(void) {
    char cmd[1024], *out, *err, *last;
    int rank_steps, one_steps;
    if (!mpi_ready()) { ocr_test_skip(g_skip_why); return; }
    snprintf(cmd, sizeof cmd, "./examples/make_synth --count 11 --size 64 --photos none %s/icdar >/dev/null", dir);
    free(run_expect(cmd, 0, NULL));
    snprintf(cmd, sizeof cmd, MPIRUN " -np 2 %s %s --data icdar:%s/icdar --epochs 2 --batch 2 --out %s/shards </dev/null", TRAIN, TINY, dir, dir);
    err = run_expect(cmd, 0, &out);
    last = strrchr(out, '{');
    rank_steps = last ? (int)ocr_test_json_number(last, strcspn(last, "\n"), "steps") : -1;
    OCR_CHECK_MSG(rank_steps == 4, "2 ranks over 11 samples, batch 2, 2 epochs: %d steps, expected 4: %s", rank_steps, err);
    free(out);
    free(err);
    snprintf(cmd, sizeof cmd, "%s %s --data icdar:%s/icdar --epochs 2 --batch 2 --out %s/shards_one", TRAIN, TINY, dir, dir);
    free(run_expect(cmd, 0, &out));
    last = strrchr(out, '{');
    one_steps = last ? (int)ocr_test_json_number(last, strcspn(last, "\n"), "steps") : -1;
    OCR_CHECK_MSG(one_steps == 10, "1 process over 11 samples, batch 2, 2 epochs: %d steps, expected 10", one_steps);
    free(out);
}

/* train_rec under mpirun: rank 0 alone logs, the crops are counted over both ranks, a run stopped at step 2 and resumed
   ends bit for bit where the uninterrupted one does, and one process cannot resume it. */
#define REC_ARGS "--steps 4 --eval-every 2 --val-count 12 --heldout-count 0 --channels 8,8,8,8,8,8 --hidden 8 --log-every 1 --save-every 2 --threads 1"
static void test_train_rec(void) {
    char cmd[1024], a[300], b[300], worst[128], *out, *err;
    double la[5], lb[5], d;
    int s;
    if (!mpi_ready()) { ocr_test_skip(g_skip_why); return; }
    if (access("./examples/train_rec", X_OK) != 0) { OCR_CHECK_MSG(0, "./examples/train_rec is not built"); return; }
    snprintf(cmd, sizeof cmd, MPIRUN " -np 2 ./examples/train_rec " REC_ARGS " --out %s/rec_full </dev/null", dir);
    err = run_expect(cmd, 0, &out);
    OCR_CHECK_MSG(strstr(err, "train_rec: data parallel over 2 ranks") && count_of(out, "step 1/4 ") == 1,
                  "no start line of 2 ranks, or not rank 0 alone logging: %s\n%s", err, out);
    free(out);
    free(err);
    snprintf(cmd, sizeof cmd, MPIRUN " -np 2 ./examples/train_rec " REC_ARGS " --stop-at 2 --out %s/rec_part </dev/null", dir);
    free(run_expect(cmd, 130, NULL));
    snprintf(cmd, sizeof cmd, "./examples/train_rec --resume %s/rec_part", dir);
    ocr_test_expect_exit(cmd, 1, "was trained by 2 processes");
    snprintf(cmd, sizeof cmd, MPIRUN " -np 2 ./examples/train_rec --resume %s/rec_part --threads 1 --log-every 1 </dev/null", dir);
    free(run_expect(cmd, 0, NULL));
    snprintf(a, sizeof a, "%s/rec_full", dir);
    snprintf(b, sizeof b, "%s/rec_part", dir);
    read_losses(a, la, 4);
    read_losses(b, lb, 4);
    for (s = 1; s <= 4; s++) OCR_CHECK_MSG(la[s] == lb[s], "train_rec step %d: loss %.9g uninterrupted, %.9g resumed", s, la[s], lb[s]);
    snprintf(a, sizeof a, "%s/rec_full/last.safetensors", dir);
    snprintf(b, sizeof b, "%s/rec_part/last.safetensors", dir);
    d = checkpoint_diff(a, b, NULL, worst, sizeof worst);
    OCR_CHECK_MSG(d == 0, "train_rec: the resumed run's weights differ by %g (in %s)", d, worst);
}

int main(int argc, char **argv) {
    char cmd[128];
    ocr_test_init(argc, argv);
    if (ocr_ctx_init(&ctx, 1, 7) != OCR_OK) return 1;
    ocr_test_cli_ctx = &ctx;
    snprintf(dir, sizeof dir, "/tmp/ocr_test_mpi.XXXXXX");
    if (!mkdtemp(dir)) { fprintf(stderr, "test_mpi: mkdtemp failed\n"); return 1; }
    setenv("OMPI_ALLOW_RUN_AS_ROOT", "1", 1); /* the daemons mpirun starts for other hosts read these */
    setenv("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1", 1);
    OCR_TEST_RUN(test_sync_bn_replicas);
    OCR_TEST_RUN(test_no_mpi_build_refuses_launch);
    if (ocr_test_sanitized()) {
        printf("test_mpi: OCR_SANITIZED=1: the cases that run %s under mpirun ran in the plain pass\n", TRAIN);
    } else if (access(TRAIN, X_OK) != 0) {
        fprintf(stderr, "test_mpi: %s must be built first (./build.sh builds it)\n", TRAIN);
        printf("FAIL program_built\n");
        ocr_test__failed++;
    } else {
        OCR_TEST_RUN(test_two_ranks_equal_doubled_batch);
        OCR_TEST_RUN(test_two_namespaces);
        OCR_TEST_RUN(test_dead_or_hung_rank);
        OCR_TEST_RUN(test_resume_under_mpi);
        OCR_TEST_RUN(test_resume_other_world_refused);
        OCR_TEST_RUN(test_dataset_shards);
        OCR_TEST_RUN(test_train_rec);
    }
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    if (system(cmd) != 0) fprintf(stderr, "test_mpi: could not remove %s\n", dir);
    ocr_ctx_free(&ctx);
    return ocr_test_finish();
}
