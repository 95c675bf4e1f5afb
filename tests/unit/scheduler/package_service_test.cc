// PackageServiceImpl served over loopback gRPC on a head's state, whose
// packages are written to an in-memory state store: an upload is then
// stated and downloaded (in chunks) as the same bytes with the same digest,
// and a second upload of it is "already stored"; a bad upload (bytes that
// do not hash to the digest, a malformed digest, no header, a header sent
// twice, fewer or more bytes than the header said, a size of 0 or over the
// head's limit) is refused naming its field and stores nothing, in memory
// or in the state store; an unknown package is stated as not stored and
// its download is NOT_FOUND naming the digest.
#include "scheduler/package_service.h"

#include <memory>
#include <string>
#include <vector>

#include "berth/v1/head.grpc.pb.h"
#include "common/working_dir_package.h"
#include "gmock/gmock.h"
#include "grpcpp/server.h"
#include "gtest/gtest.h"
#include "tests/unit/loopback_server.h"

namespace berth {
namespace {

using ::testing::IsEmpty;
using ::testing::StartsWith;

constexpr uint64_t kLimitBytes = 4 << 20;  // the head's --package-limit-mb, here 4 MiB
constexpr size_t kPieceBytes = 1 << 20;    // the most an upload message carries

// `n` bytes that are not all alike.
std::string Bytes(size_t n) {
  std::string s;
  s.reserve(n);
  for (size_t i = 0; i < n; ++i) s.push_back(static_cast<char>((i * 31 + i / 977) & 0xff));
  return s;
}

v1::UploadPackageRequest Header(const std::string& digest, uint64_t size_bytes) {
  v1::UploadPackageRequest r;
  r.mutable_header()->set_digest(digest);
  r.mutable_header()->set_size_bytes(size_bytes);
  return r;
}

v1::UploadPackageRequest Data(const std::string& bytes) {
  v1::UploadPackageRequest r;
  r.set_data(bytes);
  return r;
}

// An upload as a client sends it: the header, then the bytes in pieces.
std::vector<v1::UploadPackageRequest> Upload(const std::string& digest, uint64_t size_bytes,
                                             const std::string& bytes) {
  std::vector<v1::UploadPackageRequest> messages = {Header(digest, size_bytes)};
  for (size_t offset = 0; offset < bytes.size(); offset += kPieceBytes) {
    messages.push_back(Data(bytes.substr(offset, kPieceBytes)));
  }
  return messages;
}

class PackageServiceTest : public ::testing::Test {
 protected:
  static HeadConfig Config() {
    HeadConfig config;
    config.package_limit_bytes = kLimitBytes;
    return config;
  }

  void SetUp() override {
    int port = 0;
    server_ = testing::ServeOnLoopback(&service_, &port);
    ASSERT_NE(server_, nullptr);
    stub_ = v1::PackageService::NewStub(testing::LoopbackChannel(port));
  }
  void TearDown() override {
    server_->Shutdown(absl::ToChronoTime(absl::Now() + absl::Seconds(1)));
  }

  // Sends `messages` (all of them, unless the head has answered already).
  grpc::Status Send(const std::vector<v1::UploadPackageRequest>& messages,
                    v1::UploadPackageResponse* response) {
    std::unique_ptr<grpc::ClientContext> context = testing::CallContext();
    std::unique_ptr<grpc::ClientWriter<v1::UploadPackageRequest>> writer =
        stub_->UploadPackage(context.get(), response);
    for (const v1::UploadPackageRequest& m : messages) {
      if (!writer->Write(m)) break;  // the head answered: Finish says how
    }
    writer->WritesDone();
    return writer->Finish();
  }

  grpc::Status Stat(const std::string& digest, v1::StatPackageResponse* response) {
    v1::StatPackageRequest request;
    request.set_digest(digest);
    return stub_->StatPackage(testing::CallContext().get(), request, response);
  }

