// Key codec: every LevelDB key an eventfold store writes.
//
// Key grammar (bytewise order is LevelDB's; <seq> is a big-endian uint64 so
// keys sort in arrival order; <entity> is a profile entity name, never
// containing NUL; <id> is an entity key, refused at decode if it holds NUL):
//
//   m/<name>                      store metadata: "format", "profile",
//                                 "rebuild" (present while a rebuild runs)
//   a/<seq>                       EventRecord: accepted event, verbatim body
//   d/<event_id>                  DedupRecord: event_id -> seq and identity
//   l/<entity>\0<id>\0<seq>       LogRecord: the entity's log, arrival order
//   p/<entity>\0<id>              ProjectionRecord: current projection
//   c/<seq>                       ConflictRecord: refused conflicting delivery
//   q/<seq>                       QuarantineRecord: refused delivery (bounded)
//
// One-letter families keep keys short; the `/` keeps them readable in dumps.
// Thread-safe: pure functions.

#ifndef EVENTFOLD_STORAGE_KEY_CODEC_H_
#define EVENTFOLD_STORAGE_KEY_CODEC_H_

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "eventfold/event.h"

namespace eventfold::storage {

// Key family prefixes. Persistent: never change.
inline constexpr std::string_view kMetaPrefix = "m/";
inline constexpr std::string_view kEventPrefix = "a/";
inline constexpr std::string_view kDedupPrefix = "d/";
inline constexpr std::string_view kLogPrefix = "l/";
inline constexpr std::string_view kProjectionPrefix = "p/";
inline constexpr std::string_view kConflictPrefix = "c/";
inline constexpr std::string_view kQuarantinePrefix = "q/";

std::string MetaKey(std::string_view name);
std::string EventKey(uint64_t seq);
std::string DedupKey(std::string_view event_id);
std::string ConflictKey(uint64_t seq);
std::string QuarantineKey(uint64_t seq);

// "l/<entity>\0<id>\0": every log entry of one entity starts with this.
std::string LogPrefix(const EntityRef& ref);
std::string LogKey(const EntityRef& ref, uint64_t seq);

// "p/<entity>\0" (or "p/" when entity is empty): projections to list.
std::string ProjectionScanPrefix(std::string_view entity);
std::string ProjectionKey(const EntityRef& ref);

// Parses a key of the given family; nullopt when malformed.
std::optional<uint64_t> ParseSeqKey(std::string_view key, std::string_view prefix);
std::optional<EntityRef> ParseProjectionKey(std::string_view key);
// The entity of a log key and its seq.
std::optional<std::pair<EntityRef, uint64_t>> ParseLogKey(std::string_view key);

// The smallest key greater than every key starting with `prefix`.
std::string PrefixEnd(std::string_view prefix);

}  // namespace eventfold::storage

#endif  // EVENTFOLD_STORAGE_KEY_CODEC_H_
