/* The recognition module (ocr_rec.h): the charset (built-in and key files, Hangul and astral code points, every
   refusal naming the sample and the character), the CRNN against PyTorch (tools/crnn_ref.py: a stored fixture of the
   training forward, CTC loss, every gradient, the BN statistics and the eval forward on a padded batch, on the
   portable and best kernels and the references; and live, our checkpoint loaded by PyTorch with strict=True), its
   checkpoints and their refusals, crops (geometry against hand-computed pixels), the folder and LMDB recognition
   sets, the loader transform, the metrics against hand-computed values, the decode watch, and a tiny model that
   learns a few rendered words. Regenerate the fixtures with /usr/bin/python3 tools/crnn_ref.py fixtures */
#define _POSIX_C_SOURCE 200809L
#define OCR_IMPLEMENTATION
#include "ocr_tensor.h"
#include "ocr_nn.h"
#include "ocr_loss.h"
#include "ocr_data.h"
#include "ocr_synth.h"
#include "ocr_rec.h"
#include "ocr_test.h"
#include "ocr_test_cli.h"
#include <lmdb.h>
#include <sys/stat.h>
#include <unistd.h>
#include <time.h>

#define FIXTURES "tests/fixtures/rec_model/"

static char g_tmp[] = "/tmp/ocr_test_rec_XXXXXX";

static void write_text(const char *path, const char *text) {
    FILE *f = fopen(path, "wb");
    OCR_CHECK_MSG(f != NULL, "cannot write %s", path);
    if (!f) return;
    fputs(text, f);
    fclose(f);
}

/* ---------------------------------------------------------------- charset */

static void test_charset_latin(void) {
    ocr_ctx ctx;
    ocr_charset cs, sp;
    int32_t lab[64];
    char out[128];
    int n;
    ocr_ctx_init(&ctx, 1, 1);
    OCR_CHECK_OK(&ctx, ocr_charset_init(&ctx, &cs, "latin"));
    OCR_CHECK_OK(&ctx, ocr_charset_init(&ctx, &sp, "latin+space"));
    OCR_CHECK(cs.n_classes == 95 && sp.n_classes == 96);
    OCR_CHECK(ocr_charset_class(&cs, '0') == 1 && ocr_charset_class(&cs, 'a') == 11 && ocr_charset_class(&cs, 'A') == 37);
    OCR_CHECK(ocr_charset_class(&cs, '~') == 94 && ocr_charset_class(&cs, ' ') == 0 && ocr_charset_class(&sp, ' ') == 95);
    {
        /* european: latin, then Latin-1 (not the soft hyphen), OE, the euro, Greek (not U+03A2), Cyrillic */
        ocr_charset eu;
        OCR_CHECK_OK(&ctx, ocr_charset_init(&ctx, &eu, "european"));
        OCR_CHECK(eu.n_classes == 312 && ocr_charset_class(&eu, 'A') == 37 && ocr_charset_class(&eu, 0xA1) == 95);
        OCR_CHECK(ocr_charset_class(&eu, 0xE9) > 0 && ocr_charset_class(&eu, 0x153) > 0 && ocr_charset_class(&eu, 0x20AC) > 0);
        OCR_CHECK(ocr_charset_class(&eu, 0x3A9) > 0 && ocr_charset_class(&eu, 0x3C2) > 0 && ocr_charset_class(&eu, 0x416) > 0);
        OCR_CHECK(ocr_charset_class(&eu, 0xAD) == 0 && ocr_charset_class(&eu, 0xA0) == 0 && ocr_charset_class(&eu, 0x3A2) == 0 &&
                  ocr_charset_class(&eu, ' ') == 0 && ocr_charset_class(&eu, 0x401) == 0);
        ocr_charset_free(&eu);
    }
    OCR_CHECK_OK(&ctx, ocr_charset_encode(&ctx, &cs, "Hello,\"World\"!", "s1", lab, 64, &n));
    OCR_CHECK(n == 14 && lab[0] == ocr_charset_class(&cs, 'H'));
    OCR_CHECK_OK(&ctx, ocr_charset_decode(&ctx, &cs, lab, n, out, sizeof out));
    OCR_CHECK(strcmp(out, "Hello,\"World\"!") == 0);
    /* blanks are dropped when decoding; a class outside is refused */
    lab[0] = 0;
    OCR_CHECK_OK(&ctx, ocr_charset_decode(&ctx, &cs, lab, 3, out, sizeof out));
    OCR_CHECK(strcmp(out, "el") == 0);
    lab[0] = 95;
    EXPECT_ERR(&ctx, ocr_charset_decode(&ctx, &cs, lab, 1, out, sizeof out), OCR_ERANGE, "class 95");
    /* what encoding refuses, naming the sample: a space outside the charset, an empty label, invalid UTF-8, too long */
    EXPECT_ERR(&ctx, ocr_charset_encode(&ctx, &cs, "two words", "image-000000007", lab, 64, &n), OCR_ENOTFOUND, "'image-000000007'",
               "U+0020 ' '", "UTF-8 20", "character 4", "charset 'latin'");
    OCR_CHECK(n == 0);
    OCR_CHECK_OK(&ctx, ocr_charset_encode(&ctx, &sp, "two words", "x", lab, 64, &n));
    EXPECT_ERR(&ctx, ocr_charset_encode(&ctx, &cs, "", "gt.txt:3 a.png", lab, 64, &n), OCR_EINVAL, "'gt.txt:3 a.png'", "empty label");
    EXPECT_ERR(&ctx, ocr_charset_encode(&ctx, &cs, "ab\xC3(", "s", lab, 64, &n), OCR_EFORMAT, "not UTF-8", "0xc3", "offset 2");
    EXPECT_ERR(&ctx, ocr_charset_encode(&ctx, &cs, "abcdef", "s", lab, 5, &n), OCR_EOVERFLOW, "more than 5");
    ocr_charset_free(&cs);
    ocr_charset_free(&sp);
    ocr_ctx_free(&ctx);
}

static void test_charset_keyfile_hangul(void) {
    ocr_ctx ctx;
    ocr_charset cs, back, lat;
    char path[256], out[64], *text;
    int32_t lab[16];
    int n;
    ocr_ctx_init(&ctx, 1, 1);
    snprintf(path, sizeof path, "%s/keys.txt", g_tmp);
    /* a BOM, CRLF, an empty line, a space, Hangul syllables, an astral CJK ideograph (U+20000) */
    write_text(path, "\xEF\xBB\xBF\xED\x95\x9C\r\n\xEA\xB5\xAD\n\xEC\x96\xB4\n\n \nA\n\xF0\xA0\x80\x80\n");
    OCR_CHECK_OK(&ctx, ocr_charset_init(&ctx, &cs, path));
    OCR_CHECK(cs.n_classes == 7);
    OCR_CHECK(ocr_charset_class(&cs, 0xD55C) == 1 && ocr_charset_class(&cs, 0xAD6D) == 2 && ocr_charset_class(&cs, ' ') == 4);
    OCR_CHECK(ocr_charset_class(&cs, 0x20000) == 6);
    OCR_CHECK_OK(&ctx, ocr_charset_encode(&ctx, &cs, "\xED\x95\x9C\xEA\xB5\xAD\xEC\x96\xB4 A\xF0\xA0\x80\x80", "k", lab, 16, &n));
    OCR_CHECK(n == 6 && lab[0] == 1 && lab[1] == 2 && lab[2] == 3 && lab[3] == 4 && lab[4] == 5 && lab[5] == 6);
    OCR_CHECK_OK(&ctx, ocr_charset_decode(&ctx, &cs, lab, n, out, sizeof out));
    OCR_CHECK(strcmp(out, "\xED\x95\x9C\xEA\xB5\xAD\xEC\x96\xB4 A\xF0\xA0\x80\x80") == 0);
    /* the key-file text of a checkpoint reads back to the same classes */
    text = ocr_charset_to_text(&ctx, &cs);
    OCR_CHECK(text != NULL);
    if (text) {
        OCR_CHECK_OK(&ctx, ocr_charset_from_text(&ctx, &back, text, strlen(text), "meta"));
        OCR_CHECK(back.n_classes == cs.n_classes && memcmp(back.chars, cs.chars, (size_t)cs.n_classes * 4) == 0);
        ocr_charset_free(&back);
        OCR_FREE(text);
    }
    /* Korean against the Latin charset: refused naming the sample, the code point and its bytes */
    OCR_CHECK_OK(&ctx, ocr_charset_init(&ctx, &lat, "latin"));
    EXPECT_ERR(&ctx, ocr_charset_encode(&ctx, &lat, "\xED\x95\x9C\xEA\xB5\xAD", "label-000000002", lab, 16, &n), OCR_ENOTFOUND,
               "'label-000000002'", "U+D55C '\xED\x95\x9C' (UTF-8 ED 95 9C)", "not in the charset 'latin'");
    /* key files refused: a repeated character, two characters on a line, a control character, invalid UTF-8, none */
    EXPECT_ERR(&ctx, ocr_charset_from_text(&ctx, &back, "a\nb\na\n", 6, "k1"), OCR_EFORMAT, "'k1' line 3 repeats", "U+0061", "line 1");
    EXPECT_ERR(&ctx, ocr_charset_from_text(&ctx, &back, "a\nbc\n", 5, "k2"), OCR_EFORMAT, "'k2' line 2 holds 2 characters 'bc'");
    EXPECT_ERR(&ctx, ocr_charset_from_text(&ctx, &back, "a\n\t\n", 4, "k3"), OCR_EFORMAT, "line 2 is the control character U+0009");
    EXPECT_ERR(&ctx, ocr_charset_from_text(&ctx, &back, "a\n\xED\xA0\x80\n", 6, "k4"), OCR_EFORMAT, "line 2 is not UTF-8");
    EXPECT_ERR(&ctx, ocr_charset_from_text(&ctx, &back, "\n\n", 2, "k5"), OCR_EINVAL, "no characters");
    EXPECT_ERR(&ctx, ocr_charset_init(&ctx, &back, "/nonexistent/keys.txt"), OCR_EIO, "neither a built-in charset");
    ocr_charset_free(&lat);
    ocr_charset_free(&cs);
    ocr_ctx_free(&ctx);
}

