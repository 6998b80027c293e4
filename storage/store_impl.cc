#include "storage/store_impl.h"

#include <cctype>
#include <mutex>

#include <leveldb/write_batch.h>

#include "core/rfc3339.h"
#include "replay/materializer.h"
#include "replay/rebuild.h"
#include "replay/verify.h"
#include "storage/key_codec.h"
#include "storage/leveldb_status.h"

namespace eventfold {

IngestResult Store::Ingest(std::string_view body) {
  return Ingest(Delivery{{}, std::string(body)});
}

Result<std::unique_ptr<Store>> Store::Open(const std::string& path,
                                           const Options& options) {
  return storage::StoreImpl::Open(path, options);
}

namespace storage {
namespace {

constexpr std::string_view kFormatVersion = "1";

std::string_view View(const leveldb::Slice& s) { return {s.data(), s.size()}; }

// Header names whose values are credentials: never stored.
bool IsCredential(std::string_view name) {
  std::string lower(name);
  for (char& c : lower) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  for (std::string_view word : {"signature", "secret", "authorization", "cookie", "token",
                                "api-key", "apikey"}) {
    if (lower.find(word) != std::string::npos) return true;
  }
  return false;
}

// A WriteBatch with no records is its 12-byte header (LevelDB's format).
const size_t kEmptyBatchBytes = leveldb::WriteBatch().ApproximateSize();

std::string Describe(const std::string& type, int64_t occurred_at,
                     const std::optional<EntityRef>& entity) {
  std::string s = "type " + type + ", occurred_at " + FormatRfc3339(occurred_at);
  s += entity ? ", entity " + entity->entity + "/" + entity->id : ", unrouted";
  return s;
}

}  // namespace

// Everything one IngestBatch call stages before its single write.
struct StoreImpl::Txn {
  leveldb::WriteBatch batch;
  std::map<std::string, DedupEntry, std::less<>> dedup;      // staged event ids
  std::map<EntityRef, ProjectionState> projections;          // loaded or folded
  std::map<EntityRef, std::vector<RankedEvent>> staged_logs; // new log entries
  uint64_t unrouted = 0;
};

StoreImpl::StoreImpl(const Options& options, Profile profile)
    : options_(options),
      profile_(std::move(profile)),
      clock_(options.clock ? options.clock : SystemClock()) {}

StoreImpl::~StoreImpl() = default;

Result<std::unique_ptr<Store>> StoreImpl::Open(const std::string& path,
                                               const Options& options) {
  const Profile& initial = options.profile ? *options.profile : Profile::ReceiptRoller();
  std::unique_ptr<StoreImpl> store(new StoreImpl(options, initial));
  Status st = store->Init(path);
  if (!st.ok()) return st;
  return std::unique_ptr<Store>(std::move(store));
}

Status StoreImpl::Init(const std::string& path) {
  path_ = path;
  cache_.reset(leveldb::NewLRUCache(options_.block_cache_bytes));
  filter_.reset(leveldb::NewBloomFilterPolicy(10));
  leveldb::Options lo;
  lo.create_if_missing = options_.create_if_missing;
  lo.error_if_exists = options_.error_if_exists;
  lo.block_cache = cache_.get();
  lo.filter_policy = filter_.get();
  lo.write_buffer_size = options_.write_buffer_bytes;
  if (options_.env) lo.env = options_.env;
  leveldb::DB* db = nullptr;
  Status st = FromLevelDb(leveldb::DB::Open(lo, path, &db), "opening store " + path);
  if (!st.ok()) return st;
  db_.reset(db);
  st = LoadOrCreateProfile();
  if (!st.ok()) return st;
  st = RecoverSequence();
  if (!st.ok()) return st;
  st = RecoverQuarantine();
  if (!st.ok()) return st;

  // A rebuild that was interrupted is finished before anything else runs.
  std::string pending;
  leveldb::Status s = db_->Get(leveldb::ReadOptions(), MetaKey("rebuild"), &pending);
  if (s.ok()) {
    Result<Profile> p = Profile::FromJson(pending);
    if (!p.ok()) return Status::Corruption("interrupted rebuild: " + p.status().message());
    Result<RebuildSummary> r = RebuildLocked(*p);
    if (!r.ok()) return r.status().WithContext("finishing an interrupted rebuild");
  } else if (!s.IsNotFound()) {
    return FromLevelDb(s, "reading store metadata");
  }
  return Status::OK();
}

Status StoreImpl::LoadOrCreateProfile() {
  std::string stored;
  leveldb::Status s = db_->Get(leveldb::ReadOptions(), MetaKey("profile"), &stored);
  if (s.IsNotFound()) {
    leveldb::WriteBatch batch;
    batch.Put(MetaKey("format"), std::string(kFormatVersion));
    batch.Put(MetaKey("profile"), profile_.ToJson());
    leveldb::WriteOptions wo;
    wo.sync = true;
    return FromLevelDb(db_->Write(wo, &batch), "creating store");
  }
  if (!s.ok()) return FromLevelDb(s, "reading the store's profile");
  Result<Profile> recorded = Profile::FromJson(stored);
  if (!recorded.ok()) {
    return Status::Corruption("stored profile: " + recorded.status().message());
  }
  if (options_.profile && options_.profile->Fingerprint() != recorded->Fingerprint()) {
    return Status::InvalidArgument(
        "the store was built with profile \"" + recorded->name() + "\" (" +
        recorded->Fingerprint().substr(0, 12) + "), not \"" + options_.profile->name() +
        "\" (" + options_.profile->Fingerprint().substr(0, 12) +
        "); rebuild with the new profile to switch");
  }
  profile_ = std::move(*recorded);
  return Status::OK();
}

Status StoreImpl::RecoverSequence() {
  // Event and conflict keys share one sequence; continue after the largest.
  std::unique_ptr<leveldb::Iterator> it(db_->NewIterator(leveldb::ReadOptions()));
  uint64_t last = 0;
  for (std::string_view prefix : {kEventPrefix, kConflictPrefix}) {
    it->Seek(PrefixEnd(prefix));
    if (it->Valid()) {
      it->Prev();
    } else {
      it->SeekToLast();
    }
    if (it->Valid()) {
      if (auto seq = ParseSeqKey(std::string_view(it->key().data(), it->key().size()), prefix)) {
        last = std::max(last, *seq);
      }
    }
    if (!it->status().ok()) return FromLevelDb(it->status(), "scanning sequence numbers");
  }
  next_seq_.store(last + 1);
  return Status::OK();
}

Status StoreImpl::RecoverQuarantine() {
  std::unique_ptr<leveldb::Iterator> it(db_->NewIterator(leveldb::ReadOptions()));
  const std::string prefix(kQuarantinePrefix);
  it->Seek(prefix);
  if (it->Valid() && it->key().starts_with(prefix)) {
    quarantine_oldest_ = ParseSeqKey(View(it->key()), kQuarantinePrefix).value_or(1);
    it->Seek(PrefixEnd(prefix));
    it->Valid() ? it->Prev() : it->SeekToLast();
    quarantine_next_ = ParseSeqKey(View(it->key()), kQuarantinePrefix).value_or(0) + 1;
  }
  return FromLevelDb(it->status(), "scanning quarantine");
}

bool StoreImpl::Precheck(const Delivery& d, DecodedEvent* out,
                         IngestResult* result) const {
  if (d.body.size() > options_.max_body_bytes) {
    result->outcome = Outcome::kTooLarge;
    result->message = "body: " + std::to_string(d.body.size()) +
                      " bytes exceeds the limit of " +
                      std::to_string(options_.max_body_bytes);
    return false;
  }
  Result<DecodedEvent> decoded = DecodeEvent(d.body, profile_);
  if (!decoded.ok()) {
    result->outcome = Outcome::kInvalid;
    result->message = decoded.status().message();
    return false;
  }
  result->event_id = decoded->event.event_id;
  Status header = CheckEventIdHeader(d.headers, decoded->event.event_id);
  if (!header.ok()) {
    result->outcome = Outcome::kInvalid;
    result->message = header.message();
    return false;
  }
  result->entity = decoded->entity;
  *out = std::move(*decoded);
  return true;
}

IngestResult StoreImpl::Ingest(const Delivery& delivery) {
  const Delivery* one = &delivery;
  return std::move(IngestAll(&one, 1).front());
}

std::vector<IngestResult> StoreImpl::IngestBatch(const std::vector<Delivery>& deliveries) {
  std::vector<const Delivery*> all;
  all.reserve(deliveries.size());
  for (const Delivery& d : deliveries) all.push_back(&d);
  return IngestAll(all.data(), all.size());
}

std::vector<IngestResult> StoreImpl::IngestAll(const Delivery* const* deliveries,
                                               size_t n) {
  std::vector<IngestResult> results(n);
  std::vector<Decoded> items;
  items.reserve(n);
  for (size_t i = 0; i < n; ++i) {
    DecodedEvent decoded;
    if (Precheck(*deliveries[i], &decoded, &results[i])) {
      items.push_back(Decoded{i, deliveries[i], std::move(decoded)});
    } else if (results[i].outcome == Outcome::kTooLarge) {
      counters_.too_large.fetch_add(1, std::memory_order_relaxed);
    } else {
      counters_.invalid.fetch_add(1, std::memory_order_relaxed);
    }
  }
  if (items.empty()) return results;

  std::vector<size_t> stripes;
  stripes.reserve(items.size() * 2);
  for (const Decoded& item : items) {
    stripes.push_back(LockTable::StripeOf(StableHash(item.decoded.event.event_id)));
    if (const auto& ref = item.decoded.entity) {
      stripes.push_back(LockTable::StripeOf(StableHash(ref->entity, ref->id)));
    }
  }
  std::shared_lock rebuild_guard(rebuild_mu_);
  LockTable::Guard guard(&locks_, std::move(stripes));

  Txn txn;
  Status st;
  for (const Decoded& item : items) {
    st = Stage(item, &txn, &results[item.index]);
    if (!st.ok()) break;
  }
  if (st.ok()) {
    for (const auto& [ref, state] : txn.projections) {
      if (txn.staged_logs.count(ref)) {
        txn.batch.Put(ProjectionKey(ref), EncodeProjection(state));
      }
    }
    if (txn.batch.ApproximateSize() > kEmptyBatchBytes) {
      leveldb::WriteOptions wo;
      wo.sync = options_.durability == Durability::kSync;
      st = FromLevelDb(db_->Write(wo, &txn.batch), "writing events");
    }
  }
  for (const Decoded& item : items) {
    IngestResult& r = results[item.index];
    if (!st.ok() && r.outcome != Outcome::kDuplicate) {
      r.outcome = Outcome::kStorageError;
      r.message = "storage: " + st.message();
    }
    switch (r.outcome) {
      case Outcome::kAccepted: counters_.accepted.fetch_add(1); break;
      case Outcome::kDuplicate: counters_.duplicate.fetch_add(1); break;
      case Outcome::kConflict: counters_.conflict.fetch_add(1); break;
      default: counters_.storage_error.fetch_add(1); break;
    }
  }
  if (st.ok()) counters_.unrouted.fetch_add(txn.unrouted);
  // Refusals go to the quarantine after the events: it is diagnostics and
  // must never delay or fail an acknowledgement.
  for (size_t i = 0; i < n; ++i) {
    const Outcome o = results[i].outcome;
    if (o == Outcome::kInvalid || o == Outcome::kTooLarge || o == Outcome::kConflict) {
      RefusedDelivery r;
      r.outcome = o;
      r.reason = results[i].message;
      r.headers = deliveries[i]->headers;
      r.body_prefix = deliveries[i]->body.substr(0, kQuarantineBodyBytes);
      r.body_bytes = deliveries[i]->body.size();
      (void)Quarantine(std::move(r));
    }
  }
  return results;
}

Status StoreImpl::Stage(const Decoded& item, Txn* txn, IngestResult* result) {
  const Event& ev = item.decoded.event;
  const std::optional<EntityRef>& ref = item.decoded.entity;

  std::optional<DedupEntry> existing;
  if (auto it = txn->dedup.find(ev.event_id); it != txn->dedup.end()) {
    existing = it->second;
  } else {
    std::string value;
    const std::string key = DedupKey(ev.event_id);
    leveldb::Status s = db_->Get(leveldb::ReadOptions(), key, &value);
    if (s.ok()) {
      Result<DedupEntry> d = DecodeDedup(key, value);
      if (!d.ok()) return d.status();
      existing = std::move(*d);
    } else if (!s.IsNotFound()) {
      return FromLevelDb(s, "reading dedup entry");
    }
  }
  const int64_t now = clock_->NowMicros();

  if (existing) {
    if (existing->type == ev.type && existing->occurred_at == ev.occurred_at &&
        existing->entity == ref) {
      result->outcome = Outcome::kDuplicate;
      return Status::OK();
    }
    ConflictEntry c;
    c.event_id = ev.event_id;
    c.first_seq = existing->seq;
    c.type = ev.type;
    c.occurred_at = ev.occurred_at;
    c.entity = ref;
    c.received_at = now;
    c.reason = ev.event_id + " is already stored with " +
               Describe(existing->type, existing->occurred_at, existing->entity) +
               "; this delivery has " + Describe(ev.type, ev.occurred_at, ref);
    c.body = item.delivery->body;
    txn->batch.Put(ConflictKey(next_seq_.fetch_add(1)), EncodeConflict(c));
    result->outcome = Outcome::kConflict;
    result->message = "event_id: " + c.reason + " (the first one wins)";
    return Status::OK();
  }

  const uint64_t seq = next_seq_.fetch_add(1);
  StoredEvent stored;
  stored.seq = seq;
  stored.event.event_id = ev.event_id;
  stored.event.type = ev.type;
  stored.event.occurred_at = ev.occurred_at;
  stored.event.version = ev.version;
  stored.received_at = now;
  stored.body = item.delivery->body;
  stored.entity = ref;
  txn->batch.Put(EventKey(seq), EncodeEvent(stored));

  DedupEntry dedup{seq, ev.type, ev.occurred_at, ref};
  txn->batch.Put(DedupKey(ev.event_id), EncodeDedup(dedup));
  txn->dedup.emplace(ev.event_id, std::move(dedup));
  result->outcome = Outcome::kAccepted;

  if (!ref) {
    ++txn->unrouted;
    return Status::OK();
  }
  RankedEvent ranked{ev, item.decoded.rank};
  txn->batch.Put(LogKey(*ref, seq), EncodeLog(LogEntry{ranked, seq, now}));

  ProjectionState* state = nullptr;
  Status st = LoadProjection(*ref, txn, &state);
  if (!st.ok()) return st;
  std::vector<RankedEvent>& staged = txn->staged_logs[*ref];
  LogLoader load = [&](std::vector<RankedEvent>* out) -> Status {
    std::vector<LogEntry> stored_log;
    Status s = ReadLog(*ref, &stored_log);
    if (!s.ok()) return s;
    for (LogEntry& e : stored_log) out->push_back(std::move(e.ranked));
    out->insert(out->end(), staged.begin(), staged.end());
    return Status::OK();
  };
  const EntityType& type = *profile_.FindEntity(ref->entity);
  st = Materialize(type, *ref, ranked, load, state);
  if (!st.ok()) return st;
  staged.push_back(std::move(ranked));
  return Status::OK();
}

Status StoreImpl::LoadProjection(const EntityRef& ref, Txn* txn,
                                 ProjectionState** state) {
  auto it = txn->projections.find(ref);
  if (it == txn->projections.end()) {
    ProjectionState loaded;
    std::string value;
    const std::string key = ProjectionKey(ref);
    leveldb::Status s = db_->Get(leveldb::ReadOptions(), key, &value);
    if (s.ok()) {
      Result<ProjectionState> p = DecodeProjection(key, value);
      if (!p.ok()) return p.status();
      loaded = std::move(*p);
    } else if (!s.IsNotFound()) {
      return FromLevelDb(s, "reading projection");
    }
    it = txn->projections.emplace(ref, std::move(loaded)).first;
  }
  *state = &it->second;
  return Status::OK();
}

Status StoreImpl::ReadLog(const EntityRef& ref, std::vector<LogEntry>* out) {
  const std::string prefix = LogPrefix(ref);
  std::unique_ptr<leveldb::Iterator> it(db_->NewIterator(leveldb::ReadOptions()));
  for (it->Seek(prefix); it->Valid() && it->key().starts_with(prefix); it->Next()) {
    Result<LogEntry> e = DecodeLog(std::string_view(it->key().data(), it->key().size()),
                                   std::string_view(it->value().data(), it->value().size()));
    if (!e.ok()) return e.status();
    out->push_back(std::move(*e));
  }
  return FromLevelDb(it->status(), "reading entity log");
}

Result<Projection> StoreImpl::Get(std::string_view entity, std::string_view id) {
  const std::string key = ProjectionKey(EntityRef{std::string(entity), std::string(id)});
  std::string value;
  leveldb::Status s = db_->Get(leveldb::ReadOptions(), key, &value);
  if (s.IsNotFound()) {
    return Status::NotFound("no events for " + std::string(entity) + "/" + std::string(id));
  }
  if (!s.ok()) return FromLevelDb(s, "reading projection");
  Result<ProjectionState> p = DecodeProjection(key, value);
  if (!p.ok()) return p.status();
  return std::move(p->projection);
}

Status StoreImpl::List(std::string_view entity,
                       const std::function<bool(const Projection&)>& fn) {
  const std::string prefix = ProjectionScanPrefix(entity);
  leveldb::ReadOptions ro;
  ro.snapshot = db_->GetSnapshot();
  ro.fill_cache = false;
  std::unique_ptr<leveldb::Iterator> it(db_->NewIterator(ro));
  Status st;
  for (it->Seek(prefix); it->Valid() && it->key().starts_with(prefix); it->Next()) {
    Result<ProjectionState> p =
        DecodeProjection(std::string_view(it->key().data(), it->key().size()),
                         std::string_view(it->value().data(), it->value().size()));
    if (!p.ok()) {
      st = p.status();
      break;
    }
    if (!fn(p->projection)) break;
  }
  if (st.ok()) st = FromLevelDb(it->status(), "listing projections");
  it.reset();
  db_->ReleaseSnapshot(ro.snapshot);
  return st;
}

Result<EntityLog> StoreImpl::Log(std::string_view entity, std::string_view id) {
  EntityRef ref{std::string(entity), std::string(id)};
  const EntityType* type = profile_.FindEntity(entity);
  if (!type) {
    return Status::NotFound("profile \"" + profile_.name() + "\" has no entity \"" +
                            std::string(entity) + "\"");
  }
  std::vector<LogEntry> entries;
  Status st = ReadLog(ref, &entries);
  if (!st.ok()) return st;
  if (entries.empty()) return Status::NotFound("no events for " + ref.entity + "/" + ref.id);

  std::sort(entries.begin(), entries.end(), [](const LogEntry& a, const LogEntry& b) {
    return FoldsBefore(a.ranked, b.ranked);
  });
  std::vector<RankedEvent> ranked;
  for (const LogEntry& e : entries) ranked.push_back(e.ranked);
  std::vector<std::string> verdicts;
  Fold(*type, ref, &ranked, &verdicts);  // already sorted: order is kept

  EntityLog log;
  log.ref = ref;
  for (size_t i = 0; i < entries.size(); ++i) {
    LoggedEvent le;
    le.event = std::move(entries[i].ranked.event);
    le.seq = entries[i].seq;
    le.received_at = entries[i].received_at;
    le.applied = verdicts[i].empty();
    le.reason = std::move(verdicts[i]);
    log.fold_order.push_back(std::move(le));
  }
  return log;
}

Result<RebuildSummary> StoreImpl::Rebuild(const Profile* profile) {
  std::unique_lock guard(rebuild_mu_);
  const Profile target = profile ? *profile : profile_;
  leveldb::WriteOptions wo;
  wo.sync = true;
  Status st = FromLevelDb(db_->Put(wo, MetaKey("rebuild"), target.ToJson()),
                          "marking rebuild");
  if (!st.ok()) return st;
  return RebuildLocked(target);
}

Result<RebuildSummary> StoreImpl::RebuildLocked(const Profile& profile) {
  Result<RebuildSummary> summary = RebuildProjections(db_.get(), profile);
  if (!summary.ok()) return summary;
  leveldb::WriteBatch done;
  done.Put(MetaKey("profile"), profile.ToJson());
  done.Delete(MetaKey("rebuild"));
  leveldb::WriteOptions wo;
  wo.sync = true;
  Status st = FromLevelDb(db_->Write(wo, &done), "finishing rebuild");
  if (!st.ok()) return st;
  profile_ = profile;
  return summary;
}

Result<VerifySummary> StoreImpl::Verify(const DifferenceFn& on_difference) {
  std::shared_lock guard(rebuild_mu_);  // a rebuild would change the profile
  VerifyOptions vo;
  vo.scratch_path = path_ + ".verify";
  vo.env = options_.env;
  vo.profile = &profile_;
  return VerifyAside(db_.get(), vo, on_difference);
}

Status StoreImpl::Quarantine(RefusedDelivery r) {
  if (options_.quarantine_max_entries == 0) return Status::OK();
  r.received_at = clock_->NowMicros();
  r.status = HttpStatus(r.outcome);
  std::erase_if(r.headers, [](const auto& h) { return IsCredential(h.first); });
  if (r.body_bytes == 0) r.body_bytes = r.body_prefix.size();
  if (r.body_prefix.size() > kQuarantineBodyBytes) r.body_prefix.resize(kQuarantineBodyBytes);

  std::lock_guard lock(quarantine_mu_);
  leveldb::WriteBatch batch;
  batch.Put(QuarantineKey(quarantine_next_), EncodeRefused(r));
  uint64_t oldest = quarantine_oldest_;
  while (quarantine_next_ + 1 - oldest > options_.quarantine_max_entries) {
    batch.Delete(QuarantineKey(oldest++));
  }
  Status st = FromLevelDb(db_->Write(leveldb::WriteOptions(), &batch), "quarantining");
  if (st.ok()) {
    ++quarantine_next_;
    quarantine_oldest_ = oldest;
  }
  return st;
}

Status StoreImpl::ListRefused(const std::function<bool(const RefusedDelivery&)>& fn) {
  leveldb::ReadOptions ro;
  ro.fill_cache = false;
  std::unique_ptr<leveldb::Iterator> it(db_->NewIterator(ro));
  const std::string prefix(kQuarantinePrefix);
  for (it->Seek(prefix); it->Valid() && it->key().starts_with(prefix); it->Next()) {
    Result<RefusedDelivery> r = DecodeRefused(View(it->key()), View(it->value()));
    if (!r.ok()) return r.status();
    if (!fn(*r)) break;
  }
  return FromLevelDb(it->status(), "listing quarantine");
}

uint64_t StoreImpl::ApproximateBytes() {
  leveldb::Range all("", "\xff");
  uint64_t size = 0;
  db_->GetApproximateSizes(&all, 1, &size);
  return size;
}

Counters StoreImpl::counters() const {
  Counters c;
  c.accepted = counters_.accepted.load();
  c.duplicate = counters_.duplicate.load();
  c.conflict = counters_.conflict.load();
  c.invalid = counters_.invalid.load();
  c.too_large = counters_.too_large.load();
  c.storage_error = counters_.storage_error.load();
  c.unrouted = counters_.unrouted.load();
  return c;
}

}  // namespace storage
}  // namespace eventfold
