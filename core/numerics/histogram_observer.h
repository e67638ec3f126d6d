// Histogram observers for per-tensor calibration (numerics.md, "Observers"):
//  - Percentile: 4200 bins, zeros skipped; symmetric histograms |x| over [0, max] and clips at the left edge of the
//    first bin where the CDF reaches p (min 0); asymmetric histograms x over [min, max] and cuts two tails of
//    (100 - p) / 200 each (left edges of the first bins reaching t and 1 - t).
//  - MSE: |x| in 2048 bins over [0, max]; candidates are the centres of bins 2045..2047; keeps the one with the
//    least sum(count * (Q(centre) - centre)^2) over the bins.
// Across batches the range only grows: when it does, each old bin's count moves to the new bin holding its centre.
#pragma once

#include <vector>

#include "core/numerics/observer.h"

namespace quark {

/// A fixed-bin-count histogram over [lo, hi] whose range grows to cover new data.
class GrowingHistogram {
 public:
  explicit GrowingHistogram(int bins) : counts_(bins, 0) {}

  /// Adds values (zeros too unless skipped by the caller); lo <= every value <= hi after the call.
  void Add(const std::vector<float>& values, float lo, float hi);

  int bins() const { return static_cast<int>(counts_.size()); }
  double lo() const { return lo_; }
  double hi() const { return hi_; }
  double BinWidth() const { return (hi_ - lo_) / bins(); }
  const std::vector<int64_t>& counts() const { return counts_; }
  int64_t total() const { return total_; }
  bool empty() const { return total_ == 0; }

  /// Bin of a value: floor((v - lo) * bins / (hi - lo)), the maximum in the last bin.
  int BinOf(double v) const;
  /// Left edge of the first bin whose CDF reaches fraction q (in [0, 1]).
  double FirstEdgeReaching(double q) const;

 private:
  void Regrow(double lo, double hi);

  std::vector<int64_t> counts_;
  double lo_ = 0.0;
  double hi_ = 0.0;
  int64_t total_ = 0;
};

class PercentileObserver : public Observer {
 public:
  static constexpr int kBins = 4200;
  explicit PercentileObserver(const QuantSpec& spec) : spec_(spec), hist_(kBins) {}

  absl::Status Observe(const at::Tensor& x) override;
  absl::StatusOr<QuantParams> ComputeParams() const override;
  absl::StatusOr<std::pair<at::Tensor, at::Tensor>> Range() const override;

 private:
  QuantSpec spec_;
  GrowingHistogram hist_;
  at::ScalarType dtype_ = at::kFloat;
};

class MseObserver : public Observer {
 public:
  static constexpr int kBins = 2048;
  explicit MseObserver(const QuantSpec& spec) : spec_(spec), hist_(kBins) {}

  absl::Status Observe(const at::Tensor& x) override;
  absl::StatusOr<QuantParams> ComputeParams() const override;
  absl::StatusOr<std::pair<at::Tensor, at::Tensor>> Range() const override;

 private:
  QuantSpec spec_;
  GrowingHistogram hist_;
  at::ScalarType dtype_ = at::kFloat;
  bool saw_negative_ = false;
};

}  // namespace quark
