// Where the command line finds signing secrets: --secret, --secret-file (one
// per line, blank lines and #comments skipped; a file holding none is
// refused) and EVENTFOLD_SECRETS (whitespace-separated). Secrets are never
// printed.

#ifndef EVENTFOLD_TOOLS_SECRETS_H_
#define EVENTFOLD_TOOLS_SECRETS_H_

#include <string>
#include <vector>

#include "eventfold/status.h"

namespace eventfold::cli {

inline constexpr const char* kSecretsEnv = "EVENTFOLD_SECRETS";

Result<std::vector<std::string>> CollectSecrets(const std::vector<std::string>& flags,
                                                const std::vector<std::string>& files);

}  // namespace eventfold::cli

#endif  // EVENTFOLD_TOOLS_SECRETS_H_
