#include "storage/key_codec.h"

namespace eventfold::storage {
namespace {

constexpr size_t kFamilyBytes = 2;  // "l/", "p/", "s/"

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

namespace {

// The fewest bytes that hold `u` (0 for 0).
int SignificantBytes(uint64_t u) {
  int n = 0;
  while (u != 0) {
    ++n;
    u >>= 8;
  }
  return n;
}

// Markers of the version's encoding since format 8. Formats 1-7 wrote 0x00
// (absent) or 0x01 and eight bytes, which no marker here equals: the key
// of an older store is told apart by that byte (UpgradeFoldKeys).
constexpr uint8_t kNoVersion = 0x02;
constexpr uint8_t kNegativeVersion = 0x0B;  // minus the bytes that follow
constexpr uint8_t kVersion = 0x0C;          // plus the bytes that follow

// An optional version, order-preserving and self-delimiting: absent sorts
// first; a negative v is kNegativeVersion - n and v's low n bytes, where n
// is the bytes ~v needs (more bytes, more negative, a smaller marker); a
// non-negative v is kVersion + n and its n significant bytes.
void AppendVersion(const std::optional<int64_t>& version, std::string* out) {
  if (!version) {
    out->push_back(static_cast<char>(kNoVersion));
    return;
  }
  const int64_t v = *version;
  const int n = SignificantBytes(v < 0 ? ~static_cast<uint64_t>(v) : static_cast<uint64_t>(v));
  out->push_back(static_cast<char>(v < 0 ? kNegativeVersion - n : kVersion + n));
  AppendBigEndian(static_cast<uint64_t>(v), n, out);
}

// A rank: its byte count (0-4), then its significant bytes.
void AppendRank(uint32_t rank, std::string* out) {
  const int n = SignificantBytes(rank);
  out->push_back(static_cast<char>(n));
  AppendBigEndian(rank, n, out);
}

// Reads `n` big-endian bytes off `b` when it has them and they are the
// fewest that hold the value (`negative`: of a value whose higher bytes are
// all 0xFF); one encoding per value keeps the order exact.
std::optional<uint64_t> TakeSignificant(std::string_view* b, int n, bool negative) {
  if (b->size() < static_cast<size_t>(n)) return std::nullopt;
  if (n > 0 && static_cast<uint8_t>((*b)[0]) == (negative ? 0xFF : 0x00)) return std::nullopt;
  const uint64_t u = n == 0 ? 0 : ReadBigEndian(*b, n);
  b->remove_prefix(n);
  return u;
}

}  // namespace

std::string EncodeFoldKey(const FoldKey& k) {
  std::string out;
  out.reserve(8 + 2 + 2 + k.event_id.size());
  AppendBigEndian(static_cast<uint64_t>(k.occurred_at) ^ kSignBit, 8, &out);
  AppendVersion(k.version, &out);
  AppendRank(k.rank, &out);
  out.append(k.event_id);
  return out;
}

std::optional<FoldKey> DecodeFoldKey(std::string_view b) {
  if (b.size() < 8 + 1 + 1) return std::nullopt;
  FoldKey k;
  k.occurred_at = static_cast<int64_t>(ReadBigEndian(b, 8) ^ kSignBit);
  b.remove_prefix(8);
  const auto marker = static_cast<uint8_t>(b[0]);
  b.remove_prefix(1);
  if (marker >= kNegativeVersion - 8 && marker <= kVersion + 8) {
    const bool negative = marker <= kNegativeVersion;
    const int n = negative ? kNegativeVersion - marker : marker - kVersion;
    std::optional<uint64_t> u = TakeSignificant(&b, n, negative);
    if (!u) return std::nullopt;
    // A negative value's higher bytes are all ones.
    k.version = static_cast<int64_t>(negative && n < 8 ? *u | (~uint64_t{0} << (8 * n)) : *u);
  } else if (marker != kNoVersion) {
    return std::nullopt;  // 0x00 or 0x01: a key of format 7 or before
  }
  if (b.empty()) return std::nullopt;
  const int rank_bytes = static_cast<uint8_t>(b[0]);
  b.remove_prefix(1);
  if (rank_bytes > 4) return std::nullopt;
  std::optional<uint64_t> rank = TakeSignificant(&b, rank_bytes, /*negative=*/false);
  if (!rank) return std::nullopt;
  k.rank = static_cast<uint32_t>(*rank);
  k.event_id = b;
  return k;
}

std::optional<FoldKey> DecodeLegacyFoldKey(std::string_view b) {
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

namespace {

// A generation in a key: one byte for 0-239, else 0xF0 + n and its n
// big-endian bytes; order-preserving, and a rebuild's count of them stays
// one byte for years. (Formats 1-7 wrote four bytes.)
constexpr uint8_t kGenerationLength = 0xF0;

void AppendGeneration(uint32_t gen, std::string* out) {
  if (gen < kGenerationLength) {
    out->push_back(static_cast<char>(gen));
    return;
  }
  const int n = SignificantBytes(gen);
  out->push_back(static_cast<char>(kGenerationLength + n));
  AppendBigEndian(gen, n, out);
}

}  // namespace

std::string GenerationPrefix(uint32_t gen) {
  std::string key(kGenerationPrefix);
  AppendGeneration(gen, &key);
  key.push_back('/');
  return key;
}

std::optional<GenerationKeyView> ParseGenerationKey(std::string_view key) {
  if (!key.starts_with(kGenerationPrefix) || key.size() < kGenerationPrefix.size() + 2) {
    return std::nullopt;
  }
  std::string_view b = key.substr(kGenerationPrefix.size());
  const auto first = static_cast<uint8_t>(b[0]);
  b.remove_prefix(1);
  GenerationKeyView v;
  if (first < kGenerationLength) {
    v.gen = first;
  } else {
    const int n = first - kGenerationLength;
    if (n < 1 || n > 4 || b.size() < static_cast<size_t>(n)) return std::nullopt;
    const uint64_t gen = ReadBigEndian(b, n);
    if (gen < (n == 1 ? kGenerationLength : uint64_t{1} << (8 * (n - 1)))) {
      return std::nullopt;  // not the shortest form: one encoding per generation
    }
    v.gen = static_cast<uint32_t>(gen);
    b.remove_prefix(n);
  }
  if (b.empty() || b[0] != '/') return std::nullopt;
  b.remove_prefix(1);
  v.prefix_bytes = key.size() - b.size();
  v.rest = b;
  return v;
}

std::optional<GenerationKeyView> ParseLegacyGenerationKey(std::string_view key) {
  // "g/" be32(gen) "/", the high byte 0: a format 8 key's is a
  // generation's one byte (never 0: generations start at 1) or 0xF1-0xF4.
  if (!key.starts_with(kGenerationPrefix) || key.size() < 7 || key[2] != '\0' || key[6] != '/') {
    return std::nullopt;
  }
  GenerationKeyView v;
  v.gen = static_cast<uint32_t>(ReadBigEndian(key.substr(2), 4));
  v.prefix_bytes = 7;
  v.rest = key.substr(7);
  return v;
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
  std::optional<GenerationKeyView> g = ParseGenerationKey(key);
  if (!g || !g->rest.starts_with(kProjectionFamily)) return std::nullopt;
  key = g->rest.substr(kFamilyBytes);
  const size_t nul = key.find('\0');
  if (nul == std::string_view::npos) return std::nullopt;
  return EntityRef{std::string(key.substr(0, nul)), std::string(key.substr(nul + 1))};
}

std::optional<LogKeyView> SplitLogKey(std::string_view key) {
  std::optional<GenerationKeyView> g = ParseGenerationKey(key);
  if (!g || (!g->rest.starts_with(kLogFamily) && !g->rest.starts_with(kSnapshotFamily))) {
    return std::nullopt;
  }
  key = g->rest.substr(kFamilyBytes);
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

std::string Printable(std::string_view key) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out;
  out.reserve(key.size());
  for (char c : key) {
    const auto b = static_cast<unsigned char>(c);
    if (b >= 0x20 && b < 0x7F && b != '\\') {
      out.push_back(c);
    } else {
      out += "\\x";
      out.push_back(kHex[b >> 4]);
      out.push_back(kHex[b & 0xF]);
    }
  }
  return out;
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
