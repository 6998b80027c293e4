// eventfold ingest --data DIR [--profile FILE] [FILE|-]

#include <fstream>
#include <iostream>

#include "core/envelope.h"
#include "core/json_writer.h"
#include "tools/cli_common.h"

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
    case Outcome::kAccepted: ++t->accepted; return;
    case Outcome::kDuplicate: ++t->duplicate; return;
    case Outcome::kConflict: ++t->conflict; break;
    case Outcome::kUnauthorized: ++t->unauthorized; break;
    case Outcome::kStorageError: t->storage_error = true; break;
    default: ++t->invalid; break;  // invalid, too large
  }
  std::cerr << "line " << line_no << ": " << OutcomeName(r.outcome) << " ("
            << r.http_status() << "): " << r.message << "\n";
}

int Run(const std::string& dir, const std::string& profile, const std::string& input) {
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
  std::unique_ptr<Store> store = OpenStore(dir, /*create=*/true, profile);
  if (!store) return kExitError;

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
    Result<Delivery> d = ParseNdjsonLine(line);
    if (!d.ok()) {
      ++tally.invalid;
      std::cerr << "line " << line_no << ": invalid (400): " << d.status().message() << "\n";
      continue;
    }
    batch.push_back(std::move(*d));
    line_numbers.push_back(line_no);
    if (batch.size() == kBatchLines) flush();
  }
  if (!batch.empty()) flush();

  JsonWriter w;
  w.BeginObject()
      .Key("accepted").Uint(tally.accepted)
      .Key("duplicate").Uint(tally.duplicate)
      .Key("conflict").Uint(tally.conflict)
      .Key("invalid").Uint(tally.invalid)
      .Key("unauthorized").Uint(tally.unauthorized)
      .EndObject();
  std::cout << w.str() << "\n";
  if (tally.storage_error) return kExitError;
  return tally.conflict + tally.invalid + tally.unauthorized > 0 ? kExitRefused : kExitOk;
}

}  // namespace

void AddIngestCommand(CLI::App* app, Action* action) {
  auto* cmd = app->add_subcommand("ingest", "store NDJSON deliveries (bodies or envelopes)");
  auto dir = std::make_shared<std::string>();
  auto profile = std::make_shared<std::string>();
  auto input = std::make_shared<std::string>();
  AddDataOption(cmd, dir.get());
  cmd->add_option("--profile", *profile, "profile file for a new store");
  cmd->add_option("input", *input, "NDJSON file, or - for standard input (default)");
  cmd->callback([=] { *action = [=] { return Run(*dir, *profile, *input); }; });
}

}  // namespace eventfold::cli
