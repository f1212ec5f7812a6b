/* Optimizer state files (ocr_optim_save / ocr_optim_load):
   - resume exactness: AdamW and SGD (Nesterov) runs saved after a few steps, loaded into fresh optimizers and
     continued give, bit for bit, the parameters, moments, step and weight average of the uninterrupted run; the loaded
     optimizer takes the file's hyper-parameters even when it was initialised with others;
   - the caller's metadata comes back as written; "optim." keys of the caller are refused;
   - refusals that leave the optimizer as it was: another kind or size (both named), a missing or truncated file (named),
     a missing weight average, a tensor or key this version cannot restore, a newer format, a wrong dtype, NaN state;
   - non-finite state is refused by the writer too, and nothing is written;
   - files from before the format (tensors only, as train_dbnet wrote them) load their tensors and keep the step. */
#define OCR_IMPLEMENTATION
#include "ocr_tensor.h"
#include "ocr_nn.h"
#include "ocr_test.h"
#include <unistd.h>

static ocr_ctx ctx;
static char dir[64];

/* A small parameter set: a trainable weight, a bias without weight decay and a non-trainable buffer. */
static void make_params(ocr_params *P, int64_t rows) {
    int iw, ib, ir;
    size_t k;
    ocr_params_init(P);
    OCR_CHECK_OK(&ctx, ocr_params_add(&ctx, P, "w", ocr_shape2(rows, 5), 1, &iw));
    OCR_CHECK_OK(&ctx, ocr_params_add(&ctx, P, "b", ocr_shape1(rows), 1, &ib));
    OCR_CHECK_OK(&ctx, ocr_params_add(&ctx, P, "running", ocr_shape1(3), 0, &ir));
    OCR_CHECK_OK(&ctx, ocr_params_alloc(&ctx, P));
    P->info[ib].decay = 0;
    for (k = 0; k < P->numel; k++) P->data[k] = (float)sin(0.7 * (double)k + 0.3);
}

/* A gradient that depends on the parameters and the step, so a continued run diverges from a wrong state. */
static void make_grad(ocr_params *P, int step) {
    size_t k;
    for (k = 0; k < P->numel; k++) P->grad[k] = (float)(cos(3.0 * P->data[k] + 0.1 * step + (double)k) * (1.0 + 0.05 * step));
    for (k = P->numel - 3; k < P->numel; k++) P->grad[k] = 0.0f; /* the buffer has no gradient */
}

static void run_steps(ocr_optimizer *opt, ocr_params *P, float *avg, int from, int to) {
    int s;
    for (s = from; s < to; s++) {
        make_grad(P, s);
        OCR_CHECK_OK(&ctx, ocr_optim_step(&ctx, opt, P, 0.05f / (float)(1 + s)));
        OCR_CHECK_OK(&ctx, ocr_params_ema(&ctx, avg, P, 0.9f));
    }
}

static int same_bits(const float *a, const float *b, size_t n) { return n == 0 || memcmp(a, b, n * sizeof(float)) == 0; }

static const char *path_in(const char *name) {
    static char buf[4][256];
    static int k;
    k = (k + 1) % 4;
    snprintf(buf[k], sizeof buf[k], "%s/%s", dir, name);
    return buf[k];
}

