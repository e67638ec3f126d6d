// quarkd's own metrics, registered once on a Registry. Names follow Prometheus conventions: base units
// (seconds, bytes), "_total" on counters.
#pragma once

#include "server/metrics/registry.h"

namespace quark::server {

struct ServerMetrics {
  explicit ServerMetrics(metrics::Registry* registry);

  metrics::GaugeFamily& jobs;                 // quarkd_jobs{state,preset}: jobs in the store by state
  metrics::CounterFamily& jobs_submitted;     // quarkd_jobs_submitted_total{preset}
  metrics::CounterFamily& jobs_finished;      // quarkd_jobs_finished_total{state,preset}
  metrics::Gauge& queue_depth;                // quarkd_queue_depth
  metrics::Gauge& jobs_running;               // quarkd_jobs_running
  metrics::HistogramFamily& job_duration;     // quarkd_job_duration_seconds{state,preset}: first start to end
  metrics::HistogramFamily& queue_wait;       // quarkd_job_queue_wait_seconds{preset}: submit to first start
  metrics::HistogramFamily& phase_duration;   // quarkd_job_phase_duration_seconds{phase}
  metrics::Gauge& workers;                    // quarkd_workers: registered workers
  metrics::Gauge& workers_busy;               // quarkd_workers_busy: workers holding at least one lease
  metrics::Counter& uploaded_bytes;           // quarkd_uploaded_bytes_total: artifact bytes of finished jobs
  metrics::CounterFamily& leases_lost;        // quarkd_leases_lost_total{reason}
  /// quarkd_lease_memory_skips_total{resource}: queued jobs a worker's lease passed over because the worker announced
  /// less host or GPU memory than the job's estimated peak (worker_fit.h); counted at every such lease.
  metrics::CounterFamily& lease_memory_skips;
  metrics::Counter& worker_restarts;          // quarkd_local_worker_restarts_total
  metrics::CounterFamily& grpc_requests;      // quarkd_grpc_requests_total{method,code}
  metrics::HistogramFamily& grpc_latency;     // quarkd_grpc_request_duration_seconds{method}
  // Per tenant (only jobs with a tenant, i.e. with authentication on).
  metrics::GaugeFamily& tenant_jobs;              // quarkd_tenant_jobs{tenant,state}: queued and running
  metrics::CounterFamily& tenant_jobs_submitted;  // quarkd_tenant_jobs_submitted_total{tenant}
  metrics::CounterFamily& tenant_jobs_finished;   // quarkd_tenant_jobs_finished_total{tenant,state}
  metrics::CounterFamily& auth_denied;            // quarkd_auth_denied_total{code}: UNAUTHENTICATED, PERMISSION_DENIED
};

}  // namespace quark::server
