// Uses the installed eventfold through its public API only: opens a store,
// ingests one event, reads its projection back, and checks it survives a
// reopen. Exits non-zero on any mismatch.
//
//   consumer [store directory]   (default: a fresh directory under $TMPDIR)

#include <chrono>
#include <filesystem>
#include <iostream>
#include <memory>
#include <string>
#include <string_view>
#include <system_error>

#include "eventfold/ingest.h"
#include "eventfold/options.h"
#include "eventfold/projection.h"
#include "eventfold/status.h"
#include "eventfold/store.h"

namespace {

constexpr std::string_view kBody = R"({"event_id":"evt_1","type":"receipt.issued",)"
                                   R"("occurred_at":"2026-11-29T10:15:30Z",)"
                                   R"("data":{"receipt_id":"rcp_1","amount":1500}})";

int Fail(const std::string& what) {
  std::cerr << "consumer: FAIL: " << what << "\n";
  return 1;
}

// Reads receipt/rcp_1 and checks it is the one issued event.
int CheckProjection(eventfold::Store& store, std::string_view when) {
  eventfold::Result<eventfold::Projection> got = store.Get("receipt", "rcp_1");
  if (!got.ok()) {
    return Fail(std::string(when) + ": Get(receipt, rcp_1): " + got.status().ToString());
  }
  const eventfold::Projection& p = *got;
  if (p.entity != "receipt" || p.id != "rcp_1") {
    return Fail(std::string(when) + ": projection is " + p.entity + "/" + p.id +
                ", want receipt/rcp_1");
  }
  if (p.state != "issued") {
    return Fail(std::string(when) + ": state is \"" + p.state + "\", want \"issued\"");
  }
  if (p.applied != 1) {
    return Fail(std::string(when) + ": applied is " + std::to_string(p.applied) + ", want 1");
  }
  return 0;
}

int Run(const std::string& dir) {
  {
    auto opened = eventfold::Store::Open(dir, eventfold::Options{});
    if (!opened.ok()) {
      return Fail("Open(" + dir + "): " + opened.status().ToString());
    }
    std::unique_ptr<eventfold::Store> store = std::move(opened).value();

    eventfold::IngestResult first = store->Ingest(kBody);
    if (first.outcome != eventfold::Outcome::kAccepted) {
      return Fail("first Ingest: " + std::string(eventfold::OutcomeName(first.outcome)) + " " +
                  first.message + ", want accepted");
    }
    eventfold::IngestResult again = store->Ingest(kBody);
    if (again.outcome != eventfold::Outcome::kDuplicate) {
      return Fail("second Ingest: " + std::string(eventfold::OutcomeName(again.outcome)) + " " +
                  again.message + ", want duplicate");
    }
    if (int rc = CheckProjection(*store, "after ingest")) return rc;
  }
  // The store was closed; what it accepted must still be there.
  auto reopened = eventfold::Store::Open(dir, eventfold::Options{});
  if (!reopened.ok()) {
    return Fail("reopen(" + dir + "): " + reopened.status().ToString());
  }
  if (int rc = CheckProjection(**reopened, "after reopen")) return rc;
  std::cout << "consumer: ok (receipt/rcp_1 issued)\n";
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  namespace fs = std::filesystem;
  fs::path dir;
  if (argc > 1) {
    dir = argv[1];
  } else {
    auto stamp = std::chrono::steady_clock::now().time_since_epoch().count();
    dir = fs::temp_directory_path() / ("eventfold-consumer-" + std::to_string(stamp));
  }
  std::error_code ec;
  fs::remove_all(dir, ec);
  int rc = Run(dir.string());
  fs::remove_all(dir, ec);
  return rc;
}
