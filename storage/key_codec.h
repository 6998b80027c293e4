// Key codec: every LevelDB key an eventfold store writes.
//
// Key grammar (LevelDB orders keys bytewise). <seq> is a big-endian uint64,
// so those keys sort in arrival order; <gen> is a generation, one byte for
// 0-239, else 0xF0+n and its n (1-4) big-endian bytes; <entity> is a profile entity name (never
// NUL); <id> is an entity key (decoding refuses NUL in it); <fold> is an event's fold key encoded
// so that bytewise order is fold order (docs/SPEC.md §4.1):
//
//   <fold> = be64(occurred_at ^ 2^63)       signed time, order-preserving
//            <version>                      absent sorts first
//            <n> <n bytes>                  rank: n (0-4), its big-endian bytes
//            event_id                       last, so prefixes sort first
//
//   <version> = 0x02                        absent
//             | 0x0C+n <n bytes>            v >= 0: its n significant bytes
//             | 0x0B-n <n bytes>            v < 0: n = the bytes ~v needs, and
//                                           v's low n bytes
//
// (Formats 1-7 wrote <gen> as be32, the version as 0x00 | 0x01
// be64(version ^ 2^63) and the rank as be32: four, nine and four bytes
// where format 8 takes one, two and one or two. Their keys are told apart
// by the first byte of <gen>, 0, and the upgrade rewrites them in place:
// storage/key_upgrade.h.)
//
// m/format is "8" (kFormatVersion). Format 8's keys are shorter (above),
// and it leaves out of the per-event values what other stored bytes say: a/<seq> holds the
// received_at and the body (whose identity is decoded from it where needed; the route is the
// profile's), g/l/ the seq (its type is the rank's transition in the profile of its log generation,
// its received_at the a/ record's), a d/ digest has no length byte, and a cursor whose last event
// was applied does not repeat its time and version; format 7's records read as they are, so the
// upgrade from 7 rewrites the keys under g/ and writes m/format. Format 7 writes the five values of
// every accepted event (a/, d/, f/, g/l/, g/p/ and snapshots under g/s/) as
// compact records (storage/compact_coding.h, layouts in record_codec.cc)
// instead of FlatBuffers, whose offsets, vtables and padding cost about a
// quarter of those values; a record of format 6 or before still reads as it
// is (a compact record's first byte tells it apart), so the upgrade from 6
// only writes m/format. Format 6 leans two values on their
// keys: a log record (g/l/) leaves out the fold position its key holds
// (event_id, occurred_at, version, rank), and the dedup entry of a stored
// event (d/) keeps 16 bytes of its body's SHA-256 and its route, not its
// type and time (a/<seq> has them); format 5 records read as they are.
// Format 5 keeps the logs and the index of unrouted events (g/l/, g/u/)
// under a generation of their own, m/log_generation, which a rebuild under
// an unchanged routing leaves as it is: it folds the existing logs into a
// new projection generation (m/generation) and writes only projections and
// snapshots (g/p/, g/s/).
// Format 4 kept all four families under m/generation; a format 4 store is
// one whose log generation equals it. Format 4 stores a projection (g/p/) as
// the fold's cursor, without its fields and rejections, which a read folds
// from the nearest snapshot and the log (storage/projection_read.h); format
// 3 stored it whole. Format 3 frames the m/ and k/ values
// (storage/meta_text.h), which formats 1 and 2 stored as bare text; format 1
// differs from 2 only in log records that carry their data
// (storage/log_data.h). Open upgrades any of them on request
// (Options::upgrade_format, `eventfold migrate`), reading their records as
// they are.
//
//   m/<name>                        TextRecord: store metadata: "format", "profile",
//                                   "generation", "log_generation",
//                                   "routing_epoch", "rebuild", "drop" (the
//                                   old generations' dead families may still
//                                   be there: Open deletes them),
//                                   "retired_seq" (highest seq compaction dropped),
//                                   "unrouted_index" (the log generation whose
//                                   u/ index is complete)
//   a/<seq>                         EventRecord: accepted event, verbatim body
//                                   (since format 8 with its received_at only)
//   d/<event_id>                    DedupRecord: event_id -> seq, route and
//                                   body digest (identity, since format 6,
//                                   only in tombstones and entries without a
//                                   digest); after compaction a tombstone
//                                   (expires_at)
//   c/<seq>                         ConflictRecord: refused conflicting delivery
//   q/<seq>                         QuarantineRecord: refused delivery (bounded)
//   f/<seq>                         ChangeRecord: the change feed, gap-free
//   k/<subscription>                TextRecord: checkpoint, decimal seq
//   x/<subscription>\0<seq>         ParkedRecord: a subscription's dead letter
//   r/<entity>\0<id>                CompactionRecord: a compacted entity's
//                                   snapshot and its dedup tombstones
//   g/<gen>/l/<entity>\0<id>\0<fold>  LogRecord: the entity's log, fold order;
//                                   since format 2 without the event's data
//                                   (the fold reads it from a/<seq>, whose
//                                   body is the one stored copy), since
//                                   format 6 without the fold position the
//                                   key holds: type, seq and received_at
//   g/<gen>/p/<entity>\0<id>        ProjectionRecord: current projection;
//                                   since format 4 the fold's cursor only
//                                   (cursor_only), before it whole
//   g/<gen>/s/<entity>\0<id>\0<fold>  ProjectionRecord: fold snapshot after <fold>
//   g/<gen>/u/<seq>                 empty: a/<seq> is unrouted under the
//                                   generation's profile (an index, so that
//                                   counting and listing unrouted events
//                                   reads those events only)
//
// l/ and u/ live under the log generation, p/ and s/ under the projection
// generation (the two are equal until a rebuild keeps the logs). Everything
// under g/<gen>/ is derived from the a/ and r/ records and can be rebuilt
// into another generation beside the live one. A compacted entity's
// fold starts from its r/ snapshot, kept in each generation as the snapshot
// at CompactionPoint(), the smallest fold key, so the materializer resumes
// from it for any later event (docs/RETENTION.md). One-letter families keep keys
// short; the `/` keeps them readable in dumps. Thread-safe: pure functions.

