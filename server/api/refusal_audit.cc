#include "server/api/refusal_audit.h"

#include <cctype>
#include <map>

namespace quark::server {

std::string RefusedAction(const std::string& what) {
  static const std::map<std::string, std::string> audited = {{"SubmitJob", "submit"},
                                                             {"CancelJob", "cancel"},
                                                             {"DeleteJob", "delete"},
                                                             {"DrainWorker", "drain_worker"},
                                                             {"ResumeWorker", "resume_worker"}};
  if (auto it = audited.find(what); it != audited.end()) return it->second;
  std::string action;
  for (char c : what) {
    if (std::isupper(static_cast<unsigned char>(c))) {
      if (!action.empty()) action += '_';
      action += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    } else {
      action += c;
    }
  }
  return action;
}

RefusalAuditBudget::Decision RefusalAuditBudget::Take() {
  const absl::Time now = clock_->Now();
  absl::MutexLock lock(&mu_);
  Decision decision;
  if (now - window_start_ >= window_) {
    if (dropped_ > 0) {
      decision.not_recorded = dropped_;
      decision.not_recorded_since = dropped_since_;
    }
    window_start_ = now;
    taken_ = 0;
    dropped_ = 0;
  }
  if (taken_ < per_window_) {
    ++taken_;
    decision.record = true;
    return decision;
  }
  if (dropped_ == 0) dropped_since_ = window_start_;
  ++dropped_;
  return decision;
}

}  // namespace quark::server
