/* ocr - reads the text of photographs: a detector and a recognizer together (ocr_rec.h's ocr_pipeline).

       ocr --det runs/dbnet/best.safetensors --rec runs/rec/best.safetensors photo.jpg ...
       ocr --det DET --rec REC --out results/ photos/a.png photos/b.jpg

   One JSON line per image on stdout, in the order given:
       {"image":"photo.jpg","width":1280,"height":720,"seconds":0.21,"lines":[{"text":"OPEN","points":[[x,y],...],
        "quad":[[x,y],...4],"det_score":0.87,"rec_score":0.97,"rotation":0}, ...]}
   points: the detection (4 corners, or a polygon with --poly); quad: the corners of the text as read (top-left of its
   first character first); rotation: 0, 90, 180 or 270, how far the crop was turned to be read. Lines come top to
   bottom, left to right. With --out DIR, per image DIR/<stem>.png (the image with each box and its text drawn above
   it, in the first font of --fonts that has each character) and DIR/res_<stem>.txt (ICDAR 2015 end-to-end results:
   x1,y1,...,x4,y4,transcription per line, what eval_dbnet --e2e scores).
   Exit status: 0, 1 when an image or a model cannot be read (named; the other images are still read), 2 on bad flags. */
#define OCR_IMPLEMENTATION
#include "ocr_tensor.h"
#include "ocr_nn.h"
#include "ocr_loss.h"
#include "ocr_dbnet.h"
#include "ocr_data.h"
#include "ocr_synth.h"
#include "ocr_rec.h"
#include "ocr_example.h"

#include <errno.h>
#include <sys/stat.h>

static const char *const SYNOPSIS = "--det FILE --rec FILE [options] image...";
static const char *prog = "ocr";

/* DejaVu covers Latin, Greek and Cyrillic; Nanum Gothic Hangul (and the Latin it falls back from). */
static const char *const DEFAULT_FONTS = "/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf,/usr/share/fonts/truetype/nanum/NanumGothic.ttf";

static void print_quoted(const char *s) {
    size_t cap = strlen(s) * 6 + 3; /* every byte escaped as \u00XX, the quotes, the NUL */
    char *q = (char *)malloc(cap);
    if (!q) { printf("null"); return; }
    q[0] = 0; /* ocr_json_quote appends */
    ocr_json_quote(q, cap, s);
    printf("%s", q);
    free(q);
}

static void print_points(const ocr_point *p, int n) {
    int k;
    printf("[");
    for (k = 0; k < n; k++) printf("%s[%g,%g]", k ? "," : "", p[k].x, p[k].y);
    printf("]");
}

static void print_json_line(const char *image, const ocr_image *img, const ocr_reading *r) {
    int i;
    printf("{\"image\":");
    print_quoted(image);
    printf(",\"width\":%d,\"height\":%d,\"seconds\":%.4f,\"det_seconds\":%.4f,\"rec_seconds\":%.4f,\"lines\":[", img->width, img->height,
           r->det_seconds + r->rec_seconds, r->det_seconds, r->rec_seconds);
    for (i = 0; i < r->n; i++) {
        const ocr_text_line *L = &r->lines[i];
        printf("%s{\"text\":", i ? "," : "");
        print_quoted(L->text);
        printf(",\"points\":");
        print_points(L->poly.points, L->poly.n_points);
        printf(",\"quad\":");
        print_points(L->quad, 4);
        printf(",\"det_score\":%.4f,\"rec_score\":%.4f,\"rotation\":%d}", L->det_score, L->rec_score, L->rotation);
    }
    printf("]}\n");
    fflush(stdout);
}

/* ICDAR 2015 end-to-end results: the 4 corners (the detection's, or the quad of a polygon) and the text. A text that
   would read back differently (quoted, or with a line break) is written quoted, as the RRC convention has it. */
