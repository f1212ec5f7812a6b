/* ocr_rec.h - text recognition: a CRNN (VGG-style convolutions, a bidirectional LSTM, CTC) with its charset, the
   crops it reads and the figures it is judged by.  v0.1  MIT license

   Do this in exactly one C or C++ file:
       #define OCR_REC_IMPLEMENTATION         (the other headers' implementations go in the same or another file;
       #include "ocr_rec.h"                   OCR_IMPLEMENTATION turns on every module)

   Usage (train a step, then read a crop):
       ocr_charset cs;  ocr_rec_model m;  ocr_rec_config cfg = ocr_rec_config_default();
       ocr_charset_init(&ctx, &cs, "latin");                           // or a PaddleOCR-style key file
       ocr_rec_init(&ctx, &m, &cfg, &cs);                              // classes: blank + the charset
       ocr_rec_forward(&ctx, &m, &x, &input_lengths, 1, &log_probs);   // x [N,3,32,W] -> log_probs [W/4, N, classes]
       ocr_loss_ctc(&ctx, NULL, &log_probs, &targets, &target_lengths, &input_lengths, &res, NULL, &d_lp);
       ocr_params_zero_grad(&m.params);  ocr_rec_backward(&ctx, &m, &d_lp);  ocr_optim_step(&ctx, &opt, &m.params, lr);
       ocr_rec_save(&ctx, &m, "rec.safetensors", NULL, NULL, 0);       // PyTorch loads it (tools/crnn_ref.py)
       ocr_rec_recognize(&ctx, &m, &crop, 1, 32, 0, &text, NULL);      // any crop in, UTF-8 out (free text)

   The sections, in order:
   - charset: index 0 is the CTC blank, 1.. the characters (Unicode code points, any plane: Hangul, CJK, ...), from a
     UTF-8 key file with one character per line (PaddleOCR's format) or the built-in "latin" set. Encoding a label
     with a character outside the charset, an empty label or invalid UTF-8 is an error that names the sample and the
     character: never an empty or shortened target, which teaches a model to predict nothing.
   - model: [N, 3, 32, W] (W a multiple of 4, normalised as the detector's input, OCR_NORM_DBNET) -> six conv3x3 +
     BatchNorm + ReLU blocks with 2x2, 2x2, -, (2,1), (2,1), (2,1) max pooling (height 32 -> 1, width W -> W/4) ->
     map-to-sequence [W/4, N, C] -> a stack of bidirectional LSTMs -> a linear classifier -> log_softmax. Parameters
     under the names of tools/crnn_ref.py's PyTorch module (cnn.conv0.weight, cnn.bn0.running_mean, rnn.weight_ih_l0,
     fc.bias, ...): checkpoints are safetensors PyTorch loads with strict=True, the config and the charset in the
     metadata. On the CPU or, with the CUDA backend, on the device (every op has its kernel; decoding reads a host
     copy of the log-probabilities).
   - crops: a text quad rectified (ocr_perspective_transform) to height 32 with its aspect kept, its width a multiple
     of 4 and capped, with light augmentation; the care words of any ocr_sample (synthetic scenes, ICDAR folders,
     LMDB detection or recognition sets) become training crops through the loader transform ocr_rec_words_transform.
   - datasets: a folder with a ground-truth file, "path<TAB>text" per line (ocr_rec_dataset_open_folder); LMDB
     recognition sets are ocr_data.h's ocr_dataset_open_lmdb (each sample one polygon over the image with its text).
   - recognition and decoding: ocr_rec_recognize (crops of any size in, text out, batched by width), greedy or beam.
   - evaluation: word accuracy, case-insensitive accuracy, CER, 1-NED, accuracy by label length and the share of
     empty predictions, with the decode watch that warns when that share stays high.

   - reading (ocr_pipeline): a detector and a recognizer together, an image in, text lines with their boxes out;
     and the ICDAR 2015 end-to-end evaluation (ocr_e2e_evaluator).

   Dependencies: ocr_tensor.h, ocr_geom.h, ocr_nn.h, ocr_loss.h, ocr_data.h (images, samples, the loader),
   ocr_dbnet.h (the detector of ocr_pipeline).
*/
/* The pipeline times itself with clock_gettime (POSIX): declared only when asked for before the first system header. */
#if (defined(OCR_IMPLEMENTATION) || defined(OCR_REC_IMPLEMENTATION)) && !defined(_POSIX_C_SOURCE) && !defined(_GNU_SOURCE)
#define _POSIX_C_SOURCE 200809L
#endif
#ifndef OCR_REC_H
#define OCR_REC_H
#include "ocr_tensor.h"
#include "ocr_geom.h"
#include "ocr_nn.h"
#include "ocr_loss.h"
#include "ocr_data.h"
#include "ocr_dbnet.h"
#ifdef __cplusplus
extern "C" {
#endif

/* ================================================================ charset */

/* Class 0 is the CTC blank; class i >= 1 is the code point chars[i]. */
typedef struct {
    int n_classes;          /* blank + characters */
    int32_t *chars;         /* [n_classes]; chars[0] = 0, unused */
    int32_t *slots;         /* open-addressing table code point -> class, 2 ints a slot (code point, class); -1 empty */
    int n_slots;            /* a power of two */
    char name[256];         /* "latin", "latin+space" or the key file's path, for messages */
} ocr_charset;

/* spec: "latin" (digits, ASCII letters, ASCII punctuation: 94 characters), "latin+space" (the same and a space),
   "european" (latin and the rest of what ocr_synth.h draws: Latin-1 letters and signs U+00A1-U+00FF but U+00AD, Œ œ
   €, Greek U+0391-U+03C9, Cyrillic U+0410-U+044F: 311 characters), or the path of a UTF-8 key file. A key file holds one character per line (LF or CRLF, a BOM allowed, empty lines
   skipped; a line " " is the space); a line of more than one code point, a repeated character, a control character
   or invalid UTF-8 is an error naming the line. */
OCRDEF int ocr_charset_init(ocr_ctx *ctx, ocr_charset *cs, const char *spec);
/* The same from a key file's text in memory; name is what messages call it. */
OCRDEF int ocr_charset_from_text(ocr_ctx *ctx, ocr_charset *cs, const char *text, size_t size, const char *name);
OCRDEF void ocr_charset_free(ocr_charset *cs);
OCRDEF int ocr_charset_copy(ocr_ctx *ctx, ocr_charset *dst, const ocr_charset *src);
/* The class of a code point, 0 when the charset lacks it. */
OCRDEF int ocr_charset_class(const ocr_charset *cs, int32_t cp);
/* The charset as key-file text (each character and "\n"), NUL-terminated, OCR_MALLOC'd: a checkpoint's metadata. */
OCRDEF char *ocr_charset_to_text(ocr_ctx *ctx, const ocr_charset *cs);
/* Encodes UTF-8 text into classes (labels[0 .. *n)). sample names the sample in messages (an LMDB key, a file and
   line). Errors, nothing written past *n = 0: OCR_EFORMAT invalid UTF-8 (the byte and offset), OCR_EINVAL an empty
   label, OCR_ENOTFOUND a character outside the charset (named as U+XXXX, the character and its UTF-8 bytes, with its
   position), OCR_EOVERFLOW more than cap characters. */
OCRDEF int ocr_charset_encode(ocr_ctx *ctx, const ocr_charset *cs, const char *text, const char *sample, int32_t *labels, int cap,
                              int *n);
/* Classes back to UTF-8 (blanks skipped), NUL-terminated in out. OCR_ERANGE for a class outside the charset,
   OCR_EOVERFLOW when out (cap bytes) is too small. */
OCRDEF int ocr_charset_decode(ocr_ctx *ctx, const ocr_charset *cs, const int32_t *labels, int n, char *out, size_t cap);

/* ================================================================ model */

#define OCR_REC_BLOCKS 6
#define OCR_REC_MAX_LAYERS 4
typedef struct {
    int height;                       /* input height: 32 (five pools of height 2 collapse it to 1) */
    int channels[OCR_REC_BLOCKS];     /* conv block widths: 32, 64, 128, 128, 256, 256 */
    int hidden;                       /* LSTM hidden size per direction: 128 */
    int layers;                       /* bidirectional LSTM layers: 2 */
    int n_classes;                    /* set by ocr_rec_init from the charset (blank included) */
    float bn_momentum, bn_eps;        /* 0.1, 1e-5 (torch's) */
} ocr_rec_config;

struct ocr__rec_state;
typedef struct {
    ocr_rec_config cfg;
    ocr_charset charset;
    ocr_params params;                /* every weight and BN statistic under tools/crnn_ref.py's names */
    int64_t num_batches_tracked;      /* training forwards: written as each BN's num_batches_tracked */
    struct ocr__rec_state *state_;    /* private: activations of the last forward */
} ocr_rec_model;

OCRDEF ocr_rec_config ocr_rec_config_default(void);
/* The max pooling after conv block `block` (0..OCR_REC_BLOCKS-1), window = stride: 2x2, 2x2, none (0x0), then 2x1
   three times (height x width) */
OCRDEF void ocr_rec_block_pool(int block, int *pool_h, int *pool_w);
/* Builds the model for cfg with cs's classes (copied into m->charset) on ctx->device, initialised from ctx->rng: convs
   kaiming normal (fan_out, ReLU), BN weight 1 and bias 0, running mean 0 and variance 1, LSTM and classifier as
   PyTorch's defaults (uniform within 1/sqrt(hidden) and 1/sqrt(fan_in)); drawn on the host, so the same values on
   every device. Its activations and gradients live on that device; it runs on contexts of that device only. */
OCRDEF int ocr_rec_init(ocr_ctx *ctx, ocr_rec_model *m, const ocr_rec_config *cfg, const ocr_charset *cs);
OCRDEF void ocr_rec_free(ocr_rec_model *m);
/* x F32 [N, 3, height, W] on the CPU or the model's device, W a positive multiple of 4 (copied, i.e. uploaded for a
   device model: the caller may reuse it). *log_probs gets a view [W/4, N, n_classes] on the model's device, valid
   until the next forward: log-probabilities per frame, sequence
   first as ocr_loss_ctc takes them. training: BN on batch statistics (updating the running ones) and the
   activations kept for ocr_rec_backward; else BN on the running statistics. Buffers grow with the largest input.
   input_lengths (I32 [N] on the host, each 1..W/4; NULL: every crop W wide) gives each crop's frames, its width / 4: the columns
   beyond it are padding, zeroed after every block and skipped by the LSTMs (packed sequences), so that in eval mode
   a crop's log-probabilities do not depend on the other crops of its batch (in training BN's batch statistics still
   see the padding). */
OCRDEF int ocr_rec_forward(ocr_ctx *ctx, ocr_rec_model *m, const ocr_tensor *x, const ocr_tensor *input_lengths, int training,
                           ocr_tensor *log_probs);
/* After a training forward, once: ACCUMULATES into m->params.grad the gradients given d_log_probs [T, N, classes],
   the loss's gradient with respect to log_probs (ocr_loss_ctc's d_log_probs is the logits' gradient, which the
   log_softmax backward maps to itself, so it may be passed as it is). OCR_ESTATE without a training forward. */
OCRDEF int ocr_rec_backward(ocr_ctx *ctx, ocr_rec_model *m, const ocr_tensor *d_log_probs);
/* Checkpoint: every parameter, each BN's num_batches_tracked (I64 scalar) and in the metadata format=pt, the config
   (ocr_rec.height, .channels "32,64,...", .hidden, .layers, .n_classes, .bn_momentum, .bn_eps), the charset
   (ocr_rec.charset: key-file text) and the input normalisation (ocr_rec.input: "dbnet"), plus the caller's pairs. */
OCRDEF int ocr_rec_save(ocr_ctx *ctx, const ocr_rec_model *m, const char *path, const char *const *meta_keys,
                        const char *const *meta_values, int n_meta);
/* The config and charset a checkpoint was saved with (ocr_charset_free the charset). */
OCRDEF int ocr_rec_read_config(ocr_ctx *ctx, const char *path, ocr_rec_config *cfg, ocr_charset *cs);
/* Loads a checkpoint into an initialised model: refused (model unchanged) for another config or charset, a missing,
   misshapen or unknown tensor, or a value that is NaN, infinite or above OCR_LOAD_MAX_ABS. */
OCRDEF int ocr_rec_load(ocr_ctx *ctx, ocr_rec_model *m, const char *path);
/* ocr_rec_read_config + ocr_rec_init + ocr_rec_load; *m zeroed on failure. */
OCRDEF int ocr_rec_init_from_file(ocr_ctx *ctx, ocr_rec_model *m, const char *path);

/* ================================================================ crops */

typedef struct {
    int height;            /* crop height: the model's, 32 */
    int max_width;         /* crops are at most this wide (wider text is squeezed): 256, a multiple of 4 */
    float margin;          /* a quad smaller than its image grows by this fraction of its height on each side: 0.15 */
    /* augmentation, with an rng (each 0 turns it off) */
    float margin_jitter;   /* the margin is drawn in [margin - j, margin + j] (at least 0) per side: 0.1 */
    float corner_jitter;   /* each corner moves by up to this fraction of the height in x and y: 0.06 */
    float stretch;         /* the width is scaled by a factor log-uniform in [1/(1+s), 1+s]: 0.15 */
} ocr_rec_crop_config;
OCRDEF ocr_rec_crop_config ocr_rec_crop_defaults(void);
/* The crop of quad (TL, TR, BR, BL in reading order) of img: grown by the margin (not for a quad that covers the whole
   image, a recognition crop already), rectified by the perspective transform onto height x W with bilinear sampling
   (several samples per pixel when shrinking), W = the aspect-kept width rounded up to a multiple of 4, within
   [max(8, min_width), max_width]. rng NULL: no augmentation. out is allocated (RGB). */
OCRDEF int ocr_rec_crop(ocr_ctx *ctx, const ocr_image *img, const ocr_point quad[4], const ocr_rec_crop_config *cfg, ocr_rng *rng,
                        int min_width, ocr_image *out);
/* The reading-order quad of a polygon: its own 4 points, or the minimum-area box (TL, TR, BR, BL) of more. */
OCRDEF int ocr_rec_polygon_quad(ocr_ctx *ctx, const ocr_polygon *p, ocr_point quad[4]);
/* Frames a label of n classes needs: n plus one blank between each pair of equal neighbours (CTC). */
OCRDEF int ocr_rec_frames_needed(const int32_t *labels, int n);
/* Writes crop (height rows, width <= W) normalised (OCR_NORM_DBNET) into dst, an F32 [3, height, W] row of a batch
   on the host, at the left, and zeroes the rest (zero is the mean colour after normalisation). */
OCRDEF int ocr_rec_crop_to_input(ocr_ctx *ctx, const ocr_image *crop, ocr_tensor *dst);

/* ---- the loader transform: every care word of a sample (synthetic scene, ICDAR image, LMDB sample) as a crop ----
   Fields per sample, for ocr_loader_config (ocr_rec_loader_setup fills them):
     OCR_REC_F_IMAGES [K, 3 * height, max_width]  the crops [3, height, max_width], normalised, left-aligned, zero padded
     OCR_REC_F_WORDS  [K, 2 + max_width/4]       per crop: its width, its label count L, then its L classes
     OCR_REC_F_COUNTS [4]                        words used, skipped (outside the charset, empty, bad UTF-8), too
                                                 long for max_width, left over beyond K
   Words marked ignore or without text are not counted. A sample holds at most K = max_words crops, taken in order. */
enum { OCR_REC_F_IMAGES = 0, OCR_REC_F_WORDS = 1, OCR_REC_F_COUNTS = 2, OCR_REC_N_FIELDS = 3 };
typedef struct {
    const ocr_charset *charset;
    ocr_rec_crop_config crop;
    int max_words;         /* K: crops kept per sample (1 for recognition sets; a scene holds dozens) */
    int augment;           /* 1: the crop's augmentation, drawn from the loader's per-sample rng */
    int skip_unknown;      /* 1: a word the charset cannot encode is skipped and counted; 0: the sample fails with the
                              encoder's error (the loader then reports and drops it: check labels first with
                              ocr_rec_check_labels to stop there instead) */
} ocr_rec_words_config;
OCRDEF void ocr_rec_loader_setup(const ocr_rec_words_config *wc, ocr_loader_config *lc);
OCRDEF int ocr_rec_words_transform(ocr_ctx *ctx, void *user, ocr_sample *sample, int64_t index, ocr_rng *rng, ocr_tensor *fields);

/* Encodes every care label of ds against cs (labels only, images not decoded). skip_unknown 0: the first label that
   does not encode is the error, naming the dataset, the sample and the character; 1: such words are counted in
   *skipped (may be NULL) and the first is described in first (may be NULL, cap bytes). *words (may be NULL) gets the
   care words. */
OCRDEF int ocr_rec_check_labels(ocr_ctx *ctx, ocr_dataset *ds, const ocr_charset *cs, int max_width, int skip_unknown, int64_t *words,
                                int64_t *skipped, char *first, size_t cap);

/* Words held as crops with their labels: validation and evaluation sets. ocr_rec_word_set_add takes every care word of a
   sample (until the set holds max words; max <= 0: no limit), cropped with cfg and no augmentation; a word whose label
   the charset cannot encode is, with skip_unknown, left out and counted in skipped, else the error (naming the sample
   and the character); one too long for cfg->max_width is counted in too_long. labels and ids are OCR_MALLOC'd. */
typedef struct {
    ocr_image *crops;
    char **labels, **ids;
    int n, cap;
    int64_t skipped, too_long;
} ocr_rec_word_set;
OCRDEF int ocr_rec_word_set_add(ocr_ctx *ctx, ocr_rec_word_set *set, const ocr_sample *sample, const ocr_charset *cs,
                                const ocr_rec_crop_config *cfg, int skip_unknown, int max);
OCRDEF void ocr_rec_word_set_free(ocr_rec_word_set *set);

/* ================================================================ datasets */

/* A folder of crops with a ground-truth file: one "path<TAB>text" line per crop (UTF-8, a BOM, CRLF and empty lines
   allowed; path relative to image_root, or to the ground-truth file's folder when image_root is NULL). Each sample
   is its image with one polygon over the whole image holding the text, as ocr_dataset_open_lmdb gives a recognition
   LMDB's samples; its id is "<gt file>:<line> <path>". A line without a tab is an error naming the line; a missing
   image fails when the sample is read. get_encoded gives the file's bytes. */
OCRDEF int ocr_rec_dataset_open_folder(ocr_ctx *ctx, ocr_dataset *ds, const char *gt_path, const char *image_root);

/* ================================================================ recognition and decoding */

/* Best path (beam_width <= 1) or prefix beam search: texts[n] gets sample n's text (OCR_MALLOC'd UTF-8), scores[n]
   (may be NULL) its log-probability (the path's, or the labelling's for the beam). log_probs [T, N, classes] as
   ocr_rec_forward gives (on the host or the device: a device tensor is downloaded first), input_lengths I32 [N] on
   the host or NULL (every frame). */
OCRDEF int ocr_rec_decode(ocr_ctx *ctx, const ocr_rec_model *m, const ocr_tensor *log_probs, const ocr_tensor *input_lengths,
                          int beam_width, char **texts, float *scores);
/* Reads n crops of any size (each rectified to the model's height, aspect kept, as ocr_rec_crop with the whole image
   as the quad): sorted by width into batches of at most batch_size, evaluated (BN on running statistics) and
   decoded. texts[i] OCR_MALLOC'd; scores may be NULL. */
OCRDEF int ocr_rec_recognize(ocr_ctx *ctx, ocr_rec_model *m, const ocr_image *crops, int n, int batch_size, int beam_width,
                             char **texts, float *scores);
/* The same, and confidences[i] (may be NULL): the mean probability of the characters the best path emits (each
   character's frame, the first of a run), 0 for an empty text: PaddleOCR's recognition score, what a caller drops
   unreliable readings by. Best path only (beam_width <= 1); the texts and scores as ocr_rec_recognize's. */
OCRDEF int ocr_rec_recognize_confidence(ocr_ctx *ctx, ocr_rec_model *m, const ocr_image *crops, int n, int batch_size, char **texts,
                                        float *scores, float *confidences);

/* ================================================================ evaluation */

#define OCR_REC_LEN_BINS 26   /* label lengths 1..25, and 26 for longer */
typedef struct {
    int64_t words, correct, correct_nocase, empty;   /* empty: predictions with no character */
    int64_t gt_chars, edits;                         /* code points of the labels, edit distance to the predictions */
    double ned_sum;                                  /* sum of edit distance / max(label, prediction length) */
    int64_t by_len_words[OCR_REC_LEN_BINS + 1], by_len_correct[OCR_REC_LEN_BINS + 1];
} ocr_rec_eval;
typedef struct {
    double accuracy, accuracy_nocase, cer, one_minus_ned, empty_share;   /* 0 with no words */
} ocr_rec_eval_result;
OCRDEF void ocr_rec_eval_init(ocr_rec_eval *e);
/* Adds one word: label and prediction UTF-8 (invalid UTF-8 counts its bytes as characters). Case-insensitive
   comparison folds ASCII, Latin-1, Greek and Cyrillic capitals. */
OCRDEF void ocr_rec_eval_add(ocr_rec_eval *e, const char *label, const char *prediction);
OCRDEF ocr_rec_eval_result ocr_rec_eval_finish(const ocr_rec_eval *e);
/* Levenshtein distance between two code-point sequences (unit costs). */
OCRDEF int64_t ocr_rec_edit_distance(const int32_t *a, int na, const int32_t *b, int nb);

/* The decode watch: a model collapsed to the blank predicts nothing, which the loss alone does not show. Feed it the
   share of empty predictions of each validation; it returns 1 (warn) when the share has been at least threshold
   for patience validations in a row. */
typedef struct { double threshold; int patience, in_a_row; double last; } ocr_rec_decode_watch;
OCRDEF ocr_rec_decode_watch ocr_rec_decode_watch_default(void);   /* threshold 0.5, patience 2 */
OCRDEF int ocr_rec_decode_watch_update(ocr_rec_decode_watch *w, double empty_share);

/* ================================================================ reading: detector and recognizer together */

/* ocr_pipeline: a detector (ocr_dbnet.h) and a recognizer in one object; ocr_pipeline_read takes an image and gives
   its text lines, each with the polygon found, the quad it was read along, the text and both scores.
     ocr_pipeline p;  ocr_reading r;  ocr_pipeline_config pc = ocr_pipeline_config_default();
     ocr_pipeline_open(&ctx, &p, "det.safetensors", "rec.safetensors", &pc);
     ocr_pipeline_read(&ctx, &p, &img, &r);        // r.lines[i].text, .quad, .det_score, .rec_score
     ocr_reading_free(&r);  ocr_pipeline_close(&p);
   Each detection is rectified before it is read: a quad by the perspective transform (ocr_rec_crop), a polygon of
   more points straightened along the long axis of its minimum-area box (ocr_rec_crop_polygon). A box at least
   vertical_ratio times taller than wide is read top to bottom (turned 90 degrees); a crop read with a confidence
   below rotate_below is read again turned 180 degrees and the reading with the higher confidence kept. Crops are
   recognised in batches of similar width (ocr_rec_recognize). On a CUDA context both models live on the device: the
   image's input is uploaded, the probability map downloaded for post-processing, crops cut on the host. */
typedef struct {
    ocr_post_config post;     /* the detector's post-processing: ocr_post_config_default(OCR_POST_BOX) */
    float det_scale;          /* the detector sees the image scaled by this, sides rounded up to multiples of 32: 1.4 */
    int det_short_side;       /* > 0: instead, the short side scaled to this (ocr_infer_input_size) */
    int det_long_side;        /* > 0: instead, the long side scaled to this */
    int det_max_side;         /* with det_scale: a longer side is scaled down to this: 1280 (a 1280x720 photograph is
                                 read at its own size, a 320x320 scene at 448) */
    ocr_rec_crop_config crop; /* margin 0.15 of the height around each detection; height set from the recognizer */
    int rec_batch;            /* crops per recognizer forward: 32 */
    int beam_width;           /* CTC prefix beam width; 0 or 1: best path */
    float vertical_ratio;     /* 1.5 (PaddleOCR's): a box this much taller than wide is read top to bottom */
    float rotate_below;       /* 0.5: crops read with a lower confidence are also read turned 180 degrees; 0: never */
    float min_confidence;     /* 0.8: lines read with a lower confidence are dropped (0: none); confidences are
                                 ocr_rec_recognize_confidence's, of the best path even with a beam */
    int keep_empty;           /* 0: lines read as "" are dropped */
    const char *charset;      /* NULL, or a charset spec ("latin", a key file) the recognizer must have: a model of
                                 another charset is refused, naming the first class that differs */
} ocr_pipeline_config;
OCRDEF ocr_pipeline_config ocr_pipeline_config_default(void);

typedef struct {
    ocr_polygon poly;         /* the detection in image pixels (points owned by the reading; text = the text) */
    ocr_point quad[4];        /* the quad it was read along: TL, TR, BR, BL of the text as read */
    char *text;               /* UTF-8 (the same pointer as poly.text) */
    float det_score;          /* the detector's box score */
    float rec_score;          /* the recognizer's confidence: the mean probability of its characters (ocr_rec_recognize_confidence) */
    int rotation;             /* 0, 90, 180 or 270: degrees clockwise the crop was turned to be read */
} ocr_text_line;
typedef struct {
    ocr_text_line *lines;     /* in reading order: top to bottom, then left to right within a row */
    int n;
    int detections;           /* detections before the empty and unconfident readings were dropped */
    double det_seconds, rec_seconds;   /* time in the detector (network and post-processing) and in recognition */
} ocr_reading;
OCRDEF void ocr_reading_free(ocr_reading *r);

typedef struct {
    ocr_dbnet det;
    ocr_rec_model rec;
    ocr_pipeline_config cfg;
    ocr_tensor input_;        /* private: the detector's input, kept between images */
    ocr_tensor prob_host_;    /* private: the probability map downloaded for post-processing (a CUDA context) */
    ocr_detections dets_;
    int open_;
} ocr_pipeline;
/* Loads both checkpoints. Refused with a message naming the file: a detector file given as the recognizer or the
   reverse, a recognizer whose input height differs from cfg->crop.height (when set), another charset than
   cfg->charset, a config out of range. Both models are built on ctx's device. *p is zeroed on failure. */
OCRDEF int ocr_pipeline_open(ocr_ctx *ctx, ocr_pipeline *p, const char *det_path, const char *rec_path, const ocr_pipeline_config *cfg);
OCRDEF void ocr_pipeline_close(ocr_pipeline *p);
/* Detects and reads the text of img (RGB or grey). out must be zeroed or hold an earlier reading (replaced). */
OCRDEF int ocr_pipeline_read(ocr_ctx *ctx, ocr_pipeline *p, const ocr_image *img, ocr_reading *out);
/* Reads given regions of img (a detector of the caller's, or ground truth): polygons of 4 points (TL, TR, BR, BL in
   reading order, as ocr_postprocess gives) or more; det_scores may be NULL (1). A region under a pixel across is
   left out (counted in detections), as are its empty and unconfident readings. */
OCRDEF int ocr_pipeline_read_regions(ocr_ctx *ctx, ocr_pipeline *p, const ocr_image *img, const ocr_polygon *regions,
                                     const float *det_scores, int n, ocr_reading *out);
/* The crop of a polygon straightened along the long axis of quad (its reading-order box: TL, TR, BR, BL): at
   evenly spaced positions along TL->TR the polygon's extent across the axis is measured, and each output column
   samples the image between the interpolated upper and lower boundary, grown by cfg->margin of the mean height.
   Height cfg->height, width from the mean aspect, a multiple of 4 within [8, cfg->max_width]. */
OCRDEF int ocr_rec_crop_polygon(ocr_ctx *ctx, const ocr_image *img, const ocr_point *pts, int n, const ocr_point quad[4],
                                const ocr_rec_crop_config *cfg, ocr_image *out);

/* ---- end-to-end evaluation: ICDAR 2015's protocol (task 4.4, generic, no lexicon) ----
   Detections are matched to ground truth as ocr_eval_add_image does (IoU > 0.5, one to one, in order; detections
   mostly inside a don't-care word ignored); a matched pair counts when its transcriptions match case-insensitively,
   the ground truth's first and last character allowed to be dropped when they are among !?.:,*"()·[]/' (the official
   transcription_match with ONLY_REMOVE_FIRST_LAST_CHARACTER). Precision = counted / care detections, recall =
   counted / care words, F = 2PR / (P + R). Case folding: ASCII, Latin-1, Greek and Cyrillic (ocr_rec_eval's). */
typedef struct {
    ocr_evaluator det;        /* the detection figures of the same images */
    int64_t correct;          /* matched pairs whose transcriptions match */
} ocr_e2e_evaluator;
typedef struct {
    ocr_eval_result det;
    double precision, recall, fscore;
} ocr_e2e_result;
OCRDEF void ocr_e2e_eval_init(ocr_e2e_evaluator *ev);
/* gt: polygons with their text and ignore flags; det: polygons with det_texts[j] their transcriptions (NULL: "").
   *correct (may be NULL) gets this image's count. */
OCRDEF int ocr_e2e_eval_add_image(ocr_ctx *ctx, ocr_e2e_evaluator *ev, const ocr_polygon *gt, int n_gt, const ocr_polygon *det,
                                  const char *const *det_texts, int n_det, ocr_eval_counts *counts, int64_t *correct);
OCRDEF ocr_e2e_result ocr_e2e_eval_finish(const ocr_e2e_evaluator *ev);
/* The official transcription rule above: 1 when det reads gt. */
OCRDEF int ocr_e2e_transcription_match(const char *gt, const char *det);

#ifdef __cplusplus
}
#endif
#endif /* OCR_REC_H */

