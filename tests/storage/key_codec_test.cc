// Tests of storage/key_codec: the key grammar and the orders LevelDB's
// bytewise comparator gives it.

#include "storage/key_codec.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "tests/storage/legacy_records.h"
#include "tests/storage/storage_test_util.h"

namespace eventfold::storage {
namespace {

using storage_test::TestSeed;

// LevelDB's default comparator: unsigned bytewise.
bool Bytewise(const std::string& a, const std::string& b) {
  return std::lexicographical_compare(a.begin(), a.end(), b.begin(), b.end(), [](char x, char y) {
    return static_cast<unsigned char>(x) < static_cast<unsigned char>(y);
  });
}

// Occurred_at values around the interesting boundaries, and random ones.
int64_t RandomTime(std::mt19937_64& rng) {
  static const int64_t kEdges[] = {std::numeric_limits<int64_t>::min(), -1, 0, 1, 1795947330123000,
                                   std::numeric_limits<int64_t>::max()};
  if (rng() % 4 == 0) return kEdges[rng() % 6];
  return static_cast<int64_t>(rng()) >> (rng() % 64);
}

FoldKey RandomFoldKey(std::mt19937_64& rng) {
  FoldKey k;
  // Few distinct values per component, so ties on earlier components are
  // common and later components decide.
  static const int64_t kTimes[] = {-5, 0, 7, 1795947330123000};
  k.occurred_at = rng() % 3 == 0 ? RandomTime(rng) : kTimes[rng() % 4];
  // Versions and ranks at every width of their encoding, negative versions
  // (which the codec orders, though decoding refuses them) included.
  static const int64_t kVersions[] = {INT64_MIN, -65537, -65536, -257, -256,  -255,  -2,       -1,
                                      0,         1,      255,    256,  65535, 65536, INT64_MAX};
  static const uint32_t kRanks[] = {0, 1, 255, 256, 65535, 65536, UINT32_MAX};
  if (rng() % 3) {
    const int pick = static_cast<int>(rng() % 4);
    k.version = pick == 0   ? static_cast<int64_t>(rng()) >> (rng() % 64)
                : pick == 1 ? kVersions[rng() % 15]
                            : static_cast<int64_t>(rng() % 3);
  }
  k.rank = static_cast<uint32_t>(rng() % 3 == 0   ? rng() >> (rng() % 32)
                                 : rng() % 3 == 0 ? kRanks[rng() % 7]
                                                  : rng() % 3);
  static const char* kIds[] = {"a", "ab", "b", "evt_1", "evt_10", "evt_2", "A", "a.b", "a-"};
  k.event_id = kIds[rng() % 9];
  return k;
}

TEST(storage_key_codec, FamiliesHaveTheirPrefixes) {
  EXPECT_EQ(MetaKey("profile"), "m/profile");
  EXPECT_EQ(DedupKey("evt_1"), "d/evt_1");
  EXPECT_EQ(EventKey(1), std::string("a/\0\0\0\0\0\0\0\x01", 10));
  EXPECT_EQ(ConflictKey(0x0102030405060708ull),
            std::string("c/\x01\x02\x03\x04\x05\x06\x07\x08", 10));
  // A generation takes one byte up to 239, then a length and its bytes.
  EXPECT_EQ(GenerationPrefix(1), std::string("g/\x01/", 4));
  EXPECT_EQ(GenerationPrefix(239), std::string("g/\xef/", 4));
  EXPECT_EQ(GenerationPrefix(240), std::string("g/\xf1\xf0/", 5));
  EXPECT_EQ(GenerationPrefix(0x0100), std::string("g/\xf2\x01\x00/", 6));
  EXPECT_EQ(GenerationPrefix(0x01020304), std::string("g/\xf4\x01\x02\x03\x04/", 8));
  for (uint32_t gen :
       {0u, 1u, 47u, 239u, 240u, 255u, 256u, 65535u, 65536u, 0x01020304u, UINT32_MAX}) {
    const std::string key = GenerationPrefix(gen) + "p/x";
    const std::optional<GenerationKeyView> g = ParseGenerationKey(key);
    ASSERT_TRUE(g.has_value()) << gen;
    EXPECT_EQ(g->gen, gen);
    EXPECT_EQ(g->rest, "p/x");
    EXPECT_EQ(g->prefix_bytes, GenerationPrefix(gen).size());
    EXPECT_FALSE(ParseLegacyGenerationKey(key).has_value() && gen != 0) << gen;
  }
  // Not the shortest form, a length past four, no '/' after it: refused.
  for (const std::string& bad :
       {std::string("g/\xf1\x05/p/x"), std::string("g/\xf2\x00\xff/p/x", 9),
        std::string("g/\xf5\x01\x02\x03\x04\x05/p/x"), std::string("g/\x01p/x"),
        std::string("g/")}) {
    EXPECT_FALSE(ParseGenerationKey(bad).has_value()) << Printable(bad);
  }
  // Formats 1-7's "g/" be32 "/" is read only as such.
  const std::string legacy("g/\0\0\0\x07/l/x", 10);
  EXPECT_FALSE(ParseGenerationKey(legacy).has_value());
  ASSERT_TRUE(ParseLegacyGenerationKey(legacy).has_value());
  EXPECT_EQ(ParseLegacyGenerationKey(legacy)->gen, 7u);
  EXPECT_EQ(ParseLegacyGenerationKey(legacy)->rest, "l/x");
  const std::string g1 = GenerationPrefix(1);
  EXPECT_EQ(LogPrefix(1, {"receipt", "r1"}), g1 + std::string("l/receipt\0r1\0", 13));
  EXPECT_EQ(LogFamilyPrefix(1), g1 + "l/");
  EXPECT_EQ(ProjectionKey(1, {"receipt", "r1"}), g1 + std::string("p/receipt\0r1", 12));
  EXPECT_EQ(ProjectionScanPrefix(1, ""), g1 + "p/");
  EXPECT_EQ(ProjectionScanPrefix(1, "receipt"), g1 + std::string("p/receipt\0", 10));
  EXPECT_EQ(SnapshotPrefix(1, {"receipt", "r1"}), g1 + std::string("s/receipt\0r1\0", 13));
  const FoldKey fk{5, 2, 1, "evt_1"};
  EXPECT_EQ(LogKey(1, {"receipt", "r1"}, fk), LogPrefix(1, {"receipt", "r1"}) + EncodeFoldKey(fk));
  EXPECT_EQ(SnapshotKey(1, {"receipt", "r1"}, fk),
            SnapshotPrefix(1, {"receipt", "r1"}) + EncodeFoldKey(fk));
}

TEST(storage_key_codec, SeqKeysSortNumerically) {
  const uint64_t seed = TestSeed("SeqKeysSortNumerically", 20261129);
  std::mt19937_64 rng(seed);
  std::vector<uint64_t> seqs = {0,          1,
                                2,          255,
                                256,        257,
                                65535,      65536,
                                1ull << 32, (1ull << 56) - 1,
                                1ull << 56, UINT64_MAX - 1,
                                UINT64_MAX};
  for (int i = 0; i < 2000; ++i) {
    // Mix magnitudes so numeric and naive little-endian/text orders disagree.
    seqs.push_back(rng() >> (rng() % 64));
  }
  for (size_t i = 0; i < seqs.size(); ++i) {
    for (size_t j = i + 1; j < std::min(seqs.size(), i + 40); ++j) {
      const uint64_t a = seqs[i], b = seqs[j];
      EXPECT_EQ(a < b, Bytewise(EventKey(a), EventKey(b))) << a << " vs " << b;
      EXPECT_EQ(a < b, Bytewise(ConflictKey(a), ConflictKey(b))) << a << " vs " << b;
      EXPECT_EQ(a < b, Bytewise(QuarantineKey(a), QuarantineKey(b))) << a << " vs " << b;
    }
  }
  // Sorting the keys sorts the numbers.
  std::vector<std::string> keys;
  for (uint64_t s : seqs) keys.push_back(EventKey(s));
  std::sort(keys.begin(), keys.end(), Bytewise);
  std::vector<uint64_t> sorted = seqs;
  std::sort(sorted.begin(), sorted.end());
  for (size_t i = 0; i < keys.size(); ++i) {
    ASSERT_EQ(ParseSeqKey(keys[i], kEventPrefix), sorted[i]) << "index " << i;
  }
}

TEST(storage_key_codec, FoldKeyEncodingPreservesFoldOrderAndRoundTrips) {
  const uint64_t seed = TestSeed("FoldKeyEncodingPreservesFoldOrderAndRoundTrips", 4242);
  std::mt19937_64 rng(seed);
  std::vector<FoldKey> keys;
  for (int i = 0; i < 600; ++i) keys.push_back(RandomFoldKey(rng));
  // docs/SPEC.md §4 order spelled out: an absent version sorts before any version,
  // version 0 included; event ids bytewise, a prefix first.
  keys.push_back(FoldKey{0, std::nullopt, 5, "z"});
  keys.push_back(FoldKey{0, 0, 0, "a"});
  for (const FoldKey& k : keys) {
    const std::optional<FoldKey> back = DecodeFoldKey(EncodeFoldKey(k));
    ASSERT_TRUE(back.has_value()) << k.event_id;
    EXPECT_EQ(*back, k);
  }
  for (size_t i = 0; i < keys.size(); ++i) {
    for (size_t j = i + 1; j < std::min(keys.size(), i + 60); ++j) {
      const FoldKey& a = keys[i];
      const FoldKey& b = keys[j];
      const std::string ea = EncodeFoldKey(a), eb = EncodeFoldKey(b);
      EXPECT_EQ(a < b, Bytewise(ea, eb))
          << a.occurred_at << "/" << a.version.value_or(-1) << "/" << a.rank << "/" << a.event_id
          << " vs " << b.occurred_at << "/" << b.version.value_or(-1) << "/" << b.rank << "/"
          << b.event_id;
      EXPECT_EQ(a == b, ea == eb);
    }
  }
  EXPECT_TRUE(Bytewise(EncodeFoldKey(keys[keys.size() - 2]), EncodeFoldKey(keys.back())));
  // Malformed encodings are refused.
  EXPECT_FALSE(DecodeFoldKey("").has_value());
  EXPECT_FALSE(DecodeFoldKey(std::string(12, '\0')).has_value());  // too short
  for (char marker : {'\x00', '\x01', '\x15', '\xff'}) {           // formats 1-7's, and no marker
    std::string bad_marker = EncodeFoldKey(FoldKey{1, std::nullopt, 0, "e"});
    bad_marker[8] = marker;
    EXPECT_FALSE(DecodeFoldKey(bad_marker).has_value()) << int{marker};
  }
  std::string cut = EncodeFoldKey(FoldKey{1, 3, 0, ""});
  cut.resize(cut.size() - 1);  // version present, rank cut short
  EXPECT_FALSE(DecodeFoldKey(cut).has_value());
  // One encoding per value, or two keys of one position could both exist:
  // a leading zero byte (or 0xff of a negative version) is refused, as is a
  // rank longer than four bytes.
  auto fold = [](std::initializer_list<int> bytes) {
    std::string out(8, '\x80');  // a time
    for (int b : bytes) out.push_back(static_cast<char>(b));
    return out + "e";
  };
  EXPECT_FALSE(DecodeFoldKey(fold({0x0d, 0x00, 0x00})).has_value());  // version 0 in a byte
  EXPECT_FALSE(DecodeFoldKey(fold({0x0a, 0xff, 0x00})).has_value());  // -1 in a byte
  EXPECT_FALSE(DecodeFoldKey(fold({0x02, 0x01, 0x00})).has_value());  // rank 0 in a byte
  EXPECT_FALSE(DecodeFoldKey(fold({0x02, 0x05, 1, 0, 0, 0, 0})).has_value());
  const std::optional<FoldKey> one = DecodeFoldKey(fold({0x0d, 0x01, 0x01, 0x01}));
  ASSERT_TRUE(one.has_value());
  EXPECT_EQ(one->version, 1);
  EXPECT_EQ(one->rank, 1u);
  // Formats 1-7's keys read through the legacy decoder to the same
  // position. The new key is at most a byte longer (a version past 2^56
  // and a rank past 2^24), and seven or more bytes shorter in the usual
  // case, a version and a rank below 256.
  for (const FoldKey& k : keys) {
    const std::string legacy = storage_test::EncodeLegacyFoldKey(k);
    EXPECT_LE(EncodeFoldKey(k).size(), legacy.size() + 1);
    if (k.version && *k.version >= 0 && *k.version < 256 && k.rank < 256) {
      EXPECT_LE(EncodeFoldKey(k).size() + 9, legacy.size());
    }
    EXPECT_EQ(DecodeLegacyFoldKey(legacy), k);
    EXPECT_FALSE(DecodeFoldKey(legacy).has_value()) << "an older key is not read as a newer one";
  }
}

TEST(storage_key_codec, LogKeysOfOneEntityAreContiguousAndInFoldOrder) {
  const uint64_t seed = TestSeed("LogKeysOfOneEntityAreContiguousAndInFoldOrder", 7);
  std::mt19937_64 rng(seed);
  // Entities chosen to be prefixes of each other, with ids that are too.
  const std::vector<EntityRef> refs = {
      {"a", "b"}, {"a", "bc"},   {"a", "b0"},   {"ab", "b"}, {"ab", ""},
      {"a", "a"}, {"a", "\x01"}, {"a", "\xff"}, {"b", "b"},  {"a", "b\xff"},
  };
  struct Item {
    std::string key;
    size_t ref;
    FoldKey fold;
  };
  std::vector<Item> items;
  for (int i = 0; i < 1500; ++i) {
    const size_t r = rng() % refs.size();
    const FoldKey fold = RandomFoldKey(rng);
    items.push_back({LogKey(3, refs[r], fold), r, fold});
  }
  std::sort(items.begin(), items.end(),
            [](const Item& x, const Item& y) { return Bytewise(x.key, y.key); });
  // Contiguous: once an entity's run ends it never reappears.
  std::vector<bool> done(refs.size(), false);
  for (size_t i = 0; i < items.size(); ++i) {
    const Item& it = items[i];
    ASSERT_FALSE(done[it.ref]) << "log of " << refs[it.ref].entity << "/" << refs[it.ref].id
                               << " is not contiguous";
    if (i > 0 && items[i - 1].ref == it.ref) {
      EXPECT_FALSE(it.fold < items[i - 1].fold) << "fold order within one log";
    }
    if (i + 1 == items.size() || items[i + 1].ref != it.ref) done[it.ref] = true;
    // Every entry starts with its entity's prefix, and no other entity's.
    EXPECT_TRUE(it.key.starts_with(LogPrefix(3, refs[it.ref])));
    for (size_t r = 0; r < refs.size(); ++r) {
      if (r != it.ref) {
        EXPECT_FALSE(it.key.starts_with(LogPrefix(3, refs[r])));
      }
    }
    // And parses back.
    auto parsed = ParseLogKey(it.key);
    ASSERT_TRUE(parsed.has_value());
    EXPECT_EQ(parsed->first, refs[it.ref]);
    EXPECT_EQ(parsed->second, it.fold);
  }
}

TEST(storage_key_codec, ProjectionKeysSortByEntityThenIdBytewise) {
  // "a" is a prefix of "ab": with a plain concatenation p/a + "z" would sort
  // after p/ab + "b". The NUL separator keeps (entity, id) order.
  const std::vector<EntityRef> refs = {
      {"ab", "a"},    {"a", "zzz"}, {"a", ""},   {"a", "\xff"}, {"b", "0"},
      {"ab", "\x01"}, {"a", "z"},   {"aa", "x"}, {"a", "za"},   {"a", "Z"},
  };
  std::vector<std::string> keys;
  for (const EntityRef& r : refs) keys.push_back(ProjectionKey(1, r));
  std::sort(keys.begin(), keys.end(), Bytewise);
  std::vector<EntityRef> by_key;
  for (const std::string& k : keys) {
    auto parsed = ParseProjectionKey(k);
    ASSERT_TRUE(parsed.has_value());
    by_key.push_back(*parsed);
  }
  std::vector<EntityRef> expected = refs;
  std::sort(expected.begin(), expected.end(), [](const EntityRef& x, const EntityRef& y) {
    if (x.entity != y.entity) return Bytewise(x.entity, y.entity);
    return Bytewise(x.id, y.id);
  });
  EXPECT_EQ(by_key, expected);
  EXPECT_EQ(by_key.front(), (EntityRef{"a", ""}));
  EXPECT_EQ(by_key.back(), (EntityRef{"b", "0"}));

  // A scan of entity "a" covers all of a's keys and none of "ab"'s or "aa"'s.
  const std::string scan = ProjectionScanPrefix(1, "a");
  for (const EntityRef& r : refs) {
    EXPECT_EQ(ProjectionKey(1, r).starts_with(scan), r.entity == "a") << r.entity << "/" << r.id;
    EXPECT_TRUE(ProjectionKey(1, r).starts_with(ProjectionScanPrefix(1, "")));
  }
}

TEST(storage_key_codec, GenerationsDoNotInterleave) {
  // Generations in order, across each width of their encoding (239 < 240
  // < 255 < 256 < 65536), and each generation's keys form one range under
  // its prefix, whatever family or entity.
  const std::vector<uint32_t> gens = {1, 2, 47, 239, 240, 255, 256, 65536, UINT32_MAX};
  const EntityRef ref{"receipt", "\xff\xff"};
  const FoldKey fk{std::numeric_limits<int64_t>::max(), std::numeric_limits<int64_t>::max(),
                   UINT32_MAX, "zzz"};
  for (size_t i = 0; i < gens.size(); ++i) {
    const std::string prefix = GenerationPrefix(gens[i]);
    for (const std::string& k : {LogKey(gens[i], ref, fk), ProjectionKey(gens[i], ref),
                                 SnapshotKey(gens[i], ref, fk), LogFamilyPrefix(gens[i])}) {
      EXPECT_TRUE(k.starts_with(prefix));
      for (size_t j = 0; j < gens.size(); ++j) {
        if (j == i) continue;
        EXPECT_FALSE(k.starts_with(GenerationPrefix(gens[j])));
        EXPECT_EQ(i < j, Bytewise(k, GenerationPrefix(gens[j]))) << gens[i] << " vs " << gens[j];
      }
    }
  }
  // Generation keys stay out of every other family.
  for (std::string_view other :
       {kMetaPrefix, kEventPrefix, kDedupPrefix, kConflictPrefix, kQuarantinePrefix}) {
    EXPECT_FALSE(GenerationPrefix(1).starts_with(other));
  }
}

// Each family's keys start with its FamilyPrefix, and which families are
// live follows the two generations: logs and unrouted index of the log
// generation, projections and snapshots of the projection generation.
TEST(storage_key_codec, FamiliesLiveUnderTheirGeneration) {
  const EntityRef ref{"receipt", "r/1"};
  const FoldKey fk{-5, 3, 1, "evt_1"};
  EXPECT_TRUE(LogKey(7, ref, fk).starts_with(FamilyPrefix(7, kLogFamily)));
  EXPECT_TRUE(ProjectionKey(7, ref).starts_with(FamilyPrefix(7, kProjectionFamily)));
  EXPECT_TRUE(SnapshotKey(7, ref, fk).starts_with(FamilyPrefix(7, kSnapshotFamily)));
  EXPECT_TRUE(UnroutedKey(7, 42).starts_with(FamilyPrefix(7, kUnroutedFamily)));
  const Generations shared{3, 3}, split{5, 3};
  for (std::string_view f : kGenerationFamilies) {
    EXPECT_TRUE(IsLiveFamily(shared, 3, f)) << f;
    EXPECT_FALSE(IsLiveFamily(shared, 4, f)) << f;
    EXPECT_FALSE(IsLiveFamily(split, 4, f)) << f;
    const bool logs = f == kLogFamily || f == kUnroutedFamily;
    EXPECT_EQ(IsLiveFamily(split, 3, f), logs) << f;
    EXPECT_EQ(IsLiveFamily(split, 5, f), !logs) << f;
  }
  EXPECT_FALSE(IsLiveFamily(shared, 3, "x/"));
}

TEST(storage_key_codec, ParseRoundTrips) {
  const uint64_t seed = TestSeed("ParseRoundTrips", 99);
  std::mt19937_64 rng(seed);
  for (int i = 0; i < 500; ++i) {
    const uint64_t seq = rng() >> (rng() % 64);
    EXPECT_EQ(ParseSeqKey(EventKey(seq), kEventPrefix), seq);
    EXPECT_EQ(ParseSeqKey(ConflictKey(seq), kConflictPrefix), seq);
    EXPECT_EQ(ParseSeqKey(QuarantineKey(seq), kQuarantinePrefix), seq);
    // An id of arbitrary non-NUL bytes.
    std::string id(1 + rng() % 20, 'x');
    for (char& c : id) c = static_cast<char>(1 + rng() % 255);
    const EntityRef ref{"ent_" + std::to_string(rng() % 5), id};
    const uint32_t gen = static_cast<uint32_t>(rng());
    EXPECT_EQ(ParseProjectionKey(ProjectionKey(gen, ref)), ref);
    const FoldKey fold = RandomFoldKey(rng);
    for (const std::string& k : {LogKey(gen, ref, fold), SnapshotKey(gen, ref, fold)}) {
      auto log = ParseLogKey(k);
      ASSERT_TRUE(log.has_value());
      EXPECT_EQ(log->first, ref);
      EXPECT_EQ(log->second, fold);
    }
  }
  // Generations whose bytes are NUL or '/' still parse.
  for (uint32_t gen : {0u, 0x2f2f2f2fu, 0x00002f00u}) {
    EXPECT_EQ(ParseProjectionKey(ProjectionKey(gen, {"receipt", "r"})),
              (EntityRef{"receipt", "r"}));
    EXPECT_EQ(ParseLogKey(LogKey(gen, {"receipt", "r"}, FoldKey{}))->first,
              (EntityRef{"receipt", "r"}));
  }
}

TEST(storage_key_codec, ParseRefusesMalformedKeys) {
  EXPECT_FALSE(ParseSeqKey(EventKey(5), kConflictPrefix).has_value());     // wrong family
  EXPECT_FALSE(ParseSeqKey("a/1234567", kEventPrefix).has_value());        // too short
  EXPECT_FALSE(ParseSeqKey(EventKey(5) + "x", kEventPrefix).has_value());  // too long
  EXPECT_FALSE(ParseSeqKey("", kEventPrefix).has_value());
  const EntityRef ref{"receipt", "r1"};
  EXPECT_FALSE(ParseProjectionKey(GenerationPrefix(1) + "p/receipt").has_value());  // no NUL
  EXPECT_FALSE(ParseProjectionKey(std::string("p/receipt\0r1", 12)).has_value());   // no gen
  EXPECT_FALSE(ParseProjectionKey("").has_value());
  // A log or snapshot key is not a projection key, nor the other way round.
  EXPECT_FALSE(ParseProjectionKey(LogKey(1, ref, FoldKey{})).has_value());
  EXPECT_FALSE(ParseProjectionKey(SnapshotKey(1, ref, FoldKey{})).has_value());
  EXPECT_FALSE(ParseLogKey(ProjectionKey(1, ref)).has_value());
  EXPECT_FALSE(ParseLogKey(ProjectionKey(1, ref) + std::string(20, '\0')).has_value());
  // A log key whose fold part is cut short.
  std::string cut = LogKey(1, ref, FoldKey{1, 2, 3, "e"});
  cut.resize(LogPrefix(1, ref).size() + 10);
  EXPECT_FALSE(ParseLogKey(cut).has_value());
  EXPECT_FALSE(ParseLogKey(EventKey(1)).has_value());
  EXPECT_FALSE(ParseLogKey("").has_value());
  EXPECT_FALSE(ParseLogKeyFold(cut).has_value());
  EXPECT_FALSE(ParseLogKeyFold(ProjectionKey(1, ref)).has_value());
  // The views of a log key: its entity, id and still encoded fold key.
  const FoldKey fold{1, 2, 3, "evt_1"};
  const std::string log = LogKey(7, ref, fold);
  std::optional<LogKeyView> parts = SplitLogKey(log);
  ASSERT_TRUE(parts.has_value());
  EXPECT_EQ(parts->entity, "receipt");
  EXPECT_EQ(parts->id, "r1");
  EXPECT_EQ(parts->fold, EncodeFoldKey(fold));
  EXPECT_EQ(ParseLogKeyFold(log), fold);
  EXPECT_FALSE(SplitLogKey(ProjectionKey(1, ref) + std::string(20, '\0')).has_value());
  EXPECT_FALSE(SplitLogKey(GenerationPrefix(1) + "l/receipt").has_value());  // no NUL
}

TEST(storage_key_codec, PrefixEnd) {
  EXPECT_EQ(PrefixEnd("a/"), "a0");
  EXPECT_EQ(PrefixEnd("g/receipt"), "g/receipu");
  EXPECT_EQ(PrefixEnd(std::string("l/r\0", 4)), std::string("l/r\x01", 4));
  EXPECT_EQ(PrefixEnd("a\xff"), "b");
  EXPECT_EQ(PrefixEnd("a\xff\xff"), "b");
  EXPECT_EQ(PrefixEnd("\xff\xff"), "");  // no upper bound
  EXPECT_EQ(PrefixEnd(""), "");

  // Every key with the prefix sorts below the end; the end itself does not
  // start with the prefix.
  const std::vector<std::string> prefixes = {
      "a/", LogPrefix(1, {"receipt", "r1"}), GenerationPrefix(0xFFFFFFFF),
      ProjectionScanPrefix(7, "a"), GenerationPrefix(0x000000FF)};
  for (const std::string& prefix : prefixes) {
    const std::string end = PrefixEnd(prefix);
    for (const std::string& suffix :
         {std::string(), std::string("\0", 1), std::string("\xff\xff\xff"), std::string("zz")}) {
      EXPECT_TRUE(Bytewise(prefix + suffix, end));
    }
    EXPECT_FALSE(end.starts_with(prefix));
    EXPECT_TRUE(Bytewise(prefix, end));
  }
}

}  // namespace
}  // namespace eventfold::storage
