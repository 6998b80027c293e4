#include "replay/file_check.h"

#include <leveldb/comparator.h>
#include <leveldb/iterator.h>
#include <leveldb/options.h>
#include <leveldb/table.h>
#include <leveldb/table_builder.h>

#include <algorithm>
#include <charconv>
#include <cstdio>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string_view>
#include <vector>

#include "core/crc32c.h"
#include "replay/check.h"
#include "storage/key_codec.h"

namespace eventfold {
namespace {

constexpr size_t kFooterBytes = 48;       // two padded block handles + magic
constexpr size_t kHandlesBytes = 40;      // the padded handles
constexpr size_t kBlockTrailerBytes = 5;  // compression type + masked CRC
constexpr uint64_t kTableMagic = 0xdb4775248b80fb57ull;
constexpr size_t kLogBlockBytes = 32768;  // doc/log_format.md
constexpr size_t kLogHeaderBytes = 7;     // CRC (4), length (2), type (1)
enum LogType : uint8_t { kZero = 0, kFull = 1, kFirst = 2, kMiddle = 3, kLast = 4 };

uint32_t Fixed32(const char* p) {
  uint32_t v = 0;
  for (int i = 3; i >= 0; --i) v = (v << 8) | static_cast<uint8_t>(p[i]);
  return v;
}

uint64_t Fixed64(const char* p) {
  return (static_cast<uint64_t>(Fixed32(p + 4)) << 32) | Fixed32(p);
}

bool Varint64(std::string_view* in, uint64_t* v) {
  *v = 0;
  for (int shift = 0; shift <= 63 && !in->empty(); shift += 7) {
    const uint8_t byte = static_cast<uint8_t>(in->front());
    in->remove_prefix(1);
    *v |= static_cast<uint64_t>(byte & 0x7f) << shift;
    if (byte < 0x80) return true;
  }
  return false;
}

// Table keys are LevelDB internal keys: the user key, then 8 bytes of
// (sequence << 8 | type), newest first. Table::Open needs that order to
// seek; nothing here builds a table, so the shortening hooks do nothing.
class InternalKeyOrder final : public leveldb::Comparator {
 public:
  int Compare(const leveldb::Slice& a, const leveldb::Slice& b) const override {
    const int r = UserKey(a).compare(UserKey(b));
    if (r != 0) return r;
    const uint64_t ta = Tag(a), tb = Tag(b);
    return ta > tb ? -1 : (ta < tb ? 1 : 0);
  }
  const char* Name() const override { return "leveldb.InternalKeyComparator"; }
  void FindShortestSeparator(std::string*, const leveldb::Slice&) const override {}
  void FindShortSuccessor(std::string*) const override {}

  static leveldb::Slice UserKey(const leveldb::Slice& k) {
    return k.size() < 8 ? k : leveldb::Slice(k.data(), k.size() - 8);
  }

