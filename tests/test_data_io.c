/* ocr_data.h [io]: content hash, image decode against OpenCV's decode of the same files, truncated and damaged
   files, PNG encode, ICDAR / Total-Text ground truth edge cases, ICDAR folders, LMDB written by python3-lmdb read
   back exactly, bad records named by key, reads from forked children, and the ICDAR -> LMDB converter checked by
   python3-lmdb. References: tools/make_data_fixtures.py (committed fixtures), tools/make_lmdb_ref.py (run live). */
#define _POSIX_C_SOURCE 200809L
#define OCR_IMPLEMENTATION
#include "ocr_tensor.h"
#include "ocr_data.h"
#include "ocr_test.h"
#include <pthread.h>
#include <lmdb.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#define FIX "tests/fixtures/data"
static char g_tmp[256];      /* per-run temporary directory */
static int g_lmdb_ready;     /* the python reference LMDBs exist */


static unsigned char *slurp(const char *path, size_t *size) {
    ocr_ctx ctx;
    unsigned char *b = NULL;
    ocr_ctx_init(&ctx, 1, 0);
    if (ocr_read_file(&ctx, path, (size_t)1 << 26, &b, size) != OCR_OK) fprintf(stderr, "  %s\n", ocr_ctx_last_error(&ctx));
    ocr_ctx_free(&ctx);
    return b;
}

/* ---- hash */

static void test_hash(void) {
    static const char msg[] = "The quick brown fox jumps over the lazy dog";
    ocr_hash128 whole = ocr_hash(msg, sizeof msg - 1), a, b;
    ocr_hasher h;
    char hex[33];
    size_t split;
    /* Known answers: the definition must never drift, or every cache key on disk changes meaning. */
    ocr_hash_hex(ocr_hash("", 0), hex);
    OCR_CHECK_MSG(strcmp(hex, "cf4a91ca88fbe106795eb315f2622862") == 0, "hash('') = %s", hex);
    ocr_hash_hex(whole, hex);
    OCR_CHECK_MSG(strcmp(hex, "ca9256c73456a96606e6f02c438016c5") == 0, "hash(fox) = %s", hex);
    for (split = 0; split <= sizeof msg - 1; split++) {
        size_t s2 = split / 3;
        ocr_hasher_init(&h, 0);
        ocr_hasher_update(&h, msg, s2);
        ocr_hasher_update(&h, msg + s2, split - s2);
        ocr_hasher_update(&h, msg + split, sizeof msg - 1 - split);
        OCR_CHECK(ocr_hash_equal(ocr_hasher_final(&h), whole));
    }
    OCR_CHECK(!ocr_hash_equal(ocr_hash("a", 1), ocr_hash("a\0", 2)));
    OCR_CHECK(!ocr_hash_equal(ocr_hash(msg, 10), ocr_hash(msg, 11)));
    ocr_hasher_init(&h, 0); ocr_hasher_str(&h, "ab"); ocr_hasher_str(&h, "c"); a = ocr_hasher_final(&h);
    ocr_hasher_init(&h, 0); ocr_hasher_str(&h, "a"); ocr_hasher_str(&h, "bc"); b = ocr_hasher_final(&h);
    OCR_CHECK(!ocr_hash_equal(a, b));
    ocr_hasher_init(&h, 0); ocr_hasher_f64(&h, 0.4); a = ocr_hasher_final(&h);
    ocr_hasher_init(&h, 0); ocr_hasher_f64(&h, 0.4000001); b = ocr_hasher_final(&h);
    OCR_CHECK(!ocr_hash_equal(a, b));
    ocr_hasher_init(&h, 1); ocr_hasher_update(&h, msg, 5); a = ocr_hasher_final(&h);
    ocr_hasher_init(&h, 2); ocr_hasher_update(&h, msg, 5); b = ocr_hasher_final(&h);
    OCR_CHECK(!ocr_hash_equal(a, b));
}

/* ---- images */

static const char *const k_images[] = {"rgb.png", "grey.png", "rgba.png", "grey16.png", "rgb.bmp", "grey.bmp",
                                       "rgb.jpg", "grey.jpg", "progressive.jpg"};

static int is_jpeg(const char *name) { return strstr(name, ".jpg") != NULL; }

/* Our decode against OpenCV's: exact for lossless formats; JPEG decoders differ by IDCT rounding and chroma
   upsampling, so a small mean difference and a bounded worst case. */
static void compare_pixels(const char *what, const ocr_image *img, const ocr_tensor *ref, int jpeg) {
    int64_t n, i, worst = 0;
    double sum = 0;
    OCR_CHECK_MSG(ref->shape.ndim == 3 && ref->shape.dim[0] == img->height && ref->shape.dim[1] == img->width && ref->shape.dim[2] == 3,
                  "%s: %dx%d vs reference", what, img->width, img->height);
    if (!(ref->shape.ndim == 3 && ref->shape.dim[0] == img->height && ref->shape.dim[1] == img->width)) return;
    OCR_CHECK(img->channels == 3);
    n = ocr_tensor_numel(ref);
    for (i = 0; i < n; i++) {
        int d = abs((int)img->pixels[i] - (int)((const uint8_t *)ref->data)[i]);
        sum += d;
        if (d > worst) worst = d;
    }
    if (jpeg) OCR_CHECK_MSG(sum / (double)n < 2.0 && worst <= 24, "%s: mean |diff| %.3f, worst %lld", what, sum / (double)n, (long long)worst);
    else OCR_CHECK_MSG(worst == 0, "%s: differs from OpenCV by up to %lld", what, (long long)worst);
}

static void test_decode_valid(void) {
    ocr_ctx ctx;
    ocr_safetensors st;
    size_t i;
    ocr_ctx_init(&ctx, 1, 0);
    OCR_CHECK_OK(&ctx, ocr_safetensors_open(&ctx, &st, FIX "/img/expected.safetensors"));
    for (i = 0; i < sizeof k_images / sizeof *k_images; i++) {
        char path[256];
        ocr_image img, probe;
        ocr_tensor ref;
        size_t size;
        unsigned char *bytes;
        snprintf(path, sizeof path, FIX "/img/%s", k_images[i]);
        OCR_CHECK_OK(&ctx, ocr_image_load(&ctx, path, &img));
        OCR_CHECK_OK(&ctx, ocr_safetensors_read(&ctx, &st, k_images[i], &ref));
        if (img.pixels && ref.data) compare_pixels(k_images[i], &img, &ref, is_jpeg(k_images[i]));
        bytes = slurp(path, &size);
        OCR_CHECK_OK(&ctx, ocr_image_probe(&ctx, bytes, size, &probe));
        OCR_CHECK(probe.width == 17 && probe.height == 11 && probe.pixels == NULL);
        free(bytes);
        ocr_tensor_free(&ref);
        ocr_image_free(&img);
    }
    ocr_safetensors_close(&st);
    ocr_ctx_free(&ctx);
}

