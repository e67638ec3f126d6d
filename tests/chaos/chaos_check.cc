// The chaos run's end-of-run checker (tests/chaos/chaos_run.sh): reads every job from quarkd and every object
// under the output prefix from the store, and checks the run's invariants:
//   - the expected number of jobs, each in one terminal state, its event log in order (sequences increasing,
//     QUEUED first, RUNNING once per attempt, each attempt ended by QUEUED or the terminal state, the terminal
//     state exactly once and last, times non-decreasing);
//   - every job SUCCEEDED (the faults are transient and the run gives jobs 10 attempts);
//   - every SUCCEEDED job's manifest verifies (signature with --key, every file's size and SHA-256), lists what the
//     job's result lists, names the job and was written by the job's last attempt (not a superseded one), and
//     holds --copy-files files for a copy job;
//   - nothing else under the output prefix: no object of a job that did not succeed, no file a manifest does not
//     list, no folder of an unknown job.
// It prints the figures (states, attempts, re-executions per 1,000 jobs, recovery per fault kind from --faults)
// and one "VIOLATION ..." line per broken invariant; exit 1 when there is any, 2 on a usage or connection error.
//   chaos_check --server HOST:PORT --output s3://BUCKET/PREFIX --key PUB.pem --jobs N [--copy-files K]
//               [--faults FILE]   (S3 settings from the AWS_* environment)
#include <grpcpp/grpcpp.h>

#include <algorithm>
#include <fstream>
#include <iostream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "core/base/ed25519.h"
#include "quark/v1/service.grpc.pb.h"
#include "tests/chaos/chaos_recovery.h"
#include "worker/storage/manifest_signature.h"
#include "worker/storage/publish.h"
#include "worker/storage/routing_object_store.h"
#include "worker/storage/s3_config.h"

