/* repro_cudnn_isolate - runs one convolution of the model (shapes as flags, as read off a failing run's error
   message) through cuDNN, through ocr_cuda.cu's own im2col/col2im + SGEMM kernels and on the CPU, forward and
   backward, with CUDA sync-debug on so a failing kernel is named where it fails. It compares the three and says
   which path disagrees or fails: the way to tell a cuDNN failure from a bug elsewhere.

       repro_cudnn_isolate --cin 256 --h 160 --w 160 --cout 64      the FPN fusion conv of a 640x640 DBNet
       repro_cudnn_isolate --cin 64 --cout 16 --k 2 --stride 2 --transposed   a head's transposed conv

   Builds: with -DOCR_CUDA and ocr_cuda.o from nvcc (build/cuda/repro_cudnn_isolate) it compares all three; with
   the emulated ocr_cuda.o (build/repro_cudnn_isolate_emu) the own kernels against the CPU; without -DOCR_CUDA it
   only says so. Exit status: 0 all paths agree, 1 a path failed or disagrees, 2 bad flags. */
#define OCR_IMPLEMENTATION
#include "ocr_tensor.h"
#include "ocr_nn.h"
#include "ocr_loss.h"
#include "ocr_dbnet.h"
#include "ocr_data.h"
#include "ocr_example.h"

typedef struct {
    int n, cin, h, w, cout, k, stride, pad, dilation, groups, transposed, seed;
    float tol;
} repro_args;

typedef struct { ocr_tensor x, w, b, y, dy, dx, dw, db; } conv_set;

static int alloc_set(ocr_ctx *ctx, conv_set *s, ocr_device dev, ocr_shape xs, ocr_shape ws, ocr_shape ys, int cout) {
    int rc;
    memset(s, 0, sizeof *s);
    if ((rc = ocr_tensor_alloc(ctx, &s->x, "x", OCR_F32, dev, xs)) || (rc = ocr_tensor_alloc(ctx, &s->w, "weight", OCR_F32, dev, ws)) ||
        (rc = ocr_tensor_alloc(ctx, &s->b, "bias", OCR_F32, dev, ocr_shape1(cout))) ||
        (rc = ocr_tensor_alloc(ctx, &s->y, "y", OCR_F32, dev, ys)) || (rc = ocr_tensor_alloc(ctx, &s->dy, "dy", OCR_F32, dev, ys)) ||
        (rc = ocr_tensor_alloc(ctx, &s->dx, "dx", OCR_F32, dev, xs)) || (rc = ocr_tensor_alloc(ctx, &s->dw, "dweight", OCR_F32, dev, ws)) ||
        (rc = ocr_tensor_alloc(ctx, &s->db, "dbias", OCR_F32, dev, ocr_shape1(cout))))
        return rc;
    return OCR_OK;
}

static void free_set(conv_set *s) {
    ocr_tensor_free(&s->x); ocr_tensor_free(&s->w); ocr_tensor_free(&s->b); ocr_tensor_free(&s->y);
    ocr_tensor_free(&s->dy); ocr_tensor_free(&s->dx); ocr_tensor_free(&s->dw); ocr_tensor_free(&s->db);
}

/* forward into y, then backward into zeroed dx, dw, db */
static int run_conv(ocr_ctx *ctx, const repro_args *a, ocr_conv_params p, conv_set *s) {
    int rc;
    if ((rc = ocr_tensor_zero(ctx, &s->dx)) || (rc = ocr_tensor_zero(ctx, &s->dw)) || (rc = ocr_tensor_zero(ctx, &s->db))) return rc;
    if (a->transposed) {
        if ((rc = ocr_nn_conv_transpose2d_forward(ctx, &s->x, &s->w, &s->b, p, &s->y))) return rc;
        return ocr_nn_conv_transpose2d_backward(ctx, &s->x, &s->w, &s->dy, p, &s->dx, &s->dw, &s->db);
    }
    if ((rc = ocr_nn_conv2d_forward(ctx, &s->x, &s->w, &s->b, p, &s->y))) return rc;
    return ocr_nn_conv2d_backward(ctx, &s->x, &s->w, &s->dy, p, &s->dx, &s->dw, &s->db);
}

