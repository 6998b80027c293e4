#include "replay/check.h"

#include <algorithm>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "core/decode.h"
#include "core/materializer.h"
#include "core/parse_number.h"
#include "core/sha256.h"
#include "replay/verify.h"
#include "storage/key_codec.h"
#include "storage/leveldb_status.h"
#include "storage/leveldb_util.h"
#include "storage/log_data.h"
#include "storage/record_codec.h"

namespace eventfold {
namespace {

using storage::FromLevelDb;
using storage::View;

// A stored number must fit 64 bits: "99999999999999999999" is damage too.
bool IsDecimal(std::string_view s) { return ParseU64(s).has_value(); }

std::string Seq(uint64_t seq) { return std::to_string(seq); }

class Checker {
 public:
  Checker(leveldb::DB* db, const CheckOptions& options, const CheckProblemFn& on_problem)
      : db_(db), o_(options), on_problem_(on_problem) {
    ro_.snapshot = options.snapshot;
    ro_.verify_checksums = true;
    ro_.fill_cache = false;
  }

  Result<CheckSummary> Run() {
    Clock* clock = o_.clock ? o_.clock : SystemClock();
    const int64_t start = clock->NowMicros();
    // m/ sorts after g/: learn first which other generation a rebuild builds.
    std::string marker;
    bool found = false;
    Status st = Lookup(storage::MetaKey("rebuild"), &marker, &found);
    if (!st.ok()) return st;
    if (found) {
      // A damaged marker is reported by the scan, at its key.
      Result<std::string> text = storage::DecodeText(storage::MetaKey("rebuild"), marker);
      const std::string gen = text.ok() ? text->substr(0, text->find('\n')) : std::string();
      if (std::optional<uint32_t> target = ParseU32(gen)) rebuild_target_ = *target;
    }
    st = Scan();
    if (!st.ok()) return st;
    if (!o_.scratch_path.empty()) {
      st = VerifyAsideToo();
      if (!st.ok()) return st;
    }
    sum_.seconds = static_cast<double>(clock->NowMicros() - start) / 1e6;
    return sum_;
  }

 private:
  void Problem(std::string_view key, std::string message) {
    ++sum_.problems;
    if (on_problem_) on_problem_(CheckProblem{storage::Printable(key), std::move(message)});
  }

  // A point read under the snapshot: OK with *found false when absent.
  Status Lookup(const std::string& key, std::string* value, bool* found) {
    leveldb::Status s = db_->Get(ro_, key, value);
    *found = s.ok();
    if (s.ok() || s.IsNotFound()) return Status::OK();
    return FromLevelDb(s, "check: reading " + storage::Printable(key));
  }

  // The stored event a/<seq>: nullopt when absent (reported as `missing`
  // against `referrer`) or corrupt (reported at its own key by the scan).
  Result<std::optional<storage::StoredEvent>> StoredEventAt(uint64_t seq, std::string_view referrer,
                                                            const std::string& what) {
    const std::string key = storage::EventKey(seq);
    std::string value;
    bool found = false;
    Status st = Lookup(key, &value, &found);
    if (!st.ok()) return st;
    if (!found) {
      Problem(referrer, what + " a/" + Seq(seq) + ", which does not exist");
      return std::optional<storage::StoredEvent>();
    }
    Result<storage::StoredEvent> e = storage::DecodeStoredEvent(key, value);
    if (!e.ok()) return std::optional<storage::StoredEvent>();
    return std::optional<storage::StoredEvent>(std::move(*e));
  }