namespace {

namespace pb = quark::v1;
using quark::chaos::AttemptSpan;
using quark::chaos::JobTimeline;

struct Args {
  std::string server;
  std::string output;
  std::string key_file;
  std::string faults_file;
  int jobs = -1;
  int copy_files = -1;
};

std::vector<std::string> violations;

void Violation(const std::string& what) {
  violations.push_back(what);
  std::cout << "VIOLATION " << what << "\n";
}

int64_t Ms(const google::protobuf::Timestamp& t) { return t.seconds() * 1000 + t.nanos() / 1000000; }

bool IsTerminal(pb::JobState s) {
  return s == pb::JOB_STATE_SUCCEEDED || s == pb::JOB_STATE_FAILED || s == pb::JOB_STATE_CANCELLED;
}

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

std::vector<pb::Job> ListAll(pb::QuantizationService::Stub& stub) {
  std::vector<pb::Job> jobs;
  pb::ListJobsRequest request;
  request.set_page_size(1000);
  do {
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
    pb::ListJobsResponse response;
    if (grpc::Status s = stub.ListJobs(&context, request, &response); !s.ok()) {
      std::cerr << "chaos_check: ListJobs: " << s.error_message() << "\n";
      std::exit(2);
    }
    jobs.insert(jobs.end(), response.jobs().begin(), response.jobs().end());
    request.set_page_token(response.next_page_token());
  } while (!request.page_token().empty());
  return jobs;
}

std::vector<pb::JobEvent> Events(pb::QuantizationService::Stub& stub, const std::string& id) {
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
  pb::WatchJobRequest request;
  request.set_id(id);
  auto reader = stub.WatchJob(&context, request);
  std::vector<pb::JobEvent> events;
  pb::JobEvent event;
  while (reader->Read(&event)) events.push_back(event);
  if (grpc::Status s = reader->Finish(); !s.ok())
    Violation(absl::StrCat(id, ": WatchJob ended with ", s.error_message()));
  return events;
}

// The event log's order: see the file comment.
void CheckEvents(const pb::Job& job, const std::vector<pb::JobEvent>& events) {
  const std::string& id = job.id();
  std::vector<pb::JobState> states;
  int64_t last_ms = 0;
  for (size_t i = 0; i < events.size(); ++i) {
    const pb::JobEvent& e = events[i];
    // WatchJob coalesces progress it could not deliver in time, so sequences may skip (the stored log's
    // contiguity is checked in PostgreSQL by chaos_run.sh); they never repeat or go back.
    if (e.sequence() <= (i == 0 ? 0 : events[i - 1].sequence())) {
      return Violation(absl::StrCat(id, ": event ", i + 1, " has sequence ", e.sequence(), " after ",
                                    i == 0 ? 0 : events[i - 1].sequence()));
    }
    if (Ms(e.time()) < last_ms) Violation(absl::StrCat(id, ": event ", e.sequence(), " goes back in time"));
    last_ms = std::max(last_ms, Ms(e.time()));
    if (!e.has_state()) continue;
    pb::JobState prev = states.empty() ? pb::JOB_STATE_UNSPECIFIED : states.back();
    bool ok = (prev == pb::JOB_STATE_UNSPECIFIED && e.state() == pb::JOB_STATE_QUEUED) ||
              (prev == pb::JOB_STATE_QUEUED && (e.state() == pb::JOB_STATE_RUNNING || IsTerminal(e.state()))) ||
              (prev == pb::JOB_STATE_RUNNING && (e.state() == pb::JOB_STATE_QUEUED || IsTerminal(e.state())));
    if (!ok) {
      Violation(absl::StrCat(id, ": state ", pb::JobState_Name(e.state()), " after ", pb::JobState_Name(prev),
                             " (event ", e.sequence(), ")"));
    }
    states.push_back(e.state());
  }
  if (events.empty() || !events.back().has_state() || events.back().state() != job.state()) {
    return Violation(
        absl::StrCat(id, ": the event log does not end in the job's state ", pb::JobState_Name(job.state())));
  }
  const auto running = std::count(states.begin(), states.end(), pb::JOB_STATE_RUNNING);
  if (running != job.attempts_size()) {
    Violation(absl::StrCat(id, ": ", running, " RUNNING events for ", job.attempts_size(), " attempts"));
  }
  const auto terminal = std::count_if(states.begin(), states.end(), IsTerminal);
  if (terminal != 1) Violation(absl::StrCat(id, ": ", terminal, " terminal state events"));
}

// A SUCCEEDED job's manifest and result; returns the URIs the manifest accounts for (its files and itself).
std::set<std::string> CheckSucceeded(const pb::Job& job, quark::storage::ObjectStore& store,
                                     const quark::Ed25519PublicKey& key, const Args& args, int* stale) {
  const std::string& id = job.id();
  // Each attempt publishes into its own folder (worker/storage/publish.h): the job's is its last attempt's.
  const std::string prefix = quark::storage::AttemptOutputPrefix(args.output, id, job.attempts_size()) + "/";
  std::set<std::string> listed;
  if (job.result().manifest_uri() != prefix + "manifest.json") {
    Violation(
        absl::StrCat(id, ": manifest_uri \"", job.result().manifest_uri(), "\" is not ", prefix, "manifest.json"));
    return listed;
  }
  listed.insert(job.result().manifest_uri());
  absl::StatusOr<quark::storage::ManifestCheck> check =
      quark::storage::VerifyManifest(store, job.result().manifest_uri(), {key});
  if (!check.ok()) {
    Violation(absl::StrCat(id, ": manifest unreadable: ", check.status().ToString()));
    return listed;
  }
  for (const std::string& problem : check->problems) Violation(absl::StrCat(id, ": manifest: ", problem));
  if (args.copy_files >= 0 && job.spec().labels().count("test-copy-ms") && check->files_checked != args.copy_files) {
    Violation(absl::StrCat(id, ": manifest lists ", check->files_checked, " files, the model has ", args.copy_files));
  }
  absl::StatusOr<std::string> text = store.GetBytes(job.result().manifest_uri());
  nlohmann::json manifest = nlohmann::json::parse(text.ok() ? *text : "{}", nullptr, false);
  if (manifest.is_discarded() || manifest.value("job_id", "") != id) {
    Violation(
        absl::StrCat(id, ": manifest names job \"", manifest.is_object() ? manifest.value("job_id", "") : "", "\""));
    return listed;
  }
  std::set<std::string> in_manifest;
  for (const auto& file : manifest["files"]) in_manifest.insert(prefix + file.value("path", ""));
  std::set<std::string> in_result;
  for (const pb::Artifact& a : job.result().artifacts()) in_result.insert(a.uri());
  if (in_manifest != in_result) {
    Violation(
        absl::StrCat(id, ": the result lists ", in_result.size(), " artifacts, the manifest ", in_manifest.size()));
  }
  const int attempt = manifest.contains("worker") ? manifest["worker"].value("attempt", 0) : 0;
  if (attempt != job.attempts_size()) {
    ++*stale;
    Violation(absl::StrCat(id, ": manifest written by attempt ", attempt, ", the job succeeded in attempt ",
                           job.attempts_size(), " (a superseded attempt published)"));
  }
  listed.insert(in_manifest.begin(), in_manifest.end());
  return listed;
}

void CheckObjects(const std::vector<quark::storage::ObjectInfo>& objects, const std::map<std::string, pb::Job>& jobs,
                  const std::set<std::string>& accounted, const Args& args) {
  std::map<std::string, int> orphans_by_job;
  for (const quark::storage::ObjectInfo& object : objects) {
    if (accounted.count(object.uri)) continue;
    std::string rest = object.uri.substr(std::min(object.uri.size(), args.output.size() + 1));
    std::string id = rest.substr(0, rest.find('/'));
    auto job = jobs.find(id);
    if (job == jobs.end()) {
      Violation(absl::StrCat("orphan object of no job: ", object.uri));
    } else if (job->second.state() != pb::JOB_STATE_SUCCEEDED && rest.size() >= 14 &&
               rest.compare(rest.size() - 14, 14, "/manifest.json") == 0) {
      Violation(absl::StrCat(id, ": a manifest is visible for a ", pb::JobState_Name(job->second.state()), " job"));
    } else {
      Violation(absl::StrCat(id, ": orphan object ", object.uri, " (", pb::JobState_Name(job->second.state()),
                             " job; not in its manifest)"));
    }
  }
}

void PrintRecovery(const Args& args, const std::map<std::string, JobTimeline>& timelines) {
  if (args.faults_file.empty()) return;
  std::vector<std::string> bad;
  std::vector<quark::chaos::Fault> faults = quark::chaos::ParseFaults(ReadFile(args.faults_file), &bad);
  for (const std::string& line : bad) Violation("unparsable fault line: " + line);
  std::map<std::string, std::vector<quark::chaos::Recovery>> by_kind;
  for (const auto& fault : faults) by_kind[fault.kind].push_back(quark::chaos::RecoveryOf(fault, timelines));
  for (auto& [kind, list] : by_kind) {
    std::vector<int64_t> ms;
    int hit = 0, stuck = 0, ended = 0;
    for (const auto& r : list) {
      if (r.affected_jobs > r.not_recovered) ms.push_back(r.recovery_ms);
      hit += r.affected_jobs;
      stuck += r.not_recovered;
      ended += r.ended_during;
    }
    std::sort(ms.begin(), ms.end());
    std::cout << "recovery " << kind << ": faults " << list.size() << ", that held up running jobs " << ms.size()
              << ", jobs held up " << hit << " (and " << ended << " ended inside the window), never moved again "
              << stuck;
    if (!ms.empty()) std::cout << ", ms median " << ms[ms.size() / 2] << " max " << ms.back();
    std::cout << "\n";
    if (stuck > 0) Violation(absl::StrCat(kind, ": ", stuck, " hit jobs never made progress again"));
  }
}

bool Parse(int argc, char** argv, Args* a) {
  for (int i = 1; i + 1 < argc; i += 2) {
    std::string flag = argv[i], value = argv[i + 1];
    if (flag == "--server")
      a->server = value;
    else if (flag == "--output")
      a->output = value;
    else if (flag == "--key")
      a->key_file = value;
    else if (flag == "--faults")
      a->faults_file = value;
    else if (flag == "--jobs")
      a->jobs = std::atoi(value.c_str());
    else if (flag == "--copy-files")
      a->copy_files = std::atoi(value.c_str());
    else
      return false;
  }
  while (!a->output.empty() && a->output.back() == '/') a->output.pop_back();
  return !a->server.empty() && !a->output.empty() && !a->key_file.empty() && a->jobs >= 0 && argc % 2 == 1;
}

}  // namespace