/* Table-driven CRC-32, written independently of the library's bitwise one, to forge PNG headers. */
static uint32_t test_crc32(const unsigned char *p, size_t n) {
    uint32_t table[256], c;
    size_t i;
    int k;
    for (i = 0; i < 256; i++) {
        c = (uint32_t)i;
        for (k = 0; k < 8; k++) c = c & 1 ? 0xEDB88320u ^ (c >> 1) : c >> 1;
        table[i] = c;
    }
    c = 0xFFFFFFFFu;
    for (i = 0; i < n; i++) c = table[(c ^ p[i]) & 0xff] ^ (c >> 8);
    return c ^ 0xFFFFFFFFu;
}

static void put_be32(unsigned char *p, uint32_t v) { p[0] = (unsigned char)(v >> 24); p[1] = (unsigned char)(v >> 16); p[2] = (unsigned char)(v >> 8); p[3] = (unsigned char)v; }

static void test_decode_corrupt(void) {
    ocr_ctx ctx;
    size_t i, n, cut;
    int flips = ocr_test_sanitized() ? 40 : 300;
    ocr_ctx_init(&ctx, 1, 7);
    for (i = 0; i < sizeof k_images / sizeof *k_images; i++) {
        char path[256];
        unsigned char *bytes, *copy;
        int f, png = strstr(k_images[i], ".png") != NULL;
        snprintf(path, sizeof path, FIX "/img/%s", k_images[i]);
        bytes = slurp(path, &n);
        if (!bytes) continue;
        copy = (unsigned char *)malloc(n);
        /* Every truncation is an error, never a partly decoded image. */
        for (cut = 0; cut < n; cut++) {
            ocr_image img;
            int rc;
            memcpy(copy, bytes, cut);
            rc = ocr_image_decode(&ctx, copy, cut, &img);
            OCR_CHECK_MSG(rc == OCR_EFORMAT || rc == OCR_EUNSUPPORTED, "%s cut to %zu of %zu bytes: rc %d", k_images[i], cut, n, rc);
            if (rc == OCR_OK) ocr_image_free(&img);
        }
        /* Damaged bytes: never a crash (the sanitizer build watches); a PNG's CRCs catch every flip. */
        for (f = 0; f < flips; f++) {
            ocr_image img;
            size_t at = ocr_rng_below(&ctx.rng, (uint32_t)n);
            int rc;
            memcpy(copy, bytes, n);
            copy[at] ^= (unsigned char)(1 + ocr_rng_below(&ctx.rng, 255));
            rc = ocr_image_decode(&ctx, copy, n, &img);
            if (png) OCR_CHECK_MSG(rc != OCR_OK, "%s: flip at %zu not detected", k_images[i], at);
            if (rc == OCR_OK) ocr_image_free(&img);
        }
        if (png) {
            /* A header claiming 20000 x 11 pixels (valid CRC) is refused before any allocation. */
            ocr_image img;
            memcpy(copy, bytes, n);
            put_be32(copy + 16, 20000);
            put_be32(copy + 29, test_crc32(copy + 12, 17));
            OCR_CHECK_ERR(&ctx, ocr_image_decode(&ctx, copy, n, &img), OCR_ERANGE, "outside the caps");
        }
        free(copy);
        free(bytes);
    }
    {
        ocr_image img;
        OCR_CHECK_ERR(&ctx, ocr_image_decode(&ctx, "GIF89a\1\0\1\0", 10, &img), OCR_EUNSUPPORTED, "not a JPEG, PNG or BMP");
        OCR_CHECK_ERR(&ctx, ocr_image_decode(&ctx, "", 0, &img), OCR_EFORMAT, "empty");
        OCR_CHECK_ERR(&ctx, ocr_image_load(&ctx, FIX "/no-such-file.png", &img), OCR_EIO, "no-such-file.png");
        OCR_CHECK_ERR(&ctx, ocr_image_alloc(&ctx, &img, 20000, 10, 3), OCR_ERANGE, "20000x10");
        OCR_CHECK_ERR(&ctx, ocr_image_alloc(&ctx, &img, 16000, 16000, 3), OCR_ERANGE, "pixels");
        OCR_CHECK_ERR(&ctx, ocr_image_alloc(&ctx, &img, 4, 4, 5), OCR_EINVAL, "channels");
    }
    ocr_ctx_free(&ctx);
}

/* A 3x2 24-bit BMP, bottom-up (positive height) or top-down (negative height), of the same pixels. */
static size_t make_bmp(unsigned char *b, int top_down, const unsigned char rgb[2][3][3]) {
    int x, y, row = 12; /* 3 pixels * 3 bytes = 9, padded to 12 */
    size_t off = 54, n = off + (size_t)row * 2;
    memset(b, 0, n);
    b[0] = 'B'; b[1] = 'M';
    b[2] = (unsigned char)n; b[10] = (unsigned char)off; b[14] = 40;
    b[18] = 3;                                   /* width */
    b[22] = top_down ? 0xFE : 2;                 /* height: -2 or 2, little-endian int32 */
    if (top_down) b[23] = b[24] = b[25] = 0xFF;
    b[26] = 1; b[28] = 24;                       /* planes, bits per pixel; compression 0 */
    for (y = 0; y < 2; y++)
        for (x = 0; x < 3; x++) {
            int file_row = top_down ? y : 1 - y;    /* bottom-up files store the last row first */
            unsigned char *px = b + off + (size_t)file_row * row + (size_t)x * 3;
            px[0] = rgb[y][x][2]; px[1] = rgb[y][x][1]; px[2] = rgb[y][x][0]; /* BGR */
        }
    return n;
}

static void test_bmp_top_down(void) {
    static const unsigned char rgb[2][3][3] = {{{255, 0, 0}, {0, 255, 0}, {0, 0, 255}}, {{10, 20, 30}, {40, 50, 60}, {70, 80, 90}}};
    unsigned char bu[128], td[128];
    size_t nb = make_bmp(bu, 0, rgb), nt = make_bmp(td, 1, rgb);
    ocr_ctx ctx;
    ocr_image a, b;
    ocr_ctx_init(&ctx, 1, 0);
    OCR_CHECK_OK(&ctx, ocr_image_decode(&ctx, bu, nb, &a));
    OCR_CHECK_OK(&ctx, ocr_image_decode(&ctx, td, nt, &b)); /* was refused as "3x-2 ... outside the caps" */
    OCR_CHECK(a.width == 3 && a.height == 2 && b.width == 3 && b.height == 2);
    if (a.pixels && b.pixels && b.width == 3 && b.height == 2) {
        OCR_CHECK(memcmp(a.pixels, rgb, 18) == 0);
        OCR_CHECK(memcmp(b.pixels, rgb, 18) == 0);
    }
    ocr_image_free(&a);
    ocr_image_free(&b);
    OCR_CHECK_OK(&ctx, ocr_image_probe(&ctx, td, nt, &b));
    OCR_CHECK(b.width == 3 && b.height == 2);
    ocr_ctx_free(&ctx);
}