  Status Scan() {
    std::unique_ptr<leveldb::Iterator> it(db_->NewIterator(ro_));
    it->SeekToFirst();
    while (it->Valid()) {
      const std::string key(View(it->key()));
      const std::string_view value = View(it->value());
      ++sum_.records;
      std::optional<std::string> seek;  // where to go on, when not Next()
      Status st;
      const std::string_view family = std::string_view(key).substr(0, 2);
      if (family == storage::kMetaPrefix) {
        CheckMeta(key, value);
      } else if (family == storage::kEventPrefix) {
        st = CheckEvent(key, value);
      } else if (family == storage::kDedupPrefix) {
        st = CheckDedup(key, value);
      } else if (family == storage::kConflictPrefix) {
        st = CheckConflict(key, value);
      } else if (family == storage::kQuarantinePrefix) {
        CheckRefused(key, value);
      } else if (family == storage::kFeedPrefix) {
        CheckChange(key, value);
      } else if (family == storage::kCheckpointPrefix) {
        if (key.size() == 2) Problem(key, "checkpoint without a subscription name");
        Result<std::string> text = storage::DecodeText(key, value);
        if (!text.ok()) {
          Problem(key, text.status().message());
        } else if (!IsDecimal(*text)) {
          Problem(key, "checkpoint is not a decimal sequence number");
        }
      } else if (family == storage::kParkedPrefix) {
        CheckParked(key, value);
      } else if (family == storage::kCompactionPrefix) {
        st = CheckCompaction(key, value);
      } else if (family == storage::kGenerationPrefix) {
        st = CheckGenerationKey(key, value, &seek);
      } else {
        Problem(key, "unknown key family");
      }
      if (!st.ok()) return st;
      if (seek) {
        it->Seek(*seek);
      } else {
        it->Next();
      }
    }
    if (!it->status().ok()) {
      // A damaged table block: LevelDB's own checksum. Nothing past it can
      // be scanned; report it as the store's problem, not the check's.
      Problem("", "LevelDB could not read on: " + it->status().ToString());
    }
    if (o_.last_change_seq > sum_.last_change) {
      Problem(storage::FeedKey(o_.last_change_seq), "the change feed ends at " +
                                                        Seq(sum_.last_change) +
                                                        " but the store numbered "
                                                        "changes up to " +
                                                        Seq(o_.last_change_seq));
    }
    return Status::OK();
  }

  void CheckMeta(const std::string& key, std::string_view framed) {
    const std::string_view name = std::string_view(key).substr(2);
    Result<std::string> text = storage::DecodeText(key, framed);
    if (!text.ok()) {
      Problem(key, text.status().message());
      return;
    }
    const std::string_view value = *text;
    if (name == "format") {
      if (value != storage::kFormatVersion)
        Problem(key, "unknown store format \"" + std::string(value) + "\"");
    } else if (name == "profile") {
      Result<Profile> p = Profile::FromJson(value);
      if (!p.ok()) Problem(key, "stored profile does not parse: " + p.status().message());
    } else if (name == "generation" || name == "log_generation") {
      const uint32_t live = name == "generation" ? o_.live.projections : o_.live.logs;
      if (!IsDecimal(value)) {
        Problem(key, std::string(name) + " is not a number");
      } else if (*ParseU64(value) != live) {
        Problem(key, std::string(name) + " " + std::string(value) + " is not the live one (" +
                         Seq(live) + ")");
      }
    } else if (name == "routing_epoch") {
      if (!IsDecimal(value)) Problem(key, "routing epoch is not a number");
    } else if (name == "retired_seq") {
      if (!IsDecimal(value)) Problem(key, "retired sequence number is not a number");
    } else if (name == "unrouted_index") {
      if (!IsDecimal(value)) {
        Problem(key, "the generation of the unrouted index is not a number");
      } else if (*ParseU64(value) != o_.live.logs) {
        Problem(key, "the unrouted index is of generation " + std::string(value) +
                         ", not the live log generation (" + Seq(o_.live.logs) + ")");
      }
    } else if (name == "rebuild") {
      if (!IsDecimal(value.substr(0, value.find('\n')))) {
        Problem(key, "rebuild marker is malformed");
      }
    } else if (name == "drop") {
      // A rebuild's drop of the old generations did not finish: what it
      // left is reported below, and the next Open deletes it.
      if (!value.empty()) Problem(key, "drop marker is malformed");
    } else {
      Problem(key, "unknown metadata name");
    }
  }

