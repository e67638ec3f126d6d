#include "server/metrics/registry.h"

#include <algorithm>
#include <type_traits>

#include "server/metrics/text_format.h"

namespace quark::server::metrics {
namespace {

void AtomicAdd(std::atomic<double>& target, double amount) {
  double current = target.load(std::memory_order_relaxed);
  while (!target.compare_exchange_weak(current, current + amount, std::memory_order_relaxed)) {
  }
}

void RenderHeader(const std::string& name, const std::string& help, const char* type, std::string* out) {
  out->append("# HELP ").append(name).append(" ").append(EscapeHelp(help)).append("\n");
  out->append("# TYPE ").append(name).append(" ").append(type).append("\n");
}

template <typename T>
void RenderSimple(const Family<T>& family, const char* type, std::string* out) {
  RenderHeader(family.name(), family.help(), type, out);
  for (const auto& [values, child] : family.Children()) {
    out->append(family.name()).append(FormatLabels(family.label_names(), values)).append(" ");
    out->append(FormatValue(child->Value())).append("\n");
  }
}

void RenderHistogram(const HistogramFamily& family, std::string* out) {
  RenderHeader(family.name(), family.help(), "histogram", out);
  std::vector<std::string> names = family.label_names();
  names.push_back("le");
  for (const auto& [values, child] : family.Children()) {
    Histogram::Snapshot snap = child->Take();
    std::vector<std::string> with_le = values;
    with_le.resize(family.label_names().size());
    with_le.emplace_back();
    for (size_t i = 0; i <= snap.upper_bounds.size(); ++i) {
      with_le.back() = i < snap.upper_bounds.size() ? FormatValue(snap.upper_bounds[i]) : "+Inf";
      out->append(family.name()).append("_bucket").append(FormatLabels(names, with_le)).append(" ");
      out->append(std::to_string(snap.cumulative_counts[i])).append("\n");
    }
    std::string labels = FormatLabels(family.label_names(), values);
    out->append(family.name()).append("_sum").append(labels).append(" ").append(FormatValue(snap.sum)).append("\n");
    out->append(family.name()).append("_count").append(labels).append(" ");
    out->append(std::to_string(snap.count)).append("\n");
  }
}

}  // namespace

void Counter::Increment(double amount) {
  if (amount > 0) AtomicAdd(value_, amount);
}

void Gauge::Add(double amount) { AtomicAdd(value_, amount); }

Histogram::Histogram(std::vector<double> upper_bounds)
    : upper_bounds_(std::move(upper_bounds)), bucket_counts_(upper_bounds_.size() + 1, 0) {}

void Histogram::Observe(double value) {
  size_t bucket = std::lower_bound(upper_bounds_.begin(), upper_bounds_.end(), value) - upper_bounds_.begin();
  absl::MutexLock lock(&mu_);
  ++bucket_counts_[bucket];
  sum_ += value;
  ++count_;
}

Histogram::Snapshot Histogram::Take() const {
  Snapshot snap;
  snap.upper_bounds = upper_bounds_;
  absl::MutexLock lock(&mu_);
  uint64_t running = 0;
  for (uint64_t c : bucket_counts_) {
    running += c;
    snap.cumulative_counts.push_back(running);
  }
  snap.sum = sum_;
  snap.count = count_;
  return snap;
}

std::vector<double> LatencyBuckets() {
  return {0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10};
}

std::vector<double> JobDurationBuckets() {
  return {1, 5, 15, 30, 60, 120, 300, 600, 1200, 1800, 3600, 7200, 14400, 43200, 86400};
}

template <typename T>
T& Family<T>::WithLabels(std::vector<std::string> values) {
  values.resize(label_names_.size());
  absl::MutexLock lock(&mu_);
  std::unique_ptr<T>& child = children_[values];
  if (!child) {
    if constexpr (std::is_same_v<T, Histogram>) {
      child = std::make_unique<Histogram>(bounds_);
    } else {
      child = std::make_unique<T>();
    }
  }
  return *child;
}

template <typename T>
std::vector<std::pair<std::vector<std::string>, const T*>> Family<T>::Children() const {
  absl::MutexLock lock(&mu_);
  std::vector<std::pair<std::vector<std::string>, const T*>> out;
  for (const auto& [values, child] : children_) out.emplace_back(values, child.get());
  return out;
}

template class Family<Counter>;
template class Family<Gauge>;
template class Family<Histogram>;

CounterFamily& Registry::AddCounter(const std::string& name, const std::string& help,
                                    std::vector<std::string> labels) {
  absl::MutexLock lock(&mu_);
  auto& family = counters_[name];
  if (!family) {
    family = std::make_unique<CounterFamily>(name, help, std::move(labels));
    order_.push_back(name);
  }
  return *family;
}

GaugeFamily& Registry::AddGauge(const std::string& name, const std::string& help, std::vector<std::string> labels) {
  absl::MutexLock lock(&mu_);
  auto& family = gauges_[name];
  if (!family) {
    family = std::make_unique<GaugeFamily>(name, help, std::move(labels));
    order_.push_back(name);
  }
  return *family;
}

HistogramFamily& Registry::AddHistogram(const std::string& name, const std::string& help,
                                        std::vector<std::string> labels, std::vector<double> upper_bounds) {
  std::sort(upper_bounds.begin(), upper_bounds.end());
  absl::MutexLock lock(&mu_);
  auto& family = histograms_[name];
  if (!family) {
    family = std::make_unique<HistogramFamily>(name, help, std::move(labels), std::move(upper_bounds));
    order_.push_back(name);
  }
  return *family;
}

std::string Registry::Render() const {
  absl::MutexLock lock(&mu_);
  std::string out;
  for (const std::string& name : order_) {
    if (auto it = counters_.find(name); it != counters_.end()) RenderSimple(*it->second, "counter", &out);
    if (auto it = gauges_.find(name); it != gauges_.end()) RenderSimple(*it->second, "gauge", &out);
    if (auto it = histograms_.find(name); it != histograms_.end()) RenderHistogram(*it->second, &out);
  }
  return out;
}

}  // namespace quark::server::metrics
