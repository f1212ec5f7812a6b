/* export_onnx - writes a DBNet checkpoint as an ONNX model (ocr_onnx.h: IR 8, opset 17) for ONNX Runtime and the
   other ONNX runtimes. The model takes "image", float [N,3,H,W] with H and W multiples of 32, normalised as detect
   normalises it (channels B, G, R; (pixel - mean) / 255; the file's metadata_props say so), and gives "prob", the
   probability map [N,1,H,W]; --threshold-map adds the threshold map "thresh" [N,1,H,W] as a second output. The file
   is written atomically. Exit status: 0, 1 when the model cannot be loaded or the file written, 2 on a usage error. */
#define OCR_IMPLEMENTATION
#include "ocr_tensor.h"
#include "ocr_nn.h"
#include "ocr_loss.h"
#include "ocr_dbnet.h"
#include "ocr_onnx.h"
#include "ocr_example.h"

#include <sys/stat.h>

static const char *const SYNOPSIS = "--model FILE.safetensors --out FILE.onnx [--threshold-map]";

int main(int argc, char **argv) {
    const char *model_path = NULL, *out_path = NULL;
    int threshold_map = 0, n_pos;
    ocr_ex_flag flags[] = {
        {"--model", OCR_EX_STRING, &model_path, "checkpoint written by train_dbnet or ocr_dbnet_save (required)"},
        {"--out", OCR_EX_STRING, &out_path, "the ONNX file to write (required)"},
        {"--threshold-map", OCR_EX_BOOL, &threshold_map, "also output the threshold map \"thresh\""},
    };
    const int n_flags = (int)(sizeof flags / sizeof flags[0]);
    ocr_onnx_options opt = ocr_onnx_options_default();
    ocr_ctx ctx;
    ocr_dbnet model;
    struct stat st;
    int rc;

    n_pos = ocr_ex_parse(argc, argv, SYNOPSIS, flags, n_flags);
    if (!model_path || !out_path || n_pos > 0) {
        if (n_pos > 0) fprintf(stderr, "%s: unexpected argument: %s\n", argv[0], argv[1]);
        else fprintf(stderr, "%s: %s is required\n", argv[0], !model_path ? "--model" : "--out");
        ocr_ex_usage(stderr, argv[0], SYNOPSIS, flags, n_flags);
        return 2;
    }
    if (threshold_map) opt.flags |= OCR_ONNX_THRESHOLD_MAP;
    if (ocr_ctx_init(&ctx, 1, 0) != OCR_OK) {
        fprintf(stderr, "%s: %s\n", argv[0], ocr_ctx_last_error(&ctx));
        return 1;
    }
    if (ocr_dbnet_init_from_file(&ctx, &model, model_path) != OCR_OK) {
        fprintf(stderr, "%s: cannot load the model '%s': %s\n", argv[0], model_path, ocr_ctx_last_error(&ctx));
        ocr_ctx_free(&ctx);
        return 1;
    }
    rc = ocr_dbnet_export_onnx(&ctx, &model, out_path, &opt);
    if (rc != OCR_OK) fprintf(stderr, "%s: %s\n", argv[0], ocr_ctx_last_error(&ctx));
    else
        printf("%s: wrote %s (DB-ResNet-%d, width %g, opset %d, outputs prob%s, %lld bytes)\n", argv[0], out_path, model.cfg.depth,
               model.cfg.width, OCR_ONNX_OPSET, threshold_map ? " and thresh" : "", stat(out_path, &st) == 0 ? (long long)st.st_size : -1LL);
    ocr_dbnet_free(&model);
    ocr_ctx_free(&ctx);
    return rc != OCR_OK;
}
