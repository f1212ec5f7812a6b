/* ocr_mpi.h - data parallelism for the example trainers: the processes of an MPI job (Open MPI; MPICH's and Slurm's
   launcher variables are read too, untested) and, in the
   CUDA build with OCR_WITH_NCCL, NCCL for device buffers. Not part of the library (whose headers need no MPI): plain
   static functions, included by a trainer after the ocr-c headers and ocr_example.h. docs/DISTRIBUTED.md has the
   launch commands.

   Built with -DOCR_WITH_MPI (build.sh adds it and mpicc's flags when mpicc is installed), ocr_dist_init joins the job
   when the process was started by an MPI launcher (mpirun, srun, hydra) and otherwise stays a single process without
   touching MPI. Built without it, a process started as one of several by a launcher says so and the trainer exits:
   N copies training alone on the same data would look like a distributed run and be N single ones.

   Every collective is checked (MPI_ERRORS_RETURN: a failure names the rank, the call and what it carried, then the
   job is aborted) and watched: a collective that waits longer than the timeout (a rank died without the launcher
   noticing, or hangs) ends this process with a message naming its rank and the collective, and the launcher then
   ends the job. A rank that exits or is killed makes mpirun end the others and name it ("process rank 1 ... exited
   on signal 9"). Only the calling thread uses MPI (MPI_THREAD_FUNNELED); the watchdog is a thread that never calls
   it. */
#ifndef OCR_MPI_H
#define OCR_MPI_H
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <stdint.h>
#include <limits.h>
#include <pthread.h>
#include <time.h>
#include <unistd.h>
#ifdef OCR_WITH_MPI
#include <mpi.h>
#endif
#ifdef OCR_WITH_NCCL
#include <cuda_runtime.h>
#include <nccl.h>
#endif

#if defined(__GNUC__) || defined(__clang__)
#define OCR_DIST_UNUSED __attribute__((unused))
#else
#define OCR_DIST_UNUSED
#endif

typedef struct {
    const char *prog;        /* prefix of every message */
    int rank, world;         /* 0 and 1 for a single process */
    int local_rank, local_world; /* among the job's processes on this host */
    int mpi;                 /* MPI was initialised (and must be finalised) */
    double timeout;          /* seconds a collective may wait before the watchdog ends the process; <= 0: no watchdog */
    int64_t step;            /* named in messages (the caller keeps it current) */
    /* the watchdog: what the calling thread waits in, since when (0: none) */
    pthread_mutex_t mu;
    pthread_t watchdog;
    int watchdog_running, stopping;
    const char *waiting_in;
    double waiting_since;
#ifdef OCR_WITH_NCCL
    ncclComm_t nccl;
    cudaStream_t stream;
    int nccl_ready;
#endif
} ocr_dist;

static OCR_DIST_UNUSED void ocr_dist__sleep(double seconds) {
    struct timespec ts;
    ts.tv_sec = (time_t)seconds;
    ts.tv_nsec = (long)((seconds - (double)ts.tv_sec) * 1e9);
    nanosleep(&ts, NULL);
}

/* The number of processes a launcher says this one belongs to (Open MPI, PMI/PMIx as Slurm and MPICH set them),
   and the variable that said it; 0 when none did. */
