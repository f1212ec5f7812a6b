/* train_dbnet - trains a DBNet text detector on the CPU, or on a GPU with --device cuda in the CUDA build
   (build/cuda/train_dbnet): model, loss and optimizer then run on the device; batches are uploaded, probability maps
   downloaded for validation, and checkpoints are the CPU build's files.

   With no arguments it trains a small DB-ResNet-18 on synthetic scenes rendered on the fly (the declared training
   fonts and photographs of ocr_synth.h) and validates on a fixed synthetic set of other scenes and on a second one
   rendered only with the declared held-out fonts and photographs, writing a run directory:
       metrics.jsonl                 one object per logged step, steps strictly increasing
       events.out.tfevents.*         the same scalars and validation overlays for TensorBoard
       state.json                    names the run's state, committed atomically (see "the run directory" below):
                                     state.<G>.safetensors (weights, settings, position) + state.<G>.optim.safetensors
       last.safetensors (+ .optim)   the same two files under stable names (hard links); the weights load in PyTorch
       best.safetensors (+ .optim)   the weights with the best validation H-mean
       overlays/step_NNNNNN_I.png    validation images with ground truth (green) and detections (red); _hI: held-out
       .lock                         held (flock) by the process training in the directory: one at a time
   The fonts and photographs of the synthetic sets (file names and SHA-256) are printed at the start and kept in the
   checkpoints (synth.fonts, synth.photos, synth.heldout_fonts, synth.heldout_photos); --resume refuses a run whose
   files changed. The last line on stdout is one JSON object with the final validation figures.

   ./build.sh && ./examples/train_dbnet            (see --help for every flag) */
#define OCR_IMPLEMENTATION
#include "ocr_tensor.h"
#include "ocr_nn.h"
#include "ocr_loss.h"
#include "ocr_dbnet.h"
#include "ocr_data.h"
#include "ocr_synth.h"
#include "ocr_example.h"
#include "ocr_mpi.h"
#include <signal.h>
#include <time.h>
#include <sys/stat.h>
#include <sys/file.h>
#include <dirent.h>

typedef struct {
    const char *data, *val, *init, *resume, *out, *device, *optimizer, *backbone, *amp, *loss_scale, *fonts, *photos, *dist_loss;
    int steps, epochs, batch, size, threads, workers, seed, eval_every, log_every, val_count, val_size, stop_at, heldout_count;
    int check_numerics, save_every, overwrite, sync_bn;
    float lr, width, weight_decay, balanced_fraction, pos_weight, prior, clip, prob_dice, synth_lines, synth_text_scale, val_scale, ema;
    float dist_timeout;
} train_args;

/* Every flag, once: its variable, default, whether checkpoints keep it (as "train.<name>": a resumed run takes those from
   its checkpoint; only the others may change), and its help. The order is --help's. The macros check that the field's
   type is the flag's (comparing distinct pointer types does not compile with -Werror). */
#define FIELD(f, ctype) offsetof(train_args, f) + 0 * sizeof(&((train_args *)0)->f == (ctype *)0)
#define INT(f) OCR_EX_INT, FIELD(f, int)
#define FLOAT(f) OCR_EX_FLOAT, FIELD(f, float)
#define STRING(f) OCR_EX_STRING, FIELD(f, const char *)
#define BOOL(f) OCR_EX_BOOL, FIELD(f, int)
#define STORED OCR_EX_STORED, NULL
#define RUNTIME OCR_EX_RUNTIME, NULL
static const ocr_ex_setting kSettings[] = {
    {"--data", STRING(data), "synth", STORED, "training data: synth, icdar:DIR (images/ and gts/, or IMAGES,GTS) or lmdb:PATH"},
    {"--val", STRING(val), "synth", STORED, "validation data, same forms; synth is a fixed set of other scenes (another seed)"},
    /* what a checkpoint from before the declared sets rendered with: the fonts under /usr/share/fonts, no photographs */
    {"--fonts", STRING(fonts), NULL, OCR_EX_STORED, "/usr/share/fonts",
     "fonts of the synthetic scenes: DIR|FILE,... (symbol, icon and math fonts refused); empty: the declared training set"},
    {"--photos", STRING(photos), NULL, OCR_EX_STORED, "none",
     "photographs under synthetic text: DIR|FILE,..., or none (procedural backgrounds only); empty: the declared training set"},
    {"--steps", INT(steps), "6000", STORED, "optimizer steps"},
    {"--epochs", INT(epochs), "0", STORED, "for icdar/lmdb data: train this many epochs instead of --steps"},
    {"--batch", INT(batch), "4", STORED, "images per step"},
    {"--size", INT(size), "256", STORED, "training crop size in pixels (multiple of 32)"},
    {"--lr", FLOAT(lr), "2e-3", STORED, "peak learning rate (poly decay, power 0.9)"},
    {"--optimizer", STRING(optimizer), "adamw", STORED, "sgd (momentum 0.9) or adamw"},
    {"--weight-decay", FLOAT(weight_decay), "1e-4", STORED, "weight decay"},
    {"--backbone", STRING(backbone), "resnet18", STORED, "resnet18 or resnet34"},
    {"--width", FLOAT(width), "0.25", STORED, "channel width multiplier (1 = the official model)"},
    {"--prior", FLOAT(prior), "0.03", STORED, "initial text probability of the probability head's bias (0: official init)"},
    {"--balanced-fraction", FLOAT(balanced_fraction), "0.2", STORED,
     "fraction of the steps trained with class-balanced BCE; then positive-weighted BCE"},
    {"--pos-weight", FLOAT(pos_weight), "1", STORED, "positive-class weight of the BCE after the balanced phase (0: official OHEM)"},
    /* the settings added after the first checkpoints: "absent" is what a checkpoint from before each means */
    {"--prob-dice", FLOAT(prob_dice), "10", OCR_EX_STORED, "0", "weight of a Dice loss on the probability map itself (0: the official loss only)"},
    {"--ema", FLOAT(ema), "0.998", OCR_EX_STORED, "0",
     "decay of a moving average of the weights that validation and the best checkpoint use (0: off)"},
    {"--synth-lines", FLOAT(synth_lines), "90", OCR_EX_STORED, "30",
     "text lines tried per megapixel in synthetic training scenes (validation keeps the default)"},
    {"--synth-text-scale", FLOAT(synth_text_scale), "1", OCR_EX_STORED, "1",
     "text heights of synthetic training scenes times this (validation keeps the default)"},
    {"--clip", FLOAT(clip), "5", STORED, "global gradient-norm clip (0: none)"},
    {"--amp", STRING(amp), "auto", OCR_EX_STORED, "fp32",
     "precision of the convolutions: fp32, bf16 or fp16 (with dynamic loss scaling); the rest stays fp32 (docs/TRAINING.md); "
     "auto: bf16 on a CPU that multiplies bf16 natively (AMX or AVX512_BF16), fp32 elsewhere (kept resolved in checkpoints)"},
    {"--loss-scale", STRING(loss_scale), "dynamic", OCR_EX_STORED, "dynamic",
     "with --amp fp16: dynamic (GradScaler's rule) or off (to see what fp16 loses without it; examples/repro_amp)"},
    {"--threads", INT(threads), "0", RUNTIME, "compute threads (0: all cores)"},
    {"--workers", INT(workers), "1", RUNTIME, "data loader threads"},
    {"--seed", INT(seed), "1", STORED, "seed of initialisation, data order and augmentation"},
    {"--init", STRING(init), NULL, STORED, "backbone weights: a torchvision ResNet state_dict as safetensors"},
    {"--resume", STRING(resume), NULL, RUNTIME, "continue the run in DIR from its last checkpoint"},
    {"--overwrite", BOOL(overwrite), NULL, RUNTIME, "start a new run in an --out that holds one, deleting it (else refused)"},
    {"--out", STRING(out), NULL, RUNTIME, "run directory (default runs/dbnet-<time>)"},
    {"--eval-every", INT(eval_every), "500", STORED, "validate every N steps (and at the end)"},
    {"--log-every", INT(log_every), "10", RUNTIME, "log every N steps"},
    {"--save-every", INT(save_every), "100", RUNTIME, "write the last checkpoint every N steps"},
    {"--val-count", INT(val_count), "200", STORED, "validation images"},
    {"--heldout-count", INT(heldout_count), "-1", OCR_EX_STORED, "0",
     "with --val synth: images of a second validation set rendered only with the declared held-out fonts and photographs "
     "(procedural backgrounds with --photos none); -1: as many as --val-count, 0: none"},
    {"--val-size", INT(val_size), "320", STORED, "validation image size (multiple of 32)"},
    {"--val-scale", FLOAT(val_scale), "0", OCR_EX_STORED, "1",
     "validation images are scaled by this for the network (sides rounded up to multiples of 32), detections mapped back; "
     "0: 1.4 for synthetic validation scenes (their smallest words need it), 1 for datasets"},
    {"--device", STRING(device), "cpu", RUNTIME, "cpu or cuda"},
    {"--check-numerics", BOOL(check_numerics), NULL, RUNTIME, "check every layer's outputs and gradients for NaN/Inf"},
    {"--stop-at", INT(stop_at), "0", RUNTIME, "stop after this step as if interrupted (saves last; for tests)"},
    /* data parallelism (mpirun -np N; docs/DISTRIBUTED.md): --batch is per rank. --sync-bn and --dist-loss are kept in
       checkpoints as dist.* beside the world size, which a resume must match */
    {"--sync-bn", BOOL(sync_bn), NULL, RUNTIME, "under MPI: batch norm with the statistics of every rank's batch together (else each rank's own)"},
    {"--dist-loss", STRING(dist_loss), "global", RUNTIME,
     "under MPI: global (the loss of the whole global batch, gathered: N ranks x B = 1 rank x N*B) or local (each rank's own, "
     "gradients averaged, as DistributedDataParallel)"},
    {"--dist-timeout", FLOAT(dist_timeout), "600", RUNTIME,
     "under MPI: seconds a rank waits in a collective (e.g. for rank 0's validation) before it exits naming it (0: forever)"},
};
#undef FIELD
#undef INT
#undef FLOAT
#undef STRING
#undef BOOL
#undef STORED
#undef RUNTIME
enum { N_SETTINGS = sizeof kSettings / sizeof kSettings[0] };

/* Why the settings cannot make a run, or NULL. Checked for the command line and for a resumed checkpoint's
   metadata alike (fuzz/fuzz_cli.c runs both through it). */
static const char *settings_problem(const train_args *a) {
    if (a->steps < 1 || a->batch < 1 || a->size < 32 || a->size % 32 || a->val_size < 32 || a->val_size % 32 || a->val_count < 0 ||
        a->workers < 1 || a->log_every < 1 || a->eval_every < 0 || !(a->lr > 0 && a->lr <= 10) || !(a->width > 0 && a->width <= 4) ||
        a->save_every < 1 || !(a->synth_lines >= 0 && a->synth_lines <= 10000) ||
        !(a->synth_text_scale >= 0.1f && a->synth_text_scale <= 10) || !(a->val_scale == 0 || (a->val_scale >= 0.25f && a->val_scale <= 4)) ||
        !(a->ema >= 0 && a->ema < 1) || a->heldout_count < -1 || !(a->dist_timeout >= 0))
        return "--steps, --batch, --workers, --log-every and --save-every must be >= 1, --lr in (0, 10], --width in (0, 4], "
               "--size and --val-size positive multiples of 32, --val-scale 0 or in [0.25, 4], "
               "--synth-lines in [0, 10000], --synth-text-scale in [0.1, 10], --ema in [0, 1), --heldout-count >= -1, --dist-timeout >= 0";
    if (strcmp(a->optimizer, "sgd") != 0 && strcmp(a->optimizer, "adamw") != 0) return "--optimizer must be sgd or adamw";
    if (!a->dist_loss || (strcmp(a->dist_loss, "global") != 0 && strcmp(a->dist_loss, "local") != 0)) return "--dist-loss must be global or local";
    if (strcmp(a->backbone, "resnet18") != 0 && strcmp(a->backbone, "resnet34") != 0) return "--backbone must be resnet18 or resnet34";
    {
        int amp;
        if (strcmp(a->amp, "auto") != 0 && !ocr_amp_parse(a->amp, &amp)) return "--amp must be fp32, bf16, fp16 or auto";
        if (strcmp(a->loss_scale, "dynamic") != 0 && strcmp(a->loss_scale, "off") != 0) return "--loss-scale must be dynamic or off";
    }
    return NULL;
}


