/* The DBNet model of ocr_dbnet.h against an independent PyTorch DBNet (tools/dbnet_ref.py):
   - live: weights drawn by ocr_dbnet_init are saved with ocr_dbnet_save and loaded by PyTorch with strict=True;
     both run the same input and upstream gradients (ResNet-18 at width 0.25 on 2x3x64x96 and at width 1.0 on
     2x3x32x64), PyTorch in float64: training outputs, EVERY parameter gradient, BN running statistics after the
     forward, and the eval-mode map must agree to relative error 1e-3 (width 1.0 gradients: see below).
     PyTorch also exports a torchvision-style backbone file that ocr_dbnet_load_backbone must take. Python or
     torch missing makes this FAIL, not skip.
   - fixture: a tiny ResNet-34 DBNet initialised and run by PyTorch (tools/make_dbnet_fixtures.py) loads with
     ocr_dbnet_read_config + ocr_dbnet_load and is reproduced the same way.
   - hand-computed: parameter names, shapes and counts (ResNet-18/34 totals of torchvision), initialisation
     statistics, checkpoint round trip and refusals, bad inputs, buffer reuse across input sizes.
   - against itself: activation memory shared by liveness equals the same model with sharing off, bit for bit. */
#define _POSIX_C_SOURCE 200809L
#define OCR_IMPLEMENTATION
#include "ocr_tensor.h"
#include "ocr_nn.h"
#include "ocr_loss.h"
#include "ocr_dbnet.h"
#include "ocr_test.h"
#include <fcntl.h>
#include <unistd.h>

#define FIXTURES "tests/fixtures/dbnet/"
#define TOL 1e-3

static double worst_seen, grad_tol = TOL;
static char worst_name[200];

/* Relative error of a whole tensor: max |got - ref| / max |ref| (gradients: grad_tol, see the live test). */
static void check_close(const char *what, const float *got, const float *ref, int64_t n) {
    double e = ocr_test_rel_err(got, ref, n, 1e-30), tol = strncmp(what, "grad.", 5) == 0 ? grad_tol : TOL;
    if (e > worst_seen || e != e) { worst_seen = e; snprintf(worst_name, sizeof worst_name, "%s", what); }
    OCR_CHECK_MSG(e <= tol, "%s: relative error %.3g (tolerance %g)", what, e, tol);
}

/* The bias of a transposed conv feeding a training-mode BN has a gradient of exactly zero (BN removes every
   per-channel constant); both sides hold rounding noise, so it must be tiny next to the weight's gradient. */
static int is_zero_gradient(const char *name) {
    return strcmp(name, "decoder.binarize.3.bias") == 0 || strcmp(name, "decoder.thresh.3.bias") == 0;
}

static double max_abs(const float *p, int64_t n) {
    double m = 0.0;
    int64_t i;
    for (i = 0; i < n; i++) if (!(fabs(p[i]) <= m)) m = fabs(p[i]);
    return m;
}

/* Reads a reference tensor and compares it with n floats of got. */
static void check_against(ocr_ctx *ctx, const ocr_safetensors *ref, const char *name, const float *got, ocr_shape shape) {
    ocr_tensor r;
    if (ocr_safetensors_read(ctx, ref, name, &r) != OCR_OK) {
        OCR_CHECK_MSG(0, "reference has no '%s': %s", name, ocr_ctx_last_error(ctx));
        return;
    }
    OCR_CHECK_MSG(r.dtype == OCR_F32 && ocr_shape_equal(r.shape, shape), "reference '%s' has another dtype or shape", name);
    if (r.dtype == OCR_F32 && ocr_shape_equal(r.shape, shape)) check_close(name, got, (const float *)r.data, ocr_shape_numel(shape));
    ocr_tensor_free(&r);
}

/* Runs the model on io (x, d_prob_logits, d_thresh) and compares everything with the reference file:
   training outputs, every trainable parameter's gradient, every buffer after the forward, the eval map. */
static void run_and_compare(ocr_ctx *ctx, ocr_dbnet *m, const char *io_path, const char *ref_path) {
    ocr_safetensors io, ref;
    ocr_tensor x, dp, dt, prob, thresh;
    int i, grads = 0;
    if (ocr_safetensors_open(ctx, &io, io_path) != OCR_OK || ocr_safetensors_open(ctx, &ref, ref_path) != OCR_OK) {
        OCR_CHECK_MSG(0, "cannot open %s or %s: %s", io_path, ref_path, ocr_ctx_last_error(ctx));
        return;
    }
    OCR_CHECK_OK(ctx, ocr_safetensors_read(ctx, &io, "x", &x));
    OCR_CHECK_OK(ctx, ocr_safetensors_read(ctx, &io, "d_prob_logits", &dp));
    OCR_CHECK_OK(ctx, ocr_safetensors_read(ctx, &io, "d_thresh", &dt));
    OCR_CHECK_OK(ctx, ocr_dbnet_forward(ctx, m, &x, 1, &prob, &thresh));
    check_against(ctx, &ref, "prob_logits", (const float *)prob.data, prob.shape);
    check_against(ctx, &ref, "thresh", (const float *)thresh.data, thresh.shape);
    ocr_params_zero_grad(&m->params);
    OCR_CHECK_OK(ctx, ocr_dbnet_backward(ctx, m, &dp, &dt));
    for (i = 0; i < m->params.count; i++) {
        const ocr_param_info *pi = &m->params.info[i];
        char name[2 * OCR_NAME_MAX];
        if (pi->trainable && is_zero_gradient(pi->name)) {
            int w = ocr_params_find(&m->params, "decoder.binarize.3.weight");
            double gb = max_abs(m->params.grad + pi->offset, ocr_shape_numel(pi->shape));
            double gw = max_abs(m->params.grad + m->params.info[w].offset, ocr_shape_numel(m->params.info[w].shape));
            OCR_CHECK_MSG(gb <= 1e-4 * gw, "%s: gradient %g should be 0 (weight gradients reach %g)", pi->name, gb, gw);
            grads++;
        } else if (pi->trainable) {
            snprintf(name, sizeof name, "grad.%s", pi->name);
            check_against(ctx, &ref, name, m->params.grad + pi->offset, pi->shape);
            grads++;
        } else {
            check_against(ctx, &ref, pi->name, m->params.data + pi->offset, pi->shape);
        }
    }
    {
        ocr_tensor nbt;
        OCR_CHECK_OK(ctx, ocr_safetensors_read(ctx, &ref, "backbone.layer1.0.bn1.num_batches_tracked", &nbt));
        OCR_CHECK(nbt.dtype == OCR_I64 && (int64_t)ocr_tensor_get(&nbt, 0) == m->num_batches_tracked);
        ocr_tensor_free(&nbt);
    }
    /* PyTorch has no trainable parameter the C model lacks */
    {
        int ref_grads = 0;
        for (i = 0; i < ref.n_entries; i++) ref_grads += strncmp(ref.entries[i].name, "grad.", 5) == 0;
        OCR_CHECK_MSG(ref_grads == grads, "PyTorch has %d gradients, the C model %d", ref_grads, grads);
    }
    OCR_CHECK_OK(ctx, ocr_dbnet_forward(ctx, m, &x, 0, &prob, &thresh));
    check_against(ctx, &ref, "eval_prob", (const float *)prob.data, prob.shape);
    OCR_CHECK(thresh.data == NULL);
    ocr_tensor_free(&x); ocr_tensor_free(&dp); ocr_tensor_free(&dt);
    ocr_safetensors_close(&io);
    ocr_safetensors_close(&ref);
}

static ocr_dbnet_config make_config(int depth, float width, float prior) {
    ocr_dbnet_config c = ocr_dbnet_config_default();
    c.depth = depth;
    c.width = width;
    c.prior_prob = prior;
    return c;
}

