/* test_onnx - ocr_onnx.h's export, read back by two implementations independent of ocr-c: Debian's python3-onnx
   (tools/check_onnx.py: onnx.checker.check_model with full_check, i.e. the checker and then shape inference in strict
   mode, and the file's inputs, outputs, opset and metadata) and ONNX Runtime 1.30 from npm (tools/ort_run.js), whose
   probability map on real images (synthetic text scenes and a fixture photo, resized and normalised as detect does)
   must equal ocr-c's own eval-mode inference within 1e-4 (max abs) at two sizes, one a batch of two: N, H and W are
   symbolic in the file. Models: DB-ResNet-18 at width 0.25 and 1, initialised, with running statistics taken from a
   batch of the images (BN momentum 1) and gamma and beta drawn away from 1 and 0, so that every BN matters and the
   map spreads over (0, 1); and the PyTorch-made ResNet-34 fixture (tests/fixtures/dbnet), exported by the
   export_onnx program. The threshold map (a second output on request) is compared with ocr-c's probability map of
   the same model with the threshold head's weights in the binarize head (ocr-c computes the threshold map only in
   training). The recognizer's export (a CRNN with two bidirectional LSTM layers, written by export_onnx from its
   checkpoint): its log-probabilities in ONNX Runtime against ocr-c's eval forward on two crops of the fixture photo
   within the same 1e-4, and what the checker reports of it. Errors: bad arguments, and a failed write that leaves no
   file behind.
   Needs /usr/bin/python3 with python3-onnx, node, and onnxruntime-node under build/ort: ./build.sh test installs
   all three. Runs from the repository root. */
#define OCR_IMPLEMENTATION
#include "ocr_tensor.h"
#include "ocr_nn.h"
#include "ocr_loss.h"
#include "ocr_dbnet.h"
#include "ocr_data.h"
#include "ocr_rec.h"
#include "ocr_onnx.h"
#include "ocr_synth.h"
#include "ocr_test.h"

#include <dirent.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#define EXPORT_ONNX "./examples/export_onnx"
#define PARITY_ATOL 1e-4

static ocr_ctx ctx;
static char dir[64];
static ocr_synth synth;

static const char *path_in(const char *name) {
    static char buf[4][256];
    static int k;
    k = (k + 1) % 4;
    snprintf(buf[k], sizeof buf[k], "%s/%s", dir, name);
    return buf[k];
}

/* Runs cmd with stdout and stderr into out (NUL-terminated, truncated to cap); its exit status, -1 if it did not run. */
static int run(const char *cmd, char *out, size_t cap) {
    char full[2048];
    size_t n = 0;
    FILE *p;
    snprintf(full, sizeof full, "%s 2>&1", cmd);
    out[0] = 0;
    if (!(p = popen(full, "r"))) return -1;
    while (n + 1 < cap && fgets(out + n, (int)(cap - n), p)) n += strlen(out + n);
    while (fgetc(p) != EOF) {}
    {
        int st = pclose(p);
        return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
    }
}

static int write_f32(const char *path, const ocr_tensor *t) {
    FILE *f = fopen(path, "wb");
    size_t n = (size_t)ocr_tensor_numel(t);
    int ok = f && fwrite(t->data, sizeof(float), n, f) == n;
    if (f && fclose(f) != 0) ok = 0;
    return ok;
}

/* n floats from path into out; 0 when the file is missing or not exactly that size. */
static int read_f32(const char *path, float *out, size_t n) {
    FILE *f = fopen(path, "rb");
    int ok = f && fread(out, sizeof(float), n, f) == n && fgetc(f) == EOF;
    if (f) fclose(f);
    return ok;
}

