// Checksums for striped links: CRC-32C and a 32-bit additive sum.
//
// They protect a fragment from main memory to main memory, against the corruption
// in memory and on I/O buses that TCP's own 16-bit checksum (computed by the NIC,
// after the bus) misses. CRC-32C uses the SSE4.2 crc32 instruction where the CPU has
// it (checked at run time) and a table otherwise; both give the same values.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>

namespace canopy::transport {

enum class ChecksumKind : std::uint8_t {
  none = 0,      // trust TCP
  crc32c = 1,    // CRC-32C (Castagnoli): catches every burst error of up to 32 bits
  additive = 2,  // sum of 32-bit words: cheaper, weaker (misses reordered words)
};

std::string_view to_string(ChecksumKind kind);
// "none", "crc32c", "additive"; nothing for anything else.
std::optional<ChecksumKind> parse_checksum_kind(std::string_view name);

// CRC-32C as in iSCSI and ext4 (reflected polynomial 0x82F63B78, initial and final
// value all ones): crc32c(0, "123456789", 9) == 0xE3069283. `crc` is an earlier
// result to continue from, 0 to start: crc32c(crc32c(0, a), b) == crc32c(0, a ‖ b).
std::uint32_t crc32c(std::uint32_t crc, const void* data, std::size_t size);
// The table implementation (slicing by 8), on every CPU.
std::uint32_t crc32c_portable(std::uint32_t crc, const void* data, std::size_t size);
// The SSE4.2 implementation (three interleaved streams on long inputs). Only call it
// when crc32c_hardware_available().
std::uint32_t crc32c_hardware(std::uint32_t crc, const void* data, std::size_t size);
bool crc32c_hardware_available();

// Sum of the data's 32-bit little-endian words modulo 2^32, the last partial word
// padded with zeros; `sum` is an earlier result to continue from, at a multiple of 4
// bytes only.
std::uint32_t additive32(std::uint32_t sum, const void* data, std::size_t size);

// The checksum of `kind` over the data; always 0 for none.
std::uint32_t checksum(ChecksumKind kind, const void* data, std::size_t size);

// Copies `size` bytes and returns their checksum, in one pass over memory: what the
// paper calls generating the checksum at the same time the data is copied. The
// ranges must not overlap.
std::uint32_t copy_and_checksum(ChecksumKind kind, void* dst, const void* src, std::size_t size);

}  // namespace canopy::transport