/* Runs `total` steps in one go, and `stop` steps + save + load into fresh objects + the rest; compares the bits. */
static void check_resume(ocr_optim_config cfg, ocr_optim_config cfg_at_load, int stop, int total, const char *file) {
    static const char *const keys[2] = {"train.step", "run.note"};
    static const char *const vals[2] = {"3", "a \"quoted\" note"};
    ocr_params A, B, C;
    ocr_optimizer oa, ob, oc;
    float *avg_a, *avg_b, *avg_c;
    ocr_safetensors st;
    const char *path = path_in(file), *wpath = path_in("weights.safetensors");
    make_params(&A, 4);
    make_params(&B, 4);
    OCR_CHECK_OK(&ctx, ocr_optim_init(&ctx, &oa, &A, cfg));
    OCR_CHECK_OK(&ctx, ocr_optim_init(&ctx, &ob, &B, cfg));
    avg_a = ocr_floats_alloc(&ctx, OCR_DEVICE_CPU, A.numel, "avg_a");
    avg_b = ocr_floats_alloc(&ctx, OCR_DEVICE_CPU, B.numel, "avg_b");
    if (ocr_test__case_failed || !avg_a || !avg_b) return;
    OCR_CHECK_OK(&ctx, ocr_params_ema(&ctx, avg_a, &A, 0.0f));
    OCR_CHECK_OK(&ctx, ocr_params_ema(&ctx, avg_b, &B, 0.0f));
    run_steps(&oa, &A, avg_a, 0, total);

    /* the interrupted run: stop, save weights and state, throw everything away */
    run_steps(&ob, &B, avg_b, 0, stop);
    OCR_CHECK_OK(&ctx, ocr_params_save(&ctx, &B, wpath, NULL, NULL, 0));
    OCR_CHECK_OK(&ctx, ocr_optim_save(&ctx, &ob, avg_b, path, keys, vals, 2));
    ocr_optim_free(&ob);
    ocr_floats_free(avg_b, OCR_DEVICE_CPU);
    ocr_params_free(&B);

    /* a new process: fresh objects (the optimizer perhaps configured otherwise), weights and state loaded */
    make_params(&C, 4);
    OCR_CHECK_OK(&ctx, ocr_optim_init(&ctx, &oc, &C, cfg_at_load));
    avg_c = ocr_floats_alloc(&ctx, OCR_DEVICE_CPU, C.numel, "avg_c");
    OCR_CHECK_OK(&ctx, ocr_safetensors_open(&ctx, &st, wpath));
    if (ocr_test__case_failed) return;
    OCR_CHECK_OK(&ctx, ocr_params_load(&ctx, &C, &st, "", 0));
    ocr_safetensors_close(&st);
    OCR_CHECK_OK(&ctx, ocr_safetensors_open(&ctx, &st, path));
    if (ocr_test__case_failed) return;
    OCR_CHECK_OK(&ctx, ocr_optim_load(&ctx, &oc, avg_c, &st));
    OCR_CHECK_MSG(ocr_safetensors_meta(&st, "train.step") && strcmp(ocr_safetensors_meta(&st, "train.step"), "3") == 0 &&
                      ocr_safetensors_meta(&st, "run.note") && strcmp(ocr_safetensors_meta(&st, "run.note"), vals[1]) == 0,
                  "the caller's metadata did not come back as written");
    ocr_safetensors_close(&st);
    OCR_CHECK_MSG(oc.step == stop, "step %lld after loading, expected %d", (long long)oc.step, stop);
    OCR_CHECK_MSG(memcmp(&oc.cfg, &cfg, sizeof cfg) == 0, "the loaded optimizer does not have the file's hyper-parameters");
    run_steps(&oc, &C, avg_c, stop, total);

    OCR_CHECK_MSG(oc.step == oa.step, "step %lld resumed, %lld uninterrupted", (long long)oc.step, (long long)oa.step);
    OCR_CHECK_MSG(same_bits(A.data, C.data, A.numel), "%s: parameters differ from the uninterrupted run", file);
    OCR_CHECK_MSG(same_bits(oa.m, oc.m, A.numel), "%s: first moment / momentum differs from the uninterrupted run", file);
    OCR_CHECK_MSG(!oa.v || same_bits(oa.v, oc.v, A.numel), "%s: second moment differs from the uninterrupted run", file);
    OCR_CHECK_MSG(same_bits(avg_a, avg_c, A.numel), "%s: weight average differs from the uninterrupted run", file);
    ocr_optim_free(&oa);
    ocr_optim_free(&oc);
    ocr_floats_free(avg_a, OCR_DEVICE_CPU);
    ocr_floats_free(avg_c, OCR_DEVICE_CPU);
    ocr_params_free(&A);
    ocr_params_free(&C);
}

static void test_resume_adamw(void) {
    check_resume(ocr_optim_adamw(0.9f, 0.999f, 1e-8f, 1e-4f), ocr_optim_adamw(0.5f, 0.9f, 1e-3f, 0.0f), 3, 8, "adamw.safetensors");
}

static void test_resume_sgd(void) {
    ocr_optim_config sgd = ocr_optim_sgd(0.9f, 1e-3f, 1);
    check_resume(sgd, ocr_optim_sgd(0.5f, 0.0f, 0), 4, 9, "sgd.safetensors");
    check_resume(sgd, sgd, 0, 3, "sgd0.safetensors"); /* saved before the first step: the momentum buffer starts afresh */
}

