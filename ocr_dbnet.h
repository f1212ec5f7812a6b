/* ocr_dbnet.h - DBNet: ResNet backbone, FPN neck, DB head, target maps, post-processing, ICDAR evaluation.
   v0.1  MIT

   Do this in exactly one C or C++ file:
       #define OCR_DBNET_IMPLEMENTATION       (OCR_IMPLEMENTATION turns on every module)
       #include "ocr_dbnet.h"
   Dependencies: ocr_tensor.h, ocr_geom.h, ocr_nn.h, ocr_loss.h.
*/
#ifndef OCR_DBNET_H
#define OCR_DBNET_H
#include "ocr_tensor.h"
#include "ocr_nn.h"
#include "ocr_loss.h"
#include "ocr_geom.h"
#ifdef __cplusplus
extern "C" {
#endif

/* ================================================================ [model] declarations */

/* DB-ResNet as in the official DBNet code (MhLiao/DB): a torchvision-layout ResNet-18/34 backbone (BasicBlock),
   the SegDetector FPN neck (1x1 laterals to `inner` channels, nearest 2x upsampling and sums, four 3x3 branches of
   inner/4 channels upsampled to 1/4 scale and concatenated as p5,p4,p3,p2) and the binarize and thresh heads
   (conv3x3, BN, ReLU, two 2x2 stride-2 transposed convs). Parameters carry PyTorch's state_dict names
   (backbone.layer1.0.conv1.weight, decoder.in5.weight, decoder.binarize.3.bias, ...), so torchvision ResNet
   weights load into the backbone and checkpoints load in PyTorch with strict=True.
   Not implemented: the deformable convolutions (DCNv2) of the official "deformable_resnet18"; every conv is plain.

       ocr_dbnet m; ocr_tensor prob_logits, thresh;
       ocr_dbnet_config cfg = ocr_dbnet_config_default();
       cfg.width = 0.25f; cfg.prior_prob = 0.03f;                    // small CPU model, trained from scratch
       ocr_dbnet_init(&ctx, &m, &cfg);
       ocr_dbnet_forward(&ctx, &m, &images, 1, &prob_logits, &thresh); // views into the model, valid until the next call
       ... loss on prob_logits and thresh, giving d_prob_logits and d_thresh ...
       ocr_params_zero_grad(&m.params);
       ocr_dbnet_backward(&ctx, &m, &d_prob_logits, &d_thresh);      // accumulates into m.params.grad
       ocr_optim_step(&ctx, &opt, &m.params, lr);
       ocr_dbnet_save(&ctx, &m, "model.safetensors", NULL, NULL, 0);
       ocr_dbnet_free(&m);
   Inference from a checkpoint (ocr_data.h's ocr_infer_input_size and ocr_image_network_input make x from an image):
       ocr_dbnet_init_from_file(&ctx, &m, "model.safetensors");
       ocr_dbnet_forward(&ctx, &m, &x, 0, &prob, NULL);              // the probability map, for ocr_postprocess */

typedef struct {
    int depth;          /* ResNet depth: 18 or 34 */
    float width;        /* channel multiplier in (0, 4]: c channels become max(8, 8 * round(c * width / 8)) */
    float k;            /* steepness of the approximate binary map sigmoid(k (P - T)) the loss builds; official 50 */
    float prior_prob;   /* in (0, 1): the probability head's last bias starts at logit(prior_prob) (0.03 lets a
                           from-scratch model start learning within minutes); 0: PyTorch's default init (official) */
    float bn_momentum;  /* BatchNorm running-statistics momentum, 0.1 */
    float bn_eps;       /* BatchNorm epsilon, 1e-5 */
} ocr_dbnet_config;

struct ocr__dbnet_state; /* the network's plan, activation arenas and memory layout: private to the implementation */

typedef struct ocr_dbnet {
    ocr_dbnet_config cfg;
    ocr_params params;            /* every weight, bias and BN running statistic, with PyTorch names */
    int64_t num_batches_tracked;  /* training forwards done; written as each BN's num_batches_tracked */
    struct ocr__dbnet_state *state_; /* private: read it through the functions below, never directly */
} ocr_dbnet;

/* resnet18, width 1, k 50, no prior, BN momentum 0.1 and eps 1e-5: the official configuration without DCN. */
OCRDEF ocr_dbnet_config ocr_dbnet_config_default(void);
/* Builds the model for cfg and initialises it as the official code does, drawing from ctx->rng: backbone convs
   kaiming normal (fan_out, as torchvision), decoder convs and transposed convs kaiming normal (fan_in, as PyTorch
   computes it), transposed-conv biases PyTorch's default uniform, BN weight 1 and bias 0 (backbone) or 1e-4
   (decoder), running mean 0 and variance 1. The model lives on ctx->device: with the CUDA backend the weights are drawn
   on the host (the same values as on the CPU) and moved to the device, where its gradients, BN statistics and
   activations are allocated too; it then runs on contexts of that device only. */
OCRDEF int ocr_dbnet_init(ocr_ctx *ctx, ocr_dbnet *m, const ocr_dbnet_config *cfg);
OCRDEF void ocr_dbnet_free(ocr_dbnet *m);
/* x: F32 [N, 3, H, W] with N >= 1 and H, W positive multiples of 32, on the CPU or the model's device (not kept: it is
   copied, i.e. uploaded when the model is on the device). Outputs and the backward's gradients live on the model's
   device.
   training != 0: BN uses batch statistics and updates its running statistics; *prob gets the probability LOGITS
   [N,1,H,W] (before the sigmoid) and *thresh the threshold map [N,1,H,W] (sigmoid applied, as official).
   training == 0: BN uses its running statistics, the threshold head is skipped, *prob gets the probability map
   (sigmoid applied) and *thresh (may be NULL) an empty tensor. Outputs are views into the model, valid until its
   next forward. Activation values and gradients share memory by liveness (each holds its range only from the op that
   writes it to its last reader), which halves a training step's activation memory. Buffers grow when an input with
   more pixels (N H W) arrives; a repeated or smaller one allocates nothing. */
OCRDEF int ocr_dbnet_forward(ocr_ctx *ctx, ocr_dbnet *m, const ocr_tensor *x, int training, ocr_tensor *prob, ocr_tensor *thresh);
/* After a training forward: ACCUMULATES into m->params.grad the gradients of the parameters given the gradients of
   the loss with respect to the probability logits and the threshold map ([N,1,H,W]; NULL counts as zero). Once per
   forward: it reuses the activations' memory as it goes (a second call fails with OCR_ESTATE; the forward's outputs
   stay valid). */
OCRDEF int ocr_dbnet_backward(ocr_ctx *ctx, ocr_dbnet *m, const ocr_tensor *d_prob_logits, const ocr_tensor *d_thresh);
/* Checkpoint: every parameter, each BN's num_batches_tracked (I64 scalar) and the config in __metadata__ (keys
   ocr_dbnet.backbone, .width, .k, .prior_prob, .bn_momentum, .bn_eps, plus format=pt and the caller's pairs).
   A model on the device is copied to the host first: the file is the same bytes as the CPU model's. PyTorch's load_state_dict(strict=True) accepts it for the same architecture (tools/dbnet_ref.py). */
OCRDEF int ocr_dbnet_save(ocr_ctx *ctx, const ocr_dbnet *m, const char *path, const char *const *meta_keys,
                          const char *const *meta_values, int n_meta);
/* The config a checkpoint was saved with, to ocr_dbnet_init a model that can load it. */
OCRDEF int ocr_dbnet_read_config(ocr_ctx *ctx, const char *path, ocr_dbnet_config *cfg);
/* Loads a checkpoint into an initialised model. Refuses a file whose config (depth, width, k, BN momentum and eps)
   differs from the model's, a missing tensor, a shape mismatch, an unknown tensor, or a value that is NaN, infinite
   or above OCR_LOAD_MAX_ABS in magnitude (named with its tensor and index; ocr_dbnet_save refuses to write one);
   on failure the model is unchanged. */
OCRDEF int ocr_dbnet_load(ocr_ctx *ctx, ocr_dbnet *m, const char *path);
/* The model a checkpoint describes, with its weights: ocr_dbnet_read_config, ocr_dbnet_init on ctx's device, then
   ocr_dbnet_load. On failure *m is zeroed (ocr_dbnet_free on it is a no-op). */
OCRDEF int ocr_dbnet_init_from_file(ocr_ctx *ctx, ocr_dbnet *m, const char *path);
/* Loads a torchvision ResNet state_dict saved as safetensors (conv1.weight, layer1.0.bn1.running_mean, ...) into
   the backbone; fc.* and num_batches_tracked entries are ignored. Needs the matching depth and width 1 (ImageNet). */
OCRDEF int ocr_dbnet_load_backbone(ocr_ctx *ctx, ocr_dbnet *m, const char *path);

/* ---- options, memory and profiling: for tests and benchmarks ---- */

/* Flags of ocr_dbnet_set_options, for tests and benchmarks: each turns off one saving of memory or time. All but
   OCR_DBNET_NO_BN_FOLD change no result, bit for bit (the tests check it); that one changes results by rounding. */
enum {
    OCR_DBNET_NO_SHARING = 1,   /* every activation value and gradient gets a range of its own instead of sharing memory
                                   with those whose lifetimes do not overlap */
    OCR_DBNET_NO_RECOMPUTE = 2, /* a training step keeps everything its backward reads instead of computing some BN+ReLU and
                                   convolution outputs again in the backward (CPU) */
    OCR_DBNET_NO_BN_FOLD = 4,   /* eval runs each BN as its own op instead of folding it into the convolution before it (CPU;
                                   the same up to rounding, not bit for bit) */
    OCR_DBNET_NO_FUSION = 8     /* eval runs each addition, the ReLU after it and each upsampling as ops of their own instead
                                   of in one pass with a neighbour (a residual block's end inside its folded convolution,
                                   add + ReLU, upsample + add, upsamplings + concat; CPU) */
};
/* Sets the OCR_DBNET_NO_* flags (0: the defaults); they take effect at the next forward. */
OCRDEF int ocr_dbnet_set_options(ocr_ctx *ctx, ocr_dbnet *m, unsigned flags);

/* Activation memory, in bytes. Values and gradients live in two arenas that grow to the largest need seen. */
typedef struct {
    size_t values_bytes, grads_bytes;           /* the arenas as allocated */
    size_t values_need_bytes, grads_need_bytes; /* what the last forward's input needs (the gradients: 0 after an eval one) */
    size_t values_unshared_bytes, grads_unshared_bytes; /* what the last forward's activations would take, each value and
                                                           gradient in a range of its own and nothing recomputed */
    int64_t arena_allocations;                  /* how often an arena was (re)allocated: a repeated or smaller input adds 0 */
} ocr_dbnet_memory_info;
OCRDEF ocr_dbnet_memory_info ocr_dbnet_memory(const ocr_dbnet *m);

/* Per-op timing. With a clock (seconds; NULL turns profiling off) each forward adds every op's time to its
   seconds_forward and each backward to its seconds_backward, from zero at this call. The ops run in ocr_dbnet_op's
   order (an op that eval runs inside another's pass, a folded BN or a fused addition, ReLU or upsampling, counts
   under that op: OCR_DBNET_NO_FUSION and OCR_DBNET_NO_BN_FOLD time each alone). On a device the ops run
   asynchronously: time there only with a clock that waits for the device. */
OCRDEF int ocr_dbnet_profile(ocr_ctx *ctx, ocr_dbnet *m, double (*clock)(void));
typedef struct {
    const char *name;     /* its output's: the PyTorch module of a layer ("backbone.layer1.0.conv1"), else a name of the
                             model's own ("backbone.layer1.0.sum", "prob_logits", "thresh", "prob") */
    const char *kind;     /* "conv", "convT", "bn", "bn+relu", "relu", "maxpool", "upsample", "add", "concat" or "sigmoid" */
    int64_t channels, height, width; /* output of one image of the last forward's input (height, width 0 before any) */
    double seconds_forward, seconds_backward; /* accumulated since ocr_dbnet_profile (0 without a clock) */
    /* the graph, for exporters (ocr_onnx.h): */
    int n_inputs, inputs[4];   /* the ops whose outputs it reads, in order; -1: the network's input */
    int weight, bias, running_mean, running_var; /* indices into m->params, -1 when absent (a BN's weight and bias are
                                                    its gamma and beta) */
    int kernel, stride, pad;   /* conv, convT, maxpool: square kernel, stride and padding on every side */
    int factor;                /* upsample: the nearest-neighbour scale */
    int runs_in;               /* OCR_DBNET_RUNS_ALWAYS, _TRAINING (the threshold head) or _EVAL (the final sigmoid) */
} ocr_dbnet_op_info;
enum { OCR_DBNET_RUNS_ALWAYS = 0, OCR_DBNET_RUNS_TRAINING = 1, OCR_DBNET_RUNS_EVAL = 2 };
/* Ops in the order the forward runs them; ocr_dbnet_op(m, i) for 0 <= i < ocr_dbnet_op_count(m) (any other i: name and
   kind ""). */
OCRDEF int ocr_dbnet_op_count(const ocr_dbnet *m);
OCRDEF ocr_dbnet_op_info ocr_dbnet_op(const ocr_dbnet *m, int i);

/* ================================================================ [targets] declarations */

/* Training targets of DBNet for one image, as the official code's MakeSegDetectionData and MakeBorderMap
   (DBNET_REFERENCE 2.3-2.4): polygons are clipped to the image and made clockwise; each text polygon of area A
   and perimeter L is shrunk by D = A(1 - r^2)/L (ocr_poly_offset) into the shrink map (first piece only, as the
   official code), and grown by D into the threshold mask; the threshold map rises from thresh_min (D or more
   from every edge) to thresh_max (on an edge) inside the grown polygon. Ignored and unusable polygons are
   filled with 0 into the shrink mask and skip the threshold maps. */
typedef struct {
    double shrink_ratio;             /* r = 0.4 */
    double min_text_size;            /* 8: polygons whose box (after clipping) is thinner are ignored */
    double thresh_min, thresh_max;   /* 0.3, 0.7 */
} ocr_dbnet_target_config;
OCRDEF ocr_dbnet_target_config ocr_dbnet_target_config_default(void);

/* What became of each polygon: OCR_TARGET_TEXT, or why it was masked out instead. */
typedef enum {
    OCR_TARGET_TEXT = 0,           /* supervised as text */
    OCR_TARGET_IGNORED,            /* the caller's ignore flag (### in ICDAR) */
    OCR_TARGET_NONFINITE,          /* a NaN or infinite coordinate: nothing is drawn for it */
    OCR_TARGET_TOO_FEW_POINTS,     /* fewer than 3 points */
    OCR_TARGET_OUTSIDE,            /* entirely outside the image (clipping flattens it onto the border) */
    OCR_TARGET_ZERO_AREA,          /* |area| < 1 px after clipping: collinear or repeated points */
    OCR_TARGET_TOO_SMALL,          /* a side of its bounding box < min_text_size */
    OCR_TARGET_SHRINK_EMPTY,       /* the shrunk polygon vanished */
    OCR_TARGET_REASON_COUNT
} ocr_dbnet_target_reason;
OCRDEF const char *ocr_dbnet_target_reason_name(int reason);

/* Fills the four maps of one image from n polygons (points in pixels of the map). gt_shrink (1 inside shrunk
   text), mask_shrink (0 on masked-out polygons, else 1), gt_thresh (threshold map), mask_thresh (1 inside grown
   text): distinct F32 CPU tensors of shape [H,W], [1,H,W] or [1,1,H,W], all the same H and W. cfg NULL means
   the defaults. reasons: NULL, or n ints receiving an ocr_dbnet_target_reason per polygon. Degenerate polygons
   never fail the call and never produce NaN; only bad arguments do. */
OCRDEF int ocr_dbnet_targets(ocr_ctx *ctx, const ocr_dbnet_target_config *cfg, const ocr_polygon *polys, int n,
                             ocr_tensor *gt_shrink, ocr_tensor *mask_shrink, ocr_tensor *gt_thresh,
                             ocr_tensor *mask_thresh, int *reasons);
/* Distance from (px, py) to the edge a-b as DBNet's threshold map measures it: distance to the edge's line
   when the point lies inside the circle with a-b as diameter, else distance to the nearer endpoint (this
   over-estimates near the ends by up to ~0.15 px in the D-band). The official code computes
   sqrt(1 - cos^2) with cos rounding slightly above 1 for points on the edge, giving NaN ("black dots",
   MhLiao/DB#302); here the cosine is clamped, so the result is always finite and 0 on the edge. |a-b|^2 is
   rounded to float as the official code does. */
OCRDEF double ocr_dbnet_edge_distance(double px, double py, ocr_point a, ocr_point b);


/* ================================================================ [postprocess] declarations */

/* Probability map -> text detections, step for step as the official DBNet SegDetectorRepresenter (and
   PaddleOCR's DBPostProcess for the slow score): binarize (p > thresh), border following (cv2.findContours,
   RETR_LIST, CHAIN_APPROX_SIMPLE), minimum-area rectangle (get_mini_boxes), box score, unclip with
   ocr_poly_offset, size filters, then mapping to the original image size with round-half-to-even and
   clipping to [0, size]. ocr_post_config_official gives their constants; ocr_post_config_default adds the split
   of joined regions (split_thresh) and scores inside the contour, which ocr-c's programs use. */
enum { OCR_POST_BOX = 0, OCR_POST_POLYGON = 1 };      /* output: 4-point boxes or approximated polygons */
enum { OCR_SCORE_FAST = 0, OCR_SCORE_SLOW = 1 };      /* mean inside the rectangle/polygon, or inside the contour */
typedef struct {
    float thresh;          /* 0.3: a pixel is text when p > thresh (compared in float, as torch does) */
    double box_thresh;     /* 0.6: candidates scoring below are dropped */
    double unclip_ratio;   /* 1.5 in box mode, 2.0 in polygon mode (hard-coded there by the official code) */
    double poly_epsilon;   /* polygon mode: approxPolyDP epsilon as a fraction of the contour perimeter (0.002, official) */
    int max_candidates;    /* 1000: only the first contours (in OpenCV's order) are considered */
    int min_size;          /* 3: rectangles with a shorter side are dropped; min_size + 2 after unclipping */
    int mode;              /* OCR_POST_BOX or OCR_POST_POLYGON */
    int score_mode;        /* OCR_SCORE_FAST or OCR_SCORE_SLOW */
    float split_thresh;    /* 0 (official): off. Else a region above thresh that holds two or more cores above
                              split_thresh (each at least min_size^2 pixels) is split between them, each pixel going
                              to the nearest core, so that words joined by a faint bridge come out as one box each */
} ocr_post_config;
/* The official constants (thresh 0.3, box_thresh 0.6, unclip 1.5 or 2.0, the fast score, no split), for parity
   with the Python pipelines. */
OCRDEF ocr_post_config ocr_post_config_official(int mode);
/* ocr-c's default: the official one with split_thresh 0.8, the slow score (inside the contour) and box_thresh 0.8.
   A word whose region tapers or bends scores low inside its rectangle though the map is sure of it, and words
   joined by a faint bridge otherwise come out as one box, which matches neither (docs/TRAINING.md measures both). */
OCRDEF ocr_post_config ocr_post_config_default(int mode);

/* Detections in original-image pixels (integer coordinates). polys[i].points point into storage owned by the
   struct (ignore = 0, text = NULL): free everything with ocr_detections_free only. Box mode gives 4 points
   TL, TR, BR, BL (clockwise on screen, the ICDAR 2015 order). */
typedef struct {
    ocr_polygon *polys;
    float *scores;         /* box score of each detection, >= box_thresh */
    int n;
    ocr_point *point_buf;  /* storage of every detection's points */
    int n_points, cap_points, cap;
} ocr_detections;
OCRDEF void ocr_detections_free(ocr_detections *d);

/* prob: F32 CPU probability map [H,W] (or [1,H,W], [1,1,H,W]) with values in [0,1]; dest_width/height: the
   original image size the map is mapped back to. out must be zeroed or hold earlier results (replaced). */
OCRDEF int ocr_postprocess(ocr_ctx *ctx, const ocr_post_config *cfg, const ocr_tensor *prob, int dest_width,
                           int dest_height, ocr_detections *out);
/* Writes the ICDAR submission file (res_img_N.txt): one line "x1,y1,...,xn,yn" per detection, with ",score"
   appended when with_scores is non-zero. Written atomically. */
OCRDEF int ocr_detections_write_icdar(ocr_ctx *ctx, const char *path, const ocr_detections *d, int with_scores);

/* ================================================================ [eval] declarations */

/* ICDAR 2015 IoU protocol as the official DBNet DetectionIoUEvaluator: polygons that are not valid simple
   polygons are dropped; a detection whose intersection with a don't-care GT exceeds dontcare_thresh of its own
   area is don't-care; GT and detections are matched one-to-one, greedily in index order (GT outer, detection
   inner), when IoU > iou_thresh (strictly); global precision = matched / care detections, recall = matched /
   care GT, hmean = 2PR / (P + R).
   Recall is also counted by word height, which the official evaluator does not: a care GT's height is the shorter
   side of its minimum-area enclosing rectangle (ocr_min_area_box, the measure the post-processing's min_size
   filter applies to detections), in the units of the coordinates given (the evaluated image's pixels). For a quad
   that is the word's height however it is rotated; for a curved polygon it includes the bend. Bins: under 16,
   16 to 32 (both included), over 32 (ocr_eval_height_bin). */
enum { OCR_EVAL_H_LT16 = 0, OCR_EVAL_H_16_32 = 1, OCR_EVAL_H_GT32 = 2, OCR_EVAL_HEIGHT_BINS = 3 };
typedef struct {
    int64_t gt_care, det_care, matched;
    int64_t gt_dontcare, det_dontcare;   /* valid polygons excluded as don't care */
    int64_t gt_invalid, det_invalid;     /* polygons dropped as not valid and simple */
    int64_t gt_care_by_height[OCR_EVAL_HEIGHT_BINS], matched_by_height[OCR_EVAL_HEIGHT_BINS]; /* care GT, and those matched */
} ocr_eval_counts;
typedef struct {
    double iou_thresh;        /* 0.5 */
    double dontcare_thresh;   /* 0.5 */
    ocr_eval_counts total;    /* sums over the images added */
    int64_t n_images;
} ocr_evaluator;
typedef struct {
    double precision, recall, hmean;
    double recall_by_height[OCR_EVAL_HEIGHT_BINS];   /* matched / care GT of the bin; 0 for a bin without care GT */
} ocr_eval_result;

OCRDEF void ocr_eval_init(ocr_evaluator *ev);
/* Adds one image: gt polygons with their ignore flags (don't care), detections (ignore flags unused).
   image, when not NULL, receives this image's counts. Non-finite coordinates are an error. */
OCRDEF int ocr_eval_add_image(ocr_ctx *ctx, ocr_evaluator *ev, const ocr_polygon *gt, int n_gt, const ocr_polygon *det,
                              int n_det, ocr_eval_counts *image);
/* The same, and det_match[j] (n_det ints; may be NULL) gets the GT index detection j was matched to, -1 for none:
   what an end-to-end evaluation (ocr_rec.h's ocr_e2e_eval_add_image) compares the transcriptions of. */
OCRDEF int ocr_eval_add_image_matched(ocr_ctx *ctx, ocr_evaluator *ev, const ocr_polygon *gt, int n_gt, const ocr_polygon *det,
                                      int n_det, ocr_eval_counts *image, int *det_match);
OCRDEF ocr_eval_result ocr_eval_finish(const ocr_evaluator *ev);   /* 0 where a denominator is 0 */
/* The bin of a word height: OCR_EVAL_H_LT16 (height < 16), OCR_EVAL_H_16_32 (16 <= height <= 32), OCR_EVAL_H_GT32. */
OCRDEF int ocr_eval_height_bin(double height);
/* The bins' names as metrics and JSON keys use them: "h_lt16", "h16_32", "h_gt32" (NULL outside 0..2). */
OCRDEF const char *ocr_eval_height_bin_name(int bin);

#ifdef __cplusplus
}
#endif
#endif /* OCR_DBNET_H */

