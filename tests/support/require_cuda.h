// The first statement of a `gpu`-labelled test that needs LibTorch's CUDA: it skips, saying so (a message
// tests/support/legitimate_skips.txt accepts), where LibTorch sees no CUDA device, and fails instead where
// QUARK_EXPECT_CUDA is set (scripts/gpu/run.sh: the GPU kit, where a missing device is an error).
#pragma once

#include <torch/cuda.h>

#include <cstdlib>

#include <gtest/gtest.h>

#define QUARK_REQUIRE_CUDA(what_is_not_run)                                                         \
  do {                                                                                              \
    if (!torch::cuda::is_available()) {                                                             \
      if (std::getenv("QUARK_EXPECT_CUDA") != nullptr) {                                            \
        FAIL() << "QUARK_EXPECT_CUDA is set but LibTorch sees no CUDA";                             \
      }                                                                                             \
      GTEST_SKIP() << "LibTorch sees no CUDA device here (CPU-only LibTorch or no GPU): " << what_is_not_run; \
    }                                                                                               \
  } while (false)