  Status CheckEvent(const std::string& key, std::string_view value) {
    ++sum_.events;
    if (!storage::ParseSeqKey(key, storage::kEventPrefix)) {
      Problem(key, "malformed event key");
      return Status::OK();
    }
    Result<storage::StoredEvent> e = storage::DecodeStoredEvent(key, value);
    if (!e.ok()) {
      Problem(key, e.status().message());
      return Status::OK();
    }
    const Event& ev = e->event;
    // Dedup: exactly this record answers for its event id.
    std::string dvalue;
    bool found = false;
    const std::string dkey = storage::DedupKey(ev.event_id);
    Status st = Lookup(dkey, &dvalue, &found);
    if (!st.ok()) return st;
    if (!found) {
      Problem(key, "event " + ev.event_id + " has no dedup entry " + storage::Printable(dkey) +
                       ": a redelivery would be stored again");
    } else if (Result<storage::DedupEntry> d = storage::DecodeDedup(dkey, dvalue); d.ok()) {
      if (d->seq != e->seq) {
        Problem(key, "event " + ev.event_id + " is stored twice or its dedup entry is wrong: " +
                         storage::Printable(dkey) + " names a/" + Seq(d->seq));
      } else if (d->has_identity ? d->type != ev.type || d->occurred_at != ev.occurred_at
                                 : !storage::DigestMatches(d->body_digest, Sha256(e->body))) {
        Problem(key, "event " + ev.event_id + " and its dedup entry disagree on its identity");
      }
    }
    // Routing under the store's profile: the body must still say what the
    // record says, and a routed event must be in its entity's log.
    Result<DecodedEvent> decoded = DecodeEvent(e->body, *o_.profile);
    if (!decoded.ok() || !decoded->entity) {
      // Unroutable under this profile: kept, unrouted, and indexed as such.
      const std::string ukey = storage::UnroutedKey(o_.live.logs, e->seq);
      std::string ignored;
      st = Lookup(ukey, &ignored, &found);
      if (!st.ok()) return st;
      if (!found) {
        Problem(key, "event " + ev.event_id + " is unrouted but missing from the index " +
                         storage::Printable(ukey));
      }
      if (!decoded.ok()) return Status::OK();
    }
    if (decoded->event.event_id != ev.event_id || decoded->event.type != ev.type ||
        decoded->event.occurred_at != ev.occurred_at || decoded->event.version != ev.version) {
      Problem(key, "the stored body and the record's fields disagree");
      return Status::OK();
    }
    if (!decoded->entity) return Status::OK();
    const std::string lkey =
        storage::LogKey(o_.live.logs, *decoded->entity, KeyOf(decoded->event, decoded->rank));
    std::string lvalue;
    st = Lookup(lkey, &lvalue, &found);
    if (!st.ok()) return st;
    if (!found) {
      Problem(key, "event " + ev.event_id + " routes to " + decoded->entity->entity + "/" +
                       decoded->entity->id + " but is missing from its log");
    } else if (Result<storage::LogEntry> l = storage::DecodeLog(lkey, lvalue, *o_.profile);
               l.ok()) {
      if (l->seq != e->seq) {
        Problem(key, "the log entry of event " + ev.event_id + " names a/" + Seq(l->seq));
      }
    }
    return Status::OK();
  }

  Status CheckDedup(const std::string& key, std::string_view value) {
    ++sum_.dedup;
    if (key.size() == 2) Problem(key, "dedup entry without an event id");
    Result<storage::DedupEntry> d = storage::DecodeDedup(key, value);
    if (!d.ok()) {
      Problem(key, d.status().message());
      return Status::OK();
    }
    if (d->expires_at != 0) {
      // A tombstone: its event was compacted with its entity.
      ++sum_.tombstones;
      std::string ignored;
      bool found = false;
      Status st =
          d->entity ? Lookup(storage::CompactionKey(*d->entity), &ignored, &found) : Status::OK();
      if (!st.ok()) return st;
      if (!found) Problem(key, "dedup tombstone without a compacted entity");
      return Status::OK();
    }
    Result<std::optional<storage::StoredEvent>> e =
        StoredEventAt(d->seq, key, "dedup entry points at");
    if (!e.ok()) return e.status();
    if (*e && (*e)->event.event_id != std::string_view(key).substr(2)) {
      Problem(key, "dedup entry points at a/" + Seq(d->seq) + ", which holds event " +
                       (*e)->event.event_id);
    }
    return Status::OK();
  }

