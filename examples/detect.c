/* detect - runs a DBNet checkpoint on images and prints the detected text regions, one JSON line per image:
       {"image":"a.jpg","width":1280,"height":720,"detections":[{"points":[[x,y],...],"score":0.93},...]}
   Each image is resized as the official inference does (aspect kept, short or long side set, multiples of 32), the
   model runs in eval mode and the probability map is post-processed back to the original size. With --out DIR,
   DIR/<stem>.png shows the detections drawn on the image and DIR/res_<stem>.txt holds them in the ICDAR submission
   format (what `eval_dbnet --pred DIR` reads). --device cuda (the CUDA build, build/cuda/detect) runs the model on the
   GPU; the probability map is downloaded for post-processing. Exit status: 0, 1 when an image, the model or the
   device failed, 2 on a usage error. */
#define OCR_IMPLEMENTATION
#include "ocr_tensor.h"
#include "ocr_nn.h"
#include "ocr_loss.h"
#include "ocr_dbnet.h"
#include "ocr_data.h"
#include "ocr_example.h"

#include <errno.h>
#include <sys/stat.h>

static const char *const SYNOPSIS = "--model FILE [options] image...";

static int make_dir(const char *prog, const char *dir) {
    if (mkdir(dir, 0755) != 0 && errno != EEXIST) {
        fprintf(stderr, "%s: cannot create directory '%s': %s\n", prog, dir, strerror(errno));
        return 0;
    }
    return 1;
}

static void print_json_line(const char *image, const ocr_image *img, const ocr_detections *d) {
    size_t cap = strlen(image) * 6 + 3; /* every byte escaped as \u00XX, the quotes, the NUL */
    char *quoted = (char *)malloc(cap);
    int i, k;
    if (quoted) {
        quoted[0] = 0;
        ocr_json_quote(quoted, cap, image);
    }
    printf("{\"image\":%s,\"width\":%d,\"height\":%d,\"detections\":[", quoted ? quoted : "null", img->width, img->height);
    for (i = 0; i < d->n; i++) {
        printf("%s{\"points\":[", i ? "," : "");
        for (k = 0; k < d->polys[i].n_points; k++)
            printf("%s[%g,%g]", k ? "," : "", d->polys[i].points[k].x, d->polys[i].points[k].y);
        printf("],\"score\":%.6f}", d->scores[i]);
    }
    printf("]}\n");
    fflush(stdout);
    free(quoted);
}

/* Overlay PNG and ICDAR result file of one image. */
static int write_outputs(ocr_ctx *ctx, const char *dir, const char *stem, ocr_image *img, const ocr_detections *d) {
    static const unsigned char green[3] = {40, 255, 40};
    char path[4200];
    int i, rc;
    for (i = 0; i < d->n; i++) ocr_ex_polygon_legible(img->pixels, img->width, img->height, d->polys[i].points, d->polys[i].n_points, green);
    snprintf(path, sizeof path, "%s/%s.png", dir, stem);
    if ((rc = ocr_image_save_png(ctx, path, img))) return rc;
    snprintf(path, sizeof path, "%s/res_%s.txt", dir, stem);
    return ocr_detections_write_icdar(ctx, path, d, 1);
}

/* The network input and probability map, for tools/check_dbnet_torch.py. */
static int write_dump(ocr_ctx *ctx, const char *dir, const char *stem, const char *image, const ocr_image *img, const ocr_tensor *x,
                      const ocr_tensor *prob) {
    char path[4200], w[32], h[32];
    const char *keys[3] = {"image", "width", "height"}, *values[3];
    ocr_tensor p = *prob;
    const ocr_tensor *tensors[2];
    ocr_tensor_set_name(&p, "prob");
    tensors[0] = x;
    tensors[1] = &p;
    snprintf(w, sizeof w, "%d", img->width);
    snprintf(h, sizeof h, "%d", img->height);
    values[0] = image; values[1] = w; values[2] = h;
    snprintf(path, sizeof path, "%s/%s.safetensors", dir, stem);
    return ocr_safetensors_save(ctx, path, tensors, 2, keys, values, 3);
}