 private:
  static uint64_t Tag(const leveldb::Slice& k) {
    return k.size() < 8 ? 0 : Fixed64(k.data() + k.size() - 8);
  }
};

std::string UserKey(const std::string& internal_key) {
  return InternalKeyOrder::UserKey(internal_key).ToString();
}

// Opens `path` for random reads and gets its size.
leveldb::Status OpenForReading(leveldb::Env* env, const std::string& path, uint64_t* size,
                               std::unique_ptr<leveldb::RandomAccessFile>* file) {
  leveldb::RandomAccessFile* raw = nullptr;
  leveldb::Status s = env->GetFileSize(path, size);
  if (s.ok()) s = env->NewRandomAccessFile(path, &raw);
  file->reset(raw);
  return s;
}

using EntryFn = std::function<void(const leveldb::Slice& key, const leveldb::Slice& value)>;
// Called per run of unreadable blocks with the (internal) keys of the last
// entry before and the first after it ("" at either end of the table).
using GapFn = std::function<void(const std::string& last_good, const std::string& next_good,
                                 const leveldb::Status& why)>;

// Every entry of the intact blocks of `table`, in order, through its
// iterator with checksums on. The iterator skips a block it cannot read and
// keeps the first error: on one, report the gap and restart just after it.
void ScanIntact(leveldb::Table* table, const EntryFn& on_entry, const GapFn& on_gap) {
  leveldb::ReadOptions ro;
  ro.verify_checksums = true;
  ro.fill_cache = false;
  std::string resume, last_good;
  for (;;) {
    std::unique_ptr<leveldb::Iterator> it(table->NewIterator(ro));
    if (resume.empty()) {
      it->SeekToFirst();
    } else {
      it->Seek(resume);
    }
    resume.clear();
    for (; it->Valid(); it->Next()) {
      if (!it->status().ok()) {
        resume = it->key().ToString();
        on_gap(last_good, resume, it->status());
        break;
      }
      on_entry(it->key(), it->value());
      last_good = it->key().ToString();
    }
    if (!resume.empty()) continue;
    if (!it->status().ok()) on_gap(last_good, "", it->status());
    return;
  }
}

// A table the MANIFEST lists.
struct LiveTable {
  uint64_t size = 0;
  std::string smallest, largest;  // user keys
};

class DirChecker {
 public:
  DirChecker(std::string dir, leveldb::Env* env, const FileDamageFn& on_damage,
             const RewrittenTables& rewritten)
      : dir_(std::move(dir)), env_(env), on_damage_(on_damage), rewritten_(rewritten) {}

  Status Run() {
    std::vector<std::string> names;
    leveldb::Status s = env_->GetChildren(dir_, &names);
    if (!s.ok()) return Status::IOError("listing " + dir_ + ": " + s.ToString());
    std::sort(names.begin(), names.end());
    const std::string manifest = CheckCurrent();
    if (!manifest.empty()) ReadManifest(manifest);
    std::set<uint64_t> tables_present;
    std::vector<std::string> unlisted_tables;
    // The oldest write the live logs hold (a log record is a write batch:
    // its first sequence, then its count).
    uint64_t oldest_logged = UINT64_MAX;
    const RecordFn note_batch = [&](std::string_view batch) {
      if (batch.size() >= 12) oldest_logged = std::min(oldest_logged, Fixed64(batch.data()));
    };
    for (const std::string& name : names) {
      const std::optional<uint64_t> number = FileNumber(name);
      if (EndsWith(name, ".ldb") || EndsWith(name, ".sst")) {
        if (number) tables_present.insert(*number);
        auto live = number ? live_tables_.find(*number) : live_tables_.end();
        if (live_known_ && live == live_tables_.end()) {
          unlisted_tables.push_back(name);
          continue;
        }
        CheckTable(name, live_known_ ? &live->second : nullptr);
      } else if (EndsWith(name, ".log")) {
        if (live_known_ && number && *number < log_number_ && *number != prev_log_number_) {
          summary_.unreferenced.push_back(name);
          continue;
        }
        CheckLog(name, &note_batch);
      } else if (name.rfind("MANIFEST-", 0) == 0 && name != manifest) {
        CheckLog(name);
      }
    }
    for (const std::string& name : unlisted_tables) {
      CheckUnlistedTable(name, manifest, oldest_logged);
    }
    // A table the MANIFEST lists but the directory lacks: every key in its
    // range is lost (LevelDB's repairer would rebuild the MANIFEST without
    // it, and nothing would say so).
    for (const auto& [number, table] : live_tables_) {
      if (tables_present.count(number) != 0) continue;
      char name[32];
      std::snprintf(name, sizeof(name), "%06llu.ldb", static_cast<unsigned long long>(number));
      Damage(name, 0, 0, "is listed in the MANIFEST but missing (the whole table is lost)",
             table.smallest, table.largest);
    }
    return Status::OK();
  }

  const FileCheckSummary& summary() const { return summary_; }