static void test_png_encode(void) {
    ocr_ctx ctx;
    int c, x, y;
    ocr_ctx_init(&ctx, 1, 3);
    for (c = 1; c <= 4; c++) {
        ocr_image img, back;
        unsigned char *png;
        size_t size;
        ocr_tensor chw;
        OCR_CHECK_OK(&ctx, ocr_image_alloc(&ctx, &img, 13, 9, c));
        for (x = 0; x < 13 * 9 * c; x++) img.pixels[x] = (uint8_t)ocr_rng_below(&ctx.rng, 256);
        OCR_CHECK_OK(&ctx, ocr_image_encode_png(&ctx, &img, &png, &size));
        OCR_CHECK_OK(&ctx, ocr_image_decode(&ctx, png, size, &back));
        if (back.pixels) {
            int bad = 0;
            for (y = 0; y < 9; y++)
                for (x = 0; x < 13; x++) {
                    const uint8_t *s = img.pixels + (y * 13 + x) * c, *d = back.pixels + (y * 13 + x) * 3;
                    int k;
                    for (k = 0; k < 3; k++) bad += d[k] != s[c >= 3 ? k : 0]; /* grey replicated, alpha dropped */
                }
            OCR_CHECK_MSG(bad == 0, "%d channels: %d values differ after the PNG round trip", c, bad);
        }
        /* to_chw: value/255, top-left, zero padding. */
        OCR_CHECK_OK(&ctx, ocr_tensor_alloc(&ctx, &chw, "chw", OCR_F32, OCR_DEVICE_CPU, ocr_shape3(c, 10, 16)));
        OCR_CHECK_OK(&ctx, ocr_image_to_chw(&ctx, &img, &chw));
        {
            const float *t = (const float *)chw.data;
            OCR_CHECK(fabsf(t[(c - 1) * 160 + 8 * 16 + 12] - img.pixels[(8 * 13 + 12) * c + c - 1] / 255.0f) < 1e-7f);
            OCR_CHECK(t[(c - 1) * 160 + 9 * 16 + 3] == 0.0f && t[15] == 0.0f);
        }
        ocr_tensor_free(&chw);
        OCR_CHECK_OK(&ctx, ocr_tensor_alloc(&ctx, &chw, "small", OCR_F32, OCR_DEVICE_CPU, ocr_shape3(c, 8, 16)));
        OCR_CHECK_ERR(&ctx, ocr_image_to_chw(&ctx, &img, &chw), OCR_ESHAPE, "'small'");
        ocr_tensor_free(&chw);
        free(png);
        ocr_image_free(&back);
        ocr_image_free(&img);
    }
    ocr_ctx_free(&ctx);
}

/* ---- ground truth */

static void check_poly(const ocr_polygon *p, int n, const float *xy, const char *text, int ignore) {
    int k;
    OCR_CHECK_MSG(p->n_points == n, "%d points, expected %d", p->n_points, n);
    if (p->n_points != n) return;
    for (k = 0; k < n; k++) OCR_CHECK_MSG(p->points[k].x == xy[2 * k] && p->points[k].y == xy[2 * k + 1], "point %d", k);
    OCR_CHECK_MSG(p->text && strcmp(p->text, text) == 0, "text '%s', expected '%s'", p->text ? p->text : "(null)", text);
    OCR_CHECK(p->ignore == ignore);
}

static void test_gt_parse(void) {
    static const float q1[] = {377, 117, 463, 117, 465, 130, 378, 130}, q2[] = {493, 115, 519, 115, 519, 131, 493, 131},
                       q3[] = {374, 155, 409, 155, 409, 170, 374, 170}, q4[] = {1, 2, 3, 4, 5, 6, 7, 8},
                       q5[] = {10, 20, 30, 20, 30, 40, 10, 40}, q6[] = {-5, -6, 50.5f, -6, 50.5f, 12.25f, -5, 12.25f},
                       t1[] = {259, 313, 389, 427, 354, 302, 542, 462, 417, 459, 507, 582}, t2[] = {1, 1, 9, 1, 9, 9, 1, 9, 5, 12},
                       t3[] = {0, 0, 4, 0, 4, 4};
    ocr_ctx ctx;
    ocr_polygon *p;
    int n;
    unsigned char *b;
    size_t size;
    ocr_ctx_init(&ctx, 1, 0);
    b = slurp(FIX "/icdar/gts/gt_img_1.txt", &size);
    OCR_CHECK_OK(&ctx, ocr_gt_parse(&ctx, "gt_img_1.txt", (const char *)b, size, OCR_GT_ICDAR2015, &p, &n));
    OCR_CHECK(n == 6);
    if (n == 6) {
        check_poly(&p[0], 4, q1, "Genaxis Theatre", 0);   /* BOM and CRLF stripped */
        check_poly(&p[1], 4, q2, "[06]", 0);
        check_poly(&p[2], 4, q3, "###", 1);               /* blank line skipped */
        check_poly(&p[3], 4, q4, "Hello, world, again", 0);
        check_poly(&p[4], 4, q5, "say \"hi\"", 0);
        check_poly(&p[5], 4, q6, "2017", 0);
    }
    ocr_polygons_free(p, n);
    free(b);
    b = slurp(FIX "/totaltext/gts/img11.txt", &size);
    OCR_CHECK_OK(&ctx, ocr_gt_parse(&ctx, "img11.txt", (const char *)b, size, OCR_GT_POLYGON, &p, &n));
    OCR_CHECK(n == 3);
    if (n == 3) {
        check_poly(&p[0], 6, t1, "PAUL", 0);
        check_poly(&p[1], 5, t2, "###", 1);
        check_poly(&p[2], 3, t3, "12,34", 0);
    }
    ocr_polygons_free(p, n);
    free(b);
#define GT(s, fmt) ocr_gt_parse(&ctx, "g.txt", s, strlen(s), fmt, &p, &n)
    OCR_CHECK_OK(&ctx, GT("1,2,3,4,5,6,7,8", OCR_GT_ICDAR2015));
    OCR_CHECK(n == 1 && p[0].text && p[0].text[0] == 0);
    ocr_polygons_free(p, n);
    OCR_CHECK_OK(&ctx, GT("", OCR_GT_ICDAR2015));
    OCR_CHECK(n == 0 && p == NULL);
    OCR_CHECK_ERR(&ctx, GT("1,2,3,4,5,6,7,8,ok\n1,2,x3,4,5,6,7,8,t\n", OCR_GT_ICDAR2015), OCR_EFORMAT, "line 2: field 3 ('x3')");
    OCR_CHECK_ERR(&ctx, GT("1,2,3,4,5,6,7\n", OCR_GT_ICDAR2015), OCR_EFORMAT, "line 1: 7 numbers");
    OCR_CHECK_ERR(&ctx, GT("1,2,3,4,nan,6,7,8,t", OCR_GT_ICDAR2015), OCR_EFORMAT, "field 5 ('nan')");
    OCR_CHECK_ERR(&ctx, GT("1,2,3,4,5e7,6,7,8,t", OCR_GT_ICDAR2015), OCR_ERANGE, "coordinate 5 is 5e+07");
    OCR_CHECK_ERR(&ctx, GT("1,2,3,4,t", OCR_GT_POLYGON), OCR_EFORMAT, "line 1: 4 coordinates");
    /* a missing coordinate (or a transcription starting with a number) is an error, not a shorter polygon whose
       transcription swallowed the stray number */
    OCR_CHECK_ERR(&ctx, GT("1,1,9,1,9,9,1,9,5,text", OCR_GT_POLYGON), OCR_EFORMAT, "line 1: 9 numbers before the transcription, an odd count");
    OCR_CHECK_OK(&ctx, GT("1,1,9,1,9,9,\"5,text\"", OCR_GT_POLYGON));
    OCR_CHECK(n == 1 && p[0].n_points == 3 && p[0].text && strcmp(p[0].text, "5,text") == 0);
    ocr_polygons_free(p, n);
    OCR_CHECK_ERR(&ctx, GT("1,2,3,4,5,6,7,8,\xff\xfe", OCR_GT_ICDAR2015), OCR_EFORMAT, "not UTF-8 text (bad byte 0xff at offset 16)");
#undef GT
    ocr_ctx_free(&ctx);
}