static void test_utf8(void) {
    static const char *const bad[] = {"\xC0\x80", "\xE0\x80\x80", "\xED\xA0\x80", "\xF4\x90\x80\x80", "\xF5\x80\x80\x80", "\x80", "\xE2\x82"};
    static const int32_t good[] = {0x41, 0x7FF, 0x800, 0xFFFF, 0x10000, 0x10FFFF, 0xE9, 0x20AC};
    size_t i, k;
    for (i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        int32_t cp;
        k = 0;
        OCR_CHECK_MSG(!ocr_utf8_next(bad[i], strlen(bad[i]), &k, &cp), "invalid UTF-8 %zu accepted", i);
    }
    for (i = 0; i < sizeof good / sizeof good[0]; i++) {
        char u[4];
        int32_t cp = -1;
        int len = ocr_utf8_put(good[i], u);
        k = 0;
        OCR_CHECK(ocr_utf8_next(u, (size_t)len, &k, &cp) && cp == good[i] && k == (size_t)len);
    }
}

/* ---------------------------------------------------------------- the model against PyTorch */

static ocr_tensor read_t(ocr_ctx *ctx, const ocr_safetensors *st, const char *name) {
    ocr_tensor t;
    memset(&t, 0, sizeof t);
    OCR_CHECK_OK(ctx, ocr_safetensors_read(ctx, st, name, &t));
    return t;
}

static double worst_err;
static void expect_close(const char *what, const float *got, const ocr_tensor *ref, double tol) {
    double err;
    if (!ref->data) { OCR_CHECK_MSG(0, "%s: no reference", what); return; }
    err = ocr_test_rel_err(got, (const float *)ref->data, ocr_tensor_numel(ref), 1e-6);
    if (err > worst_err) worst_err = err;
    OCR_CHECK_MSG(err <= tol, "%s: relative error %.3g above %g", what, err, tol);
}

/* Variant 0: 1 thread on the portable GEMM; 1: 2 threads on the best kernel; 2: the references. masked: the batch's
   input lengths given (padding masked, packed LSTM sequences), against the reference's "masked." tensors. */
static void parity_variant(int variant, int masked) {
    const char *pre = masked ? "masked." : "";
    char key[OCR_NAME_MAX + 16];
    ocr_ctx ctx;
    ocr_rec_model m;
    ocr_safetensors io;
    ocr_tensor x, tg, tl, il, ref_lp, loss, ref_eval, lp, d_lp;
    ocr_ctc_result res;
    int i;
    OCR_CHECK_OK(&ctx, ocr_ctx_init(&ctx, variant ? 2 : 1, 1));
    ctx.cpu_kernel = variant ? OCR_CPU_KERNEL_AUTO : OCR_CPU_KERNEL_PORTABLE;
    if (variant == 2) ctx.debug_flags |= OCR_DEBUG_REFERENCE;
    else ctx.debug_flags &= ~(unsigned)OCR_DEBUG_REFERENCE;
    OCR_CHECK_OK(&ctx, ocr_rec_init_from_file(&ctx, &m, FIXTURES "crnn_tiny_weights.safetensors"));
    if (ocr_safetensors_open(&ctx, &io, FIXTURES "crnn_tiny_io.safetensors") != OCR_OK) {
        OCR_CHECK_MSG(0, "%s (run /usr/bin/python3 tools/crnn_ref.py fixtures)", ocr_ctx_last_error(&ctx));
        ocr_rec_free(&m);
        ocr_ctx_free(&ctx);
        return;
    }
    OCR_CHECK(m.cfg.n_classes == 7 && m.cfg.hidden == 6 && m.num_batches_tracked == 3 && m.charset.chars[1] == 'a');
    x = read_t(&ctx, &io, "x"); tg = read_t(&ctx, &io, "targets"); tl = read_t(&ctx, &io, "target_lengths");
    il = read_t(&ctx, &io, "input_lengths");
    snprintf(key, sizeof key, "%slog_probs", pre); ref_lp = read_t(&ctx, &io, key);
    snprintf(key, sizeof key, "%sloss", pre); loss = read_t(&ctx, &io, key);
    snprintf(key, sizeof key, "%seval_log_probs", pre); ref_eval = read_t(&ctx, &io, key);
    OCR_CHECK_OK(&ctx, ocr_rec_forward(&ctx, &m, &x, masked ? &il : NULL, 1, &lp));
    OCR_CHECK(lp.shape.ndim == 3 && lp.shape.dim[0] == 6 && lp.shape.dim[1] == 3 && lp.shape.dim[2] == 7);
    expect_close("train log_probs", (const float *)lp.data, &ref_lp, 1e-4);
    OCR_CHECK_OK(&ctx, ocr_tensor_alloc(&ctx, &d_lp, "d_lp", OCR_F32, OCR_DEVICE_CPU, lp.shape));
    OCR_CHECK_OK(&ctx, ocr_tensor_zero(&ctx, &d_lp));
    OCR_CHECK_OK(&ctx, ocr_loss_ctc(&ctx, NULL, &lp, &tg, &tl, &il, &res, NULL, &d_lp));
    OCR_CHECK_MSG(fabs(res.loss - ((const float *)loss.data)[0]) <= 1e-4 * fabs(((const float *)loss.data)[0]), "loss %.8g, PyTorch %.8g",
                  res.loss, ((const float *)loss.data)[0]);
    ocr_params_zero_grad(&m.params);
    OCR_CHECK_OK(&ctx, ocr_rec_backward(&ctx, &m, &d_lp));
    EXPECT_ERR(&ctx, ocr_rec_backward(&ctx, &m, &d_lp), OCR_ESTATE, "training forward");
    for (i = 0; i < m.params.count; i++) {
        char name[OCR_NAME_MAX + 16];
        ocr_tensor ref;
        const ocr_param_info *pi = &m.params.info[i];
        snprintf(name, sizeof name, "%s%s.%s", pre, pi->trainable ? "grad" : "after", pi->name);
        ref = read_t(&ctx, &io, name);
        expect_close(name, pi->trainable ? m.params.grad + pi->offset : m.params.data + pi->offset, &ref, pi->trainable ? 1e-3 : 1e-4);
        ocr_tensor_free(&ref);
    }
    OCR_CHECK(m.num_batches_tracked == 4);
    OCR_CHECK_OK(&ctx, ocr_rec_forward(&ctx, &m, &x, masked ? &il : NULL, 0, &lp));
    expect_close("eval log_probs", (const float *)lp.data, &ref_eval, 1e-4);
    EXPECT_ERR(&ctx, ocr_rec_backward(&ctx, &m, &d_lp), OCR_ESTATE, "training forward");
    printf("     %s%s: worst relative error %.2e over log_probs, loss, %d parameter tensors, eval\n",
           variant == 0 ? "portable/1 thread" : variant == 1 ? "best kernel/2 threads" : "references", masked ? ", input lengths" : "",
           worst_err, m.params.count);
    worst_err = 0;
    ocr_tensor_free(&x); ocr_tensor_free(&tg); ocr_tensor_free(&tl); ocr_tensor_free(&il); ocr_tensor_free(&ref_lp);
    ocr_tensor_free(&loss); ocr_tensor_free(&ref_eval); ocr_tensor_free(&d_lp);
    ocr_safetensors_close(&io);
    ocr_rec_free(&m);
    ocr_ctx_free(&ctx);
}

