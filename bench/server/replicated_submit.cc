// The client side of replicated_bench.sh: submits N jobs round-robin over several quarkd replicas from a few
// threads; a submission whose replica is gone (killed by the benchmark) is retried on the next one with the same
// request_id, so a retry never makes a second job. Prints the submission rate and the p50/p99 latency of the
// successful SubmitJob calls. --token (repeatable): thread t sends the (t mod count)-th as its bearer token.
//   replicated_submit --jobs N --threads T --model-uri URI --output-uri URI [--token T]... ADDR [ADDR...]
#include <grpcpp/grpcpp.h>

#include <algorithm>
#include <atomic>
#include <mutex>
#include <chrono>
#include <cstdio>
#include <string>
#include <thread>
#include <vector>

#include <CLI/CLI.hpp>

#include "quark/v1/service.grpc.pb.h"

int main(int argc, char** argv) {
  CLI::App app{"submit jobs over quarkd replicas"};
  int jobs = 10000;
  int threads = 4;
  std::string model_uri, output_uri, preset = "fp8", prefix = "bench-";
  std::vector<std::string> addresses, tokens;
  app.add_option("--jobs", jobs);
  app.add_option("--threads", threads);
  app.add_option("--model-uri", model_uri)->required();
  app.add_option("--output-uri", output_uri)->required();
  app.add_option("--preset", preset);
  app.add_option("--request-prefix", prefix);
  app.add_option("--token", tokens, "bearer token; thread t uses the (t mod count)-th");
  app.add_option("addresses", addresses)->required();
  CLI11_PARSE(app, argc, argv);
  std::vector<std::unique_ptr<quark::v1::QuantizationService::Stub>> stubs;
  for (const std::string& address : addresses) {
    stubs.push_back(quark::v1::QuantizationService::NewStub(
        grpc::CreateChannel(address, grpc::InsecureChannelCredentials())));
  }
  std::atomic<int> next{0}, retries{0}, failed{0};
  std::mutex latencies_mu;
  std::vector<double> latencies_ms;
  auto start = std::chrono::steady_clock::now();
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t) {
    pool.emplace_back([&, t] {
      std::vector<double> mine;
      for (int i = next++; i < jobs; i = next++) {
        quark::v1::SubmitJobRequest request;
        request.set_request_id(prefix + std::to_string(i));
        request.mutable_spec()->set_model_uri(model_uri);
        request.mutable_spec()->set_output_uri(output_uri);
        request.mutable_spec()->set_preset(preset);
        bool done = false;
        for (int attempt = 0; attempt < 60 && !done; ++attempt) {
          grpc::ClientContext context;
          context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
          if (!tokens.empty()) context.AddMetadata("authorization", "Bearer " + tokens[t % tokens.size()]);
          quark::v1::Job job;
          auto sent = std::chrono::steady_clock::now();
          grpc::Status status = stubs[(i + attempt) % stubs.size()]->SubmitJob(&context, request, &job);
          done = status.ok();
          if (done) {
            mine.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - sent).count());
          }
          if (!done) {
            ++retries;
            std::this_thread::sleep_for(std::chrono::milliseconds(50));
          }
        }
        if (!done) ++failed;
      }
      std::lock_guard<std::mutex> lock(latencies_mu);
      latencies_ms.insert(latencies_ms.end(), mine.begin(), mine.end());
    });
  }
  for (std::thread& t : pool) t.join();
  double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::printf("submitted %d jobs in %.2f s (%.0f jobs/s), %d retried submissions, %d not submitted\n", jobs - failed,
              seconds, (jobs - failed) / seconds, retries.load(), failed.load());
  if (!latencies_ms.empty()) {
    std::sort(latencies_ms.begin(), latencies_ms.end());
    auto at = [&](double q) { return latencies_ms[static_cast<size_t>(q * (latencies_ms.size() - 1))]; };
    std::printf("SubmitJob ms: p50 %.2f, p99 %.2f, max %.2f\n", at(0.5), at(0.99), latencies_ms.back());
  }
  return failed > 0 ? 1 : 0;
}