static void write_io(ocr_ctx *ctx, const char *path, int64_t N, int64_t H, int64_t W) {
    ocr_tensor x, dp, dt;
    const ocr_tensor *ts[3];
    OCR_CHECK_OK(ctx, ocr_tensor_alloc(ctx, &x, "x", OCR_F32, OCR_DEVICE_CPU, ocr_shape4(N, 3, H, W)));
    OCR_CHECK_OK(ctx, ocr_tensor_alloc(ctx, &dp, "d_prob_logits", OCR_F32, OCR_DEVICE_CPU, ocr_shape4(N, 1, H, W)));
    OCR_CHECK_OK(ctx, ocr_tensor_alloc(ctx, &dt, "d_thresh", OCR_F32, OCR_DEVICE_CPU, ocr_shape4(N, 1, H, W)));
    OCR_CHECK_OK(ctx, ocr_tensor_fill_normal(ctx, &x, 0.0f, 1.0f));
    OCR_CHECK_OK(ctx, ocr_tensor_fill_normal(ctx, &dp, 0.0f, 1.0f));
    OCR_CHECK_OK(ctx, ocr_tensor_fill_normal(ctx, &dt, 0.0f, 1.0f));
    ts[0] = &x; ts[1] = &dp; ts[2] = &dt;
    OCR_CHECK_OK(ctx, ocr_safetensors_save(ctx, path, ts, 3, NULL, NULL, 0));
    ocr_tensor_free(&x); ocr_tensor_free(&dp); ocr_tensor_free(&dt);
}

/* Gradient tolerances: float32 gradients of a randomly initialised DBNet are ill-conditioned where a ReLU input
   sits within rounding of 0 (after the heads' BN, whose input mean is large next to its spread): the float32
   side may take the other branch at a pixel, moving that pixel's gradient by O(1) and a weight gradient summed
   over P pixels of random-signed upstream gradients by about 1/sqrt(P). PyTorch's own float32 gradients differ
   from its float64 ones by up to 5e-2 (max) at width 1.0, depending on the seed (ResNet-34 at width 0.25 too);
   width 0.25 ResNet-18 on 64x96 stayed below 3e-5 in every seed tried. Width 1.0 over context seeds 1-10 gave worst
   gradient errors 8.8e-5, 1.9e-4, 3.8e-2, 5.6e-5, 3.0e-2, 5.7e-2, 1.7e-2, 1.5e-2, 7.2e-5, 4.9e-5: the large ones
   are such ReLU flips (PyTorch float32 against float64 misses by the same 3.8e-2 on seed 3). Seed 1 has no pixel
   that close to 0, so both cases hold the 1e-3 bound on every output and gradient there; on an
   ill-conditioned seed this test would need the looser bound, not a fix. */
static void test_dbnet_parity_pytorch_live(void) {
    static const struct { int depth; float width; int H, W; double grad_tol; } cases[] = {
        {18, 0.25f, 64, 96, TOL}, {18, 1.0f, 32, 64, TOL}};
    enum { NC = sizeof cases / sizeof cases[0] };
    char dir[] = "/tmp/ocr_dbnet_test_XXXXXX", cmd[4096], path[3][NC][512], tv[512];
    ocr_ctx ctx;
    ocr_dbnet m[NC], other;
    int i, k, rc;
    size_t used;
    OCR_CHECK_OK(&ctx, ocr_ctx_init(&ctx, 2, 1)); /* a well-conditioned seed: see above */
    if (!mkdtemp(dir)) { OCR_CHECK_MSG(0, "mkdtemp failed"); ocr_ctx_free(&ctx); return; }
    used = (size_t)snprintf(cmd, sizeof cmd, "/usr/bin/python3 tools/dbnet_ref.py");
    for (i = 0; i < NC; i++) {
        ocr_dbnet_config cfg = make_config(cases[i].depth, cases[i].width, 0.03f);
        static const char *const kinds[3] = {"weights", "io", "ref"};
        for (k = 0; k < 3; k++) snprintf(path[k][i], sizeof path[k][i], "%s/case%d_%s.safetensors", dir, i, kinds[k]);
        OCR_CHECK_OK(&ctx, ocr_dbnet_init(&ctx, &m[i], &cfg));
        OCR_CHECK_OK(&ctx, ocr_dbnet_save(&ctx, &m[i], path[0][i], NULL, NULL, 0));
        write_io(&ctx, path[1][i], 2, cases[i].H, cases[i].W);
        used += (size_t)snprintf(cmd + used, sizeof cmd - used, " parity %s %s %s", path[0][i], path[1][i], path[2][i]);
    }
    snprintf(tv, sizeof tv, "%s/torchvision_resnet.safetensors", dir);
    snprintf(cmd + used, sizeof cmd - used, " backbone %s %s", path[0][0], tv);
    rc = system(cmd);
    OCR_CHECK_MSG(rc == 0, "the PyTorch reference failed (status %d): %s\n  it needs /usr/bin/python3 with python3-torch and "
                  "python3-numpy (Debian packages) and runs from the repository root", rc, cmd);
    for (i = 0; i < NC && rc == 0; i++) {
        worst_seen = 0.0;
        grad_tol = cases[i].grad_tol;
        run_and_compare(&ctx, &m[i], path[1][i], path[2][i]);
        grad_tol = TOL;
        printf("     resnet%d width %.2f 2x3x%dx%d: worst relative error %.2e (%s) over outputs, %d parameter tensors, eval map\n",
               cases[i].depth, cases[i].width, cases[i].H, cases[i].W, worst_seen, worst_name, m[i].params.count);
    }
    /* the torchvision-layout export of case 0's backbone loads into a fresh model's backbone, fc.* ignored */
    if (rc == 0) {
        ocr_dbnet_config cfg = make_config(18, 0.25f, 0.0f);
        OCR_CHECK_OK(&ctx, ocr_dbnet_init(&ctx, &other, &cfg));
        OCR_CHECK_OK(&ctx, ocr_dbnet_load_backbone(&ctx, &other, tv));
        for (i = 0; i < other.params.count; i++) {
            const ocr_param_info *pi = &other.params.info[i];
            int j = ocr_params_find(&m[0].params, pi->name);
            size_t bytes = (size_t)ocr_shape_numel(pi->shape) * sizeof(float);
            /* m[0] ran one training forward since it was saved: compare its saved running stats via the file */
            if (strncmp(pi->name, "backbone.", 9) != 0 || !pi->trainable) continue;
            OCR_CHECK_MSG(j >= 0 && memcmp(other.params.data + pi->offset, m[0].params.data + m[0].params.info[j].offset, bytes) == 0,
                          "backbone parameter %s differs after ocr_dbnet_load_backbone", pi->name);
        }
        ocr_dbnet_free(&other);
    }
    for (i = 0; i < NC; i++) {
        ocr_dbnet_free(&m[i]);
        for (k = 0; k < 3; k++) unlink(path[k][i]);
    }
    unlink(tv);
    rmdir(dir);
    ocr_ctx_free(&ctx);
}

static void test_dbnet_fixture_from_pytorch(void) {
    ocr_ctx ctx;
    ocr_dbnet m;
    ocr_dbnet_config cfg;
    OCR_CHECK_OK(&ctx, ocr_ctx_init(&ctx, 2, 5));
    OCR_CHECK_OK(&ctx, ocr_dbnet_read_config(&ctx, FIXTURES "tiny_weights.safetensors", &cfg));
    OCR_CHECK(cfg.depth == 34 && cfg.width == 0.03125f && cfg.k == 50.0f && cfg.prior_prob == 0.03f && cfg.bn_eps == 1e-5f);
    OCR_CHECK_OK(&ctx, ocr_dbnet_init(&ctx, &m, &cfg));
    OCR_CHECK_OK(&ctx, ocr_dbnet_load(&ctx, &m, FIXTURES "tiny_weights.safetensors"));
    OCR_CHECK(m.num_batches_tracked == 0);
    worst_seen = 0.0;
    run_and_compare(&ctx, &m, FIXTURES "tiny_io.safetensors", FIXTURES "tiny_expected.safetensors");
    printf("     fixture resnet34 width 1/32: worst relative error %.2e (%s)\n", worst_seen, worst_name);
    ocr_dbnet_free(&m);
    ocr_ctx_free(&ctx);
}

