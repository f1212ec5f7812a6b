/* ocr_data.h - images, ICDAR folders, fork-safe LMDB, versioned map cache, augmentation and batch loader.
   v0.1  MIT  (synthetic text scenes: ocr_synth.h)

   Do this in exactly one C or C++ file:
       #define OCR_DATA_IMPLEMENTATION        (OCR_IMPLEMENTATION turns on every module)
       #include "ocr_data.h"
   Link with -llmdb -lm -lpthread. Uses the system stb headers (libstb-dev: -I/usr/include/stb).
   Dependencies: ocr_tensor.h, ocr_geom.h.
*/
#ifndef OCR_DATA_H
#define OCR_DATA_H
#include "ocr_tensor.h"
#include "ocr_geom.h"
#ifdef __cplusplus
extern "C" {
#endif

/* ================================================================ [io] declarations: images, ICDAR, LMDB */

/* Caps on data from outside, checked before anything is allocated. */
#ifndef OCR_IMAGE_MAX_SIDE
#define OCR_IMAGE_MAX_SIDE 16384                  /* widest or tallest image accepted */
#endif
#ifndef OCR_IMAGE_MAX_PIXELS
#define OCR_IMAGE_MAX_PIXELS ((int64_t)1 << 26)   /* most pixels in one image (67 M) */
#endif
#ifndef OCR_IMAGE_MAX_BYTES
#define OCR_IMAGE_MAX_BYTES ((size_t)1 << 28)     /* largest encoded image (256 MiB) */
#endif
#define OCR_LABEL_MAX_BYTES ((size_t)1 << 24)     /* largest label record or ground-truth file */
#define OCR_COORD_MAX 1.0e6                       /* |coordinate| cap: keeps later float -> int conversions defined */

/* A 128-bit content hash with a fixed definition (bytes read as little-endian 64-bit words), the same on every
   platform and version, so a key computed today names the same bytes tomorrow. Not cryptographic. */
typedef struct { uint64_t lo, hi; } ocr_hash128;
typedef struct { uint64_t a, b, total; unsigned char tail[8]; int n_tail; } ocr_hasher;
OCRDEF void ocr_hasher_init(ocr_hasher *h, uint64_t seed);
OCRDEF void ocr_hasher_update(ocr_hasher *h, const void *data, size_t size);
OCRDEF void ocr_hasher_u64(ocr_hasher *h, uint64_t v);
OCRDEF void ocr_hasher_f64(ocr_hasher *h, double v);      /* exact bits: a changed setting always changes the hash */
OCRDEF void ocr_hasher_str(ocr_hasher *h, const char *s); /* length-prefixed, so ("ab","c") and ("a","bc") differ */
OCRDEF ocr_hash128 ocr_hasher_final(const ocr_hasher *h); /* the hasher may keep absorbing afterwards */
OCRDEF ocr_hash128 ocr_hash(const void *data, size_t size);
OCRDEF int ocr_hash_equal(ocr_hash128 a, ocr_hash128 b);
OCRDEF char *ocr_hash_hex(ocr_hash128 h, char out[33]);

/* An 8-bit image: rows top to bottom, channels interleaved (3 = RGB). Shared by every stage of the pipeline. */
typedef struct { uint8_t *pixels; int width, height, channels; } ocr_image;

/* One labelled sample: the image and its text polygons (owned; free with ocr_sample_free). */
typedef struct {
    ocr_image image;
    ocr_polygon *polys;
    int n_polys;
    char id[256];    /* file name or LMDB key, for messages */
    ocr_hash128 content_hash; /* hash of the stored image and label bytes (0 when unknown): the start of cache keys */
} ocr_sample;

OCRDEF int ocr_image_alloc(ocr_ctx *ctx, ocr_image *img, int width, int height, int channels);
OCRDEF void ocr_image_free(ocr_image *img);
OCRDEF void ocr_polygons_free(ocr_polygon *polys, int n);   /* frees points, text and the array */
OCRDEF void ocr_sample_free(ocr_sample *s);
/* Decodes JPEG, PNG or BMP (grey, RGB, RGBA -> RGB) with the system stb_image; corrupt data is an error. Before
   decoding, the file's structure is walked (JPEG markers up to end-of-image, PNG chunks with their CRCs up to IEND,
   BMP pixel array size), so a truncated or damaged file is an error, never a partly grey image. */
OCRDEF int ocr_image_decode(ocr_ctx *ctx, const void *bytes, size_t size, ocr_image *out);
/* Same checks, reads only the header: width and height (pixels stays NULL, channels 3). */
OCRDEF int ocr_image_probe(ocr_ctx *ctx, const void *bytes, size_t size, ocr_image *out);
OCRDEF int ocr_image_load(ocr_ctx *ctx, const char *path, ocr_image *out);
OCRDEF int ocr_image_encode_png(ocr_ctx *ctx, const ocr_image *img, unsigned char **out, size_t *out_size); /* OCR_FREE it */
OCRDEF int ocr_image_save_png(ocr_ctx *ctx, const char *path, const ocr_image *img);                      /* atomic */
/* Writes img into a CPU F32 tensor [C,H,W] (C = img->channels, H >= height, W >= width) as value/255, top-left,
   zero elsewhere. */
OCRDEF int ocr_image_to_chw(ocr_ctx *ctx, const ocr_image *img, ocr_tensor *chw);

/* Ground-truth text files, one text instance per line. UTF-8 with or without BOM, LF or CRLF, blank lines skipped.
   OCR_GT_ICDAR2015: x1,y1,...,x4,y4,transcription - the transcription is the rest of the line, commas included
                     ("..." quoted ones are unquoted);
   OCR_GT_POLYGON:   x1,y1,...,xn,yn,transcription with n >= 3 (Total-Text / CTW as converted by DB); the
                     transcription starts at the last field that leaves an even count of numbers before it.
   Transcription ### marks a "don't care" instance (ignore = 1). */
enum { OCR_GT_ICDAR2015 = 0, OCR_GT_POLYGON = 1 };
OCRDEF int ocr_gt_parse(ocr_ctx *ctx, const char *name, const char *text, size_t size, int format,
                        ocr_polygon **polys, int *n_polys);
/* A detection result file (what detect writes, what eval_dbnet reads): one polygon per line, x1,y1,...,xn,yn[,score]
   with n >= 3; an odd count of numbers means the last is the score (checked finite, not returned). UTF-8 BOM, LF or
   CRLF, blank lines skipped. Every field must be one number on its own line: an empty field (a trailing comma), a
   non-number or a coordinate outside +-OCR_COORD_MAX is an error naming the file (name) and the line. */
OCRDEF int ocr_result_parse(ocr_ctx *ctx, const char *name, const char *text, size_t size, ocr_polygon **polys, int *n_polys);
/* UTF-8 (labels, transcriptions, charsets): the next code point of s[*i .. n) (advancing *i), 0 at invalid or truncated UTF-8 (overlong forms,
   surrogates and values above U+10FFFF are invalid); a code point's UTF-8 (1-4 bytes, returns the count). */
OCRDEF int ocr_utf8_next(const char *s, size_t n, size_t *i, int32_t *cp);
OCRDEF int ocr_utf8_put(int32_t cp, char out[4]);
/* A detection label as JSON (PaddleOCR style): [{"points": [[x,y],...], "transcription": "..."}, ...]; at least 3
   finite points per instance, transcription optional, "###" or "ignore": true mark don't care. */
OCRDEF int ocr_label_parse_json(ocr_ctx *ctx, const char *name, const char *text, size_t size,
                                ocr_polygon **polys, int *n_polys);

/* ---- datasets: a count and "get sample i", the one interface the loader, converters and the trainer use ----
   get must be callable from several threads at once, each with its own ctx, and from a forked child. */
enum { OCR_SAMPLE_LABELS_ONLY = 1 }; /* get: polygons, id, hash and image size only; pixels stay NULL */
typedef struct ocr_dataset ocr_dataset;
struct ocr_dataset {
    int64_t count;
    char name[256];
    void *impl;
    int (*get)(ocr_dataset *ds, ocr_ctx *ctx, int64_t index, unsigned flags, ocr_sample *out);
    /* optional: the image exactly as stored (encoded), for converters; *bytes is freed with OCR_FREE */
    int (*get_encoded)(ocr_dataset *ds, ocr_ctx *ctx, int64_t index, unsigned char **bytes, size_t *size);
    void (*close)(ocr_dataset *ds);
};
/* Checks the index, then calls ds->get; messages name the dataset and the sample. */
OCRDEF int ocr_dataset_get(ocr_ctx *ctx, ocr_dataset *ds, int64_t index, unsigned flags, ocr_sample *out);
OCRDEF void ocr_dataset_close(ocr_dataset *ds);
/* An ICDAR-style folder pair: every .jpg/.jpeg/.png/.bmp in image_dir (sorted by name) with its ground truth in
   gt_dir, found as gt_<stem>.txt (ICDAR 2015), <name>.txt or <stem>.txt (DB's layouts). */
OCRDEF int ocr_dataset_open_icdar(ocr_ctx *ctx, ocr_dataset *ds, const char *image_dir, const char *gt_dir, int gt_format);
/* An LMDB in the standard layout: num-samples (ASCII decimal), image-%09d (encoded bytes) and label-%09d (JSON
   detection label, or plain UTF-8 text for recognition sets: one instance covering the image), 1-based keys.
   Fork-safe by construction: each process opens its own read-only environment (MDB_RDONLY | MDB_NOTLS |
   MDB_NORDAHEAD) on its first access; a process never uses or closes an environment another process opened;
   every get runs in its own read transaction; every record is validated and errors name the key. */
OCRDEF int ocr_dataset_open_lmdb(ocr_ctx *ctx, ocr_dataset *ds, const char *path);
/* Writes every sample of src (which needs get_encoded) into a new LMDB directory in the standard layout. */
typedef void (*ocr_progress_fn)(void *user, int64_t done, int64_t total);
OCRDEF int ocr_lmdb_write_dataset(ocr_ctx *ctx, const char *path, ocr_dataset *src, ocr_progress_fn progress, void *user);
/* The same as a recognition set (clovaai / PARSeq layout): each sample of src is a crop with one text instance, whose
   text becomes the plain UTF-8 label ("###" for an ignored one). Refused, naming the sample: another number of
   instances, an empty transcription, and a text the reader would read otherwise (a JSON detection label: "[..." or
   a JSON object; "###" not marked ignore). */
OCRDEF int ocr_lmdb_write_rec_dataset(ocr_ctx *ctx, const char *path, ocr_dataset *src, ocr_progress_fn progress, void *user);

/* ================================================================ [augment] declarations: augmentation, normalisation */

/* Geometry convention of this section: continuous pixel coordinates, pixel (i, j) covers [i, i+1) x [j, j+1), so a
   polygon drawn around a block of pixels follows it exactly through every transform below. */

/* ---- augmentation: the DBNet training recipe (flip, rotation, resize, EAST-style crop) ----
   Geometric functions resample bilinearly (edges extended inside the image, zero outside it) and move the
   polygons with the pixels. Random ones draw only from the rng they are given, so a loader that seeds it from
   (seed, epoch, index) gets the same sample whatever the thread. */
typedef struct {
    float flip_prob;              /* horizontal flip: 0.5 */
    float max_rotate_deg;         /* rotation uniform in [-max, max] about the centre, size kept, corners cut: 10 */
    float min_scale, max_scale;   /* one scale for both axes, uniform: 0.5, 3.0 */
    int crop_width, crop_height;  /* the crop is scaled to fit this, placed top-left, zero padded: 640, 640 */
    int crop_max_tries;           /* 10 */
    float crop_min_side_ratio;    /* a crop side is at least this fraction of the image side: 0.1 */
} ocr_augment_config;

OCRDEF ocr_augment_config ocr_augment_defaults(void);
/* The whole training chain in one resampling pass: flip, rotate, resize, random crop into crop_width x
   crop_height. Polygons entirely outside the placed crop are dropped. */
OCRDEF int ocr_augment_sample(ocr_ctx *ctx, ocr_rng *rng, const ocr_augment_config *cfg, ocr_sample *s);
/* The steps one at a time. */
OCRDEF int ocr_sample_flip(ocr_ctx *ctx, ocr_sample *s);                  /* horizontal */
OCRDEF int ocr_sample_rotate(ocr_ctx *ctx, ocr_sample *s, float degrees); /* counter-clockwise on screen, about the centre */
OCRDEF int ocr_sample_resize(ocr_ctx *ctx, ocr_sample *s, int width, int height);
/* Cuts rect (x, y, w, h), scales it to fit out_w x out_h keeping its aspect, places it top-left, pads with zeros
   and drops the polygons entirely outside the placed part. */
OCRDEF int ocr_sample_crop(ocr_ctx *ctx, ocr_sample *s, int x, int y, int w, int h, int out_w, int out_h);
/* EAST-style crop choice (DBNet RandomCropData): rect = {x, y, w, h} with sides in gaps between the care (not
   ignore) polygons, keeping at least one of them; the whole image when no try succeeds. */
OCRDEF int ocr_random_crop_rect(ocr_ctx *ctx, ocr_rng *rng, const ocr_polygon *polys, int n_polys, int width, int height,
                                int max_tries, float min_side_ratio, int rect[4]);
/* Any affine map: fwd takes input coordinates to output ones (x' = f0 x + f1 y + f2, y' = f3 x + f4 y + f5). The
   output is out_w x out_h; pixels at x >= fill_w or y >= fill_h are zero padding. Polygons are all kept. */
OCRDEF int ocr_sample_warp(ocr_ctx *ctx, ocr_sample *s, const double fwd[6], int out_w, int out_h, int fill_w, int fill_h);

/* ---- normalisation into the network input ---- */
typedef enum {
    OCR_NORM_DBNET = 0,   /* official DBNet: channels B, G, R; (v - [122.679, 116.669, 104.007]) / 255, no std */
    OCR_NORM_IMAGENET = 1 /* torchvision: channels R, G, B; (v / 255 - [0.485, 0.456, 0.406]) / [0.229, 0.224, 0.225] */
} ocr_norm_mode;
/* Writes an RGB (or grey, repeated) image into out: an F32 CPU tensor [3, H, W] or [1, 3, H, W]. */
OCRDEF int ocr_image_normalize(ocr_ctx *ctx, const ocr_image *img, ocr_norm_mode mode, ocr_tensor *out);

/* ---- the network input at test time ----
       int in_w, in_h;
       ocr_infer_input_size(&ctx, img.width, img.height, 736, 0, &in_w, &in_h);   // short side 736, as demo.py
       ocr_tensor_alloc(&ctx, &x, "input", OCR_F32, OCR_DEVICE_CPU, ocr_shape4(1, 3, in_h, in_w));
       ocr_image_network_input(&ctx, &img, OCR_NORM_DBNET, &x);                  // then ocr_dbnet_forward(..., 0, ...)
   The probability map then has the input's size: ocr_postprocess scales its boxes back to img's. */
/* The network input size of a width x height image as the official inference resizes it (DBNET_REFERENCE 4.4,
   demo.py): aspect kept, the short side scaled to short_side or, when long_side > 0, the long side to long_side; that
   side is rounded up to a multiple of 32 and the other follows, also rounded up (the network needs multiples of 32). */
OCRDEF int ocr_infer_input_size(ocr_ctx *ctx, int width, int height, int short_side, int long_side, int *in_w, int *in_h);
/* The input size of an image scaled by scale (each side rounded up to a multiple of 32, at least 32), the scale
   lowered when the long side would pass max_side: how train_dbnet validates synthetic scenes (1.4) and ocr_pipeline
   reads by default. */
OCRDEF int ocr_infer_input_size_scaled(ocr_ctx *ctx, int width, int height, double scale, int max_side, int *in_w, int *in_h);
/* What the model sees of img: img resized to out's H x W (bilinear, as cv2.resize and ocr_sample_resize; not
   resampled when the sizes match) and normalised by ocr_image_normalize into out, an F32 CPU tensor [3, H, W] or
   [1, 3, H, W]. */
OCRDEF int ocr_image_network_input(ocr_ctx *ctx, const ocr_image *img, ocr_norm_mode mode, ocr_tensor *out);

/* ================================================================ [cache] declarations */

/* A disk cache of per-sample tensors (decoded and resized images, target maps of samples that are not randomly
   augmented). An entry is one file <dir>/<2 hex>/<32 hex>.ocrc: magic, format version, the full key, the payload
   (a safetensors blob) and a 128-bit checksum of everything before it. The key hashes the sample's stored bytes
   and labels (ocr_sample.content_hash), every setting that affects the value and the format version, so a changed
   setting can never find a stale entry. A truncated or corrupt entry is detected, deleted, counted and reported as
   a miss, so the caller rebuilds it. Entries are written atomically (temp file, fsync, rename). Thread-safe. */
#define OCR_CACHE_FORMAT_VERSION 1
typedef struct { int64_t hits, misses, corrupt, writes; } ocr_cache_stats;
typedef struct {
    char dir[2048];
    void *lock;             /* pthread mutex: counters, and writes of the same key */
    ocr_cache_stats stats;  /* read with ocr_cache_get_stats */
} ocr_cache;
OCRDEF int ocr_cache_open(ocr_ctx *ctx, ocr_cache *c, const char *dir);   /* creates dir if needed */
OCRDEF void ocr_cache_close(ocr_cache *c);
/* The key of one value: what (a name for the kind of value and its code version, e.g. "dbnet-targets-v1"), the
   sample's content hash and a hash of every setting that affects the value. */
OCRDEF ocr_hash128 ocr_cache_key(const char *what, ocr_hash128 content, ocr_hash128 settings);
/* Hit: OCR_OK and *entry holds the validated tensors (close it with ocr_safetensors_close). Miss: OCR_ENOTFOUND
   (a corrupt entry is also a miss, after a warning through the ctx log). Other codes: I/O failures. */
OCRDEF int ocr_cache_get(ocr_ctx *ctx, ocr_cache *c, ocr_hash128 key, ocr_safetensors *entry);
OCRDEF int ocr_cache_put(ocr_ctx *ctx, ocr_cache *c, ocr_hash128 key, const ocr_tensor *const *tensors, int n);
/* Deletes an entry whose contents the caller found unusable (counted as corrupt). */
OCRDEF void ocr_cache_invalidate(ocr_ctx *ctx, ocr_cache *c, ocr_hash128 key);
OCRDEF ocr_cache_stats ocr_cache_get_stats(ocr_cache *c);

/* ================================================================ [loader] declarations */

/* Batches for training and evaluation. N worker threads prefetch whole batches into a bounded ring; batch k of an
   epoch is always made of the same samples (positions [k*B, (k+1)*B) of the epoch's permutation) and sample i is
   transformed with an RNG seeded from (seed, epoch, i) only, so every batch is bit-identical whatever the number of
   workers. A sample that fails to load or transform is left out of its batch and reported once (ctx log, warning,
   on the consumer's thread). Batches come out in order; the caller releases each when done with it. */
#define OCR_LOADER_MAX_FIELDS 8

/* Turns one sample into its per-sample tensors: fields[f] is a zeroed CPU F32 view of shape field_shapes[f] into
   row b of batch tensor f. ctx is the worker's own context; rng depends only on (seed, epoch, index). The transform
   may modify or replace sample->polys (augmentation); the batch keeps them. */
typedef int (*ocr_transform_fn)(ocr_ctx *ctx, void *user, ocr_sample *sample, int64_t index, ocr_rng *rng, ocr_tensor *fields);

typedef struct {
    int batch_size;            /* default 8 */
    int n_workers;             /* worker threads, default 2 */
    int prefetch;              /* batches being made or waiting ahead of the consumer, default 2 * n_workers */
    int worker_nice;           /* 0..19 added to the workers' nice value (default 0). A training loop whose compute
                                  threads use every core should set it: a worker that takes a core mid-op delays the
                                  op's slowest thread and with it the whole op; a niced one fills the cores' idle gaps */
    int shuffle;               /* a new permutation every epoch (default 1) */
    int drop_last;             /* leave out a last partial batch (default 0) */
    uint64_t seed;
    int n_fields;
    const char *field_names[OCR_LOADER_MAX_FIELDS];
    ocr_shape field_shapes[OCR_LOADER_MAX_FIELDS]; /* per sample, 1 to 3 dims, e.g. [3,640,640] */
    ocr_transform_fn transform; /* NULL: ocr_image_to_chw into field 0, which must be [3,H,W] */
    void *transform_user;
    /* Optional, only for transforms that ignore rng: each sample's fields and polygons are cached under
       ocr_cache_key("ocr-loader", content_hash, hash(cache_settings, field names and shapes)). */
    ocr_cache *cache;
    ocr_hash128 cache_settings; /* hash of every setting the transform's output depends on, and its version */
} ocr_loader_config;

typedef struct {
    int size;                   /* samples in this batch (failed ones are left out) */
    int64_t epoch, number;      /* number: position of the batch in its epoch */
    ocr_tensor fields[OCR_LOADER_MAX_FIELDS]; /* [size, field shape...], CPU F32, named as configured */
    int64_t *indices;           /* dataset index of each sample */
    ocr_polygon **polys;        /* each sample's polygons after the transform */
    int *n_polys;
} ocr_batch;

typedef struct {
    int64_t epoch, batches_total, batches_done;   /* of the current epoch */
    int64_t samples_done, samples_failed;         /* since creation */
    int64_t cache_hits, cache_misses;
    double wait_seconds;                          /* the caller's time in ocr_loader_next waiting for a batch
                                                     not ready yet, since creation: a trainer short of data */
} ocr_loader_progress;

typedef struct ocr_loader ocr_loader;
OCRDEF ocr_loader_config ocr_loader_config_default(void);
OCRDEF int ocr_loader_create(ocr_ctx *ctx, ocr_loader **out, ocr_dataset *ds, const ocr_loader_config *cfg);
/* Starts (or restarts, dropping what is in flight) an epoch. */
OCRDEF int ocr_loader_start_epoch(ocr_ctx *ctx, ocr_loader *L, int64_t epoch);
/* Same, starting at batch first_batch of the epoch: batches depend only on (seed, epoch, number), so a resumed run
   continues with exactly the batches the interrupted one would have used. */
OCRDEF int ocr_loader_start_epoch_at(ocr_ctx *ctx, ocr_loader *L, int64_t epoch, int64_t first_batch);
/* The next batch of the epoch, waiting for it if needed; *batch is NULL at the end of the epoch. */
OCRDEF int ocr_loader_next(ocr_ctx *ctx, ocr_loader *L, ocr_batch **batch);
OCRDEF void ocr_loader_release(ocr_loader *L, ocr_batch *batch);
OCRDEF ocr_loader_progress ocr_loader_get_progress(ocr_loader *L);
/* Stops the workers (they finish at most the sample they are on) and frees everything, also mid-epoch. */
OCRDEF void ocr_loader_free(ocr_loader *L);

#ifdef __cplusplus
}
#endif
#endif /* OCR_DATA_H */

