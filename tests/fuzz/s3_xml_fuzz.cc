// libFuzzer target for the XML reading of S3's answers (worker/storage/s3_xml.cc): ListObjectsV2, multipart
// upload and error documents come from the network, so any bytes must be read without a crash.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "worker/storage/s3_xml.h"

namespace {

void Check(bool condition) {
  if (!condition) __builtin_trap();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view xml(reinterpret_cast<const char*>(data), size);
  // The tags the S3 client reads (s3_object_store.cc, s3_multipart.cc).
  for (std::string_view tag : {"Key", "Size", "ETag", "Contents", "IsTruncated", "NextContinuationToken", "UploadId",
                               "Code", "Message", "CommonPrefixes", "Prefix"}) {
    for (const std::string& element : quark::storage::XmlElements(xml, tag)) Check(element.size() <= size);
    (void)quark::storage::XmlFirst(xml, tag);
  }
  // Escaping then unescaping gives back any text.
  Check(quark::storage::XmlUnescape(quark::storage::XmlEscape(xml)) == xml);
  // An element written by escaping reads back as its text.
  const std::string document = "<Key>" + quark::storage::XmlEscape(xml) + "</Key>";
  Check(quark::storage::XmlFirst(document, "Key") == xml);
  (void)quark::storage::XmlUnescape(xml);
  return 0;
}