 private:
  // A table the MANIFEST does not list is usually a left-over LevelDB
  // deletes on open: an interrupted compaction's output (its entries are
  // in the tables it was compacting, still listed) or a memtable's (its
  // writes are still in a live log). But a MANIFEST that lost its latest
  // edits (truncated, or a damaged tail that still parses) no longer lists
  // a table those edits added, while the log the table replaced is gone:
  // then the table holds writes after the MANIFEST's last sequence that no
  // live log holds, and opening the store would delete them (LevelDB may
  // even reuse its number for a new file). That is damage of the MANIFEST,
  // which repair mends by rebuilding it from every table.
  void CheckUnlistedTable(const std::string& name, const std::string& manifest,
                          uint64_t oldest_logged) {
    uint64_t size = 0;
    std::unique_ptr<leveldb::RandomAccessFile> file;
    leveldb::Status s = OpenForReading(env_, dir_ + "/" + name, &size, &file);
    leveldb::Options lo;
    lo.comparator = &order_;
    leveldb::Table* raw_table = nullptr;
    if (s.ok()) s = leveldb::Table::Open(lo, file.get(), size, &raw_table);
    std::unique_ptr<leveldb::Table> table(raw_table);
    uint64_t orphaned = 0;  // how many writes only this table holds
    uint64_t newest = 0;
    if (s.ok()) {
      leveldb::ReadOptions ro;
      ro.fill_cache = false;
      std::unique_ptr<leveldb::Iterator> it(table->NewIterator(ro));
      for (it->SeekToFirst(); it->Valid(); it->Next()) {
        const leveldb::Slice k = it->key();
        if (k.size() < 8) continue;
        const uint64_t seq = Fixed64(k.data() + k.size() - 8) >> 8;
        if (seq > last_sequence_ && seq < oldest_logged) {
          ++orphaned;
          newest = std::max(newest, seq);
        }
      }
    }
    // Unreadable (an output cut short) or nothing only it holds: a left-over.
    if (orphaned == 0) {
      summary_.unreferenced.push_back(name);
      return;
    }
    Damage(manifest, 0, 0,
           "does not list " + name + ", which holds " + std::to_string(orphaned) +
               " writes after the MANIFEST's last sequence (" + std::to_string(last_sequence_) +
               "; the newest " + std::to_string(newest) +
               ") that no log holds: the MANIFEST has lost its latest edits, and opening "
               "the store would delete that table");
  }

  static bool EndsWith(const std::string& s, std::string_view suffix) {
    return s.size() >= suffix.size() &&
           s.compare(s.size() - suffix.size(), suffix.size(), suffix.data(), suffix.size()) == 0;
  }

  void Damage(const std::string& file, uint64_t offset, uint64_t end, std::string message,
              std::string after_key = "", std::string before_key = "") {
    ++summary_.damaged;
    FileDamage d;
    d.file = file;
    d.offset = offset;
    d.end = end;
    d.after_raw = std::move(after_key);
    d.before_raw = std::move(before_key);
    d.after_key = d.after_raw.empty() ? "" : storage::Printable(d.after_raw);
    d.before_key = d.before_raw.empty() ? "" : storage::Printable(d.before_raw);
    d.message = std::move(message);
    on_damage_(d);
  }

  // Reads the block at [offset, offset + size) and its trailer; "" when its
  // CRC and type are right, else what is wrong.
  std::string VerifyBlock(leveldb::RandomAccessFile* f, uint64_t file_size, uint64_t offset,
                          uint64_t size, std::string* contents) {
    if (offset > file_size || size + kBlockTrailerBytes > file_size - offset) {
      return "block handle points past the end of the file";
    }
    std::string scratch(size + kBlockTrailerBytes, '\0');
    leveldb::Slice got;
    leveldb::Status s = f->Read(offset, scratch.size(), &got, scratch.data());
    if (!s.ok()) return "read failed: " + s.ToString();
    if (got.size() != scratch.size()) return "short read";
    const char* p = got.data();
    if (MaskCrc(Crc32c(std::string_view(p, size + 1))) != Fixed32(p + size + 1)) {
      return "block checksum mismatch";
    }
    if (static_cast<uint8_t>(p[size]) > 1) return "unknown block compression type";
    if (contents) {
      contents->assign(p, size);
      if (p[size] != 0) contents->clear();  // compressed: not parsed by hand
    }
    return "";
  }

