// Ed25519 through OpenSSL against RFC 8032's test vectors (bit-exact signatures and public keys), key ids, PEM
// round trips, and the errors for keys that are not Ed25519 private keys.
#include "core/base/ed25519.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "core/base/digest.h"

namespace quark {
namespace {

std::string FromHex(const std::string& hex) {
  std::string out;
  for (size_t i = 0; i + 1 < hex.size(); i += 2) out.push_back(static_cast<char>(std::stoi(hex.substr(i, 2), nullptr, 16)));
  return out;
}

// A PKCS#8 PEM of the raw 32-byte seed (the DER prefix every Ed25519 private key shares).
std::string PrivatePem(const std::string& seed) {
  const std::string der = FromHex("302e020100300506032b657004220420") + seed;
  return "-----BEGIN PRIVATE KEY-----\n" + Base64Encode(der) + "\n-----END PRIVATE KEY-----\n";
}

struct Rfc8032Vector {
  const char* secret;
  const char* public_key;
  const char* message;
  const char* signature;
};

// RFC 8032 section 7.1, TEST 1, 2 and 3.
constexpr Rfc8032Vector kVectors[] = {
    {"9d61b19deffd5a60ba844af492ec2cc44449c5697b326919703bac031cae7f60",
     "d75a980182b10ab7d54bfed3c964073a0ee172f3daa62325af021a68f707511a", "",
     "e5564300c360ac729086e2cc806e828a84877f1eb8e5d974d873e065224901555fb8821590a33bacc61e39701cf9b46bd25bf5f0595bbe24655141438e7a100b"},
    {"4ccd089b28ff96da9db6c346ec114e0f5b8a319f35aba624da8cf6ed4fb8a6fb",
     "3d4017c3e843895a92b70aa74d1b7ebc9c982ccf2ec4968cc0cd55f12af4660c", "72",
     "92a009a9f0d4cab8720e820b5f642540a2b27b5416503f8fb3762223ebdb69da085ac1e43e15996e458f3613d0f11d8c387b2eaeb4302aeeb00d291612bb0c00"},
    {"c5aa8df43f9f837bedb7442f31dcb7b166d38535076f094b85ce3a2e0b4458f7",
     "fc51cd8e6218a1a38da47ed00230f0580816ed13ba3303ac5deb911548908025", "af82",
     "6291d657deec24024827e69c3abe01a30ce548a284743a445e3680d7db5ac3ac18ff9b538d16f290ae67f760984dc6594a7c15e9716ed28dc027beceea1ec40a"},
};

TEST(Ed25519Test, Rfc8032VectorsBitExact) {
  for (const Rfc8032Vector& v : kVectors) {
    absl::StatusOr<std::unique_ptr<Ed25519Signer>> signer = Ed25519Signer::FromPem(PrivatePem(FromHex(v.secret)));
    ASSERT_TRUE(signer.ok()) << signer.status();
    EXPECT_EQ(HexEncode((*signer)->public_key().raw()), v.public_key);
    const std::string message = FromHex(v.message);
    const std::string signature = (*signer)->Sign(message);
    EXPECT_EQ(HexEncode(signature), v.signature);
    EXPECT_TRUE((*signer)->public_key().Verify(message, signature));
    std::string flipped = signature;
    flipped[5] ^= 1;
    EXPECT_FALSE((*signer)->public_key().Verify(message, flipped));
    EXPECT_FALSE((*signer)->public_key().Verify(message + "x", signature));
  }
}

TEST(Ed25519Test, KeyIdBase64AndPemRoundTrip) {
  absl::StatusOr<std::unique_ptr<Ed25519Signer>> signer = Ed25519Signer::FromPem(PrivatePem(FromHex(kVectors[0].secret)));
  ASSERT_TRUE(signer.ok());
  const Ed25519PublicKey& key = (*signer)->public_key();
  EXPECT_EQ(key.key_id(), Sha256Hex(key.raw()).substr(0, 16));
  EXPECT_EQ(key.key_id().size(), 16u);
  absl::StatusOr<Ed25519PublicKey> from_base64 = Ed25519PublicKey::FromBase64(key.base64());
  ASSERT_TRUE(from_base64.ok()) << from_base64.status();
  EXPECT_EQ(from_base64->raw(), key.raw());
  absl::StatusOr<Ed25519PublicKey> from_pem = Ed25519PublicKey::FromPem(key.pem());
  ASSERT_TRUE(from_pem.ok()) << from_pem.status();
  EXPECT_EQ(from_pem->key_id(), key.key_id());
}

TEST(Ed25519Test, ReadsOpensslGeneratedKeysAndRefusesOthers) {
  const std::filesystem::path dir = std::filesystem::temp_directory_path() / ("ed25519-test-" + std::to_string(getpid()));
  std::filesystem::create_directories(dir);
  const std::string ed = (dir / "ed.pem").string(), ec = (dir / "ec.pem").string(), pub = (dir / "ed.pub").string();
  ASSERT_EQ(std::system(("openssl genpkey -algorithm ed25519 -out " + ed + " 2>/dev/null").c_str()), 0);
  ASSERT_EQ(std::system(("openssl pkey -in " + ed + " -pubout -out " + pub + " 2>/dev/null").c_str()), 0);
  ASSERT_EQ(std::system(("openssl genpkey -algorithm ec -pkeyopt ec_paramgen_curve:P-256 -out " + ec +
                         " 2>/dev/null").c_str()), 0);
  absl::StatusOr<std::unique_ptr<Ed25519Signer>> signer = Ed25519Signer::FromPemFile(ed);
  ASSERT_TRUE(signer.ok()) << signer.status();
  std::ifstream in(pub);
  std::string pem((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  absl::StatusOr<Ed25519PublicKey> public_key = Ed25519PublicKey::FromPem(pem);
  ASSERT_TRUE(public_key.ok()) << public_key.status();
  EXPECT_EQ(public_key->key_id(), (*signer)->public_key().key_id());

  absl::StatusOr<std::unique_ptr<Ed25519Signer>> wrong = Ed25519Signer::FromPemFile(ec);
  EXPECT_EQ(wrong.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(wrong.status().message().find(ec + ": not a PEM Ed25519 PRIVATE KEY"), std::string::npos) << wrong.status();
  absl::StatusOr<std::unique_ptr<Ed25519Signer>> missing = Ed25519Signer::FromPemFile(dir / "none.pem");
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kNotFound);
  EXPECT_FALSE(Ed25519Signer::FromPemFile(pub).ok()) << "a public key is not a signing key";
  EXPECT_EQ(Ed25519PublicKey::FromBase64("AAAA").status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(Ed25519PublicKey::FromBase64("not base64!").status().code(), absl::StatusCode::kInvalidArgument);
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace quark