#ifdef OCR_CUDA
/* max |got - ref| / max |ref| of one output, got copied back from the device */
static double compare(ocr_ctx *gpu, const ocr_tensor *dev, const ocr_tensor *ref) {
    ocr_tensor h;
    double md = 0.0, mr = 1e-12;
    int64_t i, n = ocr_tensor_numel(ref);
    if (ocr_tensor_alloc(gpu, &h, "back", OCR_F32, OCR_DEVICE_CPU, ref->shape) || ocr_tensor_copy(gpu, &h, dev)) return INFINITY;
    for (i = 0; i < n; i++) {
        double d = fabs((double)((float *)h.data)[i] - ((const float *)ref->data)[i]), r = fabs(((const float *)ref->data)[i]);
        if (!(d <= md)) md = d;
        if (r > mr) mr = r;
    }
    ocr_tensor_free(&h);
    return md / mr;
}

/* One device path; returns 0 when it ran and agrees with the CPU. */
static int check_path(ocr_ctx *gpu, const repro_args *a, ocr_conv_params p, const char *name, const conv_set *ref,
                      ocr_shape xs, ocr_shape ws, ocr_shape ys) {
    conv_set d;
    static const char *const outs[4] = {"y (forward)", "dx", "dweight", "dbias"};
    const ocr_tensor *got[4], *want[4];
    int rc, i, bad = 0;
    if ((rc = alloc_set(gpu, &d, OCR_DEVICE_CUDA, xs, ws, ys, a->cout)) || (rc = ocr_tensor_copy(gpu, &d.x, &ref->x)) ||
        (rc = ocr_tensor_copy(gpu, &d.w, &ref->w)) || (rc = ocr_tensor_copy(gpu, &d.b, &ref->b)) || (rc = ocr_tensor_copy(gpu, &d.dy, &ref->dy)) ||
        (rc = run_conv(gpu, a, p, &d)) || (rc = ocr_cuda_synchronize(gpu, name))) {
        printf("  %-22s FAILED: %s\n", name, ocr_ctx_last_error(gpu));
        free_set(&d);
        return 1;
    }
    got[0] = &d.y; got[1] = &d.dx; got[2] = &d.dw; got[3] = &d.db;
    want[0] = &ref->y; want[1] = &ref->dx; want[2] = &ref->dw; want[3] = &ref->db;
    for (i = 0; i < 4; i++) {
        double e = compare(gpu, got[i], want[i]);
        if (!(e <= a->tol)) { printf("  %-22s DISAGREES on %s: relative error %.3g > %.3g\n", name, outs[i], e, (double)a->tol); bad = 1; }
    }
    if (!bad) printf("  %-22s agrees with the CPU (tolerance %.1g)\n", name, (double)a->tol);
    free_set(&d);
    return bad;
}
#endif

