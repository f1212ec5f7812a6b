/* bench_train - DBNet training step (forward, DB loss, backward, SGD step) and inference, ocr-c against PyTorch on
   the same architecture (tools/bench_torch.py over tools/dbnet_ref.py) in the same run: one warm-up each, then the
   two (three with Debian's libjemalloc2 preloaded into a second PyTorch) alternate rep by rep, each after a pause
   (bench_settle) so no side is timed while another's threads still spin; the median of at
   least 5 is reported. Peak resident memory (VmHWM) of each side comes from a fresh process per config that sets up
   and runs two steps; under each row, our activation values and gradients (arenas shared by liveness, and what they
   would take unshared), then each side's GFLOP/s and share of the CPU's measured fp32 peak on the config's threads
   (bench_peak.h; one FLOP count for all sides, bench_model.h: a training step is 3x its forward's convolutions).
   A mixed-precision row also times its fp32 twin (same model and shape) step by step beside it, for the ratio
   (fp32_alternating_s): timed rows apart, the host's speed moves between them more than the two differ.
   Prints a table and, last, one JSON line with every figure and ratio.
   usage: bench_train [--reps N] [--issue] [--only TEXT] [--no-torch] [--layers]
     default   DB-ResNet-18 width 0.25, 320x320, batch 8, 2 threads (train_dbnet's model; its default crops, 4 x
               256x256, are the config "w0.25 256x256 b4")
     --issue   adds issue 8's set: width 1 at 640x640, batch 1 and 4, 1 and 2 threads; inference 736x1280 batch 1
     --only    the configs (of the whole set) whose name contains TEXT, e.g. "infer" or "b4 t2"
     --layers  per-op forward and backward times of our model (summed over the timed reps, then per step) */
#define OCR_IMPLEMENTATION
#include "ocr_tensor.h"
#include "ocr_nn.h"
#include "ocr_loss.h"
#include "ocr_dbnet.h"
#include "bench_common.h"
#include "bench_peak.h"
#include "bench_model.h"
#include <signal.h>

#define MAX_REPS 64

typedef struct { const char *name; int train; float width; int N, H, W, threads, amp; } config;

static void die(ocr_ctx *ctx, const char *what) {
    fprintf(stderr, "bench_train: %s: %s\n", what, ocr_ctx_last_error(ctx));
    exit(1);
}

/* Starts tools/bench_torch.py; preload: a library for LD_PRELOAD, or NULL. */
static int torch_start(bench_peer *p, const char *label, const char *preload) {
    /* jemalloc tuned as in the issue: freed pages stay mapped */
    const char *env[] = {"PYTHONPATH", "tools", "LD_PRELOAD", preload, "MALLOC_CONF", "dirty_decay_ms:-1,muzzy_decay_ms:-1", NULL};
    char *argv[] = {"python3", "tools/bench_torch.py", NULL};
    if (!preload) env[2] = NULL;
    return bench_peer_start(p, label, "/usr/bin/python3", argv, env);
}

/* VmHWM of this process in KiB, -1 if unknown */
static long peak_rss_kib_self(void) {
    char line[256];
    long kib = -1;
    FILE *f = fopen("/proc/self/status", "r");
    if (!f) return -1;
    while (fgets(line, sizeof line, f))
        if (strncmp(line, "VmHWM:", 6) == 0) kib = atol(line + 6);
    fclose(f);
    return kib;
}

/* Peak resident memory in MiB of a fresh process that sets up one config and runs two steps (the first grows every
   buffer, the second shows whether a step allocates more): this program again with --mem-child INDEX, or the PyTorch
   peer fed "setup", "run", "run", "mem" (torch_cmd, preload). Each reports its own VmHWM, which covers only the
   program after its exec (a fork's wait4 ru_maxrss would include the forking parent's pages). 0 when it failed. */
