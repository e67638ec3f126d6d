#include "core/eval/kld_stats.h"

#include <algorithm>
#include <cmath>
#include <cstring>

namespace quark::eval {
namespace {

// llama.cpp's mean_and_uncertainty: the mean and sqrt(variance / (n - 1)), the latter 0 for n <= 10.
MeanAndError MeanAndUncertainty(double sum, double sum2, int64_t count) {
  if (count < 1) return {};
  const double f = sum / static_cast<double>(count);
  double df = sum2 / static_cast<double>(count) - f * f;
  df = df > 0 && count > 10 ? std::sqrt(df / static_cast<double>(count - 1)) : 0.;
  return {f, df};
}

double Covariance(double suma, double sumb, double sumab, int64_t count) {
  if (count < 10) return 0.0;
  const double n = static_cast<double>(count);
  return (sumab / n - (suma / n) * (sumb / n)) / (n - 1);
}

float SortedMedian(const std::vector<float>& v) {
  const size_t n = v.size();
  return n % 2 == 0 ? 0.5f * (v[n / 2] + v[n / 2 - 1]) : v[n / 2];
}

}  // namespace

double EncodeReferenceRowRef(const float* logits, int64_t vocab, int64_t token, uint16_t* row) {
  float max_logit = logits[0];
  float min_logit = logits[0];
  for (int64_t i = 1; i < vocab; ++i) {
    max_logit = std::max(max_logit, logits[i]);
    min_logit = std::min(min_logit, logits[i]);
  }
  min_logit = std::max(min_logit, max_logit - 16);
  double sum_exp = 0.0;
  for (int64_t i = 0; i < vocab; ++i) sum_exp += std::exp(logits[i] - max_logit);
  const float log_sum_exp = static_cast<float>(std::log(sum_exp));
  const float min_log_prob = min_logit - max_logit - log_sum_exp;
  const float scale = (max_logit - min_logit) / 65535.f;
  std::memcpy(row, &scale, sizeof(float));
  std::memcpy(row + 2, &min_log_prob, sizeof(float));
  uint16_t* values = row + 4;
  if (scale != 0) {
    const float inv_scale = 1 / scale;
    // lrintf rounds half to even, as llama.cpp's nearest_int (the 1.5 * 2^23 trick) does.
    for (int64_t i = 0; i < vocab; ++i) {
      values[i] = logits[i] > min_logit ? static_cast<uint16_t>(std::lrintf(inv_scale * (logits[i] - min_logit))) : 0;
    }
  } else {
    std::memset(values, 0, static_cast<size_t>(vocab) * sizeof(uint16_t));
  }
  return max_logit + log_sum_exp - logits[token];
}

KldToken ScoreTokenRef(const float* logits, int64_t vocab, const uint16_t* row, int64_t token, KldSums& sums) {
  float max_logit = logits[0];
  int64_t imax = 0;
  for (int64_t i = 1; i < vocab; ++i) {
    if (logits[i] > max_logit) {
      max_logit = logits[i];
      imax = i;
    }
  }
  double sum_exp = 0.0;
  for (int64_t i = 0; i < vocab; ++i) sum_exp += std::exp(logits[i] - max_logit);
  const float log_sum_exp = static_cast<float>(std::log(sum_exp));
  float scale = 0, min_log_prob = 0;
  std::memcpy(&scale, row, sizeof(float));
  std::memcpy(&min_log_prob, row + 2, sizeof(float));
  const uint16_t* base = row + 4;

  const float nll = max_logit + log_sum_exp - logits[token];
  sums.sum_nll += nll;
  sums.sum_nll2 += nll * nll;
  const float nll_base = -(scale * base[token] + min_log_prob);
  sums.sum_nll_base += nll_base;
  sums.sum_nll_base2 += nll_base * nll_base;
  sums.sum_nll_nll_base += nll * nll_base;

  max_logit += log_sum_exp;
  double sum = 0;
  int64_t imax_base = -1;
  float p_log_base_max = 0;
  for (int64_t i = 0; i < vocab; ++i) {
    const float p_log_base = scale * base[i] + min_log_prob;
    if (i == 0 || p_log_base > p_log_base_max) {
      p_log_base_max = p_log_base;
      imax_base = i;
    }
    if (p_log_base > -16.f) {
      const float p_base = std::exp(p_log_base);
      sum += p_base * (p_log_base - logits[i] + max_logit);
    }
  }
  sums.sum_kld += sum;
  sums.sum_kld2 += sum * sum;
  ++sums.count;
  if (imax == imax_base) ++sums.n_same_top;

  const float p_diff = std::exp(-nll) - std::exp(-nll_base);
  sums.sum_p_diff += p_diff;
  const double p_diff2 = p_diff * p_diff;
  sums.sum_p_diff2 += p_diff2;
  sums.sum_p_diff4 += p_diff2 * p_diff2;
  sums.max_p_diff = std::max(sums.max_p_diff, std::fabs(p_diff));
  return {sum, p_diff};
}

float SortedPercentile(const std::vector<float>& values, float fraction) {
  if (fraction <= 0) return values.front();
  if (fraction >= 1) return values.back();
  float p = fraction * static_cast<float>(values.size() - 1);
  const size_t ip = static_cast<size_t>(p);
  p -= static_cast<float>(ip);
  return (1 - p) * values[ip] + p * values[std::min(ip + 1, values.size() - 1)];
}

KldSummary SummarizeKld(const KldSums& sums, std::vector<float> kld_values, std::vector<float> p_diff_values) {
  KldSummary s;
  s.tokens = sums.count;
  if (sums.count == 0 || kld_values.empty() || p_diff_values.empty()) return s;
  std::sort(kld_values.begin(), kld_values.end());
  std::sort(p_diff_values.begin(), p_diff_values.end());
  const MeanAndError log_ppl = MeanAndUncertainty(sums.sum_nll, sums.sum_nll2, sums.count);
  s.ppl = {std::exp(log_ppl.value), std::exp(log_ppl.value) * log_ppl.error};
  const MeanAndError log_ppl_base = MeanAndUncertainty(sums.sum_nll_base, sums.sum_nll_base2, sums.count);
  s.ppl_base = {std::exp(log_ppl_base.value), std::exp(log_ppl_base.value) * log_ppl_base.error};
  const double cov = Covariance(sums.sum_nll, sums.sum_nll_base, sums.sum_nll_nll_base, sums.count);
  s.ln_ppl_ratio = {log_ppl.value - log_ppl_base.value,
                    std::sqrt(log_ppl.error * log_ppl.error + log_ppl_base.error * log_ppl_base.error - 2.0 * cov)};
  s.kld = MeanAndUncertainty(sums.sum_kld, sums.sum_kld2, sums.count);
  s.kld_median = SortedMedian(kld_values);
  s.kld_p90 = SortedPercentile(kld_values, 0.900f);
  s.kld_p95 = SortedPercentile(kld_values, 0.950f);
  s.kld_p99 = SortedPercentile(kld_values, 0.990f);
  s.kld_p999 = SortedPercentile(kld_values, 0.999f);
  s.kld_max = kld_values.back();
  s.kld_min = kld_values.front();
  const double same_top = static_cast<double>(sums.n_same_top) / static_cast<double>(sums.count);
  s.same_top = {same_top,
                sums.count > 1 ? std::sqrt(same_top * (1.0 - same_top) / static_cast<double>(sums.count - 1)) : 0.0};
  s.p_diff = MeanAndUncertainty(sums.sum_p_diff, sums.sum_p_diff2, sums.count);
  s.p_diff_median = SortedMedian(p_diff_values);
  s.p_diff_max = p_diff_values.back();
  s.p_diff_min = p_diff_values.front();
  const MeanAndError mse = MeanAndUncertainty(sums.sum_p_diff2, sums.sum_p_diff4, sums.count);
  const double rms = std::sqrt(mse.value);
  s.p_diff_rms = {rms, rms > 0 ? 0.5 / rms * mse.error : 0.0};
  return s;
}

}  // namespace quark::eval
