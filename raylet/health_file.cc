#include "raylet/health_file.h"

#include <fstream>
#include <utility>

namespace berth {

std::vector<std::string> HealthFile::NewLines() {
  std::vector<std::string> lines;
  std::ifstream in(path_, std::ios::binary);
  if (!in) return lines;
  in.seekg(0, std::ios::end);
  const uint64_t size = static_cast<uint64_t>(in.tellg());
  if (size < offset_) offset_ = 0;  // truncated or replaced: from its start
  in.seekg(static_cast<std::streamoff>(offset_));
  std::string text(size - offset_, '\0');
  in.read(text.data(), static_cast<std::streamsize>(text.size()));
  text.resize(static_cast<size_t>(in.gcount()));
  size_t start = 0;
  for (size_t end; (end = text.find('\n', start)) != std::string::npos; start = end + 1) {
    if (end > start) lines.push_back(text.substr(start, end - start));
  }
  offset_ += start;  // a partial last line waits for its newline
  return lines;
}

}  // namespace berth
