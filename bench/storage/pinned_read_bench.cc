// What descriptor-based reading costs a job's model read (#29's Measure): the worker pins a file:// model folder
// (every file opened once, a private view of /proc/self/fd/N links) and the engine maps the files through that
// view; before, the engine mapped them by name. Per round, alternating, the model's *.safetensors files are mapped
// and every page read (one byte per 4 KiB, each 64 MiB chunk released after reading, as the layer streamer keeps
// RSS low) (a) by name and (b) through a fresh pin's view, the pin's time included. Prints each round and the
// medians in seconds.
//   pinned_read_bench --model DIR [--rounds N]
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "core/checkpoint/mapped_file.h"
#include "worker/storage/file_object_store.h"
#include "worker/storage/pinned_folder.h"

namespace fs = std::filesystem;

namespace {

using Clock = std::chrono::steady_clock;

double Seconds(Clock::time_point since) { return std::chrono::duration<double>(Clock::now() - since).count(); }

// Maps each *.safetensors under `dir` and reads every page; returns the bytes read, or -1 on an error.
int64_t ReadAll(const fs::path& dir, uint64_t* checksum) {
  constexpr uint64_t kChunk = 64ull << 20;
  int64_t total = 0;
  std::vector<fs::path> files;
  for (const auto& entry : fs::directory_iterator(dir)) {
    if (entry.path().extension() == ".safetensors") files.push_back(entry.path());
  }
  std::sort(files.begin(), files.end());
  for (const fs::path& file : files) {
    auto mapped = quark::checkpoint::MappedFile::Open(file.string());
    if (!mapped.ok()) {
      std::fprintf(stderr, "%s\n", mapped.status().ToString().c_str());
      return -1;
    }
    const uint8_t* data = (*mapped)->data();
    for (uint64_t offset = 0; offset < (*mapped)->size(); offset += kChunk) {
      const uint64_t end = std::min<uint64_t>((*mapped)->size(), offset + kChunk);
      (*mapped)->WillNeed(offset, end - offset);
      for (uint64_t at = offset; at < end; at += 4096) *checksum += data[at];
      (*mapped)->Release(offset, end - offset);
    }
    total += static_cast<int64_t>((*mapped)->size());
  }
  return total;
}

double Median(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  return values[values.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"model read by name vs through the pinned view"};
  std::string model;
  int rounds = 5;
  app.add_option("--model", model, "model folder (its parent is the store's root)")->required()
      ->check(CLI::ExistingDirectory);
  app.add_option("--rounds", rounds)->check(CLI::Range(1, 100));
  CLI11_PARSE(app, argc, argv);
  const fs::path folder = fs::absolute(model);
  const fs::path views = fs::temp_directory_path() / ("pinned_read_bench-" + std::to_string(getpid()));
  fs::create_directories(views);
  quark::storage::FileObjectStore store({folder.parent_path(), views});
  uint64_t checksum = 0;
  std::vector<double> by_name, pinned, pin_only;
  int64_t bytes = 0;
  for (int round = 0; round <= rounds; ++round) {  // round 0 warms the page cache and is not counted
    Clock::time_point start = Clock::now();
    bytes = ReadAll(folder, &checksum);
    const double name_s = Seconds(start);
    start = Clock::now();
    auto pin = store.PinFolder("file://" + folder.string(), views / std::to_string(round));
    if (!pin.ok()) {
      std::fprintf(stderr, "pin: %s\n", pin.status().ToString().c_str());
      return 1;
    }
    const double pin_s = Seconds(start);
    const int64_t pinned_bytes = ReadAll((*pin)->view(), &checksum);
    const double pinned_s = Seconds(start);
    pin->reset();
    if (bytes < 0 || pinned_bytes != bytes) return 1;
    std::printf("round %d: by name %.3f s, pinned %.3f s (pin %.4f s), %.2f GB\n", round, name_s, pinned_s, pin_s,
                bytes / 1e9);
    std::fflush(stdout);
    if (round == 0) continue;
    by_name.push_back(name_s);
    pinned.push_back(pinned_s);
    pin_only.push_back(pin_s);
  }
  std::printf("median of %d rounds: by name %.3f s, pinned %.3f s (of which the pin %.4f s); checksum %llu\n", rounds,
              Median(by_name), Median(pinned), Median(pin_only), static_cast<unsigned long long>(checksum));
  fs::remove_all(views);
  return 0;
}
