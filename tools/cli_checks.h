// Checks of the command lines' numeric options, with messages for people: CLI11's own
// Range says "Value abc not in range 1 to 100000000" for a word, and prints its
// bounds as 0.000000.
#pragma once

#include <CLI/CLI.hpp>

#include <charconv>
#include <sstream>
#include <string>
#include <type_traits>

namespace canopy::tools {

// Accepts a number of type T (an integer type: no fraction) within [min, max].
template <typename T>
CLI::Validator in_range(T min, T max) {
  static_assert(std::is_arithmetic_v<T>);
  std::ostringstream bounds;
  bounds << min << " to " << max;
  return CLI::Validator(
      [min, max, range = bounds.str()](std::string& input) -> std::string {
        T value{};
        const char* end = input.data() + input.size();
        auto [stop, error] = std::from_chars(input.data(), end, value);
        if (input.empty() || error == std::errc::invalid_argument || stop != end) {
          return "'" + input + "' is not " + (std::is_integral_v<T> ? "a whole number" : "a number") + " (" + range + ")";
        }
        if (error == std::errc::result_out_of_range || value < min || value > max) {
          return input + " is out of range (" + range + ")";
        }
        return {};
      },
      "in " + bounds.str());
}

}  // namespace canopy::tools
