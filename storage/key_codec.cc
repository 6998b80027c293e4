#include "storage/key_codec.h"

namespace eventfold::storage {
namespace {

constexpr size_t kGenPrefixBytes = 2 + 4 + 1;  // "g/" be32 "/"
constexpr size_t kFamilyBytes = 2;             // "l/", "p/", "s/"

void AppendBigEndian(uint64_t v, int bytes, std::string* out) {
  for (int shift = (bytes - 1) * 8; shift >= 0; shift -= 8) {
    out->push_back(static_cast<char>((v >> shift) & 0xFF));
  }
}

uint64_t ReadBigEndian(std::string_view s, int bytes) {
  uint64_t v = 0;
  for (int i = 0; i < bytes; ++i) v = (v << 8) | static_cast<unsigned char>(s[i]);
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
  AppendBigEndian(seq, 8, &key);
  return key;
}

std::string EntityPrefix(uint32_t gen, std::string_view family, const EntityRef& ref) {
  std::string key = FamilyPrefix(gen, family);
  key.append(ref.entity).push_back('\0');
  key.append(ref.id).push_back('\0');
  return key;
}

constexpr uint64_t kSignBit = 1ull << 63;

}  // namespace

std::string MetaKey(std::string_view name) { return Join(kMetaPrefix, name); }
std::string EventKey(uint64_t seq) { return SeqKey(kEventPrefix, seq); }
std::string DedupKey(std::string_view event_id) { return Join(kDedupPrefix, event_id); }
std::string ConflictKey(uint64_t seq) { return SeqKey(kConflictPrefix, seq); }
std::string QuarantineKey(uint64_t seq) { return SeqKey(kQuarantinePrefix, seq); }
std::string FeedKey(uint64_t seq) { return SeqKey(kFeedPrefix, seq); }
std::string CheckpointKey(std::string_view subscription) {
  return Join(kCheckpointPrefix, subscription);
}

std::string ParkedPrefix(std::string_view subscription) {
  std::string key = Join(kParkedPrefix, subscription);
  key.push_back('\0');
  return key;
}

std::string ParkedKey(std::string_view subscription, uint64_t seq) {
  std::string key = ParkedPrefix(subscription);
  AppendBigEndian(seq, 8, &key);
  return key;
}

std::string CompactionKey(const EntityRef& ref) {
  std::string key(kCompactionPrefix);
  key.append(ref.entity).push_back('\0');
  key.append(ref.id);
  return key;
}

std::optional<EntityRef> ParseCompactionKey(std::string_view key) {
  if (!key.starts_with(kCompactionPrefix)) return std::nullopt;
  key.remove_prefix(kCompactionPrefix.size());
  const size_t nul = key.find('\0');
  if (nul == std::string_view::npos || nul == 0) return std::nullopt;
  return EntityRef{std::string(key.substr(0, nul)), std::string(key.substr(nul + 1))};
}

FoldKey CompactionPoint() { return FoldKey{INT64_MIN, std::nullopt, 0, ""}; }

std::string EncodeFoldKey(const FoldKey& k) {
  std::string out;
  out.reserve(8 + 9 + 4 + k.event_id.size());
  AppendBigEndian(static_cast<uint64_t>(k.occurred_at) ^ kSignBit, 8, &out);
  if (k.version) {
    out.push_back('\x01');
    AppendBigEndian(static_cast<uint64_t>(*k.version) ^ kSignBit, 8, &out);
  } else {
    out.push_back('\0');
  }
  AppendBigEndian(k.rank, 4, &out);
  out.append(k.event_id);
  return out;
}

std::optional<FoldKey> DecodeFoldKey(std::string_view b) {
  if (b.size() < 8 + 1 + 4) return std::nullopt;
  FoldKey k;
  k.occurred_at = static_cast<int64_t>(ReadBigEndian(b, 8) ^ kSignBit);
  b.remove_prefix(8);
  const char flag = b[0];
  b.remove_prefix(1);
  if (flag == '\x01') {
    if (b.size() < 8 + 4) return std::nullopt;
    k.version = static_cast<int64_t>(ReadBigEndian(b, 8) ^ kSignBit);
    b.remove_prefix(8);
  } else if (flag != '\0') {
    return std::nullopt;
  }
  k.rank = static_cast<uint32_t>(ReadBigEndian(b, 4));
  b.remove_prefix(4);
  k.event_id = b;
  return k;
}

std::string GenerationPrefix(uint32_t gen) {
  std::string key(kGenerationPrefix);
  AppendBigEndian(gen, 4, &key);
  key.push_back('/');
  return key;
}

std::string FamilyPrefix(uint32_t gen, std::string_view family) {
  std::string key = GenerationPrefix(gen);
  key.append(family);
  return key;
}

bool IsLiveFamily(const Generations& live, uint32_t gen, std::string_view family) {
  if (family == kLogFamily || family == kUnroutedFamily) return gen == live.logs;
  if (family == kProjectionFamily || family == kSnapshotFamily) return gen == live.projections;
  return false;
}

std::string LogPrefix(uint32_t gen, const EntityRef& ref) {
  return EntityPrefix(gen, kLogFamily, ref);
}

std::string LogKey(uint32_t gen, const EntityRef& ref, const FoldKey& fold) {
  std::string key = LogPrefix(gen, ref);
  key.append(EncodeFoldKey(fold));
  return key;
}

std::string LogFamilyPrefix(uint32_t gen) { return FamilyPrefix(gen, kLogFamily); }

std::string UnroutedKey(uint32_t gen, uint64_t seq) {
  std::string key = UnroutedFamilyPrefix(gen);
  AppendBigEndian(seq, 8, &key);
  return key;
}

std::string UnroutedFamilyPrefix(uint32_t gen) { return FamilyPrefix(gen, kUnroutedFamily); }

std::string ProjectionKey(uint32_t gen, const EntityRef& ref) {
  std::string key = FamilyPrefix(gen, kProjectionFamily);
  key.append(ref.entity).push_back('\0');
  key.append(ref.id);
  return key;
}

std::string ProjectionScanPrefix(uint32_t gen, std::string_view entity) {
  std::string key = FamilyPrefix(gen, kProjectionFamily);
  if (!entity.empty()) key.append(entity).push_back('\0');
  return key;
}

std::string SnapshotPrefix(uint32_t gen, const EntityRef& ref) {
  return EntityPrefix(gen, "s/", ref);
}

std::string SnapshotKey(uint32_t gen, const EntityRef& ref, const FoldKey& fold) {
  std::string key = SnapshotPrefix(gen, ref);
  key.append(EncodeFoldKey(fold));
  return key;
}

std::optional<uint64_t> ParseSeqKey(std::string_view key, std::string_view prefix) {
  if (key.size() != prefix.size() + 8 || key.substr(0, prefix.size()) != prefix) {
    return std::nullopt;
  }
  return ReadBigEndian(key.substr(prefix.size()), 8);
}

std::optional<EntityRef> ParseProjectionKey(std::string_view key) {
  if (key.size() < kGenPrefixBytes + kFamilyBytes || key.substr(0, 2) != kGenerationPrefix ||
      key.substr(kGenPrefixBytes, kFamilyBytes) != "p/") {
    return std::nullopt;
  }
  key.remove_prefix(kGenPrefixBytes + kFamilyBytes);
  const size_t nul = key.find('\0');
  if (nul == std::string_view::npos) return std::nullopt;
  return EntityRef{std::string(key.substr(0, nul)), std::string(key.substr(nul + 1))};
}

std::optional<LogKeyView> SplitLogKey(std::string_view key) {
  if (key.size() < kGenPrefixBytes + kFamilyBytes || key.substr(0, 2) != kGenerationPrefix) {
    return std::nullopt;
  }
  if (const std::string_view family = key.substr(kGenPrefixBytes, kFamilyBytes);
      family != kLogFamily && family != kSnapshotFamily) {
    return std::nullopt;
  }
  key.remove_prefix(kGenPrefixBytes + kFamilyBytes);
  const size_t nul1 = key.find('\0');
  if (nul1 == std::string_view::npos) return std::nullopt;
  const size_t nul2 = key.find('\0', nul1 + 1);
  if (nul2 == std::string_view::npos) return std::nullopt;
  return LogKeyView{key.substr(0, nul1), key.substr(nul1 + 1, nul2 - nul1 - 1),
                    key.substr(nul2 + 1)};
}

std::optional<std::pair<EntityRef, FoldKey>> ParseLogKey(std::string_view key) {
  std::optional<LogKeyView> parts = SplitLogKey(key);
  if (!parts) return std::nullopt;
  std::optional<FoldKey> fold = DecodeFoldKey(parts->fold);
  if (!fold) return std::nullopt;
  return std::make_pair(EntityRef{std::string(parts->entity), std::string(parts->id)},
                        std::move(*fold));
}

std::optional<FoldKey> ParseLogKeyFold(std::string_view key) {
  std::optional<LogKeyView> parts = SplitLogKey(key);
  return parts ? DecodeFoldKey(parts->fold) : std::nullopt;
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
