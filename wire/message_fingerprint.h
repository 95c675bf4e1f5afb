// Deterministic bytes and fingerprints of protobuf messages: the one way
// berth compares requests (idempotency: was this request_id used for this
// request?) and keys messages. A message's plain SerializeAsString is not
// deterministic where it has map fields (their order is unspecified), so
// two equal requests could differ there; these fix the map order.
#ifndef BERTH_WIRE_MESSAGE_FINGERPRINT_H_
#define BERTH_WIRE_MESSAGE_FINGERPRINT_H_

#include <cstdint>
#include <string>

#include "google/protobuf/message_lite.h"

namespace berth {

// The message's serialization with map entries in key order: equal
// messages give equal bytes (within one build of the protos).
std::string DeterministicBytes(const google::protobuf::MessageLite& message);

// A 64-bit FNV-1a of DeterministicBytes: what a head keeps of a request to
// recognize its retries, instead of the request itself.
uint64_t MessageFingerprint(const google::protobuf::MessageLite& message);

}  // namespace berth

#endif  // BERTH_WIRE_MESSAGE_FINGERPRINT_H_
