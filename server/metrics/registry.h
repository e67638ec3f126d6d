// Counters, gauges and histograms with labels, rendered in the Prometheus text format 0.0.4.
// (prometheus-cpp is not packaged on Debian bookworm; this is the small part quarkd needs.)
#pragma once

#include <atomic>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"

namespace quark::server::metrics {

/// Monotonic; thread-safe.
class Counter {
 public:
  void Increment(double amount = 1.0);  // negative amounts are ignored: counters never go down
  double Value() const { return value_.load(std::memory_order_relaxed); }

 private:
  std::atomic<double> value_{0.0};
};

/// Goes up and down; thread-safe.
class Gauge {
 public:
  void Set(double value) { value_.store(value, std::memory_order_relaxed); }
  void Add(double amount);
  double Value() const { return value_.load(std::memory_order_relaxed); }

 private:
  std::atomic<double> value_{0.0};
};

/// Cumulative buckets with upper bounds (ascending; +Inf is implicit); thread-safe.
class Histogram {
 public:
  explicit Histogram(std::vector<double> upper_bounds);
  void Observe(double value);
  struct Snapshot {
    std::vector<double> upper_bounds;
    std::vector<uint64_t> cumulative_counts;  // per bound, then +Inf (= count)
    double sum = 0;
    uint64_t count = 0;
  };
  Snapshot Take() const;

 private:
  const std::vector<double> upper_bounds_;
  mutable absl::Mutex mu_;
  std::vector<uint64_t> bucket_counts_ ABSL_GUARDED_BY(mu_);  // non-cumulative, last = +Inf
  double sum_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t count_ ABSL_GUARDED_BY(mu_) = 0;
};

/// Default latency buckets in seconds: 1 ms .. 10 s.
std::vector<double> LatencyBuckets();
/// Buckets for whole jobs and phases in seconds: 1 s .. 24 h.
std::vector<double> JobDurationBuckets();

/// One metric name with its label names; children are created on first use of a label-value tuple.
template <typename T>
class Family {
 public:
  Family(std::string name, std::string help, std::vector<std::string> label_names, std::vector<double> bounds = {})
      : name_(std::move(name)), help_(std::move(help)), label_names_(std::move(label_names)),
        bounds_(std::move(bounds)) {}
  /// The child for these label values (in label-name order; missing values are empty strings).
  T& WithLabels(std::vector<std::string> values);
  const std::string& name() const { return name_; }
  const std::string& help() const { return help_; }
  const std::vector<std::string>& label_names() const { return label_names_; }
  /// A copy of the children's label values and pointers (children live as long as the family).
  std::vector<std::pair<std::vector<std::string>, const T*>> Children() const;

 private:
  const std::string name_, help_;
  const std::vector<std::string> label_names_;
  const std::vector<double> bounds_;
  mutable absl::Mutex mu_;
  std::map<std::vector<std::string>, std::unique_ptr<T>> children_ ABSL_GUARDED_BY(mu_);
};

using CounterFamily = Family<Counter>;
using GaugeFamily = Family<Gauge>;
using HistogramFamily = Family<Histogram>;

/// Owns families in registration order; Render() writes the whole exposition. Thread-safe.
class Registry {
 public:
  /// Names must be valid Prometheus names (counters end in "_total"); a duplicate name returns the
  /// existing family of that kind.
  CounterFamily& AddCounter(const std::string& name, const std::string& help, std::vector<std::string> labels = {});
  GaugeFamily& AddGauge(const std::string& name, const std::string& help, std::vector<std::string> labels = {});
  HistogramFamily& AddHistogram(const std::string& name, const std::string& help, std::vector<std::string> labels,
                                std::vector<double> upper_bounds);
  std::string Render() const;

 private:
  mutable absl::Mutex mu_;
  std::vector<std::string> order_ ABSL_GUARDED_BY(mu_);
  std::map<std::string, std::unique_ptr<CounterFamily>> counters_ ABSL_GUARDED_BY(mu_);
  std::map<std::string, std::unique_ptr<GaugeFamily>> gauges_ ABSL_GUARDED_BY(mu_);
  std::map<std::string, std::unique_ptr<HistogramFamily>> histograms_ ABSL_GUARDED_BY(mu_);
};

}  // namespace quark::server::metrics
