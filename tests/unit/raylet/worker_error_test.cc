#include "raylet/worker_error.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace berth {
namespace {

using ::testing::EndsWith;
using ::testing::HasSubstr;
using ::testing::Not;
using ::testing::StartsWith;

class WorkerErrorTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char dir[] = "/tmp/worker_error_test.XXXXXX";
    ASSERT_NE(mkdtemp(dir), nullptr);
    dir_ = dir;
    error_file_ = dir_ + "/w.error.json";
    stderr_ = dir_ + "/w.err";
  }
  void TearDown() override { std::system(absl::StrCat("rm -rf ", dir_).c_str()); }
  void Write(const std::string& path, const std::string& data) {
    std::ofstream(path, std::ios::binary) << data;
  }
  std::string dir_, error_file_, stderr_;
};

// What torch's @record writes (error_handler.py, record_exception).
constexpr const char* kTorchErrorFile = R"({"message": {"message": "ValueError: boom at step 7",
 "extraInfo": {"py_callstack": "Traceback (most recent call last):\n  File \"train.py\", line 40, in main\n    raise ValueError(\"boom at step 7\")\nValueError: boom at step 7\n",
 "timestamp": "1764576000"}}})";

TEST_F(WorkerErrorTest, TheErrorFileWinsOverStderr) {
  Write(stderr_, "some warning\nTraceback ...\nRuntimeError: something else\n");
  Write(error_file_, kTorchErrorFile);
  const absl::Time exited = absl::Now() + absl::Seconds(5);
  WorkerError error = ReadWorkerError(error_file_, stderr_, absl::Now() - absl::Seconds(5), exited);
  EXPECT_THAT(error.message, StartsWith("ValueError: boom at step 7\n"));
  EXPECT_THAT(error.message, HasSubstr("File \"train.py\", line 40, in main"));
  EXPECT_THAT(error.message, Not(HasSubstr("RuntimeError")));
  // Failed when the file was written, not at the (later) exit.
  EXPECT_LT(error.failed_unix_us, absl::ToUnixMicros(exited));
}

TEST_F(WorkerErrorTest, AnErrorFileOfAnEarlierLifeIsIgnored) {
  Write(error_file_, kTorchErrorFile);
  Write(stderr_, "Traceback (most recent call last):\nKeyError: 'x'\n");
  WorkerError error = ReadWorkerError(error_file_, stderr_, absl::Now() + absl::Seconds(60),
                                      absl::Now() + absl::Seconds(61));
  EXPECT_EQ(error.message, "KeyError: 'x'\nTraceback (most recent call last):\nKeyError: 'x'");
}

TEST_F(WorkerErrorTest, MalformedErrorFileFallsBackToStderr) {
  for (const char* bad : {"", "not json", "[1,2]", R"({"message": 3})", R"({"other": {}})"}) {
    Write(error_file_, bad);
    Write(stderr_, "line 1\nOSError: disk full\n");
    WorkerError error =
        ReadWorkerError(error_file_, stderr_, absl::Now() - absl::Seconds(5), absl::Now());
    EXPECT_EQ(error.message, "OSError: disk full\nline 1\nOSError: disk full") << bad;
  }
}

TEST_F(WorkerErrorTest, StderrTailKeepsTheLastLinesWithinTheBound) {
  std::string log;
  for (int i = 0; i < 5000; ++i) absl::StrAppend(&log, "noise line ", i, "\n");
  absl::StrAppend(&log, "\n\nValueError: the real cause\n\n");
  Write(stderr_, log);
  WorkerError error = ReadWorkerError("", stderr_, absl::Now() - absl::Seconds(5), absl::Now());
  EXPECT_THAT(error.message, StartsWith("ValueError: the real cause\nnoise line 49"));
  EXPECT_THAT(error.message, EndsWith("noise line 4999\nValueError: the real cause"));
  EXPECT_LE(error.message.size(), kMaxWorkerErrorBytes);

  Write(stderr_, "Traceback\n" + std::string(6000, 'x') + "\n");
  error = ReadWorkerError("", stderr_, absl::Now() - absl::Seconds(5), absl::Now());
  EXPECT_LE(error.message.size(), kMaxWorkerErrorBytes);
  EXPECT_THAT(error.message, StartsWith("xxx"));
  EXPECT_THAT(error.message, HasSubstr("\n...xxx"));
}

TEST_F(WorkerErrorTest, TheHeadlineLosesTorchsRankPrefix) {
  Write(stderr_,
        "[rank1]: Traceback (most recent call last):\n[rank1]: ValueError: boom at step 7\n");
  WorkerError error = ReadWorkerError("", stderr_, absl::Now() - absl::Seconds(5), absl::Now());
  EXPECT_THAT(error.message, StartsWith("ValueError: boom at step 7\n[rank1]: Traceback"));
}

// torch 2.x may abort at exit after a rank's uncaught exception: the
// exception is the cause, not the abort's message.
TEST_F(WorkerErrorTest, AnExceptionThatEndsTheTracebackBeatsWhatTheDyingProcessPrintedAfterIt) {
  Write(stderr_,
        "[rank1]: Traceback (most recent call last):\n"
        "[rank1]:   File \"train.py\", line 40, in <module>\n"
        "[rank1]:     raise ValueError(\"boom at step 7\")\n"
        "[rank1]: ValueError: boom at step 7\n"
        "terminate called without an active exception\n");
  WorkerError error = ReadWorkerError("", stderr_, absl::Now() - absl::Seconds(5), absl::Now());
  EXPECT_THAT(error.message, StartsWith("ValueError: boom at step 7\n"));
  EXPECT_THAT(error.message, EndsWith("terminate called without an active exception"));

  // A traceback the process printed and then went on from is not the cause.
  Write(stderr_,
        "Traceback (most recent call last):\n  File \"x.py\", line 1\nKeyError: 'x'\n"
        "retrying\nstep 1\nstep 2\nstep 3\nRuntimeError: out of memory\n");
  error = ReadWorkerError("", stderr_, absl::Now() - absl::Seconds(5), absl::Now());
  EXPECT_THAT(error.message, StartsWith("RuntimeError: out of memory\n"));
}

TEST_F(WorkerErrorTest, TheLastWriteToStderrDatesTheFailure) {
  Write(stderr_, "Traceback\nValueError: x\n");
  // Printed its error, then took seconds to tear down.
  const absl::Time exited = absl::Now() + absl::Seconds(3);
  WorkerError error = ReadWorkerError("", stderr_, absl::Now() - absl::Seconds(5), exited);
  EXPECT_LT(error.failed_unix_us, absl::ToUnixMicros(exited) - 2'000'000);
  // A process that wrote nothing failed when it exited.
  Write(stderr_, "");
  error = ReadWorkerError("", stderr_, absl::Now() - absl::Seconds(5), exited);
  EXPECT_EQ(error.failed_unix_us, absl::ToUnixMicros(exited));
}

TEST_F(WorkerErrorTest, NothingToReadIsAnEmptyMessageAtTheExit) {
  const absl::Time exited = absl::Now();
  WorkerError error = ReadWorkerError(error_file_, stderr_, exited - absl::Seconds(1), exited);
  EXPECT_EQ(error.message, "");
  EXPECT_EQ(error.failed_unix_us, absl::ToUnixMicros(exited));
}

}  // namespace
}  // namespace berth