static void expect_param(const ocr_dbnet *m, const char *name, ocr_shape shape, int trainable) {
    int i = ocr_params_find(&m->params, name);
    char a[96], b[96];
    OCR_CHECK_MSG(i >= 0, "no parameter %s", name);
    if (i < 0) return;
    OCR_CHECK_MSG(ocr_shape_equal(m->params.info[i].shape, shape) && m->params.info[i].trainable == trainable,
                  "%s: shape %s trainable %d, expected %s trainable %d", name, ocr_shape_str(m->params.info[i].shape, a, sizeof a),
                  m->params.info[i].trainable, ocr_shape_str(shape, b, sizeof b), trainable);
}

static void test_dbnet_names_and_counts(void) {
    ocr_ctx ctx;
    ocr_dbnet m;
    ocr_dbnet_config cfg = make_config(18, 1.0f, 0.0f);
    OCR_CHECK_OK(&ctx, ocr_ctx_init(&ctx, 1, 1));
    OCR_CHECK_OK(&ctx, ocr_dbnet_init(&ctx, &m, &cfg));
    /* torchvision resnet18 without fc: 11,176,512; SegDetector FPN 835,584; each head 164,417 (DBNET_REFERENCE 1.7) */
    OCR_CHECK_MSG(ocr_params_trainable_count(&m.params) == 11176512u + 835584u + 2u * 164417u, "resnet18 DBNet has %zu parameters",
                  ocr_params_trainable_count(&m.params));
    expect_param(&m, "backbone.conv1.weight", ocr_shape4(64, 3, 7, 7), 1);
    expect_param(&m, "backbone.bn1.running_mean", ocr_shape1(64), 0);
    expect_param(&m, "backbone.bn1.running_var", ocr_shape1(64), 0);
    expect_param(&m, "backbone.layer1.0.conv1.weight", ocr_shape4(64, 64, 3, 3), 1);
    expect_param(&m, "backbone.layer1.1.bn2.bias", ocr_shape1(64), 1);
    expect_param(&m, "backbone.layer2.0.downsample.0.weight", ocr_shape4(128, 64, 1, 1), 1);
    expect_param(&m, "backbone.layer2.0.downsample.1.running_var", ocr_shape1(128), 0);
    expect_param(&m, "backbone.layer4.1.conv2.weight", ocr_shape4(512, 512, 3, 3), 1);
    expect_param(&m, "decoder.in5.weight", ocr_shape4(256, 512, 1, 1), 1);
    expect_param(&m, "decoder.in2.weight", ocr_shape4(256, 64, 1, 1), 1);
    expect_param(&m, "decoder.out5.0.weight", ocr_shape4(64, 256, 3, 3), 1);
    expect_param(&m, "decoder.out2.weight", ocr_shape4(64, 256, 3, 3), 1);
    expect_param(&m, "decoder.binarize.0.weight", ocr_shape4(64, 256, 3, 3), 1);
    expect_param(&m, "decoder.binarize.1.running_mean", ocr_shape1(64), 0);
    expect_param(&m, "decoder.binarize.3.weight", ocr_shape4(64, 64, 2, 2), 1);
    expect_param(&m, "decoder.binarize.3.bias", ocr_shape1(64), 1);
    expect_param(&m, "decoder.binarize.4.weight", ocr_shape1(64), 1);
    expect_param(&m, "decoder.binarize.6.weight", ocr_shape4(64, 1, 2, 2), 1);
    expect_param(&m, "decoder.binarize.6.bias", ocr_shape1(1), 1);
    expect_param(&m, "decoder.thresh.6.weight", ocr_shape4(64, 1, 2, 2), 1);
    OCR_CHECK(ocr_params_find(&m.params, "backbone.layer1.0.downsample.0.weight") < 0);
    OCR_CHECK(ocr_params_find(&m.params, "decoder.in5.bias") < 0);
    ocr_dbnet_free(&m);
    /* resnet34 blocks {3,4,6,3} (the fixture checks the whole layout against PyTorch) */
    cfg = make_config(34, 0.125f, 0.0f);
    OCR_CHECK_OK(&ctx, ocr_dbnet_init(&ctx, &m, &cfg));
    expect_param(&m, "backbone.layer3.5.conv2.weight", ocr_shape4(32, 32, 3, 3), 1);
    expect_param(&m, "backbone.layer4.2.bn2.running_var", ocr_shape1(64), 0);
    OCR_CHECK(ocr_params_find(&m.params, "backbone.layer3.6.conv1.weight") < 0 && ocr_params_find(&m.params, "backbone.layer1.3.bn1.weight") < 0);
    ocr_dbnet_free(&m);
    /* width 0.25: 64 -> 16, 512 -> 128, inner 256 -> 64, branches 16; width 0.1: 6.4 -> 8, 51.2 -> 48 */
    cfg = make_config(18, 0.25f, 0.0f);
    OCR_CHECK_OK(&ctx, ocr_dbnet_init(&ctx, &m, &cfg));
    expect_param(&m, "backbone.conv1.weight", ocr_shape4(16, 3, 7, 7), 1);
    expect_param(&m, "decoder.in5.weight", ocr_shape4(64, 128, 1, 1), 1);
    expect_param(&m, "decoder.out4.0.weight", ocr_shape4(16, 64, 3, 3), 1);
    expect_param(&m, "decoder.thresh.0.weight", ocr_shape4(16, 64, 3, 3), 1);
    expect_param(&m, "decoder.thresh.6.weight", ocr_shape4(16, 1, 2, 2), 1);
    ocr_dbnet_free(&m);
    cfg = make_config(18, 0.1f, 0.0f);
    OCR_CHECK_OK(&ctx, ocr_dbnet_init(&ctx, &m, &cfg));
    expect_param(&m, "backbone.conv1.weight", ocr_shape4(8, 3, 7, 7), 1);
    expect_param(&m, "backbone.layer4.0.conv1.weight", ocr_shape4(48, 24, 3, 3), 1);
    ocr_dbnet_free(&m);
    ocr_ctx_free(&ctx);
}

static void moments(const ocr_dbnet *m, const char *name, double *mean, double *sd, float *lo, float *hi) {
    int i = ocr_params_find(&m->params, name);
    int64_t k, n;
    const float *p;
    double s = 0, ss = 0;
    *mean = *sd = 0; *lo = *hi = 0;
    if (i < 0) { OCR_CHECK_MSG(0, "no parameter %s", name); return; }
    n = ocr_shape_numel(m->params.info[i].shape);
    p = m->params.data + m->params.info[i].offset;
    *lo = *hi = p[0];
    for (k = 0; k < n; k++) { s += p[k]; ss += (double)p[k] * p[k]; if (p[k] < *lo) *lo = p[k]; if (p[k] > *hi) *hi = p[k]; }
    *mean = s / (double)n;
    *sd = sqrt(ss / (double)n - *mean * *mean);
}

