#!/usr/bin/env bash
# ocr-c build entry point.
#   ./build.sh            install missing Debian packages, build examples/NAME, build/test_*, build/bench_*
#   ./build.sh test       build, then run every test normally and under AddressSanitizer + UBSan
#   ./build.sh test-long  the long checks (tests/long_*.c: an LMDB fork soak, long interrupted-and-resumed training)
#   ./build.sh bench      build and run the benchmarks
#   ./build.sh fuzz [SECONDS | --runs N] [TARGET...]   the libFuzzer targets (fuzz/run.sh; default 60 s each)
#   ./build.sh clean
# Environment: CC (default gcc), JOBS (parallel compiles, default nproc), OCR_TEST_FILTER (substring of test names).
set -euo pipefail
cd "$(dirname "$0")"

MODE=${1:-build}
CC=${CC:-gcc}
JOBS=${JOBS:-$(nproc 2>/dev/null || echo 2)}
WARN="-std=c99 -Wall -Wextra -Wpedantic -Wshadow -Werror"
INC="-I. -I/usr/include/stb"
LIBS="-lm -lpthread -llmdb"
OPT="-O2 -g"
# -g1: line tables for the sanitizers' stack traces; full -g made the sanitizer compiles half as slow again
SAN="-O1 -g1 -fno-omit-frame-pointer -fsanitize=address,undefined -fno-sanitize-recover=all"
# in dependency order: each needs only those before it
HEADERS="ocr_tensor.h ocr_geom.h ocr_nn.h ocr_loss.h ocr_dbnet.h ocr_onnx.h ocr_data.h ocr_synth.h ocr_rec.h"
# the #include lines of every header present, in that order
header_includes() { local h; for h in $HEADERS; do [ -f "$h" ] && printf '#include "%s"\n' "$h"; done; return 0; }

# Packages the build needs, and the extra ones the tests use as independent references.
# The synthetic scenes' declared fonts and photographs (ocr_synth.h, docs/SYNTH_ASSETS.md) are build packages: the
# default training run renders with them. The tests add symbol, icon and math fonts that the renderer must refuse.
SYNTH_FONT_PKGS="fonts-dejavu-core fonts-liberation2 fonts-open-sans fonts-cantarell fonts-crosextra-carlito fonts-crosextra-caladea
 fonts-go fonts-ebgaramond fonts-sil-gentium fonts-inconsolata fonts-hack fonts-roboto-unhinted fonts-comfortaa fonts-quicksand
 fonts-comic-neue fonts-dancingscript fonts-lobster fonts-staypuft fonts-kaushanscript fonts-kristi fonts-rufscript fonts-breip
 fonts-havana fonts-ecolier-court fonts-leckerli-one fonts-league-spartan fonts-okolaks"
SYNTH_PHOTO_PKGS="mate-backgrounds lomiri-wallpapers-16.04"
# fonts-nanum: Hangul for examples/ocr's overlays (with DejaVu for Latin, Greek and Cyrillic)
BUILD_PKGS="liblmdb-dev libstb-dev $(echo $SYNTH_FONT_PKGS) $SYNTH_PHOTO_PKGS fonts-nanum wamerican"
TEST_PKGS="python3-torch python3-numpy python3-lmdb python3-pyclipper python3-opencv python3-shapely python3-onnx fonts-font-awesome fonts-lyx"
# [mpi] data-parallel training (examples/train_dbnet under mpirun, tests/test_mpi.c; docs/DISTRIBUTED.md)
MPI_PKGS="libopenmpi-dev openmpi-bin iproute2"   # iproute2: ip netns for the test of two hosts
BENCH_PKGS="libopenblas-dev python3-torch python3-opencv python3-pyclipper python3-shapely libjemalloc2 tesseract-ocr tesseract-ocr-eng hunspell-ko"

say() { printf '%s\n' "$*"; }
# timed LABEL CMD...: run one build step and say how long it took (progress for a build of several minutes)
# (its status is the step's: set -e does not reach into a function called in an && list)
timed() {
    local label=$1 t0=$SECONDS rc=0; shift
    "$@" || rc=$?
    say "build.sh: $label: $((SECONDS - t0)) s"
    return $rc
}

