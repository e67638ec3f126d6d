// libFuzzer target for quarkctl's job, config and algo_config files (client/job_file.cc): YAML or JSON in the
// protobuf JSON mapping. Every input must end as a message or an absl::Status (no exception, no abort), and a job
// spec that reads must read back the same from its own JSON.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include <google/protobuf/util/json_util.h>
#include <google/protobuf/util/message_differencer.h>

#include "client/job_file.h"
#include "tests/fuzz/scratch_file.h"

namespace {

void Check(bool condition) {
  if (!condition) __builtin_trap();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);

  quark::v1::JobSpec spec;
  if (quark::client::ParseMessageText(text, "fuzz.yaml", spec).ok()) {
    std::string json;
    Check(google::protobuf::util::MessageToJsonString(spec, &json).ok());
    quark::v1::JobSpec again;
    Check(quark::client::ParseMessageText(json, "fuzz.json", again).ok());
    Check(google::protobuf::util::MessageDifferencer::Equals(spec, again));
  }

  // The Load*File functions take a path.
  static quark::fuzz::ScratchFile scratch("job_file_fuzz");
  const std::string& path = scratch.Write(data, size);
  (void)quark::client::LoadConfigFile(path);
  (void)quark::client::LoadQuarkAlgoConfigFile(path);
  return 0;
}
