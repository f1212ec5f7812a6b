/* repro_rec_empty - a recognizer that learns to predict empty strings.

   The failure: a pipeline trained a recognizer on a Korean LMDB with a charset that had no Hangul. Its label encoder
   dropped every character it did not know, so each target became empty; CTC happily fits an empty target by
   predicting the blank at every frame, the loss fell to ~0, and the model read every crop as "". Nothing failed.
   ocr-c's encoder (ocr_rec.h: ocr_charset_encode, ocr_rec_check_labels) refuses such a label, naming the sample,
   the character (U+XXXX and its UTF-8 bytes) and the charset, before any training; and the decode watch
   (ocr_rec_decode_watch, which train_rec runs on every validation) flags a model whose predictions are empty.

   This program, in DIR (default a temporary folder, removed at the end):
     1. writes a recognition LMDB (clovaai / PARSeq layout) of word crops with Korean labels;
     2. encodes its labels against the Latin charset the naive way (unknown characters dropped) and shows the empty
        targets; then with ocr-c, which refuses them with a message naming the key and the character; and with a
        charset that has the Hangul syllables (a key file), which accepts them;
     3. trains a small CRNN on those crops with the naive empty targets and validates with the decode watch: the CTC
        loss goes to ~0, every prediction is empty, and the watch warns.

       repro_rec_empty
       repro_rec_empty --steps 60 --eval-every 20 --dir /tmp/rec_empty

   Host-only by nature (no --device): the recognizer runs on the CPU in this version.
   Exit status: 0 when ocr-c refused the labels naming the key and the character and the watch caught the collapsed
   model, 1 otherwise, 2 bad flags. */
#define OCR_IMPLEMENTATION
#include "ocr_tensor.h"
#include "ocr_nn.h"
#include "ocr_loss.h"
#include "ocr_data.h"
#include "ocr_synth.h"
#include "ocr_rec.h"
#include "ocr_example.h"
#include <lmdb.h>
#include <sys/stat.h>

enum { CROPS = 12 };

/* Korean words of the labels (UTF-8) */
static const char *const kLabels[CROPS] = {
    "\xED\x95\x9C\xEA\xB5\xAD", "\xEC\x84\x9C\xEC\x9A\xB8", "\xEA\xB0\x95", "\xEB\xB0\x94\xEB\x8B\xA4", "\xEC\x82\xB0",
    "\xED\x95\x99\xEA\xB5\x90", "\xEC\x9D\x8C\xEC\x8B\x9D", "\xEC\xB9\x9C\xEA\xB5\xAC", "\xEC\x8B\x9C\xEA\xB0\x84",
    "\xEA\xB8\xB8", "\xEB\xAC\xBC", "\xEB\xB6\x88"};

static void die(ocr_ctx *ctx, const char *what) {
    fprintf(stderr, "repro_rec_empty: %s: %s\n", what, ocr_ctx_last_error(ctx));
    exit(1);
}

/* The naive encoder: characters the charset lacks are dropped, so a label of only such characters becomes empty. */
static int naive_encode(const ocr_charset *cs, const char *text, int32_t *labels) {
    size_t i = 0, n = strlen(text);
    int k = 0;
    int32_t cp;
    while (i < n && ocr_utf8_next(text, n, &i, &cp)) {
        int c = ocr_charset_class(cs, cp);
        if (c) labels[k++] = c;
    }
    return k;
}

/* Word crops rendered with plain backgrounds (the images of the "Korean" set; what they show does not matter to the
   failure, which is in the labels). */
static int render_crops(ocr_ctx *ctx, ocr_image *crops, int n) {
    ocr_synth synth;
    ocr_synth_config sc = ocr_synth_defaults();
    ocr_rec_crop_config cc = ocr_rec_crop_defaults();
    int got = 0, index, k, rc;
    sc.plain_background = 1;
    sc.photo_path = "none";
    sc.font_path = "/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf";
    sc.min_text_px = 24; sc.max_text_px = 32; sc.max_rotation_deg = 0;
    if ((rc = ocr_synth_init(ctx, &synth, &sc))) return rc;
    for (index = 0; got < n && index < 100; index++) {
        ocr_sample s;
        if ((rc = ocr_synth_sample(ctx, &synth, 5, index, 320, 96, &s))) break;
        for (k = 0; k < s.n_polys && got < n; k++) {
            ocr_point q[4];
            if (s.polys[k].ignore || ocr_rec_polygon_quad(ctx, &s.polys[k], q) || ocr_rec_crop(ctx, &s.image, q, &cc, NULL, 16, &crops[got]))
                continue;
            got++;
        }
        ocr_sample_free(&s);
    }
    ocr_synth_free(&synth);
    if (!rc && got < n) rc = ocr_error(ctx, OCR_ENOTFOUND, "rendered only %d of %d crops", got, n);
    return rc;
}