/* ================================================================ implementation */

#if defined(OCR_IMPLEMENTATION) && !defined(OCR_NO_IMPLEMENTATION) && !defined(OCR_REC_IMPLEMENTATION)
#define OCR_REC_IMPLEMENTATION
#endif
#if defined(OCR_REC_IMPLEMENTATION) && !defined(OCR__REC_IMPLEMENTED)
#define OCR__REC_IMPLEMENTED
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <math.h>
#include <time.h>
#ifdef __cplusplus
extern "C" {
#endif


/* "U+D55C '한' (UTF-8 ED 95 9C)"; control characters are not printed */
static void ocr__rec_describe_cp(int32_t cp, char *out, size_t cap) {
    char u[5] = {0}, bytes[16] = "";
    int n = ocr_utf8_put(cp, u), k;
    size_t used = 0;
    for (k = 0; k < n; k++) used += (size_t)snprintf(bytes + used, sizeof bytes - used, "%s%02X", k ? " " : "", (unsigned char)u[k]);
    if (cp < 0x20 || cp == 0x7F || (cp >= 0x80 && cp < 0xA0)) snprintf(out, cap, "U+%04X (a control character, UTF-8 %s)", (unsigned)cp, bytes);
    else snprintf(out, cap, "U+%04X '%s' (UTF-8 %s)", (unsigned)cp, u, bytes);
}

/* ---------------------------------------------------------------- charset */

static int ocr__rec_cs_build(ocr_ctx *ctx, ocr_charset *cs, const int32_t *cps, const int *lines, int n, const char *name) {
    int i, slots = 16;
    memset(cs, 0, sizeof *cs);
    if (n < 1) return ocr_error(ctx, OCR_EINVAL, "ocr_charset_init: '%s' holds no characters", name);
    while (slots < 2 * n + 2) slots *= 2;
    cs->chars = (int32_t *)OCR_MALLOC((size_t)(n + 1) * sizeof(int32_t));
    cs->slots = (int32_t *)OCR_MALLOC((size_t)slots * 2 * sizeof(int32_t));
    if (!cs->chars || !cs->slots) { ocr_charset_free(cs); return ocr_error(ctx, OCR_ENOMEM, "ocr_charset_init: out of memory"); }
    cs->n_slots = slots;
    for (i = 0; i < 2 * slots; i++) cs->slots[i] = -1;
    cs->chars[0] = 0;
    cs->n_classes = 1;
    snprintf(cs->name, sizeof cs->name, "%s", name);
    for (i = 0; i < n; i++) {
        uint32_t h = ((uint32_t)cps[i] * 2654435761u) & (uint32_t)(slots - 1);
        while (cs->slots[2 * h] >= 0 && cs->slots[2 * h] != cps[i]) h = (h + 1) & (uint32_t)(slots - 1);
        if (cs->slots[2 * h] == cps[i]) {
            char d[64];
            int first = cs->slots[2 * h + 1];
            ocr__rec_describe_cp(cps[i], d, sizeof d);
            ocr_charset_free(cs);
            if (lines)
                return ocr_error(ctx, OCR_EFORMAT, "ocr_charset_init: '%s' line %d repeats the character %s of line %d", name, lines[i], d,
                                 lines[first - 1]);
            return ocr_error(ctx, OCR_EFORMAT, "ocr_charset_init: '%s' repeats the character %s", name, d);
        }
        cs->slots[2 * h] = cps[i];
        cs->slots[2 * h + 1] = cs->n_classes;
        cs->chars[cs->n_classes++] = cps[i];
    }
    return OCR_OK;
}

OCRDEF int ocr_charset_from_text(ocr_ctx *ctx, ocr_charset *cs, const char *text, size_t size, const char *name) {
    int32_t *cps;
    int *lines, n = 0, line = 1, rc;
    size_t i = 0;
    if (!cs) return ocr_error(ctx, OCR_EINVAL, "ocr_charset_init: cs is NULL");
    memset(cs, 0, sizeof *cs);
    if (!text && size) return ocr_error(ctx, OCR_EINVAL, "ocr_charset_init: text is NULL");
    if (!name) name = "(memory)";
    cps = (int32_t *)OCR_MALLOC((size ? size : 1) * sizeof(int32_t));
    lines = (int *)OCR_MALLOC((size ? size : 1) * sizeof(int));
    if (!cps || !lines) { OCR_FREE(cps); OCR_FREE(lines); return ocr_error(ctx, OCR_ENOMEM, "ocr_charset_init: out of memory"); }
    if (size >= 3 && memcmp(text, "\xEF\xBB\xBF", 3) == 0) i = 3;
    while (i < size) {
        size_t end = i, stop;
        int32_t cp, extra;
        size_t j;
        while (end < size && text[end] != '\n') end++;
        stop = end > i && text[end - 1] == '\r' ? end - 1 : end;
        if (stop > i) {
            j = i;
            if (!ocr_utf8_next(text, stop, &j, &cp)) {
                rc = ocr_error(ctx, OCR_EFORMAT, "ocr_charset_init: '%s' line %d is not UTF-8 (byte 0x%02x)", name, line, (unsigned char)text[j]);
                goto fail;
            }
            if (j < stop) {
                size_t k = j;
                int count = 1;
                while (k < stop && ocr_utf8_next(text, stop, &k, &extra)) count++;
                rc = ocr_error(ctx, OCR_EFORMAT, "ocr_charset_init: '%s' line %d holds %d characters '%.*s'; a key file has one per line", name,
                               line, count, (int)(stop - i > 200 ? 200 : stop - i), text + i);
                goto fail;
            }
            if (cp < 0x20 || cp == 0x7F) {
                char d[64];
                ocr__rec_describe_cp(cp, d, sizeof d);
                rc = ocr_error(ctx, OCR_EFORMAT, "ocr_charset_init: '%s' line %d is the control character %s", name, line, d);
                goto fail;
            }
            cps[n] = cp;
            lines[n++] = line;
        }
        i = end + 1;
        line++;
    }
    rc = ocr__rec_cs_build(ctx, cs, cps, lines, n, name);
fail:
    OCR_FREE(cps);
    OCR_FREE(lines);
    return rc;
}

OCRDEF int ocr_charset_init(ocr_ctx *ctx, ocr_charset *cs, const char *spec) {
    static const char latin[] = "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~";
    unsigned char *bytes;
    size_t size;
    int rc;
    if (!cs || !spec) return ocr_error(ctx, OCR_EINVAL, "ocr_charset_init: cs and spec must not be NULL");
    memset(cs, 0, sizeof *cs);
    if (strcmp(spec, "latin") == 0 || strcmp(spec, "latin+space") == 0 || strcmp(spec, "european") == 0) {
        int32_t cps[400], c;
        int n = 0;
        for (n = 0; latin[n]; n++) cps[n] = (unsigned char)latin[n];
        if (strcmp(spec, "latin+space") == 0) cps[n++] = ' ';
        if (spec[0] == 'e') {
            /* the synthetic renderer's repertoire beyond ASCII (ocr_synth.h): Latin-1 letters and signs (not the
               no-break space and the soft hyphen, which draw nothing), OE ligatures, the euro sign, Greek (not the
               unassigned U+03A2), Cyrillic */
            for (c = 0xA1; c <= 0xFF; c++) if (c != 0xAD) cps[n++] = c;
            cps[n++] = 0x152; cps[n++] = 0x153; cps[n++] = 0x20AC;
            for (c = 0x391; c <= 0x3C9; c++) if (c != 0x3A2) cps[n++] = c;
            for (c = 0x410; c <= 0x44F; c++) cps[n++] = c;
        }
        return ocr__rec_cs_build(ctx, cs, cps, NULL, n, spec);
    }
    if ((rc = ocr_read_file(ctx, spec, (size_t)1 << 24, &bytes, &size)))
        return ocr_error(ctx, rc, "ocr_charset_init: '%s' is neither a built-in charset (latin, latin+space, european) nor a readable key file: %s",
                         spec, ocr_ctx_last_error(ctx));
    rc = ocr_charset_from_text(ctx, cs, (const char *)bytes, size, spec);
    OCR_FREE(bytes);
    return rc;
}

OCRDEF void ocr_charset_free(ocr_charset *cs) {
    if (!cs) return;
    OCR_FREE(cs->chars);
    OCR_FREE(cs->slots);
    memset(cs, 0, sizeof *cs);
}

OCRDEF int ocr_charset_copy(ocr_ctx *ctx, ocr_charset *dst, const ocr_charset *src) {
    if (!src || !src->chars) return ocr_error(ctx, OCR_EINVAL, "ocr_charset_copy: no charset to copy");
    return ocr__rec_cs_build(ctx, dst, src->chars + 1, NULL, src->n_classes - 1, src->name);
}

OCRDEF int ocr_charset_class(const ocr_charset *cs, int32_t cp) {
    uint32_t h;
    if (!cs || !cs->slots) return 0;
    h = ((uint32_t)cp * 2654435761u) & (uint32_t)(cs->n_slots - 1);
    while (cs->slots[2 * h] >= 0) {
        if (cs->slots[2 * h] == cp) return cs->slots[2 * h + 1];
        h = (h + 1) & (uint32_t)(cs->n_slots - 1);
    }
    return 0;
}

OCRDEF char *ocr_charset_to_text(ocr_ctx *ctx, const ocr_charset *cs) {
    char *text;
    size_t used = 0;
    int i;
    if (!cs || !cs->chars) { ocr_error(ctx, OCR_EINVAL, "ocr_charset_to_text: no charset"); return NULL; }
    if (!(text = (char *)OCR_MALLOC((size_t)cs->n_classes * 5 + 1))) { ocr_error(ctx, OCR_ENOMEM, "ocr_charset_to_text: out of memory"); return NULL; }
    for (i = 1; i < cs->n_classes; i++) {
        used += (size_t)ocr_utf8_put(cs->chars[i], text + used);
        text[used++] = '\n';
    }
    text[used] = 0;
    return text;
}

OCRDEF int ocr_charset_encode(ocr_ctx *ctx, const ocr_charset *cs, const char *text, const char *sample, int32_t *labels, int cap,
                              int *n) {
    const char *fn = "ocr_charset_encode";
    size_t i = 0, len;
    int k = 0;
    if (n) *n = 0;
    if (!cs || !cs->chars || !labels || !n || cap < 0) return ocr_error(ctx, OCR_EINVAL, "%s: needs a charset, labels and n", fn);
    if (!sample) sample = "(unnamed)";
    if (!text || !text[0])
        return ocr_error(ctx, OCR_EINVAL, "%s: sample '%s' has an empty label (an empty target teaches a model to predict nothing)", fn,
                         sample);
    len = strlen(text);
    while (i < len) {
        size_t at = i;
        int32_t cp;
        int c;
        if (!ocr_utf8_next(text, len, &i, &cp))
            return ocr_error(ctx, OCR_EFORMAT, "%s: sample '%s': its label is not UTF-8 (byte 0x%02x at offset %zu)", fn, sample,
                             (unsigned char)text[at], at);
        if (!(c = ocr_charset_class(cs, cp))) {
            char d[80];
            ocr__rec_describe_cp(cp, d, sizeof d);
            return ocr_error(ctx, OCR_ENOTFOUND, "%s: sample '%s': character %d of its label \"%.200s\", %s, is not in the charset '%s' "
                             "(%d characters)", fn, sample, k + 1, text, d, cs->name, cs->n_classes - 1);
        }
        if (k == cap)
            return ocr_error(ctx, OCR_EOVERFLOW, "%s: sample '%s': its label \"%.200s\" has more than %d characters", fn, sample, text, cap);
        labels[k++] = c;
    }
    *n = k;
    return OCR_OK;
}

OCRDEF int ocr_charset_decode(ocr_ctx *ctx, const ocr_charset *cs, const int32_t *labels, int n, char *out, size_t cap) {
    size_t used = 0;
    int i;
    if (!cs || !cs->chars || (!labels && n) || !out || !cap) return ocr_error(ctx, OCR_EINVAL, "ocr_charset_decode: bad arguments");
    for (i = 0; i < n; i++) {
        char u[4];
        int len;
        if (labels[i] < 0 || labels[i] >= cs->n_classes)
            return ocr_error(ctx, OCR_ERANGE, "ocr_charset_decode: class %d at %d outside the %d of charset '%s'", (int)labels[i], i,
                             cs->n_classes, cs->name);
        if (labels[i] == 0) continue;
        len = ocr_utf8_put(cs->chars[labels[i]], u);
        if (used + (size_t)len + 1 > cap) { out[used] = 0; return ocr_error(ctx, OCR_EOVERFLOW, "ocr_charset_decode: %zu bytes are too few", cap); }
        memcpy(out + used, u, (size_t)len);
        used += (size_t)len;
    }
    out[used] = 0;
    return OCR_OK;
}

/* ---------------------------------------------------------------- model */

/* Pooling after each block: 2x2, 2x2, none, then (2,1) three times: height 32 -> 1, width W -> W/4. */
static const int ocr__rec_pool_h[OCR_REC_BLOCKS] = {2, 2, 0, 2, 2, 2};
static const int ocr__rec_pool_w[OCR_REC_BLOCKS] = {2, 2, 0, 1, 1, 1};

typedef struct { ocr_tensor t; int64_t cap; } ocr__rec_buf;

struct ocr__rec_state {
    int iw[OCR_REC_BLOCKS], ig[OCR_REC_BLOCKS], ib[OCR_REC_BLOCKS], imean[OCR_REC_BLOCKS], ivar[OCR_REC_BLOCKS];
    int ilstm[OCR_REC_MAX_LAYERS][8];
    int ifc_w, ifc_b;
    int phase;                                   /* 0 idle, 1 after a training forward (backward allowed) */
    int64_t N, W, T;
    ocr_tensor x, conv[OCR_REC_BLOCKS], act[OCR_REC_BLOCKS], pool[OCR_REC_BLOCKS], argmax[OCR_REC_BLOCKS];
    ocr_tensor mean[OCR_REC_BLOCKS], invstd[OCR_REC_BLOCKS], seq, y[OCR_REC_MAX_LAYERS], saved[OCR_REC_MAX_LAYERS], logp;
    ocr_tensor g_out[OCR_REC_BLOCKS], g_act[OCR_REC_BLOCKS], g_conv[OCR_REC_BLOCKS], g_seq, g_y[OCR_REC_MAX_LAYERS], g_logits;
    /* the memory behind each of the views above, grown as needed, on the model's device */
    ocr__rec_buf bufs[96];   /* forward 0..47, backward 48..89, the device's unfused BN-ReLU gradients 90..95 */
    int n_bufs;
    int32_t *widths;                             /* host [N]: valid columns per sample at the current block */
    int64_t widths_cap;
};

OCRDEF void ocr_rec_block_pool(int block, int *pool_h, int *pool_w) {
    int ok = block >= 0 && block < OCR_REC_BLOCKS;
    *pool_h = ok ? ocr__rec_pool_h[block] : 0;
    *pool_w = ok ? ocr__rec_pool_w[block] : 0;
}

OCRDEF ocr_rec_config ocr_rec_config_default(void) {
    static const int ch[OCR_REC_BLOCKS] = {32, 64, 128, 128, 256, 256};
    ocr_rec_config c;
    memset(&c, 0, sizeof c);
    c.height = 32;
    memcpy(c.channels, ch, sizeof ch);
    c.hidden = 128;
    c.layers = 2;
    c.bn_momentum = 0.1f;
    c.bn_eps = 1e-5f;
    return c;
}

static int ocr__rec_check_config(ocr_ctx *ctx, const char *fn, const ocr_rec_config *c) {
    int b;
    if (c->height != 32) return ocr_error(ctx, OCR_EINVAL, "%s: height %d; the model's five height-2 pools need 32", fn, c->height);
    for (b = 0; b < OCR_REC_BLOCKS; b++)
        if (c->channels[b] < 1 || c->channels[b] > 4096) return ocr_error(ctx, OCR_EINVAL, "%s: channels[%d] = %d outside 1..4096", fn, b, c->channels[b]);
    if (c->hidden < 1 || c->hidden > 4096) return ocr_error(ctx, OCR_EINVAL, "%s: hidden %d outside 1..4096", fn, c->hidden);
    if (c->layers < 1 || c->layers > OCR_REC_MAX_LAYERS) return ocr_error(ctx, OCR_EINVAL, "%s: layers %d outside 1..%d", fn, c->layers, OCR_REC_MAX_LAYERS);
    if (!(c->bn_momentum > 0 && c->bn_momentum <= 1) || !(c->bn_eps > 0 && c->bn_eps < 1))
        return ocr_error(ctx, OCR_EINVAL, "%s: bn_momentum %g must be in (0, 1] and bn_eps %g in (0, 1)", fn, c->bn_momentum, c->bn_eps);
    return OCR_OK;
}

/* A view of shape s backed by buffer slot *slot (one slot per activation, assigned in forward order). */
static int ocr__rec_view(ocr_ctx *ctx, struct ocr__rec_state *S, int slot, const char *name, ocr_dtype dt, ocr_shape s, ocr_tensor *out) {
    ocr__rec_buf *b = &S->bufs[slot];
    int64_t need = ocr_shape_numel(s);
    int rc;
    if (slot >= (int)(sizeof S->bufs / sizeof S->bufs[0])) return ocr_error(ctx, OCR_EINVAL, "ocr_rec: internal buffer slots exhausted");
    if (slot >= S->n_bufs) S->n_bufs = slot + 1;
    if (!b->t.data || b->cap < need || b->t.dtype != dt) {
        ocr_tensor_free(&b->t);
        if ((rc = ocr_tensor_alloc(ctx, &b->t, name, dt, ctx->device, ocr_shape1(need)))) { b->cap = 0; return rc; }
        b->cap = need;
    }
    *out = ocr_tensor_view(name, dt, b->t.device, s, b->t.data);
    return OCR_OK;
}

OCRDEF void ocr_rec_free(ocr_rec_model *m) {
    int i;
    if (!m) return;
    if (m->state_) {
        for (i = 0; i < m->state_->n_bufs; i++) ocr_tensor_free(&m->state_->bufs[i].t);
        OCR_FREE(m->state_->widths);
        OCR_FREE(m->state_);
    }
    ocr_params_free(&m->params);
    ocr_charset_free(&m->charset);
    memset(m, 0, sizeof *m);
}

OCRDEF int ocr_rec_init(ocr_ctx *ctx, ocr_rec_model *m, const ocr_rec_config *cfg, const ocr_charset *cs) {
    const char *fn = "ocr_rec_init";
    struct ocr__rec_state *S;
    char name[OCR_NAME_MAX];
    int b, l, rc, cin = 3;
    if (!m || !cfg || !cs || !cs->chars) return ocr_error(ctx, OCR_EINVAL, "%s: needs a model, a config and a charset", fn);
    memset(m, 0, sizeof *m);
    if ((rc = ocr__rec_check_config(ctx, fn, cfg))) return rc;
    if (cs->n_classes < 2) return ocr_error(ctx, OCR_EINVAL, "%s: charset '%s' has no characters", fn, cs->name);
    m->cfg = *cfg;
    m->cfg.n_classes = cs->n_classes;
    if (!(S = m->state_ = (struct ocr__rec_state *)OCR_MALLOC(sizeof *S))) return ocr_error(ctx, OCR_ENOMEM, "%s: out of memory", fn);
    memset(S, 0, sizeof *S);
    if ((rc = ocr_charset_copy(ctx, &m->charset, cs))) goto fail;
    ocr_params_init(&m->params);
    for (b = 0; b < OCR_REC_BLOCKS; b++) {
        int c = cfg->channels[b];
        snprintf(name, sizeof name, "cnn.conv%d.weight", b);
        if ((rc = ocr_params_add(ctx, &m->params, name, ocr_shape4(c, cin, 3, 3), 1, &S->iw[b]))) goto fail;
        snprintf(name, sizeof name, "cnn.bn%d.weight", b);
        if ((rc = ocr_params_add(ctx, &m->params, name, ocr_shape1(c), 1, &S->ig[b]))) goto fail;
        snprintf(name, sizeof name, "cnn.bn%d.bias", b);
        if ((rc = ocr_params_add(ctx, &m->params, name, ocr_shape1(c), 1, &S->ib[b]))) goto fail;
        snprintf(name, sizeof name, "cnn.bn%d.running_mean", b);
        if ((rc = ocr_params_add(ctx, &m->params, name, ocr_shape1(c), 0, &S->imean[b]))) goto fail;
        snprintf(name, sizeof name, "cnn.bn%d.running_var", b);
        if ((rc = ocr_params_add(ctx, &m->params, name, ocr_shape1(c), 0, &S->ivar[b]))) goto fail;
        cin = c;
    }
    for (l = 0; l < cfg->layers; l++)
        if ((rc = ocr_lstm_params_add(ctx, &m->params, "rnn.", l, l ? 2 * cfg->hidden : cin, cfg->hidden, 2, S->ilstm[l]))) goto fail;
    if ((rc = ocr_params_add(ctx, &m->params, "fc.weight", ocr_shape2(cs->n_classes, 2 * cfg->hidden), 1, &S->ifc_w)) ||
        (rc = ocr_params_add(ctx, &m->params, "fc.bias", ocr_shape1(cs->n_classes), 1, &S->ifc_b)) || (rc = ocr_params_alloc(ctx, &m->params)))
        goto fail;
    /* initialisation; BN parameters and biases go without weight decay */
    for (b = 0; b < OCR_REC_BLOCKS; b++) {
        ocr_tensor w = ocr_params_value(&m->params, S->iw[b]), g = ocr_params_value(&m->params, S->ig[b]);
        ocr_tensor v = ocr_params_value(&m->params, S->ivar[b]);
        if ((rc = ocr_tensor_fill_normal(ctx, &w, 0.0f, (float)sqrt(2.0 / (cfg->channels[b] * 9.0)))) || (rc = ocr_tensor_fill(ctx, &g, 1.0)) ||
            (rc = ocr_tensor_fill(ctx, &v, 1.0)))
            goto fail;
        m->params.info[S->ig[b]].decay = 0;
        m->params.info[S->ib[b]].decay = 0;
    }
    for (l = 0; l < cfg->layers; l++)
        for (b = 0; b < 8; b++) {
            ocr_tensor t = ocr_params_value(&m->params, S->ilstm[l][b]);
            float k = 1.0f / (float)sqrt((double)cfg->hidden);
            if ((rc = ocr_tensor_fill_uniform(ctx, &t, -k, k))) goto fail;
            if (t.shape.ndim == 1) m->params.info[S->ilstm[l][b]].decay = 0;
        }
    {
        ocr_tensor w = ocr_params_value(&m->params, S->ifc_w), bias = ocr_params_value(&m->params, S->ifc_b);
        float k = 1.0f / (float)sqrt(2.0 * cfg->hidden);
        if ((rc = ocr_tensor_fill_uniform(ctx, &w, -k, k)) || (rc = ocr_tensor_fill_uniform(ctx, &bias, -k, k))) goto fail;
        m->params.info[S->ifc_b].decay = 0;
    }
    /* drawn on the host (the same values on every device), then moved to the context's device */
    if ((rc = ocr_params_to_device(ctx, &m->params, ctx->device))) goto fail;
    return OCR_OK;
fail:
    ocr_rec_free(m);
    return rc;
}

static ocr_lstm_weights ocr__rec_lstm_weights(const ocr_rec_model *m, int l, ocr_tensor *views) {
    ocr_lstm_weights w;
    int d;
    for (d = 0; d < 8; d++) views[d] = ocr_params_value(&m->params, m->state_->ilstm[l][d]);
    w.directions = 2;
    for (d = 0; d < 2; d++) {
        w.w_ih[d] = &views[4 * d]; w.w_hh[d] = &views[4 * d + 1]; w.b_ih[d] = &views[4 * d + 2]; w.b_hh[d] = &views[4 * d + 3];
    }
    return w;
}

/* Zeroes the columns of x [N, C, H, W] from each sample's valid width on: frames[n] * 4 / shrink (the width divided
   by the pooling so far). */
static int ocr__rec_mask_columns(ocr_ctx *ctx, struct ocr__rec_state *S, ocr_tensor *x, const int32_t *frames, int64_t shrink) {
    int64_t N = x->shape.dim[0], n;
    ocr_tensor widths;
    if (S->widths_cap < N) {
        int32_t *p = (int32_t *)OCR_REALLOC(S->widths, (size_t)N * sizeof(int32_t));
        if (!p) return ocr_error(ctx, OCR_ENOMEM, "ocr_rec_forward: out of memory");
        S->widths = p;
        S->widths_cap = N;
    }
    for (n = 0; n < N; n++) S->widths[n] = (int32_t)((int64_t)frames[n] * 4 / shrink);
    widths = ocr_tensor_view("rec.valid_widths", OCR_I32, OCR_DEVICE_CPU, ocr_shape1(N), S->widths);
    return ocr_nn_mask_columns(ctx, x, &widths);
}

OCRDEF int ocr_rec_forward(ocr_ctx *ctx, ocr_rec_model *m, const ocr_tensor *x, const ocr_tensor *input_lengths, int training,
                           ocr_tensor *log_probs) {
    const char *fn = "ocr_rec_forward";
    struct ocr__rec_state *S;
    ocr_conv_params cp = ocr_conv_params_make(1, 1, 1, 1);
    const ocr_tensor *h;
    const int32_t *frames = NULL;
    int64_t N, H, W, T, K, shrink = 1;
    int b, l, rc, slot = 0;
    char d[200];
    if (!m || !m->state_ || !log_probs) return ocr_error(ctx, OCR_EINVAL, "%s: needs a model from ocr_rec_init and log_probs", fn);
    S = m->state_;
    S->phase = 0;
    if ((rc = ocr_check_dtype(ctx, fn, x, OCR_F32))) return rc;
    if (x->device != OCR_DEVICE_CPU && (rc = ocr_check_device(ctx, fn, x, m->params.device))) return rc;
    if (m->params.device != ctx->device)
        return ocr_error(ctx, OCR_EDEVICE, "%s: the model lives on %s, the context runs on %s", fn, ocr_device_name(m->params.device),
                         ocr_device_name(ctx->device));
    if (x->shape.ndim != 4 || x->shape.dim[1] != 3 || x->shape.dim[2] != m->cfg.height || x->shape.dim[3] < 4 || x->shape.dim[3] % 4)
        return ocr_error(ctx, OCR_ESHAPE, "%s: input %s must be [N, 3, %d, W] with W a positive multiple of 4", fn,
                         ocr_tensor_describe(x, d, sizeof d), m->cfg.height);
    N = x->shape.dim[0]; H = x->shape.dim[2]; W = x->shape.dim[3]; T = W / 4; K = m->cfg.n_classes;
    if (input_lengths) {
        int64_t n;
        if ((rc = ocr_check_dtype(ctx, fn, input_lengths, OCR_I32)) || (rc = ocr_check_device(ctx, fn, input_lengths, OCR_DEVICE_CPU)) ||
            (rc = ocr_check_shape(ctx, fn, input_lengths, ocr_shape1(N))))
            return rc;
        frames = (const int32_t *)input_lengths->data;
        for (n = 0; n < N; n++)
            if (frames[n] < 1 || frames[n] > T)
                return ocr_error(ctx, OCR_EINVAL, "%s: tensor '%s': crop %lld has %d frames, must be in [1, W/4 = %lld]", fn,
                                 input_lengths->name, (long long)n, (int)frames[n], (long long)T);
    }
    S->N = N; S->W = W; S->T = T;
    if ((rc = ocr__rec_view(ctx, S, slot++, "rec.x", OCR_F32, x->shape, &S->x)) || (rc = ocr_tensor_copy(ctx, &S->x, x))) return rc;
    h = &S->x;
    for (b = 0; b < OCR_REC_BLOCKS; b++) {
        ocr_tensor w = ocr_params_value(&m->params, S->iw[b]), g = ocr_params_value(&m->params, S->ig[b]);
        ocr_tensor be = ocr_params_value(&m->params, S->ib[b]), rm = ocr_params_value(&m->params, S->imean[b]);
        ocr_tensor rv = ocr_params_value(&m->params, S->ivar[b]);
        int64_t c = m->cfg.channels[b];
        ocr_shape s = ocr_shape4(N, c, H, W);
        if ((rc = ocr__rec_view(ctx, S, slot++, "rec.conv", OCR_F32, s, &S->conv[b])) ||
            (rc = ocr__rec_view(ctx, S, slot++, "rec.act", OCR_F32, s, &S->act[b])) ||
            (rc = ocr__rec_view(ctx, S, slot++, "rec.bn_mean", OCR_F32, ocr_shape1(c), &S->mean[b])) ||
            (rc = ocr__rec_view(ctx, S, slot++, "rec.bn_invstd", OCR_F32, ocr_shape1(c), &S->invstd[b])) ||
            (rc = ocr_nn_conv2d_forward(ctx, h, &w, NULL, cp, &S->conv[b])))
            return rc;
        /* BN and ReLU fused on the CPU, the pair elsewhere (the same values) */
        if (ctx->device == OCR_DEVICE_CPU)
            rc = ocr_nn_batchnorm2d_relu_forward(ctx, &S->conv[b], &g, &be, &rm, &rv, training, m->cfg.bn_momentum, m->cfg.bn_eps,
                                                 &S->mean[b], &S->invstd[b], &S->act[b]);
        else if (!(rc = ocr_nn_batchnorm2d_forward(ctx, &S->conv[b], &g, &be, &rm, &rv, training, m->cfg.bn_momentum, m->cfg.bn_eps,
                                                   &S->mean[b], &S->invstd[b], &S->act[b])))
            rc = ocr_nn_relu_forward(ctx, &S->act[b], &S->act[b]);
        if (rc) return rc;
        /* zeroed activations also stop the gradient: the BN-ReLU backward passes it only where the output is > 0 */
        if (frames && (rc = ocr__rec_mask_columns(ctx, S, &S->act[b], frames, shrink))) return rc;
        h = &S->act[b];
        if (ocr__rec_pool_h[b]) {
            ocr_shape ps = ocr_shape4(N, c, H / 2, W / ocr__rec_pool_w[b]);
            if ((rc = ocr__rec_view(ctx, S, slot++, "rec.pool", OCR_F32, ps, &S->pool[b])) ||
                (rc = ocr__rec_view(ctx, S, slot++, "rec.argmax", OCR_I32, ps, &S->argmax[b])))
                return rc;
            rc = ocr__rec_pool_w[b] == 2 ? ocr_nn_maxpool2d_forward(ctx, h, 2, 2, 0, &S->pool[b], &S->argmax[b])
                                         : ocr_nn_maxpool2d_rect_forward(ctx, h, 2, 1, 2, 1, 0, 0, &S->pool[b], &S->argmax[b]);
            if (rc) return rc;
            h = &S->pool[b];
            H /= 2;
            W /= ocr__rec_pool_w[b];
            shrink *= ocr__rec_pool_w[b];
        } else {
            slot += 2; /* slots stay fixed per activation */
        }
    }
    if ((rc = ocr__rec_view(ctx, S, slot++, "rec.seq", OCR_F32, ocr_shape3(T, N, m->cfg.channels[OCR_REC_BLOCKS - 1]), &S->seq)) ||
        (rc = ocr_nn_map_to_seq_forward(ctx, h, &S->seq)))
        return rc;
    h = &S->seq;
    for (l = 0; l < m->cfg.layers; l++) {
        ocr_tensor views[8];
        ocr_lstm_weights lw = ocr__rec_lstm_weights(m, l, views);
        ocr_shape ys, ss;
        if ((rc = ocr_nn_lstm_shapes(ctx, h->shape, &lw, &ys, &ss)) || (rc = ocr__rec_view(ctx, S, slot, "rec.lstm_y", OCR_F32, ys, &S->y[l])))
            return rc;
        /* the gates and cells are kept for the backward only */
        if (training && (rc = ocr__rec_view(ctx, S, slot + 1, "rec.lstm_saved", OCR_F32, ss, &S->saved[l]))) return rc;
        slot += 2;
        if ((rc = ocr_nn_lstm_forward(ctx, h, &lw, input_lengths, &S->y[l], training ? &S->saved[l] : NULL))) return rc;
        h = &S->y[l];
    }
    {
        ocr_tensor fw = ocr_params_value(&m->params, S->ifc_w), fb = ocr_params_value(&m->params, S->ifc_b);
        if ((rc = ocr__rec_view(ctx, S, slot++, "rec.log_probs", OCR_F32, ocr_shape3(T, N, K), &S->logp)) ||
            (rc = ocr_nn_linear_forward(ctx, h, &fw, &fb, &S->logp)) || (rc = ocr_nn_log_softmax_forward(ctx, &S->logp, &S->logp)))
            return rc;
    }
    if (training) { m->num_batches_tracked++; S->phase = 1; }
    *log_probs = S->logp;
    return OCR_OK;
}

OCRDEF int ocr_rec_backward(ocr_ctx *ctx, ocr_rec_model *m, const ocr_tensor *d_log_probs) {
    const char *fn = "ocr_rec_backward";
    struct ocr__rec_state *S;
    ocr_conv_params cp = ocr_conv_params_make(1, 1, 1, 1);
    int b, l, rc, slot = 48; /* after the forward's slots (47 with 4 layers) */
    ocr_tensor *gh;
    if (!m || !m->state_) return ocr_error(ctx, OCR_EINVAL, "%s: needs a model from ocr_rec_init", fn);
    S = m->state_;
    if (S->phase != 1) return ocr_error(ctx, OCR_ESTATE, "%s: needs a training forward first (once per forward)", fn);
    if ((rc = ocr_check_f32(ctx, fn, d_log_probs)) || (rc = ocr_check_shape(ctx, fn, d_log_probs, S->logp.shape))) return rc;
    S->phase = 0;
    /* classifier */
    {
        ocr_tensor fw = ocr_params_value(&m->params, S->ifc_w), dfw = ocr_params_grad(&m->params, S->ifc_w);
        ocr_tensor dfb = ocr_params_grad(&m->params, S->ifc_b);
        const ocr_tensor *y = &S->y[m->cfg.layers - 1];
        ocr_tensor *gy = &S->g_y[m->cfg.layers - 1];
        if ((rc = ocr__rec_view(ctx, S, slot++, "rec.d_logits", OCR_F32, S->logp.shape, &S->g_logits)) || (rc = ocr_tensor_zero(ctx, &S->g_logits)) ||
            (rc = ocr_nn_log_softmax_backward(ctx, &S->logp, d_log_probs, &S->g_logits)) ||
            (rc = ocr__rec_view(ctx, S, slot++, "rec.d_lstm_y", OCR_F32, y->shape, gy)) || (rc = ocr_tensor_zero(ctx, gy)) ||
            (rc = ocr_nn_linear_backward(ctx, y, &fw, &S->g_logits, gy, &dfw, &dfb)))
            return rc;
    }
    for (l = m->cfg.layers - 1; l >= 0; l--) {
        ocr_tensor views[8], gviews[8];
        ocr_lstm_weights lw = ocr__rec_lstm_weights(m, l, views);
        ocr_lstm_grads lg;
        const ocr_tensor *in = l ? &S->y[l - 1] : &S->seq;
        ocr_tensor *gin = l ? &S->g_y[l - 1] : &S->g_seq;
        int k;
        for (k = 0; k < 8; k++) gviews[k] = ocr_params_grad(&m->params, S->ilstm[l][k]);
        for (k = 0; k < 2; k++) { lg.w_ih[k] = &gviews[4 * k]; lg.w_hh[k] = &gviews[4 * k + 1]; lg.b_ih[k] = &gviews[4 * k + 2]; lg.b_hh[k] = &gviews[4 * k + 3]; }
        if ((rc = ocr__rec_view(ctx, S, slot++, "rec.d_lstm_x", OCR_F32, in->shape, gin)) || (rc = ocr_tensor_zero(ctx, gin)) ||
            (rc = ocr_nn_lstm_backward(ctx, in, &lw, &S->y[l], &S->saved[l], &S->g_y[l], gin, &lg)))
            return rc;
    }
    b = OCR_REC_BLOCKS - 1;
    gh = &S->g_out[b];
    if ((rc = ocr__rec_view(ctx, S, slot++, "rec.d_out", OCR_F32, S->pool[b].shape, gh)) || (rc = ocr_tensor_zero(ctx, gh)) ||
        (rc = ocr_nn_map_to_seq_backward(ctx, &S->g_seq, gh)))
        return rc;
    for (; b >= 0; b--) {
        ocr_tensor g = ocr_params_value(&m->params, S->ig[b]), dg = ocr_params_grad(&m->params, S->ig[b]);
        ocr_tensor dbe = ocr_params_grad(&m->params, S->ib[b]), w = ocr_params_value(&m->params, S->iw[b]);
        ocr_tensor dw = ocr_params_grad(&m->params, S->iw[b]);
        const ocr_tensor *in = b == 0 ? &S->x : ocr__rec_pool_h[b - 1] ? &S->pool[b - 1] : &S->act[b - 1];
        ocr_tensor *gact = &S->g_out[b];
        if (ocr__rec_pool_h[b]) {
            gact = &S->g_act[b];
            if ((rc = ocr__rec_view(ctx, S, slot++, "rec.d_act", OCR_F32, S->act[b].shape, gact)) || (rc = ocr_tensor_zero(ctx, gact)) ||
                (rc = ocr_nn_maxpool2d_backward(ctx, &S->g_out[b], &S->argmax[b], gact)))
                return rc;
        } else slot++;
        if ((rc = ocr__rec_view(ctx, S, slot++, "rec.d_conv", OCR_F32, S->conv[b].shape, &S->g_conv[b])) ||
            (rc = ocr_tensor_zero(ctx, &S->g_conv[b])))
            return rc;
        if (ctx->device == OCR_DEVICE_CPU) {
            rc = ocr_nn_batchnorm2d_relu_backward(ctx, &S->conv[b], &S->act[b], &g, &S->mean[b], &S->invstd[b], gact, 1, &S->g_conv[b], &dg, &dbe);
        } else {   /* the unfused pair: relu_backward into a zeroed buffer, then the BN backward from it */
            ocr_tensor masked;
            if (!(rc = ocr__rec_view(ctx, S, 90 + b, "rec.d_bn", OCR_F32, S->act[b].shape, &masked)) && !(rc = ocr_tensor_zero(ctx, &masked)) &&
                !(rc = ocr_nn_relu_backward(ctx, &S->act[b], gact, &masked)))
                rc = ocr_nn_batchnorm2d_backward(ctx, &S->conv[b], &g, &S->mean[b], &S->invstd[b], &masked, 1, &S->g_conv[b], &dg, &dbe);
        }
        if (rc) return rc;
        if (b > 0) {
            if ((rc = ocr__rec_view(ctx, S, slot++, "rec.d_out", OCR_F32, in->shape, &S->g_out[b - 1])) || (rc = ocr_tensor_zero(ctx, &S->g_out[b - 1])))
                return rc;
        }
        if ((rc = ocr_nn_conv2d_backward(ctx, in, &w, &S->g_conv[b], cp, b > 0 ? &S->g_out[b - 1] : NULL, &dw, NULL))) return rc;
    }
    return OCR_OK;
}

/* ---- checkpoints ---- */

static const char *const ocr__rec_meta_keys[] = {"ocr_rec.height", "ocr_rec.channels", "ocr_rec.hidden", "ocr_rec.layers",
                                                 "ocr_rec.n_classes", "ocr_rec.bn_momentum", "ocr_rec.bn_eps"};
enum { OCR__REC_N_META = 7 };

static void ocr__rec_config_strings(const ocr_rec_config *c, char v[OCR__REC_N_META][96]) {
    int b;
    size_t used = 0;
    snprintf(v[0], 96, "%d", c->height);
    v[1][0] = 0;
    for (b = 0; b < OCR_REC_BLOCKS; b++) used += (size_t)snprintf(v[1] + used, 96 - used, "%s%d", b ? "," : "", c->channels[b]);
    snprintf(v[2], 96, "%d", c->hidden);
    snprintf(v[3], 96, "%d", c->layers);
    snprintf(v[4], 96, "%d", c->n_classes);
    snprintf(v[5], 96, "%.9g", (double)c->bn_momentum);
    snprintf(v[6], 96, "%.9g", (double)c->bn_eps);
}

OCRDEF int ocr_rec_save(ocr_ctx *ctx, const ocr_rec_model *m, const char *path, const char *const *meta_keys,
                        const char *const *meta_values, int n_meta) {
    const char *fn = "ocr_rec_save";
    enum { FIXED = OCR__REC_N_META + 3, MAX_META = 128 };
    char cfgv[OCR__REC_N_META][96], *charset = NULL;
    const char *keys[MAX_META], *vals[MAX_META];
    ocr_tensor *views = NULL;
    const ocr_tensor **ptrs = NULL;
    const ocr_params *P;
    ocr_params host;
    int64_t nbt[OCR_REC_BLOCKS];
    int n = 0, i, j, rc;
    ocr_params_init(&host);
    if (!m || !m->params.allocated) return ocr_error(ctx, OCR_EINVAL, "%s: needs a model from ocr_rec_init", fn);
    if (n_meta < 0 || n_meta > MAX_META - FIXED || (n_meta && (!meta_keys || !meta_values)))
        return ocr_error(ctx, OCR_EINVAL, "%s: %d metadata pairs (at most %d, keys and values non-NULL)", fn, n_meta, MAX_META - FIXED);
    if (!(charset = ocr_charset_to_text(ctx, &m->charset))) return ctx->last_status;
    ocr__rec_config_strings(&m->cfg, cfgv);
    keys[0] = "format"; vals[0] = "pt";
    keys[1] = "ocr_rec.charset"; vals[1] = charset;
    keys[2] = "ocr_rec.input"; vals[2] = "dbnet";
    for (i = 0; i < OCR__REC_N_META; i++) { keys[3 + i] = ocr__rec_meta_keys[i]; vals[3 + i] = cfgv[i]; }
    for (i = 0; i < n_meta; i++) {
        for (j = 0; j < FIXED; j++)
            if (!meta_keys[i] || !meta_values[i] || strcmp(meta_keys[i], keys[j]) == 0) {
                OCR_FREE(charset);
                return ocr_error(ctx, OCR_EINVAL, "%s: metadata key %d ('%s') is NULL, has a NULL value or is reserved", fn, i,
                                 meta_keys[i] ? meta_keys[i] : "(null)");
            }
        keys[FIXED + i] = meta_keys[i];
        vals[FIXED + i] = meta_values[i];
    }
    views = (ocr_tensor *)OCR_MALLOC((size_t)(m->params.count + OCR_REC_BLOCKS) * sizeof *views);
    ptrs = (const ocr_tensor **)OCR_MALLOC((size_t)(m->params.count + OCR_REC_BLOCKS) * sizeof *ptrs);
    if (!views || !ptrs) { rc = ocr_error(ctx, OCR_ENOMEM, "%s: out of memory", fn); goto done; }
    P = &m->params;
    if (P->device != OCR_DEVICE_CPU) {   /* a device model is written from a host copy */
        if ((rc = ocr_params_host_copy(ctx, P, &host))) goto done;
        P = &host;
    }
    for (i = 0; i < P->count; i++) {
        views[n] = ocr_params_value(P, i);
        ptrs[n] = &views[n];
        if ((rc = ocr_check_range(ctx, fn, &views[n], -OCR_LOAD_MAX_ABS, OCR_LOAD_MAX_ABS))) goto done; /* never write what load refuses */
        n++;
    }
    for (i = 0; i < OCR_REC_BLOCKS; i++) {
        char name[OCR_NAME_MAX];
        ocr_shape scalar;
        memset(&scalar, 0, sizeof scalar);
        nbt[i] = m->num_batches_tracked;
        snprintf(name, sizeof name, "cnn.bn%d.num_batches_tracked", i);
        views[n] = ocr_tensor_view(name, OCR_I64, OCR_DEVICE_CPU, scalar, &nbt[i]);
        ptrs[n] = &views[n];
        n++;
    }
    rc = ocr_safetensors_save(ctx, path, ptrs, n, keys, vals, FIXED + n_meta);
done:
    ocr_params_free(&host);
    OCR_FREE(views);
    OCR_FREE((void *)ptrs);
    OCR_FREE(charset);
    return rc;
}

static int ocr__rec_config_from_meta(ocr_ctx *ctx, const char *fn, const ocr_safetensors *st, const char *path, ocr_rec_config *c,
                                     ocr_charset *cs) {
    const char *v[OCR__REC_N_META], *charset = ocr_safetensors_meta(st, "ocr_rec.charset"), *input = ocr_safetensors_meta(st, "ocr_rec.input");
    char *end;
    int i, b, rc;
    for (i = 0; i < OCR__REC_N_META; i++)
        if (!(v[i] = ocr_safetensors_meta(st, ocr__rec_meta_keys[i])))
            return ocr_error(ctx, OCR_EFORMAT, "%s: '%s' has no '%s' in its metadata: not an ocr_rec checkpoint", fn, path, ocr__rec_meta_keys[i]);
    if (!charset) return ocr_error(ctx, OCR_EFORMAT, "%s: '%s' has no 'ocr_rec.charset' in its metadata: not an ocr_rec checkpoint", fn, path);
    if (input && strcmp(input, "dbnet") != 0)
        return ocr_error(ctx, OCR_EFORMAT, "%s: '%s' expects input normalisation '%s'; this version knows 'dbnet'", fn, path, input);
    *c = ocr_rec_config_default();
    {
        long vals[4];
        int idx[4] = {0, 2, 3, 4};
        for (i = 0; i < 4; i++) {
            vals[i] = strtol(v[idx[i]], &end, 10);
            if (end == v[idx[i]] || *end)
                return ocr_error(ctx, OCR_EFORMAT, "%s: '%s' has '%s' = '%s', not an integer", fn, path, ocr__rec_meta_keys[idx[i]], v[idx[i]]);
        }
        c->height = (int)vals[0]; c->hidden = (int)vals[1]; c->layers = (int)vals[2]; c->n_classes = (int)vals[3];
    }
    {
        const char *p = v[1];
        for (b = 0; b < OCR_REC_BLOCKS; b++) {
            long ch = strtol(p, &end, 10);
            if (end == p || (b < OCR_REC_BLOCKS - 1 ? *end != ',' : *end != 0))
                return ocr_error(ctx, OCR_EFORMAT, "%s: '%s' has 'ocr_rec.channels' = '%s', not %d integers", fn, path, v[1], OCR_REC_BLOCKS);
            c->channels[b] = ch > 0 && ch < 100000 ? (int)ch : -1;
            p = end + 1;
        }
    }
    c->bn_momentum = (float)strtod(v[5], &end);
    if (end == v[5] || *end) return ocr_error(ctx, OCR_EFORMAT, "%s: '%s' has a malformed 'ocr_rec.bn_momentum'", fn, path);
    c->bn_eps = (float)strtod(v[6], &end);
    if (end == v[6] || *end) return ocr_error(ctx, OCR_EFORMAT, "%s: '%s' has a malformed 'ocr_rec.bn_eps'", fn, path);
    if ((rc = ocr__rec_check_config(ctx, fn, c))) return rc;
    if (cs) {
        char name[300];
        snprintf(name, sizeof name, "%s:ocr_rec.charset", path);
        if ((rc = ocr_charset_from_text(ctx, cs, charset, strlen(charset), name))) return rc;
        if (cs->n_classes != c->n_classes) {
            int have = cs->n_classes;
            ocr_charset_free(cs);
            return ocr_error(ctx, OCR_EFORMAT, "%s: '%s' has a charset of %d classes but 'ocr_rec.n_classes' = %d", fn, path, have, c->n_classes);
        }
    }
    return OCR_OK;
}

OCRDEF int ocr_rec_read_config(ocr_ctx *ctx, const char *path, ocr_rec_config *cfg, ocr_charset *cs) {
    ocr_safetensors st;
    int rc;
    if (!cfg) return ocr_error(ctx, OCR_EINVAL, "ocr_rec_read_config: cfg is NULL");
    if ((rc = ocr_safetensors_open(ctx, &st, path))) return rc;
    rc = ocr__rec_config_from_meta(ctx, "ocr_rec_read_config", &st, path, cfg, cs);
    ocr_safetensors_close(&st);
    return rc;
}

OCRDEF int ocr_rec_load(ocr_ctx *ctx, ocr_rec_model *m, const char *path) {
    const char *fn = "ocr_rec_load";
    ocr_safetensors st;
    ocr_rec_config fc;
    ocr_charset fcs;
    ocr_params staged;
    int64_t nbt = -1;
    int rc, i, b;
    ocr_params_init(&staged);
    memset(&fcs, 0, sizeof fcs);
    if (!m || !m->params.allocated) return ocr_error(ctx, OCR_EINVAL, "%s: needs a model from ocr_rec_init", fn);
    if ((rc = ocr_safetensors_open(ctx, &st, path))) return rc;
    if ((rc = ocr__rec_config_from_meta(ctx, fn, &st, path, &fc, &fcs))) goto done;
    {
        char fv[OCR__REC_N_META][96], mv[OCR__REC_N_META][96];
        ocr__rec_config_strings(&fc, fv);
        ocr__rec_config_strings(&m->cfg, mv);
        for (i = 0; i < OCR__REC_N_META; i++)
            if (strcmp(fv[i], mv[i]) != 0) {
                rc = ocr_error(ctx, OCR_EINVAL, "%s: '%s' was saved with %s=%s but this model has %s; ocr_rec_init a model with "
                               "ocr_rec_read_config's config to load it", fn, path, ocr__rec_meta_keys[i], fv[i], mv[i]);
                goto done;
            }
        for (i = 1; i < fcs.n_classes; i++)
            if (fcs.chars[i] != m->charset.chars[i]) {
                char a[80], bb[80];
                ocr__rec_describe_cp(fcs.chars[i], a, sizeof a);
                ocr__rec_describe_cp(m->charset.chars[i], bb, sizeof bb);
                rc = ocr_error(ctx, OCR_EINVAL, "%s: '%s' has another charset: its class %d is %s, this model's %s", fn, path, i, a, bb);
                goto done;
            }
    }
    /* every entry is a parameter or a BN's num_batches_tracked (an I64 scalar) */
    for (i = 0; i < st.n_entries; i++) {
        const ocr_safetensors_entry *e = &st.entries[i];
        int known = ocr_params_find(&m->params, e->name) >= 0;
        for (b = 0; b < OCR_REC_BLOCKS && !known; b++) {
            char name[OCR_NAME_MAX];
            snprintf(name, sizeof name, "cnn.bn%d.num_batches_tracked", b);
            if (strcmp(name, e->name) != 0) continue;
            if (e->dtype != OCR_I64 || ocr_shape_numel(e->shape) != 1) {
                rc = ocr_error(ctx, OCR_EFORMAT, "%s: '%s' in '%s' must be an I64 scalar", fn, e->name, path);
                goto done;
            }
            if (nbt < 0) memcpy(&nbt, st.bytes + st.data_start + e->begin, sizeof nbt);
            known = 1;
        }
        if (!known) {
            rc = ocr_error(ctx, OCR_ENOTFOUND, "%s: '%s' holds tensor '%s', which is no parameter of this model", fn, path, e->name);
            goto done;
        }
    }
    if ((rc = ocr_params_host_copy(ctx, &m->params, &staged)) || (rc = ocr_params_load(ctx, &staged, &st, NULL, OCR_LOAD_ALLOW_UNEXPECTED)) ||
        (rc = ocr_params_copy_values(ctx, &m->params, &staged))) {
        char msg[OCR_ERROR_MAX];
        snprintf(msg, sizeof msg, "%s", ctx->last_error);
        ocr_error(ctx, rc, "%s: '%s': %s", fn, path, msg);
        goto done;
    }
    if (nbt >= 0) m->num_batches_tracked = nbt;
    m->state_->phase = 0;
done:
    ocr_charset_free(&fcs);
    ocr_params_free(&staged);
    ocr_safetensors_close(&st);
    return rc;
}

OCRDEF int ocr_rec_init_from_file(ocr_ctx *ctx, ocr_rec_model *m, const char *path) {
    ocr_rec_config cfg;
    ocr_charset cs;
    int rc;
    if (!m) return ocr_error(ctx, OCR_EINVAL, "ocr_rec_init_from_file: m is NULL");
    memset(m, 0, sizeof *m);
    if ((rc = ocr_rec_read_config(ctx, path, &cfg, &cs))) return rc;
    rc = ocr_rec_init(ctx, m, &cfg, &cs);
    ocr_charset_free(&cs);
    if (!rc && (rc = ocr_rec_load(ctx, m, path))) ocr_rec_free(m);
    return rc;
}

/* ---------------------------------------------------------------- crops */

OCRDEF ocr_rec_crop_config ocr_rec_crop_defaults(void) {
    ocr_rec_crop_config c;
    c.height = 32;
    c.max_width = 256;
    c.margin = 0.15f;
    c.margin_jitter = 0.1f;
    c.corner_jitter = 0.06f;
    c.stretch = 0.15f;
    return c;
}

OCRDEF int ocr_rec_frames_needed(const int32_t *labels, int n) {
    int i, f = n;
    for (i = 1; i < n; i++) f += labels[i] == labels[i - 1];
    return f;
}

OCRDEF int ocr_rec_polygon_quad(ocr_ctx *ctx, const ocr_polygon *p, ocr_point quad[4]) {
    if (!p || !p->points || p->n_points < 3) return ocr_error(ctx, OCR_EINVAL, "ocr_rec_polygon_quad: a polygon of at least 3 points");
    if (p->n_points == 4) { memcpy(quad, p->points, 4 * sizeof *quad); return OCR_OK; }
    return ocr_min_area_box(ctx, p->points, p->n_points, quad, NULL);
}

/* bilinear sample of channel c at continuous pixel coordinates (pixel centres at +0.5), edges extended */
static float ocr__rec_bilinear(const ocr_image *img, double x, double y, int c) {
    int x0, y0, x1, y1, W = img->width, H = img->height, C = img->channels;
    double fx, fy, v;
    x -= 0.5; y -= 0.5;
    x = x < 0 ? 0 : x > W - 1 ? W - 1 : x;
    y = y < 0 ? 0 : y > H - 1 ? H - 1 : y;
    x0 = (int)x; y0 = (int)y;
    x1 = x0 + 1 < W ? x0 + 1 : x0; y1 = y0 + 1 < H ? y0 + 1 : y0;
    fx = x - x0; fy = y - y0;
    v = (1 - fy) * ((1 - fx) * img->pixels[((size_t)y0 * W + x0) * C + c] + fx * img->pixels[((size_t)y0 * W + x1) * C + c]) +
        fy * ((1 - fx) * img->pixels[((size_t)y1 * W + x0) * C + c] + fx * img->pixels[((size_t)y1 * W + x1) * C + c]);
    return (float)v;
}

static double ocr__rec_uniform(ocr_rng *r, double lo, double hi) { return lo + (hi - lo) * ocr_rng_uniform(r); }

/* samples per output pixel and axis when the source is shrunk by `shrink`: enough that shrinking averages instead of
   skipping pixels, at most 4 */
static int ocr__rec_supersamples(double shrink) {
    int ss = shrink > 1.25 ? (int)ceil(shrink) : 1;
    return ss > 4 ? 4 : ss;
}

/* the mean of ss * ss RGB samples summed in acc, rounded into pixel (x, y) of an RGB image */
static void ocr__rec_store(ocr_image *out, int x, int y, const float acc[3], int ss) {
    int c;
    for (c = 0; c < 3; c++) {
        float v = acc[c] / (float)(ss * ss) + 0.5f;
        out->pixels[((size_t)y * out->width + x) * 3 + c] = (uint8_t)(v < 0 ? 0 : v > 255 ? 255 : v);
    }
}

OCRDEF int ocr_rec_crop(ocr_ctx *ctx, const ocr_image *img, const ocr_point quad[4], const ocr_rec_crop_config *cfg, ocr_rng *rng,
                        int min_width, ocr_image *out) {
    const char *fn = "ocr_rec_crop";
    ocr_point q[4], dst[4];
    double H[9], ux, uy, vx, vy, len_u, len_v, hgt, wid, aspect;
    int i, k, rw, rh, out_w, ss, x, y, c, full = 1, rc, C;
    if (!img || !img->pixels || img->width < 1 || img->height < 1 || !quad || !cfg || !out)
        return ocr_error(ctx, OCR_EINVAL, "%s: needs an image, a quad, a config and out", fn);
    memset(out, 0, sizeof *out);
    if (cfg->height < 4 || cfg->max_width < 8 || cfg->max_width % 4 || !(cfg->margin >= 0 && cfg->margin < 2))
        return ocr_error(ctx, OCR_EINVAL, "%s: height %d (>= 4), max_width %d (a multiple of 4, >= 8), margin %g (in [0, 2))", fn, cfg->height,
                         cfg->max_width, cfg->margin);
    C = img->channels;
    if (C != 3 && C != 1) return ocr_error(ctx, OCR_EINVAL, "%s: %d channels (1 or 3)", fn, C);
    memcpy(q, quad, sizeof q);
    for (i = 0; i < 4; i++)
        if (!(fabsf(q[i].x) < 1e6f && fabsf(q[i].y) < 1e6f)) return ocr_error(ctx, OCR_ERANGE, "%s: quad point %d is not finite or too far", fn, i);
    for (i = 0; i < 4; i++)
        full &= (q[i].x <= 0.5f || q[i].x >= img->width - 0.5f) && (q[i].y <= 0.5f || q[i].y >= img->height - 0.5f);
    /* reading direction u (left edge midpoint -> right edge midpoint) and height direction v */
    ux = 0.5 * (q[1].x + q[2].x - q[0].x - q[3].x); uy = 0.5 * (q[1].y + q[2].y - q[0].y - q[3].y);
    vx = 0.5 * (q[3].x + q[2].x - q[0].x - q[1].x); vy = 0.5 * (q[3].y + q[2].y - q[0].y - q[1].y);
    len_u = sqrt(ux * ux + uy * uy); len_v = sqrt(vx * vx + vy * vy);
    if (!(len_u >= 1 && len_v >= 1)) return ocr_error(ctx, OCR_EINVAL, "%s: the quad is degenerate (%.2f x %.2f px)", fn, len_u, len_v);
    ux /= len_u; uy /= len_u; vx /= len_v; vy /= len_v;
    hgt = len_v;
    {
        /* margins (left, right, top, bottom) in units of the height, and corner jitter; a whole-image quad keeps its
           outline (jitter pulls corners inwards only) */
        double mg[4], jit = rng ? cfg->corner_jitter : 0.0;
        for (k = 0; k < 4; k++) {
            mg[k] = full ? 0.0 : cfg->margin;
            if (rng && cfg->margin_jitter > 0) mg[k] += ocr__rec_uniform(rng, -cfg->margin_jitter, cfg->margin_jitter) * (full ? 0.0 : 1.0);
            if (mg[k] < 0) mg[k] = 0;
        }
        for (i = 0; i < 4; i++) {
            double sx = (i == 1 || i == 2) ? mg[1] : -mg[0], sy = (i >= 2) ? mg[3] : -mg[2], jx = 0, jy = 0;
            if (jit > 0) {
                jx = ocr__rec_uniform(rng, -jit, jit); jy = ocr__rec_uniform(rng, -jit, jit);
                if (full) { jx = fabs(jx) * ((i == 1 || i == 2) ? -1 : 1); jy = fabs(jy) * (i >= 2 ? -1 : 1); }
            }
            q[i].x = (float)(q[i].x + hgt * ((sx + jx) * ux + (sy + jy) * vx));
            q[i].y = (float)(q[i].y + hgt * ((sx + jx) * uy + (sy + jy) * vy));
        }
    }
    if ((rc = ocr_quad_rectified_size(ctx, q, &rw, &rh))) return rc;
    aspect = (double)rw / (rh > 0 ? rh : 1);
    if (rng && cfg->stretch > 0) aspect *= exp(ocr__rec_uniform(rng, -log(1.0 + cfg->stretch), log(1.0 + cfg->stretch)));
    wid = aspect * cfg->height;
    out_w = (int)ceil(wid / 4.0 - 1e-9) * 4;
    if (out_w < min_width) out_w = (min_width + 3) / 4 * 4;
    if (out_w < 8) out_w = 8;
    if (out_w > cfg->max_width) out_w = cfg->max_width;
    dst[0].x = 0; dst[0].y = 0; dst[1].x = (float)out_w; dst[1].y = 0;
    dst[2].x = (float)out_w; dst[2].y = (float)cfg->height; dst[3].x = 0; dst[3].y = (float)cfg->height;
    if ((rc = ocr_perspective_transform(ctx, dst, q, H))) return rc;
    if ((rc = ocr_image_alloc(ctx, out, out_w, cfg->height, 3))) return rc;
    {
        double sy = (double)rh / cfg->height, sx = (double)rw / out_w;
        ss = ocr__rec_supersamples(sx > sy ? sx : sy);
    }
    for (y = 0; y < cfg->height; y++)
        for (x = 0; x < out_w; x++) {
            float acc[3] = {0, 0, 0};
            int a, bb;
            for (a = 0; a < ss; a++)
                for (bb = 0; bb < ss; bb++) {
                    double px, py;
                    ocr_perspective_apply(H, x + (bb + 0.5) / ss, y + (a + 0.5) / ss, &px, &py);
                    for (c = 0; c < 3; c++) acc[c] += ocr__rec_bilinear(img, px, py, C == 3 ? c : 0);
                }
            ocr__rec_store(out, x, y, acc, ss);
        }
    return OCR_OK;
}

OCRDEF int ocr_rec_crop_to_input(ocr_ctx *ctx, const ocr_image *crop, ocr_tensor *dst) {
    const char *fn = "ocr_rec_crop_to_input";
    ocr_tensor tmp;
    int64_t H, W, c, y;
    int rc;
    /* a batch is assembled on the host whatever the context's device (the forward uploads it) */
    if ((rc = ocr_check_dtype(ctx, fn, dst, OCR_F32)) || (rc = ocr_check_device(ctx, fn, dst, OCR_DEVICE_CPU))) return rc;
    if (dst->shape.ndim != 3 || dst->shape.dim[0] != 3 || !crop || crop->height != dst->shape.dim[1] || crop->width > dst->shape.dim[2]) {
        char d[200];
        return ocr_error(ctx, OCR_ESHAPE, "%s: a %dx%d crop does not fit the [3, H, W] row %s", fn, crop ? crop->width : 0,
                         crop ? crop->height : 0, ocr_tensor_describe(dst, d, sizeof d));
    }
    H = dst->shape.dim[1]; W = dst->shape.dim[2];
    if ((rc = ocr_tensor_alloc(ctx, &tmp, "crop", OCR_F32, OCR_DEVICE_CPU, ocr_shape3(3, H, crop->width)))) return rc;
    if ((rc = ocr_image_normalize(ctx, crop, OCR_NORM_DBNET, &tmp))) { ocr_tensor_free(&tmp); return rc; }
    for (c = 0; c < 3; c++)
        for (y = 0; y < H; y++) {
            float *d = (float *)dst->data + (c * H + y) * W;
            memcpy(d, (const float *)tmp.data + (c * H + y) * crop->width, (size_t)crop->width * sizeof(float));
            memset(d + crop->width, 0, (size_t)(W - crop->width) * sizeof(float));
        }
    ocr_tensor_free(&tmp);
    return OCR_OK;
}

/* ---- the loader transform ---- */

OCRDEF void ocr_rec_loader_setup(const ocr_rec_words_config *wc, ocr_loader_config *lc) {
    int K = wc->max_words > 0 ? wc->max_words : 1;
    lc->n_fields = OCR_REC_N_FIELDS;
    lc->field_names[OCR_REC_F_IMAGES] = "rec_images";
    lc->field_shapes[OCR_REC_F_IMAGES] = ocr_shape3(K, 3 * wc->crop.height, wc->crop.max_width); /* the loader's fields have 3 dims */
    lc->field_names[OCR_REC_F_WORDS] = "rec_words";
    lc->field_shapes[OCR_REC_F_WORDS] = ocr_shape2(K, 2 + wc->crop.max_width / 4);
    lc->field_names[OCR_REC_F_COUNTS] = "rec_counts";
    lc->field_shapes[OCR_REC_F_COUNTS] = ocr_shape1(4);
    lc->transform = ocr_rec_words_transform;
    lc->transform_user = (void *)wc;
}

OCRDEF int ocr_rec_words_transform(ocr_ctx *ctx, void *user, ocr_sample *sample, int64_t index, ocr_rng *rng, ocr_tensor *fields) {
    const ocr_rec_words_config *wc = (const ocr_rec_words_config *)user;
    int K = wc->max_words > 0 ? wc->max_words : 1, L = wc->crop.max_width / 4, i, used = 0, rc, n;
    float *words = (float *)fields[OCR_REC_F_WORDS].data, *counts = (float *)fields[OCR_REC_F_COUNTS].data;
    int32_t *labels;
    (void)index;
    if (!(labels = (int32_t *)OCR_MALLOC((size_t)L * sizeof(int32_t)))) return ocr_error(ctx, OCR_ENOMEM, "ocr_rec_words_transform: out of memory");
    for (i = 0; i < sample->n_polys; i++) {
        const ocr_polygon *p = &sample->polys[i];
        ocr_point quad[4];
        ocr_image crop;
        ocr_tensor row;
        char who[300];
        int k;
        if (p->ignore || !p->text) continue;
        if (used == K) { counts[3] += 1; continue; }
        snprintf(who, sizeof who, "%s", sample->id);
        if ((rc = ocr_charset_encode(ctx, wc->charset, p->text, who, labels, L, &n))) {
            if (rc == OCR_EOVERFLOW) { counts[2] += 1; continue; }
            if (!wc->skip_unknown) { OCR_FREE(labels); return rc; }
            counts[1] += 1;
            continue;
        }
        if (ocr_rec_frames_needed(labels, n) > L) { counts[2] += 1; continue; }
        if ((rc = ocr_rec_polygon_quad(ctx, p, quad)) ||
            (rc = ocr_rec_crop(ctx, &sample->image, quad, &wc->crop, wc->augment ? rng : NULL, 4 * ocr_rec_frames_needed(labels, n), &crop))) {
            counts[2] += 1; /* a degenerate quad: the word cannot be read */
            continue;
        }
        row = ocr_tensor_f32("rec_crop", ocr_shape3(3, wc->crop.height, wc->crop.max_width),
                             (float *)fields[OCR_REC_F_IMAGES].data + (size_t)used * 3 * wc->crop.height * wc->crop.max_width);
        rc = ocr_rec_crop_to_input(ctx, &crop, &row);
        words[(size_t)used * (2 + L)] = (float)crop.width;
        ocr_image_free(&crop);
        if (rc) { OCR_FREE(labels); return rc; }
        words[(size_t)used * (2 + L) + 1] = (float)n;
        for (k = 0; k < n; k++) words[(size_t)used * (2 + L) + 2 + k] = (float)labels[k];
        used++;
    }
    counts[0] = (float)used;
    OCR_FREE(labels);
    return OCR_OK;
}

OCRDEF int ocr_rec_check_labels(ocr_ctx *ctx, ocr_dataset *ds, const ocr_charset *cs, int max_width, int skip_unknown, int64_t *words,
                                int64_t *skipped, char *first, size_t cap) {
    int L = max_width / 4 > 0 ? max_width / 4 : 1, rc = OCR_OK, n;
    int64_t i, nw = 0, ns = 0;
    int32_t *labels = (int32_t *)OCR_MALLOC((size_t)L * sizeof(int32_t));
    if (first && cap) first[0] = 0;
    if (!labels) return ocr_error(ctx, OCR_ENOMEM, "ocr_rec_check_labels: out of memory");
    for (i = 0; i < ds->count && !rc; i++) {
        ocr_sample s;
        int k;
        if ((rc = ocr_dataset_get(ctx, ds, i, OCR_SAMPLE_LABELS_ONLY, &s))) break;
        for (k = 0; k < s.n_polys; k++) {
            char who[600];
            if (s.polys[k].ignore || !s.polys[k].text) continue;
            nw++;
            snprintf(who, sizeof who, "%s' of '%s", s.id, ds->name);
            if ((rc = ocr_charset_encode(ctx, cs, s.polys[k].text, who, labels, L, &n)) == OCR_OK) continue;
            if (rc == OCR_EOVERFLOW) { rc = OCR_OK; continue; } /* too long for the crop width: the transform counts it */
            if (!skip_unknown) break;
            if (!ns && first) snprintf(first, cap, "%s", ocr_ctx_last_error(ctx));
            ns++;
            rc = OCR_OK;
        }
        ocr_sample_free(&s);
    }
    OCR_FREE(labels);
    if (words) *words = nw;
    if (skipped) *skipped = ns;
    return rc;
}

static char *ocr__rec_strdup(const char *s) {
    size_t n = strlen(s) + 1;
    char *d = (char *)OCR_MALLOC(n);
    if (d) memcpy(d, s, n);
    return d;
}

OCRDEF int ocr_rec_word_set_add(ocr_ctx *ctx, ocr_rec_word_set *set, const ocr_sample *sample, const ocr_charset *cs,
                                const ocr_rec_crop_config *cfg, int skip_unknown, int max) {
    int L = cfg->max_width / 4, i, n, rc = OCR_OK;
    int32_t *labels;
    if (!set || !sample || !cs || !cfg) return ocr_error(ctx, OCR_EINVAL, "ocr_rec_word_set_add: bad arguments");
    if (!(labels = (int32_t *)OCR_MALLOC((size_t)(L > 0 ? L : 1) * sizeof(int32_t)))) return ocr_error(ctx, OCR_ENOMEM, "out of memory");
    for (i = 0; i < sample->n_polys && (max <= 0 || set->n < max); i++) {
        const ocr_polygon *p = &sample->polys[i];
        ocr_point quad[4];
        if (p->ignore || !p->text) continue;
        if ((rc = ocr_charset_encode(ctx, cs, p->text, sample->id, labels, L, &n))) {
            if (rc == OCR_EOVERFLOW) { set->too_long++; rc = OCR_OK; continue; }
            if (!skip_unknown) break;
            set->skipped++;
            rc = OCR_OK;
            continue;
        }
        if (ocr_rec_frames_needed(labels, n) > L) { set->too_long++; continue; }
        if (set->n == set->cap) {
            int nc = set->cap ? 2 * set->cap : 64;
            ocr_image *c = (ocr_image *)OCR_REALLOC(set->crops, (size_t)nc * sizeof *c);
            char **l, **d;
            if (c) set->crops = c;
            l = (char **)OCR_REALLOC(set->labels, (size_t)nc * sizeof *l);
            if (l) set->labels = l;
            d = (char **)OCR_REALLOC(set->ids, (size_t)nc * sizeof *d);
            if (d) set->ids = d;
            if (!c || !l || !d) { rc = ocr_error(ctx, OCR_ENOMEM, "ocr_rec_word_set_add: out of memory"); break; }
            set->cap = nc;
        }
        if (ocr_rec_polygon_quad(ctx, p, quad) || ocr_rec_crop(ctx, &sample->image, quad, cfg, NULL, 4 * ocr_rec_frames_needed(labels, n),
                                                               &set->crops[set->n])) {
            set->too_long++; /* a degenerate quad: no readable crop */
            continue;
        }
        set->labels[set->n] = ocr__rec_strdup(p->text);
        set->ids[set->n] = ocr__rec_strdup(sample->id);
        if (!set->labels[set->n] || !set->ids[set->n]) {
            OCR_FREE(set->labels[set->n]); OCR_FREE(set->ids[set->n]); ocr_image_free(&set->crops[set->n]);
            rc = ocr_error(ctx, OCR_ENOMEM, "ocr_rec_word_set_add: out of memory");
            break;
        }
        set->n++;
    }
    OCR_FREE(labels);
    return rc;
}

OCRDEF void ocr_rec_word_set_free(ocr_rec_word_set *set) {
    int i;
    if (!set) return;
    for (i = 0; i < set->n; i++) { ocr_image_free(&set->crops[i]); OCR_FREE(set->labels[i]); OCR_FREE(set->ids[i]); }
    OCR_FREE(set->crops); OCR_FREE(set->labels); OCR_FREE(set->ids);
    memset(set, 0, sizeof *set);
}

/* ---------------------------------------------------------------- the folder dataset */

typedef struct {
    char *root;               /* image folder */
    char *gt_name;
    char **paths, **texts;
    int *lines;
} ocr__rec_folder;

static void ocr__rec_folder_close(ocr_dataset *ds) {
    ocr__rec_folder *F = (ocr__rec_folder *)ds->impl;
    int64_t i;
    if (!F) return;
    for (i = 0; i < ds->count; i++) { OCR_FREE(F->paths[i]); OCR_FREE(F->texts[i]); }
    OCR_FREE(F->paths); OCR_FREE(F->texts); OCR_FREE(F->lines); OCR_FREE(F->root); OCR_FREE(F->gt_name);
    OCR_FREE(F);
    ds->impl = NULL;
}

static void ocr__rec_folder_file(const ocr__rec_folder *F, int64_t i, char *out, size_t cap) {
    if (F->paths[i][0] == '/') snprintf(out, cap, "%s", F->paths[i]);
    else snprintf(out, cap, "%s/%s", F->root, F->paths[i]);
}

static int ocr__rec_folder_encoded(ocr_dataset *ds, ocr_ctx *ctx, int64_t index, unsigned char **bytes, size_t *size) {
    char path[8192];
    ocr__rec_folder_file((const ocr__rec_folder *)ds->impl, index, path, sizeof path);
    return ocr_read_file(ctx, path, OCR_IMAGE_MAX_BYTES, bytes, size);
}

static int ocr__rec_folder_get(ocr_dataset *ds, ocr_ctx *ctx, int64_t index, unsigned flags, ocr_sample *out) {
    const ocr__rec_folder *F = (const ocr__rec_folder *)ds->impl;
    unsigned char *bytes = NULL;
    size_t size = 0, tl;
    char path[8192];
    int rc;
    memset(out, 0, sizeof *out);
    snprintf(out->id, sizeof out->id, "%s:%d %s", F->gt_name, F->lines[index], F->paths[index]);
    ocr__rec_folder_file(F, index, path, sizeof path);
    if ((rc = ocr_read_file(ctx, path, OCR_IMAGE_MAX_BYTES, &bytes, &size))) return rc;
    rc = (flags & OCR_SAMPLE_LABELS_ONLY) ? ocr_image_probe(ctx, bytes, size, &out->image) : ocr_image_decode(ctx, bytes, size, &out->image);
    if (rc) {
        char msg[OCR_ERROR_MAX];
        snprintf(msg, sizeof msg, "%s", ocr_ctx_last_error(ctx));
        OCR_FREE(bytes);
        return ocr_error(ctx, rc, "%s line %d: %s", F->gt_name, F->lines[index], msg);
    }
    out->content_hash = ocr_hash(bytes, size);
    OCR_FREE(bytes);
    tl = strlen(F->texts[index]);
    out->polys = (ocr_polygon *)OCR_MALLOC(sizeof(ocr_polygon));
    if (out->polys) {
        memset(out->polys, 0, sizeof *out->polys);
        out->polys[0].points = (ocr_point *)OCR_MALLOC(4 * sizeof(ocr_point));
        out->polys[0].text = (char *)OCR_MALLOC(tl + 1);
    }
    if (!out->polys || !out->polys[0].points || !out->polys[0].text) { out->n_polys = 1; ocr_sample_free(out); return ocr_error(ctx, OCR_ENOMEM, "out of memory"); }
    out->n_polys = 1;
    memcpy(out->polys[0].text, F->texts[index], tl + 1);
    out->polys[0].n_points = 4;
    out->polys[0].points[0].x = 0; out->polys[0].points[0].y = 0;
    out->polys[0].points[1].x = (float)out->image.width; out->polys[0].points[1].y = 0;
    out->polys[0].points[2].x = (float)out->image.width; out->polys[0].points[2].y = (float)out->image.height;
    out->polys[0].points[3].x = 0; out->polys[0].points[3].y = (float)out->image.height;
    return OCR_OK;
}

OCRDEF int ocr_rec_dataset_open_folder(ocr_ctx *ctx, ocr_dataset *ds, const char *gt_path, const char *image_root) {
    const char *fn = "ocr_rec_dataset_open_folder";
    ocr__rec_folder *F;
    unsigned char *text = NULL;
    size_t size = 0, i = 0;
    int64_t n = 0, cap = 0;
    int line = 1, rc;
    if (!ds || !gt_path) return ocr_error(ctx, OCR_EINVAL, "%s: needs ds and gt_path", fn);
    memset(ds, 0, sizeof *ds);
    if ((rc = ocr_read_file(ctx, gt_path, OCR_LABEL_MAX_BYTES * 16, &text, &size))) return rc;
    if (!(F = (ocr__rec_folder *)OCR_MALLOC(sizeof *F))) { OCR_FREE(text); return ocr_error(ctx, OCR_ENOMEM, "%s: out of memory", fn); }
    memset(F, 0, sizeof *F);
    ds->impl = F;
    ds->close = ocr__rec_folder_close;
    ds->get = ocr__rec_folder_get;
    ds->get_encoded = ocr__rec_folder_encoded;
    snprintf(ds->name, sizeof ds->name, "%s", gt_path);
    {
        const char *slash = strrchr(gt_path, '/');
        size_t rl;
        const char *root = image_root;
        char dir[4096];
        if (!root) {
            if (slash) snprintf(dir, sizeof dir, "%.*s", (int)(slash - gt_path), gt_path);
            else snprintf(dir, sizeof dir, ".");
            root = dir;
        }
        rl = strlen(root);
        F->root = (char *)OCR_MALLOC(rl + 1);
        F->gt_name = (char *)OCR_MALLOC(strlen(gt_path) + 1);
        if (!F->root || !F->gt_name) { rc = ocr_error(ctx, OCR_ENOMEM, "%s: out of memory", fn); goto fail; }
        memcpy(F->root, root, rl + 1);
        memcpy(F->gt_name, gt_path, strlen(gt_path) + 1);
    }
    if (size >= 3 && memcmp(text, "\xEF\xBB\xBF", 3) == 0) i = 3;
    while (i < size) {
        size_t end = i, stop, tab, bad;
        while (end < size && text[end] != '\n') end++;
        stop = end > i && text[end - 1] == '\r' ? end - 1 : end;
        if (stop > i) {
            for (tab = i; tab < stop && text[tab] != '\t'; tab++) {}
            if (tab == stop || tab == i) {
                rc = ocr_error(ctx, OCR_EFORMAT, "%s: '%s' line %d: expected 'path<TAB>text', found '%.*s'", fn, gt_path, line,
                               (int)(stop - i > 200 ? 200 : stop - i), (const char *)text + i);
                goto fail;
            }
            bad = i;
            {
                size_t k = i;
                int32_t cp;
                while (k < stop && ocr_utf8_next((const char *)text, stop, &k, &cp)) {}
                bad = k;
            }
            if (bad < stop) {
                rc = ocr_error(ctx, OCR_EFORMAT, "%s: '%s' line %d is not UTF-8 (byte 0x%02x at column %zu)", fn, gt_path, line, text[bad],
                               bad - i + 1);
                goto fail;
            }
            if (n == cap) {
                int64_t nc = cap ? 2 * cap : 256;
                char **np = (char **)OCR_REALLOC(F->paths, (size_t)nc * sizeof(char *)), **nt;
                int *nl;
                if (np) F->paths = np;
                nt = (char **)OCR_REALLOC(F->texts, (size_t)nc * sizeof(char *));
                if (nt) F->texts = nt;
                nl = (int *)OCR_REALLOC(F->lines, (size_t)nc * sizeof(int));
                if (nl) F->lines = nl;
                if (!np || !nt || !nl) { rc = ocr_error(ctx, OCR_ENOMEM, "%s: out of memory", fn); goto fail; }
                cap = nc;
            }
            F->paths[n] = (char *)OCR_MALLOC(tab - i + 1);
            F->texts[n] = (char *)OCR_MALLOC(stop - tab);
            if (!F->paths[n] || !F->texts[n]) {
                OCR_FREE(F->paths[n]); OCR_FREE(F->texts[n]);
                rc = ocr_error(ctx, OCR_ENOMEM, "%s: out of memory", fn);
                goto fail;
            }
            memcpy(F->paths[n], text + i, tab - i); F->paths[n][tab - i] = 0;
            memcpy(F->texts[n], text + tab + 1, stop - tab - 1); F->texts[n][stop - tab - 1] = 0;
            F->lines[n] = line;
            ds->count = ++n;
        }
        i = end + 1;
        line++;
    }
    OCR_FREE(text);
    if (!n) { ocr__rec_folder_close(ds); return ocr_error(ctx, OCR_EFORMAT, "%s: '%s' lists no crops", fn, gt_path); }
    return OCR_OK;
fail:
    OCR_FREE(text);
    ocr__rec_folder_close(ds);
    memset(ds, 0, sizeof *ds);
    return rc;
}

/* ---------------------------------------------------------------- decoding and recognition */

OCRDEF int ocr_rec_decode(ocr_ctx *ctx, const ocr_rec_model *m, const ocr_tensor *log_probs, const ocr_tensor *input_lengths,
                          int beam_width, char **texts, float *scores) {
    const char *fn = "ocr_rec_decode";
    ocr_tensor labels, lengths, sc, staging, host;
    int64_t T, N, n;
    int rc, k = 0;
    size_t cap;
    char *buf;
    if (!m || !log_probs || !texts || log_probs->shape.ndim != 3) return ocr_error(ctx, OCR_EINVAL, "%s: needs a model, log_probs [T,N,C] and texts", fn);
    T = log_probs->shape.dim[0]; N = log_probs->shape.dim[1];
    for (n = 0; n < N; n++) texts[n] = NULL;
    memset(&labels, 0, sizeof labels); memset(&lengths, 0, sizeof lengths); memset(&sc, 0, sizeof sc); memset(&staging, 0, sizeof staging);
    if ((rc = ocr_tensor_on_host(ctx, log_probs, &staging, &host))) goto done;
    log_probs = &host;
    if (beam_width <= 1) {
        if ((rc = ocr_tensor_alloc(ctx, &labels, "labels", OCR_I32, OCR_DEVICE_CPU, ocr_shape2(N, T))) ||
            (rc = ocr_tensor_alloc(ctx, &lengths, "lengths", OCR_I32, OCR_DEVICE_CPU, ocr_shape1(N))) ||
            (rc = ocr_tensor_alloc(ctx, &sc, "scores", OCR_F32, OCR_DEVICE_CPU, ocr_shape1(N))) ||
            (rc = ocr_ctc_greedy_decode(ctx, log_probs, input_lengths, 0, &labels, &lengths, &sc)))
            goto done;
    } else {
        if ((rc = ocr_tensor_alloc(ctx, &labels, "labels", OCR_I32, OCR_DEVICE_CPU, ocr_shape3(N, 1, T))) ||
            (rc = ocr_tensor_alloc(ctx, &lengths, "lengths", OCR_I32, OCR_DEVICE_CPU, ocr_shape2(N, 1))) ||
            (rc = ocr_tensor_alloc(ctx, &sc, "scores", OCR_F32, OCR_DEVICE_CPU, ocr_shape2(N, 1))) ||
            (rc = ocr_ctc_beam_decode(ctx, log_probs, input_lengths, 0, beam_width, &labels, &lengths, &sc)))
            goto done;
    }
    cap = (size_t)T * 4 + 1;
    for (n = 0; n < N; n++) {
        int len = ((const int32_t *)lengths.data)[n];
        if (!(buf = (char *)OCR_MALLOC(cap))) { rc = ocr_error(ctx, OCR_ENOMEM, "%s: out of memory", fn); goto done; }
        texts[n] = buf;
        if ((rc = ocr_charset_decode(ctx, &m->charset, (const int32_t *)labels.data + n * T, len > 0 ? len : 0, buf, cap))) goto done;
        if (scores) scores[n] = ((const float *)sc.data)[n];
        k++;
    }
done:
    if (rc) for (n = 0; n < N; n++) { OCR_FREE(texts[n]); texts[n] = NULL; }
    (void)k;
    ocr_tensor_free(&labels); ocr_tensor_free(&lengths); ocr_tensor_free(&sc); ocr_tensor_free(&staging);
    return rc;
}

typedef struct { int width, index; } ocr__rec_order;
static int ocr__rec_by_width(const void *a, const void *b) {
    const ocr__rec_order *x = (const ocr__rec_order *)a, *y = (const ocr__rec_order *)b;
    return x->width != y->width ? (x->width < y->width ? -1 : 1) : (x->index < y->index ? -1 : x->index > y->index);
}

/* the mean probability of the characters the best path of sample j emits (0 when it emits none) */
static float ocr__rec_path_confidence(const ocr_tensor *lp, int j, int frames) {
    int64_t T = lp->shape.dim[0], N = lp->shape.dim[1], C = lp->shape.dim[2], t, c;
    int prev = 0, emitted = 0;
    double sum = 0;
    for (t = 0; t < frames && t < T; t++) {
        const float *row = (const float *)lp->data + ((size_t)t * N + j) * C;
        int best = 0;
        for (c = 1; c < C; c++)
            if (row[c] > row[best]) best = (int)c;
        if (best != 0 && best != prev) { sum += exp(row[best]); emitted++; }
        prev = best;
    }
    return emitted ? (float)(sum / emitted) : 0.0f;
}

static int ocr__rec_recognize(ocr_ctx *ctx, ocr_rec_model *m, const ocr_image *crops, int n, int batch_size, int beam_width,
                              char **texts, float *scores, float *confidences);

OCRDEF int ocr_rec_recognize(ocr_ctx *ctx, ocr_rec_model *m, const ocr_image *crops, int n, int batch_size, int beam_width,
                             char **texts, float *scores) {
    return ocr__rec_recognize(ctx, m, crops, n, batch_size, beam_width, texts, scores, NULL);
}

OCRDEF int ocr_rec_recognize_confidence(ocr_ctx *ctx, ocr_rec_model *m, const ocr_image *crops, int n, int batch_size, char **texts,
                                        float *scores, float *confidences) {
    return ocr__rec_recognize(ctx, m, crops, n, batch_size, 0, texts, scores, confidences);
}

static int ocr__rec_recognize(ocr_ctx *ctx, ocr_rec_model *m, const ocr_image *crops, int n, int batch_size, int beam_width,
                              char **texts, float *scores, float *confidences) {
    const char *fn = "ocr_rec_recognize";
    ocr_rec_crop_config cc = ocr_rec_crop_defaults();
    ocr__rec_order *order = NULL;
    ocr_image *rect = NULL;
    ocr_tensor x, il, lp, lp_staging, lph;
    char **bt = NULL;
    float *bs = NULL;
    int i, j, rc = OCR_OK;
    if (!m || !m->state_ || (n && (!crops || !texts)) || n < 0 || batch_size < 1)
        return ocr_error(ctx, OCR_EINVAL, "%s: needs a model, crops, texts and batch_size >= 1", fn);
    for (i = 0; i < n; i++) texts[i] = NULL;
    if (!n) return OCR_OK;
    memset(&x, 0, sizeof x); memset(&il, 0, sizeof il); memset(&lp_staging, 0, sizeof lp_staging);
    cc.height = m->cfg.height;
    cc.max_width = 4096; /* a whole line stays readable: no squeezing at inference */
    order = (ocr__rec_order *)OCR_MALLOC((size_t)n * sizeof *order);
    rect = (ocr_image *)OCR_MALLOC((size_t)n * sizeof *rect);
    bt = (char **)OCR_MALLOC((size_t)batch_size * sizeof *bt);
    bs = (float *)OCR_MALLOC((size_t)batch_size * sizeof *bs);
    if (!order || !rect || !bt || !bs) { rc = ocr_error(ctx, OCR_ENOMEM, "%s: out of memory", fn); goto done; }
    memset(rect, 0, (size_t)n * sizeof *rect);
    for (i = 0; i < n && !rc; i++) {
        ocr_point q[4];
        q[0].x = 0; q[0].y = 0; q[1].x = (float)crops[i].width; q[1].y = 0;
        q[2].x = (float)crops[i].width; q[2].y = (float)crops[i].height; q[3].x = 0; q[3].y = (float)crops[i].height;
        if ((rc = ocr_rec_crop(ctx, &crops[i], q, &cc, NULL, 0, &rect[i]))) {
            char msg[OCR_ERROR_MAX];
            snprintf(msg, sizeof msg, "%s", ocr_ctx_last_error(ctx));
            rc = ocr_error(ctx, rc, "%s: crop %d: %s", fn, i, msg);
        }
        order[i].width = rect[i].width;
        order[i].index = i;
    }
    if (rc) goto done;
    qsort(order, (size_t)n, sizeof *order, ocr__rec_by_width);
    for (i = 0; i < n && !rc; i += batch_size) {
        int nb = n - i < batch_size ? n - i : batch_size, W = order[i + nb - 1].width;
        ocr_tensor row;
        ocr_tensor_free(&x); ocr_tensor_free(&il);
        if ((rc = ocr_tensor_alloc(ctx, &x, "rec_input", OCR_F32, OCR_DEVICE_CPU, ocr_shape4(nb, 3, m->cfg.height, W))) ||
            (rc = ocr_tensor_alloc(ctx, &il, "input_lengths", OCR_I32, OCR_DEVICE_CPU, ocr_shape1(nb))))
            break;
        for (j = 0; j < nb && !rc; j++) {
            const ocr_image *c = &rect[order[i + j].index];
            row = ocr_tensor_f32("rec_row", ocr_shape3(3, m->cfg.height, W), (float *)x.data + (size_t)j * 3 * m->cfg.height * W);
            rc = ocr_rec_crop_to_input(ctx, c, &row);
            ((int32_t *)il.data)[j] = c->width / 4;
        }
        if (rc || (rc = ocr_rec_forward(ctx, m, &x, &il, 0, &lp)) || (rc = ocr_tensor_on_host(ctx, &lp, &lp_staging, &lph)) ||
            (rc = ocr_rec_decode(ctx, m, &lph, &il, beam_width, bt, bs)))
            break;
        for (j = 0; j < nb; j++) {
            texts[order[i + j].index] = bt[j];
            if (scores) scores[order[i + j].index] = bs[j];
            if (confidences) confidences[order[i + j].index] = ocr__rec_path_confidence(&lph, j, ((const int32_t *)il.data)[j]);
        }
    }
done:
    if (rc) for (i = 0; i < n; i++) { OCR_FREE(texts[i]); texts[i] = NULL; }
    if (rect) for (i = 0; i < n; i++) ocr_image_free(&rect[i]);
    OCR_FREE(rect); OCR_FREE(order); OCR_FREE(bt); OCR_FREE(bs);
    ocr_tensor_free(&x); ocr_tensor_free(&il); ocr_tensor_free(&lp_staging);
    return rc;
}

/* ---------------------------------------------------------------- evaluation */

OCRDEF int64_t ocr_rec_edit_distance(const int32_t *a, int na, const int32_t *b, int nb) {
    int64_t *row, prev, i, j, d;
    if (!na) return nb;
    if (!nb) return na;
    if (!(row = (int64_t *)OCR_MALLOC((size_t)(nb + 1) * sizeof *row))) return na > nb ? na : nb;
    for (j = 0; j <= nb; j++) row[j] = j;
    for (i = 1; i <= na; i++) {
        prev = row[0];
        row[0] = i;
        for (j = 1; j <= nb; j++) {
            int64_t cur = row[j];
            d = prev + (a[i - 1] != b[j - 1]);
            if (row[j] + 1 < d) d = row[j] + 1;
            if (row[j - 1] + 1 < d) d = row[j - 1] + 1;
            row[j] = d;
            prev = cur;
        }
    }
    d = row[nb];
    OCR_FREE(row);
    return d;
}

/* code points of UTF-8 text (an invalid byte counts as one character of its own value) */
static int32_t *ocr__rec_cps(const char *s, int *n) {
    size_t len = s ? strlen(s) : 0, i = 0;
    int32_t *cps = (int32_t *)OCR_MALLOC((len + 1) * sizeof(int32_t));
    *n = 0;
    if (!cps) return NULL;
    while (i < len) {
        int32_t cp;
        if (!ocr_utf8_next(s, len, &i, &cp)) cp = (unsigned char)s[i++] | 0x110000;
        cps[(*n)++] = cp;
    }
    return cps;
}

/* to one case, as Python's str.upper() compares them, for ASCII, Latin-1, Œ, Greek (with tonos; final sigma) and
   Cyrillic; ß stays itself (upper() makes it "SS", two characters) */
static int32_t ocr__rec_fold(int32_t c) {
    if ((c >= 'A' && c <= 'Z') || (c >= 0xC0 && c <= 0xDE && c != 0xD7) || (c >= 0x391 && c <= 0x3AB && c != 0x3A2) || (c >= 0x410 && c <= 0x42F))
        return c + 0x20;
    if (c >= 0x400 && c <= 0x40F) return c + 0x50;
    if (c == 0x152) return 0x153;
    if (c == 0x3C2) return 0x3C3;                          /* final sigma */
    if (c == 0x386) return 0x3AC;                          /* Greek capitals with tonos */
    if (c >= 0x388 && c <= 0x38A) return c + 0x25;
    if (c == 0x38C) return 0x3CC;
    if (c == 0x38E || c == 0x38F) return c + 0x3F;
    return c;
}

OCRDEF void ocr_rec_eval_init(ocr_rec_eval *e) { memset(e, 0, sizeof *e); }

OCRDEF void ocr_rec_eval_add(ocr_rec_eval *e, const char *label, const char *prediction) {
    int na, nb, i, same = 1, bin;
    int32_t *a = ocr__rec_cps(label, &na), *b = ocr__rec_cps(prediction, &nb);
    int64_t d;
    if (!a || !b) { OCR_FREE(a); OCR_FREE(b); return; }
    d = ocr_rec_edit_distance(a, na, b, nb);
    e->words++;
    e->empty += nb == 0;
    e->gt_chars += na;
    e->edits += d;
    e->ned_sum += na || nb ? (double)d / (double)(na > nb ? na : nb) : 0.0;
    e->correct += d == 0;
    if (na == nb) for (i = 0; i < na && same; i++) same = ocr__rec_fold(a[i]) == ocr__rec_fold(b[i]);
    else same = 0;
    e->correct_nocase += same;
    bin = na < 1 ? 1 : na > OCR_REC_LEN_BINS ? OCR_REC_LEN_BINS : na;
    e->by_len_words[bin]++;
    e->by_len_correct[bin] += d == 0;
    OCR_FREE(a);
    OCR_FREE(b);
}

OCRDEF ocr_rec_eval_result ocr_rec_eval_finish(const ocr_rec_eval *e) {
    ocr_rec_eval_result r;
    memset(&r, 0, sizeof r);
    if (!e->words) return r;
    r.accuracy = (double)e->correct / (double)e->words;
    r.accuracy_nocase = (double)e->correct_nocase / (double)e->words;
    r.cer = e->gt_chars ? (double)e->edits / (double)e->gt_chars : 0.0;
    r.one_minus_ned = 1.0 - e->ned_sum / (double)e->words;
    r.empty_share = (double)e->empty / (double)e->words;
    return r;
}

OCRDEF ocr_rec_decode_watch ocr_rec_decode_watch_default(void) {
    ocr_rec_decode_watch w;
    w.threshold = 0.5;
    w.patience = 2;
    w.in_a_row = 0;
    w.last = 0.0;
    return w;
}

OCRDEF int ocr_rec_decode_watch_update(ocr_rec_decode_watch *w, double empty_share) {
    w->last = empty_share;
    w->in_a_row = empty_share >= w->threshold ? w->in_a_row + 1 : 0;
    return w->in_a_row >= w->patience;
}


/* ---------------------------------------------------------------- reading: detector and recognizer together */

OCRDEF ocr_pipeline_config ocr_pipeline_config_default(void) {
    ocr_pipeline_config c;
    memset(&c, 0, sizeof c);
    c.post = ocr_post_config_default(OCR_POST_BOX);
    c.det_scale = 1.4f;
    c.det_max_side = 1280;
    c.crop = ocr_rec_crop_defaults();
    c.crop.height = 0;          /* the recognizer's */
    c.crop.max_width = 4096;    /* a whole line stays readable: no squeezing at inference */
    c.rec_batch = 32;
    c.vertical_ratio = 1.5f;
    c.rotate_below = 0.5f;
    c.min_confidence = 0.8f;
    return c;
}

OCRDEF void ocr_reading_free(ocr_reading *r) {
    int i;
    if (!r) return;
    for (i = 0; i < r->n; i++) {
        OCR_FREE(r->lines[i].poly.points);
        OCR_FREE(r->lines[i].text);
    }
    OCR_FREE(r->lines);
    memset(r, 0, sizeof *r);
}

OCRDEF void ocr_pipeline_close(ocr_pipeline *p) {
    if (!p) return;
    if (p->open_) {
        ocr_dbnet_free(&p->det);
        ocr_rec_free(&p->rec);
    }
    ocr_tensor_free(&p->input_);
    ocr_tensor_free(&p->prob_host_);
    ocr_detections_free(&p->dets_);
    memset(p, 0, sizeof *p);
}

OCRDEF int ocr_pipeline_open(ocr_ctx *ctx, ocr_pipeline *p, const char *det_path, const char *rec_path, const ocr_pipeline_config *cfg) {
    const char *fn = "ocr_pipeline_open";
    char msg[OCR_ERROR_MAX];
    ocr_rec_config rc_cfg;
    ocr_charset cs;
    ocr_dbnet_config dc;
    int rc, i;
    if (!p || !det_path || !rec_path || !cfg) return ocr_error(ctx, OCR_EINVAL, "%s: needs a pipeline, both model paths and a config", fn);
    memset(p, 0, sizeof *p);
    if (!(cfg->det_scale > 0 && cfg->det_scale <= 8) || cfg->det_short_side < 0 || cfg->det_long_side < 0 ||
        cfg->det_max_side < 32 || cfg->det_max_side > OCR_IMAGE_MAX_SIDE || cfg->rec_batch < 1 || cfg->beam_width < 0 ||
        !(cfg->vertical_ratio >= 1) || !(cfg->rotate_below >= 0 && cfg->rotate_below <= 1) ||
        !(cfg->min_confidence >= 0 && cfg->min_confidence <= 1) || cfg->crop.max_width < 8 || cfg->crop.max_width % 4)
        return ocr_error(ctx, OCR_EINVAL,
                         "%s: config out of range: det_scale %g (in (0, 8]), det_short_side %d, det_long_side %d (>= 0), det_max_side %d "
                         "(32 to %d), rec_batch %d (>= 1), beam_width %d (>= 0), vertical_ratio %g (>= 1), rotate_below %g and "
                         "min_confidence %g (in [0, 1]), crop.max_width %d (a multiple of 4, >= 8)",
                         fn, cfg->det_scale, cfg->det_short_side, cfg->det_long_side, cfg->det_max_side, OCR_IMAGE_MAX_SIDE,
                         cfg->rec_batch, cfg->beam_width, cfg->vertical_ratio, cfg->rotate_below, cfg->min_confidence, cfg->crop.max_width);
    /* a checkpoint of the other kind is the likely mistake: say so rather than "a tensor is missing" */
    if ((rc = ocr_dbnet_read_config(ctx, det_path, &dc))) {
        snprintf(msg, sizeof msg, "%s", ocr_ctx_last_error(ctx));
        if (ocr_rec_read_config(ctx, det_path, &rc_cfg, &cs) == OCR_OK) {
            ocr_charset_free(&cs);
            return ocr_error(ctx, OCR_EINVAL, "%s: '%s', given as the detector, is a recognizer checkpoint (ocr_rec.* metadata): swap the two",
                             fn, det_path);
        }
        return ocr_error(ctx, rc, "%s: detector '%s': %s", fn, det_path, msg);
    }
    if ((rc = ocr_rec_read_config(ctx, rec_path, &rc_cfg, &cs))) {
        snprintf(msg, sizeof msg, "%s", ocr_ctx_last_error(ctx));
        if (ocr_dbnet_read_config(ctx, rec_path, &dc) == OCR_OK)
            return ocr_error(ctx, OCR_EINVAL, "%s: '%s', given as the recognizer, is a detector checkpoint (DBNet): swap the two", fn,
                             rec_path);
        return ocr_error(ctx, rc, "%s: recognizer '%s': %s", fn, rec_path, msg);
    }
    if (cfg->crop.height && cfg->crop.height != rc_cfg.height) {
        ocr_charset_free(&cs);
        return ocr_error(ctx, OCR_EINVAL, "%s: crops of height %d asked for, but the recognizer '%s' reads height %d", fn, cfg->crop.height,
                         rec_path, rc_cfg.height);
    }
    if (cfg->charset) {
        ocr_charset want;
        if ((rc = ocr_charset_init(ctx, &want, cfg->charset))) { ocr_charset_free(&cs); return rc; }
        for (i = 1; i < want.n_classes && i < cs.n_classes && want.chars[i] == cs.chars[i]; i++) {}
        if (want.n_classes != cs.n_classes || i < want.n_classes) {
            char a[48] = "(none)", b[48] = "(none)";
            if (i < want.n_classes) ocr__rec_describe_cp(want.chars[i], a, sizeof a);
            if (i < cs.n_classes) ocr__rec_describe_cp(cs.chars[i], b, sizeof b);
            rc = ocr_error(ctx, OCR_EINVAL,
                           "%s: the recognizer '%s' has another charset (%d classes) than '%s' (%d classes): class %d is %s there, %s "
                           "in '%s'", fn, rec_path, cs.n_classes, want.name, want.n_classes, i, b, a, want.name);
        }
        ocr_charset_free(&want);
        if (rc) { ocr_charset_free(&cs); return rc; }
    }
    ocr_charset_free(&cs);
    if ((rc = ocr_dbnet_init_from_file(ctx, &p->det, det_path))) {
        snprintf(msg, sizeof msg, "%s", ocr_ctx_last_error(ctx));
        return ocr_error(ctx, rc, "%s: detector '%s': %s", fn, det_path, msg);
    }
    if ((rc = ocr_rec_init_from_file(ctx, &p->rec, rec_path))) {
        snprintf(msg, sizeof msg, "%s", ocr_ctx_last_error(ctx));
        ocr_dbnet_free(&p->det);
        memset(p, 0, sizeof *p);
        return ocr_error(ctx, rc, "%s: recognizer '%s': %s", fn, rec_path, msg);
    }
    p->cfg = *cfg;
    p->cfg.crop.height = p->rec.cfg.height;
    p->cfg.charset = NULL; /* checked; the caller's string need not outlive this call */
    p->open_ = 1;
    return OCR_OK;
}

OCRDEF int ocr_pipeline_read(ocr_ctx *ctx, ocr_pipeline *p, const ocr_image *img, ocr_reading *out) {
    const char *fn = "ocr_pipeline_read";
    ocr_tensor prob;
    int in_w, in_h, rc;
    double t0 = ocr_monotonic_seconds(), det_seconds;
    if (!p || !p->open_ || !img || !img->pixels || !out) return ocr_error(ctx, OCR_EINVAL, "%s: needs an open pipeline, an image and out", fn);
    if (p->cfg.det_short_side > 0 || p->cfg.det_long_side > 0) {
        if ((rc = ocr_infer_input_size(ctx, img->width, img->height, p->cfg.det_short_side, p->cfg.det_long_side, &in_w, &in_h))) return rc;
    } else if ((rc = ocr_infer_input_size_scaled(ctx, img->width, img->height, p->cfg.det_scale, p->cfg.det_max_side, &in_w, &in_h))) {
        return rc;
    }
    if (p->input_.shape.ndim != 4 || p->input_.shape.dim[2] != in_h || p->input_.shape.dim[3] != in_w) {
        ocr_tensor_free(&p->input_);
        if ((rc = ocr_tensor_alloc(ctx, &p->input_, "input", OCR_F32, OCR_DEVICE_CPU, ocr_shape4(1, 3, in_h, in_w)))) return rc;
    }
    /* post-processing reads the map on the host */
    if ((rc = ocr_image_network_input(ctx, img, OCR_NORM_DBNET, &p->input_)) ||
        (rc = ocr_dbnet_forward(ctx, &p->det, &p->input_, 0, &prob, NULL)) || (rc = ocr_tensor_on_host(ctx, &prob, &p->prob_host_, &prob)) ||
        (rc = ocr_postprocess(ctx, &p->cfg.post, &prob, img->width, img->height, &p->dets_)))
        return rc;
    det_seconds = ocr_monotonic_seconds() - t0;
    rc = ocr_pipeline_read_regions(ctx, p, img, p->dets_.polys, p->dets_.scores, p->dets_.n, out);
    out->det_seconds = det_seconds;
    return rc;
}

/* turns the reading-order quad by k quarter turns clockwise: the text's first corner moves to the next one */
static void ocr__rec_quad_turn(const ocr_point in[4], int k, ocr_point out[4]) {
    int i;
    for (i = 0; i < 4; i++) out[i] = in[(i + k) % 4];
}

static double ocr__rec_dist(ocr_point a, ocr_point b) { return sqrt((double)(a.x - b.x) * (a.x - b.x) + (double)(a.y - b.y) * (a.y - b.y)); }

static void ocr__rec_image_turn180(ocr_image *img) {
    size_t n = (size_t)img->width * img->height, i, C = (size_t)img->channels, c;
    for (i = 0; i < n / 2; i++)
        for (c = 0; c < C; c++) {
            uint8_t t = img->pixels[i * C + c];
            img->pixels[i * C + c] = img->pixels[(n - 1 - i) * C + c];
            img->pixels[(n - 1 - i) * C + c] = t;
        }
}

typedef struct { float cy, cx, h; int index; } ocr__rec_place;
static int ocr__rec_by_y(const void *a, const void *b) {
    const ocr__rec_place *x = (const ocr__rec_place *)a, *y = (const ocr__rec_place *)b;
    return x->cy != y->cy ? (x->cy < y->cy ? -1 : 1) : (x->index < y->index ? -1 : x->index > y->index);
}
static int ocr__rec_by_x(const void *a, const void *b) {
    const ocr__rec_place *x = (const ocr__rec_place *)a, *y = (const ocr__rec_place *)b;
    return x->cx != y->cx ? (x->cx < y->cx ? -1 : 1) : (x->index < y->index ? -1 : x->index > y->index);
}

OCRDEF int ocr_pipeline_read_regions(ocr_ctx *ctx, ocr_pipeline *p, const ocr_image *img, const ocr_polygon *regions,
                                     const float *det_scores, int n, ocr_reading *out) {
    const char *fn = "ocr_pipeline_read_regions";
    ocr_image *crops = NULL;
    ocr_point (*quads)[4] = NULL;
    int *rotation = NULL, *redo = NULL, *skip = NULL, n_redo = 0, i, k, rc = OCR_OK, kept = 0;
    char **texts = NULL, **texts2 = NULL;
    float *scores = NULL, *scores2 = NULL, *conf = NULL, *conf2 = NULL;
    ocr_text_line *lines = NULL;
    ocr__rec_place *place = NULL;
    double t0 = ocr_monotonic_seconds();
    if (!p || !p->open_ || !img || !img->pixels || !out || n < 0 || (n && !regions))
        return ocr_error(ctx, OCR_EINVAL, "%s: needs an open pipeline, an image, regions and out", fn);
    ocr_reading_free(out);
    out->detections = n;
    if (!n) { out->rec_seconds = ocr_monotonic_seconds() - t0; return OCR_OK; }
    crops = (ocr_image *)OCR_MALLOC((size_t)n * sizeof *crops);
    quads = (ocr_point(*)[4])OCR_MALLOC((size_t)n * sizeof *quads);
    rotation = (int *)OCR_MALLOC((size_t)n * 3 * sizeof *rotation);
    texts = (char **)OCR_MALLOC((size_t)n * 2 * sizeof *texts);
    scores = (float *)OCR_MALLOC((size_t)n * 4 * sizeof *scores);
    lines = (ocr_text_line *)OCR_MALLOC((size_t)n * sizeof *lines);
    place = (ocr__rec_place *)OCR_MALLOC((size_t)n * sizeof *place);
    if (!crops || !quads || !rotation || !texts || !scores || !lines || !place) { rc = ocr_error(ctx, OCR_ENOMEM, "%s: out of memory", fn); goto done; }
    memset(crops, 0, (size_t)n * sizeof *crops);
    memset(texts, 0, (size_t)n * 2 * sizeof *texts);
    memset(lines, 0, (size_t)n * sizeof *lines);
    redo = rotation + n; skip = rotation + 2 * n; texts2 = texts + n; scores2 = scores + n; conf = scores + 2 * n; conf2 = scores + 3 * n;
    for (i = 0; i < n && !rc; i++) {
        const ocr_polygon *r = &regions[i];
        ocr_point q[4];
        if ((rc = ocr_poly_check(ctx, fn, "region", r->points, r->n_points))) break;
        if ((rc = ocr_rec_polygon_quad(ctx, r, q))) break;
        /* a tall box is text running top to bottom: read along its long side */
        rotation[i] = ocr__rec_dist(q[1], q[2]) >= p->cfg.vertical_ratio * ocr__rec_dist(q[0], q[1]) ? 90 : 0;
        ocr__rec_quad_turn(q, rotation[i] / 90, quads[i]);
        {
            /* a region under a pixel across (as ocr_rec_crop measures it) has nothing to read: it is left out, not an
               error for the whole image */
            const ocr_point *t = quads[i];
            double ux = t[1].x + t[2].x - t[0].x - t[3].x, uy = t[1].y + t[2].y - t[0].y - t[3].y;
            double vx = t[3].x + t[2].x - t[0].x - t[1].x, vy = t[3].y + t[2].y - t[0].y - t[1].y;
            skip[i] = !(0.25 * (ux * ux + uy * uy) >= 1 && 0.25 * (vx * vx + vy * vy) >= 1);
            if (skip[i]) {
                if ((rc = ocr_image_alloc(ctx, &crops[i], 8, p->cfg.crop.height, 3))) break;
                memset(crops[i].pixels, 0, (size_t)8 * p->cfg.crop.height * 3);
                continue;
            }
        }
        rc = r->n_points == 4 ? ocr_rec_crop(ctx, img, quads[i], &p->cfg.crop, NULL, 0, &crops[i])
                              : ocr_rec_crop_polygon(ctx, img, r->points, r->n_points, quads[i], &p->cfg.crop, &crops[i]);
        if (rc) {
            char msg[OCR_ERROR_MAX];
            snprintf(msg, sizeof msg, "%s", ocr_ctx_last_error(ctx));
            rc = ocr_error(ctx, rc, "%s: region %d: %s", fn, i, msg);
        }
    }
    if (rc || (rc = ocr__rec_recognize(ctx, &p->rec, crops, n, p->cfg.rec_batch, p->cfg.beam_width, texts, scores, conf))) goto done;
    for (i = 0; i < n; i++) {
        if (conf[i] < p->cfg.rotate_below) {
            ocr__rec_image_turn180(&crops[i]);
            redo[n_redo] = i;
            if (n_redo != i) { /* compacted in place: slot n_redo < i holds a crop already read and done with */
                ocr_image_free(&crops[n_redo]);
                crops[n_redo] = crops[i];
                memset(&crops[i], 0, sizeof crops[i]);
            }
            n_redo++;
        }
    }
    if (n_redo && (rc = ocr__rec_recognize(ctx, &p->rec, crops, n_redo, p->cfg.rec_batch, p->cfg.beam_width, texts2, scores2, conf2)))
        goto done;
    for (k = 0; k < n_redo; k++) {
        int j = redo[k];
        float c2 = conf2[k];
        if (c2 > conf[j]) {
            ocr_point q[4];
            OCR_FREE(texts[j]);
            texts[j] = texts2[k];
            texts2[k] = NULL;
            conf[j] = c2;
            rotation[j] += 180;
            memcpy(q, quads[j], sizeof q);
            ocr__rec_quad_turn(q, 2, quads[j]);
        }
    }
    for (i = 0; i < n; i++) {
        const ocr_polygon *r = &regions[i];
        ocr_text_line *L;
        if (skip[i] || (!texts[i][0] && !p->cfg.keep_empty) || conf[i] < p->cfg.min_confidence) continue;
        L = &lines[kept];
        if (!(L->poly.points = (ocr_point *)OCR_MALLOC((size_t)r->n_points * sizeof(ocr_point)))) {
            rc = ocr_error(ctx, OCR_ENOMEM, "%s: out of memory", fn);
            break;
        }
        memcpy(L->poly.points, r->points, (size_t)r->n_points * sizeof(ocr_point));
        L->poly.n_points = r->n_points;
        L->text = L->poly.text = texts[i];
        texts[i] = NULL;
        memcpy(L->quad, quads[i], sizeof L->quad);
        L->det_score = det_scores ? det_scores[i] : 1.0f;
        L->rec_score = conf[i];
        L->rotation = rotation[i] % 360;
        place[kept].cx = 0.25f * (L->quad[0].x + L->quad[1].x + L->quad[2].x + L->quad[3].x);
        place[kept].cy = 0.25f * (L->quad[0].y + L->quad[1].y + L->quad[2].y + L->quad[3].y);
        place[kept].h = (float)ocr__rec_dist(L->quad[0], L->quad[3]);
        place[kept].index = kept;
        kept++;
    }
    if (!rc) {
        /* reading order: by centre height, then rows (centres within half a line height of the row's first) by x */
        ocr_text_line *sorted = (ocr_text_line *)OCR_MALLOC((size_t)(kept ? kept : 1) * sizeof *sorted);
        if (!sorted) rc = ocr_error(ctx, OCR_ENOMEM, "%s: out of memory", fn);
        else {
            qsort(place, (size_t)kept, sizeof *place, ocr__rec_by_y);
            for (i = 0; i < kept;) {
                int j = i + 1;
                while (j < kept && place[j].cy - place[i].cy < 0.5f * (place[i].h < place[j].h ? place[i].h : place[j].h)) j++;
                qsort(place + i, (size_t)(j - i), sizeof *place, ocr__rec_by_x);
                i = j;
            }
            for (i = 0; i < kept; i++) sorted[i] = lines[place[i].index];
            OCR_FREE(lines);
            lines = sorted;
            out->lines = lines;
            out->n = kept;
            lines = NULL;
        }
    }
done:
    if (lines) for (i = 0; i < kept; i++) { OCR_FREE(lines[i].poly.points); OCR_FREE(lines[i].text); }
    OCR_FREE(lines);
    if (crops) for (i = 0; i < n; i++) ocr_image_free(&crops[i]);
    if (texts) for (i = 0; i < 2 * n; i++) OCR_FREE(texts[i]);
    OCR_FREE(crops); OCR_FREE(quads); OCR_FREE(rotation); OCR_FREE(texts); OCR_FREE(scores); OCR_FREE(place);
    out->rec_seconds = ocr_monotonic_seconds() - t0;
    return rc;
}

OCRDEF int ocr_rec_crop_polygon(ocr_ctx *ctx, const ocr_image *img, const ocr_point *pts, int n, const ocr_point quad[4],
                                const ocr_rec_crop_config *cfg, ocr_image *out) {
    const char *fn = "ocr_rec_crop_polygon";
    enum { MAX_K = 64 };
    double top[MAX_K + 1], bot[MAX_K + 1], ux, uy, vx, vy, len_u, len_v, mean_h = 0, m, span, W_scale;
    int K, k, i, rc, out_w, ss, x, y, c, C;
    if (!img || !img->pixels || !pts || n < 3 || !quad || !cfg || !out)
        return ocr_error(ctx, OCR_EINVAL, "%s: needs an image, a polygon of >= 3 points, its quad, a config and out", fn);
    memset(out, 0, sizeof *out);
    if (cfg->height < 4 || cfg->max_width < 8 || cfg->max_width % 4 || !(cfg->margin >= 0 && cfg->margin < 2))
        return ocr_error(ctx, OCR_EINVAL, "%s: height %d (>= 4), max_width %d (a multiple of 4, >= 8), margin %g (in [0, 2))", fn, cfg->height,
                         cfg->max_width, cfg->margin);
    if ((rc = ocr_poly_check(ctx, fn, "polygon", pts, n))) return rc;
    C = img->channels;
    if (C != 3 && C != 1) return ocr_error(ctx, OCR_EINVAL, "%s: %d channels (1 or 3)", fn, C);
    ux = quad[1].x - quad[0].x; uy = quad[1].y - quad[0].y;
    vx = quad[3].x - quad[0].x; vy = quad[3].y - quad[0].y;
    len_u = sqrt(ux * ux + uy * uy); len_v = sqrt(vx * vx + vy * vy);
    if (!(len_u >= 1 && len_v >= 1)) return ocr_error(ctx, OCR_EINVAL, "%s: the quad is degenerate (%.2f x %.2f px)", fn, len_u, len_v);
    ux /= len_u; uy /= len_u;
    /* across the axis: perpendicular to it, pointing from the top edge to the bottom one */
    vx = -uy; vy = ux;
    if (vx * (quad[3].x - quad[0].x) + vy * (quad[3].y - quad[0].y) < 0) { vx = -vx; vy = -vy; }
    K = (int)ceil(len_u / 3.0); /* every few pixels: a chord between samples cuts into a bend's margin */
    K = K < 2 ? 2 : K > MAX_K ? MAX_K : K;
    for (k = 0; k <= K; k++) {
        /* the polygon's extent across the axis at this position (kept off the very ends, where it is a point) */
        double t = len_u * (0.02 + 0.96 * k / K), lo = 1e30, hi = -1e30;
        for (i = 0; i < n; i++) {
            ocr_point a = pts[i], b = pts[(i + 1) % n];
            double da = (a.x - quad[0].x) * ux + (a.y - quad[0].y) * uy - t, db = (b.x - quad[0].x) * ux + (b.y - quad[0].y) * uy - t;
            if ((da < 0) != (db < 0)) {
                double f = da / (da - db), px = a.x + f * (b.x - a.x), py = a.y + f * (b.y - a.y);
                double sv = (px - quad[0].x) * vx + (py - quad[0].y) * vy;
                if (sv < lo) lo = sv;
                if (sv > hi) hi = sv;
            }
        }
        if (hi < lo) { lo = 0; hi = len_v; }
        top[k] = lo; bot[k] = hi;
        mean_h += hi - lo;
    }
    mean_h /= K + 1;
    if (mean_h < 1) mean_h = 1;
    m = cfg->margin * mean_h;
    span = len_u + 2 * m;
    out_w = (int)ceil(span / (mean_h + 2 * m) * cfg->height / 4.0 - 1e-9) * 4;
    if (out_w < 8) out_w = 8;
    if (out_w > cfg->max_width) out_w = cfg->max_width;
    if ((rc = ocr_image_alloc(ctx, out, out_w, cfg->height, 3))) return rc;
    W_scale = span / out_w;
    ss = ocr__rec_supersamples(W_scale > (mean_h + 2 * m) / cfg->height ? W_scale : (mean_h + 2 * m) / cfg->height);
    for (x = 0; x < out_w; x++)
        for (y = 0; y < cfg->height; y++) {
            float acc[3] = {0, 0, 0};
            int a, bb;
            for (bb = 0; bb < ss; bb++) {
                double t = -m + (x + (bb + 0.5) / ss) * W_scale, f = (t / len_u - 0.02) / 0.96 * K, lo, hi;
                int k0 = (int)floor(f);
                if (k0 < 0) { k0 = 0; f = 0; }
                if (k0 >= K) { k0 = K - 1; f = K; }
                f -= k0;
                lo = top[k0] + f * (top[k0 + 1] - top[k0]) - m;
                hi = bot[k0] + f * (bot[k0 + 1] - bot[k0]) + m;
                for (a = 0; a < ss; a++) {
                    double sv = lo + (hi - lo) * (y + (a + 0.5) / ss) / cfg->height;
                    double px = quad[0].x + t * ux + sv * vx, py = quad[0].y + t * uy + sv * vy;
                    for (c = 0; c < 3; c++) acc[c] += ocr__rec_bilinear(img, px, py, C == 3 ? c : 0);
                }
            }
            ocr__rec_store(out, x, y, acc, ss);
        }
    return OCR_OK;
}

/* ---------------------------------------------------------------- end-to-end evaluation */

OCRDEF void ocr_e2e_eval_init(ocr_e2e_evaluator *ev) {
    memset(ev, 0, sizeof *ev);
    ocr_eval_init(&ev->det);
}

/* code points folded to one case */
static int32_t *ocr__rec_folded(const char *s, int *n) {
    int32_t *cps = ocr__rec_cps(s, n);
    int i;
    if (cps) for (i = 0; i < *n; i++) cps[i] = ocr__rec_fold(cps[i]);
    return cps;
}

static int ocr__rec_e2e_special(int32_t c) {
    static const int32_t special[] = {'!', '?', '.', ':', ',', '*', '"', '(', ')', 0xB7, '[', ']', '/', '\''};
    size_t i;
    for (i = 0; i < sizeof special / sizeof special[0]; i++)
        if (special[i] == c) return 1;
    return 0;
}

OCRDEF int ocr_e2e_transcription_match(const char *gt, const char *det) {
    int ng, nd, ok = 0, drop_first, drop_last, a, b;
    int32_t *g = ocr__rec_folded(gt, &ng), *d = ocr__rec_folded(det, &nd);
    if (g && d && ng > 0) {
        drop_first = ocr__rec_e2e_special(g[0]);
        drop_last = ocr__rec_e2e_special(g[ng - 1]);
        /* the official four cases: as is, without the first, without the last, without both */
        for (a = 0; a <= drop_first && !ok; a++)
            for (b = 0; b <= drop_last && !ok; b++) {
                int len = ng - a - b;
                ok = len >= 0 && len == nd && (len == 0 || memcmp(g + a, d, (size_t)len * sizeof *g) == 0);
            }
    }
    OCR_FREE(g);
    OCR_FREE(d);
    return ok;
}

OCRDEF int ocr_e2e_eval_add_image(ocr_ctx *ctx, ocr_e2e_evaluator *ev, const ocr_polygon *gt, int n_gt, const ocr_polygon *det,
                                  const char *const *det_texts, int n_det, ocr_eval_counts *counts, int64_t *correct) {
    int *match, j, rc;
    int64_t ok = 0;
    if (!ev) return ocr_error(ctx, OCR_EINVAL, "ocr_e2e_eval_add_image: no evaluator");
    if (!(match = (int *)OCR_MALLOC(((size_t)n_det + 1) * sizeof *match)))
        return ocr_error(ctx, OCR_ENOMEM, "ocr_e2e_eval_add_image: out of memory for %d detections", n_det);
    rc = ocr_eval_add_image_matched(ctx, &ev->det, gt, n_gt, det, n_det, counts, match);
    for (j = 0; j < n_det && !rc; j++)
        if (match[j] >= 0 && gt[match[j]].text)
            ok += ocr_e2e_transcription_match(gt[match[j]].text, det_texts && det_texts[j] ? det_texts[j] : "");
    OCR_FREE(match);
    if (rc) return rc;
    ev->correct += ok;
    if (correct) *correct = ok;
    return OCR_OK;
}

OCRDEF ocr_e2e_result ocr_e2e_eval_finish(const ocr_e2e_evaluator *ev) {
    ocr_e2e_result r;
    r.det = ocr_eval_finish(&ev->det);
    r.recall = ev->det.total.gt_care ? (double)ev->correct / (double)ev->det.total.gt_care : 0.0;
    r.precision = ev->det.total.det_care ? (double)ev->correct / (double)ev->det.total.det_care : 0.0;
    r.fscore = r.recall + r.precision > 0 ? 2.0 * r.recall * r.precision / (r.recall + r.precision) : 0.0;
    return r;
}

#ifdef __cplusplus
}
#endif
#endif /* OCR_REC_IMPLEMENTATION */