static OCR_DIST_UNUSED int ocr_dist__launcher_size(const char **var) {
    static const char *const vars[] = {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_SIZE", "MPI_LOCALNRANKS"};
    int i;
    for (i = 0; i < (int)(sizeof vars / sizeof vars[0]); i++) {
        const char *v = getenv(vars[i]);
        if (v && atoi(v) > 0) { *var = vars[i]; return atoi(v); }
    }
    *var = NULL;
    return 0;
}
/* PMIX_RANK alone marks a PMIx launch (srun --mpi=pmix) that exports no size */
static OCR_DIST_UNUSED int ocr_dist__launched(void) {
    const char *var;
    return ocr_dist__launcher_size(&var) > 0 || getenv("PMIX_RANK") || getenv("PMI_RANK");
}

static OCR_DIST_UNUSED void *ocr_dist__watch(void *arg) {
    ocr_dist *d = (ocr_dist *)arg;
    for (;;) {
        const char *what;
        double since;
        pthread_mutex_lock(&d->mu);
        what = d->waiting_in;
        since = d->waiting_since;
        if (d->stopping) { pthread_mutex_unlock(&d->mu); return NULL; }
        pthread_mutex_unlock(&d->mu);
        if (what && since > 0 && ocr_monotonic_seconds() - since > d->timeout) {
            fprintf(stderr, "%s: rank %d of %d: %s at step %lld has waited %.0f s for the other ranks: one of them died or hangs "
                            "(--dist-timeout %g); exiting\n", d->prog, d->rank, d->world, what, (long long)d->step,
                    ocr_monotonic_seconds() - since, d->timeout);
            fflush(stderr);
            _exit(1); /* the launcher ends the others */
        }
        ocr_dist__sleep(0.2);
    }
}

static OCR_DIST_UNUSED void ocr_dist__enter(ocr_dist *d, const char *what) {
    if (!d->watchdog_running) return;
    pthread_mutex_lock(&d->mu);
    d->waiting_in = what;
    d->waiting_since = ocr_monotonic_seconds();
    pthread_mutex_unlock(&d->mu);
}
static OCR_DIST_UNUSED void ocr_dist__leave(ocr_dist *d) {
    if (!d->watchdog_running) return;
    pthread_mutex_lock(&d->mu);
    d->waiting_in = NULL;
    d->waiting_since = 0;
    pthread_mutex_unlock(&d->mu);
}

/* Ends the whole job after a message naming this rank (a single process just exits). */
static OCR_DIST_UNUSED void ocr_dist_abort(ocr_dist *d, int code) {
    fflush(stdout);
    fflush(stderr);
#ifdef OCR_WITH_MPI
    if (d->mpi && d->world > 1) MPI_Abort(MPI_COMM_WORLD, code);
#endif
    (void)d;
    exit(code);
}

#ifdef OCR_WITH_MPI
/* A failed MPI call: the message names the rank, the call and what it carried; then the job ends. */
static OCR_DIST_UNUSED void ocr_dist__check(ocr_dist *d, int rc, const char *call, const char *what) {
    char msg[MPI_MAX_ERROR_STRING];
    int len = 0;
    ocr_dist__leave(d);
    if (rc == MPI_SUCCESS) return;
    if (MPI_Error_string(rc, msg, &len) != MPI_SUCCESS) snprintf(msg, sizeof msg, "error %d", rc);
    fprintf(stderr, "%s: rank %d of %d: %s (%s) at step %lld failed: %s\n", d->prog, d->rank, d->world, call, what, (long long)d->step, msg);
    ocr_dist_abort(d, 1);
}
#endif

/* Joins the MPI job when launched by one (timeout: the watchdog's seconds, <= 0 for none). Returns 0, or the exit
   status the program should end with after the message it printed (a launched process in a build without MPI). */
static OCR_DIST_UNUSED int ocr_dist_init(ocr_dist *d, const char *prog, int *argc, char ***argv, double timeout) {
    const char *var = NULL;
    int n = ocr_dist__launcher_size(&var);
    memset(d, 0, sizeof *d);
    d->prog = prog;
    d->world = d->local_world = 1;
    d->timeout = timeout;
    pthread_mutex_init(&d->mu, NULL);
#ifdef OCR_WITH_MPI
    if (ocr_dist__launched()) {
        int provided = 0, rc;
        MPI_Comm node;
        if (MPI_Init_thread(argc, argv, MPI_THREAD_FUNNELED, &provided) != MPI_SUCCESS) {
            fprintf(stderr, "%s: MPI_Init_thread failed\n", prog);
            return 1;
        }
        d->mpi = 1;
        MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
        MPI_Comm_rank(MPI_COMM_WORLD, &d->rank);
        MPI_Comm_size(MPI_COMM_WORLD, &d->world);
        /* the ranks on this host: the local rank picks the GPU, the local count shares the cores */
        rc = MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, d->rank, MPI_INFO_NULL, &node);
        ocr_dist__check(d, rc, "MPI_Comm_split_type", "the ranks of this host");
        MPI_Comm_rank(node, &d->local_rank);
        MPI_Comm_size(node, &d->local_world);
        MPI_Comm_free(&node);
        if (d->world > 1 && timeout > 0) {
            d->watchdog_running = pthread_create(&d->watchdog, NULL, ocr_dist__watch, d) == 0;
            if (!d->watchdog_running) fprintf(stderr, "%s: rank %d: no watchdog thread: a hung rank would hang the job\n", prog, d->rank);
        }
    }
    (void)n; (void)var;
#else
    (void)argc; (void)argv;
    if (n > 1 || (n == 0 && ocr_dist__launched())) {
        fprintf(stderr, "%s: started by an MPI launcher as one of %d processes (%s) but built without MPI: each would train "
                        "alone on the same data. Build with MPI (./build.sh installs libopenmpi-dev and adds it) or run one "
                        "process without mpirun (docs/DISTRIBUTED.md)\n", prog, n, var ? var : "PMIX_RANK/PMI_RANK");
        return 2;
    }
#endif
    return 0;
}

