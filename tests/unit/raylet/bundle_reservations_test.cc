#include "raylet/bundle_reservations.h"

#include "gtest/gtest.h"

namespace berth {
namespace {

Quantity Q(double v) { return Quantity::FromDouble(v, "q").value(); }

// A node with 8 CPUs, 4 GPUs of type A10G and 32 GiB.
BundleReservations Node() {
  ResourceSet total = ResourceSet::Of({{"CPU", 8}, {"GPU", 4}, {"memory", 32.0 * (1 << 30)}});
  total.Set(AcceleratorResourceName("A10G"), Quantity::Whole(1));
  return BundleReservations(total, 4);
}

BundleRequest Bundle(uint32_t index, ResourceSet resources, std::vector<GpuShare> gpus = {}) {
  return {index, std::move(resources), std::move(gpus)};
}

void ExpectAllFree(const BundleReservations& node) {
  EXPECT_EQ(node.free(), node.total());
  for (uint32_t i = 0; i < node.free_gpus().count(); ++i) EXPECT_EQ(node.free_gpus().free(i), Q(1));
  EXPECT_TRUE(node.List().empty());
}

TEST(BundleReservationsTest, PrepareTakesExactlyTheHeadsGpuShares) {
  BundleReservations node = Node();
  auto outcome = node.Prepare(
      "pg", {Bundle(0, ResourceSet::Of({{"CPU", 2}, {"GPU", 2}}), {{3, Q(1)}, {1, Q(1)}}),
             Bundle(1, ResourceSet::Of({{"CPU", 1}, {"GPU", 0.5}}), {{2, Q(0.5)}})});
  ASSERT_TRUE(outcome.ok()) << outcome.status();
  EXPECT_TRUE(outcome->prepared);
  EXPECT_EQ(node.free().Get("CPU"), Q(5));
  EXPECT_EQ(node.free().Get("GPU"), Q(1.5));
  EXPECT_EQ(node.free_gpus().free(0), Q(1));
  EXPECT_EQ(node.free_gpus().free(1), Q(0));
  EXPECT_EQ(node.free_gpus().free(2), Q(0.5));
  EXPECT_EQ(node.free_gpus().free(3), Q(0));
  const ReservedBundle* b0 = node.Find({"pg", 0});
  ASSERT_NE(b0, nullptr);
  EXPECT_EQ(b0->state, BundleState::kPrepared);
  // Kept sorted by index.
  EXPECT_EQ(b0->gpus, (std::vector<GpuShare>{{1, Q(1)}, {3, Q(1)}}));
  ASSERT_TRUE(node.Commit("pg", {0, 1}).ok());
  EXPECT_EQ(node.Find({"pg", 0})->state, BundleState::kCommitted);
  EXPECT_EQ(node.Find({"pg", 1})->state, BundleState::kCommitted);
}

TEST(BundleReservationsTest, CommittedSumIsWhatAWorkerOfSeveralBundlesHolds) {
  BundleReservations node = Node();
  ASSERT_TRUE(node.Prepare("pg", {Bundle(0, ResourceSet::Of({{"CPU", 2}, {"memory", 1 << 20}})),
                                  Bundle(1, ResourceSet::Of({{"CPU", 1}, {"memory", 1 << 20}}))})
                  .ok());
  absl::StatusOr<ResourceSet> prepared = node.CommittedSum("pg", {0}, "spec.bundle_indices");
  EXPECT_EQ(prepared.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(prepared.status().message(),
            "spec.bundle_indices: bundle 0 of placement group pg is not committed on this node");
  ASSERT_TRUE(node.Commit("pg", {0, 1}).ok());
  absl::StatusOr<ResourceSet> both = node.CommittedSum("pg", {0, 1}, "spec.bundle_indices");
  ASSERT_TRUE(both.ok()) << both.status();
  EXPECT_EQ(*both, ResourceSet::Of({{"CPU", 3}, {"memory", 2 << 20}}));
  EXPECT_FALSE(node.CommittedSum("pg", {0, 2}, "f").ok());
  EXPECT_FALSE(node.CommittedSum("other", {0}, "f").ok());
}

TEST(BundleReservationsTest, PrepareIsAllOrNothing) {
  BundleReservations node = Node();
  // Bundle 1 asks for more CPU than is left after bundle 0.
  auto outcome = node.Prepare(
      "pg", {Bundle(0, ResourceSet::Of({{"CPU", 6}})), Bundle(1, ResourceSet::Of({{"CPU", 3}}))});
  ASSERT_TRUE(outcome.ok()) << outcome.status();
  EXPECT_FALSE(outcome->prepared);
  EXPECT_EQ(outcome->reason, "bundle 1 needs CPU: 3, the node has 2 free");
  ExpectAllFree(node);

  // Two bundles of one call on the same GPU instance do not both fit.
  outcome = node.Prepare("pg", {Bundle(0, ResourceSet::Of({{"GPU", 0.5}}), {{2, Q(0.5)}}),
                                Bundle(1, ResourceSet::Of({{"GPU", 0.75}}), {{2, Q(0.75)}})});
  ASSERT_TRUE(outcome.ok()) << outcome.status();
  EXPECT_FALSE(outcome->prepared);
  EXPECT_EQ(outcome->reason, "bundle 1: GPU 2 has 0.5 free, needs 0.75");
  ExpectAllFree(node);
}

TEST(BundleReservationsTest, GpuInstancesHeldByOtherGroupsAreNotFree) {
  BundleReservations node = Node();
  ASSERT_TRUE(node.Prepare("a", {Bundle(0, ResourceSet::Of({{"GPU", 1}}), {{0, Q(1)}})})->prepared);
  // Enough GPUs free in total, but not instance 0.
  auto outcome = node.Prepare("b", {Bundle(0, ResourceSet::Of({{"GPU", 1}}), {{0, Q(1)}})});
  ASSERT_TRUE(outcome.ok());
  EXPECT_FALSE(outcome->prepared);
  EXPECT_EQ(outcome->reason, "bundle 0: GPU 0 has 0 free, needs 1");
  EXPECT_EQ(node.Find({"b", 0}), nullptr);
}

TEST(BundleReservationsTest, AcceleratorTypeOfAnotherModelIsNotAvailable) {
  BundleReservations node = Node();
  ResourceSet wants_h100 = ResourceSet::Of({{"GPU", 1}});
  wants_h100.Set(AcceleratorResourceName("H100"), kAcceleratorRequest);
  auto outcome = node.Prepare("pg", {Bundle(0, wants_h100, {{0, Q(1)}})});
  ASSERT_TRUE(outcome.ok());
  EXPECT_FALSE(outcome->prepared);
  EXPECT_NE(outcome->reason.find("accelerator_type:H100"), std::string::npos) << outcome->reason;

  ResourceSet wants_a10g = ResourceSet::Of({{"GPU", 1}});
  wants_a10g.Set(AcceleratorResourceName("A10G"), kAcceleratorRequest);
  EXPECT_TRUE(node.Prepare("pg", {Bundle(0, wants_a10g, {{0, Q(1)}})})->prepared);
}

TEST(BundleReservationsTest, RePrepareOfIdenticalBundlesIsIdempotent) {
  BundleReservations node = Node();
  const std::vector<BundleRequest> bundles = {
      Bundle(0, ResourceSet::Of({{"CPU", 2}, {"GPU", 1}}), {{1, Q(1)}})};
  ASSERT_TRUE(node.Prepare("pg", bundles)->prepared);
  const ResourceSet free_after_first = node.free();
  ASSERT_TRUE(node.Commit("pg", {0}).ok());

  auto again = node.Prepare("pg", bundles);
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_TRUE(again->prepared);
  EXPECT_EQ(node.free(), free_after_first);
  EXPECT_EQ(node.free_gpus().free(1), Q(0));
  // A re-prepare does not demote a committed bundle.
  EXPECT_EQ(node.Find({"pg", 0})->state, BundleState::kCommitted);

  // A call mixing a held bundle with a new one reserves only the new one.
  auto mixed = node.Prepare("pg", {bundles[0], Bundle(1, ResourceSet::Of({{"CPU", 1}}))});
  ASSERT_TRUE(mixed.ok());
  EXPECT_TRUE(mixed->prepared);
  EXPECT_EQ(node.free().Get("CPU"), Q(5));
  EXPECT_EQ(node.List().size(), 2u);
}

TEST(BundleReservationsTest, ConflictingRePrepareIsAnErrorAndChangesNothing) {
  BundleReservations node = Node();
  ASSERT_TRUE(
      node.Prepare("pg", {Bundle(0, ResourceSet::Of({{"GPU", 1}}), {{0, Q(1)}})})->prepared);
  const ResourceSet free = node.free();
  // Same bundle, other GPU instance; and a new bundle that would fit.
  auto outcome = node.Prepare("pg", {Bundle(1, ResourceSet::Of({{"CPU", 1}})),
                                     Bundle(0, ResourceSet::Of({{"GPU", 1}}), {{2, Q(1)}})});
  EXPECT_EQ(outcome.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(outcome.status().message().find("bundles[1]"), std::string::npos) << outcome.status();
  EXPECT_EQ(node.free(), free);
  EXPECT_EQ(node.Find({"pg", 1}), nullptr);
  EXPECT_EQ(node.free_gpus().free(2), Q(1));

  // Different resources on the same instance conflict too.
  outcome = node.Prepare("pg", {Bundle(0, ResourceSet::Of({{"CPU", 1}, {"GPU", 1}}), {{0, Q(1)}})});
  EXPECT_EQ(outcome.status().code(), absl::StatusCode::kFailedPrecondition);
}

TEST(BundleReservationsTest, MalformedBundlesAreInvalidArgumentNamingTheField) {
  BundleReservations node = Node();
  struct Case {
    std::vector<BundleRequest> bundles;
    std::string field;
  };
  const std::vector<Case> cases = {
      {{Bundle(0, ResourceSet::Of({{"GPU", 1}}), {{0, Q(1)}}),
        Bundle(1, ResourceSet::Of({{"GPU", 1}}), {{4, Q(1)}})},
       "bundles[1].gpus[0].index"},
      {{Bundle(0, ResourceSet::Of({{"GPU", 2}}), {{0, Q(1)}})}, "bundles[0].gpus:"},
      {{Bundle(0, ResourceSet::Of({{"CPU", 1}}), {{0, Q(1)}})}, "bundles[0].gpus:"},
      {{Bundle(0, ResourceSet::Of({{"GPU", 1.5}}), {{0, Q(1)}, {1, Q(0.5)}})},
       "bundles[0].resources.amounts[\"GPU\"]"},
      {{Bundle(0, ResourceSet::Of({{"GPU", 0.5}}), {{0, Quantity()}, {1, Q(0.5)}})},
       "bundles[0].gpus[0].units"},
      {{Bundle(0, ResourceSet())}, "bundles[0].resources"},
      {{Bundle(3, ResourceSet::Of({{"CPU", 1}})), Bundle(3, ResourceSet::Of({{"CPU", 1}}))},
       "bundles[1].bundle_index"},
      {{}, "bundles:"},
  };
  for (const Case& c : cases) {
    auto outcome = node.Prepare("pg", c.bundles);
    EXPECT_EQ(outcome.status().code(), absl::StatusCode::kInvalidArgument) << c.field;
    EXPECT_NE(outcome.status().message().find(c.field), std::string::npos)
        << outcome.status() << " should name " << c.field;
    ExpectAllFree(node);
  }
}

TEST(BundleReservationsTest, CommitNeedsEveryBundlePrepared) {
  BundleReservations node = Node();
  ASSERT_TRUE(node.Prepare("pg", {Bundle(0, ResourceSet::Of({{"CPU", 1}}))})->prepared);
  absl::Status s = node.Commit("pg", {0, 1});
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(s.message().find("bundle_indices[1]"), std::string::npos) << s;
  EXPECT_EQ(node.Find({"pg", 0})->state, BundleState::kPrepared);  // nothing committed
  EXPECT_EQ(node.Commit("other", {0}).code(), absl::StatusCode::kFailedPrecondition);
  ASSERT_TRUE(node.Commit("pg", {0}).ok());
  EXPECT_TRUE(node.Commit("pg", {0}).ok());  // idempotent
}

TEST(BundleReservationsTest, CancelRestoresFreeResourcesExactly) {
  BundleReservations node = Node();
  ASSERT_TRUE(
      node.Prepare(
              "pg",
              {Bundle(0, ResourceSet::Of({{"CPU", 0.3333}, {"GPU", 0.3333}, {"memory", 12345678}}),
                      {{1, Q(0.3333)}}),
               Bundle(1, ResourceSet::Of({{"CPU", 1.1}, {"GPU", 3}}),
                      {{0, Q(1)}, {2, Q(1)}, {3, Q(1)}})})
          ->prepared);
  ASSERT_TRUE(node.Prepare("other", {Bundle(0, ResourceSet::Of({{"CPU", 1}}))})->prepared);
  ASSERT_TRUE(node.Commit("pg", {1}).ok());

  EXPECT_EQ(node.Cancel("pg", {1, 7}), (std::vector<BundleKey>{{"pg", 1}}));
  EXPECT_EQ(node.Cancel("pg", {1}), std::vector<BundleKey>{});  // idempotent
  EXPECT_EQ(node.Cancel("unknown", {}), std::vector<BundleKey>{});
  // Empty = all of the group's bundles, and only that group's.
  EXPECT_EQ(node.Cancel("pg", {}), (std::vector<BundleKey>{{"pg", 0}}));
  ASSERT_NE(node.Find({"other", 0}), nullptr);
  EXPECT_EQ(node.Cancel("other", {0}).size(), 1u);
  ExpectAllFree(node);
}

TEST(BundleReservationsTest, ReleaseUnusedKeepsOnlyBundlesInUse) {
  BundleReservations node = Node();
  ASSERT_TRUE(node.Prepare("a", {Bundle(0, ResourceSet::Of({{"CPU", 1}})),
                                 Bundle(1, ResourceSet::Of({{"CPU", 1}}))})
                  ->prepared);
  ASSERT_TRUE(node.Prepare("b", {Bundle(0, ResourceSet::Of({{"GPU", 1}}), {{0, Q(1)}})})->prepared);
  const std::vector<BundleKey> released = node.ReleaseUnused({{"a", 1}, {"zzz", 0}});
  EXPECT_EQ(released, (std::vector<BundleKey>{{"a", 0}, {"b", 0}}));
  ASSERT_EQ(node.List().size(), 1u);
  EXPECT_EQ(node.List()[0].key, (BundleKey{"a", 1}));
  EXPECT_EQ(node.free().Get("CPU"), Q(7));
  EXPECT_EQ(node.free_gpus().free(0), Q(1));
  EXPECT_TRUE(node.ReleaseUnused({{"a", 1}}).empty());
}

// The head's books predate what the node holds (a placement on other GPUs
// the head did not record before it stopped): the bundle is released for
// the head to place again, not kept on GPUs the books do not name.
TEST(BundleReservationsTest, ReleaseUnusedAlsoReleasesABundleHeldOnOtherGpus) {
  BundleReservations node = Node();
  const ResourceSet gpu = ResourceSet::Of({{"GPU", 1}});
  ASSERT_TRUE(node.Prepare("a", {Bundle(0, gpu, {{0, Q(1)}})})->prepared);
  ASSERT_TRUE(node.Prepare("b", {Bundle(0, gpu, {{1, Q(1)}})})->prepared);
  const std::vector<BundleKey> released = node.ReleaseUnused(
      {{"a", 0}, {"b", 0}},
      {ReservedBundle{{"a", 0}, gpu, {{0, Q(1)}}}, ReservedBundle{{"b", 0}, gpu, {{2, Q(1)}}}});
  EXPECT_EQ(released, (std::vector<BundleKey>{{"b", 0}}));
  EXPECT_EQ(node.free_gpus().free(1), Q(1));
  EXPECT_EQ(node.free_gpus().free(0), Q(0));
}

}  // namespace
}  // namespace berth
