// What confining a job to its tenant's roots costs the worker (#29): per job, the store is built (TenantObjectStore
// over the worker's store) and the model folder pinned; per input file, a read. Each is timed on the worker's own
// store and on the tenant-confined one over the same folder (a copy of a model folder inside a tenant root).
//   tenant_store_bench --model DIR [--rounds N]
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstdio>
#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "worker/storage/file_object_store.h"
#include "worker/storage/pinned_folder.h"
#include "worker/storage/routing_object_store.h"
#include "worker/storage/tenant_object_store.h"

namespace fs = std::filesystem;
using quark::storage::ObjectStore;

namespace {

// Median microseconds of `rounds` calls of `op` (after one warm-up call); exits on a failed call.
double MedianMicros(int rounds, const std::function<bool()>& op) {
  std::vector<double> times;
  if (!op()) std::exit(1);
  for (int i = 0; i < rounds; ++i) {
    auto start = std::chrono::steady_clock::now();
    bool ok = op();
    times.push_back(std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - start).count());
    if (!ok) std::exit(1);
  }
  std::sort(times.begin(), times.end());
  return times[times.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"tenant_store_bench: the cost of confining a job to its tenant's roots"};
  std::string model;
  int rounds = 200;
  app.add_option("--model", model, "A model folder (config.json, *.safetensors, tokenizer files)")->required();
  app.add_option("--rounds", rounds, "Timed calls per figure");
  CLI11_PARSE(app, argc, argv);

  const fs::path root = fs::temp_directory_path() / ("quark-tenant-bench-" + std::to_string(getpid()));
  const fs::path tenant_models = root / "tenants/a/models";
  fs::create_directories(tenant_models / "m");
  for (const auto& entry : fs::directory_iterator(model)) {
    if (entry.is_regular_file()) fs::copy_file(entry.path(), tenant_models / "m" / entry.path().filename());
  }
  const std::string model_uri = "file://" + (tenant_models / "m").string();
  const std::string config_uri = model_uri + "/config.json";
  auto worker = std::make_shared<quark::storage::RoutingObjectStore>(
      std::make_unique<quark::storage::FileObjectStore>(std::vector<fs::path>{root}), nullptr);
  quark::storage::TenantRoots roots{{"file://" + tenant_models.string()}, {"file://" + (root / "tenants/a/out").string()}};
  quark::storage::TenantObjectStore tenant(worker, roots, {root});

  int view = 0;
  auto pin = [&](ObjectStore& store) {
    return [&store, &view, &root, &model_uri] {
      return store.PinFolder(model_uri, root / "views" / std::to_string(view++)).ok();
    };
  };
  auto read = [&](ObjectStore& store) { return [&store, &config_uri] { return store.GetBytes(config_uri).ok(); }; };
  const double build = MedianMicros(rounds, [&] {
    quark::storage::TenantObjectStore made(worker, roots, {root});
    return made.read_folders().size() == 2;  // the model root and the output prefix
  });
  std::printf("| operation | worker's store (us) | tenant-confined store (us) |\n|---|---|---|\n");
  std::printf("| build the job's store | - | %.1f |\n", build);
  std::printf("| pin the model folder (%d files) | %.1f | %.1f |\n",
              static_cast<int>(std::distance(fs::directory_iterator(tenant_models / "m"), fs::directory_iterator())),
              MedianMicros(rounds, pin(*worker)), MedianMicros(rounds, pin(tenant)));
  std::printf("| read config.json | %.1f | %.1f |\n", MedianMicros(rounds, read(*worker)),
              MedianMicros(rounds, read(tenant)));
  std::error_code ec;
  fs::remove_all(root, ec);
  return 0;
}
