#!/usr/bin/env bash
# Runs compressed-tensors' own decompressors (ct_decompress.py) on a quarkd export inside the Debian trixie chroot
# that scripts/check-libtorch2.sh builds (python3-torch 2.6, pydantic 2, safetensors; see the README's
# "compressed-tensors peer"). The library's source is fetched at run time from a git repository of
# vllm-project/compressed-tensors (never committed here), at the commit formats-2026.md was read from.
# Usage: run_peer.sh EXPORT_DIR OUT.safetensors [SCRIPT IN.safetensors]   (prints the peer's JSON report on stdout)
#   SCRIPT: ct_decompress.py (default) or ct_transform.py (#35 item 4: the transforms; it reads IN too)
# Environment:
#   QUARK_TRIXIE_ROOT   the chroot (default /var/tmp/quark-trixie)
#   QUARK_CT_GIT        a git directory or clone of compressed-tensors (default: the first of
#                       /work/.mirror/vllm-project+compressed-tensors/repo, $HOME/src/compressed-tensors)
#   QUARK_CT_COMMIT     the commit to run (default ac8e2ba8, formats-2026.md's)
# Exit 77 when a peer part is missing (chroot, its Python packages, the library's source, root for chroot): the
# calling test reports it through QUARK_PEER_MISSING (a failure under CI=true).
set -euo pipefail
export_dir="$1"
out="$2"
script="${3:-ct_decompress.py}"
input="${4:-}"
root="${QUARK_TRIXIE_ROOT:-/var/tmp/quark-trixie}"
commit="${QUARK_CT_COMMIT:-ac8e2ba8}"
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
missing() { echo "compressed-tensors peer missing: $*" >&2; exit 77; }

[ "$(id -u)" -eq 0 ] || missing "chroot needs root"
[ -x "$root/usr/bin/python3" ] || missing "no trixie chroot at $root (bash scripts/check-libtorch2.sh cpu makes one)"
for m in torch pydantic safetensors loguru psutil tqdm; do
  [ -d "$root/usr/lib/python3/dist-packages/$m" ] ||
    missing "python3 module $m not in $root (chroot $root apt-get install python3-torch python3-pydantic" \
      "python3-safetensors python3-loguru python3-psutil python3-tqdm)"
done
git_dir="${QUARK_CT_GIT:-}"
if [ -z "$git_dir" ]; then
  for c in /work/.mirror/vllm-project+compressed-tensors/repo "$HOME/src/compressed-tensors"; do
    if [ -e "$c" ]; then git_dir="$c"; break; fi
  done
fi
[ -n "$git_dir" ] && git --git-dir="$git_dir" cat-file -e "$commit^{commit}" 2>/dev/null ||
  { [ -n "$git_dir" ] && git -C "$git_dir" cat-file -e "$commit^{commit}" 2>/dev/null && git_dir="$git_dir/.git"; } ||
  missing "no compressed-tensors repository with commit $commit (set QUARK_CT_GIT; git clone" \
    "https://github.com/vllm-project/compressed-tensors)"

work="$(mktemp -d "$root/tmp/quark-ct-peer.XXXXXX")"
trap 'rm -rf "$work"' EXIT
git --git-dir="$git_dir" archive "$commit" src | tar -x -C "$work"
# setuptools_scm writes version.py at install time; a release build of a tagged commit uses the tag.
version="$(git --git-dir="$git_dir" describe --tags "$commit")"
cat >"$work/src/compressed_tensors/version.py" <<PY
__all__ = ["__version__", "__version_tuple__", "version", "version_tuple"]
__version__ = version = "$version"
__version_tuple__ = version_tuple = tuple("$version".split("."))
PY
cp "$here/ct_decompress.py" "$work/"
[ "$script" = ct_decompress.py ] || cp "$here/$script" "$work/"
mkdir "$work/export"
cp "$export_dir"/config.json "$export_dir"/*.safetensors "$work/export/"
inside="/tmp/$(basename "$work")"
args=("$inside/export")
if [ -n "$input" ]; then cp "$input" "$work/in.safetensors"; args+=("$inside/in.safetensors"); fi
chroot "$root" /usr/bin/env -i PATH=/usr/bin:/bin HOME=/root LANG=C.UTF-8 PYTHONPATH="$inside/src:$inside" \
  python3 "$inside/$script" "${args[@]}" "$inside/out.safetensors" 2> >(grep -v -e "UCX  ERROR" \
  -e "Error in cpuinfo" >&2)
cp "$work/out.safetensors" "$out"
