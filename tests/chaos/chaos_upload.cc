// The chaos run's set-up helper: uploads every file of a local folder to an S3 prefix through the worker's own
// storage layer (S3 settings from the AWS_* environment).   chaos_upload LOCAL_DIR s3://BUCKET/PREFIX
#include <filesystem>
#include <iostream>

#include "worker/storage/routing_object_store.h"
#include "worker/storage/s3_config.h"

int main(int argc, char** argv) {
  if (argc != 3) {
    std::cerr << "usage: chaos_upload LOCAL_DIR s3://BUCKET/PREFIX\n";
    return 2;
  }
  namespace fs = std::filesystem;
  absl::StatusOr<quark::storage::S3Config> s3 = quark::storage::LoadS3Config(quark::storage::ProcessEnvironment());
  if (!s3.ok()) {
    std::cerr << "chaos_upload: " << s3.status() << "\n";
    return 2;
  }
  quark::storage::StorageOptions options;
  options.s3 = *s3;
  std::shared_ptr<quark::storage::ObjectStore> store = quark::storage::MakeObjectStore(options);
  const fs::path dir = argv[1];
  std::error_code ec;
  int files = 0;
  for (auto it = fs::recursive_directory_iterator(dir, ec); !ec && it != fs::recursive_directory_iterator();
       it.increment(ec)) {
    if (!it->is_regular_file()) continue;
    const std::string uri = std::string(argv[2]) + "/" + it->path().lexically_relative(dir).generic_string();
    if (absl::Status put = store->PutFile(uri, it->path()); !put.ok()) {
      std::cerr << "chaos_upload: " << uri << ": " << put << "\n";
      return 1;
    }
    ++files;
  }
  if (ec || files == 0) {
    std::cerr << "chaos_upload: " << dir << ": " << (ec ? ec.message() : "no files") << "\n";
    return 1;
  }
  std::cout << files << "\n";
  return 0;
}
