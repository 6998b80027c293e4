#include "storage/record_codec.h"

#include <cassert>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>

#include "core/crc32c.h"
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

// Every value is the FlatBuffer followed by the masked CRC-32C of it,
// little-endian: corruption that still parses is caught too.
constexpr size_t kCrcBytes = 4;

std::string Finish(fbs::FlatBufferBuilder& b) {
  const std::string_view record(reinterpret_cast<const char*>(b.GetBufferPointer()), b.GetSize());
  const uint32_t crc = MaskCrc(Crc32c(record));
  std::string out;
  out.reserve(record.size() + kCrcBytes);
  out.append(record);
  for (int i = 0; i < 4; ++i) out.push_back(static_cast<char>((crc >> (8 * i)) & 0xFF));
  return out;
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

std::string Printable(std::string_view key) {
  std::string printable;
  for (char c : key) printable += (c >= 0x20 && c < 0x7F) ? c : '.';
  return printable;
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

template <typename T>
const T* Verified(std::string_view key, std::string_view value, Status* error) {
  if (value.size() < kCrcBytes) {
    *error = Status::Corruption("record at key \"" + Printable(key) + "\" is truncated");
    return nullptr;
  }
  const std::string_view body = value.substr(0, value.size() - kCrcBytes);
  uint32_t stored = 0;
  for (int i = 3; i >= 0; --i) {
    stored = (stored << 8) | static_cast<unsigned char>(value[body.size() + i]);
  }
  if (stored != MaskCrc(Crc32c(body))) {
    *error = Status::Corruption("record at key \"" + Printable(key) + "\": checksum mismatch");
    return nullptr;
  }
  fbs::Verifier verifier(reinterpret_cast<const uint8_t*>(body.data()), body.size());
  if (!verifier.VerifyBuffer<T>(nullptr)) {
    *error = Status::Corruption("record at key \"" + Printable(key) + "\" failed verification");
    return nullptr;
  }
  return fbs::GetRoot<T>(body.data());
}

fbs::Offset<fbs::Vector<fbs::Offset<fb::FieldRecord>>> EncodeFields(
    fbs::FlatBufferBuilder& b, const std::vector<Field>& fields) {
  std::vector<fbs::Offset<fb::FieldRecord>> out;
  out.reserve(fields.size());
  for (const Field& f : fields) {
    out.push_back(fb::CreateFieldRecord(b, b.CreateString(f.name), b.CreateString(f.json)));
  }
  return b.CreateVector(out);
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

std::string EncodeEvent(const StoredEvent& e) {
  fbs::FlatBufferBuilder& b = Builder();
  auto id = b.CreateString(e.event.event_id);
  auto type = b.CreateString(e.event.type);
  auto body = b.CreateVector(reinterpret_cast<const uint8_t*>(e.body.data()), e.body.size());
  auto entity = b.CreateString(e.entity ? e.entity->entity : "");
  auto entity_id = b.CreateString(e.entity ? e.entity->id : "");
  b.Finish(fb::CreateEventRecord(b, id, type, e.event.occurred_at, e.event.version.has_value(),
                                 e.event.version.value_or(0), e.received_at, body, entity,
                                 entity_id));
  return Finish(b);
}

Result<StoredEvent> DecodeStoredEvent(std::string_view key, std::string_view value) {
  Status error;
  const AlignedValue aligned(value);
  const auto* r = Verified<fb::EventRecord>(key, aligned.view(), &error);
  if (!r) return error;
  StoredEvent e;
  e.seq = ParseSeqKey(key, kEventPrefix).value_or(0);
  e.event.event_id = View(r->event_id());
  e.event.type = View(r->type());
  e.event.occurred_at = r->occurred_at();
  e.event.version = Optional(r->has_version(), r->version());
  e.received_at = r->received_at();
  e.body = View(r->body());
  e.entity = RefOf(r->entity(), r->entity_id());
  return e;
}

namespace {

std::string EncodeLogRecord(const LogEntry& e, bool with_data) {
  const Event& ev = e.ranked.event;
  fbs::FlatBufferBuilder& b = Builder();
  auto type = b.CreateString(ev.type);
  // Left out (null), not empty: a reader tells a lean record by it.
  fbs::Offset<fbs::Vector<fbs::Offset<fb::FieldRecord>>> data;
  if (with_data) data = EncodeFields(b, ev.data);
  // Since format 6 the fold position (event_id, occurred_at, version, rank)
  // is left out: the key holds it (see DecodeLog).
  fb::LogRecordBuilder r(b);
  r.add_seq(e.seq);
  r.add_received_at(e.received_at);
  if (with_data) r.add_data(data);
  r.add_type(type);
  b.Finish(r.Finish());
  return Finish(b);
}

}  // namespace

std::string EncodeLog(const LogEntry& e) { return EncodeLogRecord(e, /*with_data=*/false); }

std::string EncodeLogWithData(const LogEntry& e) { return EncodeLogRecord(e, /*with_data=*/true); }

Result<LogEntry> DecodeLog(std::string_view key, std::string_view value) {
  Status error;
  const AlignedValue aligned(value);
  const auto* r = Verified<fb::LogRecord>(key, aligned.view(), &error);
  if (!r) return error;
  LogEntry e;
  Event& ev = e.ranked.event;
  if (r->event_id() != nullptr) {
    // Written before format 6: the record repeats its fold position.
    ev.event_id = View(r->event_id());
    ev.occurred_at = r->occurred_at();
    ev.version = Optional(r->has_version(), r->version());
    e.ranked.rank = r->rank();
  } else {
    std::optional<FoldKey> fold = ParseLogKeyFold(key);
    if (!fold) {
      return Status::Corruption("log record at key \"" + Printable(key) +
                                "\": the key holds no fold position");
    }
    ev.event_id = std::move(fold->event_id);
    ev.occurred_at = fold->occurred_at;
    ev.version = fold->version;
    e.ranked.rank = fold->rank;
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

std::string EncodeDedup(const DedupEntry& e) {
  fbs::FlatBufferBuilder& b = Builder();
  // Since format 6 the entry of a stored event with a digest is lean: the
  // digest stands for its identity (the same bytes are the same event), and
  // the type and time a different body must be compared with are read from
  // a/<seq>. Tombstones (their event is gone) and entries without a digest
  // keep them.
  const bool lean = e.expires_at == 0 && e.body_digest.size() >= kDedupDigestBytes;
  fbs::Offset<fbs::String> type;
  if (!lean) type = b.CreateString(e.type);
  auto entity = b.CreateString(e.entity ? e.entity->entity : "");
  auto entity_id = b.CreateString(e.entity ? e.entity->id : "");
  fbs::Offset<fbs::Vector<uint8_t>> digest;
  if (!e.body_digest.empty()) {
    const size_t n = lean ? kDedupDigestBytes : e.body_digest.size();
    digest = b.CreateVector(reinterpret_cast<const uint8_t*>(e.body_digest.data()), n);
  }
  b.Finish(fb::CreateDedupRecord(b, e.seq, type, lean ? 0 : e.occurred_at, entity, entity_id,
                                 e.routing_epoch, e.expires_at, digest));
  return Finish(b);
}

Result<DedupEntry> DecodeDedup(std::string_view key, std::string_view value) {
  Status error;
  const AlignedValue aligned(value);
  const auto* r = Verified<fb::DedupRecord>(key, aligned.view(), &error);
  if (!r) return error;
  DedupEntry e;
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
  if (!e.has_identity && (e.expires_at != 0 || e.body_digest.size() < kDedupDigestBytes)) {
    return Status::Corruption("dedup record at key \"" + Printable(key) +
                              "\" has neither its event's identity nor its digest");
  }
  return e;
}

namespace {

std::string EncodeProjectionRecord(const ProjectionState& s, bool cursor_only) {
  const Projection& p = s.projection;
  fbs::FlatBufferBuilder& b = Builder();
  auto state = b.CreateString(p.state);
  fbs::Offset<fbs::Vector<fbs::Offset<fb::FieldRecord>>> fields;
  fbs::Offset<fbs::Vector<fbs::Offset<fb::RejectionRecord>>> rejected_vec;
  if (!cursor_only) {
    fields = EncodeFields(b, p.fields);
    std::vector<fbs::Offset<fb::RejectionRecord>> rejected;
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
      s.last.version.has_value(), s.last.version.value_or(0), s.last.rank, last_id, cursor_only,
      static_cast<uint8_t>(s.snapshots)));
  return Finish(b);
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
  const AlignedValue aligned(value);
  const auto* r = Verified<fb::ProjectionRecord>(key, aligned.view(), &error);
  if (!r) return error;
  ProjectionState s;
  Projection& p = s.projection;
  if (auto ref = ParseProjectionKey(key)) {
    p.entity = std::move(ref->entity);
    p.id = std::move(ref->id);
  }
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
  // An unknown value (a later build's) reads as unknown: a read searches.
  if (r->snapshots() <= static_cast<uint8_t>(ProjectionState::Snapshots::kSome)) {
    s.snapshots = static_cast<ProjectionState::Snapshots>(r->snapshots());
  }
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

std::string EncodeChange(const Change& c) {
  fbs::FlatBufferBuilder& b = Builder();
  auto entity = b.CreateString(c.entity);
  auto id = b.CreateString(c.id);
  auto state = b.CreateString(c.state);
  auto previous = b.CreateString(c.previous_state);
  auto ids = b.CreateVectorOfStrings(c.event_ids);
  b.Finish(fb::CreateChangeRecord(b, entity, id, state, previous, ids, c.changed_at));
  return Finish(b);
}

Result<Change> DecodeChange(std::string_view key, std::string_view value) {
  Status error;
  const AlignedValue aligned(value);
  const auto* r = Verified<fb::ChangeRecord>(key, aligned.view(), &error);
  if (!r) return error;
  Change c;
  c.seq = ParseSeqKey(key, kFeedPrefix).value_or(0);
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
