#include "decimal.h"

#include <locale.h>
#include <stdio.h>
#include <stdlib.h>

namespace canopy::topology {
namespace {

// One "C" locale for the process, made once and never freed; none if it cannot be
// made (no memory).
locale_t c_locale() {
  static const locale_t c = newlocale(LC_ALL_MASK, "C", locale_t{});
  return c;
}

}  // namespace

std::optional<double> parse_double(std::string_view text) {
  if (text.empty() || text.find_first_not_of("0123456789.eE+-") != std::string_view::npos) return std::nullopt;
  if (text[0] == '+' || text[0] == 'e' || text[0] == 'E') return std::nullopt;
  const locale_t c = c_locale();
  if (c == locale_t{}) return std::nullopt;
  const std::string copy(text);  // strtod_l reads up to a NUL
  char* end = nullptr;
  const double value = strtod_l(copy.c_str(), &end, c);
  if (end != copy.c_str() + copy.size()) return std::nullopt;
  return value;
}

std::string format_double(double value) {
  // printf's %g in the "C" locale (this thread's, for the call), with ever more
  // digits until they read back as the same double: 17 always do.
  const locale_t c = c_locale();
  const locale_t before = c == locale_t{} ? locale_t{} : uselocale(c);
  char text[40] = "";
  for (int digits = 1; digits <= 17; ++digits) {
    snprintf(text, sizeof text, "%.*g", digits, value);
    if (parse_double(text) == value) break;
  }
  if (before != locale_t{}) uselocale(before);
  return text;
}

}  // namespace canopy::topology
