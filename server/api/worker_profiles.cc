#include "server/api/worker_profiles.h"

namespace quark::server {

estimate::Throughput ThroughputFromProto(const quark::v1::internal::WorkerThroughput& t) {
  estimate::Throughput rates = estimate::ReferenceThroughput();
  auto take = [](double measured, double& rate) {
    if (measured > 0) rate = measured;
  };
  if (t.threads() > 0) rates.threads = t.threads();
  take(t.gemm_gflops() * 1e9, rates.gemm_flops);
  take(t.cholesky_gflops() * 1e9, rates.cholesky_flops);
  take(t.fake_quant_bytes_per_s(), rates.fake_quant_bytes_per_s);
  take(t.float_codes_bytes_per_s(), rates.float_codes_bytes_per_s);
  take(t.disk_write_bytes_per_s(), rates.disk_write_bytes_per_s);
  take(t.disk_read_bytes_per_s(), rates.disk_read_bytes_per_s);
  rates.host_memory_bytes = t.host_memory_bytes() > 0 ? static_cast<uint64_t>(t.host_memory_bytes()) : 0;
  rates.gpu_memory_bytes = t.gpu_memory_bytes() > 0 ? static_cast<uint64_t>(t.gpu_memory_bytes()) : 0;
  rates.device = t.device() == "cuda" ? "cuda" : "cpu";
  return rates;
}

void WorkerProfiles::Register(const quark::v1::internal::RegisterRequest& request, absl::Time now) {
  WorkerProfile profile;
  profile.worker_id = request.worker_id();
  profile.devices.assign(request.devices().begin(), request.devices().end());
  profile.measured = request.has_throughput();
  profile.rates = ThroughputFromProto(request.throughput());
  profile.last_seen = now;
  absl::MutexLock lock(&mu_);
  for (auto it = profiles_.begin(); it != profiles_.end();) {  // workers gone for good (Slurm, scale to zero)
    it = now - it->second.last_seen > kProfileTtl ? profiles_.erase(it) : std::next(it);
  }
  profiles_[request.worker_id()] = std::move(profile);
}

void WorkerProfiles::Seen(const std::string& worker_id, absl::Time now) {
  absl::MutexLock lock(&mu_);
  auto it = profiles_.find(worker_id);
  if (it != profiles_.end()) it->second.last_seen = now;
}

std::vector<WorkerProfile> WorkerProfiles::Live(absl::Time now) const {
  std::vector<WorkerProfile> live;
  absl::MutexLock lock(&mu_);
  for (const auto& [id, profile] : profiles_) {
    if (now - profile.last_seen <= kProfileTtl) live.push_back(profile);
  }
  return live;
}

}  // namespace quark::server