pkg_missing() {
    local missing="" p
    for p in "$@"; do
        dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing="$missing $p"
    done
    printf '%s' "$missing"
}

ensure_pkgs() {
    local missing
    missing=$(pkg_missing "$@")
    [ -z "$missing" ] && return 0
    if [ "$(id -u)" != 0 ]; then
        say "build.sh: missing Debian packages:$missing"
        say "build.sh: run: sudo apt-get update && sudo apt-get install -y$missing"
        exit 1
    fi
    say "build.sh: installing$missing"
    if ! DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $missing >/tmp/ocr-apt.log 2>&1; then
        apt-get update -qq >/tmp/ocr-apt-update.log 2>&1 || true
        DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $missing >/tmp/ocr-apt.log 2>&1 ||
            { say "build.sh: apt-get install$missing failed:"; tail -20 /tmp/ocr-apt.log; exit 1; }
    fi
}

# ONNX Runtime from npm (onnxruntime-node, CPU) under build/ort, which tests/test_onnx.c and bench/bench_infer.c run
# through tools/ort_run.js. ONNXRUNTIME_NODE_INSTALL=skip: its post-install step would download CUDA binaries.
ORT_VERSION=1.30.0
ensure_ort() {
    local have
    command -v node >/dev/null 2>&1 && command -v npm >/dev/null 2>&1 || ensure_pkgs nodejs npm
    have=$(node -p "require('./build/ort/node_modules/onnxruntime-node/package.json').version" 2>/dev/null || true)
    [ "$have" = "$ORT_VERSION" ] && return 0
    say "build.sh: installing onnxruntime-node@$ORT_VERSION (npm) into build/ort"
    mkdir -p build/ort
    ONNXRUNTIME_NODE_INSTALL=skip npm install --prefix build/ort --no-audit --no-fund "onnxruntime-node@$ORT_VERSION" >/tmp/ocr-npm.log 2>&1 ||
        { say "build.sh: npm install onnxruntime-node@$ORT_VERSION failed:"; tail -20 /tmp/ocr-npm.log; exit 1; }
}

# compile SRC OUT FLAGS...: one translation unit to one program
compile_one() {
    local src=$1 out=$2; shift 2
    mkdir -p "$(dirname "$out")"
    local mpi_c="" mpi_l=""   # [mpi] the trainers join an MPI job when built with it
    case "$src" in examples/train_dbnet.c|examples/train_rec.c) mpi_c=${MPI_CFLAGS:-}; mpi_l=${MPI_LIBS:-} ;; esac
    if ! $CC $WARN $INC "$@" $mpi_c "$src" -o "$out" $LIBS $mpi_l 2>"$out.log"; then
        cat "$out.log" >&2
        say "build.sh: FAILED to compile $src" >&2
        return 1
    fi
}
export -f compile_one say
export CC WARN INC LIBS

# Each header alone, with its implementation, as C99 and as C++, under every compiler present.
check_headers() {
    local h c
    for h in $HEADERS; do
        [ -f "$h" ] || continue
        for c in "gcc -std=c99 -x c" "g++ -std=c++11 -x c++" "clang -std=c99 -x c" "clang++ -std=c++11 -x c++"; do
            command -v "${c%% *}" >/dev/null 2>&1 && printf '%s\n%s\n' "$h" "$c"
        done
    done | xargs -d '\n' -n 2 -P "$JOBS" sh -c 'm=$(echo "${0%.h}" | tr a-z A-Z)_IMPLEMENTATION
        printf "#define %s\n#include \"%s\"\n" "$m" "$0" | $1 - -fsyntax-only -Wall -Wextra -Wpedantic -Wshadow -Werror $INC ||
        { echo "build.sh: $0 does not compile alone under: $1"; exit 255; }'
}

