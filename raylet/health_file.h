// HealthFile: the lines an external GPU health checker appended to a file
// since the last look (`--gpu-health-file`: DCGM, NHC or a test writes
// `<gpu index> <kind> <detail>` lines; gpu_health.h reads them). A line is
// taken once it ends with a newline; a file that shrank (rotated or
// truncated) is read again from its start; a missing file is no lines.
#ifndef BERTH_RAYLET_HEALTH_FILE_H_
#define BERTH_RAYLET_HEALTH_FILE_H_

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace berth {

class HealthFile {
 public:
  // Reads from `offset` on (how far an earlier run read).
  explicit HealthFile(std::string path, uint64_t offset = 0)
      : path_(std::move(path)), offset_(offset) {}

  // The complete lines appended since the last call.
  std::vector<std::string> NewLines();
  // Of the first byte not yet taken.
  uint64_t offset() const { return offset_; }

 private:
  std::string path_;
  uint64_t offset_;
};

}  // namespace berth

#endif  // BERTH_RAYLET_HEALTH_FILE_H_
