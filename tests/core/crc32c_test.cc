// CRC-32C against its published check values (RFC 3720 B.4 and the
// Castagnoli check value), and the masking every stored record uses.

#include "core/crc32c.h"

#include <gtest/gtest.h>

#include <string>

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

// The definition, one bit at a time: what any faster path must agree with.
uint32_t BitwiseCrc32c(std::string_view data) {
  uint32_t crc = 0xFFFFFFFFu;
  for (unsigned char byte : data) {
    crc ^= byte;
    for (int k = 0; k < 8; ++k) crc = (crc & 1) ? (crc >> 1) ^ 0x82F63B78u : crc >> 1;
  }
  return crc ^ 0xFFFFFFFFu;
}

TEST(Crc32cTest, EveryLengthAndAlignmentMatchesTheDefinition) {
  std::string buffer;
  for (int i = 0; i < 80; ++i) buffer.push_back(static_cast<char>(i * 37 + 11));
  for (size_t offset = 0; offset < 8; ++offset) {
    for (size_t length = 0; offset + length <= buffer.size(); ++length) {
      const std::string_view data = std::string_view(buffer).substr(offset, length);
      EXPECT_EQ(Crc32c(data), BitwiseCrc32c(data)) << "offset " << offset << " length " << length;
    }
  }
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