static void test_dbnet_official_init(void) {
    static const struct { const char *name; double sd; } normals[] = {
        {"backbone.conv1.weight", 0.0252538136},          /* sqrt(2 / (64*49)): torchvision fan_out */
        {"backbone.layer4.1.conv2.weight", 0.0208333333}, /* sqrt(2 / (512*9)) */
        {"backbone.layer3.0.downsample.0.weight", 0.0883883476}, /* sqrt(2 / 256) */
        {"decoder.in5.weight", 0.0625},                  /* sqrt(2 / 512): fan_in */
        {"decoder.out3.0.weight", 0.0294627825},          /* sqrt(2 / (256*9)) */
        {"decoder.binarize.3.weight", 0.0883883476},      /* transposed: PyTorch's fan_in = Cout*4 = 256 */
        {"decoder.thresh.3.weight", 0.0883883476}};
    ocr_ctx ctx;
    ocr_dbnet m, m2;
    ocr_dbnet_config cfg = make_config(18, 1.0f, 0.03f);
    double mean, sd;
    float lo, hi;
    int i;
    OCR_CHECK_OK(&ctx, ocr_ctx_init(&ctx, 1, 3));
    OCR_CHECK_OK(&ctx, ocr_dbnet_init(&ctx, &m, &cfg));
    for (i = 0; i < (int)(sizeof normals / sizeof normals[0]); i++) {
        moments(&m, normals[i].name, &mean, &sd, &lo, &hi);
        OCR_CHECK_MSG(fabs(sd / normals[i].sd - 1.0) < 0.05 && fabs(mean) < 0.1 * normals[i].sd, "%s: mean %g sd %g, expected sd %g",
                      normals[i].name, mean, sd, normals[i].sd);
    }
    moments(&m, "decoder.binarize.6.weight", &mean, &sd, &lo, &hi); /* 64 values of sd sqrt(2/4) */
    OCR_CHECK_MSG(sd > 0.5 && sd < 0.95, "binarize.6.weight sd %g", sd);
    moments(&m, "decoder.binarize.3.bias", &mean, &sd, &lo, &hi);    /* U(-1/16, 1/16) */
    OCR_CHECK(lo >= -0.0625f && hi <= 0.0625f && hi - lo > 0.08f);
    moments(&m, "decoder.thresh.6.bias", &mean, &sd, &lo, &hi);      /* U(-1/2, 1/2) */
    OCR_CHECK(lo >= -0.5f && hi <= 0.5f);
    moments(&m, "decoder.binarize.6.bias", &mean, &sd, &lo, &hi);    /* prior: logit(0.03) */
    OCR_CHECK_MSG(fabs(lo - log(0.03 / 0.97)) < 1e-5, "prior bias %g", lo);
    moments(&m, "decoder.binarize.1.bias", &mean, &sd, &lo, &hi);
    OCR_CHECK(lo == 1e-4f && hi == 1e-4f);
    moments(&m, "decoder.thresh.4.weight", &mean, &sd, &lo, &hi);
    OCR_CHECK(lo == 1.0f && hi == 1.0f);
    moments(&m, "backbone.layer2.1.bn2.bias", &mean, &sd, &lo, &hi);
    OCR_CHECK(lo == 0.0f && hi == 0.0f);
    moments(&m, "backbone.layer2.1.bn2.running_var", &mean, &sd, &lo, &hi);
    OCR_CHECK(lo == 1.0f && hi == 1.0f);
    moments(&m, "backbone.layer2.1.bn2.running_mean", &mean, &sd, &lo, &hi);
    OCR_CHECK(lo == 0.0f && hi == 0.0f);
    ocr_dbnet_free(&m);
    /* the same seed gives the same model */
    cfg = make_config(18, 0.25f, 0.03f);
    ocr_rng_seed(&ctx.rng, 3);
    OCR_CHECK_OK(&ctx, ocr_dbnet_init(&ctx, &m, &cfg));
    ocr_rng_seed(&ctx.rng, 3);
    OCR_CHECK_OK(&ctx, ocr_dbnet_init(&ctx, &m2, &cfg));
    OCR_CHECK(m.params.numel == m2.params.numel && memcmp(m.params.data, m2.params.data, m.params.numel * sizeof(float)) == 0);
    ocr_dbnet_free(&m2);
    ocr_dbnet_free(&m);
    ocr_ctx_free(&ctx);
}

static void test_dbnet_checkpoint_roundtrip(void) {
    const char *keys[1] = {"epoch"}, *vals[1] = {"7"}, *bad_keys[1] = {"ocr_dbnet.width"};
    char dir[] = "/tmp/ocr_dbnet_ckpt_XXXXXX", path[256], path2[256], missing[256];
    ocr_ctx ctx;
    ocr_dbnet a, b, c;
    ocr_dbnet_config cfg = make_config(18, 0.25f, 0.03f), cfg2, read;
    ocr_tensor x, prob, thresh;
    ocr_safetensors st;
    float *before;
    OCR_CHECK_OK(&ctx, ocr_ctx_init(&ctx, 2, 21));
    if (!mkdtemp(dir)) { OCR_CHECK_MSG(0, "mkdtemp failed"); ocr_ctx_free(&ctx); return; }
    snprintf(path, sizeof path, "%s/a.safetensors", dir);
    snprintf(path2, sizeof path2, "%s/b.safetensors", dir);
    snprintf(missing, sizeof missing, "%s/missing.safetensors", dir);
    OCR_CHECK_OK(&ctx, ocr_dbnet_init(&ctx, &a, &cfg));
    /* two training forwards change the running statistics and the batch count */
    OCR_CHECK_OK(&ctx, ocr_tensor_alloc(&ctx, &x, "x", OCR_F32, OCR_DEVICE_CPU, ocr_shape4(2, 3, 32, 64)));
    OCR_CHECK_OK(&ctx, ocr_tensor_fill_normal(&ctx, &x, 0.0f, 1.0f));
    OCR_CHECK_OK(&ctx, ocr_dbnet_forward(&ctx, &a, &x, 1, &prob, &thresh));
    OCR_CHECK_OK(&ctx, ocr_dbnet_forward(&ctx, &a, &x, 1, &prob, &thresh));
    OCR_CHECK(a.num_batches_tracked == 2);
    OCR_CHECK_ERR(&ctx, ocr_dbnet_save(&ctx, &a, path, bad_keys, vals, 1), OCR_EINVAL, "reserved");
    OCR_CHECK_OK(&ctx, ocr_dbnet_save(&ctx, &a, path, keys, vals, 1));
    OCR_CHECK_OK(&ctx, ocr_safetensors_open(&ctx, &st, path));
    OCR_CHECK(ocr_safetensors_meta(&st, "epoch") && strcmp(ocr_safetensors_meta(&st, "epoch"), "7") == 0);
    OCR_CHECK(ocr_safetensors_meta(&st, "format") && strcmp(ocr_safetensors_meta(&st, "format"), "pt") == 0);
    OCR_CHECK(ocr_safetensors_find(&st, "decoder.thresh.4.num_batches_tracked") >= 0);
    ocr_safetensors_close(&st);
    OCR_CHECK_OK(&ctx, ocr_dbnet_read_config(&ctx, path, &read));
    OCR_CHECK(read.depth == 18 && read.width == 0.25f && read.prior_prob == 0.03f && read.k == 50.0f && read.bn_momentum == 0.1f);
    OCR_CHECK_OK(&ctx, ocr_dbnet_init(&ctx, &b, &read));
    OCR_CHECK_OK(&ctx, ocr_dbnet_load(&ctx, &b, path));
    OCR_CHECK(b.num_batches_tracked == 2);
    OCR_CHECK(a.params.numel == b.params.numel && memcmp(a.params.data, b.params.data, a.params.numel * sizeof(float)) == 0);
    /* the same in one call; a missing file is refused and leaves a zeroed model that frees as a no-op */
    OCR_CHECK_OK(&ctx, ocr_dbnet_init_from_file(&ctx, &c, path));
    OCR_CHECK(c.cfg.depth == 18 && c.cfg.width == 0.25f && c.cfg.prior_prob == 0.03f && c.num_batches_tracked == 2);
    OCR_CHECK(c.params.numel == a.params.numel && memcmp(a.params.data, c.params.data, a.params.numel * sizeof(float)) == 0);
    ocr_dbnet_free(&c);
    OCR_CHECK_ERR(&ctx, ocr_dbnet_init_from_file(&ctx, &c, missing), OCR_EIO, "missing.safetensors");
    OCR_CHECK(!c.params.allocated && ocr_dbnet_op_count(&c) == 0);
    ocr_dbnet_free(&c);
    /* another width or depth is refused with the key that differs, and the model keeps its weights */
    cfg2 = make_config(18, 0.5f, 0.03f);
    OCR_CHECK_OK(&ctx, ocr_dbnet_init(&ctx, &c, &cfg2));
    OCR_CHECK_ERR(&ctx, ocr_dbnet_load(&ctx, &c, path), OCR_EINVAL, "ocr_dbnet.width=0.25 but this model has 0.5");
    ocr_dbnet_free(&c);
    cfg2 = make_config(34, 0.25f, 0.0f);
    OCR_CHECK_OK(&ctx, ocr_dbnet_init(&ctx, &c, &cfg2));
    OCR_CHECK_ERR(&ctx, ocr_dbnet_load(&ctx, &c, path), OCR_EINVAL, "ocr_dbnet.backbone=resnet18 but this model has resnet34");
    ocr_dbnet_free(&c);
    /* a checkpoint missing one tensor is refused, and b is left exactly as it was */
    {
        ocr_tensor views[512];
        const ocr_tensor *ptrs[512];
        const char *mk[6] = {"ocr_dbnet.backbone", "ocr_dbnet.width", "ocr_dbnet.k", "ocr_dbnet.prior_prob", "ocr_dbnet.bn_momentum",
                             "ocr_dbnet.bn_eps"};
        const char *mv[6] = {"resnet18", "0.25", "50", "0", "0.100000001", "9.99999975e-06"};
        int i, n = 0;
        for (i = 0; i < a.params.count && n < 512; i++) {
            if (strcmp(a.params.info[i].name, "decoder.out3.0.weight") == 0) continue;
            views[n] = ocr_params_value(&a.params, i);
            ptrs[n] = &views[n];
            n++;
        }
        OCR_CHECK_OK(&ctx, ocr_safetensors_save(&ctx, path2, ptrs, n, mk, mv, 6));
        before = (float *)malloc(b.params.numel * sizeof(float));
        memcpy(before, b.params.data, b.params.numel * sizeof(float));
        OCR_CHECK_ERR(&ctx, ocr_dbnet_load(&ctx, &b, path2), OCR_ENOTFOUND, "decoder.out3.0.weight");
        OCR_CHECK(memcmp(before, b.params.data, b.params.numel * sizeof(float)) == 0 && b.num_batches_tracked == 2);
        free(before);
        OCR_CHECK_ERR(&ctx, ocr_dbnet_init_from_file(&ctx, &c, path2), OCR_ENOTFOUND, "decoder.out3.0.weight");
        OCR_CHECK(!c.params.allocated && ocr_dbnet_op_count(&c) == 0);
        /* a file without the config metadata */
        OCR_CHECK_OK(&ctx, ocr_safetensors_save(&ctx, path2, ptrs, n, NULL, NULL, 0));
        OCR_CHECK_ERR(&ctx, ocr_dbnet_load(&ctx, &b, path2), OCR_EFORMAT, "no ocr_dbnet.backbone");
        OCR_CHECK_ERR(&ctx, ocr_dbnet_read_config(&ctx, path2, &read), OCR_EFORMAT, "not an ocr_dbnet_save checkpoint");
        OCR_CHECK_ERR(&ctx, ocr_dbnet_init_from_file(&ctx, &c, path2), OCR_EFORMAT, "no ocr_dbnet.backbone");
    }
    /* the loaded model computes what the saved one computes */
    {
        ocr_tensor pa, pb;
        OCR_CHECK_OK(&ctx, ocr_dbnet_forward(&ctx, &a, &x, 0, &pa, NULL));
        OCR_CHECK_OK(&ctx, ocr_dbnet_forward(&ctx, &b, &x, 0, &pb, NULL));
        OCR_CHECK(memcmp(pa.data, pb.data, ocr_tensor_bytes(&pa)) == 0);
    }
    ocr_tensor_free(&x);
    ocr_dbnet_free(&a);
    ocr_dbnet_free(&b);
    unlink(path);
    unlink(path2);
    rmdir(dir);
    ocr_ctx_free(&ctx);
}

