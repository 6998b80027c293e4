// Log and dedup values as a format 5 store holds them, for the tests that
// read or upgrade such a store: the log record repeats the fold position its
// key holds, and the dedup entry keeps its event's type and time and the
// whole 32-byte digest. (This build writes both leaner: format 6.)

#ifndef EVENTFOLD_TESTS_STORAGE_FORMAT5_RECORDS_H_
#define EVENTFOLD_TESTS_STORAGE_FORMAT5_RECORDS_H_

#include <flatbuffers/flatbuffers.h>

#include <cstdint>
#include <string>

#include "core/crc32c.h"
#include "storage/record_codec.h"
#include "storage/records_generated.h"

namespace eventfold::storage_test {

// A finished FlatBuffer framed as every stored value is: its masked
// CRC-32C after it, little-endian.
inline std::string Framed(const flatbuffers::FlatBufferBuilder& b) {
  std::string out(reinterpret_cast<const char*>(b.GetBufferPointer()), b.GetSize());
  const uint32_t crc = MaskCrc(Crc32c(out));
  for (int i = 0; i < 4; ++i) out.push_back(static_cast<char>((crc >> (8 * i)) & 0xFF));
  return out;
}

inline std::string EncodeFormat5Log(const storage::LogEntry& e) {
  namespace fb = storage::fb;
  const Event& ev = e.ranked.event;
  flatbuffers::FlatBufferBuilder b;
  auto id = b.CreateString(ev.event_id);
  auto type = b.CreateString(ev.type);
  b.Finish(fb::CreateLogRecord(b, id, type, ev.occurred_at, ev.version.has_value(),
                               ev.version.value_or(0), e.ranked.rank, e.received_at, 0, e.seq));
  return Framed(b);
}

inline std::string EncodeFormat5Dedup(const storage::DedupEntry& e) {
  namespace fb = storage::fb;
  flatbuffers::FlatBufferBuilder b;
  auto type = b.CreateString(e.type);
  auto entity = b.CreateString(e.entity ? e.entity->entity : "");
  auto entity_id = b.CreateString(e.entity ? e.entity->id : "");
  flatbuffers::Offset<flatbuffers::Vector<uint8_t>> digest;
  if (!e.body_digest.empty()) {
    digest = b.CreateVector(reinterpret_cast<const uint8_t*>(e.body_digest.data()),
                            e.body_digest.size());
  }
  b.Finish(fb::CreateDedupRecord(b, e.seq, type, e.occurred_at, entity, entity_id, e.routing_epoch,
                                 e.expires_at, digest));
  return Framed(b);
}

}  // namespace eventfold::storage_test

#endif  // EVENTFOLD_TESTS_STORAGE_FORMAT5_RECORDS_H_
