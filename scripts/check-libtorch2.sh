#!/usr/bin/env bash
# Developer's check (not part of CI): builds quarkd against LibTorch 2.6 in a Debian trixie chroot.
#   cpu   builds everything (tests included, benchmarks off) against libtorch-dev 2.6 (CPU) and runs ctest;
#   cuda  configures, compiles and links the CUDA build against libtorch-cuda-dev 2.6 and the chroot's
#         nvidia-cuda-toolkit 12.4 (its nvcc, never the host's /usr/local/cuda; nothing runs on a GPU).
# Usage (as root, on the bookworm host):  bash scripts/check-libtorch2.sh [cpu] [cuda]      (default: both)
# Environment:
#   QUARK_TRIXIE_ROOT    the chroot, reused between runs (default /var/tmp/quark-trixie; debootstrap when absent)
#   QUARK_TRIXIE_MIRROR  Debian mirror (default http://deb.debian.org/debian)
#   QUARK_LT2_JOBS       build jobs (default 2); every compile runs under nice -n 10
#   QUARK_LT2_CTEST      extra ctest arguments for the cpu part, e.g. "-R Gptq" for a subset (default: the whole suite);
#                        they pass through sh: quote an alternation, "-R 'Gptq|Smoothing'"
#   QUARK_LT2_CPU_TARGETS  targets of the cpu part (default: all); ctest then runs only the tests built
#   QUARK_LT2_TARGETS    targets of the cuda part (default: all)
#   QUARK_LT2_NODE_MODULES  a tests/peers/node_modules to mount read-only where the checkout has none or an empty one
# Trixie packages go only into the chroot: apt and dpkg run through `chroot`, never on the host. The checkout is
# mounted at /src/quarkd and ../shared at /src/shared inside it; build trees live in the chroot (/build/lt2-cpu,
# /build/lt2-cuda), outside the repository. Mounts are undone on exit.
#
# Measured 2026-11-29 on 2 cores shared with two other builds (load 8-10; details in docs/gpu.md "LibTorch 2.x"):
#   debootstrap 1 min; cpu packages 3.7 min (433 MB); CUDA packages ~2 min download + ~4 min install/swap;
#   configure 40-75 s; the cpu build of the engine + 10 test executables ~60 min at that load (an idle machine
#   builds all 461 steps in ~15); ctest of those 281 tests 10 min; the CUDA kernels 3 min at -j1.
#   Disk: ~11 GB for a whole run (toolkit 5.0 GB, libtorch-cuda 1.4 GB, base + cpu packages 2.8 GB, build trees).
# 2026-12-01, 2 idle cores: the cpu part's whole ctest 14 min (355 tests, incremental build 7 min); the cuda part's
#   quark, quark-worker and six GPU test executables ~50 min from scratch; chroot with both build trees 13 GB;
#   the cuda part for all targets (877 steps) finished on that kept tree (last 152 steps 4.5 min); chroot 15 GB.
# 2026-12-05, 2 cores: the cpu part from a fresh chroot 46 min (436 steps ~33 min, ctest 17 min); the cuda part's
#   eight GPU targets (154 steps, unity build) 24 min in all after it, the swap 3 min; chroot 14 GB.
set -euo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
shared="$(cd "$repo/../shared" 2>/dev/null && pwd || true)"
root="${QUARK_TRIXIE_ROOT:-/var/tmp/quark-trixie}"
mirror="${QUARK_TRIXIE_MIRROR:-http://deb.debian.org/debian}"
jobs="${QUARK_LT2_JOBS:-2}"
parts=("$@")
[ "${#parts[@]}" -gt 0 ] || parts=(cpu cuda)
for p in "${parts[@]}"; do
  case "$p" in cpu | cuda) ;; *) echo "check-libtorch2: unknown part '$p' (cpu, cuda)" >&2; exit 2 ;; esac
done
[ "$(id -u)" -eq 0 ] || { echo "check-libtorch2: run as root (debootstrap, chroot, mount)" >&2; exit 2; }

start_s=$(date +%s)
log() { echo "check-libtorch2 [$(( $(date +%s) - start_s ))s]: $*"; }
in_root() { chroot "$root" /usr/bin/env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME=/root LANG=C.UTF-8 "$@"; }
apt_in_root() { in_root DEBIAN_FRONTEND=noninteractive apt-get "$@"; }

