#!/usr/bin/env bash
# Regenerates tests/runtime/data/llama4_tiny_seed7_logits.f64: Hugging Face's Llama4ForCausalLM (modeling_llama4.py,
# run by hf_llama4_reference.py) on `quark make-model --arch llama4 --shape tiny --dtype f32 --seed 7`, in the Debian
# trixie chroot that scripts/check-libtorch2.sh builds (python3-torch 2.6, python3-safetensors). The modeling file is
# read from HF_LLAMA4_MODELING (src/transformers/models/llama4/modeling_llama4.py of a transformers checkout, or its
# text-model part; never committed here). The committed file was made from huggingface/transformers at
# 000c33fdfde12e1ffafbfcdb3c926df5727a00b6.
# Usage: HF_LLAMA4_MODELING=/path/modeling_llama4.py make_reference.sh QUARK_BINARY [OUT]
# Exit 77 when a part is missing (chroot, root, the modeling file).
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
quark="${1:?usage: make_reference.sh QUARK_BINARY [OUT]}"
out="${2:-$here/../../runtime/data/llama4_tiny_seed7_logits.f64}"
root="${QUARK_TRIXIE_ROOT:-/var/tmp/quark-trixie}"
missing() { echo "HF Llama 4 peer missing: $*" >&2; exit 77; }
[ "$(id -u)" -eq 0 ] || missing "chroot needs root"
[ -x "$root/usr/bin/python3" ] || missing "no trixie chroot at $root (bash scripts/check-libtorch2.sh cpu makes one)"
for m in torch safetensors; do
  [ -d "$root/usr/lib/python3/dist-packages/$m" ] || missing "python3 module $m not in $root"
done
[ -f "${HF_LLAMA4_MODELING:-}" ] || missing "set HF_LLAMA4_MODELING to transformers' modeling_llama4.py"
work="$(mktemp -d "$root/tmp/llama4-peer.XXXXXX")"
trap 'rm -rf "$work"' EXIT
"$quark" make-model --arch llama4 --shape tiny --dtype f32 --seed 7 --out "$work/model" >/dev/null
cp "$here/hf_llama4_reference.py" "$HF_LLAMA4_MODELING" "$work/"
inside="/tmp/$(basename "$work")"
chroot "$root" /usr/bin/env -i PATH=/usr/bin:/bin HOME=/root LANG=C.UTF-8 \
  HF_LLAMA4_MODELING="$inside/$(basename "$HF_LLAMA4_MODELING")" \
  python3 "$inside/hf_llama4_reference.py" "$inside/model" "$inside/out.f64" float32 \
  2> >(grep -v -e "UCX  ERROR" -e "Error in cpuinfo" >&2)
mkdir -p "$(dirname "$out")"
cp "$work/out.f64" "$out"
echo "wrote $out"
