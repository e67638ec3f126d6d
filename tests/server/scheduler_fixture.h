// Test fixture: a JobScheduler over a real SQLite store in a temp folder, on a ManualClock, with its metrics; Open()
// again is a quarkd restart on the same store. Shared by the scheduler's tests.
#pragma once

#include <gtest/gtest.h>

#include <memory>
#include <optional>
#include <string>

#include "server/metrics/registry.h"
#include "server/scheduler/job_scheduler.h"
#include "server/store/sqlite_job_store.h"
#include "tests/server/test_util.h"

namespace quark::server::testing {

class SchedulerFixture : public ::testing::Test {
 protected:
  explicit SchedulerFixture(SchedulerOptions options = {}) : options_(options) {}

  void SetUp() override { Open(); }

  void Close() {
    scheduler_.reset();
    store_.reset();
  }

  void Open() {
    Close();
    auto store = SqliteJobStore::Open(dir_.File("q.db"));
    ASSERT_TRUE(store.ok()) << store.status();
    store_ = std::move(*store);
    scheduler_ = std::make_unique<JobScheduler>(store_.get(), &clock_, &hub_, &metrics_, options_);
    ASSERT_TRUE(scheduler_->Recover().ok());
  }

  /// A Lease call that does not wait: the job it got, if any.
  std::optional<quark::v1::internal::LeaseResponse> LeaseNow(const std::string& worker_id) {
    std::optional<quark::v1::internal::LeaseResponse> got;
    scheduler_->Lease(worker_id, absl::ZeroDuration(), [&](quark::v1::internal::LeaseResponse r) {
      if (!r.lease_id().empty()) got = std::move(r);
    });
    return got;
  }

  /// Lease timeout 10 s, cancel grace 5 s, 2 attempts: the options most scheduler tests run with.
  static SchedulerOptions ShortOptions() {
    SchedulerOptions options;
    options.lease_timeout = absl::Seconds(10);
    options.cancel_grace = absl::Seconds(5);
    options.default_max_attempts = 2;
    return options;
  }

  const SchedulerOptions options_;
  TempDir dir_;
  ManualClock clock_;
  EventHub hub_;
  metrics::Registry registry_;
  ServerMetrics metrics_{&registry_};
  std::unique_ptr<SqliteJobStore> store_;
  std::unique_ptr<JobScheduler> scheduler_;
};

}  // namespace quark::server::testing