static double peak_rss_mb(int config_index, const char *torch_cmd, const char *preload) {
    char index[32], last[256];
    char *argv[] = {"bench_train", "--mem-child", index, NULL};
    bench_peer p;
    snprintf(index, sizeof index, "%d", config_index);
    if (!(torch_cmd ? torch_start(&p, "PyTorch peer (memory)", preload)
                    : bench_peer_start(&p, "bench_train --mem-child", "/proc/self/exe", argv, NULL)))
        return 0;
    if (torch_cmd) fprintf(p.in, "%s\nrun\nrun\nmem\n", torch_cmd);
    if (!bench_peer_stop(&p, torch_cmd != NULL, last, sizeof last)) return 0;
    return (double)atol(last) / 1024.0; /* the last answer is the peak */
}

/* Fixed targets: a few text rectangles per image (gt and threshold band), everything else background. */
static void make_targets(ocr_ctx *ctx, ocr_tensor *t, int64_t N, int64_t H, int64_t W) {
    int64_t n, i, y, x, k;
    for (k = 0; k < 4; k++) {
        static const char *names[4] = {"gt_shrink", "mask_shrink", "gt_thresh", "mask_thresh"};
        if (ocr_tensor_alloc(ctx, &t[k], names[k], OCR_F32, OCR_DEVICE_CPU, ocr_shape4(N, 1, H, W))) die(ctx, "targets");
    }
    ocr_tensor_fill(ctx, &t[0], 0.0); ocr_tensor_fill(ctx, &t[1], 1.0);
    ocr_tensor_fill(ctx, &t[2], 0.3); ocr_tensor_fill(ctx, &t[3], 0.0);
    for (n = 0; n < N; n++)
        for (i = 0; i < 8; i++) {
            int64_t bh = 8 + (int64_t)(ocr_rng_uniform(&ctx->rng) * (float)(H / 6 - 8)), bw = 16 + (int64_t)(ocr_rng_uniform(&ctx->rng) * (float)(W / 3 - 16));
            int64_t y0 = (int64_t)(ocr_rng_uniform(&ctx->rng) * (float)(H - bh)), x0 = (int64_t)(ocr_rng_uniform(&ctx->rng) * (float)(W - bw));
            for (y = y0 - 4; y < y0 + bh + 4; y++)
                for (x = x0 - 4; x < x0 + bw + 4; x++) {
                    int64_t at = (n * H + y) * W + x;
                    if (y < 0 || y >= H || x < 0 || x >= W) continue;
                    ((float *)t[3].data)[at] = 1.0f;
                    ((float *)t[2].data)[at] = 0.7f;
                    if (y >= y0 && y < y0 + bh && x >= x0 && x < x0 + bw) ((float *)t[0].data)[at] = 1.0f;
                }
        }
}

typedef struct {
    ocr_dbnet m;
    ocr_optimizer opt;
    ocr_tensor x, targets[4], dl, dt;
    ocr_db_loss_config loss;
    int train;
} ours;

static void ours_setup(ocr_ctx *ctx, ours *o, const config *c) {
    ocr_dbnet_config mc = ocr_dbnet_config_default();
    memset(o, 0, sizeof *o);
    mc.width = c->width;
    mc.prior_prob = 0.03f;
    o->train = c->train;
    ctx->amp = c->amp;
    if (ocr_ctx_set_threads(ctx, c->threads) || ocr_dbnet_init(ctx, &o->m, &mc) ||
        ocr_optim_init(ctx, &o->opt, &o->m.params, ocr_optim_sgd(0.9f, 1e-4f, 0)) ||
        ocr_tensor_alloc(ctx, &o->x, "x", OCR_F32, OCR_DEVICE_CPU, ocr_shape4(c->N, 3, c->H, c->W)) ||
        ocr_tensor_fill_uniform(ctx, &o->x, -1.0f, 1.0f))
        die(ctx, "setting up the model");
    if (c->train) {
        make_targets(ctx, o->targets, c->N, c->H, c->W);
        if (ocr_tensor_alloc(ctx, &o->dl, "d_prob_logits", OCR_F32, OCR_DEVICE_CPU, ocr_shape4(c->N, 1, c->H, c->W)) ||
            ocr_tensor_alloc(ctx, &o->dt, "d_thresh", OCR_F32, OCR_DEVICE_CPU, ocr_shape4(c->N, 1, c->H, c->W)))
            die(ctx, "gradients");
        o->loss = ocr_db_loss_defaults();
    }
}