/* Leaves the job (after every rank is done with it). */
static OCR_DIST_UNUSED void ocr_dist_finish(ocr_dist *d) {
    if (d->watchdog_running) {
        pthread_mutex_lock(&d->mu);
        d->stopping = 1;
        pthread_mutex_unlock(&d->mu);
        pthread_join(d->watchdog, NULL);
        d->watchdog_running = 0;
    }
#ifdef OCR_WITH_NCCL
    if (d->nccl_ready) { ncclCommDestroy(d->nccl); cudaStreamDestroy(d->stream); d->nccl_ready = 0; }
#endif
#ifdef OCR_WITH_MPI
    if (d->mpi) MPI_Finalize();
#endif
    d->mpi = 0;
    pthread_mutex_destroy(&d->mu);
}

/* In place: buf = the sum over the ranks (n floats or doubles). MPI counts are int: larger buffers go in pieces. */
static OCR_DIST_UNUSED void ocr_dist_sum_f32(ocr_dist *d, float *buf, size_t n, const char *what) {
#ifdef OCR_WITH_MPI
    size_t done;
    if (d->world < 2) return;
    for (done = 0; done < n;) {
        int part = n - done > (size_t)INT_MAX ? INT_MAX : (int)(n - done);
        ocr_dist__enter(d, what);
        ocr_dist__check(d, MPI_Allreduce(MPI_IN_PLACE, buf + done, part, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD), "MPI_Allreduce", what);
        done += (size_t)part;
    }
#else
    (void)d; (void)buf; (void)n; (void)what;
#endif
}
static OCR_DIST_UNUSED void ocr_dist_sum_f64(ocr_dist *d, double *buf, size_t n, const char *what) {
#ifdef OCR_WITH_MPI
    if (d->world < 2) return;
    ocr_dist__enter(d, what);
    ocr_dist__check(d, MPI_Allreduce(MPI_IN_PLACE, buf, (int)n, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD), "MPI_Allreduce", what);
#else
    (void)d; (void)buf; (void)n; (void)what;
#endif
}
/* The largest and smallest value of v over the ranks. */
static OCR_DIST_UNUSED void ocr_dist_minmax_i64(ocr_dist *d, int64_t v, int64_t *vmin, int64_t *vmax, const char *what) {
    long long in[2], out[2];
    in[0] = -(long long)v; in[1] = (long long)v;
    out[0] = in[0]; out[1] = in[1];
#ifdef OCR_WITH_MPI
    if (d->world > 1) {
        ocr_dist__enter(d, what);
        ocr_dist__check(d, MPI_Allreduce(in, out, 2, MPI_LONG_LONG, MPI_MAX, MPI_COMM_WORLD), "MPI_Allreduce", what);
    }
#else
    (void)d; (void)what;
#endif
    if (vmin) *vmin = (int64_t)-out[0];
    if (vmax) *vmax = (int64_t)out[1];
}
/* all[r * n + i] = rank r's mine[i], for every rank r (rank order). */
static OCR_DIST_UNUSED void ocr_dist_gather_f32(ocr_dist *d, const float *mine, float *all, size_t n, const char *what) {
#ifdef OCR_WITH_MPI
    if (d->world > 1) {
        if (n > (size_t)INT_MAX) {
            fprintf(stderr, "%s: rank %d: %s: %zu floats per rank exceed MPI's int count\n", d->prog, d->rank, what, n);
            ocr_dist_abort(d, 1);
        }
        ocr_dist__enter(d, what);
        ocr_dist__check(d, MPI_Allgather(mine, (int)n, MPI_FLOAT, all, (int)n, MPI_FLOAT, MPI_COMM_WORLD), "MPI_Allgather", what);
        return;
    }
#endif
    (void)d; (void)what;
    if (all != mine) memcpy(all, mine, n * sizeof(float));
}
/* all[r] = rank r's mine */
static OCR_DIST_UNUSED void ocr_dist_gather_int(ocr_dist *d, int mine, int *all, const char *what) {
#ifdef OCR_WITH_MPI
    if (d->world > 1) {
        ocr_dist__enter(d, what);
        ocr_dist__check(d, MPI_Allgather(&mine, 1, MPI_INT, all, 1, MPI_INT, MPI_COMM_WORLD), "MPI_Allgather", what);
        return;
    }
#endif
    (void)d; (void)what;
    all[0] = mine;
}
/* Rank r's counts[r] floats (mine: this rank's) one after the other, in rank order, into all on every rank. */
static OCR_DIST_UNUSED void ocr_dist_gatherv_f32(ocr_dist *d, const float *mine, float *all, const int *counts, const char *what) {
#ifdef OCR_WITH_MPI
    if (d->world > 1) {
        int displs[1024], r;
        long long at = 0;
        if (d->world > 1024) { fprintf(stderr, "%s: %s: more than 1024 ranks\n", d->prog, what); ocr_dist_abort(d, 1); }
        for (r = 0; r < d->world; r++) {
            if (at > INT_MAX) { fprintf(stderr, "%s: rank %d: %s: above MPI's int count\n", d->prog, d->rank, what); ocr_dist_abort(d, 1); }
            displs[r] = (int)at;
            at += counts[r];
        }
        ocr_dist__enter(d, what);
        ocr_dist__check(d, MPI_Allgatherv(mine, counts[d->rank], MPI_FLOAT, all, counts, displs, MPI_FLOAT, MPI_COMM_WORLD),
                        "MPI_Allgatherv", what);
        return;
    }
#endif
    (void)d; (void)what;
    if (all != mine) memcpy(all, mine, (size_t)counts[0] * sizeof(float));
}
/* rank 0's bytes to every rank */
static OCR_DIST_UNUSED void ocr_dist_bcast(ocr_dist *d, void *buf, size_t bytes, const char *what) {
#ifdef OCR_WITH_MPI
    if (d->world < 2) return;
    ocr_dist__enter(d, what);
    ocr_dist__check(d, MPI_Bcast(buf, (int)bytes, MPI_BYTE, 0, MPI_COMM_WORLD), "MPI_Bcast", what);
#else
    (void)d; (void)buf; (void)bytes; (void)what;
#endif
}
static OCR_DIST_UNUSED void ocr_dist_barrier(ocr_dist *d, const char *what) {
#ifdef OCR_WITH_MPI
    if (d->world < 2) return;
    ocr_dist__enter(d, what);
    ocr_dist__check(d, MPI_Barrier(MPI_COMM_WORLD), "MPI_Barrier", what);
#else
    (void)d; (void)what;
#endif
}