  // The messages of the package's download.
  grpc::Status Download(const std::string& digest,
                        std::vector<v1::DownloadPackageResponse>* chunks) {
    v1::DownloadPackageRequest request;
    request.set_digest(digest);
    std::unique_ptr<grpc::ClientContext> context = testing::CallContext();
    std::unique_ptr<grpc::ClientReader<v1::DownloadPackageResponse>> reader =
        stub_->DownloadPackage(context.get(), request);
    v1::DownloadPackageResponse chunk;
    while (reader->Read(&chunk)) chunks->push_back(chunk);
    return reader->Finish();
  }

  // How many records the head's state store holds in `table`.
  size_t Stored(const char* table) {
    absl::StatusOr<std::vector<StateStore::Record>> records = state_.store().Scan(table);
    EXPECT_TRUE(records.ok()) << records.status();
    return records.ok() ? records->size() : 0;
  }

  // Nothing of `digest` is held: not stated, not downloadable, not in the
  // head's memory; and the state store holds no package at all.
  void ExpectNothingStored(const std::string& digest) {
    v1::StatPackageResponse stat;
    ASSERT_TRUE(Stat(digest, &stat).ok());
    EXPECT_FALSE(stat.stored());
    std::vector<v1::DownloadPackageResponse> chunks;
    EXPECT_EQ(Download(digest, &chunks).error_code(), grpc::StatusCode::NOT_FOUND);
    EXPECT_EQ(state_.packages.Get(digest), nullptr);
    EXPECT_EQ(Stored(PackageStore::kRecordsTable), 0u);
    EXPECT_EQ(Stored(PackageStore::kChunksTable), 0u);
  }

