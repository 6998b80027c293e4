#include "replay/run_file.h"

#include <algorithm>
#include <cstring>

#include "storage/leveldb_status.h"
#include "storage/scratch_space.h"

namespace eventfold {
namespace {

using storage::FromLevelDb;

constexpr size_t kHeaderBytes = 8;
constexpr size_t kReadChunk = 64 << 10;

void PutFixed32(char* out, uint32_t v) {
  for (int i = 0; i < 4; ++i) out[i] = static_cast<char>(v >> (8 * i));
}

uint32_t GetFixed32(const char* in) {
  uint32_t v = 0;
  for (int i = 3; i >= 0; --i) v = v << 8 | static_cast<unsigned char>(in[i]);
  return v;
}

class BufferCursor final : public RunCursor {
 public:
  explicit BufferCursor(RunBuffer buffer) : buffer_(std::move(buffer)) {}
  bool Next() override {
    if (next_ >= buffer_.size()) return false;
    key_ = buffer_.key(next_);
    value_ = buffer_.value(next_);
    ++next_;
    return true;
  }

 private:
  RunBuffer buffer_;
  size_t next_ = 0;
};

class FileCursor final : public RunCursor {
 public:
  explicit FileCursor(std::unique_ptr<leveldb::SequentialFile> file) : file_(std::move(file)) {}

  bool Next() override {
    if (!Fill(kHeaderBytes)) return false;
    const uint32_t key_size = GetFixed32(buf_.data() + pos_);
    const uint32_t value_size = GetFixed32(buf_.data() + pos_ + 4);
    const size_t size = kHeaderBytes + key_size + value_size;
    if (!Fill(size)) {
      if (status_.ok()) status_ = Status::Corruption("rebuild run file ends mid-record");
      return false;
    }
    key_ = std::string_view(buf_.data() + pos_ + kHeaderBytes, key_size);
    value_ = std::string_view(buf_.data() + pos_ + kHeaderBytes + key_size, value_size);
    pos_ += size;
    return true;
  }
  Status status() const override { return status_; }

 private:
  // Makes `n` bytes available at pos_; false at the end of the file.
  bool Fill(size_t n) {
    if (end_ - pos_ >= n) return true;
    if (!status_.ok() || eof_) return false;
    // Keep the unread tail; the current record's views die here, as
    // Next()'s contract allows.
    std::memmove(buf_.data(), buf_.data() + pos_, end_ - pos_);
    end_ -= pos_;
    pos_ = 0;
    if (buf_.size() < std::max(n, kReadChunk)) buf_.resize(std::max(n, kReadChunk));
    while (end_ < n && !eof_) {
      leveldb::Slice got;
      const size_t want = buf_.size() - end_;
      leveldb::Status s = file_->Read(want, &got, buf_.data() + end_);
      if (!s.ok()) {
        status_ = FromLevelDb(s, "reading a rebuild run file");
        return false;
      }
      if (got.data() != buf_.data() + end_) {
        std::memmove(buf_.data() + end_, got.data(), got.size());
      }
      end_ += got.size();
      eof_ = got.size() == 0;
    }
    return end_ >= n;
  }

