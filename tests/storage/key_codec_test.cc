// Tests of storage/key_codec: the key grammar and the orders LevelDB's
// bytewise comparator gives it.

#include "storage/key_codec.h"

#include <algorithm>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "tests/storage/storage_test_util.h"

namespace eventfold::storage {
namespace {

using storage_test::TestSeed;

// LevelDB's default comparator: unsigned bytewise.
bool Bytewise(const std::string& a, const std::string& b) {
  return std::lexicographical_compare(
      a.begin(), a.end(), b.begin(), b.end(),
      [](char x, char y) { return static_cast<unsigned char>(x) < static_cast<unsigned char>(y); });
}

TEST(KeyCodecTest, FamiliesHaveTheirPrefixes) {
  EXPECT_EQ(MetaKey("profile"), "m/profile");
  EXPECT_EQ(DedupKey("evt_1"), "d/evt_1");
  EXPECT_EQ(EventKey(1), std::string("a/\0\0\0\0\0\0\0\x01", 10));
  EXPECT_EQ(ConflictKey(0x0102030405060708ull), std::string("c/\x01\x02\x03\x04\x05\x06\x07\x08", 10));
  EXPECT_EQ(LogPrefix({"receipt", "r1"}), std::string("l/receipt\0r1\0", 13));
  EXPECT_EQ(LogKey({"receipt", "r1"}, 258),
            std::string("l/receipt\0r1\0\0\0\0\0\0\0\x01\x02", 21));
  EXPECT_EQ(ProjectionKey({"receipt", "r1"}), std::string("p/receipt\0r1", 12));
  EXPECT_EQ(ProjectionScanPrefix(""), "p/");
  EXPECT_EQ(ProjectionScanPrefix("receipt"), std::string("p/receipt\0", 10));
}

TEST(KeyCodecTest, SeqKeysSortNumerically) {
  const uint64_t seed = TestSeed("SeqKeysSortNumerically", 20261129);
  std::mt19937_64 rng(seed);
  std::vector<uint64_t> seqs = {0, 1, 2, 255, 256, 257, 65535, 65536, 1ull << 32,
                                (1ull << 56) - 1, 1ull << 56, UINT64_MAX - 1, UINT64_MAX};
  for (int i = 0; i < 2000; ++i) {
    // Mix magnitudes so numeric and naive little-endian/text orders disagree.
    seqs.push_back(rng() >> (rng() % 64));
  }
  for (size_t i = 0; i < seqs.size(); ++i) {
    for (size_t j = i + 1; j < std::min(seqs.size(), i + 40); ++j) {
      const uint64_t a = seqs[i], b = seqs[j];
      EXPECT_EQ(a < b, Bytewise(EventKey(a), EventKey(b))) << a << " vs " << b;
      EXPECT_EQ(a < b, Bytewise(ConflictKey(a), ConflictKey(b))) << a << " vs " << b;
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

TEST(KeyCodecTest, LogKeysOfOneEntityAreContiguousAndInSeqOrder) {
  const uint64_t seed = TestSeed("LogKeysOfOneEntityAreContiguousAndInSeqOrder", 7);
  std::mt19937_64 rng(seed);
  // Entities chosen to be prefixes of each other, with ids that are too.
  const std::vector<EntityRef> refs = {
      {"a", "b"},  {"a", "bc"}, {"a", "b0"},   {"ab", "b"},  {"ab", ""},
      {"a", "a"},  {"a", "\x01"}, {"a", "\xff"}, {"b", "b"}, {"a", "b\xff"},
  };
  struct Item {
    std::string key;
    size_t ref;
    uint64_t seq;
  };
  std::vector<Item> items;
  for (int i = 0; i < 1000; ++i) {
    const size_t r = rng() % refs.size();
    const uint64_t seq = rng() >> (rng() % 64);
    items.push_back({LogKey(refs[r], seq), r, seq});
  }
  std::sort(items.begin(), items.end(),
            [](const Item& x, const Item& y) { return Bytewise(x.key, y.key); });
  // Contiguous: once an entity's run ends it never reappears.
  std::vector<bool> done(refs.size(), false);
  for (size_t i = 0; i < items.size(); ++i) {
    const Item& it = items[i];
    ASSERT_FALSE(done[it.ref]) << "log of " << refs[it.ref].entity << "/"
                               << refs[it.ref].id << " is not contiguous";
    if (i > 0 && items[i - 1].ref == it.ref) {
      EXPECT_LE(items[i - 1].seq, it.seq) << "seq order within one log";
    }
    if (i + 1 == items.size() || items[i + 1].ref != it.ref) done[it.ref] = true;
    // Every entry starts with the entity's prefix, and no other entity's.
    EXPECT_TRUE(it.key.starts_with(LogPrefix(refs[it.ref])));
    for (size_t r = 0; r < refs.size(); ++r) {
      if (r != it.ref) {
        EXPECT_FALSE(it.key.starts_with(LogPrefix(refs[r])));
      }
    }
  }
}

TEST(KeyCodecTest, ProjectionKeysSortByEntityThenIdBytewise) {
  // "a" is a prefix of "ab": with a plain concatenation p/a + "z" would sort
  // after p/ab + "b". The NUL separator keeps (entity, id) order.
  const std::vector<EntityRef> refs = {
      {"ab", "a"}, {"a", "zzz"}, {"a", ""}, {"a", "\xff"}, {"b", "0"},
      {"ab", "\x01"}, {"a", "z"}, {"aa", "x"}, {"a", "za"}, {"a", "Z"},
  };
  std::vector<std::string> keys;
  for (const EntityRef& r : refs) keys.push_back(ProjectionKey(r));
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
  const std::string scan = ProjectionScanPrefix("a");
  for (const EntityRef& r : refs) {
    EXPECT_EQ(ProjectionKey(r).starts_with(scan), r.entity == "a") << r.entity << "/" << r.id;
  }
}

TEST(KeyCodecTest, ParseRoundTrips) {
  const uint64_t seed = TestSeed("ParseRoundTrips", 99);
  std::mt19937_64 rng(seed);
  for (int i = 0; i < 500; ++i) {
    const uint64_t seq = rng() >> (rng() % 64);
    EXPECT_EQ(ParseSeqKey(EventKey(seq), kEventPrefix), seq);
    EXPECT_EQ(ParseSeqKey(ConflictKey(seq), kConflictPrefix), seq);
    // An id of arbitrary non-NUL bytes.
    std::string id(1 + rng() % 20, 'x');
    for (char& c : id) c = static_cast<char>(1 + rng() % 255);
    const EntityRef ref{"ent_" + std::to_string(rng() % 5), id};
    EXPECT_EQ(ParseProjectionKey(ProjectionKey(ref)), ref);
    auto log = ParseLogKey(LogKey(ref, seq));
    ASSERT_TRUE(log.has_value());
    EXPECT_EQ(log->first, ref);
    EXPECT_EQ(log->second, seq);
  }
  // Seqs whose bytes are NUL or contain the separator byte still parse.
  EXPECT_EQ(ParseLogKey(LogKey({"receipt", "r"}, 0))->second, 0u);
  EXPECT_EQ(ParseLogKey(LogKey({"receipt", "r"}, UINT64_MAX))->second, UINT64_MAX);
}

TEST(KeyCodecTest, ParseRefusesMalformedKeys) {
  EXPECT_FALSE(ParseSeqKey(EventKey(5), kConflictPrefix).has_value());  // wrong family
  EXPECT_FALSE(ParseSeqKey("a/1234567", kEventPrefix).has_value());     // too short
  EXPECT_FALSE(ParseSeqKey(EventKey(5) + "x", kEventPrefix).has_value());  // too long
  EXPECT_FALSE(ParseSeqKey("", kEventPrefix).has_value());
  EXPECT_FALSE(ParseProjectionKey("p/receipt").has_value());  // no separator
  EXPECT_FALSE(ParseProjectionKey("x/receipt\0r1").has_value());
  EXPECT_FALSE(ParseProjectionKey(LogKey({"receipt", "r1"}, 1)).has_value());
  EXPECT_FALSE(ParseLogKey("l/short").has_value());
  EXPECT_FALSE(ParseLogKey(ProjectionKey({"receipt", "r1"}) + "12345678").has_value());
  EXPECT_FALSE(ParseLogKey(std::string("l/nosep\0", 8) + "12345678").has_value());
  // The byte before the 8-byte seq must be the NUL that ends the id.
  EXPECT_FALSE(ParseLogKey(std::string("l/receipt\0abcdefghijk", 21)).has_value());
}

TEST(KeyCodecTest, PrefixEnd) {
  EXPECT_EQ(PrefixEnd("a/"), "a0");
  EXPECT_EQ(PrefixEnd("p/receipt"), "p/receipu");
  EXPECT_EQ(PrefixEnd(std::string("l/r\0", 4)), std::string("l/r\x01", 4));
  EXPECT_EQ(PrefixEnd("a\xff"), "b");
  EXPECT_EQ(PrefixEnd("a\xff\xff"), "b");
  EXPECT_EQ(PrefixEnd("\xff\xff"), "");  // no upper bound
  EXPECT_EQ(PrefixEnd(""), "");

  // Every key with the prefix sorts below the end; the end itself does not
  // start with the prefix, and nothing in between lacks it.
  const std::vector<std::string> prefixes = {
      "a/", std::string("l/receipt\0r1\0", 13), "p/\xff", ProjectionScanPrefix("a")};
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
