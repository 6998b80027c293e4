// eventfold backup --data DIR OUT : a consistent, verified copy of the store
// at DIR written to the new directory OUT (Store::Backup, eventfold/backup.h).
// eventfold restore BACKUP --data DIR : puts a backup back into the new or
// empty directory DIR (RestoreStore), verified; refuses a non-empty DIR.
// eventfold backup --server URL OUT : the same, taken by a running `serve`
// through its admin API (POST /v1/backup; OUT is a directory on the
// server's machine, absolute): the summary printed is the same.
//
// Both print a JSON summary on success. Exit 0 on success, 1 when the
// backup (or the restored store) fails its verification or DIR is not
// empty, 2 on any other error (with --server: 1 when the server refuses
// OUT or its verification fails, 2 when it cannot be reached or refuses the
// token). With --data the command opens DIR itself, so it fails while a
// `serve` holds DIR: back that store up with --server.

#include <iostream>

#include "core/json_writer.h"
#include "eventfold/backup.h"
#include "tools/cli_common.h"
#include "tools/read_views.h"
#include "tools/remote_read.h"

namespace eventfold::cli {
namespace {

int Report(const char* what, const Result<BackupSummary>& r, const std::string& where) {
  if (!r.ok()) {
    std::cerr << "eventfold: " << what << ": " << r.status().ToString() << "\n";
    if (r.status().IsNotFound()) return kExitNotFound;  // no backup there
    const bool refused = r.status().IsCorruption() || r.status().IsInvalidArgument();
    return refused ? kExitRefused : kExitError;
  }
  std::cout << BackupSummaryLine(what, *r, where);
  return kExitOk;
}

int BackupCmd(const std::string& dir, const std::string& out) {
  // OUT first: a refused backup must not open (and recover) the store.
  if (Status st = CheckBackupTarget(dir, out, Options()); !st.ok()) {
    return Report("backup", st, out);
  }
  std::unique_ptr<Store> store = OpenStore(dir, /*create=*/false);
  if (!store) return kExitError;
  return Report("backup", store->maintenance().Backup(out), out);
}

int RestoreCmd(const std::string& backup, const std::string& dir) {
  return Report("restore", RestoreStore(backup, dir, Options()), dir);
}

}  // namespace

void AddBackupCommands(CLI::App* app, Action* action) {
  auto* backup = app->add_subcommand(
      "backup", "write a consistent, verified copy of the store to a new directory OUT");
  auto dir = std::make_shared<std::string>();
  auto out = std::make_shared<std::string>();
  auto server = std::make_shared<std::string>();
  AddDataOption(backup, dir.get());
  AddServerOption(backup, server.get());
  backup
      ->add_option("OUT", *out,
                   "new or empty directory for the backup (with --server: an absolute path on "
                   "the server's machine)")
      ->required()
      ->check(ADirectory("OUT"));
  backup->callback([=] {
    *action = [=] { return server->empty() ? BackupCmd(*dir, *out) : RemoteBackup(*server, *out); };
  });

  auto* restore = app->add_subcommand(
      "restore", "restore a backup into a new or empty --data directory (verified)");
  auto rdir = std::make_shared<std::string>();
  auto from = std::make_shared<std::string>();
  AddDataOption(restore, rdir.get());
  restore->add_option("BACKUP", *from, "a directory `eventfold backup` wrote")
      ->required()
      ->check(ADirectory("BACKUP"));
  restore->callback([=] { *action = [=] { return RestoreCmd(*from, *rdir); }; });
}

}  // namespace eventfold::cli
