// Signed provenance (#34): PublishArtifacts signs manifest.json with an Ed25519 key, VerifyManifest accepts it and
// names what differs after a flipped artifact byte, an edited manifest, a missing or resized file, an unknown key
// or no signature at all.
#include "worker/storage/manifest_signature.h"

#include <gtest/gtest.h>

#include <cstdlib>

#include "core/base/digest.h"
#include "tests/storage/support/subprocess.h"
#include "worker/storage/file_object_store.h"
#include "worker/storage/publish.h"

namespace quark::storage {
namespace {
namespace fs = std::filesystem;

std::unique_ptr<Ed25519Signer> NewKey(const fs::path& pem) {
  if (std::system(("openssl genpkey -algorithm ed25519 -out " + pem.string() + " 2>/dev/null").c_str()) != 0) {
    return nullptr;
  }
  absl::StatusOr<std::unique_ptr<Ed25519Signer>> signer = Ed25519Signer::FromPemFile(pem);
  return signer.ok() ? *std::move(signer) : nullptr;
}

bool Mentions(const ManifestCheck& check, const std::string& text) {
  for (const std::string& problem : check.problems) {
    if (problem.find(text) != std::string::npos) return true;
  }
  return false;
}

std::string Problems(const ManifestCheck& check) {
  std::string all;
  for (const std::string& problem : check.problems) all += problem + "\n";
  return all;
}

class ManifestSignatureTest : public ::testing::Test {
 protected:
  void SetUp() override {
    signer_ = NewKey(dir_.path() / "key.pem");
    other_ = NewKey(dir_.path() / "other.pem");
    ASSERT_TRUE(signer_ && other_) << "openssl genpkey -algorithm ed25519 failed";
    quark::testing::WriteFile(dir_.path() / "artifact/config.json", R"({"model_type":"llama"})");
    quark::testing::WriteFile(dir_.path() / "artifact/model.safetensors", std::string(4099, 'w'));
    quark::testing::WriteFile(dir_.path() / "artifact/tokenizer/tokenizer.model", "tok");
    ManifestInfo info;
    info.job_id = "job-1";
    info.config = {{"global_quant_config", {{"weight", {{"dtype", "int4"}}}}}};
    info.metrics = {{"ppl_after", 12.345678901234567}, {"seconds_total", 3.0}};
    info.extra = {{"model_uri", "file:///models/x"}, {"engine_version", "0.1.0"}};
    info.signer = signer_.get();
    absl::StatusOr<PublishResult> published =
        PublishArtifacts(store_, dir_.path() / "artifact", "file://" + Out(""), info);
    ASSERT_TRUE(published.ok()) << published.status();
    manifest_uri_ = published->manifest_uri;
  }

  std::string Out(const std::string& relative) const {
    return (dir_.path() / "out/job-1" / relative).string();
  }

  ManifestCheck Verify(const std::vector<Ed25519PublicKey>& trusted) {
    absl::StatusOr<ManifestCheck> check = VerifyManifest(store_, manifest_uri_, trusted);
    EXPECT_TRUE(check.ok()) << check.status();
    return check.ok() ? *check : ManifestCheck{};
  }
  ManifestCheck Verify() { return Verify({signer_->public_key()}); }

