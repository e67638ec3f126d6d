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
for target in quark algo_bench cuda_kernels_bench gptq_cuda_test device_streaming_cuda_test device_quantize_cuda_test nvfp4_cuda_test; do
  [[ $target == cuda_kernels_bench && ! -x $nvcc ]] && continue
  grep -q "$target" "$scratch/build.ninja" "$scratch/Makefile" 2> /dev/null ||
    { echo "kit_configure_test: the configured kit has no target $target"; exit 1; }
done
# A pip PyTorch's Caffe2Config makes protobuf::libprotobuf an alias of an empty INTERFACE library when no such target
# exists yet (its own protobuf is linked in statically): on the H200 `quark` then linked no protobuf at all. The same
# configure against a Torch_DIR that does what the wheel's config does must still link the kit's protobuf into quark.
system_torch=$(dirname "$(find /usr/lib /usr/share -name TorchConfig.cmake -path '*Torch*' 2> /dev/null | head -1)")
if [[ -f $system_torch/TorchConfig.cmake ]]; then
  wheel_like=$scratch-wheel-torch
  mkdir -p "$wheel_like"
  cat > "$wheel_like/TorchConfig.cmake" << CONFIG
if(NOT TARGET protobuf::libprotobuf)
  add_library(quark_wheel_like_dummy INTERFACE)
  add_library(protobuf::libprotobuf ALIAS quark_wheel_like_dummy)
endif()
include("$system_torch/TorchConfig.cmake")
CONFIG
  rm -rf "$scratch"/*
  if ! "$cmake" -S "$src" -B "$scratch" "${generator[@]}" "${args[@]}" "-DTorch_DIR=$wheel_like" > "$scratch.log" 2>&1; then
    cat "$scratch.log"
    echo "kit_configure_test: the GPU kit does not configure against a wheel-like Torch config"
    exit 1
  fi
  rm -f "$scratch.log"
  link=$(grep -A8 "^build core/cli/quark:" "$scratch/build.ninja" 2> /dev/null | grep -m1 "LINK_LIBRARIES" || true)
  rm -rf "$wheel_like"
  [[ $link == *protobuf* ]] ||
    { echo "kit_configure_test: with a wheel-like Torch config, quark links no protobuf: ${link:0:300}"; exit 1; }
fi
echo "kit_configure_test: the GPU kit configures (engine tier$([[ -x $nvcc ]] && echo ", CUDA"); quark links protobuf)"
