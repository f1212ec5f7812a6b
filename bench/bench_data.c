/* bench_data: samples per second per worker thread for the training input path at 640x640, and the cost of
   rendering synthetic scenes.

   Input: a few synthetic 1280x720 scenes (the ICDAR 2015 size), encoded in memory as PNG and as JPEG (quality 90)
   with stb_image_write. Timed per sample: decode (ocr_image_decode) + augment and crop (ocr_augment_sample:
   flip, rotation, resize x0.5..3, EAST crop to 640x640) + normalise into a [3,640,640] F32 tensor
   (ocr_image_normalize, DBNet mode). Then the same with one thread per core, each with its own context and rng,
   as the loader's workers run. Stage times are wall clock; the per-thread-CPU-second rate does not depend on what
   else the machine runs. No peer: DBNet's Python pipeline (imgaug) is not installed here. The CPU's model and measured
   peak (bench_peak.h) come first, to identify the machine: the work is not arithmetic-bound.
   Usage: build/bench_data [seconds per measurement, default 2] */
#define _POSIX_C_SOURCE 200809L
#define OCR_IMPLEMENTATION
#include "ocr_tensor.h"
#include "ocr_data.h"
#include "ocr_synth.h"
#include "bench_common.h"
#include "bench_peak.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <pthread.h>

#define N_SCENES 6
#define SRC_W 1280
#define SRC_H 720
#define OUT_SIDE 640

/* One encoded scene and its labels (the bytes carry none). */
typedef struct { unsigned char *data; size_t size; const ocr_sample *labels; } blob;

static void append(void *user, void *data, int size) {
    blob *b = (blob *)user;
    unsigned char *grown = (unsigned char *)realloc(b->data, b->size + (size_t)size);
    if (!grown) return;
    memcpy(grown + b->size, data, (size_t)size);
    b->data = grown;
    b->size += (size_t)size;
}

typedef struct {
    const blob *inputs;
    double seconds;
    uint64_t seed;
    long done, failed;
    double t_decode, t_augment, t_normalize, cpu;
    char error[OCR_ERROR_MAX];
} worker;

/* The loader gets polygons from the label parser; here they are copied from the rendered scene. */
static int copy_polygons(const ocr_sample *from, ocr_sample *to) {
    int i;
    to->polys = (ocr_polygon *)calloc((size_t)from->n_polys + 1, sizeof(ocr_polygon));
    if (!to->polys) return 1;
    for (i = 0; i < from->n_polys; i++) {
        const ocr_polygon *p = &from->polys[i];
        to->polys[i] = *p;
        to->polys[i].text = NULL;
        to->polys[i].points = (ocr_point *)malloc((size_t)p->n_points * sizeof(ocr_point));
        to->n_polys = i + 1;
        if (!to->polys[i].points) return 1;
        memcpy(to->polys[i].points, p->points, (size_t)p->n_points * sizeof(ocr_point));
    }
    return 0;
}

/* decode + augment + crop + normalise, round robin over the inputs, for the given time */
static void *run_worker(void *arg) {
    worker *w = (worker *)arg;
    ocr_ctx ctx;
    ocr_tensor chw;
    ocr_augment_config aug = ocr_augment_defaults();
    double end;
    ocr_ctx_init(&ctx, 1, w->seed);
    if (ocr_tensor_alloc(&ctx, &chw, "input", OCR_F32, OCR_DEVICE_CPU, ocr_shape3(3, OUT_SIDE, OUT_SIDE))) {
        snprintf(w->error, sizeof w->error, "%s", ocr_ctx_last_error(&ctx));
        w->failed++;
        ocr_ctx_free(&ctx);
        return NULL;
    }
    end = now() + w->seconds;
    w->cpu = -clock_s(CLOCK_THREAD_CPUTIME_ID);
    while (now() < end) {
        const blob *b = &w->inputs[w->done % N_SCENES];
        ocr_sample s;
        ocr_rng rng;
        double t0 = now(), t1, t2, t3;
        int rc;
        memset(&s, 0, sizeof s);
        ocr_rng_seed(&rng, w->seed * 1000003u + (uint64_t)w->done);
        rc = ocr_image_decode(&ctx, b->data, b->size, &s.image);
        if (!rc && copy_polygons(b->labels, &s)) rc = ocr_error(&ctx, OCR_ENOMEM, "bench_data: out of memory");
        t1 = now();
        if (!rc) rc = ocr_augment_sample(&ctx, &rng, &aug, &s);
        t2 = now();
        if (!rc) rc = ocr_image_normalize(&ctx, &s.image, OCR_NORM_DBNET, &chw);
        t3 = now();
        if (rc) {
            snprintf(w->error, sizeof w->error, "%s", ocr_ctx_last_error(&ctx));
            w->failed++;
            ocr_sample_free(&s);
            break;
        }
        w->t_decode += t1 - t0;
        w->t_augment += t2 - t1;
        w->t_normalize += t3 - t2;
        w->done++;
        ocr_sample_free(&s);
    }
    w->cpu += clock_s(CLOCK_THREAD_CPUTIME_ID);
    ocr_tensor_free(&chw);
    ocr_ctx_free(&ctx);
    return NULL;
}

