/* bench_rec - the recognizer's training step (forward, CTC loss, backward, AdamW step) and inference, ocr-c against
   PyTorch on the same CRNN (tools/bench_crnn_torch.py over tools/crnn_ref.py's module) in the same run: one warm-up
   each, then the two alternate rep by rep, each after a pause (bench_settle); the median of the reps is reported,
   with crops per second, the ratio, and each side's GFLOP/s and share of this CPU's measured fp32 peak (a training
   step counted as 3x its forward; convolutions, LSTM and classifier). Inference also against ONNX Runtime (npm
   onnxruntime-node through tools/ort_run.js --serve, as bench_infer) running ocr-c's ONNX export of the same model
   (ocr_rec_export_onnx) on the same input and threads, with the largest difference of its log-probabilities.
   usage: bench_rec [--reps N] [--no-torch] [--no-ort]
     configs: train_rec's model (widths 16..128, one LSTM layer of 96, 312 classes: the european charset) and the
     module's default (widths 32..256, two layers of 128), 32 crops of 32x128, 2 threads; inference of the first. */
#define OCR_IMPLEMENTATION
#include "ocr_tensor.h"
#include "ocr_nn.h"
#include "ocr_loss.h"
#include "ocr_data.h"
#include "ocr_rec.h"
#include "ocr_onnx.h"
#include "bench_common.h"
#include "bench_peak.h"

#include <sys/stat.h>

#define MAX_REPS 64

typedef struct {
    const char *name;
    int train, N, W, classes, hidden, layers, threads;
    int channels[OCR_REC_BLOCKS];
} config;

static const config CONFIGS[] = {
    {"train_rec's model, train", 1, 32, 128, 312, 96, 1, 2, {16, 32, 64, 64, 128, 128}},
    {"module default, train", 1, 32, 128, 312, 128, 2, 2, {32, 64, 128, 128, 256, 256}},
    {"train_rec's model, infer", 0, 32, 128, 312, 96, 1, 2, {16, 32, 64, 64, 128, 128}},
};

static void die(ocr_ctx *ctx, const char *what) {
    fprintf(stderr, "bench_rec: %s: %s\n", what, ocr_ctx_last_error(ctx));
    exit(1);
}

/* Forward FLOPs of one batch: 3x3 convolutions at each block's resolution, the LSTM's input and recurrent products
   per direction and step, the classifier. */
static double forward_flops(const config *c) {
    static const int pool_h[OCR_REC_BLOCKS] = {2, 2, 1, 2, 2, 2}, pool_w[OCR_REC_BLOCKS] = {2, 2, 1, 1, 1, 1};
    double f = 0, h = 32, w = c->W;
    int b, cin = 3, l, T = c->W / 4;
    for (b = 0; b < OCR_REC_BLOCKS; b++) {
        f += 2.0 * cin * c->channels[b] * 9 * h * w;
        cin = c->channels[b];
        h /= pool_h[b];
        w /= pool_w[b];
    }
    for (l = 0; l < c->layers; l++) {
        int in = l ? 2 * c->hidden : cin;
        f += 2 * 2.0 * T * 4 * c->hidden * (in + c->hidden);
    }
    f += 2.0 * T * 2 * c->hidden * c->classes;
    return f * c->N;
}

typedef struct {
    ocr_rec_model m;
    ocr_optimizer opt;
    ocr_tensor x, targets, tlens, ilens, d_lp;
} ours;

