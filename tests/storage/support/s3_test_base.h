// A GoogleTest base that shares one s3rver per test suite and skips (with the reason) when the npm peers are
// not installed.
#pragma once

#include <gtest/gtest.h>

#include <memory>

#include "tests/storage/support/s3rver.h"
#include "tests/support/require_peer.h"

namespace quark::testing {

class S3TestBase : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    absl::StatusOr<std::unique_ptr<S3rver>> server = S3rver::Start("test");
    if (server.ok()) {
      server_ = std::move(*server).release();
    } else {
      start_error_ = new std::string(server.status().ToString());
    }
  }
  static void TearDownTestSuite() {
    delete server_;
    server_ = nullptr;
    delete start_error_;
    start_error_ = nullptr;
  }
  void SetUp() override {
    if (server_ == nullptr) {
      if (start_error_ && start_error_->find("FAILED_PRECONDITION") != std::string::npos) QUARK_PEER_MISSING() << *start_error_;
      FAIL() << (start_error_ ? *start_error_ : "s3rver did not start");
    }
  }

  // Suite-wide state of a static fixture: owned here, deleted in TearDownTestSuite.
  static inline S3rver* server_ = nullptr;
  static inline std::string* start_error_ = nullptr;
};

}  // namespace quark::testing
