#include "server/scheduler/worker_fit.h"

namespace quark::server {

int GpuDeviceCount(const google::protobuf::RepeatedPtrField<std::string>& devices) {
  int gpus = 0;
  for (const std::string& device : devices) {
    if (device.rfind("cuda", 0) == 0 || device.rfind("hip", 0) == 0) ++gpus;
  }
  return gpus;
}

bool WorkerFitsJob(int worker_gpus, const quark::v1::JobSpec& spec) { return spec.resources().gpus() <= worker_gpus; }

}  // namespace quark::server
