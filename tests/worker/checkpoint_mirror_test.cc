// CheckpointMirror (#34 item 1): a job's per-layer checkpoint copied to a real store (file://, and s3rver behind
// the fault proxy) and restored into a fresh data folder; half-uploaded, overwritten, foreign and expired layers
// are never restored.
#include "worker/checkpoint_mirror.h"

#include <gtest/gtest.h>

#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "tests/storage/support/s3_test_base.h"
#include "tests/storage/support/subprocess.h"
#include "worker/storage/file_object_store.h"
#include "worker/storage/s3_object_store.h"
#include "worker/storage/tenant_object_store.h"

namespace quark::worker {
namespace {

namespace fs = std::filesystem;
using quark::testing::ReadFile;
using quark::testing::TempDir;
using quark::testing::WriteFile;

std::string LayerName(int i) {
  char name[32];
  std::snprintf(name, sizeof(name), "layer-%05d", i);
  return name;
}

// A local checkpoint as LayerCheckpoint leaves it: layers 0..layers-1 and state.json naming them.
void WriteLocal(const fs::path& dir, const std::string& fingerprint, int layers) {
  for (int i = 0; i < layers; ++i) {
    // 1025 bytes and a nested file: sizes off any block, and folders below the layer are kept.
    WriteFile(dir / LayerName(i) / "model.safetensors", std::string(1025, static_cast<char>('a' + i)) + fingerprint);
    WriteFile(dir / LayerName(i) / "extra" / "part.bin", std::string(17, static_cast<char>('A' + i)));
    WriteFile(dir / (LayerName(i) + ".json"), nlohmann::json({{"log", {"layer " + std::to_string(i)}}}).dump());
  }
  WriteFile(dir / "state.json", nlohmann::json({{"fingerprint", fingerprint}, {"finished_layers", layers}}).dump());
}

// Every file below `dir`, relative path -> bytes; state.json as its parsed content (its layout may differ).
std::map<std::string, std::string> Files(const fs::path& dir) {
  std::map<std::string, std::string> files;
  if (!fs::exists(dir)) return files;
  for (const auto& entry : fs::recursive_directory_iterator(dir)) {
    if (entry.is_regular_file()) files[fs::relative(entry.path(), dir).string()] = ReadFile(entry.path());
  }
  if (files.count("state.json"))
    files["state.json"] = nlohmann::json::parse(files["state.json"], nullptr, false).dump();
  return files;
}

int64_t FinishedLayers(const fs::path& dir) {
  const nlohmann::json state = nlohmann::json::parse(ReadFile(dir / "state.json"), nullptr, false);
  return state.is_object() ? state.value("finished_layers", int64_t{-1}) : -1;
}

class CheckpointMirrorTest : public ::testing::Test {
 protected:
  CheckpointMirrorTest() : store_(std::make_shared<storage::FileObjectStore>(std::vector<fs::path>{root_.path()})) {}

  std::unique_ptr<CheckpointMirror> Mirror(const std::string& worker, CheckpointMirrorOptions options = {}) {
    return std::make_unique<CheckpointMirror>(store_, prefix_, root_.path() / worker / "checkpoints" / "job-1",
                                              std::move(options),
                                              [this](const std::string& line) { log_.push_back(line); });
  }
  fs::path Local(const std::string& worker) const { return root_.path() / worker / "checkpoints" / "job-1"; }
  fs::path Remote() const { return root_.path() / "out" / ".quark-checkpoints" / "job-1"; }
  bool Logged(const std::string& text) const {
    for (const std::string& line : log_) {
      if (line.find(text) != std::string::npos) return true;
    }
    return false;
  }
  std::string Log() const {
    std::string all;
    for (const std::string& line : log_) all += line + "\n";
    return all;
  }