static double ours_run(ocr_ctx *ctx, ours *o) {
    ocr_tensor prob, thresh;
    double t0 = now();
    if (!o->train) {
        if (ocr_dbnet_forward(ctx, &o->m, &o->x, 0, &prob, NULL)) die(ctx, "inference");
        return now() - t0;
    }
    if (ocr_dbnet_forward(ctx, &o->m, &o->x, 1, &prob, &thresh)) die(ctx, "forward");
    if (ocr_tensor_zero(ctx, &o->dl) || ocr_tensor_zero(ctx, &o->dt) ||
        ocr_loss_db(ctx, &o->loss, &prob, &thresh, &o->targets[0], &o->targets[1], &o->targets[2], &o->targets[3], NULL, &o->dl, &o->dt))
        die(ctx, "loss");
    ocr_params_zero_grad(&o->m.params);
    if (ocr_dbnet_backward(ctx, &o->m, &o->dl, &o->dt)) die(ctx, "backward");
    if (ocr_optim_step(ctx, &o->opt, &o->m.params, 1e-3f)) die(ctx, "optimizer");
    return now() - t0;
}

static void ours_free(ours *o) {
    int k;
    ocr_dbnet_free(&o->m);
    ocr_optim_free(&o->opt);
    ocr_tensor_free(&o->x);
    ocr_tensor_free(&o->dl);
    ocr_tensor_free(&o->dt);
    for (k = 0; k < 4; k++) ocr_tensor_free(&o->targets[k]);
}

/* MiB of our activation values and gradients after the last step: the model's two arenas, shared by liveness, and what
   every value and gradient would take in a range of its own (mib[2], mib[3]). */
static void arena_mib(const ocr_dbnet *m, double mib[4]) {
    ocr_dbnet_memory_info mem = ocr_dbnet_memory(m);
    mib[0] = (double)mem.values_bytes / 1048576.0;
    mib[1] = (double)mem.grads_bytes / 1048576.0;
    mib[2] = (double)mem.values_unshared_bytes / 1048576.0;
    mib[3] = (double)mem.grads_unshared_bytes / 1048576.0;
}

/* Per op: times per step and, for the convolutions, GFLOP/s (the backward counted as twice the forward, bench_model.h). */
static void print_layers(const ours *o, int train, int steps, int images) {
    const ocr_dbnet *m = &o->m;
    double tf = 0, tb = 0;
    int i;
    printf("  %-34s %-8s %-18s %10s %10s %10s %10s\n", "layer (output)", "op", "output shape", "fwd ms", "bwd ms", "fwd GF/s", "bwd GF/s");
    for (i = 0; i < ocr_dbnet_op_count(m); i++) {
        ocr_dbnet_op_info op = ocr_dbnet_op(m, i);
        double gflop = 2e-9 * bench_dbnet_op_macs(m, &op) * images * steps;
        char shape[64];
        if (op.runs_in == (train ? OCR_DBNET_RUNS_EVAL : OCR_DBNET_RUNS_TRAINING)) continue; /* not in this graph */
        snprintf(shape, sizeof shape, "%lldx%lldx%lld", (long long)op.channels, (long long)op.height, (long long)op.width);
        printf("  %-34s %-8s %-18s %10.2f %10.2f %10.1f %10.1f\n", op.name, op.kind, shape, 1e3 * op.seconds_forward / steps,
               1e3 * op.seconds_backward / steps, op.seconds_forward > 0 ? gflop / op.seconds_forward : 0.0,
               op.seconds_backward > 0 ? 2 * gflop / op.seconds_backward : 0.0);
        tf += op.seconds_forward; tb += op.seconds_backward;
    }
    printf("  %-34s %-8s %-18s %10.2f %10.2f\n", "total", "", "", 1e3 * tf / steps, 1e3 * tb / steps);
}