/* the MPI job this process belongs to (rank 0 of 1 without one) */
static ocr_dist g_dist;

static void die(ocr_ctx *ctx, const char *what) {
    if (g_dist.world > 1) fprintf(stderr, "train_dbnet: rank %d of %d: %s: %s\n", g_dist.rank, g_dist.world, what, ocr_ctx_last_error(ctx));
    else fprintf(stderr, "train_dbnet: %s: %s\n", what, ocr_ctx_last_error(ctx));
    ocr_dist_abort(&g_dist, 1);
}

/* ---------------------------------------------------------------- data */

enum { F_IMAGE, F_GT_SHRINK, F_MASK_SHRINK, F_GT_THRESH, F_MASK_THRESH, F_COUNT };

typedef struct {
    int augment;                 /* real datasets: the official flip/rotate/resize/crop; synthetic scenes: none */
    ocr_augment_config aug;
} transform_cfg;

/* Worker-side: one sample into the network input and its four target maps. */
static int train_transform(ocr_ctx *ctx, void *user, ocr_sample *s, int64_t index, ocr_rng *rng, ocr_tensor *fields) {
    const transform_cfg *t = (const transform_cfg *)user;
    int rc;
    (void)index;
    if (t->augment && (rc = ocr_augment_sample(ctx, rng, &t->aug, s))) return rc;
    if ((rc = ocr_image_normalize(ctx, &s->image, OCR_NORM_DBNET, &fields[F_IMAGE]))) return rc;
    return ocr_dbnet_targets(ctx, NULL, s->polys, s->n_polys, &fields[F_GT_SHRINK], &fields[F_MASK_SHRINK],
                             &fields[F_GT_THRESH], &fields[F_MASK_THRESH], NULL);
}

/* The batch's target maps where the loss runs: the loader's host tensors, or their upload into the device buffers. */
static void loss_targets(ocr_ctx *ctx, const ocr_batch *batch, ocr_tensor *dev, ocr_tensor *out) {
    int f;
    for (f = F_GT_SHRINK; f < F_COUNT; f++) {
        out[f] = batch->fields[f];
        if (ctx->device == OCR_DEVICE_CPU) continue;
        if (ocr_tensor_slice(ctx, &dev[f], 0, batch->size, &out[f]) || ocr_tensor_copy(ctx, &out[f], &batch->fields[f]))
            die(ctx, "uploading the target maps");
    }
}

static int is_synth_spec(const char *spec) { return strcmp(spec, "synth") == 0; }

/* "synth" (scenes rendered on the fly) or any dataset ocr_ex_open_dataset reads */
static int open_dataset(ocr_ctx *ctx, const char *spec, const ocr_synth *synth, uint64_t seed, int64_t count, int size,
                        ocr_dataset *ds, int *is_synth) {
    *is_synth = is_synth_spec(spec);
    if (*is_synth) return ocr_dataset_open_synth(ctx, ds, synth, seed, count, size, size);
    if (!ocr_ex_dataset_spec_ok(spec)) return ocr_error(ctx, OCR_EINVAL, "dataset '%s': expected synth, icdar:DIR or lmdb:PATH", spec);
    return ocr_ex_open_dataset(ctx, spec, OCR_GT_POLYGON, ds);
}

/* ---------------------------------------------------------------- validation */

typedef struct {
    const char *name;            /* "val" or "heldout": metrics val/<x> or val/heldout_<x>, overlays step_N_I or step_N_hI */
    int count, size;
    ocr_sample *samples;         /* decoded once: validation must not cost a re-render each time */
    int input;                   /* network input side; detections are mapped back to the size x size images */
    ocr_tensor input_batch;      /* [vb, 3, input, input] */
    ocr_tensor prob_host;        /* the probability maps downloaded from the device for post-processing */
    int vb;
} val_set;

/* Reads the set once (the dataset and the synth may go afterwards). */
static void val_open(ocr_ctx *ctx, val_set *v, const char *name, const char *spec, const ocr_synth *synth, uint64_t seed, int count,
                     int size, int input) {
    ocr_dataset ds;
    int i, is_synth;
    memset(v, 0, sizeof v[0]);
    v->name = name;
    if (open_dataset(ctx, spec, synth, seed, count, size, &ds, &is_synth)) die(ctx, "opening the validation set");
    v->count = (int)(ds.count < count ? ds.count : count);
    v->size = size;
    v->input = input;
    v->vb = 4;
    v->samples = (ocr_sample *)calloc((size_t)v->count + 1, sizeof(ocr_sample));
    if (!v->samples) { fprintf(stderr, "train_dbnet: out of memory\n"); exit(1); }
    for (i = 0; i < v->count; i++) {
        if (ocr_dataset_get(ctx, &ds, i, 0, &v->samples[i])) die(ctx, "reading the validation set");
        /* real images are resized to the validation size; the polygons follow */
        if (!is_synth && (v->samples[i].image.width != size || v->samples[i].image.height != size) &&
            ocr_sample_resize(ctx, &v->samples[i], size, size))
            die(ctx, "resizing a validation image");
    }
    ocr_dataset_close(&ds);
    if (ocr_tensor_alloc(ctx, &v->input_batch, "val.input", OCR_F32, OCR_DEVICE_CPU, ocr_shape4(v->vb, 3, input, input)))
        die(ctx, "allocating the validation batch");
}

static void val_free(val_set *v) {
    int i;
    for (i = 0; i < v->count; i++) ocr_sample_free(&v->samples[i]);
    free(v->samples);
    ocr_tensor_free(&v->input_batch);
    ocr_tensor_free(&v->prob_host);
}

static void draw_overlay(ocr_ctx *ctx, const ocr_sample *s, const ocr_detections *det, ocr_image *out) {
    static const unsigned char green[3] = {0, 200, 0}, grey[3] = {150, 150, 150}, red[3] = {230, 0, 0};
    int i;
    if (ocr_image_alloc(ctx, out, s->image.width, s->image.height, 3)) die(ctx, "overlay");
    memcpy(out->pixels, s->image.pixels, (size_t)s->image.width * s->image.height * 3);
    for (i = 0; i < s->n_polys; i++)
        ocr_ex_polygon(out->pixels, out->width, out->height, s->polys[i].points, s->polys[i].n_points,
                       s->polys[i].ignore ? grey : green, 2);
    for (i = 0; i < det->n; i++)
        ocr_ex_polygon(out->pixels, out->width, out->height, det->polys[i].points, det->polys[i].n_points, red, 2);
}

/* A validation's figures: P/R/H and recall by word height, with the counts behind them. */
typedef struct {
    int done;                    /* 0: no validation (yet), or no such set */
    ocr_eval_result r;
    ocr_eval_counts total;
} val_figures;

/* The validations' post-processing in words, as checkpoints keep it ("train.val_post"): figures under another are
   not comparable, so a run resumed under another says so. */
static const char *val_post_description(void) {
    static char text[160];
    ocr_post_config c = ocr_post_config_default(OCR_POST_BOX);
    snprintf(text, sizeof text, "thresh %g, box_thresh %g, score %s, split_thresh %g, unclip %g", c.thresh, c.box_thresh,
             c.score_mode == OCR_SCORE_SLOW ? "slow" : "fast", c.split_thresh, c.unclip_ratio);
    return text;
}

/* Runs the model on every validation image: P/R/H with ocr-c's default post-processing (ocr_post_config_default) and the ICDAR 2015 protocol. */
static val_figures validate(ocr_ctx *ctx, ocr_dbnet *m, val_set *v, ocr_metrics *metrics, const char *run_dir, int64_t step,
                            int n_overlays) {
    ocr_post_config post = ocr_post_config_default(OCR_POST_BOX);
    ocr_evaluator ev;
    ocr_detections det;
    val_figures fig;
    int held = strcmp(v->name, "val") != 0, i, b;
    memset(&det, 0, sizeof det);
    ocr_eval_init(&ev);
    for (i = 0; i < v->count; i += v->vb) {
        int nb = v->count - i < v->vb ? v->count - i : v->vb;
        ocr_tensor in, prob, one;
        if (ocr_tensor_slice(ctx, &v->input_batch, 0, nb, &in)) die(ctx, "validation");
        for (b = 0; b < nb; b++) {
            ocr_tensor row;
            if (ocr_tensor_slice(ctx, &in, b, 1, &row) || ocr_image_network_input(ctx, &v->samples[i + b].image, OCR_NORM_DBNET, &row))
                die(ctx, "validation input");
        }
        if (ocr_dbnet_forward(ctx, m, &in, 0, &prob, NULL) || ocr_tensor_on_host(ctx, &prob, &v->prob_host, &prob)) die(ctx, "validation forward");
        for (b = 0; b < nb; b++) {
            const ocr_sample *s = &v->samples[i + b];
            if (ocr_tensor_slice(ctx, &prob, b, 1, &one) ||
                ocr_postprocess(ctx, &post, &one, s->image.width, s->image.height, &det) ||
                ocr_eval_add_image(ctx, &ev, s->polys, s->n_polys, det.polys, det.n, NULL))
                die(ctx, "validation post-processing");
            if (i + b < n_overlays) {
                char path[4096], tag[64];
                ocr_image img;
                unsigned char *png;
                size_t png_size;
                draw_overlay(ctx, s, &det, &img);
                snprintf(path, sizeof path, "%s/overlays/step_%06lld_%s%d.png", run_dir, (long long)step, held ? "h" : "", i + b);
                if (ocr_image_save_png(ctx, path, &img)) die(ctx, "writing an overlay");
                snprintf(tag, sizeof tag, "val/%soverlay_%d", held ? "heldout_" : "", i + b);
                if (ocr_image_encode_png(ctx, &img, &png, &png_size) == OCR_OK) {
                    if (ocr_metrics_image(ctx, metrics, step, tag, img.width, img.height, 3, png, png_size)) die(ctx, "metrics");
                    OCR_FREE(png);
                }
                ocr_image_free(&img);
            }
        }
    }
    ocr_detections_free(&det);
    fig.done = 1;
    fig.r = ocr_eval_finish(&ev);
    fig.total = ev.total;
    return fig;
}

/* Logs a validation's figures as val/<x> (or val/heldout_<x>): precision, recall, hmean, and recall_h_lt16, recall_h16_32,
   recall_h_gt32 for the height bins that hold words. */
