// Read-only commands: show, list, log. Given a fold worker's directory
// (DIR/p<k> partition stores, docs/CLUSTER.md) they answer over all its
// partition stores, in the same shape and order as over one store.

#include <algorithm>
#include <iostream>
#include <memory>
#include <tuple>
#include <vector>

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
  auto print = [&](const Projection& p) {
    out.Line(ProjectionToJson(p));
    return true;
  };
  Status st;
  if (stores.size() == 1) {
    st = stores.front()->List(entity, print);
  } else {
    // Each partition store lists in order; their union is sorted here, held
    // in memory (a worker's stores together, so bounded by what it owns).
    std::vector<Projection> all;
    for (auto& store : stores) {
      st = store->List(entity, [&](const Projection& p) {
        all.push_back(p);
        return true;
      });
      if (!st.ok()) break;
    }
    std::sort(all.begin(), all.end(), [](const Projection& a, const Projection& b) {
      return std::tie(a.entity, a.id) < std::tie(b.entity, b.id);
    });
    for (const Projection& p : all) print(p);
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
    cmd->add_option("id", args->id, "entity key, e.g. rcp_1")->required();
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