  Status CheckConflict(const std::string& key, std::string_view value) {
    ++sum_.conflicts;
    if (!storage::ParseSeqKey(key, storage::kConflictPrefix))
      Problem(key, "malformed conflict key");
    Result<storage::ConflictEntry> c = storage::DecodeConflict(key, value);
    if (!c.ok()) {
      Problem(key, c.status().message());
      return Status::OK();
    }
    // The winner may be compacted: its tombstone then answers for it.
    std::string dvalue;
    bool dfound = false;
    const std::string dkey = storage::DedupKey(c->event_id);
    Status st = Lookup(dkey, &dvalue, &dfound);
    if (!st.ok()) return st;
    if (dfound) {
      Result<storage::DedupEntry> d = storage::DecodeDedup(dkey, dvalue);
      if (d.ok() && d->expires_at != 0 && d->seq == c->first_seq) return Status::OK();
    }
    Result<std::optional<storage::StoredEvent>> e =
        StoredEventAt(c->first_seq, key, "conflict record names the stored event as");
    if (!e.ok()) return e.status();
    if (*e && (*e)->event.event_id != c->event_id) {
      Problem(key, "conflict record of " + c->event_id + " names a/" + Seq(c->first_seq) +
                       ", which holds event " + (*e)->event.event_id);
    }
    return Status::OK();
  }

  void CheckRefused(const std::string& key, std::string_view value) {
    ++sum_.refused;
    if (!storage::ParseSeqKey(key, storage::kQuarantinePrefix)) {
      Problem(key, "malformed quarantine key");
    }
    if (Result<RefusedDelivery> r = storage::DecodeRefused(key, value); !r.ok()) {
      Problem(key, r.status().message());
    }
  }

  void CheckChange(const std::string& key, std::string_view value) {
    ++sum_.changes;
    std::optional<uint64_t> seq = storage::ParseSeqKey(key, storage::kFeedPrefix);
    if (!seq) {
      Problem(key, "malformed change feed key");
      return;
    }
    if (Result<Change> c = storage::DecodeChange(key, value); !c.ok()) {
      Problem(key, c.status().message());
    }
    if (sum_.first_change == 0) {
      sum_.first_change = *seq;
    } else if (*seq != sum_.last_change + 1) {
      Problem(key, "change feed gap: changes " + Seq(sum_.last_change + 1) + ".." + Seq(*seq - 1) +
                       " are missing");
    }
    sum_.last_change = *seq;
  }

  void CheckParked(const std::string& key, std::string_view value) {
    const size_t nul = key.find('\0');
    if (nul == std::string::npos || nul == 2 || key.size() != nul + 1 + 8) {
      Problem(key, "malformed dead letter key");
      return;
    }
    if (Result<ParkedChange> p = storage::DecodeParked(key, value); !p.ok()) {
      Problem(key, p.status().message());
    }
  }

  Status CheckGenerationKey(const std::string& key, std::string_view value,
                            std::optional<std::string>* seek) {
    // "g/<gen>/" then a two-byte family ("l/", "p/", "s/", "u/").
    const std::optional<storage::GenerationKeyView> g = storage::ParseGenerationKey(key);
    if (!g || g->rest.size() < 2) {
      Problem(key, "malformed generation key");
      return Status::OK();
    }
    const uint32_t gen = g->gen;
    if (gen != o_.live.projections && gen != o_.live.logs) {
      if (!o_.rebuild_running && gen != rebuild_target_) {
        Problem(storage::GenerationPrefix(gen),
                "keys of generation " + Seq(gen) + " beside the live generations " +
                    Seq(o_.live.projections) + " (projections) and " + Seq(o_.live.logs) +
                    " (logs) (left by an interrupted rebuild or drop)");
      }
      *seek = storage::PrefixEnd(storage::GenerationPrefix(gen));
      return Status::OK();
    }
    const std::string_view family = g->rest.substr(0, 2);
    if (std::find(storage::kGenerationFamilies.begin(), storage::kGenerationFamilies.end(),
                  family) == storage::kGenerationFamilies.end()) {
      Problem(key, "unknown generation family");
      return Status::OK();
    }
    if (!storage::IsLiveFamily(o_.live, gen, family)) {
      Problem(storage::FamilyPrefix(gen, family),
              "keys of family " + std::string(family) + " of generation " + Seq(gen) +
                  ", which holds only the live " + (gen == o_.live.logs ? "logs" : "projections") +
                  " (left by an interrupted drop)");
      *seek = storage::PrefixEnd(storage::FamilyPrefix(gen, family));
      return Status::OK();
    }
    if (family == storage::kLogFamily) return CheckLogEntry(key, value);
    if (family == storage::kProjectionFamily) return CheckProjection(key, value);
    if (family == storage::kSnapshotFamily) return CheckSnapshotRecord(key, value);
    return CheckUnroutedEntry(key, value);
  }

