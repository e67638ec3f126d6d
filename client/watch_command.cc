// quarkctl watch and submit --wait: follow a job's event stream to its end, resuming after broken streams.
#include <thread>

#include "client/commands.h"
#include "client/output.h"
#include "absl/strings/str_cat.h"

namespace quark::client {
namespace {

bool Terminal(quark::v1::JobState state) {
  return state == quark::v1::JOB_STATE_SUCCEEDED || state == quark::v1::JOB_STATE_FAILED ||
         state == quark::v1::JOB_STATE_CANCELLED;
}

// Draws progress on stderr: one rewritten line on a terminal, else a line per phase change or 10% step.
class ProgressDisplay {
 public:
  ProgressDisplay(std::ostream& err, bool tty) : err_(err), tty_(tty) {}
  ~ProgressDisplay() { Finish(); }

  void Show(const quark::v1::Progress& progress) {
    if (tty_) {
      std::string line = ProgressBar(progress);
      err_ << "\r" << line << std::string(last_width_ > line.size() ? last_width_ - line.size() : 0, ' ')
           << std::flush;
      last_width_ = line.size();
      return;
    }
    int decile = static_cast<int>(progress.fraction() * 10);
    if (progress.phase() == last_phase_ && decile == last_decile_) return;
    last_phase_ = progress.phase();
    last_decile_ = decile;
    err_ << ProgressBar(progress) << "\n" << std::flush;
  }

  void Finish() {
    if (tty_ && last_width_ > 0) err_ << "\n" << std::flush;
    last_width_ = 0;
  }

 private:
  std::ostream& err_;  // the caller's stream, alive for the whole command
  bool tty_;
  size_t last_width_ = 0;
  std::string last_phase_;
  int last_decile_ = -1;
};

}  // namespace

std::string StatusCodeName(grpc::StatusCode code) {
  static const char* const kNames[] = {"OK", "CANCELLED", "UNKNOWN", "INVALID_ARGUMENT", "DEADLINE_EXCEEDED",
                                       "NOT_FOUND", "ALREADY_EXISTS", "PERMISSION_DENIED", "RESOURCE_EXHAUSTED",
                                       "FAILED_PRECONDITION", "ABORTED", "OUT_OF_RANGE", "UNIMPLEMENTED", "INTERNAL",
                                       "UNAVAILABLE", "DATA_LOSS", "UNAUTHENTICATED"};
  int index = static_cast<int>(code);
  return index >= 0 && index < 17 ? kNames[index] : absl::StrCat("CODE_", index);
}

// quiet_events (submit --wait): only the progress display and the final job; otherwise every event is printed
// (table: one line each; json: one JobEvent per line) and the final Job ends the output.
int WatchCommand(CommandContext& ctx, const std::string& id, int64_t after, bool quiet_events) {
  ProgressDisplay display(*ctx.err, ctx.err_is_tty);
  int broken_streams = 0;
  for (;;) {
    grpc::ClientContext context;
    quark::v1::WatchJobRequest request;
    request.set_id(id);
    request.set_after_sequence(after);
    std::unique_ptr<grpc::ClientReader<quark::v1::JobEvent>> reader = ctx.stub->WatchJob(&context, request);
    quark::v1::JobEvent event;
    bool ended = false;
    while (reader->Read(&event)) {
      broken_streams = 0;
      after = std::max(after, event.sequence());
      if (!quiet_events) *ctx.out << (ctx.json ? ToJsonLine(event) : EventLine(event)) << "\n" << std::flush;
      if (event.has_progress()) display.Show(event.progress());
      if (event.event_case() == quark::v1::JobEvent::kState && Terminal(event.state())) ended = true;
    }
    grpc::Status status = reader->Finish();
    if (ended || status.ok()) break;
    // A restarted or briefly unreachable quarkd: resume after the last event seen.
    if (status.error_code() != grpc::StatusCode::UNAVAILABLE || ++broken_streams > 5) {
      display.Finish();
      *ctx.err << "quarkctl: WatchJob on " << ctx.server << ": " << StatusCodeName(status.error_code()) << ": "
               << status.error_message() << "\n";
      return kExitRpcError;
    }
    std::this_thread::sleep_for(std::chrono::seconds(1));
  }
  display.Finish();
  quark::v1::GetJobRequest get;
  get.set_id(id);
  quark::v1::Job job;
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + ctx.timeout);
  grpc::Status status = ctx.stub->GetJob(&context, get, &job);
  if (!status.ok()) {
    *ctx.err << "quarkctl: GetJob on " << ctx.server << ": " << status.error_message() << "\n";
    return kExitRpcError;
  }
  *ctx.out << (ctx.json ? ToJsonLine(job) + "\n" : JobTable(job)) << std::flush;
  return ExitCodeForState(job.state());
}

}  // namespace quark::client
