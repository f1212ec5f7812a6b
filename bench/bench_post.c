/* bench_post - DBNet post-processing of one 736x1280 probability map with about 100 text regions: ocr_postprocess
   (box mode, then polygon mode; fast score, single thread) against the official OpenCV + pyclipper + shapely path
   (tools/bench_post_ref.py, the same code the parity test runs) in the same run. One warm-up each, then the two
   alternate rep by rep; the Python side times itself in-process (start-up and imports excluded). Reports the
   medians of wall time and of the timing thread's CPU time (less sensitive to a loaded machine), the detection
   counts of both sides (they must agree) and, last, one JSON line with every figure. The CPU's model and measured peak
   (bench_peak.h) come first, to identify the machine: the work is not arithmetic-bound.
   usage: bench_post [--reps N] [--no-python]
   The map: a grid of 10 x 10 soft text lines (random length, height, small rotation, peak 0.8..1), a few weak
   blobs that box_thresh drops, and low noise, drawn deterministically. */
#define _POSIX_C_SOURCE 200809L
#define OCR_IMPLEMENTATION
#include "ocr_tensor.h"
#include "ocr_nn.h"
#include "ocr_loss.h"
#include "ocr_dbnet.h"
#include "bench_common.h"
#include "bench_peak.h"
#include <signal.h>

#define MAP_H 736
#define MAP_W 1280
#define DEST_W 1280
#define DEST_H 720
#define MAX_REPS 64

static void die(ocr_ctx *ctx, const char *what) {
    fprintf(stderr, "bench_post: %s: %s\n", what, ocr_ctx_last_error(ctx));
    exit(1);
}

static float uni(ocr_rng *r, float lo, float hi) { return lo + (hi - lo) * ocr_rng_uniform(r); }

/* A soft rotated bar (half sizes hl x hh, edge sharpness sharp) raised into p where it is higher. */
static void draw_bar(float *p, float cx, float cy, float ang, float hl, float hh, float peak, float sharp) {
    float ca = cosf(ang), sa = sinf(ang), reach = hl + hh + 8.0f;
    int x0 = (int)(cx - reach), x1 = (int)(cx + reach), y0 = (int)(cy - reach), y1 = (int)(cy + reach), x, y;
    for (y = y0 < 0 ? 0 : y0; y <= y1 && y < MAP_H; y++)
        for (x = x0 < 0 ? 0 : x0; x <= x1 && x < MAP_W; x++) {
            float u = (x - cx) * ca + (y - cy) * sa, v = -(x - cx) * sa + (y - cy) * ca;
            float val = peak / (1.0f + expf(-fminf(hl - fabsf(u), hh - fabsf(v)) * sharp));
            if (val > p[y * MAP_W + x]) p[y * MAP_W + x] = val;
        }
}

static void make_map(float *p, ocr_rng *r) {
    int row, col, i;
    for (i = 0; i < MAP_H * MAP_W; i++) p[i] = 0.1f * ocr_rng_uniform(r);
    for (row = 0; row < 10; row++)
        for (col = 0; col < 10; col++) {
            float cx = (col + 0.5f) * MAP_W / 10 + uni(r, -8, 8), cy = (row + 0.5f) * MAP_H / 10 + uni(r, -5, 5);
            draw_bar(p, cx, cy, uni(r, -0.25f, 0.25f), uni(r, 20, 55), uni(r, 5, 12), uni(r, 0.8f, 1.0f), uni(r, 1.0f, 3.0f));
        }
    for (i = 0; i < 12; i++) /* weak regions: above thresh, below box_thresh */
        draw_bar(p, uni(r, 0, MAP_W), uni(r, 0, MAP_H), uni(r, 0, 3.14f), uni(r, 5, 15), uni(r, 3, 6), 0.5f, 2.0f);
}

/* Starts tools/bench_post_ref.py MAP. */
static int peer_start(bench_peer *p, char *map_path) {
    char w[16], h[16];
    char *argv[] = {"python3", "tools/bench_post_ref.py", map_path, w, h, NULL};
    const char *env[] = {"PYTHONPATH", "tools", NULL};
    snprintf(w, sizeof w, "%d", DEST_W);
    snprintf(h, sizeof h, "%d", DEST_H);
    return bench_peer_start(p, "bench_post: the Python peer", "/usr/bin/python3", argv, env);
}