# The engine's build and test dependencies: scripts/install-deps.sh's bookworm list, for trixie (no fuzzing clang).
# libblas-dev/liblapack-dev come with bookworm's libtorch-dev but not with trixie's; without them GPTQ's LAPACK
# path (core/algorithms, QUARK_HAVE_LAPACK) is silently left out.
cpu_packages=(
  build-essential cmake ninja-build pkg-config ca-certificates
  libtorch-dev libopenblas0-pthread libblas-dev liblapack-dev libsentencepiece-dev sentencepiece libpcre2-dev libicu-dev
  libgrpc++-dev libgrpc-dev protobuf-compiler-grpc libprotobuf-dev protobuf-compiler libabsl-dev libssl-dev
  libspdlog-dev libfmt-dev nlohmann-json3-dev libcli11-dev libcpp-httplib-dev libyaml-cpp-dev
  libsqlite3-dev libcurl4-openssl-dev libpq-dev postgresql libonnx-dev python3-onnx
  munge slurmctld slurmd slurm-client libgtest-dev libgmock-dev prometheus nodejs
  # #30: compressed-tensors' decompressors, the peer of ct_export_test (tests/peers/compressed_tensors/run_peer.sh);
  # python3-torch needs libtorch2.6, which the cuda part swaps out: the cpu part puts it back.
  python3-torch python3-pydantic python3-safetensors python3-loguru python3-psutil python3-tqdm
)
# libtorch-cuda-dev conflicts with libtorch-dev: apt swaps them (and back for the cpu part).
cuda_packages=(libtorch-cuda-dev nvidia-cuda-toolkit)

