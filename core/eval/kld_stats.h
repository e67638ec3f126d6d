// KL divergence of a model against a reference (the float model), token by token, exactly as llama.cpp's
// `llama-perplexity --kl-divergence` defines it (tools/perplexity/perplexity.cpp):
//   - the reference's log-probs of a token are kept compactly as llama.cpp keeps them: one row of
//     2 * ceil(vocab / 2) + 4 uint16 (a float scale, a float min log-prob, then each token's log-prob quantized
//     to 16 bits over the 16 nats below the most probable token; anything lower reads as the minimum);
//   - KLD(token) = sum over the vocabulary of p_ref * (log p_ref - log p), over tokens with log p_ref > -16;
//   - top-1 agreement: the argmax of the model's logits equals the argmax of the reference's stored log-probs;
//   - Δp = p(correct token) - p_ref(correct token);
//   - means with llama.cpp's uncertainty sqrt((E[x^2] - E[x]^2) / (n - 1)) (0 for n <= 10), the median and the
//     percentiles linearly interpolated between sorted values.
#pragma once

#include <cstdint>
#include <vector>

namespace quark::eval {

/// uint16 values per stored reference row for `vocab` tokens (llama.cpp's nv).
inline int64_t KldRowWidth(int64_t vocab) { return 2 * ((vocab + 1) / 2) + 4; }

/// Stores one reference row: logits [vocab] -> row [KldRowWidth(vocab)]. Returns the reference NLL of `token`.
double EncodeReferenceRowRef(const float* logits, int64_t vocab, int64_t token, uint16_t* row);

/// Running sums over the scored tokens (llama.cpp's kl_divergence_result).
struct KldSums {
  double sum_nll = 0, sum_nll2 = 0;            // the model's NLL of the correct token
  double sum_nll_base = 0, sum_nll_base2 = 0;  // the reference's (from its stored row)
  double sum_nll_nll_base = 0;
  double sum_kld = 0, sum_kld2 = 0;
  double sum_p_diff = 0, sum_p_diff2 = 0, sum_p_diff4 = 0;
  float max_p_diff = 0;
  int64_t n_same_top = 0;
  int64_t count = 0;
};

struct KldToken {
  double kld = 0;
  float p_diff = 0;
};

/// One scored token: the model's logits [vocab] against the reference's stored row; adds to `sums`.
KldToken ScoreTokenRef(const float* logits, int64_t vocab, const uint16_t* row, int64_t token, KldSums& sums);

struct MeanAndError {
  double value = 0;
  double error = 0;  // standard error
};

/// What `llama-perplexity --kl-divergence` prints, as numbers (probabilities as fractions, not percent).
struct KldSummary {
  int64_t tokens = 0;  // tokens scored
  MeanAndError ppl;        // exp(mean NLL) of the model
  MeanAndError ppl_base;   // of the reference (from the stored rows)
  MeanAndError ln_ppl_ratio;
  MeanAndError kld;        // mean KLD
  double kld_median = 0, kld_p90 = 0, kld_p95 = 0, kld_p99 = 0, kld_p999 = 0, kld_max = 0, kld_min = 0;
  MeanAndError same_top;   // top-1 agreement
  MeanAndError p_diff;     // mean Δp of the correct token
  double p_diff_median = 0, p_diff_max = 0, p_diff_min = 0;
  MeanAndError p_diff_rms;
};

/// The summary of the sums and every scored token's KLD and Δp (sorted here; any order in).
KldSummary SummarizeKld(const KldSums& sums, std::vector<float> kld_values, std::vector<float> p_diff_values);

/// llama.cpp's percentile of sorted values: linear between the two neighbours of fraction * (n - 1).
float SortedPercentile(const std::vector<float>& sorted, float fraction);

}  // namespace quark::eval