#if defined(OCR_IMPLEMENTATION) && !defined(OCR_NO_IMPLEMENTATION) && !defined(OCR_DATA_IMPLEMENTATION)
#define OCR_DATA_IMPLEMENTATION
#endif
#if defined(OCR_DATA_IMPLEMENTATION) && !defined(OCR__DATA_IMPLEMENTED)
#define OCR__DATA_IMPLEMENTED
#ifdef __cplusplus
extern "C" {
#endif

/* ================================================================ [io] implementation */

#ifdef __cplusplus
}
#endif
#include <stdio.h>
#include <string.h>
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <sched.h>
#include <unistd.h>
#include <dirent.h>
#include <sys/types.h>
#include <sys/stat.h>
#include <sys/resource.h>
#include <lmdb.h>
/* The system stb headers (libstb-dev), compiled here as static functions so they never clash with a copy the
   user links; only the decoders ocr-c accepts are built. OCR_DATA_NO_STB_IMPLEMENTATION uses the user's copy. */
#ifndef OCR_DATA_NO_STB_IMPLEMENTATION
#if defined(STBI_INCLUDE_STB_IMAGE_H) || defined(INCLUDE_STB_IMAGE_WRITE_H)
#error "ocr_data.h: stb_image.h or stb_image_write.h was included before the implementation; define OCR_DATA_NO_STB_IMPLEMENTATION and build stb yourself"
#endif
#define STB_IMAGE_STATIC
#define STBI_NO_HDR
#define STBI_NO_PNM
#define STBI_NO_PSD
#define STBI_NO_PIC
#define STBI_NO_TGA
#define STBI_NO_STDIO
#define STBI_MALLOC(sz) OCR_MALLOC(sz)
#define STBI_REALLOC(p, sz) OCR_REALLOC(p, sz)
#define STBI_FREE(p) OCR_FREE(p)
#define STB_IMAGE_WRITE_STATIC
#define STBIW_MALLOC(sz) OCR_MALLOC(sz)
#define STBIW_REALLOC(p, sz) OCR_REALLOC(p, sz)
#define STBIW_FREE(p) OCR_FREE(p)
#if defined(__GNUC__) || defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wunused-function"
#pragma GCC diagnostic ignored "-Wunused-parameter"
#pragma GCC diagnostic ignored "-Wunused-but-set-variable"
#pragma GCC diagnostic ignored "-Wsign-compare"
#pragma GCC diagnostic ignored "-Wshadow"
#pragma GCC diagnostic ignored "-Wpedantic"
#pragma GCC diagnostic ignored "-Wmissing-field-initializers"
#pragma GCC diagnostic ignored "-Wimplicit-fallthrough"
#pragma GCC diagnostic ignored "-Wtype-limits"
#endif
/* stb_image 2.27 declares stbi_set_unpremultiply_on_load_thread but defines it under another name, and gcc
   reports a static function declared and never defined whatever the pragmas say: the declarations are read
   once with that name pointing at a defined function of the same type, then the implementation. Decoders other
   than JPEG, PNG, BMP (and GIF, never reached: ocr__d_image_header admits only the first three) are left out. */
