#include "store/salvage.h"

#include <leveldb/write_batch.h>

#include <algorithm>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>

#include "core/decode.h"
#include "core/parse_number.h"
#include "replay/check.h"
#include "storage/key_codec.h"
#include "storage/leveldb_status.h"
#include "storage/leveldb_util.h"
#include "storage/meta_text.h"
#include "storage/record_codec.h"

namespace eventfold {
namespace {

class Salvage {
 public:
  Salvage(leveldb::DB* db, const LostDataFn& on_lost, const std::function<Status()>& before_write,
          RepairSummary* summary)
      : db_(db), on_lost_(on_lost), before_write_(before_write), sum_(summary) {}

  Status Run(const std::vector<FileDamage>& damage) {
    feed_floor_ = FeedSeqsNamedBy(damage);
    for (Status (Salvage::*step)() :
         {&Salvage::Meta, &Salvage::Dedup, &Salvage::Events, &Salvage::Others, &Salvage::Feed}) {
      Status st = (this->*step)();
      if (!st.ok()) return st;
    }
    for (const FileDamage& d : damage) ReportWindow(d);
    return Status::OK();
  }

 private:
  void Lost(LostData l) { on_lost_(l); }

  void Drop(leveldb::WriteBatch* batch, std::string_view key, const std::string& why) {
    batch->Delete(leveldb::Slice(key.data(), key.size()));
    ++sum_->dropped;
    LostData l;
    l.kind = LostData::Kind::kRecords;
    l.detail = storage::Printable(key) + ": " + why;
    Lost(std::move(l));
  }

  Status Apply(leveldb::WriteBatch* batch) {
    Status st = before_write_();
    if (st.ok()) st = storage::FromLevelDb(db_->Write(storage::Synced(), batch), "repairing");
    batch->Clear();
    return st;
  }

  // The event stored at a/<seq>, if its record is readable (its body is
  // not decoded: see Identity).
  std::optional<storage::StoredEvent> EventAt(uint64_t seq) {
    const std::string key = storage::EventKey(seq);
    std::string value;
    if (!db_->Get(leveldb::ReadOptions(), key, &value).ok()) return std::nullopt;
    Result<storage::StoredEvent> e = storage::DecodeStoredBody(key, value);
    if (!e.ok()) return std::nullopt;
    return std::move(*e);
  }

  // A readable record's identity: the record's (before format 8) or its
  // body's. Nullopt when the body no longer decodes (a later build's rules,
  // or damage behind a matching checksum): the event is then kept as it
  // is, never counted lost, since nothing says it is.
  static std::optional<Event> Identity(const storage::StoredEvent& e) {
    if (e.has_identity) return e.event;
    Result<Event> decoded = DecodeIdentity(e.body);
    if (!decoded.ok()) return std::nullopt;
    return std::move(*decoded);
  }

