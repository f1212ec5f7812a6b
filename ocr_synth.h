/* ocr_synth.h - synthetic text scenes with the exact quad of every word, for training text detectors without
   downloading a data set.  v0.1  MIT license

   Do this in exactly one C or C++ file:
       #define OCR_SYNTH_IMPLEMENTATION       (ocr_tensor.h's and ocr_data.h's implementations go in the same or
       #include "ocr_synth.h"                 another file; OCR_IMPLEMENTATION turns on every module)
   Uses the system stb_truetype (libstb-dev: -I/usr/include/stb) and, by default, a declared set of fonts and
   photographs from Debian packages (build.sh's BUILD_PKGS; docs/SYNTH_ASSETS.md lists them).

   Usage:
       ocr_synth synth;
       ocr_sample s;
       ocr_dataset ds;
       if (ocr_synth_init(&ctx, &synth, NULL) != OCR_OK)              // default config: the declared training set
           fprintf(stderr, "%s\n", ocr_ctx_last_error(&ctx));
       ocr_synth_sample(&ctx, &synth, 7, 0, 640, 640, &s);             // scene 0 of seed 7: RGB image, one quad per word
       ocr_image_save_png(&ctx, "scene.png", &s.image);
       ocr_sample_free(&s);
       ocr_dataset_open_synth(&ctx, &ds, &synth, 7, 10000, 640, 640);  // 10,000 scenes as a dataset for ocr_loader_create
       ...
       ocr_dataset_close(&ds);
       ocr_synth_free(&synth);

   A scene is an ocr_sample (ocr_data.h): it goes through the same augmentation, cache and loader as ICDAR folders
   and LMDBs, and its content_hash names (renderer version, config, fonts, photographs, seed, index, size), so cached maps of a
   scene stay valid exactly as long as the scene does.

   Options (define before including the implementation):
       OCR_SYNTH_NO_STB_IMPLEMENTATION  use the program's own stb_truetype implementation instead of a private static
                                        copy (OCR_DATA_NO_STB_IMPLEMENTATION, the same switch for stb_image, implies it)
   Dependencies: ocr_data.h (images, samples, datasets, the content hash) and what it includes (ocr_tensor.h,
   ocr_geom.h), stb_truetype.h.
*/
#ifndef OCR_SYNTH_H
#define OCR_SYNTH_H
#include "ocr_data.h"
#ifdef __cplusplus
extern "C" {
#endif

/* Geometry convention (as ocr_data.h's augmentation): continuous pixel coordinates, pixel (i, j) covers
   [i, i+1) x [j, j+1), so a quad drawn around a block of pixels follows it exactly through every transform. */

/* ---- synthetic text scenes ----
   Scenes rendered with stb_truetype: words of letters, digits and punctuation (with some accented Latin, Greek and
   Cyrillic), 10-80 px high, rotated, slanted, some in perspective or on a gentle arc, some outlined or shadowed, in a
   colour chosen against what lies under them, on photographs (placed on their smoother parts) or on gradient and
   noise backgrounds, with shapes, lines and glyph-like strokes that are not text; some text is occluded, faint or
   blurred. Every word gets the quad of its ink (top-left, top-right, bottom-right, bottom-left in reading order;
   exact but for bent words, whose quad is the tightest box around their arc); a word that is too faint against what
   lies under it, mostly hidden, or smaller than min_care_px is marked ignore. A line's font has a glyph for every
   character of its words. Some words may come from a word list (config.words_path). A scene depends only on the
   config, the fonts', photographs' and word list's bytes, (seed, index) and
   the size; ocr_synth_sample may run from many threads at once on one ocr_synth.
   Font and image files are trusted input (stb_truetype does not defend against malicious fonts). */
enum { OCR_SYNTH_TRAIN = 0, OCR_SYNTH_HELDOUT = 1 };

typedef struct {
    /* Fonts. NULL: the declared font set (the families of `split`, listed in docs/SYNTH_ASSETS.md) under font_root,
       never anything else installed; else "DIR|FILE,DIR|FILE,...": those files and the .ttf/.otf files under those
       folders, in that order (each folder sorted), of which symbol, icon and math fonts are refused. */
    const char *font_path;
    const char *font_root;        /* NULL: /usr/share/fonts (tests point it at another tree) */
    int max_fonts;                /* fonts kept from a custom font_path, in path order: 64 */
    /* Photographs under the text. NULL: the declared photographs of `split` under photo_root; "none": procedural
       backgrounds only; else "DIR|FILE,...": those .jpg/.jpeg/.png files. */
    const char *photo_path;
    const char *photo_root;       /* NULL: /usr/share/backgrounds */
    float photo_prob;             /* share of scenes drawn on a photograph (the rest procedural): 0.6 */
    int split;                    /* OCR_SYNTH_TRAIN or OCR_SYNTH_HELDOUT: which families of the declared assets */
    float min_text_px, max_text_px; /* font pixel height (ascent - descent), drawn log-uniform: 10, 80 */
    float lines_per_mpix;         /* text lines (1-4 words each) tried per million pixels: 30 */
    float max_rotation_deg;       /* lines rotate within +-this (mostly much less): 30 */
    float clutter;                /* amount of non-text shapes, lines and strokes; 0 = none: 1 */
    float occlusion_prob;         /* chance a line gets an occluder drawn over it: 0.15 */
    float low_contrast_prob;      /* chance a line is drawn faint on purpose: 0.05 */
    float blur_prob;              /* chance the whole scene is blurred: 0.25 */
    float noise_stddev;           /* largest per-pixel noise, in 8-bit levels: 8 */
    float min_contrast;           /* ink whose luminance differs from the pixel under it by less (0..1) is illegible: 0.12 */
    float max_occluded;           /* a word with a larger fraction of illegible or hidden ink is ignore: 0.5 */
    float min_care_px;            /* a word whose axis-aligned extent is under this in x or y is ignore, as DBNet's
                                     min_text_size ignores it in training and ICDAR marks unreadably small text ###: 8 */
    int plain_background;         /* 1: one flat colour, no photographs, clutter, occlusion, blur or noise (tests) */
    /* Real words. NULL: every word is the renderer's own (letters with case and punctuation, numbers, prices, dates,
       codes, Greek, Cyrillic); else a UTF-8 file of one word per line (Debian's wamerican installs
       /usr/share/dict/american-english), from which each word of a scene is drawn uniformly, as written, with chance
       words_prob. Loading skips empty lines, strips a trailing CR (and a UTF-8 byte order mark), refuses the file
       (OCR_EFORMAT, naming the file and line) for invalid UTF-8, a control character or whitespace inside a line
       (a line is one word, never split), and for having no usable word; it leaves out and counts words of more than
       24 characters and words that no loaded font can draw whole (ocr_synth_word_count). */
    const char *words_path;
    float words_prob;             /* share of words drawn from words_path: 0.5 (0: the list is checked, then unused) */
} ocr_synth_config;

typedef struct ocr__synth_font ocr__synth_font;
typedef struct ocr__synth_photo ocr__synth_photo;
typedef struct ocr__synth_words ocr__synth_words;
typedef struct {
    ocr_synth_config config;
    ocr__synth_font *fonts;
    int n_fonts;
    int n_families;       /* a line draws a family uniformly, then one of its files */
    ocr__synth_photo *photos;
    int n_photos;
    ocr__synth_words *wordlist; /* config.words_path's words, NULL when none are drawn */
    ocr_hash128 identity; /* hashes the renderer version, the config, every font's, photograph's and word list's bytes */
} ocr_synth;

OCRDEF ocr_synth_config ocr_synth_defaults(void);
/* Loads the fonts and photographs once (config NULL = defaults). OCR_ENOTFOUND when a declared file is missing (the
   message names the package to install) or a custom path has no usable font; fonts refused from a custom path are
   named in the context's message (ocr_ctx_last_error) and the log, with OCR_OK. Prints nothing. */
OCRDEF int ocr_synth_init(ocr_ctx *ctx, ocr_synth *synth, const ocr_synth_config *config);
OCRDEF void ocr_synth_free(ocr_synth *synth);
/* Renders scene (seed, index) at width x height into *out (RGB); free with ocr_sample_free. */
OCRDEF int ocr_synth_sample(ocr_ctx *ctx, const ocr_synth *synth, uint64_t seed, int64_t index, int width, int height,
                            ocr_sample *out);
/* The fonts and photographs in use, i in [0, n): file names (relative to font_root / photo_root for the declared
   sets, else as found) and the SHA-256 of their bytes (64 lowercase hex digits, computed on the first call), for run
   metadata. NULL for i out of range (and for a digest, when out of memory). */
OCRDEF int ocr_synth_font_count(const ocr_synth *synth);
OCRDEF const char *ocr_synth_font_file(const ocr_synth *synth, int i);
OCRDEF const char *ocr_synth_font_sha256(const ocr_synth *synth, int i);
OCRDEF int ocr_synth_photo_count(const ocr_synth *synth);
OCRDEF const char *ocr_synth_photo_file(const ocr_synth *synth, int i);
OCRDEF const char *ocr_synth_photo_sha256(const ocr_synth *synth, int i);
/* The word list in use (config.words_path with words_prob > 0): the words drawn from, 0 without a list; the words
   left out at load in *too_long (over 24 characters) and *no_font (a character no loaded font has, or one outside
   the Basic Multilingual Plane), either may be NULL; and the SHA-256 of the file (as the fonts'; NULL without one). */
OCRDEF int ocr_synth_word_count(const ocr_synth *synth, int *too_long, int *no_font);
OCRDEF const char *ocr_synth_words_sha256(const ocr_synth *synth);
/* count scenes (seed, 0..count-1) of width x height as a dataset for the loader; synth must outlive it. */
OCRDEF int ocr_dataset_open_synth(ocr_ctx *ctx, ocr_dataset *ds, const ocr_synth *synth, uint64_t seed, int64_t count,
                                  int width, int height);

/* ---- painting labels: text drawn in whichever of a list of fonts has each character (overlays) ---- */
typedef struct ocr__paint_font ocr__paint_font;
typedef struct { ocr__paint_font *fonts; int n_fonts; } ocr_painter;
/* files: font files, comma-separated, in order of preference (say a Latin font, then one for Hangul and CJK). Any
   font stb_truetype reads (TrueType, OpenType with TrueType outlines, collections: their first font). A file that is
   missing or not a font is an error naming it. */
OCRDEF int ocr_painter_open(ocr_ctx *ctx, ocr_painter *p, const char *files);
OCRDEF void ocr_painter_close(ocr_painter *p);
/* The font index (into files) that draws code point cp, -1 when none has it. */
OCRDEF int ocr_painter_font_of(const ocr_painter *p, int32_t cp);
/* Width in pixels of UTF-8 text drawn px pixels high (ascent to descent of each font). */
OCRDEF float ocr_painter_measure(const ocr_painter *p, const char *text, float px);
/* Draws UTF-8 text onto an RGB image with the top-left of its line box at (x, y), px pixels high, in colour rgb
   (blended by coverage; clipped to the image). Each character comes from the first font that has it; one that none
   has is drawn as a hollow box, counted in *missing and the first reported in *first_missing (both may be NULL).
   Invalid UTF-8 is an error. */
OCRDEF int ocr_painter_draw(ocr_ctx *ctx, const ocr_painter *p, ocr_image *img, float x, float y, float px, const uint8_t rgb[3],
                            const char *text, int *missing, int32_t *first_missing);

#ifdef __cplusplus
}
#endif
#endif /* OCR_SYNTH_H */

#if defined(OCR_IMPLEMENTATION) && !defined(OCR_NO_IMPLEMENTATION) && !defined(OCR_SYNTH_IMPLEMENTATION)
#define OCR_SYNTH_IMPLEMENTATION
#endif
#if defined(OCR_SYNTH_IMPLEMENTATION) && !defined(OCR__SYNTH_IMPLEMENTED)
#define OCR__SYNTH_IMPLEMENTED

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <math.h>
#include <dirent.h>
#include <sys/types.h>
#include <sys/stat.h>
/* The system stb_truetype, compiled here as static functions so it never clashes with a copy the user links (as
   ocr_data.h does with stb_image). OCR_SYNTH_NO_STB_IMPLEMENTATION uses the user's copy. */