/* In eval mode with input lengths, a crop's log-probabilities are those it gets alone, whatever the wider crops
   beside it; without them the padding changes them (BN's shift turns zero padding into activations the convs and
   the reverse LSTM read), which is what the lengths are for. */
static void test_batch_independence(void) {
    ocr_ctx ctx;
    ocr_rec_model m;
    ocr_safetensors io;
    ocr_tensor x, il, alone, il1, lp;
    int64_t t, k, K, row = 3 * 32;
    double worst_masked = 0, worst_plain = 0;
    int plain, r;
    OCR_CHECK_OK(&ctx, ocr_ctx_init(&ctx, 2, 1));
    OCR_CHECK_OK(&ctx, ocr_rec_init_from_file(&ctx, &m, FIXTURES "crnn_tiny_weights.safetensors"));
    if (ocr_safetensors_open(&ctx, &io, FIXTURES "crnn_tiny_io.safetensors") != OCR_OK) {
        OCR_CHECK_MSG(0, "%s", ocr_ctx_last_error(&ctx));
        ocr_rec_free(&m); ocr_ctx_free(&ctx);
        return;
    }
    x = read_t(&ctx, &io, "x");         /* [3, 3, 32, 24]; crop 1 is 16 wide (4 frames), zero beyond */
    il = read_t(&ctx, &io, "input_lengths");
    K = m.cfg.n_classes;
    OCR_CHECK_OK(&ctx, ocr_tensor_alloc(&ctx, &alone, "alone", OCR_F32, OCR_DEVICE_CPU, ocr_shape4(1, 3, 32, 16)));
    OCR_CHECK_OK(&ctx, ocr_tensor_alloc(&ctx, &il1, "il1", OCR_I32, OCR_DEVICE_CPU, ocr_shape1(1)));
    if (!ocr_test__case_failed) {
        float ref[4 * 16];
        OCR_CHECK(((const int32_t *)il.data)[1] == 4 && K <= 16);
        for (r = 0; r < (int)row; r++) memcpy((float *)alone.data + r * 16, (const float *)x.data + (row + r) * 24, 16 * sizeof(float));
        ((int32_t *)il1.data)[0] = 4;
        OCR_CHECK_OK(&ctx, ocr_rec_forward(&ctx, &m, &alone, &il1, 0, &lp));
        memcpy(ref, lp.data, (size_t)(4 * K) * sizeof(float));
        for (plain = 0; plain < 2; plain++) {
            OCR_CHECK_OK(&ctx, ocr_rec_forward(&ctx, &m, &x, plain ? NULL : &il, 0, &lp));
            for (t = 0; t < 4; t++)
                for (k = 0; k < K; k++) {
                    double d = fabs((double)((const float *)lp.data)[(t * 3 + 1) * K + k] - ref[t * K + k]);
                    if (plain) worst_plain = d > worst_plain ? d : worst_plain;
                    else worst_masked = d > worst_masked ? d : worst_masked;
                }
        }
        OCR_CHECK_MSG(worst_masked < 1e-5, "crop 1 batched with wider crops differs from alone by %g with input lengths", worst_masked);
        OCR_CHECK_MSG(worst_plain > 1e-3, "without input lengths the padding changed nothing (%g): the check above proves nothing",
                      worst_plain);
        printf("     crop alone vs batched: %.1e with input lengths, %.2f without\n", worst_masked, worst_plain);
    }
    if (il.data) {
        ((int32_t *)il.data)[2] = 7;
        EXPECT_ERR(&ctx, ocr_rec_forward(&ctx, &m, &x, &il, 0, &lp), OCR_EINVAL, "crop 2 has 7 frames", "[1, W/4 = 6]");
    }
    ocr_tensor_free(&x); ocr_tensor_free(&il); ocr_tensor_free(&alone); ocr_tensor_free(&il1);
    ocr_safetensors_close(&io);
    ocr_rec_free(&m);
    ocr_ctx_free(&ctx);
}

static void test_model_parity_pytorch(void) {
    int v;
    for (v = 0; v < 6; v++) parity_variant(v % 3, v / 3);
}

/* Our checkpoint (after a training step) loads into tools/crnn_ref.py's module with strict=True and gives our eval
   output; loading refuses another config, another charset and a stray tensor. */
static void test_checkpoint_pytorch_strict(void) {
    ocr_ctx ctx;
    ocr_rec_model m, m2, other;
    ocr_rec_config cfg;
    ocr_charset cs;
    ocr_safetensors st;
    ocr_tensor x, lp, d_lp, ref;
    char ckpt[256], io[256], out[256], cmd[1024];
    const ocr_tensor *xs[1];
    int rc, i;
    ocr_ctx_init(&ctx, 2, 5);
    snprintf(ckpt, sizeof ckpt, "%s/rec.safetensors", g_tmp);
    snprintf(io, sizeof io, "%s/rec_io.safetensors", g_tmp);
    snprintf(out, sizeof out, "%s/rec_out.safetensors", g_tmp);
    OCR_CHECK_OK(&ctx, ocr_charset_init(&ctx, &cs, "latin"));
    cfg = ocr_rec_config_default();
    cfg.channels[0] = 8; cfg.channels[1] = 8; cfg.channels[2] = 16; cfg.channels[3] = 16; cfg.channels[4] = 16; cfg.channels[5] = 24;
    cfg.hidden = 12;
    OCR_CHECK_OK(&ctx, ocr_rec_init(&ctx, &m, &cfg, &cs));
    OCR_CHECK_OK(&ctx, ocr_tensor_alloc(&ctx, &x, "x", OCR_F32, OCR_DEVICE_CPU, ocr_shape4(2, 3, 32, 40)));
    OCR_CHECK_OK(&ctx, ocr_tensor_fill_normal(&ctx, &x, 0.0f, 0.5f));
    /* a training step moves the BN statistics away from 0 and 1 */
    OCR_CHECK_OK(&ctx, ocr_rec_forward(&ctx, &m, &x, NULL, 1, &lp));
    OCR_CHECK_OK(&ctx, ocr_tensor_alloc(&ctx, &d_lp, "d", OCR_F32, OCR_DEVICE_CPU, lp.shape));
    OCR_CHECK_OK(&ctx, ocr_tensor_fill_normal(&ctx, &d_lp, 0.0f, 0.1f));
    ocr_params_zero_grad(&m.params);
    OCR_CHECK_OK(&ctx, ocr_rec_backward(&ctx, &m, &d_lp));
    for (i = 0; i < (int)m.params.numel; i++) m.params.data[i] -= 0.01f * m.params.grad[i];
    OCR_CHECK_OK(&ctx, ocr_rec_save(&ctx, &m, ckpt, NULL, NULL, 0));
    xs[0] = &x;
    OCR_CHECK_OK(&ctx, ocr_safetensors_save(&ctx, io, xs, 1, NULL, NULL, 0));
    OCR_CHECK_OK(&ctx, ocr_rec_forward(&ctx, &m, &x, NULL, 0, &lp));
    snprintf(cmd, sizeof cmd, "/usr/bin/python3 tools/crnn_ref.py check %s %s %s", ckpt, io, out);
    rc = system(cmd);
    OCR_CHECK_MSG(rc == 0, "the PyTorch reference failed (status %d): %s (needs /usr/bin/python3 with python3-torch)", rc, cmd);
    if (rc == 0 && ocr_safetensors_open(&ctx, &st, out) == OCR_OK) {
        ref = read_t(&ctx, &st, "log_probs");
        expect_close("eval log_probs in PyTorch from our checkpoint", (const float *)lp.data, &ref, 1e-4);
        ocr_tensor_free(&ref);
        ocr_safetensors_close(&st);
    }
    /* the file loads back bit for bit, with its charset and step count */
    OCR_CHECK_OK(&ctx, ocr_rec_init_from_file(&ctx, &m2, ckpt));
    OCR_CHECK(m2.params.numel == m.params.numel && memcmp(m2.params.data, m.params.data, m.params.numel * sizeof(float)) == 0);
    OCR_CHECK(m2.num_batches_tracked == 1 && m2.charset.n_classes == 95);
    /* refusals, the model left as it was */
    cfg.hidden = 10;
    OCR_CHECK_OK(&ctx, ocr_rec_init(&ctx, &other, &cfg, &cs));
    EXPECT_ERR(&ctx, ocr_rec_load(&ctx, &other, ckpt), OCR_EINVAL, "ocr_rec.hidden=12", "this model has 10");
    ocr_rec_free(&other);
    cfg.hidden = 12;
    ocr_charset_free(&cs);
    OCR_CHECK_OK(&ctx, ocr_charset_from_text(&ctx, &cs,
                                             "0\n1\n2\n3\n4\n5\n6\n7\n8\n9\nb\na\nc\nd\ne\nf\ng\nh\ni\nj\nk\nl\nm\nn\no\np\nq\nr\ns\nt\nu\nv\nw\nx\ny\nz\n"
                                             "A\nB\nC\nD\nE\nF\nG\nH\nI\nJ\nK\nL\nM\nN\nO\nP\nQ\nR\nS\nT\nU\nV\nW\nX\nY\nZ\n!\n\"\n#\n$\n%\n&\n'\n(\n)\n*\n"
                                             "+\n,\n-\n.\n/\n:\n;\n<\n=\n>\n?\n@\n[\n\\\n]\n^\n_\n`\n{\n|\n}\n~\n", 188, "swapped"));
    OCR_CHECK(cs.n_classes == 95);
    OCR_CHECK_OK(&ctx, ocr_rec_init(&ctx, &other, &cfg, &cs));
    EXPECT_ERR(&ctx, ocr_rec_load(&ctx, &other, ckpt), OCR_EINVAL, "another charset", "class 11 is U+0061 'a'", "U+0062 'b'");
    ocr_rec_free(&other);
    ocr_charset_free(&cs);
    ocr_rec_free(&m2);
    ocr_tensor_free(&x); ocr_tensor_free(&d_lp);
    ocr_rec_free(&m);
    ocr_ctx_free(&ctx);
}

