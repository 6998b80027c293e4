#include "core/sha256.h"

#include <openssl/evp.h>
#include <openssl/sha.h>

#include <memory>

namespace eventfold {

std::string ToHex(std::string_view bytes) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out;
  out.reserve(bytes.size() * 2);
  for (const char ch : bytes) {
    const auto c = static_cast<unsigned char>(ch);
    out.push_back(kHex[c >> 4]);
    out.push_back(kHex[c & 0xF]);
  }
  return out;
}

std::string Sha256(std::string_view data) {
  // SHA256() looks the algorithm up on every call (OpenSSL 3: EVP_Q_digest
  // fetches it), which doubled the cost of hashing a 735-byte body (1.06 µs
  // against 0.63 µs here). Fetched once, immutable, shared by every thread,
  // and kept for the process's life like OpenSSL's own tables.
  static EVP_MD* const sha256 = EVP_MD_fetch(nullptr, "SHA256", nullptr);
  // One digest context per thread, initialised again for each digest:
  // EVP_Digest makes and frees a context on every call.
  thread_local const std::unique_ptr<EVP_MD_CTX, decltype(&EVP_MD_CTX_free)> ctx(EVP_MD_CTX_new(),
                                                                                 &EVP_MD_CTX_free);
  std::string digest(SHA256_DIGEST_LENGTH, '\0');
  auto* out = reinterpret_cast<unsigned char*>(digest.data());
  unsigned int size = 0;
  if (sha256 == nullptr || ctx == nullptr || EVP_DigestInit_ex2(ctx.get(), sha256, nullptr) != 1 ||
      EVP_DigestUpdate(ctx.get(), data.data(), data.size()) != 1 ||
      EVP_DigestFinal_ex(ctx.get(), out, &size) != 1) {
    SHA256(reinterpret_cast<const unsigned char*>(data.data()), data.size(), out);
  }
  return digest;
}

std::string Sha256Hex(std::string_view data) { return ToHex(Sha256(data)); }

}  // namespace eventfold