  // The meta index block (uncompressed, as LevelDB writes one this small)
  // names the filter block; both are verified here since Table::Open ignores
  // a damaged filter.
  void CheckMetaBlocks(const std::string& name, leveldb::RandomAccessFile* f, uint64_t size,
                       uint64_t meta_offset, uint64_t meta_size) {
    std::string meta;
    std::string why = VerifyBlock(f, size, meta_offset, meta_size, &meta);
    if (!why.empty()) {
      Damage(name, meta_offset, meta_offset + meta_size + kBlockTrailerBytes,
             "meta index block: " + why);
      return;
    }
    if (meta.size() < 4) return;
    const uint32_t restarts = Fixed32(meta.data() + meta.size() - 4);
    if (restarts > (meta.size() - 4) / 4) {
      Damage(name, meta_offset, meta_offset + meta_size, "meta index block: bad restart count");
      return;
    }
    std::string_view in(meta.data(), meta.size() - 4 - 4 * restarts);
    std::string key;
    while (!in.empty()) {
      uint64_t shared = 0, unshared = 0, value_len = 0;
      if (!Varint64(&in, &shared) || !Varint64(&in, &unshared) || !Varint64(&in, &value_len) ||
          shared > key.size() || unshared + value_len > in.size()) {
        Damage(name, meta_offset, meta_offset + meta_size, "meta index block: bad entry");
        return;
      }
      key.resize(shared);
      key.append(in.substr(0, unshared));
      std::string_view value = in.substr(unshared, value_len);
      in.remove_prefix(unshared + value_len);
      uint64_t off = 0, len = 0;
      if (key.rfind("filter.", 0) != 0) continue;
      if (!Varint64(&value, &off) || !Varint64(&value, &len)) {
        Damage(name, meta_offset, meta_offset + meta_size, "meta index block: bad filter handle");
        return;
      }
      ++summary_.data_blocks;
      why = VerifyBlock(f, size, off, len, nullptr);
      if (!why.empty()) Damage(name, off, off + len + kBlockTrailerBytes, "filter block: " + why);
    }
  }

  void CheckTable(const std::string& name, const LiveTable* live) {
    ++summary_.tables;
    uint64_t size = 0;
    std::unique_ptr<leveldb::RandomAccessFile> file;
    leveldb::Status s = OpenForReading(env_, dir_ + "/" + name, &size, &file);
    if (!s.ok()) return Damage(name, 0, 0, "cannot read: " + s.ToString());
    const std::string first = live ? live->smallest : "", last = live ? live->largest : "";
    const auto rewrite = rewritten_.find(name);
    const bool rewritten = rewrite != rewritten_.end() && rewrite->second == size;
    if (live && live->size != size && !rewritten) {
      return Damage(name, 0, 0,
                    "is " + std::to_string(size) + " bytes, the MANIFEST says " +
                        std::to_string(live->size) + " (the whole table is unreadable)",
                    first, last);
    }
    if (size < kFooterBytes) return Damage(name, 0, 0, "shorter than a table footer", first, last);

    char footer_buf[kFooterBytes];
    leveldb::Slice footer;
    s = file->Read(size - kFooterBytes, kFooterBytes, &footer, footer_buf);
    if (!s.ok() || footer.size() != kFooterBytes) {
      return Damage(name, size - kFooterBytes, size, "footer unreadable", first, last);
    }
    if (Fixed64(footer.data() + kHandlesBytes) != kTableMagic) {
      return Damage(name, size - kFooterBytes, size, "footer: bad table magic number", first, last);
    }
    std::string_view handles(footer.data(), kHandlesBytes);
    uint64_t meta_off = 0, meta_len = 0, index_off = 0, index_len = 0;
    if (!Varint64(&handles, &meta_off) || !Varint64(&handles, &meta_len) ||
        !Varint64(&handles, &index_off) || !Varint64(&handles, &index_len)) {
      return Damage(name, size - kFooterBytes, size, "footer: bad block handles", first, last);
    }
    if (handles.find_first_not_of('\0') != std::string_view::npos) {
      Damage(name, size - kFooterBytes, size, "footer: padding is not zero");
    }
    // LevelDB writes the meta index block, the index block and the footer
    // back to back: handles that say otherwise are the footer's damage.
    if (meta_off + meta_len + kBlockTrailerBytes != index_off ||
        index_off + index_len + kBlockTrailerBytes != size - kFooterBytes) {
      return Damage(name, size - kFooterBytes, size,
                    "footer: block handles do not match the table's layout (the whole table is "
                    "unreadable)",
                    first, last);
    }
    CheckMetaBlocks(name, file.get(), size, meta_off, meta_len);

    leveldb::Options lo;
    lo.comparator = &order_;
    lo.paranoid_checks = true;  // verify the index block's checksum on open
    leveldb::Table* raw_table = nullptr;
    s = leveldb::Table::Open(lo, file.get(), size, &raw_table);
    std::unique_ptr<leveldb::Table> table(raw_table);
    if (!s.ok()) {
      return Damage(name, index_off, index_off + index_len + kBlockTrailerBytes,
                    "index block: " + s.ToString() + " (the whole table is unreadable)", first,
                    last);
    }
    ScanTable(name, table.get());
  }

