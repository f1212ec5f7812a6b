#!/usr/bin/env bash
# ocr-c build entry point.
#   ./build.sh            install missing Debian packages, build examples/NAME, build/test_*, build/bench_*
#   ./build.sh test       build, then run every test normally and under AddressSanitizer + UBSan
#   ./build.sh test-long  the long checks (tests/long_*.c)
#   ./build.sh bench      build and run the benchmarks
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
SAN="-O1 -g -fno-omit-frame-pointer -fsanitize=address,undefined -fno-sanitize-recover=all"
HEADERS="ocr_tensor.h ocr_nn.h ocr_loss.h ocr_dbnet.h ocr_data.h"

# Packages the build needs, and the extra ones the tests use as independent references.
BUILD_PKGS="liblmdb-dev libstb-dev fonts-dejavu-core"
TEST_PKGS="python3-torch python3-numpy python3-lmdb python3-pyclipper python3-opencv python3-shapely"
BENCH_PKGS="libopenblas-dev python3-torch python3-opencv python3-pyclipper python3-shapely libjemalloc2"

say() { printf '%s\n' "$*"; }

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

# compile SRC OUT FLAGS...: one translation unit to one program
compile_one() {
    local src=$1 out=$2; shift 2
    mkdir -p "$(dirname "$out")"
    if ! $CC $WARN $INC "$@" "$src" -o "$out" $LIBS 2>"$out.log"; then
        cat "$out.log" >&2
        say "build.sh: FAILED to compile $src" >&2
        return 1
    fi
}
export -f compile_one say
export CC WARN INC LIBS

# Each header alone, with its implementation, as C99 and as C++, under every compiler present.
check_headers() {
    local h m c
    for h in $HEADERS; do
        [ -f "$h" ] || continue
        m=$(echo "${h%.h}" | tr a-z A-Z)_IMPLEMENTATION
        for c in "gcc -std=c99 -x c" "g++ -std=c++11 -x c++" "clang -std=c99 -x c" "clang++ -std=c++11 -x c++"; do
            command -v "${c%% *}" >/dev/null 2>&1 || continue
            printf '#define %s\n#include "%s"\n' "$m" "$h" |
                ${c} - -fsyntax-only -Wall -Wextra -Wpedantic -Wshadow -Werror $INC ||
                { say "build.sh: $h does not compile alone under: $c"; return 1; }
        done
    done
}

# The library is compiled once per flavour (build/ocr_impl.o, build/san/ocr_impl.o) and every program is compiled
# with OCR_NO_IMPLEMENTATION and linked to it: the headers' implementations are most of the compile time.
build_impl() {
    local flags=$1 dir=$2
    mkdir -p "$dir"
    printf '#define OCR_IMPLEMENTATION\n#include "ocr_tensor.h"\n#include "ocr_nn.h"\n#include "ocr_loss.h"\n#include "ocr_dbnet.h"\n#include "ocr_data.h"\n' >"$dir/ocr_impl.c"
    $CC $WARN $INC $flags -c "$dir/ocr_impl.c" -o "$dir/ocr_impl.o" || { say "build.sh: FAILED to compile the library ($dir)"; return 1; }
}

