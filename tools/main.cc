// The `eventfold` command (SPEC §5): thin subcommands over the library.

#include <iostream>

#include "tools/cli_common.h"

int main(int argc, char** argv) {
  using namespace eventfold::cli;
  CLI::App app{"eventfold: an embedded event store for webhook receivers"};
  app.require_subcommand(1);
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
  AddBackupCommands(&app, &action);
  AddRepairCommand(&app, &action);
  try {
    app.parse(argc, argv);
  } catch (const CLI::Success& e) {
    return app.exit(e);  // --help
  } catch (const CLI::ParseError& e) {
    app.exit(e);
    return kExitError;
  }
  return action ? action() : kExitError;
}