  quark::testing::TempDir dir_;
  FileObjectStore store_{{dir_.path() / "out"}};
  std::unique_ptr<Ed25519Signer> signer_;
  std::unique_ptr<Ed25519Signer> other_;
  std::string manifest_uri_;
};

TEST_F(ManifestSignatureTest, APublishedManifestVerifies) {
  const ManifestCheck check = Verify();
  EXPECT_TRUE(check.ok()) << Problems(check);
  EXPECT_EQ(check.key_id, signer_->public_key().key_id());
  EXPECT_EQ(check.files_checked, 3);
  const nlohmann::json doc = nlohmann::json::parse(quark::testing::ReadFile(Out("manifest.json")));
  EXPECT_EQ(doc["signature"]["algorithm"], "ed25519");
  EXPECT_EQ(doc["signature"]["key_id"], signer_->public_key().key_id());
}

TEST_F(ManifestSignatureTest, AFlippedArtifactByteIsNamed) {
  std::string bytes = quark::testing::ReadFile(Out("model.safetensors"));
  bytes[1234] ^= 0x01;
  quark::testing::WriteFile(Out("model.safetensors"), bytes);
  const ManifestCheck check = Verify();
  EXPECT_FALSE(check.ok());
  ASSERT_EQ(check.problems.size(), 1u) << Problems(check);
  EXPECT_EQ(check.problems[0].rfind("files[1] model.safetensors: sha256 ", 0), 0u) << Problems(check);
  EXPECT_TRUE(Mentions(check, "the manifest says ")) << Problems(check);
}

TEST_F(ManifestSignatureTest, AnEditedManifestFailsTheSignature) {
  nlohmann::json doc = nlohmann::json::parse(quark::testing::ReadFile(Out("manifest.json")));
  doc["metrics"]["ppl_after"] = 10.0;  // a better figure than the job measured
  quark::testing::WriteFile(Out("manifest.json"), doc.dump(2));
  const ManifestCheck check = Verify();
  ASSERT_EQ(check.problems.size(), 1u) << Problems(check);
  EXPECT_TRUE(Mentions(check, "signature: does not match the manifest's content for key " + check.key_id))
      << Problems(check);
}

TEST_F(ManifestSignatureTest, AnEditedFileListFailsTheSignatureAndTheFile) {
  // Replacing an artifact and its digest in the manifest: the files agree, the signature does not.
  quark::testing::WriteFile(Out("config.json"), R"({"model_type":"evil"})");
  nlohmann::json doc = nlohmann::json::parse(quark::testing::ReadFile(Out("manifest.json")));
  doc["files"][0]["sha256"] = Sha256Hex(R"({"model_type":"evil"})");
  quark::testing::WriteFile(Out("manifest.json"), doc.dump(2));
  const ManifestCheck check = Verify();
  EXPECT_TRUE(Mentions(check, "signature: does not match")) << Problems(check);
  EXPECT_TRUE(Mentions(check, "files[0] config.json: 21 bytes, the manifest says 22")) << Problems(check);
}

TEST_F(ManifestSignatureTest, AnUnknownKeyIsNamedByItsId) {
  const ManifestCheck check = Verify({other_->public_key()});
  ASSERT_EQ(check.problems.size(), 1u) << Problems(check);
  EXPECT_EQ(check.problems[0], "signature.key_id: the manifest was signed by key " + signer_->public_key().key_id() +
                                   ", which is not a trusted key (trusted: " + other_->public_key().key_id() + ")");
  EXPECT_TRUE(Verify({other_->public_key(), signer_->public_key()}).ok());
}

TEST_F(ManifestSignatureTest, MissingFilesAndSignaturesAreNamed) {
  fs::remove(Out("tokenizer/tokenizer.model"));
  nlohmann::json doc = nlohmann::json::parse(quark::testing::ReadFile(Out("manifest.json")));
  doc.erase("signature");
  quark::testing::WriteFile(Out("manifest.json"), doc.dump(2));
  const ManifestCheck check = Verify();
  EXPECT_TRUE(Mentions(check, "signature: missing (the manifest is not signed)")) << Problems(check);
  EXPECT_TRUE(Mentions(check, "files[2] tokenizer/tokenizer.model: missing")) << Problems(check);
  EXPECT_EQ(VerifyManifest(store_, "file://" + Out("none.json"), {signer_->public_key()}).status().code(),
            absl::StatusCode::kNotFound);
}

TEST_F(ManifestSignatureTest, TheSignatureCoversTheCanonicalFormNotTheLayout) {
  // Re-indenting the manifest (or reordering its keys) changes no signed byte.
  nlohmann::json doc = nlohmann::json::parse(quark::testing::ReadFile(Out("manifest.json")));
  quark::testing::WriteFile(Out("manifest.json"), doc.dump());
  EXPECT_TRUE(Verify().ok());
  EXPECT_EQ(ManifestSigningBytes(doc).find("signature"), std::string::npos);
}

}  // namespace
}  // namespace quark::storage