  // The store's metadata: the format and routing epoch get their first
  // values back when lost (epoch 1 with routing epoch 0 in restored dedup
  // entries makes the store re-route as needed). A lost generation number
  // (of the projections or of the logs) leaves the derived records
  // unattributable: they all go, generation 1 is recorded for both, and the
  // rebuild after the salvage derives them again. A
  // lost profile is recreated by Store::Open (options.profile, else the
  // built-in one) and reported.
  Status Meta() {
    leveldb::WriteBatch batch;
    // Lost: not there, or (in a store that frames its metadata, format 3 on)
    // there but no longer verifying, which Open would refuse. Such a value
    // is deleted, then restored below as a missing one is.
    std::string format;
    const bool has_format =
        db_->Get(leveldb::ReadOptions(), storage::MetaKey("format"), &format).ok();
    const bool framed = has_format && storage::DecodeText(storage::MetaKey("format"), format).ok();
    auto missing = [&](const char* name) {
      const std::string key = storage::MetaKey(name);
      std::string value;
      if (db_->Get(leveldb::ReadOptions(), key, &value).IsNotFound()) return true;
      const bool bare_format = std::string_view(name) == "format" && (value == "1" || value == "2");
      if ((framed || std::string_view(name) == "format") && !bare_format &&
          !storage::DecodeText(key, value).ok()) {
        batch.Delete(key);
        return true;
      }
      return false;
    };
    // Restored values are framed as this build writes them, but for a lost
    // format: the bare "1" of the oldest format makes Open upgrade the store
    // (Options::upgrade_format, which RepairStore sets), framing whatever
    // other m/ and k/ values are still bare and keeping the framed ones.
    auto restore = [&](const char* name, const std::string& value) {
      if (std::string_view(name) == "format") {
        batch.Put(storage::MetaKey(name), value);
      } else {
        storage::PutText(&batch, storage::MetaKey(name), value);
      }
      LostData l;
      l.kind = LostData::Kind::kRecords;
      l.detail = std::string("m/") + name + " was lost; set to \"" + value + "\"";
      Lost(std::move(l));
    };
    if (missing("profile")) {
      LostData l;
      l.kind = LostData::Kind::kRecords;
      l.detail =
          "m/profile was lost; the store takes the configured (else the built-in) profile: if it "
          "ran under another, give that one to `eventfold replay --profile FILE`";
      Lost(std::move(l));
      for (const char* name : {"format", "routing_epoch", "generation", "log_generation"}) {
        (void)missing(name);  // an unreadable one goes too: Open writes them afresh
      }
      return Apply(&batch);  // Store::Open writes all of m/ afresh
    }
    if (missing("format")) restore("format", "1");
    if (missing("routing_epoch")) restore("routing_epoch", "1");
    const bool lost_projections = missing("generation");
    const bool lost_logs = missing("log_generation");
    if (lost_projections || lost_logs) {
      for (auto [name, lost] :
           {std::pair{"generation", lost_projections}, std::pair{"log_generation", lost_logs}}) {
        if (lost) {
          restore(name, "1");
        } else {
          storage::PutText(&batch, storage::MetaKey(name), "1");
        }
      }
      batch.Delete(storage::MetaKey("unrouted_index"));  // its index goes with the rest
      std::unique_ptr<leveldb::Iterator> it(db_->NewIterator(storage::ScanOptions()));
      const std::string prefix(storage::kGenerationPrefix);
      for (it->Seek(prefix); it->Valid() && it->key().starts_with(prefix); it->Next()) {
        batch.Delete(it->key());
        if (batch.ApproximateSize() >= (1 << 20)) {
          Status st = Apply(&batch);
          if (!st.ok()) return st;
        }
      }
      Status st = storage::FromLevelDb(it->status(), "reading derived records");
      if (!st.ok()) return st;
    }
    return Apply(&batch);
  }

  // Fills a lean dedup entry's type and time from its event's log entry,
  // when the event was routed and that entry is still readable.
  void IdentityFromLog(std::string_view event_id, storage::DedupEntry* d) {
    // Since format 8 a log record's type is its rank's under the profile
    // the log was routed under: the stored one.
    const Profile* profile = StoredProfile();
    if (!d->entity || !profile) return;
    Result<std::optional<uint64_t>> gen =
        storage::ReadNumber(db_, leveldb::ReadOptions(), storage::MetaKey("log_generation"));
    if (!gen.ok() || !*gen || **gen > UINT32_MAX) return;
    const std::string prefix = storage::LogPrefix(static_cast<uint32_t>(**gen), *d->entity);
    std::unique_ptr<leveldb::Iterator> it(db_->NewIterator(storage::ScanOptions()));
    for (it->Seek(prefix); it->Valid() && it->key().starts_with(prefix); it->Next()) {
      Result<storage::LogEntry> e =
          storage::DecodeLog(storage::View(it->key()), storage::View(it->value()), *profile);
      if (!e.ok() || e->seq != d->seq || e->ranked.event.event_id != event_id) continue;
      d->type = e->ranked.event.type;
      d->occurred_at = e->ranked.event.occurred_at;
      return;
    }
  }

  // The profile stored in m/profile, read once; null when it is unreadable.
  const Profile* StoredProfile() {
    if (!profile_read_) {
      profile_read_ = true;
      Result<std::optional<std::string>> json =
          storage::ReadText(db_, leveldb::ReadOptions(), storage::MetaKey("profile"));
      if (json.ok() && *json) {
        Result<Profile> p = Profile::FromJson(**json);
        if (p.ok()) profile_.emplace(std::move(*p));
      }
    }
    return profile_ ? &*profile_ : nullptr;
  }

