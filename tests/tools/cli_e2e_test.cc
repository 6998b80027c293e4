// End-to-end tests of the `eventfold` command (docs/SPEC.md §5) through the real
// binary: exit codes, stdout JSON byte for byte, stderr diagnostics.

#include <fcntl.h>
#include <gtest/gtest.h>
#include <leveldb/db.h>
#include <leveldb/write_batch.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "core/signature.h"
#include "storage/key_codec.h"
#include "storage/record_codec.h"
#include "tests/common/invoice_profile.h"
#include "tests/common/run_cli.h"
#include "tests/common/test_seed.h"

#ifndef EVENTFOLD_CLI
#error "EVENTFOLD_CLI must name the eventfold binary"
#endif

namespace {

namespace fs = std::filesystem;

using eventfold::test_util::CliResult;
using eventfold::test_util::Lines;
using eventfold::test_util::ReadFile;
using eventfold::test_util::WriteFile;

// A JSON event body.
std::string Body(const std::string& id, const std::string& type, const std::string& at,
                 const std::string& data, const std::string& version = "") {
  std::string b =
      "{\"event_id\":\"" + id + "\",\"type\":\"" + type + "\",\"occurred_at\":\"" + at + "\"";
  if (!version.empty()) b += ",\"version\":" + version;
  return b + ",\"data\":" + data + "}";
}

// {"headers":{...},"body":"<body as a JSON string>"}.
std::string Envelope(const std::string& headers_json, const std::string& body) {
  std::string escaped;
  for (char c : body) {
    if (c == '"' || c == '\\') escaped += '\\';
    escaped += c;
  }
  return "{\"headers\":" + headers_json + ",\"body\":\"" + escaped + "\"}";
}

// The docs/SPEC.md §5.4 example, in the order of arrival that makes arrival and fold
// orders differ: the refund (version 2) first, then the issue (version 1)
// at the same instant, then an impossible re-issue later.
const std::string kRefund =
    Body("evt_2", "receipt.refunded", "2026-11-29T10:15:30.123Z", R"({"receipt_id":"rcp_1"})", "2");
const std::string kIssue = Body("evt_1", "receipt.issued", "2026-11-29T10:15:30.123Z",
                                R"({"receipt_id":"rcp_1","amount":1500,"currency":"THB"})", "1");
const std::string kReissue = Body("evt_9", "receipt.issued", "2026-11-29T10:20:00Z",
                                  R"({"receipt_id":"rcp_1","amount":9999})");

const std::string kSpecProjection =
    R"({"entity":"receipt","id":"rcp_1","state":"refunded",)"
    R"("fields":{"receipt_id":"rcp_1","amount":1500,"currency":"THB"},)"
    R"("version":2,"applied":2,)"
    R"("rejected":[{"event_id":"evt_9","type":"receipt.issued","reason":"impossible transition refunded -> issued"}],)"
    R"("occurred_at":"2026-11-29T10:15:30.123000Z"})";

// A receipt whose only event is impossible: listed with state none.
const std::string kOrphanRefund =
    Body("evt_o", "receipt.refunded", "2026-11-29T09:00:00Z", R"({"receipt_id":"rcp_0"})");
const std::string kOrphanProjection =
    R"({"entity":"receipt","id":"rcp_0","state":"none","fields":{},"version":null,)"
    R"("applied":0,"rejected":[{"event_id":"evt_o","type":"receipt.refunded",)"
    R"("reason":"impossible transition none -> refunded"}],"occurred_at":null})";

const std::string kProduct = Body("evt_p", "product.created", "2026-11-29T08:00:00Z",
                                  R"({"product_id":"sku_1","name":"Tea"})", "1");
const std::string kProductProjection =
    R"({"entity":"product","id":"sku_1","state":"active",)"
    R"("fields":{"product_id":"sku_1","name":"Tea"},"version":1,"applied":1,"rejected":[],)"
    R"("occurred_at":"2026-11-29T08:00:00.000000Z"})";

const std::string kInvoice =
    Body("evt_inv", "invoice.paid", "2026-11-29T12:00:00Z", R"({"invoice_id":"inv_1","total":99})");

class CliTest : public ::testing::Test {
 protected:
  void SetUp() override {
    static std::atomic<int> counter{0};
    root_ = (fs::temp_directory_path() /
             ("eventfold-cli-test-" + std::to_string(::getpid()) + "-" + std::to_string(counter++) +
              "-" + std::to_string(std::chrono::steady_clock::now().time_since_epoch().count())))
                .string();
    fs::create_directories(root_);
    data_ = root_ + "/data";
  }
  void TearDown() override {
    std::error_code ec;
    fs::remove_all(root_, ec);
  }

  // Runs the binary with `args`, stdin from `stdin_path`.
  CliResult Run(const std::vector<std::string>& args, const std::string& stdin_path = "/dev/null") {
    CliResult r = eventfold::test_util::RunCli(EVENTFOLD_CLI, args, root_ + "/cli", stdin_path);
    if (!r.started) ADD_FAILURE() << r.err;
    return r;
  }

  // Writes `lines` as an NDJSON file under the test dir.
  std::string File(const std::string& name, const std::vector<std::string>& lines) {
    std::string text;
    for (const std::string& l : lines) text += l + "\n";
    const std::string path = root_ + "/" + name;
    WriteFile(path, text);
    return path;
  }

  // How much write-ahead log the first 1000 of `lines` (one batch) make,
  // measured on a store of their own (one log file: far below a write
  // buffer).
  uintmax_t FirstBatchLogBytes(const std::vector<std::string>& lines) {
    const std::string first =
        File("first-batch.ndjson",
             {lines.begin(), lines.begin() + std::min<size_t>(1000, lines.size())});
    const std::string sizing = root_ + "/sizing";
    EXPECT_EQ(Run({"ingest", "--data", sizing, first}).exit_code, 0);
    uintmax_t bytes = 0;
    for (const auto& entry : fs::directory_iterator(sizing)) {
      if (entry.path().extension() == ".log") bytes += entry.file_size();
    }
    return bytes;
  }

