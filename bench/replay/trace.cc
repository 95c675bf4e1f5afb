#include "bench/replay/trace.h"

#include <algorithm>
#include <fstream>
#include <map>
#include <sstream>
#include <tuple>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"

namespace berth::replay {
namespace {

constexpr int64_t kBytesPerMib = int64_t{1} << 20;

// The trace counts CPU and GPU in thousandths and memory in MiB.
Quantity FromMilli(int64_t milli) {
  return Quantity::FromUnits(milli * (Quantity::kUnitsPerWhole / 1000));
}
Quantity FromMib(int64_t mib) { return Quantity::Whole(mib * kBytesPerMib); }

// One CSV file: a header naming the columns, then rows of plain fields (the
// trace quotes nothing and its model lists use `|`, not commas).
class CsvTable {
 public:
  static absl::StatusOr<CsvTable> Parse(absl::string_view text,
                                        const std::vector<std::string>& required) {
    CsvTable table;
    std::vector<absl::string_view> lines = absl::StrSplit(text, '\n');
    bool header = true;
    for (size_t i = 0; i < lines.size(); ++i) {
      absl::string_view line = absl::StripSuffix(lines[i], "\r");
      if (line.empty()) continue;
      std::vector<std::string> fields = absl::StrSplit(line, ',');
      if (header) {
        for (size_t c = 0; c < fields.size(); ++c) table.column_[fields[c]] = c;
        for (const std::string& name : required) {
          if (!table.column_.contains(name)) {
            return absl::InvalidArgumentError(
                absl::StrCat("line ", i + 1, ": header has no column '", name, "'"));
          }
        }
        header = false;
        continue;
      }
      if (fields.size() != table.column_.size()) {
        return absl::InvalidArgumentError(absl::StrCat(
            "line ", i + 1, ": ", fields.size(), " fields, the header has ", table.column_.size()));
      }
      table.rows_.push_back({i + 1, std::move(fields)});
    }
    if (header) return absl::InvalidArgumentError("no header line");
    return table;
  }

  size_t size() const { return rows_.size(); }
  bool Has(absl::string_view column) const { return column_.contains(column); }
  const std::string& Text(size_t row, absl::string_view column) const {
    return rows_[row].fields[column_.at(column)];
  }
  // A non-negative integer field; `optional` fields may be empty.
  absl::StatusOr<std::optional<int64_t>> Integer(size_t row, absl::string_view column,
                                                 bool optional = false) const {
    const std::string& text = Text(row, column);
    if (text.empty() && optional) return std::optional<int64_t>();
    int64_t value = 0;
    if (!absl::SimpleAtoi(text, &value) || value < 0) {
      return absl::InvalidArgumentError(absl::StrCat("line ", rows_[row].line, ", column ", column,
                                                     ": '", text,
                                                     "' is not a non-negative integer"));
    }
    return std::optional<int64_t>(value);
  }

