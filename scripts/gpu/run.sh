#!/usr/bin/env bash
# Runs the GPU kit on a GPU machine without a package registry (docs/gpu.md, "The GPU kit"): unpacks the packages
# that scripts/gpu/prepare.sh downloaded (gpu-kit/debs) into a prefix, configures the kit (QUARK_GPU_KIT=ON) against
# the machine's PyTorch with CUDA, builds it with ninja, runs its tests (the `gpu`-labelled ones included) and the
# CUDA kernel benchmark, and writes under $OUT (default ./out):
#   run.log        every step: what ran, how long, and how it ended
#   configure.log  build.log  diagnose.log  ctest.log  bench.log
#   ctest.xml      ctest's JUnit report: every test's output, the passed ones' printed figures too
#   results.json   the machine, each step's status and time, test counts and failures, the bench's figures
#                  (cuda_kernels_bench's bench.json) and the engine's (engine_bench.sh's engine_bench.jsonl)
# Eight files at the most: the device tool brings back no more, so every other file (the figures' own files, the
# diagnosis's scratch) stays in the build folder.
# The engine tier (QUARK_GPU_KIT_ENGINE: core/, `quark`, algo_bench, the GPTQ and streaming device tests) is built
# when prepare.sh carried its packages and this machine's glibc and libstdc++ are at least what they need
# (gpu-kit/glibc-needed, glibcxx-needed); otherwise the kernels tier alone, saying why.
# Each step that fails says so on stderr and in run.log; later steps still run on what was built, and results.json is
# rewritten after every step, so a run cut short still returns what it got. Exit status 0 only if every step passed.
#
# Environment (all optional):
#   QUARK_TORCH_DIR      Torch_DIR (else from python3's torch.utils.cmake_prefix_path)
#   QUARK_CUDA_ARCH      CMAKE_CUDA_ARCHITECTURES (default 90, the H200)
#   QUARK_NVCC           nvcc (else nvcc on PATH, else /usr/local/cuda/bin/nvcc); none: CUDA kernels not built
#   QUARK_JOBS           build and test parallelism (default: nproc)
#   QUARK_KIT_BUILD_DIR  build folder (default build-gpu-kit; kept between runs on the same machine)
#   QUARK_KIT_ENGINE     0: the kernels tier only, even where the engine's packages are carried
#   QUARK_KIT_ENGINE_BENCH 0: skip the engine's figures (scripts/gpu/h200.sh measures its own after this script)
#   QUARK_BUILD_TIMEOUT QUARK_TEST_TIMEOUT QUARK_BENCH_TIMEOUT   seconds (default 240, 100, 60; with the engine
#                        300, 120, 60, and 90 for its figures: QUARK_ENGINE_BENCH_TIMEOUT)
set -uo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
out=${OUT:-$root/out}
kit=${QUARK_GPU_KIT_DIR:-$root/gpu-kit}
build=${QUARK_KIT_BUILD_DIR:-$root/build-gpu-kit}
prefix=$build/deps
jobs=${QUARK_JOBS:-$(nproc)}
mkdir -p "$out" "$build"
log=$out/run.log
steps=$build/steps.tsv
: > "$log"
: > "$steps"
# The figures' files of an earlier run in a kept build folder must not pass for this run's.
rm -f "$build/bench.json" "$build/engine_bench.jsonl"
failed=0

say() { echo "[$(date -u +%H:%M:%S)] $*" | tee -a "$log"; }
# step NAME LOGFILE COMMAND...: runs COMMAND with its output in LOGFILE, records status and seconds.
step() {
  local name=$1 file=$2
  shift 2
  say "== $name: $*"
  local t0=$SECONDS rc
  "$@" >> "$file" 2>&1
  rc=$?
  local secs=$((SECONDS - t0))
  printf '%s\t%s\t%s\t%s\n' "$name" "$rc" "$secs" "$(basename "$file")" >> "$steps"
  if ((rc == 0)); then
    say "== $name: ok (${secs}s)"
  else
    failed=1
    say "== $name: FAILED with status $rc after ${secs}s; its last lines (all in \$OUT/$(basename "$file")):"
    tail -n 25 "$file" | sed 's/^/   | /' | tee -a "$log" >&2
  fi
  results
  return $rc
}
results() {
  env -u LD_LIBRARY_PATH python3 "$root/scripts/gpu/results.py" --steps "$steps" --build "$build" > "$out/results.json" 2>> "$log" ||
    say "results.py failed (see run.log)"
}

