#!/usr/bin/env bash
# Prepares the GPU kit (docs/gpu.md, "The GPU kit") on a Debian bookworm machine with a package registry: downloads
# with `apt-get download` the bookworm packages that the kit's build needs besides the GPU machine's own PyTorch,
# nvcc, cmake and ninja, into gpu-kit/debs/ (ignored by git; the `device` tool carries it), and lists what it took in
# gpu-kit/packages.txt (name, version, size, sha256, and the shared libraries inside: a .so would tie the kit to
# bookworm's glibc).
#
# The kit (QUARK_GPU_KIT=ON, cmake/QuarkGpuKit.cmake) needs only GoogleTest, built from source on the GPU machine
# with its own compiler and LibTorch's C++ ABI: Debian's `googletest` package holds that source and no binary, so
# nothing here depends on the bookworm glibc or libstdc++. Extra packages: QUARK_KIT_EXTRA_PACKAGES="a b".
#
#   scripts/gpu/prepare.sh            (run `apt-get update` first if apt has no package lists)
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
kit=${QUARK_GPU_KIT_DIR:-$root/gpu-kit}
limit_bytes=$((48 * 1024 * 1024))
packages=(googletest)
# shellcheck disable=SC2206
packages+=(${QUARK_KIT_EXTRA_PACKAGES:-})

die() {
  echo "prepare.sh: $*" >&2
  exit 1
}

command -v apt-get > /dev/null || die "apt-get not found: run this on Debian bookworm (the kit's packages are bookworm's)"
codename=$(. /etc/os-release 2> /dev/null && echo "${VERSION_CODENAME:-unknown}")
[[ $codename == bookworm ]] || echo "prepare.sh: warning: this is '$codename', not bookworm" >&2

rm -rf "$kit/debs"
mkdir -p "$kit/debs"
cd "$kit/debs"
# apt-get download runs as the _apt user where it can; a folder it cannot write makes it warn, not fail.
chmod 0777 .
if ! apt-get download "${packages[@]}" > "$kit/download.log" 2>&1; then
  cat "$kit/download.log" >&2
  die "apt-get download ${packages[*]} failed (no package lists? run apt-get update)"
fi
chmod 0755 .

list=$kit/packages.txt
total=0
{
  echo "# GPU kit packages ($(date -u +%Y-%m-%dT%H:%MZ), Debian $codename): name version bytes sha256 shared-libraries"
  for deb in *.deb; do
    name=$(dpkg-deb -f "$deb" Package)
    version=$(dpkg-deb -f "$deb" Version)
    bytes=$(stat -c %s "$deb")
    sum=$(sha256sum "$deb" | cut -d' ' -f1)
    libs=$(dpkg-deb -c "$deb" | awk '{print $NF}' | grep -E '\.so(\.[0-9]+)*$' || true)
    total=$((total + bytes))
    echo "$name $version $bytes $sum ${libs:-no-shared-libraries}"
  done
  echo "# total $total bytes"
} > "$list"
cat "$list"
((total <= limit_bytes)) || die "the kit's packages take $total bytes, more than the $limit_bytes the device tool carries for them"
echo "prepare.sh: $(ls -1 ./*.deb | wc -l) package(s), $total bytes in $kit/debs; carry \"gpu-kit\" (docs/gpu.md)"