  // A dedup entry whose event is gone names a lost event: report it and
  // delete the entry so the sender's resend is accepted, not a "duplicate".
  Status Dedup() {
    leveldb::WriteBatch batch;
    std::unique_ptr<leveldb::Iterator> it(db_->NewIterator(storage::ScanOptions()));
    const std::string prefix(storage::kDedupPrefix);
    for (it->Seek(prefix); it->Valid() && it->key().starts_with(prefix); it->Next()) {
      const std::string key = it->key().ToString();
      Result<storage::DedupEntry> d = storage::DecodeDedup(key, storage::View(it->value()));
      if (!d.ok()) {
        Drop(&batch, key, "unreadable dedup entry (" + d.status().message() + ")");
        continue;
      }
      if (d->expires_at != 0) continue;  // a tombstone: its event was compacted
      const std::string id = key.substr(prefix.size());
      std::optional<storage::StoredEvent> ev = EventAt(d->seq);
      if (ev) {
        const std::optional<Event> identity = Identity(*ev);
        if (!identity || identity->event_id == id) continue;
      }
      batch.Delete(key);
      // Since format 6 a stored event's dedup entry holds its digest and
      // route, not its type and time: its entity's log entry has them.
      if (!d->has_identity) IdentityFromLog(id, &*d);
      LostData l;
      l.kind = LostData::Kind::kEvent;
      l.event_id = id;
      l.type = d->type;
      l.occurred_at = d->occurred_at;
      l.detail = "its record a/" + std::to_string(d->seq) + " is lost";
      Lost(std::move(l));
    }
    Status st = storage::FromLevelDb(it->status(), "reading dedup entries");
    return st.ok() ? Apply(&batch) : st;
  }

  // Unreadable events go; each readable one gets its dedup entry back if it
  // lost it. Remembers every event's received_at for the loss windows.
  Status Events() {
    leveldb::WriteBatch batch;
    std::unique_ptr<leveldb::Iterator> it(db_->NewIterator(storage::ScanOptions()));
    const std::string prefix(storage::kEventPrefix);
    for (it->Seek(prefix); it->Valid() && it->key().starts_with(prefix); it->Next()) {
      const std::string key = it->key().ToString();
      Result<storage::StoredEvent> e = storage::DecodeStoredBody(key, storage::View(it->value()));
      if (!e.ok()) {
        Drop(&batch, key, "unreadable event (" + e.status().message() + ")");
        continue;
      }
      received_.emplace_back(e->seq, e->received_at);
      ++sum_->events;
      const std::optional<Event> identity = Identity(*e);
      if (!identity) continue;  // kept; `check` names it
      const std::string dkey = storage::DedupKey(identity->event_id);
      std::string value;
      leveldb::Status s = db_->Get(leveldb::ReadOptions(), dkey, &value);
      if (s.ok() && storage::DecodeDedup(dkey, value).ok()) continue;
      // Routing epoch 0 is never current: the store re-routes the event
      // under its profile when it next needs the entity.
      // No body digest: a redelivery is then decided by decoding (as for
      // entries written before the digest existed).
      storage::DedupEntry d;
      d.seq = e->seq;
      d.type = identity->type;
      d.occurred_at = identity->occurred_at;
      d.entity = e->entity;  // before format 8; re-routed anyway (epoch 0)
      d.routing_epoch = 0;
      batch.Put(dkey, storage::EncodeDedup(d));
      ++sum_->dedup_restored;
    }
    Status st = storage::FromLevelDb(it->status(), "reading events");
    return st.ok() ? Apply(&batch) : st;
  }

