// #35 item 4: the trainable rotation entry (Quark's RotationConfig trainable=True plus the training arguments of its
// rotation script) in every form of the Config: Quark's dict, the proto and its JSON; Quark 0.13's other rotation keys
// read at the values the engine implements; validation naming algo_config[i].field.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "core/config/config_json.h"
#include "core/config/presets.h"
#include "core/config/proto_convert.h"
#include "core/config/quark_json.h"
#include "core/config/validation.h"

namespace quark {
namespace {

using ::testing::HasSubstr;
namespace pb = quark::v1;

// Every rotation field away from its default.
RotationAlgo TrainedEntry() {
  RotationAlgo r;
  r.random = true;
  r.r2 = false;
  r.r4 = true;
  r.trainable = true;
  r.learning_rate = 0.75;
  r.max_steps = 12;
  r.train_batch_size = 3;
  r.seed = 7;
  r.max_memory_bytes = int64_t{1} << 28;
  return r;
}

Config WithRotation(const RotationAlgo& r) {
  Config c = *PresetConfig("uint4_wo_128");
  c.algo_config = {r};
  return c;
}

absl::StatusOr<Config> FromQuarkAlgo(const nlohmann::ordered_json& algo) {
  nlohmann::ordered_json dict = ConfigToQuarkJson(*PresetConfig("uint4_wo_128"));
  dict["algo_config"] = nlohmann::ordered_json::array({algo});
  return ConfigFromQuarkJson(dict);
}

TEST(RotationConfigTest, TrainableEntryRoundTripsThroughEveryForm) {
  const Config c = WithRotation(TrainedEntry());
  const auto dict = ConfigToQuarkJson(c);
  const auto& entry = dict["algo_config"][0];
  EXPECT_EQ(entry["trainable"], true);
  EXPECT_EQ(entry["learning_rate"], 0.75);
  EXPECT_EQ(entry["max_steps"], 12);
  EXPECT_EQ(entry["r2"], false);
  EXPECT_EQ(entry["r4"], true);
  auto back = ConfigFromQuarkJson(dict);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(*back, c) << dict.dump(2);
  auto from_proto = FromProto(ToProto(c));
  ASSERT_TRUE(from_proto.ok()) << from_proto.status();
  EXPECT_EQ(*from_proto, c);
  auto json = ConfigToProtoJson(c);
  ASSERT_TRUE(json.ok());
  auto from_json = ConfigFromAnyJson(*json);
  ASSERT_TRUE(from_json.ok()) << from_json.status() << "\n" << *json;
  EXPECT_EQ(*from_json, c);
  // Each field counts in the equality the round trips rely on.
  RotationAlgo other = TrainedEntry();
  other.seed = 8;
  EXPECT_FALSE(other == TrainedEntry());
  other = TrainedEntry();
  other.max_memory_bytes += 1;
  EXPECT_FALSE(other == TrainedEntry());
  other = TrainedEntry();
  other.r4 = false;
  EXPECT_FALSE(other == TrainedEntry());
}

// A Hadamard entry is written as before the trainable fields existed: Quark's keys only.
TEST(RotationConfigTest, HadamardEntryWritesNoTrainingArguments) {
  const auto entry = ConfigToQuarkJson(WithRotation(RotationAlgo{}))["algo_config"][0];
  for (const char* key : {"trainable", "learning_rate", "max_steps", "train_batch_size", "seed", "max_memory_bytes", "r2",
                          "r4"}) {
    EXPECT_FALSE(entry.contains(key)) << key << " in " << entry.dump();
  }
}

// The proto's unset training arguments are Quark's script's defaults (SpinQuant's: lr 1.5, 100 steps, batch 1).
TEST(RotationConfigTest, UnsetProtoFieldsTakeTheDefaults) {
  pb::AlgoConfig p;
  p.mutable_rotation()->set_trainable(true);
  const auto algo = FromProto(p, "algo_config[0]");
  ASSERT_TRUE(algo.ok()) << algo.status();
  const auto& r = std::get<RotationAlgo>(*algo);
  EXPECT_TRUE(r.trainable && r.r2);
  EXPECT_EQ(r.learning_rate, 1.5);
  EXPECT_EQ(r.max_steps, 100);
  EXPECT_EQ(r.train_batch_size, 1);
  EXPECT_EQ(r.seed, 0u);
  EXPECT_EQ(r.max_memory_bytes, int64_t{8} << 30);
}

// Quark 0.13's RotationConfig.to_dict() keys at the values the engine implements read as one entry.
TEST(RotationConfigTest, ReadsQuark013KeysAtTheImplementedValues) {
  auto c = FromQuarkAlgo(nlohmann::ordered_json::parse(R"({
      "name": "rotation", "r1": true, "r2": true, "r3": false, "r4": false, "rotation_size": null,
      "random_r1": true, "random_r2": true, "backbone": "model", "model_decoder_layers": "model.layers",
      "v_proj": "self_attn.v_proj", "o_proj": "self_attn.o_proj", "self_attn": "self_attn", "mlp": "mlp",
      "online_r1_rotation": false, "online_config": null, "trainable": true, "train_smooth": false,
      "smooth_positions": [], "max_steps": 5})"));
  ASSERT_TRUE(c.ok()) << c.status();
  const auto& r = std::get<RotationAlgo>(c->algo_config[0]);
  EXPECT_TRUE(r.random && r.r2 && r.trainable);
  EXPECT_EQ(r.max_steps, 5);
  EXPECT_EQ(r.learning_rate, 1.5);
}

TEST(RotationConfigTest, UnimplementedQuarkValuesAndUnknownKeysNameTheKey) {
  const struct {
    const char* entry;
    absl::StatusCode code;
    const char* field;
  } cases[] = {
      {R"({"name": "rotation", "r3": true})", absl::StatusCode::kUnimplemented, "algo_config[0].r3"},
      {R"({"name": "rotation", "r4": "yes"})", absl::StatusCode::kInvalidArgument, "algo_config[0].r4"},
      {R"({"name": "rotation", "r1": false})", absl::StatusCode::kUnimplemented, "algo_config[0].r1"},
      {R"({"name": "rotation", "online_r1_rotation": true})", absl::StatusCode::kUnimplemented,
       "algo_config[0].online_r1_rotation"},
      {R"({"name": "rotation", "rotation_size": 32})", absl::StatusCode::kUnimplemented, "algo_config[0].rotation_size"},
      {R"({"name": "rotation", "train_smooth": true})", absl::StatusCode::kUnimplemented, "algo_config[0].train_smooth"},
      {R"({"name": "rotation", "mlp": "feed_forward"})", absl::StatusCode::kUnimplemented, "algo_config[0].mlp"},
      {R"({"name": "rotation", "random_r1": true, "random_r2": false})", absl::StatusCode::kUnimplemented,
       "algo_config[0].random_r2"},
      {R"({"name": "rotation", "lr": 1.0})", absl::StatusCode::kInvalidArgument, "algo_config[0].lr"},
      {R"({"name": "rotation", "max_steps": 2.5})", absl::StatusCode::kInvalidArgument, "algo_config[0].max_steps"},
      {R"({"name": "rotation", "trainable": "yes"})", absl::StatusCode::kInvalidArgument, "algo_config[0].trainable"},
      {R"({"name": "rotation", "seed": -1})", absl::StatusCode::kInvalidArgument, "algo_config[0].seed"},
  };
  for (const auto& c : cases) {
    auto config = FromQuarkAlgo(nlohmann::ordered_json::parse(c.entry));
    ASSERT_FALSE(config.ok()) << c.entry;
    EXPECT_EQ(config.status().code(), c.code) << c.entry << ": " << config.status();
    EXPECT_THAT(config.status().message(), HasSubstr(std::string(c.field) + ":")) << c.entry;
  }
}

// #35 item 4: R3 (online Hadamards on the attention's queries and keys) has no reader: vLLM's compressed-tensors path
// does not implement its q_attn / k_cache transforms yet; the refusal says so.
TEST(RotationConfigTest, R3IsRefusedWithVllmsReason) {
  auto config = FromQuarkAlgo(nlohmann::ordered_json::parse(R"({"name": "rotation", "r3": true, "r4": true})"));
  ASSERT_FALSE(config.ok());
  EXPECT_EQ(config.status().code(), absl::StatusCode::kUnimplemented);
  EXPECT_THAT(config.status().message(), HasSubstr("algo_config[0].r3: true is not implemented"));
  EXPECT_THAT(config.status().message(), HasSubstr("vLLM's compressed-tensors loader does not implement"));
}

// Quark's r4 reads as RotationAlgo::r4 (an online Hadamard on down_proj's input) from Quark's dict.
TEST(RotationConfigTest, R4ReadsFromQuarksDict) {
  auto c = FromQuarkAlgo(nlohmann::ordered_json::parse(R"({"name": "rotation", "r1": true, "r3": false, "r4": true})"));
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_TRUE(std::get<RotationAlgo>(c->algo_config[0]).r4);
  auto off = FromQuarkAlgo(nlohmann::ordered_json::parse(R"({"name": "rotation", "r4": false})"));
  ASSERT_TRUE(off.ok()) << off.status();
  EXPECT_FALSE(std::get<RotationAlgo>(off->algo_config[0]).r4);
}

TEST(RotationConfigTest, ValidationNamesTheTrainingArgument) {
  const auto error = [](const std::function<void(RotationAlgo&)>& edit) {
    RotationAlgo r;
    r.trainable = true;
    edit(r);
    return std::string(ValidationStatus(ValidateConfig(WithRotation(r))).message());
  };
  EXPECT_EQ(error([](RotationAlgo&) {}), "");
  EXPECT_THAT(error([](RotationAlgo& r) { r.max_steps = 0; }), HasSubstr("algo_config[0].max_steps"));
  EXPECT_THAT(error([](RotationAlgo& r) { r.max_steps = -3; }), HasSubstr("algo_config[0].max_steps"));
  EXPECT_THAT(error([](RotationAlgo& r) { r.learning_rate = 0; }), HasSubstr("algo_config[0].learning_rate"));
  EXPECT_THAT(error([](RotationAlgo& r) { r.learning_rate = 10.5; }), HasSubstr("algo_config[0].learning_rate"));
  EXPECT_THAT(error([](RotationAlgo& r) { r.train_batch_size = 0; }), HasSubstr("algo_config[0].train_batch_size"));
  EXPECT_THAT(error([](RotationAlgo& r) { r.max_memory_bytes = 0; }), HasSubstr("algo_config[0].max_memory_bytes"));
  // A training argument on an entry that does not train would do nothing: refused, naming it.
  EXPECT_THAT(error([](RotationAlgo& r) {
                r.trainable = false;
                r.learning_rate = 0.5;
              }),
              HasSubstr("algo_config[0].learning_rate"));
}

}  // namespace
}  // namespace quark
