#include "core/numerics/histogram_observer.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "core/numerics/fake_quant.h"

namespace quark {
namespace {

// Finite values of x as float32, |x| when `absolute`, zeros dropped when `skip_zeros`. The histogram is counted on
// the host: a batch on a device is copied over (a copy per calibration batch, for these observers alone).
std::vector<float> Values(const at::Tensor& x, bool absolute, bool skip_zeros) {
  const at::Tensor f = x.to(at::kCPU, at::kFloat).contiguous();
  const float* p = f.data_ptr<float>();
  std::vector<float> out;
  out.reserve(static_cast<size_t>(f.numel()));
  for (int64_t i = 0; i < f.numel(); ++i) {
    const float v = absolute ? std::fabs(p[i]) : p[i];
    if (!std::isfinite(v) || (skip_zeros && v == 0.0f)) continue;
    out.push_back(v);
  }
  return out;
}

at::Tensor Scalar(double v, at::ScalarType dtype) { return at::scalar_tensor(v, at::kFloat).to(dtype); }

absl::Status CheckBatch(const at::Tensor& x, at::ScalarType* dtype, int64_t batches) {
  if (auto st = CheckInput(x); !st.ok()) return st;
  if (batches > 0 && x.scalar_type() != *dtype) {
    return absl::InvalidArgumentError(absl::StrCat("input: dtype ", c10::toString(x.scalar_type()),
                                                   " differs from earlier batches (", c10::toString(*dtype), ")"));
  }
  *dtype = x.scalar_type();
  return absl::OkStatus();
}

}  // namespace

int GrowingHistogram::BinOf(double v) const {
  if (hi_ <= lo_) return bins() - 1;
  const auto b = static_cast<int64_t>(std::floor((v - lo_) * bins() / (hi_ - lo_)));
  return static_cast<int>(std::clamp<int64_t>(b, 0, bins() - 1));
}

void GrowingHistogram::Regrow(double lo, double hi) {
  std::vector<int64_t> old = std::move(counts_);
  const double old_lo = lo_;
  const double old_w = (hi_ - lo_) / static_cast<double>(old.size());
  counts_.assign(old.size(), 0);
  lo_ = lo;
  hi_ = hi;
  for (size_t i = 0; i < old.size(); ++i) {
    if (old[i] != 0) counts_[BinOf(old_lo + (static_cast<double>(i) + 0.5) * old_w)] += old[i];
  }
}

void GrowingHistogram::Add(const std::vector<float>& values, float lo, float hi) {
  if (values.empty()) return;
  if (total_ == 0) {
    lo_ = lo;
    hi_ = hi;
  } else if (lo < lo_ || hi > hi_) {
    Regrow(std::min<double>(lo, lo_), std::max<double>(hi, hi_));
  }
  for (float v : values) ++counts_[BinOf(v)];
  total_ += static_cast<int64_t>(values.size());
}

double GrowingHistogram::FirstEdgeReaching(double q) const {
  int64_t cum = 0;
  for (int i = 0; i < bins(); ++i) {
    cum += counts_[i];
    if (static_cast<double>(cum) / static_cast<double>(total_) >= q) return lo_ + i * BinWidth();
  }
  return hi_;
}

absl::Status PercentileObserver::Observe(const at::Tensor& x) {
  if (auto st = CheckBatch(x, &dtype_, batches_); !st.ok()) return st;
  const std::vector<float> v = Values(x, spec_.symmetric, /*skip_zeros=*/true);
  if (!v.empty()) {
    const auto [mn, mx] = std::minmax_element(v.begin(), v.end());
    hist_.Add(v, spec_.symmetric ? 0.0f : *mn, *mx);
  }
  ++batches_;
  return absl::OkStatus();
}

absl::StatusOr<std::pair<at::Tensor, at::Tensor>> PercentileObserver::Range() const {
  if (batches_ == 0) return absl::FailedPreconditionError("observer: no calibration batch observed");
  if (hist_.empty()) return std::pair{Scalar(0, dtype_), Scalar(0, dtype_)};
  const double p = spec_.percentile / 100.0;
  if (spec_.symmetric) return std::pair{Scalar(0, dtype_), Scalar(hist_.FirstEdgeReaching(p), dtype_)};
  const double tail = (1.0 - p) / 2.0;
  return std::pair{Scalar(hist_.FirstEdgeReaching(tail), dtype_), Scalar(hist_.FirstEdgeReaching(1.0 - tail), dtype_)};
}

absl::StatusOr<QuantParams> PercentileObserver::ComputeParams() const {
  auto range = Range();
  if (!range.ok()) return range.status();
  return ComputeQuantParams(range->first, range->second, spec_);
}

absl::Status MseObserver::Observe(const at::Tensor& x) {
  if (auto st = CheckBatch(x, &dtype_, batches_); !st.ok()) return st;
  const std::vector<float> v = Values(x, /*absolute=*/true, /*skip_zeros=*/false);
  if (!v.empty()) hist_.Add(v, 0.0f, *std::max_element(v.begin(), v.end()));
  saw_negative_ = saw_negative_ || x.lt(0).any().item<bool>();
  ++batches_;
  return absl::OkStatus();
}

absl::StatusOr<std::pair<at::Tensor, at::Tensor>> MseObserver::Range() const {
  if (batches_ == 0) return absl::FailedPreconditionError("observer: no calibration batch observed");
  if (hist_.empty() || hist_.hi() == 0.0) return std::pair{Scalar(0, dtype_), Scalar(0, dtype_)};
  const double w = hist_.BinWidth();
  at::Tensor centres = (at::arange(kBins, at::kDouble) + 0.5).mul(w).to(dtype_);
  at::Tensor counts = at::from_blob(const_cast<int64_t*>(hist_.counts().data()), {kBins}, at::kLong).to(at::kDouble);
  double best_loss = INFINITY;
  double best = 0.0;
  for (int k = kBins - 3; k < kBins; ++k) {
    const double c = centres[k].item<double>();
    const at::Tensor hi = Scalar(c, dtype_);
    const at::Tensor lo = spec_.symmetric || saw_negative_ ? Scalar(-c, dtype_) : Scalar(0, dtype_);
    auto params = ComputeQuantParams(lo, hi, spec_);
    if (!params.ok()) return params.status();
    auto q = FakeQuantize(centres, spec_, *params, TensorRole::kActivation);
    if (!q.ok()) return q.status();
    const double loss = (counts * (q->to(at::kDouble) - centres.to(at::kDouble)).pow(2)).sum().item<double>();
    if (loss < best_loss) {
      best_loss = loss;
      best = c;
    }
  }
  const bool negative_side = spec_.symmetric || saw_negative_;
  return std::pair{Scalar(negative_side ? -best : 0.0, dtype_), Scalar(best, dtype_)};
}

absl::StatusOr<QuantParams> MseObserver::ComputeParams() const {
  auto range = Range();
  if (!range.ok()) return range.status();
  return ComputeQuantParams(range->first, range->second, spec_);
}

}  // namespace quark