# The library is compiled once per flavour (build/ocr_impl.o, build/san/ocr_impl.o, and with the CUDA defines for the
# emulated and nvcc programs) and every program is compiled with OCR_NO_IMPLEMENTATION and linked to it: the headers'
# implementations are most of the compile time (about 25 s each at -O2). build_impl FLAGS OBJ [DEFINES...]
build_impl() {
    local flags=$1 obj=$2; shift 2
    mkdir -p "$(dirname "$obj")"
    { printf '#define OCR_IMPLEMENTATION\n'; header_includes; } >"${obj%.o}.c"
    $CC $WARN $INC $flags "$@" -c "${obj%.o}.c" -o "$obj" || { say "build.sh: FAILED to compile the library ($obj)"; return 1; }
}

build_all() {
    local flags=$1 dir=$2 list=()
    local f pid="" ownpid="" standalone=() own=()
    # the trainer and the benchmarks are built as users build a program, one file with the implementation in it
    # (benchmarks time that build, and some read the library's internals), beside the library. ./build.sh test only
    # checks that the benchmarks compile (a minute less of compiling; ./build.sh and ./build.sh bench build them).
    # In test mode train_dbnet links to the library like the other programs (the same code and flags: one library
    # compile less).
    if [ "$dir" = build ] && [ "$MODE" != test ]; then
        standalone+=("examples/train_dbnet.c examples/train_dbnet")
        for f in bench/*.c; do [ -e "$f" ] && standalone+=("$f build/$(basename "${f%.c}")"); done
    fi
    if [ "$dir" = build ]; then
        [ ${#standalone[@]} = 0 ] || { printf '%s\n' "${standalone[@]}" | xargs -P "$JOBS" -L 1 bash -c 'compile_one "$0" "$1" '"$flags" & pid=$!; }
        if [ "$MODE" = test ]; then
            for f in bench/*.c; do
                [ -e "$f" ] || continue
                rm -f "build/$(basename "${f%.c}")"   # no binary older than its source left behind
                $CC $WARN $INC $flags -fsyntax-only "$f" || { wait $pid || true; say "build.sh: FAILED to compile $f"; return 1; }
            done
        fi
    fi
    # a test that must compile the library itself (its own OCR_MALLOC, say) says so on a line of its own:
    # "ocr-c build: own implementation"; those compile while the library does, which uses one core (20 s less)
    for f in tests/test_*.c; do
        [ -e "$f" ] || continue
        if grep -q '^/\* ocr-c build: own implementation \*/$' "$f"; then own+=("$f $dir/$(basename "${f%.c}")")
        else list+=("$f $dir/$(basename "${f%.c}")"); fi
    done
    if [ ${#own[@]} -gt 0 ]; then
        printf '%s\n' "${own[@]}" | xargs -P "$JOBS" -L 1 bash -c 'compile_one "$0" "$1" '"$flags" & ownpid=$!
    fi
    build_impl "$flags" "$dir/ocr_impl.o" || { [ -z "$pid" ] || wait $pid || true; [ -z "$ownpid" ] || wait $ownpid || true; return 1; }
    # [repro] the sanitizer flavour also builds every examples/repro_*.c as build/san/repro_NAME, which
    # tests/test_repro.c runs when OCR_SANITIZED=1
    if [ "$dir" = build/san ]; then
        for f in examples/repro_*.c; do [ -e "$f" ] && list+=("$f $dir/$(basename "${f%.c}")"); done
    fi
    # [repro] end
    if [ "$dir" = build ]; then
        for f in examples/*.c; do
            [ -e "$f" ] && { [ "$f" != examples/train_dbnet.c ] || [ "$MODE" = test ]; } && list+=("$f ${f%.c}")
        done
        for f in tests/long_*.c; do [ -e "$f" ] && list+=("$f build/$(basename "${f%.c}")"); done
    fi
    if [ ${#list[@]} -gt 0 ]; then
        printf '%s\n' "${list[@]}" | xargs -P "$JOBS" -L 1 bash -c 'compile_one "$0" "$1" '"$flags -DOCR_NO_IMPLEMENTATION $dir/ocr_impl.o" ||
            { [ -z "$pid" ] || wait $pid || true; [ -z "$ownpid" ] || wait $ownpid || true; return 1; }
    fi
    [ -z "$ownpid" ] || wait $ownpid || { [ -z "$pid" ] || wait $pid || true; return 1; }
    [ -z "$pid" ] || wait $pid
}

# The README's C example is a program a newcomer copies: it must compile and run as printed.
readme_example() {
    local d=build/readme
    mkdir -p $d
    awk '/^```c$/{on=1; next} /^```$/{if (on) exit} on' README.md >$d/main.c
    [ -s $d/main.c ] || { say "build.sh: README.md has no C example"; return 1; }
    $CC $WARN $INC -O1 $d/main.c -o $d/main $LIBS 2>$d/main.log || { cat $d/main.log; say "build.sh: README.md's C example does not compile"; return 1; }
    $d/main >$d/main.out 2>&1 || { cat $d/main.out; say "build.sh: README.md's C example failed when run"; return 1; }
}

# Clang catches a different set of warnings: a syntax-only pass over every program when it is installed.
clang_pass() {
    command -v clang >/dev/null 2>&1 || return 0
    local f
    for f in tests/test_*.c tests/long_*.c examples/*.c bench/*.c; do [ -e "$f" ] && printf '%s\n' "$f"; done |
        xargs -P "$JOBS" -I{} sh -c 'clang $0 -fsyntax-only "$1" || { echo "build.sh: clang rejects $1"; exit 255; }' "$WARN $INC" {}
}

# ---------------------------------------------------------------- CUDA section (ocr_cuda.cu)
# Emulation: ocr_cuda.cu as C++ with -DOCR_CUDA_EMULATE (each CUDA thread an OS thread) linked with
# tests/test_cuda_emu.cpp; needs only g++. cuda_emu_build FLAGS DIR puts DIR/test_cuda_emu where run_tests finds it.
CUDA_HOME=${CUDA_HOME:-/usr/local/cuda}
NVCC=$CUDA_HOME/bin/nvcc
CXXWARN="-std=c++11 -Wall -Wextra -Wpedantic -Wshadow -Werror"
cuda_emu_build() {
    local flags=$1 dir=$2
    mkdir -p "$dir"
    # [repro] the repro programs' --device cuda variants on the emulator, DIR/repro_NAME_emu, run by tests/test_repro.c
    # (repro_nonfinite, whole DBNet steps, in the plain build only: minutes under the sanitizers), and the cuDNN
    # isolation tool's (own kernels against the CPU). They link to the library compiled with the emulator's defines,
    # built beside ocr_cuda.cu.
    local f r repros="" lib="" headers=""
    case "$dir" in
    build) repros="repro_step_overflow repro_loss_bad_input repro_nonfinite repro_cudnn_isolate" ;;
    build/san) repros="repro_step_overflow repro_loss_bad_input" ;;
    esac
    # that library holds only the modules they include (the whole of it under the sanitizers: half a minute more)
    for f in $HEADERS; do
        for r in $repros; do grep -q "^#include \"$f\"" "examples/$r.c" && { headers="$headers $f"; break; }; done
    done
    [ -z "$repros" ] || { HEADERS=$headers build_impl "$flags" "$dir/ocr_impl_cuda_emu.o" -DOCR_CUDA -DOCR_CUDA_EMULATE & lib=$!; }
    # [repro] end
    g++ $CXXWARN $INC $flags -x c++ -DOCR_CUDA_EMULATE -c ocr_cuda.cu -o "$dir/ocr_cuda_emu.o" 2>"$dir/ocr_cuda_emu.log" &&
        g++ $CXXWARN $INC $flags -DOCR_CUDA -DOCR_CUDA_EMULATE tests/test_cuda_emu.cpp "$dir/ocr_cuda_emu.o" -o "$dir/test_cuda_emu" \
            $LIBS 2>>"$dir/ocr_cuda_emu.log" ||
        { [ -z "$lib" ] || wait $lib || true; cat "$dir/ocr_cuda_emu.log" >&2; say "build.sh: FAILED to build the CUDA emulation test in $dir" >&2; return 1; }
    # [repro]
    [ -z "$lib" ] || wait $lib || { say "build.sh: FAILED to build the emulated repro programs' library in $dir" >&2; return 1; }
    for f in $repros; do
        { $CC $WARN $INC $flags -DOCR_CUDA -DOCR_CUDA_EMULATE -DOCR_NO_IMPLEMENTATION -c examples/$f.c -o "$dir/${f}_emu.o" &&
            g++ $flags "$dir/${f}_emu.o" "$dir/ocr_impl_cuda_emu.o" "$dir/ocr_cuda_emu.o" -o "$dir/${f}_emu" $LIBS; } 2>"$dir/${f}_emu.log" ||
            { cat "$dir/${f}_emu.log" >&2; say "build.sh: FAILED to build the emulated $f in $dir" >&2; return 1; }
    done
    # [repro] end
    [ "$dir" = build ] || return 0
    # the headers' CUDA declarations as C99
    { printf '#define OCR_IMPLEMENTATION\n'; header_includes | grep -v 'ocr_data.h\|ocr_synth.h'; } |
        $CC $WARN $INC -DOCR_CUDA -x c -fsyntax-only - ||
        { say "build.sh: FAILED: the headers with -DOCR_CUDA" >&2; return 1; }
}
# The real CUDA build with nvcc (cuDNN + cuBLAS, sm_80 + sm_90 + PTX, warnings as errors) into build/cuda:
# ocr_cuda.o, the GPU variants of train_dbnet, detect, eval_dbnet, train_rec, eval_rec, recognize, ocr and the repro
# programs that have one, the parity test and repro_cudnn_isolate. Linked, not run here: without a GPU they can only report that (checked below). Skipped with a
# message when nvcc is absent. ./build.sh test only checks that it compiles, links and reports the missing GPU: one
# architecture and the host code at -O0, into build/cuda-check (a minute less; build/cuda stays the real build).
cuda_nvcc_build() {
    local d=build/cuda f lib O=-O2 archs="sm_80 sm_90 + PTX"
    local arch="-gencode arch=compute_80,code=sm_80 -gencode arch=compute_90,code=sm_90 -gencode arch=compute_90,code=compute_90"
    if [ "$MODE" = test ]; then d=build/cuda-check; O=-O0; archs="sm_80, host code -O0"; arch="-gencode arch=compute_80,code=sm_80"; fi
    local cuflags="$O -std=c++17 -DOCR_CUDNN -Werror all-warnings -Xcompiler -Wall,-Wextra,-Werror $INC $arch"
    local culibs="-L$CUDA_HOME/lib64 -Wl,-rpath,$CUDA_HOME/lib64 -lcudnn -lcublas -lcudart $LIBS"
    if [ ! -x "$NVCC" ]; then say "build.sh: $NVCC not found: skipping the CUDA build (the emulation tests still run)"; return 0; fi
    mkdir -p $d
    # nvcc and the host library (the headers' implementation with -DOCR_CUDA) compile side by side; the programs
    # then compile with OCR_NO_IMPLEMENTATION and everything links against ocr_cuda.o
    $NVCC $cuflags -c ocr_cuda.cu -o $d/ocr_cuda.o 2>$d/ocr_cuda.log & local nv=$!
    build_impl $O $d/ocr_impl.o -DOCR_CUDA 2>$d/host.log &&
        g++ $CXXWARN $INC $O -DOCR_CUDA -c tests/test_cuda_emu.cpp -o $d/test_cuda_parity.o 2>>$d/host.log ||
        { wait $nv || true; cat $d/host.log >&2; say "build.sh: FAILED to compile the CUDA host programs" >&2; return 1; }
    for f in repro_cudnn_isolate train_dbnet detect eval_dbnet train_rec eval_rec recognize ocr repro_step_overflow repro_loss_bad_input \
        repro_nonfinite; do
        [ -f examples/$f.c ] || continue
        $CC $WARN $INC $O -DOCR_CUDA -DOCR_NO_IMPLEMENTATION -c examples/$f.c -o $d/$f.o 2>>$d/host.log ||
            { wait $nv || true; cat $d/host.log >&2; say "build.sh: FAILED to compile the CUDA variant of examples/$f.c" >&2; return 1; }
    done
    wait $nv || { cat $d/ocr_cuda.log >&2; say "build.sh: nvcc FAILED on ocr_cuda.cu" >&2; return 1; }
    for f in test_cuda_parity repro_cudnn_isolate train_dbnet detect eval_dbnet train_rec eval_rec recognize ocr repro_step_overflow \
        repro_loss_bad_input repro_nonfinite; do
        [ -f $d/$f.o ] || continue
        lib=$d/ocr_impl.o; [ $f != test_cuda_parity ] || lib=""   # the parity test compiles the library in itself, as C++
        g++ $d/$f.o $lib $d/ocr_cuda.o -o $d/$f $culibs 2>>$d/host.log || { cat $d/host.log >&2; say "build.sh: FAILED to link $d/$f" >&2; return 1; }
    done
    say "build.sh: CUDA build (nvcc $($NVCC --version | sed -n 's/.*release \([0-9.]*\).*/\1/p'), cuDNN, cuBLAS, $archs) in $d"
    # Without a GPU the CUDA build must say so and fail cleanly, never crash.
    if ! command -v nvidia-smi >/dev/null 2>&1 || ! nvidia-smi >/dev/null 2>&1; then
        local out rc
        set +e; out=$($d/repro_cudnn_isolate 2>&1); rc=$?; set -e
        if [ "$rc" = 0 ] || [ "$rc" -gt 128 ] || ! printf '%s' "$out" | grep -q "no usable CUDA device"; then
            say "build.sh: the CUDA build on this GPU-less machine did not report it cleanly (exit $rc): $out" >&2; return 1
        fi
        for f in "train_dbnet --device cuda" "detect --device cuda --model none.safetensors none.png" \
            "eval_dbnet --device cuda --model none.safetensors --data icdar:none" "train_rec --device cuda --out $d/rec-run" \
            "eval_rec --device cuda --model none.safetensors" "recognize --device cuda --model none.safetensors none.png" \
            "ocr --device cuda --det none.safetensors --rec none.safetensors none.png" \
            "repro_step_overflow --device cuda" "repro_loss_bad_input --device cuda" "repro_nonfinite --device cuda"; do
            [ -x "$d/${f%% *}" ] || continue
            # shellcheck disable=SC2086
            set +e; out=$($d/$f 2>&1); rc=$?; set -e
            if [ "$rc" != 1 ] || ! printf '%s' "$out" | grep -q "no usable CUDA device"; then
                say "build.sh: $d/$f --device cuda on this GPU-less machine did not report it cleanly (exit $rc): $out" >&2; return 1
            fi
        done
        say "build.sh: no GPU here: the CUDA build reports it and exits $rc, as it must (run tools/cuda_parity.sh on a GPU machine)"
    fi
}
# ---------------------------------------------------------------- end of CUDA section

# run_one DIR LABEL RESULTS TEST: run one test program; its report goes to stdout (whole, under a lock: tests may run
# side by side) and "passed failed skipped" is appended to RESULTS
run_one() {
    local dir=$1 label=$2 results=$3 t=$4 out rc p f sk t0=$SECONDS report
    out=$(mktemp); report=$(mktemp)
    set +e
    timeout 600 "$t" ${OCR_TEST_FILTER:-} >"$out" 2>&1
    rc=$?
    set -e
    p=$(sed -n 's/^RESULT passed=\([0-9]*\) failed=\([0-9]*\).*$/\1/p' "$out" | tail -1)
    f=$(sed -n 's/^RESULT passed=\([0-9]*\) failed=\([0-9]*\).*$/\2/p' "$out" | tail -1)
    sk=$(sed -n 's/^RESULT .* skipped=\([0-9]*\)$/\1/p' "$out" | tail -1)
    {
        if [ -z "$p" ]; then p=0; f=1; say "$label $(basename "$t"): crashed or gave no RESULT (exit $rc)"; fi
        if [ "$rc" != 0 ] && [ "$f" = 0 ]; then f=1; say "$label $(basename "$t"): exit $rc"; fi
        if [ "$f" != 0 ]; then
            say "---- $label $(basename "$t") output ----"; tail -60 "$out"; say "----"
        else
            if [ "${sk:-0}" != 0 ]; then say "$label $(basename "$t"): $p passed, $sk skipped ($((SECONDS - t0)) s)"; else say "$label $(basename "$t"): $p passed ($((SECONDS - t0)) s)"; fi
            grep '^SKIP ' "$out" | sed "s/^/    /" || true
        fi
    } >"$report"
    flock "$results" sh -c 'cat "$1"; echo "$2 $3 $4" >>"$5"' sh "$report" "$p" "$f" "${sk:-0}" "$results"
    rm -f "$out" "$report"
}
export -f run_one

# run_tests DIR LABEL [PREFIX [SKIP [JOBS]]]: every DIR/PREFIX* program (default test_) that still has a source in
# tests/, but those named in SKIP (space-separated), JOBS at a time (default 1); adds their counts to TOTAL_PASS,
# TOTAL_FAIL and TOTAL_SKIP
run_tests() {
    local dir=$1 label=$2 prefix=${3:-test_} skip=${4:-} jobs=${5:-1} t results p f sk n=0 ran=0
    results=$(mktemp)
    for t in "$dir"/"$prefix"*; do
        [ -x "$t" ] || continue
        case " $skip " in *" $(basename "$t") "*) continue ;; esac
        case "$t" in *.log) continue ;; esac
        # only tests that still have a source: a binary left from a removed test must not count
        [ -e "tests/$(basename "$t").c" ] || [ -e "tests/$(basename "$t").cpp" ] || continue
        printf '%s\n' "$t"
    done >"$results.list"
    n=$(wc -l <"$results.list")
    xargs -r -P "$jobs" -L 1 bash -c 'run_one "$0" "$1" "$2" "$3"' "$dir" "$label" "$results" <"$results.list" || true
    while read -r p f sk; do
        TOTAL_PASS=$((TOTAL_PASS + p)); TOTAL_FAIL=$((TOTAL_FAIL + f)); TOTAL_SKIP=$((TOTAL_SKIP + sk)); ran=$((ran + 1))
    done <"$results"
    # a test whose runner died reported nothing: it counts as a failure
    [ "$ran" = "$n" ] || { say "$label: $((n - ran)) of $n tests reported nothing"; TOTAL_FAIL=$((TOTAL_FAIL + n - ran)); }
    rm -f "$results" "$results.list"
}