  void ScanTable(const std::string& name, leveldb::Table* table) {
    ScanIntact(
        table, [&](const leveldb::Slice&, const leveldb::Slice&) { ++summary_.entries; },
        [&](const std::string& last_good, const std::string& next_good, const leveldb::Status& s) {
          Damage(name, last_good.empty() ? 0 : table->ApproximateOffsetOf(last_good),
                 next_good.empty() ? 0 : table->ApproximateOffsetOf(next_good),
                 "data block: " + s.ToString(), UserKey(last_good), UserKey(next_good));
        });
  }

  using RecordFn = std::function<void(std::string_view)>;

  // The smallest and largest event key (a/<seq>) a write-ahead log record
  // holds: a leveldb::WriteBatch, whose layout (write_batch.cc: seq fixed64,
  // count fixed32, then per entry a tag byte, a varint32-prefixed key and,
  // for a put, a varint32-prefixed value) LevelDB keeps for its logs. None
  // when it holds none or does not parse.
  static std::optional<std::pair<std::string, std::string>> EventKeysOf(std::string_view batch) {
    constexpr size_t kBatchHeader = 12;
    if (batch.size() < kBatchHeader) return std::nullopt;
    size_t pos = kBatchHeader;
    auto slice = [&](std::string_view* out) {
      uint32_t n = 0;
      for (int shift = 0; shift <= 28; shift += 7) {
        if (pos >= batch.size()) return false;
        const auto byte = static_cast<uint8_t>(batch[pos++]);
        n |= static_cast<uint32_t>(byte & 0x7f) << shift;
        if (byte < 0x80) {
          if (n > batch.size() - pos) return false;
          *out = batch.substr(pos, n);
          pos += n;
          return true;
        }
      }
      return false;
    };
    std::optional<std::pair<std::string, std::string>> keys;
    while (pos < batch.size()) {
      const auto tag = static_cast<uint8_t>(batch[pos++]);
      std::string_view key, value;
      if (tag > 1 || !slice(&key) || (tag == 1 && !slice(&value))) return keys;
      if (!key.starts_with(storage::kEventPrefix)) continue;
      if (!keys) keys.emplace(key, key);
      if (key < keys->first) keys->first = key;
      if (key > keys->second) keys->second = key;
    }
    return keys;
  }

  // Whether the log record starting `rest` (which ends the file) verifies
  // with a length differing from `len` in one of its two bytes, or with all
  // the bytes left: then its length field is damaged, not its append torn.
  static bool LengthDamaged(std::string_view rest, size_t len, uint32_t crc) {
    auto verifies = [&](size_t n) {
      return kLogHeaderBytes + n <= rest.size() &&
             MaskCrc(Crc32c(rest.substr(kLogHeaderBytes - 1, 1 + n))) == crc;
    };
    if (verifies(rest.size() - kLogHeaderBytes)) return true;
    for (size_t b = 0; b < 256; ++b) {
      if (verifies((len & 0xff00) | b) || verifies((len & 0x00ff) | (b << 8))) return true;
    }
    return false;
  }