/* The network input of a batch: image i of the batch is synthetic scene scene_of[i], or the fixture photo when -1. */
static int make_input(ocr_tensor *x, int n, int h, int w, const int *scene_of) {
    int i;
    if (ocr_tensor_alloc(&ctx, x, "image", OCR_F32, OCR_DEVICE_CPU, ocr_shape4(n, 3, h, w))) return 0;
    for (i = 0; i < n; i++) {
        ocr_tensor row;
        ocr_sample s;
        ocr_image photo;
        int rc;
        memset(&s, 0, sizeof s);
        memset(&photo, 0, sizeof photo);
        if (scene_of[i] >= 0) rc = ocr_synth_sample(&ctx, &synth, 17, scene_of[i], w, h, &s);
        else rc = ocr_image_load(&ctx, "tests/fixtures/data/icdar/images/img_2.jpg", &photo);
        rc = rc || ocr_tensor_slice(&ctx, x, i, 1, &row) ||
             ocr_image_network_input(&ctx, scene_of[i] >= 0 ? &s.image : &photo, OCR_NORM_DBNET, &row);
        ocr_sample_free(&s);
        ocr_image_free(&photo);
        if (rc) { OCR_CHECK_MSG(0, "input: %s", ocr_ctx_last_error(&ctx)); return 0; }
    }
    return 1;
}

/* A DB-ResNet-18 of the given width whose BN layers are not the identity: running statistics from one training
   forward (momentum 1: the batch's own) over real images, gamma scaled and beta shifted at random. */
static int make_model(ocr_dbnet *m, float width) {
    static const int scenes[2] = {3, 4};
    ocr_dbnet_config cfg = ocr_dbnet_config_default();
    ocr_tensor x, prob, thresh;
    int i, ok;
    memset(&x, 0, sizeof x);
    cfg.width = width;
    cfg.bn_momentum = 1.0f;
    ok = ocr_dbnet_init(&ctx, m, &cfg) == OCR_OK && make_input(&x, 2, 160, 224, scenes) &&
         ocr_dbnet_forward(&ctx, m, &x, 1, &prob, &thresh) == OCR_OK;
    OCR_CHECK_MSG(ok, "model: %s", ocr_ctx_last_error(&ctx));
    ocr_tensor_free(&x);
    m->cfg.bn_momentum = 0.1f; /* what the metadata records */
    for (i = 0; ok && i < ocr_dbnet_op_count(m); i++) {
        ocr_dbnet_op_info op = ocr_dbnet_op(m, i);
        ocr_tensor g, b;
        int64_t c;
        if (strncmp(op.kind, "bn", 2) != 0) continue;
        g = ocr_params_value(&m->params, op.weight);
        b = ocr_params_value(&m->params, op.bias);
        for (c = 0; c < g.shape.dim[0]; c++) {
            ((float *)g.data)[c] *= 0.7f + 0.6f * ocr_rng_uniform(&ctx.rng);
            ((float *)b.data)[c] += 0.2f * (ocr_rng_uniform(&ctx.rng) - 0.5f);
        }
    }
    return ok;
}

/* tools/check_onnx.py's report of path into out; 1 when the checker passed. */
static int check_onnx(const char *path, char *out, size_t cap) {
    char cmd[512];
    int rc;
    snprintf(cmd, sizeof cmd, "/usr/bin/python3 tools/check_onnx.py %s", path);
    rc = run(cmd, out, cap);
    OCR_CHECK_MSG(rc == 0 && strstr(out, "check_model ok"), "'%s' exited %d (needs Debian's python3-onnx; ./build.sh test installs it):\n%s",
                  cmd, rc, out);
    return rc == 0;
}

/* Largest |a - b| over n floats (NaN when either holds one). */
static double max_abs_diff(const float *a, const float *b, size_t n) {
    double worst = 0.0;
    size_t i;
    for (i = 0; i < n; i++) {
        double d = fabs((double)a[i] - (double)b[i]);
        if (!(d <= worst)) worst = d;
    }
    return worst;
}

/* Runs the ONNX file in ONNX Runtime on x and compares its output `output` ("prob" or "thresh") with ref (ocr-c's
   map for x, [N,1,H,W]); the worst difference, or -1 when ORT did not run. */
