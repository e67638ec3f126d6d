// Few-shot contexts as lm-evaluation-harness builds them, Python's random.Random as its sampler draws, and GSM8K's
// answer extraction. The expected indices and strings were produced by CPython 3.11 (random.Random) and by
// lm-eval 0.4.13.dev0's own lm_eval/api/samplers.py (ContextSampler / FirstNSampler with rnd=1234, eval_doc given)
// run on the fixture files; the filter outputs by Python's `re` with gsm8k.yaml's patterns.
#include <gtest/gtest.h>

#include "core/eval/fewshot.h"
#include "core/eval/gsm8k.h"
#include "core/eval/python_random.h"
#include "core/eval/task_docs.h"
#include "tests/runtime/test_paths.h"

namespace quark::eval {
namespace {

std::string FewshotTasksDir() { return runtime::testing::SharedDir() + "/fixtures/tasks"; }

TaskInfo Task(const std::string& name) {
  auto task = FindTask(name);
  EXPECT_TRUE(task.ok()) << task.status();
  return *task;
}

TEST(PythonRandomTest, MatchesCPythonsMersenneTwisterAndSample) {
  PythonRandom words(1234);
  EXPECT_EQ(words.GetRandBits(32), 4150886329u);
  EXPECT_EQ(words.GetRandBits(32), 3342196574u);
  EXPECT_EQ(words.GetRandBits(32), 1892932127u);
  PythonRandom r(1234);  // the large-population branch (a set of picked indices), twice from one generator
  EXPECT_EQ(r.Sample(1319, 6), (std::vector<int64_t>{902, 239, 15, 185, 1192, 71}));
  EXPECT_EQ(r.Sample(1319, 6), (std::vector<int64_t>{171, 201, 726, 484, 35, 63}));
  PythonRandom small(1234);  // the pool branch (n <= setsize), then the set branch with k <= 5
  EXPECT_EQ(small.Sample(10, 6), (std::vector<int64_t>{7, 1, 0, 9, 4, 6}));
  EXPECT_EQ(small.Sample(57, 6), (std::vector<int64_t>{42, 44, 5, 6, 49, 22}));
  EXPECT_EQ(small.Sample(100, 3), (std::vector<int64_t>{30, 2, 3}));
  EXPECT_EQ(PythonRandom(uint64_t{1} << 40 | 7).Sample(1000, 4), (std::vector<int64_t>{628, 765, 834, 960}));
  EXPECT_EQ(PythonRandom(0).Sample(1000, 4), (std::vector<int64_t>{864, 394, 776, 911}));
}

TEST(FewshotTest, IndicesAreLmEvalsSamplersOnTheFixtures) {
  auto gsm8k = LoadTaskDocs("gsm8k", FewshotTasksDir(), 0);
  ASSERT_TRUE(gsm8k.ok()) << gsm8k.status();
  const std::vector<TaskDoc> first(gsm8k->begin(), gsm8k->begin() + 4);
  EXPECT_EQ(FewshotIndices(Task("gsm8k"), first, *gsm8k, 5),
            (std::vector<std::vector<int64_t>>{{902, 239, 15, 185, 1192},
                                                {171, 201, 726, 484, 35},
                                                {32, 708, 1276, 991, 1261},  // drew doc 2 itself: dropped
                                                {304, 186, 374, 234, 29}}));
  auto arc = LoadTaskDocs("arc_easy", FewshotTasksDir(), 0);
  ASSERT_TRUE(arc.ok()) << arc.status();
  EXPECT_EQ(FewshotIndices(Task("arc_easy"), {(*arc)[0], (*arc)[1], (*arc)[2]}, *arc, 3),
            (std::vector<std::vector<int64_t>>{{1805, 478, 30}, {143, 343, 403}, {969, 71, 126}}));
  // mmlu's first_n within the subject, the evaluated question left out.
  auto mmlu = LoadTaskDocs("mmlu", FewshotTasksDir(), 0);
  ASSERT_TRUE(mmlu.ok()) << mmlu.status();
  ASSERT_EQ((*mmlu)[2].group, "abstract_algebra");
  EXPECT_EQ(FewshotIndices(Task("mmlu"), {(*mmlu)[2]}, *mmlu, 5), (std::vector<std::vector<int64_t>>{{0, 1, 3, 4, 5}}));
}

TEST(FewshotTest, ContextsAreDescriptionExamplesAndTheDoc) {
  int64_t shots = 3;
  auto arc = LoadFewshotTaskDocs(Task("arc_easy"), FewshotTasksDir(), 1, shots);
  ASSERT_TRUE(arc.ok()) << arc.status();
  auto pool = LoadTaskDocs("arc_easy", FewshotTasksDir(), 0);
  ASSERT_TRUE(pool.ok());
  const std::string last = "Question: Photosynthesis occurs in which of these organisms?\nAnswer: Sunflower plant";
  EXPECT_EQ((*pool)[30].example, last);
  for (const TaskRequest& r : (*arc)[0].requests) {
    EXPECT_EQ(r.context, (*pool)[1805].example + "\n\n" + (*pool)[478].example + "\n\n" + last + "\n\n" +
                             "Question: Which statement best explains why photosynthesis is the foundation of most "
                             "food webs?\nAnswer:");
  }
  int64_t mmlu_shots = -1;  // lm-eval's default for mmlu: 5
  auto mmlu = LoadFewshotTaskDocs(Task("mmlu"), FewshotTasksDir(), 1, mmlu_shots);
  ASSERT_TRUE(mmlu.ok()) << mmlu.status();
  EXPECT_EQ(mmlu_shots, 5);
  const std::string& context = (*mmlu)[0].requests[0].context;
  EXPECT_EQ(context.rfind("The following are multiple choice questions (with answers) about abstract algebra.\n\n"
                          "Find the degree for the given field extension Q(sqrt(2), sqrt(3), sqrt(18)) over Q.\nA. 0\n"
                          "B. 4\nC. 2\nD. 6\nAnswer: B\n\n",
                          0),
            std::string::npos)
      << "the first mmlu doc is left out of its own shots: " << context.substr(0, 300);
  int64_t gsm8k_shots = -1;
  auto gsm8k = LoadFewshotTaskDocs(Task("gsm8k"), FewshotTasksDir(), 1, gsm8k_shots);
  ASSERT_TRUE(gsm8k.ok()) << gsm8k.status();
  EXPECT_EQ(gsm8k_shots, 5);
  auto gsm8k_pool = LoadTaskDocs("gsm8k", FewshotTasksDir(), 0);
  ASSERT_TRUE(gsm8k_pool.ok());
  std::string expected;
  for (int i : {902, 239, 15, 185, 1192}) expected += (*gsm8k_pool)[i].example + "\n\n";
  EXPECT_EQ((*gsm8k)[0].requests[0].context, expected + (*gsm8k_pool)[0].requests[0].context);
  EXPECT_NE(expected.find("#### 125\n\nQuestion: "), std::string::npos);  // doc 15's answer ends "#### 125"
}

TEST(FewshotTest, TooFewDocsForTheShotsNameTheFlag) {
  auto docs = LoadTaskDocs("arc_easy", FewshotTasksDir(), 3);
  ASSERT_TRUE(docs.ok());
  const std::vector<TaskDoc> pool = *docs;
  absl::Status status = ApplyFewshot(Task("arc_easy"), *docs, pool, 3);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(status.message().find("--num-fewshot: 3 examples for arc_easy need 4 docs"), std::string::npos) << status;
  EXPECT_EQ(ApplyFewshot(Task("arc_easy"), *docs, pool, -1).code(), absl::StatusCode::kInvalidArgument);
}

TEST(Gsm8kTest, FiltersAndExactMatchAsLmEvalsRegexes) {
  struct Case {
    std::string text, strict, flexible, normalized;
  };
  const Case cases[] = {
      {"She makes 9 * 2 = $18.\n#### 18", "18", "18", "18"},
      {"The answer is 1,234.5.", "[invalid]", "1,234.5.", "the answer is 1234.5"},
      {"#### -3,000\n#### 42 apples", "-3,000", "42", "42 apples"},
      {"no numbers here", "[invalid]", "[invalid]", "no numbers here"},
      {"x 7 y 8.", "[invalid]", "8.", "x 7 y 8"},
      {"costs $5 or $6.50.\n", "[invalid]", "$6.50.", "costs 5 or 6.50\n"},
      {"#### .", ".", "[invalid]", ""},
      {"He has 12 eggs.\nQuestion: what", "[invalid]", "12", "he has 12 eggs.\nquestion: what"},
  };
  for (const Case& c : cases) {
    EXPECT_EQ(Gsm8kStrictMatch(c.text), c.strict) << c.text;
    EXPECT_EQ(Gsm8kFlexibleExtract(c.text), c.flexible) << c.text;
    EXPECT_EQ(Gsm8kNormalize(c.text), c.normalized) << c.text;
  }
  EXPECT_EQ(Gsm8kNormalize("1,000."), "1000");
  EXPECT_EQ(Gsm8kNormalize("Total: $1,500.\n"), "total: 1500\n");
  EXPECT_EQ(Gsm8kNormalize(".5.\n"), ".5\n");
  EXPECT_EQ(Gsm8kNormalize("A\n#### B\n#### 12."), "12");
  const std::string reference = "Janet sells 16 - 3 - 4 = <<16-3-4=9>>9 duck eggs a day.\n#### 18";
  EXPECT_TRUE(Gsm8kExactMatch("18", reference));
  EXPECT_TRUE(Gsm8kExactMatch("$18.", reference));
  EXPECT_TRUE(Gsm8kExactMatch("1,8", reference));  // "," is ignored on both sides, as lm-eval's
  EXPECT_FALSE(Gsm8kExactMatch("18.0", reference));
  EXPECT_FALSE(Gsm8kExactMatch("[invalid]", reference));
}

TEST(Gsm8kTest, DocsArePromptAndAnswer) {
  auto docs = LoadTaskDocs("gsm8k", FewshotTasksDir(), 2);
  ASSERT_TRUE(docs.ok()) << docs.status();
  ASSERT_EQ(docs->size(), 2u);
  const TaskDoc& d = (*docs)[0];
  EXPECT_EQ(d.requests[0].context.rfind("Question: Janet\u2019s ducks lay 16 eggs per day.", 0), 0u);
  const std::string tail = "at the farmers' market?\nAnswer:";
  EXPECT_EQ(d.requests[0].context.substr(d.requests[0].context.size() - tail.size()), tail);
  EXPECT_EQ(Gsm8kNormalize(d.requests[0].continuation), "18");
  EXPECT_EQ(d.example, d.requests[0].context + " " + d.requests[0].continuation);
  EXPECT_EQ(Gsm8kStopSequences(), (std::vector<std::string>{"Question:", "</s>", "<|im_end|>"}));
}

}  // namespace
}  // namespace quark::eval