  // Checks one log file; hands each intact logical record (its fragments
  // joined) to `on_record` when given.
  void CheckLog(const std::string& name, const RecordFn* on_record = nullptr) {
    ++summary_.logs;
    // A write-ahead log's damage is reported with the event keys of the
    // intact records on either side (the newest before it, the oldest
    // after it): LevelDB's repairer skips a damaged record and keeps what
    // it can read after it, so what is lost starts after the newest event
    // before the damage, not after the newest one that survives. Reports
    // wait for the next intact record with events; each is made at the
    // log's end.
    struct Pending {
      uint64_t offset, end;
      std::string message, after, before;
    };
    std::vector<Pending> pending;
    std::string newest_event;  // the largest a/ key of this log's intact records so far
    auto damage = [&](uint64_t offset, uint64_t end, std::string message) {
      pending.push_back(Pending{offset, end, std::move(message), newest_event, ""});
    };
    const bool holds_batches = EndsWith(name, ".log");  // not a MANIFEST's edits
    const RecordFn record = [&](std::string_view batch) {
      if (on_record) (*on_record)(batch);
      if (!holds_batches) return;
      const auto keys = EventKeysOf(batch);
      if (!keys) return;
      for (Pending& p : pending) {
        if (p.before.empty()) p.before = keys->first;
      }
      newest_event = std::max(newest_event, keys->second);
    };
    std::string joined;
    std::string data;
    leveldb::Status s = leveldb::ReadFileToString(env_, dir_ + "/" + name, &data);
    if (!s.ok()) return Damage(name, 0, 0, "cannot read: " + s.ToString());
    bool in_record = false;  // inside a FIRST..LAST sequence
    bool resync = false;     // after damage: fragments until the next start are expected
    for (size_t block = 0; block < data.size(); block += kLogBlockBytes) {
      const size_t end = std::min(block + kLogBlockBytes, data.size());
      const bool full_block = end == block + kLogBlockBytes;
      size_t pos = block;
      while (pos < end) {
        const char* h = data.data() + pos;
        if (end - pos < kLogHeaderBytes) {
          // A full block ends in zero padding; a short tail is a torn append.
          if (!full_block) {
            ++summary_.torn_tails;
          } else if (std::string_view(h, end - pos).find_first_not_of('\0') !=
                     std::string_view::npos) {
            damage(pos, end, "block trailer is not zero");
          }
          break;
        }
        const uint32_t crc = Fixed32(h);
        const size_t len = static_cast<uint8_t>(h[4]) | (static_cast<uint8_t>(h[5]) << 8);
        const uint8_t type = static_cast<uint8_t>(h[6]);
        if (pos + kLogHeaderBytes + len > end) {
          // At the end of the file either a torn append or a damaged length:
          // a record there that verifies with a length one byte away tells
          // the latter.
          if (full_block || LengthDamaged(std::string_view(h, end - pos), len, crc)) {
            damage(pos, end, "record length runs past its block");
            resync = true;
          } else {
            ++summary_.torn_tails;
          }
          break;
        }
        if (type == kZero && len == 0 && crc == 0) {
          // Preallocated space LevelDB skips to the block's end; it must be zero.
          if (std::string_view(h, end - pos).find_first_not_of('\0') != std::string_view::npos) {
            damage(pos, end, "zero record followed by data");
            resync = true;
          }
          break;
        }
        if (MaskCrc(Crc32c(std::string_view(h + 6, 1 + len))) != crc) {
          // The length may be the damaged part: LevelDB drops the block's rest.
          damage(pos, end, "record checksum mismatch");
          resync = true;
          break;
        }
        if (type < kFull || type > kLast) {
          damage(pos, pos + kLogHeaderBytes + len, "unknown record type");
          resync = true;
        } else if (type == kFull || type == kFirst) {
          if (in_record && !resync) {
            damage(pos, pos + kLogHeaderBytes + len, "record fragment without its end");
          }
          resync = false;
          in_record = type == kFirst;
          ++summary_.log_records;
          joined.assign(h + kLogHeaderBytes, len);
          if (type == kFull) record(joined);
        } else {
          if (!in_record && !resync) {
            damage(pos, pos + kLogHeaderBytes + len, "record fragment without its start");
          }
          const bool whole = in_record && type == kLast;
          in_record = type == kMiddle;
          ++summary_.log_records;
          joined.append(h + kLogHeaderBytes, len);
          if (whole) record(joined);
        }
        pos += kLogHeaderBytes + len;
      }
    }
    for (Pending& p : pending) {
      Damage(name, p.offset, p.end, std::move(p.message), std::move(p.after), std::move(p.before));
    }
  }

