#include "core/quantize/calibration_input.h"

#include <algorithm>
#include <random>

#include "core/base/strings.h"
#include "core/runtime/calibration_data.h"

namespace quark::quantize {

std::vector<at::Tensor> SyntheticCalibrationSamples(const checkpoint::ModelConfig& model, int64_t num_samples,
                                                    int64_t seq_len, uint64_t seed) {
  std::mt19937_64 random(seed);
  const uint64_t vocab = static_cast<uint64_t>(std::max<int64_t>(model.vocab_size, 1));
  std::vector<at::Tensor> samples;
  samples.reserve(static_cast<size_t>(std::max<int64_t>(num_samples, 0)));
  for (int64_t k = 0; k < num_samples; ++k) {
    at::Tensor ids = at::empty({1, seq_len}, at::kLong);
    int64_t* p = ids.data_ptr<int64_t>();
    for (int64_t t = 0; t < seq_len; ++t) p[t] = static_cast<int64_t>(random() % vocab);
    if (model.bos_token_id >= 0 && model.bos_token_id < model.vocab_size) p[0] = model.bos_token_id;
    samples.push_back(ids);
  }
  return samples;
}

absl::StatusOr<std::vector<at::Tensor>> LoadCalibrationSamples(const std::string& path,
                                                               const checkpoint::ModelConfig& model,
                                                               const runtime::Tokenizer* tokenizer, int64_t num_samples,
                                                               int64_t seq_len, uint64_t seed) {
  if (num_samples <= 0) return absl::InvalidArgumentError(StrCat("num_calibration_samples: must be positive, got ", num_samples));
  if (seq_len <= 0) return absl::InvalidArgumentError(StrCat("seq_len: must be positive, got ", seq_len));
  if (model.max_position_embeddings > 0) seq_len = std::min(seq_len, model.max_position_embeddings);
  if (path.empty()) {
    // Random ids calibrate nothing a real input would: QuantizeModel never asks without data.
    return absl::InvalidArgumentError("calibration_file: no calibration data given");
  }
  runtime::CalibrationOptions options;
  options.path = path;
  options.num_samples = num_samples;
  options.seq_len = seq_len;
  options.seed = seed;
  auto set = runtime::LoadCalibrationSet(options, tokenizer);
  if (!set.ok()) return set.status();
  return std::move(set->samples);
}

}  // namespace quark::quantize