/* A resumed run without the optimizer state diverges: the check above compares something that matters. */
static void test_state_matters(void) {
    ocr_params A, B;
    ocr_optimizer oa, ob;
    float *avg = NULL;
    make_params(&A, 4);
    make_params(&B, 4);
    OCR_CHECK_OK(&ctx, ocr_optim_init(&ctx, &oa, &A, ocr_optim_adamw(0.9f, 0.999f, 1e-8f, 1e-4f)));
    OCR_CHECK_OK(&ctx, ocr_optim_init(&ctx, &ob, &B, ocr_optim_adamw(0.9f, 0.999f, 1e-8f, 1e-4f)));
    avg = ocr_floats_alloc(&ctx, OCR_DEVICE_CPU, A.numel, "avg");
    if (ocr_test__case_failed || !avg) return;
    run_steps(&oa, &A, avg, 0, 6);
    run_steps(&ob, &B, avg, 0, 3);
    ocr_optim_free(&ob);
    OCR_CHECK_OK(&ctx, ocr_optim_init(&ctx, &ob, &B, ocr_optim_adamw(0.9f, 0.999f, 1e-8f, 1e-4f)));
    run_steps(&ob, &B, avg, 3, 6);
    OCR_CHECK_MSG(!same_bits(A.data, B.data, A.numel), "a run restarted with a fresh optimizer gave the same parameters");
    ocr_optim_free(&oa);
    ocr_optim_free(&ob);
    ocr_floats_free(avg, OCR_DEVICE_CPU);
    ocr_params_free(&A);
    ocr_params_free(&B);
}

/* Writes a file with the given tensors and metadata as another writer might have. */
static void write_file(const char *path, ocr_tensor *const *ts, int n, const char *const *keys, const char *const *vals, int n_meta) {
    OCR_CHECK_OK(&ctx, ocr_safetensors_save(&ctx, path, (const ocr_tensor *const *)ts, n, keys, vals, n_meta));
}

/* Loads path into opt/avg expecting code and a message with substr, and the optimizer unchanged. */
static void expect_refused(const char *path, ocr_optimizer *opt, float *avg, int code, const char *substr) {
    ocr_safetensors st;
    float m0 = opt->m[0];
    int64_t step0 = opt->step;
    ocr_optim_config cfg0 = opt->cfg;
    OCR_CHECK_OK(&ctx, ocr_safetensors_open(&ctx, &st, path));
    if (ocr_test__case_failed) return;
    OCR_CHECK_ERR(&ctx, ocr_optim_load(&ctx, opt, avg, &st), code, substr);
    OCR_CHECK_MSG(opt->m[0] == m0 && opt->step == step0 && memcmp(&cfg0, &opt->cfg, sizeof cfg0) == 0,
                  "a refused load (%s) changed the optimizer", substr);
    ocr_safetensors_close(&st);
}