 private:
  struct Row {
    size_t line;
    std::vector<std::string> fields;
  };
  absl::flat_hash_map<std::string, size_t> column_;
  std::vector<Row> rows_;
};

// Reads integer fields into their destinations; stops at the first error.
absl::Status ReadIntegers(const CsvTable& table, size_t row,
                          std::initializer_list<std::pair<absl::string_view, int64_t*>> fields) {
  for (const auto& [column, out] : fields) {
    absl::StatusOr<std::optional<int64_t>> v = table.Integer(row, column);
    if (!v.ok()) return v.status();
    *out = **v;
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::vector<TraceNode>> ParseNodeList(absl::string_view csv) {
  absl::StatusOr<CsvTable> table =
      CsvTable::Parse(csv, {"sn", "cpu_milli", "memory_mib", "gpu", "model"});
  if (!table.ok()) return table.status();
  std::vector<TraceNode> nodes(table->size());
  for (size_t r = 0; r < table->size(); ++r) {
    TraceNode& n = nodes[r];
    n.name = table->Text(r, "sn");
    n.model = table->Text(r, "model");
    if (absl::Status s = ReadIntegers(
            *table, r,
            {{"cpu_milli", &n.cpu_milli}, {"memory_mib", &n.memory_mib}, {"gpu", &n.gpus}});
        !s.ok()) {
      return s;
    }
    if (n.gpus > 0 && n.model.empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat("node '", n.name, "': has ", n.gpus, " GPUs but no model"));
    }
  }
  return nodes;
}

absl::StatusOr<TaskList> ParseTaskList(absl::string_view csv) {
  absl::StatusOr<CsvTable> table =
      CsvTable::Parse(csv, {"name", "cpu_milli", "memory_mib", "num_gpu", "gpu_milli"});
  if (!table.ok()) return table.status();
  TaskList list;
  for (const char* column : {"gpu_spec", "creation_time", "deletion_time"}) {
    if (!table->Has(column)) list.absent.emplace_back(column);
  }
  list.has_models = table->Has("gpu_spec");
  list.has_times = table->Has("creation_time") && table->Has("deletion_time");
  std::vector<TraceTask>& tasks = list.tasks;
  tasks.resize(table->size());
  for (size_t r = 0; r < table->size(); ++r) {
    TraceTask& t = tasks[r];
    t.name = table->Text(r, "name");
    if (table->Has("qos")) t.qos = table->Text(r, "qos");
    if (absl::Status s = ReadIntegers(*table, r,
                                      {{"cpu_milli", &t.cpu_milli},
                                       {"memory_mib", &t.memory_mib},
                                       {"num_gpu", &t.num_gpu},
                                       {"gpu_milli", &t.gpu_milli}});
        !s.ok()) {
      return s;
    }
    if (list.has_times) {
      if (absl::Status s = ReadIntegers(
              *table, r,
              {{"creation_time", &t.creation_time}, {"deletion_time", &t.deletion_time}});
          !s.ok()) {
        return s;
      }
    }
    if (table->Has("scheduled_time")) {
      absl::StatusOr<std::optional<int64_t>> scheduled =
          table->Integer(r, "scheduled_time", /*optional=*/true);
      if (!scheduled.ok()) return scheduled.status();
      t.scheduled_time = *scheduled;
    }
    if (t.num_gpu == 1 && (t.gpu_milli == 0 || t.gpu_milli > 1000)) {
      return absl::InvalidArgumentError(absl::StrCat("task '", t.name, "': gpu_milli ", t.gpu_milli,
                                                     " for one GPU must be in 1..1000"));
    }
    if (!list.has_models) continue;
    for (absl::string_view model :
         absl::StrSplit(table->Text(r, "gpu_spec"), '|', absl::SkipEmpty())) {
      t.gpu_spec.emplace_back(model);
    }
    // The trace repeats models in some lists (`V100M16|V100M32|V100M32`).
    std::sort(t.gpu_spec.begin(), t.gpu_spec.end());
    t.gpu_spec.erase(std::unique(t.gpu_spec.begin(), t.gpu_spec.end()), t.gpu_spec.end());
  }
  return list;
}

absl::StatusOr<std::vector<double>> ParseRuntimes(absl::string_view csv) {
  absl::StatusOr<CsvTable> table = CsvTable::Parse(csv, {"runtime"});
  if (!table.ok()) return table.status();
  std::vector<double> runtimes(table->size());
  for (size_t r = 0; r < table->size(); ++r) {
    const std::string& text = table->Text(r, "runtime");
    if (!absl::SimpleAtod(text, &runtimes[r]) || !(runtimes[r] >= 0)) {
      return absl::InvalidArgumentError(
          absl::StrCat("row ", r + 1, ", column runtime: '", text, "' is not a duration >= 0"));
    }
  }
  return runtimes;
}

absl::StatusOr<std::string> ReadTextFile(const std::string& path) {
  std::ifstream in(path);
  if (!in) return absl::NotFoundError(absl::StrCat("cannot open '", path, "'"));
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

NodeSpec ToNodeSpec(const TraceNode& node) {
  NodeSpec spec;
  spec.node_id = node.name;
  spec.resources.Set(kCpu, FromMilli(node.cpu_milli));
  spec.resources.Set(kMemory, FromMib(node.memory_mib));
  if (node.gpus > 0) {
    spec.resources.Set(kGpu, Quantity::Whole(node.gpus));
    spec.accelerator_type = node.model;
  }
  return spec;
}

absl::string_view TaskShapingName(TaskShaping shaping) {
  switch (shaping) {
    case TaskShaping::kOneBundle:
      return "one-bundle";
    case TaskShaping::kGangPack:
      return "gang-PACK";
    case TaskShaping::kGangStrictPack:
      return "gang-STRICT_PACK";
    case TaskShaping::kGangRackRequired:
      return "gang-rack-required";
    case TaskShaping::kGangRackPreferred:
      return "gang-rack-preferred";
  }
  return "unknown";
}

absl::StatusOr<PlacementGroupSpec> ToPlacementGroup(const TraceTask& task, TaskShaping shaping) {
  LabelSelector selector;
  if (!task.gpu_spec.empty()) {
    absl::StatusOr<LabelSelector> s = LabelSelector::Create(
        {{std::string(kAcceleratorTypeLabel), LabelOperator::kIn, task.gpu_spec}},
        absl::StrCat(task.name, ".gpu_spec"));
    if (!s.ok()) return s.status();
    selector = *std::move(s);
  }
  const int64_t cpu_units = FromMilli(task.cpu_milli).units();
  const int64_t memory_units = FromMib(task.memory_mib).units();
  const bool gang = shaping != TaskShaping::kOneBundle && task.num_gpu > 1;
  const int64_t parts = gang ? task.num_gpu : 1;
  std::vector<Bundle> bundles;
  for (int64_t i = 0; i < parts; ++i) {
    // CPU and memory split evenly; bundle 0 takes the remainder.
    ResourceSet r;
    const int64_t cpu = cpu_units / parts + (i == 0 ? cpu_units % parts : 0);
    const int64_t memory = memory_units / parts + (i == 0 ? memory_units % parts : 0);
    if (cpu > 0) r.Set(kCpu, Quantity::FromUnits(cpu));
    if (memory > 0) r.Set(kMemory, Quantity::FromUnits(memory));
    const int64_t gpu_units = gang ? Quantity::kUnitsPerWhole : FromMilli(task.GpuMilli()).units();
    if (gpu_units > 0) r.Set(kGpu, Quantity::FromUnits(gpu_units));
    bundles.push_back({std::move(r), selector});
  }
  Topology topology;
  if (gang && shaping == TaskShaping::kGangRackRequired) topology.required = kRackLabel;
  if (gang && shaping == TaskShaping::kGangRackPreferred) topology.preferred = {kRackLabel};
  return PlacementGroupSpec::Create(std::move(bundles),
                                    shaping == TaskShaping::kGangStrictPack
                                        ? PlacementStrategy::kStrictPack
                                        : PlacementStrategy::kPack,
                                    std::move(topology));
}

std::vector<TaskShape> GpuTaskShapes(const std::vector<TraceTask>& tasks) {
  using Key = std::tuple<int64_t, int64_t, int64_t, std::vector<std::string>>;
  std::map<Key, int64_t> counts;  // ordered: the shapes come out in a stable order
  for (const TraceTask& t : tasks) {
    if (t.GpuMilli() == 0) continue;
    ++counts[Key(t.cpu_milli, t.memory_mib, t.GpuMilli(), t.gpu_spec)];
  }
  std::vector<TaskShape> shapes;
  for (const auto& [key, count] : counts) {
    const auto& [cpu_milli, memory_mib, gpu_milli, models] = key;
    shapes.push_back({FromMilli(cpu_milli), FromMib(memory_mib), FromMilli(gpu_milli), models,
                      static_cast<double>(count)});
  }
  return shapes;
}

}  // namespace berth::replay
