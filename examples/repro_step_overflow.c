/* repro_step_overflow - DBNet's approximate binary map B = 1 / (1 + exp(-k (P - T))), k = 50, and its gradient
   over a sweep of P - T, in fp32 and fp16.

   The naive formula (the official code's torch.reciprocal(1 + torch.exp(-k * (x - y)))) lets exp(-k(P-T)) overflow
   to Inf once k(P-T) < -88.7 in fp32 or < -11.1 in fp16 (P - T < -0.23: an ordinary threshold map under AMP).
   The forward still gives 0, but the backward of 1/u is -B^2 = 0, multiplied by exp's Inf: NaN gradient. Short
   of the overflow, B^2 underflows in fp16 and the gradient is silently flushed to 0 where it should be ~0.01.
   ocr-c's step (ocr_loss_db_step_forward/backward) evaluates only exp(-|z|) <= 1 and the derivative as
   s / (1 + s)^2: finite everywhere and equal to the exact sigmoid computed in double.

   With --device cuda (a CUDA build) the sweep runs through the device's step kernels, which must agree with the
   exact sigmoid as the CPU's do: a fast-math exp or a fused reformulation on the GPU would show here.

       repro_step_overflow                  the sweep P - T in [-2, 2], a table and a summary
       repro_step_overflow --from -1 --to 1 --points 41 --k 50
       build/cuda/repro_step_overflow --device cuda

   Exit status: 0 when ocr-c's step and gradient are finite and exact at every point, 1 otherwise (or no usable GPU),
   2 bad flags (--device cuda in a build without CUDA). */
#define OCR_IMPLEMENTATION
#include "ocr_tensor.h"
#include "ocr_geom.h"   /* ocr_point, which ocr_example.h's drawing helpers take */
#include "ocr_loss.h"
#include "ocr_example.h"

/* The naive formula evaluated as a framework does, every intermediate rounded to the working precision. */
typedef float (*round_fn)(float);
static float as_fp32(float x) { return x; }
static float as_fp16(float x) { return ocr_f16_to_f32(ocr_f32_to_f16(x)); }

typedef struct { float e, b, grad; } naive_result; /* exp(-z), B and dB/dT */

static naive_result naive_step(round_fn r, float k, float p, float t) {
    naive_result n;
    float z = r(r(k) * r(r(p) - r(t)));
    float u, g_u;
    n.e = r(expf(-z));
    u = r(1.0f + n.e);
    n.b = r(1.0f / u);
    /* autograd: d(1/u) = -B^2 du; d exp(-z) = exp(-z) d(-z); dz/dT = -k */
    g_u = r(-r(n.b * n.b));
    n.grad = r(r(k) * r(g_u * n.e));
    return n;
}

typedef struct { int nonfinite_exp, nan_grad, flushed_grad; double last_nan, first_flush, last_flush, worst_flushed; } naive_stats;