static double ort_compare(const char *onnx, const ocr_tensor *x, const char *output, const ocr_tensor *ref, const char *label) {
    char cmd[1024], out[4096], dims[64], got_path[300];
    size_t n = (size_t)ocr_tensor_numel(ref);
    float *got = (float *)malloc(n * sizeof *got);
    double worst = -1;
    int rc;
    snprintf(dims, sizeof dims, "%lld,3,%lld,%lld", (long long)x->shape.dim[0], (long long)x->shape.dim[2], (long long)x->shape.dim[3]);
    if (!got || !write_f32(path_in("in.f32"), x)) { OCR_CHECK_MSG(0, "%s: cannot write the input", label); free(got); return -1; }
    snprintf(cmd, sizeof cmd, "node tools/ort_run.js --threads 2 %s %s %s %s", onnx, path_in("in.f32"), dims, path_in("out"));
    rc = run(cmd, out, sizeof out);
    snprintf(got_path, sizeof got_path, "%s.%s.f32", path_in("out"), output);
    OCR_CHECK_MSG(rc == 0, "%s: '%s' exited %d (needs node and onnxruntime-node under build/ort; ./build.sh test installs them):\n%s", label,
                  cmd, rc, out);
    if (rc == 0) {
        if (!read_f32(got_path, got, n)) OCR_CHECK_MSG(0, "%s: ONNX Runtime gave no '%s' of %zu floats (%s)", label, output, n, out);
        else {
            worst = max_abs_diff(got, (const float *)ref->data, n);
            printf("  %-34s N=%lld H=%lld W=%lld: max |ORT - ocr-c| %s = %.3g\n", label, (long long)x->shape.dim[0],
                   (long long)x->shape.dim[2], (long long)x->shape.dim[3], output, worst);
            OCR_CHECK_MSG(worst <= PARITY_ATOL, "%s: ONNX Runtime's %s differs from ocr-c's by %.3g (> %g)", label, output, worst, PARITY_ATOL);
        }
    }
    free(got);
    return worst;
}

/* The map takes many values in (0, 1): a comparison of saturated maps would prove little. */
static void check_spread(const ocr_tensor *prob, const char *label) {
    const float *p = (const float *)prob->data;
    int64_t i, n = ocr_tensor_numel(prob), mid = 0;
    for (i = 0; i < n; i++) mid += p[i] > 0.05f && p[i] < 0.95f;
    OCR_CHECK_MSG(mid * 10 >= n, "%s: only %lld of %lld probabilities lie in (0.05, 0.95)", label, (long long)mid, (long long)n);
}

/* ocr-c's eval forward on x and ORT's run of the export on x, compared. */
static void parity(ocr_dbnet *m, const char *onnx, int n, int h, int w, const int *scenes, const char *label) {
    ocr_tensor x, prob;
    int rc;
    memset(&x, 0, sizeof x);
    if (!make_input(&x, n, h, w, scenes)) return;
    rc = ocr_dbnet_forward(&ctx, m, &x, 0, &prob, NULL);
    OCR_CHECK_MSG(rc == OCR_OK, "%s: %s", label, ocr_ctx_last_error(&ctx));
    if (rc == OCR_OK) {
        check_spread(&prob, label);
        ort_compare(onnx, &x, "prob", &prob, label);
    }
    ocr_tensor_free(&x);
}

static void check_report(const char *report, const char *const *lines, int n) {
    int i;
    for (i = 0; i < n; i++) OCR_CHECK_MSG(strstr(report, lines[i]) != NULL, "tools/check_onnx.py's report lacks '%s':\n%s", lines[i], report);
}

/* What every export says about itself. */
static const char *const common_report[] = {
    "ir_version 8\n", "opset '' 17\n", "producer ocr-c " OCR_VERSION "\n", "input image 1 N,3,H,W\n", "output prob 1 N,1,H,W\n",
    "meta input.channel_order=BGR\n", "meta input.mean=122.678917,116.66877,104.006989\n", "meta input.std=255,255,255\n",
    "meta input.size_multiple=32\n", "meta input.layout=NCHW\n", "meta ocr_dbnet.k=50\n", "meta ocr_dbnet.bn_momentum=0.100000001\n",
    "meta ocr_dbnet.bn_eps=9.99999975e-06\n"};

