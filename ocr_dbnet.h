/* ocr_dbnet.h - DBNet: ResNet backbone, FPN neck, DB head, target maps, post-processing, ICDAR evaluation.
   v0.1  MIT

   Do this in exactly one C or C++ file:
       #define OCR_DBNET_IMPLEMENTATION       (OCR_IMPLEMENTATION turns on every module)
       #include "ocr_dbnet.h"
   Dependencies: ocr_tensor.h, ocr_nn.h, ocr_loss.h.
*/
#ifndef OCR_DBNET_H
#define OCR_DBNET_H
#include "ocr_tensor.h"
#include "ocr_nn.h"
#include "ocr_loss.h"
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
       ocr_dbnet_free(&m); */

typedef struct {
    int depth;          /* ResNet depth: 18 or 34 */
    float width;        /* channel multiplier in (0, 4]: c channels become max(8, 8 * round(c * width / 8)) */
    float k;            /* steepness of the approximate binary map sigmoid(k (P - T)) the loss builds; official 50 */
    float prior_prob;   /* in (0, 1): the probability head's last bias starts at logit(prior_prob) (0.03 lets a
                           from-scratch model start learning within minutes); 0: PyTorch's default init (official) */
    float bn_momentum;  /* BatchNorm running-statistics momentum, 0.1 */
    float bn_eps;       /* BatchNorm epsilon, 1e-5 */
} ocr_dbnet_config;

/* Internal plan of the network, built by ocr_dbnet_init: activations and the ops between them. */
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

typedef struct {
    int kind;           /* OCR__DB_CONV, ... */
    int in[4], n_in, out, aux;  /* activations; aux: the argmax of a max pool */
    int w, b, mean, var;        /* parameter indices, -1 when absent (BN: w = gamma, b = beta) */
    size_t stats;               /* BN: offset of save_mean, then save_invstd, in bn_stats */
    int kernel, stride, pad, factor;
    int mode, decoder;          /* when it runs; decoder ops use the SegDetector initialisation */
    int relu;                   /* BN: a ReLU fused into the op (its output is the ReLU's) */
} ocr__dbnet_op;

typedef struct ocr_dbnet {
    ocr_dbnet_config cfg;
    ocr_params params;            /* every weight, bias and BN running statistic, with PyTorch names */
    int64_t num_batches_tracked;  /* training forwards done; written as each BN's num_batches_tracked */
    /* internals */
    ocr__dbnet_act *acts;
    ocr__dbnet_op *ops;
    int n_acts, n_ops, cap_acts, cap_ops;
    float *bn_stats;              /* save_mean and save_invstd of every BN for the backward */
    float *values, *grads;        /* activation values and gradients: two arenas in which each holds a range only while
                                     live (ocr__db_layout); they grow to the largest need seen */
    size_t values_cap, grads_cap; /* in floats */
    int share_off;                /* every value and gradient gets a range of its own (the tests compare the two) */
    int recompute_off;            /* training keeps what the backward reads instead of recomputing some (the tests compare the two) */
    int layout_key;               /* the layout acts[].off, goff hold: 0 none, else 1 + training + 2 share_off + 4 recompute_off */
    size_t layout_need[2];        /* its units of values and of gradients (an input [N,3,H,W] has N H W / 1024 floats each) */
    float *relu_dy;               /* off the CPU: the ReLU-masked gradient of a BN+ReLU, which only the CPU fuses */
    size_t relu_dy_cap;
    float *bn_folded;             /* eval on the CPU: one convolution's weights and bias with its BN folded in */
    size_t bn_folded_cap;
    int bn_fold_off;              /* eval runs each BN as its own op instead (the tests compare the two) */
    int64_t N, H, W;              /* input of the last forward */
    int state;                    /* 0: no forward yet, 1: after a training forward, 2: after an eval forward */
    int act_input, act_prob_logits, act_thresh, act_prob;
    /* optional profiling: with a clock (seconds) and 2 * n_ops doubles, forward adds each op's time to
       op_seconds[op] and backward to op_seconds[n_ops + op] */
    double (*op_clock)(void);
    double *op_seconds;
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
   differs from the model's, a missing tensor, a shape mismatch or an unknown tensor; on failure the model is
   unchanged. */
OCRDEF int ocr_dbnet_load(ocr_ctx *ctx, ocr_dbnet *m, const char *path);
/* Loads a torchvision ResNet state_dict saved as safetensors (conv1.weight, layer1.0.bn1.running_mean, ...) into
   the backbone; fc.* and num_batches_tracked entries are ignored. Needs the matching depth and width 1 (ImageNet). */
OCRDEF int ocr_dbnet_load_backbone(ocr_ctx *ctx, ocr_dbnet *m, const char *path);

/* ================================================================ [geometry] declarations */

/* A list of polygons in one buffer: polygon i has counts[i] points starting at pts + sum(counts[0..i)).
   Zero-initialise before first use; functions that fill one replace its contents and reuse its memory. */
typedef struct { ocr_point *pts; int *counts; int n_polys, n_pts, cap_pts, cap_polys; } ocr_polyset;
OCRDEF void ocr_polyset_free(ocr_polyset *ps);
OCRDEF double ocr_poly_area(const ocr_point *pts, int n);        /* signed shoelace area, > 0 when clockwise on screen */
OCRDEF double ocr_poly_perimeter(const ocr_point *pts, int n);
/* Offsets a closed polygon by delta pixels with round joins, as pyclipper's PyclipperOffset with JT_ROUND and
   ET_CLOSEDPOLYGON (delta > 0 grows, < 0 shrinks; a shrink may split or erase the polygon). As pyclipper, the
   input is truncated toward zero to integers (orientation does not matter) and the output has integer vertices:
   outer pieces have area > 0, holes area < 0, ordered as pyclipper usually orders them (lowest bottom first), so
   piece 0 is what DBNet's `Execute(d)[0]` takes. Rings that touch at a point (a hole pinched onto its outer
   ring, two pieces meeting at a corner) come out as one ring through that point twice, as pyclipper's do.
   Fewer than 3 distinct points give an empty set. */
OCRDEF int ocr_poly_offset(ocr_ctx *ctx, const ocr_point *pts, int n, double delta, ocr_polyset *out);

/* Largest |coordinate| (and |delta|) the geometry accepts: integer predicates stay exact and every offset
   result stays exactly representable in a float. */
#define OCR_POLY_MAX_COORD 4194304.0
/* OCR_OK when pts holds n >= 0 points (pts may be NULL only for n = 0), each coordinate finite and within
   +-OCR_POLY_MAX_COORD; else an error naming fn, the polygon `what` and the first bad point. */
OCRDEF int ocr_poly_check(ocr_ctx *ctx, const char *fn, const char *what, const ocr_point *pts, int n);
/* Orientation normalisation of DBNet's validate_polygons: reverses pts in place when the polygon runs
   counter-clockwise on screen (area < 0). Returns 1 when it reversed. */
OCRDEF int ocr_poly_make_clockwise(ocr_point *pts, int n);
/* cv2.fillPoly(img, [pts.astype(np.int32)], value) on a height x width F32 plane: vertices truncated toward zero,
   pixel centres at integer coordinates, the boundary (8-connected lines between the vertices) included and
   the interior filled by the even-odd rule; everything outside the plane is clipped. n may be 1 or 2 (a point,
   a line). */
OCRDEF int ocr_poly_fill(ocr_ctx *ctx, float *img, int height, int width, const ocr_point *pts, int n, float value);
/* Distance from (px, py) to the edge a-b as DBNet's threshold map measures it: distance to the edge's line
   when the point lies inside the circle with a-b as diameter, else distance to the nearer endpoint (this
   over-estimates near the ends by up to ~0.15 px in the D-band). The official code computes
   sqrt(1 - cos^2) with cos rounding slightly above 1 for points on the edge, giving NaN ("black dots",
   MhLiao/DB#302); here the cosine is clamped, so the result is always finite and 0 on the edge. |a-b|^2 is
   rounded to float as the official code does. */
OCRDEF double ocr_dbnet_edge_distance(double px, double py, ocr_point a, ocr_point b);

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


/* ================================================================ [postprocess] declarations */

/* Probability map -> text detections, step for step as the official DBNet SegDetectorRepresenter (and
   PaddleOCR's DBPostProcess for the slow score): binarize (p > thresh), border following (cv2.findContours,
   RETR_LIST, CHAIN_APPROX_SIMPLE), minimum-area rectangle (get_mini_boxes), box score, unclip with
   ocr_poly_offset, size filters, then mapping to the original image size with round-half-to-even and
   clipping to [0, size]. */
enum { OCR_POST_BOX = 0, OCR_POST_POLYGON = 1 };      /* output: 4-point boxes or approximated polygons */
enum { OCR_SCORE_FAST = 0, OCR_SCORE_SLOW = 1 };      /* mean inside the rectangle/polygon, or inside the contour */
typedef struct {
    float thresh;          /* 0.3: a pixel is text when p > thresh (compared in float, as torch does) */
    double box_thresh;     /* 0.6: candidates scoring below are dropped */
    double unclip_ratio;   /* 1.5 in box mode, 2.0 in polygon mode (hard-coded there by the official code) */
    double poly_epsilon;   /* polygon mode: approxPolyDP epsilon as a fraction of the contour perimeter (0.01) */
    int max_candidates;    /* 1000: only the first contours (in OpenCV's order) are considered */
    int min_size;          /* 3: rectangles with a shorter side are dropped; min_size + 2 after unclipping */
    int mode;              /* OCR_POST_BOX or OCR_POST_POLYGON */
    int score_mode;        /* OCR_SCORE_FAST or OCR_SCORE_SLOW */
} ocr_post_config;
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

/* The building blocks, usable alone. */
/* Borders of the non-zero regions of a width x height bitmap, outer and hole borders alike, with the points,
   start points and order of cv2.findContours(RETR_LIST, CHAIN_APPROX_SIMPLE) (Suzuki-Abe border following,
   8-connectivity). out must be zeroed or hold an earlier result (replaced). */
OCRDEF int ocr_find_contours(ocr_ctx *ctx, const uint8_t *bitmap, int width, int height, ocr_polyset *out);
/* Minimum-area enclosing rectangle of a point set (rotating calipers over the convex hull), corners ordered
   TL, TR, BR, BL as the official get_mini_boxes; *short_side = its shorter side (0 for fewer than 3 hull points).
   For integer-valued points (contours, unclipped boxes) the corners are cv2.boxPoints(cv2.minAreaRect(pts)) to
   the bit: the same hull order, float32 calipers, centre/size/angle and corners rebuilt from them, so a corner
   meant to lie on an integer comes out a few 1e-6 off exactly when OpenCV's does (it truncates later). */
OCRDEF int ocr_min_area_box(ocr_ctx *ctx, const ocr_point *pts, int n, ocr_point box[4], float *short_side);
/* Douglas-Peucker approximation of a closed integer contour, as cv2.approxPolyDP(closed=True): the same
   start point, kept vertices and final collinear clean-up. out has room for n points; *n_out receives the count. */
OCRDEF int ocr_approx_poly(ocr_ctx *ctx, const ocr_point *pts, int n, double epsilon, ocr_point *out, int *n_out);
/* cv2.arcLength of a closed integer contour: float32 segment lengths summed in double, the perimeter polygon mode
   scales into approxPolyDP's epsilon. Kept apart from ocr_poly_perimeter because that epsilon must match OpenCV's
   to the last bit. */
OCRDEF double ocr_contour_arc_length(const ocr_point *pts, int n);

/* ================================================================ [eval] declarations */

/* ICDAR 2015 IoU protocol as the official DBNet DetectionIoUEvaluator: polygons that are not valid simple
   polygons are dropped; a detection whose intersection with a don't-care GT exceeds dontcare_thresh of its own
   area is don't-care; GT and detections are matched one-to-one, greedily in index order (GT outer, detection
   inner), when IoU > iou_thresh (strictly); global precision = matched / care detections, recall = matched /
   care GT, hmean = 2PR / (P + R). */
typedef struct {
    int64_t gt_care, det_care, matched;
    int64_t gt_dontcare, det_dontcare;   /* valid polygons excluded as don't care */
    int64_t gt_invalid, det_invalid;     /* polygons dropped as not valid and simple */
} ocr_eval_counts;
typedef struct {
    double iou_thresh;        /* 0.5 */
    double dontcare_thresh;   /* 0.5 */
    ocr_eval_counts total;    /* sums over the images added */
    int64_t n_images;
} ocr_evaluator;
typedef struct { double precision, recall, hmean; } ocr_eval_result;

OCRDEF void ocr_eval_init(ocr_evaluator *ev);
/* Adds one image: gt polygons with their ignore flags (don't care), detections (ignore flags unused).
   image, when not NULL, receives this image's counts. Non-finite coordinates are an error. */
OCRDEF int ocr_eval_add_image(ocr_ctx *ctx, ocr_evaluator *ev, const ocr_polygon *gt, int n_gt, const ocr_polygon *det,
                              int n_det, ocr_eval_counts *image);
OCRDEF ocr_eval_result ocr_eval_finish(const ocr_evaluator *ev);   /* 0 where a denominator is 0 */

/* 1 when the closed polygon is valid and simple as shapely sees it: at least 3 distinct vertices, no edge
   touching or crossing a non-adjacent edge, no spike (an edge folding back onto the previous one). */
OCRDEF int ocr_poly_is_simple(const ocr_point *pts, int n);
/* Exact area of the intersection of two simple polygons, convex or not, of either orientation. */
OCRDEF int ocr_poly_intersection_area(ocr_ctx *ctx, const ocr_point *a, int na, const ocr_point *b, int nb, double *area);

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
    ocr_dbnet *m = b->m;
    ocr__dbnet_act *a;
    void *arr;
    if (b->rc || !(arr = ocr__db_grow(b, m->acts, &m->cap_acts, m->n_acts, sizeof *a))) return 0;
    m->acts = (ocr__dbnet_act *)arr;
    a = &m->acts[m->n_acts];
    memset(a, 0, sizeof *a);
    snprintf(a->name, sizeof a->name, "%s", name);
    a->channels = channels;
    a->div = div;
    a->alias = alias;
    a->flags = flags;
    a->mode = b->mode;
    return m->n_acts++;
}

static ocr__dbnet_op *ocr__db_op(ocr__db_build *b, int kind, int out) {
    ocr_dbnet *m = b->m;
    ocr__dbnet_op *op;
    void *arr;
    if (b->rc || !(arr = ocr__db_grow(b, m->ops, &m->cap_ops, m->n_ops, sizeof *op))) return NULL;
    m->ops = (ocr__dbnet_op *)arr;
    op = &m->ops[m->n_ops++];
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
    cin = b->m->acts[x].channels;
    div = transposed ? b->m->acts[x].div / stride : b->m->acts[x].div * stride;
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
    c = b->m->acts[x].channels;
    y = ocr__db_act(b, name, c, b->m->acts[x].div, -1, 0);
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
    y = ocr__db_act(b, name, b->m->acts[x].channels, b->m->acts[x].div, alias, flags);
    if (!(op = ocr__db_op(b, kind, y))) return 0;
    op->in[0] = x; op->in[1] = x2; op->n_in = kind == OCR__DB_ADD ? 2 : 1;
    return y;
}

