// Random numbers for seeds, ids and nonces, straight from the kernel (getrandom(2)).
//
// Not std::random_device: libstdc++'s asks the CPU (CPUID) whether it has RDRAND and
// RDSEED each time one is made, and CPUID is a trap to the hypervisor on a virtual
// machine, 3.7 µs each on this project's machines. A back-end made three of them on
// its way up, which was a twentieth of its start-up CPU (docs/benchmarks.md, "A
// back-end's start").
#pragma once

#include <sys/random.h>

#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace canopy::transport {

// Fills `size` bytes at `out`. Blocks only before the kernel's pool is first
// initialised, at boot; aborts if the kernel has no getrandom() (Linux before 3.17),
// as there is then no random source a secret could come from.
inline void random_fill(void* out, std::size_t size) {
  auto* at = static_cast<unsigned char*>(out);
  while (size > 0) {
    const ssize_t got = getrandom(at, size, 0);
    if (got < 0) {
      if (errno == EINTR) continue;
      std::fprintf(stderr, "canopy: no random source (getrandom: %s); a secret or nonce would be guessable\n",
                   std::strerror(errno));
      std::abort();
    }
    at += got;
    size -= static_cast<std::size_t>(got);
  }
}

inline std::uint64_t random_u64() {
  std::uint64_t value;
  random_fill(&value, sizeof value);
  return value;
}

}  // namespace canopy::transport