  // The other stored families: an unreadable record goes; a conflict
  // record whose winning event is gone goes.
  Status Others() {
    leveldb::WriteBatch batch;
    std::unique_ptr<leveldb::Iterator> it(db_->NewIterator(storage::ScanOptions()));
    for (it->SeekToFirst(); it->Valid(); it->Next()) {
      const std::string key = it->key().ToString();
      const std::string_view value = storage::View(it->value());
      const std::string_view family = std::string_view(key).substr(0, 2);
      if (family == storage::kConflictPrefix) {
        Result<storage::ConflictEntry> c = storage::DecodeConflict(key, value);
        if (!c.ok()) {
          Drop(&batch, key, "unreadable conflict record (" + c.status().message() + ")");
        } else if (!EventAt(c->first_seq)) {
          Drop(&batch, key, "conflict record of " + c->event_id + " whose first event is lost");
        }
      } else if (family == storage::kQuarantinePrefix) {
        if (Result<RefusedDelivery> r = storage::DecodeRefused(key, value); !r.ok()) {
          Drop(&batch, key, "unreadable refused delivery (" + r.status().message() + ")");
        }
      } else if (family == storage::kParkedPrefix) {
        if (Result<ParkedChange> p = storage::DecodeParked(key, value); !p.ok()) {
          Drop(&batch, key, "unreadable dead letter (" + p.status().message() + ")");
        }
      } else if (family == storage::kCompactionPrefix) {
        if (Result<storage::CompactionEntry> c = storage::DecodeCompaction(key, value); !c.ok()) {
          Drop(&batch, key, "unreadable compaction snapshot (" + c.status().message() + ")");
        }
      } else if (family == storage::kGenerationPrefix && !storage::ParseGenerationKey(key)) {
        // Derived (the rebuild after the salvage writes it again), but a key
        // that names no generation would stop every Open: it goes.
        batch.Delete(key);
        ++sum_->dropped;
      } else if (std::find(std::begin(storage::kKeyFamilies), std::end(storage::kKeyFamilies),
                           family) == std::end(storage::kKeyFamilies)) {
        // No store writes it: a key the damage rewrote (LevelDB's repairer
        // reads a damaged log without checksums). Left, `check` would
        // report it after every repair.
        Drop(&batch, key, "a key of no family a store writes, taken as damaged");
      }
    }
    Status st = storage::FromLevelDb(it->status(), "reading records");
    return st.ok() ? Apply(&batch) : st;
  }

  // Unreadable changes go; every gap gets placeholders, so the feed stays
  // numbered without holes and subscribers see where they must resync.
  Status Feed() {
    leveldb::WriteBatch batch;
    std::unique_ptr<leveldb::Iterator> it(db_->NewIterator(storage::ScanOptions()));
    const std::string prefix(storage::kFeedPrefix);
    Result<Checkpoints> checkpoints = ReadCheckpoints();
    if (!checkpoints.ok()) return checkpoints.status();
    uint64_t last = 0;
    for (it->Seek(prefix); it->Valid() && it->key().starts_with(prefix); it->Next()) {
      const std::string key = it->key().ToString();
      std::optional<uint64_t> seq = storage::ParseSeqKey(key, storage::kFeedPrefix);
      Result<Change> change = storage::DecodeChange(key, storage::View(it->value()));
      if (!seq || !change.ok()) {
        batch.Delete(key);  // refilled below as part of its gap
        ++sum_->dropped;
        continue;
      }
      if (last != 0 && *seq - last - 1 > kMaxFill) {
        // Changes are numbered densely: a record this far past the one
        // before it is not evidence of that many lost changes but a key the
        // damage rewrote (LevelDB's repairer reads a damaged log without
        // its checksums, and the seq is the key's alone). Its gap would not
        // fit in one write; the record goes, listed with what it held.
        Drop(&batch, key,
             "a change numbered " + std::to_string(*seq - last - 1) +
                 " past the one before it (seq " + std::to_string(last) +
                 "), so its key is taken as damaged; it said " + change->entity + " " + change->id +
                 ": " + change->previous_state + " -> " + change->state);
        continue;
      }
      if (last != 0 && *seq > last + 1) Fill(&batch, last + 1, *seq - 1);
      // The head: a feed is trimmed (Store::TrimFeed) only below its
      // lowest subscription checkpoint, and not at all without one, so one
      // that starts above that lost its first changes.
      const uint64_t trimmed_to = checkpoints->lowest;
      if (last == 0 && *seq > trimmed_to + 1 && *seq - trimmed_to - 1 <= kMaxFill) {
        Fill(&batch, trimmed_to + 1, *seq - 1);
      }
      last = *seq;
    }
    Status st = storage::FromLevelDb(it->status(), "reading the change feed");
    if (!st.ok()) return st;
    // The newest changes lost (a lost table, say) leave no gap to see; but
    // a seq once given out must never be given again, so the feed goes on
    // past every seq the damage or a subscription's checkpoint names.
    const uint64_t floor = std::max(feed_floor_, checkpoints->highest);
    // A checkpoint can be set to anything (SetCheckpoint): one far past
    // the feed is not evidence of changes, and filling up to it would not
    // fit in one write. Such a floor is reported, not filled.
    if (floor > last && floor - last <= kMaxFill) {
      Fill(&batch, last + 1, floor);
    } else if (floor > last) {
      LostData l;
      l.kind = LostData::Kind::kChanges;
      l.first_seq = last + 1;
      l.last_seq = floor;
      l.detail = "a checkpoint or a damaged range names seq " + std::to_string(floor) +
                 ", far past the newest surviving change; not filled, so seqs after " +
                 std::to_string(last) + " may be given out again";
      Lost(std::move(l));
    }
    return Apply(&batch);
  }

