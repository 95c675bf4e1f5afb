#include "common/random_id.h"

#include <random>

namespace berth {

uint64_t RandomIdBits() {
  static thread_local std::mt19937_64 engine = [] {
    std::random_device device;
    std::seed_seq seed{device(), device(), device(), device(),
                       device(), device(), device(), device()};
    return std::mt19937_64(seed);
  }();
  return engine();
}

}  // namespace berth
