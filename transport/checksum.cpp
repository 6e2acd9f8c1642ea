#include "transport/checksum.h"

#include <array>
#include <bit>
#include <cstring>

#if defined(__x86_64__)
#include <nmmintrin.h>
#define CANOPY_HAVE_SSE42_PATH 1
// glibc (2.33 and later) says what the CPU has from what its loader found at start.
// __builtin_cpu_supports would link libgcc's own probe, which runs in every process
// before main() and asks the CPU again (a dozen CPUIDs, each a trap to the
// hypervisor on a virtual machine; docs/benchmarks.md, "A back-end's start").
// glibc's header is C (`_Bool`), which GCC's C++ accepts and clang's does not: a
// clang build (the fuzzers) asks the compiler's runtime instead.
#if __has_include(<sys/platform/x86.h>) && !defined(__clang__)
#include <sys/platform/x86.h>
#define CANOPY_CPU_HAS_SSE42() CPU_FEATURE_ACTIVE(SSE4_2)
#else
#define CANOPY_CPU_HAS_SSE42() (__builtin_cpu_init(), __builtin_cpu_supports("sse4.2"))
#endif
#endif

namespace canopy::transport {

static_assert(std::endian::native == std::endian::little, "checksums read little-endian words");

namespace {

constexpr std::uint32_t kPolynomial = 0x82F63B78u;  // CRC-32C, bit-reflected
using Table = std::array<std::array<std::uint32_t, 256>, 8>;

// kTable[0] is the byte-at-a-time table; kTable[k][b] is the register after byte b
// followed by k zero bytes, which slicing by 8 needs.
constexpr Table make_table() {
  Table t{};
  for (std::uint32_t b = 0; b < 256; ++b) {
    std::uint32_t c = b;
    for (int k = 0; k < 8; ++k) c = (c & 1) ? (c >> 1) ^ kPolynomial : c >> 1;
    t[0][b] = c;
  }
  for (std::size_t k = 1; k < 8; ++k) {
    for (std::uint32_t b = 0; b < 256; ++b) t[k][b] = (t[k - 1][b] >> 8) ^ t[0][t[k - 1][b] & 0xff];
  }
  return t;
}
constexpr Table kTable = make_table();

std::uint64_t load64(const unsigned char* p) {
  std::uint64_t w;
  std::memcpy(&w, p, 8);
  return w;
}

// The "raw" functions update the CRC register, without the initial and final
// inversion that crc32c() applies.
std::uint32_t portable_raw(std::uint32_t c, const unsigned char* p, std::size_t n) {
  while (n > 0 && (reinterpret_cast<std::uintptr_t>(p) & 7) != 0) {
    c = kTable[0][(c ^ *p++) & 0xff] ^ (c >> 8);
    --n;
  }
  for (; n >= 8; n -= 8, p += 8) {
    std::uint64_t w = load64(p) ^ c;
    c = kTable[7][w & 0xff] ^ kTable[6][(w >> 8) & 0xff] ^ kTable[5][(w >> 16) & 0xff] ^
        kTable[4][(w >> 24) & 0xff] ^ kTable[3][(w >> 32) & 0xff] ^ kTable[2][(w >> 40) & 0xff] ^
        kTable[1][(w >> 48) & 0xff] ^ kTable[0][w >> 56];
  }
  while (n-- > 0) c = kTable[0][(c ^ *p++) & 0xff] ^ (c >> 8);
  return c;
}

#ifdef CANOPY_HAVE_SSE42_PATH

// Feeding `len` zero bytes into the register is linear over GF(2), so it is four
// table look-ups, one per byte of the register. This is what lets three streams over
// consecutive blocks be computed independently (hiding the crc32 instruction's
// three-cycle latency) and then combined: reg(A‖B, c) = zeros_|B|(reg(A, c)) ^ reg(B, 0).
struct ZeroShift {
  std::array<std::array<std::uint32_t, 256>, 4> t;
  std::uint32_t operator()(std::uint32_t c) const {
    return t[0][c & 0xff] ^ t[1][(c >> 8) & 0xff] ^ t[2][(c >> 16) & 0xff] ^ t[3][c >> 24];
  }
};

ZeroShift make_zero_shift(std::size_t len) {
  std::array<std::uint32_t, 32> basis;
  for (int bit = 0; bit < 32; ++bit) {
    std::uint32_t c = 1u << bit;
    for (std::size_t i = 0; i < len; ++i) c = kTable[0][c & 0xff] ^ (c >> 8);
    basis[bit] = c;
  }
  ZeroShift shift{};
  for (int byte = 0; byte < 4; ++byte) {
    for (std::uint32_t v = 0; v < 256; ++v) {
      std::uint32_t c = 0;
      for (int k = 0; k < 8; ++k) {
        if (v & (1u << k)) c ^= basis[8 * byte + k];
      }
      shift.t[byte][v] = c;
    }
  }
  return shift;
}

constexpr std::size_t kLongBlock = 8192;  // three of these per round on long inputs
constexpr std::size_t kShortBlock = 256;  // then of these

struct ZeroShifts {
  ZeroShift long_block = make_zero_shift(kLongBlock);
  ZeroShift short_block = make_zero_shift(kShortBlock);
};

const ZeroShifts& zero_shifts() {
  static const ZeroShifts shifts;
  return shifts;
}

template <bool Copy, std::size_t Block>
__attribute__((target("sse4.2"))) std::uint32_t interleaved(std::uint32_t c, unsigned char*& dst,
                                                            const unsigned char*& p, std::size_t& n,
                                                            const ZeroShift& zeros) {
  while (n >= 3 * Block) {
    std::uint64_t c0 = c, c1 = 0, c2 = 0;
    for (std::size_t i = 0; i < Block; i += 8) {
      std::uint64_t a = load64(p + i), b = load64(p + Block + i), d = load64(p + 2 * Block + i);
      if constexpr (Copy) {
        std::memcpy(dst + i, &a, 8);
        std::memcpy(dst + Block + i, &b, 8);
        std::memcpy(dst + 2 * Block + i, &d, 8);
      }
      c0 = _mm_crc32_u64(c0, a);
      c1 = _mm_crc32_u64(c1, b);
      c2 = _mm_crc32_u64(c2, d);
    }
    c = zeros(zeros(static_cast<std::uint32_t>(c0)) ^ static_cast<std::uint32_t>(c1)) ^
        static_cast<std::uint32_t>(c2);
    p += 3 * Block;
    if constexpr (Copy) dst += 3 * Block;
    n -= 3 * Block;
  }
  return c;
}

template <bool Copy>
__attribute__((target("sse4.2"))) std::uint32_t hardware_raw(std::uint32_t c, unsigned char* dst,
                                                             const unsigned char* p, std::size_t n) {
  while (n > 0 && (reinterpret_cast<std::uintptr_t>(p) & 7) != 0) {
    if constexpr (Copy) *dst++ = *p;
    c = _mm_crc32_u8(c, *p++);
    --n;
  }
  if (n >= 3 * kShortBlock) {
    const auto& shifts = zero_shifts();
    c = interleaved<Copy, kLongBlock>(c, dst, p, n, shifts.long_block);
    c = interleaved<Copy, kShortBlock>(c, dst, p, n, shifts.short_block);
  }
  std::uint64_t c64 = c;
  for (; n >= 8; n -= 8, p += 8) {
    std::uint64_t w = load64(p);
    if constexpr (Copy) {
      std::memcpy(dst, &w, 8);
      dst += 8;
    }
    c64 = _mm_crc32_u64(c64, w);
  }
  c = static_cast<std::uint32_t>(c64);
  while (n-- > 0) {
    if constexpr (Copy) *dst++ = *p;
    c = _mm_crc32_u8(c, *p++);
  }
  return c;
}

#endif  // CANOPY_HAVE_SSE42_PATH

template <bool Copy>
std::uint32_t additive_raw(std::uint32_t sum, unsigned char* dst, const unsigned char* p, std::size_t n) {
  // Summing 64-bit words: the low halves' sum mod 2^32 is the low half of the 64-bit
  // sum, and the high halves are summed separately.
  std::uint64_t low = 0, high = 0;
  for (; n >= 8; n -= 8, p += 8) {
    std::uint64_t w = load64(p);
    if constexpr (Copy) {
      std::memcpy(dst, &w, 8);
      dst += 8;
    }
    low += w;
    high += w >> 32;
  }
  sum += static_cast<std::uint32_t>(low) + static_cast<std::uint32_t>(high);
  if (n > 0) {
    if constexpr (Copy) std::memcpy(dst, p, n);
    if (n >= 4) {
      std::uint32_t w;
      std::memcpy(&w, p, 4);
      sum += w;
      p += 4;
      n -= 4;
    }
    std::uint32_t w = 0;
    std::memcpy(&w, p, n);
    sum += w;
  }
  return sum;
}

}  // namespace

std::string_view to_string(ChecksumKind kind) {
  switch (kind) {
    case ChecksumKind::none: return "none";
    case ChecksumKind::crc32c: return "crc32c";
    case ChecksumKind::additive: return "additive";
  }
  return "unknown";
}

std::optional<ChecksumKind> parse_checksum_kind(std::string_view name) {
  if (name == "none") return ChecksumKind::none;
  if (name == "crc32c") return ChecksumKind::crc32c;
  if (name == "additive") return ChecksumKind::additive;
  return std::nullopt;
}

bool crc32c_hardware_available() {
#ifdef CANOPY_HAVE_SSE42_PATH
  static const bool available = CANOPY_CPU_HAS_SSE42() != 0;
  return available;
#else
  return false;
#endif
}

std::uint32_t crc32c_portable(std::uint32_t crc, const void* data, std::size_t size) {
  return ~portable_raw(~crc, static_cast<const unsigned char*>(data), size);
}

std::uint32_t crc32c_hardware(std::uint32_t crc, const void* data, std::size_t size) {
#ifdef CANOPY_HAVE_SSE42_PATH
  return ~hardware_raw<false>(~crc, nullptr, static_cast<const unsigned char*>(data), size);
#else
  return crc32c_portable(crc, data, size);
#endif
}

std::uint32_t crc32c(std::uint32_t crc, const void* data, std::size_t size) {
  return crc32c_hardware_available() ? crc32c_hardware(crc, data, size) : crc32c_portable(crc, data, size);
}

std::uint32_t additive32(std::uint32_t sum, const void* data, std::size_t size) {
  return additive_raw<false>(sum, nullptr, static_cast<const unsigned char*>(data), size);
}

std::uint32_t checksum(ChecksumKind kind, const void* data, std::size_t size) {
  switch (kind) {
    case ChecksumKind::none: return 0;
    case ChecksumKind::crc32c: return crc32c(0, data, size);
    case ChecksumKind::additive: return additive32(0, data, size);
  }
  return 0;
}

std::uint32_t copy_and_checksum(ChecksumKind kind, void* dst, const void* src, std::size_t size) {
  auto* out = static_cast<unsigned char*>(dst);
  const auto* in = static_cast<const unsigned char*>(src);
  switch (kind) {
    case ChecksumKind::none:
      if (size > 0) std::memcpy(out, in, size);
      return 0;
    case ChecksumKind::crc32c:
#ifdef CANOPY_HAVE_SSE42_PATH
      if (crc32c_hardware_available()) return ~hardware_raw<true>(~0u, out, in, size);
#endif
      if (size > 0) std::memcpy(out, in, size);
      return crc32c_portable(0, in, size);
    case ChecksumKind::additive: return additive_raw<true>(0, out, in, size);
  }
  return 0;
}

}  // namespace canopy::transport
