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
    size_t lines = 0;
    const size_t before = secrets.size();
    while (std::getline(in, line)) {
      ++lines;
      while (!line.empty() && (line.back() == '\r' || line.back() == ' ')) line.pop_back();
      if (line.empty() || line[0] == '#') continue;
      secrets.push_back(line);
    }
    // Named here: `ingest` went on verifying against no secret of it, and
    // `serve` asked for a --secret-file it had been given.
    if (secrets.size() == before) {
      return Status::InvalidArgument(
          "secret file " + path + " holds no secret: " +
          (lines == 0 ? std::string("it is empty") : "each of its lines is blank or a # comment"));
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
