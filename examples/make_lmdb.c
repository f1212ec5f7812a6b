/* make_lmdb - converts an ICDAR-style folder (images + ground-truth text files) into an LMDB in the standard layout
   (num-samples, image-%09d = the image bytes as stored, label-%09d = JSON [{"transcription", "points"}], 1-based),
   which ocr_dataset_open_lmdb reads and generic image-/label- tooling understands.

     make_lmdb [--format icdar2015|polygon] IMAGE_DIR GT_DIR OUT_DIR

   Every sample is read and validated first-hand (the image structure and ground truth): a bad one stops the
   conversion with a message naming the file. Exit status: 0 done, 1 failure, 2 usage error. */
#define OCR_IMPLEMENTATION
#include "ocr_tensor.h"
#include "ocr_data.h"
#include <stdio.h>
#include <string.h>

static void usage(FILE *f) {
    fprintf(f,
            "usage: make_lmdb [--format icdar2015|polygon] IMAGE_DIR GT_DIR OUT_DIR\n"
            "  Converts every .jpg/.jpeg/.png/.bmp in IMAGE_DIR, with its ground truth in GT_DIR (gt_<stem>.txt,\n"
            "  <name>.txt or <stem>.txt), into a new LMDB directory OUT_DIR.\n"
            "  --format icdar2015  x1,y1,...,x4,y4,transcription per line (default)\n"
            "  --format polygon    x1,y1,...,xn,yn,transcription, n >= 3 (Total-Text / CTW as converted by DB)\n"
            "  -h, --help          this help;  --version  the ocr-c version\n");
}

static void progress(void *user, int64_t done, int64_t total) {
    (void)user;
    fprintf(stderr, "make_lmdb: %lld/%lld samples written\n", (long long)done, (long long)total);
    fflush(stderr);
}

int main(int argc, char **argv) {
    const char *pos[3];
    int n_pos = 0, format = OCR_GT_ICDAR2015, i, rc;
    ocr_ctx ctx;
    ocr_dataset ds;
    for (i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) { usage(stdout); return 0; }
        if (strcmp(a, "--version") == 0) { printf("make_lmdb (ocr-c) %s\n", OCR_VERSION); return 0; }
        if (strcmp(a, "--format") == 0 || strncmp(a, "--format=", 9) == 0) {
            const char *v = a[8] == '=' ? a + 9 : (i + 1 < argc ? argv[++i] : "");
            if (strcmp(v, "icdar2015") == 0) format = OCR_GT_ICDAR2015;
            else if (strcmp(v, "polygon") == 0) format = OCR_GT_POLYGON;
            else { fprintf(stderr, "make_lmdb: --format must be icdar2015 or polygon, not '%s'\n", v); return 2; }
            continue;
        }
        if (a[0] == '-' && a[1]) { fprintf(stderr, "make_lmdb: unknown option '%s' (see --help)\n", a); return 2; }
        if (n_pos == 3) { fprintf(stderr, "make_lmdb: too many arguments (see --help)\n"); return 2; }
        pos[n_pos++] = a;
    }
    if (n_pos != 3) { usage(stderr); return 2; }
    if (ocr_ctx_init(&ctx, 1, 0) != OCR_OK) { fprintf(stderr, "make_lmdb: %s\n", ocr_ctx_last_error(&ctx)); return 1; }
    rc = ocr_dataset_open_icdar(&ctx, &ds, pos[0], pos[1], format);
    if (rc == OCR_OK) {
        fprintf(stderr, "make_lmdb: %lld images in '%s'\n", (long long)ds.count, pos[0]);
        rc = ocr_lmdb_write_dataset(&ctx, pos[2], &ds, progress, NULL);
        if (rc == OCR_OK) printf("make_lmdb: wrote %lld samples to '%s'\n", (long long)ds.count, pos[2]);
        ocr_dataset_close(&ds);
    }
    if (rc) fprintf(stderr, "make_lmdb: %s\n", ocr_ctx_last_error(&ctx));
    ocr_ctx_free(&ctx);
    return rc ? 1 : 0;
}