static void test_model_refusals(void) {
    ocr_ctx ctx;
    ocr_rec_model m;
    ocr_rec_config cfg = ocr_rec_config_default();
    ocr_charset cs;
    ocr_tensor x, lp;
    ocr_ctx_init(&ctx, 1, 1);
    OCR_CHECK_OK(&ctx, ocr_charset_init(&ctx, &cs, "latin"));
    cfg.height = 48;
    EXPECT_ERR(&ctx, ocr_rec_init(&ctx, &m, &cfg, &cs), OCR_EINVAL, "height 48");
    cfg = ocr_rec_config_default();
    cfg.layers = 0;
    EXPECT_ERR(&ctx, ocr_rec_init(&ctx, &m, &cfg, &cs), OCR_EINVAL, "layers 0");
    cfg = ocr_rec_config_default();
    cfg.channels[0] = 4; cfg.channels[1] = 4; cfg.channels[2] = 4; cfg.channels[3] = 4; cfg.channels[4] = 4; cfg.channels[5] = 4; cfg.hidden = 4;
    OCR_CHECK_OK(&ctx, ocr_rec_init(&ctx, &m, &cfg, &cs));
    OCR_CHECK_OK(&ctx, ocr_tensor_alloc(&ctx, &x, "x", OCR_F32, OCR_DEVICE_CPU, ocr_shape4(1, 3, 32, 30)));
    EXPECT_ERR(&ctx, ocr_rec_forward(&ctx, &m, &x, NULL, 1, &lp), OCR_ESHAPE, "multiple of 4");
    ocr_tensor_free(&x);
    ocr_rec_free(&m);
    ocr_charset_free(&cs);
    ocr_ctx_free(&ctx);
}

/* ---------------------------------------------------------------- crops */

static void test_crop_geometry(void) {
    ocr_ctx ctx;
    ocr_image img, out;
    ocr_rec_crop_config cc = ocr_rec_crop_defaults();
    ocr_point q[4];
    int x, y, bad = 0;
    ocr_ctx_init(&ctx, 1, 1);
    /* an image whose red channel is x and green channel is y */
    OCR_CHECK_OK(&ctx, ocr_image_alloc(&ctx, &img, 200, 100, 3));
    for (y = 0; y < 100; y++)
        for (x = 0; x < 200; x++) {
            img.pixels[(y * 200 + x) * 3] = (uint8_t)x; img.pixels[(y * 200 + x) * 3 + 1] = (uint8_t)y; img.pixels[(y * 200 + x) * 3 + 2] = 7;
        }
    /* a 64x16 box, no margin: crop 128x32, each output pixel two source pixels wide, sampled at their average */
    cc.margin = 0;
    q[0].x = 20; q[0].y = 40; q[1].x = 84; q[1].y = 40; q[2].x = 84; q[2].y = 56; q[3].x = 20; q[3].y = 56;
    OCR_CHECK_OK(&ctx, ocr_rec_crop(&ctx, &img, q, &cc, NULL, 0, &out));
    OCR_CHECK(out.width == 128 && out.height == 32 && out.channels == 3);
    for (y = 0; y < 32 && out.pixels; y++)
        for (x = 0; x < 128; x++) {
            /* output pixel x covers source [20 + x/2, 20 + (x+1)/2): its centre 20.25 + x/2 - 0.5 + 0.5 ... */
            double sx = 20 + (x + 0.5) / 2.0 - 0.5, sy = 40 + (y + 0.5) / 2.0 - 0.5;
            bad += abs(out.pixels[(y * 128 + x) * 3] - (int)floor(sx + 0.5)) > 1 || abs(out.pixels[(y * 128 + x) * 3 + 1] - (int)floor(sy + 0.5)) > 1 ||
                   out.pixels[(y * 128 + x) * 3 + 2] != 7;
        }
    OCR_CHECK_MSG(bad == 0, "%d pixels off the expected source position", bad);
    ocr_image_free(&out);
    /* the margin grows the quad by 0.1 of its height on each side: 67.2 x 19.2 -> width 112 (aspect 3.5) */
    cc.margin = 0.1f;
    OCR_CHECK_OK(&ctx, ocr_rec_crop(&ctx, &img, q, &cc, NULL, 0, &out));
    OCR_CHECK_MSG(out.width == 4 * (int)ceil(32.0 * 67 / 19 / 4) && out.pixels && abs(out.pixels[1] - 38) <= 1,
                  "width %d, top-left green %d", out.width, out.pixels ? out.pixels[1] : -1);
    ocr_image_free(&out);
    /* a quad rotated by 90 degrees (reading downwards): the crop's x follows the image's y */
    q[0].x = 60; q[0].y = 10; q[1].x = 60; q[1].y = 90; q[2].x = 40; q[2].y = 90; q[3].x = 40; q[3].y = 10;
    cc.margin = 0;
    OCR_CHECK_OK(&ctx, ocr_rec_crop(&ctx, &img, q, &cc, NULL, 0, &out));
    OCR_CHECK(out.width == 128);
    if (out.pixels) OCR_CHECK(abs(out.pixels[1] - 10) <= 1 && abs(out.pixels[(127) * 3 + 1] - 89) <= 1 && abs(out.pixels[0] - 59) <= 1);
    ocr_image_free(&out);
    /* width: at least min_width (rounded to 4), at most max_width; a whole-image quad gets no margin */
    q[0].x = 0; q[0].y = 0; q[1].x = 10; q[1].y = 0; q[2].x = 10; q[2].y = 100; q[3].x = 0; q[3].y = 100;
    OCR_CHECK_OK(&ctx, ocr_rec_crop(&ctx, &img, q, &cc, NULL, 22, &out));
    OCR_CHECK(out.width == 24);
    ocr_image_free(&out);
    q[0].x = 0; q[0].y = 0; q[1].x = 200; q[1].y = 0; q[2].x = 200; q[2].y = 100; q[3].x = 0; q[3].y = 100;
    cc.margin = 0.3f; cc.max_width = 40;
    OCR_CHECK_OK(&ctx, ocr_rec_crop(&ctx, &img, q, &cc, NULL, 0, &out));
    OCR_CHECK(out.width == 40 && out.pixels && out.pixels[0] <= 3 && out.pixels[1] <= 2); /* 5x3 source pixels averaged */
    ocr_image_free(&out);
    /* augmentation stays within its bounds and is reproducible from the rng */
    {
        ocr_rng r1, r2;
        ocr_image a, b;
        ocr_rng_seed(&r1, 9); ocr_rng_seed(&r2, 9);
        cc = ocr_rec_crop_defaults();
        q[0].x = 20; q[0].y = 40; q[1].x = 84; q[1].y = 40; q[2].x = 84; q[2].y = 56; q[3].x = 20; q[3].y = 56;
        OCR_CHECK_OK(&ctx, ocr_rec_crop(&ctx, &img, q, &cc, &r1, 0, &a));
        OCR_CHECK_OK(&ctx, ocr_rec_crop(&ctx, &img, q, &cc, &r2, 0, &b));
        OCR_CHECK(a.width == b.width && a.width % 4 == 0 && a.width >= 80 && a.width <= 160 && memcmp(a.pixels, b.pixels, (size_t)a.width * 96) == 0);
        ocr_image_free(&a); ocr_image_free(&b);
    }
    q[1] = q[0]; q[2] = q[0]; q[3] = q[0];
    EXPECT_ERR(&ctx, ocr_rec_crop(&ctx, &img, q, &cc, NULL, 0, &out), OCR_EINVAL, "degenerate");
    ocr_image_free(&img);
    ocr_ctx_free(&ctx);
}