static void check_result_poly(const ocr_polygon *p, int n, const float *xy) {
    int k;
    OCR_CHECK_MSG(p->n_points == n, "%d points, expected %d", p->n_points, n);
    if (p->n_points != n) return;
    for (k = 0; k < n; k++) OCR_CHECK_MSG(p->points[k].x == xy[2 * k] && p->points[k].y == xy[2 * k + 1], "point %d", k);
    OCR_CHECK(p->text == NULL && p->ignore == 0);
}

/* Result files (eval_dbnet --pred): fields are split per line, so a trailing comma is an error naming the line instead
   of taking its number from the next line, as strtod (which skips the newline) did. */
static void test_result_parse(void) {
    ocr_ctx ctx;
    ocr_polygon *p;
    int n;
    static const float q[] = {10, 10, 60, 10, 60, 30, 10, 30}, t3[] = {1.5f, -2, 3, 4, 5e-1f, 6};
    ocr_ctx_init(&ctx, 1, 0);
#define RP(s) ocr_result_parse(&ctx, "res_img_1.txt", s, strlen(s), &p, &n)
    OCR_CHECK_OK(&ctx, RP("\xEF\xBB\xBF" "10,10,60,10,60,30,10,30\r\n\n  \t\r\n 10 , 10,60,10,60,30,10,30,0.87\n1.5,-2,+3,4,5e-1,6"));
    OCR_CHECK(n == 3);
    if (n == 3) {
        check_result_poly(&p[0], 4, q);
        check_result_poly(&p[1], 4, q);
        check_result_poly(&p[2], 3, t3);
    }
    ocr_polygons_free(p, n);
    OCR_CHECK_OK(&ctx, RP(""));
    OCR_CHECK(n == 0 && p == NULL);
    OCR_CHECK_OK(&ctx, RP("\n\n"));
    OCR_CHECK(n == 0 && p == NULL);
    /* the reported case: the last field is empty and the next line starts with a number */
    OCR_CHECK_ERR(&ctx, RP("10,10,60,10,60,30,10,\n30,40,80,40,80,60,30,60\n"), OCR_EFORMAT, "'res_img_1.txt' line 1: field 8 is empty");
    OCR_CHECK(n == 0 && p == NULL);
    OCR_CHECK_ERR(&ctx, RP("10,10,60,10,60,30,10,30\n10,10,60,10,60,30,10,30,\n5"), OCR_EFORMAT, "line 2: field 9 is empty");
    OCR_CHECK_ERR(&ctx, RP("10,,60,10,60,30,10,30"), OCR_EFORMAT, "line 1: field 2 is empty");
    OCR_CHECK_ERR(&ctx, RP("10,10,60,10,60,30,10,30,  \n"), OCR_EFORMAT, "field 9 is empty");
    /* a number split across lines leaves a line of one number */
    OCR_CHECK_ERR(&ctx, RP("10,10,60,10,60,30,10,3\n0\n"), OCR_EFORMAT, "'res_img_1.txt' line 2: 1 numbers");
    OCR_CHECK_ERR(&ctx, RP("10,10,abc,10,60,30,10,30"), OCR_EFORMAT, "line 1: field 3 ('abc') is not a number");
    OCR_CHECK_ERR(&ctx, RP("10,10,0x3C,10,60,30,10,30"), OCR_EFORMAT, "field 3 ('0x3C') is not a number");
    OCR_CHECK_ERR(&ctx, RP("10,10,nan,10,60,30,10,30"), OCR_EFORMAT, "field 3 ('nan') is not a number");
    OCR_CHECK_ERR(&ctx, RP("10,10,60 70,10,60,30,10,30"), OCR_EFORMAT, "field 3 ('60 70') is not a number");
    OCR_CHECK_ERR(&ctx, RP("10;10;60;10;60;30;10;30"), OCR_EFORMAT, "field 1 ('10;10;60;10;60;30;10;30') is not a number");
    OCR_CHECK_ERR(&ctx, RP("1,2,3,4,5"), OCR_EFORMAT, "line 1: 5 numbers; a result polygon needs at least 3 points");
    OCR_CHECK_ERR(&ctx, RP("1,2,3,4"), OCR_EFORMAT, "line 1: 4 numbers");
    OCR_CHECK_ERR(&ctx, RP("10,10,6e7,10,60,30,10,30"), OCR_ERANGE, "line 1: coordinate 3 is 6e+07");
    OCR_CHECK_ERR(&ctx, RP("10,10,60,10,60,30,10,30,1e999"), OCR_ERANGE, "line 1: the score is inf");
#undef RP
    ocr_ctx_free(&ctx);
}

static void test_label_json(void) {
    ocr_ctx ctx;
    ocr_polygon *p;
    int n;
    static const float q[] = {0, 0, 4.5f, 0, 4.5f, 4, 0, 4};
    ocr_ctx_init(&ctx, 1, 0);
#define LJ(s) ocr_label_parse_json(&ctx, "label-000000007", s, strlen(s), &p, &n)
    OCR_CHECK_OK(&ctx, LJ("[{\"points\": [[0,0],[4.5,0],[4.5,4],[0,4]], \"transcription\": \"a\\u00e9\\\"\", \"x\": 1},"
                          " {\"points\": [[0,0],[4.5,0],[4.5,4],[0,4]], \"transcription\": \"###\"},"
                          " {\"points\": [[0,0],[4.5,0],[4.5,4],[0,4]], \"ignore\": true}]"));
    OCR_CHECK(n == 3);
    if (n == 3) {
        check_poly(&p[0], 4, q, "a\xc3\xa9\"", 0);
        check_poly(&p[1], 4, q, "###", 1);
        OCR_CHECK(p[2].ignore == 1 && p[2].text == NULL);
    }
    ocr_polygons_free(p, n);
    OCR_CHECK_OK(&ctx, LJ(" [] "));
    OCR_CHECK(n == 0);
    OCR_CHECK_ERR(&ctx, LJ("{\"points\": []}"), OCR_EFORMAT, "'label-000000007' must be a JSON list");
    OCR_CHECK_ERR(&ctx, LJ("[{\"points\": [[0,0],[1,1]]}]"), OCR_EFORMAT, "instance 0 has 2 points");
    OCR_CHECK_ERR(&ctx, LJ("[{\"points\": [[0,0],[1,1],[2,\"3\"]]}]"), OCR_EFORMAT, "point 2: y is not a number");
    OCR_CHECK_ERR(&ctx, LJ("[{\"points\": [[0,0],[1,1],[2,-1e400]]}]"), OCR_ERANGE, "point 2: y = -1e400");
    OCR_CHECK_ERR(&ctx, LJ("[{\"points\": [[0,0],[1,1],[2,2]], \"transcription\": 5}]"), OCR_EFORMAT, "transcription is not a string");
    OCR_CHECK_ERR(&ctx, LJ("[{\"points\": [[0,0],[1,1],[2,2]]},]"), OCR_EFORMAT, "'label-000000007' is not valid JSON");
#undef LJ
    ocr_ctx_free(&ctx);
}