static void test_width_quarter(void) {
    static const int batch[2] = {0, -1}, single[1] = {1};
    ocr_dbnet m;
    char report[8192];
    static const char *const lines[] = {"meta ocr_dbnet.backbone=resnet18\n", "meta ocr_dbnet.width=0.25\n",
                                        "nodes Add=11 BatchNormalization=22 Concat=1 Conv=29 ConvTranspose=2 MaxPool=1 Relu=19 Resize=6 Sigmoid=1\n"};
    if (!make_model(&m, 0.25f)) { ocr_dbnet_free(&m); return; }
    OCR_CHECK_OK(&ctx, ocr_dbnet_export_onnx(&ctx, &m, path_in("w025.onnx"), NULL));
    if (check_onnx(path_in("w025.onnx"), report, sizeof report)) {
        check_report(report, common_report, (int)(sizeof common_report / sizeof common_report[0]));
        check_report(report, lines, 3);
        OCR_CHECK_MSG(!strstr(report, "output thresh"), "an export without the flag has a threshold output:\n%s", report);
    }
    parity(&m, path_in("w025.onnx"), 2, 256, 320, batch, "r18 w0.25, scene + photo");
    parity(&m, path_in("w025.onnx"), 1, 224, 416, single, "r18 w0.25, another size");
    ocr_dbnet_free(&m);
}

/* The threshold output equals ocr-c's probability map of a model whose binarize head holds the threshold head's
   weights: the two heads are the same layers, and eval ends both with a sigmoid. */
static void test_threshold_map(void) {
    static const int scenes[1] = {5};
    ocr_onnx_options opt = ocr_onnx_options_default();
    ocr_dbnet m, swapped;
    ocr_tensor x, prob;
    char report[8192];
    int i, copied = 0;
    memset(&x, 0, sizeof x);
    memset(&swapped, 0, sizeof swapped);
    if (!make_model(&m, 0.25f)) { ocr_dbnet_free(&m); return; }
    opt.flags |= OCR_ONNX_THRESHOLD_MAP;
    OCR_CHECK_OK(&ctx, ocr_dbnet_export_onnx(&ctx, &m, path_in("thresh.onnx"), &opt));
    if (check_onnx(path_in("thresh.onnx"), report, sizeof report)) {
        static const char *const lines[] = {"output prob 1 N,1,H,W\noutput thresh 1 N,1,H,W\n",
                                            "nodes Add=11 BatchNormalization=24 Concat=1 Conv=30 ConvTranspose=4 MaxPool=1 Relu=21 Resize=6 Sigmoid=2\n"};
        check_report(report, lines, 2);
    }
    OCR_CHECK_OK(&ctx, ocr_dbnet_init(&ctx, &swapped, &m.cfg));
    OCR_CHECK_OK(&ctx, ocr_params_copy_values(&ctx, &swapped.params, &m.params));
    for (i = 0; i < m.params.count; i++) {
        char name[OCR_NAME_MAX + 16];
        ocr_tensor from = ocr_params_value(&m.params, i), to;
        if (strncmp(m.params.info[i].name, "decoder.thresh.", 15) != 0) continue;
        snprintf(name, sizeof name, "decoder.binarize.%s", m.params.info[i].name + 15);
        to = ocr_params_value(&swapped.params, ocr_params_find(&swapped.params, name));
        OCR_CHECK_OK(&ctx, ocr_tensor_copy(&ctx, &to, &from));
        copied++;
    }
    OCR_CHECK_MSG(copied == 13, "copied %d threshold-head tensors, expected 13 (3 convs' weights, 2 biases, 2 BNs' 4 each)", copied);
    if (make_input(&x, 1, 192, 288, scenes)) {
        OCR_CHECK_OK(&ctx, ocr_dbnet_forward(&ctx, &swapped, &x, 0, &prob, NULL));
        check_spread(&prob, "threshold map");
        ort_compare(path_in("thresh.onnx"), &x, "thresh", &prob, "r18 w0.25 threshold map");
        OCR_CHECK_OK(&ctx, ocr_dbnet_forward(&ctx, &m, &x, 0, &prob, NULL));
        ort_compare(path_in("thresh.onnx"), &x, "prob", &prob, "r18 w0.25 prob beside thresh");
    }
    ocr_tensor_free(&x);
    ocr_dbnet_free(&swapped);
    ocr_dbnet_free(&m);
}