int main(int argc, char **argv) {
    static const config configs[] = {
        {"train r18 w0.25 320x320 b8 t2", 1, 0.25f, 8, 320, 320, 2, OCR_AMP_OFF},
        {"train r18 w1 640x640 b1 t1", 1, 1.0f, 1, 640, 640, 1, OCR_AMP_OFF},
        {"train r18 w1 640x640 b1 t2", 1, 1.0f, 1, 640, 640, 2, OCR_AMP_OFF},
        {"train r18 w1 640x640 b4 t1", 1, 1.0f, 4, 640, 640, 1, OCR_AMP_OFF},
        {"train r18 w1 640x640 b4 t2", 1, 1.0f, 4, 640, 640, 2, OCR_AMP_OFF},
        {"infer r18 w1 736x1280 b1 t2", 0, 1.0f, 1, 736, 1280, 2, OCR_AMP_OFF},
        /* mixed precision against PyTorch's CPU bf16 autocast, and against its fp32 twin above (timed alternately) */
        {"train r18 w0.25 320x320 b8 t2 bf16", 1, 0.25f, 8, 320, 320, 2, OCR_AMP_BF16},
        {"train r18 w1 640x640 b4 t2 bf16", 1, 1.0f, 4, 640, 640, 2, OCR_AMP_BF16},
        {"infer r18 w1 736x1280 b1 t2 bf16", 0, 1.0f, 1, 736, 1280, 2, OCR_AMP_BF16},
        /* bench_infer's 640x640 and width-0.25 configs, here for their per-op times (--layers) */
        {"infer r18 w1 640x640 b1 t2", 0, 1.0f, 1, 640, 640, 2, OCR_AMP_OFF},
        {"infer r18 w0.25 736x1280 b1 t2", 0, 0.25f, 1, 736, 1280, 2, OCR_AMP_OFF},
        /* train_dbnet's default step */
        {"train r18 w0.25 256x256 b4 t2", 1, 0.25f, 4, 256, 256, 2, OCR_AMP_OFF},
        {"train r18 w0.25 256x256 b4 t2 bf16", 1, 0.25f, 4, 256, 256, 2, OCR_AMP_BF16},
    };
    const char *jemalloc_paths[] = {"/usr/lib/x86_64-linux-gnu/libjemalloc.so.2", "/usr/lib/aarch64-linux-gnu/libjemalloc.so.2"};
    int reps = 5, issue = 0, use_torch = 1, layers = 0, n_configs, i, c, r, n_peers = 0, mem_child = -1, n_done = 0, measured[16] = {0};
    const char *preloads[2] = {NULL, NULL}, *only = NULL;
    double mem_ours[16], mem_peer[16][2], med_ours_of[16] = {0}, best_torch_of[16] = {0};
    bench_peer peers[2];
    ocr_ctx ctx;
    char json[12288], line[256], cmd[256], cpu[160];
    int max_threads = 1;
    size_t jl;
    for (i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--reps") == 0 && i + 1 < argc) reps = atoi(argv[++i]);
        else if (strcmp(argv[i], "--issue") == 0) issue = 1;
        else if (strcmp(argv[i], "--no-torch") == 0) use_torch = 0;
        else if (strcmp(argv[i], "--layers") == 0) layers = 1;
        else if (strcmp(argv[i], "--only") == 0 && i + 1 < argc) only = argv[++i];
        else if (strcmp(argv[i], "--mem-child") == 0 && i + 1 < argc) mem_child = atoi(argv[++i]);
        else {
            printf("usage: %s [--reps N (>= 5)] [--issue] [--only TEXT] [--no-torch] [--layers]\n", argv[0]);
            return strcmp(argv[i], "--help") == 0 ? 0 : 2;
        }
    }
    if (reps < 5) reps = 5;
    if (reps > MAX_REPS) reps = MAX_REPS;
    n_configs = issue || only ? (int)(sizeof configs / sizeof configs[0]) : 1;
    signal(SIGPIPE, SIG_IGN);
    if (ocr_ctx_init(&ctx, 2, 1) != OCR_OK) die(&ctx, "context");
    if (mem_child >= 0 && mem_child < (int)(sizeof configs / sizeof configs[0])) {
        ours o;
        ours_setup(&ctx, &o, &configs[mem_child]);
        (void)ours_run(&ctx, &o);
        (void)ours_run(&ctx, &o);
        printf("%ld\n", peak_rss_kib_self());
        return 0;
    }
    /* the peak before the peers start: their imports would take the cores */
    for (c = 0; c < n_configs; c++)
        if ((!only || strstr(configs[c].name, only)) && configs[c].threads > max_threads) max_threads = configs[c].threads;
    bench_cpu_model(cpu, sizeof cpu);
    (void)bench_print_peak(max_threads);
    if (use_torch) {
        const char *je = NULL;
        for (i = 0; i < 2; i++) if (access(jemalloc_paths[i], R_OK) == 0) je = jemalloc_paths[i];
        if (torch_start(&peers[n_peers], "PyTorch peer (pytorch)", NULL)) n_peers++;
        if (je && torch_start(&peers[n_peers], "PyTorch peer (pytorch+jemalloc)", je)) preloads[n_peers++] = je;
        if (!je) printf("bench_train: libjemalloc2 not installed, PyTorch runs with the stock allocator only\n");
    }
    {
        double la[3] = {0, 0, 0};
        FILE *f = fopen("/proc/loadavg", "r");
        if (f) { if (fscanf(f, "%lf %lf %lf", &la[0], &la[1], &la[2]) != 3) la[0] = -1; fclose(f); }
        printf("bench_train: %d cores, GEMM kernel %s, load average %.2f %.2f %.2f, median of %d after 1 warm-up\n", ocr_cpu_count(),
               ocr_gemm_kernel_name(&ctx), la[0], la[1], la[2], reps);
        printf("%s; %%peak: of the fp32 peak above on the config's threads\n", BENCH_DBNET_FLOPS_CONVENTION);
        jl = (size_t)snprintf(json, sizeof json, "{\"bench\":\"train\",\"cpu\":\"%s\",\"cores\":%d,\"kernel\":\"%s\",\"load\":%.2f,\"reps\":%d,"
                              "\"results\":[", cpu, ocr_cpu_count(), ocr_gemm_kernel_name(&ctx), la[0], reps);
    }
    printf("%-32s %8s %10s %8s %10s %9s | %8s %8s %10s %9s\n", "config", "ours s", "ours img/s", "torch s", "torch+je s", "ours/best",
           "ours MiB", "torch MiB", "torch+je MiB", "ours/best");
    for (c = 0; c < n_configs; c++) {
        const config *cf = &configs[c];
        double t_ours[MAX_REPS], t_peer[2][MAX_REPS], med_ours, med_peer[2] = {0, 0}, best = 0, best_mem = 0, arena[4];
        double flops, peak = bench_peak_fp32_on(cf->threads), gf[3], share[3]; /* ours, torch, torch+jemalloc */
        double t_ref[MAX_REPS], med_ref = 0;
        int ok[2] = {0, 0}, p, same, twin;
        ours o, ref;
        if (only && !strstr(cf->name, only)) continue;
        /* a mixed-precision row times its fp32 twin step by step beside it: the host's speed moves between rows more
           than the two differ */
        twin = -1;
        if (cf->amp != OCR_AMP_OFF)
            for (i = 0; i < (int)(sizeof configs / sizeof configs[0]); i++)
                if (configs[i].amp == OCR_AMP_OFF && configs[i].train == cf->train && configs[i].width == cf->width &&
                    configs[i].N == cf->N && configs[i].H == cf->H && configs[i].W == cf->W && configs[i].threads == cf->threads)
                    twin = i;
        if (twin >= 0) {
            ours_setup(&ctx, &ref, &configs[twin]);
            (void)ours_run(&ctx, &ref);
        }
        ours_setup(&ctx, &o, cf);
        snprintf(cmd, sizeof cmd, "setup %s 18 %g %d %d %d %d %s", cf->train ? "train" : "infer", cf->width, cf->N, cf->H, cf->W, cf->threads,
                 ocr_amp_name(cf->amp));
        for (p = 0; p < n_peers; p++) ok[p] = bench_peer_ask(&peers[p], cmd, line, sizeof line) && bench_peer_ask(&peers[p], "run", line, sizeof line);
        (void)ours_run(&ctx, &o); /* warm-up: buffers grow, pages fault in */
        if (layers && ocr_dbnet_profile(&ctx, &o.m, now)) die(&ctx, "profile");
        for (r = 0; r < reps; r++) {
            if (twin >= 0) {
                bench_settle();
                ctx.amp = OCR_AMP_OFF;
                t_ref[r] = ours_run(&ctx, &ref);
                ctx.amp = cf->amp;
            }
            bench_settle();
            t_ours[r] = ours_run(&ctx, &o);
            for (p = 0; p < n_peers; p++) {
                bench_settle();
                if (ok[p]) ok[p] = bench_peer_ask(&peers[p], "run", line, sizeof line) && (t_peer[p][r] = atof(line)) > 0;
            }
        }
        med_ours = median(t_ours, reps);
        for (p = 0; p < n_peers; p++)
            if (ok[p]) { med_peer[p] = median(t_peer[p], reps); if (best == 0 || med_peer[p] < best) best = med_peer[p]; }
        /* memory hardly depends on the thread count: configs differing only in it share one measurement */
        for (same = 0; same < c; same++)
            if (configs[same].train == cf->train && configs[same].width == cf->width && configs[same].N == cf->N &&
                configs[same].H == cf->H && configs[same].W == cf->W && configs[same].amp == cf->amp && measured[same])
                break;
        if (same < c) {
            mem_ours[c] = mem_ours[same]; mem_peer[c][0] = mem_peer[same][0]; mem_peer[c][1] = mem_peer[same][1];
        } else {
            mem_ours[c] = peak_rss_mb(c, NULL, NULL);
            for (p = 0; p < 2; p++) mem_peer[c][p] = p < n_peers ? peak_rss_mb(c, cmd, preloads[p]) : 0;
        }
        measured[c] = 1;
        for (p = 0; p < n_peers; p++) if (mem_peer[c][p] > 0 && (best_mem == 0 || mem_peer[c][p] < best_mem)) best_mem = mem_peer[c][p];
        printf("%-32s %8.3f %10.2f %8.3f %10.3f %9.2f | %8.0f %8.0f %10.0f %9.2f\n", cf->name, med_ours, cf->N / med_ours, med_peer[0],
               med_peer[1], best > 0 ? med_ours / best : 0.0, mem_ours[c], mem_peer[c][0], mem_peer[c][1],
               best_mem > 0 ? mem_ours[c] / best_mem : 0.0);
        arena_mib(&o.m, arena);
        printf("  ours: activations %.0f MiB + gradients %.0f MiB, shared by liveness (%.0f + %.0f MiB unshared)\n", arena[0], arena[1],
               arena[2], arena[3]);
        flops = bench_dbnet_flops(&o.m, cf->train, cf->N);
        for (p = 0; p < 3; p++) {
            double t = p ? med_peer[p - 1] : med_ours;
            gf[p] = t > 0 ? 1e-9 * flops / t : 0.0;
            share[p] = peak > 0 ? gf[p] / peak : 0.0;
        }
        printf("  %.2f GFLOP per %s: ours %.1f GFLOP/s (%.1f%% of the fp32 peak on %d thread%s), torch %.1f (%.1f%%), torch+je %.1f (%.1f%%)\n",
               1e-9 * flops, cf->train ? "step" : "inference", gf[0], 100 * share[0], cf->threads, cf->threads == 1 ? "" : "s", gf[1],
               100 * share[1], gf[2], 100 * share[2]);
        med_ours_of[c] = med_ours;
        best_torch_of[c] = best;
        if (twin >= 0) { /* against its fp32 twin, timed alternately above; PyTorch's fp32 from the twin's row when it ran */
            double torch_fp32 = med_ours_of[twin] > 0 ? best_torch_of[twin] : 0.0;
            double torch_best = torch_fp32 > 0 && (best == 0 || torch_fp32 < best) ? torch_fp32 : best;
            med_ref = median(t_ref, reps);
            printf("  %s (%s): %.2fx our fp32 step's time (%.3f s, timed alternately with this row's steps)", ocr_amp_name(cf->amp),
                   ocr_gemm_bf16_kernel_name(&ctx), med_ours / med_ref, med_ref);
            if (torch_best > 0)
                printf("; %.2fx the faster of PyTorch fp32 (%.3f s%s) and PyTorch %s autocast (%.3f s)", med_ours / torch_best, torch_fp32,
                       torch_fp32 > 0 ? "" : ": run its row in the same run", ocr_amp_name(cf->amp), best);
            printf("\n");
        }
        fflush(stdout);
        jl += (size_t)snprintf(json + jl, sizeof json - jl,
                               "%s{\"config\":\"%s\",\"ours_s\":%.4f,\"ours_img_per_s\":%.3f,\"torch_s\":%.4f,\"torch_jemalloc_s\":%.4f,"
                               "\"torch_best_img_per_s\":%.3f,\"ratio_ours_over_best_torch\":%.3f,\"ours_peak_rss_mib\":%.1f,"
                               "\"torch_peak_rss_mib\":%.1f,\"torch_jemalloc_peak_rss_mib\":%.1f,\"ratio_rss_ours_over_best_torch\":%.3f,"
                               "\"ours_activations_mib\":%.1f,\"ours_activation_grads_mib\":%.1f,\"gflop_per_run\":%.3f,\"fp32_peak_gflops\":%.1f,"
                               "\"ours_gflops\":%.2f,\"ours_peak_share\":%.4f,\"torch_gflops\":%.2f,\"torch_peak_share\":%.4f,"
                               "\"torch_jemalloc_gflops\":%.2f,\"torch_jemalloc_peak_share\":%.4f,\"fp32_alternating_s\":%.4f}",
                               n_done++ ? "," : "", cf->name, med_ours, cf->N / med_ours, med_peer[0], med_peer[1], best > 0 ? cf->N / best : 0.0,
                               best > 0 ? med_ours / best : 0.0, mem_ours[c], mem_peer[c][0], mem_peer[c][1],
                               best_mem > 0 ? mem_ours[c] / best_mem : 0.0, arena[0], arena[1], 1e-9 * flops, peak, gf[0],
                               share[0], gf[1], share[1], gf[2], share[2], med_ref);
        if (layers) print_layers(&o, cf->train, reps, cf->N);
        ours_free(&o);
        if (twin >= 0) ours_free(&ref);
    }
    for (i = 0; i < n_peers; i++) bench_peer_stop(&peers[i], 1, NULL, 0);
    snprintf(json + jl, sizeof json - jl, "]}");
    printf("%s\n", json);
    ocr_ctx_free(&ctx);
    return 0;
}
