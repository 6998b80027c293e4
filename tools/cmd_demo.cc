#include "tools/cli_common.h"

namespace eventfold::cli {
void AddDemoCommand(CLI::App*, Action*) {}
}  // namespace eventfold::cli