static int write_lmdb(ocr_ctx *ctx, const char *dir, const ocr_image *crops) {
    MDB_env *env;
    MDB_txn *txn;
    MDB_dbi dbi;
    MDB_val k, v;
    char key[32], count[16];
    int i, mrc;
    mkdir(dir, 0755);
    if ((mrc = mdb_env_create(&env)) || (mrc = mdb_env_set_mapsize(env, (size_t)1 << 24)) || (mrc = mdb_env_open(env, dir, 0, 0644)) ||
        (mrc = mdb_txn_begin(env, NULL, 0, &txn)) || (mrc = mdb_dbi_open(txn, NULL, 0, &dbi)))
        return ocr_error(ctx, OCR_EIO, "LMDB %s: %s", dir, mdb_strerror(mrc));
    for (i = 0; i < CROPS; i++) {
        unsigned char *png;
        size_t size;
        int rc;
        if ((rc = ocr_image_encode_png(ctx, &crops[i], &png, &size))) { mdb_txn_abort(txn); mdb_env_close(env); return rc; }
        snprintf(key, sizeof key, "image-%09d", i + 1);
        k.mv_data = key; k.mv_size = strlen(key); v.mv_data = png; v.mv_size = size;
        mrc = mdb_put(txn, dbi, &k, &v, 0);
        OCR_FREE(png);
        snprintf(key, sizeof key, "label-%09d", i + 1);
        k.mv_data = key; k.mv_size = strlen(key); v.mv_data = (void *)kLabels[i]; v.mv_size = strlen(kLabels[i]);
        if (mrc || (mrc = mdb_put(txn, dbi, &k, &v, 0))) break;
    }
    snprintf(count, sizeof count, "%d", CROPS);
    k.mv_data = (void *)"num-samples"; k.mv_size = 11; v.mv_data = count; v.mv_size = strlen(count);
    if (!mrc) mrc = mdb_put(txn, dbi, &k, &v, 0);
    if (!mrc) mrc = mdb_txn_commit(txn);
    else mdb_txn_abort(txn);
    mdb_env_close(env);
    return mrc ? ocr_error(ctx, OCR_EIO, "LMDB %s: %s", dir, mdb_strerror(mrc)) : OCR_OK;
}

