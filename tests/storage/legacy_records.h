// Values as older stores hold them, for the tests that read or upgrade such
// a store (this build writes format 7's compact records):
// - format 6: the five values of an event as FlatBuffers;
// - format 5: besides, the log record repeats the fold position its key
//   holds, and the dedup entry keeps its event's type and time and the
//   whole 32-byte digest.

#ifndef EVENTFOLD_TESTS_STORAGE_LEGACY_RECORDS_H_
#define EVENTFOLD_TESTS_STORAGE_LEGACY_RECORDS_H_

#include <flatbuffers/flatbuffers.h>

#include <cstdint>
#include <string>
#include <vector>

#include "storage/compact_coding.h"
#include "storage/key_codec.h"
#include "storage/record_codec.h"
#include "storage/records_generated.h"

namespace eventfold::storage_test {

// A finished FlatBuffer framed as every stored value is.
inline std::string Framed(const flatbuffers::FlatBufferBuilder& b) {
  return storage::FrameRecord(
      std::string_view(reinterpret_cast<const char*>(b.GetBufferPointer()), b.GetSize()));
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

// Format 6: a/<seq>.
inline std::string EncodeFormat6Event(const storage::StoredEvent& e) {
  namespace fb = storage::fb;
  flatbuffers::FlatBufferBuilder b;
  auto id = b.CreateString(e.event.event_id);
  auto type = b.CreateString(e.event.type);
  auto body = b.CreateVector(reinterpret_cast<const uint8_t*>(e.body.data()), e.body.size());
  auto entity = b.CreateString(e.entity ? e.entity->entity : "");
  auto entity_id = b.CreateString(e.entity ? e.entity->id : "");
  b.Finish(fb::CreateEventRecord(b, id, type, e.event.occurred_at, e.event.version.has_value(),
                                 e.event.version.value_or(0), e.received_at, body, entity,
                                 entity_id));
  return Framed(b);
}

inline flatbuffers::Offset<flatbuffers::Vector<flatbuffers::Offset<storage::fb::FieldRecord>>>
Format6Fields(flatbuffers::FlatBufferBuilder& b, const std::vector<Field>& fields) {
  std::vector<flatbuffers::Offset<storage::fb::FieldRecord>> out;
  for (const Field& f : fields) {
    out.push_back(
        storage::fb::CreateFieldRecord(b, b.CreateString(f.name), b.CreateString(f.json)));
  }
  return b.CreateVector(out);
}

// Format 6: g/<gen>/l/, its fold position left to the key; `with_data` as
// a format 1 record or a rebuild's sort run carries it.
inline std::string EncodeFormat6Log(const storage::LogEntry& e, bool with_data = false) {
  namespace fb = storage::fb;
  flatbuffers::FlatBufferBuilder b;
  auto type = b.CreateString(e.ranked.event.type);
  flatbuffers::Offset<flatbuffers::Vector<flatbuffers::Offset<fb::FieldRecord>>> data;
  if (with_data) data = Format6Fields(b, e.ranked.event.data);
  fb::LogRecordBuilder r(b);
  r.add_seq(e.seq);
  r.add_received_at(e.received_at);
  if (with_data) r.add_data(data);
  r.add_type(type);
  b.Finish(r.Finish());
  return Framed(b);
}

// Format 6: d/<event_id>, lean when it has a digest and is no tombstone.
inline std::string EncodeFormat6Dedup(const storage::DedupEntry& e) {
  namespace fb = storage::fb;
  flatbuffers::FlatBufferBuilder b;
  const bool lean = e.expires_at == 0 && e.body_digest.size() >= storage::kDedupDigestBytes;
  flatbuffers::Offset<flatbuffers::String> type;
  if (!lean) type = b.CreateString(e.type);
  auto entity = b.CreateString(e.entity ? e.entity->entity : "");
  auto entity_id = b.CreateString(e.entity ? e.entity->id : "");
  flatbuffers::Offset<flatbuffers::Vector<uint8_t>> digest;
  if (!e.body_digest.empty()) {
    const size_t n = lean ? storage::kDedupDigestBytes : e.body_digest.size();
    digest = b.CreateVector(reinterpret_cast<const uint8_t*>(e.body_digest.data()), n);
  }
  b.Finish(fb::CreateDedupRecord(b, e.seq, type, lean ? 0 : e.occurred_at, entity, entity_id,
                                 e.routing_epoch, e.expires_at, digest));
  return Framed(b);
}

// Format 6: g/<gen>/p/ and g/<gen>/s/, whole or the cursor only.
inline std::string EncodeFormat6Projection(const ProjectionState& s) {
  namespace fb = storage::fb;
  const Projection& p = s.projection;
  flatbuffers::FlatBufferBuilder b;
  auto state = b.CreateString(p.state);
  flatbuffers::Offset<flatbuffers::Vector<flatbuffers::Offset<fb::FieldRecord>>> fields;
  flatbuffers::Offset<flatbuffers::Vector<flatbuffers::Offset<fb::RejectionRecord>>> rejected_vec;
  if (!s.cursor_only) {
    fields = Format6Fields(b, p.fields);
    std::vector<flatbuffers::Offset<fb::RejectionRecord>> rejected;
    for (const Rejection& r : p.rejected) {
      rejected.push_back(fb::CreateRejectionRecord(
          b, b.CreateString(r.event_id), b.CreateString(r.type), b.CreateString(r.reason)));
    }
    rejected_vec = b.CreateVector(rejected);
  }
  auto last_id = b.CreateString(s.last.event_id);
  b.Finish(fb::CreateProjectionRecord(
      b, state, fields, p.version.has_value(), p.version.value_or(0), p.applied, rejected_vec,
      p.occurred_at.has_value(), p.occurred_at.value_or(0), s.events, s.last.occurred_at,
      s.last.version.has_value(), s.last.version.value_or(0), s.last.rank, last_id, s.cursor_only,
      static_cast<uint8_t>(s.snapshots)));
  return Framed(b);
}

// Format 6: f/<seq>.
inline std::string EncodeFormat6Change(const Change& c) {
  namespace fb = storage::fb;
  flatbuffers::FlatBufferBuilder b;
  auto entity = b.CreateString(c.entity);
  auto id = b.CreateString(c.id);
  auto state = b.CreateString(c.state);
  auto previous = b.CreateString(c.previous_state);
  auto ids = b.CreateVectorOfStrings(c.event_ids);
  b.Finish(fb::CreateChangeRecord(b, entity, id, state, previous, ids, c.changed_at));
  return Framed(b);
}

// Format 7's compact records of the kinds format 8 made leaner, as format 7
// wrote them: the event with its identity and route (tag 0xE1), the log
// record with its type and received_at (0xE2), the dedup entry with its
// digest's length, and the projection with its cursor whole and a
// snapshots byte (both 0xE3/0xE4 as before, without format 8's flags).
inline std::string EncodeFormat7Event(const storage::StoredEvent& e) {
  std::string out(1, '\xE1');
  const Event& ev = e.event;
  out.push_back(static_cast<char>((ev.version ? 1 : 0) | (e.entity ? 2 : 0)));
  storage::PutString(&out, ev.event_id);
  storage::PutString(&out, ev.type);
  storage::PutFixed64(&out, ev.occurred_at);
  if (ev.version) storage::PutZigzag(&out, *ev.version);
  storage::PutFixed64(&out, e.received_at);
  if (e.entity) {
    storage::PutString(&out, e.entity->entity);
    storage::PutString(&out, e.entity->id);
  }
  out.append(e.body);
  return storage::FrameRecord(out);
}

inline std::string EncodeFormat7Log(const storage::LogEntry& e) {
  std::string out(1, '\xE2');
  out.push_back(0);
  storage::PutString(&out, e.ranked.event.type);
  storage::PutVarint(&out, e.seq);
  storage::PutFixed64(&out, e.received_at);
  return storage::FrameRecord(out);
}

inline std::string EncodeFormat7Dedup(const storage::DedupEntry& e) {
  const bool lean = e.expires_at == 0 && e.body_digest.size() >= storage::kDedupDigestBytes;
  std::string out(1, '\xE3');
  out.push_back(static_cast<char>((e.entity ? 1 : 0) | (lean ? 0 : 2) | (e.expires_at ? 4 : 0)));
  storage::PutVarint(&out, e.seq);
  storage::PutVarint(&out, e.routing_epoch);
  if (e.entity) {
    storage::PutString(&out, e.entity->entity);
    storage::PutString(&out, e.entity->id);
  }
  storage::PutString(&out,
                     std::string_view(e.body_digest)
                         .substr(0, lean ? storage::kDedupDigestBytes : e.body_digest.size()));
  if (!lean) {
    storage::PutString(&out, e.type);
    storage::PutFixed64(&out, e.occurred_at);
  }
  if (e.expires_at) storage::PutFixed64(&out, e.expires_at);
  return storage::FrameRecord(out);
}

inline std::string EncodeFormat7Projection(const ProjectionState& s, bool cursor_only) {
  const Projection& p = s.projection;
  std::string out(1, '\xE4');
  out.push_back(static_cast<char>((p.version ? 1 : 0) | (p.occurred_at ? 2 : 0) |
                                  (s.last.version ? 4 : 0) | (cursor_only ? 8 : 0)));
  out.push_back(static_cast<char>(s.snapshots));
  storage::PutString(&out, p.state);
  if (p.version) storage::PutZigzag(&out, *p.version);
  storage::PutVarint(&out, p.applied);
  if (p.occurred_at) storage::PutFixed64(&out, *p.occurred_at);
  storage::PutVarint(&out, s.events);
  storage::PutFixed64(&out, s.last.occurred_at);
  if (s.last.version) storage::PutZigzag(&out, *s.last.version);
  storage::PutVarint(&out, s.last.rank);
  storage::PutString(&out, s.last.event_id);
  if (!cursor_only) {
    storage::PutVarint(&out, p.fields.size());
    for (const Field& f : p.fields) {
      storage::PutString(&out, f.name);
      storage::PutString(&out, f.json);
    }
    storage::PutVarint(&out, p.rejected.size());
    for (const Rejection& r : p.rejected) {
      storage::PutString(&out, r.event_id);
      storage::PutString(&out, r.type);
      storage::PutString(&out, r.reason);
    }
  }
  return storage::FrameRecord(out);
}

// A fold key as formats 1-7 encoded it in log and snapshot keys: the time,
// 0x00 or 0x01 and eight bytes of version, four of rank, the event id.
inline std::string EncodeLegacyFoldKey(const FoldKey& k) {
  std::string out;
  auto big_endian = [&](uint64_t v, int bytes) {
    for (int i = bytes - 1; i >= 0; --i) out.push_back(static_cast<char>(v >> (8 * i)));
  };
  big_endian(static_cast<uint64_t>(k.occurred_at) ^ (1ull << 63), 8);
  out.push_back(k.version ? '\x01' : '\x00');
  if (k.version) big_endian(static_cast<uint64_t>(*k.version) ^ (1ull << 63), 8);
  big_endian(k.rank, 4);
  return out + k.event_id;
}

// A key under g/ of format 8 as formats 1-7 wrote it: the generation in
// four bytes, and a log or snapshot key's fold position in their grammar.
inline std::string LegacyGenerationKey(std::string_view key) {
  const std::optional<storage::GenerationKeyView> g = storage::ParseGenerationKey(key);
  if (!g) return std::string(key);
  std::string out = "g/";
  for (int i = 3; i >= 0; --i) out.push_back(static_cast<char>(g->gen >> (8 * i)));
  out.push_back('/');
  const std::optional<storage::LogKeyView> parts = storage::SplitLogKey(key);
  const std::optional<FoldKey> fold = parts ? storage::DecodeFoldKey(parts->fold) : std::nullopt;
  if (!fold) return out.append(g->rest);
  return out.append(g->rest.substr(0, g->rest.size() - parts->fold.size()))
      .append(EncodeLegacyFoldKey(*fold));
}

}  // namespace eventfold::storage_test

#endif  // EVENTFOLD_TESTS_STORAGE_LEGACY_RECORDS_H_
