#include "worker/storage/object_uri.h"

#include <gtest/gtest.h>

namespace quark::storage {
namespace {

TEST(ObjectUriTest, ParsesS3) {
  absl::StatusOr<ObjectUri> uri = ParseObjectUri("s3://bucket/a/b.bin");
  ASSERT_TRUE(uri.ok()) << uri.status();
  EXPECT_EQ(uri->scheme, ObjectUri::Scheme::kS3);
  EXPECT_EQ(uri->bucket, "bucket");
  EXPECT_EQ(uri->key, "a/b.bin");
  EXPECT_EQ(uri->ToString(), "s3://bucket/a/b.bin");
}

TEST(ObjectUriTest, ParsesFileSpellings) {
  for (const char* text : {"file:///data/x", "file:/data/x"}) {
    absl::StatusOr<ObjectUri> uri = ParseObjectUri(text);
    ASSERT_TRUE(uri.ok()) << text;
    EXPECT_EQ(uri->scheme, ObjectUri::Scheme::kFile);
    EXPECT_EQ(uri->key, "/data/x");
    EXPECT_EQ(uri->ToString(), "file:///data/x");
  }
}

TEST(ObjectUriTest, RejectsBadUris) {
  for (const char* text : {"http://x/y", "file://host/x", "file:relative", "s3:///key", "", "/plain/path"}) {
    absl::StatusOr<ObjectUri> uri = ParseObjectUri(text);
    EXPECT_EQ(uri.status().code(), absl::StatusCode::kInvalidArgument) << text;
  }
  EXPECT_NE(ParseObjectUri("http://x/y").status().message().find("http://x/y"), std::string::npos);
}

TEST(ObjectUriTest, JoinsWithOneSlash) {
  EXPECT_EQ(JoinUri("s3://b/out/", "/j1/a.bin"), "s3://b/out/j1/a.bin");
  EXPECT_EQ(JoinUri("file:///o", "m.json"), "file:///o/m.json");
}

}  // namespace
}  // namespace quark::storage
