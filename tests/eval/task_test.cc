// The task files turned into lm-evaluation-harness's requests, its metric rules, and the errors for bad task files.
#include <gtest/gtest.h>

#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>

#include "core/eval/csv_records.h"
#include "core/eval/task_docs.h"
#include "core/eval/task_scoring.h"
#include "tests/runtime/test_paths.h"

namespace quark::eval {
namespace {

std::string TasksDir() { return runtime::testing::SharedDir() + "/fixtures/tasks"; }

class TempTasks : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() / ("quark_task_test_" + std::to_string(::getpid()));
    std::filesystem::create_directories(dir_ / "mmlu_test");
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  void Write(const std::string& name, const std::string& text) { std::ofstream(dir_ / name) << text; }
  std::filesystem::path dir_;
};

TEST(TaskDocsTest, ArcIsQuestionAnswerWithSpacedChoices) {
  auto docs = LoadTaskDocs("arc_easy", TasksDir(), 2);
  ASSERT_TRUE(docs.ok()) << docs.status();
  ASSERT_EQ(docs->size(), 2u);
  const TaskDoc& d = (*docs)[0];
  EXPECT_EQ(d.id, "Mercury_417466");
  EXPECT_EQ(d.requests[0].context,
            "Question: Which statement best explains why photosynthesis is the foundation of most food webs?\nAnswer:");
  EXPECT_EQ(d.requests[0].continuation, " Sunlight is the source of energy for nearly all ecosystems.");
  EXPECT_EQ(d.gold, 0);
  EXPECT_EQ(LoadTaskDocs("arc_challenge", TasksDir(), 0)->size(), 1172u);
}

TEST(TaskDocsTest, WinograndeScoresTheRestOfTheSentenceAfterEachOption) {
  auto docs = LoadTaskDocs("winogrande", TasksDir(), 1);
  ASSERT_TRUE(docs.ok()) << docs.status();
  const TaskDoc& d = (*docs)[0];
  EXPECT_EQ(d.requests[0].context, "Sarah was a much better surgeon than Maria so Sarah");
  EXPECT_EQ(d.requests[1].context, "Sarah was a much better surgeon than Maria so Maria");
  EXPECT_EQ(d.requests[0].continuation, " always got the easier cases.");
  EXPECT_EQ(d.gold, 1);
}

TEST(TaskDocsTest, LambadaSplitsOffTheLastWordAndMmluHasItsDescription) {
  auto lambada = LoadTaskDocs("lambada_openai", TasksDir(), 1);
  ASSERT_TRUE(lambada.ok()) << lambada.status();
  EXPECT_EQ((*lambada)[0].requests[0].continuation, " signs");
  const std::string& context = (*lambada)[0].requests[0].context;
  EXPECT_EQ(context.substr(context.size() - 18), "I don't care about");
  auto mmlu = LoadTaskDocs("mmlu", TasksDir(), 1);
  ASSERT_TRUE(mmlu.ok()) << mmlu.status();
  ASSERT_EQ(mmlu->size(), 57u);
  EXPECT_EQ((*mmlu)[0].requests[0].context,
            "The following are multiple choice questions (with answers) about abstract algebra.\n\n"
            "Find the degree for the given field extension Q(sqrt(2), sqrt(3), sqrt(18)) over Q.\nA. 0\nB. 4\nC. 2\n"
            "D. 6\nAnswer:");
  EXPECT_EQ((*mmlu)[0].requests[3].continuation, " D");
  EXPECT_EQ((*mmlu)[0].gold, 1);
  EXPECT_EQ(LoadTaskDocs("mmlu", TasksDir(), 0)->size(), 14042u);
}

TEST(TaskDocsTest, UnknownTaskListsTheKnownOnes) {
  auto docs = LoadTaskDocs("hellaswag", TasksDir(), 0);
  EXPECT_EQ(docs.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(docs.status().message().find("arc_easy, arc_challenge, piqa, winogrande, mmlu, lambada_openai"),
            std::string::npos);
}

TEST_F(TempTasks, BadRowsNameFileLineAndField) {
  Write("arc_easy_test.jsonl", "{\"id\":\"a\",\"question\":\"q\",\"choices\":{\"text\":[\"x\"],\"label\":[\"A\"]},"
                               "\"answerKey\":\"A\"}\n{\"id\":\"b\",\"question\":7}\n");
  auto docs = LoadTaskDocs("arc_easy", dir_.string(), 0);
  EXPECT_EQ(docs.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(docs.status().message().find("arc_easy_test.jsonl:2: field \"question\": not a string"), std::string::npos)
      << docs.status();
  Write("winogrande_xl_dev.jsonl", "{\"sentence\":\"no blank\",\"option1\":\"a\",\"option2\":\"b\",\"answer\":\"1\"}\n");
  docs = LoadTaskDocs("winogrande", dir_.string(), 0);
  EXPECT_NE(docs.status().message().find("winogrande_xl_dev.jsonl:1: field \"sentence\": has no \"_\""),
            std::string::npos) << docs.status();
  Write("mmlu_test/x_test.csv", "\"q\",a,b,c,d,A\n\"q2\nline\",a,b,c,d,E\n");
  docs = LoadTaskDocs("mmlu", dir_.string(), 0);
  EXPECT_NE(docs.status().message().find("x_test.csv:2: field \"answer\": \"E\""), std::string::npos) << docs.status();
  docs = LoadTaskDocs("piqa", dir_.string(), 0);
  EXPECT_EQ(docs.status().code(), absl::StatusCode::kNotFound);
}

TEST(CsvTest, QuotesCommasNewlinesAndEmptyFields) {
  auto rows = ParseCsv("a,\"b,c\",\"d \"\"e\"\"\"\n\"multi\nline\",,x\r\nlast,", "t.csv");
  ASSERT_TRUE(rows.ok()) << rows.status();
  ASSERT_EQ(rows->size(), 3u);
  EXPECT_EQ((*rows)[0].fields, (std::vector<std::string>{"a", "b,c", "d \"e\""}));
  EXPECT_EQ((*rows)[1].fields, (std::vector<std::string>{"multi\nline", "", "x"}));
  EXPECT_EQ((*rows)[2].line, 4);
  EXPECT_EQ((*rows)[2].fields, (std::vector<std::string>{"last", ""}));
  EXPECT_NE(ParseCsv("a,\"open", "t.csv").status().message().find("t.csv:1: unterminated quote"), std::string::npos);
}

TEST(TaskScoringTest, AccNormDividesByCharactersAndTakesTheFirstMaximum) {
  const TaskInfo arc = *FindTask("arc_easy");
  std::vector<TaskDoc> docs(2);
  docs[0].choices = {"ab", "\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9"};  // 2 and 4 characters (8 bytes)
  docs[0].gold = 1;
  docs[1].choices = {"x", "y"};
  docs[1].gold = 0;
  std::vector<ExampleScore> examples(2);
  examples[0].requests.resize(2);
  examples[0].requests[0].loglikelihood = -2.0;  // -1 per character
  examples[0].requests[1].loglikelihood = -3.0;  // -0.75 per character (-0.375 per byte)
  examples[0].gold = 1;
  examples[1].requests.resize(2);
  examples[1].requests[0].loglikelihood = -1.0;
  examples[1].requests[1].loglikelihood = -1.0;  // a tie: the first
  examples[1].gold = 0;
  auto metrics = AggregateTask(arc, docs, examples);
  EXPECT_EQ(examples[0].pred, 0);
  EXPECT_EQ(examples[0].pred_norm, 1);
  EXPECT_EQ(examples[1].pred, 0);
  EXPECT_DOUBLE_EQ(metrics["acc"].value, 0.5);
  EXPECT_DOUBLE_EQ(metrics["acc"].stderr_value, std::sqrt(0.5) / std::sqrt(2.0));
  EXPECT_DOUBLE_EQ(metrics["acc_norm"].value, 1.0);
  EXPECT_EQ(Utf8Length("\xc3\xa9t\xc3\xa9"), 3);
}

TEST(TaskScoringTest, TrailingContextSpacesMoveToTheContinuation) {
  runtime::testing::InitTestEngine();
  auto tokenizer = runtime::Tokenizer::Open(runtime::testing::SharedDir() + "/fixtures/tinyllama-a", 1, 2);
  ASSERT_TRUE(tokenizer.ok()) << tokenizer.status();
  std::vector<int64_t> ctx, cont, ctx2, cont2;
  ASSERT_TRUE(EncodeRequest(**tokenizer, {"Once upon a time ", "there"}, ctx, cont).ok());
  ASSERT_TRUE(EncodeRequest(**tokenizer, {"Once upon a time", " there"}, ctx2, cont2).ok());
  EXPECT_EQ(ctx, ctx2);
  EXPECT_EQ(cont, cont2);
  EXPECT_EQ(ctx.front(), 1);  // BOS, as the tokenizer's add_special_tokens default
  auto whole = (*tokenizer)->EncodeWithBos("Once upon a time there");
  std::vector<int64_t> joined = ctx;
  joined.insert(joined.end(), cont.begin(), cont.end());
  EXPECT_EQ(joined, *whole);
  EXPECT_EQ(EncodeRequest(**tokenizer, {"Once", ""}, ctx, cont).code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace quark::eval
