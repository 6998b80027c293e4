// eventfold ingest --data DIR [--profile FILE] [FILE|-]

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <future>
#include <iostream>
#include <limits>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "core/envelope.h"
#include "core/json_writer.h"
#include "core/signature.h"
#include "core/start_thread.h"
#include "eventfold/quarantine.h"
#include "tools/cli_common.h"
#include "tools/line_batch.h"
#include "tools/prefetch.h"
#include "tools/secrets.h"

namespace eventfold::cli {
namespace {

struct Tally {
  uint64_t accepted = 0, duplicate = 0, conflict = 0, invalid = 0, unauthorized = 0;
  uint64_t storage_error = 0;       // lines not stored: the run stops and exits 2
  std::string first_storage_error;  // the reason of the first of them
};

// Storage errors of consecutive lines with the same reason, printed as one
// range: a full disk fails a whole batch of 1,000 lines alike.
class StorageErrorRun {
 public:
  // Adds `line_no`'s error; prints the run before it when it cannot join.
  void Add(size_t line_no, const IngestResult& r) {
    if (count_ > 0 && (line_no != last_ + 1 || r.message != message_)) Flush();
    if (count_ == 0) {
      first_ = line_no;
      status_ = r.http_status();
      message_ = r.message;
    }
    last_ = line_no;
    ++count_;
  }
  void Flush() {
    if (count_ == 0) return;
    std::cerr << (count_ == 1 ? "line " + std::to_string(first_)
                              : "lines " + std::to_string(first_) + "-" + std::to_string(last_))
              << ": " << OutcomeName(Outcome::kStorageError) << " (" << status_ << "): " << message_
              << "\n";
    count_ = 0;
  }

