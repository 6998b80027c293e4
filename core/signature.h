// Webhook signature verification (docs/SPEC.md §2.4), HMAC-SHA256 over the raw body.
//
// Two schemes:
//  - X-RR-Signature: "t=<unix seconds>,v1=<hex>[,v1=<hex>...]", each hex the
//    lower-case HMAC-SHA256(secret bytes as written, "<t>.<body>");
//  - Standard Webhooks: webhook-id, webhook-timestamp and
//    "webhook-signature: v1,<base64> [v1,<base64> ...]" over
//    "<id>.<timestamp>.<body>", keyed by the base64 part of a "whsec_" secret;
//    webhook-id must equal the body's event_id (checked by the caller).
// A delivery is valid when any signature matches any configured secret
// (rotation) and |now - t| <= tolerance. Comparisons are constant-time and
// check length first; unknown scheme versions are skipped; a malformed header
// is refused, never a crash.
//
// A SignatureVerifier is immutable after Make(); share it across threads.

#ifndef EVENTFOLD_CORE_SIGNATURE_H_
#define EVENTFOLD_CORE_SIGNATURE_H_

#include <cstdint>
#include <initializer_list>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "eventfold/ingest.h"
#include "eventfold/status.h"

namespace eventfold {

// Secrets shorter than this (after base64 decoding for whsec_) are refused:
// a short HMAC key is guessable.
inline constexpr size_t kMinSecretBytes = 16;

class SignatureVerifier {
 public:
  // Validates the secrets: each non-empty, at least kMinSecretBytes, and a
  // "whsec_" secret must carry valid base64. kInvalidArgument names the
  // secret by position, never by value.
  static Result<SignatureVerifier> Make(const std::vector<std::string>& secrets,
                                        int64_t tolerance_seconds);

  // OK when the delivery carries a valid signature under either scheme at
  // `now_micros`. Otherwise kInvalidArgument whose message names the header
  // and the reason (401 material). For Standard Webhooks, `*webhook_id`
  // receives the id the signature covers, to compare with the body's.
  Status Verify(const Headers& headers, std::string_view body, int64_t now_micros,
                std::optional<std::string>* webhook_id) const;

  int64_t tolerance_seconds() const { return tolerance_seconds_; }

 private:
  // An HMAC-SHA256 key set up once (signature.cc); immutable, shared.
  class Key;

  SignatureVerifier() = default;

  Status VerifyRr(std::string_view header, std::string_view body, int64_t now) const;
  Status VerifyStandard(const Headers& headers, std::string_view body, int64_t now,
                        std::optional<std::string>* webhook_id) const;

  std::vector<std::shared_ptr<const Key>> rr_keys_;        // every secret, as written
  std::vector<std::shared_ptr<const Key>> standard_keys_;  // decoded whsec_ secrets
  int64_t tolerance_seconds_ = 300;
};

// HMAC-SHA256(key, message) as raw 32 bytes; empty if OpenSSL fails (a
// signature made from it then matches nothing).
std::string HmacSha256(std::string_view key, std::string_view message);

// Standard base64 (with padding); decode returns nullopt on malformed input.
std::string Base64Encode(std::string_view bytes);
std::optional<std::string> Base64Decode(std::string_view text);

// Equal length and equal bytes, in time independent of where they differ.
bool ConstantTimeEquals(std::string_view a, std::string_view b);

// Header values a sender would send, for tests, the demo and benchmarks.
std::string SignRr(std::string_view secret, int64_t unix_seconds, std::string_view body);
std::string SignStandard(std::string_view whsec_secret, std::string_view id, int64_t unix_seconds,
                         std::string_view body);

}  // namespace eventfold

#endif  // EVENTFOLD_CORE_SIGNATURE_H_
