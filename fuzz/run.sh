#!/usr/bin/env bash
# fuzz/run.sh - builds the libFuzzer targets (fuzz/fuzz_*.c) and runs them.
#
#   fuzz/run.sh [SECONDS] [TARGET...]        each target for SECONDS (default 60)
#   fuzz/run.sh --runs N [TARGET...]         each target for N executions (issue #20 asks 10000000 each)
#   fuzz/run.sh --build [TARGET...]          build only
# TARGET is a name such as json or safetensors (default: every fuzz/fuzz_*.c). Binaries go to build/fuzz/fuzz_NAME,
# the work corpus to build/fuzz/corpus/NAME (the seeds of fuzz/corpus/NAME are copied in, the tree is never written;
# what the fuzzer learns stays there for the next run: rm -rf build/fuzz/corpus to start over), findings to
# build/fuzz/artifacts/NAME-*, the fuzzer's output to build/fuzz/NAME.log. Prints per target the executions, the rate
# and the findings; exits 1 when any target found a crash, leak, timeout, out-of-memory or sanitizer report (or a
# build failed). Replay a finding:  build/fuzz/fuzz_NAME build/fuzz/artifacts/NAME-crash-...
# Environment: CC (clang), FUZZ_FLAGS (more libFuzzer flags, e.g. -use_value_profile=1), FUZZ_CFLAGS (more compiler
# flags; a change rebuilds), FUZZ_LOCK (a file: builds run under flock on it, for machines that share their cores).
set -u
cd "$(dirname "$0")/.."
CC=${CC:-clang}
OUT=build/fuzz
mode=time amount=60
case "${1:-}" in
--runs) mode=runs; amount=${2:?"fuzz/run.sh: --runs needs a count"}; shift 2 ;;
--build) mode=build; shift ;;
-h|--help) sed -n '2,13p' "$0"; exit 0 ;;
''|*[!0-9]*) ;;
*) amount=$1; shift ;;
esac
case "$amount" in ''|*[!0-9]*) echo "fuzz/run.sh: '$amount' is not a whole number" >&2; exit 2 ;; esac

targets=("$@")
if [ ${#targets[@]} -eq 0 ]; then
    for f in fuzz/fuzz_*.c; do t=${f#fuzz/fuzz_}; targets+=("${t%.c}"); done
fi

# Largest input per target: big enough for a small valid file of its kind, small enough to keep thousands of
# executions a second.
max_len() {
    case "$1" in
    image) echo 16384 ;;
    safetensors) echo 8192 ;;
    *) echo 4096 ;;
    esac
}

build_one() {
    local t=$1 bin=$OUT/fuzz_$1 src=fuzz/fuzz_$1.c dep
    [ -f "$src" ] || { echo "fuzz/run.sh: no target '$t' ($src)" >&2; return 1; }
    if [ -x "$bin" ]; then
        # rebuilt when the target, the shared fuzz header or a library header is newer than the binary, or the flags changed
        for dep in "$src" fuzz/*.h ./*.h; do [ "$dep" -nt "$bin" ] && { rm -f "$bin"; break; }; done
        [ "$(cat "$bin.flags" 2>/dev/null)" = "${FUZZ_CFLAGS:-}" ] || rm -f "$bin"
    fi
    [ -x "$bin" ] && return 0
    echo "fuzz/run.sh: building $bin"
    ${FUZZ_LOCK:+flock "$FUZZ_LOCK"} $CC -std=c99 -g -O1 -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=all -DOCR_FUZZ_LIBFUZZER \
        ${FUZZ_CFLAGS:-} -I. -I/usr/include/stb "$src" -o "$bin" -lm -lpthread -llmdb >"$OUT/fuzz_$t.build.log" 2>&1 ||
        { cat "$OUT/fuzz_$t.build.log" >&2; echo "fuzz/run.sh: FAILED to build $bin" >&2; return 1; }
    printf '%s' "${FUZZ_CFLAGS:-}" >"$bin.flags"
}

mkdir -p "$OUT/artifacts" "$OUT/corpus"
status=0
summary=()
total=0
for t in "${targets[@]}"; do
    if ! build_one "$t"; then status=1; summary+=("$(printf '%-12s BUILD FAILED' "$t")"); continue; fi
    [ "$mode" = build ] && continue
    corpus=$OUT/corpus/$t
    mkdir -p "$corpus"
    [ -d "fuzz/corpus/$t" ] && cp -p "fuzz/corpus/$t"/* "$corpus"/ 2>/dev/null
    flags=(-max_len="$(max_len "$t")" -timeout=10 -rss_limit_mb=2048 -print_final_stats=1
           -artifact_prefix="$OUT/artifacts/$t-")
    [ -f "fuzz/$t.dict" ] && flags+=(-dict="fuzz/$t.dict")
    if [ "$mode" = runs ]; then flags+=(-runs="$amount"); else flags+=(-max_total_time="$amount"); fi
    log=$OUT/$t.log
    echo "fuzz/run.sh: $t: $([ "$mode" = runs ] && echo "$amount executions" || echo "$amount s") (log $log)"
    # shellcheck disable=SC2086
    "$OUT/fuzz_$t" "${flags[@]}" ${FUZZ_FLAGS:-} "$corpus" >"$log" 2>&1
    rc=$?
    runs=$(sed -n 's/^stat::number_of_executed_units: *\([0-9]*\).*/\1/p' "$log" | tail -1)
    [ -n "$runs" ] || runs=$(sed -n 's/^Done \([0-9]*\) runs.*/\1/p' "$log" | tail -1)
    [ -n "$runs" ] || runs=$(sed -n 's/^#\([0-9]*\).*/\1/p' "$log" | tail -1)
    rate=$(sed -n 's/^stat::average_exec_per_sec: *\([0-9]*\).*/\1/p' "$log" | tail -1)
    finding=""
    grep -q "ERROR: libFuzzer: timeout" "$log" && finding+=" timeout"
    grep -q "ERROR: libFuzzer: out-of-memory\|ERROR: libFuzzer: malloc(" "$log" && finding+=" out-of-memory"
    grep -q "ERROR: LeakSanitizer" "$log" && finding+=" leak"
    grep -q "ERROR: AddressSanitizer" "$log" && finding+=" asan"
    grep -q "runtime error:\|UndefinedBehaviorSanitizer" "$log" && finding+=" ubsan"
    grep -q "ocr_fuzz_.*: check failed" "$log" && finding+=" check-failed"
    grep -q "ERROR: libFuzzer: deadly signal\|ERROR: libFuzzer: crash" "$log" && [ -z "$finding" ] && finding+=" crash"
    [ "$rc" = 0 ] || [ -n "$finding" ] || finding=" exit-$rc"
    total=$((total + ${runs:-0}))
    if [ -n "$finding" ]; then
        status=1
        art=$(sed -n 's/.*Test unit written to \(.*\)$/\1/p' "$log" | tail -1)
        summary+=("$(printf '%-12s %12s executions  %7s exec/s  FOUND:%s  %s' "$t" "${runs:-?}" "${rate:-?}" "$finding" "${art:-see $log}")")
    else
        summary+=("$(printf '%-12s %12s executions  %7s exec/s  clean' "$t" "${runs:-?}" "${rate:-?}")")
    fi
done
[ "$mode" = build ] && exit $status
echo "fuzz/run.sh: results"
printf '  %s\n' "${summary[@]}"
echo "fuzz/run.sh: $total executions in all; $([ $status = 0 ] && echo "no findings" || echo "FINDINGS (exit 1)")"
exit $status