int main(int argc, char **argv) {
    const char *dir = NULL;
    int steps = 60, eval_every = 20, threads = 0, i, step, refused = 0, warned = 0, accepted = 0, empty_targets = 0;
    ocr_ex_flag flags[] = {
        {"--steps", OCR_EX_INT, &steps, "training steps on the naive (empty) targets"},
        {"--eval-every", OCR_EX_INT, &eval_every, "validate (with the decode watch) every N steps"},
        {"--dir", OCR_EX_STRING, &dir, "working folder (default: a new temporary one)"},
        {"--threads", OCR_EX_INT, &threads, "compute threads (0: all cores)"},
    };
    char tmp[] = "/tmp/repro_rec_empty_XXXXXX", path[4096], keys[4096], *own_dir = NULL;
    ocr_ctx ctx;
    ocr_charset latin, hangul;
    ocr_dataset ds;
    ocr_image crops[CROPS];
    ocr_rec_model m;
    ocr_rec_config cfg = ocr_rec_config_default();
    ocr_optimizer opt;
    ocr_rec_decode_watch watch = ocr_rec_decode_watch_default();
    ocr_tensor x, tg, tl, il, d_lp, lp;
    double loss0 = 0, loss = 0, empty_share = 0;
    int W = 0;
    static const int channels[OCR_REC_BLOCKS] = {8, 16, 16, 16, 32, 32};

    static const char synopsis[] = "[options]\n\nHost-only by nature (no --device): the recognizer's LSTM and CTC run on the CPU in "
                                   "this version.";
    if (ocr_ex_parse(argc, argv, synopsis, flags, (int)(sizeof flags / sizeof flags[0])) != 0) {
        fprintf(stderr, "repro_rec_empty: unexpected argument '%s' (see --help)\n", argv[1]);
        return 2;
    }
    if (steps < 1 || eval_every < 1) { fprintf(stderr, "repro_rec_empty: --steps and --eval-every must be >= 1\n"); return 2; }
    if (!dir && !(dir = own_dir = mkdtemp(tmp))) { fprintf(stderr, "repro_rec_empty: mkdtemp failed\n"); return 1; }
    mkdir(dir, 0755);
    if (ocr_ctx_init(&ctx, threads, 7) != OCR_OK) die(&ctx, "starting");
    if (ocr_charset_init(&ctx, &latin, "latin")) die(&ctx, "charset");

    /* 1. the data: crops with Korean labels, in a recognition LMDB */
    memset(crops, 0, sizeof crops);
    if (render_crops(&ctx, crops, CROPS)) die(&ctx, "rendering the crops (fonts-dejavu-core)");
    snprintf(path, sizeof path, "%s/korean_lmdb", dir);
    if (write_lmdb(&ctx, path, crops)) die(&ctx, "writing the LMDB");
    printf("1. %s: %d word crops with Korean labels (%s, %s, ...)\n", path, CROPS, kLabels[0], kLabels[1]);

    /* 2. the labels against the Latin charset: the naive encoder, then ocr-c's */
    printf("\n2. the labels encoded against the charset 'latin' (%d characters, no Hangul)\n", latin.n_classes - 1);
    for (i = 0; i < CROPS; i++) {
        int32_t lab[32];
        empty_targets += naive_encode(&latin, kLabels[i], lab) == 0;
    }
    printf("   naive (unknown characters dropped): %d of %d targets are empty, and training goes on\n", empty_targets, CROPS);
    if (ocr_dataset_open_lmdb(&ctx, &ds, path)) die(&ctx, "opening the LMDB");
    if (ocr_rec_check_labels(&ctx, &ds, &latin, 256, 0, NULL, NULL, NULL, 0) == OCR_ENOTFOUND) {
        const char *msg = ocr_ctx_last_error(&ctx);
        refused = strstr(msg, "image-000000001") && strstr(msg, "U+D55C") && strstr(msg, "ED 95 9C") && strstr(msg, "'latin'");
        printf("   ocr-c refuses before training:\n     %s\n", msg);
    } else {
        printf("   ocr-c did NOT refuse the labels\n");
    }
    /* the right charset: a key file with the Hangul syllables of the labels */
    {
        FILE *f;
        snprintf(keys, sizeof keys, "%s/korean_keys.txt", dir);
        if (!(f = fopen(keys, "wb"))) { fprintf(stderr, "repro_rec_empty: cannot write %s\n", keys); return 1; }
        {
            int32_t seen[64];
            int ns = 0, k;
            for (i = 0; i < CROPS; i++) {
                size_t at = 0, n = strlen(kLabels[i]);
                int32_t cp;
                while (at < n && ocr_utf8_next(kLabels[i], n, &at, &cp)) {
                    char u[5] = {0};
                    for (k = 0; k < ns && seen[k] != cp; k++) {}
                    if (k < ns || ns == 64) continue; /* each syllable once: a key file refuses repeats */
                    seen[ns++] = cp;
                    u[ocr_utf8_put(cp, u)] = 0;
                    fprintf(f, "%s\n", u);
                }
            }
        }
        fclose(f);
        if (ocr_charset_init(&ctx, &hangul, keys)) die(&ctx, "the Hangul key file");
        accepted = ocr_rec_check_labels(&ctx, &ds, &hangul, 256, 0, NULL, NULL, NULL, 0) == OCR_OK;
        printf("   with the key file %s (%d Hangul syllables) every label encodes: %s\n", keys, hangul.n_classes - 1, accepted ? "yes" : "NO");
        ocr_charset_free(&hangul);
    }
    ocr_dataset_close(&ds);

    /* 3. training on the naive empty targets: the loss looks fine, the model reads nothing; the decode watch says so */
    printf("\n3. a CRNN trained on the naive targets (%d empty of %d), validated with the decode watch every %d steps\n", empty_targets, CROPS,
           eval_every);
    for (i = 0; i < CROPS; i++) if (crops[i].width > W) W = crops[i].width;
    memcpy(cfg.channels, channels, sizeof channels);
    cfg.hidden = 32;
    cfg.layers = 1;
    if (ocr_rec_init(&ctx, &m, &cfg, &latin) || ocr_optim_init(&ctx, &opt, &m.params, ocr_optim_adamw(0.9f, 0.999f, 1e-8f, 0.0f)) ||
        ocr_tensor_alloc(&ctx, &x, "x", OCR_F32, OCR_DEVICE_CPU, ocr_shape4(CROPS, 3, 32, W)) ||
        ocr_tensor_alloc(&ctx, &tg, "targets", OCR_I32, OCR_DEVICE_CPU, ocr_shape1(0)) ||
        ocr_tensor_alloc(&ctx, &tl, "target_lengths", OCR_I32, OCR_DEVICE_CPU, ocr_shape1(CROPS)) ||
        ocr_tensor_alloc(&ctx, &il, "input_lengths", OCR_I32, OCR_DEVICE_CPU, ocr_shape1(CROPS)) ||
        ocr_tensor_alloc(&ctx, &d_lp, "d_log_probs", OCR_F32, OCR_DEVICE_CPU, ocr_shape3(W / 4, CROPS, latin.n_classes)))
        die(&ctx, "the model");
    for (i = 0; i < CROPS; i++) {
        ocr_tensor row = ocr_tensor_f32("row", ocr_shape3(3, 32, W), (float *)x.data + (size_t)i * 3 * 32 * W);
        if (ocr_rec_crop_to_input(&ctx, &crops[i], &row)) die(&ctx, "batch");
        ((int32_t *)tl.data)[i] = 0; /* what the naive encoder made of every label */
        ((int32_t *)il.data)[i] = crops[i].width / 4;
    }
    for (step = 1; step <= steps; step++) {
        ocr_ctc_result res;
        if (ocr_rec_forward(&ctx, &m, &x, NULL, 1, &lp) || ocr_tensor_zero(&ctx, &d_lp) ||
            ocr_loss_ctc(&ctx, NULL, &lp, &tg, &tl, &il, &res, NULL, &d_lp))
            die(&ctx, "training");
        ocr_params_zero_grad(&m.params);
        if (ocr_rec_backward(&ctx, &m, &d_lp) || ocr_clip_grad_norm(&ctx, &m.params, 5.0f, NULL) || ocr_optim_step(&ctx, &opt, &m.params, 3e-3f))
            die(&ctx, "training");
        if (step == 1) loss0 = res.loss;
        loss = res.loss;
        if (step % eval_every == 0 || step == steps) {
            char *texts[CROPS];
            ocr_rec_eval e;
            int fire;
            if (ocr_rec_recognize(&ctx, &m, crops, CROPS, CROPS, 0, texts, NULL)) die(&ctx, "validation");
            ocr_rec_eval_init(&e);
            for (i = 0; i < CROPS; i++) { ocr_rec_eval_add(&e, kLabels[i], texts[i]); OCR_FREE(texts[i]); }
            empty_share = ocr_rec_eval_finish(&e).empty_share;
            fire = ocr_rec_decode_watch_update(&watch, empty_share);
            warned |= fire;
            printf("   step %d: CTC loss %.4f (step 1: %.4f), empty predictions %.0f%%%s\n", step, loss, loss0, 100.0 * empty_share,
                   fire ? " -> decode watch: WARNING, the model predicts only the blank" : "");
        }
    }
    printf("\nverdict: %s\n", refused && warned && accepted ? "ocr-c refuses labels the charset cannot encode (naming the LMDB key and the "
                                                                  "character) and its decode watch catches a model collapsed to the blank"
                                                              : "NOT reproduced as expected");
    for (i = 0; i < CROPS; i++) ocr_image_free(&crops[i]);
    ocr_tensor_free(&x); ocr_tensor_free(&tg); ocr_tensor_free(&tl); ocr_tensor_free(&il); ocr_tensor_free(&d_lp);
    ocr_optim_free(&opt);
    ocr_rec_free(&m);
    ocr_charset_free(&latin);
    ocr_ctx_free(&ctx);
    if (own_dir) { /* the temporary folder goes; a --dir stays for inspection */
        static const char *const files[] = {"korean_lmdb/data.mdb", "korean_lmdb/lock.mdb", "korean_lmdb", "korean_keys.txt"};
        for (i = 0; i < 4; i++) {
            snprintf(path, sizeof path, "%s/%s", own_dir, files[i]);
            if (remove(path) != 0) fprintf(stderr, "repro_rec_empty: could not remove %s\n", path);
        }
        rmdir(own_dir);
    }
    (void)loss;
    return refused && warned && accepted ? 0 : 1;
}
