#include "storage/record_codec.h"

#include <cassert>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>

#include "core/crc32c.h"
#include "core/decode.h"
#include "storage/compact_coding.h"
#include "storage/key_codec.h"
#include "storage/records_generated.h"

namespace eventfold::storage {
namespace {

namespace fbs = ::flatbuffers;

std::string_view View(const fbs::String* s) {
  return s ? std::string_view(s->data(), s->size()) : std::string_view();
}

std::string_view View(const fbs::Vector<uint8_t>* v) {
  return v ? std::string_view(reinterpret_cast<const char*>(v->data()), v->size())
           : std::string_view();
}

// Every value is its record (a FlatBuffer; since format 7, for the five
// values of each event, a compact record) followed by the masked CRC-32C of
// it, little-endian: corruption that still parses is caught too.
constexpr size_t kCrcBytes = 4;

}  // namespace

std::string FrameRecord(std::string_view record) {
  const uint32_t crc = MaskCrc(Crc32c(record));
  std::string out;
  out.reserve(record.size() + kCrcBytes);
  out.append(record);
  for (int i = 0; i < 4; ++i) out.push_back(static_cast<char>((crc >> (8 * i)) & 0xFF));
  return out;
}

namespace {

std::string Finish(fbs::FlatBufferBuilder& b) {
  return FrameRecord(
      std::string_view(reinterpret_cast<const char*>(b.GetBufferPointer()), b.GetSize()));
}

// This thread's builder, cleared: every record is encoded into one reused
// buffer (Finish copies it out), unless the last record was a large one.
fbs::FlatBufferBuilder& Builder() {
  constexpr size_t kKeepBytes = 64 << 10;
  thread_local fbs::FlatBufferBuilder builder(4096);
  if (builder.GetSize() > kKeepBytes) {
    builder.Reset();
  } else {
    builder.Clear();
  }
  return builder;
}

// LevelDB hands values out at any address, but FlatBuffers reads its fields
// in place and needs them aligned: copy a misaligned value into an aligned
// buffer, kept alive while the record is decoded.
class AlignedValue {
 public:
  explicit AlignedValue(std::string_view v) : view_(v) {
    if (reinterpret_cast<uintptr_t>(v.data()) % alignof(std::max_align_t) != 0) {
      buffer_.reset(new std::max_align_t[v.size() / sizeof(std::max_align_t) + 1]);
      std::memcpy(buffer_.get(), v.data(), v.size());
      view_ = std::string_view(reinterpret_cast<const char*>(buffer_.get()), v.size());
    }
  }
  std::string_view view() const { return view_; }

