// Shared pieces of the `eventfold` command: exit codes, store opening, and
// the registration hook every subcommand file provides.

#ifndef EVENTFOLD_TOOLS_CLI_COMMON_H_
#define EVENTFOLD_TOOLS_CLI_COMMON_H_

#include <CLI/CLI.hpp>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "eventfold/store.h"

namespace eventfold::cli {

// docs/SPEC.md §5.1 exit codes.
inline constexpr int kExitOk = 0;
inline constexpr int kExitRefused = 1;  // some input refused or a check failed
inline constexpr int kExitError = 2;    // usage or storage error
// What was asked for (an entity, a subscription, a dead letter) does not
// exist: the same code in every command. A missing store is a usage error.
inline constexpr int kExitNotFound = 1;

// The store directory every command takes.
inline constexpr const char* kDefaultDataDir = "eventfold-data";

// A subcommand's body runs after parsing and returns the exit code.
using Action = std::function<int()>;

// A progress line on stderr: redrawn in place on a terminal; otherwise a
// plain line at most every 5 s (logs stay readable), and always a final
// one. Not thread-safe: one caller at a time.
class ProgressLine {
 public:
  // `first_at_once`: off a terminal, the first line shows at once instead
  // of 5 s into the work.
  explicit ProgressLine(bool first_at_once);

  // Shows `text`, `seconds` into the work; a `final` one always shows.
  void Show(double seconds, bool final, const std::string& text);

  // Ends the line a terminal was left on, if any.
  void End();

 private:
  const bool tty_;
  double shown_at_;
  bool open_ = false;
};

// Adds `--data DIR` to `cmd`, bound to `dir`.
void AddDataOption(CLI::App* cmd, std::string* dir);

// Refuses an empty value (a usage error, exit 2): "<name> wants a
// directory, got an empty path".
CLI::Validator ADirectory(const std::string& name);

// An option's check that its value is not negative. CLI11 reads "-1" into
// an unsigned option as 2^64 - 1, and its own NonNegativeNumber names the
// largest double as the range's end; this says what is wrong in words.
CLI::Validator NotNegative();

// An integer option's check that its value lies within [min, max]: a
// value CLI11 would take but the command cannot use is a usage error
// (exit 2) named by the option, before the command does anything.
CLI::Validator WithinRange(int64_t min, int64_t max);

// Makes every integer option of `app` and its subcommands, however deep,
// read its value in decimal. CLI11 reads integers with strtoll's base 0, so
// `feed --from 010` started at seq 8 and `dlq drop --seq 010` dropped dead
// letter 8; leading zeros are now dropped ("010" is 10), and anything but
// an optional sign and decimal digits (a 0x prefix, "1e3") is a usage
// error: "--from: must be a decimal integer, got "1e3"". Call it once every option is added: it
// runs after each option's own checks, which read decimal too (WithinRange, NotNegative).
void ReadIntegersAsDecimal(CLI::App* app);

// The usage error (without "\n") for a command word of `argv` that names no
// command, found before CLI11 parses: CLI11 says "A subcommand is required"
// for `eventfold dlq frob` and "The following argument was not expected"
// for `eventfold frob`, calling frob no command. From the top, each word
// where `app` or the command group it named expects a command must name
// one: "eventfold dlq: unknown command 'frob'; the commands are: list,
// retry, drop". A group that requires a command and is given none says
// which it takes. Empty when the command words are fine (an option where a
// command is expected, --help say, is left to CLI11).
std::string UnknownCommandError(const CLI::App& app, int argc, const char* const* argv);

// Whether `dir` holds a store (its CURRENT file) or a backup or restore that
// did not finish (kUnfinishedCopyFile: opening it says so); false too when
// that cannot be told (no permission): opening it then says why.
bool HasStore(const std::string& dir);

// Opens the store at `dir`; prints the reason to stderr on failure.
// A fold worker's directory (partition stores DIR/p<k>, no store of its
// own) is refused, naming its partition stores, even with `create`.
// `create` allows creating it (with `profile_file`'s profile when given);
// `recent_events` is Options::recent_events.
std::unique_ptr<Store> OpenStore(const std::string& dir, bool create,
                                 const std::string& profile_file = "",
                                 Durability durability = Durability::kSync,
                                 size_t recent_events = Options().recent_events);

// Explains on stderr why `entity`/`id` has no projection: the profile has
// no such entity type, or stored events that name the id are unrouted.
void ExplainNoProjection(Store* store, const std::string& entity, const std::string& id);

// Prints `json` as is, or indented two spaces per level when `pretty`.
void PrintJson(const std::string& json, bool pretty);

// k, when `name` is that of a fold worker's partition directory, p<k>.
std::optional<int> PartitionNumber(std::string_view name);

// The names (p<k>, in partition order) of the partition stores in `dir`
// that hold a store (a CURRENT file), stale and standby copies included,
// without a note on stderr; empty when there are none or `dir` cannot be
// listed. OpenStore names them when `dir` is a fold worker's directory
// instead of a store.
std::vector<std::string> PartitionStoreNames(const std::string& dir);

// The partition stores of a fold worker's directory (docs/CLUSTER.md:
// DIR/p<k> is partition k's store), in partition order, when `dir` is not a
// store itself but holds such stores; empty otherwise (a plain store, or
// nothing). A store marked stale (DIR/p<k>.stale: the worker lost or gave
// away partition k, or did not take it back when it started again; another
// worker may have moved past it) or a standby copy
// (DIR/p<k>.standby: kept warm, owned by another worker) is skipped, with a
// note on stderr. Read commands given such a directory answer over the rest.
// With `behind_too`, those are listed as well, without a note (a migration
// must reach every store a worker may open again). A p<k> directory that
// holds files but no CURRENT is never listed: it is named on stderr, and
// added to `*incomplete` when given.
std::vector<std::string> PartitionStoreDirs(const std::string& dir, bool behind_too = false,
                                            std::vector<std::string>* incomplete = nullptr);

// A line of one partition store's JSON answer with the partition named
// first: `{"a":1}` from DIR/p3 becomes `{"partition":3,"a":1}`. The feed and
// subscription commands use it over a worker directory, where every
// partition store has its own change seq numbers.
std::string WithPartition(const std::string& partition_dir, const std::string& json_object);

// The stores a read command answers from: the store at `dir`, or every
// partition store of a worker directory. Empty (the reason printed) when
// one cannot be opened.
std::vector<std::unique_ptr<Store>> OpenStoresForRead(const std::string& dir);

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
void AddClusterCommand(CLI::App* app, Action* action);  // cmd_cluster.cc
void AddFoldCommand(CLI::App* app, Action* action);
void AddMigrateCommand(CLI::App* app, Action* action);
void AddUnroutedCommand(CLI::App* app, Action* action);
void AddBackupCommands(CLI::App* app, Action* action);  // backup, restore
void AddRepairCommand(CLI::App* app, Action* action);

}  // namespace eventfold::cli

#endif  // EVENTFOLD_TOOLS_CLI_COMMON_H_