#ifdef OCR_DATA_H
/* A rank's shard of a training set, a dataset of its own (view: its state, alive as long as ds). Batch-interleaved
   (synthetic scenes, no shuffle): the rank's batch k is positions [k*N*B + r*B, k*N*B + (r+1)*B) of base, so the N
   ranks' batches k together are batch k of one process with batch N*B, sample for sample. Strided (datasets): sample
   i belongs to rank i mod N (the remainder of the set left out, so that every rank has as many batches); the rank's
   loader shuffles its shard. Either way the shard depends only on the rank and the world size. */
typedef struct {
    ocr_dataset *base;
    int64_t batch, world, rank;
    int interleave_batches;
} ocr_dist_shard;

static OCR_DIST_UNUSED int64_t ocr_dist_shard_index(const ocr_dist_shard *v, int64_t i) {
    if (v->interleave_batches) return (i / v->batch) * v->batch * v->world + v->rank * v->batch + i % v->batch;
    return i * v->world + v->rank;
}
static OCR_DIST_UNUSED int ocr_dist__shard_get(ocr_dataset *ds, ocr_ctx *ctx, int64_t index, unsigned flags, ocr_sample *out) {
    const ocr_dist_shard *v = (const ocr_dist_shard *)ds->impl;
    return ocr_dataset_get(ctx, v->base, ocr_dist_shard_index(v, index), flags, out);
}
static OCR_DIST_UNUSED void ocr_dist_shard_open(const ocr_dist *d, ocr_dataset *ds, ocr_dist_shard *view, ocr_dataset *base, int batch,
                                                int interleave_batches) {
    memset(ds, 0, sizeof *ds);
    view->base = base;
    view->batch = batch;
    view->world = d->world;
    view->rank = d->rank;
    view->interleave_batches = interleave_batches;
    ds->count = base->count / d->world;
    snprintf(ds->name, sizeof ds->name, "%.200s (rank %d of %d)", base->name, d->rank, d->world);
    ds->impl = view;
    ds->get = ocr_dist__shard_get;
}
#endif

