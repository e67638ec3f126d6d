// ComputeContentKey (#17): what is in a job's content key and what is not, and which specs get none.
#include "server/dedup/content_key.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <set>

#include <nlohmann/json.hpp>

#include "core/config/presets.h"
#include "core/config/proto_convert.h"
#include "core/config/quark_json.h"
#include "server/api/model_view.h"
#include "tests/server/test_util.h"

namespace quark::server {
namespace {

namespace pb = quark::v1;

class ContentKeyTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::filesystem::create_directories(dir_.File("m/sub"));
    Write("m/config.json", "{}");
    Write("m/sub/w.bin", "weights");
    Write("calib.txt", "text");
    std::filesystem::create_directories(other_.File("model"));
    std::ofstream(other_.File("theirs.txt")) << "another tenant's text";
    std::ofstream(other_.File("model/config.json")) << "{\"theirs\": true}";
  }
  void Write(const std::string& name, const std::string& text) { std::ofstream(dir_.File(name)) << text; }

  pb::JobSpec Spec() {
    pb::JobSpec spec;
    spec.set_model_uri("file://" + dir_.File("m"));
    spec.set_preset("fp8");
    spec.set_output_uri("file://" + dir_.File("out"));
    spec.mutable_calibration()->set_uri("file://" + dir_.File("calib.txt"));
    return spec;
  }
  std::string Key(const pb::JobSpec& spec) {
    absl::StatusOr<ContentKey> key = ComputeContentKey(spec, &cache_, {dir_.path()});
    EXPECT_TRUE(key.ok()) << key.status();
    return key.ok() ? key->key : "";
  }
  std::string NotKeyed(const pb::JobSpec& spec) {
    absl::StatusOr<ContentKey> key = ComputeContentKey(spec, &cache_, {dir_.path()});
    EXPECT_TRUE(key.ok()) << key.status();
    EXPECT_TRUE(key.ok() && key->key.empty());
    return key.ok() ? key->not_keyed : "";
  }

  testing::TempDir dir_;
  testing::TempDir other_;  // another tenant's files, outside the caller's roots
  FileDigestCache cache_;
};

// #30: the quantization_config an HF-quark export of mxfp8 declares (E8M0 tiles [1, 32], MX fp8 input), sent back as
// spec.config, is resolved by quarkd as the worker resolves it, as the mxfp8 preset: the same key, so such a job is
// deduplicated against the preset's. The 2-D tiles of mxfp8_2d are another quantization: another key.
TEST_F(ContentKeyTest, TheExportedMxfp8ConfigIsKeyedAsTheMxfp8Preset) {
  pb::JobSpec preset = Spec();
  preset.set_preset("mxfp8");
  // The layer as `quark quantize --scheme mxfp8` writes it into config.json's quantization_config.
  const nlohmann::ordered_json exported = nlohmann::ordered_json::parse(R"({"global_quant_config": {
      "input_tensors": {"dtype": "fp8_e4m3", "qscheme": "per_group", "observer_cls": "PerBlockMXObserver",
        "is_dynamic": true, "symmetric": true, "ch_axis": -1, "group_size": 32, "block_size": null,
        "round_method": "half_even", "scale_type": "float", "scale_format": "e8m0", "scale_calculation_mode": "even",
        "mx_element_dtype": null, "zero_point_type": "int32"},
      "output_tensors": null,
      "weight": {"dtype": "fp8_e4m3", "qscheme": "per_block", "observer_cls": "PerBlock2DMinMaxObserver",
        "is_dynamic": false, "symmetric": true, "ch_axis": null, "group_size": null, "block_size": [1, 32],
        "round_method": "half_even", "scale_type": "float8_e8m0fnu", "scale_format": "e8m0",
        "scale_calculation_mode": "even", "mx_element_dtype": null, "zero_point_type": "int32"},
      "bias": null, "target_device": null},
    "exclude": ["lm_head"]})");
  absl::StatusOr<quark::Config> read = ConfigFromQuarkJson(exported);
  ASSERT_TRUE(read.ok()) << read.status();
  pb::JobSpec fed = Spec();
  *fed.mutable_config() = ToProto(*read);
  EXPECT_EQ(Key(fed), Key(preset));
  pb::JobSpec tiles = Spec();
  *tiles.mutable_config() = ToProto(*PresetConfig("mxfp8_2d"));
  EXPECT_NE(Key(tiles), Key(preset));
}