static void log_figures(ocr_ctx *ctx, ocr_metrics *metrics, int64_t step, const char *set, const val_figures *f) {
    const char *pre = strcmp(set, "val") ? "heldout_" : "";
    char key[64];
    int b;
    snprintf(key, sizeof key, "val/%sprecision", pre);
    if (ocr_metrics_scalar(ctx, metrics, step, key, f->r.precision)) die(ctx, "metrics");
    snprintf(key, sizeof key, "val/%srecall", pre);
    if (ocr_metrics_scalar(ctx, metrics, step, key, f->r.recall)) die(ctx, "metrics");
    snprintf(key, sizeof key, "val/%shmean", pre);
    if (ocr_metrics_scalar(ctx, metrics, step, key, f->r.hmean)) die(ctx, "metrics");
    for (b = 0; b < OCR_EVAL_HEIGHT_BINS; b++) {
        if (!f->total.gt_care_by_height[b]) continue; /* no words of that height: no recall (0 would read as all missed) */
        snprintf(key, sizeof key, "val/%srecall_%s", pre, ocr_eval_height_bin_name(b));
        if (ocr_metrics_scalar(ctx, metrics, step, key, f->r.recall_by_height[b])) die(ctx, "metrics");
    }
}

/* "0.412/0.833/-": recall by height, - for a bin without words */
static const char *height_recalls(const val_figures *f, char *buf, size_t cap) {
    size_t used = 0;
    int b;
    buf[0] = 0;
    for (b = 0; b < OCR_EVAL_HEIGHT_BINS && used < cap; b++) {
        if (f->total.gt_care_by_height[b]) snprintf(buf + used, cap - used, "%s%.3f", b ? "/" : "", f->r.recall_by_height[b]);
        else snprintf(buf + used, cap - used, "%s-", b ? "/" : "");
        used = strlen(buf);
    }
    return buf;
}

/* The final line's figures of one set as JSON members: ,"<pre>hmean":..., precision, recall (with prf) and recall_h_*
   (null where there is no set or no words of that height). */
static void print_figures_json(const char *pre, const val_figures *f, int prf) {
    int b;
    if (prf && f->done)
        printf(",\"%shmean\":%.4f,\"%sprecision\":%.4f,\"%srecall\":%.4f", pre, f->r.hmean, pre, f->r.precision, pre, f->r.recall);
    else if (prf)
        printf(",\"%shmean\":null,\"%sprecision\":null,\"%srecall\":null", pre, pre, pre);
    for (b = 0; b < OCR_EVAL_HEIGHT_BINS; b++) {
        if (f->done && f->total.gt_care_by_height[b])
            printf(",\"%srecall_%s\":%.4f", pre, ocr_eval_height_bin_name(b), f->r.recall_by_height[b]);
        else printf(",\"%srecall_%s\":null", pre, ocr_eval_height_bin_name(b));
    }
}

/* ---------------------------------------------------------------- checkpoints */

static const char *checkpoint_meta(const void *st, const char *key) { return ocr_safetensors_meta((const ocr_safetensors *)st, key); }

typedef struct {
    int64_t step;           /* steps done */
    double best_hmean;
    int64_t best_step;
    double seconds;         /* training time before this process */
    /* the synthetic sets' fonts and photographs (synth.fonts, ...: asset_list's text), written into every checkpoint */
    int n_assets;
    const char *asset_keys[4], *asset_values[4];
} train_state;

/* name.safetensors (weights_path) holds the weights and everything needed to continue: the settings and the run's
   state as "train." metadata. optim_path holds the optimizer state and, with --ema, the weight average
   (ocr_optim_save); both carry train.step. Each file is written atomically. */
static void test_kill_point(int k);
static void write_checkpoint(ocr_ctx *ctx, const char *weights_path, const char *optim_path, const ocr_dbnet *m,
                             const ocr_optimizer *opt, const float *ema, const ocr_grad_scaler *scaler, const train_args *a,
                             const train_state *st, int kill_point) {
    ocr_ex_meta meta;
    const char *okeys[8], *ovalues[8], *keys[OCR_EX_META_MAX + 4], *values[OCR_EX_META_MAX + 4];
    char scaler_buf[512];
    int n_settings, n_optim, i;
    ocr_ex_meta_init(&meta);
    if (ocr_ex_settings_to_meta(kSettings, N_SETTINGS, a, "train.", &meta)) { fprintf(stderr, "train_dbnet: the settings are too long to store\n"); exit(1); }
    n_settings = meta.n;
    if (ocr_ex_meta_add(&meta, "train.step", "%lld", (long long)st->step) ||
        ocr_ex_meta_add(&meta, "train.best_hmean", "%.9g", st->best_hmean) ||
        ocr_ex_meta_add(&meta, "train.best_step", "%lld", (long long)st->best_step) ||
        ocr_ex_meta_add(&meta, "train.seconds", "%.3f", st->seconds) ||
        ocr_ex_meta_add(&meta, "train.optim_step", "%lld", (long long)opt->step) ||
        ocr_ex_meta_add(&meta, "train.val_post", "%s", val_post_description()) ||
        /* the data-parallel layout: --resume needs the same world size (its shards, batches and BN statistics) */
        ocr_ex_meta_add(&meta, "dist.world_size", "%d", g_dist.world) || ocr_ex_meta_add(&meta, "dist.sync_bn", "%d", a->sync_bn) ||
        ocr_ex_meta_add(&meta, "dist.loss", "%s", a->dist_loss)) {
        fprintf(stderr, "train_dbnet: the settings are too long to store\n");
        exit(1);
    }
    /* the optimizer file carries the step and the loss scaler's state (its scale and counter move every step) */
    okeys[0] = meta.keys[n_settings];
    ovalues[0] = meta.values[n_settings];
    n_optim = 1 + ocr_grad_scaler_meta(scaler, scaler_buf, okeys + 1, ovalues + 1);
    if (ocr_optim_save(ctx, opt, ema, optim_path, okeys, ovalues, n_optim)) die(ctx, "saving the optimizer state");
    test_kill_point(kill_point);
    /* the asset lists go beside the settings' buffer: a custom font set's list can be longer than it holds */
    for (i = 0; i < meta.n; i++) { keys[i] = meta.keys[i]; values[i] = meta.values[i]; }
    for (i = 0; i < st->n_assets; i++) { keys[meta.n + i] = st->asset_keys[i]; values[meta.n + i] = st->asset_values[i]; }
    if (ocr_dbnet_save(ctx, m, weights_path, keys, values, meta.n + st->n_assets)) die(ctx, "saving a checkpoint");
}

/* ---------------------------------------------------------------- the synthetic sets' fonts and photographs */

/* The checkpoint keys of the lists, and what the start output calls them: the training (and validation) scenes' fonts
   and photographs, then the held-out scenes'. */
static const char *const kAssetKeys[4] = {"synth.fonts", "synth.photos", "synth.heldout_fonts", "synth.heldout_photos"};
static const char *const kAssetNames[4] = {"fonts of the synthetic training and validation scenes", "their photographs",
                                           "fonts of the held-out validation scenes", "their photographs"};

/* The line of list whose file name is file (length len), or NULL. */
static const char *asset_find(const char *list, const char *file, size_t len) {
    const char *line;
    for (line = list; *line; line += strcspn(line, "\n") + (line[strcspn(line, "\n")] ? 1 : 0)) {
        size_t n = strcspn(line, "\n");
        if (n == 66 + len && strncmp(line + 66, file, len) == 0) return line;
    }
    return NULL;
}

/* --resume: the files a set loads now must be the ones the run recorded (same names, bytes, order), else its scenes
   are not the ones it trained and validated on. Exits naming the first file that differs; what is "font" or
   "photograph". */
static void check_assets(const char *checkpoint, const char *key, const char *what, const char *recorded, const char *now) {
    const char *line, *other;
    if (strcmp(recorded, now) == 0) return;
    for (line = recorded; *line; line += strcspn(line, "\n") + 1) {
        size_t n = strcspn(line, "\n");
        if (n < 67 || !line[n] || line[64] != ' ' || line[65] != ' ') {
            fprintf(stderr, "train_dbnet: --resume: %s has a malformed '%s' (expected lines '<sha256>  <file>'): %.*s\n", checkpoint, key,
                    (int)n, line);
            exit(1);
        }
        other = asset_find(now, line + 66, n - 66);
        if (!other) {
            fprintf(stderr, "train_dbnet: --resume: the run used the %s %.*s (SHA-256 %.64s, %s in %s), which is not loaded now: its "
                            "scenes would differ from those it trained on; restore the file or start a new run\n",
                    what, (int)(n - 66), line + 66, line, key, checkpoint);
            exit(1);
        }
        if (strncmp(other, line, 64) != 0) {
            fprintf(stderr, "train_dbnet: --resume: the %s %.*s has SHA-256 %.64s now but had %.64s when the run started (%s in %s): its "
                            "scenes would differ from those it trained on; restore the file or start a new run\n",
                    what, (int)(n - 66), line + 66, other, line, key, checkpoint);
            exit(1);
        }
    }
    for (line = now; *line; line += strcspn(line, "\n") + 1) {
        size_t n = strcspn(line, "\n");
        if (n < 67 || !line[n]) break;
        if (!asset_find(recorded, line + 66, n - 66)) {
            fprintf(stderr, "train_dbnet: --resume: the %s %.*s (SHA-256 %.64s) would be loaded now but was not when the run started (%s "
                            "in %s): its scenes would differ; remove it or start a new run\n", what, (int)(n - 66), line + 66, line, key,
                    checkpoint);
            exit(1);
        }
    }
    fprintf(stderr, "train_dbnet: --resume: the run's %ss are loaded now in another order than %s in %s records: its scenes would "
                    "differ; start a new run\n", what, key, checkpoint);
    exit(1);
}

/* The asset lists of the synthetic sets into st (main: the training set's, or the validation set's when only it is
   synthetic; heldout: the held-out set's; either may be NULL). Resuming (resumed: its checkpoint, at path), each list
   the checkpoint recorded must be what is loaded now; a checkpoint from before the lists is not checked. A held-out
   file that is also trained on is said, as the held-out figure then overstates. */
static void record_assets(train_state *st, const ocr_synth *main_set, const ocr_synth *heldout_set, const ocr_safetensors *resumed,
                          const char *path) {
    int k;
    st->n_assets = 0;
    for (k = 0; k < 4; k++) {
        const ocr_synth *set = k < 2 ? main_set : heldout_set;
        const char *recorded;
        char *list;
        if (!set) continue;
        list = ocr_ex_asset_list("train_dbnet", set, k % 2);
        recorded = resumed ? ocr_safetensors_meta(resumed, kAssetKeys[k]) : NULL;
        if (recorded) check_assets(path, kAssetKeys[k], k % 2 ? "photograph" : "font", recorded, list);
        st->asset_keys[st->n_assets] = kAssetKeys[k];
        st->asset_values[st->n_assets++] = list;
    }
    if (main_set && heldout_set) /* lists 0/1 are the main set's, 2/3 the held-out one's */
        for (k = 0; k < 2; k++) {
            const char *line;
            char hash[65];
            for (line = st->asset_values[2 + k]; *line; line += strcspn(line, "\n") + 1) {
                if (strcspn(line, "\n") < 67) break;
                memcpy(hash, line, 64);
                hash[64] = 0;
                if (strstr(st->asset_values[k], hash))
                    fprintf(stderr, "train_dbnet: warning: the held-out %s %.*s is also used for training: the held-out figures "
                                    "overstate what the model does on unseen ones\n", k ? "photograph" : "font",
                            (int)(strcspn(line, "\n") - 66), line + 66);
            }
        }
}

