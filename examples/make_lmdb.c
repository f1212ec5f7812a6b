/* make_lmdb - converts an ICDAR-style folder (images + ground-truth text files) into an LMDB in the standard layout
   (num-samples, image-%09d = the image bytes as stored, label-%09d = JSON [{"transcription", "points"}], 1-based),
   which ocr_dataset_open_lmdb reads and generic image-/label- tooling understands; or, with --format rec, a folder of
   word crops listed in a ground-truth file into a recognition set (the clovaai / PARSeq layout: label-%09d = the
   plain UTF-8 text), which train_rec reads as lmdb:OUT_DIR.

     make_lmdb [--format icdar2015|polygon] IMAGE_DIR GT_DIR OUT_DIR
     make_lmdb --format rec [--root DIR] GT_FILE OUT_DIR

   Every sample is read and validated first-hand (the image structure and ground truth): a bad one stops the
   conversion with a message naming the file. Exit status: 0 done, 1 failure, 2 usage error. */
#define OCR_IMPLEMENTATION
#include "ocr_tensor.h"
#include "ocr_data.h"
#include "ocr_rec.h"
#include <stdio.h>
#include <string.h>
#include "ocr_example.h"

static void progress(void *user, int64_t done, int64_t total) {
    (void)user;
    fprintf(stderr, "make_lmdb: %lld/%lld samples written\n", (long long)done, (long long)total);
    fflush(stderr);
}

int main(int argc, char **argv) {
    const char *format_name = "icdar2015", *root = NULL;
    int format = 0, rec = 0, npos, rc;
    ocr_ctx ctx;
    ocr_dataset ds;
    const ocr_ex_flag flags[] = {
        {"--format", OCR_EX_STRING, &format_name,
         "icdar2015: x1,y1,...,x4,y4,transcription per line; polygon: x1,y1,...,xn,yn,transcription, n >= 3 "
         "(Total-Text / CTW as converted by DB); rec: a recognition set from GT_FILE, one 'path<TAB>text' line per crop"},
        {"--root", OCR_EX_STRING, &root, "rec: the folder the crop paths are relative to (default: GT_FILE's folder)"},
    };
    static const char *const synopsis =
        "[flags] IMAGE_DIR GT_DIR OUT_DIR\n  Converts every .jpg/.jpeg/.png/.bmp in IMAGE_DIR, with its ground truth in GT_DIR "
        "(gt_<stem>.txt,\n  <name>.txt or <stem>.txt), into a new LMDB directory OUT_DIR.\n"
        "       make_lmdb --format rec [--root DIR] GT_FILE OUT_DIR\n  Writes the crops listed in GT_FILE as a recognition set "
        "(plain UTF-8 labels) into OUT_DIR.";
    npos = ocr_ex_parse(argc, argv, synopsis, flags, (int)(sizeof flags / sizeof flags[0]));
    if (strcmp(format_name, "icdar2015") == 0) format = OCR_GT_ICDAR2015;
    else if (strcmp(format_name, "polygon") == 0) format = OCR_GT_POLYGON;
    else if (strcmp(format_name, "rec") == 0) rec = 1;
    else { fprintf(stderr, "make_lmdb: --format must be icdar2015, polygon or rec, not '%s'\n", format_name); return 2; }
    if (!rec && root) { fprintf(stderr, "make_lmdb: --root goes with --format rec\n"); return 2; }
    if (npos != (rec ? 2 : 3)) {
        fprintf(stderr, "make_lmdb: give %s, not %d arguments (see --help)\n", rec ? "GT_FILE and OUT_DIR" : "IMAGE_DIR, GT_DIR and OUT_DIR", npos);
        return 2;
    }
    if (ocr_ctx_init(&ctx, 1, 0) != OCR_OK) { fprintf(stderr, "make_lmdb: %s\n", ocr_ctx_last_error(&ctx)); return 1; }
    rc = rec ? ocr_rec_dataset_open_folder(&ctx, &ds, argv[1], root) : ocr_dataset_open_icdar(&ctx, &ds, argv[1], argv[2], format);
    if (rc == OCR_OK) {
        const char *out = argv[rec ? 2 : 3];
        fprintf(stderr, "make_lmdb: %lld %s in '%s'\n", (long long)ds.count, rec ? "crops" : "images", argv[1]);
        rc = rec ? ocr_lmdb_write_rec_dataset(&ctx, out, &ds, progress, NULL) : ocr_lmdb_write_dataset(&ctx, out, &ds, progress, NULL);
        if (rc == OCR_OK) printf("make_lmdb: wrote %lld samples to '%s'\n", (long long)ds.count, out);
        ocr_dataset_close(&ds);
    }
    if (rc) fprintf(stderr, "make_lmdb: %s\n", ocr_ctx_last_error(&ctx));
    ocr_ctx_free(&ctx);
    return rc ? 1 : 0;
}
