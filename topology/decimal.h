// Decimal numbers written by std::to_chars (or by a person) read back, the same in
// every process whatever its locale.
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace canopy::topology {

// The double `text` writes, read in the "C" locale and rounded correctly, as
// std::from_chars reads it: no leading blank or '+', no hexadecimal, "inf" or
// "nan"; nothing otherwise, or if anything follows the number. Not std::from_chars
// itself: libstdc++ 12's reading of a double calls fesetround(), from libm, which
// this alone would make every lean back-end load (0.3 MB more resident memory;
// cmake/CanopyLean.cmake, docs/benchmarks.md).
std::optional<double> parse_double(std::string_view text);

// The shortest decimal text, in the "C" locale, that parse_double reads back as
// `value` exactly (for a finite value): what std::to_chars(value) writes but for its
// notation ("0.05", "1e-05", "0.30000000000000004"). Not std::to_chars, for the same
// reason.
std::string format_double(double value);

}  // namespace canopy::topology
