/* export_onnx - writes a DBNet or CRNN checkpoint as an ONNX model (ocr_onnx.h: IR 8, opset 17) for ONNX Runtime and
   the other ONNX runtimes; the checkpoint's metadata says which it is. A detector takes "image", float [N,3,H,W] with
   H and W multiples of 32, normalised as detect normalises it (channels B, G, R; (pixel - mean) / 255; the file's
   metadata_props say so), and gives "prob", the probability map [N,1,H,W]; --threshold-map adds the threshold map
   "thresh" [N,1,H,W] as a second output. A recognizer (train_rec's checkpoints) takes "image", float [N,3,32,W] with
   W a multiple of 4, normalised the same way, and gives "log_probs" [W/4,N,classes] (class 0 the CTC blank; the
   charset in the metadata). The file is written atomically. Exit status: 0, 1 when the model cannot be loaded or the
   file written, 2 on a usage error. */
#define OCR_IMPLEMENTATION
#include "ocr_tensor.h"
#include "ocr_nn.h"
#include "ocr_loss.h"
#include "ocr_dbnet.h"
#include "ocr_data.h"
#include "ocr_rec.h"
#include "ocr_onnx.h"
#include "ocr_example.h"

#include <sys/stat.h>

static const char *const SYNOPSIS = "--model FILE.safetensors --out FILE.onnx [--threshold-map]";

int main(int argc, char **argv) {
    const char *model_path = NULL, *out_path = NULL;
    int threshold_map = 0, n_pos;
    ocr_ex_flag flags[] = {
        {"--model", OCR_EX_STRING, &model_path, "checkpoint written by train_dbnet, train_rec, ocr_dbnet_save or ocr_rec_save (required)"},
        {"--out", OCR_EX_STRING, &out_path, "the ONNX file to write (required)"},
        {"--threshold-map", OCR_EX_BOOL, &threshold_map, "also output the threshold map \"thresh\" (detectors)"},
    };
    const int n_flags = (int)(sizeof flags / sizeof flags[0]);
    ocr_onnx_options opt = ocr_onnx_options_default();
    ocr_ctx ctx;
    ocr_dbnet model;
    ocr_rec_model rec;
    ocr_rec_config rec_cfg;
    ocr_charset cs;
    struct stat st;
    char what[160];
    int rc, is_rec;

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
    is_rec = ocr_rec_read_config(&ctx, model_path, &rec_cfg, &cs) == OCR_OK; /* ocr_rec.* metadata: a recognizer */
    if (is_rec) ocr_charset_free(&cs);
    if (is_rec && threshold_map) {
        fprintf(stderr, "%s: --threshold-map is a detector's output; '%s' is a recognizer\n", argv[0], model_path);
        ocr_ctx_free(&ctx);
        return 2;
    }
    if (is_rec ? ocr_rec_init_from_file(&ctx, &rec, model_path) != OCR_OK : ocr_dbnet_init_from_file(&ctx, &model, model_path) != OCR_OK) {
        fprintf(stderr, "%s: cannot load the model '%s': %s\n", argv[0], model_path, ocr_ctx_last_error(&ctx));
        ocr_ctx_free(&ctx);
        return 1;
    }
    if (is_rec) snprintf(what, sizeof what, "CRNN, %d classes, LSTM %d x 2 x %d, opset %d, output log_probs", rec.cfg.n_classes,
                         rec.cfg.layers, rec.cfg.hidden, OCR_ONNX_OPSET);
    else snprintf(what, sizeof what, "DB-ResNet-%d, width %g, opset %d, outputs prob%s", model.cfg.depth, model.cfg.width, OCR_ONNX_OPSET,
                  threshold_map ? " and thresh" : "");
    rc = is_rec ? ocr_rec_export_onnx(&ctx, &rec, out_path, &opt) : ocr_dbnet_export_onnx(&ctx, &model, out_path, &opt);
    if (rc != OCR_OK) fprintf(stderr, "%s: %s\n", argv[0], ocr_ctx_last_error(&ctx));
    else printf("%s: wrote %s (%s, %lld bytes)\n", argv[0], out_path, what, stat(out_path, &st) == 0 ? (long long)st.st_size : -1LL);
    if (is_rec) ocr_rec_free(&rec);
    else ocr_dbnet_free(&model);
    ocr_ctx_free(&ctx);
    return rc != OCR_OK;
}
