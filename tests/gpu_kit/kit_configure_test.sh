#!/usr/bin/env bash
# Configures the GPU kit as scripts/gpu/run.sh does (engine tier, QUARK_GPU_KIT_ENGINE=ON; CUDA where nvcc is found)
# against this machine's LibTorch and libraries, in a scratch folder. The kit is built on a GPU machine within a
# session's few device-minutes, so a CMake error there must fail here first: the H200's first call was lost to tests'
# settings naming targets that the kit leaves out.
#
#   kit_configure_test.sh SOURCE_DIR CMAKE
set -euo pipefail
src=$1 cmake=$2
gtest=${QUARK_GTEST_SOURCE_DIR:-/usr/src/googletest}
[[ -f $gtest/CMakeLists.txt ]] || { echo "no GoogleTest source at $gtest (Debian's googletest package)"; exit 1; }
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
args=(-DCMAKE_BUILD_TYPE=Release -DCMAKE_POLICY_VERSION_MINIMUM=3.5 "-DCMAKE_EXE_LINKER_FLAGS=-Wl,--allow-shlib-undefined"
  -DQUARK_GPU_KIT=ON -DQUARK_GPU_KIT_ENGINE=ON "-DQUARK_GTEST_SOURCE_DIR=$gtest")
nvcc=${CUDACXX:-/usr/local/cuda/bin/nvcc}
if [[ -x $nvcc ]]; then
  args+=(-DQUARK_WITH_CUDA=ON "-DCMAKE_CUDA_COMPILER=$nvcc" -DCMAKE_CUDA_ARCHITECTURES=90)
else
  args+=(-DQUARK_WITH_CUDA=OFF)
fi
generator=()
command -v ninja > /dev/null && generator=(-G Ninja)
if ! "$cmake" -S "$src" -B "$scratch" "${generator[@]}" "${args[@]}" > "$scratch.log" 2>&1; then
  cat "$scratch.log"
  rm -f "$scratch.log"
  echo "kit_configure_test: the GPU kit does not configure (see above)"
  exit 1
fi
rm -f "$scratch.log"
for target in quark algo_bench cuda_kernels_bench gptq_cuda_test device_streaming_cuda_test; do
  [[ $target == cuda_kernels_bench && ! -x $nvcc ]] && continue
  grep -q "$target" "$scratch/build.ninja" "$scratch/Makefile" 2> /dev/null ||
    { echo "kit_configure_test: the configured kit has no target $target"; exit 1; }
done
echo "kit_configure_test: the GPU kit configures (engine tier$([[ -x $nvcc ]] && echo ", CUDA"))"