  // An entry of the unrouted index: its event is stored and no entity of
  // the profile routes it.
  Status CheckUnroutedEntry(const std::string& key, std::string_view value) {
    const std::optional<uint64_t> seq =
        storage::ParseSeqKey(key, storage::UnroutedFamilyPrefix(o_.live.logs));
    if (!seq || !value.empty()) {
      Problem(key, "malformed unrouted index entry");
      return Status::OK();
    }
    Result<std::optional<storage::StoredEvent>> e =
        StoredEventAt(*seq, key, "unrouted index entry names");
    if (!e.ok()) return e.status();
    if (!*e) return Status::OK();  // reported by StoredEventAt
    Result<DecodedEvent> decoded = DecodeEvent((*e)->body, *o_.profile);
    if (decoded.ok() && decoded->entity) {
      Problem(key, "the unrouted index names event " + (*e)->event.event_id + ", which routes to " +
                       decoded->entity->entity + "/" + decoded->entity->id);
    }
    return Status::OK();
  }

  // A compacted entity: its record decodes, its type exists, and it has a
  // projection (which CheckProjection folds on from the snapshot).
  Status CheckCompaction(const std::string& key, std::string_view value) {
    ++sum_.compacted;
    Result<storage::CompactionEntry> c = storage::DecodeCompaction(key, value);
    if (!c.ok()) {
      Problem(key, c.status().message());
      return Status::OK();
    }
    const EntityRef ref{c->snapshot.projection.entity, c->snapshot.projection.id};
    if (!o_.profile->FindEntity(ref.entity)) {
      Problem(key,
              "compacted entity of type \"" + ref.entity + "\", which the store's profile lacks");
      return Status::OK();
    }
    std::optional<EntityRef> none;
    return RequireProjection(key, ref, "compaction record", &none);
  }

  // Log and snapshot records of an entity need its projection; checked once
  // per entity as the scan enters it.
  Status RequireProjection(const std::string& key, const EntityRef& ref, const char* what,
                           std::optional<EntityRef>* last) {
    if (*last && **last == ref) return Status::OK();
    *last = ref;
    std::string value;
    bool found = false;
    Status st = Lookup(storage::ProjectionKey(o_.live.projections, ref), &value, &found);
    if (!st.ok()) return st;
    if (!found) {
      Problem(key,
              std::string(what) + " of " + ref.entity + "/" + ref.id + ", which has no projection");
    }
    return Status::OK();
  }

  Status CheckLogEntry(const std::string& key, std::string_view value) {
    ++sum_.log_entries;
    auto parsed = storage::ParseLogKey(key);
    if (!parsed) {
      Problem(key, "malformed log key");
      return Status::OK();
    }
    const auto& [ref, fold] = *parsed;
    Status st = RequireProjection(key, ref, "log", &log_entity_);
    if (!st.ok()) return st;
    const EntityType* type = o_.profile->FindEntity(ref.entity);
    if (!type) {
      Problem(key, "log of entity type \"" + ref.entity + "\", which the store's profile lacks");
      return Status::OK();
    }
    Result<storage::LogEntry> e = storage::DecodeLog(key, value, *o_.profile);
    if (!e.ok()) {
      Problem(key, e.status().message());
      return Status::OK();
    }
    const Event& ev = e->ranked.event;
    if (KeyOf(ev, e->ranked.rank) != fold) {
      Problem(key, "the log record of " + ev.event_id + " is not at its fold position");
    }
    if (e->ranked.rank >= type->transitions.size() ||
        type->transitions[e->ranked.rank].type != ev.type) {
      Problem(key, "the log record of " + ev.event_id + " has a rank its type does not have");
    }
    Result<std::optional<storage::StoredEvent>> stored =
        StoredEventAt(e->seq, key, "log entry of " + ev.event_id + " names its event as");
    if (!stored.ok()) return stored.status();
    if (!*stored) return Status::OK();
    if ((*stored)->event.event_id != ev.event_id) {
      Problem(key, "log entry of " + ev.event_id + " names a/" + Seq(e->seq) +
                       ", which holds event " + (*stored)->event.event_id);
      return Status::OK();
    }
    Result<DecodedEvent> decoded = DecodeEvent((*stored)->body, *o_.profile);
    if (!decoded.ok() || decoded->entity != ref) {
      Problem(key, "event " + ev.event_id + " does not route to " + ref.entity + "/" + ref.id +
                       " under the store's profile");
    }
    return Status::OK();
  }