  TempDir root_;
  std::shared_ptr<storage::ObjectStore> store_;
  const std::string prefix_ = CheckpointPrefixUri("file://" + (root_.path() / "out").string(), "job-1");
  std::vector<std::string> log_;
};

TEST_F(CheckpointMirrorTest, PrefixLiesBelowTheOutput) {
  EXPECT_EQ(CheckpointPrefixUri("s3://bucket/tenant-a/out", "j7"), "s3://bucket/tenant-a/out/.quark-checkpoints/j7");
  EXPECT_EQ(CheckpointPrefixUri("s3://bucket/tenant-a/out/", "j7"), "s3://bucket/tenant-a/out/.quark-checkpoints/j7");
}

TEST_F(CheckpointMirrorTest, EachLayerGoesUpAndAFreshWorkerRestoresThemAll) {
  WriteLocal(Local("a"), "fp-1", 3);
  auto uploader = Mirror("a");
  ASSERT_TRUE(uploader->Restore().ok());
  for (int layers = 1; layers <= 3; ++layers) {
    ASSERT_TRUE(uploader->UploadThrough(layers).ok()) << Log();
    EXPECT_EQ(uploader->uploaded(), layers);
    EXPECT_TRUE(fs::exists(Remote() / ("commit-0000" + std::to_string(layers - 1) + ".json")));
  }
  auto restorer = Mirror("b");
  absl::StatusOr<int64_t> restored = restorer->Restore();
  ASSERT_TRUE(restored.ok()) << restored.status();
  EXPECT_EQ(*restored, 3);
  EXPECT_TRUE(Files(Local("b")) == Files(Local("a"))) << "the restored checkpoint is the uploaded one, byte for byte";
  EXPECT_TRUE(Logged("restored layers 0..2 from " + prefix_)) << Log();
  // The next layer of the restored run goes up after the three already there.
  WriteLocal(Local("b"), "fp-1", 4);
  ASSERT_TRUE(restorer->UploadThrough(4).ok());
  EXPECT_TRUE(fs::exists(Remote() / "commit-00003.json"));
  EXPECT_EQ(ReadFile(Remote() / "layer-00000" / "model.safetensors"),
            ReadFile(Local("a") / "layer-00000" / "model.safetensors"));
}

TEST_F(CheckpointMirrorTest, ALayerWithoutItsCommitMarkerIsNotRestored) {
  WriteLocal(Local("a"), "fp-1", 3);
  auto uploader = Mirror("a");
  ASSERT_TRUE(uploader->UploadThrough(2).ok());
  // Layer 2's objects went up, then the worker died before its marker.
  ASSERT_TRUE(
      store_->PutFile(prefix_ + "/layer-00002/model.safetensors", Local("a") / "layer-00002" / "model.safetensors")
          .ok());
  ASSERT_TRUE(store_->PutFile(prefix_ + "/layer-00002.json", Local("a") / "layer-00002.json").ok());
  auto restorer = Mirror("b");
  EXPECT_EQ(*restorer->Restore(), 2);
  EXPECT_EQ(FinishedLayers(Local("b")), 2);
  EXPECT_FALSE(fs::exists(Local("b") / "layer-00002"));
}

TEST_F(CheckpointMirrorTest, AnObjectThatDiffersFromItsMarkerStopsTheRestoreBeforeItsLayer) {
  WriteLocal(Local("a"), "fp-1", 3);
  ASSERT_TRUE(Mirror("a")->UploadThrough(3).ok());
  // A later attempt overwrote layer 1's tensors and died before writing its own marker: same size, other bytes.
  std::string bytes = ReadFile(Remote() / "layer-00001" / "model.safetensors");
  bytes[17] ^= 1;
  WriteFile(Remote() / "layer-00001" / "model.safetensors", bytes);
  auto restorer = Mirror("b");
  EXPECT_EQ(*restorer->Restore(), 1);
  EXPECT_EQ(FinishedLayers(Local("b")), 1);
  EXPECT_TRUE(Logged("layer 1 does not match its commit marker")) << Log();
  EXPECT_TRUE(Logged("layer-00001/model.safetensors")) << Log();
  EXPECT_FALSE(fs::exists(Local("b") / "layer-00001"));
  EXPECT_FALSE(fs::exists(Local("b").string() + ".download"));
}

TEST_F(CheckpointMirrorTest, AMissingObjectStopsTheRestoreBeforeItsLayer) {
  WriteLocal(Local("a"), "fp-1", 2);
  ASSERT_TRUE(Mirror("a")->UploadThrough(2).ok());
  ASSERT_TRUE(store_->Delete(prefix_ + "/layer-00001/extra/part.bin").ok());
  EXPECT_EQ(*Mirror("b")->Restore(), 1);
}

TEST_F(CheckpointMirrorTest, MarkersOfAnotherRunAreNeitherRestoredNorKept) {
  WriteLocal(Local("a"), "fp-old", 3);
  ASSERT_TRUE(Mirror("a")->UploadThrough(3).ok());
  // A run with other inputs (the engine discarded the restored checkpoint) replaces the whole prefix.
  auto other = Mirror("c");
  EXPECT_EQ(*other->Restore(), 3);
  fs::remove_all(Local("c"));  // what the engine does with a checkpoint of another fingerprint
  WriteLocal(Local("c"), "fp-new", 1);
  ASSERT_TRUE(other->UploadThrough(1).ok());
  EXPECT_FALSE(fs::exists(Remote() / "commit-00001.json")) << "the old run's later markers went";
  EXPECT_EQ(*Mirror("b")->Restore(), 1);
  EXPECT_EQ(nlohmann::json::parse(ReadFile(Local("b") / "state.json"))["fingerprint"], "fp-new");
  // A marker of another fingerprint after layer 0 ends the chain.
  nlohmann::json foreign = nlohmann::json::parse(ReadFile(Remote() / "commit-00000.json"));
  foreign["layer"] = 1;
  foreign["fingerprint"] = "fp-other";
  WriteFile(Remote() / "commit-00001.json", foreign.dump());
  fs::remove_all(Local("d"));
  EXPECT_EQ(*Mirror("d")->Restore(), 1);
  EXPECT_TRUE(Logged("commit-00001.json was left by a run with other inputs")) << Log();
}

TEST_F(CheckpointMirrorTest, AnUnreadableMarkerEndsTheChain) {
  WriteLocal(Local("a"), "fp-1", 2);
  ASSERT_TRUE(Mirror("a")->UploadThrough(2).ok());
  WriteFile(Remote() / "commit-00001.json", "{\"layer\": 1, \"objects\": {\"../../escape\": {}}}");
  EXPECT_EQ(*Mirror("b")->Restore(), 1);
  EXPECT_TRUE(Logged("commit-00001.json is unreadable")) << Log();
}

TEST_F(CheckpointMirrorTest, AnExpiredCheckpointIsDeletedNotRestored) {
  WriteLocal(Local("a"), "fp-1", 2);
  const auto written = std::chrono::system_clock::now();
  CheckpointMirrorOptions at_write;
  at_write.now = [written] { return written; };
  ASSERT_TRUE(Mirror("a", at_write)->UploadThrough(2).ok());
  CheckpointMirrorOptions later;
  later.max_age = std::chrono::seconds(3600);
  later.now = [written] { return written + std::chrono::seconds(3600); };
  EXPECT_EQ(*Mirror("b", later)->Restore(), 2) << "not expired at exactly max_age";
  fs::remove_all(Local("b"));
  later.now = [written] { return written + std::chrono::seconds(3601); };
  EXPECT_EQ(*Mirror("b", later)->Restore(), 0);
  EXPECT_TRUE(Logged("expired")) << Log();
  EXPECT_FALSE(fs::exists(Local("b")));
  EXPECT_FALSE(fs::exists(Remote())) << "deleted, folders included";
  EXPECT_FALSE(fs::exists(Remote().parent_path()));
}

TEST_F(CheckpointMirrorTest, ALocalCheckpointThatGoesFurtherIsKeptAndItsLayersGoUp) {
  WriteLocal(Local("a"), "fp-1", 1);
  ASSERT_TRUE(Mirror("a")->UploadThrough(1).ok());
  WriteLocal(Local("a"), "fp-1", 3);  // the same worker got two layers further, its uploads lost
  const auto before = Files(Local("a"));
  auto mirror = Mirror("a");
  EXPECT_EQ(*mirror->Restore(), 0);
  EXPECT_EQ(mirror->uploaded(), 1);
  EXPECT_TRUE(Files(Local("a")) == before);
  WriteLocal(Local("a"), "fp-1", 4);
  ASSERT_TRUE(mirror->UploadThrough(4).ok());
  EXPECT_EQ(*Mirror("b")->Restore(), 4);
}

TEST_F(CheckpointMirrorTest, RemoveDeletesThePrefixAndOnlyIt) {
  WriteLocal(Local("a"), "fp-1", 2);
  auto mirror = Mirror("a");
  ASSERT_TRUE(mirror->UploadThrough(2).ok());
  WriteFile(root_.path() / "out" / "job-0" / "model.safetensors", "published");
  WriteFile(root_.path() / "out" / ".quark-checkpoints" / "job-2" / "commit-00000.json", "{}");
  ASSERT_TRUE(mirror->Remove().ok());
  EXPECT_FALSE(fs::exists(Remote()));
  EXPECT_TRUE(fs::exists(root_.path() / "out" / "job-0" / "model.safetensors"));
  EXPECT_TRUE(fs::exists(root_.path() / "out" / ".quark-checkpoints" / "job-2" / "commit-00000.json"));
  EXPECT_EQ(*Mirror("b")->Restore(), 0);
}

TEST_F(CheckpointMirrorTest, UploadWithoutALocalStateIsAnError) {
  absl::Status status = Mirror("a")->UploadThrough(1);
  EXPECT_EQ(status.code(), absl::StatusCode::kInternal);
  EXPECT_NE(status.message().find("state.json"), std::string::npos) << status;
}

// The job's store confined to its tenant: the checkpoint lies below the tenant's output prefix, so it goes up and
// comes back; a store whose tenant may not write there refuses the upload, naming the URI.
TEST_F(CheckpointMirrorTest, ATenantConfinedStoreWritesBelowTheOutputPrefixOnly) {
  const std::vector<fs::path> worker_roots = {root_.path()};
  storage::TenantRoots roots;
  roots.output_prefixes = {"file://" + (root_.path() / "out").string()};
  store_ = std::make_shared<storage::TenantObjectStore>(store_, roots, worker_roots);
  WriteLocal(Local("a"), "fp-1", 2);
  ASSERT_TRUE(Mirror("a")->UploadThrough(2).ok()) << Log();
  EXPECT_EQ(*Mirror("b")->Restore(), 2);

  storage::TenantRoots other;
  other.output_prefixes = {"file://" + (root_.path() / "elsewhere").string()};
  store_ = std::make_shared<storage::TenantObjectStore>(std::make_shared<storage::FileObjectStore>(worker_roots), other,
                                                        worker_roots);
  absl::Status refused = Mirror("a")->UploadThrough(2);
  EXPECT_EQ(refused.code(), absl::StatusCode::kPermissionDenied) << refused;
  EXPECT_NE(refused.message().find(".quark-checkpoints/job-1"), std::string::npos) << refused;
}

class CheckpointMirrorS3Test : public quark::testing::S3TestBase {};

// s3rver behind the fault proxy: layer 1's marker fails past the client's retries, so layer 1 is not committed and
// a restore stops before it; the next layer's call uploads 1 and 2, and everything restores.
TEST_F(CheckpointMirrorS3Test, AFailedUploadLeavesAnEarlierLayerAndIsRetriedAtTheNext) {
  auto proxy = quark::testing::FaultProxy::Start(
      server_->endpoint(), R"([{"method":"PUT","path":"s3-job/commit-00001","status":500,"times":2}])");
  ASSERT_TRUE(proxy.ok()) << proxy.status();
  storage::S3Config config = quark::testing::S3rver::ConfigFor((*proxy)->endpoint());
  config.max_attempts = 2;
  auto store = std::make_shared<storage::S3ObjectStore>(config);
  TempDir dir;
  std::vector<std::string> log;
  auto mirror_in = [&](const std::string& worker) {
    return std::make_unique<CheckpointMirror>(store, CheckpointPrefixUri("s3://test/out", "s3-job"),
                                              dir.path() / worker, CheckpointMirrorOptions{},
                                              [&log](const std::string& line) { log.push_back(line); });
  };
  WriteLocal(dir.path() / "a", "fp-s3", 2);
  auto uploader = mirror_in("a");
  absl::Status failed = uploader->UploadThrough(2);
  EXPECT_EQ(failed.code(), absl::StatusCode::kUnavailable) << failed;
  EXPECT_EQ(uploader->uploaded(), 1);
  ASSERT_FALSE(log.empty());
  EXPECT_NE(log.back().find("a retry of the job resumes at layer 1"), std::string::npos) << log.back();
  EXPECT_EQ(*mirror_in("b")->Restore(), 1) << "layer 1's objects are there, its marker is not";

  WriteLocal(dir.path() / "a", "fp-s3", 3);
  ASSERT_TRUE(uploader->UploadThrough(3).ok());
  fs::remove_all(dir.path() / "c");
  EXPECT_EQ(*mirror_in("c")->Restore(), 3);
  EXPECT_TRUE(Files(dir.path() / "c") == Files(dir.path() / "a"));
  EXPECT_EQ((*proxy)->CountLines("fault PUT"), 2) << (*proxy)->Log();
  ASSERT_TRUE(uploader->Remove().ok());
  EXPECT_TRUE(store->List("s3://test/out/.quark-checkpoints/s3-job")->empty());
}

}  // namespace
}  // namespace quark::worker
