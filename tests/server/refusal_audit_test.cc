// #29 item 4: the action names of refused calls and the per-minute budget of unauthenticated refusal records.
#include "server/api/refusal_audit.h"

#include <gtest/gtest.h>

namespace quark::server {
namespace {

TEST(RefusedActionTest, AuditedRpcsKeepTheirActionOthersAreSnakeCase) {
  EXPECT_EQ(RefusedAction("SubmitJob"), "submit");
  EXPECT_EQ(RefusedAction("CancelJob"), "cancel");
  EXPECT_EQ(RefusedAction("DeleteJob"), "delete");
  EXPECT_EQ(RefusedAction("DrainWorker"), "drain_worker");
  EXPECT_EQ(RefusedAction("ResumeWorker"), "resume_worker");
  EXPECT_EQ(RefusedAction("ListAuditRecords"), "list_audit_records");
  EXPECT_EQ(RefusedAction("Lease"), "lease");
}

TEST(RefusalAuditBudgetTest, AtMostPerWindowOneByOneThenOneSummaryInTheNextWindow) {
  ManualClock clock;
  const absl::Time start = clock.Now();
  RefusalAuditBudget budget(&clock, 3, absl::Minutes(1));
  int recorded = 0;
  for (int i = 0; i < 1000; ++i) {
    RefusalAuditBudget::Decision decision = budget.Take();
    recorded += decision.record ? 1 : 0;
    EXPECT_EQ(decision.not_recorded, 0);
  }
  EXPECT_EQ(recorded, 3);
  clock.Advance(absl::Seconds(59));
  EXPECT_FALSE(budget.Take().record) << "still the same window";
  clock.Advance(absl::Seconds(1));
  RefusalAuditBudget::Decision next = budget.Take();
  EXPECT_TRUE(next.record);
  EXPECT_EQ(next.not_recorded, 998);
  EXPECT_EQ(next.not_recorded_since, start);
  // A quiet window: nothing left to report.
  clock.Advance(absl::Minutes(5));
  RefusalAuditBudget::Decision quiet = budget.Take();
  EXPECT_TRUE(quiet.record);
  EXPECT_EQ(quiet.not_recorded, 0);
}

}  // namespace
}  // namespace quark::server
