// eventfold ingest --data DIR [--profile FILE] [FILE|-]

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <future>
#include <iostream>
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
#include "tools/prefetch.h"
#include "tools/secrets.h"

namespace eventfold::cli {
namespace {

// Lines per IngestBatch: one atomic write and one sync each.
constexpr size_t kBatchLines = 1000;
// A batch also ends after the line that takes what it holds (its bodies,
// and what it keeps of refused lines: a quarantine's share) to this many
// bytes. Webhook bodies (under 1 KiB, typically) fill 1,000 lines long
// before it; bodies near the store's limit (Options::max_body_bytes, 1 MiB)
// would make a 1,000-line batch a 1 GiB write, held as the batch, again in
// LevelDB's write batch and memtable (a 180 MB file of 900 KB bodies peaked
// at 549 MB), and replayed whole from LevelDB's log by the next open.
constexpr size_t kBatchBytes = 8 << 20;
// The longest line read whole. A longer one (a body over the store's limit,
// or a file that is not NDJSON at all) is refused as too large while it is
// read: its first kept bytes go to the quarantine, the rest is skipped, so
// no line costs more memory than this. An envelope line carries its body
// JSON-escaped, which can take several times the body's bytes.
constexpr size_t kMaxLineBytes = 8 << 20;

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

// With secrets, every line must be a signed envelope: the receiver's check.
Status VerifyLine(const SignatureVerifier& verifier, bool envelope, const Delivery& d) {
  if (!envelope) {
    return Status::InvalidArgument(
        "signature: with --secret every line must be an envelope with headers");
  }
  return verifier.Verify(d.headers, d.body, SystemClock()->NowMicros(), nullptr);
}

// A line refused before ingest (unparseable, or its signature fails): the
// receiver's 400 or 401, and what the quarantine keeps of it.
struct LineRefusal {
  size_t line_no = 0;
  IngestResult result;
  std::optional<RefusedDelivery> quarantine;
};

// Up to kBatchLines lines and kBatchBytes: the deliveries, and the lines
// refused while reading them (reported before the batch's results, in line
// order).
struct LineBatch {
  std::vector<Delivery> deliveries;
  std::vector<size_t> line_numbers;
  std::vector<LineRefusal> refusals;
  size_t last_line = 0;  // the input's last line read into this batch
  size_t bytes = 0;      // the deliveries' bodies and what the refusals keep

  bool Full() const {
    return deliveries.size() + refusals.size() >= kBatchLines || bytes >= kBatchBytes;
  }
  void Add(Delivery d, size_t line_no) {
    bytes += d.body.size();
    deliveries.push_back(std::move(d));
    line_numbers.push_back(line_no);
  }
  // Keeps of `quarantine` what the quarantine would (its body's first
  // kQuarantineBodyBytes), not the whole line until the batch is settled.
  void Refuse(size_t line_no, Outcome outcome, std::string message,
              std::optional<RefusedDelivery> quarantine) {
    LineRefusal& r = refusals.emplace_back();
    r.line_no = line_no;
    r.result.outcome = outcome;
    r.result.message = std::move(message);
    if (quarantine) {
      std::string& prefix = quarantine->body_prefix;
      if (quarantine->body_bytes == 0) quarantine->body_bytes = prefix.size();
      if (prefix.size() > kQuarantineBodyBytes) {
        prefix.resize(kQuarantineBodyBytes);
        prefix.shrink_to_fit();
      }
      bytes += prefix.size() + r.result.message.size();
      for (const auto& [name, value] : quarantine->headers) bytes += name.size() + value.size();
    }
    r.quarantine = std::move(quarantine);
  }
};

// Reads one line of `in` into *line, without its '\n'; false at the end of
// the input. Keeps at most `max` bytes of it: a longer line is read to its
// end and *length says how long it was (otherwise line->size()).
// (std::getline would hold the whole line, whatever its length.)
bool ReadLine(std::istream& in, size_t max, std::string* line, size_t* length) {
  line->clear();
  *length = 0;
  char chunk[64 * 1024];
  for (bool first = true;; first = false) {
    in.getline(chunk, sizeof chunk);
    if (in.bad()) return false;  // a read error ends the input, as for std::getline
    const auto got = static_cast<size_t>(in.gcount());  // with the '\n', when read
    const bool eof = in.eof();
    if (eof && got == 0 && first) return false;
    // The chunk filled before the line's end: failbit without eofbit.
    const bool more = in.fail() && !eof;
    const size_t chars = more || eof ? got : got - 1;
    *length += chars;
    if (line->size() < max) line->append(chunk, std::min(chars, max - line->size()));
    if (!more) return true;
    in.clear();
  }
}

// Reads lines from `in` until a batch is full (LineBatch::Full) or the
// input ends; nullopt at the end with nothing read. `line_no` is the last
// line read.
std::optional<LineBatch> ReadBatch(std::istream& in,
                                   const std::optional<SignatureVerifier>& verifier,
                                   size_t* line_no) {
  LineBatch batch;
  batch.deliveries.reserve(kBatchLines);
  batch.line_numbers.reserve(kBatchLines);
  std::string line;
  size_t length = 0;
  while (!batch.Full() && ReadLine(in, kMaxLineBytes, &line, &length)) {
    ++*line_no;
    if (length > kMaxLineBytes) {
      const std::string reason = "line: " + std::to_string(length) +
                                 " bytes exceeds the limit of " + std::to_string(kMaxLineBytes);
      RefusedDelivery r;
      r.outcome = Outcome::kTooLarge;
      r.reason = reason;
      r.body_bytes = length;
      r.body_prefix = std::move(line);
      line.clear();
      batch.Refuse(*line_no, Outcome::kTooLarge, reason, std::move(r));
      continue;
    }
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.find_first_not_of(" \t") == std::string::npos) continue;
    // Read before the line's bytes move into the delivery.
    const bool envelope = verifier && IsEnvelope(line);
    Result<Delivery> d = ParseNdjsonLine(std::move(line));
    if (!d.ok()) {
      // An envelope the line check refuses never reaches the store, which
      // quarantines its own refusals: kept here like them, the whole line
      // standing for the body (the quarantine keeps its first 1 KiB).
      RefusedDelivery r;
      r.outcome = Outcome::kInvalid;
      r.reason = d.status().message();
      r.body_bytes = line.size();
      r.body_prefix = std::move(line);  // intact: see ParseNdjsonLine
      batch.Refuse(*line_no, Outcome::kInvalid, d.status().message(), std::move(r));
      continue;
    }
    if (verifier) {
      Status st = VerifyLine(*verifier, envelope, *d);
      if (!st.ok()) {
        RefusedDelivery r;
        r.outcome = Outcome::kUnauthorized;
        r.reason = st.message();
        r.headers = d->headers;
        r.body_bytes = d->body.size();
        r.body_prefix = d->body.substr(0, kQuarantineBodyBytes);
        batch.Refuse(*line_no, Outcome::kUnauthorized, st.message(), std::move(r));
        continue;
      }
    }
    batch.Add(std::move(*d), *line_no);
  }
  if (batch.deliveries.empty() && batch.refusals.empty()) return std::nullopt;
  batch.last_line = *line_no;
  return batch;
}

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
      ->capture_default_str();
  cmd->add_option("input", a->input, "NDJSON file, or - for standard input (default)");
  cmd->callback([=] { *action = [=] { return Run(*a); }; });
}

}  // namespace eventfold::cli
