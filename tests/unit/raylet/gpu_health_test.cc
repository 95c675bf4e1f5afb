#include "raylet/gpu_health.h"

#include <stdlib.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "raylet/health_file.h"
#include "raylet/node_health_watch.h"

namespace berth {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::Key;
using ::testing::Optional;

MATCHER_P(IsOkAndHolds, value, "") { return arg.ok() && *arg == value; }

TEST(XidPolicyTest, ApplicationXidsAreNotTheGpusFault) {
  for (int64_t xid : {13, 31, 43, 45, 68, 109}) EXPECT_FALSE(XidIsCritical(xid)) << xid;
  for (int64_t xid : {48, 63, 64, 74, 79, 92, 94, 95, 119, 120})
    EXPECT_TRUE(XidIsCritical(xid)) << xid;
}

TEST(HealthLineTest, LinesParseAndBadOnesSayWhatIsWrong) {
  absl::StatusOr<GpuFault> fault = ParseHealthLine("2 xid 79 GPU has fallen off the bus\n");
  ASSERT_TRUE(fault.ok()) << fault.status();
  EXPECT_EQ(fault->gpu_index, 2u);
  EXPECT_EQ(fault->kind, GpuFaultKind::kXid);
  EXPECT_EQ(fault->code, 79);
  EXPECT_EQ(fault->detail, "GPU has fallen off the bus");
  EXPECT_EQ(FaultText(*fault), "XID 79, GPU has fallen off the bus");
  fault = ParseHealthLine("0 ECC volatile double bit");
  ASSERT_TRUE(fault.ok());
  EXPECT_EQ(fault->kind, GpuFaultKind::kDoubleBitEcc);
  EXPECT_EQ(FaultText(*fault), "double-bit ECC error: volatile double bit");
  EXPECT_EQ(ParseHealthLine("1 nvlink 3")->code, 3);

  EXPECT_THAT(ParseHealthLine("two xid 79").status().message(), HasSubstr("gpu index 'two'"));
  EXPECT_THAT(ParseHealthLine("2 melted").status().message(), HasSubstr("unknown kind 'melted'"));
  EXPECT_THAT(ParseHealthLine("2 xid").status().message(), HasSubstr("xid needs its number"));
  EXPECT_THAT(ParseHealthLine("2").status().message(), HasSubstr("expected <gpu index> <kind>"));
}

TEST(GpuHealthBookTest, ACriticalFaultMakesAGpuUnhealthyUntilAnOperatorReturnsIt) {
  GpuHealthBook book(4);
  EXPECT_EQ(book.OnFault(*ParseHealthLine("1 xid 13 graphics exception"), 5), std::nullopt);
  EXPECT_EQ(book.OnFault(*ParseHealthLine("9 xid 79"), 5), std::nullopt);  // no GPU 9
  EXPECT_THAT(book.OnFault(*ParseHealthLine("2 xid 79"), 5),
              Optional(std::string("XID 79, GPU has fallen off the bus")));
  EXPECT_EQ(book.OnFault(*ParseHealthLine("2 ecc"), 6), std::nullopt);      // already
  EXPECT_EQ(book.OnFault(*ParseHealthLine("2 healthy"), 7), std::nullopt);  // not by a checker
  ASSERT_THAT(book.unhealthy(), ElementsAre(Key(2u)));
  EXPECT_EQ(book.unhealthy().at(2).reason(), "XID 79, GPU has fallen off the bus");
  EXPECT_EQ(book.unhealthy().at(2).since_unix_ms(), 5);
  EXPECT_THAT(book.Return(2), IsOkAndHolds("XID 79, GPU has fallen off the bus"));
  EXPECT_TRUE(absl::IsFailedPrecondition(book.Return(2).status()));
  EXPECT_TRUE(absl::IsNotFound(book.Return(4).status()));
  EXPECT_THAT(book.unhealthy(), IsEmpty());

  v1::UnhealthyGpu kept, gone;
  kept.set_index(3);
  kept.set_reason("row remapping failed");
  gone.set_index(7);  // the node has fewer GPUs now
  book.Restore({kept, gone});
  EXPECT_THAT(book.unhealthy(), ElementsAre(Key(3u)));
}

TEST(HealthFileTest, TakesCompleteNewLinesOnceAndStartsAgainAfterATruncation) {
  char path[] = "/tmp/berth-health-XXXXXX";
  const int fd = mkstemp(path);
  ASSERT_GE(fd, 0);
  close(fd);
  HealthFile file(path);
  EXPECT_THAT(file.NewLines(), IsEmpty());
  std::ofstream(path, std::ios::app) << "1 xid 79\n2 ecc\n3 off";
  EXPECT_THAT(file.NewLines(), ElementsAre("1 xid 79", "2 ecc"));
  EXPECT_THAT(file.NewLines(), IsEmpty());
  std::ofstream(path, std::ios::app) << "-bus\n";
  EXPECT_THAT(file.NewLines(), ElementsAre("3 off-bus"));
  std::ofstream(path, std::ios::trunc) << "0 nvlink 1\n";  // rotated
  EXPECT_THAT(file.NewLines(), ElementsAre("0 nvlink 1"));
  std::remove(path);
  EXPECT_THAT(HealthFile(path).NewLines(), IsEmpty());
}

// A file of its own under /tmp, removed at the end.
class TempPath {
 public:
  TempPath() {
    char path[] = "/tmp/berth-health-XXXXXX";
    const int fd = mkstemp(path);
    path_ = path;
    if (fd >= 0) close(fd);
    std::remove(path);
  }
  ~TempPath() { std::remove(path_.c_str()); }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

NodeHealthWatch::Options WatchOptions(const TempPath& health, const TempPath& state) {
  NodeHealthWatch::Options options;
  options.gpu_count = 4;
  options.health_file = health.path();
  options.state_file = state.path();
  options.every = absl::Hours(1);  // the test looks itself
  return options;
}

TEST(NodeHealthWatchTest, FaultsAppendedToTheFileAreBookedKeptAndCountedOnce) {
  TempPath health, state;
  std::vector<std::string> kinds;
  NodeHealthWatch::Options options = WatchOptions(health, state);
  options.on_fault = [&](const GpuFault& fault) {
    kinds.emplace_back(GpuFaultKindName(fault.kind));
  };
  {
    absl::StatusOr<std::unique_ptr<NodeHealthWatch>> watch = NodeHealthWatch::Start(options);
    ASSERT_TRUE(watch.ok()) << watch.status();
    std::ofstream(health.path(), std::ios::app)
        << "3 xid 43 app fault\nnot a line\n1 off-bus\n1 xid 79\n";
    (*watch)->LookOnce();
    EXPECT_THAT(kinds, ElementsAre("xid", "off-bus", "xid"));
    std::vector<v1::UnhealthyGpu> unhealthy = (*watch)->UnhealthyGpus();
    ASSERT_EQ(unhealthy.size(), 1u);
    EXPECT_EQ(unhealthy[0].index(), 1u);
    EXPECT_EQ(unhealthy[0].reason(), "fallen off the bus");
    (*watch)->LookOnce();
    EXPECT_EQ(kinds.size(), 3u);
  }
  // A restarted raylet: the GPU is still unhealthy, and the lines read
  // before are not read again.
  kinds.clear();
  absl::StatusOr<std::unique_ptr<NodeHealthWatch>> again = NodeHealthWatch::Start(options);
  ASSERT_TRUE(again.ok()) << again.status();
  (*again)->LookOnce();
  EXPECT_THAT(kinds, IsEmpty());
  ASSERT_EQ((*again)->UnhealthyGpus().size(), 1u);
  EXPECT_THAT((*again)->ReturnGpu(1), IsOkAndHolds("fallen off the bus"));
  EXPECT_TRUE(absl::IsFailedPrecondition((*again)->ReturnGpu(1).status()));
  // Returned for good: a third run finds it healthy.
  absl::StatusOr<std::unique_ptr<NodeHealthWatch>> third = NodeHealthWatch::Start(options);
  ASSERT_TRUE(third.ok());
  EXPECT_THAT((*third)->UnhealthyGpus(), IsEmpty());
}

TEST(NodeHealthWatchTest, AStateFileItCannotReadIsAnErrorNamingIt) {
  TempPath health, state;
  std::ofstream(state.path()) << "unhealthy { index: \"two\" }";
  absl::StatusOr<std::unique_ptr<NodeHealthWatch>> watch =
      NodeHealthWatch::Start(WatchOptions(health, state));
  ASSERT_FALSE(watch.ok());
  EXPECT_THAT(watch.status().message(), HasSubstr(state.path()));
}

TEST(NodeHealthWatchTest, AFailingHealthCheckMakesTheNodeUnhealthyUntilItPasses) {
  TempPath health, state, verdict;
  NodeHealthWatch::Options options = WatchOptions(health, state);
  options.health_check_every = absl::Hours(1);
  options.health_check_timeout = absl::Seconds(2);
  // Fails while the verdict file exists, saying what is in it.
  options.health_check_command =
      absl::StrCat("if [ -e ", verdict.path(), " ]; then cat ", verdict.path(), "; exit 1; fi");
  std::ofstream(verdict.path()) << "NHC: check_fs_mount: /scratch not mounted\n";
  absl::StatusOr<std::unique_ptr<NodeHealthWatch>> watch = NodeHealthWatch::Start(options);
  ASSERT_TRUE(watch.ok());
  (*watch)->CheckOnce();
  EXPECT_EQ((*watch)->HealthCheckFailure(), "NHC: check_fs_mount: /scratch not mounted (exit 1)");
  std::remove(verdict.path().c_str());
  (*watch)->CheckOnce();
  EXPECT_EQ((*watch)->HealthCheckFailure(), "");
}

TEST(NodeHealthWatchTest, AHealthCheckThatHangsFailsAtItsTimeout) {
  TempPath health, state;
  NodeHealthWatch::Options options = WatchOptions(health, state);
  options.health_check_every = absl::Hours(1);
  options.health_check_timeout = absl::Milliseconds(300);
  options.health_check_command = "sleep 30";
  absl::StatusOr<std::unique_ptr<NodeHealthWatch>> watch = NodeHealthWatch::Start(options);
  ASSERT_TRUE(watch.ok());
  (*watch)->CheckOnce();
  EXPECT_THAT((*watch)->HealthCheckFailure(), HasSubstr("no answer within 300ms"));
}

}  // namespace
}  // namespace berth