  // The MANIFEST that CURRENT names, or "" (reported) when it names none.
  std::string CheckCurrent() {
    std::string current;
    leveldb::Status s = leveldb::ReadFileToString(env_, dir_ + "/CURRENT", &current);
    if (!s.ok()) {
      Damage("CURRENT", 0, 0, "cannot read: " + s.ToString());
      return "";
    }
    if (current.empty() || current.back() != '\n' || current.rfind("MANIFEST-", 0) != 0) {
      Damage("CURRENT", 0, current.size(), "does not name a MANIFEST");
      return "";
    }
    current.pop_back();
    if (!env_->FileExists(dir_ + "/" + current)) {
      Damage("CURRENT", 0, current.size() + 1, "names " + current + ", which does not exist");
      return "";
    }
    return current;
  }

  // Reads the live version from the MANIFEST's version edits (LevelDB's
  // db/version_edit.cc tags): which tables and logs are live, each table's
  // size and key range. Files outside it are left-overs LevelDB deletes on
  // open (e.g. a table an interrupted compaction was writing), not damage.
  void ReadManifest(const std::string& name) {
    const uint64_t damaged = summary_.damaged;
    bool parsed = true;
    const RecordFn apply = [&](std::string_view edit) {
      if (!ApplyEdit(edit)) parsed = false;
    };
    CheckLog(name, &apply);
    live_known_ = parsed && summary_.damaged == damaged;
    // LevelDB refuses a descriptor without these ("no meta-nextfile entry"):
    // one cut after its first record, the state every later edit builds on.
    if (live_known_ && !(has_log_number_ && has_next_file_ && has_last_sequence_)) {
      Damage(name, 0, 0,
             "has no log number, next file number or last sequence: its edits after the "
             "first are lost, and LevelDB cannot open it");
      live_known_ = false;
    }
  }

  static bool LengthPrefixed(std::string_view* in, std::string* out) {
    uint64_t n = 0;
    if (!Varint64(in, &n) || n > in->size()) return false;
    out->assign(in->substr(0, n));
    in->remove_prefix(n);
    return true;
  }

  bool ApplyEdit(std::string_view in) {
    while (!in.empty()) {
      uint64_t tag = 0, level = 0, number = 0, v = 0;
      std::string a, b;
      if (!Varint64(&in, &tag)) return false;
      switch (tag) {
        case 1:  // comparator name
          if (!LengthPrefixed(&in, &a)) return false;
          break;
        case 2:  // log number
          if (!Varint64(&in, &log_number_)) return false;
          has_log_number_ = true;
          break;
        case 9:  // previous log number
          if (!Varint64(&in, &prev_log_number_)) return false;
          break;
        case 3:  // next file number
          if (!Varint64(&in, &v)) return false;
          has_next_file_ = true;
          break;
        case 4:  // last sequence
          if (!Varint64(&in, &last_sequence_)) return false;
          has_last_sequence_ = true;
          break;
        case 5:  // compaction pointer
          if (!Varint64(&in, &level) || !LengthPrefixed(&in, &a)) return false;
          break;
        case 6:  // deleted file
          if (!Varint64(&in, &level) || !Varint64(&in, &number)) return false;
          live_tables_.erase(number);
          break;
        case 7:  // new file
          if (!Varint64(&in, &level) || !Varint64(&in, &number) || !Varint64(&in, &v) ||
              !LengthPrefixed(&in, &a) || !LengthPrefixed(&in, &b)) {
            return false;
          }
          live_tables_[number] = LiveTable{v, UserKey(a), UserKey(b)};
          break;
        default:
          return false;
      }
    }
    return true;
  }

