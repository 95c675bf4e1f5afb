#include "raylet/raylet_metrics.h"

#include <map>
#include <set>

#include "absl/strings/str_cat.h"
#include "common/metrics_server.h"

namespace berth {
namespace {

// Memory and CPU of each confined running worker, labelled like its GPUs.
void AddUsageFamilies(const RayletSnapshot& s, std::vector<prometheus::MetricFamily>* out) {
  GaugeFamily memory("berth_worker_memory_bytes",
                     "Memory a running worker uses (its cgroup's, every process of it).");
  GaugeFamily limit(
      "berth_worker_memory_limit_bytes",
      "A running worker's memory limit: its bundle's memory (no series without one).");
  prometheus::MetricFamily cpu{"berth_worker_cpu_seconds_total",
                               "CPU time a running worker has used (its cgroup's).",
                               prometheus::MetricType::Counter,
                               {}};
  for (const WorkerRecord& w : s.workers) {
    auto usage = s.usage.find(w.worker_id);
    if (w.state != WorkerState::kRunning || usage == s.usage.end()) continue;
    const MetricLabels labels = {
        {"node", s.node_id}, {"job_id", w.job_id}, {"worker_id", w.worker_id}, {"rank", w.rank}};
    memory.Add(labels, usage->second.memory_bytes);
    if (usage->second.memory_limit_bytes > 0) limit.Add(labels, usage->second.memory_limit_bytes);
    prometheus::ClientMetric& sample = cpu.metric.emplace_back();
    for (const auto& [name, value] : labels) sample.label.push_back({name, value});
    sample.counter.value = usage->second.cpu_seconds;
  }
  out->push_back(memory.Take());
  out->push_back(limit.Take());
  out->push_back(std::move(cpu));
}

}  // namespace

std::vector<prometheus::MetricFamily> RayletStateFamilies(const RayletSnapshot& s) {
  const std::string type = s.accelerator_type.empty() ? "none" : s.accelerator_type;
  // Running workers per bundle; ranked ones are the GPUs' users (the
  // trainer shares bundle 0 with rank 0 but computes nothing on the GPU).
  std::map<BundleKey, std::vector<const WorkerRecord*>> running;
  std::map<std::string, std::string> job_of_group;
  size_t running_count = 0;
  for (const WorkerRecord& w : s.workers) {
    if (!w.job_id.empty()) job_of_group[w.placement_group_id] = w.job_id;
    if (w.state != WorkerState::kRunning) continue;
    ++running_count;
    running[{w.placement_group_id, w.bundle_index}].push_back(&w);
  }

  GaugeFamily info(
      "berth_gpu_instance_info",
      "One series per holder of a GPU instance: bundle, and the job, rank and worker using it.");
  GaugeFamily allocated("berth_gpu_instance_allocated",
                        "Fraction of each GPU instance reserved by bundles.");
  GaugeFamily bundles("berth_raylet_bundles", "Bundles reserved on this node, by state.");
  std::vector<double> share(s.gpu_count, 0.0);
  double idle_gpus = 0;
  uint32_t prepared = 0, committed = 0;
  for (const ReservedBundle& b : s.bundles) {
    (b.state == BundleState::kCommitted ? committed : prepared) += 1;
    std::vector<const WorkerRecord*> users = running[b.key];
    const bool any_ranked = std::any_of(users.begin(), users.end(),
                                        [](const WorkerRecord* w) { return !w->rank.empty(); });
    if (any_ranked) {
      users.erase(std::remove_if(users.begin(), users.end(),
                                 [](const WorkerRecord* w) { return w->rank.empty(); }),
                  users.end());
    }
    auto job = job_of_group.find(b.key.placement_group_id);
    for (const GpuShare& g : b.gpus) {
      if (g.index < share.size()) share[g.index] += g.amount.ToDouble();
      if (b.state == BundleState::kCommitted && users.empty()) idle_gpus += g.amount.ToDouble();
      MetricLabels labels = {{"node", s.node_id},
                             {"gpu_index", absl::StrCat(g.index)},
                             {"accelerator_type", type},
                             {"placement_group_id", b.key.placement_group_id},
                             {"bundle_index", absl::StrCat(b.key.bundle_index)}};
      if (users.empty()) {
        labels.insert(labels.end(), {{"job_id", job == job_of_group.end() ? "" : job->second},
                                     {"rank", ""},
                                     {"worker_id", ""}});
        info.Add(labels, 1);
        continue;
      }
      for (const WorkerRecord* w : users) {
        MetricLabels with_worker = labels;
        with_worker.insert(with_worker.end(),
                           {{"job_id", w->job_id}, {"rank", w->rank}, {"worker_id", w->worker_id}});
        info.Add(with_worker, 1);
      }
    }
  }
  GaugeFamily healthy("berth_gpu_healthy",
                      "1 for a healthy GPU instance, 0 for one found unhealthy (no bundle gets "
                      "it until an operator returns it).");
  for (uint32_t i = 0; i < s.gpu_count; ++i) {
    const MetricLabels labels = {
        {"node", s.node_id}, {"gpu_index", absl::StrCat(i)}, {"accelerator_type", type}};
    allocated.Add(labels, share[i]);
    healthy.Add(labels, s.unhealthy_gpus.count(i) > 0 ? 0 : 1);
  }
  bundles.Add({{"node", s.node_id}, {"state", "prepared"}}, prepared)
      .Add({{"node", s.node_id}, {"state", "committed"}}, committed);
  GaugeFamily workers("berth_raylet_workers_running", "Worker processes running.");
  workers.Add({{"node", s.node_id}}, running_count);
  GaugeFamily idle("berth_raylet_idle_reserved_gpus",
                   "GPUs reserved by committed bundles that no running worker uses.");
  idle.Add({{"node", s.node_id}}, idle_gpus);

  std::vector<prometheus::MetricFamily> out;
  out.push_back(info.Take());
  out.push_back(allocated.Take());
  out.push_back(bundles.Take());
  out.push_back(workers.Take());
  out.push_back(idle.Take());
  out.push_back(healthy.Take());
  AddUsageFamilies(s, &out);
  return out;
}

RayletMetrics::RayletMetrics(const std::string& node_id)
    : registry_(std::make_shared<prometheus::Registry>()), node_id_(node_id) {
  auto& exits = prometheus::BuildCounter()
                    .Name("berth_raylet_worker_exits_total")
                    .Help("Worker processes that ended, by outcome.")
                    .Register(*registry_);
  succeeded_ = &exits.Add({{"node", node_id}, {"outcome", "succeeded"}});
  failed_ = &exits.Add({{"node", node_id}, {"outcome", "failed"}});
  killed_ = &exits.Add({{"node", node_id}, {"outcome", "killed"}});
  gpu_faults_ = &prometheus::BuildCounter()
                     .Name("berth_gpu_health_events_total")
                     .Help(
                         "GPU faults the node's health watch saw (NVML, the health file), by "
                         "kind; ignored (application) XIDs included.")
                     .Register(*registry_);
  // Every kind from the start: a rate over a series that appears at its
  // first event misses that event.
  for (absl::string_view kind : GpuFaultKindNames())
    gpu_faults_->Add({{"node", node_id_}, {"kind", std::string(kind)}});
}

void RayletMetrics::OnGpuFault(const GpuFault& fault) {
  gpu_faults_->Add({{"node", node_id_}, {"kind", std::string(GpuFaultKindName(fault.kind))}})
      .Increment();
}

void RayletMetrics::OnWorkerExit(const WorkerRecord& record) {
  switch (record.state) {
    case WorkerState::kExited:
      succeeded_->Increment();
      break;
    case WorkerState::kKilled:
      killed_->Increment();
      break;
    default:
      failed_->Increment();
  }
}

}  // namespace berth
