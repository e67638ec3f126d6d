// Hugging Face's logits for the tiny seed-7 gpt-oss (tests/peers/hf_gpt_oss/make_reference.sh: modeling_gpt_oss.py in
// float64), committed as tests/runtime/data/gpt_oss_tiny_seed7_logits.f64, and the windows they were computed for.
// A target that includes this defines QUARK_GPT_OSS_TEST_DATA (that data folder).
#pragma once

#include <fstream>
#include <string>

#include <ATen/ATen.h>
#include <gtest/gtest.h>

namespace quark::runtime::testing {

/// Two windows of 16 token ids [2, 16].
inline at::Tensor GptOssReferenceIds() {
  at::Tensor ids = at::empty({2, 16}, at::kLong);
  for (int64_t w = 0; w < 2; ++w) {
    for (int64_t i = 0; i < 16; ++i) ids[w][i] = (i * 7919 + 13 + w * 101) % 512;
  }
  return ids;
}

/// HF's logits [2, 16, 512] float64 of those windows.
inline at::Tensor GptOssReferenceLogits() {
  const std::string path = std::string(QUARK_GPT_OSS_TEST_DATA) + "/gpt_oss_tiny_seed7_logits.f64";
  std::ifstream in(path, std::ios::binary);
  at::Tensor logits = at::empty({2, 16, 512}, at::kDouble);
  in.read(static_cast<char*>(logits.data_ptr()), logits.numel() * 8);
  EXPECT_TRUE(in.good()) << "cannot read " << path;
  return logits;
}

}  // namespace quark::runtime::testing