  // The highest change seq among the keys a damaged place lay between.
  static uint64_t FeedSeqsNamedBy(const std::vector<FileDamage>& damage) {
    uint64_t high = 0;
    for (const FileDamage& d : damage) {
      for (const std::string* key : {&d.after_raw, &d.before_raw}) {
        if (!key->starts_with(storage::kFeedPrefix)) continue;
        high = std::max(high, storage::ParseSeqKey(*key, storage::kFeedPrefix).value_or(0));
      }
    }
    return high;
  }

  // The subscriptions' checkpoints: the lowest (the feed is trimmed only
  // below it) and the highest (changes up to it were read); both 0 when
  // there is none.
  struct Checkpoints {
    uint64_t lowest = 0, highest = 0;
  };
  Result<Checkpoints> ReadCheckpoints() {
    std::unique_ptr<leveldb::Iterator> it(db_->NewIterator(storage::ScanOptions()));
    const std::string prefix(storage::kCheckpointPrefix);
    Checkpoints c;
    bool any = false;
    for (it->Seek(prefix); it->Valid() && it->key().starts_with(prefix); it->Next()) {
      Result<std::string> text =
          storage::DecodeText(storage::View(it->key()), storage::View(it->value()));
      if (!text.ok()) continue;  // an unreadable checkpoint is dropped elsewhere
      const uint64_t seq = ParseU64(*text).value_or(0);
      c.lowest = any ? std::min(c.lowest, seq) : seq;
      c.highest = std::max(c.highest, seq);
      any = true;
    }
    if (!it->status().ok()) return storage::FromLevelDb(it->status(), "reading checkpoints");
    return c;
  }

  // The most placeholders one gap in the feed gets (they go in one write).
  static constexpr uint64_t kMaxFill = 1'000'000;

  void Fill(leveldb::WriteBatch* batch, uint64_t first, uint64_t last) {
    for (uint64_t seq = first; seq <= last; ++seq) {
      Change c;
      c.seq = seq;
      batch->Put(storage::FeedKey(seq), storage::EncodeChange(c));
      ++sum_->feed_filled;
    }
    LostData l;
    l.kind = LostData::Kind::kChanges;
    l.first_seq = first;
    l.last_seq = last;
    l.detail = "change feed records lost; placeholders with an empty entity stand in";
    Lost(std::move(l));
  }