build_all() {
    local flags=$1 dir=$2 list=()
    local f
    build_impl "$flags" "$dir"
    for f in tests/test_*.c; do [ -e "$f" ] && list+=("$f $dir/$(basename "${f%.c}")"); done
    if [ "$dir" = build ]; then
        for f in examples/*.c; do [ -e "$f" ] && list+=("$f ${f%.c}"); done
        for f in bench/*.c; do [ -e "$f" ] && list+=("$f build/bench_$(basename "${f%.c}")"); done
        for f in tests/long_*.c; do [ -e "$f" ] && list+=("$f build/$(basename "${f%.c}")"); done
    fi
    [ ${#list[@]} -eq 0 ] && return 0
    printf '%s\n' "${list[@]}" | xargs -P "$JOBS" -L 1 bash -c 'compile_one "$0" "$1" '"$flags -DOCR_NO_IMPLEMENTATION $dir/ocr_impl.o"
}

# Clang catches a different set of warnings: a syntax-only pass over every program when it is installed.
clang_pass() {
    command -v clang >/dev/null 2>&1 || return 0
    local f
    for f in tests/test_*.c examples/*.c bench/*.c; do
        [ -e "$f" ] || continue
        clang $WARN $INC -fsyntax-only "$f" || { say "build.sh: clang rejects $f"; return 1; }
    done
}

run_tests() {
    local dir=$1 label=$2 t out rc p f
    for t in "$dir"/test_*; do
        [ -x "$t" ] || continue
        case "$t" in *.log) continue ;; esac
        out=$(mktemp)
        set +e
        timeout 600 "$t" ${OCR_TEST_FILTER:-} >"$out" 2>&1
        rc=$?
        set -e
        p=$(sed -n 's/^RESULT passed=\([0-9]*\) failed=\([0-9]*\)$/\1/p' "$out" | tail -1)
        f=$(sed -n 's/^RESULT passed=\([0-9]*\) failed=\([0-9]*\)$/\2/p' "$out" | tail -1)
        if [ -z "$p" ]; then p=0; f=1; say "$label $(basename "$t"): crashed or gave no RESULT (exit $rc)"; fi
        if [ "$rc" != 0 ] && [ "$f" = 0 ]; then f=1; say "$label $(basename "$t"): exit $rc"; fi
        if [ "$f" != 0 ]; then
            say "---- $label $(basename "$t") output ----"; tail -60 "$out"; say "----"
        else
            say "$label $(basename "$t"): $p passed"
        fi
        TOTAL_PASS=$((TOTAL_PASS + p)); TOTAL_FAIL=$((TOTAL_FAIL + f))
        rm -f "$out"
    done
}

case "$MODE" in
clean)
    rm -rf build
    for f in examples/*.c; do [ -e "$f" ] && rm -f "${f%.c}"; done
    exit 0 ;;
build|test|test-long|bench) ;;
-h|--help|help) sed -n '2,9p' "$0"; exit 0 ;;
*) say "build.sh: unknown mode '$MODE' (build, test, test-long, bench, clean)"; exit 2 ;;
esac

ensure_pkgs $BUILD_PKGS
case "$MODE" in
test|test-long) ensure_pkgs $TEST_PKGS ;;
bench) ensure_pkgs $BENCH_PKGS ;;
esac
mkdir -p build
check_headers
build_all "$OPT" build
clang_pass
say "build.sh: built with $CC ($(ls tests/test_*.c 2>/dev/null | wc -l) tests, $(ls examples/*.c 2>/dev/null | wc -l) examples)"

if [ "$MODE" = test ]; then
    TOTAL_PASS=0; TOTAL_FAIL=0
    run_tests build "[plain]"
    build_all "$SAN" build/san
    export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=0} UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1}
    export OCR_SANITIZED=1
    run_tests build/san "[asan+ubsan]"
    say "$TOTAL_PASS passed, $TOTAL_FAIL failed"
    [ "$TOTAL_FAIL" = 0 ]
elif [ "$MODE" = test-long ]; then
    TOTAL_PASS=0; TOTAL_FAIL=0
    for t in build/long_*; do
        [ -x "$t" ] || continue
        case "$t" in *.log) continue ;; esac
        if "$t"; then TOTAL_PASS=$((TOTAL_PASS + 1)); else TOTAL_FAIL=$((TOTAL_FAIL + 1)); fi
    done
    say "$TOTAL_PASS passed, $TOTAL_FAIL failed"
    [ "$TOTAL_FAIL" = 0 ]
elif [ "$MODE" = bench ]; then
    for b in build/bench_*; do
        [ -x "$b" ] || continue
        case "$b" in *.log) continue ;; esac
        "$b"
    done
fi