/* ---------------------------------------------------------------- datasets */

/* a small PNG crop of width w */
static void write_png(ocr_ctx *ctx, const char *path, int w, int h, int seed) {
    ocr_image img;
    int i;
    OCR_CHECK_OK(ctx, ocr_image_alloc(ctx, &img, w, h, 3));
    for (i = 0; i < w * h * 3; i++) img.pixels[i] = (uint8_t)(i * 7 + seed * 31);
    OCR_CHECK_OK(ctx, ocr_image_save_png(ctx, path, &img));
    ocr_image_free(&img);
}

static void test_folder_dataset(void) {
    ocr_ctx ctx;
    ocr_dataset ds;
    ocr_sample s;
    ocr_charset cs;
    char dir[256], path[512], first[512];
    int64_t words, skipped;
    ocr_ctx_init(&ctx, 1, 1);
    snprintf(dir, sizeof dir, "%s/folder", g_tmp);
    mkdir(dir, 0755);
    snprintf(path, sizeof path, "%s/a.png", dir); write_png(&ctx, path, 40, 16, 1);
    snprintf(path, sizeof path, "%s/b.png", dir); write_png(&ctx, path, 30, 12, 2);
    snprintf(path, sizeof path, "%s/gt.txt", dir);
    write_text(path, "\xEF\xBB\xBF" "a.png\tHello\r\n\nb.png\t\xED\x95\x9C\xEA\xB5\xAD\n");
    OCR_CHECK_OK(&ctx, ocr_rec_dataset_open_folder(&ctx, &ds, path, NULL));
    OCR_CHECK(ds.count == 2);
    OCR_CHECK_OK(&ctx, ocr_dataset_get(&ctx, &ds, 1, 0, &s));
    OCR_CHECK(s.image.width == 30 && s.image.height == 12 && s.n_polys == 1 && strcmp(s.polys[0].text, "\xED\x95\x9C\xEA\xB5\xAD") == 0);
    OCR_CHECK(strstr(s.id, "gt.txt:3 b.png") != NULL && s.polys[0].points[2].x == 30 && s.polys[0].points[2].y == 12);
    ocr_sample_free(&s);
    /* the Korean label against the Latin charset: an error naming the file, the line, the image and the character */
    OCR_CHECK_OK(&ctx, ocr_charset_init(&ctx, &cs, "latin"));
    EXPECT_ERR(&ctx, ocr_rec_check_labels(&ctx, &ds, &cs, 256, 0, &words, &skipped, NULL, 0), OCR_ENOTFOUND, "gt.txt:3 b.png", "U+D55C");
    OCR_CHECK_OK(&ctx, ocr_rec_check_labels(&ctx, &ds, &cs, 256, 1, &words, &skipped, first, sizeof first));
    OCR_CHECK(words == 2 && skipped == 1 && strstr(first, "U+D55C") != NULL);
    ocr_dataset_close(&ds);
    /* a line without a tab; a missing image fails when read, naming it */
    write_text(path, "a.png\tok\nb.png Hello\n");
    EXPECT_ERR(&ctx, ocr_rec_dataset_open_folder(&ctx, &ds, path, NULL), OCR_EFORMAT, "gt.txt' line 2", "path<TAB>text");
    write_text(path, "missing.png\tx\n");
    OCR_CHECK_OK(&ctx, ocr_rec_dataset_open_folder(&ctx, &ds, path, dir));
    OCR_CHECK(ocr_dataset_get(&ctx, &ds, 0, 0, &s) != OCR_OK && strstr(ocr_ctx_last_error(&ctx), "missing.png"));
    ocr_dataset_close(&ds);
    ocr_charset_free(&cs);
    ocr_ctx_free(&ctx);
}

/* A recognition LMDB in clovaai's layout, written here with liblmdb: plain UTF-8 labels, the second Korean. */
static const char *const kLmdbLabels[3] = {"abc", "\xED\x95\x9C\xEA\xB5\xAD", "XY"};
static void write_recognition_lmdb(ocr_ctx *ctx, const char *dir) {
    char key[32], png_path[512];
    MDB_env *env;
    MDB_txn *txn;
    MDB_dbi dbi;
    MDB_val k, v;
    int i;
    mkdir(dir, 0755);
    OCR_CHECK(mdb_env_create(&env) == 0 && mdb_env_set_mapsize(env, 1 << 22) == 0 && mdb_env_open(env, dir, 0, 0644) == 0);
    OCR_CHECK(mdb_txn_begin(env, NULL, 0, &txn) == 0 && mdb_dbi_open(txn, NULL, 0, &dbi) == 0);
    for (i = 0; i < 3; i++) {
        unsigned char *bytes;
        size_t size;
        snprintf(png_path, sizeof png_path, "%s/c%d.png", g_tmp, i);
        write_png(ctx, png_path, 24 + 8 * i, 10, i);
        OCR_CHECK_OK(ctx, ocr_read_file(ctx, png_path, 1 << 20, &bytes, &size));
        snprintf(key, sizeof key, "image-%09d", i + 1);
        k.mv_data = key; k.mv_size = strlen(key); v.mv_data = bytes; v.mv_size = size;
        OCR_CHECK(mdb_put(txn, dbi, &k, &v, 0) == 0);
        OCR_FREE(bytes);
        snprintf(key, sizeof key, "label-%09d", i + 1);
        k.mv_data = key; k.mv_size = strlen(key); v.mv_data = (void *)kLmdbLabels[i]; v.mv_size = strlen(kLmdbLabels[i]);
        OCR_CHECK(mdb_put(txn, dbi, &k, &v, 0) == 0);
    }
    k.mv_data = (void *)"num-samples"; k.mv_size = 11; v.mv_data = (void *)"3"; v.mv_size = 1;
    OCR_CHECK(mdb_put(txn, dbi, &k, &v, 0) == 0 && mdb_txn_commit(txn) == 0);
    mdb_env_close(env);
}

static void test_lmdb_recognition_set(void) {
    const char *const *labels = kLmdbLabels;
    ocr_ctx ctx;
    ocr_dataset ds;
    ocr_charset cs;
    char dir[256];
    int i;
    int64_t words, skipped;
    ocr_ctx_init(&ctx, 1, 1);
    snprintf(dir, sizeof dir, "%s/lmdb", g_tmp);
    write_recognition_lmdb(&ctx, dir);
    OCR_CHECK_OK(&ctx, ocr_dataset_open_lmdb(&ctx, &ds, dir));
    OCR_CHECK_OK(&ctx, ocr_charset_init(&ctx, &cs, "latin"));
    EXPECT_ERR(&ctx, ocr_rec_check_labels(&ctx, &ds, &cs, 256, 0, &words, &skipped, NULL, 0), OCR_ENOTFOUND, "image-000000002", "U+D55C",
               "UTF-8 ED 95 9C");
    OCR_CHECK_OK(&ctx, ocr_rec_check_labels(&ctx, &ds, &cs, 256, 1, &words, &skipped, NULL, 0));
    OCR_CHECK(words == 3 && skipped == 1);
    /* the loader transform: one crop per sample, its width and labels; the Korean one skipped and counted */
    {
        ocr_rec_words_config wc;
        ocr_loader_config lc = ocr_loader_config_default();
        ocr_tensor f[OCR_REC_N_FIELDS];
        ocr_sample s;
        ocr_rng rng;
        int j, rc;
        memset(&wc, 0, sizeof wc);
        wc.charset = &cs; wc.crop = ocr_rec_crop_defaults(); wc.max_words = 1; wc.skip_unknown = 1;
        ocr_rec_loader_setup(&wc, &lc);
        OCR_CHECK(lc.n_fields == 3 && lc.field_shapes[OCR_REC_F_IMAGES].dim[2] == 256 && lc.field_shapes[OCR_REC_F_WORDS].dim[1] == 66);
        for (j = 0; j < 3; j++) OCR_CHECK_OK(&ctx, ocr_tensor_alloc(&ctx, &f[j], lc.field_names[j], OCR_F32, OCR_DEVICE_CPU, lc.field_shapes[j]));
        for (i = 0; i < 3; i++) {
            const float *w = (const float *)f[1].data, *c = (const float *)f[2].data;
            for (j = 0; j < 3; j++) ocr_tensor_zero(&ctx, &f[j]);
            ocr_rng_seed(&rng, 1);
            OCR_CHECK_OK(&ctx, ocr_dataset_get(&ctx, &ds, i, 0, &s));
            OCR_CHECK_OK(&ctx, lc.transform(&ctx, lc.transform_user, &s, i, &rng, f));
            if (i == 1) OCR_CHECK(c[0] == 0 && c[1] == 1);
            else {
                /* 24x10 -> 77 wide, rounded up to 80; 40x10 -> 128 */
                OCR_CHECK_MSG(c[0] == 1 && c[1] == 0 && w[0] == (i == 0 ? 80 : 128) && w[1] == (float)strlen(labels[i]),
                              "sample %d: counts %g %g, width %g, length %g", i, c[0], c[1], w[0], w[1]);
                OCR_CHECK(w[2] == (float)ocr_charset_class(&cs, labels[i][0]));
            }
            ocr_sample_free(&s);
        }
        wc.skip_unknown = 0;
        OCR_CHECK_OK(&ctx, ocr_dataset_get(&ctx, &ds, 1, 0, &s));
        rc = lc.transform(&ctx, lc.transform_user, &s, 1, &rng, f);
        OCR_CHECK(rc == OCR_ENOTFOUND && strstr(ocr_ctx_last_error(&ctx), "image-000000002"));
        ocr_sample_free(&s);
        for (j = 0; j < 3; j++) ocr_tensor_free(&f[j]);
    }
    ocr_charset_free(&cs);
    ocr_dataset_close(&ds);
    ocr_ctx_free(&ctx);
}