static void test_refusals(void) {
    ocr_params P, Q;
    ocr_optimizer adam, sgd, other;
    float *avg;
    const char *good = path_in("good.safetensors"), *bad = path_in("bad.safetensors");
    ocr_safetensors st;
    unsigned char *bytes;
    size_t size;
    FILE *f;
    char msg[128], numel[32], numel1[32];
    make_params(&P, 4);
    make_params(&Q, 8); /* entries are padded: 4 and 6 rows would have the same numel */
    OCR_CHECK_OK(&ctx, ocr_optim_init(&ctx, &adam, &P, ocr_optim_adamw(0.9f, 0.999f, 1e-8f, 1e-4f)));
    OCR_CHECK_OK(&ctx, ocr_optim_init(&ctx, &sgd, &P, ocr_optim_sgd(0.9f, 0.0f, 0)));
    OCR_CHECK_OK(&ctx, ocr_optim_init(&ctx, &other, &Q, ocr_optim_adamw(0.9f, 0.999f, 1e-8f, 1e-4f)));
    avg = ocr_floats_alloc(&ctx, OCR_DEVICE_CPU, P.numel, "avg");
    if (ocr_test__case_failed || !avg) return;
    run_steps(&adam, &P, avg, 0, 2);
    OCR_CHECK_OK(&ctx, ocr_optim_save(&ctx, &adam, NULL, good, NULL, NULL, 0));
    adam.m[0] += 1.0f; /* so that a refused load that wrote anything shows */

    expect_refused(good, &sgd, NULL, OCR_EINVAL, "holds AdamW state but the optimizer is SGD");
    snprintf(msg, sizeof msg, "for %zu parameters but the optimizer has %zu", P.numel, Q.numel);
    expect_refused(good, &other, NULL, OCR_ESHAPE, msg);
    expect_refused(good, &adam, avg, OCR_ENOTFOUND, "no tensor 'ema'");

    /* a missing file and a truncated one are named by the open */
    OCR_CHECK_ERR(&ctx, ocr_safetensors_open(&ctx, &st, path_in("none.safetensors")), OCR_EIO, "none.safetensors");
    OCR_CHECK_OK(&ctx, ocr_read_file(&ctx, good, 1 << 20, &bytes, &size));
    if (ocr_test__case_failed) return;
    f = fopen(bad, "wb");
    OCR_CHECK(f && fwrite(bytes, 1, size - 10, f) == size - 10);
    if (f) fclose(f);
    free(bytes);
    OCR_CHECK_ERR(&ctx, ocr_safetensors_open(&ctx, &st, bad), OCR_EFORMAT, "bad.safetensors");

    /* files as other writers might make them */
    {
        const char *v1[] = {"1", "adamw", "2", numel, "0.0001", "0.9", "0.999", "1e-08"};
        static const char *const k1[] = {"optim.version", "optim.kind", "optim.step", "optim.numel", "optim.weight_decay",
                                         "optim.beta1", "optim.beta2", "optim.eps", "optim.scaler"};
        const char *vv[9];
        float *m = (float *)calloc(P.numel, sizeof(float)), *v = (float *)calloc(P.numel, sizeof(float));
        ocr_tensor tm = ocr_tensor_f32("optim.m", ocr_shape1((int64_t)P.numel), m), tv = ocr_tensor_f32("optim.v", ocr_shape1((int64_t)P.numel), v);
        ocr_tensor extra = ocr_tensor_f32("optim.scaler", ocr_shape1(1), m), h;
        ocr_tensor *ts[3] = {&tm, &tv, &extra};
        int i;
        snprintf(numel, sizeof numel, "%zu", P.numel);
        snprintf(numel1, sizeof numel1, "%zu", P.numel + 1);
        for (i = 0; i < 8; i++) vv[i] = v1[i];
        write_file(bad, ts, 2, k1, vv, 8); /* the good case of this writer first */
        OCR_CHECK_OK(&ctx, ocr_safetensors_open(&ctx, &st, bad));
        if (!ocr_test__case_failed) {
            OCR_CHECK_OK(&ctx, ocr_optim_load(&ctx, &adam, NULL, &st));
            ocr_safetensors_close(&st);
        }
        OCR_CHECK(adam.step == 2 && adam.m[0] == 0.0f);
        adam.m[0] = 5.0f;
        write_file(bad, ts, 3, k1, vv, 8);
        expect_refused(bad, &adam, NULL, OCR_EUNSUPPORTED, "tensor 'optim.scaler', which this version cannot restore");
        vv[8] = "65536";
        write_file(bad, ts, 2, k1, vv, 9);
        expect_refused(bad, &adam, NULL, OCR_EUNSUPPORTED, "key 'optim.scaler', which this version cannot restore");
        vv[0] = "2";
        write_file(bad, ts, 2, k1, vv, 8);
        expect_refused(bad, &adam, NULL, OCR_EUNSUPPORTED, "format 2; this version reads format 1");
        vv[0] = "1"; vv[3] = numel1;
        write_file(bad, ts, 2, k1, vv, 8);
        snprintf(msg, sizeof msg, "for %zu parameters but the optimizer has %zu", P.numel + 1, P.numel);
        expect_refused(bad, &adam, NULL, OCR_ESHAPE, msg);
        vv[3] = numel; vv[6] = "1.5";
        write_file(bad, ts, 2, k1, vv, 8);
        expect_refused(bad, &adam, NULL, OCR_EINVAL, "AdamW needs betas in [0, 1)");
        vv[6] = "0.999"; vv[2] = "-1";
        write_file(bad, ts, 2, k1, vv, 8);
        expect_refused(bad, &adam, NULL, OCR_EFORMAT, "optim.step is '-1'");
        vv[2] = "2";
        v[5] = NAN;
        write_file(bad, ts, 2, k1, vv, 8);
        expect_refused(bad, &adam, NULL, OCR_ENONFINITE, "optim.v");
        v[5] = 0.0f;
        OCR_CHECK_OK(&ctx, ocr_tensor_alloc(&ctx, &h, "optim.v", OCR_F16, OCR_DEVICE_CPU, ocr_shape1((int64_t)P.numel)));
        ts[1] = &h;
        write_file(bad, ts, 2, k1, vv, 8);
        expect_refused(bad, &adam, NULL, OCR_EDTYPE, "'optim.v' is F16");
        ocr_tensor_free(&h);
        ts[1] = &tv;
        /* before the format: tensors only; the step stays the caller's */
        adam.step = 41;
        write_file(bad, ts, 1, NULL, NULL, 0);
        expect_refused(bad, &adam, NULL, OCR_EINVAL, "holds SGD state (it has no optim.v) but the optimizer is AdamW");
        m[0] = 7.0f;
        write_file(bad, ts, 2, k1 + 2, vv + 2, 1);
        OCR_CHECK_OK(&ctx, ocr_safetensors_open(&ctx, &st, bad));
        if (!ocr_test__case_failed) {
            OCR_CHECK_OK(&ctx, ocr_optim_load(&ctx, &adam, NULL, &st));
            ocr_safetensors_close(&st);
        }
        OCR_CHECK_MSG(adam.step == 41 && adam.m[0] == 7.0f, "a file without optim.version: step %lld, m[0] %g", (long long)adam.step,
                      (double)adam.m[0]);
        free(m);
        free(v);
    }

    /* the writer refuses what the reader would refuse, and writes nothing then */
    {
        static const char *const k[1] = {"optim.mine"}, *const v[1] = {"x"};
        const char *p = path_in("never.safetensors");
        OCR_CHECK_ERR(&ctx, ocr_optim_save(&ctx, &adam, NULL, p, k, v, 1), OCR_EINVAL, "'optim.mine' is in the library's namespace");
        adam.v[3] = INFINITY;
        OCR_CHECK_ERR(&ctx, ocr_optim_save(&ctx, &adam, NULL, p, NULL, NULL, 0), OCR_ENONFINITE, "optim.v");
        adam.v[3] = 0.0f;
        avg[2] = NAN;
        OCR_CHECK_ERR(&ctx, ocr_optim_save(&ctx, &adam, avg, p, NULL, NULL, 0), OCR_ENONFINITE, "ema");
        OCR_CHECK_MSG(access(p, F_OK) != 0, "%s was written", p);
    }
    ocr_optim_free(&adam);
    ocr_optim_free(&sgd);
    ocr_optim_free(&other);
    ocr_floats_free(avg, OCR_DEVICE_CPU);
    ocr_params_free(&P);
    ocr_params_free(&Q);
}

