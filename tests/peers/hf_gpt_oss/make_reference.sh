#!/usr/bin/env bash
# Regenerates tests/runtime/data/gpt_oss_tiny_seed7_logits.f64: Hugging Face transformers' own gpt-oss layers
# (gpt_oss_hf_reference.py) in float64 on `quark make-model --arch gpt_oss --shape tiny --dtype f32 --seed 7`, run in
# the Debian trixie chroot that scripts/check-libtorch2.sh builds (python3-torch 2.6, python3-safetensors).
# The modeling file is read from HF_GPT_OSS_MODELING (default out/hf/modeling_gpt_oss.py, an ignored folder): a copy
# of transformers' src/transformers/models/gpt_oss/modeling_gpt_oss.py (never committed here). The committed logits
# were made from commit 6edf5b311854175ff83c59179b3360beca1ceffc of huggingface/transformers.
# Usage: make_reference.sh QUARK_BINARY [OUT]
# Exit 77 when a part is missing (chroot, root, the modeling file).
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/../../.." && pwd)"
quark="$1"
out="${2:-$repo/tests/runtime/data/gpt_oss_tiny_seed7_logits.f64}"
root="${QUARK_TRIXIE_ROOT:-/var/tmp/quark-trixie}"
modeling="${HF_GPT_OSS_MODELING:-$repo/out/hf/modeling_gpt_oss.py}"
missing() { echo "HF gpt-oss peer missing: $*" >&2; exit 77; }
[ "$(id -u)" -eq 0 ] || missing "chroot needs root"
[ -x "$root/usr/bin/python3" ] || missing "no trixie chroot at $root (bash scripts/check-libtorch2.sh cpu makes one)"
for m in torch safetensors; do
  [ -d "$root/usr/lib/python3/dist-packages/$m" ] || missing "python3 module $m not in $root"
done
[ -f "$modeling" ] || missing "no $modeling (transformers' models/gpt_oss/modeling_gpt_oss.py; set HF_GPT_OSS_MODELING)"
work="$(mktemp -d "$root/tmp/quark-gpt-oss-peer.XXXXXX")"
trap 'rm -rf "$work"' EXIT
"$quark" make-model --arch gpt_oss --shape tiny --dtype f32 --seed 7 --out "$work/model" >/dev/null
cp "$here/gpt_oss_hf_reference.py" "$modeling" "$work/"
# The windows of tests/runtime/gpt_oss_test.cc: 2 x 16 tokens, (i * 7919 + 13 + w * 101) % 512.
ids="$(python3 -c 'print(";".join(",".join(str((i * 7919 + 13 + w * 101) % 512) for i in range(16)) for w in range(2)))')"
inside="/tmp/$(basename "$work")"
chroot "$root" /usr/bin/env -i PATH=/usr/bin:/bin HOME=/root LANG=C.UTF-8 \
  HF_GPT_OSS_MODELING="$inside/$(basename "$modeling")" python3 "$inside/gpt_oss_hf_reference.py" "$inside/model" "$ids" \
  "$inside/logits.f64" 2> >(grep -v -e "UCX  ERROR" -e "Error in cpuinfo" >&2)
mkdir -p "$(dirname "$out")"
cp "$work/logits.f64" "$out"
echo "wrote $out"
