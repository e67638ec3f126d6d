// Which queued jobs a worker may lease: a job that asks for GPUs (JobSpec.resources.gpus) goes only to a worker that
// announced at least that many GPU devices at registration ("cuda:0", "hip:1"; "cpu" is none). A CPU worker that
// leased a GPU job would run it on the CPU at a fraction of the speed it was sized for, or fail it.
#pragma once

#include <string>

#include <google/protobuf/repeated_ptr_field.h>

#include "quark/v1/service.pb.h"

namespace quark::server {

/// The GPU devices among a worker's announced devices.
int GpuDeviceCount(const google::protobuf::RepeatedPtrField<std::string>& devices);

/// Whether a worker with `worker_gpus` GPUs may run a job of `spec`.
bool WorkerFitsJob(int worker_gpus, const quark::v1::JobSpec& spec);

}  // namespace quark::server
