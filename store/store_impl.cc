#include "store/store_impl.h"

#include <leveldb/write_batch.h>

#include <algorithm>
#include <filesystem>
#include <limits>
#include <thread>

#include "core/materializer.h"
#include "core/parse_number.h"
#include "core/sha256.h"
#include "core/start_thread.h"
#include "replay/check.h"
#include "replay/rebuild.h"
#include "replay/verify.h"
#include "storage/commit_queue.h"
#include "storage/file_locks.h"
#include "storage/guarded_db.h"
#include "storage/key_codec.h"
#include "storage/key_upgrade.h"
#include "storage/leveldb_status.h"
#include "storage/leveldb_util.h"
#include "storage/log_data.h"
#include "storage/meta_text.h"
#include "storage/missing_current.h"
#include "storage/projection_read.h"
#include "storage/scratch_space.h"
#include "store/ingest_txn.h"
#include "store/store_dir.h"
#include "store/unfinished_copy.h"

namespace eventfold {

IngestResult Store::Ingest(std::string_view body) {
  return Ingest(Delivery{{}, std::string(body)});
}

Result<std::unique_ptr<Store>> Store::Open(const std::string& path, const Options& options) {
  if (Status st = CheckStorePath("opening a store", path); !st.ok()) return st;
  // Before LevelDB opens (or creates) anything there.
  if (Status st = RefuseUnfinishedCopy(EnvOf(options), path); !st.ok()) return st;
  return storage::StoreImpl::Open(path, options);
}

namespace storage {
namespace {

// A storage error as a delivery's outcome tells it: the reason and the
// file's name, not where the store lives (a 503's body goes to the sender).
// LevelDB names a file by its whole path, after a space; only such a
// "DIR/" is cut, so a short DIR cannot eat other words.
std::string StorageErrorText(const Status& st, const std::string& dir) {
  std::string text = "storage: " + st.message();
  const std::string prefix = dir + "/";
  for (size_t at = text.find(prefix); at != std::string::npos; at = text.find(prefix, at + 1)) {
    if (at > 0 && text[at - 1] == ' ') text.erase(at, prefix.size());
  }
  return text;
}

// The older formats Open can upgrade. Format 1 differs from 2 only in log
// records that still carry their data, and 3 from 4 only in projection
// records that are whole: later formats read both as they are (a whole
// projection is replaced by its cursor at the entity's next event). Formats
// 1 and 2 keep m/ and k/ values as bare text, which the upgrade frames.
// Format 4 differs from 5 only in having no m/log_generation: its logs are
// under m/generation, which the upgrade records as the log generation.
// Formats 5, 6 and 7 differ from 8 only in how records are encoded, which
// the decoders tell apart record by record.
bool IsUpgradableFormat(std::string_view format) {
  return format == "1" || format == "2" || format == "3" || format == "4" || format == "5" ||
         format == "6" || format == "7";
}

// Sets `*at` to `value` when that is higher (std::atomic has no fetch_max
// before C++26).
void RaiseTo(std::atomic<uint64_t>* at, uint64_t value) {
  uint64_t seen = at->load();
  while (seen < value && !at->compare_exchange_weak(seen, value)) {
  }
}

// m/rebuild: "<target gen>\n<profile json>" while a rebuild is under way.
std::string RebuildMarker(uint32_t gen, const Profile& p) {
  return std::to_string(gen) + "\n" + p.ToJson();
}

}  // namespace

StoreImpl::StoreImpl(const Options& options, Profile profile)
    : options_(options),
      profile_(std::make_shared<const Profile>(std::move(profile))),
      route_members_(RouteMembers(*profile_)),
      clock_(options.clock ? options.clock : SystemClock()),
      recent_(options.recent_events) {}

StoreImpl::~StoreImpl() {
  StopKeyFilters();  // it reads the database and takes rebuild_mu_
  AwaitDrop();       // it writes to the database
  StopRecovery();    // first of the rest: an attempt holds rebuild_mu_ and reopens the database
  StopGc();
  quarantine_.reset();  // its writer counts into counters_, which goes first otherwise
}

// profile_ is written under rebuild_mu_ (exclusive) and profile_mu_; reading
// it under profile_mu_ alone is safe, which the analysis cannot express.
std::shared_ptr<const Profile> StoreImpl::profile() const NO_THREAD_SAFETY_ANALYSIS {
  MutexLock lock(&profile_mu_);
  return profile_;
}

void StoreImpl::SetProfile(Profile profile) {
  auto next = std::make_shared<const Profile>(std::move(profile));
  route_members_ = RouteMembers(*next);
  MutexLock lock(&profile_mu_);
  profile_ = std::move(next);
}

Result<std::unique_ptr<Store>> StoreImpl::Open(const std::string& path, const Options& options) {
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
  lo.paranoid_checks = options_.paranoid_checks;
  log_name_env_ = std::make_unique<LogNameSyncEnv>(storage::EnvOrDefault(options_.env));
  env_ = std::make_unique<BackgroundEnv>(log_name_env_.get());
  // Before any database is opened on it (storage/background_env.h).
  Status st = env_->Start();
  if (!st.ok()) return st;
  lo.env = env_.get();
  st = RefuseAStoresQuarantine(lo.env, path);
  if (!st.ok()) return st;
  const bool existed = lo.env->FileExists(path);
  if (existed) {
    st = storage::RefuseDatabaseWithoutCurrent(lo.env, path, "store", path);
    if (!st.ok()) return st;
  }
  std::vector<std::string> created;
  if (options_.create_if_missing) {
    st = CreateParentDirs(lo.env, path, &created);
    if (!st.ok()) return st;
  }
  leveldb::DB* db = nullptr;
  st = FromLevelDb(leveldb::DB::Open(lo, path, &db), "opening store " + path);
  if (!st.ok()) return st;
  // LevelDB renames CURRENT (to the MANIFEST the open wrote) after its own
  // last directory sync; a store made now also needs its name in its
  // parent, and each parent made for it its own. All durable before the
  // first write is acknowledged.
  st = existed ? SyncDir(lo.env, path) : SyncNewStoreDir(lo.env, path, created);
  if (!st.ok()) {
    delete db;
    return st;
  }
  db_.reset(new GuardedDb(db, lo, path));
  db_->SetFailureListener([this] { NoteWriteFailure(); });
  {
    // Nobody else sees the store yet; the locks are what the steps require.
    WriterLock guard(&rebuild_mu_);
    for (Status (StoreImpl::*step)() :
         {&StoreImpl::LoadOrCreateMeta, &StoreImpl::AbandonInterruptedRebuild,
          &StoreImpl::RecoverSequence, &StoreImpl::RecoverFeed, &StoreImpl::LoadUnroutedIndex}) {
      st = (this->*step)();
      if (!st.ok()) return st;
    }
  }
  // The quarantine never fails the open: a database of its own that does
  // not open is retried in the background (store/quarantine_log.h).
  Options quarantine_options = options_;
  quarantine_options.env = env_.get();
  quarantine_ = std::make_unique<QuarantineLog>(QuarantineDir(path), quarantine_options,
                                                &counters_.quarantine_dropped,
                                                &counters_.quarantine_headers_dropped);
  MoveLegacyQuarantine();
  // A thread the system refuses fails the open; the destructor joins those
  // that started.
  st = quarantine_->Start();
  if (!st.ok()) return st;
  st = StartKeyFilters();
  if (!st.ok()) return st;
  if (options_.gc_interval_micros > 0) {
    // Due one interval after Open, wherever the clock is when the thread starts.
    const int64_t first_due = clock_->NowMicros() + options_.gc_interval_micros;
    st = StartThread(&gc_thread_, "the store's gc", [this, first_due] { GcLoop(first_due); });
    if (!st.ok()) return st;
  }
  return StartThread(&recover_thread_, "the store's recovery", [this] { RecoveryLoop(); });
}

Status StoreImpl::LoadOrCreateMeta() {
  std::string raw;
  leveldb::Status s = db_->Get(leveldb::ReadOptions(), MetaKey("profile"), &raw);
  if (s.IsNotFound()) {
    leveldb::WriteBatch batch;
    PutText(&batch, MetaKey("format"), kFormatVersion);
    PutText(&batch, MetaKey("profile"), profile_->ToJson());
    PutNumber(&batch, MetaKey("generation"), gens_.projections);
    PutNumber(&batch, MetaKey("log_generation"), gens_.logs);
    PutNumber(&batch, MetaKey("routing_epoch"), routing_epoch_);
    PutNumber(&batch, MetaKey("unrouted_index"), gens_.logs);
    return FromLevelDb(db_->Write(Synced(), &batch), "creating store");
  }
  if (!s.ok()) return FromLevelDb(s, "reading the store's profile");
  // A store of another format would be misread record by record; refuse it
  // whole, before anything is read or written.
  s = db_->Get(leveldb::ReadOptions(), MetaKey("format"), &raw);
  if (s.IsNotFound()) return Status::Corruption("m/format is missing");
  if (!s.ok()) return FromLevelDb(s, "reading the store's format");
  // Framed since format 3, bare text before.
  if (Result<std::string> framed = DecodeText(MetaKey("format"), raw); framed.ok()) {
    raw = std::move(*framed);
  }
  if (IsUpgradableFormat(raw)) {
    if (!options_.upgrade_format) {
      return Status::InvalidArgument(
          "store format " + raw + " is older than this build's format " +
          std::string(kFormatVersion) + "; upgrade it with: eventfold migrate --data " + path_ +
          " (a build that reads only format " + raw + " cannot open it afterwards)");
    }
    // First the derived keys in format 8's grammar (resumable,
    // storage/key_upgrade.h). Then the m/ and k/ values
    // framed (those of formats 1 and 2), the log generation (before format
    // 5 always the projection generation), and the new format, in one
    // synced write: either it happened or the store is still the older
    // format, some of its keys perhaps rewritten, which the next upgrade
    // finishes.
    Result<uint64_t> keys = UpgradeGenerationKeys(db_.get(), options_.upgrade_progress);
    if (!keys.ok()) return keys.status().WithContext("upgrading the store's format");
    leveldb::WriteBatch batch;
    Result<uint64_t> framed = FrameLegacyText(db_.get(), &batch);
    if (!framed.ok()) return framed.status().WithContext("upgrading the store's format");
    // (A salvage that restored a lost m/format keeps a log generation.)
    std::string gen;
    s = db_->Get(leveldb::ReadOptions(), MetaKey("log_generation"), &gen);
    if (s.IsNotFound()) {
      s = db_->Get(leveldb::ReadOptions(), MetaKey("generation"), &gen);
      if (!s.ok()) return FromLevelDb(s, "reading the store's generation");
      if (Result<std::string> text = DecodeText(MetaKey("generation"), gen); text.ok()) {
        gen = std::move(*text);  // framed since format 3
      }
      if (!ParseU32(gen)) return Status::Corruption("m/generation is out of range");
      PutText(&batch, MetaKey("log_generation"), gen);
    } else if (!s.ok()) {
      return FromLevelDb(s, "reading the store's log generation");
    }
    PutText(&batch, MetaKey("format"), kFormatVersion);
    s = db_->Write(Synced(), &batch);
    if (!s.ok()) return FromLevelDb(s, "upgrading the store's format");
  }
  Result<std::optional<std::string>> format =
      ReadText(db_.get(), leveldb::ReadOptions(), MetaKey("format"));
  if (!format.ok()) return format.status();
  if (**format != kFormatVersion) {
    return Status::InvalidArgument("store format " + **format +
                                   " is not supported (this build reads format " +
                                   std::string(kFormatVersion) + ")");
  }
  Result<std::optional<std::string>> stored =
      ReadText(db_.get(), leveldb::ReadOptions(), MetaKey("profile"));
  if (!stored.ok()) return stored.status();
  Result<Profile> recorded = Profile::FromJson(**stored);
  if (!recorded.ok()) {
    return Status::Corruption("stored profile: " + recorded.status().message());
  }
  SetProfile(std::move(*recorded));
  for (auto [name, field] :
       {std::pair{"generation", &gens_.projections}, std::pair{"log_generation", &gens_.logs},
        std::pair{"routing_epoch", &routing_epoch_}}) {
    Result<std::optional<uint64_t>> v =
        ReadNumber(db_.get(), leveldb::ReadOptions(), MetaKey(name));
    if (!v.ok()) return v.status();
    if (!*v || **v > UINT32_MAX) {
      return Status::Corruption(std::string("m/") + name + " is missing or out of range");
    }
    *field = static_cast<uint32_t>(**v);
  }
  return Status::OK();
}

Status StoreImpl::AbandonInterruptedRebuild() {
  // A rebuild that did not reach its switch left a partial generation beside
  // the live ones; one that stopped after its switch (a crash while dropping
  // the old generation, or a failed drop: m/drop is still there) left the
  // old one, or the old projections beside the logs it kept. Only the live
  // families stay. Without m/drop, the live generations hold no dead
  // family, and they are not searched: a dropped family's deleted keys stay
  // in LevelDB until compaction, and a search for what is left would step
  // over every one of them.
  Result<std::optional<std::string>> marker =
      ReadText(db_.get(), leveldb::ReadOptions(), MetaKey("rebuild"));
  if (!marker.ok()) return marker.status();
  const bool marked = marker->has_value();
  if (marked && !ParseU32((*marker)->substr(0, (*marker)->find('\n')))) {
    return Status::Corruption("m/rebuild is malformed");
  }
  Result<std::optional<std::string>> drop =
      ReadText(db_.get(), leveldb::ReadOptions(), MetaKey("drop"));
  if (!drop.ok()) return drop.status();
  const bool dropping = drop->has_value();
  std::vector<uint32_t> present;
  {
    // One seek per generation present: "g/<gen>/".
    std::unique_ptr<leveldb::Iterator> it(db_->NewIterator(leveldb::ReadOptions()));
    const std::string family(kGenerationPrefix);
    for (it->Seek(family); it->Valid() && it->key().starts_with(family);) {
      const std::optional<GenerationKeyView> g = ParseGenerationKey(View(it->key()));
      if (!g) return Status::Corruption("malformed generation key");
      present.push_back(g->gen);
      it->Seek(PrefixEnd(GenerationPrefix(g->gen)));
    }
    if (!it->status().ok()) return FromLevelDb(it->status(), "scanning generations");
  }
  for (uint32_t gen : present) {
    const bool live = gen == gens_.projections || gen == gens_.logs;
    if (live && !dropping) continue;
    Status st = DropDeadFamilies(db_.get(), gen, gens_);
    if (!st.ok()) return st.WithContext("removing a generation left by an interrupted rebuild");
  }
  // The run files of an interrupted rebuild; a directory of that name that
  // is not eventfold's is left alone (the next rebuild refuses it).
  leveldb::Env* const env = options_.env ? options_.env : leveldb::Env::Default();
  Status st;
  if (InspectScratch(env, path_ + ".rebuild") == ScratchState::kOurs) {
    st = ReleaseScratch(env, path_ + ".rebuild");
  }
  if (!st.ok()) return st.WithContext("removing the run files of an interrupted rebuild");
  if (!marked && !dropping) return Status::OK();
  leveldb::WriteBatch clear;
  clear.Delete(MetaKey("rebuild"));
  clear.Delete(MetaKey("drop"));
  return FromLevelDb(db_->Write(Synced(), &clear), "clearing rebuild markers");
}

Status StoreImpl::RecoverSequence() {
  // Event and conflict keys share one sequence; continue after the largest,
  // or after the largest retention dropped: a seq is never used twice.
  std::unique_ptr<leveldb::Iterator> it(db_->NewIterator(leveldb::ReadOptions()));
  Result<uint64_t> retired = RetiredSeq();
  if (!retired.ok()) return retired.status();
  uint64_t last = *retired;
  for (std::string_view prefix : {kEventPrefix, kConflictPrefix}) {
    it->Seek(PrefixEnd(prefix));
    it->Valid() ? it->Prev() : it->SeekToLast();
    if (it->Valid()) {
      if (auto seq = ParseSeqKey(View(it->key()), prefix)) last = std::max(last, *seq);
    }
    if (!it->status().ok()) return FromLevelDb(it->status(), "scanning sequence numbers");
  }
  next_seq_.store(last + 1);
  last_stored_seq_.store(last);
  return Status::OK();
}

Status StoreImpl::RecoverFeed() {
  // Retention never trims the newest change, so its key tells where to go on.
  std::unique_ptr<leveldb::Iterator> it(db_->NewIterator(leveldb::ReadOptions()));
  it->Seek(PrefixEnd(kFeedPrefix));
  it->Valid() ? it->Prev() : it->SeekToLast();
  uint64_t last = 0;
  if (it->Valid()) last = ParseSeqKey(View(it->key()), kFeedPrefix).value_or(0);
  if (!it->status().ok()) return FromLevelDb(it->status(), "scanning the change feed");
  if (commit_queue_) {
    commit_queue_->Reset(last + 1);  // reopened after a storage error
  } else {
    commit_queue_ = std::make_unique<CommitQueue>(db_.get(), last + 1);
  }
  return Status::OK();
}

Status StoreImpl::Read(uint64_t after_seq, size_t max,
                       const std::function<bool(const Change&)>& fn) {
  // No seq follows the largest (and after_seq + 1 would wrap to 0).
  if (after_seq == std::numeric_limits<uint64_t>::max()) return Status::OK();
  std::unique_ptr<leveldb::Iterator> it(db_->NewIterator(ScanOptions()));
  const std::string prefix(kFeedPrefix);
  size_t n = 0;
  for (it->Seek(FeedKey(after_seq + 1)); n < max && it->Valid() && it->key().starts_with(prefix);
       it->Next(), ++n) {
    Result<Change> c = DecodeChange(View(it->key()), View(it->value()));
    if (!c.ok()) return c.status();
    if (!fn(*c)) break;
  }
  return FromLevelDb(it->status(), "reading the change feed");
}

uint64_t StoreImpl::LastSeq() { return commit_queue_->last_seq(); }

uint64_t StoreImpl::WaitForChanges(uint64_t after_seq, int64_t timeout_micros) {
  return commit_queue_->WaitBeyond(after_seq, timeout_micros);
}

bool StoreImpl::Precheck(const Delivery& d, DecodedEvent* out, IngestResult* result) const {
  if (d.body.size() > options_.max_body_bytes) {
    result->outcome = Outcome::kTooLarge;
    result->message = "body: " + std::to_string(d.body.size()) + " bytes exceeds the limit of " +
                      std::to_string(options_.max_body_bytes);
    return false;
  }
  // Without the data, unless every event takes a snapshot (interval 1):
  // then each in-order event needs its data at once, and a decode without
  // it would be followed by a whole one.
  Result<DecodedEvent> decoded = options_.snapshot_interval == 1
                                     ? DecodeEvent(d.body, *profile_)
                                     : DecodeEventWithoutData(d.body, *profile_, route_members_);
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

// What the duplicate fast path learned of a delivery's body, for the
// transaction that stores it and the recent table it is added to.
struct StoreImpl::FastPathFacts {
  std::string digest;                    // its SHA-256, if computed (else empty)
  std::optional<RecentEvents::Key> key;  // its key among recent_, if computed
  // Its guessed event_id's dedup entry, read and not found: the transaction
  // need not read it again while the stripe's release count holds.
  std::optional<AbsentDedup> absent;
};

bool StoreImpl::KnownDuplicate(const Delivery& d, const RecentEvents::Key& key,
                               FastPathFacts* learned, IngestResult* result) {
  if (d.body.size() > options_.max_body_bytes) return false;
  const std::optional<std::string_view> id = PeekEventId(d.body);
  if (!id || !CheckEventIdHeader(d.headers, *id).ok()) return false;
  learned->key = key;
  std::optional<EntityRef> entity;
  if (!recent_.Find(key, *id, &entity)) {
    const uint64_t epoch = recent_.epoch();
    learned->digest = Sha256(d.body);
    // Read before the lookup: if the entry is absent, the transaction that
    // stores the event need not read it again (IngestTxn::FindDedup).
    const size_t stripe = LockTable::StripeOf(StableHash(*id));
    const uint64_t releases = locks_.Releases(stripe);
    if (!MayHoldDedup(*id)) {  // a new event: no read (store/key_filters.cc)
      learned->absent = AbsentDedup{*id, stripe, releases};
      return false;
    }
    const std::string dedup_key = DedupKey(*id);
    std::string value;
    const leveldb::Status s = db_->Get(leveldb::ReadOptions(), dedup_key, &value);
    if (s.IsNotFound()) learned->absent = AbsentDedup{*id, stripe, releases};
    if (!s.ok()) return false;
    Result<DedupEntry> first = DecodeDedup(dedup_key, value);
    // A tombstone or an older routing epoch may answer differently now: the
    // slow path re-routes. The same bytes decode to the same event, route and
    // header check under the same profile, so the answer is the slow path's.
    if (!first.ok() || first->expires_at != 0 || first->routing_epoch != routing_epoch_ ||
        !DigestMatches(first->body_digest, learned->digest)) {
      return false;
    }
    entity = std::move(first->entity);
    recent_.Add(key, *id, entity, epoch);  // a retry storm over older events
  }
  result->outcome = Outcome::kDuplicate;
  result->event_id = std::string(*id);
  result->entity = std::move(entity);
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

Status StoreImpl::Sync() {
  // An empty group member that syncs: LevelDB syncs its log, and with it
  // every write before this one. Under rebuild_mu_, as a commit is, so
  // that a recovery does not reopen the database beneath it.
  ReaderLock guard(&rebuild_mu_);
  leveldb::WriteBatch nothing;
  std::vector<Change> no_changes;
  return commit_queue_->Commit(&nothing, &no_changes, /*sync=*/true);
}

std::vector<IngestResult> StoreImpl::IngestAll(const Delivery* const* deliveries, size_t n) {
  AwaitDueRecovery();
  std::vector<IngestResult> results(n);
  std::vector<std::pair<size_t, DecodedEvent>> items;  // reserved at the first
  // The profile may only change under rebuild_mu_, so decode under it too.
  rebuild_mu_.WaitForWaitingWriters();
  ReaderLock rebuild_guard(&rebuild_mu_);
  // No duplicate is answered while the database is the one opened for
  // reads after a failed reopen (it changes only under rebuild_mu_ held
  // exclusively): that open replayed writes whose sync failed, so a stored
  // event it shows may not be durable, and a duplicate of it must not be
  // answered 200. Every duplicate answers 503 meanwhile; the sender's retry
  // comes after the next reopen, which makes what it replays durable.
  const bool read_only = db_->read_only();
  uint64_t known_duplicates = 0;
  std::vector<FastPathFacts> learned(n);  // each body's SHA-256 and key, once
  // Each body's key among the recent events, and a request for the table's
  // lines, kLookAhead deliveries before its duplicate check reads them:
  // the memory arrives while the deliveries before it are checked.
  constexpr size_t kLookAhead = 4;
  std::vector<RecentEvents::Key> keys(n);
  const auto ask = [&](size_t j) {
    if (j >= n || deliveries[j]->body.size() > options_.max_body_bytes) return;
    keys[j] = recent_.KeyOf(deliveries[j]->body);
    recent_.Prefetch(keys[j]);
  };
  for (size_t j = 0; j < kLookAhead; ++j) ask(j);
  for (size_t i = 0; i < n; ++i) {
    ask(i + kLookAhead);
    DecodedEvent decoded;
    if (!read_only && KnownDuplicate(*deliveries[i], keys[i], &learned[i], &results[i])) {
      ++known_duplicates;
    } else if (Precheck(*deliveries[i], &decoded, &results[i])) {
      if (items.empty()) items.reserve(n - i);  // none for a known duplicate
      items.emplace_back(i, std::move(decoded));
    } else if (results[i].outcome == Outcome::kTooLarge) {
      counters_.too_large.fetch_add(1, std::memory_order_relaxed);
    } else {
      counters_.invalid.fetch_add(1, std::memory_order_relaxed);
    }
  }
  Status st;
  uint64_t unrouted = 0, late = 0, refolded = 0;
  if (!items.empty()) {
    std::vector<size_t> stripes;
    stripes.reserve(items.size() * 2);
    for (const auto& [i, decoded] : items) {
      stripes.push_back(LockTable::StripeOf(StableHash(decoded.event.event_id)));
      if (const auto& ref = decoded.entity) {
        stripes.push_back(LockTable::StripeOf(StableHash(ref->entity, ref->id)));
      }
    }
    LockTable::Guard guard(&locks_, std::move(stripes));
    IngestTxn txn(this, gens_, routing_epoch_, profile_.get(), /*record_changes=*/true);
    txn.UseKeyFilters();
    for (auto& [i, decoded] : items) {
      st = txn.Stage(std::move(decoded), *deliveries[i], learned[i].digest, learned[i].absent,
                     &results[i]);
      if (!st.ok()) break;
    }
    const uint64_t recent_epoch = recent_.epoch();  // before the commit: see Add
    if (st.ok()) {
      // Before the write, while the stripes are held (store/key_filters.cc).
      for (const auto& [i, decoded] : items) {
        if (results[i].outcome == Outcome::kAccepted) NoteDedupWritten(results[i].event_id);
      }
      // Read here: the analysis cannot see the lock in the lambda.
      const uint32_t gen = gens_.projections;
      txn.ForEachProjected([&](const std::string& key) { NoteProjectionWritten(gen, key); });
      st = txn.Commit(options_.durability == Durability::kSync);
    }
    if (st.ok()) {
      RaiseTo(&last_stored_seq_, txn.highest_seq());
      for (const auto& [i, decoded] : items) {
        if (results[i].outcome == Outcome::kAccepted && learned[i].key) {
          recent_.Add(*learned[i].key, results[i].event_id, results[i].entity, recent_epoch);
        }
      }
    }
    unrouted = txn.unrouted();
    late = txn.late();
    refolded = txn.refolded();
  }
  std::string failure;
  if (!st.ok()) {
    failure = StorageErrorText(st, path_);
  } else if (read_only) {
    failure =
        "storage: the store's database is open for reads only after a failed reopen: "
        "a duplicate is not answered until it reopens";
  }
  for (const auto& [i, decoded] : items) {
    IngestResult& r = results[i];
    if ((!st.ok() && r.outcome != Outcome::kDuplicate) ||
        (read_only && r.outcome == Outcome::kDuplicate)) {
      r.outcome = Outcome::kStorageError;
      r.message = failure;
    }
    switch (r.outcome) {
      case Outcome::kAccepted:
        counters_.accepted.fetch_add(1);
        break;
      case Outcome::kDuplicate:
        counters_.duplicate.fetch_add(1);
        break;
      case Outcome::kConflict:
        counters_.conflict.fetch_add(1);
        break;
      default:
        counters_.storage_error.fetch_add(1);
        break;
    }
  }
  if (known_duplicates != 0) counters_.duplicate.fetch_add(known_duplicates);
  if (!items.empty()) MaybeRequestKeyFilters(gens_.projections);
  if (st.ok()) {
    unrouted_stored_.fetch_add(unrouted);  // still under rebuild_guard: no switch between
    counters_.unrouted.fetch_add(unrouted);
    counters_.late.fetch_add(late);
    counters_.refolded.fetch_add(refolded);
  }
  rebuild_guard.Unlock();
  // Refusals go to the quarantine after the events: it is diagnostics and
  // must never delay or fail an acknowledgement.
  QuarantineRefusals(deliveries, results);
  return results;
}

Result<Projection> StoreImpl::Get(std::string_view entity, std::string_view id) {
  ReaderLock guard(&rebuild_mu_);
  const std::string key =
      ProjectionKey(gens_.projections, EntityRef{std::string(entity), std::string(id)});
  // The cursor, snapshots and log as of one moment (storage/projection_read.h).
  SnapshotGuard snapshot(db_.get());
  leveldb::ReadOptions ro;
  ro.snapshot = snapshot.get();
  std::string value;
  leveldb::Status s = db_->Get(ro, key, &value);
  if (s.IsNotFound()) {
    return Status::NotFound("no events for " + std::string(entity) + "/" + std::string(id));
  }
  if (!s.ok()) return FromLevelDb(s, "reading projection");
  Result<ProjectionState> p = ProjectionReader(db_.get(), ro, gens_, *profile_).Read(key, value);
  if (!p.ok()) return p.status();
  return std::move(p->projection);
}

Status StoreImpl::List(std::string_view entity, const std::function<bool(const Projection&)>& fn) {
  return ListFrom(entity, nullptr, fn);
}

Status StoreImpl::ListAfter(std::string_view entity, const EntityRef& after,
                            const std::function<bool(const Projection&)>& fn) {
  return ListFrom(entity, &after, fn);
}

Status StoreImpl::ListFrom(std::string_view entity, const EntityRef* after,
                           const std::function<bool(const Projection&)>& fn) {
  SnapshotGuard snapshot;
  std::string prefix;
  std::unique_ptr<leveldb::Iterator> it;
  std::shared_ptr<const Profile> profile;  // the generation's, kept past a switch
  std::optional<ProjectionReader> reader;
  std::string skip;  // after's key; empty: from the start
  {
    // The iterators too are made under the lock: a recovery's reopen (which
    // holds it exclusively) waits for the snapshot's use to end, so it must
    // not start between the snapshot and the iterators that end that use,
    // and the reader folds through its own iterator, making no new use.
    ReaderLock guard(&rebuild_mu_);
    profile = profile_;
    prefix = ProjectionScanPrefix(gens_.projections, entity);
    if (after != nullptr) skip = ProjectionKey(gens_.projections, *after);
    snapshot = SnapshotGuard(db_.get());
    it.reset(db_->NewIterator(ScanOptions(snapshot.get())));
    leveldb::ReadOptions folds = ScanOptions(snapshot.get());
    folds.fill_cache = true;  // neighbouring entities' logs share blocks
    reader.emplace(std::unique_ptr<leveldb::Iterator>(db_->NewIterator(folds)), gens_, *profile);
  }
  Status st;
  // Resumed: from `after`'s key (or the prefix, when that comes later),
  // past `after` itself.
  it->Seek(skip > prefix ? skip : prefix);
  if (it->Valid() && !skip.empty() && View(it->key()) == skip) it->Next();
  for (; it->Valid() && it->key().starts_with(prefix); it->Next()) {
    Result<ProjectionState> p = reader->Read(View(it->key()), View(it->value()));
    if (!p.ok()) {
      st = p.status();
      break;
    }
    if (!fn(p->projection)) break;
  }
  if (st.ok()) st = FromLevelDb(it->status(), "listing projections");
  return st;
}

Result<ProjectionCounts> StoreImpl::CountProjections() {
  SnapshotGuard snapshot;
  std::string prefix;
  std::unique_ptr<leveldb::Iterator> it;
  {
    // Made under the lock, as List's (a reopen waits for the snapshot's use).
    ReaderLock guard(&rebuild_mu_);
    prefix = ProjectionScanPrefix(gens_.projections, "");
    snapshot = SnapshotGuard(db_.get());
    it.reset(db_->NewIterator(ScanOptions(snapshot.get())));
  }
  ProjectionCounts counts;
  for (it->Seek(prefix); it->Valid() && it->key().starts_with(prefix); it->Next()) {
    Result<ProjectionState> p = DecodeProjection(View(it->key()), View(it->value()));
    if (!p.ok()) return p.status();
    ++counts.by_entity[p->projection.entity][p->projection.state];
    ++counts.projections;
  }
  Status st = FromLevelDb(it->status(), "counting projections");
  if (!st.ok()) return st;
  return counts;
}

Result<EntityLog> StoreImpl::Log(std::string_view entity, std::string_view id) {
  ReaderLock guard(&rebuild_mu_);
  EntityRef ref{std::string(entity), std::string(id)};
  const EntityType* type = profile_->FindEntity(entity);
  if (!type) {
    return Status::NotFound("profile \"" + profile_->name() + "\" has no entity \"" +
                            std::string(entity) + "\"");
  }
  EntityLog log;
  log.ref = ref;
  std::vector<RankedEvent> ranked;
  const std::string prefix = LogPrefix(gens_.logs, ref);
  std::unique_ptr<leveldb::Iterator> it(db_->NewIterator(leveldb::ReadOptions()));
  for (it->Seek(prefix); it->Valid() && it->key().starts_with(prefix); it->Next()) {
    Result<LogEntry> e = DecodeLog(View(it->key()), View(it->value()), *profile_);
    if (!e.ok()) return e.status();
    Status loaded = LoadLogData(db_.get(), leveldb::ReadOptions(), *profile_, &*e);
    if (!loaded.ok()) return loaded;
    LoggedEvent le;
    le.event = e->ranked.event;
    le.seq = e->seq;
    le.received_at = e->received_at;
    log.fold_order.push_back(std::move(le));
    ranked.push_back(std::move(e->ranked));
  }
  if (!it->status().ok()) return FromLevelDb(it->status(), "reading entity log");
  // A compacted entity's remaining events fold on from its snapshot.
  std::string value;
  const std::string compacted = SnapshotKey(gens_.projections, ref, CompactionPoint());
  leveldb::Status s = db_->Get(leveldb::ReadOptions(), compacted, &value);
  if (!s.ok() && !s.IsNotFound()) return FromLevelDb(s, "reading a compaction snapshot");
  if (ranked.empty() && !s.ok()) {
    return Status::NotFound("no events for " + ref.entity + "/" + ref.id);
  }
  std::vector<std::string> verdicts;
  if (s.ok()) {
    Result<ProjectionState> state = DecodeProjection(compacted, value);
    if (!state.ok()) return state.status();
    std::string record;
    const std::string key = CompactionKey(ref);
    leveldb::Status rs = db_->Get(leveldb::ReadOptions(), key, &record);
    if (!rs.ok()) {
      return FromLevelDb(rs, "reading the compaction record of " + ref.entity + "/" + ref.id);
    }
    Result<CompactionEntry> entry = DecodeCompaction(key, record);
    if (!entry.ok()) return entry.status();
    log.compacted = LogCompaction{state->projection, entry->events, entry->compacted_at};
    log.compacted->snapshot.entity = ref.entity;  // a stored snapshot omits its key
    log.compacted->snapshot.id = ref.id;
    for (const RankedEvent& e : ranked) {
      Result<const Transition*> t = TransitionOf(*type, e);
      if (!t.ok()) return t.status().WithContext("reading the log of " + ref.entity + "/" + ref.id);
      verdicts.push_back(ApplyEvent(**t, e.event, &state->projection));
    }
  } else {
    // Keys are in fold order: order is kept.
    Result<Projection> folded = Fold(*type, ref, &ranked, &verdicts);
    if (!folded.ok()) {
      return folded.status().WithContext("reading the log of " + ref.entity + "/" + ref.id);
    }
  }
  for (size_t i = 0; i < verdicts.size(); ++i) {
    log.fold_order[i].applied = verdicts[i].empty();
    log.fold_order[i].reason = std::move(verdicts[i]);
  }
  return log;
}

Result<RebuildSummary> StoreImpl::Rebuild(const RebuildOptions& options) {
  if (!options.id.empty() && options.entity.empty()) {
    return Status::InvalidArgument("rebuild: --id needs --entity");
  }
  if (!options.entity.empty() && options.profile) {
    return Status::InvalidArgument(
        "rebuild: a new profile re-routes every event; it cannot be limited to one entity");
  }
  bool idle = false;
  if (!rebuilding_.compare_exchange_strong(idle, true)) {
    return Status::Busy("a rebuild or gc of this store is already running");
  }
  struct Done {
    std::atomic<bool>* flag;
    ~Done() { flag->store(false); }
  } done{&rebuilding_};
  if (options.profile) {
    Status st = CompactedTypesKnown(*options.profile);
    if (!st.ok()) return st;
  }
  return options.entity.empty() ? RebuildAll(options) : RefoldInPlace(options);
}

Result<RebuildSummary> StoreImpl::RefoldInPlace(const RebuildOptions& options) {
  const int64_t start = clock_->NowMicros();  // progress and seconds on the store's Clock
  ReaderLock guard(&rebuild_mu_);
  const EntityType* type = profile_->FindEntity(options.entity);
  if (!type) {
    return Status::NotFound("rebuild: profile \"" + profile_->name() + "\" has no entity \"" +
                            options.entity + "\"");
  }
  // The entities to re-fold: one, or every projection of the type.
  std::vector<EntityRef> refs;
  if (!options.id.empty()) {
    refs.push_back(EntityRef{options.entity, options.id});
  } else {
    const std::string prefix = ProjectionScanPrefix(gens_.projections, options.entity);
    std::unique_ptr<leveldb::Iterator> it(db_->NewIterator(leveldb::ReadOptions()));
    for (it->Seek(prefix); it->Valid() && it->key().starts_with(prefix); it->Next()) {
      if (auto ref = ParseProjectionKey(View(it->key()))) refs.push_back(std::move(*ref));
    }
    if (!it->status().ok()) return FromLevelDb(it->status(), "listing entities");
  }
  RebuildSummary sum;
  double next_report = 1;  // seconds: progress about once a second
  for (const EntityRef& ref : refs) {
    LockTable::Guard lock(&locks_, {LockTable::StripeOf(StableHash(ref.entity, ref.id))});
    leveldb::WriteBatch batch;
    std::vector<RankedEvent> events;
    const std::string log = LogPrefix(gens_.logs, ref);
    const std::string snaps = SnapshotPrefix(gens_.projections, ref);
    std::unique_ptr<leveldb::Iterator> it(db_->NewIterator(leveldb::ReadOptions()));
    for (it->Seek(log); it->Valid() && it->key().starts_with(log); it->Next()) {
      Result<LogEntry> e = DecodeLog(View(it->key()), View(it->value()), *profile_);
      if (!e.ok()) return e.status();
      Status loaded = LoadLogData(db_.get(), leveldb::ReadOptions(), *profile_, &*e);
      if (!loaded.ok()) return loaded;
      events.push_back(std::move(e->ranked));
    }
    // A compacted entity folds on from its compaction snapshot, which stays.
    ProjectionState state;
    const std::string compacted = SnapshotKey(gens_.projections, ref, CompactionPoint());
    for (it->Seek(snaps); it->Valid() && it->key().starts_with(snaps); it->Next()) {
      if (View(it->key()) != compacted) {
        batch.Delete(it->key());
        continue;
      }
      Result<ProjectionState> seed = DecodeProjection(View(it->key()), View(it->value()));
      if (!seed.ok()) return seed.status();
      state = std::move(*seed);
      state.projection.entity = ref.entity;
      state.projection.id = ref.id;
      state.snapshots = ProjectionState::Snapshots::kSome;  // this one stays
    }
    if (!it->status().ok()) return FromLevelDb(it->status(), "reading entity log");
    if (events.empty() && state.events == 0) continue;
    std::vector<ProjectionState> snapshots;
    Status folded = FoldOnto(*type, ref, events, options_.snapshot_interval, &state, &snapshots);
    if (!folded.ok()) return folded.WithContext("re-folding " + ref.entity + "/" + ref.id);
    for (const ProjectionState& snap : snapshots) {
      batch.Put(SnapshotKey(gens_.projections, ref, snap.last), EncodeProjection(snap));
    }
    const std::string pkey = ProjectionKey(gens_.projections, ref);
    NoteProjectionWritten(gens_.projections, pkey);  // it may not have been stored
    batch.Put(pkey, EncodeProjectionCursor(state));
    Status st = FromLevelDb(db_->Write(leveldb::WriteOptions(), &batch), "writing projection");
    if (!st.ok()) return st;
    ++sum.entities;
    sum.events += events.size();
    sum.applied += state.projection.applied;
    sum.rejected += state.projection.rejected.size();
    const double seconds = static_cast<double>(clock_->NowMicros() - start) / 1e6;
    if (options.progress && seconds >= next_report) {
      options.progress(RebuildProgress{sum.events, 0, sum.entities, seconds});
      next_report = seconds + 1;
    }
  }
  if (!options.id.empty() && sum.entities == 0) {
    return Status::NotFound("no events for " + options.entity + "/" + options.id);
  }
  sum.seconds = static_cast<double>(clock_->NowMicros() - start) / 1e6;
  if (options.progress) {
    options.progress(RebuildProgress{sum.events, sum.events, sum.entities, sum.seconds});
  }
  return sum;
}

Result<RebuildSummary> StoreImpl::RebuildAll(const RebuildOptions& options) {
  const Profile* profile = options.profile;

  AwaitDrop();  // the previous rebuild's

  // 1. Mark the rebuild and freeze its input: the events stored so far.
  std::optional<Profile> target;
  uint32_t next = 0;
  uint64_t boundary = 0;
  SnapshotGuard input;
  // The generations the new projections go with: logs kept or routed anew.
  Generations built;
  bool keep_logs = false;
  {
    WriterLock guard(&rebuild_mu_);
    target = profile ? *profile : *profile_;
    next = std::max(gens_.projections, gens_.logs) + 1;
    // The live logs and their index of unrouted events (complete since
    // Open, see LoadUnroutedIndex) are what routing under the same profile
    // gives: the new projections share them.
    keep_logs = !options.rederive_logs && target->Fingerprint() == profile_->Fingerprint();
    built = Generations{next, keep_logs ? gens_.logs : next};
    Status st = FromLevelDb(
        db_->Put(Synced(), MetaKey("rebuild"), EncodeText(RebuildMarker(next, *target))),
        "marking rebuild");
    if (!st.ok()) return st;
    boundary = next_seq_.load();
    input = SnapshotGuard(db_.get());
  }

  // 2. Build the new generation beside the live one; ingest and reads go on.
  Status st = DropGeneration(db_.get(), next);  // leftovers of an earlier attempt
  if (!st.ok()) return st;
  RebuildTarget build;
  build.gen = next;
  build.snapshot_interval = options_.snapshot_interval;
  build.threads = options.threads > 0
                      ? options.threads
                      : std::max(1, static_cast<int>(std::thread::hardware_concurrency()));
  build.progress = options.progress;
  build.clock = clock_;
  build.scratch_path = path_ + ".rebuild";
  build.env = options_.env;
  if (keep_logs) build.logs_from = built.logs;
  Result<RebuildSummary> summary = BuildGeneration(db_.get(), input.get(), *target, build);
  input.Release();
  if (!summary.ok()) return summary;

  // 3. Catch up with what arrived meanwhile in rounds while ingest goes on,
  // so that the exclusive lock below only covers the last round's few
  // events. A round's upper end is read under a momentary exclusive lock:
  // every ingest holds the lock shared from taking its seq to its commit, so
  // every event below that seq is stored by then.
  st = CatchUpInRounds(&boundary, built, *target, &*summary);
  if (!st.ok()) return st;

  // 4. Briefly stop ingest: fold in the last few arrivals, then switch.
  Generations old;
  {
    WriterLock guard(&rebuild_mu_);
    const int64_t paused_at = clock_->NowMicros();
    const uint64_t before = summary->events;
    st = CatchUp(boundary, /*to_seq=*/0, built, *target, &*summary);
    if (!st.ok()) return st;
    summary->events_caught_up_paused = summary->events - before;
    const bool rerouted = target->Fingerprint() != profile_->Fingerprint();
    leveldb::WriteBatch flip;
    PutText(&flip, MetaKey("profile"), target->ToJson());
    PutNumber(&flip, MetaKey("generation"), built.projections);
    PutNumber(&flip, MetaKey("log_generation"), built.logs);
    // Kept, or written whole by the build and catch-up.
    PutNumber(&flip, MetaKey("unrouted_index"), built.logs);
    if (rerouted) PutNumber(&flip, MetaKey("routing_epoch"), routing_epoch_ + 1);
    flip.Delete(MetaKey("rebuild"));
    PutText(&flip, MetaKey("drop"), "");  // until the old families are gone
    st = FromLevelDb(db_->Write(Synced(), &flip), "switching to the rebuilt generation");
    if (!st.ok()) return st;
    old = gens_;
    gens_ = built;
    if (rerouted) ++routing_epoch_;
    recent_.Clear();  // their entities may be routed anew
    SetProfile(std::move(*target));
    unrouted_stored_.store(summary->unrouted);  // every stored event was routed anew
    summary->pause_seconds = static_cast<double>(clock_->NowMicros() - paused_at) / 1e6;
  }

  // 5. Nobody reads the old generations' families any more (open snapshots
  // keep theirs), except logs the new projections kept: they go in the
  // background.
  StartDrop(old, built);
  return summary;
}

void StoreImpl::StartDrop(const Generations& old, const Generations& live) {
  MutexLock lock(&drop_mu_);
  if (drop_thread_.joinable()) drop_thread_.join();
  // A failure, or a thread the system refuses, leaves the rest, and m/drop,
  // to the next Open, which drops every family that is not live.
  (void)StartThread(&drop_thread_, "the rebuild's drop", [this, old, live] {
    for (uint32_t gen : {old.projections, old.logs}) {
      if (!DropDeadFamilies(db_.get(), gen, live).ok()) return;
      if (old.logs == old.projections) break;
    }
    // Unsynced: lost in a crash, it costs the next Open one search.
    (void)db_->Delete(leveldb::WriteOptions(), MetaKey("drop"));
  });
}

void StoreImpl::AwaitDrop() {
  MutexLock lock(&drop_mu_);
  if (drop_thread_.joinable()) drop_thread_.join();
}

Status StoreImpl::CatchUpInRounds(uint64_t* from_seq, const Generations& gens,
                                  const Profile& profile, RebuildSummary* summary) {
  for (int round = 0; round < kMaxCatchUpRounds; ++round) {
    uint64_t to_seq = 0;
    {
      WriterLock guard(&rebuild_mu_);  // a barrier: in-flight ingests finish
      to_seq = next_seq_.load();
    }
    if (to_seq - *from_seq <= kPausedCatchUpEvents) return Status::OK();
    const uint64_t before = summary->events;
    Status st = CatchUp(*from_seq, to_seq, gens, profile, summary);
    if (!st.ok()) return st;
    summary->events_caught_up += summary->events - before;
    *from_seq = to_seq;
  }
  return Status::OK();  // ingest outpaces the rounds: the pause takes the rest
}

Status StoreImpl::CatchUp(uint64_t from_seq, uint64_t to_seq, const Generations& gens,
                          const Profile& profile, RebuildSummary* summary) {
  IngestTxn txn(this, gens, /*routing_epoch=*/0, &profile, /*record_changes=*/false);
  if (gens.logs != gens.projections) txn.SetLogsHoldFrom(from_seq);
  std::unique_ptr<leveldb::Iterator> it(db_->NewIterator(leveldb::ReadOptions()));
  const std::string prefix(kEventPrefix);
  for (it->Seek(EventKey(from_seq)); it->Valid() && it->key().starts_with(prefix); it->Next()) {
    Result<StoredEvent> stored = DecodeStoredBody(View(it->key()), View(it->value()));
    if (!stored.ok()) return stored.status();
    if (to_seq != 0 && stored->seq >= to_seq) break;
    ++summary->events;
    Result<DecodedEvent> decoded = DecodeEvent(stored->body, profile);
    if (!decoded.ok() || !decoded->entity) {
      ++summary->unrouted;
      txn.MarkUnrouted(stored->seq);
      continue;
    }
    Status st = txn.Project(*decoded->entity,
                            RankedEvent{std::move(decoded->event), decoded->rank, {}}, stored->seq);
    if (!st.ok()) return st;
  }
  if (!it->status().ok()) return FromLevelDb(it->status(), "catching up");
  return txn.Commit(/*sync=*/false);  // the switch that follows is synced
}

Result<VerifySummary> StoreImpl::Verify(const DifferenceFn& on_difference) {
  return Verify(nullptr, on_difference);
}

Result<VerifySummary> StoreImpl::Verify(const Profile* under, const DifferenceFn& on_difference) {
  if (under) {
    Status st = CompactedTypesKnown(*under);
    if (!st.ok()) return st;
  }
  VerifyOptions vo;
  vo.scratch_path = path_ + ".verify";
  vo.env = env_.get();  // its scratch database's background work too
  vo.snapshot_interval = options_.snapshot_interval;
  vo.clock = clock_;
  std::shared_ptr<const Profile> profile;
  SnapshotGuard snapshot;
  {
    // The generation, profile and snapshot must agree; a later switch or
    // drop cannot change what the snapshot shows.
    ReaderLock guard(&rebuild_mu_);
    profile = profile_;  // a snapshot: a later switch leaves it as it is
    vo.live = gens_;
    snapshot = SnapshotGuard(db_.get());
  }
  vo.snapshot = snapshot.get();
  vo.profile = under ? under : profile.get();
  vo.live_profile = profile.get();
  return VerifyAside(db_.get(), vo, on_difference);
}

Result<CheckSummary> StoreImpl::Check(const CheckProblemFn& on_problem) {
  AwaitDrop();  // what it leaves would be reported
  CheckOptions co;
  co.scratch_path = path_ + ".check";
  co.env = options_.env;
  co.snapshot_interval = options_.snapshot_interval;
  co.clock = clock_;
  co.rebuild_running = rebuilding_.load();
  std::shared_ptr<const Profile> profile;
  SnapshotGuard snapshot;
  {
    // As in Verify: generation, profile and snapshot agree. Changes numbered
    // before the snapshot must all be in it.
    ReaderLock guard(&rebuild_mu_);
    profile = profile_;  // a snapshot: a later switch leaves it as it is
    co.live = gens_;
    co.last_change_seq = commit_queue_->last_seq();
    snapshot = SnapshotGuard(db_.get());
  }
  co.snapshot = snapshot.get();
  co.profile = profile.get();
  Result<CheckSummary> sum = CheckStore(db_.get(), co, on_problem);
  if (sum.ok()) quarantine_->Check(on_problem, &*sum);
  return sum;
}

StoreStats StoreImpl::Stats() {
  StoreStats s;
  {
    ReaderLock guard(&rebuild_mu_);
    s.profile_name = profile_->name();
    s.profile_fingerprint = profile_->Fingerprint();
    s.generation = gens_.projections;
    s.log_generation = gens_.logs;
    s.key_filter_bytes = KeyFilterBytes();
  }
  if (options_.profile) {
    const std::string requested = options_.profile->Fingerprint();
    s.profile_stale = requested != s.profile_fingerprint;
    if (s.profile_stale) s.requested_fingerprint = requested;
  }
  s.last_seq = last_stored_seq_.load();
  s.unrouted = unrouted_stored_.load();
  s.refused = quarantine_->Held();
  if (Status closed = quarantine_->Closed(); !closed.ok()) s.quarantine_closed = closed.ToString();
  s.approximate_bytes = ApproximateBytes();
  return s;
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
  c.late = counters_.late.load();
  c.refolded = counters_.refolded.load();
  c.quarantine_dropped = counters_.quarantine_dropped.load();
  c.quarantine_headers_dropped = counters_.quarantine_headers_dropped.load();
  return c;
}

}  // namespace storage
}  // namespace eventfold