static int ocr__db_upsample(ocr__db_build *b, const char *name, int x, int factor) {
    int y;
    ocr__dbnet_op *op;
    if (b->rc) return 0;
    y = ocr__db_act(b, name, b->m->acts[x].channels, b->m->acts[x].div / factor, -1, 0);
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
    if (!b->rc && (stride != 1 || b->m->acts[x].channels != cout)) {
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
    if (!b->rc) b->m->acts[y].flags |= OCR__DB_ACT_RECOMPUTE;
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
    b->m->act_input = x = ocr__db_act(b, "input", 3, 1, -1, OCR__DB_ACT_NOGRAD);
    x = ocr__db_conv(b, "backbone.conv1", x, ocr__db_scaled(64, cfg->width), 7, 2, 3, 0, 0);
    if (!b->rc) b->m->acts[x].flags |= OCR__DB_ACT_RECOMPUTE;
    x = ocr__db_bn(b, "backbone.bn1", x, 1);
    argmax = ocr__db_act(b, "backbone.maxpool.argmax", b->rc ? 0 : b->m->acts[x].channels, 4, -1, OCR__DB_ACT_I32 | OCR__DB_ACT_NOGRAD);
    if (!b->rc) {
        int y = ocr__db_act(b, "backbone.maxpool", b->m->acts[x].channels, 4, -1, 0);
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
    b->m->act_prob_logits = ocr__db_head(b, "decoder.binarize", fuse, q);
    b->mode = OCR__DB_TRAIN;
    thresh_logits = ocr__db_head(b, "decoder.thresh", fuse, q);
    b->m->act_thresh = ocr__db_pointwise(b, OCR__DB_SIGMOID, "thresh", thresh_logits, -1, thresh_logits, 0);
    b->mode = OCR__DB_EVAL;
    b->m->act_prob = ocr__db_pointwise(b, OCR__DB_SIGMOID, "prob", b->m->act_prob_logits, -1, b->m->act_prob_logits, OCR__DB_ACT_NOGRAD);
    if (!b->rc) snprintf(b->m->acts[b->m->act_prob_logits].name, OCR_NAME_MAX, "prob_logits");
}

/* Official initialisation (DBNET_REFERENCE section 1.5). PyTorch's kaiming fans: a conv weight [Cout,Cin,k,k] has
   fan_in Cin*k*k and fan_out Cout*k*k; a transposed conv weight [Cin,Cout,k,k] has "fan_in" Cout*k*k. */
static int ocr__db_init_weights(ocr_ctx *ctx, ocr_dbnet *m) {
    int i, rc;
    for (i = 0; i < m->n_ops; i++) {
        const ocr__dbnet_op *op = &m->ops[i];
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
    ocr_device dev;
    if (!m) return;
    dev = m->params.device;
    ocr_params_free(&m->params);
    OCR_FREE(m->acts);
    OCR_FREE(m->ops);
    ocr_floats_free(m->bn_stats, dev);
    ocr_floats_free(m->values, dev);
    ocr_floats_free(m->grads, dev);
    ocr_floats_free(m->relu_dy, dev);
    ocr_floats_free(m->bn_folded, dev);
    memset(m, 0, sizeof *m);
}

OCRDEF int ocr_dbnet_init(ocr_ctx *ctx, ocr_dbnet *m, const ocr_dbnet_config *cfg) {
    ocr__db_build b;
    size_t n_stats = 0;
    int i, rc;
    memset(m, 0, sizeof *m);
    if (!cfg) return ocr_error(ctx, OCR_EINVAL, "ocr_dbnet_init: cfg is NULL (start from ocr_dbnet_config_default())");
    if ((rc = ocr__db_check_config(ctx, "ocr_dbnet_init", cfg))) return rc;
    m->cfg = *cfg;
    ocr_params_init(&m->params);
    memset(&b, 0, sizeof b);
    b.ctx = ctx;
    b.m = m;
    ocr__db_build_plan(&b);
    if ((rc = b.rc) || (rc = ocr_params_alloc(ctx, &m->params))) { ocr_dbnet_free(m); return rc; }
    for (i = 0; i < m->n_ops; i++)
        if (m->ops[i].kind == OCR__DB_BN) { m->ops[i].stats = n_stats; n_stats += 2 * (size_t)m->acts[m->ops[i].out].channels; }
    /* drawn on the host, so a device model starts from exactly the CPU model's weights */
    if ((rc = ocr__db_init_weights(ctx, m)) || (rc = ocr_params_to_device(ctx, &m->params, ctx->device))) { ocr_dbnet_free(m); return rc; }
    if (!(m->bn_stats = ocr_floats_alloc(ctx, ctx->device, n_stats, "bn_stats"))) { rc = ctx->last_status; ocr_dbnet_free(m); return rc; }
    return OCR_OK;
}

/* ---- running the plan ---- */

/* Op i is a convolution whose output only the BN right after it reads (eval may run the two as one). */
static int ocr__db_conv_bn_pair(const ocr_dbnet *m, int i) {
    const ocr__dbnet_op *op = &m->ops[i];
    int j, k;
    if (i + 1 >= m->n_ops || (op->kind != OCR__DB_CONV && op->kind != OCR__DB_CONVT) || m->ops[i + 1].kind != OCR__DB_BN ||
        m->ops[i + 1].in[0] != op->out)
        return 0;
    for (j = 0; j < m->n_ops; j++)
        for (k = 0; k < m->ops[j].n_in; k++)
            if (j != i + 1 && m->ops[j].in[k] == op->out) return 0;
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
static size_t ocr__db_unit(const ocr_dbnet *m) { return (size_t)m->N * (size_t)(m->H / 32) * (size_t)(m->W / 32); }

/* The op that writes activation a, or -1 (the input). */
static int ocr__db_producer(const ocr_dbnet *m, int a) {
    int i;
    for (i = 0; i < m->n_ops; i++) if (m->ops[i].out == a) return i;
    return -1;
}

/* Whether this layout computes activation a again for the backward instead of keeping it: in a training step on the
   CPU, a BN+ReLU output or a convolution output marked OCR__DB_ACT_RECOMPUTE that nothing computes in place into. */
static int ocr__db_recomputable(const ocr_dbnet *m, int a, int training) {
    int i, p = ocr__db_producer(m, a);
    if (!training || m->recompute_off || m->params.device != OCR_DEVICE_CPU || m->acts[a].alias >= 0 || p < 0) return 0;
    for (i = 0; i < m->n_acts; i++) if (m->acts[i].alias == a) return 0;
    if (m->ops[p].kind == OCR__DB_BN) return m->ops[p].relu;
    return (m->ops[p].kind == OCR__DB_CONV || m->ops[p].kind == OCR__DB_CONVT) && (m->acts[a].flags & OCR__DB_ACT_RECOMPUTE);
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
   instead of 353 MiB per image for a pointwise pass per BN and three small convolutions (within the noise in time: bench_recompute).
   A gradient lives from the first backward that accumulates into it (gfirst: it is zeroed just before) to the
   backward of the op that produced its activation; some share a range by being computed in place (galias).
   Offsets are in units (ocr__db_unit) rounded to 16 (64-byte aligned views), laid out once per mode; so the floats
   needed (need[0] values, need[1] gradients) scale with N H W, and a smaller input fits where a larger one did. */
static int ocr__db_layout(ocr_ctx *ctx, const char *fn, ocr_dbnet *m, int64_t N, int64_t H, int64_t W, int training, size_t need[2]) {
    const int n = m->n_ops, na = m->n_acts, forever = 2 * n + 1;
    const int key = 1 + (training != 0) + 2 * (m->share_off != 0) + 4 * (m->recompute_off != 0);
    ocr__db_range *r, *v, *g, **live;
    size_t bytes, unit;
    int i, k, n_v = 0, n_g = 0;
    if (m->layout_key != key) {
        m->layout_key = 0;
        /* r[a], r[na + a], r[2 na + a]: lifetimes of activation a's value, gradient and recomputed value; v and g: the
           ranges to place (values and recomputed values, gradients) */
        if (!ocr_size_mul(6 * (size_t)na, sizeof *r + sizeof *live, &bytes) ||
            !(r = (ocr__db_range *)ocr_ctx_scratch(ctx, OCR_SCRATCH_OP0, bytes)))
            return ocr_error(ctx, OCR_ENOMEM, "%s: out of memory laying out the activations", fn);
        v = r + 3 * na;
        g = v + 2 * na;
        live = (ocr__db_range **)(g + na);
        for (i = 0; i < na; i++) {
            const ocr__dbnet_act *a = &m->acts[i];
            for (k = 0; k < 3; k++) {
                ocr__db_range *t = &r[k * na + i];
                t->size = ((size_t)a->channels * (size_t)(32 / a->div) * (size_t)(32 / a->div) + 15) & ~(size_t)15;
                t->t0 = forever; /* not written in this mode (yet) */
                t->t1 = -1;
                t->act = k == 2 ? na + i : i;
            }
            m->acts[i].gfirst = -1;
            m->acts[i].rfirst = -1;
            m->acts[i].galias = -1;
            m->acts[i].recompute = ocr__db_recomputable(m, i, training);
        }
        r[m->act_input].t0 = 0;
        for (i = 0; i < n; i++) {
            const ocr__dbnet_op *op = &m->ops[i];
            int bwd_reads[2] = {-1, -1}; /* activations op's backward reads (besides the argmax) */
            if (!ocr__db_runs(op->mode, training)) continue;
            if (r[op->out].t0 > i) r[op->out].t0 = i;
            if (op->aux >= 0) r[op->aux].t0 = i;
            /* an eval convolution may write the output of the BN after it (ocr__db_fold_forward), whether it folds or not */
            if (!training && ocr__db_conv_bn_pair(m, i)) r[m->ops[i + 1].out].t0 = i;
            for (k = 0; k < op->n_in; k++) if (r[op->in[k]].t1 < i) r[op->in[k]].t1 = i;
            if (!training) continue;
            if (op->kind == OCR__DB_CONV || op->kind == OCR__DB_CONVT || op->kind == OCR__DB_BN) bwd_reads[0] = op->in[0];
            if ((op->kind == OCR__DB_BN && op->relu) || op->kind == OCR__DB_RELU || op->kind == OCR__DB_SIGMOID) bwd_reads[1] = op->out;
            if (op->kind == OCR__DB_MAXPOOL && r[op->aux].t1 < 2 * n - i) r[op->aux].t1 = 2 * n - i;
            for (k = 0; k < 2; k++) {
                int a = bwd_reads[k];
                ocr__db_range *t;
                if (a < 0) continue;
                t = &r[(m->acts[a].recompute ? 2 * na : 0) + a];
                /* ops run backwards: the reader with the largest index computes it, the one with the smallest reads last */
                if (m->acts[a].recompute && t->t0 > 2 * n - i) { t->t0 = 2 * n - i; m->acts[a].rfirst = i; }
                if (t->t1 < 2 * n - i) t->t1 = 2 * n - i;
            }
            for (k = 0; k < op->n_in; k++) { /* ops run backwards, so the last consumer's backward writes first */
                ocr__db_range *t = &r[na + op->in[k]];
                if (m->acts[op->in[k]].flags & OCR__DB_ACT_NOGRAD) continue;
                if (t->t0 > 2 * n - i) { t->t0 = 2 * n - i; m->acts[op->in[k]].gfirst = i; }
            }
            r[na + op->out].t1 = 2 * n - i;
        }
        /* a recomputation reads its op's input at the time it runs: that input is computed again first (same step,
           earlier op) or kept until then. Later ops first, so a chain resolves from its end. */
        for (i = na - 1; i >= 0; i--) {
            const ocr__dbnet_op *op;
            int in;
            if (!m->acts[i].recompute || m->acts[i].rfirst < 0) continue;
            op = &m->ops[ocr__db_producer(m, i)];
            in = op->in[0];
            if (m->acts[in].recompute) {
                ocr__db_range *t = &r[2 * na + in];
                if (t->t0 > r[2 * na + i].t0) { t->t0 = r[2 * na + i].t0; m->acts[in].rfirst = m->acts[i].rfirst; }
                if (t->t1 < r[2 * na + i].t0) t->t1 = r[2 * na + i].t0;
            } else if (r[in].t1 < r[2 * na + i].t0) {
                r[in].t1 = r[2 * na + i].t0;
            }
        }
        if (training) {
            for (k = 0; k < 2; k++) {
                int out = k ? m->act_thresh : m->act_prob_logits;
                r[out].t1 = forever;
                r[na + out].t0 = n; /* seeded with the caller's gradient */
                m->acts[out].gfirst = -1;
            }
        } else {
            r[m->act_prob].t1 = forever;
        }
        /* the input gradient of a BN or ReLU (written in place over the output gradient: the CPU ops' in-place mode) or
           of an addition (equal to the output gradient) shares the output gradient's range when nothing else reads
           the input; a chain (convolution -> BN -> addition -> ReLU) then needs one buffer. Ops run forward here, so
           each range merges into its target before the target merges into the next. Several inputs of an addition
           may share its buffer while their producers' backwards only read it; one that writes in place over it may
           join only if its backward runs after all the others' (the smallest op index), or it would overwrite their
           dy (two BN backwards in place over one addition's gradient). */
        for (i = 0; training && !m->share_off && m->params.device == OCR_DEVICE_CPU && i < n; i++) {
            const ocr__dbnet_op *op = &m->ops[i];
            int in, c, readers, j, kk, prod[4], writes[4], eligible[4], first_reader = n, writer = -1;
            if (op->kind != OCR__DB_BN && op->kind != OCR__DB_RELU && op->kind != OCR__DB_ADD) continue;
            for (in = 0; in < op->n_in; in++) {
                c = op->in[in];
                eligible[in] = prod[in] = writes[in] = 0;
                if ((m->acts[c].flags & OCR__DB_ACT_NOGRAD) || m->acts[c].gfirst != i || c == op->out) continue;
                for (readers = 0, j = 0; j < n; j++) for (kk = 0; kk < m->ops[j].n_in; kk++) readers += m->ops[j].in[kk] == c;
                if (readers != 1) continue;
                for (j = 0; j < i && m->ops[j].out != c; j++) {}
                eligible[in] = 1;
                prod[in] = j;
                writes[in] = j < i && (m->ops[j].kind == OCR__DB_BN || m->ops[j].kind == OCR__DB_RELU) && m->acts[m->ops[j].in[0]].galias >= 0;
                if (!writes[in] && j < first_reader) first_reader = j;
                if (writes[in] && (writer < 0 || j < prod[writer])) writer = in;
            }
            for (in = 0; in < op->n_in; in++) {
                c = op->in[in];
                if (!eligible[in] || (writes[in] && (in != writer || prod[in] > first_reader))) continue;
                m->acts[c].galias = op->out;
                if (r[na + op->out].t0 > r[na + c].t0) r[na + op->out].t0 = r[na + c].t0;
                if (r[na + op->out].t1 < r[na + c].t1) r[na + op->out].t1 = r[na + c].t1;
            }
        }
        /* in-place chains: one range from the first write to the last read of any member (aliases point backwards) */
        for (i = na - 1; i >= 0; i--) {
            int root = m->acts[i].alias;
            if (root < 0 || r[i].t0 == forever) continue;
            if (r[root].t0 > r[i].t0) r[root].t0 = r[i].t0;
            if (r[root].t1 < r[i].t1) r[root].t1 = r[i].t1;
        }
        for (i = 0; i < na; i++) {
            const ocr__db_range *val = &r[i], *grad = &r[na + i];
            if (val->t0 == forever) continue; /* not in this mode */
            if (m->acts[i].alias < 0) {
                v[n_v] = *val;
                if (v[n_v].t1 < v[n_v].t0) v[n_v].t1 = v[n_v].t0; /* written, never read */
                n_v++;
            }
            if (m->acts[i].recompute && m->acts[i].rfirst >= 0) v[n_v++] = r[2 * na + i];
            if (training && grad->t1 >= 0 && !(m->acts[i].flags & OCR__DB_ACT_NOGRAD) && m->acts[i].galias < 0) {
                g[n_g] = *grad;
                if (g[n_g].t0 == forever) g[n_g].t0 = n; /* nothing accumulates into it: the zero seeded with the outputs' */
                n_g++;
            }
        }
        if (m->share_off) {
            for (i = 0; i < n_v; i++) { v[i].t0 = 0; v[i].t1 = forever; }
            for (i = 0; i < n_g; i++) { g[i].t0 = 0; g[i].t1 = forever; }
        }
        m->layout_need[0] = ocr__db_place(v, n_v, live);
        m->layout_need[1] = ocr__db_place(g, n_g, live);
        for (i = 0; i < n_v; i++) {
            if (v[i].act < na) m->acts[v[i].act].off = v[i].off;
            else m->acts[v[i].act - na].roff = v[i].off;
        }
        for (i = 0; i < n_g; i++) m->acts[g[i].act].goff = g[i].off;
        for (i = 0; i < na; i++) {
            int root = i;
            while (m->acts[root].galias >= 0) root = m->acts[root].galias;
            m->acts[i].goff = m->acts[root].goff;
        }
        for (i = 0; i < na; i++)
            if (m->acts[i].alias >= 0) m->acts[i].off = m->acts[m->acts[i].alias].off;
        m->layout_key = key;
    }
    if (!ocr_size_mul((size_t)N, (size_t)(H / 32), &unit) || !ocr_size_mul(unit, (size_t)(W / 32), &unit) ||
        !ocr_size_mul(unit, m->layout_need[0], &need[0]) || !ocr_size_mul(unit, m->layout_need[1], &need[1]))
        return ocr_error(ctx, OCR_EOVERFLOW, "%s: the activations of input [%lld,3,%lld,%lld] are too large", fn, (long long)N,
                         (long long)H, (long long)W);
    m->N = N; m->H = H; m->W = W;
    return OCR_OK;
}

static int ocr__db_reserve(ocr_ctx *ctx, const char *fn, const ocr_dbnet *m, float **buf, size_t *cap, size_t need) {
    size_t bytes;
    if (need <= *cap && *buf) return OCR_OK;
    if (!ocr_size_mul(need ? need : 1, sizeof(float), &bytes)) return ocr_error(ctx, OCR_EOVERFLOW, "%s: buffer too large", fn);
    ocr_floats_free(*buf, m->params.device);
    *cap = 0;
    if (!(*buf = ocr_floats_alloc(ctx, m->params.device, need, "activations")))
        return ocr_error(ctx, ctx->last_status, "%s: cannot allocate %zu bytes of activations on %s", fn, bytes, ocr_device_name(m->params.device));
    *cap = need;
    return OCR_OK;
}

static ocr_shape ocr__db_shape(const ocr_dbnet *m, int a) {
    const ocr__dbnet_act *t = &m->acts[a];
    return ocr_shape4(m->N, t->channels, m->H / t->div, m->W / t->div);
}

static ocr_tensor ocr__db_val(const ocr_dbnet *m, int a) {
    const ocr__dbnet_act *t = &m->acts[a];
    return ocr_tensor_view(t->name, (t->flags & OCR__DB_ACT_I32) ? OCR_I32 : OCR_F32, m->params.device, ocr__db_shape(m, a),
                           m->values + ocr__db_unit(m) * t->off);
}

/* The value a backward reads: the recomputed copy where the layout does not keep it. */
static ocr_tensor ocr__db_val_bwd(const ocr_dbnet *m, int a) {
    ocr_tensor t = ocr__db_val(m, a);
    if (m->acts[a].recompute) t.data = m->values + ocr__db_unit(m) * m->acts[a].roff;
    return t;
}

static ocr_tensor ocr__db_grad(const ocr_dbnet *m, int a) {
    char name[OCR_NAME_MAX];
    snprintf(name, sizeof name, "%.88s.grad", m->acts[a].name);
    return ocr_tensor_view(name, OCR_F32, m->params.device, ocr__db_shape(m, a), m->grads + ocr__db_unit(m) * m->acts[a].goff);
}

/* save_mean (which 0) or save_invstd (1) of a BN op */
static ocr_tensor ocr__db_bn_stat(const ocr_dbnet *m, const ocr__dbnet_op *op, int which) {
    int64_t c = m->acts[op->out].channels;
    return ocr_tensor_view(which ? "save_invstd" : "save_mean", OCR_F32, m->params.device, ocr_shape1(c), m->bn_stats + op->stats + which * c);
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
    case OCR__DB_MAXPOOL: {
        ocr_tensor idx = ocr__db_val(m, op->aux);
        return ocr_nn_maxpool2d_forward(ctx, &x, op->kernel, op->stride, op->pad, &y, &idx);
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
    const ocr__dbnet_op *op = &m->ops[ocr__db_producer(m, a)];
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
    ocr_tensor x = ocr__db_val_bwd(m, op->in[0]), dy = ocr__db_grad(m, op->out);
    ocr_tensor dx = ocr__db_grad(m, op->in[0]);
    ocr_tensor *dxp = (m->acts[op->in[0]].flags & OCR__DB_ACT_NOGRAD) ? NULL : &dx;
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
            ocr_tensor y = ocr__db_val(m, op->out), masked = ocr_tensor_view("relu_dy", OCR_F32, m->params.device, dy.shape, m->relu_dy);
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
        return ocr_nn_add_backward(ctx, &dy, m->acts[op->in[0]].galias >= 0 ? NULL : &dx, m->acts[op->in[1]].galias >= 0 ? NULL : &dx2);
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
    return !training && !m->bn_fold_off && m->params.device == OCR_DEVICE_CPU && ocr__db_conv_bn_pair(m, i);
}

static int ocr__db_fold_forward(ocr_ctx *ctx, ocr_dbnet *m, const ocr__dbnet_op *conv, const ocr__dbnet_op *bn) {
    ocr_tensor x = ocr__db_val(m, conv->in[0]), y = ocr__db_val(m, bn->out), w = ocr_params_value(&m->params, conv->w), wf, bf;
    const float *gamma = (const float *)ocr_params_value(&m->params, bn->w).data, *beta = (const float *)ocr_params_value(&m->params, bn->b).data;
    const float *mean = (const float *)ocr_params_value(&m->params, bn->mean).data, *var = (const float *)ocr_params_value(&m->params, bn->var).data;
    const float *bias = conv->b >= 0 ? (const float *)ocr_params_value(&m->params, conv->b).data : NULL;
    ocr_conv_params cp = ocr_conv_params_make(conv->stride, conv->pad, 1, 1);
    int64_t cout = m->acts[bn->out].channels, n_w = ocr_tensor_numel(&w), taps = w.shape.dim[2] * w.shape.dim[3], i, t, c;
    float *wd, *scale;
    int rc;
    if ((rc = ocr__db_reserve(ctx, "ocr_dbnet_forward", m, &m->bn_folded, &m->bn_folded_cap, (size_t)(n_w + 2 * cout)))) return rc;
    wd = m->bn_folded;
    scale = wd + n_w + cout;
    for (c = 0; c < cout; c++) {
        scale[c] = (float)(1.0 / sqrt((double)var[c] + (double)m->cfg.bn_eps)) * gamma[c]; /* as the BN op computes it */
        wd[n_w + c] = beta[c] - mean[c] * scale[c] + (bias ? bias[c] * scale[c] : 0.0f);
    }
    /* blocks of taps floats: [Cout, Cin] for a convolution, [Cin, Cout] for a transposed one */
    for (i = 0; i < n_w / taps; i++) {
        float s = scale[conv->kind == OCR__DB_CONV ? i / w.shape.dim[1] : i % w.shape.dim[1]];
        for (t = 0; t < taps; t++) wd[i * taps + t] = ((const float *)w.data)[i * taps + t] * s;
    }
    wf = ocr_tensor_f32("bn_folded.weight", w.shape, wd);
    bf = ocr_tensor_f32("bn_folded.bias", ocr_shape1(cout), wd + n_w);
    if (conv->kind == OCR__DB_CONV)
        return bn->relu ? ocr_nn_conv2d_relu_forward(ctx, &x, &wf, &bf, cp, &y) : ocr_nn_conv2d_forward(ctx, &x, &wf, &bf, cp, &y);
    if ((rc = ocr_nn_conv_transpose2d_forward(ctx, &x, &wf, &bf, cp, &y)) || !bn->relu) return rc;
    return ocr_nn_relu_forward(ctx, &y, &y);
}

/* Puts "fn: layer 'name': " in front of the message an ocr_nn op left. */
static int ocr__db_layer_error(ocr_ctx *ctx, const char *fn, const ocr_dbnet *m, const ocr__dbnet_op *op, int rc) {
    char msg[OCR_ERROR_MAX];
    snprintf(msg, sizeof msg, "%s", ctx->last_error);
    return ocr_error(ctx, rc, "%s: layer '%s': %s", fn, m->acts[op->out].name, msg);
}

/* The model's buffers are on one device and every op runs on ctx's. */
static int ocr__db_same_device(ocr_ctx *ctx, const char *fn, const ocr_dbnet *m) {
    if (ctx->device == m->params.device) return OCR_OK;
    return ocr_error(ctx, OCR_EDEVICE, "%s: the model lives on %s but the context runs on %s (ocr_dbnet_init the model with a context of "
                     "the device it is to run on)", fn, ocr_device_name(m->params.device), ocr_device_name(ctx->device));
}

OCRDEF int ocr_dbnet_forward(ocr_ctx *ctx, ocr_dbnet *m, const ocr_tensor *x, int training, ocr_tensor *prob, ocr_tensor *thresh) {
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
    m->state = OCR__DB_IDLE; /* until this forward completes, backward must refuse */
    if ((rc = ocr__db_layout(ctx, fn, m, N, H, W, training, need)) ||
        (rc = ocr__db_reserve(ctx, fn, m, &m->values, &m->values_cap, need[0])))
        return rc;
    in = ocr__db_val(m, m->act_input);
    if ((rc = ocr_tensor_copy(ctx, &in, x))) return rc; /* the explicit upload of a host input */
    for (i = 0; i < m->n_ops; i++) {
        const ocr__dbnet_op *op = &m->ops[i];
        double t0 = m->op_seconds && m->op_clock ? m->op_clock() : 0.0;
        if (ocr__db_runs(op->mode, training) && ocr__db_foldable(m, i, training)) {
            if ((rc = ocr__db_fold_forward(ctx, m, op, &m->ops[i + 1]))) return ocr__db_layer_error(ctx, fn, m, op, rc);
            if (m->op_seconds && m->op_clock) m->op_seconds[i] += m->op_clock() - t0;
            i++; /* the BN ran inside the convolution */
            continue;
        }
        if (ocr__db_runs(op->mode, training) && (rc = ocr__db_op_forward(ctx, m, op, training))) return ocr__db_layer_error(ctx, fn, m, op, rc);
        if (m->op_seconds && m->op_clock) m->op_seconds[i] += m->op_clock() - t0;
    }
    if (training) m->num_batches_tracked++;
    m->state = training ? OCR__DB_AFTER_TRAIN : OCR__DB_AFTER_EVAL;
    *prob = ocr__db_val(m, training ? m->act_prob_logits : m->act_prob);
    if (thresh) {
        if (training) *thresh = ocr__db_val(m, m->act_thresh);
        else memset(thresh, 0, sizeof *thresh);
    }
    return OCR_OK;
}

OCRDEF int ocr_dbnet_backward(ocr_ctx *ctx, ocr_dbnet *m, const ocr_tensor *d_prob_logits, const ocr_tensor *d_thresh) {
    const char *fn = "ocr_dbnet_backward";
    const ocr_tensor *ds[2];
    int outs[2], i, k, rc;
    if (!m || !m->params.allocated) return ocr_error(ctx, OCR_EINVAL, "%s: needs a model from ocr_dbnet_init", fn);
    if ((rc = ocr__db_same_device(ctx, fn, m))) return rc;
    if (m->state != OCR__DB_AFTER_TRAIN)
        return ocr_error(ctx, OCR_ESTATE, "%s: needs a successful training-mode ocr_dbnet_forward first (%s)", fn,
                         m->state == OCR__DB_AFTER_EVAL ? "the last forward was in eval mode"
                         : m->state == OCR__DB_AFTER_BACKWARD ? "the last one's backward already ran, and it reuses the activations' memory as it goes"
                         : "no forward since init, a failed one, or a failed backward");
    ds[0] = d_prob_logits; ds[1] = d_thresh;
    outs[0] = m->act_prob_logits; outs[1] = m->act_thresh;
    for (i = 0; i < 2; i++) {
        if (!ds[i]) continue;
        if ((rc = ocr_check_f32(ctx, fn, ds[i])) || (rc = ocr_check_shape(ctx, fn, ds[i], ocr__db_shape(m, outs[i]))) ||
            (rc = ocr_check_finite(ctx, fn, ds[i])))
            return rc;
    }
    m->state = OCR__DB_IDLE; /* from here on the activations are consumed: a failed backward needs a new forward too */
    /* the training forward laid out the gradients too */
    if ((rc = ocr__db_reserve(ctx, fn, m, &m->grads, &m->grads_cap, ocr__db_unit(m) * m->layout_need[1]))) return rc;
    if (m->params.device != OCR_DEVICE_CPU) {
        size_t most = 0;
        for (i = 0; i < m->n_ops; i++)
            if (m->ops[i].kind == OCR__DB_BN && m->ops[i].relu && (size_t)ocr_shape_numel(ocr__db_shape(m, m->ops[i].out)) > most)
                most = (size_t)ocr_shape_numel(ocr__db_shape(m, m->ops[i].out));
        if ((rc = ocr__db_reserve(ctx, fn, m, &m->relu_dy, &m->relu_dy_cap, most))) return rc;
    }
    /* gradients share memory, so each starts from zero where it begins to live: the seeds first */
    for (i = 0; i < m->n_acts; i++) {
        ocr_tensor g = ocr__db_grad(m, i);
        if (ocr__db_runs(m->acts[i].mode, 1) && !(m->acts[i].flags & OCR__DB_ACT_NOGRAD) && m->acts[i].gfirst < 0 &&
            (rc = ocr_tensor_zero(ctx, &g)))
            return rc;
    }
    for (i = 0; i < 2; i++) {
        ocr_tensor g;
        if (!ds[i]) continue;
        g = ocr__db_grad(m, outs[i]);
        if ((rc = ocr_tensor_copy(ctx, &g, ds[i]))) return rc;
    }
    for (i = m->n_ops - 1; i >= 0; i--) {
        const ocr__dbnet_op *op = &m->ops[i];
        double t0 = m->op_seconds && m->op_clock ? m->op_clock() : 0.0;
        if (!ocr__db_runs(op->mode, 1)) continue;
        for (k = 0; k < op->n_in; k++) {
            ocr_tensor g = ocr__db_grad(m, op->in[k]);
            if (m->acts[op->in[k]].gfirst == i && m->acts[op->in[k]].galias < 0 && (rc = ocr_tensor_zero(ctx, &g))) return rc;
        }
        for (k = 0; k < m->n_acts; k++) /* activations are numbered in forward order: a chain's inputs come first */
            if (m->acts[k].recompute && m->acts[k].rfirst == i && (rc = ocr__db_recompute(ctx, m, k))) return ocr__db_layer_error(ctx, fn, m, op, rc);
        if ((rc = ocr__db_op_backward(ctx, m, op))) return ocr__db_layer_error(ctx, fn, m, op, rc);
        if (m->op_seconds && m->op_clock) m->op_seconds[m->n_ops + i] += m->op_clock() - t0;
    }
    m->state = OCR__DB_AFTER_BACKWARD;
    return OCR_OK;
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
    views = (ocr_tensor *)OCR_MALLOC((size_t)(m->params.count + m->n_ops) * sizeof *views);
    ptrs = (const ocr_tensor **)OCR_MALLOC((size_t)(m->params.count + m->n_ops) * sizeof *ptrs);
    nbt = (int64_t *)OCR_MALLOC((size_t)m->n_ops * sizeof *nbt);
    if (!views || !ptrs || !nbt) { rc = ocr_error(ctx, OCR_ENOMEM, "%s: out of memory", fn); goto done; }
    for (i = 0; i < P->count; i++) { views[n] = ocr_params_value(P, i); ptrs[n] = &views[n]; n++; }
    for (i = 0; i < m->n_ops; i++) {
        char name[OCR_NAME_MAX];
        ocr_shape scalar;
        if (m->ops[i].kind != OCR__DB_BN) continue;
        memset(&scalar, 0, sizeof scalar);
        nbt[i] = m->num_batches_tracked;
        ocr__db_nbt_name(m, &m->ops[i], name, sizeof name);
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
    int i, j, found = 0;
    for (i = 0; i < st->n_entries; i++) {
        const ocr_safetensors_entry *e = &st->entries[i];
        int known = ocr_params_find(&m->params, e->name) >= 0;
        for (j = 0; j < m->n_ops && !known; j++) {
            char name[OCR_NAME_MAX];
            if (m->ops[j].kind != OCR__DB_BN) continue;
            ocr__db_nbt_name(m, &m->ops[j], name, sizeof name);
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
    m->state = OCR__DB_IDLE; /* saved activations belong to the old weights */
done:
    ocr_params_free(&staged);
    ocr_safetensors_close(&st);
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
        m->state = OCR__DB_IDLE;
    }
    ocr_safetensors_close(&st);
    return rc;
}

/* ================================================================ [geometry] implementation */

#define OCR__GEOM_PI 3.14159265358979323846
#define OCR__NO_RAW INT32_MAX /* arrangement node that is no vertex of the raw outline */

OCRDEF void ocr_polyset_free(ocr_polyset *ps) {
    if (!ps) return;
    OCR_FREE(ps->pts);
    OCR_FREE(ps->counts);
    memset(ps, 0, sizeof *ps);
}

/* Grows *p (capacity *cap elements of elem bytes) to hold need elements; 0 on overflow or no memory. */
static int ocr__geom_grow(void **p, int *cap, int64_t need, size_t elem) {
    int64_t c = *cap ? *cap : 16;
    size_t bytes;
    void *q;
    if (need <= *cap) return 1;
    while (c < need) c *= 2;
    if (c > INT32_MAX || !ocr_size_mul((size_t)c, elem, &bytes)) return 0;
    q = OCR_REALLOC(*p, bytes);
    if (!q) return 0;
    *p = q;
    *cap = (int)c;
    return 1;
}

/* Appends a polygon given as n interleaved integer-valued doubles. */
static int ocr__polyset_push(ocr_ctx *ctx, const char *fn, ocr_polyset *ps, const int64_t *xy, int n) {
    int i;
    if (!ocr__geom_grow((void **)&ps->counts, &ps->cap_polys, (int64_t)ps->n_polys + 1, sizeof(int)) ||
        !ocr__geom_grow((void **)&ps->pts, &ps->cap_pts, (int64_t)ps->n_pts + n, sizeof(ocr_point)))
        return ocr_error(ctx, OCR_ENOMEM, "%s: cannot grow the output polygon set to %lld points", fn, (long long)ps->n_pts + n);
    for (i = 0; i < n; i++) {
        ps->pts[ps->n_pts + i].x = (float)xy[2 * i];
        ps->pts[ps->n_pts + i].y = (float)xy[2 * i + 1];
    }
    ps->counts[ps->n_polys++] = n;
    ps->n_pts += n;
    return OCR_OK;
}

OCRDEF double ocr_poly_area(const ocr_point *pts, int n) {
    double s = 0.0;
    int i;
    if (!pts || n < 3) return 0.0;
    for (i = 0; i < n; i++) {
        const ocr_point *a = &pts[i], *b = &pts[i + 1 < n ? i + 1 : 0];
        s += (double)a->x * b->y - (double)b->x * a->y;
    }
    return 0.5 * s;
}

OCRDEF double ocr_poly_perimeter(const ocr_point *pts, int n) {
    double s = 0.0;
    int i;
    if (!pts || n < 2) return 0.0;
    for (i = 0; i < n; i++) {
        const ocr_point *a = &pts[i], *b = &pts[i + 1 < n ? i + 1 : 0];
        double dx = (double)b->x - a->x, dy = (double)b->y - a->y;
        s += sqrt(dx * dx + dy * dy);
    }
    return s;
}

OCRDEF int ocr_poly_check(ocr_ctx *ctx, const char *fn, const char *what, const ocr_point *pts, int n) {
    int i;
    if (n < 0) return ocr_error(ctx, OCR_EINVAL, "%s: polygon %s has %d points", fn, what, n);
    if (n > 0 && !pts) return ocr_error(ctx, OCR_EINVAL, "%s: polygon %s has %d points but a NULL point array", fn, what, n);
    for (i = 0; i < n; i++) {
        double x = pts[i].x, y = pts[i].y;
        if (!isfinite(x) || !isfinite(y))
            return ocr_error(ctx, OCR_ENONFINITE, "%s: polygon %s has non-finite point %d (%g, %g)", fn, what, i, x, y);
        if (fabs(x) > OCR_POLY_MAX_COORD || fabs(y) > OCR_POLY_MAX_COORD)
            return ocr_error(ctx, OCR_ERANGE, "%s: polygon %s has point %d (%g, %g) beyond +-%g", fn, what, i, x, y,
                             OCR_POLY_MAX_COORD);
    }
    return OCR_OK;
}

OCRDEF int ocr_poly_make_clockwise(ocr_point *pts, int n) {
    int i;
    if (!(ocr_poly_area(pts, n) < 0.0)) return 0;
    for (i = 0; i < n / 2; i++) {
        ocr_point t = pts[i];
        pts[i] = pts[n - 1 - i];
        pts[n - 1 - i] = t;
    }
    return 1;
}

/* ---- offsetting: the outline of every vertex moved along its edges' normals, then its positive-winding region */

/* Clipper's rounding of generated vertices: half away from zero, through a truncating cast. */
static int64_t ocr__clip_round(double v) { return v < 0 ? (int64_t)(v - 0.5) : (int64_t)(v + 0.5); }

typedef struct { int64_t *xy; int n, cap; } ocr__ipath;

static int ocr__ipath_push(ocr__ipath *p, int64_t x, int64_t y) {
    if (!ocr__geom_grow((void **)&p->xy, &p->cap, 2 * ((int64_t)p->n + 1), sizeof(int64_t))) return 0;
    p->xy[2 * p->n] = x;
    p->xy[2 * p->n + 1] = y;
    p->n++;
    return 1;
}

/* Drops consecutive repeats of a closed path in place (the closing repeat too); returns the new count. */
static int ocr__ipath_dedup(int64_t *xy, int n) {
    int i, k = 0;
    while (n > 1 && xy[2 * (n - 1)] == xy[0] && xy[2 * (n - 1) + 1] == xy[1]) n--;
    for (i = 0; i < n; i++) {
        if (k > 0 && xy[2 * i] == xy[2 * (k - 1)] && xy[2 * i + 1] == xy[2 * (k - 1) + 1]) continue;
        xy[2 * k] = xy[2 * i];
        xy[2 * k + 1] = xy[2 * i + 1];
        k++;
    }
    return k;
}

/* The raw outline of an offset by delta of the closed integer path src (n >= 3 distinct points, positive
   orientation). Convex corners get arcs whose sagitta stays within pyclipper's ArcTolerance of 0.25 px;
   reflex corners a small loop through the vertex itself, which the positive-winding pass removes. A vertex
   whose edges are (almost) collinear keeps the previous edge's normal for the next corner, as Clipper does. */
static int ocr__offset_outline(const int64_t *src, int n, double delta, ocr__ipath *raw) {
    double *nrm = (double *)OCR_MALLOC((size_t)n * 2 * sizeof(double));
    double ad = fabs(delta), tol = 0.25, steps, sin_step, cos_step, steps_per_rad;
    int j, k, ok = 1;
    if (!nrm) return 0;
    for (j = 0; j < n; j++) {
        int q = j + 1 < n ? j + 1 : 0;
        double dx = (double)(src[2 * q] - src[2 * j]), dy = (double)(src[2 * q + 1] - src[2 * j + 1]);
        double f = 1.0 / sqrt(dx * dx + dy * dy);
        nrm[2 * j] = dy * f;
        nrm[2 * j + 1] = -dx * f;
    }
    if (tol > ad * 0.25) tol = ad * 0.25;
    steps = OCR__GEOM_PI / acos(1.0 - tol / ad);
    if (steps > ad * OCR__GEOM_PI) steps = ad * OCR__GEOM_PI;
    sin_step = sin(2.0 * OCR__GEOM_PI / steps);
    cos_step = cos(2.0 * OCR__GEOM_PI / steps);
    steps_per_rad = steps / (2.0 * OCR__GEOM_PI);
    if (delta < 0) sin_step = -sin_step;
    for (j = 0, k = n - 1; j < n && ok; j++) {
        double px = (double)src[2 * j], py = (double)src[2 * j + 1];
        double kx = nrm[2 * k], ky = nrm[2 * k + 1], jx = nrm[2 * j], jy = nrm[2 * j + 1];
        double sin_a = kx * jy - jx * ky, cos_a = kx * jx + ky * jy;
        if (fabs(sin_a * delta) < 1.0) {
            if (cos_a > 0) { /* straight on: one point, and k stays */
                ok = ocr__ipath_push(raw, ocr__clip_round(px + kx * delta), ocr__clip_round(py + ky * delta));
                continue;
            }
        } else if (sin_a > 1.0) {
            sin_a = 1.0;
        } else if (sin_a < -1.0) {
            sin_a = -1.0;
        }
        if (sin_a * delta < 0) {
            ok = ocr__ipath_push(raw, ocr__clip_round(px + kx * delta), ocr__clip_round(py + ky * delta)) &&
                 ocr__ipath_push(raw, (int64_t)px, (int64_t)py) &&
                 ocr__ipath_push(raw, ocr__clip_round(px + jx * delta), ocr__clip_round(py + jy * delta));
        } else {
            int64_t i, n_arc = ocr__clip_round(steps_per_rad * fabs(atan2(sin_a, cos_a)));
            double x = kx, y = ky;
            if (n_arc < 1) n_arc = 1;
            for (i = 0; i < n_arc && ok; i++) {
                double x_prev = x;
                ok = ocr__ipath_push(raw, ocr__clip_round(px + x * delta), ocr__clip_round(py + y * delta));
                x = x * cos_step - sin_step * y;
                y = x_prev * sin_step + y * cos_step;
            }
            ok = ok && ocr__ipath_push(raw, ocr__clip_round(px + jx * delta), ocr__clip_round(py + jy * delta));
        }
        k = j;
    }
    OCR_FREE(nrm);
    return ok;
}

/* Horizontal bands over y: each item (an edge with y range [lo, hi]) is listed in every band it touches, so
   crossing tests and rays look at a few items instead of all. */
typedef struct { double y0, scale; int n_bands; int *first, *items; } ocr__bands;

static int ocr__band_of(const ocr__bands *b, double y) {
    double f = (y - b->y0) * b->scale;
    return f <= 0 ? 0 : f >= b->n_bands - 1 ? b->n_bands - 1 : (int)f;
}

static int ocr__bands_build(ocr__bands *b, const double *lo, const double *hi, int n) {
    double ymin = 0, ymax = 0, spans = 0;
    int i, k;
    memset(b, 0, sizeof *b);
    for (i = 0; i < n; i++) {
        if (i == 0 || lo[i] < ymin) ymin = lo[i];
        if (i == 0 || hi[i] > ymax) ymax = hi[i];
    }
    for (i = 0; i < n; i++) spans += hi[i] - lo[i];
    /* spans/height = how many items a horizontal line meets on average; more bands would only copy items */
    b->n_bands = 1;
    if (n > 1 && ymax > ymin) {
        double want = 4.0 * n / (spans / (ymax - ymin) + 1.0);
        b->n_bands = want < 1 ? 1 : want > n ? n : (int)want;
    }
    b->y0 = ymin;
    b->scale = ymax > ymin ? b->n_bands / (ymax - ymin) : 0.0;
    b->first = (int *)OCR_MALLOC(((size_t)b->n_bands + 1) * sizeof(int));
    if (!b->first) return 0;
    memset(b->first, 0, ((size_t)b->n_bands + 1) * sizeof(int));
    for (i = 0; i < n; i++)
        for (k = ocr__band_of(b, lo[i]); k <= ocr__band_of(b, hi[i]); k++) b->first[k + 1]++;
    for (k = 0; k < b->n_bands; k++) b->first[k + 1] += b->first[k];
    b->items = (int *)OCR_MALLOC(((size_t)b->first[b->n_bands] + 1) * sizeof(int));
    if (!b->items) return 0;
    {
        int *fill = (int *)OCR_MALLOC(((size_t)b->n_bands + 1) * sizeof(int));
        if (!fill) return 0;
        memcpy(fill, b->first, ((size_t)b->n_bands + 1) * sizeof(int));
        for (i = 0; i < n; i++)
            for (k = ocr__band_of(b, lo[i]); k <= ocr__band_of(b, hi[i]); k++) b->items[fill[k]++] = i;
        OCR_FREE(fill);
    }
    return 1;
}

static void ocr__bands_free(ocr__bands *b) {
    OCR_FREE(b->first);
    OCR_FREE(b->items);
    memset(b, 0, sizeof *b);
}

/* The planar arrangement of the raw outline: nodes (outline vertices and crossings), each edge split at every
   node on it, coincident pieces merged with their net multiplicity. */
typedef struct { double x, y; int parent, raw; } ocr__gnode;   /* raw: smallest outline index at this node */
typedef struct { int edge, node; double t; } ocr__gsplit;
typedef struct { int a, b, mult; } ocr__gfrag;

typedef struct {
    const int64_t *xy;   /* outline, m points */
    int m;
    int *vnode;          /* node of each outline vertex */
    ocr__gnode *nodes;
    int n_nodes, cap_nodes;
    ocr__gsplit *splits;
    int n_splits, cap_splits;
} ocr__arrangement;

static int ocr__arr_node(ocr__arrangement *g, double x, double y, int raw) {
    ocr__gnode *nd;
    if (!ocr__geom_grow((void **)&g->nodes, &g->cap_nodes, (int64_t)g->n_nodes + 1, sizeof(ocr__gnode))) return -1;
    nd = &g->nodes[g->n_nodes];
    nd->x = x;
    nd->y = y;
    nd->parent = g->n_nodes;
    nd->raw = raw;
    return g->n_nodes++;
}

static int ocr__arr_split(ocr__arrangement *g, int edge, int node, double t) {
    if (!ocr__geom_grow((void **)&g->splits, &g->cap_splits, (int64_t)g->n_splits + 1, sizeof(ocr__gsplit))) return 0;
    g->splits[g->n_splits].edge = edge;
    g->splits[g->n_splits].node = node;
    g->splits[g->n_splits].t = t;
    g->n_splits++;
    return 1;
}

static int ocr__uf_find(ocr__gnode *nodes, int i) {
    while (nodes[i].parent != i) {
        nodes[i].parent = nodes[nodes[i].parent].parent;
        i = nodes[i].parent;
    }
    return i;
}

/* Merges two nodes; an outline vertex (exact coordinates) wins over a computed crossing. */
static void ocr__uf_union(ocr__gnode *nodes, int a, int b) {
    a = ocr__uf_find(nodes, a);
    b = ocr__uf_find(nodes, b);
    if (a == b) return;
    if (nodes[b].raw < nodes[a].raw) { int t = a; a = b; b = t; }
    nodes[b].parent = a;
}

static int64_t ocr__orient(const int64_t *a, const int64_t *b, const int64_t *c) {
    return (b[0] - a[0]) * (c[1] - a[1]) - (b[1] - a[1]) * (c[0] - a[0]);
}

/* For collinear a, b, c: 1 when c lies strictly between a and b. */
static int ocr__strictly_inside(const int64_t *a, const int64_t *b, const int64_t *c) {
    int d = a[0] != b[0] ? 0 : 1;
    int64_t lo = a[d] < b[d] ? a[d] : b[d], hi = a[d] < b[d] ? b[d] : a[d];
    return c[d] > lo && c[d] < hi;
}

static double ocr__param_on(const int64_t *a, const int64_t *b, const int64_t *c) {
    double dx = (double)(b[0] - a[0]), dy = (double)(b[1] - a[1]);
    return ((double)(c[0] - a[0]) * dx + (double)(c[1] - a[1]) * dy) / (dx * dx + dy * dy);
}

/* Records where outline edges i and j meet: a proper crossing, or an endpoint of one inside the other. */
static int ocr__arr_pair(ocr__arrangement *g, int i, int j) {
    int m = g->m, i1 = i + 1 < m ? i + 1 : 0, j1 = j + 1 < m ? j + 1 : 0;
    const int64_t *a = g->xy + 2 * i, *b = g->xy + 2 * i1, *c = g->xy + 2 * j, *d = g->xy + 2 * j1;
    int64_t d1 = ocr__orient(a, b, c), d2 = ocr__orient(a, b, d), d3 = ocr__orient(c, d, a), d4 = ocr__orient(c, d, b);
    if (((d1 > 0 && d2 < 0) || (d1 < 0 && d2 > 0)) && ((d3 > 0 && d4 < 0) || (d3 < 0 && d4 > 0))) {
        double t = (double)d3 / ((double)d3 - (double)d4), u = (double)d1 / ((double)d1 - (double)d2);
        int node = ocr__arr_node(g, (double)a[0] + t * (double)(b[0] - a[0]), (double)a[1] + t * (double)(b[1] - a[1]), OCR__NO_RAW);
        return node >= 0 && ocr__arr_split(g, i, node, t) && ocr__arr_split(g, j, node, u);
    }
    if (d1 == 0 && ocr__strictly_inside(a, b, c) && !ocr__arr_split(g, i, g->vnode[j], ocr__param_on(a, b, c))) return 0;
    if (d2 == 0 && ocr__strictly_inside(a, b, d) && !ocr__arr_split(g, i, g->vnode[j1], ocr__param_on(a, b, d))) return 0;
    if (d3 == 0 && ocr__strictly_inside(c, d, a) && !ocr__arr_split(g, j, g->vnode[i], ocr__param_on(c, d, a))) return 0;
    if (d4 == 0 && ocr__strictly_inside(c, d, b) && !ocr__arr_split(g, j, g->vnode[i1], ocr__param_on(c, d, b))) return 0;
    return 1;
}

typedef struct { double x, y; int id; } ocr__gkey;

static int ocr__gkey_cmp(const void *pa, const void *pb) {
    const ocr__gkey *a = (const ocr__gkey *)pa, *b = (const ocr__gkey *)pb;
    if (a->x != b->x) return a->x < b->x ? -1 : 1;
    if (a->y != b->y) return a->y < b->y ? -1 : 1;
    return (a->id > b->id) - (a->id < b->id);
}

static int ocr__gsplit_cmp(const void *pa, const void *pb) {
    const ocr__gsplit *a = (const ocr__gsplit *)pa, *b = (const ocr__gsplit *)pb;
    if (a->edge != b->edge) return a->edge < b->edge ? -1 : 1;
    return (a->t > b->t) - (a->t < b->t);
}

static int ocr__gfrag_cmp(const void *pa, const void *pb) {
    const ocr__gfrag *a = (const ocr__gfrag *)pa, *b = (const ocr__gfrag *)pb;
    if (a->a != b->a) return a->a < b->a ? -1 : 1;
    return (a->b > b->b) - (a->b < b->b);
}

/* One traced boundary cycle: where its points start in the cycle buffer, and the order key. */
typedef struct { int start, count; int64_t bottom, left; } ocr__gcycle;

/* pyclipper's order is Clipper's creation order, and Clipper sweeps from the bottom of the screen up: the
   piece reaching lowest first; pieces ending on one row (typically a border the polygon was clipped to)
   left to right. Measured against pyclipper this picks the same first piece in ~85% of the rare shrinks that
   split (vertex-exact; most misses differ by a 1 px rounding of a crossing). */
static int ocr__gcycle_cmp(const void *pa, const void *pb) {
    const ocr__gcycle *a = (const ocr__gcycle *)pa, *b = (const ocr__gcycle *)pb;
    if (a->bottom != b->bottom) return a->bottom > b->bottom ? -1 : 1;
    if (a->left != b->left) return a->left < b->left ? -1 : 1;
    return (a->start > b->start) - (a->start < b->start);
}

/* Removes, in place, the vertices of a closed integer ring that repeat or lie on the line through their
   neighbours (spikes included) until none is left, as Clipper's output clean-up; returns the new count
   (< 3: nothing left). next, prev: n ints of scratch; stack: 3n. */
static int ocr__ring_clean(int64_t *xy, int n, int *next, int *prev, int *stack) {
    int i, top = 0, alive = n, count = 0;
    for (i = 0; i < n; i++) { next[i] = i + 1 < n ? i + 1 : 0; prev[i] = i ? i - 1 : n - 1; stack[top++] = i; }
    while (top && alive >= 3) {
        int v = stack[--top], p = prev[v], q = next[v];
        if (q < 0) continue; /* already removed */
        if ((xy[2 * v] - xy[2 * p]) * (xy[2 * q + 1] - xy[2 * p + 1]) != (xy[2 * v + 1] - xy[2 * p + 1]) * (xy[2 * q] - xy[2 * p]))
            continue;
        next[p] = q;
        prev[q] = p;
        next[v] = -1;
        alive--;
        stack[top++] = p;
        stack[top++] = q;
    }
    if (alive < 3) return 0;
    /* survivors keep their cyclic order, so copying them forward in index order is safe */
    for (i = 0; i < n; i++)
        if (next[i] >= 0) {
            xy[2 * count] = xy[2 * i];
            xy[2 * count + 1] = xy[2 * i + 1];
            count++;
        }
    return count;
}

/* Union-find root of ring r, halving the path on the way. */
static int ocr__ring_root(int *parent, int r) {
    while (parent[r] != r) {
        parent[r] = parent[parent[r]];
        r = parent[r];
    }
    return r;
}

/* Appends to out the boundary rings of the region where the closed integer outline xy (m >= 3 points) winds
   positively, as Clipper's union with the positive fill rule: the outline is cut at every crossing and touch,
   each piece knows the winding on its two sides (one ray per piece), pieces with text on exactly one side are
   the boundary, and rings are traced keeping the region on the left, then joined where they share a node
   (so a ring touching another at a point comes out as one ring, as Clipper reports it). */
static int ocr__positive_region(ocr_ctx *ctx, const char *fn, const int64_t *xy, int m, ocr_polyset *out) {
    ocr__arrangement g;
    ocr__bands eb, fb;
    ocr__gkey *keys = NULL;
    ocr__gfrag *frags = NULL;
    ocr__gcycle *cycles = NULL;
    double *lo = NULL, *hi = NULL, *angle = NULL;
    int *bfrom = NULL, *bto = NULL, *adj_first = NULL, *adj = NULL, *used = NULL, *ring = NULL, *scratch = NULL;
    int *succ = NULL, *ring_of = NULL, *node_entry = NULL, *ring_root = NULL;
    int64_t *cyc_xy = NULL;
    int n_frags = 0, cap_frags = 0, n_bound = 0, n_cycles = 0, cap_cycles = 0, n_cyc_pts = 0, cap_cyc_xy = 0;
    int n_entries = 0, n_rings = 0;
    int i, k, a, b, rc = OCR_OK;
    const double eps = 1e-6; /* crossings closer than this are one node */
    memset(&g, 0, sizeof g);
    memset(&eb, 0, sizeof eb);
    memset(&fb, 0, sizeof fb);
    g.xy = xy;
    g.m = m;
    g.vnode = (int *)OCR_MALLOC((size_t)m * sizeof(int));
    keys = (ocr__gkey *)OCR_MALLOC((size_t)m * sizeof(ocr__gkey));
    lo = (double *)OCR_MALLOC((size_t)m * sizeof(double));
    hi = (double *)OCR_MALLOC((size_t)m * sizeof(double));
    if (!g.vnode || !keys || !lo || !hi) goto nomem;

    /* nodes of the outline vertices: one per distinct point, remembering the first outline index there */
    for (i = 0; i < m; i++) { keys[i].x = (double)xy[2 * i]; keys[i].y = (double)xy[2 * i + 1]; keys[i].id = i; }
    qsort(keys, (size_t)m, sizeof *keys, ocr__gkey_cmp);
    for (i = 0; i < m; i++) {
        if (i == 0 || keys[i].x != keys[i - 1].x || keys[i].y != keys[i - 1].y)
            if (ocr__arr_node(&g, keys[i].x, keys[i].y, keys[i].id) < 0) goto nomem;
        g.vnode[keys[i].id] = g.n_nodes - 1;
    }

    /* split every edge at its endpoints and wherever another edge meets it */
    for (i = 0; i < m; i++) {
        int i1 = i + 1 < m ? i + 1 : 0;
        lo[i] = (double)(xy[2 * i + 1] < xy[2 * i1 + 1] ? xy[2 * i + 1] : xy[2 * i1 + 1]);
        hi[i] = (double)(xy[2 * i + 1] < xy[2 * i1 + 1] ? xy[2 * i1 + 1] : xy[2 * i + 1]);
        if (!ocr__arr_split(&g, i, g.vnode[i], 0.0) || !ocr__arr_split(&g, i, g.vnode[i1], 1.0)) goto nomem;
    }
    if (!ocr__bands_build(&eb, lo, hi, m)) goto nomem;
    for (k = 0; k < eb.n_bands; k++)
        for (a = eb.first[k]; a < eb.first[k + 1]; a++)
            for (b = a + 1; b < eb.first[k + 1]; b++) {
                int ei = eb.items[a] < eb.items[b] ? eb.items[a] : eb.items[b], ej = eb.items[a] ^ eb.items[b] ^ ei;
                int ki = ocr__band_of(&eb, lo[ei]), kj = ocr__band_of(&eb, lo[ej]);
                int ei1 = ei + 1 < m ? ei + 1 : 0, ej1 = ej + 1 < m ? ej + 1 : 0;
                int64_t ix0 = xy[2 * ei] < xy[2 * ei1] ? xy[2 * ei] : xy[2 * ei1], ix1 = xy[2 * ei] ^ xy[2 * ei1] ^ ix0;
                int64_t jx0 = xy[2 * ej] < xy[2 * ej1] ? xy[2 * ej] : xy[2 * ej1], jx1 = xy[2 * ej] ^ xy[2 * ej1] ^ jx0;
                if (k != (ki > kj ? ki : kj) || ix1 < jx0 || jx1 < ix0 || hi[ei] < lo[ej] || hi[ej] < lo[ei]) continue;
                if (!ocr__arr_pair(&g, ei, ej)) goto nomem;
            }

    /* merge crossings that coincide (three edges through one point) or land on a vertex */
    OCR_FREE(keys);
    keys = (ocr__gkey *)OCR_MALLOC((size_t)g.n_nodes * sizeof(ocr__gkey));
    if (!keys) goto nomem;
    for (i = 0; i < g.n_nodes; i++) { keys[i].x = g.nodes[i].x; keys[i].y = g.nodes[i].y; keys[i].id = i; }
    qsort(keys, (size_t)g.n_nodes, sizeof *keys, ocr__gkey_cmp);
    for (a = 0; a < g.n_nodes; a++)
        for (b = a + 1; b < g.n_nodes && keys[b].x - keys[a].x <= eps; b++)
            if (fabs(keys[b].y - keys[a].y) <= eps) ocr__uf_union(g.nodes, keys[a].id, keys[b].id);

    /* pieces between consecutive nodes along each edge; coincident pieces cancel or add up */
    qsort(g.splits, (size_t)g.n_splits, sizeof *g.splits, ocr__gsplit_cmp);
    for (i = 0; i + 1 < g.n_splits; i++) {
        int na = ocr__uf_find(g.nodes, g.splits[i].node), nb = ocr__uf_find(g.nodes, g.splits[i + 1].node);
        if (g.splits[i].edge != g.splits[i + 1].edge || na == nb) continue;
        if (!ocr__geom_grow((void **)&frags, &cap_frags, (int64_t)n_frags + 1, sizeof *frags)) goto nomem;
        frags[n_frags].a = na < nb ? na : nb;
        frags[n_frags].b = na < nb ? nb : na;
        frags[n_frags].mult = na < nb ? 1 : -1;
        n_frags++;
    }
    qsort(frags, (size_t)n_frags, sizeof *frags, ocr__gfrag_cmp);
    for (i = 0, k = 0; i < n_frags; i++) {
        if (k > 0 && frags[k - 1].a == frags[i].a && frags[k - 1].b == frags[i].b) frags[k - 1].mult += frags[i].mult;
        else frags[k++] = frags[i];
    }
    for (i = 0, n_frags = k, k = 0; i < n_frags; i++) {
        ocr__gfrag f = frags[i];
        if (f.mult == 0) continue;
        if (f.mult < 0) { int t = f.a; f.a = f.b; f.b = t; f.mult = -f.mult; }
        frags[k++] = f;
    }
    n_frags = k;
    if (n_frags == 0) goto done;

    /* winding on both sides of each piece from one ray towards +x through its midpoint; the ray counts an
       edge when its ends lie on different sides of y (ends at exactly y count as above), so shared nodes are
       counted once */
    OCR_FREE(lo);
    OCR_FREE(hi);
    lo = (double *)OCR_MALLOC((size_t)n_frags * sizeof(double));
    hi = (double *)OCR_MALLOC((size_t)n_frags * sizeof(double));
    bfrom = (int *)OCR_MALLOC((size_t)n_frags * sizeof(int));
    bto = (int *)OCR_MALLOC((size_t)n_frags * sizeof(int));
    if (!lo || !hi || !bfrom || !bto) goto nomem;
    for (i = 0; i < n_frags; i++) {
        double ya = g.nodes[frags[i].a].y, yb = g.nodes[frags[i].b].y;
        lo[i] = ya < yb ? ya : yb;
        hi[i] = ya < yb ? yb : ya;
    }
    if (!ocr__bands_build(&fb, lo, hi, n_frags)) goto nomem;
    for (i = 0; i < n_frags; i++) {
        const ocr__gnode *p = &g.nodes[frags[i].a], *q = &g.nodes[frags[i].b];
        double mx = 0.5 * (p->x + q->x), my = 0.5 * (p->y + q->y);
        int wind = 0, kb = ocr__band_of(&fb, my), w_left, w_right, mult = frags[i].mult;
        for (a = fb.first[kb]; a < fb.first[kb + 1]; a++) {
            int o = fb.items[a];
            const ocr__gnode *u = &g.nodes[frags[o].a], *v = &g.nodes[frags[o].b];
            if (o == i || (u->y > my) == (v->y > my)) continue;
            if (u->x + (my - u->y) * (v->x - u->x) / (v->y - u->y) > mx) wind += v->y > u->y ? frags[o].mult : -frags[o].mult;
        }
        /* The ray crosses the piece only if its ends lie on different sides of my by the rule used above: a
           crossing on an axis-parallel edge carries rounding, so a piece can be tilted by an ulp while my rounds
           onto one end. Crossed: the left side of a->b is the one the ray leaves through when a->b heads up (+y).
           Not crossed: the ray runs just above the piece (ends at my count as below), on its +y side. */
        if ((p->y > my) != (q->y > my)) {
            w_left = q->y > p->y ? wind + mult : wind;
            w_right = w_left - mult;
        } else {
            w_left = q->x > p->x ? wind : wind + mult;
            w_right = w_left - mult;
        }
        if ((w_left > 0) == (w_right > 0)) continue;
        bfrom[n_bound] = w_left > 0 ? frags[i].a : frags[i].b;
        bto[n_bound] = w_left > 0 ? frags[i].b : frags[i].a;
        n_bound++;
    }
    if (n_bound == 0) goto done;

    /* trace rings with the region on the left */
    adj_first = (int *)OCR_MALLOC(((size_t)g.n_nodes + 1) * sizeof(int));
    adj = (int *)OCR_MALLOC((size_t)n_bound * sizeof(int));
    used = (int *)OCR_MALLOC((size_t)n_bound * sizeof(int));
    ring = (int *)OCR_MALLOC((size_t)n_bound * sizeof(int));
    succ = (int *)OCR_MALLOC((size_t)n_bound * sizeof(int));
    ring_of = (int *)OCR_MALLOC((size_t)n_bound * sizeof(int));
    angle = (double *)OCR_MALLOC((size_t)n_bound * sizeof(double));
    scratch = (int *)OCR_MALLOC((size_t)n_bound * 5 * sizeof(int));
    if (!adj_first || !adj || !used || !ring || !succ || !ring_of || !angle || !scratch) goto nomem;
    memset(adj_first, 0, ((size_t)g.n_nodes + 1) * sizeof(int));
    for (i = 0; i < n_bound; i++) {
        adj_first[bfrom[i] + 1]++;
        used[i] = 0;
        angle[i] = atan2(g.nodes[bto[i]].y - g.nodes[bfrom[i]].y, g.nodes[bto[i]].x - g.nodes[bfrom[i]].x);
    }
    for (i = 0; i < g.n_nodes; i++) adj_first[i + 1] += adj_first[i];
    for (i = 0; i < n_bound; i++) adj[i] = -1;
    for (i = 0; i < n_bound; i++) {
        int s = adj_first[bfrom[i]];
        while (adj[s] >= 0) s++;
        adj[s] = i;
    }
    /* ring[] takes the nodes of every ring one after the other; succ[] links each entry to the next of its ring */
    for (i = 0; i < n_bound; i++) {
        int e = i, first = n_entries;
        if (used[i]) continue;
        used[i] = 1;
        for (;;) {
            int v = bto[e], best = -1, o;
            double rev = angle[e] + OCR__GEOM_PI, best_cw = 10.0;
            ring[n_entries] = bfrom[e];
            ring_of[n_entries] = n_rings;
            succ[n_entries] = n_entries + 1;
            n_entries++;
            for (o = adj_first[v]; o < adj_first[v + 1]; o++) {
                int c = adj[o];
                double cw = rev - angle[c];
                if (used[c] && c != i) continue;
                if (cw <= 0) cw += 2 * OCR__GEOM_PI;
                if (cw > 2 * OCR__GEOM_PI) cw -= 2 * OCR__GEOM_PI;
                if (cw < best_cw) { best_cw = cw; best = c; }
            }
            if (best < 0) { n_entries = first; break; } /* an open chain: only possible through rounding trouble */
            if (best == i) break;
            used[best] = 1;
            e = best;
        }
        if (n_entries - first < 3) { n_entries = first; continue; }
        succ[n_entries - 1] = first;
        n_rings++;
    }
    /* Rings that share a node (a hole touching its outer ring, pieces meeting at a corner) come out of Clipper
       as one ring through that node twice; measured on approximated contours this matches pyclipper's piece
       count far more often than separate rings. Exchanging the successors of two entries at the same node
       joins their two cycles into one. */
    node_entry = (int *)OCR_MALLOC((size_t)g.n_nodes * sizeof(int));
    ring_root = (int *)OCR_MALLOC(((size_t)n_rings + 1) * sizeof(int));
    if (!node_entry || !ring_root || !ocr__geom_grow((void **)&cyc_xy, &cap_cyc_xy, 2 * (int64_t)n_entries, sizeof(int64_t)) ||
        !ocr__geom_grow((void **)&cycles, &cap_cycles, (int64_t)n_rings + 1, sizeof *cycles))
        goto nomem;
    for (i = 0; i < g.n_nodes; i++) node_entry[i] = -1;
    for (i = 0; i < n_rings; i++) ring_root[i] = i;
    for (k = 0; k < n_entries; k++) {
        int first = node_entry[ring[k]], ra, rb, t;
        if (first < 0) { node_entry[ring[k]] = k; continue; }
        ra = ocr__ring_root(ring_root, ring_of[first]);
        rb = ocr__ring_root(ring_root, ring_of[k]);
        if (ra == rb) continue;
        ring_root[rb] = ra;
        t = succ[first];
        succ[first] = succ[k];
        succ[k] = t;
    }
    for (k = 0; k < n_entries; k++) used[k] = 0;
    for (i = 0; i < n_entries; i++) {
        int len = 0, start = n_cyc_pts, count, at;
        int64_t bottom = 0, left = 0;
        if (used[i]) continue;
        for (at = i; !used[at]; at = succ[at], len++) {
            const ocr__gnode *nd = &g.nodes[ring[at]];
            int64_t x = ocr__clip_round(nd->x), y = ocr__clip_round(nd->y);
            used[at] = 1;
            cyc_xy[2 * (start + len)] = x;
            cyc_xy[2 * (start + len) + 1] = y;
            if (len == 0 || y > bottom || (y == bottom && x < left)) { bottom = y; left = x; }
        }
        count = ocr__ring_clean(cyc_xy + 2 * start, len, scratch, scratch + n_bound, scratch + 2 * n_bound);
        if (count < 3) continue;
        {
            double area2 = 0;
            for (k = 0; k < count; k++) {
                const int64_t *p = cyc_xy + 2 * (start + k), *q = cyc_xy + 2 * (start + (k + 1 < count ? k + 1 : 0));
                area2 += (double)p[0] * (double)q[1] - (double)q[0] * (double)p[1];
            }
            if (area2 == 0) continue;
        }
        cycles[n_cycles].start = start;
        cycles[n_cycles].count = count;
        cycles[n_cycles].bottom = bottom;
        cycles[n_cycles].left = left;
        n_cycles++;
        n_cyc_pts += count;
    }
    qsort(cycles, (size_t)n_cycles, sizeof *cycles, ocr__gcycle_cmp);
    for (i = 0; i < n_cycles && rc == OCR_OK; i++) rc = ocr__polyset_push(ctx, fn, out, cyc_xy + 2 * cycles[i].start, cycles[i].count);
    goto done;
nomem:
    rc = ocr_error(ctx, OCR_ENOMEM, "%s: out of memory while resolving the offset outline of %d points", fn, m);
done:
    ocr__bands_free(&eb);
    ocr__bands_free(&fb);
    OCR_FREE(g.vnode);
    OCR_FREE(g.nodes);
    OCR_FREE(g.splits);
    OCR_FREE(keys);
    OCR_FREE(frags);
    OCR_FREE(cycles);
    OCR_FREE(lo);
    OCR_FREE(hi);
    OCR_FREE(angle);
    OCR_FREE(bfrom);
    OCR_FREE(bto);
    OCR_FREE(adj_first);
    OCR_FREE(adj);
    OCR_FREE(used);
    OCR_FREE(ring);
    OCR_FREE(succ);
    OCR_FREE(ring_of);
    OCR_FREE(node_entry);
    OCR_FREE(ring_root);
    OCR_FREE(scratch);
    OCR_FREE(cyc_xy);
    return rc;
}

OCRDEF int ocr_poly_offset(ocr_ctx *ctx, const ocr_point *pts, int n, double delta, ocr_polyset *out) {
    const char *fn = "ocr_poly_offset";
    int64_t *src = NULL;
    ocr__ipath raw;
    int i, m, rc;
    double twice_area = 0;
    memset(&raw, 0, sizeof raw);
    if (!out) return ocr_error(ctx, OCR_EINVAL, "%s: out is NULL", fn);
    if ((rc = ocr_poly_check(ctx, fn, "pts", pts, n))) return rc;
    if (!isfinite(delta) || fabs(delta) > OCR_POLY_MAX_COORD)
        return ocr_error(ctx, OCR_EINVAL, "%s: delta %g is not finite or beyond +-%g", fn, delta, OCR_POLY_MAX_COORD);
    out->n_polys = 0;
    out->n_pts = 0;
    if (n < 3) return OCR_OK;
    src = (int64_t *)OCR_MALLOC((size_t)n * 2 * sizeof(int64_t));
    if (!src) return ocr_error(ctx, OCR_ENOMEM, "%s: cannot copy a polygon of %d points", fn, n);
    for (i = 0; i < n; i++) { /* pyclipper truncates toward zero */
        src[2 * i] = (int64_t)pts[i].x;
        src[2 * i + 1] = (int64_t)pts[i].y;
    }
    m = ocr__ipath_dedup(src, n);
    if (m < 3) goto done;
    for (i = 0; i < m; i++) { /* Clipper's orientation test: the trapezoid form of the shoelace sum */
        int p = i ? i - 1 : m - 1;
        twice_area -= ((double)src[2 * p] + (double)src[2 * i]) * ((double)src[2 * p + 1] - (double)src[2 * i + 1]);
    }
    if (twice_area < 0)
        for (i = 0; i < m / 2; i++) {
            int64_t tx = src[2 * i], ty = src[2 * i + 1];
            src[2 * i] = src[2 * (m - 1 - i)];
            src[2 * i + 1] = src[2 * (m - 1 - i) + 1];
            src[2 * (m - 1 - i)] = tx;
            src[2 * (m - 1 - i) + 1] = ty;
        }
    if (fabs(delta) < 1e-20) { /* no offset: just the positive region of the path itself */
        for (i = 0; i < m; i++)
            if (!ocr__ipath_push(&raw, src[2 * i], src[2 * i + 1])) break;
        if (i < m) { rc = ocr_error(ctx, OCR_ENOMEM, "%s: out of memory", fn); goto done; }
    } else if (!ocr__offset_outline(src, m, delta, &raw)) {
        rc = ocr_error(ctx, OCR_ENOMEM, "%s: out of memory building the offset outline of %d points", fn, m);
        goto done;
    }
    raw.n = ocr__ipath_dedup(raw.xy, raw.n);
    if (raw.n >= 3) rc = ocr__positive_region(ctx, fn, raw.xy, raw.n, out);
done:
    OCR_FREE(src);
    OCR_FREE(raw.xy);
    return rc;
}

/* ---- rasterisation with cv2.fillPoly's pixel rules */

/* Clips the segment to [0,w-1]x[0,h-1] as OpenCV's clipLine does before drawing: an end outside in y first
   slides along the segment to the nearest row border, then an end outside in x to the column border, each
   shift truncated to an integer. Returns 0 when nothing of the segment is left. */
static int ocr__geom_clip_line(int64_t w, int64_t h, int64_t *x1, int64_t *y1, int64_t *x2, int64_t *y2) {
    int64_t right = w - 1, bottom = h - 1;
    int c1 = (*x1 < 0) + (*x1 > right) * 2 + (*y1 < 0) * 4 + (*y1 > bottom) * 8;
    int c2 = (*x2 < 0) + (*x2 > right) * 2 + (*y2 < 0) * 4 + (*y2 > bottom) * 8;
    if ((c1 & c2) == 0 && (c1 | c2) != 0) {
        if (c1 & 12) {
            int64_t row = c1 < 8 ? 0 : bottom;
            *x1 += (int64_t)((double)(row - *y1) * (double)(*x2 - *x1) / (double)(*y2 - *y1));
            *y1 = row;
            c1 = (*x1 < 0) + (*x1 > right) * 2;
        }
        if (c2 & 12) {
            int64_t row = c2 < 8 ? 0 : bottom;
            *x2 += (int64_t)((double)(row - *y2) * (double)(*x2 - *x1) / (double)(*y2 - *y1));
            *y2 = row;
            c2 = (*x2 < 0) + (*x2 > right) * 2;
        }
        if ((c1 & c2) == 0 && (c1 | c2) != 0) {
            if (c1) {
                int64_t col = c1 == 1 ? 0 : right;
                *y1 += (int64_t)((double)(col - *x1) * (double)(*y2 - *y1) / (double)(*x2 - *x1));
                *x1 = col;
                c1 = 0;
            }
            if (c2) {
                int64_t col = c2 == 1 ? 0 : right;
                *y2 += (int64_t)((double)(col - *x2) * (double)(*y2 - *y1) / (double)(*x2 - *x1));
                *x2 = col;
                c2 = 0;
            }
        }
    }
    return (c1 | c2) == 0;
}

/* An 8-connected Bresenham line as OpenCV's LINE_8, drawn left to right: the major axis advances every step,
   the minor one when the error term is negative before the step. */
static void ocr__geom_line(float *img, int64_t w, int64_t h, int64_t x1, int64_t y1, int64_t x2, int64_t y2, float value) {
    int64_t dx, dy, major, minor, err, i, x, y, sy;
    int steep;
    if (!ocr__geom_clip_line(w, h, &x1, &y1, &x2, &y2)) return;
    if (x2 < x1) {
        int64_t t = x1; x1 = x2; x2 = t;
        t = y1; y1 = y2; y2 = t;
    }
    dx = x2 - x1;
    dy = y2 >= y1 ? y2 - y1 : y1 - y2;
    sy = y2 >= y1 ? 1 : -1;
    steep = dy > dx;
    major = steep ? dy : dx;
    minor = steep ? dx : dy;
    err = major - 2 * minor;
    for (i = 0, x = x1, y = y1; i <= major; i++) {
        int diagonal = err < 0;
        img[y * w + x] = value;
        err += diagonal ? 2 * major - 2 * minor : -2 * minor;
        if (steep) { y += sy; if (diagonal) x++; }
        else { x++; if (diagonal) y += sy; }
    }
}

/* floor(v / 65536) for the 16.16 fixed-point x of the scanline fill */
static int64_t ocr__geom_floor16(int64_t v) { return v >= 0 ? v / 65536 : -((-v + 65535) / 65536); }

typedef struct { int64_t y0, y1, x, dx; } ocr__scan_edge; /* rows [y0, y1), x in 16.16 at row y0, per-row step */

OCRDEF int ocr_poly_fill(ocr_ctx *ctx, float *img, int height, int width, const ocr_point *pts, int n, float value) {
    const char *fn = "ocr_poly_fill";
    ocr__scan_edge *edges;
    int64_t *xs, y, y_lo = 0, y_hi = 0;
    int i, k, n_edges = 0, rc;
    if (!img || height <= 0 || width <= 0)
        return ocr_error(ctx, OCR_EINVAL, "%s: image %p of %d x %d (height x width) is not a plane", fn, (void *)img, height, width);
    if ((rc = ocr_poly_check(ctx, fn, "pts", pts, n))) return rc;
    if (n == 0) return OCR_OK;
    edges = (ocr__scan_edge *)OCR_MALLOC((size_t)n * sizeof *edges);
    xs = (int64_t *)OCR_MALLOC((size_t)n * sizeof *xs);
    if (!edges || !xs) {
        OCR_FREE(edges);
        OCR_FREE(xs);
        return ocr_error(ctx, OCR_ENOMEM, "%s: cannot allocate the edge table of %d points", fn, n);
    }
    for (i = 0; i < n; i++) {
        const ocr_point *p = &pts[i ? i - 1 : n - 1], *q = &pts[i];
        int64_t x0 = (int64_t)p->x, y0 = (int64_t)p->y, x1 = (int64_t)q->x, y1 = (int64_t)q->y; /* astype(int32) */
        ocr__geom_line(img, width, height, x0, y0, x1, y1, value);
        if (y0 == y1) continue;
        edges[n_edges].dx = (x1 - x0) * 65536 / (y1 - y0);
        edges[n_edges].y0 = y0 < y1 ? y0 : y1;
        edges[n_edges].y1 = y0 < y1 ? y1 : y0;
        edges[n_edges].x = (y0 < y1 ? x0 : x1) * 65536;
        if (n_edges == 0 || edges[n_edges].y0 < y_lo) y_lo = edges[n_edges].y0;
        if (n_edges == 0 || edges[n_edges].y1 > y_hi) y_hi = edges[n_edges].y1;
        n_edges++;
    }
    /* rows inside [y0, y1) of each edge; on each row the pixel centres between the 1st-2nd, 3rd-4th...
       crossings, both ends included (the outline drawn above covers what the rounding leaves out) */
    if (n_edges >= 2) {
        if (y_lo < 0) y_lo = 0;
        if (y_hi > height) y_hi = height;
        for (y = y_lo; y < y_hi; y++) {
            int cnt = 0;
            for (i = 0; i < n_edges; i++) {
                int64_t x;
                if (y < edges[i].y0 || y >= edges[i].y1) continue;
                x = edges[i].x + (y - edges[i].y0) * edges[i].dx;
                for (k = cnt++; k > 0 && xs[k - 1] > x; k--) xs[k] = xs[k - 1];
                xs[k] = x;
            }
            for (k = 0; k + 1 < cnt; k += 2) {
                int64_t a = ocr__geom_floor16(xs[k] + 65535), b = ocr__geom_floor16(xs[k + 1]), x;
                if (a >= width || b < 0 || a > b) continue;
                if (a < 0) a = 0;
                if (b >= width) b = width - 1;
                for (x = a; x <= b; x++) img[y * width + x] = value;
            }
        }
    }
    OCR_FREE(edges);
    OCR_FREE(xs);
    return OCR_OK;
}

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


/* ================================================================ [targets] implementation */

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
    ocr_post_config c;
    memset(&c, 0, sizeof c);
    c.thresh = 0.3f;
    c.box_thresh = 0.6;
    c.unclip_ratio = mode == OCR_POST_POLYGON ? 2.0 : 1.5;
    c.poly_epsilon = 0.01;
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

static int ocr__polyset_begin(ocr_ctx *ctx, const char *fn, ocr_polyset *ps) {
    int rc;
    int *counts = (int *)ocr__post_grow(ctx, fn, ps->counts, &ps->cap_polys, (int64_t)ps->n_polys + 1, sizeof(int), &rc);
    if (!counts) return rc;
    ps->counts = counts;
    ps->counts[ps->n_polys++] = 0;
    return OCR_OK;
}

static int ocr__polyset_add_point(ocr_ctx *ctx, const char *fn, ocr_polyset *ps, float x, float y) {
    int rc;
    ocr_point *pts = (ocr_point *)ocr__post_grow(ctx, fn, ps->pts, &ps->cap_pts, (int64_t)ps->n_pts + 1, sizeof(ocr_point), &rc);
    if (!pts) return rc;
    ps->pts = pts;
    ps->pts[ps->n_pts].x = x;
    ps->pts[ps->n_pts].y = y;
    ps->n_pts++;
    ps->counts[ps->n_polys - 1]++;
    return OCR_OK;
}

/* ---------------------------------------------------------------- border following (Suzuki & Abe 1985) */

/* Work-image states. One border label suffices for a flat contour list; "east" marks a border pixel whose
   east neighbour was examined and found background, which stops it from starting a hole border later. */
enum { OCR__PX_BG = 0, OCR__PX_FG = 1, OCR__PX_SEEN = 2, OCR__PX_SEEN_EAST = 3 };
/* Chain codes as OpenCV numbers them: 0 east, then counter-clockwise on screen (y down). */
static const int ocr__chain_dx[8] = {1, 1, 0, -1, -1, -1, 0, 1};
static const int ocr__chain_dy[8] = {0, -1, -1, -1, 0, 1, 1, 1};

/* Follows one border from (x0, y0) of the padded image, emitting only the points where the chain code
   changes (CHAIN_APPROX_SIMPLE). An outer border starts with its west neighbour as background, a hole
   border with its east neighbour. */
static int ocr__follow_border(ocr_ctx *ctx, uint8_t *img, ptrdiff_t stride, int x0, int y0, int is_hole, ocr_polyset *out) {
    const char *fn = "ocr_find_contours";
    ptrdiff_t off[8], start = (ptrdiff_t)y0 * stride + x0, first, cur, next = 0;
    int k, dir, dir_from, last_dir, px = x0, py = y0, rc;
    for (k = 0; k < 8; k++) off[k] = ocr__chain_dx[k] + ocr__chain_dy[k] * stride;
    if ((rc = ocr__polyset_begin(ctx, fn, out))) return rc;
    /* Clockwise from the background neighbour to the first foreground neighbour. */
    dir_from = is_hole ? 0 : 4;
    dir = dir_from;
    do {
        dir = (dir + 7) & 7;
        if (img[start + off[dir]] != OCR__PX_BG) break;
    } while (dir != dir_from);
    if (dir == dir_from) { /* isolated pixel */
        img[start] = OCR__PX_SEEN_EAST;
        return ocr__polyset_add_point(ctx, fn, out, (float)(x0 - 1), (float)(y0 - 1));
    }
    first = start + off[dir];
    cur = start;
    last_dir = dir ^ 4;
    for (;;) {
        /* Counter-clockwise from just after the pixel we came from to the next foreground neighbour. */
        int back = dir, d = dir;
        do {
            d++;
            next = cur + off[d & 7];
        } while (img[next] == OCR__PX_BG);
        dir = d & 7;
        /* The scan passed east (code 0) and found background there iff 1 <= dir <= back. */
        if (dir >= 1 && dir <= back) img[cur] = OCR__PX_SEEN_EAST;
        else if (img[cur] == OCR__PX_FG) img[cur] = OCR__PX_SEEN;
        if (dir != last_dir) {
            if ((rc = ocr__polyset_add_point(ctx, fn, out, (float)(px - 1), (float)(py - 1)))) return rc;
            last_dir = dir;
        }
        px += ocr__chain_dx[dir];
        py += ocr__chain_dy[dir];
        if (next == start && cur == first) break;
        cur = next;
        dir = (dir + 4) & 7;
    }
    return OCR_OK;
}

/* The work image of border following, in ctx's scratch: the bitmap framed by one pixel of background (borders
   touching the image edge then need no bounds checks) plus 8 spare bytes for the word-at-a-time scan. The frame
   is cleared here; the caller writes the interior (OCR__PX_BG or OCR__PX_FG) at img + (y + 1) * (width + 2) + 1. */
static uint8_t *ocr__contour_image(ocr_ctx *ctx, const char *fn, int width, int height) {
    size_t bytes;
    ptrdiff_t stride = (ptrdiff_t)width + 2;
    uint8_t *img;
    int y;
    if (!ocr_size_mul((size_t)width + 2, (size_t)height + 2, &bytes) || !ocr_size_add(bytes, 8, &bytes)) {
        ocr_error(ctx, OCR_EOVERFLOW, "%s: bitmap %dx%d is too large", fn, width, height);
        return NULL;
    }
    if (!(img = (uint8_t *)ocr_ctx_scratch(ctx, OCR_SCRATCH_OP0, bytes))) return NULL;
    memset(img, 0, (size_t)stride);
    memset(img + (height + 1) * stride, 0, (size_t)stride + 8);
    for (y = 1; y <= height; y++) img[y * stride] = img[y * stride + width + 1] = OCR__PX_BG;
    return img;
}

/* Non-zero bytes among the 8 at p (the classic has-a-zero-byte test, inverted where needed). */
static uint64_t ocr__load8(const uint8_t *p) { uint64_t w; memcpy(&w, p, 8); return w; }
static int ocr__has_zero_byte(uint64_t w) { return ((w - 0x0101010101010101ull) & ~w & 0x8080808080808080ull) != 0; }

/* Suzuki & Abe's raster scan as a flat list needs it: an outer border starts at a foreground pixel not yet on
   any border whose west neighbour is background; a hole border at a pixel whose east neighbour is background,
   unless an earlier border already found that background east of it. Following never turns a pixel to or from
   background, so the scan skips runs of background and of foreground 8 bytes at a time. Borders are emitted
   last found first, as OpenCV lists them. */
static int ocr__trace_borders(ocr_ctx *ctx, uint8_t *img, int width, int height, ocr_polyset *out) {
    ptrdiff_t stride = (ptrdiff_t)width + 2;
    int y, i, rc, n_polys, first;
    out->n_polys = out->n_pts = 0;
    for (y = 1; y <= height; y++) {
        uint8_t *row = img + y * stride;
        int x = 1;
        for (;;) {
            while (x <= width && ocr__load8(row + x) == 0) x += 8;
            while (x <= width && row[x] == OCR__PX_BG) x++;
            if (x > width) break;
            if (row[x] == OCR__PX_FG && (rc = ocr__follow_border(ctx, img, stride, x, y, 0, out))) return rc;
            /* the frame ends every run by width + 1 */
            x++;
            while (!ocr__has_zero_byte(ocr__load8(row + x))) x += 8;
            while (row[x] != OCR__PX_BG) x++;
            if ((row[x - 1] == OCR__PX_FG || row[x - 1] == OCR__PX_SEEN) && (rc = ocr__follow_border(ctx, img, stride, x - 1, y, 1, out)))
                return rc;
        }
    }
    /* Reverse the list: all points, then each border's own points back, then the counts. */
    n_polys = out->n_polys;
    for (i = 0; i < out->n_pts / 2; i++) {
        ocr_point t = out->pts[i];
        out->pts[i] = out->pts[out->n_pts - 1 - i];
        out->pts[out->n_pts - 1 - i] = t;
    }
    for (i = 0; i < n_polys / 2; i++) {
        int t = out->counts[i];
        out->counts[i] = out->counts[n_polys - 1 - i];
        out->counts[n_polys - 1 - i] = t;
    }
    for (i = 0, first = 0; i < n_polys; first += out->counts[i], i++) {
        int a = first, b = first + out->counts[i] - 1;
        for (; a < b; a++, b--) { ocr_point t = out->pts[a]; out->pts[a] = out->pts[b]; out->pts[b] = t; }
    }
    return OCR_OK;
}

OCRDEF int ocr_find_contours(ocr_ctx *ctx, const uint8_t *bitmap, int width, int height, ocr_polyset *out) {
    const char *fn = "ocr_find_contours";
    uint8_t *img;
    int x, y, rc;
    if (!bitmap || !out) return ocr_error(ctx, OCR_EINVAL, "%s: bitmap and out must not be NULL", fn);
    if (width < 1 || height < 1 || width > (1 << 24) || height > (1 << 24))
        return ocr_error(ctx, OCR_EINVAL, "%s: bitmap size %dx%d must be 1..2^24 on each side", fn, width, height);
    if (!(img = ocr__contour_image(ctx, fn, width, height))) return ctx->last_status;
    for (y = 0; y < height; y++) {
        uint8_t *dst = img + (ptrdiff_t)(y + 1) * (width + 2) + 1;
        const uint8_t *src = bitmap + (size_t)y * width;
        for (x = 0; x < width; x++) dst[x] = src[x] ? OCR__PX_FG : OCR__PX_BG;
    }
    rc = ocr__trace_borders(ctx, img, width, height, out);
    if (rc) out->n_polys = out->n_pts = 0;
    return rc;
}

/* ---------------------------------------------------------------- minimum-area rectangle */

typedef struct { double x, y; } ocr__dpt;

static double ocr__cross3(ocr__dpt o, ocr__dpt a, ocr__dpt b) { return (a.x - o.x) * (b.y - o.y) - (a.y - o.y) * (b.x - o.x); }

/* The float32 code below reproduces OpenCV's rounding: fused multiply-adds would change it, so contraction is
   off here whatever the compiler flags (gcc contracts by default outside ISO mode, clang within expressions). */
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC push_options
#pragma GCC optimize("fp-contract=off")
#elif defined(__clang__)
#pragma STDC FP_CONTRACT OFF
#endif

/* A point with its position in the caller's array, which decides where cv2.convexHull starts the hull. */
typedef struct { float x, y; int idx; } ocr__hpt;

static int ocr__hpt_less(const void *a, const void *b) {
    const ocr__hpt *p = (const ocr__hpt *)a, *q = (const ocr__hpt *)b;
    if (p->x != q->x) return p->x < q->x ? -1 : 1;
    if (p->y != q->y) return p->y < q->y ? -1 : 1;
    return (p->idx > q->idx) - (p->idx < q->idx);
}

static double ocr__hpt_turn(const ocr__hpt *o, const ocr__hpt *a, const ocr__hpt *b) {
    return ((double)a->x - o->x) * ((double)b->y - o->y) - ((double)a->y - o->y) * ((double)b->x - o->x);
}

static void ocr__hpt_reverse(ocr__hpt *p, int lo, int hi) {
    for (; lo < hi; lo++, hi--) { ocr__hpt t = p[lo]; p[lo] = p[hi]; p[hi] = t; }
}

/* hull[0..n) starts at hull[first] afterwards. */
static void ocr__hpt_rotate(ocr__hpt *hull, int n, int first) {
    if (first <= 0) return;
    ocr__hpt_reverse(hull, 0, first - 1);
    ocr__hpt_reverse(hull, first, n - 1);
    ocr__hpt_reverse(hull, 0, n - 1);
}

/* The points of pts that can be hull vertices, sorted by (x, y), a repeated point standing for its first
   occurrence; returns their count. Integer x spanning fewer columns than n + 64 (contours, unclipped boxes) takes
   a counting pass that keeps each column's lowest and highest point; other sets are sorted. cols: room for
   2 * (n + 64) ints. */
static int ocr__hull_candidates(const ocr_point *pts, int n, ocr__hpt *cand, int *cols) {
    float lo_x = pts[0].x, hi_x = pts[0].x;
    int i, m = 0, integral = 1;
    for (i = 0; i < n; i++) {
        if (pts[i].x < lo_x) lo_x = pts[i].x;
        if (pts[i].x > hi_x) hi_x = pts[i].x;
        integral &= pts[i].x == floorf(pts[i].x);
    }
    if (integral && (double)hi_x - lo_x < (double)n + 64) {
        int span = (int)(hi_x - lo_x) + 1, c, *low = cols, *high = cols + span;
        for (c = 0; c < span; c++) low[c] = high[c] = -1;
        for (i = 0; i < n; i++) {
            c = (int)(pts[i].x - lo_x);
            if (low[c] < 0 || pts[i].y < pts[low[c]].y) low[c] = i;
            if (high[c] < 0 || pts[i].y > pts[high[c]].y) high[c] = i;
        }
        for (c = 0; c < span; c++) {
            if (low[c] < 0) continue;
            cand[m].x = pts[low[c]].x; cand[m].y = pts[low[c]].y; cand[m++].idx = low[c];
            if (pts[high[c]].y == pts[low[c]].y) continue;
            cand[m].x = pts[high[c]].x; cand[m].y = pts[high[c]].y; cand[m++].idx = high[c];
        }
        return m;
    }
    for (i = 0; i < n; i++) { cand[i].x = pts[i].x; cand[i].y = pts[i].y; cand[i].idx = i; }
    qsort(cand, (size_t)n, sizeof *cand, ocr__hpt_less);
    for (i = 0; i < n; i++)
        if (m == 0 || cand[i].x != cand[m - 1].x || cand[i].y != cand[m - 1].y) cand[m++] = cand[i];
    return m;
}

/* Strictly convex hull of the m candidates as cv2.convexHull returns it: counter-clockwise with y up, starting
   at the largest (x, y), unless the vertices' positions in the input run monotonically around it (always so for
   a contour); then it starts at the first (increasing) or the last (decreasing) of them. Monotone chain
   (Andrew); hull has room for m + 1 points. */
static int ocr__convex_hull(const ocr__hpt *pts, int m, ocr__hpt *hull) {
    int i, k = 0, lower, largest, rises = 0, lo = 0, hi = 0;
    if (m == 1) { hull[0] = pts[0]; return 1; }
    for (i = 0; i < m; i++) {
        while (k >= 2 && ocr__hpt_turn(&hull[k - 2], &hull[k - 1], &pts[i]) <= 0) k--;
        hull[k++] = pts[i];
    }
    largest = k - 1;
    lower = k + 1;
    for (i = m - 2; i >= 0; i--) {
        while (k >= lower && ocr__hpt_turn(&hull[k - 2], &hull[k - 1], &pts[i]) <= 0) k--;
        hull[k++] = pts[i];
    }
    k--; /* the last point repeats the first */
    ocr__hpt_rotate(hull, k, largest);
    if (k < 3) return k;
    for (i = 0; i < k; i++) {
        rises += hull[i].idx < hull[(i + 1) % k].idx;
        if (hull[i].idx < hull[lo].idx) lo = i;
        if (hull[i].idx > hull[hi].idx) hi = i;
    }
    if (rises == k - 1) ocr__hpt_rotate(hull, k, lo);
    else if (rises == 1) ocr__hpt_rotate(hull, k, hi);
    return k;
}

/* A rotated rectangle as cv2.RotatedRect holds it: centre, size (w along the angle), angle in degrees. */
typedef struct { float cx, cy, w, h, angle; } ocr__rrect;

/* Radians to degrees as minAreaRect does it: the float angle times 180 stays float, the division is double. */
static float ocr__rrect_degrees(float radians) {
    float scaled = radians * 180.0f;
    return (float)((double)scaled / OCR__GEOM_PI);
}

/* Rotating calipers over a counter-clockwise hull of n >= 3 points, in float32 as cv2.minAreaRect: four calipers
   start on the lowest, rightmost, highest and leftmost vertices (first of equals) with the first one pointing
   along +x. At each step the caliper whose next hull edge turns least from its own direction (compared by the
   sign of a cross product) moves onto that edge, the others turn with it, and the rectangle they span is kept
   when its area is <= the smallest so far. vx, vy, inv_len: room for n floats each. */
static void ocr__calipers_rect(const ocr__hpt *h, int n, float *vx, float *vy, float *inv_len, ocr__rrect *r) {
    int i, k, s[4] = {0, 0, 0, 0}, best_left = 0, best_low = 0;
    float a = 1.0f, b = 0.0f, min_area = 0.0f, best_a = 1.0f, best_b = 0.0f, best_w = 0.0f, best_h = 0.0f;
    float c1, c2, inv_det, ox, oy, ux, uy, wx, wy, t1, t2;
    for (i = 0; i < n; i++) {
        const ocr__hpt *next = &h[i + 1 < n ? i + 1 : 0];
        double dx, dy;
        if (h[i].y < h[s[0]].y) s[0] = i;
        if (h[i].x > h[s[1]].x) s[1] = i;
        if (h[i].y > h[s[2]].y) s[2] = i;
        if (h[i].x < h[s[3]].x) s[3] = i;
        vx[i] = next->x - h[i].x;
        vy[i] = next->y - h[i].y;
        dx = vx[i];
        dy = vy[i];
        inv_len[i] = (float)(1.0 / sqrt(dx * dx + dy * dy));
    }
    for (k = 0; k < n; k++) {
        /* each caliper's next edge, turned into the frame of caliper 0 */
        float ex[4], ey[4], dx, dy, width, height, area;
        int lead = 0, j, e;
        ex[0] = vx[s[0]];  ey[0] = vy[s[0]];
        ex[1] = vy[s[1]];  ey[1] = -vx[s[1]];
        ex[2] = -vx[s[2]]; ey[2] = -vy[s[2]];
        ex[3] = -vy[s[3]]; ey[3] = vx[s[3]];
        for (j = 1; j < 4; j++)
            if ((double)ex[j] * ey[lead] - (double)ey[j] * ex[lead] > 0) lead = j;
        e = s[lead];
        a = ex[lead] * inv_len[e];
        b = ey[lead] * inv_len[e];
        s[lead] = s[lead] + 1 < n ? s[lead] + 1 : 0;
        dx = h[s[1]].x - h[s[3]].x;
        dy = h[s[1]].y - h[s[3]].y;
        t1 = dx * a;
        t2 = dy * b;
        width = t1 + t2;
        dx = h[s[2]].x - h[s[0]].x;
        dy = h[s[2]].y - h[s[0]].y;
        t1 = dy * a;
        t2 = dx * b;
        height = t1 - t2;
        area = width * height;
        if (k == 0 || area <= min_area) {
            min_area = area;
            best_left = s[3]; best_low = s[0];
            best_a = a; best_b = b; best_w = width; best_h = height;
        }
    }
    /* The corner where the side through the leftmost support point (direction (a, b)) meets the side through
       the lowest one (direction (-b, a)), then the two side vectors from it. */
    a = best_a;
    b = best_b;
    t1 = a * h[best_left].x; t2 = h[best_left].y * b; c1 = t1 + t2;
    t1 = -b * h[best_low].x; t2 = h[best_low].y * a; c2 = t1 + t2;
    t1 = a * a; t2 = b * b; inv_det = 1.0f / (t1 + t2);
    t1 = c1 * a; t2 = c2 * b; ox = (t1 - t2) * inv_det;
    t1 = a * c2; t2 = b * c1; oy = (t1 + t2) * inv_det;
    ux = a * best_w;  uy = b * best_w;
    wx = -b * best_h; wy = a * best_h;
    r->cx = ox + (ux + wx) * 0.5f;
    r->cy = oy + (uy + wy) * 0.5f;
    r->w = (float)sqrt((double)ux * ux + (double)uy * uy);
    r->h = (float)sqrt((double)wx * wx + (double)wy * wy);
    r->angle = ocr__rrect_degrees((float)atan2((double)uy, (double)ux));
}

/* cv2.boxPoints: the corners from centre, size and angle, the last two mirrored through the centre. */
static void ocr__rrect_corners(const ocr__rrect *r, ocr_point p[4]) {
    double rad = (double)r->angle * OCR__GEOM_PI / 180.0;
    float b = (float)cos(rad) * 0.5f, a = (float)sin(rad) * 0.5f, ah = a * r->h, aw = a * r->w, bh = b * r->h, bw = b * r->w;
    p[0].x = r->cx - ah - bw;
    p[0].y = r->cy + bh - aw;
    p[1].x = r->cx + ah - bw;
    p[1].y = r->cy - bh - aw;
    p[2].x = 2.0f * r->cx - p[0].x;
    p[2].y = 2.0f * r->cy - p[0].y;
    p[3].x = 2.0f * r->cx - p[1].x;
    p[3].y = 2.0f * r->cy - p[1].y;
}

/* get_mini_boxes: corners sorted by x (stably); of the two left ones the upper is TL, of the two right ones
   the upper is TR (ties go to the second of the pair, as there). */
static void ocr__order_box(const ocr_point corners[4], ocr_point box[4]) {
    ocr_point s[4];
    int i, j;
    for (i = 0; i < 4; i++) {
        ocr_point p = corners[i];
        for (j = i; j > 0 && s[j - 1].x > p.x; j--) s[j] = s[j - 1];
        s[j] = p;
    }
    if (s[1].y > s[0].y) { box[0] = s[0]; box[3] = s[1]; } else { box[0] = s[1]; box[3] = s[0]; }
    if (s[3].y > s[2].y) { box[1] = s[2]; box[2] = s[3]; } else { box[1] = s[3]; box[2] = s[2]; }
}

/* ocr_min_area_box with its work memory in *work (grown as needed, the caller frees it). */
static int ocr__min_area_box(ocr_ctx *ctx, const ocr_point *pts, int n, ocr_point box[4], float *short_side, void **work, size_t *cap) {
    const char *fn = "ocr_min_area_box";
    ocr__hpt *cand, *hull;
    ocr__rrect r;
    ocr_point corners[4];
    size_t bytes;
    int i, nh;
    if (!pts || !box || n < 1) return ocr_error(ctx, OCR_EINVAL, "%s: need at least one point (got %d) and a box", fn, n);
    for (i = 0; i < n; i++)
        if (!isfinite(pts[i].x) || !isfinite(pts[i].y))
            return ocr_error(ctx, OCR_ENONFINITE, "%s: point %d is (%g, %g)", fn, i, pts[i].x, pts[i].y);
    /* candidates (n), hull (n + 1), three floats per hull vertex, two ints per column (2 (n + 64)) */
    if (!ocr_size_mul((size_t)n + 64, 2 * sizeof(ocr__hpt) + 3 * sizeof(float) + 2 * sizeof(int), &bytes))
        return ocr_error(ctx, OCR_EOVERFLOW, "%s: %d points is too many", fn, n);
    if (*cap < bytes) {
        void *grown = OCR_REALLOC(*work, bytes);
        if (!grown) return ocr_error(ctx, OCR_ENOMEM, "%s: cannot allocate %zu bytes", fn, bytes);
        *work = grown;
        *cap = bytes;
    }
    cand = (ocr__hpt *)*work;
    hull = cand + n;
    nh = ocr__convex_hull(cand, ocr__hull_candidates(pts, n, cand, (int *)(void *)(hull + n + 1)), hull);
    if (nh >= 3) {
        float *vx = (float *)(void *)(hull + n + 1);
        ocr__calipers_rect(hull, nh, vx, vx + nh, vx + 2 * nh, &r);
    } else { /* a point or a segment: a flat rectangle along it */
        const ocr__hpt *p = &hull[0], *q = &hull[nh - 1];
        float fx = q->x - p->x, fy = q->y - p->y;
        r.cx = (p->x + q->x) * 0.5f;
        r.cy = (p->y + q->y) * 0.5f;
        r.w = (float)sqrt((double)fx * fx + (double)fy * fy);
        r.h = 0.0f;
        r.angle = nh == 2 ? ocr__rrect_degrees((float)atan2((double)fy, (double)fx)) : 0.0f;
    }
    ocr__rrect_corners(&r, corners);
    ocr__order_box(corners, box);
    if (short_side) *short_side = r.w < r.h ? r.w : r.h;
    return OCR_OK;
}

OCRDEF int ocr_min_area_box(ocr_ctx *ctx, const ocr_point *pts, int n, ocr_point box[4], float *short_side) {
    void *work = NULL;
    size_t cap = 0;
    int rc = ocr__min_area_box(ctx, pts, n, box, short_side, &work, &cap);
    OCR_FREE(work);
    return rc;
}

#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC pop_options
#elif defined(__clang__)
#pragma STDC FP_CONTRACT DEFAULT
#endif

/* ---------------------------------------------------------------- Douglas-Peucker (closed) */

OCRDEF double ocr_contour_arc_length(const ocr_point *pts, int n) {
    double total = 0.0;
    int i;
    for (i = 0; i < n; i++) {
        const ocr_point *a = &pts[i ? i - 1 : n - 1], *b = &pts[i];
        float dx = b->x - a->x, dy = b->y - a->y;
        total += sqrtf(dx * dx + dy * dy);
    }
    return total;
}

OCRDEF int ocr_approx_poly(ocr_ctx *ctx, const ocr_point *pts, int n, double epsilon, ocr_point *out, int *n_out) {
    const char *fn = "ocr_approx_poly";
    int *stack, top = 0, i, iter, start = 0, offset = 0, count = 0, kept, rd, wr;
    double eps2 = epsilon * epsilon, far_d = 0.0;
    ocr_point a, mid, b;
    if (!pts || !out || !n_out || n < 1) return ocr_error(ctx, OCR_EINVAL, "%s: need at least one point (got %d) and outputs", fn, n);
    if (!(epsilon >= 0) || !isfinite(epsilon)) return ocr_error(ctx, OCR_ERANGE, "%s: epsilon %g must be finite and >= 0", fn, epsilon);
    stack = (int *)OCR_MALLOC(sizeof(int) * 2 * ((size_t)n + 1));
    if (!stack) return ocr_error(ctx, OCR_ENOMEM, "%s: cannot allocate a stack for %d points", fn, n);
    /* Split points: three rounds of "the farthest point from the current start", beginning at point 0. */
    for (iter = 0; iter < 3; iter++) {
        start = (start + offset) % n;
        offset = 0;
        far_d = 0.0;
        for (i = 1; i < n; i++) {
            const ocr_point *p = &pts[(start + i) % n];
            double dx = p->x - pts[start].x, dy = p->y - pts[start].y, d = dx * dx + dy * dy;
            if (d > far_d) { far_d = d; offset = i; }
        }
    }
    if (far_d <= eps2) {
        out[count++] = pts[start];
    } else {
        int far = (start + offset) % n;
        stack[top++] = far; stack[top++] = start;   /* second half, processed after the first */
        stack[top++] = start; stack[top++] = far;
    }
    while (top > 0) {
        int s_end = stack[--top], s_begin = stack[--top], pos = (s_begin + 1) % n, split = -1;
        int keep = 1;
        if (pos != s_end) {
            double dx = (double)pts[s_end].x - pts[s_begin].x, dy = (double)pts[s_end].y - pts[s_begin].y, best = 0.0;
            for (; pos != s_end; pos = (pos + 1) % n) {
                double d = fabs(((double)pts[pos].y - pts[s_begin].y) * dx - ((double)pts[pos].x - pts[s_begin].x) * dy);
                if (d > best) { best = d; split = pos; }
            }
            keep = best * best <= eps2 * (dx * dx + dy * dy);
        }
        if (keep) {
            out[count++] = pts[s_begin];
        } else {
            stack[top++] = split; stack[top++] = s_end;
            stack[top++] = s_begin; stack[top++] = split;
        }
    }
    OCR_FREE(stack);
    /* Clean-up pass of OpenCV, in place and cyclic: a vertex nearly on the chord of its neighbours (within
       epsilon/sqrt(2), chord neither horizontal nor vertical, vertex between them) is dropped. */
    kept = count;
    rd = count - 1;
    a = out[rd];
    rd = 0;
    wr = 0;
    mid = out[rd];
    rd = (rd + 1) % count;
    for (i = 0; i < count && kept > 2; i++) {
        double dx, dy, dist, along;
        b = out[rd];
        rd = (rd + 1) % count;
        dx = (double)b.x - a.x;
        dy = (double)b.y - a.y;
        dist = fabs(((double)mid.x - a.x) * dy - ((double)mid.y - a.y) * dx);
        along = ((double)mid.x - a.x) * ((double)b.x - mid.x) + ((double)mid.y - a.y) * ((double)b.y - mid.y);
        if (dist * dist <= 0.5 * eps2 * (dx * dx + dy * dy) && dx != 0 && dy != 0 && along >= 0) {
            kept--;
            out[wr] = a = b;
            wr = (wr + 1) % count;
            mid = out[rd];
            rd = (rd + 1) % count;
            i++;
            continue;
        }
        out[wr] = a = mid;
        wr = (wr + 1) % count;
        mid = b;
    }
    *n_out = kept;
    return OCR_OK;
}

/* ---------------------------------------------------------------- scoring, unclipping, the pipeline */

typedef struct {
    float *mask; int mask_cap;
    ocr_point *shifted; int shifted_cap;  /* a polygon moved into the mask's frame */
    ocr_point *pts; int pts_cap;          /* truncated / approximated points */
    void *rect; size_t rect_cap;          /* ocr__min_area_box's work */
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

/* pred > thresh into the interior of the work image (ocr__contour_image); 0 when a value lies outside [0, 1]
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
        (cfg->score_mode != OCR_SCORE_FAST && cfg->score_mode != OCR_SCORE_SLOW))
        return ocr_error(ctx, OCR_EINVAL,
                         "%s: bad config: thresh %g (0..1), box_thresh %g, unclip_ratio %g (> 0), poly_epsilon %g (>= 0), "
                         "max_candidates %d, min_size %d (>= 0), mode %d, score_mode %d",
                         fn, cfg->thresh, cfg->box_thresh, cfg->unclip_ratio, cfg->poly_epsilon, cfg->max_candidates, cfg->min_size,
                         cfg->mode, cfg->score_mode);
    if (dest_width < 1 || dest_height < 1 || dest_width > (1 << 24) || dest_height > (1 << 24))
        return ocr_error(ctx, OCR_EINVAL, "%s: original image size %dx%d must be 1..2^24 on each side", fn, dest_width, dest_height);
    pred = (const float *)prob->data;
    if (!(img = ocr__contour_image(ctx, fn, (int)W, (int)H))) return ctx->last_status;
    /* an out-of-range value is reported by ocr_check_range, which finds the same first one */
    if (!ocr__binarize(pred, W, H, cfg->thresh, img)) return ocr_check_range(ctx, fn, prob, 0.0, 1.0);
    memset(&contours, 0, sizeof contours);
    memset(&w, 0, sizeof w);
    out->n = out->n_points = 0;
    rc = ocr__trace_borders(ctx, img, (int)W, (int)H, &contours);
    n_cand = contours.n_polys < cfg->max_candidates ? contours.n_polys : cfg->max_candidates;
    for (c = 0; c < n_cand && rc == OCR_OK; first += contours.counts[c], c++) {
        const ocr_point *cpts = contours.pts + first;
        int cn = contours.counts[c], k;
        ocr_point box[4], mapped[4];
        float side;
        double score;
        if (cfg->mode == OCR_POST_BOX) {
            if ((rc = ocr__min_area_box(ctx, cpts, cn, box, &side, &w.rect, &w.rect_cap))) break;
            if (side < (float)cfg->min_size) continue;
            rc = cfg->score_mode == OCR_SCORE_FAST ? ocr__box_score(ctx, &w, pred, (int)W, (int)H, box, 4, &score)
                                                   : ocr__box_score(ctx, &w, pred, (int)W, (int)H, cpts, cn, &score);
            if (rc || cfg->box_thresh > score) continue;
            if ((rc = ocr__unclip(ctx, &w, box, 4, cfg->unclip_ratio)) || w.grown.n_pts == 0) continue;
            /* Every piece of the offset together, as the official reshape(-1, 1, 2) does. */
            if ((rc = ocr__min_area_box(ctx, w.grown.pts, w.grown.n_pts, box, &side, &w.rect, &w.rect_cap))) break;
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
            if ((rc = ocr__min_area_box(ctx, w.grown.pts, w.grown.n_pts, box, &side, &w.rect, &w.rect_cap))) break;
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

/* Copies a polygon without consecutive repeats (cyclically) into out, as doubles; returns the count. */
static int ocr__ring_dedup(const ocr_point *pts, int n, ocr__dpt *out) {
    int i, m = 0;
    for (i = 0; i < n; i++) {
        if (m && out[m - 1].x == pts[i].x && out[m - 1].y == pts[i].y) continue;
        out[m].x = pts[i].x;
        out[m].y = pts[i].y;
        m++;
    }
    while (m > 1 && out[m - 1].x == out[0].x && out[m - 1].y == out[0].y) m--;
    return m;
}

static int ocr__sign(double v) { return (v > 0) - (v < 0); }

/* Whether closed segments ab and cd share a point. */
static int ocr__segments_touch(ocr__dpt a, ocr__dpt b, ocr__dpt c, ocr__dpt d) {
    int s1 = ocr__sign(ocr__cross3(a, b, c)), s2 = ocr__sign(ocr__cross3(a, b, d));
    int s3 = ocr__sign(ocr__cross3(c, d, a)), s4 = ocr__sign(ocr__cross3(c, d, b));
    if (s1 * s2 < 0 && s3 * s4 < 0) return 1;
#define OCR__ON(p, q, r) ((r).x >= ((p).x < (q).x ? (p).x : (q).x) && (r).x <= ((p).x > (q).x ? (p).x : (q).x) && \
                          (r).y >= ((p).y < (q).y ? (p).y : (q).y) && (r).y <= ((p).y > (q).y ? (p).y : (q).y))
    if ((s1 == 0 && OCR__ON(a, b, c)) || (s2 == 0 && OCR__ON(a, b, d)) || (s3 == 0 && OCR__ON(c, d, a)) || (s4 == 0 && OCR__ON(c, d, b)))
        return 1;
#undef OCR__ON
    return 0;
}

static int ocr__ring_is_simple(const ocr__dpt *r, int m) {
    int i, j;
    if (m < 3) return 0;
    for (i = 0; i < m; i++) {
        ocr__dpt a = r[i], b = r[(i + 1) % m], c = r[(i + 2) % m];
        /* a spike: the next edge folds back along this one */
        if (ocr__cross3(a, b, c) == 0 && (b.x - a.x) * (c.x - b.x) + (b.y - a.y) * (c.y - b.y) < 0) return 0;
        for (j = i + 2; j < m; j++) {
            if (i == 0 && j == m - 1) continue; /* adjacent through the closing vertex */
            if (ocr__segments_touch(a, b, r[j], r[(j + 1) % m])) return 0;
        }
    }
    return 1;
}

OCRDEF int ocr_poly_is_simple(const ocr_point *pts, int n) {
    ocr__dpt *r;
    int i, ok;
    if (!pts || n < 3) return 0;
    for (i = 0; i < n; i++)
        if (!isfinite(pts[i].x) || !isfinite(pts[i].y)) return 0;
    r = (ocr__dpt *)OCR_MALLOC(sizeof(ocr__dpt) * (size_t)n);
    if (!r) return 0;
    ok = ocr__ring_is_simple(r, ocr__ring_dedup(pts, n, r));
    OCR_FREE(r);
    return ok;
}

static double ocr__ring_area(const ocr__dpt *r, int m) {
    double s = 0.0;
    int i;
    for (i = 0; i < m; i++) s += (r[i].x - r[0].x) * (r[(i + 1) % m].y - r[0].y) - (r[(i + 1) % m].x - r[0].x) * (r[i].y - r[0].y);
    return 0.5 * s;
}

/* Point strictly inside a ring (crossing count); callers never ask about points on its boundary. */
static int ocr__ring_contains(const ocr__dpt *r, int m, ocr__dpt p) {
    int i, inside = 0;
    for (i = 0; i < m; i++) {
        ocr__dpt a = r[i], b = r[(i + 1) % m];
        if ((a.y > p.y) != (b.y > p.y) && p.x < a.x + (p.y - a.y) * (b.x - a.x) / (b.y - a.y)) inside = !inside;
    }
    return inside;
}

typedef struct { double t, x, y; } ocr__cut;

static int ocr__cut_less(const void *a, const void *b) {
    double s = ((const ocr__cut *)a)->t, t = ((const ocr__cut *)b)->t;
    return s < t ? -1 : s > t;
}

/* Green's theorem: the area of P ∩ Q (both counter-clockwise) is the integral of x dy - y dx over the parts of
   P's boundary inside Q plus the parts of Q's boundary inside P, halved. This adds P's part: each edge is cut
   where it meets Q's boundary and each piece is kept when its midpoint is inside Q. A piece lying on an edge
   of Q belongs to the intersection's boundary once when both run the same way, never when they run against
   each other; with_shared says whether this pass is the one that counts it. */
static double ocr__boundary_inside(const ocr__dpt *P, int np, const ocr__dpt *Q, int nq, int with_shared, double tol, ocr__cut *cuts,
                                   double *shared) {
    double sum = 0.0;
    int i, j, k;
    for (i = 0; i < np; i++) {
        ocr__dpt a = P[i], b = P[(i + 1) % np];
        double ex = b.x - a.x, ey = b.y - a.y, len2 = ex * ex + ey * ey, len = sqrt(len2);
        int nc = 0, ns = 0;
        cuts[nc].t = 0; cuts[nc].x = a.x; cuts[nc].y = a.y; nc++;
        cuts[nc].t = 1; cuts[nc].x = b.x; cuts[nc].y = b.y; nc++;
        for (j = 0; j < nq; j++) {
            ocr__dpt c = Q[j], d = Q[(j + 1) % nq];
            double fx = d.x - c.x, fy = d.y - c.y, flen = sqrt(fx * fx + fy * fy);
            double dc = ocr__cross3(a, b, c), dd = ocr__cross3(a, b, d), da = ocr__cross3(c, d, a), db = ocr__cross3(c, d, b);
            if (fabs(dc) <= tol * len && fabs(dd) <= tol * len && fabs(da) <= tol * flen && fabs(db) <= tol * flen) {
                /* collinear: Q's endpoints cut the edge, and the overlap is remembered */
                double tc = ((c.x - a.x) * ex + (c.y - a.y) * ey) / len2, td = ((d.x - a.x) * ex + (d.y - a.y) * ey) / len2;
                if (tc > 0 && tc < 1) { cuts[nc].t = tc; cuts[nc].x = c.x; cuts[nc].y = c.y; nc++; }
                if (td > 0 && td < 1) { cuts[nc].t = td; cuts[nc].x = d.x; cuts[nc].y = d.y; nc++; }
                shared[3 * ns] = tc < td ? tc : td;
                shared[3 * ns + 1] = tc < td ? td : tc;
                shared[3 * ns + 2] = ex * fx + ey * fy > 0;
                ns++;
                continue;
            }
            if (ocr__sign(dc) * ocr__sign(dd) > 0 || ocr__sign(da) * ocr__sign(db) > 0 || da == db) continue;
            {
                double t = da / (da - db);
                ocr__cut *cut = &cuts[nc];
                if (!(t > 0 && t < 1)) continue;
                cut->t = t;
                if (dc == 0) { cut->x = c.x; cut->y = c.y; }
                else if (dd == 0) { cut->x = d.x; cut->y = d.y; }
                else { cut->x = (da * b.x - db * a.x) / (da - db); cut->y = (da * b.y - db * a.y) / (da - db); }
                nc++;
            }
        }
        qsort(cuts, (size_t)nc, sizeof *cuts, ocr__cut_less);
        for (k = 0; k + 1 < nc; k++) {
            double tm = 0.5 * (cuts[k].t + cuts[k + 1].t);
            int s, on = -1;
            ocr__dpt m;
            if (!(cuts[k + 1].t > cuts[k].t)) continue;
            for (s = 0; s < ns; s++)
                if (tm > shared[3 * s] && tm < shared[3 * s + 1]) { on = shared[3 * s + 2] != 0; break; }
            m.x = a.x + tm * ex;
            m.y = a.y + tm * ey;
            if (on < 0 ? ocr__ring_contains(Q, nq, m) : (with_shared && on))
                sum += cuts[k].x * cuts[k + 1].y - cuts[k + 1].x * cuts[k].y;
        }
    }
    return 0.5 * sum;
}

/* Rings without repeats, counter-clockwise, translated so that coordinates stay small. */
static int ocr__intersection_area(ocr_ctx *ctx, const char *fn, const ocr_point *a, int na, const ocr_point *b, int nb, double *area) {
    ocr__dpt *ra, *rb;
    ocr__cut *cuts;
    double *shared, ox, oy, scale = 0.0, tol;
    size_t bytes;
    int ma, mb, i, n_max = na > nb ? na : nb;
    *area = 0.0;
    if (!ocr_size_mul((size_t)n_max * 3 + 4, sizeof(ocr__cut) + 2 * sizeof(ocr__dpt), &bytes))
        return ocr_error(ctx, OCR_EOVERFLOW, "%s: polygons of %d and %d points are too large", fn, na, nb);
    ra = (ocr__dpt *)ocr_ctx_scratch(ctx, OCR_SCRATCH_OP2, bytes);
    if (!ra) return OCR_ENOMEM;
    rb = ra + n_max;
    cuts = (ocr__cut *)(rb + n_max);
    shared = (double *)(cuts + 2 * n_max + 2);
    ma = ocr__ring_dedup(a, na, ra);
    mb = ocr__ring_dedup(b, nb, rb);
    if (ma < 3 || mb < 3) return OCR_OK;
    ox = ra[0].x;
    oy = ra[0].y;
    for (i = 0; i < ma; i++) { ra[i].x -= ox; ra[i].y -= oy; scale = fmax(scale, fmax(fabs(ra[i].x), fabs(ra[i].y))); }
    for (i = 0; i < mb; i++) { rb[i].x -= ox; rb[i].y -= oy; scale = fmax(scale, fmax(fabs(rb[i].x), fabs(rb[i].y))); }
#define OCR__MAKE_CCW(r, m) do { if (ocr__ring_area(r, m) < 0) { int lo_, hi_; for (lo_ = 0, hi_ = (m) - 1; lo_ < hi_; lo_++, hi_--) { \
        ocr__dpt t_ = (r)[lo_]; (r)[lo_] = (r)[hi_]; (r)[hi_] = t_; } } } while (0)
    OCR__MAKE_CCW(ra, ma);
    OCR__MAKE_CCW(rb, mb);
#undef OCR__MAKE_CCW
    /* distances below this count as collinear: a few ulps of the coordinates' magnitude */
    tol = 1e-12 * (scale > 1 ? scale : 1);
    *area = ocr__boundary_inside(ra, ma, rb, mb, 1, tol, cuts, shared) + ocr__boundary_inside(rb, mb, ra, ma, 0, tol, cuts, shared);
    if (*area < 0) *area = 0;
    return OCR_OK;
}

OCRDEF int ocr_poly_intersection_area(ocr_ctx *ctx, const ocr_point *a, int na, const ocr_point *b, int nb, double *area) {
    const char *fn = "ocr_poly_intersection_area";
    int rc;
    if (!area) return ocr_error(ctx, OCR_EINVAL, "%s: area must not be NULL", fn);
    if ((rc = ocr_poly_check(ctx, fn, "a", a, na)) || (rc = ocr_poly_check(ctx, fn, "b", b, nb))) return rc;
    return ocr__intersection_area(ctx, fn, a, na, b, nb, area);
}

OCRDEF int ocr_eval_add_image(ocr_ctx *ctx, ocr_evaluator *ev, const ocr_polygon *gt, int n_gt, const ocr_polygon *det, int n_det,
                              ocr_eval_counts *image) {
    const char *fn = "ocr_eval_add_image";
    ocr_eval_counts cnt;
    /* per polygon: 0 dropped, 1 care, 2 don't care; then 1 once matched */
    unsigned char *gt_kind, *det_kind, *gt_used, *det_used;
    double *det_area;
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
            if ((rc = ocr__intersection_area(ctx, fn, gt[i].points, gt[i].n_points, det[j].points, det[j].n_points, &inter))) break;
            if ((det_area[j] == 0 ? 0.0 : inter / det_area[j]) > ev->dontcare_thresh) det_kind[j] = 2;
        }
        if (det_kind[j] == 2) cnt.det_dontcare++;
        else cnt.det_care++;
    }
    /* greedy: GT in order, each taking the first free detection with IoU above the threshold */
    for (i = 0; i < n_gt && !rc; i++) {
        double gt_area;
        if (gt_kind[i] != 1) continue;
        gt_area = fabs(ocr_poly_area(gt[i].points, gt[i].n_points));
        for (j = 0; j < n_det; j++) {
            double inter, uni;
            if (det_kind[j] != 1 || det_used[j] || gt_used[i]) continue;
            if ((rc = ocr__intersection_area(ctx, fn, det[j].points, det[j].n_points, gt[i].points, gt[i].n_points, &inter))) break;
            uni = gt_area + det_area[j] - inter;
            if (uni > 0 && inter / uni > ev->iou_thresh) {
                gt_used[i] = det_used[j] = 1;
                cnt.matched++;
            }
        }
    }
    OCR_FREE(gt_kind);
    OCR_FREE(det_area);
    if (rc) return rc;
    ev->total.gt_care += cnt.gt_care;
    ev->total.det_care += cnt.det_care;
    ev->total.matched += cnt.matched;
    ev->total.gt_dontcare += cnt.gt_dontcare;
    ev->total.det_dontcare += cnt.det_dontcare;
    ev->total.gt_invalid += cnt.gt_invalid;
    ev->total.det_invalid += cnt.det_invalid;
    ev->n_images++;
    if (image) *image = cnt;
    return OCR_OK;
}

OCRDEF ocr_eval_result ocr_eval_finish(const ocr_evaluator *ev) {
    ocr_eval_result r;
    r.recall = ev->total.gt_care ? (double)ev->total.matched / (double)ev->total.gt_care : 0.0;
    r.precision = ev->total.det_care ? (double)ev->total.matched / (double)ev->total.det_care : 0.0;
    /* the official expression order, so that the value is the same to the last bit */
    r.hmean = r.recall + r.precision > 0 ? 2.0 * r.recall * r.precision / (r.recall + r.precision) : 0.0;
    return r;
}

#ifdef __cplusplus
}
#endif
#endif /* OCR_DBNET_IMPLEMENTATION */