TEST_F(ContentKeyTest, SameContentSameKeyWhateverTheOutputLabelsAndOrder) {
  std::string base = Key(Spec());
  EXPECT_EQ(base.size(), 64u);
  pb::JobSpec other = Spec();
  other.set_output_uri("file://" + dir_.File("elsewhere"));
  (*other.mutable_labels())["team"] = "a";
  other.set_priority(7);
  other.set_max_attempts(1);
  other.set_deadline_seconds(60);
  other.set_force(true);
  other.mutable_calibration()->set_num_samples(128);  // the default, spelled out
  other.add_export_formats(pb::EXPORT_FORMAT_HF_QUARK);
  EXPECT_EQ(Key(other), base);

  pb::JobSpec a = Spec();
  a.add_exclude("x");
  a.add_exclude("y");
  a.add_export_formats(pb::EXPORT_FORMAT_GGUF);
  a.add_export_formats(pb::EXPORT_FORMAT_ONNX);
  pb::JobSpec b = Spec();
  b.add_exclude("y");
  b.add_exclude("x");
  b.add_exclude("x");
  b.add_export_formats(pb::EXPORT_FORMAT_ONNX);
  b.add_export_formats(pb::EXPORT_FORMAT_GGUF);
  EXPECT_EQ(Key(a), Key(b));
  EXPECT_NE(Key(a), base);
  EXPECT_EQ(cache_.files_hashed(), 3) << "every file hashed once, however many keys";
}

TEST_F(ContentKeyTest, EveryInputThatChangesTheOutputChangesTheKey) {
  std::string base = Key(Spec());
  std::vector<pb::JobSpec> variants(16, Spec());
  variants[0].set_preset("int8");
  variants[1].set_kv_cache_dtype("fp8");
  variants[2].mutable_calibration()->set_seed(7);
  variants[3].mutable_calibration()->set_seq_len(64);
  variants[4].mutable_evaluation()->set_max_windows(3);
  variants[5].add_algo_config()->mutable_gptq();
  variants[6].add_export_formats(pb::EXPORT_FORMAT_GGUF);
  variants[7].set_gguf_type("Q8_0");
  variants[7].add_export_formats(pb::EXPORT_FORMAT_GGUF);
  for (int i = 8; i < 11; ++i) {  // the K-quant options (#37)
    variants[i].set_gguf_type("Q8_0");
    variants[i].add_export_formats(pb::EXPORT_FORMAT_GGUF);
  }
  variants[8].set_gguf_pure(true);
  variants[9].set_gguf_imatrix_from_calibration(true);
  variants[10].set_gguf_imatrix_uri(variants[10].calibration().uri());  // a file's digest, as the calibration's
  variants[11].mutable_resources()->set_compute_dtype("bf16");  // #27: bf16 activations, another artifact
  // #36: a sensitivity pass, and (item 4) each of its layer ranges, is another result than the quantization.
  for (int i = 12; i < 16; ++i) variants[i].set_sensitivity_pass(true);
  variants[13].set_sensitivity_layer_count(2);
  variants[14].set_sensitivity_first_layer(2);
  variants[14].set_sensitivity_layer_count(2);
  variants[15].set_sensitivity_layer_count(4);
  std::set<std::string> keys = {base};
  for (const pb::JobSpec& spec : variants) keys.insert(Key(spec));
  EXPECT_EQ(keys.size(), variants.size() + 1);

  pb::JobSpec float32 = Spec();
  float32.mutable_resources()->set_compute_dtype("f32");
  EXPECT_EQ(Key(float32), base) << "\"f32\" is the default: the key of a job that did not say it";

  Write("calib.txt", "other text");
  EXPECT_NE(Key(Spec()), base);
  Write("calib.txt", "text");
  EXPECT_EQ(Key(Spec()), base);
  Write("m/sub/extra.bin", "");
  EXPECT_NE(Key(Spec()), base) << "a new (even empty) file is a new model";
}

