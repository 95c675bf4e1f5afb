#include "placement/resource_name.h"

#include <atomic>
#include <memory>

#include "absl/hash/hash.h"

namespace berth {
namespace {

// Open addressing, linear probing, slots only ever going from null to a
// name. A name's probe sequence is fixed, so whoever interns it first takes
// the first free slot of that sequence and everyone else finds it there;
// a table is left for the next (twice its size) only when every slot is
// taken, which every caller then sees alike.
class InternTable {
 public:
  explicit InternTable(size_t size)
      : size_(size), slots_(new std::atomic<const std::string*>[size]) {
    for (size_t i = 0; i < size_; ++i) slots_[i].store(nullptr, std::memory_order_relaxed);
  }

  const std::string* Intern(absl::string_view name, size_t hash) {
    for (size_t probe = 0; probe < size_; ++probe) {
      std::atomic<const std::string*>& slot = slots_[(hash + probe) & (size_ - 1)];
      const std::string* held = slot.load(std::memory_order_acquire);
      if (held == nullptr) {
        auto mine = std::make_unique<const std::string>(name);
        if (slot.compare_exchange_strong(held, mine.get(), std::memory_order_acq_rel,
                                         std::memory_order_acquire)) {
          return mine.release();
        }
      }
      if (*held == name) return held;
    }
    InternTable* next = next_.load(std::memory_order_acquire);
    if (next == nullptr) {
      auto fresh = std::make_unique<InternTable>(size_ * 2);
      if (next_.compare_exchange_strong(next, fresh.get(), std::memory_order_acq_rel,
                                        std::memory_order_acquire)) {
        next = fresh.release();
      }
    }
    return next->Intern(name, hash);
  }

 private:
  const size_t size_;  // a power of two
  std::unique_ptr<std::atomic<const std::string*>[]> slots_;
  std::atomic<InternTable*> next_{nullptr};
};

}  // namespace

ResourceName::ResourceName(absl::string_view name) {
  // Never destroyed: names outlive every set that names them.
  static InternTable* const table = new InternTable(1024);
  name_ = table->Intern(name, absl::Hash<absl::string_view>{}(name));
}

}  // namespace berth