/* The start output's record of the fonts and photographs: the lines of the checkpoint's lists. */
static void print_assets(const train_state *st) {
    int k;
    for (k = 0; k < st->n_assets; k++) {
        const char *line, *v = st->asset_values[k];
        int n = 0, which = 0;
        while (which < 3 && strcmp(kAssetKeys[which], st->asset_keys[k]) != 0) which++;
        for (line = v; *line; line += strcspn(line, "\n") + 1) n++;
        fprintf(stderr, "train_dbnet: %s: %d%s\n", kAssetNames[which], n, n ? " (SHA-256, file)" : which % 2 ? ", procedural backgrounds only" : "");
        for (line = v; *line; line += strcspn(line, "\n") + 1) fprintf(stderr, "  %.*s\n", (int)strcspn(line, "\n"), line);
    }
}

/* ---------------------------------------------------------------- the run directory

   A run's state -- weights, optimizer moments and step, weight average, the data position and the metrics position
   (both are the step: the loader restarts at batch step % batches_per_epoch of epoch step / batches_per_epoch, and
   ocr_metrics_open_resume drops what was logged after it) -- is committed as one unit, in this order:
     1. the metrics are flushed and fsynced: the records up to the step are on disk before a state claims them;
     2. state.<G>.safetensors (the weights, with the settings and position as "train." metadata) and
        state.<G>.optim.safetensors (ocr_optim_save) are written under the next generation number G, each to a
        temporary name, fsynced and renamed;
     3. state.json, naming the two files with their sizes and CRC-32C, G and the step, is written to a temporary name,
        fsynced, renamed over the previous one (a rename is atomic) and the directory fsynced. This is the commit;
     4. last.safetensors and last.optim.safetensors are pointed at the new pair (hard links, renamed into place) and
        the previous generation's files are removed.
   A kill -9 at any instant, or a full disk failing any write, before 3 leaves the previous state.json and the pair
   it names untouched; from 3 on the new one is complete. --resume trusts only state.json and the files it names,
   checked against their sizes and CRCs, and rolls the metrics back to its step. A state added later (a loss scaler)
   is one more file named in state.json (or tensors in the optimizer file, which ocr_optim_load refuses when it does
   not know them), with state.json's "format" raised so that an older train_dbnet refuses it rather than resume
   without it. A run directory from before state.json (last.safetensors + last.optim.safetensors, each with
   train.step) still resumes, from that pair.
   While a process trains in a directory it holds flock(DIR/.lock), which names it (pid and host): a second trainer
   or a --resume is refused, and the kernel drops the lock when the holder dies, so a crashed run's lock is no
   obstacle. */
typedef ocr_ex_run_files run_files;

/* OCR_TEST_KILL_IN_SAVE=K (tests): the process SIGKILLs itself at point K of its first state commit: 1 after the metrics
   flush, 2 between the optimizer and the weights file, 3 before state.json, 4 after it, 5 after last.* */
static int g_kill_in_save;
static void test_kill_point(int k) { if (k > 0 && g_kill_in_save == k) raise(SIGKILL); }

/* Removes what a killed writer left (temporary files) and the state files of generations other than keep. */
static void remove_stale_files(const char *run_dir, int64_t keep) {
    DIR *d = opendir(run_dir);
    struct dirent *e;
    char path[4096];
    while (d && (e = readdir(d)) != NULL) {
        const char *n = e->d_name;
        int64_t g = ocr_ex_state_generation(n);
        int tmp = strstr(n, ".tmp.") && (strncmp(n, "state.", 6) == 0 || strncmp(n, "last.", 5) == 0 || strncmp(n, "best.", 5) == 0);
        if (!tmp && (g < 0 || g == keep)) continue;
        snprintf(path, sizeof path, "%s/%s", run_dir, n);
        unlink(path);
    }
    if (d) closedir(d);
    /* an overlay whose atomic write was cut short leaves its temporary file; the step is validated again */
    snprintf(path, sizeof path, "%s/overlays", run_dir);
    d = opendir(path);
    while (d && (e = readdir(d)) != NULL) {
        if (strncmp(e->d_name, "step_", 5) != 0 || !strstr(e->d_name, ".png.tmp.")) continue;
        snprintf(path, sizeof path, "%s/overlays/%s", run_dir, e->d_name);
        unlink(path);
    }
    if (d) closedir(d);
}

/* The name of a file that shows dir holds a run, or NULL. */
static const char *run_evidence(const char *run_dir) {
    static const char *const names[] = {"state.json", "last.safetensors", "last.optim.safetensors", "best.safetensors", "metrics.jsonl"};
    static char found[300];
    DIR *d;
    struct dirent *e;
    int i;
    for (i = 0; i < (int)(sizeof names / sizeof names[0]); i++)
        if (ocr_ex_file_in(run_dir, names[i])) return names[i];
    found[0] = 0;
    d = opendir(run_dir);
    while (d && !found[0] && (e = readdir(d)) != NULL)
        if (strncmp(e->d_name, "events.out.tfevents.", 20) == 0 || ocr_ex_state_generation(e->d_name) >= 0)
            snprintf(found, sizeof found, "%s", e->d_name);
    if (d) closedir(d);
    return found[0] ? found : NULL;
}

/* --overwrite: deletes the files a run writes (and nothing else) */
static void clear_run(const char *run_dir) {
    static const char *const names[] = {"state.json", "last.safetensors", "last.optim.safetensors", "best.safetensors",
                                        "best.optim.safetensors", "metrics.jsonl"};
    char path[4096];
    DIR *d;
    struct dirent *e;
    int i;
    for (i = 0; i < (int)(sizeof names / sizeof names[0]); i++) {
        snprintf(path, sizeof path, "%s/%s", run_dir, names[i]);
        unlink(path);
    }
    remove_stale_files(run_dir, -1);
    d = opendir(run_dir);
    while (d && (e = readdir(d)) != NULL)
        if (strncmp(e->d_name, "events.out.tfevents.", 20) == 0) {
            snprintf(path, sizeof path, "%s/%s", run_dir, e->d_name);
            unlink(path);
        }
    if (d) closedir(d);
    snprintf(path, sizeof path, "%s/overlays", run_dir);
    d = opendir(path);
    while (d && (e = readdir(d)) != NULL)
        if (strncmp(e->d_name, "step_", 5) == 0 && strstr(e->d_name, ".png")) {
            snprintf(path, sizeof path, "%s/overlays/%s", run_dir, e->d_name);
            unlink(path);
        }
    if (d) closedir(d);
}

/* The model's two files of a commit (ocr_ex_write_state_fn). */
typedef struct {
    const ocr_dbnet *m;
    const ocr_optimizer *opt;
    const float *ema;
    const ocr_grad_scaler *scaler;
    const train_args *a;
    const train_state *st;
} state_parts;
static void write_state(void *user, ocr_ctx *ctx, const char *weights, const char *optim, int kill_point) {
    const state_parts *s = (const state_parts *)user;
    write_checkpoint(ctx, weights, optim, s->m, s->opt, s->ema, s->scaler, s->a, s->st, kill_point);
}

/* Commits the run's state at st->step (ocr_ex_state_commit; format 2 marks a mixed-precision run, whose loss scaler a
   train_dbnet that reads format 1 only would not restore). */
static void commit_state(ocr_ctx *ctx, const char *run_dir, run_files *rf, ocr_metrics *metrics, const ocr_dbnet *m,
                         const ocr_optimizer *opt, const float *ema, const ocr_grad_scaler *scaler, const train_args *a,
                         const train_state *st) {
    state_parts parts;
    parts.m = m; parts.opt = opt; parts.ema = ema; parts.scaler = scaler; parts.a = a; parts.st = st;
    if (ocr_metrics_flush(ctx, metrics)) die(ctx, "metrics");
    ocr_ex_state_commit("train_dbnet", ctx, run_dir, rf, st->step, strcmp(a->amp, "fp32") ? 2 : 1, write_state, &parts, test_kill_point);
    remove_stale_files(run_dir, rf->generation);
}

/* A count or a number from a checkpoint's metadata; missing or malformed: exits naming the file and the key. */
static int64_t meta_count(const ocr_safetensors *st, const char *file, const char *key) {
    const char *s = ocr_safetensors_meta(st, key);
    char *end = NULL;
    long long v = 0;
    if (s) { errno = 0; v = strtoll(s, &end, 10); }
    if (!s || end == s || *end || errno || v < 0) {
        fprintf(stderr, "train_dbnet: --resume: %s %s '%s'%s%s%s\n", file, s ? "has a malformed" : "lacks", key, s ? " = '" : "", s ? s : "",
                s ? "' (expected a count)" : " in its metadata: not a train_dbnet checkpoint");
        exit(1);
    }
    return (int64_t)v;
}
/* The state --resume continues from: state.json's (ocr_ex_state_read); or, in a directory from before state.json,
   last.safetensors + last.optim.safetensors. */
static void find_state(ocr_ctx *ctx, const char *run_dir, run_files *rf) {
    int format;
    if (ocr_ex_state_read("train_dbnet", ctx, run_dir, 2, rf, &format) == 0) return;
    snprintf(rf->weights, sizeof rf->weights, "%s/last.safetensors", run_dir);
    snprintf(rf->optim, sizeof rf->optim, "%s/last.optim.safetensors", run_dir);
    rf->step = -1;
    if (access(rf->weights, F_OK) != 0) {
        fprintf(stderr, "train_dbnet: --resume %s: no saved state there (state.json, or last.safetensors from an older "
                        "train_dbnet); start it again with --out %s --overwrite\n", run_dir, run_dir);
        exit(1);
    }
}

/* The optimizer state and the weight average (when ema is given) of the state being resumed, whose step is step. */
static void load_optimizer(ocr_ctx *ctx, const run_files *rf, ocr_optimizer *opt, float *ema, ocr_grad_scaler *scaler, int64_t step,
                           int64_t optim_step) {
    ocr_safetensors st;
    const char *s;
    if (ocr_safetensors_open(ctx, &st, rf->optim)) die(ctx, "reading the optimizer state");
    s = ocr_safetensors_meta(&st, "train.step");
    if (!s || atoll(s) != step) {
        fprintf(stderr, "train_dbnet: %s is from step %s but %s from step %lld\n", rf->optim, s ? s : "?", rf->weights, (long long)step);
        exit(1);
    }
    opt->step = optim_step; /* a file from before ocr_optim_save's format holds only the tensors; a newer one sets it too */
    if (ocr_optim_load(ctx, opt, ema, &st) || ocr_grad_scaler_from_meta(ctx, scaler, &st)) die(ctx, "reading the optimizer state");
    if (opt->step != optim_step) {
        fprintf(stderr, "train_dbnet: %s is at optimizer step %lld but %s at %lld\n", rf->optim, (long long)opt->step, rf->weights,
                (long long)optim_step);
        exit(1);
    }
    ocr_safetensors_close(&st);
}

/* Exchanges the model's weights with the weight average (--ema; nothing without one): calling it again swaps back.
   The two buffers have the same layout and device, and nothing keeps a pointer into either between calls. */
static void swap_weights(ocr_dbnet *m, float **avg) {
    float *t;
    if (!*avg) return;
    t = m->params.data;
    m->params.data = *avg;
    *avg = t;
}

/* ---------------------------------------------------------------- data parallelism (ocr_mpi.h) */

/* Every rank starts from the same weights and step (a fresh run: the same seed; a resumed one: the same files) with
   the same settings (the same command line, or the same checkpoint). */