  Status CheckSnapshotRecord(const std::string& key, std::string_view value) {
    ++sum_.snapshots;
    auto parsed = storage::ParseLogKey(key);
    if (!parsed) {
      Problem(key, "malformed snapshot key");
      return Status::OK();
    }
    if (Result<storage::ProjectionState> s = storage::DecodeProjection(key, value); !s.ok()) {
      Problem(key, s.status().message());
    }
    // Its content is compared with the fold when its projection is checked.
    return RequireProjection(key, parsed->first, "fold snapshot", &snapshot_entity_);
  }

  // The projection against the fold of its own log, and each fold snapshot
  // against the fold up to its position.
  Status CheckProjection(const std::string& key, std::string_view value) {
    ++sum_.projections;
    std::optional<EntityRef> ref = storage::ParseProjectionKey(key);
    if (!ref) {
      Problem(key, "malformed projection key");
      return Status::OK();
    }
    Result<storage::ProjectionState> stored = storage::DecodeProjection(key, value);
    if (!stored.ok()) {
      Problem(key, stored.status().message());
      return Status::OK();
    }
    const EntityType* type = o_.profile->FindEntity(ref->entity);
    if (!type) {
      Problem(key,
              "projection of entity type \"" + ref->entity + "\", which the store's profile lacks");
      return Status::OK();
    }
    storage::ProjectionState folded;
    folded.projection.entity = ref->entity;
    folded.projection.id = ref->id;
    // A compacted entity folds on from its compaction record's snapshot.
    std::string cvalue;
    bool compacted = false;
    const std::string ckey = storage::CompactionKey(*ref);
    Status st = Lookup(ckey, &cvalue, &compacted);
    if (!st.ok()) return st;
    if (compacted) {
      Result<storage::CompactionEntry> c = storage::DecodeCompaction(ckey, cvalue);
      if (!c.ok()) return Status::OK();  // reported by the scan
      folded = std::move(c->snapshot);
    }

    const std::string log_prefix = storage::LogPrefix(o_.live.logs, *ref);
    const std::string snap_prefix = storage::SnapshotPrefix(o_.live.projections, *ref);
    std::unique_ptr<leveldb::Iterator> log(db_->NewIterator(ro_));
    std::unique_ptr<leveldb::Iterator> snap(db_->NewIterator(ro_));
    snap->Seek(snap_prefix);
    bool foldable = true;  // false once a log record cannot be folded
    auto compare_snapshots = [&](const FoldKey* upto) {
      // Every snapshot at or before `upto` (all when null) is due now.
      for (; snap->Valid() && snap->key().starts_with(snap_prefix); snap->Next()) {
        auto at = storage::ParseLogKey(View(snap->key()));
        if (!at) {
          continue;  // reported by the scan
        }
        if (upto && *upto < at->second) return;
        Result<storage::ProjectionState> s =
            storage::DecodeProjection(View(snap->key()), View(snap->value()));
        if (!s.ok()) continue;  // reported by the scan
        if (!upto || at->second != *upto) {
          Problem(View(snap->key()), "fold snapshot at a position no log entry has");
          continue;
        }
        s->projection.entity = ref->entity;
        s->projection.id = ref->id;
        if (!(s->projection == folded.projection) || s->events != folded.events ||
            !(s->last == folded.last)) {
          Problem(View(snap->key()), "fold snapshot differs from the fold of the log up to it");
        }
      }
    };
    if (compacted) {
      if (!snap->Valid() || View(snap->key()) != storage::SnapshotKey(o_.live.projections, *ref,
                                                                      storage::CompactionPoint())) {
        Problem(key, "compacted entity without its compaction snapshot");
      }
      compare_snapshots(&folded.last);
    }
    for (log->Seek(log_prefix); foldable && log->Valid() && log->key().starts_with(log_prefix);
         log->Next()) {
      Result<storage::LogEntry> e =
          storage::DecodeLog(View(log->key()), View(log->value()), *o_.profile);
      if (!e.ok() || e->ranked.rank >= type->transitions.size() ||
          type->transitions[e->ranked.rank].type != e->ranked.event.type ||
          !storage::LoadLogData(db_, ro_, *o_.profile, &*e).ok()) {
        foldable = false;  // reported by the scan
        break;
      }
      // The rank was checked just above, so this cannot fail.
      (void)ApplyToState(*type, e->ranked, &folded);
      if (foldable) compare_snapshots(&folded.last);
    }
    if (!log->status().ok()) return FromLevelDb(log->status(), "check: reading a log");
    if (!foldable) return Status::OK();
    if (folded.events == 0) {
      Problem(key, "projection of " + ref->entity + "/" + ref->id + " has no log");
      return Status::OK();
    }
    compare_snapshots(nullptr);  // past the log's end
    if (!snap->status().ok()) return FromLevelDb(snap->status(), "check: reading snapshots");
    // Compare as stored: the fold's result through the codec, whole or
    // (format 4) as the cursor a read completes from the log checked above.
    Result<storage::ProjectionState> refolded =
        storage::DecodeProjection(key, stored->cursor_only ? storage::EncodeProjectionCursor(folded)
                                                           : storage::EncodeProjection(folded));
    if (!refolded.ok()) return refolded.status();
    if (!(stored->projection == refolded->projection) || stored->events != refolded->events ||
        !(stored->last == refolded->last)) {
      Problem(key, "projection differs from the fold of its log: stored " +
                       ProjectionToJson(stored->projection) + " (" + Seq(stored->events) +
                       " events), log folds to " + ProjectionToJson(refolded->projection) + " (" +
                       Seq(refolded->events) + " events)");
    }
    return Status::OK();
  }