  // Ingests the docs/SPEC.md §5.4 example and a few others; every line is good.
  void IngestGood() {
    const std::string f =
        File("good.ndjson", {kRefund, kIssue, kReissue, kOrphanRefund, kProduct, kInvoice});
    CliResult r = Run({"ingest", "--data", data_, f});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    ASSERT_EQ(r.out,
              "{\"accepted\":6,\"duplicate\":0,\"conflict\":0,\"invalid\":0,\"unauthorized\":0,"
              "\"unrouted\":1}\n");
  }

  std::string root_;
  std::string data_;
};

// Suite name: the area prefix lets `ctest -R cli` select these.
using cli_e2e = CliTest;

TEST_F(cli_e2e, IngestReportsEveryRefusedLineAndStoresTheGoodOnes) {
  const std::string f =
      File("mixed.ndjson",
           {
               kRefund,                                                                      // 1
               kIssue,                                                                       // 2
               "this is not json",                                                           // 3
               R"({"event_id":"evt_m","type":"receipt.issued","data":{"receipt_id":"r"}})",  // 4
               "",  // 5 blank
               Body("evt_d", "receipt.issued", "2026-02-30T10:00:00Z",
                    R"({"receipt_id":"rcp_d"})"),  // 6 bad date
               Envelope(R"({"X-RR-Event-Id":"evt_other"})",
                        Body("evt_h", "receipt.issued", "2026-11-29T10:00:00Z",
                             R"({"receipt_id":"rcp_h"})")),  // 7 id mismatch
               Envelope(R"({"X-RR-Event-Id":"evt_9","Content-Type":"application/json"})",
                        kReissue),  // 8 good envelope
               kProduct,            // 9
               Body("evt_1", "receipt.refunded", "2026-11-29T10:15:30.123Z",
                    R"({"receipt_id":"rcp_1"})"),  // 10 conflict
               kOrphanRefund,                      // 11
           });
  CliResult r = Run({"ingest", "--data", data_, f});
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_EQ(r.out,
            "{\"accepted\":5,\"duplicate\":0,\"conflict\":1,\"invalid\":4,\"unauthorized\":0}\n");
  for (int bad : {3, 4, 6, 7, 10}) {
    EXPECT_NE(r.err.find("line " + std::to_string(bad) + ":"), std::string::npos)
        << "line " << bad << " not reported:\n"
        << r.err;
  }
  for (int good : {1, 2, 5, 8, 9, 11}) {
    EXPECT_EQ(r.err.find("line " + std::to_string(good) + ":"), std::string::npos)
        << "line " << good << " reported:\n"
        << r.err;
  }
  // Each report names the reason.
  const std::vector<std::pair<std::string, std::string>> reasons = {
      {"line 3:", "body"},          {"line 4:", "occurred_at"}, {"line 6:", "occurred_at"},
      {"line 7:", "X-RR-Event-Id"}, {"line 10:", "409"},
  };
  for (const std::string& line : Lines(r.err)) {
    for (const auto& [prefix, reason] : reasons) {
      if (line.starts_with(prefix)) {
        EXPECT_NE(line.find(reason), std::string::npos) << line;
      }
    }
  }
  // The good lines are stored: the docs/SPEC.md §5.4 example, exactly.
  CliResult show = Run({"show", "--data", data_, "receipt", "rcp_1"});
  EXPECT_EQ(show.exit_code, 0) << show.err;
  EXPECT_EQ(show.out, kSpecProjection + "\n");
  CliResult product = Run({"show", "--data", data_, "product", "sku_1"});
  EXPECT_EQ(product.exit_code, 0) << product.err;
  EXPECT_EQ(product.out, kProductProjection + "\n");
  // The refused ones are not.
  for (const char* id : {"rcp_d", "rcp_h", "r"}) {
    EXPECT_EQ(Run({"show", "--data", data_, "receipt", id}).exit_code, 1) << id;
  }
}

TEST_F(cli_e2e, ReingestingTheSameFileIsAllDuplicates) {
  IngestGood();
  const std::string f = root_ + "/good.ndjson";
  CliResult r = Run({"ingest", "--data", data_, f});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out,
            "{\"accepted\":0,\"duplicate\":6,\"conflict\":0,\"invalid\":0,\"unauthorized\":0}\n");
  EXPECT_EQ(r.err, "");
  EXPECT_EQ(Run({"show", "--data", data_, "receipt", "rcp_1"}).out, kSpecProjection + "\n");
}

TEST_F(cli_e2e, IngestFromStandardInput) {
  const std::string f =
      File("stdin.ndjson", {kIssue, Envelope(R"({"x-rr-event-id":"evt_2"})", kRefund), kReissue});
  CliResult r = Run({"ingest", "--data", data_, "-"}, f);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out,
            "{\"accepted\":3,\"duplicate\":0,\"conflict\":0,\"invalid\":0,\"unauthorized\":0}\n");
  EXPECT_EQ(Run({"show", "--data", data_, "receipt", "rcp_1"}).out, kSpecProjection + "\n");
  // Without an input argument stdin is read too.
  r = Run({"ingest", "--data", data_}, f);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out,
            "{\"accepted\":0,\"duplicate\":3,\"conflict\":0,\"invalid\":0,\"unauthorized\":0}\n");
}