/* ---------------------------------------------------------------- metrics */

static void test_eval_metrics(void) {
    ocr_rec_eval e;
    ocr_rec_eval_result r;
    ocr_rec_decode_watch w = ocr_rec_decode_watch_default();
    int32_t a[] = {1, 2, 3, 4}, b[] = {1, 3, 4, 5};
    OCR_CHECK(ocr_rec_edit_distance(a, 4, b, 4) == 2 && ocr_rec_edit_distance(a, 0, b, 3) == 3 && ocr_rec_edit_distance(a, 4, a, 4) == 0);
    ocr_rec_eval_init(&e);
    ocr_rec_eval_add(&e, "Hello", "Hello");                   /* right */
    ocr_rec_eval_add(&e, "World", "world");                   /* right ignoring case: 1 edit */
    ocr_rec_eval_add(&e, "\xED\x95\x9C\xEA\xB5\xAD", "\xED\x95\x9C");  /* Korean: 1 of 2 characters missing */
    ocr_rec_eval_add(&e, "ab", "");                           /* empty prediction: 2 edits */
    r = ocr_rec_eval_finish(&e);
    OCR_CHECK(e.words == 4 && e.correct == 1 && e.correct_nocase == 2 && e.empty == 1 && e.gt_chars == 14 && e.edits == 4);
    OCR_CHECK(fabs(r.accuracy - 0.25) < 1e-12 && fabs(r.accuracy_nocase - 0.5) < 1e-12 && fabs(r.cer - 4.0 / 14) < 1e-12);
    OCR_CHECK(fabs(r.one_minus_ned - (1 - (0 + 0.2 + 0.5 + 1.0) / 4)) < 1e-12 && fabs(r.empty_share - 0.25) < 1e-12);
    OCR_CHECK(e.by_len_words[5] == 2 && e.by_len_correct[5] == 1 && e.by_len_words[2] == 2 && e.by_len_correct[2] == 0);
    ocr_rec_eval_init(&e);
    ocr_rec_eval_add(&e, "\xCE\x91\xD0\x96\xC3\x89", "\xCE\xB1\xD0\xB6\xC3\xA9");  /* Greek, Cyrillic, Latin-1 capitals */
    OCR_CHECK(e.correct == 0 && e.correct_nocase == 1);
    /* the watch warns after two validations in a row at half empty or more */
    OCR_CHECK(!ocr_rec_decode_watch_update(&w, 0.9) && !ocr_rec_decode_watch_update(&w, 0.3) && !ocr_rec_decode_watch_update(&w, 0.5));
    OCR_CHECK(ocr_rec_decode_watch_update(&w, 1.0) && ocr_rec_decode_watch_update(&w, 0.7) && !ocr_rec_decode_watch_update(&w, 0.1));
}

/* ---------------------------------------------------------------- a tiny model learns a few words */

static double now_s(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + t.tv_nsec * 1e-9;
}

/* Four words rendered on plain backgrounds, learned by a small model (one LSTM layer: it leaves CTC's all-blank phase
   soonest) until every one reads back through the inference path: crops of any size, sorted by width and batched
   (here one batch of all four, with their input lengths as in training), BN on its running statistics. Checked every
   25 steps; with the seeds tried it takes 175 to 300. */
static void test_overfit_words(void) {
    enum { WORDS = 4, MAX_STEPS = 600 };
    ocr_ctx ctx;
    ocr_synth synth;
    ocr_synth_config sc = ocr_synth_defaults();
    ocr_charset cs;
    ocr_rec_model m;
    ocr_rec_config cfg = ocr_rec_config_default();
    ocr_rec_crop_config cc = ocr_rec_crop_defaults();
    ocr_optimizer opt;
    ocr_image crops[WORDS];
    char *labels[WORDS], *texts[WORDS];
    int32_t lab[WORDS * 32], tl[WORDS], il[WORDS];
    ocr_tensor x, tg, tlt, ilt, lp, d_lp;
    ocr_ctc_result res;
    int n = 0, total = 0, i, step, W = 0, right = 0, index;
    double t0 = now_s(), loss0 = 0;
    static const int channels[OCR_REC_BLOCKS] = {8, 16, 16, 16, 32, 32};
    ocr_ctx_init(&ctx, 2, 3);
    OCR_CHECK_OK(&ctx, ocr_charset_init(&ctx, &cs, "latin"));
    cc.margin = 0.25f;
    sc.plain_background = 1;
    sc.photo_path = "none";
    sc.font_path = "/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf";
    sc.min_text_px = 24; sc.max_text_px = 32; sc.max_rotation_deg = 0;
    if (ocr_synth_init(&ctx, &synth, &sc) != OCR_OK) {
        OCR_CHECK_MSG(0, "%s (fonts-dejavu-core is a build package)", ocr_ctx_last_error(&ctx));
        ocr_charset_free(&cs);
        ocr_ctx_free(&ctx);
        return;
    }
    /* the first words of 3 to 6 characters without repeated neighbours that the Latin set encodes */
    for (index = 0; n < WORDS && index < 50; index++) {
        ocr_sample s;
        int k;
        OCR_CHECK_OK(&ctx, ocr_synth_sample(&ctx, &synth, 11, index, 320, 96, &s));
        for (k = 0; k < s.n_polys && n < WORDS; k++) {
            ocr_point q[4];
            size_t len_bytes = strlen(s.polys[k].text);
            int len;
            if (s.polys[k].ignore || len_bytes > 6 || len_bytes < 3 || ocr_charset_encode(&ctx, &cs, s.polys[k].text, "w", lab + total, 32, &len) ||
                ocr_rec_frames_needed(lab + total, len) != len)
                continue;
            OCR_CHECK_OK(&ctx, ocr_rec_polygon_quad(&ctx, &s.polys[k], q));
            OCR_CHECK_OK(&ctx, ocr_rec_crop(&ctx, &s.image, q, &cc, NULL, 4 * len, &crops[n]));
            labels[n] = (char *)malloc(len_bytes + 1);
            memcpy(labels[n], s.polys[k].text, len_bytes + 1);
            tl[n] = len;
            il[n] = crops[n].width / 4;
            if (crops[n].width > W) W = crops[n].width;
            total += len;
            n++;
        }
        ocr_sample_free(&s);
    }
    ocr_synth_free(&synth);
    OCR_CHECK(n == WORDS);
    if (n < WORDS) {
        for (i = 0; i < n; i++) { ocr_image_free(&crops[i]); free(labels[i]); }
        ocr_charset_free(&cs);
        ocr_ctx_free(&ctx);
        return;
    }
    memcpy(cfg.channels, channels, sizeof channels);
    cfg.hidden = 32;
    cfg.layers = 1;
    OCR_CHECK_OK(&ctx, ocr_rec_init(&ctx, &m, &cfg, &cs));
    OCR_CHECK_OK(&ctx, ocr_optim_init(&ctx, &opt, &m.params, ocr_optim_adamw(0.9f, 0.999f, 1e-8f, 0.0f)));
    OCR_CHECK_OK(&ctx, ocr_tensor_alloc(&ctx, &x, "x", OCR_F32, OCR_DEVICE_CPU, ocr_shape4(WORDS, 3, 32, W)));
    for (i = 0; i < WORDS; i++) {
        ocr_tensor row = ocr_tensor_f32("row", ocr_shape3(3, 32, W), (float *)x.data + (size_t)i * 3 * 32 * W);
        OCR_CHECK_OK(&ctx, ocr_rec_crop_to_input(&ctx, &crops[i], &row));
    }
    OCR_CHECK_OK(&ctx, ocr_tensor_alloc(&ctx, &tg, "targets", OCR_I32, OCR_DEVICE_CPU, ocr_shape1(total)));
    memcpy(tg.data, lab, (size_t)total * sizeof(int32_t));
    OCR_CHECK_OK(&ctx, ocr_tensor_alloc(&ctx, &tlt, "target_lengths", OCR_I32, OCR_DEVICE_CPU, ocr_shape1(WORDS)));
    memcpy(tlt.data, tl, sizeof tl);
    OCR_CHECK_OK(&ctx, ocr_tensor_alloc(&ctx, &ilt, "input_lengths", OCR_I32, OCR_DEVICE_CPU, ocr_shape1(WORDS)));
    memcpy(ilt.data, il, sizeof il);
    OCR_CHECK_OK(&ctx, ocr_tensor_alloc(&ctx, &d_lp, "d_lp", OCR_F32, OCR_DEVICE_CPU, ocr_shape3(W / 4, WORDS, cs.n_classes)));
    for (step = 1; step <= MAX_STEPS && right < WORDS; step++) {
        OCR_CHECK_OK(&ctx, ocr_rec_forward(&ctx, &m, &x, &ilt, 1, &lp));
        OCR_CHECK_OK(&ctx, ocr_tensor_zero(&ctx, &d_lp));
        OCR_CHECK_OK(&ctx, ocr_loss_ctc(&ctx, NULL, &lp, &tg, &tlt, &ilt, &res, NULL, &d_lp));
        if (step == 1) loss0 = res.loss;
        ocr_params_zero_grad(&m.params);
        OCR_CHECK_OK(&ctx, ocr_rec_backward(&ctx, &m, &d_lp));
        OCR_CHECK_OK(&ctx, ocr_clip_grad_norm(&ctx, &m.params, 5.0f, NULL));
        OCR_CHECK_OK(&ctx, ocr_optim_step(&ctx, &opt, &m.params, 1e-2f));
        if (step % 25) continue;
        OCR_CHECK_OK(&ctx, ocr_rec_recognize(&ctx, &m, crops, WORDS, WORDS, 0, texts, NULL));
        for (i = 0, right = 0; i < WORDS; i++) {
            right += texts[i] && strcmp(texts[i], labels[i]) == 0;
            OCR_CHECK_MSG(step < MAX_STEPS || right == i + 1, "after %d steps '%s' reads '%s'", step, labels[i], texts[i] ? texts[i] : "(null)");
            OCR_FREE(texts[i]);
        }
    }
    printf("     CTC loss %.3f -> %.4f, %d of %d words read back after %d steps, %.1f s\n", loss0, res.loss, right, WORDS, step - 1,
           now_s() - t0);
    OCR_CHECK(right == WORDS);
    for (i = 0; i < WORDS; i++) { ocr_image_free(&crops[i]); free(labels[i]); }
    ocr_tensor_free(&x); ocr_tensor_free(&tg); ocr_tensor_free(&tlt); ocr_tensor_free(&ilt); ocr_tensor_free(&d_lp);
    ocr_optim_free(&opt);
    ocr_rec_free(&m);
    ocr_charset_free(&cs);
    ocr_ctx_free(&ctx);
}

