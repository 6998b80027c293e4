// Payload decoding (core/decode): any body is decoded or refused with a
// reason, whatever is accepted obeys docs/SPEC.md §2, the ingest's decode
// (without the data) agrees with the whole decode on every body, and the
// rebuild's route-only decode of an accepted body agrees with it too.

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/decode.h"
#include "core/rfc3339.h"
#include "eventfold/profile.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view body(reinterpret_cast<const char*>(data), size);
  const auto decoded = eventfold::DecodeEvent(body, eventfold::Profile::ReceiptRoller());
  static const std::vector<std::string> members =
      eventfold::RouteMembers(eventfold::Profile::ReceiptRoller());
  // An ingest's decode: the same refusal, or the same event without its
  // data, which DecodeData then reads as the whole decode did.
  const auto lean =
      eventfold::DecodeEventWithoutData(body, eventfold::Profile::ReceiptRoller(), members);
  if (lean.ok() != decoded.ok()) __builtin_trap();
  if (!decoded.ok()) {
    // A refusal always names the field and the reason.
    if (decoded.status().message().empty()) __builtin_trap();
    if (lean.status().message() != decoded.status().message()) __builtin_trap();
    return 0;
  }
  eventfold::Event identity = decoded->event;
  identity.data.clear();
  const auto members_read = eventfold::DecodeData(body);
  if (!(lean->event == identity) || lean->entity != decoded->entity ||
      lean->rank != decoded->rank || !members_read.ok() || *members_read != decoded->event.data) {
    __builtin_trap();
  }
  const eventfold::Event& event = decoded->event;
  if (!eventfold::IsValidEventId(event.event_id)) __builtin_trap();
  if (event.type.find('.') == std::string::npos) __builtin_trap();
  if (event.version && *event.version < 0) __builtin_trap();
  if (decoded->entity && decoded->entity->id.size() > eventfold::kMaxKeyBytes) {
    __builtin_trap();
  }
  // A rebuild's decode of the same (accepted) body, reading only the data
  // members the routes need, finds the same identity and route.
  const auto routed =
      eventfold::DecodeEventRoute(body, eventfold::Profile::ReceiptRoller(), members);
  if (!routed.ok() || routed->entity != decoded->entity || routed->rank != decoded->rank ||
      routed->event.event_id != event.event_id || routed->event.type != event.type ||
      routed->event.occurred_at != event.occurred_at || routed->event.version != event.version ||
      !routed->event.data.empty()) {
    __builtin_trap();
  }
  return 0;
}
