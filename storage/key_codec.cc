#include "storage/key_codec.h"

namespace eventfold::storage {
namespace {

void AppendBigEndian(uint64_t v, std::string* out) {
  for (int shift = 56; shift >= 0; shift -= 8) {
    out->push_back(static_cast<char>((v >> shift) & 0xFF));
  }
}

uint64_t ReadBigEndian(std::string_view s) {
  uint64_t v = 0;
  for (int i = 0; i < 8; ++i) v = (v << 8) | static_cast<unsigned char>(s[i]);
  return v;
}

std::string Join(std::string_view prefix, std::string_view rest) {
  std::string key;
  key.reserve(prefix.size() + rest.size());
  key.append(prefix).append(rest);
  return key;
}

std::string SeqKey(std::string_view prefix, uint64_t seq) {
  std::string key(prefix);
  AppendBigEndian(seq, &key);
  return key;
}

}  // namespace

std::string MetaKey(std::string_view name) { return Join(kMetaPrefix, name); }
std::string EventKey(uint64_t seq) { return SeqKey(kEventPrefix, seq); }
std::string DedupKey(std::string_view event_id) { return Join(kDedupPrefix, event_id); }
std::string ConflictKey(uint64_t seq) { return SeqKey(kConflictPrefix, seq); }
std::string QuarantineKey(uint64_t seq) { return SeqKey(kQuarantinePrefix, seq); }

std::string LogPrefix(const EntityRef& ref) {
  std::string key(kLogPrefix);
  key.append(ref.entity).push_back('\0');
  key.append(ref.id).push_back('\0');
  return key;
}

std::string LogKey(const EntityRef& ref, uint64_t seq) {
  std::string key = LogPrefix(ref);
  AppendBigEndian(seq, &key);
  return key;
}

std::string ProjectionScanPrefix(std::string_view entity) {
  std::string key(kProjectionPrefix);
  if (!entity.empty()) key.append(entity).push_back('\0');
  return key;
}

std::string ProjectionKey(const EntityRef& ref) {
  std::string key(kProjectionPrefix);
  key.append(ref.entity).push_back('\0');
  key.append(ref.id);
  return key;
}

std::optional<uint64_t> ParseSeqKey(std::string_view key, std::string_view prefix) {
  if (key.size() != prefix.size() + 8 || key.substr(0, prefix.size()) != prefix) {
    return std::nullopt;
  }
  return ReadBigEndian(key.substr(prefix.size()));
}

std::optional<EntityRef> ParseProjectionKey(std::string_view key) {
  if (key.substr(0, kProjectionPrefix.size()) != kProjectionPrefix) return std::nullopt;
  key.remove_prefix(kProjectionPrefix.size());
  const size_t nul = key.find('\0');
  if (nul == std::string_view::npos) return std::nullopt;
  return EntityRef{std::string(key.substr(0, nul)), std::string(key.substr(nul + 1))};
}

std::optional<std::pair<EntityRef, uint64_t>> ParseLogKey(std::string_view key) {
  if (key.substr(0, kLogPrefix.size()) != kLogPrefix || key.size() < kLogPrefix.size() + 10 ||
      key[key.size() - 9] != '\0') {
    return std::nullopt;
  }
  const uint64_t seq = ReadBigEndian(key.substr(key.size() - 8));
  key.remove_prefix(kLogPrefix.size());
  key.remove_suffix(9);  // "\0" + seq
  const size_t nul = key.find('\0');
  if (nul == std::string_view::npos) return std::nullopt;
  return std::make_pair(
      EntityRef{std::string(key.substr(0, nul)), std::string(key.substr(nul + 1))}, seq);
}

std::string PrefixEnd(std::string_view prefix) {
  std::string end(prefix);
  while (!end.empty()) {
    auto& last = reinterpret_cast<unsigned char&>(end.back());
    if (last != 0xFF) {
      ++last;
      return end;
    }
    end.pop_back();
  }
  return end;  // every key: no end bound
}

}  // namespace eventfold::storage