  std::unique_ptr<leveldb::SequentialFile> file_;
  std::string buf_;
  size_t pos_ = 0, end_ = 0;
  bool eof_ = false;
  Status status_;
};

}  // namespace

ScratchDir::~ScratchDir() { (void)storage::ReleaseScratch(env_, path_); }

Status ScratchDir::Reset() { return storage::ClaimScratch(env_, path_); }

std::string ScratchDir::NewFileName() {
  return path_ + "/run-" + std::to_string(next_.fetch_add(1)) + ".tmp";
}

void RunBuffer::Reserve(size_t bytes) {
  // Log records are ~1 KiB, so entries take a small share.
  arena_.reserve(bytes);
  entries_.reserve(bytes / 512);
}

void RunBuffer::Add(std::string_view key, std::string_view value) {
  entries_.push_back(
      Entry{arena_.size(), static_cast<uint32_t>(key.size()), static_cast<uint32_t>(value.size())});
  arena_.append(key);
  arena_.append(value);
}

void RunBuffer::Sort() {
  // In place: std::stable_sort would take a buffer of as many entries again
  // (8 MiB for a 512k-entry run). Offsets grow in the order records came,
  // so ordering equal keys by offset keeps it.
  std::sort(entries_.begin(), entries_.end(), [this](const Entry& a, const Entry& b) {
    const int c = std::string_view(arena_.data() + a.offset, a.key_size)
                      .compare(std::string_view(arena_.data() + b.offset, b.key_size));
    return c != 0 ? c < 0 : a.offset < b.offset;
  });
}

void RunBuffer::Clear() {
  arena_.clear();
  entries_.clear();
}

Result<std::unique_ptr<RunWriter>> RunWriter::Create(leveldb::Env* env, const std::string& name) {
  leveldb::WritableFile* file = nullptr;
  Status st = FromLevelDb(env->NewWritableFile(name, &file), "creating a rebuild run file");
  if (!st.ok()) return st;
  return std::unique_ptr<RunWriter>(
      new RunWriter(std::unique_ptr<leveldb::WritableFile>(file), name));
}

Status RunWriter::Add(std::string_view key, std::string_view value) {
  char header[kHeaderBytes];
  PutFixed32(header, static_cast<uint32_t>(key.size()));
  PutFixed32(header + 4, static_cast<uint32_t>(value.size()));
  leveldb::Status s = file_->Append(leveldb::Slice(header, kHeaderBytes));
  if (s.ok()) s = file_->Append(leveldb::Slice(key.data(), key.size()));
  if (s.ok()) s = file_->Append(leveldb::Slice(value.data(), value.size()));
  return FromLevelDb(s, "writing a rebuild run file");
}

Status RunWriter::Close() {
  // Unsynced: a run never outlives the rebuild that wrote it.
  return FromLevelDb(file_->Close(), "writing a rebuild run file");
}

std::unique_ptr<RunCursor> ReadBuffer(RunBuffer buffer) {
  return std::make_unique<BufferCursor>(std::move(buffer));
}

Result<std::unique_ptr<RunCursor>> ReadRunFile(leveldb::Env* env, const std::string& name) {
  leveldb::SequentialFile* file = nullptr;
  Status st = FromLevelDb(env->NewSequentialFile(name, &file), "opening a rebuild run file");
  if (!st.ok()) return st;
  return std::unique_ptr<RunCursor>(
      std::make_unique<FileCursor>(std::unique_ptr<leveldb::SequentialFile>(file)));
}

namespace {

// std::*_heap keep the largest first: order by key, descending.
bool AfterInKeyOrder(const RunCursor* a, const RunCursor* b) { return a->key() > b->key(); }

}  // namespace

RunMerger::RunMerger(std::vector<std::unique_ptr<RunCursor>> runs) : runs_(std::move(runs)) {
  for (const std::unique_ptr<RunCursor>& run : runs_) {
    if (run->Next()) heap_.push_back(run.get());
  }
  std::make_heap(heap_.begin(), heap_.end(), AfterInKeyOrder);
}

bool RunMerger::Next() {
  if (current_ && current_->Next()) {
    heap_.push_back(current_);
    std::push_heap(heap_.begin(), heap_.end(), AfterInKeyOrder);
  }
  current_ = nullptr;
  if (heap_.empty()) return false;
  std::pop_heap(heap_.begin(), heap_.end(), AfterInKeyOrder);
  current_ = heap_.back();
  heap_.pop_back();
  return true;
}

Status RunMerger::status() const {
  for (const std::unique_ptr<RunCursor>& run : runs_) {
    if (!run->status().ok()) return run->status();
  }
  return Status::OK();
}

}  // namespace eventfold
