#include "wire/message_fingerprint.h"

#include <string>

#include "absl/strings/str_cat.h"
#include "berth/v1/head.pb.h"
#include "gtest/gtest.h"

namespace berth {
namespace {

// A registration whose labels map gets `count` entries, inserted in
// ascending or descending key order.
v1::RegisterNodeRequest WithLabels(int count, bool descending) {
  v1::RegisterNodeRequest request;
  request.set_node_id("node-1");
  request.set_request_id("r-1");
  for (int i = 0; i < count; ++i) {
    const int k = descending ? count - 1 - i : i;
    (*request.mutable_labels())[absl::StrCat("key-", k)] = absl::StrCat("value-", k);
  }
  return request;
}

TEST(MessageFingerprintTest, EqualMessagesWithMapsBuiltInAnyOrderGiveEqualBytes) {
  const v1::RegisterNodeRequest up = WithLabels(64, false);
  const v1::RegisterNodeRequest down = WithLabels(64, true);
  EXPECT_EQ(DeterministicBytes(up), DeterministicBytes(down));
  EXPECT_EQ(MessageFingerprint(up), MessageFingerprint(down));
}

TEST(MessageFingerprintTest, AnyChangedFieldChangesTheFingerprint) {
  const v1::RegisterNodeRequest base = WithLabels(8, false);
  v1::RegisterNodeRequest other_label = base;
  (*other_label.mutable_labels())["key-3"] = "changed";
  v1::RegisterNodeRequest other_id = base;
  other_id.set_request_id("r-2");
  EXPECT_NE(MessageFingerprint(base), MessageFingerprint(other_label));
  EXPECT_NE(MessageFingerprint(base), MessageFingerprint(other_id));
  EXPECT_NE(MessageFingerprint(v1::RegisterNodeRequest()), MessageFingerprint(base));
}

TEST(MessageFingerprintTest, BytesParseBackToTheMessage) {
  const v1::RegisterNodeRequest up = WithLabels(5, false);
  v1::RegisterNodeRequest parsed;
  ASSERT_TRUE(parsed.ParseFromString(DeterministicBytes(up)));
  EXPECT_EQ(parsed.labels_size(), 5);
  EXPECT_EQ(parsed.labels().at("key-4"), "value-4");
  EXPECT_EQ(parsed.node_id(), "node-1");
}

}  // namespace
}  // namespace berth
