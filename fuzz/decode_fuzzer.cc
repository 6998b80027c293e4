// Payload decoding (core/decode): any body is decoded or refused with a
// reason, and whatever is accepted obeys docs/SPEC.md §2.

#include <cstddef>
#include <cstdint>
#include <string_view>

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
  return 0;
}
