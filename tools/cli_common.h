// Shared pieces of the `eventfold` command: exit codes, store opening, and
// the registration hook every subcommand file provides.

#ifndef EVENTFOLD_TOOLS_CLI_COMMON_H_
#define EVENTFOLD_TOOLS_CLI_COMMON_H_

#include <CLI/CLI.hpp>
#include <functional>
#include <memory>
#include <string>

#include "eventfold/store.h"

namespace eventfold::cli {

// SPEC §5 exit codes.
inline constexpr int kExitOk = 0;
inline constexpr int kExitRefused = 1;  // some input refused or a check failed
inline constexpr int kExitError = 2;    // usage or storage error

// The store directory every command takes.
inline constexpr const char* kDefaultDataDir = "eventfold-data";

// A subcommand's body runs after parsing and returns the exit code.
using Action = std::function<int()>;

// Adds `--data DIR` to `cmd`, bound to `dir`.
void AddDataOption(CLI::App* cmd, std::string* dir);

// Opens the store at `dir`; prints the reason to stderr on failure.
// `create` allows creating it (with `profile_file`'s profile when given).
std::unique_ptr<Store> OpenStore(const std::string& dir, bool create,
                                 const std::string& profile_file = "");

// Subcommand registration; each sets `*action` when its command is chosen.
void AddIngestCommand(CLI::App* app, Action* action);
void AddShowCommand(CLI::App* app, Action* action);
void AddListCommand(CLI::App* app, Action* action);
void AddLogCommand(CLI::App* app, Action* action);
void AddReplayCommand(CLI::App* app, Action* action);
void AddDemoCommand(CLI::App* app, Action* action);
void AddServeCommand(CLI::App* app, Action* action);
void AddRefusedCommand(CLI::App* app, Action* action);
void AddStatusCommand(CLI::App* app, Action* action);
void AddFeedCommand(CLI::App* app, Action* action);
void AddCheckCommand(CLI::App* app, Action* action);
void AddSubscriptionsCommand(CLI::App* app, Action* action);
void AddDlqCommand(CLI::App* app, Action* action);
void AddGcCommand(CLI::App* app, Action* action);
void AddBackupCommands(CLI::App* app, Action* action);  // backup, restore
void AddRepairCommand(CLI::App* app, Action* action);

}  // namespace eventfold::cli

#endif  // EVENTFOLD_TOOLS_CLI_COMMON_H_
