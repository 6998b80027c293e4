#include "storage/projection_read.h"

#include <string>
#include <utility>
#include <vector>

#include "core/materializer.h"
#include "storage/key_codec.h"
#include "storage/leveldb_status.h"
#include "storage/leveldb_util.h"
#include "storage/log_data.h"

namespace eventfold::storage {

ProjectionReader::ProjectionReader(leveldb::DB* db, const leveldb::ReadOptions& options,
                                   const Generations& gens, const Profile& profile)
    : db_(db), options_(options), gens_(gens), profile_(profile) {
  // Consecutive reads of a scan fold neighbouring logs: their blocks are
  // worth keeping (a scan's options leave the cache alone).
  options_.fill_cache = true;
}

ProjectionReader::ProjectionReader(std::unique_ptr<leveldb::Iterator> it, const Generations& gens,
                                   const Profile& profile)
    : gens_(gens), profile_(profile), it_(std::move(it)) {}

Result<ProjectionState> ProjectionReader::Read(std::string_view key, std::string_view value) {
  Result<ProjectionState> cursor = DecodeProjection(key, value);
  if (!cursor.ok()) return cursor.status();
  return Complete(key, std::move(*cursor));
}

Result<ProjectionState> ProjectionReader::Complete(std::string_view key, ProjectionState cursor) {
  if (!cursor.cursor_only) return cursor;
  std::optional<EntityRef> ref = ParseProjectionKey(key);
  if (!ref) return Status::Corruption("malformed projection key");
  const auto where = [&] { return "the projection of " + ref->entity + "/" + ref->id; };
  const EntityType* type = profile_.FindEntity(ref->entity);
  if (!type) {
    return Status::Corruption(where() + " is of entity type \"" + ref->entity +
                              "\", which the store's profile lacks");
  }
  if (!it_) it_.reset(db_->NewIterator(options_));
  leveldb::Iterator* it = it_.get();

  // The latest snapshot at or before the cursor (none after it can exist:
  // a write that moves the cursor back drops the snapshots past it). Most
  // entities have none, which their cursor says: no search then (a seek
  // into a range of deleted keys, such as a dropped generation's, would
  // step over every one of them).
  ProjectionState state;
  StartFromNone(*ref, &state);
  const std::string snaps = SnapshotPrefix(gens_.projections, *ref);
  if (cursor.snapshots != ProjectionState::Snapshots::kNone) it->Seek(snaps);
  if (cursor.snapshots != ProjectionState::Snapshots::kNone && it->Valid() &&
      it->key().starts_with(snaps)) {
    const std::string at = SnapshotKey(gens_.projections, *ref, cursor.last);
    it->Seek(at);
    if (!it->Valid() || View(it->key()) != at) it->Valid() ? it->Prev() : it->SeekToLast();
    if (it->Valid() && it->key().starts_with(snaps)) {
      Result<ProjectionState> s = DecodeProjection(View(it->key()), View(it->value()));
      if (!s.ok()) return s.status();
      state = std::move(*s);
      state.projection.entity = ref->entity;
      state.projection.id = ref->id;
    }
  }
  if (!it->status().ok()) return FromLevelDb(it->status(), "reading snapshots");

  // Then every log entry after it: the cursor is the last of them (the log
  // and the cursor are written in one batch), which the end checks. The
  // entries are read first: their bodies are read with the same iterator.
  const std::string log = LogPrefix(gens_.logs, *ref);
  const std::string after = state.events > 0 ? LogKey(gens_.logs, *ref, state.last) : log;
  std::vector<LogEntry> entries;
  for (it->Seek(after); it->Valid() && it->key().starts_with(log); it->Next()) {
    if (state.events > 0 && View(it->key()) == after) continue;
    Result<LogEntry> e = DecodeLog(View(it->key()), View(it->value()), profile_);
    if (!e.ok()) return e.status();
    entries.push_back(std::move(*e));
  }
  if (!it->status().ok()) return FromLevelDb(it->status(), "reading entity log");
  for (LogEntry& e : entries) {
    Status st = LoadLogData(it, profile_, &e);
    if (st.ok()) st = ApplyToState(*type, e.ranked, &state);
    if (!st.ok()) return st.WithContext("reading " + where());
  }
  if (state.events != cursor.events || !(state.last == cursor.last) ||
      state.projection.state != cursor.projection.state ||
      state.projection.applied != cursor.projection.applied) {
    return Status::Corruption(where() + " records " + std::to_string(cursor.events) +
                              " events in state " + cursor.projection.state +
                              ", but its log folds " + std::to_string(state.events) +
                              " events to state " + state.projection.state);
  }
  return state;
}

}  // namespace eventfold::storage
