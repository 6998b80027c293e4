#include "core/signature.h"

#include <openssl/core_names.h>
#include <openssl/crypto.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/params.h>

#include <limits>

#include "core/field_values.h"
#include "core/sha256.h"

namespace eventfold {
namespace {

constexpr std::string_view kWhsecPrefix = "whsec_";

Status Unauthorized(std::string_view header, std::string_view reason) {
  return Status::InvalidArgument(std::string(header) + ": " + std::string(reason));
}

// Unix seconds: 1-12 ASCII digits (no sign, no spaces).
std::optional<int64_t> ParseSeconds(std::string_view s) {
  if (s.empty() || s.size() > 12) return std::nullopt;
  int64_t v = 0;
  for (char c : s) {
    if (c < '0' || c > '9') return std::nullopt;
    v = v * 10 + (c - '0');
  }
  return v;
}

Status CheckTolerance(std::string_view header, int64_t t, int64_t now_micros, int64_t tolerance) {
  const int64_t now = now_micros / 1000000;
  const int64_t skew = now > t ? now - t : t - now;
  if (skew > tolerance) {
    return Unauthorized(header, "timestamp " + std::to_string(t) + " is " + std::to_string(skew) +
                                    " s from now (tolerance " + std::to_string(tolerance) + " s)");
  }
  return Status::OK();
}

// OpenSSL's errors become a Status here and nowhere else: `what` failed,
// with the reason at the head of OpenSSL's thread-local error queue, which
// is cleared so a later failure does not report this one's reason.
Status FromOpenSsl(const std::string& what) {
  const unsigned long code = ERR_get_error();
  std::string message = what + ": OpenSSL cannot set up HMAC-SHA256";
  if (code != 0) {
    char reason[256];
    ERR_error_string_n(code, reason, sizeof(reason));
    message += std::string(" (") + reason + ")";
  }
  ERR_clear_error();
  return Status::Unavailable(message);
}

}  // namespace

// OpenSSL's one-shot HMAC looks the algorithm up and derives the key's
// inner and outer pads on every call. A Key does both once; each message
// then costs a copy of the keyed state. Copying from a shared, never
// modified state is safe from many threads.
class SignatureVerifier::Key {
 public:
  static std::shared_ptr<const Key> Make(std::string_view key) {
    static EVP_MAC* const hmac = EVP_MAC_fetch(nullptr, OSSL_MAC_NAME_HMAC, nullptr);
    if (hmac == nullptr) return nullptr;
    auto k = std::make_shared<Key>();
    k->ctx_ = EVP_MAC_CTX_new(hmac);
    char digest[] = "SHA256";
    const OSSL_PARAM params[] = {OSSL_PARAM_construct_utf8_string(OSSL_MAC_PARAM_DIGEST, digest, 0),
                                 OSSL_PARAM_construct_end()};
    if (k->ctx_ == nullptr ||
        !EVP_MAC_init(k->ctx_, reinterpret_cast<const unsigned char*>(key.data()), key.size(),
                      params)) {
      return nullptr;
    }
    return k;
  }
  Key() = default;
  ~Key() { EVP_MAC_CTX_free(ctx_); }
  Key(const Key&) = delete;
  Key& operator=(const Key&) = delete;

  // The raw 32-byte HMAC of the concatenated `parts`; empty (matching no
  // signature) if OpenSSL fails.
  std::string Sign(std::initializer_list<std::string_view> parts) const {
    std::unique_ptr<EVP_MAC_CTX, decltype(&EVP_MAC_CTX_free)> ctx(EVP_MAC_CTX_dup(ctx_),
                                                                  &EVP_MAC_CTX_free);
    if (!ctx) return {};
    for (std::string_view part : parts) {
      if (!EVP_MAC_update(ctx.get(), reinterpret_cast<const unsigned char*>(part.data()),
                          part.size())) {
        return {};
      }
    }
    unsigned char out[EVP_MAX_MD_SIZE];
    size_t len = 0;
    if (!EVP_MAC_final(ctx.get(), out, &len, sizeof(out))) return {};
    return std::string(reinterpret_cast<const char*>(out), len);
  }

