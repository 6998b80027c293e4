// eventfold dlq list|retry|drop --data DIR --subscription NAME [--seq N] :
// a subscription's dead letters (parked changes).
//
// retry marks dead letters for redrive; the subscription re-delivers them
// when it next starts (a store is open in one process at a time), in seq
// order per entity. --seq N retries N's whole entity: its later dead letters
// are parked behind N and cannot go before it.

#include <iostream>
#include <limits>

#include "core/json_writer.h"
#include "eventfold/subscription.h"
#include "tools/cli_common.h"

namespace eventfold::cli {
namespace {

struct DlqArgs {
  std::string dir;
  std::string subscription;
  uint64_t seq = 0;
  bool all = false;
};

// Exit 1 for an unknown subscription: the name is the input a check refused.
int CheckKnown(Store* store, const std::string& name) {
  bool known = false;
  Status st = store->feed().ListSubscriptions([&](const std::string& n, uint64_t) {
    known = n == name;
    return !known;
  });
  if (!st.ok()) {
    std::cerr << "eventfold: " << st.ToString() << "\n";
    return kExitError;
  }
  if (!known) {
    std::cerr << "eventfold: no subscription \"" << name << "\" in this store\n";
    return kExitNotFound;
  }
  return kExitOk;
}

int Report(const Result<size_t>& r, const char* key) {
  if (!r.ok()) {
    std::cerr << "eventfold: " << r.status().ToString() << "\n";
    return r.status().IsNotFound() ? kExitNotFound : kExitError;
  }
  JsonWriter w;
  w.BeginObject().Key(key).Uint(*r).EndObject();
  std::cout << w.str() << "\n";
  return kExitOk;
}

int Dlq(const std::string& verb, const DlqArgs& a) {
  if (verb == "drop" && a.seq == 0 && !a.all) {
    std::cerr << "eventfold: dlq drop needs --seq N or --all\n";
    return kExitError;
  }
  std::unique_ptr<Store> store = OpenStore(a.dir, /*create=*/false);
  if (!store) return kExitError;
  if (int rc = CheckKnown(store.get(), a.subscription); rc != kExitOk) return rc;
  if (verb == "retry") return Report(MarkForRedrive(store.get(), a.subscription, a.seq), "marked");
  if (verb == "drop") return Report(DropParked(store.get(), a.subscription, a.seq), "dropped");
  bool found = false;
  Status st = store->feed().ListParked(a.subscription, [&](const ParkedChange& p) {
    if (a.seq != 0 && p.change.seq != a.seq) return true;
    found = true;
    std::cout << ParkedChangeToJson(p) << "\n";
    return true;
  });
  if (!st.ok()) {
    std::cerr << "eventfold: " << st.ToString() << "\n";
    return kExitError;
  }
  if (!found && a.seq == 0) {
    std::cerr << "eventfold: no dead letters in subscription " << a.subscription << "\n";
  } else if (!found) {
    std::cerr << "eventfold: no dead letter " << a.seq << " in subscription " << a.subscription
              << "\n";
    return kExitNotFound;
  }
  return kExitOk;
}

void AddVerb(CLI::App* dlq, const std::string& verb, const std::string& help, Action* action) {
  auto* cmd = dlq->add_subcommand(verb, help);
  auto args = std::make_shared<DlqArgs>();
  AddDataOption(cmd, &args->dir);
  cmd->add_option("--subscription", args->subscription, "subscription name")->required();
  // A change's seq starts at 1; 0 stands for "no --seq" (every dead letter)
  // here, and CLI11 reads "-1" as 2^64 - 1: both are usage errors, or
  // `retry --seq 0` would mark every dead letter.
  const CLI::Validator a_seq = WithinRange(1, std::numeric_limits<int64_t>::max());
  if (verb == "list") {
    cmd->add_option("--seq", args->seq, "only this dead letter")->check(a_seq);
  } else if (verb == "retry") {
    cmd->add_option("--seq", args->seq, "only this dead letter's entity (default: all)")
        ->check(a_seq);
  } else {
    auto* seq = cmd->add_option("--seq", args->seq, "the dead letter to delete")->check(a_seq);
    cmd->add_flag("--all", args->all, "delete every dead letter")->excludes(seq);
  }
  cmd->callback([=] { *action = [=] { return Dlq(verb, *args); }; });
}

}  // namespace

void AddDlqCommand(CLI::App* app, Action* action) {
  auto* dlq = app->add_subcommand("dlq", "a subscription's dead letters (parked changes)");
  dlq->require_subcommand(1);
  AddVerb(dlq, "list", "print the dead letters, oldest first, as NDJSON", action);
  AddVerb(dlq, "retry", "mark dead letters for redrive: the subscription re-delivers them in order",
          action);
  AddVerb(dlq, "drop", "delete dead letters (their entity is unblocked when none is left)", action);
}

}  // namespace eventfold::cli