static void dist_check_same_start(const ocr_dbnet *m, const train_state *st, const train_args *a) {
    uint32_t crc = 0;
    int64_t lo, hi;
    ocr_ex_meta meta;
    ocr_ex_meta_init(&meta);
    if (ocr_ex_settings_to_meta(kSettings, N_SETTINGS, a, "train.", &meta) == 0) crc = ocr_crc32c(crc, meta.text, meta.used);
    crc = ocr_crc32c(crc, a->dist_loss, strlen(a->dist_loss));
    crc = ocr_crc32c(crc, &a->sync_bn, sizeof a->sync_bn);
    if (m->params.device == OCR_DEVICE_CPU) crc = ocr_crc32c(crc, m->params.data, m->params.numel * sizeof(float));
    crc = ocr_crc32c(crc, &st->step, sizeof st->step);
    ocr_dist_minmax_i64(&g_dist, (int64_t)crc, &lo, &hi, "MPI_Allreduce of the starting weights' CRC");
    if (lo != hi) {
        fprintf(stderr, "train_dbnet: rank %d: the ranks start from different settings, weights or steps (their CRC-32C differ): "
                        "every rank must have the same flags, read the same --resume directory (a shared file system) and the same "
                        "--init file\n", g_dist.rank);
        ocr_dist_abort(&g_dist, 1);
    }
}

/* --dist-loss global: the whole global batch's network outputs and targets, gathered in rank order on every rank, and
   the loss's gradients for all of them, of which each rank back-propagates its own rows. The DB loss normalises over
   the batch (positive counts, Dice sums), so this, not an average of per-rank losses, is the loss of one process with
   the whole batch. */
enum { DIST_MAX_RANKS = 1024 };
typedef struct {
    ocr_tensor maps[6];          /* prob logits, threshold, gt_shrink, mask_shrink, gt_thresh, mask_thresh: [N*B,1,S,S] */
    ocr_tensor d_logits, d_thresh;
    int sizes[DIST_MAX_RANKS];
} dist_buffers;

static void dist_buffers_alloc(ocr_ctx *ctx, dist_buffers *db, int batch, int size) {
    static const char *const names[6] = {"all.prob_logits", "all.thresh", "all.gt_shrink", "all.mask_shrink", "all.gt_thresh", "all.mask_thresh"};
    ocr_shape sh = ocr_shape4((int64_t)batch * g_dist.world, 1, size, size);
    int k;
    if (g_dist.world > DIST_MAX_RANKS) {
        fprintf(stderr, "train_dbnet: --dist-loss global takes at most %d ranks; use --dist-loss local\n", DIST_MAX_RANKS);
        ocr_dist_abort(&g_dist, 2);
    }
    for (k = 0; k < 6; k++)
        if (ocr_tensor_alloc(ctx, &db->maps[k], names[k], OCR_F32, OCR_DEVICE_CPU, sh)) die(ctx, "allocating the gathered maps");
    if (ocr_tensor_alloc(ctx, &db->d_logits, "all.d_prob_logits", OCR_F32, OCR_DEVICE_CPU, sh) ||
        ocr_tensor_alloc(ctx, &db->d_thresh, "all.d_thresh", OCR_F32, OCR_DEVICE_CPU, sh))
        die(ctx, "allocating the gathered maps");
}

static void dist_buffers_free(dist_buffers *db) {
    int k;
    for (k = 0; k < 6; k++) ocr_tensor_free(&db->maps[k]);
    ocr_tensor_free(&db->d_logits);
    ocr_tensor_free(&db->d_thresh);
}

/* The loss of the whole global batch; this rank's rows of its gradients go into dl and dt (zeroed, [n,1,S,S]).
   Returns the global batch's size. */
static int dist_global_loss(ocr_ctx *ctx, dist_buffers *db, const ocr_db_loss_config *cfg, const ocr_tensor *logits, const ocr_tensor *thresh,
                            const ocr_tensor *targets, ocr_db_loss_terms *terms, ocr_tensor *dl, ocr_tensor *dt) {
    const ocr_tensor *mine[6];
    ocr_tensor all[6], gdl, gdt, rows;
    int counts[DIST_MAX_RANKS], r, k, total = 0, offset = 0, n = (int)dl->shape.dim[0];
    int64_t plane = dl->shape.dim[2] * dl->shape.dim[3];
    mine[0] = logits; mine[1] = thresh;
    for (k = 0; k < 4; k++) mine[2 + k] = &targets[F_GT_SHRINK + k];
    ocr_dist_gather_int(&g_dist, n, db->sizes, "MPI_Allgather of the batch sizes");
    for (r = 0; r < g_dist.world; r++) {
        if (r < g_dist.rank) offset += db->sizes[r];
        total += db->sizes[r];
        counts[r] = (int)(db->sizes[r] * plane);
    }
    for (k = 0; k < 6; k++) {
        if (ocr_tensor_slice(ctx, &db->maps[k], 0, total, &all[k])) die(ctx, "the gathered maps");
        ocr_dist_gatherv_f32(&g_dist, (const float *)mine[k]->data, (float *)all[k].data, counts, "MPI_Allgatherv of the loss maps");
    }
    if (ocr_tensor_slice(ctx, &db->d_logits, 0, total, &gdl) || ocr_tensor_slice(ctx, &db->d_thresh, 0, total, &gdt) ||
        ocr_tensor_zero(ctx, &gdl) || ocr_tensor_zero(ctx, &gdt))
        die(ctx, "gradients");
    if (ocr_loss_db(ctx, cfg, &all[0], &all[1], &all[2], &all[3], &all[4], &all[5], terms, &gdl, &gdt)) die(ctx, "loss");
    if (ocr_tensor_slice(ctx, &gdl, offset, n, &rows) || ocr_tensor_copy(ctx, dl, &rows) || ocr_tensor_slice(ctx, &gdt, offset, n, &rows) ||
        ocr_tensor_copy(ctx, dt, &rows))
        die(ctx, "gradients");
    return total;
}

/* OCR_TEST_DIST_KILL=R:S or OCR_TEST_DIST_HANG=R:S (tests/test_mpi.c): rank R SIGKILLs itself, or stops answering
   (sleeps), as it starts step S: what a crashed or wedged rank does to the others. */
static void dist_test_fault(int64_t step) {
    static const char *const vars[2] = {"OCR_TEST_DIST_KILL", "OCR_TEST_DIST_HANG"};
    int k, rank;
    long long at;
    for (k = 0; k < 2; k++) {
        const char *v = getenv(vars[k]);
        if (!v || sscanf(v, "%d:%lld", &rank, &at) != 2 || rank != g_dist.rank || at != step) continue;
        if (k == 0) raise(SIGKILL);
        for (;;) ocr_dist__sleep(3600);
    }
}

/* The gradient buffer summed over the ranks in place (average: then divided by their number), in one all-reduce:
   the backward pass is one library call, so no bucket can start before it ends (docs/DISTRIBUTED.md measures what
   the all-reduce costs). */
static void dist_reduce_gradients(ocr_dbnet *m, int average) {
    size_t k;
#if defined(OCR_CUDA) && defined(OCR_WITH_NCCL)
    if (m->params.device != OCR_DEVICE_CPU) {
        ocr_dist_nccl_allreduce_f32(&g_dist, m->params.grad, m->params.numel, average, "ncclAllReduce of the gradients");
        return;
    }
#endif
    ocr_dist_sum_f32(&g_dist, m->params.grad, m->params.numel, "MPI_Allreduce of the gradients");
    if (average)
        for (k = 0; k < m->params.numel; k++) m->params.grad[k] /= (float)g_dist.world;
}

/* ---------------------------------------------------------------- main */