  static std::optional<uint64_t> FileNumber(const std::string& name) {
    const size_t dot = name.find('.');
    if (dot == std::string::npos) return std::nullopt;  // CURRENT, LOCK, LOG
    uint64_t n = 0;
    const char* end = name.data() + dot;
    auto [p, ec] = std::from_chars(name.data(), end, n);
    if (ec != std::errc() || p != end) return std::nullopt;
    return n;
  }

  bool live_known_ = false;
  std::map<uint64_t, LiveTable> live_tables_;
  uint64_t log_number_ = 0, prev_log_number_ = 0;
  uint64_t last_sequence_ = 0;  // the latest edit's
  bool has_log_number_ = false, has_next_file_ = false, has_last_sequence_ = false;

  const std::string dir_;
  leveldb::Env* const env_;
  const FileDamageFn& on_damage_;
  const RewrittenTables& rewritten_;
  InternalKeyOrder order_;
  FileCheckSummary summary_;
};

}  // namespace

Result<uint64_t> RewriteIntactEntries(const std::string& dir, const std::string& name,
                                      leveldb::Env* env,
                                      const std::function<Status(uint64_t size)>& before_replace) {
  env = env ? env : leveldb::Env::Default();
  const std::string path = dir + "/" + name, temp = path + ".salvage";
  uint64_t size = 0;
  std::unique_ptr<leveldb::RandomAccessFile> file;
  leveldb::Status s = OpenForReading(env, path, &size, &file);
  InternalKeyOrder order;
  leveldb::Options lo;
  lo.comparator = &order;
  lo.paranoid_checks = true;
  leveldb::Table* raw_table = nullptr;
  if (s.ok()) s = leveldb::Table::Open(lo, file.get(), size, &raw_table);
  std::unique_ptr<leveldb::Table> table(raw_table);
  if (!s.ok()) return Status::Corruption(name + ": " + s.ToString());
  leveldb::WritableFile* raw_out = nullptr;
  s = env->NewWritableFile(temp, &raw_out);
  std::unique_ptr<leveldb::WritableFile> out(raw_out);
  if (!s.ok()) return Status::IOError("rewriting " + name + ": " + s.ToString());
  // No filter block: LevelDB's filters hash user keys through its internal
  // policy, which is not public; a table without one is only read slower.
  leveldb::TableBuilder builder(lo, out.get());
  uint64_t kept = 0;
  ScanIntact(
      table.get(),
      [&](const leveldb::Slice& k, const leveldb::Slice& v) {
        builder.Add(k, v);
        ++kept;
      },
      [](const std::string&, const std::string&, const leveldb::Status&) {});
  s = builder.Finish();
  if (s.ok()) s = out->Sync();
  if (s.ok()) s = out->Close();
  Status st = s.ok() ? Status::OK() : Status::IOError("rewriting " + name + ": " + s.ToString());
  if (st.ok() && before_replace) st = before_replace(builder.FileSize());
  if (st.ok()) {
    s = env->RenameFile(temp, path);
    if (!s.ok()) st = Status::IOError("rewriting " + name + ": " + s.ToString());
  }
  if (!st.ok()) {
    (void)env->RemoveFile(temp);
    return st;
  }
  return kept;
}

Result<FileCheckSummary> CheckFiles(const std::string& dir, leveldb::Env* env,
                                    const FileDamageFn& on_damage,
                                    const RewrittenTables& rewritten) {
  DirChecker checker(dir, env ? env : leveldb::Env::Default(), on_damage, rewritten);
  Status st = checker.Run();
  if (!st.ok()) return st;
  return checker.summary();
}

}  // namespace eventfold
