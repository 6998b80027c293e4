// The `eventfold` command (docs/SPEC.md §5): thin subcommands over the library.

#include <cstdio>
#include <iostream>
#include <string>

#include "tools/cli_common.h"

int main(int argc, char** argv) {
  using namespace eventfold::cli;
  CLI::App app{"eventfold: an embedded event store for webhook receivers"};
  // No command (or `help`): the command list, not an error.
  app.require_subcommand(0, 1);
  app.add_subcommand("help", "print this command list");
  Action action;
  AddIngestCommand(&app, &action);
  AddShowCommand(&app, &action);
  AddListCommand(&app, &action);
  AddLogCommand(&app, &action);
  AddReplayCommand(&app, &action);
  AddDemoCommand(&app, &action);
  AddServeCommand(&app, &action);
  AddRefusedCommand(&app, &action);
  AddStatusCommand(&app, &action);
  AddFeedCommand(&app, &action);
  AddCheckCommand(&app, &action);
  AddSubscriptionsCommand(&app, &action);
  AddDlqCommand(&app, &action);
  AddGcCommand(&app, &action);
  AddClusterCommand(&app, &action);
  AddFoldCommand(&app, &action);
  AddMigrateCommand(&app, &action);
  AddUnroutedCommand(&app, &action);
  AddBackupCommands(&app, &action);
  AddRepairCommand(&app, &action);
  ReadIntegersAsDecimal(&app);
  if (const std::string error = UnknownCommandError(app, argc, argv); !error.empty()) {
    std::cerr << error << "\n";
    return kExitError;
  }
  try {
    app.parse(argc, argv);
  } catch (const CLI::Success& e) {
    return app.exit(e);  // --help
  } catch (const CLI::ParseError& e) {
    app.exit(e);
    return kExitError;
  }
  if (!action) {  // no command, or `help`
    // The formatter directly: app.help() would describe the `help` command.
    std::cout << app.get_formatter()->make_help(&app, "eventfold", CLI::AppFormatMode::Normal);
    return kExitOk;
  }
  int rc = action();
  // Output that did not reach its file (a full disk, say) is a failure, not
  // a success with less output.
  std::cout.flush();
  if (!std::cout || std::ferror(stdout) != 0 || std::fflush(stdout) != 0) {
    std::cerr << "eventfold: writing the command's output failed\n";
    if (rc == kExitOk) rc = kExitError;
  }
  return rc;
}