 private:
  EVP_MAC_CTX* ctx_ = nullptr;
};

std::string HmacSha256(std::string_view key, std::string_view message) {
  unsigned char out[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  if (key.size() > static_cast<size_t>(std::numeric_limits<int>::max()) ||
      HMAC(EVP_sha256(), key.data(), static_cast<int>(key.size()),
           reinterpret_cast<const unsigned char*>(message.data()), message.size(), out,
           &len) == nullptr) {
    ERR_clear_error();
    return {};
  }
  return std::string(reinterpret_cast<const char*>(out), len);
}

std::string Base64Encode(std::string_view bytes) {
  std::string out(4 * ((bytes.size() + 2) / 3), '\0');
  const int n = EVP_EncodeBlock(reinterpret_cast<unsigned char*>(out.data()),
                                reinterpret_cast<const unsigned char*>(bytes.data()),
                                static_cast<int>(bytes.size()));
  out.resize(n);
  return out;
}

std::optional<std::string> Base64Decode(std::string_view text) {
  if (text.empty()) return std::string();  // RFC 4648: BASE64("") = ""
  if (text.size() % 4 != 0) return std::nullopt;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    const bool ok = (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
                    c == '+' || c == '/' || (c == '=' && i >= text.size() - 2);
    if (!ok) return std::nullopt;
  }
  if (text[text.size() - 2] == '=' && text.back() != '=') return std::nullopt;
  std::string out(3 * text.size() / 4, '\0');
  const int n = EVP_DecodeBlock(reinterpret_cast<unsigned char*>(out.data()),
                                reinterpret_cast<const unsigned char*>(text.data()),
                                static_cast<int>(text.size()));
  if (n < 0) return std::nullopt;
  // EVP_DecodeBlock counts padding as zero bytes.
  size_t pad = text.back() == '=' ? (text[text.size() - 2] == '=' ? 2 : 1) : 0;
  out.resize(static_cast<size_t>(n) - pad);
  return out;
}

bool ConstantTimeEquals(std::string_view a, std::string_view b) {
  return a.size() == b.size() && CRYPTO_memcmp(a.data(), b.data(), a.size()) == 0;
}

Result<SignatureVerifier> SignatureVerifier::Make(const std::vector<std::string>& secrets,
                                                  int64_t tolerance_seconds) {
  if (tolerance_seconds < 0) {
    return Status::InvalidArgument("tolerance: must be >= 0 seconds");
  }
  SignatureVerifier v;
  v.tolerance_seconds_ = tolerance_seconds;
  for (size_t i = 0; i < secrets.size(); ++i) {
    const std::string& s = secrets[i];
    const std::string which = "secret #" + std::to_string(i + 1);
    if (s.empty()) return Status::InvalidArgument(which + ": empty");
    if (s.size() < kMinSecretBytes) {
      return Status::InvalidArgument(which + ": shorter than " + std::to_string(kMinSecretBytes) +
                                     " bytes");
    }
    std::shared_ptr<const Key> rr_key = Key::Make(s);
    if (!rr_key) return FromOpenSsl(which);
    v.rr_keys_.push_back(std::move(rr_key));
    if (s.compare(0, kWhsecPrefix.size(), kWhsecPrefix) == 0) {
      std::optional<std::string> key =
          Base64Decode(std::string_view(s).substr(kWhsecPrefix.size()));
      if (!key) return Status::InvalidArgument(which + ": whsec_ secret is not valid base64");
      if (key->size() < kMinSecretBytes) {
        return Status::InvalidArgument(which + ": whsec_ key shorter than " +
                                       std::to_string(kMinSecretBytes) + " bytes");
      }
      std::shared_ptr<const Key> standard_key = Key::Make(*key);
      if (!standard_key) return FromOpenSsl(which);
      v.standard_keys_.push_back(std::move(standard_key));
    }
  }
  if (v.rr_keys_.empty()) return Status::InvalidArgument("secrets: none configured");
  return v;
}

Status SignatureVerifier::Verify(const Headers& headers, std::string_view body, int64_t now_micros,
                                 std::optional<std::string>* webhook_id) const {
  // A header the check reads, sent on two lines: which one was signed is
  // ambiguous. RFC 9110 §5.3 would join them with a comma, which makes
  // X-RR-Signature's second t= malformed anyway; refuse them all alike.
  for (std::string_view name :
       {"X-RR-Signature", "webhook-signature", "webhook-id", "webhook-timestamp"}) {
    if (CountHeader(headers, name) > 1) return Unauthorized(name, "appears more than once");
  }
  if (auto rr = FindHeader(headers, "X-RR-Signature")) {
    return VerifyRr(*rr, body, now_micros);
  }
  if (FindHeader(headers, "webhook-signature")) {
    return VerifyStandard(headers, body, now_micros, webhook_id);
  }
  return Unauthorized("signature", "missing: expected X-RR-Signature or webhook-signature");
}

Status SignatureVerifier::VerifyRr(std::string_view header, std::string_view body,
                                   int64_t now) const {
  constexpr std::string_view kName = "X-RR-Signature";
  std::optional<std::string_view> t_text;
  std::vector<std::string_view> v1;
  bool malformed = false;
  ForEachPart(header, ',', [&](std::string_view part) {
    const size_t eq = part.find('=');
    if (eq == std::string_view::npos) {
      malformed = true;
      return;
    }
    const std::string_view key = part.substr(0, eq), value = part.substr(eq + 1);
    if (key == "t") {
      if (t_text) malformed = true;  // two timestamps: ambiguous
      t_text = value;
    } else if (key == "v1") {
      v1.push_back(value);
    }  // other schemes (v0, v2, ...) are skipped
  });
  if (malformed) return Unauthorized(kName, "malformed header");
  if (!t_text) return Unauthorized(kName, "missing t=");
  std::optional<int64_t> t = ParseSeconds(*t_text);
  if (!t) return Unauthorized(kName, "t= is not a unix timestamp");
  if (v1.empty()) return Unauthorized(kName, "no v1= signature");
  Status st = CheckTolerance(kName, *t, now, tolerance_seconds_);
  if (!st.ok()) return st;

  for (const auto& key : rr_keys_) {
    const std::string expected = ToHex(key->Sign({*t_text, ".", body}));
    for (std::string_view candidate : v1) {
      if (ConstantTimeEquals(expected, candidate)) return Status::OK();
    }
  }
  return Unauthorized(kName, "no v1 signature matches a configured secret");
}

Status SignatureVerifier::VerifyStandard(const Headers& headers, std::string_view body, int64_t now,
                                         std::optional<std::string>* webhook_id) const {
  constexpr std::string_view kName = "webhook-signature";
  auto id = FindHeader(headers, "webhook-id");
  auto ts = FindHeader(headers, "webhook-timestamp");
  auto sig = FindHeader(headers, "webhook-signature");
  if (!id || id->empty()) return Unauthorized("webhook-id", "missing");
  if (!ts) return Unauthorized("webhook-timestamp", "missing");
  std::optional<int64_t> t = ParseSeconds(TrimOws(*ts));
  if (!t) return Unauthorized("webhook-timestamp", "not a unix timestamp");
  if (standard_keys_.empty()) {
    return Unauthorized(kName, "no whsec_ secret is configured for Standard Webhooks");
  }
  Status st = CheckTolerance("webhook-timestamp", *t, now, tolerance_seconds_);
  if (!st.ok()) return st;

  std::vector<std::string_view> v1;
  ForEachPart(*sig, ' ', [&](std::string_view part) {
    if (part.size() > 3 && part.substr(0, 3) == "v1,") v1.push_back(part.substr(3));
  });
  if (v1.empty()) return Unauthorized(kName, "no v1 signature");
  for (const auto& key : standard_keys_) {
    const std::string expected = Base64Encode(key->Sign({*id, ".", TrimOws(*ts), ".", body}));
    for (std::string_view candidate : v1) {
      if (ConstantTimeEquals(expected, candidate)) {
        if (webhook_id) *webhook_id = std::string(*id);
        return Status::OK();
      }
    }
  }
  return Unauthorized(kName, "no v1 signature matches a configured secret");
}

std::string SignRr(std::string_view secret, int64_t unix_seconds, std::string_view body) {
  const std::string t = std::to_string(unix_seconds);
  std::string payload = t + ".";
  payload.append(body);
  return "t=" + t + ",v1=" + ToHex(HmacSha256(secret, payload));
}

std::string SignStandard(std::string_view whsec_secret, std::string_view id, int64_t unix_seconds,
                         std::string_view body) {
  std::string_view encoded = whsec_secret;
  if (encoded.substr(0, kWhsecPrefix.size()) == kWhsecPrefix) {
    encoded.remove_prefix(kWhsecPrefix.size());
  }
  const std::string key = Base64Decode(encoded).value_or("");
  std::string content(id);
  content += "." + std::to_string(unix_seconds) + ".";
  content.append(body);
  return "v1," + Base64Encode(HmacSha256(key, content));
}

}  // namespace eventfold
