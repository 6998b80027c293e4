// Payload decoding (core/decode): any body is decoded or refused with a
// reason, whatever is accepted obeys docs/SPEC.md §2, and the rebuild's
// route-only decode of an accepted body agrees with the whole decode.

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
  if (!decoded.ok()) {
    // A refusal always names the field and the reason.
    if (decoded.status().message().empty()) __builtin_trap();
    return 0;
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
  static const std::vector<std::string> members =
      eventfold::RouteMembers(eventfold::Profile::ReceiptRoller());
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
