#include "worker/progress_report.h"

#include <unistd.h>

#include <cstdlib>
#include <fstream>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace berth {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::Pair;

TEST(ScriptReportTest, AFullReport) {
  absl::StatusOr<ScriptReport> r = ParseScriptReport(
      R"({"step": 120, "metrics": {"loss": 0.25, "epoch": 2, "phase": "train", "nan": null}, "checkpoint": "/ckpt/120"})");
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->step, 120u);
  EXPECT_THAT(r->metrics, ElementsAre(Pair("epoch", 2.0), Pair("loss", 0.25)));
  EXPECT_EQ(r->checkpoint, "/ckpt/120");
}

TEST(ScriptReportTest, EverythingIsOptional) {
  absl::StatusOr<ScriptReport> r = ParseScriptReport(R"({"checkpoint": null})");
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_FALSE(r->step.has_value());
  EXPECT_TRUE(r->metrics.empty());
  EXPECT_EQ(r->checkpoint, "");
}

TEST(ScriptReportTest, BadLinesNameTheField) {
  EXPECT_THAT(ParseScriptReport("{").status().message(), HasSubstr("not a JSON object"));
  EXPECT_THAT(ParseScriptReport("[1]").status().message(), HasSubstr("not a JSON object"));
  EXPECT_THAT(ParseScriptReport(R"({"step": -1})").status().message(), HasSubstr("report.step"));
  EXPECT_THAT(ParseScriptReport(R"({"step": 1.5})").status().message(), HasSubstr("report.step"));
  EXPECT_THAT(ParseScriptReport(R"({"metrics": 3})").status().message(),
              HasSubstr("report.metrics"));
  EXPECT_THAT(ParseScriptReport(R"({"checkpoint": 3})").status().message(),
              HasSubstr("report.checkpoint"));
}

TEST(ReportFileReaderTest, ReturnsCompleteLinesOnce) {
  char dir[] = "/tmp/progress_report_test.XXXXXX";
  ASSERT_NE(mkdtemp(dir), nullptr);
  const std::string path = std::string(dir) + "/r.jsonl";
  ReportFileReader reader(path);
  EXPECT_TRUE(reader.ReadNewLines().empty());  // not there yet
  std::ofstream out(path, std::ios::binary);
  out << "{\"step\": 1}\n{\"st" << std::flush;
  EXPECT_THAT(reader.ReadNewLines(), ElementsAre("{\"step\": 1}"));
  out << "ep\": 2}\n\n{\"step\": 3}\n" << std::flush;
  EXPECT_THAT(reader.ReadNewLines(), ElementsAre("{\"step\": 2}", "{\"step\": 3}"));
  EXPECT_TRUE(reader.ReadNewLines().empty());
  std::system((std::string("rm -rf ") + dir).c_str());
}

}  // namespace
}  // namespace berth
