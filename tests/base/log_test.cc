#include "core/base/log.h"

#include <cstdio>
#include <string>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

namespace quark {
namespace {

// Captures what a logger writes to stderr.
std::string CaptureStderr(const std::function<void()>& body) {
  testing::internal::CaptureStderr();
  body();
  return testing::internal::GetCapturedStderr();
}

TEST(LogTest, JsonLinesParseWhateverTheMessageHolds) {
  log::Init(log::Format::kJson, "info");
  const std::string tricky = "job=abc path \"C:\\dir\"\nnext line\ttab \x01";
  const std::string out = CaptureStderr([&] {
    log::Get("json-test")->info("{}", tricky);
    log::Get("json-test")->flush();
  });
  ASSERT_FALSE(out.empty());
  const auto line = nlohmann::json::parse(out.substr(0, out.find_last_not_of('\n') + 1));
  EXPECT_EQ(line["msg"], tricky);
  EXPECT_EQ(line["component"], "json-test");
  EXPECT_EQ(line["level"], "info");
}

TEST(LogTest, TextFormatKeepsTheMessageAsIs) {
  log::Init(log::Format::kText, "info");
  const std::string out = CaptureStderr([] {
    log::Get("text-test")->warn("job={} \"quoted\"", "j1");
    log::Get("text-test")->flush();
  });
  EXPECT_NE(out.find("[text-test] job=j1 \"quoted\""), std::string::npos) << out;
}

}  // namespace
}  // namespace quark
