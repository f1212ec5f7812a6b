/* recognize - reads the text of word or line crops with a recognizer checkpoint (ocr_rec.h).

       recognize --model runs/rec/best.safetensors crop1.png crop2.jpg ...
       recognize --model best.safetensors --list crops.txt --scores > predictions.txt

   Each crop (JPEG, PNG or BMP, any size) is rectified to the model's height with its aspect kept; the crops are
   sorted by width and read in batches. One line per crop on stdout, in the order given: "path<TAB>text" (with
   --scores a third column, the log-probability of the text), the format eval_rec and train_rec read as
   folder:FILE ground truth. --list reads the paths from a file (one per line; a "path<TAB>text" file works, its
   text is ignored). Exit status: 0, 1 when a crop cannot be read (named) or the model fails, 2 on bad flags. */
#define OCR_IMPLEMENTATION
#include "ocr_tensor.h"
#include "ocr_nn.h"
#include "ocr_loss.h"
#include "ocr_data.h"
#include "ocr_rec.h"
#include "ocr_example.h"

static void die(ocr_ctx *ctx, const char *what) {
    fprintf(stderr, "recognize: %s: %s\n", what, ocr_ctx_last_error(ctx));
    exit(1);
}

int main(int argc, char **argv) {
    const char *model_path = NULL, *list = NULL, *device = "cpu";
    int batch = 32, beam = 0, threads = 0, scores_flag = 0, npos, n = 0, cap = 0, i;
    ocr_ex_flag flags[] = {
        {"--model", OCR_EX_STRING, &model_path, "the recognizer checkpoint (train_rec's best.safetensors)"},
        {"--list", OCR_EX_STRING, &list, "a file with one crop path per line (text after a tab ignored)"},
        {"--batch", OCR_EX_INT, &batch, "crops per forward"},
        {"--beam", OCR_EX_INT, &beam, "CTC prefix beam width (0 or 1: best path)"},
        {"--scores", OCR_EX_BOOL, &scores_flag, "print each text's log-probability as a third column"},
        {"--threads", OCR_EX_INT, &threads, "compute threads (0: all cores)"},
        {"--device", OCR_EX_STRING, &device, "cpu or cuda (the CUDA build, build/cuda/recognize)"},
    };
    ocr_ctx ctx;
    ocr_rec_model m;
    ocr_image *crops = NULL;
    char **paths = NULL, **texts;
    float *scores;
    unsigned char *list_text = NULL;

    npos = ocr_ex_parse(argc, argv, "--model FILE [options] CROP...", flags, (int)(sizeof flags / sizeof flags[0]));
    if (!model_path || batch < 1 || beam < 0 || (!npos && !list)) {
        fprintf(stderr, "recognize: --model and at least one crop (or --list) are required; --batch >= 1, --beam >= 0 (see --help)\n");
        return 2;
    }
    if (ocr_ctx_init(&ctx, threads, 1) != OCR_OK) die(&ctx, "starting");
    if ((i = ocr_ex_set_device(&ctx, "recognize", device)) != 0) return i;
    if (ocr_rec_init_from_file(&ctx, &m, model_path)) die(&ctx, "--model");
    /* the paths: the arguments, then the list's lines */
    {
        size_t size = 0, at = 0;
        int lines = 0;
        if (list) {
            if (ocr_read_file(&ctx, list, (size_t)1 << 28, &list_text, &size)) die(&ctx, "--list");
            for (at = 0; at < size; at++) lines += list_text[at] == '\n';
            lines++;
        }
        cap = npos + lines;
        paths = (char **)calloc((size_t)cap, sizeof *paths);
        if (!paths) { fprintf(stderr, "recognize: out of memory\n"); return 1; }
        for (i = 0; i < npos; i++) paths[n++] = argv[1 + i];
        for (at = 0; list && at < size;) {
            size_t end = at;
            char *line = (char *)list_text + at;
            while (end < size && list_text[end] != '\n') end++;
            list_text[end] = 0; /* the buffer's last byte is never past its end: end < size or the terminator of ocr_read_file */
            line[strcspn(line, "\t\r")] = 0;
            if (line[0]) paths[n++] = line;
            at = end + 1;
        }
    }
    crops = (ocr_image *)calloc((size_t)(n ? n : 1), sizeof *crops);
    texts = (char **)calloc((size_t)(n ? n : 1), sizeof *texts);
    scores = (float *)calloc((size_t)(n ? n : 1), sizeof *scores);
    if (!crops || !texts || !scores) { fprintf(stderr, "recognize: out of memory\n"); return 1; }
    for (i = 0; i < n; i++)
        if (ocr_image_load(&ctx, paths[i], &crops[i])) die(&ctx, paths[i]);
    if (ocr_rec_recognize(&ctx, &m, crops, n, batch, beam, texts, scores)) die(&ctx, "recognition");
    for (i = 0; i < n; i++) {
        if (scores_flag) printf("%s\t%s\t%.4f\n", paths[i], texts[i], scores[i]);
        else printf("%s\t%s\n", paths[i], texts[i]);
        OCR_FREE(texts[i]);
        ocr_image_free(&crops[i]);
    }
    free(crops); free(texts); free(scores); free(paths);
    OCR_FREE(list_text);
    ocr_rec_free(&m);
    ocr_ctx_free(&ctx);
    return 0;
}
