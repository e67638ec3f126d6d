#!/usr/bin/env bash
# Runs AMD Quark's own import code (quark_import.py) on a quarkd HF-quark export inside the Debian trixie chroot that
# scripts/check-libtorch2.sh builds (python3-torch 2.6, safetensors, packaging, tqdm; docs/guide/reference.md says how
# to provision it). Quark's source is read at run time from a gathered copy of amd/Quark at one commit (never committed
# here): the files listed in source_files.txt, each checked against its stored character count.
# Usage: run_peer.sh EXPORT_DIR OUT.safetensors      (prints the peer's JSON report on stdout)
# Environment:
#   QUARK_TRIXIE_ROOT   the chroot (default /var/tmp/quark-trixie)
#   QUARK_PEER_SRC      the gathered source, holding quark/ (default /var/tmp/quark-src/<commit>)
# Exit 77 when a peer part is missing (chroot, its Python packages, the gathered source, root for chroot): the calling
# test reports it as a skip on the allowed list (tests/support/legitimate_skips.txt).
set -euo pipefail
export_dir="$1"
out="$2"
root="${QUARK_TRIXIE_ROOT:-/var/tmp/quark-trixie}"
commit=1d27b5582e4ecbb466fa1658e0bc91d01a5fbdd1
src="${QUARK_PEER_SRC:-/var/tmp/quark-src/$commit}"
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
missing() { echo "Quark peer missing: $*" >&2; exit 77; }

[ "$(id -u)" -eq 0 ] || missing "chroot needs root"
[ -x "$root/usr/bin/python3" ] || missing "no trixie chroot at $root (bash scripts/check-libtorch2.sh cpu makes one)"
for m in torch safetensors packaging tqdm; do
  [ -d "$root/usr/lib/python3/dist-packages/$m" ] ||
    missing "python3 module $m not in $root (chroot $root apt-get install python3-torch python3-safetensors" \
      "python3-packaging python3-tqdm)"
done
[ -f "$src/quark/torch/export/nn/modules/qparamslinear.py" ] ||
  missing "no gathered Quark source at $src (docs/guide/reference.md says how to gather it; set QUARK_PEER_SRC)"

work="$(mktemp -d "$root/tmp/quark-peer.XXXXXX")"
trap 'rm -rf "$work"' EXIT
cp -r "$src/quark" "$work/"
# setuptools-scm writes quark/version.py when Quark is built; the gathered tree is not a build.
echo "__version__ = \"0+g${commit:0:8}\"" >"$work/quark/version.py"
cp "$here/quark_import.py" "$here/source_files.txt" "$work/"
mkdir "$work/export"
cp "$export_dir"/config.json "$export_dir"/*.safetensors "$work/export/"
inside="/tmp/$(basename "$work")"
chroot "$root" /usr/bin/env -i PATH=/usr/bin:/bin HOME=/root LANG=C.UTF-8 PYTHONPATH="$inside" \
  QUARK_PEER_SRC="$inside" QUARK_PEER_MANIFEST="$inside/source_files.txt" QUARK_LOG_LEVEL=error \
  python3 "$inside/quark_import.py" "$inside/export" "$inside/out.safetensors" 2> >(grep -v -e "UCX  ERROR" \
  -e "Error in cpuinfo" >&2)
cp "$work/out.safetensors" "$out"
