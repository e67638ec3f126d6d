#include "core/base/ed25519.h"

#include <fstream>
#include <sstream>

#include <openssl/bio.h>
#include <openssl/evp.h>
#include <openssl/pem.h>

#include "absl/strings/str_cat.h"
#include "core/base/digest.h"

namespace quark {
namespace {

constexpr size_t kRawKeyBytes = 32;
constexpr size_t kSignatureBytes = 64;

struct PkeyDeleter {
  void operator()(EVP_PKEY* key) const { EVP_PKEY_free(key); }
};
using Pkey = std::unique_ptr<EVP_PKEY, PkeyDeleter>;
struct BioDeleter {
  void operator()(BIO* bio) const { BIO_free(bio); }
};
using Bio = std::unique_ptr<BIO, BioDeleter>;
struct MdCtxDeleter {
  void operator()(EVP_MD_CTX* ctx) const { EVP_MD_CTX_free(ctx); }
};
using MdCtx = std::unique_ptr<EVP_MD_CTX, MdCtxDeleter>;

Bio MemoryBio(std::string_view text) { return Bio(BIO_new_mem_buf(text.data(), static_cast<int>(text.size()))); }

std::string RawPublicKey(EVP_PKEY* key) {
  std::string raw(kRawKeyBytes, '\0');
  size_t length = raw.size();
  EVP_PKEY_get_raw_public_key(key, reinterpret_cast<unsigned char*>(raw.data()), &length);
  raw.resize(length);
  return raw;
}

bool IsEd25519(EVP_PKEY* key) { return key != nullptr && EVP_PKEY_get_id(key) == EVP_PKEY_ED25519; }

}  // namespace

absl::StatusOr<std::string> Base64Decode(std::string_view text) {
  if (text.size() % 4 != 0) return absl::InvalidArgumentError("base64: length is not a multiple of 4");
  std::string out(text.size() / 4 * 3, '\0');
  const int n = EVP_DecodeBlock(reinterpret_cast<unsigned char*>(out.data()),
                                reinterpret_cast<const unsigned char*>(text.data()), static_cast<int>(text.size()));
  if (n < 0) return absl::InvalidArgumentError("base64: not valid base64");
  size_t padding = 0;
  for (size_t i = text.size(); i > 0 && text[i - 1] == '=' && padding < 2; --i) ++padding;
  out.resize(static_cast<size_t>(n) - padding);
  return out;
}

Ed25519PublicKey::Ed25519PublicKey(std::string raw)
    : raw_(std::move(raw)), key_id_(Sha256Hex(raw_).substr(0, 16)) {}

absl::StatusOr<Ed25519PublicKey> Ed25519PublicKey::FromRaw(std::string_view raw) {
  if (raw.size() != kRawKeyBytes) {
    return absl::InvalidArgumentError(absl::StrCat("public key: ", raw.size(), " bytes, an Ed25519 key has 32"));
  }
  return Ed25519PublicKey(std::string(raw));
}

absl::StatusOr<Ed25519PublicKey> Ed25519PublicKey::FromBase64(std::string_view text) {
  absl::StatusOr<std::string> raw = Base64Decode(text);
  if (!raw.ok()) return absl::InvalidArgumentError(absl::StrCat("public key: ", raw.status().message()));
  return FromRaw(*raw);
}

absl::StatusOr<Ed25519PublicKey> Ed25519PublicKey::FromPem(std::string_view pem) {
  Bio bio = MemoryBio(pem);
  Pkey key(PEM_read_bio_PUBKEY(bio.get(), nullptr, nullptr, nullptr));
  if (!IsEd25519(key.get())) return absl::InvalidArgumentError("public key: not a PEM Ed25519 PUBLIC KEY");
  return Ed25519PublicKey(RawPublicKey(key.get()));
}

std::string Ed25519PublicKey::base64() const { return Base64Encode(raw_); }

std::string Ed25519PublicKey::pem() const {
  Pkey key(EVP_PKEY_new_raw_public_key(EVP_PKEY_ED25519, nullptr,
                                       reinterpret_cast<const unsigned char*>(raw_.data()), raw_.size()));
  Bio bio(BIO_new(BIO_s_mem()));
  PEM_write_bio_PUBKEY(bio.get(), key.get());
  char* data = nullptr;
  const long length = BIO_get_mem_data(bio.get(), &data);
  return std::string(data, static_cast<size_t>(length));
}

bool Ed25519PublicKey::Verify(std::string_view message, std::string_view signature) const {
  if (signature.size() != kSignatureBytes) return false;
  Pkey key(EVP_PKEY_new_raw_public_key(EVP_PKEY_ED25519, nullptr,
                                       reinterpret_cast<const unsigned char*>(raw_.data()), raw_.size()));
  MdCtx ctx(EVP_MD_CTX_new());
  if (!key || !ctx || EVP_DigestVerifyInit(ctx.get(), nullptr, nullptr, nullptr, key.get()) != 1) return false;
  return EVP_DigestVerify(ctx.get(), reinterpret_cast<const unsigned char*>(signature.data()), signature.size(),
                          reinterpret_cast<const unsigned char*>(message.data()), message.size()) == 1;
}

struct Ed25519Signer::Key {
  Pkey pkey;
};

Ed25519Signer::Ed25519Signer(std::unique_ptr<Key> key, Ed25519PublicKey public_key)
    : key_(std::move(key)), public_key_(std::move(public_key)) {}

Ed25519Signer::~Ed25519Signer() = default;

absl::StatusOr<std::unique_ptr<Ed25519Signer>> Ed25519Signer::FromPem(std::string_view pem) {
  Bio bio = MemoryBio(pem);
  Pkey key(PEM_read_bio_PrivateKey(bio.get(), nullptr, nullptr, nullptr));
  if (!IsEd25519(key.get())) {
    return absl::InvalidArgumentError(
        "not a PEM Ed25519 PRIVATE KEY (make one with: openssl genpkey -algorithm ed25519 -out KEY.pem)");
  }
  absl::StatusOr<Ed25519PublicKey> public_key = Ed25519PublicKey::FromRaw(RawPublicKey(key.get()));
  if (!public_key.ok()) return public_key.status();
  auto holder = std::make_unique<Key>();
  holder->pkey = std::move(key);
  return std::unique_ptr<Ed25519Signer>(new Ed25519Signer(std::move(holder), *std::move(public_key)));
}

absl::StatusOr<std::unique_ptr<Ed25519Signer>> Ed25519Signer::FromPemFile(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat(path.string(), ": cannot open the signing key"));
  std::ostringstream text;
  text << in.rdbuf();
  absl::StatusOr<std::unique_ptr<Ed25519Signer>> signer = FromPem(text.str());
  if (!signer.ok()) return absl::InvalidArgumentError(absl::StrCat(path.string(), ": ", signer.status().message()));
  return signer;
}

std::string Ed25519Signer::Sign(std::string_view message) const {
  std::string signature(kSignatureBytes, '\0');
  size_t length = signature.size();
  MdCtx ctx(EVP_MD_CTX_new());
  EVP_DigestSignInit(ctx.get(), nullptr, nullptr, nullptr, key_->pkey.get());
  EVP_DigestSign(ctx.get(), reinterpret_cast<unsigned char*>(signature.data()), &length,
                 reinterpret_cast<const unsigned char*>(message.data()), message.size());
  signature.resize(length);
  return signature;
}

}  // namespace quark