TEST_F(ContentKeyTest, WhatQuarkdCannotDigestIsNotKeyed) {
  pb::JobSpec s3 = Spec();
  s3.set_model_uri("s3://bucket/m");
  EXPECT_NE(NotKeyed(s3).find("s3://"), std::string::npos);
  pb::JobSpec s3_data = Spec();
  s3_data.mutable_calibration()->set_uri("s3://bucket/calib.txt");
  EXPECT_NE(NotKeyed(s3_data).find("calibration.uri"), std::string::npos);
  std::filesystem::create_directories(dir_.File("empty"));
  pb::JobSpec empty = Spec();
  empty.set_model_uri("file://" + dir_.File("empty"));
  EXPECT_NE(NotKeyed(empty).find("holds no files"), std::string::npos);
  pb::JobSpec missing = Spec();
  missing.set_model_uri("file://" + dir_.File("nowhere"));
  EXPECT_FALSE(NotKeyed(missing).empty());
  std::filesystem::create_symlink(other_.File("theirs.txt"), dir_.File("m/linked.txt"));
  EXPECT_NE(NotKeyed(Spec()).find("outside the allowed roots"), std::string::npos);
}

// #29 item 2: the digests are read as the worker reads the files. A symlink inside the caller's roots is followed
// (the key covers the content read); one leading to another tenant's file, a data file swapped for such a link,
// or a model folder swapped for one, is never read: the job is not keyed, and no digest of the other file exists.
TEST_F(ContentKeyTest, FilesAreReadOnlyInsideTheCallersRoots) {
  const std::string base = Key(Spec());
  const int64_t hashed = cache_.files_hashed();
  std::filesystem::create_symlink(dir_.File("calib.txt"), dir_.File("m/linked.txt"));
  const std::string linked = Key(Spec());
  EXPECT_NE(linked, base) << "a linked file inside the roots is part of the model";
  EXPECT_EQ(cache_.files_hashed(), hashed) << "the linked file is calib.txt, hashed already (same inode)";
  std::filesystem::remove(dir_.File("m/linked.txt"));

  std::filesystem::rename(dir_.File("calib.txt"), dir_.File("calib.real"));
  std::filesystem::create_symlink(other_.File("theirs.txt"), dir_.File("calib.txt"));
  EXPECT_NE(NotKeyed(Spec()).find("calibration.uri"), std::string::npos);
  std::filesystem::remove(dir_.File("calib.txt"));
  std::filesystem::rename(dir_.File("calib.real"), dir_.File("calib.txt"));
  // The renames changed calib.txt's ctime, part of the digest cache's key: it is hashed again, as a changed file is.
  EXPECT_EQ(Key(Spec()), base);
  EXPECT_EQ(cache_.files_hashed(), hashed + 1) << "calib.txt again, nothing of the other tenant's";
  const int64_t rehashed = cache_.files_hashed();

  std::filesystem::rename(dir_.File("m"), dir_.File("m.real"));
  std::filesystem::create_directory_symlink(other_.File("model"), dir_.File("m"));
  EXPECT_NE(NotKeyed(Spec()).find("model_uri"), std::string::npos);
  EXPECT_EQ(cache_.files_hashed(), rehashed) << "nothing of the other tenant's was hashed";

  // The evaluation estimate's size comes through the same walk: a swapped file is not measured.
  EXPECT_EQ(*ConfinedFileSize({dir_.path()}, dir_.File("m.real/sub/w.bin")), 7);
  std::filesystem::create_symlink(other_.File("theirs.txt"), dir_.File("eval.txt"));
  EXPECT_EQ(ConfinedFileSize({dir_.path()}, dir_.File("eval.txt")).status().code(), absl::StatusCode::kPermissionDenied);
}

}  // namespace
}  // namespace quark::server