/* Hyper-parameters survive the text round trip to the bit, whatever their decimal form. */
static void test_hyper_parameters_exact(void) {
    ocr_params P;
    ocr_optimizer a, b;
    ocr_safetensors st;
    ocr_optim_config cfg = ocr_optim_adamw(0.1f + 1e-8f, nextafterf(0.999f, 1.0f), 1.234567e-7f, 3.3333333e-5f);
    const char *p = path_in("hyper.safetensors");
    make_params(&P, 2);
    OCR_CHECK_OK(&ctx, ocr_optim_init(&ctx, &a, &P, cfg));
    OCR_CHECK_OK(&ctx, ocr_optim_init(&ctx, &b, &P, ocr_optim_adamw(0.9f, 0.999f, 1e-8f, 0.0f)));
    if (ocr_test__case_failed) return;
    a.step = 123456789012LL;
    OCR_CHECK_OK(&ctx, ocr_optim_save(&ctx, &a, NULL, p, NULL, NULL, 0));
    OCR_CHECK_OK(&ctx, ocr_safetensors_open(&ctx, &st, p));
    if (ocr_test__case_failed) return;
    OCR_CHECK_OK(&ctx, ocr_optim_load(&ctx, &b, NULL, &st));
    ocr_safetensors_close(&st);
    OCR_CHECK_MSG(memcmp(&a.cfg, &b.cfg, sizeof cfg) == 0 && b.step == a.step, "hyper-parameters or step changed in the round trip");
    ocr_optim_free(&a);
    ocr_optim_free(&b);
    ocr_params_free(&P);
}

int main(int argc, char **argv) {
    char cmd[128];
    ocr_test_init(argc, argv);
    if (ocr_ctx_init(&ctx, 1, 7) != OCR_OK) return 1;
    snprintf(dir, sizeof dir, "/tmp/ocr_test_optim.XXXXXX");
    if (!mkdtemp(dir)) { fprintf(stderr, "test_optim: mkdtemp failed\n"); return 1; }
    OCR_TEST_RUN(test_resume_adamw);
    OCR_TEST_RUN(test_resume_sgd);
    OCR_TEST_RUN(test_state_matters);
    OCR_TEST_RUN(test_refusals);
    OCR_TEST_RUN(test_hyper_parameters_exact);
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    if (system(cmd) != 0) fprintf(stderr, "test_optim: could not remove %s\n", dir);
    ocr_ctx_free(&ctx);
    return ocr_test_finish();
}
