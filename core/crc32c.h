// CRC-32C (Castagnoli), the checksum every stored record carries.
// Pure functions; thread-safe.

#ifndef EVENTFOLD_CORE_CRC32C_H_
#define EVENTFOLD_CORE_CRC32C_H_

#include <cstdint>
#include <string_view>

namespace eventfold {

uint32_t Crc32c(std::string_view data);

// A CRC stored next to the data it covers is masked (as LevelDB does), so
// that checksumming a buffer that embeds checksums stays well distributed.
inline uint32_t MaskCrc(uint32_t crc) { return ((crc >> 15) | (crc << 17)) + 0xa282ead8u; }

}  // namespace eventfold

#endif  // EVENTFOLD_CORE_CRC32C_H_
