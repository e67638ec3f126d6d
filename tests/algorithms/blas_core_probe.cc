// A LibTorch binary that says what the OpenBLAS core guard (core/base/blas_core_guard.cc) left it with, for
// blas_core_process_test: the core OpenBLAS runs, OPENBLAS_CORETYPE, its own arguments (a re-executed process must
// keep them) and the guard's choice. It links LibTorch like every quark binary, so the guard runs before main.
#include <dlfcn.h>

#include <cstdio>
#include <cstdlib>
#include <string>

#include <ATen/Parallel.h>

#include "core/base/blas_core.h"

int main(int argc, char** argv) {
  using CoreName = char* (*)();
  const auto corename = reinterpret_cast<CoreName>(dlsym(RTLD_DEFAULT, "openblas_get_corename"));
  const char* coretype = std::getenv("OPENBLAS_CORETYPE");
  std::string args;
  for (int i = 1; i < argc; ++i) args += std::string(i > 1 ? "|" : "") + argv[i];
  std::printf("core=%s\n", corename == nullptr ? "" : corename());
  std::printf("coretype=%s\n", coretype == nullptr ? "" : coretype);
  std::printf("args=%s\n", args.c_str());
  std::printf("choice=%s\n", quark::BlasCoreChoiceForLog().c_str());
  std::printf("torch_threads=%d\n", at::get_num_threads());
  return 0;
}
