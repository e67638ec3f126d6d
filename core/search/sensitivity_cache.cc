#include "core/search/sensitivity_cache.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "core/base/digest.h"
#include "core/base/strings.h"
#include "core/config/quark_json.h"

namespace quark::search {
namespace {

namespace fs = std::filesystem;
using OrderedJson = nlohmann::ordered_json;

constexpr int kFormatVersion = 1;

absl::Status Bad(const std::string& field, const std::string& what) {
  return absl::InvalidArgumentError(StrCat(field, ": ", what));
}

// A JSON array of numbers as doubles, of exactly `size` entries.
absl::StatusOr<std::vector<double>> Numbers(const OrderedJson& j, const std::string& field, size_t size) {
  if (!j.is_array() || j.size() != size) return Bad(field, StrCat("expected an array of ", size, " numbers"));
  std::vector<double> out;
  for (size_t i = 0; i < j.size(); ++i) {
    if (!j[i].is_number()) return Bad(StrCat(field, "[", i, "]"), "not a number");
    out.push_back(j[i].get<double>());
  }
  return out;
}

absl::StatusOr<LinearGroup> GroupFromJson(const OrderedJson& j, const std::string& path) {
  if (!j.is_object() || !j.contains("name") || !j["name"].is_string()) return Bad(path + ".name", "missing");
  if (!j.contains("layer") || !j["layer"].is_number_integer()) return Bad(path + ".layer", "missing");
  if (!j.contains("modules") || !j["modules"].is_array()) return Bad(path + ".modules", "missing");
  LinearGroup g{j["name"].get<std::string>(), j["layer"].get<int64_t>(), {}, 0};
  for (size_t i = 0; i < j["modules"].size(); ++i) {
    const OrderedJson& m = j["modules"][i];
    const std::string at = StrCat(path, ".modules[", i, "]");
    if (!m.is_object() || !m.contains("name") || !m["name"].is_string()) return Bad(at + ".name", "missing");
    if (!m.contains("shape") || !m["shape"].is_array() || m["shape"].size() != 2 ||
        !m["shape"][0].is_number_integer() || !m["shape"][1].is_number_integer()) {
      return Bad(at + ".shape", "expected [out, in]");
    }
    ModuleInfo info{m["name"].get<std::string>(), "Linear",
                    {m["shape"][0].get<int64_t>(), m["shape"][1].get<int64_t>()}};
    g.params += info.weight_shape[0] * info.weight_shape[1];
    g.modules.push_back(std::move(info));
  }
  return g;
}

}  // namespace

absl::StatusOr<std::string> ModelDigest(const std::string& model_dir) {
  std::error_code ec;
  if (!fs::is_regular_file(fs::path(model_dir) / "config.json", ec)) {
    return absl::NotFoundError(StrCat(model_dir, ": no config.json"));
  }
  std::vector<fs::path> files{fs::path(model_dir) / "config.json"};
  for (const auto& entry : fs::directory_iterator(model_dir, ec)) {
    if (entry.path().extension() == ".safetensors") files.push_back(entry.path());
  }
  std::sort(files.begin() + 1, files.end());
  std::string all;
  for (const fs::path& f : files) {
    auto digest = Sha256FileHex(f);
    if (!digest.ok()) return digest.status();
    all += StrCat(f.filename().string(), "=", *digest, "\n");
  }
  return Sha256Hex(all);
}

std::string SensitivityKey(const std::string& model_digest, const std::vector<std::vector<int64_t>>& samples,
                           const std::vector<Candidate>& candidates) {
  std::string text = StrCat("quark-sensitivity-v", kFormatVersion, "\nmodel ", model_digest, "\n");
  for (const auto& s : samples) text += StrCat("sample ", StrJoin(s, " "), "\n");
  for (const Candidate& c : candidates) text += StrCat("candidate ", c.name, " ", LayerConfigToQuarkJson(c.config).dump(), "\n");
  return Sha256Hex(text);
}

OrderedJson SensitivityToJson(const SensitivityTable& table) {
  OrderedJson j;
  j["version"] = kFormatVersion;
  j["key"] = table.key;
  j["float_nll"] = table.float_nll;
  j["tokens"] = table.tokens;
  OrderedJson groups = OrderedJson::array();
  for (const LinearGroup& g : table.groups) {
    OrderedJson modules = OrderedJson::array();
    for (const ModuleInfo& m : g.modules) modules.push_back({{"name", m.name}, {"shape", m.weight_shape}});
    groups.push_back({{"name", g.name}, {"layer", g.layer}, {"params", g.params}, {"modules", modules}});
  }
  j["groups"] = groups;
  OrderedJson passes = OrderedJson::array();
  for (const CandidatePass& p : table.passes) {
    passes.push_back({{"candidate", p.candidate}, {"seconds", p.seconds}, {"kld", p.kld},
                      {"nll_increase", p.nll_increase}});
  }
  j["passes"] = passes;
  return j;
}

absl::StatusOr<SensitivityTable> SensitivityFromJson(const OrderedJson& j, const std::string& path) {
  if (!j.is_object()) return Bad(path, "not a JSON object");
  if (!j.contains("version") || j["version"] != kFormatVersion) {
    return Bad(path + ".version", StrCat("expected ", kFormatVersion));
  }
  SensitivityTable t;
  if (!j.contains("key") || !j["key"].is_string()) return Bad(path + ".key", "missing");
  t.key = j["key"].get<std::string>();
  if (!j.contains("float_nll") || !j["float_nll"].is_number()) return Bad(path + ".float_nll", "missing");
  t.float_nll = j["float_nll"].get<double>();
  if (!j.contains("tokens") || !j["tokens"].is_number_integer()) return Bad(path + ".tokens", "missing");
  t.tokens = j["tokens"].get<int64_t>();
  if (!j.contains("groups") || !j["groups"].is_array()) return Bad(path + ".groups", "missing");
  for (size_t i = 0; i < j["groups"].size(); ++i) {
    auto g = GroupFromJson(j["groups"][i], StrCat(path, ".groups[", i, "]"));
    if (!g.ok()) return g.status();
    t.groups.push_back(*std::move(g));
  }
  if (!j.contains("passes") || !j["passes"].is_array()) return Bad(path + ".passes", "missing");
  for (size_t i = 0; i < j["passes"].size(); ++i) {
    const OrderedJson& p = j["passes"][i];
    const std::string at = StrCat(path, ".passes[", i, "]");
    if (!p.is_object() || !p.contains("candidate") || !p["candidate"].is_string()) return Bad(at + ".candidate", "missing");
    CandidatePass pass;
    pass.candidate = p["candidate"].get<std::string>();
    pass.seconds = p.value("seconds", 0.0);
    auto kld = Numbers(p.value("kld", OrderedJson()), at + ".kld", t.groups.size());
    if (!kld.ok()) return kld.status();
    auto nll = Numbers(p.value("nll_increase", OrderedJson()), at + ".nll_increase", t.groups.size());
    if (!nll.ok()) return nll.status();
    pass.kld = *std::move(kld);
    pass.nll_increase = *std::move(nll);
    t.passes.push_back(std::move(pass));
  }
  return t;
}

absl::StatusOr<std::optional<SensitivityTable>> LoadCachedSensitivity(const std::string& cache_dir,
                                                                      const std::string& key) {
  const fs::path path = fs::path(cache_dir) / (key + ".json");
  std::error_code ec;
  if (!fs::exists(path, ec)) return std::optional<SensitivityTable>();
  std::ifstream in(path);
  const OrderedJson j = OrderedJson::parse(in, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return absl::InternalError(StrCat(path.string(), ": not valid JSON"));
  auto table = SensitivityFromJson(j, path.string());
  if (!table.ok()) return absl::InternalError(std::string(table.status().message()));
  if (table->key != key) return absl::InternalError(StrCat(path.string(), ": holds key ", table->key));
  return std::optional<SensitivityTable>(*std::move(table));
}

absl::Status StoreSensitivity(const std::string& cache_dir, const SensitivityTable& table) {
  std::error_code ec;
  fs::create_directories(cache_dir, ec);
  if (ec) return absl::InternalError(StrCat(cache_dir, ": ", ec.message()));
  const fs::path path = fs::path(cache_dir) / (table.key + ".json");
  const fs::path partial = fs::path(path).concat(".partial");
  {
    std::ofstream out(partial);
    out << SensitivityToJson(table).dump(1) << "\n";
    if (!out) return absl::InternalError(StrCat(partial.string(), ": cannot write"));
  }
  fs::rename(partial, path, ec);
  if (ec) return absl::InternalError(StrCat(path.string(), ": ", ec.message()));
  return absl::OkStatus();
}

}  // namespace quark::search