int main(int argc, char **argv) {
    train_args a;
    int is_synth, i;
    ocr_ctx ctx;
    ocr_synth synth, train_synth, heldout_synth; /* validation scenes keep the defaults; training ones may be denser */
    ocr_synth_config synth_cfg, train_synth_cfg;
    ocr_dataset train_ds, shard_ds;
    ocr_dist_shard shard;
    ocr_loader *loader = NULL;
    ocr_loader_config lcfg;
    transform_cfg tcfg;
    ocr_dbnet model;
    ocr_dbnet_config mcfg;
    ocr_optimizer opt;
    ocr_grad_scaler scaler = ocr_grad_scaler_default(0);
    ocr_amp_stats amp_stats;
    float *ema = NULL;        /* --ema: the weight average, model.params.numel floats where the parameters live */
    ocr_db_loss_config loss_cfg;
    ocr_metrics metrics;
    val_set val, heldout;
    val_figures last_eval, last_heldout;
    train_state st;
    ocr_safetensors resume_st;
    ocr_tensor d_logits, d_thresh, targets_dev[F_COUNT];
    char run_dir[2048], path[4096], best_optim[4096], why[8192];
    const char *problem;
    int64_t batches_per_epoch, total_steps;
    int heldout_count;
    char held[64] = "", where[160];
    int cpu_bf16;
    double t_start, t_images = 0, seconds_before = 0;
    int step_images = 0;
    double t_comm = 0, t_gather = 0, t_allreduce = 0, t_steps = 0; /* rank 0's time in the data-parallel exchanges */
    int tty = isatty(2) && getenv("TERM") && strcmp(getenv("TERM"), "dumb") != 0;
    int log_level = OCR_LOG_WARN;
    int eval_done_at_end = 0;
    int64_t saved_step = -1, optim_step = 0, steps_before = 0;
    run_files rf;
    int is_root, global_loss, amp_chosen;
    dist_buffers db;

    memset(targets_dev, 0, sizeof targets_dev);
    memset(&db, 0, sizeof db);
    if (ocr_ex_settings_parse(argc, argv, "[options]", kSettings, N_SETTINGS, &a) != 0) {
        fprintf(stderr, "train_dbnet: unexpected argument '%s' (see --help)\n", argv[1]);
        return 2;
    }
    /* under an MPI launcher: this process is one rank of the job; rank 0 alone logs, validates and writes the run */
    if ((i = ocr_dist_init(&g_dist, "train_dbnet", &argc, &argv, a.dist_timeout)) != 0) return i;
    is_root = g_dist.rank == 0;
    if (!is_root) {
        tty = 0;
        if (!freopen("/dev/null", "w", stdout)) { /* its summary line is rank 0's */ }
    }
    if (a.threads == 0 && g_dist.local_world > 1) a.threads = ocr_cpu_count() / g_dist.local_world > 1 ? ocr_cpu_count() / g_dist.local_world : 1;
    if (ocr_ctx_init(&ctx, a.threads, (uint64_t)a.seed) != OCR_OK) die(&ctx, "starting");
    if (g_dist.world > 1 && strcmp(a.device, "cpu") != 0) {
        /* device buffers go through NCCL (Debian's Open MPI is not CUDA-aware), one GPU per rank by local rank; the
           gathered loss and synchronised BN are CPU only */
#if defined(OCR_CUDA) && defined(OCR_WITH_NCCL)
        if (a.sync_bn || strcmp(a.dist_loss, "local") != 0) {
            fprintf(stderr, "train_dbnet: --device cuda under MPI takes --dist-loss local and no --sync-bn (both are CPU only)\n");
            return 2;
        }
        if (ocr_dist_nccl_init(&g_dist)) ocr_dist_abort(&g_dist, 1);
        if (ocr_cuda_init(&ctx, g_dist.local_rank) != OCR_OK) die(&ctx, "--device cuda");
#else
        fprintf(stderr, "train_dbnet: --device %s under MPI needs the CUDA build with NCCL (OCR_WITH_NCCL, docs/DISTRIBUTED.md)\n", a.device);
        return 2;
#endif
    } else if ((i = ocr_ex_set_device(&ctx, "train_dbnet", a.device)) != 0) return i;
    ctx.log_fn = ocr_log_stderr;
    ctx.log_user = &log_level;
    if (a.check_numerics) ctx.debug_flags |= OCR_DEBUG_CHECK_NUMERICS;
    memset(&st, 0, sizeof st);
    memset(&rf, 0, sizeof rf);
    if (getenv("OCR_TEST_KILL_IN_SAVE")) g_kill_in_save = atoi(getenv("OCR_TEST_KILL_IN_SAVE"));

    /* A resumed run takes its settings from its checkpoint; only threads, workers and logging may change. */
    if (a.resume) {
        struct stat sb;
        errno = 0;
        if (a.overwrite) { fprintf(stderr, "train_dbnet: --overwrite starts a new run; it does not go with --resume\n"); return 2; }
        snprintf(run_dir, sizeof run_dir, "%s", a.resume);
        if (stat(run_dir, &sb) != 0 || !S_ISDIR(sb.st_mode)) {
            fprintf(stderr, "train_dbnet: --resume %s: %s\n", run_dir, errno ? strerror(errno) : "not a directory");
            return 1;
        }
        if (is_root) ocr_ex_lock_run_dir("train_dbnet", run_dir);
        find_state(&ctx, run_dir, &rf); /* every rank reads the same state: the run directory is shared (or copied) */
        if (is_root) remove_stale_files(run_dir, rf.generation);
        if (ocr_safetensors_open(&ctx, &resume_st, rf.weights)) die(&ctx, "--resume");
        if (ocr_ex_settings_from_meta("train_dbnet", rf.weights, kSettings, N_SETTINGS, &a, "train.", checkpoint_meta, &resume_st, why,
                                      sizeof why)) {
            fprintf(stderr, "train_dbnet: %s\n", why);
            return 1;
        }
        st.step = meta_count(&resume_st, rf.weights, "train.step");
        st.best_hmean = ocr_ex_meta_number("train_dbnet", &resume_st, rf.weights, "train.best_hmean", -HUGE_VAL);
        st.best_step = meta_count(&resume_st, rf.weights, "train.best_step");
        seconds_before = ocr_ex_meta_number("train_dbnet", &resume_st, rf.weights, "train.seconds", -HUGE_VAL);
        optim_step = meta_count(&resume_st, rf.weights, "train.optim_step");
        {
            const char *was = ocr_safetensors_meta(&resume_st, "train.val_post");
            if (is_root && (!was || strcmp(was, val_post_description()) != 0))
                fprintf(stderr, "train_dbnet: warning: the validations' post-processing is now '%s', the run's was '%s': the "
                                "figures before and after (and the best checkpoint's choice) are not comparable\n",
                        val_post_description(), was ? was : "the official one (thresh 0.3, box_thresh 0.6, score fast, no split)");
        }
        if (rf.step >= 0 && rf.step != st.step) {
            fprintf(stderr, "train_dbnet: --resume: %s/state.json is at step %lld but %s at step %lld\n", run_dir, (long long)rf.step,
                    rf.weights, (long long)st.step);
            return 1;
        }
        { /* the data-parallel layout is the run's: the same world size (shards, batches, statistics), its --sync-bn and --dist-loss */
            const char *w = ocr_safetensors_meta(&resume_st, "dist.world_size"), *sync = ocr_safetensors_meta(&resume_st, "dist.sync_bn"),
                       *dl = ocr_safetensors_meta(&resume_st, "dist.loss");
            int run_world = w ? atoi(w) : 1; /* a checkpoint from before data parallelism: one process */
            if (run_world != g_dist.world) {
                if (is_root)
                    fprintf(stderr, "train_dbnet: --resume %s: the run was trained by %d process%s (dist.world_size in %s) and this is %d: "
                                    "its data shards and its batch of %d per process would change; resume it with mpirun -np %d (or, for 1, "
                                    "without mpirun)\n", run_dir, run_world, run_world == 1 ? "" : "es", rf.weights, g_dist.world, a.batch,
                            run_world);
                else ocr_dist__sleep(0.5); /* rank 0 says it before the launcher ends the job */
                return 1;
            }
            if (sync) a.sync_bn = atoi(sync) != 0;
            if (dl && (strcmp(dl, "global") == 0 || strcmp(dl, "local") == 0)) a.dist_loss = dl;
        }
    } else if (a.out) {
        snprintf(run_dir, sizeof run_dir, "%s", a.out);
    } else {
        char stamp[64];
        time_t t = time(NULL);
        strftime(stamp, sizeof stamp, "%Y%m%d-%H%M%S", localtime(&t));
        mkdir("runs", 0755);
        snprintf(run_dir, sizeof run_dir, "runs/dbnet-%s", stamp);
    }
    if ((problem = settings_problem(&a)) != NULL) {
        /* a resumed run's settings are its checkpoint's: there they were checked when the run started, so a problem
           now is the file's, not a usage error */
        fprintf(stderr, "train_dbnet: %s%s%s\n", a.resume ? rf.weights : "", a.resume ? ": " : "", problem);
        return a.resume ? 1 : 2;
    }
    if (a.val_scale == 0) a.val_scale = is_synth_spec(a.val) ? 1.4f : 1.0f; /* stored resolved in checkpoints */
    amp_chosen = strcmp(a.amp, "auto") == 0; /* so is the precision: a resume elsewhere keeps the run's */
    if (amp_chosen) a.amp = ocr_amp_name(ocr_amp_default(&ctx));
    if (a.fonts && !a.fonts[0]) a.fonts = NULL;    /* empty: the declared set */
    if (a.photos && !a.photos[0]) a.photos = NULL;
    heldout_count = !is_synth_spec(a.val) ? 0 : a.heldout_count < 0 ? a.val_count : a.heldout_count;
    if (!is_root) { /* the run directory is rank 0's */ }
    else if (mkdir(run_dir, 0755) != 0 && errno != EEXIST) { fprintf(stderr, "train_dbnet: cannot create %s: %s\n", run_dir, strerror(errno)); return 1; }
    if (!a.resume && is_root) { /* a new run: the directory is locked, and a run already there is neither touched nor mixed with this one */
        const char *found;
        ocr_ex_lock_run_dir("train_dbnet", run_dir);
        if ((found = run_evidence(run_dir)) != NULL) {
            if (!a.overwrite) {
                fprintf(stderr, "train_dbnet: %s already holds a run (%s): continue it with --resume %s, or start a new one in it with "
                                "--overwrite (which deletes it)\n", run_dir, found, run_dir);
                return 2;
            }
            clear_run(run_dir);
        }
    }
    snprintf(path, sizeof path, "%s/overlays", run_dir);
    if (is_root) mkdir(path, 0755);

    /* precision: the convolutions' inputs in the half type; fp16 needs the loss scaler (its state comes back on --resume) */
    {
        int amp = OCR_AMP_OFF;
        (void)ocr_amp_parse(a.amp, &amp); /* checked by settings_problem */
        ctx.amp = amp;
        scaler = ocr_grad_scaler_default(amp == OCR_AMP_F16 && strcmp(a.loss_scale, "dynamic") == 0);
        memset(&amp_stats, 0, sizeof amp_stats);
    }

    /* model and optimizer */
    mcfg = ocr_dbnet_config_default();
    mcfg.depth = strcmp(a.backbone, "resnet34") == 0 ? 34 : 18;
    mcfg.width = a.width;
    mcfg.prior_prob = a.prior;
    if (ocr_dbnet_init(&ctx, &model, &mcfg)) die(&ctx, "building the model");
    if (a.init && !a.resume && ocr_dbnet_load_backbone(&ctx, &model, a.init)) die(&ctx, "--init");
    if (ocr_optim_init(&ctx, &opt, &model.params, strcmp(a.optimizer, "sgd") == 0 ? ocr_optim_sgd(0.9f, a.weight_decay, 0)
                                                                               : ocr_optim_adamw(0.9f, 0.999f, 1e-8f, a.weight_decay)))
        die(&ctx, "optimizer");
    if (a.ema > 0) {
        if (!(ema = ocr_floats_alloc(&ctx, model.params.device, model.params.numel, "ema")) || ocr_params_ema(&ctx, ema, &model.params, 0.0f))
            die(&ctx, "the weight average (--ema)");
    }
    if (a.resume) {
        if (ocr_dbnet_load(&ctx, &model, rf.weights)) die(&ctx, "--resume");
        load_optimizer(&ctx, &rf, &opt, ema, &scaler, st.step, optim_step);
    }
    if (g_dist.world > 1) dist_check_same_start(&model, &st, &a);
    if (g_dist.world > 1 && a.sync_bn) { /* every BN layer's training statistics summed over the ranks (ocr_nn.h) */
        ctx.replica_sum = ocr_dist_replica_sum;
        ctx.replica_user = &g_dist;
    }

    /* data: the synthetic training and validation scenes share the fonts and photographs (--fonts, --photos; validation
       keeps the default density and heights); the held-out set has the declared held-out ones, so that its figure says
       how the model does on faces and pictures it never saw */
    memset(&synth, 0, sizeof synth); /* fonts are loaded only for the sets that are synthetic */
    memset(&train_synth, 0, sizeof train_synth);
    memset(&heldout_synth, 0, sizeof heldout_synth);
    memset(&heldout, 0, sizeof heldout);
    synth_cfg = ocr_synth_defaults();
    synth_cfg.font_path = a.fonts;
    synth_cfg.photo_path = a.photos;
    if (!is_root) heldout_count = 0; /* validation is rank 0's */
    if (is_root && is_synth_spec(a.val) && ocr_synth_init(&ctx, &synth, &synth_cfg)) die(&ctx, "synthetic validation scenes (--fonts, --photos)");
    train_synth_cfg = synth_cfg;
    train_synth_cfg.lines_per_mpix = a.synth_lines;
    train_synth_cfg.min_text_px *= a.synth_text_scale;
    train_synth_cfg.max_text_px *= a.synth_text_scale;
    if (is_synth_spec(a.data) && ocr_synth_init(&ctx, &train_synth, &train_synth_cfg))
        die(&ctx, "synthetic training scenes (--fonts, --photos, --synth-lines, --synth-text-scale)");
    if (heldout_count > 0) {
        ocr_synth_config h = ocr_synth_defaults();
        h.split = OCR_SYNTH_HELDOUT;
        h.photo_path = a.photos && strcmp(a.photos, "none") == 0 ? "none" : NULL;
        if (ocr_synth_init(&ctx, &heldout_synth, &h))
            die(&ctx, "held-out validation scenes (the declared held-out fonts and photographs; --heldout-count 0 goes without)");
    }
    record_assets(&st, is_synth_spec(a.data) ? &train_synth : is_synth_spec(a.val) && is_root ? &synth : NULL,
                  heldout_count > 0 ? &heldout_synth : NULL, a.resume ? &resume_st : NULL, rf.weights);
    if (open_dataset(&ctx, a.data, &train_synth, (uint64_t)a.seed * 7919u + 1, (int64_t)a.steps * a.batch * g_dist.world, a.size, &train_ds,
                     &is_synth))
        die(&ctx, "--data");
    if (g_dist.world > 1) ocr_dist_shard_open(&g_dist, &shard_ds, &shard, &train_ds, a.batch, is_synth); /* this rank's part of every batch */
    memset(&tcfg, 0, sizeof tcfg);
    tcfg.augment = !is_synth;
    tcfg.aug = ocr_augment_defaults();
    tcfg.aug.crop_width = tcfg.aug.crop_height = a.size;
    lcfg = ocr_loader_config_default();
    lcfg.batch_size = a.batch;
    lcfg.n_workers = a.workers;
    lcfg.worker_nice = ctx.device == OCR_DEVICE_CPU ? 19 : 0; /* the step's threads own the cores; rendering fills gaps */
    lcfg.shuffle = !is_synth;  /* synthetic scenes are already independent draws */
    lcfg.drop_last = 1;
    lcfg.seed = (uint64_t)a.seed;
    lcfg.n_fields = F_COUNT;
    lcfg.field_names[F_IMAGE] = "image"; lcfg.field_shapes[F_IMAGE] = ocr_shape3(3, a.size, a.size);
    lcfg.field_names[F_GT_SHRINK] = "gt_shrink"; lcfg.field_names[F_MASK_SHRINK] = "mask_shrink";
    lcfg.field_names[F_GT_THRESH] = "gt_thresh"; lcfg.field_names[F_MASK_THRESH] = "mask_thresh";
    for (i = F_GT_SHRINK; i < F_COUNT; i++) lcfg.field_shapes[i] = ocr_shape3(1, a.size, a.size);
    lcfg.transform = train_transform;
    lcfg.transform_user = &tcfg;
    if (ocr_loader_create(&ctx, &loader, g_dist.world > 1 ? &shard_ds : &train_ds, &lcfg)) die(&ctx, "data loader");
    batches_per_epoch = (g_dist.world > 1 ? shard_ds.count : train_ds.count) / a.batch;
    if (batches_per_epoch < 1) { fprintf(stderr, "train_dbnet: the training set has fewer than --batch samples\n"); return 1; }
    total_steps = (!is_synth && a.epochs > 0) ? (int64_t)a.epochs * batches_per_epoch : a.steps;
    {
        int input = (int)ceil(a.val_size * (double)a.val_scale / 32.0 - 1e-6) * 32; /* 1.4f must not round 448 up */
        if (is_root) val_open(&ctx, &val, "val", a.val, &synth, (uint64_t)a.seed * 7919u + 1000003u, a.val_count, a.val_size, input);
        else memset(&val, 0, sizeof val);
        if (heldout_count > 0)
            val_open(&ctx, &heldout, "heldout", "synth", &heldout_synth, (uint64_t)a.seed * 7919u + 2000003u, heldout_count, a.val_size, input);
        ocr_synth_free(&synth); /* the validation scenes are rendered: their fonts and photographs can go */
        ocr_synth_free(&heldout_synth);
    }

    if (ocr_tensor_alloc(&ctx, &d_logits, "d_prob_logits", OCR_F32, ctx.device, ocr_shape4(a.batch, 1, a.size, a.size)) ||
        ocr_tensor_alloc(&ctx, &d_thresh, "d_thresh", OCR_F32, ctx.device, ocr_shape4(a.batch, 1, a.size, a.size)))
        die(&ctx, "allocating gradients");
    for (i = F_GT_SHRINK; i < F_COUNT; i++) /* the target maps' upload buffers (the loss runs where the model does) */
        if (ctx.device != OCR_DEVICE_CPU &&
            ocr_tensor_alloc(&ctx, &targets_dev[i], lcfg.field_names[i], OCR_F32, ctx.device, ocr_shape4(a.batch, 1, a.size, a.size)))
            die(&ctx, "allocating target maps");
    global_loss = g_dist.world > 1 && strcmp(a.dist_loss, "global") == 0;
    if (global_loss) dist_buffers_alloc(&ctx, &db, a.batch, a.size);
    /* a resumed run's metrics go back to its state: what a killed process logged after it is logged again */
    if (is_root && (a.resume ? ocr_metrics_open_resume(&ctx, &metrics, run_dir, st.step) : ocr_metrics_open(&ctx, &metrics, run_dir)))
        die(&ctx, "metrics");
    signal(SIGINT, ocr_ex_on_signal);
    signal(SIGTERM, ocr_ex_on_signal);

    if (heldout.count) snprintf(held, sizeof held, " and %d held-out", heldout.count);
    cpu_bf16 = ctx.amp == OCR_AMP_BF16 && ctx.device == OCR_DEVICE_CPU;
    if (is_root) fprintf(stderr, "train_dbnet: %s DB-ResNet-%d width %g, %zu parameters, %lld steps of %d x %dx%d on %s, "
                    "precision %s%s%s%s%s, validation %d images run at %dx%d%s, run %s\n",
            a.resume ? "resuming" : "training", mcfg.depth, a.width, ocr_params_trainable_count(&model.params),
            (long long)total_steps, a.batch, a.size, a.size, ocr_ex_compute_name(&ctx, where, sizeof where), a.amp,
            cpu_bf16 ? " on " : "", cpu_bf16 ? ocr_gemm_bf16_kernel_name(&ctx) : "",
            scaler.enabled ? " with dynamic loss scaling" : "",
            !amp_chosen ? "" : ctx.amp == OCR_AMP_BF16 ? " (the default where the CPU multiplies bf16; --amp fp32 for fp32)"
                                                       : " (the default: this device has no native bf16)", val.count, val.input, val.input, held, run_dir);
    if (is_root) print_assets(&st);
    if (is_root && g_dist.world > 1)
        fprintf(stderr, "train_dbnet: data parallel over %d ranks (MPI%s, %d on this host): batch %d per rank, %d in total; learning rate %g "
                        "per rank and in total (one step on the gradient of the whole batch, not scaled with the ranks); loss %s; "
                        "batch norm statistics %s\n", g_dist.world, ctx.device == OCR_DEVICE_CPU ? "" : " + NCCL", g_dist.local_world, a.batch,
                a.batch * g_dist.world, (double)a.lr,
                global_loss ? "of the whole batch (each rank's maps gathered)" : "of each rank's batch, gradients averaged (--dist-loss local)",
                a.sync_bn ? "of the whole batch (--sync-bn)" : "of each rank's batch");

    loss_cfg = ocr_db_loss_defaults();
    loss_cfg.prob_dice_weight = a.prob_dice; /* sharpens P between neighbouring words: see ocr_loss.h */
    memset(&last_eval, 0, sizeof last_eval);
    memset(&last_heldout, 0, sizeof last_heldout);
    t_start = ocr_monotonic_seconds();
    steps_before = st.step;
    {
        int64_t epoch = -1;
        while (st.step < total_steps && !ocr_ex_stop) {
            ocr_batch *batch = NULL;
            ocr_tensor logits, thresh, dl, dt, targets[F_COUNT];
            ocr_db_loss_terms terms;
            float lr, norm = 0;
            int skip = 0;
            int64_t want_epoch = st.step / batches_per_epoch, want_number = st.step % batches_per_epoch;
            double t_step0 = ocr_monotonic_seconds();
            if (want_epoch != epoch) {
                /* a resumed run starts mid-epoch, with exactly the batch the interrupted run would have used next */
                if (ocr_loader_start_epoch_at(&ctx, loader, want_epoch, want_number)) die(&ctx, "data loader");
                epoch = want_epoch;
            }
            if (g_dist.world > 1) dist_test_fault(st.step + 1);
            if (ocr_loader_next(&ctx, loader, &batch)) die(&ctx, "data loader");
            if (!batch || batch->number != want_number) {
                fprintf(stderr, "train_dbnet: the loader gave batch %lld, expected %lld\n", batch ? (long long)batch->number : -1LL,
                        (long long)want_number);
                exit(1);
            }

            /* from-scratch recipe: class-balanced BCE first, then positive-weighted BCE (OHEM when pos_weight is 0) */
            if ((double)st.step < a.balanced_fraction * (double)total_steps) loss_cfg.bce.mode = OCR_LOSS_BCE_BALANCED;
            else if (a.pos_weight > 0) { loss_cfg.bce.mode = OCR_LOSS_BCE_POS_WEIGHT; loss_cfg.bce.pos_weight = a.pos_weight; }
            else loss_cfg.bce.mode = OCR_LOSS_BCE_OHEM;

            /* the half type's overflows and underflows are counted on the steps that are logged (a pass over each input) */
            ctx.amp_stats = ctx.amp != OCR_AMP_OFF && ((st.step + 1) % a.log_every == 0 || st.step + 1 == total_steps) ? &amp_stats : NULL;
            if (ocr_dbnet_forward(&ctx, &model, &batch->fields[F_IMAGE], 1, &logits, &thresh)) die(&ctx, "forward");
            if (ocr_tensor_slice(&ctx, &d_logits, 0, batch->size, &dl) || ocr_tensor_slice(&ctx, &d_thresh, 0, batch->size, &dt) ||
                ocr_tensor_zero(&ctx, &dl) || ocr_tensor_zero(&ctx, &dt))
                die(&ctx, "gradients");
            loss_targets(&ctx, batch, targets_dev, targets);
            g_dist.step = st.step + 1;
            t_comm = ocr_monotonic_seconds();
            if (global_loss) step_images = dist_global_loss(&ctx, &db, &loss_cfg, &logits, &thresh, targets, &terms, &dl, &dt);
            else if (ocr_loss_db(&ctx, &loss_cfg, &logits, &thresh, &targets[F_GT_SHRINK], &targets[F_MASK_SHRINK], &targets[F_GT_THRESH],
                                 &targets[F_MASK_THRESH], &terms, &dl, &dt))
                die(&ctx, "loss");
            else step_images = batch->size * g_dist.world;
            if (global_loss) t_gather += ocr_monotonic_seconds() - t_comm; /* the gathers and the whole batch's loss */
            ocr_params_zero_grad(&model.params);
            if (ocr_grad_scaler_scale(&ctx, &scaler, &dl) || ocr_grad_scaler_scale(&ctx, &scaler, &dt)) die(&ctx, "loss scaling");
            if (ocr_dbnet_backward(&ctx, &model, &dl, &dt)) die(&ctx, "backward");
            if (g_dist.world > 1) {
                t_comm = ocr_monotonic_seconds();
                dist_reduce_gradients(&model, !global_loss);
                t_allreduce += ocr_monotonic_seconds() - t_comm;
            }
            lr = ocr_lr_poly(a.lr, st.step, total_steps, 0.9f);
            /* fp16: a non-finite gradient skips the step and halves the scale (GradScaler); elsewhere it stays an error,
               which ocr_clip_grad_norm reports naming the parameter */
            if (scaler.enabled && ocr_grad_scaler_unscale(&ctx, &scaler, &model.params, &skip)) die(&ctx, "loss scaling");
            if (!skip) {
                if (ocr_clip_grad_norm(&ctx, &model.params, a.clip, &norm)) die(&ctx, "gradient");
                if (ocr_optim_step(&ctx, &opt, &model.params, lr)) die(&ctx, "optimizer");
                if (ema) { /* the average starts short (decay (1+t)/(10+t)), so early validations are not the initial weights */
                    float decay = (float)((1.0 + (double)st.step) / (10.0 + (double)st.step));
                    if (ocr_params_ema(&ctx, ema, &model.params, decay < a.ema ? decay : a.ema)) die(&ctx, "the weight average (--ema)");
                }
            } else if (is_root) {
                fprintf(stderr, "%strain_dbnet: step %lld skipped: non-finite gradient (first in %s); loss scale %g -> %g\n", tty ? "\n" : "",
                        (long long)st.step + 1, scaler.last_nonfinite, (double)scaler.scale, (double)(scaler.scale * scaler.backoff_factor));
            }
            if (scaler.enabled && ocr_grad_scaler_update(&ctx, &scaler, skip)) die(&ctx, "loss scaling");
            t_images += step_images;
            ocr_loader_release(loader, batch);
            st.step++;
            t_steps += ocr_monotonic_seconds() - t_step0;

            if (g_dist.world > 1 && !global_loss && (st.step % a.log_every == 0 || st.step == total_steps)) {
                /* --dist-loss local: the logged loss is the ranks' mean */
                double v[6];
                v[0] = terms.total; v[1] = terms.bce; v[2] = terms.dice; v[3] = terms.l1; v[4] = terms.bce_binary; v[5] = terms.dice_prob;
                ocr_dist_sum_f64(&g_dist, v, 6, "MPI_Allreduce of the logged loss");
                terms.total = v[0] / g_dist.world; terms.bce = v[1] / g_dist.world; terms.dice = v[2] / g_dist.world;
                terms.l1 = v[3] / g_dist.world; terms.bce_binary = v[4] / g_dist.world; terms.dice_prob = v[5] / g_dist.world;
            }
            if (is_root && (st.step % a.log_every == 0 || st.step == total_steps)) {
                double el = ocr_monotonic_seconds() - t_start, ips = t_images / (el > 0 ? el : 1);
                double data_wait = ocr_loader_get_progress(loader).wait_seconds / (el > 0 ? el : 1); /* share of the time */
                char line[512];
                if (ocr_metrics_scalar(&ctx, &metrics, st.step, "train/loss", terms.total) ||
                    ocr_metrics_scalar(&ctx, &metrics, st.step, "train/bce", terms.bce) ||
                    ocr_metrics_scalar(&ctx, &metrics, st.step, "train/dice", terms.dice) ||
                    ocr_metrics_scalar(&ctx, &metrics, st.step, "train/l1", terms.l1) ||
                    (a.prob_dice > 0 && ocr_metrics_scalar(&ctx, &metrics, st.step, "train/dice_prob", terms.dice_prob)) ||
                    ocr_metrics_scalar(&ctx, &metrics, st.step, "train/lr", lr) ||
                    ocr_metrics_scalar(&ctx, &metrics, st.step, "train/grad_norm", norm) ||
                    ocr_metrics_scalar(&ctx, &metrics, st.step, "train/images_per_second", ips) ||
                    ocr_metrics_scalar(&ctx, &metrics, st.step, "train/data_wait_fraction", data_wait))
                    die(&ctx, "metrics");
                snprintf(line, sizeof line, "loss %.4f (bce %.4f dice %.4f l1 %.4f dice(P) %.4f) lr %.2e %.1f img/s, data wait %.0f%%",
                         terms.total, terms.bce, terms.dice, terms.l1, terms.dice_prob, lr, ips, 100.0 * data_wait);
                if (ctx.amp != OCR_AMP_OFF) { /* the half type's losses in this step: gradients flushed to zero, values turned Inf */
                    const ocr_amp_layer_stats *worst;
                    ocr_amp_layer_stats tot = ocr_amp_stats_total(&amp_stats, &worst);
                    double under = tot.grads ? (double)tot.underflowed / (double)tot.grads : 0.0;
                    size_t used = strlen(line);
                    int counted = ctx.device == OCR_DEVICE_CPU; /* the CUDA backend does not count them */
                    if ((counted && ocr_metrics_scalar(&ctx, &metrics, st.step, "amp/grad_underflow_fraction", under)) ||
                        (counted && ocr_metrics_scalar(&ctx, &metrics, st.step, "amp/overflowed", (double)(tot.overflowed + tot.grads_overflowed))) ||
                        (scaler.enabled && ocr_metrics_scalar(&ctx, &metrics, st.step, "amp/loss_scale", scaler.scale)) ||
                        (scaler.enabled && ocr_metrics_scalar(&ctx, &metrics, st.step, "amp/skipped_steps", (double)scaler.skipped)))
                        die(&ctx, "metrics");
                    if (counted)
                        snprintf(line + used, sizeof line - used, " | %s underflow %.2g%%%s%s overflow %lld", a.amp, 100.0 * under,
                                 worst ? " worst " : "", worst ? worst->layer : "", (long long)(tot.overflowed + tot.grads_overflowed));
                    else
                        snprintf(line + used, sizeof line - used, " | %s (underflow and overflow counted on the CPU only)", a.amp);
                    used = strlen(line);
                    if (scaler.enabled)
                        snprintf(line + used, sizeof line - used, " scale %g skipped %lld", (double)scaler.scale, (long long)scaler.skipped);
                    if (a.check_numerics) /* the numerics watch's per-layer account of the half type */
                        for (i = 0; i < amp_stats.count; i++) {
                            const ocr_amp_layer_stats *l = &amp_stats.layer[i];
                            if (l->overflowed || l->grads_overflowed || l->underflowed)
                                fprintf(stderr, "%s  %s %-40s values overflowed %lld of %lld, gradients overflowed %lld and underflowed "
                                                "to zero %lld of %lld\n", tty ? "\n" : "", a.amp, l->layer, (long long)l->overflowed,
                                        (long long)l->values, (long long)l->grads_overflowed, (long long)l->underflowed, (long long)l->grads);
                        }
                    ocr_amp_stats_reset(&amp_stats);
                    ctx.amp_stats = NULL; /* validation is not counted */
                }
                if (tty) ocr_ex_progress(stderr, (long)st.step, (long)total_steps, el, line);
                else { printf("step %lld/%lld %s\n", (long long)st.step, (long long)total_steps, line); fflush(stdout); }
            }
            /* validation at every --eval-every step and at the last one, logged at the step it was taken; before
               the checkpoint, which closes the step's metrics record */
            if (is_root && ((a.eval_every > 0 && st.step % a.eval_every == 0) || st.step == total_steps)) {
                swap_weights(&model, &ema); /* validation and "best" see the weight average, with --ema */
                char bins[64], held_bins[64];
                last_eval = validate(&ctx, &model, &val, &metrics, run_dir, st.step, 4);
                if (heldout.count) last_heldout = validate(&ctx, &model, &heldout, &metrics, run_dir, st.step, 4);
                eval_done_at_end = st.step == total_steps;
                if (tty) fputc('\n', stderr);
                printf("step %lld validation: precision %.4f recall %.4f hmean %.4f", (long long)st.step, last_eval.r.precision,
                       last_eval.r.recall, last_eval.r.hmean);
                if (heldout.count)
                    printf(" heldout_hmean %.4f (precision %.4f recall %.4f)", last_heldout.r.hmean, last_heldout.r.precision,
                           last_heldout.r.recall);
                printf(" | recall by height <16/16-32/>32 px %s", height_recalls(&last_eval, bins, sizeof bins));
                if (heldout.count) printf(", held-out %s", height_recalls(&last_heldout, held_bins, sizeof held_bins));
                printf("\n");
                fflush(stdout);
                log_figures(&ctx, &metrics, st.step, "val", &last_eval);
                if (heldout.count) log_figures(&ctx, &metrics, st.step, "heldout", &last_heldout);
                /* the best checkpoint is chosen on the ordinary validation set: the held-out one stays a check */
                if (last_eval.r.hmean > st.best_hmean || st.best_step == 0) {
                    st.best_hmean = last_eval.r.hmean;
                    st.best_step = st.step;
                    st.seconds = seconds_before + ocr_monotonic_seconds() - t_start;
                    snprintf(path, sizeof path, "%s/best.safetensors", run_dir);
                    snprintf(best_optim, sizeof best_optim, "%s/best.optim.safetensors", run_dir);
                    write_checkpoint(&ctx, path, best_optim, &model, &opt, NULL, &scaler, &a, &st, 0);
                }
                swap_weights(&model, &ema);
            }
            if (st.step % a.save_every == 0 || st.step == a.stop_at || st.step == total_steps) {
                st.seconds = seconds_before + ocr_monotonic_seconds() - t_start;
                if (is_root) commit_state(&ctx, run_dir, &rf, &metrics, &model, &opt, ema, &scaler, &a, &st);
                saved_step = st.step;
            }
            if (st.step == a.stop_at) ocr_ex_stop = 1;
            if (g_dist.world > 1) { /* a signal to one rank stops every rank after the same step */
                int64_t stop;
                ocr_dist_minmax_i64(&g_dist, ocr_ex_stop ? 1 : 0, NULL, &stop, "MPI_Allreduce of the stop flag");
                ocr_ex_stop = stop != 0;
            }
        }
    }
    if (tty) fputc('\n', stderr);
    st.seconds = seconds_before + ocr_monotonic_seconds() - t_start;
    if (saved_step != st.step && is_root) commit_state(&ctx, run_dir, &rf, &metrics, &model, &opt, ema, &scaler, &a, &st);
    if (is_root && g_dist.world > 1 && st.step > steps_before) /* what overlapping the exchanges with compute could hide at most */
        fprintf(stderr, "train_dbnet: rank 0 per step: gradient all-reduce %.2f ms, loss maps gathered and the whole batch's loss %.2f ms "
                        "(each with the wait for the slowest rank), of a step's %.1f ms\n", 1e3 * t_allreduce / (double)(st.step - steps_before),
                1e3 * t_gather / (double)(st.step - steps_before), 1e3 * t_steps / (double)(st.step - steps_before));
    if (ocr_ex_stop && st.step < total_steps && is_root)
        fprintf(stderr, "train_dbnet: interrupted at step %lld; saved %s/last.safetensors; continue with --resume %s\n",
                (long long)st.step, run_dir, run_dir);
    if (is_root && ocr_metrics_close(&ctx, &metrics)) die(&ctx, "metrics");
    {
        double el = ocr_monotonic_seconds() - t_start;
        printf("{\"hmean\":%.4f,\"precision\":%.4f,\"recall\":%.4f", last_eval.r.hmean, last_eval.r.precision, last_eval.r.recall);
        print_figures_json("", &last_eval, 0);
        print_figures_json("heldout_", &last_heldout, 1);
        printf(",\"steps\":%lld,\"seconds\":%.1f,\"images_per_second\":%.2f,\"validated\":%s,\"run\":\"%s\"}\n", (long long)st.step,
               st.seconds, t_images / (el > 0 ? el : 1), eval_done_at_end ? "true" : "false", run_dir);
    }
    ocr_loader_free(loader);
    ocr_dataset_close(&train_ds);
    val_free(&val);
    val_free(&heldout);
    ocr_synth_free(&train_synth);
    for (i = 0; i < st.n_assets; i++) free((char *)st.asset_values[i]);
    ocr_tensor_free(&d_logits);
    ocr_tensor_free(&d_thresh);
    for (i = 0; i < F_COUNT; i++) ocr_tensor_free(&targets_dev[i]);
    ocr_optim_free(&opt);
    ocr_amp_stats_free(&amp_stats);
    ocr_floats_free(ema, model.params.device);
    ocr_dbnet_free(&model);
    if (a.resume) ocr_safetensors_close(&resume_st);
    dist_buffers_free(&db);
    ocr_ctx_free(&ctx);
    /* no rank leaves before rank 0 has written everything: the launcher ends the job when the first one exits */
    ocr_dist_barrier(&g_dist, "MPI_Barrier at the end of the run (rank 0 writes the last state)");
    ocr_dist_finish(&g_dist);
    return ocr_ex_stop && st.step < total_steps ? 130 : 0;
}
