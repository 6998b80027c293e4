// CRC-32C against its published check values (RFC 3720 B.4 and the
// Castagnoli check value), and the masking every stored record uses.

#include "core/crc32c.h"

#include <string>

#include <gtest/gtest.h>

namespace eventfold {
namespace {

TEST(Crc32cTest, MatchesPublishedCheckValues) {
  EXPECT_EQ(Crc32c("123456789"), 0xE3069283u);
  EXPECT_EQ(Crc32c(std::string(32, '\0')), 0x8A9136AAu);
  EXPECT_EQ(Crc32c(std::string(32, '\xff')), 0x62A8AB43u);
  std::string ascending;
  for (int i = 0; i < 32; ++i) ascending.push_back(static_cast<char>(i));
  EXPECT_EQ(Crc32c(ascending), 0x46DD794Eu);
  EXPECT_EQ(Crc32c(""), 0u);
}

TEST(Crc32cTest, EveryFlippedBitChangesTheChecksum) {
  const std::string data = "{\"event_id\":\"evt_1\",\"type\":\"receipt.issued\"}";
  const uint32_t crc = Crc32c(data);
  for (size_t i = 0; i < data.size(); ++i) {
    for (int bit = 0; bit < 8; ++bit) {
      std::string flipped = data;
      flipped[i] = static_cast<char>(flipped[i] ^ (1 << bit));
      EXPECT_NE(Crc32c(flipped), crc) << "byte " << i << " bit " << bit;
    }
  }
}

TEST(Crc32cTest, MaskingIsNotTheIdentity) {
  const uint32_t crc = Crc32c("123456789");
  EXPECT_NE(MaskCrc(crc), crc);
  EXPECT_NE(MaskCrc(crc), MaskCrc(crc + 1));
}

}  // namespace
}  // namespace eventfold