#define stbi_set_unpremultiply_on_load_thread stbi_set_flip_vertically_on_load_thread
#include <stb_image.h>
#undef stbi_set_unpremultiply_on_load_thread
#define STB_IMAGE_IMPLEMENTATION
#include <stb_image.h>
#define STB_IMAGE_WRITE_IMPLEMENTATION
#include <stb_image_write.h>
#if defined(__GNUC__) || defined(__clang__)
#pragma GCC diagnostic pop
#endif
#else
#include <stb_image.h>
#include <stb_image_write.h>
#endif
#ifdef __cplusplus
extern "C" {
#endif

/* ---- content hash: two 64-bit lanes fed 8-byte little-endian words, finished with the splitmix64 mixer */

#define OCR__HK1 0x9E3779B97F4A7C15ull
#define OCR__HK2 0xC2B2AE3D27D4EB4Full
#define OCR__HK3 0x165667B19E3779F9ull

static uint64_t ocr__d_hrotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

static uint64_t ocr__d_hmix(uint64_t z) {
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

static void ocr__d_hasher_word(ocr_hasher *h, uint64_t w) {
    h->a = ocr__d_hrotl(h->a ^ (w * OCR__HK1), 31) * OCR__HK2;
    h->b = ocr__d_hrotl(h->b + (w ^ h->a), 27) * OCR__HK3 + h->a;
}

static uint64_t ocr__d_le64(const unsigned char *p) {
    uint64_t w = 0;
    int i;
    for (i = 7; i >= 0; i--) w = (w << 8) | p[i];
    return w;
}

OCRDEF void ocr_hasher_init(ocr_hasher *h, uint64_t seed) {
    memset(h, 0, sizeof *h);
    h->a = seed ^ OCR__HK3;
    h->b = ocr__d_hmix(seed + OCR__HK1);
}

OCRDEF void ocr_hasher_update(ocr_hasher *h, const void *data, size_t size) {
    const unsigned char *p = (const unsigned char *)data;
    h->total += size;
    while (size && h->n_tail) {
        h->tail[h->n_tail++] = *p++;
        size--;
        if (h->n_tail == 8) { ocr__d_hasher_word(h, ocr__d_le64(h->tail)); h->n_tail = 0; }
    }
    for (; size >= 8; p += 8, size -= 8) ocr__d_hasher_word(h, ocr__d_le64(p));
    while (size--) h->tail[h->n_tail++] = *p++;
}

OCRDEF void ocr_hasher_u64(ocr_hasher *h, uint64_t v) {
    unsigned char b[8];
    int i;
    for (i = 0; i < 8; i++) b[i] = (unsigned char)(v >> (8 * i));
    ocr_hasher_update(h, b, 8);
}

OCRDEF void ocr_hasher_f64(ocr_hasher *h, double v) {
    uint64_t bits;
    memcpy(&bits, &v, 8);
    ocr_hasher_u64(h, bits);
}

OCRDEF void ocr_hasher_str(ocr_hasher *h, const char *s) {
    size_t n = s ? strlen(s) : 0;
    ocr_hasher_u64(h, (uint64_t)n);
    ocr_hasher_update(h, s, n);
}

OCRDEF ocr_hash128 ocr_hasher_final(const ocr_hasher *h) {
    ocr_hasher t = *h;
    ocr_hash128 r;
    if (t.n_tail) {
        memset(t.tail + t.n_tail, 0, (size_t)(8 - t.n_tail));
        ocr__d_hasher_word(&t, ocr__d_le64(t.tail));
    }
    /* The length separates inputs that differ only by trailing zero bytes. */
    t.a ^= t.total;
    t.b ^= t.total * OCR__HK1;
    r.lo = ocr__d_hmix(t.a + t.b);
    r.hi = ocr__d_hmix(t.b ^ r.lo);
    return r;
}

OCRDEF ocr_hash128 ocr_hash(const void *data, size_t size) {
    ocr_hasher h;
    ocr_hasher_init(&h, 0);
    ocr_hasher_update(&h, data, size);
    return ocr_hasher_final(&h);
}

OCRDEF int ocr_hash_equal(ocr_hash128 a, ocr_hash128 b) { return a.lo == b.lo && a.hi == b.hi; }

OCRDEF char *ocr_hash_hex(ocr_hash128 h, char out[33]) {
    snprintf(out, 33, "%016llx%016llx", (unsigned long long)h.hi, (unsigned long long)h.lo);
    return out;
}

/* Re-records the current message behind a prefix naming the sample or key. */
static int ocr__d_error_prefix(ocr_ctx *ctx, int rc, const char *prefix) {
    char msg[OCR_ERROR_MAX];
    snprintf(msg, sizeof msg, "%s", ctx->last_error);
    return ocr_error(ctx, rc, "%s: %s", prefix, msg);
}

static int ocr__d_utf8_valid(const unsigned char *p, size_t n, size_t *bad_at) {
    size_t i = 0;
    while (i < n) {
        unsigned c = p[i];
        size_t len, k;
        uint32_t cp;
        if (c < 0x80) { if (!c) break; i++; continue; }
        if (c >= 0xc2 && c <= 0xdf) { len = 2; cp = c & 0x1f; }
        else if (c >= 0xe0 && c <= 0xef) { len = 3; cp = c & 0x0f; }
        else if (c >= 0xf0 && c <= 0xf4) { len = 4; cp = c & 0x07; }
        else break;
        if (len > n - i) break;
        for (k = 1; k < len && (p[i + k] & 0xc0) == 0x80; k++) cp = (cp << 6) | (p[i + k] & 0x3f);
        if (k < len || (len == 3 && cp < 0x800) || (len == 4 && (cp < 0x10000 || cp > 0x10ffff)) || (cp >= 0xd800 && cp <= 0xdfff))
            break;
        i += len;
    }
    if (bad_at) *bad_at = i;
    return i == n;
}

static char *ocr__d_strndup(const char *s, size_t n) {
    char *d = (char *)OCR_MALLOC(n + 1);
    if (!d) return NULL;
    memcpy(d, s, n);
    d[n] = 0;
    return d;
}

/* ---- images */

OCRDEF int ocr_image_alloc(ocr_ctx *ctx, ocr_image *img, int width, int height, int channels) {
    size_t bytes;
    memset(img, 0, sizeof *img);
    if (width < 1 || height < 1 || width > OCR_IMAGE_MAX_SIDE || height > OCR_IMAGE_MAX_SIDE)
        return ocr_error(ctx, OCR_ERANGE, "ocr_image_alloc: %dx%d image; each side must be in 1..%d", width, height, OCR_IMAGE_MAX_SIDE);
    if ((int64_t)width * height > OCR_IMAGE_MAX_PIXELS)
        return ocr_error(ctx, OCR_ERANGE, "ocr_image_alloc: %dx%d image has more than %lld pixels", width, height,
                         (long long)OCR_IMAGE_MAX_PIXELS);
    if (channels < 1 || channels > 4) return ocr_error(ctx, OCR_EINVAL, "ocr_image_alloc: %d channels; 1..4 allowed", channels);
    bytes = (size_t)width * (size_t)height * (size_t)channels;
    img->pixels = (uint8_t *)OCR_MALLOC(bytes);
    if (!img->pixels) return ocr_error(ctx, OCR_ENOMEM, "ocr_image_alloc: cannot allocate %zu bytes for a %dx%dx%d image", bytes, width, height, channels);
    memset(img->pixels, 0, bytes);
    img->width = width;
    img->height = height;
    img->channels = channels;
    return OCR_OK;
}

OCRDEF void ocr_image_free(ocr_image *img) {
    if (!img) return;
    OCR_FREE(img->pixels);
    memset(img, 0, sizeof *img);
}

OCRDEF void ocr_polygons_free(ocr_polygon *polys, int n) {
    int i;
    if (!polys) return;
    for (i = 0; i < n; i++) { OCR_FREE(polys[i].points); OCR_FREE(polys[i].text); }
    OCR_FREE(polys);
}

OCRDEF void ocr_sample_free(ocr_sample *s) {
    if (!s) return;
    ocr_image_free(&s->image);
    ocr_polygons_free(s->polys, s->n_polys);
    s->polys = NULL;
    s->n_polys = 0;
}

static uint32_t ocr__d_be32(const unsigned char *p) { return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3]; }
static uint32_t ocr__d_rd_le32(const unsigned char *p) { return (uint32_t)p[3] << 24 | (uint32_t)p[2] << 16 | (uint32_t)p[1] << 8 | p[0]; }

/* CRC-32 (IEEE, reflected 0xEDB88320) as PNG chunks carry it; bitwise, chunks are small next to decoding. */
static uint32_t ocr__d_crc32(uint32_t crc, const unsigned char *p, size_t n) {
    size_t i;
    int k;
    crc = ~crc;
    for (i = 0; i < n; i++) {
        crc ^= p[i];
        for (k = 0; k < 8; k++) crc = (crc >> 1) ^ (0xEDB88320u & (0u - (crc & 1u)));
    }
    return ~crc;
}

/* JPEG: SOI, then marker segments; after each start-of-scan the entropy-coded data runs to the next marker that is
   not a stuffed 0xFF00 or a restart marker; the file must reach EOI. Every table a scan uses must be defined before
   it: stb_image 2.27 does not clear its decoder state and would decode with whatever memory an undefined table
   holds (different pixels from run to run, or an assert()). */
static const char *ocr__d_jpeg_check(const unsigned char *p, size_t n) {
    size_t pos = 2;
    unsigned huff = 0, quant = 0;           /* bit class*4+id per Huffman table defined, bit id per quantization table */
    unsigned char comp_id[4], comp_tq[4];   /* the frame's components and their quantization tables */
    int n_comp = 0;
    for (;;) {
        unsigned m;
        size_t len;
        if (pos >= n) return "truncated (no end-of-image marker)";
        if (p[pos] != 0xFF) return "corrupt (expected a marker)";
        while (pos < n && p[pos] == 0xFF) pos++;
        if (pos >= n) return "truncated (no end-of-image marker)";
        m = p[pos++];
        if (m == 0xD9) return NULL;
        if (m == 0x01 || (m >= 0xD0 && m <= 0xD7)) continue;
        if (m == 0x00 || m == 0xD8) return "corrupt (unexpected marker)";
        if (n - pos < 2) return "truncated (inside a marker segment)";
        len = (size_t)p[pos] << 8 | p[pos + 1];
        if (len < 2) return "corrupt (marker segment length below 2)";
        if (len > n - pos) return "truncated (inside a marker segment)";
        if (m == 0xC4) {
            /* Huffman tables: stb_image 2.27 indexes a 257-entry array with the code count unchecked. */
            size_t t = pos + 2, end = pos + len;
            while (t < end) {
                size_t codes = 0;
                int i;
                if (p[t] >> 4 > 1 || (p[t] & 15) > 3 || end - t < 17) return "corrupt (bad Huffman table header)";
                for (i = 1; i <= 16; i++) codes += p[t + i];
                if (codes > 256 || codes > end - t - 17) return "corrupt (bad Huffman table size)";
                huff |= 1u << ((p[t] >> 4) * 4 + (p[t] & 15));
                t += 17 + codes;
            }
        }
        if (m == 0xDB) {
            size_t t = pos + 2, end = pos + len;
            while (t < end) {
                size_t size = (p[t] >> 4) ? 129 : 65;
                if (p[t] >> 4 > 1 || (p[t] & 15) > 3 || end - t < size) return "corrupt (bad quantization table)";
                quant |= 1u << (p[t] & 15);
                t += size;
            }
        }
        if (m == 0xC0 || m == 0xC1 || m == 0xC2) {
            int i;
            if (len < 8 || p[pos + 7] < 1 || p[pos + 7] > 4 || len < 8 + 3 * (size_t)p[pos + 7]) return "corrupt (bad frame header)";
            n_comp = p[pos + 7];
            for (i = 0; i < n_comp; i++) { comp_id[i] = p[pos + 8 + 3 * i]; comp_tq[i] = p[pos + 10 + 3 * i]; }
        }
        if (m == 0xDA) {
            /* DC table: first DC scans (Ss = 0, Ah = 0, baseline included); AC table: scans reaching past Ss = 0 */
            size_t ns = len >= 3 ? p[pos + 2] : 0, i;
            unsigned ss, se, ah;
            int c;
            if (ns < 1 || len < 6 + 2 * ns) return "corrupt (bad scan header)";
            ss = p[pos + 3 + 2 * ns]; se = p[pos + 4 + 2 * ns]; ah = p[pos + 5 + 2 * ns] >> 4;
            for (i = 0; i < ns; i++) {
                unsigned id = p[pos + 3 + 2 * i], td = p[pos + 4 + 2 * i] >> 4, ta = p[pos + 4 + 2 * i] & 15;
                for (c = 0; c < n_comp && comp_id[c] != id; c++) {}
                if (c == n_comp) return "corrupt (scan of a component the frame does not have)";
                if (comp_tq[c] > 3 || !(quant >> comp_tq[c] & 1)) return "corrupt (scan before its quantization table)";
                if (ss == 0 && ah == 0 && (td > 3 || !(huff >> td & 1))) return "corrupt (scan uses an undefined Huffman table)";
                if (se > 0 && (ta > 3 || !(huff >> (4 + ta) & 1))) return "corrupt (scan uses an undefined Huffman table)";
            }
        }
        pos += len;
        if (m != 0xDA) continue;
        for (;;) {
            if (pos + 1 >= n) return "truncated (inside the entropy-coded data)";
            if (p[pos] == 0xFF && p[pos + 1] != 0x00 && p[pos + 1] != 0xFF && !(p[pos + 1] >= 0xD0 && p[pos + 1] <= 0xD7)) break;
            pos++;
        }
    }
}

/* PNG: every chunk complete with a correct CRC, up to IEND. */
static const char *ocr__d_png_check(const unsigned char *p, size_t n) {
    size_t pos = 8;
    for (;;) {
        uint32_t len;
        if (n - pos < 12) return "truncated (no IEND chunk)";
        len = ocr__d_be32(p + pos);
        if (len > 0x7fffffffu) return "corrupt (chunk length above 2^31)";
        if ((size_t)len > n - pos - 12) return "truncated (inside a chunk)";
        if (ocr__d_crc32(0, p + pos + 4, (size_t)len + 4) != ocr__d_be32(p + pos + 8 + len)) return "corrupt (chunk CRC mismatch)";
        if (memcmp(p + pos + 4, "IEND", 4) == 0) return NULL;
        pos += 12 + (size_t)len;
    }
}

/* BMP: the uncompressed pixel array must fit in the file (stb would read zeros past the end). */
static const char *ocr__d_bmp_check(const unsigned char *p, size_t n) {
    uint32_t off, hsize, comp = 0, bpp;
    int64_t w, h;
    if (n < 26) return "truncated (header)";
    off = ocr__d_rd_le32(p + 10);
    hsize = ocr__d_rd_le32(p + 14);
    if (hsize == 12) {
        w = p[18] | p[19] << 8; h = p[20] | p[21] << 8; bpp = (uint32_t)(p[24] | p[25] << 8);
    } else {
        if (hsize < 40 || n < 34) return "truncated or unknown header";
        w = (int32_t)ocr__d_rd_le32(p + 18); h = (int32_t)ocr__d_rd_le32(p + 22);
        bpp = (uint32_t)(p[28] | p[29] << 8); comp = ocr__d_rd_le32(p + 30);
    }
    if (h < 0) h = -h;
    if (w <= 0 || h <= 0 || w > OCR_IMAGE_MAX_SIDE || h > OCR_IMAGE_MAX_SIDE) return NULL; /* the size checks report it */
    if ((comp == 0 || comp == 3) && bpp && bpp <= 32) {
        uint64_t row = ((uint64_t)w * bpp + 31) / 32 * 4;
        if ((uint64_t)off + row * (uint64_t)h > (uint64_t)n) return "truncated (pixel array past the end of the file)";
    }
    return NULL;
}

/* Common front of decode and probe: format, structure and size checks. */
static int ocr__d_image_header(ocr_ctx *ctx, const char *fn, const unsigned char *p, size_t size, int *w, int *h) {
    const char *why = NULL, *fmt;
    int comp;
    if (!p && size) return ocr_error(ctx, OCR_EINVAL, "%s: NULL data", fn);
    if (size > OCR_IMAGE_MAX_BYTES || size > (size_t)INT_MAX)
        return ocr_error(ctx, OCR_EOVERFLOW, "%s: %zu bytes is above the %zu-byte cap for an encoded image", fn, size, (size_t)OCR_IMAGE_MAX_BYTES);
    if (size >= 3 && p[0] == 0xFF && p[1] == 0xD8 && p[2] == 0xFF) { fmt = "JPEG"; why = ocr__d_jpeg_check(p, size); }
    else if (size >= 8 && memcmp(p, "\x89PNG\r\n\x1a\n", 8) == 0) { fmt = "PNG"; why = ocr__d_png_check(p, size); }
    else if (size >= 2 && p[0] == 'B' && p[1] == 'M') { fmt = "BMP"; why = ocr__d_bmp_check(p, size); }
    else if (size == 0) return ocr_error(ctx, OCR_EFORMAT, "%s: empty image data", fn);
    else return ocr_error(ctx, OCR_EUNSUPPORTED, "%s: not a JPEG, PNG or BMP image (first bytes %02x %02x %02x %02x)", fn,
                          p[0], size > 1 ? p[1] : 0, size > 2 ? p[2] : 0, size > 3 ? p[3] : 0);
    if (why) return ocr_error(ctx, OCR_EFORMAT, "%s: %s data of %zu bytes is %s", fn, fmt, size, why);
    if (!stbi_info_from_memory(p, (int)size, w, h, &comp))
        return ocr_error(ctx, OCR_EFORMAT, "%s: %s header rejected by stb_image: %s", fn, fmt, stbi_failure_reason());
    /* stb_image's info reports a top-down BMP's height as stored, negative; its decoder handles the flip */
    if (fmt[0] == 'B' && *h < 0 && *h > -OCR_IMAGE_MAX_SIDE - 1) *h = -*h;
    if (*w < 1 || *h < 1 || *w > OCR_IMAGE_MAX_SIDE || *h > OCR_IMAGE_MAX_SIDE || (int64_t)*w * *h > OCR_IMAGE_MAX_PIXELS)
        return ocr_error(ctx, OCR_ERANGE, "%s: %s image of %dx%d is outside the caps (side 1..%d, at most %lld pixels)", fn, fmt, *w, *h,
                         OCR_IMAGE_MAX_SIDE, (long long)OCR_IMAGE_MAX_PIXELS);
    return OCR_OK;
}

OCRDEF int ocr_image_probe(ocr_ctx *ctx, const void *bytes, size_t size, ocr_image *out) {
    int w, h, rc;
    memset(out, 0, sizeof *out);
    if ((rc = ocr__d_image_header(ctx, "ocr_image_probe", (const unsigned char *)bytes, size, &w, &h))) return rc;
    out->width = w;
    out->height = h;
    out->channels = 3;
    return OCR_OK;
}

OCRDEF int ocr_image_decode(ocr_ctx *ctx, const void *bytes, size_t size, ocr_image *out) {
    const char *fn = "ocr_image_decode";
    int w, h, comp, rc;
    unsigned char *px;
    memset(out, 0, sizeof *out);
    if ((rc = ocr__d_image_header(ctx, fn, (const unsigned char *)bytes, size, &w, &h))) return rc;
    px = stbi_load_from_memory((const unsigned char *)bytes, (int)size, &w, &h, &comp, 3);
    if (!px) return ocr_error(ctx, OCR_EFORMAT, "%s: stb_image failed on %zu bytes: %s", fn, size, stbi_failure_reason());
#ifdef OCR_DATA_NO_STB_IMPLEMENTATION
    /* The user's stb allocates with its own allocator: copy into ours. */
    if ((rc = ocr_image_alloc(ctx, out, w, h, 3))) { stbi_image_free(px); return rc; }
    memcpy(out->pixels, px, (size_t)w * (size_t)h * 3);
    stbi_image_free(px);
#else
    out->pixels = px;
    out->width = w;
    out->height = h;
    out->channels = 3;
#endif
    return OCR_OK;
}

OCRDEF int ocr_image_load(ocr_ctx *ctx, const char *path, ocr_image *out) {
    unsigned char *bytes;
    size_t size;
    int rc;
    memset(out, 0, sizeof *out);
    if ((rc = ocr_read_file(ctx, path, OCR_IMAGE_MAX_BYTES, &bytes, &size))) return rc;
    rc = ocr_image_decode(ctx, bytes, size, out);
    OCR_FREE(bytes);
    if (rc) {
        char prefix[4200];
        snprintf(prefix, sizeof prefix, "ocr_image_load: '%s'", path);
        return ocr__d_error_prefix(ctx, rc, prefix);
    }
    return OCR_OK;
}

static int ocr__d_image_check(ocr_ctx *ctx, const char *fn, const ocr_image *img) {
    if (!img || !img->pixels) return ocr_error(ctx, OCR_EINVAL, "%s: image is NULL or has no pixels", fn);
    if (img->width < 1 || img->height < 1 || img->width > OCR_IMAGE_MAX_SIDE || img->height > OCR_IMAGE_MAX_SIDE ||
        img->channels < 1 || img->channels > 4)
        return ocr_error(ctx, OCR_EINVAL, "%s: image is %dx%d with %d channels (sides 1..%d, channels 1..4)", fn, img->width,
                         img->height, img->channels, OCR_IMAGE_MAX_SIDE);
    return OCR_OK;
}

typedef struct { unsigned char *data; size_t size, cap; int failed; } ocr__d_membuf;

static void ocr__d_membuf_write(void *user, void *data, int size) {
    ocr__d_membuf *m = (ocr__d_membuf *)user;
    size_t need;
    if (m->failed || size <= 0) return;
    if (!ocr_size_add(m->size, (size_t)size, &need)) { m->failed = 1; return; }
    if (need > m->cap) {
        size_t cap = m->cap ? m->cap : 4096;
        unsigned char *d;
        while (cap < need) cap *= 2;
        d = (unsigned char *)OCR_REALLOC(m->data, cap);
        if (!d) { m->failed = 1; return; }
        m->data = d;
        m->cap = cap;
    }
    memcpy(m->data + m->size, data, (size_t)size);
    m->size = need;
}

OCRDEF int ocr_image_encode_png(ocr_ctx *ctx, const ocr_image *img, unsigned char **out, size_t *out_size) {
    ocr__d_membuf m;
    int rc;
    *out = NULL;
    *out_size = 0;
    if ((rc = ocr__d_image_check(ctx, "ocr_image_encode_png", img))) return rc;
    memset(&m, 0, sizeof m);
    if (!stbi_write_png_to_func(ocr__d_membuf_write, &m, img->width, img->height, img->channels, img->pixels,
                                img->width * img->channels) || m.failed) {
        OCR_FREE(m.data);
        return ocr_error(ctx, OCR_ENOMEM, "ocr_image_encode_png: stb_image_write failed on a %dx%dx%d image (out of memory)",
                         img->width, img->height, img->channels);
    }
    *out = m.data;
    *out_size = m.size;
    return OCR_OK;
}

OCRDEF int ocr_image_save_png(ocr_ctx *ctx, const char *path, const ocr_image *img) {
    unsigned char *png;
    size_t size;
    int rc = ocr_image_encode_png(ctx, img, &png, &size);
    if (rc) return rc;
    rc = ocr_write_file_atomic(ctx, path, png, size);
    OCR_FREE(png);
    return rc;
}

OCRDEF int ocr_image_to_chw(ocr_ctx *ctx, const ocr_image *img, ocr_tensor *chw) {
    const char *fn = "ocr_image_to_chw";
    float *dst;
    int64_t H, W;
    int c, y, x, rc;
    if ((rc = ocr__d_image_check(ctx, fn, img)) || (rc = ocr_check_dtype(ctx, fn, chw, OCR_F32)) ||
        (rc = ocr_check_device(ctx, fn, chw, OCR_DEVICE_CPU)))
        return rc;
    if (chw->shape.ndim != 3 || chw->shape.dim[0] != img->channels || chw->shape.dim[1] < img->height || chw->shape.dim[2] < img->width) {
        char d[200];
        return ocr_error(ctx, OCR_ESHAPE, "%s: tensor %s cannot hold a %dx%d image with %d channels (needs [%d, >=%d, >=%d])", fn,
                         ocr_tensor_describe(chw, d, sizeof d), img->width, img->height, img->channels, img->channels, img->height, img->width);
    }
    H = chw->shape.dim[1];
    W = chw->shape.dim[2];
    dst = (float *)chw->data;
    memset(dst, 0, ocr_tensor_bytes(chw));
    for (c = 0; c < img->channels; c++)
        for (y = 0; y < img->height; y++) {
            const uint8_t *src = img->pixels + (size_t)y * (size_t)img->width * (size_t)img->channels + c;
            float *row = dst + ((int64_t)c * H + y) * W;
            for (x = 0; x < img->width; x++) row[x] = (float)src[(size_t)x * (size_t)img->channels] * (1.0f / 255.0f);
        }
    return OCR_OK;
}

/* ---- ground truth and labels */

/* Growable polygon list used by the parsers. */
typedef struct { ocr_polygon *items; int n, cap; } ocr__d_polys;

static int ocr__d_polys_push(ocr__d_polys *L, const double *xy, int n_points, const char *text, size_t text_len, int ignore) {
    ocr_polygon *p;
    int i;
    if (L->n == L->cap) {
        int cap = L->cap ? L->cap * 2 : 8;
        ocr_polygon *items = (ocr_polygon *)OCR_REALLOC(L->items, (size_t)cap * sizeof *items);
        if (!items) return 0;
        L->items = items;
        L->cap = cap;
    }
    p = &L->items[L->n];
    memset(p, 0, sizeof *p);
    p->points = (ocr_point *)OCR_MALLOC((size_t)n_points * sizeof(ocr_point));
    p->text = text ? ocr__d_strndup(text, text_len) : NULL;
    if (!p->points || (text && !p->text)) { OCR_FREE(p->points); OCR_FREE(p->text); return 0; }
    for (i = 0; i < n_points; i++) { p->points[i].x = (float)xy[2 * i]; p->points[i].y = (float)xy[2 * i + 1]; }
    p->n_points = n_points;
    p->ignore = ignore;
    L->n++;
    return 1;
}

/* A decimal number (optional sign, digits, fraction, exponent) with optional blanks around it; 1 on success. */
static int ocr__d_parse_number(const char *s, size_t n, double *out) {
    char buf[72];
    size_t b = 0, e = n, i;
    int digits = 0;
    while (b < e && (s[b] == ' ' || s[b] == '\t')) b++;
    while (e > b && (s[e - 1] == ' ' || s[e - 1] == '\t')) e--;
    if (e - b == 0 || e - b >= sizeof buf) return 0;
    i = b;
    if (s[i] == '+' || s[i] == '-') i++;
    while (i < e && s[i] >= '0' && s[i] <= '9') { i++; digits++; }
    if (i < e && s[i] == '.') { i++; while (i < e && s[i] >= '0' && s[i] <= '9') { i++; digits++; } }
    if (!digits) return 0;
    if (i < e && (s[i] == 'e' || s[i] == 'E')) {
        size_t j = i + 1;
        if (j < e && (s[j] == '+' || s[j] == '-')) j++;
        if (!(j < e && s[j] >= '0' && s[j] <= '9')) return 0;
        while (j < e && s[j] >= '0' && s[j] <= '9') j++;
        i = j;
    }
    if (i != e) return 0;
    memcpy(buf, s + b, e - b);
    buf[e - b] = 0;
    *out = strtod(buf, NULL);
    return 1;
}

static int ocr__d_coord_ok(double v) { return isfinite(v) && fabs(v) <= OCR_COORD_MAX; }

/* Every coordinate of a parsed line finite and within OCR_COORD_MAX, else an error naming file, line and coordinate. */
static int ocr__d_coords_check(ocr_ctx *ctx, const char *fn, const char *name, int line_no, const double *xy, size_t n) {
    size_t k;
    for (k = 0; k < n; k++)
        if (!ocr__d_coord_ok(xy[k]))
            return ocr_error(ctx, OCR_ERANGE, "%s: '%s' line %d: coordinate %d is %g; coordinates must be finite with |v| <= %g", fn,
                             name, line_no, (int)k + 1, xy[k], OCR_COORD_MAX);
    return OCR_OK;
}

/* One line: fields start at line[f_begin[k]]; returns OCR_OK or an error naming file and line. */
static int ocr__gt_line(ocr_ctx *ctx, const char *name, int line_no, const char *line, size_t len, int format, ocr__d_polys *L,
                        double **xy, size_t *xy_cap) {
    const char *fn = "ocr_gt_parse";
    size_t n_fields = 1, i, k, start, text_at;
    size_t n_num = 0, n_coords;
    const char *text;
    size_t text_len;
    for (i = 0; i < len; i++) if (line[i] == ',') n_fields++;
    if (*xy_cap < n_fields) {
        double *d = (double *)OCR_REALLOC(*xy, n_fields * sizeof(double));
        if (!d) return ocr_error(ctx, OCR_ENOMEM, "%s: out of memory", fn);
        *xy = d;
        *xy_cap = n_fields;
    }
    /* Leading numeric fields. */
    for (start = 0, k = 0; k < n_fields; k++) {
        size_t end = start;
        while (end < len && line[end] != ',') end++;
        if (!ocr__d_parse_number(line + start, end - start, &(*xy)[k])) break;
        n_num++;
        start = end + 1;
    }
    if (format == OCR_GT_ICDAR2015) {
        if (n_num < 8 && n_num < n_fields) {
            size_t s = 0, e, c;
            for (c = 0; c < n_num; c++) { while (line[s] != ',') s++; s++; }
            for (e = s; e < len && line[e] != ','; e++) {}
            return ocr_error(ctx, OCR_EFORMAT, "%s: '%s' line %d: field %d ('%.*s') is not a number; ICDAR 2015 lines are "
                             "x1,y1,...,x4,y4,transcription", fn, name, line_no, (int)n_num + 1, (int)(e - s > 40 ? 40 : e - s), line + s);
        }
        if (n_num < 8)
            return ocr_error(ctx, OCR_EFORMAT, "%s: '%s' line %d: %d numbers; ICDAR 2015 lines need 8 coordinates then the transcription",
                             fn, name, line_no, (int)n_num);
        n_coords = 8;
    } else {
        /* an odd count of numbers before a non-numeric transcription is a missing coordinate, or a transcription that
           starts with a number: the line cannot be read unambiguously (quote such a transcription). An all-numeric line
           keeps the convention that its last field is the transcription and the coordinates are the even prefix. */
        if (n_num < n_fields && n_num % 2)
            return ocr_error(ctx, OCR_EFORMAT, "%s: '%s' line %d: %d numbers before the transcription, an odd count: a coordinate is "
                             "missing, or the transcription starts with a number (quote it: \"12,5\")", fn, name, line_no, (int)n_num);
        if (n_num == n_fields) n_num--; /* the last field is always the transcription */
        n_coords = n_num & ~(size_t)1;
        if (n_coords < 6)
            return ocr_error(ctx, OCR_EFORMAT, "%s: '%s' line %d: %d coordinates before the transcription; a polygon needs at least 3 points",
                             fn, name, line_no, (int)n_coords);
    }
    if (ocr__d_coords_check(ctx, fn, name, line_no, *xy, n_coords)) return OCR_ERANGE;
    /* The transcription is the rest of the line after the coordinates, commas included. */
    for (text_at = 0, k = 0; k < n_coords && text_at <= len; k++) {
        while (text_at < len && line[text_at] != ',') text_at++;
        text_at++;
    }
    if (text_at > len) text_at = len;
    text = line + text_at;
    text_len = len - text_at;
    if (text_len >= 2 && text[0] == '"' && text[text_len - 1] == '"') {
        /* Quoted (RRC convention): drop the quotes, \\ -> \ and \" -> ". */
        char *u = (char *)OCR_MALLOC(text_len);
        size_t o = 0;
        int ok;
        if (!u) return ocr_error(ctx, OCR_ENOMEM, "%s: out of memory", fn);
        for (i = 1; i + 1 < text_len; i++) {
            if (text[i] == '\\' && i + 2 < text_len && (text[i + 1] == '\\' || text[i + 1] == '"')) i++;
            u[o++] = text[i];
        }
        ok = ocr__d_polys_push(L, *xy, (int)(n_coords / 2), u, o, o == 3 && memcmp(u, "###", 3) == 0);
        OCR_FREE(u);
        if (!ok) return ocr_error(ctx, OCR_ENOMEM, "%s: out of memory", fn);
        return OCR_OK;
    }
    if (!ocr__d_polys_push(L, *xy, (int)(n_coords / 2), text, text_len, text_len == 3 && memcmp(text, "###", 3) == 0))
        return ocr_error(ctx, OCR_ENOMEM, "%s: out of memory", fn);
    return OCR_OK;
}

/* The lines of a ground-truth (format OCR_GT_*) or result (format -1) file from byte pos on: LF or CRLF, blank lines
   skipped, each line parsed on its own so no field reaches into the next. */
static int ocr__result_line(ocr_ctx *ctx, const char *name, int line_no, const char *line, size_t len, ocr__d_polys *L,
                            double **xy, size_t *xy_cap);
static int ocr__d_parse_lines(ocr_ctx *ctx, const char *name, const char *text, size_t size, size_t pos, int format,
                              ocr_polygon **polys, int *n_polys) {
    ocr__d_polys L;
    double *xy = NULL;
    size_t xy_cap = 0;
    int line_no = 0, rc = OCR_OK;
    memset(&L, 0, sizeof L);
    while (pos < size && !rc) {
        size_t end = pos, len, i;
        while (end < size && text[end] != '\n') end++;
        len = end - pos;
        if (len && text[pos + len - 1] == '\r') len--;
        line_no++; /* the size cap keeps this far below INT_MAX */
        for (i = 0; i < len && (text[pos + i] == ' ' || text[pos + i] == '\t'); i++) {}
        if (i < len)
            rc = format < 0 ? ocr__result_line(ctx, name, line_no, text + pos, len, &L, &xy, &xy_cap)
                            : ocr__gt_line(ctx, name, line_no, text + pos, len, format, &L, &xy, &xy_cap);
        pos = end + 1;
    }
    OCR_FREE(xy);
    if (rc) { ocr_polygons_free(L.items, L.n); return rc; }
    *polys = L.items;
    *n_polys = L.n;
    return OCR_OK;
}

/* ---------------------------------------------------------------- UTF-8 */

OCRDEF int ocr_utf8_next(const char *s, size_t n, size_t *i, int32_t *cp) {
    const unsigned char *u = (const unsigned char *)s + *i;
    size_t left = n - *i, len, k;
    int32_t c, min;
    if (*i >= n) return 0;
    if (u[0] < 0x80) { *cp = u[0]; (*i)++; return 1; }
    if (u[0] >= 0xC2 && u[0] <= 0xDF) { len = 2; c = u[0] & 0x1F; min = 0x80; }
    else if (u[0] >= 0xE0 && u[0] <= 0xEF) { len = 3; c = u[0] & 0x0F; min = 0x800; }
    else if (u[0] >= 0xF0 && u[0] <= 0xF4) { len = 4; c = u[0] & 0x07; min = 0x10000; }
    else return 0;
    if (left < len) return 0;
    for (k = 1; k < len; k++) {
        if ((u[k] & 0xC0) != 0x80) return 0;
        c = (c << 6) | (u[k] & 0x3F);
    }
    if (c < min || c > 0x10FFFF || (c >= 0xD800 && c <= 0xDFFF)) return 0;
    *cp = c;
    *i += len;
    return 1;
}

OCRDEF int ocr_utf8_put(int32_t cp, char out[4]) {
    if (cp < 0x80) { out[0] = (char)cp; return 1; }
    if (cp < 0x800) { out[0] = (char)(0xC0 | (cp >> 6)); out[1] = (char)(0x80 | (cp & 0x3F)); return 2; }
    if (cp < 0x10000) {
        out[0] = (char)(0xE0 | (cp >> 12)); out[1] = (char)(0x80 | ((cp >> 6) & 0x3F)); out[2] = (char)(0x80 | (cp & 0x3F));
        return 3;
    }
    out[0] = (char)(0xF0 | (cp >> 18)); out[1] = (char)(0x80 | ((cp >> 12) & 0x3F));
    out[2] = (char)(0x80 | ((cp >> 6) & 0x3F)); out[3] = (char)(0x80 | (cp & 0x3F));
    return 4;
}

OCRDEF int ocr_gt_parse(ocr_ctx *ctx, const char *name, const char *text, size_t size, int format, ocr_polygon **polys, int *n_polys) {
    const char *fn = "ocr_gt_parse";
    size_t pos = 0, bad;
    *polys = NULL;
    *n_polys = 0;
    if (format != OCR_GT_ICDAR2015 && format != OCR_GT_POLYGON)
        return ocr_error(ctx, OCR_EINVAL, "%s: unknown format %d (OCR_GT_ICDAR2015 or OCR_GT_POLYGON)", fn, format);
    if (size > OCR_LABEL_MAX_BYTES) return ocr_error(ctx, OCR_EOVERFLOW, "%s: '%s' has %zu bytes, above the %zu cap", fn, name, size, OCR_LABEL_MAX_BYTES);
    if (size >= 3 && memcmp(text, "\xEF\xBB\xBF", 3) == 0) pos = 3;
    if (!ocr__d_utf8_valid((const unsigned char *)text + pos, size - pos, &bad))
        return ocr_error(ctx, OCR_EFORMAT, "%s: '%s' is not UTF-8 text (bad byte 0x%02x at offset %zu)", fn, name,
                         (unsigned char)text[pos + bad], pos + bad);
    return ocr__d_parse_lines(ctx, name, text, size, pos, format, polys, n_polys);
}

/* One result line of len bytes (no newline): its fields are split here, so a number can never reach into the next
   line (strtod would skip the newline). */
static int ocr__result_line(ocr_ctx *ctx, const char *name, int line_no, const char *line, size_t len, ocr__d_polys *L,
                            double **xy, size_t *xy_cap) {
    const char *fn = "ocr_result_parse";
    size_t n_fields = 1, i, k, start, n_coords;
    for (i = 0; i < len; i++) if (line[i] == ',') n_fields++;
    if (*xy_cap < n_fields) {
        double *d = (double *)OCR_REALLOC(*xy, n_fields * sizeof(double));
        if (!d) return ocr_error(ctx, OCR_ENOMEM, "%s: out of memory", fn);
        *xy = d;
        *xy_cap = n_fields;
    }
    for (start = 0, k = 0; k < n_fields; k++) {
        size_t end = start, b;
        while (end < len && line[end] != ',') end++;
        for (b = start; b < end && (line[b] == ' ' || line[b] == '\t'); b++) {}
        if (b == end)
            return ocr_error(ctx, OCR_EFORMAT, "%s: '%s' line %d: field %d is empty; result lines are x1,y1,...,xn,yn[,score]", fn, name,
                             line_no, (int)k + 1);
        if (!ocr__d_parse_number(line + start, end - start, &(*xy)[k]))
            return ocr_error(ctx, OCR_EFORMAT, "%s: '%s' line %d: field %d ('%.*s') is not a number; result lines are x1,y1,...,xn,yn[,score]",
                             fn, name, line_no, (int)k + 1, (int)(end - start > 40 ? 40 : end - start), line + start);
        start = end + 1;
    }
    n_coords = n_fields & ~(size_t)1;
    if (n_coords < 6)
        return ocr_error(ctx, OCR_EFORMAT, "%s: '%s' line %d: %d numbers; a result polygon needs at least 3 points (x1,y1,...,xn,yn[,score])",
                         fn, name, line_no, (int)n_fields);
    if (ocr__d_coords_check(ctx, fn, name, line_no, *xy, n_coords)) return OCR_ERANGE;
    if (n_fields % 2 && !isfinite((*xy)[n_fields - 1]))
        return ocr_error(ctx, OCR_ERANGE, "%s: '%s' line %d: the score is %g; it must be finite", fn, name, line_no, (*xy)[n_fields - 1]);
    if (!ocr__d_polys_push(L, *xy, (int)(n_coords / 2), NULL, 0, 0))
        return ocr_error(ctx, OCR_ENOMEM, "%s: out of memory", fn);
    return OCR_OK;
}

OCRDEF int ocr_result_parse(ocr_ctx *ctx, const char *name, const char *text, size_t size, ocr_polygon **polys, int *n_polys) {
    const char *fn = "ocr_result_parse";
    size_t pos = 0;
    if (!polys || !n_polys) return ocr_error(ctx, OCR_EINVAL, "%s: polys and n_polys must not be NULL", fn);
    *polys = NULL;
    *n_polys = 0;
    if (!name) name = "(result)";
    if (!text && size) return ocr_error(ctx, OCR_EINVAL, "%s: '%s': text is NULL", fn, name);
    if (size > OCR_LABEL_MAX_BYTES) return ocr_error(ctx, OCR_EOVERFLOW, "%s: '%s' has %zu bytes, above the %zu cap", fn, name, size, OCR_LABEL_MAX_BYTES);
    if (size >= 3 && memcmp(text, "\xEF\xBB\xBF", 3) == 0) pos = 3;
    return ocr__d_parse_lines(ctx, name, text, size, pos, -1, polys, n_polys);
}

OCRDEF int ocr_label_parse_json(ocr_ctx *ctx, const char *name, const char *text, size_t size, ocr_polygon **polys, int *n_polys) {
    const char *fn = "ocr_label_parse_json";
    ocr_json_tok *toks;
    ocr__d_polys L;
    double *xy = NULL;
    int n_toks, i, rc = OCR_OK, max_toks, next_obj;
    *polys = NULL;
    *n_polys = 0;
    if (size > OCR_LABEL_MAX_BYTES) return ocr_error(ctx, OCR_EOVERFLOW, "%s: '%s' has %zu bytes, above the %zu cap", fn, name, size, OCR_LABEL_MAX_BYTES);
    /* Every JSON value but a lone top-level scalar takes at least two bytes with its separator. */
    max_toks = (int)(size / 2 + 2);
    toks = (ocr_json_tok *)OCR_MALLOC((size_t)max_toks * sizeof *toks);
    if (!toks) return ocr_error(ctx, OCR_ENOMEM, "%s: out of memory", fn);
    memset(&L, 0, sizeof L);
    if ((rc = ocr_json_parse(ctx, text, size, toks, max_toks, &n_toks))) {
        char prefix[400];
        snprintf(prefix, sizeof prefix, "%s: '%s' is not valid JSON", fn, name);
        ocr__d_error_prefix(ctx, rc, prefix);
        goto done;
    }
    if (toks[0].type != OCR_JSON_ARRAY) {
        rc = ocr_error(ctx, OCR_EFORMAT, "%s: '%s' must be a JSON list of {\"points\": [[x,y],...], \"transcription\": ...}", fn, name);
        goto done;
    }
    /* elements are walked through next links (ocr_json_child per element is quadratic: minutes for a 16 MiB label) */
    for (i = 0, next_obj = 1; i < toks[0].size; i++, next_obj = toks[next_obj].next) {
        int obj = next_obj, pts, tr, ig, k, n_pts, ignore = 0, next_pt;
        char *tx = NULL;
        if (toks[obj].type != OCR_JSON_OBJECT) { rc = ocr_error(ctx, OCR_EFORMAT, "%s: '%s' instance %d is not an object", fn, name, i); goto done; }
        pts = ocr_json_find(text, toks, obj, "points");
        if (pts < 0 || toks[pts].type != OCR_JSON_ARRAY) {
            rc = ocr_error(ctx, OCR_EFORMAT, "%s: '%s' instance %d has no \"points\" list", fn, name, i);
            goto done;
        }
        n_pts = toks[pts].size;
        if (n_pts < 3) { rc = ocr_error(ctx, OCR_EFORMAT, "%s: '%s' instance %d has %d points; a polygon needs at least 3", fn, name, i, n_pts); goto done; }
        OCR_FREE(xy);
        xy = (double *)OCR_MALLOC((size_t)n_pts * 2 * sizeof(double));
        if (!xy) { rc = ocr_error(ctx, OCR_ENOMEM, "%s: out of memory", fn); goto done; }
        for (k = 0, next_pt = pts + 1; k < n_pts; k++, next_pt = toks[next_pt].next) {
            int pt = next_pt, c;
            if (toks[pt].type != OCR_JSON_ARRAY || toks[pt].size != 2) {
                rc = ocr_error(ctx, OCR_EFORMAT, "%s: '%s' instance %d point %d is not a pair [x, y]", fn, name, i, k);
                goto done;
            }
            for (c = 0; c < 2; c++) {
                int v = ocr_json_child(toks, pt, c);
                double d;
                if (toks[v].type != OCR_JSON_NUMBER) {
                    rc = ocr_error(ctx, OCR_EFORMAT, "%s: '%s' instance %d point %d: %c is not a number", fn, name, i, k, c ? 'y' : 'x');
                    goto done;
                }
                if (!ocr_json_number(text, &toks[v], &d) || !ocr__d_coord_ok(d)) {
                    rc = ocr_error(ctx, OCR_ERANGE, "%s: '%s' instance %d point %d: %c = %.*s is not finite or |v| > %g", fn, name, i, k,
                                   c ? 'y' : 'x', (int)(toks[v].end - toks[v].start > 40 ? 40 : toks[v].end - toks[v].start),
                                   text + toks[v].start, OCR_COORD_MAX);
                    goto done;
                }
                xy[2 * k + c] = d;
            }
        }
        tr = ocr_json_find(text, toks, obj, "transcription");
        if (tr >= 0 && toks[tr].type != OCR_JSON_NULL) {
            size_t cap = (size_t)(toks[tr].end - toks[tr].start) + 1;
            if (toks[tr].type != OCR_JSON_STRING) { rc = ocr_error(ctx, OCR_EFORMAT, "%s: '%s' instance %d: transcription is not a string", fn, name, i); goto done; }
            tx = (char *)OCR_MALLOC(cap);
            if (!tx) { rc = ocr_error(ctx, OCR_ENOMEM, "%s: out of memory", fn); goto done; }
            if (!ocr_json_string(text, &toks[tr], tx, cap)) {
                OCR_FREE(tx);
                rc = ocr_error(ctx, OCR_EFORMAT, "%s: '%s' instance %d: transcription holds \\u0000 or a lone surrogate", fn, name, i);
                goto done;
            }
            ignore = strcmp(tx, "###") == 0;
        }
        ig = ocr_json_find(text, toks, obj, "ignore");
        if (ig >= 0) {
            if (toks[ig].type != OCR_JSON_BOOL) { OCR_FREE(tx); rc = ocr_error(ctx, OCR_EFORMAT, "%s: '%s' instance %d: ignore is not true/false", fn, name, i); goto done; }
            if (text[toks[ig].start] == 't') ignore = 1;
        }
        k = ocr__d_polys_push(&L, xy, n_pts, tx, tx ? strlen(tx) : 0, ignore);
        OCR_FREE(tx);
        if (!k) { rc = ocr_error(ctx, OCR_ENOMEM, "%s: out of memory", fn); goto done; }
    }
done:
    OCR_FREE(xy);
    OCR_FREE(toks);
    if (rc) { ocr_polygons_free(L.items, L.n); return rc; }
    *polys = L.items;
    *n_polys = L.n;
    return OCR_OK;
}

/* ---- datasets */

OCRDEF int ocr_dataset_get(ocr_ctx *ctx, ocr_dataset *ds, int64_t index, unsigned flags, ocr_sample *out) {
    memset(out, 0, sizeof *out);
    if (!ds || !ds->get) return ocr_error(ctx, OCR_EINVAL, "ocr_dataset_get: dataset is NULL or closed");
    if (index < 0 || index >= ds->count)
        return ocr_error(ctx, OCR_ERANGE, "ocr_dataset_get: index %lld outside [0, %lld) of dataset '%s'", (long long)index,
                         (long long)ds->count, ds->name);
    return ds->get(ds, ctx, index, flags, out);
}

OCRDEF void ocr_dataset_close(ocr_dataset *ds) {
    if (!ds) return;
    if (ds->close) ds->close(ds);
    memset(ds, 0, sizeof *ds);
}

/* Hash of the stored bytes: each part length-prefixed. */
static ocr_hash128 ocr__d_content_hash(const void *image, size_t image_size, const void *label, size_t label_size) {
    ocr_hasher h;
    ocr_hasher_init(&h, 0x6f63722d64617461ull); /* "ocr-data" */
    ocr_hasher_u64(&h, image_size);
    ocr_hasher_update(&h, image, image_size);
    ocr_hasher_u64(&h, label_size);
    ocr_hasher_update(&h, label, label_size);
    return ocr_hasher_final(&h);
}

/* Decodes (or, for labels only, probes) the stored image into out->image; errors are prefixed with the sample id. */
static int ocr__d_sample_image(ocr_ctx *ctx, const char *where, const void *bytes, size_t size, unsigned flags, ocr_sample *out) {
    int rc = (flags & OCR_SAMPLE_LABELS_ONLY) ? ocr_image_probe(ctx, bytes, size, &out->image) : ocr_image_decode(ctx, bytes, size, &out->image);
    return rc ? ocr__d_error_prefix(ctx, rc, where) : OCR_OK;
}

typedef struct {
    char image_dir[2048];
    char **images;   /* file names in image_dir, sorted */
    char **gts;      /* full paths of the matching ground truth */
    int64_t n;
    int gt_format;
} ocr__icdar;

static void ocr__icdar_close(ocr_dataset *ds) {
    ocr__icdar *D = (ocr__icdar *)ds->impl;
    int64_t i;
    if (!D) return;
    for (i = 0; i < D->n; i++) { OCR_FREE(D->images[i]); if (D->gts) OCR_FREE(D->gts[i]); }
    OCR_FREE(D->images);
    OCR_FREE(D->gts);
    OCR_FREE(D);
    ds->impl = NULL;
}

static int ocr__icdar_image_path(ocr_ctx *ctx, const ocr__icdar *D, int64_t i, char *path, size_t cap) {
    if (snprintf(path, cap, "%s/%s", D->image_dir, D->images[i]) >= (int)cap)
        return ocr_error(ctx, OCR_EINVAL, "ocr_dataset_get: path of '%s' is too long", D->images[i]);
    return OCR_OK;
}

static int ocr__icdar_get_encoded(ocr_dataset *ds, ocr_ctx *ctx, int64_t index, unsigned char **bytes, size_t *size) {
    char path[4096];
    int rc = ocr__icdar_image_path(ctx, (ocr__icdar *)ds->impl, index, path, sizeof path);
    return rc ? rc : ocr_read_file(ctx, path, OCR_IMAGE_MAX_BYTES, bytes, size);
}

static int ocr__icdar_get(ocr_dataset *ds, ocr_ctx *ctx, int64_t index, unsigned flags, ocr_sample *out) {
    ocr__icdar *D = (ocr__icdar *)ds->impl;
    unsigned char *img = NULL, *gt = NULL;
    size_t img_size, gt_size;
    char where[400];
    int rc;
    memset(out, 0, sizeof *out);
    snprintf(out->id, sizeof out->id, "%s", D->images[index]);
    snprintf(where, sizeof where, "ocr_dataset_get: '%s' (sample %lld of '%s')", D->images[index], (long long)index, ds->name);
    if ((rc = ocr__icdar_get_encoded(ds, ctx, index, &img, &img_size)) ||
        (rc = ocr_read_file(ctx, D->gts[index], OCR_LABEL_MAX_BYTES, &gt, &gt_size)) ||
        (rc = ocr_gt_parse(ctx, D->gts[index], (const char *)gt, gt_size, D->gt_format, &out->polys, &out->n_polys)) ||
        (rc = ocr__d_sample_image(ctx, where, img, img_size, flags, out))) {
        ocr_sample_free(out);
    } else {
        out->content_hash = ocr__d_content_hash(img, img_size, gt, gt_size);
    }
    OCR_FREE(img);
    OCR_FREE(gt);
    return rc;
}

static int ocr__d_is_regular_file(const char *path) {
    struct stat st;
    return stat(path, &st) == 0 && S_ISREG(st.st_mode);
}

static int ocr__has_image_ext(const char *name) {
    static const char *const exts[] = {".jpg", ".jpeg", ".png", ".bmp"};
    const char *dot = strrchr(name, '.');
    int i;
    if (!dot || name[0] == '.') return 0;
    for (i = 0; i < 4; i++) {
        const char *a = dot, *b = exts[i];
        while (*a && *b && (*a | 0x20) == *b) { a++; b++; }
        if (!*a && !*b) return 1;
    }
    return 0;
}

static int ocr__d_strcmp_ptr(const void *a, const void *b) { return strcmp(*(const char *const *)a, *(const char *const *)b); }

OCRDEF int ocr_dataset_open_icdar(ocr_ctx *ctx, ocr_dataset *ds, const char *image_dir, const char *gt_dir, int gt_format) {
    const char *fn = "ocr_dataset_open_icdar";
    ocr__icdar *D;
    DIR *dir;
    struct dirent *e;
    int64_t cap = 0, i;
    int rc = OCR_OK;
    memset(ds, 0, sizeof *ds);
    if (gt_format != OCR_GT_ICDAR2015 && gt_format != OCR_GT_POLYGON)
        return ocr_error(ctx, OCR_EINVAL, "%s: unknown ground-truth format %d", fn, gt_format);
    if (strlen(image_dir) >= 2048 || strlen(gt_dir) >= 2048) return ocr_error(ctx, OCR_EINVAL, "%s: directory path too long", fn);
    D = (ocr__icdar *)OCR_MALLOC(sizeof *D);
    if (!D) return ocr_error(ctx, OCR_ENOMEM, "%s: out of memory", fn);
    memset(D, 0, sizeof *D);
    snprintf(D->image_dir, sizeof D->image_dir, "%s", image_dir);
    D->gt_format = gt_format;
    ds->impl = D;
    ds->close = ocr__icdar_close;
    dir = opendir(image_dir);
    if (!dir) { rc = ocr_error(ctx, OCR_EIO, "%s: cannot open image directory '%s': %s", fn, image_dir, strerror(errno)); goto fail; }
    while ((e = readdir(dir)) != NULL) {
        if (!ocr__has_image_ext(e->d_name)) continue;
        if (D->n == cap) {
            int64_t ncap = cap ? cap * 2 : 64;
            char **im = (char **)OCR_REALLOC(D->images, (size_t)ncap * sizeof(char *));
            if (!im) { rc = ocr_error(ctx, OCR_ENOMEM, "%s: out of memory", fn); break; }
            D->images = im;
            cap = ncap;
        }
        if (!(D->images[D->n] = ocr__d_strndup(e->d_name, strlen(e->d_name)))) { rc = ocr_error(ctx, OCR_ENOMEM, "%s: out of memory", fn); break; }
        D->n++;
    }
    closedir(dir);
    if (rc) goto fail;
    if (!D->n) { rc = ocr_error(ctx, OCR_ENOTFOUND, "%s: no .jpg, .jpeg, .png or .bmp files in '%s'", fn, image_dir); goto fail; }
    qsort(D->images, (size_t)D->n, sizeof(char *), ocr__d_strcmp_ptr);
    D->gts = (char **)OCR_MALLOC((size_t)D->n * sizeof(char *));
    if (!D->gts) { rc = ocr_error(ctx, OCR_ENOMEM, "%s: out of memory", fn); goto fail; }
    memset(D->gts, 0, (size_t)D->n * sizeof(char *));
    for (i = 0; i < D->n; i++) {
        const char *name = D->images[i];
        int stem = (int)(strrchr(name, '.') - name), k;
        char cand[3][4200];
        snprintf(cand[0], sizeof cand[0], "%s/gt_%.*s.txt", gt_dir, stem, name);
        snprintf(cand[1], sizeof cand[1], "%s/%s.txt", gt_dir, name);
        snprintf(cand[2], sizeof cand[2], "%s/%.*s.txt", gt_dir, stem, name);
        for (k = 0; k < 3 && !ocr__d_is_regular_file(cand[k]); k++) {}
        if (k == 3) {
            rc = ocr_error(ctx, OCR_ENOTFOUND, "%s: image '%s' has no ground truth: none of '%s', '%s', '%s' exists", fn, name,
                           cand[0], cand[1], cand[2]);
            goto fail;
        }
        if (!(D->gts[i] = ocr__d_strndup(cand[k], strlen(cand[k])))) { rc = ocr_error(ctx, OCR_ENOMEM, "%s: out of memory", fn); goto fail; }
    }
    ds->count = D->n;
    snprintf(ds->name, sizeof ds->name, "icdar:%.240s", image_dir);
    ds->get = ocr__icdar_get;
    ds->get_encoded = ocr__icdar_get_encoded;
    return OCR_OK;
fail:
    ocr_dataset_close(ds);
    return rc;
}

/* ---- LMDB. The environment belongs to the process that opened it (liblmdb: never use an MDB_env after fork()).
   proc is published atomically; a process that finds one opened by another pid (inherited through fork) opens its
   own and leaves the inherited one alone: closing it would also drop this process's fcntl locks on lock.mdb.
   open_lock holds the pid of the process whose thread is opening; any other value is free for this process,
   including a stale pid copied from a parent that forked in the middle of an open. */
#if !defined(__GNUC__) && !defined(__clang__)
#error "ocr_data.h: the fork-safe LMDB reader needs the __atomic builtins of gcc or clang"
#endif

typedef struct { long pid; MDB_env *env; MDB_dbi dbi; } ocr__lmdb_proc;

typedef struct {
    char path[4096];
    unsigned env_flags;
    ocr__lmdb_proc *proc;
    long open_lock;
} ocr__lmdb;

static int ocr__lmdb_fail(ocr_ctx *ctx, const ocr__lmdb *D, const char *fn, const char *what, int mdb_rc) {
    return ocr_error(ctx, mdb_rc == ENOMEM ? OCR_ENOMEM : OCR_EIO, "%s: LMDB '%s': %s: %s", fn, D->path, what, mdb_strerror(mdb_rc));
}

static int ocr__lmdb_check_size(ocr_ctx *ctx, const ocr__lmdb *D, MDB_env *env, unsigned flags) {
    MDB_envinfo info;
    MDB_stat st;
    struct stat fs;
    char file[4200];
    uint64_t need;
    int rc;
    if ((rc = mdb_env_info(env, &info)) || (rc = mdb_env_stat(env, &st))) return ocr__lmdb_fail(ctx, D, "ocr_dataset_get", "reading its metadata", rc);
    if (flags & MDB_NOSUBDIR) snprintf(file, sizeof file, "%s", D->path);
    else snprintf(file, sizeof file, "%s/data.mdb", D->path);
    if (stat(file, &fs) != 0) return ocr_error(ctx, OCR_EIO, "ocr_dataset_get: LMDB '%s': cannot stat '%s': %s", D->path, file, strerror(errno));
    need = ((uint64_t)info.me_last_pgno + 1) * (uint64_t)st.ms_psize;
    if ((uint64_t)fs.st_size < need)
        return ocr_error(ctx, OCR_EFORMAT, "ocr_dataset_get: LMDB '%s': '%s' is truncated: %lld bytes, but its metadata uses %llu "
                         "(%llu pages of %u bytes)", D->path, file, (long long)fs.st_size, (unsigned long long)need,
                         (unsigned long long)info.me_last_pgno + 1, st.ms_psize);
    return OCR_OK;
}

static int ocr__lmdb_open_env(ocr_ctx *ctx, ocr__lmdb *D, long pid, ocr__lmdb_proc **out) {
    const char *fn = "ocr_dataset_get";
    ocr__lmdb_proc *p = (ocr__lmdb_proc *)OCR_MALLOC(sizeof *p);
    MDB_txn *txn;
    unsigned flags = D->env_flags;
    int rc, attempt;
    if (!p) return ocr_error(ctx, OCR_ENOMEM, "%s: out of memory", fn);
    memset(p, 0, sizeof *p);
    p->pid = pid;
    for (attempt = 0; attempt < 2; attempt++) {
        if ((rc = mdb_env_create(&p->env))) { OCR_FREE(p); return ocr__lmdb_fail(ctx, D, fn, "mdb_env_create", rc); }
        mdb_env_set_maxreaders(p->env, 1024);
        rc = mdb_env_open(p->env, D->path, flags, 0644);
        if (!rc) break;
        mdb_env_close(p->env);
        p->env = NULL;
        /* No write access to lock.mdb (read-only media): a frozen dataset can be read without the lock file. */
        if (attempt == 0 && (rc == EACCES || rc == EROFS)) { flags |= MDB_NOLOCK; continue; }
        OCR_FREE(p);
        return ocr__lmdb_fail(ctx, D, fn, "mdb_env_open", rc);
    }
    /* The map reaches as far as the environment's own metadata says; a data file cut shorter (a partial copy, a full
       disk) would turn the first read past its end into SIGBUS, so it is refused before any page is touched. */
    if ((rc = ocr__lmdb_check_size(ctx, D, p->env, flags))) { mdb_env_close(p->env); OCR_FREE(p); return rc; }
    if ((rc = mdb_txn_begin(p->env, NULL, MDB_RDONLY, &txn)) == 0) {
        rc = mdb_dbi_open(txn, NULL, 0, &p->dbi);
        mdb_txn_abort(txn);
    }
    if (rc) { mdb_env_close(p->env); OCR_FREE(p); return ocr__lmdb_fail(ctx, D, fn, "opening the main database", rc); }
    *out = p;
    return OCR_OK;
}

/* This process's environment, opened on first use. */
static int ocr__lmdb_env(ocr_ctx *ctx, ocr__lmdb *D, ocr__lmdb_proc **out) {
    long me = (long)getpid();
    ocr__lmdb_proc *p = __atomic_load_n(&D->proc, __ATOMIC_ACQUIRE);
    int rc = OCR_OK;
    if (p && p->pid == me) { *out = p; return OCR_OK; }
    for (;;) {
        long held = __atomic_load_n(&D->open_lock, __ATOMIC_ACQUIRE);
        if (held != me && __atomic_compare_exchange_n(&D->open_lock, &held, me, 0, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE)) break;
        sched_yield();
    }
    p = __atomic_load_n(&D->proc, __ATOMIC_ACQUIRE);
    if (!p || p->pid != me) {
        ocr__lmdb_proc *mine = NULL;
        if ((rc = ocr__lmdb_open_env(ctx, D, me, &mine)) == OCR_OK) {
            __atomic_store_n(&D->proc, mine, __ATOMIC_RELEASE); /* an inherited record is dropped, never closed */
            p = mine;
        }
    }
    __atomic_store_n(&D->open_lock, 0L, __ATOMIC_RELEASE);
    *out = p;
    return rc;
}

static void ocr__lmdb_close(ocr_dataset *ds) {
    ocr__lmdb *D = (ocr__lmdb *)ds->impl;
    ocr__lmdb_proc *p;
    if (!D) return;
    p = __atomic_load_n(&D->proc, __ATOMIC_ACQUIRE);
    if (p && p->pid == (long)getpid()) {
        mdb_env_close(p->env);
        OCR_FREE(p);
    }
    OCR_FREE(D);
    ds->impl = NULL;
}

/* Reads one record inside txn; missing keys and sizes outside [min, max] are errors naming the key. */
static int ocr__lmdb_read(ocr_ctx *ctx, const ocr__lmdb *D, MDB_txn *txn, MDB_dbi dbi, const char *key, size_t max, MDB_val *val) {
    MDB_val k;
    int rc;
    k.mv_data = (void *)key;
    k.mv_size = strlen(key);
    rc = mdb_get(txn, dbi, &k, val);
    if (rc == MDB_NOTFOUND) return ocr_error(ctx, OCR_ENOTFOUND, "ocr_dataset_get: LMDB '%s': key '%s' is missing", D->path, key);
    if (rc) {
        char what[128];
        snprintf(what, sizeof what, "reading key '%s'", key);
        return ocr__lmdb_fail(ctx, D, "ocr_dataset_get", what, rc);
    }
    if (val->mv_size > max)
        return ocr_error(ctx, OCR_EOVERFLOW, "ocr_dataset_get: LMDB '%s': key '%s' holds %zu bytes, above the %zu cap", D->path, key,
                         val->mv_size, max);
    return OCR_OK;
}

/* 1 when a label is a JSON object (valid JSON starting with '{'): a detection label of the wrong shape, which must be
   refused rather than read as recognition text; "{abc}" is not JSON and stays text. */
static int ocr__lmdb_label_is_object(const char *l, size_t n) {
    int is_json, n_toks, max_toks;
    ocr_json_tok *toks;
    size_t i;
    for (i = 0; i < n && (l[i] == ' ' || l[i] == '\t' || l[i] == '\r' || l[i] == '\n'); i++) {}
    if (i == n || l[i] != '{') return 0;
    max_toks = (int)(n / 2 + 2);
    toks = (ocr_json_tok *)OCR_MALLOC((size_t)max_toks * sizeof *toks);
    if (!toks) return 1; /* cannot tell: the JSON reader then reports the problem */
    is_json = ocr_json_parse(NULL, l, n, toks, max_toks, &n_toks) == OCR_OK; /* NULL ctx: the probe's error is not ours */
    OCR_FREE(toks);
    return is_json;
}

static int ocr__lmdb_begin(ocr_ctx *ctx, ocr_dataset *ds, ocr__lmdb_proc **p, MDB_txn **txn) {
    ocr__lmdb *D = (ocr__lmdb *)ds->impl;
    int rc = ocr__lmdb_env(ctx, D, p);
    if (rc) return rc;
    if ((rc = mdb_txn_begin((*p)->env, NULL, MDB_RDONLY, txn))) return ocr__lmdb_fail(ctx, D, "ocr_dataset_get", "mdb_txn_begin", rc);
    return OCR_OK;
}

static int ocr__lmdb_get_encoded(ocr_dataset *ds, ocr_ctx *ctx, int64_t index, unsigned char **bytes, size_t *size) {
    ocr__lmdb *D = (ocr__lmdb *)ds->impl;
    ocr__lmdb_proc *p;
    MDB_txn *txn;
    MDB_val v;
    char key[32];
    int rc;
    *bytes = NULL;
    *size = 0;
    snprintf(key, sizeof key, "image-%09lld", (long long)index + 1);
    if ((rc = ocr__lmdb_begin(ctx, ds, &p, &txn))) return rc;
    if ((rc = ocr__lmdb_read(ctx, D, txn, p->dbi, key, OCR_IMAGE_MAX_BYTES, &v)) == OCR_OK) {
        *bytes = (unsigned char *)OCR_MALLOC(v.mv_size ? v.mv_size : 1);
        if (!*bytes) rc = ocr_error(ctx, OCR_ENOMEM, "ocr_dataset_get: out of memory for key '%s'", key);
        else { memcpy(*bytes, v.mv_data, v.mv_size); *size = v.mv_size; }
    }
    mdb_txn_abort(txn);
    return rc;
}

static int ocr__lmdb_get(ocr_dataset *ds, ocr_ctx *ctx, int64_t index, unsigned flags, ocr_sample *out) {
    ocr__lmdb *D = (ocr__lmdb *)ds->impl;
    ocr__lmdb_proc *p;
    MDB_txn *txn;
    MDB_val img, lab;
    char ikey[32], lkey[32], where[4200];
    const char *l;
    size_t i, bad;
    int rc;
    memset(out, 0, sizeof *out);
    snprintf(ikey, sizeof ikey, "image-%09lld", (long long)index + 1);
    snprintf(lkey, sizeof lkey, "label-%09lld", (long long)index + 1);
    snprintf(out->id, sizeof out->id, "%s", ikey);
    if ((rc = ocr__lmdb_begin(ctx, ds, &p, &txn))) return rc;
    /* Values point into the read-only map: everything is parsed or decoded before the transaction ends. */
    if ((rc = ocr__lmdb_read(ctx, D, txn, p->dbi, ikey, OCR_IMAGE_MAX_BYTES, &img)) ||
        (rc = ocr__lmdb_read(ctx, D, txn, p->dbi, lkey, OCR_LABEL_MAX_BYTES, &lab)))
        goto done;
    snprintf(where, sizeof where, "ocr_dataset_get: LMDB '%s' key '%s'", D->path, ikey);
    if ((rc = ocr__d_sample_image(ctx, where, img.mv_data, img.mv_size, flags, out))) goto done;
    l = (const char *)lab.mv_data;
    if (!ocr__d_utf8_valid((const unsigned char *)l, lab.mv_size, &bad)) {
        rc = ocr_error(ctx, OCR_EFORMAT, "ocr_dataset_get: LMDB '%s' key '%s' is not UTF-8 text (byte 0x%02x at offset %zu)", D->path,
                       lkey, (unsigned char)l[bad], bad);
        goto done;
    }
    for (i = 0; i < lab.mv_size && (l[i] == ' ' || l[i] == '\t' || l[i] == '\r' || l[i] == '\n'); i++) {}
    snprintf(where, sizeof where, "LMDB '%s' key '%s'", D->path, lkey);
    /* a detection label is a JSON list; a JSON object goes to the same reader, which refuses it naming the key */
    if ((i < lab.mv_size && l[i] == '[') || ocr__lmdb_label_is_object(l, lab.mv_size)) {
        rc = ocr_label_parse_json(ctx, where, l, lab.mv_size, &out->polys, &out->n_polys);
    } else {
        /* Recognition set: the label is the text of one instance that covers the whole image. */
        double xy[8];
        ocr__d_polys L;
        xy[0] = 0; xy[1] = 0; xy[2] = out->image.width; xy[3] = 0;
        xy[4] = out->image.width; xy[5] = out->image.height; xy[6] = 0; xy[7] = out->image.height;
        memset(&L, 0, sizeof L);
        if (!ocr__d_polys_push(&L, xy, 4, l, lab.mv_size, lab.mv_size == 3 && memcmp(l, "###", 3) == 0))
            rc = ocr_error(ctx, OCR_ENOMEM, "ocr_dataset_get: out of memory");
        out->polys = L.items;
        out->n_polys = L.n;
    }
    if (!rc) out->content_hash = ocr__d_content_hash(img.mv_data, img.mv_size, lab.mv_data, lab.mv_size);
done:
    mdb_txn_abort(txn);
    if (rc) ocr_sample_free(out);
    return rc;
}

OCRDEF int ocr_dataset_open_lmdb(ocr_ctx *ctx, ocr_dataset *ds, const char *path) {
    const char *fn = "ocr_dataset_open_lmdb";
    ocr__lmdb *D;
    ocr__lmdb_proc *p;
    MDB_txn *txn;
    MDB_val v;
    struct stat st;
    char num[32];
    double count;
    int rc;
    memset(ds, 0, sizeof *ds);
    if (strlen(path) >= sizeof D->path) return ocr_error(ctx, OCR_EINVAL, "%s: path too long", fn);
    if (stat(path, &st) != 0) return ocr_error(ctx, OCR_EIO, "%s: '%s': %s", fn, path, strerror(errno));
    D = (ocr__lmdb *)OCR_MALLOC(sizeof *D);
    if (!D) return ocr_error(ctx, OCR_ENOMEM, "%s: out of memory", fn);
    memset(D, 0, sizeof *D);
    snprintf(D->path, sizeof D->path, "%s", path);
    D->env_flags = MDB_RDONLY | MDB_NOTLS | MDB_NORDAHEAD | (S_ISDIR(st.st_mode) ? 0u : (unsigned)MDB_NOSUBDIR);
    ds->impl = D;
    ds->close = ocr__lmdb_close;
    snprintf(ds->name, sizeof ds->name, "lmdb:%.240s", path);
    if ((rc = ocr__lmdb_begin(ctx, ds, &p, &txn))) {
        char prefix[64];
        snprintf(prefix, sizeof prefix, "%s", fn);
        ocr__d_error_prefix(ctx, rc, prefix);
        goto fail;
    }
    rc = ocr__lmdb_read(ctx, D, txn, p->dbi, "num-samples", 20, &v);
    if (rc == OCR_OK) {
        memcpy(num, v.mv_data, v.mv_size);
        num[v.mv_size] = 0;
        if (!ocr__d_parse_number(num, v.mv_size, &count) || count < 0 || count != floor(count) || count > (double)((int64_t)1 << 40) ||
            strspn(num, " 0123456789") != v.mv_size)
            rc = ocr_error(ctx, OCR_EFORMAT, "%s: LMDB '%s': key 'num-samples' holds '%s', not a decimal count", fn, path, num);
    } else if (rc == OCR_ENOTFOUND) {
        rc = ocr_error(ctx, OCR_EFORMAT, "%s: LMDB '%s' has no key 'num-samples' (not the image-/label-%%09d layout?)", fn, path);
    }
    mdb_txn_abort(txn);
    if (rc) goto fail;
    ds->count = (int64_t)count;
    ds->get = ocr__lmdb_get;
    ds->get_encoded = ocr__lmdb_get_encoded;
    return OCR_OK;
fail:
    ocr_dataset_close(ds);
    return rc;
}

/* ---- LMDB writer */

typedef struct { char *s; size_t len, cap; } ocr__d_str;

static int ocr__d_str_reserve(ocr__d_str *b, size_t extra) {
    size_t need;
    if (!ocr_size_add(b->len, extra + 1, &need)) return 0;
    if (need > b->cap) {
        size_t cap = b->cap ? b->cap : 256;
        char *s;
        while (cap < need) cap *= 2;
        if (!(s = (char *)OCR_REALLOC(b->s, cap))) return 0;
        b->s = s;
        b->cap = cap;
    }
    return 1;
}

static int ocr__d_str_printf(ocr__d_str *b, const char *fmt, ...) OCR__PRINTF(2, 3);
static int ocr__d_str_printf(ocr__d_str *b, const char *fmt, ...) {
    va_list ap;
    int n;
    va_start(ap, fmt);
    n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    if (n < 0 || !ocr__d_str_reserve(b, (size_t)n)) return 0;
    va_start(ap, fmt);
    vsnprintf(b->s + b->len, (size_t)n + 1, fmt, ap);
    va_end(ap);
    b->len += (size_t)n;
    return 1;
}

/* The label JSON of one sample, as ocr_label_parse_json reads it. */
static int ocr__d_label_json(const ocr_sample *s, ocr__d_str *b) {
    int i, k;
    b->len = 0;
    if (!ocr__d_str_printf(b, "[")) return 0;
    for (i = 0; i < s->n_polys; i++) {
        const ocr_polygon *p = &s->polys[i];
        const char *t = p->ignore ? "###" : p->text ? p->text : "";
        if (!ocr__d_str_printf(b, "%s{\"transcription\": ", i ? ", " : "") || !ocr__d_str_reserve(b, 6 * strlen(t) + 3)) return 0;
        /* quoted at the end of the label (ocr_json_quote appends after strlen: from the start that was quadratic in
           the label, and a 7.6 MB ground truth took four minutes) */
        b->s[b->len] = 0;
        b->len += ocr_json_quote(b->s + b->len, b->cap - b->len, t) - 1;
        if (!ocr__d_str_printf(b, ", \"points\": [")) return 0;
        for (k = 0; k < p->n_points; k++)
            if (!ocr__d_str_printf(b, "%s[%.9g, %.9g]", k ? ", " : "", p->points[k].x, p->points[k].y)) return 0;
        if (!ocr__d_str_printf(b, "]}")) return 0;
    }
    return ocr__d_str_printf(b, "]");
}

static int ocr__d_mdb_put(MDB_txn *txn, MDB_dbi dbi, const char *key, const void *data, size_t size) {
    MDB_val k, v;
    k.mv_data = (void *)key;
    k.mv_size = strlen(key);
    v.mv_data = (void *)data;
    v.mv_size = size;
    return mdb_put(txn, dbi, &k, &v, 0);
}

/* A recognition set's label: the text of the sample's one instance, which the reader must read back as that text. */
static int ocr__d_label_rec(ocr_ctx *ctx, const char *fn, const ocr_sample *s, int64_t index, ocr__d_str *b) {
    const char *t;
    size_t i, n;
    if (s->n_polys != 1)
        return ocr_error(ctx, OCR_EINVAL, "%s: sample %lld ('%s') has %d text instances; a recognition set holds one per image (the crop "
                         "of its text)", fn, (long long)index, s->id, s->n_polys);
    t = s->polys[0].ignore ? "###" : s->polys[0].text ? s->polys[0].text : "";
    n = strlen(t);
    if (n == 0) return ocr_error(ctx, OCR_EINVAL, "%s: sample %lld ('%s') has an empty transcription", fn, (long long)index, s->id);
    for (i = 0; i < n && (t[i] == ' ' || t[i] == '\t' || t[i] == '\r' || t[i] == '\n'); i++) {}
    if ((i < n && t[i] == '[') || ocr__lmdb_label_is_object(t, n))
        return ocr_error(ctx, OCR_EINVAL, "%s: sample %lld ('%s'): its text \"%.80s\" would read back as a JSON detection label", fn,
                         (long long)index, s->id, t);
    if (!s->polys[0].ignore && strcmp(t, "###") == 0)
        return ocr_error(ctx, OCR_EINVAL, "%s: sample %lld ('%s'): its text \"###\" would read back as a don't-care instance", fn,
                         (long long)index, s->id);
    b->len = 0;
    if (!ocr__d_str_reserve(b, n)) return ocr_error(ctx, OCR_ENOMEM, "%s: out of memory", fn);
    memcpy(b->s, t, n);
    b->len = n;
    return OCR_OK;
}

static int ocr__d_lmdb_write(ocr_ctx *ctx, const char *fn, const char *path, ocr_dataset *src, int rec, ocr_progress_fn progress,
                             void *user) {
    enum { BATCH = 256 };
    MDB_env *env = NULL;
    MDB_txn *txn = NULL;
    MDB_dbi dbi;
    size_t map_size = (size_t)1 << 28;
    ocr__d_str label;
    char data_path[4200], key[32];
    int64_t start = 0, i;
    int rc = OCR_OK, mrc;
    if (!src || !src->get || !src->get_encoded)
        return ocr_error(ctx, OCR_EINVAL, "%s: the source dataset must provide get and get_encoded", fn);
    snprintf(data_path, sizeof data_path, "%s/data.mdb", path);
    if (ocr__d_is_regular_file(data_path))
        return ocr_error(ctx, OCR_EINVAL, "%s: '%s' already holds an LMDB; write into a new directory", fn, path);
    if (mkdir(path, 0755) != 0 && errno != EEXIST) return ocr_error(ctx, OCR_EIO, "%s: cannot create '%s': %s", fn, path, strerror(errno));
    memset(&label, 0, sizeof label);
    if ((mrc = mdb_env_create(&env)) || (mrc = mdb_env_set_mapsize(env, map_size)) || (mrc = mdb_env_open(env, path, 0, 0644))) {
        rc = ocr_error(ctx, OCR_EIO, "%s: LMDB '%s': cannot create the environment: %s", fn, path, mdb_strerror(mrc));
        goto done;
    }
    /* Batches of BATCH samples per write transaction; a full map is doubled and the batch redone. */
    while (start <= src->count && !rc) {
        int64_t end = start + BATCH < src->count ? start + BATCH : src->count;
        if ((mrc = mdb_txn_begin(env, NULL, 0, &txn)) || (mrc = mdb_dbi_open(txn, NULL, 0, &dbi))) goto mdb_fail;
        for (i = start; i < end; i++) {
            ocr_sample s;
            unsigned char *bytes;
            size_t size;
            if ((rc = ocr_dataset_get(ctx, src, i, OCR_SAMPLE_LABELS_ONLY, &s))) break;
            if ((rc = src->get_encoded(src, ctx, i, &bytes, &size))) { ocr_sample_free(&s); break; }
            if (rec) rc = ocr__d_label_rec(ctx, fn, &s, i, &label);
            else if (!ocr__d_label_json(&s, &label)) rc = ocr_error(ctx, OCR_ENOMEM, "%s: out of memory", fn);
            /* the reader's caps: never write a record it would refuse */
            if (!rc && label.len > OCR_LABEL_MAX_BYTES)
                rc = ocr_error(ctx, OCR_EOVERFLOW, "%s: sample %lld ('%s'): its label is %zu bytes, above the %zu-byte cap the reader "
                               "enforces", fn, (long long)i, s.id, label.len, OCR_LABEL_MAX_BYTES);
            else if (!rc && size > OCR_IMAGE_MAX_BYTES)
                rc = ocr_error(ctx, OCR_EOVERFLOW, "%s: sample %lld ('%s'): its image is %zu bytes, above the %zu-byte cap the "
                               "reader enforces", fn, (long long)i, s.id, size, (size_t)OCR_IMAGE_MAX_BYTES);
            ocr_sample_free(&s);
            if (!rc) {
                snprintf(key, sizeof key, "image-%09lld", (long long)i + 1);
                mrc = ocr__d_mdb_put(txn, dbi, key, bytes, size);
                snprintf(key, sizeof key, "label-%09lld", (long long)i + 1);
                if (!mrc) mrc = ocr__d_mdb_put(txn, dbi, key, label.s, label.len);
            }
            OCR_FREE(bytes);
            if (rc || mrc) break;
        }
        if (rc) break;
        if (!mrc && end == src->count) {
            snprintf(key, sizeof key, "%lld", (long long)src->count);
            mrc = ocr__d_mdb_put(txn, dbi, "num-samples", key, strlen(key));
        }
        if (!mrc) { mrc = mdb_txn_commit(txn); txn = NULL; }
        if (mrc == MDB_MAP_FULL) {
            if (txn) { mdb_txn_abort(txn); txn = NULL; }
            map_size *= 2;
            if ((mrc = mdb_env_set_mapsize(env, map_size))) goto mdb_fail;
            continue;
        }
        if (mrc) goto mdb_fail;
        if (progress) progress(user, end, src->count);
        if (end == src->count) break;
        start = end;
    }
    goto done;
mdb_fail:
    rc = ocr_error(ctx, mrc == ENOMEM ? OCR_ENOMEM : OCR_EIO, "%s: LMDB '%s': %s", fn, path, mdb_strerror(mrc));
done:
    if (txn) mdb_txn_abort(txn);
    if (env) { if (!rc) mdb_env_sync(env, 1); mdb_env_close(env); }
    OCR_FREE(label.s);
    return rc;
}

OCRDEF int ocr_lmdb_write_dataset(ocr_ctx *ctx, const char *path, ocr_dataset *src, ocr_progress_fn progress, void *user) {
    return ocr__d_lmdb_write(ctx, "ocr_lmdb_write_dataset", path, src, 0, progress, user);
}

OCRDEF int ocr_lmdb_write_rec_dataset(ocr_ctx *ctx, const char *path, ocr_dataset *src, ocr_progress_fn progress, void *user) {
    return ocr__d_lmdb_write(ctx, "ocr_lmdb_write_rec_dataset", path, src, 1, progress, user);
}

/* ================================================================ [augment] implementation */

/* ---------------------------------------------------------------- augmentation */

/* Polygons must be finite and within a sane range before any rounding or arithmetic on them. */
static int ocr__aug_check_polys(ocr_ctx *ctx, const char *fn, const ocr_polygon *polys, int n, const char *id) {
    int i, k;
    if (n < 0 || (n > 0 && !polys)) return ocr_error(ctx, OCR_EINVAL, "%s: sample '%s' has %d polygons and array %p", fn, id, n, (const void *)polys);
    for (i = 0; i < n; i++) {
        if (polys[i].n_points < 1 || !polys[i].points)
            return ocr_error(ctx, OCR_EINVAL, "%s: sample '%s' polygon %d has %d points", fn, id, i, polys[i].n_points);
        for (k = 0; k < polys[i].n_points; k++) {
            float x = polys[i].points[k].x, y = polys[i].points[k].y;
            if (!ocr__d_coord_ok(x) || !ocr__d_coord_ok(y))
                return ocr_error(ctx, isfinite(x) && isfinite(y) ? OCR_ERANGE : OCR_ENONFINITE,
                                 "%s: sample '%s' polygon %d point %d is (%g, %g); coordinates must be finite and within +-%g", fn, id,
                                 i, k, x, y, OCR_COORD_MAX);
        }
    }
    return OCR_OK;
}

static int ocr__aug_check_sample(ocr_ctx *ctx, const char *fn, const ocr_sample *s) {
    int rc;
    if (!s) return ocr_error(ctx, OCR_EINVAL, "%s: sample is NULL", fn);
    if ((rc = ocr__d_image_check(ctx, fn, &s->image))) return rc;
    return ocr__aug_check_polys(ctx, fn, s->polys, s->n_polys, s->id);
}

typedef struct { const ocr_image *src; ocr_image *dst; double inv[6]; int fill_w, fill_h; } ocr__aug_warp_job;

static void ocr__aug_warp_rows(void *arg, int64_t y_begin, int64_t y_end, int thread_index) {
    const ocr__aug_warp_job *j = (const ocr__aug_warp_job *)arg;
    const int W = j->src->width, H = j->src->height, C = j->src->channels, OW = j->dst->width;
    const uint8_t *src = j->src->pixels;
    int64_t y;
    (void)thread_index;
    for (y = y_begin; y < y_end; y++) {
        uint8_t *row = j->dst->pixels + (size_t)y * (size_t)OW * (size_t)C;
        double u = j->inv[0] * 0.5 + j->inv[1] * ((double)y + 0.5) + j->inv[2];
        double v = j->inv[3] * 0.5 + j->inv[4] * ((double)y + 0.5) + j->inv[5];
        int x, c;
        memset(row, 0, (size_t)OW * (size_t)C);
        if (y >= j->fill_h) continue;
        for (x = 0; x < j->fill_w; x++, u += j->inv[0], v += j->inv[3]) {
            double fx = u - 0.5, fy = v - 0.5;
            int x0, y0, x1, y1;
            float tx, ty;
            const uint8_t *p00, *p01, *p10, *p11;
            if (!(u >= 0 && v >= 0 && u < W && v < H)) continue; /* outside the source: zero */
            x0 = (int)(fx + 1.0) - 1; /* fx >= -0.5 here, so truncation of fx + 1 is floor without the libm call */
            y0 = (int)(fy + 1.0) - 1;
            tx = (float)(fx - x0);
            ty = (float)(fy - y0);
            x1 = x0 + 1 < W ? x0 + 1 : W - 1;
            y1 = y0 + 1 < H ? y0 + 1 : H - 1;
            x0 = x0 < 0 ? 0 : x0;
            y0 = y0 < 0 ? 0 : y0;
            p00 = src + ((size_t)y0 * (size_t)W + (size_t)x0) * (size_t)C;
            p01 = src + ((size_t)y0 * (size_t)W + (size_t)x1) * (size_t)C;
            p10 = src + ((size_t)y1 * (size_t)W + (size_t)x0) * (size_t)C;
            p11 = src + ((size_t)y1 * (size_t)W + (size_t)x1) * (size_t)C;
            for (c = 0; c < C; c++) {
                float top = p00[c] + (p01[c] - p00[c]) * tx, bottom = p10[c] + (p11[c] - p10[c]) * tx;
                row[(size_t)x * (size_t)C + (size_t)c] = (uint8_t)(top + (bottom - top) * ty + 0.5f);
            }
        }
    }
}

static int ocr__aug_poly_outside(const ocr_polygon *p, double x0, double y0, double x1, double y1) {
    double lo_x = p->points[0].x, hi_x = lo_x, lo_y = p->points[0].y, hi_y = lo_y;
    int k;
    for (k = 1; k < p->n_points; k++) {
        lo_x = p->points[k].x < lo_x ? p->points[k].x : lo_x; hi_x = p->points[k].x > hi_x ? p->points[k].x : hi_x;
        lo_y = p->points[k].y < lo_y ? p->points[k].y : lo_y; hi_y = p->points[k].y > hi_y ? p->points[k].y : hi_y;
    }
    return hi_x < x0 || lo_x > x1 || hi_y < y0 || lo_y > y1;
}

/* Resamples the image through pix (input -> output coordinates) and moves the polygons through poly; with drop,
   polygons entirely outside the filled part go. The sample changes only when everything succeeded. */
static int ocr__aug_apply(ocr_ctx *ctx, const char *fn, ocr_sample *s, const double pix[6], const double poly[6], int out_w,
                          int out_h, int fill_w, int fill_h, int drop) {
    ocr__aug_warp_job job;
    ocr_image dst;
    double det = pix[0] * pix[4] - pix[1] * pix[3];
    int rc, i, k, kept = 0;
    if (out_w < 1 || out_h < 1 || out_w > OCR_IMAGE_MAX_SIDE || out_h > OCR_IMAGE_MAX_SIDE || fill_w < 0 || fill_h < 0 ||
        fill_w > out_w || fill_h > out_h)
        return ocr_error(ctx, OCR_ERANGE, "%s: output %dx%d (filled %dx%d) for sample '%s'; sides must be in [1, %d] and the fill within the output",
                         fn, out_w, out_h, fill_w, fill_h, s->id, OCR_IMAGE_MAX_SIDE);
    for (i = 0; i < 6; i++)
        if (!isfinite(pix[i]) || !isfinite(poly[i])) return ocr_error(ctx, OCR_ENONFINITE, "%s: transform entry %d is not finite", fn, i);
    if (!(fabs(det) > 1e-12)) return ocr_error(ctx, OCR_EINVAL, "%s: transform is singular (determinant %g)", fn, det);
    if ((rc = ocr_image_alloc(ctx, &dst, out_w, out_h, s->image.channels))) return rc;
    job.src = &s->image;
    job.dst = &dst;
    job.inv[0] = pix[4] / det;
    job.inv[1] = -pix[1] / det;
    job.inv[3] = -pix[3] / det;
    job.inv[4] = pix[0] / det;
    job.inv[2] = -(job.inv[0] * pix[2] + job.inv[1] * pix[5]);
    job.inv[5] = -(job.inv[3] * pix[2] + job.inv[4] * pix[5]);
    job.fill_w = fill_w;
    job.fill_h = fill_h;
    ocr_parallel_for(ctx, out_h, 16, ocr__aug_warp_rows, &job);
    ocr_image_free(&s->image);
    s->image = dst;
    for (i = 0; i < s->n_polys; i++) {
        ocr_polygon *p = &s->polys[i];
        for (k = 0; k < p->n_points; k++) {
            double x = p->points[k].x, y = p->points[k].y;
            p->points[k].x = (float)(poly[0] * x + poly[1] * y + poly[2]);
            p->points[k].y = (float)(poly[3] * x + poly[4] * y + poly[5]);
        }
        if (drop && ocr__aug_poly_outside(p, 0, 0, fill_w, fill_h)) {
            OCR_FREE(p->points);
            OCR_FREE(p->text);
            continue;
        }
        s->polys[kept++] = *p;
    }
    s->n_polys = kept;
    return OCR_OK;
}

OCRDEF int ocr_sample_warp(ocr_ctx *ctx, ocr_sample *s, const double fwd[6], int out_w, int out_h, int fill_w, int fill_h) {
    int rc;
    if ((rc = ocr__aug_check_sample(ctx, "ocr_sample_warp", s))) return rc;
    if (!fwd) return ocr_error(ctx, OCR_EINVAL, "ocr_sample_warp: transform is NULL");
    return ocr__aug_apply(ctx, "ocr_sample_warp", s, fwd, fwd, out_w, out_h, fill_w, fill_h, 0);
}

OCRDEF int ocr_sample_flip(ocr_ctx *ctx, ocr_sample *s) {
    double m[6];
    int rc;
    if ((rc = ocr__aug_check_sample(ctx, "ocr_sample_flip", s))) return rc;
    m[0] = -1; m[1] = 0; m[2] = s->image.width;
    m[3] = 0; m[4] = 1; m[5] = 0;
    return ocr__aug_apply(ctx, "ocr_sample_flip", s, m, m, s->image.width, s->image.height, s->image.width, s->image.height, 0);
}

/* Counter-clockwise on screen (y down) about (cx, cy), as OpenCV's getRotationMatrix2D. */
static void ocr__aug_rotation(double degrees, double cx, double cy, double m[6]) {
    double a = degrees * 3.14159265358979323846 / 180.0, c = cos(a), s = sin(a);
    m[0] = c; m[1] = s; m[2] = cx - c * cx - s * cy;
    m[3] = -s; m[4] = c; m[5] = cy + s * cx - c * cy;
}

OCRDEF int ocr_sample_rotate(ocr_ctx *ctx, ocr_sample *s, float degrees) {
    double m[6];
    int rc;
    if ((rc = ocr__aug_check_sample(ctx, "ocr_sample_rotate", s))) return rc;
    if (!isfinite(degrees)) return ocr_error(ctx, OCR_ENONFINITE, "ocr_sample_rotate: angle is %g", degrees);
    ocr__aug_rotation(degrees, s->image.width * 0.5, s->image.height * 0.5, m);
    return ocr__aug_apply(ctx, "ocr_sample_rotate", s, m, m, s->image.width, s->image.height, s->image.width, s->image.height, 0);
}

OCRDEF int ocr_sample_resize(ocr_ctx *ctx, ocr_sample *s, int width, int height) {
    double m[6];
    int rc;
    if ((rc = ocr__aug_check_sample(ctx, "ocr_sample_resize", s))) return rc;
    m[0] = (double)width / s->image.width; m[1] = 0; m[2] = 0;
    m[3] = 0; m[4] = (double)height / s->image.height; m[5] = 0;
    return ocr__aug_apply(ctx, "ocr_sample_resize", s, m, m, width, height, width, height, 0);
}

/* Crop (x, y, w, h) scaled to fit out_w x out_h, top-left: the map and the size of the filled part. */
static void ocr__aug_crop_map(double x, double y, double w, double h, int out_w, int out_h, double m[6], int *fill_w, int *fill_h) {
    double scale = (double)out_w / w < (double)out_h / h ? (double)out_w / w : (double)out_h / h;
    *fill_w = (int)(w * scale + 1e-6);
    *fill_h = (int)(h * scale + 1e-6);
    *fill_w = *fill_w < 1 ? 1 : *fill_w > out_w ? out_w : *fill_w;
    *fill_h = *fill_h < 1 ? 1 : *fill_h > out_h ? out_h : *fill_h;
    /* each axis by its own exact ratio, so the pixels and polygons agree even after the rounding down */
    m[0] = *fill_w / w; m[1] = 0; m[2] = -x * m[0];
    m[3] = 0; m[4] = *fill_h / h; m[5] = -y * m[4];
}

OCRDEF int ocr_sample_crop(ocr_ctx *ctx, ocr_sample *s, int x, int y, int w, int h, int out_w, int out_h) {
    double m[6];
    int rc, fill_w, fill_h;
    if ((rc = ocr__aug_check_sample(ctx, "ocr_sample_crop", s))) return rc;
    if (w < 1 || h < 1 || out_w < 1 || out_h < 1)
        return ocr_error(ctx, OCR_ERANGE, "ocr_sample_crop: crop %dx%d into %dx%d for sample '%s'; sizes must be >= 1", w, h, out_w, out_h, s->id);
    ocr__aug_crop_map(x, y, w, h, out_w, out_h, m, &fill_w, &fill_h);
    return ocr__aug_apply(ctx, "ocr_sample_crop", s, m, m, out_w, out_h, fill_w, fill_h, 1);
}

/* One side of the crop: two gap positions, from two random gap runs when there are several. */
static void ocr__aug_crop_pick(ocr_rng *rng, const int *gaps, int n_gaps, const int *run_start, int n_runs, int *lo, int *hi) {
    int a, b;
    if (n_runs > 1) {
        int r1 = (int)ocr_rng_below(rng, (uint32_t)n_runs), r2 = (int)ocr_rng_below(rng, (uint32_t)n_runs);
        a = gaps[run_start[r1] + (int)ocr_rng_below(rng, (uint32_t)(run_start[r1 + 1] - run_start[r1]))];
        b = gaps[run_start[r2] + (int)ocr_rng_below(rng, (uint32_t)(run_start[r2 + 1] - run_start[r2]))];
    } else {
        a = gaps[ocr_rng_below(rng, (uint32_t)n_gaps)];
        b = gaps[ocr_rng_below(rng, (uint32_t)n_gaps)];
    }
    *lo = a < b ? a : b;
    *hi = a < b ? b : a;
}

/* Positions not covered by any care polygon along one axis, and the start of each run of consecutive ones
   (run_start[n_runs] = n_gaps). DBNet's split_regions drops the last run; this keeps it. */
static void ocr__aug_crop_gaps(const uint8_t *covered, int size, int *gaps, int *n_gaps, int *run_start, int *n_runs) {
    int i;
    *n_gaps = *n_runs = 0;
    for (i = 0; i < size; i++) {
        if (covered[i]) continue;
        if (*n_gaps == 0 || gaps[*n_gaps - 1] != i - 1) run_start[(*n_runs)++] = *n_gaps;
        gaps[(*n_gaps)++] = i;
    }
    run_start[*n_runs] = *n_gaps;
}

OCRDEF int ocr_random_crop_rect(ocr_ctx *ctx, ocr_rng *rng, const ocr_polygon *polys, int n_polys, int width, int height,
                                int max_tries, float min_side_ratio, int rect[4]) {
    const char *fn = "ocr_random_crop_rect";
    uint8_t *covered;
    int *ints, *xg, *xr, *yg, *yr, nxg, nxr, nyg, nyr, i, k, t, n_care = 0, rc;
    size_t n_ints;
    if (!rng || !rect) return ocr_error(ctx, OCR_EINVAL, "%s: rng or rect is NULL", fn);
    /* the size may be virtual (the image as it would be after a resize) and so above the image cap */
    if (width < 1 || height < 1 || width > OCR_IMAGE_MAX_SIDE * 100 || height > OCR_IMAGE_MAX_SIDE * 100)
        return ocr_error(ctx, OCR_ERANGE, "%s: image size %dx%d", fn, width, height);
    if (max_tries < 0 || !(min_side_ratio >= 0 && min_side_ratio <= 1))
        return ocr_error(ctx, OCR_EINVAL, "%s: max_tries = %d, min_side_ratio = %g (need >= 0 and [0, 1])", fn, max_tries, min_side_ratio);
    if ((rc = ocr__aug_check_polys(ctx, fn, polys, n_polys, "?"))) return rc;
    rect[0] = rect[1] = 0;
    rect[2] = width;
    rect[3] = height;
    for (i = 0; i < n_polys; i++) n_care += !polys[i].ignore;
    if (n_care == 0) return OCR_OK; /* nothing to keep: no try could succeed */
    n_ints = 2 * ((size_t)width + (size_t)height) + 4;
    covered = (uint8_t *)OCR_MALLOC((size_t)width + (size_t)height);
    ints = (int *)OCR_MALLOC(n_ints * sizeof(int));
    if (!covered || !ints) { OCR_FREE(covered); OCR_FREE(ints); return ocr_error(ctx, OCR_ENOMEM, "%s: out of memory", fn); }
    memset(covered, 0, (size_t)width + (size_t)height);
    xg = ints; xr = xg + width; yg = xr + width + 1; yr = yg + height;
    /* Mark the rounded extent [min, max) of every care polygon on both axes (numpy rounds half to even: rint). */
    for (i = 0; i < n_polys; i++) {
        double lo_x = 1e9, hi_x = -1e9, lo_y = 1e9, hi_y = -1e9;
        int a, b;
        if (polys[i].ignore) continue;
        for (k = 0; k < polys[i].n_points; k++) {
            double x = rint(polys[i].points[k].x), y = rint(polys[i].points[k].y);
            lo_x = x < lo_x ? x : lo_x; hi_x = x > hi_x ? x : hi_x;
            lo_y = y < lo_y ? y : lo_y; hi_y = y > hi_y ? y : hi_y;
        }
        a = (int)(lo_x < 0 ? 0 : lo_x > width ? width : lo_x);
        b = (int)(hi_x < 0 ? 0 : hi_x > width ? width : hi_x);
        for (k = a; k < b; k++) covered[k] = 1;
        a = (int)(lo_y < 0 ? 0 : lo_y > height ? height : lo_y);
        b = (int)(hi_y < 0 ? 0 : hi_y > height ? height : hi_y);
        for (k = a; k < b; k++) covered[width + k] = 1;
    }
    ocr__aug_crop_gaps(covered, width, xg, &nxg, xr, &nxr);
    ocr__aug_crop_gaps(covered + width, height, yg, &nyg, yr, &nyr);
    for (t = 0; nxg && nyg && t < max_tries; t++) {
        int x0, x1, y0, y1;
        ocr__aug_crop_pick(rng, xg, nxg, xr, nxr, &x0, &x1);
        ocr__aug_crop_pick(rng, yg, nyg, yr, nyr, &y0, &y1);
        if (x1 - x0 < min_side_ratio * width || y1 - y0 < min_side_ratio * height || x1 == x0 || y1 == y0) continue;
        for (i = 0; i < n_polys; i++)
            if (!polys[i].ignore && !ocr__aug_poly_outside(&polys[i], x0, y0, x1, y1)) break;
        if (i < n_polys) {
            rect[0] = x0; rect[1] = y0; rect[2] = x1 - x0; rect[3] = y1 - y0;
            break;
        }
    }
    OCR_FREE(covered);
    OCR_FREE(ints);
    return OCR_OK;
}

OCRDEF ocr_augment_config ocr_augment_defaults(void) {
    ocr_augment_config c;
    memset(&c, 0, sizeof c);
    c.flip_prob = 0.5f;
    c.max_rotate_deg = 10.0f;
    c.min_scale = 0.5f;
    c.max_scale = 3.0f;
    c.crop_width = 640;
    c.crop_height = 640;
    c.crop_max_tries = 10;
    c.crop_min_side_ratio = 0.1f;
    return c;
}

/* 2x3 affine maps composed as a then b. */
static void ocr__aug_then(const double a[6], const double b[6], double out[6]) {
    double r[6];
    r[0] = b[0] * a[0] + b[1] * a[3]; r[1] = b[0] * a[1] + b[1] * a[4]; r[2] = b[0] * a[2] + b[1] * a[5] + b[2];
    r[3] = b[3] * a[0] + b[4] * a[3]; r[4] = b[3] * a[1] + b[4] * a[4]; r[5] = b[3] * a[2] + b[4] * a[5] + b[5];
    memcpy(out, r, sizeof r);
}

OCRDEF int ocr_augment_sample(ocr_ctx *ctx, ocr_rng *rng, const ocr_augment_config *cfg, ocr_sample *s) {
    const char *fn = "ocr_augment_sample";
    double flip[6], rot[6], size[6], crop[6], geo[6], total[6];
    ocr_polygon *moved = NULL;
    ocr_point *points = NULL;
    size_t n_points = 0;
    int rc, W, H, SW, SH, i, k, rect[4], fill_w, fill_h, flipped;
    float angle, scale;
    if (!rng || !cfg) return ocr_error(ctx, OCR_EINVAL, "%s: rng or cfg is NULL", fn);
    if (!(cfg->flip_prob >= 0 && cfg->flip_prob <= 1) || !(cfg->max_rotate_deg >= 0 && cfg->max_rotate_deg <= 180) ||
        !(cfg->min_scale > 0 && cfg->min_scale <= cfg->max_scale && cfg->max_scale <= 100) || cfg->crop_width < 1 ||
        cfg->crop_height < 1 || cfg->crop_width > OCR_IMAGE_MAX_SIDE || cfg->crop_height > OCR_IMAGE_MAX_SIDE ||
        cfg->crop_max_tries < 0 || !(cfg->crop_min_side_ratio >= 0 && cfg->crop_min_side_ratio <= 1))
        return ocr_error(ctx, OCR_EINVAL,
                         "%s: bad config (flip_prob %g in [0,1], max_rotate_deg %g in [0,180], scale %g..%g within (0,100], crop %dx%d "
                         "in [1,%d], crop_max_tries %d >= 0, crop_min_side_ratio %g in [0,1])", fn, cfg->flip_prob, cfg->max_rotate_deg,
                         cfg->min_scale, cfg->max_scale, cfg->crop_width, cfg->crop_height, OCR_IMAGE_MAX_SIDE, cfg->crop_max_tries,
                         cfg->crop_min_side_ratio);
    if ((rc = ocr__aug_check_sample(ctx, fn, s))) return rc;
    W = s->image.width;
    H = s->image.height;
    /* Fixed draw order: flip, angle, scale, then the crop. */
    flipped = ocr_rng_uniform(rng) < cfg->flip_prob;
    angle = (2.0f * ocr_rng_uniform(rng) - 1.0f) * cfg->max_rotate_deg;
    scale = cfg->min_scale + (cfg->max_scale - cfg->min_scale) * ocr_rng_uniform(rng);
    SW = (int)rint(W * (double)scale);
    SH = (int)rint(H * (double)scale);
    SW = SW < 1 ? 1 : SW;
    SH = SH < 1 ? 1 : SH;
    flip[0] = flipped ? -1 : 1; flip[1] = 0; flip[2] = flipped ? W : 0;
    flip[3] = 0; flip[4] = 1; flip[5] = 0;
    ocr__aug_rotation(angle, W * 0.5, H * 0.5, rot);
    size[0] = (double)SW / W; size[1] = 0; size[2] = 0;
    size[3] = 0; size[4] = (double)SH / H; size[5] = 0;
    ocr__aug_then(flip, rot, geo);
    ocr__aug_then(geo, size, geo);
    /* The crop is chosen on the polygons as they would be after flip, rotation and resize; the pixels are then
       resampled once through the whole chain. */
    for (i = 0; i < s->n_polys; i++) n_points += (size_t)s->polys[i].n_points;
    moved = (ocr_polygon *)OCR_MALLOC((size_t)(s->n_polys > 0 ? s->n_polys : 1) * sizeof(ocr_polygon));
    points = (ocr_point *)OCR_MALLOC((n_points ? n_points : 1) * sizeof(ocr_point));
    if (!moved || !points) { rc = ocr_error(ctx, OCR_ENOMEM, "%s: out of memory", fn); goto done; }
    for (i = 0, n_points = 0; i < s->n_polys; i++) {
        moved[i] = s->polys[i];
        moved[i].points = points + n_points;
        for (k = 0; k < s->polys[i].n_points; k++, n_points++) {
            double x = s->polys[i].points[k].x, y = s->polys[i].points[k].y;
            points[n_points].x = (float)(geo[0] * x + geo[1] * y + geo[2]);
            points[n_points].y = (float)(geo[3] * x + geo[4] * y + geo[5]);
        }
    }
    if ((rc = ocr_random_crop_rect(ctx, rng, moved, s->n_polys, SW, SH, cfg->crop_max_tries, cfg->crop_min_side_ratio, rect))) goto done;
    ocr__aug_crop_map(rect[0], rect[1], rect[2], rect[3], cfg->crop_width, cfg->crop_height, crop, &fill_w, &fill_h);
    ocr__aug_then(geo, crop, total);
    rc = ocr__aug_apply(ctx, fn, s, total, total, cfg->crop_width, cfg->crop_height, fill_w, fill_h, 1);
done:
    OCR_FREE(moved);
    OCR_FREE(points);
    return rc;
}

/* ---------------------------------------------------------------- normalisation */

OCRDEF int ocr_image_normalize(ocr_ctx *ctx, const ocr_image *img, ocr_norm_mode mode, ocr_tensor *out) {
    const char *fn = "ocr_image_normalize";
    /* per output channel: which source channel, what to subtract, what to multiply by */
    static const int dbnet_src[3] = {2, 1, 0}, imagenet_src[3] = {0, 1, 2};
    static const double dbnet_mean[3] = {122.67891434, 116.66876762, 104.00698793};
    static const double imagenet_mean[3] = {0.485, 0.456, 0.406}, imagenet_std[3] = {0.229, 0.224, 0.225};
    const int *src_of;
    float sub[3], mul[3];
    size_t plane, i;
    int rc, c;
    if ((rc = ocr__d_image_check(ctx, fn, img))) return rc;
    if (img->channels != 1 && img->channels != 3)
        return ocr_error(ctx, OCR_EINVAL, "%s: image has %d channels; expected RGB (3) or grey (1)", fn, img->channels);
    if (mode != OCR_NORM_DBNET && mode != OCR_NORM_IMAGENET) return ocr_error(ctx, OCR_EINVAL, "%s: unknown mode %d", fn, (int)mode);
    if ((rc = ocr_check_dtype(ctx, fn, out, OCR_F32)) || (rc = ocr_check_device(ctx, fn, out, OCR_DEVICE_CPU))) return rc;
    if (out->shape.ndim == 4 && out->shape.dim[0] == 1) rc = ocr_check_shape(ctx, fn, out, ocr_shape4(1, 3, img->height, img->width));
    else rc = ocr_check_shape(ctx, fn, out, ocr_shape3(3, img->height, img->width));
    if (rc) return rc;
    for (c = 0; c < 3; c++) {
        if (mode == OCR_NORM_DBNET) { sub[c] = (float)dbnet_mean[c]; mul[c] = (float)(1.0 / 255.0); }
        else { sub[c] = (float)(imagenet_mean[c] * 255.0); mul[c] = (float)(1.0 / (255.0 * imagenet_std[c])); }
    }
    src_of = mode == OCR_NORM_DBNET ? dbnet_src : imagenet_src;
    plane = (size_t)img->width * (size_t)img->height;
    for (c = 0; c < 3; c++) {
        float *dst = (float *)out->data + (size_t)c * plane;
        int from = img->channels == 3 ? src_of[c] : 0;
        for (i = 0; i < plane; i++) dst[i] = ((float)img->pixels[i * (size_t)img->channels + (size_t)from] - sub[c]) * mul[c];
    }
    return OCR_OK;
}

OCRDEF int ocr_infer_input_size(ocr_ctx *ctx, int width, int height, int short_side, int long_side, int *in_w, int *in_h) {
    const char *fn = "ocr_infer_input_size";
    int by_long = long_side > 0, target = by_long ? long_side : short_side;
    int w_is_ref = by_long ? width >= height : width < height; /* the side scaled to the target */
    double other;
    if (!in_w || !in_h) return ocr_error(ctx, OCR_EINVAL, "%s: in_w or in_h is NULL", fn);
    if (width < 1 || height < 1 || target < 1 || target > OCR_IMAGE_MAX_SIDE)
        return ocr_error(ctx, OCR_ERANGE, "%s: image %dx%d with side %d; sides must be >= 1 and the side at most %d", fn, width,
                         height, target, OCR_IMAGE_MAX_SIDE);
    target = (target + 31) / 32 * 32;
    /* demo.py's order of operations: target / reference side * other side / 32, then ceil */
    other = ceil((double)target / (w_is_ref ? width : height) * (w_is_ref ? height : width) / 32.0) * 32.0;
    if (other > OCR_IMAGE_MAX_SIDE)
        return ocr_error(ctx, OCR_ERANGE, "%s: a %dx%d image would need a %s side of %.0f px (at most %d): scale the %s side instead",
                         fn, width, height, by_long ? "short" : "long", other, OCR_IMAGE_MAX_SIDE, by_long ? "short" : "long");
    *in_w = w_is_ref ? target : (int)other;
    *in_h = w_is_ref ? (int)other : target;
    return OCR_OK;
}

OCRDEF int ocr_infer_input_size_scaled(ocr_ctx *ctx, int width, int height, double scale, int max_side, int *in_w, int *in_h) {
    double longest = (width > height ? width : height) * scale;
    if (!in_w || !in_h || width < 1 || height < 1 || !(scale > 0 && scale <= 64) || max_side < 32 || max_side > OCR_IMAGE_MAX_SIDE)
        return ocr_error(ctx, OCR_ERANGE, "ocr_infer_input_size_scaled: image %dx%d, scale %g (in (0, 64]), max_side %d (32 to %d)", width,
                         height, scale, max_side, OCR_IMAGE_MAX_SIDE);
    if (longest > max_side) scale *= max_side / longest;
    /* a hair below the exact product, so that 320 * 1.4f is 448 and not 480 */
    *in_w = (int)ceil(width * scale / 32.0 - 1e-6) * 32;
    *in_h = (int)ceil(height * scale / 32.0 - 1e-6) * 32;
    if (*in_w < 32) *in_w = 32;
    if (*in_h < 32) *in_h = 32;
    return OCR_OK;
}

OCRDEF int ocr_image_network_input(ocr_ctx *ctx, const ocr_image *img, ocr_norm_mode mode, ocr_tensor *out) {
    const char *fn = "ocr_image_network_input";
    char d[200];
    ocr_sample s;
    int64_t H, W;
    int rc;
    if ((rc = ocr__d_image_check(ctx, fn, img)) || (rc = ocr_check_tensor(ctx, fn, out)) || (rc = ocr_check_dtype(ctx, fn, out, OCR_F32)) ||
        (rc = ocr_check_device(ctx, fn, out, OCR_DEVICE_CPU)))
        return rc;
    if (!(out->shape.ndim == 3 || (out->shape.ndim == 4 && out->shape.dim[0] == 1)))
        return ocr_error(ctx, OCR_ESHAPE, "%s: out %s must be [3, H, W] or [1, 3, H, W]", fn, ocr_tensor_describe(out, d, sizeof d));
    H = out->shape.dim[out->shape.ndim - 2];
    W = out->shape.dim[out->shape.ndim - 1];
    if (H == img->height && W == img->width) return ocr_image_normalize(ctx, img, mode, out);
    if (H > OCR_IMAGE_MAX_SIDE || W > OCR_IMAGE_MAX_SIDE)
        return ocr_error(ctx, OCR_ERANGE, "%s: out %s is larger than %d pixels a side", fn, ocr_tensor_describe(out, d, sizeof d), OCR_IMAGE_MAX_SIDE);
    /* the resize works on a sample: a copy of img without polygons */
    memset(&s, 0, sizeof s);
    snprintf(s.id, sizeof s.id, "%s", "network input");
    if (!(rc = ocr_image_alloc(ctx, &s.image, img->width, img->height, img->channels))) {
        memcpy(s.image.pixels, img->pixels, (size_t)img->width * (size_t)img->height * (size_t)img->channels);
        if (!(rc = ocr_sample_resize(ctx, &s, (int)W, (int)H))) rc = ocr_image_normalize(ctx, &s.image, mode, out);
    }
    ocr_sample_free(&s);
    return rc;
}

/* ================================================================ [cache] implementation */

#include <pthread.h>

#define OCR__CACHE_MAGIC "OCRCACHE"
enum { OCR__CACHE_HEAD = 8 + 4 + 4 + 16 + 8, OCR__CACHE_TAIL = 16 };

static void ocr__d_put_le(unsigned char *p, uint64_t v, int n) {
    int i;
    for (i = 0; i < n; i++) p[i] = (unsigned char)(v >> (8 * i));
}

static uint64_t ocr__d_get_le(const unsigned char *p, int n) {
    uint64_t v = 0;
    int i;
    for (i = n - 1; i >= 0; i--) v = (v << 8) | p[i];
    return v;
}

static void ocr__cache_count(ocr_cache *c, int64_t *field) {
    pthread_mutex_lock((pthread_mutex_t *)c->lock);
    (*field)++;
    pthread_mutex_unlock((pthread_mutex_t *)c->lock);
}

static void ocr__cache_path(const ocr_cache *c, ocr_hash128 key, char *path, size_t cap, int dir_only) {
    char hex[33];
    ocr_hash_hex(key, hex);
    if (dir_only) snprintf(path, cap, "%s/%.2s", c->dir, hex);
    else snprintf(path, cap, "%s/%.2s/%s.ocrc", c->dir, hex, hex);
}

OCRDEF int ocr_cache_open(ocr_ctx *ctx, ocr_cache *c, const char *dir) {
    struct stat st;
    memset(c, 0, sizeof *c);
    if (strlen(dir) >= sizeof c->dir - 48) return ocr_error(ctx, OCR_EINVAL, "ocr_cache_open: directory path too long");
    if (mkdir(dir, 0755) != 0 && errno != EEXIST) return ocr_error(ctx, OCR_EIO, "ocr_cache_open: cannot create '%s': %s", dir, strerror(errno));
    if (stat(dir, &st) != 0 || !S_ISDIR(st.st_mode)) return ocr_error(ctx, OCR_EIO, "ocr_cache_open: '%s' is not a directory", dir);
    c->lock = OCR_MALLOC(sizeof(pthread_mutex_t));
    if (!c->lock) return ocr_error(ctx, OCR_ENOMEM, "ocr_cache_open: out of memory");
    pthread_mutex_init((pthread_mutex_t *)c->lock, NULL);
    snprintf(c->dir, sizeof c->dir, "%s", dir);
    return OCR_OK;
}

OCRDEF void ocr_cache_close(ocr_cache *c) {
    if (!c) return;
    if (c->lock) { pthread_mutex_destroy((pthread_mutex_t *)c->lock); OCR_FREE(c->lock); }
    memset(c, 0, sizeof *c);
}

OCRDEF ocr_hash128 ocr_cache_key(const char *what, ocr_hash128 content, ocr_hash128 settings) {
    ocr_hasher h;
    ocr_hasher_init(&h, 0x6f63722d63616368ull); /* "ocr-cach" */
    ocr_hasher_u64(&h, OCR_CACHE_FORMAT_VERSION);
    ocr_hasher_str(&h, what);
    ocr_hasher_u64(&h, content.lo);
    ocr_hasher_u64(&h, content.hi);
    ocr_hasher_u64(&h, settings.lo);
    ocr_hasher_u64(&h, settings.hi);
    return ocr_hasher_final(&h);
}

OCRDEF ocr_cache_stats ocr_cache_get_stats(ocr_cache *c) {
    ocr_cache_stats s;
    pthread_mutex_lock((pthread_mutex_t *)c->lock);
    s = c->stats;
    pthread_mutex_unlock((pthread_mutex_t *)c->lock);
    return s;
}

static void ocr__cache_drop(ocr_ctx *ctx, ocr_cache *c, ocr_hash128 key, const char *why) {
    char path[2200];
    ocr__cache_path(c, key, path, sizeof path, 0);
    if (unlink(path) == 0 || errno == ENOENT) ocr__cache_count(c, &c->stats.corrupt);
    ocr_log(ctx, OCR_LOG_WARN, "ocr_cache: entry '%s' is unusable (%s); removed, it will be rebuilt", path, why);
}

OCRDEF void ocr_cache_invalidate(ocr_ctx *ctx, ocr_cache *c, ocr_hash128 key) { ocr__cache_drop(ctx, c, key, "rejected by its user"); }

/* Why the entry bytes are unusable, or NULL. */
static const char *ocr__cache_check(const unsigned char *b, size_t size, ocr_hash128 key) {
    ocr_hash128 sum;
    uint64_t payload;
    if (size < (size_t)OCR__CACHE_HEAD + OCR__CACHE_TAIL) return "truncated header";
    if (memcmp(b, OCR__CACHE_MAGIC, 8) != 0) return "bad magic";
    if (ocr__d_get_le(b + 8, 4) != OCR_CACHE_FORMAT_VERSION) return "written by another format version";
    if (ocr__d_get_le(b + 16, 8) != key.lo || ocr__d_get_le(b + 24, 8) != key.hi) return "holds another key";
    payload = ocr__d_get_le(b + 32, 8);
    if (payload != size - OCR__CACHE_HEAD - OCR__CACHE_TAIL) return "truncated or overlong payload";
    sum = ocr_hash(b, size - OCR__CACHE_TAIL);
    if (ocr__d_get_le(b + size - 16, 8) != sum.lo || ocr__d_get_le(b + size - 8, 8) != sum.hi) return "checksum mismatch";
    return NULL;
}

OCRDEF int ocr_cache_get(ocr_ctx *ctx, ocr_cache *c, ocr_hash128 key, ocr_safetensors *entry) {
    char path[2200];
    unsigned char *bytes;
    size_t size;
    const char *why;
    struct stat st;
    int rc;
    memset(entry, 0, sizeof *entry);
    if (!c || !c->lock) return ocr_error(ctx, OCR_EINVAL, "ocr_cache_get: cache is not open");
    ocr__cache_path(c, key, path, sizeof path, 0);
    if (stat(path, &st) != 0) {
        if (errno != ENOENT) return ocr_error(ctx, OCR_EIO, "ocr_cache_get: cannot stat '%s': %s", path, strerror(errno));
        ocr__cache_count(c, &c->stats.misses);
        return ocr_error(ctx, OCR_ENOTFOUND, "ocr_cache_get: no entry '%s'", path);
    }
    if ((rc = ocr_read_file(ctx, path, (size_t)1 << 40, &bytes, &size))) return rc;
    why = ocr__cache_check(bytes, size, key);
    if (!why) {
        rc = ocr_safetensors_open_memory(ctx, entry, bytes + OCR__CACHE_HEAD, size - OCR__CACHE_HEAD - OCR__CACHE_TAIL);
        if (rc) why = "payload is not valid safetensors";
    }
    OCR_FREE(bytes);
    if (why) {
        ocr__cache_drop(ctx, c, key, why);
        ocr__cache_count(c, &c->stats.misses);
        return ocr_error(ctx, OCR_ENOTFOUND, "ocr_cache_get: entry '%s' was unusable (%s) and has been removed", path, why);
    }
    ocr__cache_count(c, &c->stats.hits);
    return OCR_OK;
}

OCRDEF int ocr_cache_put(ocr_ctx *ctx, ocr_cache *c, ocr_hash128 key, const ocr_tensor *const *tensors, int n) {
    char path[2200];
    unsigned char *payload, *bytes;
    size_t psize, size;
    ocr_hash128 sum;
    int rc;
    if (!c || !c->lock) return ocr_error(ctx, OCR_EINVAL, "ocr_cache_put: cache is not open");
    if ((rc = ocr_safetensors_serialize(ctx, tensors, n, NULL, NULL, 0, &payload, &psize))) return rc;
    if (!ocr_size_add(psize, (size_t)OCR__CACHE_HEAD + OCR__CACHE_TAIL, &size) || !(bytes = (unsigned char *)OCR_MALLOC(size))) {
        OCR_FREE(payload);
        return ocr_error(ctx, OCR_ENOMEM, "ocr_cache_put: cannot allocate %zu bytes", psize);
    }
    memcpy(bytes, OCR__CACHE_MAGIC, 8);
    ocr__d_put_le(bytes + 8, OCR_CACHE_FORMAT_VERSION, 4);
    ocr__d_put_le(bytes + 12, 0, 4);
    ocr__d_put_le(bytes + 16, key.lo, 8);
    ocr__d_put_le(bytes + 24, key.hi, 8);
    ocr__d_put_le(bytes + 32, psize, 8);
    memcpy(bytes + OCR__CACHE_HEAD, payload, psize);
    OCR_FREE(payload);
    sum = ocr_hash(bytes, size - OCR__CACHE_TAIL);
    ocr__d_put_le(bytes + size - 16, sum.lo, 8);
    ocr__d_put_le(bytes + size - 8, sum.hi, 8);
    ocr__cache_path(c, key, path, sizeof path, 1);
    /* The temp file name is per process, so writers of one process take turns. */
    pthread_mutex_lock((pthread_mutex_t *)c->lock);
    if (mkdir(path, 0755) != 0 && errno != EEXIST) {
        rc = ocr_error(ctx, OCR_EIO, "ocr_cache_put: cannot create '%s': %s", path, strerror(errno));
    } else {
        ocr__cache_path(c, key, path, sizeof path, 0);
        rc = ocr_write_file_atomic(ctx, path, bytes, size);
        if (!rc) c->stats.writes++;
    }
    pthread_mutex_unlock((pthread_mutex_t *)c->lock);
    OCR_FREE(bytes);
    return rc;
}

/* ================================================================ [loader] implementation */

enum { OCR__SLOT_FREE = 0, OCR__SLOT_FILLING, OCR__SLOT_READY, OCR__SLOT_HELD };

typedef struct {
    int state;
    uint64_t generation;
    ocr_batch batch;
    ocr_tensor storage[OCR_LOADER_MAX_FIELDS]; /* [batch_size, field shape...] */
} ocr__slot;

struct ocr_loader {
    ocr_dataset *ds;
    ocr_loader_config cfg;
    char names[OCR_LOADER_MAX_FIELDS][OCR_NAME_MAX];
    int64_t field_numel[OCR_LOADER_MAX_FIELDS];
    ocr_hash128 cache_settings;
    pthread_mutex_t mu;
    pthread_cond_t work_cv, ready_cv;
    pthread_t *threads;
    int n_started;
    ocr_ctx *wctx;                 /* one context per worker */
    int quit, epoch_started;
    uint64_t generation;           /* bumped by every start_epoch: work of an older one is dropped */
    int64_t epoch, n_batches, next_claim, next_deliver;
    int64_t *order;
    ocr__slot *slots;
    int n_slots;
    unsigned char *reported;       /* per sample: failure already reported */
    char **pending;                /* failure messages waiting for the consumer's thread */
    int n_pending, cap_pending;
    ocr_loader_progress prog;
};

typedef struct { ocr_loader *L; int index; } ocr__worker_start;

static void *ocr__d_zalloc(size_t size) {
    void *p = OCR_MALLOC(size ? size : 1);
    if (p) memset(p, 0, size ? size : 1);
    return p;
}

OCRDEF ocr_loader_config ocr_loader_config_default(void) {
    ocr_loader_config c;
    memset(&c, 0, sizeof c);
    c.batch_size = 8;
    c.n_workers = 2;
    c.shuffle = 1;
    return c;
}

static uint64_t ocr__loader_seed(uint64_t seed, int64_t epoch, int64_t index) {
    ocr_hasher h;
    ocr_hasher_init(&h, seed);
    ocr_hasher_u64(&h, (uint64_t)epoch);
    ocr_hasher_u64(&h, (uint64_t)index);
    return ocr_hasher_final(&h).lo;
}

/* Polygons travel with cached fields as three extra tensors. */
static int ocr__polys_to_tensors(ocr_ctx *ctx, const ocr_polygon *polys, int n, ocr_tensor *t) {
    int64_t n_pts = 0, n_text = 0, at = 0, tp = 0;
    int i, k, rc;
    for (i = 0; i < n; i++) { n_pts += polys[i].n_points; n_text += (polys[i].text ? (int64_t)strlen(polys[i].text) : 0) + 1; }
    if ((rc = ocr_tensor_alloc(ctx, &t[0], "__polys.info", OCR_I32, OCR_DEVICE_CPU, ocr_shape2(n, 2))) ||
        (rc = ocr_tensor_alloc(ctx, &t[1], "__polys.points", OCR_F32, OCR_DEVICE_CPU, ocr_shape2(n_pts, 2))) ||
        (rc = ocr_tensor_alloc(ctx, &t[2], "__polys.text", OCR_U8, OCR_DEVICE_CPU, ocr_shape1(n_text))))
        return rc;
    for (i = 0; i < n; i++) {
        size_t len = polys[i].text ? strlen(polys[i].text) : 0;
        ((int32_t *)t[0].data)[2 * i] = polys[i].n_points;
        ((int32_t *)t[0].data)[2 * i + 1] = polys[i].ignore;
        for (k = 0; k < polys[i].n_points; k++, at++) {
            ((float *)t[1].data)[2 * at] = polys[i].points[k].x;
            ((float *)t[1].data)[2 * at + 1] = polys[i].points[k].y;
        }
        if (len) memcpy((char *)t[2].data + tp, polys[i].text, len);
        tp += (int64_t)len + 1; /* the tensor is zeroed: each text ends with NUL */
    }
    return OCR_OK;
}

static int ocr__polys_from_entry(ocr_ctx *ctx, const ocr_safetensors *st, ocr_polygon **out, int *n_out) {
    ocr_tensor t[3];
    ocr__d_polys L;
    double *xy = NULL;
    int64_t n, i, at = 0, tp = 0;
    int rc, k;
    memset(t, 0, sizeof t);
    memset(&L, 0, sizeof L);
    if ((rc = ocr_safetensors_read(ctx, st, "__polys.info", &t[0])) || (rc = ocr_safetensors_read(ctx, st, "__polys.points", &t[1])) ||
        (rc = ocr_safetensors_read(ctx, st, "__polys.text", &t[2])))
        goto done;
    n = t[0].shape.ndim == 2 ? t[0].shape.dim[0] : -1;
    if (n < 0 || t[0].dtype != OCR_I32 || t[0].shape.dim[1] != 2 || t[1].dtype != OCR_F32 || t[1].shape.ndim != 2 || t[2].dtype != OCR_U8) {
        rc = ocr_error(ctx, OCR_EFORMAT, "ocr_loader: cached polygons have unexpected shapes");
        goto done;
    }
    for (i = 0; i < n && !rc; i++) {
        int np = ((const int32_t *)t[0].data)[2 * i];
        const char *text = (const char *)t[2].data + tp;
        size_t len;
        if (np < 3 || np > t[1].shape.dim[0] - at || tp >= t[2].shape.dim[0]) { rc = ocr_error(ctx, OCR_EFORMAT, "ocr_loader: cached polygons are inconsistent"); break; }
        if (!memchr(text, 0, (size_t)(t[2].shape.dim[0] - tp))) { rc = ocr_error(ctx, OCR_EFORMAT, "ocr_loader: cached polygon text is not terminated"); break; }
        len = strlen(text);
        OCR_FREE(xy);
        if (!(xy = (double *)OCR_MALLOC((size_t)np * 2 * sizeof(double)))) { rc = ocr_error(ctx, OCR_ENOMEM, "ocr_loader: out of memory"); break; }
        for (k = 0; k < 2 * np; k++) xy[k] = ((const float *)t[1].data)[2 * at + k];
        if (!ocr__d_polys_push(&L, xy, np, text, len, ((const int32_t *)t[0].data)[2 * i + 1])) rc = ocr_error(ctx, OCR_ENOMEM, "ocr_loader: out of memory");
        at += np;
        tp += (int64_t)len + 1;
    }
done:
    OCR_FREE(xy);
    for (k = 0; k < 3; k++) ocr_tensor_free(&t[k]);
    if (rc) { ocr_polygons_free(L.items, L.n); return rc; }
    *out = L.items;
    *n_out = L.n;
    return OCR_OK;
}

/* Loads and transforms sample idx into row `row` of the slot; the polygons go to the batch. */
static int ocr__loader_sample(ocr_loader *L, ocr_ctx *ctx, ocr__slot *slot, int row, int64_t idx, int64_t epoch, int *cache_hit) {
    const ocr_loader_config *cfg = &L->cfg;
    ocr_cache *cache = cfg->cache;
    ocr_tensor views[OCR_LOADER_MAX_FIELDS];
    ocr_sample s;
    ocr_hash128 key;
    ocr_rng rng;
    int f, rc;
    *cache_hit = -1;
    memset(&key, 0, sizeof key);
    for (f = 0; f < cfg->n_fields; f++)
        views[f] = ocr_tensor_view(L->names[f], OCR_F32, OCR_DEVICE_CPU, cfg->field_shapes[f],
                                   (float *)slot->storage[f].data + (int64_t)row * L->field_numel[f]);
    if (cache) {
        ocr_safetensors entry;
        int known;
        if ((rc = ocr_dataset_get(ctx, L->ds, idx, OCR_SAMPLE_LABELS_ONLY, &s))) return rc;
        key = ocr_cache_key("ocr-loader", s.content_hash, L->cache_settings);
        known = s.content_hash.lo || s.content_hash.hi; /* a source that cannot hash its samples is never cached */
        ocr_sample_free(&s);
        if (!known) {
            cache = NULL;
        } else if (ocr_cache_get(ctx, cache, key, &entry) == OCR_OK) {
            for (f = 0, rc = OCR_OK; f < cfg->n_fields && !rc; f++) rc = ocr_safetensors_read_into(ctx, &entry, L->names[f], &views[f]);
            if (!rc) rc = ocr__polys_from_entry(ctx, &entry, &slot->batch.polys[row], &slot->batch.n_polys[row]);
            ocr_safetensors_close(&entry);
            if (!rc) { *cache_hit = 1; return OCR_OK; }
            ocr_cache_invalidate(ctx, cache, key);
        }
        if (cache) *cache_hit = 0;
    }
    if ((rc = ocr_dataset_get(ctx, L->ds, idx, 0, &s))) return rc;
    ocr_rng_seed(&rng, ocr__loader_seed(cfg->seed, epoch, idx));
    for (f = 0; f < cfg->n_fields; f++) memset(views[f].data, 0, ocr_tensor_bytes(&views[f]));
    rc = cfg->transform ? cfg->transform(ctx, cfg->transform_user, &s, idx, &rng, views) : ocr_image_to_chw(ctx, &s.image, &views[0]);
    for (f = 0; f < cfg->n_fields && !rc; f++) rc = ocr_check_finite(ctx, "ocr_loader transform", &views[f]);
    if (!rc && cache) {
        ocr_tensor pt[3];
        const ocr_tensor *all[OCR_LOADER_MAX_FIELDS + 3];
        memset(pt, 0, sizeof pt);
        /* A failed write (disk full...) costs only the next hit: the sample itself is fine. */
        if (ocr__polys_to_tensors(ctx, s.polys, s.n_polys, pt) == OCR_OK) {
            for (f = 0; f < cfg->n_fields; f++) all[f] = &views[f];
            for (f = 0; f < 3; f++) all[cfg->n_fields + f] = &pt[f];
            (void)ocr_cache_put(ctx, cache, key, all, cfg->n_fields + 3);
        }
        for (f = 0; f < 3; f++) ocr_tensor_free(&pt[f]);
    }
    if (!rc) {
        slot->batch.polys[row] = s.polys;
        slot->batch.n_polys[row] = s.n_polys;
        s.polys = NULL;
        s.n_polys = 0;
    }
    ocr_sample_free(&s);
    return rc;
}

static void ocr__loader_report(ocr_loader *L, ocr_ctx *ctx, int64_t idx) {
    char msg[OCR_ERROR_MAX + 400];
    L->prog.samples_failed++;
    if (L->reported[idx]) return;
    L->reported[idx] = 1;
    snprintf(msg, sizeof msg, "ocr_loader: skipping sample %lld of '%s' (reported once): %s", (long long)idx, L->ds->name, ctx->last_error);
    if (L->n_pending == L->cap_pending) {
        int cap = L->cap_pending ? L->cap_pending * 2 : 16;
        char **p = (char **)OCR_REALLOC(L->pending, (size_t)cap * sizeof(char *));
        if (!p) return;
        L->pending = p;
        L->cap_pending = cap;
    }
    if ((L->pending[L->n_pending] = ocr__d_strndup(msg, strlen(msg))) != NULL) L->n_pending++;
}

static void ocr__slot_clear_polys(ocr_loader *L, ocr__slot *slot) {
    int b;
    for (b = 0; b < L->cfg.batch_size; b++) {
        ocr_polygons_free(slot->batch.polys[b], slot->batch.n_polys[b]);
        slot->batch.polys[b] = NULL;
        slot->batch.n_polys[b] = 0;
    }
}

static void *ocr__loader_worker(void *arg) {
    ocr_loader *L = ((ocr__worker_start *)arg)->L;
    ocr_ctx *ctx = &L->wctx[((ocr__worker_start *)arg)->index];
    int64_t B = L->cfg.batch_size;
    OCR_FREE(arg);
    /* On Linux the nice value belongs to the thread (who = 0 is the caller), so only the worker yields; elsewhere
       the whole process would, which costs speed but never changes a result. Raising it cannot be refused. */
    if (L->cfg.worker_nice > 0) {
        int base;
        errno = 0;
        base = getpriority(PRIO_PROCESS, 0);
        if (errno == 0) (void)setpriority(PRIO_PROCESS, 0, base + L->cfg.worker_nice > 19 ? 19 : base + L->cfg.worker_nice);
    }
    pthread_mutex_lock(&L->mu);
    for (;;) {
        ocr__slot *slot;
        int64_t k, begin, n, epoch, j;
        uint64_t gen;
        int filled = 0, f;
        while (!L->quit && !(L->epoch_started && L->next_claim < L->n_batches &&
                             L->slots[L->next_claim % L->n_slots].state == OCR__SLOT_FREE))
            pthread_cond_wait(&L->work_cv, &L->mu);
        if (L->quit) break;
        k = L->next_claim++;
        slot = &L->slots[k % L->n_slots];
        slot->state = OCR__SLOT_FILLING;
        slot->generation = gen = L->generation;
        slot->batch.epoch = epoch = L->epoch;
        slot->batch.number = k;
        begin = k * B;
        n = L->ds->count - begin < B ? L->ds->count - begin : B;
        memcpy(slot->batch.indices, L->order + begin, (size_t)n * sizeof(int64_t));
        pthread_mutex_unlock(&L->mu);
        ocr__slot_clear_polys(L, slot);
        for (j = 0; j < n; j++) {
            int64_t idx = slot->batch.indices[j];
            int hit, rc, stop;
            pthread_mutex_lock(&L->mu);
            stop = L->quit || gen != L->generation;
            pthread_mutex_unlock(&L->mu);
            if (stop) break;
            rc = ocr__loader_sample(L, ctx, slot, filled, idx, epoch, &hit);
            pthread_mutex_lock(&L->mu);
            if (hit == 1) L->prog.cache_hits++;
            if (hit == 0) L->prog.cache_misses++;
            if (rc) ocr__loader_report(L, ctx, idx);
            else { L->prog.samples_done++; slot->batch.indices[filled++] = idx; }
            pthread_mutex_unlock(&L->mu);
        }
        pthread_mutex_lock(&L->mu);
        if (!L->quit && gen == L->generation) {
            slot->batch.size = filled;
            for (f = 0; f < L->cfg.n_fields; f++) {
                slot->batch.fields[f] = slot->storage[f];
                slot->batch.fields[f].owns_data = 0;
                slot->batch.fields[f].shape.dim[0] = filled;
            }
            slot->state = OCR__SLOT_READY;
            pthread_cond_broadcast(&L->ready_cv);
        } else {
            slot->state = OCR__SLOT_FREE;
            pthread_cond_broadcast(&L->work_cv);
        }
    }
    pthread_mutex_unlock(&L->mu);
    return NULL;
}

OCRDEF void ocr_loader_free(ocr_loader *L) {
    int i, f;
    if (!L) return;
    pthread_mutex_lock(&L->mu);
    L->quit = 1;
    pthread_cond_broadcast(&L->work_cv);
    pthread_cond_broadcast(&L->ready_cv);
    pthread_mutex_unlock(&L->mu);
    for (i = 0; i < L->n_started; i++) pthread_join(L->threads[i], NULL);
    if (L->slots)
        for (i = 0; i < L->n_slots; i++) {
            ocr__slot *s = &L->slots[i];
            if (s->batch.polys) ocr__slot_clear_polys(L, s);
            for (f = 0; f < OCR_LOADER_MAX_FIELDS; f++) ocr_tensor_free(&s->storage[f]);
            OCR_FREE(s->batch.indices);
            OCR_FREE(s->batch.polys);
            OCR_FREE(s->batch.n_polys);
        }
    if (L->wctx) for (i = 0; i < L->cfg.n_workers; i++) ocr_ctx_free(&L->wctx[i]);
    for (i = 0; i < L->n_pending; i++) OCR_FREE(L->pending[i]);
    OCR_FREE(L->pending);
    OCR_FREE(L->slots);
    OCR_FREE(L->wctx);
    OCR_FREE(L->threads);
    OCR_FREE(L->order);
    OCR_FREE(L->reported);
    pthread_mutex_destroy(&L->mu);
    pthread_cond_destroy(&L->work_cv);
    pthread_cond_destroy(&L->ready_cv);
    OCR_FREE(L);
}

OCRDEF int ocr_loader_create(ocr_ctx *ctx, ocr_loader **out, ocr_dataset *ds, const ocr_loader_config *cfg) {
    const char *fn = "ocr_loader_create";
    ocr_loader *L;
    ocr_hasher h;
    int i, f, rc = OCR_OK;
    *out = NULL;
    if (!ds || !ds->get || ds->count <= 0) return ocr_error(ctx, OCR_EINVAL, "%s: the dataset is missing, closed or empty", fn);
    if (!cfg) return ocr_error(ctx, OCR_EINVAL, "%s: config is NULL (start from ocr_loader_config_default())", fn);
    if (cfg->batch_size < 1 || cfg->batch_size > 65536) return ocr_error(ctx, OCR_ERANGE, "%s: batch_size %d outside 1..65536", fn, cfg->batch_size);
    if (cfg->n_workers < 1 || cfg->n_workers > OCR_MAX_THREADS)
        return ocr_error(ctx, OCR_ERANGE, "%s: n_workers %d outside 1..%d", fn, cfg->n_workers, OCR_MAX_THREADS);
    if (cfg->prefetch < 0 || cfg->prefetch > 1024) return ocr_error(ctx, OCR_ERANGE, "%s: prefetch %d outside 0..1024", fn, cfg->prefetch);
    if (cfg->worker_nice < 0 || cfg->worker_nice > 19)
        return ocr_error(ctx, OCR_ERANGE, "%s: worker_nice %d outside 0..19", fn, cfg->worker_nice);
    if (cfg->n_fields < 1 || cfg->n_fields > OCR_LOADER_MAX_FIELDS)
        return ocr_error(ctx, OCR_ERANGE, "%s: n_fields %d outside 1..%d", fn, cfg->n_fields, OCR_LOADER_MAX_FIELDS);
    for (f = 0; f < cfg->n_fields; f++) {
        ocr_shape s = cfg->field_shapes[f];
        char sb[96];
        if (!cfg->field_names[f] || !cfg->field_names[f][0] || strlen(cfg->field_names[f]) >= OCR_NAME_MAX || strncmp(cfg->field_names[f], "__", 2) == 0)
            return ocr_error(ctx, OCR_EINVAL, "%s: field %d needs a name (not empty, shorter than %d, not starting with __)", fn, f, OCR_NAME_MAX);
        if ((rc = ocr_shape_validate(ctx, fn, cfg->field_names[f], s))) return rc;
        if (s.ndim < 1 || s.ndim > 3 || ocr_shape_numel(s) < 1)
            return ocr_error(ctx, OCR_ESHAPE, "%s: field '%s' has per-sample shape %s; 1 to 3 non-zero dims", fn, cfg->field_names[f],
                             ocr_shape_str(s, sb, sizeof sb));
    }
    if (!cfg->transform && (cfg->n_fields != 1 || cfg->field_shapes[0].ndim != 3 || cfg->field_shapes[0].dim[0] != 3))
        return ocr_error(ctx, OCR_EINVAL, "%s: without a transform the loader makes one field of shape [3,H,W]", fn);
    L = (ocr_loader *)ocr__d_zalloc(sizeof *L);
    if (!L) return ocr_error(ctx, OCR_ENOMEM, "%s: out of memory", fn);
    pthread_mutex_init(&L->mu, NULL);
    pthread_cond_init(&L->work_cv, NULL);
    pthread_cond_init(&L->ready_cv, NULL);
    L->ds = ds;
    L->cfg = *cfg;
    if (!L->cfg.prefetch) L->cfg.prefetch = 2 * cfg->n_workers;
    ocr_hasher_init(&h, 0);
    ocr_hasher_u64(&h, cfg->cache_settings.lo);
    ocr_hasher_u64(&h, cfg->cache_settings.hi);
    for (f = 0; f < cfg->n_fields; f++) {
        snprintf(L->names[f], OCR_NAME_MAX, "%s", cfg->field_names[f]);
        L->cfg.field_names[f] = L->names[f];
        L->field_numel[f] = ocr_shape_numel(cfg->field_shapes[f]);
        ocr_hasher_str(&h, L->names[f]);
        ocr_hasher_u64(&h, (uint64_t)cfg->field_shapes[f].ndim);
        for (i = 0; i < cfg->field_shapes[f].ndim; i++) ocr_hasher_u64(&h, (uint64_t)cfg->field_shapes[f].dim[i]);
    }
    L->cache_settings = ocr_hasher_final(&h);
    /* One slot more than the prefetch depth: the consumer holds one batch while the workers fill the others. */
    L->n_slots = L->cfg.prefetch + 1;
    L->slots = (ocr__slot *)ocr__d_zalloc((size_t)L->n_slots * sizeof(ocr__slot));
    L->order = (int64_t *)ocr__d_zalloc((size_t)ds->count * sizeof(int64_t));
    L->reported = (unsigned char *)ocr__d_zalloc((size_t)ds->count);
    L->wctx = (ocr_ctx *)ocr__d_zalloc((size_t)cfg->n_workers * sizeof(ocr_ctx));
    L->threads = (pthread_t *)ocr__d_zalloc((size_t)cfg->n_workers * sizeof(pthread_t));
    if (!L->slots || !L->order || !L->reported || !L->wctx || !L->threads) { rc = ocr_error(ctx, OCR_ENOMEM, "%s: out of memory", fn); goto fail; }
    for (i = 0; i < L->n_slots; i++) {
        ocr__slot *s = &L->slots[i];
        s->batch.indices = (int64_t *)ocr__d_zalloc((size_t)cfg->batch_size * sizeof(int64_t));
        s->batch.polys = (ocr_polygon **)ocr__d_zalloc((size_t)cfg->batch_size * sizeof(ocr_polygon *));
        s->batch.n_polys = (int *)ocr__d_zalloc((size_t)cfg->batch_size * sizeof(int));
        if (!s->batch.indices || !s->batch.polys || !s->batch.n_polys) { rc = ocr_error(ctx, OCR_ENOMEM, "%s: out of memory", fn); goto fail; }
        for (f = 0; f < cfg->n_fields; f++) {
            ocr_shape bs = cfg->field_shapes[f];
            int d;
            for (d = bs.ndim; d > 0; d--) bs.dim[d] = bs.dim[d - 1];
            bs.dim[0] = cfg->batch_size;
            bs.ndim++;
            if ((rc = ocr_tensor_alloc(ctx, &s->storage[f], L->names[f], OCR_F32, OCR_DEVICE_CPU, bs))) goto fail;
        }
    }
    for (i = 0; i < cfg->n_workers; i++)
        if ((rc = ocr_ctx_init(&L->wctx[i], 1, cfg->seed + (uint64_t)i))) goto fail;
    for (i = 0; i < cfg->n_workers; i++) {
        ocr__worker_start *ws = (ocr__worker_start *)OCR_MALLOC(sizeof *ws);
        if (!ws) { rc = ocr_error(ctx, OCR_ENOMEM, "%s: out of memory", fn); goto fail; }
        ws->L = L;
        ws->index = i;
        if (pthread_create(&L->threads[i], NULL, ocr__loader_worker, ws) != 0) {
            OCR_FREE(ws);
            rc = ocr_error(ctx, OCR_ENOMEM, "%s: could start only %d of %d worker threads", fn, i, cfg->n_workers);
            goto fail;
        }
        L->n_started++;
    }
    *out = L;
    return OCR_OK;
fail:
    ocr_loader_free(L);
    return rc;
}

OCRDEF int ocr_loader_start_epoch(ocr_ctx *ctx, ocr_loader *L, int64_t epoch) {
    return ocr_loader_start_epoch_at(ctx, L, epoch, 0);
}

OCRDEF int ocr_loader_start_epoch_at(ocr_ctx *ctx, ocr_loader *L, int64_t epoch, int64_t first_batch) {
    int64_t n, i, n_batches;
    int s;
    ocr_rng rng;
    if (!L) return ocr_error(ctx, OCR_EINVAL, "ocr_loader_start_epoch: loader is NULL");
    if (epoch < 0) return ocr_error(ctx, OCR_ERANGE, "ocr_loader_start_epoch: epoch %lld is negative", (long long)epoch);
    n = L->ds->count;
    n_batches = L->cfg.drop_last ? n / L->cfg.batch_size : (n + L->cfg.batch_size - 1) / L->cfg.batch_size;
    if (first_batch < 0 || first_batch > n_batches)
        return ocr_error(ctx, OCR_ERANGE, "ocr_loader_start_epoch_at: batch %lld is outside the epoch's %lld batches",
                         (long long)first_batch, (long long)n_batches);
    pthread_mutex_lock(&L->mu);
    L->generation++;
    L->epoch = epoch;
    L->n_batches = n_batches;
    L->next_claim = L->next_deliver = first_batch;
    for (i = 0; i < n; i++) L->order[i] = i;
    if (L->cfg.shuffle) {
        /* Fisher-Yates from an RNG that depends on (seed, epoch) only; index -1 keeps it apart from the samples'. */
        ocr_rng_seed(&rng, ocr__loader_seed(L->cfg.seed, epoch, -1));
        for (i = n - 1; i > 0; i--) {
            int64_t j = (int64_t)(ocr_rng_u64(&rng) % (uint64_t)(i + 1)), t = L->order[i];
            L->order[i] = L->order[j];
            L->order[j] = t;
        }
    }
    for (s = 0; s < L->n_slots; s++)
        if (L->slots[s].state == OCR__SLOT_READY) L->slots[s].state = OCR__SLOT_FREE;
    L->epoch_started = 1;
    L->prog.epoch = epoch;
    L->prog.batches_total = L->n_batches;
    L->prog.batches_done = first_batch;
    pthread_cond_broadcast(&L->work_cv);
    pthread_mutex_unlock(&L->mu);
    return OCR_OK;
}

OCRDEF int ocr_loader_next(ocr_ctx *ctx, ocr_loader *L, ocr_batch **batch) {
    int rc = OCR_OK;
    double wait_from = -1.0;
    *batch = NULL;
    if (!L) return ocr_error(ctx, OCR_EINVAL, "ocr_loader_next: loader is NULL");
    pthread_mutex_lock(&L->mu);
    if (!L->epoch_started) {
        pthread_mutex_unlock(&L->mu);
        return ocr_error(ctx, OCR_ESTATE, "ocr_loader_next: no epoch started (call ocr_loader_start_epoch)");
    }
    for (;;) {
        ocr__slot *slot;
        /* Failure reports go out on the caller's thread: log callbacks need not be thread-safe. */
        while (L->n_pending) {
            char *msg = L->pending[--L->n_pending];
            pthread_mutex_unlock(&L->mu);
            ocr_log(ctx, OCR_LOG_WARN, "%s", msg);
            OCR_FREE(msg);
            pthread_mutex_lock(&L->mu);
        }
        if (L->next_deliver >= L->n_batches) break;
        slot = &L->slots[L->next_deliver % L->n_slots];
        if (slot->state == OCR__SLOT_READY && slot->generation == L->generation && slot->batch.number == L->next_deliver) {
            L->next_deliver++;
            L->prog.batches_done++;
            if (slot->batch.size == 0) { slot->state = OCR__SLOT_FREE; pthread_cond_broadcast(&L->work_cv); continue; }
            slot->state = OCR__SLOT_HELD;
            *batch = &slot->batch;
            break;
        }
        if (slot->state == OCR__SLOT_HELD) {
            rc = ocr_error(ctx, OCR_ESTATE, "ocr_loader_next: the caller holds %d batches; release them with ocr_loader_release", L->n_slots);
            break;
        }
        if (wait_from < 0) wait_from = ocr_monotonic_seconds();
        pthread_cond_wait(&L->ready_cv, &L->mu);
    }
    if (wait_from >= 0) L->prog.wait_seconds += ocr_monotonic_seconds() - wait_from;
    pthread_mutex_unlock(&L->mu);
    return rc;
}

OCRDEF void ocr_loader_release(ocr_loader *L, ocr_batch *batch) {
    int s;
    if (!L || !batch) return;
    pthread_mutex_lock(&L->mu);
    for (s = 0; s < L->n_slots; s++)
        if (&L->slots[s].batch == batch && L->slots[s].state == OCR__SLOT_HELD) {
            L->slots[s].state = OCR__SLOT_FREE;
            pthread_cond_broadcast(&L->work_cv);
        }
    pthread_mutex_unlock(&L->mu);
}

OCRDEF ocr_loader_progress ocr_loader_get_progress(ocr_loader *L) {
    ocr_loader_progress p;
    pthread_mutex_lock(&L->mu);
    p = L->prog;
    pthread_mutex_unlock(&L->mu);
    return p;
}

#ifdef __cplusplus
}
#endif
#endif /* OCR_DATA_IMPLEMENTATION */