  // A damaged place whose keys reach into the events (a/): if events around
  // it are missing now, the senders' resend window is when the neighbours
  // were received. A log's damage loses the newest writes; a table whose
  // keys are unknown may have held any event.
  void ReportWindow(const FileDamage& d) {
    if (d.file.starts_with("MANIFEST-")) return;  // the repairer rewrote it
    // A damaged filter or meta index block, or footer padding, holds no
    // records: the table's rewrite kept every entry.
    for (std::string_view harmless : {"filter block", "meta index block", "footer: padding"}) {
      if (d.message.starts_with(harmless)) return;
    }
    std::sort(received_.begin(), received_.end());
    LostData l;
    l.kind = LostData::Kind::kWindow;
    // A write-ahead log's damage comes with the event key of the intact
    // record before it in that log (replay/file_check.h): LevelDB's repairer
    // reads a log without checksums, skips what does not parse and keeps
    // what does after it, so the loss starts there, not after the newest
    // event that survived. Where it ends is not known: a damaged length can
    // take the repairer past records the file check reads as intact, so
    // the window runs to the end.
    const bool log = d.file.ends_with(".log");
    if (log && d.after_raw.empty() && d.before_raw.empty()) {
      // No intact record of events in its log: it held the newest events.
      l.received_from = received_.empty() ? 0 : NewestReceived();
      l.detail = d.file +
                 ": damaged write-ahead log record; events received after the newest "
                 "surviving one may be lost";
    } else if (d.after_raw.empty() && d.before_raw.empty()) {
      l.detail = d.file + ": " + d.message + "; which events it held is unknown";
    } else {
      const std::string a(storage::kEventPrefix);
      const std::string a_end = storage::PrefixEnd(storage::kEventPrefix);
      if (!d.before_raw.empty() && d.before_raw <= a) return;    // before the events
      if (!d.after_raw.empty() && d.after_raw >= a_end) return;  // after them
      uint64_t lo = d.after_raw.starts_with(a)
                        ? storage::ParseSeqKey(d.after_raw, storage::kEventPrefix).value_or(0)
                        : 0;
      const uint64_t hi =
          !log && d.before_raw.starts_with(a)
              ? storage::ParseSeqKey(d.before_raw, storage::kEventPrefix).value_or(UINT64_MAX)
              : UINT64_MAX;
      if (log && d.after_raw.empty()) {
        // The damage opens its log: the events before it are in the tables
        // or an older log, all older (seqs are given in write order); the
        // first that may be lost is the one after the newest of those.
        const auto known = storage::ParseSeqKey(d.before_raw, storage::kEventPrefix);
        auto below = std::lower_bound(received_.begin(), received_.end(),
                                      std::pair<uint64_t, int64_t>{known.value_or(0), INT64_MIN});
        if (known && below != received_.begin()) lo = std::prev(below)->first;
      }
      // Nothing missing between the neighbours: an older copy survived.
      auto first = std::upper_bound(received_.begin(), received_.end(),
                                    std::pair<uint64_t, int64_t>{lo, INT64_MAX});
      auto last = std::lower_bound(received_.begin(), received_.end(),
                                   std::pair<uint64_t, int64_t>{hi, INT64_MIN});
      const uint64_t present = static_cast<uint64_t>(last - first);
      if (hi != UINT64_MAX && present == hi - lo - 1) return;
      if (first != received_.begin()) l.received_from = std::prev(first)->second;
      if (last != received_.end()) l.received_to = last->second;
      const std::string before = hi != UINT64_MAX ? " and before a/" + std::to_string(hi)
                                 : log            ? ""
                                                  : " and before the last";
      l.detail = d.file +
                 (log ? ": damaged write-ahead log record; events after " : ": events after ") +
                 (lo ? "a/" + std::to_string(lo) : "the first") + before + " may be lost (" +
                 d.message + ")";
    }
    Lost(std::move(l));
  }

  int64_t NewestReceived() const {
    int64_t newest = 0;
    for (const auto& [seq, at] : received_) newest = std::max(newest, at);
    return newest;
  }

  leveldb::DB* db_;
  const LostDataFn& on_lost_;
  const std::function<Status()>& before_write_;
  RepairSummary* sum_;
  std::vector<std::pair<uint64_t, int64_t>> received_;  // (seq, received_at) of every event
  uint64_t feed_floor_ = 0;  // the feed goes on past this seq (FeedSeqsNamedBy)
  bool profile_read_ = false;
  std::optional<Profile> profile_;
};

}  // namespace

Status SalvageRecords(leveldb::DB* db, const std::vector<FileDamage>& damage,
                      const LostDataFn& on_lost, const std::function<Status()>& before_write,
                      RepairSummary* summary) {
  return Salvage(db, on_lost, before_write, summary).Run(damage);
}

}  // namespace eventfold