int main(int argc, char** argv) {
  Args args;
  if (!Parse(argc, argv, &args)) {
    std::cerr << "usage: chaos_check --server HOST:PORT --output URI --key PUB.pem --jobs N [--copy-files K] "
                 "[--faults FILE]\n";
    return 2;
  }
  absl::StatusOr<quark::Ed25519PublicKey> key = quark::Ed25519PublicKey::FromPem(ReadFile(args.key_file));
  absl::StatusOr<quark::storage::S3Config> s3 = quark::storage::LoadS3Config(quark::storage::ProcessEnvironment());
  if (!key.ok() || !s3.ok()) {
    std::cerr << "chaos_check: --key " << args.key_file << ": " << key.status() << "; S3: " << s3.status() << "\n";
    return 2;
  }
  quark::storage::StorageOptions options;
  options.s3 = *s3;
  std::shared_ptr<quark::storage::ObjectStore> store = quark::storage::MakeObjectStore(options);
  auto stub = pb::QuantizationService::NewStub(grpc::CreateChannel(args.server, grpc::InsecureChannelCredentials()));

  std::vector<pb::Job> list = ListAll(*stub);
  if (static_cast<int>(list.size()) != args.jobs) Violation(absl::StrCat(list.size(), " jobs, expected ", args.jobs));
  std::map<std::string, pb::Job> jobs;
  std::map<std::string, JobTimeline> timelines;
  std::map<pb::JobState, int> by_state;
  std::set<std::string> accounted;
  int attempts = 0, stale = 0, retried = 0;
  for (const pb::Job& job : list) {
    jobs[job.id()] = job;
    ++by_state[job.state()];
    attempts += job.attempts_size();
    retried += job.attempts_size() > 1 ? 1 : 0;
    if (!IsTerminal(job.state())) Violation(absl::StrCat(job.id(), ": not terminal: ", pb::JobState_Name(job.state())));
    std::vector<pb::JobEvent> events = Events(*stub, job.id());
    CheckEvents(job, events);
    JobTimeline& timeline = timelines[job.id()];
    for (const pb::Attempt& a : job.attempts()) {
      timeline.attempts.push_back(
          AttemptSpan{a.worker_id(), Ms(a.started_at()), a.has_ended_at() ? Ms(a.ended_at()) : 0});
    }
    for (const pb::JobEvent& e : events) timeline.event_ms.push_back(Ms(e.time()));
    std::sort(timeline.event_ms.begin(), timeline.event_ms.end());
    if (job.state() == pb::JOB_STATE_SUCCEEDED) {
      std::set<std::string> listed = CheckSucceeded(job, *store, *key, args, &stale);
      accounted.insert(listed.begin(), listed.end());
    } else {
      // Every fault is transient and jobs have 10 attempts: a job that did not succeed is a finding.
      Violation(absl::StrCat(job.id(), ": ", pb::JobState_Name(job.state()), ": ", job.error().substr(0, 300)));
    }
  }
  // Job by job: s3rver answers a listing past 1,000 keys (a continuation) with 500 InternalError. Folders of no
  // known job are chaos_run.sh's check (it reads s3rver's data folder).
  std::vector<quark::storage::ObjectInfo> objects;
  for (const auto& [id, job] : jobs) {
    absl::StatusOr<std::vector<quark::storage::ObjectInfo>> listed = store->List(absl::StrCat(args.output, "/", id));
    if (!listed.ok()) {
      std::cerr << "chaos_check: listing " << args.output << "/" << id << ": " << listed.status() << "\n";
      return 2;
    }
    objects.insert(objects.end(), listed->begin(), listed->end());
  }
  CheckObjects(objects, jobs, accounted, args);

  const int n = std::max<int>(1, static_cast<int>(list.size()));
  std::cout << "jobs " << list.size() << ": succeeded " << by_state[pb::JOB_STATE_SUCCEEDED] << ", failed "
            << by_state[pb::JOB_STATE_FAILED] << ", cancelled " << by_state[pb::JOB_STATE_CANCELLED] << "\n";
  std::cout << "attempts " << attempts << ", jobs run more than once " << retried << ", re-executions per 1000 jobs "
            << (attempts - static_cast<int>(list.size())) * 1000 / n << ", manifests of a superseded attempt " << stale
            << "\n";
  std::cout << "objects under " << args.output << " in the jobs' folders: " << objects.size() << "\n";
  PrintRecovery(args, timelines);
  std::cout << (violations.empty() ? "invariants: all hold"
                                   : absl::StrCat("invariants: ", violations.size(), " violations"))
            << "\n";
  return violations.empty() ? 0 : 1;
}
