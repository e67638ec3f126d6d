#include "worker/storage/sigv4.h"

#include <gtest/gtest.h>

#include "core/base/digest.h"

namespace quark::storage {
namespace {

// The "get-vanilla" case of AWS's published SigV4 test suite.
TEST(SigV4Test, MatchesAwsGetVanillaVector) {
  SigV4Request request;
  request.method = "GET";
  request.encoded_path = "/";
  request.headers = {{"Host", "example.amazonaws.com"}, {"X-Amz-Date", "20150830T123600Z"}};
  request.payload_sha256_hex = Sha256Hex("");
  SigV4Credentials credentials{"AKIDEXAMPLE", "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY", ""};
  EXPECT_EQ(CanonicalRequest(request),
            "GET\n/\n\nhost:example.amazonaws.com\nx-amz-date:20150830T123600Z\n\nhost;x-amz-date\n"
            "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  EXPECT_EQ(SignV4(request, credentials, "us-east-1", "service", "20150830T123600Z"),
            "AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/20150830/us-east-1/service/aws4_request, "
            "SignedHeaders=host;x-amz-date, "
            "Signature=5fa00fa31553b73ebf1942676e86291e8372ff2a2260956d9b8aae1d763fbf31");
}

// The S3 examples of AWS's "Signature Calculations for the Authorization Header" page.
SigV4Credentials S3ExampleKeys() {
  return {"AKIAIOSFODNN7EXAMPLE", "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY", ""};
}

TEST(SigV4Test, MatchesAwsS3GetObjectExample) {
  SigV4Request request{"GET", "/test.txt", {},
                       {{"Host", "examplebucket.s3.amazonaws.com"},
                        {"Range", "bytes=0-9"},
                        {"x-amz-content-sha256", Sha256Hex("")},
                        {"x-amz-date", "20130524T000000Z"}},
                       Sha256Hex("")};
  std::string auth = SignV4(request, S3ExampleKeys(), "us-east-1", "s3", "20130524T000000Z");
  EXPECT_EQ(auth,
            "AWS4-HMAC-SHA256 Credential=AKIAIOSFODNN7EXAMPLE/20130524/us-east-1/s3/aws4_request, "
            "SignedHeaders=host;range;x-amz-content-sha256;x-amz-date, "
            "Signature=f0e8bdb87c964420e857bd35b5d6ed310bd44f0170aba48dd91039c6036bdb41");
}

TEST(SigV4Test, MatchesAwsS3PutObjectExample) {
  std::string body = "Welcome to Amazon S3.";
  SigV4Request request{"PUT", "/" + UriEncode("test$file.text", false), {},
                       {{"Host", "examplebucket.s3.amazonaws.com"},
                        {"Date", "Fri, 24 May 2013 00:00:00 GMT"},
                        {"x-amz-date", "20130524T000000Z"},
                        {"x-amz-storage-class", "REDUCED_REDUNDANCY"},
                        {"x-amz-content-sha256", Sha256Hex(body)}},
                       Sha256Hex(body)};
  std::string auth = SignV4(request, S3ExampleKeys(), "us-east-1", "s3", "20130524T000000Z");
  EXPECT_NE(auth.find("Signature=98ad721746da40c64f1a55b78f14c238d841ea1380cd77a1b5971af0ece108bd"),
            std::string::npos)
      << auth << "\n" << CanonicalRequest(request);
}

TEST(SigV4Test, MatchesAwsS3ListObjectsExample) {
  SigV4Request request{"GET", "/", {{"max-keys", "2"}, {"prefix", "J"}},
                       {{"Host", "examplebucket.s3.amazonaws.com"},
                        {"x-amz-content-sha256", Sha256Hex("")},
                        {"x-amz-date", "20130524T000000Z"}},
                       Sha256Hex("")};
  std::string auth = SignV4(request, S3ExampleKeys(), "us-east-1", "s3", "20130524T000000Z");
  EXPECT_NE(auth.find("Signature=34b48302e7b5fa45bde8084f4b7868a86f0a534bc59db6670ed5711ef69dc6f7"),
            std::string::npos)
      << auth;
}

TEST(SigV4Test, EncodesLikeAws) {
  EXPECT_EQ(UriEncode("a b/c~d_e.f-g+h*", false), "a%20b/c~d_e.f-g%2Bh%2A");
  EXPECT_EQ(UriEncode("a/b", true), "a%2Fb");
  EXPECT_EQ(UriEncode("\xc3\xa9", true), "%C3%A9");
}

TEST(SigV4Test, SortsAndEncodesQuery) {
  EXPECT_EQ(CanonicalQueryString({{"prefix", "models/x y"}, {"list-type", "2"}, {"uploads", ""}}),
            "list-type=2&prefix=models%2Fx%20y&uploads=");
}

TEST(SigV4Test, FormatsAmzDate) {
  EXPECT_EQ(AmzDate(std::chrono::system_clock::from_time_t(1440938160)), "20150830T123600Z");
}

TEST(DigestTest, KnownValues) {
  EXPECT_EQ(Sha256Hex("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  EXPECT_EQ(HexEncode(Md5("")), "d41d8cd98f00b204e9800998ecf8427e");
  EXPECT_EQ(Base64Encode(Md5("")), "1B2M2Y8AsgTpgAmY7PhCfg==");
  StreamingDigest digest;
  digest.Update("a");
  digest.Update("bc");
  std::string sha;
  std::string md5;
  digest.Finish(&sha, &md5);
  EXPECT_EQ(sha, Sha256Hex("abc"));
  EXPECT_EQ(md5, HexEncode(Md5("abc")));
}

}  // namespace
}  // namespace quark::storage
