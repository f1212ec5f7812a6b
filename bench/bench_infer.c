/* bench_infer - DBNet inference, ocr-c against ONNX Runtime 1.30 (npm onnxruntime-node, driven through
   tools/ort_run.js --serve) running ocr-c's own ONNX export (ocr_onnx.h) of the same model on the same input with
   the same threads: ORT with intra_op_num_threads = threads, inter_op 1, sequential execution, every graph
   optimisation. One warm-up each, then the two alternate rep by rep, each after a pause (bench_settle) so no side is
   timed while the other's threads still spin; medians of at least 5. ORT's time is taken inside the peer around
   session.run. After the timing, the peer's probability map is compared with ours (max |difference|), so a figure
   never comes from a model that computes something else.
   usage: bench_infer [--reps N] [--threads N] [--only TEXT]
     configs   DB-ResNet-18 width 1 at 736x1280 and 640x640, width 0.25 at 736x1280, batch 1 (issue 26's set)
     --only    the configs whose name contains TEXT, e.g. "w0.25"
   Needs node and onnxruntime-node under build/ort (./build.sh bench installs it); files go to build/onnx_bench/.
   Prints the CPU's measured peak (bench_peak.h), a table with each side's GFLOP/s and share of that peak (the same
   count for both: bench_model.h) and, last, one JSON line with every figure and ratio. */
#define OCR_IMPLEMENTATION
#include "ocr_tensor.h"
#include "ocr_nn.h"
#include "ocr_loss.h"
#include "ocr_dbnet.h"
#include "ocr_onnx.h"
#include "bench_common.h"
#include "bench_peak.h"
#include "bench_model.h"
#include <signal.h>
#include <sys/stat.h>

#define MAX_REPS 64
typedef struct { const char *name; float width; int H, W; } config;

static void die(ocr_ctx *ctx, const char *what) {
    fprintf(stderr, "bench_infer: %s: %s\n", what, ocr_ctx_last_error(ctx));
    exit(1);
}