  HeadState state_{Config(), NewMemoryStateStore()};
  PackageServiceImpl service_{&state_};
  std::unique_ptr<grpc::Server> server_;
  std::unique_ptr<v1::PackageService::Stub> stub_;
};

TEST_F(PackageServiceTest, AnUploadIsStatedAndDownloadedAsTheSameBytes) {
  // Past one download message (1 MiB) and one store chunk (512 KiB).
  const std::string bytes = Bytes(2 * kPieceBytes + 12345);
  const std::string digest = DigestOf(bytes);
  v1::StatPackageResponse stat;
  ASSERT_TRUE(Stat(digest, &stat).ok());
  EXPECT_FALSE(stat.stored());

  v1::UploadPackageResponse uploaded;
  grpc::Status s = Send(Upload(digest, bytes.size(), bytes), &uploaded);
  ASSERT_TRUE(s.ok()) << s.error_message();
  EXPECT_EQ(uploaded.digest(), digest);
  EXPECT_FALSE(uploaded.already_stored());

  ASSERT_TRUE(Stat(digest, &stat).ok());
  EXPECT_TRUE(stat.stored());
  EXPECT_EQ(stat.size_bytes(), bytes.size());

  std::vector<v1::DownloadPackageResponse> chunks;
  s = Download(digest, &chunks);
  ASSERT_TRUE(s.ok()) << s.error_message();
  ASSERT_EQ(chunks.size(), 3u);  // 1 MiB each
  EXPECT_EQ(chunks[0].size_bytes(), bytes.size());
  std::string downloaded;
  for (const v1::DownloadPackageResponse& chunk : chunks) downloaded += chunk.data();
  EXPECT_EQ(downloaded.size(), bytes.size());
  EXPECT_TRUE(downloaded == bytes);  // not printed: megabytes
  EXPECT_EQ(DigestOf(downloaded), digest);

  // Written to the state store: its record and its chunks.
  EXPECT_EQ(Stored(PackageStore::kRecordsTable), 1u);
  EXPECT_EQ(Stored(PackageStore::kChunksTable),
            (bytes.size() + PackageStore::kChunkBytes - 1) / PackageStore::kChunkBytes);

  // Uploaded again: OK, stored already, nothing written twice.
  s = Send(Upload(digest, bytes.size(), bytes), &uploaded);
  ASSERT_TRUE(s.ok()) << s.error_message();
  EXPECT_EQ(uploaded.digest(), digest);
  EXPECT_TRUE(uploaded.already_stored());
  EXPECT_EQ(Stored(PackageStore::kRecordsTable), 1u);
}

TEST_F(PackageServiceTest, ABadUploadNamesItsFieldAndStoresNothing) {
  const std::string bytes = Bytes(1000);
  const std::string digest = DigestOf(bytes);
  auto refused = [&](const std::vector<v1::UploadPackageRequest>& messages, grpc::StatusCode code,
                     const std::string& message) {
    v1::UploadPackageResponse response;
    grpc::Status s = Send(messages, &response);
    EXPECT_EQ(s.error_code(), code) << message << ": " << s.error_message();
    EXPECT_THAT(s.error_message(), StartsWith(message));
    EXPECT_THAT(response.digest(), IsEmpty());
  };

  // Bytes that hash to another digest.
  const std::string other = DigestOf("other bytes");
  refused(Upload(other, bytes.size(), bytes), grpc::StatusCode::INVALID_ARGUMENT,
          "header.digest: the bytes hash to " + digest + ", not " + other);
  ExpectNothingStored(other);
  ExpectNothingStored(digest);
  // Not a digest.
  refused(Upload("sha256:ABC", bytes.size(), bytes), grpc::StatusCode::INVALID_ARGUMENT,
          "header.digest: 'sha256:ABC' is not sha256:<64 lowercase hex digits>");
  refused(Upload("", bytes.size(), bytes), grpc::StatusCode::INVALID_ARGUMENT, "header.digest");
  // No header: bytes first, or nothing at all.
  refused({Data(bytes)}, grpc::StatusCode::INVALID_ARGUMENT,
          "header: the first message must be the header");
  refused({}, grpc::StatusCode::INVALID_ARGUMENT, "header: the first message must be the header");
  // The header twice.
  refused({Header(digest, bytes.size()), Data(bytes), Header(digest, bytes.size())},
          grpc::StatusCode::INVALID_ARGUMENT, "header: sent twice");
  // Fewer or more bytes than the header says.
  refused(Upload(digest, bytes.size() + 1, bytes), grpc::StatusCode::INVALID_ARGUMENT,
          "data: 1000 bytes came, header.size_bytes said 1001");
  refused(Upload(digest, bytes.size() - 1, bytes), grpc::StatusCode::INVALID_ARGUMENT,
          "data: more bytes than header.size_bytes (999)");
  // A size of 0, or past the head's limit.
  refused(Upload(digest, 0, bytes), grpc::StatusCode::RESOURCE_EXHAUSTED,
          "header.size_bytes: 0 is not in 1.." + std::to_string(kLimitBytes));
  const std::string big = Bytes(kLimitBytes + 1);
  refused(Upload(DigestOf(big), big.size(), big), grpc::StatusCode::RESOURCE_EXHAUSTED,
          "header.size_bytes: " + std::to_string(big.size()) + " is not in 1.." +
              std::to_string(kLimitBytes));
  ExpectNothingStored(digest);
  ExpectNothingStored(DigestOf(big));

  // The same bytes, sent right, are stored after all that.
  v1::UploadPackageResponse uploaded;
  ASSERT_TRUE(Send(Upload(digest, bytes.size(), bytes), &uploaded).ok());
  EXPECT_FALSE(uploaded.already_stored());
}

TEST_F(PackageServiceTest, AnUnknownPackageIsNotStoredAndNotFound) {
  const std::string digest = DigestOf("never uploaded");
  v1::StatPackageResponse stat;
  ASSERT_TRUE(Stat(digest, &stat).ok());  // a question, answered: not stored
  EXPECT_FALSE(stat.stored());
  EXPECT_EQ(stat.size_bytes(), 0u);
  std::vector<v1::DownloadPackageResponse> chunks;
  grpc::Status s = Download(digest, &chunks);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_EQ(s.error_message(), "digest: package " + digest + " is not stored on the head");
  EXPECT_THAT(chunks, IsEmpty());

  // A malformed digest is refused naming the field.
  s = Stat("md5:abc", &stat);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(s.error_message(), StartsWith("digest: 'md5:abc' is not sha256:"));
  s = Download("md5:abc", &chunks);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(s.error_message(), StartsWith("digest: 'md5:abc' is not sha256:"));
  EXPECT_THAT(chunks, IsEmpty());
}

}  // namespace
}  // namespace berth