static void test_width_one(void) {
    static const int scenes[1] = {6};
    ocr_dbnet m;
    char report[8192];
    static const char *const lines[] = {"meta ocr_dbnet.width=1\n", "initializers 124 floats 12"};
    if (!make_model(&m, 1.0f)) { ocr_dbnet_free(&m); return; }
    OCR_CHECK_OK(&ctx, ocr_dbnet_export_onnx(&ctx, &m, path_in("w1.onnx"), NULL));
    if (check_onnx(path_in("w1.onnx"), report, sizeof report)) check_report(report, lines, 2);
    parity(&m, path_in("w1.onnx"), 1, 224, 288, scenes, "r18 w1");
    ocr_dbnet_free(&m);
}

/* A checkpoint PyTorch made (ResNet-34, width 1/32), through the export_onnx program. */
static void test_pytorch_checkpoint_program(void) {
    static const int batch[2] = {7, -1};
    const char *ckpt = "tests/fixtures/dbnet/tiny_weights.safetensors";
    ocr_dbnet m;
    char cmd[1024], out[4096], report[8192];
    int rc;
    static const char *const lines[] = {"meta ocr_dbnet.backbone=resnet34\n", "meta ocr_dbnet.width=0.03125\n", "output thresh 1 N,1,H,W\n"};
    snprintf(cmd, sizeof cmd, "%s --model %s --out %s --threshold-map", EXPORT_ONNX, ckpt, path_in("tiny.onnx"));
    rc = run(cmd, out, sizeof out);
    OCR_CHECK_MSG(rc == 0 && strstr(out, "wrote") && strstr(out, "DB-ResNet-34"), "'%s' exited %d:\n%s", cmd, rc, out);
    if (rc != 0) return;
    if (check_onnx(path_in("tiny.onnx"), report, sizeof report)) check_report(report, lines, 3);
    if (ocr_dbnet_init_from_file(&ctx, &m, ckpt) != OCR_OK) { OCR_CHECK_MSG(0, "%s", ocr_ctx_last_error(&ctx)); return; }
    parity(&m, path_in("tiny.onnx"), 2, 96, 128, batch, "r34 w1/32 (PyTorch-made)");
    ocr_dbnet_free(&m);
    /* its usage errors */
    snprintf(cmd, sizeof cmd, "%s --out %s", EXPORT_ONNX, path_in("x.onnx"));
    OCR_CHECK_MSG(run(cmd, out, sizeof out) == 2 && strstr(out, "--model is required"), "'%s': %s", cmd, out);
    snprintf(cmd, sizeof cmd, "%s --model %s", EXPORT_ONNX, ckpt);
    OCR_CHECK_MSG(run(cmd, out, sizeof out) == 2 && strstr(out, "--out is required"), "'%s': %s", cmd, out);
    snprintf(cmd, sizeof cmd, "%s --model %s --out %s stray", EXPORT_ONNX, ckpt, path_in("x.onnx"));
    OCR_CHECK_MSG(run(cmd, out, sizeof out) == 2 && strstr(out, "unexpected argument: stray"), "'%s': %s", cmd, out);
    snprintf(cmd, sizeof cmd, "%s --model %s --out %s", EXPORT_ONNX, path_in("missing.safetensors"), path_in("x.onnx"));
    OCR_CHECK_MSG(run(cmd, out, sizeof out) == 1 && strstr(out, "cannot load the model"), "'%s': %s", cmd, out);
    snprintf(cmd, sizeof cmd, "%s --help", EXPORT_ONNX);
    OCR_CHECK_MSG(run(cmd, out, sizeof out) == 0 && strstr(out, "--threshold-map"), "'%s': %s", cmd, out);
    OCR_CHECK_MSG(access(path_in("x.onnx"), F_OK) != 0, "a failed export left %s", path_in("x.onnx"));
}

