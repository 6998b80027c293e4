// Read-only commands: show, list, log. Given a fold worker's directory
// (DIR/p<k> partition stores, docs/CLUSTER.md) they answer over all its
// partition stores, in the same shape and order as over one store.

#include <algorithm>
#include <deque>
#include <functional>
#include <iostream>
#include <memory>
#include <optional>
#include <utility>
#include <vector>

#include "eventfold/event.h"
#include "tools/cli_common.h"
#include "tools/ndjson_out.h"
#include "tools/remote_read.h"

namespace eventfold::cli {
namespace {

struct EntityArgs {
  std::string dir, server, entity, id;
  bool pretty = false;
};

int Show(const EntityArgs& a) {
  std::vector<std::unique_ptr<Store>> stores = OpenStoresForRead(a.dir);
  if (stores.empty()) return kExitError;
  // One entity lives in one partition: the first store that has it answers.
  Result<Projection> p = Status::NotFound("");
  for (auto& store : stores) {
    p = store->Get(a.entity, a.id);
    if (p.ok() || !p.status().IsNotFound()) break;
  }
  if (p.status().IsNotFound()) {
    ExplainNoProjection(stores.front().get(), a.entity, a.id);
    return kExitNotFound;
  }
  if (!p.ok()) {
    std::cerr << "eventfold: " << p.status().ToString() << "\n";
    return kExitError;
  }
  PrintJson(ProjectionToJson(*p), a.pretty);
  return kExitOk;
}

// Calls `fn` with the JSON of every projection of `stores` (of `entity`
// when given) in (entity, id) order: each partition store lists in that
// order, and their listings are merged a page of each at a time, a page
// ending at kMergePage projections or kMergePageBytes of JSON, so memory
// holds about that much a store, not the union. Stops at the first store
// that fails, `fn` having been called for every projection before it in
// the merged order that was read.
Status MergedList(const std::vector<std::unique_ptr<Store>>& stores, const std::string& entity,
                  const std::function<void(const std::string& json)>& fn) {
  constexpr size_t kMergePage = 256;
  constexpr size_t kMergePageBytes = 1 << 20;
  struct Source {
    Store* store;
    std::deque<std::pair<EntityRef, std::string>> page;  // each projection's key and JSON
    std::optional<EntityRef> last;  // the last projection read, where the next page starts
    bool done = false;              // its listing ended
  };
  std::vector<Source> sources;
  for (const auto& store : stores) sources.push_back(Source{store.get(), {}, {}, false});
  auto refill = [&](Source& s) -> Status {
    if (s.done || !s.page.empty()) return Status::OK();
    size_t bytes = 0;
    bool full = false;
    auto take = [&](const Projection& p) {
      s.page.emplace_back(EntityRef{p.entity, p.id}, ProjectionToJson(p));
      bytes += s.page.back().second.size();
      full = s.page.size() >= kMergePage || bytes >= kMergePageBytes;
      return !full;
    };
    Status st = s.last ? s.store->ListAfter(entity, *s.last, take) : s.store->List(entity, take);
    if (!st.ok()) return st;
    s.done = !full;
    if (!s.page.empty()) s.last = s.page.back().first;
    return Status::OK();
  };
  for (;;) {
    Source* next = nullptr;
    for (Source& s : sources) {
      if (Status st = refill(s); !st.ok()) return st;
      if (!s.page.empty() && (next == nullptr || s.page.front().first < next->page.front().first)) {
        next = &s;
      }
    }
    if (next == nullptr) return Status::OK();
    fn(next->page.front().second);
    next->page.pop_front();
  }
}

// Prints every projection (of `entity` when given) as NDJSON in the store's
// order, (entity, id) bytewise; over a worker's partition stores, the same
// order, merged.
int List(const std::string& dir, const std::string& entity) {
  std::vector<std::unique_ptr<Store>> stores = OpenStoresForRead(dir);
  if (stores.empty()) return kExitError;
  const std::shared_ptr<const Profile> profile = stores.front()->profile();
  if (!entity.empty() && !profile->FindEntity(entity)) {
    std::cerr << "eventfold: profile \"" << profile->name() << "\" has no entity \"" << entity
              << "\"\n";
    return kExitNotFound;
  }
  NdjsonOut out;
  Status st;
  if (stores.size() == 1) {
    // One snapshot of the one store, as Store::List gives.
    st = stores.front()->List(entity, [&](const Projection& p) {
      out.Line(ProjectionToJson(p));
      return true;
    });
  } else {
    st = MergedList(stores, entity, [&](const std::string& json) { out.Line(json); });
  }
  out.Flush();
  if (!st.ok()) {
    std::cerr << "eventfold: " << st.ToString() << "\n";
    return kExitError;
  }
  return kExitOk;
}

int LogCmd(const EntityArgs& a) {
  std::vector<std::unique_ptr<Store>> stores = OpenStoresForRead(a.dir);
  if (stores.empty()) return kExitError;
  Result<EntityLog> log = Status::NotFound("");
  for (auto& store : stores) {
    log = store->Log(a.entity, a.id);
    if (log.ok() || !log.status().IsNotFound()) break;
  }
  if (log.status().IsNotFound()) {
    ExplainNoProjection(stores.front().get(), a.entity, a.id);
    return kExitNotFound;
  }
  if (!log.ok()) {
    std::cerr << "eventfold: " << log.status().ToString() << "\n";
    return kExitError;
  }
  PrintJson(EntityLogToJson(*log), a.pretty);
  return kExitOk;
}

// A document fetched with --server, printed as the --data path prints it.
int PrintRemote(int rc, const std::string& json, bool pretty) {
  if (rc == kExitOk) PrintJson(json, pretty);
  return rc;
}

std::shared_ptr<EntityArgs> AddEntityArgs(CLI::App* cmd, bool id_required) {
  auto args = std::make_shared<EntityArgs>();
  AddDataOption(cmd, &args->dir);
  AddServerOption(cmd, &args->server);
  cmd->add_option("entity", args->entity, "entity type, e.g. receipt")->required(id_required);
  if (id_required) {
    // No stored entity has a longer key (an event naming one is refused), so
    // such an id is refused here, the same way with --data and --server: the
    // admin listener would refuse its URL before looking (414).
    cmd->add_option("id", args->id, "entity key, e.g. rcp_1")
        ->required()
        ->check([](const std::string& id) {
          return id.size() <= kMaxEntityKeyBytes
                     ? std::string()
                     : "longer than " + std::to_string(kMaxEntityKeyBytes) +
                           " bytes, the longest key an entity can have";
        });
    cmd->add_flag("--pretty", args->pretty, "indent the JSON for reading");
  }
  return args;
}

}  // namespace

void AddShowCommand(CLI::App* app, Action* action) {
  auto* cmd = app->add_subcommand("show", "print one entity's projection");
  auto a = AddEntityArgs(cmd, true);
  cmd->callback([=] {
    *action = [=] {
      if (a->server.empty()) return Show(*a);
      std::string json;
      return PrintRemote(RemoteProjection(a->server, a->entity, a->id, &json), json, a->pretty);
    };
  });
}

void AddListCommand(CLI::App* app, Action* action) {
  auto* cmd = app->add_subcommand("list", "print every projection as NDJSON");
  auto a = AddEntityArgs(cmd, false);
  cmd->callback([=] {
    // An ENTITY given empty (`list ""`, a shell variable unset) is a
    // mistake, not "every entity": that is ENTITY left out.
    const bool empty_entity = cmd->count("entity") > 0 && a->entity.empty();
    *action = [=] {
      if (empty_entity) {
        std::cerr << "eventfold: list: ENTITY is empty (leave it out to list every entity)\n";
        return kExitError;
      }
      return a->server.empty() ? List(a->dir, a->entity) : RemoteList(a->server, a->entity);
    };
  });
}

void AddLogCommand(CLI::App* app, Action* action) {
  auto* cmd = app->add_subcommand("log", "print an entity's events in arrival and fold order");
  auto a = AddEntityArgs(cmd, true);
  cmd->callback([=] {
    *action = [=] {
      if (a->server.empty()) return LogCmd(*a);
      std::string json;
      return PrintRemote(RemoteLog(a->server, a->entity, a->id, &json), json, a->pretty);
    };
  });
}

}  // namespace eventfold::cli