/* A checkpoint holding NaN, Inf or a value beyond OCR_LOAD_MAX_ABS (3e38 is finite but overflows the first convolution)
   is refused at load naming the file, the tensor, the index and the value; the model keeps its weights. The writer
   refuses the same values. */
static void test_dbnet_load_refuses_bad_values(void) {
    char dir[] = "/tmp/ocr_dbnet_vals_XXXXXX", good[256], bad[256];
    const char *target = "decoder.binarize.0.weight";
    ocr_ctx ctx;
    ocr_dbnet a, b, c;
    ocr_dbnet_config cfg = make_config(18, 0.125f, 0.03f);
    ocr_safetensors st;
    ocr_tensor views[512], half;
    const ocr_tensor *ptrs[512];
    const char *mk[16], *mv[16];
    float *before, saved;
    int i, n = 0, n_meta = 0, ti, k;
    struct { float value; int code; const char *text; } cases[5];
    cases[0].value = NAN; cases[0].code = OCR_ENONFINITE; cases[0].text = "nan at index 5 [0,0,1,2]";
    cases[1].value = 3e38f; cases[1].code = OCR_ERANGE; cases[1].text = "3e+38 at index 5 [0,0,1,2]";
    cases[2].value = -3e38f; cases[2].code = OCR_ERANGE; cases[2].text = "-3e+38 at index 5";
    cases[3].value = -INFINITY; cases[3].code = OCR_ENONFINITE; cases[3].text = "-inf at index 5";
    cases[4].value = 2e15f; cases[4].code = OCR_ERANGE; cases[4].text = "at most 1e+15 in magnitude";
    OCR_CHECK_OK(&ctx, ocr_ctx_init(&ctx, 2, 23));
    if (!mkdtemp(dir)) { OCR_CHECK_MSG(0, "mkdtemp failed"); ocr_ctx_free(&ctx); return; }
    snprintf(good, sizeof good, "%s/good.safetensors", dir);
    snprintf(bad, sizeof bad, "%s/bad.safetensors", dir);
    OCR_CHECK_OK(&ctx, ocr_dbnet_init(&ctx, &a, &cfg));
    OCR_CHECK_OK(&ctx, ocr_dbnet_init(&ctx, &b, &cfg));
    OCR_CHECK_OK(&ctx, ocr_dbnet_save(&ctx, &a, good, NULL, NULL, 0));
    /* the config metadata as ocr_dbnet_save writes it, for hand-made files */
    OCR_CHECK_OK(&ctx, ocr_safetensors_open(&ctx, &st, good));
    for (i = 0; i < st.n_meta && n_meta < 16; i++, n_meta++) { mk[n_meta] = st.meta_keys[i]; mv[n_meta] = st.meta_values[i]; }
    ti = ocr_params_find(&a.params, target);
    OCR_CHECK(ti >= 0 && ocr_shape_numel(a.params.info[ti].shape) > 5);
    for (i = 0; i < a.params.count && n < 512; i++, n++) { views[n] = ocr_params_value(&a.params, i); ptrs[n] = &views[n]; }
    before = (float *)malloc(b.params.numel * sizeof(float));
    memcpy(before, b.params.data, b.params.numel * sizeof(float));
    saved = ((float *)views[ti].data)[5];
    for (k = 0; k < 5 && ti >= 0; k++) {
        ((float *)views[ti].data)[5] = cases[k].value;
        OCR_CHECK_OK(&ctx, ocr_safetensors_save(&ctx, bad, ptrs, n, mk, mv, n_meta));
        OCR_CHECK_ERR(&ctx, ocr_dbnet_load(&ctx, &b, bad), cases[k].code, cases[k].text);
        OCR_CHECK(strstr(ocr_ctx_last_error(&ctx), "bad.safetensors") && strstr(ocr_ctx_last_error(&ctx), target));
        OCR_CHECK(memcmp(before, b.params.data, b.params.numel * sizeof(float)) == 0);
        OCR_CHECK_ERR(&ctx, ocr_dbnet_init_from_file(&ctx, &c, bad), cases[k].code, target);
        OCR_CHECK(!c.params.allocated);
        /* the writer refuses what the reader refuses */
        OCR_CHECK_ERR(&ctx, ocr_dbnet_save(&ctx, &a, bad, NULL, NULL, 0), cases[k].code, target);
    }
    /* just inside the bound loads, and the value arrives unchanged */
    ((float *)views[ti].data)[5] = -1e15f;
    OCR_CHECK_OK(&ctx, ocr_safetensors_save(&ctx, bad, ptrs, n, mk, mv, n_meta));
    OCR_CHECK_OK(&ctx, ocr_dbnet_load(&ctx, &b, bad));
    OCR_CHECK(ti >= 0 && ((float *)ocr_params_value(&b.params, ti).data)[5] == -1e15f);
    if (ti >= 0) ((float *)views[ti].data)[5] = saved;
    /* an F16 tensor holding Inf (1e5 saturates) goes through the conversion path and is refused the same way */
    OCR_CHECK_OK(&ctx, ocr_tensor_alloc(&ctx, &half, target, OCR_F16, OCR_DEVICE_CPU, views[ti].shape));
    for (i = 0; i < ocr_tensor_numel(&half); i++) ocr_tensor_set(&half, i, ((float *)views[ti].data)[i]);
    ocr_tensor_set(&half, 7, 1e5);
    ptrs[ti] = &half;
    OCR_CHECK_OK(&ctx, ocr_safetensors_save(&ctx, bad, ptrs, n, mk, mv, n_meta));
    OCR_CHECK_ERR(&ctx, ocr_dbnet_load(&ctx, &b, bad), OCR_ENONFINITE, "(F16 ");
    OCR_CHECK(strstr(ocr_ctx_last_error(&ctx), "inf at index 7"));
    ocr_tensor_set(&half, 7, 0.5);
    OCR_CHECK_OK(&ctx, ocr_safetensors_save(&ctx, bad, ptrs, n, mk, mv, n_meta));
    OCR_CHECK_OK(&ctx, ocr_dbnet_load(&ctx, &b, bad));
    ocr_tensor_free(&half);
    /* a 1.5 GB sparse file of garbage given as a model: refused from its first 8 bytes, naming the path */
    {
        int fd = open(bad, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        ocr_dbnet_config rc_cfg;
        OCR_CHECK(fd >= 0 && ftruncate(fd, (off_t)1536 * 1024 * 1024) == 0 && pwrite(fd, "GARBAGE!", 8, 0) == 8);
        if (fd >= 0) close(fd);
        OCR_CHECK_ERR(&ctx, ocr_dbnet_read_config(&ctx, bad, &rc_cfg), OCR_EFORMAT, "bad.safetensors");
        OCR_CHECK_ERR(&ctx, ocr_dbnet_init_from_file(&ctx, &c, bad), OCR_EFORMAT, "bad.safetensors");
        OCR_CHECK_ERR(&ctx, ocr_dbnet_load(&ctx, &b, bad), OCR_EFORMAT, "header length");
    }
    free(before);
    ocr_safetensors_close(&st);
    ocr_dbnet_free(&a);
    ocr_dbnet_free(&b);
    unlink(good);
    unlink(bad);
    rmdir(dir);
    ocr_ctx_free(&ctx);
}

static void test_dbnet_bad_input(void) {
    ocr_ctx ctx;
    ocr_dbnet m;
    ocr_dbnet_config cfg = make_config(18, 0.125f, 0.0f);
    ocr_tensor x, prob, thresh, d;
    float buf[2 * 4 * 64 * 64];
    OCR_CHECK_OK(&ctx, ocr_ctx_init(&ctx, 1, 4));
    cfg.depth = 50;
    OCR_CHECK_ERR(&ctx, ocr_dbnet_init(&ctx, &m, &cfg), OCR_EINVAL, "depth 50");
    cfg.depth = 18; cfg.width = 0.0f;
    OCR_CHECK_ERR(&ctx, ocr_dbnet_init(&ctx, &m, &cfg), OCR_EINVAL, "width 0");
    cfg.width = 0.125f; cfg.prior_prob = 1.0f;
    OCR_CHECK_ERR(&ctx, ocr_dbnet_init(&ctx, &m, &cfg), OCR_EINVAL, "prior_prob 1");
    cfg.prior_prob = 0.0f;
    OCR_CHECK_OK(&ctx, ocr_dbnet_init(&ctx, &m, &cfg));
    memset(buf, 0, sizeof buf);
    x = ocr_tensor_f32("x", ocr_shape4(1, 3, 65, 64), buf);
    OCR_CHECK_ERR(&ctx, ocr_dbnet_forward(&ctx, &m, &x, 1, &prob, &thresh), OCR_ESHAPE, "multiples of 32 (got H=65, W=64)");
    x = ocr_tensor_f32("x", ocr_shape4(1, 3, 64, 48), buf);
    OCR_CHECK_ERR(&ctx, ocr_dbnet_forward(&ctx, &m, &x, 1, &prob, &thresh), OCR_ESHAPE, "W=48");
    x = ocr_tensor_f32("x", ocr_shape4(1, 4, 64, 64), buf);
    OCR_CHECK_ERR(&ctx, ocr_dbnet_forward(&ctx, &m, &x, 1, &prob, &thresh), OCR_ESHAPE, "'x' (F32 [1,4,64,64], cpu) must be [N, 3, H, W]");
    x = ocr_tensor_f32("x", ocr_shape3(3, 64, 64), buf);
    OCR_CHECK_ERR(&ctx, ocr_dbnet_forward(&ctx, &m, &x, 1, &prob, &thresh), OCR_ESHAPE, "must be [N, 3, H, W]");
    x = ocr_tensor_f32("x", ocr_shape4(0, 3, 64, 64), buf);
    OCR_CHECK_ERR(&ctx, ocr_dbnet_forward(&ctx, &m, &x, 1, &prob, &thresh), OCR_ESHAPE, "empty batch");
    x = ocr_tensor_view("x", OCR_U8, OCR_DEVICE_CPU, ocr_shape4(1, 3, 64, 64), buf);
    OCR_CHECK_ERR(&ctx, ocr_dbnet_forward(&ctx, &m, &x, 1, &prob, &thresh), OCR_EDTYPE, "must be F32");
    x = ocr_tensor_f32("x", ocr_shape4(1, 3, 64, 64), buf);
    buf[5000] = NAN;
    OCR_CHECK_ERR(&ctx, ocr_dbnet_forward(&ctx, &m, &x, 1, &prob, &thresh), OCR_ENONFINITE, "at index 5000 [0,1,14,8]");
    buf[5000] = 0.0f;
    /* backward needs a successful training forward */
    d = ocr_tensor_f32("d", ocr_shape4(1, 1, 64, 64), buf);
    OCR_CHECK_ERR(&ctx, ocr_dbnet_backward(&ctx, &m, &d, &d), OCR_ESTATE, "no forward");
    /* one value per channel at 1/32 scale: BN cannot train on it, and says where */
    x = ocr_tensor_f32("x", ocr_shape4(1, 3, 32, 32), buf);
    OCR_CHECK_ERR(&ctx, ocr_dbnet_forward(&ctx, &m, &x, 1, &prob, &thresh), OCR_ESHAPE, "layer 'backbone.layer4.0.bn1'");
    x = ocr_tensor_f32("x", ocr_shape4(1, 3, 64, 64), buf);
    OCR_CHECK_OK(&ctx, ocr_dbnet_forward(&ctx, &m, &x, 0, &prob, &thresh));
    OCR_CHECK_ERR(&ctx, ocr_dbnet_backward(&ctx, &m, &d, &d), OCR_ESTATE, "eval mode");
    OCR_CHECK_OK(&ctx, ocr_dbnet_forward(&ctx, &m, &x, 1, &prob, &thresh));
    d = ocr_tensor_f32("d_prob", ocr_shape4(1, 1, 64, 32), buf);
    OCR_CHECK_ERR(&ctx, ocr_dbnet_backward(&ctx, &m, &d, NULL), OCR_ESHAPE, "'d_prob' (F32 [1,1,64,32], cpu)");
    d = ocr_tensor_f32("d_prob", ocr_shape4(1, 1, 64, 64), buf);
    buf[7] = INFINITY;
    OCR_CHECK_ERR(&ctx, ocr_dbnet_backward(&ctx, &m, &d, NULL), OCR_ENONFINITE, "'d_prob'");
    buf[7] = 0.0f;
    OCR_CHECK_OK(&ctx, ocr_dbnet_backward(&ctx, &m, &d, NULL));
    ocr_dbnet_free(&m);
    ocr_ctx_free(&ctx);
}

/* Buffers grow for a larger input and are reused for smaller ones; results never depend on what ran before. */
static void test_dbnet_buffers_and_batches(void) {
    ocr_ctx ctx;
    ocr_dbnet a, b;
    ocr_dbnet_config cfg = make_config(18, 0.125f, 0.03f);
    ocr_tensor big, small, pa, pb, ta;
    ocr_dbnet_memory_info mem, after;
    int64_t i;
    OCR_CHECK_OK(&ctx, ocr_ctx_init(&ctx, 2, 8));
    OCR_CHECK_OK(&ctx, ocr_dbnet_init(&ctx, &a, &cfg));
    ocr_rng_seed(&ctx.rng, 8);
    OCR_CHECK_OK(&ctx, ocr_dbnet_init(&ctx, &b, &cfg));
    OCR_CHECK_OK(&ctx, ocr_tensor_alloc(&ctx, &big, "big", OCR_F32, OCR_DEVICE_CPU, ocr_shape4(3, 3, 64, 64)));
    OCR_CHECK_OK(&ctx, ocr_tensor_alloc(&ctx, &small, "small", OCR_F32, OCR_DEVICE_CPU, ocr_shape4(1, 3, 32, 64)));
    OCR_CHECK_OK(&ctx, ocr_tensor_fill_normal(&ctx, &big, 0.0f, 1.0f));
    OCR_CHECK_OK(&ctx, ocr_tensor_fill_normal(&ctx, &small, 0.0f, 1.0f));
    OCR_CHECK_OK(&ctx, ocr_dbnet_forward(&ctx, &a, &big, 1, &pa, &ta));
    OCR_CHECK(ocr_shape_equal(pa.shape, ocr_shape4(3, 1, 64, 64)));
    OCR_CHECK(ocr_shape_equal(ta.shape, pa.shape) && strcmp(pa.name, "prob_logits") == 0 && strcmp(ta.name, "thresh") == 0);
    for (i = 0; i < ocr_tensor_numel(&ta); i++) OCR_CHECK(((float *)ta.data)[i] >= 0.0f && ((float *)ta.data)[i] <= 1.0f);
    OCR_CHECK_OK(&ctx, ocr_dbnet_backward(&ctx, &a, &pa, &ta));
    mem = ocr_dbnet_memory(&a);
    OCR_CHECK(mem.arena_allocations >= 2 && mem.values_need_bytes <= mem.values_bytes && mem.grads_need_bytes <= mem.grads_bytes);
    /* eval on the small input: no allocation, same result as a model that never saw the big one */
    memcpy(b.params.data, a.params.data, a.params.numel * sizeof(float)); /* same weights and running stats */
    OCR_CHECK_OK(&ctx, ocr_dbnet_forward(&ctx, &a, &small, 0, &pa, NULL));
    OCR_CHECK_OK(&ctx, ocr_dbnet_forward(&ctx, &b, &small, 0, &pb, NULL));
    after = ocr_dbnet_memory(&a);
    OCR_CHECK(after.arena_allocations == mem.arena_allocations && after.values_bytes == mem.values_bytes);
    OCR_CHECK(strcmp(pa.name, "prob") == 0 && ocr_shape_equal(pa.shape, ocr_shape4(1, 1, 32, 64)));
    OCR_CHECK(memcmp(pa.data, pb.data, ocr_tensor_bytes(&pa)) == 0);
    /* each image of a batch in eval mode equals that image alone */
    OCR_CHECK_OK(&ctx, ocr_dbnet_forward(&ctx, &a, &big, 0, &pa, NULL));
    {
        ocr_tensor one;
        float *keep = (float *)malloc(ocr_tensor_bytes(&pa));
        memcpy(keep, pa.data, ocr_tensor_bytes(&pa));
        OCR_CHECK_OK(&ctx, ocr_tensor_slice(&ctx, &big, 2, 1, &one));
        OCR_CHECK_OK(&ctx, ocr_dbnet_forward(&ctx, &b, &one, 0, &pb, NULL));
        ocr_test_close("image 2 of the batch vs alone", keep + 2 * 64 * 64, (const float *)pb.data, 64 * 64, 1e-5, 1e-6);
        free(keep);
    }
    after = ocr_dbnet_memory(&a);
    OCR_CHECK(after.arena_allocations == mem.arena_allocations && after.values_bytes == mem.values_bytes);
    ocr_tensor_free(&big);
    ocr_tensor_free(&small);
    ocr_dbnet_free(&a);
    ocr_dbnet_free(&b);
    ocr_ctx_free(&ctx);
}

/* A clock that advances one second per reading: each timed op gets exactly 1 per run. */
static double fake_seconds;
static double fake_clock(void) { return fake_seconds += 1.0; }

/* The options refuse unknown flags; the op list names every layer in forward order with its output shape, and the
   profiler times each op that runs, forward and backward. */
static void test_dbnet_options_and_profile(void) {
    ocr_ctx ctx;
    ocr_dbnet m;
    ocr_dbnet_config cfg = make_config(18, 0.125f, 0.03f);
    ocr_tensor x, prob, thresh;
    ocr_dbnet_op_info op;
    int i, n, convs = 0, seen_prob = 0;
    OCR_CHECK_OK(&ctx, ocr_ctx_init(&ctx, 1, 5));
    OCR_CHECK_OK(&ctx, ocr_dbnet_init(&ctx, &m, &cfg));
    OCR_CHECK_ERR(&ctx, ocr_dbnet_set_options(&ctx, &m, 16), OCR_EINVAL, "unknown flags 0x10");
    OCR_CHECK_OK(&ctx, ocr_tensor_alloc(&ctx, &x, "x", OCR_F32, OCR_DEVICE_CPU, ocr_shape4(1, 3, 64, 96)));
    OCR_CHECK_OK(&ctx, ocr_tensor_fill_normal(&ctx, &x, 0.0f, 1.0f));
    OCR_CHECK(ocr_dbnet_memory(&m).values_bytes == 0 && ocr_dbnet_memory(&m).arena_allocations == 0);
    n = ocr_dbnet_op_count(&m);
    op = ocr_dbnet_op(&m, n);
    OCR_CHECK(n > 50 && strcmp(op.name, "") == 0 && strcmp(ocr_dbnet_op(&m, -1).kind, "") == 0);
    OCR_CHECK_OK(&ctx, ocr_dbnet_profile(&ctx, &m, fake_clock));
    OCR_CHECK_OK(&ctx, ocr_dbnet_forward(&ctx, &m, &x, 1, &prob, &thresh));
    OCR_CHECK_OK(&ctx, ocr_dbnet_backward(&ctx, &m, &prob, &thresh));
    for (i = 0; i < n; i++) {
        op = ocr_dbnet_op(&m, i);
        if (strcmp(op.kind, "conv") == 0 || strcmp(op.kind, "convT") == 0) {
            char wname[128];
            snprintf(wname, sizeof wname, "%s.weight", op.name);
            OCR_CHECK_MSG(ocr_params_find(&m.params, wname) >= 0 || strcmp(op.name, "prob_logits") == 0, "op %d: convolution '%s' has no weight",
                          i, op.name);
            convs++;
        }
        if (strcmp(op.name, "backbone.conv1") == 0)
            OCR_CHECK(i == 0 && op.channels == 8 && op.height == 32 && op.width == 48 && op.seconds_forward == 1.0 && op.seconds_backward == 1.0);
        if (strcmp(op.name, "backbone.bn1") == 0) OCR_CHECK(i == 1 && strcmp(op.kind, "bn+relu") == 0);
        if (strcmp(op.name, "prob") == 0) { /* eval only: no backward */
            seen_prob = 1;
            OCR_CHECK(strcmp(op.kind, "sigmoid") == 0 && op.height == 64 && op.width == 96 && op.seconds_backward == 0.0);
        }
    }
    OCR_CHECK(seen_prob && convs == 20 + 4 + 4 + 2 * 3); /* backbone with downsamples, laterals, branches, heads */
    /* turned off: the times are gone and nothing more is counted */
    OCR_CHECK_OK(&ctx, ocr_dbnet_profile(&ctx, &m, NULL));
    OCR_CHECK_OK(&ctx, ocr_dbnet_forward(&ctx, &m, &x, 0, &prob, NULL));
    OCR_CHECK(ocr_dbnet_op(&m, 0).seconds_forward == 0.0);
    ocr_tensor_free(&x);
    ocr_dbnet_free(&m);
    ocr_dbnet_free(&m); /* a freed model frees again as a no-op */
    ocr_ctx_free(&ctx);
}

/* Eval forwards of m[0] and m[1]: 1 when both succeed with the same map, bit for bit. */
static int eval_both(ocr_ctx *ctx, ocr_dbnet *m, const ocr_tensor *x, ocr_tensor *prob) {
    int k, ok = 1;
    for (k = 0; k < 2; k++) {
        int rc = ocr_dbnet_forward(ctx, &m[k], x, 0, &prob[k], NULL);
        OCR_CHECK_OK(ctx, rc);
        ok = ok && rc == OCR_OK;
    }
    return ok && memcmp(prob[0].data, prob[1].data, ocr_tensor_bytes(&prob[0])) == 0;
}

/* Activation values and gradients share memory by liveness, and a training step computes each BN+ReLU output again for
   the backward instead of keeping it. The same model with OCR_DBNET_NO_SHARING and _NO_RECOMPUTE gives each
   value a range of its own and keeps them all: both run eval and training steps on three input sizes (the arenas grow, then a smaller input
   reuses them without allocating) and must agree bit for bit in the outputs, every parameter gradient, the running statistics and the eval
   map; a second backward of the same forward is refused (the first reuses the activations' memory as it goes). */
static void test_dbnet_shared_buffers_bit_exact(void) {
    static const int64_t sizes[3][3] = {{2, 64, 96}, {3, 96, 64}, {1, 64, 64}};
    ocr_ctx ctx;
    ocr_dbnet m[2];
    ocr_dbnet_config cfg = make_config(18, 0.25f, 0.03f);
    float *first = NULL;
    ocr_dbnet_memory_info mem[2];
    int64_t allocs = -1;
    int s, k;
    OCR_CHECK_OK(&ctx, ocr_ctx_init(&ctx, 2, 21));
    for (k = 0; k < 2; k++) {
        ocr_rng_seed(&ctx.rng, 21);
        OCR_CHECK_OK(&ctx, ocr_dbnet_init(&ctx, &m[k], &cfg));
    }
    OCR_CHECK_OK(&ctx, ocr_dbnet_set_options(&ctx, &m[1], OCR_DBNET_NO_SHARING | OCR_DBNET_NO_RECOMPUTE));
    first = (float *)malloc(m[0].params.numel * sizeof(float));
    OCR_CHECK(first != NULL && m[0].params.numel == m[1].params.numel);
    for (s = 0; s < 3 && first && !ocr_test__case_failed; s++) {
        int64_t N = sizes[s][0], H = sizes[s][1], W = sizes[s][2];
        ocr_tensor x, dp, dt, prob[2], thresh[2];
        OCR_CHECK_OK(&ctx, ocr_tensor_alloc(&ctx, &x, "x", OCR_F32, OCR_DEVICE_CPU, ocr_shape4(N, 3, H, W)));
        OCR_CHECK_OK(&ctx, ocr_tensor_alloc(&ctx, &dp, "d_prob_logits", OCR_F32, OCR_DEVICE_CPU, ocr_shape4(N, 1, H, W)));
        OCR_CHECK_OK(&ctx, ocr_tensor_alloc(&ctx, &dt, "d_thresh", OCR_F32, OCR_DEVICE_CPU, ocr_shape4(N, 1, H, W)));
        if (ocr_test__case_failed) break;
        ocr_tensor_fill_normal(&ctx, &x, 0.0f, 1.0f);
        ocr_tensor_fill_normal(&ctx, &dp, 0.0f, 1e-3f);
        ocr_tensor_fill_normal(&ctx, &dt, 0.0f, 1e-3f);
        OCR_CHECK_MSG(eval_both(&ctx, m, &x, prob), "eval map before training differs at size %d", s);
        for (k = 0; k < 2; k++) {
            OCR_CHECK_OK(&ctx, ocr_dbnet_forward(&ctx, &m[k], &x, 1, &prob[k], &thresh[k]));
            ocr_params_zero_grad(&m[k].params);
            OCR_CHECK_OK(&ctx, ocr_dbnet_backward(&ctx, &m[k], &dp, &dt));
        }
        if (ocr_test__case_failed) { ocr_tensor_free(&x); ocr_tensor_free(&dp); ocr_tensor_free(&dt); break; }
        OCR_CHECK_MSG(memcmp(prob[0].data, prob[1].data, ocr_tensor_bytes(&prob[0])) == 0 &&
                      memcmp(thresh[0].data, thresh[1].data, ocr_tensor_bytes(&thresh[0])) == 0, "training outputs differ at size %d", s);
        OCR_CHECK_MSG(memcmp(m[0].params.grad, m[1].params.grad, m[0].params.numel * sizeof(float)) == 0, "gradients differ at size %d", s);
        OCR_CHECK_MSG(memcmp(m[0].params.data, m[1].params.data, m[0].params.numel * sizeof(float)) == 0, "running statistics differ at size %d", s);
        for (k = 0; k < 2; k++) mem[k] = ocr_dbnet_memory(&m[k]);
        /* a range of its own for each (rounded up to 64 bytes) against sharing and recomputing */
        OCR_CHECK_MSG(mem[1].values_need_bytes >= mem[1].values_unshared_bytes && mem[1].grads_need_bytes >= mem[1].grads_unshared_bytes &&
                      mem[1].values_need_bytes < 2 * mem[1].values_unshared_bytes && mem[1].grads_need_bytes < 2 * mem[1].grads_unshared_bytes,
                      "unshared layout vs the sum of the activations at size %d", s);
        OCR_CHECK_MSG(mem[0].values_need_bytes < mem[0].values_unshared_bytes && mem[0].grads_need_bytes < mem[0].grads_unshared_bytes &&
                      mem[0].values_unshared_bytes == mem[1].values_unshared_bytes, "shared layout at size %d", s);
        memcpy(first, m[0].params.grad, m[0].params.numel * sizeof(float));
        OCR_CHECK_ERR(&ctx, ocr_dbnet_backward(&ctx, &m[0], &dp, &dt), OCR_ESTATE, "backward already ran");
        OCR_CHECK_MSG(memcmp(first, m[0].params.grad, m[0].params.numel * sizeof(float)) == 0, "a refused second backward changed gradients at size %d", s);
        OCR_CHECK_MSG(eval_both(&ctx, m, &x, prob), "eval map after training differs at size %d", s);
        if (s == 1) allocs = ocr_dbnet_memory(&m[0]).arena_allocations;
        ocr_tensor_free(&x);
        ocr_tensor_free(&dp);
        ocr_tensor_free(&dt);
    }
    /* the largest size set the arenas: sharing must have saved most of the gradients' memory and some of the values' */
    for (k = 0; k < 2; k++) mem[k] = ocr_dbnet_memory(&m[k]);
    printf("     arenas of 3x3x96x64 at width 0.25: values %.2f MiB shared vs %.2f MiB not, gradients %.2f vs %.2f MiB\n",
           mem[0].values_bytes / 1048576.0, mem[1].values_bytes / 1048576.0, mem[0].grads_bytes / 1048576.0, mem[1].grads_bytes / 1048576.0);
    OCR_CHECK(mem[0].values_bytes < mem[1].values_bytes && 3 * mem[0].grads_bytes < mem[1].grads_bytes);
    OCR_CHECK_MSG(mem[0].arena_allocations == allocs, "the smaller third input reallocated an arena");
    free(first);
    for (k = 0; k < 2; k++) ocr_dbnet_free(&m[k]);
    ocr_ctx_free(&ctx);
}

int main(int argc, char **argv) {
    ocr_test_init(argc, argv);
    OCR_TEST_RUN(test_dbnet_names_and_counts);
    OCR_TEST_RUN(test_dbnet_official_init);
    OCR_TEST_RUN(test_dbnet_bad_input);
    OCR_TEST_RUN(test_dbnet_buffers_and_batches);
    OCR_TEST_RUN(test_dbnet_shared_buffers_bit_exact);
    OCR_TEST_RUN(test_dbnet_options_and_profile);
    OCR_TEST_RUN(test_dbnet_checkpoint_roundtrip);
    OCR_TEST_RUN(test_dbnet_load_refuses_bad_values);
    OCR_TEST_RUN(test_dbnet_fixture_from_pytorch);
    OCR_TEST_RUN(test_dbnet_parity_pytorch_live);
    return ocr_test_finish();
}