/* The recognizer's export: a CRNN with two bidirectional LSTM layers whose BN statistics are those of a batch of
   real crops (a training forward with momentum 1), written by export_onnx from its checkpoint; its log-probabilities
   in ONNX Runtime against ocr-c's eval forward on crops of the fixture photo (two widths, batched), and its refusals. */
static void test_recognizer(void) {
    static const int widths[6] = {8, 16, 16, 32, 32, 32};
    static const float quads[2][8] = {{20, 30, 300, 40, 298, 90, 18, 80}, {400, 200, 560, 190, 565, 240, 402, 252}};
    static const char *const lines[] = {"input image 1 N,3,32,W\n", "output log_probs 1 T,N,95\n", "meta ocr_rec.layers=2\n",
                                        "meta ocr_rec.hidden=12\n", "meta input.height=32\n", "meta input.width_multiple=4\n",
                                        "meta output.blank=0\n", "meta input.channel_order=BGR\n",
                                        "nodes Add=1 BatchNormalization=6 Conv=6 LSTM=2 LogSoftmax=1 MatMul=1 MaxPool=5 Relu=6 Reshape=3 Transpose=3\n"};
    ocr_rec_config cfg = ocr_rec_config_default();
    ocr_rec_crop_config cc = ocr_rec_crop_defaults();
    ocr_charset cs;
    ocr_rec_model m;
    ocr_image photo;
    ocr_tensor x, lp;
    char cmd[1024], out[4096], report[16384];
    int i, rc;
    memcpy(cfg.channels, widths, sizeof widths);
    cfg.hidden = 12;
    cfg.layers = 2;
    cfg.bn_momentum = 1.0f;
    memset(&x, 0, sizeof x);
    memset(&photo, 0, sizeof photo);
    if (ocr_charset_init(&ctx, &cs, "latin") || ocr_rec_init(&ctx, &m, &cfg, &cs)) { OCR_CHECK_MSG(0, "%s", ocr_ctx_last_error(&ctx)); return; }
    ocr_charset_free(&cs);
    cc.height = 32;
    cc.max_width = 160;
    OCR_CHECK_OK(&ctx, ocr_image_load(&ctx, "tests/fixtures/data/icdar/images/img_2.jpg", &photo));
    OCR_CHECK_OK(&ctx, ocr_tensor_alloc(&ctx, &x, "image", OCR_F32, OCR_DEVICE_CPU, ocr_shape4(2, 3, 32, 160)));
    for (i = 0; i < 2 && photo.pixels && x.data; i++) {
        ocr_point q[4];
        ocr_image crop;
        ocr_tensor row;
        int k;
        for (k = 0; k < 4; k++) { q[k].x = quads[i][2 * k]; q[k].y = quads[i][2 * k + 1]; }
        memset(&crop, 0, sizeof crop);
        OCR_CHECK_OK(&ctx, ocr_rec_crop(&ctx, &photo, q, &cc, NULL, 0, &crop));
        OCR_CHECK_OK(&ctx, ocr_tensor_slice(&ctx, &x, i, 1, &row));
        row.shape = ocr_shape3(3, 32, 160);
        OCR_CHECK_OK(&ctx, ocr_rec_crop_to_input(&ctx, &crop, &row));
        ocr_image_free(&crop);
    }
    ocr_image_free(&photo);
    OCR_CHECK_OK(&ctx, ocr_rec_forward(&ctx, &m, &x, NULL, 1, &lp)); /* the running statistics: this batch's */
    m.cfg.bn_momentum = 0.1f;
    OCR_CHECK_OK(&ctx, ocr_rec_save(&ctx, &m, path_in("rec.safetensors"), NULL, NULL, 0));
    snprintf(cmd, sizeof cmd, "%s --model %s --out %s", EXPORT_ONNX, path_in("rec.safetensors"), path_in("rec.onnx"));
    rc = run(cmd, out, sizeof out);
    OCR_CHECK_MSG(rc == 0 && strstr(out, "wrote") && strstr(out, "CRNN, 95 classes"), "'%s' exited %d:\n%s", cmd, rc, out);
    if (rc == 0 && check_onnx(path_in("rec.onnx"), report, sizeof report)) {
        check_report(report, lines, (int)(sizeof lines / sizeof lines[0]));
        check_report(report, common_report + 5, 3); /* the input's normalisation, as the detector's */
    }
    OCR_CHECK_OK(&ctx, ocr_rec_forward(&ctx, &m, &x, NULL, 0, &lp));
    if (rc == 0) ort_compare(path_in("rec.onnx"), &x, "log_probs", &lp, "CRNN, 2 LSTM layers, 2 crops");
    /* refusals: a detector's option, and flags the recognizer has no output for */
    snprintf(cmd, sizeof cmd, "%s --model %s --out %s --threshold-map", EXPORT_ONNX, path_in("rec.safetensors"), path_in("r2.onnx"));
    OCR_CHECK_MSG(run(cmd, out, sizeof out) == 2 && strstr(out, "is a recognizer"), "'%s': %s", cmd, out);
    {
        ocr_onnx_options opt = ocr_onnx_options_default();
        opt.flags = OCR_ONNX_THRESHOLD_MAP;
        EXPECT_ERR(&ctx, ocr_rec_export_onnx(&ctx, &m, path_in("r2.onnx"), &opt), OCR_EINVAL, "ocr_rec_export_onnx", "no optional output");
        EXPECT_ERR(&ctx, ocr_rec_export_onnx(&ctx, NULL, path_in("r2.onnx"), NULL), OCR_EINVAL, "needs a model");
    }
    OCR_CHECK_MSG(access(path_in("r2.onnx"), F_OK) != 0, "a refused export wrote %s", path_in("r2.onnx"));
    remove(path_in("rec.safetensors"));
    remove(path_in("rec.onnx"));
    ocr_tensor_free(&x);
    ocr_rec_free(&m);
}

