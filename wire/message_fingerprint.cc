#include "wire/message_fingerprint.h"

#include "google/protobuf/io/coded_stream.h"
#include "google/protobuf/io/zero_copy_stream_impl_lite.h"

namespace berth {

std::string DeterministicBytes(const google::protobuf::MessageLite& message) {
  std::string bytes;
  {
    google::protobuf::io::StringOutputStream stream(&bytes);
    google::protobuf::io::CodedOutputStream out(&stream);
    out.SetSerializationDeterministic(true);
    message.SerializeToCodedStream(&out);
  }  // the stream writes its last bytes when it goes
  return bytes;
}

uint64_t MessageFingerprint(const google::protobuf::MessageLite& message) {
  uint64_t hash = 0xcbf29ce484222325ULL;
  for (unsigned char c : DeterministicBytes(message)) hash = (hash ^ c) * 0x100000001b3ULL;
  return hash;
}

}  // namespace berth
