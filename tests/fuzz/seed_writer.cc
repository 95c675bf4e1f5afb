// Writes the binary seed corpora of scaling_config_fuzzer (v1::TrainJobSpec)
// and head_request_fuzzer (fuzz::HeadFuzzInput) from the text protos below:
//   fuzz_seed_writer tests/fuzz/corpus
// writes <dir>/scaling_config_fuzzer/seed-* and <dir>/head_request_fuzzer/seed-*.
#include <cstdio>
#include <fstream>
#include <string>
#include <utility>
#include <vector>

#include "berth/v1/train.pb.h"
#include "google/protobuf/text_format.h"
#include "head_fuzz.pb.h"

namespace {

// Train job specs: the examples/ jobs and the edges of ScalingConfig.
const std::vector<std::pair<std::string, std::string>> kTrainJobs = {
    {"cpu", R"pb(name: "cpu"
                 scaling_config { num_workers: 3 }
                 entrypoint { builtin_trainer { steps: 10 } })pb"},
    {"a10g", R"pb(scaling_config {
                    num_workers: 16
                    use_gpu: true
                    accelerator_type: "A10G"
                    trainer_resources {
                      amounts { key: "CPU" value: 1 }
                      amounts { key: "memory" value: 214748364800 }
                    }
                    resources_per_worker { amounts { key: "GPU" value: 1 } }
                    placement_strategy: PLACEMENT_STRATEGY_PACK
                  }
                  entrypoint { builtin_trainer {} })pb"},
    {"fractional", R"pb(scaling_config {
                          num_workers: 4
                          use_gpu: true
                          resources_per_worker {
                            amounts { key: "GPU" value: 0.25 }
                            amounts { key: "CPU" value: 2 }
                          }
                          placement_strategy: PLACEMENT_STRATEGY_STRICT_PACK
                        })pb"},
    {"spread", R"pb(scaling_config {
                      num_workers: 4
                      use_gpu: true
                      accelerator_type: "T4"
                      placement_strategy: PLACEMENT_STRATEGY_STRICT_SPREAD
                    }
                    entrypoint { command { argv: "python3" argv: "train.py" } })pb"},
    {"zero-trainer", R"pb(scaling_config {
                            num_workers: 2
                            trainer_resources { amounts { key: "CPU" value: 0 } }
                            resources_per_worker { amounts { key: "disk" value: 1e9 } }
                          })pb"},
    {"internal", R"pb(scaling_config {
                        num_workers: 1
                        use_gpu: true
                        resources_per_worker { amounts { key: "accelerator_type:A100" value: 1 } }
                      })pb"},
    {"gpu-without-use", R"pb(scaling_config {
                               num_workers: 2
                               resources_per_worker { amounts { key: "GPU" value: 1 } }
                             })pb"},
    {"max", R"pb(scaling_config {
                   num_workers: 4096
                   use_gpu: true
                   resources_per_worker {
                     amounts { key: "GPU" value: 8 }
                     amounts { key: "memory" value: 2.8e13 }
                   }
                 })pb"},
};

