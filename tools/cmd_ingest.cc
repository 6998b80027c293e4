// eventfold ingest --data DIR [--profile FILE] [FILE|-]

#include <fstream>
#include <iostream>

#include "core/envelope.h"
#include "core/json_writer.h"
#include "core/signature.h"
#include "tools/cli_common.h"
#include "tools/secrets.h"

namespace eventfold::cli {
namespace {

// Lines per IngestBatch: one atomic write and one sync each.
constexpr size_t kBatchLines = 1000;

struct Tally {
  uint64_t accepted = 0, duplicate = 0, conflict = 0, invalid = 0, unauthorized = 0;
  bool storage_error = false;
};

void Report(size_t line_no, const IngestResult& r, Tally* t) {
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
      t->storage_error = true;
      break;
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
    file.open(input, std::ios::binary);
    if (!file) {
      std::cerr << "eventfold: cannot read " << input << "\n";
      return kExitError;
    }
    in = &file;
  }
  std::unique_ptr<Store> store = OpenStore(dir, /*create=*/true, args.profile);
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

  Tally tally;
  std::vector<Delivery> batch;
  std::vector<size_t> line_numbers;
  auto flush = [&] {
    std::vector<IngestResult> results = store->IngestBatch(batch);
    for (size_t i = 0; i < results.size(); ++i) Report(line_numbers[i], results[i], &tally);
    batch.clear();
    line_numbers.clear();
  };
  std::string line;
  for (size_t line_no = 1; std::getline(*in, line); ++line_no) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.find_first_not_of(" \t") == std::string::npos) continue;
    // Read before the line's bytes move into the delivery.
    const bool envelope = verifier && IsEnvelope(line);
    Result<Delivery> d = ParseNdjsonLine(std::move(line));
    if (!d.ok()) {
      ++tally.invalid;
      std::cerr << "line " << line_no << ": invalid (400): " << d.status().message() << "\n";
      continue;
    }
    if (verifier) {
      Status st = VerifyLine(*verifier, envelope, *d);
      if (!st.ok()) {
        ++tally.unauthorized;
        std::cerr << "line " << line_no << ": unauthorized (401): " << st.message() << "\n";
        RefusedDelivery r;
        r.outcome = Outcome::kUnauthorized;
        r.reason = st.message();
        r.headers = d->headers;
        r.body_prefix = d->body;
        (void)store->quarantine().Add(std::move(r));
        continue;
      }
    }
    batch.push_back(std::move(*d));
    line_numbers.push_back(line_no);
    if (batch.size() == kBatchLines) flush();
  }
  if (!batch.empty()) flush();

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
  w.EndObject();
  std::cout << w.str() << "\n";
  if (unrouted > 0) {
    std::cerr << "eventfold: " << unrouted << " accepted event" << (unrouted == 1 ? " is" : "s are")
              << " unrouted: stored, but profile \"" << store->profile()->name()
              << "\" routes no entity for " << (unrouted == 1 ? "its type" : "their types")
              << " (`eventfold unrouted` lists them)\n";
  }
  if (tally.storage_error) return kExitError;
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
