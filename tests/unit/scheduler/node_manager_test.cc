#include "scheduler/node_manager.h"

#include "gmock/gmock.h"
#include "google/protobuf/util/message_differencer.h"
#include "gtest/gtest.h"

namespace berth {
namespace {

using ::testing::HasSubstr;

v1::RegisterNodeRequest Registration(const std::string& id, int gpus, const std::string& type) {
  v1::RegisterNodeRequest r;
  r.set_node_id(id);
  r.set_address("127.0.0.1:1234");
  r.set_request_id("reg-" + id);
  (*r.mutable_total()->mutable_amounts())["CPU"] = 8;
  (*r.mutable_total()->mutable_amounts())["memory"] = 32e9;
  if (gpus > 0) (*r.mutable_total()->mutable_amounts())["GPU"] = gpus;
  for (int i = 0; i < gpus; ++i) {
    v1::GpuInstance* g = r.add_gpus();
    g->set_index(i);
    g->set_accelerator_type(type);
  }
  (*r.mutable_labels())["zone"] = "a";
  return r;
}

class NodeManagerTest : public ::testing::Test {
 protected:
  NodeResourceTable table_;
  HeartbeatBook heartbeats_{LivenessConfig{1000, 5}};
  NodeManager nodes_{&table_, &heartbeats_};
};

TEST_F(NodeManagerTest, NodesSayTheirTopologyWithBerthLabels) {
  v1::RegisterNodeRequest r = Registration("n1", 4, "A10G");
  (*r.mutable_labels())["berth.io/topology-rack"] = "r7";
  (*r.mutable_labels())["nvidia.com/gpu.clique"] = "c1.0";
  auto reg = nodes_.Register(r, 0);
  ASSERT_TRUE(reg.ok()) << reg.status();
  EXPECT_EQ(table_.node(reg->index).labels.at("berth.io/topology-rack"), "r7");
  EXPECT_TRUE(table_.HasLabelKey("nvidia.com/gpu.clique"));
}

TEST_F(NodeManagerTest, RegisterSetsAcceleratorResourceAndLabel) {
  auto reg = nodes_.Register(Registration("n1", 4, "A10G"), 0);
  ASSERT_TRUE(reg.ok()) << reg.status();
  const auto& node = table_.node(reg->index);
  EXPECT_EQ(node.total.Get("accelerator_type:A10G"), Quantity::Whole(1));
  EXPECT_EQ(node.labels.at("berth.io/accelerator-type"), "A10G");
  v1::ListNodesResponse list;
  ASSERT_TRUE(nodes_.ListNodes({}, &list).ok());
  ASSERT_EQ(list.nodes_size(), 1);
  EXPECT_EQ(list.nodes(0).gpus_size(), 4);
  EXPECT_EQ(list.nodes(0).state(), v1::NODE_STATE_ALIVE);
  EXPECT_EQ(list.nodes(0).available().amounts().at("GPU"), 4);
}

// What a restarted head registers the node with again: the request as it
// came, though the manager keeps its totals and labels only in the table
// (which adds the accelerator's resource and label to them).
TEST_F(NodeManagerTest, TheRegistrationComesBackAsItWasAccepted) {
  v1::RegisterNodeRequest r = Registration("n1", 4, "A10G");
  (*r.mutable_labels())["berth.io/node-pool"] = "gpu-pool";
  r.set_metrics_address("127.0.0.1:9100");
  ASSERT_TRUE(nodes_.Register(r, 0).ok());
  std::optional<v1::RegisterNodeRequest> back = nodes_.RegistrationOf("n1");
  ASSERT_TRUE(back.has_value());
  EXPECT_TRUE(google::protobuf::util::MessageDifferencer::Equals(*back, r))
      << back->DebugString() << "\nvs\n"
      << r.DebugString();
  EXPECT_FALSE(nodes_.RegistrationOf("n2").has_value());
}

TEST_F(NodeManagerTest, DuplicateRegistrationIsAlreadyExistsButRetryIsFine) {
  ASSERT_TRUE(nodes_.Register(Registration("n1", 1, "T4"), 0).ok());
  EXPECT_TRUE(nodes_.Register(Registration("n1", 1, "T4"), 10).ok());  // same request id
  v1::RegisterNodeRequest again = Registration("n1", 1, "T4");
  again.set_request_id("another");
  auto dup = nodes_.Register(again, 20);
  EXPECT_EQ(dup.status().code(), absl::StatusCode::kAlreadyExists);
  EXPECT_THAT(std::string(dup.status().message()), HasSubstr("node_id"));
  EXPECT_EQ(table_.alive_count(), 1u);
}

TEST_F(NodeManagerTest, BadRegistrationsNameTheField) {
  struct Case {
    v1::RegisterNodeRequest request;
    std::string field;
  };
  std::vector<Case> cases;
  cases.push_back({Registration("", 1, "T4"), "node_id"});
  cases.push_back({Registration(std::string(200, 'x'), 1, "T4"), "node_id"});
  auto negative = Registration("a", 0, "");
  (*negative.mutable_total()->mutable_amounts())["CPU"] = -1;
  cases.push_back({negative, "total.amounts[\"CPU\"]"});
  auto nan = Registration("b", 0, "");
  (*nan.mutable_total()->mutable_amounts())["memory"] = std::nan("");
  cases.push_back({nan, "total.amounts[\"memory\"]"});
  auto mismatch = Registration("c", 2, "T4");
  mismatch.mutable_gpus()->RemoveLast();
  cases.push_back({mismatch, "gpus"});
  auto reserved = Registration("d", 0, "");
  (*reserved.mutable_labels())["berth.io/accelerator-type"] = "H100";
  cases.push_back({reserved, "labels[\"berth.io/accelerator-type\"]"});
  auto internal = Registration("e", 1, "T4");
  (*internal.mutable_total()->mutable_amounts())["accelerator_type:T4"] = 1;
  cases.push_back({internal, "total.amounts[\"accelerator_type:T4\"]"});
  // The table's checks name the registration's fields, not the table's.
  cases.push_back({Registration("f", 1, "A:B"), "gpus[0].accelerator_type: 'A:B'"});
  for (const Case& c : cases) {
    auto r = nodes_.Register(c.request, 0);
    ASSERT_FALSE(r.ok()) << c.field;
    EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument) << r.status();
    EXPECT_THAT(std::string(r.status().message()), HasSubstr(c.field));
  }
  EXPECT_EQ(table_.alive_count(), 0u);  // nothing half-applied
}

TEST_F(NodeManagerTest, MissedHeartbeatsMakeANodeDeadAndItMayRegisterAgain) {
  ASSERT_TRUE(nodes_.Register(Registration("n1", 1, "T4"), 0).ok());
  ASSERT_TRUE(nodes_.Register(Registration("n2", 1, "T4"), 0).ok());
  ASSERT_TRUE(nodes_.Register(Registration("n3", 1, "T4"), 0).ok());
  std::vector<std::string> dead;
  // Checked every 250 ms (a monotonic clock); n1 and n3 beat every second.
  for (int64_t t = 0; t <= 8000 && dead.empty(); t += 250) {
    if (t % 1000 == 0) {
      for (const char* id : {"n1", "n3"}) {
        EXPECT_EQ(heartbeats_.Heartbeat(id, t + 1, t), HeartbeatBook::Standing::kAlive);
      }
    }
    dead = heartbeats_.Check(t).dead;
  }
  EXPECT_EQ(dead, std::vector<std::string>{"n2"});
  // Judged DEAD: told to register again, and no call goes to it, before
  // the head marks it.
  EXPECT_EQ(heartbeats_.Heartbeat("n2", 1, 9001), HeartbeatBook::Standing::kUnknown);
  EXPECT_EQ(heartbeats_.Address("n2"), "");
  EXPECT_EQ(nodes_.Address(*table_.FindNode("n2")), "");
  EXPECT_NE(heartbeats_.Address("n1"), "");
  EXPECT_EQ(table_.node(*table_.FindNode("n2")).state, NodeState::kAlive);
  EXPECT_TRUE(nodes_.MarkDead("n2"));
  EXPECT_FALSE(nodes_.MarkDead("n2"));  // once
  EXPECT_FALSE(nodes_.MarkDead("nobody"));
  EXPECT_EQ(table_.node(*table_.FindNode("n2")).state, NodeState::kDead);
  // Listed with nothing available: nothing can be placed there.
  v1::ListNodesResponse list;
  ASSERT_TRUE(nodes_.ListNodes({}, &list).ok());
  for (const v1::NodeInfo& node : list.nodes()) {
    EXPECT_EQ(node.available().amounts().empty(), node.node_id() == "n2") << node.DebugString();
    EXPECT_FALSE(node.total().amounts().empty());
  }
  EXPECT_EQ(heartbeats_.Heartbeat("n2", 2, 9002), HeartbeatBook::Standing::kUnknown);
  v1::RegisterNodeRequest again = Registration("n2", 1, "T4");
  again.set_request_id("second");
  auto reg = nodes_.Register(again, 9003);
  ASSERT_TRUE(reg.ok()) << reg.status();
  EXPECT_TRUE(reg->replaced_dead);
  EXPECT_EQ(table_.alive_count(), 3u);
  EXPECT_EQ(heartbeats_.Heartbeat("n2", 1, 9004), HeartbeatBook::Standing::kAlive);
}

TEST_F(NodeManagerTest, TheBookCountsNewerHeartbeatsAndTellsOfADrain) {
  ASSERT_TRUE(nodes_.Register(Registration("n1", 1, "T4"), 100).ok());
  EXPECT_EQ(heartbeats_.Find("n1")->last_heard_ms, 100);
  EXPECT_EQ(heartbeats_.Heartbeat("n1", 5, 200), HeartbeatBook::Standing::kAlive);
  EXPECT_EQ(heartbeats_.Heartbeat("n1", 4, 300), HeartbeatBook::Standing::kAlive);  // late
  EXPECT_EQ(heartbeats_.Find("n1")->last_heard_ms, 200);
  EXPECT_EQ(heartbeats_.Heartbeat("n1", 0, 400), HeartbeatBook::Standing::kAlive);  // unnumbered
  EXPECT_EQ(heartbeats_.Find("n1")->last_heard_ms, 400);
  v1::DrainNodeRequest drain;
  drain.set_node_id("n1");
  ASSERT_TRUE(nodes_.Drain(drain).ok());
  EXPECT_EQ(heartbeats_.Heartbeat("n1", 6, 500), HeartbeatBook::Standing::kDraining);
  v1::ListNodesResponse list;
  ASSERT_TRUE(nodes_.ListNodes(v1::ListNodesRequest(), &list).ok());
  ASSERT_EQ(list.nodes_size(), 1);
  EXPECT_EQ(list.nodes(0).last_heartbeat_unix_ms(), 500);
  EXPECT_EQ(heartbeats_.Heartbeat("stranger", 1, 600), HeartbeatBook::Standing::kUnknown);
  EXPECT_FALSE(heartbeats_.Find("stranger").has_value());
  EXPECT_EQ(heartbeats_.Address("stranger"), "");
  // Only a change of what the heartbeats say of the node's health is news.
  EXPECT_FALSE(heartbeats_.NoteHealth("n1", ""));
  EXPECT_TRUE(heartbeats_.NoteHealth("n1", "GPU 1 sick"));
  EXPECT_FALSE(heartbeats_.NoteHealth("n1", "GPU 1 sick"));
  EXPECT_FALSE(heartbeats_.NoteHealth("stranger", "GPU 1 sick"));
  ASSERT_TRUE(nodes_.Register(Registration("n2", 1, "T4"), 700).ok());
  EXPECT_TRUE(heartbeats_.NoteHealth("n2", "GPU 0 sick"));
}

TEST_F(NodeManagerTest, DrainStopsNewBundlesOnly) {
  ASSERT_TRUE(nodes_.Register(Registration("n1", 1, "T4"), 0).ok());
  v1::DrainNodeRequest drain;
  drain.set_node_id("n1");
  ASSERT_TRUE(nodes_.Drain(drain).ok());
  EXPECT_EQ(table_.alive_count(), 0u);
  v1::ListNodesRequest only_draining;
  only_draining.add_states(v1::NODE_STATE_DRAINING);
  v1::ListNodesResponse list;
  ASSERT_TRUE(nodes_.ListNodes(only_draining, &list).ok());
  ASSERT_EQ(list.nodes_size(), 1);
  EXPECT_EQ(list.nodes(0).drain_reason(), "drained by operator");
  drain.set_node_id("nope");
  EXPECT_EQ(nodes_.Drain(drain).code(), absl::StatusCode::kNotFound);
}

TEST_F(NodeManagerTest, ADrainHasADeadlineAndEndsWithUndrain) {
  ASSERT_TRUE(nodes_.Register(Registration("n1", 1, "T4"), 0).ok());
  EXPECT_EQ(nodes_.Undrain("n1").code(), absl::StatusCode::kFailedPrecondition);  // ALIVE
  v1::DrainNodeRequest drain;
  drain.set_node_id("n1");
  drain.set_reason("kernel upgrade");
  drain.set_deadline_unix_ms(-5);
  absl::Status bad = nodes_.Drain(drain);
  EXPECT_EQ(bad.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(bad.message(), HasSubstr("deadline_unix_ms"));
  EXPECT_EQ(table_.alive_count(), 1u);  // nothing half-applied
  drain.set_deadline_unix_ms(90000);
  ASSERT_TRUE(nodes_.Drain(drain).ok());
  v1::ListNodesResponse list;
  ASSERT_TRUE(nodes_.ListNodes(v1::ListNodesRequest(), &list).ok());
  EXPECT_EQ(list.nodes(0).drain_reason(), "kernel upgrade");
  EXPECT_EQ(list.nodes(0).drain_deadline_unix_ms(), 90000);
  EXPECT_EQ(nodes_.drains().at("n1").deadline_ms, 90000);

  ASSERT_TRUE(nodes_.Undrain("n1").ok());
  EXPECT_EQ(table_.alive_count(), 1u);
  EXPECT_EQ(heartbeats_.Heartbeat("n1", 1, 100), HeartbeatBook::Standing::kAlive);
  list.Clear();
  ASSERT_TRUE(nodes_.ListNodes(v1::ListNodesRequest(), &list).ok());
  EXPECT_EQ(list.nodes(0).state(), v1::NODE_STATE_ALIVE);
  EXPECT_EQ(list.nodes(0).drain_reason(), "");
  EXPECT_EQ(list.nodes(0).drain_deadline_unix_ms(), 0);
  EXPECT_EQ(nodes_.Undrain("nope").code(), absl::StatusCode::kNotFound);
}

TEST_F(NodeManagerTest, UnhealthyGpusAreWithheldListedAndKeptInTheRegistration) {
  v1::RegisterNodeRequest registration = Registration("n1", 4, "T4");
  v1::UnhealthyGpu* known = registration.add_unhealthy_gpus();
  known->set_index(3);
  known->set_reason("row remapping failed");
  ASSERT_TRUE(nodes_.Register(registration, 0).ok());
  EXPECT_EQ(table_.node(0).available.Get(kGpu), Quantity::Whole(3));

  google::protobuf::RepeatedPtrField<v1::UnhealthyGpu> reported;
  *reported.Add() = *known;
  v1::UnhealthyGpu* fresh = reported.Add();
  fresh->set_index(1);
  fresh->set_reason("XID 79, GPU has fallen off the bus");
  fresh->set_since_unix_ms(500);
  const uint64_t version = nodes_.gpu_health_version();
  EXPECT_THAT(nodes_.SetUnhealthyGpus("n1", reported), testing::Eq(absl::StatusOr<bool>(true)));
  EXPECT_GT(nodes_.gpu_health_version(), version);
  EXPECT_THAT(nodes_.SetUnhealthyGpus("n1", reported), testing::Eq(absl::StatusOr<bool>(false)));
  EXPECT_EQ(table_.node(0).available.Get(kGpu), Quantity::Whole(2));
  EXPECT_EQ(nodes_.UnhealthyGpus("n1").at(1).reason(), "XID 79, GPU has fallen off the bus");
  EXPECT_EQ(nodes_.RegistrationOf("n1")->unhealthy_gpus_size(), 2);  // what a restart reads
  v1::ListNodesResponse list;
  ASSERT_TRUE(nodes_.ListNodes(v1::ListNodesRequest(), &list).ok());
  ASSERT_EQ(list.nodes(0).unhealthy_gpus_size(), 2);
  EXPECT_EQ(list.nodes(0).unhealthy_gpus(1).since_unix_ms(), 500);

  // Bad reports change nothing.
  fresh->set_index(4);
  absl::StatusOr<bool> bad = nodes_.SetUnhealthyGpus("n1", reported);
  EXPECT_THAT(bad.status().message(), HasSubstr("unhealthy_gpus[1].index: 4"));
  fresh->set_index(3);
  EXPECT_THAT(nodes_.SetUnhealthyGpus("n1", reported).status().message(),
              HasSubstr("listed twice"));
  EXPECT_EQ(nodes_.SetUnhealthyGpus("nope", reported).status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(table_.node(0).available.Get(kGpu), Quantity::Whole(2));

  // Returned: offered again.
  EXPECT_THAT(nodes_.SetUnhealthyGpus("n1", {}), testing::Eq(absl::StatusOr<bool>(true)));
  EXPECT_EQ(table_.node(0).available.Get(kGpu), Quantity::Whole(4));
  EXPECT_TRUE(nodes_.UnhealthyGpus("n1").empty());
}

}  // namespace
}  // namespace berth
