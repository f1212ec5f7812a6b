/* long_resume - a long resume check of ./examples/train_dbnet (run by ./build.sh test-long, which builds the trainer
   first; seconds on 2 idle cores, a few minutes when other programs load them).

   One small run of STEPS steps goes uninterrupted; the same run is then interrupted again and again and resumed each
   time with --resume, until it completes. Twice: on synthetic scenes (the default data), and on a small ICDAR folder
   whose epochs last 7 steps, so the run crosses many epoch boundaries and is resumed mid-epoch. The interruptions:
     - --stop-at at a random early step, at a validation-and-checkpoint step and at the step before the last;
     - SIGINT or SIGTERM at random instants while it trains (the step in progress finishes, last is saved, exit 130);
     - a signal within the first moments of a resumed process, before it has trained a step (it either dies before its
       handler exists and leaves the run as it was, or saves the state it has just loaded);
   and the resumed processes use other --workers counts. A third chain crashes the synthetic run instead: SIGKILL at
   random instants (while training, around a commit, around a validation, at a process's start); each resume then
   continues from the last committed state and logs again what the killed process logged after it. At the end each
   interrupted run and its uninterrupted twin must agree bit for bit: every tensor of last, best and their optimizer
   files (weights, batch-norm statistics, moments, the weight average), their metadata except the elapsed seconds,
   every logged number of metrics.jsonl except the images-per-second rate, and every validation overlay image. Each interrupted process must report the step it stopped at, and that step must be
   the one in its checkpoint. The comparisons themselves are shown to tell different checkpoints apart.

       long_resume [case-name-filter]     OCR_LONG_SEED=N fixes the random choices (printed at the start) */
#define OCR_IMPLEMENTATION
#include "ocr_tensor.h"
#include "ocr_data.h"
#include "ocr_test.h"
#include "ocr_test_cli.h"
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <time.h>
#include <unistd.h>
#include <dirent.h>
#include <sys/stat.h>
#include <sys/wait.h>

static const char *const TRAIN = "./examples/train_dbnet";
#define STEPS 400
#define EVAL_EVERY 100
/* tiny and fast: 64x64 scenes, batch 2, the narrowest model; every step logged */
#define RUN_ARGS "--size 64 --batch 2 --width 0.05 --val-count 4 --val-size 64 --threads 2 --log-every 1 --lr 0.005"
#define SEGMENT_TIMEOUT_S 600
#define dir ocr_test_cli_dir
static ocr_ctx ctx;
static uint64_t g_rng;
/* One run, uninterrupted (whole) and interrupted (chain), on one kind of data. */
typedef struct {
    const char *name;
    char data_args[300];   /* the data flags: empty for synthetic scenes */
    char whole[128], chain[128];
    int whole_ok, chain_ok;
    int kills;             /* interrupted by SIGKILL (a crash) instead of a clean stop */
} scenario;
static scenario g_synth = {"synth", "", "", "", 0, 0, 0}, g_icdar = {"icdar", "", "", "", 0, 0, 0}, g_killed = {"killed", "", "", "", 0, 0, 1};

