#!/usr/bin/env bash
# Regenerates core/runtime/unicode_general_category.inc (the tokenizer's Unicode 16.0 General_Category table, issue
# #33 item 4) with ICU 76 from the Debian trixie chroot of scripts/check-libtorch2.sh (bookworm's ICU 72 and PCRE2
# 10.42 know Unicode 15.0 and 14.0). Needs root for chroot; writes nothing into the chroot but /tmp.
#   QUARK_TRIXIE_ROOT   the chroot (default /var/tmp/quark-trixie); it needs g++ and libicu-dev
set -euo pipefail
root=${QUARK_TRIXIE_ROOT:-/var/tmp/quark-trixie}
here=$(cd "$(dirname "$0")" && pwd)
out=$here/../../core/runtime/unicode_general_category.inc
work=$(mktemp -d "$root/tmp/gc.XXXXXX")
trap 'rm -rf "$work"' EXIT
cp "$here/gen_general_category.cc" "$work/"
inside=/tmp/$(basename "$work")
chroot "$root" g++ -O1 -o "$inside/gen" "$inside/gen_general_category.cc" -licuuc
chroot "$root" "$inside/gen" > "$out.tmp"
grep -q "(Unicode 16\." "$out.tmp" || { echo "the chroot's ICU is not Unicode 16: $(head -1 "$out.tmp")" >&2; exit 1; }
mv "$out.tmp" "$out"
echo "wrote $out ($(wc -l < "$out") lines)"
