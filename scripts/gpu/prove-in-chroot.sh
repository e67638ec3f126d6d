#!/usr/bin/env bash
# Proves the GPU kit on a CPU machine (docs/gpu.md, "The GPU kit"): in a clean Debian bookworm chroot holding only
# build-essential, cmake, ninja-build, python3 and Debian's libtorch-dev (standing in for the GPU machine's PyTorch),
# with /usr/local/cuda bind-mounted read-only for nvcc, it copies what the `device` tool would copy (tracked and
# untracked non-ignored files, plus the carried gpu-kit/) and runs scripts/gpu/run.sh there. Nothing is installed on
# this machine but debootstrap. Run scripts/gpu/prepare.sh first. A developer's check (root needed), not CI.
#
#   scripts/gpu/prove-in-chroot.sh [CHROOT_DIR]     (default /var/tmp/quark-kit-chroot; OUT: default ./out-chroot)
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
chroot_dir=${1:-/var/tmp/quark-kit-chroot}
out=${OUT:-$root/out-chroot}
jobs=${QUARK_JOBS:-2}

die() {
  echo "prove-in-chroot.sh: $*" >&2
  exit 1
}
[[ $(id -u) == 0 ]] || die "needs root (debootstrap, chroot, mount)"
[[ -d $root/gpu-kit/debs ]] || die "no gpu-kit/debs: run scripts/gpu/prepare.sh first"
[[ -x /usr/local/cuda/bin/nvcc ]] || echo "prove-in-chroot.sh: no /usr/local/cuda/bin/nvcc: the CUDA parts are not built" >&2

if [[ ! -x $chroot_dir/usr/bin/cmake ]]; then
  command -v debootstrap > /dev/null || die "debootstrap missing (apt-get install debootstrap)"
  echo "debootstrap bookworm into $chroot_dir (about 5 minutes, 1.8 GB)"
  debootstrap --variant=minbase --include=build-essential,cmake,ninja-build,python3,libtorch-dev bookworm \
    "$chroot_dir" http://deb.debian.org/debian
fi

work=$chroot_dir/work/quarkd
rm -rf "$work" "$chroot_dir/work/out"
mkdir -p "$work" "$chroot_dir/work/out" "$chroot_dir/usr/local/cuda" "$out"
# What the device tool copies: tracked and untracked non-ignored files, and the carried path.
(cd "$root" && git ls-files -co --exclude-standard -z | xargs -0 cp --parents -t "$work" && cp -r gpu-kit "$work/")

mounted=()
cleanup() {
  for ((i = ${#mounted[@]} - 1; i >= 0; i--)); do umount "${mounted[i]}" || true; done
}
trap cleanup EXIT
mount --bind /usr/local/cuda "$chroot_dir/usr/local/cuda" && mounted+=("$chroot_dir/usr/local/cuda")
mount -o remount,bind,ro "$chroot_dir/usr/local/cuda"
mount -t proc proc "$chroot_dir/proc" && mounted+=("$chroot_dir/proc")

start=$SECONDS
rc=0
chroot "$chroot_dir" /usr/bin/env -i PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin HOME=/root \
  OUT=/work/out QUARK_JOBS="$jobs" QUARK_TORCH_DIR=/usr/lib/x86_64-linux-gnu/cmake/Torch \
  QUARK_BUILD_TIMEOUT="${QUARK_BUILD_TIMEOUT:-1800}" QUARK_TEST_TIMEOUT="${QUARK_TEST_TIMEOUT:-600}" \
  QUARK_ENGINE_BENCH_TIMEOUT="${QUARK_ENGINE_BENCH_TIMEOUT:-600}" QUARK_KIT_ENGINE="${QUARK_KIT_ENGINE:-1}" \
  nice -n 10 bash /work/quarkd/scripts/gpu/run.sh || rc=$?
cp "$chroot_dir"/work/out/* "$out/"
echo "prove-in-chroot.sh: run.sh ended with status $rc after $((SECONDS - start)) s; \$OUT copied to $out:"
ls -l "$out"
exit $rc
