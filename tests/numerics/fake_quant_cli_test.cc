// `quark fake-quant` end to end: a safetensors file in, fake-quantized tensors and export codes out, equal to the
// library's results; bad specs exit 2 naming the field. Skipped when the quark binary has not been built.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include "core/checkpoint/checkpoint_reader.h"
#include "core/checkpoint/checkpoint_writer.h"
#include "core/numerics/fake_quant.h"
#include "tests/numerics/test_util.h"
#include "tests/support/require_peer.h"

namespace quark {
namespace {

namespace fs = std::filesystem;

std::string QuarkBinary() {
  if (const char* cli = std::getenv("QUARK_CLI")) return cli;
  const char* bin = std::getenv("QUARK_BINARY_DIR");
  return bin ? std::string(bin) + "/core/cli/quark" : std::string();
}

at::Tensor ReadTensor(const std::string& file, const std::string& name, at::ScalarType t) {
  auto reader = checkpoint::CheckpointReader::OpenFile(file);
  EXPECT_TRUE(reader.ok()) << reader.status();
  auto ref = (*reader)->Get(name);
  EXPECT_TRUE(ref.ok()) << ref.status();
  return at::from_blob(const_cast<char*>(ref->bytes().data()), ref->info->shape, at::dtype(t)).clone();
}

TEST(FakeQuantCliTest, WritesFakeQuantizedTensorsAndCodes) {
  const std::string quark = QuarkBinary();
  if (quark.empty() || !fs::exists(quark)) QUARK_PEER_MISSING() << "quark CLI not built";
  const fs::path dir = fs::temp_directory_path() / ("quark_fq_test_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  const at::Tensor w = testing::RandomTensor({8, 64}, 77).to(at::kBFloat16);
  {
    auto writer = checkpoint::CheckpointWriter::Create((dir / "in").string(),
                                                       {{"layer.weight", checkpoint::StDType::kBF16, {8, 64}}});
    ASSERT_TRUE(writer.ok()) << writer.status();
    ASSERT_TRUE((*writer)->Write("layer.weight", std::string_view(static_cast<const char*>(w.data_ptr()), w.nbytes())).ok());
    ASSERT_TRUE((*writer)->Finish().ok());
  }
  std::ofstream(dir / "spec.json") << R"({"dtype": "int4", "qscheme": "per_group", "group_size": 32})";
  std::ofstream(dir / "bad.json") << R"({"dtype": "int4", "qscheme": "per_group", "group_size": 48})";
  const std::string in = (dir / "in" / "model.safetensors").string();
  const std::string cmd = quark + " fake-quant --spec " + (dir / "spec.json").string() + " --input " + in +
                          " --output " + (dir / "out.safetensors").string() + " --real " +
                          (dir / "codes.safetensors").string() + " > /dev/null";
  ASSERT_EQ(std::system(cmd.c_str()), 0);
  QuantSpec spec = testing::Spec(DType::kInt4, QScheme::kPerGroup);
  spec.group_size = 32;
  const at::Tensor expected = *FakeQuantizeDynamic(w, spec);
  EXPECT_TRUE(testing::BitEqual(ReadTensor((dir / "out.safetensors").string(), "layer.weight", at::kBFloat16), expected));
  const at::Tensor qweight = ReadTensor((dir / "codes.safetensors").string(), "layer.weight.qweight", at::kInt);
  EXPECT_EQ(qweight.sizes(), (std::vector<int64_t>{64, 1}));  // (in, out / 8)
  const std::string bad = quark + " fake-quant --spec " + (dir / "bad.json").string() + " --input " + in +
                          " --output " + (dir / "o.safetensors").string() + " 2> " + (dir / "err.txt").string();
  const int rc = std::system(bad.c_str());
  EXPECT_EQ(WEXITSTATUS(rc), 2);
  std::ifstream err(dir / "err.txt");
  const std::string message((std::istreambuf_iterator<char>(err)), std::istreambuf_iterator<char>());
  EXPECT_NE(message.find("group_size: 48 does not divide 64"), std::string::npos) << message;
  fs::remove_all(dir);
}

}  // namespace
}  // namespace quark
