#!/usr/bin/env python3
"""A Hangul word list and its charset for a Korean recognition run (docs/RECOGNITION.md): the words of Debian's
hunspell-ko dictionary (/usr/share/hunspell/ko.dic: a count line, then "word/flags" lines, some words stored as
conjoining jamo), composed to NFC, kept when every character is a precomposed Hangul syllable (U+AC00..U+D7A3), then
restricted to words of 2 to 6 syllables that use only the --syllables most frequent syllables of the list.

usage: /usr/bin/python3 tools/make_korean_words.py [--syllables 500] [--dic /usr/share/hunspell/ko.dic] WORDS KEYS

WORDS gets one word per line (train_rec --words, make_synth --words), KEYS the syllables one per line, most frequent
first (train_rec --charset: PaddleOCR's key-file layout). Deterministic: ties in frequency go by code point, the
words are sorted. Needs hunspell-ko (apt-get install hunspell-ko).
"""
import argparse
import collections
import sys
import unicodedata


def hangul_words(path):
    words = set()
    with open(path, encoding="utf-8") as f:
        next(f)  # the entry count
        for line in f:
            word = unicodedata.normalize("NFC", line.rstrip("\r\n").split("/")[0])
            if word and all(0xAC00 <= ord(c) <= 0xD7A3 for c in word):
                words.add(word)
    return sorted(words)


def main():
    ap = argparse.ArgumentParser(usage=argparse.SUPPRESS, description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("words_out")
    ap.add_argument("keys_out")
    ap.add_argument("--syllables", type=int, default=500)
    ap.add_argument("--dic", default="/usr/share/hunspell/ko.dic")
    a = ap.parse_args()
    if a.syllables < 1:
        ap.error("--syllables must be at least 1")
    try:
        words = hangul_words(a.dic)
    except OSError as e:
        sys.exit("make_korean_words.py: %s (apt-get install hunspell-ko)" % e)
    counts = collections.Counter(c for w in words for c in w)
    ranked = sorted(counts, key=lambda c: (-counts[c], ord(c)))[:a.syllables]
    keep = set(ranked)
    chosen = [w for w in words if 2 <= len(w) <= 6 and all(c in keep for c in w)]
    if not chosen:
        sys.exit("make_korean_words.py: no word of 2 to 6 syllables uses only the %d most frequent syllables" % a.syllables)
    with open(a.words_out, "w", encoding="utf-8") as f:
        f.writelines(w + "\n" for w in chosen)
    with open(a.keys_out, "w", encoding="utf-8") as f:
        f.writelines(c + "\n" for c in ranked)
    print("make_korean_words.py: %d of %d Hangul words, %d syllables (of %d)" %
          (len(chosen), len(words), len(ranked), len(counts)))


if __name__ == "__main__":
    main()
