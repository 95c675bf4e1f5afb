// RandomId: random numbers for the ids berth makes up (placement groups,
// train jobs): not secrets (tokens read std::random_device), but ids that
// must not repeat. Each thread draws from its own 64-bit engine seeded
// with 256 bits of the OS's entropy: a gRPC server starts threads by the
// thousand, and engines seeded with one 32-bit word would share streams
// (and so ids) within a few of them.
#ifndef BERTH_COMMON_RANDOM_ID_H_
#define BERTH_COMMON_RANDOM_ID_H_

#include <cstdint>

namespace berth {

// A uniformly random 64-bit number; thread-safe.
uint64_t RandomIdBits();

}  // namespace berth

#endif  // BERTH_COMMON_RANDOM_ID_H_