 private:
  std::unique_ptr<std::max_align_t[]> buffer_;
  std::string_view view_;
};

// The value without its checksum, or null with `error` set when the value
// is too short for one or the checksum does not match.
bool Unframed(std::string_view key, std::string_view value, std::string_view* body, Status* error) {
  if (value.size() < kCrcBytes) {
    *error = Status::Corruption("record at key \"" + Printable(key) + "\" is truncated");
    return false;
  }
  *body = value.substr(0, value.size() - kCrcBytes);
  uint32_t stored = 0;
  for (int i = 3; i >= 0; --i) {
    stored = (stored << 8) | static_cast<unsigned char>(value[body->size() + i]);
  }
  if (stored != MaskCrc(Crc32c(*body))) {
    *error = Status::Corruption("record at key \"" + Printable(key) + "\": checksum mismatch");
    return false;
  }
  return true;
}

template <typename T>
const T* Verified(std::string_view key, std::string_view value, Status* error) {
  std::string_view body;
  if (!Unframed(key, value, &body, error)) return nullptr;
  fbs::Verifier verifier(reinterpret_cast<const uint8_t*>(body.data()), body.size());
  if (!verifier.VerifyBuffer<T>(nullptr)) {
    *error = Status::Corruption("record at key \"" + Printable(key) + "\" failed verification");
    return nullptr;
  }
  return fbs::GetRoot<T>(body.data());
}

// Format 7's compact records (storage/compact_coding.h) open with a tag
// naming their kind; a FlatBuffer's first byte, the low byte of its root
// offset, is below 0x40 in every record this codec ever wrote, so the two
// cannot be taken for each other. Persistent: never renumber.
enum class CompactTag : uint8_t {
  kEvent = 0xE1,  // format 7 only: with the identity and route
  kLog = 0xE2,    // format 7 only: with the type (and, in tests, data)
  kDedup = 0xE3,
  kProjection = 0xE4,
  kChange = 0xE5,
  kLeanEvent = 0xE6,  // since format 8
  kLeanLog = 0xE7,    // since format 8
};

// A compact record's tag, then its fields (the caller appends them) in this
// thread's reused buffer; Framed copies it out with its checksum.
std::string& StartCompact(CompactTag tag) {
  thread_local std::string out;
  constexpr size_t kKeepBytes = 64 << 10;
  if (out.capacity() > kKeepBytes) out = std::string();
  out.clear();
  out.push_back(static_cast<char>(tag));
  return out;
}

// The checked body of a value when it is a compact record of kind `tag`
// (format 7); nullopt when it is a FlatBuffer (written before format 7),
// which the caller verifies as one. Corruption when the checksum fails or
// the record is of another kind.
//
// `lean`, when given, is the kind's format 8 tag, also accepted; *is_lean
// then says which of the two the record has.
Result<std::optional<std::string_view>> CompactBody(std::string_view key, std::string_view value,
                                                    CompactTag tag,
                                                    std::optional<CompactTag> lean = std::nullopt,
                                                    bool* is_lean = nullptr) {
  // (A value of no more bytes than a checksum has no record: the FlatBuffer
  // path reports it.)
  if (value.size() <= kCrcBytes || static_cast<uint8_t>(value[0]) < 0xC0) {
    return std::optional<std::string_view>();
  }
  std::string_view body;
  Status error;
  if (!Unframed(key, value, &body, &error)) return error;
  const auto found = static_cast<uint8_t>(body[0]);
  if (lean && found == static_cast<uint8_t>(*lean)) {
    *is_lean = true;
  } else if (found != static_cast<uint8_t>(tag)) {
    return Status::Corruption("record at key \"" + Printable(key) + "\" is of another kind (tag " +
                              std::to_string(found) + ")");
  }
  return std::optional<std::string_view>(body.substr(1));
}

// The error for a compact record that ended early or held a bad field.
Status Malformed(std::string_view key, const CompactReader& r) {
  if (r.failed()) {
    return Status::Corruption("record at key \"" + Printable(key) + "\": field " +
                              r.failed_field() + " is malformed or truncated");
  }
  return Status::Corruption("record at key \"" + Printable(key) +
                            "\": bytes left after its last field");
}

void PutFields(std::string* out, const std::vector<Field>& fields) {
  PutVarint(out, fields.size());
  for (const Field& f : fields) {
    PutString(out, f.name);
    PutString(out, f.json);
  }
}

bool GetFields(CompactReader* r, std::vector<Field>* fields) {
  size_t n = 0;
  if (!r->Count("data", 2, &n)) return false;
  fields->resize(n);
  for (Field& f : *fields) {
    if (!r->String("data.name", &f.name) || !r->String("data.json", &f.json)) return false;
  }
  return true;
}

std::vector<Field> DecodeFields(const fbs::Vector<fbs::Offset<fb::FieldRecord>>* v) {
  std::vector<Field> out;
  if (!v) return out;
  out.reserve(v->size());
  for (const fb::FieldRecord* f : *v) {
    out.push_back(Field{std::string(View(f->name())), std::string(View(f->json()))});
  }
  return out;
}

std::optional<EntityRef> RefOf(const fbs::String* entity, const fbs::String* id) {
  if (View(entity).empty()) return std::nullopt;
  return EntityRef{std::string(View(entity)), std::string(View(id))};
}

std::optional<int64_t> Optional(bool has, int64_t v) {
  return has ? std::optional<int64_t>(v) : std::nullopt;
}

}  // namespace

std::string EncodeText(std::string_view text) {
  fbs::FlatBufferBuilder& b = Builder();
  auto bytes = b.CreateVector(reinterpret_cast<const uint8_t*>(text.data()), text.size());
  b.Finish(fb::CreateTextRecord(b, bytes));
  return Finish(b);
}

Result<std::string> DecodeText(std::string_view key, std::string_view value) {
  Status error;
  const AlignedValue aligned(value);
  const auto* r = Verified<fb::TextRecord>(key, aligned.view(), &error);
  if (!r) return error;
  return std::string(View(r->text()));
}

// a/<seq> since format 8 (kLeanEvent): received_at fixed64, then the body:
// the rest of the value. The event's identity (id, type, time, version) is
// the body's, and its route the profile's; format 7 (kEvent) repeated them:
// flags (bit 0 versioned, bit 1 routed), event_id, type, occurred_at
// fixed64, [version zigzag], received_at fixed64, [entity, entity_id], body.
std::string EncodeEvent(const StoredEvent& e) { return EncodeEventRecord(e.received_at, e.body); }

std::string EncodeEventRecord(int64_t received_at, std::string_view body) {
  std::string& out = StartCompact(CompactTag::kLeanEvent);
  PutFixed64(&out, received_at);
  out.append(body);
  return FrameRecord(out);
}

Result<StoredEvent> DecodeStoredBody(std::string_view key, std::string_view value) {
  Status error;
  StoredEvent e;
  e.seq = ParseSeqKey(key, kEventPrefix).value_or(0);
  bool lean = false;
  Result<std::optional<std::string_view>> compact =
      CompactBody(key, value, CompactTag::kEvent, CompactTag::kLeanEvent, &lean);
  if (!compact.ok()) return compact.status();
  if (const std::optional<std::string_view>& body = *compact) {
    CompactReader r(*body);
    e.has_identity = !lean;
    if (lean) {
      r.Fixed64("received_at", &e.received_at);
      if (r.failed()) return Malformed(key, r);
      e.body = r.Rest();
      return e;
    }
    uint8_t flags = 0;
    int64_t version = 0;
    r.Byte("flags", &flags) && r.String("event_id", &e.event.event_id) &&
        r.String("type", &e.event.type) && r.Fixed64("occurred_at", &e.event.occurred_at);
    if ((flags & 1) && r.Zigzag("version", &version)) e.event.version = version;
    r.Fixed64("received_at", &e.received_at);
    if ((flags & 2) && !r.failed()) {
      e.entity.emplace();
      r.String("entity", &e.entity->entity) && r.String("entity_id", &e.entity->id);
    }
    if (r.failed()) return Malformed(key, r);
    e.body = r.Rest();
    return e;
  }
  const AlignedValue aligned(value);
  const auto* r = Verified<fb::EventRecord>(key, aligned.view(), &error);
  if (!r) return error;
  e.event.event_id = View(r->event_id());
  e.event.type = View(r->type());
  e.event.occurred_at = r->occurred_at();
  e.event.version = Optional(r->has_version(), r->version());
  e.received_at = r->received_at();
  e.body = View(r->body());
  e.entity = RefOf(r->entity(), r->entity_id());
  return e;
}

Result<StoredEvent> DecodeStoredEvent(std::string_view key, std::string_view value) {
  Result<StoredEvent> e = DecodeStoredBody(key, value);
  if (!e.ok() || e->has_identity) return e;
  // The body was decoded when it was accepted: one that no longer does is
  // damage (or a build whose rules changed), reported as such.
  Result<Event> body = DecodeIdentity(e->body);
  if (!body.ok()) {
    return Status::Corruption("the body at key \"" + Printable(key) +
                              "\" no longer decodes: " + body.status().message());
  }
  e->event = std::move(*body);  // without data, as documented: the body holds it
  e->has_identity = true;
  return e;
}

// g/<gen>/l/ since format 8 (kLeanLog): seq varint; received_at is the
// record's at a/<seq> (storage/log_data.h reads it with the data). The fold
// position (event_id, occurred_at, version, rank) is the key's, and
// the type is the rank's transition in the entity type of the profile the
// log was routed under (a log generation is only ever read under that
// profile: a rebuild keeps the logs only when the profile is the same).
// Format 7 (kLog): flags (bit 0: with data), type, seq varint, received_at
// fixed64, [data: count, then name and JSON of each field].
namespace {

// The fold position the key of a lean record holds; with `entity`, also
// the key's entity type (a view into `key`).
Status FoldFromKey(std::string_view key, LogEntry* e, std::string_view* entity = nullptr) {
  std::optional<LogKeyView> parts = SplitLogKey(key);
  std::optional<FoldKey> fold = parts ? DecodeFoldKey(parts->fold) : std::nullopt;
  if (!fold) {
    return Status::Corruption("log record at key \"" + Printable(key) +
                              "\": the key holds no fold position");
  }
  Event& ev = e->ranked.event;
  ev.event_id = std::move(fold->event_id);
  ev.occurred_at = fold->occurred_at;
  ev.version = fold->version;
  e->ranked.rank = fold->rank;
  if (entity) *entity = parts->entity;
  return Status::OK();
}

// The type of a format 8 record under `key` of entity type `entity`: its
// rank's transition under `profile`.
Status TypeFromRank(std::string_view key, std::string_view entity, const Profile& profile,
                    LogEntry* e) {
  const EntityType* type = profile.FindEntity(entity);
  const uint32_t rank = e->ranked.rank;
  if (!type || rank >= type->transitions.size()) {
    return Status::Corruption("log record at key \"" + Printable(key) + "\": rank " +
                              std::to_string(rank) + " names no transition of profile \"" +
                              profile.name() + "\"");
  }
  e->ranked.event.type = type->transitions[rank].type;
  return Status::OK();
}

}  // namespace

std::string EncodeLeanLog(uint64_t seq) {
  std::string& out = StartCompact(CompactTag::kLeanLog);
  PutVarint(&out, seq);
  return FrameRecord(out);
}

std::string EncodeLog(const LogEntry& e) { return EncodeLeanLog(e.seq); }

std::string EncodeLogWithData(const LogEntry& e) {
  std::string& out = StartCompact(CompactTag::kLog);
  out.push_back(1);  // flags: with data
  PutString(&out, e.ranked.event.type);
  PutVarint(&out, e.seq);
  PutFixed64(&out, e.received_at);
  PutFields(&out, e.ranked.event.data);
  return FrameRecord(out);
}

Result<LogEntry> DecodeLog(std::string_view key, std::string_view value, const Profile& profile) {
  Status error;
  LogEntry e;
  Event& ev = e.ranked.event;
  bool lean = false;
  Result<std::optional<std::string_view>> compact =
      CompactBody(key, value, CompactTag::kLog, CompactTag::kLeanLog, &lean);
  if (!compact.ok()) return compact.status();
  if (const std::optional<std::string_view>& body = *compact) {
    CompactReader r(*body);
    if (lean) {
      r.Varint("seq", &e.seq);
      if (!r.AtEnd()) return Malformed(key, r);
      std::string_view entity;
      Status st = FoldFromKey(key, &e, &entity);
      if (st.ok()) st = TypeFromRank(key, entity, profile, &e);
      if (!st.ok()) return st;
      return e;
    }
    uint8_t flags = 0;
    r.Byte("flags", &flags) && r.String("type", &ev.type) && r.Varint("seq", &e.seq) &&
        r.Fixed64("received_at", &e.received_at);
    e.has_data = (flags & 1) != 0;
    if (e.has_data) GetFields(&r, &ev.data);
    if (!r.AtEnd()) return Malformed(key, r);
    if (Status st = FoldFromKey(key, &e); !st.ok()) return st;
    return e;
  }
  const AlignedValue aligned(value);
  const auto* r = Verified<fb::LogRecord>(key, aligned.view(), &error);
  if (!r) return error;
  if (r->event_id() != nullptr) {
    // Written before format 6: the record repeats its fold position.
    ev.event_id = View(r->event_id());
    ev.occurred_at = r->occurred_at();
    ev.version = Optional(r->has_version(), r->version());
    e.ranked.rank = r->rank();
  } else if (Status st = FoldFromKey(key, &e); !st.ok()) {
    return st;
  }
  ev.type = View(r->type());
  e.has_data = r->data() != nullptr;
  ev.data = DecodeFields(r->data());
  e.received_at = r->received_at();
  e.seq = r->seq();
  return e;
}

bool DigestMatches(std::string_view stored, std::string_view sha256) {
  return stored.size() >= kDedupDigestBytes && sha256.starts_with(stored);
}

// d/<event_id>, compact: flags (bit 0 routed, bit 1 with identity, bit 2
// tombstone, bit 3 (since format 8) the digest is its 16 bytes without a
// length), seq varint, routing_epoch varint, [entity, entity_id], digest (a
// string, empty when none, unless bit 3), [type, occurred_at fixed64],
// [expires_at fixed64].
std::string EncodeDedup(const DedupEntry& e) {
  // Since format 6 the entry of a stored event with a digest is lean: the
  // digest stands for its identity (the same bytes are the same event), and
  // the type and time a different body must be compared with are read from
  // a/<seq>. Tombstones (their event is gone) and entries without a digest
  // keep them.
  const bool lean = e.expires_at == 0 && e.body_digest.size() >= kDedupDigestBytes;
  std::string& out = StartCompact(CompactTag::kDedup);
  out.push_back(static_cast<char>((e.entity ? 1 : 0) | (lean ? 0 : 2) | (e.expires_at ? 4 : 0) |
                                  (lean ? 8 : 0)));
  PutVarint(&out, e.seq);
  PutVarint(&out, e.routing_epoch);
  if (e.entity) {
    PutString(&out, e.entity->entity);
    PutString(&out, e.entity->id);
  }
  if (lean) {
    out.append(e.body_digest, 0, kDedupDigestBytes);  // its length known
  } else {
    PutString(&out, e.body_digest);
    PutString(&out, e.type);
    PutFixed64(&out, e.occurred_at);
  }
  if (e.expires_at) PutFixed64(&out, e.expires_at);
  return FrameRecord(out);
}

Result<DedupEntry> DecodeDedup(std::string_view key, std::string_view value) {
  Status error;
  DedupEntry e;
  Result<std::optional<std::string_view>> compact = CompactBody(key, value, CompactTag::kDedup);
  if (!compact.ok()) return compact.status();
  if (const std::optional<std::string_view>& body = *compact) {
    CompactReader r(*body);
    uint8_t flags = 0;
    r.Byte("flags", &flags) && r.Varint("seq", &e.seq) &&
        r.Varint32("routing_epoch", &e.routing_epoch);
    if ((flags & 1) && !r.failed()) {
      e.entity.emplace();
      r.String("entity", &e.entity->entity) && r.String("entity_id", &e.entity->id);
    }
    if (flags & 8) {
      r.Bytes("body_digest", kDedupDigestBytes, &e.body_digest);
    } else {
      r.String("body_digest", &e.body_digest);
    }
    e.has_identity = (flags & 2) != 0;
    if (e.has_identity) r.String("type", &e.type) && r.Fixed64("occurred_at", &e.occurred_at);
    if (flags & 4) r.Fixed64("expires_at", &e.expires_at);
    if (!r.AtEnd()) return Malformed(key, r);
  } else {
    const AlignedValue aligned(value);
    const auto* r = Verified<fb::DedupRecord>(key, aligned.view(), &error);
    if (!r) return error;
    e.seq = r->seq();
    e.has_identity = r->type() != nullptr;
    e.type = View(r->type());
    e.occurred_at = r->occurred_at();
    e.entity = RefOf(r->entity(), r->entity_id());
    e.routing_epoch = r->routing_epoch();
    e.expires_at = r->expires_at();
    if (const auto* digest = r->body_digest()) {
      e.body_digest.assign(reinterpret_cast<const char*>(digest->data()), digest->size());
    }
  }
  if (!e.has_identity && (e.expires_at != 0 || e.body_digest.size() < kDedupDigestBytes)) {
    return Status::Corruption("dedup record at key \"" + Printable(key) +
                              "\" has neither its event's identity nor its digest");
  }
  return e;
}

// g/<gen>/p/ and g/<gen>/s/, compact: flags (bit 0 versioned, bit 1 with
// occurred_at, bit 2 cursor versioned, bit 3 cursor only; since format 8
// bit 4: the cursor's time and version are the projection's, and bits 5-6:
// the snapshots value + 1), [snapshots byte: format 7 only], state, [version zigzag], applied
// varint, [occurred_at fixed64], events varint, the cursor ([occurred_at fixed64, [version zigzag]]
// unless bit 4, rank varint, event_id), then unless cursor only: the fields (count, name and JSON
// of each) and the rejections (count, event_id, type and reason of each). The entity and id are the
// key's. Bit 4 is set when the last event in fold order was applied, the usual case.
namespace {

std::string EncodeProjectionRecord(const ProjectionState& s, bool cursor_only) {
  const Projection& p = s.projection;
  std::string& out = StartCompact(CompactTag::kProjection);
  const bool cursor_at_last_applied =
      p.occurred_at == s.last.occurred_at && p.version == s.last.version;
  // The snapshots value (0-2) rides in bits 5-6 as value + 1.
  out.push_back(static_cast<char>((p.version ? 1 : 0) | (p.occurred_at ? 2 : 0) |
                                  (s.last.version ? 4 : 0) | (cursor_only ? 8 : 0) |
                                  (cursor_at_last_applied ? 16 : 0) |
                                  ((static_cast<uint8_t>(s.snapshots) + 1) << 5)));
  PutString(&out, p.state);
  if (p.version) PutZigzag(&out, *p.version);
  PutVarint(&out, p.applied);
  if (p.occurred_at) PutFixed64(&out, *p.occurred_at);
  PutVarint(&out, s.events);
  if (!cursor_at_last_applied) {
    PutFixed64(&out, s.last.occurred_at);
    if (s.last.version) PutZigzag(&out, *s.last.version);
  }
  PutVarint(&out, s.last.rank);
  PutString(&out, s.last.event_id);
  if (!cursor_only) {
    PutFields(&out, p.fields);
    PutVarint(&out, p.rejected.size());
    for (const Rejection& r : p.rejected) {
      PutString(&out, r.event_id);
      PutString(&out, r.type);
      PutString(&out, r.reason);
    }
  }
  return FrameRecord(out);
}

// An unknown value (a later build's) reads as unknown: a read searches.
ProjectionState::Snapshots SnapshotsOf(uint8_t stored) {
  return stored <= static_cast<uint8_t>(ProjectionState::Snapshots::kSome)
             ? static_cast<ProjectionState::Snapshots>(stored)
             : ProjectionState::Snapshots::kUnknown;
}

Status DecodeCompactProjection(std::string_view key, std::string_view body, ProjectionState* s) {
  Projection& p = s->projection;
  CompactReader r(body);
  uint8_t flags = 0, snapshots = 0;
  int64_t v = 0;
  r.Byte("flags", &flags);
  if (((flags >> 5) & 3) != 0) {
    snapshots = static_cast<uint8_t>(((flags >> 5) & 3) - 1);
  } else {
    r.Byte("snapshots", &snapshots);  // format 7: a byte of its own
  }
  r.String("state", &p.state);
  if ((flags & 1) && r.Zigzag("version", &v)) p.version = v;
  r.Varint("applied", &p.applied);
  if ((flags & 2) && r.Fixed64("occurred_at", &v)) p.occurred_at = v;
  r.Varint("events", &s->events);
  if (flags & 16) {
    // (After a failed read the fields are not all there: the end reports it.)
    if (!r.failed()) {
      if (!p.occurred_at || ((flags & 4) != 0) != p.version.has_value()) {
        return Status::Corruption("record at key \"" + Printable(key) +
                                  "\": its cursor names a time or version it does not hold");
      }
      s->last.occurred_at = *p.occurred_at;
      s->last.version = p.version;
    }
  } else {
    r.Fixed64("last.occurred_at", &s->last.occurred_at);
    if ((flags & 4) && r.Zigzag("last.version", &v)) s->last.version = v;
  }
  r.Varint32("last.rank", &s->last.rank) && r.String("last.event_id", &s->last.event_id);
  s->cursor_only = (flags & 8) != 0;
  s->snapshots = SnapshotsOf(snapshots);
  if (!s->cursor_only && GetFields(&r, &p.fields)) {
    size_t n = 0;
    if (r.Count("rejected", 3, &n)) {
      p.rejected.resize(n);
      for (Rejection& rej : p.rejected) {
        if (!r.String("rejected.event_id", &rej.event_id) ||
            !r.String("rejected.type", &rej.type) || !r.String("rejected.reason", &rej.reason)) {
          break;
        }
      }
    }
  }
  if (!r.AtEnd()) return Malformed(key, r);
  return Status::OK();
}

}  // namespace

std::string EncodeProjection(const ProjectionState& s) {
  assert(!s.cursor_only);  // a whole record needs the whole state
  return EncodeProjectionRecord(s, /*cursor_only=*/false);
}

std::string EncodeProjectionCursor(const ProjectionState& s) {
  return EncodeProjectionRecord(s, /*cursor_only=*/true);
}

Result<ProjectionState> DecodeProjection(std::string_view key, std::string_view value) {
  Status error;
  ProjectionState s;
  Projection& p = s.projection;
  if (auto ref = ParseProjectionKey(key)) {
    p.entity = std::move(ref->entity);
    p.id = std::move(ref->id);
  }
  Result<std::optional<std::string_view>> compact =
      CompactBody(key, value, CompactTag::kProjection);
  if (!compact.ok()) return compact.status();
  if (const std::optional<std::string_view>& body = *compact) {
    if (Status st = DecodeCompactProjection(key, *body, &s); !st.ok()) return st;
    return s;
  }
  const AlignedValue aligned(value);
  const auto* r = Verified<fb::ProjectionRecord>(key, aligned.view(), &error);
  if (!r) return error;
  p.state = View(r->state());
  p.fields = DecodeFields(r->fields());
  p.version = Optional(r->has_version(), r->version());
  p.applied = r->applied();
  if (r->rejected()) {
    for (const fb::RejectionRecord* rr : *r->rejected()) {
      p.rejected.push_back(Rejection{std::string(View(rr->event_id())),
                                     std::string(View(rr->type())),
                                     std::string(View(rr->reason()))});
    }
  }
  p.occurred_at = Optional(r->has_occurred_at(), r->occurred_at());
  s.events = r->events();
  s.last = FoldKey{r->last_occurred_at(), Optional(r->last_has_version(), r->last_version()),
                   r->last_rank(), std::string(View(r->last_event_id()))};
  s.cursor_only = r->cursor_only();
  s.snapshots = SnapshotsOf(r->snapshots());
  return s;
}

std::string EncodeConflict(const ConflictEntry& e) {
  fbs::FlatBufferBuilder& b = Builder();
  auto id = b.CreateString(e.event_id);
  auto type = b.CreateString(e.type);
  auto entity = b.CreateString(e.entity ? e.entity->entity : "");
  auto entity_id = b.CreateString(e.entity ? e.entity->id : "");
  auto reason = b.CreateString(e.reason);
  auto body = b.CreateVector(reinterpret_cast<const uint8_t*>(e.body.data()), e.body.size());
  b.Finish(fb::CreateConflictRecord(b, id, e.first_seq, type, e.occurred_at, entity, entity_id,
                                    e.received_at, reason, body));
  return Finish(b);
}

Result<ConflictEntry> DecodeConflict(std::string_view key, std::string_view value) {
  Status error;
  const AlignedValue aligned(value);
  const auto* r = Verified<fb::ConflictRecord>(key, aligned.view(), &error);
  if (!r) return error;
  ConflictEntry e;
  e.event_id = View(r->event_id());
  e.first_seq = r->first_seq();
  e.type = View(r->type());
  e.occurred_at = r->occurred_at();
  e.entity = RefOf(r->entity(), r->entity_id());
  e.received_at = r->received_at();
  e.reason = View(r->reason());
  e.body = View(r->body());
  return e;
}

// f/<seq>, compact: entity, id, state, previous_state, event_ids (count,
// then each), changed_at fixed64. The seq is the key's.
std::string EncodeChange(const Change& c) {
  std::string& out = StartCompact(CompactTag::kChange);
  PutString(&out, c.entity);
  PutString(&out, c.id);
  PutString(&out, c.state);
  PutString(&out, c.previous_state);
  PutVarint(&out, c.event_ids.size());
  for (const std::string& id : c.event_ids) PutString(&out, id);
  PutFixed64(&out, c.changed_at);
  return FrameRecord(out);
}

Result<Change> DecodeChange(std::string_view key, std::string_view value) {
  Status error;
  Change c;
  c.seq = ParseSeqKey(key, kFeedPrefix).value_or(0);
  Result<std::optional<std::string_view>> compact = CompactBody(key, value, CompactTag::kChange);
  if (!compact.ok()) return compact.status();
  if (const std::optional<std::string_view>& body = *compact) {
    CompactReader r(*body);
    size_t n = 0;
    r.String("entity", &c.entity) && r.String("id", &c.id) && r.String("state", &c.state) &&
        r.String("previous_state", &c.previous_state) && r.Count("event_ids", 1, &n);
    if (!r.failed()) {
      c.event_ids.resize(n);
      for (std::string& id : c.event_ids) {
        if (!r.String("event_ids", &id)) break;
      }
    }
    r.Fixed64("changed_at", &c.changed_at);
    if (!r.AtEnd()) return Malformed(key, r);
    return c;
  }
  const AlignedValue aligned(value);
  const auto* r = Verified<fb::ChangeRecord>(key, aligned.view(), &error);
  if (!r) return error;
  c.entity = View(r->entity());
  c.id = View(r->entity_id());
  c.state = View(r->state());
  c.previous_state = View(r->previous_state());
  if (r->event_ids()) {
    for (const fbs::String* id : *r->event_ids()) c.event_ids.emplace_back(View(id));
  }
  c.changed_at = r->changed_at();
  return c;
}

std::string EncodeCompaction(const CompactionEntry& c) {
  const std::string snapshot = EncodeProjection(c.snapshot);
  fbs::FlatBufferBuilder b(256 + snapshot.size());
  auto snapshot_vec =
      b.CreateVector(reinterpret_cast<const uint8_t*>(snapshot.data()), snapshot.size());
  auto tombstones = b.CreateVectorOfStrings(c.tombstones);
  b.Finish(fb::CreateCompactionRecord(b, snapshot_vec, c.compacted_at, c.events, c.tombstones_until,
                                      tombstones));
  return Finish(b);
}

Result<CompactionEntry> DecodeCompaction(std::string_view key, std::string_view value) {
  Status error;
  const AlignedValue aligned(value);
  const auto* r = Verified<fb::CompactionRecord>(key, aligned.view(), &error);
  if (!r) return error;
  std::optional<EntityRef> ref = ParseCompactionKey(key);
  if (!ref) return Status::Corruption("malformed compaction key");
  CompactionEntry c;
  Result<ProjectionState> snapshot = DecodeProjection(key, View(r->snapshot()));
  if (!snapshot.ok()) return snapshot.status().WithContext("compaction snapshot");
  c.snapshot = std::move(*snapshot);
  c.snapshot.projection.entity = std::move(ref->entity);
  c.snapshot.projection.id = std::move(ref->id);
  c.compacted_at = r->compacted_at();
  c.events = r->events();
  c.tombstones_until = r->tombstones_until();
  if (r->tombstones()) {
    for (const fbs::String* id : *r->tombstones()) c.tombstones.emplace_back(View(id));
  }
  return c;
}

std::string EncodeParked(const ParkedChange& p) {
  const std::string change = EncodeChange(p.change);
  fbs::FlatBufferBuilder& b = Builder();
  auto change_vec = b.CreateVector(reinterpret_cast<const uint8_t*>(change.data()), change.size());
  std::vector<fbs::Offset<fb::AttemptRecord>> attempts;
  for (const DeliveryAttempt& a : p.attempts) {
    attempts.push_back(fb::CreateAttemptRecord(b, a.at, b.CreateString(a.error)));
  }
  auto attempts_vec = b.CreateVector(attempts);
  b.Finish(fb::CreateParkedRecord(b, change_vec, attempts_vec, p.redrive));
  return Finish(b);
}

Result<ParkedChange> DecodeParked(std::string_view key, std::string_view value) {
  Status error;
  const AlignedValue aligned(value);
  const auto* r = Verified<fb::ParkedRecord>(key, aligned.view(), &error);
  if (!r) return error;
  ParkedChange p;
  std::string_view rest = key.substr(kParkedPrefix.size());
  const size_t nul = rest.find('\0');
  if (nul == std::string_view::npos || rest.size() != nul + 9) {
    return Status::Corruption("malformed dead-letter key");
  }
  p.subscription = rest.substr(0, nul);
  // The change's own key: the same big-endian seq under f/.
  const std::string feed_key = std::string(kFeedPrefix).append(rest.substr(nul + 1));
  Result<Change> c = DecodeChange(feed_key, View(r->change()));
  if (!c.ok()) return c.status().WithContext("dead letter");
  p.change = std::move(*c);
  if (r->attempts()) {
    for (const fb::AttemptRecord* a : *r->attempts()) {
      p.attempts.push_back(DeliveryAttempt{a->at(), std::string(View(a->error()))});
    }
  }
  p.redrive = r->redrive();
  return p;
}

std::string EncodeRefused(const RefusedDelivery& r) {
  fbs::FlatBufferBuilder& b = Builder();
  std::vector<fbs::Offset<fb::HeaderRecord>> headers;
  for (const auto& [name, value] : r.headers) {
    headers.push_back(fb::CreateHeaderRecord(b, b.CreateString(name), b.CreateString(value)));
  }
  auto headers_vec = b.CreateVector(headers);
  auto reason = b.CreateString(r.reason);
  auto body =
      b.CreateVector(reinterpret_cast<const uint8_t*>(r.body_prefix.data()), r.body_prefix.size());
  b.Finish(fb::CreateQuarantineRecord(b, r.received_at, static_cast<uint8_t>(r.outcome), r.status,
                                      reason, headers_vec, body, r.body_bytes));
  return Finish(b);
}

Result<RefusedDelivery> DecodeRefused(std::string_view key, std::string_view value) {
  Status error;
  const AlignedValue aligned(value);
  const auto* q = Verified<fb::QuarantineRecord>(key, aligned.view(), &error);
  if (!q) return error;
  RefusedDelivery r;
  r.seq = ParseSeqKey(key, kQuarantinePrefix).value_or(0);
  r.received_at = q->received_at();
  r.outcome = static_cast<Outcome>(q->outcome());
  r.status = q->status();
  r.reason = View(q->reason());
  if (q->headers()) {
    for (const fb::HeaderRecord* h : *q->headers()) {
      r.headers.emplace_back(std::string(View(h->name())), std::string(View(h->value())));
    }
  }
  r.body_prefix = View(q->body_prefix());
  r.body_bytes = q->body_bytes();
  return r;
}

}  // namespace eventfold::storage