/* ---- ICDAR folders */

static void test_icdar_dataset(void) {
    ocr_ctx ctx;
    ocr_dataset ds;
    ocr_sample s, s2;
    char cmd[2000], dir[300];
    ocr_ctx_init(&ctx, 1, 0);
    OCR_CHECK_OK(&ctx, ocr_dataset_open_icdar(&ctx, &ds, FIX "/icdar/images", FIX "/icdar/gts", OCR_GT_ICDAR2015));
    OCR_CHECK(ds.count == 3);
    if (ds.count == 3) {
        OCR_CHECK_OK(&ctx, ocr_dataset_get(&ctx, &ds, 0, 0, &s));
        OCR_CHECK(strcmp(s.id, "img_1.png") == 0 && s.n_polys == 6 && s.image.width == 32 && s.image.height == 24 && s.image.pixels);
        OCR_CHECK_OK(&ctx, ocr_dataset_get(&ctx, &ds, 0, OCR_SAMPLE_LABELS_ONLY, &s2));
        OCR_CHECK(s2.image.pixels == NULL && s2.image.width == 32 && s2.n_polys == 6 && ocr_hash_equal(s.content_hash, s2.content_hash));
        OCR_CHECK(s.content_hash.lo || s.content_hash.hi);
        ocr_sample_free(&s);
        ocr_sample_free(&s2);
        OCR_CHECK_OK(&ctx, ocr_dataset_get(&ctx, &ds, 1, 0, &s)); /* img_10.bmp: DB naming, empty ground truth */
        OCR_CHECK(strcmp(s.id, "img_10.bmp") == 0 && s.n_polys == 0 && s.image.height == 32);
        ocr_sample_free(&s);
        OCR_CHECK_OK(&ctx, ocr_dataset_get(&ctx, &ds, 2, 0, &s));
        OCR_CHECK(strcmp(s.id, "img_2.jpg") == 0 && s.n_polys == 2 && s.n_polys == 2 && strcmp(s.polys[1].text, "\xe6\x97\xa5\xe6\x9c\xac") == 0);
        ocr_sample_free(&s);
        OCR_CHECK_ERR(&ctx, ocr_dataset_get(&ctx, &ds, 3, 0, &s), OCR_ERANGE, "index 3 outside [0, 3)");
    }
    ocr_dataset_close(&ds);
    OCR_CHECK_OK(&ctx, ocr_dataset_open_icdar(&ctx, &ds, FIX "/totaltext/images", FIX "/totaltext/gts", OCR_GT_POLYGON));
    OCR_CHECK(ds.count == 1);
    if (ds.count == 1) {
        OCR_CHECK_OK(&ctx, ocr_dataset_get(&ctx, &ds, 0, 0, &s));
        OCR_CHECK(s.n_polys == 3 && s.polys[0].n_points == 6);
        ocr_sample_free(&s);
    }
    ocr_dataset_close(&ds);
    /* A folder whose image lacks ground truth, and one whose ground truth is broken. */
    snprintf(dir, sizeof dir, "%s/icdar_bad", g_tmp);
    snprintf(cmd, sizeof cmd, "mkdir -p %s/im %s/gt && cp " FIX "/icdar/images/img_1.png %s/im/ && printf '1,2,3,4,5,6,7,8,t\\n1,2\\n' > %s/gt/x.txt",
             dir, dir, dir, dir);
    OCR_CHECK(system(cmd) == 0);
    snprintf(cmd, sizeof cmd, "%s/im", dir);
    snprintf(dir + strlen(dir), sizeof dir - strlen(dir), "/gt");
    OCR_CHECK_ERR(&ctx, ocr_dataset_open_icdar(&ctx, &ds, cmd, dir, OCR_GT_ICDAR2015), OCR_ENOTFOUND, "image 'img_1.png' has no ground truth");
    {
        char mv[800];
        snprintf(mv, sizeof mv, "mv %s/x.txt %s/gt_img_1.txt", dir, dir);
        OCR_CHECK(system(mv) == 0);
    }
    OCR_CHECK_OK(&ctx, ocr_dataset_open_icdar(&ctx, &ds, cmd, dir, OCR_GT_ICDAR2015));
    OCR_CHECK_ERR(&ctx, ocr_dataset_get(&ctx, &ds, 0, 0, &s), OCR_EFORMAT, "gt_img_1.txt' line 2: 2 numbers");
    ocr_dataset_close(&ds);
    OCR_CHECK_ERR(&ctx, ocr_dataset_open_icdar(&ctx, &ds, FIX "/nowhere", dir, OCR_GT_ICDAR2015), OCR_EIO, "nowhere");
    ocr_ctx_free(&ctx);
}

/* ---- LMDB */

static int make_reference_lmdb(void) {
    char cmd[600];
    snprintf(cmd, sizeof cmd, "/usr/bin/python3 tools/make_lmdb_ref.py %s/ref", g_tmp);
    if (system(cmd) != 0) {
        fprintf(stderr, "  tools/make_lmdb_ref.py failed: this test needs Debian's python3 with python3-lmdb, python3-opencv and "
                        "python3-numpy (apt-get install python3-lmdb python3-opencv python3-numpy)\n");
        return 0;
    }
    return 1;
}

