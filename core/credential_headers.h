// Which header names carry credentials, so that kept refusals (the store's
// quarantine, cluster mode's refused stream) never hold them. Pure function.

#ifndef EVENTFOLD_CORE_CREDENTIAL_HEADERS_H_
#define EVENTFOLD_CORE_CREDENTIAL_HEADERS_H_

#include <cctype>
#include <string>
#include <string_view>

namespace eventfold {

// True when `name`, in any case, contains a credential word ("signature",
// "authorization", "token", ...).
inline bool IsCredentialHeader(std::string_view name) {
  std::string lower(name);
  for (char& c : lower) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  for (std::string_view word :
       {"signature", "secret", "authorization", "cookie", "token", "api-key", "apikey"}) {
    if (lower.find(word) != std::string::npos) return true;
  }
  return false;
}

}  // namespace eventfold

#endif  // EVENTFOLD_CORE_CREDENTIAL_HEADERS_H_