int main(int argc, char **argv) {
    const char *model_path = NULL, *out_dir = NULL, *dump_dir = NULL, *device = "cpu", *amp_name = "fp32";
    int short_side = 736, long_side = 0, threads = 0, n_images, i, failed = 0, amp = OCR_AMP_OFF;
    ocr_ex_post_flags pf = ocr_ex_post_flags_default();
    const char *post_error;
    ocr_ex_flag flags[] = {
        {"--model", OCR_EX_STRING, &model_path, "checkpoint written by train_dbnet or ocr_dbnet_save (required)"},
        OCR_EX_POST_FLAGS(pf, ""),
        {"--short-side", OCR_EX_INT, &short_side, "resize so the short side is this (rounded up to a multiple of 32)"},
        {"--long-side", OCR_EX_INT, &long_side, "resize so the long side is this instead (0: use --short-side)"},
        {"--out", OCR_EX_STRING, &out_dir, "write DIR/<stem>.png (detections drawn) and DIR/res_<stem>.txt (ICDAR format)"},
        {"--dump", OCR_EX_STRING, &dump_dir, "write DIR/<stem>.safetensors: network input and probability map"},
        {"--threads", OCR_EX_INT, &threads, "CPU threads; 0: all cores"},
        {"--device", OCR_EX_STRING, &device, "cpu, or cuda in the CUDA build"},
        {"--amp", OCR_EX_STRING, &amp_name, "precision of the convolutions: fp32, bf16 or fp16 (ocr_nn.h's mixed-precision rules)"},
    };
    const int n_flags = (int)(sizeof flags / sizeof flags[0]);
    ocr_ctx ctx;
    ocr_dbnet model;
    ocr_post_config post;
    ocr_detections dets;
    ocr_tensor x, prob_host;
    char stem[1024];

    n_images = ocr_ex_parse(argc, argv, SYNOPSIS, flags, n_flags);
    if (!model_path || n_images == 0) {
        fprintf(stderr, "%s: %s\n", argv[0], !model_path ? "--model is required" : "no image given");
        ocr_ex_usage(stderr, argv[0], SYNOPSIS, flags, n_flags);
        return 2;
    }
    if (!ocr_amp_parse(amp_name, &amp)) {
        fprintf(stderr, "%s: --amp must be fp32, bf16 or fp16\n", argv[0]);
        return 2;
    }
    if ((post_error = ocr_ex_post_config(&pf, &post)) != NULL) {
        fprintf(stderr, "%s: %s\n", argv[0], post_error);
        return 2;
    }
    if (short_side < 1 || long_side < 0 || threads < 0 || short_side > OCR_IMAGE_MAX_SIDE || long_side > OCR_IMAGE_MAX_SIDE) {
        fprintf(stderr, "%s: out of range: --short-side in [1, %d], --long-side in [0, %d], --threads >= 0\n", argv[0],
                OCR_IMAGE_MAX_SIDE, OCR_IMAGE_MAX_SIDE);
        return 2;
    }
    /* Outputs are named after the image: two images with one stem would overwrite each other's. */
    if ((out_dir || dump_dir) && !ocr_ex_unique_stems(argv[0], argv + 1, n_images)) return 2;
    if ((out_dir && !make_dir(argv[0], out_dir)) || (dump_dir && !make_dir(argv[0], dump_dir))) return 1;
    if (ocr_ctx_init(&ctx, threads, 0) != OCR_OK) {
        fprintf(stderr, "%s: %s\n", argv[0], ocr_ctx_last_error(&ctx));
        return 1;
    }
    ctx.amp = amp;
    if ((i = ocr_ex_set_device(&ctx, argv[0], device)) != 0) {
        ocr_ctx_free(&ctx);
        return i;
    }
    if (ocr_dbnet_init_from_file(&ctx, &model, model_path) != OCR_OK) {
        fprintf(stderr, "%s: cannot load the model '%s': %s\n", argv[0], model_path, ocr_ctx_last_error(&ctx));
        ocr_ctx_free(&ctx);
        return 1;
    }
    memset(&dets, 0, sizeof dets);
    memset(&x, 0, sizeof x);
    memset(&prob_host, 0, sizeof prob_host);
    for (i = 0; i < n_images; i++) {
        const char *path = argv[1 + i];
        ocr_image img;
        ocr_tensor prob;
        int in_w = 0, in_h = 0;
        memset(&img, 0, sizeof img);
        ocr_ex_stem(path, stem, sizeof stem);
        ocr_tensor_free(&x); /* the last image's input */
        if (ocr_image_load(&ctx, path, &img) || ocr_infer_input_size(&ctx, img.width, img.height, short_side, long_side, &in_w, &in_h) ||
            ocr_tensor_alloc(&ctx, &x, "input", OCR_F32, OCR_DEVICE_CPU, ocr_shape4(1, 3, in_h, in_w)) ||
            ocr_image_network_input(&ctx, &img, OCR_NORM_DBNET, &x) || ocr_dbnet_forward(&ctx, &model, &x, 0, &prob, NULL) ||
            ocr_tensor_on_host(&ctx, &prob, &prob_host, &prob) ||
            ocr_postprocess(&ctx, &post, &prob, img.width, img.height, &dets) ||
            (dump_dir && write_dump(&ctx, dump_dir, stem, path, &img, &x, &prob))) {
            const char *msg = ocr_ctx_last_error(&ctx);
            /* the library's advice in this program's terms */
            fprintf(stderr, "%s: '%s': %s%s\n", argv[0], path, msg, strstr(msg, "scale the long side") ? " (use --long-side)" : "");
            failed = 1;
        } else {
            print_json_line(path, &img, &dets);
            if (out_dir && write_outputs(&ctx, out_dir, stem, &img, &dets)) {
                fprintf(stderr, "%s: '%s': %s\n", argv[0], path, ocr_ctx_last_error(&ctx));
                failed = 1;
            }
        }
        ocr_image_free(&img);
    }
    ocr_tensor_free(&x);
    ocr_tensor_free(&prob_host);
    ocr_detections_free(&dets);
    ocr_dbnet_free(&model);
    ocr_ctx_free(&ctx);
    return failed;
}