static void test_lmdb_reference(void) {
    ocr_ctx ctx;
    ocr_dataset ds;
    ocr_safetensors st;
    char path[400];
    int64_t i;
    OCR_CHECK_MSG(g_lmdb_ready, "reference LMDBs missing");
    if (!g_lmdb_ready) return;
    ocr_ctx_init(&ctx, 1, 0);
    snprintf(path, sizeof path, "%s/ref/expected.safetensors", g_tmp);
    OCR_CHECK_OK(&ctx, ocr_safetensors_open(&ctx, &st, path));
    snprintf(path, sizeof path, "%s/ref/good", g_tmp);
    OCR_CHECK_OK(&ctx, ocr_dataset_open_lmdb(&ctx, &ds, path));
    OCR_CHECK(ds.count == 12);
    for (i = 0; i < ds.count; i++) {
        char key[64], texts_key[64];
        ocr_sample s;
        ocr_tensor ref, pts, info;
        const char *texts, *fmt;
        ocr_json_tok toks[64];
        int nt, k, at = 0, q;
        snprintf(key, sizeof key, "image-%09d", (int)i + 1);
        snprintf(texts_key, sizeof texts_key, "texts-%09d", (int)i + 1);
        OCR_CHECK_OK(&ctx, ocr_dataset_get(&ctx, &ds, i, 0, &s));
        OCR_CHECK(strcmp(s.id, key) == 0);
        OCR_CHECK_OK(&ctx, ocr_safetensors_read(&ctx, &st, key, &ref));
        snprintf(key, sizeof key, "format-%09d", (int)i + 1);
        fmt = ocr_safetensors_meta(&st, key);
        if (s.image.pixels && ref.data) compare_pixels(key, &s.image, &ref, fmt && strcmp(fmt, "jpg") == 0);
        snprintf(key, sizeof key, "points-%09d", (int)i + 1);
        OCR_CHECK_OK(&ctx, ocr_safetensors_read(&ctx, &st, key, &pts));
        snprintf(key, sizeof key, "info-%09d", (int)i + 1);
        OCR_CHECK_OK(&ctx, ocr_safetensors_read(&ctx, &st, key, &info));
        texts = ocr_safetensors_meta(&st, texts_key);
        OCR_CHECK(texts && ocr_json_parse(&ctx, texts, strlen(texts), toks, 64, &nt) == OCR_OK);
        OCR_CHECK_MSG(info.data && s.n_polys == info.shape.dim[0], "sample %d: %d polygons, expected %d", (int)i, s.n_polys,
                      info.data ? (int)info.shape.dim[0] : -1);
        for (q = 0; info.data && q < s.n_polys && q < info.shape.dim[0]; q++) {
            const ocr_polygon *p = &s.polys[q];
            char want[256];
            OCR_CHECK(p->n_points == ((const int32_t *)info.data)[2 * q] && p->ignore == ((const int32_t *)info.data)[2 * q + 1]);
            for (k = 0; k < p->n_points && at < pts.shape.dim[0]; k++, at++)
                OCR_CHECK(p->points[k].x == ((const float *)pts.data)[2 * at] && p->points[k].y == ((const float *)pts.data)[2 * at + 1]);
            OCR_CHECK(ocr_json_string(texts, &toks[ocr_json_child(toks, 0, q)], want, sizeof want));
            OCR_CHECK_MSG(p->text && strcmp(p->text, want) == 0, "sample %d polygon %d: '%s' vs '%s'", (int)i, q, p->text ? p->text : "", want);
        }
        ocr_tensor_free(&ref);
        ocr_tensor_free(&pts);
        ocr_tensor_free(&info);
        ocr_sample_free(&s);
    }
    ocr_dataset_close(&ds);
    ocr_safetensors_close(&st);
    /* Bad records: each an error that names the key. */
    snprintf(path, sizeof path, "%s/ref/bad", g_tmp);
    OCR_CHECK_OK(&ctx, ocr_dataset_open_lmdb(&ctx, &ds, path));
    OCR_CHECK(ds.count == 10);
    if (ds.count == 10) {
        static const struct { int code; const char *a, *b; } want[] = {
            {OCR_EFORMAT, "key 'label-000000001'", "is not valid JSON"},
            {OCR_EFORMAT, "key 'label-000000002'", "instance 0 has 2 points"},
            {OCR_ERANGE, "key 'label-000000003'", "x = 1e999 is not finite"},
            {OCR_ENOTFOUND, "key 'image-000000004' is missing", ""},
            {OCR_EFORMAT, "key 'image-000000005'", "truncated"},
            {OCR_EFORMAT, "key 'label-000000006' is not UTF-8", ""},
            {OCR_EFORMAT, "key 'label-000000007'", "point 0 is not a pair"},
            {OCR_EFORMAT, "key 'label-000000008'", "has no \"points\" list"},
            {OCR_OK, "", ""},
            {OCR_ENOTFOUND, "key 'image-000000010' is missing", ""}};
        for (i = 0; i < 10; i++) {
            ocr_sample s;
            int rc = ocr_dataset_get(&ctx, &ds, i, 0, &s);
            OCR_CHECK_MSG(rc == want[i].code && strstr(ocr_ctx_last_error(&ctx), want[i].a) && strstr(ocr_ctx_last_error(&ctx), want[i].b),
                          "record %d: rc %d, message \"%s\"", (int)i + 1, rc, ocr_ctx_last_error(&ctx));
            ocr_ctx_clear_error(&ctx);
            ocr_sample_free(&s);
        }
    }
    ocr_dataset_close(&ds);
    snprintf(path, sizeof path, "%s/ref/nonum", g_tmp);
    OCR_CHECK_ERR(&ctx, ocr_dataset_open_lmdb(&ctx, &ds, path), OCR_EFORMAT, "no key 'num-samples'");
    snprintf(path, sizeof path, "%s/ref/none", g_tmp);
    OCR_CHECK_ERR(&ctx, ocr_dataset_open_lmdb(&ctx, &ds, path), OCR_EIO, "ref/none");
    ocr_ctx_free(&ctx);
}

/* Everything a reader sees of sample i, as one hash. */
static ocr_hash128 sample_digest(ocr_ctx *ctx, ocr_dataset *ds, int64_t i, int *rc) {
    ocr_sample s;
    ocr_hasher h;
    int q;
    ocr_hasher_init(&h, 9);
    *rc = ocr_dataset_get(ctx, ds, i, 0, &s);
    if (*rc) return ocr_hasher_final(&h);
    ocr_hasher_update(&h, s.image.pixels, (size_t)s.image.width * (size_t)s.image.height * 3);
    for (q = 0; q < s.n_polys; q++) {
        ocr_hasher_update(&h, s.polys[q].points, (size_t)s.polys[q].n_points * sizeof(ocr_point));
        ocr_hasher_str(&h, s.polys[q].text);
    }
    ocr_sample_free(&s);
    return ocr_hasher_final(&h);
}

typedef struct { ocr_dataset *ds; const ocr_hash128 *want; int rounds, bad; } reader_arg;

static void *reader_thread(void *p) {
    reader_arg *a = (reader_arg *)p;
    ocr_ctx ctx;
    int r, rc;
    int64_t i;
    ocr_ctx_init(&ctx, 1, 0);
    for (r = 0; r < a->rounds; r++)
        for (i = 0; i < a->ds->count; i++)
            if (!ocr_hash_equal(sample_digest(&ctx, a->ds, i, &rc), a->want[i]) || rc) a->bad++;
    ocr_ctx_free(&ctx);
    return NULL;
}

static void test_lmdb_fork(void) {
    ocr_ctx ctx;
    ocr_dataset ds;
    ocr_hash128 want[16];
    char path[400];
    pid_t kids[4];
    int i, rc, rounds = ocr_test_sanitized() ? 5 : 30, parent_bad = 0;
    if (!g_lmdb_ready) { OCR_CHECK_MSG(0, "reference LMDBs missing"); return; }
    ocr_ctx_init(&ctx, 1, 0);
    snprintf(path, sizeof path, "%s/ref/good", g_tmp);
    OCR_CHECK_OK(&ctx, ocr_dataset_open_lmdb(&ctx, &ds, path));
    if (ds.count != 12) { ocr_ctx_free(&ctx); return; }
    for (i = 0; i < 12; i++) { want[i] = sample_digest(&ctx, &ds, i, &rc); OCR_CHECK_OK(&ctx, rc); }
    fflush(stdout);
    fflush(stderr);
    for (i = 0; i < 4; i++) {
        kids[i] = fork();
        if (kids[i] == 0) {
            /* The child inherited the parent's open environment: it must open its own, from two threads at once. */
            pthread_t th[2];
            reader_arg a[2];
            int t, bad = 0;
            for (t = 0; t < 2; t++) {
                a[t].ds = &ds; a[t].want = want; a[t].rounds = rounds; a[t].bad = 0;
                pthread_create(&th[t], NULL, reader_thread, &a[t]);
            }
            for (t = 0; t < 2; t++) { pthread_join(th[t], NULL); bad += a[t].bad; }
            ocr_dataset_close(&ds); /* closes the child's environment only */
            _exit(bad ? 3 : 0);
        }
        OCR_CHECK(kids[i] > 0);
    }
    /* The parent keeps reading while the children do. */
    for (rc = 0; rc < rounds; rc++) {
        int64_t k;
        for (k = 0; k < ds.count; k++) {
            int r;
            if (!ocr_hash_equal(sample_digest(&ctx, &ds, k, &r), want[k]) || r) parent_bad++;
        }
    }
    for (i = 0; i < 4; i++) {
        int status = 0;
        if (kids[i] > 0) {
            waitpid(kids[i], &status, 0);
            OCR_CHECK_MSG(WIFEXITED(status) && WEXITSTATUS(status) == 0, "child %d: status %d (3 = mismatching reads)", i, status);
        }
    }
    OCR_CHECK(parent_bad == 0);
    for (i = 0; i < 12; i++) OCR_CHECK(ocr_hash_equal(sample_digest(&ctx, &ds, i, &rc), want[i]) && rc == 0);
    ocr_dataset_close(&ds);
    ocr_ctx_free(&ctx);
}

