#!/usr/bin/env bash
# Prepares the GPU kit (docs/gpu.md, "The GPU kit") on a Debian bookworm machine with a package registry: downloads
# with `apt-get download` the bookworm packages that the kit's build needs besides the GPU machine's own PyTorch,
# nvcc, cmake and ninja, into gpu-kit/debs/ (ignored by git; the `device` tool carries it), and lists what it took in
# gpu-kit/packages.txt (name, version, size, sha256, and the shared libraries inside: a .so would tie the kit to
# bookworm's glibc).
#
# Two tiers (cmake/QuarkGpuKit.cmake):
# - the kernels (QUARK_GPU_KIT=ON) need only GoogleTest, built from source on the GPU machine with its own compiler
#   and LibTorch's C++ ABI: Debian's `googletest` package holds that source and no binary, so this tier depends on
#   no bookworm glibc or libstdc++;
# - the engine (QUARK_GPU_KIT_ENGINE=ON: core/, `quark`, algo_bench, the GPTQ and streaming device tests) needs the
#   engine's other libraries (cmake/QuarkEngineDependencies.cmake, ICU, PCRE2, ONNX) as bookworm binaries: their
#   shared libraries need the glibc this script records in gpu-kit/glibc-needed (run.sh builds the engine only where
#   the machine's glibc is at least that). The fixtures the device tests read (stories260K and the TinyStories text,
#   from ../shared, which the device tool does not carry) are copied into gpu-kit/shared/ too.
# Extra packages: QUARK_KIT_EXTRA_PACKAGES="a b"; the kernels tier alone: QUARK_KIT_ENGINE=0.
# The GPTQ peers for scripts/gpu/h200.sh's side by side (their code is carried in gpu-kit/peers/, never committed):
#   QUARK_KIT_IST_GPTQ   a folder or a bare git repository of IST-DASLab/gptq (gptq.py, quant.py)
#   QUARK_KIT_QUARK_SRC  a folder holding AMD Quark's quark/torch/algorithm/{common.py,gptq/gptq.py}
#
#   scripts/gpu/prepare.sh            (run `apt-get update` first if apt has no package lists)
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
kit=${QUARK_GPU_KIT_DIR:-$root/gpu-kit}
limit_bytes=$((48 * 1024 * 1024))
shared=${QUARK_SHARED_DIR:-$root/../shared}
packages=(googletest)
engine_packages=(
  libabsl-dev libabsl20220623 libprotobuf-dev libprotobuf32 libprotobuf-lite32 protobuf-compiler libprotoc32
  libfmt-dev libfmt9 libspdlog-dev libspdlog1.10 nlohmann-json3-dev libcli11-dev libssl-dev libssl3
  libsentencepiece-dev libsentencepiece0 libicu-dev libicu72 libpcre2-dev libpcre2-8-0 libonnx-dev libonnx1 libonnxifi
  zlib1g-dev pkgconf-bin libpkgconf3)
[[ ${QUARK_KIT_ENGINE:-1} == 1 ]] && packages+=("${engine_packages[@]}")
# shellcheck disable=SC2206
packages+=(${QUARK_KIT_EXTRA_PACKAGES:-})

die() {
  echo "prepare.sh: $*" >&2
  exit 1
}

command -v apt-get > /dev/null || die "apt-get not found: run this on Debian bookworm (the kit's packages are bookworm's)"
codename=$(. /etc/os-release 2> /dev/null && echo "${VERSION_CODENAME:-unknown}")
[[ $codename == bookworm ]] || echo "prepare.sh: warning: this is '$codename', not bookworm" >&2

rm -rf "$kit/debs" "$kit/shared"
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
# The newest glibc and libstdc++ symbol versions any shared library or program in the packages asks for (run.sh
# compares them with the GPU machine's).
symbols=$(for deb in *.deb; do
  scratch=$(mktemp -d)
  dpkg-deb -x "$deb" "$scratch"
  find "$scratch" -type f \( -name '*.so*' -o -perm -u+x \) -exec objdump -T {} + 2> /dev/null |
    grep -oE '(GLIBC|GLIBCXX)_[0-9.]+' || true
  rm -rf "$scratch"
done | sort -u)
glibc=$(grep '^GLIBC_' <<< "$symbols" | sed 's/GLIBC_//' | sort -V | tail -1)
glibcxx=$(grep '^GLIBCXX_' <<< "$symbols" | sed 's/GLIBCXX_//' | sort -V | tail -1)
echo "${glibc:-0}" > "$kit/glibc-needed"
echo "${glibcxx:-0}" > "$kit/glibcxx-needed"
echo "prepare.sh: the packages' shared libraries need glibc ${glibc:-(none)} and libstdc++ GLIBCXX_${glibcxx:-(none)}"
if [[ ${QUARK_KIT_ENGINE:-1} == 1 ]]; then
  [[ -d $shared/fixtures/stories260K ]] || die "no $shared/fixtures/stories260K (QUARK_SHARED_DIR)"
  mkdir -p "$kit/shared/fixtures/eval"
  cp -r "$shared/fixtures/stories260K" "$kit/shared/fixtures/"
  cp "$shared/fixtures/eval/tinystories_validation_prefix.txt" "$kit/shared/fixtures/eval/"
  total=$((total + $(du -sb "$kit/shared" | cut -f1)))
  echo "prepare.sh: fixtures for the engine's device tests in $kit/shared ($(du -sh "$kit/shared" | cut -f1))"
fi
# peer_file NAME SOURCE PATH DEST: PATH of SOURCE (a folder, or a git repository's HEAD) copied to DEST.
peer_file() {
  local source=$2 path=$3 dest=$4
  mkdir -p "$(dirname "$dest")"
  if [[ -f $source/$path ]]; then
    cp "$source/$path" "$dest"
  elif git --git-dir="$source" rev-parse -q --verify HEAD > /dev/null 2>&1; then
    git --git-dir="$source" show "HEAD:$path" > "$dest" || die "$1: no $path in $source"
  else
    die "$1: no $path in $source"
  fi
}
rm -rf "$kit/peers"
if [[ -n ${QUARK_KIT_IST_GPTQ:-} ]]; then
  for f in gptq.py quant.py; do peer_file QUARK_KIT_IST_GPTQ "$QUARK_KIT_IST_GPTQ" "$f" "$kit/peers/ist/$f"; done
fi
if [[ -n ${QUARK_KIT_QUARK_SRC:-} ]]; then
  for f in quark/torch/algorithm/common.py quark/torch/algorithm/gptq/gptq.py; do
    peer_file QUARK_KIT_QUARK_SRC "$QUARK_KIT_QUARK_SRC" "$f" "$kit/peers/quark/$f"
  done
fi
if [[ -d $kit/peers ]]; then
  total=$((total + $(du -sb "$kit/peers" | cut -f1)))
  echo "prepare.sh: GPTQ peers in $kit/peers: $(cd "$kit/peers" && find . -type f | sort | tr '\n' ' ')"
fi
cat "$list"
((total <= limit_bytes)) || die "the kit's packages and fixtures take $total bytes, more than the $limit_bytes the device tool carries for them"
echo "prepare.sh: $(ls -1 ./*.deb | wc -l) package(s), $total bytes in $kit/debs; carry \"gpu-kit\" (docs/gpu.md)"