static int write_results(const char *path, const ocr_reading *r) {
    char tmp[4400];
    FILE *f;
    int i, k, ok;
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    if (!(f = fopen(tmp, "w"))) return 0;
    for (i = 0; i < r->n; i++) {
        const ocr_text_line *L = &r->lines[i];
        const ocr_point *p = L->poly.n_points == 4 ? L->poly.points : L->quad;
        const char *t = L->text;
        for (k = 0; k < 4; k++) fprintf(f, "%d,%d,", (int)lrintf(p[k].x), (int)lrintf(p[k].y));
        if (t[0] == '"' || strpbrk(t, "\r\n")) {
            fputc('"', f);
            for (; *t; t++) {
                if (*t == '"' || *t == '\\') fputc('\\', f);
                fputc(*t == '\r' || *t == '\n' ? ' ' : *t, f);
            }
            fputs("\"\n", f);
        } else {
            fprintf(f, "%s\n", t);
        }
    }
    ok = fflush(f) == 0 && !ferror(f);
    ok &= fclose(f) == 0;
    if (!ok || rename(tmp, path) != 0) {
        remove(tmp);
        return 0;
    }
    return 1;
}

/* The overlay: each box, and its text on a dark band above it (below when there is no room above). */
static int write_overlay(ocr_ctx *ctx, const ocr_painter *painter, const char *path, const ocr_image *src, const ocr_reading *r,
                         int *missing, int32_t *first_missing) {
    static const unsigned char green[3] = {40, 255, 40};
    static const uint8_t yellow[3] = {255, 240, 60}, dark[3] = {0, 0, 0};
    ocr_image img;
    int i, rc;
    memset(&img, 0, sizeof img);
    if ((rc = ocr_image_alloc(ctx, &img, src->width, src->height, 3))) return rc;
    for (i = 0; i < src->width * src->height; i++) {
        int c;
        for (c = 0; c < 3; c++) img.pixels[(size_t)i * 3 + c] = src->pixels[(size_t)i * src->channels + (src->channels == 3 ? c : 0)];
    }
    for (i = 0; i < r->n; i++)
        ocr_ex_polygon_legible(img.pixels, img.width, img.height, r->lines[i].poly.points, r->lines[i].poly.n_points, green);
    for (i = 0; i < r->n && !rc; i++) {
        const ocr_text_line *L = &r->lines[i];
        float top = 1e30f, left = 1e30f, bottom = -1e30f, px, w, y;
        int k, x0, x1, yy, miss = 0;
        int32_t first = 0;
        for (k = 0; k < L->poly.n_points; k++) {
            top = L->poly.points[k].y < top ? L->poly.points[k].y : top;
            bottom = L->poly.points[k].y > bottom ? L->poly.points[k].y : bottom;
            left = L->poly.points[k].x < left ? L->poly.points[k].x : left;
        }
        px = 0.8f * hypotf(L->quad[3].x - L->quad[0].x, L->quad[3].y - L->quad[0].y); /* the text's height */
        px = px < 12 ? 12 : px > 32 ? 32 : px;
        w = ocr_painter_measure(painter, L->text, px);
        y = top - px - 4 >= 0 ? top - px - 4 : bottom + 4;
        x0 = (int)left - 2; x1 = (int)(left + w) + 2;
        for (yy = (int)y - 1; yy <= (int)(y + px) + 1; yy++)
            for (k = x0; k <= x1; k++)
                if (k >= 0 && yy >= 0 && k < img.width && yy < img.height) {
                    uint8_t *q = img.pixels + ((size_t)yy * img.width + k) * 3;
                    q[0] = (uint8_t)(q[0] / 4 + dark[0]); q[1] = (uint8_t)(q[1] / 4 + dark[1]); q[2] = (uint8_t)(q[2] / 4 + dark[2]);
                }
        rc = ocr_painter_draw(ctx, painter, &img, left, y, px, yellow, L->text, &miss, &first);
        if (miss && !*missing) *first_missing = first;
        *missing += miss;
    }
    if (!rc) rc = ocr_image_save_png(ctx, path, &img);
    ocr_image_free(&img);
    return rc;
}