#if !defined(OCR_SYNTH_NO_STB_IMPLEMENTATION) && !defined(OCR_DATA_NO_STB_IMPLEMENTATION)
#ifdef __STB_INCLUDE_STB_TRUETYPE_H__
#error "ocr_synth.h: stb_truetype.h was included before the implementation; define OCR_SYNTH_NO_STB_IMPLEMENTATION and build stb yourself"
#endif
#define STBTT_STATIC
#define STB_TRUETYPE_IMPLEMENTATION
#endif
#define STBTT_malloc(size, user) ((void)(user), OCR_MALLOC(size))
#define STBTT_free(ptr, user) ((void)(user), OCR_FREE(ptr))
#if defined(__GNUC__) || defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wunused-function"
#pragma GCC diagnostic ignored "-Wsign-compare"
#pragma GCC diagnostic ignored "-Wshadow"
#pragma GCC diagnostic ignored "-Wcast-qual"
#pragma GCC diagnostic ignored "-Wunused-parameter"
#pragma GCC diagnostic ignored "-Wmissing-field-initializers"
#pragma GCC diagnostic ignored "-Wpedantic"
#endif
#include <stb_truetype.h>
#if defined(__GNUC__) || defined(__clang__)
#pragma GCC diagnostic pop
#endif
#ifdef __cplusplus
extern "C" {
#endif

/* ---------------------------------------------------------------- SHA-256 (FIPS 180-4) */

/* Run metadata names every font and photograph by its SHA-256, so a run can be matched to the exact files. */
static void ocr__syn_sha256_block(uint32_t h[8], const unsigned char *p) {
    static const uint32_t k[64] = {
        0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5, 0xd807aa98, 0x12835b01,
        0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174, 0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc,
        0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da, 0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147,
        0x06ca6351, 0x14292967, 0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85,
        0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070, 0x19a4c116, 0x1e376c08,
        0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3, 0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208,
        0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2};
    uint32_t w[64], a, b, c, d, e, f, g, hh, t1, t2;
    int i;
#define OCR__SYN_ROR(x, n) (((x) >> (n)) | ((x) << (32 - (n))))
    for (i = 0; i < 16; i++)
        w[i] = (uint32_t)p[4 * i] << 24 | (uint32_t)p[4 * i + 1] << 16 | (uint32_t)p[4 * i + 2] << 8 | (uint32_t)p[4 * i + 3];
    for (i = 16; i < 64; i++) {
        uint32_t s0 = OCR__SYN_ROR(w[i - 15], 7) ^ OCR__SYN_ROR(w[i - 15], 18) ^ (w[i - 15] >> 3);
        uint32_t s1 = OCR__SYN_ROR(w[i - 2], 17) ^ OCR__SYN_ROR(w[i - 2], 19) ^ (w[i - 2] >> 10);
        w[i] = w[i - 16] + s0 + w[i - 7] + s1;
    }
    a = h[0]; b = h[1]; c = h[2]; d = h[3]; e = h[4]; f = h[5]; g = h[6]; hh = h[7];
    for (i = 0; i < 64; i++) {
        t1 = hh + (OCR__SYN_ROR(e, 6) ^ OCR__SYN_ROR(e, 11) ^ OCR__SYN_ROR(e, 25)) + ((e & f) ^ (~e & g)) + k[i] + w[i];
        t2 = (OCR__SYN_ROR(a, 2) ^ OCR__SYN_ROR(a, 13) ^ OCR__SYN_ROR(a, 22)) + ((a & b) ^ (a & c) ^ (b & c));
        hh = g; g = f; f = e; e = d + t1; d = c; c = b; b = a; a = t1 + t2;
    }
#undef OCR__SYN_ROR
    h[0] += a; h[1] += b; h[2] += c; h[3] += d; h[4] += e; h[5] += f; h[6] += g; h[7] += hh;
}

/* The digest of size bytes as 64 lowercase hex digits and a terminating 0. */
static void ocr__syn_sha256_hex(const unsigned char *data, size_t size, char out[65]) {
    static const char hex[] = "0123456789abcdef";
    uint32_t h[8] = {0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a, 0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19};
    unsigned char tail[128];
    size_t full = size / 64 * 64, rest = size - full, i, n_tail;
    uint64_t bits = (uint64_t)size * 8;
    for (i = 0; i < full; i += 64) ocr__syn_sha256_block(h, data + i);
    memset(tail, 0, sizeof tail);
    if (rest) memcpy(tail, data + full, rest);
    tail[rest] = 0x80;
    n_tail = rest + 1 + 8 <= 64 ? 64 : 128; /* the 0x80 byte and the 64-bit length must fit */
    for (i = 0; i < 8; i++) tail[n_tail - 1 - i] = (unsigned char)(bits >> (8 * i));
    for (i = 0; i < n_tail; i += 64) ocr__syn_sha256_block(h, tail + i);
    for (i = 0; i < 32; i++) {
        unsigned v = (unsigned)(h[i / 4] >> (24 - 8 * (i % 4))) & 0xFF;
        out[2 * i] = hex[v >> 4];
        out[2 * i + 1] = hex[v & 15];
    }
    out[64] = 0;
}

/* ---------------------------------------------------------------- fonts */

/* Every character a word can hold, as bit positions: a font's coverage is looked up once at init. */
#define OCR__SYN_REPERTOIRE 315
static int ocr__syn_rep_index(int c) {
    if (c >= 0x20 && c <= 0x7E) return c - 0x20;
    if (c >= 0xA0 && c <= 0xFF) return 95 + c - 0xA0;
    if (c == 0x152 || c == 0x153) return 191 + c - 0x152;
    if (c == 0x20AC) return 193;
    if (c >= 0x391 && c <= 0x3C9) return 194 + c - 0x391;
    if (c >= 0x410 && c <= 0x44F) return 251 + c - 0x410;
    return -1;
}

static int ocr__syn_rep_codepoint(int k) {
    return k < 95 ? 0x20 + k : k < 191 ? 0xA0 + k - 95 : k < 193 ? 0x152 + k - 191 : k == 193 ? 0x20AC : k < 251 ? 0x391 + k - 194 : 0x410 + k - 251;
}

struct ocr__synth_font {
    unsigned char *data;
    size_t size;
    stbtt_fontinfo info;
    int ascent, descent, space_advance; /* font units */
    int family;                         /* index among the synthesizer's families */
    char *file;                         /* relative to font_root for the declared set, else as found */
    char *sha256;                       /* hex, computed on first request (atomic) */
    unsigned char covers[(OCR__SYN_REPERTOIRE + 7) / 8];
};

/* A photograph is kept encoded and decoded on first use: init stays fast (decoding all of them takes seconds) and a
   program that renders a few scenes decodes only the photographs those use. Any thread may decode; the first to
   publish wins, with no lock, so a forked child never waits on a lock its parent held. */
struct ocr__synth_photo {
    char *file;
    char *sha256;         /* hex, computed on first request (atomic) */
    unsigned char *bytes; /* the file, checked structurally at init (ocr_image_probe) */
    size_t size;
    ocr_image *image;     /* NULL until decoded (atomic): OCR__SYN_PHOTO_LEVELS images, RGB, the first with its longest
                             side at most OCR__SYN_PHOTO_SIDE, each next one half as large, so a crop is never shrunk
                             by much more than 1.5x and one bilinear sample per pixel does */
};

/* A word list, read-only once loaded (many threads draw from it). */
struct ocr__synth_words {
    unsigned char *bytes; /* the file, for the identity and the SHA-256 */
    size_t size;
    char *sha256;         /* hex, computed on first request (atomic) */
    int *cps;             /* the kept words' code points, back to back */
    size_t *start;        /* word i is cps[start[i]] .. cps[start[i + 1] - 1] */
    int n, too_long, no_font;
};

static void ocr__syn_words_free(ocr__synth_words *w) {
    if (!w) return;
    OCR_FREE(w->bytes);
    OCR_FREE(w->sha256);
    OCR_FREE(w->cps);
    OCR_FREE(w->start);
    OCR_FREE(w);
}

#define OCR__SYN_MAX_WORDS_BYTES ((size_t)64 << 20)
#define OCR__SYN_VERSION 5 /* bump whenever a scene for the same (config, fonts, photos, seed, index) changes */
#define OCR__SYN_MAX_FILES 4096
#define OCR__SYN_MAX_FONT_BYTES ((size_t)64 << 20)
#define OCR__SYN_PHOTO_SIDE 1024
#define OCR__SYN_PHOTO_LEVELS 3

static void ocr__syn_free_levels(ocr_image *levels) {
    int i;
    for (i = 0; i < OCR__SYN_PHOTO_LEVELS; i++) ocr_image_free(&levels[i]);
    OCR_FREE(levels);
}

/* The declared font set: Debian packages that build.sh installs, split by family into training and held-out faces so
   that each style has both. Paths are relative to font_root. docs/SYNTH_ASSETS.md lists the licences. */
typedef struct { const char *file, *package, *family, *style; int split; } ocr__syn_asset;
static const ocr__syn_asset ocr__syn_declared_fonts[] = {
    /* serif */
    {"truetype/dejavu/DejaVuSerif.ttf", "fonts-dejavu-core", "DejaVu Serif", "serif", OCR_SYNTH_TRAIN},
    {"truetype/dejavu/DejaVuSerif-Bold.ttf", "fonts-dejavu-core", "DejaVu Serif", "serif", OCR_SYNTH_TRAIN},
    {"truetype/dejavu/DejaVuSerif-Italic.ttf", "fonts-dejavu-core", "DejaVu Serif", "serif", OCR_SYNTH_TRAIN},
    {"truetype/dejavu/DejaVuSerif-BoldItalic.ttf", "fonts-dejavu-core", "DejaVu Serif", "serif", OCR_SYNTH_TRAIN},
    {"truetype/liberation2/LiberationSerif-Regular.ttf", "fonts-liberation2", "Liberation Serif", "serif", OCR_SYNTH_TRAIN},
    {"truetype/liberation2/LiberationSerif-Bold.ttf", "fonts-liberation2", "Liberation Serif", "serif", OCR_SYNTH_TRAIN},
    {"truetype/liberation2/LiberationSerif-Italic.ttf", "fonts-liberation2", "Liberation Serif", "serif", OCR_SYNTH_TRAIN},
    {"truetype/liberation2/LiberationSerif-BoldItalic.ttf", "fonts-liberation2", "Liberation Serif", "serif", OCR_SYNTH_TRAIN},
    {"opentype/ebgaramond/EBGaramond12-Regular.otf", "fonts-ebgaramond", "EB Garamond", "serif", OCR_SYNTH_TRAIN},
    {"opentype/ebgaramond/EBGaramond12-Italic.otf", "fonts-ebgaramond", "EB Garamond", "serif", OCR_SYNTH_TRAIN},
    {"opentype/ebgaramond/EBGaramond12-Bold.otf", "fonts-ebgaramond", "EB Garamond", "serif", OCR_SYNTH_TRAIN},
    {"truetype/gentium/Gentium-R.ttf", "fonts-sil-gentium", "Gentium", "serif", OCR_SYNTH_TRAIN},
    {"truetype/gentium/Gentium-I.ttf", "fonts-sil-gentium", "Gentium", "serif", OCR_SYNTH_TRAIN},
    {"truetype/crosextra/Caladea-Regular.ttf", "fonts-crosextra-caladea", "Caladea", "serif", OCR_SYNTH_HELDOUT},
    {"truetype/crosextra/Caladea-Bold.ttf", "fonts-crosextra-caladea", "Caladea", "serif", OCR_SYNTH_HELDOUT},
    {"truetype/crosextra/Caladea-Italic.ttf", "fonts-crosextra-caladea", "Caladea", "serif", OCR_SYNTH_HELDOUT},
    {"truetype/crosextra/Caladea-BoldItalic.ttf", "fonts-crosextra-caladea", "Caladea", "serif", OCR_SYNTH_HELDOUT},
    /* sans */
    {"truetype/dejavu/DejaVuSans.ttf", "fonts-dejavu-core", "DejaVu Sans", "sans", OCR_SYNTH_TRAIN},
    {"truetype/dejavu/DejaVuSans-Bold.ttf", "fonts-dejavu-core", "DejaVu Sans", "sans", OCR_SYNTH_TRAIN},
    {"truetype/dejavu/DejaVuSans-Oblique.ttf", "fonts-dejavu-core", "DejaVu Sans", "sans", OCR_SYNTH_TRAIN},
    {"truetype/dejavu/DejaVuSans-BoldOblique.ttf", "fonts-dejavu-core", "DejaVu Sans", "sans", OCR_SYNTH_TRAIN},
    {"truetype/dejavu/DejaVuSans-ExtraLight.ttf", "fonts-dejavu-core", "DejaVu Sans", "sans", OCR_SYNTH_TRAIN},
    {"truetype/liberation2/LiberationSans-Regular.ttf", "fonts-liberation2", "Liberation Sans", "sans", OCR_SYNTH_TRAIN},
    {"truetype/liberation2/LiberationSans-Bold.ttf", "fonts-liberation2", "Liberation Sans", "sans", OCR_SYNTH_TRAIN},
    {"truetype/liberation2/LiberationSans-Italic.ttf", "fonts-liberation2", "Liberation Sans", "sans", OCR_SYNTH_TRAIN},
    {"truetype/liberation2/LiberationSans-BoldItalic.ttf", "fonts-liberation2", "Liberation Sans", "sans", OCR_SYNTH_TRAIN},
    {"opentype/cantarell/Cantarell-Regular.otf", "fonts-cantarell", "Cantarell", "sans", OCR_SYNTH_TRAIN},
    {"opentype/cantarell/Cantarell-Bold.otf", "fonts-cantarell", "Cantarell", "sans", OCR_SYNTH_TRAIN},
    {"opentype/cantarell/Cantarell-Light.otf", "fonts-cantarell", "Cantarell", "sans", OCR_SYNTH_TRAIN},
    {"opentype/cantarell/Cantarell-ExtraBold.otf", "fonts-cantarell", "Cantarell", "sans", OCR_SYNTH_TRAIN},
    {"fonts-go/Go-Regular.ttf", "fonts-go", "Go", "sans", OCR_SYNTH_TRAIN},
    {"fonts-go/Go-Bold.ttf", "fonts-go", "Go", "sans", OCR_SYNTH_TRAIN},
    {"fonts-go/Go-Italic.ttf", "fonts-go", "Go", "sans", OCR_SYNTH_TRAIN},
    {"fonts-go/Go-Medium.ttf", "fonts-go", "Go", "sans", OCR_SYNTH_TRAIN},
    {"fonts-go/Go-Bold-Italic.ttf", "fonts-go", "Go", "sans", OCR_SYNTH_TRAIN},
    {"truetype/roboto/unhinted/RobotoTTF/Roboto-Regular.ttf", "fonts-roboto-unhinted", "Roboto", "sans", OCR_SYNTH_TRAIN},
    {"truetype/roboto/unhinted/RobotoTTF/Roboto-Bold.ttf", "fonts-roboto-unhinted", "Roboto", "sans", OCR_SYNTH_TRAIN},
    {"truetype/roboto/unhinted/RobotoTTF/Roboto-Italic.ttf", "fonts-roboto-unhinted", "Roboto", "sans", OCR_SYNTH_TRAIN},
    {"truetype/roboto/unhinted/RobotoTTF/Roboto-Light.ttf", "fonts-roboto-unhinted", "Roboto", "sans", OCR_SYNTH_TRAIN},
    {"truetype/roboto/unhinted/RobotoTTF/Roboto-Medium.ttf", "fonts-roboto-unhinted", "Roboto", "sans", OCR_SYNTH_TRAIN},
    {"truetype/roboto/unhinted/RobotoTTF/Roboto-Black.ttf", "fonts-roboto-unhinted", "Roboto", "sans", OCR_SYNTH_TRAIN},
    {"truetype/open-sans/OpenSans-Regular.ttf", "fonts-open-sans", "Open Sans", "sans", OCR_SYNTH_HELDOUT},
    {"truetype/open-sans/OpenSans-Bold.ttf", "fonts-open-sans", "Open Sans", "sans", OCR_SYNTH_HELDOUT},
    {"truetype/open-sans/OpenSans-Italic.ttf", "fonts-open-sans", "Open Sans", "sans", OCR_SYNTH_HELDOUT},
    {"truetype/open-sans/OpenSans-Light.ttf", "fonts-open-sans", "Open Sans", "sans", OCR_SYNTH_HELDOUT},
    {"truetype/open-sans/OpenSans-Semibold.ttf", "fonts-open-sans", "Open Sans", "sans", OCR_SYNTH_HELDOUT},
    {"truetype/open-sans/OpenSans-ExtraBold.ttf", "fonts-open-sans", "Open Sans", "sans", OCR_SYNTH_HELDOUT},
    {"truetype/crosextra/Carlito-Regular.ttf", "fonts-crosextra-carlito", "Carlito", "sans", OCR_SYNTH_HELDOUT},
    {"truetype/crosextra/Carlito-Bold.ttf", "fonts-crosextra-carlito", "Carlito", "sans", OCR_SYNTH_HELDOUT},
    {"truetype/crosextra/Carlito-Italic.ttf", "fonts-crosextra-carlito", "Carlito", "sans", OCR_SYNTH_HELDOUT},
    {"truetype/crosextra/Carlito-BoldItalic.ttf", "fonts-crosextra-carlito", "Carlito", "sans", OCR_SYNTH_HELDOUT},
    /* monospace */
    {"truetype/dejavu/DejaVuSansMono.ttf", "fonts-dejavu-core", "DejaVu Sans Mono", "mono", OCR_SYNTH_TRAIN},
    {"truetype/dejavu/DejaVuSansMono-Bold.ttf", "fonts-dejavu-core", "DejaVu Sans Mono", "mono", OCR_SYNTH_TRAIN},
    {"truetype/dejavu/DejaVuSansMono-Oblique.ttf", "fonts-dejavu-core", "DejaVu Sans Mono", "mono", OCR_SYNTH_TRAIN},
    {"truetype/dejavu/DejaVuSansMono-BoldOblique.ttf", "fonts-dejavu-core", "DejaVu Sans Mono", "mono", OCR_SYNTH_TRAIN},
    {"truetype/liberation2/LiberationMono-Regular.ttf", "fonts-liberation2", "Liberation Mono", "mono", OCR_SYNTH_TRAIN},
    {"truetype/liberation2/LiberationMono-Bold.ttf", "fonts-liberation2", "Liberation Mono", "mono", OCR_SYNTH_TRAIN},
    {"truetype/liberation2/LiberationMono-Italic.ttf", "fonts-liberation2", "Liberation Mono", "mono", OCR_SYNTH_TRAIN},
    {"truetype/liberation2/LiberationMono-BoldItalic.ttf", "fonts-liberation2", "Liberation Mono", "mono", OCR_SYNTH_TRAIN},
    {"fonts-go/Go-Mono.ttf", "fonts-go", "Go Mono", "mono", OCR_SYNTH_TRAIN},
    {"fonts-go/Go-Mono-Bold.ttf", "fonts-go", "Go Mono", "mono", OCR_SYNTH_TRAIN},
    {"fonts-go/Go-Mono-Italic.ttf", "fonts-go", "Go Mono", "mono", OCR_SYNTH_TRAIN},
    {"fonts-go/Go-Mono-Bold-Italic.ttf", "fonts-go", "Go Mono", "mono", OCR_SYNTH_TRAIN},
    {"truetype/inconsolata/Inconsolata.otf", "fonts-inconsolata", "Inconsolata", "mono", OCR_SYNTH_TRAIN},
    {"truetype/hack/Hack-Regular.ttf", "fonts-hack", "Hack", "mono", OCR_SYNTH_HELDOUT},
    {"truetype/hack/Hack-Bold.ttf", "fonts-hack", "Hack", "mono", OCR_SYNTH_HELDOUT},
    {"truetype/hack/Hack-Italic.ttf", "fonts-hack", "Hack", "mono", OCR_SYNTH_HELDOUT},
    {"truetype/hack/Hack-BoldItalic.ttf", "fonts-hack", "Hack", "mono", OCR_SYNTH_HELDOUT},
    /* condensed */
    {"truetype/dejavu/DejaVuSansCondensed.ttf", "fonts-dejavu-core", "DejaVu Sans Condensed", "condensed", OCR_SYNTH_TRAIN},
    {"truetype/dejavu/DejaVuSansCondensed-Bold.ttf", "fonts-dejavu-core", "DejaVu Sans Condensed", "condensed", OCR_SYNTH_TRAIN},
    {"truetype/dejavu/DejaVuSansCondensed-Oblique.ttf", "fonts-dejavu-core", "DejaVu Sans Condensed", "condensed", OCR_SYNTH_TRAIN},
    {"truetype/dejavu/DejaVuSansCondensed-BoldOblique.ttf", "fonts-dejavu-core", "DejaVu Sans Condensed", "condensed", OCR_SYNTH_TRAIN},
    {"truetype/dejavu/DejaVuSerifCondensed.ttf", "fonts-dejavu-core", "DejaVu Serif Condensed", "condensed", OCR_SYNTH_TRAIN},
    {"truetype/dejavu/DejaVuSerifCondensed-Bold.ttf", "fonts-dejavu-core", "DejaVu Serif Condensed", "condensed", OCR_SYNTH_TRAIN},
    {"truetype/dejavu/DejaVuSerifCondensed-Italic.ttf", "fonts-dejavu-core", "DejaVu Serif Condensed", "condensed", OCR_SYNTH_TRAIN},
    {"truetype/dejavu/DejaVuSerifCondensed-BoldItalic.ttf", "fonts-dejavu-core", "DejaVu Serif Condensed", "condensed", OCR_SYNTH_TRAIN},
    {"truetype/roboto/unhinted/RobotoCondensed-Regular.ttf", "fonts-roboto-unhinted", "Roboto Condensed", "condensed", OCR_SYNTH_TRAIN},
    {"truetype/roboto/unhinted/RobotoCondensed-Bold.ttf", "fonts-roboto-unhinted", "Roboto Condensed", "condensed", OCR_SYNTH_TRAIN},
    {"truetype/roboto/unhinted/RobotoCondensed-Italic.ttf", "fonts-roboto-unhinted", "Roboto Condensed", "condensed", OCR_SYNTH_TRAIN},
    {"truetype/roboto/unhinted/RobotoCondensed-Light.ttf", "fonts-roboto-unhinted", "Roboto Condensed", "condensed", OCR_SYNTH_TRAIN},
    {"truetype/open-sans/OpenSans-CondBold.ttf", "fonts-open-sans", "Open Sans Condensed", "condensed", OCR_SYNTH_HELDOUT},
    {"truetype/open-sans/OpenSans-CondLight.ttf", "fonts-open-sans", "Open Sans Condensed", "condensed", OCR_SYNTH_HELDOUT},
    {"truetype/open-sans/OpenSans-CondLightItalic.ttf", "fonts-open-sans", "Open Sans Condensed", "condensed", OCR_SYNTH_HELDOUT},
    /* rounded */
    {"truetype/comfortaa/Comfortaa-Regular.ttf", "fonts-comfortaa", "Comfortaa", "rounded", OCR_SYNTH_TRAIN},
    {"truetype/comfortaa/Comfortaa-Bold.ttf", "fonts-comfortaa", "Comfortaa", "rounded", OCR_SYNTH_TRAIN},
    {"truetype/comfortaa/Comfortaa-Light.ttf", "fonts-comfortaa", "Comfortaa", "rounded", OCR_SYNTH_TRAIN},
    {"truetype/quicksand/Quicksand-Regular.ttf", "fonts-quicksand", "Quicksand", "rounded", OCR_SYNTH_HELDOUT},
    {"truetype/quicksand/Quicksand-Bold.ttf", "fonts-quicksand", "Quicksand", "rounded", OCR_SYNTH_HELDOUT},
    {"truetype/quicksand/Quicksand-Light.ttf", "fonts-quicksand", "Quicksand", "rounded", OCR_SYNTH_HELDOUT},
    {"truetype/quicksand/Quicksand-Medium.ttf", "fonts-quicksand", "Quicksand", "rounded", OCR_SYNTH_HELDOUT},
    /* handwriting-like */
    {"opentype/comic-neue/ComicNeue-Regular.otf", "fonts-comic-neue", "Comic Neue", "handwriting", OCR_SYNTH_TRAIN},
    {"opentype/comic-neue/ComicNeue-Bold.otf", "fonts-comic-neue", "Comic Neue", "handwriting", OCR_SYNTH_TRAIN},
    {"opentype/comic-neue/ComicNeue-Italic.otf", "fonts-comic-neue", "Comic Neue", "handwriting", OCR_SYNTH_TRAIN},
    {"opentype/comic-neue/ComicNeue-BoldItalic.otf", "fonts-comic-neue", "Comic Neue", "handwriting", OCR_SYNTH_TRAIN},
    {"opentype/comic-neue/ComicNeue-Light.otf", "fonts-comic-neue", "Comic Neue", "handwriting", OCR_SYNTH_TRAIN},
    {"opentype/kaushanscript/KaushanScript-Regular.otf", "fonts-kaushanscript", "Kaushan Script", "handwriting", OCR_SYNTH_TRAIN},
    {"truetype/kristi/Kristi.ttf", "fonts-kristi", "Kristi", "handwriting", OCR_SYNTH_TRAIN},
    {"truetype/rufscript/Rufscript010.ttf", "fonts-rufscript", "Rufscript", "handwriting", OCR_SYNTH_TRAIN},
    {"truetype/breip/Breip.ttf", "fonts-breip", "Breip", "handwriting", OCR_SYNTH_TRAIN},
    {"opentype/havana/Havana-Regular.otf", "fonts-havana", "Havana", "handwriting", OCR_SYNTH_TRAIN},
    {"truetype/ecolier-court/Ecolier-court.ttf", "fonts-ecolier-court", "Ecolier Court", "handwriting", OCR_SYNTH_TRAIN},
    {"opentype/dancingscript/DancingScript-Regular.otf", "fonts-dancingscript", "Dancing Script", "handwriting", OCR_SYNTH_HELDOUT},
    {"opentype/dancingscript/DancingScript-Bold.otf", "fonts-dancingscript", "Dancing Script", "handwriting", OCR_SYNTH_HELDOUT},
    /* display */
    {"truetype/staypuft/StayPuft.ttf", "fonts-staypuft", "Stay Puft", "display", OCR_SYNTH_TRAIN},
    {"truetype/leckerli-one/LeckerliOne-Regular.ttf", "fonts-leckerli-one", "Leckerli One", "display", OCR_SYNTH_TRAIN},
    {"opentype/league-spartan/LeagueSpartan-Regular.otf", "fonts-league-spartan", "League Spartan", "display", OCR_SYNTH_TRAIN},
    {"opentype/league-spartan/LeagueSpartan-Bold.otf", "fonts-league-spartan", "League Spartan", "display", OCR_SYNTH_TRAIN},
    {"truetype/okolaks/okolaksRegular.ttf", "fonts-okolaks", "Okolaks", "display", OCR_SYNTH_TRAIN},
    {"truetype/okolaks/okolaksBold.ttf", "fonts-okolaks", "Okolaks", "display", OCR_SYNTH_TRAIN},
    {"opentype/lobster/lobster.otf", "fonts-lobster", "Lobster", "display", OCR_SYNTH_HELDOUT},
};

typedef struct { char **paths; int n, cap; } ocr__syn_paths;

static int ocr__syn_has_ext(const char *name, const char *const *exts) {
    size_t n = strlen(name), k, i;
    for (; *exts; exts++) {
        k = strlen(*exts);
        if (n <= k) continue;
        for (i = 0; i < k; i++) {
            char c = name[n - k + i];
            if ((c >= 'A' && c <= 'Z' ? c + 32 : c) != (*exts)[i]) break;
        }
        if (i == k) return 1;
    }
    return 0;
}

static int ocr__syn_paths_push(ocr_ctx *ctx, ocr__syn_paths *list, const char *path) {
    size_t len = strlen(path);
    char *copy;
    if (list->n >= OCR__SYN_MAX_FILES) return OCR_OK; /* enough candidates */
    if (list->n == list->cap) {
        int cap = list->cap ? list->cap * 2 : 64;
        char **grown = (char **)OCR_REALLOC(list->paths, (size_t)cap * sizeof(char *));
        if (!grown) return ocr_error(ctx, OCR_ENOMEM, "ocr_synth_init: out of memory listing files");
        list->paths = grown;
        list->cap = cap;
    }
    copy = (char *)OCR_MALLOC(len + 1);
    if (!copy) return ocr_error(ctx, OCR_ENOMEM, "ocr_synth_init: out of memory listing files");
    memcpy(copy, path, len + 1);
    list->paths[list->n++] = copy;
    return OCR_OK;
}

static void ocr__syn_paths_free(ocr__syn_paths *list) {
    int i;
    for (i = 0; i < list->n; i++) OCR_FREE(list->paths[i]);
    OCR_FREE(list->paths);
    memset(list, 0, sizeof *list);
}

/* Depth-limited, so symbolic link loops end; unreadable folders are skipped. */
static int ocr__syn_find_files(ocr_ctx *ctx, const char *dir, int depth, const char *const *exts, ocr__syn_paths *list) {
    DIR *d;
    struct dirent *e;
    int rc = OCR_OK;
    if (depth > 8 || !(d = opendir(dir))) return OCR_OK;
    while (rc == OCR_OK && (e = readdir(d)) != NULL) {
        char path[4096];
        struct stat st;
        if (e->d_name[0] == '.') continue;
        if (snprintf(path, sizeof path, "%s/%s", dir, e->d_name) >= (int)sizeof path || stat(path, &st) != 0) continue;
        if (S_ISDIR(st.st_mode)) rc = ocr__syn_find_files(ctx, path, depth + 1, exts, list);
        else if (S_ISREG(st.st_mode) && ocr__syn_has_ext(e->d_name, exts)) rc = ocr__syn_paths_push(ctx, list, path);
    }
    closedir(d);
    return rc;
}

static int ocr__syn_cmp_str(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

/* "DIR|FILE,DIR|FILE,...": files as given, folders searched (sorted, so nothing depends on directory order). */
static int ocr__syn_list_custom(ocr_ctx *ctx, const char *spec, const char *what, const char *const *exts, ocr__syn_paths *list) {
    const char *p = spec;
    int rc = OCR_OK;
    while (rc == OCR_OK) {
        const char *end = strchr(p, ',');
        size_t len = end ? (size_t)(end - p) : strlen(p);
        char path[4096];
        struct stat st;
        if (len >= sizeof path) return ocr_error(ctx, OCR_EINVAL, "ocr_synth_init: a %s path in '%s' is too long", what, spec);
        memcpy(path, p, len);
        path[len] = 0;
        if (len) {
            int first = list->n;
            if (stat(path, &st) != 0) return ocr_error(ctx, OCR_ENOTFOUND, "ocr_synth_init: %s path '%s' does not exist", what, path);
            if (S_ISDIR(st.st_mode)) {
                rc = ocr__syn_find_files(ctx, path, 0, exts, list);
                if (rc == OCR_OK && list->n > first)
                    qsort(list->paths + first, (size_t)(list->n - first), sizeof(char *), ocr__syn_cmp_str);
            } else rc = ocr__syn_paths_push(ctx, list, path);
        }
        if (!end) break;
        p = end + 1;
    }
    return rc;
}

static int ocr__syn_glyph_box(const stbtt_fontinfo *info, int c, int box[4]) {
    int g = stbtt_FindGlyphIndex(info, c);
    return g && stbtt_GetGlyphBox(info, g, &box[0], &box[1], &box[2], &box[3]) && !stbtt_IsGlyphEmpty(info, g);
}

/* Why a font is no text face for the generator, or NULL. The words need every ASCII letter and digit; symbol, icon
   and math fonts that map those code points (TeX's math fonts put symbols there) fail the shape checks: letters with
   ascenders rise above the x-height, p and q descend below the baseline, O is taller than o, and a period is a small
   mark near the baseline. The OS/2 table's symbol flags and a "Math" family name refuse the rest. */
static const char *ocr__syn_font_refusal(const stbtt_fontinfo *info) {
    static const char need[] = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
    const unsigned char *d = info->data;
    int i, x[4], o[4], big_o[4], b[4], len;
    const char *name;
    for (i = 0; need[i]; i++)
        if (stbtt_FindGlyphIndex(info, need[i]) == 0) return "lacks ASCII letters or digits";
    {
        stbtt_uint32 os2 = stbtt__find_table((stbtt_uint8 *)d, (stbtt_uint32)info->fontstart, "OS/2");
        if (os2) {
            int version = d[os2] << 8 | d[os2 + 1];
            if (d[os2 + 32] == 5) return "OS/2 panose family kind is symbol";
            if (d[os2 + 30] == 12) return "OS/2 family class is symbolic";
            if (version >= 1 && (d[os2 + 78] & 0x80)) return "OS/2 code page range is symbol";
        }
    }
    name = stbtt_GetFontNameString(info, &len, STBTT_PLATFORM_ID_MICROSOFT, STBTT_MS_EID_UNICODE_BMP, STBTT_MS_LANG_ENGLISH, 1);
    for (i = 0; name && i + 7 < len; i += 2) /* UTF-16BE: compare the low bytes */
        if ((name[i + 1] | 32) == 'm' && (name[i + 3] | 32) == 'a' && (name[i + 5] | 32) == 't' && (name[i + 7] | 32) == 'h' &&
            !name[i] && !name[i + 2] && !name[i + 4] && !name[i + 6])
            return "a math font (family name)";
    if (!ocr__syn_glyph_box(info, 'x', x) || x[3] <= 0) return "no x-height ('x' is empty)";
    for (i = 0; "bdhkl"[i]; i++)
        if (!ocr__syn_glyph_box(info, "bdhkl"[i], b) || b[3] < x[3] + x[3] / 8) return "letters with ascenders are no taller than 'x'";
    for (i = 0; "pq"[i]; i++)
        if (!ocr__syn_glyph_box(info, "pq"[i], b) || b[1] > -x[3] / 8) return "'p' or 'q' does not descend below the baseline";
    if (!ocr__syn_glyph_box(info, 'o', o) || !ocr__syn_glyph_box(info, 'O', big_o) || big_o[3] < o[3] + o[3] / 8)
        return "'O' is no taller than 'o'";
    if (ocr__syn_glyph_box(info, '.', b) && (b[3] > x[3] / 2 || b[3] - b[1] > x[3] / 2 || b[2] - b[0] > x[3] / 2))
        return "'.' is no period";
    return NULL;
}

OCRDEF ocr_synth_config ocr_synth_defaults(void) {
    ocr_synth_config c;
    memset(&c, 0, sizeof c);
    c.font_path = NULL;
    c.font_root = NULL;
    c.max_fonts = 64;
    c.photo_path = NULL;
    c.photo_root = NULL;
    c.photo_prob = 0.6f;
    c.split = OCR_SYNTH_TRAIN;
    c.min_text_px = 10.0f;
    c.max_text_px = 80.0f;
    c.lines_per_mpix = 30.0f;
    c.max_rotation_deg = 30.0f;
    c.clutter = 1.0f;
    c.occlusion_prob = 0.15f;
    c.low_contrast_prob = 0.05f;
    c.blur_prob = 0.25f;
    c.noise_stddev = 8.0f;
    c.min_contrast = 0.12f;
    c.max_occluded = 0.5f;
    c.min_care_px = 8.0f;
    c.plain_background = 0;
    c.words_path = NULL;
    c.words_prob = 0.5f;
    return c;
}

static int ocr__syn_check_config(ocr_ctx *ctx, const ocr_synth_config *c) {
    const char *fn = "ocr_synth_init";
    struct { const char *name; float value, lo, hi; } f[14];
    int i;
    f[0].name = "min_text_px";       f[0].value = c->min_text_px;       f[0].lo = 4;  f[0].hi = 1000;
    f[1].name = "max_text_px";       f[1].value = c->max_text_px;       f[1].lo = 4;  f[1].hi = 1000;
    f[2].name = "lines_per_mpix";    f[2].value = c->lines_per_mpix;    f[2].lo = 0;  f[2].hi = 10000;
    f[3].name = "max_rotation_deg";  f[3].value = c->max_rotation_deg;  f[3].lo = 0;  f[3].hi = 90;
    f[4].name = "clutter";           f[4].value = c->clutter;           f[4].lo = 0;  f[4].hi = 100;
    f[5].name = "occlusion_prob";    f[5].value = c->occlusion_prob;    f[5].lo = 0;  f[5].hi = 1;
    f[6].name = "low_contrast_prob"; f[6].value = c->low_contrast_prob; f[6].lo = 0;  f[6].hi = 1;
    f[7].name = "blur_prob";         f[7].value = c->blur_prob;         f[7].lo = 0;  f[7].hi = 1;
    f[8].name = "noise_stddev";      f[8].value = c->noise_stddev;      f[8].lo = 0;  f[8].hi = 100;
    f[9].name = "min_contrast";      f[9].value = c->min_contrast;      f[9].lo = 0;  f[9].hi = 1;
    f[10].name = "max_occluded";     f[10].value = c->max_occluded;     f[10].lo = 0; f[10].hi = 1;
    f[11].name = "min_care_px";      f[11].value = c->min_care_px;      f[11].lo = 0; f[11].hi = 1000;
    f[12].name = "photo_prob";       f[12].value = c->photo_prob;       f[12].lo = 0; f[12].hi = 1;
    f[13].name = "words_prob";       f[13].value = c->words_prob;       f[13].lo = 0; f[13].hi = 1;
    for (i = 0; i < (int)(sizeof f / sizeof f[0]); i++)
        if (!(f[i].value >= f[i].lo && f[i].value <= f[i].hi)) /* also catches NaN */
            return ocr_error(ctx, OCR_EINVAL, "%s: config.%s = %g, expected [%g, %g]", fn, f[i].name, f[i].value, f[i].lo, f[i].hi);
    if (c->min_text_px > c->max_text_px)
        return ocr_error(ctx, OCR_EINVAL, "%s: config.min_text_px = %g is above max_text_px = %g", fn, c->min_text_px, c->max_text_px);
    if (c->max_fonts < 1) return ocr_error(ctx, OCR_EINVAL, "%s: config.max_fonts = %d, expected >= 1", fn, c->max_fonts);
    if (c->split != OCR_SYNTH_TRAIN && c->split != OCR_SYNTH_HELDOUT)
        return ocr_error(ctx, OCR_EINVAL, "%s: config.split = %d, expected OCR_SYNTH_TRAIN or OCR_SYNTH_HELDOUT", fn, c->split);
    return OCR_OK;
}

OCRDEF void ocr_synth_free(ocr_synth *synth) {
    int i;
    if (!synth) return;
    for (i = 0; i < synth->n_fonts; i++) { OCR_FREE(synth->fonts[i].data); OCR_FREE(synth->fonts[i].file); OCR_FREE(synth->fonts[i].sha256); }
    for (i = 0; i < synth->n_photos; i++) {
        OCR_FREE(synth->photos[i].file);
        OCR_FREE(synth->photos[i].sha256);
        OCR_FREE(synth->photos[i].bytes);
        if (synth->photos[i].image) ocr__syn_free_levels(synth->photos[i].image);
    }
    OCR_FREE(synth->fonts);
    OCR_FREE(synth->photos);
    ocr__syn_words_free(synth->wordlist);
    synth->fonts = NULL;
    synth->photos = NULL;
    synth->wordlist = NULL;
    synth->n_fonts = synth->n_photos = synth->n_families = 0;
}

static char *ocr__syn_strdup(const char *s) {
    size_t n = strlen(s) + 1;
    char *c = (char *)OCR_MALLOC(n);
    if (c) memcpy(c, s, n);
    return c;
}

/* Appends "what" to a bounded message list. */
static void ocr__syn_note(char *buf, size_t cap, const char *what) {
    size_t n = strlen(buf);
    if (n + 1 >= cap) return;
    snprintf(buf + n, cap - n, "%s%s", n ? "; " : "", what);
}

/* Reads one font into synth->fonts[synth->n_fonts]; 1 when kept, 0 when refused (why: the reason), <0 on an error. */
static int ocr__syn_load_font(ocr_ctx *ctx, ocr_synth *synth, const char *path, const char *file, int family, const char **why) {
    ocr__synth_font *f = &synth->fonts[synth->n_fonts];
    int offset, line_gap, lsb, k;
    memset(f, 0, sizeof *f);
    *why = NULL;
    if (ocr_read_file(ctx, path, OCR__SYN_MAX_FONT_BYTES, &f->data, &f->size) != OCR_OK) { *why = "unreadable"; return 0; }
    offset = f->size >= 12 ? stbtt_GetFontOffsetForIndex(f->data, 0) : -1;
    if (offset < 0 || !stbtt_InitFont(&f->info, f->data, offset)) *why = "not a font with a Unicode character map";
    else *why = ocr__syn_font_refusal(&f->info);
    if (!*why) {
        stbtt_GetFontVMetrics(&f->info, &f->ascent, &f->descent, &line_gap);
        if (f->ascent - f->descent <= 0) *why = "no vertical metrics";
    }
    if (*why) { OCR_FREE(f->data); f->data = NULL; return 0; }
    stbtt_GetCodepointHMetrics(&f->info, ' ', &f->space_advance, &lsb);
    if (f->space_advance <= 0) f->space_advance = (f->ascent - f->descent) / 4;
    for (k = 0; k < OCR__SYN_REPERTOIRE; k++)
        if (stbtt_FindGlyphIndex(&f->info, ocr__syn_rep_codepoint(k))) f->covers[k >> 3] |= (unsigned char)(1u << (k & 7));
    f->family = family;
    if (!(f->file = ocr__syn_strdup(file))) { OCR_FREE(f->data); return ocr_error(ctx, OCR_ENOMEM, "ocr_synth_init: out of memory"); }
    synth->n_fonts++;
    return 1;
}

/* Every declared file of the split must be under root: otherwise an error naming the files and the packages to install. */
static int ocr__syn_check_declared(ocr_ctx *ctx, const char *what, const char *root, const ocr__syn_asset *table, int n, int split) {
    char missing[1024] = "", packages[512] = "", path[4096];
    struct stat st;
    int i;
    for (i = 0; i < n; i++) {
        const ocr__syn_asset *a = &table[i];
        if (a->split != split) continue;
        snprintf(path, sizeof path, "%s/%s", root, a->file);
        if (stat(path, &st) != 0) {
            if (!strstr(packages, a->package)) { strncat(packages, " ", sizeof packages - strlen(packages) - 1); strncat(packages, a->package, sizeof packages - strlen(packages) - 1); }
            ocr__syn_note(missing, sizeof missing, a->file);
        }
    }
    if (missing[0])
        return ocr_error(ctx, OCR_ENOTFOUND, "ocr_synth_init: declared %s missing under %s: %s (apt-get install%s)", what, root, missing, packages);
    return OCR_OK;
}

static int ocr__syn_load_fonts(ocr_ctx *ctx, ocr_synth *synth, char *refused, size_t refused_cap) {
    const char *fn = "ocr_synth_init";
    const ocr_synth_config *cfg = &synth->config;
    const char *root = cfg->font_root ? cfg->font_root : "/usr/share/fonts";
    static const char *const exts[] = {".ttf", ".otf", NULL};
    int rc = OCR_OK, i;
    if (!cfg->font_path) { /* the declared set: every file must be there and be a text face */
        const int n_decl = (int)(sizeof ocr__syn_declared_fonts / sizeof ocr__syn_declared_fonts[0]);
        const char *last_family = NULL;
        if ((rc = ocr__syn_check_declared(ctx, "fonts", root, ocr__syn_declared_fonts, n_decl, cfg->split))) return rc;
        synth->fonts = (ocr__synth_font *)OCR_MALLOC((size_t)n_decl * sizeof(ocr__synth_font));
        if (!synth->fonts) return ocr_error(ctx, OCR_ENOMEM, "%s: out of memory", fn);
        for (i = 0; i < n_decl; i++) {
            const ocr__syn_asset *a = &ocr__syn_declared_fonts[i];
            char path[4096];
            const char *why;
            int family;
            if (a->split != cfg->split) continue;
            /* a family's files are contiguous in the table */
            family = last_family && strcmp(last_family, a->family) == 0 ? synth->n_families - 1 : synth->n_families;
            snprintf(path, sizeof path, "%s/%s", root, a->file);
            if ((rc = ocr__syn_load_font(ctx, synth, path, a->file, family, &why)) < 0) return rc;
            if (rc == 0)
                return ocr_error(ctx, OCR_EFORMAT, "%s: declared font %s (package %s) is refused: %s", fn, path, a->package, why);
            if (family == synth->n_families) synth->n_families++;
            last_family = a->family;
        }
        return OCR_OK;
    } else {
        ocr__syn_paths list;
        memset(&list, 0, sizeof list);
        rc = ocr__syn_list_custom(ctx, cfg->font_path, "font", exts, &list);
        if (rc == OCR_OK && list.n && !(synth->fonts = (ocr__synth_font *)OCR_MALLOC((size_t)list.n * sizeof(ocr__synth_font))))
            rc = ocr_error(ctx, OCR_ENOMEM, "%s: out of memory", fn);
        for (i = 0; rc == OCR_OK && i < list.n && synth->n_fonts < cfg->max_fonts; i++) {
            const char *why;
            int kept = ocr__syn_load_font(ctx, synth, list.paths[i], list.paths[i], synth->n_fonts, &why);
            if (kept < 0) rc = kept;
            else if (!kept) {
                char note[600];
                const char *base = strrchr(list.paths[i], '/');
                snprintf(note, sizeof note, "%s (%s)", base ? base + 1 : list.paths[i], why);
                ocr__syn_note(refused, refused_cap, note);
            }
        }
        synth->n_families = synth->n_fonts; /* no family information: each file is its own */
        ocr__syn_paths_free(&list);
        if (rc == OCR_OK && synth->n_fonts == 0)
            rc = ocr_error(ctx, OCR_ENOTFOUND, "%s: no usable .ttf/.otf text font in '%s'%s%s", fn, cfg->font_path,
                           refused[0] ? "; refused: " : "", refused);
        return rc;
    }
}

/* ---------------------------------------------------------------- photographs */

/* The declared photographs: text-free photos that Debian packages ship, relative to photo_root; docs/SYNTH_ASSETS.md
   has their licences. Left out: photos showing text or clock marks, and illustrations. */
static const ocr__syn_asset ocr__syn_declared_photos[] = {
    {"mate/nature/Aqua.jpg", "mate-backgrounds", "Aqua", "photo", OCR_SYNTH_TRAIN},
    {"mate/nature/Blinds.jpg", "mate-backgrounds", "Blinds", "photo", OCR_SYNTH_TRAIN},
    {"mate/nature/Dune.jpg", "mate-backgrounds", "Dune", "photo", OCR_SYNTH_TRAIN},
    {"mate/nature/FreshFlower.jpg", "mate-backgrounds", "FreshFlower", "photo", OCR_SYNTH_TRAIN},
    {"mate/nature/Garden.jpg", "mate-backgrounds", "Garden", "photo", OCR_SYNTH_TRAIN},
    {"mate/nature/GreenMeadow.jpg", "mate-backgrounds", "GreenMeadow", "photo", OCR_SYNTH_TRAIN},
    {"mate/nature/LadyBird.jpg", "mate-backgrounds", "LadyBird", "photo", OCR_SYNTH_TRAIN},
    {"mate/nature/RainDrops.jpg", "mate-backgrounds", "RainDrops", "photo", OCR_SYNTH_TRAIN},
    {"mate/nature/TwoWings.jpg", "mate-backgrounds", "TwoWings", "photo", OCR_SYNTH_TRAIN},
    {"mate/nature/Storm.jpg", "mate-backgrounds", "Storm", "photo", OCR_SYNTH_HELDOUT},
    {"mate/nature/Wood.jpg", "mate-backgrounds", "Wood", "photo", OCR_SYNTH_HELDOUT},
    {"mate/nature/YellowFlower.jpg", "mate-backgrounds", "YellowFlower", "photo", OCR_SYNTH_HELDOUT},
    {"Dragonfly_by_Bolly.jpg", "lomiri-wallpapers-16.04", "Dragonfly", "photo", OCR_SYNTH_TRAIN},
    {"Picture_0B_by_freespace.jpg", "lomiri-wallpapers-16.04", "Picture 0B", "photo", OCR_SYNTH_TRAIN},
    {"Picture_1A_by_freespace.jpg", "lomiri-wallpapers-16.04", "Picture 1A", "photo", OCR_SYNTH_TRAIN},
    {"aitzgorri_by_Aitzol_Berasategi.jpg", "lomiri-wallpapers-16.04", "aitzgorri", "photo", OCR_SYNTH_TRAIN},
    {"friends_by_Aitzol_Berasategi.jpg", "lomiri-wallpapers-16.04", "friends", "photo", OCR_SYNTH_TRAIN},
    {"life_by_Aitzol_Berasategi.jpg", "lomiri-wallpapers-16.04", "life", "photo", OCR_SYNTH_TRAIN},
    {"sunset_by_Aitzol_Berasategi.jpg", "lomiri-wallpapers-16.04", "sunset", "photo", OCR_SYNTH_TRAIN},
    {"seeding_by_Clements_Engelhardt.jpg", "lomiri-wallpapers-16.04", "seeding", "photo", OCR_SYNTH_TRAIN},
    {"Bridge_by_Sander_Klootwijk.jpg", "lomiri-wallpapers-16.04", "Bridge", "photo", OCR_SYNTH_HELDOUT},
    {"picosdeeuropa_by_Aitzol_Berasategi.jpg", "lomiri-wallpapers-16.04", "picosdeeuropa", "photo", OCR_SYNTH_HELDOUT},
    {"free_by_Peter_Nerlich.jpg", "lomiri-wallpapers-16.04", "free", "photo", OCR_SYNTH_HELDOUT},
};

/* Area-filter resize (each output pixel averages the source pixels it covers, fractions weighted): downscaling a
   photograph without aliasing. */
static int ocr__syn_area_resize(ocr_ctx *ctx, const ocr_image *src, ocr_image *dst, int w, int h) {
    float *acc = NULL, sy = (float)src->height / (float)h, sx = (float)src->width / (float)w;
    size_t row = (size_t)src->width * 3;
    int rc, ox, oy, i, c;
    if ((rc = ocr_image_alloc(ctx, dst, w, h, 3))) return rc;
    if (!(acc = (float *)OCR_MALLOC(row * sizeof(float)))) { ocr_image_free(dst); return ocr_error(ctx, OCR_ENOMEM, "ocr_synth_sample: out of memory"); }
    for (oy = 0; oy < h; oy++) {
        float y0 = oy * sy, y1 = (oy + 1) * sy;
        int iy0 = (int)y0, iy1 = (int)ceilf(y1);
        uint8_t *out = dst->pixels + (size_t)oy * (size_t)w * 3;
        if (iy1 > src->height) iy1 = src->height;
        memset(acc, 0, row * sizeof(float));
        for (i = iy0; i < iy1; i++) {
            float lo = (float)i > y0 ? (float)i : y0, hi = (float)(i + 1) < y1 ? (float)(i + 1) : y1, wt = (hi - lo) / sy;
            const uint8_t *p = src->pixels + (size_t)i * row;
            size_t k;
            for (k = 0; k < row; k++) acc[k] += wt * p[k];
        }
        for (ox = 0; ox < w; ox++) {
            float x0 = ox * sx, x1 = (ox + 1) * sx, sum[3] = {0, 0, 0};
            int ix0 = (int)x0, ix1 = (int)ceilf(x1);
            if (ix1 > src->width) ix1 = src->width;
            for (i = ix0; i < ix1; i++) {
                float lo = (float)i > x0 ? (float)i : x0, hi = (float)(i + 1) < x1 ? (float)(i + 1) : x1, wt = (hi - lo) / sx;
                for (c = 0; c < 3; c++) sum[c] += wt * acc[(size_t)i * 3 + (size_t)c];
            }
            for (c = 0; c < 3; c++) out[ox * 3 + c] = (uint8_t)(sum[c] < 0 ? 0 : sum[c] > 255 ? 255 : sum[c] + 0.5f);
        }
    }
    OCR_FREE(acc);
    return OCR_OK;
}

static int ocr__syn_load_photo(ocr_ctx *ctx, ocr_synth *synth, const char *path, const char *file) {
    ocr__synth_photo *ph = &synth->photos[synth->n_photos];
    ocr_image probe;
    int rc;
    memset(ph, 0, sizeof *ph);
    if ((rc = ocr_read_file(ctx, path, OCR_IMAGE_MAX_BYTES, &ph->bytes, &ph->size))) return rc;
    if ((rc = ocr_image_probe(ctx, ph->bytes, ph->size, &probe))) {
        char why[OCR_ERROR_MAX];
        snprintf(why, sizeof why, "%s", ocr_ctx_last_error(ctx));
        OCR_FREE(ph->bytes);
        return ocr_error(ctx, rc, "ocr_synth_init: photograph %s: %s", path, why);
    }
    if (!(ph->file = ocr__syn_strdup(file))) { OCR_FREE(ph->bytes); return ocr_error(ctx, OCR_ENOMEM, "ocr_synth_init: out of memory"); }
    synth->n_photos++;
    return OCR_OK;
}

/* The decoded, downscaled photograph (decoding it if no thread has yet): OCR__SYN_PHOTO_LEVELS sizes; NULL with an
   error. */
static const ocr_image *ocr__syn_photo_image(ocr_ctx *ctx, ocr__synth_photo *ph) {
    ocr_image full, *levels, *expected = NULL;
    int rc = OCR_OK, i, w, h;
    if ((levels = __atomic_load_n(&ph->image, __ATOMIC_ACQUIRE)) != NULL) return levels;
    if (!(levels = (ocr_image *)OCR_MALLOC(OCR__SYN_PHOTO_LEVELS * sizeof *levels))) {
        ocr_error(ctx, OCR_ENOMEM, "ocr_synth_sample: out of memory");
        return NULL;
    }
    memset(levels, 0, OCR__SYN_PHOTO_LEVELS * sizeof *levels);
    if (ocr_image_decode(ctx, ph->bytes, ph->size, &full)) { OCR_FREE(levels); return NULL; }
    w = full.width;
    h = full.height;
    if (w > OCR__SYN_PHOTO_SIDE || h > OCR__SYN_PHOTO_SIDE) {
        float sc = (float)OCR__SYN_PHOTO_SIDE / (float)(w > h ? w : h);
        w = (int)(w * sc + 0.5f);
        h = (int)(h * sc + 0.5f);
        rc = ocr__syn_area_resize(ctx, &full, &levels[0], w < 1 ? 1 : w, h < 1 ? 1 : h);
        ocr_image_free(&full);
    } else levels[0] = full;
    for (i = 1; rc == OCR_OK && i < OCR__SYN_PHOTO_LEVELS; i++) {
        w = (levels[i - 1].width + 1) / 2;
        h = (levels[i - 1].height + 1) / 2;
        rc = ocr__syn_area_resize(ctx, &levels[i - 1], &levels[i], w, h);
    }
    if (rc) { ocr__syn_free_levels(levels); return NULL; }
    if (!__atomic_compare_exchange_n(&ph->image, &expected, levels, 0, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE)) {
        ocr__syn_free_levels(levels); /* another thread was first: the same pixels */
        return expected;
    }
    return levels;
}

static int ocr__syn_load_photos(ocr_ctx *ctx, ocr_synth *synth) {
    const char *fn = "ocr_synth_init";
    const ocr_synth_config *cfg = &synth->config;
    const char *root = cfg->photo_root ? cfg->photo_root : "/usr/share/backgrounds";
    static const char *const exts[] = {".jpg", ".jpeg", ".png", NULL};
    int rc = OCR_OK, i;
    if (!cfg->photo_path) {
        const int n_decl = (int)(sizeof ocr__syn_declared_photos / sizeof ocr__syn_declared_photos[0]);
        if ((rc = ocr__syn_check_declared(ctx, "photographs", root, ocr__syn_declared_photos, n_decl, cfg->split))) return rc;
        if (!(synth->photos = (ocr__synth_photo *)OCR_MALLOC((size_t)n_decl * sizeof(ocr__synth_photo))))
            return ocr_error(ctx, OCR_ENOMEM, "%s: out of memory", fn);
        for (i = 0; rc == OCR_OK && i < n_decl; i++) {
            const ocr__syn_asset *a = &ocr__syn_declared_photos[i];
            char path[4096];
            if (a->split != cfg->split) continue;
            snprintf(path, sizeof path, "%s/%s", root, a->file);
            rc = ocr__syn_load_photo(ctx, synth, path, a->file);
        }
        return rc;
    } else {
        ocr__syn_paths list;
        memset(&list, 0, sizeof list);
        rc = ocr__syn_list_custom(ctx, cfg->photo_path, "photograph", exts, &list);
        if (rc == OCR_OK && list.n && !(synth->photos = (ocr__synth_photo *)OCR_MALLOC((size_t)list.n * sizeof(ocr__synth_photo))))
            rc = ocr_error(ctx, OCR_ENOMEM, "%s: out of memory", fn);
        for (i = 0; rc == OCR_OK && i < list.n; i++) rc = ocr__syn_load_photo(ctx, synth, list.paths[i], list.paths[i]);
        ocr__syn_paths_free(&list);
        if (rc == OCR_OK && synth->n_photos == 0)
            rc = ocr_error(ctx, OCR_ENOTFOUND, "%s: no .jpg/.jpeg/.png photograph in '%s'", fn, cfg->photo_path);
        return rc;
    }
}

static int ocr__syn_uses_photos(const ocr_synth_config *c) {
    return !c->plain_background && c->photo_prob > 0 && !(c->photo_path && strcmp(c->photo_path, "none") == 0);
}

static int ocr__syn_load_words(ocr_ctx *ctx, ocr_synth *synth);

OCRDEF int ocr_synth_init(ocr_ctx *ctx, ocr_synth *synth, const ocr_synth_config *config) {
    const char *fn = "ocr_synth_init";
    char refused[2048] = "";
    int rc, i;
    if (!synth) return ocr_error(ctx, OCR_EINVAL, "%s: synth is NULL", fn);
    memset(synth, 0, sizeof *synth);
    synth->config = config ? *config : ocr_synth_defaults();
    if ((rc = ocr__syn_check_config(ctx, &synth->config))) return rc;
    rc = ocr__syn_load_fonts(ctx, synth, refused, sizeof refused);
    if (rc == OCR_OK && ocr__syn_uses_photos(&synth->config)) rc = ocr__syn_load_photos(ctx, synth);
    if (rc == OCR_OK && synth->config.words_path) rc = ocr__syn_load_words(ctx, synth);
    if (rc) { ocr_synth_free(synth); return rc; }
    if (synth->config.words_prob <= 0 && synth->wordlist) { /* checked, never drawn from: scenes and identity as without it */
        synth->config.words_path = NULL;
        ocr__syn_words_free(synth->wordlist);
        synth->wordlist = NULL;
    }
    {
        const ocr_synth_config *c = &synth->config;
        ocr_hasher h;
        ocr_hasher_init(&h, OCR__SYN_VERSION);
        ocr_hasher_f64(&h, c->min_text_px); ocr_hasher_f64(&h, c->max_text_px); ocr_hasher_f64(&h, c->lines_per_mpix);
        ocr_hasher_f64(&h, c->max_rotation_deg); ocr_hasher_f64(&h, c->clutter); ocr_hasher_f64(&h, c->occlusion_prob);
        ocr_hasher_f64(&h, c->low_contrast_prob); ocr_hasher_f64(&h, c->blur_prob); ocr_hasher_f64(&h, c->noise_stddev);
        ocr_hasher_f64(&h, c->min_contrast); ocr_hasher_f64(&h, c->max_occluded); ocr_hasher_f64(&h, c->min_care_px);
        ocr_hasher_u64(&h, (uint64_t)c->plain_background);
        ocr_hasher_f64(&h, synth->n_photos ? c->photo_prob : 0);
        ocr_hasher_u64(&h, (uint64_t)synth->n_families);
        for (i = 0; i < synth->n_fonts; i++) {
            ocr_hasher_u64(&h, (uint64_t)synth->fonts[i].size);
            ocr_hasher_update(&h, synth->fonts[i].data, synth->fonts[i].size);
            ocr_hasher_u64(&h, (uint64_t)synth->fonts[i].family);
        }
        for (i = 0; i < synth->n_photos; i++) {
            ocr_hasher_u64(&h, (uint64_t)synth->photos[i].size);
            ocr_hasher_update(&h, synth->photos[i].bytes, synth->photos[i].size);
        }
        if (synth->wordlist) { /* nothing hashed without one, so such scenes keep their identity */
            ocr_hasher_f64(&h, c->words_prob);
            ocr_hasher_u64(&h, (uint64_t)synth->wordlist->size);
            ocr_hasher_update(&h, synth->wordlist->bytes, synth->wordlist->size);
        }
        synth->identity = ocr_hasher_final(&h);
    }
    ocr_ctx_clear_error(ctx); /* skipped files left messages that are not errors */
    if (refused[0]) { /* not an error: said in the context's message and the log */
        snprintf(ctx->last_error, sizeof ctx->last_error, "%s: refused as no text fonts: %.960s", fn, refused);
        ocr_log(ctx, OCR_LOG_WARN, "%s", ctx->last_error);
    }
    return OCR_OK;
}

OCRDEF int ocr_synth_font_count(const ocr_synth *synth) { return synth ? synth->n_fonts : 0; }
OCRDEF const char *ocr_synth_font_file(const ocr_synth *synth, int i) {
    return synth && i >= 0 && i < synth->n_fonts ? synth->fonts[i].file : NULL;
}
/* SHA-256 costs more than the rest of init together, and only run metadata asks for it: computed on the first
   request, by whichever thread asks, published like the photographs' pixels. NULL when out of memory. */
static const char *ocr__syn_lazy_sha256(char **slot, const unsigned char *data, size_t size) {
    char *hex, *expected = NULL;
    if ((hex = __atomic_load_n(slot, __ATOMIC_ACQUIRE)) != NULL) return hex;
    if (!(hex = (char *)OCR_MALLOC(65))) return NULL;
    ocr__syn_sha256_hex(data, size, hex);
    if (!__atomic_compare_exchange_n(slot, &expected, hex, 0, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE)) {
        OCR_FREE(hex);
        return expected;
    }
    return hex;
}

OCRDEF const char *ocr_synth_font_sha256(const ocr_synth *synth, int i) {
    if (!synth || i < 0 || i >= synth->n_fonts) return NULL;
    return ocr__syn_lazy_sha256(&synth->fonts[i].sha256, synth->fonts[i].data, synth->fonts[i].size);
}
OCRDEF int ocr_synth_photo_count(const ocr_synth *synth) { return synth ? synth->n_photos : 0; }
OCRDEF const char *ocr_synth_photo_file(const ocr_synth *synth, int i) {
    return synth && i >= 0 && i < synth->n_photos ? synth->photos[i].file : NULL;
}
OCRDEF const char *ocr_synth_photo_sha256(const ocr_synth *synth, int i) {
    if (!synth || i < 0 || i >= synth->n_photos) return NULL;
    return ocr__syn_lazy_sha256(&synth->photos[i].sha256, synth->photos[i].bytes, synth->photos[i].size);
}
OCRDEF int ocr_synth_word_count(const ocr_synth *synth, int *too_long, int *no_font) {
    const ocr__synth_words *w = synth ? synth->wordlist : NULL;
    if (too_long) *too_long = w ? w->too_long : 0;
    if (no_font) *no_font = w ? w->no_font : 0;
    return w ? w->n : 0;
}
OCRDEF const char *ocr_synth_words_sha256(const ocr_synth *synth) {
    if (!synth || !synth->wordlist) return NULL;
    return ocr__syn_lazy_sha256(&synth->wordlist->sha256, synth->wordlist->bytes, synth->wordlist->size);
}

/* ---------------------------------------------------------------- random words */

#define OCR__SYN_MAX_CHARS 24

static float ocr__syn_range(ocr_rng *r, float lo, float hi) { return lo + (hi - lo) * ocr_rng_uniform(r); }
static int ocr__syn_chance(ocr_rng *r, float p) { return ocr_rng_uniform(r) < p; }

static int ocr__syn_upper(int c) {
    if (c >= 'a' && c <= 'z') return c - 32;
    if (c >= 0xE0 && c <= 0xFE && c != 0xF7) return c - 0x20; /* Latin-1 */
    if (c == 0x153) return 0x152;                             /* oe */
    if (c >= 0x3B1 && c <= 0x3C9 && c != 0x3C2) return c - 0x20; /* Greek */
    if (c >= 0x430 && c <= 0x44F) return c - 0x20;            /* Cyrillic */
    return c;
}

static int ocr__syn_latin_letter(ocr_rng *r) {
    /* Roughly English letter frequencies, with a few accented letters, so words look like words. */
    static const char freq[] = "eeeeeeeeeeeettttttttaaaaaaaaooooooooiiiiiiinnnnnnnssssssshhhhhhrrrrrrddddllllcccuuummwwffggyyppbbvkjxqz";
    static const int accented[] = {0xE0, 0xE1, 0xE2, 0xE4, 0xE7, 0xE8, 0xE9, 0xEA, 0xEB, 0xED, 0xEE, 0xEF,
                                   0xF1, 0xF3, 0xF4, 0xF6, 0xF8, 0xFA, 0xFB, 0xFC, 0xDF, 0x153};
    if (ocr__syn_chance(r, 0.05f)) return accented[ocr_rng_below(r, (uint32_t)(sizeof accented / sizeof accented[0]))];
    return freq[ocr_rng_below(r, (uint32_t)(sizeof freq - 1))];
}

static int ocr__syn_digit(ocr_rng *r) { return '0' + (int)ocr_rng_below(r, 10); }

/* Appends c when there is room. */
static void ocr__syn_put(int *cps, int *n, int c) { if (*n < OCR__SYN_MAX_CHARS) cps[(*n)++] = c; }

static void ocr__syn_digits(ocr_rng *r, int *cps, int *n, int count) {
    int i;
    for (i = 0; i < count; i++) ocr__syn_put(cps, n, ocr__syn_digit(r));
}

/* A random word: latin words with case and punctuation, numbers, prices, dates, codes, Greek or Cyrillic. */
static int ocr__syn_random_word(ocr_rng *r, int *cps) {
    static const char trail[] = ",.;:!?";
    float kind = ocr_rng_uniform(r);
    int n = 0, i, len;
    if (kind < 0.64f) { /* latin */
        float casing = ocr_rng_uniform(r);
        int open = 0;
        len = 1 + (int)ocr_rng_below(r, 3) + (int)ocr_rng_below(r, 4) + (int)ocr_rng_below(r, 4);
        if (ocr__syn_chance(r, 0.1f)) len += (int)ocr_rng_below(r, 7);
        if (ocr__syn_chance(r, 0.04f)) { open = ocr__syn_chance(r, 0.5f) ? '(' : '"'; ocr__syn_put(cps, &n, open); }
        for (i = 0; i < len; i++) {
            int c = ocr__syn_latin_letter(r);
            if (casing > 0.85f || (casing > 0.55f && i == 0)) c = ocr__syn_upper(c);
            ocr__syn_put(cps, &n, c);
            if (i + 1 < len && i > 0 && ocr__syn_chance(r, 0.02f)) ocr__syn_put(cps, &n, "-'./@"[ocr_rng_below(r, 5)]);
        }
        if (open) ocr__syn_put(cps, &n, open == '(' ? ')' : '"');
        else if (ocr__syn_chance(r, 0.15f)) ocr__syn_put(cps, &n, trail[ocr_rng_below(r, (uint32_t)(sizeof trail - 1))]);
    } else if (kind < 0.80f) { /* numbers */
        switch (ocr_rng_below(r, 6)) {
        case 0: ocr__syn_digits(r, cps, &n, 1 + (int)ocr_rng_below(r, 6)); break;
        case 1: /* price */
            if (ocr__syn_chance(r, 0.5f)) ocr__syn_put(cps, &n, "$\xA3"[ocr_rng_below(r, 2)] & 0xFF);
            ocr__syn_digits(r, cps, &n, 1 + (int)ocr_rng_below(r, 4));
            ocr__syn_put(cps, &n, ocr__syn_chance(r, 0.7f) ? '.' : ',');
            ocr__syn_digits(r, cps, &n, 2);
            if (ocr__syn_chance(r, 0.2f)) ocr__syn_put(cps, &n, 0x20AC); /* euro sign */
            break;
        case 2: /* date */
            ocr__syn_digits(r, cps, &n, 2); ocr__syn_put(cps, &n, "/.-"[ocr_rng_below(r, 3)]);
            ocr__syn_digits(r, cps, &n, 2); ocr__syn_put(cps, &n, cps[2]);
            ocr__syn_digits(r, cps, &n, ocr__syn_chance(r, 0.5f) ? 2 : 4);
            break;
        case 3: ocr__syn_digits(r, cps, &n, 2); ocr__syn_put(cps, &n, ':'); ocr__syn_digits(r, cps, &n, 2); break;
        case 4: ocr__syn_digits(r, cps, &n, 1 + (int)ocr_rng_below(r, 3)); ocr__syn_put(cps, &n, '%'); break;
        default:
            ocr__syn_put(cps, &n, '+'); ocr__syn_digits(r, cps, &n, 2); ocr__syn_put(cps, &n, '-');
            ocr__syn_digits(r, cps, &n, 3 + (int)ocr_rng_below(r, 5));
            break;
        }
    } else if (kind < 0.90f) { /* codes such as AB-1234 */
        len = 2 + (int)ocr_rng_below(r, 6);
        for (i = 0; i < len; i++) {
            ocr__syn_put(cps, &n, ocr__syn_chance(r, 0.5f) ? 'A' + (int)ocr_rng_below(r, 26) : ocr__syn_digit(r));
            if (i == 1 && len > 3 && ocr__syn_chance(r, 0.3f)) ocr__syn_put(cps, &n, '-');
        }
    } else { /* Greek or Cyrillic */
        int greek = ocr__syn_chance(r, 0.5f), capital = ocr__syn_chance(r, 0.3f);
        len = 2 + (int)ocr_rng_below(r, 7);
        for (i = 0; i < len; i++) {
            int c = greek ? 0x3B1 + (int)ocr_rng_below(r, 25) : 0x430 + (int)ocr_rng_below(r, 32);
            if (c == 0x3C2) c = 0x3C3; /* final sigma only at word end: use sigma */
            ocr__syn_put(cps, &n, capital && i == 0 ? ocr__syn_upper(c) : c);
        }
    }
    return n;
}

static int ocr__syn_utf8(const int *cps, int n, char *out) {
    int i, len = 0;
    for (i = 0; i < n; i++) {
        unsigned c = (unsigned)cps[i];
        if (c < 0x80) out[len++] = (char)c;
        else if (c < 0x800) { out[len++] = (char)(0xC0 | (c >> 6)); out[len++] = (char)(0x80 | (c & 0x3F)); }
        else {
            out[len++] = (char)(0xE0 | (c >> 12));
            out[len++] = (char)(0x80 | ((c >> 6) & 0x3F));
            out[len++] = (char)(0x80 | (c & 0x3F));
        }
    }
    out[len] = 0;
    return len;
}

/* ---------------------------------------------------------------- outlines */

/* Exact bounds of a glyph outline in font units: end points plus the extrema of every curve (control points can
   lie outside the curve). Returns 0 for an empty outline. */
static int ocr__syn_outline_bounds(const stbtt_vertex *v, int n, float b[4]) {
    float px = 0, py = 0;
    int i, any = 0, axis;
    b[0] = b[1] = 1e30f;
    b[2] = b[3] = -1e30f;
#define OCR__SYN_INCLUDE(X, Y) do { float x_ = (X), y_ = (Y); any = 1; \
    b[0] = x_ < b[0] ? x_ : b[0]; b[1] = y_ < b[1] ? y_ : b[1]; b[2] = x_ > b[2] ? x_ : b[2]; b[3] = y_ > b[3] ? y_ : b[3]; } while (0)
    for (i = 0; i < n; i++) {
        float x = v[i].x, y = v[i].y;
        if (v[i].type == STBTT_vcurve) {
            for (axis = 0; axis < 2; axis++) {
                float p0 = axis ? py : px, c = axis ? v[i].cy : v[i].cx, p1 = axis ? y : x, den = p0 - 2 * c + p1, t;
                if (den == 0) continue;
                t = (p0 - c) / den;
                if (t > 0 && t < 1) {
                    float s = 1 - t;
                    float qx = s * s * px + 2 * s * t * v[i].cx + t * t * x, qy = s * s * py + 2 * s * t * v[i].cy + t * t * y;
                    OCR__SYN_INCLUDE(qx, qy);
                }
            }
        } else if (v[i].type == STBTT_vcubic) {
            for (axis = 0; axis < 2; axis++) {
                float p0 = axis ? py : px, c1 = axis ? v[i].cy : v[i].cx, c2 = axis ? v[i].cy1 : v[i].cx1, p1 = axis ? y : x;
                float qa = -p0 + 3 * c1 - 3 * c2 + p1, qb = 2 * (p0 - 2 * c1 + c2), qc = c1 - p0, roots[2];
                int k, nr = 0;
                if (fabsf(qa) < 1e-9f) { if (qb != 0) roots[nr++] = -qc / qb; }
                else {
                    float disc = qb * qb - 4 * qa * qc;
                    if (disc >= 0) {
                        roots[nr++] = (-qb + sqrtf(disc)) / (2 * qa);
                        roots[nr++] = (-qb - sqrtf(disc)) / (2 * qa);
                    }
                }
                for (k = 0; k < nr; k++) {
                    float t = roots[k], s = 1 - t;
                    if (!(t > 0 && t < 1)) continue;
                    OCR__SYN_INCLUDE(s * s * s * px + 3 * s * s * t * v[i].cx + 3 * s * t * t * v[i].cx1 + t * t * t * x,
                                     s * s * s * py + 3 * s * s * t * v[i].cy + 3 * s * t * t * v[i].cy1 + t * t * t * y);
                }
            }
        }
        OCR__SYN_INCLUDE(x, y);
        px = x;
        py = y;
    }
#undef OCR__SYN_INCLUDE
    return any;
}

/* ---------------------------------------------------------------- scene state and painting */

typedef struct {
    uint8_t *rgb;
    uint16_t *label;    /* which word owns the legible ink under each pixel (0: none) */
    int w, h;
    ocr_rng rng;
    const ocr_synth *synth;
    unsigned char *glyph_buf, *cover_buf; /* grow as needed */
    size_t glyph_cap, cover_cap;
    stbtt_vertex *verts;
    int verts_cap;
    int photo;          /* drawn on a photograph */
    int no_paint;       /* tests: lay out and label the text, but leave the pixels under it as they were */
    float *energy;      /* photographs: summed-area table of gradient energy per OCR__SYN_CELL cell, (ew+1) x (eh+1) */
    int ew, eh;
} ocr__syn_scene;

#define OCR__SYN_CELL 8

typedef struct {
    float quad[8];      /* TL, TR, BR, BL */
    char text[OCR__SYN_MAX_CHARS * 3 + 1];
    const ocr__synth_font *font;
    int ink, ignore;
    int bx0, by0, bx1, by1; /* pixel box holding the word's ink */
} ocr__syn_word_out;

enum { OCR__SYN_SHAPE_RECT, OCR__SYN_SHAPE_ELLIPSE, OCR__SYN_SHAPE_RING, OCR__SYN_SHAPE_STROKE };
#define OCR__SYN_STROKE_MAX 16
typedef struct {
    int kind, n;                    /* n: points of a STROKE polyline */
    float cx, cy, a, b, angle;      /* RECT, ELLIPSE, RING: centre, half sizes, rotation (radians) */
    float width;                    /* RING and STROKE line width */
    float px[OCR__SYN_STROKE_MAX], py[OCR__SYN_STROKE_MAX];
    uint8_t color[3];
    float alpha;
    int occludes;                   /* clears the word labels under it */
} ocr__syn_shape;

static float ocr__syn_lum(const uint8_t *p) { return 0.299f * p[0] + 0.587f * p[1] + 0.114f * p[2]; }

static void ocr__syn_random_color(ocr_rng *r, uint8_t *c) {
    c[0] = (uint8_t)ocr_rng_below(r, 256);
    c[1] = (uint8_t)ocr_rng_below(r, 256);
    c[2] = (uint8_t)ocr_rng_below(r, 256);
}

static float ocr__syn_seg_dist(float x, float y, float x0, float y0, float x1, float y1) {
    float dx = x1 - x0, dy = y1 - y0, len2 = dx * dx + dy * dy, t = 0;
    if (len2 > 0) {
        t = ((x - x0) * dx + (y - y0) * dy) / len2;
        t = t < 0 ? 0 : t > 1 ? 1 : t;
    }
    dx = x - (x0 + t * dx);
    dy = y - (y0 + t * dy);
    return sqrtf(dx * dx + dy * dy);
}

/* Signed distance (negative inside) from a pixel centre to the shape; ellipses use a cheap approximation. */
static float ocr__syn_shape_dist(const ocr__syn_shape *s, float ca, float sa, float x, float y) {
    float lx, ly, d;
    int i;
    if (s->kind == OCR__SYN_SHAPE_STROKE) {
        d = 1e30f;
        for (i = 0; i + 1 < s->n; i++) {
            float di = ocr__syn_seg_dist(x, y, s->px[i], s->py[i], s->px[i + 1], s->py[i + 1]);
            if (di < d) d = di;
        }
        return d - 0.5f * s->width;
    }
    lx = (x - s->cx) * ca + (y - s->cy) * sa;
    ly = -(x - s->cx) * sa + (y - s->cy) * ca;
    if (s->kind == OCR__SYN_SHAPE_RECT) {
        float dx = fabsf(lx) - s->a, dy = fabsf(ly) - s->b;
        if (dx > 0 || dy > 0) {
            dx = dx > 0 ? dx : 0;
            dy = dy > 0 ? dy : 0;
            return sqrtf(dx * dx + dy * dy);
        }
        return dx > dy ? dx : dy;
    }
    d = (sqrtf((lx / s->a) * (lx / s->a) + (ly / s->b) * (ly / s->b)) - 1.0f) * (s->a < s->b ? s->a : s->b);
    return s->kind == OCR__SYN_SHAPE_RING ? fabsf(d) - 0.5f * s->width : d;
}

/* Anti-aliased: coverage = clamp(0.5 - distance, 0, 1) at every pixel centre of the shape's box. */
static void ocr__syn_paint(ocr__syn_scene *sc, const ocr__syn_shape *s) {
    float x0, y0, x1, y1, pad = 1.0f + 0.5f * s->width, ca = cosf(s->angle), sa = sinf(s->angle);
    int x, y, ix0, iy0, ix1, iy1, i;
    if (s->kind == OCR__SYN_SHAPE_STROKE) {
        x0 = x1 = s->px[0];
        y0 = y1 = s->py[0];
        for (i = 1; i < s->n; i++) {
            x0 = s->px[i] < x0 ? s->px[i] : x0; x1 = s->px[i] > x1 ? s->px[i] : x1;
            y0 = s->py[i] < y0 ? s->py[i] : y0; y1 = s->py[i] > y1 ? s->py[i] : y1;
        }
    } else {
        float ex = fabsf(s->a * ca) + fabsf(s->b * sa), ey = fabsf(s->a * sa) + fabsf(s->b * ca);
        x0 = s->cx - ex; x1 = s->cx + ex; y0 = s->cy - ey; y1 = s->cy + ey;
    }
    ix0 = (int)floorf(x0 - pad); iy0 = (int)floorf(y0 - pad);
    ix1 = (int)ceilf(x1 + pad); iy1 = (int)ceilf(y1 + pad);
    if (ix0 < 0) ix0 = 0;
    if (iy0 < 0) iy0 = 0;
    if (ix1 > sc->w) ix1 = sc->w;
    if (iy1 > sc->h) iy1 = sc->h;
    for (y = iy0; y < iy1; y++)
        for (x = ix0; x < ix1; x++) {
            float cover = 0.5f - ocr__syn_shape_dist(s, ca, sa, x + 0.5f, y + 0.5f), a;
            uint8_t *p;
            int c;
            if (cover <= 0) continue;
            a = (cover > 1 ? 1 : cover) * s->alpha;
            p = sc->rgb + ((size_t)y * (size_t)sc->w + (size_t)x) * 3;
            for (c = 0; c < 3; c++) p[c] = (uint8_t)(p[c] + (s->color[c] - p[c]) * a + 0.5f);
            if (s->occludes && a > 0.5f) sc->label[(size_t)y * (size_t)sc->w + (size_t)x] = 0;
        }
}

/* ---------------------------------------------------------------- backgrounds and clutter */

static void ocr__syn_background(ocr__syn_scene *sc, int plain) {
    ocr_rng *r = &sc->rng;
    uint8_t c0[3], c1[3];
    float kind = plain ? 0.0f : ocr_rng_uniform(r), *grid = NULL;
    int x, y, c, gw = 0, gh = 0;
    float cell = 1, dirx = 0, diry = 0, cx = 0, cy = 0, span = 1;
    ocr__syn_random_color(r, c0);
    ocr__syn_random_color(r, c1);
    if (kind >= 0.25f && kind < 0.55f) { /* linear gradient */
        float t = ocr__syn_range(r, 0, 6.2831853f);
        dirx = cosf(t);
        diry = sinf(t);
        span = fabsf(dirx) * sc->w + fabsf(diry) * sc->h;
        cx = dirx < 0 ? (float)sc->w : 0;
        cy = diry < 0 ? (float)sc->h : 0;
    } else if (kind >= 0.55f && kind < 0.7f) { /* radial gradient */
        cx = ocr__syn_range(r, 0, (float)sc->w);
        cy = ocr__syn_range(r, 0, (float)sc->h);
        span = sqrtf((float)sc->w * sc->w + (float)sc->h * sc->h);
    } else if (kind >= 0.7f) { /* smooth value noise on a coarse grid */
        cell = ocr__syn_range(r, 24, 200);
        gw = (int)(sc->w / cell) + 2;
        gh = (int)(sc->h / cell) + 2;
        grid = (float *)OCR_MALLOC((size_t)gw * (size_t)gh * sizeof(float));
        if (grid) for (x = 0; x < gw * gh; x++) grid[x] = ocr_rng_uniform(r);
    }
    for (y = 0; y < sc->h; y++)
        for (x = 0; x < sc->w; x++) {
            float t = 0;
            uint8_t *p = sc->rgb + ((size_t)y * (size_t)sc->w + (size_t)x) * 3;
            if (kind >= 0.25f && kind < 0.55f) t = ((x - cx) * dirx + (y - cy) * diry) / span;
            else if (kind >= 0.55f && kind < 0.7f) t = sqrtf((x - cx) * (x - cx) + (y - cy) * (y - cy)) / span;
            else if (grid) {
                float gx = x / cell, gy = y / cell, fx = gx - floorf(gx), fy = gy - floorf(gy);
                int ix = (int)gx, iy = (int)gy;
                fx = fx * fx * (3 - 2 * fx); /* smoothstep: no visible grid creases */
                fy = fy * fy * (3 - 2 * fy);
                t = (grid[iy * gw + ix] * (1 - fx) + grid[iy * gw + ix + 1] * fx) * (1 - fy) +
                    (grid[(iy + 1) * gw + ix] * (1 - fx) + grid[(iy + 1) * gw + ix + 1] * fx) * fy;
            }
            t = t < 0 ? 0 : t > 1 ? 1 : t;
            for (c = 0; c < 3; c++) p[c] = (uint8_t)(c0[c] + (c1[c] - c0[c]) * t + 0.5f);
        }
    OCR_FREE(grid);
}

static float ocr__syn_log_uniform(ocr_rng *r, float lo, float hi) { return expf(ocr__syn_range(r, logf(lo), logf(hi))); }

/* A photograph under the scene: a random crop (magnified up to about 3x, or shrunk to fit the whole scene), flipped
   half the time, with a mild colour and brightness change. Bilinear, from the photograph's level that shrinks by at
   most 1.5x, in 8-bit fixed point: this runs for most training scenes. */
static int ocr__syn_photo_background(ocr_ctx *ctx, ocr__syn_scene *sc, const ocr_image *levels) {
    ocr_rng *r = &sc->rng;
    const ocr_image *ph = &levels[0];
    float fit = fminf((float)ph->width / (float)sc->w, (float)ph->height / (float)sc->h), lo = fit * 0.25f, s, x0, y0;
    float level = ocr__syn_range(r, 0.7f, 1.2f), bias, gain[3];
    int x, y, c, flip, k, *cols;
    uint8_t lut[3][256];
    if (lo < 0.35f) lo = fit < 0.35f ? fit : 0.35f;
    s = lo < fit ? ocr__syn_log_uniform(r, lo, fit) : fit;
    x0 = ocr__syn_range(r, 0, (float)ph->width - s * (float)sc->w);
    y0 = ocr__syn_range(r, 0, (float)ph->height - s * (float)sc->h);
    flip = ocr__syn_chance(r, 0.5f);
    for (c = 0; c < 3; c++) gain[c] = level * ocr__syn_range(r, 0.9f, 1.1f);
    bias = ocr__syn_range(r, -20, 20);
    for (c = 0; c < 3; c++)
        for (k = 0; k < 256; k++) {
            float v = (float)k * gain[c] + bias;
            lut[c][k] = (uint8_t)(v < 0 ? 0 : v > 255 ? 255 : v + 0.5f);
        }
    for (k = 1; k < OCR__SYN_PHOTO_LEVELS && s > 1.5f; k++) { /* the same crop on the next smaller level */
        ph = &levels[k];
        s *= 0.5f;
        x0 *= 0.5f;
        y0 *= 0.5f;
    }
    if (!(cols = (int *)OCR_MALLOC((size_t)sc->w * 3 * sizeof(int)))) return ocr_error(ctx, OCR_ENOMEM, "ocr_synth_sample: out of memory");
    for (x = 0; x < sc->w; x++) { /* source column, its right neighbour and the weight of that neighbour (of 256) */
        float fx = x0 + ((float)(flip ? sc->w - 1 - x : x) + 0.5f) * s - 0.5f;
        fx = fx < 0 ? 0 : fx > (float)(ph->width - 1) ? (float)(ph->width - 1) : fx;
        cols[3 * x] = (int)fx;
        cols[3 * x + 1] = cols[3 * x] + 1 < ph->width ? cols[3 * x] + 1 : cols[3 * x];
        cols[3 * x + 2] = (int)((fx - (float)cols[3 * x]) * 256.0f + 0.5f);
    }
    for (y = 0; y < sc->h; y++) {
        float fy = y0 + ((float)y + 0.5f) * s - 0.5f;
        int iy, iy1, wy;
        const uint8_t *row0, *row1;
        uint8_t *p = sc->rgb + (size_t)y * (size_t)sc->w * 3;
        fy = fy < 0 ? 0 : fy > (float)(ph->height - 1) ? (float)(ph->height - 1) : fy;
        iy = (int)fy;
        iy1 = iy + 1 < ph->height ? iy + 1 : iy;
        wy = (int)((fy - (float)iy) * 256.0f + 0.5f);
        row0 = ph->pixels + (size_t)iy * (size_t)ph->width * 3;
        row1 = ph->pixels + (size_t)iy1 * (size_t)ph->width * 3;
        for (x = 0; x < sc->w; x++, p += 3) {
            const uint8_t *a0 = row0 + cols[3 * x] * 3, *a1 = row0 + cols[3 * x + 1] * 3;
            const uint8_t *b0 = row1 + cols[3 * x] * 3, *b1 = row1 + cols[3 * x + 1] * 3;
            int wx = cols[3 * x + 2];
            for (c = 0; c < 3; c++) {
                int top = a0[c] * (256 - wx) + a1[c] * wx, bottom = b0[c] * (256 - wx) + b1[c] * wx;
                p[c] = lut[c][(top * (256 - wy) + bottom * wy + 32768) >> 16];
            }
        }
    }
    OCR_FREE(cols);
    return OCR_OK;
}

/* Gradient energy per cell (|dx| + |dy| of the luminance at every other pixel), as a summed-area table. */
static int ocr__syn_energy_map(ocr_ctx *ctx, ocr__syn_scene *sc) {
    int x, y, stride;
    sc->ew = (sc->w + OCR__SYN_CELL - 1) / OCR__SYN_CELL;
    sc->eh = (sc->h + OCR__SYN_CELL - 1) / OCR__SYN_CELL;
    stride = sc->ew + 1;
    sc->energy = (float *)OCR_MALLOC((size_t)stride * (size_t)(sc->eh + 1) * sizeof(float));
    if (!sc->energy) return ocr_error(ctx, OCR_ENOMEM, "ocr_synth_sample: out of memory");
    memset(sc->energy, 0, (size_t)stride * (size_t)(sc->eh + 1) * sizeof(float));
    for (y = 0; y + 1 < sc->h; y += 2)
        for (x = 0; x + 1 < sc->w; x += 2) {
            const uint8_t *p = sc->rgb + ((size_t)y * (size_t)sc->w + (size_t)x) * 3;
            float l = ocr__syn_lum(p);
            sc->energy[(y / OCR__SYN_CELL + 1) * stride + x / OCR__SYN_CELL + 1] +=
                fabsf(ocr__syn_lum(p + 3) - l) + fabsf(ocr__syn_lum(p + (size_t)sc->w * 3) - l);
        }
    for (y = 1; y <= sc->eh; y++)
        for (x = 1; x <= sc->ew; x++)
            sc->energy[y * stride + x] += sc->energy[(y - 1) * stride + x] + sc->energy[y * stride + x - 1] - sc->energy[(y - 1) * stride + x - 1];
    return OCR_OK;
}


/* A stroke the size of a glyph that is not one: a curve, an arc or a zigzag. */
static void ocr__syn_glyphlike(ocr__syn_scene *sc, ocr__syn_shape *s, float size) {
    ocr_rng *r = &sc->rng;
    float ox = ocr__syn_range(r, 0, (float)sc->w), oy = ocr__syn_range(r, 0, (float)sc->h);
    int i, form = (int)ocr_rng_below(r, 3);
    s->kind = OCR__SYN_SHAPE_STROKE;
    s->width = size * ocr__syn_range(r, 0.06f, 0.15f);
    if (s->width < 1) s->width = 1;
    if (form == 0) { /* cubic curve through four random points */
        float p[8];
        for (i = 0; i < 8; i++) p[i] = ocr__syn_range(r, -0.5f, 0.5f) * size;
        s->n = OCR__SYN_STROKE_MAX;
        for (i = 0; i < s->n; i++) {
            float t = (float)i / (float)(s->n - 1), u = 1 - t;
            s->px[i] = ox + u * u * u * p[0] + 3 * u * u * t * p[2] + 3 * u * t * t * p[4] + t * t * t * p[6];
            s->py[i] = oy + u * u * u * p[1] + 3 * u * u * t * p[3] + 3 * u * t * t * p[5] + t * t * t * p[7];
        }
    } else if (form == 1) { /* open arc */
        float start = ocr__syn_range(r, 0, 6.2831853f), sweep = ocr__syn_range(r, 1.5f, 5.2f), rad = size * ocr__syn_range(r, 0.2f, 0.5f);
        s->n = OCR__SYN_STROKE_MAX;
        for (i = 0; i < s->n; i++) {
            float t = start + sweep * (float)i / (float)(s->n - 1);
            s->px[i] = ox + rad * cosf(t);
            s->py[i] = oy + rad * sinf(t);
        }
    } else { /* zigzag */
        s->n = 3 + (int)ocr_rng_below(r, 4);
        for (i = 0; i < s->n; i++) {
            s->px[i] = ox + ocr__syn_range(r, -0.5f, 0.5f) * size;
            s->py[i] = oy + ocr__syn_range(r, -0.5f, 0.5f) * size;
        }
    }
}

static void ocr__syn_clutter(ocr__syn_scene *sc, float amount, float min_px, float max_px, int over_text) {
    ocr_rng *r = &sc->rng;
    float mpix = (float)sc->w * (float)sc->h / 1e6f, side = (float)(sc->w < sc->h ? sc->w : sc->h);
    int n = over_text ? 1 + (int)ocr_rng_below(r, 3) : (int)(amount * (2.0f + mpix * ocr__syn_range(r, 8, 30)) + 0.5f), i, k;
    for (i = 0; i < n; i++) {
        ocr__syn_shape s;
        float kind = over_text ? 0.4f : ocr_rng_uniform(r); /* over text: lines only */
        memset(&s, 0, sizeof s);
        ocr__syn_random_color(r, s.color);
        s.alpha = ocr__syn_chance(r, 0.7f) ? 1.0f : ocr__syn_range(r, 0.3f, 0.9f);
        s.occludes = over_text;
        s.cx = ocr__syn_range(r, 0, (float)sc->w);
        s.cy = ocr__syn_range(r, 0, (float)sc->h);
        s.angle = ocr__syn_range(r, 0, 3.14159265f);
        if (kind < 0.2f) { /* rectangle */
            s.kind = OCR__SYN_SHAPE_RECT;
            s.a = side * ocr__syn_range(r, 0.02f, 0.3f);
            s.b = side * ocr__syn_range(r, 0.02f, 0.3f);
            if (ocr__syn_chance(r, 0.6f)) s.angle = 0;
        } else if (kind < 0.3f) { /* ellipse or ring */
            s.kind = ocr__syn_chance(r, 0.5f) ? OCR__SYN_SHAPE_ELLIPSE : OCR__SYN_SHAPE_RING;
            s.a = side * ocr__syn_range(r, 0.02f, 0.2f);
            s.b = s.a * ocr__syn_range(r, 0.4f, 1.0f);
            s.width = ocr__syn_range(r, 1, 8);
        } else if (kind < 0.5f) { /* straight lines, sometimes a few parallel ones */
            float len = side * ocr__syn_range(r, 0.2f, 1.2f), dx = cosf(s.angle) * 0.5f * len, dy = sinf(s.angle) * 0.5f * len;
            int copies = ocr__syn_chance(r, 0.25f) ? 2 + (int)ocr_rng_below(r, 8) : 1;
            float gap = ocr__syn_range(r, 4, 30);
            if (ocr__syn_chance(r, 0.5f)) { dx = 0.5f * len; dy = 0; } /* axis-aligned like rules and frames */
            s.kind = OCR__SYN_SHAPE_STROKE;
            s.n = 2;
            s.width = over_text ? ocr__syn_range(r, 1, 3) : ocr__syn_range(r, 1, 6);
            for (k = 0; k < copies; k++) {
                float nx = -dy / (0.5f * len), ny = dx / (0.5f * len);
                s.px[0] = s.cx - dx + nx * gap * k; s.py[0] = s.cy - dy + ny * gap * k;
                s.px[1] = s.cx + dx + nx * gap * k; s.py[1] = s.cy + dy + ny * gap * k;
                ocr__syn_paint(sc, &s);
            }
            continue;
        } else if (kind < 0.9f) { /* glyph-like strokes, as thick as text strokes */
            ocr__syn_glyphlike(sc, &s, ocr__syn_log_uniform(r, min_px, max_px));
        } else { /* dots */
            s.kind = OCR__SYN_SHAPE_ELLIPSE;
            s.a = s.b = ocr__syn_range(r, 1, 5);
        }
        ocr__syn_paint(sc, &s);
    }
}

/* ---------------------------------------------------------------- text */

typedef struct {
    const ocr__synth_font *font;
    int cps[OCR__SYN_MAX_CHARS], glyphs[OCR__SYN_MAX_CHARS], n;
    float pen[OCR__SYN_MAX_CHARS];  /* glyph origins along the line, font units */
    float box[4];                   /* ink box in line frame, font units, y up: x0, y0, x1, y1 */
} ocr__syn_word;

/* Line frame (font units, y up) -> pixels: p = t + m (scale x, -scale y). */
/* Line frame (font units, y up) -> pixels. (u, v) = (scale x, -scale y); an optional gentle arc bends the baseline
   around a circle of radius 1/curve centred above (curve > 0) or below it, at u = uc; l = m (u, v) (rotation and
   slant); an optional perspective about the line's centre c (l' = c + (l - c) / (1 + g.(l - c)): lines stay lines,
   so a box maps to the quad of its corners); p = l' + t. */
typedef struct { float m[4], t[2], scale, g[2], c[2], curve, uc; } ocr__syn_xform;

/* (u, v) after the arc -> pixels */
static void ocr__syn_map_flat(const ocr__syn_xform *xf, float u, float v, float *px, float *py) {
    float lx = xf->m[0] * u + xf->m[1] * v, ly = xf->m[2] * u + xf->m[3] * v;
    if (xf->g[0] != 0 || xf->g[1] != 0) {
        float dx = lx - xf->c[0], dy = ly - xf->c[1], w = 1.0f + xf->g[0] * dx + xf->g[1] * dy;
        lx = xf->c[0] + dx / w;
        ly = xf->c[1] + dy / w;
    }
    *px = xf->t[0] + lx;
    *py = xf->t[1] + ly;
}

/* The arc: arc length along the baseline and height above it are kept. */
static void ocr__syn_bend(const ocr__syn_xform *xf, float u, float v, float *bu, float *bv) {
    float radius = 1.0f / xf->curve, theta = (u - xf->uc) * xf->curve, r = radius + v;
    *bu = xf->uc + r * sinf(theta);
    *bv = -radius + r * cosf(theta);
}

static void ocr__syn_map(const ocr__syn_xform *xf, float fx, float fy, float *px, float *py) {
    float u = xf->scale * fx, v = -xf->scale * fy;
    if (xf->curve != 0) ocr__syn_bend(xf, u, v, &u, &v);
    ocr__syn_map_flat(xf, u, v, px, py);
}

/* The quad of a box of the line frame. Bent, the box is a sector of an annulus: its tightest box along the tangent at
   the middle holds the four corners and the two middle points (the extremes by symmetry); that box is mapped. */
static void ocr__syn_box_quad(const ocr__syn_xform *xf, const float box[4], float q[8]) {
    float u0 = xf->scale * box[0], u1 = xf->scale * box[2], v0 = -xf->scale * box[3], v1 = -xf->scale * box[1];
    float tx, ty, lo_t = 1e30f, hi_t = -1e30f, lo_n = 1e30f, hi_n = -1e30f, us[6], vs[6], mid;
    int i;
    if (xf->curve == 0) {
        ocr__syn_map(xf, box[0], box[3], &q[0], &q[1]); /* top-left */
        ocr__syn_map(xf, box[2], box[3], &q[2], &q[3]);
        ocr__syn_map(xf, box[2], box[1], &q[4], &q[5]);
        ocr__syn_map(xf, box[0], box[1], &q[6], &q[7]);
        return;
    }
    mid = 0.5f * (u0 + u1);
    ocr__syn_bend(xf, u0, v0, &us[0], &vs[0]); ocr__syn_bend(xf, u1, v0, &us[1], &vs[1]);
    ocr__syn_bend(xf, u1, v1, &us[2], &vs[2]); ocr__syn_bend(xf, u0, v1, &us[3], &vs[3]);
    ocr__syn_bend(xf, mid, v0, &us[4], &vs[4]); ocr__syn_bend(xf, mid, v1, &us[5], &vs[5]);
    tx = cosf((mid - xf->uc) * xf->curve); /* tangent at the middle; the normal (-ty, tx) points down the glyphs */
    ty = -sinf((mid - xf->uc) * xf->curve);
    for (i = 0; i < 6; i++) {
        float t = us[i] * tx + vs[i] * ty, n = -us[i] * ty + vs[i] * tx;
        lo_t = t < lo_t ? t : lo_t; hi_t = t > hi_t ? t : hi_t;
        lo_n = n < lo_n ? n : lo_n; hi_n = n > hi_n ? n : hi_n;
    }
    ocr__syn_map_flat(xf, lo_t * tx - lo_n * ty, lo_t * ty + lo_n * tx, &q[0], &q[1]);
    ocr__syn_map_flat(xf, hi_t * tx - lo_n * ty, hi_t * ty + lo_n * tx, &q[2], &q[3]);
    ocr__syn_map_flat(xf, hi_t * tx - hi_n * ty, hi_t * ty + hi_n * tx, &q[4], &q[5]);
    ocr__syn_map_flat(xf, lo_t * tx - hi_n * ty, lo_t * ty + hi_n * tx, &q[6], &q[7]);
}

static void ocr__syn_quad_bounds(const float q[8], float b[4]) {
    int i;
    b[0] = b[2] = q[0];
    b[1] = b[3] = q[1];
    for (i = 1; i < 4; i++) {
        b[0] = q[2 * i] < b[0] ? q[2 * i] : b[0]; b[2] = q[2 * i] > b[2] ? q[2 * i] : b[2];
        b[1] = q[2 * i + 1] < b[1] ? q[2 * i + 1] : b[1]; b[3] = q[2 * i + 1] > b[3] ? q[2 * i + 1] : b[3];
    }
}

/* Separating-axis test between convex quads, with a required gap. */
static int ocr__syn_quads_apart(const float *a, const float *b, float gap) {
    const float *polys[2];
    int p, i, k;
    polys[0] = a;
    polys[1] = b;
    for (p = 0; p < 2; p++)
        for (i = 0; i < 4; i++) {
            const float *q = polys[p];
            float nx = -(q[(2 * i + 3) % 8] - q[2 * i + 1]), ny = q[(2 * i + 2) % 8] - q[2 * i], len = sqrtf(nx * nx + ny * ny);
            float amin = 1e30f, amax = -1e30f, bmin = 1e30f, bmax = -1e30f;
            if (len < 1e-6f) continue;
            nx /= len;
            ny /= len;
            for (k = 0; k < 4; k++) {
                float da = a[2 * k] * nx + a[2 * k + 1] * ny, db = b[2 * k] * nx + b[2 * k + 1] * ny;
                amin = da < amin ? da : amin; amax = da > amax ? da : amax;
                bmin = db < bmin ? db : bmin; bmax = db > bmax ? db : bmax;
            }
            if (amax + gap <= bmin || bmax + gap <= amin) return 1;
        }
    return 0;
}

static int ocr__syn_grow(ocr_ctx *ctx, unsigned char **buf, size_t *cap, size_t need) {
    unsigned char *grown;
    if (need <= *cap) return OCR_OK;
    grown = (unsigned char *)OCR_REALLOC(*buf, need);
    if (!grown) return ocr_error(ctx, OCR_ENOMEM, "ocr_synth_sample: cannot allocate %zu bytes", need);
    *buf = grown;
    *cap = need;
    return OCR_OK;
}

/* Rasterises one glyph with its transform applied to the outline (crisp at any angle) and takes the maximum into
   the word's coverage buffer (box cx0, cy0, cw x ch), so overlapping neighbours never erase each other. */
static int ocr__syn_draw_glyph(ocr_ctx *ctx, ocr__syn_scene *sc, const ocr__synth_font *f, int glyph, float pen,
                               const ocr__syn_xform *xf, int cx0, int cy0, int cw, int ch) {
    stbtt_vertex *src;
    stbtt__bitmap bm;
    int nv = stbtt_GetGlyphShape(&f->info, glyph, &src), i, x, y, x_off, y_off, factor = 64, rc = OCR_OK, pass;
    float ox, oy, lo_x = 1e30f, lo_y = 1e30f, hi_x = -1e30f, hi_y = -1e30f, biggest = 0, s;
    if (nv <= 0) { stbtt_FreeShape(&f->info, src); return OCR_OK; } /* CFF outlines allocate even when empty */
    if (nv > sc->verts_cap) {
        stbtt_vertex *grown = (stbtt_vertex *)OCR_REALLOC(sc->verts, (size_t)nv * sizeof(stbtt_vertex));
        if (!grown) { stbtt_FreeShape(&f->info, src); return ocr_error(ctx, OCR_ENOMEM, "ocr_synth_sample: out of memory"); }
        sc->verts = grown;
        sc->verts_cap = nv;
    }
    /* Every outline point goes through the line transform to pixels, relative to the glyph origin and in units of
       1/factor px to fit stbtt's 16-bit coordinates (rounding moves ink by half a unit, 1/128 px mostly). Only the points a vertex
       type uses are meaningful: TrueType outlines leave cx1, cy1 unset. */
    ocr__syn_map(xf, pen, 0, &ox, &oy);
    for (pass = 0; pass < 2; pass++) {
        if (pass == 1) {
            while (factor > 1 && biggest * (float)factor > 32000.0f) factor /= 2;
            if (biggest * (float)factor > 32000.0f) { stbtt_FreeShape(&f->info, src); return OCR_OK; }
        }
        for (i = 0; i < nv; i++) {
            stbtt_vertex *d = &sc->verts[i];
            float vals[6], qx, qy;
            short *dst[6];
            int k, used = src[i].type == STBTT_vcubic ? 6 : src[i].type == STBTT_vcurve ? 4 : 2;
            vals[0] = src[i].x; vals[1] = src[i].y; vals[2] = src[i].cx; vals[3] = src[i].cy; vals[4] = src[i].cx1; vals[5] = src[i].cy1;
            if (pass == 1) {
                memset(d, 0, sizeof *d);
                d->type = src[i].type;
                dst[0] = &d->x; dst[1] = &d->y; dst[2] = &d->cx; dst[3] = &d->cy; dst[4] = &d->cx1; dst[5] = &d->cy1;
            }
            for (k = 0; k < used; k += 2) {
                ocr__syn_map(xf, pen + vals[k], vals[k + 1], &qx, &qy);
                qx -= ox;
                qy = oy - qy; /* stbtt rasterises y up */
                if (pass == 0) {
                    biggest = fabsf(qx) > biggest ? fabsf(qx) : biggest;
                    biggest = fabsf(qy) > biggest ? fabsf(qy) : biggest;
                } else {
                    *dst[k] = (short)floorf(qx * (float)factor + 0.5f);
                    *dst[k + 1] = (short)floorf(qy * (float)factor + 0.5f);
                }
            }
        }
    }
    stbtt_FreeShape(&f->info, src);
    s = 1.0f / (float)factor;
    for (i = 0; i < nv; i++) {
        const stbtt_vertex *d = &sc->verts[i];
        float xs[3], ys[3];
        int k;
        xs[0] = d->x * s + ox; ys[0] = -d->y * s + oy;
        xs[1] = d->cx * s + ox; ys[1] = -d->cy * s + oy;
        xs[2] = d->cx1 * s + ox; ys[2] = -d->cy1 * s + oy;
        for (k = 0; k < (d->type == STBTT_vcubic ? 3 : d->type == STBTT_vcurve ? 2 : 1); k++) {
            lo_x = xs[k] < lo_x ? xs[k] : lo_x; hi_x = xs[k] > hi_x ? xs[k] : hi_x;
            lo_y = ys[k] < lo_y ? ys[k] : lo_y; hi_y = ys[k] > hi_y ? ys[k] : hi_y;
        }
    }
    x_off = (int)floorf(lo_x);
    y_off = (int)floorf(lo_y);
    bm.w = (int)floorf(hi_x) - x_off + 2;
    bm.h = (int)floorf(hi_y) - y_off + 2;
    bm.stride = bm.w;
    if ((rc = ocr__syn_grow(ctx, &sc->glyph_buf, &sc->glyph_cap, (size_t)bm.w * (size_t)bm.h))) return rc;
    bm.pixels = sc->glyph_buf;
    memset(bm.pixels, 0, (size_t)bm.w * (size_t)bm.h);
    stbtt_Rasterize(&bm, 0.35f, sc->verts, nv, s, s, ox, oy, x_off, y_off, 1, NULL);
    for (y = 0; y < bm.h; y++) {
        int wy = y + y_off - cy0;
        if (wy < 0 || wy >= ch) continue;
        for (x = 0; x < bm.w; x++) {
            int wx = x + x_off - cx0;
            unsigned char g = bm.pixels[y * bm.w + x], *dst;
            if (wx < 0 || wx >= cw || !g) continue;
            dst = &sc->cover_buf[(size_t)wy * (size_t)cw + (size_t)wx];
            if (g > *dst) *dst = g;
        }
    }
    return OCR_OK;
}

#define OCR__SYN_INK 64 /* coverage (of 255) from which a pixel counts as ink */

/* How a line's words are painted: the text colour, and optionally an outline (a band of outline_px around the ink,
   painted under it) and a drop shadow (the ink's shape moved by shadow_dx, shadow_dy whole pixels, painted first). */
typedef struct {
    uint8_t color[3], outline[3], shadow[3];
    float opacity, outline_px, shadow_alpha;
    int shadow_dx, shadow_dy;
} ocr__syn_style;

/* Max filter of radius r over a cw x ch coverage buffer, separable (a square), into dst; tmp holds cw x ch. */
static void ocr__syn_dilate(const unsigned char *src, unsigned char *tmp, unsigned char *dst, int cw, int ch, int r) {
    int x, y, k;
    for (y = 0; y < ch; y++)
        for (x = 0; x < cw; x++) {
            unsigned char m = 0;
            for (k = x - r < 0 ? 0 : x - r; k <= x + r && k < cw; k++) m = src[(size_t)y * cw + k] > m ? src[(size_t)y * cw + k] : m;
            tmp[(size_t)y * cw + x] = m;
        }
    for (y = 0; y < ch; y++)
        for (x = 0; x < cw; x++) {
            unsigned char m = 0;
            for (k = y - r < 0 ? 0 : y - r; k <= y + r && k < ch; k++) m = tmp[(size_t)k * cw + x] > m ? tmp[(size_t)k * cw + x] : m;
            dst[(size_t)y * cw + x] = m;
        }
}

static void ocr__syn_blend(uint8_t *p, const uint8_t color[3], float a) {
    int c;
    for (c = 0; c < 3; c++) p[c] = (uint8_t)(p[c] + (color[c] - p[c]) * a + 0.5f);
}

/* Draws one word and records its quad, ink count and which of its pixels are legible. */
static int ocr__syn_draw_word(ocr_ctx *ctx, ocr__syn_scene *sc, const ocr__syn_word *wd, const ocr__syn_xform *xf,
                              const ocr__syn_style *st, float min_contrast, int id, ocr__syn_word_out *out) {
    float b[4], text_lum = ocr__syn_lum(st->color), need = min_contrast * 255.0f, opacity = st->opacity;
    int i, x, y, cw, ch, rc, radius = (int)(st->outline_px + 0.5f), pad;
    int sdx = st->shadow_alpha > 0 ? st->shadow_dx : 0, sdy = st->shadow_alpha > 0 ? st->shadow_dy : 0;
    size_t n;
    unsigned char *cover;
    pad = 1 + (radius > abs(sdx) ? radius : abs(sdx));
    pad = pad > 1 + abs(sdy) ? pad : 1 + abs(sdy);
    ocr__syn_box_quad(xf, wd->box, out->quad);
    ocr__syn_quad_bounds(out->quad, b);
    out->bx0 = (int)floorf(b[0]) - pad; out->by0 = (int)floorf(b[1]) - pad;
    out->bx1 = (int)ceilf(b[2]) + pad; out->by1 = (int)ceilf(b[3]) + pad;
    if (out->bx0 < 0) out->bx0 = 0;
    if (out->by0 < 0) out->by0 = 0;
    if (out->bx1 > sc->w) out->bx1 = sc->w;
    if (out->by1 > sc->h) out->by1 = sc->h;
    cw = out->bx1 - out->bx0;
    ch = out->by1 - out->by0;
    out->ink = 0;
    if (cw <= 0 || ch <= 0) return OCR_OK;
    n = (size_t)cw * (size_t)ch;
    /* the coverage, and room for the outline's band and the dilation's scratch after it */
    if ((rc = ocr__syn_grow(ctx, &sc->cover_buf, &sc->cover_cap, radius > 0 ? 3 * n : n))) return rc;
    cover = sc->cover_buf;
    memset(cover, 0, n);
    for (i = 0; i < wd->n; i++)
        if ((rc = ocr__syn_draw_glyph(ctx, sc, wd->font, wd->glyphs[i], wd->pen[i], xf, out->bx0, out->by0, cw, ch))) return rc;
    if (sdx || sdy)
        for (y = 0; y < ch; y++)
            for (x = 0; x < cw; x++) {
                int fx = x - sdx, fy = y - sdy;
                unsigned g;
                if (fx < 0 || fy < 0 || fx >= cw || fy >= ch || !(g = cover[(size_t)fy * cw + fx])) continue;
                if (!sc->no_paint)
                    ocr__syn_blend(sc->rgb + ((size_t)(y + out->by0) * (size_t)sc->w + (size_t)(x + out->bx0)) * 3, st->shadow,
                                   (float)g / 255.0f * st->shadow_alpha);
            }
    if (radius > 0) {
        unsigned char *band = cover + n;
        ocr__syn_dilate(cover, cover + 2 * n, band, cw, ch, radius);
        for (y = 0; y < ch; y++)
            for (x = 0; x < cw; x++) {
                unsigned g = band[(size_t)y * cw + x];
                if (g && !sc->no_paint) ocr__syn_blend(sc->rgb + ((size_t)(y + out->by0) * (size_t)sc->w + (size_t)(x + out->bx0)) * 3, st->outline,
                                      (float)g / 255.0f * opacity);
            }
    }
    for (y = 0; y < ch; y++)
        for (x = 0; x < cw; x++) {
            unsigned g = cover[(size_t)y * (size_t)cw + (size_t)x];
            size_t at = (size_t)(y + out->by0) * (size_t)sc->w + (size_t)(x + out->bx0);
            uint8_t *p = sc->rgb + at * 3;
            if (!g) continue;
            if (g >= OCR__SYN_INK) {
                out->ink++;
                /* Legible where the drawn ink differs enough from what it covers (an outline included). */
                if (opacity * fabsf(text_lum - ocr__syn_lum(p)) >= need) sc->label[at] = (uint16_t)id;
            }
            if (!sc->no_paint) ocr__syn_blend(p, st->color, (float)g / 255.0f * opacity);
        }
    return OCR_OK;
}

/* Text colour against the background under the line (luminance mean bg_lum, standard deviation spread): at least
   0.35 of the range away from the mean, and further on a busy background. */
static void ocr__syn_text_color(ocr__syn_scene *sc, float bg_lum, float spread, int faint, uint8_t color[3]) {
    ocr_rng *r = &sc->rng;
    int tries, c;
    if (faint) { /* close to the background on purpose */
        float target = bg_lum + ocr__syn_range(r, -0.08f, 0.08f) * 255.0f, shift;
        ocr__syn_random_color(r, color);
        for (c = 0; c < 3; c++) color[c] = (uint8_t)(color[c] / 4 + 96);
        shift = target - ocr__syn_lum(color);
        for (c = 0; c < 3; c++) {
            float v = color[c] + shift;
            color[c] = (uint8_t)(v < 0 ? 0 : v > 255 ? 255 : v + 0.5f);
        }
        return;
    }
    for (tries = 0; tries < 16; tries++) {
        ocr__syn_random_color(r, color);
        if (fabsf(ocr__syn_lum(color) - bg_lum) >= fminf(0.35f * 255.0f + spread, 0.6f * 255.0f)) return;
    }
    memset(color, bg_lum > 127.5f ? 0 : 255, 3);
}

/* Mean and standard deviation of the luminance under a quad's box (every other pixel). */
static void ocr__syn_lum_stats(const ocr__syn_scene *sc, const float q[8], float *mean, float *spread) {
    float b[4], sum = 0, sum2 = 0;
    int x, y, x0, y0, x1, y1, n = 0;
    ocr__syn_quad_bounds(q, b);
    x0 = (int)b[0]; y0 = (int)b[1]; x1 = (int)b[2]; y1 = (int)b[3];
    x0 = x0 < 0 ? 0 : x0; y0 = y0 < 0 ? 0 : y0;
    x1 = x1 >= sc->w ? sc->w - 1 : x1; y1 = y1 >= sc->h ? sc->h - 1 : y1;
    for (y = y0; y <= y1; y += 2)
        for (x = x0; x <= x1; x += 2) {
            float l = ocr__syn_lum(sc->rgb + ((size_t)y * (size_t)sc->w + (size_t)x) * 3);
            sum += l;
            sum2 += l * l;
            n++;
        }
    *mean = n ? sum / (float)n : 127.5f;
    *spread = n ? sqrtf(fmaxf(sum2 / (float)n - *mean * *mean, 0)) : 0;
}

/* Mean gradient energy of the cells under a quad's box (sc->energy is a summed-area table of cells). */
static float ocr__syn_box_energy(const ocr__syn_scene *sc, const float q[8]) {
    float b[4];
    int x0, y0, x1, y1, stride = sc->ew + 1;
    const float *e = sc->energy;
    ocr__syn_quad_bounds(q, b);
    x0 = (int)b[0] / OCR__SYN_CELL; y0 = (int)b[1] / OCR__SYN_CELL;
    x1 = (int)b[2] / OCR__SYN_CELL + 1; y1 = (int)b[3] / OCR__SYN_CELL + 1;
    x0 = x0 < 0 ? 0 : x0; y0 = y0 < 0 ? 0 : y0;
    x1 = x1 > sc->ew ? sc->ew : x1; y1 = y1 > sc->eh ? sc->eh : y1;
    if (x1 <= x0 || y1 <= y0) return 0;
    return (e[y1 * stride + x1] - e[y0 * stride + x1] - e[y1 * stride + x0] + e[y0 * stride + x0]) / (float)((x1 - x0) * (y1 - y0));
}

typedef struct { float quad[8], gap; } ocr__syn_placed;

/* Lays out, places and draws one line of 1-4 words; appends its words to out (capacity checked by the caller). */
/* Whether the font has a glyph for each of the n characters. */
static int ocr__syn_font_covers(const ocr__synth_font *f, const int *cps, int n) {
    int i;
    for (i = 0; i < n; i++) {
        int k = ocr__syn_rep_index(cps[i]);
        if (k >= 0 ? !(f->covers[k >> 3] & (1u << (k & 7))) : !stbtt_FindGlyphIndex(&f->info, cps[i])) return 0;
    }
    return 1;
}

static int ocr__syn_font_covers_words(const ocr__synth_font *f, int cps[][OCR__SYN_MAX_CHARS], const int *lens, int n_words) {
    int k;
    for (k = 0; k < n_words; k++)
        if (!ocr__syn_font_covers(f, cps[k], lens[k])) return 0;
    return 1;
}

/* The font of a line: a family drawn uniformly among those with a font that has every glyph the words use, then one
   of its fonts that has them (a family's fonts are contiguous in synth->fonts). NULL when no font has them all. */
static const ocr__synth_font *ocr__syn_pick_font(ocr_rng *r, const ocr_synth *synth, int cps[][OCR__SYN_MAX_CHARS],
                                                 const int *lens, int n_words) {
    int i, families = 0, last = -1, pick, count = 0;
    for (i = 0; i < synth->n_fonts; i++)
        if (synth->fonts[i].family != last && ocr__syn_font_covers_words(&synth->fonts[i], cps, lens, n_words)) {
            families++;
            last = synth->fonts[i].family;
        }
    if (!families) return NULL;
    pick = (int)ocr_rng_below(r, (uint32_t)families);
    last = -1;
    families = 0;
    for (i = 0; i < synth->n_fonts; i++)
        if (synth->fonts[i].family != last && ocr__syn_font_covers_words(&synth->fonts[i], cps, lens, n_words)) {
            if (families++ == pick) break;
            last = synth->fonts[i].family;
        }
    last = synth->fonts[i].family;
    for (; i < synth->n_fonts && synth->fonts[i].family == last; i++) count += ocr__syn_font_covers_words(&synth->fonts[i], cps, lens, n_words);
    pick = (int)ocr_rng_below(r, (uint32_t)count);
    for (i = 0;; i++)
        if (synth->fonts[i].family == last && ocr__syn_font_covers_words(&synth->fonts[i], cps, lens, n_words) && pick-- == 0)
            return &synth->fonts[i];
}

/* A word of plain ASCII letters, which every font the synthesizer keeps has. */
static int ocr__syn_plain_word(ocr_rng *r, int *cps) {
    int n = 2 + (int)ocr_rng_below(r, 7), i;
    for (i = 0; i < n; i++) cps[i] = 'a' + (int)ocr_rng_below(r, 26);
    return n;
}

/* ---------------------------------------------------------------- word lists */

static int ocr__syn_is_space(int c) {
    return c == 0x20 || c == 0xA0 || c == 0x1680 || (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 ||
           c == 0x202F || c == 0x205F || c == 0x3000;
}

/* Reads config.words_path into synth->wordlist (see ocr_synth_config). Needs the fonts: a word no single font can
   draw is left out here, so drawing a word never needs a fallback. */
static int ocr__syn_load_words(ocr_ctx *ctx, ocr_synth *synth) {
    const char *fn = "ocr_synth_init", *path = synth->config.words_path;
    ocr__synth_words *w;
    const unsigned char *b;
    size_t pos = 0, used = 0;
    long line = 0;
    int rc, f;
    if (!(w = (ocr__synth_words *)OCR_MALLOC(sizeof *w))) return ocr_error(ctx, OCR_ENOMEM, "%s: out of memory", fn);
    memset(w, 0, sizeof *w);
    synth->wordlist = w; /* ocr_synth_free frees it on any error */
    if ((rc = ocr_read_file(ctx, path, OCR__SYN_MAX_WORDS_BYTES, &w->bytes, &w->size))) return rc;
    b = w->bytes;
    /* a word has at least one byte and a byte ends it: size + 1 code points and start offsets are enough */
    w->cps = (int *)OCR_MALLOC((w->size + 1) * sizeof *w->cps);
    w->start = (size_t *)OCR_MALLOC((w->size + 2) * sizeof *w->start);
    if (!w->cps || !w->start) return ocr_error(ctx, OCR_ENOMEM, "%s: out of memory for the words of %s", fn, path);
    if (w->size >= 3 && b[0] == 0xEF && b[1] == 0xBB && b[2] == 0xBF) pos = 3;
    while (pos < w->size) {
        size_t end = pos, stop, i;
        int n = 0, *word = w->cps + used, drawable = 1;
        int32_t cp;
        while (end < w->size && b[end] != '\n') end++;
        stop = end > pos && b[end - 1] == '\r' ? end - 1 : end;
        line++;
        for (i = pos; i < stop;) {
            size_t at = i;
            if (!ocr_utf8_next((const char *)b, stop, &i, &cp))
                return ocr_error(ctx, OCR_EFORMAT, "%s: words file %s, line %ld: invalid UTF-8 at byte %lu of the line", fn, path,
                                 line, (unsigned long)(at - pos + 1));
            if (cp < 0x20 || (cp >= 0x7F && cp <= 0x9F))
                return ocr_error(ctx, OCR_EFORMAT, "%s: words file %s, line %ld: control character U+%04X", fn, path, line, (unsigned)cp);
            if (ocr__syn_is_space(cp))
                return ocr_error(ctx, OCR_EFORMAT, "%s: words file %s, line %ld: whitespace (U+%04X); the file must hold one word per line",
                                 fn, path, line, (unsigned)cp);
            if (n < OCR__SYN_MAX_CHARS) word[n] = cp;
            drawable &= cp <= 0xFFFF; /* the renderer's UTF-8 labels hold three bytes per character at most */
            n++;
        }
        pos = end + 1;
        if (n == 0) continue;
        if (n > OCR__SYN_MAX_CHARS) { w->too_long++; continue; }
        for (f = 0; drawable && f < synth->n_fonts && !ocr__syn_font_covers(&synth->fonts[f], word, n); f++) {}
        if (!drawable || f == synth->n_fonts) { w->no_font++; continue; }
        w->start[w->n++] = used;
        used += (size_t)n;
    }
    w->start[w->n] = used;
    if (w->n == 0)
        return ocr_error(ctx, OCR_EFORMAT, "%s: words file %s: no usable word in its %ld lines (%d over %d characters, %d with a "
                         "character no font has)", fn, path, line, w->too_long, OCR__SYN_MAX_CHARS, w->no_font);
    return OCR_OK;
}

/* A word of the list, uniformly. */
static int ocr__syn_list_word(ocr_rng *r, const ocr__synth_words *w, int *cps) {
    uint32_t i = ocr_rng_below(r, (uint32_t)w->n);
    int n = (int)(w->start[i + 1] - w->start[i]);
    memcpy(cps, w->cps + w->start[i], (size_t)n * sizeof *cps);
    return n;
}

/* Lays out, places and draws one line of 1-4 words; appends its words to out (capacity checked by the caller). */
static int ocr__syn_line(ocr_ctx *ctx, ocr__syn_scene *sc, ocr__syn_placed *placed, int *n_placed,
                         ocr__syn_word_out *out, int *n_out) {
    const ocr_synth_config *cfg = &sc->synth->config;
    const ocr_synth *synth = sc->synth;
    ocr_rng *r = &sc->rng;
    const ocr__synth_font *f = NULL;
    ocr__syn_word words[4];
    ocr__syn_xform xf;
    float px = ocr__syn_log_uniform(r, cfg->min_text_px, cfg->max_text_px), em;
    float angle, shear = 0, tracking = 0, space, pen = 0, line_box[4], q[8], b[4], opacity, cs, sn;
    float roll = ocr_rng_uniform(r), bg_lum, bg_spread, persp = 0, persp_dir = 0, bend = 0, best_energy = 0, best_t[2] = {0, 0};
    int n_words = roll < 0.5f ? 1 : roll < 0.75f ? 2 : roll < 0.9f ? 3 : 4, i, k, tries, rc, faint, found;
    int cps[4][OCR__SYN_MAX_CHARS], lens[4];
    ocr__syn_style style;
    if (sc->w <= 8 || sc->h <= 8) return OCR_OK;
    /* The words first, then a font with every glyph they use: a word no font can draw becomes plain letters, and
       words no single font can draw together are dropped from the end of the line. */
    for (k = 0; k < n_words; k++) {
        /* no draw without a list, so such scenes stay as they were */
        if (synth->wordlist && ocr__syn_chance(r, cfg->words_prob)) lens[k] = ocr__syn_list_word(r, synth->wordlist, cps[k]);
        else lens[k] = ocr__syn_random_word(r, cps[k]);
        for (i = 0; i < synth->n_fonts && !ocr__syn_font_covers(&synth->fonts[i], cps[k], lens[k]); i++) {}
        if (i == synth->n_fonts) lens[k] = ocr__syn_plain_word(r, cps[k]);
    }
    while (!(f = ocr__syn_pick_font(r, synth, cps, lens, n_words)) && n_words > 1) n_words--;
    if (!f) return OCR_OK; /* cannot happen: plain letters are in every font kept */
    em = (float)(f->ascent - f->descent);
    angle = ocr__syn_chance(r, 0.55f) ? ocr__syn_range(r, -2, 2) : ocr__syn_range(r, -1, 1) * cfg->max_rotation_deg;
    if (fabsf(angle) > cfg->max_rotation_deg) angle = angle < 0 ? -cfg->max_rotation_deg : cfg->max_rotation_deg;
    angle *= 3.14159265f / 180.0f;
    if (ocr__syn_chance(r, 0.15f)) shear = ocr__syn_range(r, -0.3f, 0.3f);
    if (ocr__syn_chance(r, 0.2f)) tracking = ocr__syn_range(r, -0.02f, 0.2f) * em;
    space = (float)f->space_advance * ocr__syn_range(r, 0.8f, 1.6f);
    faint = ocr__syn_chance(r, cfg->low_contrast_prob);
    opacity = ocr__syn_chance(r, 0.7f) ? 1.0f : ocr__syn_range(r, 0.75f, 1.0f);
    /* Layout in font units along the baseline. */
    for (k = 0; k < n_words; k++) {
        ocr__syn_word *wd = &words[k];
        wd->font = f;
        wd->n = 0;
        wd->box[0] = wd->box[1] = 1e30f;
        wd->box[2] = wd->box[3] = -1e30f;
        for (i = 0; i < lens[k]; i++) {
            int g = stbtt_FindGlyphIndex(&f->info, cps[k][i]), adv, lsb, nv;
            stbtt_vertex *v = NULL;
            float gb[4];
            if (wd->n) pen += (float)stbtt_GetGlyphKernAdvance(&f->info, wd->glyphs[wd->n - 1], g);
            wd->cps[wd->n] = cps[k][i];
            wd->glyphs[wd->n] = g;
            wd->pen[wd->n] = pen;
            nv = stbtt_GetGlyphShape(&f->info, g, &v);
            if (nv > 0 && ocr__syn_outline_bounds(v, nv, gb)) {
                wd->box[0] = pen + gb[0] < wd->box[0] ? pen + gb[0] : wd->box[0];
                wd->box[2] = pen + gb[2] > wd->box[2] ? pen + gb[2] : wd->box[2];
                wd->box[1] = gb[1] < wd->box[1] ? gb[1] : wd->box[1];
                wd->box[3] = gb[3] > wd->box[3] ? gb[3] : wd->box[3];
            }
            stbtt_FreeShape(&f->info, v); /* CFF outlines allocate even when empty */
            stbtt_GetGlyphHMetrics(&f->info, g, &adv, &lsb);
            pen += (float)adv + tracking;
            wd->n++;
        }
        pen += space;
        if (wd->box[0] > wd->box[2]) { n_words = k; break; } /* no ink at all: stop the line here */
    }
    if (n_words == 0) return OCR_OK;
    cs = cosf(angle);
    sn = sinf(angle);
    /* m = rotation (counter-clockwise on screen) times slant, in the y-down pixel frame */
    xf.m[0] = cs; xf.m[1] = -cs * shear + sn; xf.m[2] = -sn; xf.m[3] = sn * shear + cs;
    xf.t[0] = xf.t[1] = 0;
    xf.g[0] = xf.g[1] = xf.c[0] = xf.c[1] = 0;
    xf.curve = xf.uc = 0;
    if (!cfg->plain_background && ocr__syn_chance(r, 0.3f)) { /* seen at an angle: up to 1.5x nearer at one end */
        persp = ocr__syn_range(r, 0.05f, 0.2f);
        persp_dir = ocr__syn_range(r, 0, 6.2831853f);
    }
    if (!cfg->plain_background && ocr__syn_chance(r, 0.12f)) /* set on an arc: the ends turn by up to 20 degrees */
        bend = ocr__syn_range(r, 0.08f, 0.35f) * (ocr__syn_chance(r, 0.5f) ? 1.0f : -1.0f);
    for (;;) { /* drop words, then shrink, until the line fits the image */
        xf.scale = px / em;
        memcpy(line_box, words[0].box, sizeof line_box);
        for (k = 1; k < n_words; k++) {
            line_box[0] = words[k].box[0] < line_box[0] ? words[k].box[0] : line_box[0];
            line_box[1] = words[k].box[1] < line_box[1] ? words[k].box[1] : line_box[1];
            line_box[2] = words[k].box[2] > line_box[2] ? words[k].box[2] : line_box[2];
            line_box[3] = words[k].box[3] > line_box[3] ? words[k].box[3] : line_box[3];
        }
        if (bend != 0) { /* the radius: the half length over the end angle, and at least three text heights */
            float half_len = 0.5f * xf.scale * (line_box[2] - line_box[0]), radius = half_len / fabsf(bend);
            radius = radius > 3 * px ? radius : 3 * px;
            xf.curve = (bend > 0 ? 1.0f : -1.0f) / radius;
            xf.uc = 0.5f * xf.scale * (line_box[0] + line_box[2]);
        }
        if (persp > 0) { /* g scaled to the line's half diagonal d: 1 + g.(l - c) stays within 1 -+ persp */
            float half = 0.5f * xf.scale * sqrtf((line_box[2] - line_box[0]) * (line_box[2] - line_box[0]) +
                                                 (line_box[3] - line_box[1]) * (line_box[3] - line_box[1]));
            xf.g[0] = xf.g[1] = 0;
            ocr__syn_map(&xf, 0.5f * (line_box[0] + line_box[2]), 0.5f * (line_box[1] + line_box[3]), &xf.c[0], &xf.c[1]);
            xf.g[0] = persp * cosf(persp_dir) / (half > 1 ? half : 1);
            xf.g[1] = persp * sinf(persp_dir) / (half > 1 ? half : 1);
        }
        ocr__syn_box_quad(&xf, line_box, q);
        ocr__syn_quad_bounds(q, b);
        if (b[2] - b[0] <= sc->w - 4 && b[3] - b[1] <= sc->h - 4) break;
        if (n_words > 1) { n_words--; continue; }
        {
            float fit_w = (sc->w - 4) / (b[2] - b[0]), fit_h = (sc->h - 4) / (b[3] - b[1]);
            px *= 0.98f * (fit_w < fit_h ? fit_w : fit_h);
        }
        if (px < cfg->min_text_px) return OCR_OK;
    }
    /* Where the line goes: the first free spot; on a photograph the smoothest (least gradient energy) of the first
       few free spots, as text is mostly written on plain surfaces. */
    for (tries = 0, found = 0; tries < 10 && found < (sc->energy ? 4 : 1); tries++) {
        float gap = 0.3f * px, tq[8], t0 = ocr__syn_range(r, 2 - b[0], (float)sc->w - 2 - b[2]);
        float t1 = ocr__syn_range(r, 2 - b[1], (float)sc->h - 2 - b[3]), energy = 0;
        int ok = 1;
        xf.t[0] = t0;
        xf.t[1] = t1;
        ocr__syn_box_quad(&xf, line_box, tq);
        for (k = 0; k < *n_placed && ok; k++) ok = ocr__syn_quads_apart(tq, placed[k].quad, gap > placed[k].gap ? gap : placed[k].gap);
        if (!ok) continue;
        if (sc->energy) energy = ocr__syn_box_energy(sc, tq);
        if (!found++ || energy < best_energy) { best_energy = energy; best_t[0] = t0; best_t[1] = t1; }
    }
    if (!found) return OCR_OK;
    xf.t[0] = best_t[0];
    xf.t[1] = best_t[1];
    ocr__syn_box_quad(&xf, line_box, placed[*n_placed].quad);
    placed[*n_placed].gap = 0.3f * px;
    ocr__syn_lum_stats(sc, placed[*n_placed].quad, &bg_lum, &bg_spread);
    (*n_placed)++;
    memset(&style, 0, sizeof style);
    style.opacity = opacity;
    ocr__syn_text_color(sc, bg_lum, sc->photo ? bg_spread : 0, faint, style.color);
    if (!cfg->plain_background && !faint) {
        int light = ocr__syn_lum(style.color) > 127.5f, c;
        /* outlines and shadows, more often on busy photographs where they keep text readable */
        if (ocr__syn_chance(r, sc->photo ? (bg_spread > 30 ? 0.45f : 0.2f) : 0.08f)) {
            style.outline_px = px * ocr__syn_range(r, 0.03f, 0.08f);
            style.outline_px = style.outline_px < 1 ? 1 : style.outline_px > 4 ? 4 : style.outline_px;
            ocr__syn_random_color(r, style.outline);
            for (c = 0; c < 3; c++) style.outline[c] = (uint8_t)(light ? style.outline[c] / 5 : 255 - style.outline[c] / 5);
        }
        if (ocr__syn_chance(r, sc->photo ? 0.25f : 0.1f)) {
            float dist = px * ocr__syn_range(r, 0.03f, 0.08f), dir = ocr__syn_range(r, 0, 6.2831853f);
            dist = dist < 1 ? 1 : dist > 6 ? 6 : dist;
            style.shadow_dx = (int)floorf(dist * cosf(dir) + 0.5f);
            style.shadow_dy = (int)floorf(dist * sinf(dir) + 0.5f);
            style.shadow_alpha = ocr__syn_range(r, 0.4f, 0.8f);
            for (c = 0; c < 3; c++) style.shadow[c] = (uint8_t)(light ? ocr_rng_below(r, 50) : 200 + ocr_rng_below(r, 56));
        }
    }
    for (k = 0; k < n_words; k++) {
        ocr__syn_word_out *wo = &out[*n_out];
        memset(wo, 0, sizeof *wo);
        ocr__syn_utf8(words[k].cps, words[k].n, wo->text);
        wo->font = f;
        if ((rc = ocr__syn_draw_word(ctx, sc, &words[k], &xf, &style, cfg->min_contrast, *n_out + 1, wo))) return rc;
        (*n_out)++;
    }
    if (!cfg->plain_background && ocr__syn_chance(r, cfg->occlusion_prob)) {
        /* An opaque blob over a random point of one of the words. */
        ocr__syn_shape sh;
        const float *wq = out[*n_out - 1 - (int)ocr_rng_below(r, (uint32_t)n_words)].quad;
        float u = ocr_rng_uniform(r), v = ocr_rng_uniform(r);
        memset(&sh, 0, sizeof sh);
        sh.kind = ocr__syn_chance(r, 0.6f) ? OCR__SYN_SHAPE_RECT : OCR__SYN_SHAPE_ELLIPSE;
        sh.cx = (1 - v) * ((1 - u) * wq[0] + u * wq[2]) + v * ((1 - u) * wq[6] + u * wq[4]);
        sh.cy = (1 - v) * ((1 - u) * wq[1] + u * wq[3]) + v * ((1 - u) * wq[7] + u * wq[5]);
        sh.a = px * ocr__syn_range(r, 0.2f, 1.0f);
        sh.b = px * ocr__syn_range(r, 0.2f, 0.8f);
        sh.angle = ocr__syn_range(r, 0, 3.14159265f);
        sh.alpha = 1.0f;
        sh.occludes = 1;
        ocr__syn_random_color(r, sh.color);
        ocr__syn_paint(sc, &sh);
    }
    return OCR_OK;
}

/* ---------------------------------------------------------------- finishing */

/* Separable [1 2 1] / 4 blur, in place. */
static int ocr__syn_blur(ocr_ctx *ctx, ocr__syn_scene *sc) {
    size_t row = (size_t)sc->w * 3, n = (size_t)(sc->w > sc->h ? sc->w : sc->h) * 3;
    uint8_t *tmp = (uint8_t *)OCR_MALLOC(n);
    int x, y, c;
    if (!tmp) return ocr_error(ctx, OCR_ENOMEM, "ocr_synth_sample: out of memory");
    for (y = 0; y < sc->h; y++) {
        uint8_t *p = sc->rgb + (size_t)y * row;
        memcpy(tmp, p, row);
        for (x = 0; x < sc->w; x++)
            for (c = 0; c < 3; c++) {
                int l = tmp[(x > 0 ? x - 1 : x) * 3 + c], m = tmp[x * 3 + c], rr = tmp[(x + 1 < sc->w ? x + 1 : x) * 3 + c];
                p[x * 3 + c] = (uint8_t)((l + 2 * m + rr + 2) >> 2);
            }
    }
    for (x = 0; x < sc->w; x++) {
        for (y = 0; y < sc->h; y++) memcpy(tmp + (size_t)y * 3, sc->rgb + (size_t)y * row + (size_t)x * 3, 3);
        for (y = 0; y < sc->h; y++)
            for (c = 0; c < 3; c++) {
                int u = tmp[(y > 0 ? y - 1 : y) * 3 + c], m = tmp[y * 3 + c], d = tmp[(y + 1 < sc->h ? y + 1 : y) * 3 + c];
                sc->rgb[(size_t)y * row + (size_t)x * 3 + c] = (uint8_t)((u + 2 * m + d + 2) >> 2);
            }
    }
    OCR_FREE(tmp);
    return OCR_OK;
}

/* Luminance noise: the sum of two uniforms (triangular), cheap and close enough to Gaussian for this. */
static void ocr__syn_noise(ocr__syn_scene *sc, float stddev) {
    size_t i, n = (size_t)sc->w * (size_t)sc->h;
    float amp = stddev * 2.4494897f / 65535.0f; /* a triangular variable on [-1, 1] has stddev 1/sqrt(6) */
    for (i = 0; i < n; i++) {
        uint64_t bits = ocr_rng_u64(&sc->rng);
        float v = ((float)(bits & 0xFFFF) + (float)((bits >> 16) & 0xFFFF) - 65535.0f) * amp;
        int c;
        for (c = 0; c < 3; c++) {
            float x = sc->rgb[i * 3 + c] + v;
            sc->rgb[i * 3 + c] = (uint8_t)(x < 0 ? 0 : x > 255 ? 255 : x + 0.5f);
        }
    }
}

static uint64_t ocr__syn_mix(uint64_t x) {
    x ^= x >> 30; x *= 0xBF58476D1CE4E5B9ull;
    x ^= x >> 27; x *= 0x94D049BB133111EBull;
    return x ^ (x >> 31);
}

static int ocr__syn_emit(ocr_ctx *ctx, const ocr__syn_word_out *words, int n, ocr_sample *out) {
    int i, k;
    size_t text_len;
    if (!n) return OCR_OK;
    out->polys = (ocr_polygon *)OCR_MALLOC((size_t)n * sizeof(ocr_polygon));
    if (!out->polys) return ocr_error(ctx, OCR_ENOMEM, "ocr_synth_sample: out of memory");
    memset(out->polys, 0, (size_t)n * sizeof(ocr_polygon));
    for (i = 0; i < n; i++) {
        ocr_polygon *p = &out->polys[i];
        out->n_polys = i + 1;
        p->points = (ocr_point *)OCR_MALLOC(4 * sizeof(ocr_point));
        text_len = strlen(words[i].text);
        if ((p->text = (char *)OCR_MALLOC(text_len + 1)) != NULL) memcpy(p->text, words[i].text, text_len + 1);
        if (!p->points || !p->text) return ocr_error(ctx, OCR_ENOMEM, "ocr_synth_sample: out of memory");
        for (k = 0; k < 4; k++) { p->points[k].x = words[i].quad[2 * k]; p->points[k].y = words[i].quad[2 * k + 1]; }
        p->n_points = 4;
        p->ignore = words[i].ignore;
    }
    return OCR_OK;
}

/* ocr_synth_sample, for tests also: which font drew each word (word_fonts[i] for polygon i < cap, an index into
   synth->fonts), whether the scene is on a photograph (used_photo), and with no_paint the same scene with its text
   left unpainted (what lies under it). */
static int ocr__syn_render(ocr_ctx *ctx, const ocr_synth *synth, uint64_t seed, int64_t index, int width, int height,
                           ocr_sample *out, int *word_fonts, int cap, int no_paint, int *used_photo) {
    const char *fn = "ocr_synth_sample";
    const ocr_synth_config *cfg;
    ocr__syn_scene sc;
    ocr__syn_placed *placed = NULL;
    ocr__syn_word_out *words = NULL;
    size_t npix;
    int rc, max_lines, n_lines, n_placed = 0, n_words = 0, i;
    if (!out) return ocr_error(ctx, OCR_EINVAL, "%s: out is NULL", fn);
    memset(out, 0, sizeof *out);
    if (!synth || !synth->fonts || synth->n_fonts <= 0)
        return ocr_error(ctx, OCR_EINVAL, "%s: the synthesizer has no fonts (call ocr_synth_init first)", fn);
    if (width < 1 || height < 1 || width > OCR_IMAGE_MAX_SIDE || height > OCR_IMAGE_MAX_SIDE)
        return ocr_error(ctx, OCR_ERANGE, "%s: size %dx%d, each side must be in [1, %d]", fn, width, height, OCR_IMAGE_MAX_SIDE);
    cfg = &synth->config;
    memset(&sc, 0, sizeof sc);
    sc.w = width;
    sc.h = height;
    sc.synth = synth;
    sc.no_paint = no_paint;
    ocr_rng_seed(&sc.rng, ocr__syn_mix(seed ^ ocr__syn_mix((uint64_t)index + 0x9E3779B97F4A7C15ull)));
    npix = (size_t)width * (size_t)height;
    max_lines = (int)(cfg->lines_per_mpix * (float)npix / 1e6f + 0.999f);
    if (max_lines > 4096) max_lines = 4096;
    n_lines = max_lines ? 1 + (int)ocr_rng_below(&sc.rng, (uint32_t)max_lines) : 0;
    if (ocr__syn_chance(&sc.rng, 0.03f)) n_lines = 0; /* some scenes with no text at all */
    if ((rc = ocr_image_alloc(ctx, &out->image, width, height, 3))) return rc;
    snprintf(out->id, sizeof out->id, "synth:%llu:%lld", (unsigned long long)seed, (long long)index);
    {
        ocr_hasher h;
        ocr_hasher_init(&h, synth->identity.lo ^ synth->identity.hi);
        ocr_hasher_u64(&h, seed); ocr_hasher_u64(&h, (uint64_t)index);
        ocr_hasher_u64(&h, (uint64_t)width); ocr_hasher_u64(&h, (uint64_t)height);
        out->content_hash = ocr_hasher_final(&h);
    }
    sc.rgb = out->image.pixels;
    sc.label = (uint16_t *)OCR_MALLOC(npix * sizeof(uint16_t));
    placed = (ocr__syn_placed *)OCR_MALLOC((size_t)(n_lines + 1) * sizeof *placed);
    words = (ocr__syn_word_out *)OCR_MALLOC((size_t)(n_lines * 4 + 1) * sizeof *words);
    if (!sc.label || !placed || !words) { rc = ocr_error(ctx, OCR_ENOMEM, "%s: out of memory for a %dx%d scene", fn, width, height); goto done; }
    memset(sc.label, 0, npix * sizeof(uint16_t));
    /* drawn whether or not there are photographs, so scenes that get none are the same with photo_path "none" */
    if (!cfg->plain_background && ocr_rng_uniform(&sc.rng) < cfg->photo_prob && synth->n_photos > 0) {
        const ocr_image *photo = ocr__syn_photo_image(ctx, &synth->photos[ocr_rng_below(&sc.rng, (uint32_t)synth->n_photos)]);
        if (!photo) { rc = ctx ? ctx->last_status : OCR_ENOMEM; rc = rc ? rc : OCR_ENOMEM; goto done; }
        sc.photo = 1;
        if ((rc = ocr__syn_photo_background(ctx, &sc, photo))) goto done;
        /* a photograph has structure of its own: fewer made-up shapes */
        if (cfg->clutter > 0) ocr__syn_clutter(&sc, 0.3f * cfg->clutter, cfg->min_text_px, cfg->max_text_px, 0);
        if ((rc = ocr__syn_energy_map(ctx, &sc))) goto done;
    } else {
        ocr__syn_background(&sc, cfg->plain_background);
        if (!cfg->plain_background && cfg->clutter > 0) ocr__syn_clutter(&sc, cfg->clutter, cfg->min_text_px, cfg->max_text_px, 0);
    }
    for (i = 0; i < n_lines; i++)
        if ((rc = ocr__syn_line(ctx, &sc, placed, &n_placed, words, &n_words))) goto done;
    if (!cfg->plain_background && cfg->clutter > 0 && ocr__syn_chance(&sc.rng, 0.25f))
        ocr__syn_clutter(&sc, cfg->clutter, cfg->min_text_px, cfg->max_text_px, 1); /* lines across the text */
    for (i = 0; i < n_words; i++) { /* a word is ignore when too small, or too little of its ink is legible and visible */
        ocr__syn_word_out *w = &words[i];
        int x, y, visible = 0;
        float b[4];
        for (y = w->by0; y < w->by1; y++)
            for (x = w->bx0; x < w->bx1; x++) visible += sc.label[(size_t)y * (size_t)width + (size_t)x] == (uint16_t)(i + 1);
        ocr__syn_quad_bounds(w->quad, b);
        w->ignore = w->ink == 0 || (float)visible < (1.0f - cfg->max_occluded) * (float)w->ink ||
                    b[2] - b[0] < cfg->min_care_px || b[3] - b[1] < cfg->min_care_px;
    }
    if (!cfg->plain_background) {
        if (ocr__syn_chance(&sc.rng, cfg->blur_prob)) {
            int passes = 1 + (int)ocr_rng_below(&sc.rng, 2);
            for (i = 0; i < passes; i++)
                if ((rc = ocr__syn_blur(ctx, &sc))) goto done;
        }
        if (cfg->noise_stddev > 0) ocr__syn_noise(&sc, ocr__syn_range(&sc.rng, 0, cfg->noise_stddev));
    }
    rc = ocr__syn_emit(ctx, words, n_words, out);
    for (i = 0; rc == OCR_OK && word_fonts && i < n_words && i < cap; i++) word_fonts[i] = (int)(words[i].font - synth->fonts);
    if (used_photo) *used_photo = sc.photo;
done:
    OCR_FREE(sc.energy);
    OCR_FREE(sc.label);
    OCR_FREE(sc.glyph_buf);
    OCR_FREE(sc.cover_buf);
    OCR_FREE(sc.verts);
    OCR_FREE(placed);
    OCR_FREE(words);
    if (rc) ocr_sample_free(out);
    return rc;
}

OCRDEF int ocr_synth_sample(ocr_ctx *ctx, const ocr_synth *synth, uint64_t seed, int64_t index, int width, int height,
                            ocr_sample *out) {
    return ocr__syn_render(ctx, synth, seed, index, width, height, out, NULL, 0, 0, NULL);
}

typedef struct { const ocr_synth *synth; uint64_t seed; int width, height; } ocr__synth_dataset;

static int ocr__synth_dataset_get(ocr_dataset *ds, ocr_ctx *ctx, int64_t index, unsigned flags, ocr_sample *out) {
    const ocr__synth_dataset *d = (const ocr__synth_dataset *)ds->impl;
    int rc = ocr_synth_sample(ctx, d->synth, d->seed, index, d->width, d->height, out);
    if (rc == OCR_OK && (flags & OCR_SAMPLE_LABELS_ONLY)) { /* the polygons exist only once the scene is drawn */
        OCR_FREE(out->image.pixels);
        out->image.pixels = NULL;
    }
    return rc;
}

static void ocr__synth_dataset_close(ocr_dataset *ds) { OCR_FREE(ds->impl); }

OCRDEF int ocr_dataset_open_synth(ocr_ctx *ctx, ocr_dataset *ds, const ocr_synth *synth, uint64_t seed, int64_t count,
                                  int width, int height) {
    const char *fn = "ocr_dataset_open_synth";
    ocr__synth_dataset *d;
    if (!ds) return ocr_error(ctx, OCR_EINVAL, "%s: ds is NULL", fn);
    memset(ds, 0, sizeof *ds);
    if (!synth || synth->n_fonts <= 0) return ocr_error(ctx, OCR_EINVAL, "%s: the synthesizer has no fonts (call ocr_synth_init first)", fn);
    if (count < 0 || width < 1 || height < 1 || width > OCR_IMAGE_MAX_SIDE || height > OCR_IMAGE_MAX_SIDE)
        return ocr_error(ctx, OCR_ERANGE, "%s: count %lld, size %dx%d (count >= 0, sides in [1, %d])", fn, (long long)count, width,
                         height, OCR_IMAGE_MAX_SIDE);
    d = (ocr__synth_dataset *)OCR_MALLOC(sizeof *d);
    if (!d) return ocr_error(ctx, OCR_ENOMEM, "%s: out of memory", fn);
    d->synth = synth;
    d->seed = seed;
    d->width = width;
    d->height = height;
    ds->impl = d;
    ds->count = count;
    snprintf(ds->name, sizeof ds->name, "synth:%llu:%dx%d", (unsigned long long)seed, width, height);
    ds->get = ocr__synth_dataset_get;
    ds->close = ocr__synth_dataset_close;
    return OCR_OK;
}


/* ---------------------------------------------------------------- painting labels */

struct ocr__paint_font {
    unsigned char *data;
    size_t size;
    stbtt_fontinfo info;
    int ascent, descent;
};

OCRDEF void ocr_painter_close(ocr_painter *p) {
    int i;
    if (!p) return;
    for (i = 0; i < p->n_fonts; i++) OCR_FREE(p->fonts[i].data);
    OCR_FREE(p->fonts);
    memset(p, 0, sizeof *p);
}

OCRDEF int ocr_painter_open(ocr_ctx *ctx, ocr_painter *p, const char *files) {
    const char *fn = "ocr_painter_open", *at;
    int n = 1, rc = OCR_OK;
    if (!p || !files || !files[0]) return ocr_error(ctx, OCR_EINVAL, "%s: needs a painter and at least one font file", fn);
    memset(p, 0, sizeof *p);
    for (at = files; *at; at++) n += *at == ',';
    if (!(p->fonts = (ocr__paint_font *)OCR_MALLOC((size_t)n * sizeof *p->fonts))) return ocr_error(ctx, OCR_ENOMEM, "%s: out of memory", fn);
    for (at = files; *at && !rc;) {
        const char *end = strchr(at, ',');
        char path[4096];
        ocr__paint_font *f = &p->fonts[p->n_fonts];
        int offset, gap;
        size_t len = end ? (size_t)(end - at) : strlen(at);
        at += len + (end ? 1 : 0);
        if (!len) continue;
        if (len >= sizeof path) { rc = ocr_error(ctx, OCR_EINVAL, "%s: a font path of %zu bytes", fn, len); break; }
        memcpy(path, at - len - (end ? 1 : 0), len);
        path[len] = 0;
        memset(f, 0, sizeof *f);
        if ((rc = ocr_read_file(ctx, path, OCR__SYN_MAX_FONT_BYTES, &f->data, &f->size))) {
            char msg[OCR_ERROR_MAX];
            snprintf(msg, sizeof msg, "%s", ocr_ctx_last_error(ctx));
            rc = ocr_error(ctx, rc, "%s: font '%s': %s", fn, path, msg);
            break;
        }
        offset = f->size >= 12 ? stbtt_GetFontOffsetForIndex(f->data, 0) : -1;
        if (offset < 0 || !stbtt_InitFont(&f->info, f->data, offset)) {
            OCR_FREE(f->data);
            rc = ocr_error(ctx, OCR_EFORMAT, "%s: '%s' is not a font stb_truetype reads", fn, path);
            break;
        }
        stbtt_GetFontVMetrics(&f->info, &f->ascent, &f->descent, &gap);
        if (f->ascent - f->descent <= 0) { f->ascent = 1000; f->descent = 0; }
        p->n_fonts++;
    }
    if (!rc && !p->n_fonts) rc = ocr_error(ctx, OCR_EINVAL, "%s: no font file in '%s'", fn, files);
    if (rc) ocr_painter_close(p);
    return rc;
}

OCRDEF int ocr_painter_font_of(const ocr_painter *p, int32_t cp) {
    int i;
    for (i = 0; p && i < p->n_fonts; i++)
        if (stbtt_FindGlyphIndex(&p->fonts[i].info, cp)) return i;
    return -1;
}

/* one character's advance at px pixels; the hollow box of a missing one is half the height wide */
static float ocr__paint_advance(const ocr_painter *p, int f, int32_t cp, float px) {
    int adv, lsb;
    float scale;
    if (f < 0) return 0.6f * px;
    scale = px / (float)(p->fonts[f].ascent - p->fonts[f].descent);
    stbtt_GetCodepointHMetrics(&p->fonts[f].info, cp, &adv, &lsb);
    return adv * scale;
}

OCRDEF float ocr_painter_measure(const ocr_painter *p, const char *text, float px) {
    size_t i = 0, n = text ? strlen(text) : 0;
    int32_t cp;
    float w = 0;
    while (i < n && ocr_utf8_next(text, n, &i, &cp)) w += ocr__paint_advance(p, ocr_painter_font_of(p, cp), cp, px);
    return w;
}

static void ocr__paint_blend(ocr_image *img, int x, int y, const uint8_t rgb[3], int alpha) {
    uint8_t *q;
    int c;
    if (x < 0 || y < 0 || x >= img->width || y >= img->height || alpha <= 0) return;
    q = img->pixels + ((size_t)y * img->width + x) * 3;
    for (c = 0; c < 3; c++) q[c] = (uint8_t)((q[c] * (255 - alpha) + rgb[c] * alpha + 127) / 255);
}

OCRDEF int ocr_painter_draw(ocr_ctx *ctx, const ocr_painter *p, ocr_image *img, float x, float y, float px, const uint8_t rgb[3],
                            const char *text, int *missing, int32_t *first_missing) {
    const char *fn = "ocr_painter_draw";
    size_t i = 0, n;
    int32_t cp;
    float pen = x;
    if (missing) *missing = 0;
    if (first_missing) *first_missing = 0;
    if (!p || !p->n_fonts || !img || !img->pixels || img->channels != 3 || !text || !rgb || !(px >= 1 && px <= 4096))
        return ocr_error(ctx, OCR_EINVAL, "%s: needs an open painter, an RGB image, text, a colour and a size in [1, 4096] px", fn);
    n = strlen(text);
    while (i < n) {
        int f, gx, gy, gw, gh, a, b;
        size_t at = i;
        if (!ocr_utf8_next(text, n, &i, &cp))
            return ocr_error(ctx, OCR_EFORMAT, "%s: the text is not UTF-8 at byte %zu (0x%02X)", fn, at, (unsigned char)text[at]);
        f = ocr_painter_font_of(p, cp);
        if (f < 0) {
            /* a box the reader can see, never a '?' that looks like a character */
            int x0 = (int)(pen + 0.1f * px), x1 = (int)(pen + 0.5f * px), y0 = (int)(y + 0.15f * px), y1 = (int)(y + 0.85f * px), k;
            for (k = x0; k <= x1; k++) { ocr__paint_blend(img, k, y0, rgb, 255); ocr__paint_blend(img, k, y1, rgb, 255); }
            for (k = y0; k <= y1; k++) { ocr__paint_blend(img, x0, k, rgb, 255); ocr__paint_blend(img, x1, k, rgb, 255); }
            if (missing && !(*missing)++ && first_missing) *first_missing = cp;
            else if (!missing && first_missing && !*first_missing) *first_missing = cp;
        } else {
            const ocr__paint_font *F = &p->fonts[f];
            float scale = px / (float)(F->ascent - F->descent);
            unsigned char *bmp = stbtt_GetCodepointBitmap(&F->info, scale, scale, cp, &gw, &gh, &gx, &gy);
            int base = (int)floorf(y + F->ascent * scale + 0.5f), left = (int)floorf(pen + 0.5f);
            if (bmp) {
                for (b = 0; b < gh; b++)
                    for (a = 0; a < gw; a++) ocr__paint_blend(img, left + gx + a, base + gy + b, rgb, bmp[(size_t)b * gw + a]);
                stbtt_FreeBitmap(bmp, NULL);
            }
        }
        pen += ocr__paint_advance(p, f, cp, px);
    }
    return OCR_OK;
}

#ifdef __cplusplus
}
#endif
#endif /* OCR_SYNTH_IMPLEMENTATION */
