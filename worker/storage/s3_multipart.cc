// Multipart uploads: create, upload parts in order, complete; abort on any failure.
#include <fstream>

#include "core/base/digest.h"
#include "worker/storage/strings.h"
#include "worker/storage/s3_object_store.h"
#include "worker/storage/s3_xml.h"

namespace quark::storage {

absl::StatusOr<std::vector<std::string>> S3ObjectStore::UploadParts(const ObjectUri& target,
                                                                    const std::string& upload_id,
                                                                    const std::filesystem::path& file, int64_t size) {
  std::ifstream in(file, std::ios::binary);
  if (!in) return absl::NotFoundError(str::Cat(file.string(), ": cannot open for reading"));
  std::vector<std::string> etags;
  std::string part;
  for (int64_t offset = 0, number = 1; offset < size; offset += config_.part_size_bytes, ++number) {
    int64_t length = std::min(config_.part_size_bytes, size - offset);
    part.resize(static_cast<size_t>(length));
    in.read(part.data(), length);
    if (in.gcount() != length) {
      return absl::InternalError(str::Cat(file.string(), ": short read at byte offset ", offset));
    }
    std::string what = str::Cat("PUT ", target.ToString(), " part ", number);
    Call call{"PUT", target.bucket, target.key,
              {{"partNumber", str::Cat(number)}, {"uploadId", upload_id}},
              {{"content-md5", Base64Encode(Md5(part))}}, part};
    absl::StatusOr<HttpResponse> response = Send(call, what);
    if (!response.ok()) return response.status();
    if (response->status / 100 != 2) return S3ErrorStatus(*response, what);
    std::string etag = response->Header("etag");
    if (etag.empty()) return absl::InternalError(str::Cat(what, ": answer has no ETag"));
    etags.push_back(etag);
  }
  return etags;
}

absl::Status S3ObjectStore::PutMultipart(const ObjectUri& target, const std::filesystem::path& file, int64_t size) {
  std::string what = str::Cat("PUT ", target.ToString(), " (multipart)");
  absl::StatusOr<HttpResponse> created =
      Send(Call{"POST", target.bucket, target.key, {{"uploads", ""}}, {{"content-type", "application/octet-stream"}}},
           what);
  if (!created.ok()) return created.status();
  if (created->status / 100 != 2) return S3ErrorStatus(*created, what);
  std::string upload_id = XmlFirst(created->body, "UploadId");
  if (upload_id.empty()) return absl::InternalError(str::Cat(what, ": answer has no UploadId"));

  absl::StatusOr<std::vector<std::string>> etags = UploadParts(target, upload_id, file, size);
  absl::Status status = etags.status();
  if (status.ok()) {
    std::string body = "<CompleteMultipartUpload>";
    for (size_t i = 0; i < etags->size(); ++i) {
      str::Append(&body, "<Part><PartNumber>", i + 1, "</PartNumber><ETag>", XmlEscape((*etags)[i]),
                      "</ETag></Part>");
    }
    str::Append(&body, "</CompleteMultipartUpload>");
    absl::StatusOr<HttpResponse> done =
        Send(Call{"POST", target.bucket, target.key, {{"uploadId", upload_id}}, {}, body}, what);
    status = done.status();
    // S3 may answer 200 and still carry an <Error> in the body of CompleteMultipartUpload.
    if (status.ok() && (done->status / 100 != 2 || !XmlFirst(done->body, "Code").empty())) {
      status = S3ErrorStatus(done->status / 100 == 2 ? HttpResponse{500, {}, done->body} : *done, what);
    }
  }
  if (!status.ok()) {
    // Best effort: an abandoned upload costs storage but is never visible as an object.
    Send(Call{"DELETE", target.bucket, target.key, {{"uploadId", upload_id}}}, what).IgnoreError();
  }
  return status;
}

}  // namespace quark::storage