int main(int argc, char **argv) {
    static const config configs[] = {
        {"infer r18 w1 736x1280 b1", 1.0f, 736, 1280},
        {"infer r18 w1 640x640 b1", 1.0f, 640, 640},
        {"infer r18 w0.25 736x1280 b1", 0.25f, 736, 1280},
    };
    int reps = 5, threads = 2, i, c, r, n_done = 0;
    const char *only = NULL;
    ocr_ctx ctx;
    char json[4096], line[256], cmd[512], cpu[160], threads_text[16];
    size_t jl;
    double la[3] = {0, 0, 0}, peak;
    FILE *f;
    for (i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--reps") == 0 && i + 1 < argc) reps = atoi(argv[++i]);
        else if (strcmp(argv[i], "--threads") == 0 && i + 1 < argc) threads = atoi(argv[++i]);
        else if (strcmp(argv[i], "--only") == 0 && i + 1 < argc) only = argv[++i];
        else {
            printf("usage: %s [--reps N (>= 5)] [--threads N] [--only TEXT]\n", argv[0]);
            return strcmp(argv[i], "--help") == 0 ? 0 : 2;
        }
    }
    if (reps < 5) reps = 5;
    if (reps > MAX_REPS) reps = MAX_REPS;
    if (threads < 1) threads = 1;
    snprintf(threads_text, sizeof threads_text, "%d", threads);
    signal(SIGPIPE, SIG_IGN);
    if (ocr_ctx_init(&ctx, threads, 1) != OCR_OK) die(&ctx, "context");
    (void)mkdir("build", 0755);
    (void)mkdir(WORK_DIR, 0755);
    if ((f = fopen("/proc/loadavg", "r"))) { if (fscanf(f, "%lf %lf %lf", &la[0], &la[1], &la[2]) != 3) la[0] = -1; fclose(f); }
    bench_cpu_model(cpu, sizeof cpu);
    peak = bench_print_peak(threads);
    printf("bench_infer: %d cores, GEMM kernel %s, %d threads each, load average %.2f %.2f %.2f, median of %d after 1 warm-up\n",
           ocr_cpu_count(), ocr_gemm_kernel_name(&ctx), threads, la[0], la[1], la[2], reps);
    printf("%s; %%peak: of the fp32 peak on %d threads above\n", BENCH_DBNET_FLOPS_CONVENTION, threads);
    jl = (size_t)snprintf(json, sizeof json, "{\"bench\":\"infer\",\"cpu\":\"%s\",\"cores\":%d,\"kernel\":\"%s\",\"threads\":%d,\"load\":%.2f,\"reps\":%d,"
                          "\"fp32_peak_gflops\":%.1f,\"results\":[", cpu, ocr_cpu_count(), ocr_gemm_kernel_name(&ctx), threads, la[0], reps, peak);
    printf("%-30s %9s %9s %10s %12s %7s %9s %6s %9s %6s\n", "config", "ours ms", "ORT ms", "ours/ORT", "max |diff|", "GFLOP", "ours GF/s",
           "%peak", "ORT GF/s", "%peak");
    for (c = 0; c < (int)(sizeof configs / sizeof configs[0]); c++) {
        const config *cf = &configs[c];
        ocr_dbnet_config mc = ocr_dbnet_config_default();
        ocr_dbnet m;
        ocr_tensor x, prob;
        bench_peer peer;
        char model[256], input[256], output[256], dims[64];
        char *peer_argv[] = {"env", "node", "tools/ort_run.js", "--serve", "--threads", threads_text, model, NULL};
        double t_ours[MAX_REPS], t_ort[MAX_REPS], med_ours, med_ort = 0, diff = -1, t0, flops, gf_ours, gf_ort;
        int ok;
        if (only && !strstr(cf->name, only)) continue;
        mc.width = cf->width;
        mc.prior_prob = 0.03f;
        snprintf(model, sizeof model, "%s/r18_w%g.onnx", WORK_DIR, cf->width);
        snprintf(input, sizeof input, "%s/input_%dx%d.f32", WORK_DIR, cf->H, cf->W);
        snprintf(output, sizeof output, "%s/ort_out", WORK_DIR);
        snprintf(dims, sizeof dims, "1,3,%d,%d", cf->H, cf->W);
        if (ocr_dbnet_init(&ctx, &m, &mc) || ocr_dbnet_export_onnx(&ctx, &m, model, NULL) ||
            ocr_tensor_alloc(&ctx, &x, "x", OCR_F32, OCR_DEVICE_CPU, ocr_shape4(1, 3, cf->H, cf->W)) ||
            ocr_tensor_fill_uniform(&ctx, &x, -1.0f, 1.0f))
            die(&ctx, "setting up the model");
        if (!bench_write_f32(input, (const float *)x.data, (size_t)ocr_tensor_numel(&x))) { fprintf(stderr, "bench_infer: cannot write %s\n", input); return 1; }
        ok = bench_peer_start(&peer, "ONNX Runtime peer (tools/ort_run.js)", "/usr/bin/env", peer_argv, NULL);
        snprintf(cmd, sizeof cmd, "load %s %s", input, dims);
        ok = ok && bench_peer_ask(&peer, cmd, line, sizeof line) && bench_peer_ask(&peer, "run", line, sizeof line);
        if (ocr_dbnet_forward(&ctx, &m, &x, 0, &prob, NULL)) die(&ctx, "inference"); /* warm-up: buffers grow, pages fault in */
        for (r = 0; r < reps; r++) {
            bench_settle();
            t0 = now();
            if (ocr_dbnet_forward(&ctx, &m, &x, 0, &prob, NULL)) die(&ctx, "inference");
            t_ours[r] = now() - t0;
            if (ok) {
                bench_settle();
                ok = bench_peer_ask(&peer, "run", line, sizeof line) && (t_ort[r] = atof(line)) > 0;
            }
        }
        med_ours = median(t_ours, reps);
        flops = bench_dbnet_flops(&m, 0, 1);
        gf_ours = 1e-9 * flops / med_ours;
        if (ok) {
            med_ort = median(t_ort, reps);
            snprintf(cmd, sizeof cmd, "save %s", output);
            if (bench_peer_ask(&peer, cmd, line, sizeof line)) {
                char prob_path[300];
                snprintf(prob_path, sizeof prob_path, "%s.prob.f32", output);
                diff = bench_max_diff_file(prob_path, (const float *)prob.data, (size_t)ocr_tensor_numel(&prob));
            }
        }
        bench_peer_stop(&peer, 1, NULL, 0);
        gf_ort = med_ort > 0 ? 1e-9 * flops / med_ort : 0.0;
        printf("%-30s %9.1f %9.1f %10.2f %12.2g %7.2f %9.1f %5.1f%% %9.1f %5.1f%%%s\n", cf->name, 1e3 * med_ours, 1e3 * med_ort,
               med_ort > 0 ? med_ours / med_ort : 0.0, diff, 1e-9 * flops, gf_ours, 100 * gf_ours / peak, gf_ort, 100 * gf_ort / peak,
               ok ? "" : "  (ONNX Runtime did not run: node and build/ort/node_modules/onnxruntime-node; ./build.sh bench installs it)");
        fflush(stdout);
        jl += (size_t)snprintf(json + jl, sizeof json - jl,
                               "%s{\"config\":\"%s\",\"ours_ms\":%.2f,\"ort_ms\":%.2f,\"ratio_ours_over_ort\":%.3f,\"max_abs_diff\":%.3g,"
                               "\"gflop_per_run\":%.3f,\"ours_gflops\":%.2f,\"ours_peak_share\":%.4f,\"ort_gflops\":%.2f,\"ort_peak_share\":%.4f}",
                               n_done++ ? "," : "", cf->name, 1e3 * med_ours, 1e3 * med_ort, med_ort > 0 ? med_ours / med_ort : 0.0, diff,
                               1e-9 * flops, gf_ours, gf_ours / peak, gf_ort, gf_ort / peak);
        ocr_tensor_free(&x);
        ocr_dbnet_free(&m);
    }
    snprintf(json + jl, sizeof json - jl, "]}");
    printf("%s\n", json);
    ocr_ctx_free(&ctx);
    return 0;
}