/* ocr_ctx.replica_sum for synchronised batch normalisation: user is the ocr_dist. */
static OCR_DIST_UNUSED int ocr_dist_replica_sum(void *user, double *values, int64_t n) {
    ocr_dist_sum_f64((ocr_dist *)user, values, (size_t)n, "MPI_Allreduce of the batch-norm statistics (--sync-bn)");
    return 0;
}

#ifdef OCR_WITH_NCCL
/* One GPU per rank, by local rank: cudaSetDevice(local_rank), then a communicator over every rank whose id rank 0
   makes and MPI broadcasts. Call before any CUDA allocation. 0, or 1 after a message. UNTESTED on a GPU (none was
   available where this was written): it compiles against nccl.h 2.x. */
static OCR_DIST_UNUSED int ocr_dist_nccl_init(ocr_dist *d) {
    ncclUniqueId id;
    int n_dev = 0;
    ncclResult_t nr;
    if (d->world < 2) return 0;
    if (cudaGetDeviceCount(&n_dev) != cudaSuccess || n_dev < 1) {
        fprintf(stderr, "%s: rank %d: no CUDA device for NCCL\n", d->prog, d->rank);
        return 1;
    }
    if (d->local_rank >= n_dev) {
        fprintf(stderr, "%s: rank %d is local rank %d on its host, which has %d GPUs: start at most one rank per GPU\n", d->prog, d->rank,
                d->local_rank, n_dev);
        return 1;
    }
    if (cudaSetDevice(d->local_rank) != cudaSuccess || cudaStreamCreateWithFlags(&d->stream, cudaStreamNonBlocking) != cudaSuccess) {
        fprintf(stderr, "%s: rank %d: cannot use GPU %d\n", d->prog, d->rank, d->local_rank);
        return 1;
    }
    if (d->rank == 0 && (nr = ncclGetUniqueId(&id)) != ncclSuccess) {
        fprintf(stderr, "%s: rank 0: ncclGetUniqueId: %s\n", d->prog, ncclGetErrorString(nr));
        ocr_dist_abort(d, 1);
    }
    ocr_dist_bcast(d, &id, sizeof id, "MPI_Bcast of the NCCL id");
    if ((nr = ncclCommInitRank(&d->nccl, d->world, id, d->rank)) != ncclSuccess) {
        fprintf(stderr, "%s: rank %d: ncclCommInitRank: %s\n", d->prog, d->rank, ncclGetErrorString(nr));
        ocr_dist_abort(d, 1);
    }
    d->nccl_ready = 1;
    return 0;
}
/* In place on the device: buf = the sum (average: the mean) over the ranks, waiting for the result (the step's next
   op reads it). */
static OCR_DIST_UNUSED void ocr_dist_nccl_allreduce_f32(ocr_dist *d, float *dev_buf, size_t n, int average, const char *what) {
    ncclResult_t nr;
    cudaError_t ce;
    if (d->world < 2) return;
    ocr_dist__enter(d, what);
    nr = ncclAllReduce(dev_buf, dev_buf, n, ncclFloat, average ? ncclAvg : ncclSum, d->nccl, d->stream);
    ce = nr == ncclSuccess ? cudaStreamSynchronize(d->stream) : cudaSuccess;
    ocr_dist__leave(d);
    if (nr != ncclSuccess || ce != cudaSuccess) {
        fprintf(stderr, "%s: rank %d of %d: ncclAllReduce (%s) at step %lld failed: %s\n", d->prog, d->rank, d->world, what,
                (long long)d->step, nr != ncclSuccess ? ncclGetErrorString(nr) : cudaGetErrorString(ce));
        ncclCommAbort(d->nccl);
        d->nccl_ready = 0;
        ocr_dist_abort(d, 1);
    }
}
#endif
#endif