TEST_F(cli_e2e, ShowOfAMissingEntityExits1) {
  IngestGood();
  CliResult r = Run({"show", "--data", data_, "receipt", "rcp_404"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(r.out, "");
  EXPECT_NE(r.err, "");
  r = Run({"log", "--data", data_, "receipt", "rcp_404"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(r.out, "");
}

TEST_F(cli_e2e, CommandsOnAMissingStoreExit2) {
  const std::string missing = root_ + "/nothing-here";
  for (const std::vector<std::string>& args :
       std::vector<std::vector<std::string>>{{"show", "--data", missing, "receipt", "rcp_1"},
                                             {"list", "--data", missing},
                                             {"log", "--data", missing, "receipt", "rcp_1"},
                                             {"replay", "--data", missing},
                                             {"replay", "--data", missing, "--verify"}}) {
    CliResult r = Run(args);
    EXPECT_EQ(r.exit_code, 2) << args[0] << ": " << r.err;
    EXPECT_EQ(r.out, "") << args[0];
    EXPECT_NE(r.err, "") << args[0];
  }
  EXPECT_FALSE(fs::exists(missing)) << "a read command must not create a store";
}

TEST_F(cli_e2e, ListIsOrderedByEntityThenIdAndFilters) {
  IngestGood();
  // More receipts whose ids sort differently bytewise than numerically or
  // case-insensitively.
  std::vector<std::string> more;
  int n = 0;
  for (const char* id : {"rcp_10", "rcp_9", "RCP_1", "rcp_1a"}) {
    more.push_back(Body("evt_more_" + std::to_string(n++), "receipt.issued", "2026-11-29T07:00:00Z",
                        std::string(R"({"receipt_id":")") + id + "\"}"));
  }
  ASSERT_EQ(Run({"ingest", "--data", data_, File("more.ndjson", more)}).exit_code, 0);

  CliResult r = Run({"list", "--data", data_});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  std::vector<std::string> ids;
  for (const std::string& line : Lines(r.out)) {
    const size_t e = line.find("\"entity\":\"");
    const size_t i = line.find("\"id\":\"");
    ASSERT_EQ(e, 1u) << line;
    ASSERT_NE(i, std::string::npos) << line;
    const std::string entity = line.substr(e + 10, line.find('"', e + 10) - e - 10);
    const std::string id = line.substr(i + 6, line.find('"', i + 6) - i - 6);
    ids.push_back(entity + "/" + id);
  }
  EXPECT_EQ(ids, (std::vector<std::string>{"product/sku_1", "receipt/RCP_1", "receipt/rcp_0",
                                           "receipt/rcp_1", "receipt/rcp_10", "receipt/rcp_1a",
                                           "receipt/rcp_9"}));
  const std::vector<std::string> lines = Lines(r.out);
  ASSERT_EQ(lines.size(), 7u);
  EXPECT_EQ(lines[0], kProductProjection);
  EXPECT_EQ(lines[2], kOrphanProjection) << "an entity whose events were all rejected";
  EXPECT_EQ(lines[3], kSpecProjection);
  EXPECT_EQ(r.out.find("invoice"), std::string::npos) << "unrouted events list nowhere";

  CliResult receipts = Run({"list", "--data", data_, "receipt"});
  ASSERT_EQ(receipts.exit_code, 0) << receipts.err;
  EXPECT_EQ(Lines(receipts.out), std::vector<std::string>(lines.begin() + 1, lines.end()));
  CliResult products = Run({"list", "--data", data_, "product"});
  EXPECT_EQ(products.out, kProductProjection + "\n");
}

TEST_F(cli_e2e, LogHasArrivalAndFoldOrderWithVerdicts) {
  IngestGood();
  CliResult r = Run({"log", "--data", data_, "receipt", "rcp_1"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const std::string& j = r.out;
  ASSERT_TRUE(j.starts_with(R"({"entity":"receipt","id":"rcp_1","arrival":[)")) << j;
  const size_t arrival = j.find("\"arrival\":[");
  const size_t fold = j.find("\"fold\":[");
  ASSERT_NE(fold, std::string::npos) << j;
  ASSERT_LT(arrival, fold);
  auto at = [&](size_t from, const std::string& id) {
    return j.find("{\"event_id\":\"" + id + "\"", from);
  };
  // Arrival: the file's order. Fold: issue (v1), refund (v2), re-issue.
  EXPECT_LT(at(arrival, "evt_2"), at(arrival, "evt_1"));
  EXPECT_LT(at(arrival, "evt_1"), at(arrival, "evt_9"));
  EXPECT_LT(at(arrival, "evt_9"), fold);
  EXPECT_LT(at(fold, "evt_1"), at(fold, "evt_2"));
  EXPECT_LT(at(fold, "evt_2"), at(fold, "evt_9"));
  // Verdicts, in both arrays.
  const std::string rejected =
      R"("verdict":"rejected","reason":"impossible transition refunded -> issued")";
  const size_t first = j.find(rejected);
  ASSERT_NE(first, std::string::npos) << j;
  EXPECT_NE(j.find(rejected, first + 1), std::string::npos) << j;
  size_t applied = 0;
  for (size_t p = j.find("\"verdict\":\"applied\""); p != std::string::npos;
       p = j.find("\"verdict\":\"applied\"", p + 1)) {
    ++applied;
  }
  EXPECT_EQ(applied, 4u) << "evt_1 and evt_2, once per array";
  EXPECT_TRUE(j.ends_with("]}\n")) << j;
}

TEST_F(cli_e2e, ReplayKeepsListIdenticalAndVerifies) {
  IngestGood();
  const std::string before = Run({"list", "--data", data_}).out;
  ASSERT_FALSE(before.empty());
  CliResult r = Run({"replay", "--data", data_});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const std::vector<std::string> out = Lines(r.out);
  ASSERT_EQ(out.size(), 1u) << r.out;
  const std::string& s = out[0];
  EXPECT_TRUE(
      s.starts_with("{\"entities\":3,\"events\":6,\"applied\":3,\"rejected\":2,"
                    "\"unrouted\":1,"))
      << s;
  EXPECT_TRUE(s.ends_with("}")) << s;
  EXPECT_EQ(Run({"list", "--data", data_}).out, before) << "replay must not change projections";
  // The same counts when every log is derived anew instead of copied.
  CliResult rederived = Run({"replay", "--data", data_, "--rederive-logs", "--quiet"});
  ASSERT_EQ(rederived.exit_code, 0) << rederived.err;
  EXPECT_TRUE(rederived.out.starts_with(s.substr(0, s.find("\"seconds\""))))
      << rederived.out << " vs " << s;
  EXPECT_EQ(Run({"list", "--data", data_}).out, before);

  CliResult v = Run({"replay", "--data", data_, "--verify"});
  EXPECT_EQ(v.exit_code, 0) << v.err;
  EXPECT_NE(v.out.find("\"verified\":true"), std::string::npos) << v.out;
  EXPECT_NE(v.out.find("\"differences\":0"), std::string::npos) << v.out;
  EXPECT_EQ(Run({"list", "--data", data_}).out, before);
}

// Turns the store at `dir` (closed) back into format 4: logs under
// m/generation, no m/log_generation.
void MakeFormat4(const std::string& dir) {
  leveldb::DB* raw = nullptr;
  ASSERT_TRUE(leveldb::DB::Open(leveldb::Options(), dir, &raw).ok()) << dir;
  std::unique_ptr<leveldb::DB> db(raw);
  leveldb::WriteBatch batch;
  batch.Delete(eventfold::storage::MetaKey("log_generation"));
  batch.Put(eventfold::storage::MetaKey("format"), eventfold::storage::EncodeText("4"));
  ASSERT_TRUE(db->Write(leveldb::WriteOptions(), &batch).ok());
}

// A store of the older format is refused with the command that upgrades
// it; `migrate` upgrades it (and leaves a current one as it is), and so
// every partition store of a fold worker's directory, stale copies
// included, one line each.
TEST_F(cli_e2e, MigrateUpgradesAStoreAndEveryPartitionStoreOfAWorker) {
  IngestGood();
  const std::string before = Run({"list", "--data", data_}).out;
  MakeFormat4(data_);
  CliResult refused = Run({"list", "--data", data_});
  EXPECT_EQ(refused.exit_code, 2);
  EXPECT_NE(refused.err.find("eventfold migrate --data " + data_), std::string::npos)
      << refused.err;
  for (int i = 0; i < 2; ++i) {
    CliResult m = Run({"migrate", "--data", data_});
    ASSERT_EQ(m.exit_code, 0) << m.err;
    EXPECT_EQ(m.out, "{\"format\":\"current\"}\n");
  }
  EXPECT_EQ(Run({"list", "--data", data_}).out, before);

  const std::string worker = root_ + "/worker";
  const std::string f = File("one.ndjson", {kIssue});
  for (const char* p : {"p0", "p1"}) {
    ASSERT_EQ(Run({"ingest", "--data", worker + "/" + p, f}).exit_code, 0);
    MakeFormat4(worker + "/" + p);
  }
  WriteFile(worker + "/p1.stale", "partition 1 is owned by another worker\n");
  CliResult m = Run({"migrate", "--data", worker});
  ASSERT_EQ(m.exit_code, 0) << m.err;
  EXPECT_EQ(m.out,
            "{\"partition\":0,\"format\":\"current\"}\n"
            "{\"partition\":1,\"format\":\"current\"}\n");
  for (const char* p : {"p0", "p1"}) {
    EXPECT_EQ(Run({"list", "--data", worker + "/" + p}).exit_code, 0) << p;
  }
  CliResult none = Run({"migrate", "--data", root_ + "/nothing"});
  EXPECT_EQ(none.exit_code, 2);
  EXPECT_NE(none.err.find("no store at"), std::string::npos) << none.err;
}

// A partition directory of a fold worker that holds LevelDB's files but no
// CURRENT (lost, or a first open cut short) is no store to read, and not
// nothing either: the read commands skip it naming it and the repair that
// salvages it, and check counts it as a problem (exit 1) where it used to
// say ok.
TEST_F(cli_e2e, APartitionStoreWithoutItsCurrentFileIsNamedAndCheckFails) {
  const std::string worker = root_ + "/worker";
  const std::string f = File("one.ndjson", {kIssue});
  for (const char* p : {"p0", "p1"}) {
    ASSERT_EQ(Run({"ingest", "--data", worker + "/" + p, f}).exit_code, 0);
  }
  ASSERT_TRUE(std::filesystem::remove(worker + "/p1/CURRENT"));
  CliResult list = Run({"list", "--data", worker});
  EXPECT_EQ(list.exit_code, 0) << list.err;
  EXPECT_NE(list.err.find("skipping " + worker + "/p1: not a whole store (no CURRENT file)"),
            std::string::npos)
      << list.err;
  EXPECT_NE(list.err.find("eventfold repair --data " + worker + "/p1"), std::string::npos)
      << list.err;
  CliResult check = Run({"check", "--data", worker});
  EXPECT_EQ(check.exit_code, 1) << check.out << check.err;
  EXPECT_NE(check.out.find("\"ok\":false"), std::string::npos) << check.out;
  EXPECT_NE(check.err.find("repair --data " + worker + "/p1"), std::string::npos) << check.err;
  // Repaired, it is a store again, and the worker's directory checks clean.
  CliResult repair = Run({"repair", "--data", worker + "/p1"});
  EXPECT_EQ(repair.exit_code, 0) << repair.out << repair.err;
  CliResult again = Run({"check", "--data", worker});
  EXPECT_EQ(again.exit_code, 0) << again.out << again.err;
  CliResult both = Run({"list", "--data", worker});
  EXPECT_EQ(both.exit_code, 0) << both.err;
  EXPECT_EQ(both.err.find("skipping"), std::string::npos) << both.err;
}

// A fold worker's directory holds partition stores DIR/p<k> and no store
// of its own. The commands that work on one store said "no store at DIR
// (ingest creates one)" there; they name its partition stores and how to
// pick one instead (exit 2), and ingest creates no store beside them.
TEST_F(cli_e2e, OneStoreCommandsOnAWorkerDirectoryNameItsPartitionStores) {
  const std::string worker = root_ + "/worker";
  const std::string f = File("one.ndjson", {kIssue});
  for (const char* p : {"p0", "p1"}) {
    ASSERT_EQ(Run({"ingest", "--data", worker + "/" + p, f}).exit_code, 0);
  }
  WriteFile(worker + "/p1.stale", "partition 1 is owned by another worker\n");
  for (const std::vector<std::string>& args : std::vector<std::vector<std::string>>{
           {"status", "--data", worker},
           {"refused", "--data", worker},
           {"unrouted", "--data", worker},
           {"gc", "--data", worker},
           {"replay", "--data", worker},
           {"replay", "--data", worker, "--verify"},
           {"backup", "--data", worker, root_ + "/backup"},
           {"dlq", "list", "--data", worker, "--subscription", "s"},
           {"ingest", "--data", worker, f},
       }) {
    CliResult r = Run(args);
    EXPECT_EQ(r.exit_code, 2) << args[0] << ": " << r.err;
    EXPECT_EQ(r.out, "") << args[0];
    EXPECT_NE(r.err.find("--data " + worker +
                         ": a fold worker's directory of 2 partition stores (p0, p1), not one "
                         "store; name one with --data " +
                         worker + "/p<k>"),
              std::string::npos)
        << args[0] << ": " << r.err;
    EXPECT_EQ(r.err.find("no store at"), std::string::npos) << args[0] << ": " << r.err;
  }
  EXPECT_FALSE(fs::exists(worker + "/CURRENT")) << "ingest must not create a store there";
  EXPECT_FALSE(fs::exists(root_ + "/backup"));
  // One partition store named works as any store.
  CliResult one = Run({"status", "--data", worker + "/p0"});
  EXPECT_EQ(one.exit_code, 0) << one.err;
}

TEST_F(cli_e2e, ReplayWithANewProfileProjectsUnroutedEvents) {
  IngestGood();
  const std::string profile = root_ + "/invoices.json";
  WriteFile(profile, eventfold::test_util::kInvoiceProfile);
  const std::string before = Run({"list", "--data", data_}).out;
  EXPECT_EQ(before.find("invoice"), std::string::npos);

  CliResult r = Run({"replay", "--data", data_, "--profile", profile});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("\"unrouted\":0"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("\"entities\":4"), std::string::npos) << r.out;

  const std::string invoice =
      R"({"entity":"invoice","id":"inv_1","state":"paid","fields":{"invoice_id":"inv_1","total":99},)"
      R"("version":null,"applied":1,"rejected":[],"occurred_at":"2026-11-29T12:00:00.000000Z"})";
  // The store now lists the invoice (first: "invoice" < "product"), and the
  // rest is unchanged.
  CliResult list = Run({"list", "--data", data_});
  ASSERT_EQ(list.exit_code, 0) << list.err;
  EXPECT_EQ(list.out, invoice + "\n" + before);
  CliResult only = Run({"list", "--data", data_, "invoice"});
  EXPECT_EQ(only.exit_code, 0) << only.err;
  EXPECT_EQ(only.out, invoice + "\n");
  // The store remembers its new profile: verify uses it, and new invoices route.
  EXPECT_EQ(Run({"replay", "--data", data_, "--verify"}).exit_code, 0);
  CliResult more =
      Run({"ingest", "--data", data_,
           File("inv2.ndjson", {Body("evt_inv2", "invoice.paid", "2026-11-29T13:00:00Z",
                                     R"({"invoice_id":"inv_2"})")})});
  EXPECT_EQ(more.exit_code, 0) << more.err;
  EXPECT_EQ(Run({"show", "--data", data_, "invoice", "inv_2"}).exit_code, 0);
}

// `eventfold ingest` reads and checks lines a batch ahead of the batch being
// written (1000 lines to a write, docs/SPEC.md §5). Over a seeded file of a
// few batches, with duplicates and conflicts of lines in earlier batches,
// every line is reported once, under its own number, with the outcome a
// line-by-line reading gives; the summary counts them, and each unsigned
// line is quarantined.
TEST_F(cli_e2e, IngestAcrossBatchesReportsEachLineOnceUnderItsNumber) {
  std::mt19937_64 rng(eventfold::test_util::TestSeed("IngestAcrossBatches", 20261204));
  const std::string secret = "cli-e2e-secret-0123456789";
  const int64_t now = static_cast<int64_t>(std::time(nullptr));
  auto signed_line = [&](const std::string& body) {
    return Envelope(R"({"X-RR-Signature":")" + eventfold::SignRr(secret, now, body) + "\"}", body);
  };
  std::vector<std::string> lines;
  std::vector<std::string> good_bodies;    // accepted, in order
  std::map<size_t, std::string> expected;  // line number -> outcome reported
  size_t accepted = 0, duplicate = 0, conflict = 0, invalid = 0, unauthorized = 0;
  size_t malformed_lines = 0;
  // Each refusal is quarantined; below the quarantine's 200 a second, none
  // is dropped.
  constexpr size_t kMaxRefusals = 150;
  auto refuse = [&](std::string line, const char* outcome, size_t* count) {
    expected[lines.size() + 1] = outcome;
    lines.push_back(std::move(line));
    ++*count;
  };
  while (lines.size() < 3500) {
    const int kind = std::uniform_int_distribution<int>(0, 99)(rng);
    const bool may_refuse = conflict + invalid + unauthorized < kMaxRefusals;
    if (kind < 80 || good_bodies.empty() || (kind < 98 && kind >= 92 && !may_refuse)) {
      const std::string n = std::to_string(good_bodies.size());
      good_bodies.push_back(Body("evt_" + n, "receipt.issued", "2026-11-29T10:00:00Z",
                                 R"({"receipt_id":"rcp_)" + n + R"("})"));
      lines.push_back(signed_line(good_bodies.back()));
      ++accepted;
      continue;
    }
    const std::string& earlier =
        good_bodies[std::uniform_int_distribution<size_t>(0, good_bodies.size() - 1)(rng)];
    if (kind < 92) {
      lines.push_back(signed_line(earlier));
      ++duplicate;
    } else if (kind < 94) {
      // The same event id, another identity (occurred_at).
      std::string other = earlier;
      other.replace(other.find("T10:"), 4, "T11:");
      refuse(signed_line(other), "conflict", &conflict);
    } else if (kind < 95) {
      // A malformed envelope: refused by the line check, before the store,
      // and quarantined like the store's own refusals.
      refuse(R"({"headers":{"n":1},"body":"{}"})", "invalid", &invalid);
      ++malformed_lines;
    } else if (kind < 96) {
      refuse(signed_line("not json"), "invalid", &invalid);  // refused by the store
    } else if (kind < 98) {
      refuse(earlier, "unauthorized", &unauthorized);  // a bare body: not signed
    } else {
      lines.push_back("");  // blank: skipped, but still numbered
    }
  }
  const std::string f = File("batches.ndjson", lines);
  CliResult r = Run({"ingest", "--data", data_, "--secret", secret, f});
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_EQ(r.out, "{\"accepted\":" + std::to_string(accepted) + ",\"duplicate\":" +
                       std::to_string(duplicate) + ",\"conflict\":" + std::to_string(conflict) +
                       ",\"invalid\":" + std::to_string(invalid) +
                       ",\"unauthorized\":" + std::to_string(unauthorized) + "}\n");
  std::map<size_t, std::string> reported;
  for (const std::string& line : Lines(r.err)) {
    // "line N: OUTCOME (STATUS): reason"
    ASSERT_TRUE(line.starts_with("line ")) << line;
    const size_t colon = line.find(':');
    const size_t number = std::stoul(line.substr(5, colon - 5));
    const std::string outcome = line.substr(colon + 2, line.find(' ', colon + 2) - colon - 2);
    EXPECT_TRUE(reported.emplace(number, outcome).second) << "line " << number << " twice";
  }
  EXPECT_EQ(reported, expected);
  CliResult refused = Run({"refused", "--data", data_});
  EXPECT_EQ(refused.exit_code, 0) << refused.err;
  std::map<std::string, size_t> quarantined;
  size_t malformed_quarantined = 0;
  for (const std::string& line : Lines(refused.out)) {
    if (line.find(R"("reason":"headers: must be an object of string values")") !=
        std::string::npos) {
      ++malformed_quarantined;
    }
    const size_t at = line.find(R"("outcome":")");
    ASSERT_NE(at, std::string::npos) << line;
    ++quarantined[line.substr(at + 11, line.find('"', at + 11) - at - 11)];
  }
  EXPECT_EQ(quarantined, (std::map<std::string, size_t>{
                             {"conflict", conflict},
                             {"invalid", invalid},
                             {"unauthorized", unauthorized},
                         }));
  EXPECT_EQ(malformed_quarantined, malformed_lines);
}

// Large bodies end a batch by their bytes, not only at 1,000 lines: 60
// bodies of 900 KB (54 MB) in one write would leave them all in LevelDB's
// write-ahead log, to be held and replayed whole by the next open. With
// batches of at most a few MiB, LevelDB switches memtables between them and
// no log holds more than its write buffer (16 MiB) and one batch. A line
// over the longest the command reads (8 MiB) is refused as too large while
// it is read, and the lines after it are ingested; so is a last line
// without its newline.
TEST_F(cli_e2e, IngestBatchesLargeBodiesByBytesAndRefusesAnOverlongLine) {
  std::vector<std::string> lines;
  const std::string note(900 * 1000, 'n');
  for (int i = 0; i < 60; ++i) {
    if (i == 30) lines.push_back(std::string(9 << 20, 'x'));  // line 31
    lines.push_back(
        Body("evt_big_" + std::to_string(i), "receipt.issued", "2026-11-29T10:00:00Z",
             R"({"receipt_id":"rcp_big_)" + std::to_string(i) + R"(","note":")" + note + "\"}"));
  }
  std::string last = File("large.ndjson", lines);
  {
    std::ofstream out(last, std::ios::binary | std::ios::app);
    out << Body("evt_last", "receipt.issued", "2026-11-29T10:00:00Z",
                R"({"receipt_id":"rcp_last"})");  // no newline after it
  }
  CliResult r = Run({"ingest", "--data", data_, last});
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_EQ(r.out,
            "{\"accepted\":61,\"duplicate\":0,\"conflict\":0,\"invalid\":1,\"unauthorized\":0}\n");
  EXPECT_EQ(r.err, "line 31: too_large (413): line: " + std::to_string(9 << 20) +
                       " bytes exceeds the limit of " + std::to_string(8 << 20) + "\n");
  uintmax_t largest_log = 0;
  for (const auto& entry : fs::directory_iterator(data_)) {
    if (entry.path().extension() == ".log") {
      largest_log = std::max(largest_log, entry.file_size());
    }
  }
  EXPECT_LT(largest_log, uintmax_t{40} << 20) << "a write-ahead log holds more than a batch "
                                                 "beside a full write buffer";
  EXPECT_EQ(Run({"show", "--data", data_, "receipt", "rcp_last"}).exit_code, 0);
  EXPECT_EQ(Run({"show", "--data", data_, "receipt", "rcp_big_59"}).exit_code, 0);
  CliResult refused = Run({"refused", "--data", data_});
  EXPECT_NE(refused.out.find("\"body_bytes\":" + std::to_string(9 << 20)), std::string::npos)
      << refused.out.substr(0, 300);
}

// `list` over a fold worker's directory merges its partition stores a page
// of each at a time: the same bytes, in the same order, as `list` of one
// store holding every event, across page boundaries (each store holds
// several pages) and with ids whose bytewise order differs from their
// numeric one.
TEST_F(cli_e2e, ListOverPartitionStoresIsOneStoresListingMerged) {
  std::mt19937_64 rng(eventfold::test_util::TestSeed("ListOverPartitionStores", 20261207));
  constexpr int kStores = 3;
  std::vector<std::vector<std::string>> parts(kStores);
  std::vector<std::string> all;
  for (int i = 0; i < 600; ++i) {
    const std::string n = std::to_string(std::uniform_int_distribution<int>(0, 99999)(rng));
    const bool product = i % 5 == 0;
    const std::string body =
        product ? Body("evt_p" + std::to_string(i), "product.created", "2026-11-29T08:00:00Z",
                       R"({"product_id":"sku_)" + n + R"("})")
                : Body("evt_r" + std::to_string(i), "receipt.issued", "2026-11-29T10:00:00Z",
                       R"({"receipt_id":"rcp_)" + n + R"(","amount":)" + std::to_string(i) + "}");
    // One entity, one partition (as a worker routes it): by its id.
    parts[std::hash<std::string>{}(n) % kStores].push_back(body);
    all.push_back(body);
  }
  const std::string worker = root_ + "/worker";
  for (int k = 0; k < kStores; ++k) {
    ASSERT_GT(parts[k].size(), 64u * 2) << "each store should hold several pages";
    CliResult r = Run({"ingest", "--data", worker + "/p" + std::to_string(k),
                       File("p" + std::to_string(k) + ".ndjson", parts[k])});
    ASSERT_EQ(r.exit_code, 0) << r.err;
  }
  CliResult r = Run({"ingest", "--data", data_, File("all.ndjson", all)});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  for (const std::vector<std::string>& filter :
       {std::vector<std::string>{}, {"receipt"}, {"product"}}) {
    std::vector<std::string> one = {"list", "--data", data_};
    std::vector<std::string> merged = {"list", "--data", worker};
    one.insert(one.end(), filter.begin(), filter.end());
    merged.insert(merged.end(), filter.begin(), filter.end());
    CliResult want = Run(one);
    CliResult got = Run(merged);
    ASSERT_EQ(want.exit_code, 0) << want.err;
    EXPECT_EQ(got.exit_code, 0) << got.err;
    EXPECT_FALSE(want.out.empty());
    EXPECT_EQ(got.out, want.out) << (filter.empty() ? "all" : filter[0]);
  }
}

TEST_F(cli_e2e, UsageErrorsExit2) {
  for (const std::vector<std::string>& args : std::vector<std::vector<std::string>>{
           {"frobnicate"},
           {"show", "--data", data_},
           {"show", "--data", data_, "receipt"},
           {"log", "--data", data_, "receipt"},
           {"list", "--data", data_, "--no-such-flag"},
           {"ingest", "--data"},
       }) {
    std::string joined;
    for (const std::string& a : args) joined += a + " ";
    CliResult r = Run(args);
    EXPECT_EQ(r.exit_code, 2) << joined << "\n" << r.err;
    EXPECT_NE(r.err, "") << joined;
  }
  CliResult ingest_missing_file = Run({"ingest", "--data", data_, root_ + "/no-such.ndjson"});
  EXPECT_EQ(ingest_missing_file.exit_code, 2) << ingest_missing_file.err;
}

// While alive, the commands the test runs fail every sync of the
// write-ahead log of the store at `dir` once it holds more than `above`
// bytes (the preloaded shim, tests/common/fail_sync_shim.cc).
class FailingLogSyncs {
 public:
  FailingLogSyncs(const std::string& dir, uintmax_t above) {
    const char* asan = std::getenv("ASAN_OPTIONS");
    had_asan_ = asan != nullptr;
    asan_before_ = asan ? asan : "";
    // The shim is loaded ahead of a sanitizer's runtime, which then must not
    // insist on coming first.
    setenv("ASAN_OPTIONS", (asan_before_ + ":verify_asan_link_order=0").c_str(), 1);
    setenv("LD_PRELOAD", EVENTFOLD_FAIL_SYNC_SHIM, 1);
    setenv("EVENTFOLD_FAIL_SYNC_DIR", dir.c_str(), 1);
    setenv("EVENTFOLD_FAIL_SYNC_ABOVE", std::to_string(above).c_str(), 1);
  }
  ~FailingLogSyncs() {
    unsetenv("LD_PRELOAD");
    unsetenv("EVENTFOLD_FAIL_SYNC_DIR");
    unsetenv("EVENTFOLD_FAIL_SYNC_ABOVE");
    if (had_asan_) {
      setenv("ASAN_OPTIONS", asan_before_.c_str(), 1);
    } else {
      unsetenv("ASAN_OPTIONS");
    }
  }
  FailingLogSyncs(const FailingLogSyncs&) = delete;
  FailingLogSyncs& operator=(const FailingLogSyncs&) = delete;

 private:
  bool had_asan_ = false;
  std::string asan_before_;
};

// `n` lines, each a new receipt's issue.
std::vector<std::string> NewReceiptLines(size_t n) {
  std::vector<std::string> lines;
  for (size_t i = 0; i < n; ++i) {
    const std::string id = std::to_string(i);
    lines.push_back(Body("evt_" + id, "receipt.issued", "2026-11-29T10:00:00Z",
                         R"({"receipt_id":"rcp_)" + id + R"("})"));
  }
  return lines;
}

// The value of `"key":N` in a command's JSON summary; 0 when absent.
size_t SummaryCount(const std::string& summary, const std::string& key) {
  const size_t at = summary.find("\"" + key + "\":");
  return at == std::string::npos ? 0 : std::stoul(summary.substr(at + key.size() + 3));
}

// A disk that stops syncing mid-file: once the write-ahead log holds more
// than the first batch, every log sync fails (a preloaded shim), so no sync
// can make the second batch durable. The first batch is reported accepted
// (or, when its sync ran only after the second batch was written, a storage
// error too); every later line is a storage error, never accepted; the
// command exits 2. Run again on a healthy disk, the same file completes the
// store: every line accepted or a duplicate, and every receipt listed.
TEST_F(cli_e2e, IngestReportsLinesWhoseSyncFailedAsStorageErrorsAndStops) {
  constexpr size_t kLines = 6500;  // seven batches of at most 1000
  const std::vector<std::string> lines = NewReceiptLines(kLines);
  const std::string f = File("sync-fails.ndjson", lines);
  const uintmax_t first_batch_log = FirstBatchLogBytes(lines);
  ASSERT_GT(first_batch_log, 1000u * 100);
  const std::string dir = fs::weakly_canonical(data_).string();
  fs::create_directories(dir);
  CliResult failing;
  {
    FailingLogSyncs syncs(dir, first_batch_log * 3 / 2);
    failing = Run({"ingest", "--data", dir, f});
  }
  const auto count = SummaryCount;
  EXPECT_EQ(failing.exit_code, 2) << failing.err.substr(0, 2000);
  const size_t accepted = count(failing.out, "accepted");
  // At most the first batch: the second's lines, though written, are never
  // reported stored.
  EXPECT_TRUE(accepted == 1000 || accepted == 0) << failing.out;
  EXPECT_EQ(count(failing.out, "duplicate") + count(failing.out, "conflict") +
                count(failing.out, "invalid") + count(failing.out, "unauthorized"),
            0u)
      << failing.out;
  // The run stops at the first batch whose sync failed: that batch, and the
  // one written behind it while its sync ran, are the storage errors; no
  // line after them is stored or reported.
  const size_t stopped = count(failing.out, "stopped_after_line");
  EXPECT_GT(stopped, accepted) << failing.out;
  EXPECT_LE(stopped, accepted + 2000) << failing.out;
  // Consecutive lines with the same storage error come as one range
  // ("lines A-B: ..."): a batch's lines fail alike.
  std::set<size_t> storage_errors;
  size_t reports = 0;
  for (const std::string& line : Lines(failing.err)) {
    size_t first = 0, last = 0;
    if (line.starts_with("line ")) {
      first = last = std::stoul(line.substr(5));
    } else if (line.starts_with("lines ")) {
      first = std::stoul(line.substr(6));
      last = std::stoul(line.substr(line.find('-') + 1));
    } else {
      continue;
    }
    ++reports;
    EXPECT_GT(first, accepted) << line;
    EXPECT_LE(last, stopped) << line;
    EXPECT_NE(line.find(": storage_error (503): storage: "), std::string::npos) << line;
    for (size_t n = first; n <= last; ++n) {
      EXPECT_TRUE(storage_errors.insert(n).second) << "line " << n << " reported twice";
    }
  }
  EXPECT_EQ(storage_errors.size(), stopped - accepted) << failing.err.substr(0, 2000);
  EXPECT_LE(reports, 4u) << "one range a batch, one reason each: " << failing.err.substr(0, 2000);
  EXPECT_EQ(count(failing.out, "storage_error"), stopped - accepted) << failing.out;
  EXPECT_NE(failing.err.find("eventfold: stopped after line " + std::to_string(stopped) +
                             ": the store could not store a batch (storage: "),
            std::string::npos)
      << failing.err.substr(0, 2000);
  EXPECT_NE(failing.err.find("run the same command again"), std::string::npos) << failing.err;

  CliResult healthy = Run({"ingest", "--data", dir, f});
  EXPECT_EQ(healthy.exit_code, 0) << healthy.err;
  EXPECT_EQ(count(healthy.out, "accepted") + count(healthy.out, "duplicate"), kLines)
      << healthy.out;
  EXPECT_GE(count(healthy.out, "duplicate"), accepted) << healthy.out;
  CliResult listed = Run({"list", "--data", dir, "receipt"});
  EXPECT_EQ(listed.exit_code, 0) << listed.err;
  EXPECT_EQ(Lines(listed.out).size(), kLines);
}

// The same disk, the lines coming through a pipe whose writer keeps it
// open with half a batch still to come: the first batch's sync fails, the
// run stops and exits 2 at once. It used to print its summary and then
// wait for the read-ahead's batch, which the open pipe never ended.
TEST_F(cli_e2e, IngestStoppedByAStorageErrorExitsThoughItsPipeStaysOpen) {
  const std::vector<std::string> lines = NewReceiptLines(2500);  // 2.5 batches
  const uintmax_t first_batch_log = FirstBatchLogBytes(lines);
  ASSERT_GT(first_batch_log, 1000u * 100);
  const std::string dir = fs::weakly_canonical(data_).string();
  fs::create_directories(dir);
  const std::string fifo = root_ + "/lines.fifo";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  std::string text;
  for (const std::string& l : lines) text += l + "\n";
  // Written whole, then held open until the command has ended. A write to
  // a pipe its reader closed fails with EPIPE, not the signal.
  struct sigaction ignore = {}, before = {};
  ignore.sa_handler = SIG_IGN;
  ASSERT_EQ(::sigaction(SIGPIPE, &ignore, &before), 0);
  int writer_fd = -1;
  std::thread writer([&] {
    writer_fd = ::open(fifo.c_str(), O_WRONLY | O_CLOEXEC);  // waits for the command
    for (size_t at = 0; writer_fd >= 0 && at < text.size();) {
      const ssize_t n = ::write(writer_fd, text.data() + at, text.size() - at);
      if (n <= 0) break;
      at += static_cast<size_t>(n);
    }
  });
  const std::string out = root_ + "/pipe.out", err = root_ + "/pipe.err";
  pid_t pid = -1;
  {
    FailingLogSyncs syncs(dir, first_batch_log / 2);
    // Bounded: before the fix it waited for the pipe for good.
    pid = eventfold::test_util::SpawnCli(
        "/usr/bin/timeout", {"-k", "5", "120", EVENTFOLD_CLI, "ingest", "--data", dir, "-"}, fifo,
        out, err);
  }
  ASSERT_GT(pid, 0);
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  writer.join();
  if (writer_fd >= 0) ::close(writer_fd);
  ::sigaction(SIGPIPE, &before, nullptr);
  ASSERT_TRUE(WIFEXITED(status));
  const std::string summary = ReadFile(out), errors = ReadFile(err);
  ASSERT_NE(WEXITSTATUS(status), 124) << "still waiting for its input after 120 s\n"
                                      << summary << errors.substr(0, 2000);
  EXPECT_EQ(WEXITSTATUS(status), 2) << errors.substr(0, 2000);
  EXPECT_EQ(SummaryCount(summary, "accepted"), 0u) << summary;
  EXPECT_EQ(SummaryCount(summary, "stopped_after_line"), 2000u) << summary;
  EXPECT_EQ(SummaryCount(summary, "storage_error"), 2000u) << summary;
  EXPECT_NE(errors.find("eventfold: stopped after line 2000"), std::string::npos)
      << errors.substr(0, 2000);
}

}  // namespace