static uint64_t rnd(void) { /* xorshift64*: the test's own randomness */
    g_rng ^= g_rng >> 12; g_rng ^= g_rng << 25; g_rng ^= g_rng >> 27;
    return g_rng * 2685821657736338717ull;
}
static void sleep_ms(long ms) {
    struct timespec t;
    t.tv_sec = ms / 1000;
    t.tv_nsec = (ms % 1000) * 1000000L;
    while (nanosleep(&t, &t) != 0 && errno == EINTR) {}
}
static double now_s(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* ---- one train_dbnet process: started directly (no shell), so the signals reach it ---- */
typedef struct {
    int signal;          /* 0: none; else sent once ... */
    int64_t after_step;  /* ... when stdout shows this step done (-1: delay_ms after the start) ... */
    long delay_ms;       /* ... plus this many milliseconds */
} interrupt_plan;
typedef struct {
    int exited, code, signaled;  /* exit status, or the signal that ended it */
    int sent;                    /* the planned signal went out */
    double first_step_s;         /* seconds from the start to the first step on stdout (-1: none seen) */
    double seconds;              /* the whole process */
    char out_path[200], err_path[200];
} segment_result;

/* Highest "step N/M" line in the file so far, or -1. */
static int64_t last_logged_step(const char *path) {
    char *text = ocr_test_read_text(path), *line;
    int64_t best = -1;
    if (!text) return -1;
    for (line = text; line && *line; line = strchr(line, '\n'), line = line ? line + 1 : NULL) {
        long long n, m;
        if (sscanf(line, "step %lld/%lld", &n, &m) == 2 && n > best) best = n;
    }
    free(text);
    return best;
}

static segment_result run_segment(const char *name, const char *args, int index, interrupt_plan plan) {
    segment_result r;
    char buf[2048], *argv[64], *save = NULL, *tok;
    int argc = 0, status;
    pid_t pid;
    double t0 = now_s(), t_send = -1;
    memset(&r, 0, sizeof r);
    r.first_step_s = -1;
    snprintf(r.out_path, sizeof r.out_path, "%s/%s_segment_%02d.out", dir, name, index);
    snprintf(r.err_path, sizeof r.err_path, "%s/%s_segment_%02d.err", dir, name, index);
    snprintf(buf, sizeof buf, "%s", args);
    argv[argc++] = (char *)TRAIN;
    for (tok = strtok_r(buf, " ", &save); tok && argc < 63; tok = strtok_r(NULL, " ", &save)) argv[argc++] = tok;
    argv[argc] = NULL;
    fflush(NULL);
    pid = fork();
    if (pid == 0) {
        int fo = open(r.out_path, O_WRONLY | O_CREAT | O_TRUNC, 0644), fe = open(r.err_path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        if (fo < 0 || fe < 0 || dup2(fo, 1) < 0 || dup2(fe, 2) < 0) _exit(126);
        execv(TRAIN, argv);
        _exit(127);
    }
    if (pid < 0) { OCR_CHECK_MSG(0, "fork: %s", strerror(errno)); return r; }
    if (plan.signal && plan.after_step < 0) t_send = t0 + 1e-3 * (double)plan.delay_ms;
    for (;;) {
        pid_t w = waitpid(pid, &status, WNOHANG);
        if (w == pid) break;
        if (w < 0) { OCR_CHECK_MSG(0, "waitpid: %s", strerror(errno)); return r; }
        if (r.first_step_s < 0 || (plan.signal && !r.sent && t_send < 0)) {
            int64_t logged = last_logged_step(r.out_path);
            if (logged >= 0 && r.first_step_s < 0) r.first_step_s = now_s() - t0;
            if (plan.signal && !r.sent && t_send < 0 && logged >= plan.after_step) t_send = now_s() + 1e-3 * (double)plan.delay_ms;
        }
        if (plan.signal && !r.sent && t_send >= 0 && now_s() >= t_send) { kill(pid, plan.signal); r.sent = 1; }
        if (now_s() - t0 > SEGMENT_TIMEOUT_S) {
            kill(pid, SIGKILL);
            waitpid(pid, &status, 0);
            OCR_CHECK_MSG(0, "'%s %s' still running after %d s: killed", TRAIN, args, SEGMENT_TIMEOUT_S);
            return r;
        }
        sleep_ms(5);
    }
    r.seconds = now_s() - t0;
    r.exited = WIFEXITED(status);
    r.code = r.exited ? WEXITSTATUS(status) : -1;
    r.signaled = WIFSIGNALED(status) ? WTERMSIG(status) : 0;
    return r;
}

/* The step a run directory's last checkpoint holds, or -1. */
static int64_t checkpoint_step(const char *run) {
    char path[300];
    ocr_safetensors st;
    const char *v;
    int64_t step = -1;
    snprintf(path, sizeof path, "%s/last.safetensors", run);
    if (access(path, F_OK) != 0 || ocr_safetensors_open(&ctx, &st, path) != OCR_OK) return -1;
    v = ocr_safetensors_meta(&st, "train.step");
    if (v) step = atoll(v);
    ocr_safetensors_close(&st);
    return step;
}

/* The step of the state a --resume would continue from: state.json's when there is one, else the last checkpoint's. */
static int64_t state_step(const char *run) {
    char path[300], *text;
    double v;
    snprintf(path, sizeof path, "%s/state.json", run);
    if (access(path, F_OK) != 0 || !(text = ocr_test_read_text(path))) return checkpoint_step(run);
    v = ocr_test_json_number(text, strlen(text), "step");
    free(text);
    return v >= 0 ? (int64_t)v : -1;
}

/* ---- comparisons: each returns the number of differences and describes the first few ---- */
static int ignored_meta(const char *key) { return strstr(key, "seconds") || strstr(key, "time") || strstr(key, "host"); }

static int compare_safetensors(const char *a_path, const char *b_path, int quiet) {
    ocr_safetensors a, b;
    int i, diffs = 0;
    if (ocr_safetensors_open(&ctx, &a, a_path) != OCR_OK) { if (!quiet) fprintf(stderr, "  %s\n", ocr_ctx_last_error(&ctx)); return 1; }
    if (ocr_safetensors_open(&ctx, &b, b_path) != OCR_OK) {
        if (!quiet) fprintf(stderr, "  %s\n", ocr_ctx_last_error(&ctx));
        ocr_safetensors_close(&a);
        return 1;
    }
    if (a.n_entries != b.n_entries) {
        diffs++;
        if (!quiet) fprintf(stderr, "  %s: %d tensors, %s: %d\n", a_path, a.n_entries, b_path, b.n_entries);
    }
    for (i = 0; i < a.n_entries; i++) {
        const ocr_safetensors_entry *ea = &a.entries[i];
        int j = ocr_safetensors_find(&b, ea->name);
        const ocr_safetensors_entry *eb = j >= 0 ? &b.entries[j] : NULL;
        if (!eb || ea->dtype != eb->dtype || !ocr_shape_equal(ea->shape, eb->shape) || ea->end - ea->begin != eb->end - eb->begin ||
            memcmp(a.bytes + a.data_start + ea->begin, b.bytes + b.data_start + eb->begin, ea->end - ea->begin) != 0) {
            if (!quiet && diffs < 5) fprintf(stderr, "  tensor '%s' differs between %s and %s\n", ea->name, a_path, b_path);
            diffs++;
        }
    }
    for (i = 0; i < a.n_meta; i++) {
        const char *vb = ocr_safetensors_meta(&b, a.meta_keys[i]);
        if (ignored_meta(a.meta_keys[i])) continue;
        if (!vb || strcmp(vb, a.meta_values[i]) != 0) {
            if (!quiet && diffs < 5)
                fprintf(stderr, "  metadata '%s': '%s' in %s, '%s' in %s\n", a.meta_keys[i], a.meta_values[i], a_path, vb ? vb : "(absent)", b_path);
            diffs++;
        }
    }
    for (i = 0; i < b.n_meta; i++)
        if (!ignored_meta(b.meta_keys[i]) && !ocr_safetensors_meta(&a, b.meta_keys[i])) {
            if (!quiet && diffs < 5) fprintf(stderr, "  metadata '%s' only in %s\n", b.meta_keys[i], b_path);
            diffs++;
        }
    ocr_safetensors_close(&a);
    ocr_safetensors_close(&b);
    return diffs;
}

/* metrics.jsonl as one record per step: records[step] = that line (NULL when absent). Counts steps logged twice. */
#define MAX_KEYS 64
static int read_metrics(const char *run, char **text, const char **lines, size_t *lens, int64_t max_step, int *dups) {
    char path[300], *line;
    int n = 0;
    int64_t s;
    for (s = 0; s <= max_step; s++) { lines[s] = NULL; lens[s] = 0; }
    *dups = 0;
    snprintf(path, sizeof path, "%s/metrics.jsonl", run);
    *text = ocr_test_read_text(path);
    if (!*text) return -1;
    for (line = *text; *line;) {
        char *end = strchr(line, '\n');
        size_t len = end ? (size_t)(end - line) : strlen(line);
        double step = ocr_test_json_number(line, len, "step");
        if (!(step >= 0 && step <= (double)max_step)) {
            fprintf(stderr, "  %s: a line without a step in [0, %lld]: %.*s\n", path, (long long)max_step, (int)len, line);
            (*dups)++;
        }
        else if (lines[(int64_t)step]) (*dups)++;
        else { lines[(int64_t)step] = line; lens[(int64_t)step] = len; n++; }
        line = end ? end + 1 : line + len;
    }
    return n;
}
static int is_timing_key(const char *key) {
    const char *name;
    int k;
    for (k = 0; (name = ocr_test_timing_metric(k)) != NULL; k++)
        if (strcmp(key, name) == 0) return 1;
    return 0;
}

/* Every number of line a also in line b, equal (both NaN counts as equal); and no other keys in b (timing ones aside). */
static int compare_metric_line(const char *a, size_t alen, const char *b, size_t blen, int64_t step, int quiet) {
    ocr_json_tok ta[2 * MAX_KEYS + 8], tb[2 * MAX_KEYS + 8];
    int na, nb, i, diffs = 0, keys_a = 0, keys_b = 0;
    if (ocr_json_parse(&ctx, a, alen, ta, 2 * MAX_KEYS + 8, &na) != OCR_OK || ocr_json_parse(&ctx, b, blen, tb, 2 * MAX_KEYS + 8, &nb) != OCR_OK ||
        ta[0].type != OCR_JSON_OBJECT || tb[0].type != OCR_JSON_OBJECT) {
        if (!quiet) fprintf(stderr, "  step %lld: a metrics line is not a JSON object\n", (long long)step);
        return 1;
    }
    for (i = 0; i < ta[0].size; i++) {
        int k = ocr_json_child(ta, 0, i), v = ta[k].next, vb;
        char key[128];
        double x, y;
        if (!ocr_json_string(a, &ta[k], key, sizeof key) || is_timing_key(key)) continue;
        keys_a++;
        vb = ocr_json_find(b, tb, 0, key);
        if (vb < 0 || !ocr_json_number(a, &ta[v], &x) || !ocr_json_number(b, &tb[vb], &y) || !(x == y || (isnan(x) && isnan(y)))) {
            if (!quiet) fprintf(stderr, "  step %lld: '%s' is %.*s uninterrupted, %.*s interrupted and resumed\n", (long long)step, key,
                                (int)(ta[v].end - ta[v].start), a + ta[v].start, vb < 0 ? 8 : (int)(tb[vb].end - tb[vb].start),
                                vb < 0 ? "(absent)" : b + tb[vb].start);
            diffs++;
        }
    }
    for (i = 0; i < tb[0].size; i++) {
        int k = ocr_json_child(tb, 0, i);
        char key[128];
        if (ocr_json_string(b, &tb[k], key, sizeof key) && !is_timing_key(key)) keys_b++;
    }
    if (keys_a != keys_b) {
        if (!quiet) fprintf(stderr, "  step %lld: %d metrics uninterrupted, %d interrupted and resumed\n", (long long)step, keys_a, keys_b);
        diffs++;
    }
    return diffs;
}
static int compare_metrics(const char *run_a, const char *run_b, int quiet) {
    static const char *la[STEPS + 1], *lb[STEPS + 1];
    static size_t na[STEPS + 1], nb[STEPS + 1];
    char *ta = NULL, *tb = NULL;
    int ca, cb, dups_a, dups_b, diffs = 0;
    int64_t s;
    ca = read_metrics(run_a, &ta, la, na, STEPS, &dups_a);
    cb = read_metrics(run_b, &tb, lb, nb, STEPS, &dups_b);
    if (ca < 0 || cb < 0) { if (!quiet) fprintf(stderr, "  no metrics.jsonl in %s or %s\n", run_a, run_b); free(ta); free(tb); return 1; }
    if (dups_a || dups_b) {
        if (!quiet) fprintf(stderr, "  steps logged twice or out of range: %d uninterrupted, %d resumed\n", dups_a, dups_b);
        diffs++;
    }
    for (s = 0; s <= STEPS; s++) {
        if (!la[s] != !lb[s]) {
            if (!quiet && diffs < 5) fprintf(stderr, "  step %lld logged only in the %s run\n", (long long)s, la[s] ? "uninterrupted" : "resumed");
            diffs++;
        } else if (la[s] && diffs < 5) {
            diffs += compare_metric_line(la[s], na[s], lb[s], nb[s], s, quiet);
        } else if (la[s]) {
            diffs += compare_metric_line(la[s], na[s], lb[s], nb[s], s, 1);
        }
    }
    if (ca != STEPS) { if (!quiet) fprintf(stderr, "  %s: %d steps logged, expected %d\n", run_a, ca, STEPS); diffs++; }
    free(ta);
    free(tb);
    return diffs;
}
/* The validation overlays: the same file names, the same bytes. */
static int compare_overlays(const char *run_a, const char *run_b, int *count) {
    char pa[400], pb[400];
    DIR *d;
    struct dirent *e;
    int diffs = 0, n_b = 0;
    *count = 0;
    snprintf(pa, sizeof pa, "%s/overlays", run_a);
    if (!(d = opendir(pa))) { fprintf(stderr, "  no %s\n", pa); return 1; }
    while ((e = readdir(d)) != NULL) {
        unsigned char *xa = NULL, *xb = NULL;
        size_t sa = 0, sb = 0;
        if (e->d_name[0] == '.') continue;
        snprintf(pa, sizeof pa, "%s/overlays/%s", run_a, e->d_name);
        snprintf(pb, sizeof pb, "%s/overlays/%s", run_b, e->d_name);
        (*count)++;
        if (ocr_read_file(&ctx, pa, (size_t)1 << 26, &xa, &sa) != OCR_OK || ocr_read_file(&ctx, pb, (size_t)1 << 26, &xb, &sb) != OCR_OK ||
            sa != sb || memcmp(xa, xb, sa) != 0) {
            if (diffs < 5) fprintf(stderr, "  overlay %s differs (or is missing) in %s\n", e->d_name, run_b);
            diffs++;
        }
        OCR_FREE(xa);
        OCR_FREE(xb);
    }
    closedir(d);
    snprintf(pb, sizeof pb, "%s/overlays", run_b);
    if ((d = opendir(pb))) {
        while ((e = readdir(d)) != NULL) n_b += e->d_name[0] != '.';
        closedir(d);
    }
    if (n_b != *count) { fprintf(stderr, "  %d overlays uninterrupted, %d interrupted and resumed\n", *count, n_b); diffs++; }
    return diffs;
}

/* ---- the cases ---- */
static void uninterrupted(scenario *sc) {
    char args[1024];
    segment_result r;
    interrupt_plan none = {0, 0, 0};
    snprintf(sc->whole, sizeof sc->whole, "%s/%s_whole", dir, sc->name);
    snprintf(args, sizeof args, "%s %s --workers 2 --steps %d --eval-every %d --save-every 50 --out %s", RUN_ARGS, sc->data_args, STEPS,
             EVAL_EVERY, sc->whole);
    r = run_segment(sc->name, args, 0, none);
    printf("     %d steps uninterrupted: exit %d, %.1f s\n", STEPS, r.code, r.seconds);
    OCR_CHECK_MSG(r.exited && r.code == 0, "'%s %s' ended with exit %d, signal %d (stderr in %s)", TRAIN, args, r.code, r.signaled, r.err_path);
    OCR_CHECK_MSG(checkpoint_step(sc->whole) == STEPS, "the uninterrupted run's last checkpoint is at step %lld",
                  (long long)checkpoint_step(sc->whole));
    sc->whole_ok = !ocr_test__case_failed;
}

static void interrupted_and_resumed(scenario *sc) {
    /* the interruptions, in order; each is skipped when the run is already past it */
    enum { STOP_AT, SIGNAL_WHILE_TRAINING, SIGNAL_AT_START };
    typedef struct { int kind; int64_t lo, hi; } step_plan;
    static const step_plan clean[] = {
        {STOP_AT, 1, 40},
        {SIGNAL_WHILE_TRAINING, 60, 150},
        {STOP_AT, 2 * EVAL_EVERY, 2 * EVAL_EVERY},     /* a validation step, also a checkpoint step of the first segment */
        {SIGNAL_AT_START, 0, 0},
        {SIGNAL_WHILE_TRAINING, 220, 290},
        {SIGNAL_WHILE_TRAINING, 3 * EVAL_EVERY - 1, 3 * EVAL_EVERY},  /* lands in or around a validation */
        {SIGNAL_AT_START, 0, 0},
        {SIGNAL_WHILE_TRAINING, 320, 380},
        {STOP_AT, STEPS - 1, STEPS - 1},
    };
    /* a crash (SIGKILL) at any instant, also while a state is being committed; the run then continues from its last
       committed state, and what it logged after that state is logged again */
    static const step_plan crash[] = {
        {STOP_AT, 30, 60},                                            /* a first state exists */
        {SIGNAL_WHILE_TRAINING, 70, 140},
        {SIGNAL_WHILE_TRAINING, 149, 150},                            /* around a commit (--save-every 25) */
        {SIGNAL_AT_START, 0, 0},
        {SIGNAL_WHILE_TRAINING, 2 * EVAL_EVERY - 1, 2 * EVAL_EVERY},  /* around a validation and its commit */
        {SIGNAL_WHILE_TRAINING, 210, 290},
        {SIGNAL_AT_START, 0, 0},
        {SIGNAL_WHILE_TRAINING, 310, 390},
    };
    const step_plan *plan = sc->kills ? crash : clean;
    const int n_plan = sc->kills ? (int)(sizeof crash / sizeof crash[0]) : (int)(sizeof clean / sizeof clean[0]);
    char args[1024];
    int64_t step = 0;
    int p, seg = 1, interruptions = 0, workers = 2, signals = 0, early_deaths = 0, crashes = 0;
    long startup_ms = 1000; /* a resumed process's time to its first step, measured on the way */
    snprintf(sc->chain, sizeof sc->chain, "%s/%s_chain", dir, sc->name);
    for (p = 0; p <= n_plan; p++) {
        interrupt_plan ip = {0, 0, 0};
        segment_result r;
        int64_t target = 0, now;
        const char *what;
        char extra[64] = "";
        int last = p == n_plan;
        if (!last) {
            target = plan[p].lo + (int64_t)(rnd() % (uint64_t)(plan[p].hi - plan[p].lo + 1));
            if (plan[p].kind != SIGNAL_AT_START && target <= step) continue;
            if (plan[p].kind == STOP_AT) snprintf(extra, sizeof extra, " --stop-at %lld", (long long)target);
            else {
                ip.signal = sc->kills && plan[p].kind != STOP_AT ? SIGKILL : (signals++ % 2) ? SIGTERM : SIGINT;
                ip.after_step = plan[p].kind == SIGNAL_AT_START ? -1 : target;
                /* at the start: anywhere in the time a resumed process takes to reach its first step */
                ip.delay_ms = plan[p].kind == SIGNAL_AT_START ? (long)(rnd() % (uint64_t)startup_ms) : (long)(rnd() % 30);
            }
        }
        if (step == 0 && seg == 1)
            snprintf(args, sizeof args, "%s %s --workers %d --steps %d --eval-every %d --save-every 50 --out %s%s", RUN_ARGS, sc->data_args,
                     workers, STEPS, EVAL_EVERY, sc->chain, extra);
        else
            snprintf(args, sizeof args, "--resume %s --threads 2 --log-every 1 --workers %d%s%s", sc->chain, workers,
                     sc->kills ? " --save-every 25" : "", extra);
        r = run_segment(sc->name, args, seg, ip);
        if (seg > 1 && r.first_step_s > 0 && !(ip.signal && ip.after_step < 0)) startup_ms = (long)(1000.0 * r.first_step_s) + 1;
        now = state_step(sc->chain);
        what = last ? "to the end" : plan[p].kind == STOP_AT ? "--stop-at" : plan[p].kind == SIGNAL_AT_START ? "a signal at the start" : "a signal";
        printf("     segment %d (%s%s, %d workers): exit %d%s, checkpoint at step %lld, %.1f s\n", seg, what,
               ip.signal ? (ip.signal == SIGINT ? " SIGINT" : ip.signal == SIGTERM ? " SIGTERM" : " SIGKILL") : "", workers, r.code,
               r.signaled ? " (killed by the signal)" : "",
               (long long)now, r.seconds);
        fflush(stdout);
        if (!last && r.signaled == SIGKILL && ip.signal == SIGKILL) {
            /* a crash: the state never goes back and never claims a step beyond what the process logged */
            int64_t logged = last_logged_step(r.out_path);
            OCR_CHECK_MSG(now >= step && now <= STEPS && now <= (logged > step ? logged : step),
                          "segment %d: killed after logging step %lld, the state went from step %lld to %lld", seg, (long long)logged,
                          (long long)step, (long long)now);
            crashes++;
        } else if (!last && r.signaled && plan[p].kind == SIGNAL_AT_START && r.signaled == ip.signal) {
            /* died before its handler existed: the run directory must be as it was */
            OCR_CHECK_MSG(now == step, "a process killed at its start moved the checkpoint from step %lld to %lld", (long long)step, (long long)now);
            early_deaths++;
        } else if (r.exited && r.code == 130 && !last) {
            char *err = ocr_test_read_text(r.err_path), want[64];
            snprintf(want, sizeof want, "interrupted at step %lld;", (long long)now);
            OCR_CHECK_MSG(err && strstr(err, want) && strstr(err, "--resume"), "segment %d: stderr does not say '%s' (stderr in %s)", seg, want,
                          r.err_path);
            OCR_CHECK_MSG(now >= step && now < STEPS, "segment %d: the checkpoint went from step %lld to %lld", seg, (long long)step,
                          (long long)now);
            if (plan[p].kind == STOP_AT) OCR_CHECK_MSG(now == target, "--stop-at %lld stopped at step %lld", (long long)target, (long long)now);
            free(err);
            interruptions++;
        } else if (r.exited && r.code == 0 && (last || plan[p].kind != STOP_AT)) {
            /* finished (a late signal arrives after the last step is done, or the final segment) */
            OCR_CHECK_MSG(now == STEPS, "segment %d exited 0 with the checkpoint at step %lld", seg, (long long)now);
        } else {
            OCR_CHECK_MSG(0, "segment %d ('%s %s') ended with exit %d, signal %d (stderr in %s)", seg, TRAIN, args, r.code, r.signaled, r.err_path);
        }
        if (ocr_test__case_failed) return;
        step = now;
        seg++;
        workers = 1 + (int)(rnd() % 3);
        if (step == STEPS) break;
    }
    printf("     %d processes: %d interrupted (saved, exit 130), %d killed by a signal at their start before their handler existed, "
           "%d killed with SIGKILL\n", seg - 1, interruptions, early_deaths, crashes);
    OCR_CHECK_MSG(step == STEPS, "the interrupted run ended at step %lld of %d", (long long)step, STEPS);
    OCR_CHECK_MSG(interruptions + crashes >= 5, "only %d interruptions happened", interruptions + crashes);
    sc->chain_ok = !ocr_test__case_failed;
}

static void bit_identical(scenario *sc) {
    static const char *const files[] = {"last.safetensors", "last.optim.safetensors", "best.safetensors", "best.optim.safetensors"};
    char pa[300], pb[300];
    int i, d, n_overlays;
    if (!sc->whole_ok || !sc->chain_ok) { OCR_CHECK_MSG(0, "an earlier case failed: nothing to compare"); return; }
    for (i = 0; i < (int)(sizeof files / sizeof files[0]); i++) {
        snprintf(pa, sizeof pa, "%s/%s", sc->whole, files[i]);
        snprintf(pb, sizeof pb, "%s/%s", sc->chain, files[i]);
        d = compare_safetensors(pa, pb, 0);
        OCR_CHECK_MSG(d == 0, "%s: %d differences between the uninterrupted and the interrupted run", files[i], d);
    }
    d = compare_metrics(sc->whole, sc->chain, 0);
    OCR_CHECK_MSG(d == 0, "metrics.jsonl: %d differences between the uninterrupted and the interrupted run", d);
    d = compare_overlays(sc->whole, sc->chain, &n_overlays);
    OCR_CHECK_MSG(d == 0 && n_overlays >= STEPS / EVAL_EVERY, "overlays: %d differences, %d files", d, n_overlays);
    /* the comparisons can fail: the last and the best checkpoint differ, and so does one run's metrics with its
       own copy shifted by a step */
    snprintf(pa, sizeof pa, "%s/last.safetensors", sc->whole);
    snprintf(pb, sizeof pb, "%s/best.safetensors", sc->whole);
    OCR_CHECK_MSG(compare_safetensors(pa, pb, 1) > 0, "the checkpoint comparison finds no difference between last and best");
    {
        char *text;
        const char *l[STEPS + 1];
        size_t n[STEPS + 1];
        int dups;
        if (read_metrics(sc->whole, &text, l, n, STEPS, &dups) == STEPS)
            OCR_CHECK_MSG(compare_metric_line(l[10], n[10], l[11], n[11], 10, 1) > 0, "the metrics comparison finds steps 10 and 11 equal");
        free(text);
    }
}

/* A small ICDAR-style folder (ICDAR_IMAGES images of 96x96 with 1 to 3 dark words each): with batch 2 an epoch is
   ICDAR_IMAGES / 2 steps, so the run crosses many epoch boundaries (a new shuffle each) and is interrupted mid-epoch. */
#define ICDAR_IMAGES 14
static int make_icdar(const char *root) {
    char path[300];
    int i, j;
    for (i = 0; i < 2; i++) {
        snprintf(path, sizeof path, "%s/%s", root, i ? "gts" : "images");
        if (mkdir(path, 0755) != 0 && errno != EEXIST) return 0;
    }
    for (i = 0; i < ICDAR_IMAGES; i++) {
        ocr_image img;
        FILE *f;
        int x, y;
        if (ocr_image_alloc(&ctx, &img, 96, 96, 3) != OCR_OK) return 0;
        memset(img.pixels, 170 + 5 * i, (size_t)96 * 96 * 3);
        snprintf(path, sizeof path, "%s/gts/gt_img_%d.txt", root, i);
        if (!(f = fopen(path, "w"))) { ocr_image_free(&img); return 0; }
        for (j = 0; j < 1 + i % 3; j++) {
            int x0 = 4 + (i * 11 + j * 17) % 40, y0 = 6 + 30 * j + i % 7, x1 = x0 + 30 + 4 * j, y1 = y0 + 12;
            for (y = y0; y < y1; y++)
                for (x = x0; x < x1; x++) memset(img.pixels + ((size_t)y * 96 + (size_t)x) * 3, 30 + 10 * j, 3);
            fprintf(f, "%d,%d,%d,%d,%d,%d,%d,%d,w%d_%d\n", x0, y0, x1, y0, x1, y1, x0, y1, i, j);
        }
        fclose(f);
        snprintf(path, sizeof path, "%s/images/img_%d.png", root, i);
        if (ocr_image_save_png(&ctx, path, &img) != OCR_OK) { ocr_image_free(&img); return 0; }
        ocr_image_free(&img);
    }
    return 1;
}

static void test_synth_uninterrupted(void) { uninterrupted(&g_synth); }
static void test_synth_interrupted_and_resumed(void) { interrupted_and_resumed(&g_synth); }
static void test_synth_bit_identical(void) { bit_identical(&g_synth); }
/* the same synthetic run crashed and resumed, against the same uninterrupted run */
static void test_killed_and_resumed(void) {
    if (!g_synth.whole[0]) uninterrupted(&g_synth); /* run alone (a case filter) */
    if (!g_synth.whole_ok) { OCR_CHECK_MSG(0, "the uninterrupted synthetic run failed"); return; }
    memcpy(g_killed.whole, g_synth.whole, sizeof g_killed.whole);
    g_killed.whole_ok = 1;
    interrupted_and_resumed(&g_killed);
}
static void test_killed_bit_identical(void) { bit_identical(&g_killed); }
static void test_icdar_uninterrupted(void) {
    char root[128];
    snprintf(root, sizeof root, "%s/icdar", dir);
    OCR_CHECK_MSG(mkdir(root, 0755) == 0 && make_icdar(root), "cannot write the ICDAR folder %s: %s", root, ocr_ctx_last_error(&ctx));
    if (ocr_test__case_failed) return;
    snprintf(g_icdar.data_args, sizeof g_icdar.data_args, "--data icdar:%s --val icdar:%s", root, root);
    uninterrupted(&g_icdar);
}
static void test_icdar_interrupted_and_resumed(void) { interrupted_and_resumed(&g_icdar); }
static void test_icdar_bit_identical(void) { bit_identical(&g_icdar); }

int main(int argc, char **argv) {
    char cmd[128];
    const char *s = getenv("OCR_LONG_SEED");
    ocr_test_init(argc, argv);
    if (access(TRAIN, X_OK) != 0) {
        fprintf(stderr, "long_resume: %s must be built first (./build.sh builds it)\n", TRAIN);
        printf("FAIL program_built\nRESULT passed=0 failed=1\n");
        return 1;
    }
    g_rng = s && *s ? strtoull(s, NULL, 10) : (uint64_t)time(NULL) ^ ((uint64_t)getpid() << 20);
    if (!g_rng) g_rng = 1;
    printf("long_resume: OCR_LONG_SEED=%llu\n", (unsigned long long)g_rng);
    if (ocr_ctx_init(&ctx, 1, 7) != OCR_OK) return 1;
    ocr_test_cli_ctx = &ctx;
    snprintf(dir, sizeof dir, "/tmp/ocr_long_resume.XXXXXX");
    if (!mkdtemp(dir)) { fprintf(stderr, "long_resume: mkdtemp failed\n"); return 1; }
    OCR_TEST_RUN(test_synth_uninterrupted);
    OCR_TEST_RUN(test_synth_interrupted_and_resumed);
    OCR_TEST_RUN(test_synth_bit_identical);
    OCR_TEST_RUN(test_killed_and_resumed);
    OCR_TEST_RUN(test_killed_bit_identical);
    OCR_TEST_RUN(test_icdar_uninterrupted);
    OCR_TEST_RUN(test_icdar_interrupted_and_resumed);
    OCR_TEST_RUN(test_icdar_bit_identical);
    if (ocr_test__failed) fprintf(stderr, "long_resume: kept %s for inspection\n", dir);
    else {
        snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
        if (system(cmd) != 0) fprintf(stderr, "long_resume: could not remove %s\n", dir);
    }
    ocr_ctx_free(&ctx);
    return ocr_test_finish();
}
