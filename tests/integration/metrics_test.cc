// /metrics of a live cluster (real head and raylets, a running train job):
// values agree with the cluster's own status, the text passes `promtool
// check metrics`, and the exported berth_ metrics are exactly the ones
// metric catalogue docs/metrics.yaml lists.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <map>
#include <regex>
#include <set>
#include <sstream>

#include "common/files.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/integration/local_cluster.h"
#include "yaml-cpp/yaml.h"

namespace berth::testing {
namespace {

using std::chrono::seconds;
using Labels = MetricLabels;

std::set<std::string> TypedNames(const std::string& text) {
  std::set<std::string> names;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("# TYPE berth_", 0) == 0) names.insert(line.substr(7, line.find(' ', 7) - 7));
  }
  return names;
}

// The names the metric catalogue (docs/metrics.yaml) lists for the head and
// the raylets.
std::set<std::string> DocumentedNames() {
  const YAML::Node catalogue = YAML::LoadFile(std::string(BERTH_SOURCE_DIR) + "/docs/metrics.yaml");
  std::set<std::string> names;
  for (const YAML::Node& component : catalogue["components"]) {
    const std::string daemon = component["component"].as<std::string>();
    if (daemon != "berth-head" && daemon != "berth-raylet") continue;
    for (const YAML::Node& metric : component["metrics"])
      names.insert(metric["name"].as<std::string>());
  }
  return names;
}

// promtool's verdict on an exposition: "" when clean.
std::string PromtoolCheck(const std::string& text, const std::string& dir) {
  const std::string file = dir + "/scrape.prom";
  std::ofstream(file) << text;
  const std::string command = std::string(BERTH_PROMTOOL) + " check metrics < " + file + " 2>&1";
  FILE* pipe = popen(command.c_str(), "r");
  std::string out;
  char buffer[512];
  while (pipe && fgets(buffer, sizeof(buffer), pipe)) out += buffer;
  const int status = pipe ? pclose(pipe) : -1;
  return status == 0 ? "" : (out.empty() ? "promtool failed" : out);
}

class MetricsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    cluster_.AddRaylet({"a10g-0", 4, "A10G", 8, "32Gi"});
    cluster_.AddRaylet({"t4-0", 2, "T4", 8, "32Gi"});
  }

  v1::GetClusterStatusResponse Status() {
    v1::GetClusterStatusResponse status;
    EXPECT_TRUE(cluster_.cluster().GetClusterStatus(Context().get(), {}, &status).ok());
    return status;
  }
  v1::ListNodesResponse Nodes() {
    v1::ListNodesResponse nodes;
    EXPECT_TRUE(cluster_.nodes().ListNodes(Context().get(), {}, &nodes).ok());
    return nodes;
  }
  std::string CreateGroup(v1::PlacementStrategy strategy, int bundles, const std::string& resource,
                          double amount) {
    v1::CreatePlacementGroupRequest request;
    request.set_strategy(strategy);
    request.set_request_id("pg-" + std::to_string(next_++));
    for (int i = 0; i < bundles; ++i)
      (*request.add_bundles()->mutable_resources()->mutable_amounts())[resource] = amount;
    v1::CreatePlacementGroupResponse response;
    EXPECT_TRUE(cluster_.groups().CreatePlacementGroup(Context().get(), request, &response).ok());
    return response.placement_group_id();
  }

  LocalCluster cluster_;
  int next_ = 0;
};