int main(int argc, char **argv) {
    const char *det_path = NULL, *rec_path = NULL, *out_dir = NULL, *fonts = DEFAULT_FONTS, *charset = NULL, *device = "cpu";
    ocr_pipeline_config pc = ocr_pipeline_config_default();
    int short_side = 0, long_side = 0, threads = 0, n_images, i, failed = 0, missing_total = 0;
    float scale = pc.det_scale;
    ocr_ex_post_flags pf = ocr_ex_post_flags_default();
    const char *post_error;
    float rotate_below = pc.rotate_below, min_confidence = pc.min_confidence, margin = pc.crop.margin;
    int beam = pc.beam_width;
    int32_t first_missing = 0;
    ocr_ex_flag flags[] = {
        {"--det", OCR_EX_STRING, &det_path, "the detector checkpoint (train_dbnet's best.safetensors; required)"},
        {"--rec", OCR_EX_STRING, &rec_path, "the recognizer checkpoint (train_rec's best.safetensors; required)"},
        {"--out", OCR_EX_STRING, &out_dir, "write DIR/<stem>.png (boxes and text drawn) and DIR/res_<stem>.txt (ICDAR 2015 end to end)"},
        {"--fonts", OCR_EX_STRING, &fonts, "font files for the overlay's text, comma-separated, each character from the first that has it"},
        {"--scale", OCR_EX_FLOAT, &scale, "the detector sees the image scaled by this (sides rounded up to multiples of 32)"},
        {"--short-side", OCR_EX_INT, &short_side, "instead, scale the short side to this (0: use --scale)"},
        {"--long-side", OCR_EX_INT, &long_side, "instead, scale the long side to this (0: use --scale)"},
        OCR_EX_POST_FLAGS(pf, "detector: "),
        {"--margin", OCR_EX_FLOAT, &margin, "each detection is cropped with this fraction of its height around it"},
        {"--rotate-below", OCR_EX_FLOAT, &rotate_below, "crops read with a lower confidence are also read turned 180 degrees (0: never)"},
        {"--min-confidence", OCR_EX_FLOAT, &min_confidence, "lines read with a lower confidence are dropped"},
        {"--beam", OCR_EX_INT, &beam, "CTC prefix beam width (0: best path)"},
        {"--charset", OCR_EX_STRING, &charset, "refuse a recognizer whose charset is not this (latin, latin+space or a key file)"},
        {"--threads", OCR_EX_INT, &threads, "CPU threads; 0: all cores"},
        {"--device", OCR_EX_STRING, &device, "cpu or cuda (the CUDA build, build/cuda/ocr): both models on the GPU"},
    };
    const int n_flags = (int)(sizeof flags / sizeof flags[0]);
    ocr_ctx ctx;
    ocr_pipeline pipe;
    ocr_painter painter;
    ocr_reading reading;
    char stem[1024];

    n_images = ocr_ex_parse(argc, argv, SYNOPSIS, flags, n_flags);
    if (!det_path || !rec_path || n_images == 0) {
        fprintf(stderr, "%s: %s\n", prog, !det_path || !rec_path ? "--det and --rec are required" : "no image given");
        ocr_ex_usage(stderr, prog, SYNOPSIS, flags, n_flags);
        return 2;
    }
    if (!(scale >= 0.1f && scale <= 8) || short_side < 0 || long_side < 0 || short_side > OCR_IMAGE_MAX_SIDE ||
        long_side > OCR_IMAGE_MAX_SIDE || !(margin >= 0 && margin < 2) || !(rotate_below >= 0 && rotate_below <= 1) || !(min_confidence >= 0 && min_confidence <= 1) ||
        beam < 0 || threads < 0) {
        fprintf(stderr, "%s: out of range: --scale in [0.1, 8], --short-side and --long-side in [0, %d], "
                        "--rotate-below and --min-confidence in [0, 1], --margin in [0, 2), --beam >= 0, --threads >= 0\n",
                prog, OCR_IMAGE_MAX_SIDE);
        return 2;
    }
    if ((post_error = ocr_ex_post_config(&pf, &pc.post)) != NULL) {
        fprintf(stderr, "%s: %s\n", prog, post_error);
        return 2;
    }
    /* Outputs are named after the image: two images with one stem would overwrite each other's. */
    if (out_dir && !ocr_ex_unique_stems(prog, argv + 1, n_images)) return 2;
    if (out_dir && mkdir(out_dir, 0755) != 0 && errno != EEXIST) {
        fprintf(stderr, "%s: cannot create directory '%s': %s\n", prog, out_dir, strerror(errno));
        return 1;
    }
    if (ocr_ctx_init(&ctx, threads, 0) != OCR_OK) {
        fprintf(stderr, "%s: %s\n", prog, ocr_ctx_last_error(&ctx));
        return 1;
    }
    if ((i = ocr_ex_set_device(&ctx, prog, device)) != 0) {
        ocr_ctx_free(&ctx);
        return i;
    }
    memset(&painter, 0, sizeof painter);
    if (out_dir && ocr_painter_open(&ctx, &painter, fonts)) {
        fprintf(stderr, "%s: --fonts: %s (fonts-dejavu-core and fonts-nanum give the default ones)\n", prog, ocr_ctx_last_error(&ctx));
        ocr_ctx_free(&ctx);
        return 1;
    }
    pc.det_scale = scale;
    pc.det_short_side = short_side;
    pc.det_long_side = long_side;
    pc.crop.margin = margin;
    pc.rotate_below = rotate_below;
    pc.min_confidence = min_confidence;
    pc.beam_width = beam;
    pc.charset = charset;
    if (ocr_pipeline_open(&ctx, &pipe, det_path, rec_path, &pc)) {
        fprintf(stderr, "%s: %s\n", prog, ocr_ctx_last_error(&ctx));
        ocr_painter_close(&painter);
        ocr_ctx_free(&ctx);
        return 1;
    }
    memset(&reading, 0, sizeof reading);
    for (i = 0; i < n_images; i++) {
        const char *path = argv[1 + i];
        ocr_image img;
        memset(&img, 0, sizeof img);
        ocr_ex_stem(path, stem, sizeof stem);
        if (ocr_image_load(&ctx, path, &img) || ocr_pipeline_read(&ctx, &pipe, &img, &reading)) {
            const char *msg = ocr_ctx_last_error(&ctx);
            fprintf(stderr, "%s: '%s': %s%s\n", prog, path, msg, strstr(msg, "scale the long side") ? " (use --long-side)" : "");
            failed = 1;
        } else {
            print_json_line(path, &img, &reading);
            if (out_dir) {
                char file[4300];
                int missing = 0;
                int32_t first = 0;
                snprintf(file, sizeof file, "%s/%s.png", out_dir, stem);
                if (write_overlay(&ctx, &painter, file, &img, &reading, &missing, &first)) {
                    fprintf(stderr, "%s: '%s': %s\n", prog, file, ocr_ctx_last_error(&ctx));
                    failed = 1;
                }
                if (missing && !missing_total) first_missing = first;
                missing_total += missing;
                snprintf(file, sizeof file, "%s/res_%s.txt", out_dir, stem);
                if (!write_results(file, &reading)) {
                    fprintf(stderr, "%s: cannot write '%s': %s\n", prog, file, strerror(errno));
                    failed = 1;
                }
            }
        }
        ocr_image_free(&img);
    }
    if (missing_total)
        fprintf(stderr, "%s: warning: %d characters of the overlays are in none of --fonts (the first U+%04X): drawn as boxes\n", prog,
                missing_total, (unsigned)first_missing);
    ocr_reading_free(&reading);
    ocr_pipeline_close(&pipe);
    ocr_painter_close(&painter);
    ocr_ctx_free(&ctx);
    return failed;
}
