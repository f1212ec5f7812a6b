#!/usr/bin/env bash
# tools/check_names.sh - no internal name may mean two things across the headers and ocr_cuda.cu.
#
#   tools/check_names.sh            check ocr_*.h and ocr_cuda.cu in the repository root (exit 1 on a clash)
#   tools/check_names.sh -l         also list every internal name with the file that defines it
#   tools/check_names.sh FILE...    check the given files instead
#
# An internal name is ocr__name or OCR__NAME. It is DEFINED in a file by a function definition (not a prototype),
# a file-scope variable, a typedef, a struct/union/enum tag, an enumerator or a #define. A name defined in one file
# and only declared or used in others (a header's prototype of a function ocr_cuda.cu defines) is fine; a name
# defined in two files is a clash: each file compiles alone, so the compiler never sees both meanings, but a reader
# who greps for the name finds two. A macro that its file #undefs again is a local helper and is not counted.
# Needs only bash, sed, awk, sort.
set -euo pipefail
cd "$(dirname "$0")/.."

list=0
if [ "${1:-}" = -l ]; then list=1; shift; fi
if [ $# -gt 0 ]; then files=("$@"); else files=(ocr_*.h); [ -f ocr_cuda.cu ] && files+=(ocr_cuda.cu); fi

# defined_names FILE: one internal name a line, each name once, defined at file scope in FILE
defined_names() {
    awk -v sq="'" '
    # comments and string literals out first, so a doc block or a message cannot look like code
    function strip(s,    out, i, c, n) {
        out = ""; n = length(s); i = 1
        while (i <= n) {
            if (incomment) {
                if (substr(s, i, 2) == "*/") { incomment = 0; i += 2 } else i++
                continue
            }
            c = substr(s, i, 1)
            if (substr(s, i, 2) == "/*") { incomment = 1; i += 2; out = out " "; continue }
            if (substr(s, i, 2) == "//") break
            if (c == "\"" || c == sq) {          # skip a string or character literal
                q = c; i++
                while (i <= n && substr(s, i, 1) != q) { if (substr(s, i, 1) == "\\") i++; i++ }
                i++; out = out q q; continue
            }
            out = out c; i++
        }
        return out
    }
    function emit(name) { if (name ~ /^(ocr__|OCR__)[A-Za-z0-9_]+$/) print name }
    # a finished file-scope declaration: what does it define?
    function finish(d, term,    t, m, name, body, items, k, it) {
        gsub(/[ \t]+/, " ", d)
        gsub(/__launch_bounds__ *\([^)]*\)/, "", d)
        gsub(/__attribute__ *\(\([^)]*\)\)/, "", d)
        if (d ~ /^ *(typedef +)?enum[ {]/ || d ~ /^ *(static +)?(const +)?enum[ {]/) {
            if (match(d, /enum +[A-Za-z_][A-Za-z0-9_]* *\{/)) { t = substr(d, RSTART + 5); sub(/ *\{.*/, "", t); sub(/^ +/, "", t); emit(t) }
            if (match(d, /\{.*\}/)) {
                body = substr(d, RSTART + 1, RLENGTH - 2)
                k = split(body, items, ",")
                for (it = 1; it <= k; it++) { t = items[it]; sub(/^ +/, "", t); sub(/[^A-Za-z0-9_].*/, "", t); emit(t) }
            }
            if (d ~ /^ *typedef/ && match(d, /\} *[A-Za-z_][A-Za-z0-9_]* *;/)) { t = substr(d, RSTART + 1, RLENGTH - 2); gsub(/ /, "", t); emit(t) }
            return
        }
        if (d ~ /^ *extern[ ]/) return                  # a declaration of something defined elsewhere
        if (d ~ /^ *(typedef +)?(struct|union) +[A-Za-z_][A-Za-z0-9_]* *\{/) {   # the tag
            t = d; sub(/^ *(typedef +)?(struct|union) +/, "", t); sub(/ *\{.*/, "", t); emit(t)
        }
        if (d ~ /^ *typedef[ ]/) {
            if (match(d, /\( *\* *[A-Za-z_][A-Za-z0-9_]* *\)/)) { t = substr(d, RSTART, RLENGTH); gsub(/[()* ]/, "", t); emit(t); return }
            t = d; sub(/^.*\}/, "", t); sub(/ *;.*$/, "", t); sub(/\[.*$/, "", t); sub(/^.*[^A-Za-z0-9_]/, "", t); emit(t)
            return
        }
        if (d ~ /^ *(struct|union)[ ]/) return   # a tag (done above) or a forward declaration
        # the declarator: the identifier just before the first ( [ = ; { or ,
        if (!match(d, /[A-Za-z_][A-Za-z0-9_]* *[\(\[=;{,]/)) return
        name = substr(d, RSTART, RLENGTH); sub(/ *[\(\[=;{,]$/, "", name)
        t = substr(d, RSTART + RLENGTH - 1, 1)
        if (name ~ /^(template|static|inline|const|extern|__device__|__global__|__host__|__forceinline__|__constant__)$/) return
        if (t == "(") {
            if (term == "{") emit(name)                 # a function definition; with ; it is a prototype
            else if (d ~ /\) *=/) emit(name)           # an initialised function pointer
            return
        }
        emit(name)                                      # a file-scope variable (with or without initialiser)
        if (t == ",") {                                 # more declarators on the line: static int ocr__a, ocr__b;
            m = d; sub(/=[^,;]*/, "", m)
            while (match(m, /, *\** *[A-Za-z_][A-Za-z0-9_]*/)) { t = substr(m, RSTART, RLENGTH); gsub(/[, *]/, "", t); emit(t); m = substr(m, RSTART + RLENGTH) }
        }
    }
    {
        raw = $0
        if (indefine) { indefine = (raw ~ /\\$/); next }     # continuation of a #define
        wasin = incomment
        line = strip(raw)
        if (line ~ /^[ \t]*#/) {
            if (match(line, /^[ \t]*#[ \t]*define[ \t]+[A-Za-z_][A-Za-z0-9_]*/)) {
                t = substr(line, RSTART, RLENGTH); sub(/.*[ \t]/, "", t); defs[t] = 1
            }
            if (match(line, /^[ \t]*#[ \t]*undef[ \t]+[A-Za-z_][A-Za-z0-9_]*/)) {
                t = substr(line, RSTART, RLENGTH); sub(/.*[ \t]/, "", t); undefs[t] = 1
            }
            indefine = (raw ~ /\\$/)
            next
        }
        if (acc == "") {
            # a declaration starts at column 0 (bodies are indented)
            if (wasin || line !~ /^[A-Za-z_]/) next
        }
        acc = acc " " line
        # a type definition (enum, struct, union, typedef) ends at the ; after its braces; anything else at the
        # first ; or { outside parentheses (a function body is not read)
        pre = acc; sub(/[{;].*/, "", pre)
        isenum = pre !~ /\(/ && (acc ~ /^ *(typedef +)?(enum|struct|union)[ {]/ || acc ~ /^ *(static +)?(const +)?enum[ {]/)
        n = length(acc); depth = 0; brace = 0
        for (i = 1; i <= n; i++) {
            c = substr(acc, i, 1)
            if (c == "(") depth++
            else if (c == ")") depth--
            else if (depth == 0 && isenum && c == "{") brace++
            else if (depth == 0 && isenum && c == "}") brace--
            else if (depth == 0 && brace == 0 && (c == ";" || (c == "{" && !isenum))) {
                finish(substr(acc, 1, i), c); acc = ""; break
            }
        }
    }
    END { for (t in defs) if (!(t in undefs)) emit(t) }
    ' "$1" | sort -u
}

tmp=$(mktemp); trap 'rm -f "$tmp"' EXIT
for f in "${files[@]}"; do
    [ -f "$f" ] || { echo "check_names: no such file: $f" >&2; exit 2; }
    defined_names "$f" | sed "s|\$| $f|" >>"$tmp"
done
if [ $list = 1 ]; then sort "$tmp"; fi
clashes=$(sort "$tmp" | awk '{n[$1]++; w[$1] = w[$1] " " $2} END {for (k in n) if (n[k] > 1) print k ":" w[k]}' | sort)
if [ -n "$clashes" ]; then
    echo "check_names: internal names defined in more than one file (rename one side):" >&2
    printf '%s\n' "$clashes" | sed 's/^/  /' >&2
    exit 1
fi
echo "check_names: $(awk '{print $1}' "$tmp" | sort -u | wc -l) internal names in ${#files[@]} files, each defined in one file"