static void progress_count(void *user, int64_t done, int64_t total) { *(int64_t *)user = done * 1000 + total; }

static void test_lmdb_writer(void) {
    ocr_ctx ctx;
    ocr_dataset icdar, lm;
    char path[400], cmd[600], line[512];
    int64_t i, prog = 0;
    FILE *f;
    int saw_theatre = 0, saw_count = 0;
    ocr_ctx_init(&ctx, 1, 0);
    snprintf(path, sizeof path, "%s/converted", g_tmp);
    OCR_CHECK_OK(&ctx, ocr_dataset_open_icdar(&ctx, &icdar, FIX "/icdar/images", FIX "/icdar/gts", OCR_GT_ICDAR2015));
    OCR_CHECK_OK(&ctx, ocr_lmdb_write_dataset(&ctx, path, &icdar, progress_count, &prog));
    OCR_CHECK(prog == 3003);
    OCR_CHECK_ERR(&ctx, ocr_lmdb_write_dataset(&ctx, path, &icdar, NULL, NULL), OCR_EINVAL, "already holds an LMDB");
    OCR_CHECK_OK(&ctx, ocr_dataset_open_lmdb(&ctx, &lm, path));
    OCR_CHECK(lm.count == 3);
    for (i = 0; i < lm.count && i < icdar.count; i++) {
        ocr_sample a, b;
        int q, k;
        OCR_CHECK_OK(&ctx, ocr_dataset_get(&ctx, &icdar, i, 0, &a));
        OCR_CHECK_OK(&ctx, ocr_dataset_get(&ctx, &lm, i, 0, &b));
        OCR_CHECK(a.image.width == b.image.width && a.image.height == b.image.height && a.n_polys == b.n_polys);
        if (a.image.pixels && b.image.pixels && a.image.width == b.image.width && a.image.height == b.image.height)
            OCR_CHECK(memcmp(a.image.pixels, b.image.pixels, (size_t)a.image.width * (size_t)a.image.height * 3) == 0);
        for (q = 0; q < a.n_polys && q < b.n_polys; q++) {
            OCR_CHECK(a.polys[q].n_points == b.polys[q].n_points && a.polys[q].ignore == b.polys[q].ignore);
            OCR_CHECK(strcmp(a.polys[q].text, b.polys[q].text) == 0);
            for (k = 0; k < a.polys[q].n_points && k < b.polys[q].n_points; k++)
                OCR_CHECK(a.polys[q].points[k].x == b.polys[q].points[k].x && a.polys[q].points[k].y == b.polys[q].points[k].y);
        }
        ocr_sample_free(&a);
        ocr_sample_free(&b);
    }
    ocr_dataset_close(&lm);
    ocr_dataset_close(&icdar);
    /* python3-lmdb reads what liblmdb wrote. */
    snprintf(cmd, sizeof cmd, "/usr/bin/python3 tools/make_lmdb_ref.py --check %s 2>&1", path);
    f = popen(cmd, "r");
    OCR_CHECK(f != NULL);
    while (f && fgets(line, sizeof line, f)) {
        if (strstr(line, "num-samples 3")) saw_count = 1;
        if (strstr(line, "Genaxis Theatre:377,117;463,117;465,130;378,130") && strstr(line, "Hello, world, again:")) saw_theatre = 1;
    }
    OCR_CHECK(f && pclose(f) == 0);
    OCR_CHECK_MSG(saw_count && saw_theatre, "python3-lmdb read-back lacks the expected records");
    ocr_ctx_free(&ctx);
}

/* Writes count records (image = a fixture PNG, label = labels[i]) with liblmdb directly. */
static int write_raw_lmdb(const char *path, const char *const *labels, int count) {
    MDB_env *env;
    MDB_txn *txn;
    MDB_dbi dbi;
    MDB_val k, v;
    char key[32], num[16];
    size_t size;
    unsigned char *png = slurp(FIX "/img/rgb.png", &size);
    int i, rc;
    if (!png || mkdir(path, 0755) != 0) { free(png); return 0; }
    rc = mdb_env_create(&env) || mdb_env_set_mapsize(env, (size_t)1 << 24) || mdb_env_open(env, path, 0, 0644) ||
         mdb_txn_begin(env, NULL, 0, &txn) || mdb_dbi_open(txn, NULL, 0, &dbi);
    for (i = 0; !rc && i < count; i++) {
        snprintf(key, sizeof key, "image-%09d", i + 1);
        k.mv_data = key; k.mv_size = strlen(key); v.mv_data = png; v.mv_size = size;
        rc = mdb_put(txn, dbi, &k, &v, 0);
        snprintf(key, sizeof key, "label-%09d", i + 1);
        k.mv_size = strlen(key); v.mv_data = (void *)labels[i]; v.mv_size = strlen(labels[i]);
        if (!rc) rc = mdb_put(txn, dbi, &k, &v, 0);
    }
    snprintf(num, sizeof num, "%d", count);
    k.mv_data = (void *)"num-samples"; k.mv_size = 11; v.mv_data = num; v.mv_size = strlen(num);
    if (!rc) rc = mdb_put(txn, dbi, &k, &v, 0) || mdb_txn_commit(txn);
    mdb_env_close(env);
    free(png);
    return !rc;
}