 private:
  size_t first_ = 0, last_ = 0, count_ = 0;
  int status_ = 0;
  std::string message_;
};

void Report(size_t line_no, const IngestResult& r, Tally* t, StorageErrorRun* run) {
  if (r.outcome != Outcome::kStorageError) run->Flush();
  switch (r.outcome) {
    case Outcome::kAccepted:
      ++t->accepted;
      return;
    case Outcome::kDuplicate:
      ++t->duplicate;
      return;
    case Outcome::kConflict:
      ++t->conflict;
      break;
    case Outcome::kUnauthorized:
      ++t->unauthorized;
      break;
    case Outcome::kStorageError:
      if (t->storage_error++ == 0) t->first_storage_error = r.message;
      return run->Add(line_no, r);
    default:
      ++t->invalid;
      break;  // invalid, too large
  }
  std::cerr << "line " << line_no << ": " << OutcomeName(r.outcome) << " (" << r.http_status()
            << "): " << r.message << "\n";
}

struct IngestArgs {
  std::string dir, profile, input;
  std::vector<std::string> secrets, secret_files;
  int64_t tolerance = 300;
};

// A batch written unsynced, with the sync started behind it: its lines'
// results count, and are reported, once that sync returns.
struct WrittenBatch {
  LineBatch lines;
  std::vector<IngestResult> results;
  std::future<Status> synced;  // not valid when nothing was written
  std::thread sync_thread;     // joined by Settle; not joinable without one
};

// Starts store.Sync() on `*thread`, so that the next batch is staged and
// written while it runs. When the system refuses the thread, the sync runs
// here, before the next batch is read: slower, and the same lines reported.
std::future<Status> SyncBehind(Store& store, std::thread* thread) {
  auto done = std::make_shared<std::promise<Status>>();
  std::future<Status> synced = done->get_future();
  const auto sync = [&store, done] { done->set_value(store.Sync()); };
  if (!StartThread(thread, "the ingest's sync", sync).ok()) sync();  // refused: here
  return synced;
}

bool AnyStorageError(const std::vector<IngestResult>& results) {
  for (const IngestResult& r : results) {
    if (r.outcome == Outcome::kStorageError) return true;
  }
  return false;
}

// Waits for `b`'s sync and reports its lines in order: the refusals made
// while reading, then the store's results. When the sync failed, what the
// store decided against its stored state (accepted, duplicate, conflict)
// may not be on disk: those lines are storage errors.
void Settle(WrittenBatch& b, Store& store, Tally* tally) {
  const Status synced = b.synced.valid() ? b.synced.get() : Status::OK();
  if (b.sync_thread.joinable()) b.sync_thread.join();
  StorageErrorRun run;
  for (LineRefusal& r : b.lines.refusals) {
    Report(r.line_no, r.result, tally, &run);
    if (r.quarantine) (void)store.quarantine().Add(std::move(*r.quarantine));
  }
  for (size_t i = 0; i < b.results.size(); ++i) {
    IngestResult& r = b.results[i];
    if (!synced.ok() && (r.outcome == Outcome::kAccepted || r.outcome == Outcome::kDuplicate ||
                         r.outcome == Outcome::kConflict)) {
      r.outcome = Outcome::kStorageError;
      r.message = "storage: " + synced.message();
    }
    Report(b.lines.line_numbers[i], r, tally, &run);
  }
  run.Flush();
}

int Run(const IngestArgs& args) {
  const std::string& dir = args.dir;
  const std::string& input = args.input;
  std::optional<SignatureVerifier> verifier;
  if (!args.secrets.empty() || !args.secret_files.empty()) {
    Result<std::vector<std::string>> secrets = CollectSecrets(args.secrets, args.secret_files);
    if (!secrets.ok()) {
      std::cerr << "eventfold: " << secrets.status().message() << "\n";
      return kExitError;
    }
    Result<SignatureVerifier> v = SignatureVerifier::Make(*secrets, args.tolerance);
    if (!v.ok()) {
      std::cerr << "eventfold: " << v.status().message() << "\n";
      return kExitError;
    }
    verifier = std::move(*v);
  }
  std::ifstream file;
  std::istream* in = &std::cin;
  if (!input.empty() && input != "-") {
    std::error_code ec;
    if (std::filesystem::is_directory(input, ec)) {
      std::cerr << "eventfold: " << input << " is a directory; ingest reads an NDJSON file\n";
      return kExitError;
    }
    file.open(input, std::ios::binary);
    if (!file) {
      std::cerr << "eventfold: cannot read " << input << ": " << std::strerror(errno) << "\n";
      return kExitError;
    }
    in = &file;
  }
  // Buffered: each batch is synced by Store::Sync behind its write (below).
  // No table of recent bodies (Options::recent_events): it answers a
  // sender's retry without a database read, but here it starts empty and
  // ends with the file, so it only ever catches a line repeated within one
  // run, and filling a fresh 24 MiB table cost more than it saved (on
  // 200k-line files: 10-15% fewer lines a second with it, and no faster
  // with 30% of the lines repeated nearby; docs/BENCHMARKS.md).
  std::unique_ptr<Store> store =
      OpenStore(dir, /*create=*/true, args.profile, Durability::kBuffered, /*recent_events=*/0);
  if (!store) return kExitError;
  // An existing store keeps its profile; ingesting under another one would
  // store events its projections never show. Switching is replay's job.
  if (const StoreStats stats = store->Stats(); stats.profile_stale) {
    std::cerr << "eventfold: the store at " << dir << " routes and folds with profile \""
              << stats.profile_name << "\", not " << args.profile
              << "; nothing was ingested. To switch it (see what changes first with --dry-run):\n"
              << "  eventfold replay --data " << dir << " --profile " << args.profile << "\n";
    return kExitError;
  }

  // Lines are read, parsed and verified a batch ahead, on a thread of their
  // own, while this one writes and syncs the batch before.
  Prefetch<LineBatch> batches([&, line_no = size_t{0}]() mutable -> std::optional<LineBatch> {
    return ReadBatch(*in, verifier, &line_no);
  });
  // Each batch is one atomic write and one sync, as a synced IngestBatch
  // would make it, but the sync runs on a thread of its own while this one
  // stages and writes the next batch; a batch is reported only after its
  // sync, so every line reported stored is on disk.
  //
  // The first batch the store could not write or sync stops the run: the
  // store refuses writes until it recovers, and every further line would
  // be one more storage error. Lines after that batch are not stored.
  Tally tally;
  std::optional<WrittenBatch> behind;  // written, its sync running
  size_t stopped_after = 0;            // the last line read, when stopped
  while (std::optional<LineBatch> batch = batches.Next()) {
    WrittenBatch written{std::move(*batch), {}, {}, {}};
    if (!written.lines.deliveries.empty()) {
      written.results = store->IngestBatch(written.lines.deliveries);
      written.synced = SyncBehind(*store, &written.sync_thread);
    }
    if (behind) Settle(*behind, *store, &tally);
    const bool failed = tally.storage_error > 0 || AnyStorageError(written.results);
    const size_t last_line = written.lines.last_line;
    behind = std::move(written);
    if (failed) {
      stopped_after = last_line;
      break;
    }
  }
  if (behind) Settle(*behind, *store, &tally);

  // Accepted, but in no entity's log: this run is the store's only writer.
  const uint64_t unrouted = store->counters().unrouted;
  JsonWriter w;
  w.BeginObject()
      .Key("accepted")
      .Uint(tally.accepted)
      .Key("duplicate")
      .Uint(tally.duplicate)
      .Key("conflict")
      .Uint(tally.conflict)
      .Key("invalid")
      .Uint(tally.invalid)
      .Key("unauthorized")
      .Uint(tally.unauthorized);
  // Only when there are some: the SPEC §5 summary is unchanged otherwise.
  if (unrouted > 0) w.Key("unrouted").Uint(unrouted);
  if (tally.storage_error > 0) w.Key("storage_error").Uint(tally.storage_error);
  if (stopped_after > 0) w.Key("stopped_after_line").Uint(stopped_after);
  w.EndObject();
  std::cout << w.str() << "\n";
  if (unrouted > 0) {
    std::cerr << "eventfold: " << unrouted << " accepted event" << (unrouted == 1 ? " is" : "s are")
              << " unrouted: stored, but profile \"" << store->profile()->name()
              << "\" routes no entity for " << (unrouted == 1 ? "its type" : "their types")
              << " (`eventfold unrouted` lists them)\n";
  }
  if (stopped_after > 0) {
    std::cerr << "eventfold: stopped after line " << stopped_after << ": the store could not store "
              << "a batch (" << tally.first_storage_error << "); no line after it was stored. "
              << "Once the disk is fixed, run the same command again: the lines already stored "
              << "are answered duplicate.\n";
    // The read-ahead may be waiting for lines that have not come, from a
    // pipe whose writer keeps it open, and a read of an istream cannot be
    // interrupted; this run reads no more. So, once the store is closed and
    // the output flushed, the process ends without waiting for it.
    store.reset();
    std::cout.flush();
    std::cerr.flush();
    std::_Exit(kExitError);
  }
  if (tally.storage_error > 0) return kExitError;
  return tally.conflict + tally.invalid + tally.unauthorized > 0 ? kExitRefused : kExitOk;
}

}  // namespace

void AddIngestCommand(CLI::App* app, Action* action) {
  auto* cmd = app->add_subcommand("ingest", "store NDJSON deliveries (bodies or envelopes)");
  auto a = std::make_shared<IngestArgs>();
  AddDataOption(cmd, &a->dir);
  cmd->add_option("--profile", a->profile,
                  "profile file for a new store; on an existing store with another profile, "
                  "refused (switch with replay --profile)");
  // One value per flag, so `--secret S FILE` leaves FILE to the input.
  cmd->add_option("--secret", a->secrets,
                  "signing secret; every line must then be a signed envelope")
      ->allow_extra_args(false);
  cmd->add_option("--secret-file", a->secret_files, "file of secrets, one per line")
      ->allow_extra_args(false);
  cmd->add_option("--tolerance", a->tolerance, "signature timestamp window, seconds")
      ->capture_default_str()
      ->check(WithinRange(0, std::numeric_limits<int64_t>::max()));
  cmd->add_option("input", a->input, "NDJSON file, or - for standard input (default)");
  cmd->callback([=] { *action = [=] { return Run(*a); }; });
}

}  // namespace eventfold::cli