case "$MODE" in
clean)
    rm -rf build
    for f in examples/*.c; do [ -e "$f" ] && rm -f "${f%.c}"; done
    exit 0 ;;
build|test|test-long|bench) ;;
fuzz)
    shift
    ensure_pkgs $BUILD_PKGS clang libclang-rt-14-dev
    exec fuzz/run.sh "$@" ;;
-h|--help|help) sed -n '2,10p' "$0"; exit 0 ;;
*) say "build.sh: unknown mode '$MODE' (build, test, test-long, bench, fuzz, clean)"; exit 2 ;;
esac

ensure_pkgs $BUILD_PKGS $MPI_PKGS
# [mpi] with mpicc present, examples/train_dbnet and train_rec are built with MPI (OCR_WITH_MPI); without it, as one process only
MPI_CFLAGS=""; MPI_LIBS=""
if command -v mpicc >/dev/null 2>&1 && mpicc --showme:compile >/dev/null 2>&1; then
    MPI_CFLAGS="-DOCR_WITH_MPI $(mpicc --showme:compile)"; MPI_LIBS=$(mpicc --showme:link)
fi
export MPI_CFLAGS MPI_LIBS
case "$MODE" in
test) ensure_pkgs $TEST_PKGS; ensure_ort ;;
test-long) ensure_pkgs $TEST_PKGS ;;
bench) ensure_pkgs $BENCH_PKGS; ensure_ort ;;
esac
mkdir -p build
timed "each header alone (gcc, g++, clang, clang++)" check_headers
timed "no internal name defined in two files" tools/check_names.sh
timed "library, tests and programs ($CC $OPT)" build_all "$OPT" build
timed "clang syntax pass" clang_pass
timed "README example" readme_example
timed "CUDA emulation build" cuda_emu_build "$OPT" build   # CUDA section
timed "nvcc build" cuda_nvcc_build                         # CUDA section
say "build.sh: built with $CC ($(ls tests/test_*.c 2>/dev/null | wc -l) tests, $(ls examples/*.c 2>/dev/null | wc -l) examples)"

if [ "$MODE" = test ]; then
    TOTAL_PASS=0; TOTAL_FAIL=0; TOTAL_SKIP=0
    # The sanitizer builds compile while the plain tests run (most tests leave a core idle): a minute less in all.
    mkdir -p build/san
    {
        timed "sanitizer build" build_all "$SAN" build/san &&
            timed "CUDA emulation build (sanitizers)" cuda_emu_build "$SAN" build/san &&   # CUDA section
            timed "CUDA emulation build (TSan)" cuda_emu_build "-O1 -g1 -fsanitize=thread" build/tsan   # CUDA section
    } >build/san/build.log 2>&1 & san_build=$!
    # test_mpi after the sanitizer builds: two ranks on two cores beside a compiler ran it 4x slower; test_cuda_emu
    # (the emulator's OS-thread blocks, futex-bound: 26 s alone, 58 s beside the compiler) beside the sanitizer tests
    run_tests build "[plain]" test_ "test_mpi test_cuda_emu"
    if ! wait $san_build; then cat build/san/build.log; say "build.sh: FAILED: the sanitizer builds"; say "$TOTAL_PASS passed, $((TOTAL_FAIL + 1)) failed"; exit 1; fi
    cat build/san/build.log
    run_tests build "[plain]" test_mpi
    export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=0} UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1}
    export OCR_SANITIZED=1
    # the emulation tests (plain, then TSan) beside the ASan tests: those leave a core idle much of the time
    mkdir -p build/tsan                                     # CUDA section
    ( TOTAL_PASS=0; TOTAL_FAIL=0; TOTAL_SKIP=0; OCR_SANITIZED=0 run_tests build "[plain]" test_cuda_emu   # CUDA section
      run_tests build/tsan "[tsan]"; echo "TOTALS $TOTAL_PASS $TOTAL_FAIL $TOTAL_SKIP" ) \
        >build/tsan/tests.log 2>&1 & tsan_tests=$!          # CUDA section
    # two at a time: most of them use one core (a minute less)
    run_tests build/san "[asan+ubsan]" test_ "" 2
    wait $tsan_tests || true                                # CUDA section
    grep -v '^TOTALS ' build/tsan/tests.log || true         # CUDA section
    set -- $(sed -n 's/^TOTALS //p' build/tsan/tests.log) 0 1 0   # CUDA section: no totals line counts as a failure
    TOTAL_PASS=$((TOTAL_PASS + $1)); TOTAL_FAIL=$((TOTAL_FAIL + $2)); TOTAL_SKIP=$((TOTAL_SKIP + $3)) # CUDA section
    [ "$TOTAL_SKIP" = 0 ] || say "$TOTAL_SKIP skipped (each named above with its reason)"
    say "$TOTAL_PASS passed, $TOTAL_FAIL failed"
    [ "$TOTAL_FAIL" = 0 ]
elif [ "$MODE" = test-long ]; then
    TOTAL_PASS=0; TOTAL_FAIL=0; TOTAL_SKIP=0
    run_tests build "[long]" long_
    say "$TOTAL_PASS passed, $TOTAL_FAIL failed"
    [ "$TOTAL_FAIL" = 0 ]
elif [ "$MODE" = bench ]; then
    for b in build/bench_*; do
        [ -x "$b" ] || continue
        case "$b" in *.log) continue ;; esac
        "$b"
    done
fi
