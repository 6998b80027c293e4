#include "tools/secrets.h"

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>

namespace eventfold::cli {

Result<std::vector<std::string>> CollectSecrets(const std::vector<std::string>& flags,
                                                const std::vector<std::string>& files) {
  std::vector<std::string> secrets = flags;
  for (const std::string& path : files) {
    std::ifstream in(path);
    if (!in) {
      // The stream's open() left errno saying why (libstdc++ opens with
      // open(2)); read at start-up, before any thread could change it.
      return Status::IOError("cannot read secret file " + path + ": " + std::strerror(errno));
    }
    std::string line;
    while (std::getline(in, line)) {
      while (!line.empty() && (line.back() == '\r' || line.back() == ' ')) line.pop_back();
      if (line.empty() || line[0] == '#') continue;
      secrets.push_back(line);
    }
  }
  if (const char* env = std::getenv(kSecretsEnv)) {
    std::istringstream words(env);
    std::string s;
    while (words >> s) secrets.push_back(s);
  }
  return secrets;
}

}  // namespace eventfold::cli