static void ours_setup(ocr_ctx *ctx, const config *c, ours *o) {
    ocr_rec_config rc = ocr_rec_config_default();
    ocr_charset cs;
    ocr_rng rng;
    int total = 0, i;
    memcpy(rc.channels, c->channels, sizeof rc.channels);
    rc.hidden = c->hidden;
    rc.layers = c->layers;
    if (ocr_charset_init(ctx, &cs, "european")) die(ctx, "charset");
    if (cs.n_classes != c->classes) { fprintf(stderr, "bench_rec: the european charset has %d classes, not %d\n", cs.n_classes, c->classes); exit(1); }
    if (ocr_rec_init(ctx, &o->m, &rc, &cs)) die(ctx, "model");
    ocr_charset_free(&cs);
    if (ocr_optim_init(ctx, &o->opt, &o->m.params, ocr_optim_adamw(0.9f, 0.999f, 1e-8f, 1e-4f))) die(ctx, "optimizer");
    ocr_rng_seed(&rng, 0);
    if (ocr_tensor_alloc(ctx, &o->x, "x", OCR_F32, OCR_DEVICE_CPU, ocr_shape4(c->N, 3, 32, c->W)) ||
        ocr_tensor_alloc(ctx, &o->tlens, "target_lengths", OCR_I32, OCR_DEVICE_CPU, ocr_shape1(c->N)) ||
        ocr_tensor_alloc(ctx, &o->ilens, "input_lengths", OCR_I32, OCR_DEVICE_CPU, ocr_shape1(c->N)) ||
        ocr_tensor_alloc(ctx, &o->targets, "targets", OCR_I32, OCR_DEVICE_CPU, ocr_shape1(c->N * 10)) ||
        ocr_tensor_alloc(ctx, &o->d_lp, "d_log_probs", OCR_F32, OCR_DEVICE_CPU, ocr_shape3(c->W / 4, c->N, c->classes)))
        die(ctx, "data");
    for (i = 0; i < c->N * 3 * 32 * c->W; i++) ((float *)o->x.data)[i] = ocr_rng_normal(&rng);
    for (i = 0; i < c->N; i++) {
        int len = 4 + (int)(ocr_rng_uniform(&rng) * 7), k;
        if (len > 10) len = 10;
        ((int32_t *)o->tlens.data)[i] = len;
        ((int32_t *)o->ilens.data)[i] = c->W / 4;
        for (k = 0; k < len; k++) ((int32_t *)o->targets.data)[total++] = 1 + (int32_t)(ocr_rng_uniform(&rng) * (c->classes - 1)) % (c->classes - 1);
    }
    o->targets.shape = ocr_shape1(total);
}

static double ours_run(ocr_ctx *ctx, const config *c, ours *o) {
    ocr_tensor lp;
    ocr_ctc_config cc = ocr_ctc_defaults();
    ocr_ctc_result res;
    double t0 = now();
    if (!c->train) {
        if (ocr_rec_forward(ctx, &o->m, &o->x, &o->ilens, 0, &lp)) die(ctx, "inference");
        return now() - t0;
    }
    ocr_params_zero_grad(&o->m.params);
    if (ocr_rec_forward(ctx, &o->m, &o->x, &o->ilens, 1, &lp) || ocr_tensor_zero(ctx, &o->d_lp) ||
        ocr_loss_ctc(ctx, &cc, &lp, &o->targets, &o->tlens, &o->ilens, &res, NULL, &o->d_lp) || ocr_rec_backward(ctx, &o->m, &o->d_lp) ||
        ocr_optim_step(ctx, &o->opt, &o->m.params, 1e-3f))
        die(ctx, "training step");
    return now() - t0;
}

static void ours_free(ours *o) {
    ocr_optim_free(&o->opt);
    ocr_rec_free(&o->m);
    ocr_tensor_free(&o->x); ocr_tensor_free(&o->targets); ocr_tensor_free(&o->tlens); ocr_tensor_free(&o->ilens); ocr_tensor_free(&o->d_lp);
}