#ifndef EVENTFOLD_STORAGE_KEY_CODEC_H_
#define EVENTFOLD_STORAGE_KEY_CODEC_H_

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

#include "core/fold.h"
#include "eventfold/event.h"

namespace eventfold::storage {

// The value of m/format this build writes and reads (older ones it upgrades
// on request). Persistent: bump it with every change of a record's meaning.
inline constexpr std::string_view kFormatVersion = "8";

// Key family prefixes. Persistent: never change.
inline constexpr std::string_view kMetaPrefix = "m/";
inline constexpr std::string_view kEventPrefix = "a/";
inline constexpr std::string_view kDedupPrefix = "d/";
inline constexpr std::string_view kConflictPrefix = "c/";
inline constexpr std::string_view kQuarantinePrefix = "q/";
inline constexpr std::string_view kGenerationPrefix = "g/";
inline constexpr std::string_view kFeedPrefix = "f/";
inline constexpr std::string_view kCheckpointPrefix = "k/";
inline constexpr std::string_view kParkedPrefix = "x/";
inline constexpr std::string_view kCompactionPrefix = "r/";
// Every family above: a key under none of them is no record of a store's.
inline constexpr std::string_view kKeyFamilies[] = {
    kMetaPrefix,       kEventPrefix, kDedupPrefix,      kConflictPrefix, kQuarantinePrefix,
    kGenerationPrefix, kFeedPrefix,  kCheckpointPrefix, kParkedPrefix,   kCompactionPrefix};

std::string MetaKey(std::string_view name);
std::string EventKey(uint64_t seq);
std::string DedupKey(std::string_view event_id);
std::string ConflictKey(uint64_t seq);
std::string QuarantineKey(uint64_t seq);
std::string FeedKey(uint64_t seq);
std::string CheckpointKey(std::string_view subscription);
// "x/<subscription>\0": one subscription's dead letters.
std::string ParkedPrefix(std::string_view subscription);
std::string ParkedKey(std::string_view subscription, uint64_t seq);
std::string CompactionKey(const EntityRef& ref);
std::optional<EntityRef> ParseCompactionKey(std::string_view key);

// The fold position of a compaction snapshot: before every event's fold key
// (occurred_at INT64_MIN, no version, rank 0, empty event id).
FoldKey CompactionPoint();

// Order-preserving encoding of a fold key, and back. DecodeFoldKey refuses
// the encoding of formats 1-7, which DecodeLegacyFoldKey reads (for the
// upgrade that rewrites those keys, storage/key_upgrade.h).
std::string EncodeFoldKey(const FoldKey& key);
std::optional<FoldKey> DecodeFoldKey(std::string_view bytes);
std::optional<FoldKey> DecodeLegacyFoldKey(std::string_view bytes);

// "g/<gen>/": every derived key of one generation. <gen> is one byte for
// 0-239, else 0xF0+n and its n (1-4) big-endian bytes: order-preserving.
std::string GenerationPrefix(uint32_t gen);

// A key under g/: its generation, the length of its "g/<gen>/", and the
// rest (a family such as "l/", then the family's key). Nullopt when the
// key names no generation. ParseLegacyGenerationKey reads the "g/"
// be32(gen) "/" of formats 1-7 (for the upgrade that rewrites those keys,
// storage/key_upgrade.h); neither reads the other's.
struct GenerationKeyView {
  uint32_t gen = 0;
  size_t prefix_bytes = 0;
  std::string_view rest;
};
std::optional<GenerationKeyView> ParseGenerationKey(std::string_view key);
std::optional<GenerationKeyView> ParseLegacyGenerationKey(std::string_view key);

// The live generations of a store: its projections and fold snapshots (p/,
// s/) are under `projections`, its logs and index of unrouted events (l/,
// u/) under `logs`. Equal unless a rebuild kept the logs (format 5).
struct Generations {
  uint32_t projections = 1;
  uint32_t logs = 1;
};

// The four families of a generation, as they follow GenerationPrefix.
// Persistent: never change.
inline constexpr std::string_view kLogFamily = "l/";
inline constexpr std::string_view kProjectionFamily = "p/";
inline constexpr std::string_view kSnapshotFamily = "s/";
inline constexpr std::string_view kUnroutedFamily = "u/";
inline constexpr std::array<std::string_view, 4> kGenerationFamilies = {
    kLogFamily, kProjectionFamily, kSnapshotFamily, kUnroutedFamily};
// "g/<gen>/<family>".
std::string FamilyPrefix(uint32_t gen, std::string_view family);
// Whether `family` of generation `gen` is live under `live`: l/ and u/ of
// the log generation, p/ and s/ of the projection generation.
bool IsLiveFamily(const Generations& live, uint32_t gen, std::string_view family);

// "g/<gen>/l/<entity>\0<id>\0": one entity's log, in fold order.
std::string LogPrefix(uint32_t gen, const EntityRef& ref);
std::string LogKey(uint32_t gen, const EntityRef& ref, const FoldKey& fold);
// "g/<gen>/l/": every log.
std::string LogFamilyPrefix(uint32_t gen);

std::string ProjectionKey(uint32_t gen, const EntityRef& ref);
// "g/<gen>/p/<entity>\0", or "g/<gen>/p/" when entity is empty.
std::string ProjectionScanPrefix(uint32_t gen, std::string_view entity);

// "g/<gen>/u/<seq>", and "g/<gen>/u/": the index of unrouted events.
std::string UnroutedKey(uint32_t gen, uint64_t seq);
std::string UnroutedFamilyPrefix(uint32_t gen);

std::string SnapshotPrefix(uint32_t gen, const EntityRef& ref);
std::string SnapshotKey(uint32_t gen, const EntityRef& ref, const FoldKey& fold);

// Parses a key of the given family; nullopt when malformed.
std::optional<uint64_t> ParseSeqKey(std::string_view key, std::string_view prefix);
std::optional<EntityRef> ParseProjectionKey(std::string_view key);
// A log or snapshot key: its entity and the fold key it holds.
std::optional<std::pair<EntityRef, FoldKey>> ParseLogKey(std::string_view key);
// The same key's parts as views into it, the fold key still encoded; for
// scans that only ask whether the entity changed.
struct LogKeyView {
  std::string_view entity;
  std::string_view id;
  std::string_view fold;
};
std::optional<LogKeyView> SplitLogKey(std::string_view key);
// The fold key alone, without copying the entity and id out.
std::optional<FoldKey> ParseLogKeyFold(std::string_view key);

// A key as messages show it: printable bytes as they are, every other byte
// (and the backslash) as \xNN, so that two different keys never print alike.
std::string Printable(std::string_view key);

// The smallest key greater than every key starting with `prefix`.
std::string PrefixEnd(std::string_view prefix);

}  // namespace eventfold::storage

#endif  // EVENTFOLD_STORAGE_KEY_CODEC_H_