/* ---------------------------------------------------------------- the programs */

/* The last line of text that starts with '{' (the programs' JSON line), or "" */
static const char *json_line(const char *text, size_t *len) {
    const char *p = text, *last = "";
    for (; *p; p += strcspn(p, "\n") + (p[strcspn(p, "\n")] ? 1 : 0))
        if (*p == '{') last = p;
    *len = strcspn(last, "\n");
    return last;
}

/* make_lmdb --format rec: a folder of crops listed in a ground-truth file becomes a recognition LMDB that python3-lmdb
   reads back byte for byte (labels plain UTF-8, images as stored) and ocr_dataset_open_lmdb reads as the same texts;
   texts the reader would read otherwise are refused naming the line. */
static void test_make_lmdb_rec(void) {
    static const char *const texts[3] = {"Hello, world", "\xED\x95\x9C\xEA\xB5\xAD", "{abc}"};
    ocr_ctx ctx;
    ocr_dataset ds;
    ocr_sample s;
    char dir[300], gt[400], out_dir[400], cmd[2048], *out, *err;
    FILE *f;
    int i, rc;
    ocr_ctx_init(&ctx, 1, 1);
    ocr_test_cli_ctx = &ctx;
    snprintf(dir, sizeof dir, "%s/crops", g_tmp);
    mkdir(dir, 0755);
    snprintf(gt, sizeof gt, "%s/gt.txt", dir);
    OCR_CHECK((f = fopen(gt, "w")) != NULL);
    if (!f) { ocr_ctx_free(&ctx); return; }
    for (i = 0; i < 3; i++) {
        char png[400];
        snprintf(png, sizeof png, "%s/w%d.png", dir, i);
        write_png(&ctx, png, 20 + 6 * i, 12, i);
        fprintf(f, "w%d.png\t%s\n", i, texts[i]);
    }
    fclose(f);
    snprintf(out_dir, sizeof out_dir, "%s/rec_lmdb", g_tmp);
    snprintf(cmd, sizeof cmd, "./examples/make_lmdb --format rec %s %s", gt, out_dir);
    rc = ocr_test_run(cmd, &out, &err);
    OCR_CHECK_MSG(rc == 0 && strstr(out, "wrote 3 samples"), "%s: exit %d\n%s%s", cmd, rc, out, err);
    free(out);
    free(err);
    /* python3-lmdb, independent of our reader: every key, its bytes against the crop files and the labels */
    snprintf(cmd, sizeof cmd,
             "/usr/bin/python3 -c 'import lmdb,sys\n"
             "e = lmdb.open(sys.argv[1], readonly=True, lock=False)\n"
             "t = e.begin()\n"
             "assert t.get(b\"num-samples\") == b\"3\", t.get(b\"num-samples\")\n"
             "for i in range(3):\n"
             "    assert t.get(b\"image-%%09d\" %% (i + 1)) == open(\"%%s/w%%d.png\" %% (sys.argv[2], i), \"rb\").read()\n"
             "    print(t.get(b\"label-%%09d\" %% (i + 1)).hex())\n"
             "assert t.stat()[\"entries\"] == 7\n' %s %s", out_dir, dir);
    rc = ocr_test_run(cmd, &out, &err);
    OCR_CHECK_MSG(rc == 0, "python3-lmdb read-back failed: %s%s", out, err);
    if (rc == 0) {
        const char *p = out;
        for (i = 0; i < 3; i++) {
            char hex[128];
            size_t k;
            for (k = 0; texts[i][k]; k++) snprintf(hex + 2 * k, 3, "%02x", (unsigned char)texts[i][k]);
            OCR_CHECK_MSG(strncmp(p, hex, strlen(hex)) == 0 && p[strlen(hex)] == '\n', "label %d: python3-lmdb read %.40s, want %s", i, p, hex);
            p = strchr(p, '\n');
            if (!p) break;
            p++;
        }
    }
    free(out);
    free(err);
    OCR_CHECK_OK(&ctx, ocr_dataset_open_lmdb(&ctx, &ds, out_dir));
    for (i = 0; i < 3 && ds.count == 3; i++) {
        OCR_CHECK_OK(&ctx, ocr_dataset_get(&ctx, &ds, i, 0, &s));
        OCR_CHECK(s.n_polys == 1 && !s.polys[0].ignore && strcmp(s.polys[0].text, texts[i]) == 0 && s.image.width == 20 + 6 * i);
        ocr_sample_free(&s);
    }
    ocr_dataset_close(&ds);
    /* refused, naming the line: texts the reader would take for a detection label or a don't-care */
    for (i = 0; i < 2; i++) {
        OCR_CHECK((f = fopen(gt, "w")) != NULL);
        if (!f) break;
        fprintf(f, "w0.png\tok\nw1.png\t%s\n", i == 0 ? "[1]" : "###");
        fclose(f);
        snprintf(cmd, sizeof cmd, "./examples/make_lmdb --format rec %s %s/refused%d", gt, g_tmp, i);
        ocr_test_expect_exit(cmd, 1, i == 0 ? "gt.txt:2 w1.png'): its text \"[1]\" would read back as a JSON detection label"
                                            : "would read back as a don't-care instance");
    }
    ocr_test_expect_exit("./examples/make_lmdb --root x a b c", 2, "--root goes with --format rec");
    ocr_test_expect_exit("./examples/make_lmdb --format rec a b c", 2, "give GT_FILE and OUT_DIR");
    ocr_ctx_free(&ctx);
}

