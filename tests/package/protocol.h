// What the package test's front-end and back-ends say to each other: the front-end
// sends kAskTag down a stream; each back-end answers with one int32, its rank + 1.
#pragma once

#include <cstdint>

namespace package_test {

inline constexpr std::int32_t kAskTag = 1;

inline std::int32_t answer(std::uint32_t rank) { return static_cast<std::int32_t>(rank) + 1; }

}  // namespace package_test
