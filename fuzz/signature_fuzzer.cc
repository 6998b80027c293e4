// Both signature headers (core/signature): X-RR-Signature and Standard
// Webhooks. Any headers and body are verified or refused with a reason, and
// the body signed by the sender's own helpers always verifies.

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>

#include "core/signature.h"
#include "fuzz/fuzz_input.h"

namespace {

constexpr char kRrSecret[] = "fuzz-rr-secret-0123456789";
// "whsec_" + base64 of "fuzz-standard-key-012345".
constexpr char kStandardSecret[] = "whsec_ZnV6ei1zdGFuZGFyZC1rZXktMDEyMzQ1";
constexpr int64_t kNowSeconds = 1795000000;

const eventfold::SignatureVerifier& Verifier() {
  static const auto* verifier = new eventfold::SignatureVerifier(
      eventfold::SignatureVerifier::Make({kRrSecret, kStandardSecret}, 300).value());
  return *verifier;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const auto request = eventfold::fuzz::ParseRequest(data, size, false);
  const auto& verifier = Verifier();
  const int64_t now = kNowSeconds * 1000000;
  std::optional<std::string> webhook_id;
  const auto status = verifier.Verify(request.headers, request.body, now, &webhook_id);
  if (!status.ok() && status.message().empty()) __builtin_trap();

  // Whatever the body, a delivery signed as a sender signs it verifies.
  const eventfold::Headers rr = {
      {"X-RR-Signature", eventfold::SignRr(kRrSecret, kNowSeconds, request.body)}};
  if (!verifier.Verify(rr, request.body, now, &webhook_id).ok()) __builtin_trap();
  const std::string id = "evt_fuzz";
  const eventfold::Headers standard = {
      {"webhook-id", id},
      {"webhook-timestamp", std::to_string(kNowSeconds)},
      {"webhook-signature",
       eventfold::SignStandard(kStandardSecret, id, kNowSeconds, request.body)}};
  webhook_id.reset();
  if (!verifier.Verify(standard, request.body, now, &webhook_id).ok() || webhook_id != id) {
    __builtin_trap();
  }

  // The base64 decoder on arbitrary text: decoded bytes encode to text that
  // decodes to the same bytes.
  if (const auto bytes = eventfold::Base64Decode(request.body)) {
    if (eventfold::Base64Decode(eventfold::Base64Encode(*bytes)) != bytes) __builtin_trap();
  }
  return 0;
}