TEST_F(MetricsTest, ScrapesMatchTheClusterStateAndPassPromtool) {
  // A 3-rank A10G job that keeps running, a 2-GPU group, and a gang that
  // can never be placed (3 distinct nodes on a 2-node cluster).
  v1::SubmitTrainJobRequest submit;
  submit.set_request_id("job-1");
  v1::TrainJobSpec* spec = submit.mutable_spec();
  spec->set_name("metrics");
  spec->mutable_scaling_config()->set_num_workers(3);
  spec->mutable_scaling_config()->set_use_gpu(true);
  spec->mutable_scaling_config()->set_accelerator_type("A10G");
  for (const char* a : {"/bin/sh", "-c", "sleep 60"})
    spec->mutable_entrypoint()->mutable_command()->add_argv(a);
  v1::SubmitTrainJobResponse submitted;
  ASSERT_TRUE(cluster_.jobs().SubmitTrainJob(Context().get(), submit, &submitted).ok());
  CreateGroup(v1::PLACEMENT_STRATEGY_STRICT_PACK, 1, "GPU", 2);
  CreateGroup(v1::PLACEMENT_STRATEGY_STRICT_SPREAD, 3, "CPU", 1);

  const v1::GetClusterStatusResponse first = Status();
  ASSERT_FALSE(first.metrics_address().empty());
  std::map<std::string, std::string> raylet_metrics;
  const v1::ListNodesResponse registered = Nodes();
  for (const v1::NodeInfo& node : registered.nodes()) {
    ASSERT_FALSE(node.metrics_address().empty()) << node.node_id();
    raylet_metrics[node.node_id()] = node.metrics_address();
  }
  // Running: the trainer and three ranks.
  v1::GetTrainJobRequest get;
  get.set_job_id(submitted.job_id());
  v1::GetTrainJobResponse job;
  ASSERT_TRUE(WaitUntil(
      [&] {
        double running = 0;
        for (const auto& [node, address] : raylet_metrics) {
          running +=
              SumSeries(ParseMetrics(HttpGet(address, "/metrics")), "berth_raylet_workers_running");
        }
        return running == 4 && cluster_.jobs().GetTrainJob(Context().get(), get, &job).ok() &&
               job.job().state() == v1::TRAIN_JOB_STATE_RUNNING;
      },
      seconds(20)));

  const std::string head_text = HttpGet(first.metrics_address(), "/metrics");
  const v1::GetClusterStatusResponse status = Status();
  const v1::ListNodesResponse nodes = Nodes();
  const std::vector<Series> head = ParseMetrics(head_text);
  ASSERT_FALSE(head.empty());

  EXPECT_EQ(SumSeries(head, "berth_nodes", {{"state", "ALIVE"}}), status.alive_nodes());
  EXPECT_EQ(SumSeries(head, "berth_nodes", {{"state", "DEAD"}}), 0);
  ASSERT_EQ(status.accelerators_size(), 2);
  for (const v1::AcceleratorTypeCount& a : status.accelerators()) {
    const Labels gpu = {{"resource", "GPU"}, {"accelerator_type", a.accelerator_type()}};
    EXPECT_EQ(SumSeries(head, "berth_resource_capacity", gpu), a.gpus_total())
        << a.accelerator_type();
    EXPECT_DOUBLE_EQ(SumSeries(head, "berth_resource_allocated", gpu),
                     a.gpus_total() - a.gpus_available())
        << a.accelerator_type();
  }
  // The job's 3 GPUs on the A10G node; the 2-GPU group on the T4 node.
  EXPECT_EQ(SumSeries(head, "berth_resource_allocated",
                      {{"resource", "GPU"}, {"accelerator_type", "A10G"}}),
            3);
  EXPECT_EQ(SumSeries(head, "berth_resource_allocated",
                      {{"resource", "GPU"}, {"accelerator_type", "T4"}}),
            2);
  for (const v1::NodeInfo& node : nodes.nodes()) {
    auto gpus = [](const v1::ResourceSet& set) {
      auto it = set.amounts().find("GPU");
      return it == set.amounts().end() ? 0.0 : it->second;
    };
    const double allocated = gpus(node.total()) - gpus(node.available());
    EXPECT_EQ(SumSeries(head, "berth_node_gpus_allocated", {{"node", node.node_id()}}), allocated)
        << node.node_id();
    EXPECT_EQ(SumSeries(head, "berth_node_gpus", {{"node", node.node_id()}}), node.gpus_size())
        << node.node_id();
  }
  std::map<v1::PlacementGroupState, uint32_t> groups;
  for (const auto& c : status.placement_groups()) groups[c.state()] = c.count();
  EXPECT_EQ(SumSeries(head, "berth_placement_groups", {{"state", "CREATED"}}),
            groups[v1::PLACEMENT_GROUP_STATE_CREATED]);
  EXPECT_EQ(SumSeries(head, "berth_placement_groups", {{"state", "CREATED"}}), 2);
  EXPECT_EQ(SumSeries(head, "berth_placement_groups", {{"state", "PENDING"}}), 1);
  EXPECT_EQ(SumSeries(head, "berth_placement_groups_infeasible"), 1);
  EXPECT_EQ(SumSeries(head, "berth_pending_bundles",
                      {{"shape", "CPU: 1"}, {"strategy", "STRICT_SPREAD"}}),
            3);
  EXPECT_GT(SumSeries(head, "berth_pending_gang_age_seconds"), 0);
  EXPECT_EQ(SumSeries(head, "berth_train_jobs", {{"state", "RUNNING"}}), 1);
  EXPECT_GE(SumSeries(head, "berth_placement_latency_seconds_count"), 2);
  EXPECT_GE(SumSeries(head, "berth_placement_decision_seconds_count"), 3);

  // Each rank's GPU, on its node, named with the job and the rank.
  std::map<std::string, std::string> raylet_text;
  double gpus_held = 0;
  for (const auto& [node, address] : raylet_metrics) {
    raylet_text[node] = HttpGet(address, "/metrics");
    gpus_held += SumSeries(ParseMetrics(raylet_text[node]), "berth_gpu_instance_allocated");
  }
  EXPECT_EQ(gpus_held, 5);  // what the head says is allocated, summed by the raylets
  ASSERT_EQ(job.job().workers_size(), 3);
  for (const v1::WorkerRank& rank : job.job().workers()) {
    ASSERT_EQ(rank.gpu_indices_size(), 1);
    const std::vector<Series> raylet = ParseMetrics(raylet_text[rank.node_id()]);
    EXPECT_EQ(SumSeries(raylet, "berth_gpu_instance_info",
                        {{"gpu_index", std::to_string(rank.gpu_indices(0))},
                         {"job_id", submitted.job_id()},
                         {"rank", std::to_string(rank.world_rank())},
                         {"worker_id", rank.worker_id()},
                         {"placement_group_id", job.job().placement_group_id()}}),
              1)
        << "rank " << rank.world_rank();
  }
  EXPECT_EQ(SumSeries(ParseMetrics(raylet_text["a10g-0"]), "berth_raylet_bundles",
                      {{"state", "committed"}}),
            3);
  EXPECT_EQ(SumSeries(ParseMetrics(raylet_text["t4-0"]), "berth_raylet_idle_reserved_gpus"),
            2);  // the bare group
  EXPECT_EQ(SumSeries(ParseMetrics(raylet_text["a10g-0"]), "berth_raylet_idle_reserved_gpus"), 0);

  // Valid exposition, and exactly the documented berth_ metrics.
  EXPECT_EQ(PromtoolCheck(head_text, cluster_.dir()), "");
  std::set<std::string> exported = TypedNames(head_text);
  for (const auto& [node, text] : raylet_text) {
    EXPECT_EQ(PromtoolCheck(text, cluster_.dir()), "") << node;
    for (const std::string& name : TypedNames(text)) exported.insert(name);
  }
  EXPECT_EQ(exported, DocumentedNames());

  // Stopping the job: its four processes are counted as killed.
  v1::StopTrainJobRequest stop;
  stop.set_job_id(submitted.job_id());
  stop.set_request_id("stop-1");
  v1::StopTrainJobResponse stopped;
  ASSERT_TRUE(cluster_.jobs().StopTrainJob(Context().get(), stop, &stopped).ok());
  EXPECT_TRUE(WaitUntil(
      [&] {
        return SumSeries(ParseMetrics(HttpGet(raylet_metrics["a10g-0"], "/metrics")),
                         "berth_raylet_worker_exits_total", {{"outcome", "killed"}}) == 4;
      },
      seconds(15)));
}

