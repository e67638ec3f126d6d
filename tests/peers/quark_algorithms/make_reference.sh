#!/usr/bin/env bash
# Regenerates tests/algorithms/data/quark_asymmetric_reference.safetensors: AMD Quark's own GPTAQ and Qronos
# (quark_asymmetric.py) run in the Debian trixie chroot that scripts/check-libtorch2.sh builds (python3-torch 2.6,
# python3-safetensors, python3-tqdm) on seeded layer inputs. Quark's source is read from QUARK_SRC, a directory holding
# quark/torch/algorithm/{common.py,gptaq/gptaq.py,qronos/qronos.py} (a checkout of github.com/amd/Quark; never
# committed here). The committed file was made from commit 1d27b5582e4ecbb466fa1658e0bc91d01a5fbdd1.
# Usage: QUARK_SRC=/path/to/Quark make_reference.sh [OUT]
# Exit 77 when a part is missing (chroot, root, the Quark source).
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
out="${1:-$here/../../algorithms/data/quark_asymmetric_reference.safetensors}"
root="${QUARK_TRIXIE_ROOT:-/var/tmp/quark-trixie}"
missing() { echo "Quark peer missing: $*" >&2; exit 77; }
[ "$(id -u)" -eq 0 ] || missing "chroot needs root"
[ -x "$root/usr/bin/python3" ] || missing "no trixie chroot at $root (bash scripts/check-libtorch2.sh cpu makes one)"
for m in torch safetensors tqdm; do
  [ -d "$root/usr/lib/python3/dist-packages/$m" ] || missing "python3 module $m not in $root"
done
src="${QUARK_SRC:-}"
[ -n "$src" ] && [ -f "$src/quark/torch/algorithm/gptaq/gptaq.py" ] && [ -f "$src/quark/torch/algorithm/qronos/qronos.py" ] ||
  missing "set QUARK_SRC to a Quark source tree (git clone https://github.com/amd/Quark)"
work="$(mktemp -d "$root/tmp/quark-asym-peer.XXXXXX")"
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/src"
(cd "$src" && cp --parents quark/torch/algorithm/common.py quark/torch/algorithm/gptaq/gptaq.py \
  quark/torch/algorithm/qronos/qronos.py "$work/src/")
cp "$here/quark_asymmetric.py" "$work/"
inside="/tmp/$(basename "$work")"
chroot "$root" /usr/bin/env -i PATH=/usr/bin:/bin HOME=/root LANG=C.UTF-8 QUARK_SRC="$inside/src" \
  QUARK_SRC_LABEL="${QUARK_SRC_LABEL:-}" python3 "$inside/quark_asymmetric.py" "$inside/out.safetensors" \
  2> >(grep -v -e "UCX  ERROR" -e "Error in cpuinfo" >&2)
mkdir -p "$(dirname "$out")"
cp "$work/out.safetensors" "$out"
echo "wrote $out"