int main(int argc, char **argv) {
    int reps = 7, use_torch = 1, use_ort = 1, i, c, r;
    const char *only = NULL;
    char cpu[256];
    for (i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--reps") == 0 && i + 1 < argc) reps = atoi(argv[++i]);
        else if (strcmp(argv[i], "--no-torch") == 0) use_torch = 0;
        else if (strcmp(argv[i], "--no-ort") == 0) use_ort = 0;
        else if (strcmp(argv[i], "--only") == 0 && i + 1 < argc) only = argv[++i];
        else if (strcmp(argv[i], "--help") == 0) {
            printf("usage: bench_rec [--reps N] [--no-torch] [--no-ort] [--only TEXT]\n"
                   "  --only TEXT  only the configurations whose name contains TEXT (e.g. infer)\n");
            return 0;
        } else {
            fprintf(stderr, "bench_rec: unknown argument '%s' (usage: bench_rec [--reps N] [--no-torch] [--no-ort] [--only TEXT])\n", argv[i]);
            return 2;
        }
    }
    if (reps < 1 || reps > MAX_REPS) { fprintf(stderr, "bench_rec: --reps must be 1 to %d\n", MAX_REPS); return 2; }
    bench_cpu_model(cpu, sizeof cpu);
    (void)bench_print_peak(2);
    printf("%-28s %12s %12s %8s %10s %10s %s\n", "config", "ocr-c ms", "torch ms", "ratio", "ocr-c c/s", "torch c/s", "GFLOP/s (share of peak): ocr-c, torch");
    for (c = 0; c < (int)(sizeof CONFIGS / sizeof CONFIGS[0]); c++) {
        const config *cf = &CONFIGS[c];
        ocr_ctx ctx;
        ours o;
        bench_peer peer, ort;
        double t_ours[MAX_REPS], t_torch[MAX_REPS], t_ort[MAX_REPS], mo, mt = 0, m_ort = 0, flops, peak = bench_peak_fp32_on(cf->threads);
        char cmd[512], answer[256], model[256], input[256], threads_text[16];
        char *ort_argv[] = {"env", "node", "tools/ort_run.js", "--serve", "--threads", threads_text, model, NULL};
        int have_torch = 0, have_ort = 0;
        if (only && !strstr(cf->name, only)) continue;
        if (ocr_ctx_init(&ctx, cf->threads, 1) != OCR_OK) die(&ctx, "context");
        ours_setup(&ctx, cf, &o);
        if (use_ort && !cf->train) { /* the same model exported, the same input (every crop its full width: no lengths needed) */
            snprintf(threads_text, sizeof threads_text, "%d", cf->threads);
            snprintf(model, sizeof model, "%s/crnn.onnx", WORK_DIR);
            snprintf(input, sizeof input, "%s/crnn_input.f32", WORK_DIR);
            (void)mkdir("build", 0755);
            (void)mkdir(WORK_DIR, 0755);
            if (ocr_rec_export_onnx(&ctx, &o.m, model, NULL)) die(&ctx, "ONNX export");
            if (!bench_write_f32(input, (const float *)o.x.data, (size_t)ocr_tensor_numel(&o.x))) die(&ctx, "writing the ONNX Runtime input");
            have_ort = bench_peer_start(&ort, "ONNX Runtime peer (tools/ort_run.js)", "/usr/bin/env", ort_argv, NULL);
            snprintf(cmd, sizeof cmd, "load %s %d,3,32,%d", input, cf->N, cf->W);
            have_ort = have_ort && bench_peer_ask(&ort, cmd, answer, sizeof answer) && bench_peer_ask(&ort, "run", answer, sizeof answer);
        }
        if (use_torch) {
            char *pargv[] = {"python3", "tools/bench_crnn_torch.py", NULL};
            const char *env[] = {"PYTHONPATH", "tools", NULL};
            have_torch = bench_peer_start(&peer, "torch", "/usr/bin/python3", pargv, env);
            snprintf(cmd, sizeof cmd, "setup %d %d %d %d %d %d %d,%d,%d,%d,%d,%d", cf->N, cf->W, cf->classes, cf->threads, cf->hidden, cf->layers,
                     cf->channels[0], cf->channels[1], cf->channels[2], cf->channels[3], cf->channels[4], cf->channels[5]);
            if (have_torch && (!bench_peer_ask(&peer, cmd, answer, sizeof answer) || strncmp(answer, "ok", 2) != 0)) have_torch = 0;
            if (have_torch) bench_peer_ask(&peer, cf->train ? "train" : "infer", answer, sizeof answer); /* warm-up */
        }
        (void)ours_run(&ctx, cf, &o); /* warm-up: buffers grow */
        for (r = 0; r < reps; r++) {
            bench_settle();
            t_ours[r] = ours_run(&ctx, cf, &o);
            if (have_ort) {
                bench_settle();
                have_ort = bench_peer_ask(&ort, "run", answer, sizeof answer) && (t_ort[r] = atof(answer)) > 0;
            }
            if (have_torch) {
                bench_settle();
                if (!bench_peer_ask(&peer, cf->train ? "train" : "infer", answer, sizeof answer)) { have_torch = 0; continue; }
                t_torch[r] = atof(answer);
            }
        }
        if (use_torch) bench_peer_stop(&peer, 1, answer, sizeof answer);
        mo = median(t_ours, reps);
        if (have_torch) mt = median(t_torch, reps);
        flops = forward_flops(cf) * (cf->train ? 3 : 1);
        printf("%-28s %12.1f %12.1f %8.2f %10.0f %10.0f %.1f (%.1f%%), %.1f (%.1f%%)\n", cf->name, 1e3 * mo, 1e3 * mt, mt > 0 ? mo / mt : 0.0,
               cf->N / mo, mt > 0 ? cf->N / mt : 0.0, flops / mo * 1e-9, peak > 0 ? 100 * flops / mo * 1e-9 / peak : 0.0,
               mt > 0 ? flops / mt * 1e-9 : 0.0, mt > 0 && peak > 0 ? 100 * flops / mt * 1e-9 / peak : 0.0);
        if (have_ort) { /* its own line: ocr-c against ONNX Runtime, and how far ORT's log-probabilities are from ours */
            ocr_tensor lp;
            double diff = -1;
            char out_path[300];
            m_ort = median(t_ort, reps);
            if (ocr_rec_forward(&ctx, &o.m, &o.x, &o.ilens, 0, &lp)) die(&ctx, "inference");
            snprintf(cmd, sizeof cmd, "save %s/crnn_out", WORK_DIR);
            snprintf(out_path, sizeof out_path, "%s/crnn_out.log_probs.f32", WORK_DIR);
            if (bench_peer_ask(&ort, cmd, answer, sizeof answer))
                diff = bench_max_diff_file(out_path, (const float *)lp.data, (size_t)ocr_tensor_numel(&lp));
            bench_peer_stop(&ort, 1, answer, sizeof answer);
            printf("%-28s %12.1f %12.1f %8.2f %10.0f %10.0f %.1f (%.1f%%), %.1f (%.1f%%)   [ORT column: ONNX Runtime on ocr-c's export; "
                   "max |ORT - ocr-c| %.2g]\n", "  same, against ORT", 1e3 * mo, 1e3 * m_ort, mo / m_ort, cf->N / mo, cf->N / m_ort,
                   flops / mo * 1e-9, peak > 0 ? 100 * flops / mo * 1e-9 / peak : 0.0, flops / m_ort * 1e-9,
                   peak > 0 ? 100 * flops / m_ort * 1e-9 / peak : 0.0, diff);
        } else if (use_ort && !cf->train) {
            printf("  (ONNX Runtime did not run: node and build/ort/node_modules/onnxruntime-node; ./build.sh bench installs it)\n");
        }
        fflush(stdout);
        ours_free(&o);
        ocr_ctx_free(&ctx);
    }
    printf("ratio: ocr-c's median time over PyTorch's, or ONNX Runtime's on the \"against ORT\" line (below 1: ocr-c is faster); %d reps "
           "each, alternating; cpu: %s\n", reps, cpu);
    return 0;
}
