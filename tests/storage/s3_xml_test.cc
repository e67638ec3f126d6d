#include "worker/storage/s3_xml.h"

#include <gtest/gtest.h>

namespace quark::storage {
namespace {

TEST(S3XmlTest, ExtractsListResult) {
  std::string xml =
      "<ListBucketResult><KeyCount>2</KeyCount><IsTruncated>false</IsTruncated>"
      "<Contents><Key>a&amp;b.txt</Key><Size>3</Size><ETag>&quot;abc&quot;</ETag></Contents>"
      "<Contents><Key>c</Key><Size>10</Size></Contents></ListBucketResult>";
  std::vector<std::string> contents = XmlElements(xml, "Contents");
  ASSERT_EQ(contents.size(), 2u);
  EXPECT_EQ(XmlFirst(contents[0], "Key"), "a&b.txt");
  EXPECT_EQ(XmlFirst(contents[0], "ETag"), "\"abc\"");
  EXPECT_EQ(XmlFirst(contents[1], "Size"), "10");
  EXPECT_EQ(XmlFirst(xml, "Key"), "a&b.txt");  // not confused by <KeyCount>
  EXPECT_EQ(XmlFirst(xml, "Missing"), "");
}

TEST(S3XmlTest, RoundTripsEscapes) {
  EXPECT_EQ(XmlUnescape(XmlEscape("<a & \"b\" 'c'>")), "<a & \"b\" 'c'>");
  EXPECT_EQ(XmlUnescape("&#233;&#x41;"), "\xc3\xa9" "A");
}

}  // namespace
}  // namespace quark::storage