/* One timed run of the peer: wall seconds (0 when it failed), CPU seconds and its detection count. */
static double peer_run(bench_peer *p, const char *mode, double *cpu, int *n_dets) {
    char line[128];
    double s;
    if (!bench_peer_ask(p, mode, line, sizeof line)) return 0;
    if (sscanf(line, "%lf %lf %d", &s, cpu, n_dets) != 3) {
        fprintf(stderr, "bench_post: the Python peer answered '%s' to '%s'\n", line, mode);
        return 0;
    }
    return s;
}

static double ours_run(ocr_ctx *ctx, const ocr_post_config *cfg, const ocr_tensor *prob, ocr_detections *d, double *cpu) {
    double t0 = clock_s(CLOCK_MONOTONIC), c0 = clock_s(CLOCK_THREAD_CPUTIME_ID);
    if (ocr_postprocess(ctx, cfg, prob, DEST_W, DEST_H, d) != OCR_OK) die(ctx, "ocr_postprocess");
    *cpu = clock_s(CLOCK_THREAD_CPUTIME_ID) - c0;
    return clock_s(CLOCK_MONOTONIC) - t0;
}

int main(int argc, char **argv) {
    static const char *const modes[2] = {"box", "poly"};
    ocr_ctx ctx;
    ocr_tensor prob;
    ocr_detections d;
    bench_peer py;
    char map_path[] = "/tmp/ocr_bench_post_XXXXXX", json[2048];
    int reps = 7, use_python = 1, i, m, r, fd, have_py = 0;
    size_t jl;
    double la[3] = {0, 0, 0}, peak;
    char cpu_name[160];
    FILE *f;
    for (i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--reps") == 0 && i + 1 < argc) reps = atoi(argv[++i]);
        else if (strcmp(argv[i], "--no-python") == 0) use_python = 0;
        else { fprintf(stderr, "usage: bench_post [--reps N] [--no-python]\n"); return 2; }
    }
    if (reps < 5) reps = 5;
    if (reps > MAX_REPS) reps = MAX_REPS;
    signal(SIGPIPE, SIG_IGN);
    bench_cpu_model(cpu_name, sizeof cpu_name);
    peak = bench_print_peak(1); /* ours runs on one thread */
    if (ocr_ctx_init(&ctx, 1, 8) != OCR_OK) die(&ctx, "context");
    if (ocr_tensor_alloc(&ctx, &prob, "prob", OCR_F32, OCR_DEVICE_CPU, ocr_shape2(MAP_H, MAP_W))) die(&ctx, "map");
    make_map((float *)prob.data, &ctx.rng);
    memset(&d, 0, sizeof d);
    if (use_python) {
        int32_t dims[2] = {MAP_H, MAP_W};
        if ((fd = mkstemp(map_path)) < 0 || !(f = fdopen(fd, "wb"))) { perror("bench_post: temporary map file"); return 1; }
        fwrite(dims, sizeof dims, 1, f);
        fwrite(prob.data, sizeof(float), (size_t)MAP_H * MAP_W, f);
        fclose(f);
        have_py = peer_start(&py, map_path);
        if (!have_py) fprintf(stderr, "bench_post: cannot start tools/bench_post_ref.py\n");
    }
    if ((f = fopen("/proc/loadavg", "r"))) { if (fscanf(f, "%lf %lf %lf", &la[0], &la[1], &la[2]) != 3) la[0] = -1; fclose(f); }
    printf("bench_post: %dx%d map -> %dx%d, %d cores, load average %.2f %.2f %.2f, median of %d after 1 warm-up\n", MAP_W, MAP_H, DEST_W,
           DEST_H, ocr_cpu_count(), la[0], la[1], la[2], reps);
    printf("%-6s %9s %10s %12s | %9s %10s %12s | %9s %8s\n", "mode", "ours ms", "python ms", "ours/python", "ours cpu", "python cpu",
           "ours/python", "ours dets", "py dets");
    jl = (size_t)snprintf(json, sizeof json, "{\"bench\":\"post\",\"cpu\":\"%s\",\"fp32_peak_gflops\":%.1f,\"map\":[%d,%d],\"load\":%.2f,"
                          "\"reps\":%d,\"results\":[", cpu_name, peak, MAP_H, MAP_W, la[0], reps);
    for (m = 0; m < 2; m++) {
        ocr_post_config cfg = ocr_post_config_official(m == 0 ? OCR_POST_BOX : OCR_POST_POLYGON);
        double t_ours[MAX_REPS], t_py[MAX_REPS], c_ours[MAX_REPS], c_py[MAX_REPS], med_ours, med_py = 0, cpu_ours, cpu_py = 0, cpu;
        int py_dets = -1, ok = have_py && py.in;
        (void)ours_run(&ctx, &cfg, &prob, &d, &cpu);
        if (ok) ok = peer_run(&py, modes[m], &cpu, &py_dets) > 0;
        for (r = 0; r < reps; r++) {
            t_ours[r] = ours_run(&ctx, &cfg, &prob, &d, &c_ours[r]);
            if (ok) ok = (t_py[r] = peer_run(&py, modes[m], &c_py[r], &py_dets)) > 0;
        }
        med_ours = median(t_ours, reps);
        cpu_ours = median(c_ours, reps);
        if (ok) { med_py = median(t_py, reps); cpu_py = median(c_py, reps); }
        printf("%-6s %9.3f %10.3f %12.3f | %9.3f %10.3f %12.3f | %9d %8d\n", modes[m], 1e3 * med_ours, 1e3 * med_py,
               med_py > 0 ? med_ours / med_py : 0.0, 1e3 * cpu_ours, 1e3 * cpu_py, cpu_py > 0 ? cpu_ours / cpu_py : 0.0, d.n, py_dets);
        if (ok && py_dets != d.n) printf("bench_post: %s mode: %d detections, the Python path %d\n", modes[m], d.n, py_dets);
        jl += (size_t)snprintf(json + jl, sizeof json - jl,
                               "%s{\"mode\":\"%s\",\"ours_ms\":%.3f,\"python_ms\":%.3f,\"ratio_ours_over_python\":%.4f,\"ours_cpu_ms\":%.3f,"
                               "\"python_cpu_ms\":%.3f,\"cpu_ratio_ours_over_python\":%.4f,\"ours_dets\":%d,\"python_dets\":%d}",
                               m ? "," : "", modes[m], 1e3 * med_ours, 1e3 * med_py, med_py > 0 ? med_ours / med_py : 0.0, 1e3 * cpu_ours,
                               1e3 * cpu_py, cpu_py > 0 ? cpu_ours / cpu_py : 0.0, d.n, py_dets);
    }
    /* ocr-c's default config (split of joined regions, score inside the contour): no Python peer runs it */
    for (m = 0; m < 2; m++) {
        ocr_post_config cfg = ocr_post_config_default(m == 0 ? OCR_POST_BOX : OCR_POST_POLYGON);
        double t_ours[MAX_REPS], c_ours[MAX_REPS], cpu;
        (void)ours_run(&ctx, &cfg, &prob, &d, &cpu);
        for (r = 0; r < reps; r++) t_ours[r] = ours_run(&ctx, &cfg, &prob, &d, &c_ours[r]);
        printf("%-6s %9.3f ms, %d detections: ocr-c's default (ocr_post_config_default: split, slow score)\n", modes[m],
               1e3 * median(t_ours, reps), d.n);
        jl += (size_t)snprintf(json + jl, sizeof json - jl, ",{\"mode\":\"%s default\",\"ours_ms\":%.3f,\"ours_dets\":%d}", modes[m],
                               1e3 * median(t_ours, reps), d.n);
    }
    if (have_py) bench_peer_stop(&py, 1, NULL, 0);
    if (use_python) unlink(map_path);
    snprintf(json + jl, sizeof json - jl, "]}");
    printf("%s\n", json);
    ocr_detections_free(&d);
    ocr_tensor_free(&prob);
    ocr_ctx_free(&ctx);
    return 0;
}
