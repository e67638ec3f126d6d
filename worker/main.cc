// quark-worker: runs quantization jobs leased from quarkd (flags: worker/worker_main.h).
#include "core/engine/engine_process.h"
#include "core/runtime/compute_device.h"
#include "worker/engine_pipeline.h"
#include "worker/throughput_probe.h"
#include "worker/worker_main.h"

int main(int argc, char** argv) {
  quark::StartEngineProcess(argc, argv, "QUARK_WORKER_DEVICES");
  return quark::worker::WorkerMain(
      argc, argv, [] { return quark::worker::MakeEnginePipeline(); }, quark::worker::MeasureThroughput,
      [](const std::string& device) { return quark::runtime::ResolveDevice(device, "--devices").status(); });
}
