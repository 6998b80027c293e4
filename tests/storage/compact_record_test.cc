// Tests of the compact records (formats 7 and 8; storage/record_codec.h over
// storage/compact_coding.h): random values round-trip, a record damaged
// behind a valid checksum is refused naming the field, a format 6 value
// (a FlatBuffer) and a format 7 one read as the format 8 one does, and the
// newer one is the smaller.

#include <gtest/gtest.h>

#include <cstdint>
#include <functional>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "eventfold/profile.h"
#include "storage/compact_coding.h"
#include "storage/key_codec.h"
#include "storage/record_codec.h"
#include "tests/common/test_seed.h"
#include "tests/storage/legacy_records.h"
#include "tests/storage/storage_test_util.h"

namespace eventfold::storage {
namespace {

using storage_test::BodyOf;

using test_util::TestSeed;

// Random bytes, NULs and 0xff included, of a length around `typical`.
std::string RandomBytes(std::mt19937_64& rng, size_t typical) {
  std::string out(rng() % 4 == 0 ? rng() % (4 * typical + 1) : rng() % (typical + 1), '\0');
  for (char& c : out) c = static_cast<char>(rng());
  // Lengths of a varint's every width: one of 200 bytes takes two.
  if (rng() % 16 == 0) out.append(200, 'x');
  return out;
}

int64_t RandomInt(std::mt19937_64& rng) {
  static const int64_t kEdges[] = {
      std::numeric_limits<int64_t>::min(), -1, 0, 1, 127, 128, 1795947330123000,
      std::numeric_limits<int64_t>::max()};
  if (rng() % 3 == 0) return kEdges[rng() % 8];
  return static_cast<int64_t>(rng()) >> (rng() % 64);
}

std::optional<int64_t> MaybeInt(std::mt19937_64& rng) {
  return rng() % 3 == 0 ? std::nullopt : std::optional<int64_t>(RandomInt(rng));
}

std::optional<EntityRef> MaybeRef(std::mt19937_64& rng) {
  if (rng() % 4 == 0) return std::nullopt;
  return EntityRef{RandomBytes(rng, 12), RandomBytes(rng, 12)};
}

std::vector<Field> RandomFields(std::mt19937_64& rng) {
  std::vector<Field> out(rng() % 5);
  for (Field& f : out) f = Field{RandomBytes(rng, 10), RandomBytes(rng, 30)};
  return out;
}

// A fold key a log key can hold: its event id without NUL.
FoldKey RandomFoldKey(std::mt19937_64& rng) {
  FoldKey k{RandomInt(rng), MaybeInt(rng), static_cast<uint32_t>(rng()), RandomBytes(rng, 36)};
  for (char& c : k.event_id) c = c == '\0' ? 'z' : c;
  return k;
}

TEST(storage_compact_record, RandomRecordsRoundTrip) {
  const uint64_t seed = TestSeed("RandomRecordsRoundTrip", 20261203);
  std::mt19937_64 rng(seed);
  for (int i = 0; i < 2000; ++i) {
    SCOPED_TRACE("record " + std::to_string(i));
    // a/ since format 8: the body and its received_at (the identity is the
    // body's: DecodeStoredEvent decodes it, which the store tests cover).
    StoredEvent ev;
    ev.seq = rng();
    ev.received_at = RandomInt(rng);
    ev.body = RandomBytes(rng, 750);
    Result<StoredEvent> e = DecodeStoredBody(EventKey(ev.seq), EncodeEvent(ev));
    ASSERT_TRUE(e.ok()) << e.status().ToString();
    EXPECT_EQ(e->seq, ev.seq);
    EXPECT_FALSE(e->has_identity);
    EXPECT_EQ(e->received_at, ev.received_at);
    EXPECT_EQ(e->body, ev.body);

    // g/l/: the type is the rank's transition in the profile, under a
    // random entity type of it.
    const Profile& profile = Profile::ReceiptRoller();
    const EntityType& type = profile.entities()[rng() % profile.entities().size()];
    FoldKey fold = RandomFoldKey(rng);
    fold.rank = static_cast<uint32_t>(rng() % type.transitions.size());
    LogEntry log;
    log.ranked.event = Event{fold.event_id, type.transitions[fold.rank].type, fold.occurred_at,
                             fold.version, RandomFields(rng)};
    log.ranked.rank = fold.rank;
    log.seq = rng();
    log.received_at = RandomInt(rng);
    const std::string log_key = LogKey(rng() >> 32, {type.name, "id_1"}, fold);
    const bool with_data = rng() % 2;
    Result<LogEntry> l =
        DecodeLog(log_key, with_data ? EncodeLogWithData(log) : EncodeLog(log), profile);
    ASSERT_TRUE(l.ok()) << l.status().ToString();
    if (!with_data) log.ranked.event.data.clear();
    EXPECT_EQ(l->ranked.event, log.ranked.event);
    EXPECT_EQ(l->ranked.rank, log.ranked.rank);
    EXPECT_EQ(l->seq, log.seq);
    EXPECT_EQ(l->received_at, with_data ? log.received_at : 0);
    EXPECT_EQ(l->has_data, with_data);

    DedupEntry dedup;
    dedup.seq = rng();
    dedup.type = RandomBytes(rng, 20);
    dedup.occurred_at = RandomInt(rng);
    dedup.entity = MaybeRef(rng);
    dedup.routing_epoch = static_cast<uint32_t>(rng());
    dedup.expires_at = rng() % 3 == 0 ? RandomInt(rng) : 0;
    dedup.body_digest = rng() % 4 == 0 ? "" : RandomBytes(rng, 32).substr(0, 32);
    const bool lean = dedup.expires_at == 0 && dedup.body_digest.size() >= kDedupDigestBytes;
    Result<DedupEntry> d = DecodeDedup(DedupKey("evt"), EncodeDedup(dedup));
    ASSERT_TRUE(d.ok()) << d.status().ToString();
    EXPECT_EQ(d->seq, dedup.seq);
    EXPECT_EQ(d->entity, dedup.entity);
    EXPECT_EQ(d->routing_epoch, dedup.routing_epoch);
    EXPECT_EQ(d->expires_at, dedup.expires_at);
    EXPECT_EQ(d->has_identity, !lean);
    EXPECT_EQ(d->body_digest,
              lean ? dedup.body_digest.substr(0, kDedupDigestBytes) : dedup.body_digest);
    if (!lean) {
      EXPECT_EQ(d->type, dedup.type);
      EXPECT_EQ(d->occurred_at, dedup.occurred_at);
    }

    ProjectionState ps;
    ps.projection.entity = "receipt";  // the key's
    ps.projection.id = "rcp_1";
    ps.projection.state = RandomBytes(rng, 10);
    ps.projection.fields = RandomFields(rng);
    ps.projection.version = MaybeInt(rng);
    ps.projection.applied = rng();
    ps.projection.rejected.resize(rng() % 3);
    for (Rejection& r : ps.projection.rejected) {
      r = Rejection{RandomBytes(rng, 36), RandomBytes(rng, 20), RandomBytes(rng, 40)};
    }
    ps.projection.occurred_at = MaybeInt(rng);
    ps.events = rng();
    ps.last =
        FoldKey{RandomInt(rng), MaybeInt(rng), static_cast<uint32_t>(rng()), RandomBytes(rng, 36)};
    if (ps.projection.occurred_at && rng() % 2 == 0) {
      // The usual case: the last event in fold order was applied, and the
      // cursor's time and version are the projection's.
      ps.last.occurred_at = *ps.projection.occurred_at;
      ps.last.version = ps.projection.version;
    }
    ps.snapshots = static_cast<ProjectionState::Snapshots>(rng() % 3);
    const std::string p_key = ProjectionKey(1, {"receipt", "rcp_1"});
    Result<ProjectionState> p = DecodeProjection(p_key, EncodeProjection(ps));
    ASSERT_TRUE(p.ok()) << p.status().ToString();
    EXPECT_EQ(p->projection, ps.projection);
    EXPECT_EQ(p->events, ps.events);
    EXPECT_EQ(p->last, ps.last);
    EXPECT_EQ(p->snapshots, ps.snapshots);
    EXPECT_FALSE(p->cursor_only);
    p = DecodeProjection(p_key, EncodeProjectionCursor(ps));
    ASSERT_TRUE(p.ok()) << p.status().ToString();
    EXPECT_TRUE(p->cursor_only);
    EXPECT_EQ(p->projection.state, ps.projection.state);
    EXPECT_EQ(p->projection.version, ps.projection.version);
    EXPECT_EQ(p->projection.occurred_at, ps.projection.occurred_at);
    EXPECT_TRUE(p->projection.fields.empty());
    EXPECT_EQ(p->last, ps.last);

    Change c;
    c.seq = rng();
    c.entity = RandomBytes(rng, 8);
    c.id = RandomBytes(rng, 10);
    c.state = RandomBytes(rng, 10);
    c.previous_state = RandomBytes(rng, 10);
    c.event_ids.resize(rng() % 4);
    for (std::string& id : c.event_ids) id = RandomBytes(rng, 36);
    c.changed_at = RandomInt(rng);
    Result<Change> ch = DecodeChange(FeedKey(c.seq), EncodeChange(c));
    ASSERT_TRUE(ch.ok()) << ch.status().ToString();
    EXPECT_EQ(*ch, c);
  }
}

struct Kind {
  std::string name;
  std::string record;  // which of the five: one decoder and one tag each
  std::string key;
  std::string value;
  size_t fixed_bytes;  // of the value (checksum included) before a trailing body
  std::function<Status(std::string_view, std::string_view)> decode;
};

template <typename Decode>
std::function<Status(std::string_view, std::string_view)> StatusOf(Decode decode) {
  return [decode](std::string_view k, std::string_view v) { return decode(k, v).status(); };
}

Event SampleEvent() {
  return Event{"evt_01HZX3K8",
               "receipt.issued",
               1795941330123000,
               7,
               {{"receipt_id", "\"rcp_1\""}, {"amount", "1500"}}};
}

std::vector<Kind> Kinds() {
  std::vector<Kind> out;
  StoredEvent ev{5, SampleEvent(), 1795941330999999, "{\"event_id\":\"evt_01HZX3K8\"}",
                 EntityRef{"receipt", "rcp_1"}};
  ev.event.data.clear();
  const std::string event = EncodeEvent(ev);
  out.push_back({"event", "a", EventKey(5), event, event.size() - ev.body.size(),
                 StatusOf(DecodeStoredBody)});
  out.push_back({"format 7 event", "a", EventKey(5), storage_test::EncodeFormat7Event(ev),
                 storage_test::EncodeFormat7Event(ev).size() - ev.body.size(),
                 StatusOf(DecodeStoredBody)});
  LogEntry log{RankedEvent{SampleEvent(), 0, {}}, 9, 10};
  const std::string log_key = LogKey(1, {"receipt", "rcp_1"}, KeyOf(log.ranked.event, 0));
  const auto decode_log = [](std::string_view k, std::string_view v) {
    return DecodeLog(k, v, Profile::ReceiptRoller());
  };
  out.push_back({"log", "l", log_key, EncodeLog(log), 0, StatusOf(decode_log)});
  out.push_back({"log with data", "l", log_key, EncodeLogWithData(log), 0, StatusOf(decode_log)});
  out.push_back(
      {"format 7 log", "l", log_key, storage_test::EncodeFormat7Log(log), 0, StatusOf(decode_log)});
  DedupEntry dedup{9, "receipt.issued",       5, EntityRef{"receipt", "rcp_1"}, 2,
                   0, std::string(32, '\x5a')};
  out.push_back({"dedup", "d", DedupKey("evt_1"), EncodeDedup(dedup), 0, StatusOf(DecodeDedup)});
  out.push_back({"format 7 dedup", "d", DedupKey("evt_1"), storage_test::EncodeFormat7Dedup(dedup),
                 0, StatusOf(DecodeDedup)});
  dedup.expires_at = 77;
  out.push_back(
      {"tombstone", "d", DedupKey("evt_1"), EncodeDedup(dedup), 0, StatusOf(DecodeDedup)});
  ProjectionState ps;
  ps.projection.state = "issued";
  ps.projection.version = 3;
  ps.projection.fields = {{"amount", "1"}};
  ps.projection.rejected = {{"e", "receipt.issued", "r"}};
  ps.events = 2;
  ps.last = KeyOf(SampleEvent(), 1);
  const std::string p_key = ProjectionKey(1, {"receipt", "rcp_1"});
  out.push_back({"projection", "p", p_key, EncodeProjection(ps), 0, StatusOf(DecodeProjection)});
  out.push_back({"cursor", "p", p_key, EncodeProjectionCursor(ps), 0, StatusOf(DecodeProjection)});
  ps.projection.occurred_at = ps.last.occurred_at;  // the cursor's time is the projection's
  ps.projection.version = ps.last.version;
  out.push_back({"cursor at the last applied event", "p", p_key, EncodeProjectionCursor(ps), 0,
                 StatusOf(DecodeProjection)});
  out.push_back({"format 7 cursor", "p", p_key, storage_test::EncodeFormat7Projection(ps, true), 0,
                 StatusOf(DecodeProjection)});
  const Change change{3, "receipt", "rcp_1", "issued", "none", {"evt_1", "evt_2"}, 1};
  out.push_back({"change", "f", FeedKey(3), EncodeChange(change), 0, StatusOf(DecodeChange)});
  return out;
}

// What only a checksum made to match could let through: every cut of a
// compact record, and every byte of it set to each of a few values. A cut
// is refused naming a field or the leftover bytes; a changed byte is either
// refused so or read as some other value, never past the record's end
// (ASan watches that).
TEST(storage_compact_record, DamageBehindAValidChecksumIsRefusedNamingTheField) {
  for (const Kind& k : Kinds()) {
    SCOPED_TRACE(k.name);
    ASSERT_TRUE(k.decode(k.key, k.value).ok());
    const std::string_view record = std::string_view(k.value).substr(0, k.value.size() - 4);
    // A cut before the body (the body of a/ is the rest, so a shorter one
    // is a valid shorter body).
    const size_t cuts = k.fixed_bytes ? k.fixed_bytes - 4 : record.size();
    // Nothing but a checksum: whatever its first byte, no record.
    EXPECT_TRUE(k.decode(k.key, FrameRecord("")).IsCorruption());
    for (size_t n = 1; n < cuts; ++n) {
      const Status st = k.decode(k.key, FrameRecord(record.substr(0, n)));
      ASSERT_FALSE(st.ok()) << "cut to " << n << " of " << record.size();
      EXPECT_TRUE(st.IsCorruption()) << st.ToString();
      EXPECT_NE(st.message().find("field "), std::string::npos) << st.message();
    }
    if (!k.fixed_bytes) {
      const Status st = k.decode(k.key, FrameRecord(std::string(record) + "x"));
      EXPECT_TRUE(st.IsCorruption()) << st.ToString();
      EXPECT_NE(st.message().find("bytes left"), std::string::npos) << st.message();
    }
    for (size_t i = 1; i < record.size(); ++i) {
      for (char b : {'\x00', '\x7f', '\x80', '\xff'}) {
        std::string changed(record);
        changed[i] = b;
        const Status st = k.decode(k.key, FrameRecord(changed));
        if (!st.ok()) {
          EXPECT_TRUE(st.IsCorruption()) << st.ToString();
        }
      }
    }
  }
}

TEST(storage_compact_record, ARecordUnderAnotherKindsKeyIsRefused) {
  const std::vector<Kind> kinds = Kinds();
  for (const Kind& value : kinds) {
    for (const Kind& reader : kinds) {
      if (value.record == reader.record) continue;
      const Status st = reader.decode(reader.key, value.value);
      EXPECT_TRUE(st.IsCorruption()) << value.name << " read as " << reader.name;
      EXPECT_NE(st.message().find("another kind"), std::string::npos) << st.message();
    }
  }
}

// A typical ReceiptRoller event: each of its five values is smaller compact
// than as format 6 wrote it, and a format 6 value still reads the same.
TEST(storage_compact_record, Format6ValuesReadAsTheCompactOnesAndAreLarger) {
  const Event event = SampleEvent();
  const EntityRef ref{"receipt", "rcp_01HZX3K8Q2"};
  StoredEvent ev{41, event, 1795941330999999, BodyOf(event), ref};
  ev.event.data.clear();
  const std::string ev_key = EventKey(41);
  const std::string compact_event = EncodeEvent(ev);
  const std::string legacy_event = storage_test::EncodeFormat6Event(ev);
  EXPECT_LT(compact_event.size() + 40, legacy_event.size());
  for (const std::string& v : {compact_event, legacy_event}) {
    Result<StoredEvent> d = DecodeStoredEvent(ev_key, v);
    ASSERT_TRUE(d.ok()) << d.status().ToString();
    EXPECT_EQ(d->event, ev.event);
    EXPECT_EQ(d->body, ev.body);
    EXPECT_EQ(d->received_at, ev.received_at);
  }

  LogEntry log{RankedEvent{event, 0, {}}, 41, ev.received_at};
  const std::string log_key = LogKey(3, ref, KeyOf(event, 0));
  for (bool with_data : {false, true}) {
    const std::string compact = with_data ? EncodeLogWithData(log) : EncodeLog(log);
    const std::string legacy = storage_test::EncodeFormat6Log(log, with_data);
    EXPECT_LT(compact.size() + 20, legacy.size());
    Result<LogEntry> a = DecodeLog(log_key, compact, Profile::ReceiptRoller());
    Result<LogEntry> b = DecodeLog(log_key, legacy, Profile::ReceiptRoller());
    ASSERT_TRUE(a.ok() && b.ok());
    EXPECT_EQ(a->ranked.event, b->ranked.event);
    EXPECT_EQ(a->ranked.rank, b->ranked.rank);
    EXPECT_EQ(a->seq, b->seq);
    EXPECT_EQ(a->received_at, with_data ? b->received_at : 0);  // lean: a/<seq>'s
    EXPECT_EQ(a->has_data, with_data);
    EXPECT_EQ(b->has_data, with_data);
  }

  for (int64_t expires_at : {0, 99}) {
    const DedupEntry dedup{41, event.type, event.occurred_at,      ref,
                           3,  expires_at, std::string(32, '\x11')};
    const std::string compact = EncodeDedup(dedup);
    const std::string legacy = storage_test::EncodeFormat6Dedup(dedup);
    EXPECT_LT(compact.size() + 30, legacy.size());
    Result<DedupEntry> a = DecodeDedup(DedupKey(event.event_id), compact);
    Result<DedupEntry> b = DecodeDedup(DedupKey(event.event_id), legacy);
    ASSERT_TRUE(a.ok() && b.ok());
    EXPECT_EQ(a->seq, b->seq);
    EXPECT_EQ(a->type, b->type);
    EXPECT_EQ(a->occurred_at, b->occurred_at);
    EXPECT_EQ(a->entity, b->entity);
    EXPECT_EQ(a->routing_epoch, b->routing_epoch);
    EXPECT_EQ(a->expires_at, b->expires_at);
    EXPECT_EQ(a->body_digest, b->body_digest);
    EXPECT_EQ(a->has_identity, b->has_identity);
  }

  ProjectionState ps;
  ps.projection.entity = ref.entity;
  ps.projection.id = ref.id;
  ps.projection.state = "issued";
  ps.projection.version = 7;
  ps.projection.applied = 1;
  ps.projection.fields = {{"amount", "1500"}};
  ps.projection.rejected = {{"evt_0", "receipt.refunded", "impossible transition"}};
  ps.projection.occurred_at = event.occurred_at;
  ps.events = 2;
  ps.last = KeyOf(event, 1);
  ps.snapshots = ProjectionState::Snapshots::kNone;
  const std::string p_key = ProjectionKey(3, ref);
  for (bool cursor_only : {true, false}) {
    ps.cursor_only = cursor_only;
    const std::string compact = cursor_only ? EncodeProjectionCursor(ps) : EncodeProjection(ps);
    const std::string legacy = storage_test::EncodeFormat6Projection(ps);
    EXPECT_LT(compact.size() + 40, legacy.size());
    Result<ProjectionState> a = DecodeProjection(p_key, compact);
    Result<ProjectionState> b = DecodeProjection(p_key, legacy);
    ASSERT_TRUE(a.ok() && b.ok());
    EXPECT_EQ(a->projection, b->projection);
    EXPECT_EQ(a->events, b->events);
    EXPECT_EQ(a->last, b->last);
    EXPECT_EQ(a->cursor_only, cursor_only);
    EXPECT_EQ(b->cursor_only, cursor_only);
    EXPECT_EQ(a->snapshots, b->snapshots);
  }

  const Change change{9, ref.entity, ref.id, "issued", "none", {event.event_id}, 123};
  const std::string compact_change = EncodeChange(change);
  const std::string legacy_change = storage_test::EncodeFormat6Change(change);
  EXPECT_LT(compact_change.size() + 40, legacy_change.size());
  for (const std::string& v : {compact_change, legacy_change}) {
    Result<Change> d = DecodeChange(FeedKey(9), v);
    ASSERT_TRUE(d.ok()) << d.status().ToString();
    EXPECT_EQ(*d, change);
  }
}

// Format 8's leaner records against format 7's (whose stores upgrade by
// writing m/format only): each format 7 value reads as the format 8 one of
// the same event does, and the format 8 one is the smaller.
TEST(storage_compact_record, Format7ValuesReadAsFormat8OnesAndAreLarger) {
  const Profile& profile = Profile::ReceiptRoller();
  const Event event = SampleEvent();
  const EntityRef ref{"receipt", "rcp_01HZX3K8Q2"};
  StoredEvent ev{41, event, 1795941330999999, BodyOf(event), ref};
  ev.event.data.clear();
  const std::string ev_key = EventKey(41);
  const std::string v8 = EncodeEvent(ev), v7 = storage_test::EncodeFormat7Event(ev);
  EXPECT_LE(v8.size() + event.event_id.size() + event.type.size() + 8 + ref.id.size(), v7.size());
  for (const std::string& v : {v8, v7}) {
    Result<StoredEvent> d = DecodeStoredEvent(ev_key, v);
    ASSERT_TRUE(d.ok()) << d.status().ToString();
    EXPECT_EQ(d->event, ev.event);
    EXPECT_EQ(d->body, ev.body);
    EXPECT_EQ(d->received_at, ev.received_at);
  }
  // Only format 7 kept the route; DecodeStoredBody gives its identity as
  // stored, format 8's none.
  EXPECT_EQ(DecodeStoredBody(ev_key, v7)->entity, ref);
  EXPECT_TRUE(DecodeStoredBody(ev_key, v7)->has_identity);
  EXPECT_FALSE(DecodeStoredBody(ev_key, v8)->has_identity);

  const LogEntry log{RankedEvent{event, 0, {}}, 41, ev.received_at};
  const std::string log_key = LogKey(3, ref, KeyOf(event, 0));
  const std::string l8 = EncodeLog(log), l7 = storage_test::EncodeFormat7Log(log);
  EXPECT_LE(l8.size() + event.type.size() + 8, l7.size());
  Result<LogEntry> a = DecodeLog(log_key, l8, profile);
  Result<LogEntry> b = DecodeLog(log_key, l7, profile);
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(a->ranked.event, b->ranked.event);
  EXPECT_EQ(a->seq, b->seq);
  EXPECT_EQ(b->received_at, ev.received_at);
  // A format 7 record keeps its own type: it reads under any profile.
  Result<Profile> other = Profile::FromJson(
      R"({"name":"other","entities":[{"name":"sale","key":"data.id","transitions":[)"
      R"({"type":"sale.made","from":["none"],"to":"made"}]}]})");
  ASSERT_TRUE(other.ok()) << other.status().ToString();
  b = DecodeLog(log_key, l7, *other);
  ASSERT_TRUE(b.ok()) << b.status().ToString();
  EXPECT_EQ(b->ranked.event.type, event.type);

  const DedupEntry dedup{41, event.type, event.occurred_at, ref, 3, 0, std::string(32, '\x11')};
  const std::string d8 = EncodeDedup(dedup), d7 = storage_test::EncodeFormat7Dedup(dedup);
  EXPECT_EQ(d8.size() + 1, d7.size()) << "the digest's length";
  Result<DedupEntry> da = DecodeDedup(DedupKey(event.event_id), d8);
  Result<DedupEntry> db = DecodeDedup(DedupKey(event.event_id), d7);
  ASSERT_TRUE(da.ok() && db.ok());
  EXPECT_EQ(da->seq, db->seq);
  EXPECT_EQ(da->entity, db->entity);
  EXPECT_EQ(da->routing_epoch, db->routing_epoch);
  EXPECT_EQ(da->body_digest, db->body_digest);
  EXPECT_EQ(da->has_identity, db->has_identity);

  ProjectionState ps;
  ps.projection.entity = ref.entity;
  ps.projection.id = ref.id;
  ps.projection.state = "issued";
  ps.projection.version = event.version;
  ps.projection.applied = 1;
  ps.projection.occurred_at = event.occurred_at;
  ps.events = 1;
  ps.last = KeyOf(event, 0);  // the applied event is the last: its time and version
  ps.snapshots = ProjectionState::Snapshots::kSome;
  const std::string p_key = ProjectionKey(3, ref);
  const std::string p8 = EncodeProjectionCursor(ps),
                    p7 = storage_test::EncodeFormat7Projection(ps, true);
  EXPECT_EQ(p8.size() + 8 + 1 + 1, p7.size())
      << "the cursor's time and version, the snapshots byte";
  Result<ProjectionState> pa = DecodeProjection(p_key, p8);
  Result<ProjectionState> pb = DecodeProjection(p_key, p7);
  ASSERT_TRUE(pa.ok() && pb.ok());
  EXPECT_EQ(pa->projection, pb->projection);
  EXPECT_EQ(pa->last, ps.last);
  EXPECT_EQ(pb->last, ps.last);
  EXPECT_EQ(pa->snapshots, ps.snapshots);
  EXPECT_EQ(pb->snapshots, ps.snapshots);
  EXPECT_EQ(pa->events, pb->events);
}

// The coding's edges: every varint width, and a varint that would pass 64
// bits, a string longer than what is left and a count the rest cannot hold
// each fail and name their field.
TEST(storage_compact_record, CodingEdges) {
  // Writes `v` with `put`, reads it back with `get`: the same value, and
  // nothing left.
  auto round_trip = [](auto v, auto put, auto get) {
    std::string out;
    put(&out, v);
    CompactReader r(out);
    decltype(v) back{};
    ASSERT_TRUE((r.*get)("v", &back));
    EXPECT_EQ(back, v);
    EXPECT_TRUE(r.AtEnd());
  };
  for (uint64_t v : {uint64_t{0}, uint64_t{127}, uint64_t{128}, uint64_t{1} << 35,
                     std::numeric_limits<uint64_t>::max()}) {
    round_trip(v, PutVarint, &CompactReader::Varint);
  }
  for (int64_t v : {std::numeric_limits<int64_t>::min(), int64_t{-1}, int64_t{0},
                    std::numeric_limits<int64_t>::max()}) {
    round_trip(v, PutZigzag, &CompactReader::Zigzag);
    round_trip(v, PutFixed64, &CompactReader::Fixed64);
  }
  {
    const std::string eleven = std::string(10, '\xff') + '\x01';
    CompactReader r(eleven);
    uint64_t v = 0;
    EXPECT_FALSE(r.Varint("eleven", &v));
    EXPECT_STREQ(r.failed_field(), "eleven");
  }
  {
    const std::string wide = std::string(9, '\xff') + '\x02';  // bit 64 set
    CompactReader r(wide);
    uint64_t v = 0;
    EXPECT_FALSE(r.Varint("wide", &v));
  }
  {
    std::string out;
    PutVarint(&out, 5);
    out += "abc";
    CompactReader r(out);
    std::string_view s;
    EXPECT_FALSE(r.String("short", &s));
    EXPECT_STREQ(r.failed_field(), "short");
    uint64_t v = 0;
    EXPECT_FALSE(r.Varint("later", &v)) << "failure is sticky";
    EXPECT_STREQ(r.failed_field(), "short") << "the first failure is named";
  }
  {
    std::string out;
    PutVarint(&out, 1000);
    out += "abc";
    CompactReader r(out);
    size_t n = 0;
    EXPECT_FALSE(r.Count("count", 1, &n));
  }
}

}  // namespace
}  // namespace eventfold::storage
