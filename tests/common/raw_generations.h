// The live generations as a store's raw LevelDB records them (m/generation,
// m/log_generation), for tests that read or write records behind a closed
// store's back.

#ifndef EVENTFOLD_TESTS_COMMON_RAW_GENERATIONS_H_
#define EVENTFOLD_TESTS_COMMON_RAW_GENERATIONS_H_

#include <gtest/gtest.h>
#include <leveldb/db.h>

#include <cstdint>
#include <optional>

#include "storage/key_codec.h"
#include "storage/meta_text.h"

namespace eventfold::test_util {

// The generation recorded in m/<name> ("generation", "log_generation"); 0,
// and a test failure, when it cannot be read.
inline uint32_t RawGeneration(leveldb::DB* db, const char* name = "generation") {
  Result<std::optional<uint64_t>> gen =
      storage::ReadNumber(db, leveldb::ReadOptions(), storage::MetaKey(name));
  EXPECT_TRUE(gen.ok() && gen->has_value()) << name;
  return gen.ok() && gen->has_value() ? static_cast<uint32_t>(**gen) : 0;
}

// Both: projections (m/generation) and logs (m/log_generation).
inline storage::Generations RawGenerations(leveldb::DB* db) {
  return storage::Generations{RawGeneration(db), RawGeneration(db, "log_generation")};
}

}  // namespace eventfold::test_util

#endif  // EVENTFOLD_TESTS_COMMON_RAW_GENERATIONS_H_
