// Payload decoding: a webhook body -> Event plus its route (docs/SPEC.md §2).
//
// Decoding validates the whole body as JSON (simdjson on-demand over a padded
// copy, no exceptions) and every field rule of docs/SPEC.md §2. A refusal's message
// is "<field>: <reason>", e.g. "occurred_at: month out of range 01-12".
// Pure computation; safe to call from many threads at once.

#ifndef EVENTFOLD_CORE_DECODE_H_
#define EVENTFOLD_CORE_DECODE_H_

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "eventfold/event.h"
#include "eventfold/ingest.h"
#include "eventfold/profile.h"
#include "eventfold/status.h"

namespace eventfold {

// Bounds that keep hostile bodies from costing unbounded work.
inline constexpr int kMaxJsonDepth = 64;
inline constexpr size_t kMaxEventIdBytes = 128;
inline constexpr size_t kMaxKeyBytes = kMaxEntityKeyBytes;

struct DecodedEvent {
  Event event;
  std::optional<EntityRef> entity;  // absent: no entity knows the type
  uint32_t rank = 0;                // the type's rank within its entity
  // event.data left out: DecodeEventWithoutData, DecodeEventRoute.
  bool without_data = false;
};

// Decodes `body` and routes it under `profile`. kInvalidArgument with
// "<field>: <reason>" on any refusal.
Result<DecodedEvent> DecodeEvent(std::string_view body, const Profile& profile);

// The identity (id, type, time, version) of `body`, which needs no
// profile: decoded by the same rules without routing it and without
// reading the members of `data` (event.data is left empty; their JSON is
// not checked). Fails as DecodeEvent does on what it reads.
Result<Event> DecodeIdentity(std::string_view body);

// The members of `data` that routing under `profile` reads: the first one
// below "data" of each entity type's key path.
std::vector<std::string> RouteMembers(const Profile& profile);

// DecodeEvent for a body accepted once already (a rebuild's scan of stored
// events): the identity and route, without the data (event.data is left
// empty). Only the data members in `members` (RouteMembers(profile)) are
// read; the others are skipped, so their JSON is not checked again. Fails
// as DecodeEvent does on what it reads.
Result<DecodedEvent> DecodeEventRoute(std::string_view body, const Profile& profile,
                                      const std::vector<std::string>& members);

// DecodeEvent for an ingest: every rule DecodeEvent checks, the JSON of
// each member of `data` included, and the same route, but event.data is
// left empty: building the members' Fields was about a tenth of an
// ingest's CPU, and an ingest's fold needs them only to take a snapshot
// or to re-fold (CompleteData then reads them from the body). `members` is
// RouteMembers(profile).
Result<DecodedEvent> DecodeEventWithoutData(std::string_view body, const Profile& profile,
                                            const std::vector<std::string>& members);

// The members of `data` of `body`, in the order it lists them, as
// DecodeEvent gives them. Fails as DecodeEvent does.
Result<std::vector<Field>> DecodeData(std::string_view body);

// The docs/SPEC.md §2.3 header rules: X-RR-Event-Id and webhook-id, when present,
// equal the body's event_id.
Status CheckEventIdHeader(const Headers& headers, std::string_view event_id);

// A guess at the body's event_id without decoding it: the string after the
// first `"event_id":` in the bytes, when it is a valid event id and nothing
// before it opens a nested object or an array (otherwise nullopt: the key
// could be a nested one). For a body the decoder accepts (one object, no
// repeated key) the guess is the event_id. A caller uses it to find a stored
// event whose body it then compares byte for byte (by digest) and to check
// the delivery's event-id header, never on a body it has not so compared.
// Cheap: no allocation.
std::optional<std::string_view> PeekEventId(std::string_view body);

// True when `id` is 1-128 bytes of [A-Za-z0-9._:-].
bool IsValidEventId(std::string_view id);

}  // namespace eventfold

#endif  // EVENTFOLD_CORE_DECODE_H_
