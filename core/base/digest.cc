#include "core/base/digest.h"

#include <fstream>
#include <vector>

#include <openssl/evp.h>
#include <openssl/hmac.h>

namespace quark {
namespace {

struct MdCtxDeleter {
  void operator()(EVP_MD_CTX* ctx) const { EVP_MD_CTX_free(ctx); }
};
using MdCtx = std::unique_ptr<EVP_MD_CTX, MdCtxDeleter>;

std::string Digest(const EVP_MD* md, std::string_view data) {
  unsigned char out[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  EVP_Digest(data.data(), data.size(), out, &len, md, nullptr);
  return std::string(reinterpret_cast<char*>(out), len);
}

MdCtx NewCtx(const EVP_MD* md) {
  MdCtx ctx(EVP_MD_CTX_new());
  EVP_DigestInit_ex(ctx.get(), md, nullptr);
  return ctx;
}

std::string FinishHex(EVP_MD_CTX* ctx) {
  unsigned char out[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  EVP_DigestFinal_ex(ctx, out, &len);
  return HexEncode(std::string_view(reinterpret_cast<char*>(out), len));
}

absl::StatusOr<std::string> FileDigestHex(const EVP_MD* md, const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(path.string() + ": cannot open for reading");
  MdCtx ctx = NewCtx(md);
  std::vector<char> buffer(1 << 20);
  while (in) {
    in.read(buffer.data(), static_cast<std::streamsize>(buffer.size()));
    if (in.gcount() > 0) EVP_DigestUpdate(ctx.get(), buffer.data(), static_cast<size_t>(in.gcount()));
  }
  if (in.bad()) return absl::InternalError(path.string() + ": read error");
  return FinishHex(ctx.get());
}

}  // namespace

std::string HexEncode(std::string_view bytes) {
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string out;
  out.reserve(bytes.size() * 2);
  for (unsigned char c : bytes) {
    out.push_back(kDigits[c >> 4]);
    out.push_back(kDigits[c & 15]);
  }
  return out;
}

std::string Sha256Hex(std::string_view data) { return HexEncode(Digest(EVP_sha256(), data)); }

absl::StatusOr<std::string> Sha256FileHex(const std::filesystem::path& path) {
  return FileDigestHex(EVP_sha256(), path);
}

std::string HmacSha256(std::string_view key, std::string_view data) {
  unsigned char out[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  HMAC(EVP_sha256(), key.data(), static_cast<int>(key.size()), reinterpret_cast<const unsigned char*>(data.data()),
       data.size(), out, &len);
  return std::string(reinterpret_cast<char*>(out), len);
}

std::string Md5(std::string_view data) { return Digest(EVP_md5(), data); }

absl::StatusOr<std::string> Md5FileHex(const std::filesystem::path& path) { return FileDigestHex(EVP_md5(), path); }

std::string Base64Encode(std::string_view bytes) {
  std::string out(4 * ((bytes.size() + 2) / 3) + 1, '\0');
  int n = EVP_EncodeBlock(reinterpret_cast<unsigned char*>(out.data()),
                          reinterpret_cast<const unsigned char*>(bytes.data()), static_cast<int>(bytes.size()));
  out.resize(static_cast<size_t>(n));
  return out;
}

struct StreamingDigest::Impl {
  MdCtx sha = NewCtx(EVP_sha256());
  MdCtx md5 = NewCtx(EVP_md5());
};

StreamingDigest::StreamingDigest() : impl_(std::make_unique<Impl>()) {}
StreamingDigest::~StreamingDigest() = default;

void StreamingDigest::Update(std::string_view data) {
  EVP_DigestUpdate(impl_->sha.get(), data.data(), data.size());
  EVP_DigestUpdate(impl_->md5.get(), data.data(), data.size());
}

void StreamingDigest::Finish(std::string* sha256_hex, std::string* md5_hex) {
  std::string sha = FinishHex(impl_->sha.get());
  std::string md5 = FinishHex(impl_->md5.get());
  if (sha256_hex) *sha256_hex = std::move(sha);
  if (md5_hex) *md5_hex = std::move(md5);
}

}  // namespace quark
