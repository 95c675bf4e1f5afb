// HeadEpoch: which head a raylet obeys. Each head that becomes active
// numbers itself one past the last (HeadInfo.epoch, kept in the state
// store) and puts the number on every call to a raylet; a raylet follows
// the newest epoch it has seen (on calls, and in the answers to its
// registrations and heartbeats) and refuses the calls of an older head, so
// a head that wakes up after a standby took over cannot act.
//
// Promises: a call without an epoch (a test standing in for the head, a
// head from before epochs) is not fenced; the fence only moves forward.
#ifndef BERTH_AUTH_HEAD_EPOCH_H_
#define BERTH_AUTH_HEAD_EPOCH_H_

#include <atomic>
#include <cstdint>

#include "grpcpp/client_context.h"
#include "grpcpp/server_context.h"
#include "grpcpp/support/status.h"

namespace berth {

// Puts `epoch` on a call (nothing for 0).
void AttachHeadEpoch(grpc::ClientContext* context, uint64_t epoch);

class HeadEpochFence {
 public:
  // OK for a call of the newest head seen so far (remembered) or without
  // an epoch; FAILED_PRECONDITION naming both epochs for an older head.
  grpc::Status Admit(const grpc::ServerContextBase& context);
  // An epoch a head answered with.
  void Saw(uint64_t epoch);
  uint64_t newest() const { return newest_.load(); }

 private:
  std::atomic<uint64_t> newest_{0};
};

}  // namespace berth

#endif  // BERTH_AUTH_HEAD_EPOCH_H_
