#include "server/metrics/server_metrics.h"

namespace quark::server {

using metrics::JobDurationBuckets;
using metrics::LatencyBuckets;

ServerMetrics::ServerMetrics(metrics::Registry* r)
    : jobs(r->AddGauge("quarkd_jobs", "Jobs in the store by state and preset.", {"state", "preset"})),
      jobs_submitted(r->AddCounter("quarkd_jobs_submitted_total", "Jobs accepted by SubmitJob.", {"preset"})),
      jobs_finished(r->AddCounter("quarkd_jobs_finished_total", "Jobs that reached a final state.",
                                  {"state", "preset"})),
      queue_depth(r->AddGauge("quarkd_queue_depth", "Jobs queued and waiting for a worker.").WithLabels({})),
      jobs_running(r->AddGauge("quarkd_jobs_running", "Jobs leased to a worker.").WithLabels({})),
      job_duration(r->AddHistogram("quarkd_job_duration_seconds", "Job run time from first start to final state.",
                                   {"state", "preset"}, JobDurationBuckets())),
      queue_wait(r->AddHistogram("quarkd_job_queue_wait_seconds", "Time from submission to first start.",
                                 {"preset"}, LatencyBuckets())),
      phase_duration(r->AddHistogram("quarkd_job_phase_duration_seconds",
                                     "Time spent in each phase of a job, as reported by workers.", {"phase"},
                                     JobDurationBuckets())),
      workers(r->AddGauge("quarkd_workers", "Registered workers.").WithLabels({})),
      workers_busy(r->AddGauge("quarkd_workers_busy", "Workers running at least one job.").WithLabels({})),
      uploaded_bytes(r->AddCounter("quarkd_uploaded_bytes_total", "Bytes of artifacts uploaded by finished jobs.")
                         .WithLabels({})),
      leases_lost(r->AddCounter("quarkd_leases_lost_total", "Leases taken back from workers.", {"reason"})),
      lease_memory_skips(r->AddCounter("quarkd_lease_memory_skips_total",
                                       "Queued jobs a lease passed over: the worker announced less host or GPU "
                                       "memory than the job's estimated peak.",
                                       {"resource"})),
      worker_restarts(r->AddCounter("quarkd_local_worker_restarts_total",
                                    "Local worker processes restarted after they exited.")
                          .WithLabels({})),
      grpc_requests(r->AddCounter("quarkd_grpc_requests_total", "gRPC requests handled, by method and status code.",
                                  {"method", "code"})),
      grpc_latency(r->AddHistogram("quarkd_grpc_request_duration_seconds",
                                   "gRPC request latency by method (streams and long polls: their whole life).",
                                   {"method"}, LatencyBuckets())),
      tenant_jobs(r->AddGauge("quarkd_tenant_jobs", "Queued and running jobs by tenant.", {"tenant", "state"})),
      tenant_jobs_submitted(
          r->AddCounter("quarkd_tenant_jobs_submitted_total", "Jobs accepted by SubmitJob by tenant.", {"tenant"})),
      tenant_jobs_finished(r->AddCounter("quarkd_tenant_jobs_finished_total",
                                         "Jobs that reached a final state by tenant.", {"tenant", "state"})),
      auth_denied(r->AddCounter("quarkd_auth_denied_total",
                                "Calls refused by authentication (UNAUTHENTICATED) or authorization "
                                "(PERMISSION_DENIED).",
                                {"code"})) {}

}  // namespace quark::server
