// Record codec: the in-memory forms of stored records and their FlatBuffers
// encodings (storage/records.fbs). Every decode verifies the buffer first; a
// record that fails verification is reported as corruption naming its key,
// never misread. Pure functions; thread-safe.

#ifndef EVENTFOLD_STORAGE_RECORD_CODEC_H_
#define EVENTFOLD_STORAGE_RECORD_CODEC_H_

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/fold.h"
#include "eventfold/event.h"
#include "eventfold/feed.h"
#include "eventfold/profile.h"
#include "eventfold/projection.h"
#include "eventfold/status.h"
#include "eventfold/store.h"

namespace eventfold::storage {

// m/<name> and k/<subscription> since format 3: the value's text in a
// TextRecord. DecodeText fails with kCorruption naming `key` when the
// checksum or the buffer does not verify (a format 1/2 value, plain text,
// does not: Open upgrades those before anything reads them).
std::string EncodeText(std::string_view text);

// A record as it is stored: the record's bytes followed by their masked
// CRC-32C, little-endian. Every Encode* below returns its record so framed
// (tests and fuzzers frame records of their own with it).
std::string FrameRecord(std::string_view record);
Result<std::string> DecodeText(std::string_view key, std::string_view value);

// a/<seq>. Since format 8 the record is the body and its received_at: the
// event's identity is read from the body, and its route is the profile's.
struct StoredEvent {
  uint64_t seq = 0;
  Event event;  // without data: the body holds it
  int64_t received_at = 0;
  std::string body;
  // The route the event was stored under, in records before format 8 (it
  // is not stored since: route the body under the profile at hand).
  std::optional<EntityRef> entity;
  // `event` is filled: always from DecodeStoredEvent; from DecodeStoredBody
  // only for records before format 8, which repeat the identity.
  bool has_identity = true;
};

// g/<gen>/l/<entity>\0<id>\0<fold>. Since format 2 a log record holds what
// ordering needs, not the event's data: that is read from the one stored
// copy, the body at a/<seq> (storage/log_data.h). A format 1 record still
// carries its data; `has_data` says which.
struct LogEntry {
  RankedEvent ranked;
  uint64_t seq = 0;
  // Since format 8 not in the record: set by LoadLogData (storage/log_data.h)
  // from a/<seq>, 0 until then.
  int64_t received_at = 0;
  bool has_data = false;  // decoded: ranked.event.data came with the record
};

// d/<event_id>
struct DedupEntry {
  uint64_t seq = 0;
  std::string type;
  int64_t occurred_at = 0;
  std::optional<EntityRef> entity;  // as routed under routing_epoch's profile
  uint32_t routing_epoch = 0;
  // 0: the event is stored at a/<seq>. Otherwise a tombstone of a compacted
  // event, kept until this time (Clock micros); `entity` is then where it
  // was compacted, whatever the routing epoch.
  int64_t expires_at = 0;
  // SHA-256 of the body stored at a/<seq>, or empty: not recorded
  // (tombstones, entries written before the field existed). Stored as its
  // first kDedupDigestBytes since format 6 (32 bytes before): compare with
  // DigestMatches.
  std::string body_digest;
  // Decoded: `type` and `occurred_at` came with the record. Since format 6
  // the entry of a stored event with a digest leaves them out (EncodeDedup
  // does; they are then read from a/<seq>). Tombstones always have them.
  bool has_identity = true;
};

// How much of a body's SHA-256 a dedup entry keeps (since format 6): 128
// bits keep a collision, even a chosen one, out of reach.
inline constexpr size_t kDedupDigestBytes = 16;

// Whether a dedup entry's stored digest (16 or 32 bytes) is that of the body
// whose SHA-256 is `sha256`; false when none was stored.
bool DigestMatches(std::string_view stored, std::string_view sha256);

// g/<gen>/p/<entity>\0<id>, and snapshots under g/<gen>/s/: the fold state
// of core/fold.h.
using ::eventfold::ProjectionState;

// c/<seq>
struct ConflictEntry {
  std::string event_id;
  uint64_t first_seq = 0;
  std::string type;
  int64_t occurred_at = 0;
  std::optional<EntityRef> entity;
  int64_t received_at = 0;
  std::string reason;
  std::string body;
};

// Writes e.received_at and e.body (the rest is the body's).
std::string EncodeEvent(const StoredEvent& e);
// The same record from its two parts, for a writer that has the body
// elsewhere (ingest: the delivery's) and need not copy it into a
// StoredEvent first.
std::string EncodeEventRecord(int64_t received_at, std::string_view body);
// The stored event with its identity, which a format 8 record's body gives
// (decoded here: kCorruption naming the key when it no longer decodes).
Result<StoredEvent> DecodeStoredEvent(std::string_view key, std::string_view value);
// The same without decoding the body: `event` is left empty (has_identity
// false) when the record does not hold it. For a caller that decodes the
// body itself.
Result<StoredEvent> DecodeStoredBody(std::string_view key, std::string_view value);

// The lean record: no data and (since format 8) no type. It holds only
// e.seq (the key holds the fold position), so a writer that has no
// LogEntry at hand need not build one.
std::string EncodeLog(const LogEntry& e);
std::string EncodeLeanLog(uint64_t seq);
// The record with its type and data, as format 1 kept it (tests and fuzzers
// write it; the store no longer does).
std::string EncodeLogWithData(const LogEntry& e);
// `profile` is the one the log was routed under (the store's, for its log
// generation): a format 8 record's type is its rank's transition there.
// kCorruption naming the key when the record is damaged or its rank names
// no transition.
Result<LogEntry> DecodeLog(std::string_view key, std::string_view value, const Profile& profile);

std::string EncodeDedup(const DedupEntry& e);
Result<DedupEntry> DecodeDedup(std::string_view key, std::string_view value);

// The projection's entity and id come from the key, not the value.
// EncodeProjection writes the whole state (snapshots, compaction records;
// `s` must not be cursor_only); EncodeProjectionCursor only the fold's
// cursor, as format 4 stores g/<gen>/p/ (fields and rejections left out).
// DecodeProjection reads either and sets cursor_only accordingly.
std::string EncodeProjection(const ProjectionState& s);
std::string EncodeProjectionCursor(const ProjectionState& s);
Result<ProjectionState> DecodeProjection(std::string_view key, std::string_view value);

std::string EncodeConflict(const ConflictEntry& e);
Result<ConflictEntry> DecodeConflict(std::string_view key, std::string_view value);

// f/<seq>; the seq comes from the key.
// r/<entity>\0<id>; the entity comes from the key.
struct CompactionEntry {
  ProjectionState snapshot;  // its cursor is CompactionPoint()
  int64_t compacted_at = 0;
  uint64_t events = 0;
  int64_t tombstones_until = 0;
  std::vector<std::string> tombstones;
};

std::string EncodeChange(const Change& c);
Result<Change> DecodeChange(std::string_view key, std::string_view value);

std::string EncodeCompaction(const CompactionEntry& c);
Result<CompactionEntry> DecodeCompaction(std::string_view key, std::string_view value);

// x/<subscription>\0<seq>; subscription and seq come from the key.
std::string EncodeParked(const ParkedChange& p);
Result<ParkedChange> DecodeParked(std::string_view key, std::string_view value);

// q/<seq>; the seq comes from the key.
std::string EncodeRefused(const RefusedDelivery& r);
Result<RefusedDelivery> DecodeRefused(std::string_view key, std::string_view value);

}  // namespace eventfold::storage

#endif  // EVENTFOLD_STORAGE_RECORD_CODEC_H_
