/* eval_rec - word accuracy, case-insensitive accuracy, character error rate, 1-NED and accuracy by label length of a
   recognizer (ocr_rec.h) on a set of words, with the time per crop.

       eval_rec --model runs/rec/best.safetensors                          the held-out synthetic words train_rec reports
       eval_rec --model best.safetensors --data lmdb:data/IIIT5K_lmdb      a recognition LMDB (clovaai / PARSeq layout)
       eval_rec --model best.safetensors --data folder:crops/gt.txt        crops listed as path<TAB>text
       eval_rec --model best.safetensors --data icdar:data/val --errors 20 the care words of detection ground truth

   --data synth:heldout and synth:val are the two validation sets of train_rec (the held-out fonts and photographs, and
   other scenes of the training ones), rendered with train_rec's settings as the checkpoint records them (seed, scene
   size, text sizes, lines, word list, crop width), so their figures are train_rec's. A label with a character outside the
   model's charset is an error naming the sample and the character, unless --skip-unknown leaves such words out (and
   counts them). The last line on stdout is one JSON object. Exit status: 0, 1 on an error, 2 on bad flags. */
#define OCR_IMPLEMENTATION
#include "ocr_tensor.h"
#include "ocr_nn.h"
#include "ocr_loss.h"
#include "ocr_data.h"
#include "ocr_synth.h"
#include "ocr_rec.h"
#include "ocr_example.h"
#include <time.h>

static void die(ocr_ctx *ctx, const char *what) {
    fprintf(stderr, "eval_rec: %s: %s\n", what, ocr_ctx_last_error(ctx));
    exit(1);
}

/* train_rec's setting from the checkpoint (train.<key>), else its default */
static int train_setting(const ocr_safetensors *st, const char *key, int def) {
    const char *v = ocr_safetensors_meta(st, key);
    return v ? atoi(v) : def;
}

