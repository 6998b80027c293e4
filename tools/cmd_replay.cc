// eventfold replay --data DIR [--verify] [--profile FILE]

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <iostream>
#include <memory>

#include "core/json_writer.h"
#include "tools/cli_common.h"
#include "tools/profile_switch.h"

namespace eventfold::cli {
namespace {

int Verify(Store* store) {
  Result<VerifySummary> sum = store->maintenance().Verify(
      [](const std::optional<Projection>& live, const std::optional<Projection>& rebuilt) {
        const Projection& any = live ? *live : *rebuilt;
        JsonWriter w;
        w.BeginObject().Key("entity").String(any.entity).Key("id").String(any.id);
        w.Key("live");
        live ? w.Raw(ProjectionToJson(*live)) : w.Null();
        w.Key("rebuilt");
        rebuilt ? w.Raw(ProjectionToJson(*rebuilt)) : w.Null();
        w.EndObject();
        std::cout << w.str() << "\n";
        std::cerr << "eventfold: " << any.entity << "/" << any.id << " differs from its rebuild\n";
      });
  if (!sum.ok()) {
    std::cerr << "eventfold: " << sum.status().ToString() << "\n";
    // An entity type the profile lacks, or an id with no events: not found,
    // the same exit code as `show`/`list` give.
    return sum.status().IsNotFound() ? kExitNotFound : kExitError;
  }
  JsonWriter w;
  w.BeginObject()
      .Key("verified")
      .Bool(sum->differences == 0)
      .Key("entities")
      .Uint(sum->entities)
      .Key("differences")
      .Uint(sum->differences)
      .Key("seconds")
      .Double(sum->seconds)
      .EndObject();
  std::cout << w.str() << "\n";
  return sum->differences == 0 ? kExitOk : kExitRefused;
}

struct ReplayArgs {
  std::string dir, profile_file, entity, id;
  bool verify = false;
  bool quiet = false;
  bool dry_run = false;
  bool force = false;
  bool rederive_logs = false;
  int threads = 0;
};

// Progress on stderr: a line redrawn in place on a terminal, otherwise a
// plain line every few seconds (logs stay readable).
std::function<void(const RebuildProgress&)> ProgressPrinter() {
  auto line = std::make_shared<ProgressLine>(/*first_at_once=*/true);
  return [line](const RebuildProgress& p) {
    // An in-place re-fold does not know its total (events_total 0) until done.
    const bool final = p.events_done == p.events_total;
    const double rate = p.seconds > 0 ? static_cast<double>(p.events_done) / p.seconds : 0;
    const uint64_t total = std::max(p.events_total, p.events_done);
    const double eta = rate > 0 ? static_cast<double>(total - p.events_done) / rate : 0;
    char text[200];
    std::snprintf(
        text, sizeof(text),
        "replay: %llu/%llu events (%.0f%%), %llu entities, %.0f events/s, ETA %.0f s",
        static_cast<unsigned long long>(p.events_done), static_cast<unsigned long long>(total),
        total ? 100.0 * static_cast<double>(p.events_done) / static_cast<double>(total) : 100.0,
        static_cast<unsigned long long>(p.entities_done), rate, eta);
    line->Show(p.seconds, final, text);
  };
}

int Replay(const ReplayArgs& a) {
  std::unique_ptr<Store> store = OpenStore(a.dir, /*create=*/false);
  if (!store) return kExitError;
  if (a.verify) {
    if (!a.profile_file.empty() || !a.entity.empty()) {
      std::cerr << "eventfold: --verify compares the whole store under its own profile; "
                   "drop --profile, --entity and --id\n";
      return kExitError;
    }
    return Verify(store.get());
  }
  const std::string& profile_file = a.profile_file;
  std::optional<Profile> profile;
  if (!profile_file.empty()) {
    Result<Profile> p = Profile::FromFile(profile_file);
    if (!p.ok()) {
      std::cerr << "eventfold: " << p.status().message() << "\n";
      return kExitError;
    }
    profile = std::move(*p);
  }
  if ((a.dry_run || a.force) && !profile) {
    std::cerr << "eventfold: --dry-run and --force apply to a profile switch: add --profile FILE\n";
    return kExitError;
  }
  const bool switching = profile && profile->Fingerprint() != store->profile()->Fingerprint();
  if (a.dry_run && !switching) {
    std::cerr << "eventfold: the store already uses this profile: nothing would change\n";
    return kExitOk;
  }
  // A switch is checked first unless forced: the unrouted events under both
  // profiles (two scans of the stored events). Only the dry run also
  // rebuilds aside to compare the projections, as long as the switch itself.
  if (switching && (a.dry_run || !a.force)) {
    Result<ProfileSwitchPlan> plan =
        PlanProfileSwitch(store.get(), *profile, /*compare_projections=*/a.dry_run);
    if (!plan.ok()) {
      std::cerr << "eventfold: " << plan.status().ToString() << "\n";
      return kExitError;
    }
    if (a.dry_run) {
      std::cout << PlanToJson(*plan) << "\n";
      return kExitOk;
    }
    if (plan->newly_unrouted > 0) {
      std::cerr << "eventfold: refused: switching from profile \"" << plan->from << "\" to \""
                << plan->to << "\" would leave " << DescribeLoss(*plan)
                << "; --dry-run shows the plan, --force switches anyway\n";
      return kExitRefused;
    }
  }
  RebuildOptions options;
  options.profile = profile ? &*profile : nullptr;
  options.entity = a.entity;
  options.id = a.id;
  options.threads = a.threads;
  options.rederive_logs = a.rederive_logs;
  if (!a.quiet) options.progress = ProgressPrinter();
  Result<RebuildSummary> sum = store->maintenance().Rebuild(options);
  if (!a.quiet && isatty(STDERR_FILENO)) std::cerr << "\n";
  if (!sum.ok()) {
    std::cerr << "eventfold: " << sum.status().ToString() << "\n";
    // An entity type the profile lacks, or an id with no events: not found,
    // the same exit code as `show`/`list` give.
    return sum.status().IsNotFound() ? kExitNotFound : kExitError;
  }
  JsonWriter w;
  w.BeginObject()
      .Key("entities")
      .Uint(sum->entities)
      .Key("events")
      .Uint(sum->events)
      .Key("applied")
      .Uint(sum->applied)
      .Key("rejected")
      .Uint(sum->rejected)
      .Key("unrouted")
      .Uint(sum->unrouted)
      .Key("seconds")
      .Double(sum->seconds)
      .Key("events_per_second")
      .Double(sum->seconds > 0 ? static_cast<double>(sum->events) / sum->seconds : 0)
      .Key("pause_seconds")
      .Double(sum->pause_seconds)
      .EndObject();
  std::cout << w.str() << "\n";
  return kExitOk;
}

}  // namespace

void AddReplayCommand(CLI::App* app, Action* action) {
  auto* cmd = app->add_subcommand("replay", "rebuild every projection from the stored events");
  auto a = std::make_shared<ReplayArgs>();
  AddDataOption(cmd, &a->dir);
  cmd->add_flag("--verify", a->verify, "rebuild aside and compare; exit 1 on any difference");
  cmd->add_option("--profile", a->profile_file, "rebuild under this profile and switch to it");
  cmd->add_flag("--dry-run", a->dry_run,
                "with --profile: print what the switch would change, change nothing");
  cmd->add_flag("--force", a->force,
                "with --profile: switch even when routed events would become unrouted");
  cmd->add_option("--entity", a->entity, "only this entity type (re-fold in place)");
  cmd->add_option("--id", a->id, "only this entity (with --entity)");
  cmd->add_option("--threads", a->threads, "worker threads (default: one per core)")
      ->check(WithinRange(1, 256));
  cmd->add_flag("--rederive-logs", a->rederive_logs,
                "derive every entity log anew from the stored events instead of copying the "
                "live ones (after `check` reports damaged logs)");
  cmd->add_flag("--quiet", a->quiet, "no progress on stderr");
  cmd->callback([=] { *action = [=] { return Replay(*a); }; });
}

}  // namespace eventfold::cli