/* Nothing in dir but the listed names (no temporary file left by a failed write). */
static void check_dir_holds(const char *d, const char *const *names, int n) {
    DIR *dd = opendir(d);
    struct dirent *e;
    int i, known;
    OCR_CHECK(dd != NULL);
    while (dd && (e = readdir(dd))) {
        if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0) continue;
        for (i = 0, known = 0; i < n; i++) known |= strcmp(e->d_name, names[i]) == 0;
        OCR_CHECK_MSG(known, "%s holds '%s' after a failed export", d, e->d_name);
    }
    if (dd) closedir(dd);
}

static void test_errors(void) {
    ocr_dbnet m, empty;
    ocr_onnx_options opt = ocr_onnx_options_default();
    ocr_dbnet_config cfg = ocr_dbnet_config_default();
    const char *sub = path_in("errors"), *names[1] = {"taken.onnx"};
    char target[300], before[64], after[64];
    FILE *f;
    cfg.width = 0.125f;
    memset(&empty, 0, sizeof empty);
    if (ocr_dbnet_init(&ctx, &m, &cfg) != OCR_OK) { OCR_CHECK_MSG(0, "%s", ocr_ctx_last_error(&ctx)); return; }
    EXPECT_ERR(&ctx, ocr_dbnet_export_onnx(&ctx, NULL, path_in("e.onnx"), NULL), OCR_EINVAL, "ocr_dbnet_export_onnx", "ocr_dbnet_init");
    EXPECT_ERR(&ctx, ocr_dbnet_export_onnx(&ctx, &empty, path_in("e.onnx"), NULL), OCR_EINVAL, "needs a model");
    EXPECT_ERR(&ctx, ocr_dbnet_export_onnx(&ctx, &m, "", NULL), OCR_EINVAL, "no output path");
    opt.channel_order = "GBR";
    EXPECT_ERR(&ctx, ocr_dbnet_export_onnx(&ctx, &m, path_in("e.onnx"), &opt), OCR_EINVAL, "channel_order 'GBR'");
    opt = ocr_onnx_options_default();
    opt.std[1] = 0.0f;
    EXPECT_ERR(&ctx, ocr_dbnet_export_onnx(&ctx, &m, path_in("e.onnx"), &opt), OCR_EINVAL, "input channel 1", "std > 0");
    opt = ocr_onnx_options_default();
    opt.mean[2] = (float)NAN;
    EXPECT_ERR(&ctx, ocr_dbnet_export_onnx(&ctx, &m, path_in("e.onnx"), &opt), OCR_EINVAL, "input channel 2");
    opt = ocr_onnx_options_default();
    opt.flags = 6;
    EXPECT_ERR(&ctx, ocr_dbnet_export_onnx(&ctx, &m, path_in("e.onnx"), &opt), OCR_EINVAL, "unknown flags 0x6");
    OCR_CHECK_MSG(access(path_in("e.onnx"), F_OK) != 0, "a refused export wrote %s", path_in("e.onnx"));
    /* a directory that does not exist: the temporary file cannot be created */
    snprintf(target, sizeof target, "%s/none/m.onnx", dir);
    EXPECT_ERR(&ctx, ocr_dbnet_export_onnx(&ctx, &m, target, NULL), OCR_EIO, "ocr_dbnet_export_onnx", "none/m.onnx");
    /* the rename onto a directory fails after the whole file was written: the file that was there stays as it was and
       no temporary file is left */
    OCR_CHECK(mkdir(sub, 0755) == 0);
    snprintf(target, sizeof target, "%s/taken.onnx", sub);
    OCR_CHECK(mkdir(target, 0755) == 0);
    EXPECT_ERR(&ctx, ocr_dbnet_export_onnx(&ctx, &m, target, NULL), OCR_EIO, "ocr_dbnet_export_onnx", "taken.onnx");
    check_dir_holds(sub, names, 1);
    /* an existing file is replaced whole by a successful export, and left alone by a refused one */
    snprintf(target, sizeof target, "%s/model.onnx", dir);
    f = fopen(target, "w");
    if (f) { fputs("old contents", f); fclose(f); }
    opt.flags = 6;
    EXPECT_ERR(&ctx, ocr_dbnet_export_onnx(&ctx, &m, target, &opt), OCR_EINVAL, "unknown flags");
    f = fopen(target, "r");
    memset(before, 0, sizeof before);
    if (f) { OCR_CHECK(fgets(before, sizeof before, f) != NULL); fclose(f); }
    OCR_CHECK_MSG(strcmp(before, "old contents") == 0, "a refused export changed the file: '%s'", before);
    OCR_CHECK_OK(&ctx, ocr_dbnet_export_onnx(&ctx, &m, target, NULL));
    f = fopen(target, "r");
    memset(after, 0, sizeof after);
    if (f) { OCR_CHECK(fread(after, 1, 2, f) == 2); fclose(f); }
    OCR_CHECK_MSG(after[0] == 0x08 && after[1] == 0x08, "the export does not start with ir_version 8 (bytes %02x %02x)", (unsigned char)after[0],
                  (unsigned char)after[1]);
    ocr_dbnet_free(&m);
}

int main(int argc, char **argv) {
    char cmd[128];
    ocr_test_init(argc, argv);
    if (ocr_ctx_init(&ctx, 2, 26) != OCR_OK) return 1;
    if (ocr_synth_init(&ctx, &synth, NULL) != OCR_OK) {
        fprintf(stderr, "test_onnx: %s (fonts-dejavu-core; ./build.sh installs it)\n", ocr_ctx_last_error(&ctx));
        return 1;
    }
    snprintf(dir, sizeof dir, "/tmp/ocr_test_onnx.XXXXXX");
    if (!mkdtemp(dir)) { fprintf(stderr, "test_onnx: mkdtemp failed\n"); return 1; }
    OCR_TEST_RUN(test_width_quarter);
    OCR_TEST_RUN(test_threshold_map);
    OCR_TEST_RUN(test_width_one);
    OCR_TEST_RUN(test_pytorch_checkpoint_program);
    OCR_TEST_RUN(test_recognizer);
    OCR_TEST_RUN(test_errors);
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    if (system(cmd) != 0) fprintf(stderr, "test_onnx: could not remove %s\n", dir);
    ocr_synth_free(&synth);
    ocr_ctx_free(&ctx);
    return ocr_test_finish();
}