int main(int argc, char **argv) {
    const char *model_path = NULL, *data = "synth:heldout", *device = "cpu";
    int count = 0, batch = 64, beam = 0, threads = 0, skip_unknown = 0, errors = 0, json_only = 0, i, rc;
    ocr_ex_flag flags[] = {
        {"--model", OCR_EX_STRING, &model_path, "the recognizer checkpoint (train_rec's best.safetensors or last.safetensors)"},
        {"--data", OCR_EX_STRING, &data, "synth:heldout, synth:val, lmdb:PATH, folder:GT_FILE[,IMAGE_ROOT] or icdar:DIR"},
        {"--count", OCR_EX_INT, &count, "words to evaluate (0: synth sets as many as train_rec validated on, datasets all)"},
        {"--batch", OCR_EX_INT, &batch, "crops per forward (sorted by width)"},
        {"--beam", OCR_EX_INT, &beam, "CTC prefix beam width (0 or 1: best path)"},
        {"--skip-unknown", OCR_EX_BOOL, &skip_unknown, "leave out (and count) words with characters outside the model's charset"},
        {"--errors", OCR_EX_INT, &errors, "print the first N misread words (id, label, prediction)"},
        {"--json", OCR_EX_BOOL, &json_only, "print only the JSON line"},
        {"--threads", OCR_EX_INT, &threads, "compute threads (0: all cores)"},
        {"--device", OCR_EX_STRING, &device, "cpu or cuda (the CUDA build, build/cuda/eval_rec)"},
    };
    ocr_ctx ctx;
    ocr_rec_model m;
    ocr_safetensors st;
    ocr_dataset ds;
    ocr_rec_word_set set;
    ocr_rec_crop_config cc = ocr_rec_crop_defaults();
    ocr_synth synth;
    ocr_rec_eval e;
    ocr_rec_eval_result r;
    char **texts;
    double t0, seconds;
    int shown = 0, synth_set = 0;

    if (ocr_ex_parse(argc, argv, "--model FILE [options]", flags, (int)(sizeof flags / sizeof flags[0])) != 0) {
        fprintf(stderr, "eval_rec: unexpected argument '%s' (see --help)\n", argv[1]);
        return 2;
    }
    if (!model_path || count < 0 || batch < 1 || beam < 0 || errors < 0) {
        fprintf(stderr, "eval_rec: --model is required; --count, --beam, --errors >= 0, --batch >= 1 (see --help)\n");
        return 2;
    }
    synth_set = strcmp(data, "synth:heldout") == 0 || strcmp(data, "synth:val") == 0;
    if (!synth_set && !ocr_ex_dataset_spec_ok(data) && !(strncmp(data, "folder:", 7) == 0 && data[7] && data[7] != ',')) {
        fprintf(stderr, "eval_rec: --data must be synth:heldout, synth:val, lmdb:PATH, folder:GT_FILE[,IMAGE_ROOT] or icdar:DIR\n");
        return 2;
    }
    if (ocr_ctx_init(&ctx, threads, 1) != OCR_OK) die(&ctx, "starting");
    if ((i = ocr_ex_set_device(&ctx, "eval_rec", device)) != 0) return i;
    if (ocr_rec_init_from_file(&ctx, &m, model_path)) die(&ctx, "--model");
    if (ocr_safetensors_open(&ctx, &st, model_path)) die(&ctx, "--model");
    memset(&set, 0, sizeof set);
    memset(&synth, 0, sizeof synth);
    cc.height = m.cfg.height;
    cc.max_width = train_setting(&st, "train.max_width", cc.max_width);
    if (synth_set) {
        /* train_rec's validation sets, with its settings as the checkpoint records them */
        int heldout = strcmp(data, "synth:heldout") == 0, seed = train_setting(&st, "train.seed", 1), size = train_setting(&st, "train.scene_size", 384);
        ocr_synth_config c = ocr_synth_defaults();
        const char *photos = ocr_safetensors_meta(&st, "train.photos"), *fonts = ocr_safetensors_meta(&st, "train.fonts");
        const char *lines = ocr_safetensors_meta(&st, "train.synth_lines");
        const char *words = ocr_safetensors_meta(&st, "train.words"), *words_prob = ocr_safetensors_meta(&st, "train.words_prob");
        c.split = heldout ? OCR_SYNTH_HELDOUT : OCR_SYNTH_TRAIN;
        c.font_path = !heldout && fonts && fonts[0] ? fonts : NULL;
        c.photo_path = photos && strcmp(photos, "none") == 0 ? "none" : !heldout && photos && photos[0] ? photos : NULL;
        c.lines_per_mpix = lines ? (float)atof(lines) : 300.0f;
        c.min_text_px = (float)train_setting(&st, "train.min_text_px", 14);
        c.max_text_px = (float)train_setting(&st, "train.max_text_px", 48);
        c.occlusion_prob = 0.0f;
        c.words_path = words && words[0] ? words : NULL; /* a run trained with --words validated on its list's words */
        c.words_prob = words_prob ? (float)atof(words_prob) : 0.5f;
        if (!count) count = train_setting(&st, heldout ? "train.heldout_count" : "train.val_count", 500);
        if (count < 0) count = train_setting(&st, "train.val_count", 500);
        if (ocr_synth_init(&ctx, &synth, &c)) die(&ctx, "synthetic words (the fonts, photographs and word list the checkpoint names)");
        if (c.words_path) {
            const char *recorded = ocr_safetensors_meta(&st, "synth.words"), *now = ocr_synth_words_sha256(&synth);
            if (!recorded || !now || strncmp(recorded, now, 64) != 0) {
                fprintf(stderr, "eval_rec: the word list %s (train.words in %s) is not the one the run trained with (synth.words): "
                                "its synthetic words would differ; restore it\n", c.words_path, model_path);
                return 1;
            }
        }
        if (ocr_dataset_open_synth(&ctx, &ds, &synth, (uint64_t)seed * 7919u + (heldout ? 2000003u : 1000003u), 1000000, size, size))
            die(&ctx, "synthetic words");
        skip_unknown = 1; /* the renderer draws accents, Greek and Cyrillic on purpose */
    } else if (strncmp(data, "folder:", 7) == 0) {
        char gt[4096];
        const char *comma = strchr(data + 7, ',');
        snprintf(gt, sizeof gt, "%.*s", comma ? (int)(comma - data - 7) : (int)strlen(data + 7), data + 7);
        if (ocr_rec_dataset_open_folder(&ctx, &ds, gt, comma ? comma + 1 : NULL)) die(&ctx, "--data");
    } else if (ocr_ex_open_dataset(&ctx, data, OCR_GT_POLYGON, &ds)) {
        die(&ctx, "--data");
    }
    for (i = 0; i < ds.count && (!count || set.n < count); i++) {
        ocr_sample s;
        if (ocr_dataset_get(&ctx, &ds, i, 0, &s)) die(&ctx, "reading --data");
        rc = ocr_rec_word_set_add(&ctx, &set, &s, &m.charset, &cc, skip_unknown, count);
        ocr_sample_free(&s);
        if (rc) {
            fprintf(stderr, "eval_rec: %s\n(--skip-unknown leaves such words out)\n", ocr_ctx_last_error(&ctx));
            return 1;
        }
    }
    ocr_dataset_close(&ds);
    ocr_synth_free(&synth);
    if (!set.n) { fprintf(stderr, "eval_rec: %s holds no word the model's charset encodes\n", data); return 1; }

    if (!(texts = (char **)calloc((size_t)set.n, sizeof(char *)))) { fprintf(stderr, "eval_rec: out of memory\n"); return 1; }
    t0 = ocr_monotonic_seconds();
    if (ocr_rec_recognize(&ctx, &m, set.crops, set.n, batch, beam, texts, NULL)) die(&ctx, "recognition");
    seconds = ocr_monotonic_seconds() - t0;
    ocr_rec_eval_init(&e);
    for (i = 0; i < set.n; i++) {
        ocr_rec_eval_add(&e, set.labels[i], texts[i]);
        if (shown < errors && strcmp(set.labels[i], texts[i]) != 0) {
            printf("  %s: '%s' read as '%s'\n", set.ids[i], set.labels[i], texts[i]);
            shown++;
        }
    }
    r = ocr_rec_eval_finish(&e);
    if (!json_only) {
        printf("%s: %lld words, accuracy %.4f, case-insensitive %.4f, CER %.4f, 1-NED %.4f, empty predictions %.4f; %.2f ms per crop on %d "
               "threads (batches of %d, %s)\n", data, (long long)e.words, r.accuracy, r.accuracy_nocase, r.cer, r.one_minus_ned, r.empty_share,
               1000.0 * seconds / set.n, ctx.n_threads, batch, beam > 1 ? "beam search" : "best path");
        if (set.skipped || set.too_long)
            printf("left out: %lld words with characters outside the charset, %lld too long for a %d px crop\n", (long long)set.skipped,
                   (long long)set.too_long, cc.max_width);
        printf("accuracy by label length:");
        for (i = 1; i <= OCR_REC_LEN_BINS; i++)
            if (e.by_len_words[i])
                printf(" %d%s: %.3f (%lld)", i, i == OCR_REC_LEN_BINS ? "+" : "", (double)e.by_len_correct[i] / (double)e.by_len_words[i],
                       (long long)e.by_len_words[i]);
        printf("\n");
    }
    printf("{\"data\":\"%s\",\"words\":%lld,\"accuracy\":%.4f,\"accuracy_nocase\":%.4f,\"cer\":%.4f,\"one_minus_ned\":%.4f,\"empty_share\":%.4f,"
           "\"left_out\":%lld,\"too_long\":%lld,\"ms_per_crop\":%.3f,\"threads\":%d,\"by_length\":{", data, (long long)e.words, r.accuracy,
           r.accuracy_nocase, r.cer, r.one_minus_ned, r.empty_share, (long long)set.skipped, (long long)set.too_long, 1000.0 * seconds / set.n,
           ctx.n_threads);
    for (i = 1, shown = 0; i <= OCR_REC_LEN_BINS; i++)
        if (e.by_len_words[i])
            printf("%s\"%d%s\":[%lld,%lld]", shown++ ? "," : "", i, i == OCR_REC_LEN_BINS ? "+" : "", (long long)e.by_len_correct[i],
                   (long long)e.by_len_words[i]);
    printf("}}\n");
    for (i = 0; i < set.n; i++) OCR_FREE(texts[i]);
    free(texts);
    ocr_rec_word_set_free(&set);
    ocr_safetensors_close(&st);
    ocr_rec_free(&m);
    ocr_ctx_free(&ctx);
    return 0;
}
