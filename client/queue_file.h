// Queue files (`berth queue apply -f queues.yaml`): a YAML
// ApplyQueuesRequest, read as job files are (client/yaml_reader.h):
//
//   cohorts: [org]
//   priority_classes:
//     - {name: high, value: 100}
//   queues:
//     - name: team-a
//       cohort: org
//       team: team-a
//       quota: {GPU: 8, "GPU:A10G": 4, CPU: 64, memory: 512Gi}
//       borrowing_limit: {GPU: 4}
//       lending_limit: {GPU: 8}
//       weight: 2
//
// The head checks names and amounts; errors name file:line and the key.
#ifndef BERTH_CLIENT_QUEUE_FILE_H_
#define BERTH_CLIENT_QUEUE_FILE_H_

#include <string>

#include "absl/status/statusor.h"
#include "berth/v1/head.pb.h"

namespace berth {

absl::StatusOr<v1::ApplyQueuesRequest> LoadQueueFile(const std::string& path);
// The same for YAML text already in memory; `name` stands for the path.
absl::StatusOr<v1::ApplyQueuesRequest> ParseQueueFile(const std::string& text,
                                                      const std::string& name);

}  // namespace berth

#endif  // BERTH_CLIENT_QUEUE_FILE_H_