int main(int argc, char **argv) {
    repro_args a;
    ocr_ctx cpu;
    ocr_conv_params p;
    ocr_shape xs, ws, ys;
    conv_set ref;
    int rc, failed = 0;
    ocr_ex_flag flags[] = {
        {"--n", OCR_EX_INT, &a.n, "batch"}, {"--cin", OCR_EX_INT, &a.cin, "input channels"},
        {"--h", OCR_EX_INT, &a.h, "input height"}, {"--w", OCR_EX_INT, &a.w, "input width"},
        {"--cout", OCR_EX_INT, &a.cout, "output channels"}, {"--k", OCR_EX_INT, &a.k, "kernel size"},
        {"--stride", OCR_EX_INT, &a.stride, "stride"}, {"--pad", OCR_EX_INT, &a.pad, "padding"},
        {"--dilation", OCR_EX_INT, &a.dilation, "dilation"}, {"--groups", OCR_EX_INT, &a.groups, "groups"},
        {"--transposed", OCR_EX_BOOL, &a.transposed, "a transposed convolution (weight [cin, cout/groups, k, k])"},
        {"--tol", OCR_EX_FLOAT, &a.tol, "largest relative error accepted"}, {"--seed", OCR_EX_INT, &a.seed, "random seed"},
    };
    memset(&a, 0, sizeof a);
    a.n = 1; a.cin = 16; a.h = 20; a.w = 20; a.cout = 8; a.k = 3; a.stride = 1; a.pad = 1; a.dilation = 1; a.groups = 1;
    a.tol = 1e-4f; a.seed = 1;
    if (ocr_ex_parse(argc, argv, "[flags]", flags, (int)(sizeof flags / sizeof flags[0])) != 0) {
        fprintf(stderr, "%s: takes no positional arguments\n", argv[0]);
        return 2;
    }
    if (ocr_ctx_init(&cpu, 0, (uint64_t)a.seed)) { fprintf(stderr, "%s\n", ocr_ctx_last_error(&cpu)); return 1; }
    p = ocr_conv_params_make(a.stride, a.pad, a.dilation, a.groups);
    xs = ocr_shape4(a.n, a.cin, a.h, a.w);
    ws = a.transposed ? ocr_shape4(a.cin, a.groups > 0 ? a.cout / a.groups : 0, a.k, a.k) : ocr_shape4(a.cout, a.groups > 0 ? a.cin / a.groups : 0, a.k, a.k);
    rc = a.transposed ? ocr_nn_conv_transpose2d_out_shape(&cpu, xs, ws, p, &ys) : ocr_nn_conv2d_out_shape(&cpu, xs, ws, p, &ys);
    if (rc) { fprintf(stderr, "%s: %s\n", argv[0], ocr_ctx_last_error(&cpu)); ocr_ctx_free(&cpu); return 2; }
    {
        char sx[96], sw[96], sy[96];
        printf("%s: x %s, weight %s -> y %s, stride %d, pad %d, dilation %d, groups %d\n", a.transposed ? "conv_transpose2d" : "conv2d",
               ocr_shape_str(xs, sx, sizeof sx), ocr_shape_str(ws, sw, sizeof sw), ocr_shape_str(ys, sy, sizeof sy), a.stride, a.pad,
               a.dilation, a.groups);
    }
    if ((rc = alloc_set(&cpu, &ref, OCR_DEVICE_CPU, xs, ws, ys, a.cout)) || (rc = ocr_tensor_fill_uniform(&cpu, &ref.x, -1, 1)) ||
        (rc = ocr_tensor_fill_uniform(&cpu, &ref.w, -0.1f, 0.1f)) || (rc = ocr_tensor_fill_uniform(&cpu, &ref.b, -1, 1)) ||
        (rc = ocr_tensor_fill_uniform(&cpu, &ref.dy, -1, 1)) || (rc = run_conv(&cpu, &a, p, &ref))) {
        fprintf(stderr, "%s: CPU reference failed: %s\n", argv[0], ocr_ctx_last_error(&cpu));
        free_set(&ref);
        ocr_ctx_free(&cpu);
        return 1;
    }
    printf("  %-22s done (the reference)\n", "cpu");
#ifdef OCR_CUDA
    {
        ocr_ctx gpu;
        if (ocr_ctx_init(&gpu, 1, (uint64_t)a.seed) || ocr_cuda_init(&gpu, 0)) {
            fprintf(stderr, "%s: %s\n", argv[0], ocr_ctx_last_error(&gpu));
            free_set(&ref);
            ocr_ctx_free(&gpu);
            ocr_ctx_free(&cpu);
            return 1;
        }
        gpu.debug_flags |= OCR_DEBUG_CUDA_SYNC; /* a failing kernel is named where it fails, not at a later call */
        printf("backend: %s\n", ocr_cuda_backend_name(&gpu));
        ocr_cuda_set_cudnn(&gpu, 0);
        failed |= check_path(&gpu, &a, p, "cuda own kernels", &ref, xs, ws, ys);
#if defined(OCR_CUDA_EMULATE)
        printf("  %-22s not in the emulation build (run build/cuda/repro_cudnn_isolate on a GPU)\n", "cudnn");
#else
        ocr_cuda_set_cudnn(&gpu, 1);
        failed |= 2 * check_path(&gpu, &a, p, "cudnn", &ref, xs, ws, ys);
#endif
        if (!failed) printf("verdict: every path agrees\n");
        else if (failed == 2) printf("verdict: only cuDNN fails or disagrees: leave OCR_CUDA_CUDNN unset (the default) and report the shapes above\n");
        else if (failed == 1) printf("verdict: the own kernels fail or disagree but cuDNN does not: a bug in ocr_cuda.cu\n");
        else printf("verdict: every device path fails: look at the device, driver or memory, not at cuDNN\n");
        ocr_ctx_free(&gpu);
    }
#else
    printf("this build has no CUDA backend (compile with -DOCR_CUDA and link ocr_cuda.o): nothing to compare\n");
    failed = 1;
#endif
    free_set(&ref);
    ocr_ctx_free(&cpu);
    return failed ? 1 : 0;
}