static void test_programs(void) {
    static const char *const programs[] = {"train_rec", "eval_rec", "recognize", "repro_rec_empty"};
    static const char *const tiny = "--steps 4 --eval-every 2 --val-count 12 --heldout-count 0 --channels 8,8,8,8,8,8 --hidden 8 --log-every 2 "
                                    "--save-every 2 --threads 2";
    ocr_ctx ctx;
    char cmd[2048], run[300], lmdb[300];
    char *out, *err;
    const char *line;
    size_t len;
    double acc, cer;
    int i, rc;
    ocr_ctx_init(&ctx, 1, 1);
    ocr_test_cli_ctx = &ctx;
    snprintf(ocr_test_cli_dir, sizeof ocr_test_cli_dir, "%s", g_tmp);
    for (i = 0; i < 4; i++) {
        snprintf(cmd, sizeof cmd, "./examples/%s", programs[i]);
        if (access(cmd, X_OK) != 0) { OCR_CHECK_MSG(0, "%s is not built (./build.sh builds it)", cmd); ocr_ctx_free(&ctx); return; }
        snprintf(cmd, sizeof cmd, "./examples/%s --help", programs[i]);
        ocr_test_expect_exit(cmd, 0, NULL);
        snprintf(cmd, sizeof cmd, "./examples/%s --bogus", programs[i]);
        ocr_test_expect_exit(cmd, 2, "unknown flag '--bogus'");
    }
    ocr_test_expect_exit("./examples/train_rec --max-width 30", 2, "--max-width a multiple of 4");
    ocr_test_expect_exit("./examples/train_rec --channels 8,8", 2, "six positive integers");
    ocr_test_expect_exit("./examples/train_rec --data nothing:x", 2, "--data and --val must be");
    ocr_test_expect_exit("./examples/eval_rec --data synth:val", 2, "--model is required");
    ocr_test_expect_exit("./examples/recognize --model x.safetensors", 2, "at least one crop");
    /* the CPU build has no CUDA backend: --device cuda is a usage error naming the CUDA build, before any work */
    ocr_test_expect_exit("./examples/train_rec --device cuda --out /nonexistent/run", 2, "this CPU build has no CUDA backend");
    ocr_test_expect_exit("./examples/eval_rec --device cuda --model x.safetensors", 2, "this CPU build has no CUDA backend");
    ocr_test_expect_exit("./examples/recognize --device cuda --model x.safetensors a.png", 2, "this CPU build has no CUDA backend");
    ocr_test_expect_exit("./examples/recognize --device gpu --model x.safetensors a.png", 2, "--device must be cpu or cuda");
    /* labels outside the charset stop train_rec before any training, naming the LMDB key and the character */
    snprintf(lmdb, sizeof lmdb, "%s/lmdb_programs", g_tmp);
    write_recognition_lmdb(&ctx, lmdb);
    snprintf(run, sizeof run, "%s/run_lmdb", g_tmp);
    snprintf(cmd, sizeof cmd, "./examples/train_rec %s --data lmdb:%s --val lmdb:%s --out %s", tiny, lmdb, lmdb, run);
    ocr_test_expect_exit(cmd, 1, "image-000000002");
    ocr_test_expect_exit(cmd, 1, "U+D55C");
    /* a tiny synthetic run: the final JSON line; eval_rec on its last weights gives the same validation figures */
    snprintf(run, sizeof run, "%s/run", g_tmp);
    snprintf(cmd, sizeof cmd, "./examples/train_rec %s --out %s", tiny, run);
    rc = ocr_test_run(cmd, &out, &err);
    line = json_line(out, &len);
    OCR_CHECK_MSG(rc == 0 && ocr_test_json_number(line, len, "steps") == 4 && ocr_test_json_number(line, len, "words") == 12,
                  "'%s' exited %d: %s\n%s", cmd, rc, out, err);
    acc = ocr_test_json_number(line, len, "accuracy");
    cer = ocr_test_json_number(line, len, "cer");
    free(out); free(err);
    {
        /* the validation sheet of the last validation: its 12 words, a row each */
        ocr_image sheet;
        char sheet_path[400];
        snprintf(sheet_path, sizeof sheet_path, "%s/overlays/val_step_000004.png", run);
        OCR_CHECK_OK(&ctx, ocr_image_load(&ctx, sheet_path, &sheet));
        OCR_CHECK_MSG(sheet.height == 12 * 58, "the sheet is %dx%d", sheet.width, sheet.height);
        ocr_image_free(&sheet);
    }
    ocr_test_expect_exit(cmd, 2, "already holds a run");
    snprintf(cmd, sizeof cmd, "./examples/eval_rec --model %s/last.safetensors --data synth:val --json --threads 2", run);
    rc = ocr_test_run(cmd, &out, &err);
    line = json_line(out, &len);
    OCR_CHECK_MSG(rc == 0 && ocr_test_json_number(line, len, "words") == 12 && ocr_test_json_number(line, len, "accuracy") == acc &&
                  fabs(ocr_test_json_number(line, len, "cer") - cer) < 1e-4, "'%s' exited %d (train_rec: accuracy %g, CER %g): %s\n%s", cmd, rc, acc,
                  cer, out, err);
    free(out); free(err);
    {
        /* a run trained with --words: eval_rec validates on the list's words (as train_rec did), and refuses a changed list */
        char words[300];
        FILE *f;
        snprintf(words, sizeof words, "%s/words.txt", g_tmp);
        f = fopen(words, "w");
        OCR_CHECK_MSG(f != NULL, "cannot write %s", words);
        if (!f) { ocr_ctx_free(&ctx); return; }
        fputs("Quokkaz\nZephyrq\nJujubex\n", f);
        fclose(f);
        snprintf(run, sizeof run, "%s/run_words", g_tmp);
        snprintf(cmd, sizeof cmd, "./examples/train_rec %s --steps 2 --words %s --words-prob 1 --out %s", tiny, words, run);
        rc = ocr_test_run(cmd, &out, &err);
        line = json_line(out, &len);
        OCR_CHECK_MSG(rc == 0, "'%s' exited %d: %s\n%s", cmd, rc, out, err);
        cer = ocr_test_json_number(line, len, "cer");
        free(out); free(err);
        snprintf(cmd, sizeof cmd, "./examples/eval_rec --model %s/last.safetensors --data synth:val --errors 12 --threads 2", run);
        rc = ocr_test_run(cmd, &out, &err);
        line = json_line(out, &len);
        OCR_CHECK_MSG(rc == 0 && fabs(ocr_test_json_number(line, len, "cer") - cer) < 1e-4 &&
                      (strstr(out, "'Quokkaz'") || strstr(out, "'Zephyrq'") || strstr(out, "'Jujubex'")),
                      "'%s' exited %d (train_rec: CER %g): %s\n%s", cmd, rc, cer, out, err);
        free(out); free(err);
        f = fopen(words, "a");
        if (f) { fputs("Xylemq\n", f); fclose(f); }
        ocr_test_expect_exit(cmd, 1, "not the one the run trained with");
    }
    /* recognize: one "path<TAB>text" line per crop, in order */
    snprintf(cmd, sizeof cmd, "./examples/recognize --model %s/best.safetensors %s/c0.png %s/c2.png", run, g_tmp, g_tmp);
    rc = ocr_test_run(cmd, &out, &err);
    {
        char first[300];
        snprintf(first, sizeof first, "%s/c0.png\t", g_tmp);
        OCR_CHECK_MSG(rc == 0 && strncmp(out, first, strlen(first)) == 0 && strstr(out, "/c2.png\t"), "'%s' exited %d: %s\n%s", cmd, rc, out, err);
    }
    free(out); free(err);
    ocr_ctx_free(&ctx);
}

int main(int argc, char **argv) {
    char cmd[300];
    ocr_test_init(argc, argv);
    if (!mkdtemp(g_tmp)) { fprintf(stderr, "test_rec: mkdtemp failed\n"); return 1; }
    OCR_TEST_RUN(test_charset_latin);
    OCR_TEST_RUN(test_charset_keyfile_hangul);
    OCR_TEST_RUN(test_utf8);
    OCR_TEST_RUN(test_model_parity_pytorch);
    OCR_TEST_RUN(test_batch_independence);
    OCR_TEST_RUN(test_checkpoint_pytorch_strict);
    OCR_TEST_RUN(test_model_refusals);
    OCR_TEST_RUN(test_crop_geometry);
    OCR_TEST_RUN(test_folder_dataset);
    OCR_TEST_RUN(test_lmdb_recognition_set);
    OCR_TEST_RUN(test_eval_metrics);
    OCR_TEST_RUN(test_overfit_words);
    OCR_TEST_RUN(test_make_lmdb_rec);
    OCR_TEST_RUN_PROGRAMS(test_programs);
    snprintf(cmd, sizeof cmd, "rm -rf %s", g_tmp);
    if (system(cmd) != 0) fprintf(stderr, "test_rec: could not remove %s\n", g_tmp);
    return ocr_test_finish();
}
