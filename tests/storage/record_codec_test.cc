// Tests of storage/record_codec: every record round-trips, and a damaged
// value is reported as corruption naming its key, never misread.

#include "storage/record_codec.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <cstdio>
#include <functional>
#include <limits>
#include <string>
#include <vector>

#include "eventfold/profile.h"
#include "storage/key_codec.h"
#include "tests/storage/legacy_records.h"
#include "tests/storage/storage_test_util.h"

namespace eventfold::storage {
namespace {

using storage_test::BodyOf;

Event SampleEvent() {
  Event e;
  e.event_id = "evt_1";
  e.type = "receipt.issued";
  e.occurred_at = 1795941330123000;
  e.version = 7;
  e.data = {{"receipt_id", "\"rcp_1\""}, {"amount", "1500"}, {"lines", "[{\"sku\":\"a\"}]"}};
  return e;
}

TEST(storage_record_codec, StoredEventRoundTrips) {
  // Since format 8 the record is the body and its arrival time: the
  // identity is read back from the body, and the route is not stored.
  StoredEvent e;
  e.seq = 0x0102030405060708ull;
  e.event = SampleEvent();
  e.body = BodyOf(e.event);
  e.event.data.clear();  // the body holds the data
  e.received_at = -5;    // before the epoch still round-trips
  e.entity = EntityRef{"receipt", "rcp_1"};
  const std::string key = EventKey(e.seq);
  const std::string value = EncodeEvent(e);
  Result<StoredEvent> d = DecodeStoredEvent(key, value);
  ASSERT_TRUE(d.ok()) << d.status().ToString();
  EXPECT_EQ(d->seq, e.seq);  // from the key
  EXPECT_EQ(d->event, e.event);
  EXPECT_TRUE(d->has_identity);
  EXPECT_EQ(d->received_at, e.received_at);
  EXPECT_EQ(d->body, e.body);
  EXPECT_FALSE(d->entity.has_value()) << "the route is the profile's";
  EXPECT_EQ(value.size(), 1 + 8 + e.body.size() + 4) << "tag, received_at, body, checksum";

  // DecodeStoredBody leaves the body undecoded.
  d = DecodeStoredBody(key, value);
  ASSERT_TRUE(d.ok()) << d.status().ToString();
  EXPECT_FALSE(d->has_identity);
  EXPECT_TRUE(d->event.event_id.empty());
  EXPECT_EQ(d->body, e.body);
  EXPECT_EQ(d->received_at, e.received_at);

  // Without a version.
  e.event.version.reset();
  e.body = BodyOf(e.event);
  d = DecodeStoredEvent(key, EncodeEvent(e));
  ASSERT_TRUE(d.ok()) << d.status().ToString();
  EXPECT_EQ(d->event, e.event);

  // Verbatim bytes, NULs too, come back as they went; a body that does not
  // decode is then reported as damage naming the key, never an empty event.
  e.body = std::string("{\"binary\":\"\0\xff\x01\"}", 17);
  d = DecodeStoredBody(key, EncodeEvent(e));
  ASSERT_TRUE(d.ok()) << d.status().ToString();
  EXPECT_EQ(d->body, e.body);
  d = DecodeStoredEvent(key, EncodeEvent(e));
  ASSERT_FALSE(d.ok());
  EXPECT_TRUE(d.status().IsCorruption()) << d.status().ToString();
  EXPECT_NE(d.status().message().find("no longer decodes"), std::string::npos);
}

using storage_test::EncodeFormat5Log;

TEST(storage_record_codec, LogEntryRoundTrips) {
  const Profile& profile = Profile::ReceiptRoller();
  LogEntry e;
  e.ranked.event = SampleEvent();
  e.ranked.rank = 0;  // receipt.issued's under the profile
  e.seq = 42;
  e.received_at = 1795941330999999;
  auto key_of = [&] {
    return LogKey(1, {"receipt", "rcp_1"}, KeyOf(e.ranked.event, e.ranked.rank));
  };
  // With its data (format 1): everything.
  Result<LogEntry> d = DecodeLog(key_of(), EncodeLogWithData(e), profile);
  ASSERT_TRUE(d.ok()) << d.status().ToString();
  EXPECT_EQ(d->ranked.event, e.ranked.event);
  EXPECT_TRUE(d->has_data);
  EXPECT_EQ(d->ranked.rank, 0u);
  EXPECT_EQ(d->seq, 42u);  // kept in the record: the key holds the fold key
  EXPECT_EQ(d->received_at, e.received_at);

  // Lean: only the seq. The data stays in the body at a/<seq>, beside the
  // received_at; the fold position is the key's (since format 6) and the
  // type the rank's transition (since format 8).
  ASSERT_FALSE(e.ranked.event.data.empty());
  const std::string lean = EncodeLog(e);
  EXPECT_EQ(lean.size(), 1 + 1 + 4) << "tag, seq, checksum";
  EXPECT_LT(lean.size(), EncodeFormat5Log(e).size());
  EXPECT_EQ(lean.find(e.ranked.event.type), std::string::npos) << "the rank names it";
  d = DecodeLog(key_of(), lean, profile);
  ASSERT_TRUE(d.ok()) << d.status().ToString();
  EXPECT_FALSE(d->has_data);
  EXPECT_TRUE(d->ranked.event.data.empty());
  Event without_data = e.ranked.event;
  without_data.data.clear();
  EXPECT_EQ(d->ranked.event, without_data);
  EXPECT_EQ(d->ranked.rank, 0u);
  EXPECT_EQ(d->seq, 42u);
  EXPECT_EQ(d->received_at, 0) << "read from a/<seq> with the data";
  // A format 5 record reads the same, with its own received_at.
  d = DecodeLog(key_of(), EncodeFormat5Log(e), profile);
  ASSERT_TRUE(d.ok()) << d.status().ToString();
  EXPECT_EQ(d->ranked.event, without_data);
  EXPECT_EQ(d->ranked.rank, 0u);
  EXPECT_EQ(d->received_at, e.received_at);
  // A lean record under a key without a fold position is corruption, not an
  // event without an id.
  d = DecodeLog(ProjectionKey(1, {"receipt", "rcp_1"}), lean, profile);
  ASSERT_FALSE(d.ok());
  EXPECT_TRUE(d.status().IsCorruption()) << d.status().ToString();
  // So is a rank the profile has no transition for, or an entity it lacks:
  // the record was not written under this profile.
  for (const auto& [entity, rank] : {std::pair<std::string, uint32_t>{"receipt", 2},
                                     std::pair<std::string, uint32_t>{"parcel", 0}}) {
    d = DecodeLog(LogKey(1, {entity, "x"}, KeyOf(e.ranked.event, rank)), lean, profile);
    ASSERT_FALSE(d.ok()) << entity << " " << rank;
    EXPECT_TRUE(d.status().IsCorruption()) << d.status().ToString();
    EXPECT_NE(d.status().message().find("names no transition"), std::string::npos);
  }
  // Each rank names its own type.
  d = DecodeLog(LogKey(1, {"product", "p"}, KeyOf(e.ranked.event, 2)), lean, profile);
  ASSERT_TRUE(d.ok()) << d.status().ToString();
  EXPECT_EQ(d->ranked.event.type, "product.deleted");

  // Version 0 is a version, not an absent one; empty data stays empty and
  // still counts as carried.
  e.ranked.event.version = 0;
  e.ranked.event.data.clear();
  d = DecodeLog(key_of(), EncodeLogWithData(e), profile);
  ASSERT_TRUE(d.ok());
  ASSERT_TRUE(d->ranked.event.version.has_value());
  EXPECT_EQ(*d->ranked.event.version, 0);
  EXPECT_TRUE(d->ranked.event.data.empty());
  EXPECT_TRUE(d->has_data);
  d = DecodeLog(key_of(), EncodeLog(e), profile);
  ASSERT_TRUE(d.ok());
  ASSERT_TRUE(d->ranked.event.version.has_value());
  EXPECT_EQ(*d->ranked.event.version, 0);

  e.ranked.event.version.reset();
  d = DecodeLog(key_of(), EncodeLog(e), profile);
  ASSERT_TRUE(d.ok());
  EXPECT_FALSE(d->ranked.event.version.has_value());
}

TEST(storage_record_codec, DedupEntryRoundTrips) {
  DedupEntry e{std::numeric_limits<uint64_t>::max(),
               "product.updated",
               std::numeric_limits<int64_t>::min(),
               EntityRef{"product", "p\x01\xff"},
               7,
               /*expires_at=*/0,
               /*body_digest=*/{}};
  Result<DedupEntry> d = DecodeDedup(DedupKey("evt_1"), EncodeDedup(e));
  ASSERT_TRUE(d.ok()) << d.status().ToString();
  EXPECT_EQ(d->seq, e.seq);
  EXPECT_TRUE(d->has_identity);  // no digest to stand for it
  EXPECT_EQ(d->type, e.type);
  EXPECT_EQ(d->occurred_at, e.occurred_at);
  EXPECT_EQ(d->entity, e.entity);
  EXPECT_EQ(d->routing_epoch, 7u);
  EXPECT_TRUE(d->body_digest.empty());  // not recorded
  EXPECT_FALSE(DigestMatches(d->body_digest, std::string(32, '\xab')));

  // A stored event with its digest (format 6): the route and 16 bytes of
  // the digest, not the type and time.
  const std::string with_identity =
      EncodeDedup(DedupEntry{e.seq, e.type, e.occurred_at, e.entity, 7, /*expires_at=*/1, {}});
  e.entity.reset();  // unrouted
  e.body_digest = std::string(31, '\xab') + '\0';
  const std::string lean = EncodeDedup(e);
  EXPECT_LT(lean.size(), with_identity.size());
  d = DecodeDedup(DedupKey("evt_1"), lean);
  ASSERT_TRUE(d.ok());
  EXPECT_FALSE(d->entity.has_value());
  EXPECT_FALSE(d->has_identity);
  EXPECT_TRUE(d->type.empty());
  EXPECT_EQ(d->body_digest, e.body_digest.substr(0, kDedupDigestBytes));
  EXPECT_TRUE(DigestMatches(d->body_digest, e.body_digest));
  EXPECT_FALSE(DigestMatches(d->body_digest, std::string(32, '\xac')));
  // A format 5 entry: its identity and all 32 bytes of the digest.
  d = DecodeDedup(DedupKey("evt_1"), storage_test::EncodeFormat5Dedup(e));
  ASSERT_TRUE(d.ok());
  EXPECT_TRUE(d->has_identity);
  EXPECT_EQ(d->type, e.type);
  EXPECT_EQ(d->body_digest, e.body_digest);
  EXPECT_TRUE(DigestMatches(d->body_digest, e.body_digest));

  // A tombstone keeps its identity: its event is gone.
  e.expires_at = 99;
  d = DecodeDedup(DedupKey("evt_1"), EncodeDedup(e));
  ASSERT_TRUE(d.ok());
  EXPECT_TRUE(d->has_identity);
  EXPECT_EQ(d->type, e.type);
  EXPECT_EQ(d->occurred_at, e.occurred_at);
}

TEST(storage_record_codec, ProjectionRoundTrips) {
  ProjectionState s;
  Projection& p = s.projection;
  p.entity = "receipt";  // entity and id come from the key
  p.id = "rcp_1";
  p.state = "refunded";
  p.fields = {{"receipt_id", "\"rcp_1\""}, {"amount", "1500"}, {"currency", "\"THB\""}};
  p.version = 2;
  p.applied = 2;
  p.rejected = {{"evt_9", "receipt.issued", "impossible transition refunded -> issued"},
                {"evt_3", "receipt.refunded", "stale version 1 (entity is at version 2)"}};
  p.occurred_at = 1795941330123000;
  s.events = 4;
  s.last = FoldKey{1795941400000000, std::nullopt, 0, "evt_9"};
  const std::string key = ProjectionKey(1, {"receipt", "rcp_1"});
  Result<ProjectionState> d = DecodeProjection(key, EncodeProjection(s));
  ASSERT_TRUE(d.ok()) << d.status().ToString();
  EXPECT_EQ(d->projection, p);
  EXPECT_EQ(d->events, 4u);
  EXPECT_EQ(d->last, s.last);
  EXPECT_FALSE(d->cursor_only);

  // The cursor (format 4's projection record): everything but the fields
  // and rejections, marked as such, and a fraction of the bytes.
  EXPECT_EQ(d->snapshots, ProjectionState::Snapshots::kUnknown);
  s.snapshots = ProjectionState::Snapshots::kSome;
  const std::string cursor = EncodeProjectionCursor(s);
  d = DecodeProjection(key, cursor);
  ASSERT_TRUE(d.ok()) << d.status().ToString();
  EXPECT_TRUE(d->cursor_only);
  EXPECT_EQ(d->snapshots, ProjectionState::Snapshots::kSome);
  Projection want = p;
  want.fields.clear();
  want.rejected.clear();
  EXPECT_EQ(d->projection, want);
  EXPECT_EQ(d->events, 4u);
  EXPECT_EQ(d->last, s.last);
  EXPECT_LT(cursor.size(), EncodeProjection(s).size() / 2);
  // Re-encoding a decoded cursor keeps it a cursor.
  d = DecodeProjection(key, EncodeProjectionCursor(*d));
  ASSERT_TRUE(d.ok());
  EXPECT_TRUE(d->cursor_only);
  EXPECT_EQ(d->projection, want);

  // The key, not the value, names the entity.
  d = DecodeProjection(ProjectionKey(9, {"product", "x"}), EncodeProjection(s));
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(d->projection.entity, "product");
  EXPECT_EQ(d->projection.id, "x");

  // A projection with nothing applied: null version and occurred_at.
  ProjectionState empty;
  empty.projection.entity = "receipt";
  empty.projection.id = "rcp_1";
  empty.projection.rejected = {
      {"evt_2", "receipt.refunded", "impossible transition none -> refunded"}};
  empty.events = 1;
  empty.last = FoldKey{5, 3, 1, "evt_2"};
  d = DecodeProjection(key, EncodeProjection(empty));
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(d->projection, empty.projection);
  EXPECT_EQ(d->projection.state, "none");
  EXPECT_FALSE(d->projection.version.has_value());
  EXPECT_FALSE(d->projection.occurred_at.has_value());
  EXPECT_EQ(d->last, empty.last);
}

TEST(storage_record_codec, ConflictRoundTrips) {
  ConflictEntry e;
  e.event_id = "evt_1";
  e.first_seq = 17;
  e.type = "receipt.refunded";
  e.occurred_at = 1795941330123000;
  e.entity = EntityRef{"receipt", "rcp_2"};
  e.received_at = 1795941330999000;
  e.reason = "evt_1 is already stored with type receipt.issued";
  e.body = "{\"event_id\":\"evt_1\"}";
  Result<ConflictEntry> d = DecodeConflict(ConflictKey(18), EncodeConflict(e));
  ASSERT_TRUE(d.ok()) << d.status().ToString();
  EXPECT_EQ(d->event_id, e.event_id);
  EXPECT_EQ(d->first_seq, e.first_seq);
  EXPECT_EQ(d->type, e.type);
  EXPECT_EQ(d->occurred_at, e.occurred_at);
  EXPECT_EQ(d->entity, e.entity);
  EXPECT_EQ(d->received_at, e.received_at);
  EXPECT_EQ(d->reason, e.reason);
  EXPECT_EQ(d->body, e.body);

  e.entity.reset();
  d = DecodeConflict(ConflictKey(18), EncodeConflict(e));
  ASSERT_TRUE(d.ok());
  EXPECT_FALSE(d->entity.has_value());
}

TEST(storage_record_codec, RefusedDeliveryRoundTrips) {
  RefusedDelivery r;
  r.received_at = 1795941330999000;
  r.outcome = Outcome::kTooLarge;
  r.status = 413;
  r.reason = "body: 2097152 bytes exceeds the limit of 1048576";
  r.headers = {{"X-RR-Event-Id", "evt_1"}, {"Content-Type", "application/json"}};
  r.body_prefix = std::string("\0\xff{", 3);
  r.body_bytes = 2097152;
  Result<RefusedDelivery> d = DecodeRefused(QuarantineKey(77), EncodeRefused(r));
  ASSERT_TRUE(d.ok()) << d.status().ToString();
  EXPECT_EQ(d->seq, 77u);  // from the key
  EXPECT_EQ(d->received_at, r.received_at);
  EXPECT_EQ(d->outcome, r.outcome);
  EXPECT_EQ(d->status, 413);
  EXPECT_EQ(d->reason, r.reason);
  EXPECT_EQ(d->headers, r.headers);
  EXPECT_EQ(d->body_prefix, r.body_prefix);
  EXPECT_EQ(d->body_bytes, r.body_bytes);
}

// One record family: its key, a valid encoding, and a decoder reduced to its
// status.
struct Family {
  std::string name;
  std::string key;
  std::string printable_key;  // as the error message shows it: \xNN for
                              // each non-printable byte and the backslash
  std::string value;
  // Decodes and re-encodes: the status, and the re-encoded value on success.
  std::function<Status(std::string_view, std::string_view, std::string*)> decode;
};

// Decodes with `decode` and re-encodes with `encode` into *out.
template <typename Decode, typename Encode>
auto Recode(Decode decode, Encode encode) {
  return [decode, encode](std::string_view k, std::string_view v, std::string* out) {
    auto r = decode(k, v);
    if (r.ok()) *out = encode(*r);
    return r.status();
  };
}

std::vector<Family> Families() {
  std::vector<Family> out;
  StoredEvent ev;
  ev.event = SampleEvent();
  ev.body = BodyOf(ev.event);
  out.push_back(
      {"event", EventKey(1), "", EncodeEvent(ev), Recode(DecodeStoredEvent, EncodeEvent)});
  LogEntry log{RankedEvent{SampleEvent(), 1, {}}, 9, 10};
  const auto decode_log = [](std::string_view k, std::string_view v) {
    return DecodeLog(k, v, Profile::ReceiptRoller());
  };
  out.push_back({"log", LogKey(1, {"receipt", "rcp_1"}, KeyOf(log.ranked.event, 1)), "",
                 EncodeLog(log), Recode(decode_log, EncodeLog)});
  DedupEntry dedup{9,
                   "receipt.issued",
                   5,
                   EntityRef{"receipt", "rcp_1"},
                   2,
                   /*expires_at=*/0,
                   /*body_digest=*/{}};
  out.push_back(
      {"dedup", DedupKey("evt_1"), "", EncodeDedup(dedup), Recode(DecodeDedup, EncodeDedup)});
  ProjectionState ps;
  ps.projection.state = "issued";
  ps.projection.fields = {{"amount", "1"}};
  ps.projection.rejected = {{"e", "receipt.issued", "r"}};
  ps.events = 2;
  ps.last.event_id = "evt_1";
  out.push_back({"projection", ProjectionKey(1, {"receipt", "rcp_1"}), "", EncodeProjection(ps),
                 Recode(DecodeProjection, EncodeProjection)});
  ConflictEntry c;
  c.event_id = "evt_1";
  c.type = "receipt.issued";
  c.reason = "because";
  c.body = "{}";
  out.push_back(
      {"conflict", ConflictKey(3), "", EncodeConflict(c), Recode(DecodeConflict, EncodeConflict)});
  RefusedDelivery q;
  q.outcome = Outcome::kConflict;
  q.status = 409;
  q.reason = "event_id: already stored";
  q.headers = {{"X-RR-Event-Id", "evt_1"}};
  q.body_prefix = "{\"event_id\":\"evt_1\"}";
  q.body_bytes = 20;
  out.push_back(
      {"quarantine", QuarantineKey(4), "", EncodeRefused(q), Recode(DecodeRefused, EncodeRefused)});
  for (Family& f : out) {
    // As documented: each non-printable byte of the key (and the
    // backslash) shows as \xNN, in lower-case hex.
    for (char ch : f.key) {
      const auto b = static_cast<unsigned char>(ch);
      if (b >= 0x20 && b < 0x7F && b != '\\') {
        f.printable_key += ch;
      } else {
        char hex[5];
        std::snprintf(hex, sizeof hex, "\\x%02x", b);
        f.printable_key += hex;
      }
    }
  }
  EXPECT_EQ(out[0].printable_key, R"(a/\x00\x00\x00\x00\x00\x00\x00\x01)");
  return out;
}

void ExpectCorruptionNamingKey(const Status& st, const Family& f, const std::string& what) {
  EXPECT_TRUE(st.IsCorruption()) << f.name << " " << what << ": " << st.ToString();
  EXPECT_NE(st.message().find(f.printable_key), std::string::npos)
      << f.name << " " << what << ": message does not name the key: " << st.message();
}

TEST(storage_record_codec, TruncatedValuesAreCorruptionNamingTheKeyNeverMisread) {
  for (const Family& f : Families()) {
    std::string recoded;
    ASSERT_TRUE(f.decode(f.key, f.value, &recoded).ok()) << f.name;
    EXPECT_EQ(recoded, f.value) << f.name << ": encoding is deterministic";
    size_t corrupt = 0;
    for (size_t n = 0; n < f.value.size(); ++n) {
      recoded.clear();
      Status st = f.decode(f.key, std::string_view(f.value).substr(0, n), &recoded);
      const std::string what =
          "truncated to " + std::to_string(n) + " of " + std::to_string(f.value.size());
      if (st.ok()) {
        // FlatBuffers ends a buffer with alignment padding; losing only
        // padding loses no information. Anything else must be refused.
        EXPECT_EQ(recoded, f.value) << f.name << " " << what << ": misread";
        EXPECT_GE(n + 4, f.value.size()) << f.name << " " << what << ": accepted";
      } else {
        ExpectCorruptionNamingKey(st, f, what);
        ++corrupt;
      }
    }
    EXPECT_GE(corrupt + 3, f.value.size()) << f.name;
  }
}

TEST(storage_record_codec, GarbageValuesAreCorruptionNamingTheKey) {
  for (const Family& f : Families()) {
    // Not a FlatBuffer at all.
    std::string ignored;
    ExpectCorruptionNamingKey(f.decode(f.key, "not a flatbuffer, just text", &ignored), f, "text");
    // The root offset pointing far outside the buffer.
    std::string bad_root = f.value;
    bad_root[0] = bad_root[1] = bad_root[2] = bad_root[3] = '\xff';
    ExpectCorruptionNamingKey(f.decode(f.key, bad_root, &ignored), f, "root offset");
    // Every 4-byte word after the root offset overwritten with 0x7fffffff:
    // vtable and string offsets and lengths all point outside the buffer
    // (a partial last word too: a lean log record is 6 bytes).
    std::string smashed = f.value;
    for (size_t i = 4; i < smashed.size(); ++i) smashed[i] = i % 4 == 3 ? '\x7f' : '\xff';
    ExpectCorruptionNamingKey(f.decode(f.key, smashed, &ignored), f, "smashed");
  }
}

}  // namespace
}  // namespace eventfold::storage