  Status VerifyAsideToo() {
    VerifyOptions vo;
    vo.scratch_path = o_.scratch_path;
    vo.env = o_.env;
    vo.profile = o_.profile;
    vo.live = o_.live;
    vo.snapshot = o_.snapshot;
    vo.snapshot_interval = o_.snapshot_interval;
    vo.clock = o_.clock;
    Result<VerifySummary> v = VerifyAside(
        db_, vo,
        [&](const std::optional<Projection>& live, const std::optional<Projection>& rebuilt) {
          const Projection& any = live ? *live : *rebuilt;
          Problem(storage::ProjectionKey(o_.live.projections, EntityRef{any.entity, any.id}),
                  "projection differs from a rebuild from the stored events: live " +
                      (live ? ProjectionToJson(*live) : std::string("none")) + ", rebuilt " +
                      (rebuilt ? ProjectionToJson(*rebuilt) : std::string("none")));
        });
    if (!v.ok()) {
      if (v.status().IsIOError()) return v.status();
      Problem("", "rebuilding aside to verify failed: " + v.status().message());
      return Status::OK();
    }
    sum_.verified = v->entities;
    return Status::OK();
  }

  leveldb::DB* db_;
  const CheckOptions& o_;
  const CheckProblemFn& on_problem_;
  leveldb::ReadOptions ro_;
  CheckSummary sum_;
  uint32_t rebuild_target_ = 0;  // the generation m/rebuild names (0: none)
  std::optional<EntityRef> log_entity_;
  std::optional<EntityRef> snapshot_entity_;
};

}  // namespace

Result<CheckSummary> CheckStore(leveldb::DB* db, const CheckOptions& options,
                                const CheckProblemFn& on_problem) {
  if (options.profile == nullptr) return Status::InvalidArgument("check: no profile");
  return Checker(db, options, on_problem).Run();
}

}  // namespace eventfold