mounted=()
made_peers_dir=""
cleanup() {
  local i
  for ((i = ${#mounted[@]} - 1; i >= 0; i--)); do
    umount "${mounted[$i]}" 2>/dev/null || umount -l "${mounted[$i]}" 2>/dev/null || true
  done
  mounted=()
  if [ -n "$made_peers_dir" ]; then rmdir "$made_peers_dir" 2>/dev/null || true; made_peers_dir=""; fi
}
trap cleanup EXIT
bind() {  # bind SRC DST [ro]
  mkdir -p "$2"
  mount --bind "$1" "$2"
  mounted+=("$2")
  if [ "${3:-}" = ro ]; then mount -o remount,bind,ro "$2"; fi
}

# --- the chroot -------------------------------------------------------------------------------------------------
if [ ! -x "$root/usr/bin/apt-get" ]; then
  command -v debootstrap >/dev/null || { apt-get update -qq && apt-get install -y -qq debootstrap; }
  log "debootstrap trixie into $root"
  debootstrap --variant=minbase --components=main,contrib,non-free trixie "$root" "$mirror"
fi
if grep -qs " $root/" /proc/mounts; then
  echo "check-libtorch2: something is already mounted under $root (another run?)" >&2
  exit 1
fi
echo "deb $mirror trixie main contrib non-free" > "$root/etc/apt/sources.list"
printf '#!/bin/sh\nexit 101\n' > "$root/usr/sbin/policy-rc.d"  # packages' services never start
chmod +x "$root/usr/sbin/policy-rc.d"
cp /etc/resolv.conf "$root/etc/resolv.conf"
mount -t proc proc "$root/proc"; mounted+=("$root/proc")
bind /dev "$root/dev"
mount -t devpts devpts "$root/dev/pts" -o newinstance,ptmxmode=0666 2>/dev/null && mounted+=("$root/dev/pts") || true
mkdir -p "$root/dev/shm"
mount -t tmpfs shm "$root/dev/shm" && mounted+=("$root/dev/shm")
bind "$repo" "$root/src/quarkd"
[ -n "$shared" ] && bind "$shared" "$root/src/shared" ro
peers="$repo/tests/peers/node_modules"
if [ -z "$(ls -A "$peers" 2>/dev/null)" ] && [ -d "${QUARK_LT2_NODE_MODULES:-/nonexistent}" ]; then
  # The mount point is made in the checkout (node_modules/ is ignored) and removed again on exit if it was not there.
  [ -d "$peers" ] || made_peers_dir="$peers"
  bind "$QUARK_LT2_NODE_MODULES" "$root/src/quarkd/tests/peers/node_modules" ro
fi
log "updating trixie's package lists"
apt_in_root update -qq
# nvidia-cudnn (libtorch-cuda's dependency) asks to accept NVIDIA's license and then downloads cuDNN from NVIDIA:
# decline, so that its install neither accepts a license for you nor fails for want of a network.
echo "nvidia-cudnn nvidia-cudnn/question select I Decline" | in_root debconf-set-selections

configure() {  # configure BUILD_DIR CMAKE_ARGS...
  local dir="$1"; shift
  in_root cmake -S /src/quarkd -B "$dir" -G Ninja -DCMAKE_BUILD_TYPE=Release -DQUARK_BUILD_BENCH=OFF \
    -DQUARK_SHARED_DIR=/src/shared "$@"
}
build() {  # build BUILD_DIR [TARGETS...]
  local dir="$1"; shift
  local targets=()
  [ "$#" -gt 0 ] && targets=(--target "$@")
  # -k 0: one run shows every step that fails, not only the first.
  in_root nice -n 10 cmake --build "$dir" -j "$jobs" "${targets[@]}" -- -k 0
}
summary=()
download_pid=""

# --- (a) CPU: LibTorch 2.6 builds everything and passes the test suite ----------------------------------------
run_cpu() {
  log "cpu: installing ${#cpu_packages[@]} packages in the chroot"
  apt_in_root install -y -q --no-install-recommends "${cpu_packages[@]}" || return 1
  apt_in_root clean || true
  if [ "${#parts[@]}" -eq 2 ]; then
    # The CUDA packages download (network-bound) while the CPU build compiles (CPU-bound).
    log "cpu: downloading ${cuda_packages[*]} in the background (log $root/build/cuda-download.log)"
    mkdir -p "$root/build"
    apt_in_root install -y -q --no-install-recommends --download-only "${cuda_packages[@]}" > "$root/build/cuda-download.log" 2>&1 &
    download_pid=$!
  fi
  log "cpu: $(in_root dpkg-query -W -f='${Package} ${Version}' libtorch-dev)"
  configure /build/lt2-cpu -DQUARK_WITH_CUDA=OFF || return 1
  # shellcheck disable=SC2086  # QUARK_LT2_CPU_TARGETS is a list of targets
  build /build/lt2-cpu ${QUARK_LT2_CPU_TARGETS:-} || return 1
  # With a subset of targets, the test executables left unbuilt appear as <target>_NOT_BUILT: not run.
  local ctest_args="${QUARK_LT2_CTEST:-}"
  [ -z "${QUARK_LT2_CPU_TARGETS:-}" ] || ctest_args="-E _NOT_BUILT $ctest_args"
  log "cpu: running ctest ${ctest_args:-(whole suite)}"
  local rc=0
  in_root /bin/sh -c "cd /build/lt2-cpu && ctest --output-on-failure -j $jobs --timeout 900 $ctest_args" \
    2>&1 | tee "$root/build/lt2-cpu/ctest.log" || rc=$?
  summary+=("cpu: $(grep -E 'tests passed|tests failed' "$root/build/lt2-cpu/ctest.log" | tail -1)\
 (ctest rc $rc; log $root/build/lt2-cpu/ctest.log)")
  return "$rc"
}

# --- (b) CUDA: LibTorch 2.6 with CUDA and nvcc 12.4 configure, compile and link ---------------------------------
run_cuda() {
  if [ -n "$download_pid" ]; then wait "$download_pid" || log "cuda: background download failed; apt retries"; fi
  log "cuda: installing ${cuda_packages[*]} in the chroot (~2 GB download the first time)"
  # Without the CPU LibTorch's users: libtorch-dev, and python3-torch (it needs libtorch2.6, which conflicts with
  # libtorch-cuda-2.6; apt removes it here and the cpu part installs it again).
  local others=() p
  for p in "${cpu_packages[@]}"; do
    case "$p" in libtorch-dev | python3-torch) ;; *) others+=("$p") ;; esac
  done
  apt_in_root install -y -q --no-install-recommends "${others[@]}" "${cuda_packages[@]}" || return 1
  apt_in_root clean || true
  local nvcc_version
  nvcc_version="$(in_root nvcc --version | grep -o 'release [0-9.]*')"
  log "cuda: $(in_root dpkg-query -W -f='${Package} ${Version}' libtorch-cuda-dev), nvcc $nvcc_version"
  # libtorch_cuda.so needs libcudnn.so.9, which Debian does not ship: nvidia-cudnn fetches it from NVIDIA after a
  # license prompt (declined above; there is no network to NVIDIA here). The executables then link with
  # --allow-shlib-undefined, which excuses only references left undefined inside shared libraries (libtorch_cuda's
  # cuDNN calls); every symbol of quarkd's own objects must still resolve.
  # Executables link against the system's libstdc++ (trixie's, from GCC 14: what they load at run time). CUDA's
  # implicit link directories put /usr/lib/gcc/x86_64-linux-gnu/13, whose libstdc++.so is GCC 13's own and lacks
  # GCC 14's symbols (__cxa_call_terminate, used by trixie's static libgtest.a and by code GCC 14 compiles), ahead
  # of it on every link line; naming the system one's directory first in the linker flags keeps it first.
  local libstdcxx_dir
  libstdcxx_dir="$(dirname "$(in_root g++ -print-file-name=libstdc++.so)")"
  local linker_flags="-L$libstdcxx_dir"
  if ! in_root /bin/sh -c 'ldconfig -p | grep -q libcudnn.so.9'; then
    log "cuda: no libcudnn.so.9 in the chroot: linking with -Wl,--allow-shlib-undefined"
    linker_flags="$linker_flags -Wl,--allow-shlib-undefined"
  fi
  local link=("-DCMAKE_EXE_LINKER_FLAGS=$linker_flags" "-DCMAKE_SHARED_LINKER_FLAGS=$linker_flags")
  # The C and C++ code is compiled by nvcc's host compiler (GCC 13 for the toolkit 12.4: its gcc/g++ wrappers), the
  # compiler of the CUDA sources' host code.
  local host_cc="${QUARK_LT2_CUDA_HOST_CC:-gcc-13}" host_cxx="${QUARK_LT2_CUDA_HOST_CXX:-g++-13}"
  in_root /bin/sh -c "command -v $host_cxx && command -v $host_cc" > /dev/null ||
    { echo "check-libtorch2: no $host_cxx / $host_cc in the chroot (nvcc's host compiler)" >&2; return 1; }
  local cache="$root/build/lt2-cuda/CMakeCache.txt"
  if [ -f "$cache" ] && ! grep -q "^CMAKE_CXX_COMPILER:[A-Z]*=.*$host_cxx\$" "$cache"; then
    log "cuda: the build tree was configured with another C++ compiler: starting it afresh"
    rm -rf "$root/build/lt2-cuda"
  fi
  # One ctest test per case (gtest_discover_tests, which lists a test executable when ctest runs): the default lists
  # each executable's suites right after it links, and these cannot start without cuDNN.
  configure /build/lt2-cuda -DQUARK_WITH_CUDA=ON -DCMAKE_CUDA_COMPILER=/usr/bin/nvcc \
    -DCMAKE_C_COMPILER="$host_cc" -DCMAKE_CXX_COMPILER="$host_cxx" -DQUARK_TEST_PER_CASE=ON "${link[@]}" || return 1
  # The chroot's nvcc, never the host's /usr/local/cuda (not visible in the chroot; checked all the same).
  grep -E '^CMAKE_CUDA_COMPILER:|^CMAKE_CXX_COMPILER:|^QUARK_CUDA_ARCHITECTURES:' "$cache"
  if grep -q '/usr/local/cuda' "$cache"; then
    echo "check-libtorch2: the CUDA build refers to /usr/local/cuda" >&2
    return 1
  fi
  # shellcheck disable=SC2086  # QUARK_LT2_TARGETS is a list of targets
  build /build/lt2-cuda ${QUARK_LT2_TARGETS:-} || return 1
  local cuda_objects linked=() f
  cuda_objects="$(find "$root/build/lt2-cuda" -name '*.cu.o' | wc -l)"
  while IFS= read -r f; do
    readelf -d "$f" 2>/dev/null | grep -q 'NEEDED.*libtorch_cuda' && linked+=("$(basename "$f")")
  done < <(find "$root/build/lt2-cuda" -type f -perm -u+x ! -name '*.so*' ! -path '*/CMakeFiles/*' | sort)
  summary+=("cuda: configured, compiled and linked ${QUARK_LT2_TARGETS:-all targets} with nvcc $nvcc_version:\
 $cuda_objects CUDA objects; ${#linked[@]} executables linked against libtorch_cuda: ${linked[*]}")
}

# set -e does not reach into a function called before ||: every step in run_* returns on failure itself.
status=0
for p in "${parts[@]}"; do
  "run_$p" || { status=1; summary+=("$p: FAILED (see above)"); }
done

cleanup
elapsed=$(( $(date +%s) - start_s ))
log "done in $((elapsed / 60)) min $((elapsed % 60)) s; disk: chroot $(du -sh -x "$root" | cut -f1) in all" \
    "(build trees $(du -sch "$root"/build/lt2-* 2>/dev/null | tail -1 | cut -f1)," \
    "apt cache $(du -sh "$root/var/cache/apt/archives" | cut -f1)); $(df -h --output=avail "$root" | tail -1 | tr -d ' ') left on its disk"
for s in "${summary[@]}"; do log "$s"; done
exit "$status"
