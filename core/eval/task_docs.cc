#include "core/eval/task_docs.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <functional>
#include <sstream>

#include <nlohmann/json.hpp>

#include "core/base/strings.h"
#include "core/eval/csv_records.h"

namespace quark::eval {
namespace {

using Json = nlohmann::json;

absl::Status BadField(const std::string& file, int64_t line, const std::string& field, const std::string& why) {
  return absl::InvalidArgumentError(StrCat(file, ":", line, ": field \"", field, "\": ", why));
}

absl::StatusOr<std::string> StringField(const Json& row, const std::string& field, const std::string& file,
                                        int64_t line) {
  const auto it = row.find(field);
  if (it == row.end()) return BadField(file, line, field, "missing");
  if (!it->is_string()) return BadField(file, line, field, "not a string");
  return it->get<std::string>();
}

// The string fields `names` of a row, in order.
absl::StatusOr<std::vector<std::string>> StringFields(const Json& row, std::initializer_list<const char*> names,
                                                      const std::string& file, int64_t line) {
  std::vector<std::string> values;
  for (const char* name : names) {
    auto value = StringField(row, name, file, line);
    if (!value.ok()) return value.status();
    values.push_back(*std::move(value));
  }
  return values;
}

// Calls on_row(row, line) for the first `limit` JSON objects of a JSONL file (0 = all).
absl::Status ForEachJsonLine(const std::string& file, int64_t limit,
                             const std::function<absl::Status(const Json&, int64_t)>& on_row) {
  std::ifstream in(file);
  if (!in) return absl::NotFoundError(StrCat("task file ", file, " cannot be read"));
  std::string text;
  int64_t line = 0, rows = 0;
  while (std::getline(in, text) && (limit == 0 || rows < limit)) {
    ++line;
    if (text.empty()) continue;
    const Json row = Json::parse(text, nullptr, /*allow_exceptions=*/false);
    if (row.is_discarded() || !row.is_object()) {
      return absl::InvalidArgumentError(StrCat(file, ":", line, ": not a JSON object"));
    }
    absl::Status status = on_row(row, line);
    if (!status.ok()) return status;
    ++rows;
  }
  return absl::OkStatus();
}

// A multiple-choice doc: the same context for every choice, continuations " " + choice.
TaskDoc SameContext(std::string id, const std::string& context, std::vector<std::string> choices, int64_t gold) {
  TaskDoc doc{std::move(id), {}, std::move(choices), gold};
  for (const auto& c : doc.choices) doc.requests.push_back({context, " " + c});
  doc.example = context + " " + doc.choices[static_cast<size_t>(gold)];
  return doc;
}

absl::Status LoadArc(const std::string& file, int64_t limit, std::vector<TaskDoc>& docs) {
  return ForEachJsonLine(file, limit, [&](const Json& row, int64_t line) -> absl::Status {
    auto fields = StringFields(row, {"id", "question", "answerKey"}, file, line);
    if (!fields.ok()) return fields.status();
    const std::string &id = (*fields)[0], &question = (*fields)[1], &key = (*fields)[2];
    const auto choices = row.find("choices");
    if (choices == row.end() || !choices->is_object() || !choices->contains("text") || !choices->contains("label") ||
        !(*choices)["text"].is_array() || !(*choices)["label"].is_array() ||
        (*choices)["text"].size() != (*choices)["label"].size() || (*choices)["text"].empty()) {
      return BadField(file, line, "choices", "not {text: [...], label: [...]} of equal, non-zero lengths");
    }
    std::vector<std::string> texts, labels;
    for (const auto& t : (*choices)["text"]) {
      if (!t.is_string()) return BadField(file, line, "choices.text", "holds a non-string");
      texts.push_back(t.get<std::string>());
    }
    for (const auto& l : (*choices)["label"]) {
      if (!l.is_string()) return BadField(file, line, "choices.label", "holds a non-string");
      labels.push_back(l.get<std::string>());
    }
    const auto gold = std::find(labels.begin(), labels.end(), key);
    if (gold == labels.end()) return BadField(file, line, "answerKey", StrCat("\"", key, "\" is not a label"));
    docs.push_back(SameContext(id, "Question: " + question + "\nAnswer:", texts, gold - labels.begin()));
    return absl::OkStatus();
  });
}

absl::Status LoadPiqa(const std::string& dir, int64_t limit, std::vector<TaskDoc>& docs) {
  const std::string labels_file = dir + "/piqa_valid-labels.lst";
  std::ifstream labels(labels_file);
  if (!labels) return absl::NotFoundError(StrCat("task file ", labels_file, " cannot be read"));
  const std::string file = dir + "/piqa_valid.jsonl";
  return ForEachJsonLine(file, limit, [&](const Json& row, int64_t line) -> absl::Status {
    std::string label;
    if (!std::getline(labels, label) || (label != "0" && label != "1")) {
      return BadField(labels_file, line, "label", StrCat("\"", label, "\" is not 0 or 1 (or the file ends early)"));
    }
    auto f = StringFields(row, {"goal", "sol1", "sol2"}, file, line);
    if (!f.ok()) return f.status();
    docs.push_back(SameContext(StrCat("piqa:", line), "Question: " + (*f)[0] + "\nAnswer:", {(*f)[1], (*f)[2]},
                               label == "1" ? 1 : 0));
    return absl::OkStatus();
  });
}

// lm-eval's preprocess_winogrande: the contexts are the sentence up to "_" with each option, the continuation the
// rest of the sentence after "_", stripped (" " + it with the target delimiter).
absl::Status LoadWinogrande(const std::string& file, int64_t limit, std::vector<TaskDoc>& docs) {
  return ForEachJsonLine(file, limit, [&](const Json& row, int64_t line) -> absl::Status {
    auto f = StringFields(row, {"sentence", "option1", "option2", "answer"}, file, line);
    if (!f.ok()) return f.status();
    const std::string* sentence = &(*f)[0];
    const std::string& answer = (*f)[3];
    if (answer != "1" && answer != "2") return BadField(file, line, "answer", StrCat("\"", answer, "\" is not 1 or 2"));
    const size_t blank = sentence->find('_');
    if (blank == std::string::npos) return BadField(file, line, "sentence", "has no \"_\"");
    std::string rest = sentence->substr(blank + 1);
    const auto is_space = [](unsigned char c) { return std::isspace(c) != 0; };
    while (!rest.empty() && is_space(rest.front())) rest.erase(rest.begin());
    while (!rest.empty() && is_space(rest.back())) rest.pop_back();
    TaskDoc doc{StrCat("winogrande:", line), {}, {}, answer == "2" ? 1 : 0};
    for (const auto& option : {(*f)[1], (*f)[2]}) {
      doc.choices.push_back(sentence->substr(0, blank) + option);
      doc.requests.push_back({doc.choices.back(), " " + rest});
    }
    doc.example = doc.choices[static_cast<size_t>(doc.gold)] + " " + rest;
    docs.push_back(std::move(doc));
    return absl::OkStatus();
  });
}

absl::Status LoadLambada(const std::string& file, int64_t limit, std::vector<TaskDoc>& docs) {
  return ForEachJsonLine(file, limit, [&](const Json& row, int64_t line) -> absl::Status {
    auto text = StringField(row, "text", file, line);
    if (!text.ok()) return text.status();
    const size_t space = text->rfind(' ');
    if (space == std::string::npos) return BadField(file, line, "text", "has no space before a last word");
    // text.split(' ')[:-1] joined by ' ' is the text up to its last space.
    TaskDoc doc{StrCat("lambada:", line), {{text->substr(0, space), text->substr(space)}}, {}, 0};
    doc.example = *text;  // target_delimiter "": the context and " {last word}"
    docs.push_back(std::move(doc));
    return absl::OkStatus();
  });
}

absl::Status LoadMmlu(const std::string& dir, int64_t limit, std::vector<TaskDoc>& docs) {
  std::vector<std::filesystem::path> files;
  std::error_code error;
  for (const auto& entry : std::filesystem::directory_iterator(dir, error)) {
    const std::string name = entry.path().filename().string();
    if (name.size() > 9 && name.compare(name.size() - 9, 9, "_test.csv") == 0) {
      files.push_back(entry.path());
    }
  }
  if (error || files.empty()) return absl::NotFoundError(StrCat("task folder ", dir, " holds no *_test.csv"));
  std::sort(files.begin(), files.end());
  for (const auto& path : files) {
    std::string subject = path.filename().string();
    subject = subject.substr(0, subject.size() - 9);
    auto records = ReadCsvRecords(path.string());
    if (!records.ok()) return records.status();
    std::string about = subject;
    std::replace(about.begin(), about.end(), '_', ' ');
    const std::string description = "The following are multiple choice questions (with answers) about " + about + ".\n\n";
    int64_t n = 0;
    for (const CsvRecord& r : *records) {
      if (limit > 0 && n == limit) break;
      if (r.fields.size() != 6) {
        return BadField(path.string(), r.line, "row", StrCat(r.fields.size(), " fields, not 6 (question, A-D, answer)"));
      }
      const std::string& key = r.fields[5];
      if (key.size() != 1 || key[0] < 'A' || key[0] > 'D') {
        return BadField(path.string(), r.line, "answer", StrCat("\"", key, "\" is not one of A, B, C, D"));
      }
      std::string question = r.fields[0];
      const auto is_space = [](unsigned char c) { return std::isspace(c) != 0; };
      while (!question.empty() && is_space(question.front())) question.erase(question.begin());
      while (!question.empty() && is_space(question.back())) question.pop_back();
      const std::string context = description + question + "\nA. " + r.fields[1] + "\nB. " + r.fields[2] + "\nC. " +
                                  r.fields[3] + "\nD. " + r.fields[4] + "\nAnswer:";
      docs.push_back(SameContext(StrCat(subject, ":", r.line), context, {"A", "B", "C", "D"}, key[0] - 'A'));
      docs.back().description = description;
      docs.back().example = docs.back().example.substr(description.size());
      docs.back().group = subject;
      ++n;
    }
  }
  return absl::OkStatus();
}

// lm-eval's gsm8k: doc_to_text "Question: {question}\nAnswer:", doc_to_target the whole answer (exact_match strips it
// to the number after "#### "), target_delimiter " ".
absl::Status LoadGsm8k(const std::string& file, int64_t limit, std::vector<TaskDoc>& docs) {
  return ForEachJsonLine(file, limit, [&](const Json& row, int64_t line) -> absl::Status {
    auto f = StringFields(row, {"question", "answer"}, file, line);
    if (!f.ok()) return f.status();
    TaskDoc doc{StrCat("gsm8k:", line), {{"Question: " + (*f)[0] + "\nAnswer:", (*f)[1]}}, {}, 0};
    doc.example = doc.requests[0].context + " " + (*f)[1];
    docs.push_back(std::move(doc));
    return absl::OkStatus();
  });
}

}  // namespace

const std::vector<TaskInfo>& KnownTasks() {
  static const std::vector<TaskInfo> tasks = {
      {"arc_easy", true, true, 0}, {"arc_challenge", true, true, 0}, {"piqa", true, true, 0},
      {"winogrande", true, false, 0}, {"mmlu", true, false, 5, false, true}, {"lambada_openai", false, false, 0},
      {"gsm8k", false, false, 5, true}};
  return tasks;
}

absl::StatusOr<TaskInfo> FindTask(const std::string& name) {
  std::vector<std::string> names;
  for (const auto& t : KnownTasks()) {
    if (t.name == name) return t;
    names.push_back(t.name);
  }
  return absl::InvalidArgumentError(StrCat("--tasks: unknown task \"", name, "\" (known: ", StrJoin(names, ", "), ")"));
}

absl::StatusOr<std::vector<TaskDoc>> LoadTaskDocs(const std::string& name, const std::string& tasks_dir, int64_t limit) {
  auto task = FindTask(name);
  if (!task.ok()) return task.status();
  if (limit < 0) return absl::InvalidArgumentError(StrCat("--limit: ", limit, " is negative"));
  std::vector<TaskDoc> docs;
  absl::Status status;
  if (name == "arc_easy") status = LoadArc(tasks_dir + "/arc_easy_test.jsonl", limit, docs);
  if (name == "arc_challenge") status = LoadArc(tasks_dir + "/arc_challenge_test.jsonl", limit, docs);
  if (name == "piqa") status = LoadPiqa(tasks_dir, limit, docs);
  if (name == "winogrande") status = LoadWinogrande(tasks_dir + "/winogrande_xl_dev.jsonl", limit, docs);
  if (name == "mmlu") status = LoadMmlu(tasks_dir + "/mmlu_test", limit, docs);
  if (name == "lambada_openai") status = LoadLambada(tasks_dir + "/lambada_test.jsonl", limit, docs);
  if (name == "gsm8k") status = LoadGsm8k(tasks_dir + "/gsm8k_test.jsonl", limit, docs);
  if (!status.ok()) return status;
  return docs;
}

}  // namespace quark::eval