/* An LMDB whose data.mdb was cut short is an error naming the file, never SIGBUS (the map reached past the end). */
static void test_lmdb_truncated(void) {
    static const char *labels[40];
    ocr_ctx ctx;
    ocr_dataset lm;
    ocr_sample s;
    char path[400], data[450];
    struct stat st;
    long long full;
    int cut, i;
    ocr_ctx_init(&ctx, 1, 0);
    for (i = 0; i < 40; i++) labels[i] = "text";
    snprintf(path, sizeof path, "%s/truncated", g_tmp);
    snprintf(data, sizeof data, "%s/data.mdb", path);
    OCR_CHECK(write_raw_lmdb(path, labels, 40));
    OCR_CHECK_OK(&ctx, ocr_dataset_open_lmdb(&ctx, &lm, path));   /* whole, it reads */
    OCR_CHECK_OK(&ctx, ocr_dataset_get(&ctx, &lm, 39, 0, &s));
    ocr_sample_free(&s);
    ocr_dataset_close(&lm);
    OCR_CHECK(stat(data, &st) == 0 && st.st_size >= 4 * 8192);
    full = (long long)st.st_size;
    for (cut = 0; cut < 2; cut++) {
        long long size = cut == 0 ? full / 2 : 8192;  /* half of it; only the two meta pages */
        OCR_CHECK(truncate(data, (off_t)size) == 0);
        OCR_CHECK_ERR(&ctx, ocr_dataset_open_lmdb(&ctx, &lm, path), OCR_EFORMAT, "data.mdb' is truncated");
        OCR_CHECK_MSG(strstr(ocr_ctx_last_error(&ctx), path) != NULL, "message names the file: %s", ocr_ctx_last_error(&ctx));
    }
    ocr_ctx_free(&ctx);
}

/* A detection label that is a JSON object is refused naming its key, not read as recognition text (one instance over
   the whole image); JSON lists and plain text (even text that starts with '{') keep their meanings, in one set. */
static void test_lmdb_label_kind(void) {
    static const char *const det[] = {"[{\"points\": [[0,0],[4,0],[4,4],[0,4]], \"transcription\": \"a\"}]",
                                      " {\"points\": [[0,0],[4,0],[4,4],[0,4]], \"transcription\": \"b\"}"};
    static const char *const obj[] = {"{\"points\": [[0,0],[4,0],[4,4],[0,4]], \"transcription\": \"b\"}"};
    static const char *const rec[] = {"{abc}", "plain"};
    ocr_ctx ctx;
    ocr_dataset ds;
    ocr_sample s;
    char path[400];
    ocr_ctx_init(&ctx, 1, 0);
    snprintf(path, sizeof path, "%s/kind_det", g_tmp);
    OCR_CHECK(write_raw_lmdb(path, det, 2));
    OCR_CHECK_OK(&ctx, ocr_dataset_open_lmdb(&ctx, &ds, path));
    OCR_CHECK_OK(&ctx, ocr_dataset_get(&ctx, &ds, 0, 0, &s));
    OCR_CHECK(s.n_polys == 1 && s.polys && s.polys[0].n_points == 4);
    ocr_sample_free(&s);
    OCR_CHECK_ERR(&ctx, ocr_dataset_get(&ctx, &ds, 1, 0, &s), OCR_EFORMAT, "must be a JSON list");
    OCR_CHECK(strstr(ocr_ctx_last_error(&ctx), "label-000000002") != NULL);
    ocr_dataset_close(&ds);
    snprintf(path, sizeof path, "%s/kind_obj", g_tmp);
    OCR_CHECK(write_raw_lmdb(path, obj, 1));
    OCR_CHECK_OK(&ctx, ocr_dataset_open_lmdb(&ctx, &ds, path));
    OCR_CHECK_ERR(&ctx, ocr_dataset_get(&ctx, &ds, 0, 0, &s), OCR_EFORMAT, "must be a JSON list");
    OCR_CHECK(strstr(ocr_ctx_last_error(&ctx), "label-000000001") != NULL);
    ocr_dataset_close(&ds);
    snprintf(path, sizeof path, "%s/kind_rec", g_tmp);
    OCR_CHECK(write_raw_lmdb(path, rec, 2));
    OCR_CHECK_OK(&ctx, ocr_dataset_open_lmdb(&ctx, &ds, path));
    OCR_CHECK_OK(&ctx, ocr_dataset_get(&ctx, &ds, 0, 0, &s));
    OCR_CHECK(s.n_polys == 1 && s.polys && s.polys[0].text && strcmp(s.polys[0].text, "{abc}") == 0);
    ocr_sample_free(&s);
    ocr_dataset_close(&ds);
    ocr_ctx_free(&ctx);
}

/* The converter never writes a record the reader refuses: a ground-truth file under the reader's 16 MiB cap whose JSON
   label would exceed it is refused at write time, naming the sample. */
static void test_lmdb_writer_caps(void) {
    ocr_ctx ctx;
    ocr_dataset icdar;
    char dir[300], path[1400];
    FILE *f;
    long i;
    int ok = 1;
    ocr_ctx_init(&ctx, 1, 0);
    snprintf(dir, sizeof dir, "%s/bigcap", g_tmp);
    snprintf(path, sizeof path, "mkdir -p %s/images %s/gts && cp " FIX "/icdar/images/img_1.png %s/images/", dir, dir, dir);
    OCR_CHECK(system(path) == 0);
    snprintf(path, sizeof path, "%s/gts/gt_img_1.txt", dir);
    f = fopen(path, "w");
    OCR_CHECK(f != NULL);
    for (i = 0; f && i < 420000; i++) ok &= fputs("1,2,3,4,5,6,7,8,a\n", f) >= 0;   /* 7.6 MB of ground truth */
    OCR_CHECK(f && ok && fclose(f) == 0);
    snprintf(path, sizeof path, "%s/images", dir);
    snprintf(dir + strlen(dir), sizeof dir - strlen(dir), "/gts");
    OCR_CHECK_OK(&ctx, ocr_dataset_open_icdar(&ctx, &icdar, path, dir, OCR_GT_ICDAR2015));
    snprintf(path, sizeof path, "%s/bigcap_lmdb", g_tmp);
    OCR_CHECK_ERR(&ctx, ocr_lmdb_write_dataset(&ctx, path, &icdar, NULL, NULL), OCR_EOVERFLOW, "cap the reader enforces");
    OCR_CHECK_MSG(strstr(ocr_ctx_last_error(&ctx), "img_1") != NULL, "names the sample: %s", ocr_ctx_last_error(&ctx));
    ocr_dataset_close(&icdar);
    ocr_ctx_free(&ctx);
}

int main(int argc, char **argv) {
    char cmd[300];
    ocr_test_init(argc, argv);
    snprintf(g_tmp, sizeof g_tmp, "/tmp/ocr_test_data_io.XXXXXX");
    if (!mkdtemp(g_tmp)) { perror("mkdtemp"); return 1; }
    g_lmdb_ready = make_reference_lmdb();
    OCR_TEST_RUN(test_hash);
    OCR_TEST_RUN(test_decode_valid);
    OCR_TEST_RUN(test_decode_corrupt);
    OCR_TEST_RUN(test_png_encode);
    OCR_TEST_RUN(test_gt_parse);
    OCR_TEST_RUN(test_result_parse);
    OCR_TEST_RUN(test_label_json);
    OCR_TEST_RUN(test_icdar_dataset);
    OCR_TEST_RUN(test_lmdb_reference);
    OCR_TEST_RUN(test_lmdb_fork);
    OCR_TEST_RUN(test_lmdb_writer);
    OCR_TEST_RUN(test_lmdb_truncated);
    OCR_TEST_RUN(test_lmdb_label_kind);
    OCR_TEST_RUN(test_lmdb_writer_caps);
    OCR_TEST_RUN(test_bmp_top_down);
    snprintf(cmd, sizeof cmd, "rm -rf %s", g_tmp);
    if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", g_tmp);
    return ocr_test_finish();
}