#if defined(OCR_IMPLEMENTATION) && !defined(OCR_NO_IMPLEMENTATION) && !defined(OCR_DBNET_IMPLEMENTATION)
#define OCR_DBNET_IMPLEMENTATION
#endif
#if defined(OCR_DBNET_IMPLEMENTATION) && !defined(OCR__DBNET_IMPLEMENTED)
#define OCR__DBNET_IMPLEMENTED
#include <stdio.h>
#include <string.h>
#include <math.h>
#ifdef __cplusplus
extern "C" {
#endif

/* ================================================================ [model] implementation */

enum { OCR__DB_CONV, OCR__DB_CONVT, OCR__DB_BN, OCR__DB_RELU, OCR__DB_MAXPOOL, OCR__DB_UPSAMPLE, OCR__DB_ADD,
       OCR__DB_CONCAT, OCR__DB_SIGMOID };
enum { OCR__DB_BOTH = 0, OCR__DB_TRAIN = 1, OCR__DB_EVAL = 2 };
/* RECOMPUTE: a convolution output a training step computes again for the backward rather than keep (large, and few
   FLOPs per value: the 7x7 stem's and the heads' first transposed convolution's) */
enum { OCR__DB_ACT_I32 = 1, OCR__DB_ACT_NOGRAD = 2, OCR__DB_ACT_RECOMPUTE = 4 };
enum { OCR__DB_IDLE = 0, OCR__DB_AFTER_TRAIN = 1, OCR__DB_AFTER_EVAL = 2, OCR__DB_AFTER_BACKWARD = 3 };

/* The plan of the network, built by ocr_dbnet_init: activations and the ops between them. */
typedef struct {
    char name[OCR_NAME_MAX];
    int channels, div;  /* shape [N, channels, H/div, W/div] for an input [N, 3, H, W] */
    int alias;          /* index of an earlier activation whose storage this one reuses in place, or -1 */
    int flags;          /* OCR__DB_ACT_* */
    int mode;           /* OCR__DB_BOTH, _TRAIN (threshold head) or _EVAL (the final sigmoid) */
    size_t off, goff;   /* value and gradient offsets into their arenas, in ocr__db_unit's units, for the current layout */
    int gfirst;         /* op whose backward writes the gradient first (it is zeroed just before), -1: before any */
    int recompute;      /* current layout: the value is not kept for the backward but computed again at roff (from its
                           op's input, ocr__db_recompute), just before the backward of op rfirst */
    int rfirst;
    size_t roff;
    int galias;         /* current layout: the gradient is computed in place of this activation's gradient (the input
                           gradient of a BN, ReLU or addition over its output's, when that op is the input's only
                           reader), or -1 */
} ocr__dbnet_act;

#define OCR__DB_MAX_IN 4 /* an op's inputs at most (the fuse's four parts) */
typedef struct {
    int kind;           /* OCR__DB_CONV, ... */
    int in[OCR__DB_MAX_IN], n_in, out, aux;  /* activations; aux: the argmax of a max pool */
    int w, b, mean, var;        /* parameter indices, -1 when absent (BN: w = gamma, b = beta) */
    size_t stats;               /* BN: offset of save_mean, then save_invstd, in bn_stats */
    int kernel, stride, pad, factor;
    int mode, decoder;          /* when it runs; decoder ops use the SegDetector initialisation */
    int relu;                   /* BN: a ReLU fused into the op (its output is the ReLU's) */
} ocr__dbnet_op;

/* Everything of a model besides its config and parameters (ocr_dbnet.state_). */
struct ocr__dbnet_state {
    ocr__dbnet_act *acts;
    ocr__dbnet_op *ops;
    int n_acts, n_ops, cap_acts, cap_ops;
    float *bn_stats;              /* save_mean and save_invstd of every BN for the backward */
    float *values, *grads;        /* activation values and gradients: two arenas in which each holds a range only while
                                     live (ocr__db_layout); they grow to the largest need seen */
    size_t values_cap, grads_cap; /* in floats */
    int64_t arena_allocs;         /* (re)allocations of the two arenas */
    int share_off;                /* OCR_DBNET_NO_SHARING: every value and gradient gets a range of its own */
    int recompute_off;            /* OCR_DBNET_NO_RECOMPUTE: training keeps what the backward reads instead of recomputing some */
    int layout_key;               /* the layout acts[].off, goff hold: 0 none, else 1 + training + 2 share_off + 4 recompute_off */
    size_t layout_need[2];        /* its units of values and of gradients (an input [N,3,H,W] has N H W / 1024 floats each) */
    float *relu_dy;               /* off the CPU: the ReLU-masked gradient of a BN+ReLU, which only the CPU fuses */
    size_t relu_dy_cap;
    float *bn_folded;             /* eval on the CPU: one convolution's weights and bias with its BN folded in */
    size_t bn_folded_cap;
    int bn_fold_off;              /* OCR_DBNET_NO_BN_FOLD: eval runs each BN as its own op */
    int fusion_off;               /* OCR_DBNET_NO_FUSION: eval runs each addition, ReLU and upsampling as its own op */
    int64_t N, H, W;              /* input of the last forward */
    int phase;                    /* OCR__DB_IDLE, _AFTER_TRAIN, _AFTER_EVAL or _AFTER_BACKWARD */
    int act_input, act_prob_logits, act_thresh, act_prob;
    /* ocr_dbnet_profile: with a clock (seconds), forward adds each op's time to op_seconds[op] and backward to
       op_seconds[n_ops + op] */
    double (*op_clock)(void);
    double *op_seconds;
};
typedef struct ocr__dbnet_state ocr__dbnet_state;

static const char *const ocr__db_meta_keys[6] = {"ocr_dbnet.backbone", "ocr_dbnet.width", "ocr_dbnet.k",
                                                 "ocr_dbnet.prior_prob", "ocr_dbnet.bn_momentum", "ocr_dbnet.bn_eps"};

OCRDEF ocr_dbnet_config ocr_dbnet_config_default(void) {
    ocr_dbnet_config c;
    c.depth = 18;
    c.width = 1.0f;
    c.k = 50.0f;
    c.prior_prob = 0.0f;
    c.bn_momentum = 0.1f;
    c.bn_eps = 1e-5f;
    return c;
}

static int ocr__db_scaled(int c, float width) {
    int s = 8 * (int)floor((double)c * width / 8.0 + 0.5);
    return s < 8 ? 8 : s;
}

static int ocr__db_runs(int mode, int training) {
    return mode == OCR__DB_BOTH || (mode == OCR__DB_TRAIN) == (training != 0);
}

/* ---- building the plan: every helper is a no-op once b->rc is set, so the builder reads straight through ---- */

typedef struct {
    ocr_ctx *ctx;
    ocr_dbnet *m;
    ocr__dbnet_state *S; /* m->state_ */
    int rc;
    int mode, decoder;   /* given to the acts and ops added now */
} ocr__db_build;

/* Room for one more element in a growing array: the (possibly moved) array, or NULL with b->rc set. */
static void *ocr__db_grow(ocr__db_build *b, void *arr, int *cap, int count, size_t elem) {
    void *p;
    int ncap;
    if (count < *cap) return arr;
    ncap = *cap ? *cap * 2 : 64;
    p = OCR_REALLOC(arr, (size_t)ncap * elem);
    if (!p) { b->rc = ocr_error(b->ctx, OCR_ENOMEM, "ocr_dbnet_init: out of memory"); return NULL; }
    *cap = ncap;
    return p;
}

static int ocr__db_act(ocr__db_build *b, const char *name, int channels, int div, int alias, int flags) {
    ocr__dbnet_state *S = b->S;
    ocr__dbnet_act *a;
    void *arr;
    if (b->rc || !(arr = ocr__db_grow(b, S->acts, &S->cap_acts, S->n_acts, sizeof *a))) return 0;
    S->acts = (ocr__dbnet_act *)arr;
    a = &S->acts[S->n_acts];
    memset(a, 0, sizeof *a);
    snprintf(a->name, sizeof a->name, "%s", name);
    a->channels = channels;
    a->div = div;
    a->alias = alias;
    a->flags = flags;
    a->mode = b->mode;
    return S->n_acts++;
}

static ocr__dbnet_op *ocr__db_op(ocr__db_build *b, int kind, int out) {
    ocr__dbnet_state *S = b->S;
    ocr__dbnet_op *op;
    void *arr;
    if (b->rc || !(arr = ocr__db_grow(b, S->ops, &S->cap_ops, S->n_ops, sizeof *op))) return NULL;
    S->ops = (ocr__dbnet_op *)arr;
    op = &S->ops[S->n_ops++];
    memset(op, 0, sizeof *op);
    op->kind = kind;
    op->out = out;
    op->aux = op->w = op->b = op->mean = op->var = -1;
    op->mode = b->mode;
    op->decoder = b->decoder;
    return op;
}

static int ocr__db_param(ocr__db_build *b, const char *prefix, const char *suffix, ocr_shape s, int trainable) {
    char name[OCR_NAME_MAX];
    int idx = -1;
    if (b->rc) return -1;
    snprintf(name, sizeof name, "%.60s.%.30s", prefix, suffix);
    b->rc = ocr_params_add(b->ctx, &b->m->params, name, s, trainable, &idx);
    return idx;
}

/* conv (k x k, stride, pad) or transposed conv (k = stride, no padding) named as its PyTorch module */
static int ocr__db_conv(ocr__db_build *b, const char *name, int x, int cout, int k, int stride, int pad, int transposed, int bias) {
    int cin, div, y, w, bi;
    ocr__dbnet_op *op;
    if (b->rc) return 0;
    cin = b->S->acts[x].channels;
    div = transposed ? b->S->acts[x].div / stride : b->S->acts[x].div * stride;
    w = ocr__db_param(b, name, "weight", transposed ? ocr_shape4(cin, cout, k, k) : ocr_shape4(cout, cin, k, k), 1);
    bi = bias ? ocr__db_param(b, name, "bias", ocr_shape1(cout), 1) : -1;
    y = ocr__db_act(b, name, cout, div, -1, 0);
    if (!(op = ocr__db_op(b, transposed ? OCR__DB_CONVT : OCR__DB_CONV, y))) return 0;
    op->in[0] = x; op->n_in = 1;
    op->w = w; op->b = bi;
    op->kernel = k; op->stride = stride; op->pad = pad;
    return y;
}

/* BatchNorm2d named prefix, optionally with the ReLU that follows it fused in (one pass over memory each way, one
   activation and gradient buffer less). */
static int ocr__db_bn(ocr__db_build *b, const char *name, int x, int relu) {
    int c, y;
    ocr__dbnet_op *op;
    if (b->rc) return 0;
    c = b->S->acts[x].channels;
    y = ocr__db_act(b, name, c, b->S->acts[x].div, -1, 0);
    if (!(op = ocr__db_op(b, OCR__DB_BN, y))) return 0;
    op->in[0] = x; op->n_in = 1;
    op->relu = relu;
    op->w = ocr__db_param(b, name, "weight", ocr_shape1(c), 1);
    op->b = ocr__db_param(b, name, "bias", ocr_shape1(c), 1);
    op->mean = ocr__db_param(b, name, "running_mean", ocr_shape1(c), 0);
    op->var = ocr__db_param(b, name, "running_var", ocr_shape1(c), 0);
    return y;
}

static int ocr__db_pointwise(ocr__db_build *b, int kind, const char *name, int x, int x2, int alias, int flags) {
    int y;
    ocr__dbnet_op *op;
    if (b->rc) return 0;
    y = ocr__db_act(b, name, b->S->acts[x].channels, b->S->acts[x].div, alias, flags);
    if (!(op = ocr__db_op(b, kind, y))) return 0;
    op->in[0] = x; op->in[1] = x2; op->n_in = kind == OCR__DB_ADD ? 2 : 1;
    return y;
}

static int ocr__db_upsample(ocr__db_build *b, const char *name, int x, int factor) {
    int y;
    ocr__dbnet_op *op;
    if (b->rc) return 0;
    y = ocr__db_act(b, name, b->S->acts[x].channels, b->S->acts[x].div / factor, -1, 0);
    if (!(op = ocr__db_op(b, OCR__DB_UPSAMPLE, y))) return 0;
    op->in[0] = x; op->n_in = 1; op->factor = factor;
    return y;
}

/* torchvision BasicBlock: relu(bn2(conv2(relu(bn1(conv1(x))))) + shortcut(x)); the sum and its ReLU reuse bn2's
   output in place (nothing reads it in the backward). */
static int ocr__db_block(ocr__db_build *b, const char *prefix, int x, int cout, int stride) {
    char n[OCR_NAME_MAX], n2[OCR_NAME_MAX];
    int y, id = x, sum;
    snprintf(n, sizeof n, "%.60s.conv1", prefix);
    y = ocr__db_conv(b, n, x, cout, 3, stride, 1, 0, 0);
    snprintf(n, sizeof n, "%.60s.bn1", prefix);
    y = ocr__db_bn(b, n, y, 1);
    snprintf(n, sizeof n, "%.60s.conv2", prefix);
    y = ocr__db_conv(b, n, y, cout, 3, 1, 1, 0, 0);
    snprintf(n, sizeof n, "%.60s.bn2", prefix);
    y = ocr__db_bn(b, n, y, 0);
    if (!b->rc && (stride != 1 || b->S->acts[x].channels != cout)) {
        snprintf(n, sizeof n, "%.60s.downsample.0", prefix);
        id = ocr__db_conv(b, n, x, cout, 1, stride, 0, 0, 0);
        snprintf(n, sizeof n, "%.60s.downsample.1", prefix);
        id = ocr__db_bn(b, n, id, 0);
    }
    snprintf(n, sizeof n, "%.60s.sum", prefix);
    sum = ocr__db_pointwise(b, OCR__DB_ADD, n, y, id, y, 0);
    snprintf(n2, sizeof n2, "%.60s.out", prefix);
    return ocr__db_pointwise(b, OCR__DB_RELU, n2, sum, -1, sum, 0);
}

/* binarize / thresh head: conv3x3, BN, ReLU, 2x2/2 transposed conv, BN, ReLU, 2x2/2 transposed conv to 1 channel */
static int ocr__db_head(ocr__db_build *b, const char *prefix, int x, int mid) {
    char n[OCR_NAME_MAX];
    int y;
    snprintf(n, sizeof n, "%.60s.0", prefix);
    y = ocr__db_conv(b, n, x, mid, 3, 1, 1, 0, 0);
    snprintf(n, sizeof n, "%.60s.1", prefix);
    y = ocr__db_bn(b, n, y, 1);
    snprintf(n, sizeof n, "%.60s.3", prefix);
    y = ocr__db_conv(b, n, y, mid, 2, 2, 0, 1, 1);
    if (!b->rc) b->S->acts[y].flags |= OCR__DB_ACT_RECOMPUTE;
    snprintf(n, sizeof n, "%.60s.4", prefix);
    y = ocr__db_bn(b, n, y, 1);
    snprintf(n, sizeof n, "%.60s.6", prefix);
    return ocr__db_conv(b, n, y, 1, 2, 2, 0, 1, 1);
}

static void ocr__db_build_plan(ocr__db_build *b) {
    static const int blocks18[4] = {2, 2, 2, 2}, blocks34[4] = {3, 4, 6, 3}, base[4] = {64, 128, 256, 512};
    const ocr_dbnet_config *cfg = &b->m->cfg;
    const int *blocks = cfg->depth == 34 ? blocks34 : blocks18;
    char n[OCR_NAME_MAX];
    int x, argmax, c[4], in[4], l, i, inner = ocr__db_scaled(256, cfg->width), q = inner / 4;
    int out4, out3, out2, p5, p4, p3, p2, fuse, thresh_logits;
    ocr__dbnet_op *op;
    b->mode = OCR__DB_BOTH;
    b->decoder = 0;
    b->S->act_input = x = ocr__db_act(b, "input", 3, 1, -1, OCR__DB_ACT_NOGRAD);
    x = ocr__db_conv(b, "backbone.conv1", x, ocr__db_scaled(64, cfg->width), 7, 2, 3, 0, 0);
    if (!b->rc) b->S->acts[x].flags |= OCR__DB_ACT_RECOMPUTE;
    x = ocr__db_bn(b, "backbone.bn1", x, 1);
    argmax = ocr__db_act(b, "backbone.maxpool.argmax", b->rc ? 0 : b->S->acts[x].channels, 4, -1, OCR__DB_ACT_I32 | OCR__DB_ACT_NOGRAD);
    if (!b->rc) {
        int y = ocr__db_act(b, "backbone.maxpool", b->S->acts[x].channels, 4, -1, 0);
        if ((op = ocr__db_op(b, OCR__DB_MAXPOOL, y))) {
            op->in[0] = x; op->n_in = 1; op->aux = argmax;
            op->kernel = 3; op->stride = 2; op->pad = 1;
        }
        x = y;
    }
    for (l = 0; l < 4; l++) {
        for (i = 0; i < blocks[l]; i++) {
            snprintf(n, sizeof n, "backbone.layer%d.%d", l + 1, i);
            x = ocr__db_block(b, n, x, ocr__db_scaled(base[l], cfg->width), i == 0 && l > 0 ? 2 : 1);
        }
        c[l] = x;
    }
    b->decoder = 1;
    for (l = 3; l >= 0; l--) {
        snprintf(n, sizeof n, "decoder.in%d", l + 2);
        in[l] = ocr__db_conv(b, n, c[l], inner, 1, 1, 0, 0, 0);
    }
    /* top-down sums reuse the lateral's storage: a conv's backward reads its input, never its output */
    out4 = ocr__db_pointwise(b, OCR__DB_ADD, "decoder.out4_sum", in[2], ocr__db_upsample(b, "decoder.in5_up", in[3], 2), in[2], 0);
    out3 = ocr__db_pointwise(b, OCR__DB_ADD, "decoder.out3_sum", in[1], ocr__db_upsample(b, "decoder.out4_up", out4, 2), in[1], 0);
    out2 = ocr__db_pointwise(b, OCR__DB_ADD, "decoder.out2_sum", in[0], ocr__db_upsample(b, "decoder.out3_up", out3, 2), in[0], 0);
    p5 = ocr__db_upsample(b, "decoder.out5.1", ocr__db_conv(b, "decoder.out5.0", in[3], q, 3, 1, 1, 0, 0), 8);
    p4 = ocr__db_upsample(b, "decoder.out4.1", ocr__db_conv(b, "decoder.out4.0", out4, q, 3, 1, 1, 0, 0), 4);
    p3 = ocr__db_upsample(b, "decoder.out3.1", ocr__db_conv(b, "decoder.out3.0", out3, q, 3, 1, 1, 0, 0), 2);
    p2 = ocr__db_conv(b, "decoder.out2", out2, q, 3, 1, 1, 0, 0);
    fuse = ocr__db_act(b, "decoder.fuse", 4 * q, 4, -1, 0);
    if ((op = ocr__db_op(b, OCR__DB_CONCAT, fuse))) {
        op->in[0] = p5; op->in[1] = p4; op->in[2] = p3; op->in[3] = p2; op->n_in = 4;
    }
    b->S->act_prob_logits = ocr__db_head(b, "decoder.binarize", fuse, q);
    b->mode = OCR__DB_TRAIN;
    thresh_logits = ocr__db_head(b, "decoder.thresh", fuse, q);
    b->S->act_thresh = ocr__db_pointwise(b, OCR__DB_SIGMOID, "thresh", thresh_logits, -1, thresh_logits, 0);
    b->mode = OCR__DB_EVAL;
    b->S->act_prob = ocr__db_pointwise(b, OCR__DB_SIGMOID, "prob", b->S->act_prob_logits, -1, b->S->act_prob_logits, OCR__DB_ACT_NOGRAD);
    if (!b->rc) snprintf(b->S->acts[b->S->act_prob_logits].name, OCR_NAME_MAX, "prob_logits");
}

/* Official initialisation (DBNET_REFERENCE section 1.5). PyTorch's kaiming fans: a conv weight [Cout,Cin,k,k] has
   fan_in Cin*k*k and fan_out Cout*k*k; a transposed conv weight [Cin,Cout,k,k] has "fan_in" Cout*k*k. */
static int ocr__db_init_weights(ocr_ctx *ctx, ocr_dbnet *m) {
    ocr__dbnet_state *S = m->state_;
    int i, rc;
    for (i = 0; i < S->n_ops; i++) {
        const ocr__dbnet_op *op = &S->ops[i];
        ocr_tensor w;
        if (op->kind == OCR__DB_CONV || op->kind == OCR__DB_CONVT) {
            double fan;
            w = ocr_params_value(&m->params, op->w);
            fan = (double)(op->decoder ? w.shape.dim[1] : w.shape.dim[0]) * (double)(op->kernel * op->kernel);
            if ((rc = ocr_tensor_fill_normal(ctx, &w, 0.0f, (float)sqrt(2.0 / fan)))) return rc;
            if (op->b >= 0) {
                ocr_tensor bias = ocr_params_value(&m->params, op->b);
                float bound = (float)(1.0 / sqrt((double)w.shape.dim[1] * (double)(op->kernel * op->kernel)));
                if ((rc = ocr_tensor_fill_uniform(ctx, &bias, -bound, bound))) return rc;
            }
        } else if (op->kind == OCR__DB_BN) {
            ocr_tensor g = ocr_params_value(&m->params, op->w), be = ocr_params_value(&m->params, op->b);
            ocr_tensor rm = ocr_params_value(&m->params, op->mean), rv = ocr_params_value(&m->params, op->var);
            if ((rc = ocr_tensor_fill(ctx, &g, 1.0)) || (rc = ocr_tensor_fill(ctx, &be, op->decoder ? 1e-4 : 0.0)) ||
                (rc = ocr_tensor_fill(ctx, &rm, 0.0)) || (rc = ocr_tensor_fill(ctx, &rv, 1.0)))
                return rc;
        }
    }
    if (m->cfg.prior_prob > 0.0f) {
        ocr_tensor bias = ocr_params_value(&m->params, ocr_params_find(&m->params, "decoder.binarize.6.bias"));
        double p = m->cfg.prior_prob;
        if ((rc = ocr_tensor_fill(ctx, &bias, log(p / (1.0 - p))))) return rc;
    }
    return OCR_OK;
}

static int ocr__db_check_config(ocr_ctx *ctx, const char *fn, const ocr_dbnet_config *c) {
    if (c->depth != 18 && c->depth != 34) return ocr_error(ctx, OCR_EINVAL, "%s: depth %d: only ResNet-18 and ResNet-34 are built", fn, c->depth);
    if (!(c->width > 0.0f && c->width <= 4.0f)) return ocr_error(ctx, OCR_EINVAL, "%s: width %g must be in (0, 4]", fn, c->width);
    if (!(c->k > 0.0f && c->k < 1e4f)) return ocr_error(ctx, OCR_EINVAL, "%s: k %g must be in (0, 1e4)", fn, c->k);
    if (!(c->prior_prob >= 0.0f && c->prior_prob < 1.0f))
        return ocr_error(ctx, OCR_EINVAL, "%s: prior_prob %g must be in (0, 1), or 0 for PyTorch's default bias", fn, c->prior_prob);
    if (!(c->bn_momentum >= 0.0f && c->bn_momentum <= 1.0f) || !(c->bn_eps > 0.0f && c->bn_eps < 1.0f))
        return ocr_error(ctx, OCR_EINVAL, "%s: bn_momentum %g must be in [0, 1] and bn_eps %g in (0, 1)", fn, c->bn_momentum, c->bn_eps);
    return OCR_OK;
}

OCRDEF void ocr_dbnet_free(ocr_dbnet *m) {
    ocr__dbnet_state *S;
    ocr_device dev;
    if (!m) return;
    S = m->state_;
    dev = m->params.device;
    ocr_params_free(&m->params);
    if (S) {
        OCR_FREE(S->acts);
        OCR_FREE(S->ops);
        ocr_floats_free(S->bn_stats, dev);
        ocr_floats_free(S->values, dev);
        ocr_floats_free(S->grads, dev);
        ocr_floats_free(S->relu_dy, dev);
        ocr_floats_free(S->bn_folded, dev);
        OCR_FREE(S->op_seconds);
        OCR_FREE(S);
    }
    memset(m, 0, sizeof *m);
}

OCRDEF int ocr_dbnet_init(ocr_ctx *ctx, ocr_dbnet *m, const ocr_dbnet_config *cfg) {
    ocr__dbnet_state *S;
    ocr__db_build b;
    size_t n_stats = 0;
    int i, rc;
    if (!m) return ocr_error(ctx, OCR_EINVAL, "ocr_dbnet_init: m is NULL");
    memset(m, 0, sizeof *m);
    if (!cfg) return ocr_error(ctx, OCR_EINVAL, "ocr_dbnet_init: cfg is NULL (start from ocr_dbnet_config_default())");
    if ((rc = ocr__db_check_config(ctx, "ocr_dbnet_init", cfg))) return rc;
    m->cfg = *cfg;
    ocr_params_init(&m->params);
    if (!(S = m->state_ = (ocr__dbnet_state *)OCR_MALLOC(sizeof *S))) return ocr_error(ctx, OCR_ENOMEM, "ocr_dbnet_init: out of memory");
    memset(S, 0, sizeof *S);
    memset(&b, 0, sizeof b);
    b.ctx = ctx;
    b.m = m;
    b.S = S;
    ocr__db_build_plan(&b);
    if ((rc = b.rc) || (rc = ocr_params_alloc(ctx, &m->params))) { ocr_dbnet_free(m); return rc; }
    for (i = 0; i < S->n_ops; i++)
        if (S->ops[i].kind == OCR__DB_BN) { S->ops[i].stats = n_stats; n_stats += 2 * (size_t)S->acts[S->ops[i].out].channels; }
    /* drawn on the host, so a device model starts from exactly the CPU model's weights */
    if ((rc = ocr__db_init_weights(ctx, m)) || (rc = ocr_params_to_device(ctx, &m->params, ctx->device))) { ocr_dbnet_free(m); return rc; }
    if (!(S->bn_stats = ocr_floats_alloc(ctx, ctx->device, n_stats, "bn_stats"))) { rc = ctx->last_status; ocr_dbnet_free(m); return rc; }
    return OCR_OK;
}

/* ---- running the plan ---- */

/* Op i is a convolution whose output only the BN right after it reads (eval may run the two as one). */
static int ocr__db_conv_bn_pair(const ocr_dbnet *m, int i) {
    const ocr__dbnet_state *S = m->state_;
    const ocr__dbnet_op *op = &S->ops[i];
    int j, k;
    if (i + 1 >= S->n_ops || (op->kind != OCR__DB_CONV && op->kind != OCR__DB_CONVT) || S->ops[i + 1].kind != OCR__DB_BN ||
        S->ops[i + 1].in[0] != op->out)
        return 0;
    for (j = 0; j < S->n_ops; j++)
        for (k = 0; k < S->ops[j].n_in; k++)
            if (j != i + 1 && S->ops[j].in[k] == op->out) return 0;
    return 1;
}

/* One activation value or gradient to place in its arena: live over steps [t0, t1] of ocr__db_layout's clock. */
typedef struct { size_t size, off; int t0, t1, act; } ocr__db_range;

static int ocr__db_range_order(const void *pa, const void *pb) { /* largest first, then by activation */
    const ocr__db_range *a = (const ocr__db_range *)pa, *b = (const ocr__db_range *)pb;
    if (a->size != b->size) return a->size < b->size ? 1 : -1;
    return a->act - b->act;
}

static int ocr__db_by_offset(const void *pa, const void *pb) {
    const ocr__db_range *a = *(const ocr__db_range *const *)pa, *b = *(const ocr__db_range *const *)pb;
    return (a->off > b->off) - (a->off < b->off);
}

/* Places r[0..count) largest first, each at the lowest offset free of every range placed before it that overlaps it in
   time; returns the arena size. live: room for count pointers. Offsets stay below the sum of the sizes. */
static size_t ocr__db_place(ocr__db_range *r, int count, ocr__db_range **live) {
    size_t need = 0;
    int i, k;
    qsort(r, (size_t)count, sizeof *r, ocr__db_range_order);
    for (i = 0; i < count; i++) {
        int n_live = 0;
        size_t off = 0;
        for (k = 0; k < i; k++)
            if (r[k].t0 <= r[i].t1 && r[i].t0 <= r[k].t1) live[n_live++] = &r[k];
        qsort(live, (size_t)n_live, sizeof *live, ocr__db_by_offset);
        for (k = 0; k < n_live && live[k]->off < off + r[i].size; k++)
            if (live[k]->off + live[k]->size > off) off = live[k]->off + live[k]->size;
        r[i].off = off;
        if (off + r[i].size > need) need = off + r[i].size;
    }
    return need;
}

/* Floats per layout unit: every activation of input [N,3,H,W] (H, W multiples of 32) holds a whole number of
   N (H/32) (W/32) floats, so one layout in these units serves every input size. */
static size_t ocr__db_unit(const ocr_dbnet *m) {
    const ocr__dbnet_state *S = m->state_;
    return (size_t)S->N * (size_t)(S->H / 32) * (size_t)(S->W / 32);
}

/* The op that writes activation a, or -1 (the input). */
static int ocr__db_producer(const ocr_dbnet *m, int a) {
    const ocr__dbnet_state *S = m->state_;
    int i;
    for (i = 0; i < S->n_ops; i++) if (S->ops[i].out == a) return i;
    return -1;
}

static int ocr__db_readers(const ocr_dbnet *m, int a) {
    const ocr__dbnet_state *S = m->state_;
    int i, k, n = 0;
    for (i = 0; i < S->n_ops; i++) for (k = 0; k < S->ops[i].n_in; k++) n += S->ops[i].in[k] == a;
    return n;
}

static int ocr__db_root(const ocr_dbnet *m, int a) {
    while (m->state_->acts[a].alias >= 0) a = m->state_->acts[a].alias;
    return a;
}

/* Eval fusions (patterns only; ocr_dbnet_forward decides whether they run). Op i a convolution + BN pair whose BN
   output only an addition right after reads, whose sum only the ReLU right after that reads (a ResNet block's end):
   the addition's other input, computed before op i, which the folded convolution then adds itself; else -1. */
static int ocr__db_residual_pattern(const ocr_dbnet *m, int i) {
    const ocr__dbnet_state *S = m->state_;
    const ocr__dbnet_op *bn = &S->ops[i + 1], *add, *relu;
    int other, p;
    if (i + 3 >= S->n_ops || !ocr__db_conv_bn_pair(m, i) || bn->relu || S->ops[i].kind != OCR__DB_CONV) return -1;
    add = &S->ops[i + 2]; relu = &S->ops[i + 3];
    if (add->kind != OCR__DB_ADD || relu->kind != OCR__DB_RELU || relu->in[0] != add->out || add->mode != OCR__DB_BOTH ||
        relu->mode != OCR__DB_BOTH || (add->in[0] == bn->out) == (add->in[1] == bn->out) || ocr__db_readers(m, bn->out) != 1 ||
        ocr__db_readers(m, add->out) != 1)
        return -1;
    other = add->in[0] == bn->out ? add->in[1] : add->in[0];
    p = ocr__db_producer(m, other);
    if ((p < 0 && other != S->act_input) || p >= i) return -1;
    if (ocr__db_root(m, relu->out) == ocr__db_root(m, other) || ocr__db_root(m, relu->out) == ocr__db_root(m, S->ops[i].in[0])) return -1;
    return other;
}

/* Op i an upsampling whose output only a concatenation reads: the index of that op, which then upsamples the part
   itself (reading op i's input, kept alive until then), or -1. */
static int ocr__db_concat_up_pattern(const ocr_dbnet *m, int i) {
    const ocr__dbnet_state *S = m->state_;
    const ocr__dbnet_op *op = &S->ops[i];
    int j, k;
    if (op->kind != OCR__DB_UPSAMPLE || op->mode != OCR__DB_BOTH || ocr__db_readers(m, op->out) != 1) return -1;
    for (j = i + 1; j < S->n_ops; j++)
        for (k = 0; k < S->ops[j].n_in; k++)
            if (S->ops[j].in[k] == op->out)
                return S->ops[j].kind == OCR__DB_CONCAT && S->ops[j].mode == OCR__DB_BOTH && ocr__db_root(m, S->ops[j].out) != ocr__db_root(m, op->in[0]) ? j : -1;
    return -1;
}

/* Op i a 2x2/2 transposed convolution followed by its BN and ReLU, whose output only the 2x2/2 transposed convolution
   to one channel right after reads (the head's last two layers): in eval the two run as one pass
   (ocr_nn_conv_transpose2d_pair_forward), which writes the second's output at op i. */
static int ocr__db_convt_pair_pattern(const ocr_dbnet *m, int i) {
    const ocr__dbnet_state *S = m->state_;
    const ocr__dbnet_op *op = &S->ops[i], *bn, *next;
    if (i + 2 >= S->n_ops || op->kind != OCR__DB_CONVT || !ocr__db_conv_bn_pair(m, i)) return 0;
    bn = &S->ops[i + 1]; next = &S->ops[i + 2];
    return bn->relu && next->kind == OCR__DB_CONVT && next->in[0] == bn->out && ocr__db_readers(m, bn->out) == 1 &&
           op->mode == OCR__DB_BOTH && bn->mode == OCR__DB_BOTH && next->mode == OCR__DB_BOTH && op->kernel == 2 && op->stride == 2 &&
           op->pad == 0 && next->kernel == 2 && next->stride == 2 && next->pad == 0 && S->acts[next->out].channels == 1 &&
           !ocr__db_conv_bn_pair(m, i + 2);
}

/* Op i a concatenation that, in eval mode, only the convolution right after reads, that convolution followed by its BN
   (the fuse and the binarize head's first layer): the convolution may read the parts in place of the concatenation
   (ocr_nn_concat_conv2d_forward), so they live until it runs. */
static int ocr__db_concat_conv_pattern(const ocr_dbnet *m, int i) {
    const ocr__dbnet_state *S = m->state_;
    const ocr__dbnet_op *op = &S->ops[i];
    int j, k;
    if (op->kind != OCR__DB_CONCAT || op->mode != OCR__DB_BOTH || i + 1 >= S->n_ops || S->ops[i + 1].kind != OCR__DB_CONV ||
        S->ops[i + 1].mode != OCR__DB_BOTH || S->ops[i + 1].in[0] != op->out || !ocr__db_conv_bn_pair(m, i + 1))
        return 0;
    for (j = 0; j < S->n_ops; j++)
        for (k = 0; k < S->ops[j].n_in; k++)
            if (j != i + 1 && S->ops[j].in[k] == op->out && S->ops[j].mode != OCR__DB_TRAIN) return 0;
    return 1;
}

/* Op i an addition whose sum only the ReLU right after reads, or an upsampling whose output only the addition right
   after reads (which does not write in place of the upsampling's input): the two run as one pass. */
static int ocr__db_pair_pattern(const ocr_dbnet *m, int i) {
    const ocr__dbnet_state *S = m->state_;
    const ocr__dbnet_op *op = &S->ops[i], *next;
    if (i + 1 >= S->n_ops) return 0;
    next = &S->ops[i + 1];
    if (op->mode != OCR__DB_BOTH || next->mode != OCR__DB_BOTH || ocr__db_readers(m, op->out) != 1) return 0;
    if (op->kind == OCR__DB_ADD) return next->kind == OCR__DB_RELU && next->in[0] == op->out;
    return op->kind == OCR__DB_UPSAMPLE && next->kind == OCR__DB_ADD && (next->in[0] == op->out) != (next->in[1] == op->out) &&
           ocr__db_root(m, next->out) != ocr__db_root(m, op->in[0]);
}

/* Whether this layout computes activation a again for the backward instead of keeping it: in a training step on the
   CPU, a BN+ReLU output or a convolution output marked OCR__DB_ACT_RECOMPUTE that nothing computes in place into. */
static int ocr__db_recomputable(const ocr_dbnet *m, int a, int training) {
    const ocr__dbnet_state *S = m->state_;
    int i, p = ocr__db_producer(m, a);
    if (!training || S->recompute_off || m->params.device != OCR_DEVICE_CPU || S->acts[a].alias >= 0 || p < 0) return 0;
    for (i = 0; i < S->n_acts; i++) if (S->acts[i].alias == a) return 0;
    if (S->ops[p].kind == OCR__DB_BN) return S->ops[p].relu;
    return (S->ops[p].kind == OCR__DB_CONV || S->ops[p].kind == OCR__DB_CONVT) && (S->acts[a].flags & OCR__DB_ACT_RECOMPUTE);
}

/* Offsets of every activation value and gradient in this mode, in two arenas where two of them share memory only when
   their lifetimes are disjoint. Clock: forward op i is step i, the seeding of the output gradients step n_ops, the
   backward of op i step 2 n_ops - i; 2 n_ops + 1 stands for "until the next forward".
   A value lives from the op that writes it to its last forward reader, or, when a backward reads it (a convolution's
   and a BN's backward read its input; a BN+ReLU's, ReLU's and sigmoid's their output; a max pool's its argmax), to
   the last backward that does (so a model runs one backward per forward); the outputs, views the caller keeps, live
   until the next forward. Values computed in place (alias) extend one range. On the CPU a training layout keeps no
   BN+ReLU output (as large as the BN's input, which is kept) and none of the convolution outputs marked
   OCR__DB_ACT_RECOMPUTE: each is computed again (ocr__db_recompute) into a third kind of range that lives from the
   first backward that reads it to the last, the inputs of a chain first; at width 1 and 640x640 this keeps 223
   instead of 353 MiB per image for a pointwise pass per BN and three small convolutions (3-4.5% of the step's time:
   bench_recompute).
   A gradient lives from the first backward that accumulates into it (gfirst: it is zeroed just before) to the
   backward of the op that produced its activation; some share a range by being computed in place (galias).
   Offsets are in units (ocr__db_unit) rounded to 16 (64-byte aligned views), laid out once per mode; so the floats
   needed (need[0] values, need[1] gradients) scale with N H W, and a smaller input fits where a larger one did. */
static int ocr__db_layout(ocr_ctx *ctx, const char *fn, ocr_dbnet *m, int64_t N, int64_t H, int64_t W, int training, size_t need[2]) {
    ocr__dbnet_state *S = m->state_;
    const int n = S->n_ops, na = S->n_acts, forever = 2 * n + 1;
    const int key = 1 + (training != 0) + 2 * (S->share_off != 0) + 4 * (S->recompute_off != 0);
    ocr__db_range *r, *v, *g, **live;
    size_t bytes, unit;
    int i, k, n_v = 0, n_g = 0;
    if (S->layout_key != key) {
        S->layout_key = 0;
        /* r[a], r[na + a], r[2 na + a]: lifetimes of activation a's value, gradient and recomputed value; v and g: the
           ranges to place (values and recomputed values, gradients) */
        if (!ocr_size_mul(6 * (size_t)na, sizeof *r + sizeof *live, &bytes) ||
            !(r = (ocr__db_range *)ocr_ctx_scratch(ctx, OCR_SCRATCH_OP0, bytes)))
            return ocr_error(ctx, OCR_ENOMEM, "%s: out of memory laying out the activations", fn);
        v = r + 3 * na;
        g = v + 2 * na;
        live = (ocr__db_range **)(g + na);
        for (i = 0; i < na; i++) {
            const ocr__dbnet_act *a = &S->acts[i];
            for (k = 0; k < 3; k++) {
                ocr__db_range *t = &r[k * na + i];
                t->size = ((size_t)a->channels * (size_t)(32 / a->div) * (size_t)(32 / a->div) + 15) & ~(size_t)15;
                t->t0 = forever; /* not written in this mode (yet) */
                t->t1 = -1;
                t->act = k == 2 ? na + i : i;
            }
            S->acts[i].gfirst = -1;
            S->acts[i].rfirst = -1;
            S->acts[i].galias = -1;
            S->acts[i].recompute = ocr__db_recomputable(m, i, training);
        }
        r[S->act_input].t0 = 0;
        for (i = 0; i < n; i++) {
            const ocr__dbnet_op *op = &S->ops[i];
            int bwd_reads[2] = {-1, -1}; /* activations op's backward reads (besides the argmax) */
            if (!ocr__db_runs(op->mode, training)) continue;
            if (r[op->out].t0 > i) r[op->out].t0 = i;
            if (op->aux >= 0 && training) r[op->aux].t0 = i; /* eval pools without the argmax */
            /* an eval convolution may write the output of the BN after it (ocr__db_fold_forward), or of the ReLU ending its
               residual block, and an op the output of the op it fuses with, whether they fuse or not */
            if (!training && ocr__db_conv_bn_pair(m, i)) r[S->ops[i + 1].out].t0 = i;
            if (!training && ocr__db_residual_pattern(m, i) >= 0) r[S->ops[i + 3].out].t0 = i;
            if (!training && ocr__db_pair_pattern(m, i)) r[S->ops[i + 1].out].t0 = i;
            if (!training && ocr__db_convt_pair_pattern(m, i)) r[S->ops[i + 2].out].t0 = i;
            if (!training && (k = ocr__db_concat_up_pattern(m, i)) >= 0) {
                k += ocr__db_concat_conv_pattern(m, k); /* read by the convolution after the concatenation */
                if (r[op->in[0]].t1 < k) r[op->in[0]].t1 = k;
            }
            for (k = 0; k < op->n_in; k++) {
                int last = !training && ocr__db_concat_conv_pattern(m, i) ? i + 1 : i;
                if (r[op->in[k]].t1 < last) r[op->in[k]].t1 = last;
            }
            if (!training) continue;
            if (op->kind == OCR__DB_CONV || op->kind == OCR__DB_CONVT || op->kind == OCR__DB_BN) bwd_reads[0] = op->in[0];
            if ((op->kind == OCR__DB_BN && op->relu) || op->kind == OCR__DB_RELU || op->kind == OCR__DB_SIGMOID) bwd_reads[1] = op->out;
            if (op->kind == OCR__DB_MAXPOOL && r[op->aux].t1 < 2 * n - i) r[op->aux].t1 = 2 * n - i;
            for (k = 0; k < 2; k++) {
                int a = bwd_reads[k];
                ocr__db_range *t;
                if (a < 0) continue;
                t = &r[(S->acts[a].recompute ? 2 * na : 0) + a];
                /* ops run backwards: the reader with the largest index computes it, the one with the smallest reads last */
                if (S->acts[a].recompute && t->t0 > 2 * n - i) { t->t0 = 2 * n - i; S->acts[a].rfirst = i; }
                if (t->t1 < 2 * n - i) t->t1 = 2 * n - i;
            }
            for (k = 0; k < op->n_in; k++) { /* ops run backwards, so the last consumer's backward writes first */
                ocr__db_range *t = &r[na + op->in[k]];
                if (S->acts[op->in[k]].flags & OCR__DB_ACT_NOGRAD) continue;
                if (t->t0 > 2 * n - i) { t->t0 = 2 * n - i; S->acts[op->in[k]].gfirst = i; }
            }
            r[na + op->out].t1 = 2 * n - i;
        }
        /* a recomputation reads its op's input at the time it runs: that input is computed again first (same step,
           earlier op) or kept until then. Later ops first, so a chain resolves from its end. */
        for (i = na - 1; i >= 0; i--) {
            const ocr__dbnet_op *op;
            int in;
            if (!S->acts[i].recompute || S->acts[i].rfirst < 0) continue;
            op = &S->ops[ocr__db_producer(m, i)];
            in = op->in[0];
            if (S->acts[in].recompute) {
                ocr__db_range *t = &r[2 * na + in];
                if (t->t0 > r[2 * na + i].t0) { t->t0 = r[2 * na + i].t0; S->acts[in].rfirst = S->acts[i].rfirst; }
                if (t->t1 < r[2 * na + i].t0) t->t1 = r[2 * na + i].t0;
            } else if (r[in].t1 < r[2 * na + i].t0) {
                r[in].t1 = r[2 * na + i].t0;
            }
        }
        if (training) {
            for (k = 0; k < 2; k++) {
                int out = k ? S->act_thresh : S->act_prob_logits;
                r[out].t1 = forever;
                r[na + out].t0 = n; /* seeded with the caller's gradient */
                S->acts[out].gfirst = -1;
            }
        } else {
            r[S->act_prob].t1 = forever;
        }
        /* the input gradient of a BN or ReLU (written in place over the output gradient: the CPU ops' in-place mode) or
           of an addition (equal to the output gradient) shares the output gradient's range when nothing else reads
           the input; a chain (convolution -> BN -> addition -> ReLU) then needs one buffer. Ops run forward here, so
           each range merges into its target before the target merges into the next. Several inputs of an addition
           may share its buffer while their producers' backwards only read it; one that writes in place over it may
           join only if its backward runs after all the others' (the smallest op index), or it would overwrite their
           dy (two BN backwards in place over one addition's gradient). */
        for (i = 0; training && !S->share_off && m->params.device == OCR_DEVICE_CPU && i < n; i++) {
            const ocr__dbnet_op *op = &S->ops[i];
            int in, c, readers, j, kk, prod[4], writes[4], eligible[4], first_reader = n, writer = -1;
            if (op->kind != OCR__DB_BN && op->kind != OCR__DB_RELU && op->kind != OCR__DB_ADD) continue;
            for (in = 0; in < op->n_in; in++) {
                c = op->in[in];
                eligible[in] = prod[in] = writes[in] = 0;
                if ((S->acts[c].flags & OCR__DB_ACT_NOGRAD) || S->acts[c].gfirst != i || c == op->out) continue;
                for (readers = 0, j = 0; j < n; j++) for (kk = 0; kk < S->ops[j].n_in; kk++) readers += S->ops[j].in[kk] == c;
                if (readers != 1) continue;
                for (j = 0; j < i && S->ops[j].out != c; j++) {}
                eligible[in] = 1;
                prod[in] = j;
                writes[in] = j < i && (S->ops[j].kind == OCR__DB_BN || S->ops[j].kind == OCR__DB_RELU) && S->acts[S->ops[j].in[0]].galias >= 0;
                if (!writes[in] && j < first_reader) first_reader = j;
                if (writes[in] && (writer < 0 || j < prod[writer])) writer = in;
            }
            for (in = 0; in < op->n_in; in++) {
                c = op->in[in];
                if (!eligible[in] || (writes[in] && (in != writer || prod[in] > first_reader))) continue;
                S->acts[c].galias = op->out;
                if (r[na + op->out].t0 > r[na + c].t0) r[na + op->out].t0 = r[na + c].t0;
                if (r[na + op->out].t1 < r[na + c].t1) r[na + op->out].t1 = r[na + c].t1;
            }
        }
        /* in-place chains: one range from the first write to the last read of any member (aliases point backwards) */
        for (i = na - 1; i >= 0; i--) {
            int root = S->acts[i].alias;
            if (root < 0 || r[i].t0 == forever) continue;
            if (r[root].t0 > r[i].t0) r[root].t0 = r[i].t0;
            if (r[root].t1 < r[i].t1) r[root].t1 = r[i].t1;
        }
        for (i = 0; i < na; i++) {
            const ocr__db_range *val = &r[i], *grad = &r[na + i];
            if (val->t0 == forever) continue; /* not in this mode */
            if (S->acts[i].alias < 0) {
                v[n_v] = *val;
                if (v[n_v].t1 < v[n_v].t0) v[n_v].t1 = v[n_v].t0; /* written, never read */
                n_v++;
            }
            if (S->acts[i].recompute && S->acts[i].rfirst >= 0) v[n_v++] = r[2 * na + i];
            if (training && grad->t1 >= 0 && !(S->acts[i].flags & OCR__DB_ACT_NOGRAD) && S->acts[i].galias < 0) {
                g[n_g] = *grad;
                if (g[n_g].t0 == forever) g[n_g].t0 = n; /* nothing accumulates into it: the zero seeded with the outputs' */
                n_g++;
            }
        }
        if (S->share_off) {
            for (i = 0; i < n_v; i++) { v[i].t0 = 0; v[i].t1 = forever; }
            for (i = 0; i < n_g; i++) { g[i].t0 = 0; g[i].t1 = forever; }
        }
        S->layout_need[0] = ocr__db_place(v, n_v, live);
        S->layout_need[1] = ocr__db_place(g, n_g, live);
        for (i = 0; i < n_v; i++) {
            if (v[i].act < na) S->acts[v[i].act].off = v[i].off;
            else S->acts[v[i].act - na].roff = v[i].off;
        }
        for (i = 0; i < n_g; i++) S->acts[g[i].act].goff = g[i].off;
        for (i = 0; i < na; i++) {
            int root = i;
            while (S->acts[root].galias >= 0) root = S->acts[root].galias;
            S->acts[i].goff = S->acts[root].goff;
        }
        for (i = 0; i < na; i++)
            if (S->acts[i].alias >= 0) S->acts[i].off = S->acts[S->acts[i].alias].off;
        S->layout_key = key;
    }
    if (!ocr_size_mul((size_t)N, (size_t)(H / 32), &unit) || !ocr_size_mul(unit, (size_t)(W / 32), &unit) ||
        !ocr_size_mul(unit, S->layout_need[0], &need[0]) || !ocr_size_mul(unit, S->layout_need[1], &need[1]))
        return ocr_error(ctx, OCR_EOVERFLOW, "%s: the activations of input [%lld,3,%lld,%lld] are too large", fn, (long long)N,
                         (long long)H, (long long)W);
    S->N = N; S->H = H; S->W = W;
    return OCR_OK;
}

static int ocr__db_reserve(ocr_ctx *ctx, const char *fn, ocr_dbnet *m, float **buf, size_t *cap, size_t need) {
    ocr__dbnet_state *S = m->state_;
    size_t bytes;
    if (need <= *cap && *buf) return OCR_OK;
    if (!ocr_size_mul(need ? need : 1, sizeof(float), &bytes)) return ocr_error(ctx, OCR_EOVERFLOW, "%s: buffer too large", fn);
    ocr_floats_free(*buf, m->params.device);
    *cap = 0;
    if (!(*buf = ocr_floats_alloc(ctx, m->params.device, need, "activations")))
        return ocr_error(ctx, ctx->last_status, "%s: cannot allocate %zu bytes of activations on %s", fn, bytes, ocr_device_name(m->params.device));
    *cap = need;
    if (buf == &S->values || buf == &S->grads) S->arena_allocs++; /* for ocr_dbnet_memory */
    return OCR_OK;
}

static ocr_shape ocr__db_shape(const ocr_dbnet *m, int a) {
    const ocr__dbnet_state *S = m->state_;
    const ocr__dbnet_act *t = &S->acts[a];
    return ocr_shape4(S->N, t->channels, S->H / t->div, S->W / t->div);
}

static ocr_tensor ocr__db_val(const ocr_dbnet *m, int a) {
    const ocr__dbnet_state *S = m->state_;
    const ocr__dbnet_act *t = &S->acts[a];
    return ocr_tensor_view(t->name, (t->flags & OCR__DB_ACT_I32) ? OCR_I32 : OCR_F32, m->params.device, ocr__db_shape(m, a),
                           S->values + ocr__db_unit(m) * t->off);
}

/* The value a backward reads: the recomputed copy where the layout does not keep it. */
static ocr_tensor ocr__db_val_bwd(const ocr_dbnet *m, int a) {
    const ocr__dbnet_state *S = m->state_;
    ocr_tensor t = ocr__db_val(m, a);
    if (S->acts[a].recompute) t.data = S->values + ocr__db_unit(m) * S->acts[a].roff;
    return t;
}

static ocr_tensor ocr__db_grad(const ocr_dbnet *m, int a) {
    const ocr__dbnet_state *S = m->state_;
    char name[OCR_NAME_MAX];
    snprintf(name, sizeof name, "%.88s.grad", S->acts[a].name);
    return ocr_tensor_view(name, OCR_F32, m->params.device, ocr__db_shape(m, a), S->grads + ocr__db_unit(m) * S->acts[a].goff);
}

/* save_mean (which 0) or save_invstd (1) of a BN op */
static ocr_tensor ocr__db_bn_stat(const ocr_dbnet *m, const ocr__dbnet_op *op, int which) {
    const ocr__dbnet_state *S = m->state_;
    int64_t c = S->acts[op->out].channels;
    return ocr_tensor_view(which ? "save_invstd" : "save_mean", OCR_F32, m->params.device, ocr_shape1(c), S->bn_stats + op->stats + which * c);
}

static int ocr__db_op_forward(ocr_ctx *ctx, ocr_dbnet *m, const ocr__dbnet_op *op, int training) {
    ocr_tensor x = ocr__db_val(m, op->in[0]), y = ocr__db_val(m, op->out);
    ocr_conv_params cp = ocr_conv_params_make(op->stride, op->pad, 1, 1);
    switch (op->kind) {
    case OCR__DB_CONV:
    case OCR__DB_CONVT: {
        ocr_tensor w = ocr_params_value(&m->params, op->w), b = op->b >= 0 ? ocr_params_value(&m->params, op->b) : w;
        return op->kind == OCR__DB_CONV ? ocr_nn_conv2d_forward(ctx, &x, &w, op->b >= 0 ? &b : NULL, cp, &y)
                                        : ocr_nn_conv_transpose2d_forward(ctx, &x, &w, op->b >= 0 ? &b : NULL, cp, &y);
    }
    case OCR__DB_BN: {
        ocr_tensor g = ocr_params_value(&m->params, op->w), be = ocr_params_value(&m->params, op->b);
        ocr_tensor rm = ocr_params_value(&m->params, op->mean), rv = ocr_params_value(&m->params, op->var);
        ocr_tensor sm = ocr__db_bn_stat(m, op, 0), si = ocr__db_bn_stat(m, op, 1);
        int rc;
        if (op->relu && m->params.device == OCR_DEVICE_CPU)
            return ocr_nn_batchnorm2d_relu_forward(ctx, &x, &g, &be, &rm, &rv, training, m->cfg.bn_momentum, m->cfg.bn_eps, &sm, &si, &y);
        rc = ocr_nn_batchnorm2d_forward(ctx, &x, &g, &be, &rm, &rv, training, m->cfg.bn_momentum, m->cfg.bn_eps, &sm, &si, &y);
        return rc || !op->relu ? rc : ocr_nn_relu_forward(ctx, &y, &y);
    }
    case OCR__DB_RELU: return ocr_nn_relu_forward(ctx, &x, &y);
    case OCR__DB_SIGMOID: return ocr_nn_sigmoid_forward(ctx, &x, &y);
    case OCR__DB_MAXPOOL: { /* the argmax only for the backward */
        ocr_tensor idx = ocr__db_val(m, op->aux);
        return ocr_nn_maxpool2d_forward(ctx, &x, op->kernel, op->stride, op->pad, &y, training ? &idx : NULL);
    }
    case OCR__DB_UPSAMPLE: return ocr_nn_upsample_nearest_forward(ctx, &x, op->factor, &y);
    case OCR__DB_ADD: {
        ocr_tensor x2 = ocr__db_val(m, op->in[1]);
        return ocr_nn_add_forward(ctx, &x, &x2, &y);
    }
    default: { /* OCR__DB_CONCAT */
        ocr_tensor parts[4];
        const ocr_tensor *ptrs[4];
        int i;
        for (i = 0; i < op->n_in; i++) { parts[i] = ocr__db_val(m, op->in[i]); ptrs[i] = &parts[i]; }
        return ocr_nn_concat_forward(ctx, ptrs, op->n_in, &y);
    }
    }
}

/* Computes activation a again for the backward (ocr__db_layout): a BN+ReLU output from the BN's kept input and saved
   statistics, or a convolution output from its input; the same values the forward computed, bit for bit. */
static int ocr__db_recompute(ocr_ctx *ctx, const ocr_dbnet *m, int a) {
    const ocr__dbnet_state *S = m->state_;
    const ocr__dbnet_op *op = &S->ops[ocr__db_producer(m, a)];
    ocr_tensor x = ocr__db_val_bwd(m, op->in[0]), y = ocr__db_val_bwd(m, a);
    if (op->kind == OCR__DB_BN) {
        ocr_tensor g = ocr_params_value(&m->params, op->w), be = ocr_params_value(&m->params, op->b);
        ocr_tensor sm = ocr__db_bn_stat(m, op, 0), si = ocr__db_bn_stat(m, op, 1);
        return ocr_nn_batchnorm2d_apply(ctx, &x, &g, &be, &sm, &si, 1, &y);
    } else {
        ocr_tensor w = ocr_params_value(&m->params, op->w), b = op->b >= 0 ? ocr_params_value(&m->params, op->b) : w;
        ocr_conv_params cp = ocr_conv_params_make(op->stride, op->pad, 1, 1);
        return op->kind == OCR__DB_CONV ? ocr_nn_conv2d_forward(ctx, &x, &w, op->b >= 0 ? &b : NULL, cp, &y)
                                        : ocr_nn_conv_transpose2d_forward(ctx, &x, &w, op->b >= 0 ? &b : NULL, cp, &y);
    }
}

static int ocr__db_op_backward(ocr_ctx *ctx, ocr_dbnet *m, const ocr__dbnet_op *op) {
    ocr__dbnet_state *S = m->state_;
    ocr_tensor x = ocr__db_val_bwd(m, op->in[0]), dy = ocr__db_grad(m, op->out);
    ocr_tensor dx = ocr__db_grad(m, op->in[0]);
    ocr_tensor *dxp = (S->acts[op->in[0]].flags & OCR__DB_ACT_NOGRAD) ? NULL : &dx;
    ocr_conv_params cp = ocr_conv_params_make(op->stride, op->pad, 1, 1);
    switch (op->kind) {
    case OCR__DB_CONV:
    case OCR__DB_CONVT: {
        ocr_tensor w = ocr_params_value(&m->params, op->w), dw = ocr_params_grad(&m->params, op->w);
        ocr_tensor db = op->b >= 0 ? ocr_params_grad(&m->params, op->b) : dw;
        return op->kind == OCR__DB_CONV ? ocr_nn_conv2d_backward(ctx, &x, &w, &dy, cp, dxp, &dw, op->b >= 0 ? &db : NULL)
                                        : ocr_nn_conv_transpose2d_backward(ctx, &x, &w, &dy, cp, dxp, &dw, op->b >= 0 ? &db : NULL);
    }
    case OCR__DB_BN: {
        ocr_tensor g = ocr_params_value(&m->params, op->w);
        ocr_tensor dg = ocr_params_grad(&m->params, op->w), dbe = ocr_params_grad(&m->params, op->b);
        ocr_tensor sm = ocr__db_bn_stat(m, op, 0), si = ocr__db_bn_stat(m, op, 1);
        if (op->relu && m->params.device == OCR_DEVICE_CPU) {
            ocr_tensor y = ocr__db_val_bwd(m, op->out);
            return ocr_nn_batchnorm2d_relu_backward(ctx, &x, &y, &g, &sm, &si, &dy, 1, dxp, &dg, &dbe);
        }
        if (op->relu) { /* the unfused pair: relu_backward into a zeroed buffer, then the BN backward from it */
            ocr_tensor y = ocr__db_val(m, op->out), masked = ocr_tensor_view("relu_dy", OCR_F32, m->params.device, dy.shape, S->relu_dy);
            int rc;
            if ((rc = ocr_tensor_zero(ctx, &masked)) || (rc = ocr_nn_relu_backward(ctx, &y, &dy, &masked))) return rc;
            return ocr_nn_batchnorm2d_backward(ctx, &x, &g, &sm, &si, &masked, 1, dxp, &dg, &dbe);
        }
        return ocr_nn_batchnorm2d_backward(ctx, &x, &g, &sm, &si, &dy, 1, dxp, &dg, &dbe);
    }
    case OCR__DB_RELU: {
        ocr_tensor y = ocr__db_val(m, op->out);
        return ocr_nn_relu_backward(ctx, &y, &dy, &dx);
    }
    case OCR__DB_SIGMOID: {
        ocr_tensor y = ocr__db_val(m, op->out);
        return ocr_nn_sigmoid_backward(ctx, &y, &dy, &dx);
    }
    case OCR__DB_MAXPOOL: {
        ocr_tensor idx = ocr__db_val(m, op->aux);
        return ocr_nn_maxpool2d_backward(ctx, &dy, &idx, &dx);
    }
    case OCR__DB_UPSAMPLE: return ocr_nn_upsample_nearest_backward(ctx, &dy, op->factor, &dx);
    case OCR__DB_ADD: { /* an input gradient computed in place is dy already */
        ocr_tensor dx2 = ocr__db_grad(m, op->in[1]);
        return ocr_nn_add_backward(ctx, &dy, S->acts[op->in[0]].galias >= 0 ? NULL : &dx, S->acts[op->in[1]].galias >= 0 ? NULL : &dx2);
    }
    default: { /* OCR__DB_CONCAT */
        ocr_tensor parts[4];
        ocr_tensor *ptrs[4];
        int i;
        for (i = 0; i < op->n_in; i++) { parts[i] = ocr__db_grad(m, op->in[i]); ptrs[i] = &parts[i]; }
        return ocr_nn_concat_backward(ctx, &dy, ptrs, op->n_in);
    }
    }
}

/* Eval on the CPU: a convolution whose output only a BN reads runs as one convolution with that BN folded in,
   w' = w * s and b' = beta - mean * s (+ b * s) with s = gamma / sqrt(running_var + eps) per output channel, and the
   BN's ReLU applied by the convolution's output pass. Folded from the current parameters on every forward, so no
   folded copy can go stale. */
static int ocr__db_foldable(const ocr_dbnet *m, int i, int training) {
    const ocr__dbnet_state *S = m->state_;
    return !training && !S->bn_fold_off && m->params.device == OCR_DEVICE_CPU && ocr__db_conv_bn_pair(m, i);
}

/* Work items are the weight's first dimension: wd = w scaled per output channel (a convolution's rows, a transposed
   convolution's columns). */
typedef struct { const float *w, *scale; float *wd; int transposed; int64_t rows, row, cols, taps; } ocr__db_fold_job;
static void ocr__db_fold_part(void *arg, int64_t begin, int64_t end, int tid) {
    const ocr__db_fold_job *j = (const ocr__db_fold_job *)arg;
    int64_t r, c, t;
    (void)tid;
    for (r = begin; r < end; r++) {
        const float *src = j->w + r * j->row;
        float *dst = j->wd + r * j->row;
        if (!j->transposed) {
            float s = j->scale[r];
            for (t = 0; t < j->row; t++) dst[t] = src[t] * s;
        } else {
            for (c = 0; c < j->cols; c++)
                for (t = 0; t < j->taps; t++) dst[c * j->taps + t] = src[c * j->taps + t] * j->scale[c];
        }
    }
}

/* The parts of eval concatenation op and their factors: a part whose upsampling was left to it
   (ocr__db_concat_up_pattern) is read before that upsampling. */
static void ocr__db_concat_parts(const ocr_dbnet *m, const ocr__dbnet_op *op, ocr_tensor *parts, const ocr_tensor **ptrs, int *factors) {
    const ocr__dbnet_state *S = m->state_;
    int i = (int)(op - S->ops), k;
    for (k = 0; k < op->n_in; k++) {
        int p = ocr__db_producer(m, op->in[k]), up = p >= 0 && ocr__db_concat_up_pattern(m, p) == i;
        parts[k] = ocr__db_val(m, up ? S->ops[p].in[0] : op->in[k]);
        factors[k] = up ? S->ops[p].factor : 1;
        ptrs[k] = &parts[k];
    }
}

/* residual >= 0: the folded convolution also adds that activation and applies the ReLU, writing act out (the end of a
   residual block, ocr__db_residual_pattern); else it writes the BN's output. cat (or NULL): the convolution's input is
   that concatenation's, read from its parts. second (or NULL): a 2x2/2 transposed convolution to one channel run with
   this one (ocr__db_convt_pair_pattern), writing its own output. */
static int ocr__db_fold_forward(ocr_ctx *ctx, ocr_dbnet *m, const ocr__dbnet_op *conv, const ocr__dbnet_op *bn, int residual, int out,
                                const ocr__dbnet_op *cat, const ocr__dbnet_op *second) {
    ocr__dbnet_state *S = m->state_;
    ocr_tensor x = ocr__db_val(m, conv->in[0]), y = ocr__db_val(m, out), w = ocr_params_value(&m->params, conv->w), wf, bf;
    const float *gamma = (const float *)ocr_params_value(&m->params, bn->w).data, *beta = (const float *)ocr_params_value(&m->params, bn->b).data;
    const float *mean = (const float *)ocr_params_value(&m->params, bn->mean).data, *var = (const float *)ocr_params_value(&m->params, bn->var).data;
    const float *bias = conv->b >= 0 ? (const float *)ocr_params_value(&m->params, conv->b).data : NULL;
    ocr_conv_params cp = ocr_conv_params_make(conv->stride, conv->pad, 1, 1);
    int64_t cout = S->acts[bn->out].channels, n_w = ocr_tensor_numel(&w), taps = w.shape.dim[2] * w.shape.dim[3], c;
    float *wd, *scale;
    int rc;
    if ((rc = ocr__db_reserve(ctx, "ocr_dbnet_forward", m, &S->bn_folded, &S->bn_folded_cap, (size_t)(n_w + 2 * cout)))) return rc;
    wd = S->bn_folded;
    scale = wd + n_w + cout;
    for (c = 0; c < cout; c++) {
        scale[c] = (float)(1.0 / sqrt((double)var[c] + (double)m->cfg.bn_eps)) * gamma[c]; /* as the BN op computes it */
        wd[n_w + c] = beta[c] - mean[c] * scale[c] + (bias ? bias[c] * scale[c] : 0.0f);
    }
    /* rows of taps floats: [Cout, Cin] for a convolution, [Cin, Cout] for a transposed one; spread over the threads
       (layer4's 2.4 M weights, one row at a time with a division each, took as long as the convolution at 640x640) */
    {
        ocr__db_fold_job fj;
        fj.w = (const float *)w.data;
        fj.wd = wd;
        fj.scale = scale;
        fj.transposed = conv->kind != OCR__DB_CONV;
        fj.rows = w.shape.dim[0];
        fj.row = n_w / w.shape.dim[0];
        fj.cols = w.shape.dim[1];
        fj.taps = taps;
        ocr_parallel_for(ctx, fj.rows, 8, ocr__db_fold_part, &fj);
    }
    wf = ocr_tensor_f32("bn_folded.weight", w.shape, wd);
    bf = ocr_tensor_f32("bn_folded.bias", ocr_shape1(cout), wd + n_w);
    if (residual >= 0) {
        ocr_tensor res = ocr__db_val(m, residual);
        return ocr_nn_conv2d_add_relu_forward(ctx, &x, &wf, &bf, cp, &res, &y);
    }
    if (cat) {
        ocr_tensor parts[OCR__DB_MAX_IN];
        const ocr_tensor *ptrs[OCR__DB_MAX_IN];
        int factors[OCR__DB_MAX_IN];
        ocr__db_concat_parts(m, cat, parts, ptrs, factors);
        return ocr_nn_concat_conv2d_forward(ctx, ptrs, factors, cat->n_in, &x, &wf, &bf, cp, bn->relu, &y);
    }
    if (second) {
        ocr_tensor w2 = ocr_params_value(&m->params, second->w), b2 = second->b >= 0 ? ocr_params_value(&m->params, second->b) : w2;
        ocr_tensor y2 = ocr__db_val(m, second->out);
        return ocr_nn_conv_transpose2d_pair_forward(ctx, &x, &wf, &bf, &y, &w2, second->b >= 0 ? &b2 : NULL, &y2);
    }
    if (conv->kind == OCR__DB_CONV)
        return bn->relu ? ocr_nn_conv2d_relu_forward(ctx, &x, &wf, &bf, cp, &y) : ocr_nn_conv2d_forward(ctx, &x, &wf, &bf, cp, &y);
    return bn->relu ? ocr_nn_conv_transpose2d_relu_forward(ctx, &x, &wf, &bf, cp, &y) : ocr_nn_conv_transpose2d_forward(ctx, &x, &wf, &bf, cp, &y);
}

/* Puts "fn: layer 'name': " in front of the message an ocr_nn op left. */
static int ocr__db_layer_error(ocr_ctx *ctx, const char *fn, const ocr_dbnet *m, const ocr__dbnet_op *op, int rc) {
    const ocr__dbnet_state *S = m->state_;
    char msg[OCR_ERROR_MAX];
    snprintf(msg, sizeof msg, "%s", ctx->last_error);
    return ocr_error(ctx, rc, "%s: layer '%s': %s", fn, S->acts[op->out].name, msg);
}

/* The model's buffers are on one device and every op runs on ctx's. */
static int ocr__db_same_device(ocr_ctx *ctx, const char *fn, const ocr_dbnet *m) {
    if (ctx->device == m->params.device) return OCR_OK;
    return ocr_error(ctx, OCR_EDEVICE, "%s: the model lives on %s but the context runs on %s (ocr_dbnet_init the model with a context of "
                     "the device it is to run on)", fn, ocr_device_name(m->params.device), ocr_device_name(ctx->device));
}

OCRDEF int ocr_dbnet_forward(ocr_ctx *ctx, ocr_dbnet *m, const ocr_tensor *x, int training, ocr_tensor *prob, ocr_tensor *thresh) {
    ocr__dbnet_state *S = m ? m->state_ : NULL;
    const char *fn = "ocr_dbnet_forward";
    char d[200];
    size_t need[2] = {0, 0};
    int64_t N, H, W;
    int i, rc;
    ocr_tensor in;
    if (!m || !m->params.allocated || !prob) return ocr_error(ctx, OCR_EINVAL, "%s: needs a model from ocr_dbnet_init and a prob output", fn);
    if ((rc = ocr__db_same_device(ctx, fn, m))) return rc;
    if ((rc = ocr_check_tensor(ctx, fn, x)) || (rc = ocr_check_dtype(ctx, fn, x, OCR_F32))) return rc;
    if (x->device != OCR_DEVICE_CPU && x->device != m->params.device)
        return ocr_error(ctx, OCR_EDEVICE, "%s: input %s must be on the CPU or the model's device %s", fn, ocr_tensor_describe(x, d, sizeof d),
                         ocr_device_name(m->params.device));
    if (x->shape.ndim != 4 || x->shape.dim[1] != 3)
        return ocr_error(ctx, OCR_ESHAPE, "%s: input %s must be [N, 3, H, W]", fn, ocr_tensor_describe(x, d, sizeof d));
    N = x->shape.dim[0]; H = x->shape.dim[2]; W = x->shape.dim[3];
    if (N < 1) return ocr_error(ctx, OCR_ESHAPE, "%s: input %s has an empty batch", fn, ocr_tensor_describe(x, d, sizeof d));
    if (H < 32 || W < 32 || H % 32 || W % 32)
        return ocr_error(ctx, OCR_ESHAPE, "%s: input %s needs H and W that are positive multiples of 32 (got H=%lld, W=%lld)", fn,
                         ocr_tensor_describe(x, d, sizeof d), (long long)H, (long long)W);
    if ((rc = ocr_check_finite(ctx, fn, x))) return rc;
    S->phase = OCR__DB_IDLE; /* until this forward completes, backward must refuse */
    if ((rc = ocr__db_layout(ctx, fn, m, N, H, W, training, need)) ||
        (rc = ocr__db_reserve(ctx, fn, m, &S->values, &S->values_cap, need[0])))
        return rc;
    in = ocr__db_val(m, S->act_input);
    if ((rc = ocr_tensor_copy(ctx, &in, x))) return rc; /* the explicit upload of a host input */
    for (i = 0; i < S->n_ops; i++) {
        const ocr__dbnet_op *op = &S->ops[i];
        double t0 = S->op_seconds && S->op_clock ? S->op_clock() : 0.0;
        if (ocr__db_runs(op->mode, training) && ocr__db_foldable(m, i, training)) {
            int res = S->fusion_off ? -1 : ocr__db_residual_pattern(m, i);
            int pair = !S->fusion_off && res < 0 && ocr__db_convt_pair_pattern(m, i);
            if ((rc = ocr__db_fold_forward(ctx, m, op, &S->ops[i + 1], res, S->ops[i + (res >= 0 ? 3 : 1)].out, NULL, pair ? &S->ops[i + 2] : NULL)))
                return ocr__db_layer_error(ctx, fn, m, op, rc);
            if (S->op_seconds && S->op_clock) S->op_seconds[i] += S->op_clock() - t0;
            i += res >= 0 ? 3 : pair ? 2 : 1; /* the BN (and addition and ReLU, or the next transposed convolution) ran with it */
            continue;
        }
        if (!training && !S->fusion_off && m->params.device == OCR_DEVICE_CPU && ocr__db_concat_up_pattern(m, i) >= 0) continue;
        if (!training && !S->fusion_off && m->params.device == OCR_DEVICE_CPU && op->kind == OCR__DB_CONCAT) {
            ocr_tensor parts[OCR__DB_MAX_IN], y1 = ocr__db_val(m, op->out);
            const ocr_tensor *ptrs[OCR__DB_MAX_IN];
            int factors[OCR__DB_MAX_IN];
            if (ocr__db_concat_conv_pattern(m, i) && ocr__db_foldable(m, i + 1, training)) {
                /* the convolution after it reads its parts (its BN folded in, as above) */
                if ((rc = ocr__db_fold_forward(ctx, m, &S->ops[i + 1], &S->ops[i + 2], -1, S->ops[i + 2].out, op, NULL)))
                    return ocr__db_layer_error(ctx, fn, m, &S->ops[i + 1], rc);
                if (S->op_seconds && S->op_clock) S->op_seconds[i + 1] += S->op_clock() - t0;
                i += 2;
                continue;
            }
            ocr__db_concat_parts(m, op, parts, ptrs, factors);
            if ((rc = ocr_nn_concat_upsampled_forward(ctx, ptrs, factors, op->n_in, &y1))) return ocr__db_layer_error(ctx, fn, m, op, rc);
            if (S->op_seconds && S->op_clock) S->op_seconds[i] += S->op_clock() - t0;
            continue;
        }
        if (!training && !S->fusion_off && m->params.device == OCR_DEVICE_CPU && ocr__db_pair_pattern(m, i)) {
            const ocr__dbnet_op *next = &S->ops[i + 1];
            ocr_tensor x1 = ocr__db_val(m, op->in[0]), y1 = ocr__db_val(m, next->out);
            if (op->kind == OCR__DB_ADD) {
                ocr_tensor x2 = ocr__db_val(m, op->in[1]);
                rc = ocr_nn_add_relu_forward(ctx, &x1, &x2, &y1);
            } else {
                ocr_tensor a = ocr__db_val(m, next->in[0] == op->out ? next->in[1] : next->in[0]);
                rc = ocr_nn_add_upsampled_forward(ctx, &a, &x1, op->factor, &y1);
            }
            if (rc) return ocr__db_layer_error(ctx, fn, m, op, rc);
            if (S->op_seconds && S->op_clock) S->op_seconds[i] += S->op_clock() - t0;
            i++; /* the op after ran in the same pass */
            continue;
        }
        if (ocr__db_runs(op->mode, training) && (rc = ocr__db_op_forward(ctx, m, op, training))) return ocr__db_layer_error(ctx, fn, m, op, rc);
        if (S->op_seconds && S->op_clock) S->op_seconds[i] += S->op_clock() - t0;
    }
    if (training) m->num_batches_tracked++;
    S->phase = training ? OCR__DB_AFTER_TRAIN : OCR__DB_AFTER_EVAL;
    *prob = ocr__db_val(m, training ? S->act_prob_logits : S->act_prob);
    if (thresh) {
        if (training) *thresh = ocr__db_val(m, S->act_thresh);
        else memset(thresh, 0, sizeof *thresh);
    }
    return OCR_OK;
}

OCRDEF int ocr_dbnet_backward(ocr_ctx *ctx, ocr_dbnet *m, const ocr_tensor *d_prob_logits, const ocr_tensor *d_thresh) {
    ocr__dbnet_state *S = m ? m->state_ : NULL;
    const char *fn = "ocr_dbnet_backward";
    const ocr_tensor *ds[2];
    int outs[2], i, k, rc;
    if (!m || !m->params.allocated) return ocr_error(ctx, OCR_EINVAL, "%s: needs a model from ocr_dbnet_init", fn);
    if ((rc = ocr__db_same_device(ctx, fn, m))) return rc;
    if (S->phase != OCR__DB_AFTER_TRAIN)
        return ocr_error(ctx, OCR_ESTATE, "%s: needs a successful training-mode ocr_dbnet_forward first (%s)", fn,
                         S->phase == OCR__DB_AFTER_EVAL ? "the last forward was in eval mode"
                         : S->phase == OCR__DB_AFTER_BACKWARD ? "the last one's backward already ran, and it reuses the activations' memory as it goes"
                         : "no forward since init, a failed one, or a failed backward");
    ds[0] = d_prob_logits; ds[1] = d_thresh;
    outs[0] = S->act_prob_logits; outs[1] = S->act_thresh;
    for (i = 0; i < 2; i++) {
        if (!ds[i]) continue;
        if ((rc = ocr_check_f32(ctx, fn, ds[i])) || (rc = ocr_check_shape(ctx, fn, ds[i], ocr__db_shape(m, outs[i]))) ||
            (rc = ocr_check_finite(ctx, fn, ds[i])))
            return rc;
    }
    S->phase = OCR__DB_IDLE; /* from here on the activations are consumed: a failed backward needs a new forward too */
    /* the training forward laid out the gradients too */
    if ((rc = ocr__db_reserve(ctx, fn, m, &S->grads, &S->grads_cap, ocr__db_unit(m) * S->layout_need[1]))) return rc;
    if (m->params.device != OCR_DEVICE_CPU) {
        size_t most = 0;
        for (i = 0; i < S->n_ops; i++)
            if (S->ops[i].kind == OCR__DB_BN && S->ops[i].relu && (size_t)ocr_shape_numel(ocr__db_shape(m, S->ops[i].out)) > most)
                most = (size_t)ocr_shape_numel(ocr__db_shape(m, S->ops[i].out));
        if ((rc = ocr__db_reserve(ctx, fn, m, &S->relu_dy, &S->relu_dy_cap, most))) return rc;
    }
    /* gradients share memory, so each starts from zero where it begins to live: the seeds first */
    for (i = 0; i < S->n_acts; i++) {
        ocr_tensor g = ocr__db_grad(m, i);
        if (ocr__db_runs(S->acts[i].mode, 1) && !(S->acts[i].flags & OCR__DB_ACT_NOGRAD) && S->acts[i].gfirst < 0 &&
            (rc = ocr_tensor_zero(ctx, &g)))
            return rc;
    }
    for (i = 0; i < 2; i++) {
        ocr_tensor g;
        if (!ds[i]) continue;
        g = ocr__db_grad(m, outs[i]);
        if ((rc = ocr_tensor_copy(ctx, &g, ds[i]))) return rc;
    }
    for (i = S->n_ops - 1; i >= 0; i--) {
        const ocr__dbnet_op *op = &S->ops[i];
        double t0 = S->op_seconds && S->op_clock ? S->op_clock() : 0.0;
        if (!ocr__db_runs(op->mode, 1)) continue;
        for (k = 0; k < op->n_in; k++) {
            ocr_tensor g = ocr__db_grad(m, op->in[k]);
            if (S->acts[op->in[k]].gfirst == i && S->acts[op->in[k]].galias < 0 && (rc = ocr_tensor_zero(ctx, &g))) return rc;
        }
        for (k = 0; k < S->n_acts; k++) /* activations are numbered in forward order: a chain's inputs come first */
            if (S->acts[k].recompute && S->acts[k].rfirst == i && (rc = ocr__db_recompute(ctx, m, k))) return ocr__db_layer_error(ctx, fn, m, op, rc);
        if ((rc = ocr__db_op_backward(ctx, m, op))) return ocr__db_layer_error(ctx, fn, m, op, rc);
        if (S->op_seconds && S->op_clock) S->op_seconds[S->n_ops + i] += S->op_clock() - t0;
    }
    S->phase = OCR__DB_AFTER_BACKWARD;
    return OCR_OK;
}

/* ---- options, memory and profiling ---- */

OCRDEF int ocr_dbnet_set_options(ocr_ctx *ctx, ocr_dbnet *m, unsigned flags) {
    const unsigned known = OCR_DBNET_NO_SHARING | OCR_DBNET_NO_RECOMPUTE | OCR_DBNET_NO_BN_FOLD | OCR_DBNET_NO_FUSION;
    ocr__dbnet_state *S;
    if (!m || !m->state_) return ocr_error(ctx, OCR_EINVAL, "ocr_dbnet_set_options: needs a model from ocr_dbnet_init");
    if (flags & ~known) return ocr_error(ctx, OCR_EINVAL, "ocr_dbnet_set_options: unknown flags 0x%x", flags & ~known);
    S = m->state_;
    /* the layout is keyed on these, so the next forward lays the activations out again */
    S->share_off = (flags & OCR_DBNET_NO_SHARING) != 0;
    S->recompute_off = (flags & OCR_DBNET_NO_RECOMPUTE) != 0;
    S->bn_fold_off = (flags & OCR_DBNET_NO_BN_FOLD) != 0;
    S->fusion_off = (flags & OCR_DBNET_NO_FUSION) != 0;
    return OCR_OK;
}

OCRDEF ocr_dbnet_memory_info ocr_dbnet_memory(const ocr_dbnet *m) {
    ocr_dbnet_memory_info info;
    const ocr__dbnet_state *S = m ? m->state_ : NULL;
    size_t unit;
    int training, i;
    memset(&info, 0, sizeof info);
    if (!S) return info;
    info.values_bytes = S->values_cap * sizeof(float);
    info.grads_bytes = S->grads_cap * sizeof(float);
    info.arena_allocations = S->arena_allocs;
    if (!S->layout_key || !S->N) return info; /* no forward yet */
    training = (S->layout_key - 1) & 1;
    unit = ocr__db_unit(m);
    info.values_need_bytes = unit * S->layout_need[0] * sizeof(float);
    info.grads_need_bytes = training ? unit * S->layout_need[1] * sizeof(float) : 0;
    for (i = 0; i < S->n_acts; i++) {
        const ocr__dbnet_act *a = &S->acts[i];
        size_t bytes = (size_t)ocr_shape_numel(ocr__db_shape(m, i)) * sizeof(float);
        if (!ocr__db_runs(a->mode, training)) continue;
        if (a->alias < 0) info.values_unshared_bytes += bytes;
        if (training && !(a->flags & OCR__DB_ACT_NOGRAD)) info.grads_unshared_bytes += bytes;
    }
    return info;
}

OCRDEF int ocr_dbnet_profile(ocr_ctx *ctx, ocr_dbnet *m, double (*clock)(void)) {
    ocr__dbnet_state *S;
    if (!m || !m->state_) return ocr_error(ctx, OCR_EINVAL, "ocr_dbnet_profile: needs a model from ocr_dbnet_init");
    S = m->state_;
    S->op_clock = NULL;
    OCR_FREE(S->op_seconds);
    S->op_seconds = NULL;
    if (!clock) return OCR_OK;
    if (!(S->op_seconds = (double *)OCR_MALLOC(2 * (size_t)S->n_ops * sizeof *S->op_seconds)))
        return ocr_error(ctx, OCR_ENOMEM, "ocr_dbnet_profile: out of memory");
    memset(S->op_seconds, 0, 2 * (size_t)S->n_ops * sizeof *S->op_seconds);
    S->op_clock = clock;
    return OCR_OK;
}

OCRDEF int ocr_dbnet_op_count(const ocr_dbnet *m) { return m && m->state_ ? m->state_->n_ops : 0; }

OCRDEF ocr_dbnet_op_info ocr_dbnet_op(const ocr_dbnet *m, int i) {
    static const char *const kinds[] = {"conv", "convT", "bn", "relu", "maxpool", "upsample", "add", "concat", "sigmoid"};
    const ocr__dbnet_state *S = m ? m->state_ : NULL;
    ocr_dbnet_op_info info;
    const ocr__dbnet_op *op;
    const ocr__dbnet_act *a;
    int j, k;
    memset(&info, 0, sizeof info);
    info.name = info.kind = "";
    if (!S || i < 0 || i >= S->n_ops) return info;
    op = &S->ops[i];
    a = &S->acts[op->out];
    info.name = a->name;
    info.kind = op->kind == OCR__DB_BN && op->relu ? "bn+relu" : kinds[op->kind];
    info.channels = a->channels;
    info.height = S->H / a->div;
    info.width = S->W / a->div;
    info.n_inputs = op->n_in;
    for (k = 0; k < op->n_in; k++) {
        info.inputs[k] = -1; /* the network's input, which no op writes */
        for (j = 0; j < S->n_ops; j++) if (S->ops[j].out == op->in[k]) info.inputs[k] = j;
    }
    info.weight = op->w; info.bias = op->b; info.running_mean = op->mean; info.running_var = op->var;
    info.kernel = op->kernel; info.stride = op->stride; info.pad = op->pad; info.factor = op->factor;
    info.runs_in = op->mode == OCR__DB_TRAIN ? OCR_DBNET_RUNS_TRAINING : op->mode == OCR__DB_EVAL ? OCR_DBNET_RUNS_EVAL : OCR_DBNET_RUNS_ALWAYS;
    if (S->op_seconds) {
        info.seconds_forward = S->op_seconds[i];
        info.seconds_backward = S->op_seconds[S->n_ops + i];
    }
    return info;
}

/* ---- checkpoints ---- */

static void ocr__db_config_strings(const ocr_dbnet_config *c, char v[6][32]) {
    snprintf(v[0], 32, "resnet%d", c->depth);
    snprintf(v[1], 32, "%.9g", c->width);
    snprintf(v[2], 32, "%.9g", c->k);
    snprintf(v[3], 32, "%.9g", c->prior_prob);
    snprintf(v[4], 32, "%.9g", c->bn_momentum);
    snprintf(v[5], 32, "%.9g", c->bn_eps);
}

static int ocr__db_config_from_meta(ocr_ctx *ctx, const char *fn, const ocr_safetensors *st, const char *path, ocr_dbnet_config *c) {
    float *fields[5];
    int i;
    const char *v = ocr_safetensors_meta(st, ocr__db_meta_keys[0]);
    *c = ocr_dbnet_config_default();
    if (!v)
        return ocr_error(ctx, OCR_EFORMAT, "%s: '%s' has no %s in __metadata__: not an ocr_dbnet_save checkpoint (a bare "
                         "state_dict loads with ocr_params_load)", fn, path, ocr__db_meta_keys[0]);
    if (strcmp(v, "resnet18") != 0 && strcmp(v, "resnet34") != 0)
        return ocr_error(ctx, OCR_EFORMAT, "%s: '%s' has %s '%.40s'; ocr_dbnet builds resnet18 and resnet34", fn, path,
                         ocr__db_meta_keys[0], v);
    c->depth = atoi(v + 6);
    fields[0] = &c->width; fields[1] = &c->k; fields[2] = &c->prior_prob; fields[3] = &c->bn_momentum; fields[4] = &c->bn_eps;
    for (i = 0; i < 5; i++) {
        char *end = NULL;
        double d;
        v = ocr_safetensors_meta(st, ocr__db_meta_keys[i + 1]);
        d = v ? strtod(v, &end) : 0.0;
        if (!v || end == v || *end)
            return ocr_error(ctx, OCR_EFORMAT, "%s: '%s' needs a number for %s in __metadata__", fn, path, ocr__db_meta_keys[i + 1]);
        *fields[i] = (float)d;
    }
    return ocr__db_check_config(ctx, fn, c);
}

/* The BN whose running statistics live at param index mean has its num_batches_tracked named "<bn>.num_batches_tracked". */
static void ocr__db_nbt_name(const ocr_dbnet *m, const ocr__dbnet_op *op, char *out, size_t cap) {
    const char *wname = m->params.info[op->w].name;
    snprintf(out, cap, "%.*s.num_batches_tracked", (int)(strlen(wname) - strlen(".weight")), wname);
}

OCRDEF int ocr_dbnet_save(ocr_ctx *ctx, const ocr_dbnet *m, const char *path, const char *const *meta_keys,
                          const char *const *meta_values, int n_meta) {
    const ocr__dbnet_state *S = m ? m->state_ : NULL;
    const char *fn = "ocr_dbnet_save";
    char cfgv[6][32];
    const char *keys[64], *vals[64];
    ocr_tensor *views = NULL;
    const ocr_tensor **ptrs = NULL;
    int64_t *nbt = NULL;
    ocr_params host;
    const ocr_params *P = m ? &m->params : NULL;
    int n = 0, i, j, rc;
    ocr_params_init(&host);
    if (!m || !m->params.allocated) return ocr_error(ctx, OCR_EINVAL, "%s: needs a model from ocr_dbnet_init", fn);
    if (n_meta < 0 || n_meta > 64 - 7 || (n_meta && (!meta_keys || !meta_values)))
        return ocr_error(ctx, OCR_EINVAL, "%s: %d metadata pairs (at most %d, keys and values non-NULL)", fn, n_meta, 64 - 7);
    ocr__db_config_strings(&m->cfg, cfgv);
    keys[0] = "format"; vals[0] = "pt";
    for (i = 0; i < 6; i++) { keys[i + 1] = ocr__db_meta_keys[i]; vals[i + 1] = cfgv[i]; }
    for (i = 0; i < n_meta; i++) {
        for (j = 0; j < 7; j++)
            if (!meta_keys[i] || !meta_values[i] || strcmp(meta_keys[i], keys[j]) == 0)
                return ocr_error(ctx, OCR_EINVAL, "%s: metadata key %d ('%s') is NULL, has a NULL value or is reserved", fn, i,
                                 meta_keys[i] ? meta_keys[i] : "(null)");
        keys[7 + i] = meta_keys[i];
        vals[7 + i] = meta_values[i];
    }
    if (P->device != OCR_DEVICE_CPU) { /* the explicit download of device weights */
        if ((rc = ocr_params_host_copy(ctx, P, &host))) return rc;
        P = &host;
    }
    views = (ocr_tensor *)OCR_MALLOC((size_t)(m->params.count + S->n_ops) * sizeof *views);
    ptrs = (const ocr_tensor **)OCR_MALLOC((size_t)(m->params.count + S->n_ops) * sizeof *ptrs);
    nbt = (int64_t *)OCR_MALLOC((size_t)S->n_ops * sizeof *nbt);
    if (!views || !ptrs || !nbt) { rc = ocr_error(ctx, OCR_ENOMEM, "%s: out of memory", fn); goto done; }
    for (i = 0; i < P->count; i++) {
        views[n] = ocr_params_value(P, i);
        ptrs[n] = &views[n];
        /* never write what ocr_dbnet_load refuses */
        if ((rc = ocr_check_range(ctx, fn, &views[n], -OCR_LOAD_MAX_ABS, OCR_LOAD_MAX_ABS))) goto done;
        n++;
    }
    for (i = 0; i < S->n_ops; i++) {
        char name[OCR_NAME_MAX];
        ocr_shape scalar;
        if (S->ops[i].kind != OCR__DB_BN) continue;
        memset(&scalar, 0, sizeof scalar);
        nbt[i] = m->num_batches_tracked;
        ocr__db_nbt_name(m, &S->ops[i], name, sizeof name);
        views[n] = ocr_tensor_view(name, OCR_I64, OCR_DEVICE_CPU, scalar, &nbt[i]);
        ptrs[n] = &views[n];
        n++;
    }
    rc = ocr_safetensors_save(ctx, path, ptrs, n, keys, vals, 7 + n_meta);
done:
    OCR_FREE(views);
    OCR_FREE((void *)ptrs);
    OCR_FREE(nbt);
    ocr_params_free(&host);
    return rc;
}

OCRDEF int ocr_dbnet_read_config(ocr_ctx *ctx, const char *path, ocr_dbnet_config *cfg) {
    ocr_safetensors st;
    int rc;
    if (!cfg) return ocr_error(ctx, OCR_EINVAL, "ocr_dbnet_read_config: cfg is NULL");
    if ((rc = ocr_safetensors_open(ctx, &st, path))) return rc;
    rc = ocr__db_config_from_meta(ctx, "ocr_dbnet_read_config", &st, path, cfg);
    ocr_safetensors_close(&st);
    return rc;
}

/* Every file entry is a parameter or a BN's num_batches_tracked (an I64 scalar); the count comes from the first. */
static int ocr__db_load_nbt(ocr_ctx *ctx, const char *fn, ocr_dbnet *m, const ocr_safetensors *st, const char *path) {
    ocr__dbnet_state *S = m->state_;
    int i, j, found = 0;
    for (i = 0; i < st->n_entries; i++) {
        const ocr_safetensors_entry *e = &st->entries[i];
        int known = ocr_params_find(&m->params, e->name) >= 0;
        for (j = 0; j < S->n_ops && !known; j++) {
            char name[OCR_NAME_MAX];
            if (S->ops[j].kind != OCR__DB_BN) continue;
            ocr__db_nbt_name(m, &S->ops[j], name, sizeof name);
            if (strcmp(name, e->name) != 0) continue;
            if (e->dtype != OCR_I64 || ocr_shape_numel(e->shape) != 1)
                return ocr_error(ctx, OCR_EFORMAT, "%s: '%s' in '%s' must be an I64 scalar, found %s", fn, e->name, path, ocr_dtype_name(e->dtype));
            if (!found) {
                int64_t v;
                memcpy(&v, st->bytes + st->data_start + e->begin, sizeof v);
                if (v < 0) return ocr_error(ctx, OCR_EFORMAT, "%s: '%s' in '%s' is negative (%lld)", fn, e->name, path, (long long)v);
                m->num_batches_tracked = v;
                found = 1;
            }
            known = 1;
        }
        if (!known) return ocr_error(ctx, OCR_ENOTFOUND, "%s: '%s' holds tensor '%s', which is no parameter of this model", fn, path, e->name);
    }
    return OCR_OK;
}

OCRDEF int ocr_dbnet_load(ocr_ctx *ctx, ocr_dbnet *m, const char *path) {
    const char *fn = "ocr_dbnet_load";
    ocr_safetensors st;
    ocr_dbnet_config fc;
    ocr_params staged;
    int64_t nbt_before;
    int rc;
    ocr_params_init(&staged);
    if (!m || !m->params.allocated) return ocr_error(ctx, OCR_EINVAL, "%s: needs a model from ocr_dbnet_init", fn);
    if ((rc = ocr_safetensors_open(ctx, &st, path))) return rc;
    if ((rc = ocr__db_config_from_meta(ctx, fn, &st, path, &fc))) goto done;
    if (fc.depth != m->cfg.depth || fc.width != m->cfg.width || fc.k != m->cfg.k || fc.bn_momentum != m->cfg.bn_momentum ||
        fc.bn_eps != m->cfg.bn_eps) {
        char fv[6][32], mv[6][32];
        int i;
        ocr__db_config_strings(&fc, fv);
        ocr__db_config_strings(&m->cfg, mv);
        /* name the first differing key; prior_prob only sets the initial bias, so it may differ */
        for (i = 0; i < 5 && (i == 3 || strcmp(fv[i], mv[i]) == 0); i++) {}
        rc = ocr_error(ctx, OCR_EINVAL, "%s: '%s' was saved with %s=%s but this model has %s; ocr_dbnet_init a model with "
                       "ocr_dbnet_read_config's config to load it", fn, path, ocr__db_meta_keys[i], fv[i], mv[i]);
        goto done;
    }
    /* load into a host copy and take it only when complete, so a failed load never leaves a mix (and device weights
       get one upload) */
    if ((rc = ocr_params_host_copy(ctx, &m->params, &staged))) goto done;
    nbt_before = m->num_batches_tracked;
    if ((rc = ocr_params_load(ctx, &staged, &st, NULL, OCR_LOAD_ALLOW_UNEXPECTED)) || (rc = ocr__db_load_nbt(ctx, fn, m, &st, path)) ||
        (rc = ocr_params_copy_values(ctx, &m->params, &staged))) {
        char msg[OCR_ERROR_MAX];
        m->num_batches_tracked = nbt_before;
        snprintf(msg, sizeof msg, "%s", ctx->last_error);
        ocr_error(ctx, rc, "%s: '%s': %s", fn, path, msg);
        goto done;
    }
    m->state_->phase = OCR__DB_IDLE; /* saved activations belong to the old weights */
done:
    ocr_params_free(&staged);
    ocr_safetensors_close(&st);
    return rc;
}

OCRDEF int ocr_dbnet_init_from_file(ocr_ctx *ctx, ocr_dbnet *m, const char *path) {
    ocr_dbnet_config cfg;
    int rc;
    if (!m) return ocr_error(ctx, OCR_EINVAL, "ocr_dbnet_init_from_file: m is NULL");
    memset(m, 0, sizeof *m);
    if ((rc = ocr_dbnet_read_config(ctx, path, &cfg)) || (rc = ocr_dbnet_init(ctx, m, &cfg))) return rc;
    if ((rc = ocr_dbnet_load(ctx, m, path))) ocr_dbnet_free(m);
    return rc;
}

OCRDEF int ocr_dbnet_load_backbone(ocr_ctx *ctx, ocr_dbnet *m, const char *path) {
    ocr_safetensors st;
    int rc;
    if (!m || !m->params.allocated) return ocr_error(ctx, OCR_EINVAL, "ocr_dbnet_load_backbone: needs a model from ocr_dbnet_init");
    if ((rc = ocr_safetensors_open(ctx, &st, path))) return rc;
    rc = ocr_params_load(ctx, &m->params, &st, "backbone.", OCR_LOAD_ALLOW_UNEXPECTED);
    if (rc) {
        char msg[OCR_ERROR_MAX];
        snprintf(msg, sizeof msg, "%s", ctx->last_error);
        ocr_error(ctx, rc, "ocr_dbnet_load_backbone: '%s': %s", path, msg);
    } else {
        m->state_->phase = OCR__DB_IDLE;
    }
    ocr_safetensors_close(&st);
    return rc;
}

/* ================================================================ [targets] implementation */

OCRDEF double ocr_dbnet_edge_distance(double px, double py, ocr_point a, ocr_point b) {
    double a2 = (px - a.x) * (px - a.x) + (py - a.y) * (py - a.y);
    double b2 = (px - b.x) * (px - b.x) + (py - b.y) * (py - b.y);
    float ex = a.x - b.x, ey = a.y - b.y, c2f = ex * ex + ey * ey;
    double c2 = c2f, cosin;
    if (a2 == 0 || b2 == 0) return 0.0;
    if (c2 == 0) return sqrt(a2 < b2 ? a2 : b2);
    cosin = (c2 - a2 - b2) / (2 * sqrt(a2 * b2));
    if (cosin < 0) return sqrt(a2 < b2 ? a2 : b2);
    if (cosin > 1) cosin = 1; /* the official code takes sqrt of a negative number here (NaN) */
    return sqrt(a2 * b2 * (1 - cosin * cosin) / c2);
}

OCRDEF ocr_dbnet_target_config ocr_dbnet_target_config_default(void) {
    ocr_dbnet_target_config c;
    c.shrink_ratio = 0.4;
    c.min_text_size = 8.0;
    c.thresh_min = 0.3;
    c.thresh_max = 0.7;
    return c;
}

OCRDEF const char *ocr_dbnet_target_reason_name(int reason) {
    static const char *const names[] = {"text", "ignored", "non-finite coordinates", "fewer than 3 points",
                                        "outside the image", "zero area", "too small", "shrinks to nothing"};
    return reason >= 0 && reason < OCR_TARGET_REASON_COUNT ? names[reason] : "?";
}

/* H and W of a target plane of shape [H,W], [1,H,W] or [1,1,H,W]. */
static int ocr__target_plane(ocr_ctx *ctx, const char *fn, const ocr_tensor *t, int64_t *h, int64_t *w) {
    char d[200];
    int rc, k;
    if ((rc = ocr_check_dtype(ctx, fn, t, OCR_F32)) || (rc = ocr_check_device(ctx, fn, t, OCR_DEVICE_CPU))) return rc;
    for (k = 0; k + 2 < t->shape.ndim; k++)
        if (t->shape.dim[k] != 1) break;
    if (t->shape.ndim < 2 || k + 2 < t->shape.ndim)
        return ocr_error(ctx, OCR_ESHAPE, "%s: tensor %s must be one plane: [H,W], [1,H,W] or [1,1,H,W]", fn,
                         ocr_tensor_describe(t, d, sizeof d));
    *h = t->shape.dim[t->shape.ndim - 2];
    *w = t->shape.dim[t->shape.ndim - 1];
    return OCR_OK;
}

/* Threshold-map contribution of one text polygon q (clipped, n points) grown into g: every pixel of g's box
   inside the image gets max(old, 1 - min over edges of clip(distance / D, 0, 1)), in the float32 steps of the
   official code (vertices shifted into the box frame in float32, ratios stored as float32). */
static void ocr__draw_border(float *canvas, int64_t height, int64_t width, const ocr_point *q, int n, const ocr_point *g,
                             int ng, double dist, ocr_point *local) {
    int64_t gx0 = (int64_t)g[0].x, gx1 = gx0, gy0 = (int64_t)g[0].y, gy1 = gy0, x, y, x0, x1, y0, y1;
    int k;
    for (k = 1; k < ng; k++) {
        int64_t gx = (int64_t)g[k].x, gy = (int64_t)g[k].y;
        if (gx < gx0) gx0 = gx;
        if (gx > gx1) gx1 = gx;
        if (gy < gy0) gy0 = gy;
        if (gy > gy1) gy1 = gy;
    }
    x0 = gx0 < 0 ? 0 : gx0 > width - 1 ? width - 1 : gx0;
    x1 = gx1 < 0 ? 0 : gx1 > width - 1 ? width - 1 : gx1;
    y0 = gy0 < 0 ? 0 : gy0 > height - 1 ? height - 1 : gy0;
    y1 = gy1 < 0 ? 0 : gy1 > height - 1 ? height - 1 : gy1;
    for (k = 0; k < n; k++) {
        local[k].x = q[k].x - (float)gx0;
        local[k].y = q[k].y - (float)gy0;
    }
    for (y = y0; y <= y1; y++)
        for (x = x0; x <= x1; x++) {
            float nearest = 1.0f, v;
            for (k = 0; k < n; k++) {
                double r = ocr_dbnet_edge_distance((double)(x - gx0), (double)(y - gy0), local[k], local[k + 1 < n ? k + 1 : 0]) / dist;
                float rf = (float)(r < 0 ? 0 : r > 1 ? 1 : r);
                if (rf < nearest) nearest = rf;
            }
            v = 1.0f - nearest;
            if (v > canvas[y * width + x]) canvas[y * width + x] = v;
        }
}

OCRDEF int ocr_dbnet_targets(ocr_ctx *ctx, const ocr_dbnet_target_config *cfg, const ocr_polygon *polys, int n,
                             ocr_tensor *gt_shrink, ocr_tensor *mask_shrink, ocr_tensor *gt_thresh,
                             ocr_tensor *mask_thresh, int *reasons) {
    const char *fn = "ocr_dbnet_targets";
    ocr_dbnet_target_config c = cfg ? *cfg : ocr_dbnet_target_config_default();
    ocr_tensor *maps[4];
    int64_t h = 0, w = 0, mh = 0, mw = 0, p, hw;
    float *gt, *mask, *canvas, *tmask, scale, offset;
    ocr_point *work = NULL, *local = NULL;
    ocr_polyset shrunk, grown;
    int i, k, rc = OCR_OK, max_pts = 0;
    memset(&shrunk, 0, sizeof shrunk);
    memset(&grown, 0, sizeof grown);
    maps[0] = gt_shrink; maps[1] = mask_shrink; maps[2] = gt_thresh; maps[3] = mask_thresh;
    for (i = 0; i < 4; i++) {
        if ((rc = ocr__target_plane(ctx, fn, maps[i], &mh, &mw))) return rc;
        if (i == 0) { h = mh; w = mw; }
        if (mh != h || mw != w) {
            char d0[200], d1[200];
            return ocr_error(ctx, OCR_ESHAPE, "%s: tensor %s and tensor %s must have the same H and W", fn,
                             ocr_tensor_describe(maps[i], d1, sizeof d1), ocr_tensor_describe(maps[0], d0, sizeof d0));
        }
        for (k = 0; k < i; k++)
            if (maps[k]->data == maps[i]->data)
                return ocr_error(ctx, OCR_EINVAL, "%s: tensors '%s' and '%s' share memory; the four maps must be distinct", fn,
                                 maps[k]->name, maps[i]->name);
    }
    if (h < 1 || w < 1 || h > (int64_t)OCR_POLY_MAX_COORD || w > (int64_t)OCR_POLY_MAX_COORD)
        return ocr_error(ctx, OCR_ESHAPE, "%s: map size %lld x %lld (H x W) must be 1..%g", fn, (long long)h, (long long)w,
                         OCR_POLY_MAX_COORD);
    if (!(c.shrink_ratio >= 0 && c.shrink_ratio < 1) || !(c.min_text_size >= 0 && c.min_text_size <= OCR_POLY_MAX_COORD) ||
        !(c.thresh_min <= c.thresh_max) || !isfinite(c.thresh_min) || !isfinite(c.thresh_max))
        return ocr_error(ctx, OCR_EINVAL,
                         "%s: config shrink_ratio %g (needs [0,1)), min_text_size %g (needs >= 0), thresh %g..%g (needs finite min <= max)",
                         fn, c.shrink_ratio, c.min_text_size, c.thresh_min, c.thresh_max);
    if (n < 0 || (n > 0 && !polys)) return ocr_error(ctx, OCR_EINVAL, "%s: %d polygons with polys %p", fn, n, (const void *)polys);
    for (i = 0; i < n; i++) {
        if (polys[i].n_points < 0 || (polys[i].n_points > 0 && !polys[i].points))
            return ocr_error(ctx, OCR_EINVAL, "%s: polygon %d has %d points and points %p", fn, i, polys[i].n_points,
                             (const void *)polys[i].points);
        if (polys[i].n_points > max_pts) max_pts = polys[i].n_points;
    }
    gt = (float *)gt_shrink->data;
    mask = (float *)mask_shrink->data;
    canvas = (float *)gt_thresh->data;
    tmask = (float *)mask_thresh->data;
    hw = h * w;
    for (p = 0; p < hw; p++) { gt[p] = 0.0f; mask[p] = 1.0f; canvas[p] = 0.0f; tmask[p] = 0.0f; }
    if (max_pts > 0) {
        work = (ocr_point *)OCR_MALLOC((size_t)max_pts * sizeof(ocr_point));
        local = (ocr_point *)OCR_MALLOC((size_t)max_pts * sizeof(ocr_point));
        if (!work || !local) { rc = ocr_error(ctx, OCR_ENOMEM, "%s: cannot copy a polygon of %d points", fn, max_pts); goto done; }
    }
    for (i = 0; i < n && rc == OCR_OK; i++) {
        const ocr_polygon *pg = &polys[i];
        int np = pg->n_points, reason = OCR_TARGET_TEXT, outside = 15;
        float xmin = 0, xmax = 0, ymin = 0, ymax = 0;
        double area = 0, dist = 0;
        for (k = 0; k < np; k++)
            if (!isfinite(pg->points[k].x) || !isfinite(pg->points[k].y)) break;
        if (k < np) {
            if (reasons) reasons[i] = OCR_TARGET_NONFINITE;
            continue;
        }
        /* validate_polygons: clip into the image, make clockwise. A polygon with every point beyond the same
           side of the image is flattened onto that border. */
        for (k = 0; k < np; k++) {
            const ocr_point *s = &pg->points[k];
            outside &= (s->x < 0) | (s->x > (float)(w - 1)) << 1 | (s->y < 0) << 2 | (s->y > (float)(h - 1)) << 3;
            work[k].x = s->x < 0 ? 0.0f : s->x > (float)(w - 1) ? (float)(w - 1) : s->x;
            work[k].y = s->y < 0 ? 0.0f : s->y > (float)(h - 1) ? (float)(h - 1) : s->y;
            if (k == 0 || work[k].x < xmin) xmin = work[k].x;
            if (k == 0 || work[k].x > xmax) xmax = work[k].x;
            if (k == 0 || work[k].y < ymin) ymin = work[k].y;
            if (k == 0 || work[k].y > ymax) ymax = work[k].y;
        }
        if (np >= 3) {
            area = fabs(ocr_poly_area(work, np));
            ocr_poly_make_clockwise(work, np);
        }
        if (pg->ignore) reason = OCR_TARGET_IGNORED;
        else if (np < 3) reason = OCR_TARGET_TOO_FEW_POINTS;
        else if (outside) reason = OCR_TARGET_OUTSIDE;
        else if (area < 1) reason = OCR_TARGET_ZERO_AREA;
        else if (xmax - xmin < c.min_text_size || ymax - ymin < c.min_text_size) reason = OCR_TARGET_TOO_SMALL;
        if (reason == OCR_TARGET_TEXT) {
            dist = area * (1 - c.shrink_ratio * c.shrink_ratio) / ocr_poly_perimeter(work, np);
            if ((rc = ocr_poly_offset(ctx, work, np, -dist, &shrunk))) break;
            if (shrunk.n_polys == 0) reason = OCR_TARGET_SHRINK_EMPTY;
        }
        if (reasons) reasons[i] = reason;
        if (reason != OCR_TARGET_TEXT) {
            if (np > 0 && (rc = ocr_poly_fill(ctx, mask, (int)h, (int)w, work, np, 0.0f))) break;
            continue;
        }
        if ((rc = ocr_poly_fill(ctx, gt, (int)h, (int)w, shrunk.pts, shrunk.counts[0], 1.0f))) break;
        if ((rc = ocr_poly_offset(ctx, work, np, dist, &grown))) break;
        if (grown.n_polys == 0) continue; /* growing a polygon of area >= 1 always leaves something */
        if ((rc = ocr_poly_fill(ctx, tmask, (int)h, (int)w, grown.pts, grown.counts[0], 1.0f))) break;
        ocr__draw_border(canvas, h, w, work, np, grown.pts, grown.counts[0], dist, local);
    }
    scale = (float)(c.thresh_max - c.thresh_min);
    offset = (float)c.thresh_min;
    for (p = 0; p < hw; p++) canvas[p] = canvas[p] * scale + offset;
done:
    OCR_FREE(work);
    OCR_FREE(local);
    ocr_polyset_free(&shrunk);
    ocr_polyset_free(&grown);
    return rc;
}


/* ================================================================ [postprocess] implementation */

OCRDEF ocr_post_config ocr_post_config_default(int mode) {
    ocr_post_config c = ocr_post_config_official(mode);
    c.split_thresh = 0.8f;
    c.score_mode = OCR_SCORE_SLOW;
    c.box_thresh = 0.8;
    return c;
}

OCRDEF ocr_post_config ocr_post_config_official(int mode) {
    ocr_post_config c;
    memset(&c, 0, sizeof c);
    c.thresh = 0.3f;
    c.box_thresh = 0.6;
    c.unclip_ratio = mode == OCR_POST_POLYGON ? 2.0 : 1.5;
    c.poly_epsilon = 0.002; /* polygons_from_bitmap: 0.002 * cv2.arcLength(contour, True) */
    c.max_candidates = 1000;
    c.min_size = 3;
    c.mode = mode;
    c.score_mode = OCR_SCORE_FAST;
    return c;
}

/* Capacity-doubling realloc: buf itself when it already holds need elements of elem bytes, else the grown
   block (*cap updated), or NULL with *rc set and the error recorded. */
static void *ocr__post_grow(ocr_ctx *ctx, const char *fn, void *buf, int *cap, int64_t need, size_t elem, int *rc) {
    size_t bytes;
    int64_t want;
    void *p;
    *rc = OCR_OK;
    if (buf && need <= *cap) return buf;
    want = (int64_t)*cap * 2 > need ? (int64_t)*cap * 2 : need;
    if (want < 16) want = 16;
    if (want > INT32_MAX || !ocr_size_mul((size_t)want, elem, &bytes)) {
        *rc = ocr_error(ctx, OCR_EOVERFLOW, "%s: %lld elements of %zu bytes is too many", fn, (long long)need, elem);
        return NULL;
    }
    p = OCR_REALLOC(buf, bytes);
    if (!p) {
        *rc = ocr_error(ctx, OCR_ENOMEM, "%s: cannot allocate %zu bytes", fn, bytes);
        return NULL;
    }
    *cap = (int)want;
    return p;
}

/* ---------------------------------------------------------------- scoring, unclipping, the pipeline */

typedef struct {
    float *mask; int mask_cap;
    ocr_point *shifted; int shifted_cap;  /* a polygon moved into the mask's frame */
    ocr_point *pts; int pts_cap;          /* truncated / approximated points */
    void *rect; size_t rect_cap;          /* ocr_min_area_box_work's work memory */
    ocr_polyset grown;
} ocr__post_work;

static void ocr__post_work_free(ocr__post_work *w) {
    OCR_FREE(w->mask); OCR_FREE(w->shifted); OCR_FREE(w->pts); OCR_FREE(w->rect);
    ocr_polyset_free(&w->grown);
}

static int ocr__post_reserve_pts(ocr_ctx *ctx, ocr__post_work *w, int n) {
    int rc;
    ocr_point *p = (ocr_point *)ocr__post_grow(ctx, "ocr_postprocess", w->pts, &w->pts_cap, n, sizeof(ocr_point), &rc);
    if (p) w->pts = p;
    return rc;
}

/* Mean of pred inside the polygon as box_score_fast does it: the bounding box floored/ceiled and clipped to
   the map, the vertices shifted into it (in float) and filled as cv2.fillPoly (ocr_poly_fill truncates them to
   integers), then the mean over the filled pixels (cv2.mean). Applied to a contour's integer points it is
   box_score_slow. */
static int ocr__box_score(ocr_ctx *ctx, ocr__post_work *w, const float *pred, int width, int height, const ocr_point *pts, int n,
                          double *score) {
    const char *fn = "ocr_postprocess";
    float lo_x = pts[0].x, hi_x = pts[0].x, lo_y = pts[0].y, hi_y = pts[0].y;
    int64_t x0, x1, y0, y1, mw, mh;
    double sum = 0.0;
    int64_t count = 0, i, j;
    int rc;
    for (i = 1; i < n; i++) {
        if (pts[i].x < lo_x) lo_x = pts[i].x;
        if (pts[i].x > hi_x) hi_x = pts[i].x;
        if (pts[i].y < lo_y) lo_y = pts[i].y;
        if (pts[i].y > hi_y) hi_y = pts[i].y;
    }
#define OCR__CLAMP(v, hi) ((v) < 0 ? 0 : (v) > (hi) ? (hi) : (v))
    x0 = OCR__CLAMP((int64_t)floorf(lo_x), width - 1);
    x1 = OCR__CLAMP((int64_t)ceilf(hi_x), width - 1);
    y0 = OCR__CLAMP((int64_t)floorf(lo_y), height - 1);
    y1 = OCR__CLAMP((int64_t)ceilf(hi_y), height - 1);
#undef OCR__CLAMP
    mw = x1 - x0 + 1;
    mh = y1 - y0 + 1;
    {
        float *mask = (float *)ocr__post_grow(ctx, fn, w->mask, &w->mask_cap, mw * mh, sizeof(float), &rc);
        ocr_point *shifted = mask ? (ocr_point *)ocr__post_grow(ctx, fn, w->shifted, &w->shifted_cap, n, sizeof(ocr_point), &rc) : NULL;
        if (mask) w->mask = mask;
        if (shifted) w->shifted = shifted;
        if (rc) return rc;
    }
    memset(w->mask, 0, sizeof(float) * (size_t)(mw * mh));
    for (i = 0; i < n; i++) {
        w->shifted[i].x = pts[i].x - (float)x0;
        w->shifted[i].y = pts[i].y - (float)y0;
    }
    if ((rc = ocr_poly_fill(ctx, w->mask, (int)mh, (int)mw, w->shifted, n, 1.0f))) return rc;
    /* the mask holds exactly 0 or 1: mask * pred is exact, and four partial sums break the add chain */
    for (i = 0; i < mh; i++) {
        const float *m = w->mask + i * mw, *p = pred + (y0 + i) * width + x0;
        double part[4] = {0.0, 0.0, 0.0, 0.0};
        float in = 0.0f;
        for (j = 0; j + 4 <= mw; j += 4) {
            part[0] += m[j] * p[j]; part[1] += m[j + 1] * p[j + 1];
            part[2] += m[j + 2] * p[j + 2]; part[3] += m[j + 3] * p[j + 3];
            in += (m[j] + m[j + 1]) + (m[j + 2] + m[j + 3]);
        }
        for (; j < mw; j++) { part[0] += m[j] * p[j]; in += m[j]; }
        sum += (part[0] + part[1]) + (part[2] + part[3]);
        count += (int64_t)in;
    }
    *score = count ? sum / (double)count : 0.0;
    return OCR_OK;
}

/* unclip: offset by D = area * ratio / perimeter (shapely's measures of the float points) with round joins,
   after truncating the points toward zero as pyclipper does with its integer coordinates. */
static int ocr__unclip(ocr_ctx *ctx, ocr__post_work *w, const ocr_point *pts, int n, double ratio) {
    double area = fabs(ocr_poly_area(pts, n)), length = ocr_poly_perimeter(pts, n);
    int i, rc;
    w->grown.n_polys = w->grown.n_pts = 0;
    if (!(length > 0)) return OCR_OK;
    if ((rc = ocr__post_reserve_pts(ctx, w, n))) return rc;
    for (i = 0; i < n; i++) {
        w->pts[i].x = truncf(pts[i].x);
        w->pts[i].y = truncf(pts[i].y);
    }
    return ocr_poly_offset(ctx, w->pts, n, area * ratio / length, &w->grown);
}

static int ocr__dets_push(ocr_ctx *ctx, ocr_detections *d, const ocr_point *pts, int n, float score) {
    const char *fn = "ocr_postprocess";
    int rc;
    ocr_point *buf = (ocr_point *)ocr__post_grow(ctx, fn, d->point_buf, &d->cap_points, (int64_t)d->n_points + n, sizeof(ocr_point), &rc);
    if (!buf) return rc;
    d->point_buf = buf;
    if (d->n == d->cap || !d->polys || !d->scores) {
        /* polys and scores grow together under one capacity */
        int cap = d->cap;
        ocr_polygon *polys = (ocr_polygon *)ocr__post_grow(ctx, fn, d->polys, &cap, (int64_t)d->n + 1, sizeof(ocr_polygon), &rc);
        float *scores;
        if (!polys) return rc;
        d->polys = polys;
        cap = d->cap;
        scores = (float *)ocr__post_grow(ctx, fn, d->scores, &cap, (int64_t)d->n + 1, sizeof(float), &rc);
        if (!scores) return rc;
        d->scores = scores;
        d->cap = cap;
    }
    memcpy(d->point_buf + d->n_points, pts, sizeof(ocr_point) * (size_t)n);
    memset(&d->polys[d->n], 0, sizeof(ocr_polygon));
    d->polys[d->n].n_points = n;
    d->scores[d->n] = score;
    d->n_points += n;
    d->n++;
    return OCR_OK;
}

OCRDEF void ocr_detections_free(ocr_detections *d) {
    if (!d) return;
    OCR_FREE(d->polys);
    OCR_FREE(d->scores);
    OCR_FREE(d->point_buf);
    memset(d, 0, sizeof *d);
}

#if !defined(OCR_NO_SIMD) && defined(__SSE2__)
#define OCR__POST_SSE2 1
#include <emmintrin.h>
#endif

/* pred > thresh into the interior of the work image (ocr_contour_frame); 0 when a value lies outside [0, 1]
   (NaN included), checked in the same pass. SSE2 does 16 pixels a step (gcc -O2 does not vectorise this). */
static int ocr__binarize(const float *pred, int64_t W, int64_t H, float thresh, uint8_t *img) {
    int64_t x, y;
    int in_range = 1;
    for (y = 0; y < H; y++) {
        const float *src = pred + y * W;
        uint8_t *dst = img + (y + 1) * (W + 2) + 1;
        int row_ok = 1;
        x = 0;
#ifdef OCR__POST_SSE2
        {
            const __m128 t = _mm_set1_ps(thresh), zero = _mm_setzero_ps(), one = _mm_set1_ps(1.0f);
            const __m128i low_bit = _mm_set1_epi8(1);
            __m128 ok = _mm_cmpeq_ps(zero, zero);
            for (; x + 16 <= W; x += 16) {
                __m128 v[4];
                __m128i above[4];
                int k;
                for (k = 0; k < 4; k++) {
                    v[k] = _mm_loadu_ps(src + x + 4 * k);
                    ok = _mm_and_ps(ok, _mm_and_ps(_mm_cmpge_ps(v[k], zero), _mm_cmple_ps(v[k], one)));
                    above[k] = _mm_castps_si128(_mm_cmpgt_ps(v[k], t));
                }
                /* all-ones / zero lanes narrowed to bytes, then to 1 / 0 */
                _mm_storeu_si128((__m128i *)(void *)(dst + x),
                                 _mm_and_si128(_mm_packs_epi16(_mm_packs_epi32(above[0], above[1]), _mm_packs_epi32(above[2], above[3])), low_bit));
            }
            row_ok = _mm_movemask_ps(ok) == 0xF;
        }
#endif
        for (; x < W; x++) {
            float v = src[x];
            row_ok &= (v >= 0.0f) & (v <= 1.0f);
            dst[x] = (uint8_t)(v > thresh);
        }
        in_range &= row_ok;
    }
    return in_range;
}

/* ocr_post_config.split_thresh: cores are 8-connected pixels above split_thresh of at least min_seed pixels (smaller
   ones are part of the region, not cores). Breadth-first growth from every core at once through the binarized region
   (8-connected) gives each pixel the core nearest to it in steps (a tie goes to the core whose pixel was queued
   first); then of every two 8-adjacent pixels of different cores the first in raster order is cleared (unless the
   other was cleared already), so the border follower finds one region per core. A region with one core or none is
   left as it is. img is the framed work image (ocr_contour_frame): its zero frame bounds every step. Labels
   (scratch slot OP1, framed too) are written and read only inside the regions: -2 a core pixel not yet filled, -1 one
   of a core too small, 0 none yet, > 0 the core's number. */
static int ocr__split_regions(ocr_ctx *ctx, const char *fn, const float *pred, int64_t W, int64_t H, float split_thresh,
                              int64_t min_seed, uint8_t *img) {
    const int64_t S = W + 2, n = S * (H + 2);
    const int64_t step[8] = {-S - 1, -S, -S + 1, -1, 1, S - 1, S, S + 1}; /* the last four: later in raster order */
    int32_t *label, next = 1;
    uint32_t *queue, tail = 0, head, grown;
    int64_t x, y, i;
    if (n >= (int64_t)INT32_MAX)
        return ocr_error(ctx, OCR_EINVAL, "%s: split_thresh needs a map of under 2^31 pixels, got %lldx%lld", fn, (long long)W, (long long)H);
    if (!(label = (int32_t *)ocr_ctx_scratch(ctx, OCR_SCRATCH_OP1, (size_t)n * sizeof *label)) ||
        !(queue = (uint32_t *)ocr_ctx_scratch(ctx, OCR_SCRATCH_OP2, (size_t)n * sizeof *queue)))
        return ctx->last_status;
    for (y = 0; y < H; y++) {
        const float *p = pred + y * W;
        for (x = 0; x < W; x++) {
            i = (y + 1) * S + x + 1;
            if (img[i]) label[i] = p[x] > split_thresh ? -2 : 0;
        }
    }
    /* 1: cores, flood-filled one at a time; a small one is marked -1 and its pixels leave the queue */
    for (i = S + 1; i < n - S - 1; i++) {
        uint32_t start = tail;
        if (!img[i] || label[i] != -2) continue;
        label[i] = next;
        queue[tail++] = (uint32_t)i;
        for (head = start; head < tail; head++) {
            int k;
            for (k = 0; k < 8; k++) {
                int64_t j = queue[head] + step[k];
                if (!img[j] || label[j] != -2) continue;
                label[j] = next;
                queue[tail++] = (uint32_t)j;
            }
        }
        if ((int64_t)(tail - start) < min_seed) {
            for (head = start; head < tail; head++) label[queue[head]] = -1;
            tail = start;
        } else
            next++;
    }
    if (next > 2) {
        /* 2: growth from all cores at once: the queue holds every core pixel, then each ring around them */
        for (head = 0; head < tail; head++) {
            int k;
            for (k = 0; k < 8; k++) {
                int64_t j = queue[head] + step[k];
                if (!img[j] || label[j] > 0) continue;
                label[j] = label[queue[head]];
                queue[tail++] = (uint32_t)j;
            }
        }
        /* 3: the cut, over the labelled pixels only: a pixel goes when a later neighbour of another core is there */
        for (grown = tail, head = 0; head < grown; head++) {
            int k;
            for (k = 4; k < 8; k++) {
                int64_t j = queue[head] + step[k];
                if (!img[j] || label[j] == label[queue[head]]) continue;
                img[queue[head]] = 0;
                break;
            }
        }
    }
    return OCR_OK;
}

OCRDEF int ocr_postprocess(ocr_ctx *ctx, const ocr_post_config *cfg, const ocr_tensor *prob, int dest_width, int dest_height,
                           ocr_detections *out) {
    const char *fn = "ocr_postprocess";
    char sb[96];
    ocr_polyset contours;
    ocr__post_work w;
    const float *pred;
    uint8_t *img;
    int64_t H, W, n_cand;
    int rc, c, first = 0;
    if (!cfg || !out) return ocr_error(ctx, OCR_EINVAL, "%s: cfg and out must not be NULL", fn);
    if ((rc = ocr_check_dtype(ctx, fn, prob, OCR_F32)) || (rc = ocr_check_device(ctx, fn, prob, OCR_DEVICE_CPU))) return rc;
    H = prob->shape.dim[prob->shape.ndim - 2 < 0 ? 0 : prob->shape.ndim - 2];
    W = prob->shape.dim[prob->shape.ndim - 1 < 0 ? 0 : prob->shape.ndim - 1];
    if (prob->shape.ndim < 2 || (prob->shape.ndim >= 3 && prob->shape.dim[0] != 1) || (prob->shape.ndim == 4 && prob->shape.dim[1] != 1) ||
        H < 1 || W < 1 || H > (1 << 24) || W > (1 << 24))
        return ocr_error(ctx, OCR_ESHAPE, "%s: probability map '%s' has shape %s; expected [H,W], [1,H,W] or [1,1,H,W], H,W >= 1", fn,
                         prob->name, ocr_shape_str(prob->shape, sb, sizeof sb));
    if (!(cfg->thresh >= 0 && cfg->thresh <= 1) || !isfinite(cfg->box_thresh) || !(cfg->unclip_ratio > 0) ||
        !isfinite(cfg->unclip_ratio) || !(cfg->poly_epsilon >= 0) || !isfinite(cfg->poly_epsilon) || cfg->max_candidates < 0 ||
        cfg->min_size < 0 || (cfg->mode != OCR_POST_BOX && cfg->mode != OCR_POST_POLYGON) ||
        (cfg->score_mode != OCR_SCORE_FAST && cfg->score_mode != OCR_SCORE_SLOW) ||
        !(cfg->split_thresh == 0 || (cfg->split_thresh > cfg->thresh && cfg->split_thresh <= 1)))
        return ocr_error(ctx, OCR_EINVAL,
                         "%s: bad config: thresh %g (0..1), box_thresh %g, unclip_ratio %g (> 0), poly_epsilon %g (>= 0), "
                         "max_candidates %d, min_size %d (>= 0), mode %d, score_mode %d, split_thresh %g (0, or above thresh to 1)",
                         fn, cfg->thresh, cfg->box_thresh, cfg->unclip_ratio, cfg->poly_epsilon, cfg->max_candidates, cfg->min_size,
                         cfg->mode, cfg->score_mode, cfg->split_thresh);
    if (dest_width < 1 || dest_height < 1 || dest_width > (1 << 24) || dest_height > (1 << 24))
        return ocr_error(ctx, OCR_EINVAL, "%s: original image size %dx%d must be 1..2^24 on each side", fn, dest_width, dest_height);
    pred = (const float *)prob->data;
    if (!(img = ocr_contour_frame(ctx, (int)W, (int)H))) return ctx->last_status;
    /* an out-of-range value is reported by ocr_check_range, which finds the same first one */
    if (!ocr__binarize(pred, W, H, cfg->thresh, img)) return ocr_check_range(ctx, fn, prob, 0.0, 1.0);
    memset(&contours, 0, sizeof contours);
    memset(&w, 0, sizeof w);
    out->n = out->n_points = 0;
    rc = cfg->split_thresh > 0 ? ocr__split_regions(ctx, fn, pred, W, H, cfg->split_thresh, (int64_t)cfg->min_size * cfg->min_size, img) : OCR_OK;
    if (rc == OCR_OK) rc = ocr_find_contours_framed(ctx, img, (int)W, (int)H, &contours);
    n_cand = contours.n_polys < cfg->max_candidates ? contours.n_polys : cfg->max_candidates;
    for (c = 0; c < n_cand && rc == OCR_OK; first += contours.counts[c], c++) {
        const ocr_point *cpts = contours.pts + first;
        int cn = contours.counts[c], k;
        ocr_point box[4], mapped[4];
        float side;
        double score;
        if (cfg->mode == OCR_POST_BOX) {
            if ((rc = ocr_min_area_box_work(ctx, cpts, cn, box, &side, &w.rect, &w.rect_cap))) break;
            if (side < (float)cfg->min_size) continue;
            rc = cfg->score_mode == OCR_SCORE_FAST ? ocr__box_score(ctx, &w, pred, (int)W, (int)H, box, 4, &score)
                                                   : ocr__box_score(ctx, &w, pred, (int)W, (int)H, cpts, cn, &score);
            if (rc || cfg->box_thresh > score) continue;
            if ((rc = ocr__unclip(ctx, &w, box, 4, cfg->unclip_ratio)) || w.grown.n_pts == 0) continue;
            /* Every piece of the offset together, as the official reshape(-1, 1, 2) does. */
            if ((rc = ocr_min_area_box_work(ctx, w.grown.pts, w.grown.n_pts, box, &side, &w.rect, &w.rect_cap))) break;
            if (side < (float)(cfg->min_size + 2)) continue;
            /* float32 arithmetic and np.round (half to even), as numpy does it on the float32 box. */
            for (k = 0; k < 4; k++) {
                float x = rintf(box[k].x / (float)W * (float)dest_width), y = rintf(box[k].y / (float)H * (float)dest_height);
                mapped[k].x = x < 0 ? 0 : x > (float)dest_width ? (float)dest_width : x;
                mapped[k].y = y < 0 ? 0 : y > (float)dest_height ? (float)dest_height : y;
            }
            rc = ocr__dets_push(ctx, out, mapped, 4, (float)score);
        } else {
            int an;
            if ((rc = ocr__post_reserve_pts(ctx, &w, cn))) break;
            if ((rc = ocr_approx_poly(ctx, cpts, cn, cfg->poly_epsilon * ocr_contour_arc_length(cpts, cn), w.pts, &an))) break;
            if (an < 4) continue;
            {
                /* the approximation is needed again after unclip reuses w.pts */
                ocr_point *approx = (ocr_point *)OCR_MALLOC(sizeof(ocr_point) * (size_t)an);
                if (!approx) { rc = ocr_error(ctx, OCR_ENOMEM, "%s: cannot allocate %d points", fn, an); break; }
                memcpy(approx, w.pts, sizeof(ocr_point) * (size_t)an);
                rc = cfg->score_mode == OCR_SCORE_FAST ? ocr__box_score(ctx, &w, pred, (int)W, (int)H, approx, an, &score)
                                                       : ocr__box_score(ctx, &w, pred, (int)W, (int)H, cpts, cn, &score);
                if (!rc && !(cfg->box_thresh > score)) rc = ocr__unclip(ctx, &w, approx, an, cfg->unclip_ratio);
                else score = -1.0;
                OCR_FREE(approx);
            }
            /* A split (or vanished) offset is dropped, as the official code drops len(box) > 1. */
            if (rc || score < 0 || w.grown.n_polys != 1) continue;
            if ((rc = ocr_min_area_box_work(ctx, w.grown.pts, w.grown.n_pts, box, &side, &w.rect, &w.rect_cap))) break;
            if (side < (float)(cfg->min_size + 2)) continue;
            for (k = 0; k < w.grown.n_pts; k++) {
                double x = rint((double)w.grown.pts[k].x / (double)W * dest_width), y = rint((double)w.grown.pts[k].y / (double)H * dest_height);
                w.grown.pts[k].x = (float)(x < 0 ? 0 : x > dest_width ? dest_width : x);
                w.grown.pts[k].y = (float)(y < 0 ? 0 : y > dest_height ? dest_height : y);
            }
            rc = ocr__dets_push(ctx, out, w.grown.pts, w.grown.n_pts, (float)score);
        }
    }
    ocr_polyset_free(&contours);
    ocr__post_work_free(&w);
    if (rc) { out->n = out->n_points = 0; return rc; }
    for (c = 0, first = 0; c < out->n; first += out->polys[c].n_points, c++) out->polys[c].points = out->point_buf + first;
    return OCR_OK;
}

OCRDEF int ocr_detections_write_icdar(ocr_ctx *ctx, const char *path, const ocr_detections *d, int with_scores) {
    const char *fn = "ocr_detections_write_icdar";
    char *buf = NULL;
    int cap = 0, len = 0, i, k, rc;
    if (!path || !d) return ocr_error(ctx, OCR_EINVAL, "%s: path and detections must not be NULL", fn);
    for (i = 0; i < d->n; i++) {
        /* 2 x 12 characters per point, a score and a newline bound one line */
        char *grown = (char *)ocr__post_grow(ctx, fn, buf, &cap, (int64_t)len + 24 * (int64_t)d->polys[i].n_points + 32, 1, &rc);
        if (!grown) {
            OCR_FREE(buf);
            return rc;
        }
        buf = grown;
        for (k = 0; k < d->polys[i].n_points; k++)
            len += snprintf(buf + len, (size_t)(cap - len), "%s%lld,%lld", k ? "," : "", (long long)d->polys[i].points[k].x,
                            (long long)d->polys[i].points[k].y);
        if (with_scores) len += snprintf(buf + len, (size_t)(cap - len), ",%.6f", d->scores[i]);
        buf[len++] = '\n';
    }
    rc = ocr_write_file_atomic(ctx, path, buf ? buf : "", (size_t)len);
    OCR_FREE(buf);
    return rc;
}

/* ================================================================ [eval] implementation */

OCRDEF void ocr_eval_init(ocr_evaluator *ev) {
    memset(ev, 0, sizeof *ev);
    ev->iou_thresh = 0.5;
    ev->dontcare_thresh = 0.5;
}

OCRDEF int ocr_eval_add_image(ocr_ctx *ctx, ocr_evaluator *ev, const ocr_polygon *gt, int n_gt, const ocr_polygon *det, int n_det,
                              ocr_eval_counts *image) {
    return ocr_eval_add_image_matched(ctx, ev, gt, n_gt, det, n_det, image, NULL);
}

OCRDEF int ocr_eval_add_image_matched(ocr_ctx *ctx, ocr_evaluator *ev, const ocr_polygon *gt, int n_gt, const ocr_polygon *det,
                                      int n_det, ocr_eval_counts *image, int *det_match) {
    const char *fn = "ocr_eval_add_image";
    ocr_eval_counts cnt;
    /* per polygon: 0 dropped, 1 care, 2 don't care; then 1 once matched */
    unsigned char *gt_kind, *det_kind, *gt_used, *det_used;
    double *det_area;
    void *box_work = NULL;   /* ocr_min_area_box_work's, for the heights */
    size_t box_cap = 0;
    int i, j, rc = OCR_OK;
    if (!ev || n_gt < 0 || n_det < 0 || (n_gt && !gt) || (n_det && !det))
        return ocr_error(ctx, OCR_EINVAL, "%s: bad arguments (evaluator %p, %d GT at %p, %d detections at %p)", fn, (void *)ev, n_gt,
                         (const void *)gt, n_det, (const void *)det);
    for (i = 0; i < n_gt + n_det && !rc; i++) {
        const ocr_polygon *p = i < n_gt ? &gt[i] : &det[i - n_gt];
        char what[48];
        snprintf(what, sizeof what, i < n_gt ? "GT %d" : "detection %d", i < n_gt ? i : i - n_gt);
        rc = ocr_poly_check(ctx, fn, what, p->points, p->n_points);
    }
    if (rc) return rc;
    memset(&cnt, 0, sizeof cnt);
    if (det_match) for (j = 0; j < n_det; j++) det_match[j] = -1;
    gt_kind = (unsigned char *)OCR_MALLOC((size_t)2 * (n_gt + n_det) + 1);
    det_area = (double *)OCR_MALLOC(sizeof(double) * ((size_t)n_det + 1));
    if (!gt_kind || !det_area) {
        OCR_FREE(gt_kind); OCR_FREE(det_area);
        return ocr_error(ctx, OCR_ENOMEM, "%s: cannot allocate for %d GT and %d detections", fn, n_gt, n_det);
    }
    det_kind = gt_kind + n_gt;
    gt_used = det_kind + n_det;
    det_used = gt_used + n_gt;
    memset(gt_used, 0, (size_t)(n_gt + n_det));
    for (i = 0; i < n_gt; i++) {
        gt_kind[i] = ocr_poly_is_simple(gt[i].points, gt[i].n_points) ? (gt[i].ignore ? 2 : 1) : 0;
        if (!gt_kind[i]) cnt.gt_invalid++;
        else if (gt_kind[i] == 2) cnt.gt_dontcare++;
        else cnt.gt_care++;
    }
    for (j = 0; j < n_det && !rc; j++) {
        det_kind[j] = ocr_poly_is_simple(det[j].points, det[j].n_points) ? 1 : 0;
        if (!det_kind[j]) { cnt.det_invalid++; continue; }
        det_area[j] = fabs(ocr_poly_area(det[j].points, det[j].n_points));
        for (i = 0; i < n_gt && det_kind[j] == 1; i++) {
            double inter;
            if (gt_kind[i] != 2) continue;
            if ((rc = ocr_poly_intersection_area(ctx, gt[i].points, gt[i].n_points, det[j].points, det[j].n_points, &inter))) break;
            if ((det_area[j] == 0 ? 0.0 : inter / det_area[j]) > ev->dontcare_thresh) det_kind[j] = 2;
        }
        if (det_kind[j] == 2) cnt.det_dontcare++;
        else cnt.det_care++;
    }
    /* greedy: GT in order, each taking the first free detection with IoU above the threshold */
    for (i = 0; i < n_gt && !rc; i++) {
        double gt_area;
        ocr_point box[4];
        float height;
        int bin;
        if (gt_kind[i] != 1) continue;
        gt_area = fabs(ocr_poly_area(gt[i].points, gt[i].n_points));
        if ((rc = ocr_min_area_box_work(ctx, gt[i].points, gt[i].n_points, box, &height, &box_work, &box_cap))) break;
        bin = ocr_eval_height_bin(height);
        cnt.gt_care_by_height[bin]++;
        for (j = 0; j < n_det; j++) {
            double inter, uni;
            if (det_kind[j] != 1 || det_used[j] || gt_used[i]) continue;
            if ((rc = ocr_poly_intersection_area(ctx, det[j].points, det[j].n_points, gt[i].points, gt[i].n_points, &inter))) break;
            uni = gt_area + det_area[j] - inter;
            if (uni > 0 && inter / uni > ev->iou_thresh) {
                gt_used[i] = det_used[j] = 1;
                if (det_match) det_match[j] = i;
                cnt.matched++;
                cnt.matched_by_height[bin]++;
            }
        }
    }
    OCR_FREE(gt_kind);
    OCR_FREE(det_area);
    OCR_FREE(box_work);
    if (rc) return rc;
    ev->total.gt_care += cnt.gt_care;
    ev->total.det_care += cnt.det_care;
    ev->total.matched += cnt.matched;
    ev->total.gt_dontcare += cnt.gt_dontcare;
    ev->total.det_dontcare += cnt.det_dontcare;
    ev->total.gt_invalid += cnt.gt_invalid;
    ev->total.det_invalid += cnt.det_invalid;
    for (i = 0; i < OCR_EVAL_HEIGHT_BINS; i++) {
        ev->total.gt_care_by_height[i] += cnt.gt_care_by_height[i];
        ev->total.matched_by_height[i] += cnt.matched_by_height[i];
    }
    ev->n_images++;
    if (image) *image = cnt;
    return OCR_OK;
}

OCRDEF ocr_eval_result ocr_eval_finish(const ocr_evaluator *ev) {
    ocr_eval_result r;
    int i;
    r.recall = ev->total.gt_care ? (double)ev->total.matched / (double)ev->total.gt_care : 0.0;
    r.precision = ev->total.det_care ? (double)ev->total.matched / (double)ev->total.det_care : 0.0;
    /* the official expression order, so that the value is the same to the last bit */
    r.hmean = r.recall + r.precision > 0 ? 2.0 * r.recall * r.precision / (r.recall + r.precision) : 0.0;
    for (i = 0; i < OCR_EVAL_HEIGHT_BINS; i++)
        r.recall_by_height[i] =
            ev->total.gt_care_by_height[i] ? (double)ev->total.matched_by_height[i] / (double)ev->total.gt_care_by_height[i] : 0.0;
    return r;
}

OCRDEF int ocr_eval_height_bin(double height) {
    return height < 16.0 ? OCR_EVAL_H_LT16 : height <= 32.0 ? OCR_EVAL_H_16_32 : OCR_EVAL_H_GT32;
}

OCRDEF const char *ocr_eval_height_bin_name(int bin) {
    static const char *const names[OCR_EVAL_HEIGHT_BINS] = {"h_lt16", "h16_32", "h_gt32"};
    return bin >= 0 && bin < OCR_EVAL_HEIGHT_BINS ? names[bin] : NULL;
}

#ifdef __cplusplus
}
#endif
#endif /* OCR_DBNET_IMPLEMENTATION */