int main(int argc, char **argv) {
    float from = -2.0f, to = 2.0f, k = 50.0f;
    const char *device = "cpu";
    int points = 81, fp, i, bad = 0, rc;
    ocr_ex_flag flags[] = {
        {"--from", OCR_EX_FLOAT, &from, "smallest P - T of the sweep"},
        {"--to", OCR_EX_FLOAT, &to, "largest P - T of the sweep"},
        {"--points", OCR_EX_INT, &points, "points of the sweep (2..100000)"},
        {"--k", OCR_EX_FLOAT, &k, "steepness k of the step (0 < k <= 1e4)"},
        {"--device", OCR_EX_STRING, &device, "where ocr-c's step runs: cpu, or cuda in a CUDA build"},
    };
    ocr_ctx ctx;
    /* the step's tensors live on the context's device; T is written and the results read on the host */
    ocr_tensor logits, thresh, binary, d_binary, d_logits, d_thresh, host_T, staging[3], out[3];
    if (ocr_ex_parse(argc, argv, "[flags]", flags, (int)(sizeof flags / sizeof flags[0])) != 0) {
        fprintf(stderr, "%s: takes no positional arguments\n", argv[0]);
        return 2;
    }
    if (points < 2 || points > 100000 || !(from < to) || !(k > 0.0f && k <= 1e4f)) {
        fprintf(stderr, "%s: need 2 <= --points <= 100000, --from < --to and 0 < --k <= 1e4\n", argv[0]);
        return 2;
    }
    if (ocr_ctx_init(&ctx, 1, 0) != OCR_OK) { fprintf(stderr, "%s\n", ocr_ctx_last_error(&ctx)); return 1; }
    if ((rc = ocr_ex_set_device(&ctx, argv[0], device)) != 0) {
        ocr_ctx_free(&ctx);
        return rc;
    }
    memset(staging, 0, sizeof staging);
    /* P = sigmoid(0) = 0.5 exactly (fresh tensors are zero), so P - T is set through T alone */
    if (ocr_tensor_alloc(&ctx, &logits, "prob_logits", OCR_F32, ctx.device, ocr_shape4(1, 1, 1, points)) ||
        ocr_tensor_alloc(&ctx, &thresh, "thresh", OCR_F32, ctx.device, ocr_shape4(1, 1, 1, points)) ||
        ocr_tensor_alloc(&ctx, &binary, "binary", OCR_F32, ctx.device, ocr_shape4(1, 1, 1, points)) ||
        ocr_tensor_alloc(&ctx, &d_binary, "d_binary", OCR_F32, ctx.device, ocr_shape4(1, 1, 1, points)) ||
        ocr_tensor_alloc(&ctx, &d_logits, "d_prob_logits", OCR_F32, ctx.device, ocr_shape4(1, 1, 1, points)) ||
        ocr_tensor_alloc(&ctx, &d_thresh, "d_thresh", OCR_F32, ctx.device, ocr_shape4(1, 1, 1, points)) ||
        ocr_tensor_alloc(&ctx, &host_T, "thresh", OCR_F32, OCR_DEVICE_CPU, ocr_shape4(1, 1, 1, points)) ||
        ocr_tensor_fill(&ctx, &d_binary, 1.0)) {
        fprintf(stderr, "%s\n", ocr_ctx_last_error(&ctx));
        return 1;
    }
    printf("B = 1/(1+exp(-k(P-T))), k = %g, P = 0.5, %d points of P-T in [%g, %g]; ocr-c's step runs on %s\n", k, points, from, to,
           ocr_device_name(ctx.device));
    for (fp = 0; fp < 2; fp++) {
        round_fn r = fp ? as_fp16 : as_fp32;
        const char *prec = fp ? "fp16" : "fp32";
        naive_stats ns;
        double worst_rel = 0.0;
        int ocr_bad = 0;
        float *T = (float *)host_T.data;
        memset(&ns, 0, sizeof ns);
        for (i = 0; i < points; i++)
            T[i] = r(0.5f - (from + (to - from) * (float)i / (float)(points - 1))); /* stored as the precision stores it */
        if (ocr_tensor_copy(&ctx, &thresh, &host_T) || ocr_tensor_zero(&ctx, &d_logits) || ocr_tensor_zero(&ctx, &d_thresh) ||
            ocr_loss_db_step_forward(&ctx, k, &logits, &thresh, &binary) ||
            ocr_loss_db_step_backward(&ctx, k, &logits, &thresh, &d_binary, &d_logits, &d_thresh) ||
            ocr_tensor_on_host(&ctx, &binary, &staging[0], &out[0]) || ocr_tensor_on_host(&ctx, &d_thresh, &staging[1], &out[1]) ||
            ocr_tensor_on_host(&ctx, &d_logits, &staging[2], &out[2])) {
            printf("ocr-c %s: the step failed: %s\n", prec, ocr_ctx_last_error(&ctx));
            bad = 1;
            continue;
        }
        printf("\n%s     P-T  | naive: exp(-z)       B           dB/dT     | ocr-c: B           dB/dT     | exact: B           dB/dT\n", prec);
        for (i = 0; i < points; i++) {
            /* exact in double; B (1 - B) as s / (1 + s)^2, since 1 - B cancels where B rounds to 1 */
            double d = 0.5 - (double)T[i], s = exp(-fabs((double)k * d)), b = d >= 0 ? 1.0 / (1.0 + s) : s / (1.0 + s);
            double g = -(double)k * s / ((1.0 + s) * (1.0 + s)), gl = -0.25 * g; /* dB/dlogit = k B (1-B) P (1-P) */
            float ob = ((float *)out[0].data)[i], og = ((float *)out[1].data)[i], ol = ((float *)out[2].data)[i];
            naive_result n = naive_step(r, k, 0.5f, T[i]);
            int ok = isfinite(ob) && isfinite(og) && isfinite(ol) && fabs(ob - b) <= 1e-5 * b + 1e-37 &&
                     fabs(og - g) <= 1e-5 * fabs(g) + 1e-37 && fabs(ol - gl) <= 1e-5 * fabs(gl) + 1e-37;
            double rel = fabs(og - g) / (fabs(g) > 1e-30 ? fabs(g) : 1e-30);
            if (rel > worst_rel) worst_rel = rel;
            if (!ok && ocr_bad++ < 5) {
                printf("  ocr-c %s at P-T = %g: B %.9g dB/dT %.9g dB/dlogit %.9g, exact %.9g %.9g %.9g\n", prec, d, ob, og, ol, b, g, gl);
            }
            if (!isfinite(n.e)) ns.nonfinite_exp++;
            if (isnan(n.grad)) {
                ns.nan_grad++;
                ns.last_nan = d;
            } else if (n.grad == 0.0f && fabs(g) > 1e-3) {
                /* flushed to 0 although the exact gradient is large enough to matter */
                if (!ns.flushed_grad++) ns.first_flush = d;
                ns.last_flush = d;
                if (fabs(g) > ns.worst_flushed) ns.worst_flushed = fabs(g);
            }
            if (i % ((points + 15) / 16) == 0 || i == points - 1)
                printf("  %+8.4f | %12.5g %12.5g %12.5g | %12.5g %12.5g | %12.5g %12.5g\n", d, n.e, n.b, n.grad, ob, og, b, g);
        }
        if (ns.nonfinite_exp)
            printf("naive %s: exp(-k(P-T)) overflows to Inf at %d of %d points; the gradient is NaN at %d points, up to P-T = %.4g "
                   "(0 * Inf in the backward of 1/u)\n", prec, ns.nonfinite_exp, points, ns.nan_grad, ns.last_nan);
        else
            printf("naive %s: no overflow in this range\n", prec);
        if (ns.flushed_grad)
            printf("naive %s: the gradient is flushed to 0 for P-T in [%.4g, %.4g] (B^2 underflows), where the exact |dB/dT| "
                   "reaches %.3g\n", prec, ns.first_flush, ns.last_flush, ns.worst_flushed);
        if (ocr_bad)
            printf("ocr-c %s: %d of %d points are non-finite or differ from the exact sigmoid\n", prec, ocr_bad, points);
        else
            printf("ocr-c %s: B, dB/dT and dB/dlogit finite and equal to the exact sigmoid at all %d points (largest relative "
                   "error of dB/dT %.2g)%s\n", prec, points, worst_rel, fp ? "; inputs stored in fp16, computed in fp32" : "");
        bad |= ocr_bad != 0;
    }
    ocr_tensor_free(&logits); ocr_tensor_free(&thresh); ocr_tensor_free(&binary);
    ocr_tensor_free(&d_binary); ocr_tensor_free(&d_logits); ocr_tensor_free(&d_thresh);
    ocr_tensor_free(&host_T); ocr_tensor_free(&staging[0]); ocr_tensor_free(&staging[1]); ocr_tensor_free(&staging[2]);
    printf("\n%s on %s\n", bad ? "FAIL: ocr-c's step is not finite and exact everywhere" : "OK: ocr-c's step and its gradient are finite and exact",
           ocr_device_name(ctx.device));
    ocr_ctx_free(&ctx);
    return bad;
}
