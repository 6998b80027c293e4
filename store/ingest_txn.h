// IngestTxn: one ingest transaction — every delivery of an Ingest or
// IngestBatch call staged into a single LevelDB WriteBatch.
//
// Staging reads the store and an in-memory overlay of what the transaction
// already staged (dedup entries, projections, log entries, snapshots), so a
// batch behaves exactly as if its deliveries were ingested one by one. The
// caller holds the LockTable stripes of every event_id and entity involved,
// so nothing it reads changes underneath. Not thread-safe.

#ifndef EVENTFOLD_STORE_INGEST_TXN_H_
#define EVENTFOLD_STORE_INGEST_TXN_H_

#include <leveldb/write_batch.h>

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/decode.h"
#include "eventfold/ingest.h"
#include "storage/key_codec.h"
#include "storage/record_codec.h"

namespace eventfold::storage {

class StoreImpl;

// A dedup entry found absent by a lookup made without its event id's stripe
// (StoreImpl::KnownDuplicate): the id looked up (a view of the delivery's
// body), its stripe, and the stripe's release count read before the lookup.
// Under the stripe, an unchanged count means it is still absent
// (store/lock_table.h).
struct AbsentDedup {
  std::string_view event_id;
  size_t stripe = 0;
  uint64_t releases = 0;
};

class IngestTxn {
 public:
  // A transaction on the generations `gens` under `profile`, whose staged
  // events' dedup entries carry `routing_epoch` (the store's, read under its
  // lock; Project does not use it); with `record_changes`, each entity whose
  // projection changes gets a change feed record (a rebuild's catch-up
  // re-derives projections and records none).
  // Its batch comes from the store's BatchPool, and goes back to it.
  IngestTxn(StoreImpl* store, const Generations& gens, uint32_t routing_epoch,
            const Profile* profile, bool record_changes);
  ~IngestTxn();
  IngestTxn(const IngestTxn&) = delete;
  IngestTxn& operator=(const IngestTxn&) = delete;

  // For a rebuild's catch-up into a projection generation that shares the
  // live logs: the events from `seq` on are already in those logs (and in
  // their index of unrouted events), put there by the ingests that stored
  // them, but not yet folded into this transaction's projections. Project
  // and MarkUnrouted then write no log entries or index entries, and the
  // folds see only the logged events below `seq` and those Project staged.
  void SetLogsHoldFrom(uint64_t seq) { logs_hold_from_ = seq; }

  // Lets FindDedup and the load of an entity skip reads the store's key
  // filters say are of absent keys (store/key_filters.cc). Only for a
  // caller that holds the store's `rebuild_mu_` shared until after Commit,
  // as an ingest does.
  void UseKeyFilters() { use_key_filters_ = true; }

  // Stages one decoded delivery (its event is moved into the staged log
  // entry) and sets its outcome; a read error fails the whole transaction
  // (nothing is written). `body_digest` is the body's SHA-256 when the
  // caller has it, else empty (computed here). `absent`, when set, saves
  // the read of the event's dedup entry if it still holds. The caller holds
  // the event id's stripe.
  Status Stage(DecodedEvent&& decoded, const Delivery& delivery, std::string_view body_digest,
               const std::optional<AbsentDedup>& absent, IngestResult* result);

  // Stages only the projection half for an event already stored as `seq`:
  // its log entry (see SetLogsHoldFrom), snapshots and projection in this
  // transaction's generations. A rebuild uses it to catch up with events
  // ingested meanwhile.
  Status Project(const EntityRef& ref, RankedEvent ranked, uint64_t seq);

  // The other half for an event stored as `seq` that no entity routes: its
  // entry in this generation's index of unrouted events (counted by
  // unrouted()).
  void MarkUnrouted(uint64_t seq);

  // Adds the final projections and snapshot changes to the batch; writes it
  // (synced when `sync`). Nothing is visible before.
  Status Commit(bool sync);

  // Calls fn(projection key) for each entity whose projection Commit will
  // write.
  template <typename Fn>
  void ForEachProjected(Fn fn) const {
    for (const auto& [ref, e] : entities_) {
      if (!e.staged.empty()) fn(e.key);
    }
  }

  uint64_t unrouted() const { return unrouted_; }  // events MarkUnrouted
  uint64_t late() const { return late_; }
  uint64_t refolded() const { return refolded_; }
  // The highest arrival seq Stage took for an event or conflict record (0:
  // none): stored once Commit succeeds.
  uint64_t highest_seq() const { return highest_seq_; }

 private:
  // What the transaction knows and changed about one entity.
  struct EntityState {
    std::string key;                               // its projection's
    std::string before_state;                      // as stored; empty: none
    ProjectionState state;                         // loaded (maybe cursor_only), then updated
    std::vector<RankedEvent> staged;               // new log entries
    std::map<FoldKey, ProjectionState> snapshots;  // new snapshots
    std::optional<FoldKey> stale_after;            // stored snapshots after it are stale
    // False when the stored cursor says the entity has no stored snapshot
    // (or it has no projection yet), so a late event's fold seeks none.
    bool stored_snapshots = false;
  };
  class OverlayView;

  // The dedup entry of `event_id`: staged in this transaction, known absent
  // (`absent` for this id with its stripe's release count unchanged), or
  // read from the database.
  Result<std::optional<DedupEntry>> FindDedup(const std::string& event_id,
                                              const std::optional<AbsentDedup>& absent);
  // The identity of stored event `d` under the store's current profile.
  Result<std::optional<EntityRef>> CurrentRoute(const DedupEntry& d);
  // Fills a lean entry's type and occurred_at from its stored event.
  Status LoadIdentity(DedupEntry* d);
  // The event stored at a/<seq>, which a dedup entry names; with its
  // identity decoded from the body when `identity` (storage/record_codec.h).
  Result<StoredEvent> ReadStored(uint64_t seq, bool identity);
  Result<EntityState*> LoadEntity(const EntityRef& ref);

  StoreImpl* store_;
  Generations gens_;
  std::optional<uint64_t> logs_hold_from_;
  uint32_t routing_epoch_;
  const Profile* profile_;
  bool record_changes_;
  bool use_key_filters_ = false;
  std::unique_ptr<leveldb::WriteBatch> batch_;  // the store's pool's
  std::map<std::string, DedupEntry, std::less<>> dedup_;
  std::map<EntityRef, EntityState> entities_;
  uint64_t unrouted_ = 0;
  uint64_t late_ = 0;
  uint64_t refolded_ = 0;
  uint64_t highest_seq_ = 0;
};

}  // namespace eventfold::storage

#endif  // EVENTFOLD_STORE_INGEST_TXN_H_
