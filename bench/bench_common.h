/* bench_common.h - what every bench/ program shares: clocks, the median of repeated runs, and the peer process (a
   Python reference, or this program again) driven line by line over pipes.
   Included after the ocr-c headers (which bring in time.h and stdlib.h under the POSIX feature macro). */
#ifndef OCR_BENCH_COMMON_H
#define OCR_BENCH_COMMON_H
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/types.h>
#include <sys/wait.h>

static inline double clock_s(clockid_t id) {
    struct timespec ts;
    clock_gettime(id, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static inline double now(void) { return clock_s(CLOCK_MONOTONIC); }

static inline int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Waits 0.2 s before the other side's timed run: a library's worker threads keep spinning on the cores for a while
   after a call (OpenBLAS's for far longer than one of these runs), and timing one side while the other still spins
   measures half a machine. */
static inline void bench_settle(void) {
    struct timespec ts = {0, 200000000L};
    nanosleep(&ts, NULL);
}

/* Raw float32 files, what tools/ort_run.js reads and writes (bench_infer, bench_rec): ONNX Runtime's input and work
   files go under WORK_DIR (not build/bench_*: ./build.sh bench runs every build/bench_*). */
#define WORK_DIR "build/onnx_bench"
static inline int bench_write_f32(const char *path, const float *v, size_t n) {
    FILE *f = fopen(path, "wb");
    int ok = f && fwrite(v, sizeof(float), n, f) == n;
    if (f && fclose(f) != 0) ok = 0;
    return ok;
}

/* max |a - b| between ours and the n floats in path; -1 when the file does not hold exactly n */
static inline double bench_max_diff_file(const char *path, const float *ours, size_t n) {
    FILE *f = fopen(path, "rb");
    double worst = 0;
    size_t i;
    float v;
    if (!f) return -1;
    for (i = 0; i < n && fread(&v, sizeof v, 1, f) == 1; i++) {
        double d = (double)v - (double)ours[i];
        if (d < 0) d = -d;
        if (!(d <= worst)) worst = d;
    }
    if (i != n || fgetc(f) != EOF) worst = -1;
    fclose(f);
    return worst;
}

/* Sorts v in place. */
static inline double median(double *v, int n) {
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

/* A child process whose stdin and stdout are pipes: commands go to in, one-line answers come from out. */
typedef struct { FILE *in, *out; pid_t pid; const char *label; } bench_peer;

/* Starts path with argv (NULL-terminated); env: NULL-terminated name, value pairs set in the child first (NULL: none).
   Returns 1 when it runs. */
static inline int bench_peer_start(bench_peer *p, const char *label, const char *path, char *const argv[],
                                   const char *const env[]) {
    int to_child[2], from_child[2], i;
    memset(p, 0, sizeof *p);
    p->label = label;
    if (pipe(to_child)) return 0;
    if (pipe(from_child)) { close(to_child[0]); close(to_child[1]); return 0; }
    p->pid = fork();
    if (p->pid == 0) {
        dup2(to_child[0], 0);
        dup2(from_child[1], 1);
        close(to_child[0]); close(to_child[1]); close(from_child[0]); close(from_child[1]);
        for (i = 0; env && env[i] && env[i + 1]; i += 2) setenv(env[i], env[i + 1], 1);
        execv(path, argv);
        _exit(127);
    }
    close(to_child[0]);
    close(from_child[1]);
    if (p->pid < 0) { close(to_child[1]); close(from_child[0]); return 0; }
    p->in = fdopen(to_child[1], "w");
    p->out = fdopen(from_child[0], "r");
    return p->in && p->out;
}

/* Sends one command line and reads the one-line answer into answer; 0 (after saying so on stderr, and with the pipes
   closed so later asks fail at once) when the peer is gone or answers "error...". */
static inline int bench_peer_ask(bench_peer *p, const char *cmd, char *answer, size_t cap) {
    answer[0] = 0;
    if (!p->in) return 0;
    fprintf(p->in, "%s\n", cmd);
    fflush(p->in);
    if (!fgets(answer, (int)cap, p->out) || strncmp(answer, "error", 5) == 0) {
        fprintf(stderr, "%s failed on '%s'%s%s", p->label, cmd, answer[0] ? ": " : "\n", answer);
        fclose(p->in); fclose(p->out);
        p->in = NULL; p->out = NULL;
        return 0;
    }
    return 1;
}

/* Closes the peer's stdin (sending "quit" first when quit is set), reads what it still writes (the last line into
   last, when given), and waits for it. Returns 1 when it exited with status 0. */
static inline int bench_peer_stop(bench_peer *p, int quit, char *last, size_t cap) {
    char line[256];
    int status = 0;
    if (last) last[0] = 0;
    if (p->in) {
        if (quit) fprintf(p->in, "quit\n");
        fclose(p->in);
    }
    if (p->out) {
        while (fgets(line, sizeof line, p->out))
            if (last) snprintf(last, cap, "%s", line);
        fclose(p->out);
    }
    p->in = p->out = NULL;
    if (p->pid <= 0) return 0;
    return waitpid(p->pid, &status, 0) == p->pid && WIFEXITED(status) && WEXITSTATUS(status) == 0;
}
#endif