// A free loopback TCP port (bound then released: good enough for a test).
int FreePort() {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof(addr);
  bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr));
  getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  close(fd);
  return ntohs(addr.sin_port);
}

// label value -> sample value of an instant-query answer, keyed by `label`.
std::map<std::string, double> QueryByLabel(const std::string& prometheus, const std::string& query,
                                           const std::string& label) {
  const std::string body = HttpGet(prometheus, "/api/v1/query?query=" + query);
  std::map<std::string, double> out;
  const std::regex sample("\\{[^{}]*\"" + label +
                          "\":\"([^\"]*)\"[^{}]*\\},\"value\":\\[[0-9.]+,\"([^\"]+)\"\\]");
  for (auto it = std::sregex_iterator(body.begin(), body.end(), sample);
       it != std::sregex_iterator(); ++it) {
    out[(*it)[1]] = std::stod((*it)[2]);
  }
  return out;
}

// A real Prometheus server scrapes the cluster with deploy/prometheus's
// rules: the recording rules give the cluster's own numbers.
TEST_F(MetricsTest, ARealPrometheusScrapesTheClusterAndEvaluatesTheRules) {
  CreateGroup(v1::PLACEMENT_STRATEGY_STRICT_PACK, 1, "GPU", 3);    // 3 of the A10G node's 4
  CreateGroup(v1::PLACEMENT_STRATEGY_STRICT_SPREAD, 3, "GPU", 1);  // 3 nodes: never on 2
  std::vector<std::string> targets = {Status().metrics_address()};
  const v1::ListNodesResponse nodes = Nodes();
  for (const v1::NodeInfo& node : nodes.nodes()) targets.push_back(node.metrics_address());
  const std::string rules = std::string(BERTH_SOURCE_DIR) + "/deploy/prometheus/rules/";
  std::ofstream(cluster_.dir() + "/prometheus.yml")
      << "global: {scrape_interval: 1s, evaluation_interval: 1s}\n"
      << "rule_files: [" << rules << "berth-recording.yml, " << rules << "berth-alerts.yml]\n"
      << "scrape_configs:\n  - job_name: berth\n    static_configs:\n      - targets: ['"
      << targets[0] << "', '" << targets[1] << "', '" << targets[2] << "']\n";
  const std::string address = "127.0.0.1:" + std::to_string(FreePort());
  ChildProcess prometheus(
      {BERTH_PROMETHEUS, "--config.file=" + cluster_.dir() + "/prometheus.yml",
       "--storage.tsdb.path=" + cluster_.dir() + "/tsdb", "--web.listen-address=" + address},
      cluster_.dir() + "/prometheus.log");

  // Targets are scraped at their own offsets within the interval: wait
  // until every answer is in, then compare.
  std::map<std::string, double> ratio, pending, free_gpus, held, up;
  const std::map<std::string, double> want_ratio = {{"A10G", 0.75}, {"T4", 0.0}};
  const std::map<std::string, double> want_pending = {{"any", 3.0}};
  const std::map<std::string, double> want_free = {{"A10G", 1.0}, {"T4", 2.0}};
  const std::map<std::string, double> want_held = {{"a10g-0", 3.0}, {"t4-0", 0.0}};
  WaitUntil(
      [&] {
        ratio = QueryByLabel(address, "berth:gpu_allocation_ratio:by_accelerator_type",
                             "accelerator_type");
        pending =
            QueryByLabel(address, "berth:pending_gpus:by_accelerator_type", "accelerator_type");
        free_gpus = QueryByLabel(address, "berth:gpu_free:by_accelerator_type", "accelerator_type");
        held = QueryByLabel(address, "sum(berth_gpu_instance_allocated)by(node)", "node");
        up = QueryByLabel(address, "up", "instance");
        return ratio == want_ratio && pending == want_pending && free_gpus == want_free &&
               held == want_held && up.size() == 3;
      },
      seconds(30));
  EXPECT_EQ(ratio, want_ratio) << "prometheus log:\n"
                               << ReadFileOrEmpty(cluster_.dir() + "/prometheus.log");
  EXPECT_EQ(pending, want_pending);
  EXPECT_EQ(free_gpus, want_free);
  // The raylets' own view of each reserved GPU, from their scrapes.
  EXPECT_EQ(held, want_held);
  EXPECT_EQ(
      up, (std::map<std::string, double>{{targets[0], 1.0}, {targets[1], 1.0}, {targets[2], 1.0}}));
}

}  // namespace
}  // namespace berth::testing
