#include "core/engine/engine_process.h"

#include <cstdlib>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"
#include "core/base/openmp_wait_policy.h"
#include "core/engine/engine_init.h"
#include "core/runtime/compute_device.h"

namespace quark {
namespace {

void AddDevices(absl::string_view list, std::vector<std::string>& devices) {
  for (absl::string_view device : absl::StrSplit(list, ',', absl::SkipEmpty())) devices.emplace_back(device);
}

// The devices the command line names: "--device X", "--device=X", "--devices X,Y", "--devices=X,Y".
std::vector<std::string> NamedDevices(int argc, char** argv, const char* devices_variable) {
  std::vector<std::string> devices;
  for (int i = 1; i < argc; ++i) {
    const absl::string_view arg = argv[i];
    for (const absl::string_view flag : {absl::string_view("--device"), absl::string_view("--devices")}) {
      if (arg == flag && i + 1 < argc) {
        AddDevices(argv[i + 1], devices);
      } else if (arg.size() > flag.size() && absl::StartsWith(arg, flag) && arg[flag.size()] == '=') {
        AddDevices(arg.substr(flag.size() + 1), devices);
      }
    }
  }
  if (devices_variable != nullptr) {
    if (const char* listed = std::getenv(devices_variable)) AddDevices(listed, devices);
  }
  return devices;
}

}  // namespace

void StartEngineProcess(int argc, char** argv, const char* devices_variable) {
  // The devices are looked at only in a start that would re-execute: the re-executed image (and a process whose
  // operator chose a policy) leaves them to the command, which checks them anyway.
  if (!OpenMpWaitPolicyChosen()) {
    bool usable = true;
    for (const std::string& device : NamedDevices(argc, argv, devices_variable)) {
      usable = usable && runtime::ResolveDevice(device, "--device").ok();
    }
    if (usable) EnsurePassiveOpenMpWaits();
  }
  InitEngine();
}

}  // namespace quark