// Head request sequences: a cluster, groups and jobs scheduled, commits
// ending well and badly, a node dying mid-commit, removal.
const std::vector<std::pair<std::string, std::string>> kHeadSequences = {
    {"place-and-remove", R"pb(
       ops {
         register_node {
           node_id: "a"
           address: "127.0.0.1:1"
           request_id: "r1"
           total {
             amounts { key: "CPU" value: 8 }
             amounts { key: "GPU" value: 2 }
           }
           gpus { index: 0 accelerator_type: "A10G" }
           gpus { index: 1 accelerator_type: "A10G" }
         }
       }
       ops {
         register_node {
           node_id: "b"
           address: "127.0.0.1:2"
           total { amounts { key: "CPU" value: 16 } }
           labels { key: "zone" value: "b" }
         }
       }
       ops {
         create_group {
           request_id: "g1"
           name: "one"
           bundles { resources { amounts { key: "GPU" value: 1 } } }
           bundles { resources { amounts { key: "CPU" value: 4 } } }
           strategy: PLACEMENT_STRATEGY_SPREAD
         }
       }
       ops { schedule_after_ms: 1 }
       ops { commit_end { task: 0 prepared: true ok: true } }
       ops { list_groups {} }
       ops { remove_group: 0 }
       ops { list_nodes {} })pb"},
    {"commit-fails-then-dies", R"pb(
       ops {
         register_node {
           node_id: "a"
           address: "127.0.0.1:1"
           total {
             amounts { key: "CPU" value: 4 }
             amounts { key: "GPU" value: 1 }
           }
           gpus { index: 0 accelerator_type: "T4" }
         }
       }
       ops {
         create_group {
           request_id: "g1"
           bundles {
             resources { amounts { key: "GPU" value: 0.5 } }
             selector {
               requirements { key: "berth.io/accelerator-type" op: LABEL_OPERATOR_IN values: "T4" }
             }
           }
           strategy: PLACEMENT_STRATEGY_STRICT_PACK
         }
       }
       ops { schedule_after_ms: 1 }
       ops { commit_end { task: 0 prepared: true ok: false } }
       ops { schedule_after_ms: 200 }
       ops { liveness_after_ms: 6000 }
       ops { commit_end { task: 0 ok: true } }
       ops {
         register_node {
           node_id: "a"
           address: "127.0.0.1:3"
           total { amounts { key: "CPU" value: 4 } }
         }
       }
       ops { schedule_after_ms: 1 })pb"},
    {"train-job-and-drain", R"pb(
       ops {
         register_node {
           node_id: "g0"
           address: "h:1"
           request_id: "x"
           total {
             amounts { key: "CPU" value: 32 }
             amounts { key: "GPU" value: 4 }
             amounts { key: "memory" value: 274877906944 }
           }
           gpus { index: 0 accelerator_type: "A10G" }
           gpus { index: 1 accelerator_type: "A10G" }
           gpus { index: 2 accelerator_type: "A10G" }
           gpus { index: 3 accelerator_type: "A10G" }
         }
       }
       ops {
         submit_train_job {
           request_id: "j1"
           spec { scaling_config { num_workers: 4 use_gpu: true accelerator_type: "A10G" } }
         }
       }
       ops { schedule_after_ms: 1 }
       ops { commit_end { prepared: true ok: true } }
       ops { drain { node_id: "g0" reason: "maintenance" } }
       ops { heartbeat { node_id: "g0" sequence: 1 } }
       ops { get_group { name: "job-0-pg" } }
       ops { remove_group: 0 })pb"},
    {"reschedule-spread", R"pb(
       ops {
         register_node {
           node_id: "a"
           address: "h:1"
           total { amounts { key: "CPU" value: 4 } }
         }
       }
       ops {
         register_node {
           node_id: "b"
           address: "h:2"
           total { amounts { key: "CPU" value: 4 } }
         }
       }
       ops {
         register_node {
           node_id: "c"
           address: "h:3"
           total { amounts { key: "CPU" value: 4 } }
         }
       }
       ops {
         create_group {
           request_id: "s"
           priority: 5
           bundles { resources { amounts { key: "CPU" value: 2 } } }
           bundles { resources { amounts { key: "CPU" value: 2 } } }
           strategy: PLACEMENT_STRATEGY_STRICT_SPREAD
         }
       }
       ops { schedule_after_ms: 1 }
       ops { commit_end { prepared: true ok: true } }
       ops { heartbeat { node_id: "a" sequence: 5 } }
       ops { liveness_after_ms: 3000 }
       ops { heartbeat { node_id: "a" sequence: 6 } }
       ops { liveness_after_ms: 3000 }
       ops { schedule_after_ms: 1 }
       ops { commit_end { prepared: true ok: true } }
       ops { remove_group_id: "pg-3" })pb"},
    // Reproducers of the known issues that head_request_fuzzer tolerates.
    {"known-node-dead-during-commit", R"pb(
       ops {
         register_node {
           node_id: "a"
           address: "h:1"
           total { amounts { key: "CPU" value: 4 } }
         }
       }
       ops {
         register_node {
           node_id: "b"
           address: "h:2"
           total { amounts { key: "CPU" value: 4 } }
         }
       }
       ops {
         register_node {
           node_id: "c"
           address: "h:3"
           total { amounts { key: "CPU" value: 4 } }
         }
       }
       ops {
         create_group {
           request_id: "s"
           bundles { resources { amounts { key: "CPU" value: 2 } } }
           bundles { resources { amounts { key: "CPU" value: 2 } } }
           strategy: PLACEMENT_STRATEGY_STRICT_SPREAD
         }
       }
       ops { schedule_after_ms: 1 }
       ops { commit_end { prepared: true ok: true } }
       ops { liveness_after_ms: 3000 }
       ops { heartbeat { node_id: "b" sequence: 1 } }
       ops { heartbeat { node_id: "c" sequence: 1 } }
       ops { liveness_after_ms: 3000 }
       ops { schedule_after_ms: 1 }
       ops { heartbeat { node_id: "c" sequence: 2 } }
       ops { liveness_after_ms: 3000 }
       ops { commit_end { prepared: true ok: true } }
       ops { list_groups {} })pb"},
    {"known-rejected-reregistration", R"pb(
       ops {
         register_node {
           node_id: "a"
           address: "h:1"
           total { amounts { key: "CPU" value: 4 } }
         }
       }
       ops { liveness_after_ms: 6000 }
       ops {
         register_node {
           node_id: "a"
           address: "h:1"
           total { amounts { key: "CPU" value: 4 } }
           labels { key: "zone" value: "not valid" }
         }
       })pb"},
};

bool Write(const std::string& path, const google::protobuf::Message& message) {
  std::ofstream out(path, std::ios::binary);
  return message.SerializeToOstream(&out) && out.good();
}

template <typename Message>
bool WriteAll(const std::string& dir,
              const std::vector<std::pair<std::string, std::string>>& seeds) {
  for (const auto& [name, text] : seeds) {
    Message m;
    if (!google::protobuf::TextFormat::ParseFromString(text, &m)) {
      std::fprintf(stderr, "seed %s does not parse\n", name.c_str());
      return false;
    }
    if (!Write(dir + "/seed-" + name, m)) {
      std::fprintf(stderr, "cannot write %s/seed-%s\n", dir.c_str(), name.c_str());
      return false;
    }
  }
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s CORPUS_DIR\n", argv[0]);
    return 2;
  }
  const std::string dir = argv[1];
  const bool ok =
      WriteAll<berth::v1::TrainJobSpec>(dir + "/scaling_config_fuzzer", kTrainJobs) &&
      WriteAll<berth::fuzz::HeadFuzzInput>(dir + "/head_request_fuzzer", kHeadSequences);
  return ok ? 0 : 1;
}
