// The read commands against a running `eventfold serve` (its admin listener,
// tools/admin_api.h) instead of a store directory: `--server URL`, with the
// bearer token from EVENTFOLD_TOKEN. Each prints exactly what the command
// prints with --data and returns the same exit code for the same outcome
// (1 when the entity has no events, 2 for any other failure, including an
// unreachable server or a refused token).
//
// Thread-safety: none needed; one command runs per process.

#ifndef EVENTFOLD_TOOLS_REMOTE_READ_H_
#define EVENTFOLD_TOOLS_REMOTE_READ_H_

#include <CLI/CLI.hpp>
#include <cstdint>
#include <string>

namespace eventfold::cli {

// The environment variable holding the admin API's bearer token.
inline constexpr const char* kTokenEnv = "EVENTFOLD_TOKEN";

// Adds `--server URL` to `cmd` (after its --data, which it excludes).
void AddServerOption(CLI::App* cmd, std::string* server);

// show and log: one JSON document (a projection, an entity's log) into
// `json`, without the newline the API ends it with, for the caller to print
// as --data does (PrintJson, --pretty included).
int RemoteProjection(const std::string& server, const std::string& entity, const std::string& id,
                     std::string* json);
int RemoteList(const std::string& server, const std::string& entity);
int RemoteLog(const std::string& server, const std::string& entity, const std::string& id,
              std::string* json);
int RemoteStatus(const std::string& server);
int RemoteRefused(const std::string& server);
int RemoteSubscriptions(const std::string& server);
// `eventfold backup --server URL OUT`: the server takes an online backup
// into OUT (a directory on its machine) and the command prints its summary;
// 1 when the server refuses OUT (not absolute, not empty) or the backup
// fails its verification, 2 for any other failure.
int RemoteBackup(const std::string& server, const std::string& out);
// Changes from seq `from` on; with `follow`, long-polls for new ones until
// the process is stopped.
int RemoteFeed(const std::string& server, uint64_t from, bool follow);

}  // namespace eventfold::cli

#endif  // EVENTFOLD_TOOLS_REMOTE_READ_H_