static int measure(const char *label, blob *inputs, int threads, double seconds) {
    worker ws[OCR_MAX_THREADS];
    pthread_t th[OCR_MAX_THREADS];
    long total = 0;
    double dec = 0, aug = 0, norm = 0, cpu = 0;
    int i;
    memset(ws, 0, sizeof ws);
    for (i = 0; i < threads; i++) {
        ws[i].inputs = inputs;
        ws[i].seconds = seconds;
        ws[i].seed = 17 + (uint64_t)i;
        pthread_create(&th[i], NULL, run_worker, &ws[i]);
    }
    for (i = 0; i < threads; i++) {
        pthread_join(th[i], NULL);
        if (ws[i].failed) { fprintf(stderr, "bench_data: %s: %s\n", label, ws[i].error); return 1; }
        total += ws[i].done;
        dec += ws[i].t_decode; aug += ws[i].t_augment; norm += ws[i].t_normalize; cpu += ws[i].cpu;
    }
    /* wall-clock split per stage; the CPU-time rate is what a thread gets on an otherwise idle core */
    printf("  %-4s %2d thread%s: %6.1f samples/s, %6.1f per thread (%6.1f per thread-CPU-second); per sample: decode %5.1f ms, "
           "augment+crop %5.1f ms, normalise %4.1f ms\n", label, threads, threads == 1 ? " " : "s", total / seconds,
           total / seconds / threads, total / cpu, 1e3 * dec / (double)total, 1e3 * aug / (double)total, 1e3 * norm / (double)total);
    return 0;
}

int main(int argc, char **argv) {
    double seconds = argc > 1 ? atof(argv[1]) : 2.0, t0, cpu;
    ocr_ctx ctx;
    ocr_synth synth;
    blob png[N_SCENES], jpg[N_SCENES];
    ocr_sample scenes[N_SCENES];
    size_t png_bytes = 0, jpg_bytes = 0;
    int i, n, cores = ocr_cpu_count(), rc = 0;
    if (!(seconds > 0)) seconds = 2.0;
    (void)bench_print_peak(cores); /* the most threads it times with */
    ocr_ctx_init(&ctx, 1, 1);
    t0 = now();
    if (ocr_synth_init(&ctx, &synth, NULL)) { fprintf(stderr, "bench_data: %s\n", ocr_ctx_last_error(&ctx)); return 1; }
    printf("bench_data: %d fonts loaded in %.0f ms; %d cores\n", synth.n_fonts, 1e3 * (now() - t0), cores);

    /* synthetic scenes: rendering cost at the training size */
    t0 = now();
    cpu = clock_s(CLOCK_THREAD_CPUTIME_ID);
    for (n = 0; now() - t0 < seconds; n++) {
        ocr_sample s;
        if (ocr_synth_sample(&ctx, &synth, 1, n, OUT_SIDE, OUT_SIDE, &s)) { fprintf(stderr, "bench_data: %s\n", ocr_ctx_last_error(&ctx)); return 1; }
        ocr_sample_free(&s);
    }
    cpu = clock_s(CLOCK_THREAD_CPUTIME_ID) - cpu;
    printf("  synth 640x640, 1 thread: %.1f scenes/s (%.1f per thread-CPU-second, %.1f ms of CPU each)\n", n / (now() - t0), n / cpu,
           1e3 * cpu / n);

    memset(png, 0, sizeof png);
    memset(jpg, 0, sizeof jpg);
    for (i = 0; i < N_SCENES; i++) {
        ocr_sample *s = &scenes[i];
        if (ocr_synth_sample(&ctx, &synth, 2, i, SRC_W, SRC_H, s) ||
            ocr_image_encode_png(&ctx, &s->image, &png[i].data, &png[i].size)) {
            fprintf(stderr, "bench_data: %s\n", ocr_ctx_last_error(&ctx));
            return 1;
        }
        if (!stbi_write_jpg_to_func(append, &jpg[i], s->image.width, s->image.height, 3, s->image.pixels, 90)) {
            fprintf(stderr, "bench_data: JPEG encoding failed\n");
            return 1;
        }
        png_bytes += png[i].size;
        jpg_bytes += jpg[i].size;
        png[i].labels = jpg[i].labels = s;
    }
    printf("  inputs: %d scenes %dx%d, PNG %.0f KiB and JPEG %.0f KiB each on average\n", N_SCENES, SRC_W, SRC_H,
           png_bytes / 1024.0 / N_SCENES, jpg_bytes / 1024.0 / N_SCENES);
    printf("decode + augment + crop to %dx%d + normalise, %.1f s per line:\n", OUT_SIDE, OUT_SIDE, seconds);
    rc |= measure("png", png, 1, seconds);
    rc |= measure("jpeg", jpg, 1, seconds);
    if (cores > 1) {
        rc |= measure("png", png, cores, seconds);
        rc |= measure("jpeg", jpg, cores, seconds);
    }
    for (i = 0; i < N_SCENES; i++) { OCR_FREE(png[i].data); free(jpg[i].data); ocr_sample_free(&scenes[i]); }
    ocr_synth_free(&synth);
    ocr_ctx_free(&ctx);
    return rc;
}
