// SHA-256 and hex helpers over OpenSSL; the one place OpenSSL's digest API is used.

#ifndef EVENTFOLD_CORE_SHA256_H_
#define EVENTFOLD_CORE_SHA256_H_

#include <string>
#include <string_view>

namespace eventfold {

// Lower-case hex of SHA-256(data).
std::string Sha256Hex(std::string_view data);

// SHA-256(data) as its 32 raw bytes.
std::string Sha256(std::string_view data);

// Lower-case hex of arbitrary bytes.
std::string ToHex(std::string_view bytes);

}  // namespace eventfold

#endif  // EVENTFOLD_CORE_SHA256_H_
