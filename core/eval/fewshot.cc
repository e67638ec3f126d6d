#include "core/eval/fewshot.h"

#include <map>
#include <string>

#include "core/base/strings.h"
#include "core/eval/python_random.h"

namespace quark::eval {
namespace {

constexpr char kFewshotDelimiter[] = "\n\n";

// Pool indices per group, in pool order.
std::map<std::string, std::vector<int64_t>> PoolGroups(const std::vector<TaskDoc>& pool) {
  std::map<std::string, std::vector<int64_t>> groups;
  for (size_t i = 0; i < pool.size(); ++i) groups[pool[i].group].push_back(static_cast<int64_t>(i));
  return groups;
}

}  // namespace

std::vector<std::vector<int64_t>> FewshotIndices(const TaskInfo& task, const std::vector<TaskDoc>& docs,
                                                 const std::vector<TaskDoc>& pool, int64_t num_fewshot, uint64_t seed) {
  std::vector<std::vector<int64_t>> out(docs.size());
  if (num_fewshot <= 0) return out;
  const auto groups = PoolGroups(pool);
  std::map<std::string, PythonRandom> rngs;  // one sampler per task (mmlu: per subject task)
  for (size_t d = 0; d < docs.size(); ++d) {
    const auto group = groups.find(docs[d].group);
    if (group == groups.end()) continue;
    const std::vector<int64_t>& members = group->second;
    std::vector<int64_t> drawn;
    if (task.first_n_fewshot) {
      drawn = members;
    } else {
      PythonRandom& rng = rngs.try_emplace(docs[d].group, seed).first->second;
      const int64_t n = static_cast<int64_t>(members.size());
      for (int64_t i : rng.Sample(n, std::min(n, num_fewshot + 1))) drawn.push_back(members[static_cast<size_t>(i)]);
    }
    for (int64_t i : drawn) {
      if (static_cast<int64_t>(out[d].size()) == num_fewshot) break;
      if (pool[static_cast<size_t>(i)].example != docs[d].example) out[d].push_back(i);
    }
  }
  return out;
}

absl::Status ApplyFewshot(const TaskInfo& task, std::vector<TaskDoc>& docs, const std::vector<TaskDoc>& pool,
                          int64_t num_fewshot, uint64_t seed) {
  if (num_fewshot < 0) return absl::InvalidArgumentError(StrCat("--num-fewshot: ", num_fewshot, " is negative"));
  if (num_fewshot == 0) return absl::OkStatus();
  const auto groups = PoolGroups(pool);
  for (const TaskDoc& doc : docs) {
    const auto group = groups.find(doc.group);
    const size_t have = group == groups.end() ? 0 : group->second.size();
    if (static_cast<int64_t>(have) < num_fewshot + 1) {
      return absl::InvalidArgumentError(StrCat("--num-fewshot: ", num_fewshot, " examples for ", task.name,
                                               doc.group.empty() ? "" : " (" + doc.group + ")", " need ",
                                               num_fewshot + 1, " docs in its split, which holds ", have));
    }
  }
  const auto indices = FewshotIndices(task, docs, pool, num_fewshot, seed);
  for (size_t d = 0; d < docs.size(); ++d) {
    std::string shots = docs[d].description;
    for (int64_t i : indices[d]) shots += pool[static_cast<size_t>(i)].example + kFewshotDelimiter;
    for (TaskRequest& request : docs[d].requests) {
      request.context = shots + request.context.substr(docs[d].description.size());
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<TaskDoc>> LoadFewshotTaskDocs(const TaskInfo& task, const std::string& tasks_dir,
                                                         int64_t limit, int64_t& num_fewshot) {
  if (num_fewshot < 0) num_fewshot = task.default_fewshot;
  auto docs = LoadTaskDocs(task.name, tasks_dir, limit);
  if (!docs.ok() || num_fewshot == 0) return docs;
  auto pool = limit == 0 ? docs : LoadTaskDocs(task.name, tasks_dir, 0);
  if (!pool.ok()) return pool.status();
  if (auto status = ApplyFewshot(task, *docs, *pool, num_fewshot); !status.ok()) return status;
  return docs;
}

}  // namespace quark::eval
