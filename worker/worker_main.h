// quark-worker's command line, shared by the real executable (with the engine pipeline) and torch-free test
// builds (test modes only).
//   quark-worker --server HOST:PORT [--worker-id ID] [--slots N] [--devices cpu,cuda:0] [--data-dir DIR]
//                [--allowed-roots DIR[,DIR]] [--cache-max-gb G] [--test-mode noop|sleep:SECONDS]
//                [--lease-wait-ms MS] [--log-format text|json] [--log-level LEVEL]
// Every flag also reads QUARK_WORKER_<FLAG> (QUARK_WORKER_SERVER, QUARK_WORKER_ID, QUARK_WORKER_DATA_DIR, ...).
// S3 settings come from AWS_* variables or ~/.aws files (worker/storage/s3_config.h).
#pragma once

#include <functional>
#include <memory>
#include <string>

#include "absl/status/status.h"

#include "quark/v1/worker.pb.h"
#include "worker/quantize_pipeline.h"

namespace quark::worker {

/// Makes the pipeline for real jobs; an empty factory means only --test-mode works.
using PipelineFactory = std::function<std::shared_ptr<QuantizePipeline>()>;

/// Measures the worker's throughputs at start in its data folder (throughput_probe.h); empty = none measured.
using ThroughputProbe = std::function<quark::v1::internal::WorkerThroughput(const std::string& data_dir)>;

/// Checks that this process can use one announced device ("cpu", "cuda:0"); an error names it (engine builds pass
/// runtime::ResolveDevice).
using DeviceCheck = std::function<absl::Status(const std::string& device)>;

/// Parses flags, builds storage and the runner, runs the agent until SIGTERM/SIGINT. Exit codes: 0 after a
/// signal, 1 when quarkd refused the registration, 2 for bad flags or settings. `probe` runs once before the
/// registration unless --skip-throughput-probe or a --test-mode (which runs no engine) is given. `check_device`
/// vets every --devices entry before anything starts (a worker never announces a GPU it cannot use); test modes,
/// which run no engine, announce what they are told.
int WorkerMain(int argc, char** argv, const PipelineFactory& pipeline, const ThroughputProbe& probe = {},
               const DeviceCheck& check_device = {});

}  // namespace quark::worker