say "GPU kit run: $(uname -srm), $(nproc) cores, $(. /etc/os-release 2> /dev/null && echo "$PRETTY_NAME"), \
glibc $(ldd --version 2> /dev/null | head -1 | awk '{print $NF}')"
say "tools: $(cmake --version 2> /dev/null | head -1), ninja $(ninja --version 2> /dev/null || echo absent), \
$(c++ --version 2> /dev/null | head -1)"
# Where the driver lists a GPU, the gpu tests and the bench fail (instead of skipping) if they cannot use it.
if command -v nvidia-smi > /dev/null && nvidia-smi -L 2> /dev/null | grep -q '^GPU'; then
  export QUARK_EXPECT_CUDA=1
  nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader | sed 's/^/GPU: /' | tee -a "$log"
else
  say "no GPU listed by nvidia-smi: the gpu tests will skip and the bench will measure nothing"
fi

# 1. The kit's packages into the prefix (dpkg-deb where there is one, else python3 reads the ar + tar itself).
unpack() {
  shopt -s nullglob
  local debs=("$kit"/debs/*.deb)
  if ((${#debs[@]} == 0)); then
    echo "no packages in $kit/debs: run scripts/gpu/prepare.sh here and carry gpu-kit"
    return 1
  fi
  rm -rf "$prefix" && mkdir -p "$prefix"
  for deb in "${debs[@]}"; do
    echo "unpacking $(basename "$deb")"
    if command -v dpkg-deb > /dev/null; then
      dpkg-deb -x "$deb" "$prefix" || return 1
    else
      python3 "$root/scripts/gpu/results.py" --unpack "$deb" --into "$prefix" || return 1
    fi
  done
  test -f "$prefix/usr/src/googletest/CMakeLists.txt" || { echo "no GoogleTest source in the packages"; return 1; }
}
step unpack "$out/configure.log" unpack

# The engine tier: its packages are there, and this machine runs bookworm's shared libraries.
engine=0
engine_why=""
version_at_least() { [[ $(printf '%s\n%s\n' "$2" "$1" | sort -V | head -1) == "$2" ]]; }
choose_tier() {
  if [[ ${QUARK_KIT_ENGINE:-1} != 1 ]]; then
    engine_why="QUARK_KIT_ENGINE=${QUARK_KIT_ENGINE}"
  elif [[ ! -d $prefix/usr/lib/x86_64-linux-gnu/cmake/absl || ! -f $kit/glibc-needed ]]; then
    engine_why="the engine's packages were not carried (prepare.sh with QUARK_KIT_ENGINE=0?)"
  else
    local have_glibc need_glibc need_cxx stdcxx
    have_glibc=$(ldd --version 2> /dev/null | head -1 | awk '{print $NF}')
    need_glibc=$(cat "$kit/glibc-needed")
    need_cxx=$(cat "$kit/glibcxx-needed" 2> /dev/null || echo 0)
    stdcxx=$(c++ -print-file-name=libstdc++.so.6 2> /dev/null)
    if ! version_at_least "${have_glibc:-0}" "$need_glibc"; then
      engine_why="glibc ${have_glibc:-unknown} here, the engine's packages need $need_glibc"
    elif [[ $need_cxx != 0 ]] && ! grep -aq "GLIBCXX_$need_cxx" "$(readlink -f "$stdcxx")" 2> /dev/null; then
      engine_why="the compiler's libstdc++ ($stdcxx) has no GLIBCXX_$need_cxx, which the engine's packages need"
    else
      engine=1
    fi
  fi
}
choose_tier
if ((engine)); then
  say "engine tier: on (glibc $(ldd --version 2> /dev/null | head -1 | awk '{print $NF}'), needs $(cat "$kit/glibc-needed"))"
else
  say "engine tier: off: $engine_why (the kernels tier only)"
fi
engine_args=(-DQUARK_GPU_KIT_ENGINE=OFF)
if ((engine)); then
  libdir=$prefix/usr/lib/x86_64-linux-gnu
  # The packages' pkg-config files name /usr: point them at the prefix.
  find "$libdir/pkgconfig" "$prefix/usr/share/pkgconfig" -name '*.pc' -exec sed -i "s#=/usr#=$prefix/usr#g" {} + \
    2> /dev/null
  export PKG_CONFIG_PATH=$libdir/pkgconfig:$prefix/usr/share/pkgconfig${PKG_CONFIG_PATH:+:$PKG_CONFIG_PATH}
  # protoc and the programs built here load the packages' libraries (a RUNPATH does not reach their own needs).
  export LD_LIBRARY_PATH=$libdir${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
  pkg_config=$(command -v pkg-config || command -v pkgconf || echo "$prefix/usr/bin/pkgconf")
  engine_args=(-DQUARK_GPU_KIT_ENGINE=ON "-DCMAKE_PREFIX_PATH=$prefix/usr;$libdir/cmake;$prefix/usr/share/cmake"
    "-DOPENSSL_ROOT_DIR=$prefix/usr" "-DPKG_CONFIG_EXECUTABLE=$pkg_config" "-DQUARK_SHARED_DIR=$kit/shared")
fi

# 2. The machine's LibTorch and nvcc.
torch_dir=${QUARK_TORCH_DIR:-}
if [[ -z $torch_dir ]]; then
  # Without the kit's libraries on the path: python3 and torch load the machine's own.
  torch_prefix=$(env -u LD_LIBRARY_PATH python3 -c 'import torch; print(torch.utils.cmake_prefix_path)' 2>> "$out/configure.log")
  [[ -n $torch_prefix ]] && torch_dir=$torch_prefix/Torch
fi
env -u LD_LIBRARY_PATH python3 -c 'import torch; print("python torch", torch.__version__, "cuda", torch.version.cuda,
  "available", torch.cuda.is_available(), torch.cuda.get_device_name(0) if torch.cuda.is_available() else "")' \
  2> /dev/null | tee -a "$log"
nvcc=${QUARK_NVCC:-$(command -v nvcc || true)}
[[ -z $nvcc && -x /usr/local/cuda/bin/nvcc ]] && nvcc=/usr/local/cuda/bin/nvcc
find_tools() {
  if [[ -z $torch_dir || ! -d $torch_dir ]]; then
    echo "no LibTorch: python3 has no torch and QUARK_TORCH_DIR is unset (got '$torch_dir')"
    return 1
  fi
  echo "Torch_DIR=$torch_dir"
  if [[ -z $nvcc ]]; then
    echo "no nvcc (QUARK_NVCC, PATH, /usr/local/cuda/bin): the CUDA kernels, their test and the bench are not built"
    return 1
  fi
  echo "nvcc=$nvcc: $("$nvcc" --version | tail -1)"
}
step find-tools "$out/configure.log" find_tools

# 3. Configure and build (ninja -k 0: what can be built is, even after a failure). A rerun on a warm machine keeps
# the build folder; unchanged sources get back the times they had at the last run, so only changes are rebuilt.
step pin-mtimes "$out/configure.log" python3 "$root/scripts/gpu/results.py" --pin-mtimes "$build/source-mtimes.json" \
  --root "$root" --skip "$build" --skip "$out" --skip "$kit"
generator=Ninja
command -v ninja > /dev/null || generator="Unix Makefiles"
cuda_args=(-DQUARK_WITH_CUDA=OFF)
[[ -n $nvcc ]] && cuda_args=(-DQUARK_WITH_CUDA=ON "-DCMAKE_CUDA_COMPILER=$nvcc")
# CMAKE_POLICY_VERSION_MINIMUM: a CMake 4 (pip's) refuses GoogleTest's and the packages' older minimum versions without
# it. --allow-shlib-undefined: a pip PyTorch's libtorch_cuda.so finds cuDNN, NCCL... through its own RPATH into the
# wheel's nvidia/ folders at run time; the linker need not resolve them (every symbol of the kit's own objects still
# must).
step configure "$out/configure.log" cmake -S "$root" -B "$build" -G "$generator" -DCMAKE_BUILD_TYPE=Release \
  -DCMAKE_POLICY_VERSION_MINIMUM=3.5 "-DCMAKE_EXE_LINKER_FLAGS=-Wl,--allow-shlib-undefined" \
  -DQUARK_GPU_KIT=ON "-DCMAKE_CUDA_ARCHITECTURES=${QUARK_CUDA_ARCH:-90}" "-DTorch_DIR=$torch_dir" \
  "-DQUARK_GTEST_SOURCE_DIR=$prefix/usr/src/googletest" "${cuda_args[@]}" "${engine_args[@]}"
keep_going=()
[[ $generator == Ninja ]] && keep_going=(-- -k 0)
step build "$out/build.log" timeout "${QUARK_BUILD_TIMEOUT:-$((engine ? 300 : 240))}" cmake --build "$build" -j "$jobs" "${keep_going[@]}"

# 3b. What the machine's LibTorch exports of protobuf, and whether `quark` can read a SentencePiece tokenizer and
# tokenize text beside it (the second H200 session: the pipeline test, which tokenizes text, died of SIGSEGV while
# the token-id jobs ran; bookworm's SentencePiece and protobuf share the process with the wheel's libtorch). Every
# LibTorch executable now prints its stack on a fatal signal (core/base/crash_report.h). Never fails the run.
diagnose() {
  local lib=${torch_dir%/share/cmake/Torch}/lib so quark_bin=$build/core/cli/quark
  for so in libtorch_cpu.so libtorch.so libc10.so libtorch_cuda.so; do
    [[ -f $lib/$so ]] && echo "$so exports $(nm -D --defined-only "$lib/$so" 2> /dev/null | grep -c '_ZN6google8protobuf') protobuf symbols"
  done
  if [[ -x $quark_bin && -d $kit/shared/fixtures/stories260K ]]; then
    head -c 4096 "$kit/shared/fixtures/eval/tinystories_validation_prefix.txt" > "$build/diagnose-text.txt"
    timeout 60 "$quark_bin" eval --model "$kit/shared/fixtures/stories260K" --text "$build/diagnose-text.txt" \
      --seq-len 64 --max-windows 1 --json 2>&1 | tail -n 40
    echo "quark eval with text (SentencePiece): exit ${PIPESTATUS[0]}"
    # Where the SentencePiece module's and protobuf's symbols bind across libraries (LD_DEBUG's "binding file A to
    # B": A's reference resolved in B): sentencepiece bound outside its own libraries, and protobuf bound into torch.
    LD_DEBUG=bindings timeout 60 "$quark_bin" eval --model "$kit/shared/fixtures/stories260K" \
      --text "$build/diagnose-text.txt" --seq-len 64 --max-windows 1 --json > "$build/diagnose-bindings.txt" 2>&1
    echo "-- sentencepiece's references bound outside sentencepiece / protobuf-lite / libstdc++ / libc:"
    awk '/binding file .*sentencepiece/ && $7 !~ /sentencepiece|protobuf-lite|libstdc|libc\.so|libgcc|libm\.so/' \
      "$build/diagnose-bindings.txt" | head -n 30
    echo "-- protobuf symbols bound into a torch library, or torch's references bound to another library's protobuf:"
    awk '/normal symbol .*google8protobuf/ && (($7 ~ /torch/ && $4 !~ /torch/) || ($4 ~ /torch/ && $7 !~ /torch/))' \
      "$build/diagnose-bindings.txt" | head -n 30
    rm -f "$build/diagnose-bindings.txt"
  fi
  return 0
}
((engine)) && step diagnose "$out/diagnose.log" diagnose

# 4. The tests: every test of the kit, the gpu-labelled ones included (they skip, saying so, without a device).
step tests "$out/ctest.log" timeout "${QUARK_TEST_TIMEOUT:-$((engine ? 120 : 100))}" ctest --test-dir "$build" --output-on-failure \
  --no-tests=error -j "$jobs" --timeout 120 --output-junit "$build/ctest.xml"
sed -n '/tests passed/,$p' "$out/ctest.log" | head -n 40 | tee -a "$log"  # ctest's summary: counts, skips, failures
# Every test's output, the passed ones' printed figures included (ctest's log keeps only the failures').
cp -f "$build/ctest.xml" "$out/ctest.xml" 2> /dev/null

# 5. The benchmark.
bench=$build/bench/kernels/cuda_kernels_bench
if [[ -x $bench ]]; then
  step bench "$out/bench.log" timeout "${QUARK_BENCH_TIMEOUT:-60}" "$bench" --json "$build/bench.json"
  tee -a "$log" < "$out/bench.log"
else
  say "== bench: FAILED: $bench was not built (see build.log)"
  printf 'bench\t127\t0\tbuild.log\n' >> "$steps"
  failed=1
fi

# 6. The engine's figures.
if ((engine)) && [[ ${QUARK_KIT_ENGINE_BENCH:-1} == 1 ]]; then
  # Its log joins the kernel bench's (the device tool brings back at most 8 files).
  step engine-bench "$out/bench.log" timeout "${QUARK_ENGINE_BENCH_TIMEOUT:-90}" \
    bash "$root/scripts/gpu/engine_bench.sh" "$build" "$kit/shared" "$build/engine_bench.jsonl"
  grep '^{' "$build/engine_bench.jsonl" 2> /dev/null | tee -a "$log"
fi

results
# The device tool brings back eight files from $OUT (16 MiB each): say so here if this run wrote more.
returned=$(find "$out" -type f | wc -l)
if ((returned > 8)); then
  say "warning: \$OUT holds $returned files; the device tool brings back 8 of them (this script writes 8 at most)"
fi
if ((failed)); then
  say "GPU kit run: FAILED (see the steps above; every log is in \$OUT)"
  exit 1
fi
say "GPU kit run: every step passed"
