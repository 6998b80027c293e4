// Projection read: an entity's whole projection from its stored records.
//
// Since format 4 the g/<gen>/p/ record of an entity is the fold's cursor
// only (state, version, counts, the fold key of the last event): rewriting
// every field and rejection per event was the largest write of an ingest.
// The fields and rejections are a pure function of the log, so a read folds
// them: from the nearest fold snapshot at or before the cursor (snapshots,
// compaction ones included, are stored whole) through the log entries after
// it, each with its data read from the one stored body. Snapshots come every
// Options::snapshot_interval events, so a read folds at most that many.
// A whole record (formats 1-3, or one a compaction wrote) is returned as it
// is.
//
// A ProjectionReader reads through one LevelDB iterator, bodies included,
// reused across reads (a scan over many projections pays for it once). So a
// reader handed an iterator makes no new use of the database: a scan that
// made both its iterators under the store's lock never waits behind a
// reopen that waits for it. Not thread-safe: one per thread.

#ifndef EVENTFOLD_STORAGE_PROJECTION_READ_H_
#define EVENTFOLD_STORAGE_PROJECTION_READ_H_

#include <leveldb/db.h>

#include <memory>
#include <string_view>

#include "eventfold/profile.h"
#include "eventfold/status.h"
#include "storage/key_codec.h"
#include "storage/record_codec.h"

namespace eventfold::storage {

class ProjectionReader {
 public:
  // Reads the projections of `gens` (their snapshots, and the logs of its
  // log generation) in `db` with `options`, folding under `profile` (the
  // profile the logs were routed under). `options` must carry a
  // snapshot when writers may be running: a cursor, its snapshots and its
  // log must be read as of one moment. `db` and `profile` must outlive the
  // reader.
  ProjectionReader(leveldb::DB* db, const leveldb::ReadOptions& options, const Generations& gens,
                   const Profile& profile);
  // Reads with `it` (over the snapshot the projections were read under),
  // which the reader owns from now on.
  ProjectionReader(std::unique_ptr<leveldb::Iterator> it, const Generations& gens,
                   const Profile& profile);

  // The whole state of the projection stored as `value` at `key` (a
  // g/<gen>/p/ key of gens.projections). On success cursor_only is false.
  // Corruption naming the entity when the record does not decode, the log
  // does not fold (an unknown entity type or rank, a missing body) or folds
  // to another cursor than the stored one; a LevelDB error as its Status.
  [[nodiscard]] Result<ProjectionState> Read(std::string_view key, std::string_view value);

  // The same for a state already decoded from `key` (cursor_only or not).
  [[nodiscard]] Result<ProjectionState> Complete(std::string_view key, ProjectionState cursor);

 private:
  leveldb::DB* db_ = nullptr;  // null when handed an iterator
  leveldb::ReadOptions options_;
  Generations gens_;
  const Profile& profile_;
  std::unique_ptr<leveldb::Iterator> it_;  // made at the first fold
};

}  // namespace eventfold::storage

#endif  // EVENTFOLD_STORAGE_PROJECTION_READ_H_
