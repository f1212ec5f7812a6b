/* ocr_nn.h - layers with explicit forward and backward, the GEMM core, parameters and optimizers.  v0.1  MIT

   The file in order: this block and the declarations; then the implementation, which opens with the REFERENCE (every
   op as the direct loop of its PyTorch definition: ocr__ref_gemm, ocr__ref_conv2d_forward, ...); then mixed
   precision's rounding of an op's inputs (ocr__amp_*); then the fast paths: GEMM (micro-kernels, packing, ocr_gemm and
   its rectangles per thread, ocr__gemm_split; tuning macros OCR__KC, OCR__NC, OCR__MC_PANELS, OCR__GEMM_PACK_FLOPS,
   OCR__GEMM_PACK_A_FLOPS, OCR__WGRAD_*), convolution lowering (im2col and packed GEMM, the
   implicit path on AVX-512 and AVX2, AVX-512's 3x3 stride-2 blocks over output channels (ocr__conv_och), Winograd
   F(4x4, 3x3) with OCR__WINO_* (and, for one image of few tiles, its tiles as the GEMMs' rows: ocr__wino_rows_part),
   the data gradient as a flipped-kernel convolution;
   ocr__conv_forward and ocr__conv_run choose among them), the bf16 GEMM and convolutions on AMX-BF16 / AVX512_BF16
   (ocr__gemm_bf16, ocr__conv_bf16_run), the public convolutions (and their inference fusions), row helpers and batch
   normalisation, pointwise ops, pooling / upsampling / concat (and the fused upsample + add, upsamplings + concat), parameters, optimizers and their state files, loss scaling, and last the ops of a
   recognizer (LSTM, log_softmax, rectangular max pooling, map-to-sequence). Each public ocr_nn_*
   function validates, then goes to CUDA (ctx->device), to its reference (OCR_DEBUG_REFERENCE) or to its fast path.

   Do this in exactly one C or C++ file:
       #define OCR_NN_IMPLEMENTATION          (ocr_tensor.h's implementation goes in the same or another file;
       #include "ocr_nn.h"                 OCR_IMPLEMENTATION turns on every module)

   Usage (one conv layer, trained by hand):
       ocr_params P; int iw;
       ocr_params_init(&P);
       ocr_params_add(&ctx, &P, "conv.weight", ocr_shape4(8, 3, 3, 3), 1, &iw);
       ocr_params_alloc(&ctx, &P);
       ocr_tensor w = ocr_params_value(&P, iw), dw = ocr_params_grad(&P, iw);
       ocr_conv_params cp = ocr_conv_params_make(1, 1, 1, 1);        // stride 1, pad 1, dilation 1, groups 1
       ocr_nn_conv2d_forward(&ctx, &x, &w, NULL, cp, &y);              // y: [N, 8, H, W]
       ocr_params_zero_grad(&P);
       ocr_nn_conv2d_backward(&ctx, &x, &w, &dy, cp, &dx, &dw, NULL);  // accumulates into dx and dw
       ocr_optim_step(&ctx, &opt, &P, lr);

   Conventions: NCHW F32 tensors on ctx->device. Forward functions overwrite their output. Backward functions
   ACCUMULATE into every gradient they are given (pass NULL to skip one), so residual branches simply add.
   Shapes are checked before memory is touched. With ctx->debug_flags & OCR_DEBUG_CHECK_NUMERICS every forward
   output and every gradient written is checked for NaN/Inf and the error names the op and the tensor.

   Debugging: OCR_REFERENCE=1 in the environment (read by ocr_ctx_init) or ctx->debug_flags |= OCR_DEBUG_REFERENCE runs
   every CPU op on its reference loop instead of its fast path, same validation and errors, results equal within
   float rounding: a run that goes wrong on the fast paths and right on the reference has found a fast-path bug, one
   that goes wrong on both a model or data bug. It is the CPU twin of OCR_CUDA_NO_CUBLAS=1 (ocr_cuda.cu), which runs
   the CUDA GEMMs on the file's own kernel instead of cuBLAS; the CUDA ops ignore OCR_DEBUG_REFERENCE.
   OCR_NO_WINOGRAD=1 only turns off the Winograd convolutions.

   Options: OCR_NO_SIMD (portable GEMM micro-kernel only). Dependencies: ocr_tensor.h.
*/
#ifndef OCR_NN_H
#define OCR_NN_H

#include "ocr_tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- GEMM: row-major C[M,N] = alpha * op(A)[M,K] * op(B)[K,N] + beta * C, threads from ctx ---- */
OCRDEF int ocr_gemm(ocr_ctx *ctx, int trans_a, int trans_b, int64_t M, int64_t N, int64_t K, float alpha,
                    const float *A, int64_t lda, const float *B, int64_t ldb, float beta, float *C, int64_t ldc);
OCRDEF const char *ocr_gemm_kernel_name(ocr_ctx *ctx); /* "avx512 8x48", "avx2-fma 6x16" or "portable 6x16" */
OCRDEF const char *ocr_gemm_bf16_kernel_name(ocr_ctx *ctx); /* "amx-bf16 32x32", "avx512-bf16 8x48" or "fp32 fallback" */

/* ---- convolution ---- */
typedef struct {
    int stride_h, stride_w, pad_h, pad_w, dil_h, dil_w, groups;
    int out_pad_h, out_pad_w; /* transposed convolution only: extra rows/cols on the bottom/right */
} ocr_conv_params;
OCRDEF ocr_conv_params ocr_conv_params_make(int stride, int pad, int dilation, int groups);

/* x [N,Cin,H,W], w [Cout,Cin/groups,kh,kw], b [Cout] or NULL -> y [N,Cout,OH,OW] (as torch.nn.Conv2d) */
OCRDEF int ocr_nn_conv2d_out_shape(ocr_ctx *ctx, ocr_shape x, ocr_shape w, ocr_conv_params p, ocr_shape *y);
OCRDEF int ocr_nn_conv2d_forward(ocr_ctx *ctx, const ocr_tensor *x, const ocr_tensor *w, const ocr_tensor *b,
                                 ocr_conv_params p, ocr_tensor *y);
OCRDEF int ocr_nn_conv2d_backward(ocr_ctx *ctx, const ocr_tensor *x, const ocr_tensor *w, const ocr_tensor *dy,
                                  ocr_conv_params p, ocr_tensor *dx, ocr_tensor *dw, ocr_tensor *db);
/* y = max(conv2d(x, w) + b, 0): the forward above with the ReLU applied to each piece of the output while it is still
   in cache (inference with BatchNorm folded into w and b). Equal to conv2d_forward then relu_forward. */
OCRDEF int ocr_nn_conv2d_relu_forward(ocr_ctx *ctx, const ocr_tensor *x, const ocr_tensor *w, const ocr_tensor *b,
                                      ocr_conv_params p, ocr_tensor *y);
/* y = max(conv2d(x, w) + b + residual, 0), residual of y's shape added and the ReLU applied to each piece of the output
   while it is still in cache (a ResNet block's end at inference, BatchNorm folded). Equal to conv2d_forward, then
   add_forward of residual, then relu_forward. CPU only; y must not alias x or residual. */
OCRDEF int ocr_nn_conv2d_add_relu_forward(ocr_ctx *ctx, const ocr_tensor *x, const ocr_tensor *w, const ocr_tensor *b,
                                          ocr_conv_params p, const ocr_tensor *residual, ocr_tensor *y);
/* x [N,Cin,H,W], w [Cin,Cout/groups,kh,kw], b [Cout] or NULL -> y [N,Cout,OH,OW] (as torch.nn.ConvTranspose2d) */
OCRDEF int ocr_nn_conv_transpose2d_out_shape(ocr_ctx *ctx, ocr_shape x, ocr_shape w, ocr_conv_params p, ocr_shape *y);
OCRDEF int ocr_nn_conv_transpose2d_forward(ocr_ctx *ctx, const ocr_tensor *x, const ocr_tensor *w, const ocr_tensor *b,
                                           ocr_conv_params p, ocr_tensor *y);
OCRDEF int ocr_nn_conv_transpose2d_backward(ocr_ctx *ctx, const ocr_tensor *x, const ocr_tensor *w, const ocr_tensor *dy,
                                            ocr_conv_params p, ocr_tensor *dx, ocr_tensor *dw, ocr_tensor *db);
/* y = max(conv_transpose2d(x, w) + b, 0), the ReLU applied as each output value is written (inference with BatchNorm
   folded into w and b). Equal to conv_transpose2d_forward then relu_forward. */
OCRDEF int ocr_nn_conv_transpose2d_relu_forward(ocr_ctx *ctx, const ocr_tensor *x, const ocr_tensor *w, const ocr_tensor *b,
                                                ocr_conv_params p, ocr_tensor *y);
/* y = conv_transpose2d(relu(conv_transpose2d(x, w1) + b1), w2) + b2, both 2x2 with stride 2, w2 [C, 1, 2, 2] (DBNet's
   binarize head; inference). With the AVX-512 or AVX2 kernels the first's output rows go to a buffer the second reads
   while they are in cache and mid (the first's output shape) is left unwritten; elsewhere mid is written first. The same values
   either way. CPU only. */
OCRDEF int ocr_nn_conv_transpose2d_pair_forward(ocr_ctx *ctx, const ocr_tensor *x, const ocr_tensor *w1, const ocr_tensor *b1, ocr_tensor *mid,
                                                const ocr_tensor *w2, const ocr_tensor *b2, ocr_tensor *y);

/* ---- mixed precision (ctx->amp: OCR_AMP_OFF, OCR_AMP_BF16, OCR_AMP_F16) ----
   Which op runs in which precision, in one place. With ctx->amp set to a half type h:
     h inputs, fp32 accumulation, fp32 output:
       ocr_gemm                        C = alpha h(op(A)) h(op(B)) + beta C
       conv2d forward (and _relu)      y = conv(h(x), h(w)) + b
       conv2d backward                 dx += conv^T(h(dy), h(w)); dw += h(dy) (x) h(x); db += sum of the fp32 dy
       conv_transpose2d fwd/backward   the same rule for their inputs
       lstm forward/backward           its GEMMs are ocr_gemm calls (the rule above); gates, cell state and sums fp32
     fp32 throughout: everything else. BatchNorm (its batch statistics, running averages and backward), ReLU, sigmoid,
       add, pooling, upsampling, concat, the losses and every term of them, DBNet's step function, the master weights
       (ocr_params), optimizer state, gradient clipping and every reduction.
   Tensors stay F32 in memory; h() is the rounding of ocr_f32_to_bf16 / ocr_f32_to_f16 (nearest even; fp16 turns
   magnitudes above 65504 into Inf and those below 2^-25 into 0, the loss scaler's reason to exist), applied as the op
   reads its inputs. BF16 runs on AMX-BF16 or AVX512_BF16 where the CPU has them (ocr_gemm_bf16_kernel_name); F16 on
   every CPU, and BF16 elsewhere, rounds into a copy and runs the fp32 kernels: the same numbers within summation
   order, without a speed-up (no CPU here multiplies fp16 into fp32). The CUDA backend follows the same table.
   With ctx->amp_stats set, every op of the first group counts, per layer (named by its weight, "gemm" for ocr_gemm),
   the input values that overflowed to Inf and the nonzero gradient values that underflowed to zero. */
typedef struct {
    char layer[OCR_NAME_MAX];
    int64_t values, overflowed;                  /* forward inputs (x and w) read in the half type */
    int64_t grads, grads_overflowed, underflowed;/* output gradients (dy) read in the half type */
} ocr_amp_layer_stats;
typedef struct ocr_amp_stats {
    ocr_amp_layer_stats *layer;
    int count, cap;
} ocr_amp_stats;
OCRDEF const char *ocr_amp_name(int amp);                 /* "fp32", "bf16", "fp16" */
OCRDEF int ocr_amp_parse(const char *s, int *amp);        /* "fp32"/"off"/"none", "bf16", "fp16"/"f16"; 0 if unknown */
/* The precision a training program defaults to: BF16 where ctx runs on a CPU that multiplies bf16 natively (AMX-BF16 or
   AVX512_BF16, as ocr_gemm_bf16_kernel_name picks it), where it holds fp32's accuracy in less time (docs/TRAINING.md);
   OCR_AMP_OFF elsewhere, where a half type would only add rounding (an AVX2 CPU, or a GPU until measured there). */
OCRDEF int ocr_amp_default(ocr_ctx *ctx);
OCRDEF void ocr_amp_stats_reset(ocr_amp_stats *s);        /* zeroes the counts, keeps the layers */
OCRDEF void ocr_amp_stats_free(ocr_amp_stats *s);
/* Totals over every layer; *worst gets the layer with the most underflowed gradients (NULL when none). */
OCRDEF ocr_amp_layer_stats ocr_amp_stats_total(const ocr_amp_stats *s, const ocr_amp_layer_stats **worst);

/* ---- batch normalisation (torch.nn.BatchNorm2d: eps 1e-5, momentum 0.1, unbiased running variance) ----
   training: normalise with batch statistics and update running_mean/var; else use the running statistics.
   save_mean and save_invstd [C] receive what backward needs in both modes. With ctx->replica_sum set (ocr_tensor.h),
   training forwards and backwards on the CPU (plain and fused with ReLU) use the statistics of every replica's batch
   together (synchronised BN: dgamma/dbeta get this replica's share, dx the derivative through the global statistics). */
OCRDEF int ocr_nn_batchnorm2d_forward(ocr_ctx *ctx, const ocr_tensor *x, const ocr_tensor *gamma, const ocr_tensor *beta,
                                      ocr_tensor *running_mean, ocr_tensor *running_var, int training, float momentum,
                                      float eps, ocr_tensor *save_mean, ocr_tensor *save_invstd, ocr_tensor *y);
OCRDEF int ocr_nn_batchnorm2d_backward(ocr_ctx *ctx, const ocr_tensor *x, const ocr_tensor *gamma, const ocr_tensor *save_mean,
                                       const ocr_tensor *save_invstd, const ocr_tensor *dy, int training,
                                       ocr_tensor *dx, ocr_tensor *dgamma, ocr_tensor *dbeta);
/* Both backwards accept dx = dy (the same memory) on the CPU: the input gradient then overwrites the output gradient,
   bit for bit what a zeroed dx would receive (a network whose BN input has no other reader needs one buffer, not two). */
/* BatchNorm2d followed by ReLU in one pass over memory: y = max(bn(x), 0), same arguments as the pair above; y must
   not alias x. Backward takes that output y (its sign masks dy) besides x, and accumulates like the plain backward.
   Results equal ocr_nn_batchnorm2d_forward then ocr_nn_relu_forward (and relu_backward then batchnorm2d_backward
   into a zeroed buffer) bit for bit. */
OCRDEF int ocr_nn_batchnorm2d_relu_forward(ocr_ctx *ctx, const ocr_tensor *x, const ocr_tensor *gamma, const ocr_tensor *beta,
                                           ocr_tensor *running_mean, ocr_tensor *running_var, int training, float momentum,
                                           float eps, ocr_tensor *save_mean, ocr_tensor *save_invstd, ocr_tensor *y);
OCRDEF int ocr_nn_batchnorm2d_relu_backward(ocr_ctx *ctx, const ocr_tensor *x, const ocr_tensor *y, const ocr_tensor *gamma,
                                            const ocr_tensor *save_mean, const ocr_tensor *save_invstd, const ocr_tensor *dy,
                                            int training, ocr_tensor *dx, ocr_tensor *dgamma, ocr_tensor *dbeta);

/* y = bn(x) (then max(., 0) when relu) with the statistics a training forward saved in save_mean and save_invstd: the
   forward's output again, bit for bit, without touching the running statistics (a backward pass recomputes an
   activation it did not keep). CPU only; y must not alias x. */
OCRDEF int ocr_nn_batchnorm2d_apply(ocr_ctx *ctx, const ocr_tensor *x, const ocr_tensor *gamma, const ocr_tensor *beta,
                                    const ocr_tensor *save_mean, const ocr_tensor *save_invstd, int relu, ocr_tensor *y);

/* ---- pointwise and shape ops. y may alias x for relu and sigmoid. ---- */
OCRDEF int ocr_nn_relu_forward(ocr_ctx *ctx, const ocr_tensor *x, ocr_tensor *y);
/* relu_backward on the CPU also takes dx = dy (the same memory): the masked gradient then overwrites dy. */
OCRDEF int ocr_nn_relu_backward(ocr_ctx *ctx, const ocr_tensor *y, const ocr_tensor *dy, ocr_tensor *dx);
OCRDEF int ocr_nn_sigmoid_forward(ocr_ctx *ctx, const ocr_tensor *x, ocr_tensor *y);
OCRDEF int ocr_nn_sigmoid_backward(ocr_ctx *ctx, const ocr_tensor *y, const ocr_tensor *dy, ocr_tensor *dx);
OCRDEF int ocr_nn_add_forward(ocr_ctx *ctx, const ocr_tensor *a, const ocr_tensor *b, ocr_tensor *y);
OCRDEF int ocr_nn_add_backward(ocr_ctx *ctx, const ocr_tensor *dy, ocr_tensor *da, ocr_tensor *db);
/* Inference fusions, CPU only, each equal bit for bit to the ops it names run one after the other, in one pass:
   y = max(a + b, 0) (add_forward, relu_forward); y = a + upsample_nearest(x, factor) with a and y
   [N,C,H*factor,W*factor] (upsample_nearest_forward, add_forward). y may be a. */
OCRDEF int ocr_nn_add_relu_forward(ocr_ctx *ctx, const ocr_tensor *a, const ocr_tensor *b, ocr_tensor *y);
OCRDEF int ocr_nn_add_upsampled_forward(ocr_ctx *ctx, const ocr_tensor *a, const ocr_tensor *x, int factor, ocr_tensor *y);
/* max pooling with -inf padding; argmax [N,C,OH,OW] I32 holds the winning h*W+w of each output */
OCRDEF int ocr_nn_maxpool2d_forward(ocr_ctx *ctx, const ocr_tensor *x, int kernel, int stride, int pad,
                                    ocr_tensor *y, ocr_tensor *argmax);
OCRDEF int ocr_nn_maxpool2d_backward(ocr_ctx *ctx, const ocr_tensor *dy, const ocr_tensor *argmax, ocr_tensor *dx);
OCRDEF int ocr_nn_upsample_nearest_forward(ocr_ctx *ctx, const ocr_tensor *x, int factor, ocr_tensor *y);
OCRDEF int ocr_nn_upsample_nearest_backward(ocr_ctx *ctx, const ocr_tensor *dy, int factor, ocr_tensor *dx);
/* concatenation along channels (dim 1) */
OCRDEF int ocr_nn_concat_forward(ocr_ctx *ctx, const ocr_tensor *const *xs, int n, ocr_tensor *y);
OCRDEF int ocr_nn_concat_backward(ocr_ctx *ctx, const ocr_tensor *dy, ocr_tensor *const *dxs, int n);
/* y = concat(upsample_nearest(xs[i], factors[i]) for i < n) (factor 1: the part itself), each part [N, Ci, H/f, W/f],
   written in one pass: upsample_nearest_forward and concat_forward fused (inference). CPU only. */
OCRDEF int ocr_nn_concat_upsampled_forward(ocr_ctx *ctx, const ocr_tensor *const *xs, const int *factors, int n, ocr_tensor *y);
/* y = conv2d(concat_upsampled(xs, factors, n), w) + b, then ReLU when relu (inference). Where the convolution takes
   Winograd's path it reads the parts as it goes and cat, which has the concatenation's shape, is left unwritten;
   elsewhere the concatenation is written into cat first. The same values either way. CPU only; at most 8 parts. */
OCRDEF int ocr_nn_concat_conv2d_forward(ocr_ctx *ctx, const ocr_tensor *const *xs, const int *factors, int n, ocr_tensor *cat,
                                        const ocr_tensor *w, const ocr_tensor *b, ocr_conv_params p, int relu, ocr_tensor *y);

/* ---- parameters: one contiguous value buffer and one gradient buffer, with a table of named views ---- */
typedef struct {
    char name[OCR_NAME_MAX];
    ocr_shape shape;
    size_t offset;    /* in floats from the start of the buffers */
    int trainable;    /* 0: a buffer such as BN running statistics (no gradient, no update) */
    int decay;        /* weight decay applies; default 1 for trainable entries */
} ocr_param_info;

typedef struct {
    float *data, *grad;   /* same layout; grad entries of non-trainable params stay 0 */
    size_t numel;
    ocr_param_info *info;
    int count, cap;
    int allocated;
    ocr_device device;    /* where data and grad live: the CPU after ocr_params_alloc, then ocr_params_to_device */
} ocr_params;

/* n zero-filled floats on dev (64-byte aligned on the CPU): the raw buffers of parameters, optimizer state and model
   activations. NULL with an error naming name on failure. */
OCRDEF float *ocr_floats_alloc(ocr_ctx *ctx, ocr_device dev, size_t n, const char *name);
OCRDEF void ocr_floats_free(float *p, ocr_device dev);

OCRDEF void ocr_params_init(ocr_params *P);
OCRDEF int ocr_params_add(ocr_ctx *ctx, ocr_params *P, const char *name, ocr_shape shape, int trainable, int *index);
OCRDEF int ocr_params_alloc(ocr_ctx *ctx, ocr_params *P);     /* after the last add; zero-filled */
OCRDEF void ocr_params_free(ocr_params *P);
OCRDEF int ocr_params_find(const ocr_params *P, const char *name);
OCRDEF ocr_tensor ocr_params_value(const ocr_params *P, int index);
OCRDEF ocr_tensor ocr_params_grad(const ocr_params *P, int index);   /* named "<name>.grad" */
/* Views carry P->device. On the CUDA device a failure to zero can only follow an earlier sticky CUDA error, which the
   next checked call reports. */
OCRDEF void ocr_params_zero_grad(ocr_params *P);
/* Moves values and gradients to dev (copying both; a no-op when already there). Optimizers are initialised after. */
OCRDEF int ocr_params_to_device(ocr_ctx *ctx, ocr_params *P, ocr_device dev);
/* A CPU copy of P's table and values (gradients zero), e.g. to save or inspect device parameters; ocr_params_free it. */
OCRDEF int ocr_params_host_copy(ocr_ctx *ctx, const ocr_params *P, ocr_params *host);
/* Copies every value of src into dst, which has the same table; the two may be on different devices. */
OCRDEF int ocr_params_copy_values(ocr_ctx *ctx, ocr_params *dst, const ocr_params *src);
OCRDEF size_t ocr_params_trainable_count(const ocr_params *P);
/* Exponential moving average of the values: avg[i] = decay * avg[i] + (1 - decay) * value[i] for every entry (BN
   running statistics too), avg being P->numel floats on P's device (ocr_floats_alloc). decay 0 copies the values. */
OCRDEF int ocr_params_ema(ocr_ctx *ctx, float *avg, const ocr_params *P, float decay);
enum { OCR_LOAD_ALLOW_MISSING = 1, OCR_LOAD_ALLOW_UNEXPECTED = 2 };
/* Loads every param whose name starts with prefix from the entry named (name without prefix), e.g. prefix
   "backbone." takes a torchvision ResNet file. Strict unless flags relax it; F16/BF16 are converted.
   Names, shapes, dtypes and values are all checked first: a refused load leaves every parameter as it was. A value
   that is NaN, infinite or larger in magnitude than OCR_LOAD_MAX_ABS is refused naming the tensor, its index and the
   value (OCR_ENONFINITE, or OCR_ERANGE when finite). Device parameters load through a host copy; saving writes the
   values wherever they live. */
#ifndef OCR_LOAD_MAX_ABS
/* Trained weights and BN statistics stay many orders below this; squared (variances, weight decay, gradient norms)
   a value above it comes within a few orders of float's 3.4e38 and turns a forward pass into Inf. */
#define OCR_LOAD_MAX_ABS 1e15
#endif
OCRDEF int ocr_params_load(ocr_ctx *ctx, ocr_params *P, const ocr_safetensors *st, const char *prefix, unsigned flags);
OCRDEF int ocr_params_save(ocr_ctx *ctx, const ocr_params *P, const char *path,
                           const char *const *meta_keys, const char *const *meta_values, int n_meta);

/* ---- optimizers (torch.optim.SGD and torch.optim.AdamW semantics) ---- */
typedef enum { OCR_OPTIM_SGD = 0, OCR_OPTIM_ADAMW = 1 } ocr_optim_kind;
typedef struct {
    ocr_optim_kind kind;
    float momentum, dampening, weight_decay; int nesterov;   /* SGD */
    float beta1, beta2, eps;                                 /* AdamW (weight_decay shared) */
} ocr_optim_config;
typedef struct {
    ocr_optim_config cfg;
    int64_t step;            /* updates done */
    float *m, *v;            /* SGD: momentum buffer in m; AdamW: first and second moments */
    size_t numel;
    ocr_device device;       /* of m and v: the parameters' device at ocr_optim_init */
} ocr_optimizer;
OCRDEF ocr_optim_config ocr_optim_sgd(float momentum, float weight_decay, int nesterov);
OCRDEF ocr_optim_config ocr_optim_adamw(float beta1, float beta2, float eps, float weight_decay);
OCRDEF int ocr_optim_init(ocr_ctx *ctx, ocr_optimizer *opt, const ocr_params *P, ocr_optim_config cfg);
OCRDEF int ocr_optim_step(ocr_ctx *ctx, ocr_optimizer *opt, ocr_params *P, float lr);
OCRDEF void ocr_optim_free(ocr_optimizer *opt);
/* Optimizer state as a safetensors file, so that any program can stop and resume a run exactly: the kind, its
   hyper-parameters and step count as metadata under "optim." (format "optim.version" 1), the moments as F32 tensors
   of numel floats ("optim.m": AdamW's first moment or SGD's momentum buffer; "optim.v": AdamW's second moment), and
   with avg != NULL a weight average of numel floats on the optimizer's device (ocr_params_ema's buffer) as "ema".
   Device state is staged through host memory. The caller's metadata pairs are written as given (their keys may not
   start with "optim."); the write is atomic. Non-finite state is refused, as the reader would refuse it. */
OCRDEF int ocr_optim_save(ocr_ctx *ctx, const ocr_optimizer *opt, const float *avg, const char *path,
                          const char *const *meta_keys, const char *const *meta_values, int n_meta);
/* Restores the state from an opened file into opt (after ocr_optim_init with the same parameters) and, with
   avg != NULL, the weight average, which must then be in the file. Refused, leaving opt and avg as they were: a file of
   another optimizer kind or numel (both named), a format version above 1, a malformed or out-of-range value, a
   tensor that is not F32 [numel] or holds NaN/Inf, and anything under the library's names this version cannot
   restore (a tensor other than optim.m, optim.v and ema, an unknown "optim." key): resuming without it would not be
   exact. The step and hyper-parameters become the file's, as torch's load_state_dict does. The caller's metadata
   stays in st for it to read (ocr_safetensors_meta). A file without "optim.version" (train_dbnet's .optim files
   before this format) holds only the tensors: they are checked and read, and opt's step and settings stay as they
   were. */
OCRDEF int ocr_optim_load(ocr_ctx *ctx, ocr_optimizer *opt, float *avg, const ocr_safetensors *st);
/* base_lr * (1 - step/total)^power, clamped at 0 past the end */
OCRDEF float ocr_lr_poly(float base_lr, int64_t step, int64_t total, float power);
/* Scales all trainable gradients so their global L2 norm is at most max_norm (torch clip_grad_norm_,
   coefficient max_norm/(norm+1e-6)). *norm_out gets the norm before clipping; a non-finite norm is an error. */
OCRDEF int ocr_clip_grad_norm(ocr_ctx *ctx, ocr_params *P, float max_norm, float *norm_out);

/* ---- dynamic loss scaling (torch.cuda.amp.GradScaler's semantics) ----
   fp16 gradients below 2^-24 become zero and above 65504 become Inf: the loss's output gradients are multiplied by
   scale before the backward pass (ocr_grad_scaler_scale), the parameter gradients divided by it after
   (ocr_grad_scaler_unscale, which also tells whether any is NaN or Inf), and ocr_grad_scaler_update then halves the
   scale after a non-finite step (which the caller skips) or doubles it after growth_interval clean steps in a row.
   Per step:
       ocr_grad_scaler_scale(&ctx, &sc, &d_logits); ocr_grad_scaler_scale(&ctx, &sc, &d_thresh);
       ocr_dbnet_backward(...);
       ocr_grad_scaler_unscale(&ctx, &sc, &P, &found_inf);
       if (!found_inf) { ocr_clip_grad_norm(...); ocr_optim_step(...); }
       ocr_grad_scaler_update(&ctx, &sc, found_inf);   (an error when the scale has fallen below min_scale)
   The struct is plain data: ocr_grad_scaler_meta / ocr_grad_scaler_from_meta carry it through a checkpoint's metadata
   so that a resumed run continues with the same scale and counter. A disabled scaler (bf16, fp32) leaves gradients
   alone and still reports non-finite ones. */
typedef struct {
    int enabled;
    float scale;                 /* 65536 at the start */
    float growth_factor;         /* 2 */
    float backoff_factor;        /* 0.5 */
    int growth_interval;         /* 2000 clean steps before growing */
    int growth_tracker;          /* clean steps since the scale last changed */
    float min_scale;             /* below this the gradients are non-finite at every scale: an error (default 2^-24) */
    int64_t skipped;             /* steps skipped in all */
    int64_t skipped_in_a_row;
    char last_nonfinite[OCR_NAME_MAX + 64]; /* the first parameter whose gradient was non-finite at the last skip */
} ocr_grad_scaler;
OCRDEF ocr_grad_scaler ocr_grad_scaler_default(int enabled);
OCRDEF int ocr_grad_scaler_scale(ocr_ctx *ctx, const ocr_grad_scaler *sc, ocr_tensor *grad);
OCRDEF int ocr_grad_scaler_unscale(ocr_ctx *ctx, ocr_grad_scaler *sc, ocr_params *P, int *found_nonfinite);
OCRDEF int ocr_grad_scaler_update(ocr_ctx *ctx, ocr_grad_scaler *sc, int found_nonfinite);
/* Metadata pairs "amp.scale", "amp.growth_tracker", ... (keys and values point into buf, which must hold 512 bytes);
   returns how many. from_meta restores them from an opened file, refusing malformed or out-of-range values (a file
   without them leaves sc unchanged and returns OCR_OK). */
OCRDEF int ocr_grad_scaler_meta(const ocr_grad_scaler *sc, char *buf, const char **keys, const char **values);
OCRDEF int ocr_grad_scaler_from_meta(ocr_ctx *ctx, ocr_grad_scaler *sc, const ocr_safetensors *st);

/* ---- ops for recognition: LSTM, log-softmax, rectangular max pooling, map-to-sequence ----
   LSTM: one layer of torch.nn.LSTM (batch_first=False, zero initial states), forward and, with directions 2, the
   "_reverse" direction. Sequence-first layout: x [T, N, I] -> y [T, N, D*H], D = directions, the forward direction's
   hidden state in y[t, n, 0:H] and the reverse one's in y[t, n, H:2H], as PyTorch. Sequence-first because the
   input projection of every step is then one GEMM over T*N contiguous rows, and each step's N rows (its recurrent
   GEMM's output, the next step's input) are one contiguous block; a CNN feature map [N, C, 1, W] becomes [W, N, C].
   Per direction d (index 1 = the _reverse tensors), with gates in PyTorch's order i, f, g, o:
       a = W_ih[d] x_t + b_ih[d] + W_hh[d] h_prev + b_hh[d]         w_ih [4H, I], w_hh [4H, H], b_ih, b_hh [4H]
       i, f, o = sigmoid(a_i, a_f, a_o), g = tanh(a_g); c = f c_prev + i g; h = o tanh(c)
   h_prev, c_prev are step t-1's (forward) or t+1's (reverse) and 0 at the first step. lengths (I32 [N], each 1..T;
   NULL: every sequence has T steps) gives each sample's length, as torch's pack_padded_sequence: steps t >= lengths[n]
   are padding, their output 0, and the reverse direction starts at t = lengths[n] - 1 from zero states (padded steps
   keep zero gates and cell, so the backward needs no lengths: nothing flows through them). A stack of layers is one
   call per layer, layer k's y being layer k+1's x; weights under PyTorch's names: ocr_lstm_params_add.
   saved [D, T, N, 5H] receives, per step, the activated gates i, f, g, o and the cell state c, which the backward
   needs with x and y; saved NULL (inference) uses scratch instead. Mixed precision: the GEMMs follow ocr_gemm's rule
   (half-type inputs, fp32 accumulation); the gates, the cell state and every gradient sum stay fp32.
   Backward through time accumulates dx and every weight gradient given (NULL skips one). On a CUDA context the
   tensors are device memory except lengths, which stays on the host. */
typedef struct {
    int directions;                        /* 1, or 2 for bidirectional */
    const ocr_tensor *w_ih[2], *w_hh[2];   /* per direction; [1] only with directions 2 */
    const ocr_tensor *b_ih[2], *b_hh[2];   /* NULL: no bias (PyTorch's bias=False leaves out both) */
} ocr_lstm_weights;
typedef struct {
    ocr_tensor *w_ih[2], *w_hh[2], *b_ih[2], *b_hh[2];   /* accumulated into; NULL skips one */
} ocr_lstm_grads;
/* y [T, N, D*H] and saved [D, T, N, 5H] for input x [T, N, I]; checks the weights' shapes */
OCRDEF int ocr_nn_lstm_shapes(ocr_ctx *ctx, ocr_shape x, const ocr_lstm_weights *w, ocr_shape *y, ocr_shape *saved);
OCRDEF int ocr_nn_lstm_forward(ocr_ctx *ctx, const ocr_tensor *x, const ocr_lstm_weights *w, const ocr_tensor *lengths, ocr_tensor *y,
                               ocr_tensor *saved);
OCRDEF int ocr_nn_lstm_backward(ocr_ctx *ctx, const ocr_tensor *x, const ocr_lstm_weights *w, const ocr_tensor *y,
                                const ocr_tensor *saved, const ocr_tensor *dy, ocr_tensor *dx, const ocr_lstm_grads *g);
/* Adds layer `layer`'s parameters to P under torch.nn.LSTM's names after prefix ("rnn." and layer 1 give
   "rnn.weight_ih_l1", "rnn.weight_hh_l1", "rnn.bias_ih_l1", "rnn.bias_hh_l1", then the same with "_reverse" when
   directions is 2); index (may be NULL) receives their indexes in that order (4 or 8 of them). */
OCRDEF int ocr_lstm_params_add(ocr_ctx *ctx, ocr_params *P, const char *prefix, int layer, int64_t input, int64_t hidden,
                               int directions, int *index);

/* log_softmax over the last axis (torch.log_softmax(x, dim=-1)), rows of any shape: y = x - max - log(sum exp(x - max)).
   Finite x gives finite y: a value below -FLT_MAX (a row spanning more than float's range) is clamped there, where
   torch gives -inf. y may alias x. Backward from the output: dx += dy - exp(y) * sum(dy) along the row; dx
   must not overlap y or dy. */
OCRDEF int ocr_nn_log_softmax_forward(ocr_ctx *ctx, const ocr_tensor *x, ocr_tensor *y);
OCRDEF int ocr_nn_log_softmax_backward(ocr_ctx *ctx, const ocr_tensor *y, const ocr_tensor *dy, ocr_tensor *dx);

/* Max pooling with a rectangular window (torch.nn.functional.max_pool2d(x, (kh, kw), (sh, sw), (ph, pw))): CRNN's
   pools that halve the height and keep the width. -inf padding (each pad at most half its kernel), output
   floor((H + 2ph - kh) / sh) + 1 by floor((W + 2pw - kw) / sw) + 1, argmax (I32, may be NULL) as
   ocr_nn_maxpool2d_forward's, so ocr_nn_maxpool2d_backward is its backward. */
OCRDEF int ocr_nn_maxpool2d_rect_forward(ocr_ctx *ctx, const ocr_tensor *x, int kh, int kw, int sh, int sw, int ph, int pw,
                                         ocr_tensor *y, ocr_tensor *argmax);
/* CRNN's map-to-sequence: a feature map x [N, C, H, W] becomes the sequence y [W, N, C*H] (one step per column),
   y[w, n, c*H + h] = x[n, c, h, w], torch's x.permute(3, 0, 1, 2).reshape(W, N, C * H) (with H = 1:
   x.squeeze(2).permute(2, 0, 1)). Backward: dx[n, c, h, w] += dy[w, n, c*H + h]. */
OCRDEF int ocr_nn_map_to_seq_forward(ocr_ctx *ctx, const ocr_tensor *x, ocr_tensor *y);
OCRDEF int ocr_nn_map_to_seq_backward(ocr_ctx *ctx, const ocr_tensor *dy, ocr_tensor *dx);
/* torch.nn.Linear on the last axis: x [..., I] (rows R = its other axes), w [K, I], b [K] or NULL, y [..., K] (the
   same leading axes): y = x w^T + b. Backward accumulates dx += dy w, dw += dy^T x and db += the column sums of dy
   (each may be NULL; db in row order in fp32, the same on every device). The GEMMs follow ocr_gemm's rule. */
OCRDEF int ocr_nn_linear_forward(ocr_ctx *ctx, const ocr_tensor *x, const ocr_tensor *w, const ocr_tensor *b, ocr_tensor *y);
OCRDEF int ocr_nn_linear_backward(ocr_ctx *ctx, const ocr_tensor *x, const ocr_tensor *w, const ocr_tensor *dy, ocr_tensor *dx,
                                  ocr_tensor *dw, ocr_tensor *db);
/* Zeroes the columns w >= widths[n] of sample n of x [N, C, H, W] (padding to the right of a narrower crop in a
   batch); widths I32 [N] on the host, each >= 0 (at least W: nothing zeroed). */
OCRDEF int ocr_nn_mask_columns(ocr_ctx *ctx, ocr_tensor *x, const ocr_tensor *widths);

#ifdef OCR_CUDA
/* ---- CUDA entry points (ocr_cuda.cu). The ocr_nn_* ops above validate their arguments and then call these when
   ctx->device is OCR_DEVICE_CUDA; same arguments and semantics, tensors in device memory. ---- */
OCRDEF int ocr_cuda_gemm(ocr_ctx *ctx, int trans_a, int trans_b, int64_t M, int64_t N, int64_t K, float alpha,
                         const float *A, int64_t lda, const float *B, int64_t ldb, float beta, float *C, int64_t ldc);
OCRDEF int ocr_cuda_conv2d_forward(ocr_ctx *ctx, const ocr_tensor *x, const ocr_tensor *w, const ocr_tensor *b,
                                   ocr_conv_params p, ocr_tensor *y);
OCRDEF int ocr_cuda_conv2d_backward(ocr_ctx *ctx, const ocr_tensor *x, const ocr_tensor *w, const ocr_tensor *dy,
                                    ocr_conv_params p, ocr_tensor *dx, ocr_tensor *dw, ocr_tensor *db);
OCRDEF int ocr_cuda_conv_transpose2d_forward(ocr_ctx *ctx, const ocr_tensor *x, const ocr_tensor *w, const ocr_tensor *b,
                                             ocr_conv_params p, ocr_tensor *y);
OCRDEF int ocr_cuda_conv_transpose2d_backward(ocr_ctx *ctx, const ocr_tensor *x, const ocr_tensor *w, const ocr_tensor *dy,
                                              ocr_conv_params p, ocr_tensor *dx, ocr_tensor *dw, ocr_tensor *db);
OCRDEF int ocr_cuda_batchnorm2d_forward(ocr_ctx *ctx, const ocr_tensor *x, const ocr_tensor *gamma, const ocr_tensor *beta,
                                        ocr_tensor *running_mean, ocr_tensor *running_var, int training, float momentum,
                                        float eps, ocr_tensor *save_mean, ocr_tensor *save_invstd, ocr_tensor *y);
OCRDEF int ocr_cuda_batchnorm2d_backward(ocr_ctx *ctx, const ocr_tensor *x, const ocr_tensor *gamma, const ocr_tensor *save_mean,
                                         const ocr_tensor *save_invstd, const ocr_tensor *dy, int training,
                                         ocr_tensor *dx, ocr_tensor *dgamma, ocr_tensor *dbeta);
OCRDEF int ocr_cuda_relu_forward(ocr_ctx *ctx, const ocr_tensor *x, ocr_tensor *y);
OCRDEF int ocr_cuda_relu_backward(ocr_ctx *ctx, const ocr_tensor *y, const ocr_tensor *dy, ocr_tensor *dx);
OCRDEF int ocr_cuda_sigmoid_forward(ocr_ctx *ctx, const ocr_tensor *x, ocr_tensor *y);
OCRDEF int ocr_cuda_sigmoid_backward(ocr_ctx *ctx, const ocr_tensor *y, const ocr_tensor *dy, ocr_tensor *dx);
OCRDEF int ocr_cuda_add_forward(ocr_ctx *ctx, const ocr_tensor *a, const ocr_tensor *b, ocr_tensor *y);
OCRDEF int ocr_cuda_add_backward(ocr_ctx *ctx, const ocr_tensor *dy, ocr_tensor *da, ocr_tensor *db);
OCRDEF int ocr_cuda_maxpool2d_forward(ocr_ctx *ctx, const ocr_tensor *x, int kernel, int stride, int pad, ocr_tensor *y, ocr_tensor *argmax);
OCRDEF int ocr_cuda_maxpool2d_backward(ocr_ctx *ctx, const ocr_tensor *dy, const ocr_tensor *argmax, ocr_tensor *dx);
OCRDEF int ocr_cuda_upsample_nearest_forward(ocr_ctx *ctx, const ocr_tensor *x, int factor, ocr_tensor *y);
OCRDEF int ocr_cuda_upsample_nearest_backward(ocr_ctx *ctx, const ocr_tensor *dy, int factor, ocr_tensor *dx);
OCRDEF int ocr_cuda_concat_forward(ocr_ctx *ctx, const ocr_tensor *const *xs, int n, ocr_tensor *y);
OCRDEF int ocr_cuda_concat_backward(ocr_ctx *ctx, const ocr_tensor *dy, ocr_tensor *const *dxs, int n);
OCRDEF int ocr_cuda_log_softmax_forward(ocr_ctx *ctx, const ocr_tensor *x, ocr_tensor *y);
OCRDEF int ocr_cuda_log_softmax_backward(ocr_ctx *ctx, const ocr_tensor *y, const ocr_tensor *dy, ocr_tensor *dx);
OCRDEF int ocr_cuda_maxpool2d_rect_forward(ocr_ctx *ctx, const ocr_tensor *x, int kh, int kw, int sh, int sw, int ph, int pw,
                                          ocr_tensor *y, ocr_tensor *argmax);
OCRDEF int ocr_cuda_map_to_seq_forward(ocr_ctx *ctx, const ocr_tensor *x, ocr_tensor *y);
OCRDEF int ocr_cuda_map_to_seq_backward(ocr_ctx *ctx, const ocr_tensor *dy, ocr_tensor *dx);
OCRDEF int ocr_cuda_linear_forward(ocr_ctx *ctx, const ocr_tensor *x, const ocr_tensor *w, const ocr_tensor *b, ocr_tensor *y);
OCRDEF int ocr_cuda_linear_backward(ocr_ctx *ctx, const ocr_tensor *x, const ocr_tensor *w, const ocr_tensor *dy, ocr_tensor *dx,
                                    ocr_tensor *dw, ocr_tensor *db);
OCRDEF int ocr_cuda_mask_columns(ocr_ctx *ctx, ocr_tensor *x, const ocr_tensor *widths);
OCRDEF int ocr_cuda_lstm_forward(ocr_ctx *ctx, const ocr_tensor *x, const ocr_lstm_weights *w, const ocr_tensor *lengths, ocr_tensor *y,
                                 ocr_tensor *saved);
OCRDEF int ocr_cuda_lstm_backward(ocr_ctx *ctx, const ocr_tensor *x, const ocr_lstm_weights *w, const ocr_tensor *y, const ocr_tensor *saved,
                                  const ocr_tensor *dy, ocr_tensor *dx, const ocr_lstm_grads *g);
/* Optimizer updates and reductions over raw device buffers of n floats, with ocr_optim_step's formulas.
   first_step: the SGD momentum buffer starts as the gradient; steps_done: AdamW updates made before this one. */
OCRDEF int ocr_cuda_sgd_update(ocr_ctx *ctx, float *param, const float *grad, float *momentum_buf, int64_t n, float lr,
                               float momentum, float dampening, float weight_decay, int nesterov, int first_step);
OCRDEF int ocr_cuda_adamw_update(ocr_ctx *ctx, float *param, const float *grad, float *m, float *v, int64_t n, float lr,
                                 float beta1, float beta2, float eps, float weight_decay, int64_t steps_done);
OCRDEF int ocr_cuda_sum_squares(ocr_ctx *ctx, const float *x, int64_t n, double *out);
OCRDEF int ocr_cuda_scale(ocr_ctx *ctx, float *x, int64_t n, float s);
OCRDEF int ocr_cuda_ema(ocr_ctx *ctx, float *avg, const float *x, int64_t n, float decay);
/* Zeroes bytes of device memory without a context (ocr_params_zero_grad); returns the CUDA status as OCR_OK/OCR_ECUDA. */
OCRDEF int ocr_cuda_zero_bytes(void *ptr, size_t bytes);
#endif

#ifdef __cplusplus
}
#endif
#endif /* OCR_NN_H */

/* ================================================================================================== */
#if defined(OCR_IMPLEMENTATION) && !defined(OCR_NO_IMPLEMENTATION) && !defined(OCR_NN_IMPLEMENTATION)
#define OCR_NN_IMPLEMENTATION
#endif

#if defined(OCR_NN_IMPLEMENTATION) && !defined(OCR__NN_IMPLEMENTED)
#define OCR__NN_IMPLEMENTED
#include <stdio.h>
#include <math.h>
#include <string.h>
#include <float.h>
#include <stdlib.h>

#if !defined(OCR_NO_SIMD) && (defined(__x86_64__) || defined(__i386__)) && (defined(__GNUC__) || defined(__clang__))
#define OCR__HAVE_AVX2 1
#include <immintrin.h>
#endif

#ifdef __cplusplus
extern "C" {
#endif

/* ================================================================================================== reference
   Every op once more as the direct loop of its PyTorch definition (named above each function): the yardstick the fast
   paths below are tested against (tests/test_nn_fast_paths.c), itself checked against PyTorch's numbers
   (tests/test_nn_parity.c), and what every CPU op runs instead of its fast path when ctx->debug_flags has
   OCR_DEBUG_REFERENCE (OCR_REFERENCE=1 in the environment). The public functions validate their arguments first
   and then call these, so everything here may assume consistent shapes. Same contracts as the fast paths: forward
   functions overwrite their output, backward functions accumulate into every gradient given (relu and batchnorm
   backwards overwrite instead when dx is dy itself). Sums over many terms accumulate in double. Work is divided only
   into independent output planes or channels, each computed the same way on any thread, so the results do not
   depend on the thread count.
   Not duplicated here: ocr_optim_step (CPU), ocr_clip_grad_norm and ocr_params_ema, whose CPU code is already the
   plain loop of its formula. */

typedef struct {
    int64_t N, C, H, W;    /* input of the convolution in the forward (conv2d) sense */
    int64_t K, OH, OW;     /* output channels and size */
    int kh, kw, sh, sw, ph, pw, dh, dw, groups;
} ocr__conv_geom;

/* With OCR_DEBUG_REFERENCE every op below runs its reference. Asked after the CUDA dispatch: the device is the CPU. */
static int ocr__use_ref(const ocr_ctx *ctx) { return (ctx->debug_flags & OCR_DEBUG_REFERENCE) != 0; }

/* torch.addmm(C, op(A), op(B), beta=beta, alpha=alpha) on row-major matrices; beta 0 ignores C (NaN included) and
   alpha 0 or K 0 leave beta * C, as BLAS does. */
static void ocr__ref_gemm(int trans_a, int trans_b, int64_t M, int64_t N, int64_t K, float alpha, const float *A, int64_t lda,
                          const float *B, int64_t ldb, float beta, float *C, int64_t ldc) {
    int64_t i, j, k;
    for (i = 0; i < M; i++)
        for (j = 0; j < N; j++) {
            double s = 0.0;
            float *c = C + i * ldc + j;
            if (alpha != 0.0f)
                for (k = 0; k < K; k++) s += (double)(trans_a ? A[k * lda + i] : A[i * lda + k]) * (trans_b ? B[j * ldb + k] : B[k * ldb + j]);
            *c = (float)(alpha * s) + (beta == 0.0f ? 0.0f : beta * *c);
        }
}

/* The outputs o in [0, n_out) whose input position o * stride + off lies inside [0, n_in): [*lo, *hi). Lets the
   convolution loops below skip the zero padding instead of testing every tap. */
static void ocr__ref_span(int64_t off, int64_t stride, int64_t n_in, int64_t n_out, int64_t *lo, int64_t *hi) {
    int64_t first = off >= 0 ? 0 : (-off + stride - 1) / stride;      /* first o with o * stride + off >= 0 */
    int64_t end = n_in - off <= 0 ? 0 : (n_in - off - 1) / stride + 1; /* first o with o * stride + off >= n_in */
    *lo = first;
    *hi = end < n_out ? end : n_out;
    if (*hi < *lo) *hi = *lo;
}

typedef struct {
    const ocr__conv_geom *g;
    const float *x, *w, *bias, *dy;
    float *y, *dx, *dw;
    int relu, accumulate;
    double *acc[OCR_MAX_THREADS];   /* per thread: one plane (or row) of double sums */
} ocr__ref_conv_job;

/* torch.nn.functional.conv2d (then relu when relu): for output plane (n, k) of group gr = k / (K/groups),
   y[n,k,oh,ow] = bias[k] + sum over c < C/groups, i < kh, j < kw of
                  w[k,c,i,j] * x[n, gr*C/groups + c, oh*sh - ph + i*dh, ow*sw - pw + j*dw]   (0 outside the image).
   Work items: output planes n*K + k. accumulate: y += instead of y =. */
static void ocr__ref_conv_fwd_part(void *arg, int64_t begin, int64_t end, int tid) {
    const ocr__ref_conv_job *j = (const ocr__ref_conv_job *)arg;
    const ocr__conv_geom *g = j->g;
    int64_t Cg = g->C / g->groups, Kg = g->K / g->groups, P = g->OH * g->OW, item, c, i, jj, oh, ow, lo, hi, q;
    double *acc = j->acc[tid];
    for (item = begin; item < end; item++) {
        int64_t n = item / g->K, k = item % g->K;
        const float *xg = j->x + (n * g->C + (k / Kg) * Cg) * g->H * g->W;   /* the first input plane of k's group */
        float *y = j->y + item * P;
        for (q = 0; q < P; q++) acc[q] = 0.0;
        for (c = 0; c < Cg; c++)
            for (i = 0; i < g->kh; i++)
                for (jj = 0; jj < g->kw; jj++) {
                    double wv = j->w[((k * Cg + c) * g->kh + i) * g->kw + jj];
                    ocr__ref_span((int64_t)jj * g->dw - g->pw, g->sw, g->W, g->OW, &lo, &hi);
                    for (oh = 0; oh < g->OH; oh++) {
                        int64_t ih = oh * g->sh - g->ph + (int64_t)i * g->dh;
                        int64_t base = (c * g->H + ih) * g->W + (int64_t)jj * g->dw - g->pw; /* x column ow*sw - pw + jj*dw */
                        if (ih < 0 || ih >= g->H) continue;
                        for (ow = lo; ow < hi; ow++) acc[oh * g->OW + ow] += wv * xg[base + ow * g->sw];
                    }
                }
        for (q = 0; q < P; q++) {
            float v = (float)acc[q] + (j->bias ? j->bias[k] : 0.0f);
            if (j->relu && v < 0.0f) v = 0.0f;   /* NaN stays NaN, as torch.relu */
            y[q] = j->accumulate ? y[q] + v : v;
        }
    }
}

/* The input gradient of conv2d (torch.nn.grad.conv2d_input): every term of the sum above sends w * dy back to the
   input it read, dx[n, gr*C/groups + c, oh*sh - ph + i*dh, ow*sw - pw + j*dw] += w[k,c,i,j] * dy[n,k,oh,ow].
   Work items: input planes n*C + c, each summing over the output channels of its group. Accumulates into dx. */
static void ocr__ref_conv_dx_part(void *arg, int64_t begin, int64_t end, int tid) {
    const ocr__ref_conv_job *j = (const ocr__ref_conv_job *)arg;
    const ocr__conv_geom *g = j->g;
    int64_t Cg = g->C / g->groups, Kg = g->K / g->groups, HW = g->H * g->W, item, k, i, jj, oh, ow, lo, hi, q;
    double *acc = j->acc[tid];
    for (item = begin; item < end; item++) {
        int64_t n = item / g->C, c = item % g->C, k0 = (c / Cg) * Kg;
        float *dx = j->dx + item * HW;
        for (q = 0; q < HW; q++) acc[q] = 0.0;
        for (k = k0; k < k0 + Kg; k++)
            for (i = 0; i < g->kh; i++)
                for (jj = 0; jj < g->kw; jj++) {
                    double wv = j->w[((k * Cg + c % Cg) * g->kh + i) * g->kw + jj];
                    const float *dyk = j->dy + (n * g->K + k) * g->OH * g->OW;
                    ocr__ref_span((int64_t)jj * g->dw - g->pw, g->sw, g->W, g->OW, &lo, &hi);
                    for (oh = 0; oh < g->OH; oh++) {
                        int64_t ih = oh * g->sh - g->ph + (int64_t)i * g->dh, base = ih * g->W + (int64_t)jj * g->dw - g->pw;
                        if (ih < 0 || ih >= g->H) continue;
                        for (ow = lo; ow < hi; ow++) acc[base + ow * g->sw] += wv * dyk[oh * g->OW + ow];
                    }
                }
        for (q = 0; q < HW; q++) dx[q] += (float)acc[q];
    }
}

/* The weight gradient of conv2d (torch.nn.grad.conv2d_weight):
   dw[k,c,i,j] += sum over n, oh, ow of dy[n,k,oh,ow] * x[n, gr*C/groups + c, oh*sh - ph + i*dh, ow*sw - pw + j*dw].
   Work items: output channels k. The sum over ow runs in a row of partial sums (one per ow), added up at the end,
   so that the innermost loop is a vector multiply-add rather than one long dependent chain. */
static void ocr__ref_conv_dw_part(void *arg, int64_t begin, int64_t end, int tid) {
    const ocr__ref_conv_job *j = (const ocr__ref_conv_job *)arg;
    const ocr__conv_geom *g = j->g;
    int64_t Cg = g->C / g->groups, Kg = g->K / g->groups, k, c, i, jj, n, oh, ow, lo, hi;
    double *acc = j->acc[tid];
    for (k = begin; k < end; k++)
        for (c = 0; c < Cg; c++)
            for (i = 0; i < g->kh; i++)
                for (jj = 0; jj < g->kw; jj++) {
                    double s = 0.0;
                    ocr__ref_span((int64_t)jj * g->dw - g->pw, g->sw, g->W, g->OW, &lo, &hi);
                    for (ow = 0; ow < g->OW; ow++) acc[ow] = 0.0;
                    for (n = 0; n < g->N; n++) {
                        const float *xc = j->x + (n * g->C + (k / Kg) * Cg + c) * g->H * g->W;
                        const float *dyk = j->dy + (n * g->K + k) * g->OH * g->OW;
                        for (oh = 0; oh < g->OH; oh++) {
                            int64_t ih = oh * g->sh - g->ph + (int64_t)i * g->dh, base = ih * g->W + (int64_t)jj * g->dw - g->pw;
                            if (ih < 0 || ih >= g->H) continue;
                            for (ow = lo; ow < hi; ow++) acc[ow] += (double)dyk[oh * g->OW + ow] * xc[base + ow * g->sw];
                        }
                    }
                    for (ow = 0; ow < g->OW; ow++) s += acc[ow];
                    j->dw[((k * Cg + c) * g->kh + i) * g->kw + jj] += (float)s;
                }
}

/* Runs one of the three parts above over its work items with a double buffer of `floats` per thread. */
static int ocr__ref_conv_run(ocr_ctx *ctx, ocr__ref_conv_job *j, int64_t items, int64_t floats, ocr_range_fn fn) {
    int t;
    for (t = 0; t < ctx->n_threads; t++)
        if (!(j->acc[t] = (double *)ocr_ctx_scratch(ctx, OCR_SCRATCH_THREAD0 + t, (size_t)(floats > 0 ? floats : 1) * sizeof(double))))
            return ctx->last_status;
    ocr_parallel_for(ctx, items, 1, fn, j);
    return OCR_OK;
}

/* db[k] += sum over n and the P pixels of dy[n,k] (the bias gradient of both convolutions) */
static void ocr__ref_bias_grad(const float *dy, float *db, int64_t N, int64_t K, int64_t P) {
    int64_t n, k, p;
    for (k = 0; k < K; k++) {
        double s = 0.0;
        for (n = 0; n < N; n++)
            for (p = 0; p < P; p++) s += dy[(n * K + k) * P + p];
        db[k] += (float)s;
    }
}

/* torch.nn.functional.conv2d, with relu: torch.relu(conv2d(...)). y is overwritten. */
static int ocr__ref_conv2d_forward(ocr_ctx *ctx, const ocr__conv_geom *g, const float *x, const float *w, const float *b, int relu,
                                   float *y) {
    ocr__ref_conv_job j;
    memset(&j, 0, sizeof j);
    j.g = g; j.x = x; j.w = w; j.bias = b; j.y = y; j.relu = relu;
    return ocr__ref_conv_run(ctx, &j, g->N * g->K, g->OH * g->OW, ocr__ref_conv_fwd_part);
}

/* conv2d's backward: dx, dw and db (each optional) accumulate. */
static int ocr__ref_conv2d_backward(ocr_ctx *ctx, const ocr__conv_geom *g, const float *x, const float *w, const float *dy, float *dx,
                                    float *dw, float *db) {
    ocr__ref_conv_job j;
    int rc;
    memset(&j, 0, sizeof j);
    j.g = g; j.x = x; j.w = w; j.dy = dy; j.dx = dx; j.dw = dw;
    if (dx && (rc = ocr__ref_conv_run(ctx, &j, g->N * g->C, g->H * g->W, ocr__ref_conv_dx_part))) return rc;
    if (dw && (rc = ocr__ref_conv_run(ctx, &j, g->K, g->OW, ocr__ref_conv_dw_part))) return rc;
    if (db) ocr__ref_bias_grad(dy, db, g->N, g->K, g->OH * g->OW);
    return OCR_OK;
}

/* torch.nn.functional.conv_transpose2d, which PyTorch defines as the input gradient of the conv2d that has the same
   weight: g is that conv2d's geometry (C, H, W: the transposed convolution's output; K, OH, OW: its input), so
   y = bias + conv2d_input(x). y is overwritten. */
static int ocr__ref_conv_transpose2d_forward(ocr_ctx *ctx, const ocr__conv_geom *g, const float *x, const float *w, const float *b,
                                             float *y) {
    ocr__ref_conv_job j;
    int64_t HW = g->H * g->W, q, plane;
    int rc;
    memset(&j, 0, sizeof j);
    j.g = g; j.w = w; j.dy = x; j.dx = y;
    memset(y, 0, (size_t)(g->N * g->C * HW) * sizeof(float));
    if ((rc = ocr__ref_conv_run(ctx, &j, g->N * g->C, HW, ocr__ref_conv_dx_part))) return rc;
    if (b)
        for (plane = 0; plane < g->N * g->C; plane++)
            for (q = 0; q < HW; q++) y[plane * HW + q] += b[plane % g->C];
    return OCR_OK;
}

/* conv_transpose2d's backward, by the same duality: dx += conv2d(dy, w), dw += conv2d_weight with the roles of x and dy
   swapped, db += the sum of dy. Each optional. */
static int ocr__ref_conv_transpose2d_backward(ocr_ctx *ctx, const ocr__conv_geom *g, const float *x, const float *w, const float *dy,
                                              float *dx, float *dw, float *db) {
    ocr__ref_conv_job j;
    int rc;
    memset(&j, 0, sizeof j);
    j.g = g; j.x = dy; j.w = w; j.y = dx; j.accumulate = 1; j.dy = x; j.dw = dw;
    if (dx && (rc = ocr__ref_conv_run(ctx, &j, g->N * g->K, g->OH * g->OW, ocr__ref_conv_fwd_part))) return rc;
    if (dw && (rc = ocr__ref_conv_run(ctx, &j, g->K, g->OW, ocr__ref_conv_dw_part))) return rc;
    if (db) ocr__ref_bias_grad(dy, db, g->N, g->C, g->H * g->W);
    return OCR_OK;
}

/* y = (x - mean) * invstd * gamma + beta per channel over x [N, C, P] (gamma, beta NULL: 1, 0), then max(y, 0) when
   relu (NaN stays). Shared by the forward and ocr_nn_batchnorm2d_apply, so the two agree bit for bit. */
static void ocr__ref_bn_normalize(const float *x, const float *gamma, const float *beta, const float *mean, const float *invstd,
                                  int relu, float *y, int64_t N, int64_t C, int64_t P) {
    int64_t n, c, p;
    for (n = 0; n < N; n++)
        for (c = 0; c < C; c++) {
            const float *xc = x + (n * C + c) * P;
            float *yc = y + (n * C + c) * P, ga = gamma ? gamma[c] : 1.0f, be = beta ? beta[c] : 0.0f;
            for (p = 0; p < P; p++) {
                float v = (xc[p] - mean[c]) * invstd[c] * ga + be;
                yc[p] = relu && v < 0.0f ? 0.0f : v;
            }
        }
}

/* torch.nn.functional.batch_norm (then relu when relu) on x [N, C, P]. training: per channel the mean and the biased
   variance over N and P normalise; running_mean = (1 - momentum) * running_mean + momentum * mean and running_var the
   same with the unbiased variance (n / (n - 1) times the biased). Eval: the running statistics normalise.
   Both: save_mean = the mean used, save_invstd = 1 / sqrt(var + eps). */
static void ocr__ref_bn_forward(const float *x, const float *gamma, const float *beta, float *rmean, float *rvar, int training,
                                float momentum, float eps, float *smean, float *sinv, int relu, float *y, int64_t N, int64_t C, int64_t P) {
    int64_t n, c, p, count = N * P;
    for (c = 0; c < C; c++) {
        double mean = rmean[c], var = rvar[c];
        if (training) {
            double s = 0.0, ss = 0.0;
            for (n = 0; n < N; n++)
                for (p = 0; p < P; p++) s += x[(n * C + c) * P + p];
            mean = s / (double)count;
            for (n = 0; n < N; n++)
                for (p = 0; p < P; p++) ss += (x[(n * C + c) * P + p] - mean) * (x[(n * C + c) * P + p] - mean);
            var = ss / (double)count;
            rmean[c] = (1.0f - momentum) * rmean[c] + momentum * (float)mean;
            rvar[c] = (1.0f - momentum) * rvar[c] + momentum * (float)(ss / (double)(count - 1)); /* count >= 2: checked */
        }
        smean[c] = (float)mean;
        sinv[c] = (float)(1.0 / sqrt(var + (double)eps));
    }
    ocr__ref_bn_normalize(x, gamma, beta, smean, sinv, relu, y, N, C, P);
}

/* batch_norm's backward (torch.ops.aten.native_batch_norm_backward) with the saved mean m and invstd s:
   xhat = (x - m) * s, g = dy (zero where relu_y <= 0 for the fused BN + ReLU, relu_y being its output);
   dbeta += sum g, dgamma += sum g * xhat over N and P; dx += gamma * s * (g - mean(g) - xhat * mean(g * xhat)) in training
   (the statistics depend on x), dx += gamma * s * g in eval (they are constants). dx == dy: overwritten instead. */
static void ocr__ref_bn_backward(const float *x, const float *relu_y, const float *gamma, const float *mean, const float *invstd,
                                 const float *dy, int training, float *dx, float *dgamma, float *dbeta, int64_t N, int64_t C, int64_t P) {
    int64_t n, c, p, i;
    for (c = 0; c < C; c++) {
        double sg = 0.0, sgx = 0.0;
        float m = mean[c], s = invstd[c], k = (gamma ? gamma[c] : 1.0f) * s, a, b;
        for (n = 0; n < N; n++)
            for (p = 0; p < P; p++) {
                i = (n * C + c) * P + p;
                {
                    float g = relu_y && !(relu_y[i] > 0.0f) ? 0.0f : dy[i];
                    sg += g;
                    sgx += (double)g * ((x[i] - m) * s);
                }
            }
        if (dgamma) dgamma[c] += (float)sgx;
        if (dbeta) dbeta[c] += (float)sg;
        if (!dx) continue;
        a = (float)(sg / (double)(N * P));
        b = (float)(sgx / (double)(N * P));
        for (n = 0; n < N; n++)
            for (p = 0; p < P; p++) {
                float g, t;
                i = (n * C + c) * P + p;
                g = relu_y && !(relu_y[i] > 0.0f) ? 0.0f : dy[i];
                t = training ? k * (g - a - (x[i] - m) * s * b) : k * g;
                dx[i] = (dx == dy ? 0.0f : dx[i]) + t;
            }
    }
}

/* torch.relu: y = max(x, 0), NaN stays NaN */
static void ocr__ref_relu_forward(const float *x, float *y, int64_t n) {
    int64_t i;
    for (i = 0; i < n; i++) y[i] = x[i] < 0.0f ? 0.0f : x[i];
}
/* relu's backward from its output y: dx += dy where y > 0 (dx == dy: overwritten with the masked dy) */
static void ocr__ref_relu_backward(const float *y, const float *dy, float *dx, int64_t n) {
    int64_t i;
    for (i = 0; i < n; i++) dx[i] = (dx == dy ? 0.0f : dx[i]) + (y[i] > 0.0f ? dy[i] : 0.0f);
}
/* torch.sigmoid: y = 1 / (1 + exp(-x)) (exp overflowing to inf gives the right 0) */
static void ocr__ref_sigmoid_forward(const float *x, float *y, int64_t n) {
    int64_t i;
    for (i = 0; i < n; i++) y[i] = (float)(1.0 / (1.0 + exp(-(double)x[i])));
}
/* sigmoid's backward from its output y: dx += dy * y * (1 - y) */
static void ocr__ref_sigmoid_backward(const float *y, const float *dy, float *dx, int64_t n) {
    int64_t i;
    for (i = 0; i < n; i++) dx[i] += dy[i] * y[i] * (1.0f - y[i]);
}
/* torch.add: y = a + b; its backward: da += dy and db += dy (each optional) */
static void ocr__ref_add_forward(const float *a, const float *b, float *y, int64_t n) {
    int64_t i;
    for (i = 0; i < n; i++) y[i] = a[i] + b[i];
}
static void ocr__ref_add_backward(const float *dy, float *da, float *db, int64_t n) {
    int64_t i;
    for (i = 0; i < n; i++) {
        if (da) da[i] += dy[i];
        if (db) db[i] += dy[i];
    }
}

/* torch.nn.functional.max_pool2d(x, kernel, stride, pad, return_indices=True) on planes [H, W] (NC of them): each output
   is the maximum of its window clipped to the plane (the padding is -inf, which never wins), argmax (optional) the
   index h*W + w of the first maximum in row-major order; a NaN wins over everything, the first NaN of the window. */
static void ocr__ref_maxpool2d_forward(const float *x, int64_t NC, int64_t H, int64_t W, int kernel, int stride, int pad, float *y,
                                      int32_t *argmax, int64_t OH, int64_t OW) {
    int64_t plane, oh, ow, ih, iw;
    for (plane = 0; plane < NC; plane++)
        for (oh = 0; oh < OH; oh++)
            for (ow = 0; ow < OW; ow++) {
                int64_t h0 = oh * stride - pad, w0 = ow * stride - pad, at = -1;
                float best = 0.0f;
                const float *xp = x + plane * H * W;
                for (ih = h0 < 0 ? 0 : h0; ih < h0 + kernel && ih < H; ih++)
                    for (iw = w0 < 0 ? 0 : w0; iw < w0 + kernel && iw < W; iw++) {
                        float v = xp[ih * W + iw];
                        if (at < 0 || v > best || (isnan(v) && !isnan(best))) { best = v; at = ih * W + iw; }
                    }
                y[(plane * OH + oh) * OW + ow] = best;
                if (argmax) argmax[(plane * OH + oh) * OW + ow] = (int32_t)at;
            }
}
/* max_pool2d's backward: dx[plane][argmax] += dy (argmax already checked to lie inside the plane) */
static void ocr__ref_maxpool2d_backward(const float *dy, const int32_t *argmax, int64_t NC, int64_t P, float *dx, int64_t HW) {
    int64_t plane, i;
    for (plane = 0; plane < NC; plane++)
        for (i = 0; i < P; i++) dx[plane * HW + argmax[plane * P + i]] += dy[plane * P + i];
}

/* torch.nn.functional.interpolate(x, scale_factor=f, mode="nearest") for an integer f: y[h, w] = x[h / f, w / f] per
   plane; its backward: dx[h / f, w / f] += dy[h, w] */
static void ocr__ref_upsample_forward(const float *x, int64_t NC, int64_t H, int64_t W, int64_t f, float *y) {
    int64_t plane, h, w;
    for (plane = 0; plane < NC; plane++)
        for (h = 0; h < H * f; h++)
            for (w = 0; w < W * f; w++) y[(plane * H * f + h) * W * f + w] = x[(plane * H + h / f) * W + w / f];
}
static void ocr__ref_upsample_backward(const float *dy, int64_t NC, int64_t H, int64_t W, int64_t f, float *dx) {
    int64_t plane, h, w;
    for (plane = 0; plane < NC; plane++)
        for (h = 0; h < H * f; h++)
            for (w = 0; w < W * f; w++) dx[(plane * H + h / f) * W + w / f] += dy[(plane * H * f + h) * W * f + w];
}

/* torch.cat(xs, dim=1) of n parts [N, C_i, H, W] into y [N, sum C_i, H, W]; its backward: dxs[i] += its slice of dy */
static void ocr__ref_concat_forward(const ocr_tensor *const *xs, int n, ocr_tensor *y) {
    int64_t N = y->shape.dim[0], Cy = y->shape.dim[1], P = y->shape.dim[2] * y->shape.dim[3], b, c, p, off = 0;
    int i;
    for (i = 0; i < n; off += xs[i]->shape.dim[1], i++)
        for (b = 0; b < N; b++)
            for (c = 0; c < xs[i]->shape.dim[1]; c++)
                for (p = 0; p < P; p++)
                    ((float *)y->data)[(b * Cy + off + c) * P + p] = ((const float *)xs[i]->data)[(b * xs[i]->shape.dim[1] + c) * P + p];
}
static void ocr__ref_concat_backward(const ocr_tensor *dy, ocr_tensor *const *dxs, int n) {
    int64_t N = dy->shape.dim[0], Cy = dy->shape.dim[1], P = dy->shape.dim[2] * dy->shape.dim[3], b, c, p, off = 0;
    int i;
    for (i = 0; i < n; off += dxs[i]->shape.dim[1], i++)
        for (b = 0; b < N; b++)
            for (c = 0; c < dxs[i]->shape.dim[1]; c++)
                for (p = 0; p < P; p++)
                    ((float *)dxs[i]->data)[(b * dxs[i]->shape.dim[1] + c) * P + p] += ((const float *)dy->data)[(b * Cy + off + c) * P + p];
}

/* torch.nn.LSTM, one layer, direction d (0 forward, 1 reverse) of D, gates i, f, g, o: for each step in the
   direction's order and each sample n, a = b_ih + b_hh + W_ih x[t, n] + W_hh h_prev (h_prev = y[t-1] or y[t+1] in
   this direction's columns, 0 at the first step); i, f, o = sigmoid, g = tanh; c = f c_prev + i g; h = o tanh(c).
   sv [T, N, 5H] (the direction's part of saved) keeps the activated gates and c; y row stride D*H. A step at or
   beyond len[n] (len NULL: T) is padding: zero gates, cell and output. */
static void ocr__ref_lstm_forward(const float *x, int64_t T, int64_t N, int64_t I, int64_t H, int D, int d, const float *w_ih,
                                  const float *w_hh, const float *b_ih, const float *b_hh, const int32_t *len, float *y, float *sv) {
    int64_t s, n, r, k, DH = D * H;
    for (s = 0; s < T; s++) {
        int64_t t = d ? T - 1 - s : s, tp = d ? t + 1 : t - 1;
        for (n = 0; n < N; n++) {
            float *a = sv + (t * N + n) * 5 * H;
            if (len && t >= len[n]) {
                for (k = 0; k < 5 * H; k++) a[k] = 0.0f;
                for (k = 0; k < H; k++) y[(t * N + n) * DH + d * H + k] = 0.0f;
                continue;
            }
            for (r = 0; r < 4 * H; r++) {
                double acc = (b_ih ? b_ih[r] : 0.0) + (b_hh ? b_hh[r] : 0.0);
                for (k = 0; k < I; k++) acc += (double)w_ih[r * I + k] * x[(t * N + n) * I + k];
                if (s > 0)
                    for (k = 0; k < H; k++) acc += (double)w_hh[r * H + k] * y[(tp * N + n) * DH + d * H + k];
                a[r] = (float)acc;
            }
            for (k = 0; k < H; k++) {
                double gi = 1.0 / (1.0 + exp(-(double)a[k])), gf = 1.0 / (1.0 + exp(-(double)a[H + k]));
                double gg = tanh((double)a[2 * H + k]), go = 1.0 / (1.0 + exp(-(double)a[3 * H + k]));
                double c_prev = s > 0 ? sv[(tp * N + n) * 5 * H + 4 * H + k] : 0.0, c = gf * c_prev + gi * gg;
                a[k] = (float)gi; a[H + k] = (float)gf; a[2 * H + k] = (float)gg; a[3 * H + k] = (float)go;
                a[4 * H + k] = (float)c;
                y[(t * N + n) * DH + d * H + k] = (float)(go * tanh(c));
            }
        }
    }
}

/* Its backward through time, from the saved gates and cells: with dh = dy[t] + the recurrent gradient and dc the
   cell gradient carried from the later step,
       dc += dh o (1 - tanh(c)^2);  da_i = dc g i (1-i), da_f = dc c_prev f (1-f), da_g = dc i (1-g^2),
       da_o = dh tanh(c) o (1-o);   dc_prev = dc f,  dh_prev = W_hh^T da
   then dx += W_ih^T da, dW_ih += da x^T, dW_hh += da h_prev^T, db_ih and db_hh += da (sums over steps and samples).
   Scratch: da [T, N, 4H], dh and dc [N, H]. */
static void ocr__ref_lstm_backward(const float *x, int64_t T, int64_t N, int64_t I, int64_t H, int D, int d, const float *w_ih,
                                   const float *w_hh, const float *y, const float *sv, const float *dy, float *dx, float *dw_ih,
                                   float *dw_hh, float *db_ih, float *db_hh, float *da, float *dh, float *dc) {
    int64_t s, n, r, k, t, DH = D * H;
    for (k = 0; k < N * H; k++) dh[k] = dc[k] = 0.0f;
    for (s = T - 1; s >= 0; s--) {
        int64_t tp;
        t = d ? T - 1 - s : s;
        tp = d ? t + 1 : t - 1;
        for (n = 0; n < N; n++) {
            const float *g = sv + (t * N + n) * 5 * H;
            float *dat = da + (t * N + n) * 4 * H;
            for (k = 0; k < H; k++) {
                double gi = g[k], gf = g[H + k], gg = g[2 * H + k], go = g[3 * H + k], tc = tanh((double)g[4 * H + k]);
                double c_prev = s > 0 ? sv[(tp * N + n) * 5 * H + 4 * H + k] : 0.0;
                double dht = (double)dh[n * H + k] + dy[(t * N + n) * DH + d * H + k];
                double dct = (double)dc[n * H + k] + dht * go * (1.0 - tc * tc);
                dat[k] = (float)(dct * gg * gi * (1.0 - gi));
                dat[H + k] = (float)(dct * c_prev * gf * (1.0 - gf));
                dat[2 * H + k] = (float)(dct * gi * (1.0 - gg * gg));
                dat[3 * H + k] = (float)(dht * tc * go * (1.0 - go));
                dc[n * H + k] = (float)(dct * gf);
            }
        }
        if (s > 0)
            for (n = 0; n < N; n++)
                for (k = 0; k < H; k++) {
                    double acc = 0.0;
                    for (r = 0; r < 4 * H; r++) acc += (double)da[(t * N + n) * 4 * H + r] * w_hh[r * H + k];
                    dh[n * H + k] = (float)acc;
                }
    }
    if (dx)
        for (t = 0; t < T * N; t++)
            for (k = 0; k < I; k++) {
                double acc = 0.0;
                for (r = 0; r < 4 * H; r++) acc += (double)da[t * 4 * H + r] * w_ih[r * I + k];
                dx[t * I + k] += (float)acc;
            }
    for (r = 0; r < 4 * H; r++) {
        double bsum = 0.0;
        for (t = 0; t < T * N; t++) bsum += da[t * 4 * H + r];
        if (db_ih) db_ih[r] += (float)bsum;
        if (db_hh) db_hh[r] += (float)bsum;
        if (dw_ih)
            for (k = 0; k < I; k++) {
                double acc = 0.0;
                for (t = 0; t < T * N; t++) acc += (double)da[t * 4 * H + r] * x[t * I + k];
                dw_ih[r * I + k] += (float)acc;
            }
        if (dw_hh)
            for (k = 0; k < H; k++) {
                double acc = 0.0;
                for (s = 1; s < T; s++) {
                    int64_t ts = d ? T - 1 - s : s, tp = d ? ts + 1 : ts - 1;
                    for (n = 0; n < N; n++) acc += (double)da[(ts * N + n) * 4 * H + r] * y[(tp * N + n) * DH + d * H + k];
                }
                dw_hh[r * H + k] += (float)acc;
            }
    }
}

/* torch.log_softmax(x, dim=-1) on rows of C: y = x - m - log(sum exp(x - m)), m the row's maximum (y may be x); a
   value below -FLT_MAX (a row spanning more than float's range) is clamped there instead of becoming -inf */
static void ocr__ref_log_softmax_forward(const float *x, float *y, int64_t rows, int64_t C) {
    int64_t r, c;
    for (r = 0; r < rows; r++) {
        const float *xr = x + r * C;
        double m = xr[0], s = 0.0, lse;
        for (c = 1; c < C; c++) if (xr[c] > m) m = xr[c];
        for (c = 0; c < C; c++) s += exp((double)xr[c] - m);
        lse = m + log(s);
        for (c = 0; c < C; c++) {
            double v = (double)xr[c] - lse;
            y[r * C + c] = v < -FLT_MAX ? -FLT_MAX : (float)v;
        }
    }
}
/* its backward from the output: dx += dy - exp(y) * sum(dy) per row */
static void ocr__ref_log_softmax_backward(const float *y, const float *dy, float *dx, int64_t rows, int64_t C) {
    int64_t r, c;
    for (r = 0; r < rows; r++) {
        double s = 0.0;
        for (c = 0; c < C; c++) s += dy[r * C + c];
        for (c = 0; c < C; c++) dx[r * C + c] += (float)((double)dy[r * C + c] - exp((double)y[r * C + c]) * s);
    }
}

/* torch.nn.functional.max_pool2d(x, (kh, kw), (sh, sw), (ph, pw), return_indices=True) on planes [begin, end) of
   [H, W]: the maximum of each window clipped to the plane, argmax (optional) the first maximum's h*W + w, a NaN winning
   as in ocr__ref_maxpool2d_forward. Also the op's only path, spread over the planes: nothing faster to check. */
static void ocr__ref_maxpool2d_rect_forward(const float *x, int64_t begin, int64_t end, int64_t H, int64_t W, int kh, int kw,
                                            int sh, int sw, int ph, int pw, float *y, int32_t *argmax, int64_t OH, int64_t OW) {
    int64_t plane, oh, ow, ih, iw;
    for (plane = begin; plane < end; plane++)
        for (oh = 0; oh < OH; oh++)
            for (ow = 0; ow < OW; ow++) {
                int64_t h0 = oh * sh - ph, w0 = ow * sw - pw, at = -1;
                float best = 0.0f;
                const float *xp = x + plane * H * W;
                for (ih = h0 < 0 ? 0 : h0; ih < h0 + kh && ih < H; ih++)
                    for (iw = w0 < 0 ? 0 : w0; iw < w0 + kw && iw < W; iw++) {
                        float v = xp[ih * W + iw];
                        if (at < 0 || v > best || (isnan(v) && !isnan(best))) { best = v; at = ih * W + iw; }
                    }
                y[(plane * OH + oh) * OW + ow] = best;
                if (argmax) argmax[(plane * OH + oh) * OW + ow] = (int32_t)at;
            }
}

/* x.permute(3, 0, 1, 2).reshape(W, N, C * H): y[w, n, c*H + h] = x[n, c, h, w]; its backward dx[n, c, h, w] += that dy */
static void ocr__ref_map_to_seq_forward(const float *x, float *y, int64_t N, int64_t C, int64_t H, int64_t W) {
    int64_t n, c, h, w;
    for (n = 0; n < N; n++)
        for (c = 0; c < C; c++)
            for (h = 0; h < H; h++)
                for (w = 0; w < W; w++) y[(w * N + n) * C * H + c * H + h] = x[((n * C + c) * H + h) * W + w];
}
static void ocr__ref_map_to_seq_backward(const float *dy, float *dx, int64_t N, int64_t C, int64_t H, int64_t W) {
    int64_t n, c, h, w;
    for (n = 0; n < N; n++)
        for (c = 0; c < C; c++)
            for (h = 0; h < H; h++)
                for (w = 0; w < W; w++) dx[((n * C + c) * H + h) * W + w] += dy[(w * N + n) * C * H + c * H + h];
}

/* torch.nn.Linear on R rows: y[r, k] = b[k] + sum_i x[r, i] w[k, i]; backward dx[r, i] += sum_k dy[r, k] w[k, i],
   dw[k, i] += sum_r dy[r, k] x[r, i], db[k] += sum_r dy[r, k] */
static void ocr__ref_linear_forward(const float *x, const float *w, const float *b, float *y, int64_t R, int64_t I, int64_t K) {
    int64_t r, k, i;
    for (r = 0; r < R; r++)
        for (k = 0; k < K; k++) {
            double acc = b ? b[k] : 0.0;
            for (i = 0; i < I; i++) acc += (double)x[r * I + i] * w[k * I + i];
            y[r * K + k] = (float)acc;
        }
}
static void ocr__ref_linear_backward(const float *x, const float *w, const float *dy, float *dx, float *dw, float *db, int64_t R,
                                     int64_t I, int64_t K) {
    int64_t r, k, i;
    for (r = 0; dx && r < R; r++)
        for (i = 0; i < I; i++) {
            double acc = 0.0;
            for (k = 0; k < K; k++) acc += (double)dy[r * K + k] * w[k * I + i];
            dx[r * I + i] += (float)acc;
        }
    for (k = 0; k < K; k++) {
        double bs = 0.0;
        for (r = 0; r < R; r++) bs += dy[r * K + k];
        if (db) db[k] += (float)bs;
        for (i = 0; dw && i < I; i++) {
            double acc = 0.0;
            for (r = 0; r < R; r++) acc += (double)dy[r * K + k] * x[r * I + i];
            dw[k * I + i] += (float)acc;
        }
    }
}

/* ---------------------------------------------------------------- mixed precision: inputs rounded at the op */

OCRDEF const char *ocr_amp_name(int amp) { return amp == OCR_AMP_BF16 ? "bf16" : amp == OCR_AMP_F16 ? "fp16" : "fp32"; }

OCRDEF int ocr_amp_parse(const char *s, int *amp) {
    if (!s) return 0;
    if (!strcmp(s, "fp32") || !strcmp(s, "off") || !strcmp(s, "none")) *amp = OCR_AMP_OFF;
    else if (!strcmp(s, "bf16")) *amp = OCR_AMP_BF16;
    else if (!strcmp(s, "fp16") || !strcmp(s, "f16")) *amp = OCR_AMP_F16;
    else return 0;
    return 1;
}

OCRDEF void ocr_amp_stats_reset(ocr_amp_stats *s) {
    int i;
    for (i = 0; i < s->count; i++) {
        ocr_amp_layer_stats *l = &s->layer[i];
        l->values = l->overflowed = l->grads = l->grads_overflowed = l->underflowed = 0;
    }
}

OCRDEF void ocr_amp_stats_free(ocr_amp_stats *s) {
    free(s->layer);
    s->layer = NULL;
    s->count = s->cap = 0;
}

OCRDEF ocr_amp_layer_stats ocr_amp_stats_total(const ocr_amp_stats *s, const ocr_amp_layer_stats **worst) {
    ocr_amp_layer_stats t;
    int i;
    memset(&t, 0, sizeof t);
    snprintf(t.layer, sizeof t.layer, "all");
    if (worst) *worst = NULL;
    for (i = 0; i < s->count; i++) {
        const ocr_amp_layer_stats *l = &s->layer[i];
        t.values += l->values; t.overflowed += l->overflowed;
        t.grads += l->grads; t.grads_overflowed += l->grads_overflowed; t.underflowed += l->underflowed;
        if (worst && l->underflowed && (!*worst || l->underflowed > (*worst)->underflowed)) *worst = l;
    }
    return t;
}

/* The counts of one op's input into ctx->amp_stats under its layer's name (a new layer is appended). */
static int ocr__amp_note(ocr_ctx *ctx, const char *layer, int grad, int64_t n, int64_t overflowed, int64_t underflowed) {
    ocr_amp_stats *s = ctx->amp_stats;
    ocr_amp_layer_stats *l = NULL;
    int i;
    if (!s) return OCR_OK;
    for (i = 0; i < s->count && !l; i++)
        if (!strcmp(s->layer[i].layer, layer)) l = &s->layer[i];
    if (!l) {
        if (s->count == s->cap) {
            int cap = s->cap ? 2 * s->cap : 64;
            ocr_amp_layer_stats *grown = (ocr_amp_layer_stats *)realloc(s->layer, (size_t)cap * sizeof *grown);
            if (!grown) return ocr_error(ctx, OCR_ENOMEM, "mixed precision: no memory for the statistics of layer '%s'", layer);
            s->layer = grown; s->cap = cap;
        }
        l = &s->layer[s->count++];
        memset(l, 0, sizeof *l);
        snprintf(l->layer, sizeof l->layer, "%s", layer);
    }
    if (grad) { l->grads += n; l->grads_overflowed += overflowed; l->underflowed += underflowed; }
    else { l->values += n; l->overflowed += overflowed; }
    return OCR_OK;
}

/* x rounded to the half type and back: bit for bit ocr_bf16_to_f32(ocr_f32_to_bf16(x)), or the fp16 pair. */
static float ocr__amp_round1(int amp, float x) {
    return amp == OCR_AMP_BF16 ? ocr_bf16_to_f32(ocr_f32_to_bf16(x)) : ocr_f16_to_f32(ocr_f32_to_f16(x));
}

typedef struct {
    int amp, lanes;           /* lanes: 16 (AVX-512), 8 (AVX2 and F16C) or 1, from ctx->cpu_kernel and the CPU */
    const float *src;
    float *dst;               /* NULL: count only */
    int64_t overflowed[OCR_MAX_THREADS], underflowed[OCR_MAX_THREADS];
} ocr__amp_round_job;

#ifdef OCR__HAVE_AVX2
/* 16 values a step with the scalar functions' results: bf16 by integer round-to-nearest-even on the bit pattern
   (vcvtneps2bf16 would flush subnormals), fp16 through F16C's conversion, which rounds to nearest even, keeps fp16
   subnormals and overflows to Inf as ocr_f32_to_f16 does. A block with a NaN is left to the scalar loop. */
__attribute__((target("avx512f,avx512bw,avx512dq,f16c")))
static int64_t ocr__amp_round_avx512(int amp, const float *src, float *dst, int64_t n, int64_t *over, int64_t *under) {
    const __m512 inf = _mm512_set1_ps(INFINITY), zero = _mm512_setzero_ps();
    const __m512i one = _mm512_set1_epi32(1), bias = _mm512_set1_epi32(0x7fff), keep = _mm512_set1_epi32((int)0xffff0000u);
    int64_t i, o = 0, u = 0;
    for (i = 0; i + 16 <= n; i += 16) {
        __m512 x = _mm512_loadu_ps(src + i), r;
        if (_mm512_cmp_ps_mask(x, x, _CMP_UNORD_Q)) break;
        if (amp == OCR_AMP_BF16) {
            __m512i b = _mm512_castps_si512(x);
            b = _mm512_add_epi32(b, _mm512_add_epi32(bias, _mm512_and_si512(_mm512_srli_epi32(b, 16), one)));
            r = _mm512_castsi512_ps(_mm512_and_si512(b, keep));
        } else {
            r = _mm512_cvtph_ps(_mm512_cvtps_ph(x, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
        }
        if (dst) _mm512_storeu_ps(dst + i, r);
        o += __builtin_popcount(_mm512_cmp_ps_mask(_mm512_abs_ps(x), inf, _CMP_LT_OQ) &
                                _mm512_cmp_ps_mask(_mm512_abs_ps(r), inf, _CMP_EQ_OQ));
        u += __builtin_popcount(_mm512_cmp_ps_mask(x, zero, _CMP_NEQ_OQ) & _mm512_cmp_ps_mask(r, zero, _CMP_EQ_OQ));
    }
    *over += o; *under += u;
    return i;
}

/* The same 8 values a step, for AVX2 machines (Zen 3), where a scalar fp16 conversion per value would cost more than
   the convolution saves. */
__attribute__((target("avx2,f16c")))
static int64_t ocr__amp_round_avx2(int amp, const float *src, float *dst, int64_t n, int64_t *over, int64_t *under) {
    const __m256 inf = _mm256_set1_ps(INFINITY), zero = _mm256_setzero_ps(), sign = _mm256_set1_ps(-0.0f);
    const __m256i one = _mm256_set1_epi32(1), bias = _mm256_set1_epi32(0x7fff), keep = _mm256_set1_epi32((int)0xffff0000u);
    int64_t i, o = 0, u = 0;
    for (i = 0; i + 8 <= n; i += 8) {
        __m256 x = _mm256_loadu_ps(src + i), r;
        if (_mm256_movemask_ps(_mm256_cmp_ps(x, x, _CMP_UNORD_Q))) break;
        if (amp == OCR_AMP_BF16) {
            __m256i b = _mm256_castps_si256(x);
            b = _mm256_add_epi32(b, _mm256_add_epi32(bias, _mm256_and_si256(_mm256_srli_epi32(b, 16), one)));
            r = _mm256_castsi256_ps(_mm256_and_si256(b, keep));
        } else {
            r = _mm256_cvtph_ps(_mm256_cvtps_ph(x, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
        }
        if (dst) _mm256_storeu_ps(dst + i, r);
        o += __builtin_popcount((unsigned)_mm256_movemask_ps(_mm256_and_ps(_mm256_cmp_ps(_mm256_andnot_ps(sign, x), inf, _CMP_LT_OQ),
                                                                           _mm256_cmp_ps(_mm256_andnot_ps(sign, r), inf, _CMP_EQ_OQ))));
        u += __builtin_popcount((unsigned)_mm256_movemask_ps(_mm256_and_ps(_mm256_cmp_ps(x, zero, _CMP_NEQ_OQ), _mm256_cmp_ps(r, zero, _CMP_EQ_OQ))));
    }
    *over += o; *under += u;
    return i;
}
#endif

static int ocr__amp_lanes(const ocr_ctx *ctx) {
#ifdef OCR__HAVE_AVX2
    if (ctx->cpu_kernel == OCR_CPU_KERNEL_PORTABLE) return 1;
    /* F16C came with or before AVX2 on every x86 CPU (and clang's __builtin_cpu_supports does not know the name) */
    if (ctx->cpu_kernel != OCR_CPU_KERNEL_AVX2 && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
        __builtin_cpu_supports("avx512dq"))
        return 16;
    if (__builtin_cpu_supports("avx2")) return 8;
#else
    (void)ctx;
#endif
    return 1;
}

static void ocr__amp_round_part(void *arg, int64_t begin, int64_t end, int tid) {
    ocr__amp_round_job *j = (ocr__amp_round_job *)arg;
    int64_t i = begin, o = 0, u = 0;
#ifdef OCR__HAVE_AVX2
    if (j->lanes == 16) i += ocr__amp_round_avx512(j->amp, j->src + begin, j->dst ? j->dst + begin : NULL, end - begin, &o, &u);
    if (j->lanes == 8) i += ocr__amp_round_avx2(j->amp, j->src + begin, j->dst ? j->dst + begin : NULL, end - begin, &o, &u);
#endif
    for (; i < end; i++) {
        float x = j->src[i], r = ocr__amp_round1(j->amp, x);
        if (j->dst) j->dst[i] = r;
        o += isinf(r) && !isinf(x);
        u += x != 0.0f && r == 0.0f;
    }
    j->overflowed[tid] += o;
    j->underflowed[tid] += u;
}

/* Rounds n values of src to type amp into dst (or only counts, dst NULL) on ctx's threads; the counts of values
   turned Inf and of nonzero values turned zero go to *over and *under. */
static void ocr__amp_round_into(ocr_ctx *ctx, int amp, const float *src, float *dst, int64_t n, int64_t *over, int64_t *under) {
    ocr__amp_round_job j;
    int64_t t;
    memset(&j, 0, sizeof j);
    j.amp = amp; j.src = src; j.dst = dst;
    j.lanes = ocr__amp_lanes(ctx);
    ocr_parallel_for(ctx, n, 1 << 14, ocr__amp_round_part, &j);
    for (t = 0; t < OCR_MAX_THREADS; t++) { *over += j.overflowed[t]; *under += j.underflowed[t]; }
}

/* Rounds (dst) or only counts (dst NULL) n values of src to ctx->amp's type, and notes the counts for layer. */
static int ocr__amp_pass(ocr_ctx *ctx, const float *src, float *dst, int64_t n, const char *layer, int grad) {
    int64_t o = 0, u = 0;
    ocr__amp_round_into(ctx, ctx->amp, src, dst, n, &o, &u);
    return ocr__amp_note(ctx, layer, grad, n, o, grad ? u : 0);
}

/* How many floats op(X) spans as stored: rows of ld apart, the last row only up to its last column. */
static int64_t ocr__gemm_operand_extent(int trans, int64_t rows, int64_t cols, int64_t ld) {
    return ((trans ? cols : rows) - 1) * ld + (trans ? rows : cols);
}

/* The counts alone, for the bf16 kernels, which round while they pack (a pass only when statistics are kept). */
static int ocr__amp_count(ocr_ctx *ctx, const float *src, int64_t n, const char *layer, int grad) {
    return ctx->amp_stats ? ocr__amp_pass(ctx, src, NULL, n, layer, grad) : OCR_OK;
}

/* src rounded to ctx->amp's type in scratch slot OCR_SCRATCH_HALF0 + which, its overflows and underflows counted
   for layer; NULL with an error when that fails. */
static const float *ocr__amp_input(ocr_ctx *ctx, const float *src, int64_t n, int which, const char *layer, int grad) {
    float *dst = (float *)ocr_ctx_scratch(ctx, OCR_SCRATCH_HALF0 + which, (size_t)(n ? n : 1) * sizeof(float));
    if (!dst || ocr__amp_pass(ctx, src, dst, n, layer, grad)) return NULL;
    return dst;
}


/* ---------------------------------------------------------------- GEMM */

/* Micro-kernels compute C[mr,nr] += alpha * Apanel[kc,mr]^T Bpanel[kc,nr] from zero-padded packed panels. */
typedef void (*ocr__ukernel_fn)(int64_t kc, const float *a, const float *b, float *c, int64_t ldc, float alpha);
/* fn0 (NULL where a kernel has none) stores C = alpha * sum instead, as fma(alpha, sum, 0): the bits of fn on a zeroed
   C, without reading C. */
/* tail (NULL where a kernel has none) takes a full-width tile of fewer than mr rows (at most 4), straight into C:
   c = (overwrite ? 0 : c) + alpha * sum, rounded as the edge buffer's path rounds it. */
typedef void (*ocr__ukernel_tail_fn)(int64_t kc, const float *a, const float *b, float *c, int64_t ldc, float alpha, int64_t rows,
                                     int overwrite);
typedef struct { ocr__ukernel_fn fn, fn0; ocr__ukernel_tail_fn tail; int mr, nr; const char *name; } ocr__ukernel;

#define OCR__MR_MAX 8
#define OCR__NR_MAX 48
#define OCR__KC 256        /* a B micro-panel (KC x nr) stays in L1 */
#define OCR__MC_PANELS 8   /* an A block (8 micro-panels x KC) stays in L2 */
#define OCR__NC 4096       /* a packed B block (KC x NC) is shared by all threads */
#define OCR__NCHUNK_PANELS 16
/* Weight gradients as dot products along pixels (no transposing pack) win for few output channels; beyond these
   counts (measured on DBNet's shapes) the packed GEMM amortises its packing better. */
#define OCR__WGRAD_DOT_MAX_K 32       /* from an im2col buffer */
#define OCR__WGRAD_IMPLICIT_MAX_K 64  /* straight from the padded image */
#define OCR__IMPLICIT_AVX2_MIN_OW 16
#define OCR__WGRAD_PARTIAL_MAX ((size_t)1 << 18) /* floats of a per-thread weight-gradient partial (1 MB) */

static void ocr__ukernel_portable(int64_t kc, const float *a, const float *b, float *c, int64_t ldc, float alpha) {
    float acc[6][16];
    int64_t k;
    int i, j;
    memset(acc, 0, sizeof acc);
    for (k = 0; k < kc; k++, a += 6, b += 16)
        for (i = 0; i < 6; i++)
            for (j = 0; j < 16; j++) acc[i][j] += a[i] * b[j];
    for (i = 0; i < 6; i++)
        for (j = 0; j < 16; j++) c[i * ldc + j] += alpha * acc[i][j];
}

#ifdef OCR__HAVE_AVX2
/* tail 0: a full 6 x 16 tile, C = alpha * sum + (overwrite ? 0 : C) in one rounding. tail 1: the last panel of M rows
   not a multiple of 6 (64 = 10 x 6 + 4, 256 = 42 x 6 + 4): 4 rows of FMAs, `rows` of them stored straight into C and
   rounded as the edge buffer's path rounds them, instead of 6 rows into that buffer and a copy (the 64-row shapes
   spent 5% of their time on that panel). */
__attribute__((target("avx2,fma"), always_inline))
static inline void ocr__ukernel_avx2_body(int64_t kc, const float *a, const float *b, float *c, int64_t ldc, float alpha, int overwrite,
                                          int tail, int64_t rows) {
#define OCR__ROWS6(X) X(0) X(1) X(2) X(3) X(4) X(5)
#define OCR__DECL(i) __m256 c##i##0 = _mm256_setzero_ps(), c##i##1 = _mm256_setzero_ps();
#define OCR__FMA(i) if (i < (tail ? 4 : 6)) { __m256 x = _mm256_broadcast_ss(a + i); c##i##0 = _mm256_fmadd_ps(x, b0, c##i##0); \
                                              c##i##1 = _mm256_fmadd_ps(x, b1, c##i##1); }
#define OCR__PUT(i, v) { float *cp = c + i * ldc + 8 * v; __m256 old = overwrite ? zero : _mm256_loadu_ps(cp);                       \
                         _mm256_storeu_ps(cp, tail ? _mm256_add_ps(old, _mm256_fmadd_ps(va, c##i##v, zero)) : _mm256_fmadd_ps(va, c##i##v, old)); }
#define OCR__STORE(i) if (i < (tail ? rows : 6)) { OCR__PUT(i, 0) OCR__PUT(i, 1) }
    __m256 va = _mm256_set1_ps(alpha), zero = _mm256_setzero_ps();
    int64_t k;
    OCR__ROWS6(OCR__DECL)
    for (k = 0; k < kc; k++, a += 6, b += 16) {
        __m256 b0 = _mm256_load_ps(b), b1 = _mm256_load_ps(b + 8);
        OCR__ROWS6(OCR__FMA)
    }
    OCR__ROWS6(OCR__STORE)
#undef OCR__DECL
#undef OCR__FMA
#undef OCR__PUT
#undef OCR__STORE
}
__attribute__((target("avx2,fma")))
static void ocr__ukernel_avx2(int64_t kc, const float *a, const float *b, float *c, int64_t ldc, float alpha) {
    ocr__ukernel_avx2_body(kc, a, b, c, ldc, alpha, 0, 0, 6);
}
__attribute__((target("avx2,fma")))
static void ocr__ukernel_avx2_store(int64_t kc, const float *a, const float *b, float *c, int64_t ldc, float alpha) {
    ocr__ukernel_avx2_body(kc, a, b, c, ldc, alpha, 1, 0, 6);
}
__attribute__((target("avx2,fma")))
static void ocr__ukernel_avx2_rows4(int64_t kc, const float *a, const float *b, float *c, int64_t ldc, float alpha, int64_t rows,
                                    int overwrite) {
    ocr__ukernel_avx2_body(kc, a, b, c, ldc, alpha, overwrite, 1, rows);
}

/* 8 x 48: 24 accumulators and three B registers; the A values are broadcast straight from memory. Eight rows
   divide every channel count of the models (16..512) and the lowered weight-gradient and data-gradient heights,
   so no A panel is padded, and each k step issues 11 loads for 24 FMAs. */
/* C's tile is read only after the k loop; asked for before it, its lines (often from L3 or memory: C is wider than
   L2 in most of the model's GEMMs) arrive while the FMAs run instead of stalling the stores. */
#define OCR__PREFETCH_C(i) _mm_prefetch((const char *)(c + i * ldc), _MM_HINT_T0); \
                           _mm_prefetch((const char *)(c + i * ldc + 16), _MM_HINT_T0); \
                           _mm_prefetch((const char *)(c + i * ldc + 32), _MM_HINT_T0); \
                           _mm_prefetch((const char *)(c + i * ldc + 47), _MM_HINT_T0);
/* nv: the first 16, 32 or 48 columns of the tile (B still in 48-wide panels). A GEMM's last panel holding 16 or 32
   columns (Winograd's 100 tiles at 40x40: 4 in the third panel) costs a third or two thirds of a full one; each
   element is summed as the full kernel sums it: the same bits. */
__attribute__((target("avx512f"), always_inline))
static inline void ocr__ukernel_avx512_body(int64_t kc, const float *a, const float *b, float *c, int64_t ldc, float alpha, int overwrite,
                                            int nv) {
#define OCR__ROWS8(X) X(0) X(1) X(2) X(3) X(4) X(5) X(6) X(7)
#define OCR__DECL(i) __m512 c##i##0 = _mm512_setzero_ps(), c##i##1 = _mm512_setzero_ps(), c##i##2 = _mm512_setzero_ps();
#define OCR__FMA(i) { __m512 x = _mm512_set1_ps(a[i]); c##i##0 = _mm512_fmadd_ps(x, b0, c##i##0); \
                      if (nv > 1) c##i##1 = _mm512_fmadd_ps(x, b1, c##i##1); \
                      if (nv > 2) c##i##2 = _mm512_fmadd_ps(x, b2, c##i##2); }
#define OCR__PUT(i, v) _mm512_storeu_ps(c + i * ldc + 16 * v, _mm512_fmadd_ps(va, c##i##v, overwrite ? zero : _mm512_loadu_ps(c + i * ldc + 16 * v)));
#define OCR__STORE(i) OCR__PUT(i, 0) if (nv > 1) OCR__PUT(i, 1) if (nv > 2) OCR__PUT(i, 2)
    __m512 va = _mm512_set1_ps(alpha), zero = _mm512_setzero_ps();
    int64_t k;
    OCR__ROWS8(OCR__DECL)
    if (!overwrite && nv == 3) { OCR__ROWS8(OCR__PREFETCH_C) }
    for (k = 0; k < kc; k++, a += 8, b += 48) {
        __m512 b0 = _mm512_load_ps(b), b1 = nv > 1 ? _mm512_load_ps(b + 16) : b0, b2 = nv > 2 ? _mm512_load_ps(b + 32) : b0;
        OCR__ROWS8(OCR__FMA)
    }
    OCR__ROWS8(OCR__STORE)
#undef OCR__DECL
#undef OCR__FMA
#undef OCR__PUT
#undef OCR__STORE
}
__attribute__((target("avx512f")))
static void ocr__ukernel_avx512(int64_t kc, const float *a, const float *b, float *c, int64_t ldc, float alpha) {
    ocr__ukernel_avx512_body(kc, a, b, c, ldc, alpha, 0, 3);
}
__attribute__((target("avx512f")))
static void ocr__ukernel_avx512_store(int64_t kc, const float *a, const float *b, float *c, int64_t ldc, float alpha) {
    ocr__ukernel_avx512_body(kc, a, b, c, ldc, alpha, 1, 3);
}
__attribute__((target("avx512f")))
static void ocr__ukernel_avx512_n16(int64_t kc, const float *a, const float *b, float *c, int64_t ldc, float alpha) {
    ocr__ukernel_avx512_body(kc, a, b, c, ldc, alpha, 0, 1);
}
__attribute__((target("avx512f")))
static void ocr__ukernel_avx512_n32(int64_t kc, const float *a, const float *b, float *c, int64_t ldc, float alpha) {
    ocr__ukernel_avx512_body(kc, a, b, c, ldc, alpha, 0, 2);
}
__attribute__((target("avx512f")))
static void ocr__ukernel_avx512_n16_store(int64_t kc, const float *a, const float *b, float *c, int64_t ldc, float alpha) {
    ocr__ukernel_avx512_body(kc, a, b, c, ldc, alpha, 1, 1);
}
__attribute__((target("avx512f")))
static void ocr__ukernel_avx512_n32_store(int64_t kc, const float *a, const float *b, float *c, int64_t ldc, float alpha) {
    ocr__ukernel_avx512_body(kc, a, b, c, ldc, alpha, 1, 2);
}
#endif

/* the kernel for a panel of which the first cols columns are wanted (the others may be left unwritten) */
static ocr__ukernel_fn ocr__ukernel_for_cols(const ocr__ukernel *uk, int64_t cols) {
#ifdef OCR__HAVE_AVX2
    if (uk->fn == ocr__ukernel_avx512 && cols <= 32) return cols <= 16 ? ocr__ukernel_avx512_n16 : ocr__ukernel_avx512_n32;
#endif
    (void)cols;
    return uk->fn;
}
#ifdef OCR__HAVE_AVX2
/* the same, storing C = alpha * sum instead of adding to it (uk->fn0's bits on a zeroed C); NULL where the kernel has
   no such form */
static ocr__ukernel_fn ocr__ukernel_for_cols_store(const ocr__ukernel *uk, int64_t cols) {
    if (uk->fn == ocr__ukernel_avx512 && cols <= 32) return cols <= 16 ? ocr__ukernel_avx512_n16_store : ocr__ukernel_avx512_n32_store;
    return uk->fn0;
}
#endif

static ocr__ukernel ocr__pick_ukernel(ocr_ctx *ctx) {
    ocr__ukernel k;
    k.fn = ocr__ukernel_portable; k.fn0 = NULL; k.tail = NULL; k.mr = 6; k.nr = 16; k.name = "portable 6x16";
#ifdef OCR__HAVE_AVX2
    if (ctx->cpu_kernel != OCR_CPU_KERNEL_PORTABLE && ctx->cpu_kernel != OCR_CPU_KERNEL_AVX2 && __builtin_cpu_supports("avx512f")) {
        k.fn = ocr__ukernel_avx512; k.fn0 = ocr__ukernel_avx512_store; k.mr = 8; k.nr = 48; k.name = "avx512 8x48";
    } else if (ctx->cpu_kernel != OCR_CPU_KERNEL_PORTABLE && __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) {
        k.fn = ocr__ukernel_avx2; k.fn0 = ocr__ukernel_avx2_store; k.tail = ocr__ukernel_avx2_rows4; k.mr = 6; k.nr = 16; k.name = "avx2-fma 6x16";
    }
#else
    (void)ctx;
#endif
    return k;
}

OCRDEF const char *ocr_gemm_kernel_name(ocr_ctx *ctx) { return ocr__pick_ukernel(ctx).name; }

/* The float lanes of the kernel picked (16: AVX-512, 8: AVX2 with FMA, 0: portable), which the vector row ops outside
   the GEMM follow, so that a forced kernel stands in for a CPU without the wider ones */
static int ocr__ctx_lanes(ocr_ctx *ctx) {
#ifdef OCR__HAVE_AVX2
    ocr__ukernel uk = ocr__pick_ukernel(ctx);
    return uk.fn == ocr__ukernel_avx512 ? 16 : uk.fn == ocr__ukernel_avx2 ? 8 : 0;
#else
    (void)ctx;
    return 0;
#endif
}

typedef struct {
    ocr__ukernel uk;
    int trans_a, trans_b;
    int64_t M, N, K, lda, ldb, ldc;
    float alpha, beta;
    const float *A, *B;
    float *C;
    /* the current (jc, pc) block, packed once and shared by every thread */
    int64_t jc, nc, pc, kc;
    float *pa, *pb;          /* packed op(A)[:, pc:pc+kc] and op(B)[pc:pc+kc, jc:jc+nc] */
    int64_t mc, nchunk, m_blocks, n_chunks, a_panels;
    int a_prepacked;         /* serial runs only: pa already holds all of op(A) packed, K <= OCR__KC */
    int overwrite;           /* beta 0 and one K block: tiles store with uk.fn0, C is neither zeroed nor read */
    int b_per_chunk;         /* serial runs: pb holds only the current column chunk's panels, from its start */
} ocr__gemm_job;

#ifdef OCR__HAVE_AVX2
/* The 8 columns of an 8 x 8 block in registers, col[j][i] = src[i * lds + j], rows 6 and 7 read as zeros when
   six_rows: pairs of rows interleaved, then pairs of pairs, then the 128-bit halves moved into place. (Written out:
   as loops over arrays, GCC kept the vectors on the stack.) */
__attribute__((target("avx2"), always_inline))
static inline void ocr__transpose8_cols(const float *src, int64_t lds, int six_rows, __m256 col[8]) {
    __m256 z = _mm256_setzero_ps();
    __m256 r0 = _mm256_loadu_ps(src), r1 = _mm256_loadu_ps(src + lds), r2 = _mm256_loadu_ps(src + 2 * lds),
           r3 = _mm256_loadu_ps(src + 3 * lds), r4 = _mm256_loadu_ps(src + 4 * lds), r5 = _mm256_loadu_ps(src + 5 * lds),
           r6 = six_rows ? z : _mm256_loadu_ps(src + 6 * lds), r7 = six_rows ? z : _mm256_loadu_ps(src + 7 * lds);
    __m256 t0 = _mm256_unpacklo_ps(r0, r1), t1 = _mm256_unpackhi_ps(r0, r1), t2 = _mm256_unpacklo_ps(r2, r3),
           t3 = _mm256_unpackhi_ps(r2, r3), t4 = _mm256_unpacklo_ps(r4, r5), t5 = _mm256_unpackhi_ps(r4, r5),
           t6 = _mm256_unpacklo_ps(r6, r7), t7 = _mm256_unpackhi_ps(r6, r7);
    /* per 128-bit lane, u0: rows 0-3 of column 0 (and 4), u1: column 1 (5), u2: 2 (6), u3: 3 (7); u4-u7 rows 4-7 */
    __m256 u0 = _mm256_shuffle_ps(t0, t2, 0x44), u1 = _mm256_shuffle_ps(t0, t2, 0xEE), u2 = _mm256_shuffle_ps(t1, t3, 0x44),
           u3 = _mm256_shuffle_ps(t1, t3, 0xEE), u4 = _mm256_shuffle_ps(t4, t6, 0x44), u5 = _mm256_shuffle_ps(t4, t6, 0xEE),
           u6 = _mm256_shuffle_ps(t5, t7, 0x44), u7 = _mm256_shuffle_ps(t5, t7, 0xEE);
    col[0] = _mm256_permute2f128_ps(u0, u4, 0x20); col[1] = _mm256_permute2f128_ps(u1, u5, 0x20);
    col[2] = _mm256_permute2f128_ps(u2, u6, 0x20); col[3] = _mm256_permute2f128_ps(u3, u7, 0x20);
    col[4] = _mm256_permute2f128_ps(u0, u4, 0x31); col[5] = _mm256_permute2f128_ps(u1, u5, 0x31);
    col[6] = _mm256_permute2f128_ps(u2, u6, 0x31); col[7] = _mm256_permute2f128_ps(u3, u7, 0x31);
}

/* dst[j * ldd + i] = src[i * lds + j] for an 8 x 8 block. */
__attribute__((target("avx2")))
static void ocr__transpose8(const float *src, int64_t lds, float *dst, int64_t ldd) {
    __m256 c[8];
    ocr__transpose8_cols(src, lds, 0, c);
    _mm256_storeu_ps(dst, c[0]); _mm256_storeu_ps(dst + ldd, c[1]); _mm256_storeu_ps(dst + 2 * ldd, c[2]);
    _mm256_storeu_ps(dst + 3 * ldd, c[3]); _mm256_storeu_ps(dst + 4 * ldd, c[4]); _mm256_storeu_ps(dst + 5 * ldd, c[5]);
    _mm256_storeu_ps(dst + 6 * ldd, c[6]); _mm256_storeu_ps(dst + 7 * ldd, c[7]);
}

/* One full 8-row panel of a row-major A: dst[k * 8 + i] = a[i * lda + k] for k < kc, 8 x 8 blocks transposed in
   registers (the element-by-element loop ran at about 1 GB/s, and packing layer4's 9 MB of weights took longer than
   its convolution at small image sizes). Returns the k it reached; the caller packs the rest. */
__attribute__((target("avx2")))
static int64_t ocr__pack_a_rows8(const float *a, int64_t lda, int64_t kc, float *dst) {
    int64_t k;
    for (k = 0; k + 8 <= kc; k += 8, dst += 64) ocr__transpose8(a + k, lda, dst, 8);
    return k;
}

/* The same for a full 6-row panel (the AVX2 kernel): the 8 x 8 transpose with rows 6 and 7 zero, each column's
   first 6 values stored in order, so that a store's two spare lanes are overwritten by the next (the last column is
   stored as 4 + 2). */
__attribute__((target("avx2")))
static int64_t ocr__pack_a_rows6(const float *a, int64_t lda, int64_t kc, float *dst) {
    int64_t k;
    for (k = 0; k + 8 <= kc; k += 8, dst += 48) {
        __m256 c[8];
        ocr__transpose8_cols(a + k, lda, 1, c);
        _mm256_storeu_ps(dst, c[0]); _mm256_storeu_ps(dst + 6, c[1]); _mm256_storeu_ps(dst + 12, c[2]);
        _mm256_storeu_ps(dst + 18, c[3]); _mm256_storeu_ps(dst + 24, c[4]); _mm256_storeu_ps(dst + 30, c[5]);
        _mm256_storeu_ps(dst + 36, c[6]);
        _mm_storeu_ps(dst + 42, _mm256_castps256_ps128(c[7]));
        _mm_storel_pi((__m64 *)(void *)(dst + 46), _mm256_extractf128_ps(c[7], 1));
    }
    return k;
}
#endif

/* Packs op(A)[i0:i0+mc, k0:k0+kc] into mr-row panels, k-major inside a panel. */
static void ocr__pack_a(const ocr__gemm_job *g, int64_t i0, int64_t mc, int64_t k0, int64_t kc, float *dst) {
    int64_t ip, k, i, mr = g->uk.mr;
    for (ip = 0; ip < mc; ip += mr) {
        int64_t rows = mc - ip < mr ? mc - ip : mr;
        k = 0;
#ifdef OCR__HAVE_AVX2
        if (!g->trans_a && rows == 8 && mr == 8 && g->uk.fn != ocr__ukernel_portable) {
            k = ocr__pack_a_rows8(g->A + (i0 + ip) * g->lda + k0, g->lda, kc, dst);
            dst += k * mr;
        } else if (!g->trans_a && rows == 6 && mr == 6 && g->uk.fn != ocr__ukernel_portable) {
            k = ocr__pack_a_rows6(g->A + (i0 + ip) * g->lda + k0, g->lda, kc, dst);
            dst += k * mr;
        }
#endif
        for (; k < kc; k++, dst += mr) {
            for (i = 0; i < rows; i++) {
                int64_t r = i0 + ip + i, col = k0 + k;
                dst[i] = g->trans_a ? g->A[col * g->lda + r] : g->A[r * g->lda + col];
            }
            for (; i < mr; i++) dst[i] = 0.0f;
        }
    }
}

#ifdef OCR__HAVE_AVX2
/* dst[j * ldd + i] = src[i * lds + j] for i < rows, j < cols of a 16 x 16 block, zeros for i >= rows (rows j >= cols
   of dst are not written): pairs of rows interleaved, then pairs of pairs, then the 128-bit lanes of each group of
   four moved into place. */
__attribute__((target("avx512f"), always_inline))
static inline void ocr__transpose16_part(const float *src, int64_t lds, float *dst, int64_t ldd, int rows, int cols) {
    __m512 r[16], a[16], b[16];
    int i, m;
    const __mmask16 lanes = (__mmask16)((1u << cols) - 1u); /* cols 1..16 */
    for (i = 0; i < 16; i++) r[i] = i < rows ? _mm512_maskz_loadu_ps(lanes, src + i * lds) : _mm512_setzero_ps();
    for (i = 0; i < 16; i += 2) { a[i] = _mm512_unpacklo_ps(r[i], r[i + 1]); a[i + 1] = _mm512_unpackhi_ps(r[i], r[i + 1]); }
    for (i = 0; i < 16; i += 4) { /* b[i + m], lane L: column 4L + m, rows i..i+3 */
        b[i] = _mm512_castpd_ps(_mm512_unpacklo_pd(_mm512_castps_pd(a[i]), _mm512_castps_pd(a[i + 2])));
        b[i + 1] = _mm512_castpd_ps(_mm512_unpackhi_pd(_mm512_castps_pd(a[i]), _mm512_castps_pd(a[i + 2])));
        b[i + 2] = _mm512_castpd_ps(_mm512_unpacklo_pd(_mm512_castps_pd(a[i + 1]), _mm512_castps_pd(a[i + 3])));
        b[i + 3] = _mm512_castpd_ps(_mm512_unpackhi_pd(_mm512_castps_pd(a[i + 1]), _mm512_castps_pd(a[i + 3])));
    }
    for (m = 0; m < 4; m++) {
        __m512 c0 = _mm512_shuffle_f32x4(b[m], b[4 + m], 0x44), c1 = _mm512_shuffle_f32x4(b[m], b[4 + m], 0xEE);
        __m512 c2 = _mm512_shuffle_f32x4(b[8 + m], b[12 + m], 0x44), c3 = _mm512_shuffle_f32x4(b[8 + m], b[12 + m], 0xEE);
        if (m < cols) _mm512_storeu_ps(dst + m * ldd, _mm512_shuffle_f32x4(c0, c2, 0x88));
        if (4 + m < cols) _mm512_storeu_ps(dst + (4 + m) * ldd, _mm512_shuffle_f32x4(c0, c2, 0xDD));
        if (8 + m < cols) _mm512_storeu_ps(dst + (8 + m) * ldd, _mm512_shuffle_f32x4(c1, c3, 0x88));
        if (12 + m < cols) _mm512_storeu_ps(dst + (12 + m) * ldd, _mm512_shuffle_f32x4(c1, c3, 0xDD));
    }
}

__attribute__((target("avx512f")))
static void ocr__transpose16(const float *src, int64_t lds, float *dst, int64_t ldd) { ocr__transpose16_part(src, lds, dst, ldd, 16, 16); }
__attribute__((target("avx512f")))
static void ocr__transpose16_edge(const float *src, int64_t lds, float *dst, int64_t ldd, int rows, int cols) {
    ocr__transpose16_part(src, lds, dst, ldd, rows, cols);
}
#endif

#ifdef OCR__HAVE_AVX2
/* kc rows of nr floats (a multiple of 8) from src (row stride lds) to dst, back to back: inline vector copies, as a
   memcpy call per 64-byte row cost more than the copy itself */
__attribute__((target("avx2")))
static void ocr__copy_rows8(const float *src, int64_t lds, int64_t kc, int64_t nr, float *dst) {
    int64_t k, j;
    for (k = 0; k < kc; k++, src += lds, dst += nr)
        for (j = 0; j < nr; j += 8) _mm256_store_ps(dst + j, _mm256_loadu_ps(src + j));
}
#endif

/* Packs op(B)[k0:k0+kc, j0:j0+nc] into nr-column panels. */
static void ocr__pack_b(const ocr__gemm_job *g, int64_t k0, int64_t kc, int64_t j0, int64_t nc, float *dst) {
    int64_t jp, k, j, nr = g->uk.nr;
    for (jp = 0; jp < nc; jp += nr) {
        int64_t cols = nc - jp < nr ? nc - jp : nr;
        if (!g->trans_b && cols == nr) {
#ifdef OCR__HAVE_AVX2
            if (g->uk.fn != ocr__ukernel_portable) { ocr__copy_rows8(g->B + k0 * g->ldb + j0 + jp, g->ldb, kc, nr, dst); dst += kc * nr; continue; }
#endif
            for (k = 0; k < kc; k++, dst += nr) memcpy(dst, g->B + (k0 + k) * g->ldb + j0 + jp, (size_t)nr * sizeof(float));
            continue;
        }
        k = 0;
#ifdef OCR__HAVE_AVX2
        if (g->trans_b && nr == 48 && g->uk.fn == ocr__ukernel_avx512) {
            /* B^T: 16 x 16 blocks transposed in registers, the last k rows and a partial panel's columns included
               (element by element they took a third of the weight gradients' packing: Winograd's run over 45 tiles
               and leaves a 16-column panel at 256 channels) */
            for (; k < kc; k += 16) {
                int nk = kc - k < 16 ? (int)(kc - k) : 16, i;
                for (j = 0; j < 48; j += 16) {
                    int ncol = cols - j < 16 ? (int)(cols - j) : 16;
                    const float *src = g->B + (j0 + jp + j) * g->ldb + k0 + k;
                    if (ncol == 16 && nk == 16) ocr__transpose16(src, g->ldb, dst + j, nr);
                    else if (ncol > 0) ocr__transpose16_edge(src, g->ldb, dst + j, nr, ncol, nk);
                    else for (i = 0; i < nk; i++) memset(dst + i * nr + j, 0, 16 * sizeof(float));
                }
                dst += nk * nr;
            }
            continue;
        }
        /* the same in 8 x 8 blocks for the AVX2 kernel (nr 16): element by element, the weight gradient's shape in
           bench_gemm ran at 45 GFLOP/s on one thread, now 85 */
        if (g->trans_b && g->uk.fn == ocr__ukernel_avx2 && cols == nr) {
            for (; k + 8 <= kc; k += 8, dst += 8 * nr)
                for (j = 0; j < 16; j += 8) ocr__transpose8(g->B + (j0 + jp + j) * g->ldb + k0 + k, g->ldb, dst + j, nr);
        }
#endif
        for (; k < kc; k++, dst += nr) {
            for (j = 0; j < cols; j++) {
                int64_t row = k0 + k, c = j0 + jp + j;
                dst[j] = g->trans_b ? g->B[c * g->ldb + row] : g->B[row * g->ldb + c];
            }
            for (; j < nr; j++) dst[j] = 0.0f;
        }
    }
}

/* Work items over mr-row panels of A: pack them. */
static void ocr__gemm_pack_a_part(void *arg, int64_t begin, int64_t end, int tid) {
    const ocr__gemm_job *g = (const ocr__gemm_job *)arg;
    int64_t mr = g->uk.mr, m0 = begin * mr, m1 = end * mr < g->M ? end * mr : g->M;
    (void)tid;
    ocr__pack_a(g, m0, m1 - m0, g->pc, g->kc, g->pa + m0 * g->kc);
}

/* Both packings in one dispatch, shared out by size: work items are units of one row of an A panel (mr per panel)
   followed by one column of a B panel (nr per panel), and each panel goes to the part holding its first unit.
   (Counting panels instead gave layer3's two threads 21 A panels against 11 and every B panel, six times the data.) */
static void ocr__gemm_pack_b_part(void *arg, int64_t begin, int64_t end, int tid);
static void ocr__gemm_pack_part(void *arg, int64_t begin, int64_t end, int tid) {
    const ocr__gemm_job *g = (const ocr__gemm_job *)arg;
    int64_t mr = g->uk.mr, nr = g->uk.nr, a_units = g->a_panels * mr, b_panels = (g->nc + nr - 1) / nr;
    if (begin < a_units) {
        int64_t p0 = (begin + mr - 1) / mr, p1 = ((end < a_units ? end : a_units) + mr - 1) / mr;
        if (p1 > p0) ocr__gemm_pack_a_part(arg, p0, p1, tid);
    }
    if (end > a_units) {
        int64_t q0 = ((begin > a_units ? begin - a_units : 0) + nr - 1) / nr, q1 = (end - a_units + nr - 1) / nr;
        if (q1 > b_panels) q1 = b_panels;
        if (q1 > q0) ocr__gemm_pack_b_part(arg, q0, q1, tid);
    }
}

/* Work items over nr-column panels of B: pack them. */
static void ocr__gemm_pack_b_part(void *arg, int64_t begin, int64_t end, int tid) {
    const ocr__gemm_job *g = (const ocr__gemm_job *)arg;
    int64_t nr = g->uk.nr, j0 = begin * nr, j1 = end * nr < g->nc ? end * nr : g->nc;
    (void)tid;
    ocr__pack_b(g, g->pc, g->kc, g->jc + j0, j1 - j0, g->pb + j0 * g->kc);
}

/* Work items are (mc-row block, nchunk-column chunk) tiles of the current block of C. */
static void ocr__gemm_compute_part(void *arg, int64_t begin, int64_t end, int tid) {
    const ocr__gemm_job *g = (const ocr__gemm_job *)arg;
    float edge[OCR__MR_MAX * OCR__NR_MAX];
    int64_t item, MR = g->uk.mr, NR = g->uk.nr;
    (void)tid;
    for (item = begin; item < end; item++) {
        int64_t ib = item / g->n_chunks, jb = item % g->n_chunks;
        int64_t m0 = ib * g->mc, m1 = m0 + g->mc < g->M ? m0 + g->mc : g->M;
        int64_t n0 = jb * g->nchunk, n1 = n0 + g->nchunk < g->nc ? n0 + g->nchunk : g->nc;
        int64_t jr, ir;
        for (jr = n0; jr < n1; jr += NR) {
            int64_t nr = n1 - jr < NR ? n1 - jr : NR;
            const float *bp = g->pb + (g->b_per_chunk ? jr - n0 : jr) * g->kc;
            for (ir = m0; ir < m1; ir += MR) {
                int64_t mr = m1 - ir < MR ? m1 - ir : MR;
                const float *ap = g->pa + ir * g->kc;
                float *c = g->C + ir * g->ldc + g->jc + jr;
                if (mr == MR && nr == NR) {
                    (g->overwrite ? g->uk.fn0 : g->uk.fn)(g->kc, ap, bp, c, g->ldc, g->alpha);
                } else if (nr == NR && mr <= 4 && g->uk.tail) {
                    g->uk.tail(g->kc, ap, bp, c, g->ldc, g->alpha, mr, g->overwrite);
#ifdef OCR__HAVE_AVX2
                } else if (mr == MR && (nr == 16 || nr == 32) && g->uk.fn == ocr__ukernel_avx512) {
                    /* a panel of exactly one or two vectors (every DBNet plane: 6400, 25600 ... leave 16 past 48s)
                       straight into C; through the edge buffer, its scalar additions took a tenth of a
                       weight gradient's time at 256 channels */
                    (g->overwrite ? ocr__ukernel_for_cols_store(&g->uk, nr) : ocr__ukernel_for_cols(&g->uk, nr))(g->kc, ap, bp, c, g->ldc, g->alpha);
#endif
                } else {
                    int64_t a, b;
                    memset(edge, 0, sizeof edge);
                    ocr__ukernel_for_cols(&g->uk, nr)(g->kc, ap, bp, edge, NR, g->alpha);
                    for (a = 0; a < mr; a++)
                        for (b = 0; b < nr; b++) c[a * g->ldc + b] = (g->overwrite ? 0.0f : c[a * g->ldc + b]) + edge[a * NR + b];
                }
            }
        }
    }
}

/* beta first, so every k-block can accumulate; beta == 0 must not propagate NaN from C */
static void ocr__gemm_scale_part(void *arg, int64_t begin, int64_t end, int tid) {
    const ocr__gemm_job *g = (const ocr__gemm_job *)arg;
    int64_t i, j;
    (void)tid;
    for (i = begin; i < end; i++) {
        float *c = g->C + i * g->ldc;
        if (g->beta == 0.0f) memset(c, 0, (size_t)g->N * sizeof(float));
        else for (j = 0; j < g->N; j++) c[j] *= g->beta;
    }
}

static void ocr__gemm_job_init(ocr__gemm_job *g, const ocr__ukernel *uk, int trans_a, int trans_b, int64_t M, int64_t N, int64_t K,
                               float alpha, const float *A, int64_t lda, const float *B, int64_t ldb, float beta, float *C,
                               int64_t ldc) {
    memset(g, 0, sizeof *g);
    g->uk = *uk; g->trans_a = trans_a; g->trans_b = trans_b;
    g->M = M; g->N = N; g->K = K; g->lda = lda; g->ldb = ldb; g->ldc = ldc; g->alpha = alpha; g->beta = beta;
    g->A = A; g->B = B; g->C = C;
    g->mc = uk->mr * OCR__MC_PANELS;
    g->nchunk = uk->nr * OCR__NCHUNK_PANELS;
}

/* The blocked loops over a prepared job (packing buffers set). With ctx, each block's packing and compute are
   spread over its threads; without, everything runs on the calling thread. */
static void ocr__gemm_run(ocr_ctx *ctx, ocr__gemm_job *g) {
    int64_t jc, pc, a_panels = (g->M + g->uk.mr - 1) / g->uk.mr;
    /* C as the tiles store it, with no pass to zero it first: for the one-K-block shapes (the stem, the 1x1
       convolutions, the data gradients of 64 channels) the pass and the kernels' reads of its zeros doubled the
       traffic to C (two threads: 4-10% faster without). */
    g->overwrite = g->beta == 0.0f && g->alpha != 0.0f && g->K > 0 && g->K <= OCR__KC && g->uk.fn0 != NULL;
    if (g->beta != 1.0f && !g->overwrite) {
        if (ctx) ocr_parallel_for(ctx, g->M, 64, ocr__gemm_scale_part, g);
        else ocr__gemm_scale_part(g, 0, g->M, 0);
    }
    if (g->K == 0 || g->alpha == 0.0f) return;
    g->m_blocks = (g->M + g->mc - 1) / g->mc;
    for (jc = 0; jc < g->N; jc += OCR__NC) {
        int64_t b_panels, items;
        g->jc = jc;
        g->nc = g->N - jc < OCR__NC ? g->N - jc : OCR__NC;
        b_panels = (g->nc + g->uk.nr - 1) / g->uk.nr;
        if (ctx && g->m_blocks * ((g->nc + g->nchunk - 1) / g->nchunk) < 2 * ctx->n_threads) {
            /* few row blocks (a weight gradient has as many rows as output channels): narrower column chunks, so
               every thread gets work */
            int64_t want = (2 * ctx->n_threads + g->m_blocks - 1) / g->m_blocks;
            int64_t panels = (b_panels + want - 1) / want;
            g->nchunk = (panels < 1 ? 1 : panels) * g->uk.nr;
        }
        g->n_chunks = (g->nc + g->nchunk - 1) / g->nchunk;
        items = g->m_blocks * g->n_chunks;
        for (pc = 0; pc < g->K; pc += OCR__KC) {
            g->pc = pc;
            g->kc = g->K - pc < OCR__KC ? g->K - pc : OCR__KC;
            if (ctx && ctx->n_threads > 1) {
                /* small problems stay on one thread: the dispatches would cost more than they save */
                g->a_panels = a_panels;
                ocr_parallel_for(ctx, a_panels * g->uk.mr + b_panels * g->uk.nr, 64, ocr__gemm_pack_part, g);
                ocr_parallel_for(ctx, items, g->M * g->nc * g->kc > 32 * 32 * 32 ? 1 : items, ocr__gemm_compute_part, g);
            } else {
                /* one column chunk of B packed at a time and used by every row block at once: its panels (a quarter
                   of a MB at most) are written and read in L2, where packing the whole block first sent them to L3
                   and back (a fifth of the time of the 64-row shapes) */
                int64_t jb, ib;
                if (!g->a_prepacked) ocr__gemm_pack_a_part(g, 0, a_panels, 0);
                g->b_per_chunk = 1;
                for (jb = 0; jb < g->n_chunks; jb++) {
                    int64_t n0 = jb * g->nchunk, n1 = n0 + g->nchunk < g->nc ? n0 + g->nchunk : g->nc;
                    ocr__pack_b(g, g->pc, g->kc, g->jc + n0, n1 - n0, g->pb);
                    for (ib = 0; ib < g->m_blocks; ib++) ocr__gemm_compute_part(g, ib * g->n_chunks + jb, ib * g->n_chunks + jb + 1, 0);
                }
                g->b_per_chunk = 0;
            }
        }
    }
}

/* Floats of the packing buffers a serial GEMM of this shape needs (each rounded to 64 bytes). */
static void ocr__gemm_buffer_floats(const ocr__ukernel *uk, int64_t M, int64_t N, int64_t K, size_t *pa, size_t *pb) {
    int64_t kc = K < OCR__KC ? K : OCR__KC, nc = N < OCR__NC ? N : OCR__NC;
    *pa = (size_t)(((M + uk->mr - 1) / uk->mr * uk->mr * kc + 15) & ~(int64_t)15);
    *pb = (size_t)(((nc + uk->nr) * kc + 15) & ~(int64_t)15);
}

static void ocr__gemm_serial(const ocr__ukernel *uk, int trans_a, int trans_b, int64_t M, int64_t N, int64_t K, float alpha,
                             const float *A, int64_t lda, const float *B, int64_t ldb, float beta, float *C, int64_t ldc,
                             float *pa, float *pb);

/* A GEMM on several threads as one rectangle of C per thread, each a serial GEMM with its own packing buffers: no
   barrier between K blocks, and no thread writes a packing buffer the other core has just read. (Packing each K
   block together and then sharing its tiles, two threads scaled 1.3-1.6x on the model's shapes: a sixth of their
   time went to waiting at the barriers, and packing B ran at a third of one thread's speed, its stores taking the
   lines back from the other core.) A rectangle repacks the operand it shares with its neighbours (all of op(A)
   when the columns are split), so the grid of tm x tn rectangles is chosen by a cost in flops, each packed float
   counted as OCR__GEMM_PACK_FLOPS, twice that for A, whose panels are transposed as they are packed where B's are
   copied (at the same weight, layer3's 256 x 455 x 2304 split its columns and ran 8% slower than split by rows); the
   shared path stays for when every grid costs more than it would (it also pays about 15% for its barriers).
   Rectangles start at multiples of mr and nr, so every tile and its sums are those of one thread: the same bits. */
#define OCR__GEMM_PACK_FLOPS 30.0
#define OCR__GEMM_PACK_A_FLOPS (2 * OCR__GEMM_PACK_FLOPS)
typedef struct { const ocr__gemm_job *g; float *pa, *pb; size_t pa_floats, pb_floats; int64_t row_panels, col_panels; int tm, tn; } ocr__gemm_split_job;

static void ocr__gemm_split_part(void *arg, int64_t begin, int64_t end, int tid) {
    const ocr__gemm_split_job *j = (const ocr__gemm_split_job *)arg;
    const ocr__gemm_job *g = j->g;
    int64_t part, mr = g->uk.mr, nr = g->uk.nr;
    for (part = begin; part < end; part++) {
        int64_t pi = part / j->tn, pj = part % j->tn;
        int64_t r0 = pi * j->row_panels / j->tm * mr, r1 = (pi + 1) * j->row_panels / j->tm * mr;
        int64_t c0 = pj * j->col_panels / j->tn * nr, c1 = (pj + 1) * j->col_panels / j->tn * nr;
        if (r1 > g->M) r1 = g->M;
        if (c1 > g->N) c1 = g->N;
        if (r1 <= r0 || c1 <= c0) continue;
        ocr__gemm_serial(&g->uk, g->trans_a, g->trans_b, r1 - r0, c1 - c0, g->K, g->alpha, g->trans_a ? g->A + r0 : g->A + r0 * g->lda,
                         g->lda, g->trans_b ? g->B + c0 * g->ldb : g->B + c0, g->ldb, g->beta, g->C + r0 * g->ldc + c0, g->ldc,
                         j->pa + (size_t)tid * j->pa_floats, j->pb + (size_t)tid * j->pb_floats);
    }
}

/* The cost in flops of one rectangle of rows x cols (whole micro-panels) with its packing. */
static double ocr__gemm_rect_cost(int64_t rows, int64_t cols, int64_t K) {
    return 2.0 * (double)rows * (double)cols * (double)K +
           OCR__GEMM_PACK_A_FLOPS * (double)rows * (double)K * (double)((cols + OCR__NC - 1) / OCR__NC) +
           OCR__GEMM_PACK_FLOPS * (double)cols * (double)K;
}

/* The number of row parts tm of the cheapest grid for `threads` threads (tn = threads / tm), or 0 when the shared
   path costs less. */
static int ocr__gemm_split_rows(const ocr__ukernel *uk, int64_t M, int64_t N, int64_t K, int threads) {
    int64_t rp = (M + uk->mr - 1) / uk->mr, cp = (N + uk->nr - 1) / uk->nr;
    double best = 1.15 * ocr__gemm_rect_cost(rp * uk->mr, cp * uk->nr, K) / threads;
    int tm, best_tm = 0;
    for (tm = 1; tm <= threads; tm++) {
        int tn = threads / tm;
        double cost;
        if (threads % tm || rp < tm || cp < tn) continue;
        cost = ocr__gemm_rect_cost((rp + tm - 1) / tm * uk->mr, (cp + tn - 1) / tn * uk->nr, K);
        if (cost < best) { best = cost; best_tm = tm; }
    }
    return best_tm;
}

static int ocr__gemm_split(ocr_ctx *ctx, const ocr__gemm_job *g, int tm) {
    ocr__gemm_split_job j;
    size_t bytes_a, bytes_b;
    j.g = g;
    j.tm = tm;
    j.tn = ctx->n_threads / tm;
    j.row_panels = (g->M + g->uk.mr - 1) / g->uk.mr;
    j.col_panels = (g->N + g->uk.nr - 1) / g->uk.nr;
    ocr__gemm_buffer_floats(&g->uk, (j.row_panels + tm - 1) / tm * g->uk.mr, (j.col_panels + j.tn - 1) / j.tn * g->uk.nr, g->K,
                            &j.pa_floats, &j.pb_floats);
    if (!ocr_size_mul(j.pa_floats * sizeof(float), (size_t)ctx->n_threads, &bytes_a) ||
        !ocr_size_mul(j.pb_floats * sizeof(float), (size_t)ctx->n_threads, &bytes_b))
        return ocr_error(ctx, OCR_EOVERFLOW, "ocr_gemm: M=%lld N=%lld too large", (long long)g->M, (long long)g->N);
    if (!(j.pa = (float *)ocr_ctx_scratch(ctx, OCR_SCRATCH_GEMM_A, bytes_a)) || !(j.pb = (float *)ocr_ctx_scratch(ctx, OCR_SCRATCH_GEMM_B, bytes_b)))
        return ctx->last_status;
    ocr_parallel_for(ctx, ctx->n_threads, 1, ocr__gemm_split_part, &j);
    return OCR_OK;
}

static int ocr__amp_bf16_fast(ocr_ctx *ctx);
static int ocr__amp_count(ocr_ctx *ctx, const float *src, int64_t n, const char *layer, int grad);
static int ocr__gemm_bf16(ocr_ctx *ctx, int trans_a, int trans_b, int64_t M, int64_t N, int64_t K, float alpha, const float *A,
                          int64_t lda, const float *B, int64_t ldb, float beta, float *C, int64_t ldc);

/* ocr_gemm in fp32 whatever ctx->amp says (sizes validated): the convolutions call it with inputs already rounded. */
static int ocr__gemm_f32(ocr_ctx *ctx, int trans_a, int trans_b, int64_t M, int64_t N, int64_t K, float alpha,
                         const float *A, int64_t lda, const float *B, int64_t ldb, float beta, float *C, int64_t ldc) {
    ocr__gemm_job g;
    ocr__ukernel uk;
    int64_t kc_max;
    size_t bytes_a, bytes_b;
    int tm;
    if (M == 0 || N == 0) return OCR_OK;
    if (ocr__use_ref(ctx)) {
        ocr__ref_gemm(trans_a, trans_b, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
        return OCR_OK;
    }
    uk = ocr__pick_ukernel(ctx);
    ocr__gemm_job_init(&g, &uk, trans_a, trans_b, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
    kc_max = K < OCR__KC ? K : OCR__KC;
    if (ctx->n_threads > 1 && M * N * kc_max > 32 * 32 * 32 && (tm = ocr__gemm_split_rows(&uk, M, N, K, ctx->n_threads)))
        return ocr__gemm_split(ctx, &g, tm);
    /* shared packing buffers, rounded up to whole micro-panels */
    if (!ocr_size_mul((size_t)((M + uk.mr - 1) / uk.mr * uk.mr), (size_t)kc_max * sizeof(float), &bytes_a) ||
        !ocr_size_mul((size_t)(OCR__NC + uk.nr), (size_t)kc_max * sizeof(float), &bytes_b))
        return ocr_error(ctx, OCR_EOVERFLOW, "ocr_gemm: M=%lld too large", (long long)M);
    if (!(g.pa = (float *)ocr_ctx_scratch(ctx, OCR_SCRATCH_GEMM_A, bytes_a ? bytes_a : 64)) ||
        !(g.pb = (float *)ocr_ctx_scratch(ctx, OCR_SCRATCH_GEMM_B, bytes_b ? bytes_b : 64)))
        return ctx->last_status;
    ocr__gemm_run(ctx, &g);
    return OCR_OK;
}

OCRDEF int ocr_gemm(ocr_ctx *ctx, int trans_a, int trans_b, int64_t M, int64_t N, int64_t K, float alpha,
                    const float *A, int64_t lda, const float *B, int64_t ldb, float beta, float *C, int64_t ldc) {
    if (M < 0 || N < 0 || K < 0 || ldc < N || lda < (trans_a ? M : K) || ldb < (trans_b ? K : N))
        return ocr_error(ctx, OCR_EINVAL, "ocr_gemm: bad sizes M=%lld N=%lld K=%lld lda=%lld ldb=%lld ldc=%lld", (long long)M,
                         (long long)N, (long long)K, (long long)lda, (long long)ldb, (long long)ldc);
    if (M == 0 || N == 0) return OCR_OK;
    if (ctx->amp != OCR_AMP_OFF && K > 0 && alpha != 0.0f) {
        int64_t a_n = ocr__gemm_operand_extent(trans_a, M, K, lda), b_n = ocr__gemm_operand_extent(trans_b, K, N, ldb);
        int rc;
        if (ocr__amp_bf16_fast(ctx)) {
            if ((rc = ocr__amp_count(ctx, A, a_n, "gemm", 0)) || (rc = ocr__amp_count(ctx, B, b_n, "gemm", 0))) return rc;
            return ocr__gemm_bf16(ctx, trans_a, trans_b, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
        }
        if (!(A = ocr__amp_input(ctx, A, a_n, 0, "gemm", 0)) || !(B = ocr__amp_input(ctx, B, b_n, 1, "gemm", 0))) return ctx->last_status;
    }
    return ocr__gemm_f32(ctx, trans_a, trans_b, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
}


/* A whole GEMM on the calling thread with caller-provided packing buffers: for callers that already run one
   independent problem per thread (convolutions over images), where per-GEMM dispatches would only cost. */
static void ocr__gemm_serial(const ocr__ukernel *uk, int trans_a, int trans_b, int64_t M, int64_t N, int64_t K, float alpha,
                             const float *A, int64_t lda, const float *B, int64_t ldb, float beta, float *C, int64_t ldc,
                             float *pa, float *pb) {
    ocr__gemm_job g;
    if (M == 0 || N == 0) return;
    ocr__gemm_job_init(&g, uk, trans_a, trans_b, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
    g.pa = pa;
    g.pb = pb;
    ocr__gemm_run(NULL, &g);
}

/* The same with op(A) packed once by the caller (ocr__pack_a over all M rows and K <= OCR__KC columns), for callers
   that multiply one small matrix into many right-hand sides. */
static void ocr__gemm_serial_packed_a(const ocr__ukernel *uk, int64_t M, int64_t N, int64_t K, float alpha, const float *packed_a,
                                      const float *B, int64_t ldb, float beta, float *C, int64_t ldc, float *pb) {
    ocr__gemm_job g;
    if (M == 0 || N == 0) return;
    ocr__gemm_job_init(&g, uk, 0, 0, M, N, K, alpha, NULL, 0, B, ldb, beta, C, ldc);
    g.pa = (float *)packed_a;
    g.pb = pb;
    g.a_prepacked = 1;
    ocr__gemm_run(NULL, &g);
}

#ifdef OCR__HAVE_AVX2
/* dw[m, r] += sum_p dy[m, p] * col[r, p] for m < M, r < R, p < P: the weight gradient as dot products along the
   pixels, where both operands are contiguous, so nothing is transposed or packed. Blocks of 4 x 6 outputs keep 24
   accumulators; the 16-lane partial sums are reduced once per block. */
__attribute__((target("avx512f")))
static void ocr__wgrad_avx512(int64_t M, int64_t R, int64_t P, const float *dy, int64_t ldy, const float *col, int64_t ldc,
                              float *dw, int64_t ldw) {
    int64_t m0, r0, p, i, j;
    __mmask16 tail = (__mmask16)((1u << (P % 16)) - 1u);
    int64_t pv = P - P % 16;
    for (m0 = 0; m0 < M; m0 += 4) {
        int64_t mb = M - m0 < 4 ? M - m0 : 4;
        for (r0 = 0; r0 < R; r0 += 6) {
            int64_t rb = R - r0 < 6 ? R - r0 : 6;
            if (mb == 4 && rb == 6) {
                __m512 acc[4][6];
                for (i = 0; i < 4; i++) for (j = 0; j < 6; j++) acc[i][j] = _mm512_setzero_ps();
#define OCR__WG_STEP(LOAD)                                                                                  \
                {                                                                                          \
                    __m512 y0 = LOAD(dy + (m0 + 0) * ldy + p), y1 = LOAD(dy + (m0 + 1) * ldy + p);         \
                    __m512 y2 = LOAD(dy + (m0 + 2) * ldy + p), y3 = LOAD(dy + (m0 + 3) * ldy + p);         \
                    for (j = 0; j < 6; j++) {                                                              \
                        __m512 x = LOAD(col + (r0 + j) * ldc + p);                                         \
                        acc[0][j] = _mm512_fmadd_ps(y0, x, acc[0][j]); acc[1][j] = _mm512_fmadd_ps(y1, x, acc[1][j]); \
                        acc[2][j] = _mm512_fmadd_ps(y2, x, acc[2][j]); acc[3][j] = _mm512_fmadd_ps(y3, x, acc[3][j]); \
                    }                                                                                      \
                }
#define OCR__WG_FULL(q) _mm512_loadu_ps(q)
#define OCR__WG_TAIL(q) _mm512_maskz_loadu_ps(tail, q)
                for (p = 0; p < pv; p += 16) OCR__WG_STEP(OCR__WG_FULL)
                if (tail) OCR__WG_STEP(OCR__WG_TAIL)
                for (i = 0; i < 4; i++) for (j = 0; j < 6; j++) dw[(m0 + i) * ldw + r0 + j] += _mm512_reduce_add_ps(acc[i][j]);
            } else {
                for (i = 0; i < mb; i++)
                    for (j = 0; j < rb; j++) {
                        const float *yr = dy + (m0 + i) * ldy, *xr = col + (r0 + j) * ldc;
                        __m512 a = _mm512_setzero_ps();
                        for (p = 0; p < pv; p += 16) a = _mm512_fmadd_ps(_mm512_loadu_ps(yr + p), _mm512_loadu_ps(xr + p), a);
                        if (tail) a = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(tail, yr + p), _mm512_maskz_loadu_ps(tail, xr + p), a);
                        dw[(m0 + i) * ldw + r0 + j] += _mm512_reduce_add_ps(a);
                    }
            }
        }
    }
#undef OCR__WG_STEP
#undef OCR__WG_FULL
#undef OCR__WG_TAIL
}
#endif

/* ---------------------------------------------------------------- numerics watch */

static int ocr__watch(ocr_ctx *ctx, const char *fn, const char *phase, const ocr_tensor *t) {
    char d[200], msg[OCR_ERROR_MAX];
    int64_t i;
    if (!(ctx->debug_flags & OCR_DEBUG_CHECK_NUMERICS) || !t) return OCR_OK;
    /* under mixed precision a non-finite gradient is the loss scaler's signal to skip the step and lower the scale
       (ocr_grad_scaler_unscale finds it and names the parameter); forward values stay an error */
    if (ctx->amp != OCR_AMP_OFF && !strcmp(phase, "backward")) return OCR_OK;
#ifdef OCR_CUDA
    if (t->device == OCR_DEVICE_CUDA) return ocr_check_finite(ctx, fn, t);
#endif
    i = ocr_find_nonfinite(t);
    if (i < 0) return OCR_OK;
    snprintf(msg, sizeof msg, "%s (%s): first non-finite value %g in output %s at flat index %lld", fn, phase,
             ocr_tensor_get(t, i), ocr_tensor_describe(t, d, sizeof d), (long long)i);
    return ocr_error(ctx, OCR_ENONFINITE, "%s", msg);
}

#ifdef OCR_CUDA
/* The status of a CUDA entry point, then the numerics watch the CPU path runs, on up to three outputs. */
static int ocr__cuda_done(ocr_ctx *ctx, int rc, const char *fn, const char *phase, const ocr_tensor *a, const ocr_tensor *b,
                          const ocr_tensor *c) {
    if (rc || (rc = ocr__watch(ctx, fn, phase, a)) || (rc = ocr__watch(ctx, fn, phase, b))) return rc;
    return ocr__watch(ctx, fn, phase, c);
}
#endif

/* ---------------------------------------------------------------- convolution lowering */

typedef struct {
    const ocr__conv_geom *g;
    const float *x;  /* image n, group g: [Cg, H, W] */
    float *col;      /* [Cg*kh*kw, cols] */
    int64_t p0, cols;
    int even16;      /* stride 2: gather the columns 16 at a time with AVX-512 (the kernel picked is the AVX-512 one) */
} ocr__im2col_job;

#ifdef OCR__HAVE_AVX2
__attribute__((target("avx512f"))) static void ocr__gather_even_avx512(const float *src, int64_t n, float *dst);
#endif
static int ocr__ukernel_is_avx512(const ocr__ukernel *uk) {
#ifdef OCR__HAVE_AVX2
    return uk->fn == ocr__ukernel_avx512;
#else
    (void)uk;
    return 0;
#endif
}

/* Output columns [lo, hi) of a row whose input column ow*sw + base lies inside [0, W): only those read or
   write the image, the rest is zero padding. */
static void ocr__valid_cols(int64_t base, int64_t sw, int64_t W, int64_t ow0, int64_t len, int64_t *lo, int64_t *hi) {
    int64_t first = base >= 0 ? 0 : (-base + sw - 1) / sw, last = W - 1 - base < 0 ? -1 : (W - 1 - base) / sw;
    *lo = first > ow0 ? first : ow0;
    *hi = last + 1 < ow0 + len ? last + 1 : ow0 + len;
    if (*hi < *lo) *hi = *lo;
}

/* Runs the statements given for each output-row segment of the chunk [p0, p0+cols), with oh, ow0, len and q (the segment's first column in the chunk) defined. */
#define OCR__FOR_SEGMENTS(g, p0, cols, ...)                                                                    \
    do {                                                                                                      \
        int64_t q_ = 0;                                                                                       \
        while (q_ < (cols)) {                                                                                 \
            int64_t p_ = (p0) + q_, oh = p_ / (g)->OW, ow0 = p_ % (g)->OW;                                    \
            int64_t len = (g)->OW - ow0 < (cols) - q_ ? (g)->OW - ow0 : (cols) - q_, q = q_;                  \
            __VA_ARGS__                                                                                              \
            q_ += len;                                                                                        \
        }                                                                                                     \
    } while (0)

/* dst[q] = src[q * stride] for q < n */
static void ocr__gather_strided(const float *src, int64_t stride, int64_t n, float *dst, int even16) {
    int64_t q;
#ifdef OCR__HAVE_AVX2
    if (stride == 2 && even16) {
        ocr__gather_even_avx512(src, n, dst);
        return;
    }
#else
    (void)even16;
#endif
    for (q = 0; q < n; q++) dst[q] = src[q * stride];
}

static void ocr__im2col_part(void *arg, int64_t begin, int64_t end, int tid) {
    const ocr__im2col_job *j = (const ocr__im2col_job *)arg;
    const ocr__conv_geom *g = j->g;
    int64_t r;
    (void)tid;
    for (r = begin; r < end; r++) {
        int64_t c = r / (g->kh * g->kw), ki = (r / g->kw) % g->kh, kj = r % g->kw, base = kj * g->dw - g->pw;
        const float *xc = j->x + c * g->H * g->W;
        float *dst = j->col + r * j->cols;
        OCR__FOR_SEGMENTS(g, j->p0, j->cols, {
            int64_t ih = oh * g->sh - g->ph + ki * g->dh, lo, hi, ow;
            float *d = dst + q - ow0;   /* d[ow] is the column of output pixel (oh, ow) */
            if (ih < 0 || ih >= g->H) { memset(dst + q, 0, (size_t)len * sizeof(float)); }
            else {
                const float *srow = xc + ih * g->W + base;
                ocr__valid_cols(base, g->sw, g->W, ow0, len, &lo, &hi);
                for (ow = ow0; ow < lo; ow++) d[ow] = 0.0f;
                if (g->sw == 1) { if (hi > lo) memcpy(d + lo, srow + lo, (size_t)(hi - lo) * sizeof(float)); }
                else ocr__gather_strided(srow + lo * g->sw, g->sw, hi - lo, d + lo, j->even16);
                for (ow = hi; ow < ow0 + len; ow++) d[ow] = 0.0f;
            }
        });
    }
}

typedef struct {
    const ocr__conv_geom *g;
    const float *col;
    float *dx;       /* [Cg, H, W] accumulated */
    int64_t p0, cols;
} ocr__col2im_job;

/* One channel per work item: channels own disjoint parts of dx, so no two threads add to the same value. */
static void ocr__col2im_part(void *arg, int64_t begin, int64_t end, int tid) {
    const ocr__col2im_job *j = (const ocr__col2im_job *)arg;
    const ocr__conv_geom *g = j->g;
    int64_t c, ki, kj;
    (void)tid;
    for (c = begin; c < end; c++) {
        float *dxc = j->dx + c * g->H * g->W;
        for (ki = 0; ki < g->kh; ki++)
            for (kj = 0; kj < g->kw; kj++) {
                const float *src = j->col + ((c * g->kh + ki) * g->kw + kj) * j->cols;
                int64_t base = kj * g->dw - g->pw;
                OCR__FOR_SEGMENTS(g, j->p0, j->cols, {
                    int64_t ih = oh * g->sh - g->ph + ki * g->dh, lo, hi, ow;
                    if (ih >= 0 && ih < g->H) {
                        float *drow = dxc + ih * g->W + base;
                        const float *s_ = src + q - ow0;
                        ocr__valid_cols(base, g->sw, g->W, ow0, len, &lo, &hi);
                        if (g->sw == 1) for (ow = lo; ow < hi; ow++) drow[ow] += s_[ow];
                        else for (ow = lo; ow < hi; ow++) drow[ow * g->sw] += s_[ow];
                    }
                });
            }
    }
}

static int ocr__conv_is_pointwise(const ocr__conv_geom *g) {
    return g->kh == 1 && g->kw == 1 && g->sh == 1 && g->sw == 1 && g->ph == 0 && g->pw == 0;
}

/* Output columns per chunk: keeps the im2col block near 1 MB (L2-sized) instead of a whole image. */
static int64_t ocr__conv_chunk(const ocr__conv_geom *g) {
    int64_t kdim = (g->C / g->groups) * g->kh * g->kw, P = g->OH * g->OW;
    int64_t cols = ((int64_t)1 << 18) / (kdim ? kdim : 1);
    cols = cols < 256 ? 256 : cols;
    cols -= cols % 48;
    return cols > P ? P : cols;
}

enum { OCR__CONV_FWD, OCR__CONV_BWD_DATA, OCR__CONV_BWD_WEIGHT };

typedef struct {
    const ocr__conv_geom *g;
    int mode, accumulate, pointwise;
    float *x, *w, *y;
    int64_t chunk, n_chunks;
    ocr__ukernel uk;
    size_t pa_floats, pb_floats, col_floats, dw_floats;
    float *block[OCR_MAX_THREADS];   /* per thread: packed A | packed B | im2col | weight-gradient partial */
} ocr__conv_job;

/* One (image, group, chunk of output pixels) piece of a data or weight gradient on the calling thread. parallel_gemm: the
   GEMM may use the pool (the caller loops over pieces serially). dw: where BWD_WEIGHT accumulates. */
static int ocr__conv_piece(ocr_ctx *ctx, const ocr__conv_job *j, int64_t n, int64_t gr, int64_t p0, float *pa, float *pb,
                           float *col, float *dw, int parallel_gemm) {
    const ocr__conv_geom *g = j->g;
    int64_t Cg = g->C / g->groups, Kg = g->K / g->groups, kdim = Cg * g->kh * g->kw, P = g->OH * g->OW, HW = g->H * g->W;
    int64_t cols = P - p0 < j->chunk ? P - p0 : j->chunk;
    float *xg = j->x + (n * g->C + gr * Cg) * HW, *yg = j->y + (n * g->K + gr * Kg) * P, *wg = j->w + gr * Kg * kdim;
    const float *B = xg + p0;
    int64_t ldb = HW;
    if (j->mode != OCR__CONV_BWD_DATA && !j->pointwise) {
        ocr__im2col_job ij;
        ij.g = g; ij.x = xg; ij.col = col; ij.p0 = p0; ij.cols = cols; ij.even16 = ocr__ukernel_is_avx512(&j->uk);
        if (parallel_gemm) ocr_parallel_for(ctx, kdim, 1, ocr__im2col_part, &ij);
        else ocr__im2col_part(&ij, 0, kdim, 0);
        B = col;
        ldb = cols;
    }
#define OCR__GEMM(ta, tb, M, N, K, A, lda, B_, ldb_, beta, C, ldc)                                                  \
    do {                                                                                                           \
        if (parallel_gemm) { int rc_ = ocr__gemm_f32(ctx, ta, tb, M, N, K, 1.0f, A, lda, B_, ldb_, beta, C, ldc); if (rc_) return rc_; } \
        else ocr__gemm_serial(&j->uk, ta, tb, M, N, K, 1.0f, A, lda, B_, ldb_, beta, C, ldc, pa, pb);            \
    } while (0)
    if (j->mode == OCR__CONV_BWD_DATA) {
        if (j->pointwise) {
            OCR__GEMM(1, 0, kdim, cols, Kg, wg, kdim, yg + p0, P, 1.0f, xg + p0, HW);
        } else {
            ocr__col2im_job cj;
            OCR__GEMM(1, 0, kdim, cols, Kg, wg, kdim, yg + p0, P, 0.0f, col, cols);
            cj.g = g; cj.col = col; cj.dx = xg; cj.p0 = p0; cj.cols = cols;
            if (parallel_gemm) ocr_parallel_for(ctx, Cg, 1, ocr__col2im_part, &cj);
            else ocr__col2im_part(&cj, 0, Cg, 0);
        }
    } else {
#ifdef OCR__HAVE_AVX2
        if (j->uk.fn == ocr__ukernel_avx512 && Kg <= OCR__WGRAD_DOT_MAX_K) {
            ocr__wgrad_avx512(Kg, kdim, cols, yg + p0, P, B, ldb, dw + gr * Kg * kdim, kdim);
            return OCR_OK;
        }
#endif
        OCR__GEMM(0, 1, Kg, kdim, cols, yg + p0, P, B, ldb, 1.0f, dw + gr * Kg * kdim, kdim);
    }
#undef OCR__GEMM
    return OCR_OK;
}

/* Work items: (image, group, chunk) pieces, or whole (image, group) pairs for BWD_DATA, whose chunks scatter into
   overlapping parts of the same dx. Each thread uses only its own buffers, and BWD_WEIGHT sums into a per-thread
   partial, so no two threads ever write the same memory. */
static void ocr__conv_items(void *arg, int64_t begin, int64_t end, int tid) {
    const ocr__conv_job *j = (const ocr__conv_job *)arg;
    float *pa = j->block[tid], *pb = pa + j->pa_floats, *col = pb + j->pb_floats, *dw = col + j->col_floats;
    int64_t item, c;
    for (item = begin; item < end; item++) {
        if (j->mode == OCR__CONV_BWD_DATA) {
            for (c = 0; c < j->n_chunks; c++)
                (void)ocr__conv_piece(NULL, j, item / j->g->groups, item % j->g->groups, c * j->chunk, pa, pb, col, dw, 0);
        } else {
            int64_t pair = item / j->n_chunks;
            (void)ocr__conv_piece(NULL, j, pair / j->g->groups, pair % j->g->groups, (item % j->n_chunks) * j->chunk, pa, pb,
                                  col, dw, 0);
        }
    }
}

/* What a forward convolution does to each finished piece of its output while the piece is still in cache: add the
   bias of its channel, then clamp at 0 (relu), or add the residual and then clamp (res). Same results as a separate
   bias pass, addition and ReLU op. */
typedef struct {
    const float *bias;
    int relu;
    const float *res, *y0;  /* residual of the output's shape, and the output's first value: p's residual is res[p - y0] */
    int vec;                /* ocr__ctx_lanes, for the row helpers */
} ocr__conv_epilogue;

static void ocr__affine_row(int vec, const float *x, float *y, int64_t n, float scale, float shift, int relu);
static void ocr__add_relu_row(int vec, const float *a, const float *b, float *y, int64_t n);

/* rows channels (first one first_channel) of cols outputs each, ld apart */
static void ocr__conv_epilogue_apply(const ocr__conv_epilogue *ep, float *y, int64_t ld, int64_t first_channel, int64_t rows, int64_t cols) {
    int64_t r;
    if (!ep->bias && !ep->relu && !ep->res) return;
    for (r = 0; r < rows; r++) {
        float *yr = y + r * ld;
        float shift = ep->bias ? ep->bias[first_channel + r] : 0.0f;
        if (!ep->res) { ocr__affine_row(ep->vec, yr, yr, cols, 1.0f, shift, ep->relu); continue; }
        if (ep->bias) ocr__affine_row(ep->vec, yr, yr, cols, 1.0f, shift, 0);
        ocr__add_relu_row(ep->vec, yr, ep->res + (yr - ep->y0), yr, cols); /* a residual always comes with the ReLU */
    }
}

/* One output-row segment of a B panel: panel columns [q, q+len) are output pixels (oh, ow0..ow0+len). */
typedef struct { int64_t oh, ow0, len, q; } ocr__seg;

/* Packs columns [q0, q0+qn) of im2col(x) (x: one image and group) straight into a GEMM B panel of kdim rows of nr
   floats, zero past qn: the forward GEMM then needs neither a column buffer nor a separate B packing pass. */
static void ocr__im2col_panel(const ocr__conv_geom *g, const float *x, int64_t q0, int64_t qn, int64_t nr, float *dst) {
    ocr__seg seg[OCR__NR_MAX];
    int64_t n_seg = 0, q = 0, kdim = (g->C / g->groups) * g->kh * g->kw, r, c = 0, ki = 0, kj = 0, s;
    while (q < qn) {
        int64_t p = q0 + q, ow0 = p % g->OW, len = g->OW - ow0 < qn - q ? g->OW - ow0 : qn - q;
        seg[n_seg].oh = p / g->OW; seg[n_seg].ow0 = ow0; seg[n_seg].len = len; seg[n_seg].q = q;
        n_seg++;
        q += len;
    }
    for (r = 0; r < kdim; r++, dst += nr) {
        int64_t base = kj * g->dw - g->pw, sw = g->sw;
        /* output columns whose input column ow*sw + base lies inside the image */
        int64_t first = base >= 0 ? 0 : (-base + sw - 1) / sw, last = g->W - 1 - base < 0 ? -1 : (g->W - 1 - base) / sw;
        const float *xc = x + c * g->H * g->W;
        for (s = 0; s < n_seg; s++) {
            int64_t ih = seg[s].oh * g->sh - g->ph + ki * g->dh, ow0 = seg[s].ow0, end = ow0 + seg[s].len, lo, hi, ow;
            float *d = dst + seg[s].q - ow0; /* d[ow] is the column of output pixel (oh, ow) */
            lo = first > ow0 ? first : ow0;
            hi = last + 1 < end ? last + 1 : end;
            if (ih < 0 || ih >= g->H || hi < lo) lo = hi = end;
            for (ow = ow0; ow < lo; ow++) d[ow] = 0.0f;
            if (hi > lo) {
                const float *srow = xc + ih * g->W + base;
                if (sw == 1) memcpy(d + lo, srow + lo, (size_t)(hi - lo) * sizeof(float));
                else for (ow = lo; ow < hi; ow++) d[ow] = srow[ow * sw];
            }
            for (ow = hi; ow < end; ow++) d[ow] = 0.0f;
        }
        for (q = qn; q < nr; q++) dst[q] = 0.0f;
        if (++kj == g->kw) { kj = 0; if (++ki == g->kh) { ki = 0; c++; } }
    }
}

typedef struct {
    const ocr__conv_geom *g;
    const float *x, *pa;   /* pa: the weights of every group packed once into mr-row panels over the whole kdim */
    float *y;
    int accumulate;
    ocr__conv_epilogue ep;
    int64_t chunk, n_chunks, pb_floats; /* chunk: the most columns of any chunk; the nr-wide panels of an output plane
                                           are shared out evenly over n_chunks chunks */
    ocr__ukernel uk;
    float *pb[OCR_MAX_THREADS];  /* per thread: the B panels of one chunk */
    const float *w;              /* for packing pa */
    int64_t kdim, Kg, kg_pad;
    int64_t image;               /* the shared-panels route: its image, and all of its panels in pb[0] */
} ocr__conv_fwd_job;

/* Work items are the weights' mr-row panels (of every group): pack them into pa. */
static void ocr__conv_pack_weights_part(void *arg, int64_t begin, int64_t end, int tid) {
    const ocr__conv_fwd_job *j = (const ocr__conv_fwd_job *)arg;
    int64_t MR = j->uk.mr, per_group = j->kg_pad / MR, q;
    ocr__gemm_job pk;
    (void)tid;
    memset(&pk, 0, sizeof pk);
    pk.uk = j->uk;
    pk.lda = j->kdim;
    for (q = begin; q < end; q++) {
        int64_t gr = q / per_group, i0 = (q % per_group) * MR;
        pk.A = j->w + gr * j->Kg * j->kdim;
        ocr__pack_a(&pk, i0, j->Kg - i0 < MR ? j->Kg - i0 : MR, 0, j->kdim, (float *)j->pa + gr * j->kg_pad * j->kdim + i0 * j->kdim);
    }
}

/* Output rows [r0, r1) (r0 a multiple of mr) of cols columns at yc (P apart) from the packed weights pa and the B
   panels pb, added to what yc holds: K blocks outermost, so each output's sum runs in the same order on either route. */
static void ocr__conv_fwd_tiles(const ocr__conv_fwd_job *j, const float *pa, const float *pb, float *yc, int64_t cols, int64_t r0,
                                int64_t r1) {
    int64_t kdim = j->kdim, P = j->g->OH * j->g->OW, MR = j->uk.mr, NR = j->uk.nr, n_panels = (cols + NR - 1) / NR, pc, jp, ip;
    float edge[OCR__MR_MAX * OCR__NR_MAX];
    for (pc = 0; pc < kdim; pc += OCR__KC) {
        int64_t kc = kdim - pc < OCR__KC ? kdim - pc : OCR__KC;
        for (jp = 0; jp < n_panels; jp++) {
            int64_t nr = cols - jp * NR < NR ? cols - jp * NR : NR;
            const float *bp = pb + jp * kdim * NR + pc * NR;
            for (ip = r0; ip < r1; ip += MR) {
                int64_t mr = r1 - ip < MR ? r1 - ip : MR;
                float *c = yc + ip * P + jp * NR;
                if (mr == MR && nr == NR) {
                    j->uk.fn(kc, pa + ip * kdim + pc * MR, bp, c, P, 1.0f);
                } else {
                    int64_t a, b;
                    memset(edge, 0, sizeof edge);
                    ocr__ukernel_for_cols(&j->uk, nr)(kc, pa + ip * kdim + pc * MR, bp, edge, NR, 1.0f);
                    for (a = 0; a < mr; a++)
                        for (b = 0; b < nr; b++) c[a * P + b] += edge[a * NR + b];
                }
            }
        }
    }
}

/* Work items: (image, group, chunk of output pixels). The chunk's B panels are packed from the image, then every
   A panel runs against each B panel while it is hot in L1. */
static void ocr__conv_fwd_items(void *arg, int64_t begin, int64_t end, int tid) {
    const ocr__conv_fwd_job *j = (const ocr__conv_fwd_job *)arg;
    const ocr__conv_geom *g = j->g;
    int64_t Cg = g->C / g->groups, Kg = g->K / g->groups, kdim = Cg * g->kh * g->kw, P = g->OH * g->OW;
    int64_t MR = j->uk.mr, NR = j->uk.nr, item;
    float *pb = j->pb[tid];
    for (item = begin; item < end; item++) {
        int64_t pair = item / j->n_chunks, n = pair / g->groups, gr = pair % g->groups, chunk = item % j->n_chunks;
        int64_t panels = (P + NR - 1) / NR, p0 = chunk * panels / j->n_chunks * NR, p1 = (chunk + 1) * panels / j->n_chunks * NR;
        int64_t cols = (p1 < P ? p1 : P) - p0, n_panels = (cols + NR - 1) / NR, jp, i;
        const float *xg = j->x + (n * g->C + gr * Cg) * g->H * g->W;
        const float *pa = j->pa + gr * ((Kg + MR - 1) / MR * MR) * kdim;
        float *yc = j->y + (n * g->K + gr * Kg) * P + p0;
        for (jp = 0; jp < n_panels; jp++)
            ocr__im2col_panel(g, xg, p0 + jp * NR, cols - jp * NR < NR ? cols - jp * NR : NR, NR, pb + jp * kdim * NR);
        if (!j->accumulate)
            for (i = 0; i < Kg; i++) memset(yc + i * P, 0, (size_t)cols * sizeof(float));
        ocr__conv_fwd_tiles(j, pa, pb, yc, cols, 0, Kg);
        if (!j->accumulate) ocr__conv_epilogue_apply(&j->ep, yc, P, gr * Kg, Kg, cols);
    }
}

/* The shared-panels route (one group): all of an image's B panels, packed by every thread into pb[0] ... */
static void ocr__conv_fwd_panels_part(void *arg, int64_t begin, int64_t end, int tid) {
    const ocr__conv_fwd_job *j = (const ocr__conv_fwd_job *)arg;
    const ocr__conv_geom *g = j->g;
    int64_t P = g->OH * g->OW, NR = j->uk.nr, jp;
    (void)tid;
    for (jp = begin; jp < end; jp++)
        ocr__im2col_panel(g, j->x + j->image * g->C * g->H * g->W, jp * NR, P - jp * NR < NR ? P - jp * NR : NR, NR,
                          j->pb[0] + jp * j->kdim * NR);
}

/* ... then each thread's share of the output rows (items: mr-row panels) against all of them */
static void ocr__conv_fwd_rows_part(void *arg, int64_t begin, int64_t end, int tid) {
    const ocr__conv_fwd_job *j = (const ocr__conv_fwd_job *)arg;
    const ocr__conv_geom *g = j->g;
    int64_t P = g->OH * g->OW, r0 = begin * j->uk.mr, r1 = end * j->uk.mr < g->K ? end * j->uk.mr : g->K, i;
    float *yc = j->y + j->image * g->K * P;
    (void)tid;
    if (!j->accumulate)
        for (i = r0; i < r1; i++) memset(yc + i * P, 0, (size_t)P * sizeof(float));
    ocr__conv_fwd_tiles(j, j->pa, j->pb[0], yc, P, r0, r1);
    if (!j->accumulate) ocr__conv_epilogue_apply(&j->ep, yc + r0 * P, P, r0, r1 - r0, P);
}

#ifdef OCR__HAVE_AVX2
/* The 8 x 48 micro-kernel reading B straight from a zero-padded image: k step r takes its 48 pixels at b + off[r]
   (channel, kernel row and column of r), so a stride-1 convolution needs no im2col or packing of B at all, only
   one padded copy of its input. Writes rows < rows and columns < cols of C (= or += per accumulate). When it writes
   (=), it adds bias[row] (if bias) and clamps at 0 (if relu) as the epilogue pass would, in the same order: the
   stem's epilogue pass over its 26 MB output had taken 0.8 of its 6 ms at 640x640. */
__attribute__((target("avx512f")))
static void ocr__ukernel_avx512_implicit(int64_t kc, const float *a, const float *b, const int64_t *off, float *c, int64_t ldc,
                                         int64_t rows, int64_t cols, int accumulate, const float *bias, int relu) {
#define OCR__DECL(i) __m512 c##i##0 = _mm512_setzero_ps(), c##i##1 = _mm512_setzero_ps(), c##i##2 = _mm512_setzero_ps();
#define OCR__FMA(i) { __m512 x = _mm512_set1_ps(a[i]); c##i##0 = _mm512_fmadd_ps(x, b0, c##i##0); \
                      c##i##1 = _mm512_fmadd_ps(x, b1, c##i##1); c##i##2 = _mm512_fmadd_ps(x, b2, c##i##2); }
#define OCR__EPI(i, v) (relu ? _mm512_max_ps(_mm512_setzero_ps(), bias ? _mm512_add_ps(v, _mm512_set1_ps(bias[i])) : v) \
                             : bias ? _mm512_add_ps(v, _mm512_set1_ps(bias[i])) : v)
#define OCR__PUT(i, v, m) { float *cp = c + i * ldc + 16 * v; \
                            _mm512_mask_storeu_ps(cp, m, accumulate ? _mm512_add_ps(c##i##v, _mm512_maskz_loadu_ps(m, cp)) : OCR__EPI(i, c##i##v)); }
#define OCR__STORE(i) if (i < rows) { OCR__PUT(i, 0, m0) OCR__PUT(i, 1, m1) OCR__PUT(i, 2, m2) }
    __mmask16 m0 = (__mmask16)(cols >= 16 ? 0xFFFF : (1u << cols) - 1u);
    __mmask16 m1 = (__mmask16)(cols >= 32 ? 0xFFFF : cols <= 16 ? 0 : (1u << (cols - 16)) - 1u);
    __mmask16 m2 = (__mmask16)(cols >= 48 ? 0xFFFF : cols <= 32 ? 0 : (1u << (cols - 32)) - 1u);
    int64_t k;
    OCR__ROWS8(OCR__DECL)
    OCR__ROWS8(OCR__PREFETCH_C)
    for (k = 0; k < kc; k++, a += 8) {
        const float *bk = b + off[k];
        __m512 b0 = _mm512_loadu_ps(bk), b1 = _mm512_loadu_ps(bk + 16), b2 = _mm512_loadu_ps(bk + 32);
        OCR__ROWS8(OCR__FMA)
    }
    OCR__ROWS8(OCR__STORE)
#undef OCR__DECL
#undef OCR__FMA
#undef OCR__EPI
#undef OCR__PUT
#undef OCR__STORE
}

/* first n of 8 lanes set (none for n <= 0, all for n >= 8): AVX2's maskload / maskstore masks */
__attribute__((target("avx2")))
static inline __m256i ocr__lanes8(int64_t n) {
    return _mm256_cmpgt_epi32(_mm256_set1_epi32((int)(n <= 0 ? 0 : n >= 8 ? 8 : n)), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}

/* The AVX2 twin of the kernel above (the CPUs without AVX-512, such as Zen 3): 6 x 16, B read at b + off[k]. Without
   it those CPUs lowered every convolution to im2col, whose copy cost more than the products in the convolutions with
   few output channels (train_dbnet's decoder and stem: 4x the AVX-512 path's time on the same CPU). */
__attribute__((target("avx2,fma")))
static void ocr__ukernel_avx2_implicit(int64_t kc, const float *a, const float *b, const int64_t *off, float *c, int64_t ldc,
                                       int64_t rows, int64_t cols, int accumulate) {
#define OCR__DECL(i) __m256 c##i##0 = _mm256_setzero_ps(), c##i##1 = _mm256_setzero_ps();
#define OCR__FMA(i) { __m256 x = _mm256_broadcast_ss(a + i); c##i##0 = _mm256_fmadd_ps(x, b0, c##i##0); \
                      c##i##1 = _mm256_fmadd_ps(x, b1, c##i##1); }
#define OCR__PUT(i, v) { float *cp = c + i * ldc + 8 * v;                                                           \
                         if (full) _mm256_storeu_ps(cp, accumulate ? _mm256_add_ps(c##i##v, _mm256_loadu_ps(cp)) : c##i##v); \
                         else _mm256_maskstore_ps(cp, m##v, accumulate ? _mm256_add_ps(c##i##v, _mm256_maskload_ps(cp, m##v)) : c##i##v); }
#define OCR__STORE(i) if (i < rows) { OCR__PUT(i, 0) OCR__PUT(i, 1) }
    __m256i m0 = ocr__lanes8(cols), m1 = ocr__lanes8(cols - 8);
    int full = cols >= 16;
    int64_t k;
    OCR__ROWS6(OCR__DECL)
    for (k = 0; k < kc; k++, a += 6) {
        const float *bk = b + off[k];
        __m256 b0 = _mm256_loadu_ps(bk), b1 = _mm256_loadu_ps(bk + 8);
        OCR__ROWS6(OCR__FMA)
    }
    OCR__ROWS6(OCR__STORE)
#undef OCR__DECL
#undef OCR__FMA
#undef OCR__PUT
#undef OCR__STORE
}

typedef struct {
    const ocr__conv_geom *g;
    int wide;                /* the AVX-512 kernels (8 x 48 blocks); else the AVX2 ones (6 x 16) */
    const float *x, *pa;     /* pa: the weights packed into the micro-kernel's row panels over the whole kdim */
    float *y;
    const int64_t *off;      /* per k step: offset of its pixels in the padded band (direct: in the image) */
    /* direct: a 1x1 stride-1 unpadded forward on AVX-512 reads its 48-pixel blocks straight from x, flat over the
       band's rows; only a block that would read past the image's last pixel goes through xpad, [C][48], whose
       offsets follow off's kdim */
    int direct;
    int accumulate;
    ocr__conv_epilogue ep;
    /* The padded band is split into stride_h x stride_w phases (rows and columns of one remainder modulo the
       stride), so every kernel tap reads consecutive floats even for strided convolutions. Wp: floats per phase
       row; band_rows: phase rows a full band reads. */
    int64_t band, n_bands, band_rows, Wp, pad_floats;
    uint32_t phase_rows, phase_cols; /* bit p: some kernel tap reads row (column) phase p; the others are not copied */
    float *xpad[OCR_MAX_THREADS];
    float *dw[OCR_MAX_THREADS];   /* weight gradient: per-thread partial sums [K, kdim] */
} ocr__conv_implicit_job;

/* a mask of the first n lanes (none for n <= 0, all for n >= 16) */
static __mmask16 ocr__lanes(int64_t n) { return (__mmask16)(n <= 0 ? 0 : n >= 16 ? 0xFFFF : (1u << n) - 1u); }

/* src[0], src[2], ..., src[2 m - 2] (m <= 16) in lanes 0..m-1 from two masked loads, never reading past src[2 m - 2] */
__attribute__((target("avx512f")))
static inline __m512 ocr__even16_avx512(const float *src, int64_t m) {
    const __m512i even = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
    int64_t need = 2 * m - 1; /* source floats the m outputs span */
    return _mm512_permutex2var_ps(_mm512_maskz_loadu_ps(ocr__lanes(need), src), even, _mm512_maskz_loadu_ps(ocr__lanes(need - 16), src + 16));
}

/* dst[q] = src[2 q] for q < n, 16 at a time: the column phases of a stride-2 band, which element by element took most
   of a stride-2 data or weight gradient's copy. */
__attribute__((target("avx512f")))
static void ocr__gather_even_avx512(const float *src, int64_t n, float *dst) {
    int64_t q;
    for (q = 0; q < n; q += 16) {
        int64_t m = n - q < 16 ? n - q : 16;
        _mm512_mask_storeu_ps(dst + q, ocr__lanes(m), ocr__even16_avx512(src + 2 * q, m));
    }
}

/* Both column phases of a stride-2 row in one pass over it (a gather per phase read it twice): for the nb blocks of
   16 from q0, d0[q] = s[2q + off] and d1[q] = s[2q + 1 + off], every source index in the row. */
__attribute__((target("avx512f")))
static void ocr__split_phases2_avx512(const float *s, int64_t off, int64_t q0, int64_t nb, float *d0, float *d1) {
    const __m512i even = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
    const __m512i odd = _mm512_add_epi32(even, _mm512_set1_epi32(1));
    int64_t q;
    for (q = q0; q < q0 + 16 * nb; q += 16) {
        const float *row = s + (2 * q + off);
        __m512 a = _mm512_loadu_ps(row), b = _mm512_loadu_ps(row + 16);
        _mm512_storeu_ps(d0 + q, _mm512_permutex2var_ps(a, even, b));
        _mm512_storeu_ps(d1 + q, _mm512_permutex2var_ps(a, odd, b));
    }
}

/* The cache lines of p[0 .. n). The band copy below fetches the input row two ahead of the one it copies: its rows
   are short runs one or two rows apart, which the hardware's prefetch did not follow once they came from memory
   (timed alone with cold caches: a 1x1/2 downsampling from 64 to 128 channels at 160x160 0.72-0.85 -> 0.67-0.71 ms,
   a 3x3 from 64 to 16 channels at 184x320 4.91-4.95 -> 4.35-4.44). */
static inline void ocr__prefetch_floats(const float *p, int64_t n) {
    int64_t q;
    for (q = 0; q < n; q += 16) _mm_prefetch((const char *)(p + q), _MM_HINT_T0);
}

/* Copies the input rows that band [oh0, oh1) of image n reads into the zero-padded, phase-split band buffer. */
static void ocr__conv_pad_band(const ocr__conv_implicit_job *j, int64_t n, int64_t oh0, int64_t oh1, float *xp) {
    const ocr__conv_geom *g = j->g;
    int64_t rows = (oh1 - oh0) + (int64_t)(g->kh - 1) * g->dh / g->sh, c, r, py, px, q;
    /* every float the band reads is written once (no clearing pass first): rows outside the image and the border
       columns get zeros, and so does the slack after the last row */
    if (g->sw == 2 && j->wide) { /* both column phases of a row at once: the same values */
        for (c = 0; c < g->C; c++)
            for (py = 0; py < g->sh; py++)
                for (r = 0; r < j->band_rows && (j->phase_rows >> py & 1); r++) {
                    int64_t ih = (oh0 + r) * g->sh + py - g->ph, lo[2], hi[2], L, nb;
                    const float *src = j->x + ((n * g->C + c) * g->H + ih) * g->W;
                    float *dst[2];
                    for (px = 0; px < 2; px++) {
                        dst[px] = xp + ((c * g->sh + py) * 2 + px) * j->band_rows * j->Wp + r * j->Wp;
                        lo[px] = (g->pw - px + 1) / 2;
                        hi[px] = (g->W + g->pw - px + 1) / 2;
                        hi[px] = hi[px] < j->Wp ? hi[px] : j->Wp;
                    }
                    if (r >= rows || ih < 0 || ih >= g->H) {
                        for (px = 0; px < 2; px++) memset(dst[px], 0, (size_t)j->Wp * sizeof(float));
                        continue;
                    }
                    if (r + 2 < rows && ih + 2 * g->sh < g->H) ocr__prefetch_floats(src + 2 * g->sh * g->W, g->W);
                    if (j->phase_cols == 1) { /* even columns only (a 1x1 kernel): half the row */
                        float *d = dst[0];
                        for (q = 0; q < lo[0]; q++) d[q] = 0.0f;
                        if (hi[0] > lo[0]) ocr__gather_even_avx512(src + lo[0] * 2 - g->pw, hi[0] - lo[0], d + lo[0]);
                        for (q = hi[0]; q < j->Wp; q++) d[q] = 0.0f;
                        continue;
                    }
                    /* [L, L + 16 nb): whole blocks inside both phases' columns; the rest by the gather */
                    L = lo[0] > lo[1] ? lo[0] : lo[1];
                    nb = (hi[0] < hi[1] ? hi[0] : hi[1]) - L;
                    nb = nb > 0 ? nb / 16 : 0;
                    if (nb) ocr__split_phases2_avx512(src, -(int64_t)g->pw, L, nb, dst[0], dst[1]);
                    for (px = 0; px < 2; px++) {
                        float *d = dst[px];
                        int64_t m = nb ? L : hi[px], m2 = nb ? L + 16 * nb : hi[px];
                        for (q = 0; q < lo[px]; q++) d[q] = 0.0f;
                        if (m > lo[px]) ocr__gather_even_avx512(src + lo[px] * 2 + px - g->pw, m - lo[px], d + lo[px]);
                        if (hi[px] > m2) ocr__gather_even_avx512(src + m2 * 2 + px - g->pw, hi[px] - m2, d + m2);
                        for (q = hi[px]; q < j->Wp; q++) d[q] = 0.0f;
                    }
                }
    } else {
        for (c = 0; c < g->C; c++)
            for (py = 0; py < g->sh; py++)
                for (px = 0; px < g->sw; px++)
                    for (r = 0; r < j->band_rows && (j->phase_rows >> py & 1) && (j->phase_cols >> px & 1); r++) {
                        int64_t ih = (oh0 + r) * g->sh + py - g->ph, lo, hi;
                        const float *src = j->x + ((n * g->C + c) * g->H + ih) * g->W;
                        float *dst = xp + ((c * g->sh + py) * g->sw + px) * j->band_rows * j->Wp + r * j->Wp;
                        if (r >= rows || ih < 0 || ih >= g->H) { memset(dst, 0, (size_t)j->Wp * sizeof(float)); continue; }
                        if (px == 0 && r + 2 < rows && ih + 2 * g->sh < g->H) ocr__prefetch_floats(src + 2 * g->sh * g->W, g->W);
                        /* phase column q holds padded column q * sw + px, i.e. input column q * sw + px - pw */
                        lo = (g->pw - px + g->sw - 1) / g->sw;
                        hi = (g->W + g->pw - px + g->sw - 1) / g->sw;
                        hi = hi < j->Wp ? hi : j->Wp;
                        for (q = 0; q < lo; q++) dst[q] = 0.0f;
                        if (g->sw == 1) memcpy(dst + lo, src + lo + px - g->pw, (size_t)(hi - lo) * sizeof(float));
                        else for (q = lo; q < hi; q++) dst[q] = src[q * g->sw + px - g->pw];
                        for (q = hi; q < j->Wp; q++) dst[q] = 0.0f;
                    }
    }
    q = g->C * g->sh * g->sw * j->band_rows * j->Wp;
    memset(xp + q, 0, (size_t)(j->pad_floats - q) * sizeof(float));
}

/* Work items: (image, band of output rows). The band's input rows are copied once into a zero-padded buffer, then
   each 48-pixel block of each output row runs against every weight panel. */
static void ocr__conv_implicit_items(void *arg, int64_t begin, int64_t end, int tid) {
    const ocr__conv_implicit_job *j = (const ocr__conv_implicit_job *)arg;
    const ocr__conv_geom *g = j->g;
    int64_t kdim = g->C * g->kh * g->kw, P = g->OH * g->OW, Wp = j->Wp, item;
    int in_kernel = j->wide && !j->accumulate && !j->ep.res; /* bias and ReLU in the AVX-512 kernel's stores */
    float *xp = j->xpad[tid];
    for (item = begin; item < end; item++) {
        int64_t n = item / j->n_bands, oh0 = (item % j->n_bands) * j->band, oh1 = oh0 + j->band < g->OH ? oh0 + j->band : g->OH;
        int64_t oh, ow, ip;
        if (j->direct) {
            const float *xn = j->x + n * g->C * P;
            int64_t q, c, p1 = oh1 * g->OW;
            for (q = oh0 * g->OW; q < p1; q += 48) {
                int64_t cols = p1 - q < 48 ? p1 - q : 48;
                const float *b = xn + q;
                const int64_t *off = j->off;
                if (q + 48 > P) { /* the image's last block: its channels copied, zero-padded to 48 */
                    for (c = 0; c < g->C; c++) {
                        memcpy(xp + c * 48, xn + c * P + q, (size_t)cols * sizeof(float));
                        memset(xp + c * 48 + cols, 0, (size_t)(48 - cols) * sizeof(float));
                    }
                    b = xp;
                    off = j->off + kdim;
                }
                for (ip = 0; ip < g->K; ip += 8)
                    ocr__ukernel_avx512_implicit(kdim, j->pa + ip * kdim, b, off, j->y + (n * g->K + ip) * P + q, P, g->K - ip < 8 ? g->K - ip : 8,
                                                 cols, j->accumulate, in_kernel && j->ep.bias ? j->ep.bias + ip : NULL, in_kernel && j->ep.relu);
            }
            if (!j->accumulate && !in_kernel) ocr__conv_epilogue_apply(&j->ep, j->y + n * g->K * P + oh0 * g->OW, P, 0, g->K, (oh1 - oh0) * g->OW);
            continue;
        }
        ocr__conv_pad_band(j, n, oh0, oh1, xp);
        for (oh = oh0; oh < oh1; oh++)
            if (j->wide)
                for (ow = 0; ow < g->OW; ow += 48) {
                    const float *b = xp + (oh - oh0) * Wp + ow;
                    for (ip = 0; ip < g->K; ip += 8)
                        ocr__ukernel_avx512_implicit(kdim, j->pa + ip * kdim, b, j->off, j->y + (n * g->K + ip) * P + oh * g->OW + ow, P,
                                                     g->K - ip < 8 ? g->K - ip : 8, g->OW - ow, j->accumulate,
                                                     in_kernel && j->ep.bias ? j->ep.bias + ip : NULL, in_kernel && j->ep.relu);
                }
            else
                for (ow = 0; ow < g->OW; ow += 16) {
                    const float *b = xp + (oh - oh0) * Wp + ow;
                    for (ip = 0; ip < g->K; ip += 6)
                        ocr__ukernel_avx2_implicit(kdim, j->pa + ip * kdim, b, j->off, j->y + (n * g->K + ip) * P + oh * g->OW + ow, P,
                                                   g->K - ip < 6 ? g->K - ip : 6, g->OW - ow, j->accumulate);
                }
        if (!j->accumulate && !in_kernel) ocr__conv_epilogue_apply(&j->ep, j->y + n * g->K * P + oh0 * g->OW, P, 0, g->K, (oh1 - oh0) * g->OW);
    }
}

/* Weight gradient over one band: dw[m, r] += sum over the band's output pixels of dy[m, pixel] * x[pixel + off[r]],
   dot products along output rows (both operands contiguous there) in blocks of 4 x 6 with 24 accumulators. */
__attribute__((target("avx512f")))
static void ocr__wgrad_band_avx512(const ocr__conv_implicit_job *j, const float *dyn, int64_t oh0, int64_t oh1, const float *xp, float *dw) {
    const ocr__conv_geom *g = j->g;
    int64_t kdim = g->C * g->kh * g->kw, P = g->OH * g->OW, OW = g->OW, Wp = j->Wp, m0, r0, oh, p, i, q;
    int64_t pv = OW - OW % 16;
    __mmask16 tail = (__mmask16)((1u << (OW % 16)) - 1u);
    for (r0 = 0; r0 < kdim; r0 += 6) {
        int64_t rb = kdim - r0 < 6 ? kdim - r0 : 6;
        for (m0 = 0; m0 < g->K; m0 += 4) {
            int64_t mb = g->K - m0 < 4 ? g->K - m0 : 4;
            if (mb == 4 && rb == 6) {
#define OCR__WG_Q(X, i) X(i, 0) X(i, 1) X(i, 2) X(i, 3) X(i, 4) X(i, 5)
#define OCR__WG_ALL(X) OCR__WG_Q(X, 0) OCR__WG_Q(X, 1) OCR__WG_Q(X, 2) OCR__WG_Q(X, 3)
#define OCR__WG_DECL(i, q) __m512 a##i##q = _mm512_setzero_ps();
#define OCR__WG_FMA(i, q) a##i##q = _mm512_fmadd_ps(d##i, x##q, a##i##q);
#define OCR__WG_X(i, q) __m512 x##q = OCR__WG_LOAD(xr + o##q + p);
#define OCR__WG_SUM(i, q) dw[(m0 + i) * kdim + r0 + q] += _mm512_reduce_add_ps(a##i##q);
#define OCR__WG_STEP                                                                                              \
                    {                                                                                            \
                        __m512 d0 = OCR__WG_LOAD(y0 + p), d1 = OCR__WG_LOAD(y0 + P + p), d2 = OCR__WG_LOAD(y0 + 2 * P + p), d3 = OCR__WG_LOAD(y0 + 3 * P + p); \
                        OCR__WG_Q(OCR__WG_X, 0)                                                                  \
                        OCR__WG_ALL(OCR__WG_FMA)                                                                 \
                    }
                const int64_t o0 = j->off[r0], o1 = j->off[r0 + 1], o2 = j->off[r0 + 2], o3 = j->off[r0 + 3], o4 = j->off[r0 + 4],
                              o5 = j->off[r0 + 5];
                OCR__WG_ALL(OCR__WG_DECL)
                for (oh = oh0; oh < oh1; oh++) {
                    const float *y0 = dyn + m0 * P + oh * OW, *xr = xp + (oh - oh0) * Wp;
#define OCR__WG_LOAD(a) _mm512_loadu_ps(a)
                    for (p = 0; p < pv; p += 16) OCR__WG_STEP
#undef OCR__WG_LOAD
#define OCR__WG_LOAD(a) _mm512_maskz_loadu_ps(tail, a)
                    if (tail) OCR__WG_STEP
#undef OCR__WG_LOAD
                }
                OCR__WG_ALL(OCR__WG_SUM)
#undef OCR__WG_Q
#undef OCR__WG_ALL
#undef OCR__WG_DECL
#undef OCR__WG_FMA
#undef OCR__WG_X
#undef OCR__WG_SUM
#undef OCR__WG_STEP
            } else {
                for (i = 0; i < mb; i++)
                    for (q = 0; q < rb; q++) {
                        __m512 a = _mm512_setzero_ps();
                        for (oh = oh0; oh < oh1; oh++) {
                            const float *yr = dyn + (m0 + i) * P + oh * OW, *xr = xp + (oh - oh0) * Wp + j->off[r0 + q];
                            for (p = 0; p < pv; p += 16) a = _mm512_fmadd_ps(_mm512_loadu_ps(yr + p), _mm512_loadu_ps(xr + p), a);
                            if (tail) a = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(tail, yr + p), _mm512_maskz_loadu_ps(tail, xr + p), a);
                        }
                        dw[(m0 + i) * kdim + r0 + q] += _mm512_reduce_add_ps(a);
                    }
            }
        }
    }
}

__attribute__((target("avx2")))
static inline float ocr__hsum8(__m256 v) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    return _mm_cvtss_f32(_mm_add_ss(s, _mm_movehdup_ps(s)));
}

/* The AVX2 twin of ocr__wgrad_band_avx512: blocks of 3 x 4 (12 accumulators, 3 rows of dy and one of x in flight). */
__attribute__((target("avx2,fma")))
static void ocr__wgrad_band_avx2(const ocr__conv_implicit_job *j, const float *dyn, int64_t oh0, int64_t oh1, const float *xp, float *dw) {
    const ocr__conv_geom *g = j->g;
    int64_t kdim = g->C * g->kh * g->kw, P = g->OH * g->OW, OW = g->OW, Wp = j->Wp, m0, r0, oh, p, i, q;
    int64_t pv = OW - OW % 8;
    __m256i tail = ocr__lanes8(OW % 8);
    for (r0 = 0; r0 < kdim; r0 += 4) {
        int64_t rb = kdim - r0 < 4 ? kdim - r0 : 4;
        for (m0 = 0; m0 < g->K; m0 += 3) {
            int64_t mb = g->K - m0 < 3 ? g->K - m0 : 3;
            if (mb == 3 && rb == 4) {
#define OCR__WG_Q(X, i) X(i, 0) X(i, 1) X(i, 2) X(i, 3)
#define OCR__WG_ALL(X) OCR__WG_Q(X, 0) OCR__WG_Q(X, 1) OCR__WG_Q(X, 2)
#define OCR__WG_DECL(i, q) __m256 a##i##q = _mm256_setzero_ps();
#define OCR__WG_COL(q) { __m256 x = OCR__WG_LOAD(xr + o##q + p); a0##q = _mm256_fmadd_ps(d0, x, a0##q); \
                         a1##q = _mm256_fmadd_ps(d1, x, a1##q); a2##q = _mm256_fmadd_ps(d2, x, a2##q); }
#define OCR__WG_SUM(i, q) dw[(m0 + i) * kdim + r0 + q] += ocr__hsum8(a##i##q);
#define OCR__WG_STEP                                                                                              \
                    {                                                                                            \
                        __m256 d0 = OCR__WG_LOAD(y0 + p), d1 = OCR__WG_LOAD(y0 + P + p), d2 = OCR__WG_LOAD(y0 + 2 * P + p); \
                        OCR__WG_COL(0) OCR__WG_COL(1) OCR__WG_COL(2) OCR__WG_COL(3)                              \
                    }
                const int64_t o0 = j->off[r0], o1 = j->off[r0 + 1], o2 = j->off[r0 + 2], o3 = j->off[r0 + 3];
                OCR__WG_ALL(OCR__WG_DECL)
                for (oh = oh0; oh < oh1; oh++) {
                    const float *y0 = dyn + m0 * P + oh * OW, *xr = xp + (oh - oh0) * Wp;
#define OCR__WG_LOAD(a) _mm256_loadu_ps(a)
                    for (p = 0; p < pv; p += 8) OCR__WG_STEP
#undef OCR__WG_LOAD
#define OCR__WG_LOAD(a) _mm256_maskload_ps(a, tail)
                    if (pv < OW) OCR__WG_STEP
#undef OCR__WG_LOAD
                }
                OCR__WG_ALL(OCR__WG_SUM)
#undef OCR__WG_Q
#undef OCR__WG_ALL
#undef OCR__WG_DECL
#undef OCR__WG_COL
#undef OCR__WG_SUM
#undef OCR__WG_STEP
            } else {
                for (i = 0; i < mb; i++)
                    for (q = 0; q < rb; q++) {
                        __m256 a = _mm256_setzero_ps();
                        for (oh = oh0; oh < oh1; oh++) {
                            const float *yr = dyn + (m0 + i) * P + oh * OW, *xr = xp + (oh - oh0) * Wp + j->off[r0 + q];
                            for (p = 0; p < pv; p += 8) a = _mm256_fmadd_ps(_mm256_loadu_ps(yr + p), _mm256_loadu_ps(xr + p), a);
                            if (pv < OW) a = _mm256_fmadd_ps(_mm256_maskload_ps(yr + p, tail), _mm256_maskload_ps(xr + p, tail), a);
                        }
                        dw[(m0 + i) * kdim + r0 + q] += ocr__hsum8(a);
                    }
            }
        }
    }
}

static void ocr__conv_wgrad_implicit_items(void *arg, int64_t begin, int64_t end, int tid) {
    const ocr__conv_implicit_job *j = (const ocr__conv_implicit_job *)arg;
    const ocr__conv_geom *g = j->g;
    int64_t item;
    for (item = begin; item < end; item++) {
        int64_t n = item / j->n_bands, oh0 = (item % j->n_bands) * j->band, oh1 = oh0 + j->band < g->OH ? oh0 + j->band : g->OH;
        ocr__conv_pad_band(j, n, oh0, oh1, j->xpad[tid]);
        if (j->wide) ocr__wgrad_band_avx512(j, j->y + n * g->K * g->OH * g->OW, oh0, oh1, j->xpad[tid], j->dw[tid]);
        else ocr__wgrad_band_avx2(j, j->y + n * g->K * g->OH * g->OW, oh0, oh1, j->xpad[tid], j->dw[tid]);
    }
}

/* ---- strided and narrow convolutions vectorised over output channels (AVX-512) ----
   The implicit path vectorises over pixels, so a strided input must first be split into its phases (a quarter of
   the input each at stride 2), and a row's last block is often part empty (a row under 48 wide leaves lanes empty).
   Here a vector holds 16 output channels and a block is 14 output pixels x 32 output channels (28 accumulators): per
   tap, two weight vectors and 14 broadcast input values, read from a zero-padded copy of the band's input rows at
   any stride. Each output's sum runs over the taps in the same order as the implicit kernel's (channel, kernel row,
   kernel column), so the results are the same bits. Weights are packed [K/32][C][kh][kw][32], zero past K. */
#define OCR__OCH_PIX 14
typedef struct {
    const ocr__conv_geom *g;
    const float *x, *wq;
    float *y;
    int accumulate;
    ocr__conv_epilogue ep;
    int64_t kblocks, band, n_bands, rows, Wpad;
    float *xpad[OCR_MAX_THREADS];
} ocr__conv_och_job;

#define OCR__P14(X) X(0) X(1) X(2) X(3) X(4) X(5) X(6) X(7) X(8) X(9) X(10) X(11) X(12) X(13)
/* Output pixels ow0 .. ow0+np-1 (np <= 14) of band row r, channels 32 kb .. 32 kb + 31, into buf[p][32]. xr: the
   band's padded rows; row (c, i) at xr + (c * rows + i) * Wpad, output pixel p's taps from column p * sw. */
__attribute__((target("avx512f")))
static void ocr__conv_och_block(const ocr__conv_och_job *j, const float *xr, int64_t r, int64_t ow0, const float *wk, float *buf) {
    const ocr__conv_geom *g = j->g;
    int64_t c, ki, kj, sw = g->sw;
#define OCR__DECL(p) __m512 a##p##0 = _mm512_setzero_ps(), a##p##1 = _mm512_setzero_ps();
#define OCR__FMA(p) { __m512 v = _mm512_set1_ps(xp[p * sw]); a##p##0 = _mm512_fmadd_ps(v, w0, a##p##0); a##p##1 = _mm512_fmadd_ps(v, w1, a##p##1); }
#define OCR__PUT(p) _mm512_storeu_ps(buf + p * 32, a##p##0); _mm512_storeu_ps(buf + p * 32 + 16, a##p##1);
    OCR__P14(OCR__DECL)
    for (c = 0; c < g->C; c++)
        for (ki = 0; ki < g->kh; ki++) {
            const float *row = xr + (c * j->rows + r * g->sh + ki) * j->Wpad + ow0 * sw;
            for (kj = 0; kj < g->kw; kj++, wk += 32) {
                const float *xp = row + kj;
                __m512 w0 = _mm512_loadu_ps(wk), w1 = _mm512_loadu_ps(wk + 16);
                OCR__P14(OCR__FMA)
            }
        }
    OCR__P14(OCR__PUT)
#undef OCR__DECL
#undef OCR__FMA
#undef OCR__PUT
}

/* A block's buf [16][32] (pixels x channels; rows 14 and 15 spare) into y's channel rows by two 16x16 transposes:
   output pixels ow0 .. ow0 + np - 1 of row oh, channels 32 kb .. 32 kb + nk - 1; = or +=, and with in_store the
   epilogue's bias and ReLU as ocr__affine_row_avx512 computes them (max(0, v * 1 + bias), the product by 1 exact:
   the same bits). */
__attribute__((target("avx512f")))
static void ocr__conv_och_store(const ocr__conv_och_job *j, const float *buf, int64_t n, int64_t kb, int64_t oh, int64_t ow0,
                                int64_t np, int64_t nk, int in_store) {
    const ocr__conv_geom *g = j->g;
    int64_t P = g->OH * g->OW, h, k;
    float t[256];
    __mmask16 m = ocr__lanes(np);
    for (h = 0; h < 2 && h * 16 < nk; h++) {
        ocr__transpose16(buf + h * 16, 32, t, 16);
        for (k = 0; k < 16 && h * 16 + k < nk; k++) {
            int64_t ch = kb * 32 + h * 16 + k;
            float *yk = j->y + (n * g->K + ch) * P + oh * g->OW + ow0;
            __m512 v = _mm512_loadu_ps(t + k * 16);
            if (j->accumulate) v = _mm512_add_ps(v, _mm512_maskz_loadu_ps(m, yk));
            else if (in_store) {
                if (j->ep.bias) v = _mm512_add_ps(v, _mm512_set1_ps(j->ep.bias[ch]));
                if (j->ep.relu) v = _mm512_max_ps(_mm512_setzero_ps(), v);
            }
            _mm512_mask_storeu_ps(yk, m, v);
        }
    }
}

/* Work items: (image, band of output rows): the band's input rows copied once, zero-padded, then every 14-pixel block
   of every row against every 32-channel block of weights. */
static void ocr__conv_och_items(void *arg, int64_t begin, int64_t end, int tid) {
    const ocr__conv_och_job *j = (const ocr__conv_och_job *)arg;
    const ocr__conv_geom *g = j->g;
    int64_t P = g->OH * g->OW, kdim = g->C * g->kh * g->kw, item;
    int in_store = !j->accumulate && !j->ep.res; /* bias and ReLU applied as the block is stored */
    float *xr = j->xpad[tid], buf[16 * 32];
    memset(buf + OCR__OCH_PIX * 32, 0, (16 - OCR__OCH_PIX) * 32 * sizeof(float)); /* the transposes' two spare rows */
    for (item = begin; item < end; item++) {
        int64_t n = item / j->n_bands, oh0 = (item % j->n_bands) * j->band, oh1 = oh0 + j->band < g->OH ? oh0 + j->band : g->OH;
        int64_t c, i, oh, ow0, kb;
        for (c = 0; c < g->C; c++)
            for (i = 0; i < j->rows; i++) {
                int64_t ih = oh0 * g->sh - g->ph + i;
                float *dst = xr + (c * j->rows + i) * j->Wpad;
                /* each channel's rows are one short run a plane from the last, which the hardware's prefetch does not
                   foresee: the run two channels ahead is fetched as this one starts */
                if (i == 0 && c + 2 < g->C) {
                    int64_t h0 = ih < 0 ? 0 : ih, h1 = oh0 * g->sh - g->ph + j->rows < g->H ? oh0 * g->sh - g->ph + j->rows : g->H;
                    if (h1 > h0) ocr__prefetch_floats(j->x + ((n * g->C + c + 2) * g->H + h0) * g->W, (h1 - h0) * g->W);
                }
                if (ih < 0 || ih >= g->H || i >= (oh1 - oh0 - 1) * g->sh + g->kh) {
                    memset(dst, 0, (size_t)j->Wpad * sizeof(float));
                    continue;
                }
                /* the row between its zero borders, each float written once */
                memset(dst, 0, (size_t)g->pw * sizeof(float));
                memcpy(dst + g->pw, j->x + ((n * g->C + c) * g->H + ih) * g->W, (size_t)g->W * sizeof(float));
                memset(dst + g->pw + g->W, 0, (size_t)(j->Wpad - g->pw - g->W) * sizeof(float));
            }
        for (kb = 0; kb < j->kblocks; kb++)
            for (oh = oh0; oh < oh1; oh++)
                for (ow0 = 0; ow0 < g->OW; ow0 += OCR__OCH_PIX) {
                    int64_t np = g->OW - ow0 < OCR__OCH_PIX ? g->OW - ow0 : OCR__OCH_PIX, nk = g->K - kb * 32 < 32 ? g->K - kb * 32 : 32, k;
                    /* the block's output lines fetched for writing while it computes: its 32 scattered row stores
                       otherwise wait on them (16-to-32 channels at 184x320 timed alone: 0.65-0.67 -> 0.61-0.63 ms) */
                    for (k = 0; k < nk; k++) {
                        const float *yk = j->y + (n * g->K + kb * 32 + k) * P + oh * g->OW + ow0;
                        __builtin_prefetch(yk, 1, 3);
                        __builtin_prefetch(yk + np - 1, 1, 3);
                    }
                    ocr__conv_och_block(j, xr, oh - oh0, ow0, j->wq + kb * kdim * 32, buf);
                    ocr__conv_och_store(j, buf, n, kb, oh, ow0, np, nk, in_store);
                }
        if (!j->accumulate && !in_store) ocr__conv_epilogue_apply(&j->ep, j->y + n * g->K * P + oh0 * g->OW, P, 0, g->K, (oh1 - oh0) * g->OW);
    }
}

/* Packs w [K][C][kh][kw] into [K/32][C][kh][kw][32], zeros past K; items are 32-channel blocks. */
typedef struct { const ocr__conv_geom *g; const float *w; float *wq; } ocr__och_pack_job;
static void ocr__och_pack_part(void *arg, int64_t begin, int64_t end, int tid) {
    const ocr__och_pack_job *j = (const ocr__och_pack_job *)arg;
    int64_t kdim = j->g->C * j->g->kh * j->g->kw, kb, t, k;
    (void)tid;
    for (kb = begin; kb < end; kb++)
        for (t = 0; t < kdim; t++)
            for (k = 0; k < 32; k++)
                j->wq[(kb * kdim + t) * 32 + k] = kb * 32 + k < j->g->K ? j->w[(kb * 32 + k) * kdim + t] : 0.0f;
}

/* 3x3 convolutions (undilated, ungrouped) of 32 outputs or more on AVX-512, where the implicit path would take them
   (rows of 32 or more; narrower ones go to im2col, whose sums are ordered otherwise, and at 20 wide were no faster
   here): at stride 2, and at stride 1 where Winograd does not pay and a row is narrower than one 48-pixel block of the
   implicit kernel, which then leaves up to a third of its lanes empty (width 0.25's layer4, 128 channels at 23x40,
   timed alone: 0.97-1.2 -> 0.85 ms; 256-to-64 channels at 23x40 1.02 -> 0.86, at 32x32 1.43 -> 1.35). The stem's
   7x7 (3 input channels) and the 1x1 stride-2 ones measured slower here (one convolution timed alone at 640x640: 6.8
   against 5.9 ms, 1.2 against 0.65 ms): few products per tap for the transposing store, and a whole-input copy where
   the implicit path copies one phase. */
static int ocr__conv_och_ok(const ocr__conv_geom *g, const ocr__ukernel *uk) {
    return uk->fn == ocr__ukernel_avx512 && g->groups == 1 && g->dh == 1 && g->dw == 1 && g->sh == g->sw &&
           (g->sh == 2 || (g->sh == 1 && g->OW < 48)) && g->kh == 3 && g->kw == 3 && g->OW >= 32 && g->K >= 32;
}

static int ocr__conv_och(ocr_ctx *ctx, const ocr__conv_geom *g, const float *x, const float *w, float *y, int accumulate,
                         const ocr__conv_epilogue *ep) {
    ocr__conv_och_job j;
    ocr__och_pack_job pk;
    int64_t kdim = g->C * g->kh * g->kw, t;
    size_t wq_bytes, pad_bytes;
    memset(&j, 0, sizeof j);
    j.g = g; j.x = x; j.y = y; j.accumulate = accumulate;
    if (ep) j.ep = *ep;
    j.kblocks = (g->K + 31) / 32;
    /* every block reads up to 13 sw + kw columns from its start: the last block's, past OW, stay inside the row */
    j.Wpad = ((g->OW + OCR__OCH_PIX - 1) / OCR__OCH_PIX * OCR__OCH_PIX - 1) * g->sw + g->kw;
    if (j.Wpad < g->W + 2 * g->pw) j.Wpad = g->W + 2 * g->pw;
    /* bands whose padded rows take about 256 KB (they stay in L2 while the weight blocks pass over them) */
    j.band = ((int64_t)(256 << 10) / (g->C * j.Wpad * (int64_t)sizeof(float)) - g->kh) / g->sh + 1;
    j.band = j.band < 1 ? 1 : j.band > g->OH ? g->OH : j.band;
    if (g->N * ((g->OH + j.band - 1) / j.band) < 2 * ctx->n_threads) j.band = (g->OH + 2 * ctx->n_threads - 1) / (2 * ctx->n_threads);
    j.n_bands = (g->OH + j.band - 1) / j.band;
    j.rows = (j.band - 1) * g->sh + g->kh;
    if (!ocr_size_mul((size_t)(j.kblocks * 32), (size_t)kdim * sizeof(float), &wq_bytes) ||
        !ocr_size_mul((size_t)(g->C * j.rows), (size_t)j.Wpad * sizeof(float), &pad_bytes))
        return ocr_error(ctx, OCR_EOVERFLOW, "conv: work buffers too large");
    if (!(j.wq = (float *)ocr_ctx_scratch(ctx, OCR_SCRATCH_GEMM_A, wq_bytes))) return ctx->last_status;
    for (t = 0; t < ctx->n_threads; t++)
        if (!(j.xpad[t] = (float *)ocr_ctx_scratch(ctx, OCR_SCRATCH_THREAD0 + (int)t, pad_bytes))) return ctx->last_status;
    pk.g = g; pk.w = w; pk.wq = (float *)j.wq;
    ocr_parallel_for(ctx, j.kblocks, 1, ocr__och_pack_part, &pk);
    ocr_parallel_for_dynamic(ctx, g->N * j.n_bands, 1, ocr__conv_och_items, &j);
    return OCR_OK;
}

/* The implicit path pays where im2col would cost more than the GEMM: output rows at least 32 wide (16 for the AVX2
   kernels), so the pixel blocks are mostly full. forward: on AVX2, rows under 64 wide with 64K weights or more
   (256 KB) take im2col and the GEMM, whose packed panels the 6x16 kernel reads faster than the implicit one reads
   its taps (`NOWINO=1 OCR_CPU_KERNEL=avx2`, two threads: layer4's 3x3/2 256 to 512 at 20x20 10.5 -> 6.3 ms, its
   1x1/2 1.15 -> 0.65, 128 to 128 at 20x20 1.24 -> 0.87, at rows of 40 7-11% faster; with 64 to 128 channels at rows
   of 80 or 1x1 ones at rows of 80 and 160 the implicit path was 0-25% faster, and with 32 to 64 at rows of 32). */
static int ocr__conv_implicit_ok(const ocr__conv_geom *g, const ocr__ukernel *uk, int forward) {
    if (g->groups != 1) return 0;
    if (uk->fn == ocr__ukernel_avx512) return g->OW >= 32;
    return uk->fn == ocr__ukernel_avx2 && g->OW >= OCR__IMPLICIT_AVX2_MIN_OW &&
           !(forward && g->OW < 64 && g->K * g->C * g->kh * g->kw >= 65536);
}

/* Stride-1 convolution without im2col: forward (w given: y = or += conv(x, w)) or weight gradient (dw given:
   dw += dy (x) x, with y holding dy), over (image, band of output rows) items. */
static int ocr__conv_implicit(ocr_ctx *ctx, const ocr__conv_geom *g, const float *x, const float *w, float *dw, float *y, int accumulate,
                              const ocr__conv_epilogue *ep) {
    ocr__ukernel uk = ocr__pick_ukernel(ctx);
    int64_t kdim = g->C * g->kh * g->kw, kpad = (g->K + uk.mr - 1) / uk.mr * uk.mr, r, c, i, kk, t, rows, dw_floats = 0;
    ocr__conv_implicit_job j;
    ocr__gemm_job pk;
    float *pa = NULL;
    int64_t *off;
    size_t bytes;
    memset(&j, 0, sizeof j);
    j.g = g; j.x = x; j.y = y; j.accumulate = accumulate;
    j.wide = uk.fn == ocr__ukernel_avx512;
    if (ep) j.ep = *ep;
    j.Wp = (g->W + 2 * g->pw + g->sw - 1) / g->sw;
    /* bands of output rows whose outputs (forward) or output gradients (weight gradient, whose 16-lane partial
       sums are reduced once per band, hence the larger band) stay in L2 while every weight panel or block passes
       over them; smaller bands when the batch cannot feed every thread */
    j.band = ((int64_t)1 << (dw ? 16 : 14)) / (g->OW * g->K);
    j.band = j.band < 4 ? 4 : j.band;
    if (j.band > g->OH) j.band = g->OH;
    if (g->N * ((g->OH + j.band - 1) / j.band) < ctx->n_threads) j.band = (g->OH + ctx->n_threads - 1) / ctx->n_threads;
    j.n_bands = (g->OH + j.band - 1) / j.band;
    j.band_rows = rows = j.band + (int64_t)(g->kh - 1) * g->dh / g->sh;
    j.direct = !dw && j.wide && g->kh == 1 && g->kw == 1 && g->sh == 1 && g->sw == 1 && g->ph == 0 && g->pw == 0;
    /* slack: a row's last block reads up to 47 floats past it */
    j.pad_floats = j.direct ? g->C * 48 : (g->C * g->sh * g->sw * rows * j.Wp + 64 + 15) & ~(int64_t)15;
    if (dw) dw_floats = (g->K * kdim + 15) & ~(int64_t)15;
    if (!ocr_size_mul((size_t)kpad, (size_t)kdim * sizeof(float) + 2 * sizeof(int64_t), &bytes) ||
        !ocr_size_mul((size_t)(j.pad_floats + dw_floats), sizeof(float), &bytes))
        return ocr_error(ctx, OCR_EOVERFLOW, "conv: work buffers too large");
    if ((!dw && !(pa = (float *)ocr_ctx_scratch(ctx, OCR_SCRATCH_GEMM_A, (size_t)(kpad * kdim) * sizeof(float)))) ||
        !(off = (int64_t *)ocr_ctx_scratch(ctx, OCR_SCRATCH_GEMM_B, (size_t)((j.direct ? 2 : 1) * kdim) * sizeof(int64_t))))
        return ctx->last_status;
    for (t = 0; t < ctx->n_threads; t++) {
        if (!(j.xpad[t] = (float *)ocr_ctx_scratch(ctx, OCR_SCRATCH_THREAD0 + (int)t, bytes))) return ctx->last_status;
        j.dw[t] = j.xpad[t] + j.pad_floats;
        if (dw) memset(j.dw[t], 0, (size_t)dw_floats * sizeof(float));
    }
    /* the phases the taps read (strides past 31: all) */
    for (i = 0; i < g->kh; i++) j.phase_rows |= g->sh > 31 ? 0xFFFFFFFFu : 1u << ((int64_t)i * g->dh % g->sh);
    for (kk = 0; kk < g->kw; kk++) j.phase_cols |= g->sw > 31 ? 0xFFFFFFFFu : 1u << ((int64_t)kk * g->dw % g->sw);
    if (j.direct) /* each channel's plane in the image, then its row in the last block's copy */
        for (c = 0; c < g->C; c++) { off[c] = c * g->H * g->W; off[kdim + c] = c * 48; }
    else
        for (r = 0, c = 0; c < g->C; c++)
            for (i = 0; i < g->kh; i++)
                for (kk = 0; kk < g->kw; kk++) {
                    int64_t ty = (int64_t)i * g->dh, tx = (int64_t)kk * g->dw;
                    off[r++] = (((c * g->sh + ty % g->sh) * g->sw + tx % g->sw) * rows + ty / g->sh) * j.Wp + tx / g->sw;
                }
    j.off = off;
    if (dw) {
        ocr_parallel_for(ctx, g->N * j.n_bands, 1, ocr__conv_wgrad_implicit_items, &j);
        /* partials summed in thread order: deterministic for a thread count */
        for (t = 0; t < ctx->n_threads; t++)
            for (i = 0; i < g->K * kdim; i++) dw[i] += j.dw[t][i];
        return OCR_OK;
    }
    memset(&pk, 0, sizeof pk);
    pk.uk = uk; pk.lda = kdim; pk.A = w;
    ocr__pack_a(&pk, 0, g->K, 0, kdim, pa);
    j.pa = pa;
    ocr_parallel_for_dynamic(ctx, g->N * j.n_bands, 1, ocr__conv_implicit_items, &j);
    return OCR_OK;
}
#endif

/* row [W f] = each of xr's W values f times */
static void ocr__widen_row(const float *xr, int64_t W, int64_t f, float *row) {
    int64_t w, k;
    if (f == 2) for (w = 0; w < W; w++) row[2 * w] = row[2 * w + 1] = xr[w];
    else
        for (w = 0; w < W; w++)
            for (k = 0; k < f; k++) row[w * f + k] = xr[w];
}

/* A convolution's input given as the concatenation along channels of parts [N, channels, H/f, W/f], each upsampled
   by its nearest factor f (ocr_nn_concat_conv2d_forward). */
#define OCR__CAT_MAX 8
typedef struct {
    int n;
    const float *data[OCR__CAT_MAX];
    int64_t channels[OCR__CAT_MAX], factor[OCR__CAT_MAX];
} ocr__cat_input;

#ifdef OCR__HAVE_AVX2
/* ---- Winograd F(4x4, 3x3) (Lavin & Gray, "Fast Algorithms for Convolutional Neural Networks", 2015) ----
   A 4x4 output tile is At [ (G w Gt) . (Bt d B) ] A with d its 6x6 input tile, so each (input, output channel)
   pair costs 36 multiplications per tile instead of 144. Over the channels the 36 elementwise products are 36
   GEMMs [K x C] x [C x tiles], which run on the packed micro-kernel. Used for stride-1, undilated, ungrouped 3x3
   convolutions: forward, through ocr__conv_backward_data their data gradients, and (ocr__conv_winograd_wgrad) their
   weight gradients. It differs from the direct sum by up to ~1e-5 of the output's largest value (measured on DBNet's
   shapes; tests/test_nn_fast_paths.c allows 2e-5). The transforms come in two widths: AVX-512 (16 tiles a vector,
   48-tile panels for the 8x48 micro-kernel) and AVX2 (8 tiles, 16-tile panels for the 6x16 one). */

#define OCR__WINO_POINTS 36
/* Where it pays (measured against the direct path on DBNet's shapes, one thread): with fewer output channels or
   tiles the transforms and the weight transform (K x C x 36, whatever the image size) cost more than they save. */
#define OCR__WINO_MIN_IN 16
#define OCR__WINO_MIN_OUT 32
#define OCR__WINO_MIN_TILES 64
/* 512 channels in and out (ResNet-18's layer4 at the official width): the direct path streams 9.4 MB of weights per
   48-pixel block, and F(4x4, 3x3) pays with fewer tiles (two threads: layer4's 3x3 convolutions at 736x1280, 60 tiles,
   about 40 ms less together; a 640x640 training step's layer4 forward 71 -> 45-51 ms, its backward no slower) */
#define OCR__WINO_WIDE 512
#define OCR__WINO_MIN_TILES_WIDE 16
#define OCR__WINO_BAND_BYTES ((int64_t)2 << 20)        /* an item's V and M stay in L2 */
/* one image's bands spread over the threads: at most this each (a band of layer3 at width 1 and 736x1280 taking
   13 MB ran 6% slower than the phases spread) */
#define OCR__WINO_SPLIT_BYTES ((int64_t)10 << 20)
/* the weight gradient's GEMMs run along an item's tiles, so it takes twice the bands: fewer, longer sums (l1, l2, l3
   and the decoder's 3x3 weight gradients 7% faster together than at 2 MB, 6 of 6 alternating runs) */
#define OCR__WINO_WGRAD_BAND_BYTES ((int64_t)4 << 20)
#ifndef OCR__WINO_WGRAD_GROUPS
#define OCR__WINO_WGRAD_GROUPS 2 /* see ocr__conv_winograd_wgrad */
#endif
#define OCR__WINO_WGRAD_GROUP_MW_BYTES ((size_t)4 << 20)
#define OCR__WINO_WGRAD_GROUP_BAND_BYTES ((int64_t)2 << 20)
#define OCR__WINO_WGRAD_MIN_IN 64  /* the weight gradient's GEMMs run over the tiles: with few input channels they are thin */
/* AVX2 (6x16 micro-kernel): with 64 input channels it was no faster (bench_winograd: the recognizer's 64-channel
   blocks and the official width's layer1 0.5-1.1 ms slower per backward, its layer2 at 128 channels 24 -> 15 ms) */
#define OCR__WINO_WGRAD_MIN_IN_AVX2 128

/* The transforms are written once for both vector widths: P is the intrinsics' prefix (_mm512 or _mm256), T the
   vector type. out[r] = sum_i Bt[r][i] x_i for Bt = [4 0 -5 0 1 0; 0 -4 -4 1 1 0; 0 4 -4 -1 1 0; 0 -2 -1 2 1 0;
   0 2 -1 -2 1 0; 0 4 0 -5 0 1] */
#define OCR__WINO_BT(P, T, x0, x1, x2, x3, x4, x5, o)                                                            \
    do {                                                                                                         \
        T f4_ = P##_set1_ps(4.0f), f5_ = P##_set1_ps(5.0f), f2_ = P##_set1_ps(2.0f);                             \
        T a_ = P##_fnmadd_ps(f4_, x2, x4), b_ = P##_fnmadd_ps(f4_, x1, x3);                                      \
        T c_ = P##_sub_ps(x4, x2), d_ = P##_mul_ps(f2_, P##_sub_ps(x3, x1));                                     \
        (o)[0] = P##_fmadd_ps(f4_, x0, P##_fnmadd_ps(f5_, x2, x4));                                              \
        (o)[1] = P##_add_ps(a_, b_); (o)[2] = P##_sub_ps(a_, b_);                                                \
        (o)[3] = P##_add_ps(c_, d_); (o)[4] = P##_sub_ps(c_, d_);                                                \
        (o)[5] = P##_fmadd_ps(f4_, x1, P##_fnmadd_ps(f5_, x3, x5));                                              \
    } while (0)
/* out[r] = sum_i At[r][i] m_i for At = [1 1 1 1 1 0; 0 1 -1 2 -2 0; 0 1 1 4 4 0; 0 1 -1 8 -8 1] */
#define OCR__WINO_AT(P, T, m0, m1, m2, m3, m4, m5, o)                                                            \
    do {                                                                                                         \
        T s12_ = P##_add_ps(m1, m2), d12_ = P##_sub_ps(m1, m2);                                                  \
        T s34_ = P##_add_ps(m3, m4), d34_ = P##_sub_ps(m3, m4);                                                  \
        (o)[0] = P##_add_ps(P##_add_ps(m0, s12_), s34_);                                                         \
        (o)[1] = P##_fmadd_ps(P##_set1_ps(2.0f), d34_, d12_);                                                    \
        (o)[2] = P##_fmadd_ps(P##_set1_ps(4.0f), s34_, s12_);                                                    \
        (o)[3] = P##_add_ps(P##_fmadd_ps(P##_set1_ps(8.0f), d34_, d12_), m5);                                    \
    } while (0)
/* The output transform's first half, for all three output passes: q[4c .. 4c+3] = At applied to column c of the 6x6
   point grid at m (its points c, 6+c, ..., 30+c lie st floats apart, its columns col apart); LOAD reads a vector. */
#define OCR__WINO_AT_COLUMNS(P, T, LOAD, m, col, st, q)                                                          \
    do {                                                                                                         \
        int c_;                                                                                                  \
        for (c_ = 0; c_ < 6; c_++) {                                                                             \
            const float *mc_ = (m) + c_ * (col);                                                                 \
            OCR__WINO_AT(P, T, LOAD(mc_), LOAD(mc_ + (st)), LOAD(mc_ + 2 * (st)), LOAD(mc_ + 3 * (st)),          \
                         LOAD(mc_ + 4 * (st)), LOAD(mc_ + 5 * (st)), (q) + c_ * 4);                              \
        }                                                                                                        \
    } while (0)
#define OCR__WINO_LOAD16(ptr) _mm512_loadu_ps(ptr)
#define OCR__WINO_LOAD16_LM(ptr) _mm512_maskz_loadu_ps(lm, ptr)
#define OCR__WINO_LOAD8_LM(ptr) _mm256_maskload_ps(ptr, lm)

/* ocr__widen_row for factors 2, 4 and 8 on AVX-512: 16 outputs per permute of 16 / f inputs (the scalar loops took
   as long as the rest of the band copy) */
__attribute__((target("avx512f")))
static void ocr__widen_row_avx512(const float *xr, int64_t W, int64_t f, float *row) {
    int64_t o, n = W * f, per = 16 / f;
    __m512i idx = _mm512_srlv_epi32(_mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15),
                                    _mm512_set1_epi32(f == 2 ? 1 : f == 4 ? 2 : 3));
    for (o = 0; o < n; o += 16, xr += per) {
        int64_t in = (n - o + f - 1) / f < per ? (n - o + f - 1) / f : per; /* no read past the row */
        _mm512_mask_storeu_ps(row + o, ocr__lanes(n - o), _mm512_permutexvar_ps(idx, _mm512_maskz_loadu_ps(ocr__lanes(in), xr)));
    }
}

/* Row ih of channel c of image n of the concatenation: its W values into dst. */
static void ocr__cat_row(const ocr__cat_input *cat, int64_t n, int64_t c, int64_t ih, int64_t H, int64_t W, int avx512, float *dst) {
    int i = 0;
    int64_t f, h, w;
    const float *src;
    while (c >= cat->channels[i]) c -= cat->channels[i++];
    f = cat->factor[i]; h = H / f; w = W / f;
    src = cat->data[i] + ((n * cat->channels[i] + c) * h + ih / f) * w;
    if (f == 1) memcpy(dst, src, (size_t)W * sizeof(float));
    else if (avx512 && (f == 2 || f == 4 || f == 8)) ocr__widen_row_avx512(src, w, f, dst);
    else ocr__widen_row(src, w, f, dst);
}

typedef struct ocr__wino_job_ {
    const ocr__conv_geom *g;
    const float *x, *w;
    float *u;                /* 36 blocks of the transformed weights, each packed into 8-row panels of Kp x C */
    float *y;
    int accumulate;
    ocr__conv_epilogue ep;
    ocr__ukernel uk;
    int64_t TH, TW, Kp, Wp;  /* tile rows and columns; K padded to the panel height; padded band row length */
    int64_t band, n_bands;   /* tile rows per work item (with item_tiles: the most rows an item spans); items per image */
    int64_t item_tiles;      /* > 0: items are runs of item_tiles tiles of an image in row order (the AVX-512
                                forward), so a tile row of 40 no longer fills 48 GEMM columns */
    size_t pad_floats, v_floats;
    float *buf[OCR_MAX_THREADS];  /* per thread: padded input band | V [36][Tp/48][C][48] | M [36][Kp][Tp] */
    int64_t item;            /* phases-in-parallel mode: the item its phases work on (buffers of thread 0) */
    const ocr__cat_input *cat;    /* or NULL: the input is the concatenation of these parts, read in place of x */
    int wgrad;               /* weight gradient: y holds dy, V and the dy transforms are plain rows, sums go to mw */
    int tiles_as_rows;       /* few tiles (ocr__wino_rows_part): V packed as 8-row A panels [36][Tp/8][C][8] */
    int64_t rows_kc, rows_stride; /* there: input channels per chunk of transformed weights; floats of u per thread */
    float *mw, *dw;          /* weight gradient: the 36 sums [36][K][C], then dw += Gt (sums) G */
    int64_t groups, n_items; /* weight gradient: items summed in this many groups, each on one thread (mw per group) */
    float *gemm_buf;         /* weight gradient: per thread, GEMM packing buffers of gemm_pa + gemm_pb floats */
    size_t gemm_pa, gemm_pb;
    /* the transforms of the vector width in use (the micro-kernel's: AVX-512 or AVX2) */
    void (*input)(const struct ocr__wino_job_ *j, int64_t item, float *buf, int64_t c0, int64_t c1);
    void (*output)(const struct ocr__wino_job_ *j, int64_t item, float *buf, int64_t k0, int64_t k1);
    void (*dy)(const struct ocr__wino_job_ *j, int64_t item, float *buf, int64_t k0, int64_t k1);
} ocr__wino_job;

/* G w Gt, written straight into the packed A layout: element (k, c) of point xi is at
   u[xi*Kp*C + (k - k%8)*C + c*8 + k%8]. Work items are panels of 8 output channels; a vector holds 2 input x 8
   output channels, so each point's 16 results are one contiguous store. Lanes of channels past K get zeros (the
   panel's padding rows). G = [1/4 0 0; -1/6 -1/6 -1/6; -1/6 1/6 -1/6; 1/24 1/12 1/6; 1/24 -1/12 1/6; 0 0 1] */
#define OCR__WINO_G(P, T, g0, g1, g2, o)                                                                         \
    do {                                                                                                         \
        T s02_ = P##_add_ps(g0, g2), e_ = P##_fmadd_ps(P##_set1_ps(1.0f / 24), g0, P##_mul_ps(P##_set1_ps(1.0f / 6), g2)); \
        T f_ = P##_mul_ps(P##_set1_ps(1.0f / 12), g1);                                                           \
        (o)[0] = P##_mul_ps(P##_set1_ps(0.25f), g0);                                                             \
        (o)[1] = P##_mul_ps(P##_set1_ps(-1.0f / 6), P##_add_ps(s02_, g1));                                       \
        (o)[2] = P##_mul_ps(P##_set1_ps(-1.0f / 6), P##_sub_ps(s02_, g1));                                       \
        (o)[3] = P##_add_ps(e_, f_); (o)[4] = P##_sub_ps(e_, f_); (o)[5] = g2;                                   \
    } while (0)
/* G w Gt of 16 lanes' 3x3 weights (gv: the 9 taps, row by row), stored (lanes in mask m) at d + xi * stride for each
   point xi as it is made: through an array of 36 vectors GCC spilled them all to the stack and copied them back.
   Both weight transforms' arithmetic, inlined into each. */
__attribute__((target("avx512f"), always_inline))
static inline void ocr__wino_g_store_avx512(const __m512 gv[9], float *d, int64_t stride, __mmask16 m) {
    __m512 c0[6], c1[6], c2[6]; /* the columns of G w; every index a constant, so all stay in registers */
    OCR__WINO_G(_mm512, __m512, gv[0], gv[3], gv[6], c0);
    OCR__WINO_G(_mm512, __m512, gv[1], gv[4], gv[7], c1);
    OCR__WINO_G(_mm512, __m512, gv[2], gv[5], gv[8], c2);
#define OCR__WINO_G_ROW(r)                                                                                      \
    do { /* row r of (G w) Gt */                                                                              \
        __m512 o_[6];                                                                                         \
        float *dr_ = d + 6 * (r) * stride;                                                                    \
        OCR__WINO_G(_mm512, __m512, c0[r], c1[r], c2[r], o_);                                                 \
        _mm512_mask_storeu_ps(dr_, m, o_[0]); _mm512_mask_storeu_ps(dr_ + stride, m, o_[1]);                   \
        _mm512_mask_storeu_ps(dr_ + 2 * stride, m, o_[2]); _mm512_mask_storeu_ps(dr_ + 3 * stride, m, o_[3]);  \
        _mm512_mask_storeu_ps(dr_ + 4 * stride, m, o_[4]); _mm512_mask_storeu_ps(dr_ + 5 * stride, m, o_[5]);  \
    } while (0)
    OCR__WINO_G_ROW(0); OCR__WINO_G_ROW(1); OCR__WINO_G_ROW(2); OCR__WINO_G_ROW(3); OCR__WINO_G_ROW(4); OCR__WINO_G_ROW(5);
#undef OCR__WINO_G_ROW
}

/* U's point stride, a cache line past Kp x C floats (as V's and M's below): a multiple of 4 KB from 128 channels
   each way put the 36 stores of each weight transform in one L1 set (256-to-256 channels at 40x40: the transform
   took 29% of the convolution). u_panel: a panels-apart thread's block of 8 channels. */
static int64_t ocr__wino_ups(const ocr__wino_job *j, int u_panel) { return (u_panel ? 8 : j->Kp) * j->g->C + 16; }

/* Panel p (output channels 8p .. 8p + 7) of every point: point xi's block at dst + xi * point_stride, element (k, c)
   at c * 8 + k % 8 in it. */
__attribute__((target("avx512f")))
static void ocr__wino_filter_panel(const ocr__wino_job *j, int64_t p, float *dst, int64_t point_stride) {
    int64_t C = j->g->C, K = j->g->K, c0, i;
    int32_t il[16];
    __mmask16 kmask = 0;
    __m512i idx;
    for (i = 0; i < 16; i++) {
        il[i] = (int32_t)(((p * 8 + i % 8) * C + i / 8) * 9);
        if (p * 8 + i % 8 < K) kmask = (__mmask16)(kmask | (1u << i));
        else il[i] = 0;
    }
    idx = _mm512_loadu_si512(il);
    for (c0 = 0; c0 < C; c0 += 2) {
        __mmask16 cm = (__mmask16)(c0 + 1 < C ? 0xFFFF : 0x00FF);
        const float *w0 = j->w + c0 * 9;
        float *d = dst + c0 * 8;
        __m512 gv[9];
        for (i = 0; i < 9; i++) gv[i] = _mm512_mask_i32gather_ps(_mm512_setzero_ps(), (__mmask16)(kmask & cm), idx, w0 + i, 4);
        ocr__wino_g_store_avx512(gv, d, point_stride, cm);
    }
}

static void ocr__wino_filter_part(void *arg, int64_t begin, int64_t end, int tid) {
    const ocr__wino_job *j = (const ocr__wino_job *)arg;
    int64_t p;
    (void)tid;
    for (p = begin; p < end; p++) ocr__wino_filter_panel(j, p, j->u + p * 8 * j->g->C, ocr__wino_ups(j, 0));
}

/* An item's image n, its first tile's row th0 and column o (0 for bands of rows), its tiles T and GEMM columns Tp */
static void ocr__wino_item_span(const ocr__wino_job *j, int64_t item, int64_t *n, int64_t *th0, int64_t *o, int64_t *T, int64_t *Tp) {
    if (j->item_tiles > 0) {
        int64_t first = (item % j->n_bands) * j->item_tiles, rest = j->TH * j->TW - first;
        *n = item / j->n_bands;
        *th0 = first / j->TW; *o = first % j->TW;
        *T = rest < j->item_tiles ? rest : j->item_tiles;
    } else {
        int64_t th1;
        *n = item / j->n_bands;
        *th0 = (item % j->n_bands) * j->band; *o = 0;
        th1 = *th0 + j->band < j->TH ? *th0 + j->band : j->TH;
        *T = (th1 - *th0) * j->TW;
    }
    *Tp = (*T + j->uk.nr - 1) / j->uk.nr * j->uk.nr;
}
/* the same without the column: for the paths that need only T and Tp, or that run bands of whole tile rows only
   (AVX2's transforms, the weight gradient's) */
static void ocr__wino_item_range(const ocr__wino_job *j, int64_t item, int64_t *n, int64_t *th0, int64_t *T, int64_t *Tp) {
    int64_t o;
    ocr__wino_item_span(j, item, n, th0, &o, T, Tp);
}

/* The floats from one point's block of V (C x Tp) or M and D (Kp x Tp) to the next: a cache line more than the
   block, since blocks a multiple of 4 KB apart (48-tile panels of 256 channels) put the 36 points' rows, which the
   transforms write and read together, in the same L1 sets. */
static int64_t ocr__wino_vps(const ocr__wino_job *j, int64_t Tp) { return Tp * j->g->C + 16; }
static int64_t ocr__wino_mps(const ocr__wino_job *j, int64_t Tp) { return Tp * j->Kp + 16; }

/* Channel c's rows for an item's T tiles from column o of tile row th0, zero-padded, into its slot of xp (rows of Wp
   floats, span * 4 + 2 of them for the span tile rows it touches); returns the slot. Each row gets the columns its
   tiles read: all of them (and the slack to Wp, which the AVX2 loads reach) unless the item starts or ends inside
   the tile rows that read it. */
static float *ocr__wino_pad_rows(const ocr__wino_job *j, float *xp, int64_t n, int64_t th0, int64_t o, int64_t T, int64_t c) {
    const ocr__conv_geom *g = j->g;
    int64_t span = (o + T + j->TW - 1) / j->TW, rows = span * 4 + 2, end_col = o + T - (span - 1) * j->TW;
    float *src = xp + c * rows * j->Wp;
    int64_t r;
    if (c + 2 < g->C && !j->cat) { /* the run of rows two channels ahead, a plane away, where the hardware's prefetch does not look */
        int64_t h0 = th0 * 4 - g->ph, h1 = h0 + rows;
        h0 = h0 < 0 ? 0 : h0; h1 = h1 < g->H ? h1 : g->H;
        if (h1 > h0) ocr__prefetch_floats(j->x + ((n * g->C + c + 2) * g->H + h0) * g->W, (h1 - h0) * g->W);
    }
    for (r = 0; r < rows; r++) {
        /* tile rows r_lo..r_hi of the item read this row (tile row t: rows 4t .. 4t+5); only the first starts at
           tile column o, only the last ends before the row's end */
        int64_t ih = th0 * 4 + r - g->ph, r_hi = r / 4 < span - 1 ? r / 4 : span - 1, r_lo = r < 5 ? 0 : (r - 2) / 4;
        int64_t c0 = r_hi == 0 ? 4 * o : 0, c1 = r_lo == span - 1 && end_col < j->TW ? 4 * end_col + 2 : j->Wp;
        int64_t z0 = c0 > g->pw ? c0 : g->pw, z1 = c1 < g->pw + g->W ? c1 : g->pw + g->W; /* [z0, z1): the image's columns */
        float *dst = src + r * j->Wp;
        if (ih < 0 || ih >= g->H || z1 <= z0) { memset(dst + c0, 0, (size_t)(c1 - c0) * sizeof(float)); continue; }
        /* the row between its zero borders, each float written once (zeroing the whole row first cost as much as the copy) */
        if (z0 > c0) memset(dst + c0, 0, (size_t)(z0 - c0) * sizeof(float));
        if (j->cat) ocr__cat_row(j->cat, n, c, ih, g->H, g->W, j->uk.fn == ocr__ukernel_avx512, dst + g->pw); /* the whole row */
        else memcpy(dst + z0, j->x + ((n * g->C + c) * g->H + ih) * g->W + (z0 - g->pw), (size_t)(z1 - z0) * sizeof(float));
        if (c1 > z1) memset(dst + z1, 0, (size_t)(c1 - z1) * sizeof(float));
    }
    return src;
}

/* Input channels [c0, c1) of an item: zero-padded copy of the band's rows, then Bt d B of every tile, 16 tiles per
   vector, into V: packed into 48-tile B panels [36][Tp/48][C][48] for the forward GEMM, or plain rows [36][C][Tp] for
   the weight gradient's dot products. */
__attribute__((target("avx512f")))
static void ocr__wino_input(const ocr__wino_job *j, int64_t item, float *buf, int64_t c0, int64_t c1) {
    const ocr__conv_geom *g = j->g;
    int64_t n, th0, col0, T, Tp, c, r, t0, i, pw, vps, Wp = j->Wp;
    float *xp = buf, *V = buf + j->pad_floats;
    ocr__wino_item_span(j, item, &n, &th0, &col0, &T, &Tp);
    vps = ocr__wino_vps(j, Tp);
    pw = j->wgrad ? Tp : j->tiles_as_rows ? 8 : j->uk.nr;
    for (c = c0; c < c1; c++) {
        float *src = ocr__wino_pad_rows(j, xp, n, th0, col0, T, c);
        if (j->TW < 16) {
            for (t0 = 0; t0 < Tp; t0 += 16) {
                __m512 e[36], o[6];
                __m512i base;
                int32_t bl[16];
                for (i = 0; i < 16; i++) { /* tiles past T read the item's first: finite values in columns nobody reads */
                    int64_t t = col0 + (t0 + i < T ? t0 + i : 0);
                    bl[i] = (int32_t)((t / j->TW) * 4 * Wp + (t % j->TW) * 4);
                }
                base = _mm512_loadu_si512(bl);
                for (i = 0; i < 6; i++) {
                    const float *row = src + i * Wp;
                    __m512 d0 = _mm512_i32gather_ps(base, row, 4), d1 = _mm512_i32gather_ps(base, row + 1, 4);
                    __m512 d2 = _mm512_i32gather_ps(base, row + 2, 4), d3 = _mm512_i32gather_ps(base, row + 3, 4);
                    __m512 d4 = _mm512_i32gather_ps(base, row + 4, 4), d5 = _mm512_i32gather_ps(base, row + 5, 4);
                    OCR__WINO_BT(_mm512, __m512, d0, d1, d2, d3, d4, d5, e + i * 6);
                }
                for (i = 0; i < 6; i++) {
                    float *v = V + (t0 / pw) * g->C * pw + c * pw + t0 % pw + i * ocr__wino_vps(j, Tp);
                    OCR__WINO_BT(_mm512, __m512, e[i], e[6 + i], e[12 + i], e[18 + i], e[24 + i], e[30 + i], o);
                    if (pw == 8) /* 8-row panels: the 16 tiles' halves go to two panels */
                        for (r = 0; r < 6; r++) {
                            _mm256_storeu_ps(v + r * 6 * ocr__wino_vps(j, Tp), _mm512_castps512_ps256(o[r]));
                            _mm256_storeu_ps(v + r * 6 * ocr__wino_vps(j, Tp) + g->C * 8,
                                             _mm512_castps512_ps256(_mm512_shuffle_f32x4(o[r], o[r], 0xEE)));
                        }
                    else
                        for (r = 0; r < 6; r++) _mm512_storeu_ps(v + r * 6 * ocr__wino_vps(j, Tp), o[r]);
                }
            }
            continue;
        }
        /* rows of at least 16 tiles: the 6x6 inputs of 16 side-by-side tiles are 6 rows of 66 contiguous floats,
           split into their 6 columns with permutes instead of gathers */
        for (t0 = -col0; t0 < T; t0 += j->TW) { /* t0: the item's index of the tile row's first tile */
            int64_t tc0, tc1 = T - t0 < j->TW ? T - t0 : j->TW;
            for (tc0 = t0 < 0 ? col0 : 0; tc0 < tc1; tc0 += 16) {
                int nl = tc1 - tc0 < 16 ? (int)(tc1 - tc0) : 16;
                int64_t t = t0 + tc0, q = t % pw, nf = 4 * (int64_t)nl + 2;
                int in_panel = pw != 8 && q + nl <= pw;
                float *grp = V + (t / pw) * g->C * pw + c * pw + q;
                __mmask16 gmask = ocr__lanes(nl);
                __m512 e[36], o[6];
                for (i = 0; i < 6; i++) {
                    const float *row = src + (((t0 + col0) / j->TW) * 4 + i) * Wp + tc0 * 4;
                    __m512 a0 = _mm512_maskz_loadu_ps(ocr__lanes(nf), row), a1 = _mm512_maskz_loadu_ps(ocr__lanes(nf - 16), row + 16);
                    __m512 a2 = _mm512_maskz_loadu_ps(ocr__lanes(nf - 32), row + 32), a3 = _mm512_maskz_loadu_ps(ocr__lanes(nf - 48), row + 48);
                    __m512 a4 = _mm512_maskz_loadu_ps(ocr__lanes(nf - 64), row + 64), d[6];
                    for (r = 0; r < 4; r++) { /* d_r[l] = row[4l + r] */
                        __m512i sel = _mm512_add_epi32(_mm512_setr_epi32(0, 4, 8, 12, 16, 20, 24, 28, 0, 0, 0, 0, 0, 0, 0, 0), _mm512_set1_epi32((int)r));
                        d[r] = _mm512_shuffle_f32x4(_mm512_permutex2var_ps(a0, sel, a1), _mm512_permutex2var_ps(a2, sel, a3), 0x44);
                    }
                    { /* d_4[l] = d_0[l + 1], d_5[l] = d_1[l + 1]: the 17th tile's first two columns come from a4 */
                        __m512i up = _mm512_setr_epi32(1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16);
                        d[4] = _mm512_permutex2var_ps(d[0], up, a4);
                        d[5] = _mm512_permutex2var_ps(d[1], up, _mm512_permutexvar_ps(_mm512_set1_epi32(1), a4));
                    }
                    OCR__WINO_BT(_mm512, __m512, d[0], d[1], d[2], d[3], d[4], d[5], e + i * 6);
                }
                for (i = 0; i < 6; i++) {
                    OCR__WINO_BT(_mm512, __m512, e[i], e[6 + i], e[12 + i], e[18 + i], e[24 + i], e[30 + i], o);
                    if (in_panel) { /* the usual case, its addresses and mask found once per group (their arithmetic
                                       had taken longer than the transform) */
                        for (r = 0; r < 6; r++) _mm512_mask_storeu_ps(grp + (r * 6 + i) * vps, gmask, o[r]);
                        continue;
                    }
                    for (r = 0; r < 6; r++) {
                        float *plane = V + (r * 6 + i) * vps, *dst = plane + (t / pw) * g->C * pw + c * pw + q;
                        if (pw == 8) { /* 8-row panels: the lanes in runs of up to 8, one panel each */
                            int l, cnt;
                            for (l = 0; l < nl; l += cnt) {
                                int64_t tl = t + l;
                                cnt = 8 - (int)(tl % 8) < nl - l ? 8 - (int)(tl % 8) : nl - l;
                                _mm512_mask_storeu_ps(plane + (tl / 8) * g->C * 8 + c * 8 + tl % 8, ocr__lanes(cnt),
                                                      _mm512_maskz_compress_ps((__mmask16)(ocr__lanes(l + cnt) & ~ocr__lanes(l)), o[r]));
                            }
                        } else if (q + nl <= pw) _mm512_mask_storeu_ps(dst, ocr__lanes(nl), o[r]);
                        else { /* the group crosses into the next 48-tile panel */
                            _mm512_mask_storeu_ps(dst, ocr__lanes(pw - q), o[r]);
                            _mm512_mask_compressstoreu_ps(plane + (t / pw + 1) * g->C * pw + c * pw,
                                                          (__mmask16)(ocr__lanes(nl) & ~ocr__lanes(pw - q)), o[r]);
                        }
                    }
                }
            }
        }
        if (j->tiles_as_rows) /* the rows past T up to the next 16: zeros (the GEMM multiplies them) */
            for (i = 0; i < OCR__WINO_POINTS; i++) {
                int64_t t;
                for (t = T; t < (T + 15) / 16 * 16; t++) V[i * ocr__wino_vps(j, Tp) + (t / 8) * g->C * 8 + c * 8 + t % 8] = 0.0f;
            }
        else if (T < Tp && !j->wgrad) /* the last panel's unused columns: zeros, not whatever the buffer held (denormals would slow the GEMM) */
            for (i = 0; i < OCR__WINO_POINTS; i++) {
                float *dst = V + i * ocr__wino_vps(j, Tp) + (T / pw) * g->C * pw + c * pw + T % pw;
                for (r = 0; r < Tp - T; r += 16) _mm512_mask_storeu_ps(dst + r, ocr__lanes(Tp - T - r), _mm512_setzero_ps());
            }
    }
}

/* Points [xi0, xi1) of an item: M[xi] = U[xi] V[xi]. */
static void ocr__wino_gemm(const ocr__wino_job *j, int64_t item, float *buf, int64_t xi0, int64_t xi1) {
    int64_t n, th0, T, Tp, xi, pc, jp, ip, C = j->g->C;
    float *V = buf + j->pad_floats, *M = V + j->v_floats;
    ocr__wino_item_range(j, item, &n, &th0, &T, &Tp);
    int store_first = ocr__ukernel_for_cols_store(&j->uk, j->uk.nr) != NULL;
    for (xi = xi0; xi < xi1; xi++) {
        const float *u = j->u + xi * ocr__wino_ups(j, 0), *v = V + xi * ocr__wino_vps(j, Tp);
        float *m = M + xi * ocr__wino_mps(j, Tp);
        /* the first K block stores its sums (as the adding kernel would on zeros: the same bits), so M needs no zeroing
           pass; columns past a narrow last panel's are left as they were, and the output transform does not keep them */
        if (!store_first) memset(m, 0, (size_t)(j->Kp * Tp) * sizeof(float));
        for (pc = 0; pc < C; pc += OCR__KC) {
            int64_t kc = C - pc < OCR__KC ? C - pc : OCR__KC;
            for (jp = 0; jp < Tp; jp += j->uk.nr) {
                ocr__ukernel_fn fn = pc == 0 && store_first ? ocr__ukernel_for_cols_store(&j->uk, T - jp) : ocr__ukernel_for_cols(&j->uk, T - jp);
                for (ip = 0; ip < j->Kp; ip += j->uk.mr)
                    fn(kc, u + ip * C + pc * j->uk.mr, v + jp * C + pc * j->uk.nr, m + ip * Tp + jp, Tp, 1.0f);
            }
        }
    }
}

/* Panels [p0, p1) of mr output channels (8 on AVX-512, 6 on AVX2) of the item j->item, each on its own: its weights
   transformed into the thread's U block (36 x mr x C floats, which stays in L2), then its rows of M[xi] = U[xi] V[xi]
   for every point. The kernels' way when an image has few tiles (layer4 at 640x640: 25 tiles, 512 channels each
   way): the transformed weights of all panels at once (38 MB) went to memory and came back for the GEMMs, and that
   took as long as the products. The same sums as ocr__wino_gemm's, in the same order. */
__attribute__((target("avx2,fma"))) static void ocr__wino_filter_panel_avx2(const ocr__wino_job *j, int64_t p, float *dst, int64_t point_stride);
static void ocr__wino_panels_part(void *arg, int64_t p0, int64_t p1, int tid) {
    const ocr__wino_job *j = (const ocr__wino_job *)arg;
    const int64_t mr = j->uk.mr, ups = ocr__wino_ups(j, 1);
    int64_t n, th0, T, Tp, xi, pc, jp, p, C = j->g->C;
    float *V = j->buf[0] + j->pad_floats, *M = V + j->v_floats, *u = j->u + (int64_t)tid * OCR__WINO_POINTS * ups;
    ocr__wino_item_range(j, j->item, &n, &th0, &T, &Tp);
    for (p = p0; p < p1; p++) {
        if (mr == 8) ocr__wino_filter_panel(j, p, u, ups);
        else ocr__wino_filter_panel_avx2(j, p, u, ups);
        for (xi = 0; xi < OCR__WINO_POINTS; xi++) {
            const float *v = V + xi * ocr__wino_vps(j, Tp);
            float *m = M + xi * ocr__wino_mps(j, Tp) + p * mr * Tp;
            memset(m, 0, (size_t)(mr * Tp) * sizeof(float));
            for (pc = 0; pc < C; pc += OCR__KC) {
                int64_t kc = C - pc < OCR__KC ? C - pc : OCR__KC;
                for (jp = 0; jp < Tp; jp += j->uk.nr)
                    ocr__ukernel_for_cols(&j->uk, T - jp)(kc, u + xi * ups + pc * mr, v + jp * C + pc * j->uk.nr, m + jp, Tp, 1.0f);
            }
        }
    }
}

/* G w Gt of output channels [k0, k0 + 48) (zeros past K) and input channels [c0, c0 + kc), written as 48-column B
   panels: point xi's element (c, k) at dst[xi * ups + (c - c0) * 48 + k - k0]. A vector holds 16 output channels of
   one input channel, taken from wt: the 16 channels' weights transposed there by 16x16 blocks ([kc x 9][16]), as
   gathers of 16 weights 18 KB apart took longer than the products. */
__attribute__((target("avx512f")))
static void ocr__wino_filter_cols(const ocr__wino_job *j, int64_t k0, int64_t c0, int64_t kc, float *dst, int64_t ups, float *wt) {
    int64_t C = j->g->C, K = j->g->K, nf = kc * 9, c, i, r, kv, f0;
    for (kv = 0; kv < 3; kv++) {
        int64_t kb = k0 + kv * 16, nrows = K - kb < 16 ? K - kb : 16;
        const float *src = j->w + kb * C * 9 + c0 * 9;
        if (nrows <= 0) { /* past K: zero columns */
            for (c = 0; c < kc; c++)
                for (i = 0; i < OCR__WINO_POINTS; i++) _mm512_storeu_ps(dst + i * ups + c * 48 + kv * 16, _mm512_setzero_ps());
            continue;
        }
        for (f0 = 0; f0 < nf; f0 += 16) {
            if (nrows == 16 && f0 + 16 <= nf) ocr__transpose16(src + f0, C * 9, wt + f0 * 16, 16);
            else { /* a part block: through a zero-padded copy */
                float blk[256];
                for (r = 0; r < 16; r++)
                    _mm512_storeu_ps(blk + r * 16, r < nrows ? _mm512_maskz_loadu_ps(ocr__lanes(nf - f0), src + r * C * 9 + f0) : _mm512_setzero_ps());
                ocr__transpose16(blk, 16, wt + f0 * 16, 16);
            }
        }
        for (c = 0; c < kc; c++) {
            const float *wc = wt + c * 9 * 16;
            float *d = dst + c * 48 + kv * 16;
            __m512 gv[9];
            for (i = 0; i < 9; i++) gv[i] = _mm512_loadu_ps(wc + i * 16);
            ocr__wino_g_store_avx512(gv, d, ups, (__mmask16)0xFFFF);
        }
    }
}

/* Few tiles (one item of at most two 48-tile panels: layer4 at 640x640 has 25 tiles of 512 channels each way):
   M[xi]t = V[xi]t U[xi]t with the tiles as the GEMM's rows, so that a 48-column panel holds 48 output channels
   instead of 25 tiles and 23 zeros, and the large operand, the transformed weights, is made a chunk at a time in
   L2 and used there by every tile. Work items are 48-channel panels [k0, k0 + 48): per chunk of rows_kc input
   channels, transform their weights, multiply into the thread's Mt block [36][tile rows][48], then transpose it
   into M's [36][Kp][Tp] for the output transform. */
static void ocr__wino_rows_part(void *arg, int64_t q0, int64_t q1, int tid) {
    const ocr__wino_job *j = (const ocr__wino_job *)arg;
    int64_t n, th0, T, Tp, Tr, xi, pc, rb, q, t, k, C = j->g->C, kcmax = j->rows_kc;
    int64_t ups = kcmax * 48 + 16; /* a cache line more than the block: blocks 4 KB multiples apart share L1 sets */
    float *V = j->buf[0] + j->pad_floats, *M = V + j->v_floats, *u = j->u + (int64_t)tid * j->rows_stride;
    float *mt = u + OCR__WINO_POINTS * ups, *wt;
    ocr__wino_item_range(j, j->item, &n, &th0, &T, &Tp);
    Tr = (T + 15) / 16 * 16; /* the output transform reads tiles 16 at a time */
    wt = mt + OCR__WINO_POINTS * Tr * 48;
    for (q = q0; q < q1; q++) {
        int64_t k0 = q * 48, nk = j->g->K - k0 < 48 ? j->g->K - k0 : 48;
        ocr__ukernel_fn fn = ocr__ukernel_for_cols(&j->uk, nk); /* layer4's 512 channels: 32 in the last panel */
        memset(mt, 0, (size_t)(OCR__WINO_POINTS * Tr * 48) * sizeof(float));
        for (pc = 0; pc < C; pc += kcmax) {
            int64_t kc = C - pc < kcmax ? C - pc : kcmax;
            ocr__wino_filter_cols(j, k0, pc, kc, u, ups, wt);
            for (xi = 0; xi < OCR__WINO_POINTS; xi++) {
                const float *v = V + xi * ocr__wino_vps(j, Tp) + pc * 8;
                /* the next chunk's weights, which the transform would otherwise wait for from memory: 48 rows of
                   kc x 9 floats, a 36th of them per point while the products run */
                if (pc + kc < C) {
                    int64_t nxt = C - pc - kc < kcmax ? C - pc - kc : kcmax, kk, e;
                    for (kk = xi; kk < nk; kk += OCR__WINO_POINTS)
                        for (e = 0; e < nxt * 9 + 16; e += 16)
                            _mm_prefetch((const char *)(j->w + (k0 + kk) * C * 9 + (pc + kc) * 9 + e), _MM_HINT_T1);
                }
                for (rb = 0; rb < Tr; rb += 8) fn(kc, v + rb * C, u + xi * ups, mt + (xi * Tr + rb) * 48, 48, 1.0f);
            }
        }
        for (xi = 0; xi < OCR__WINO_POINTS; xi++) {
            float *m = M + xi * ocr__wino_mps(j, Tp) + k0 * Tp;
            const float *s = mt + xi * Tr * 48;
            for (k = 0; k + 16 <= nk; k += 16)
                for (t = 0; t < Tr; t += 16) ocr__transpose16(s + t * 48 + k, 48, m + k * Tp + t, Tp);
            for (; k < nk; k++)
                for (t = 0; t < Tr; t++) m[k * Tp + t] = s[t * 48 + k];
        }
    }
}

/* Tiles t0..t0+15 of an item taken 16 at a time in any layout (tile rows from th0; lanes past T repeat t0): returns
   the offset of each tile's first output in its plane, and sets valid[a*4+b] to the lanes whose output (a, b) of the
   4x4 tile lies inside the OH x OW plane. */
__attribute__((target("avx512f")))
static __m512i ocr__wino_tile_lanes(const ocr__wino_job *j, int64_t th0, int64_t t0, int64_t T, __mmask16 valid[16]) {
    int32_t ol[16], rl[16], cl[16];
    __m512i oh, ow;
    int i;
    for (i = 0; i < 16; i++) {
        int64_t t = t0 + i < T ? t0 + i : t0;
        rl[i] = (int32_t)((th0 + t / j->TW) * 4);
        cl[i] = (int32_t)((t % j->TW) * 4);
        ol[i] = (int32_t)(rl[i] * j->g->OW + cl[i]);
    }
    oh = _mm512_loadu_si512(rl); ow = _mm512_loadu_si512(cl);
    for (i = 0; i < 16; i++)
        valid[i] = (__mmask16)(ocr__lanes(T - t0) &
                               _mm512_cmplt_epi32_mask(_mm512_add_epi32(oh, _mm512_set1_epi32(i / 4)), _mm512_set1_epi32((int)j->g->OH)) &
                               _mm512_cmplt_epi32_mask(_mm512_add_epi32(ow, _mm512_set1_epi32(i % 4)), _mm512_set1_epi32((int)j->g->OW)));
    return _mm512_loadu_si512(ol);
}

/* The 4 output columns of 16 side-by-side tiles (o[c], lane l: tile l's column c) as 64 floats in row order: rv[v]
   holds tiles 4v .. 4v+3, 4 columns each */
__attribute__((target("avx512f"), always_inline))
static inline void ocr__wino_interleave16(const __m512 o[4], __m512 rv[4]) {
    const __m512i pair = _mm512_setr_epi32(0, 16, 1, 17, 2, 18, 3, 19, 4, 20, 5, 21, 6, 22, 7, 23);
    const __m512i quad = _mm512_setr_epi32(0, 1, 16, 17, 2, 3, 18, 19, 4, 5, 20, 21, 6, 7, 22, 23);
    const __m512i eight = _mm512_set1_epi32(8);
    __m512 lo01 = _mm512_permutex2var_ps(o[0], pair, o[1]), hi01 = _mm512_permutex2var_ps(o[0], _mm512_add_epi32(pair, eight), o[1]);
    __m512 lo23 = _mm512_permutex2var_ps(o[2], pair, o[3]), hi23 = _mm512_permutex2var_ps(o[2], _mm512_add_epi32(pair, eight), o[3]);
    rv[0] = _mm512_permutex2var_ps(lo01, quad, lo23);
    rv[1] = _mm512_permutex2var_ps(lo01, _mm512_add_epi32(quad, eight), lo23);
    rv[2] = _mm512_permutex2var_ps(hi01, quad, hi23);
    rv[3] = _mm512_permutex2var_ps(hi01, _mm512_add_epi32(quad, eight), hi23);
}

/* v, outputs of channel k, into the lanes mk of y: added to y (accumulate), or its bias added, then the residual and
   the ReLU or the ReLU alone, as the ops compute them */
__attribute__((target("avx512f"), always_inline))
static inline void ocr__wino_store_out(const ocr__wino_job *j, int64_t k, __m512 v, __mmask16 mk, float *y) {
    if (j->accumulate) v = _mm512_add_ps(v, _mm512_maskz_loadu_ps(mk, y));
    else {
        if (j->ep.bias) v = _mm512_add_ps(v, _mm512_set1_ps(j->ep.bias[k]));
        if (j->ep.res) /* as the ReLU op: max(0, v) keeps a NaN */
            v = _mm512_max_ps(_mm512_setzero_ps(), _mm512_add_ps(v, _mm512_maskz_loadu_ps(mk, j->ep.res + (y - j->ep.y0))));
        else if (j->ep.relu) v = _mm512_max_ps(v, _mm512_setzero_ps());
    }
    _mm512_mask_storeu_ps(y, mk, v);
}

/* Output channels [k0, k1) of an item: At M A of every tile, bias and ReLU (when not accumulating), stored into y's rows. */
__attribute__((target("avx512f")))
static void ocr__wino_output(const ocr__wino_job *j, int64_t item, float *buf, int64_t k0, int64_t k1) {
    const ocr__conv_geom *g = j->g;
    int64_t n, th0, col0, T, Tp, k, t0, i, a, P = g->OH * g->OW;
    const float *M = buf + j->pad_floats + j->v_floats;
    ocr__wino_item_span(j, item, &n, &th0, &col0, &T, &Tp);
    if (j->TW >= 16) {
        /* rows of at least 16 tiles: 16 side-by-side tiles' outputs are 4 rows of 64 contiguous floats, interleaved
           with permutes and written with (masked) row stores */
        for (t0 = -col0; t0 < T; t0 += j->TW) { /* t0: the item's index of the tile row's first tile */
            int64_t tc0, tc1 = T - t0 < j->TW ? T - t0 : j->TW, oh0 = (th0 + (t0 + col0) / j->TW) * 4;
            for (tc0 = t0 < 0 ? col0 : 0; tc0 < tc1; tc0 += 16) {
                int64_t nl = tc1 - tc0 < 16 ? tc1 - tc0 : 16, t = t0 + tc0, cols = g->OW - tc0 * 4;
                __mmask16 lm = ocr__lanes(nl);
                cols = cols < 4 * nl ? cols : 4 * nl;
                for (k = k0; k < k1; k++) {
                    const float *m = M + k * Tp + t;
                    float *yk = j->y + (n * g->K + k) * P + tc0 * 4;
                    __m512 q[24], o[4];
                    if (k + 1 < k1) /* the next channel's rows lie a plane away, where the hardware's prefetch does not
                                       look: its output lines (and residual's) fetched while this one computes */
                        for (a = 0; a < 4 && oh0 + a < g->OH; a++) {
                            const float *yn = yk + P + (oh0 + a) * g->OW;
                            int64_t f;
                            for (f = 0; f < cols; f += 16) __builtin_prefetch(yn + f, 1, 3);
                            if (j->ep.res && !j->accumulate) ocr__prefetch_floats(j->ep.res + (yn - j->ep.y0), cols);
                        }
                    OCR__WINO_AT_COLUMNS(_mm512, __m512, OCR__WINO_LOAD16_LM, m, ocr__wino_mps(j, Tp), 6 * ocr__wino_mps(j, Tp), q);
                    for (a = 0; a < 4 && oh0 + a < g->OH; a++) {
                        __m512 rv[4];
                        float *yr = yk + (oh0 + a) * g->OW;
                        OCR__WINO_AT(_mm512, __m512, q[a], q[4 + a], q[8 + a], q[12 + a], q[16 + a], q[20 + a], o);
                        ocr__wino_interleave16(o, rv);
                        for (i = 0; i < 4; i++) {
                            __mmask16 mk = ocr__lanes(cols - 16 * i);
                            if (!mk) break;
                            ocr__wino_store_out(j, k, rv[i], mk, yr + 16 * i);
                        }
                    }
                }
            }
        }
        return;
    }
    /* Rows of fewer than 16 tiles: a group of 16 tiles spans tile rows. Its outputs are interleaved as above into 4
       rows of 64 floats (16 tiles x 4 columns) and written as runs, each the tiles of one tile row side by side,
       contiguous in every output row (scatters, one per output column, took as long as the GEMMs' products of
       layer3's 256 channels at 40x40). */
    for (t0 = 0; t0 < T; t0 += 16) {
        const __m512i iota = _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
        int64_t run_first[16], run_off[16], run_oh[16], run_cols[16], l = 0, nt = T - t0 < 16 ? T - t0 : 16;
        int n_runs = 0, rn;
        while (l < nt) { /* run: tiles l .. l + cnt - 1 of the group, in one tile row */
            int64_t t = col0 + t0 + l, oh = (th0 + t / j->TW) * 4, ow = (t % j->TW) * 4, cnt = j->TW - t % j->TW;
            cnt = cnt < nt - l ? cnt : nt - l;
            run_first[n_runs] = 4 * l;
            run_off[n_runs] = oh * g->OW + ow;
            run_oh[n_runs] = oh;
            run_cols[n_runs] = 4 * cnt < g->OW - ow ? 4 * cnt : g->OW - ow;
            n_runs++;
            l += cnt;
        }
        for (k = k0; k < k1; k++) {
            const float *m = M + k * Tp + t0;
            float *yk = j->y + (n * g->K + k) * P;
            __m512 q[24], o[4];
            OCR__WINO_AT_COLUMNS(_mm512, __m512, OCR__WINO_LOAD16, m, ocr__wino_mps(j, Tp), 6 * ocr__wino_mps(j, Tp), q);
            for (a = 0; a < 4; a++) {
                __m512 rv[5];
                OCR__WINO_AT(_mm512, __m512, q[a], q[4 + a], q[8 + a], q[12 + a], q[16 + a], q[20 + a], o);
                ocr__wino_interleave16(o, rv);
                rv[4] = _mm512_setzero_ps();
                for (rn = 0; rn < n_runs; rn++) {
                    float *yr = yk + run_off[rn] + a * g->OW;
                    if (run_oh[rn] + a >= g->OH) continue;
                    for (i = 0; i < run_cols[rn]; i += 16) {
                        int64_t f = run_first[rn] + i, vi = f / 16, sh = f % 16;
                        __mmask16 mk = ocr__lanes(run_cols[rn] - i);
                        ocr__wino_store_out(j, k, sh ? _mm512_permutex2var_ps(rv[vi], _mm512_add_epi32(iota, _mm512_set1_epi32((int)sh)), rv[vi + 1]) : rv[vi],
                                            mk, yr + i);
                    }
                }
            }
        }
    }
}

/* ---- The same transforms on AVX2 (8 lanes, the 6 x 16 micro-kernel), for the CPUs without AVX-512: forward, data
   and weight gradients as above. Tiles go 8 at a time along a tile row. A tile's 4
   columns are 4 floats, so the vector of the halves at tiles (t, t+4) transposes per 128-bit lane with those at
   (t+1, t+5), (t+2, t+6) and (t+3, t+7) into columns 0-3 of tiles t..t+7 in order, and back the same way. */

/* lo's 4 floats in lanes 0-3, hi's in 4-7 */
__attribute__((target("avx2")))
static inline __m256 ocr__halves(const float *lo, const float *hi) {
    return _mm256_insertf128_ps(_mm256_castps128_ps256(_mm_loadu_ps(lo)), _mm_loadu_ps(hi), 1);
}
/* in each 128-bit lane, the 4x4 transpose of (a, b, c, d) into o[0..3] */
#define OCR__TRANSPOSE4_LANES(a, b, c, d, o)                                                                     \
    do {                                                                                                         \
        __m256 t0_ = _mm256_unpacklo_ps(a, b), t1_ = _mm256_unpacklo_ps(c, d);                                   \
        __m256 t2_ = _mm256_unpackhi_ps(a, b), t3_ = _mm256_unpackhi_ps(c, d);                                   \
        (o)[0] = _mm256_shuffle_ps(t0_, t1_, 0x44); (o)[1] = _mm256_shuffle_ps(t0_, t1_, 0xEE);                  \
        (o)[2] = _mm256_shuffle_ps(t2_, t3_, 0x44); (o)[3] = _mm256_shuffle_ps(t2_, t3_, 0xEE);                  \
    } while (0)

/* ocr__wino_g_store_avx512 on 8 lanes (6 in use): each point stored as it is made, 8 floats where the 2 past the
   panel's 6 belong to the next input channel's block (written after it), 6 masked for the panel's last channel. Zen 3
   runs masked stores slowly: with one per point and channel they took a third of layer4's convolutions. */
__attribute__((target("avx2,fma"), always_inline))
static inline void ocr__wino_g_store_avx2(const __m256 gv[9], float *d, int64_t stride, int last) {
    const __m256i store6 = ocr__lanes8(6);
    __m256 c0[6], c1[6], c2[6];
    OCR__WINO_G(_mm256, __m256, gv[0], gv[3], gv[6], c0);
    OCR__WINO_G(_mm256, __m256, gv[1], gv[4], gv[7], c1);
    OCR__WINO_G(_mm256, __m256, gv[2], gv[5], gv[8], c2);
#define OCR__WINO_G_ROW(r)                                                                                      \
    do {                                                                                                      \
        __m256 o_[6];                                                                                         \
        float *dr_ = d + 6 * (r) * stride;                                                                    \
        int s_;                                                                                               \
        OCR__WINO_G(_mm256, __m256, c0[r], c1[r], c2[r], o_);                                                 \
        for (s_ = 0; s_ < 6; s_++)                                                                            \
            if (last) _mm256_maskstore_ps(dr_ + s_ * stride, store6, o_[s_]);                                 \
            else _mm256_storeu_ps(dr_ + s_ * stride, o_[s_]);                                                 \
    } while (0)
    OCR__WINO_G_ROW(0); OCR__WINO_G_ROW(1); OCR__WINO_G_ROW(2); OCR__WINO_G_ROW(3); OCR__WINO_G_ROW(4); OCR__WINO_G_ROW(5);
#undef OCR__WINO_G_ROW
}

/* Panel p (output channels 6p .. 6p + 5) of every point as a 6-row A panel: point xi's block at dst + xi *
   point_stride, element (k, c) at c * 6 + k % 6 in it (rows past K get zeros). A vector holds the panel's 6 output
   channels of one input channel. A full panel's taps 0-7 come from an 8 x 8 register transpose of its rows (gathers,
   9 per channel, cost more), tap 8 from six loads; the last, partial panel gathers. */
__attribute__((target("avx2,fma")))
static void ocr__wino_filter_panel_avx2(const ocr__wino_job *j, int64_t p, float *dst, int64_t point_stride) {
    const int64_t C = j->g->C, K = j->g->K, lds = C * 9;
    const __m256i idx = _mm256_mullo_epi32(_mm256_setr_epi32(0, 1, 2, 3, 4, 5, 0, 0), _mm256_set1_epi32((int)lds));
    const int full = K - p * 6 >= 6;
    const __m256 valid = _mm256_castsi256_ps(ocr__lanes8(K - p * 6));
    int64_t c, i;
    for (c = 0; c < C; c++) {
        const float *w0 = j->w + (p * 6 * C + c) * 9;
        __m256 gv[9];
        if (full) {
            ocr__transpose8_cols(w0, lds, 1, gv);
            gv[8] = _mm256_setr_ps(w0[8], w0[lds + 8], w0[2 * lds + 8], w0[3 * lds + 8], w0[4 * lds + 8], w0[5 * lds + 8], 0.0f, 0.0f);
        } else {
            for (i = 0; i < 9; i++) gv[i] = _mm256_mask_i32gather_ps(_mm256_setzero_ps(), w0 + i, idx, valid, 4);
        }
        ocr__wino_g_store_avx2(gv, dst + c * 6, point_stride, c == C - 1);
    }
}

/* G w Gt into the 6-row A panels: element (k, c) of point xi at u[xi*ups + (k - k%6)*C + c*6 + k%6]. Work items
   are panels. */
static void ocr__wino_filter_part_avx2(void *arg, int64_t begin, int64_t end, int tid) {
    const ocr__wino_job *j = (const ocr__wino_job *)arg;
    int64_t p;
    (void)tid;
    for (p = begin; p < end; p++) ocr__wino_filter_panel_avx2(j, p, j->u + p * 6 * j->g->C, ocr__wino_ups(j, 0));
}

/* Input channels [c0, c1) of an item: Bt d B of every tile into V's 16-tile B panels [36][Tp/16][C][16], or for the
   weight gradient plain rows [36][C][Tp]. */
__attribute__((target("avx2,fma")))
static void ocr__wino_input_avx2(const ocr__wino_job *j, int64_t item, float *buf, int64_t c0, int64_t c1) {
    const ocr__conv_geom *g = j->g;
    int64_t n, th0, T, Tp, c, r, t0, tc0, i, Wp = j->Wp, pw, vps;
    float *V = buf + j->pad_floats;
    ocr__wino_item_range(j, item, &n, &th0, &T, &Tp);
    vps = ocr__wino_vps(j, Tp);
    pw = j->wgrad ? Tp : 16;
    for (c = c0; c < c1; c++) {
        const float *src = ocr__wino_pad_rows(j, buf, n, th0, 0, T, c);
        for (t0 = 0; t0 < T; t0 += j->TW)
            for (tc0 = 0; tc0 < j->TW; tc0 += 8) {
                /* a partial group's loads run past its row (at most into the band's slack): those lanes are not stored */
                int64_t nl = j->TW - tc0 < 8 ? j->TW - tc0 : 8, t = t0 + tc0, q = t % pw;
                float *grp = V + (t / pw) * g->C * pw + c * pw + q;
                __m256 e[36], o[6];
                for (i = 0; i < 6; i++) {
                    const float *row = src + ((t0 / j->TW) * 4 + i) * Wp + tc0 * 4;
                    __m256 h0 = ocr__halves(row, row + 16), h1 = ocr__halves(row + 4, row + 20), h2 = ocr__halves(row + 8, row + 24);
                    __m256 h3 = ocr__halves(row + 12, row + 28), h4 = ocr__halves(row + 16, row + 32), d[4], d45[4];
                    OCR__TRANSPOSE4_LANES(h0, h1, h2, h3, d);
                    OCR__TRANSPOSE4_LANES(h1, h2, h3, h4, d45); /* columns 4 and 5 are the next tile's 0 and 1 */
                    OCR__WINO_BT(_mm256, __m256, d[0], d[1], d[2], d[3], d45[0], d45[1], e + i * 6);
                }
                for (i = 0; i < 6; i++) {
                    OCR__WINO_BT(_mm256, __m256, e[i], e[6 + i], e[12 + i], e[18 + i], e[24 + i], e[30 + i], o);
                    if (nl == 8 && q + 8 <= pw) { /* the usual case: whole stores, their addresses found once per group */
                        for (r = 0; r < 6; r++) _mm256_storeu_ps(grp + (r * 6 + i) * vps, o[r]);
                        continue;
                    }
                    for (r = 0; r < 6; r++) {
                        float *plane = V + (r * 6 + i) * vps, *dst = plane + (t / pw) * g->C * pw + c * pw + q;
                        if (q + nl <= pw) _mm256_maskstore_ps(dst, ocr__lanes8(nl), o[r]);
                        else { /* the group crosses into the next panel: its last lanes go to that panel's first columns */
                            int first = (int)(16 - q);
                            __m256i shift = _mm256_add_epi32(_mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7), _mm256_set1_epi32(first));
                            _mm256_maskstore_ps(dst, ocr__lanes8(first), o[r]);
                            _mm256_maskstore_ps(plane + (t / 16 + 1) * g->C * 16 + c * 16, ocr__lanes8(nl - first), _mm256_permutevar8x32_ps(o[r], shift));
                        }
                    }
                }
            }
        if (T < Tp && !j->wgrad) /* the last panel's unused columns: zeros, not whatever the buffer held */
            for (i = 0; i < OCR__WINO_POINTS; i++) {
                float *dst = V + i * ocr__wino_vps(j, Tp) + (T / 16) * g->C * 16 + c * 16 + T % 16;
                for (r = 0; r < Tp - T; r += 8) _mm256_maskstore_ps(dst + r, ocr__lanes8(Tp - T - r), _mm256_setzero_ps());
            }
    }
}

/* Output channels [k0, k1) of an item: At M A of every tile, bias and ReLU (when not accumulating), row stores into y. */
__attribute__((target("avx2,fma")))
static void ocr__wino_output_avx2(const ocr__wino_job *j, int64_t item, float *buf, int64_t k0, int64_t k1) {
    const ocr__conv_geom *g = j->g;
    int64_t n, th0, T, Tp, k, t0, tc0, i, a, P = g->OH * g->OW, st;
    const float *M = buf + j->pad_floats + j->v_floats;
    ocr__wino_item_range(j, item, &n, &th0, &T, &Tp);
    st = 6 * ocr__wino_mps(j, Tp);
    for (t0 = 0; t0 < T; t0 += j->TW) {
        int64_t oh0 = (th0 + t0 / j->TW) * 4;
        for (tc0 = 0; tc0 < j->TW; tc0 += 8) {
            int64_t nl = j->TW - tc0 < 8 ? j->TW - tc0 : 8, t = t0 + tc0, cols = g->OW - tc0 * 4;
            __m256i lm = ocr__lanes8(nl);
            cols = cols < 4 * nl ? cols : 4 * nl;
            for (k = k0; k < k1; k++) {
                const float *m = M + k * Tp + t;
                float *yk = j->y + (n * g->K + k) * P + tc0 * 4;
                __m256 q[24], o[4];
                OCR__WINO_AT_COLUMNS(_mm256, __m256, OCR__WINO_LOAD8_LM, m, ocr__wino_mps(j, Tp), st, q);
                for (a = 0; a < 4 && oh0 + a < g->OH; a++) {
                    __m256 r[4], rv[4];
                    float *yr = yk + (oh0 + a) * g->OW;
                    OCR__WINO_AT(_mm256, __m256, q[a], q[4 + a], q[8 + a], q[12 + a], q[16 + a], q[20 + a], o);
                    OCR__TRANSPOSE4_LANES(o[0], o[1], o[2], o[3], r); /* r[i]: tiles i and i+4, 4 outputs each */
                    rv[0] = _mm256_permute2f128_ps(r[0], r[1], 0x20); rv[1] = _mm256_permute2f128_ps(r[2], r[3], 0x20);
                    rv[2] = _mm256_permute2f128_ps(r[0], r[1], 0x31); rv[3] = _mm256_permute2f128_ps(r[2], r[3], 0x31);
                    for (i = 0; i < 4 && cols > 8 * i; i++) {
                        __m256i mk = ocr__lanes8(cols - 8 * i);
                        __m256 v = rv[i];
                        if (j->accumulate) v = _mm256_add_ps(v, _mm256_maskload_ps(yr + 8 * i, mk));
                        else {
                            if (j->ep.bias) v = _mm256_add_ps(v, _mm256_set1_ps(j->ep.bias[k]));
                            if (j->ep.res) /* as the ReLU op: max(0, v) keeps a NaN */
                                v = _mm256_max_ps(_mm256_setzero_ps(), _mm256_add_ps(v, _mm256_maskload_ps(j->ep.res + (yr + 8 * i - j->ep.y0), mk)));
                            else if (j->ep.relu) v = _mm256_max_ps(v, _mm256_setzero_ps());
                        }
                        _mm256_maskstore_ps(yr + 8 * i, mk, v);
                    }
                }
            }
        }
    }
}

/* Weight gradient, the adjoint of the forward: dw += Gt [ sum over tiles of (A dy At) . (Bt x B) ] G, where A dy At
   maps a 4x4 output-gradient tile to the 36 points. Output channels [k0, k1) of an item: A dy At of every tile into
   plain rows [36][K][Tp] (zeros outside the image). */
#define OCR__WINO_A(P, T, y0, y1, y2, y3, o) /* out[r] = sum_i A[r][i] y_i for A = At transposed */            \
    do {                                                                                                         \
        T s02_ = P##_add_ps(y0, y2), s13_ = P##_add_ps(y1, y3);                                                  \
        T p_ = P##_fmadd_ps(P##_set1_ps(4.0f), y2, y0), q_ = P##_fmadd_ps(P##_set1_ps(8.0f), y3, P##_add_ps(y1, y1)); \
        (o)[0] = y0; (o)[1] = P##_add_ps(s02_, s13_); (o)[2] = P##_sub_ps(s02_, s13_);                          \
        (o)[3] = P##_add_ps(p_, q_); (o)[4] = P##_sub_ps(p_, q_); (o)[5] = y3;                                   \
    } while (0)
__attribute__((target("avx512f")))
static void ocr__wino_dy(const ocr__wino_job *j, int64_t item, float *buf, int64_t k0, int64_t k1) {
    const ocr__conv_geom *g = j->g;
    int64_t n, th0, T, Tp, k, t0, i, r, P = g->OH * g->OW;
    float *D = buf + j->pad_floats + j->v_floats;
    const __m512i sel0 = _mm512_setr_epi32(0, 4, 8, 12, 16, 20, 24, 28, 0, 0, 0, 0, 0, 0, 0, 0);
    ocr__wino_item_range(j, item, &n, &th0, &T, &Tp);
    for (k = k0; k < k1; k++) {
        const float *yk = j->y + (n * g->K + k) * P;
        for (t0 = 0; t0 < T; t0 += 16) {
            /* a group of 16 tiles: side by side in one tile row (rows of at least 16 tiles), else gathered */
            int64_t tr = t0 / j->TW, tc0 = t0 % j->TW, nl = T - t0 < 16 ? T - t0 : 16, oh0;
            __m512 d[16], e[24], o[6];
            if (j->TW >= 16) {
                nl = j->TW - tc0 < 16 ? j->TW - tc0 : 16;
                oh0 = (th0 + tr) * 4;
                for (i = 0; i < 4; i++) {
                    int64_t cols = g->OW - tc0 * 4 < 4 * nl ? g->OW - tc0 * 4 : 4 * nl;
                    const float *row = yk + (oh0 + i) * g->OW + tc0 * 4;
                    __m512 a[4];
                    for (r = 0; r < 4; r++)
                        a[r] = oh0 + i < g->OH ? _mm512_maskz_loadu_ps(ocr__lanes(cols - 16 * r), row + 16 * r) : _mm512_setzero_ps();
                    for (r = 0; r < 4; r++) {
                        __m512i sel = _mm512_add_epi32(sel0, _mm512_set1_epi32((int)r));
                        d[i * 4 + r] = _mm512_shuffle_f32x4(_mm512_permutex2var_ps(a[0], sel, a[1]), _mm512_permutex2var_ps(a[2], sel, a[3]), 0x44);
                    }
                }
            } else {
                __mmask16 valid[16];
                __m512i base = ocr__wino_tile_lanes(j, th0, t0, T, valid);
                for (i = 0; i < 16; i++)
                    d[i] = _mm512_mask_i32gather_ps(_mm512_setzero_ps(), valid[i], _mm512_add_epi32(base, _mm512_set1_epi32((int)((i / 4) * g->OW + i % 4))), yk, 4);
            }
            for (i = 0; i < 4; i++) OCR__WINO_A(_mm512, __m512, d[i * 4], d[i * 4 + 1], d[i * 4 + 2], d[i * 4 + 3], e + i * 6);
            for (i = 0; i < 6; i++) {
                OCR__WINO_A(_mm512, __m512, e[i], e[6 + i], e[12 + i], e[18 + i], o);
                for (r = 0; r < 6; r++) _mm512_mask_storeu_ps(D + (r * 6 + i) * ocr__wino_mps(j, Tp) + k * Tp + t0, ocr__lanes(nl), o[r]);
            }
            if (j->TW >= 16) t0 += nl - 16; /* the next group starts the next tile row */
        }
    }
}

/* Points [xi0, xi1) of an item: mw[xi] += D[xi] V[xi]^T (a GEMM over the tiles, on the calling thread); the first
   item stores its sums instead, so mw is never zeroed: with few tiles (layer4's 512 x 512 at 20x20 is one item of 25)
   mw's 36 K C floats are the traffic, and zeroing them and reading the zeros back took a quarter of the time. */
static void ocr__wino_wgemm(const ocr__wino_job *j, int64_t item, float *buf, int64_t xi0, int64_t xi1, int tid, float *mw, int first) {
    int64_t n, th0, T, Tp, xi, C = j->g->C, K = j->g->K;
    const float *V = buf + j->pad_floats, *D = V + j->v_floats;
    float *pa = j->gemm_buf + (size_t)tid * (j->gemm_pa + j->gemm_pb);
    ocr__wino_item_range(j, item, &n, &th0, &T, &Tp);
    for (xi = xi0; xi < xi1; xi++)
        ocr__gemm_serial(&j->uk, 0, 1, K, C, T, 1.0f, D + xi * ocr__wino_mps(j, Tp), Tp, V + xi * ocr__wino_vps(j, Tp), Tp, first ? 0.0f : 1.0f, mw + xi * K * C, C,
                         pa, pa + j->gemm_pa);
}

/* Output channels [k0, k1): dw[k, c] += Gt W G with W the 36 sums of (k, c), 16 input channels per vector.
   Gt = [1/4 -1/6 -1/6 1/24 1/24 0; 0 -1/6 1/6 1/12 -1/12 0; 0 -1/6 -1/6 1/6 1/6 1] */
#define OCR__WINO_GT(P, T, x0, x1, x2, x3, x4, x5, o)                                                            \
    do {                                                                                                         \
        T s12_ = P##_add_ps(x1, x2), s34_ = P##_add_ps(x3, x4);                                                  \
        T m6_ = P##_set1_ps(-1.0f / 6);                                                                          \
        (o)[0] = P##_fmadd_ps(P##_set1_ps(0.25f), x0, P##_fmadd_ps(m6_, s12_, P##_mul_ps(P##_set1_ps(1.0f / 24), s34_))); \
        (o)[1] = P##_fmadd_ps(m6_, P##_sub_ps(x1, x2), P##_mul_ps(P##_set1_ps(1.0f / 12), P##_sub_ps(x3, x4)));   \
        (o)[2] = P##_add_ps(P##_fmadd_ps(m6_, s12_, P##_mul_ps(P##_set1_ps(1.0f / 6), s34_)), x5);              \
    } while (0)
/* dw[k, c0 + l] += out[i][l] for the lanes (of `lanes`) that are input channels; out is [9][lanes] */
static void ocr__wino_wfinal_add(const ocr__wino_job *j, int64_t k, int64_t c0, int lanes, const float *out) {
    int64_t C = j->g->C, l, i;
    for (l = 0; l < lanes && c0 + l < C; l++)
        for (i = 0; i < 9; i++) j->dw[(k * C + c0 + l) * 9 + i] += out[i * lanes + l];
}
/* The weight gradient's final Gt W G over output channels [k0, k1), LANES input channels a vector (P, T as the
   transforms'); LOAD(ptr) reads the input channels from c0 on, zero past C. Written once for both vector widths. */
#define OCR__WINO_WFINAL(P, T, LANES, LOAD)                                                                      \
    do {                                                                                                         \
        const ocr__wino_job *j = (const ocr__wino_job *)arg;                                                     \
        int64_t C = j->g->C, KC = j->g->K * C, k, c0, i, r;                                                      \
        (void)tid;                                                                                               \
        for (k = k0; k < k1; k++)                                                                                \
            for (c0 = 0; c0 < C; c0 += LANES) {                                                                  \
                const float *w = j->mw + k * C + c0;                                                             \
                T t[18], o[3];                                                                                   \
                float out[9][LANES];                                                                             \
                for (i = 0; i < 6; i++) { /* column i of Gt W */                                                 \
                    OCR__WINO_GT(P, T, LOAD(w + i * KC), LOAD(w + (6 + i) * KC), LOAD(w + (12 + i) * KC),          \
                                 LOAD(w + (18 + i) * KC), LOAD(w + (24 + i) * KC), LOAD(w + (30 + i) * KC), o);    \
                    for (r = 0; r < 3; r++) t[r * 6 + i] = o[r];                                                 \
                }                                                                                                \
                for (r = 0; r < 3; r++) {                                                                        \
                    OCR__WINO_GT(P, T, t[r * 6], t[r * 6 + 1], t[r * 6 + 2], t[r * 6 + 3], t[r * 6 + 4], t[r * 6 + 5], o); \
                    for (i = 0; i < 3; i++) P##_storeu_ps(out[r * 3 + i], o[i]);                                 \
                }                                                                                                \
                ocr__wino_wfinal_add(j, k, c0, LANES, out[0]);                                                   \
            }                                                                                                    \
    } while (0)
#define OCR__WINO_LOAD16_CH(ptr) _mm512_maskz_loadu_ps(ocr__lanes(C - c0), ptr)
__attribute__((target("avx512f")))
static void ocr__wino_wfinal_part(void *arg, int64_t k0, int64_t k1, int tid) { OCR__WINO_WFINAL(_mm512, __m512, 16, OCR__WINO_LOAD16_CH); }

/* The weight gradient's transforms on AVX2: output-gradient tiles 8 at a time along a tile row (loaded as row
   segments and transposed per 128-bit lane, the output transform's steps backwards), and the final Gt W G 8 input
   channels per vector. */
__attribute__((target("avx2,fma")))
static void ocr__wino_dy_avx2(const ocr__wino_job *j, int64_t item, float *buf, int64_t k0, int64_t k1) {
    const ocr__conv_geom *g = j->g;
    int64_t n, th0, T, Tp, k, t0, tc0, i, r, P = g->OH * g->OW;
    float *D = buf + j->pad_floats + j->v_floats;
    ocr__wino_item_range(j, item, &n, &th0, &T, &Tp);
    for (k = k0; k < k1; k++) {
        const float *yk = j->y + (n * g->K + k) * P;
        for (t0 = 0; t0 < T; t0 += j->TW) {
            int64_t oh0 = (th0 + t0 / j->TW) * 4;
            for (tc0 = 0; tc0 < j->TW; tc0 += 8) {
                int64_t nl = j->TW - tc0 < 8 ? j->TW - tc0 : 8, cols = g->OW - tc0 * 4;
                __m256 d[16], e[24], o[6];
                cols = cols < 4 * nl ? cols : 4 * nl;
                for (i = 0; i < 4; i++) { /* row i of the 8 tiles: a[q] holds tiles 2q and 2q+1 */
                    const float *row = yk + (oh0 + i) * g->OW + tc0 * 4;
                    __m256 a[4], h[4];
                    for (r = 0; r < 4; r++) a[r] = oh0 + i < g->OH ? _mm256_maskload_ps(row + 8 * r, ocr__lanes8(cols - 8 * r)) : _mm256_setzero_ps();
                    h[0] = _mm256_permute2f128_ps(a[0], a[2], 0x20); h[1] = _mm256_permute2f128_ps(a[0], a[2], 0x31);
                    h[2] = _mm256_permute2f128_ps(a[1], a[3], 0x20); h[3] = _mm256_permute2f128_ps(a[1], a[3], 0x31);
                    OCR__TRANSPOSE4_LANES(h[0], h[1], h[2], h[3], d + i * 4);
                }
                for (i = 0; i < 4; i++) OCR__WINO_A(_mm256, __m256, d[i * 4], d[i * 4 + 1], d[i * 4 + 2], d[i * 4 + 3], e + i * 6);
                for (i = 0; i < 6; i++) {
                    OCR__WINO_A(_mm256, __m256, e[i], e[6 + i], e[12 + i], e[18 + i], o);
                    for (r = 0; r < 6; r++) _mm256_maskstore_ps(D + (r * 6 + i) * ocr__wino_mps(j, Tp) + k * Tp + t0 + tc0, ocr__lanes8(nl), o[r]);
                }
            }
        }
    }
}
#define OCR__WINO_LOAD8_CH(ptr) _mm256_maskload_ps(ptr, ocr__lanes8(C - c0))
__attribute__((target("avx2,fma")))
static void ocr__wino_wfinal_part_avx2(void *arg, int64_t k0, int64_t k1, int tid) { OCR__WINO_WFINAL(_mm256, __m256, 8, OCR__WINO_LOAD8_CH); }
static void ocr__wino_dy_part(void *arg, int64_t b, int64_t e, int tid) { const ocr__wino_job *j = (const ocr__wino_job *)arg; (void)tid; j->dy(j, j->item, j->buf[0], b, e); }
static void ocr__wino_wgemm_part(void *arg, int64_t b, int64_t e, int tid) { const ocr__wino_job *j = (const ocr__wino_job *)arg; ocr__wino_wgemm(j, j->item, j->buf[0], b, e, tid, j->mw, j->item == 0); }
/* Group g of the weight gradient's items, whole on one thread: its sums in the g-th block of mw */
static void ocr__wino_wgroup_part(void *arg, int64_t g0, int64_t g1, int tid) {
    const ocr__wino_job *j = (const ocr__wino_job *)arg;
    int64_t grp, item;
    for (grp = g0; grp < g1; grp++) {
        int64_t i0 = grp * j->n_items / j->groups, i1 = (grp + 1) * j->n_items / j->groups;
        float *mw = j->mw + grp * OCR__WINO_POINTS * j->g->K * j->g->C;
        for (item = i0; item < i1; item++) {
            j->input(j, item, j->buf[tid], 0, j->g->C);
            j->dy(j, item, j->buf[tid], 0, j->g->K);
            ocr__wino_wgemm(j, item, j->buf[tid], 0, OCR__WINO_POINTS, tid, mw, item == i0);
        }
    }
}
/* mw's first block += the other groups' blocks, in group order */
static void ocr__wino_wsum_part(void *arg, int64_t b, int64_t e, int tid) {
    const ocr__wino_job *j = (const ocr__wino_job *)arg;
    int64_t n = OCR__WINO_POINTS * j->g->K * j->g->C, grp, i;
    (void)tid;
    for (grp = 1; grp < j->groups; grp++)
        for (i = b; i < e; i++) j->mw[i] += j->mw[grp * n + i];
}

static void ocr__wino_items(void *arg, int64_t begin, int64_t end, int tid) {
    const ocr__wino_job *j = (const ocr__wino_job *)arg;
    int64_t item;
    for (item = begin; item < end; item++) {
        j->input(j, item, j->buf[tid], 0, j->g->C);
        ocr__wino_gemm(j, item, j->buf[tid], 0, OCR__WINO_POINTS);
        j->output(j, item, j->buf[tid], 0, j->g->K);
    }
}
/* One phase of an item (or the weights' transform) over the threads: in chunks of about an eighth of a thread's
   share, to whichever thread asks next, so that a thread the host holds up for a moment leaves its share to the
   other (each item of a phase, a channel or a point, is computed whole by one thread: the same bits). */
static void ocr__wino_phase(ocr_ctx *ctx, int64_t n, ocr_range_fn fn, void *arg) {
    ocr_parallel_for_dynamic(ctx, n, (n + 8 * ctx->n_threads - 1) / (8 * ctx->n_threads), fn, arg);
}
static void ocr__wino_input_part(void *arg, int64_t b, int64_t e, int tid) { const ocr__wino_job *j = (const ocr__wino_job *)arg; (void)tid; j->input(j, j->item, j->buf[0], b, e); }
static void ocr__wino_gemm_part(void *arg, int64_t b, int64_t e, int tid) { const ocr__wino_job *j = (const ocr__wino_job *)arg; (void)tid; ocr__wino_gemm(j, j->item, j->buf[0], b, e); }
static void ocr__wino_output_part(void *arg, int64_t b, int64_t e, int tid) { const ocr__wino_job *j = (const ocr__wino_job *)arg; (void)tid; j->output(j, j->item, j->buf[0], b, e); }

/* Where ocr__wino_rows_part pays against the 8-row weight panels that each read all of V: up to 96 tiles and C x K
   of 128 x 256 or more (build/bench_winograd's layer4 rows: 640x640 5.1-5.4 -> 3.8-4.0 ms forward, 736x1280
   10.6-10.8 -> 6.8-6.9 ms). With 128 or 64 channels each way, timed alone, the panels were faster: V is small enough
   to read again, and a 48-channel panel per thread leaves little to share out. */
static int ocr__wino_rows_ok(const ocr__conv_geom *g) {
    return ((g->OH + 3) / 4) * ((g->OW + 3) / 4) <= 96 && g->C * g->K >= 128 * 256;
}

/* bench_winograd sets this to time Winograd on every shape it can run, whether or not the rule below picks it. */
static int ocr__winograd_force = 0;

/* for_wgrad: asked for a weight gradient, which has no tiles-as-rows path */
static int ocr__conv_winograd_ok(const ocr_ctx *ctx, const ocr__conv_geom *g, const ocr__ukernel *uk, int for_wgrad) {
    int64_t TH = (g->OH + 3) / 4, TW = (g->OW + 3) / 4, gemm_cols = (TH * TW + uk->nr - 1) / uk->nr * uk->nr;
    int can = (uk->fn == ocr__ukernel_avx512 || uk->fn == ocr__ukernel_avx2) && !(ctx->debug_flags & OCR_DEBUG_NO_WINOGRAD) && g->groups == 1 && g->kh == 3 &&
              g->kw == 3 && g->sh == 1 && g->sw == 1 && g->dh == 1 && g->dw == 1 && g->OH * (g->OW + 8) < ((int64_t)1 << 30);
    if (!can || ocr__winograd_force) return can;
    can = g->C >= OCR__WINO_MIN_IN && g->K >= OCR__WINO_MIN_OUT &&
          g->N * TH * TW >= (g->C >= OCR__WINO_WIDE && g->K >= OCR__WINO_WIDE ? OCR__WINO_MIN_TILES_WIDE : OCR__WINO_MIN_TILES);
    /* AVX2: its transforms take any row as groups of 8 tiles and its direct paths are slower (the 6x16 micro-kernel;
       im2col under 16 columns), so F(4x4, 3x3) pays down to two thirds of the direct products, padded columns counted
       (bench_winograd under OCR_CPU_KERNEL=avx2: 0.45-0.87x the direct forward where this picks it, 64 channels at
       16x16 even; the recognizer's 128 channels at height 2, 100% of the products, 1.35-1.44x) */
    if (uk->fn == ocr__ukernel_avx2) return can && 6 * gemm_cols <= g->OH * g->OW;
    /* one image's tiles as the GEMM's rows (ocr__wino_rows_part), padded to 16, not 48: from 9 tiles with 128
       channels each way, forward and data gradient (build/bench_winograd's 320x320 rows: 256 channels at 20x20 and
       512 at 10x10 0.72-0.76x the direct forward; their weight gradients keep the rule below, which leaves 10x10 on
       the direct path: 1.5x slower on Winograd's) */
    if (!for_wgrad && g->N == 1 && ocr__wino_rows_ok(g) && TH * TW >= 9 && g->C >= 128 && g->K >= 128) return 1;
    return can &&
           /* an image's tiles fill whole 48-column panels of the 36 GEMMs: with few tiles per image the padding
              cancels the saving (36 products per tile for 16 outputs against 9 per output: at most half the direct
              products, counting the padded columns); rows under 16 tiles take the gathered transforms, which need
              64 channels each way to pay. build/bench_winograd times both paths on the models' shapes: the
              recognizer's 3x3 convolutions at heights 8, 4 and 2 took 1.1-4.0x longer on Winograd, DBNet's
              128 channels at 10x10 1.5-2.0x and 32 at 40x40 1.2-1.3x. */
           8 * gemm_cols <= g->OH * g->OW && (TW >= 16 || (g->C >= 64 && g->K >= 64));
}

/* The work split shared by both drivers: tiles, the padded band's row length, bands of tile rows sized so an item's V
   and M (or D) take about budget bytes (or of band rows exactly, when band > 0), and the per-item buffer size (padded
   band | V | M) in *bytes. Kp: output channels padded to what M's rows need. tiles != 0: items are runs of whole
   GEMM panels of tiles instead (tiles of them when > 0, else sized by the budget), whatever rows they start and end
   in. Returns the number of work items, or -1 (error set) when the buffers overflow. */
static int64_t ocr__wino_plan(ocr_ctx *ctx, ocr__wino_job *j, const ocr__conv_geom *g, int64_t Kp, int64_t budget, int64_t band,
                              int64_t tiles, size_t *bytes) {
    int64_t band_tiles_pad;
    j->g = g;
    j->uk = ocr__pick_ukernel(ctx);
    j->input = j->uk.fn == ocr__ukernel_avx512 ? ocr__wino_input : ocr__wino_input_avx2;
    j->output = j->uk.fn == ocr__ukernel_avx512 ? ocr__wino_output : ocr__wino_output_avx2;
    j->dy = j->uk.fn == ocr__ukernel_avx512 ? ocr__wino_dy : ocr__wino_dy_avx2;
    j->TH = (g->OH + 3) / 4; j->TW = (g->OW + 3) / 4;
    j->Kp = Kp;
    j->Wp = (j->TW * 4 + 2 + 15) & ~(int64_t)15; /* rows start on a cache line: whole-line loads in the transforms (1% on 256-to-64 channels at 160x160) */
    j->band = band > 0 ? band : budget / (OCR__WINO_POINTS * (g->C + Kp) * j->TW * (int64_t)sizeof(float));
    j->band = j->band < 1 ? 1 : j->band > j->TH ? j->TH : j->band;
    /* AVX2's 16-tile panels: up to three rows more can end the band at (or near) a panel's edge (736x1280's
       layer4, 10-tile rows: 3 rows in 32 columns instead of 1 row in 16) */
    if (j->uk.nr == 16 && band <= 0) {
        int64_t b;
        for (b = j->band; b <= j->TH && b < j->band + 4; b++)
            if (8 * ((b * j->TW + 15) / 16 * 16 - b * j->TW) <= b * j->TW) { j->band = b; break; }
    }
    /* the GEMMs run over whole panels whatever the band: fill the last one (AVX-512's 48-tile panels, layer3's
       10-tile rows: 4 rows, 40 of 48 columns used, instead of 2 rows and 20) */
    band_tiles_pad = (j->band * j->TW + j->uk.nr - 1) / j->uk.nr * j->uk.nr;
    if (band <= 0) j->band = band_tiles_pad / j->TW > j->TH ? j->TH : band_tiles_pad / j->TW;
    j->n_bands = (j->TH + j->band - 1) / j->band;
    j->item_tiles = 0;
    if (tiles) {
        int64_t all = j->TH * j->TW, nr = j->uk.nr;
        if (tiles < 0) tiles = budget / (OCR__WINO_POINTS * (g->C + Kp) * (int64_t)sizeof(float)) / nr * nr;
        tiles = tiles < nr ? nr : (tiles + nr - 1) / nr * nr;
        j->item_tiles = band_tiles_pad = tiles < all ? tiles : (all + nr - 1) / nr * nr;
        j->n_bands = (all + j->item_tiles - 1) / j->item_tiles;
        j->band = (j->item_tiles + 2 * j->TW - 2) / j->TW; /* the most tile rows an item touches */
        j->band = j->band > j->TH ? j->TH : j->band;
    }
    /* 32 floats past the band: the AVX2 input transform loads 8 tiles' 36 floats whatever the row has left */
    j->pad_floats = (size_t)((g->C * (j->band * 4 + 2) * j->Wp + 32 + 15) & ~(int64_t)15);
    j->v_floats = (size_t)(OCR__WINO_POINTS * (g->C * band_tiles_pad + 16));
    if (!ocr_size_mul(j->pad_floats + j->v_floats + (size_t)(OCR__WINO_POINTS * (Kp * band_tiles_pad + 16)), sizeof(float), bytes)) {
        ocr_error(ctx, OCR_EOVERFLOW, "conv: Winograd buffers too large");
        return -1;
    }
    return g->N * j->n_bands;
}

/* The GEMM columns of a plan's items over one image: each item's tiles rounded up to whole panels. */
static int64_t ocr__wino_padded_tiles(const ocr__wino_job *j) {
    int64_t r, rows, total = 0;
    if (j->item_tiles > 0) return (j->TH * j->TW + j->uk.nr - 1) / j->uk.nr * j->uk.nr;
    for (r = 0; r < j->TH; r += j->band) {
        rows = j->TH - r < j->band ? j->TH - r : j->band;
        total += (rows * j->TW + j->uk.nr - 1) / j->uk.nr * j->uk.nr;
    }
    return total;
}

/* y (= or +=) conv(x, w) by F(4x4, 3x3). Work items are (image, band of tile rows), or on the AVX-512 kernel runs of
   whole panels of an image's tiles where bands would leave more columns empty; with too few items to keep every
   thread on whole items, one image is cut into 2 to 4 bands per thread where that costs nothing, else the items run
   one after another and each of their three phases is spread over the threads. */
static int ocr__conv_winograd(ocr_ctx *ctx, const ocr__conv_geom *g, const float *x, const ocr__cat_input *cat, const float *w, float *y,
                              int accumulate, const ocr__conv_epilogue *ep) {
    ocr__wino_job j;
    int64_t n_items, item, t, parallel_items, panels_apart, tiles_as_rows, whole;
    size_t bytes, u_bytes;
    int mr = ocr__pick_ukernel(ctx).mr; /* M's rows: whole A panels */
    memset(&j, 0, sizeof j);
    j.x = x; j.cat = cat; j.w = w; j.y = y; j.accumulate = accumulate;
    if (ep) j.ep = *ep;
    /* an image of at most two 48-tile panels with many channels (layer4 at 640x640 and 736x1280: 25 and 60 tiles)
       is one item for ocr__wino_rows_part */
    tiles_as_rows = ocr__pick_ukernel(ctx).fn == ocr__ukernel_avx512 && g->N == 1 && ocr__wino_rows_ok(g);
    /* on AVX2 such an image is one item of panels on their own (ocr__wino_panels_part): in bands, all panels'
       transformed weights (38 MB for 512 channels each way) went to memory and came back for each band (512
       channels at 20x20, two threads: 10.0-10.4 -> 4.4 ms) */
    whole = tiles_as_rows || (ocr__pick_ukernel(ctx).fn == ocr__ukernel_avx2 && g->N == 1 && ocr__wino_rows_ok(g));
    if ((n_items = ocr__wino_plan(ctx, &j, g, (g->K + mr - 1) / mr * mr, whole ? (int64_t)1 << 40 : OCR__WINO_BAND_BYTES,
                                  0, 0, &bytes)) < 0)
        return ctx->last_status;
    if (!tiles_as_rows && j.uk.fn == ocr__ukernel_avx512 && !(ctx->debug_flags & OCR_DEBUG_WINO_ROW_BANDS)) {
        /* items of whole 48-tile panels where bands of rows leave panels part empty (rows of 40 tiles: 40 of 48
           columns; two threads, the decoder's 256-to-64 channels at 160x160 10.0 -> 9.2 ms, 64 to 64 2.8 -> 2.5).
           The same sums: a tile's GEMM column sums the same channels in the same order wherever it lies. */
        ocr__wino_job k = j;
        size_t k_bytes;
        int force = (ctx->debug_flags & OCR_DEBUG_WINO_TILE_RUNS) != 0;
        int64_t k_items = ocr__wino_plan(ctx, &k, g, j.Kp, OCR__WINO_BAND_BYTES, 0, force ? 48 : -1, &k_bytes);
        if (k_items < 0) return ctx->last_status;
        if (force || ocr__wino_padded_tiles(&k) < ocr__wino_padded_tiles(&j)) { j = k; bytes = k_bytes; n_items = k_items; }
    }
    parallel_items = !whole && (ctx->n_threads == 1 || n_items >= 4 * ctx->n_threads);
    if (!whole && !parallel_items && g->N == 1 && n_items > 1) {
        /* One image in a few bands: 2 to 4 bands per thread, the first count that adds no padding tiles to the
           GEMMs and keeps each band's buffers within OCR__WINO_SPLIT_BYTES, beat spreading each band's phases over
           the threads (a barrier after each): at 736x1280, width 0.25's layer2 1.09 -> 0.58 ms and layer3 0.88 ->
           0.60-0.74, width 1's decoder 3x3 to 64 channels 3.05 -> 2.24 (alternating, two threads). One band per
           thread lost 3 ms of the whole inference beside ONNX Runtime in bench_infer though faster alone: a thread
           held up had no band left to give away. The bits are the same: every tile is summed over the same
           channels in the same order whatever band it is in. */
        int64_t per, padded = ocr__wino_padded_tiles(&j);
        for (per = 2; per <= 4 && !parallel_items; per++) {
            ocr__wino_job k = j;
            size_t k_bytes;
            int64_t k_items = j.item_tiles ? ocr__wino_plan(ctx, &k, g, j.Kp, 0, 0, (j.TH * j.TW + per * ctx->n_threads - 1) / (per * ctx->n_threads), &k_bytes)
                                           : ocr__wino_plan(ctx, &k, g, j.Kp, 0, (j.TH + per * ctx->n_threads - 1) / (per * ctx->n_threads), 0, &k_bytes);
            if (k_items < 0) return ctx->last_status;
            if (k_items >= 2 * ctx->n_threads && ocr__wino_padded_tiles(&k) <= padded && k_bytes <= (size_t)OCR__WINO_SPLIT_BYTES) {
                j = k; bytes = k_bytes; n_items = k_items; parallel_items = 1;
            }
        }
    }
    /* U: all panels' transformed weights, or (panels on their own: one item of at most 96 tiles) one panel's block
       per thread. Each panel's GEMMs then read all of V (36 x C x tiles), which costs more than U's
       trip to memory and back once the tiles are many (layer3 at 640x640, 100 tiles: 4.4 -> 5.1 ms) or the items are
       (every item transforms the weights again). With the tiles as rows, each thread's chunk of U, its M block and
       its weight transposes. */
    {
        int64_t n0, th0, T0, Tp0, Tr0;
        ocr__wino_item_range(&j, 0, &n0, &th0, &T0, &Tp0);
        panels_apart = !tiles_as_rows && !parallel_items && n_items == 1 && Tp0 <= 96 && (j.uk.fn == ocr__ukernel_avx512 || whole);
        if (tiles_as_rows) {
            j.tiles_as_rows = 1;
            Tr0 = (T0 + 15) / 16 * 16;
            /* chunks of input channels whose transformed weights and the M block take about 640 KB (L2) */
            j.rows_kc = ((640 << 10) / (int64_t)sizeof(float) - OCR__WINO_POINTS * Tr0 * 48) / (OCR__WINO_POINTS * 48) / 8 * 8;
            j.rows_kc = j.rows_kc < 16 ? 16 : j.rows_kc > g->C ? g->C : j.rows_kc;
            j.rows_stride = OCR__WINO_POINTS * (j.rows_kc * 48 + 16 + Tr0 * 48) + (j.rows_kc * 9 + 16) * 16;
        }
    }
    if (!ocr_size_mul(j.tiles_as_rows ? (size_t)ctx->n_threads * (size_t)j.rows_stride
                      : (size_t)OCR__WINO_POINTS * (size_t)(panels_apart ? ctx->n_threads * ocr__wino_ups(&j, 1) : ocr__wino_ups(&j, 0)),
                      sizeof(float), &u_bytes))
        return ocr_error(ctx, OCR_EOVERFLOW, "conv: Winograd buffers too large");
    if (!(j.u = (float *)ocr_ctx_scratch(ctx, OCR_SCRATCH_GEMM_A, u_bytes))) return ctx->last_status;
    for (t = 0; t < (parallel_items ? ctx->n_threads : 1); t++)
        if (!(j.buf[t] = (float *)ocr_ctx_scratch(ctx, OCR_SCRATCH_THREAD0 + (int)t, bytes))) return ctx->last_status;
    if (!panels_apart && !j.tiles_as_rows)
        ocr__wino_phase(ctx, j.Kp / j.uk.mr, j.uk.fn == ocr__ukernel_avx512 ? ocr__wino_filter_part : ocr__wino_filter_part_avx2, &j);
    if (parallel_items) {
        ocr_parallel_for_dynamic(ctx, n_items, 1, ocr__wino_items, &j);
        return OCR_OK;
    }
    for (item = 0; item < n_items; item++) {
        j.item = item;
        ocr__wino_phase(ctx, g->C, ocr__wino_input_part, &j);
        if (j.tiles_as_rows) ocr_parallel_for_dynamic(ctx, (g->K + 47) / 48, 1, ocr__wino_rows_part, &j);
        else if (panels_apart) ocr__wino_phase(ctx, j.Kp / j.uk.mr, ocr__wino_panels_part, &j);
        else ocr__wino_phase(ctx, OCR__WINO_POINTS, ocr__wino_gemm_part, &j);
        ocr__wino_phase(ctx, g->K, ocr__wino_output_part, &j);
    }
    return OCR_OK;
}
#endif

#ifdef OCR__HAVE_AVX2
/* dw += the weight gradient of y = conv(x, w) given dy, by F(4x4, 3x3): per work item (image, band of tile rows) the
   input and output-gradient transforms, then the 36 sums over its tiles, each phase spread over the threads; the
   sums of all items are transformed back once. */
static int ocr__conv_winograd_wgrad(ocr_ctx *ctx, const ocr__conv_geom *g, const float *x, const float *dy, float *dw) {
    ocr__wino_job j;
    int64_t n_items, item, t;
    size_t bytes, mw_bytes;
    memset(&j, 0, sizeof j);
    j.x = x; j.y = (float *)dy; j.dw = dw; j.wgrad = 1;
    if (!ocr_size_mul((size_t)(OCR__WINO_POINTS * g->K), (size_t)g->C * sizeof(float), &mw_bytes))
        return ocr_error(ctx, OCR_EOVERFLOW, "conv: Winograd buffers too large");
    if ((n_items = ocr__wino_plan(ctx, &j, g, g->K, mw_bytes <= OCR__WINO_WGRAD_GROUP_MW_BYTES ? OCR__WINO_WGRAD_GROUP_BAND_BYTES
                                                                                               : OCR__WINO_WGRAD_BAND_BYTES, 0, 0, &bytes)) < 0)
        return ctx->last_status;
    ocr__gemm_buffer_floats(&j.uk, g->K, g->C, (j.band * j.TW + 47) / 48 * 48, &j.gemm_pa, &j.gemm_pb);
    j.n_items = n_items;
    /* Many items with small sums: the items in OCR__WINO_WGRAD_GROUPS fixed groups (so the sums' order does not
       depend on the thread count), each group whole on one thread into its own copy of mw, the copies added at the
       end, and bands of 2 MB, not 4, since each thread's buffers are its own. Spreading each item's phases over the
       threads instead, two threads ran 1.1-1.2x one: the transforms are memory-bound, and both threads ran them at
       once. Two threads, alternating runs on a shared host (the range is the host's): 256 -> 64 channels at 160x160
       17.7-20.1 -> 11.1-16.2 ms, 64 -> 64 6.0-7.3 -> 4.2-5.6 ms, batch 4 unchanged to 15% faster. With 2 items of
       9 MB sums (layer3) the extra copy cost more than it saved (4.2 -> 5.8 ms), so those keep the phases. */
    j.groups = n_items >= 2 * OCR__WINO_WGRAD_GROUPS && mw_bytes <= OCR__WINO_WGRAD_GROUP_MW_BYTES ? OCR__WINO_WGRAD_GROUPS : 1;
    if (!(j.mw = (float *)ocr_ctx_scratch(ctx, OCR_SCRATCH_GEMM_A, mw_bytes * (size_t)j.groups)) ||
        !(j.gemm_buf = (float *)ocr_ctx_scratch(ctx, OCR_SCRATCH_GEMM_B, (j.gemm_pa + j.gemm_pb) * (size_t)ctx->n_threads * sizeof(float))))
        return ctx->last_status;
    for (t = 0; t < (j.groups > 1 ? ctx->n_threads : 1); t++) /* the phases spread over the threads use thread 0's */
        if (!(j.buf[t] = (float *)ocr_ctx_scratch(ctx, OCR_SCRATCH_THREAD0 + (int)t, bytes))) return ctx->last_status;
    if (j.groups > 1) {
        ocr_parallel_for_dynamic(ctx, j.groups, 1, ocr__wino_wgroup_part, &j);
        ocr_parallel_for(ctx, OCR__WINO_POINTS * g->K * g->C, 4096, ocr__wino_wsum_part, &j);
    } else {
        for (item = 0; item < n_items; item++) {
            j.item = item;
            ocr__wino_phase(ctx, g->C, ocr__wino_input_part, &j);
            ocr__wino_phase(ctx, g->K, ocr__wino_dy_part, &j);
            ocr__wino_phase(ctx, OCR__WINO_POINTS, ocr__wino_wgemm_part, &j);
        }
    }
    ocr__wino_phase(ctx, g->K, j.uk.fn == ocr__ukernel_avx512 ? ocr__wino_wfinal_part : ocr__wino_wfinal_part_avx2, &j);
    return OCR_OK;
}
#endif

/* y (= or +=, per accumulate) conv(x, w), every piece on one thread with its own B panels. A batch too small to
   give each thread a piece is cut into smaller chunks instead. */
static int ocr__conv_forward(ocr_ctx *ctx, const ocr__conv_geom *g, const float *x, const float *w, float *y, int accumulate,
                             const ocr__conv_epilogue *ep) {
    int64_t Cg = g->C / g->groups, Kg = g->K / g->groups, kdim = Cg * g->kh * g->kw, P = g->OH * g->OW, t, kg_pad;
    ocr__conv_fwd_job j;
    float *pa;
    size_t bytes;
    memset(&j, 0, sizeof j);
    j.g = g; j.x = x; j.y = y; j.accumulate = accumulate;
    if (ep) j.ep = *ep;
    j.uk = ocr__pick_ukernel(ctx);
#ifdef OCR__HAVE_AVX2
    if (ocr__conv_winograd_ok(ctx, g, &j.uk, 0)) return ocr__conv_winograd(ctx, g, x, NULL, w, y, accumulate, ep);
    if (ocr__conv_och_ok(g, &j.uk)) return ocr__conv_och(ctx, g, x, w, y, accumulate, ep);
    if (ocr__conv_implicit_ok(g, &j.uk, 1)) return ocr__conv_implicit(ctx, g, x, w, NULL, y, accumulate, ep);
#endif
    j.chunk = ocr__conv_chunk(g);
    j.n_chunks = (P + j.chunk - 1) / j.chunk;
    kg_pad = (Kg + j.uk.mr - 1) / j.uk.mr * j.uk.mr;
    j.w = w; j.kdim = kdim; j.Kg = Kg; j.kg_pad = kg_pad;
    /* No more pieces than threads, more weights than L2 holds, and more of them than a thread's share of the
       panels (more output channels than columns per thread): each thread's piece would stream all of the weights.
       Instead every thread packs a share of the image's panels, then multiplies its share of the output channels with
       all of them (layer4's 3x3/2 at 640x640: 512 x 2304 weights, 400 columns; with 64 channels, the decoder's 3x3
       at 20x20, reading all the panels on each thread took 0.95 ms against 0.65). */
    if (ctx->n_threads > 1 && g->groups == 1 && g->N * j.n_chunks <= ctx->n_threads && Kg * kdim >= (128 << 10) &&
        Kg * ctx->n_threads > P && Kg >= j.uk.mr * ctx->n_threads) {
        int64_t panels = (P + j.uk.nr - 1) / j.uk.nr;
        size_t pb_bytes;
        if (!ocr_size_mul((size_t)(kg_pad * kdim), sizeof(float), &bytes) ||
            !ocr_size_mul((size_t)(panels * j.uk.nr * kdim), sizeof(float), &pb_bytes))
            return ocr_error(ctx, OCR_EOVERFLOW, "conv: work buffers too large");
        if (!(pa = (float *)ocr_ctx_scratch(ctx, OCR_SCRATCH_GEMM_A, bytes)) ||
            !(j.pb[0] = (float *)ocr_ctx_scratch(ctx, OCR_SCRATCH_THREAD0, pb_bytes)))
            return ctx->last_status;
        j.pa = pa;
        ocr_parallel_for(ctx, kg_pad / j.uk.mr, 4, ocr__conv_pack_weights_part, &j);
        for (j.image = 0; j.image < g->N; j.image++) {
            ocr_parallel_for(ctx, panels, 1, ocr__conv_fwd_panels_part, &j);
            ocr_parallel_for(ctx, kg_pad / j.uk.mr, 1, ocr__conv_fwd_rows_part, &j);
        }
        return OCR_OK;
    }
    /* fewer pieces than threads: one per thread, each with an even share of the panels (layer4 at 640x640: 400
       columns as 192 and 208, not 240 and 160) */
    if (g->N * g->groups * j.n_chunks < ctx->n_threads) j.n_chunks = ctx->n_threads;
    {
        int64_t panels = (P + j.uk.nr - 1) / j.uk.nr;
        if (j.n_chunks > panels) j.n_chunks = panels;
        j.chunk = (panels + j.n_chunks - 1) / j.n_chunks * j.uk.nr;
    }
    j.pb_floats = j.chunk * kdim;
    if (!ocr_size_mul((size_t)(g->groups * kg_pad), (size_t)kdim * sizeof(float), &bytes) ||
        !ocr_size_mul((size_t)j.pb_floats, sizeof(float), &bytes))
        return ocr_error(ctx, OCR_EOVERFLOW, "conv: work buffers too large");
    if (!(pa = (float *)ocr_ctx_scratch(ctx, OCR_SCRATCH_GEMM_A, (size_t)(g->groups * kg_pad * kdim) * sizeof(float)))) return ctx->last_status;
    for (t = 0; t < ctx->n_threads; t++)
        if (!(j.pb[t] = (float *)ocr_ctx_scratch(ctx, OCR_SCRATCH_THREAD0 + (int)t, bytes))) return ctx->last_status;
    j.pa = pa;
    /* the weights are packed by all threads: layer4's 9 MB took a serial 2-3 ms of a 10 ms convolution */
    ocr_parallel_for(ctx, g->groups * (kg_pad / j.uk.mr), 4, ocr__conv_pack_weights_part, &j);
    ocr_parallel_for_dynamic(ctx, g->N * g->groups * j.n_chunks, 1, ocr__conv_fwd_items, &j);
    return OCR_OK;
}

/* mode FWD: y (= or +=, per accumulate) conv(x, w); BWD_DATA: dx += conv^T(dy, w); BWD_WEIGHT: dw += dy (x) x.
   Buffers: x [N,C,H,W], w [K,C/g,kh,kw], y [N,K,OH,OW] (dx, dy, dw with the same shapes).
   FWD, and BWD_WEIGHT with few output channels and wide rows, take the implicit or packed-im2col paths above. For
   the rest: with enough independent pieces every thread takes whole pieces (one dispatch per call); otherwise the
   pieces run one after another, each GEMM spread over the threads. */
static int ocr__conv_run(ocr_ctx *ctx, const ocr__conv_geom *g, int mode, float *x, float *w, float *y, int accumulate) {
    int64_t Cg = g->C / g->groups, Kg = g->K / g->groups, kdim = Cg * g->kh * g->kw, P = g->OH * g->OW;
    int64_t n_items, n, gr, c, t, M, N, K;
    ocr__conv_job j;
    size_t block_floats, bytes;
    int rc;
    if (mode == OCR__CONV_FWD) return ocr__conv_forward(ctx, g, x, w, y, accumulate, NULL);
    memset(&j, 0, sizeof j);
    j.uk = ocr__pick_ukernel(ctx);
#ifdef OCR__HAVE_AVX2
    if (mode == OCR__CONV_BWD_WEIGHT && ocr__conv_winograd_ok(ctx, g, &j.uk, 1) &&
        g->C >= (j.uk.fn == ocr__ukernel_avx2 ? OCR__WINO_WGRAD_MIN_IN_AVX2 : OCR__WINO_WGRAD_MIN_IN))
        return ocr__conv_winograd_wgrad(ctx, g, x, y, w);
    if (mode == OCR__CONV_BWD_WEIGHT && g->K <= OCR__WGRAD_IMPLICIT_MAX_K && ocr__conv_implicit_ok(g, &j.uk, 0)) return ocr__conv_implicit(ctx, g, x, NULL, w, y, 1, NULL);
#endif
    j.g = g; j.mode = mode; j.accumulate = accumulate; j.x = x; j.w = w; j.y = y;
    j.pointwise = ocr__conv_is_pointwise(g);
    j.chunk = ocr__conv_chunk(g);
    j.n_chunks = (P + j.chunk - 1) / j.chunk;
    n_items = g->N * g->groups * (mode == OCR__CONV_BWD_DATA ? 1 : j.n_chunks);
    M = mode == OCR__CONV_BWD_DATA ? kdim : Kg;
    N = mode == OCR__CONV_BWD_WEIGHT ? kdim : j.chunk;
    K = mode == OCR__CONV_BWD_DATA ? Kg : j.chunk;
    ocr__gemm_buffer_floats(&j.uk, M, N, K, &j.pa_floats, &j.pb_floats);
    j.col_floats = j.pointwise ? 0 : (size_t)((kdim * j.chunk + 15) & ~(int64_t)15);
    j.dw_floats = mode == OCR__CONV_BWD_WEIGHT ? (size_t)((g->K * kdim + 15) & ~(int64_t)15) : 0;
    /* whole pieces per thread, unless a weight gradient's per-thread partial sums would cost more memory traffic
       (zeroing and summing n_threads copies of dw) than splitting each GEMM over the threads */
    if (ctx->n_threads > 1 && n_items >= ctx->n_threads && j.dw_floats <= OCR__WGRAD_PARTIAL_MAX) {
        block_floats = j.pa_floats + j.pb_floats + j.col_floats + j.dw_floats;
        if (!ocr_size_mul(block_floats, sizeof(float), &bytes)) return ocr_error(ctx, OCR_EOVERFLOW, "conv: work buffers too large");
        for (t = 0; t < ctx->n_threads; t++) {
            if (!(j.block[t] = (float *)ocr_ctx_scratch(ctx, OCR_SCRATCH_THREAD0 + (int)t, bytes))) return ctx->last_status;
            if (j.dw_floats) memset(j.block[t] + j.pa_floats + j.pb_floats + j.col_floats, 0, j.dw_floats * sizeof(float));
        }
        ocr_parallel_for(ctx, n_items, 1, ocr__conv_items, &j);
        if (mode == OCR__CONV_BWD_WEIGHT) /* partials summed in thread order: deterministic for a thread count */
            for (t = 0; t < ctx->n_threads; t++) {
                const float *part = j.block[t] + j.pa_floats + j.pb_floats + j.col_floats;
                int64_t i;
                for (i = 0; i < g->K * kdim; i++) w[i] += part[i];
            }
        return OCR_OK;
    }
    {
        float *col = NULL;
        if (j.col_floats && !(col = (float *)ocr_ctx_scratch(ctx, OCR_SCRATCH_OP0, j.col_floats * sizeof(float)))) return ctx->last_status;
        for (n = 0; n < g->N; n++)
            for (gr = 0; gr < g->groups; gr++)
                for (c = 0; c < j.n_chunks; c++)
                    if ((rc = ocr__conv_piece(ctx, &j, n, gr, c * j.chunk, NULL, NULL, col, w, 1))) return rc;
    }
    return OCR_OK;
}

/* The flipped kernel wf[c, k, kh-1-i, kw-1-j] = w[k, c, i, j], over blocks of OCR__FLIP_BLOCK x OCR__FLIP_BLOCK channel
   pairs so that reads and writes both stay within a few pages (element by element it took 7.7 ms for layer4's 512 x 512
   kernel, over a quarter of its data gradient; blocked and threaded, 2.8 ms). Work items: blocks of input channels c. */
#define OCR__FLIP_BLOCK 16
typedef struct { const ocr__conv_geom *g; const float *w; float *wf; } ocr__flip_job;
static void ocr__flip_part(void *arg, int64_t begin, int64_t end, int tid) {
    const ocr__flip_job *f = (const ocr__flip_job *)arg;
    const ocr__conv_geom *g = f->g;
    int64_t taps = (int64_t)g->kh * g->kw, c0, k0, c, k, t;
    (void)tid;
    for (c0 = begin * OCR__FLIP_BLOCK; c0 < end * OCR__FLIP_BLOCK && c0 < g->C; c0 += OCR__FLIP_BLOCK)
        for (k0 = 0; k0 < g->K; k0 += OCR__FLIP_BLOCK)
            for (c = c0; c < c0 + OCR__FLIP_BLOCK && c < g->C; c++)
                for (k = k0; k < k0 + OCR__FLIP_BLOCK && k < g->K; k++) {
                    const float *src = f->w + (k * g->C + c) * taps;
                    float *dst = f->wf + (c * g->K + k) * taps;
                    for (t = 0; t < taps; t++) dst[taps - 1 - t] = src[t];   /* (i, j) -> (kh-1-i, kw-1-j) */
                }
}

/* dx += conv^T(dy, w). The data gradient of a stride-1 ungrouped convolution is itself a stride-1 convolution of dy
   with the kernel flipped and its channel axes swapped (padding dil*(k-1)-pad), so it runs on the forward path's
   im2col and GEMM instead of scattering a column buffer back (col2im). */
static int ocr__conv_backward_data(ocr_ctx *ctx, const ocr__conv_geom *g, float *dx, const float *w, float *dy) {
    int64_t pad_h = (int64_t)g->dh * (g->kh - 1) - g->ph, pad_w = (int64_t)g->dw * (g->kw - 1) - g->pw;
    ocr__flip_job flip;
    ocr__conv_geom t;
    float *wf;
    size_t bytes;
    if (g->sh != 1 || g->sw != 1 || g->groups != 1 || pad_h < 0 || pad_w < 0 || ocr__conv_is_pointwise(g))
        return ocr__conv_run(ctx, g, OCR__CONV_BWD_DATA, dx, (float *)w, dy, 1);
    if (!ocr_size_mul((size_t)(g->K * g->C), (size_t)(g->kh * g->kw) * sizeof(float), &bytes))
        return ocr_error(ctx, OCR_EOVERFLOW, "conv: weight too large");
    if (!(wf = (float *)ocr_ctx_scratch(ctx, OCR_SCRATCH_OP1, bytes))) return ctx->last_status;
    flip.g = g; flip.w = w; flip.wf = wf;
    ocr_parallel_for(ctx, (g->C + OCR__FLIP_BLOCK - 1) / OCR__FLIP_BLOCK, 1, ocr__flip_part, &flip);
    t = *g;
    t.C = g->K; t.H = g->OH; t.W = g->OW;
    t.K = g->C; t.OH = g->H; t.OW = g->W;
    t.ph = (int)pad_h; t.pw = (int)pad_w;
    return ocr__conv_run(ctx, &t, OCR__CONV_FWD, dy, wf, dx, 1);
}

/* ---------------------------------------------------------------- bf16 GEMM and convolution (mixed precision) */

/* The compute path of OCR_AMP_BF16: op(A) and op(B) (a convolution's image, weights and output gradient) rounded to
   bf16 (nearest even) while they are packed, products summed in fp32, fp32 results. The kind is chosen at run time
   (ocr__bf16_kind):
     OCR__BF16_AMX     AMX-BF16 (Xeon since Sapphire Rapids): a 32 x 32 block of C in four 16 x 16 fp32 tiles,
                       A and B in 16 x 32 bf16 tiles (tdpbf16ps); about 5x the fp32 FMA rate on Emerald Rapids
     OCR__BF16_AVX512  AVX512_BF16 (AMD Zen 4/5, Cooper Lake): vdpbf16ps on an 8 x 48 block of C in 24 registers
     OCR__BF16_NONE    rounds into copies and runs the fp32 kernels: the same numbers within summation order
   Packed layouts, k padded with zeros to a multiple of 32 and rows / columns to the micro-tile:
     A panel (mr rows): [k/32][mr][32] bf16, each 32-k step one A tile per 16 rows
     B panel (nr columns): [k/2][nr][2], consecutive k in pairs (the layout both instructions multiply)
   Rounding is vcvtne2ps2bf16: nearest even like ocr_f32_to_bf16, NaN kept, but fp32 subnormals become zero; both
   dot-product instructions treat bf16 subnormal inputs as zero anyway, so no product changes.
   Each value of C is summed in one fixed order whatever the thread count and wherever its tile lies (an edge tile
   runs on a padded copy of C), so results are the same bits on any number of threads. */

enum { OCR__BF16_NONE = 0, OCR__BF16_AVX512 = 1, OCR__BF16_AMX = 2 };

/* Tests set this to the best kind ocr__bf16_kind may return (-1: no limit), to run every kernel the CPU has. */
static int ocr__bf16_kind_limit = -1;

#if defined(OCR__HAVE_AVX2) && defined(__x86_64__) && (defined(__clang__) ? __clang_major__ >= 12 : __GNUC__ >= 11)
#define OCR__HAVE_BF16 1
#endif

#define OCR__BF16_KC 512            /* k per pass over a block of C: an A and a B panel (32 KB each) stay in L1/L2 */
#define OCR__BF16_MC 256            /* rows of C per work item of the GEMM */
#define OCR__BF16_NCHUNK_PANELS 8   /* column panels per work item */
#define OCR__BF16_B_BYTES ((int64_t)4 << 20) /* packed B of one column block of the GEMM */
#define OCR__BF16_TILE_MAX (32 * 48)

#ifdef OCR__HAVE_BF16
static void ocr__bf16_cpuid(unsigned leaf, unsigned sub, unsigned r[4]) {
    __asm__ __volatile__("cpuid" : "=a"(r[0]), "=b"(r[1]), "=c"(r[2]), "=d"(r[3]) : "a"(leaf), "c"(sub));
}

/* AMX-BF16 is usable when the CPU has it (CPUID.7.0 EDX bits 22 and 24), the OS saves tile state (XCR0 bits 17 and
   18) and Linux grants this process the tile data (arch_prctl ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA: without it
   the first tile instruction faults). The permission is the process's, asked once. */
static int ocr__bf16_amx_usable(void) {
    unsigned r[4], lo, hi;
    ocr__bf16_cpuid(0, 0, r);
    if (r[0] < 7) return 0;
    ocr__bf16_cpuid(7, 0, r);
    if (!(r[3] & (1u << 22)) || !(r[3] & (1u << 24))) return 0;
    ocr__bf16_cpuid(1, 0, r);
    if (!(r[2] & (1u << 27))) return 0; /* OSXSAVE: xgetbv may run */
    __asm__ __volatile__("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
    (void)hi;
    if ((lo & (3u << 17)) != (3u << 17)) return 0;
#ifdef __linux__
    {
        long rc;
        __asm__ __volatile__("syscall" : "=a"(rc) : "a"(158L /* arch_prctl */), "D"(0x1023L /* ARCH_REQ_XCOMP_PERM */),
                             "S"(18L /* XFEATURE_XTILEDATA */) : "rcx", "r11", "memory");
        return rc == 0;
    }
#else
    return 0;
#endif
}

/* The best kind this CPU and process have, lowered by OCR_BF16_KERNEL=amx|avx512bf16|none; found once per process
   (two threads racing both find the same). */
static int ocr__bf16_cpu_kind(void) {
    static int cached = -1;
    int k = __atomic_load_n(&cached, __ATOMIC_ACQUIRE);
    const char *env;
    if (k >= 0) return k;
    k = OCR__BF16_NONE;
    env = getenv("OCR_BF16_KERNEL");
    if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512bf16") &&
        !(env && !strcmp(env, "none"))) {
        k = OCR__BF16_AVX512;
        if (!(env && !strcmp(env, "avx512bf16")) && ocr__bf16_amx_usable()) k = OCR__BF16_AMX;
    }
    __atomic_store_n(&cached, k, __ATOMIC_RELEASE);
    return k;
}
#endif

/* The kind ctx's bf16 GEMMs and convolutions run on. OCR_CPU_KERNEL=portable or avx2 (ctx->cpu_kernel) mean
   no AVX-512, so no bf16 instructions either. */
static int ocr__bf16_kind(ocr_ctx *ctx) {
    int k = OCR__BF16_NONE;
#ifdef OCR__HAVE_BF16
    if (ctx->cpu_kernel != OCR_CPU_KERNEL_PORTABLE && ctx->cpu_kernel != OCR_CPU_KERNEL_AVX2) k = ocr__bf16_cpu_kind();
#else
    (void)ctx;
#endif
    if (ocr__bf16_kind_limit >= 0 && k > ocr__bf16_kind_limit) k = ocr__bf16_kind_limit;
    return k;
}

typedef struct { int kind, mr, nr; const char *name; } ocr__bf16_kernel;

static ocr__bf16_kernel ocr__bf16_pick(ocr_ctx *ctx) {
    ocr__bf16_kernel k;
    k.kind = ocr__bf16_kind(ctx);
    k.mr = k.kind == OCR__BF16_AMX ? 32 : 8;
    k.nr = k.kind == OCR__BF16_AMX ? 32 : 48;
    k.name = k.kind == OCR__BF16_AMX ? "amx-bf16 32x32" : k.kind == OCR__BF16_AVX512 ? "avx512-bf16 8x48" : "fp32 fallback";
    return k;
}

OCRDEF const char *ocr_gemm_bf16_kernel_name(ocr_ctx *ctx) { return ocr__bf16_pick(ctx).name; }

OCRDEF int ocr_amp_default(ocr_ctx *ctx) {
    return ctx->device == OCR_DEVICE_CPU && ocr__bf16_kind(ctx) != OCR__BF16_NONE ? OCR_AMP_BF16 : OCR_AMP_OFF;
}

/* Two arrays rounded to bf16 (ocr_f32_to_bf16's rounding, by the mixed-precision rounding pass, nothing counted) into
   one scratch buffer, slot OCR_SCRATCH_OP2, which the fp32 kernels leave alone: *a and *b are replaced by the copies. */
static int ocr__bf16_round_copies(ocr_ctx *ctx, const float **a, int64_t na, const float **b, int64_t nb) {
    size_t bytes;
    float *buf;
    int64_t na_pad = (na + 15) & ~(int64_t)15, over = 0, under = 0;
    if (!ocr_size_mul((size_t)(na_pad + nb), sizeof(float), &bytes)) return ocr_error(ctx, OCR_EOVERFLOW, "bf16: operands too large");
    if (!(buf = (float *)ocr_ctx_scratch(ctx, OCR_SCRATCH_OP2, bytes ? bytes : 64))) return ctx->last_status;
    ocr__amp_round_into(ctx, OCR_AMP_BF16, *a, buf, na, &over, &under);
    ocr__amp_round_into(ctx, OCR_AMP_BF16, *b, buf + na_pad, nb, &over, &under);
    *a = buf;
    *b = buf + na_pad;
    return OCR_OK;
}

/* The GEMM on rounded copies of op(A) and op(B) (as stored: lda / ldb apart) with the fp32 kernels. */
static int ocr__gemm_bf16_fallback(ocr_ctx *ctx, int trans_a, int trans_b, int64_t M, int64_t N, int64_t K, float alpha,
                                   const float *A, int64_t lda, const float *B, int64_t ldb, float beta, float *C, int64_t ldc) {
    int rc;
    if (K > 0 && alpha != 0.0f) {
        int64_t a_n = ocr__gemm_operand_extent(trans_a, M, K, lda), b_n = ocr__gemm_operand_extent(trans_b, K, N, ldb);
        if ((rc = ocr__bf16_round_copies(ctx, &A, a_n, &B, b_n))) return rc;
    }
    return ocr__gemm_f32(ctx, trans_a, trans_b, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
}

#ifdef OCR__HAVE_BF16
#define OCR__BF16_TARGET __attribute__((target("avx512f,avx512bw,avx512bf16")))

/* 16 pairs (lo[j], hi[j]) as bf16, interleaved: lo[j] in the low half of dword j */
static const uint16_t ocr__bf16_interleave[32] = {0, 16, 1, 17, 2, 18, 3, 19, 4, 20, 5, 21, 6, 22, 7, 23,
                                                   8, 24, 9, 25, 10, 26, 11, 27, 12, 28, 13, 29, 14, 30, 15, 31};
OCR__BF16_TARGET static inline __m512i ocr__bf16_pairs(__m512 lo, __m512 hi) {
    __m512i v = (__m512i)_mm512_cvtne2ps_pbh(hi, lo); /* bf16(lo) in elements 0-15, bf16(hi) in 16-31 */
    return _mm512_permutexvar_epi16(_mm512_loadu_si512(ocr__bf16_interleave), v);
}

/* n floats of src (zeros from n to 32) as 32 bf16 in order at dst */
OCR__BF16_TARGET static inline void ocr__bf16_row32(const float *src, int64_t n, uint16_t *dst) {
    __m512 lo, hi;
    if (n >= 32) {
        lo = _mm512_loadu_ps(src);
        hi = _mm512_loadu_ps(src + 16);
    } else {
        lo = _mm512_maskz_loadu_ps(ocr__lanes(n), src);
        hi = _mm512_maskz_loadu_ps(ocr__lanes(n - 16), src + 16);
    }
    _mm512_storeu_si512(dst, (__m512i)_mm512_cvtne2ps_pbh(hi, lo));
}

/* A panel of mr rows from rows [0, rows) and k [0, kc) of a matrix whose element (i, k) is src[i * ld + k]
   (trans 0) or src[k * ld + i] (trans 1); zeros up to mr rows and kp (a multiple of 32) columns. */
OCR__BF16_TARGET static void ocr__bf16_pack_a(int64_t mr, const float *src, int64_t ld, int trans, int64_t rows, int64_t kc, int64_t kp,
                                              uint16_t *dst) {
    float t[32];
    int64_t s, i, k;
    for (s = 0; s < kp / 32; s++) {
        int64_t k0 = s * 32, kn = kc - k0 < 32 ? kc - k0 : 32;
        for (i = 0; i < mr; i++) {
            uint16_t *d = dst + (s * mr + i) * 32;
            if (i >= rows || kn <= 0) memset(d, 0, 64);
            else if (!trans) ocr__bf16_row32(src + i * ld + k0, kn, d);
            else {
                for (k = 0; k < kn; k++) t[k] = src[(k0 + k) * ld + i];
                ocr__bf16_row32(t, kn, d);
            }
        }
    }
}

/* A B panel of nr columns from k [0, kc) and columns [0, cols) of a matrix whose element (k, j) is src[k * ld + j]
   (trans 0) or src[j * ld + k] (trans 1); zeros up to nr columns and kp rows. Transposed, 16 columns of 32 k are
   rounded into dwords (k pairs) and the 16 x 16 dword block is transposed in registers. */
OCR__BF16_TARGET static void ocr__bf16_pack_b(int64_t nr, const float *src, int64_t ld, int trans, int64_t kc, int64_t kp, int64_t cols,
                                              uint16_t *dst) {
    int64_t p, j, s, c;
    if (!trans) {
        for (p = 0; p < kp / 2; p++) {
            int64_t k = 2 * p;
            for (j = 0; j < nr; j += 16) {
                __mmask16 m = ocr__lanes(cols - j);
                __m512 lo = k < kc ? _mm512_maskz_loadu_ps(m, src + k * ld + j) : _mm512_setzero_ps();
                __m512 hi = k + 1 < kc ? _mm512_maskz_loadu_ps(m, src + (k + 1) * ld + j) : _mm512_setzero_ps();
                _mm512_storeu_si512(dst + (p * nr + j) * 2, ocr__bf16_pairs(lo, hi));
            }
        }
    } else {
        float t[256];
        for (s = 0; s < kp / 32; s++)
            for (j = 0; j < nr; j += 16) {
                for (c = 0; c < 16; c++) {
                    if (j + c < cols && kc > 32 * s) ocr__bf16_row32(src + (j + c) * ld + 32 * s, kc - 32 * s, (uint16_t *)(t + 16 * c));
                    else memset(t + 16 * c, 0, 64);
                }
                ocr__transpose16(t, 16, (float *)(dst + (s * 16 * nr + j) * 2), nr);
            }
    }
}

/* GCC 12 writes the tile instructions as asm statements that name no memory (ldtilecfg: 8 bytes of its operand; tile
   loads and stores: only the registers holding the address), so it may drop or move the stores they read and keep
   stale copies of what they write. This barrier, with the addresses given, makes every store before it complete and
   every load after it read memory again. */
#define OCR__AMX_FENCE(p) __asm__ __volatile__("" : : "r"(p) : "memory")

/* The tile configuration every AMX kernel here uses: tiles 0-3 hold C (16 rows of 16 fp32), 4-5 A and 6-7 B (16 rows
   of 32 bf16). Each thread loads it before its first tile instruction and releases the tiles after its last. */
__attribute__((target("amx-tile"))) static void ocr__amx_begin(void) {
    unsigned char cfg[64]; /* palette at byte 0, bytes per row of tile t at 16 + 2t, its rows at 48 + t */
    int t;
    memset(cfg, 0, sizeof cfg);
    cfg[0] = 1;
    for (t = 0; t < 8; t++) { cfg[16 + 2 * t] = 64; cfg[48 + t] = 16; }
    OCR__AMX_FENCE(cfg);
    _tile_loadconfig(cfg);
}
__attribute__((target("amx-tile"))) static void ocr__amx_end(void) { _tile_release(); }

static void ocr__bf16_begin(const ocr__bf16_kernel *kn) { if (kn->kind == OCR__BF16_AMX) ocr__amx_begin(); }
static void ocr__bf16_end(const ocr__bf16_kernel *kn) { if (kn->kind == OCR__BF16_AMX) ocr__amx_end(); }

/* The micro-kernels: C[mr, nr] (ldc apart) = (load ? C : 0) + A B over ksteps steps of 32 k. Step s of A starts at
   a + (aofs ? aofs[s] : s * astep), rows ald elements apart (32 k each; AMX: rows 16-31 from a1 further); step s of
   B at b + (bofs ? bofs[s] : s * bstep), 16 rows of k pairs bld elements apart, each 16 columns of them (their 2nd
   and 3rd groups of 16 at b1, b2) . C's groups of 16 columns start at c, c + c1, c + c2. Packed panels:
   ocr__bf16_packed_operands; the implicit convolution points B into a converted band of the image and C into y,
   one output-row segment per group of 16 columns. */
typedef struct {
    const uint16_t *a, *b;
    const int64_t *aofs, *bofs;
    int64_t astep, ald, a1, bstep, bld, b1, b2, c1, c2;
} ocr__bf16_operands;

static ocr__bf16_operands ocr__bf16_packed_operands(const ocr__bf16_kernel *kn, const uint16_t *a, const uint16_t *b) {
    ocr__bf16_operands o;
    o.a = a; o.b = b; o.aofs = o.bofs = NULL;
    o.astep = 32 * kn->mr; o.ald = 32; o.a1 = 16 * 32;
    o.bstep = 32 * kn->nr; o.bld = 2 * kn->nr; o.b1 = 32; o.b2 = 64;
    o.c1 = 16; o.c2 = 32;
    return o;
}

__attribute__((target("amx-tile,amx-bf16")))
static void ocr__bf16_ukernel_amx(int64_t ksteps, const ocr__bf16_operands *o, float *c, int64_t ldc, int load) {
    const uint16_t *a = o->a, *b = o->b;
    const int64_t *aofs = o->aofs, *bofs = o->bofs;
    int64_t s, cs = ldc * 4, as_ = o->ald * 2, bs_ = o->bld * 2, a1 = o->a1, b1 = o->b1, c1 = o->c1, astep = o->astep, bstep = o->bstep;
    float *c2 = c + 16 * ldc;
    OCR__AMX_FENCE(a);
    OCR__AMX_FENCE(b);
    OCR__AMX_FENCE(c);
    if (load) {
        _tile_loadd(0, c, cs); _tile_loadd(1, c + c1, cs); _tile_loadd(2, c2, cs); _tile_loadd(3, c2 + c1, cs);
    } else {
        _tile_zero(0); _tile_zero(1); _tile_zero(2); _tile_zero(3);
    }
    for (s = 0; s < ksteps; s++) {
        const uint16_t *ap = aofs ? a + aofs[s] : a + s * astep, *bp = bofs ? b + bofs[s] : b + s * bstep;
        _tile_loadd(4, ap, as_);
        _tile_loadd(5, ap + a1, as_);
        _tile_loadd(6, bp, bs_);
        _tile_loadd(7, bp + b1, bs_);
        _tile_dpbf16ps(0, 4, 6);
        _tile_dpbf16ps(1, 4, 7);
        _tile_dpbf16ps(2, 5, 6);
        _tile_dpbf16ps(3, 5, 7);
    }
    _tile_stored(0, c, cs); _tile_stored(1, c + c1, cs); _tile_stored(2, c2, cs); _tile_stored(3, c2 + c1, cs);
    OCR__AMX_FENCE(c);
}

static int32_t ocr__bf16_pair_at(const uint16_t *p) {
    int32_t v;
    memcpy(&v, p, 4);
    return v;
}

/* 8 x 48: 24 accumulators, three B registers; each A pair is broadcast from memory. */
__attribute__((target("avx512f,avx512bf16")))
static void ocr__bf16_ukernel_avx512(int64_t ksteps, const ocr__bf16_operands *o, float *c, int64_t ldc, int load) {
#define OCR__BF_ROWS(X) X(0) X(1) X(2) X(3) X(4) X(5) X(6) X(7)
#define OCR__BF_DECL(i) __m512 c##i##0, c##i##1, c##i##2;
#define OCR__BF_INIT(i) if (load) { c##i##0 = _mm512_loadu_ps(c + i * ldc); c##i##1 = _mm512_loadu_ps(c + i * ldc + c1); \
                                    c##i##2 = _mm512_loadu_ps(c + i * ldc + c2); }                                     \
                        else c##i##0 = c##i##1 = c##i##2 = _mm512_setzero_ps();
#define OCR__BF_DP(i) { __m512bh x = (__m512bh)_mm512_set1_epi32(ocr__bf16_pair_at(ap + i * ald + 2 * p));            \
                        c##i##0 = _mm512_dpbf16_ps(c##i##0, x, b0); c##i##1 = _mm512_dpbf16_ps(c##i##1, x, b1);       \
                        c##i##2 = _mm512_dpbf16_ps(c##i##2, x, b2); }
#define OCR__BF_STORE(i) _mm512_storeu_ps(c + i * ldc, c##i##0); _mm512_storeu_ps(c + i * ldc + c1, c##i##1); \
                         _mm512_storeu_ps(c + i * ldc + c2, c##i##2);
    int64_t s, p, ald = o->ald, c1 = o->c1, c2 = o->c2;
    OCR__BF_ROWS(OCR__BF_DECL)
    OCR__BF_ROWS(OCR__BF_INIT)
    for (s = 0; s < ksteps; s++) {
        const uint16_t *ap = o->aofs ? o->a + o->aofs[s] : o->a + s * o->astep, *bsp = o->bofs ? o->b + o->bofs[s] : o->b + s * o->bstep;
        for (p = 0; p < 16; p++) {
            const uint16_t *bp = bsp + p * o->bld;
            __m512bh b0 = (__m512bh)_mm512_loadu_si512(bp), b1 = (__m512bh)_mm512_loadu_si512(bp + o->b1),
                     b2 = (__m512bh)_mm512_loadu_si512(bp + o->b2);
            OCR__BF_ROWS(OCR__BF_DP)
        }
    }
    OCR__BF_ROWS(OCR__BF_STORE)
#undef OCR__BF_ROWS
#undef OCR__BF_DECL
#undef OCR__BF_INIT
#undef OCR__BF_DP
#undef OCR__BF_STORE
}

static void ocr__bf16_ukernel(const ocr__bf16_kernel *kn, int64_t ksteps, const ocr__bf16_operands *o, float *c, int64_t ldc, int load) {
    if (kn->kind == OCR__BF16_AMX) ocr__bf16_ukernel_amx(ksteps, o, c, ldc, load);
    else ocr__bf16_ukernel_avx512(ksteps, o, c, ldc, load);
}

/* C[rows, cols] (rows <= mr, cols <= nr) = (load ? C : 0) + alpha A B from packed panels. With alpha 1 the tile sums
   onto C itself (a partial tile onto a padded copy, the same arithmetic); otherwise A B is formed first and then
   scaled and added. */
static void ocr__bf16_tile(const ocr__bf16_kernel *kn, int64_t ksteps, const uint16_t *a, const uint16_t *b, float *c, int64_t ldc,
                           float alpha, int64_t rows, int64_t cols, int load) {
    float buf[OCR__BF16_TILE_MAX];
    int64_t i, j, nr = kn->nr;
    int direct = alpha == 1.0f && rows == kn->mr && cols == nr;
    float *t = direct ? c : buf;
    ocr__bf16_operands o = ocr__bf16_packed_operands(kn, a, b);
    if (!direct) {
        memset(buf, 0, sizeof(float) * (size_t)(kn->mr * nr));
        if (alpha == 1.0f && load)
            for (i = 0; i < rows; i++) memcpy(buf + i * nr, c + i * ldc, (size_t)cols * sizeof(float));
    }
    ocr__bf16_ukernel(kn, ksteps, &o, t, direct ? ldc : nr, alpha == 1.0f && load);
    if (direct) return;
    for (i = 0; i < rows; i++) {
        float *ci = c + i * ldc;
        const float *bi = buf + i * nr;
        if (alpha == 1.0f) memcpy(ci, bi, (size_t)cols * sizeof(float));
        else if (load) for (j = 0; j < cols; j++) ci[j] += alpha * bi[j];
        else for (j = 0; j < cols; j++) ci[j] = alpha * bi[j];
    }
}

/* C[M, N] (+)= alpha A B from packed panels over all of k (kp): A panels mr * kp apart, B panels nr * kp apart. k runs
   in blocks of OCR__BF16_KC, each block's B panel against every A panel while it is hot. load: add to C (the first
   block; the later ones always add). */
static void ocr__bf16_region(const ocr__bf16_kernel *kn, const uint16_t *pa, int64_t M, const uint16_t *pb, int64_t N, int64_t kp,
                             float *C, int64_t ldc, float alpha, int load) {
    int64_t pc, ip, jp, mr = kn->mr, nr = kn->nr;
    for (pc = 0; pc < kp; pc += OCR__BF16_KC) {
        int64_t kc = kp - pc < OCR__BF16_KC ? kp - pc : OCR__BF16_KC;
        for (jp = 0; jp < N; jp += nr)
            for (ip = 0; ip < M; ip += mr)
                ocr__bf16_tile(kn, kc / 32, pa + ip * kp + pc * mr, pb + jp * kp + pc * nr, C + ip * ldc + jp, ldc, alpha,
                               M - ip < mr ? M - ip : mr, N - jp < nr ? N - jp : nr, load || pc > 0);
    }
}

typedef struct {
    ocr__bf16_kernel kn;
    int trans_a, trans_b, load, pack_a;
    int64_t M, N, K, kp, lda, ldb, ldc;
    float alpha;
    const float *A, *B;
    float *C;
    uint16_t *pa, *pb;     /* all of op(A), packed; op(B)'s current column block [jc, jc + nc), packed */
    int64_t jc, nc, a_panels, nchunk, n_chunks;
    int64_t parts, nc_thread, pb_stride; /* ocr__bf16_gemm_cols_part: column shares, their blocks, each thread's B */
} ocr__bf16_gemm_job;

/* Work items: A panels (when pack_a), then the column block's B panels. */
static void ocr__bf16_gemm_pack_part(void *arg, int64_t begin, int64_t end, int tid) {
    const ocr__bf16_gemm_job *j = (const ocr__bf16_gemm_job *)arg;
    int64_t item, mr = j->kn.mr, nr = j->kn.nr, a_items = j->pack_a ? j->a_panels : 0;
    (void)tid;
    for (item = begin; item < end; item++) {
        if (item < a_items) {
            int64_t i0 = item * mr;
            ocr__bf16_pack_a(mr, j->trans_a ? j->A + i0 : j->A + i0 * j->lda, j->lda, j->trans_a, j->M - i0 < mr ? j->M - i0 : mr, j->K,
                             j->kp, j->pa + i0 * j->kp);
        } else {
            int64_t q0 = (item - a_items) * nr, c0 = j->jc + q0;
            ocr__bf16_pack_b(nr, j->trans_b ? j->B + c0 * j->ldb : j->B + c0, j->ldb, j->trans_b, j->K, j->kp,
                             j->nc - q0 < nr ? j->nc - q0 : nr, j->pb + q0 * j->kp);
        }
    }
}

/* Work items: (OCR__BF16_MC-row block, nchunk-column chunk) regions of the column block. */
static void ocr__bf16_gemm_compute_part(void *arg, int64_t begin, int64_t end, int tid) {
    const ocr__bf16_gemm_job *j = (const ocr__bf16_gemm_job *)arg;
    int64_t item;
    (void)tid;
    ocr__bf16_begin(&j->kn);
    for (item = begin; item < end; item++) {
        int64_t m0 = item / j->n_chunks * OCR__BF16_MC, n0 = item % j->n_chunks * j->nchunk;
        int64_t rows = j->M - m0 < OCR__BF16_MC ? j->M - m0 : OCR__BF16_MC, cols = j->nc - n0 < j->nchunk ? j->nc - n0 : j->nchunk;
        ocr__bf16_region(&j->kn, j->pa + m0 * j->kp, rows, j->pb + n0 * j->kp, cols, j->kp, j->C + m0 * j->ldc + j->jc + n0, j->ldc,
                         j->alpha, j->load);
    }
    ocr__bf16_end(&j->kn);
}

/* Work items: one contiguous share of the column panels each, packed into the running thread's own B buffer a block
   at a time and multiplied by all of op(A) (packed before, by every thread). Packing each column block together and
   then sharing its regions out, two threads had run layer3's shape and the weight gradient's barely faster than one:
   the regions split unevenly, and each thread multiplied B panels that the other core had just written. The tiles
   start where they do on one thread: the same sums. */
static void ocr__bf16_gemm_cols_part(void *arg, int64_t begin, int64_t end, int tid) {
    const ocr__bf16_gemm_job *j = (const ocr__bf16_gemm_job *)arg;
    int64_t part, nr = j->kn.nr, panels = (j->N + nr - 1) / nr;
    uint16_t *pb = j->pb + (size_t)tid * (size_t)j->pb_stride;
    ocr__bf16_begin(&j->kn);
    for (part = begin; part < end; part++) {
        int64_t c0 = part * panels / j->parts * nr, c1 = (part + 1) * panels / j->parts * nr, jc, q0, m0;
        if (c1 > j->N) c1 = j->N;
        for (jc = c0; jc < c1; jc += j->nc_thread) {
            int64_t nc = c1 - jc < j->nc_thread ? c1 - jc : j->nc_thread;
            for (q0 = 0; q0 < nc; q0 += nr)
                ocr__bf16_pack_b(nr, j->trans_b ? j->B + (jc + q0) * j->ldb : j->B + jc + q0, j->ldb, j->trans_b, j->K, j->kp,
                                 nc - q0 < nr ? nc - q0 : nr, pb + q0 * j->kp);
            for (m0 = 0; m0 < j->M; m0 += OCR__BF16_MC)
                ocr__bf16_region(&j->kn, j->pa + m0 * j->kp, j->M - m0 < OCR__BF16_MC ? j->M - m0 : OCR__BF16_MC, pb, nc, j->kp,
                                 j->C + m0 * j->ldc + jc, j->ldc, j->alpha, j->load);
        }
    }
    ocr__bf16_end(&j->kn);
}
#endif

/* ocr_gemm's contract (row-major, beta 0 ignores C, alpha 0 or K 0 leave beta C) with op(A) and op(B) rounded to bf16
   and products summed in fp32. op(A) is packed whole, op(B) in column blocks of about OCR__BF16_B_BYTES; each
   block's packing and then its (row block, column chunk) regions are shared out over the threads, or each thread
   packs and multiplies its own share of the columns (ocr__bf16_gemm_cols_part). */
static int ocr__gemm_bf16(ocr_ctx *ctx, int trans_a, int trans_b, int64_t M, int64_t N, int64_t K, float alpha,
                          const float *A, int64_t lda, const float *B, int64_t ldb, float beta, float *C, int64_t ldc) {
#ifdef OCR__HAVE_BF16
    ocr__bf16_gemm_job j;
    size_t bytes_a, bytes_b;
    int64_t nc_max, m_blocks, b_panels;
    int col_shares;
#endif
    if (M < 0 || N < 0 || K < 0 || ldc < N || lda < (trans_a ? M : K) || ldb < (trans_b ? K : N))
        return ocr_error(ctx, OCR_EINVAL, "ocr_gemm (bf16): bad sizes M=%lld N=%lld K=%lld lda=%lld ldb=%lld ldc=%lld", (long long)M,
                         (long long)N, (long long)K, (long long)lda, (long long)ldb, (long long)ldc);
    if (M == 0 || N == 0) return OCR_OK;
    if (K == 0 || alpha == 0.0f || ocr__bf16_kind(ctx) == OCR__BF16_NONE)
        return ocr__gemm_bf16_fallback(ctx, trans_a, trans_b, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
#ifdef OCR__HAVE_BF16
    memset(&j, 0, sizeof j);
    j.kn = ocr__bf16_pick(ctx);
    j.trans_a = trans_a; j.trans_b = trans_b;
    j.M = M; j.N = N; j.K = K; j.lda = lda; j.ldb = ldb; j.ldc = ldc; j.alpha = alpha;
    j.A = A; j.B = B; j.C = C;
    j.kp = (K + 31) / 32 * 32;
    j.a_panels = (M + j.kn.mr - 1) / j.kn.mr;
    nc_max = OCR__BF16_B_BYTES / (2 * j.kp) / j.kn.nr * j.kn.nr;
    if (nc_max < j.kn.nr) nc_max = j.kn.nr;
    if (nc_max > (N + j.kn.nr - 1) / j.kn.nr * j.kn.nr) nc_max = (N + j.kn.nr - 1) / j.kn.nr * j.kn.nr;
    m_blocks = (M + OCR__BF16_MC - 1) / OCR__BF16_MC;
    b_panels = (N + j.kn.nr - 1) / j.kn.nr;
    /* column shares per thread where the shared path would split columns anyway (one row block per thread or fewer),
       or where the shares are wide enough to split evenly; tall A over few columns (layer4's 512 x 400) keeps the
       shared path, whose threads each stream half of A rather than all of it */
    col_shares = ctx->n_threads > 1 && b_panels >= 2 * ctx->n_threads && (m_blocks < ctx->n_threads || b_panels >= 8 * ctx->n_threads);
    if (col_shares) {
        j.parts = ctx->n_threads;
        j.nc_thread = nc_max / ctx->n_threads / j.kn.nr * j.kn.nr;
        if (j.nc_thread < j.kn.nr) j.nc_thread = j.kn.nr;
        j.pb_stride = (j.nc_thread * j.kp + 31) / 32 * 32;
    }
    if (!ocr_size_mul((size_t)(j.a_panels * j.kn.mr), (size_t)j.kp * 2, &bytes_a) ||
        !ocr_size_mul(col_shares ? (size_t)j.pb_stride * 2 : (size_t)nc_max, col_shares ? (size_t)ctx->n_threads : (size_t)j.kp * 2, &bytes_b))
        return ocr_error(ctx, OCR_EOVERFLOW, "ocr_gemm (bf16): M=%lld K=%lld too large", (long long)M, (long long)K);
    if (!(j.pa = (uint16_t *)ocr_ctx_scratch(ctx, OCR_SCRATCH_GEMM_A, bytes_a)) || !(j.pb = (uint16_t *)ocr_ctx_scratch(ctx, OCR_SCRATCH_GEMM_B, bytes_b)))
        return ctx->last_status;
    if (beta != 0.0f && beta != 1.0f) { /* beta first, then every block adds */
        ocr__gemm_job sj;
        memset(&sj, 0, sizeof sj);
        sj.C = C; sj.ldc = ldc; sj.N = N; sj.beta = beta;
        ocr_parallel_for(ctx, M, 64, ocr__gemm_scale_part, &sj);
    }
    j.load = beta != 0.0f;
    if (col_shares) {
        j.pack_a = 1;
        ocr_parallel_for(ctx, j.a_panels, 1, ocr__bf16_gemm_pack_part, &j);
        ocr_parallel_for(ctx, j.parts, 1, ocr__bf16_gemm_cols_part, &j);
        return OCR_OK;
    }
    for (j.jc = 0; j.jc < N; j.jc += nc_max) {
        j.nc = N - j.jc < nc_max ? N - j.jc : nc_max;
        b_panels = (j.nc + j.kn.nr - 1) / j.kn.nr;
        j.pack_a = j.jc == 0;
        ocr_parallel_for(ctx, (j.pack_a ? j.a_panels : 0) + b_panels, 1, ocr__bf16_gemm_pack_part, &j);
        /* few row blocks: narrower chunks so that every thread gets work (the chunking changes no sum) */
        j.nchunk = OCR__BF16_NCHUNK_PANELS;
        if (m_blocks * ((b_panels + j.nchunk - 1) / j.nchunk) < 2 * ctx->n_threads) {
            int64_t want = (2 * ctx->n_threads + m_blocks - 1) / m_blocks;
            j.nchunk = (b_panels + want - 1) / want;
            if (j.nchunk < 1) j.nchunk = 1;
        }
        j.nchunk *= j.kn.nr;
        j.n_chunks = (j.nc + j.nchunk - 1) / j.nchunk;
        ocr_parallel_for(ctx, m_blocks * j.n_chunks, 1, ocr__bf16_gemm_compute_part, &j);
    }
#endif
    return OCR_OK;
}

/* ---- convolutions */

/* The convolution on rounded copies of its two inputs with the fp32 kernels. */
static int ocr__conv_bf16_fallback(ocr_ctx *ctx, const ocr__conv_geom *g, int mode, float *x, float *w, float *y, int accumulate,
                                   const ocr__conv_epilogue *ep) {
    int64_t nx = g->N * g->C * g->H * g->W, nw = g->K * (g->C / g->groups) * g->kh * g->kw, ny = g->N * g->K * g->OH * g->OW;
    const float *a, *b;
    int rc;
    if (mode == OCR__CONV_FWD) {
        a = x; b = w;
        if ((rc = ocr__bf16_round_copies(ctx, &a, nx, &b, nw))) return rc;
        return ocr__conv_forward(ctx, g, a, b, y, accumulate, ep);
    }
    if (mode == OCR__CONV_BWD_DATA) {
        a = w; b = y;
        if ((rc = ocr__bf16_round_copies(ctx, &a, nw, &b, ny))) return rc;
        return ocr__conv_backward_data(ctx, g, x, a, (float *)b);
    }
    a = x; b = y;
    if ((rc = ocr__bf16_round_copies(ctx, &a, nx, &b, ny))) return rc;
    return ocr__conv_run(ctx, g, OCR__CONV_BWD_WEIGHT, (float *)a, w, (float *)b, 1);
}

#ifdef OCR__HAVE_BF16
/* The lowered convolution: pieces of (image, group, chunk of output pixels) as GEMMs on bf16 panels,
     FWD         y_g[Kg, chunk] (=, +=) W_g[Kg, kdim] col[kdim, chunk]        (A: the weights, packed once)
     BWD_DATA    col = W_g^T dy_g[Kg, chunk], then col2im into dx             (A: the weights transposed, packed once)
     BWD_WEIGHT  dw_g[Kg, kdim] += dy_g[Kg, chunk] col^T                      (A: dy, B: col transposed, per piece)
   with col the chunk's im2col (a 1x1 stride-1 convolution reads the image itself). The chunk is fixed by the
   geometry alone (the thread count changes no sum). */
typedef struct {
    const ocr__conv_geom *g;
    ocr__bf16_kernel kn;
    int mode, accumulate, pointwise;
    ocr__conv_epilogue ep;
    float *x, *w, *y;
    int64_t Cg, Kg, kdim, taps, P, HW, chunk, n_chunks;
    int64_t kp;              /* padded k of the GEMMs: kdim (FWD), Kg (BWD_DATA), chunk (BWD_WEIGHT) */
    const uint16_t *pa;      /* FWD, BWD_DATA: every group's packed weights, pa_group apart */
    int64_t pa_group, a_panels;
    size_t pb_elems, pa2_elems, col_floats;   /* per-thread buffer: packed B | packed A (BWD_WEIGHT) | fp32 col */
    void *buf[OCR_MAX_THREADS];
    int64_t units, parts, m_panels, n_panels; /* BWD_WEIGHT: dw tiles (group, column panel, row panel), shared by parts */
    int64_t cur_n, cur_gr, cur_p0, cur_cols;  /* BWD_DATA with fewer pieces than threads: the piece being split */
    uint16_t *cur_pb;
    float *cur_col;
} ocr__bf16_conv_job;

static int64_t ocr__bf16_conv_chunk(const ocr__conv_geom *g) {
    int64_t kdim = (g->C / g->groups) * g->kh * g->kw, P = g->OH * g->OW;
    int64_t cols = ((int64_t)1 << 18) / (kdim ? kdim : 1);
    cols = cols < 192 ? 192 : cols - cols % 96; /* whole panels of both kernels (32 and 48 wide) */
    return cols > P ? P : cols;
}

/* Work items: (group, A panel) of the weights: W_g (FWD) or W_g^T (BWD_DATA) into pa. */
static void ocr__bf16_conv_pack_w_part(void *arg, int64_t begin, int64_t end, int tid) {
    const ocr__bf16_conv_job *j = (const ocr__bf16_conv_job *)arg;
    int64_t item, mr = j->kn.mr;
    (void)tid;
    for (item = begin; item < end; item++) {
        int64_t gr = item / j->a_panels, i0 = item % j->a_panels * mr;
        const float *wg = j->w + gr * j->Kg * j->kdim;
        uint16_t *dst = (uint16_t *)j->pa + gr * j->pa_group + i0 * j->kp;
        if (j->mode == OCR__CONV_FWD) ocr__bf16_pack_a(mr, wg + i0 * j->kdim, j->kdim, 0, j->Kg - i0 < mr ? j->Kg - i0 : mr, j->kdim, j->kp, dst);
        else ocr__bf16_pack_a(mr, wg + i0, j->kdim, 1, j->kdim - i0 < mr ? j->kdim - i0 : mr, j->Kg, j->kp, dst);
    }
}

/* rows [r0, r1) of the im2col of image-group xg over output pixels [p0, p0 + cols) into dst (cols apart); r0 must be
   a multiple of taps (ocr__im2col_part numbers rows from the first channel it is given) */
static void ocr__bf16_im2col_rows(const ocr__bf16_conv_job *j, const float *xg, int64_t p0, int64_t cols, int64_t r0, int64_t r1, float *dst) {
    ocr__im2col_job ij;
    ij.g = j->g; ij.x = xg + r0 / j->taps * j->HW; ij.col = dst; ij.p0 = p0; ij.cols = cols; ij.even16 = 0;
    ocr__im2col_part(&ij, 0, r1 - r0, 0);
}

/* FWD item (image, group, chunk): im2col, B panels, then the chunk of y and its epilogue. */
static void ocr__bf16_conv_fwd_part(void *arg, int64_t begin, int64_t end, int tid) {
    const ocr__bf16_conv_job *j = (const ocr__bf16_conv_job *)arg;
    const ocr__conv_geom *g = j->g;
    uint16_t *pb = (uint16_t *)j->buf[tid];
    float *col = (float *)(pb + j->pb_elems + j->pa2_elems);
    int64_t item, jp, nr = j->kn.nr;
    ocr__bf16_begin(&j->kn);
    for (item = begin; item < end; item++) {
        int64_t pair = item / j->n_chunks, n = pair / g->groups, gr = pair % g->groups, p0 = item % j->n_chunks * j->chunk;
        int64_t cols = j->P - p0 < j->chunk ? j->P - p0 : j->chunk, ld = j->HW;
        const float *xg = j->x + (n * g->C + gr * j->Cg) * j->HW, *src = xg + p0;
        float *yc = j->y + (n * g->K + gr * j->Kg) * j->P + p0;
        if (!j->pointwise) {
            ocr__bf16_im2col_rows(j, xg, p0, cols, 0, j->kdim, col);
            src = col;
            ld = cols;
        }
        for (jp = 0; jp < cols; jp += nr) ocr__bf16_pack_b(nr, src + jp, ld, 0, j->kdim, j->kp, cols - jp < nr ? cols - jp : nr, pb + jp * j->kp);
        ocr__bf16_region(&j->kn, j->pa + gr * j->pa_group, j->Kg, pb, cols, j->kp, yc, j->P, 1.0f, j->accumulate);
        if (!j->accumulate) ocr__conv_epilogue_apply(&j->ep, yc, j->P, gr * j->Kg, j->Kg, cols);
    }
    ocr__bf16_end(&j->kn);
}

/* BWD_DATA: dx_g += W_g^T dy_g over one chunk: into dx itself (1x1 stride 1) or col, then col2im. pb: the chunk's
   dy panels, packed by the caller; rows [m0, m1) of the product only (in whole A panels). */
static void ocr__bf16_conv_dx_rows(const ocr__bf16_conv_job *j, int64_t n, int64_t gr, int64_t p0, int64_t cols, const uint16_t *pb,
                                   float *col, int64_t m0, int64_t m1) {
    const ocr__conv_geom *g = j->g;
    const uint16_t *pa = j->pa + gr * j->pa_group + m0 * j->kp;
    float *xg = j->x + (n * g->C + gr * j->Cg) * j->HW;
    if (j->pointwise) ocr__bf16_region(&j->kn, pa, m1 - m0, pb, cols, j->kp, xg + m0 * j->HW + p0, j->HW, 1.0f, 1);
    else ocr__bf16_region(&j->kn, pa, m1 - m0, pb, cols, j->kp, col + m0 * cols, cols, 1.0f, 0);
}

static void ocr__bf16_conv_dy_panels(const ocr__bf16_conv_job *j, int64_t n, int64_t gr, int64_t p0, int64_t cols, uint16_t *pb) {
    int64_t jp, nr = j->kn.nr;
    const float *dyg = j->y + (n * j->g->K + gr * j->Kg) * j->P + p0;
    for (jp = 0; jp < cols; jp += nr) ocr__bf16_pack_b(nr, dyg + jp, j->P, 0, j->Kg, j->kp, cols - jp < nr ? cols - jp : nr, pb + jp * j->kp);
}

static void ocr__bf16_conv_col2im(const ocr__bf16_conv_job *j, int64_t n, int64_t gr, int64_t p0, int64_t cols, const float *col,
                                  int64_t c0, int64_t c1) {
    ocr__col2im_job cj;
    cj.g = j->g; cj.col = col; cj.dx = j->x + (n * j->g->C + gr * j->Cg) * j->HW; cj.p0 = p0; cj.cols = cols;
    ocr__col2im_part(&cj, c0, c1, 0);
}

/* BWD_DATA items (image, group): every chunk in turn (they scatter into overlapping parts of dx). */
static void ocr__bf16_conv_dx_part(void *arg, int64_t begin, int64_t end, int tid) {
    const ocr__bf16_conv_job *j = (const ocr__bf16_conv_job *)arg;
    uint16_t *pb = (uint16_t *)j->buf[tid];
    float *col = (float *)(pb + j->pb_elems + j->pa2_elems);
    int64_t item, c;
    ocr__bf16_begin(&j->kn);
    for (item = begin; item < end; item++)
        for (c = 0; c < j->n_chunks; c++) {
            int64_t n = item / j->g->groups, gr = item % j->g->groups, p0 = c * j->chunk, cols = j->P - p0 < j->chunk ? j->P - p0 : j->chunk;
            ocr__bf16_conv_dy_panels(j, n, gr, p0, cols, pb);
            ocr__bf16_conv_dx_rows(j, n, gr, p0, cols, pb, col, 0, j->kdim);
            if (!j->pointwise) ocr__bf16_conv_col2im(j, n, gr, p0, cols, col, 0, j->Cg);
        }
    ocr__bf16_end(&j->kn);
}

/* BWD_DATA with fewer (image, group) items than threads, one piece at a time: rows of its product, in A panels */
static void ocr__bf16_conv_dx_split_part(void *arg, int64_t begin, int64_t end, int tid) {
    const ocr__bf16_conv_job *j = (const ocr__bf16_conv_job *)arg;
    int64_t m1 = end * j->kn.mr < j->kdim ? end * j->kn.mr : j->kdim;
    (void)tid;
    ocr__bf16_begin(&j->kn);
    ocr__bf16_conv_dx_rows(j, j->cur_n, j->cur_gr, j->cur_p0, j->cur_cols, j->cur_pb, j->cur_col, begin * j->kn.mr, m1);
    ocr__bf16_end(&j->kn);
}
/* ... and its col2im, over channels */
static void ocr__bf16_conv_col2im_part(void *arg, int64_t begin, int64_t end, int tid) {
    const ocr__bf16_conv_job *j = (const ocr__bf16_conv_job *)arg;
    (void)tid;
    ocr__bf16_conv_col2im(j, j->cur_n, j->cur_gr, j->cur_p0, j->cur_cols, j->cur_col, begin, end);
}

/* BWD_WEIGHT: part t owns the dw tiles [units t / parts, units (t+1) / parts) of the order (group, column panel,
   row panel) and sums every piece into them in the same order, so no two parts write the same value and the sums
   do not depend on the thread count. Per piece and group it builds only the im2col rows and B panels of its columns
   and the dy panels of its rows. */
static void ocr__bf16_conv_dw_part(void *arg, int64_t begin, int64_t end, int tid) {
    const ocr__bf16_conv_job *j = (const ocr__bf16_conv_job *)arg;
    const ocr__conv_geom *g = j->g;
    uint16_t *pb = (uint16_t *)j->buf[tid], *pa = pb + j->pb_elems;
    float *col = (float *)(pa + j->pa2_elems);
    int64_t part, n, c, gr, mr = j->kn.mr, nr = j->kn.nr, per_group = j->m_panels * j->n_panels;
    ocr__bf16_begin(&j->kn);
    for (part = begin; part < end; part++) {
        int64_t u0 = j->units * part / j->parts, u1 = j->units * (part + 1) / j->parts;
        if (u1 <= u0) continue;
        for (n = 0; n < g->N; n++)
            for (c = 0; c < j->n_chunks; c++) {
                int64_t p0 = c * j->chunk, cols = j->P - p0 < j->chunk ? j->P - p0 : j->chunk;
                for (gr = u0 / per_group; gr <= (u1 - 1) / per_group; gr++) {
                    int64_t l0 = (u0 > gr * per_group ? u0 - gr * per_group : 0), l1 = (u1 < (gr + 1) * per_group ? u1 - gr * per_group : per_group);
                    int64_t jp0 = l0 / j->m_panels, jp1 = (l1 - 1) / j->m_panels + 1, ip0 = 0, ip1 = j->m_panels, l, q;
                    int64_t r0 = jp0 * nr, r1 = jp1 * nr < j->kdim ? jp1 * nr : j->kdim, rbase = r0 / j->taps * j->taps;
                    const float *xg = j->x + (n * g->C + gr * j->Cg) * j->HW, *src;
                    int64_t ld;
                    if (jp1 - jp0 == 1) { ip0 = l0 % j->m_panels; ip1 = (l1 - 1) % j->m_panels + 1; }
                    if (j->pointwise) { src = xg + rbase * j->HW + p0; ld = j->HW; }
                    else { ocr__bf16_im2col_rows(j, xg, p0, cols, rbase, r1, col); src = col; ld = cols; }
                    for (q = jp0; q < jp1; q++)
                        ocr__bf16_pack_b(nr, src + (q * nr - rbase) * ld, ld, 1, cols, j->kp, r1 - q * nr < nr ? r1 - q * nr : nr,
                                         pb + (q - jp0) * nr * j->kp);
                    for (q = ip0; q < ip1; q++)
                        ocr__bf16_pack_a(mr, j->y + (n * g->K + gr * j->Kg + q * mr) * j->P + p0, j->P, 0,
                                         j->Kg - q * mr < mr ? j->Kg - q * mr : mr, cols, j->kp, pa + q * mr * j->kp);
                    for (l = l0; l < l1; l++) {
                        int64_t jp = l / j->m_panels, ip = l % j->m_panels, i0 = ip * mr, c0 = jp * nr;
                        ocr__bf16_tile(&j->kn, j->kp / 32, pa + ip * mr * j->kp, pb + (jp - jp0) * nr * j->kp,
                                       j->w + (gr * j->Kg + i0) * j->kdim + c0, j->kdim, 1.0f, j->Kg - i0 < mr ? j->Kg - i0 : mr,
                                       j->kdim - c0 < nr ? j->kdim - c0 : nr, 1);
                    }
                }
            }
    }
    ocr__bf16_end(&j->kn);
}

/* Per-thread buffers of the job's sizes (bytes each, 64-byte aligned parts) in OCR_SCRATCH_THREAD0 + t. */
static int ocr__bf16_conv_buffers(ocr_ctx *ctx, ocr__bf16_conv_job *j) {
    size_t bytes, t;
    j->pb_elems = (j->pb_elems + 31) & ~(size_t)31;
    j->pa2_elems = (j->pa2_elems + 31) & ~(size_t)31;
    if (!ocr_size_add(j->pb_elems + j->pa2_elems, 2 * j->col_floats, &bytes) || !ocr_size_mul(bytes, 2, &bytes))
        return ocr_error(ctx, OCR_EOVERFLOW, "conv (bf16): work buffers too large");
    for (t = 0; t < (size_t)ctx->n_threads; t++)
        if (!(j->buf[t] = ocr_ctx_scratch(ctx, OCR_SCRATCH_THREAD0 + (int)t, bytes ? bytes : 64))) return ctx->last_status;
    return OCR_OK;
}

static int ocr__bf16_conv_lowered(ocr_ctx *ctx, const ocr__conv_geom *g, int mode, float *x, float *w, float *y, int accumulate,
                                  const ocr__conv_epilogue *ep) {
    ocr__bf16_conv_job j;
    int64_t nr, mr, n_items;
    size_t bytes;
    int rc;
    memset(&j, 0, sizeof j);
    j.g = g; j.kn = ocr__bf16_pick(ctx); j.mode = mode; j.accumulate = accumulate; j.x = x; j.w = w; j.y = y;
    if (ep) j.ep = *ep;
    j.pointwise = ocr__conv_is_pointwise(g);
    j.Cg = g->C / g->groups; j.Kg = g->K / g->groups; j.taps = (int64_t)g->kh * g->kw; j.kdim = j.Cg * j.taps;
    j.P = g->OH * g->OW; j.HW = g->H * g->W;
    j.chunk = ocr__bf16_conv_chunk(g);
    mr = j.kn.mr; nr = j.kn.nr;
    if (mode == OCR__CONV_BWD_WEIGHT) {
        j.n_chunks = (j.P + j.chunk - 1) / j.chunk;
        j.kp = (j.chunk + 31) / 32 * 32;
        j.m_panels = (j.Kg + mr - 1) / mr;
        j.n_panels = (j.kdim + nr - 1) / nr;
        j.units = g->groups * j.m_panels * j.n_panels;
        j.parts = ctx->n_threads < j.units ? ctx->n_threads : j.units;
        j.pb_elems = (size_t)(j.n_panels * nr * j.kp);
        j.pa2_elems = (size_t)(j.m_panels * mr * j.kp);
        j.col_floats = j.pointwise ? 0 : (size_t)((j.kdim + j.taps) * j.chunk);
        if ((rc = ocr__bf16_conv_buffers(ctx, &j))) return rc;
        ocr_parallel_for(ctx, j.parts, 1, ocr__bf16_conv_dw_part, &j);
        return OCR_OK;
    }
    /* FWD and BWD_DATA: the weights packed once */
    j.kp = mode == OCR__CONV_FWD ? (j.kdim + 31) / 32 * 32 : (j.Kg + 31) / 32 * 32;
    j.a_panels = ((mode == OCR__CONV_FWD ? j.Kg : j.kdim) + mr - 1) / mr;
    j.pa_group = j.a_panels * mr * j.kp;
    if (!ocr_size_mul((size_t)(g->groups * j.pa_group), 2, &bytes)) return ocr_error(ctx, OCR_EOVERFLOW, "conv (bf16): weights too large");
    if (!(j.pa = (const uint16_t *)ocr_ctx_scratch(ctx, OCR_SCRATCH_GEMM_A, bytes))) return ctx->last_status;
    ocr_parallel_for(ctx, g->groups * j.a_panels, 1, ocr__bf16_conv_pack_w_part, &j);
    if (mode == OCR__CONV_FWD) {
        /* fewer pieces than threads: smaller chunks (a forward sum does not depend on the chunking) */
        if (g->N * g->groups * ((j.P + j.chunk - 1) / j.chunk) < ctx->n_threads) {
            int64_t per = (j.P + ctx->n_threads - 1) / ctx->n_threads;
            j.chunk = (per + nr - 1) / nr * nr;
        }
        j.n_chunks = (j.P + j.chunk - 1) / j.chunk;
        j.pb_elems = (size_t)((j.chunk + nr - 1) / nr * nr * j.kp);
        j.col_floats = j.pointwise ? 0 : (size_t)(j.kdim * j.chunk);
        if ((rc = ocr__bf16_conv_buffers(ctx, &j))) return rc;
        ocr_parallel_for_dynamic(ctx, g->N * g->groups * j.n_chunks, 1, ocr__bf16_conv_fwd_part, &j);
        return OCR_OK;
    }
    j.n_chunks = (j.P + j.chunk - 1) / j.chunk;
    j.pb_elems = (size_t)((j.chunk + nr - 1) / nr * nr * j.kp);
    j.col_floats = j.pointwise ? 0 : (size_t)(j.kdim * j.chunk);
    if ((rc = ocr__bf16_conv_buffers(ctx, &j))) return rc;
    n_items = g->N * g->groups;
    if (n_items >= ctx->n_threads) {
        ocr_parallel_for_dynamic(ctx, n_items, 1, ocr__bf16_conv_dx_part, &j);
        return OCR_OK;
    }
    j.cur_pb = (uint16_t *)j.buf[0];
    j.cur_col = (float *)(j.cur_pb + j.pb_elems + j.pa2_elems);
    for (j.cur_n = 0; j.cur_n < g->N; j.cur_n++)
        for (j.cur_gr = 0; j.cur_gr < g->groups; j.cur_gr++)
            for (j.cur_p0 = 0; j.cur_p0 < j.P; j.cur_p0 += j.chunk) {
                j.cur_cols = j.P - j.cur_p0 < j.chunk ? j.P - j.cur_p0 : j.chunk;
                ocr__bf16_conv_dy_panels(&j, j.cur_n, j.cur_gr, j.cur_p0, j.cur_cols, j.cur_pb);
                ocr_parallel_for(ctx, j.a_panels, 1, ocr__bf16_conv_dx_split_part, &j);
                if (!j.pointwise) ocr_parallel_for(ctx, j.Cg, 1, ocr__bf16_conv_col2im_part, &j);
            }
    return OCR_OK;
}
#endif

#ifdef OCR__HAVE_BF16
/* Kernel-width folding, for few input channels (Cg < 16: the stem's 3): the implicit paths below then count
   Ce = Cg kw "channels" e = c kw + kj, channel e being channel c read kj dw columns further right, and only kh taps
   (the kernel's rows): k = 7 x 32 for the 7x7 stem instead of 49 x 32, im2col's kw-fold copy without its kh-fold. */
static int ocr__bf16_fold(const ocr__conv_geom *g) { return g->C / g->groups < 16; }

/* The implicit forward convolution: no im2col. Work items are bands of R output rows of one (n, group). The band's
   input is converted into bf16 xv[phase a][phase b]..[2] holding x[2q, 2q+1][(oh0 + r) sh + a - ph][wq sw + b - pw]
   (zero outside the image and for channels past Cg, up to Cgp, a multiple of 32). With the k order (tap, channel),
   the B operand of a k step (a tap (ki, kj) and 16 channel pairs) for 16 output pixels is then 16 rows of 64
   contiguous bytes, one tile read in place at an offset fixed per k step (bofs). The pixels come in segments of 16,
   two per AMX call and three per AVX512_BF16 call, each B and C tile at its own segment's address, so C tiles store
   straight into y when a segment is 16 pixels of one output row (else through a buffer, which holds y's values first
   when accumulating: the same sums). Two layouts:
     rows      [r][q][wq][2]: a segment is 16 pixels of one output row (the last one of a row shorter); pair rows are
               Wq * 4 bytes apart. For rows of a multiple of 16 pixels, or nearly.
     virtual   [q][r][wq][2]: pixels are counted on virtual rows of Wq (the phase width), v = r Wq + wq, and a segment
               is any 16 consecutive v (the virtual columns past OW are computed and dropped); pair rows are a plane
               apart, so the band is kept short enough for planes of a few KB (16 planes of a whole image cost a TLB
               entry per row and half the speed). For narrow images (layer4's 20 pixels: 22 instead of 32).
   The weights are packed once as A panels in that k order; for Cg >= 16 the channel padding costs at most what
   im2col's data movement would. */
typedef struct {
    const ocr__conv_geom *g;
    ocr__bf16_kernel kn;
    const float *x, *w;
    float *y;
    int accumulate, flipped;  /* flipped: w is the kernel [C][K] of the convolution whose data gradient this is */
    int virt;                 /* the virtual layout */
    int fold;                 /* ocr__bf16_fold: channels e = c kw + kj, taps = kernel rows */
    ocr__conv_epilogue ep;
    int64_t Cg, Ce, Kg, Cgp, pairs, taps, kp, a_panels, pa_group, Wq, pw_phases, segs_row, R, Hb, row_stride, pair_stride, phase_elems, bands;
    uint16_t *pa;
    int64_t *bofs;
    void *buf[OCR_MAX_THREADS]; /* per thread: a band's planes, or mr rows of weights (floats) while packing */
} ocr__bf16_implicit_job;

/* Work items (group, A panel of mr output channels): their rows of w in (tap, channel) order, Cg padded to Cgp, into
   the thread's buffer, then packed. */
static void ocr__bf16_implicit_pack_w_part(void *arg, int64_t begin, int64_t end, int tid) {
    const ocr__bf16_implicit_job *j = (const ocr__bf16_implicit_job *)arg;
    int64_t item, i, c, t, mr = j->kn.mr;
    float *rows = (float *)j->buf[tid];
    for (item = begin; item < end; item++) {
        int64_t gr = item / j->a_panels, k0 = item % j->a_panels * mr;
        memset(rows, 0, sizeof(float) * (size_t)(mr * j->kp));
        for (i = 0; i < mr && k0 + i < j->Kg; i++) {
            int64_t k = k0 + i;
            float *row = rows + i * j->kp;
            if (j->flipped) { /* groups 1: tap t of (k, c) is w[c][k][taps - 1 - t] */
                for (c = 0; c < j->Cg; c++)
                    for (t = 0; t < j->taps; t++) row[t * j->Cgp + c] = j->w[(c * j->g->K + k) * j->taps + j->taps - 1 - t];
            } else if (j->fold) { /* w[k][c][ki][kj] at tap ki, channel c kw + kj */
                const float *wk = j->w + (gr * j->Kg + k) * j->Cg * j->g->kh * j->g->kw;
                for (c = 0; c < j->Cg; c++)
                    for (t = 0; t < j->g->kh * j->g->kw; t++) row[t / j->g->kw * j->Cgp + c * j->g->kw + t % j->g->kw] = wk[c * j->g->kh * j->g->kw + t];
            } else {
                const float *wk = j->w + (gr * j->Kg + k) * j->Cg * j->taps;
                for (c = 0; c < j->Cg; c++)
                    for (t = 0; t < j->taps; t++) row[t * j->Cgp + c] = wk[c * j->taps + t];
            }
        }
        ocr__bf16_pack_a(mr, rows, j->kp, 0, mr, j->kp, j->kp, j->pa + gr * j->pa_group + k0 * j->kp);
    }
}

/* The output columns wq whose input column wq sw + off lies in [0, W): [first, last]. */
typedef struct { int64_t first, last, off; } ocr__bf16_cols;
static ocr__bf16_cols ocr__bf16_valid_cols(const ocr__conv_geom *g, int64_t off) {
    ocr__bf16_cols c;
    c.off = off;
    c.first = off >= 0 ? 0 : (-off + g->sw - 1) / g->sw;
    c.last = g->W - 1 - off < 0 ? -1 : (g->W - 1 - off) / g->sw;
    return c;
}

/* 16 lanes of row ih of a channel plane xc: lane l holds x[ih][(w0 + l) sw + off] (zero outside the image) */
OCR__BF16_TARGET static inline __m512 ocr__bf16_lanes16(const ocr__conv_geom *g, const float *xc, int64_t ih, int64_t w0, const ocr__bf16_cols *cv) {
    int64_t lo = cv->first - w0 > 0 ? cv->first - w0 : 0, hi = cv->last + 1 - w0 < 16 ? cv->last + 1 - w0 : 16, iw0;
    __mmask16 m;
    if (hi <= lo) return _mm512_setzero_ps();
    m = (__mmask16)(ocr__lanes(hi) & ~ocr__lanes(lo));
    iw0 = (w0 + lo) * g->sw + cv->off; /* the first valid column */
    if (g->sw == 1) return m == 0xFFFF ? _mm512_loadu_ps(xc + ih * g->W + iw0) : _mm512_maskz_expandloadu_ps(m, xc + ih * g->W + iw0);
    if (g->sw == 2 && m == 0xFFFF) return ocr__even16_avx512(xc + ih * g->W + iw0, 16); /* two loads and a permute, not a gather */
    return _mm512_mask_i32gather_ps(_mm512_setzero_ps(), m,
                                    _mm512_mullo_epi32(_mm512_sub_epi32(_mm512_set_epi32(15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0),
                                                                        _mm512_set1_epi32((int)lo)), _mm512_set1_epi32((int)g->sw)),
                                    xc + ih * g->W + iw0, 4);
}

/* Band rows [oh0, oh0 + Hb) of (n, group) into xv, 16 columns of a channel pair at a time. The valid columns of each
   channel's column offset are found once per pair, not per 16 lanes (their divisions took longer than the loads). */
OCR__BF16_TARGET static void ocr__bf16_implicit_convert(const ocr__bf16_implicit_job *j, int64_t n, int64_t gr, int64_t oh0, uint16_t *xv) {
    const ocr__conv_geom *g = j->g;
    int64_t a, b, r, q, h, w0, HW = g->H * g->W;
    const float *xg = j->x + (n * g->C + gr * j->Cg) * HW;
    for (a = 0; a < g->sh; a++)
        for (b = 0; b < j->pw_phases; b++)
            for (q = 0; q < j->pairs; q++) {
                const float *xc[2];
                ocr__bf16_cols cv[2];
                for (h = 0; h < 2; h++) { /* channel e = 2q + h: image channel and column offset */
                    int64_t e = 2 * q + h, c = j->fold ? e / g->kw : e;
                    xc[h] = e < j->Ce ? xg + c * HW : NULL;
                    cv[h] = ocr__bf16_valid_cols(g, b - g->pw + (j->fold ? e % g->kw * g->dw : 0));
                }
                for (r = 0; r < j->Hb; r++) {
                    int64_t ih = (oh0 + r) * g->sh + a - g->ph;
                    uint16_t *d = xv + (a * j->pw_phases + b) * j->phase_elems + r * j->row_stride + q * j->pair_stride;
                    if (ih < 0 || ih >= g->H || !xc[0]) { memset(d, 0, (size_t)j->Wq * 4); continue; }
                    for (w0 = 0; w0 < j->Wq; w0 += 16) {
                        __m512 lo = ocr__bf16_lanes16(g, xc[0], ih, w0, &cv[0]);
                        __m512 hi = xc[1] ? ocr__bf16_lanes16(g, xc[1], ih, w0, &cv[1]) : _mm512_setzero_ps();
                        _mm512_mask_storeu_epi32(d + 2 * w0, ocr__lanes(j->Wq - w0), ocr__bf16_pairs(lo, hi));
                    }
                }
            }
}

/* Segment sg of a band with rows_b rows: its offset in xv, and whether it is 16 valid pixels of one output row
   (then *yoff is its first pixel's offset in the band's rows of y). */
static int64_t ocr__bf16_segment(const ocr__bf16_implicit_job *j, int64_t sg, int64_t rows_b, int64_t *yoff, int *whole) {
    int64_t oh, ow;
    if (j->virt) { oh = sg * 16 / j->Wq; ow = sg * 16 % j->Wq; }
    else { oh = sg / j->segs_row; ow = sg % j->segs_row * 16; }
    *yoff = oh * j->g->OW + ow;
    *whole = ow + 16 <= j->g->OW && oh < rows_b;
    return oh * j->row_stride + ow * 2;
}

/* Between buffer columns [16 e, 16 e + 16) (rows ld apart) and segment sg's pixels of y (rows of P from yp): to_y
   stores its valid pixels, else they are loaded. */
static void ocr__bf16_segment_copy(const ocr__bf16_implicit_job *j, int64_t sg, int64_t rows_b, float *col, int64_t ld, float *yp,
                                   int64_t rows, int to_y) {
    const ocr__conv_geom *g = j->g;
    int64_t P = g->OH * g->OW, lane = 0, i;
    while (lane < 16) { /* the segment's pieces of output rows */
        int64_t oh, ow, len;
        if (j->virt) { int64_t v = sg * 16 + lane; oh = v / j->Wq; ow = v % j->Wq; len = j->Wq - ow < 16 - lane ? j->Wq - ow : 16 - lane; }
        else { oh = sg / j->segs_row; ow = sg % j->segs_row * 16 + lane; len = 16; }
        if (oh < rows_b && ow < g->OW) {
            int64_t cnt = g->OW - ow < len ? g->OW - ow : len;
            float *yc = yp + oh * g->OW + ow;
            for (i = 0; i < rows; i++) {
                if (to_y) memcpy(yc + i * P, col + i * ld + lane, (size_t)cnt * sizeof(float));
                else memcpy(col + i * ld + lane, yc + i * P, (size_t)cnt * sizeof(float));
            }
        }
        lane += len;
    }
}

/* Work items (n, group, band of R output rows): the band's planes, then each A panel against every group of
   segments, into y (added when accumulating, else followed by the epilogue over the band). */
static void ocr__bf16_implicit_part(void *arg, int64_t begin, int64_t end, int tid) {
    const ocr__bf16_implicit_job *j = (const ocr__bf16_implicit_job *)arg;
    const ocr__conv_geom *g = j->g;
    int64_t item, ip, sg, e, mr = j->kn.mr, P = g->OH * g->OW, ks = j->kp / 32;
    int64_t per_call = j->kn.nr / 16; /* segments per call */
    uint16_t *xv = (uint16_t *)j->buf[tid];
    float buf[OCR__BF16_TILE_MAX];
    ocr__bf16_operands o;
    memset(&o, 0, sizeof o);
    o.bofs = j->bofs; o.bld = j->pair_stride; o.astep = 32 * mr; o.ald = 32; o.a1 = 16 * 32;
    ocr__bf16_begin(&j->kn);
    for (item = begin; item < end; item++) {
        int64_t pair = item / j->bands, n = pair / g->groups, gr = pair % g->groups, oh0 = item % j->bands * j->R;
        int64_t rows_b = g->OH - oh0 < j->R ? g->OH - oh0 : j->R;
        int64_t nseg = j->virt ? (rows_b * j->Wq + 15) / 16 : rows_b * j->segs_row;
        float *yg = j->y + (n * g->K + gr * j->Kg) * P + oh0 * g->OW;
        ocr__bf16_implicit_convert(j, n, gr, oh0, xv);
        for (ip = 0; ip < j->a_panels; ip++) {
            int64_t rows = j->Kg - ip * mr < mr ? j->Kg - ip * mr : mr;
            float *yp = yg + ip * mr * P;
            o.a = j->pa + gr * j->pa_group + ip * mr * j->kp;
            for (sg = 0; sg < nseg; sg += per_call) {
                int64_t xoff[3], yoff[3];
                int direct = rows == mr, whole;
                for (e = 0; e < per_call; e++) { /* past the band's last segment: the first one again, not stored */
                    xoff[e] = ocr__bf16_segment(j, sg + e < nseg ? sg + e : sg, rows_b, &yoff[e], &whole);
                    direct &= whole && sg + e < nseg;
                }
                o.b = xv + xoff[0]; o.b1 = xoff[1] - xoff[0]; o.b2 = per_call > 2 ? xoff[2] - xoff[0] : 0;
                if (direct) {
                    o.c1 = yoff[1] - yoff[0]; o.c2 = per_call > 2 ? yoff[2] - yoff[0] : 0;
                    ocr__bf16_ukernel(&j->kn, ks, &o, yp + yoff[0], P, j->accumulate);
                    continue;
                }
                o.c1 = 16; o.c2 = 32;
                memset(buf, 0, sizeof(float) * (size_t)(mr * 16 * per_call));
                for (e = 0; e < per_call && j->accumulate; e++)
                    if (sg + e < nseg) ocr__bf16_segment_copy(j, sg + e, rows_b, buf + 16 * e, 16 * per_call, yp, rows, 0);
                ocr__bf16_ukernel(&j->kn, ks, &o, buf, 16 * per_call, j->accumulate);
                for (e = 0; e < per_call; e++)
                    if (sg + e < nseg) ocr__bf16_segment_copy(j, sg + e, rows_b, buf + 16 * e, 16 * per_call, yp, rows, 1);
            }
        }
        if (!j->accumulate) ocr__conv_epilogue_apply(&j->ep, yg, P, gr * j->Kg, j->Kg, rows_b * g->OW);
    }
    ocr__bf16_end(&j->kn);
}

static int ocr__bf16_implicit_ok(const ocr__conv_geom *g) { return g->C / g->groups >= 16 || (int64_t)g->C / g->groups * g->kw <= 64; }

/* y (= or +=) conv(x, w) on the implicit path; flipped: w is the kernel of the convolution g is the data gradient of
   (groups 1). Scratch: the packed weights in OCR_SCRATCH_GEMM_A, the k-step offsets in GEMM_B, the per-thread band
   planes in THREAD0 + t. */
static int ocr__bf16_conv_implicit(ocr_ctx *ctx, const ocr__conv_geom *g, const float *x, const float *w, int flipped, float *y,
                                   int accumulate, const ocr__conv_epilogue *ep) {
    ocr__bf16_implicit_job j;
    int64_t s, t, rmax, cmax, mr, band_elems, row_bytes;
    size_t bytes_w, bytes_t;
    memset(&j, 0, sizeof j);
    j.g = g; j.kn = ocr__bf16_pick(ctx); j.x = x; j.w = w; j.flipped = flipped; j.y = y; j.accumulate = accumulate;
    if (ep) j.ep = *ep;
    mr = j.kn.mr;
    j.fold = ocr__bf16_fold(g);
    j.Cg = g->C / g->groups; j.Kg = g->K / g->groups; j.Ce = j.fold ? j.Cg * g->kw : j.Cg; j.Cgp = (j.Ce + 31) / 32 * 32;
    j.pairs = j.Cgp / 2;
    j.taps = j.fold ? g->kh : (int64_t)g->kh * g->kw;
    j.kp = j.taps * j.Cgp;
    j.a_panels = (j.Kg + mr - 1) / mr;
    j.pa_group = j.a_panels * mr * j.kp;
    j.segs_row = (g->OW + 15) / 16;
    rmax = (int64_t)(g->kh - 1) * g->dh / g->sh;
    cmax = j.fold ? 0 : (int64_t)(g->kw - 1) * g->dw / g->sw;
    j.pw_phases = j.fold ? 1 : g->sw;                   /* folded: the columns are gathered, not phase-split */
    j.Wq = j.fold ? g->OW : (g->W + 2 * g->pw + g->sw - 1) / g->sw;
    /* rows of 16-pixel segments unless they waste more than an eighth of a row */
    j.virt = (j.segs_row * 16 - g->OW) * 8 > g->OW;
    if (!j.virt && j.Wq < j.segs_row * 16 + cmax) j.Wq = j.segs_row * 16 + cmax; /* what the last segment of a row reads */
    row_bytes = (int64_t)g->sh * j.pw_phases * j.pairs * j.Wq * 4;
    /* bands of about 768 KB of planes (they stay in L2 while every A panel passes; with 384 KB, 256 channels of a
       320-pixel row made 2-row bands that converted each input row twice: 5-10% slower), in the virtual layout at
       most 4 KB per plane; fewer rows when that leaves a thread without two bands; the split changes no sum */
    j.R = ((int64_t)768 << 10) / row_bytes;
    if (j.virt && j.R > 1024 / j.Wq - rmax - 2) j.R = 1024 / j.Wq - rmax - 2;
    if (j.R < 1) j.R = 1;
    if (j.R > g->OH) j.R = g->OH;
    if (g->N * g->groups * ((g->OH + j.R - 1) / j.R) < 2 * ctx->n_threads) {
        int64_t want = (2 * ctx->n_threads + g->N * g->groups - 1) / (g->N * g->groups);
        j.R = (g->OH + want - 1) / want;
    }
    j.bands = (g->OH + j.R - 1) / j.R;
    if (j.virt) { /* rows the last segment group's tiles may read past the band, as in the rows layout */
        j.Hb = ((j.R * j.Wq + 15) / 16 * 16 + cmax + j.Wq - 1) / j.Wq + rmax;
        j.row_stride = j.Wq * 2;
        j.pair_stride = j.Hb * j.Wq * 2;
    } else {
        j.Hb = j.R + rmax;
        j.row_stride = j.pairs * j.Wq * 2;
        j.pair_stride = j.Wq * 2;
    }
    j.phase_elems = j.Hb * j.pairs * j.Wq * 2;
    band_elems = (int64_t)g->sh * j.pw_phases * j.phase_elems;
    if (!ocr_size_mul((size_t)(g->groups * j.pa_group), 2, &bytes_w) ||
        !ocr_size_mul((size_t)(band_elems > 2 * mr * j.kp ? band_elems : 2 * mr * j.kp), 2, &bytes_t))
        return ocr_error(ctx, OCR_EOVERFLOW, "conv (bf16): work buffers too large");
    if (!(j.pa = (uint16_t *)ocr_ctx_scratch(ctx, OCR_SCRATCH_GEMM_A, bytes_w)) ||
        !(j.bofs = (int64_t *)ocr_ctx_scratch(ctx, OCR_SCRATCH_GEMM_B, (size_t)(j.kp / 32) * sizeof(int64_t))))
        return ctx->last_status;
    for (t = 0; t < ctx->n_threads; t++)
        if (!(j.buf[t] = ocr_ctx_scratch(ctx, OCR_SCRATCH_THREAD0 + (int)t, bytes_t))) return ctx->last_status;
    for (s = 0; s < j.kp / 32; s++) {
        int64_t tap = s * 32 / j.Cgp, c0 = s * 32 % j.Cgp, ki = j.fold ? tap : tap / g->kw, kj = j.fold ? 0 : tap % g->kw;
        int64_t a = ki * g->dh % g->sh, b = kj * g->dw % g->sw, ro = ki * g->dh / g->sh, co = kj * g->dw / g->sw;
        j.bofs[s] = (a * j.pw_phases + b) * j.phase_elems + ro * j.row_stride + c0 / 2 * j.pair_stride + co * 2;
    }
    ocr_parallel_for(ctx, g->groups * j.a_panels, 1, ocr__bf16_implicit_pack_w_part, &j);
    ocr_parallel_for_dynamic(ctx, g->N * g->groups * j.bands, 1, ocr__bf16_implicit_part, &j);
    return OCR_OK;
}

/* The implicit weight gradient: dW[k][(tap, c)] += sum over pixels of dy[k][px] x_tap[px][c], a GEMM with the pixels
   as k, without im2col. Pixels are counted on the virtual rows of the forward path (u = oh Wq + ow, Wq the phase
   width), in blocks of 32. Converted once per call (in parallel):
     dyb[n, group][block][Kgp][32]      dy's rows by 32-pixel blocks, zero past OW and Kg: an A tile is 1 KB in one piece
     xl[n, group][phase][shift][m][Cgp][2]  pixel pairs (u, u + 1) = (2m + shift, 2m + 1 + shift) of each phase plane,
                                        channels inner: a B tile (16 pairs, 16 channels of one tap) is 16 rows of 64 bytes
                                        Cgp * 4 apart; a tap at an odd offset reads the shift-1 copy
   dW (k order (tap, channel), Cg padded to Cgp per tap) is summed in fp32 panels of nr columns that each thread owns
   (so no two threads write the same value and every sum runs in the same order on any number of threads), in chunks
   of pixels short enough for dy's chunk to stay in L2 while the thread's panels pass; then added into dw. */
typedef struct {
    const ocr__conv_geom *g;
    ocr__bf16_kernel kn;
    const float *x, *dy;
    float *dw;
    int fold;                   /* ocr__bf16_fold: channels e = c kw + kj, taps = kernel rows */
    int64_t Cg, Ce, Kg, Cgp, Kgp, taps, kp, kpp, Wq, PV, nblk, npairs, phases, pw_phases, m_panels, n_panels, units, parts, chunk, nblock;
    uint16_t *dyb, *xl;
    float *dwp;                 /* per group [Kgp][kpp] */
} ocr__bf16_wgrad_job;

/* n values of virtual pixels [u0, u0 + n) of a plane into dst: virtual pixel u = r Wq + wq is src[r sh + a][wq sw + b]
   of the H x W plane src, zero outside it (a, b may be negative: the padding). Row by row, the valid columns found
   once per row. */
static void ocr__bf16_virtual_pixels(const float *src, int64_t H, int64_t W, int64_t sh, int64_t sw, int64_t a, int64_t b, int64_t Wq,
                                     int64_t u0, int64_t n, float *dst) {
    int64_t u = u0, q;
    while (u < u0 + n) {
        int64_t r = u / Wq, w0 = u % Wq, len = Wq - w0 < u0 + n - u ? Wq - w0 : u0 + n - u, ih = r * sh + a, lo, hi;
        float *d = dst + (u - u0) - w0; /* d[wq] is virtual column wq of this row */
        /* columns wq with 0 <= wq sw + b < W, clipped to [w0, w0 + len) */
        lo = b >= 0 ? 0 : (-b + sw - 1) / sw;
        hi = W - b <= 0 ? 0 : (W - b - 1) / sw + 1;
        if (lo < w0) lo = w0;
        if (hi > w0 + len) hi = w0 + len;
        if (ih < 0 || ih >= H || hi <= lo) lo = hi = w0 + len;
        for (q = w0; q < lo; q++) d[q] = 0.0f;
        if (hi > lo) {
            const float *s = src + ih * W + b;
            if (sw == 1) memcpy(d + lo, s + lo, (size_t)(hi - lo) * sizeof(float));
            else for (q = lo; q < hi; q++) d[q] = s[q * sw];
        }
        for (q = hi; q < w0 + len; q++) d[q] = 0.0f;
        u += len;
    }
}

/* Work items (n, group, row k < Kgp): dy's row as dyb blocks (its virtual rows: OW pixels, then zeros to Wq), 1024
   virtual pixels at a time through a row of floats. */
OCR__BF16_TARGET static void ocr__bf16_wgrad_dy_part(void *arg, int64_t begin, int64_t end, int tid) {
    const ocr__bf16_wgrad_job *j = (const ocr__bf16_wgrad_job *)arg;
    const ocr__conv_geom *g = j->g;
    int64_t item, b0, blk, P = g->OH * g->OW;
    float row[1024];
    (void)tid;
    for (item = begin; item < end; item++) {
        int64_t ng = item / j->Kgp, k = item % j->Kgp, n = ng / g->groups, gr = ng % g->groups;
        const float *dyk = j->dy + ((n * g->K + gr * j->Kg + k) * P);
        uint16_t *dst = j->dyb + ng * j->nblk * j->Kgp * 32 + k * 32;
        for (b0 = 0; b0 < j->nblk; b0 += 32) {
            int64_t nb = j->nblk - b0 < 32 ? j->nblk - b0 : 32;
            if (k < j->Kg) ocr__bf16_virtual_pixels(dyk, g->OH, g->OW, 1, 1, 0, 0, j->Wq, b0 * 32, nb * 32, row);
            else memset(row, 0, sizeof row);
            for (blk = 0; blk < nb; blk++) ocr__bf16_row32(row + 32 * blk, 32, dst + (b0 + blk) * j->Kgp * 32);
        }
    }
}

/* Work items (n, group, phase, 16 channels, 256 pixel pairs): those pairs in both shifts, the 16 channels' virtual
   pixels gathered into rows of floats first, then 16 pairs x 16 channels at a time rounded (dwords of two pixels)
   and transposed. */
OCR__BF16_TARGET static void ocr__bf16_wgrad_x_part(void *arg, int64_t begin, int64_t end, int tid) {
    const ocr__bf16_wgrad_job *j = (const ocr__bf16_wgrad_job *)arg;
    const ocr__conv_geom *g = j->g;
    int64_t item, shift, mb, cc, HW = g->H * g->W, cblocks = j->Cgp / 16, pblocks = (j->npairs + 255) / 256;
    float vals[16][514], t[256];
    (void)tid;
    for (item = begin; item < end; item++) {
        int64_t rest = item / pblocks, m0 = item % pblocks * 256, m1 = m0 + 256 < j->npairs ? m0 + 256 : j->npairs;
        int64_t ngp = rest / cblocks, c0 = rest % cblocks * 16, ng = ngp / j->phases, ph = ngp % j->phases;
        int64_t n = ng / g->groups, gr = ng % g->groups, a = ph / j->pw_phases, b = ph % j->pw_phases;
        for (cc = 0; cc < 16; cc++) {
            int64_t e = c0 + cc, c = j->fold ? e / g->kw : e, off = b - g->pw + (j->fold ? e % g->kw * g->dw : 0);
            if (e < j->Ce)
                ocr__bf16_virtual_pixels(j->x + (n * g->C + gr * j->Cg + c) * HW, g->H, g->W, g->sh, g->sw, a - g->ph, off, j->Wq, 2 * m0,
                                         2 * (m1 - m0) + 2, vals[cc]);
            else memset(vals[cc], 0, sizeof vals[cc]);
        }
        for (shift = 0; shift < 2; shift++) {
            uint16_t *base = j->xl + ((ng * j->phases + ph) * 2 + shift) * j->npairs * j->Cgp * 2;
            for (mb = m0; mb < m1; mb += 16) { /* npairs is a multiple of 16 */
                for (cc = 0; cc < 16; cc++) ocr__bf16_row32(vals[cc] + 2 * (mb - m0) + shift, 32, (uint16_t *)(t + 16 * cc));
                ocr__transpose16(t, 16, (float *)(base + (mb * j->Cgp + c0) * 2), j->Cgp);
            }
        }
    }
}

/* B's address for the column group of 16 starting at dW column col (k order (tap, channel)) at pixel block 0 of
   (n, group) ng; a column past kp (the partial last panel of the 48-wide kernel) reads column 0's. */
static const uint16_t *ocr__bf16_wgrad_b(const ocr__bf16_wgrad_job *j, int64_t ng, int64_t col) {
    const ocr__conv_geom *g = j->g;
    int64_t tap = col < j->kp ? col / j->Cgp : 0, c0 = col < j->kp ? col % j->Cgp : 0, ki = j->fold ? tap : tap / g->kw, kj = j->fold ? 0 : tap % g->kw;
    int64_t ph = (ki * g->dh % g->sh) * j->pw_phases + kj * g->dw % g->sw, off = ki * g->dh / g->sh * j->Wq + kj * g->dw / g->sw, shift = off & 1;
    return j->xl + ((ng * j->phases + ph) * 2 + shift) * j->npairs * j->Cgp * 2 + ((off - shift) / 2 * j->Cgp + c0) * 2;
}

/* One part per thread: its dW panels [units part / parts, units (part + 1) / parts) of the order (group, panel),
   nblock panels at a time, over every image and chunk of pixel blocks; then added into dw. */
static void ocr__bf16_wgrad_part(void *arg, int64_t begin, int64_t end, int tid) {
    const ocr__bf16_wgrad_job *j = (const ocr__bf16_wgrad_job *)arg;
    const ocr__conv_geom *g = j->g;
    int64_t part, u, ub, n, b0, ip, k, c, t, mr = j->kn.mr, nr = j->kn.nr, per_call = nr / 16;
    ocr__bf16_operands o;
    (void)tid;
    memset(&o, 0, sizeof o);
    o.ald = 32; o.a1 = 16 * 32; o.astep = j->Kgp * 32; o.bstep = 32 * j->Cgp; o.bld = 2 * j->Cgp; o.c1 = 16; o.c2 = 32;
    ocr__bf16_begin(&j->kn);
    for (part = begin; part < end; part++) {
        int64_t u0 = j->units * part / j->parts, u1 = j->units * (part + 1) / j->parts;
        for (u = u0; u < u1; u++) { /* the part's columns of dW start from zero */
            float *dp = j->dwp + (u / j->n_panels) * j->Kgp * j->kpp + u % j->n_panels * nr;
            for (k = 0; k < j->Kgp; k++) memset(dp + k * j->kpp, 0, (size_t)nr * sizeof(float));
        }
        for (ub = u0; ub < u1; ub += j->nblock)
            for (n = 0; n < g->N; n++)
                for (b0 = 0; b0 < j->nblk; b0 += j->chunk) {
                    int64_t ks = j->nblk - b0 < j->chunk ? j->nblk - b0 : j->chunk;
                    for (ip = 0; ip < j->m_panels; ip++) /* the A panel's chunk stays near while the panels pass */
                        for (u = ub; u < u1 && u < ub + j->nblock; u++) {
                            int64_t gr = u / j->n_panels, col = u % j->n_panels * nr, ng = n * g->groups + gr, e;
                            const uint16_t *bp[3];
                            for (e = 0; e < 3; e++) bp[e] = ocr__bf16_wgrad_b(j, ng, e < per_call ? col + 16 * e : col);
                            o.b = bp[0] + b0 * o.bstep; o.b1 = bp[1] - bp[0]; o.b2 = per_call > 2 ? bp[2] - bp[0] : 0;
                            o.a = j->dyb + ((ng * j->nblk + b0) * j->Kgp + ip * mr) * 32;
                            ocr__bf16_ukernel(&j->kn, ks, &o, j->dwp + (gr * j->Kgp + ip * mr) * j->kpp + col, j->kpp, 1);
                        }
                }
        for (u = u0; u < u1; u++) { /* dw[k][c][tap] += dW[k][tap Cgp + c] over the panel's real columns */
            int64_t gr = u / j->n_panels, col0 = u % j->n_panels * nr, col1 = col0 + nr < j->kp ? col0 + nr : j->kp, col;
            for (k = 0; k < j->Kg; k++) {
                const float *dp = j->dwp + (gr * j->Kgp + k) * j->kpp;
                float *wk = j->dw + (gr * j->Kg + k) * j->Cg * g->kh * g->kw;
                for (t = col0 / j->Cgp, col = col0; col < col1; t++) { /* the columns' taps, each a run of channels */
                    int64_t cend = (t + 1) * j->Cgp < col1 ? (t + 1) * j->Cgp : col1;
                    for (c = col - t * j->Cgp; col < cend; col++, c++) {
                        if (c >= j->Ce) continue;
                        if (j->fold) wk[(c / g->kw * g->kh + t) * g->kw + c % g->kw] += dp[col]; /* e = c kw + kj at row t */
                        else wk[c * j->taps + t] += dp[col];
                    }
                }
            }
        }
    }
    ocr__bf16_end(&j->kn);
}

/* dw += dy (x) x on the implicit path. Scratch: dyb in OCR_SCRATCH_OP0, xl in OP1, dW in GEMM_A. */
static int ocr__bf16_conv_wgrad(ocr_ctx *ctx, const ocr__conv_geom *g, const float *x, const float *dy, float *dw) {
    ocr__bf16_wgrad_job j;
    int64_t rmax, cmax;
    size_t bytes_dy, bytes_x, bytes_w;
    memset(&j, 0, sizeof j);
    j.g = g; j.kn = ocr__bf16_pick(ctx); j.x = x; j.dy = dy; j.dw = dw;
    j.fold = ocr__bf16_fold(g);
    j.Cg = g->C / g->groups; j.Kg = g->K / g->groups; j.Ce = j.fold ? j.Cg * g->kw : j.Cg;
    j.Cgp = (j.Ce + 31) / 32 * 32; j.Kgp = (j.Kg + 31) / 32 * 32;
    j.taps = j.fold ? g->kh : (int64_t)g->kh * g->kw;
    j.kp = j.taps * j.Cgp;
    j.kpp = (j.kp + j.kn.nr - 1) / j.kn.nr * j.kn.nr;
    j.pw_phases = j.fold ? 1 : g->sw;
    j.Wq = j.fold ? g->OW : (g->W + 2 * g->pw + g->sw - 1) / g->sw;
    if (j.Wq < g->OW) j.Wq = g->OW;
    j.PV = g->OH * j.Wq;
    j.nblk = (j.PV + 31) / 32;
    rmax = (int64_t)(g->kh - 1) * g->dh / g->sh;
    cmax = j.fold ? 0 : (int64_t)(g->kw - 1) * g->dw / g->sw;
    j.npairs = (j.nblk * 32 + rmax * j.Wq + cmax + 2) / 2 + 1;
    j.npairs = (j.npairs + 15) / 16 * 16;
    j.phases = (int64_t)g->sh * j.pw_phases;
    j.m_panels = j.Kgp / j.kn.mr;
    j.n_panels = j.kpp / j.kn.nr;
    j.units = g->groups * j.n_panels;
    j.parts = ctx->n_threads < j.units ? ctx->n_threads : j.units;
    /* pixel blocks per chunk: an A panel's chunk 64 KB (L1 and L2); panels per pass: their dW tiles about 256 KB (L2) */
    j.chunk = ((int64_t)64 << 10) / (j.kn.mr * 64);
    j.nblock = ((int64_t)256 << 10) / (j.Kgp * j.kn.nr * 4);
    if (j.nblock < 1) j.nblock = 1;
    if (!ocr_size_mul((size_t)(g->N * g->groups * j.nblk * j.Kgp * 32), 2, &bytes_dy) ||
        !ocr_size_mul((size_t)(g->N * g->groups * j.phases * 2 * j.npairs), (size_t)j.Cgp * 4, &bytes_x) ||
        !ocr_size_mul((size_t)(g->groups * j.Kgp * j.kpp), 4, &bytes_w))
        return ocr_error(ctx, OCR_EOVERFLOW, "conv (bf16): work buffers too large");
    if (!(j.dyb = (uint16_t *)ocr_ctx_scratch(ctx, OCR_SCRATCH_OP0, bytes_dy)) || !(j.xl = (uint16_t *)ocr_ctx_scratch(ctx, OCR_SCRATCH_OP1, bytes_x)) ||
        !(j.dwp = (float *)ocr_ctx_scratch(ctx, OCR_SCRATCH_GEMM_A, bytes_w)))
        return ctx->last_status;
    ocr_parallel_for(ctx, g->N * g->groups * j.Kgp, 1, ocr__bf16_wgrad_dy_part, &j);
    ocr_parallel_for(ctx, g->N * g->groups * j.phases * (j.Cgp / 16) * ((j.npairs + 255) / 256), 1, ocr__bf16_wgrad_x_part, &j);
    ocr_parallel_for(ctx, j.parts, 1, ocr__bf16_wgrad_part, &j);
    return OCR_OK;
}

/* dx += conv^T(dy, w) of a stride-1 ungrouped convolution as the implicit forward convolution of dy with the kernel
   flipped and its channel axes swapped (padding dil (k - 1) - pad), as ocr__conv_backward_data does in fp32; 0 when
   the geometry does not allow it. */
static int ocr__bf16_dx_flippable(const ocr__conv_geom *g) {
    return g->sh == 1 && g->sw == 1 && g->groups == 1 && (int64_t)g->dh * (g->kh - 1) - g->ph >= 0 &&
           (int64_t)g->dw * (g->kw - 1) - g->pw >= 0 && !ocr__conv_is_pointwise(g) && g->K >= 16;
}

static int ocr__bf16_conv_dx_flipped(ocr_ctx *ctx, const ocr__conv_geom *g, float *dx, const float *w, const float *dy) {
    ocr__conv_geom t = *g;
    t.C = g->K; t.H = g->OH; t.W = g->OW;
    t.K = g->C; t.OH = g->H; t.OW = g->W;
    t.ph = g->dh * (g->kh - 1) - g->ph; t.pw = g->dw * (g->kw - 1) - g->pw;
    return ocr__bf16_conv_implicit(ctx, &t, dy, w, 1, dx, 1, NULL);
}
#endif

/* ocr__conv_run's modes and buffers (FWD: y = or += conv(x, w), then ep's bias and ReLU unless accumulating;
   BWD_DATA: x += conv^T(y, w), x being dx; BWD_WEIGHT: w += y (x) x, w being dw and y dy) with the inputs rounded
   to bf16 and fp32 sums. */
static int ocr__conv_bf16_run(ocr_ctx *ctx, const ocr__conv_geom *g, int mode, float *x, float *w, float *y, int accumulate,
                              const ocr__conv_epilogue *ep) {
    if (g->N == 0 || g->K == 0 || g->OH * g->OW == 0) return OCR_OK;
    if (ocr__bf16_kind(ctx) == OCR__BF16_NONE) return ocr__conv_bf16_fallback(ctx, g, mode, x, w, y, accumulate, ep);
#ifdef OCR__HAVE_BF16
    if (mode == OCR__CONV_FWD && ocr__bf16_implicit_ok(g)) return ocr__bf16_conv_implicit(ctx, g, x, w, 0, y, accumulate, ep);
    if (mode == OCR__CONV_BWD_DATA && ocr__bf16_dx_flippable(g)) return ocr__bf16_conv_dx_flipped(ctx, g, x, w, y);
    if (mode == OCR__CONV_BWD_WEIGHT && ocr__bf16_implicit_ok(g)) return ocr__bf16_conv_wgrad(ctx, g, x, y, w);
    return ocr__bf16_conv_lowered(ctx, g, mode, x, w, y, accumulate, ep);
#else
    return OCR_OK;
#endif
}

/* Whether ctx's bf16 ops run on the bf16 kernels above rather than on rounded copies through the fp32 ones. */
static int ocr__amp_bf16_fast(ocr_ctx *ctx) {
    return ctx->amp == OCR_AMP_BF16 && !ocr__use_ref(ctx) && ocr__bf16_kind(ctx) != OCR__BF16_NONE;
}

/* The same for a convolution of geometry g in a forward (backward 0) or backward pass: only where the bf16 kernels
   win (bench_train --layers, DBNet at 640x640 and at train_dbnet's width 0.25). On AMX: every forward, and the
   backward of convolutions with at least 16 input channels per group (the stem's weight gradient gains nothing).
   On AVX512_BF16 alone the products are only about 1.8x fp32's, too little to pay for rearranging small inputs in
   the gradients: there backward only from 32 input channels per group, and never for a 1x1 convolution. The transposed convolutions
   (DBNet's 2x2 heads, whose fp32 path writes each output once without im2col) stay on the rounding path. */
static int ocr__amp_bf16_fast_conv(ocr_ctx *ctx, const ocr__conv_geom *g, int backward) {
    int64_t cin = g->C / g->groups;
    if (!ocr__amp_bf16_fast(ctx)) return 0;
    if (ocr__bf16_kind(ctx) == OCR__BF16_AVX512) return !backward || (cin >= 32 && !(g->kh == 1 && g->kw == 1));
    return !backward || cin >= 16;
}

OCRDEF ocr_conv_params ocr_conv_params_make(int stride, int pad, int dilation, int groups) {
    ocr_conv_params p;
    p.stride_h = p.stride_w = stride;
    p.pad_h = p.pad_w = pad;
    p.dil_h = p.dil_w = dilation;
    p.groups = groups;
    p.out_pad_h = p.out_pad_w = 0;
    return p;
}

static int ocr__conv_params_check(ocr_ctx *ctx, const char *fn, ocr_conv_params p, int transposed) {
    if (p.stride_h < 1 || p.stride_w < 1 || p.dil_h < 1 || p.dil_w < 1 || p.groups < 1 || p.pad_h < 0 || p.pad_w < 0 ||
        p.out_pad_h < 0 || p.out_pad_w < 0)
        return ocr_error(ctx, OCR_EINVAL, "%s: stride %dx%d, dilation %dx%d, groups %d must be >= 1 and padding %dx%d >= 0", fn,
                         p.stride_h, p.stride_w, p.dil_h, p.dil_w, p.groups, p.pad_h, p.pad_w);
    if (!transposed && (p.out_pad_h || p.out_pad_w)) return ocr_error(ctx, OCR_EINVAL, "%s: output padding is for transposed convolutions", fn);
    if (transposed && ((p.out_pad_h >= p.stride_h && p.out_pad_h >= p.dil_h) || (p.out_pad_w >= p.stride_w && p.out_pad_w >= p.dil_w)))
        return ocr_error(ctx, OCR_EINVAL, "%s: output padding %dx%d must be smaller than stride or dilation", fn, p.out_pad_h, p.out_pad_w);
    return OCR_OK;
}

/* Geometry in the conv2d sense: for a transposed convolution the roles of x and y swap. */
static int ocr__conv_geometry(ocr_ctx *ctx, const char *fn, ocr_shape xs, ocr_shape ws, ocr_conv_params p, int transposed,
                              ocr__conv_geom *g, ocr_shape *ys) {
    char sx[96], sw[96];
    int64_t cin, cout, H, W, OH, OW, kh, kw;
    int rc = ocr__conv_params_check(ctx, fn, p, transposed);
    if (rc) return rc;
    if (xs.ndim != 4 || ws.ndim != 4)
        return ocr_error(ctx, OCR_ESHAPE, "%s: input %s and weight %s must both be 4-D", fn, ocr_shape_str(xs, sx, sizeof sx),
                         ocr_shape_str(ws, sw, sizeof sw));
    cin = xs.dim[1]; H = xs.dim[2]; W = xs.dim[3]; kh = ws.dim[2]; kw = ws.dim[3];
    if (!transposed) {
        cout = ws.dim[0];
        if (ws.dim[1] * p.groups != cin || cout % p.groups)
            return ocr_error(ctx, OCR_ESHAPE, "%s: weight %s does not fit input %s with groups %d (weight must be [Cout, Cin/groups, kh, kw])",
                             fn, ocr_shape_str(ws, sw, sizeof sw), ocr_shape_str(xs, sx, sizeof sx), p.groups);
        OH = (H + 2 * p.pad_h - (int64_t)p.dil_h * (kh - 1) - 1);
        OW = (W + 2 * p.pad_w - (int64_t)p.dil_w * (kw - 1) - 1);
        if (OH < 0 || OW < 0)
            return ocr_error(ctx, OCR_ESHAPE, "%s: input %s is smaller than the dilated kernel %s", fn, ocr_shape_str(xs, sx, sizeof sx),
                             ocr_shape_str(ws, sw, sizeof sw));
        OH = OH / p.stride_h + 1;
        OW = OW / p.stride_w + 1;
    } else {
        if (ws.dim[0] != cin || cin % p.groups)
            return ocr_error(ctx, OCR_ESHAPE, "%s: weight %s does not fit input %s with groups %d (weight must be [Cin, Cout/groups, kh, kw])",
                             fn, ocr_shape_str(ws, sw, sizeof sw), ocr_shape_str(xs, sx, sizeof sx), p.groups);
        cout = ws.dim[1] * p.groups;
        OH = (H - 1) * p.stride_h - 2 * p.pad_h + (int64_t)p.dil_h * (kh - 1) + p.out_pad_h + 1;
        OW = (W - 1) * p.stride_w - 2 * p.pad_w + (int64_t)p.dil_w * (kw - 1) + p.out_pad_w + 1;
        if (OH <= 0 || OW <= 0)
            return ocr_error(ctx, OCR_ESHAPE, "%s: input %s with weight %s gives an empty output", fn, ocr_shape_str(xs, sx, sizeof sx),
                             ocr_shape_str(ws, sw, sizeof sw));
    }
    if (kh < 1 || kw < 1 || cin < 1 || cout < 1)
        return ocr_error(ctx, OCR_ESHAPE, "%s: empty kernel or channels: input %s, weight %s", fn, ocr_shape_str(xs, sx, sizeof sx),
                         ocr_shape_str(ws, sw, sizeof sw));
    *ys = ocr_shape4(xs.dim[0], cout, OH, OW);
    if (g) {
        g->N = xs.dim[0];
        g->kh = (int)kh; g->kw = (int)kw; g->sh = p.stride_h; g->sw = p.stride_w; g->ph = p.pad_h; g->pw = p.pad_w;
        g->dh = p.dil_h; g->dw = p.dil_w; g->groups = p.groups;
        if (!transposed) { g->C = cin; g->H = H; g->W = W; g->K = cout; g->OH = OH; g->OW = OW; }
        else { g->C = cout; g->H = OH; g->W = OW; g->K = cin; g->OH = H; g->OW = W; }
    }
    return OCR_OK;
}

OCRDEF int ocr_nn_conv2d_out_shape(ocr_ctx *ctx, ocr_shape x, ocr_shape w, ocr_conv_params p, ocr_shape *y) {
    return ocr__conv_geometry(ctx, "ocr_nn_conv2d_out_shape", x, w, p, 0, NULL, y);
}
OCRDEF int ocr_nn_conv_transpose2d_out_shape(ocr_ctx *ctx, ocr_shape x, ocr_shape w, ocr_conv_params p, ocr_shape *y) {
    return ocr__conv_geometry(ctx, "ocr_nn_conv_transpose2d_out_shape", x, w, p, 1, NULL, y);
}

/* Shared validation of a (transposed) convolution call; fills g and the expected output shape. */
static int ocr__conv_check(ocr_ctx *ctx, const char *fn, const ocr_tensor *x, const ocr_tensor *w, const ocr_tensor *b,
                           ocr_conv_params p, int transposed, ocr__conv_geom *g, ocr_shape *ys) {
    int rc;
    if ((rc = ocr_check_f32(ctx, fn, x)) || (rc = ocr_check_f32(ctx, fn, w))) return rc;
    if ((rc = ocr__conv_geometry(ctx, fn, x->shape, w->shape, p, transposed, g, ys))) {
        /* the geometry sees shapes only: add which tensors they belong to */
        char msg[OCR_ERROR_MAX];
        snprintf(msg, sizeof msg, "%s", ctx->last_error);
        return ocr_error(ctx, rc, "%s (input '%s', weight '%s')", msg, x->name, w->name);
    }
    if (b && (rc = ocr_check_f32(ctx, fn, b))) return rc;
    if (b && (rc = ocr_check_shape(ctx, fn, b, ocr_shape1(ys->dim[1])))) return rc;
    return OCR_OK;
}

static void ocr__bias_add(float *y, const float *b, int64_t N, int64_t C, int64_t P) {
    int64_t n, c, i;
    for (n = 0; n < N; n++)
        for (c = 0; c < C; c++) {
            float *row = y + (n * C + c) * P, v = b[c];
            for (i = 0; i < P; i++) row[i] += v;
        }
}

/* db[c] += sum over images and pixels of dy[n, c]: channels spread over the threads, each row summed in double with
   the vector row helper (a scalar double chain took 7 ms for a 64 x 320 x 320 gradient). */
typedef struct { const float *dy; float *db; int64_t N, C, P; int vec; } ocr__bias_grad_job;
static double ocr__sum_row(int vec, const float *x, int64_t n);
static void ocr__bias_grad_part(void *arg, int64_t begin, int64_t end, int tid) {
    const ocr__bias_grad_job *j = (const ocr__bias_grad_job *)arg;
    int64_t c, n;
    (void)tid;
    for (c = begin; c < end; c++) {
        double s = 0.0;
        for (n = 0; n < j->N; n++) s += ocr__sum_row(j->vec, j->dy + (n * j->C + c) * j->P, j->P);
        j->db[c] += (float)s;
    }
}
static void ocr__bias_grad(ocr_ctx *ctx, const float *dy, float *db, int64_t N, int64_t C, int64_t P) {
    ocr__bias_grad_job j;
    j.dy = dy; j.db = db; j.N = N; j.C = C; j.P = P; j.vec = ocr__ctx_lanes(ctx);
    ocr_parallel_for(ctx, C, 1, ocr__bias_grad_part, &j);
}

/* A backward's inputs in the half type: always the output gradient, the weight when dx is asked for and the input when
   dw is (NULL pointers skip one). Each pointer is replaced by its rounded copy. */
static int ocr__amp_inputs(ocr_ctx *ctx, const char *layer, const float **dy, int64_t n_dy, const float **w, int64_t n_w,
                           const float **x, int64_t n_x) {
    if (!(*dy = ocr__amp_input(ctx, *dy, n_dy, 2, layer, 1))) return ctx->last_status;
    if (w && !(*w = ocr__amp_input(ctx, *w, n_w, 1, layer, 0))) return ctx->last_status;
    if (x && !(*x = ocr__amp_input(ctx, *x, n_x, 0, layer, 0))) return ctx->last_status;
    return OCR_OK;
}

/* conv2d forward, the bias and the ReLU (when relu) applied by the convolution itself as each piece completes, the
   residual (when given; CPU only) added before the ReLU */
static int ocr__conv2d_forward(ocr_ctx *ctx, const char *fn, const ocr_tensor *x, const ocr_tensor *w, const ocr_tensor *b,
                               ocr_conv_params p, int relu, const ocr_tensor *res, ocr_tensor *y) {
    ocr__conv_geom g;
    ocr__conv_epilogue ep;
    ocr_shape ys;
    const float *xd = (const float *)x->data, *wd = (const float *)w->data;
    int rc;
    if ((rc = ocr__conv_check(ctx, fn, x, w, b, p, 0, &g, &ys)) || (rc = ocr_check_f32(ctx, fn, y)) ||
        (rc = ocr_check_shape(ctx, fn, y, ys)))
        return rc;
    if (res) {
        if ((rc = ocr_check_f32(ctx, fn, res)) || (rc = ocr_check_same_shape(ctx, fn, res, y))) return rc;
        if (res->data == y->data || x->data == y->data)
            return ocr_error(ctx, OCR_EINVAL, "%s: output '%s' must not alias input '%s' or residual '%s'", fn, y->name, x->name, res->name);
        if (ctx->device != OCR_DEVICE_CPU)
            return ocr_error(ctx, OCR_EUNSUPPORTED, "%s: CPU only; on %s call the conv2d, add and relu ops", fn, ocr_device_name(ctx->device));
    }
#ifdef OCR_CUDA
    if (ctx->device == OCR_DEVICE_CUDA) {
        if ((rc = ocr__cuda_done(ctx, ocr_cuda_conv2d_forward(ctx, x, w, b, p, y), fn, "forward", y, NULL, NULL)) || !relu) return rc;
        return ocr__cuda_done(ctx, ocr_cuda_relu_forward(ctx, y, y), fn, "forward", y, NULL, NULL);
    }
#endif
    ep.bias = b ? (const float *)b->data : NULL;
    ep.relu = relu;
    ep.res = res ? (const float *)res->data : NULL;
    ep.y0 = (const float *)y->data;
    ep.vec = ocr__ctx_lanes(ctx);
    if (ocr__amp_bf16_fast_conv(ctx, &g, 0)) {
        if ((rc = ocr__amp_count(ctx, xd, ocr_tensor_numel(x), w->name, 0)) || (rc = ocr__amp_count(ctx, wd, ocr_tensor_numel(w), w->name, 0)) ||
            (rc = ocr__conv_bf16_run(ctx, &g, OCR__CONV_FWD, (float *)xd, (float *)wd, (float *)y->data, 0, &ep)))
            return rc;
        return ocr__watch(ctx, fn, "forward", y);
    }
    if (ctx->amp != OCR_AMP_OFF && (!(xd = ocr__amp_input(ctx, xd, g.N * g.C * g.H * g.W, 0, w->name, 0)) ||
                                    !(wd = ocr__amp_input(ctx, wd, ocr_tensor_numel(w), 1, w->name, 0))))
        return ctx->last_status;
    if (ocr__use_ref(ctx)) {
        if ((rc = ocr__ref_conv2d_forward(ctx, &g, xd, wd, b ? (const float *)b->data : NULL, relu && !res, (float *)y->data))) return rc;
        if (res) {
            ocr__ref_add_forward((const float *)y->data, ep.res, (float *)y->data, ocr_tensor_numel(y));
            ocr__ref_relu_forward((const float *)y->data, (float *)y->data, ocr_tensor_numel(y));
        }
        return ocr__watch(ctx, fn, "forward", y);
    }
    if ((rc = ocr__conv_forward(ctx, &g, xd, wd, (float *)y->data, 0, &ep))) return rc;
    return ocr__watch(ctx, fn, "forward", y);
}

OCRDEF int ocr_nn_conv2d_forward(ocr_ctx *ctx, const ocr_tensor *x, const ocr_tensor *w, const ocr_tensor *b,
                                 ocr_conv_params p, ocr_tensor *y) {
    return ocr__conv2d_forward(ctx, "ocr_nn_conv2d_forward", x, w, b, p, 0, NULL, y);
}

OCRDEF int ocr_nn_conv2d_relu_forward(ocr_ctx *ctx, const ocr_tensor *x, const ocr_tensor *w, const ocr_tensor *b,
                                      ocr_conv_params p, ocr_tensor *y) {
    return ocr__conv2d_forward(ctx, "ocr_nn_conv2d_relu_forward", x, w, b, p, 1, NULL, y);
}

OCRDEF int ocr_nn_conv2d_add_relu_forward(ocr_ctx *ctx, const ocr_tensor *x, const ocr_tensor *w, const ocr_tensor *b,
                                          ocr_conv_params p, const ocr_tensor *residual, ocr_tensor *y) {
    if (!residual) return ocr_error(ctx, OCR_EINVAL, "ocr_nn_conv2d_add_relu_forward: needs a residual");
    return ocr__conv2d_forward(ctx, "ocr_nn_conv2d_add_relu_forward", x, w, b, p, 1, residual, y);
}

OCRDEF int ocr_nn_conv2d_backward(ocr_ctx *ctx, const ocr_tensor *x, const ocr_tensor *w, const ocr_tensor *dy,
                                  ocr_conv_params p, ocr_tensor *dx, ocr_tensor *dw, ocr_tensor *db) {
    const char *fn = "ocr_nn_conv2d_backward";
    ocr__conv_geom g;
    ocr_shape ys;
    const float *xd = (const float *)x->data, *wd = (const float *)w->data, *dyd = (const float *)dy->data;
    int rc;
    if ((rc = ocr__conv_check(ctx, fn, x, w, NULL, p, 0, &g, &ys)) || (rc = ocr_check_f32(ctx, fn, dy)) ||
        (rc = ocr_check_shape(ctx, fn, dy, ys)))
        return rc;
    if (dx && ((rc = ocr_check_f32(ctx, fn, dx)) || (rc = ocr_check_same_shape(ctx, fn, x, dx)))) return rc;
    if (dw && ((rc = ocr_check_f32(ctx, fn, dw)) || (rc = ocr_check_same_shape(ctx, fn, w, dw)))) return rc;
    if (db && ((rc = ocr_check_f32(ctx, fn, db)) || (rc = ocr_check_shape(ctx, fn, db, ocr_shape1(g.K))))) return rc;
#ifdef OCR_CUDA
    if (ctx->device == OCR_DEVICE_CUDA) return ocr__cuda_done(ctx, ocr_cuda_conv2d_backward(ctx, x, w, dy, p, dx, dw, db), fn, "backward", dx, dw, db);
#endif
    if (ocr__amp_bf16_fast_conv(ctx, &g, 1) && (dx || dw)) {
        if ((rc = ocr__amp_count(ctx, dyd, ocr_tensor_numel(dy), w->name, 1)) ||
            (dx && (rc = ocr__amp_count(ctx, wd, ocr_tensor_numel(w), w->name, 0))) ||
            (dw && (rc = ocr__amp_count(ctx, xd, ocr_tensor_numel(x), w->name, 0))) ||
            (dx && (rc = ocr__conv_bf16_run(ctx, &g, OCR__CONV_BWD_DATA, (float *)dx->data, (float *)wd, (float *)dyd, 1, NULL))) ||
            (dw && (rc = ocr__conv_bf16_run(ctx, &g, OCR__CONV_BWD_WEIGHT, (float *)xd, (float *)dw->data, (float *)dyd, 1, NULL))))
            return rc;
        if (db) ocr__bias_grad(ctx, (const float *)dy->data, (float *)db->data, g.N, g.K, g.OH * g.OW);
        if ((rc = ocr__watch(ctx, fn, "backward", dx)) || (rc = ocr__watch(ctx, fn, "backward", dw))) return rc;
        return ocr__watch(ctx, fn, "backward", db);
    }
    if (ctx->amp != OCR_AMP_OFF && (dx || dw) &&
        ((rc = ocr__amp_inputs(ctx, w->name, &dyd, g.N * g.K * g.OH * g.OW, dx ? &wd : NULL, ocr_tensor_numel(w), dw ? &xd : NULL,
                               g.N * g.C * g.H * g.W))))
        return rc;
    if (ocr__use_ref(ctx)) {
        /* the bias gradient sums the fp32 dy in every mode */
        if ((rc = ocr__ref_conv2d_backward(ctx, &g, xd, wd, dyd, dx ? (float *)dx->data : NULL, dw ? (float *)dw->data : NULL, NULL)) ||
            (db && (rc = ocr__ref_conv2d_backward(ctx, &g, xd, wd, (const float *)dy->data, NULL, NULL, (float *)db->data))))
            return rc;
    } else {
        if (dx && (rc = ocr__conv_backward_data(ctx, &g, (float *)dx->data, wd, (float *)dyd))) return rc;
        if (dw && (rc = ocr__conv_run(ctx, &g, OCR__CONV_BWD_WEIGHT, (float *)xd, (float *)dw->data, (float *)dyd, 1))) return rc;
        if (db) ocr__bias_grad(ctx, (const float *)dy->data, (float *)db->data, g.N, g.K, g.OH * g.OW);
    }
    if ((rc = ocr__watch(ctx, fn, "backward", dx)) || (rc = ocr__watch(ctx, fn, "backward", dw))) return rc;
    return ocr__watch(ctx, fn, "backward", db);
}

/* A transposed convolution whose kernel equals its stride (no padding, dilation or groups; DBNet's 2x2/2 heads)
   writes every output exactly once: per (image, chunk of input rows), one GEMM W^T X into an L2-sized column buffer,
   then each column value plus its bias goes straight to its output pixel. No zeroing, scatter-adding or bias pass
   over the output, and the same sums as the general path (which adds the columns into a zeroed output). */
#ifndef OCR__STREAM_BYTES
#define OCR__STREAM_BYTES (8 << 20) /* outputs from this size are stored around the caches */
#endif
typedef struct {
    const ocr__conv_geom *g;   /* conv2d sense: C, H, W the output; K, OH, OW the input */
    const float *x, *w, *bias;
    float *y;
    int64_t rows, n_chunks;     /* input rows per chunk */
    int vec;                    /* kernel and stride 2 wide: rows written by ocr__interleave2 in these lanes (0: the loop) */
    int relu;                   /* each output value clamped at 0 as it is written */
    int stream;                 /* rows go to y with non-temporal stores (see ocr__convt_unfold) */
    ocr__ukernel uk;
    size_t pa_floats, pb_floats;
    const float *wt_packed;          /* W^T packed once for every chunk when the input has <= OCR__KC channels, else NULL */
    float *block[OCR_MAX_THREADS];   /* per thread: packed A | packed B | columns */
} ocr__convt_job;

/* ocr_nn_conv_transpose2d_pair_forward's second transposed convolution (one output channel), run on the first's rows */
typedef struct {
    const ocr__convt_job *first;
    const float *w2;
    float b2;
    float *y;
} ocr__convt_pair_job;

static int ocr__convt_is_unfold(const ocr__conv_geom *g) {
    return g->groups == 1 && g->kh == g->sh && g->kw == g->sw && g->ph == 0 && g->pw == 0 && g->dh == 1 && g->dw == 1 &&
           g->H == g->OH * g->sh && g->W == g->OW * g->sw;
}

#ifdef OCR__HAVE_AVX2
/* y[2q] = (0 + a[q]) + b, y[2q+1] = (0 + c[q]) + b for q < n, then max(0, y) when relu: the two kernel columns of a
   2-wide, stride-2 transposed convolution written as one contiguous row (the same arithmetic as the strided loop it
   replaces, and the same clamp as the ReLU op). stream: whole aligned vectors bypass the caches (the caller fences). */
__attribute__((target("avx512f")))
static void ocr__interleave2_avx512(const float *a, const float *c, int64_t n, float b, int relu, int stream, float *y) {
    const __m512i lo = _mm512_setr_epi32(0, 16, 1, 17, 2, 18, 3, 19, 4, 20, 5, 21, 6, 22, 7, 23);
    const __m512i hi = _mm512_add_epi32(lo, _mm512_set1_epi32(8));
    const __m512 vb = _mm512_set1_ps(b), zero = _mm512_setzero_ps();
    int64_t q;
    for (q = 0; q < n; q += 16) {
        __mmask16 m = ocr__lanes(n - q);
        __m512 va = _mm512_add_ps(_mm512_add_ps(zero, _mm512_maskz_loadu_ps(m, a + q)), vb);
        __m512 vc = _mm512_add_ps(_mm512_add_ps(zero, _mm512_maskz_loadu_ps(m, c + q)), vb);
        if (relu) { va = _mm512_max_ps(zero, va); vc = _mm512_max_ps(zero, vc); }
        if (stream && n - q >= 16 && !((uintptr_t)(y + 2 * q) & 63)) {
            _mm512_stream_ps(y + 2 * q, _mm512_permutex2var_ps(va, lo, vc));
            _mm512_stream_ps(y + 2 * q + 16, _mm512_permutex2var_ps(va, hi, vc));
            continue;
        }
        _mm512_mask_storeu_ps(y + 2 * q, ocr__lanes(2 * (n - q)), _mm512_permutex2var_ps(va, lo, vc));
        _mm512_mask_storeu_ps(y + 2 * q + 16, ocr__lanes(2 * (n - q) - 16), _mm512_permutex2var_ps(va, hi, vc));
    }
}

/* The first n (up to 8) of va and vc as ocr__interleave2_avx512 writes them: 2n floats from y */
__attribute__((target("avx2,fma"), always_inline))
static inline void ocr__interleave2_store8(__m256 va, __m256 vc, int64_t n, __m256 vb, int relu, int stream, float *y) {
    const __m256 zero = _mm256_setzero_ps();
    __m256 lo, hi;
    va = _mm256_add_ps(_mm256_add_ps(zero, va), vb);
    vc = _mm256_add_ps(_mm256_add_ps(zero, vc), vb);
    if (relu) { va = _mm256_max_ps(zero, va); vc = _mm256_max_ps(zero, vc); }
    lo = _mm256_unpacklo_ps(va, vc); /* a0 c0 a1 c1 | a4 c4 a5 c5 */
    hi = _mm256_unpackhi_ps(va, vc); /* a2 c2 a3 c3 | a6 c6 a7 c7 */
    if (n == 8 && stream && !((uintptr_t)y & 31)) {
        _mm256_stream_ps(y, _mm256_permute2f128_ps(lo, hi, 0x20));
        _mm256_stream_ps(y + 8, _mm256_permute2f128_ps(lo, hi, 0x31));
    } else if (n == 8) {
        _mm256_storeu_ps(y, _mm256_permute2f128_ps(lo, hi, 0x20));
        _mm256_storeu_ps(y + 8, _mm256_permute2f128_ps(lo, hi, 0x31));
    } else { /* masked stores only at a row's end: Zen 3 runs them slowly */
        _mm256_maskstore_ps(y, ocr__lanes8(2 * n), _mm256_permute2f128_ps(lo, hi, 0x20));
        _mm256_maskstore_ps(y + 8, ocr__lanes8(2 * n - 8), _mm256_permute2f128_ps(lo, hi, 0x31));
    }
}

/* ocr__interleave2_avx512 on 8-float vectors */
__attribute__((target("avx2,fma")))
static void ocr__interleave2_avx2(const float *a, const float *c, int64_t n, float b, int relu, int stream, float *y) {
    const __m256 vb = _mm256_set1_ps(b);
    int64_t q;
    for (q = 0; q + 8 <= n; q += 8) ocr__interleave2_store8(_mm256_loadu_ps(a + q), _mm256_loadu_ps(c + q), 8, vb, relu, stream, y + 2 * q);
    if (q < n) {
        __m256i m = ocr__lanes8(n - q);
        ocr__interleave2_store8(_mm256_maskload_ps(a + q, m), _mm256_maskload_ps(c + q, m), n - q, vb, relu, 0, y + 2 * q);
    }
}

/* A row's two kernel columns by the kernel's own vectors (vec 16: AVX-512, 8: AVX2) */
static void ocr__interleave2(int vec, const float *a, const float *c, int64_t n, float b, int relu, int stream, float *y) {
    if (vec == 16) ocr__interleave2_avx512(a, c, n, b, relu, stream, y);
    else ocr__interleave2_avx2(a, c, n, b, relu, stream, y);
}
#endif

/* Input rows [oh0, oh1) of image n: output row R of channel co at yb + co * plane + (R - row0) * W. */
static void ocr__convt_chunk(const ocr__convt_job *j, int64_t n, int64_t oh0, int64_t oh1, float *pa, float *pb, float *col, float *yb,
                             int64_t plane, int64_t row0) {
    const ocr__conv_geom *g = j->g;
    int64_t kdim = g->C * g->kh * g->kw, P = g->OH * g->OW, cols = (oh1 - oh0) * g->OW, co, i, jj, r, q;
    if (j->wt_packed) ocr__gemm_serial_packed_a(&j->uk, kdim, cols, g->K, 1.0f, j->wt_packed, j->x + n * g->K * P + oh0 * g->OW, P, 0.0f, col, cols, pb);
    else ocr__gemm_serial(&j->uk, 1, 0, kdim, cols, g->K, 1.0f, j->w, kdim, j->x + n * g->K * P + oh0 * g->OW, P, 0.0f, col, cols, pa, pb);
    for (co = 0; co < g->C; co++) {
        float b = j->bias ? j->bias[co] : 0.0f;
        for (i = 0; i < g->kh; i++)
            for (r = oh0; r < oh1; r++) {
                float *yrow = yb + co * plane + (r * g->sh + i - row0) * g->W;
                const float *src0 = col + (co * g->kh + i) * g->kw * cols + (r - oh0) * g->OW;
#ifdef OCR__HAVE_AVX2
                if (j->vec) { ocr__interleave2(j->vec, src0, src0 + cols, g->OW, b, j->relu, j->stream, yrow); continue; }
#endif
                for (jj = 0; jj < g->kw; jj++) {
                    const float *src = src0 + jj * cols;
                    for (q = 0; q < g->OW; q++) {
                        float v = (0.0f + src[q]) + b;
                        yrow[q * g->sw + jj] = j->relu && v < 0.0f ? 0.0f : v;
                    }
                }
            }
    }
}

static void ocr__convt_items(void *arg, int64_t begin, int64_t end, int tid) {
    const ocr__convt_job *j = (const ocr__convt_job *)arg;
    const ocr__conv_geom *g = j->g;
    int64_t item;
    float *pa = j->block[tid], *pb = pa + j->pa_floats, *col = pb + j->pb_floats;
    for (item = begin; item < end; item++) {
        int64_t n = item / j->n_chunks, oh0 = (item % j->n_chunks) * j->rows, oh1 = oh0 + j->rows < g->OH ? oh0 + j->rows : g->OH;
        ocr__convt_chunk(j, n, oh0, oh1, pa, pb, col, j->y + n * g->C * g->H * g->W, g->H * g->W, 0);
    }
#ifdef OCR__HAVE_AVX2
    if (j->stream) _mm_sfence(); /* the streamed rows visible before the pool reports this range done */
#endif
}

#ifdef OCR__HAVE_AVX2
/* One output channel, 2x2 / stride 2 (DBNet's last head layer), on AVX-512: per input row, 16 pixels at a time, the
   four taps' sums over the input channels in registers, read straight from the input planes. The same sums as the
   GEMM path (a fused multiply-add chain over the channels from zero, one K block), without packing the whole input
   into B panels for a 4-row product. Work items are (image, input row). */
/* One input row xr (K channels a plane apart, OW pixels) into output rows y0 and y0 + 2 OW */
__attribute__((target("avx512f")))
static void ocr__convt_c1_row(const float *xr, int64_t plane, int64_t OW, int64_t K, const float *w, float b, int relu, float *y0) {
    int64_t q, k;
    for (q = 0; q < OW; q += 16) {
        __mmask16 m = ocr__lanes(OW - q);
        __m512 a00 = _mm512_setzero_ps(), a01 = _mm512_setzero_ps(), a10 = _mm512_setzero_ps(), a11 = _mm512_setzero_ps();
        float t00[16], t01[16], t10[16], t11[16];
        for (k = 0; k < K; k++) {
            __m512 xv = _mm512_maskz_loadu_ps(m, xr + k * plane + q);
            const float *wk = w + k * 4;
            a00 = _mm512_fmadd_ps(_mm512_set1_ps(wk[0]), xv, a00);
            a01 = _mm512_fmadd_ps(_mm512_set1_ps(wk[1]), xv, a01);
            a10 = _mm512_fmadd_ps(_mm512_set1_ps(wk[2]), xv, a10);
            a11 = _mm512_fmadd_ps(_mm512_set1_ps(wk[3]), xv, a11);
        }
        _mm512_storeu_ps(t00, a00); _mm512_storeu_ps(t01, a01); _mm512_storeu_ps(t10, a10); _mm512_storeu_ps(t11, a11);
        ocr__interleave2_avx512(t00, t01, OW - q < 16 ? OW - q : 16, b, relu, 0, y0 + 2 * q);
        ocr__interleave2_avx512(t10, t11, OW - q < 16 ? OW - q : 16, b, relu, 0, y0 + 2 * OW + 2 * q);
    }
}

/* ocr__convt_c1_row on 8-float vectors, 16 pixels at a time: 8 independent sums hide the FMA's latency */
__attribute__((target("avx2,fma")))
static void ocr__convt_c1_row_avx2(const float *xr, int64_t plane, int64_t OW, int64_t K, const float *w, float b, int relu, float *y0) {
    const __m256 vb = _mm256_set1_ps(b);
    int64_t q, k;
    for (q = 0; q < OW; q += 16) {
        int64_t n = OW - q < 16 ? OW - q : 16;
        const __m256i m0 = ocr__lanes8(n), m1 = ocr__lanes8(n - 8);
        __m256 a00 = _mm256_setzero_ps(), a01 = a00, a10 = a00, a11 = a00, b00 = a00, b01 = a00, b10 = a00, b11 = a00;
        for (k = 0; k < K; k++) {
            const float *xk = xr + k * plane + q, *wk = w + k * 4;
            __m256 x0 = n == 16 ? _mm256_loadu_ps(xk) : _mm256_maskload_ps(xk, m0);
            __m256 x1 = n == 16 ? _mm256_loadu_ps(xk + 8) : _mm256_maskload_ps(xk + 8, m1);
            __m256 w0 = _mm256_broadcast_ss(wk), w1 = _mm256_broadcast_ss(wk + 1), w2 = _mm256_broadcast_ss(wk + 2), w3 = _mm256_broadcast_ss(wk + 3);
            a00 = _mm256_fmadd_ps(w0, x0, a00); b00 = _mm256_fmadd_ps(w0, x1, b00);
            a01 = _mm256_fmadd_ps(w1, x0, a01); b01 = _mm256_fmadd_ps(w1, x1, b01);
            a10 = _mm256_fmadd_ps(w2, x0, a10); b10 = _mm256_fmadd_ps(w2, x1, b10);
            a11 = _mm256_fmadd_ps(w3, x0, a11); b11 = _mm256_fmadd_ps(w3, x1, b11);
        }
        ocr__interleave2_store8(a00, a01, n < 8 ? n : 8, vb, relu, 0, y0 + 2 * q);
        ocr__interleave2_store8(a10, a11, n < 8 ? n : 8, vb, relu, 0, y0 + 2 * OW + 2 * q);
        if (n > 8) {
            ocr__interleave2_store8(b00, b01, n - 8, vb, relu, 0, y0 + 2 * q + 16);
            ocr__interleave2_store8(b10, b11, n - 8, vb, relu, 0, y0 + 2 * OW + 2 * q + 16);
        }
    }
}

static void ocr__convt_c1_row_any(int vec, const float *xr, int64_t plane, int64_t OW, int64_t K, const float *w, float b, int relu, float *y0) {
    if (vec == 16) ocr__convt_c1_row(xr, plane, OW, K, w, b, relu, y0);
    else ocr__convt_c1_row_avx2(xr, plane, OW, K, w, b, relu, y0);
}

static void ocr__convt_c1_rows(void *arg, int64_t begin, int64_t end, int tid) {
    const ocr__convt_job *j = (const ocr__convt_job *)arg;
    const ocr__conv_geom *g = j->g;
    int64_t item, P = g->OH * g->OW;
    (void)tid;
    for (item = begin; item < end; item++) {
        int64_t n = item / g->OH, r = item % g->OH;
        ocr__convt_c1_row_any(j->vec, j->x + n * g->K * P + r * g->OW, P, g->OW, g->K, j->w, j->bias ? j->bias[0] : 0.0f, j->relu,
                              j->y + (n * g->H + 2 * r) * g->W);
    }
}

/* The pair of ocr_nn_conv_transpose2d_pair_forward: per chunk of the first's input rows, its output rows into the
   thread's band buffer (after the packing buffers and columns), then the second's rows from there. */
static void ocr__convt_pair_items(void *arg, int64_t begin, int64_t end, int tid) {
    const ocr__convt_pair_job *pj = (const ocr__convt_pair_job *)arg;
    const ocr__convt_job *j = pj->first;
    const ocr__conv_geom *g = j->g;
    int64_t item, r, plane = 2 * j->rows * g->W;
    float *pa = j->block[tid], *pb = pa + j->pa_floats, *col = pb + j->pb_floats, *band = col + g->C * g->kh * g->kw * j->rows * g->OW;
    for (item = begin; item < end; item++) {
        int64_t n = item / j->n_chunks, oh0 = (item % j->n_chunks) * j->rows, oh1 = oh0 + j->rows < g->OH ? oh0 + j->rows : g->OH;
        ocr__convt_chunk(j, n, oh0, oh1, pa, pb, col, band, plane, 2 * oh0);
        for (r = 0; r < 2 * (oh1 - oh0); r++)
            ocr__convt_c1_row_any(j->vec, band + r * g->W, plane, g->W, g->C, pj->w2, pj->b2, 0,
                                  pj->y + (n * 2 * g->H + 2 * (2 * oh0 + r)) * 2 * g->W);
    }
}
#endif

/* pair (or NULL): the second transposed convolution of ocr_nn_conv_transpose2d_pair_forward, run per chunk on the
   first's output rows (its w2, b2, y set; the first's rows go to a band buffer instead of y) */
static int ocr__convt_unfold(ocr_ctx *ctx, const ocr__conv_geom *g, const float *x, const float *w, const float *bias, int relu, float *y,
                             ocr__convt_pair_job *pair) {
    int64_t kdim = g->C * g->kh * g->kw, t;
    size_t bytes;
    ocr__convt_job j;
    memset(&j, 0, sizeof j);
    j.g = g; j.x = x; j.w = w; j.bias = bias; j.y = y; j.relu = relu;
    j.uk = ocr__pick_ukernel(ctx);
#ifdef OCR__HAVE_AVX2
    j.vec = g->kw == 2 && g->sw == 2 ? ocr__ctx_lanes(ctx) : 0;
    /* An output far past the caches is written around them: its lines are not read in first (a training step's
       64-channel 320x320 head, 26 MB: 3.0-3.6 -> 2.7-2.8 ms on two threads), and whatever reads it next finds it in
       memory either way. */
    j.stream = !pair && j.vec && (double)g->N * g->C * g->H * g->W * sizeof(float) >= OCR__STREAM_BYTES;
    if (!pair && j.vec && g->C == 1 && g->kh == 2 && g->K <= OCR__KC) {
        ocr_parallel_for_dynamic(ctx, g->N * g->OH, 1, ocr__convt_c1_rows, &j);
        return OCR_OK;
    }
#endif
    /* chunks of input rows whose columns (kdim floats per input pixel) stay near 512 KB, at least one per thread */
    j.rows = ((int64_t)1 << 17) / (kdim * g->OW);
    j.rows = j.rows < 1 ? 1 : j.rows > g->OH ? g->OH : j.rows;
    if (g->N * ((g->OH + j.rows - 1) / j.rows) < ctx->n_threads) j.rows = (g->OH + ctx->n_threads - 1) / ctx->n_threads;
    j.n_chunks = (g->OH + j.rows - 1) / j.rows;
    ocr__gemm_buffer_floats(&j.uk, kdim, j.rows * g->OW, g->K, &j.pa_floats, &j.pb_floats);
    if (!ocr_size_mul((size_t)kdim, (size_t)(j.rows * g->OW), &bytes) || !ocr_size_add(bytes, j.pa_floats + j.pb_floats, &bytes) ||
        (pair && !ocr_size_add(bytes, (size_t)(g->C * 2 * j.rows * g->W), &bytes)) || !ocr_size_mul(bytes, sizeof(float), &bytes))
        return ocr_error(ctx, OCR_EOVERFLOW, "conv_transpose: work buffers too large");
    for (t = 0; t < ctx->n_threads; t++)
        if (!(j.block[t] = (float *)ocr_ctx_scratch(ctx, OCR_SCRATCH_THREAD0 + (int)t, bytes))) return ctx->last_status;
    /* W^T packed once rather than once per chunk (a 64-channel 2x2 head: 160 repacks of 16K floats per image) */
    if (g->K <= OCR__KC) {
        ocr__gemm_job pk;
        float *wt;
        if (!(wt = (float *)ocr_ctx_scratch(ctx, OCR_SCRATCH_GEMM_A, j.pa_floats * sizeof(float)))) return ctx->last_status;
        memset(&pk, 0, sizeof pk);
        pk.uk = j.uk; pk.trans_a = 1; pk.A = w; pk.lda = kdim;
        ocr__pack_a(&pk, 0, kdim, 0, g->K, wt);
        j.wt_packed = wt;
    }
#ifdef OCR__HAVE_AVX2
    if (pair) {
        pair->first = &j;
        ocr_parallel_for_dynamic(ctx, g->N * j.n_chunks, 1, ocr__convt_pair_items, pair);
        return OCR_OK;
    }
#endif
    ocr_parallel_for_dynamic(ctx, g->N * j.n_chunks, 1, ocr__convt_items, &j);
    return OCR_OK;
}

/* conv_transpose2d forward, then max(y, 0) when relu: in the pass that writes y where the path has one */
static int ocr__conv_transpose2d_forward(ocr_ctx *ctx, const char *fn, const ocr_tensor *x, const ocr_tensor *w, const ocr_tensor *b,
                                         ocr_conv_params p, int relu, ocr_tensor *y) {
    ocr__conv_geom g;
    ocr_shape ys;
    const float *xd = (const float *)x->data, *wd = (const float *)w->data;
    int rc;
    if ((rc = ocr__conv_check(ctx, fn, x, w, b, p, 1, &g, &ys)) || (rc = ocr_check_f32(ctx, fn, y)) ||
        (rc = ocr_check_shape(ctx, fn, y, ys)))
        return rc;
#ifdef OCR_CUDA
    if (ctx->device == OCR_DEVICE_CUDA) {
        if ((rc = ocr__cuda_done(ctx, ocr_cuda_conv_transpose2d_forward(ctx, x, w, b, p, y), fn, "forward", y, NULL, NULL)) || !relu) return rc;
        return ocr__cuda_done(ctx, ocr_cuda_relu_forward(ctx, y, y), fn, "forward", y, NULL, NULL);
    }
#endif
    if (ctx->amp != OCR_AMP_OFF && (!(xd = ocr__amp_input(ctx, xd, ocr_tensor_numel(x), 0, w->name, 0)) ||
                                    !(wd = ocr__amp_input(ctx, wd, ocr_tensor_numel(w), 1, w->name, 0))))
        return ctx->last_status;
    if (ocr__use_ref(ctx)) {
        if ((rc = ocr__ref_conv_transpose2d_forward(ctx, &g, xd, wd, b ? (const float *)b->data : NULL, (float *)y->data))) return rc;
        if (relu) ocr__ref_relu_forward((const float *)y->data, (float *)y->data, ocr_tensor_numel(y));
        return ocr__watch(ctx, fn, "forward", y);
    }
    if (ocr__convt_is_unfold(&g)) {
        if ((rc = ocr__convt_unfold(ctx, &g, xd, wd, b ? (const float *)b->data : NULL, relu, (float *)y->data, NULL))) return rc;
        return ocr__watch(ctx, fn, "forward", y);
    }
    /* A transposed convolution is the data gradient of the convolution it transposes. */
    memset(y->data, 0, ocr_tensor_bytes(y));
    if ((rc = ocr__conv_run(ctx, &g, OCR__CONV_BWD_DATA, (float *)y->data, (float *)wd, (float *)xd, 1))) return rc;
    if (b) ocr__bias_add((float *)y->data, (const float *)b->data, g.N, g.C, g.H * g.W);
    if (relu) ocr__ref_relu_forward((const float *)y->data, (float *)y->data, ocr_tensor_numel(y)); /* no DBNet shape comes here */
    return ocr__watch(ctx, fn, "forward", y);
}

OCRDEF int ocr_nn_conv_transpose2d_forward(ocr_ctx *ctx, const ocr_tensor *x, const ocr_tensor *w, const ocr_tensor *b,
                                           ocr_conv_params p, ocr_tensor *y) {
    return ocr__conv_transpose2d_forward(ctx, "ocr_nn_conv_transpose2d_forward", x, w, b, p, 0, y);
}

OCRDEF int ocr_nn_conv_transpose2d_relu_forward(ocr_ctx *ctx, const ocr_tensor *x, const ocr_tensor *w, const ocr_tensor *b,
                                                ocr_conv_params p, ocr_tensor *y) {
    return ocr__conv_transpose2d_forward(ctx, "ocr_nn_conv_transpose2d_relu_forward", x, w, b, p, 1, y);
}

OCRDEF int ocr_nn_conv_transpose2d_pair_forward(ocr_ctx *ctx, const ocr_tensor *x, const ocr_tensor *w1, const ocr_tensor *b1, ocr_tensor *mid,
                                                const ocr_tensor *w2, const ocr_tensor *b2, ocr_tensor *y) {
    const char *fn = "ocr_nn_conv_transpose2d_pair_forward";
    ocr_conv_params p = ocr_conv_params_make(2, 0, 1, 1);
    ocr__conv_geom g1, g2;
    ocr_shape s1, s2;
    int rc;
    if (!mid) return ocr_error(ctx, OCR_EINVAL, "%s: needs a mid tensor", fn);
    if ((rc = ocr__conv_check(ctx, fn, x, w1, b1, p, 1, &g1, &s1)) || (rc = ocr_check_f32(ctx, fn, mid)) || (rc = ocr_check_shape(ctx, fn, mid, s1)) ||
        (rc = ocr__conv_check(ctx, fn, mid, w2, b2, p, 1, &g2, &s2)) || (rc = ocr_check_f32(ctx, fn, y)) || (rc = ocr_check_shape(ctx, fn, y, s2)))
        return rc;
    if (w1->shape.dim[2] != 2 || w1->shape.dim[3] != 2 || w2->shape.dim[2] != 2 || w2->shape.dim[3] != 2 || w2->shape.dim[1] != 1)
        return ocr_error(ctx, OCR_ESHAPE, "%s: needs 2x2 kernels ('%s', '%s') and one output channel for the second", fn, w1->name, w2->name);
    if (x->data == mid->data || x->data == y->data || mid->data == y->data)
        return ocr_error(ctx, OCR_EINVAL, "%s: x '%s', mid '%s' and y '%s' must not alias", fn, x->name, mid->name, y->name);
    if (ctx->device != OCR_DEVICE_CPU)
        return ocr_error(ctx, OCR_EUNSUPPORTED, "%s: CPU only; on %s call the two conv_transpose2d ops", fn, ocr_device_name(ctx->device));
#ifdef OCR__HAVE_AVX2
    if (ctx->amp == OCR_AMP_OFF && !ocr__use_ref(ctx) && ocr__pick_ukernel(ctx).fn != ocr__ukernel_portable && g2.K <= OCR__KC) {
        ocr__convt_pair_job pj;
        memset(&pj, 0, sizeof pj);
        pj.w2 = (const float *)w2->data; pj.b2 = b2 ? ((const float *)b2->data)[0] : 0.0f; pj.y = (float *)y->data;
        if ((rc = ocr__convt_unfold(ctx, &g1, (const float *)x->data, (const float *)w1->data, b1 ? (const float *)b1->data : NULL, 1,
                                    (float *)mid->data, &pj)))
            return rc;
        return ocr__watch(ctx, fn, "forward", y);
    }
#endif
    if ((rc = ocr__conv_transpose2d_forward(ctx, fn, x, w1, b1, p, 1, mid))) return rc;
    return ocr__conv_transpose2d_forward(ctx, fn, mid, w2, b2, p, 0, y);
}

OCRDEF int ocr_nn_conv_transpose2d_backward(ocr_ctx *ctx, const ocr_tensor *x, const ocr_tensor *w, const ocr_tensor *dy,
                                            ocr_conv_params p, ocr_tensor *dx, ocr_tensor *dw, ocr_tensor *db) {
    const char *fn = "ocr_nn_conv_transpose2d_backward";
    ocr__conv_geom g;
    ocr_shape ys;
    const float *xd = (const float *)x->data, *wd = (const float *)w->data, *dyd = (const float *)dy->data;
    int rc;
    if ((rc = ocr__conv_check(ctx, fn, x, w, NULL, p, 1, &g, &ys)) || (rc = ocr_check_f32(ctx, fn, dy)) ||
        (rc = ocr_check_shape(ctx, fn, dy, ys)))
        return rc;
    if (dx && ((rc = ocr_check_f32(ctx, fn, dx)) || (rc = ocr_check_same_shape(ctx, fn, x, dx)))) return rc;
    if (dw && ((rc = ocr_check_f32(ctx, fn, dw)) || (rc = ocr_check_same_shape(ctx, fn, w, dw)))) return rc;
    if (db && ((rc = ocr_check_f32(ctx, fn, db)) || (rc = ocr_check_shape(ctx, fn, db, ocr_shape1(g.C))))) return rc;
#ifdef OCR_CUDA
    if (ctx->device == OCR_DEVICE_CUDA) return ocr__cuda_done(ctx, ocr_cuda_conv_transpose2d_backward(ctx, x, w, dy, p, dx, dw, db), fn, "backward", dx, dw, db);
#endif
    if (ctx->amp != OCR_AMP_OFF && (dx || dw) &&
        ((rc = ocr__amp_inputs(ctx, w->name, &dyd, ocr_tensor_numel(dy), dx ? &wd : NULL, ocr_tensor_numel(w), dw ? &xd : NULL,
                               ocr_tensor_numel(x)))))
        return rc;
    if (ocr__use_ref(ctx)) {
        if ((rc = ocr__ref_conv_transpose2d_backward(ctx, &g, xd, wd, dyd, dx ? (float *)dx->data : NULL, dw ? (float *)dw->data : NULL,
                                                     NULL)) ||
            (db && (rc = ocr__ref_conv_transpose2d_backward(ctx, &g, xd, wd, (const float *)dy->data, NULL, NULL, (float *)db->data))))
            return rc;
    } else {
        if (dx && (rc = ocr__conv_run(ctx, &g, OCR__CONV_FWD, (float *)dyd, (float *)wd, (float *)dx->data, 1))) return rc;
        if (dw && (rc = ocr__conv_run(ctx, &g, OCR__CONV_BWD_WEIGHT, (float *)dyd, (float *)dw->data, (float *)xd, 1))) return rc;
        if (db) ocr__bias_grad(ctx, (const float *)dy->data, (float *)db->data, g.N, g.C, g.H * g.W);
    }
    if ((rc = ocr__watch(ctx, fn, "backward", dx)) || (rc = ocr__watch(ctx, fn, "backward", dw))) return rc;
    return ocr__watch(ctx, fn, "backward", db);
}

/* ---------------------------------------------------------------- row helpers
   Loops of the normalisation and pointwise ops. The library builds for baseline x86-64, where compilers at -O2
   neither vectorise these nor avoid a branch per ReLU (mispredicted half the time on zero-mean activations), so
   x86 gets SSE (4 lanes, branch-free) and other targets plain C with the same results. Sums run in double with
   four independent accumulators, so they are exact enough for parity without a serial dependency per element. */

#ifdef OCR__HAVE_AVX2
/* AVX-512 and AVX2 forms of the row helpers below, chosen by the lanes of the context's kernel (ocr__ctx_lanes: 16, 8,
   or 0 for SSE and plain C): 16 or 8 floats a step, sums in 8- or 4-lane doubles (so as exact as the scalar double
   sums), the same per-element float arithmetic as the SSE forms. Each does whole vectors only and returns how far it
   got (the sums also their partial sums); the plain forms below finish the row. The normalisation ops spent most of
   their time in the scalar double sums. */

__attribute__((target("avx512f")))
static int64_t ocr__sum_row_avx512(const float *x, int64_t n, double *s) {
    __m512d a0 = _mm512_setzero_pd(), a1 = _mm512_setzero_pd();
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) {
        a0 = _mm512_add_pd(a0, _mm512_cvtps_pd(_mm256_loadu_ps(x + i)));
        a1 = _mm512_add_pd(a1, _mm512_cvtps_pd(_mm256_loadu_ps(x + i + 8)));
    }
    *s = _mm512_reduce_add_pd(_mm512_add_pd(a0, a1));
    return i;
}

__attribute__((target("avx512f")))
static int64_t ocr__sqdev_row_avx512(const float *x, int64_t n, double mean, double *s) {
    __m512d a0 = _mm512_setzero_pd(), a1 = _mm512_setzero_pd(), vm = _mm512_set1_pd(mean), d0, d1;
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) {
        d0 = _mm512_sub_pd(_mm512_cvtps_pd(_mm256_loadu_ps(x + i)), vm);
        d1 = _mm512_sub_pd(_mm512_cvtps_pd(_mm256_loadu_ps(x + i + 8)), vm);
        a0 = _mm512_fmadd_pd(d0, d0, a0);
        a1 = _mm512_fmadd_pd(d1, d1, a1);
    }
    *s = _mm512_reduce_add_pd(_mm512_add_pd(a0, a1));
    return i;
}

/* dy masked where the ReLU output is not > 0 (NaN and Inf gradients included) */
__attribute__((target("avx512f")))
static __m512 ocr__relu_mask16(const float *relu_y, const float *dy) {
    return _mm512_maskz_mov_ps(_mm512_cmp_ps_mask(_mm512_loadu_ps(relu_y), _mm512_setzero_ps(), _CMP_GT_OQ), _mm512_loadu_ps(dy));
}

__attribute__((target("avx512f")))
static int64_t ocr__bn_grad_sums_row_avx512(const float *x, const float *dy, const float *relu_y, int64_t n, float m, float inv,
                                            double *sdy, double *sdyx) {
    __m512d a = _mm512_setzero_pd(), b = _mm512_setzero_pd();
    __m512 vm = _mm512_set1_ps(m), vinv = _mm512_set1_ps(inv);
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) {
        __m512 gv = relu_y ? ocr__relu_mask16(relu_y + i, dy + i) : _mm512_loadu_ps(dy + i);
        __m512 p = _mm512_mul_ps(gv, _mm512_mul_ps(_mm512_sub_ps(_mm512_loadu_ps(x + i), vm), vinv));
        a = _mm512_add_pd(a, _mm512_add_pd(_mm512_cvtps_pd(_mm512_castps512_ps256(gv)),
                                           _mm512_cvtps_pd(_mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(gv), 1)))));
        b = _mm512_add_pd(b, _mm512_add_pd(_mm512_cvtps_pd(_mm512_castps512_ps256(p)),
                                           _mm512_cvtps_pd(_mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(p), 1)))));
    }
    *sdy = _mm512_reduce_add_pd(a);
    *sdyx = _mm512_reduce_add_pd(b);
    return i;
}

__attribute__((target("avx512f")))
static int64_t ocr__affine_row_avx512(const float *x, float *y, int64_t n, float scale, float shift, int relu) {
    __m512 vs = _mm512_set1_ps(scale), vb = _mm512_set1_ps(shift), z = _mm512_setzero_ps();
    int64_t i = 0;
    if (relu) for (; i + 16 <= n; i += 16) _mm512_storeu_ps(y + i, _mm512_max_ps(z, _mm512_add_ps(_mm512_mul_ps(_mm512_loadu_ps(x + i), vs), vb)));
    else for (; i + 16 <= n; i += 16) _mm512_storeu_ps(y + i, _mm512_add_ps(_mm512_mul_ps(_mm512_loadu_ps(x + i), vs), vb));
    return i;
}

__attribute__((target("avx512f")))
static int64_t ocr__add_relu_row_avx512(const float *a, const float *b, float *y, int64_t n) {
    int64_t i = 0;
    for (; i + 16 <= n; i += 16)
        _mm512_storeu_ps(y + i, _mm512_max_ps(_mm512_setzero_ps(), _mm512_add_ps(_mm512_loadu_ps(a + i), _mm512_loadu_ps(b + i))));
    return i;
}

__attribute__((target("avx512f")))
static int64_t ocr__bn_dx_row_avx512(const float *x, const float *dy, const float *relu_y, float *dx, int64_t n, float k, float a,
                                     float m, float ib, int acc) {
    __m512 vk = _mm512_set1_ps(k), va = _mm512_set1_ps(a), vm = _mm512_set1_ps(m), vib = _mm512_set1_ps(ib);
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) {
        __m512 g = relu_y ? ocr__relu_mask16(relu_y + i, dy + i) : _mm512_loadu_ps(dy + i);
        __m512 t = _mm512_sub_ps(_mm512_sub_ps(g, va), _mm512_mul_ps(_mm512_sub_ps(_mm512_loadu_ps(x + i), vm), vib));
        _mm512_storeu_ps(dx + i, _mm512_add_ps(acc ? _mm512_loadu_ps(dx + i) : _mm512_setzero_ps(), _mm512_mul_ps(vk, t)));
    }
    return i;
}

__attribute__((target("avx2")))
static inline double ocr__hsum4d(__m256d v) {
    __m128d s = _mm_add_pd(_mm256_castpd256_pd128(v), _mm256_extractf128_pd(v, 1));
    return _mm_cvtsd_f64(_mm_add_sd(s, _mm_unpackhi_pd(s, s)));
}

/* the 8 floats of v widened to double and added to acc */
__attribute__((target("avx2")))
static inline __m256d ocr__add_widened8(__m256d acc, __m256 v) {
    return _mm256_add_pd(acc, _mm256_add_pd(_mm256_cvtps_pd(_mm256_castps256_ps128(v)), _mm256_cvtps_pd(_mm256_extractf128_ps(v, 1))));
}

__attribute__((target("avx2")))
static int64_t ocr__sum_row_avx2(const float *x, int64_t n, double *s) {
    __m256d a0 = _mm256_setzero_pd(), a1 = _mm256_setzero_pd(), a2 = _mm256_setzero_pd(), a3 = _mm256_setzero_pd();
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) {
        a0 = _mm256_add_pd(a0, _mm256_cvtps_pd(_mm_loadu_ps(x + i)));
        a1 = _mm256_add_pd(a1, _mm256_cvtps_pd(_mm_loadu_ps(x + i + 4)));
        a2 = _mm256_add_pd(a2, _mm256_cvtps_pd(_mm_loadu_ps(x + i + 8)));
        a3 = _mm256_add_pd(a3, _mm256_cvtps_pd(_mm_loadu_ps(x + i + 12)));
    }
    *s = ocr__hsum4d(_mm256_add_pd(_mm256_add_pd(a0, a1), _mm256_add_pd(a2, a3)));
    return i;
}

__attribute__((target("avx2,fma")))
static int64_t ocr__sqdev_row_avx2(const float *x, int64_t n, double mean, double *s) {
    __m256d a0 = _mm256_setzero_pd(), a1 = _mm256_setzero_pd(), a2 = _mm256_setzero_pd(), a3 = _mm256_setzero_pd();
    __m256d vm = _mm256_set1_pd(mean), d0, d1, d2, d3;
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) {
        d0 = _mm256_sub_pd(_mm256_cvtps_pd(_mm_loadu_ps(x + i)), vm);
        d1 = _mm256_sub_pd(_mm256_cvtps_pd(_mm_loadu_ps(x + i + 4)), vm);
        d2 = _mm256_sub_pd(_mm256_cvtps_pd(_mm_loadu_ps(x + i + 8)), vm);
        d3 = _mm256_sub_pd(_mm256_cvtps_pd(_mm_loadu_ps(x + i + 12)), vm);
        a0 = _mm256_fmadd_pd(d0, d0, a0);
        a1 = _mm256_fmadd_pd(d1, d1, a1);
        a2 = _mm256_fmadd_pd(d2, d2, a2);
        a3 = _mm256_fmadd_pd(d3, d3, a3);
    }
    *s = ocr__hsum4d(_mm256_add_pd(_mm256_add_pd(a0, a1), _mm256_add_pd(a2, a3)));
    return i;
}

/* dy masked where the ReLU output is not > 0 (NaN and Inf gradients included) */
__attribute__((target("avx2")))
static inline __m256 ocr__relu_mask8(const float *relu_y, const float *dy) {
    return _mm256_and_ps(_mm256_cmp_ps(_mm256_loadu_ps(relu_y), _mm256_setzero_ps(), _CMP_GT_OQ), _mm256_loadu_ps(dy));
}

__attribute__((target("avx2")))
static int64_t ocr__bn_grad_sums_row_avx2(const float *x, const float *dy, const float *relu_y, int64_t n, float m, float inv,
                                          double *sdy, double *sdyx) {
    __m256d a = _mm256_setzero_pd(), b = _mm256_setzero_pd();
    __m256 vm = _mm256_set1_ps(m), vinv = _mm256_set1_ps(inv);
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        __m256 gv = relu_y ? ocr__relu_mask8(relu_y + i, dy + i) : _mm256_loadu_ps(dy + i);
        a = ocr__add_widened8(a, gv);
        b = ocr__add_widened8(b, _mm256_mul_ps(gv, _mm256_mul_ps(_mm256_sub_ps(_mm256_loadu_ps(x + i), vm), vinv)));
    }
    *sdy = ocr__hsum4d(a);
    *sdyx = ocr__hsum4d(b);
    return i;
}

__attribute__((target("avx2")))
static int64_t ocr__affine_row_avx2(const float *x, float *y, int64_t n, float scale, float shift, int relu) {
    __m256 vs = _mm256_set1_ps(scale), vb = _mm256_set1_ps(shift), z = _mm256_setzero_ps();
    int64_t i = 0;
    if (relu) for (; i + 8 <= n; i += 8) _mm256_storeu_ps(y + i, _mm256_max_ps(z, _mm256_add_ps(_mm256_mul_ps(_mm256_loadu_ps(x + i), vs), vb)));
    else for (; i + 8 <= n; i += 8) _mm256_storeu_ps(y + i, _mm256_add_ps(_mm256_mul_ps(_mm256_loadu_ps(x + i), vs), vb));
    return i;
}

__attribute__((target("avx2")))
static int64_t ocr__add_relu_row_avx2(const float *a, const float *b, float *y, int64_t n) {
    int64_t i = 0;
    for (; i + 8 <= n; i += 8)
        _mm256_storeu_ps(y + i, _mm256_max_ps(_mm256_setzero_ps(), _mm256_add_ps(_mm256_loadu_ps(a + i), _mm256_loadu_ps(b + i))));
    return i;
}

__attribute__((target("avx2")))
static int64_t ocr__bn_dx_row_avx2(const float *x, const float *dy, const float *relu_y, float *dx, int64_t n, float k, float a,
                                   float m, float ib, int acc) {
    __m256 vk = _mm256_set1_ps(k), va = _mm256_set1_ps(a), vm = _mm256_set1_ps(m), vib = _mm256_set1_ps(ib);
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        __m256 g = relu_y ? ocr__relu_mask8(relu_y + i, dy + i) : _mm256_loadu_ps(dy + i);
        __m256 t = _mm256_sub_ps(_mm256_sub_ps(g, va), _mm256_mul_ps(_mm256_sub_ps(_mm256_loadu_ps(x + i), vm), vib));
        _mm256_storeu_ps(dx + i, _mm256_add_ps(acc ? _mm256_loadu_ps(dx + i) : _mm256_setzero_ps(), _mm256_mul_ps(vk, t)));
    }
    return i;
}
#endif

static double ocr__sum_row(int vec, const float *x, int64_t n) {
    double s0 = 0.0, s1 = 0.0, s2 = 0.0, s3 = 0.0;
    int64_t i = 0;
#ifdef OCR__HAVE_AVX2
    if (vec == 16) i = ocr__sum_row_avx512(x, n, &s0);
    if (vec == 8) i = ocr__sum_row_avx2(x, n, &s0);
#else
    (void)vec;
#endif
    for (; i + 4 <= n; i += 4) { s0 += x[i]; s1 += x[i + 1]; s2 += x[i + 2]; s3 += x[i + 3]; }
    for (; i < n; i++) s0 += x[i];
    return (s0 + s1) + (s2 + s3);
}

static double ocr__sqdev_row(int vec, const float *x, int64_t n, double mean) {
    double s0 = 0.0, s1 = 0.0, s2 = 0.0, s3 = 0.0, d0, d1, d2, d3;
    int64_t i = 0;
#ifdef OCR__HAVE_AVX2
    if (vec == 16) i = ocr__sqdev_row_avx512(x, n, mean, &s0);
    if (vec == 8) i = ocr__sqdev_row_avx2(x, n, mean, &s0);
#else
    (void)vec;
#endif
    for (; i + 4 <= n; i += 4) {
        d0 = x[i] - mean; d1 = x[i + 1] - mean; d2 = x[i + 2] - mean; d3 = x[i + 3] - mean;
        s0 += d0 * d0; s1 += d1 * d1; s2 += d2 * d2; s3 += d3 * d3;
    }
    for (; i < n; i++) { d0 = x[i] - mean; s0 += d0 * d0; }
    return (s0 + s1) + (s2 + s3);
}

#if defined(OCR__HAVE_AVX2) && defined(__SSE2__)
#define OCR__SSE 1
#endif

/* ReLU's gradient: g where the ReLU output y is > 0, else exactly 0 (also for g NaN or Inf), without a branch */
static float ocr__relu_grad(float y, float g) {
#ifdef OCR__SSE
    return _mm_cvtss_f32(_mm_and_ps(_mm_cmpgt_ss(_mm_set_ss(y), _mm_setzero_ps()), _mm_set_ss(g)));
#else
    return y > 0.0f ? g : 0.0f;
#endif
}

/* *sdy += sum g, *sdyx += sum g * (x - m) * inv, where g is dy, masked by the ReLU output relu_y when given */
static void ocr__bn_grad_sums_row(int vec, const float *x, const float *dy, const float *relu_y, int64_t n, float m, float inv,
                                  double *sdy, double *sdyx) {
    double a0 = 0.0, a1 = 0.0, b0 = 0.0, b1 = 0.0;
    int64_t i = 0;
    float g0, g1;
#ifdef OCR__HAVE_AVX2
    if (vec == 16) i = ocr__bn_grad_sums_row_avx512(x, dy, relu_y, n, m, inv, &a0, &b0);
    if (vec == 8) i = ocr__bn_grad_sums_row_avx2(x, dy, relu_y, n, m, inv, &a0, &b0);
#else
    (void)vec;
#endif
    for (; i + 2 <= n; i += 2) {
        g0 = relu_y ? ocr__relu_grad(relu_y[i], dy[i]) : dy[i];
        g1 = relu_y ? ocr__relu_grad(relu_y[i + 1], dy[i + 1]) : dy[i + 1];
        a0 += g0; b0 += g0 * ((x[i] - m) * inv);
        a1 += g1; b1 += g1 * ((x[i + 1] - m) * inv);
    }
    for (; i < n; i++) {
        g0 = relu_y ? ocr__relu_grad(relu_y[i], dy[i]) : dy[i];
        a0 += g0; b0 += g0 * ((x[i] - m) * inv);
    }
    *sdy += a0 + a1;
    *sdyx += b0 + b1;
}

/* y = x * scale + shift, clamped at 0 when relu; a NaN stays NaN (max(0, v) returns v when v is NaN) */
static void ocr__affine_row(int vec, const float *x, float *y, int64_t n, float scale, float shift, int relu) {
    int64_t i = 0;
#ifdef OCR__HAVE_AVX2
    if (vec == 16) i = ocr__affine_row_avx512(x, y, n, scale, shift, relu);
    if (vec == 8) i = ocr__affine_row_avx2(x, y, n, scale, shift, relu);
#else
    (void)vec;
#endif
#ifdef OCR__SSE
    __m128 vs = _mm_set1_ps(scale), vb = _mm_set1_ps(shift), z = _mm_setzero_ps();
    if (relu) for (; i + 4 <= n; i += 4) _mm_storeu_ps(y + i, _mm_max_ps(z, _mm_add_ps(_mm_mul_ps(_mm_loadu_ps(x + i), vs), vb)));
    else for (; i + 4 <= n; i += 4) _mm_storeu_ps(y + i, _mm_add_ps(_mm_mul_ps(_mm_loadu_ps(x + i), vs), vb));
#endif
    for (; i < n; i++) {
        float v = x[i] * scale + shift;
        y[i] = relu && v < 0.0f ? 0.0f : v;
    }
}

/* y = max(a + b, 0) with the ReLU op's rule (a NaN stays NaN); y may be a or b */
static void ocr__add_relu_row(int vec, const float *a, const float *b, float *y, int64_t n) {
    int64_t i = 0;
#ifdef OCR__HAVE_AVX2
    if (vec == 16) i = ocr__add_relu_row_avx512(a, b, y, n);
    if (vec == 8) i = ocr__add_relu_row_avx2(a, b, y, n);
#else
    (void)vec;
#endif
#ifdef OCR__SSE
    for (; i + 4 <= n; i += 4) _mm_storeu_ps(y + i, _mm_max_ps(_mm_setzero_ps(), _mm_add_ps(_mm_loadu_ps(a + i), _mm_loadu_ps(b + i))));
#endif
    for (; i < n; i++) {
        float v = a[i] + b[i];
        y[i] = v < 0.0f ? 0.0f : v;
    }
}

/* dx += k * (g - a - (x - m) * ib), g = dy masked by the ReLU output relu_y when given. acc 0: dx = 0 + k * (...) instead,
   what a zeroed dx would get, so dx may be dy itself (each element is read before it is written). */
static void ocr__bn_dx_row(int vec, const float *x, const float *dy, const float *relu_y, float *dx, int64_t n, float k, float a, float m,
                           float ib, int acc) {
    int64_t i = 0;
#ifdef OCR__HAVE_AVX2
    if (vec == 16) i = ocr__bn_dx_row_avx512(x, dy, relu_y, dx, n, k, a, m, ib, acc);
    if (vec == 8) i = ocr__bn_dx_row_avx2(x, dy, relu_y, dx, n, k, a, m, ib, acc);
#else
    (void)vec;
#endif
#ifdef OCR__SSE
    __m128 vk = _mm_set1_ps(k), va = _mm_set1_ps(a), vm = _mm_set1_ps(m), vib = _mm_set1_ps(ib);
    for (; i + 4 <= n; i += 4) {
        __m128 g = _mm_loadu_ps(dy + i), t;
        if (relu_y) g = _mm_and_ps(_mm_cmpgt_ps(_mm_loadu_ps(relu_y + i), _mm_setzero_ps()), g);
        t = _mm_sub_ps(_mm_sub_ps(g, va), _mm_mul_ps(_mm_sub_ps(_mm_loadu_ps(x + i), vm), vib));
        _mm_storeu_ps(dx + i, _mm_add_ps(acc ? _mm_loadu_ps(dx + i) : _mm_setzero_ps(), _mm_mul_ps(vk, t)));
    }
#endif
    for (; i < n; i++) {
        float t = k * ((relu_y ? ocr__relu_grad(relu_y[i], dy[i]) : dy[i]) - a - (x[i] - m) * ib);
        dx[i] = (acc ? dx[i] : 0.0f) + t;
    }
}

/* y += k * x */
static void ocr__axpy_row(const float *x, float *y, int64_t n, float k) {
    int64_t i = 0;
#ifdef OCR__SSE
    __m128 vk = _mm_set1_ps(k);
    for (; i + 4 <= n; i += 4) _mm_storeu_ps(y + i, _mm_add_ps(_mm_loadu_ps(y + i), _mm_mul_ps(vk, _mm_loadu_ps(x + i))));
#endif
    for (; i < n; i++) y[i] += k * x[i];
}

/* ---------------------------------------------------------------- batch normalisation */

typedef struct {
    const float *x, *gamma, *beta, *mean, *invstd, *dy;
    float *y, *dx, *dgamma, *dbeta, *rmean, *rvar, *smean, *sinv;
    const float *relu_y;   /* fused ReLU: forward clamps at 0; backward keeps dy where this output is > 0 */
    int64_t N, C, P;
    int training, relu;
    int saved;             /* forward: normalise with smean and sinv as given (ocr_nn_batchnorm2d_apply) */
    float momentum, eps;
    const double *sync;    /* backward with ctx->replica_sum: every replica's sum dy [C], sum dy*xhat [C] and count */
    int vec;               /* ocr__ctx_lanes */
} ocr__bn_job;

static void ocr__bn_fwd_part(void *arg, int64_t begin, int64_t end, int tid) {
    const ocr__bn_job *j = (const ocr__bn_job *)arg;
    int64_t c, n, count = j->N * j->P;
    (void)tid;
    for (c = begin; c < end; c++) {
        float m, inv, scale, shift;
        if (j->saved) { /* the same floats the forward normalised with, so the same output */
            m = j->smean[c];
            inv = j->sinv[c];
        } else {
            double mean, var;
            if (j->training) {
                /* two passes in double: exact enough for parity and immune to cancellation */
                double s = 0.0, ss = 0.0;
                for (n = 0; n < j->N; n++) s += ocr__sum_row(j->vec, j->x + (n * j->C + c) * j->P, j->P);
                mean = s / (double)count;
                for (n = 0; n < j->N; n++) ss += ocr__sqdev_row(j->vec, j->x + (n * j->C + c) * j->P, j->P, mean);
                var = ss / (double)count;
                j->rmean[c] = (1.0f - j->momentum) * j->rmean[c] + j->momentum * (float)mean;
                j->rvar[c] = (1.0f - j->momentum) * j->rvar[c] + j->momentum * (float)(count > 1 ? ss / (double)(count - 1) : var);
            } else {
                mean = j->rmean[c];
                var = j->rvar[c];
            }
            m = (float)mean;
            inv = (float)(1.0 / sqrt(var + (double)j->eps));
            j->smean[c] = m;
            j->sinv[c] = inv;
        }
        scale = inv * (j->gamma ? j->gamma[c] : 1.0f);
        shift = (j->beta ? j->beta[c] : 0.0f) - m * scale;
        for (n = 0; n < j->N; n++)
            ocr__affine_row(j->vec, j->x + (n * j->C + c) * j->P, j->y + (n * j->C + c) * j->P, j->P, scale, shift, j->relu);
    }
}

static int ocr__bn_check_vec(ocr_ctx *ctx, const char *fn, const ocr_tensor *t, int64_t C) {
    int rc;
    if (!t) return OCR_OK;
    if ((rc = ocr_check_f32(ctx, fn, t))) return rc;
    return ocr_check_shape(ctx, fn, t, ocr_shape1(C));
}

/* ---- synchronised batch statistics (ctx->replica_sum): the whole global batch's, summed over the replicas in double ---- */
typedef struct { const ocr__bn_job *j; double *sums; const double *mean; } ocr__bn_sync_job;

/* forward: sums[c] = sum of x over the channel (mean NULL), or of (x - mean[c])^2; backward (j->dy set): sums[c] = sum of
   dy and sums[C + c] = sum of dy * xhat, dy masked by the ReLU output when fused */
static void ocr__bn_sync_part(void *arg, int64_t begin, int64_t end, int tid) {
    const ocr__bn_sync_job *s = (const ocr__bn_sync_job *)arg;
    const ocr__bn_job *j = s->j;
    int64_t c, n;
    (void)tid;
    for (c = begin; c < end; c++) {
        double a = 0.0, b = 0.0;
        for (n = 0; n < j->N; n++) {
            const float *xc = j->x + (n * j->C + c) * j->P;
            if (j->dy) ocr__bn_grad_sums_row(j->vec, xc, j->dy + (n * j->C + c) * j->P, j->relu_y ? j->relu_y + (n * j->C + c) * j->P : NULL,
                                             j->P, j->mean[c], j->invstd[c], &a, &b);
            else a += s->mean ? ocr__sqdev_row(j->vec, xc, j->P, s->mean[c]) : ocr__sum_row(j->vec, xc, j->P);
        }
        s->sums[c] = a;
        if (j->dy) s->sums[j->C + c] = b;
    }
}

/* Training forward with the statistics of every replica's batch (two passes, as the local one), then the
   normalisation with them. */
static int ocr__bn_sync_forward(ocr_ctx *ctx, const char *fn, ocr__bn_job *j) {
    int64_t C = j->C, c;
    double *buf = (double *)OCR_MALLOC((size_t)(2 * C + 1) * sizeof(double)), *mean = buf + C + 1, count;
    ocr__bn_sync_job s;
    if (!buf) return ocr_error(ctx, OCR_ENOMEM, "%s: out of memory", fn);
    s.j = j; s.sums = buf; s.mean = NULL;
    ocr_parallel_for(ctx, C, 1, ocr__bn_sync_part, &s);
    buf[C] = (double)(j->N * j->P);
    if (ctx->replica_sum(ctx->replica_user, buf, C + 1) != 0) goto failed;
    count = buf[C];
    for (c = 0; c < C; c++) mean[c] = buf[c] / count;
    s.mean = mean;
    ocr_parallel_for(ctx, C, 1, ocr__bn_sync_part, &s);
    if (ctx->replica_sum(ctx->replica_user, buf, C) != 0) goto failed;
    for (c = 0; c < C; c++) {
        double var = buf[c] / count;
        j->smean[c] = (float)mean[c];
        j->sinv[c] = (float)(1.0 / sqrt(var + (double)j->eps));
        j->rmean[c] = (1.0f - j->momentum) * j->rmean[c] + j->momentum * (float)mean[c];
        j->rvar[c] = (1.0f - j->momentum) * j->rvar[c] + j->momentum * (float)(count > 1 ? buf[c] / (count - 1) : var);
    }
    OCR_FREE(buf);
    j->saved = 1;
    ocr_parallel_for(ctx, C, 1, ocr__bn_fwd_part, j);
    return OCR_OK;
failed:
    OCR_FREE(buf);
    return ocr_error(ctx, OCR_EIO, "%s: summing the batch statistics over the replicas failed (ctx->replica_sum)", fn);
}

static void ocr__bn_bwd_part(void *arg, int64_t begin, int64_t end, int tid);

/* Training backward: dgamma and dbeta get this replica's sums (the gradient all-reduce adds the others'), dx the
   derivative through the global statistics. */
static int ocr__bn_sync_backward(ocr_ctx *ctx, const char *fn, ocr__bn_job *j) {
    int64_t C = j->C, c;
    double *buf = (double *)OCR_MALLOC((size_t)(2 * C + 1) * sizeof(double));
    ocr__bn_sync_job s;
    if (!buf) return ocr_error(ctx, OCR_ENOMEM, "%s: out of memory", fn);
    s.j = j; s.sums = buf; s.mean = NULL;
    ocr_parallel_for(ctx, C, 1, ocr__bn_sync_part, &s);
    for (c = 0; c < C; c++) {
        if (j->dgamma) j->dgamma[c] += (float)buf[C + c];
        if (j->dbeta) j->dbeta[c] += (float)buf[c];
    }
    buf[2 * C] = (double)(j->N * j->P);
    if (ctx->replica_sum(ctx->replica_user, buf, 2 * C + 1) != 0) {
        OCR_FREE(buf);
        return ocr_error(ctx, OCR_EIO, "%s: summing the gradient statistics over the replicas failed (ctx->replica_sum)", fn);
    }
    j->sync = buf;
    if (j->dx) ocr_parallel_for(ctx, C, 1, ocr__bn_bwd_part, j);
    OCR_FREE(buf);
    return OCR_OK;
}

OCRDEF int ocr_nn_batchnorm2d_forward(ocr_ctx *ctx, const ocr_tensor *x, const ocr_tensor *gamma, const ocr_tensor *beta,
                                      ocr_tensor *running_mean, ocr_tensor *running_var, int training, float momentum,
                                      float eps, ocr_tensor *save_mean, ocr_tensor *save_invstd, ocr_tensor *y) {
    const char *fn = "ocr_nn_batchnorm2d_forward";
    ocr__bn_job j;
    int64_t C;
    int rc;
    if ((rc = ocr_check_f32(ctx, fn, x)) || (rc = ocr_check_f32(ctx, fn, y)) || (rc = ocr_check_same_shape(ctx, fn, x, y))) return rc;
    if (x->shape.ndim != 4) return ocr_error(ctx, OCR_ESHAPE, "%s: input '%s' must be 4-D [N,C,H,W]", fn, x->name);
    C = x->shape.dim[1];
    if (!running_mean || !running_var || !save_mean || !save_invstd)
        return ocr_error(ctx, OCR_EINVAL, "%s: running_mean, running_var, save_mean and save_invstd are required", fn);
    if ((rc = ocr__bn_check_vec(ctx, fn, gamma, C)) || (rc = ocr__bn_check_vec(ctx, fn, beta, C)) ||
        (rc = ocr__bn_check_vec(ctx, fn, running_mean, C)) || (rc = ocr__bn_check_vec(ctx, fn, running_var, C)) ||
        (rc = ocr__bn_check_vec(ctx, fn, save_mean, C)) || (rc = ocr__bn_check_vec(ctx, fn, save_invstd, C)))
        return rc;
    if (!(eps > 0.0f) || !(momentum >= 0.0f && momentum <= 1.0f))
        return ocr_error(ctx, OCR_EINVAL, "%s: eps %g must be > 0 and momentum %g in [0, 1]", fn, eps, momentum);
    if (training && x->shape.dim[0] * x->shape.dim[2] * x->shape.dim[3] < 2)
        return ocr_error(ctx, OCR_ESHAPE, "%s: training needs more than one value per channel, input '%s' has one", fn, x->name);
    if (training && ctx->replica_sum && ctx->device != OCR_DEVICE_CPU)
        return ocr_error(ctx, OCR_EUNSUPPORTED, "%s: synchronised batch statistics (ctx->replica_sum) are CPU only", fn);
#ifdef OCR_CUDA
    if (ctx->device == OCR_DEVICE_CUDA) return ocr__cuda_done(ctx, ocr_cuda_batchnorm2d_forward(ctx, x, gamma, beta, running_mean, running_var, training, momentum, eps, save_mean, save_invstd, y), fn, "forward", y, NULL, NULL);
#endif
    if (ocr__use_ref(ctx) && !(training && ctx->replica_sum)) { /* synchronised: one path */
        ocr__ref_bn_forward((const float *)x->data, gamma ? (const float *)gamma->data : NULL, beta ? (const float *)beta->data : NULL,
                            (float *)running_mean->data, (float *)running_var->data, training, momentum, eps, (float *)save_mean->data,
                            (float *)save_invstd->data, 0, (float *)y->data, x->shape.dim[0], C, x->shape.dim[2] * x->shape.dim[3]);
        return ocr__watch(ctx, fn, "forward", y);
    }
    memset(&j, 0, sizeof j);
    j.vec = ocr__ctx_lanes(ctx);
    j.x = (const float *)x->data; j.y = (float *)y->data;
    j.gamma = gamma ? (const float *)gamma->data : NULL; j.beta = beta ? (const float *)beta->data : NULL;
    j.rmean = (float *)running_mean->data; j.rvar = (float *)running_var->data;
    j.smean = (float *)save_mean->data; j.sinv = (float *)save_invstd->data;
    j.N = x->shape.dim[0]; j.C = C; j.P = x->shape.dim[2] * x->shape.dim[3];
    j.training = training; j.momentum = momentum; j.eps = eps;
    if (training && ctx->replica_sum) { if ((rc = ocr__bn_sync_forward(ctx, fn, &j))) return rc; }
    else ocr_parallel_for(ctx, C, 1, ocr__bn_fwd_part, &j);
    return ocr__watch(ctx, fn, "forward", y);
}

static void ocr__bn_bwd_part(void *arg, int64_t begin, int64_t end, int tid) {
    const ocr__bn_job *j = (const ocr__bn_job *)arg;
    int64_t c, n;
    double count = j->sync ? j->sync[2 * j->C] : (double)(j->N * j->P);
    (void)tid;
    for (c = begin; c < end; c++) {
        double sdy = 0.0, sdyx = 0.0;
        float m = j->mean[c], inv = j->invstd[c], g = j->gamma ? j->gamma[c] : 1.0f;
        if (j->sync) { /* the replicas' sums; this replica's own went into dgamma and dbeta already */
            sdy = j->sync[c];
            sdyx = j->sync[j->C + c];
        } else {
            for (n = 0; n < j->N; n++)
                ocr__bn_grad_sums_row(j->vec, j->x + (n * j->C + c) * j->P, j->dy + (n * j->C + c) * j->P,
                                      j->relu_y ? j->relu_y + (n * j->C + c) * j->P : NULL, j->P, m, inv, &sdy, &sdyx);
            if (j->dgamma) j->dgamma[c] += (float)sdyx;
            if (j->dbeta) j->dbeta[c] += (float)sdy;
        }
        if (!j->dx) continue;
        {
            float k = g * inv, a = (float)(sdy / count), b = (float)(sdyx / count);
            int acc = j->dx != j->dy; /* in place: overwrite */
            for (n = 0; n < j->N; n++) {
                const float *xc = j->x + (n * j->C + c) * j->P, *dyc = j->dy + (n * j->C + c) * j->P;
                const float *yc = j->relu_y ? j->relu_y + (n * j->C + c) * j->P : NULL;
                float *dxc = j->dx + (n * j->C + c) * j->P;
                int64_t i;
                if (j->training) ocr__bn_dx_row(j->vec, xc, dyc, yc, dxc, j->P, k, a, m, inv * b, acc);
                else if (!yc && acc) ocr__axpy_row(dyc, dxc, j->P, k);
                else for (i = 0; i < j->P; i++) dxc[i] = (acc ? dxc[i] : 0.0f) + k * (yc ? ocr__relu_grad(yc[i], dyc[i]) : dyc[i]);
            }
        }
    }
}

/* dx may be dy itself (then overwritten, on the CPU) but must not overlap it otherwise, nor overlap x or the ReLU output. */
static int ocr__bn_check_dx(ocr_ctx *ctx, const char *fn, const ocr_tensor *x, const ocr_tensor *relu_y, const ocr_tensor *dy,
                            const ocr_tensor *dx) {
    const char *b = dx ? (const char *)dx->data : NULL, *e = b ? b + ocr_tensor_bytes(dx) : NULL;
    const ocr_tensor *other[3];
    int i;
    if (!dx) return OCR_OK;
    other[0] = dy; other[1] = x; other[2] = relu_y;
    for (i = 0; i < 3; i++) {
        const char *ob = other[i] ? (const char *)other[i]->data : NULL;
        if (!ob || (i == 0 && ob == b) || ob >= e || ob + ocr_tensor_bytes(other[i]) <= b) continue;
        return ocr_error(ctx, OCR_EINVAL, "%s: gradient '%s' overlaps '%s'%s", fn, dx->name, other[i]->name,
                         i == 0 ? " without being it (dx may be dy itself, to be overwritten in place)" : "");
    }
    if (dx->data == dy->data && ctx->device != OCR_DEVICE_CPU)
        return ocr_error(ctx, OCR_EUNSUPPORTED, "%s: dx in place of dy is CPU only (%s)", fn, ocr_device_name(ctx->device));
    return OCR_OK;
}

OCRDEF int ocr_nn_batchnorm2d_backward(ocr_ctx *ctx, const ocr_tensor *x, const ocr_tensor *gamma, const ocr_tensor *save_mean,
                                       const ocr_tensor *save_invstd, const ocr_tensor *dy, int training,
                                       ocr_tensor *dx, ocr_tensor *dgamma, ocr_tensor *dbeta) {
    const char *fn = "ocr_nn_batchnorm2d_backward";
    ocr__bn_job j;
    int64_t C;
    int rc;
    if ((rc = ocr_check_f32(ctx, fn, x)) || (rc = ocr_check_f32(ctx, fn, dy)) || (rc = ocr_check_same_shape(ctx, fn, x, dy))) return rc;
    if (x->shape.ndim != 4) return ocr_error(ctx, OCR_ESHAPE, "%s: input '%s' must be 4-D [N,C,H,W]", fn, x->name);
    C = x->shape.dim[1];
    if (!save_mean || !save_invstd) return ocr_error(ctx, OCR_EINVAL, "%s: save_mean and save_invstd from forward are required", fn);
    if ((rc = ocr__bn_check_vec(ctx, fn, gamma, C)) || (rc = ocr__bn_check_vec(ctx, fn, save_mean, C)) ||
        (rc = ocr__bn_check_vec(ctx, fn, save_invstd, C)) || (rc = ocr__bn_check_vec(ctx, fn, dgamma, C)) ||
        (rc = ocr__bn_check_vec(ctx, fn, dbeta, C)))
        return rc;
    if (dx && ((rc = ocr_check_f32(ctx, fn, dx)) || (rc = ocr_check_same_shape(ctx, fn, x, dx)))) return rc;
    if ((rc = ocr__bn_check_dx(ctx, fn, x, NULL, dy, dx))) return rc;
    if (training && ctx->replica_sum && ctx->device != OCR_DEVICE_CPU)
        return ocr_error(ctx, OCR_EUNSUPPORTED, "%s: synchronised batch statistics (ctx->replica_sum) are CPU only", fn);
#ifdef OCR_CUDA
    if (ctx->device == OCR_DEVICE_CUDA) return ocr__cuda_done(ctx, ocr_cuda_batchnorm2d_backward(ctx, x, gamma, save_mean, save_invstd, dy, training, dx, dgamma, dbeta), fn, "backward", dx, dgamma, dbeta);
#endif
    if (ocr__use_ref(ctx) && !(training && ctx->replica_sum)) { /* synchronised: one path */
        ocr__ref_bn_backward((const float *)x->data, NULL, gamma ? (const float *)gamma->data : NULL, (const float *)save_mean->data,
                             (const float *)save_invstd->data, (const float *)dy->data, training, dx ? (float *)dx->data : NULL,
                             dgamma ? (float *)dgamma->data : NULL, dbeta ? (float *)dbeta->data : NULL, x->shape.dim[0], C,
                             x->shape.dim[2] * x->shape.dim[3]);
    } else {
        memset(&j, 0, sizeof j);
        j.vec = ocr__ctx_lanes(ctx);
        j.x = (const float *)x->data; j.dy = (const float *)dy->data;
        j.gamma = gamma ? (const float *)gamma->data : NULL;
        j.mean = (const float *)save_mean->data; j.invstd = (const float *)save_invstd->data;
        j.dx = dx ? (float *)dx->data : NULL; j.dgamma = dgamma ? (float *)dgamma->data : NULL; j.dbeta = dbeta ? (float *)dbeta->data : NULL;
        j.N = x->shape.dim[0]; j.C = C; j.P = x->shape.dim[2] * x->shape.dim[3]; j.training = training;
        if (training && ctx->replica_sum) { if ((rc = ocr__bn_sync_backward(ctx, fn, &j))) return rc; }
        else ocr_parallel_for(ctx, C, 1, ocr__bn_bwd_part, &j);
    }
    if ((rc = ocr__watch(ctx, fn, "backward", dx)) || (rc = ocr__watch(ctx, fn, "backward", dgamma))) return rc;
    return ocr__watch(ctx, fn, "backward", dbeta);
}

/* The checks of ocr_nn_batchnorm2d_forward and _backward, for the fused BN + ReLU pair, plus the ReLU output's. */
static int ocr__bn_relu_check(ocr_ctx *ctx, const char *fn, const ocr_tensor *x, const ocr_tensor *y, const ocr_tensor *dy,
                              const ocr_tensor *const *vecs, int n_vecs, const ocr_tensor *dx) {
    int64_t C;
    int rc, i;
    if ((rc = ocr_check_f32(ctx, fn, x)) || (rc = ocr_check_f32(ctx, fn, y)) || (rc = ocr_check_same_shape(ctx, fn, x, y))) return rc;
    if (dy && ((rc = ocr_check_f32(ctx, fn, dy)) || (rc = ocr_check_same_shape(ctx, fn, x, dy)))) return rc;
    if (dx && ((rc = ocr_check_f32(ctx, fn, dx)) || (rc = ocr_check_same_shape(ctx, fn, x, dx)))) return rc;
    if (x->shape.ndim != 4) return ocr_error(ctx, OCR_ESHAPE, "%s: input '%s' must be 4-D [N,C,H,W]", fn, x->name);
    if (x->data == y->data) return ocr_error(ctx, OCR_EINVAL, "%s: output '%s' must not alias input '%s'", fn, y->name, x->name);
    if (ctx->device != OCR_DEVICE_CPU)
        return ocr_error(ctx, OCR_EUNSUPPORTED, "%s: CPU only; on %s call the batchnorm2d and relu ops", fn, ocr_device_name(ctx->device));
    C = x->shape.dim[1];
    for (i = 0; i < n_vecs; i++) if ((rc = ocr__bn_check_vec(ctx, fn, vecs[i], C))) return rc;
    return OCR_OK;
}

OCRDEF int ocr_nn_batchnorm2d_relu_forward(ocr_ctx *ctx, const ocr_tensor *x, const ocr_tensor *gamma, const ocr_tensor *beta,
                                           ocr_tensor *running_mean, ocr_tensor *running_var, int training, float momentum,
                                           float eps, ocr_tensor *save_mean, ocr_tensor *save_invstd, ocr_tensor *y) {
    const char *fn = "ocr_nn_batchnorm2d_relu_forward";
    const ocr_tensor *vecs[6];
    ocr__bn_job j;
    int rc;
    vecs[0] = gamma; vecs[1] = beta; vecs[2] = running_mean; vecs[3] = running_var; vecs[4] = save_mean; vecs[5] = save_invstd;
    if (!running_mean || !running_var || !save_mean || !save_invstd)
        return ocr_error(ctx, OCR_EINVAL, "%s: running_mean, running_var, save_mean and save_invstd are required", fn);
    if ((rc = ocr__bn_relu_check(ctx, fn, x, y, NULL, vecs, 6, NULL))) return rc;
    if (!(eps > 0.0f) || !(momentum >= 0.0f && momentum <= 1.0f))
        return ocr_error(ctx, OCR_EINVAL, "%s: eps %g must be > 0 and momentum %g in [0, 1]", fn, eps, momentum);
    if (training && x->shape.dim[0] * x->shape.dim[2] * x->shape.dim[3] < 2)
        return ocr_error(ctx, OCR_ESHAPE, "%s: training needs more than one value per channel, input '%s' has one", fn, x->name);
    if (ocr__use_ref(ctx) && !(training && ctx->replica_sum)) { /* synchronised: one path */
        ocr__ref_bn_forward((const float *)x->data, gamma ? (const float *)gamma->data : NULL, beta ? (const float *)beta->data : NULL,
                            (float *)running_mean->data, (float *)running_var->data, training, momentum, eps, (float *)save_mean->data,
                            (float *)save_invstd->data, 1, (float *)y->data, x->shape.dim[0], x->shape.dim[1],
                            x->shape.dim[2] * x->shape.dim[3]);
        return ocr__watch(ctx, fn, "forward", y);
    }
    memset(&j, 0, sizeof j);
    j.vec = ocr__ctx_lanes(ctx);
    j.x = (const float *)x->data; j.y = (float *)y->data;
    j.gamma = gamma ? (const float *)gamma->data : NULL; j.beta = beta ? (const float *)beta->data : NULL;
    j.rmean = (float *)running_mean->data; j.rvar = (float *)running_var->data;
    j.smean = (float *)save_mean->data; j.sinv = (float *)save_invstd->data;
    j.N = x->shape.dim[0]; j.C = x->shape.dim[1]; j.P = x->shape.dim[2] * x->shape.dim[3];
    j.training = training; j.momentum = momentum; j.eps = eps; j.relu = 1;
    if (training && ctx->replica_sum) { if ((rc = ocr__bn_sync_forward(ctx, fn, &j))) return rc; }
    else ocr_parallel_for(ctx, j.C, 1, ocr__bn_fwd_part, &j);
    return ocr__watch(ctx, fn, "forward", y);
}

OCRDEF int ocr_nn_batchnorm2d_apply(ocr_ctx *ctx, const ocr_tensor *x, const ocr_tensor *gamma, const ocr_tensor *beta,
                                    const ocr_tensor *save_mean, const ocr_tensor *save_invstd, int relu, ocr_tensor *y) {
    const char *fn = "ocr_nn_batchnorm2d_apply";
    const ocr_tensor *vecs[4];
    ocr__bn_job j;
    int rc;
    vecs[0] = gamma; vecs[1] = beta; vecs[2] = save_mean; vecs[3] = save_invstd;
    if (!save_mean || !save_invstd) return ocr_error(ctx, OCR_EINVAL, "%s: save_mean and save_invstd from a forward are required", fn);
    if ((rc = ocr__bn_relu_check(ctx, fn, x, y, NULL, vecs, 4, NULL))) return rc;
    if (ocr__use_ref(ctx)) {
        ocr__ref_bn_normalize((const float *)x->data, gamma ? (const float *)gamma->data : NULL, beta ? (const float *)beta->data : NULL,
                              (const float *)save_mean->data, (const float *)save_invstd->data, relu != 0, (float *)y->data,
                              x->shape.dim[0], x->shape.dim[1], x->shape.dim[2] * x->shape.dim[3]);
        return ocr__watch(ctx, fn, "forward", y);
    }
    memset(&j, 0, sizeof j);
    j.vec = ocr__ctx_lanes(ctx);
    j.x = (const float *)x->data; j.y = (float *)y->data;
    j.gamma = gamma ? (const float *)gamma->data : NULL; j.beta = beta ? (const float *)beta->data : NULL;
    j.smean = (float *)save_mean->data; j.sinv = (float *)save_invstd->data; /* only read: j.saved */
    j.N = x->shape.dim[0]; j.C = x->shape.dim[1]; j.P = x->shape.dim[2] * x->shape.dim[3];
    j.saved = 1; j.relu = relu != 0;
    ocr_parallel_for(ctx, j.C, 1, ocr__bn_fwd_part, &j);
    return ocr__watch(ctx, fn, "forward", y);
}

OCRDEF int ocr_nn_batchnorm2d_relu_backward(ocr_ctx *ctx, const ocr_tensor *x, const ocr_tensor *y, const ocr_tensor *gamma,
                                            const ocr_tensor *save_mean, const ocr_tensor *save_invstd, const ocr_tensor *dy,
                                            int training, ocr_tensor *dx, ocr_tensor *dgamma, ocr_tensor *dbeta) {
    const char *fn = "ocr_nn_batchnorm2d_relu_backward";
    const ocr_tensor *vecs[5];
    ocr__bn_job j;
    int rc;
    vecs[0] = gamma; vecs[1] = save_mean; vecs[2] = save_invstd; vecs[3] = dgamma; vecs[4] = dbeta;
    if (!save_mean || !save_invstd) return ocr_error(ctx, OCR_EINVAL, "%s: save_mean and save_invstd from forward are required", fn);
    if (!dy) return ocr_error(ctx, OCR_EINVAL, "%s: dy is required", fn);
    if ((rc = ocr__bn_relu_check(ctx, fn, x, y, dy, vecs, 5, dx)) || (rc = ocr__bn_check_dx(ctx, fn, x, y, dy, dx))) return rc;
    if (ocr__use_ref(ctx) && !(training && ctx->replica_sum)) { /* synchronised: one path */
        ocr__ref_bn_backward((const float *)x->data, (const float *)y->data, gamma ? (const float *)gamma->data : NULL,
                             (const float *)save_mean->data, (const float *)save_invstd->data, (const float *)dy->data, training,
                             dx ? (float *)dx->data : NULL, dgamma ? (float *)dgamma->data : NULL, dbeta ? (float *)dbeta->data : NULL,
                             x->shape.dim[0], x->shape.dim[1], x->shape.dim[2] * x->shape.dim[3]);
    } else {
        memset(&j, 0, sizeof j);
        j.vec = ocr__ctx_lanes(ctx);
        j.x = (const float *)x->data; j.dy = (const float *)dy->data; j.relu_y = (const float *)y->data;
        j.gamma = gamma ? (const float *)gamma->data : NULL;
        j.mean = (const float *)save_mean->data; j.invstd = (const float *)save_invstd->data;
        j.dx = dx ? (float *)dx->data : NULL; j.dgamma = dgamma ? (float *)dgamma->data : NULL; j.dbeta = dbeta ? (float *)dbeta->data : NULL;
        j.N = x->shape.dim[0]; j.C = x->shape.dim[1]; j.P = x->shape.dim[2] * x->shape.dim[3]; j.training = training;
        if (training && ctx->replica_sum) { if ((rc = ocr__bn_sync_backward(ctx, fn, &j))) return rc; }
        else ocr_parallel_for(ctx, j.C, 1, ocr__bn_bwd_part, &j);
    }
    if ((rc = ocr__watch(ctx, fn, "backward", dx)) || (rc = ocr__watch(ctx, fn, "backward", dgamma))) return rc;
    return ocr__watch(ctx, fn, "backward", dbeta);
}

/* ---------------------------------------------------------------- pointwise */

typedef struct { const float *a, *b; float *y; int op, vec; } ocr__pw_job; /* vec: 16 where the AVX-512 kernels were picked, 8 the AVX2 ones */
enum { OCR__PW_RELU, OCR__PW_RELU_BWD, OCR__PW_SIGMOID, OCR__PW_SIGMOID_BWD, OCR__PW_ADD, OCR__PW_ADD_RELU, OCR__PW_ACC, OCR__PW_COPY };

/* y = a + b over n floats; y may be a or b */
static void ocr__pw_part_add(const float *a, const float *b, float *y, int64_t n) {
    int64_t i = 0;
#ifdef OCR__SSE
    for (; i + 4 <= n; i += 4) _mm_storeu_ps(y + i, _mm_add_ps(_mm_loadu_ps(a + i), _mm_loadu_ps(b + i)));
#endif
    for (; i < n; i++) y[i] = a[i] + b[i];
}

#ifdef OCR__HAVE_AVX2
/* The sigmoid below, 16 at a time: exp(-|x|) as 2^k p(r), k = round(-|x| / ln 2), r = -|x| - k ln 2 (ln 2 in two
   parts, so r carries no rounding of its own), p the degree-7 Taylor polynomial (its truncation under 1e-8 for
   |r| <= ln 2 / 2). The scalar expf took 1.8 ms of a 40 ms inference at 736x1280 (width 0.25). -|x| is clamped at
   -104, where exp is below float's smallest denormal, so p never overflows; NaN passes through the clamp (max takes
   its second operand when one is NaN) and through everything after it. */
__attribute__((target("avx512f")))
static void ocr__sigmoid_avx512(const float *a, float *y, int64_t n) {
    static const float taylor[8] = {1.0f / 5040, 1.0f / 720, 1.0f / 120, 1.0f / 24, 1.0f / 6, 0.5f, 1.0f, 1.0f};
    const __m512 log2e = _mm512_set1_ps(1.44269504f), ln2_hi = _mm512_set1_ps(0.693359375f), ln2_lo = _mm512_set1_ps(-2.12194440e-4f);
    const __m512 one = _mm512_set1_ps(1.0f), floor_ = _mm512_set1_ps(-104.0f);
    int64_t i;
    int c;
    for (i = 0; i < n; i += 16) {
        __mmask16 m = ocr__lanes(n - i);
        __m512 x = _mm512_maskz_loadu_ps(m, a + i);
        __m512 t = _mm512_max_ps(floor_, _mm512_sub_ps(_mm512_setzero_ps(), _mm512_abs_ps(x)));
        __m512 k = _mm512_roundscale_ps(_mm512_mul_ps(t, log2e), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
        __m512 r = _mm512_fnmadd_ps(k, ln2_lo, _mm512_fnmadd_ps(k, ln2_hi, t));
        __m512 p = _mm512_set1_ps(taylor[0]), z;
        for (c = 1; c < 8; c++) p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(taylor[c]));
        z = _mm512_scalef_ps(p, k);
        /* x >= 0: 1 / (1 + z); otherwise (NaN too) z / (1 + z) */
        _mm512_mask_storeu_ps(y + i, m, _mm512_div_ps(_mm512_mask_blend_ps(_mm512_cmp_ps_mask(x, _mm512_setzero_ps(), _CMP_GE_OQ), z, one),
                                                      _mm512_add_ps(one, z)));
    }
}

/* The same on 8 lanes (the AVX2 CPUs; libm's expf one value at a time took 4.3 ms of a 736x1280 map): AVX2 has no
   scalef, so 2^k is two powers of two, k/2 and k - k/2 (each a normal float for k >= -151), the first product exact
   and the second rounding once as scalef does: the AVX-512 path's bits. */
__attribute__((target("avx2,fma")))
static void ocr__sigmoid_avx2(const float *a, float *y, int64_t n) {
    static const float taylor[8] = {1.0f / 5040, 1.0f / 720, 1.0f / 120, 1.0f / 24, 1.0f / 6, 0.5f, 1.0f, 1.0f};
    const __m256 log2e = _mm256_set1_ps(1.44269504f), ln2_hi = _mm256_set1_ps(0.693359375f), ln2_lo = _mm256_set1_ps(-2.12194440e-4f);
    const __m256 one = _mm256_set1_ps(1.0f), floor_ = _mm256_set1_ps(-104.0f), sign = _mm256_set1_ps(-0.0f);
    const __m256i bias = _mm256_set1_epi32(127);
    int64_t i;
    int c;
    for (i = 0; i < n; i += 8) {
        __m256i m = ocr__lanes8(n - i), k1, k2;
        __m256 x = n - i >= 8 ? _mm256_loadu_ps(a + i) : _mm256_maskload_ps(a + i, m);
        __m256 t = _mm256_max_ps(floor_, _mm256_sub_ps(_mm256_setzero_ps(), _mm256_andnot_ps(sign, x))); /* as AVX-512 (a NaN's sign too) */
        __m256 k = _mm256_round_ps(_mm256_mul_ps(t, log2e), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
        __m256 r = _mm256_fnmadd_ps(k, ln2_lo, _mm256_fnmadd_ps(k, ln2_hi, t));
        __m256 p = _mm256_set1_ps(taylor[0]), z, q;
        for (c = 1; c < 8; c++) p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(taylor[c]));
        k1 = _mm256_srai_epi32(_mm256_cvtps_epi32(k), 1);
        k2 = _mm256_sub_epi32(_mm256_cvtps_epi32(k), k1);
        z = _mm256_mul_ps(_mm256_mul_ps(p, _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(k1, bias), 23))),
                          _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(k2, bias), 23)));
        /* x >= 0: 1 / (1 + z); otherwise (NaN too) z / (1 + z) */
        q = _mm256_div_ps(_mm256_blendv_ps(z, one, _mm256_cmp_ps(x, _mm256_setzero_ps(), _CMP_GE_OQ)), _mm256_add_ps(one, z));
        if (n - i >= 8) _mm256_storeu_ps(y + i, q);
        else _mm256_maskstore_ps(y + i, m, q);
    }
}
#endif

static void ocr__pw_part(void *arg, int64_t begin, int64_t end, int tid) {
    const ocr__pw_job *j = (const ocr__pw_job *)arg;
    const float *a = j->a, *b = j->b;
    float *y = j->y;
    int64_t i;
    (void)tid;
    switch (j->op) {
    case OCR__PW_RELU:
        i = begin;
#ifdef OCR__SSE
        /* NaN stays NaN, as in PyTorch, so the numerics watch and the loss still see it: max(0, a) returns a when
           a is NaN, and so does the comparison below */
        for (; i + 4 <= end; i += 4) _mm_storeu_ps(y + i, _mm_max_ps(_mm_setzero_ps(), _mm_loadu_ps(a + i)));
#endif
        for (; i < end; i++) y[i] = a[i] < 0.0f ? 0.0f : a[i];
        break;
    case OCR__PW_RELU_BWD: { /* a = output, b = dy; y = b: in place, 0 + the masked dy as a zeroed dx would get */
        const int acc = y != b;
        i = begin;
#ifdef OCR__SSE
        for (; i + 4 <= end; i += 4) {
            __m128 on = _mm_cmpgt_ps(_mm_loadu_ps(a + i), _mm_setzero_ps());
            _mm_storeu_ps(y + i, _mm_add_ps(acc ? _mm_loadu_ps(y + i) : _mm_setzero_ps(), _mm_and_ps(on, _mm_loadu_ps(b + i))));
        }
#endif
        for (; i < end; i++) y[i] = (acc ? y[i] : 0.0f) + (a[i] > 0.0f ? b[i] : 0.0f);
        break;
    }
    case OCR__PW_SIGMOID:
#ifdef OCR__HAVE_AVX2
        if (j->vec) {
            (j->vec == 16 ? ocr__sigmoid_avx512 : ocr__sigmoid_avx2)(a + begin, y + begin, end - begin);
            break;
        }
#endif
        /* exp of a non-positive number only, so neither branch can overflow */
        for (i = begin; i < end; i++) {
            float z = expf(-fabsf(a[i]));
            y[i] = a[i] >= 0.0f ? 1.0f / (1.0f + z) : z / (1.0f + z);
        }
        break;
    case OCR__PW_SIGMOID_BWD: for (i = begin; i < end; i++) y[i] += b[i] * a[i] * (1.0f - a[i]); break;
    case OCR__PW_ADD: ocr__pw_part_add(a + begin, b + begin, y + begin, end - begin); break;
    case OCR__PW_ADD_RELU: ocr__add_relu_row(j->vec, a + begin, b + begin, y + begin, end - begin); break;
    case OCR__PW_ACC: ocr__axpy_row(a + begin, y + begin, end - begin, 1.0f); break;
    case OCR__PW_COPY: memcpy(y + begin, a + begin, (size_t)(end - begin) * sizeof(float)); break;
    default: break;
    }
}

/* y[i] = op(a[i], b[i]) for i < n, spread over the threads in runs of at least 32K floats */
static void ocr__pw_floats(ocr_ctx *ctx, int op, const float *a, const float *b, float *y, int64_t n) {
    ocr__pw_job j;
    j.a = a; j.b = b; j.y = y; j.op = op; j.vec = ocr__ctx_lanes(ctx);
    ocr_parallel_for_dynamic(ctx, n, 1 << 15, ocr__pw_part, &j);
}
static void ocr__pw(ocr_ctx *ctx, int op, const ocr_tensor *a, const ocr_tensor *b, ocr_tensor *y) {
    ocr__pw_floats(ctx, op, (const float *)a->data, b ? (const float *)b->data : NULL, (float *)y->data, ocr_tensor_numel(y));
}

static int ocr__check_pair(ocr_ctx *ctx, const char *fn, const ocr_tensor *a, const ocr_tensor *b) {
    int rc;
    if ((rc = ocr_check_f32(ctx, fn, a)) || (rc = ocr_check_f32(ctx, fn, b))) return rc;
    return ocr_check_same_shape(ctx, fn, a, b);
}

OCRDEF int ocr_nn_relu_forward(ocr_ctx *ctx, const ocr_tensor *x, ocr_tensor *y) {
    int rc = ocr__check_pair(ctx, "ocr_nn_relu_forward", x, y);
    if (rc) return rc;
#ifdef OCR_CUDA
    if (ctx->device == OCR_DEVICE_CUDA) return ocr__cuda_done(ctx, ocr_cuda_relu_forward(ctx, x, y), "ocr_nn_relu_forward", "forward", y, NULL, NULL);
#endif
    if (ocr__use_ref(ctx)) ocr__ref_relu_forward((const float *)x->data, (float *)y->data, ocr_tensor_numel(y));
    else ocr__pw(ctx, OCR__PW_RELU, x, NULL, y);
    return ocr__watch(ctx, "ocr_nn_relu_forward", "forward", y);
}

OCRDEF int ocr_nn_relu_backward(ocr_ctx *ctx, const ocr_tensor *y, const ocr_tensor *dy, ocr_tensor *dx) {
    const char *fn = "ocr_nn_relu_backward";
    int rc;
    if ((rc = ocr__check_pair(ctx, fn, y, dy)) || (rc = ocr__check_pair(ctx, fn, y, dx))) return rc;
    if (dx->data == dy->data && ctx->device != OCR_DEVICE_CPU)
        return ocr_error(ctx, OCR_EUNSUPPORTED, "%s: dx in place of dy is CPU only (%s)", fn, ocr_device_name(ctx->device));
#ifdef OCR_CUDA
    if (ctx->device == OCR_DEVICE_CUDA) return ocr__cuda_done(ctx, ocr_cuda_relu_backward(ctx, y, dy, dx), fn, "backward", dx, NULL, NULL);
#endif
    if (ocr__use_ref(ctx)) ocr__ref_relu_backward((const float *)y->data, (const float *)dy->data, (float *)dx->data, ocr_tensor_numel(dx));
    else ocr__pw(ctx, OCR__PW_RELU_BWD, y, dy, dx);
    return ocr__watch(ctx, fn, "backward", dx);
}

OCRDEF int ocr_nn_sigmoid_forward(ocr_ctx *ctx, const ocr_tensor *x, ocr_tensor *y) {
    int rc = ocr__check_pair(ctx, "ocr_nn_sigmoid_forward", x, y);
    if (rc) return rc;
#ifdef OCR_CUDA
    if (ctx->device == OCR_DEVICE_CUDA) return ocr__cuda_done(ctx, ocr_cuda_sigmoid_forward(ctx, x, y), "ocr_nn_sigmoid_forward", "forward", y, NULL, NULL);
#endif
    if (ocr__use_ref(ctx)) ocr__ref_sigmoid_forward((const float *)x->data, (float *)y->data, ocr_tensor_numel(y));
    else ocr__pw(ctx, OCR__PW_SIGMOID, x, NULL, y);
    return ocr__watch(ctx, "ocr_nn_sigmoid_forward", "forward", y);
}

OCRDEF int ocr_nn_sigmoid_backward(ocr_ctx *ctx, const ocr_tensor *y, const ocr_tensor *dy, ocr_tensor *dx) {
    const char *fn = "ocr_nn_sigmoid_backward";
    int rc;
    if ((rc = ocr__check_pair(ctx, fn, y, dy)) || (rc = ocr__check_pair(ctx, fn, y, dx))) return rc;
#ifdef OCR_CUDA
    if (ctx->device == OCR_DEVICE_CUDA) return ocr__cuda_done(ctx, ocr_cuda_sigmoid_backward(ctx, y, dy, dx), fn, "backward", dx, NULL, NULL);
#endif
    if (ocr__use_ref(ctx)) ocr__ref_sigmoid_backward((const float *)y->data, (const float *)dy->data, (float *)dx->data, ocr_tensor_numel(dx));
    else ocr__pw(ctx, OCR__PW_SIGMOID_BWD, y, dy, dx);
    return ocr__watch(ctx, fn, "backward", dx);
}

OCRDEF int ocr_nn_add_forward(ocr_ctx *ctx, const ocr_tensor *a, const ocr_tensor *b, ocr_tensor *y) {
    const char *fn = "ocr_nn_add_forward";
    int rc;
    if ((rc = ocr__check_pair(ctx, fn, a, b)) || (rc = ocr__check_pair(ctx, fn, a, y))) return rc;
#ifdef OCR_CUDA
    if (ctx->device == OCR_DEVICE_CUDA) return ocr__cuda_done(ctx, ocr_cuda_add_forward(ctx, a, b, y), fn, "forward", y, NULL, NULL);
#endif
    if (ocr__use_ref(ctx)) ocr__ref_add_forward((const float *)a->data, (const float *)b->data, (float *)y->data, ocr_tensor_numel(y));
    else ocr__pw(ctx, OCR__PW_ADD, a, b, y);
    return ocr__watch(ctx, fn, "forward", y);
}

OCRDEF int ocr_nn_add_relu_forward(ocr_ctx *ctx, const ocr_tensor *a, const ocr_tensor *b, ocr_tensor *y) {
    const char *fn = "ocr_nn_add_relu_forward";
    int rc;
    if ((rc = ocr__check_pair(ctx, fn, a, b)) || (rc = ocr__check_pair(ctx, fn, a, y))) return rc;
    if (ctx->device != OCR_DEVICE_CPU)
        return ocr_error(ctx, OCR_EUNSUPPORTED, "%s: CPU only; on %s call the add and relu ops", fn, ocr_device_name(ctx->device));
    if (ocr__use_ref(ctx)) {
        ocr__ref_add_forward((const float *)a->data, (const float *)b->data, (float *)y->data, ocr_tensor_numel(y));
        ocr__ref_relu_forward((const float *)y->data, (float *)y->data, ocr_tensor_numel(y));
    } else {
        ocr__pw(ctx, OCR__PW_ADD_RELU, a, b, y);
    }
    return ocr__watch(ctx, fn, "forward", y);
}

OCRDEF int ocr_nn_add_backward(ocr_ctx *ctx, const ocr_tensor *dy, ocr_tensor *da, ocr_tensor *db) {
    const char *fn = "ocr_nn_add_backward";
    int rc;
    if (da && (rc = ocr__check_pair(ctx, fn, dy, da))) return rc;
    if (db && (rc = ocr__check_pair(ctx, fn, dy, db))) return rc;
#ifdef OCR_CUDA
    if (ctx->device == OCR_DEVICE_CUDA) return ocr__cuda_done(ctx, ocr_cuda_add_backward(ctx, dy, da, db), fn, "backward", da, db, NULL);
#endif
    if (ocr__use_ref(ctx)) {
        ocr__ref_add_backward((const float *)dy->data, da ? (float *)da->data : NULL, db ? (float *)db->data : NULL, ocr_tensor_numel(dy));
    } else {
        if (da) ocr__pw(ctx, OCR__PW_ACC, dy, NULL, da);
        if (db) ocr__pw(ctx, OCR__PW_ACC, dy, NULL, db);
    }
    if ((rc = ocr__watch(ctx, fn, "backward", da))) return rc;
    return ocr__watch(ctx, fn, "backward", db);
}

/* ---------------------------------------------------------------- pooling, upsampling, concat */

/* vector: 0 the per-output loop, 1 the stem's 3x3 window at stride 2 (inside the plane), 2 a window without padding
   (ocr__maxpool_nopad_rows); vec: their lanes, 16 (AVX-512) or 8 (AVX2) */
typedef struct { const float *x; float *y; int32_t *idx; int64_t H, W, OH, OW; int k, s, p, vector, vec; } ocr__pool_job;

/* One output of one plane: the window clipped to the plane, then a branch-free running maximum (the data decide
   "v > best" at random, which a branch would mispredict). */
static void ocr__maxpool_one(const ocr__pool_job *j, const float *xp, int64_t oh, int64_t ow, float *y, int32_t *idx) {
    int64_t h0 = oh * j->s - j->p, h1 = h0 + j->k, w0 = ow * j->s - j->p, w1 = w0 + j->k, arg_best, ih, iw;
    float best;
    h0 = h0 < 0 ? 0 : h0;
    h1 = h1 > j->H ? j->H : h1;
    w0 = w0 < 0 ? 0 : w0;
    w1 = w1 > j->W ? j->W : w1;
    arg_best = h0 * j->W + w0;
    best = xp[arg_best];
    for (ih = h0; ih < h1 && !isnan(best); ih++)
        for (iw = ih == h0 ? w0 + 1 : w0; iw < w1; iw++) {
            float v = xp[ih * j->W + iw];
            int take = v > best;
            /* NaN wins, as in PyTorch, so it is never hidden by pooling */
            if (isnan(v)) { best = v; arg_best = ih * j->W + iw; break; }
            best = take ? v : best;
            arg_best = take ? ih * j->W + iw : arg_best;
        }
    *y = best;
    if (idx) *idx = (int32_t)arg_best;
}

#ifdef OCR__HAVE_AVX2
/* One window position of 16 outputs: v (the candidates, at their indexes `at`) taken where it beats best, the scan
   rule of ocr__maxpool_one (greater, or the first NaN); the first position seeds best */
__attribute__((target("avx512f")))
static inline void ocr__maxpool_take16(__m512 v, __m512i at, int *first, __m512 *best, __m512i *arg) {
    __mmask16 take;
    if (*first) { *best = v; *arg = at; *first = 0; return; }
    take = (__mmask16)(_mm512_cmp_ps_mask(v, *best, _CMP_GT_OQ) |
                       (_mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q) & _mm512_cmp_ps_mask(*best, *best, _CMP_ORD_Q)));
    *best = _mm512_mask_mov_ps(*best, take, v);
    *arg = _mm512_mask_mov_epi32(*arg, take, at);
}

/* The ResNet stem's 3x3 window at stride 2 (pad 1) for outputs [ow0, ow1) of row oh whose windows lie inside the
   plane's columns, 16 per vector: the three window columns of 16 outputs are the even, odd and next-even floats of
   33 consecutive ones. Same scan order, ties and NaN rule as ocr__maxpool_one. Without argmax (the eval forward) a
   plain running maximum gives the same bits (max_ps(v, best) keeps best unless v is greater, as the scan does) save
   for NaN, so 16 outputs that meet a NaN are done again one by one. The window's columns stay in named registers:
   held in an array they went through the stack, and the store-to-load forwarding of each cost more than the rest. */
__attribute__((target("avx512f")))
static void ocr__maxpool_s2k3_avx512(const ocr__pool_job *j, const float *xp, int64_t oh, int64_t ow0, int64_t ow1, float *yrow,
                                     int32_t *irow) {
    const __m512i even = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
    const __m512i odd = _mm512_add_epi32(even, _mm512_set1_epi32(1));
    const __m512i next = _mm512_setr_epi32(1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16);
    int64_t h0 = oh * 2 - 1, h1 = h0 + 3, ow, ih;
    h0 = h0 < 0 ? 0 : h0;
    h1 = h1 > j->H ? j->H : h1;
    for (ow = ow0; ow < ow1; ow += 16) {
        int64_t n = ow1 - ow < 16 ? ow1 - ow : 16, nin = 2 * n + 1;
        const __mmask16 m0 = ocr__lanes(nin), m1 = ocr__lanes(nin - 16), m2 = ocr__lanes(nin - 32);
        int first = 1;
        __mmask16 nan = 0;
        __m512 best = _mm512_setzero_ps();
        __m512i arg = _mm512_setzero_si512(), col0 = _mm512_add_epi32(even, _mm512_set1_epi32((int)(2 * ow - 1))); /* 2(ow+lane)-1 */
        if (oh * 2 + 3 < j->H) { /* the next output row's two new input rows: the hardware's prefetch misses them */
            const float *ahead = xp + (oh * 2 + 2) * j->W + 2 * ow;
            _mm_prefetch((const char *)ahead, _MM_HINT_T0);
            _mm_prefetch((const char *)(ahead + 16), _MM_HINT_T0);
            _mm_prefetch((const char *)(ahead + j->W), _MM_HINT_T0);
            _mm_prefetch((const char *)(ahead + j->W + 16), _MM_HINT_T0);
        }
        for (ih = h0; ih < h1; ih++) {
            const float *row = xp + ih * j->W + 2 * ow - 1;
            __m512 a0 = _mm512_maskz_loadu_ps(m0, row), a1 = _mm512_maskz_loadu_ps(m1, row + 16), a2 = _mm512_maskz_loadu_ps(m2, row + 32);
            __m512 v0 = _mm512_permutex2var_ps(a0, even, a1), v1 = _mm512_permutex2var_ps(a0, odd, a1);
            __m512 v2 = _mm512_permutex2var_ps(v0, next, a2);
            if (irow) {
                __m512i at = _mm512_add_epi32(col0, _mm512_set1_epi32((int)(ih * j->W)));
                ocr__maxpool_take16(v0, at, &first, &best, &arg);
                ocr__maxpool_take16(v1, _mm512_add_epi32(at, _mm512_set1_epi32(1)), &first, &best, &arg);
                ocr__maxpool_take16(v2, _mm512_add_epi32(at, _mm512_set1_epi32(2)), &first, &best, &arg);
            } else {
                nan |= _mm512_cmp_ps_mask(v0, v0, _CMP_UNORD_Q) | _mm512_cmp_ps_mask(v1, v1, _CMP_UNORD_Q) | _mm512_cmp_ps_mask(v2, v2, _CMP_UNORD_Q);
                if (first) { best = v0; first = 0; } else best = _mm512_max_ps(v0, best);
                best = _mm512_max_ps(v2, _mm512_max_ps(v1, best));
            }
        }
        if (nan & ocr__lanes(n)) {
            int64_t o;
            for (o = ow; o < ow + n; o++) ocr__maxpool_one(j, xp, oh, o, yrow + o, NULL);
            continue;
        }
        _mm512_mask_storeu_ps(yrow + ow, ocr__lanes(n), best);
        if (irow) _mm512_mask_storeu_epi32(irow + ow, ocr__lanes(n), arg);
    }
}

/* ocr__maxpool_take16 on 8-float vectors */
__attribute__((target("avx2"), always_inline))
static inline void ocr__maxpool_take8(__m256 v, __m256i at, int *first, __m256 *best, __m256i *arg) {
    __m256 take;
    if (*first) { *best = v; *arg = at; *first = 0; return; }
    take = _mm256_or_ps(_mm256_cmp_ps(v, *best, _CMP_GT_OQ), _mm256_and_ps(_mm256_cmp_ps(v, v, _CMP_UNORD_Q), _mm256_cmp_ps(*best, *best, _CMP_ORD_Q)));
    *best = _mm256_blendv_ps(*best, v, take);
    *arg = _mm256_castps_si256(_mm256_blendv_ps(_mm256_castsi256_ps(*arg), _mm256_castsi256_ps(at), take));
}

/* ocr__maxpool_s2k3_avx512 on 8-float vectors (the AVX2 CPUs): the window columns of 8 outputs are the even and odd
   floats of 16 consecutive ones from 2 ow - 1 and the even ones of 16 from 2 ow + 1. Masked loads only at a row's
   end; the same scan order, ties and NaN rule. */
__attribute__((target("avx2,fma")))
static void ocr__maxpool_s2k3_avx2(const ocr__pool_job *j, const float *xp, int64_t oh, int64_t ow0, int64_t ow1, float *yrow, int32_t *irow) {
    const __m256i lane2 = _mm256_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14);
    int64_t h0 = oh * 2 - 1, h1 = h0 + 3, ow, ih;
    h0 = h0 < 0 ? 0 : h0;
    h1 = h1 > j->H ? j->H : h1;
    for (ow = ow0; ow < ow1; ow += 8) {
        /* nin: the floats from 2 ow - 1 that the row holds (the full case reads 18: one past the last window) */
        int64_t n = ow1 - ow < 8 ? ow1 - ow : 8, nin = j->W - (2 * ow - 1);
        const int full = n == 8 && nin >= 18;
        const __m256i m0 = ocr__lanes8(nin), m1 = ocr__lanes8(nin - 8), m2 = ocr__lanes8(nin - 2), m3 = ocr__lanes8(nin - 10);
        int first = 1;
        __m256 best = _mm256_setzero_ps(), nan = _mm256_setzero_ps();
        __m256i arg = _mm256_setzero_si256(), col0 = _mm256_add_epi32(lane2, _mm256_set1_epi32((int)(2 * ow - 1)));
        if (oh * 2 + 3 < j->H) { /* the next output row's two new input rows, as in the AVX-512 path */
            const float *ahead = xp + (oh * 2 + 2) * j->W + 2 * ow;
            _mm_prefetch((const char *)ahead, _MM_HINT_T0);
            _mm_prefetch((const char *)(ahead + j->W), _MM_HINT_T0);
        }
        for (ih = h0; ih < h1; ih++) {
            const float *row = xp + ih * j->W + 2 * ow - 1;
            __m256 a0 = full ? _mm256_loadu_ps(row) : _mm256_maskload_ps(row, m0);
            __m256 a1 = full ? _mm256_loadu_ps(row + 8) : _mm256_maskload_ps(row + 8, m1);
            __m256 a2 = full ? _mm256_loadu_ps(row + 2) : _mm256_maskload_ps(row + 2, m2);
            __m256 a3 = full ? _mm256_loadu_ps(row + 10) : _mm256_maskload_ps(row + 10, m3);
            /* shuffle_ps takes lanes 0, 2 (1, 3) of each 128-bit half of both; permute4x64 puts the halves in order */
            __m256 v0 = _mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(_mm256_shuffle_ps(a0, a1, 0x88)), 0xD8));
            __m256 v1 = _mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(_mm256_shuffle_ps(a0, a1, 0xDD)), 0xD8));
            __m256 v2 = _mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(_mm256_shuffle_ps(a2, a3, 0x88)), 0xD8));
            if (irow) {
                __m256i at = _mm256_add_epi32(col0, _mm256_set1_epi32((int)(ih * j->W)));
                ocr__maxpool_take8(v0, at, &first, &best, &arg);
                ocr__maxpool_take8(v1, _mm256_add_epi32(at, _mm256_set1_epi32(1)), &first, &best, &arg);
                ocr__maxpool_take8(v2, _mm256_add_epi32(at, _mm256_set1_epi32(2)), &first, &best, &arg);
            } else {
                nan = _mm256_or_ps(nan, _mm256_or_ps(_mm256_cmp_ps(v0, v0, _CMP_UNORD_Q),
                                                     _mm256_or_ps(_mm256_cmp_ps(v1, v1, _CMP_UNORD_Q), _mm256_cmp_ps(v2, v2, _CMP_UNORD_Q))));
                if (first) { best = v0; first = 0; } else best = _mm256_max_ps(v0, best);
                best = _mm256_max_ps(v2, _mm256_max_ps(v1, best));
            }
        }
        if (_mm256_movemask_ps(nan) & ((1 << n) - 1)) {
            int64_t o;
            for (o = ow; o < ow + n; o++) ocr__maxpool_one(j, xp, oh, o, yrow + o, NULL);
            continue;
        }
        if (n == 8) {
            _mm256_storeu_ps(yrow + ow, best);
            if (irow) _mm256_storeu_si256((__m256i *)(irow + ow), arg);
        } else {
            _mm256_maskstore_ps(yrow + ow, ocr__lanes8(n), best);
            if (irow) _mm256_maskstore_epi32(irow + ow, ocr__lanes8(n), arg);
        }
    }
}

/* Windows of kh rows from row h0 and kw = 1 or 2 columns at stride kw, without padding (CRNN's 2x2 and 2x1 pools):
   the OW outputs of one row, 16 per vector, the window's columns the even and odd floats (kw 2) or the floats (kw 1)
   of consecutive ones. Same scan order, ties and NaN rule as ocr__maxpool_one. */
__attribute__((target("avx512f")))
static void ocr__maxpool_nopad_avx512(const float *xp, int64_t W, int64_t h0, int kh, int kw, int64_t OW, float *yrow, int32_t *irow) {
    const __m512i even = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
    const __m512i odd = _mm512_add_epi32(even, _mm512_set1_epi32(1));
    const __m512i lane = _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
    int64_t ow, ih;
    for (ow = 0; ow < OW; ow += 16) {
        int64_t n = OW - ow < 16 ? OW - ow : 16, nin = kw * n, c;
        int first = 1;
        __m512 best = _mm512_setzero_ps();
        __m512i arg = _mm512_setzero_si512(), col0 = _mm512_add_epi32(kw == 2 ? even : lane, _mm512_set1_epi32((int)(kw * ow)));
        for (ih = h0; ih < h0 + kh; ih++) {
            const float *row = xp + ih * W + kw * ow;
            __m512 a0 = _mm512_maskz_loadu_ps(ocr__lanes(nin), row), v[2];
            if (kw == 2) {
                __m512 a1 = _mm512_maskz_loadu_ps(ocr__lanes(nin - 16), row + 16);
                v[0] = _mm512_permutex2var_ps(a0, even, a1);
                v[1] = _mm512_permutex2var_ps(a0, odd, a1);
            } else {
                v[0] = a0;
            }
            for (c = 0; c < kw; c++) ocr__maxpool_take16(v[c], _mm512_add_epi32(col0, _mm512_set1_epi32((int)(ih * W + c))), &first, &best, &arg);
        }
        _mm512_mask_storeu_ps(yrow + ow, ocr__lanes(n), best);
        if (irow) _mm512_mask_storeu_epi32(irow + ow, ocr__lanes(n), arg);
    }
}

/* ocr__maxpool_nopad_avx512 on 8-float vectors (masked loads and stores only for a row's last part vector) */
__attribute__((target("avx2,fma")))
static void ocr__maxpool_nopad_avx2(const float *xp, int64_t W, int64_t h0, int kh, int kw, int64_t OW, float *yrow, int32_t *irow) {
    const __m256i lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7), lane2 = _mm256_add_epi32(lane, lane);
    int64_t ow, ih;
    for (ow = 0; ow < OW; ow += 8) {
        const int64_t n = OW - ow < 8 ? OW - ow : 8, nin = kw * n;
        const __m256i m0 = ocr__lanes8(nin), m1 = ocr__lanes8(nin - 8);
        int first = 1;
        __m256 best = _mm256_setzero_ps();
        __m256i arg = _mm256_setzero_si256(), col0 = _mm256_add_epi32(kw == 2 ? lane2 : lane, _mm256_set1_epi32((int)(kw * ow)));
        for (ih = h0; ih < h0 + kh; ih++) {
            const float *row = xp + ih * W + kw * ow;
            __m256i at = _mm256_add_epi32(col0, _mm256_set1_epi32((int)(ih * W)));
            __m256 a0 = n == 8 ? _mm256_loadu_ps(row) : _mm256_maskload_ps(row, m0);
            if (kw == 2) {
                __m256 a1 = n == 8 ? _mm256_loadu_ps(row + 8) : _mm256_maskload_ps(row + 8, m1);
                /* the even and odd floats in order, as in ocr__maxpool_s2k3_avx2 */
                ocr__maxpool_take8(_mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(_mm256_shuffle_ps(a0, a1, 0x88)), 0xD8)), at, &first,
                                   &best, &arg);
                ocr__maxpool_take8(_mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(_mm256_shuffle_ps(a0, a1, 0xDD)), 0xD8)),
                                   _mm256_add_epi32(at, _mm256_set1_epi32(1)), &first, &best, &arg);
            } else {
                ocr__maxpool_take8(a0, at, &first, &best, &arg);
            }
        }
        if (n == 8) {
            _mm256_storeu_ps(yrow + ow, best);
            if (irow) _mm256_storeu_si256((__m256i *)(irow + ow), arg);
        } else {
            _mm256_maskstore_ps(yrow + ow, ocr__lanes8(n), best);
            if (irow) _mm256_maskstore_epi32(irow + ow, ocr__lanes8(n), arg);
        }
    }
}

/* One output row of a window without padding, by the lanes vec (16 or 8) */
static void ocr__maxpool_nopad_rows(int vec, const float *xp, int64_t W, int64_t h0, int kh, int kw, int64_t OW, float *yrow, int32_t *irow) {
    if (vec == 16) ocr__maxpool_nopad_avx512(xp, W, h0, kh, kw, OW, yrow, irow);
    else ocr__maxpool_nopad_avx2(xp, W, h0, kh, kw, OW, yrow, irow);
}
#endif

/* Whether the window takes ocr__maxpool_nopad_rows: no padding, one or two columns at a stride of its width */
static int ocr__maxpool_nopad_ok(int kw, int sw, int ph, int pw) { return ph == 0 && pw == 0 && (kw == 1 || kw == 2) && sw == kw; }

static void ocr__maxpool_part(void *arg, int64_t begin, int64_t end, int tid) {
    const ocr__pool_job *j = (const ocr__pool_job *)arg;
    int64_t plane, oh, ow, lo = 0, hi = 0;
    (void)tid;
    if (j->vector == 1) { lo = 1; hi = (j->W - 2) / 2 + 1; hi = hi > j->OW ? j->OW : hi; } /* outputs whose 3 columns are inside */
    for (plane = begin; plane < end; plane++) {
        const float *xp = j->x + plane * j->H * j->W;
        float *yp = j->y + plane * j->OH * j->OW;
        int32_t *ip = j->idx ? j->idx + plane * j->OH * j->OW : NULL;
        for (oh = 0; oh < j->OH; oh++) {
            float *yr = yp + oh * j->OW;
            int32_t *ir = ip ? ip + oh * j->OW : NULL;
#ifdef OCR__HAVE_AVX2
            if (j->vector == 2) { ocr__maxpool_nopad_rows(j->vec, xp, j->W, oh * j->s, j->k, j->k, j->OW, yr, ir); continue; }
            if (hi > lo) (j->vec == 16 ? ocr__maxpool_s2k3_avx512 : ocr__maxpool_s2k3_avx2)(j, xp, oh, lo, hi, yr, ir);
#endif
            for (ow = 0; ow < j->OW; ow++) {
                if (ow == lo && hi > lo) { ow = hi - 1; continue; }
                ocr__maxpool_one(j, xp, oh, ow, yr + ow, ir ? ir + ow : NULL);
            }
        }
    }
}

OCRDEF int ocr_nn_maxpool2d_forward(ocr_ctx *ctx, const ocr_tensor *x, int kernel, int stride, int pad, ocr_tensor *y, ocr_tensor *argmax) {
    const char *fn = "ocr_nn_maxpool2d_forward";
    ocr__pool_job j;
    ocr_shape ys;
    int rc;
    if ((rc = ocr_check_f32(ctx, fn, x)) || (rc = ocr_check_f32(ctx, fn, y))) return rc;
    if (x->shape.ndim != 4) return ocr_error(ctx, OCR_ESHAPE, "%s: input '%s' must be 4-D", fn, x->name);
    if (kernel < 1 || stride < 1 || pad < 0 || pad * 2 > kernel)
        return ocr_error(ctx, OCR_EINVAL, "%s: kernel %d, stride %d, pad %d (pad must be at most half the kernel)", fn, kernel, stride, pad);
    if (x->shape.dim[2] + 2 * pad < kernel || x->shape.dim[3] + 2 * pad < kernel)
        return ocr_error(ctx, OCR_ESHAPE, "%s: input '%s' is smaller than the %dx%d window", fn, x->name, kernel, kernel);
    ys = ocr_shape4(x->shape.dim[0], x->shape.dim[1], (x->shape.dim[2] + 2 * pad - kernel) / stride + 1,
                    (x->shape.dim[3] + 2 * pad - kernel) / stride + 1);
    if ((rc = ocr_check_shape(ctx, fn, y, ys))) return rc;
    if (argmax && ((rc = ocr_check_dtype(ctx, fn, argmax, OCR_I32)) || (rc = ocr_check_shape(ctx, fn, argmax, ys)))) return rc;
    if (x->shape.dim[2] * x->shape.dim[3] > INT32_MAX) return ocr_error(ctx, OCR_EOVERFLOW, "%s: plane of '%s' too large", fn, x->name);
#ifdef OCR_CUDA
    if (ctx->device == OCR_DEVICE_CUDA) return ocr__cuda_done(ctx, ocr_cuda_maxpool2d_forward(ctx, x, kernel, stride, pad, y, argmax), fn, "forward", y, NULL, NULL);
#endif
    if (ocr__use_ref(ctx)) {
        ocr__ref_maxpool2d_forward((const float *)x->data, ys.dim[0] * ys.dim[1], x->shape.dim[2], x->shape.dim[3], kernel, stride, pad,
                                   (float *)y->data, argmax ? (int32_t *)argmax->data : NULL, ys.dim[2], ys.dim[3]);
        return ocr__watch(ctx, fn, "forward", y);
    }
    j.x = (const float *)x->data; j.y = (float *)y->data; j.idx = argmax ? (int32_t *)argmax->data : NULL;
    j.H = x->shape.dim[2]; j.W = x->shape.dim[3]; j.OH = ys.dim[2]; j.OW = ys.dim[3]; j.k = kernel; j.s = stride; j.p = pad;
    j.vec = ocr__ctx_lanes(ctx);
    j.vector = !j.vec ? 0 : kernel == 3 && stride == 2 && pad == 1 ? 1 : kernel == 2 && ocr__maxpool_nopad_ok(kernel, stride, pad, pad) ? 2 : 0;
    ocr_parallel_for(ctx, ys.dim[0] * ys.dim[1], 1, ocr__maxpool_part, &j);
    return ocr__watch(ctx, fn, "forward", y);
}

/* Max-pooling backward over planes: dx[plane][argmax[i]] += dy[i]. first_bad: per thread, the first flat index of
   argmax outside its plane (-1: none), so the error names the same element whatever the thread count. */
typedef struct {
    const float *dy;
    const int32_t *argmax;
    float *dx;
    int64_t P, HW, first_bad[OCR_MAX_THREADS];
} ocr__maxpool_bwd_job;
static void ocr__maxpool_check_part(void *arg, int64_t begin, int64_t end, int tid) {
    ocr__maxpool_bwd_job *j = (ocr__maxpool_bwd_job *)arg;
    int64_t i;
    for (i = begin * j->P; i < end * j->P; i++)
        if (j->argmax[i] < 0 || j->argmax[i] >= j->HW) {
            if (j->first_bad[tid] < 0 || i < j->first_bad[tid]) j->first_bad[tid] = i;
            return;
        }
}
static void ocr__maxpool_bwd_part(void *arg, int64_t begin, int64_t end, int tid) {
    const ocr__maxpool_bwd_job *j = (const ocr__maxpool_bwd_job *)arg;
    int64_t plane, i;
    (void)tid;
    for (plane = begin; plane < end; plane++) {
        const float *g = j->dy + plane * j->P;
        const int32_t *ix = j->argmax + plane * j->P;
        float *d = j->dx + plane * j->HW;
        for (i = 0; i < j->P; i++) d[ix[i]] += g[i];
    }
}

OCRDEF int ocr_nn_maxpool2d_backward(ocr_ctx *ctx, const ocr_tensor *dy, const ocr_tensor *argmax, ocr_tensor *dx) {
    const char *fn = "ocr_nn_maxpool2d_backward";
    ocr__maxpool_bwd_job j;
    int64_t planes, bad = -1;
    int rc, t;
    if ((rc = ocr_check_f32(ctx, fn, dy)) || (rc = ocr_check_f32(ctx, fn, dx)) || (rc = ocr_check_dtype(ctx, fn, argmax, OCR_I32)) ||
        (rc = ocr_check_same_shape(ctx, fn, dy, argmax)))
        return rc;
    if (dx->shape.ndim != 4 || dy->shape.ndim != 4 || dx->shape.dim[0] != dy->shape.dim[0] || dx->shape.dim[1] != dy->shape.dim[1])
        return ocr_error(ctx, OCR_ESHAPE, "%s: dx '%s' and dy '%s' must be 4-D with the same N and C", fn, dx->name, dy->name);
#ifdef OCR_CUDA
    if (ctx->device == OCR_DEVICE_CUDA) return ocr__cuda_done(ctx, ocr_cuda_maxpool2d_backward(ctx, dy, argmax, dx), fn, "backward", dx, NULL, NULL);
#endif
    memset(&j, 0, sizeof j);
    planes = dy->shape.dim[0] * dy->shape.dim[1];
    j.dy = (const float *)dy->data; j.argmax = (const int32_t *)argmax->data; j.dx = (float *)dx->data;
    j.P = dy->shape.dim[2] * dy->shape.dim[3]; j.HW = dx->shape.dim[2] * dx->shape.dim[3];
    /* every index is checked before the first is used, so a corrupt argmax leaves dx as it was */
    for (t = 0; t < OCR_MAX_THREADS; t++) j.first_bad[t] = -1;
    ocr_parallel_for(ctx, planes, 1, ocr__maxpool_check_part, &j);
    for (t = 0; t < OCR_MAX_THREADS; t++)
        if (j.first_bad[t] >= 0 && (bad < 0 || j.first_bad[t] < bad)) bad = j.first_bad[t];
    if (bad >= 0)
        return ocr_error(ctx, OCR_ERANGE, "%s: argmax '%s' holds %d at %lld, outside the %lld-pixel input plane", fn, argmax->name,
                         (int)j.argmax[bad], (long long)bad, (long long)j.HW);
    if (ocr__use_ref(ctx)) ocr__ref_maxpool2d_backward(j.dy, j.argmax, planes, j.P, j.dx, j.HW);
    else ocr_parallel_for(ctx, planes, 1, ocr__maxpool_bwd_part, &j);
    return ocr__watch(ctx, fn, "backward", dx);
}

/* Nearest upsampling by an integer factor, work items over planes: x [H, W] per plane, y [H*factor, W*factor]. */
typedef struct { float *x, *y; int64_t H, W, factor; } ocr__upsample_job;

/* one plane [H, W] upsampled into yp [H f, W f]: each input row widened once, then copied to the other f - 1 rows */
static void ocr__upsample_plane(const float *xp, int64_t H, int64_t W, int64_t f, float *yp) {
    int64_t h, k;
    for (h = 0; h < H; h++) {
        float *row = yp + h * f * W * f;
        ocr__widen_row(xp + h * W, W, f, row);
        for (k = 1; k < f; k++) memcpy(row + k * W * f, row, (size_t)(W * f) * sizeof(float));
    }
}

static void ocr__upsample_fwd_part(void *arg, int64_t begin, int64_t end, int tid) {
    const ocr__upsample_job *j = (const ocr__upsample_job *)arg;
    int64_t plane;
    (void)tid;
    for (plane = begin; plane < end; plane++)
        ocr__upsample_plane(j->x + plane * j->H * j->W, j->H, j->W, j->factor, j->y + plane * j->H * j->W * j->factor * j->factor);
}
static void ocr__upsample_bwd_part(void *arg, int64_t begin, int64_t end, int tid) {
    const ocr__upsample_job *j = (const ocr__upsample_job *)arg;
    int64_t f = j->factor, W = j->W, plane, h, w, k;
    (void)tid;
    for (plane = begin; plane < end; plane++) {
        float *xp = j->x + plane * j->H * W;
        const float *yp = j->y + plane * j->H * W * f * f;
        /* same summation order as a scan of dy: rows of a block top to bottom, each left to right */
        for (h = 0; h < j->H * f; h++) {
            float *xr = xp + (h / f) * W;
            const float *yr = yp + h * W * f;
            if (f == 2) for (w = 0; w < W; w++) xr[w] = (xr[w] + yr[2 * w]) + yr[2 * w + 1];
            else
                for (w = 0; w < W; w++)
                    for (k = 0; k < f; k++) xr[w] += yr[w * f + k];
        }
    }
}

OCRDEF int ocr_nn_upsample_nearest_forward(ocr_ctx *ctx, const ocr_tensor *x, int factor, ocr_tensor *y) {
    const char *fn = "ocr_nn_upsample_nearest_forward";
    ocr__upsample_job j;
    int rc;
    if ((rc = ocr_check_f32(ctx, fn, x)) || (rc = ocr_check_f32(ctx, fn, y))) return rc;
    if (factor < 1) return ocr_error(ctx, OCR_EINVAL, "%s: factor %d must be >= 1", fn, factor);
    if (x->shape.ndim != 4) return ocr_error(ctx, OCR_ESHAPE, "%s: input '%s' must be 4-D", fn, x->name);
    if ((rc = ocr_check_shape(ctx, fn, y, ocr_shape4(x->shape.dim[0], x->shape.dim[1], x->shape.dim[2] * factor, x->shape.dim[3] * factor))))
        return rc;
#ifdef OCR_CUDA
    if (ctx->device == OCR_DEVICE_CUDA) return ocr__cuda_done(ctx, ocr_cuda_upsample_nearest_forward(ctx, x, factor, y), fn, "forward", y, NULL, NULL);
#endif
    j.x = (float *)x->data; j.y = (float *)y->data; j.H = x->shape.dim[2]; j.W = x->shape.dim[3]; j.factor = factor;
    if (ocr__use_ref(ctx)) ocr__ref_upsample_forward(j.x, x->shape.dim[0] * x->shape.dim[1], j.H, j.W, j.factor, j.y);
    else ocr_parallel_for(ctx, x->shape.dim[0] * x->shape.dim[1], 1, ocr__upsample_fwd_part, &j);
    return ocr__watch(ctx, fn, "forward", y);
}

/* y = a + upsample(x): per plane and input row, the row widened once into a buffer, then added to each of its output
   rows */
typedef struct { const float *a, *x; float *y; int64_t H, W, factor; float *row[OCR_MAX_THREADS]; } ocr__add_up_job;
static void ocr__add_up_part(void *arg, int64_t begin, int64_t end, int tid) {
    const ocr__add_up_job *j = (const ocr__add_up_job *)arg;
    int64_t f = j->factor, W = j->W, OW = W * f, plane, h, k;
    float *wide = j->row[tid];
    for (plane = begin; plane < end; plane++) {
        const float *xp = j->x + plane * j->H * W, *ap = j->a + plane * j->H * W * f * f;
        float *yp = j->y + plane * j->H * W * f * f;
        for (h = 0; h < j->H; h++) {
            ocr__widen_row(xp + h * W, W, f, wide);
            for (k = 0; k < f; k++) {
                int64_t o = (h * f + k) * OW;
                ocr__pw_part_add(ap + o, wide, yp + o, OW);
            }
        }
    }
}

OCRDEF int ocr_nn_add_upsampled_forward(ocr_ctx *ctx, const ocr_tensor *a, const ocr_tensor *x, int factor, ocr_tensor *y) {
    const char *fn = "ocr_nn_add_upsampled_forward";
    ocr__add_up_job j;
    int64_t t;
    int rc;
    if ((rc = ocr_check_f32(ctx, fn, x)) || (rc = ocr__check_pair(ctx, fn, a, y))) return rc;
    if (factor < 1) return ocr_error(ctx, OCR_EINVAL, "%s: factor %d must be >= 1", fn, factor);
    if (x->shape.ndim != 4) return ocr_error(ctx, OCR_ESHAPE, "%s: input '%s' must be 4-D", fn, x->name);
    if ((rc = ocr_check_shape(ctx, fn, y, ocr_shape4(x->shape.dim[0], x->shape.dim[1], x->shape.dim[2] * factor, x->shape.dim[3] * factor))))
        return rc;
    if (x->data == y->data) return ocr_error(ctx, OCR_EINVAL, "%s: output '%s' must not alias input '%s'", fn, y->name, x->name);
    if (ctx->device != OCR_DEVICE_CPU)
        return ocr_error(ctx, OCR_EUNSUPPORTED, "%s: CPU only; on %s call the upsample_nearest and add ops", fn, ocr_device_name(ctx->device));
    memset(&j, 0, sizeof j);
    j.a = (const float *)a->data; j.x = (const float *)x->data; j.y = (float *)y->data;
    j.H = x->shape.dim[2]; j.W = x->shape.dim[3]; j.factor = factor;
    if (ocr__use_ref(ctx)) {
        int64_t n = ocr_tensor_numel(y);
        float *up = (float *)ocr_ctx_scratch(ctx, OCR_SCRATCH_OP0, (size_t)n * sizeof(float));
        if (!up) return ctx->last_status;
        ocr__ref_upsample_forward(j.x, x->shape.dim[0] * x->shape.dim[1], j.H, j.W, factor, up);
        ocr__ref_add_forward(j.a, up, j.y, n);
        return ocr__watch(ctx, fn, "forward", y);
    }
    for (t = 0; t < ctx->n_threads; t++)
        if (!(j.row[t] = (float *)ocr_ctx_scratch(ctx, OCR_SCRATCH_THREAD0 + (int)t, (size_t)(j.W * factor) * sizeof(float)))) return ctx->last_status;
    ocr_parallel_for(ctx, x->shape.dim[0] * x->shape.dim[1], 1, ocr__add_up_part, &j);
    return ocr__watch(ctx, fn, "forward", y);
}

OCRDEF int ocr_nn_upsample_nearest_backward(ocr_ctx *ctx, const ocr_tensor *dy, int factor, ocr_tensor *dx) {
    const char *fn = "ocr_nn_upsample_nearest_backward";
    ocr__upsample_job j;
    int rc;
    if ((rc = ocr_check_f32(ctx, fn, dy)) || (rc = ocr_check_f32(ctx, fn, dx))) return rc;
    if (factor < 1) return ocr_error(ctx, OCR_EINVAL, "%s: factor %d must be >= 1", fn, factor);
    if (dx->shape.ndim != 4) return ocr_error(ctx, OCR_ESHAPE, "%s: gradient '%s' must be 4-D", fn, dx->name);
    if ((rc = ocr_check_shape(ctx, fn, dy, ocr_shape4(dx->shape.dim[0], dx->shape.dim[1], dx->shape.dim[2] * factor, dx->shape.dim[3] * factor))))
        return rc;
#ifdef OCR_CUDA
    if (ctx->device == OCR_DEVICE_CUDA) return ocr__cuda_done(ctx, ocr_cuda_upsample_nearest_backward(ctx, dy, factor, dx), fn, "backward", dx, NULL, NULL);
#endif
    j.x = (float *)dx->data; j.y = (float *)dy->data; j.H = dx->shape.dim[2]; j.W = dx->shape.dim[3]; j.factor = factor;
    if (ocr__use_ref(ctx)) ocr__ref_upsample_backward(j.y, dx->shape.dim[0] * dx->shape.dim[1], j.H, j.W, j.factor, j.x);
    else ocr_parallel_for(ctx, dx->shape.dim[0] * dx->shape.dim[1], 1, ocr__upsample_bwd_part, &j);
    return ocr__watch(ctx, fn, "backward", dx);
}

/* Shared check for concat: every part 4-D with y's N and H, W (divided by the part's factor when factors is given,
   which must divide them) and channels summing to y's. */
static int ocr__concat_check(ocr_ctx *ctx, const char *fn, const ocr_tensor *const *xs, const int *factors, int n, const ocr_tensor *y) {
    int64_t c = 0;
    int i, rc;
    if ((rc = ocr_check_f32(ctx, fn, y))) return rc;
    if (n < 1 || !xs) return ocr_error(ctx, OCR_EINVAL, "%s: needs at least one part", fn);
    if (y->shape.ndim != 4) return ocr_error(ctx, OCR_ESHAPE, "%s: output '%s' must be 4-D", fn, y->name);
    for (i = 0; i < n; i++) {
        int f = factors ? factors[i] : 1;
        if (f < 1 || y->shape.dim[2] % f || y->shape.dim[3] % f)
            return ocr_error(ctx, OCR_EINVAL, "%s: factor %d of part '%s' must be >= 1 and divide the output's %lldx%lld", fn, f, xs[i]->name,
                             (long long)y->shape.dim[2], (long long)y->shape.dim[3]);
        if ((rc = ocr_check_f32(ctx, fn, xs[i]))) return rc;
        if ((rc = ocr_check_shape(ctx, fn, xs[i], ocr_shape4(y->shape.dim[0], xs[i]->shape.ndim == 4 ? xs[i]->shape.dim[1] : -1,
                                                             y->shape.dim[2] / f, y->shape.dim[3] / f))))
            return rc;
        c += xs[i]->shape.dim[1];
    }
    if (c != y->shape.dim[1])
        return ocr_error(ctx, OCR_ESHAPE, "%s: parts have %lld channels in all but '%s' has %lld", fn, (long long)c, y->name,
                         (long long)y->shape.dim[1]);
    return OCR_OK;
}

OCRDEF int ocr_nn_concat_forward(ocr_ctx *ctx, const ocr_tensor *const *xs, int n, ocr_tensor *y) {
    const char *fn = "ocr_nn_concat_forward";
    int64_t b, P, off;
    int i, rc = ocr__concat_check(ctx, fn, xs, NULL, n, y);
    if (rc) return rc;
#ifdef OCR_CUDA
    if (ctx->device == OCR_DEVICE_CUDA) return ocr__cuda_done(ctx, ocr_cuda_concat_forward(ctx, xs, n, y), fn, "forward", y, NULL, NULL);
#endif
    if (ocr__use_ref(ctx)) {
        ocr__ref_concat_forward(xs, n, y);
        return ocr__watch(ctx, fn, "forward", y);
    }
    P = y->shape.dim[2] * y->shape.dim[3];
    for (b = 0; b < y->shape.dim[0]; b++) {
        off = 0;
        for (i = 0; i < n; i++) {
            int64_t ci = xs[i]->shape.dim[1];
            ocr__pw_floats(ctx, OCR__PW_COPY, (const float *)xs[i]->data + b * ci * P, NULL, (float *)y->data + (b * y->shape.dim[1] + off) * P, ci * P);
            off += ci;
        }
    }
    return ocr__watch(ctx, fn, "forward", y);
}

/* work items are the output's planes (image, channel): each finds its part and plane */
typedef struct { const ocr_tensor *const *xs; const int *factors; float *y; int64_t C, H, W; } ocr__concat_up_job;
static void ocr__concat_up_part(void *arg, int64_t begin, int64_t end, int tid) {
    const ocr__concat_up_job *j = (const ocr__concat_up_job *)arg;
    int64_t plane;
    (void)tid;
    for (plane = begin; plane < end; plane++) {
        int64_t b = plane / j->C, c = plane % j->C, f, ci, h, w;
        int i = 0;
        while (c >= j->xs[i]->shape.dim[1]) c -= j->xs[i++]->shape.dim[1];
        f = j->factors[i]; ci = j->xs[i]->shape.dim[1]; h = j->H / f; w = j->W / f;
        ocr__upsample_plane((const float *)j->xs[i]->data + (b * ci + c) * h * w, h, w, f, j->y + plane * j->H * j->W);
    }
}

OCRDEF int ocr_nn_concat_upsampled_forward(ocr_ctx *ctx, const ocr_tensor *const *xs, const int *factors, int n, ocr_tensor *y) {
    const char *fn = "ocr_nn_concat_upsampled_forward";
    ocr__concat_up_job j;
    int i, rc;
    if (!factors) return ocr_error(ctx, OCR_EINVAL, "%s: needs a factor per part", fn);
    if ((rc = ocr__concat_check(ctx, fn, xs, factors, n, y))) return rc;
    for (i = 0; i < n; i++)
        if (xs[i]->data == y->data) return ocr_error(ctx, OCR_EINVAL, "%s: output '%s' must not alias part '%s'", fn, y->name, xs[i]->name);
    if (ctx->device != OCR_DEVICE_CPU)
        return ocr_error(ctx, OCR_EUNSUPPORTED, "%s: CPU only; on %s call the upsample_nearest and concat ops", fn, ocr_device_name(ctx->device));
    j.xs = xs; j.factors = factors; j.y = (float *)y->data;
    j.C = y->shape.dim[1]; j.H = y->shape.dim[2]; j.W = y->shape.dim[3];
    if (ocr__use_ref(ctx)) { /* the definition, one output value at a time */
        int64_t b, ch, hh, ww;
        for (b = 0; b < y->shape.dim[0]; b++)
            for (ch = 0; ch < j.C; ch++) {
                int64_t cc = ch;
                i = 0;
                while (cc >= xs[i]->shape.dim[1]) cc -= xs[i++]->shape.dim[1];
                for (hh = 0; hh < j.H; hh++)
                    for (ww = 0; ww < j.W; ww++)
                        j.y[((b * j.C + ch) * j.H + hh) * j.W + ww] =
                            ((const float *)xs[i]->data)[((b * xs[i]->shape.dim[1] + cc) * (j.H / factors[i]) + hh / factors[i]) * (j.W / factors[i]) + ww / factors[i]];
            }
        return ocr__watch(ctx, fn, "forward", y);
    }
    ocr_parallel_for(ctx, y->shape.dim[0] * j.C, 1, ocr__concat_up_part, &j);
    return ocr__watch(ctx, fn, "forward", y);
}

OCRDEF int ocr_nn_concat_conv2d_forward(ocr_ctx *ctx, const ocr_tensor *const *xs, const int *factors, int n, ocr_tensor *cat,
                                        const ocr_tensor *w, const ocr_tensor *b, ocr_conv_params p, int relu, ocr_tensor *y) {
    const char *fn = "ocr_nn_concat_conv2d_forward";
    ocr__conv_geom g;
    ocr_shape ys;
    int i, rc;
    if (!factors || !cat) return ocr_error(ctx, OCR_EINVAL, "%s: needs a factor per part and a cat tensor", fn);
    if (n > OCR__CAT_MAX) return ocr_error(ctx, OCR_EINVAL, "%s: %d parts, at most %d", fn, n, OCR__CAT_MAX);
    if ((rc = ocr__concat_check(ctx, fn, xs, factors, n, cat)) || (rc = ocr__conv_check(ctx, fn, cat, w, b, p, 0, &g, &ys)) ||
        (rc = ocr_check_f32(ctx, fn, y)) || (rc = ocr_check_shape(ctx, fn, y, ys)))
        return rc;
    for (i = 0; i < n; i++)
        if (xs[i]->data == cat->data || xs[i]->data == y->data)
            return ocr_error(ctx, OCR_EINVAL, "%s: part '%s' must not alias cat '%s' or output '%s'", fn, xs[i]->name, cat->name, y->name);
    if (cat->data == y->data) return ocr_error(ctx, OCR_EINVAL, "%s: output '%s' must not alias cat '%s'", fn, y->name, cat->name);
    if (ctx->device != OCR_DEVICE_CPU)
        return ocr_error(ctx, OCR_EUNSUPPORTED, "%s: CPU only; on %s call the upsample_nearest, concat and conv2d ops", fn, ocr_device_name(ctx->device));
#ifdef OCR__HAVE_AVX2
    {
        ocr__ukernel uk = ocr__pick_ukernel(ctx);
        /* Winograd copies each channel's band rows before transforming them: those rows come from the parts (the
           concatenation of the decoder's fuse is the largest tensor of an inference and was written only to be read
           once, here) */
        if (ctx->amp == OCR_AMP_OFF && !ocr__use_ref(ctx) && ocr__conv_winograd_ok(ctx, &g, &uk, 0)) {
            ocr__cat_input in;
            ocr__conv_epilogue ep;
            in.n = n;
            for (i = 0; i < n; i++) { in.data[i] = (const float *)xs[i]->data; in.channels[i] = xs[i]->shape.dim[1]; in.factor[i] = factors[i]; }
            ep.bias = b ? (const float *)b->data : NULL;
            ep.relu = relu;
            ep.res = NULL;
            ep.y0 = (const float *)y->data;
            ep.vec = ocr__ctx_lanes(ctx);
            if ((rc = ocr__conv_winograd(ctx, &g, NULL, &in, (const float *)w->data, (float *)y->data, 0, &ep))) return rc;
            return ocr__watch(ctx, fn, "forward", y);
        }
    }
#endif
    if ((rc = ocr_nn_concat_upsampled_forward(ctx, xs, factors, n, cat))) return rc;
    return ocr__conv2d_forward(ctx, fn, cat, w, b, p, relu, NULL, y);
}

OCRDEF int ocr_nn_concat_backward(ocr_ctx *ctx, const ocr_tensor *dy, ocr_tensor *const *dxs, int n) {
    const char *fn = "ocr_nn_concat_backward";
    int64_t b, P, off;
    int i, rc = ocr__concat_check(ctx, fn, (const ocr_tensor *const *)dxs, NULL, n, dy);
    if (rc) return rc;
#ifdef OCR_CUDA
    if (ctx->device == OCR_DEVICE_CUDA) return ocr__cuda_done(ctx, ocr_cuda_concat_backward(ctx, dy, dxs, n), fn, "backward", NULL, NULL, NULL);
#endif
    P = dy->shape.dim[2] * dy->shape.dim[3];
    if (ocr__use_ref(ctx)) ocr__ref_concat_backward(dy, dxs, n);
    else
        for (b = 0; b < dy->shape.dim[0]; b++) {
            off = 0;
            for (i = 0; i < n; i++) {
                int64_t ci = dxs[i]->shape.dim[1];
                ocr__pw_floats(ctx, OCR__PW_ACC, (const float *)dy->data + (b * dy->shape.dim[1] + off) * P, NULL, (float *)dxs[i]->data + b * ci * P, ci * P);
                off += ci;
            }
        }
    for (i = 0; i < n; i++) if ((rc = ocr__watch(ctx, fn, "backward", dxs[i]))) return rc;
    return OCR_OK;
}

/* ---------------------------------------------------------------- parameters */

/* Device memory comes through ocr_tensor_alloc, so this header holds no CUDA code. */
OCRDEF float *ocr_floats_alloc(ocr_ctx *ctx, ocr_device dev, size_t n, const char *name) {
    ocr_tensor t;
    if (ocr_tensor_alloc(ctx, &t, name, OCR_F32, dev, ocr_shape1((int64_t)(n ? n : 1)))) return NULL;
    return (float *)t.data;
}

OCRDEF void ocr_floats_free(float *p, ocr_device dev) {
    ocr_tensor t = ocr_tensor_view("buffer", OCR_F32, dev, ocr_shape1(1), p);
    t.owns_data = p != NULL;
    ocr_tensor_free(&t);
}

/* A whole buffer of P (values or gradients) as one flat tensor, for copies between devices. */
static ocr_tensor ocr__params_flat(const ocr_params *P, float *buf, const char *name) {
    return ocr_tensor_view(name, OCR_F32, P->device, ocr_shape1((int64_t)(P->numel ? P->numel : 1)), buf);
}

OCRDEF void ocr_params_init(ocr_params *P) { memset(P, 0, sizeof *P); }

OCRDEF int ocr_params_add(ocr_ctx *ctx, ocr_params *P, const char *name, ocr_shape shape, int trainable, int *index) {
    const char *fn = "ocr_params_add";
    ocr_param_info *pi;
    int rc;
    size_t numel;
    if (P->allocated) return ocr_error(ctx, OCR_ESTATE, "%s: '%s' added after ocr_params_alloc", fn, name);
    if (!name || !name[0] || strlen(name) >= OCR_NAME_MAX) return ocr_error(ctx, OCR_EINVAL, "%s: names must be 1..%d bytes", fn, OCR_NAME_MAX - 1);
    if (ocr_params_find(P, name) >= 0) return ocr_error(ctx, OCR_EINVAL, "%s: '%s' is already registered", fn, name);
    if ((rc = ocr_shape_validate(ctx, fn, name, shape))) return rc;
    if (P->count == P->cap) {
        int cap = P->cap ? P->cap * 2 : 64;
        ocr_param_info *ni = (ocr_param_info *)OCR_REALLOC(P->info, (size_t)cap * sizeof *ni);
        if (!ni) return ocr_error(ctx, OCR_ENOMEM, "%s: out of memory", fn);
        P->info = ni;
        P->cap = cap;
    }
    numel = (size_t)ocr_shape_numel(shape);
    pi = &P->info[P->count];
    memset(pi, 0, sizeof *pi);
    memcpy(pi->name, name, strlen(name) + 1);
    pi->shape = shape;
    /* each entry starts on a 64-byte boundary so views are as aligned as owned tensors */
    pi->offset = (P->numel + 15) & ~(size_t)15;
    pi->trainable = trainable != 0;
    pi->decay = trainable != 0;
    P->numel = pi->offset + numel;
    if (index) *index = P->count;
    P->count++;
    return OCR_OK;
}

OCRDEF int ocr_params_alloc(ocr_ctx *ctx, ocr_params *P) {
    size_t bytes;
    if (P->allocated) return ocr_error(ctx, OCR_ESTATE, "ocr_params_alloc: already allocated");
    if (!ocr_size_mul(P->numel ? P->numel : 1, sizeof(float), &bytes)) return ocr_error(ctx, OCR_EOVERFLOW, "ocr_params_alloc: too large");
    P->data = (float *)ocr_aligned_alloc(bytes);
    P->grad = (float *)ocr_aligned_alloc(bytes);
    if (!P->data || !P->grad) {
        ocr_aligned_free(P->data); ocr_aligned_free(P->grad);
        P->data = P->grad = NULL;
        return ocr_error(ctx, OCR_ENOMEM, "ocr_params_alloc: cannot allocate 2 x %zu bytes", bytes);
    }
    memset(P->data, 0, bytes);
    memset(P->grad, 0, bytes);
    P->allocated = 1;
    return OCR_OK;
}

OCRDEF void ocr_params_free(ocr_params *P) {
    if (!P) return;
    ocr_floats_free(P->data, P->device);
    ocr_floats_free(P->grad, P->device);
    OCR_FREE(P->info);
    memset(P, 0, sizeof *P);
}

OCRDEF int ocr_params_find(const ocr_params *P, const char *name) {
    int i;
    for (i = 0; i < P->count; i++) if (strcmp(P->info[i].name, name) == 0) return i;
    return -1;
}

OCRDEF ocr_tensor ocr_params_value(const ocr_params *P, int index) {
    const ocr_param_info *pi = &P->info[index];
    return ocr_tensor_view(pi->name, OCR_F32, P->device, pi->shape, P->data ? P->data + pi->offset : NULL);
}

OCRDEF ocr_tensor ocr_params_grad(const ocr_params *P, int index) {
    const ocr_param_info *pi = &P->info[index];
    ocr_tensor t = ocr_tensor_view(pi->name, OCR_F32, P->device, pi->shape, P->grad ? P->grad + pi->offset : NULL);
    size_t n = strlen(t.name);
    if (n + 5 < sizeof t.name) memcpy(t.name + n, ".grad", 6);
    return t;
}

OCRDEF void ocr_params_zero_grad(ocr_params *P) {
    if (!P->grad) return;
#ifdef OCR_CUDA
    if (P->device == OCR_DEVICE_CUDA) { (void)ocr_cuda_zero_bytes(P->grad, P->numel * sizeof(float)); return; }
#endif
    memset(P->grad, 0, P->numel * sizeof(float));
}

OCRDEF int ocr_params_to_device(ocr_ctx *ctx, ocr_params *P, ocr_device dev) {
    const char *fn = "ocr_params_to_device";
    ocr_params moved = *P;
    ocr_tensor from, to;
    int rc;
    if (!P->allocated) return ocr_error(ctx, OCR_ESTATE, "%s: parameters not allocated", fn);
    if (dev == P->device) return OCR_OK;
    moved.device = dev;
    moved.data = ocr_floats_alloc(ctx, dev, P->numel, "params.data");
    moved.grad = moved.data ? ocr_floats_alloc(ctx, dev, P->numel, "params.grad") : NULL;
    if (!moved.grad) { ocr_floats_free(moved.data, dev); return ctx->last_status; }
    from = ocr__params_flat(P, P->data, "params.data");
    to = ocr__params_flat(&moved, moved.data, "params.data");
    if (!(rc = ocr_tensor_copy(ctx, &to, &from))) {
        from = ocr__params_flat(P, P->grad, "params.grad");
        to = ocr__params_flat(&moved, moved.grad, "params.grad");
        rc = ocr_tensor_copy(ctx, &to, &from);
    }
    if (rc) { ocr_floats_free(moved.data, dev); ocr_floats_free(moved.grad, dev); return rc; }
    ocr_floats_free(P->data, P->device);
    ocr_floats_free(P->grad, P->device);
    *P = moved;
    return OCR_OK;
}

OCRDEF int ocr_params_host_copy(ocr_ctx *ctx, const ocr_params *P, ocr_params *host) {
    int rc;
    ocr_params_init(host);
    if (!P->allocated) return ocr_error(ctx, OCR_ESTATE, "ocr_params_host_copy: parameters not allocated");
    if (!(host->info = (ocr_param_info *)OCR_MALLOC((size_t)(P->count ? P->count : 1) * sizeof *host->info)))
        return ocr_error(ctx, OCR_ENOMEM, "ocr_params_host_copy: out of memory");
    if (P->count) memcpy(host->info, P->info, (size_t)P->count * sizeof *host->info);
    host->count = host->cap = P->count;
    host->numel = P->numel;
    if ((rc = ocr_params_alloc(ctx, host)) || (rc = ocr_params_copy_values(ctx, host, P))) ocr_params_free(host);
    return rc;
}

OCRDEF int ocr_params_copy_values(ocr_ctx *ctx, ocr_params *dst, const ocr_params *src) {
    ocr_tensor to, from;
    if (!dst->allocated || !src->allocated || dst->numel != src->numel || dst->count != src->count)
        return ocr_error(ctx, OCR_EINVAL, "ocr_params_copy_values: both sets must be allocated with the same table (%zu vs %zu floats)",
                         dst->numel, src->numel);
    to = ocr__params_flat(dst, dst->data, "params.data");
    from = ocr__params_flat(src, src->data, "params.data");
    return ocr_tensor_copy(ctx, &to, &from);
}

OCRDEF int ocr_params_ema(ocr_ctx *ctx, float *avg, const ocr_params *P, float decay) {
    size_t i;
    if (!P->allocated || !avg) return ocr_error(ctx, OCR_EINVAL, "ocr_params_ema: parameters not allocated or no average buffer");
    if (!(decay >= 0.0f && decay <= 1.0f)) return ocr_error(ctx, OCR_EINVAL, "ocr_params_ema: decay %g outside [0, 1]", (double)decay);
#ifdef OCR_CUDA
    if (P->device == OCR_DEVICE_CUDA) return ocr_cuda_ema(ctx, avg, P->data, (int64_t)P->numel, decay);
#endif
    for (i = 0; i < P->numel; i++) avg[i] = decay * avg[i] + (1.0f - decay) * P->data[i];
    return OCR_OK;
}

OCRDEF size_t ocr_params_trainable_count(const ocr_params *P) {
    size_t n = 0;
    int i;
    for (i = 0; i < P->count; i++) if (P->info[i].trainable) n += (size_t)ocr_shape_numel(P->info[i].shape);
    return n;
}

/* Checks a file entry's F32/F16/BF16 values in place (memcpy: the data section need not be aligned), so that a bad
   checkpoint is named here rather than by whatever op first meets the NaN. */
static int ocr__params_check_entry(ocr_ctx *ctx, const char *fn, const ocr_safetensors *st, int e) {
    const ocr_safetensors_entry *en = &st->entries[e];
    const unsigned char *p = st->bytes + st->data_start + en->begin;
    int64_t i, n = ocr_shape_numel(en->shape);
    for (i = 0; i < n; i++) {
        float v;
        if (en->dtype == OCR_F32) {
            memcpy(&v, p + 4 * i, sizeof v);
        } else {
            uint16_t h;
            memcpy(&h, p + 2 * i, sizeof h);
            v = en->dtype == OCR_F16 ? ocr_f16_to_f32(h) : ocr_bf16_to_f32(h);
        }
        if (!(fabsf(v) <= (float)OCR_LOAD_MAX_ABS)) { /* NaN fails the comparison too */
            char sb[96], ib[96];
            ocr_shape idx = en->shape;
            int64_t r = i;
            int d;
            for (d = idx.ndim - 1; d >= 0; d--) {
                int64_t m = idx.dim[d] ? idx.dim[d] : 1;
                idx.dim[d] = r % m;
                r /= m;
            }
            return ocr_error(ctx, isfinite(v) ? OCR_ERANGE : OCR_ENONFINITE,
                             "%s: the file's tensor '%s' (%s %s) holds %g at index %lld %s; a model's values must be finite and "
                             "at most %g in magnitude (OCR_LOAD_MAX_ABS)", fn, en->name, ocr_dtype_name(en->dtype),
                             ocr_shape_str(en->shape, sb, sizeof sb), (double)v, (long long)i, ocr_shape_str(idx, ib, sizeof ib),
                             (double)OCR_LOAD_MAX_ABS);
        }
    }
    return OCR_OK;
}

OCRDEF int ocr_params_load(ocr_ctx *ctx, ocr_params *P, const ocr_safetensors *st, const char *prefix, unsigned flags) {
    const char *fn = "ocr_params_load";
    size_t plen = prefix ? strlen(prefix) : 0;
    int i, rc, used = 0;
    if (!P->allocated) return ocr_error(ctx, OCR_ESTATE, "%s: parameters not allocated", fn);
    if (P->device != OCR_DEVICE_CPU) {
        ocr_params host;
        if ((rc = ocr_params_host_copy(ctx, P, &host))) return rc;
        if (!(rc = ocr_params_load(ctx, &host, st, prefix, flags))) rc = ocr_params_copy_values(ctx, P, &host);
        ocr_params_free(&host);
        return rc;
    }
    /* names, shapes and dtypes are all checked before the first value is copied: a refused load changes nothing */
    for (i = 0; i < P->count; i++) {
        const char *key = P->info[i].name;
        int e;
        char sb[96], se[96];
        if (plen && strncmp(key, prefix, plen) != 0) continue;
        key += plen;
        if ((e = ocr_safetensors_find(st, key)) < 0) {
            if (flags & OCR_LOAD_ALLOW_MISSING) continue;
            return ocr_error(ctx, OCR_ENOTFOUND, "%s: the file has no tensor '%s' for parameter '%s'", fn, key, P->info[i].name);
        }
        if (!ocr_shape_equal(st->entries[e].shape, P->info[i].shape))
            return ocr_error(ctx, OCR_ESHAPE, "%s: the file's tensor '%s' has shape %s but parameter '%s' is %s", fn, key,
                             ocr_shape_str(st->entries[e].shape, se, sizeof se), P->info[i].name, ocr_shape_str(P->info[i].shape, sb, sizeof sb));
        if (st->entries[e].dtype != OCR_F32 && st->entries[e].dtype != OCR_F16 && st->entries[e].dtype != OCR_BF16)
            return ocr_error(ctx, OCR_EDTYPE, "%s: the file's tensor '%s' is %s; parameters load from F32, F16 or BF16", fn, key,
                             ocr_dtype_name(st->entries[e].dtype));
        if ((rc = ocr__params_check_entry(ctx, fn, st, e))) return rc;
        used++;
    }
    if (!(flags & OCR_LOAD_ALLOW_UNEXPECTED) && used != st->n_entries) {
        for (i = 0; i < st->n_entries; i++) {
            char full[2 * OCR_NAME_MAX];
            snprintf(full, sizeof full, "%s%s", prefix ? prefix : "", st->entries[i].name);
            if (ocr_params_find(P, full) < 0)
                return ocr_error(ctx, OCR_ENOTFOUND, "%s: the file's tensor '%s' matches no parameter (as '%s')", fn, st->entries[i].name, full);
        }
    }
    for (i = 0; i < P->count; i++) {
        ocr_tensor v;
        const char *key = P->info[i].name;
        if (plen && strncmp(key, prefix, plen) != 0) continue;
        key += plen;
        if (ocr_safetensors_find(st, key) < 0) continue;
        v = ocr_params_value(P, i);
        if ((rc = ocr_safetensors_read_into(ctx, st, key, &v))) return rc;
    }
    return OCR_OK;
}

OCRDEF int ocr_params_save(ocr_ctx *ctx, const ocr_params *P, const char *path, const char *const *meta_keys,
                           const char *const *meta_values, int n_meta) {
    ocr_tensor *views;
    const ocr_tensor **ptrs;
    int i, rc;
    if (!P->allocated) return ocr_error(ctx, OCR_ESTATE, "ocr_params_save: parameters not allocated");
    if (P->device != OCR_DEVICE_CPU) {
        ocr_params host;
        if ((rc = ocr_params_host_copy(ctx, P, &host))) return rc;
        rc = ocr_params_save(ctx, &host, path, meta_keys, meta_values, n_meta);
        ocr_params_free(&host);
        return rc;
    }
    views = (ocr_tensor *)OCR_MALLOC((size_t)(P->count + 1) * sizeof *views);
    ptrs = (const ocr_tensor **)OCR_MALLOC((size_t)(P->count + 1) * sizeof *ptrs);
    if (!views || !ptrs) { OCR_FREE(views); OCR_FREE((void *)ptrs); return ocr_error(ctx, OCR_ENOMEM, "ocr_params_save: out of memory"); }
    for (i = 0; i < P->count; i++) { views[i] = ocr_params_value(P, i); ptrs[i] = &views[i]; }
    rc = ocr_safetensors_save(ctx, path, ptrs, P->count, meta_keys, meta_values, n_meta);
    OCR_FREE(views);
    OCR_FREE((void *)ptrs);
    return rc;
}

/* ---------------------------------------------------------------- optimizers */

OCRDEF ocr_optim_config ocr_optim_sgd(float momentum, float weight_decay, int nesterov) {
    ocr_optim_config c;
    memset(&c, 0, sizeof c);
    c.kind = OCR_OPTIM_SGD; c.momentum = momentum; c.weight_decay = weight_decay; c.nesterov = nesterov;
    return c;
}

OCRDEF ocr_optim_config ocr_optim_adamw(float beta1, float beta2, float eps, float weight_decay) {
    ocr_optim_config c;
    memset(&c, 0, sizeof c);
    c.kind = OCR_OPTIM_ADAMW; c.beta1 = beta1; c.beta2 = beta2; c.eps = eps; c.weight_decay = weight_decay;
    return c;
}

/* The hyper-parameters ocr_optim_init accepts; ocr_optim_save and ocr_optim_load hold files to the same rule. */
static int ocr__optim_config_check(ocr_ctx *ctx, const char *fn, const ocr_optim_config *cfg) {
    if (cfg->kind == OCR_OPTIM_SGD) {
        if (!(cfg->momentum >= 0.0f) || !(cfg->weight_decay >= 0.0f) || (cfg->nesterov && (cfg->momentum <= 0.0f || cfg->dampening != 0.0f)))
            return ocr_error(ctx, OCR_EINVAL, "%s: SGD needs momentum >= 0, weight_decay >= 0, and Nesterov needs momentum > 0 without dampening", fn);
    } else if (cfg->kind == OCR_OPTIM_ADAMW) {
        if (!(cfg->beta1 >= 0.0f && cfg->beta1 < 1.0f) || !(cfg->beta2 >= 0.0f && cfg->beta2 < 1.0f) || !(cfg->eps > 0.0f) || !(cfg->weight_decay >= 0.0f))
            return ocr_error(ctx, OCR_EINVAL, "%s: AdamW needs betas in [0, 1), eps > 0 and weight_decay >= 0", fn);
    } else {
        return ocr_error(ctx, OCR_EINVAL, "%s: unknown optimizer kind %d", fn, (int)cfg->kind);
    }
    return OCR_OK;
}

OCRDEF int ocr_optim_init(ocr_ctx *ctx, ocr_optimizer *opt, const ocr_params *P, ocr_optim_config cfg) {
    const char *fn = "ocr_optim_init";
    int rc;
    memset(opt, 0, sizeof *opt);
    if (!P->allocated) return ocr_error(ctx, OCR_ESTATE, "%s: parameters not allocated", fn);
    if ((rc = ocr__optim_config_check(ctx, fn, &cfg))) return rc;
    opt->cfg = cfg;
    opt->numel = P->numel;
    opt->device = P->device;
    opt->m = ocr_floats_alloc(ctx, P->device, P->numel, "optim.m");
    opt->v = opt->m && cfg.kind == OCR_OPTIM_ADAMW ? ocr_floats_alloc(ctx, P->device, P->numel, "optim.v") : NULL;
    if (!opt->m || (cfg.kind == OCR_OPTIM_ADAMW && !opt->v)) {
        rc = ctx->last_status; /* ocr_tensor_alloc's message names optim.m or optim.v */
        ocr_optim_free(opt);
        return rc;
    }
    return OCR_OK;
}

OCRDEF void ocr_optim_free(ocr_optimizer *opt) {
    if (!opt) return;
    ocr_floats_free(opt->m, opt->device);
    ocr_floats_free(opt->v, opt->device);
    opt->m = opt->v = NULL;
}

#ifdef OCR_CUDA
/* ocr_optim_step on device parameters: the same formulas per trainable entry, in ocr_cuda.cu's kernels. */
static int ocr__optim_step_cuda(ocr_ctx *ctx, ocr_optimizer *opt, ocr_params *P, float lr) {
    const ocr_optim_config *c = &opt->cfg;
    int i, rc;
    for (i = 0; i < P->count; i++) {
        const ocr_param_info *pi = &P->info[i];
        int64_t n = ocr_shape_numel(pi->shape);
        float wd = pi->decay ? c->weight_decay : 0.0f;
        if (!pi->trainable) continue;
        rc = c->kind == OCR_OPTIM_SGD
                 ? ocr_cuda_sgd_update(ctx, P->data + pi->offset, P->grad + pi->offset, opt->m + pi->offset, n, lr, c->momentum,
                                       c->dampening, wd, c->nesterov, opt->step == 0)
                 : ocr_cuda_adamw_update(ctx, P->data + pi->offset, P->grad + pi->offset, opt->m + pi->offset, opt->v + pi->offset, n,
                                         lr, c->beta1, c->beta2, c->eps, wd, opt->step);
        if (rc) return rc;
    }
    opt->step++;
    return OCR_OK;
}
#endif

OCRDEF int ocr_optim_step(ocr_ctx *ctx, ocr_optimizer *opt, ocr_params *P, float lr) {
    const ocr_optim_config *c = &opt->cfg;
    int i;
    size_t k;
    if (!opt->m || opt->numel != P->numel) return ocr_error(ctx, OCR_ESTATE, "ocr_optim_step: optimizer not initialised for these parameters");
    if (!isfinite(lr) || lr < 0.0f) return ocr_error(ctx, OCR_EINVAL, "ocr_optim_step: learning rate %g must be finite and >= 0", lr);
    if (opt->device != P->device)
        return ocr_error(ctx, OCR_EDEVICE, "ocr_optim_step: the optimizer state is on %s but the parameters on %s (ocr_optim_init after "
                         "ocr_params_to_device)", ocr_device_name(opt->device), ocr_device_name(P->device));
#ifdef OCR_CUDA
    if (P->device == OCR_DEVICE_CUDA) return ocr__optim_step_cuda(ctx, opt, P, lr);
#endif
    for (i = 0; i < P->count; i++) {
        const ocr_param_info *pi = &P->info[i];
        size_t n = (size_t)ocr_shape_numel(pi->shape);
        float *p = P->data + pi->offset, *g = P->grad + pi->offset, *m = opt->m + pi->offset;
        float wd = pi->decay ? c->weight_decay : 0.0f;
        if (!pi->trainable) continue;
        if (c->kind == OCR_OPTIM_SGD) {
            for (k = 0; k < n; k++) {
                float d = g[k] + wd * p[k];
                if (c->momentum != 0.0f) {
                    m[k] = opt->step == 0 ? d : c->momentum * m[k] + (1.0f - c->dampening) * d;
                    d = c->nesterov ? d + c->momentum * m[k] : m[k];
                }
                p[k] -= lr * d;
            }
        } else {
            float *v = opt->v + pi->offset;
            double t = (double)(opt->step + 1);
            float bc1 = (float)(1.0 - pow(c->beta1, t)), bc2_sqrt = (float)sqrt(1.0 - pow(c->beta2, t));
            float step_size = lr / bc1;
            for (k = 0; k < n; k++) {
                float gk = g[k];
                p[k] *= 1.0f - lr * wd;
                m[k] += (gk - m[k]) * (1.0f - c->beta1);
                v[k] = c->beta2 * v[k] + (1.0f - c->beta2) * gk * gk;
                p[k] -= step_size * m[k] / (sqrtf(v[k]) / bc2_sqrt + c->eps);
            }
        }
    }
    opt->step++;
    return OCR_OK;
}

/* ---------------------------------------------------------------- optimizer state files */

/* Format 1 of ocr_optim_save's files. Everything the library writes is named here: a reader refuses what it does not
   know under these names rather than resume without it (a later field, say a loss scaler, gets a new name that
   older readers refuse). */
#define OCR__OPTIM_FORMAT 1
static const char *const ocr__optim_keys[] = {"optim.version", "optim.kind", "optim.step", "optim.numel", "optim.weight_decay",
                                              "optim.momentum", "optim.dampening", "optim.nesterov", "optim.beta1", "optim.beta2",
                                              "optim.eps"};
enum { OCR__OPTIM_N_KEYS = (int)(sizeof ocr__optim_keys / sizeof ocr__optim_keys[0]) };
enum { OCR__OPTIM_M, OCR__OPTIM_V, OCR__OPTIM_AVG, OCR__OPTIM_N_TENSORS };
static const char *const ocr__optim_tensor_names[OCR__OPTIM_N_TENSORS] = {"optim.m", "optim.v", "ema"};

static const char *ocr__optim_kind_name(ocr_optim_kind kind) {
    return kind == OCR_OPTIM_SGD ? "SGD" : kind == OCR_OPTIM_ADAMW ? "AdamW" : "an unknown kind";
}

/* A whole decimal integer in [0, 10^18) (no sign, no spaces): counts and steps. */
static int ocr__optim_parse_count(const char *s, int64_t *out) {
    int64_t v = 0;
    int n = 0;
    if (!s) return 0;
    for (; *s; s++, n++) {
        if (*s < '0' || *s > '9' || n >= 18) return 0;
        v = v * 10 + (*s - '0');
    }
    *out = v;
    return n > 0;
}

/* A whole finite number, as "%.9g" writes a float (which reads back to the same float). */
static int ocr__optim_parse_float(const char *s, float *out) {
    char *end;
    double v;
    if (!s || !*s) return 0;
    v = strtod(s, &end);
    if (*end || !isfinite(v) || fabs(v) > FLT_MAX) return 0;
    *out = (float)v;
    return 1;
}

/* The state buffers in the file's order: m, v (AdamW) and the average (when given), as views on opt->device. */
static int ocr__optim_views(const ocr_optimizer *opt, const float *avg, ocr_tensor *views) {
    int n = 0;
    ocr_shape sh = ocr_shape1((int64_t)opt->numel);
    views[n++] = ocr_tensor_view(ocr__optim_tensor_names[OCR__OPTIM_M], OCR_F32, opt->device, sh, opt->m);
    if (opt->cfg.kind == OCR_OPTIM_ADAMW) views[n++] = ocr_tensor_view(ocr__optim_tensor_names[OCR__OPTIM_V], OCR_F32, opt->device, sh, opt->v);
    if (avg) views[n++] = ocr_tensor_view(ocr__optim_tensor_names[OCR__OPTIM_AVG], OCR_F32, opt->device, sh, (void *)avg);
    return n;
}

OCRDEF int ocr_optim_save(ocr_ctx *ctx, const ocr_optimizer *opt, const float *avg, const char *path,
                          const char *const *meta_keys, const char *const *meta_values, int n_meta) {
    const char *fn = "ocr_optim_save";
    const ocr_optim_config *c;
    char text[OCR__OPTIM_N_KEYS][48];
    const char *own_keys[OCR__OPTIM_N_KEYS], **keys = NULL, **vals = NULL;
    ocr_tensor views[OCR__OPTIM_N_TENSORS], host[OCR__OPTIM_N_TENSORS];
    const ocr_tensor *ptrs[OCR__OPTIM_N_TENSORS];
    int n_own = 0, n_t, i, rc = OCR_OK;
    if (!opt || !opt->m || (opt->cfg.kind == OCR_OPTIM_ADAMW && !opt->v))
        return ocr_error(ctx, OCR_ESTATE, "%s: the optimizer is not initialised (ocr_optim_init)", fn);
    if (!path) return ocr_error(ctx, OCR_EINVAL, "%s: no path", fn);
    if (n_meta < 0 || (n_meta > 0 && (!meta_keys || !meta_values)))
        return ocr_error(ctx, OCR_EINVAL, "%s: %d metadata pairs without their keys or values", fn, n_meta);
    for (i = 0; i < n_meta; i++) {
        if (!meta_keys[i] || !meta_values[i]) return ocr_error(ctx, OCR_EINVAL, "%s: metadata pair %d is NULL", fn, i);
        if (strncmp(meta_keys[i], "optim.", 6) == 0)
            return ocr_error(ctx, OCR_EINVAL, "%s: metadata key '%s' is in the library's namespace \"optim.\"; choose another prefix", fn,
                             meta_keys[i]);
    }
    c = &opt->cfg;
    if ((rc = ocr__optim_config_check(ctx, fn, c))) return rc;
    if (opt->step < 0) return ocr_error(ctx, OCR_ESTATE, "%s: step %lld is negative", fn, (long long)opt->step);
#define OCR__OPTIM_PUT(key, ...) (own_keys[n_own] = key, snprintf(text[n_own], sizeof text[n_own], __VA_ARGS__), n_own++)
    OCR__OPTIM_PUT("optim.version", "%d", OCR__OPTIM_FORMAT);
    OCR__OPTIM_PUT("optim.kind", "%s", c->kind == OCR_OPTIM_SGD ? "sgd" : "adamw");
    OCR__OPTIM_PUT("optim.step", "%lld", (long long)opt->step);
    OCR__OPTIM_PUT("optim.numel", "%llu", (unsigned long long)opt->numel);
    OCR__OPTIM_PUT("optim.weight_decay", "%.9g", (double)c->weight_decay);
    if (c->kind == OCR_OPTIM_SGD) {
        OCR__OPTIM_PUT("optim.momentum", "%.9g", (double)c->momentum);
        OCR__OPTIM_PUT("optim.dampening", "%.9g", (double)c->dampening);
        OCR__OPTIM_PUT("optim.nesterov", "%d", c->nesterov ? 1 : 0);
    } else {
        OCR__OPTIM_PUT("optim.beta1", "%.9g", (double)c->beta1);
        OCR__OPTIM_PUT("optim.beta2", "%.9g", (double)c->beta2);
        OCR__OPTIM_PUT("optim.eps", "%.9g", (double)c->eps);
    }
#undef OCR__OPTIM_PUT
    memset(host, 0, sizeof host);
    n_t = ocr__optim_views(opt, avg, views);
    for (i = 0; i < n_t && !rc; i++) {
        ptrs[i] = &views[i];
        if (views[i].device != OCR_DEVICE_CPU) { /* staged through host memory: the writer reads host bytes */
            if (!(rc = ocr_tensor_alloc(ctx, &host[i], views[i].name, OCR_F32, OCR_DEVICE_CPU, views[i].shape)) &&
                !(rc = ocr_tensor_copy(ctx, &host[i], &views[i])))
                ptrs[i] = &host[i];
        }
        if (!rc) rc = ocr_check_finite(ctx, fn, ptrs[i]); /* the reader refuses non-finite state, so it is never written */
    }
    if (!rc) {
        keys = (const char **)OCR_MALLOC((size_t)(n_own + n_meta) * sizeof *keys);
        vals = (const char **)OCR_MALLOC((size_t)(n_own + n_meta) * sizeof *vals);
        if (!keys || !vals) rc = ocr_error(ctx, OCR_ENOMEM, "%s: out of memory", fn);
    }
    if (!rc) {
        for (i = 0; i < n_own; i++) { keys[i] = own_keys[i]; vals[i] = text[i]; }
        for (i = 0; i < n_meta; i++) { keys[n_own + i] = meta_keys[i]; vals[n_own + i] = meta_values[i]; }
        rc = ocr_safetensors_save(ctx, path, ptrs, n_t, keys, vals, n_own + n_meta);
    }
    OCR_FREE((void *)keys);
    OCR_FREE((void *)vals);
    for (i = 0; i < OCR__OPTIM_N_TENSORS; i++) ocr_tensor_free(&host[i]);
    return rc;
}

/* The settings of a format-1 file into *cfg and *step, checked against opt's kind and size first. */
static int ocr__optim_read_meta(ocr_ctx *ctx, const ocr_optimizer *opt, const ocr_safetensors *st, ocr_optim_config *cfg,
                                int64_t *step) {
    const char *fn = "ocr_optim_load", *kind = ocr_safetensors_meta(st, "optim.kind");
    const char *bad = NULL;
    int64_t numel = 0, nesterov = 0;
    int i, k;
    if (!kind || (strcmp(kind, "sgd") != 0 && strcmp(kind, "adamw") != 0))
        return ocr_error(ctx, OCR_EFORMAT, "%s: optim.kind is '%s'; expected sgd or adamw", fn, kind ? kind : "(missing)");
    memset(cfg, 0, sizeof *cfg);
    cfg->kind = strcmp(kind, "sgd") == 0 ? OCR_OPTIM_SGD : OCR_OPTIM_ADAMW;
    if (cfg->kind != opt->cfg.kind)
        return ocr_error(ctx, OCR_EINVAL, "%s: the file holds %s state but the optimizer is %s", fn, ocr__optim_kind_name(cfg->kind),
                         ocr__optim_kind_name(opt->cfg.kind));
    if (!ocr__optim_parse_count(ocr_safetensors_meta(st, "optim.numel"), &numel))
        return ocr_error(ctx, OCR_EFORMAT, "%s: optim.numel is '%s'; expected a count", fn,
                         ocr_safetensors_meta(st, "optim.numel") ? ocr_safetensors_meta(st, "optim.numel") : "(missing)");
    if ((uint64_t)numel != (uint64_t)opt->numel)
        return ocr_error(ctx, OCR_ESHAPE, "%s: the file's %s state is for %lld parameters but the optimizer has %llu", fn,
                         ocr__optim_kind_name(cfg->kind), (long long)numel, (unsigned long long)opt->numel);
    if (!ocr__optim_parse_count(ocr_safetensors_meta(st, "optim.step"), step)) bad = "optim.step";
    else if (!ocr__optim_parse_float(ocr_safetensors_meta(st, "optim.weight_decay"), &cfg->weight_decay)) bad = "optim.weight_decay";
    else if (cfg->kind == OCR_OPTIM_SGD) {
        if (!ocr__optim_parse_float(ocr_safetensors_meta(st, "optim.momentum"), &cfg->momentum)) bad = "optim.momentum";
        else if (!ocr__optim_parse_float(ocr_safetensors_meta(st, "optim.dampening"), &cfg->dampening)) bad = "optim.dampening";
        else if (!ocr__optim_parse_count(ocr_safetensors_meta(st, "optim.nesterov"), &nesterov) || nesterov > 1) bad = "optim.nesterov";
        cfg->nesterov = (int)nesterov;
    } else {
        if (!ocr__optim_parse_float(ocr_safetensors_meta(st, "optim.beta1"), &cfg->beta1)) bad = "optim.beta1";
        else if (!ocr__optim_parse_float(ocr_safetensors_meta(st, "optim.beta2"), &cfg->beta2)) bad = "optim.beta2";
        else if (!ocr__optim_parse_float(ocr_safetensors_meta(st, "optim.eps"), &cfg->eps)) bad = "optim.eps";
    }
    if (bad)
        return ocr_error(ctx, OCR_EFORMAT, "%s: %s is '%s'; expected a %s", fn, bad,
                         ocr_safetensors_meta(st, bad) ? ocr_safetensors_meta(st, bad) : "(missing)",
                         strcmp(bad, "optim.step") == 0 ? "count" : strcmp(bad, "optim.nesterov") == 0 ? "0 or 1" : "finite number");
    for (i = 0; i < st->n_meta; i++) {
        if (strncmp(st->meta_keys[i], "optim.", 6) != 0) continue;
        for (k = 0; k < OCR__OPTIM_N_KEYS && strcmp(st->meta_keys[i], ocr__optim_keys[k]) != 0; k++) {}
        if (k == OCR__OPTIM_N_KEYS)
            return ocr_error(ctx, OCR_EUNSUPPORTED, "%s: the file has the key '%s', which this version cannot restore (written by a "
                             "newer ocr-c?); resuming without it would not be exact", fn, st->meta_keys[i]);
    }
    return ocr__optim_config_check(ctx, fn, cfg);
}

OCRDEF int ocr_optim_load(ocr_ctx *ctx, ocr_optimizer *opt, float *avg, const ocr_safetensors *st) {
    const char *fn = "ocr_optim_load", *version = ocr_safetensors_meta(st, "optim.version");
    ocr_optim_config cfg;
    int64_t step = 0, v = 0;
    ocr_tensor views[OCR__OPTIM_N_TENSORS], host[OCR__OPTIM_N_TENSORS];
    int present[OCR__OPTIM_N_TENSORS], n_t, i, k, rc = OCR_OK;
    if (!opt || !opt->m || (opt->cfg.kind == OCR_OPTIM_ADAMW && !opt->v))
        return ocr_error(ctx, OCR_ESTATE, "%s: the optimizer is not initialised (ocr_optim_init)", fn);
    if (version) {
        if (!ocr__optim_parse_count(version, &v) || v < 1)
            return ocr_error(ctx, OCR_EFORMAT, "%s: optim.version is '%s'; expected a format number", fn, version);
        if (v > OCR__OPTIM_FORMAT)
            return ocr_error(ctx, OCR_EUNSUPPORTED, "%s: the file is in format %lld; this version reads format %d (written by a newer "
                             "ocr-c?)", fn, (long long)v, OCR__OPTIM_FORMAT);
        if ((rc = ocr__optim_read_meta(ctx, opt, st, &cfg, &step))) return rc;
    }
    /* every tensor is one this version restores, and the ones opt and avg need are there, F32 [numel] */
    memset(present, 0, sizeof present);
    for (i = 0; i < st->n_entries; i++) {
        const ocr_safetensors_entry *e = &st->entries[i];
        for (k = 0; k < OCR__OPTIM_N_TENSORS && strcmp(e->name, ocr__optim_tensor_names[k]) != 0; k++) {}
        if (k == OCR__OPTIM_N_TENSORS)
            return ocr_error(ctx, OCR_EUNSUPPORTED, "%s: the file holds a tensor '%s', which this version cannot restore (written by a "
                             "newer ocr-c?); resuming without it would not be exact", fn, e->name);
        present[k] = 1;
    }
    if (opt->cfg.kind == OCR_OPTIM_SGD && present[OCR__OPTIM_V])
        return ocr_error(ctx, OCR_EINVAL, "%s: the file holds AdamW state (it has optim.v) but the optimizer is SGD", fn);
    if (opt->cfg.kind == OCR_OPTIM_ADAMW && !present[OCR__OPTIM_V])
        return ocr_error(ctx, OCR_EINVAL, "%s: the file holds SGD state (it has no optim.v) but the optimizer is AdamW", fn);
    if (!present[OCR__OPTIM_M]) return ocr_error(ctx, OCR_ENOTFOUND, "%s: the file has no tensor 'optim.m'", fn);
    if (avg && !present[OCR__OPTIM_AVG])
        return ocr_error(ctx, OCR_ENOTFOUND, "%s: a weight average was asked for but the file has no tensor 'ema'", fn);
    n_t = ocr__optim_views(opt, avg, views);
    for (i = 0; i < n_t; i++) {
        const ocr_safetensors_entry *e = &st->entries[ocr_safetensors_find(st, views[i].name)];
        char sb[96];
        if (e->dtype != OCR_F32 || e->shape.ndim != 1 || (uint64_t)e->shape.dim[0] != (uint64_t)opt->numel)
            return ocr_error(ctx, e->dtype != OCR_F32 ? OCR_EDTYPE : OCR_ESHAPE, "%s: the file's '%s' is %s %s; expected F32 [%llu] "
                             "(the optimizer's parameter count)", fn, e->name, ocr_dtype_name(e->dtype),
                             ocr_shape_str(e->shape, sb, sizeof sb), (unsigned long long)opt->numel);
    }
    /* read and check everything before changing anything, so that a refused file leaves opt and avg as they were */
    memset(host, 0, sizeof host);
    for (i = 0; i < n_t && !rc; i++)
        if (!(rc = ocr_tensor_alloc(ctx, &host[i], views[i].name, OCR_F32, OCR_DEVICE_CPU, views[i].shape)) &&
            !(rc = ocr_safetensors_read_into(ctx, st, views[i].name, &host[i])))
            rc = ocr_check_finite(ctx, fn, &host[i]);
    for (i = 0; i < n_t && !rc; i++) rc = ocr_tensor_copy(ctx, &views[i], &host[i]);
    for (i = 0; i < OCR__OPTIM_N_TENSORS; i++) ocr_tensor_free(&host[i]);
    if (rc) return rc;
    if (version) {
        opt->cfg = cfg;
        opt->step = step;
    }
    return OCR_OK;
}

OCRDEF float ocr_lr_poly(float base_lr, int64_t step, int64_t total, float power) {
    double frac;
    if (total <= 0 || step >= total) return 0.0f;
    frac = 1.0 - (double)(step < 0 ? 0 : step) / (double)total;
    return (float)(base_lr * pow(frac, power));
}

/* x[i] *= s for n floats on dev: clipping and loss scaling. */
static int ocr__scale_floats(ocr_ctx *ctx, ocr_device dev, float *x, int64_t n, float s) {
    int64_t i;
#ifdef OCR_CUDA
    if (dev == OCR_DEVICE_CUDA) return ocr_cuda_scale(ctx, x, n, s);
#else
    (void)ctx; (void)dev;
#endif
    for (i = 0; i < n; i++) x[i] *= s;
    return OCR_OK;
}

OCRDEF int ocr_clip_grad_norm(ocr_ctx *ctx, ocr_params *P, float max_norm, float *norm_out) {
    double ss = 0.0, norm;
    int i, rc;
    size_t k;
    for (i = 0; i < P->count; i++) {
        const float *g = P->grad + P->info[i].offset;
        size_t n = (size_t)ocr_shape_numel(P->info[i].shape);
        if (!P->info[i].trainable) continue;
#ifdef OCR_CUDA
        if (P->device == OCR_DEVICE_CUDA) {
            double part;
            if ((rc = ocr_cuda_sum_squares(ctx, g, (int64_t)n, &part))) return rc;
            ss += part;
            continue;
        }
#endif
        for (k = 0; k < n; k++) ss += (double)g[k] * g[k];
    }
    norm = sqrt(ss);
    if (norm_out) *norm_out = (float)norm;
    if (!isfinite(norm)) {
        /* name the first offending parameter so the user knows where to look */
        for (i = 0; i < P->count; i++) {
            ocr_tensor g = ocr_params_grad(P, i);
            if (P->info[i].trainable && (rc = ocr_check_finite(ctx, "ocr_clip_grad_norm", &g))) return rc;
        }
        return ocr_error(ctx, OCR_ENONFINITE, "ocr_clip_grad_norm: gradient norm overflowed");
    }
    if (max_norm > 0.0f && norm > max_norm) {
        float coef = (float)(max_norm / (norm + 1e-6));
        for (i = 0; i < P->count; i++)
            if (P->info[i].trainable &&
                (rc = ocr__scale_floats(ctx, P->device, P->grad + P->info[i].offset, ocr_shape_numel(P->info[i].shape), coef)))
                return rc;
    }
    return OCR_OK;
}

/* ---------------------------------------------------------------- loss scaling */

OCRDEF ocr_grad_scaler ocr_grad_scaler_default(int enabled) {
    ocr_grad_scaler sc;
    memset(&sc, 0, sizeof sc);
    sc.enabled = enabled;
    sc.scale = enabled ? 65536.0f : 1.0f;
    sc.growth_factor = 2.0f;
    sc.backoff_factor = 0.5f;
    sc.growth_interval = 2000;
    sc.min_scale = 1.0f / 16777216.0f;
    return sc;
}

OCRDEF int ocr_grad_scaler_scale(ocr_ctx *ctx, const ocr_grad_scaler *sc, ocr_tensor *grad) {
    int rc;
    if ((rc = ocr_check_f32(ctx, "ocr_grad_scaler_scale", grad))) return rc;
    if (!sc->enabled) return OCR_OK;
    return ocr__scale_floats(ctx, grad->device, (float *)grad->data, ocr_tensor_numel(grad), sc->scale);
}

OCRDEF int ocr_grad_scaler_unscale(ocr_ctx *ctx, ocr_grad_scaler *sc, ocr_params *P, int *found_nonfinite) {
    /* GradScaler multiplies by the reciprocal computed in double and rounded to float */
    float inv = (float)(1.0 / (double)sc->scale);
    int i, rc;
    *found_nonfinite = 0;
    for (i = 0; i < P->count; i++) {
        float *g = P->grad + P->info[i].offset;
        int64_t n = ocr_shape_numel(P->info[i].shape), k;
        double ss = 0.0;
        if (!P->info[i].trainable) continue;
        if (sc->enabled && (rc = ocr__scale_floats(ctx, P->device, g, n, inv))) return rc;
#ifdef OCR_CUDA
        if (P->device == OCR_DEVICE_CUDA) {
            if ((rc = ocr_cuda_sum_squares(ctx, g, n, &ss))) return rc;
        } else
#endif
            for (k = 0; k < n; k++) ss += (double)g[k] * g[k];
        if (!isfinite(ss) && !*found_nonfinite) {  /* squares of finite floats stay finite in double */
            *found_nonfinite = 1;
            snprintf(sc->last_nonfinite, sizeof sc->last_nonfinite, "%s", P->info[i].name);
        }
    }
    return OCR_OK;
}

OCRDEF int ocr_grad_scaler_update(ocr_ctx *ctx, ocr_grad_scaler *sc, int found_nonfinite) {
    if (found_nonfinite) {
        sc->skipped++;
        sc->skipped_in_a_row++;
        if (sc->enabled) {
            sc->scale *= sc->backoff_factor;
            sc->growth_tracker = 0;
            if (sc->scale < sc->min_scale)
                return ocr_error(ctx, OCR_ENONFINITE, "ocr_grad_scaler_update: the loss scale fell to %g after %lld non-finite steps in a "
                                 "row: the gradients are non-finite at every scale (first at '%s'), a forward or loss problem, "
                                 "not an fp16 range one", (double)sc->scale, (long long)sc->skipped_in_a_row, sc->last_nonfinite);
        }
        return OCR_OK;
    }
    sc->skipped_in_a_row = 0;
    if (!sc->enabled) return OCR_OK;
    if (++sc->growth_tracker >= sc->growth_interval) {
        float grown = sc->scale * sc->growth_factor;
        if (isfinite(grown)) sc->scale = grown;
        sc->growth_tracker = 0;
    }
    return OCR_OK;
}

OCRDEF int ocr_grad_scaler_meta(const ocr_grad_scaler *sc, char *buf, const char **keys, const char **values) {
    static const char *const names[] = {"amp.scaler_enabled", "amp.scale", "amp.growth_tracker", "amp.skipped"};
    int n = 0, i;
    /* %.9g: a float's value exactly */
    n += snprintf(buf + n, 512 - (size_t)n, "%d", sc->enabled) + 1;
    n += snprintf(buf + n, 512 - (size_t)n, "%.9g", (double)sc->scale) + 1;
    n += snprintf(buf + n, 512 - (size_t)n, "%d", sc->growth_tracker) + 1;
    (void)snprintf(buf + n, 512 - (size_t)n, "%lld", (long long)sc->skipped);
    for (i = 0, n = 0; i < 4; i++) {
        keys[i] = names[i];
        values[i] = buf + n;
        n += (int)strlen(buf + n) + 1;
    }
    return 4;
}

OCRDEF int ocr_grad_scaler_from_meta(ocr_ctx *ctx, ocr_grad_scaler *sc, const ocr_safetensors *st) {
    const char *en = ocr_safetensors_meta(st, "amp.scaler_enabled"), *sv = ocr_safetensors_meta(st, "amp.scale"),
               *gt = ocr_safetensors_meta(st, "amp.growth_tracker"), *sk = ocr_safetensors_meta(st, "amp.skipped");
    char *end;
    double scale;
    long tracker;
    long long skipped;
    if (!en && !sv && !gt && !sk) return OCR_OK;
    if (!en || !sv || !gt || !sk) return ocr_error(ctx, OCR_EFORMAT, "ocr_grad_scaler_from_meta: the loss scaler's state is incomplete");
    if ((strcmp(en, "0") && strcmp(en, "1")))
        return ocr_error(ctx, OCR_EFORMAT, "ocr_grad_scaler_from_meta: amp.scaler_enabled is '%s', not 0 or 1", en);
    scale = strtod(sv, &end);
    if (end == sv || *end || !(scale > 0.0) || scale > FLT_MAX)
        return ocr_error(ctx, OCR_EFORMAT, "ocr_grad_scaler_from_meta: amp.scale '%s' is not a positive float", sv);
    tracker = strtol(gt, &end, 10);
    if (end == gt || *end || tracker < 0 || tracker > 1000000000L)
        return ocr_error(ctx, OCR_EFORMAT, "ocr_grad_scaler_from_meta: amp.growth_tracker '%s' is out of range", gt);
    skipped = strtoll(sk, &end, 10);
    if (end == sk || *end || skipped < 0)
        return ocr_error(ctx, OCR_EFORMAT, "ocr_grad_scaler_from_meta: amp.skipped '%s' is out of range", sk);
    sc->enabled = en[0] == '1';
    sc->scale = (float)scale;
    sc->growth_tracker = (int)tracker;
    sc->skipped = skipped;
    return OCR_OK;
}

/* ---------------------------------------------------------------- recognition ops: LSTM, log-softmax, rectangular pooling, map-to-sequence */

/* Compared as integers: ordering pointers into different objects is undefined in C. */
static int ocr__seq_overlap(const ocr_tensor *a, const ocr_tensor *b) {
    uintptr_t a0, b0;
    if (!a || !b || !a->data || !b->data) return 0;
    a0 = (uintptr_t)a->data;
    b0 = (uintptr_t)b->data;
    return a0 < b0 + ocr_tensor_bytes(b) && b0 < a0 + ocr_tensor_bytes(a);
}
static int ocr__seq_refuse_overlap(ocr_ctx *ctx, const char *fn, const ocr_tensor *out, const ocr_tensor *other) {
    char d[200], e[200];
    if (!ocr__seq_overlap(out, other)) return OCR_OK;
    return ocr_error(ctx, OCR_EINVAL, "%s: tensor %s shares memory with tensor %s", fn, ocr_tensor_describe(out, d, sizeof d),
                     ocr_tensor_describe(other, e, sizeof e));
}
static int ocr__seq_cpu_only(ocr_ctx *ctx, const char *fn) {
    if (ctx->device != OCR_DEVICE_CPU)
        return ocr_error(ctx, OCR_EUNSUPPORTED, "%s: runs on the CPU only in this version (context device %s has no kernel yet)", fn,
                         ocr_device_name(ctx->device));
    return OCR_OK;
}

typedef struct { int64_t T, N, I, H; int D; } ocr__lstm_dims;

/* x's shape and every weight's, against each other; a NULL tensor the direction count needs is named */
static int ocr__lstm_check_shapes(ocr_ctx *ctx, const char *fn, ocr_shape x, const ocr_lstm_weights *w, ocr__lstm_dims *dm) {
    static const char *const slot[2] = {"", " (the _reverse direction)"};
    char xs[96];
    int d, rc;
    if (!w) return ocr_error(ctx, OCR_EINVAL, "%s: weights are NULL", fn);
    if (w->directions != 1 && w->directions != 2)
        return ocr_error(ctx, OCR_EINVAL, "%s: directions = %d, must be 1 or 2", fn, w->directions);
    if (x.ndim != 3 || x.dim[0] < 1 || x.dim[1] < 1 || x.dim[2] < 1)
        return ocr_error(ctx, OCR_ESHAPE, "%s: input shape %s, expected [T, N, I] with T, N, I >= 1 (sequence first)", fn,
                         ocr_shape_str(x, xs, sizeof xs));
    if (!w->w_hh[0]) return ocr_error(ctx, OCR_EINVAL, "%s: w_hh[0] is NULL", fn);
    if ((rc = ocr_check_f32(ctx, fn, w->w_hh[0]))) return rc;
    if (w->w_hh[0]->shape.ndim != 2 || w->w_hh[0]->shape.dim[1] < 1 || w->w_hh[0]->shape.dim[0] != 4 * w->w_hh[0]->shape.dim[1])
        return ocr_error(ctx, OCR_ESHAPE, "%s: tensor %s must be [4H, H]", fn, ocr_tensor_describe(w->w_hh[0], xs, sizeof xs));
    dm->T = x.dim[0]; dm->N = x.dim[1]; dm->I = x.dim[2]; dm->H = w->w_hh[0]->shape.dim[1]; dm->D = w->directions;
    for (d = 0; d < dm->D; d++) {
        const ocr_tensor *need[2];
        int i;
        need[0] = w->w_ih[d]; need[1] = w->w_hh[d];
        for (i = 0; i < 2; i++)
            if (!need[i]) return ocr_error(ctx, OCR_EINVAL, "%s: %s[%d] is NULL%s", fn, i ? "w_hh" : "w_ih", d, slot[d]);
        if ((rc = ocr_check_f32(ctx, fn, w->w_ih[d])) || (rc = ocr_check_shape(ctx, fn, w->w_ih[d], ocr_shape2(4 * dm->H, dm->I))) ||
            (rc = ocr_check_f32(ctx, fn, w->w_hh[d])) || (rc = ocr_check_shape(ctx, fn, w->w_hh[d], ocr_shape2(4 * dm->H, dm->H))))
            return rc;
        if (w->b_ih[d] && ((rc = ocr_check_f32(ctx, fn, w->b_ih[d])) || (rc = ocr_check_shape(ctx, fn, w->b_ih[d], ocr_shape1(4 * dm->H)))))
            return rc;
        if (w->b_hh[d] && ((rc = ocr_check_f32(ctx, fn, w->b_hh[d])) || (rc = ocr_check_shape(ctx, fn, w->b_hh[d], ocr_shape1(4 * dm->H)))))
            return rc;
    }
    return OCR_OK;
}

OCRDEF int ocr_nn_lstm_shapes(ocr_ctx *ctx, ocr_shape x, const ocr_lstm_weights *w, ocr_shape *y, ocr_shape *saved) {
    ocr__lstm_dims dm;
    int rc = ocr__lstm_check_shapes(ctx, "ocr_nn_lstm_shapes", x, w, &dm);
    if (rc) return rc;
    if (y) *y = ocr_shape3(dm.T, dm.N, dm.D * dm.H);
    if (saved) *saved = ocr_shape4(dm.D, dm.T, dm.N, 5 * dm.H);
    return OCR_OK;
}

static const float *ocr__f32_or_null(const ocr_tensor *t) { return t ? (const float *)t->data : NULL; }
static float *ocr__f32_mut_or_null(ocr_tensor *t) { return t ? (float *)t->data : NULL; }

/* One step's pointwise part on rows [begin, end) of the batch: the gate pre-activations in sv (input projection plus
   recurrent term; the biases are added here) become the activated gates, then c and h. */
typedef struct {
    float *sv;                      /* this step's rows [N, 5H] */
    const float *c_prev;            /* the previous step's rows (c at column 4H), NULL at the first step */
    const float *b_ih, *b_hh;
    float *y;                       /* this step's rows, this direction's columns; row stride ldy */
    const int32_t *len;             /* per-sample lengths or NULL; rows with t >= len[n] are padding */
    int64_t H, ldy, t;
    int simd;                       /* ocr__lstm_simd */
} ocr__lstm_fwd_job;

/* ---- the gate activations of the LSTM's fast path ----
   sigmoid(a) = 1 / (1 + e^-|a|) or e^-|a| / (1 + e^-|a|) by the sign of a, and for |a| >= 0.625 tanh(a) = (1 - e^-2|a|)
   / (1 + e^-2|a|) with the sign of a, so one e^x of x <= 0 serves both: x = n ln2 + r with |r| <= ln2/2 (ln2 in two
   parts), e^r by the degree-6 single-precision minimax polynomial of Cephes' expf, times 2^n. Below 0.625, where
   1 - e^-2|a| would lose digits, tanh is its odd polynomial (Cephes' tanhf). x is held at -87 or above (e^-87 is a
   normal float; no gate can tell it from 0), and NaN stays NaN. Within 1.7e-7 of the exact values, relatively
   (test_lstm_gates). libm took two thirds of the recognizer's LSTM time; these run 16 (AVX-512) or 8 (AVX2) lanes at
   a time with the same operations in every lane, so AVX-512 and AVX2 give the same bits, and the portable path the
   same formulas. */
#define OCR__EXP_LOG2E 1.44269504088896341f
#define OCR__EXP_LN2_HI 0.693359375f
#define OCR__EXP_LN2_LO -2.12194440e-4f
#define OCR__EXP_P0 1.9875691500e-4f
#define OCR__EXP_P1 1.3981999507e-3f
#define OCR__EXP_P2 8.3334519073e-3f
#define OCR__EXP_P3 4.1665795894e-2f
#define OCR__EXP_P4 1.6666665459e-1f
#define OCR__EXP_P5 5.0000001201e-1f
#define OCR__TANH_SMALL 0.625f
#define OCR__TANH_P0 -5.70498872745e-3f
#define OCR__TANH_P1 2.06390887954e-2f
#define OCR__TANH_P2 -5.37397155531e-2f
#define OCR__TANH_P3 1.33314422036e-1f
#define OCR__TANH_P4 -3.33332819422e-1f

static float ocr__gate_exp(float x) {      /* e^x for x <= 0 */
    float n, r, p;
    union { float f; int32_t i; } two_n;
    if (x != x) return x;
    if (x < -87.0f) x = -87.0f;
    n = floorf(x * OCR__EXP_LOG2E + 0.5f);
    r = x - n * OCR__EXP_LN2_HI;
    r = r - n * OCR__EXP_LN2_LO;
    p = ((((OCR__EXP_P0 * r + OCR__EXP_P1) * r + OCR__EXP_P2) * r + OCR__EXP_P3) * r + OCR__EXP_P4) * r + OCR__EXP_P5;
    p = p * (r * r) + r + 1.0f;
    two_n.i = ((int32_t)n + 127) * (1 << 23);
    return p * two_n.f;
}
static float ocr__gate_sigmoid(float a) {
    float z = ocr__gate_exp(-fabsf(a));
    return a >= 0.0f ? 1.0f / (1.0f + z) : z / (1.0f + z);
}
static float ocr__gate_tanh(float a) {
    float b = fabsf(a), z, t;
    if (b < OCR__TANH_SMALL) {
        float q = a * a;
        return ((((OCR__TANH_P0 * q + OCR__TANH_P1) * q + OCR__TANH_P2) * q + OCR__TANH_P3) * q + OCR__TANH_P4) * q * a + a;
    }
    z = ocr__gate_exp(-2.0f * b);
    t = (1.0f - z) / (1.0f + z);
    return a < 0.0f ? -t : t;
}

/* 2: AVX-512, 1: AVX2 with FMA, 0: portable; the GEMM's choice (OCR_CPU_KERNEL=avx2 stands in for an AVX2 CPU) */
static int ocr__lstm_simd(ocr_ctx *ctx) {
    ocr__ukernel uk = ocr__pick_ukernel(ctx);
    return uk.mr == 8 && uk.nr == 48 ? 2 : uk.nr == 16 && uk.mr == 6 && uk.fn != ocr__ukernel_portable ? 1 : 0;
}

#ifdef OCR__HAVE_AVX2
__attribute__((target("avx512f")))
static __m512 ocr__gate_exp16(__m512 x) {
    __m512 n, r, p;
    x = _mm512_max_ps(_mm512_set1_ps(-87.0f), x);   /* max returns its second operand for a NaN: NaN stays */
    n = _mm512_roundscale_ps(_mm512_fmadd_ps(x, _mm512_set1_ps(OCR__EXP_LOG2E), _mm512_set1_ps(0.5f)), _MM_FROUND_TO_NEG_INF | _MM_FROUND_NO_EXC);
    r = _mm512_fnmadd_ps(n, _mm512_set1_ps(OCR__EXP_LN2_HI), x);
    r = _mm512_fnmadd_ps(n, _mm512_set1_ps(OCR__EXP_LN2_LO), r);
    p = _mm512_fmadd_ps(_mm512_set1_ps(OCR__EXP_P0), r, _mm512_set1_ps(OCR__EXP_P1));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(OCR__EXP_P2));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(OCR__EXP_P3));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(OCR__EXP_P4));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(OCR__EXP_P5));
    p = _mm512_add_ps(_mm512_fmadd_ps(p, _mm512_mul_ps(r, r), r), _mm512_set1_ps(1.0f));
    return _mm512_mul_ps(p, _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_add_epi32(_mm512_cvtps_epi32(n), _mm512_set1_epi32(127)), 23)));
}
__attribute__((target("avx512f")))
static __m512 ocr__gate_sigmoid16(__m512 a) {
    __m512 z = ocr__gate_exp16(_mm512_sub_ps(_mm512_setzero_ps(), _mm512_abs_ps(a))), d = _mm512_add_ps(_mm512_set1_ps(1.0f), z);
    __mmask16 neg = _mm512_cmp_ps_mask(a, _mm512_setzero_ps(), _CMP_NGE_UQ);   /* a < 0 or NaN: z / (1 + z) */
    return _mm512_div_ps(_mm512_mask_blend_ps(neg, _mm512_set1_ps(1.0f), z), d);
}
__attribute__((target("avx512f")))
static __m512 ocr__gate_tanh16(__m512 a) {
    __m512 b = _mm512_abs_ps(a), q = _mm512_mul_ps(a, a), z, t, p;
    __mmask16 small = _mm512_cmp_ps_mask(b, _mm512_set1_ps(OCR__TANH_SMALL), _CMP_LT_OQ);
    p = _mm512_fmadd_ps(_mm512_set1_ps(OCR__TANH_P0), q, _mm512_set1_ps(OCR__TANH_P1));
    p = _mm512_fmadd_ps(p, q, _mm512_set1_ps(OCR__TANH_P2));
    p = _mm512_fmadd_ps(p, q, _mm512_set1_ps(OCR__TANH_P3));
    p = _mm512_fmadd_ps(p, q, _mm512_set1_ps(OCR__TANH_P4));
    p = _mm512_fmadd_ps(_mm512_mul_ps(p, q), a, a);
    z = ocr__gate_exp16(_mm512_mul_ps(_mm512_set1_ps(-2.0f), b));
    t = _mm512_div_ps(_mm512_sub_ps(_mm512_set1_ps(1.0f), z), _mm512_add_ps(_mm512_set1_ps(1.0f), z));
    t = _mm512_castsi512_ps(_mm512_or_si512(_mm512_castps_si512(t), _mm512_and_si512(_mm512_castps_si512(a), _mm512_set1_epi32((int)0x80000000u))));
    return _mm512_mask_blend_ps(small, t, p);
}

__attribute__((target("avx2,fma")))
static __m256 ocr__gate_exp8(__m256 x) {
    __m256 n, r, p;
    x = _mm256_max_ps(_mm256_set1_ps(-87.0f), x);
    n = _mm256_floor_ps(_mm256_fmadd_ps(x, _mm256_set1_ps(OCR__EXP_LOG2E), _mm256_set1_ps(0.5f)));
    r = _mm256_fnmadd_ps(n, _mm256_set1_ps(OCR__EXP_LN2_HI), x);
    r = _mm256_fnmadd_ps(n, _mm256_set1_ps(OCR__EXP_LN2_LO), r);
    p = _mm256_fmadd_ps(_mm256_set1_ps(OCR__EXP_P0), r, _mm256_set1_ps(OCR__EXP_P1));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(OCR__EXP_P2));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(OCR__EXP_P3));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(OCR__EXP_P4));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(OCR__EXP_P5));
    p = _mm256_add_ps(_mm256_fmadd_ps(p, _mm256_mul_ps(r, r), r), _mm256_set1_ps(1.0f));
    return _mm256_mul_ps(p, _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)), 23)));
}
__attribute__((target("avx2,fma")))
static __m256 ocr__gate_sigmoid8(__m256 a) {
    __m256 sign = _mm256_set1_ps(-0.0f), z = ocr__gate_exp8(_mm256_or_ps(a, sign)), d = _mm256_add_ps(_mm256_set1_ps(1.0f), z);
    __m256 neg = _mm256_cmp_ps(a, _mm256_setzero_ps(), _CMP_NGE_UQ);
    return _mm256_div_ps(_mm256_blendv_ps(_mm256_set1_ps(1.0f), z, neg), d);
}
__attribute__((target("avx2,fma")))
static __m256 ocr__gate_tanh8(__m256 a) {
    __m256 sign = _mm256_set1_ps(-0.0f), b = _mm256_andnot_ps(sign, a), q = _mm256_mul_ps(a, a), z, t, p;
    __m256 small = _mm256_cmp_ps(b, _mm256_set1_ps(OCR__TANH_SMALL), _CMP_LT_OQ);
    p = _mm256_fmadd_ps(_mm256_set1_ps(OCR__TANH_P0), q, _mm256_set1_ps(OCR__TANH_P1));
    p = _mm256_fmadd_ps(p, q, _mm256_set1_ps(OCR__TANH_P2));
    p = _mm256_fmadd_ps(p, q, _mm256_set1_ps(OCR__TANH_P3));
    p = _mm256_fmadd_ps(p, q, _mm256_set1_ps(OCR__TANH_P4));
    p = _mm256_fmadd_ps(_mm256_mul_ps(p, q), a, a);
    z = ocr__gate_exp8(_mm256_mul_ps(_mm256_set1_ps(-2.0f), b));
    t = _mm256_div_ps(_mm256_sub_ps(_mm256_set1_ps(1.0f), z), _mm256_add_ps(_mm256_set1_ps(1.0f), z));
    t = _mm256_or_ps(t, _mm256_and_ps(a, sign));
    return _mm256_blendv_ps(t, p, small);
}

/* One row's gates, k in [0, H) from 16 or 8 at a time; returns where the portable loop goes on. */
#define OCR__LSTM_GATES_BODY(V, W, load, store, set1, add, mul, sig, tanh_)                                          \
    for (; k + W <= H; k += W) {                                                                                      \
        V ai = load(a + k), af = load(a + H + k), ag = load(a + 2 * H + k), ao = load(a + 3 * H + k), gi, gf, gg, go, c; \
        if (b_ih) { ai = add(ai, load(b_ih + k)); af = add(af, load(b_ih + H + k)); ag = add(ag, load(b_ih + 2 * H + k)); ao = add(ao, load(b_ih + 3 * H + k)); } \
        if (b_hh) { ai = add(ai, load(b_hh + k)); af = add(af, load(b_hh + H + k)); ag = add(ag, load(b_hh + 2 * H + k)); ao = add(ao, load(b_hh + 3 * H + k)); } \
        gi = sig(ai); gf = sig(af); gg = tanh_(ag); go = sig(ao);                                                     \
        c = cp ? add(mul(gf, load(cp + k)), mul(gi, gg)) : add(set1(0.0f), mul(gi, gg));                              \
        store(a + k, gi); store(a + H + k, gf); store(a + 2 * H + k, gg); store(a + 3 * H + k, go); store(a + 4 * H + k, c); \
        store(h + k, mul(go, tanh_(c)));                                                                              \
    }
__attribute__((target("avx512f")))
static int64_t ocr__lstm_gates_avx512(float *a, const float *cp, const float *b_ih, const float *b_hh, float *h, int64_t H) {
    int64_t k = 0;
    OCR__LSTM_GATES_BODY(__m512, 16, _mm512_loadu_ps, _mm512_storeu_ps, _mm512_set1_ps, _mm512_add_ps, _mm512_mul_ps, ocr__gate_sigmoid16,
                         ocr__gate_tanh16)
    return k;
}
__attribute__((target("avx2,fma")))
static int64_t ocr__lstm_gates_avx2(float *a, const float *cp, const float *b_ih, const float *b_hh, float *h, int64_t H) {
    int64_t k = 0;
    OCR__LSTM_GATES_BODY(__m256, 8, _mm256_loadu_ps, _mm256_storeu_ps, _mm256_set1_ps, _mm256_add_ps, _mm256_mul_ps, ocr__gate_sigmoid8,
                         ocr__gate_tanh8)
    return k;
}
#undef OCR__LSTM_GATES_BODY
__attribute__((target("avx512f")))
static int64_t ocr__gate_tanh_row_avx512(const float *x, float *y, int64_t n) {
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) _mm512_storeu_ps(y + i, ocr__gate_tanh16(_mm512_loadu_ps(x + i)));
    return i;
}
__attribute__((target("avx2,fma")))
static int64_t ocr__gate_tanh_row_avx2(const float *x, float *y, int64_t n) {
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) _mm256_storeu_ps(y + i, ocr__gate_tanh8(_mm256_loadu_ps(x + i)));
    return i;
}
#endif

/* One row of a step: the biases added to the pre-activations in a, the gates activated in place, c into a[4H..] and
   h (from cp, the previous step's c, or 0 at the first step). */
static void ocr__lstm_gates_row(int simd, float *a, const float *cp, const float *b_ih, const float *b_hh, float *h, int64_t H) {
    int64_t k = 0;
#ifdef OCR__HAVE_AVX2
    if (simd == 2) k = ocr__lstm_gates_avx512(a, cp, b_ih, b_hh, h, H);
    else if (simd == 1) k = ocr__lstm_gates_avx2(a, cp, b_ih, b_hh, h, H);
#else
    (void)simd;
#endif
    for (; k < H; k++) {
        float ai = a[k], af = a[H + k], ag = a[2 * H + k], ao = a[3 * H + k], gi, gf, gg, go, c;
        if (b_ih) { ai += b_ih[k]; af += b_ih[H + k]; ag += b_ih[2 * H + k]; ao += b_ih[3 * H + k]; }
        if (b_hh) { ai += b_hh[k]; af += b_hh[H + k]; ag += b_hh[2 * H + k]; ao += b_hh[3 * H + k]; }
        gi = ocr__gate_sigmoid(ai); gf = ocr__gate_sigmoid(af); gg = ocr__gate_tanh(ag); go = ocr__gate_sigmoid(ao);
        c = (cp ? gf * cp[k] : 0.0f) + gi * gg;
        a[k] = gi; a[H + k] = gf; a[2 * H + k] = gg; a[3 * H + k] = go; a[4 * H + k] = c;
        h[k] = go * ocr__gate_tanh(c);
    }
}

static void ocr__gate_tanh_row(int simd, const float *x, float *y, int64_t n) {
    int64_t i = 0;
#ifdef OCR__HAVE_AVX2
    if (simd == 2) i = ocr__gate_tanh_row_avx512(x, y, n);
    else if (simd == 1) i = ocr__gate_tanh_row_avx2(x, y, n);
#else
    (void)simd;
#endif
    for (; i < n; i++) y[i] = ocr__gate_tanh(x[i]);
}

static void ocr__lstm_fwd_part(void *arg, int64_t begin, int64_t end, int tid) {
    const ocr__lstm_fwd_job *j = (const ocr__lstm_fwd_job *)arg;
    int64_t n, H = j->H;
    (void)tid;
    for (n = begin; n < end; n++) {
        float *a = j->sv + n * 5 * H, *h = j->y + n * j->ldy;
        const float *cp = j->c_prev ? j->c_prev + n * 5 * H + 4 * H : NULL;
        if (j->len && j->t >= j->len[n]) {
            memset(a, 0, (size_t)(5 * H) * sizeof(float));
            memset(h, 0, (size_t)H * sizeof(float));
            continue;
        }
        ocr__lstm_gates_row(j->simd, a, cp, j->b_ih, j->b_hh, h, H);
    }
}

/* Rows per dispatch so that a piece has some 1K gate values. Set when the gates were libm's (tens of nanoseconds a
   value: with 8K, train_rec's LSTM ran its gates on one thread while the other spun and its forward took half as long
   again); the vector gates cost a tenth of that, and a batch of 32 rows is still shared out (not re-tuned). */
static int64_t ocr__lstm_min_rows(int64_t H) { return (1024 + 4 * H - 1) / (4 * H); }

/* One direction on the fast path: every step's input projection in one GEMM, then per step the recurrent GEMM
   (h_prev W_hh^T added to the step's rows) and the pointwise part. */
static int ocr__lstm_forward_dir(ocr_ctx *ctx, const ocr__lstm_dims *dm, int d, const float *x, const float *w_ih, const float *w_hh,
                                 const float *b_ih, const float *b_hh, const int32_t *len, float *y, float *sv) {
    int64_t T = dm->T, N = dm->N, H = dm->H, DH = dm->D * H, s;
    int rc;
    if ((rc = ocr_gemm(ctx, 0, 1, T * N, 4 * H, dm->I, 1.0f, x, dm->I, w_ih, dm->I, 0.0f, sv, 5 * H))) return rc;
    for (s = 0; s < T; s++) {
        int64_t t = d ? T - 1 - s : s, tp = d ? t + 1 : t - 1;
        ocr__lstm_fwd_job j;
        if (s > 0 &&
            (rc = ocr_gemm(ctx, 0, 1, N, 4 * H, H, 1.0f, y + tp * N * DH + d * H, DH, w_hh, H, 1.0f, sv + t * N * 5 * H, 5 * H)))
            return rc;
        j.sv = sv + t * N * 5 * H; j.c_prev = s > 0 ? sv + tp * N * 5 * H : NULL;
        j.b_ih = b_ih; j.b_hh = b_hh; j.y = y + t * N * DH + d * H; j.len = len; j.H = H; j.ldy = DH; j.t = t;
        j.simd = ocr__lstm_simd(ctx);
        ocr_parallel_for(ctx, N, ocr__lstm_min_rows(H), ocr__lstm_fwd_part, &j);
    }
    return OCR_OK;
}

OCRDEF int ocr_nn_lstm_forward(ocr_ctx *ctx, const ocr_tensor *x, const ocr_lstm_weights *w, const ocr_tensor *lengths, ocr_tensor *y,
                               ocr_tensor *saved) {
    const char *fn = "ocr_nn_lstm_forward";
    ocr__lstm_dims dm;
    float *scratch = NULL;
    const int32_t *len = NULL;
    int rc, d;
    if ((rc = ocr_check_f32(ctx, fn, x)) || (rc = ocr__lstm_check_shapes(ctx, fn, x->shape, w, &dm))) return rc;
    if (lengths) {
        int64_t n;
        if ((rc = ocr_check_dtype(ctx, fn, lengths, OCR_I32)) || (rc = ocr_check_device(ctx, fn, lengths, OCR_DEVICE_CPU)) ||
            (rc = ocr_check_shape(ctx, fn, lengths, ocr_shape1(dm.N))))
            return rc;
        len = (const int32_t *)lengths->data;
        for (n = 0; n < dm.N; n++)
            if (len[n] < 1 || len[n] > dm.T)
                return ocr_error(ctx, OCR_EINVAL, "%s: tensor '%s': lengths[%lld] = %d, must be in [1, T = %lld]", fn, lengths->name,
                                 (long long)n, (int)len[n], (long long)dm.T);
    }
    if (!y) return ocr_error(ctx, OCR_EINVAL, "%s: output y is NULL", fn);
    if ((rc = ocr_check_f32(ctx, fn, y)) || (rc = ocr_check_shape(ctx, fn, y, ocr_shape3(dm.T, dm.N, dm.D * dm.H)))) return rc;
    if (saved && ((rc = ocr_check_f32(ctx, fn, saved)) || (rc = ocr_check_shape(ctx, fn, saved, ocr_shape4(dm.D, dm.T, dm.N, 5 * dm.H)))))
        return rc;
    if ((rc = ocr__seq_refuse_overlap(ctx, fn, y, x)) || (rc = ocr__seq_refuse_overlap(ctx, fn, saved, x)) ||
        (rc = ocr__seq_refuse_overlap(ctx, fn, saved, y)))
        return rc;
#ifdef OCR_CUDA
    if (ctx->device == OCR_DEVICE_CUDA)
        return ocr__cuda_done(ctx, ocr_cuda_lstm_forward(ctx, x, w, lengths, y, saved), fn, "forward", y, saved, NULL);
#endif
    if ((rc = ocr__seq_cpu_only(ctx, fn))) return rc;
    if (!saved) {   /* inference: one direction's gates and cells at a time */
        size_t bytes;
        if (!ocr_size_mul((size_t)(dm.T * dm.N), (size_t)(5 * dm.H) * sizeof(float), &bytes))
            return ocr_error(ctx, OCR_EOVERFLOW, "%s: T*N*5H too large", fn);
        if (!(scratch = (float *)ocr_ctx_scratch(ctx, OCR_SCRATCH_OP0, bytes))) return ctx->last_status;
    }
    for (d = 0; d < dm.D; d++) {
        float *sv = saved ? (float *)saved->data + (int64_t)d * dm.T * dm.N * 5 * dm.H : scratch;
        const float *w_ih = (const float *)w->w_ih[d]->data, *w_hh = (const float *)w->w_hh[d]->data;
        const float *b_ih = ocr__f32_or_null(w->b_ih[d]), *b_hh = ocr__f32_or_null(w->b_hh[d]);
        if (ocr__use_ref(ctx))
            ocr__ref_lstm_forward((const float *)x->data, dm.T, dm.N, dm.I, dm.H, dm.D, d, w_ih, w_hh, b_ih, b_hh, len, (float *)y->data, sv);
        else if ((rc = ocr__lstm_forward_dir(ctx, &dm, d, (const float *)x->data, w_ih, w_hh, b_ih, b_hh, len, (float *)y->data, sv)))
            return rc;
    }
    if ((rc = ocr__watch(ctx, fn, "forward", y))) return rc;
    return ocr__watch(ctx, fn, "forward", saved);
}

/* One step's pointwise backward on rows [begin, end): da from dh (the recurrent part, in place) + dy and the carried dc */
typedef struct {
    const float *sv, *c_prev;       /* this step's and the previous step's saved rows (c_prev NULL at the first step) */
    const float *dy, *dh;           /* dy: this step's rows, this direction's columns, stride ldy; dh [N, H] */
    float *dc, *da;                 /* dc [N, H] carried in place; da: this step's rows [N, 4H] */
    int64_t H, ldy;
    int simd;                       /* ocr__lstm_simd */
} ocr__lstm_bwd_job;

static void ocr__lstm_bwd_part(void *arg, int64_t begin, int64_t end, int tid) {
    const ocr__lstm_bwd_job *j = (const ocr__lstm_bwd_job *)arg;
    int64_t n, k, k0, H = j->H;
    float tcs[256];                 /* tanh(c) of a piece of the row, from the forward's activation */
    (void)tid;
    for (n = begin; n < end; n++) {
        const float *g = j->sv + n * 5 * H, *cp = j->c_prev ? j->c_prev + n * 5 * H + 4 * H : NULL, *dy = j->dy + n * j->ldy;
        const float *dh = j->dh ? j->dh + n * H : NULL;
        float *dc = j->dc + n * H, *da = j->da + n * 4 * H;
        for (k0 = 0, k = 0; k < H; k++) {
            float gi = g[k], gf = g[H + k], gg = g[2 * H + k], go = g[3 * H + k], tc;
            if (k == 0 || k == k0 + 256) {
                k0 = k;
                ocr__gate_tanh_row(j->simd, g + 4 * H + k0, tcs, H - k0 < 256 ? H - k0 : 256);
            }
            tc = tcs[k - k0];
            float dht = (dh ? dh[k] : 0.0f) + dy[k], dct = dc[k] + dht * go * (1.0f - tc * tc);
            da[k] = dct * gg * gi * (1.0f - gi);
            da[H + k] = cp ? dct * cp[k] * gf * (1.0f - gf) : 0.0f;
            da[2 * H + k] = dct * gi * (1.0f - gg * gg);
            da[3 * H + k] = dht * tc * go * (1.0f - go);
            dc[k] = dct * gf;
        }
    }
}

/* db += the column sums of da [rows, 4H] over columns [begin, end), in double, the same order on any thread count */
typedef struct { const float *da; int64_t rows, cols; float *db_ih, *db_hh; } ocr__lstm_bias_job;
static void ocr__lstm_bias_part(void *arg, int64_t begin, int64_t end, int tid) {
    const ocr__lstm_bias_job *j = (const ocr__lstm_bias_job *)arg;
    int64_t r, c;
    (void)tid;
    for (c = begin; c < end; c++) {
        double s = 0.0;
        for (r = 0; r < j->rows; r++) s += j->da[r * j->cols + c];
        if (j->db_ih) j->db_ih[c] += (float)s;
        if (j->db_hh) j->db_hh[c] += (float)s;
    }
}

static int ocr__lstm_backward_dir(ocr_ctx *ctx, const ocr__lstm_dims *dm, int d, const float *x, const float *w_ih, const float *w_hh,
                                  const float *y, const float *sv, const float *dy, float *dx, float *dw_ih, float *dw_hh, float *db_ih,
                                  float *db_hh, float *da, float *dh, float *dc) {
    int64_t T = dm->T, N = dm->N, I = dm->I, H = dm->H, DH = dm->D * H, s;
    int rc;
    memset(dc, 0, (size_t)(N * H) * sizeof(float));
    for (s = T - 1; s >= 0; s--) {
        int64_t t = d ? T - 1 - s : s, tp = d ? t + 1 : t - 1;
        ocr__lstm_bwd_job j;
        j.sv = sv + t * N * 5 * H; j.c_prev = s > 0 ? sv + tp * N * 5 * H : NULL;
        j.dy = dy + t * N * DH + d * H; j.dh = s < T - 1 ? dh : NULL; j.dc = dc; j.da = da + t * N * 4 * H;
        j.H = H; j.ldy = DH; j.simd = ocr__lstm_simd(ctx);
        ocr_parallel_for(ctx, N, ocr__lstm_min_rows(H), ocr__lstm_bwd_part, &j);
        if (s > 0 && (rc = ocr_gemm(ctx, 0, 0, N, H, 4 * H, 1.0f, j.da, 4 * H, w_hh, H, 0.0f, dh, H))) return rc;
    }
    if (dx && (rc = ocr_gemm(ctx, 0, 0, T * N, I, 4 * H, 1.0f, da, 4 * H, w_ih, I, 1.0f, dx, I))) return rc;
    if (dw_ih && (rc = ocr_gemm(ctx, 1, 0, 4 * H, I, T * N, 1.0f, da, 4 * H, x, I, 1.0f, dw_ih, I))) return rc;
    /* h_prev of step t is y[t-1] (forward) or y[t+1] (reverse): the da rows of steps 1.. against y shifted by one step */
    if (dw_hh && T > 1 &&
        (rc = ocr_gemm(ctx, 1, 0, 4 * H, H, (T - 1) * N, 1.0f, d ? da : da + N * 4 * H, 4 * H, d ? y + N * DH + d * H : y + d * H, DH,
                       1.0f, dw_hh, H)))
        return rc;
    if (db_ih || db_hh) {
        ocr__lstm_bias_job b;
        b.da = da; b.rows = T * N; b.cols = 4 * H; b.db_ih = db_ih; b.db_hh = db_hh;
        ocr_parallel_for(ctx, 4 * H, 16, ocr__lstm_bias_part, &b);
    }
    return OCR_OK;
}

/* The CPU's backward through time (reference or fast path); scratch da [T, N, 4H], dh and dc [N, H] */
static int ocr__lstm_backward_cpu(ocr_ctx *ctx, const ocr__lstm_dims *dims, const ocr_tensor *x, const ocr_lstm_weights *w, const ocr_tensor *y,
                                  const ocr_tensor *saved, const ocr_tensor *dy, ocr_tensor *dx, const ocr_lstm_grads *g) {
    const char *fn = "ocr_nn_lstm_backward";
    ocr__lstm_dims dm = *dims;
    float *da, *dh, *dc;
    size_t da_bytes, dhc_bytes;
    int rc, d;
    if ((rc = ocr__seq_cpu_only(ctx, fn))) return rc;
    if (!ocr_size_mul((size_t)(dm.T * dm.N), (size_t)(4 * dm.H) * sizeof(float), &da_bytes) ||
        !ocr_size_mul((size_t)(dm.N * dm.H), 2 * sizeof(float), &dhc_bytes))
        return ocr_error(ctx, OCR_EOVERFLOW, "%s: T*N*4H too large", fn);
    if (!(da = (float *)ocr_ctx_scratch(ctx, OCR_SCRATCH_OP0, da_bytes)) || !(dh = (float *)ocr_ctx_scratch(ctx, OCR_SCRATCH_OP1, dhc_bytes)))
        return ctx->last_status;
    dc = dh + dm.N * dm.H;
    for (d = 0; d < dm.D; d++) {
        const float *sv = (const float *)saved->data + (int64_t)d * dm.T * dm.N * 5 * dm.H;
        const float *w_ih = (const float *)w->w_ih[d]->data, *w_hh = (const float *)w->w_hh[d]->data;
        float *dw_ih = ocr__f32_mut_or_null(g->w_ih[d]), *dw_hh = ocr__f32_mut_or_null(g->w_hh[d]);
        float *db_ih = ocr__f32_mut_or_null(g->b_ih[d]), *db_hh = ocr__f32_mut_or_null(g->b_hh[d]);
        if (ocr__use_ref(ctx))
            ocr__ref_lstm_backward((const float *)x->data, dm.T, dm.N, dm.I, dm.H, dm.D, d, w_ih, w_hh, (const float *)y->data, sv,
                                   (const float *)dy->data, ocr__f32_mut_or_null(dx), dw_ih, dw_hh, db_ih, db_hh, da, dh, dc);
        else if ((rc = ocr__lstm_backward_dir(ctx, &dm, d, (const float *)x->data, w_ih, w_hh, (const float *)y->data, sv,
                                              (const float *)dy->data, ocr__f32_mut_or_null(dx), dw_ih, dw_hh, db_ih, db_hh, da, dh, dc)))
            return rc;
    }
    return OCR_OK;
}

OCRDEF int ocr_nn_lstm_backward(ocr_ctx *ctx, const ocr_tensor *x, const ocr_lstm_weights *w, const ocr_tensor *y,
                                const ocr_tensor *saved, const ocr_tensor *dy, ocr_tensor *dx, const ocr_lstm_grads *g) {
    const char *fn = "ocr_nn_lstm_backward";
    static const ocr_lstm_grads none = {{NULL, NULL}, {NULL, NULL}, {NULL, NULL}, {NULL, NULL}};
    ocr__lstm_dims dm;
    int rc, d, i;
    if (!g) g = &none;
    if ((rc = ocr_check_f32(ctx, fn, x)) || (rc = ocr__lstm_check_shapes(ctx, fn, x->shape, w, &dm))) return rc;
    if (!y || !saved || !dy) return ocr_error(ctx, OCR_EINVAL, "%s: y, saved and dy are required (%s is NULL)", fn, !y ? "y" : !saved ? "saved" : "dy");
    if ((rc = ocr_check_f32(ctx, fn, y)) || (rc = ocr_check_shape(ctx, fn, y, ocr_shape3(dm.T, dm.N, dm.D * dm.H))) ||
        (rc = ocr_check_f32(ctx, fn, dy)) || (rc = ocr_check_shape(ctx, fn, dy, y->shape)) ||
        (rc = ocr_check_f32(ctx, fn, saved)) || (rc = ocr_check_shape(ctx, fn, saved, ocr_shape4(dm.D, dm.T, dm.N, 5 * dm.H))))
        return rc;
    if (dx) {
        const ocr_tensor *other[4];
        other[0] = x; other[1] = y; other[2] = saved; other[3] = dy;
        if ((rc = ocr_check_f32(ctx, fn, dx)) || (rc = ocr_check_shape(ctx, fn, dx, x->shape))) return rc;
        for (i = 0; i < 4; i++) if ((rc = ocr__seq_refuse_overlap(ctx, fn, dx, other[i]))) return rc;
    }
    for (d = 0; d < dm.D; d++) {
        ocr_tensor *gr[4];
        const ocr_tensor *wt[4];
        gr[0] = g->w_ih[d]; gr[1] = g->w_hh[d]; gr[2] = g->b_ih[d]; gr[3] = g->b_hh[d];
        wt[0] = w->w_ih[d]; wt[1] = w->w_hh[d]; wt[2] = w->b_ih[d]; wt[3] = w->b_hh[d];
        for (i = 0; i < 4; i++) {
            if (!gr[i]) continue;
            if (i >= 2 && !wt[i])
                return ocr_error(ctx, OCR_EINVAL, "%s: gradient '%s' given for a bias the weights do not have (direction %d)", fn,
                                 gr[i]->name, d);
            if ((rc = ocr_check_f32(ctx, fn, gr[i])) || (rc = ocr_check_shape(ctx, fn, gr[i], wt[i]->shape)) ||
                (rc = ocr__seq_refuse_overlap(ctx, fn, gr[i], wt[i])))
                return rc;
        }
    }
#ifdef OCR_CUDA
    if (ctx->device == OCR_DEVICE_CUDA) rc = ocr_cuda_lstm_backward(ctx, x, w, y, saved, dy, dx, g);
    else
#endif
        rc = ocr__lstm_backward_cpu(ctx, &dm, x, w, y, saved, dy, dx, g);
    if (rc) return rc;
    if ((rc = ocr__watch(ctx, fn, "backward", dx))) return rc;
    for (d = 0; d < dm.D; d++)
        if ((rc = ocr__watch(ctx, fn, "backward", g->w_ih[d])) || (rc = ocr__watch(ctx, fn, "backward", g->w_hh[d])) ||
            (rc = ocr__watch(ctx, fn, "backward", g->b_ih[d])) || (rc = ocr__watch(ctx, fn, "backward", g->b_hh[d])))
            return rc;
    return OCR_OK;
}

OCRDEF int ocr_lstm_params_add(ocr_ctx *ctx, ocr_params *P, const char *prefix, int layer, int64_t input, int64_t hidden,
                               int directions, int *index) {
    static const char *const kind[4] = {"weight_ih", "weight_hh", "bias_ih", "bias_hh"};
    char name[OCR_NAME_MAX];
    int d, i, rc;
    if (directions != 1 && directions != 2)
        return ocr_error(ctx, OCR_EINVAL, "ocr_lstm_params_add: directions = %d, must be 1 or 2", directions);
    if (input < 1 || hidden < 1 || layer < 0)
        return ocr_error(ctx, OCR_EINVAL, "ocr_lstm_params_add: input %lld, hidden %lld, layer %d (sizes must be >= 1)",
                         (long long)input, (long long)hidden, layer);
    for (d = 0; d < directions; d++)
        for (i = 0; i < 4; i++) {
            ocr_shape s = i == 0 ? ocr_shape2(4 * hidden, input) : i == 1 ? ocr_shape2(4 * hidden, hidden) : ocr_shape1(4 * hidden);
            int n = snprintf(name, sizeof name, "%s%s_l%d%s", prefix ? prefix : "", kind[i], layer, d ? "_reverse" : "");
            if (n < 0 || (size_t)n >= sizeof name)
                return ocr_error(ctx, OCR_EINVAL, "ocr_lstm_params_add: prefix '%s' makes a name longer than %d bytes", prefix,
                                 OCR_NAME_MAX - 1);
            if ((rc = ocr_params_add(ctx, P, name, s, 1, index ? &index[d * 4 + i] : NULL))) return rc;
        }
    return OCR_OK;
}

/* log_softmax on rows [begin, end): the maximum, the sum of exp in double, then y */
typedef struct { const float *x, *dy; float *y; int64_t C; } ocr__lsm_job;
static void ocr__lsm_fwd_part(void *arg, int64_t begin, int64_t end, int tid) {
    const ocr__lsm_job *j = (const ocr__lsm_job *)arg;
    int64_t r, c, C = j->C;
    (void)tid;
    for (r = begin; r < end; r++) {
        const float *x = j->x + r * C;
        float *y = j->y + r * C, m = x[0], lse;
        double s = 0.0;
        for (c = 1; c < C; c++) m = x[c] > m ? x[c] : m;
        for (c = 0; c < C; c++) s += expf(x[c] - m);
        lse = m + (float)log(s);
        for (c = 0; c < C; c++) {
            float v = x[c] - lse;
            y[c] = v < -FLT_MAX ? -FLT_MAX : v;
        }
    }
}
static void ocr__lsm_bwd_part(void *arg, int64_t begin, int64_t end, int tid) {
    const ocr__lsm_job *j = (const ocr__lsm_job *)arg;
    int64_t r, c, C = j->C;
    (void)tid;
    for (r = begin; r < end; r++) {
        const float *y = j->x + r * C, *dy = j->dy + r * C;
        float *dx = j->y + r * C, sf;
        double s = 0.0;
        for (c = 0; c < C; c++) s += dy[c];
        sf = (float)s;
        for (c = 0; c < C; c++) dx[c] += dy[c] - expf(y[c]) * sf;
    }
}

static int ocr__lsm_rows(ocr_ctx *ctx, const char *fn, const ocr_tensor *t, int64_t *rows, int64_t *C) {
    char d[200];
    *C = t->shape.ndim ? t->shape.dim[t->shape.ndim - 1] : 1;
    if (*C < 1) return ocr_error(ctx, OCR_ESHAPE, "%s: tensor %s has no classes along its last axis", fn, ocr_tensor_describe(t, d, sizeof d));
    *rows = ocr_tensor_numel(t) / *C;
    return OCR_OK;
}

OCRDEF int ocr_nn_log_softmax_forward(ocr_ctx *ctx, const ocr_tensor *x, ocr_tensor *y) {
    const char *fn = "ocr_nn_log_softmax_forward";
    int64_t rows, C;
    int rc;
    if ((rc = ocr__check_pair(ctx, fn, x, y)) || (rc = ocr__lsm_rows(ctx, fn, x, &rows, &C))) return rc;
    if (x->data != y->data && (rc = ocr__seq_refuse_overlap(ctx, fn, y, x))) return rc;
#ifdef OCR_CUDA
    if (ctx->device == OCR_DEVICE_CUDA) return ocr__cuda_done(ctx, ocr_cuda_log_softmax_forward(ctx, x, y), fn, "forward", y, NULL, NULL);
#endif
    if ((rc = ocr__seq_cpu_only(ctx, fn))) return rc;
    if (ocr__use_ref(ctx)) ocr__ref_log_softmax_forward((const float *)x->data, (float *)y->data, rows, C);
    else {
        ocr__lsm_job j;
        j.x = (const float *)x->data; j.dy = NULL; j.y = (float *)y->data; j.C = C;
        ocr_parallel_for(ctx, rows, (8192 + C - 1) / C, ocr__lsm_fwd_part, &j);
    }
    return ocr__watch(ctx, fn, "forward", y);
}

OCRDEF int ocr_nn_log_softmax_backward(ocr_ctx *ctx, const ocr_tensor *y, const ocr_tensor *dy, ocr_tensor *dx) {
    const char *fn = "ocr_nn_log_softmax_backward";
    int64_t rows, C;
    int rc;
    if ((rc = ocr__check_pair(ctx, fn, y, dy)) || (rc = ocr__check_pair(ctx, fn, y, dx)) || (rc = ocr__lsm_rows(ctx, fn, y, &rows, &C)))
        return rc;
    if ((rc = ocr__seq_refuse_overlap(ctx, fn, dx, y)) || (rc = ocr__seq_refuse_overlap(ctx, fn, dx, dy))) return rc;
#ifdef OCR_CUDA
    if (ctx->device == OCR_DEVICE_CUDA) return ocr__cuda_done(ctx, ocr_cuda_log_softmax_backward(ctx, y, dy, dx), fn, "backward", dx, NULL, NULL);
#endif
    if ((rc = ocr__seq_cpu_only(ctx, fn))) return rc;
    if (ocr__use_ref(ctx)) ocr__ref_log_softmax_backward((const float *)y->data, (const float *)dy->data, (float *)dx->data, rows, C);
    else {
        ocr__lsm_job j;
        j.x = (const float *)y->data; j.dy = (const float *)dy->data; j.y = (float *)dx->data; j.C = C;
        ocr_parallel_for(ctx, rows, (8192 + C - 1) / C, ocr__lsm_bwd_part, &j);
    }
    return ocr__watch(ctx, fn, "backward", dx);
}

typedef struct { const float *x; float *y; int32_t *argmax; int64_t H, W, OH, OW; int kh, kw, sh, sw, ph, pw, vector; } ocr__rect_pool_job; /* vector: ocr__ctx_lanes, or 0 */
static void ocr__rect_pool_part(void *arg, int64_t begin, int64_t end, int tid) {
    const ocr__rect_pool_job *j = (const ocr__rect_pool_job *)arg;
    (void)tid;
#ifdef OCR__HAVE_AVX2
    if (j->vector) {
        int64_t plane, oh;
        for (plane = begin; plane < end; plane++)
            for (oh = 0; oh < j->OH; oh++)
                ocr__maxpool_nopad_rows(j->vector, j->x + plane * j->H * j->W, j->W, oh * j->sh, j->kh, j->kw, j->OW,
                                        j->y + (plane * j->OH + oh) * j->OW, j->argmax ? j->argmax + (plane * j->OH + oh) * j->OW : NULL);
        return;
    }
#endif
    ocr__ref_maxpool2d_rect_forward(j->x, begin, end, j->H, j->W, j->kh, j->kw, j->sh, j->sw, j->ph, j->pw, j->y, j->argmax, j->OH,
                                    j->OW);
}

OCRDEF int ocr_nn_maxpool2d_rect_forward(ocr_ctx *ctx, const ocr_tensor *x, int kh, int kw, int sh, int sw, int ph, int pw,
                                         ocr_tensor *y, ocr_tensor *argmax) {
    const char *fn = "ocr_nn_maxpool2d_rect_forward";
    ocr__rect_pool_job j;
    ocr_shape ys;
    char d[200];
    int rc;
    if ((rc = ocr_check_f32(ctx, fn, x)) || (rc = ocr_check_f32(ctx, fn, y))) return rc;
    if (x->shape.ndim != 4) return ocr_error(ctx, OCR_ESHAPE, "%s: input %s must be [N, C, H, W]", fn, ocr_tensor_describe(x, d, sizeof d));
    if (kh < 1 || kw < 1 || sh < 1 || sw < 1 || ph < 0 || pw < 0 || 2 * ph > kh || 2 * pw > kw)
        return ocr_error(ctx, OCR_EINVAL, "%s: kernel %dx%d, stride %dx%d, pad %dx%d (each pad at most half its kernel)", fn, kh, kw,
                         sh, sw, ph, pw);
    if (x->shape.dim[2] + 2 * ph < kh || x->shape.dim[3] + 2 * pw < kw)
        return ocr_error(ctx, OCR_ESHAPE, "%s: input %s is smaller than the %dx%d window", fn, ocr_tensor_describe(x, d, sizeof d), kh, kw);
    if (x->shape.dim[2] * x->shape.dim[3] > INT32_MAX) return ocr_error(ctx, OCR_EOVERFLOW, "%s: plane of '%s' too large", fn, x->name);
    ys = ocr_shape4(x->shape.dim[0], x->shape.dim[1], (x->shape.dim[2] + 2 * ph - kh) / sh + 1, (x->shape.dim[3] + 2 * pw - kw) / sw + 1);
    if ((rc = ocr_check_shape(ctx, fn, y, ys))) return rc;
    if (argmax && ((rc = ocr_check_dtype(ctx, fn, argmax, OCR_I32)) || (rc = ocr_check_shape(ctx, fn, argmax, ys)))) return rc;
    if ((rc = ocr__seq_refuse_overlap(ctx, fn, y, x))) return rc;
#ifdef OCR_CUDA
    if (ctx->device == OCR_DEVICE_CUDA)
        return ocr__cuda_done(ctx, ocr_cuda_maxpool2d_rect_forward(ctx, x, kh, kw, sh, sw, ph, pw, y, argmax), fn, "forward", y, NULL, NULL);
#endif
    if ((rc = ocr__seq_cpu_only(ctx, fn))) return rc;
    j.x = (const float *)x->data; j.y = (float *)y->data; j.argmax = argmax ? (int32_t *)argmax->data : NULL;
    j.H = x->shape.dim[2]; j.W = x->shape.dim[3]; j.OH = ys.dim[2]; j.OW = ys.dim[3];
    j.kh = kh; j.kw = kw; j.sh = sh; j.sw = sw; j.ph = ph; j.pw = pw;
    j.vector = !ocr__use_ref(ctx) && ocr__maxpool_nopad_ok(kw, sw, ph, pw) ? ocr__ctx_lanes(ctx) : 0;
    ocr_parallel_for(ctx, ys.dim[0] * ys.dim[1], 1, ocr__rect_pool_part, &j);
    return ocr__watch(ctx, fn, "forward", y);
}

/* map-to-sequence on samples [begin, end): each thread owns whole samples of x and their rows of y */
typedef struct { float *map, *seq; int64_t N, C, H, W; int backward; } ocr__m2s_job;
static void ocr__m2s_part(void *arg, int64_t begin, int64_t end, int tid) {
    const ocr__m2s_job *j = (const ocr__m2s_job *)arg;
    int64_t n, c, h, w, CH = j->C * j->H;
    (void)tid;
    for (n = begin; n < end; n++)
        for (c = 0; c < j->C; c++)
            for (h = 0; h < j->H; h++) {
                float *xr = j->map + ((n * j->C + c) * j->H + h) * j->W, *yc = j->seq + n * CH + c * j->H + h;
                if (j->backward) for (w = 0; w < j->W; w++) xr[w] += yc[w * j->N * CH];
                else for (w = 0; w < j->W; w++) yc[w * j->N * CH] = xr[w];
            }
}

static int ocr__m2s(ocr_ctx *ctx, const char *fn, const ocr_tensor *map, const ocr_tensor *seq, int backward) {
    char d[200];
    int rc;
    if ((rc = ocr_check_f32(ctx, fn, map)) || (rc = ocr_check_f32(ctx, fn, seq))) return rc;
    if (map->shape.ndim != 4)
        return ocr_error(ctx, OCR_ESHAPE, "%s: map %s must be [N, C, H, W]", fn, ocr_tensor_describe(map, d, sizeof d));
    if ((rc = ocr_check_shape(ctx, fn, seq, ocr_shape3(map->shape.dim[3], map->shape.dim[0], map->shape.dim[1] * map->shape.dim[2]))) ||
        (rc = ocr__seq_refuse_overlap(ctx, fn, backward ? map : seq, backward ? seq : map)))
        return rc;
#ifdef OCR_CUDA
    if (ctx->device == OCR_DEVICE_CUDA) /* the output (map backward, seq forward) is the caller's writable tensor */
        return ocr__cuda_done(ctx, backward ? ocr_cuda_map_to_seq_backward(ctx, seq, (ocr_tensor *)map)
                                            : ocr_cuda_map_to_seq_forward(ctx, map, (ocr_tensor *)seq),
                              fn, backward ? "backward" : "forward", backward ? map : seq, NULL, NULL);
#endif
    if ((rc = ocr__seq_cpu_only(ctx, fn))) return rc;
    if (ocr__use_ref(ctx) && backward) {
        ocr__ref_map_to_seq_backward((const float *)seq->data, (float *)map->data, map->shape.dim[0], map->shape.dim[1], map->shape.dim[2],
                                     map->shape.dim[3]);
    } else if (ocr__use_ref(ctx)) {
        ocr__ref_map_to_seq_forward((const float *)map->data, (float *)seq->data, map->shape.dim[0], map->shape.dim[1], map->shape.dim[2],
                                    map->shape.dim[3]);
    } else {
        ocr__m2s_job j;
        j.map = (float *)map->data; j.seq = (float *)seq->data;
        j.N = map->shape.dim[0]; j.C = map->shape.dim[1]; j.H = map->shape.dim[2]; j.W = map->shape.dim[3]; j.backward = backward;
        ocr_parallel_for(ctx, j.N, 1, ocr__m2s_part, &j);
    }
    return ocr__watch(ctx, fn, backward ? "backward" : "forward", backward ? map : seq);
}
OCRDEF int ocr_nn_map_to_seq_forward(ocr_ctx *ctx, const ocr_tensor *x, ocr_tensor *y) {
    return ocr__m2s(ctx, "ocr_nn_map_to_seq_forward", x, y, 0);
}
OCRDEF int ocr_nn_map_to_seq_backward(ocr_ctx *ctx, const ocr_tensor *dy, ocr_tensor *dx) {
    return ocr__m2s(ctx, "ocr_nn_map_to_seq_backward", dx, dy, 1);
}

/* x [..., I] against w [K, I], b [K] and y [..., K]: the rows R and the sizes, each tensor named when it does not fit */
static int ocr__linear_check(ocr_ctx *ctx, const char *fn, const ocr_tensor *x, const ocr_tensor *w, const ocr_tensor *b,
                             const ocr_tensor *y, int64_t *R, int64_t *I, int64_t *K) {
    char d[200], e[200];
    ocr_shape ys;
    int rc;
    if ((rc = ocr_check_f32(ctx, fn, x)) || (rc = ocr_check_f32(ctx, fn, w)) || (rc = ocr_check_f32(ctx, fn, y))) return rc;
    if (w->shape.ndim != 2 || x->shape.ndim < 1 || x->shape.dim[x->shape.ndim - 1] != w->shape.dim[1])
        return ocr_error(ctx, OCR_ESHAPE, "%s: input %s and weight %s: expected x [..., I] and w [K, I]", fn, ocr_tensor_describe(x, d, sizeof d),
                         ocr_tensor_describe(w, e, sizeof e));
    *I = w->shape.dim[1]; *K = w->shape.dim[0];
    *R = *I ? ocr_tensor_numel(x) / *I : 0;
    ys = x->shape;
    ys.dim[ys.ndim - 1] = *K;
    if ((rc = ocr_check_shape(ctx, fn, y, ys))) return rc;
    if (b && ((rc = ocr_check_f32(ctx, fn, b)) || (rc = ocr_check_shape(ctx, fn, b, ocr_shape1(*K))))) return rc;
    return OCR_OK;
}

OCRDEF int ocr_nn_linear_forward(ocr_ctx *ctx, const ocr_tensor *x, const ocr_tensor *w, const ocr_tensor *b, ocr_tensor *y) {
    const char *fn = "ocr_nn_linear_forward";
    int64_t R, I, K, r;
    int rc;
    if ((rc = ocr__linear_check(ctx, fn, x, w, b, y, &R, &I, &K)) || (rc = ocr__seq_refuse_overlap(ctx, fn, y, x)) ||
        (rc = ocr__seq_refuse_overlap(ctx, fn, y, w)) || (rc = ocr__seq_refuse_overlap(ctx, fn, y, b)))
        return rc;
#ifdef OCR_CUDA
    if (ctx->device == OCR_DEVICE_CUDA) return ocr__cuda_done(ctx, ocr_cuda_linear_forward(ctx, x, w, b, y), fn, "forward", y, NULL, NULL);
#endif
    if ((rc = ocr__seq_cpu_only(ctx, fn))) return rc;
    if (ocr__use_ref(ctx)) ocr__ref_linear_forward((const float *)x->data, (const float *)w->data, ocr__f32_or_null(b), (float *)y->data, R, I, K);
    else {
        float *yp = (float *)y->data;
        for (r = 0; r < R; r++) {   /* the bias first, the product added onto it */
            if (b) memcpy(yp + r * K, b->data, (size_t)K * sizeof(float));
            else memset(yp + r * K, 0, (size_t)K * sizeof(float));
        }
        if ((rc = ocr_gemm(ctx, 0, 1, R, K, I, 1.0f, (const float *)x->data, I, (const float *)w->data, I, 1.0f, yp, K))) return rc;
    }
    return ocr__watch(ctx, fn, "forward", y);
}

OCRDEF int ocr_nn_linear_backward(ocr_ctx *ctx, const ocr_tensor *x, const ocr_tensor *w, const ocr_tensor *dy, ocr_tensor *dx,
                                  ocr_tensor *dw, ocr_tensor *db) {
    const char *fn = "ocr_nn_linear_backward";
    int64_t R, I, K, r, k;
    int rc;
    if ((rc = ocr__linear_check(ctx, fn, x, w, db, dy, &R, &I, &K))) return rc;
    if (dx && ((rc = ocr_check_f32(ctx, fn, dx)) || (rc = ocr_check_shape(ctx, fn, dx, x->shape)) || (rc = ocr__seq_refuse_overlap(ctx, fn, dx, x)) ||
               (rc = ocr__seq_refuse_overlap(ctx, fn, dx, dy)) || (rc = ocr__seq_refuse_overlap(ctx, fn, dx, w))))
        return rc;
    if (dw && ((rc = ocr_check_f32(ctx, fn, dw)) || (rc = ocr_check_shape(ctx, fn, dw, w->shape)) || (rc = ocr__seq_refuse_overlap(ctx, fn, dw, w)) ||
               (rc = ocr__seq_refuse_overlap(ctx, fn, dw, dy))))
        return rc;
#ifdef OCR_CUDA
    if (ctx->device == OCR_DEVICE_CUDA)
        return ocr__cuda_done(ctx, ocr_cuda_linear_backward(ctx, x, w, dy, dx, dw, db), fn, "backward", dx, dw, db);
#endif
    if ((rc = ocr__seq_cpu_only(ctx, fn))) return rc;
    if (ocr__use_ref(ctx)) {
        ocr__ref_linear_backward((const float *)x->data, (const float *)w->data, (const float *)dy->data, ocr__f32_mut_or_null(dx),
                                 ocr__f32_mut_or_null(dw), ocr__f32_mut_or_null(db), R, I, K);
    } else {
        const float *g = (const float *)dy->data;
        if (db)
            for (r = 0; r < R; r++)
                for (k = 0; k < K; k++) ((float *)db->data)[k] += g[r * K + k];
        if ((dw && (rc = ocr_gemm(ctx, 1, 0, K, I, R, 1.0f, g, K, (const float *)x->data, I, 1.0f, (float *)dw->data, I))) ||
            (dx && (rc = ocr_gemm(ctx, 0, 0, R, I, K, 1.0f, g, K, (const float *)w->data, I, 1.0f, (float *)dx->data, I))))
            return rc;
    }
    if ((rc = ocr__watch(ctx, fn, "backward", dx)) || (rc = ocr__watch(ctx, fn, "backward", dw))) return rc;
    return ocr__watch(ctx, fn, "backward", db);
}

OCRDEF int ocr_nn_mask_columns(ocr_ctx *ctx, ocr_tensor *x, const ocr_tensor *widths) {
    const char *fn = "ocr_nn_mask_columns";
    int64_t N, rows, W, n, r;
    const int32_t *v;
    char d[200];
    int rc;
    if ((rc = ocr_check_f32(ctx, fn, x))) return rc;
    if (x->shape.ndim != 4) return ocr_error(ctx, OCR_ESHAPE, "%s: tensor %s must be [N, C, H, W]", fn, ocr_tensor_describe(x, d, sizeof d));
    N = x->shape.dim[0]; rows = x->shape.dim[1] * x->shape.dim[2]; W = x->shape.dim[3];
    if (!widths) return ocr_error(ctx, OCR_EINVAL, "%s: widths is NULL", fn);
    if ((rc = ocr_check_dtype(ctx, fn, widths, OCR_I32)) || (rc = ocr_check_device(ctx, fn, widths, OCR_DEVICE_CPU)) ||
        (rc = ocr_check_shape(ctx, fn, widths, ocr_shape1(N))))
        return rc;
    v = (const int32_t *)widths->data;
    for (n = 0; n < N; n++)
        if (v[n] < 0) return ocr_error(ctx, OCR_ERANGE, "%s: tensor '%s': widths[%lld] = %d is negative", fn, widths->name, (long long)n, (int)v[n]);
#ifdef OCR_CUDA
    if (ctx->device == OCR_DEVICE_CUDA) return ocr_cuda_mask_columns(ctx, x, widths);
#endif
    if ((rc = ocr__seq_cpu_only(ctx, fn))) return rc;
    for (n = 0; n < N; n++) {
        if (v[n] >= W) continue;
        for (r = 0; r < rows; r++) memset((float *)x->data + (n * rows + r) * W + v[n], 0, (size_t)(W - v[n]) * sizeof(float));
    }
    return OCR_OK;
}

#ifdef __cplusplus
}
#endif
#endif /* OCR_NN_IMPLEMENTATION */
