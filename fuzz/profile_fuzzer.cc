// Profile JSON (core/profile): any document is parsed or refused with a
// reason, and an accepted profile's canonical JSON parses back to the same
// profile (same fingerprint).

#include <cstddef>
#include <cstdint>
#include <string_view>

#include "eventfold/profile.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view json(reinterpret_cast<const char*>(data), size);
  const auto profile = eventfold::Profile::FromJson(json);
  if (!profile.ok()) {
    if (profile.status().message().empty()) __builtin_trap();
    return 0;
  }
  const auto again = eventfold::Profile::FromJson(profile->ToJson());
  if (!again.ok() || again->Fingerprint() != profile->Fingerprint()) __builtin_trap();
  for (const auto& entity : profile->entities()) {
    for (const auto& transition : entity.transitions) {
      const eventfold::Route* route = profile->Find(transition.type);
      if (route == nullptr || route->transition == nullptr) __builtin_trap();
    }
  }
  return 0;
}
