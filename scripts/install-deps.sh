#!/usr/bin/env bash
# Installs every Debian package that quarkd's build, tests and demo need.
# Idempotent; must run as root (or with sudo available) on Debian bookworm.
set -euo pipefail

packages=(
  # toolchain
  build-essential cmake ninja-build pkg-config git ca-certificates
  # LLVM's linker: links the suite's ~200 LibTorch executables and libraries ~6x faster than GNU ld (CMakeLists.txt)
  lld
  # engine: LibTorch (CPU) and a fast BLAS (without it matmul falls back to reference BLAS, ~14x slower)
  libtorch-dev libopenblas0-pthread libsentencepiece-dev sentencepiece
  # tokenizer.json: Unicode split regexes (PCRE2) and NFC normalization (ICU)
  libpcre2-dev libicu-dev
  # RPC and messages
  libgrpc++-dev libgrpc-dev protobuf-compiler-grpc libprotobuf-dev protobuf-compiler libabsl-dev libssl-dev
  # the Python client (clients/python): grpcio and protobuf for Debian's python3
  python3-grpcio python3-protobuf
  # plumbing
  libspdlog-dev libfmt-dev nlohmann-json3-dev libcli11-dev libcpp-httplib-dev libyaml-cpp-dev
  libsqlite3-dev libcurl4-openssl-dev libpq-dev
  # the shared job store for several quarkd replicas; its tests start a real server (initdb + pg_ctl)
  postgresql
  # exports: the ONNX protobuf schema and checker (libonnx-dev); Python's onnx reads files in tests and benchmarks
  libonnx-dev python3-onnx
  # the Slurm executor's test starts its own munged, slurmctld and slurmd (the packages' services stay unused)
  munge slurmctld slurmd slurm-client
  # tests and their real peers
  libgtest-dev libgmock-dev prometheus nodejs
  # the fuzz campaign (scripts/fuzz.sh): clang with libFuzzer and the ASan/UBSan runtimes
  clang libclang-rt-14-dev
  # the HIP kernels (kernels/hip, for AMD GPUs): hipcc (clang 15), the HIP runtime and the device libraries
  hipcc libamdhip64-dev rocm-device-libs
)

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done

SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO="sudo"

if [ "${#missing[@]}" -gt 0 ]; then
  echo "install-deps: installing ${missing[*]}"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
else
  echo "install-deps: all Debian packages present"
fi

# npm is shipped with the nodesource nodejs package; Debian's own npm conflicts with it.
if ! command -v npm >/dev/null 2>&1; then
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends npm
fi
