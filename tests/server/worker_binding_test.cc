// WorkerBindings alone: who may act as a worker id and on a lease, and the bound on remembered leases.
#include "server/api/worker_binding.h"

#include <gtest/gtest.h>

#include <string>

namespace quark::server {
namespace {

Principal Worker(const std::string& name) { return Principal{name, "", Role::kWorker, false}; }

TEST(WorkerBindingsTest, AWorkerIdAndItsLeasesBelongToTheFirstCredential) {
  WorkerBindings bindings;
  const Principal one = Worker("gpu-1"), two = Worker("gpu-2");
  ASSERT_TRUE(bindings.Bind(one, "box-1", "Register").ok());
  ASSERT_TRUE(bindings.Bind(one, "box-1", "Lease").ok());
  absl::Status taken = bindings.Bind(two, "box-1", "Lease");
  EXPECT_EQ(taken.code(), absl::StatusCode::kPermissionDenied);
  EXPECT_EQ(taken.message(), "Lease: worker_id \"box-1\" belongs to another credential; \"gpu-2\" may not act as it");

  bindings.RecordLease("lease-a", "box-1");
  EXPECT_TRUE(bindings.CheckLease(one, "lease-a", "box-1", "Heartbeat").ok());
  EXPECT_TRUE(bindings.CheckLease(one, "lease-a", "", "Complete").ok());
  EXPECT_EQ(bindings.CheckLease(one, "lease-a", "box-9", "Heartbeat").message(),
            "Heartbeat: lease_id \"lease-a\" is not held by worker_id \"box-9\"");
  EXPECT_EQ(bindings.CheckLease(two, "lease-a", "", "Complete").message(),
            "Complete: lease_id \"lease-a\" is not held by a worker of \"gpu-2\"");
  // A lease granted elsewhere (another replica) is not this process's to judge.
  EXPECT_TRUE(bindings.CheckLease(two, "lease-unknown", "", "Complete").ok());
  bindings.ForgetLease("lease-a");
  EXPECT_TRUE(bindings.CheckLease(two, "lease-a", "", "Complete").ok());

  // Authentication off: nothing is bound or checked.
  Principal anonymous{"anonymous", "", Role::kAdmin, true};
  EXPECT_TRUE(bindings.Bind(anonymous, "box-1", "Lease").ok());
  bindings.RecordLease("lease-b", "box-1");
  EXPECT_TRUE(bindings.CheckLease(anonymous, "lease-b", "box-2", "Heartbeat").ok());
}

// Issue #29 item 4: a worker token registering "local-0" in the first moments after quarkd started locked the real
// local worker out and then leased every job. Local ids are reserved for quarkd's own local workers from the start.
TEST(WorkerBindingsTest, LocalWorkerIdsAreReservedForTheLocalWorkers) {
  WorkerBindings bindings;
  const Principal rogue = Worker("gpu-1");
  const Principal local = Worker(kLocalWorkerPrincipal);
  for (const std::string id : {"local-0", "local-17", "replica-a.local-3", "local-0-0123456789abcdef",
                               "replica-a.local-2-fe"}) {
    absl::Status squat = bindings.Bind(rogue, id, "Register");
    EXPECT_EQ(squat.code(), absl::StatusCode::kPermissionDenied) << id;
    EXPECT_EQ(squat.message(), "Register: worker_id \"" + id + "\" is reserved for quarkd's local workers; \"gpu-1\" "
                               "may not act as it");
    EXPECT_TRUE(bindings.Bind(local, id, "Register").ok()) << id << ": the squat bound nothing";
  }
  // Slots (what admins drain) are the ids without the per-start suffix.
  EXPECT_TRUE(WorkerBindings::IsLocalWorkerSlot("local-0"));
  EXPECT_TRUE(WorkerBindings::IsLocalWorkerSlot("replica-a.local-3"));
  EXPECT_FALSE(WorkerBindings::IsLocalWorkerSlot("local-0-0123456789abcdef"));
  EXPECT_FALSE(WorkerBindings::IsLocalWorkerSlot("replica-a.local-2-fe"));
  EXPECT_FALSE(WorkerBindings::IsLocalWorkerSlot("box-1"));
  for (const std::string id : {"local-", "local-x", "my-local-0", "local-0b", "slurm-12", "box-local", "local-0-",
                               "local--ab", "local-0-XYZ", "local-0-ab-cd"}) {
    EXPECT_FALSE(WorkerBindings::IsLocalWorkerId(id)) << id;
    EXPECT_TRUE(bindings.Bind(rogue, id, "Register").ok()) << id;
  }
}

TEST(WorkerBindingsTest, TheOldestLeasesAreForgottenPastTheBound) {
  WorkerBindings bindings;
  const Principal one = Worker("gpu-1"), two = Worker("gpu-2");
  ASSERT_TRUE(bindings.Bind(one, "box-1", "Register").ok());
  for (size_t i = 0; i <= WorkerBindings::kMaxLeases; ++i) bindings.RecordLease("lease-" + std::to_string(i), "box-1");
  EXPECT_TRUE(bindings.CheckLease(two, "lease-0", "", "Complete").ok()) << "the oldest is forgotten";
  EXPECT_FALSE(bindings.CheckLease(two, "lease-1", "", "Complete").ok());
  EXPECT_FALSE(bindings.CheckLease(two, "lease-" + std::to_string(WorkerBindings::kMaxLeases), "", "Complete").ok());
  // Recording a lease again moves it to the newest end.
  bindings.RecordLease("lease-1", "box-1");
  bindings.RecordLease("lease-new", "box-1");
  EXPECT_FALSE(bindings.CheckLease(two, "lease-1", "", "Complete").ok());
  EXPECT_TRUE(bindings.CheckLease(two, "lease-2", "", "Complete").ok());
}

}  // namespace
}  // namespace quark::server
